#include "state/proc.h"
#include "common/util.h"

#include <string.h>

void proctab_init(struct proctab *t, size_t max_exited)
{
	memset(t, 0, sizeof(*t));
	imap_init(&t->procs);
	imap_init(&t->threads);
	t->max_exited = max_exited;
}

void proc_free(struct proc *p)
{
	if (!p)
		return;
	free(p->exe);
	free(p->cmdline);
	free(p->exec_path);
	free(p->exec_argv);
	as_model_free(&p->model);
	free(p->aslog);
	free(p);
}

void proctab_free(struct proctab *t)
{
	struct proc *p;
	for (size_t i = 0; (p = proctab_next(t, &i));)
		proc_free(p);
	for (size_t i = 0; i < t->n_exited; i++)
		proc_free(t->exited[i]);
	free(t->exited);
	imap_free(&t->procs);
	imap_free(&t->threads);
}

struct proc *proctab_get(struct proctab *t, pid_t pid)
{
	return imap_get(&t->procs, pid);
}

struct proc *proctab_by_tid(struct proctab *t, pid_t tid)
{
	struct proc *p = imap_get(&t->procs, tid);
	return p ? p : imap_get(&t->threads, tid);
}

struct proc *proctab_add(struct proctab *t, pid_t pid, pid_t ppid)
{
	struct proc *p = xcalloc(1, sizeof(*p));
	p->pid = pid;
	p->ppid = ppid;
	p->pidfd = -1;
	p->procfd = -1;
	p->exec_probe_fd = -1;
	p->wait_status = -1;
	p->state = PROC_RUNNING;
	/* A thread of an earlier process may have held this id. */
	imap_del(&t->threads, pid);
	imap_put(&t->procs, pid, p);
	p->seq = ++t->n_seen;
	return p;
}

void proctab_add_thread(struct proctab *t, struct proc *p, pid_t tid)
{
	if (tid != p->pid)
		imap_put(&t->threads, tid, p);
}

void proctab_del_thread(struct proctab *t, pid_t tid)
{
	imap_del(&t->threads, tid);
}

static void drop_threads_of(struct proctab *t, struct proc *p)
{
	/* Collect first: deleting while iterating would shift entries. */
	size_t n = 0, cap = 16;
	int *tids = xmalloc(cap * sizeof(*tids));
	int key;
	void *val;
	for (size_t i = 0; imap_next(&t->threads, &i, &key, &val);) {
		if (val != p)
			continue;
		if (n == cap)
			tids = xrealloc(tids, (cap *= 2) * sizeof(*tids));
		tids[n++] = key;
	}
	for (size_t i = 0; i < n; i++)
		imap_del(&t->threads, tids[i]);
	free(tids);
}

void proctab_drop_threads(struct proctab *t, struct proc *p)
{
	drop_threads_of(t, p);
}

void proctab_exit(struct proctab *t, struct proc *p, uint64_t when_ns)
{
	if (imap_get(&t->procs, p->pid) == p)
		imap_del(&t->procs, p->pid);
	drop_threads_of(t, p);
	p->state = PROC_EXITED;
	p->exit_ns = when_ns;
	/* Only the counters and the identity outlive the process: the model
	 * and the call log (16 KiB) are for queries of a running one. A fork
	 * storm keeps max_exited of these. */
	as_model_free(&p->model);
	as_model_init(&p->model);
	free(p->aslog);
	p->aslog = NULL;
	if (t->n_exited < t->max_exited) {
		if (t->n_exited == t->cap_exited) {
			t->cap_exited = t->cap_exited ? t->cap_exited * 2 : 64;
			t->exited = xrealloc(t->exited, t->cap_exited * sizeof(*t->exited));
		}
		t->exited[t->n_exited++] = p;
		return;
	}
	stats_merge(&t->folded, &p->stats);
	t->n_folded++;
	proc_free(p);
}

struct proc *proctab_find(struct proctab *t, pid_t pid, uint64_t seen_ns)
{
	struct proc *p = imap_get(&t->procs, pid);
	if (p && p->seen_ns == seen_ns)
		return p;
	/* Exits are appended: a process that just exited is near the end. */
	for (size_t i = t->n_exited; i-- > 0;)
		if (t->exited[i]->pid == pid && t->exited[i]->seen_ns == seen_ns)
			return t->exited[i];
	return NULL;
}

struct proc_stats *proctab_stats_of(struct proctab *t, pid_t pid)
{
	struct proc *p = imap_get(&t->procs, pid);
	if (p)
		return &p->stats;
	/* Exits are appended: a process that just exited is near the end. */
	for (size_t i = t->n_exited; i-- > 0;)
		if (t->exited[i]->pid == pid)
			return &t->exited[i]->stats;
	return &t->folded;
}

struct proc *proctab_next(const struct proctab *t, size_t *iter)
{
	void *val;
	return imap_next(&t->procs, iter, NULL, &val) ? val : NULL;
}

struct proc *proctab_next_all(const struct proctab *t, size_t *iter)
{
	if (*iter < t->n_exited)
		return t->exited[(*iter)++];
	size_t slot = *iter - t->n_exited;
	struct proc *p = proctab_next(t, &slot);
	*iter = slot + t->n_exited;
	return p;
}

void proctab_totals(const struct proctab *t, struct proc_stats *out)
{
	struct proc *p;
	for (size_t i = 0; (p = proctab_next_all(t, &i));)
		stats_merge(out, &p->stats);
	stats_merge(out, &t->folded);
}

size_t proctab_running(const struct proctab *t)
{
	return t->procs.len;
}
