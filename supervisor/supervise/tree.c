#include "supervisor/supervise/tree.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	pthread_mutex_lock(&mv->adopt_lock);
	for (size_t i = 0; i < mv->n_roots; i++) {
		/* Signal 0 through the pidfd: alive (or a zombie), never
		 * another process that took its number. */
		if (syscall(SYS_pidfd_send_signal, mv->roots[i].pidfd, 0, NULL, 0) < 0)
			continue;
		if (*n == *cap)
			*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 16) * sizeof(**v));
		(*v)[(*n)++] = mv->roots[i].pid;
	}
	pthread_mutex_unlock(&mv->adopt_lock);
}

int tree_root_add(struct mv *mv, pid_t pid)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -errno;
	pthread_mutex_lock(&mv->adopt_lock);
	if (mv->n_roots == mv->cap_roots)
		mv->roots =
		    xrealloc(mv->roots, (mv->cap_roots = mv->cap_roots ? mv->cap_roots * 2 : 4) *
					    sizeof(*mv->roots));
	mv->roots[mv->n_roots].pid = pid;
	mv->roots[mv->n_roots++].pidfd = pidfd;
	pthread_mutex_unlock(&mv->adopt_lock);
	return 0;
}

void tree_root_del(struct mv *mv, pid_t pid)
{
	pthread_mutex_lock(&mv->adopt_lock);
	for (size_t i = 0; i < mv->n_roots; i++)
		if (mv->roots[i].pid == pid) {
			close(mv->roots[i].pidfd);
			mv->roots[i] = mv->roots[--mv->n_roots];
			break;
		}
	pthread_mutex_unlock(&mv->adopt_lock);
}

pid_t tree_orphan_parent(const struct mv *mv)
{
	return mv->tree_top > 0 ? mv->tree_top : mv->reaper_pid;
}
