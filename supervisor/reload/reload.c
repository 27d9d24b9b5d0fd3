/* The reload job (supervisor/reload/reload.h). */
#include "supervisor/reload/reload.h"
#include "common/hist.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/reload/evict.h"
#include "supervisor/reload/shm.h"
#include "supervisor/image/read.h"
#include "supervisor/supervise/jobs.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define PROGRESS_NS (100 * 1000000ull)

struct reload_req {
	char *dir;
	char id[33];
	double rate; /* bytes a second read by the loader; 0: no cap */
};

struct reload {
	struct job *j;
	struct reload_req *req;
	struct evspace **sp;
	size_t n;
	struct evobj **obj; /* shared-memory objects, loaded before the spaces */
	size_t n_obj;
	uint64_t t0, t_loading, bytes_read, total, last_progress;
	uint64_t huge, huge_restored, huge_ns; /* thp.h */
	uint64_t cpu_ns;		       /* the loader thread's CPU time loading */
	struct evict_load_stats load;	       /* its reading threads' CPU, chunk searches */
	unsigned gone;
};

static void req_free(void *ctx)
{
	struct reload_req *r = ctx;
	if (!r)
		return;
	free(r->dir);
	free(r);
}

/* ---- the job ------------------------------------------------------------ */

/* The header and the manifest, and that dir still holds the image the
 * processes were evicted to. Every page's checksum is checked before it
 * is installed (pages.c pages_read): a whole pass over the image first
 * would read it twice and hold the loading back. */
static int verify(struct reload *r)
{
	job_progress(r->j, "verifying", 0, 0);
	struct imgread ir;
	struct mv_err err = {0};
	int rc = imgread_open(r->req->dir, &ir, &err);
	if (rc == 0 && strcmp(ir.im.id, r->req->id) != 0)
		rc = mv_err_set(&err, -EINVAL, NULL, "%s now holds image %s, not %s", r->req->dir,
				ir.im.id, r->req->id);
	imgread_close(&ir);
	if (rc < 0)
		job_fail(r->j, rc == -EBADMSG || rc == -EINVAL ? MV_E_CORRUPT_IMAGE : MV_E_INTERNAL,
			 "%s: %s; nothing of it was loaded", r->req->dir, err.msg);
	return rc;
}

/* Sleep as long as the loader is ahead of the rate (until a client lifts
 * it: job_unthrottle). */
static void pace(struct reload *r)
{
	if (r->req->rate <= 0 || atomic_load(&r->j->unthrottle))
		return;
	uint64_t read = __atomic_load_n(&r->bytes_read, __ATOMIC_RELAXED);
	uint64_t due = r->t_loading + (uint64_t)((double)read / r->req->rate * 1e9);
	uint64_t now = mv_now_ns();
	if (due <= now)
		return;
	struct timespec ts = {(time_t)((due - now) / 1000000000ull),
			      (long)((due - now) % 1000000000ull)};
	nanosleep(&ts, NULL);
}

/* Bytes of shared memory loaded back (by the loader and by faults). */
static uint64_t shared_loaded(struct reload *r)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < r->n_obj; i++) {
		uint64_t owed, loaded;
		evshm_counts(r->obj[i], &owed, &loaded);
		sum += loaded;
	}
	return sum;
}

static json_t *fault_json(struct reload *r, uint64_t *loaded, uint64_t *workers_ns)
{
	struct hist *h = xcalloc(1, sizeof(*h));
	uint64_t faults = 0, wns = 0;
	*loaded = shared_loaded(r);
	for (size_t i = 0; i < r->n; i++)
		evict_space_faults(r->sp[i], h, &faults, loaded, &wns);
	if (workers_ns)
		*workers_ns = wns;
	json_t *o =
	    json_pack("{s:I, s:I, s:I, s:I, s:I}", "faults", (json_int_t)faults, "fault_p50_ns",
		      (json_int_t)hist_quantile(h, 0.5), "fault_p99_ns",
		      (json_int_t)hist_quantile(h, 0.99), "fault_p999_ns",
		      (json_int_t)hist_quantile(h, 0.999), "fault_max_ns", (json_int_t)h->max);
	free(h);
	return o;
}

static void progress(struct reload *r, bool force)
{
	uint64_t now = mv_now_ns();
	if (!force && now - r->last_progress < PROGRESS_NS)
		return;
	r->last_progress = now;
	uint64_t loaded;
	json_t *p = fault_json(r, &loaded, NULL);
	json_object_set_new(p, "pages_loaded", json_integer((json_int_t)(loaded / IMG_PAGE)));
	json_object_set_new(p, "pages_total", json_integer((json_int_t)(r->total / IMG_PAGE)));
	json_object_set_new(
	    p, "read_bytes",
	    json_integer((json_int_t)__atomic_load_n(&r->bytes_read, __ATOMIC_RELAXED)));
	pthread_mutex_lock(&r->j->mv->lock);
	json_decref(r->j->progress);
	r->j->progress = p;
	pthread_mutex_unlock(&r->j->mv->lock);
	job_progress(r->j, "loading", MV_MIN(loaded, r->total), r->total);
}

static void on_pace(void *arg)
{
	pace(arg);
}

static void on_read(void *arg, uint64_t bytes)
{
	struct reload *r = arg;
	__atomic_fetch_add(&r->bytes_read, bytes, __ATOMIC_RELAXED);
}

static void on_progress(void *arg)
{
	progress(arg, false);
}

static const struct evict_load_ops load_ops = {on_pace, on_read, on_progress};

static int load_space(struct reload *r, struct evspace *s)
{
	int rc = evict_load_all(s, &load_ops, r, &r->load);
	if (rc == 0)
		return 0;
	if (rc == -ESRCH) {
		r->gone++;
		return 0;
	}
	if (rc == -EBADMSG)
		job_fail(r->j, MV_E_CORRUPT_IMAGE,
			 "loading process %d from %s: a page fails its checksum "
			 "(checksum mismatch): the image is corrupt; the bad pages were not "
			 "loaded and the rest stays evicted",
			 evict_space_pid(s), r->req->dir);
	else if (rc == -EDEADLK)
		job_fail(r->j, MV_E_INTERNAL,
			 "loading process %d from %s: the loader installed nothing in %u rounds "
			 "in a row (a memvisor bug: please report it); what is still owed stays "
			 "evicted and is served when the program touches it",
			 evict_space_pid(s), r->req->dir, LOAD_IDLE_MAX);
	else
		job_fail(r->j, MV_E_INTERNAL, "loading process %d from %s: %s", evict_space_pid(s),
			 r->req->dir, strerror(-rc));
	return rc;
}

static void add_spaces(struct reload *r)
{
	struct evspace **v;
	size_t n = evict_spaces_of(r->j->mv->evict, r->req->id, &v);
	for (size_t i = 0; i < n; i++) {
		bool known = false;
		for (size_t k = 0; k < r->n && !known; k++)
			known = r->sp[k] == v[i];
		if (known) {
			evict_put(v[i]);
			continue;
		}
		uint64_t owed, loaded;
		evict_space_counts(v[i], &owed, &loaded);
		r->total += owed + loaded;
		r->sp = xrealloc(r->sp, (r->n + 1) * sizeof(*r->sp));
		r->sp[r->n++] = v[i];
	}
	free(v);
}

/* Loaded: huge pages collapsed again (timed apart from the loading). */
static void finish_space(struct reload *r, struct evspace *s)
{
	uint64_t t = mv_now_ns();
	evict_space_finish(s, &r->huge, &r->huge_restored);
	r->huge_ns += mv_now_ns() - t;
}

/* Shared memory first: a space's uffd is closed once the space owes
 * nothing, and its mappings of an object must stay registered until the
 * object owes nothing either (a hole touched through an unregistered
 * mapping reads zeros). Each object is loaded once, through memvisor's
 * own mapping of it, for every process that maps it. */
static int load_objects(struct reload *r)
{
	r->n_obj = evict_objects_of(r->j->mv->evict, r->req->id, &r->obj);
	for (size_t i = 0; i < r->n_obj; i++) {
		uint64_t owed, loaded;
		evshm_counts(r->obj[i], &owed, &loaded);
		r->total += owed + loaded;
	}
	for (size_t i = 0; i < r->n_obj; i++) {
		struct evobj *o = r->obj[i];
		int rc = evshm_load_all(o, &load_ops, r);
		if (rc == -EBADMSG || rc == -EIO) {
			job_fail(r->j, MV_E_CORRUPT_IMAGE,
				 "loading the shared memory %s from %s: %s: the bad pages were "
				 "not loaded and stay evicted",
				 evshm_path(o), r->req->dir,
				 rc == -EBADMSG ? "a page fails its checksum" : strerror(-rc));
			return rc;
		}
		if (rc < 0) {
			job_fail(r->j, MV_E_INTERNAL, "loading the shared memory %s from %s: %s",
				 evshm_path(o), r->req->dir, strerror(-rc));
			return rc;
		}
		evict_drop_object(r->j->mv->evict, o);
		evshm_finish(o);
	}
	return 0;
}

/* Load every space, and the fork children that appear meanwhile, until
 * a pass finds nothing owed. */
static int load_all(struct reload *r)
{
	int rc = 0;
	size_t done = 0;
	r->t_loading = mv_now_ns();
	uint64_t cpu0 = mv_thread_cpu_ns();
	rc = load_objects(r);
	for (; rc == 0;) {
		add_spaces(r);
		if (done == r->n)
			break;
		for (; done < r->n && rc == 0; done++) {
			rc = load_space(r, r->sp[done]);
			if (rc == 0)
				finish_space(r, r->sp[done]);
		}
		if (rc < 0)
			break;
	}
	r->cpu_ns = mv_thread_cpu_ns() - cpu0 + r->load.reader_cpu_ns;
	return rc;
}

static json_t *result_json(struct reload *r)
{
	uint64_t loaded, workers_ns, end = mv_now_ns();
	json_t *o = fault_json(r, &loaded, &workers_ns);
	uint64_t load_ns = end - r->t_loading - r->huge_ns;
	json_object_update_new(o, json_pack("{s:i, s:I}", "shared_objects", (int)r->n_obj,
					    "shared_bytes", (json_int_t)shared_loaded(r)));
	json_object_update_new(
	    o, json_pack("{s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "dir",
			 r->req->dir, "id", r->req->id, "spaces", (int)r->n, "gone", (int)r->gone,
			 "pages_loaded", (json_int_t)(loaded / IMG_PAGE), "pages_total",
			 (json_int_t)(r->total / IMG_PAGE), "bytes", (json_int_t)loaded,
			 "read_bytes", (json_int_t)r->bytes_read, "verify_ns",
			 (json_int_t)(r->t_loading - r->t0), "load_ns", (json_int_t)load_ns,
			 "read_rate", (json_int_t)mv_rate(r->bytes_read, load_ns)));
	/* CPU per GiB installed: what the loading takes from the program
	 * on a machine with few CPUs (collapsing huge pages included). */
	double gib = (double)loaded / (double)(1ull << 30);
	double cpu_ns = (double)(r->cpu_ns + workers_ns);
	json_object_update_new(o,
			       json_pack("{s:I, s:I, s:I}", "loader_cpu_ns", (json_int_t)r->cpu_ns,
					 "workers_cpu_ns", (json_int_t)workers_ns, "cpu_ns_per_gib",
					 (json_int_t)(gib > 0 ? cpu_ns / gib + 0.5 : 0)));
	json_object_set_new(o, "chunk_searches", json_integer((json_int_t)r->load.searches));
	json_object_update_new(o, json_pack("{s:I, s:I, s:I}", "huge_bytes", (json_int_t)r->huge,
					    "huge_restored_bytes", (json_int_t)r->huge_restored,
					    "huge_ns", (json_int_t)r->huge_ns));
	return o;
}

static int reload_run(struct job *j)
{
	struct reload r = {.j = j, .req = j->ctx};
	r.t0 = mv_now_ns();
	evict_boost_thread(EVICT_LOADER_NICE); /* its rate bounds what it takes */
	int rc = verify(&r);
	if (rc == 0)
		rc = load_all(&r);
	if (rc == 0) {
		progress(&r, true);
		j->result = result_json(&r);
	}
	for (size_t i = 0; i < r.n; i++)
		evict_put(r.sp[i]);
	free(r.sp);
	for (size_t i = 0; i < r.n_obj; i++)
		evshm_put(r.obj[i]);
	free(r.obj);
	return rc;
}

/* ---- starting ------------------------------------------------------- */

/* The image at dir must be the one processes are evicted to. */
/* On the main loop: only the pages header (4 KiB, bounded, a regular
 * file) says which image dir holds; the job thread checks the rest
 * (verify) before any page is used, so a large manifest is never read
 * here. */
static int match_image(struct mv *mv, struct reload_req *req, struct mv_err *err)
{
	struct img_header h;
	int rc = imgread_header(req->dir, &h, err);
	if (rc == 0)
		snprintf(req->id, sizeof(req->id), "%s", h.id);
	if (rc < 0)
		return mv_err_set(err, rc, rc == -ENOENT ? MV_E_INVALID : MV_E_CORRUPT_IMAGE,
				  "cannot reload from %s: %s", req->dir, err->msg);
	struct evspace **v;
	size_t n = evict_spaces_of(mv->evict, req->id, &v);
	for (size_t i = 0; i < n; i++)
		evict_put(v[i]);
	free(v);
	if (n)
		return 0;
	char id[40], dir[4096];
	if (evict_some_image(mv->evict, id, sizeof(id), dir, sizeof(dir)))
		return mv_err_set(err, -EINVAL, MV_E_IMAGE_MISMATCH,
				  "%s holds image %s, but the evicted processes' image is %s (%s): "
				  "refusing to load pages of another image",
				  req->dir, req->id, id, dir);
	return mv_err_set(err, -ENOENT, MV_E_INVALID,
			  "no process is evicted to %s (reloaded already, or its evict dropped "
			  "nothing: see the checkpoint's evicted bytes)",
			  req->dir);
}

int reload_start(struct mv *mv, const char *dir, double rate, struct job **out, char *id,
		 size_t idlen, struct mv_err *err)
{
	struct reload_req *req = xcalloc(1, sizeof(*req));
	req->dir = xstrdup(dir);
	req->rate = rate;
	int rc = match_image(mv, req, err);
	if (rc < 0)
		goto fail;
	pthread_mutex_lock(&mv->lock);
	bool busy = jobs_running_locked(mv, JOB_RELOAD);
	pthread_mutex_unlock(&mv->lock);
	if (busy) {
		rc = mv_err_set(err, -EBUSY, MV_E_BUSY, "a reload is already running");
		goto fail;
	}
	rc = jobs_start(mv, JOB_RELOAD, reload_run, req, req_free, out);
	if (rc == -ESHUTDOWN) {
		mv_err_set(err, rc, MV_E_NO_SUCH_PROCESS,
			   "the supervised command has exited and memvisor is exiting");
		goto fail;
	}
	if (rc < 0) {
		mv_err_set(err, rc, MV_E_INTERNAL, "cannot start the reload: %s", strerror(-rc));
		goto fail;
	}
	snprintf(id, idlen, "%s", req->id);
	return 0;
fail:
	req_free(req);
	return rc;
}
