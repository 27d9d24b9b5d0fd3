#include "supervisor/supervise/tree.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/supervise/notify.h"

void tree_tops(struct mv *mv, pid_t **v, size_t *n, size_t *cap)
{
	if (mv->tree_top <= 0) {
		size_t from = *n;
		if (mv->reaper_pid > 0)
			procfs_children(mv->reaper_pid, v, n, cap);
		/* A mark's snapshot is the reaper's child, not the tree's. */
		pid_t snap = atomic_load(&mv->rb_snapshot);
		for (size_t i = from; snap > 0 && i < *n; i++)
			if ((*v)[i] == snap) {
				(*v)[i] = (*v)[--*n];
				break;
			}
		return;
	}
	if (*n == *cap)
		*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 16) * sizeof(**v));
	(*v)[(*n)++] = mv->tree_top;
	/* Processes that came in by runc exec, with a listener of their own:
	 * not below the init until they die and their children are
	 * reparented to it. */
	notify_adopted_roots(mv, v, n, cap);
}

pid_t tree_orphan_parent(const struct mv *mv)
{
	return mv->tree_top > 0 ? mv->tree_top : mv->reaper_pid;
}
