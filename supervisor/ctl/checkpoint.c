#include "supervisor/ctl/checkpoint.h"
#include "common/util.h"
#include "supervisor/checkpoint/checkpoint.h"
#include "supervisor/reload/evict.h"
#include "supervisor/rollback/marks.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/lifecycle.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

/* A pidfd of our own for a supervised process: the job checks with it
 * that the pid it stops is still that process. */
static int pidfd_of_locked(struct proc *p)
{
	if (p->pidfd >= 0)
		return fcntl(p->pidfd, F_DUPFD_CLOEXEC, 0);
	return (int)syscall(SYS_pidfd_open, p->pid, 0);
}

static int add_pid(struct mv *mv, struct checkpoint_req *req, json_t *v, size_t idx,
		   struct mv_err *err)
{
	json_t *args = json_pack("{s:O}", "pid", v);
	pid_t pid;
	int rc = ctl_arg_pid(mv, args, "pid", &pid, err);
	json_decref(args);
	if (rc < 0) {
		if (err->code && strcmp(err->code, MV_E_BAD_REQUEST) == 0)
			snprintf(err->msg, sizeof(err->msg),
				 "args.pids[%zu]: expected a process id", idx);
		return -1;
	}
	for (size_t i = 0; i < req->n; i++)
		if (req->pids[i] == pid)
			return 0;
	pthread_mutex_lock(&mv->lock);
	struct proc *p = proctab_get(&mv->procs, pid);
	int fd = p ? pidfd_of_locked(p) : -1;
	pthread_mutex_unlock(&mv->lock);
	if (!p)
		return ctl_fail(err, MV_E_NO_SUCH_PROCESS, "process %d has exited", pid);
	req->pids[req->n] = pid;
	req->pidfds[req->n++] = fd;
	return 0;
}

static int parse_pids(struct mv *mv, json_t *args, struct checkpoint_req *req, struct mv_err *err)
{
	json_t *a = json_object_get(args, "pids"), *v;
	size_t i;
	if (!a) {
		req->all = true;
		return 0;
	}
	if (!json_is_array(a) || json_array_size(a) == 0)
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.pids: expected a non-empty array of process ids");
	req->pids = xcalloc(json_array_size(a), sizeof(*req->pids));
	req->pidfds = xcalloc(json_array_size(a), sizeof(*req->pidfds));
	json_array_foreach(a, i, v) if (add_pid(mv, req, v, i, err) < 0) return -1;
	return 0;
}

static int parse_opts(json_t *args, struct checkpoint_req *req, bool *force, struct mv_err *err)
{
	long long buffer = CKPT_BUFFER_DEFAULT, timeout = CKPT_STOP_TIMEOUT_MS;
	if (ctl_arg_bool_opt(args, "force", force, err) < 0 ||
	    ctl_arg_bool_opt(args, "evict", &req->evict, err) < 0 ||
	    ctl_arg_bool_opt(args, "live", &req->live, err) < 0 ||
	    ctl_arg_int_opt(args, "buffer", &buffer, err) < 0 ||
	    ctl_arg_int_opt(args, "stop_timeout_ms", &timeout, err) < 0)
		return -1;
	if (buffer < (16 << 20) || buffer > (16ll << 30))
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.buffer: between 16 MiB and 16 GiB");
	if (timeout < 1 || timeout > 3600 * 1000)
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.stop_timeout_ms: between 1 and 3600000");
	req->buffer = (size_t)buffer;
	req->stop_timeout_ms = (int)timeout;
	return 0;
}

static int any_running(struct mv *mv, struct mv_err *err)
{
	lifecycle_scan_tree(mv);
	pthread_mutex_lock(&mv->lock);
	size_t n = proctab_running(&mv->procs);
	pthread_mutex_unlock(&mv->lock);
	if (!n)
		return ctl_fail(err, MV_E_NO_SUCH_PROCESS, "no supervised process is running");
	return 0;
}

static int prepare_dir(const char *dir, bool force, struct checkpoint_req *req, struct mv_err *err)
{
	int rc = imgdir_prepare(dir, force, &req->dir, err);
	if (rc == 0)
		return 0;
	/* The message says what; the code is the errno's. */
	err->code = rc == -EACCES || rc == -EPERM || rc == -EROFS ? MV_E_PERMISSION
		    : rc == -ENOMEM || rc == -EIO		  ? MV_E_INTERNAL
								  : MV_E_INVALID;
	return -1;
}

/* An evicted process's pages are in its image, not in its memory: a new
 * checkpoint would miss them. The command the message gives names this
 * supervisor (-n NAME, else --socket PATH): pasted, it reaches this one
 * whichever client asked and however many supervisors run. */
static int evicted_refusal(struct mv *mv, struct mv_err *err)
{
	/* The message has 512 bytes (mv_err): more of a word is never shown. */
	char id[40], dir[4096], qdir[1024], who[512], sel[600] = "";
	if (!evict_some_image(mv->evict, id, sizeof(id), dir, sizeof(dir)))
		return 0;
	const char *self = mv->opts.name ? mv->opts.name : mv->socket_path;
	if (self)
		snprintf(sel, sizeof(sel), "%s %s ", mv->opts.name ? "-n" : "--socket",
			 mv_shell_word(self, who, sizeof(who)));
	return ctl_fail(
	    err, MV_E_BUSY,
	    "memory is evicted to %s: reload it first (memvisor ctl %sreload %s --wait)", dir, sel,
	    mv_shell_word(dir, qdir, sizeof(qdir)));
}

int ctl_cmd_checkpoint(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		       struct mv_err *err)
{
	const char *dir;
	bool force = false;
	if (ctl_arg_string(args, "dir", &dir, err) < 0)
		return -1;
	if (dir[0] != '/')
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.dir: '%s' is not an absolute path",
				dir);
	struct checkpoint_req *req = xcalloc(1, sizeof(*req));
	req->dir.parentfd = req->dir.tmpfd = -1;
	if (parse_opts(args, req, &force, err) < 0 || parse_pids(mv, args, req, err) < 0 ||
	    (req->all && any_running(mv, err) < 0))
		goto fail;
	pthread_mutex_lock(&mv->lock);
	bool busy = jobs_running_locked(mv, JOB_CHECKPOINT);
	/* A mark or rollback holds the threads (one tracer a thread). */
	bool rb = jobs_running_locked(mv, JOB_MARK) || jobs_running_locked(mv, JOB_ROLLBACK);
	const char *mark = NULL;
	pid_t mpid = 0;
	bool marked = rollback_marked_locked(mv, &mark, &mpid);
	bool holding = rollback_holding_locked(mv);
	char mname[64];
	snprintf(mname, sizeof(mname), "%s", marked ? mark : "");
	pthread_mutex_unlock(&mv->lock);
	if (busy || rb) {
		ctl_fail(err, MV_E_BUSY, "a %s is already running",
			 busy ? "checkpoint" : "mark or rollback");
		goto fail;
	}
	if (holding) {
		ctl_fail(err, MV_E_BUSY,
			 "mark %s holds process %d stopped: `memvisor ctl rollback` or `memvisor "
			 "ctl unmark` lets it run",
			 mname, mpid);
		goto fail;
	}
	/* The mark's userfaultfd tracks writes to the private regions; --live
	 * and --evict register them with one of their own, which the kernel
	 * refuses (one userfaultfd a region). */
	if (marked && (req->live || req->evict)) {
		ctl_fail(err, MV_E_BUSY,
			 "mark %s of process %d tracks its memory: --live and --evict cannot "
			 "while it does (memvisor ctl unmark drops it)",
			 mname, mpid);
		goto fail;
	}
	if (evicted_refusal(mv, err) < 0)
		goto fail;
	if (prepare_dir(dir, force, req, err) < 0)
		goto fail;
	struct job *j;
	int rc = jobs_start(mv, JOB_CHECKPOINT, checkpoint_run, req, checkpoint_req_free, &j);
	if (rc == -ESHUTDOWN) {
		ctl_fail(err, MV_E_NO_SUCH_PROCESS,
			 "the supervised command has exited and memvisor is exiting");
		goto fail;
	}
	if (rc < 0) {
		/* jobs_start keeps a failed job without its ctx: ours to free. */
		ctl_fail(err, MV_E_INTERNAL, "cannot start the checkpoint: %s", strerror(-rc));
		goto fail;
	}
	*result = json_pack("{s:i, s:s}", "job", j->id, "dir", req->dir.dir);
	return 0;
fail:
	checkpoint_req_free(req);
	return -1;
}
