/* The control commands (docs/protocol.md): the table, the argument
 * helpers, and the commands that report on processes and memory. */
#include "supervisor/ctl/ctl.h"
#include "supervisor/rollback/marks.h"
#include "common/jsonw.h"
#include "common/util.h"
#include "supervisor/ctl/checkpoint.h"
#include "supervisor/ctl/metrics.h"
#include "supervisor/reload/evict.h"
#include "supervisor/ctl/reload.h"
#include "supervisor/ctl/rollback.h"
#include "supervisor/ctl/policy.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/lifecycle.h"
#include "supervisor/supervise/model.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/supervise/render.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* 2: every time is integer nanoseconds (*_ns), every rate integer bytes
 * a second; 1 had seconds as reals. */
#define PROTOCOL_VERSION 2

/* ---- arguments ------------------------------------------------------ */

int ctl_arg_int_opt(json_t *args, const char *key, long long *out, struct mv_err *err)
{
	json_t *v = json_object_get(args, key);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.%s: expected an integer", key);
	*out = json_integer_value(v);
	return 0;
}

int ctl_arg_wait(json_t *args, unsigned *ms, struct mv_err *err)
{
	long long v = 0;
	if (ctl_arg_int_opt(args, "wait_ms", &v, err) < 0)
		return -1;
	if (v < 0 || v > 86400000)
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.wait_ms: 0 to 86400000 (a day)");
	*ms = (unsigned)v;
	return 0;
}

int ctl_arg_int(json_t *args, const char *key, long long *out, struct mv_err *err)
{
	if (!json_object_get(args, key))
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.%s: missing (expected an integer)",
				key);
	return ctl_arg_int_opt(args, key, out, err);
}

int ctl_arg_string_opt(json_t *args, const char *key, const char **out, struct mv_err *err)
{
	json_t *v = json_object_get(args, key);
	if (!v)
		return 0;
	if (!json_is_string(v))
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.%s: expected a string", key);
	*out = json_string_value(v);
	return 0;
}

int ctl_arg_string(json_t *args, const char *key, const char **out, struct mv_err *err)
{
	if (!json_object_get(args, key))
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.%s: missing (expected a string)", key);
	return ctl_arg_string_opt(args, key, out, err);
}

int ctl_arg_bool_opt(json_t *args, const char *key, bool *out, struct mv_err *err)
{
	json_t *v = json_object_get(args, key);
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.%s: expected true or false", key);
	*out = json_is_true(v);
	return 0;
}

int ctl_arg_pid(struct mv *mv, json_t *args, const char *key, pid_t *out, struct mv_err *err)
{
	long long v = 0;
	if (ctl_arg_int(args, key, &v, err) < 0)
		return -1;
	if (v <= 0 || v > INT32_MAX)
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.%s: %lld is not a process id", key, v);
	pthread_mutex_lock(&mv->lock);
	bool known = proctab_get(&mv->procs, (pid_t)v) != NULL;
	pthread_mutex_unlock(&mv->lock);
	if (!known) {
		/* It may be a child that has made no memory call yet. */
		lifecycle_scan_tree(mv);
		pthread_mutex_lock(&mv->lock);
		known = proctab_get(&mv->procs, (pid_t)v) != NULL;
		pthread_mutex_unlock(&mv->lock);
	}
	if (!known)
		return ctl_fail(err, MV_E_NO_SUCH_PROCESS,
				"process %lld is not supervised by this memvisor", v);
	*out = (pid_t)v;
	return 0;
}

/* ---- hello, status -------------------------------------------------- */

static void append_name(const char *name, void *arg)
{
	json_array_append_new(arg, json_string(name));
}

static json_t *uffd_features_json(uint64_t f)
{
	json_t *a = json_array();
	features_uffd_names(f, append_name, a);
	return a;
}

static json_t *features_json(const struct features *f)
{
	return json_pack("{s:s, s:{s:b, s:b}, s:b, s:b, s:b, s:b, s:b, s:{s:b, s:b, s:o}}",
			 "kernel", f->kernel, "user_notif", "sync_wake_up", f->sync_wake_up,
			 "wait_killable_recv", f->wait_killable_recv, "procmap_query",
			 f->procmap_query, "pagemap_scan", f->pagemap_scan, "pidfd", f->pidfd,
			 "pidfd_getfd", f->pidfd_getfd, "mdwe", f->mdwe, "userfaultfd", "dev",
			 f->uffd_dev, "syscall", f->uffd_syscall, "features",
			 uffd_features_json(f->uffd_features));
}

static json_t *command_json(struct mv *mv)
{
	json_t *a = json_array();
	for (int i = 0; i < mv->opts.argc; i++)
		json_array_append_new(a, json_string(mv->opts.argv[i]));
	return a;
}

static int ctl_cmd_hello(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			 struct mv_err *err)
{
	json_t *cmds = json_array();
	size_t n;
	const struct ctl_cmd *t = ctl_cmd_table(&n);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    cmds, json_pack("{s:s, s:s}", "name", t[i].name, "summary", t[i].summary));
	*result = json_pack("{s:s, s:i, s:i, s:o, s:o, s:s, s:o, s:o}", "memvisor", MV_VERSION,
			    "protocol", PROTOCOL_VERSION, "pid", mv->self, "name",
			    mv->opts.name ? json_string(mv->opts.name) : json_null(), "command",
			    command_json(mv), "socket", mv->socket_path ? mv->socket_path : "",
			    "features", features_json(&mv->feat), "commands", cmds);
	return 0;
}

/* Pids of the running processes, sorted, after discovering new ones. */
static pid_t *running_pids(struct mv *mv, size_t *n)
{
	lifecycle_refresh(mv);
	pthread_mutex_lock(&mv->lock);
	*n = proctab_running(&mv->procs);
	pid_t *v = xcalloc(*n + 1, sizeof(*v));
	struct proc *p;
	size_t k = 0;
	for (size_t i = 0; (p = proctab_next(&mv->procs, &i)) && k < *n;)
		v[k++] = p->pid;
	pthread_mutex_unlock(&mv->lock);
	*n = k;
	for (size_t i = 1; i < k; i++)
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			pid_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return v;
}

/* What the counts leave out: the memory calls decided in the kernel. */
static void set_uncounted(struct mv *mv, json_t *result)
{
	json_t *u = enforce_uncounted(mv);
	if (u)
		json_object_set_new(result, "uncounted", u);
}

static int ctl_cmd_status(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			  struct mv_err *err)
{
	size_t n;
	_cleanup_free_ pid_t *pids = running_pids(mv, &n);
	uint64_t mapped = 0, committed = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t m, r;
		if (model_usage(pids[i], &m, &r) == 0) {
			mapped += m;
			committed += r;
		}
	}
	pthread_mutex_lock(&mv->lock);
	struct proc_stats *all = xcalloc(1, sizeof(*all));
	proctab_totals(&mv->procs, all);
	uint64_t denials = stats_verdict_calls(all, MV_V_DENY),
		 kills = stats_verdict_calls(all, MV_V_KILL);
	free(all);
	json_t *totals =
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "mapped", (json_int_t)mapped, "committed",
		      (json_int_t)committed, "notifications", (json_int_t)mv->notifications,
		      "denials", (json_int_t)denials, "kills", (json_int_t)kills);
	*result = json_pack(
	    "{s:I, s:o, s:i, s:s, s:o, s:i, s:I, s:o, s:o}", "uptime_ns",
	    (json_int_t)(mv_now_ns() - mv->start_ns), "command", command_json(mv), "command_pid",
	    mv->cmd_pid, "command_state", mv->cmd_exited ? "exited" : "running", "exit_status",
	    mv->cmd_exited ? json_integer(mv_exit_code(mv->cmd_status)) : json_null(), "processes",
	    (int)n, "processes_seen", (json_int_t)mv->procs.n_seen, "totals", totals, "jobs",
	    jobs_json_locked(mv, true));
	json_object_set_new(*result, "mark", rollback_status_json_locked(mv));
	pthread_mutex_unlock(&mv->lock);
	json_object_set_new(*result, "evicted", evict_status_json(mv->evict));
	set_uncounted(mv, *result);
	return 0;
}

/* ---- ps ------------------------------------------------------------- */

static const char *state_word(char s)
{
	switch (s) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "disk-sleep";
	case 'T':
		return "stopped";
	case 't':
		return "tracing-stop";
	case 'Z':
		return "zombie";
	case 'X':
		return "dead";
	case 'I':
		return "idle";
	default:
		return "unknown";
	}
}

static int ctl_cmd_ps(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		      struct mv_err *err)
{
	size_t n;
	_cleanup_free_ pid_t *pids = running_pids(mv, &n);
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++) {
		struct proc_stat st;
		uint64_t mapped = 0, committed = 0;
		if (procfs_stat(pids[i], &st) < 0 || st.state == 'Z' || st.state == 'X')
			continue; /* exited since we listed it */
		model_usage(pids[i], &mapped, &committed);
		pthread_mutex_lock(&mv->lock);
		struct proc *p = proctab_get(&mv->procs, pids[i]);
		if (p)
			json_array_append_new(
			    list,
			    json_pack("{s:i, s:i, s:i, s:s, s:o, s:o, s:I, s:I, s:I, s:i, s:I}",
				      "pid", p->pid, "ppid", st.ppid, "threads", st.num_threads,
				      "state", state_word(st.state), "exe",
				      p->exe ? json_string(p->exe) : json_null(), "cmdline",
				      render_cmdline(p), "mapped", (json_int_t)mapped, "committed",
				      (json_int_t)committed, "calls", (json_int_t)p->notified_calls,
				      "execs", (int)p->execs, "started_ns",
				      (json_int_t)p->seen_ns));
		pthread_mutex_unlock(&mv->lock);
	}
	*result = json_pack("{s:o}", "processes", list);
	return 0;
}

/* ---- regions -------------------------------------------------------- */

static void origin_json_w(struct jw *w, const char *key, const struct as_origin *o)
{
	jw_key(w, key);
	if (o->sc == MV_SC_UNKNOWN) {
		jw_null(w);
		return;
	}
	jw_obj(w);
	jw_kstr(w, "syscall", syscalls_name(o->sc));
	jw_ku64(w, "time_ns", o->time_ns);
	jw_obj_end(w);
}

/* One region (docs/protocol.md, regions). */
static void region_json_w(struct jw *w, const struct as_region *r)
{
	char prot[4], dev[24];
	snprintf(dev, sizeof(dev), "%02x:%02x", r->dev_major, r->dev_minor);
	jw_obj(w);
	jw_khex(w, "start", r->start);
	jw_khex(w, "end", r->end);
	jw_ku64(w, "size", r->end - r->start);
	jw_kstr(w, "prot", render_prot(r->prot, prot));
	jw_kbool(w, "shared", r->shared);
	jw_kstr(w, "kind", as_kind_name(r->kind));
	jw_kstr(w, "path", r->path);
	jw_ku64(w, "offset", r->offset);
	jw_ku64(w, "inode", r->inode);
	jw_kstr(w, "dev", dev);
	jw_ku64(w, "committed", r->committed);
	origin_json_w(w, "created_by", &r->created);
	origin_json_w(w, "changed_by", &r->changed);
	jw_obj_end(w);
}

/* An address argument: an integer, or a "0x..." string. */
static int arg_addr_opt(json_t *args, const char *key, uint64_t *out, struct mv_err *err)
{
	json_t *v = json_object_get(args, key);
	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	const char *s = json_string_value(v);
	char *end;
	if (s && *s) {
		errno = 0;
		unsigned long long a = strtoull(s, &end, 0);
		if (!*end && !errno) {
			*out = a;
			return 0;
		}
	}
	return ctl_fail(err, MV_E_BAD_REQUEST,
			"args.%s: expected an address (integer or \"0x...\")", key);
}

static int parse_source(json_t *args, enum procmap_source *src, struct mv_err *err)
{
	const char *s = "auto";
	if (ctl_arg_string_opt(args, "source", &s, err) < 0)
		return -1;
	if (strcmp(s, "auto") == 0)
		*src = PROCMAP_SRC_AUTO;
	else if (strcmp(s, "procmap_query") == 0)
		*src = PROCMAP_SRC_QUERY;
	else if (strcmp(s, "maps") == 0)
		*src = PROCMAP_SRC_MAPS;
	else
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.source: '%s' is not one of auto, procmap_query, maps", s);
	return 0;
}

static int ctl_cmd_regions(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			   struct mv_err *err)
{
	pid_t pid;
	enum procmap_source src = PROCMAP_SRC_AUTO;
	uint64_t from = 0;
	long long limit = -1;
	bool summary = false;
	if (ctl_arg_pid(mv, args, "pid", &pid, err) < 0 || parse_source(args, &src, err) < 0 ||
	    arg_addr_opt(args, "from", &from, err) < 0 ||
	    ctl_arg_int_opt(args, "limit", &limit, err) < 0 ||
	    ctl_arg_bool_opt(args, "summary", &summary, err) < 0)
		return -1;
	if (json_object_get(args, "limit") && limit < 0)
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.limit: must not be negative");
	if (src == PROCMAP_SRC_QUERY && !mv->feat.procmap_query)
		return ctl_fail(err, MV_E_NOT_SUPPORTED,
				"this kernel has no PROCMAP_QUERY (Linux 6.11)");
	struct model_cost cost = {0};
	int rc = model_reconcile(mv, pid, src, &cost);
	if (rc == -ESRCH)
		return ctl_fail(err, MV_E_NO_SUCH_PROCESS, "process %d has exited", pid);
	if (rc < 0)
		return ctl_fail(err, MV_E_INTERNAL, "reading the layout of %d: %s", pid,
				strerror(-rc));
	pthread_mutex_lock(&mv->lock);
	struct proc *p = proctab_get(&mv->procs, pid);
	if (!p) {
		pthread_mutex_unlock(&mv->lock);
		return ctl_fail(err, MV_E_NO_SUCH_PROCESS, "process %d has exited", pid);
	}
	const struct as_model *m = &p->model;
	struct jw w;
	jw_init(&w, 0);
	jw_obj(&w);
	jw_ki64(&w, "pid", pid);
	jw_kstr(&w, "source", cost.how);
	jw_ku64(&w, "time_ns", m->reconciled_ns);
	jw_ku64(&w, "reconcile_ns", cost.total_ns);
	jw_ku64(&w, "count", m->n);
	jw_ku64(&w, "mapped", m->mapped);
	jw_ku64(&w, "committed", m->committed);
	if (!summary) {
		size_t i = 0, shown = 0;
		while (i < m->n && m->r[i].end <= from)
			i++;
		jw_key(&w, "regions");
		jw_arr(&w);
		for (; i < m->n && (limit < 0 || shown < (size_t)limit); i++, shown++)
			region_json_w(&w, &m->r[i]);
		jw_arr_end(&w);
		if (i < m->n)
			jw_khex(&w, "next", m->r[i].start);
		else {
			jw_key(&w, "next");
			jw_null(&w);
		}
	}
	jw_obj_end(&w);
	pthread_mutex_unlock(&mv->lock);
	call->raw_result = w.buf;
	return 0;
}

/* ---- stats ---------------------------------------------------------- */

static json_t *proc_stats_json(const struct proc *p)
{
	return json_pack("{s:i, s:o, s:b, s:o}", "pid", p->pid, "exe",
			 p->exe ? json_string(p->exe) : json_null(), "exited",
			 p->state == PROC_EXITED, "stats", render_stats(&p->stats));
}

static int ctl_cmd_stats(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			 struct mv_err *err)
{
	lifecycle_refresh(mv);
	if (json_object_get(args, "pid")) {
		pid_t pid;
		if (ctl_arg_pid(mv, args, "pid", &pid, err) < 0)
			return -1;
		pthread_mutex_lock(&mv->lock);
		struct proc *p = proctab_get(&mv->procs, pid);
		*result = p ? proc_stats_json(p) : NULL;
		pthread_mutex_unlock(&mv->lock);
		if (!*result)
			return ctl_fail(err, MV_E_NO_SUCH_PROCESS, "process %d has exited", pid);
		set_uncounted(mv, *result);
		return 0;
	}
	json_t *list, *totals;
	pthread_mutex_lock(&mv->lock);
	render_procs(&mv->procs, proc_stats_json, &list, &totals);
	*result = json_pack("{s:I, s:I, s:o, s:o}", "notifications", (json_int_t)mv->notifications,
			    "processes_folded", (json_int_t)mv->procs.n_folded, "totals", totals,
			    "processes", list);
	pthread_mutex_unlock(&mv->lock);
	set_uncounted(mv, *result);
	return 0;
}

/* ---- events, jobs --------------------------------------------------- */

static int ctl_cmd_events(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			  struct mv_err *err)
{
	call->subscribe = true;
	*result = json_pack("{s:b}", "subscribed", 1);
	set_uncounted(mv, *result);
	return 0;
}

/* The job args.id names, with mv->lock held (the caller unlocks); NULL
 * with err filled (bad_request) when there is none. */
static struct job *arg_job_locked(struct mv *mv, json_t *args, struct mv_err *err)
{
	long long id = 0;
	if (ctl_arg_int(args, "id", &id, err) < 0)
		return NULL;
	bool valid = id > 0 && id < INT32_MAX;
	struct job *j = valid ? jobs_find_locked(mv, (int)id) : NULL;
	if (!j && valid && jobs_forgotten_locked(mv, (int)id))
		ctl_fail(err, MV_E_BAD_REQUEST,
			 "args.id: job %lld is no longer kept (memvisor keeps the last 64 "
			 "finished jobs)",
			 id);
	else if (!j)
		ctl_fail(err, MV_E_BAD_REQUEST, "args.id: no job %lld", id);
	return j;
}

static int ctl_cmd_job(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		       struct mv_err *err)
{
	unsigned wait_ms = 0;
	if (ctl_arg_wait(args, &wait_ms, err) < 0)
		return -1;
	pthread_mutex_lock(&mv->lock);
	struct job *j = arg_job_locked(mv, args, err);
	*result = j ? job_json_locked(j) : NULL;
	if (j && wait_ms && j->state == JOB_RUNNING) {
		call->wait_job = j->id;
		call->wait_ms = wait_ms;
	}
	pthread_mutex_unlock(&mv->lock);
	return *result ? 0 : -1;
}

/* job_cancel and job_unthrottle: the flag is set here; the worker acts
 * on it (jobs.h). The result is the job as it is now. */
static int job_ask(struct mv *mv, json_t *args, bool unthrottle, json_t **result,
		   struct mv_err *err)
{
	pthread_mutex_lock(&mv->lock);
	struct job *j = arg_job_locked(mv, args, err);
	int rc = j ? job_cancel_locked(j, unthrottle, err) : -1;
	*result = rc == 0 ? job_json_locked(j) : NULL;
	pthread_mutex_unlock(&mv->lock);
	return rc;
}

static int ctl_cmd_job_cancel(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			      struct mv_err *err)
{
	return job_ask(mv, args, false, result, err);
}

static int ctl_cmd_job_unthrottle(struct mv *mv, struct ctl_call *call, json_t *args,
				  json_t **result, struct mv_err *err)
{
	return job_ask(mv, args, true, result, err);
}

static int ctl_cmd_jobs(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			struct mv_err *err)
{
	pthread_mutex_lock(&mv->lock);
	*result = json_pack("{s:o}", "jobs", jobs_json_locked(mv, false));
	pthread_mutex_unlock(&mv->lock);
	return 0;
}

/* ---- help ----------------------------------------------------------- */

/* The commands of the table (or the one named), so that a client can
 * tell what this memvisor supports before asking. */
static int ctl_cmd_help(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			struct mv_err *err)
{
	const char *only = NULL;
	if (ctl_arg_string_opt(args, "command", &only, err) < 0)
		return -1;
	size_t n;
	const struct ctl_cmd *t = ctl_cmd_table(&n);
	json_t *cmds = json_array();
	for (size_t i = 0; i < n; i++)
		if (!only || strcmp(only, t[i].name) == 0)
			json_array_append_new(cmds, json_pack("{s:s, s:s}", "name", t[i].name,
							      "summary", t[i].summary));
	if (only && json_array_size(cmds) == 0) {
		json_decref(cmds);
		return ctl_fail(err, MV_E_UNKNOWN_COMMAND,
				"args.command: no command '%s' (help without it lists them)", only);
	}
	*result = json_pack("{s:s, s:i, s:o}", "memvisor", MV_VERSION, "protocol", PROTOCOL_VERSION,
			    "commands", cmds);
	return 0;
}

/* ---- the table ------------------------------------------------------ */

static const struct ctl_cmd table[] = {
    {"hello", ctl_cmd_hello, "versions, supervisor pid, kernel features, commands"},
    {"status", ctl_cmd_status, "uptime, command, processes, totals, running jobs"},
    {"ps", ctl_cmd_ps, "every supervised process"},
    {"regions", ctl_cmd_regions, "a process's address space now: {\"pid\":N}"},
    {"stats", ctl_cmd_stats, "calls by syscall and verdict, bytes, service time: [{\"pid\":N}]"},
    {"events", ctl_cmd_events, "subscribe to the event stream"},
    {"policy", ctl_cmd_policy, "the active policy and how it is enforced"},
    {"policy_set", ctl_cmd_policy_set,
     "validate a policy file and make it active: {\"path\":FILE}"},
    {"job", ctl_cmd_job,
     "a job's progress or result: {\"id\":N, [\"wait_ms\":MS]} (answered at its end, or "
     "after MS)"},
    {"job_cancel", ctl_cmd_job_cancel,
     "stop a running checkpoint (program resumed, nothing written) or a rollback's "
     "--until run (program held): {\"id\":N}"},
    {"job_unthrottle", ctl_cmd_job_unthrottle,
     "let a running reload load as fast as it can: {\"id\":N}"},
    {"jobs", ctl_cmd_jobs, "every job of this run"},
    {"checkpoint", ctl_cmd_checkpoint,
     "write the processes' memory to an image: {\"dir\":PATH, [\"pids\":[N...]], [\"force\":true], "
     "[\"evict\":true]}"},
    {"reload", ctl_cmd_reload,
     "load an evicted image back in the background: {\"dir\":PATH, [\"rate\":MB/s]}"},
    {"mark", ctl_cmd_mark,
     "record a process (memory, layout, registers) to roll back to: [{\"name\":NAME, "
     "\"pid\":N, \"hold\":true, \"wait_ms\":MS}]"},
    {"rollback", ctl_cmd_rollback,
     "put the marked process back to its mark, in place: [{\"name\":NAME, \"until\":POINT, "
     "\"timeout_ms\":MS, \"close_fds\":true, \"hold\":true, \"wait_ms\":MS}]"},
    {"unmark", ctl_cmd_unmark, "drop the mark and its tracking: [{\"name\":NAME}]"},
    {"metrics", ctl_cmd_metrics, "counters and gauges in the Prometheus text format"},
    {"help", ctl_cmd_help, "the commands and the protocol version: [{\"command\":NAME}]"},
};

const struct ctl_cmd *ctl_cmd_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(table); i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

const struct ctl_cmd *ctl_cmd_table(size_t *n)
{
	*n = ARRAY_SIZE(table);
	return table;
}
