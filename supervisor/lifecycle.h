/* Process lifecycle: discovery, exec, exit. Functions named *_locked are
 * called with mv->lock held. */
#ifndef MV_LIFECYCLE_H
#define MV_LIFECYCLE_H

#include "state/call.h"
#include "supervisor/mv.h"

/* The process thread tid belongs to, discovered from /proc when new.
 * NULL when the thread is already gone. */
struct proc *lifecycle_find_locked(struct mv *mv, pid_t tid);

/* An execve/execveat call c by p is about to be let through: remember
 * enough to tell later whether it replaced the address space, and what it
 * asked to run. */
void lifecycle_exec_attempt_locked(struct mv *mv, struct proc *p, const struct mv_call *c);

/* If an exec of p was pending, find out whether it happened, and if so
 * reset p's model and identity. Cheap when nothing is pending. */
void lifecycle_settle_exec_locked(struct mv *mv, struct proc *p);

/* p has exited (its pidfd became readable, or it was reaped). */
void lifecycle_exit_locked(struct mv *mv, struct proc *p);

/* Discover supervised processes that have not notified yet (a forked child
 * that made no memory call) by walking the tree below the reaper. */
void lifecycle_scan_tree(struct mv *mv);

/* Main thread: stop p's exit watcher (at shutdown). */
void lifecycle_unwatch_locked(struct mv *mv, struct proc *p);

/* Main thread: read the identity of processes the notify thread found or
 * saw exec, announce new ones, and watch their exits. */
void lifecycle_watch_new(struct mv *mv);

#endif
