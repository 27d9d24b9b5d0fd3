/* A tracer thread (supervisor/rollback/hold.c): one a mark, that runs the
 * mark's and every rollback's ptrace work and may keep the program
 * stopped between two jobs (`mark --hold`, `rollback --until`).
 *
 * The kernel ties a tracee to the tracer thread, and lets every tracee go
 * when that thread exits (exit_ptrace): a job's own thread could not keep
 * the program stopped after its job. So the jobs post their work here and
 * wait for it. */
#ifndef MV_ROLLBACK_HOLD_H
#define MV_ROLLBACK_HOLD_H

#include "supervisor/checkpoint/checkpoint.h"
#include "supervisor/checkpoint/job.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* Sent to the tracer thread to end a wait for the program (the notify
 * thread's is SIGRTMIN + 3). */
#define RB_WAKE_SIGNAL (SIGRTMIN + 4)

struct rb_hold;
struct mv;

/* Work run on the tracer thread: 0 or -errno. */
typedef int rb_work_fn(struct job *j, void *arg);

/* A tracer for process pid (name: for messages). *holding, a flag of the
 * caller's read under mv->lock, says whether it holds the program. NULL
 * with *err (-errno) when the thread cannot start. */
struct rb_hold *rb_hold_start(struct mv *mv, pid_t pid, const char *name, bool *holding, int *err);
/* Let go of the program and end the thread. */
void rb_hold_stop(struct rb_hold *h);
/* Run fn on the tracer thread and wait for it. */
int rb_hold_call(struct rb_hold *h, struct job *j, rb_work_fn *fn, void *arg);
/* jobs_start_posted's post (hold: the rb_hold): the tracer thread runs
 * the job's run(j) and ends it (job_ran), with no thread of the job's
 * own. -EBUSY while other work is posted. */
int rb_hold_post_job(struct job *j, void *hold);
/* Ask the tracer thread to let the program run (a signal to pass on, a
 * shutdown); it does at once, or when its work ends. */
void rb_hold_release_async(struct rb_hold *h);

/* The rest on the tracer thread only. */

/* Asked to let go (rb_hold_release_async, rb_hold_stop)? */
bool rb_hold_wanted_gone(struct rb_hold *h);
/* Its stop (held: the program is in it), and its request. */
struct ckpt *rb_hold_ckpt(struct rb_hold *h, bool *held);
struct checkpoint_req *rb_hold_req(struct rb_hold *h);
/* Keep the stop after the work. */
void rb_hold_keep(struct rb_hold *h);
/* Resume what is held. */
void rb_hold_let_go(struct rb_hold *h);

/* Stop every thread of pids[0..n) (pidfds: ours, duplicated) as a
 * checkpoint does, into c (with req), in that order: c->p[i] is pids[i].
 * With all, every other process of the tree too (after them). 0, or
 * -errno with c->err filled. */
int rb_stop(struct job *j, const pid_t *pids, const int *pidfds, size_t n, bool all, struct ckpt *c,
	    struct checkpoint_req *req);

/* Resume every thread and free what rb_stop made. */
void rb_release(struct ckpt *c);

#endif
