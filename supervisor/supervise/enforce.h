/* The supervisor side of the policy (docs/policy.md): loading it before
 * the command starts, the launch filter and the kernel-side pieces
 * (RLIMIT_AS, PR_SET_MDWE, Landlock), the facts decisions need (read from
 * /proc), the limits' accounting across calls and processes, and swapping
 * the policy at run time.
 *
 * Functions named *_locked run with mv->lock held; decisions run on the
 * notify thread, policy swaps on the main thread. Functions that can fail
 * return 0 or -errno. */
#ifndef MV_ENFORCE_H
#define MV_ENFORCE_H

#include "common/err.h"
#include "policy/decide.h"
#include "policy/needs.h"
#include "supervisor/supervise/mv.h"
#include "tracee/launch.h"

#include <jansson.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

/* Read --policy (or take the built-in default) and compile what the launch
 * filter must notify. Prints every error as FILE:LINE:COL: ... and returns
 * -EINVAL for a bad policy. Call before anything starts. */
int enforce_init(struct mv *mv);
void enforce_free(struct mv *mv);

/* The launch filter. prog->filter is malloc'd (filter_free). */
int enforce_filter(struct mv *mv, struct sock_fprog *prog);

/* Fill the launcher's kernel-side pieces of the launch policy. */
int enforce_launch_spec(struct mv *mv, struct launch_spec *spec);

/* memvisor agent: the launch spec's equivalent for a tree that is
 * already running (a container whose runtime loaded the filter): RLIMIT_AS
 * set from outside (prlimit) on every process for max_mapped. PR_SET_MDWE
 * and Landlock cannot be set from outside; decisions stand in for them. */
void enforce_attach(struct mv *mv);
/* After the fork: close what only the launcher needed. */
void enforce_launch_done(struct mv *mv, struct launch_spec *spec);

/* One notified call's decision, on the notify thread:
 *
 *   enforce_begin(mv)                       takes the decision lock
 *   mv->lock: enforce_caller_locked(mv, p, &who)   the caller as it is now
 *   enforce_decide(mv, &who, c, &d)         reads what the policy asks of
 *                                           the kernel, without mv->lock
 *   enforce_end(mv)
 *   mv->lock: enforce_apply_locked(mv, p, &who, &d)  the executable learned,
 *                                           the kill of a "kill" verdict
 *
 * p is NULL when the process could not be found (a decision on the
 * registers alone); at the apply, it is the same process found again
 * (NULL if it is gone). The decision lock comes before mv->lock. */
struct enforce_caller {
	bool known; /* a process was found */
	pid_t pid;
	uint64_t seen_ns; /* with pid, tells the process apart from a reuse */
	unsigned execs;
	bool exe_verified, exe_learned;
	char *exe; /* a copy */
};
void enforce_begin(struct mv *mv);
void enforce_end(struct mv *mv);
void enforce_caller_locked(struct mv *mv, const struct proc *p, struct enforce_caller *who);
void enforce_decide(struct mv *mv, struct enforce_caller *who, const struct mv_call *c,
		    struct pol_decision *d);
void enforce_apply_locked(struct mv *mv, struct proc *p, struct enforce_caller *who,
			  const struct pol_decision *d);

/* What the policy refused so far, for run's exit: "N calls refused: RULE
 * N, ..." in buf (always terminated), one count a rule. Returns its length,
 * 0 (and "") when nothing was refused. Takes the decision lock. */
size_t enforce_refused_summary(struct mv *mv, char *buf, size_t size);

/* The seccomp answer for a decision (resp's id already set). */
void enforce_answer(const struct pol_decision *d, struct seccomp_notif_resp *resp);

/* Lifecycle hooks, under mv->lock: p exec'd (its address space is new) /
 * exited. Applied to the accounting by the next decision. */
void enforce_proc_exec_locked(struct mv *mv, struct proc *p);
void enforce_proc_exit_locked(struct mv *mv, struct proc *p);

/* Main thread: make pol the active policy. Refused (with the reason in
 * err) when the launch filter does not notify what pol needs or a
 * kernel-side piece set at launch would contradict it; then the old
 * policy stays. Takes ownership of pol on success only. */
int enforce_set_policy(struct mv *mv, struct policy *pol, struct mv_err *err);

/* The active policy and how it is enforced, for `ctl policy`. */
json_t *enforce_show(struct mv *mv);

/* The memory calls the launch filter leaves in the kernel, never counted
 * (needs_uncounted_json); NULL without a policy. */
json_t *enforce_uncounted(struct mv *mv);

/* needs_when of the launch filter (fixed: read without a lock); NEEDS_NA
 * without a policy. */
enum needs_when enforce_notify_when(struct mv *mv, enum mv_sc sc);

#endif
