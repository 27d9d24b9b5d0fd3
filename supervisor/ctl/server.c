/* The control socket: a UNIX stream socket, one JSON request per line in,
 * one JSON reply per line out, plus event lines for subscribers
 * (docs/protocol.md). Everything here runs on the main loop and never
 * blocks: reads and writes are non-blocking, a slow reader's replies wait
 * in its own buffer, and its events are dropped (and counted) once the
 * buffer is full. */
#include "supervisor/ctl/server.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/ctl/ctl.h"
#include "supervisor/ctl/peer.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define CTL_MAX_LINE	  (1u << 20) /* a request line, newline excluded */
#define CTL_MAX_CLIENTS	  64
#define CTL_EVENTS_CAP	  (1u << 20)  /* buffered output beyond which events drop */
#define CTL_OUT_PAUSE	  (1u << 20)  /* ... and no more requests are read */
#define CTL_OUT_TOTAL_CAP (64u << 20) /* over every client: the biggest is cut off */

struct ctl_client {
	struct mv *mv;
	int fd;
	ev_io rio, wio;
	char *in;
	size_t in_len, in_cap;
	bool discarding; /* skipping the rest of an oversized line */
	char *out;
	size_t out_off, out_len, out_cap;
	bool subscribed;
	bool paused;	  /* too much unread output: its requests wait */
	uint64_t dropped; /* events lost since the last "dropped" notice */
	bool closing;	  /* close once the output is flushed */
	bool lingering;	  /* refused: our side shut, discarding input until EOF */
	ev_timer linger;
	bool dead;     /* closed; freed after this loop iteration */
	bool detached; /* no socket: ctl_reply_line's client, never subscribes */
	uid_t uid;
	uint64_t last_ns; /* connected, or last request read */
	bool following;	  /* its last `job` answer said running: it polls for the end */
	/* A request waiting for its job's end (args.wait_ms): its reply,
	 * and the requests after it, wait (ctl_server_jobs_ended). */
	bool waiting;
	int wait_job;
	json_t *wait_id;
	ev_timer wait_timer;
	struct ctl_client *next, *prev;
};

struct ctl_server {
	int fd;
	ev_io io;
	ev_check reaper; /* frees closed clients once no callback holds them */
	char *path;
	struct ctl_client *clients;
	struct ctl_client *dead;
	int nclients;
	size_t out_total; /* unread output over every client */
};

/* ---- client output -------------------------------------------------- */

static void client_close(struct ctl_client *c);

static void out_append(struct ctl_client *c, const char *data, size_t len)
{
	if (c->out_off && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + len > c->out_cap) {
		/* Compact before growing. */
		if (c->out_off) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		while (c->out_len + len > c->out_cap)
			c->out_cap = c->out_cap ? c->out_cap * 2 : 8192;
		c->out = xrealloc(c->out, c->out_cap);
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	c->mv->ctl->out_total += len;
}

static size_t out_pending(const struct ctl_client *c)
{
	return c->out_len - c->out_off;
}

/* What clients have not read is bounded twice. Each client: once it has
 * CTL_OUT_PAUSE unread, its further requests are not read (paused) until
 * it catches up, and its events are dropped; so it holds at most that
 * plus one reply. All clients: one reply can be large (regions of a big
 * layout), and 64 clients each asking for one and reading nothing must
 * not make memvisor hold gigabytes; past CTL_OUT_TOTAL_CAP the client
 * with the most unread output is disconnected, until the total fits.
 * -1 when that closed c itself. */
static int over_total(struct ctl_client *c)
{
	struct ctl_server *s = c->mv->ctl;
	while (s->out_total > CTL_OUT_TOTAL_CAP) {
		struct ctl_client *big = NULL;
		for (struct ctl_client *o = s->clients; o; o = o->next)
			if (!o->dead && (!big || out_pending(o) > out_pending(big)))
				big = o;
		if (!big)
			break;
		log_warn("control client fd %d has %zu bytes unread (all clients: %zu, limit "
			 "%u): dropping it",
			 big->fd, out_pending(big), s->out_total, CTL_OUT_TOTAL_CAP);
		client_close(big);
		if (big == c)
			return -1;
	}
	return 0;
}

/* Write what the socket takes now; keep the rest for the write watcher.
 * Returns -1 when the client was closed. */
static int flush(struct ctl_client *c)
{
	struct ev_loop *loop = c->mv->loop;
	while (out_pending(c)) {
		ssize_t w = fault_hit("ctl_write")
				? (errno = EPIPE, -1)
				: send(c->fd, c->out + c->out_off, out_pending(c),
				       MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			client_close(c); /* EPIPE, ECONNRESET: the client left */
			return -1;
		}
		c->out_off += (size_t)w;
		c->mv->ctl->out_total -= (size_t)w;
	}
	if (out_pending(c)) {
		if (over_total(c) < 0)
			return -1;
		ev_io_start(loop, &c->wio);
		return 0;
	}
	ev_io_stop(loop, &c->wio);
	c->out_off = c->out_len = 0;
	if (c->paused) {
		/* Read its waiting requests again: those already buffered
		 * first (on_client_read), which no readiness would report. */
		c->paused = false;
		ev_io_start(loop, &c->rio);
		ev_feed_event(loop, &c->rio, EV_READ);
	}
	if (c->closing) {
		/* Closing with the client's request unread would reset the
		 * connection and could lose the error reply we just sent:
		 * shut our side, and discard input until the client closes
		 * (or a second has passed). */
		c->closing = false;
		c->lingering = true;
		shutdown(c->fd, SHUT_WR);
		ev_io_start(loop, &c->rio);
		ev_timer_start(loop, &c->linger);
		return -1;
	}
	if (c->dropped && c->subscribed) {
		char line[96];
		int n = snprintf(line, sizeof(line), "{\"event\":\"dropped\",\"count\":%llu}\n",
				 (unsigned long long)c->dropped);
		c->dropped = 0;
		out_append(c, line, (size_t)n);
		return flush(c);
	}
	return 0;
}

/* Queue a reply line (taken over, newline-terminated) and send what the
 * socket takes. -1 when the client was closed. */
static int send_line(struct ctl_client *c, char *line)
{
	out_append(c, line, strlen(line));
	free(line);
	return flush(c);
}

/* A message as one reply line, newline-terminated; NULL only when jansson
 * cannot encode it. Takes the reference to msg. */
static char *json_line(json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!s)
		return NULL;
	size_t n = strlen(s);
	s = xrealloc(s, n + 2);
	memcpy(s + n, "\n", 2);
	return s;
}

static char *error_line(json_t *id, const char *code, const char *message)
{
	json_t *err = json_pack("{s:s, s:s}", "code", code, "message", message);
	return json_line(json_pack("{s:O?, s:b, s:o}", "id", id, "ok", 0, "error", err));
}

static int reply_error(struct ctl_client *c, json_t *id, const char *code, const char *message)
{
	char *line = error_line(id, code, message);
	return line ? send_line(c, line) : 0;
}

/* events_sub.line: one event line for a subscriber; one whose buffer is
 * full loses it, and is told how many it lost. */
static void client_event(void *ctx, const char *line)
{
	struct ctl_client *c = ctx;
	if (c->dead)
		return;
	if (out_pending(c) > CTL_EVENTS_CAP) {
		c->dropped++;
		return;
	}
	out_append(c, line, strlen(line));
	out_append(c, "\n", 1);
	flush(c);
}

/* events_sub.dropped: lines lost before the stream reached us. */
static void client_dropped(void *ctx, uint64_t n)
{
	struct ctl_client *c = ctx;
	c->dropped += n;
}

static char *raw_reply_line(json_t *id, char *result)
{
	char *ids = id ? json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	const char *idt = ids ? ids : "null";
	char *line = NULL;
	if (asprintf(&line, "{\"id\":%s,\"ok\":true,\"result\":%s}\n", idt, result) < 0)
		line = NULL;
	free(ids);
	free(result);
	return line;
}

/* Job id as `job` shows it now; NULL once it is forgotten. */
static json_t *job_now(struct mv *mv, int id)
{
	pthread_mutex_lock(&mv->lock);
	struct job *j = jobs_find_locked(mv, id);
	json_t *o = j ? job_json_locked(j) : NULL;
	pthread_mutex_unlock(&mv->lock);
	return o;
}

/* A client told a job runs polls for its end, which it is owed
 * (drain_clients). */
static void note_following(struct ctl_client *c, json_t *job)
{
	json_t *st = json_object_get(job, "state");
	c->following = json_is_string(st) && strcmp(json_string_value(st), "running") == 0;
}

/* The events command: the client gets every event line from now on. */
static void subscribe(struct ctl_client *c)
{
	if (!c->subscribed && !c->detached) {
		c->subscribed = true;
		struct events_sub sub = {.line = client_event, .dropped = client_dropped, .ctx = c};
		events_subscribe(c->mv, &sub);
	}
}

/* ---- requests ------------------------------------------------------- */

/* The reply line to one request line: the whole protocol, without the
 * socket. NULL only when jansson cannot encode the reply. */
static char *request_reply(struct ctl_client *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req) {
		char msg[256];
		snprintf(msg, sizeof(msg), "invalid JSON at column %d: %s", jerr.column, jerr.text);
		return error_line(NULL, MV_E_BAD_JSON, msg);
	}
	json_t *id = json_is_object(req) ? json_object_get(req, "id") : NULL;
	json_t *cmd = json_is_object(req) ? json_object_get(req, "cmd") : NULL;
	json_t *args = json_is_object(req) ? json_object_get(req, "args") : NULL;
	char *reply;
	struct mv_err err = {.code = MV_E_INTERNAL, .msg = ""};
	const struct ctl_cmd *cc = NULL;
	if (!json_is_object(req))
		reply = error_line(NULL, MV_E_BAD_REQUEST, "a request must be a JSON object");
	else if (!json_is_string(cmd))
		reply = error_line(id, MV_E_BAD_REQUEST, "cmd: expected a string");
	else if (args && !json_is_object(args) && !json_is_null(args))
		reply = error_line(id, MV_E_BAD_REQUEST, "args: expected an object");
	else if (!(cc = ctl_cmd_find(json_string_value(cmd)))) {
		char msg[300];
		snprintf(msg, sizeof(msg),
			 "unknown command '%.200s' (the hello command lists them)",
			 json_string_value(cmd));
		reply = error_line(id, MV_E_UNKNOWN_COMMAND, msg);
	} else {
		json_t *empty = NULL;
		if (!json_is_object(args))
			args = empty = json_object();
		json_t *result = NULL;
		struct ctl_call call = {0};
		int hrc = fault_hit("ctl_alloc") ? ctl_fail(&err, MV_E_INTERNAL, "out of memory")
						 : cc->fn(c->mv, &call, args, &result, &err);
		if (hrc == 0 && call.subscribe)
			subscribe(c);
		if (hrc == 0 && call.raw_result) {
			json_decref(result);
			reply = raw_reply_line(id, mv_steal_ptr(call.raw_result));
		} else if (hrc == 0 && call.wait_job && !c->detached) {
			json_decref(result);
			reply = NULL;
			c->waiting = true;
			c->wait_job = call.wait_job;
			c->wait_id = json_incref(id);
			ev_timer_set(&c->wait_timer, call.wait_ms / 1000.0, 0.0);
			ev_timer_start(c->mv->loop, &c->wait_timer);
			/* It may have ended already: answered on the next wake. */
			ev_async_send(c->mv->loop, &c->mv->wake);
		} else if (hrc == 0) {
			if (call.wait_job) {
				/* No socket to wait on: the job as it is now. */
				json_decref(result);
				result = job_now(c->mv, call.wait_job);
			}
			if (strcmp(cc->name, "job") == 0)
				note_following(c, result);
			reply = json_line(json_pack("{s:O?, s:b, s:o}", "id", id, "ok", 1, "result",
						    result ? result : json_null()));
		} else {
			free(mv_steal_ptr(call.raw_result));
			json_decref(result);
			reply = error_line(id, err.code, err.msg);
		}
		json_decref(empty);
	}
	json_decref(req);
	return reply;
}

static int handle_request(struct ctl_client *c, const char *line, size_t len)
{
	c->last_ns = mv_now_ns();
	char *reply = request_reply(c, line, len);
	return reply ? send_line(c, reply) : 0;
}

char *ctl_reply_line(struct mv *mv, const char *line, size_t len)
{
	struct ctl_client c = {.mv = mv, .fd = -1, .detached = true};
	return request_reply(&c, line, len);
}

/* Split the input buffer into lines. Returns -1 when the client was closed. */
static int process_input(struct ctl_client *c)
{
	size_t start = 0;
	for (;;) {
		char *nl = memchr(c->in + start, '\n', c->in_len - start);
		if (!nl)
			break;
		if (c->waiting) {
			/* Its requests are answered in order: the rest waits
			 * for the job (wait_answer reads them again). */
			ev_io_stop(c->mv->loop, &c->rio);
			break;
		}
		if (out_pending(c) > CTL_OUT_PAUSE && !c->discarding) {
			/* The client reads too little: the rest waits. */
			c->paused = true;
			ev_io_stop(c->mv->loop, &c->rio);
			break;
		}
		size_t len = (size_t)(nl - (c->in + start));
		if (c->discarding) {
			c->discarding = false;
		} else if (len > CTL_MAX_LINE) {
			if (reply_error(c, NULL, MV_E_TOO_LARGE, "request line longer than 1 MiB") <
			    0)
				return -1;
		} else if (len > 0 && !(len == 1 && c->in[start] == '\r')) {
			if (handle_request(c, c->in + start, len) < 0)
				return -1;
		}
		start += len + 1;
	}
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
	if (!c->paused && c->in_len > CTL_MAX_LINE) {
		/* No newline in sight: refuse now, skip to the next newline. */
		c->in_len = 0;
		if (!c->discarding) {
			c->discarding = true;
			if (reply_error(c, NULL, MV_E_TOO_LARGE, "request line longer than 1 MiB") <
			    0)
				return -1;
		}
	}
	return 0;
}

static void on_client_read(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ctl_client *c = w->data;
	if (c->lingering) {
		char sink[4096];
		ssize_t n;
		while ((n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			client_close(c);
		return;
	}
	if (c->paused || c->waiting)
		return;
	/* Requests left waiting by a pause come first. */
	if (c->in_len && (process_input(c) < 0 || c->dead || c->closing || c->paused || c->waiting))
		return;
	for (;;) {
		if (c->in_cap - c->in_len < 65536) {
			c->in_cap = c->in_cap ? c->in_cap * 2 : 65536;
			c->in = xrealloc(c->in, c->in_cap);
		}
		ssize_t n = fault_hit("ctl_read") ? (errno = ECONNRESET, -1)
						  : recv(c->fd, c->in + c->in_len,
							 c->in_cap - c->in_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			/* EOF: a partial last line is dropped, never executed. */
			client_close(c);
			return;
		}
		c->in_len += (size_t)n;
		if (process_input(c) < 0 || c->dead || c->closing || c->paused || c->waiting)
			return;
	}
}

static void on_client_write(struct ev_loop *loop, ev_io *w, int revents)
{
	flush(w->data);
}

/* Close a client now; free it once the current callbacks are done with it
 * (event delivery may be walking the subscriber list that holds it). */
static void client_close(struct ctl_client *c)
{
	struct mv *mv = c->mv;
	struct ctl_server *s = mv->ctl;
	if (c->dead)
		return;
	c->dead = true;
	ev_io_stop(mv->loop, &c->rio);
	ev_io_stop(mv->loop, &c->wio);
	ev_timer_stop(mv->loop, &c->linger);
	ev_timer_stop(mv->loop, &c->wait_timer);
	json_decref(c->wait_id);
	c->wait_id = NULL;
	c->waiting = false;
	s->out_total -= out_pending(c);
	c->out_off = c->out_len = 0;
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nclients--;
	c->next = s->dead;
	s->dead = c;
	ev_check_start(mv->loop, &s->reaper);
}

static void on_linger_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	client_close(w->data);
}

/* The waiting request's reply: the job as it is now (ended, or still
 * running when wait_ms passed). Then its next requests are read. */
static void wait_answer(struct ctl_client *c)
{
	struct mv *mv = c->mv;
	ev_timer_stop(mv->loop, &c->wait_timer);
	c->waiting = false;
	json_t *id = c->wait_id;
	c->wait_id = NULL;
	json_t *o = job_now(mv, c->wait_job);
	char *line;
	if (o) {
		note_following(c, o);
		line = json_line(json_pack("{s:O?, s:b, s:o}", "id", id, "ok", 1, "result", o));
	} else {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "job %d is no longer kept (memvisor keeps the last 64 finished jobs)",
			 c->wait_job);
		line = error_line(id, MV_E_BAD_REQUEST, msg);
	}
	json_decref(id);
	if (line && send_line(c, line) < 0)
		return;
	if (!c->dead && !c->paused && !c->lingering) {
		ev_io_start(mv->loop, &c->rio);
		ev_feed_event(mv->loop, &c->rio, EV_READ);
	}
}

static void on_wait_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ctl_client *c = w->data;
	if (c->waiting && !c->dead)
		wait_answer(c);
}

void ctl_server_jobs_ended(struct mv *mv)
{
	struct ctl_server *s = mv->ctl;
	if (!s)
		return;
	for (struct ctl_client *c = s->clients, *next; c; c = next) {
		next = c->next;
		if (!c->waiting || c->dead)
			continue;
		pthread_mutex_lock(&mv->lock);
		struct job *j = jobs_find_locked(mv, c->wait_job);
		bool ended = !j || j->state != JOB_RUNNING;
		pthread_mutex_unlock(&mv->lock);
		if (ended)
			wait_answer(c); /* may close c: next was taken first */
	}
}

static void free_dead(struct mv *mv)
{
	struct ctl_server *s = mv->ctl;
	while (s->dead) {
		struct ctl_client *c = s->dead;
		s->dead = c->next;
		if (c->subscribed)
			events_unsubscribe(mv, c);
		free(c->in);
		free(c->out);
		free(c);
	}
}

static void on_check(struct ev_loop *loop, ev_check *w, int revents)
{
	struct mv *mv = w->data;
	ev_check_stop(loop, w);
	free_dead(mv);
}

/* ---- accepting ------------------------------------------------------ */

static struct ctl_client *client_new(struct mv *mv, int fd)
{
	struct ctl_server *s = mv->ctl;
	struct ctl_client *c = xcalloc(1, sizeof(*c));
	c->mv = mv;
	c->fd = fd;
	c->last_ns = mv_now_ns();
	ev_io_init(&c->rio, on_client_read, fd, EV_READ);
	ev_io_init(&c->wio, on_client_write, fd, EV_WRITE);
	ev_timer_init(&c->linger, on_linger_timeout, 1.0, 0.0);
	ev_timer_init(&c->wait_timer, on_wait_timeout, 1.0, 0.0);
	c->rio.data = c->wio.data = c->linger.data = c->wait_timer.data = c;
	c->next = s->clients;
	if (s->clients)
		s->clients->prev = c;
	s->clients = c;
	s->nclients++;
	return c;
}

static void refuse(struct ctl_client *c, const char *code, const char *why)
{
	c->closing = true;
	reply_error(c, NULL, code, why);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mv *mv = w->data;
	struct ctl_server *s = mv->ctl;
	int fd = fault_hit("ctl_accept") ? (errno = EMFILE, -1)
					 : accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warn("control socket accept: %s", strerror(errno));
		return; /* a pending connection is retried on the next readiness */
	}
	struct ucred cred;
	socklen_t len = sizeof(cred);
	bool full = s->nclients >= CTL_MAX_CLIENTS;
	struct ctl_client *c = client_new(mv, fd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		refuse(c, MV_E_INTERNAL, "cannot identify the peer (SO_PEERCRED)");
		return;
	}
	c->uid = cred.uid;
	if (cred.uid != geteuid() && cred.uid != 0) {
		char why[128];
		snprintf(why, sizeof(why), "uid %u may not use this socket (owner: uid %u)",
			 cred.uid, geteuid());
		log_info("refused control client pid %d uid %u", cred.pid, cred.uid);
		refuse(c, MV_E_PERMISSION, why);
		return;
	}
	/* Checked once, here: the peer cannot leave or enter the supervised
	 * tree later (supervisor/ctl/peer.c). Every command is refused, the
	 * read-only ones too: status, regions and events would tell a
	 * sandboxed program what its supervisor sees and when a checkpoint
	 * stops it, which it has no need to know. */
	int prc = ctl_peer_check(mv, fd, cred.pid);
	if (prc < 0) {
		log_info("refused control client pid %d: %s", cred.pid,
			 prc == -EPERM ? "a supervised process" : strerror(-prc));
		refuse(c, MV_E_FORBIDDEN,
		       prc == -EPERM
			   ? "requests from a supervised process are refused: a program cannot "
			     "steer its own supervisor"
			   : "cannot tell whether the connecting process is supervised: refused");
		return;
	}
	if (full) {
		refuse(c, MV_E_BUSY, "too many control clients (limit 64)");
		return;
	}
	ev_io_start(loop, &c->rio);
}

/* ---- the socket file ------------------------------------------------ */

/* memvisor's own runtime directory, where sockets go by default. */
static void default_dir(char *dir, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg)
		snprintf(dir, len, "%s/memvisor", xdg);
	else if (geteuid() == 0)
		snprintf(dir, len, "/run/memvisor");
	else
		snprintf(dir, len, "/tmp/memvisor-%u", geteuid());
}

/* The socket in the runtime directory: NAME.sock for a run with --name,
 * else PID.sock. */
static char *default_path(pid_t self, const char *name)
{
	char dir[4096];
	default_dir(dir, sizeof(dir));
	size_t n = strlen(dir) + (name ? strlen(name) : 0) + 32;
	char *path = xmalloc(n);
	if (name)
		snprintf(path, n, "%s/%s.sock", dir, name);
	else
		snprintf(path, n, "%s/%d.sock", dir, self);
	return path;
}

/* Create the socket's directory (0700) if it is missing and it is
 * memvisor's runtime directory; any other is the user's, and a missing
 * one is a mistyped path (-ENOENT), not ours to make. The default
 * directory (private) must then be ours and closed to everyone else, as
 * ssh-agent and the XDG base directory spec require of a runtime dir:
 * another local user who made /tmp/memvisor-UID first (mode 0777, or a
 * symlink to a directory of theirs) would otherwise see our socket
 * replaced by theirs, and `memvisor ctl` talk to them. -EPERM with why
 * filled when it is not. */
static int ensure_dir(const char *path, bool private, char *why, size_t whylen)
{
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	char own[4096];
	default_dir(own, sizeof(own));
	if (strcmp(dir, own) != 0 && access(dir, F_OK) < 0 && errno == ENOENT) {
		snprintf(why, whylen, "directory %s does not exist", dir);
		return -ENOENT;
	}
	if (mkdir(dir, 0700) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	struct stat st;
	if ((private ? lstat(dir, &st) : stat(dir, &st)) < 0)
		return -errno;
	if (private && S_ISLNK(st.st_mode)) {
		snprintf(why, whylen, "runtime directory %s is a symbolic link", dir);
		return -EPERM;
	}
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (private && st.st_uid != geteuid()) {
		snprintf(why, whylen, "runtime directory %s belongs to uid %u, not to us (uid %u)",
			 dir, st.st_uid, geteuid());
		return -EPERM;
	}
	if (private && (st.st_mode & 077)) {
		snprintf(why, whylen,
			 "runtime directory %s has mode %04o: it must not be open to "
			 "group or others (0700)",
			 dir, (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* A socket file left by a memvisor that died is removed; a live one is
 * somebody else's. */
static int clear_stale(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int live = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	if (live)
		return -EADDRINUSE;
	return unlink(path) < 0 ? -errno : 0;
}

int ctl_listen_path(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int rc = clear_stale(path);
	if (rc < 0)
		return rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* The file bind makes takes the socket inode's mode less the umask
	 * (net/unix/af_unix.c unix_bind): 0600 set on it first, the socket is
	 * never more open than that. Not the umask: it is the process's, and
	 * the agent's other threads make image directories meanwhile. */
	if (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, CTL_MAX_CLIENTS) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static int server_start(struct mv *mv)
{
	struct ctl_server *s = xcalloc(1, sizeof(*s));
	s->fd = -1;
	mv->ctl = s;
	/* Only a socket that was created is announced in --stats-json. */
	s->path = mv->opts.socket_path ? xstrdup(mv->opts.socket_path)
				       : default_path(mv->self, mv->opts.name);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(s->path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "memvisor: socket path too long (%zu bytes, limit %zu): %s\n",
			strlen(s->path), sizeof(a.sun_path) - 1, s->path);
		return -ENAMETOOLONG;
	}
	char why[4400] = "";
	int rc = ensure_dir(s->path, !mv->opts.socket_path, why, sizeof(why));
	if (rc == 0 && (rc = ctl_listen_path(s->path)) >= 0) {
		s->fd = rc;
		rc = 0;
	}
	if (rc < 0) {
		if (rc == -ENOENT && why[0])
			fprintf(stderr, "memvisor: cannot create socket %s: %s\n", s->path, why);
		else if (why[0])
			fprintf(
			    stderr,
			    "memvisor: %s; refusing to put the control socket there (remove it, "
			    "or choose a socket with --socket)\n",
			    why);
		else if (rc == -EADDRINUSE && mv->opts.name)
			fprintf(
			    stderr,
			    "memvisor: the name %s is taken: a running memvisor listens on %s\n",
			    mv->opts.name, s->path);
		else if (rc == -EADDRINUSE)
			fprintf(stderr, "memvisor: socket %s is in use by a running memvisor\n",
				s->path);
		else if (rc == -EEXIST)
			fprintf(stderr, "memvisor: %s exists and is not a socket\n", s->path);
		else
			fprintf(stderr, "memvisor: cannot create socket %s: %s\n", s->path,
				strerror(-rc));
		return rc;
	}
	mv->socket_path = s->path;
	log_info("control socket: %s", s->path);
	ev_io_init(&s->io, on_accept, s->fd, EV_READ);
	s->io.data = mv;
	ev_io_start(mv->loop, &s->io);
	ev_check_init(&s->reaper, on_check);
	s->reaper.data = mv;
	return 0;
}

int ctl_server_start(struct mv *mv)
{
	int rc = server_start(mv);
	if (rc < 0) {
		/* Nothing listens: leave no server behind (mv->ctl is NULL). */
		free(mv->ctl->path);
		free(mv->ctl);
		mv->ctl = NULL;
	}
	return rc;
}

/* ---- the last answers ------------------------------------------------- */

/* memvisor exits once its command has, often while a client waits for
 * an answer: `ctl checkpoint --wait` polls its job, whose end (done, or
 * failed because the program exited) memvisor has just waited for
 * (jobs_wait_all), and a request sent meanwhile sits unread. Closing now
 * would reset those connections ("closed the connection", "Broken
 * pipe") and hide how the job ended. So the socket keeps answering,
 * outside the event loop (whose other watchers are done), until every
 * client has been quiet for DRAIN_QUIET_NS, and none that polls a job
 * (`ctl ... --wait` asks every 100 ms) has been told it ended, for at
 * most DRAIN_MAX_NS. A quiet period alone was not enough: on a loaded
 * machine a follower's 100 ms sleep can last longer than 500 ms, and it
 * then found memvisor gone. New jobs are refused by then (jobs_start). */
#define DRAIN_QUIET_NS (500 * 1000000ull)
#define DRAIN_MAX_NS   (10000 * 1000000ull)

static bool client_busy(const struct ctl_client *c, uint64_t now)
{
	if (c->dead || c->lingering)
		return false;
	return c->following || c->waiting || out_pending(c) || c->in_len ||
	       now - c->last_ns < DRAIN_QUIET_NS;
}

static void drain_clients(struct mv *mv)
{
	struct ctl_server *s = mv->ctl;
	uint64_t deadline = mv_now_ns() + DRAIN_MAX_NS;
	struct pollfd *pfd = NULL;
	struct ctl_client **who = NULL;
	for (;;) {
		/* Every job has ended by now (jobs_wait_all): the requests
		 * that wait for one are answered. */
		ctl_server_jobs_ended(mv);
		free_dead(mv);
		uint64_t now = mv_now_ns();
		bool busy = false;
		size_t n = 0;
		for (struct ctl_client *c = s->clients; c; c = c->next)
			busy |= client_busy(c, now);
		if (!busy || now >= deadline)
			break;
		size_t cap = (size_t)s->nclients + 1;
		pfd = xrealloc(pfd, cap * sizeof(*pfd));
		who = xrealloc(who, cap * sizeof(*who));
		/* Connections made meanwhile are answered too: a checkpoint
		 * asked for now gets no_such_process, not a reset. */
		pfd[n] = (struct pollfd){.fd = s->fd, .events = POLLIN};
		who[n++] = NULL;
		for (struct ctl_client *c = s->clients; c && n < cap; c = c->next) {
			if (c->dead)
				continue;
			pfd[n] = (struct pollfd){.fd = c->fd,
						 .events = (short)((c->paused ? 0 : POLLIN) |
								   (out_pending(c) ? POLLOUT : 0))};
			who[n++] = c;
		}
		if (poll(pfd, n, 20) < 0 && errno != EINTR)
			break;
		for (size_t i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			if (!who[i])
				on_accept(mv->loop, &s->io, 0);
			else if (who[i]->dead)
				continue;
			else if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
				on_client_read(mv->loop, &who[i]->rio, 0);
			else if (pfd[i].revents & POLLOUT)
				flush(who[i]);
		}
		free_dead(mv);
	}
	free(pfd);
	free(who);
}

void ctl_server_stop(struct mv *mv)
{
	struct ctl_server *s = mv->ctl;
	if (!s)
		return;
	if (s->fd >= 0)
		drain_clients(mv);
	/* Subscribers get what is still queued, as far as it goes now. */
	events_flush(mv);
	while (s->clients) {
		struct ctl_client *c = s->clients;
		flush(c);
		client_close(c); /* no-op if flush closed it */
	}
	ev_check_stop(mv->loop, &s->reaper);
	free_dead(mv);
	if (s->fd >= 0) {
		ev_io_stop(mv->loop, &s->io);
		close(s->fd);
		unlink(s->path);
	}
	/* mv->opts.socket_path keeps pointing at the path for --stats-json. */
}

void ctl_server_free(struct mv *mv)
{
	if (!mv->ctl)
		return;
	if (mv->socket_path == mv->ctl->path)
		mv->socket_path = NULL;
	free(mv->ctl->path);
	free(mv->ctl);
	mv->ctl = NULL;
}
