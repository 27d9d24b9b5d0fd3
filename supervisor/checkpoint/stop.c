/* Stopping every thread of the chosen processes for a checkpoint, and
 * resuming them (supervisor/checkpoint/job.h). */
#include "supervisor/checkpoint/job.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/supervise/tree.h"

#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

/* ---- stopping --------------------------------------------------------- */

static struct cproc *find_proc(struct ckpt *c, pid_t pid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i].pt.pid == pid)
			return &c->p[i];
	return NULL;
}

/* Has the process gone (killed while stopped: only SIGKILL ends a
 * stopped process)? Its mm may be torn down (process_vm_readv: ESRCH)
 * before the thread turns zombie, so any of the signs will do. */
bool ckpt_proc_dead(const struct cproc *p)
{
	if (p->pt.pidfd >= 0) {
		struct pollfd pfd = {.fd = p->pt.pidfd, .events = POLLIN};
		if (poll(&pfd, 1, 0) > 0)
			return true;
	}
	struct proc_stat st;
	return procfs_task_stat(p->tid, 0, &st) < 0 || st.state == 'Z' || st.state == 'X';
}

/* Every process of the tree (tree_tops) that we do not hold
 * yet: a process forked by a thread before it stopped shows up here, once the parent
 * stopped (copy_process links the child before the parent returns). */
static size_t discover(struct ckpt *c)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0, added = 0;
	tree_tops(c->mv, &v, &n, &cap);
	for (size_t i = 0; i < n; i++)
		procfs_children(v[i], &v, &n, &cap);
	for (size_t i = 0; i < n; i++) {
		if (find_proc(c, v[i]))
			continue;
		int fd = (int)syscall(SYS_pidfd_open, v[i], 0);
		if (fd < 0 && errno == ESRCH)
			continue;
		ckpt_add_proc(c, v[i], fd, false);
		added++;
	}
	free(v);
	return added;
}

static int seize_round(struct ckpt *c, size_t *fresh)
{
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (p->pt.gone)
			continue;
		int r = ptrace_seize_new(&p->pt);
		if (r == -ESRCH) {
			if (ckpt_proc_lost(c, p) < 0)
				return -ESRCH;
			continue;
		}
		if (r < 0)
			return ckpt_fail(c, r, r == -EPERM ? MV_E_PERMISSION : MV_E_INTERNAL,
					 "cannot stop process %d with ptrace: %s", p->pt.pid,
					 strerror(-r));
		*fresh += (size_t)r;
	}
	return 0;
}

static int stop_timeout(struct ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct ptrace_thread *t = ptrace_laggard(&c->p[i].pt);
		if (!t)
			continue;
		char why[160];
		ptrace_describe_thread(c->p[i].pt.pid, t->tid, why, sizeof(why));
		return ckpt_fail(c, -ETIMEDOUT, MV_E_TIMEOUT,
				 "thread %d of process %d did not stop within %d ms (%s)", t->tid,
				 c->p[i].pt.pid, c->req->stop_timeout_ms, why);
	}
	return 0;
}

/* Wait until every seized thread has stopped, exited, or is a blocked
 * vfork parent. Polling: a ptrace stop is reported to the tracer only by
 * wait (and a SIGCHLD that the main thread's signalfd takes). */
/* Processes whose every thread is stopped: a vfork parent of one of
 * them cannot run. */
static size_t fully_stopped(struct ckpt *c, pid_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n; i++)
		if (!c->p[i].pt.gone && !ptrace_laggard(&c->p[i].pt) &&
		    ptrace_stopped_count(&c->p[i].pt))
			out[n++] = c->p[i].pt.pid;
	return n;
}

static void classify_laggards(struct ckpt *c, uint64_t now)
{
	pid_t *stopped = NULL;
	size_t n = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct ptrace_proc *pp = &c->p[i].pt;
		for (size_t k = 0; !pp->gone && k < pp->n; k++) {
			struct ptrace_thread *t = &pp->t[k];
			if (t->state != PT_SEIZED || now - t->interrupt_ns < VFORK_CHECK_NS)
				continue;
			if (!stopped) {
				stopped = xcalloc(c->n + 1, sizeof(*stopped));
				n = fully_stopped(c, stopped);
			}
			ptrace_classify_laggard(pp, t, stopped, n);
		}
	}
	free(stopped);
}

static int wait_round(struct ckpt *c, uint64_t deadline)
{
	uint64_t nap = 20 * 1000;
	for (;;) {
		size_t waiting = 0;
		uint64_t now = mv_now_ns();
		for (size_t i = 0; i < c->n; i++) {
			if (c->p[i].pt.gone)
				continue;
			waiting += ptrace_poll_stops(&c->p[i].pt);
			ptrace_reinterrupt(&c->p[i].pt, now, REINTERRUPT_NS);
		}
		if (waiting) {
			classify_laggards(c, now);
			waiting = 0;
			for (size_t i = 0; i < c->n; i++)
				waiting += !c->p[i].pt.gone && ptrace_laggard(&c->p[i].pt);
		}
		if (!waiting)
			return 0;
		if (now > deadline)
			return stop_timeout(c);
		struct timespec ts = {0, (long)nap};
		nanosleep(&ts, NULL);
		nap = MV_MIN(nap * 2, 1000 * 1000);
	}
}

static int stop_all(struct ckpt *c);

int ckpt_stop_all(struct ckpt *c)
{
	int rc = ptrace_guard_start();
	if (rc < 0)
		log_job_warn(
		    "checkpoint: no seize guard (%s): an exec during the stop may hold it up",
		    strerror(-rc));
	rc = stop_all(c);
	ptrace_guard_stop();
	return rc;
}

static int stop_all(struct ckpt *c)
{
	job_progress(c->j, "stopping", 0, 0);
	uint64_t deadline = mv_now_ns() + (uint64_t)c->req->stop_timeout_ms * 1000000ull;
	uint64_t t0 = mv_now_ns(), td = 0, ts = 0, tw = 0;
	if (c->req->all)
		discover(c);
	td = mv_now_ns() - t0;
	for (;;) {
		size_t fresh = 0;
		uint64_t a = mv_now_ns();
		int rc = seize_round(c, &fresh);
		if (rc < 0)
			return rc;
		uint64_t b = mv_now_ns();
		ts += b - a;
		if (c->req->all)
			fresh += discover(c);
		uint64_t d = mv_now_ns();
		td += d - b;
		if ((rc = wait_round(c, deadline)) < 0)
			return rc;
		tw += mv_now_ns() - d;
		if (!fresh)
			break;
	}
	log_debug("checkpoint: stop: discover %.2f ms, seize %.2f ms, wait %.2f ms",
		  (double)td / 1e6, (double)ts / 1e6, (double)tw / 1e6);
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (!p->pt.gone)
			ptrace_check_identity(&p->pt);
		if (p->pt.gone && ckpt_proc_lost(c, p) < 0)
			return -ESRCH;
	}
	if (!c->stopped_again)
		c->t_stopped = mv_now_ns();
	return 0;
}

/* ---- resuming ----------------------------------------------------------- */

void ckpt_resume_all(struct ckpt *c)
{
	/* Stopped threads first: a vfork parent we could not stop moves
	 * only once its child runs again. */
	for (size_t i = 0; i < c->n; i++)
		ptrace_detach_stopped(&c->p[i].pt);
	uint64_t deadline = mv_now_ns() + 200 * 1000000ull;
	for (size_t i = 0; i < c->n; i++)
		ptrace_detach_rest(&c->p[i].pt, deadline);
	if (!c->stopped_again)
		c->t_resumed = mv_now_ns();
	for (size_t i = 0; i < c->n; i++) {
		struct ptrace_proc *pp = &c->p[i].pt;
		if (!pp->first_interrupt_ns)
			continue;
		if (c->stopped_again) {
			c->again_end = MV_MAX(c->again_end, pp->last_detach_ns);
			continue;
		}
		if (!c->pause_start || pp->first_interrupt_ns < c->pause_start)
			c->pause_start = pp->first_interrupt_ns;
		uint64_t end = MV_MAX(pp->last_detach_ns, pp->first_interrupt_ns);
		c->pause_end = MV_MAX(c->pause_end, end);
		if (c->p[i].img >= 0)
			ckpt_iproc(c, i)->pause_ns = end - pp->first_interrupt_ns;
	}
}
