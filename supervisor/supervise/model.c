#include "supervisor/supervise/model.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/supervise/lifecycle.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

int model_reconcile(struct mv *mv, pid_t pid, enum procmap_source src, struct model_cost *cost)
{
	uint64_t t0 = mv_now_ns();
	pthread_mutex_lock(&mv->lock);
	struct proc *p = proctab_get(&mv->procs, pid);
	if (p)
		lifecycle_settle_exec_locked(mv, p);
	pthread_mutex_unlock(&mv->lock);
	if (!p)
		return -ESRCH;

	/* Read the kernel's layout without the lock: the notify thread goes
	 * on answering meanwhile. */
	struct as_model fresh;
	as_model_init(&fresh);
	uint64_t when = mv_wall_ns();
	int rc = procmap_snapshot(pid, &mv->feat, src, &fresh, &cost->how);
	cost->read_ns = mv_now_ns() - t0;
	if (rc < 0) {
		as_model_free(&fresh);
		return rc;
	}
	fresh.reconciled_ns = when;

	/* Calls logged up to now are matched against this snapshot; any call
	 * logged after the snapshot was read but before this point can only
	 * be attributed to a region that already exists, which is harmless. */
	struct as_log *log = xmalloc(sizeof(*log));
	pthread_mutex_lock(&mv->lock);
	p = proctab_get(&mv->procs, pid);
	if (!p) {
		pthread_mutex_unlock(&mv->lock);
		as_model_free(&fresh);
		free(log);
		return -ESRCH;
	}
	if (p->aslog) {
		*log = *p->aslog;
		as_log_clear(p->aslog);
	} else {
		as_log_clear(log);
	}
	uint64_t exec_ns = p->exec_ns;
	p->exec_ns = 0;
	_cleanup_free_ char *exe = p->exe ? xstrdup(p->exe) : NULL;
	struct as_model old = p->model;
	as_model_init(&p->model);
	pthread_mutex_unlock(&mv->lock);

	as_provenance(&fresh, &old, log, exec_ns, exe);
	as_model_free(&old);
	free(log);

	pthread_mutex_lock(&mv->lock);
	p = proctab_get(&mv->procs, pid);
	if (p) {
		as_model_free(&p->model);
		p->model = fresh;
	} else {
		as_model_free(&fresh);
		rc = -ESRCH;
	}
	pthread_mutex_unlock(&mv->lock);
	cost->total_ns = mv_now_ns() - t0;
	return rc;
}

int model_usage(pid_t pid, uint64_t *mapped, uint64_t *committed)
{
	return procfs_statm(pid, mapped, committed);
}
