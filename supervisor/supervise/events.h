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

/* Main thread: subscribe / unsubscribe a control client. */
struct ctl_client;
void events_subscribe(struct mv *mv, struct ctl_client *c);
void events_unsubscribe(struct mv *mv, struct ctl_client *c);

/* Main thread: deliver queued lines to subscribers. */
void events_flush(struct mv *mv);

#endif
