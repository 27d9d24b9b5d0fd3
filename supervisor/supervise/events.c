#include "supervisor/supervise/events.h"
#include "common/util.h"
#include "supervisor/supervise/mv.h"
#include "supervisor/supervise/render.h"

#include <stdatomic.h>
#include <string.h>

/* Lines waiting for the main loop. Bounded: a producer never waits, and
 * beyond the bound lines are dropped and counted, to be reported to every
 * subscriber as a "dropped" event. */
#define EVENTS_MAX_QUEUED 65536

struct events {
	pthread_mutex_t lock;
	atomic_int subscribers;
	char **lines;
	size_t n, cap;
	uint64_t dropped;
	struct events_sub *subs; /* main thread only */
	size_t nsubs, capsubs;
};

int events_init(struct mv *mv)
{
	struct events *e = xcalloc(1, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
	mv->events = e;
	return 0;
}

void events_free(struct mv *mv)
{
	struct events *e = mv->events;
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		free(e->lines[i]);
	free(e->lines);
	free(e->subs);
	pthread_mutex_destroy(&e->lock);
	free(e);
	mv->events = NULL;
}

bool events_active(struct mv *mv)
{
	return mv->events &&
	       atomic_load_explicit(&mv->events->subscribers, memory_order_relaxed) > 0;
}

static void push(struct mv *mv, json_t *obj)
{
	char *line = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (!line)
		return;
	struct events *e = mv->events;
	pthread_mutex_lock(&e->lock);
	if (e->n >= EVENTS_MAX_QUEUED) {
		e->dropped++;
		free(line);
	} else {
		if (e->n == e->cap) {
			e->cap = e->cap ? e->cap * 2 : 256;
			e->lines = xrealloc(e->lines, e->cap * sizeof(*e->lines));
		}
		e->lines[e->n++] = line;
	}
	pthread_mutex_unlock(&e->lock);
	ev_async_send(mv->loop, &mv->wake);
}

void events_emit(struct mv *mv, const char *type, json_t *obj)
{
	if (!events_active(mv)) {
		json_decref(obj);
		return;
	}
	json_object_set_new(obj, "event", json_string(type));
	json_object_set_new(obj, "time_ns", json_integer((json_int_t)mv_wall_ns()));
	push(mv, obj);
}

void events_call(struct mv *mv, const struct mv_call *c, pid_t pid, int verdict, int err,
		 const char *rule)
{
	if (!events_active(mv))
		return;
	json_t *o = json_object();
	json_object_set_new(o, "pid", json_integer(pid));
	json_object_set_new(o, "tid", json_integer(c->tid));
	json_object_set_new(o, "syscall", json_string(syscalls_name(c->sc)));
	json_object_set_new(o, "abi", json_string(syscalls_abi_name(c->abi)));
	json_object_set_new(o, "args", render_call_args(c));
	json_object_set_new(o, "verdict", json_string(verdict_name((enum mv_verdict)verdict)));
	if (err)
		json_object_set_new(o, "errno", json_integer(err));
	if (rule)
		json_object_set_new(o, "rule", json_string(rule));
	events_emit(mv, "call", o);
}

void events_proc(struct mv *mv, enum mv_event_kind kind, const struct proc *p, int status)
{
	if (!events_active(mv))
		return;
	static const char *const names[] = {"start", "exec", "exit"};
	json_t *o = json_object();
	json_object_set_new(o, "pid", json_integer(p->pid));
	json_object_set_new(o, "ppid", json_integer(p->ppid));
	json_object_set_new(o, "exe", p->exe ? json_string(p->exe) : json_null());
	json_object_set_new(o, "cmdline", render_cmdline(p));
	if (kind == MV_EVENT_EXIT && status >= 0)
		json_object_set_new(o, "status", json_integer(mv_exit_code(status)));
	events_emit(mv, names[kind], o);
}

void events_subscribe(struct mv *mv, const struct events_sub *s)
{
	struct events *e = mv->events;
	if (e->nsubs == e->capsubs) {
		e->capsubs = e->capsubs ? e->capsubs * 2 : 8;
		e->subs = xrealloc(e->subs, e->capsubs * sizeof(*e->subs));
	}
	e->subs[e->nsubs++] = *s;
	atomic_fetch_add(&e->subscribers, 1);
}

void events_unsubscribe(struct mv *mv, void *ctx)
{
	struct events *e = mv->events;
	for (size_t i = 0; i < e->nsubs; i++) {
		if (e->subs[i].ctx == ctx) {
			e->subs[i] = e->subs[--e->nsubs];
			atomic_fetch_sub(&e->subscribers, 1);
			return;
		}
	}
}

void events_flush(struct mv *mv)
{
	struct events *e = mv->events;
	pthread_mutex_lock(&e->lock);
	char **lines = e->lines;
	size_t n = e->n;
	uint64_t dropped = e->dropped;
	e->lines = NULL;
	e->n = e->cap = 0;
	e->dropped = 0;
	pthread_mutex_unlock(&e->lock);
	for (size_t s = 0; s < e->nsubs; s++) {
		const struct events_sub *sub = &e->subs[s];
		if (dropped)
			sub->dropped(sub->ctx, dropped);
		for (size_t i = 0; i < n; i++)
			sub->line(sub->ctx, lines[i]);
	}
	for (size_t i = 0; i < n; i++)
		free(lines[i]);
	free(lines);
}
