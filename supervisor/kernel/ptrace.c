#include "supervisor/kernel/ptrace.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <elf.h>
#include <linux/kcmp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif
#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

/* The XSAVE area: 2.7 KiB with AVX-512, about 11 KiB with AMX tiles. */
#define FPSTATE_MAX (32 * 1024)

void ptrace_proc_init(struct ptrace_proc *pp, pid_t pid, int pidfd)
{
	memset(pp, 0, sizeof(*pp));
	pp->pid = pid;
	pp->pidfd = pidfd;
}

void ptrace_proc_free(struct ptrace_proc *pp)
{
	for (size_t i = 0; i < pp->n; i++) {
		free(pp->t[i].prstatus);
		free(pp->t[i].fpstate);
	}
	free(pp->t);
	if (pp->pidfd >= 0)
		close(pp->pidfd);
	memset(pp, 0, sizeof(*pp));
	pp->pidfd = -1;
}

void ptrace_proc_compact(struct ptrace_proc *pp)
{
	size_t k = 0;
	for (size_t i = 0; i < pp->n; i++) {
		if (pp->t[i].state == PT_GONE) {
			free(pp->t[i].prstatus);
			free(pp->t[i].fpstate);
			continue;
		}
		pp->t[k++] = pp->t[i];
	}
	pp->n = k;
}

void ptrace_proc_forget(struct ptrace_proc *pp)
{
	for (size_t i = 0; i < pp->n; i++) {
		free(pp->t[i].prstatus);
		free(pp->t[i].fpstate);
	}
	pp->n = 0;
	pp->first_interrupt_ns = pp->last_detach_ns = 0;
	pp->exited_threads = 0;
}

static struct ptrace_thread *find(struct ptrace_proc *pp, pid_t tid)
{
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].tid == tid)
			return &pp->t[i];
	return NULL;
}

static struct ptrace_thread *add(struct ptrace_proc *pp, pid_t tid)
{
	if (pp->n == pp->cap) {
		pp->cap = pp->cap ? pp->cap * 2 : 16;
		pp->t = xrealloc(pp->t, pp->cap * sizeof(*pp->t));
	}
	struct ptrace_thread *t = &pp->t[pp->n++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->state = PT_GONE;
	return t;
}

struct ptrace_thread *ptrace_proc_find(struct ptrace_proc *pp, pid_t tid)
{
	return find(pp, tid);
}

struct ptrace_thread *ptrace_proc_adopt(struct ptrace_proc *pp, pid_t tid)
{
	struct ptrace_thread *t = find(pp, tid);
	if (!t)
		t = add(pp, tid);
	t->state = PT_SEIZED;
	t->signal = 0;
	t->group_stop = false;
	return t;
}

/* The state letter of a thread from /proc/PID/task/TID/stat, or 0. */
static char thread_state(pid_t pid, pid_t tid)
{
	struct proc_stat st;
	return procfs_task_stat(pid, tid, &st) < 0 ? 0 : st.state;
}

void ptrace_describe_thread(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char wchan[64];
	procfs_wchan(pid, tid, wchan, sizeof(wchan));
	char st = thread_state(pid, tid);
	snprintf(buf, len, "state %c, wchan %s", st ? st : '?', *wchan ? wchan : "?");
}

/* ---- the seize guard ---------------------------------------------------- */

/* PTRACE_SEIZE waits for the process's cred_guard_mutex, which an execve
 * holds throughout. An exec by a thread we do not hold yet kills every
 * other thread and waits (de_thread) until each is reaped; one we hold
 * is reaped by its tracer only. So a seize into a process that is
 * execing while we hold some of its threads would wait for the exec, and
 * the exec for us: for ever. The guard is a helper thread that, while
 * the tracer is in such a seize, collects the exits of the threads the
 * tracer holds there (wait works from any thread of the tracer's
 * group), peeking with WNOWAIT first so as to leave stops to the tracer. */
struct seize_guard {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit, armed;
	pid_t *tids; /* the held threads of the process being seized into */
	size_t n, cap;
	pid_t *reaped; /* and those of them whose exit the guard collected */
	size_t nr, cap_r;
};

static __thread struct seize_guard *guard;

#define GUARD_AFTER_NS (2 * 1000000L)

static void guard_reap_locked(struct seize_guard *g)
{
	for (size_t i = 0; i < g->n; i++) {
		siginfo_t si = {0};
		if (waitid(P_PID, (id_t)g->tids[i], &si, WEXITED | WNOHANG | WNOWAIT | __WALL) <
			0 ||
		    si.si_pid != g->tids[i])
			continue;
		if (si.si_code != CLD_EXITED && si.si_code != CLD_KILLED &&
		    si.si_code != CLD_DUMPED)
			continue; /* a stop: the tracer's to collect */
		int status;
		if (waitpid(g->tids[i], &status, __WALL | WNOHANG) != g->tids[i])
			continue;
		if (g->nr == g->cap_r)
			g->reaped = xrealloc(g->reaped, (g->cap_r = g->cap_r ? g->cap_r * 2 : 16) *
							    sizeof(*g->reaped));
		g->reaped[g->nr++] = g->tids[i];
	}
}

static void *guard_main(void *arg)
{
	struct seize_guard *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->quit) {
		if (!g->armed) {
			pthread_cond_wait(&g->cv, &g->mu);
			continue;
		}
		/* A seize that does not wait returns within microseconds:
		 * look only at one that has been waiting a moment. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += GUARD_AFTER_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT && g->armed)
			guard_reap_locked(g);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

void ptrace_quiet_stops(void)
{
	struct sigaction sa;
	if (sigaction(SIGCHLD, NULL, &sa) == 0 && !(sa.sa_flags & SA_NOCLDSTOP)) {
		sa.sa_flags |= SA_NOCLDSTOP;
		(void)sigaction(SIGCHLD, &sa, NULL);
	}
}

int ptrace_guard_start(void)
{
	if (guard)
		return 0;
	struct seize_guard *g = xcalloc(1, sizeof(*g));
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	int rc = pthread_create(&g->th, NULL, guard_main, g);
	if (rc) {
		pthread_mutex_destroy(&g->mu);
		pthread_cond_destroy(&g->cv);
		free(g);
		return -rc;
	}
	guard = g;
	return 0;
}

void ptrace_guard_stop(void)
{
	struct seize_guard *g = guard;
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->quit = true;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->th, NULL);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g->tids);
	free(g->reaped);
	free(g);
	guard = NULL;
}

/* Arm the guard with the threads of pp we hold; false when there are
 * none (a seize cannot wait for us then) or there is no guard. */
static bool guard_arm(const struct ptrace_proc *pp)
{
	struct seize_guard *g = guard;
	if (!g)
		return false;
	pthread_mutex_lock(&g->mu);
	g->n = g->nr = 0;
	for (size_t i = 0; i < pp->n; i++) {
		enum ptrace_tstate st = pp->t[i].state;
		if (st != PT_SEIZED && st != PT_STOPPED && st != PT_BLOCKED)
			continue;
		if (g->n == g->cap)
			g->tids = xrealloc(g->tids,
					   (g->cap = g->cap ? g->cap * 2 : 16) * sizeof(*g->tids));
		g->tids[g->n++] = pp->t[i].tid;
	}
	g->armed = g->n > 0;
	if (g->armed)
		pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return g->n > 0;
}

/* Disarm it; the threads whose exit it collected are gone. */
static void guard_disarm(struct ptrace_proc *pp)
{
	struct seize_guard *g = guard;
	pthread_mutex_lock(&g->mu);
	g->armed = false;
	for (size_t k = 0; k < g->nr; k++) {
		struct ptrace_thread *t = find(pp, g->reaped[k]);
		if (t && t->state != PT_GONE) {
			t->state = PT_GONE;
			pp->exited_threads++;
		}
	}
	g->nr = 0;
	pthread_mutex_unlock(&g->mu);
}

/* PTRACE_SEIZE, guarded (see the seize guard). */
static long seize_guarded(struct ptrace_proc *pp, pid_t tid)
{
	bool armed = guard_arm(pp);
	long r = ptrace(PTRACE_SEIZE, tid, 0, 0);
	int e = errno;
	if (armed)
		guard_disarm(pp);
	errno = e;
	return r;
}

/* Is tid a thread we trace already? After an exec by a non-leader thread
 * (fs/exec.c de_thread), the execing thread takes the leader's tid: a
 * thread we seized under its own tid shows up under the leader's, and
 * PTRACE_SEIZE on it fails with EPERM (it has a tracer: us). TracerPid
 * is the tracing thread's tid: this (job) thread's. */
static bool traced_by_us(pid_t pid, pid_t tid)
{
	struct proc_status st;
	return procfs_task_status(pid, tid, &st) == 0 && st.tracer_pid == gettid();
}

/* EIO as well as ESRCH means the thread is dying: PTRACE_INTERRUPT
 * fails with EIO when it cannot lock the signal handlers of a task that
 * is being released. Its exit is collected by waitpid. */
static int interrupt(struct ptrace_thread *t)
{
	t->last_interrupt_ns = mv_now_ns();
	if (fault_hit("ptrace_interrupt")
		? (errno = EPERM, 1)
		: ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0 && errno != ESRCH && errno != EIO)
		return -errno;
	return 0;
}

/* A thread seized now, or one we hold again under a tid we had lost (see
 * traced_by_us): waited for like a new one. The interrupt of a thread
 * found again is still pending, or it stopped already and waitpid
 * reports that stop under this tid; a second interrupt costs nothing (a
 * pending trap stays one trap, and one left when we detach is cleared by
 * the detach). */
static int adopt(struct ptrace_proc *pp, struct ptrace_thread *t)
{
	t->state = PT_SEIZED;
	t->signal = 0;
	t->group_stop = false;
	t->interrupt_ns = mv_now_ns();
	if (!pp->first_interrupt_ns)
		pp->first_interrupt_ns = t->interrupt_ns;
	return interrupt(t);
}

/* Seize and interrupt one thread. The interrupt makes a running thread
 * trap at once and a sleeping one leave its (restartable) wait; a thread
 * waiting for a seccomp notification answer waits killably
 * (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) and stops right after the
 * notify thread answers. */
static int seize_one(struct ptrace_proc *pp, struct ptrace_thread *t)
{
	for (int tries = 0;; tries++) {
		if (tries == 0 && fault_hit("ckpt_seize"))
			return -EPERM;
		if (seize_guarded(pp, t->tid) == 0)
			return adopt(pp, t);
		int e = errno;
		/* ESRCH: it exited since the listing. EPERM on a thread that
		 * is a zombie: ptrace_attach refuses tasks with an exit_state
		 * (a leader that called pthread_exit stays one while the
		 * other threads run). EPERM on a thread we trace already: an
		 * exec moved it to this tid. */
		if (e == ESRCH)
			return 0;
		char st = thread_state(pp->pid, t->tid);
		if (e == EPERM && (st == 'Z' || st == 'X' || st == 0))
			return 0;
		if (e == EPERM && traced_by_us(pp->pid, t->tid))
			return adopt(pp, t);
		/* EPERM for a live untraced thread: ptrace_attach found the
		 * task that had this tid, the leader an exec was killing, and
		 * waited for the exec (cred_guard_mutex) to refuse it as
		 * dead; the execing thread has the tid now. Once more. */
		if (e != EPERM || tries == 2)
			return -e;
	}
}

/* A thread we recorded as stopped: is it still in its ptrace stop? Most
 * ptrace requests need a stopped tracee (ptrace_check_attach), so
 * PTRACE_GETEVENTMSG tells, for one system call. It is not when it was
 * killed (SIGKILL ends a stop: an exec by another thread kills the
 * others), or when its tid is another task's now: the execing thread
 * takes the leader's, and may still be on its way to its stop, or not
 * be ours at all. */
static bool still_stopped(pid_t tid)
{
	unsigned long msg;
	return ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg) == 0;
}

static void on_status(struct ptrace_proc *pp, struct ptrace_thread *t, int status);

/* A thread recorded as stopped that is not: collect its exit, or wait
 * again for whatever has its tid now (our execing thread, or a task we
 * seize now). Returns 1 when it is to be waited for, 0, or -errno. */
static int recheck_stopped(struct ptrace_proc *pp, struct ptrace_thread *t)
{
	int status;
	pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
	if (r == t->tid) {
		on_status(pp, t, status);
		return t->state == PT_SEIZED;
	}
	if (r < 0 && errno == ECHILD) {
		/* Not our tracee: an untraced task has the tid now. */
		t->state = PT_GONE;
		char st = thread_state(pp->pid, t->tid);
		if (st == 'Z' || st == 'X' || st == 0)
			return 0;
		int rc = seize_one(pp, t);
		return rc < 0 ? rc : t->state == PT_SEIZED;
	}
	/* Ours and running: the execing thread under the leader's tid. */
	int rc = adopt(pp, t);
	return rc < 0 ? rc : 1;
}

int ptrace_seize_new(struct ptrace_proc *pp)
{
	_cleanup_free_ pid_t *tids = NULL;
	size_t n_tids;
	int added = 0, rc = procfs_tasks(pp->pid, &tids, &n_tids);
	if (rc < 0) {
		if (rc == -ESRCH)
			pp->gone = true;
		return rc;
	}
	for (size_t i = 0; i < n_tids; i++) {
		pid_t tid = tids[i];
		struct ptrace_thread *t = find(pp, tid);
		if (t && t->state == PT_STOPPED) {
			if (still_stopped(tid))
				continue;
			if ((rc = recheck_stopped(pp, t)) < 0)
				break;
			added += rc;
			continue;
		}
		if (t && t->state != PT_GONE)
			continue;
		if (t && thread_state(pp->pid, tid) == 'Z')
			continue; /* the zombie we already know */
		if (!t)
			t = add(pp, tid);
		rc = seize_one(pp, t);
		if (rc < 0)
			break;
		if (t->state == PT_SEIZED)
			added++;
	}
	if (rc < 0)
		return rc;
	return added;
}

/* Interpret a wait status of a seized thread. */
static void on_status(struct ptrace_proc *pp, struct ptrace_thread *t, int status)
{
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		t->state = PT_GONE;
		pp->exited_threads++;
		return;
	}
	if (!WIFSTOPPED(status))
		return;
	int sig = WSTOPSIG(status), event = status >> 16;
	/* A new stop of a thread we had as stopped is another task's, which
	 * has its tid since an exec: what we knew of it is stale. */
	t->signal = 0;
	t->group_stop = false;
	t->state = PT_STOPPED;
	t->stop_ns = mv_now_ns();
	if (event == PTRACE_EVENT_STOP) {
		/* Our interrupt (SIGTRAP), or a group stop that was in effect
		 * or began (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU). */
		t->group_stop = sig != SIGTRAP;
	} else if (event == 0) {
		/* A signal was about to be delivered: the thread is stopped
		 * all the same; the signal goes back at detach. */
		t->signal = sig;
	}
}

size_t ptrace_poll_stops(struct ptrace_proc *pp)
{
	size_t waiting = 0;
	bool moved = false;
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		/* Stopped threads too: one killed meanwhile (an exec by
		 * another thread kills the others) stays a zombie until its
		 * tracer reaps it, and the exec waits for that (de_thread). */
		if (t->state != PT_SEIZED && t->state != PT_STOPPED)
			continue;
		int status;
		pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
		if (r == t->tid) {
			on_status(pp, t, status);
		} else if (r < 0 && errno == ECHILD) {
			/* Not our tracee any more: it exited and was released,
			 * or it execed from a non-leader thread and has the
			 * leader's tid now. */
			moved |= t->tid != pp->pid;
			t->state = PT_GONE;
			pp->exited_threads++;
		}
	}
	/* Then wait for the execing thread under the leader's tid, where it
	 * reports the stop it owes us. Our record of the leader says gone
	 * (the exec killed it) or stopped (it was, until the exec killed
	 * it and its tid changed owner). */
	if (moved && !find(pp, pp->pid))
		add(pp, pp->pid);
	struct ptrace_thread *leader = moved ? find(pp, pp->pid) : NULL;
	if (leader &&
	    (leader->state == PT_GONE ||
	     (leader->state == PT_STOPPED && !still_stopped(leader->tid))) &&
	    traced_by_us(pp->pid, leader->tid) && adopt(pp, leader) < 0)
		log_debug("ptrace: interrupting thread %d again: %s", leader->tid, strerror(errno));
	for (size_t i = 0; i < pp->n; i++)
		waiting += pp->t[i].state == PT_SEIZED;
	return waiting;
}

void ptrace_reinterrupt(struct ptrace_proc *pp, uint64_t now, uint64_t every_ns)
{
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		if (t->state == PT_SEIZED && now - t->last_interrupt_ns >= every_ns &&
		    interrupt(t) < 0)
			log_debug("ptrace: interrupting thread %d again: %s", t->tid,
				  strerror(errno));
	}
}

struct ptrace_thread *ptrace_laggard(struct ptrace_proc *pp)
{
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_SEIZED)
			return &pp->t[i];
	return NULL;
}

size_t ptrace_stopped_count(const struct ptrace_proc *pp)
{
	size_t n = 0;
	for (size_t i = 0; i < pp->n; i++)
		n += pp->t[i].state == PT_STOPPED;
	return n;
}

pid_t ptrace_reader_tid(const struct ptrace_proc *pp)
{
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_STOPPED)
			return pp->t[i].tid;
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_BLOCKED)
			return pp->t[i].tid;
	return 0;
}

bool ptrace_classify_laggard(struct ptrace_proc *pp, struct ptrace_thread *t, const pid_t *stopped,
			     size_t n_stopped)
{
	/* The wait is killable, so the thread shows as D; its wait channel
	 * names the vfork wait when the kernel did not inline it (here it
	 * shows as kernel_clone). The sure sign: its address space is that
	 * of a process whose threads we have all stopped, the vfork child
	 * (kcmp KCMP_VM). */
	if (thread_state(pp->pid, t->tid) != 'D')
		return false;
	bool shares = false;
	for (size_t i = 0; i < n_stopped && !shares; i++)
		shares = stopped[i] != pp->pid &&
			 syscall(SYS_kcmp, pp->pid, stopped[i], KCMP_VM, 0, 0) == 0;
	if (!shares) {
		char wchan[64];
		if (procfs_wchan(pp->pid, t->tid, wchan, sizeof(wchan)) < 0 ||
		    strncmp(wchan, "wait_for_vfork_done", 19) != 0)
			return false;
	}
	t->state = PT_BLOCKED;
	t->stop_ns = mv_now_ns();
	return true;
}

void ptrace_check_identity(struct ptrace_proc *pp)
{
	bool alive = ptrace_reader_tid(pp) != 0;
	if (alive && pp->pidfd >= 0) {
		/* A pidfd polls readable once its process has exited: then
		 * the threads we stopped belong to a process that reused the
		 * pid. */
		struct pollfd p = {.fd = pp->pidfd, .events = POLLIN};
		alive = poll(&p, 1, 0) == 0;
	}
	if (alive)
		return;
	ptrace_detach_all(pp);
	pp->gone = true;
}

static void *get_regset(pid_t tid, unsigned note, size_t max, size_t *len)
{
	void *buf = xmalloc(max);
	struct iovec iov = {.iov_base = buf, .iov_len = max};
	if (fault_hit("ptrace_getregs")
		? (errno = EIO, 1)
		: ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)note, &iov) < 0) {
		int e = errno;
		free(buf);
		errno = e;
		return NULL;
	}
	/* The kernel shortens iov_len to the regset's size. */
	*len = iov.iov_len;
	return xrealloc(buf, iov.iov_len);
}

int ptrace_save_regs_stopped(struct ptrace_thread *t)
{
	free(t->prstatus);
	free(t->fpstate);
	t->prstatus = t->fpstate = NULL;
	t->prstatus = get_regset(t->tid, NT_PRSTATUS, 1024, &t->prstatus_len);
	if (!t->prstatus)
		return -errno;
	t->fpstate_note = NT_X86_XSTATE;
	t->fpstate = get_regset(t->tid, NT_X86_XSTATE, FPSTATE_MAX, &t->fpstate_len);
	if (!t->fpstate && errno != ESRCH) {
		/* No XSAVE on this CPU: the legacy FXSAVE area. */
		t->fpstate_note = NT_PRFPREG;
		t->fpstate = get_regset(t->tid, NT_PRFPREG, 4096, &t->fpstate_len);
	}
	return t->fpstate ? 0 : -errno;
}

static int set_regset(pid_t tid, unsigned note, const void *buf, size_t len)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	if (fault_hit("ptrace_setregs")) {
		errno = EIO;
		return -EIO;
	}
	return ptrace(PTRACE_SETREGSET, tid, (void *)(uintptr_t)note, &iov) < 0 ? -errno : 0;
}

int ptrace_load_regs_stopped(pid_t tid, const void *prstatus, size_t prstatus_len,
			     const void *fpstate, size_t fpstate_len, unsigned fpstate_note)
{
	int rc = set_regset(tid, NT_PRSTATUS, prstatus, prstatus_len);
	if (rc == 0 && fpstate)
		rc = set_regset(tid, fpstate_note, fpstate, fpstate_len);
	return rc;
}

int ptrace_sigmask_stopped(pid_t tid, uint64_t *mask, bool set)
{
	long n =
	    ptrace(set ? PTRACE_SETSIGMASK : PTRACE_GETSIGMASK, tid, (void *)sizeof(*mask), mask);
	return n < 0 ? -errno : 0;
}

#ifndef PTRACE_GET_RSEQ_CONFIGURATION
#define PTRACE_GET_RSEQ_CONFIGURATION 0x420f
#endif

/* include/uapi/linux/ptrace.h, Linux 5.13. */
struct mv_rseq_config {
	uint64_t rseq_abi_pointer;
	uint32_t rseq_abi_size, signature, flags, pad;
};

int ptrace_rseq_stopped(pid_t tid, uint64_t *addr, uint32_t *len)
{
	uint32_t sig;
	return ptrace_rseq_sig_stopped(tid, addr, len, &sig);
}

int ptrace_rseq_sig_stopped(pid_t tid, uint64_t *addr, uint32_t *len, uint32_t *sig)
{
	struct mv_rseq_config conf = {0};
	long n = ptrace((enum __ptrace_request)PTRACE_GET_RSEQ_CONFIGURATION, tid,
			(void *)sizeof(conf), &conf);
	if (n < 0)
		return -errno;
	*addr = conf.rseq_abi_pointer;
	*len = conf.rseq_abi_size;
	*sig = conf.signature;
	return 0;
}

static void detach_one(struct ptrace_proc *pp, struct ptrace_thread *t)
{
	if (ptrace(PTRACE_DETACH, t->tid, 0, (void *)(uintptr_t)t->signal) == 0) {
		t->state = PT_DETACHED;
		return;
	}
	/* ESRCH: it died while stopped (SIGKILL); collect its exit so its
	 * real parent hears of it now (wait_task_zombie passes a
	 * ptrace-reparented zombie on), not when this thread exits. */
	int status;
	if (waitpid(t->tid, &status, __WALL | WNOHANG) == t->tid && !WIFSTOPPED(status)) {
		t->state = PT_GONE;
		pp->exited_threads++;
		return;
	}
	if (ptrace(PTRACE_DETACH, t->tid, 0, (void *)(uintptr_t)t->signal) == 0)
		t->state = PT_DETACHED;
	else
		t->state = PT_GONE;
}

void ptrace_detach_stopped(struct ptrace_proc *pp)
{
	bool any = false;
	for (size_t i = 0; i < pp->n; i++) {
		if (pp->t[i].state == PT_STOPPED) {
			detach_one(pp, &pp->t[i]);
			any = true;
		}
	}
	if (any)
		pp->last_detach_ns = mv_now_ns();
}

static bool holds_unstopped(const struct ptrace_proc *pp)
{
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_SEIZED || pp->t[i].state == PT_BLOCKED)
			return true;
	return false;
}

void ptrace_detach_rest(struct ptrace_proc *pp, uint64_t deadline_ns)
{
	/* PTRACE_DETACH needs a stopped tracee: give interrupted threads a
	 * moment to reach their stop. */
	while (holds_unstopped(pp)) {
		for (size_t i = 0; i < pp->n; i++)
			if (pp->t[i].state == PT_BLOCKED)
				pp->t[i].state = PT_SEIZED; /* waited for like the others now */
		ptrace_poll_stops(pp);
		ptrace_detach_stopped(pp);
		if (!holds_unstopped(pp) || mv_now_ns() >= deadline_ns)
			break;
		struct timespec ts = {0, 200 * 1000};
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_SEIZED)
			log_info(
			    "thread %d of process %d had not stopped: released when the job ends",
			    pp->t[i].tid, pp->pid);
}

void ptrace_detach_all(struct ptrace_proc *pp)
{
	ptrace_detach_stopped(pp);
	ptrace_detach_rest(pp, mv_now_ns() + 100 * 1000000ull);
}

int ptrace_seize_probe(pid_t pid)
{
	return ptrace(PTRACE_SEIZE, pid, 0, 0) < 0 ? -errno : 0;
}
