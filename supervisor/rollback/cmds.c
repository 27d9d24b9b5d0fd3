/* The control commands mark, rollback and unmark (docs/protocol.md),
 * and the mark's place in the supervisor (supervisor/rollback/rollback.h). */
#include "common/util.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/reload/evict.h"
#include "supervisor/rollback/mark.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/lifecycle.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

void rollback_free_all(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	struct rb_mark *m = mv->mark;
	mv->mark = NULL;
	pthread_mutex_unlock(&mv->lock);
	rb_mark_free(m);
}

/* Jobs that stop the program (checkpoint, mark, rollback) run one at a
 * time: two tracers of one thread cannot be. */
static int busy(struct mv *mv, struct mv_err *err)
{
	static const enum job_kind kinds[] = {JOB_CHECKPOINT, JOB_MARK, JOB_ROLLBACK};
	pthread_mutex_lock(&mv->lock);
	int k = -1;
	for (size_t i = 0; i < ARRAY_SIZE(kinds) && k < 0; i++)
		if (jobs_running_locked(mv, kinds[i]))
			k = (int)kinds[i];
	pthread_mutex_unlock(&mv->lock);
	if (k >= 0)
		return ctl_fail(err, MV_E_BUSY, "a %s job is running", job_kind_name(k));
	char id[40], dir[4096];
	if (evict_some_image(mv->evict, id, sizeof(id), dir, sizeof(dir)))
		return ctl_fail(err, MV_E_BUSY,
				"memory is evicted to %s: reload it before a mark or a rollback",
				dir);
	return 0;
}

static int parse_name(json_t *args, char *out, struct mv_err *err)
{
	const char *name = NULL;
	if (ctl_arg_string_opt(args, "name", &name, err) < 0)
		return -1;
	if (!name) {
		out[0] = 0;
		return 0;
	}
	size_t len = strlen(name);
	if (len == 0 || len >= RB_NAME_MAX)
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.name: 1 to %d characters",
				RB_NAME_MAX - 1);
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return ctl_fail(err, MV_E_BAD_REQUEST,
					"args.name: letters, digits, '.', '_' and '-' only");
	memcpy(out, name, len + 1);
	return 0;
}

int rollback_cmd_mark(struct mv *mv, json_t *args, json_t **result, struct mv_err *err)
{
	struct rb_mark_req *q = xcalloc(1, sizeof(*q));
	q->pidfd = -1;
	if (parse_name(args, q->name, err) < 0)
		goto fail;
	if (!q->name[0])
		snprintf(q->name, sizeof(q->name), "mark");
	if (json_object_get(args, "pid")) {
		if (ctl_arg_pid(mv, args, "pid", &q->pid, err) < 0)
			goto fail;
	} else {
		lifecycle_scan_tree(mv);
		pthread_mutex_lock(&mv->lock);
		q->pid = mv->cmd_exited ? 0 : mv->cmd_pid;
		pthread_mutex_unlock(&mv->lock);
		if (q->pid <= 0) {
			ctl_fail(err, MV_E_NO_SUCH_PROCESS,
				 "the command has exited: give the pid of a running process");
			goto fail;
		}
	}
	if (busy(mv, err) < 0)
		goto fail;
	/* A pidfd of our own, not a duplicate of the process table's: that
	 * one's open file is in the exits epoll set, which would keep
	 * reporting it after the table closed its descriptor. */
	q->pidfd = (int)syscall(SYS_pidfd_open, q->pid, 0);
	if (q->pidfd < 0) {
		ctl_fail(err, MV_E_NO_SUCH_PROCESS, "process %d has exited", q->pid);
		goto fail;
	}
	struct job *j;
	pid_t pid = q->pid;
	char name[RB_NAME_MAX];
	memcpy(name, q->name, sizeof(name));
	int rc = jobs_start(mv, JOB_MARK, rb_mark_run, q, rb_mark_req_free, &j);
	if (rc < 0) {
		ctl_fail(err, rc == -ESHUTDOWN ? MV_E_NO_SUCH_PROCESS : MV_E_INTERNAL,
			 "cannot start the mark: %s", strerror(-rc));
		goto fail;
	}
	*result = json_pack("{s:i, s:s, s:i}", "job", j->id, "name", name, "pid", pid);
	return 0;
fail:
	rb_mark_req_free(q);
	return -1;
}

static void unbusy(void *ctx)
{
	struct rb_mark *m = ctx;
	pthread_mutex_lock(&m->mv->lock);
	m->busy = false;
	pthread_mutex_unlock(&m->mv->lock);
}

/* The mark asked for (by name, or the one there is), under mv->lock. */
static struct rb_mark *find_locked(struct mv *mv, const char *name, struct mv_err *err)
{
	struct rb_mark *m = mv->mark;
	if (!m) {
		ctl_fail(err, MV_E_INVALID, "no mark: `memvisor ctl mark` makes one");
		return NULL;
	}
	if (name[0] && strcmp(name, m->name) != 0) {
		ctl_fail(err, MV_E_INVALID, "no mark named %s (the mark is %s)", name, m->name);
		return NULL;
	}
	if (m->busy) {
		ctl_fail(err, MV_E_BUSY, "a rollback to mark %s is running", m->name);
		return NULL;
	}
	return m;
}

int rollback_cmd_rollback(struct mv *mv, json_t *args, json_t **result, struct mv_err *err)
{
	char name[RB_NAME_MAX];
	if (parse_name(args, name, err) < 0 || busy(mv, err) < 0)
		return -1;
	pthread_mutex_lock(&mv->lock);
	struct rb_mark *m = find_locked(mv, name, err);
	if (m)
		m->busy = true;
	pthread_mutex_unlock(&mv->lock);
	if (!m)
		return -1;
	struct job *j;
	int rc = jobs_start(mv, JOB_ROLLBACK, rb_rollback_run, m, unbusy, &j);
	if (rc < 0) {
		unbusy(m);
		return ctl_fail(err, rc == -ESHUTDOWN ? MV_E_NO_SUCH_PROCESS : MV_E_INTERNAL,
				"cannot start the rollback: %s", strerror(-rc));
	}
	*result = json_pack("{s:i, s:s, s:i}", "job", j->id, "name", m->name, "pid", m->pid);
	return 0;
}

int rollback_cmd_unmark(struct mv *mv, json_t *args, json_t **result, struct mv_err *err)
{
	char name[RB_NAME_MAX];
	if (parse_name(args, name, err) < 0)
		return -1;
	pthread_mutex_lock(&mv->lock);
	bool marking = jobs_running_locked(mv, JOB_MARK);
	struct rb_mark *m = marking ? NULL : find_locked(mv, name, err);
	if (m)
		mv->mark = NULL;
	pthread_mutex_unlock(&mv->lock);
	if (marking)
		return ctl_fail(err, MV_E_BUSY, "a mark job is running");
	if (!m)
		return -1;
	*result = json_pack("{s:s, s:i, s:I}", "name", m->name, "pid", m->pid, "rollbacks",
			    (json_int_t)m->rollbacks);
	rb_mark_free(m);
	return 0;
}
