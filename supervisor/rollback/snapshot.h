/* The mark's baseline as a copy-on-write snapshot: a child of memvisor's
 * reaper made by a clone(2) run in the stopped program, which never runs
 * the program's code (docs/rollback.md, "What a mark takes").
 *
 * The clone shares every private page with the program, copy-on-write:
 * the mark costs a fork's page-table copy instead of a copy of every page
 * present (1 GiB: tens of milliseconds, not seconds), and only the pages
 * the program writes since take memory twice. A rollback reads the bytes
 * it puts back from the snapshot's /proc/PID/mem. The snapshot is made
 * inert before it is let go: every signal blocked, its descriptors
 * closed, a session of its own, and its registers set to call pause(2),
 * in which it sleeps until memvisor kills it. */
#ifndef MV_ROLLBACK_SNAPSHOT_H
#define MV_ROLLBACK_SNAPSHOT_H

#include "supervisor/checkpoint/job.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct mv;

struct rb_snap {
	struct mv *mv;
	pid_t pid; /* 0: none */
	int pidfd; /* ours */
	int memfd; /* its /proc/PID/mem, read-only */
};

/* Make the snapshot of c's process (stopped; its first thread injects).
 * 0 with *s filled; 1 when it cannot be made here, with why filled (the
 * mark then copies its baseline); never a failure of the mark: anything
 * made is undone. Only a process whose parent is memvisor's reaper (the
 * command, an orphan) gets one: the clone is made its sibling
 * (CLONE_PARENT), so the program never sees it as a child. */
int rb_snap_make(struct ckpt *c, struct rb_snap *s, char *why, size_t len);

/* Kill it (the reaper reaps it) and close what we hold. */
void rb_snap_drop(struct rb_snap *s);
/* Kill it only (any thread: the process it copied has exited, and a
 * rollback may be reading it). */
void rb_snap_kill(struct rb_snap *s);

/* Read the snapshot's rem[0..n) into loc[0..n) (total bytes in all):
 * one process_vm_readv, or, should it read less (or be refused), each
 * range through /proc/PID/mem. 0 or -errno. */
struct iovec;
int rb_snap_readv(const struct rb_snap *s, const struct iovec *loc, const struct iovec *rem,
		  size_t n, size_t total);

#endif
