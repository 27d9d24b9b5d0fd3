/* The mark's copy-on-write snapshot (supervisor/rollback/snapshot.h). */
#include "supervisor/rollback/snapshot.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/kernel/vm.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_SETSIGMASK
#define PTRACE_SETSIGMASK 0x420b
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static int say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return 1;
}

/* The same pid namespace as ours: the pid the clone returns in the
 * program is then the one we see. */
static bool same_pid_ns(pid_t pid)
{
	struct stat a, b;
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/pid", pid);
	return stat("/proc/self/ns/pid", &a) == 0 && stat(p, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* The new child's first stop (auto-attached by the clone event), within
 * 2 s. Exits of the process's own threads seen meanwhile are recorded. */
static int wait_child(pid_t child)
{
	for (int i = 0; i < 2000; i++) {
		int st;
		pid_t w = waitpid(child, &st, __WALL | WNOHANG);
		if (w == child)
			return WIFSTOPPED(st) ? 0 : -ESRCH;
		if (w < 0 && errno != EINTR)
			return -errno;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return -ETIMEDOUT;
}

/* Kill a child we still trace and take its exit from the tracer's side
 * (its parent, the reaper, then reaps it). */
static void kill_traced(struct rb_snap *s)
{
	if (s->pidfd < 0 || syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0) < 0)
		kill(s->pid, SIGKILL);
	int st;
	while (waitpid(s->pid, &st, __WALL) < 0 && errno == EINTR)
		;
}

/* The injection failed (its thread killed meanwhile, say) after the
 * clone may have run: a child traced from its start and not ours to
 * keep is killed, not left for a let-go to detach into the program's
 * code. */
static void kill_strays(struct ptrace_proc *pp)
{
	for (int i = 0; i < 100; i++) {
		int st;
		pid_t w = waitpid(-1, &st, __WALL | __WNOTHREAD | WNOHANG);
		if (w <= 0) {
			if (w < 0 && errno != EINTR)
				return;
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
			continue;
		}
		bool ours = false;
		for (size_t k = 0; k < pp->n && !ours; k++)
			if (pp->t[k].tid == w) {
				ours = true;
				if (WIFEXITED(st) || WIFSIGNALED(st))
					pp->t[k].state = PT_GONE;
				else if (WIFSTOPPED(st) && (st >> 16) == 0 && !pp->t[k].signal)
					pp->t[k].signal =
					    WSTOPSIG(st); /* delivered at the let-go */
			}
		if (!ours && WIFSTOPPED(st)) {
			kill(w, SIGKILL);
			waitpid(w, &st, __WALL);
		}
	}
}

static int close_one(void *arg, int dfd, const char *name)
{
	long a[6] = {atol(name)}, ret = 0;
	(void)dfd;
	return remote_syscall_stopped(arg, SYS_close, a, &ret);
}

/* Every descriptor of the stopped child closed by calls run in it. */
static int close_all(struct remote *r, pid_t child)
{
	long a[6] = {0, (long)~0U, 0, 0, 0, 0}, ret = 0;
	int rc = remote_syscall_stopped(r, SYS_close_range, a, &ret);
	if (rc < 0)
		return rc;
	if (ret != -ENOSYS)
		return (int)ret;
	/* Before Linux 5.9: one by one. */
	return procfs_fd_walk(child, close_one, r);
}

int rb_snap_make(struct ckpt *c, struct rb_snap *s, char *why, size_t len)
{
	struct mv *mv = c->mv;
	struct ptrace_proc *pp = &c->p[0].pt;
	*s = (struct rb_snap){.mv = mv, .pid = 0, .pidfd = -1, .memfd = -1};
	struct proc_status st, reaper;
	if (mv->tree_top > 0 || mv->reaper_pid <= 0 || procfs_status(pp->pid, &st) < 0 ||
	    st.ppid != mv->reaper_pid)
		return say(why, len, "process %d is not a child of memvisor's", pp->pid);
	if (!same_pid_ns(pp->pid))
		return say(why, len, "process %d is in another pid namespace", pp->pid);
	/* memvisor's filter on top of what the reaper runs: any other is
	 * the program's own, which may refuse a clone or kill the process
	 * for one (a sandbox that forbids fork). */
	if (procfs_status(mv->reaper_pid, &reaper) < 0 || reaper.seccomp_filters < 0 ||
	    st.seccomp_filters != reaper.seccomp_filters + 1)
		return say(why, len,
			   "process %d runs seccomp filters of its own: a clone run in it could "
			   "be refused, or end it",
			   pp->pid);
	struct remote r;
	int rc = remote_open_stopped(&r, pp, &mv->injecting);
	if (rc < 0)
		return say(why, len, "no thread to run a clone in: %s", strerror(-rc));
	/* The child is traced from its start, by this thread: it never runs
	 * a single instruction of the program's. */
	long opts = PTRACE_O_TRACEFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEVFORK;
	if (ptrace(PTRACE_SETOPTIONS, r.t->tid, 0, (void *)opts) < 0)
		return say(why, len, "PTRACE_SETOPTIONS: %s", strerror(errno));
	long args[6] = {CLONE_PARENT | SIGCHLD, 0, 0, 0, 0, 0}, ret = 0;
	rc = remote_syscall_stopped(&r, SYS_clone, args, &ret);
	ptrace(PTRACE_SETOPTIONS, r.t->tid, 0, 0);
	if (rc < 0)
		kill_strays(pp);
	if (rc < 0 || ret <= 0)
		return say(why, len, "clone in process %d: %s", pp->pid,
			   strerror(rc < 0    ? -rc
				    : ret < 0 ? (int)-ret
					      : ESRCH));
	s->pid = (pid_t)ret;
	atomic_store(&mv->rb_snapshot, s->pid); /* not a process of the tree */
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	rc = wait_child(s->pid);
	if (rc < 0) {
		say(why, len, "the clone %d did not stop: %s", s->pid, strerror(-rc));
		goto undo;
	}
	/* Inert: no signal reaches its handlers (a copy of the program's
	 * SIGTERM handler must not run), no descriptor of the program's stays
	 * open in it (a pipe's reader would wait for its end), no signal to
	 * the program's process group reaches it. */
	uint64_t all = ~0ull;
	struct ptrace_thread ct = {.tid = s->pid, .state = PT_STOPPED};
	struct remote rs = r;
	rs.pid = s->pid;
	long none[6] = {0};
	if (ptrace(PTRACE_SETSIGMASK, s->pid, sizeof(all), &all) < 0) {
		say(why, len, "PTRACE_SETSIGMASK on the clone: %s", strerror(errno));
		goto undo;
	}
	/* And it dies with its parent, the reaper, should that be killed
	 * without killing it first. */
	long pdeath[6] = {PR_SET_PDEATHSIG, SIGKILL};
	if ((rc = remote_use_thread_stopped(&rs, &ct)) < 0 ||
	    (rc = remote_syscall_stopped(&rs, SYS_setsid, none, &ret)) < 0 ||
	    (rc = remote_syscall_stopped(&rs, SYS_prctl, pdeath, &ret)) < 0 ||
	    (rc = close_all(&rs, s->pid)) < 0) {
		say(why, len, "making the clone inert: %s", strerror(-rc));
		goto undo;
	}
	/* Its pages count as the program's do: should memory run out, the
	 * kernel kills it first (the mark is lost, a rollback says so),
	 * not the program. Raising the score needs no privilege. */
	int oom = procfs_open(s->pid, "oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		if (write(oom, "1000", 4) < 0)
			log_info("mark: the snapshot's oom_score_adj: %s", strerror(errno));
		close(oom);
	}
	s->memfd = procfs_open(s->pid, "mem", O_RDONLY | O_CLOEXEC);
	if (s->memfd < 0) {
		say(why, len, "opening /proc/%d/mem: %s", s->pid, strerror(-s->memfd));
		s->memfd = -1;
		goto undo;
	}
	/* Let go into pause(2), where it sleeps, every signal blocked,
	 * until SIGKILL: were memvisor's thread to die, it would sleep on,
	 * not run. */
	if ((rc = remote_park_stopped(&rs, SYS_pause)) < 0 ||
	    ptrace(PTRACE_DETACH, s->pid, 0, 0) < 0) {
		say(why, len, "letting the clone go: %s", strerror(rc < 0 ? -rc : errno));
		goto undo;
	}
	return 0;
undo:
	kill_traced(s);
	rb_snap_drop(s);
	return 1;
}

void rb_snap_kill(struct rb_snap *s)
{
	if (s->pid > 0 && s->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
}

void rb_snap_drop(struct rb_snap *s)
{
	rb_snap_kill(s);
	if (s->pid > 0 && s->mv) {
		/* The reaper reaps it; the tree no longer leaves it out. */
		pid_t was = s->pid;
		atomic_compare_exchange_strong(&s->mv->rb_snapshot, &was, 0);
	}
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->memfd >= 0)
		close(s->memfd);
	*s = (struct rb_snap){.mv = s->mv, .pid = 0, .pidfd = -1, .memfd = -1};
}

static int rb_snap_read(const struct rb_snap *s, uint64_t addr, void *buf, size_t len)
{
	return vm_pread_mem(s->memfd, addr, buf, len);
}

int rb_snap_readv(const struct rb_snap *s, const struct iovec *loc, const struct iovec *rem,
		  size_t n, size_t total)
{
	ssize_t got = process_vm_readv(s->pid, loc, n, rem, n, 0);
	if (got == (ssize_t)total)
		return 0;
	for (size_t k = 0; k < n; k++) {
		int rc = rb_snap_read(s, (uint64_t)(uintptr_t)rem[k].iov_base, loc[k].iov_base,
				      loc[k].iov_len);
		if (rc < 0)
			return rc;
	}
	return 0;
}
