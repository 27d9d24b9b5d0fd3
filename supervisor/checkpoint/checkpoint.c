/* The checkpoint job: its stages (job.h) in order, the
 * commit, the result. */
#include "supervisor/checkpoint/job.h"
#include "supervisor/kernel/remote.h"
#include "common/log.h"
#include "common/util.h"
#include "common/crc32c.h"
#include "common/fault.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/supervise/tree.h"
#include "supervisor/reload/evict.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* ---- committing ------------------------------------------------------- */

static void fill_identity(struct ckpt *c)
{
	struct utsname u;
	img_new_id(c->im.id);
	snprintf(c->im.memvisor, sizeof(c->im.memvisor), "%s", MV_VERSION);
	if (uname(&u) == 0) {
		snprintf(c->im.kernel, sizeof(c->im.kernel), "%s %s", u.sysname, u.release);
		snprintf(c->im.arch, sizeof(c->im.arch), "%s", u.machine);
	}
	c->im.sup_pid = (int32_t)getpid();
	snprintf(c->im.sup_name, sizeof(c->im.sup_name), "%s",
		 c->mv->opts.name ? c->mv->opts.name : "");
	c->im.pages_size = c->im.sums_off + img_sums_bytes(c->im.sums_off);
	c->im.pause_ns = c->pause_end - c->pause_start;
	img_totals(&c->im, &c->im.recorded);
}

static int commit(struct ckpt *c)
{
	job_progress(c->j, "syncing", c->done, c->total);
	uint64_t t0 = mv_now_ns();
	fill_identity(c);
	struct mv_err err = {0};
	/* Never commit an image we would refuse to read. */
	if (img_validate(&c->im, &err) < 0)
		return ckpt_fail(c, -EINVAL, MV_E_INTERNAL, "the image is inconsistent: %s",
				 err.msg);
	uint64_t t1 = mv_now_ns();
	size_t len;
	_cleanup_free_ char *text = img_manifest_write(&c->im, &len);
	uint64_t t2 = mv_now_ns();
	if (len > IMG_MANIFEST_MAX)
		return ckpt_fail(
		    c, -EFBIG, MV_E_NOT_SUPPORTED,
		    "the manifest would be %zu bytes (%zu extents), more than memvisor "
		    "reads (%u): the image is not written",
		    len, c->im.recorded.extents, IMG_MANIFEST_MAX);
	struct img_header h = {.version = IMG_VERSION,
			       .pages_size = c->im.pages_size,
			       .data_bytes = c->im.recorded.data_bytes,
			       .manifest_size = len,
			       .manifest_crc = crc32c(text, len),
			       .sums_off = c->im.sums_off,
			       .sums_crc = img_sums_crc(c->im.sums, c->im.sums_off)};
	memcpy(h.id, c->im.id, sizeof(h.id));
	/* The pages' last fdatasync and the manifest's fsync run at once:
	 * on one journal they often share a commit and a device flush. */
	int rc = pagesw_seal(c->w, &h);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
				 strerror(-rc));
	uint64_t t3 = mv_now_ns();
	rc = imgdir_write_file(&c->req->dir, IMG_MANIFEST, text, len);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_MANIFEST,
				 strerror(-rc));
	if ((rc = pagesw_sealed(c->w)) < 0)
		return ckpt_fail(c, rc, MV_E_IO, "syncing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
				 strerror(-rc));
	uint64_t t4 = mv_now_ns();
	if ((rc = imgdir_commit(&c->req->dir, &err)) < 0)
		return ckpt_fail(c, rc, MV_E_IO, "%s", err.msg);
	c->t_end = mv_now_ns();
	log_debug("checkpoint: commit: validate %.1f ms, manifest %.1f ms, drain+header %.1f ms, "
		  "manifest write and both syncs %.1f ms, rename+syncs %.1f ms",
		  (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6, (double)(t3 - t2) / 1e6,
		  (double)(t4 - t3) / 1e6, (double)(c->t_end - t4) / 1e6);
	return 0;
}

/* ---- the job ---------------------------------------------------------- */

/* Between two steps: has a client cancelled the job (job_cancel)? Then
 * it fails with -ECANCELED, which takes the failure path: every thread
 * resumed, the temporary directory removed, no image published. Once
 * the commit has begun, a cancel comes too late and is ignored. */
static int check_cancel(struct ckpt *c)
{
	if (!job_cancel_asked(c->j))
		return 0;
	return ckpt_fail(c, -ECANCELED, NULL, "cancelled by a client");
}

/* Fault point ckpt_stall: the job waits up to 3 s while it holds the
 * program stopped, as a slow copy would, then fails (timeout). A cancel
 * meanwhile ends the wait: the cancel tests stop a job here. */
static int stall_point(struct ckpt *c)
{
	if (!fault_hit("ckpt_stall"))
		return 0;
	for (int i = 0; i < 300; i++) {
		if (job_cancel_asked(c->j))
			return check_cancel(c);
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	return ckpt_fail(c, -ETIMEDOUT, MV_E_TIMEOUT, "the job stalled (fault injected)");
}

/* Fault point live_copy_stall: with --live, the copy while the program
 * runs starts 2 s late, as behind a slow disk, its pages protected
 * meanwhile (kernel_held.bats makes a thread exit then; live.bats drops
 * memory then, seeing the job's phase "stalled"). A cancel ends the
 * wait. */
static int live_stall_point(struct ckpt *c)
{
	if (!fault_hit("live_copy_stall"))
		return 0;
	job_progress(c->j, "stalled", 0, 0);
	for (int i = 0; i < 200 && !job_cancel_asked(c->j); i++) {
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* An image without a single process is no checkpoint: the program ended
 * before it could be stopped, or while it was held. */
static int require_a_process(struct ckpt *c)
{
	for (size_t i = 0; i < c->im.n_p; i++)
		if (!c->im.p[i].gone)
			return 0;
	return ckpt_fail(c, -ESRCH, MV_E_NO_SUCH_PROCESS,
			 "the program exited during the checkpoint: no process is left to save");
}

static json_t *evict_json(const struct evict_stats *st, const struct ckpt *c)
{
	json_t *o = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "regions",
	    (json_int_t)st->regions, "bytes", (json_int_t)st->bytes, "kept_regions",
	    (json_int_t)st->kept_regions, "shared_objects", (json_int_t)st->shared_objects,
	    "shared_bytes", (json_int_t)st->shared_bytes, "shared_evicted_regions",
	    (json_int_t)st->shared_evicted_regions, "shared_regions",
	    (json_int_t)st->shared_regions, "cow_bytes", (json_int_t)st->cow_bytes,
	    "scattered_bytes", (json_int_t)st->scattered_bytes, "shared_resident",
	    c->evict_shared ? json_incref(c->evict_shared) : json_array(), "skipped",
	    c->evict_skipped ? json_incref(c->evict_skipped) : json_array());
	json_object_set_new(o, "kernel_bytes", json_integer((json_int_t)st->kernel_bytes));
	json_object_set_new(o, "kernel_resident",
			    c->evict_kernel ? json_incref(c->evict_kernel) : json_array());
	json_object_set_new(o, "kept", c->evict_kept ? json_incref(c->evict_kept) : json_array());
	return o;
}

/* The time from one moment to a later one; 0 when the first was never
 * taken or the second is not later (a stage that did not run). */
static uint64_t span(uint64_t from, uint64_t to)
{
	return from && to > from ? to - from : 0;
}

/* The result's times (docs/protocol.md, "checkpoint"). The pause runs
 * from the first interrupt to the last detach and holds the stop, the
 * layout and the copy; with --evict and no live copy it also holds the
 * sync and the evict, which otherwise follow the resume. elapsed_ns
 * runs to the end of the job's work, the evict and its resume included,
 * so that it holds all of them. */
static void result_times(const struct ckpt *c, json_t *o)
{
	/* The sync runs from the resume, or, when the program was still
	 * stopped at the commit (--evict), from the end of the copy. */
	bool resumed = c->t_resumed && c->t_resumed <= c->t_end;
	uint64_t busy = span(c->t_start, c->t_done);
	json_object_update_new(
	    o, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "pause_ns",
			 (json_int_t)span(c->pause_start, c->pause_end), "prepare_ns",
			 (json_int_t)span(c->t_start, c->pause_start), "stop_ns",
			 (json_int_t)span(c->pause_start, c->t_stopped), "layout_ns",
			 (json_int_t)span(c->t_stopped, c->t_planned), "copy_ns",
			 (json_int_t)span(c->t_planned, c->t_copied), "sync_ns",
			 (json_int_t)span(resumed ? c->t_resumed : c->t_copied, c->t_end),
			 "elapsed_ns", (json_int_t)busy, "rate",
			 (json_int_t)mv_rate(c->im.recorded.data_bytes, busy)));
	if (c->req->evict)
		json_object_set_new(o, "evict_ns",
				    json_integer((json_int_t)span(c->t_evict, c->t_evicted)));
}

static json_t *result_json(struct ckpt *c)
{
	json_t *procs = json_array();
	for (size_t i = 0; i < c->im.n_p; i++) {
		struct img_proc *p = &c->im.p[i];
		uint64_t bytes = 0;
		for (size_t k = 0; k < p->n_r; k++)
			for (size_t x = 0; x < p->r[k].ext.n; x++)
				bytes += img_extent_len(&p->r[k].ext.v[x]);
		json_array_append_new(
		    procs, json_pack("{s:i, s:s, s:I, s:I, s:I, s:I}", "pid", p->pid, "state",
				     p->gone ? "gone" : "dumped", "threads", (json_int_t)p->n_t,
				     "regions", (json_int_t)p->n_r, "bytes", (json_int_t)bytes,
				     "pause_ns", (json_int_t)p->pause_ns));
	}
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i].img < 0) /* gone before its layout was read */
			json_array_append_new(
			    procs, json_pack("{s:i, s:s}", "pid", c->p[i].pt.pid, "state", "gone"));
	const struct img_totals *t = &c->im.recorded;
	json_t *o = json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:s, s:s}",
			      "dir", c->req->dir.dir, "id", c->im.id, "processes", procs, "threads",
			      (json_int_t)t->threads, "regions", (json_int_t)t->regions, "extents",
			      (json_int_t)t->extents, "bytes", (json_int_t)t->data_bytes,
			      "shared_bytes", (json_int_t)t->shared_bytes, "committed",
			      (json_int_t)t->committed, "pages_size", (json_int_t)c->im.pages_size,
			      "direct", pagesw_direct(c->w), "checksum", crc32c_impl(),
			      "layout_source", c->layout_how ? c->layout_how : "");
	result_times(c, o);
	return o;
}

static void init_procs(struct ckpt *c)
{
	struct checkpoint_req *req = c->req;
	for (size_t i = 0; i < req->n; i++) {
		ckpt_add_proc(c, req->pids[i], req->pidfds[i], true);
		req->pidfds[i] = -1; /* the cproc has it */
	}
}

/* The processes the job will stop: those asked for, or the tree. */
static size_t job_pids(struct ckpt *c, pid_t **v)
{
	size_t n = 0, cap = 0;
	*v = NULL;
	if (c->n) {
		*v = xcalloc(c->n, sizeof(**v));
		for (size_t i = 0; i < c->n; i++)
			(*v)[n++] = c->p[i].pt.pid;
		return n;
	}
	tree_tops(c->mv, v, &n, &cap);
	for (size_t i = 0; i < n; i++)
		procfs_children((*v)[i], v, &n, &cap);
	return n;
}

/* What the copy may fill while the program is stopped: its resident
 * memory (an upper bound: clean file pages are not copied). */
static size_t resident_bytes(struct ckpt *c)
{
	pid_t *v;
	size_t n = job_pids(c, &v);
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t mapped, resident;
		if (procfs_statm(v[i], &mapped, &resident) == 0)
			sum += resident;
	}
	free(v);
	return (size_t)MV_MIN(sum, (uint64_t)SIZE_MAX);
}

/* A client cancelled, or every process has exited: not stopped yet, a
 * signal 0 tells. */
static bool give_up_warm(void *arg)
{
	struct ckpt *c = arg;
	if (job_cancel_asked(c->j))
		return true;
	pid_t *v;
	size_t n = job_pids(c, &v);
	bool gone = true;
	for (size_t i = 0; i < n && gone; i++)
		gone = kill(v[i], 0) < 0 && errno == ESRCH;
	free(v);
	return gone;
}

static void cleanup(struct ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->p[i].memfd >= 0)
			close(c->p[i].memfd);
		ptrace_proc_free(&c->p[i].pt);
	}
	free(c->p);
	for (size_t k = 0; k < c->im.n_o; k++) {
		if (c->obj[k].fd >= 0)
			close(c->obj[k].fd);
		free(c->obj[k].pc);
		free(c->obj[k].mapped);
	}
	free(c->obj);
	ckpt_dedup_free(&c->dd);
	img_free(&c->im);
	json_decref(c->evict_skipped);
	json_decref(c->evict_shared);
	json_decref(c->evict_kernel);
	json_decref(c->evict_kept);
}

/* The copy: everything while stopped, or, with --live, what cannot be
 * write-protected while stopped and the rest while the program runs
 * (live.c). *live_json gets the result's "live" object. */
static int copy_stage(struct ckpt *c, bool live, json_t **live_json)
{
	int rc = live ? ckpt_live_setup(c) : 0;
	if (rc == 0)
		rc = ckpt_copy_all(c);
	if (!live)
		return rc;
	if (rc == 0)
		rc = ckpt_live_start(c);
	ckpt_resume_all(c);
	if (rc == 0)
		rc = live_stall_point(c);
	if (rc == 0)
		rc = ckpt_copy_live(c);
	if (c->live) {
		*live_json = ckpt_live_json(c);
		if (rc == -ECANCELED)
			ckpt_live_why_lost(c, c->live_why, sizeof(c->live_why));
	}
	/* With --evict the protection stays until the evict has seen which
	 * pages were written since the pause (ckpt_evict_live). */
	if (rc < 0 || !c->req->evict)
		ckpt_live_stop(c);
	return rc;
}

/* What one attempt tells the next. */
struct tries {
	char live_why[256]; /* why the live attempt was given up ("": it was not) */
	uint64_t live_pause_ns;
	char stale[256]; /* why shared pages are stored once per process */
};

/* --evict makes a userfaultfd inside each process: one that may not
 * (no CAP_SYS_PTRACE, a container's default) fails the job now, before
 * anything is written, not after the whole image (issue 27). */
static int evict_precheck(struct ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		char why[256];
		if (c->p[i].pt.gone || remote_userfaultfd_allowed(c->p[i].pt.pid, why, sizeof(why)))
			continue;
		return ckpt_fail(c, -EPERM, MV_E_PERMISSION,
				 "%s: --evict needs one of them; nothing was written, the program "
				 "keeps its memory",
				 why);
	}
	return 0;
}

/* One attempt at the checkpoint. A live attempt given up (-ECANCELED,
 * why in tr->live_why), or one whose shared pages were not equal to the
 * bytes they refer to (-ESTALE, why in tr->stale), leaves the temporary
 * directory without a pages file, ready for the next: stopping the
 * world, storing every page of every process. */

static int attempt(struct job *j, bool live, uint64_t t_start, struct tries *tr)
{
	struct ckpt c = {.j = j, .mv = j->mv, .req = j->ctx};
	/* --live lays the pages file out again (live.c). */
	c.dd.off_why = live ? "--live" : tr->stale[0] ? tr->stale : NULL;
	const char *fallback = !live && tr->live_why[0] ? tr->live_why : NULL;
	c.t_start = t_start;
	img_init(&c.im);
	c.im.created_ns = mv_wall_ns();
	init_procs(&c);
	json_t *live_json = NULL;
	/* The buffers are made before the program stops: making them
	 * would otherwise add to the pause. */
	int rc = pagesw_open(c.mv->staging, c.req->dir.tmpfd, c.req->buffer, &c.w);
	if (rc < 0) {
		ckpt_fail(&c, rc, MV_E_IO, "creating %s/%s: %s", c.req->dir.dir, IMG_PAGES,
			  strerror(-rc));
		goto out_remove;
	}
	/* A fresh supervisor's buffers are being warmed: wait for as much of
	 * them as the copy may fill while the program is stopped (its
	 * resident memory), unless it ends or a client cancels first. */
	rc = 0;
	size_t resident = resident_bytes(&c);
	if (!pagesw_pool_wait_warm(c.mv->staging, resident, give_up_warm, &c) &&
	    !job_cancel_asked(j))
		rc = ckpt_fail(&c, -ESRCH, MV_E_NO_SUCH_PROCESS,
			       "the program exited during the checkpoint: no process is left "
			       "to save");
	if (rc == 0)
		rc = check_cancel(&c);
	if (rc == 0 && live)
		rc = ckpt_live_arm(&c, resident);
	if (rc == 0) {
		/* Not with --live, which resumes the program during its copy:
		 * its fault handler takes only warm buffers. */
		pagesw_quiet(c.w, !live);
		rc = ckpt_stop_all(&c);
	}
	if (rc == 0 && c.req->evict)
		rc = evict_precheck(&c);
	if (rc == 0)
		rc = stall_point(&c);
	if (rc == 0)
		rc = check_cancel(&c);
	if (rc == 0)
		rc = ckpt_plan_all(&c);
	if (rc == 0)
		rc = check_cancel(&c);
	bool copied = false; /* copy_stage ran: with --live, it resumed the program */
	if (rc == 0) {
		/* Page checksums follow the extents (docs/image-format.md). */
		c.im.sums_off = c.off;
		c.im.sums = xcalloc(MV_MAX(img_sums_count(c.off), 1), sizeof(*c.im.sums));
		pagesw_set_sums(c.w, c.im.sums);
		rc = copy_stage(&c, live, &live_json);
		copied = true;
	}
	/* -ECANCELED is also a client's cancel (check_cancel), which ends
	 * the job instead of starting it again stopped. */
	if (rc == -ECANCELED && live && !job_cancel_asked(j)) {
		snprintf(tr->live_why, sizeof(tr->live_why), "%s", c.live_why);
		tr->live_pause_ns = c.pause_end - c.pause_start;
		pagesw_close(c.w);
		unlinkat(c.req->dir.tmpfd, IMG_PAGES, 0);
		json_decref(live_json);
		cleanup(&c);
		return rc;
	}
	/* --evict keeps the program stopped until the image is durable and
	 * its pages are dropped and registered; --live has resumed it, unless
	 * the job ended (failed, cancelled) before its copy. */
	if (!c.req->evict && !(live && copied))
		ckpt_resume_all(&c);
	pagesw_quiet(c.w, false);
	pagesw_flush_now(c.w);
	if (rc == 0)
		rc = ckpt_settle(&c);
	if (rc == 0 && (rc = ckpt_dedup_check(&c)) == -ESTALE) {
		/* The next attempt stores every page of every process. */
		log_info("checkpoint: %s: starting again, storing shared pages once per process",
			 c.dd.why);
		snprintf(tr->stale, sizeof(tr->stale), "%s", c.dd.why);
		if (c.req->evict)
			ckpt_resume_all(&c);
		pagesw_close(c.w);
		unlinkat(c.req->dir.tmpfd, IMG_PAGES, 0);
		cleanup(&c);
		return rc;
	}
	if (rc == 0)
		rc = require_a_process(&c);
	if (rc == 0)
		rc = check_cancel(&c);
	if (rc == 0)
		rc = commit(&c);
	struct evict_stats est = {0};
	int erc = 0;
	/* --live --evict: the program ran during the copy and the commit. */
	bool again = live && copied && c.req->evict;
	uint64_t clean = 0, written = 0;
	struct live_evict_times lt = {0};
	c.t_evict = mv_now_ns();
	if (rc == 0 && again)
		erc = ckpt_evict_live(&c, &est, &lt, &clean, &written);
	else if (rc == 0 && c.req->evict)
		erc = ckpt_evict_all(&c, &est);
	c.t_evicted = mv_now_ns();
	c.evict_kept = est.kept; /* cleanup() frees it */
	ckpt_live_stop(&c);
	if (c.req->evict)
		ckpt_resume_all(&c);
	c.t_done = mv_now_ns();
	if (again) {
		/* The result's pause is the first (the image's); the evict's
		 * is its own, from the start of its stop to its last detach. */
		uint64_t second = c.again_end > c.t_evict ? c.again_end - c.t_evict : 0;
		if (live_json)
			json_object_set_new(
			    live_json, "evict",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "pause_ns",
				      (json_int_t)second, "stop_ns", (json_int_t)lt.stop_ns,
				      "scan_ns", (json_int_t)lt.scan_ns, "unprotect_ns",
				      (json_int_t)lt.unprotect_ns, "drop_ns",
				      (json_int_t)lt.drop_ns, "clean_bytes", (json_int_t)clean,
				      "written_bytes", (json_int_t)written));
	}
	if (rc < 0)
		goto out_remove;
	if (erc < 0)
		goto out_failed;
	j->result = result_json(&c);
	json_object_set_new(j->result, "dedup", ckpt_dedup_json(&c));
	if (c.req->evict)
		json_object_set_new(j->result, "evicted", evict_json(&est, &c));
	if (live_json)
		json_object_set_new(j->result, "live", mv_steal_ptr(live_json));
	else if (fallback)
		json_object_set_new(j->result, "live",
				    json_pack("{s:b, s:s, s:I}", "live", 0, "fallback", fallback,
					      "live_pause_ns", (json_int_t)tr->live_pause_ns));
	pagesw_close(c.w);
	cleanup(&c);
	return 0;

out_remove:
	if (c.w)
		pagesw_close(c.w);
	c.w = NULL;
	imgdir_abort(&c.req->dir);
out_failed:
	if (c.w)
		pagesw_close(c.w);
	json_decref(live_json);
	/* Without one, the job reports the errno as internal (jobs.c). */
	if (mv_err_isset(&c.err))
		job_fail_with(j, &c.err);
	cleanup(&c);
	return rc < 0 ? rc : -EIO;
}

/* The processes' pidfds for one more attempt (an attempt takes them). */
static void rearm(struct checkpoint_req *req, const int *spare)
{
	for (size_t i = 0; i < req->n; i++) {
		if (req->pidfds[i] >= 0)
			close(req->pidfds[i]);
		req->pidfds[i] = spare[i] >= 0 ? fcntl(spare[i], F_DUPFD_CLOEXEC, 0) : -1;
	}
}

int checkpoint_run(struct job *j)
{
	struct checkpoint_req *req = j->ctx;
	uint64_t t0 = mv_now_ns();
	/* A live attempt given up starts again stopping the world, and one
	 * whose shared pages lost their first copy starts again storing
	 * every page: the processes' pidfds may be needed three times. */
	int *spare = xmalloc(MV_MAX(req->n, 1) * sizeof(*spare));
	for (size_t i = 0; i < req->n; i++)
		spare[i] = fcntl(req->pidfds[i], F_DUPFD_CLOEXEC, 0);
	struct tries tr = {0};
	int rc = attempt(j, req->live, t0, &tr);
	if (rc == -ECANCELED && req->live && !job_cancel_asked(j)) {
		rearm(req, spare);
		rc = attempt(j, false, t0, &tr);
	}
	if (rc == -ESTALE && !job_cancel_asked(j)) {
		rearm(req, spare);
		rc = attempt(j, false, t0, &tr);
	}
	for (size_t i = 0; i < req->n; i++)
		if (spare[i] >= 0)
			close(spare[i]);
	free(spare);
	return rc;
}

void checkpoint_req_free(void *ctx)
{
	struct checkpoint_req *req = ctx;
	if (!req)
		return;
	imgdir_abort(&req->dir);
	imgdir_free(&req->dir);
	for (size_t i = 0; i < req->n; i++)
		if (req->pidfds[i] >= 0)
			close(req->pidfds[i]);
	free(req->pids);
	free(req->pidfds);
	free(req);
}
