/* Remote syscalls: making a stopped thread of a supervised process run
 * one system call of our choosing, in its own context (its mm, its fd
 * table, its credentials, its seccomp filter).
 *
 * How: the thread is in a ptrace stop held by the calling thread (the job
 * thread that seized it, ptrace.h). Its registers are saved, rip is
 * pointed at a `syscall` instruction found in the process's [vdso], rax
 * and the argument registers are set, orig_rax is set to -1 (so that the
 * kernel's syscall-restart logic does not rewind the instruction pointer
 * of the interrupted call it was in), one PTRACE_SINGLESTEP runs the
 * instruction, rax is read, and the saved registers are put back (with
 * them the interrupted call's restart state).
 *
 * The injected call passes through the process's seccomp filter: if the
 * filter notifies it, memvisor's notify thread lets it through (it is
 * marked in the supervisor's remote_marks) while the job thread waits here.
 *
 * Failure point (MEMVISOR_FAULT): remote_syscall (EIO before the call).
 * Functions return 0 or -errno. */
#ifndef MV_REMOTE_H
#define MV_REMOTE_H

#include "common/err.h"
#include "supervisor/kernel/ptrace.h"

#include <stdbool.h>
#include <stdint.h>

/* The call being injected, for the notify thread of the same supervisor
 * (one at a time: one checkpoint job at a time injects). */
struct remote_marks {
	_Atomic pid_t tid;
	_Atomic uint64_t ip;
};

struct remote {
	struct remote_marks *marks;
	pid_t pid;
	struct ptrace_thread *t; /* stopped, seized by the calling thread */
	uint64_t sc_addr;	 /* a `syscall` instruction in the [vdso] */
	uint64_t vdso_start, vdso_end;
};

/* Pick a stopped thread of pp to inject into and find the instruction.
 * -ESRCH: no stopped thread; -ENOEXEC: no [vdso] or no `syscall` in it,
 * or the thread runs 32-bit code. */
int remote_open_stopped(struct remote *r, struct ptrace_proc *pp, struct remote_marks *marks);

/* Inject into thread t of the process r was opened on (stopped, seized
 * by the calling thread) from now on. -ESRCH if it is not stopped. */
int remote_use_thread_stopped(struct remote *r, struct ptrace_thread *t);

/* Run syscall nr(args...) in r's thread; its return value (a negative
 * errno for a failed call) in *ret. Returns 0, or -errno when the
 * injection itself failed (-ESRCH: the thread is gone). The thread's
 * registers are what they were on every path where it still lives. */
int remote_syscall_stopped(struct remote *r, long nr, const long args[6], long *ret);

/* Leave r's thread at the `syscall` instruction with call nr (no
 * arguments) set up, instead of where it was: the call is what it runs
 * first once let go (a snapshot parked in pause(2)). Its registers are
 * not put back. */
int remote_park_stopped(struct remote *r, long nr);

/* userfaultfd(O_CLOEXEC|O_NONBLOCK) run in r's process, the fd fetched
 * into ours (pidfd_getfd on pidfd, the process's) and closed there: the
 * process never holds it. 0 with *out, or -errno with err saying why
 * (no userfaultfd for this user: evict and --live need CAP_SYS_PTRACE or
 * vm.unprivileged_userfaultfd=1). */
int remote_userfaultfd_stopped(struct remote *r, int pidfd, int *out, struct mv_err *err);

/* The same with more flags: UFFD_USER_MODE_ONLY (Linux 5.11) makes one
 * that serves only faults of user mode, which any process may make. */
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
int remote_userfaultfd_flags_stopped(struct remote *r, int pidfd, int flags, int *out,
				     struct mv_err *err);

/* Would userfaultfd(2) without UFFD_USER_MODE_ONLY succeed in process
 * pid (fs/userfaultfd.c userfaultfd_syscall_allowed)? vm.unprivileged_
 * userfaultfd=1, or CAP_SYS_PTRACE effective in the initial user
 * namespace. false with why filled when it would fail; true when it would
 * succeed or cannot be told (the call then decides). For a job that must
 * refuse before it copies anything. */
bool remote_userfaultfd_allowed(pid_t pid, char *why, size_t len);

/* The address the kernel clears and wakes when r's thread exits
 * (clear_child_tid: set_tid_address(2), CLONE_CHILD_CLEARTID; pthread_join
 * waits on it), by prctl(PR_GET_TID_ADDRESS) run in the thread (Linux 3.5
 * with CONFIG_CHECKPOINT_RESTORE; -EINVAL without), which writes its
 * answer at scratch: 8 bytes of the process's memory nothing uses (below
 * the thread's stack pointer and its red zone). *addr 0: none. */
int remote_tid_address_stopped(struct remote *r, uint64_t scratch, uint64_t *addr);

/* For the notify thread: is the notified call of thread tid at
 * instruction pointer ip (seccomp_data's: just after the `syscall`) one
 * we are injecting? It is then let through (CONTINUE) without the policy,
 * which is about the program's own calls. */
bool remote_is_injected(struct remote_marks *m, pid_t tid, uint64_t ip);

#endif
