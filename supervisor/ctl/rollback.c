/* The control commands mark, rollback and unmark (docs/protocol.md):
 * their arguments and what they wait for; supervisor/rollback/ does the
 * rest. */
#include "common/util.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/reload/evict.h"
#include "supervisor/ctl/rollback.h"
#include "supervisor/rollback/marks.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/lifecycle.h"
#include "supervisor/supervise/point.h"

#include <ctype.h>
#include <errno.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	if (len == 0 || len >= ROLLBACK_NAME_MAX)
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.name: 1 to %d characters",
				ROLLBACK_NAME_MAX - 1);
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return ctl_fail(err, MV_E_BAD_REQUEST,
					"args.name: letters, digits, '.', '_' and '-' only");
	memcpy(out, name, len + 1);
	return 0;
}

/* With args.wait_ms the reply waits for the job just started. */
static void wait_for(struct ctl_call *call, int rc, json_t *result, unsigned wait_ms)
{
	if (rc == 0 && wait_ms) {
		call->wait_job = (int)json_integer_value(json_object_get(result, "job"));
		call->wait_ms = wait_ms;
	}
}

int ctl_cmd_mark(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		 struct mv_err *err)
{
	struct rollback_mark_req *q = xcalloc(1, sizeof(*q));
	q->pidfd = -1;
	if (parse_name(args, q->name, err) < 0)
		goto fail;
	if (!q->name[0])
		snprintf(q->name, sizeof(q->name), "mark");
	unsigned wait_ms = 0;
	if (ctl_arg_bool_opt(args, "hold", &q->hold, err) < 0 ||
	    ctl_arg_wait(args, &wait_ms, err) < 0)
		goto fail;
	if (json_object_get(args, "pid")) {
		if (ctl_arg_pid(mv, args, "pid", &q->pid, err) < 0)
			goto fail;
	} else {
		q->tree = true;
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
	int rc = rollback_start_mark(mv, q, result, err);
	q = NULL; /* the job's, or freed */
	wait_for(call, rc, *result, wait_ms);
	return rc;
fail:
	rollback_mark_req_free(q);
	return -1;
}

/* "SYSCALL" or "SYSCALL:FD" (the call's first argument), or "none" (the
 * time limit only). */
static int parse_until(const char *s, struct rollback_req *q, struct mv_err *err)
{
	char name[64];
	const char *bad_fd;
	int rc = point_split(s, name, sizeof(name), &q->until_fd, &bad_fd);
	if (rc < 0 && !bad_fd)
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.until: SYSCALL or SYSCALL:FD (read:0), or none");
	q->until = true;
	q->until_nr = -1;
	if (!strcmp(name, "none")) {
		q->until_fd = -1;
		if (strchr(s, ':'))
			return ctl_fail(err, MV_E_BAD_REQUEST, "args.until: none takes no FD");
		return 0;
	}
	int nr = seccomp_syscall_resolve_name(name);
	if (nr == __NR_SCMP_ERROR || nr < 0)
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.until: no system call named %s", name);
	if (bad_fd)
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.until: '%s' is not a descriptor number", bad_fd);
	q->until_nr = nr;
	return 0;
}

int ctl_cmd_rollback(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		     struct mv_err *err)
{
	struct rollback_req q = {
	    .until_nr = -1, .until_fd = -1, .timeout_ms = ROLLBACK_UNTIL_TIMEOUT_MS};
	const char *until = NULL;
	long long timeout = -1;
	unsigned wait_ms = 0;
	if (parse_name(args, q.name, err) < 0 ||
	    ctl_arg_string_opt(args, "until", &until, err) < 0 ||
	    ctl_arg_int_opt(args, "timeout_ms", &timeout, err) < 0 ||
	    ctl_arg_bool_opt(args, "close_fds", &q.close_fds, err) < 0 ||
	    ctl_arg_bool_opt(args, "hold", &q.hold, err) < 0 ||
	    ctl_arg_wait(args, &wait_ms, err) < 0)
		return -1;
	if (until && parse_until(until, &q, err) < 0)
		return -1;
	if (until && q.hold)
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.hold: not with args.until, which holds the program where it "
				"stops it");
	if (json_object_get(args, "timeout_ms")) {
		if (!until)
			return ctl_fail(err, MV_E_BAD_REQUEST,
					"args.timeout_ms: only with args.until");
		if (timeout < 1 || timeout > 86400000)
			return ctl_fail(err, MV_E_BAD_REQUEST,
					"args.timeout_ms: 1 to 86400000 (a day)");
		q.timeout_ms = (unsigned)timeout;
	}
	if (busy(mv, err) < 0)
		return -1;
	int rc = rollback_start(mv, &q, result, err);
	wait_for(call, rc, *result, wait_ms);
	return rc;
}

int ctl_cmd_unmark(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		   struct mv_err *err)
{
	char name[ROLLBACK_NAME_MAX];
	if (parse_name(args, name, err) < 0)
		return -1;
	return rollback_unmark(mv, name, result, err);
}
