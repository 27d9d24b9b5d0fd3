/* Stopping a process's threads with ptrace, for a consistent look at its
 * memory and registers, and resuming them: PTRACE_SEIZE + PTRACE_INTERRUPT
 * on every thread (re-scanning /proc/PID/task until no new one appears),
 * waiting for each stop, saving registers, PTRACE_DETACH. The raw ptrace
 * and waitpid calls live here only.
 *
 * The kernel ties a tracee to the tracer *thread* (ptrace_attach sets the
 * tracee's parent to current), so every request on a seized thread must
 * come from the thread that seized it: the job thread that runs a
 * checkpoint (and later, remote syscalls: remote.c builds on a stopped
 * struct ptrace_thread and its saved registers). If that thread exits,
 * the kernel detaches everything it traced (exit_ptrace).
 *
 * "The process or thread is gone" is an outcome here, not an error: it is
 * recorded in the state and the caller decides whether it matters.
 * Functions return 0 (or a count) or -errno. */
#ifndef MV_PTRACE_H
#define MV_PTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum ptrace_tstate {
	PT_SEIZED,   /* seized and interrupted, stop not seen yet */
	PT_STOPPED,  /* in a ptrace stop: registers and memory are still */
	PT_BLOCKED,  /* will not stop, but cannot run either: a vfork parent
		      * waiting for a child we hold (ptrace_classify_laggard) */
	PT_GONE,     /* exited (or was never ours) */
	PT_DETACHED, /* resumed */
};

struct ptrace_thread {
	pid_t tid;
	enum ptrace_tstate state;
	int signal;	 /* caught in a signal-delivery stop: delivered again at detach */
	bool group_stop; /* stopped by SIGSTOP & co before us: stays stopped after detach */
	uint64_t interrupt_ns, stop_ns;
	uint64_t last_interrupt_ns; /* the last PTRACE_INTERRUPT sent */
	/* Saved by ptrace_save_regs_stopped. */
	void *prstatus;
	size_t prstatus_len;
	void *fpstate; /* NT_X86_XSTATE, or NT_PRFPREG where XSAVE is absent */
	size_t fpstate_len;
	unsigned fpstate_note;
};

struct ptrace_proc {
	pid_t pid;
	int pidfd; /* -1 if none: then pid reuse cannot be told apart */
	bool gone; /* every thread exited, or the pid is another process now */
	struct ptrace_thread *t;
	size_t n, cap;
	uint64_t first_interrupt_ns, last_detach_ns;
	unsigned exited_threads; /* threads that exited while we had them */
};

/* Every ptrace stop sends the tracer's process a SIGCHLD, which wakes a
 * signalfd read by the main loop (several times an iteration of a
 * rollback --until loop), taking a CPU from the program and the tracer
 * on a small machine. The main loops want SIGCHLD only for exits (the
 * tracer threads wait for their tracees; wait is woken all the same):
 * set SA_NOCLDSTOP on the disposition as it is (libev's handler, or the
 * default, the signal blocked and read from a signalfd). */
void ptrace_quiet_stops(void);

/* A helper thread for the calling (tracer) thread while it seizes: a
 * PTRACE_SEIZE waits for an exec in the target process to finish, and
 * that exec waits for the threads it killed to be reaped, which the
 * tracer cannot do while it waits; the helper does (see ptrace.c). Start
 * it before seizing threads of processes that may exec, stop it after.
 * 0 or -errno (then seizes go unguarded). */
int ptrace_guard_start(void);
void ptrace_guard_stop(void);

/* pidfd is taken over (closed by ptrace_proc_free). */
void ptrace_proc_init(struct ptrace_proc *pp, pid_t pid, int pidfd);
void ptrace_proc_free(struct ptrace_proc *pp);

/* pp's record of thread tid, or NULL. */
struct ptrace_thread *ptrace_proc_find(struct ptrace_proc *pp, pid_t tid);

/* A thread the kernel attached to the calling thread itself
 * (PTRACE_O_TRACECLONE): recorded as seized, its stop not seen yet. The
 * array may move: earlier pointers into pp->t are stale. */
struct ptrace_thread *ptrace_proc_adopt(struct ptrace_proc *pp, pid_t tid);

/* Drop the threads that are gone from pp->t (a process held stopped for
 * many runs sees threads come and go). Pointers into pp->t are stale. */
void ptrace_proc_compact(struct ptrace_proc *pp);

/* Forget every thread (all detached or gone), keeping the process and its
 * pidfd: the next ptrace_seize_new stops them all again. */
void ptrace_proc_forget(struct ptrace_proc *pp);

/* Seize and interrupt every thread in /proc/PID/task not seized yet,
 * and check that each thread recorded as stopped still is (an exec from
 * another thread kills it and may give its tid to a thread still on its
 * way to a stop). Returns how many are to be waited for anew (0: the set
 * is complete once all are stopped), -ESRCH when the process is gone
 * (pp->gone is set), or -EPERM and friends when ptrace is refused. */
int ptrace_seize_new(struct ptrace_proc *pp);

/* Collect the stops (and exits) that have happened, without blocking:
 * of the threads not stopped yet, and of the stopped ones (a thread
 * killed while stopped must be reaped: an exec waits for it). Returns
 * how many seized threads have not stopped yet. */
size_t ptrace_poll_stops(struct ptrace_proc *pp);

/* Interrupt again the threads that have not stopped every_ns after the
 * last interrupt: a trap that some other stop consumed (any ptrace trap
 * clears a pending PTRACE_INTERRUPT) must not leave a thread running. */
void ptrace_reinterrupt(struct ptrace_proc *pp, uint64_t now, uint64_t every_ns);

/* A thread that has not stopped yet, or NULL. */
struct ptrace_thread *ptrace_laggard(struct ptrace_proc *pp);

/* A thread that has not stopped for a while: if it is a vfork parent
 * (kernel/fork.c wait_for_vfork_done: a killable wait that an interrupt
 * does not end) whose child is one of the processes in stopped[] (all of
 * whose threads we hold), it cannot run until that child execs or exits:
 * mark it PT_BLOCKED and return true. Its registers cannot be read; its
 * memory can (process_vm_readv needs no stop). */
bool ptrace_classify_laggard(struct ptrace_proc *pp, struct ptrace_thread *t, const pid_t *stopped,
			     size_t n_stopped);

/* After every thread stopped: does pidfd still name a live process? If
 * not, the threads we hold belong to whatever reused the pid; detach and
 * mark pp gone. */
void ptrace_check_identity(struct ptrace_proc *pp);

/* Save the thread's registers: NT_PRSTATUS, and NT_X86_XSTATE (or
 * NT_PRFPREG). Precondition: t->state == PT_STOPPED, called on the
 * seizing thread. -ESRCH when it died meanwhile. */
int ptrace_save_regs_stopped(struct ptrace_thread *t);

/* Put registers back into a stopped thread (PTRACE_SETREGSET): NT_PRSTATUS,
 * then the FPU and extended state under its note (fpstate NULL: none),
 * as ptrace_save_regs_stopped saved them from the same thread. The
 * kernel checks what it takes (segments, flags). Called on the seizing
 * thread. Failure point ptrace_setregs (EIO). */
int ptrace_load_regs_stopped(pid_t tid, const void *prstatus, size_t prstatus_len,
			     const void *fpstate, size_t fpstate_len, unsigned fpstate_note);

/* A stopped thread's blocked signals (PTRACE_GETSIGMASK, Linux 3.11), or
 * set them (PTRACE_SETSIGMASK; SIGKILL and SIGSTOP are never blocked).
 * Called on the seizing thread. */
int ptrace_sigmask_stopped(pid_t tid, uint64_t *mask, bool set);

/* The rseq area a stopped thread registered (PTRACE_GET_RSEQ_CONFIGURATION,
 * Linux 5.13): [*addr, *addr + *len), *addr 0 for none. The kernel writes
 * it on the thread's way back to user space (kernel/rseq.c). -EIO on a
 * kernel without the request. Called on the seizing thread. */
int ptrace_rseq_stopped(pid_t tid, uint64_t *addr, uint32_t *len);
/* The same, with the registration's signature (rseq(2) needs it to
 * unregister). */
int ptrace_rseq_sig_stopped(pid_t tid, uint64_t *addr, uint32_t *len, uint32_t *sig);

/* A stopped (or blocked) thread of pp to read its memory and /proc files
 * through (the leader may be a zombie while other threads run), or 0. */
pid_t ptrace_reader_tid(const struct ptrace_proc *pp);

/* Resume the stopped threads: PTRACE_DETACH with the pending signal.
 * Sets last_detach_ns. Safe on every path, and more than once. */
void ptrace_detach_stopped(struct ptrace_proc *pp);

/* Then the threads that had not stopped (or were blocked): wait for
 * their stop until deadline_ns and detach them. One that never stops is
 * released when the seizing thread exits (exit_ptrace), before which it
 * may sit in its stop for a moment. Detach every process's stopped
 * threads first: a blocked vfork parent only moves once its child runs. */
void ptrace_detach_rest(struct ptrace_proc *pp, uint64_t deadline_ns);

/* Both, with a 100 ms deadline. */
void ptrace_detach_all(struct ptrace_proc *pp);

/* Threads in PT_STOPPED. */
size_t ptrace_stopped_count(const struct ptrace_proc *pp);

/* "state D, wchan folio_wait" for a thread that would not stop. */
void ptrace_describe_thread(pid_t pid, pid_t tid, char *buf, size_t len);

/* May we trace pid (a child made for the trial, which the caller then
 * kills and reaps)? PTRACE_SEIZE it and leave it seized: 0 or -errno
 * (-EPERM: Yama's ptrace_scope, or another user's process). For
 * `memvisor check`. */
int ptrace_seize_probe(pid_t pid);

#endif
