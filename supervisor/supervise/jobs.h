/* Long operations (checkpoint, reload) run as jobs: a worker thread each,
 * started by a control command that answers at once with the job id.
 * Progress is published under mv->lock, shown by `job ID` and `status`,
 * and streamed as "job" events (at most every 200 ms, and at every phase
 * change and at the end).
 *
 * A client may ask a running job to stop (`job_cancel`): the flag is
 * read by the worker between its steps, which then undoes what it did
 * and returns -ECANCELED (state "cancelled"). A reload cannot be
 * cancelled (the evicted memory has to come back), but may be asked to
 * stop holding to its rate (`job_unthrottle`). */
#ifndef MV_JOBS_H
#define MV_JOBS_H

#include "common/err.h"
#include "supervisor/supervise/mv.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>

enum job_state { JOB_RUNNING, JOB_DONE, JOB_FAILED, JOB_CANCELLED, JOB_STATES };
enum job_kind { JOB_CHECKPOINT, JOB_RELOAD, JOB_MARK, JOB_ROLLBACK, JOB_KINDS };

/* "checkpoint", "reload", "mark", "rollback": the protocol's names. */
const char *job_kind_name(enum job_kind k);
/* "running", "done", "failed". */
const char *job_state_name(enum job_state s);

struct job {
	int id;
	enum job_kind kind;
	struct mv *mv;
	enum job_state state;
	char phase[32];
	uint64_t done, total; /* bytes */
	uint64_t started_ns, finished_ns, started_wall_ns;
	uint64_t last_event_ns;
	json_t *result;		/* set by the worker before it returns 0 */
	json_t *progress;	/* optional extra progress fields (worker-owned, under lock) */
	struct mv_err err;	/* set with job_fail */
	atomic_bool cancel;	/* a client asked it to stop (job_cancel) */
	atomic_bool unthrottle; /* a client lifted its rate cap (job_unthrottle) */
	int (*run)(struct job *j);
	void *ctx;
	void (*ctx_free)(void *ctx);
	pthread_t thread;
	bool posted; /* no thread of its own (jobs_start_posted) */
	bool joined;
	struct job *next;
};

/* Start a job running run(j) on its own thread. ctx is freed with
 * ctx_free after the job ends. 0 or -errno: -ESHUTDOWN once memvisor is
 * exiting (jobs_wait_all has begun; nothing would wait for the job). */
int jobs_start(struct mv *mv, enum job_kind kind, int (*run)(struct job *), void *ctx,
	       void (*ctx_free)(void *), struct job **out);

/* The same with no thread of its own: post(j, post_arg) hands the job
 * to a thread that exists (a rollback: its mark's tracer thread), which
 * calls run(j) and then job_ran(j, rc). post's -errno fails the job. */
int jobs_start_posted(struct mv *mv, enum job_kind kind, int (*run)(struct job *), void *ctx,
		      void (*ctx_free)(void *), int (*post)(struct job *, void *), void *post_arg,
		      struct job **out);
/* The poster's thread: run(j) returned rc. j is not the caller's after. */
void job_ran(struct job *j, int rc);
/* Worker: report progress (takes mv->lock). */
void job_progress(struct job *j, const char *phase, uint64_t done, uint64_t total);

/* Worker: has a client asked the job to stop? Read between steps; run()
 * then undoes what it did and returns -ECANCELED. */
bool job_cancel_asked(struct job *j);

/* Worker: record why the job failed; run() then returns a negative value. */
void job_fail(struct job *j, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with an error already made (code NULL: internal). */
void job_fail_with(struct job *j, const struct mv_err *e);

/* Main thread, with mv->lock held. */
struct job *jobs_find_locked(struct mv *mv, int id);
bool jobs_running_locked(struct mv *mv, enum job_kind kind);
/* Was id a job that has been forgotten (only the last 64 finished jobs
 * are kept)? */
bool jobs_forgotten_locked(struct mv *mv, int id);
json_t *job_json_locked(const struct job *j);
json_t *jobs_json_locked(struct mv *mv, bool running_only);
/* Every job of this run by kind and state now, the forgotten ones
 * included (metrics). */
void jobs_count_locked(struct mv *mv, uint64_t n[JOB_KINDS][JOB_STATES]);

/* Main thread: ask running job j to stop (a checkpoint) or to stop
 * holding to its rate (unthrottle; a reload). 0, or -1 with err filled
 * (invalid: the job has ended, or is a reload asked to stop). */
int job_cancel_locked(struct job *j, bool unthrottle, struct mv_err *err);

/* Main thread: join finished workers (on every wake-up), forget the
 * finished jobs beyond the last 64, and after a join give the free pages
 * of every malloc arena back to the kernel (malloc_trim). */
void jobs_reap(struct mv *mv);

/* Main thread, at exit: wait for every job; no job starts afterwards
 * (the control socket still answers for a moment: ctl_server_stop). */
void jobs_wait_all(struct mv *mv);

#endif
