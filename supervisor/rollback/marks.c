/* The mark's place in the supervisor: which there is, starting its jobs,
 * dropping it (supervisor/rollback/marks.h). */
#include "common/util.h"
#include "supervisor/rollback/mark.h"
#include "supervisor/supervise/mv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rollback_marked_locked(struct mv *mv, const char **name, pid_t *pid)
{
	if (!mv->mark)
		return 0;
	if (name)
		*name = mv->mark->name;
	if (pid)
		*pid = mv->mark->pid;
	return 1;
}

json_t *rollback_status_json_locked(struct mv *mv)
{
	struct rb_mark *m = mv->mark;
	if (!m)
		return json_null();
	json_t *pids = json_array();
	uint64_t kept = 0;
	for (size_t i = 0; i <= m->n_members; i++) {
		const struct rb_mark *x = rb_proc(m, i);
		json_array_append_new(pids, json_integer(x->pid));
		kept += x->base_bytes + x->snap_bytes;
	}
	return json_pack("{s:s, s:o, s:I, s:I, s:b}", "name", m->name, "pids", pids,
			 "baseline_bytes", (json_int_t)kept, "rollbacks", (json_int_t)m->rollbacks,
			 "held", m->holding);
}

void rollback_free_all(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	struct rb_mark *m = mv->mark;
	mv->mark = NULL;
	pthread_mutex_unlock(&mv->lock);
	rb_mark_free(m);
}

bool rollback_holding_locked(struct mv *mv)
{
	return mv->mark && mv->mark->holding;
}

void rollback_process_exited(struct mv *mv, pid_t pid)
{
	pthread_mutex_lock(&mv->lock);
	if (mv->mark && mv->mark->pid == pid)
		rb_snap_kill(&mv->mark->snap);
	pthread_mutex_unlock(&mv->lock);
}

void rollback_unhold(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	struct rb_mark *m = mv->mark;
	if (m && (m->holding || jobs_running_locked(mv, JOB_ROLLBACK)))
		rb_hold_release_async(m->hold);
	pthread_mutex_unlock(&mv->lock);
}

void rollback_mark_req_free(struct rollback_mark_req *q)
{
	rb_mark_req_free(q);
}

int rollback_start_mark(struct mv *mv, struct rollback_mark_req *q, json_t **result,
			struct mv_err *err)
{
	struct job *j;
	pid_t pid = q->pid;
	char name[RB_NAME_MAX];
	memcpy(name, q->name, sizeof(name));
	int rc = jobs_start(mv, JOB_MARK, rb_mark_run, q, rb_mark_req_free, &j);
	if (rc < 0) {
		if (rc == -ESHUTDOWN) /* else the job's, freed with it */
			rb_mark_req_free(q);
		return mv_err_set(err, -1, rc == -ESHUTDOWN ? MV_E_NO_SUCH_PROCESS : MV_E_INTERNAL,
				  "cannot start the mark: %s", strerror(-rc));
	}
	*result = json_pack("{s:i, s:s, s:i}", "job", j->id, "name", name, "pid", pid);
	return 0;
}

/* The mark asked for (by name, or the one there is), under mv->lock. */
static struct rb_mark *find_locked(struct mv *mv, const char *name, struct mv_err *err)
{
	struct rb_mark *m = mv->mark;
	if (!m) {
		mv_err_set(err, -1, MV_E_INVALID, "no mark: `memvisor ctl mark` makes one");
		return NULL;
	}
	if (name[0] && strcmp(name, m->name) != 0) {
		mv_err_set(err, -1, MV_E_INVALID, "no mark named %s (the mark is %s)", name,
			   m->name);
		return NULL;
	}
	if (jobs_running_locked(mv, JOB_ROLLBACK)) {
		mv_err_set(err, -1, MV_E_BUSY, "a rollback to mark %s is running", m->name);
		return NULL;
	}
	return m;
}

int rollback_start(struct mv *mv, const struct rollback_req *q, json_t **result, struct mv_err *err)
{
	pthread_mutex_lock(&mv->lock);
	struct rb_mark *m = find_locked(mv, q->name, err);
	pthread_mutex_unlock(&mv->lock);
	if (!m)
		return -1;
	struct rb_rollback_job *rj = xcalloc(1, sizeof(*rj));
	rj->m = m;
	rj->q = *q;
	struct job *j;
	/* rj is freed when the job is joined, which may be after the mark is
	 * gone: nothing but free. A rollback's state (running, then done or
	 * failed, under mv->lock) is what says that it holds the mark. */
	rj->t_request = mv_now_ns();
	/* Run on the mark's tracer thread, which does the ptrace work: a
	 * thread of its own would cost a start and two hand-overs a
	 * rollback. */
	int rc = jobs_start_posted(mv, JOB_ROLLBACK, rb_rollback_run, rj, free, rb_hold_post_job,
				   m->hold, &j);
	if (rc < 0) {
		if (rc == -ESHUTDOWN) /* else the job's, freed with it */
			free(rj);
		return mv_err_set(err, -1, rc == -ESHUTDOWN ? MV_E_NO_SUCH_PROCESS : MV_E_INTERNAL,
				  "cannot start the rollback: %s", strerror(-rc));
	}
	*result = json_pack("{s:i, s:s, s:i}", "job", j->id, "name", m->name, "pid", m->pid);
	return 0;
}

int rollback_unmark(struct mv *mv, const char *name, json_t **result, struct mv_err *err)
{
	pthread_mutex_lock(&mv->lock);
	bool marking = jobs_running_locked(mv, JOB_MARK);
	struct rb_mark *m = marking ? NULL : find_locked(mv, name, err);
	if (m)
		mv->mark = NULL;
	pthread_mutex_unlock(&mv->lock);
	if (marking)
		return mv_err_set(err, -1, MV_E_BUSY, "a mark job is running");
	if (!m)
		return -1;
	*result = json_pack("{s:s, s:i, s:I}", "name", m->name, "pid", m->pid, "rollbacks",
			    (json_int_t)m->rollbacks);
	rb_mark_free(m);
	return 0;
}
