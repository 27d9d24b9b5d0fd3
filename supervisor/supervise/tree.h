/* The supervised tree's tops: where its processes are found and where
 * its orphans go, under `run` (the reaper) and under the agent (a
 * container's init). Both enforce.c and lifecycle.c walk the tree. */
#ifndef MV_TREE_H
#define MV_TREE_H

#include "supervisor/supervise/mv.h"

#include <stddef.h>
#include <sys/types.h>

/* Append the tops of the supervised tree to *v (a growable array of *n
 * pids, *cap allocated): the reaper's children under run, the container's
 * init and the processes adopted by runc exec under the agent. Every supervised process is one of
 * them or below one (procfs_children). */
void tree_tops(struct mv *mv, pid_t **v, size_t *n, size_t *cap);
/* Processes adopted as tops beside the init (runc exec: an exec'd process
 * and its listener): add one (a pidfd kept, so a reused pid is never
 * taken for it; 0 or -errno), or forget it. */
int tree_root_add(struct mv *mv, pid_t pid);
void tree_root_del(struct mv *mv, pid_t pid);

/* The process orphans of the tree are reparented to: the reaper (child
 * subreaper) under run, the container's init under the agent. */
pid_t tree_orphan_parent(const struct mv *mv);

#endif
