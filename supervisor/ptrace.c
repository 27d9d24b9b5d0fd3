#include "supervisor/ptrace.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"

#include <dirent.h>
#include <elf.h>
#include <linux/kcmp.h>
#include <fcntl.h>
#include <poll.h>
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

/* The state letter of a thread from /proc/PID/task/TID/stat, or 0. */
static char thread_state(pid_t pid, pid_t tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	_cleanup_free_ char *text = NULL;
	if (mv_read_file_at(AT_FDCWD, path, &text, NULL) < 0)
		return 0;
	char *rp = strrchr(text, ')');
	return rp && rp[1] == ' ' ? rp[2] : 0;
}

void ptrace_describe_thread(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", pid, tid);
	_cleanup_free_ char *wchan = NULL;
	mv_read_file_at(AT_FDCWD, path, &wchan, NULL);
	char st = thread_state(pid, tid);
	snprintf(buf, len, "state %c, wchan %s", st ? st : '?', wchan && *wchan ? wchan : "?");
}

/* Seize and interrupt one thread. The interrupt makes a running thread
 * trap at once and a sleeping one leave its (restartable) wait; a thread
 * waiting for a seccomp notification answer waits killably
 * (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) and stops right after the
 * notify thread answers. */
static int seize_one(struct ptrace_proc *pp, struct ptrace_thread *t)
{
	if (fault_hit("ckpt_seize") ? (errno = EPERM, 1) : ptrace(PTRACE_SEIZE, t->tid, 0, 0) < 0) {
		int e = errno;
		/* ESRCH: it exited since the listing. EPERM on a thread that
		 * is a zombie: ptrace_attach refuses tasks with an exit_state
		 * (a leader that called pthread_exit stays one while the
		 * other threads run). */
		if (e == ESRCH)
			return 0;
		char st = thread_state(pp->pid, t->tid);
		if (e == EPERM && (st == 'Z' || st == 'X' || st == 0))
			return 0;
		return -e;
	}
	t->interrupt_ns = mv_now_ns();
	if (!pp->first_interrupt_ns)
		pp->first_interrupt_ns = t->interrupt_ns;
	t->state = PT_SEIZED;
	if (fault_hit("ptrace_interrupt")
		? (errno = EPERM, 1)
		: ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0 && errno != ESRCH)
		return -errno;
	return 0;
}

int ptrace_seize_new(struct ptrace_proc *pp)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pp->pid);
	DIR *d = opendir(path);
	if (!d) {
		if (errno == ENOENT || errno == ESRCH) {
			pp->gone = true;
			return -ESRCH;
		}
		return -errno;
	}
	int added = 0, rc = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0)
			continue;
		struct ptrace_thread *t = find(pp, tid);
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
	closedir(d);
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
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		if (t->state != PT_SEIZED)
			continue;
		int status;
		pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
		if (r == t->tid) {
			on_status(pp, t, status);
		} else if (r < 0 && errno == ECHILD) {
			/* Not our tracee any more: it exited and was released
			 * (an exec by another thread takes the leader's tid). */
			t->state = PT_GONE;
			pp->exited_threads++;
		}
		waiting += t->state == PT_SEIZED;
	}
	return waiting;
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
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", pp->pid, t->tid);
		_cleanup_free_ char *wchan = NULL;
		if (mv_read_file_at(AT_FDCWD, path, &wchan, NULL) < 0 ||
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
