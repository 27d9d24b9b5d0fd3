/* The mark's tracer thread (supervisor/rollback/hold.h). While it holds
 * the program, the thread looks every 20 ms for threads that died (a SIGKILL wakes a stopped
 * tracee; its exit is reported to the tracer first, and the program's parent sees it only once the
 * tracer has waited for it). */
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/rollback/hold.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

struct rb_hold {
	struct mv *mv;
	pid_t pid;
	char name[64];
	bool *holding; /* the caller's, under mv->lock */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	rb_work_fn *work;
	struct job *job;
	void *arg;
	int rc;
	bool posted, done, quit, release;
	bool async; /* the posted work is a job's run, ended with job_ran */
	/* The thread's own: */
	bool held;
	bool leftover; /* tracees not reaped or detached after a let-go */
	struct ckpt c;
	struct checkpoint_req req;
};

static void set_holding(struct rb_hold *h, bool on)
{
	h->held = on;
	pthread_mutex_lock(&h->mv->lock);
	*h->holding = on;
	pthread_mutex_unlock(&h->mv->lock);
}

/* Every held thread that died since: gone. When none of the marked
 * process (the first) is left, the process is: let go of what is held
 * (the rest of a tree runs on; the next rollback says what ended). */
static void reap_dead(struct rb_hold *h)
{
	size_t alive = 0;
	for (size_t k = 0; k < h->c.n; k++) {
		if (k == 1 && !alive)
			break;
		struct ptrace_proc *pp = &h->c.p[k].pt;
		for (size_t i = 0; i < pp->n; i++) {
			struct ptrace_thread *t = &pp->t[i];
			if (t->state == PT_GONE || t->state == PT_DETACHED)
				continue;
			int status;
			pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
			if ((r == t->tid && (WIFEXITED(status) || WIFSIGNALED(status))) ||
			    (r < 0 && errno == ECHILD))
				t->state = PT_GONE;
			else
				alive++;
		}
	}
	if (!alive) {
		log_info("mark %s: process %d died while held", h->name, h->pid);
		rb_hold_let_go(h);
	}
}

/* After a let-go, what is still ours: a thread killed while stopped
 * (its exit reaches the program's parent only once its tracer waited for
 * it), or one that had not stopped in time to be detached (detached at
 * its stop). True while some are left. */
static bool tidy(void)
{
	for (;;) {
		int st;
		pid_t r = waitpid(-1, &st, __WALL | __WNOTHREAD | WNOHANG);
		if (r > 0) {
			if (WIFSTOPPED(st)) {
				int sig = WSTOPSIG(st), ev = st >> 16;
				bool real = ev == 0 && sig != (SIGTRAP | 0x80);
				ptrace(PTRACE_DETACH, r, 0, (void *)(uintptr_t)(real ? sig : 0));
			}
			continue;
		}
		return !(r < 0 && errno == ECHILD);
	}
}

static void *hold_main(void *arg)
{
	struct rb_hold *h = arg;
	/* Signals are the main loop's (its signalfd); RB_WAKE_SIGNAL breaks
	 * a wait for the program (until.c). */
	sigset_t set;
	sigfillset(&set);
	sigdelset(&set, RB_WAKE_SIGNAL);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	pthread_mutex_lock(&h->mu);
	for (;;) {
		if (h->posted) {
			h->posted = false;
			bool async = h->async;
			struct job *j = h->job;
			pthread_mutex_unlock(&h->mu);
			int rc = async ? j->run(j) : h->work(j, h->arg);
			if (!h->held)
				h->leftover = tidy();
			if (async) {
				job_ran(j, rc);
				pthread_mutex_lock(&h->mu);
				continue;
			}
			pthread_mutex_lock(&h->mu);
			h->rc = rc;
			h->done = true;
			pthread_cond_broadcast(&h->cv);
			continue;
		}
		if (h->quit)
			break;
		if (h->release) {
			h->release = false;
			if (h->held) {
				pthread_mutex_unlock(&h->mu);
				rb_hold_let_go(h);
				pthread_mutex_lock(&h->mu);
			}
			continue;
		}
		if (!h->held && !h->leftover) {
			pthread_cond_wait(&h->cv, &h->mu);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 20 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&h->cv, &h->mu, &ts);
		if (!h->posted && !h->quit && h->held) {
			pthread_mutex_unlock(&h->mu);
			reap_dead(h);
			pthread_mutex_lock(&h->mu);
		} else if (!h->held && h->leftover) {
			h->leftover = tidy();
		}
	}
	pthread_mutex_unlock(&h->mu);
	rb_hold_let_go(h);
	return NULL;
}

static void on_wake(int sig)
{
	(void)sig;
}

static void install_wake(void)
{
	/* No SA_RESTART: the signal ends a blocking waitpid. */
	struct sigaction sa = {.sa_handler = on_wake};
	sigemptyset(&sa.sa_mask);
	sigaction(RB_WAKE_SIGNAL, &sa, NULL);
}

struct rb_hold *rb_hold_start(struct mv *mv, pid_t pid, const char *name, bool *holding, int *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, install_wake);
	struct rb_hold *h = xcalloc(1, sizeof(*h));
	h->mv = mv;
	h->pid = pid;
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->holding = holding;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc = pthread_create(&h->th, NULL, hold_main, h);
	if (rc) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		free(h);
		*err = -rc;
		return NULL;
	}
	return h;
}

void rb_hold_stop(struct rb_hold *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->quit = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int rb_hold_post_job(struct job *j, void *hold)
{
	struct rb_hold *h = hold;
	pthread_mutex_lock(&h->mu);
	int rc = h->posted || h->quit ? -EBUSY : 0;
	if (!rc) {
		h->job = j;
		h->async = true;
		h->posted = true;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int rb_hold_call(struct rb_hold *h, struct job *j, rb_work_fn *fn, void *arg)
{
	pthread_mutex_lock(&h->mu);
	h->async = false;
	h->work = fn;
	h->job = j;
	h->arg = arg;
	h->done = false;
	h->posted = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->done)
		pthread_cond_wait(&h->cv, &h->mu);
	int rc = h->rc;
	pthread_mutex_unlock(&h->mu);
	return rc;
}

void rb_hold_release_async(struct rb_hold *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->release = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

bool rb_hold_wanted_gone(struct rb_hold *h)
{
	pthread_mutex_lock(&h->mu);
	bool r = h->quit || h->release;
	pthread_mutex_unlock(&h->mu);
	return r;
}

struct ckpt *rb_hold_ckpt(struct rb_hold *h, bool *held)
{
	*held = h->held;
	return &h->c;
}

struct checkpoint_req *rb_hold_req(struct rb_hold *h)
{
	return &h->req;
}

void rb_hold_keep(struct rb_hold *h)
{
	set_holding(h, true);
}

void rb_hold_let_go(struct rb_hold *h)
{
	if (h->c.p)
		rb_release(&h->c);
	if (h->held)
		set_holding(h, false);
	h->leftover = tidy();
}

int rb_stop(struct job *j, const pid_t *pids, const int *pidfds, size_t n, bool all, struct ckpt *c,
	    struct checkpoint_req *req)
{
	memset(c, 0, sizeof(*c));
	memset(req, 0, sizeof(*req));
	req->stop_timeout_ms = CKPT_STOP_TIMEOUT_MS;
	req->all = all;
	c->j = j;
	c->mv = j->mv;
	c->req = req;
	for (size_t i = 0; i < n; i++) {
		int fd = pidfds[i] >= 0 ? fcntl(pidfds[i], F_DUPFD_CLOEXEC, 0) : -1;
		ckpt_add_proc(c, pids[i], fd, true);
	}
	int rc = ckpt_stop_all(c);
	if (rc < 0 && !mv_err_isset(&c->err))
		ckpt_fail(c, rc, MV_E_INTERNAL, "cannot stop process %d: %s", pids[0],
			  strerror(-rc));
	return rc;
}

void rb_release(struct ckpt *c)
{
	ckpt_resume_all(c);
	for (size_t i = 0; i < c->n; i++) {
		if (c->p[i].memfd >= 0)
			close(c->p[i].memfd);
		ptrace_proc_free(&c->p[i].pt);
	}
	free(c->p);
	c->p = NULL;
	c->n = 0;
}
