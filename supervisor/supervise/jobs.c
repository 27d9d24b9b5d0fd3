#include "supervisor/supervise/jobs.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/events.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *const state_names[] = {"running", "done", "failed", "cancelled"};
_Static_assert(sizeof(((struct mv *)0)->jobs.forgotten) == sizeof(uint64_t[JOB_KINDS][JOB_STATES]),
	       "mv->jobs.forgotten is sized by enum job_kind and enum job_state");
static const char *const kind_names[] = {[JOB_CHECKPOINT] = "checkpoint",
					 [JOB_RELOAD] = "reload",
					 [JOB_MARK] = "mark",
					 [JOB_ROLLBACK] = "rollback"};

const char *job_kind_name(enum job_kind k)
{
	return kind_names[k];
}

const char *job_state_name(enum job_state s)
{
	return state_names[s];
}

/* mv->jobs.all is newest first, guarded by mv->lock. Running jobs are
 * all kept; of the finished ones only the last JOBS_KEEP_FINISHED (their
 * result stays queryable with `job ID`): each keeps its result, some KiB,
 * and a client checkpointing in a loop would otherwise grow memvisor
 * without bound. */
#define JOBS_KEEP_FINISHED 64

json_t *job_json_locked(const struct job *j)
{
	uint64_t end = j->state == JOB_RUNNING ? mv_now_ns() : j->finished_ns;
	uint64_t elapsed = end - j->started_ns;
	json_t *o = json_object();
	json_object_set_new(o, "id", json_integer(j->id));
	json_object_set_new(o, "kind", json_string(job_kind_name(j->kind)));
	json_object_set_new(o, "state", json_string(state_names[j->state]));
	json_object_set_new(o, "phase", json_string(j->phase));
	json_object_set_new(o, "done", json_integer((json_int_t)j->done));
	json_object_set_new(o, "total", json_integer((json_int_t)j->total));
	json_object_set_new(o, "elapsed_ns", json_integer((json_int_t)elapsed));
	json_object_set_new(o, "rate", json_integer((json_int_t)mv_rate(j->done, elapsed)));
	json_object_set_new(o, "started_ns", json_integer((json_int_t)j->started_wall_ns));
	if (j->state == JOB_RUNNING && atomic_load(&j->cancel))
		json_object_set_new(o, "cancelling", json_true());
	if (j->state == JOB_RUNNING && atomic_load(&j->unthrottle))
		json_object_set_new(o, "unthrottled", json_true());
	if (j->progress)
		json_object_update(o, j->progress);
	if (j->state == JOB_DONE && j->result)
		json_object_set(o, "result", j->result);
	if (j->state == JOB_FAILED)
		json_object_set_new(o, "error",
				    json_pack("{s:s, s:s}", "code",
					      j->err.code ? j->err.code : MV_E_INTERNAL, "message",
					      j->err.msg));
	return o;
}

static void emit_locked(struct job *j)
{
	j->last_event_ns = mv_now_ns();
	if (events_active(j->mv))
		events_emit(j->mv, "job", job_json_locked(j));
}

void job_ran(struct job *j, int rc)
{
	struct mv *mv = j->mv;
	pthread_mutex_lock(&mv->lock);
	j->finished_ns = mv_now_ns();
	bool cancelled = rc == -ECANCELED && atomic_load(&j->cancel);
	if (cancelled) {
		j->state = JOB_CANCELLED;
		snprintf(j->phase, sizeof(j->phase), "cancelled");
	} else if (rc < 0) {
		j->state = JOB_FAILED;
		if (!mv_err_isset(&j->err))
			mv_err_set(&j->err, rc, MV_E_INTERNAL, "%s", strerror(-rc));
		snprintf(j->phase, sizeof(j->phase), "failed");
	} else {
		j->state = JOB_DONE;
		snprintf(j->phase, sizeof(j->phase), "done");
	}
	emit_locked(j);
	/* What the log needs, copied: once the lock is let go, a posted
	 * job (no thread to join) may be reaped and freed at once. */
	enum job_kind kind = j->kind;
	int id = j->id;
	char msg[sizeof(j->err.msg)];
	snprintf(msg, sizeof(msg), "%s", j->err.msg);
	pthread_mutex_unlock(&mv->lock);
	if (cancelled)
		log_info("%s job %d cancelled", job_kind_name(kind), id);
	else if (rc < 0)
		log_job_warn("%s job %d failed: %s", job_kind_name(kind), id, msg);
	else
		log_info("%s job %d done", job_kind_name(kind), id);
	ev_async_send(mv->loop, &mv->wake);
}

static void *job_thread(void *arg)
{
	struct job *j = arg;
	job_ran(j, j->run(j));
	return NULL;
}

/* Give j its id and list it, newest first. */
static void add_locked(struct job *j)
{
	struct mv *mv = j->mv;
	j->id = ++mv->jobs.last_id;
	j->next = mv->jobs.all;
	mv->jobs.all = j;
	emit_locked(j);
}

static struct job *job_new(struct mv *mv, enum job_kind kind, int (*run)(struct job *), void *ctx,
			   void (*ctx_free)(void *))
{
	pthread_mutex_lock(&mv->lock);
	bool refused = mv->jobs.closed;
	pthread_mutex_unlock(&mv->lock);
	if (refused)
		return NULL;
	struct job *j = xcalloc(1, sizeof(*j));
	j->kind = kind;
	snprintf(j->phase, sizeof(j->phase), "starting");
	j->mv = mv;
	j->run = run;
	j->ctx = ctx;
	j->ctx_free = ctx_free;
	j->started_ns = mv_now_ns();
	j->started_wall_ns = mv_wall_ns();
	return j;
}

int jobs_start(struct mv *mv, enum job_kind kind, int (*run)(struct job *), void *ctx,
	       void (*ctx_free)(void *), struct job **out)
{
	struct job *j = job_new(mv, kind, run, ctx, ctx_free);
	if (!j)
		return -ESHUTDOWN;
	pthread_mutex_lock(&mv->lock);
	add_locked(j);
	int rc = pthread_create(&j->thread, NULL, job_thread, j);
	if (rc) {
		j->state = JOB_FAILED;
		j->joined = true;
		mv_err_set(&j->err, -rc, MV_E_INTERNAL, "cannot start a thread: %s", strerror(rc));
	}
	pthread_mutex_unlock(&mv->lock);
	if (rc)
		return -rc;
	*out = j;
	return 0;
}

int jobs_start_posted(struct mv *mv, enum job_kind kind, int (*run)(struct job *), void *ctx,
		      void (*ctx_free)(void *), int (*post)(struct job *, void *), void *post_arg,
		      struct job **out)
{
	struct job *j = job_new(mv, kind, run, ctx, ctx_free);
	if (!j)
		return -ESHUTDOWN;
	j->posted = true;
	pthread_mutex_lock(&mv->lock);
	add_locked(j);
	pthread_mutex_unlock(&mv->lock);
	/* The job may end before post returns; it is reaped on this (the
	 * main) thread only, so j stays valid until the handler returns. */
	*out = j;
	int rc = post(j, post_arg);
	if (rc < 0) {
		job_fail(j, MV_E_INTERNAL, "cannot post the job: %s", strerror(-rc));
		job_ran(j, rc); /* ended as any job ends: its event, the wake-up */
		*out = NULL;
	}
	return rc < 0 ? rc : 0;
}

void job_progress(struct job *j, const char *phase, uint64_t done, uint64_t total)
{
	struct mv *mv = j->mv;
	pthread_mutex_lock(&mv->lock);
	bool new_phase = phase && strcmp(phase, j->phase) != 0;
	if (phase)
		snprintf(j->phase, sizeof(j->phase), "%s", phase);
	j->done = done;
	j->total = total;
	if (new_phase || mv_now_ns() - j->last_event_ns >= 200 * 1000000ull)
		emit_locked(j);
	pthread_mutex_unlock(&mv->lock);
}

bool job_cancel_asked(struct job *j)
{
	return atomic_load(&j->cancel);
}

int job_cancel_locked(struct job *j, bool unthrottle, struct mv_err *err)
{
	if (j->state != JOB_RUNNING)
		return mv_err_set(err, -1, MV_E_INVALID, "job %d has already ended (%s)", j->id,
				  state_names[j->state]);
	/* A rollback's run (--until) ends early: the program is held where
	 * it is, the rollback itself is done. */
	bool run = j->kind == JOB_ROLLBACK && strcmp(j->phase, "running") == 0;
	if (!unthrottle && !run && (j->kind == JOB_MARK || j->kind == JOB_ROLLBACK))
		return mv_err_set(err, -1, MV_E_INVALID,
				  "job %d is a %s, which cannot be cancelled: it is short, and "
				  "stopped halfway it would leave the program in neither state",
				  j->id, job_kind_name(j->kind));
	if (!unthrottle && j->kind == JOB_RELOAD)
		return mv_err_set(
		    err, -1, MV_E_INVALID,
		    "job %d is a reload, which cannot be cancelled: the evicted memory "
		    "has to come back (what is not loaded yet is served on demand); "
		    "'job unthrottle %d' lifts its rate limit so that it ends sooner",
		    j->id, j->id);
	if (unthrottle && j->kind != JOB_RELOAD)
		return mv_err_set(err, -1, MV_E_INVALID,
				  "job %d is a %s, which has no rate limit to lift (cancel it with "
				  "'job cancel %d')",
				  j->id, job_kind_name(j->kind), j->id);
	atomic_store(unthrottle ? &j->unthrottle : &j->cancel, true);
	log_info("%s job %d: %s asked", job_kind_name(j->kind), j->id,
		 unthrottle ? "no rate limit" : "cancel");
	return 0;
}

void job_fail(struct job *j, const char *code, const char *fmt, ...)
{
	pthread_mutex_lock(&j->mv->lock);
	va_list ap;
	va_start(ap, fmt);
	mv_err_vset(&j->err, -1, code, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&j->mv->lock);
}

void job_fail_with(struct job *j, const struct mv_err *e)
{
	pthread_mutex_lock(&j->mv->lock);
	j->err = *e;
	if (!j->err.code)
		j->err.code = MV_E_INTERNAL;
	pthread_mutex_unlock(&j->mv->lock);
}

struct job *jobs_find_locked(struct mv *mv, int id)
{
	for (struct job *j = mv->jobs.all; j; j = j->next)
		if (j->id == id)
			return j;
	return NULL;
}

bool jobs_running_locked(struct mv *mv, enum job_kind kind)
{
	for (struct job *j = mv->jobs.all; j; j = j->next)
		if (j->state == JOB_RUNNING && j->kind == kind)
			return true;
	return false;
}

json_t *jobs_json_locked(struct mv *mv, bool running_only)
{
	json_t *a = json_array();
	for (struct job *j = mv->jobs.all; j; j = j->next)
		if (!running_only || j->state == JOB_RUNNING)
			json_array_append_new(a, job_json_locked(j));
	return a;
}

void jobs_count_locked(struct mv *mv, uint64_t n[JOB_KINDS][JOB_STATES])
{
	memcpy(n, mv->jobs.forgotten, sizeof(mv->jobs.forgotten));
	for (struct job *j = mv->jobs.all; j; j = j->next)
		n[j->kind][j->state]++;
}

bool jobs_forgotten_locked(struct mv *mv, int id)
{
	return id > 0 && id <= mv->jobs.last_id && !jobs_find_locked(mv, id);
}

static void job_free(struct job *j)
{
	json_decref(j->result);
	json_decref(j->progress);
	free(j);
}

/* Forget the finished jobs beyond the newest JOBS_KEEP_FINISHED. Only
 * joined ones: their worker and ctx are gone, and nothing but this list
 * points to them (a handler uses the job jobs_start returned before it
 * returns to the loop, and pruning runs on the loop only). */
static void prune(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	int kept = 0;
	for (struct job **pp = &mv->jobs.all; *pp;) {
		struct job *j = *pp;
		if (j->state == JOB_RUNNING || !j->joined || ++kept <= JOBS_KEEP_FINISHED) {
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		mv->jobs.forgotten[j->kind][j->state]++;
		job_free(j);
	}
	pthread_mutex_unlock(&mv->lock);
}

void jobs_reap(struct mv *mv)
{
	bool joined = false;
	for (;;) {
		struct job *found = NULL;
		pthread_mutex_lock(&mv->lock);
		for (struct job *j = mv->jobs.all; j; j = j->next) {
			if (j->state != JOB_RUNNING && !j->joined) {
				j->joined = true;
				found = j;
				break;
			}
		}
		pthread_mutex_unlock(&mv->lock);
		if (!found) {
			prune(mv);
			/* A job's threads (its own, a checkpoint's writers, a
			 * reload's readers) allocate each in a malloc arena of
			 * their own (up to 8 a CPU), and what they free stays
			 * there: the results kept of later jobs land in other
			 * arenas and pin each one's pages. Evict and reload in a
			 * loop grew memvisor ~1 MiB in 500 rounds while the bytes
			 * in use stayed flat (docs/reliability.md, "Memory over
			 * many jobs"). Once jobs have ended, the free pages of
			 * every arena go back to the kernel (malloc_trim:
			 * MADV_DONTNEED of whole free pages, tops trimmed):
			 * about 0.1-0.2 ms, once a job. */
			if (joined) {
				malloc_trim(0);
				mv->jobs.trimmed_ns = mv_now_ns();
			}
			return;
		}
		/* A posted job (a rollback, on its mark's thread: one arena,
		 * reused) has no thread to join, and its end needs no trim
		 * each time: a loop of them would pay the 0.1-0.2 ms a
		 * rollback. Once a second is enough to keep memvisor flat. */
		if (!found->posted) {
			joined = true;
			pthread_join(found->thread, NULL);
		} else if (mv_now_ns() - mv->jobs.trimmed_ns >= 1000000000ull) {
			joined = true;
		}
		if (found->ctx_free)
			found->ctx_free(found->ctx);
		found->ctx = NULL;
	}
}

void jobs_wait_all(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	mv->jobs.closed = true;
	pthread_mutex_unlock(&mv->lock);
	for (;;) {
		struct job *j;
		pthread_mutex_lock(&mv->lock);
		for (j = mv->jobs.all; j && j->joined; j = j->next)
			;
		pthread_mutex_unlock(&mv->lock);
		if (!j)
			return;
		if (j->posted) {
			/* No thread to join: its poster runs it to its end. */
			pthread_mutex_lock(&mv->lock);
			bool running = j->state == JOB_RUNNING;
			pthread_mutex_unlock(&mv->lock);
			if (running) {
				struct timespec ts = {0, 1000000};
				nanosleep(&ts, NULL);
				continue;
			}
		} else {
			pthread_join(j->thread, NULL);
		}
		pthread_mutex_lock(&mv->lock);
		j->joined = true;
		pthread_mutex_unlock(&mv->lock);
		if (j->ctx_free)
			j->ctx_free(j->ctx);
		j->ctx = NULL;
	}
}
