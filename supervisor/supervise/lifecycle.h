/* Process lifecycle: discovery, exec, exit. Functions named *_locked are
 * called with mv->lock held. */
#ifndef MV_LIFECYCLE_H
#define MV_LIFECYCLE_H

#include "state/call.h"
#include "supervisor/supervise/mv.h"

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

/* Main thread, at shutdown: ask the last time for the exit statuses of
 * exited processes not reaped when they exited (the tree is empty now). */
void lifecycle_late_exits(struct mv *mv);

/* Main thread: the exits epoll set is readable; retire who exited, and
 * take the exit status of who has been reaped since. */
void lifecycle_exits_ready(struct mv *mv);

/* Main thread, before answering a query: find processes that have not
 * notified yet, and read the identity (exe, cmdline, parent) of those
 * whose identity came from their parent or their execve's arguments. */
void lifecycle_refresh(struct mv *mv);

#endif
