/* The event stream: memory calls, process start/exec/exit, job progress,
 * sent as JSON lines to every `events` subscriber of the control socket.
 *
 * Producers (either thread) pay one atomic load when nobody listens. Lines
 * are queued under the events lock and handed to the main loop, which
 * writes them to subscribers without ever blocking on a slow one. */
#ifndef MV_EVENTS_H
#define MV_EVENTS_H

#include "state/call.h"
#include "state/proc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct mv;

enum mv_event_kind { MV_EVENT_START, MV_EVENT_EXEC, MV_EVENT_EXIT };

int events_init(struct mv *mv);
void events_free(struct mv *mv);

/* Is anyone listening? */
bool events_active(struct mv *mv);

/* A memory or lifecycle call and its verdict; err is the errno for a
 * denial, rule the matching policy rule (or NULL). */
void events_call(struct mv *mv, const struct mv_call *c, pid_t pid, int verdict, int err,
		 const char *rule);

/* A process started (was found), exec'd, or exited (status: wait status or -1). */
void events_proc(struct mv *mv, enum mv_event_kind kind, const struct proc *p, int status);

/* Any other event: obj gets "event" and "time" added; takes the reference. */
void events_emit(struct mv *mv, const char *type, json_t *obj);

/* A subscriber (the control server's `events` clients): line() takes one
 * event line (without newline), dropped() how many lines were lost before
 * the next one. Both run on the main thread, from events_flush, and must
 * not block. The stream knows nothing else of who listens. */
struct events_sub {
	void (*line)(void *ctx, const char *line);
	void (*dropped)(void *ctx, uint64_t n);
	void *ctx;
};

/* Main thread: subscribe (s is copied) / unsubscribe by ctx. */
void events_subscribe(struct mv *mv, const struct events_sub *s);
void events_unsubscribe(struct mv *mv, void *ctx);

/* Main thread: deliver queued lines to subscribers. */
void events_flush(struct mv *mv);

#endif
