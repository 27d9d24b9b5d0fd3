#include "supervisor/host/agent.h"
#include "supervisor/host/sdnotify.h"
#include "supervisor/ctl/metrics.h"
#include "supervisor/ctl/server.h"
#include "common/util.h"
#include "policy/policy.h"
#include "state/ocistate.h"
#include "state/promtext.h"
#include "supervisor/host/container.h"
#include "supervisor/host/keeper.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/ptrace.h"

#include <ev.h>
#include <jansson.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#define MSG_MAX	     (1u << 20) /* a runtime's state message */
#define MSG_FDS_MAX  16
#define RUNTIMES_MAX 64 /* runtimes connected at once */
#define CLIENTS_MAX  64
#define RUNTIME_SECS 5.0 /* to send the whole message */

struct agent;

/* A runtime's connection: the message and the fds that came with it. */
struct runtime {
	struct agent *ag;
	int fd;
	ev_io io;
	ev_timer timeout;
	char *buf;
	size_t len, cap;
	int fds[MSG_FDS_MAX];
	size_t n_fds;
	struct runtime *next, **pprev;
};

/* A control client: one request line, one reply line. */
struct client {
	struct agent *ag;
	int fd;
	ev_io io;
	char buf[65536];
	size_t len;
	bool refused; /* told so, our side shut: its input is discarded until EOF */
	struct client *next, **pprev;
};

struct agent {
	const struct agent_opts *o;
	struct ev_loop *loop;
	struct container_env env;
	int listen_fd, ctl_fd, sigfd;
	ev_io listen_io, ctl_io, sig_io, keeper_io;
	ev_async ended;
	pid_t keeper_pid;
	struct container *containers;
	struct runtime *runtimes;
	struct client *clients;
	int n_runtimes, n_clients;
	bool stopping;
	int status;
	/* For metrics: containers started, and what was refused. */
	uint64_t started, refused[3];	     /* enum refusal */
	uint64_t restarts, restarts_refused; /* SIGUSR2 */
	ev_timer metrics_timer;		     /* --metrics-file */
	int metrics_err;		     /* the last write's, said once */
};

enum refusal { REFUSED_MESSAGE, REFUSED_CONTAINER, REFUSED_EXEC };
static const char *const refusal_name[] = {"message", "container", "exec"};

char *agent_default_socket(void)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *p;
	if (geteuid() == 0 || !xdg || !*xdg)
		p = xstrdup(geteuid() == 0 ? "/run/memvisor/agent/agent.sock"
					   : "/tmp/memvisor-agent.sock");
	else if (asprintf(&p, "%s/memvisor/agent/agent.sock", xdg) < 0)
		p = NULL;
	return p;
}

/* ---- sockets ------------------------------------------------------------ */

/* A listening socket at path (ctl_listen_path), in directories made
 * 0700 when missing (the default's /run/memvisor/agent/). */
static int listen_at(const char *path)
{
	_cleanup_free_ char *dir = xstrdup(path);
	for (char *s = strchr(dir + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return ctl_listen_path(path);
}

/* Accept one connection from root or our own uid; -1 otherwise (closed). */
static int accept_trusted(int lfd, pid_t *pid)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return -1;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (cred.uid != 0 && cred.uid != geteuid())) {
		log_warn("refused a connection from uid %d (pid %d)", len ? (int)cred.uid : -1,
			 (int)cred.pid);
		close(fd);
		return -1;
	}
	*pid = cred.pid;
	return fd;
}

/* ---- runtimes ----------------------------------------------------------- */

static void runtime_free(struct runtime *r)
{
	ev_io_stop(r->ag->loop, &r->io);
	ev_timer_stop(r->ag->loop, &r->timeout);
	close(r->fd);
	for (size_t i = 0; i < r->n_fds; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	*r->pprev = r->next;
	if (r->next)
		r->next->pprev = r->pprev;
	r->ag->n_runtimes--;
	free(r->buf);
	free(r);
}

/* The running container with this id. */
static struct container *find_id(struct agent *ag, const char *id)
{
	for (struct container *c = ag->containers; c; c = c->next)
		if (!atomic_load(&c->ended) && !strcmp(c->msg.id, id))
			return c;
	return NULL;
}

/* The running container with this id, or else the one with this name.
 * A name two containers carry picks neither: NULL, and *others (when
 * given) lists their ids, malloc'd. */
static struct container *find_container(struct agent *ag, const char *key, char **others)
{
	struct container *c = find_id(ag, key), *hit = NULL;
	if (c)
		return c;
	size_t n = 0, len = 0;
	char *ids = NULL;
	for (c = ag->containers; c; c = c->next) {
		if (atomic_load(&c->ended) || !c->msg.name[0] || strcmp(c->msg.name, key) != 0)
			continue;
		hit = c;
		n++;
		size_t l = strlen(c->msg.id);
		ids = xrealloc(ids, len + l + 3);
		len += (size_t)sprintf(ids + len, "%s%s", len ? ", " : "", c->msg.id);
	}
	if (n > 1 && others) {
		*others = ids;
		return NULL;
	}
	free(ids);
	return n > 1 ? NULL : hit;
}

/* The message so far, if it is whole: supervise the container it names.
 * false when it is not (yet). Runtimes need not close the connection
 * after the message: runc 1.1 keeps it open until the container's exec,
 * a notified call, so waiting for EOF would wait on ourselves. */
static bool runtime_done(struct runtime *r, bool eof)
{
	struct agent *ag = r->ag;
	struct oci_msg m;
	struct mv_err err = {0};
	size_t end = r->len;
	while (end && strchr(" \t\r\n", r->buf[end - 1]))
		end--;
	if (!eof && (end == 0 || r->buf[end - 1] != '}' || r->n_fds == 0))
		return false;
	if (ocistate_parse(r->buf, r->len, &m, &err) < 0) {
		if (!eof)
			return false;
		log_warn("runtime message refused: %s", err.msg);
		ag->refused[REFUSED_MESSAGE]++;
		return true;
	}
	if ((size_t)m.seccomp_fd >= r->n_fds || m.n_fds != r->n_fds) {
		log_warn("container %s: the message names %zu fds, %zu came with it: refused", m.id,
			 m.n_fds, r->n_fds);
		ag->refused[REFUSED_MESSAGE]++;
	} else if (m.pid == 0 || m.proc_pid != m.pid) {
		/* runc exec / crun exec: a process started in a running
		 * container, with a filter and a listener of its own. crun
		 * does not say which (0): its first notification does. */
		int fd = r->fds[m.seccomp_fd];
		r->fds[m.seccomp_fd] = -1;
		struct container *c = find_id(ag, m.id);
		if (c) {
			if (container_adopt(c, m.proc_pid, fd) < 0)
				ag->refused[REFUSED_EXEC]++;
		} else {
			log_warn("container %s: process %d (exec) refused: the container is not "
				 "supervised here",
				 m.id, m.proc_pid);
			close(fd);
			ag->refused[REFUSED_EXEC]++;
		}
	} else if (find_id(ag, m.id)) {
		log_warn("container %s: already supervised: a second listener is refused", m.id);
		ag->refused[REFUSED_CONTAINER]++;
	} else {
		int fd = r->fds[m.seccomp_fd];
		r->fds[m.seccomp_fd] = -1;
		struct container *c;
		if (container_start(&ag->env, &m, fd, &c) == 0) {
			c->next = ag->containers;
			ag->containers = c;
			ag->started++;
		} else {
			ag->refused[REFUSED_CONTAINER]++;
		}
	}
	ocistate_free(&m);
	return true;
}

static void on_runtime(struct ev_loop *loop, ev_io *w, int revents)
{
	struct runtime *r = w->data;
	for (;;) {
		if (r->cap - r->len < 4096)
			r->buf = xrealloc(r->buf, r->cap = r->cap ? r->cap * 2 : 8192);
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int) * MSG_FDS_MAX)];
		} ctl;
		struct iovec iov = {r->buf + r->len, r->cap - r->len - 1};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.b,
				    .msg_controllen = sizeof(ctl.b)};
		ssize_t n = recvmsg(r->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int *fds = (int *)CMSG_DATA(c);
			for (size_t i = 0; i < k; i++) {
				if (r->n_fds < MSG_FDS_MAX)
					r->fds[r->n_fds++] = fds[i];
				else
					close(fds[i]);
			}
		}
		if (n > 0 && r->len + (size_t)n <= MSG_MAX && !(mh.msg_flags & MSG_CTRUNC)) {
			r->len += (size_t)n;
			if (!runtime_done(r, false))
				continue;
			runtime_free(r);
			return;
		}
		if (n == 0)
			runtime_done(r, true);
		else
			log_warn("runtime connection: %s",
				 n < 0 ? strerror(errno) : "message too large or too many fds");
		runtime_free(r);
		return;
	}
}

static void on_runtime_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct runtime *r = w->data;
	log_warn("runtime connection: no whole message within %.0f s", RUNTIME_SECS);
	r->ag->refused[REFUSED_MESSAGE]++;
	runtime_free(r);
}

static void on_listen(struct ev_loop *loop, ev_io *w, int revents)
{
	struct agent *ag = w->data;
	pid_t pid;
	int fd = accept_trusted(ag->listen_fd, &pid);
	if (fd < 0)
		return;
	if (ag->n_runtimes >= RUNTIMES_MAX || ag->stopping) {
		log_warn("runtime pid %d refused: %s", pid,
			 ag->stopping ? "the agent is stopping" : "too many at once");
		close(fd);
		return;
	}
	struct runtime *r = xcalloc(1, sizeof(*r));
	r->ag = ag;
	r->fd = fd;
	r->next = ag->runtimes;
	if (r->next)
		r->next->pprev = &r->next;
	r->pprev = &ag->runtimes;
	ag->runtimes = r;
	ag->n_runtimes++;
	ev_io_init(&r->io, on_runtime, fd, EV_READ);
	r->io.data = r;
	ev_io_start(loop, &r->io);
	ev_timer_init(&r->timeout, on_runtime_timeout, RUNTIME_SECS, 0);
	r->timeout.data = r;
	ev_timer_start(loop, &r->timeout);
}

/* ---- the control socket ------------------------------------------------- */

/* Is pid inside one of the containers (its init or below)? */
static bool in_a_container(struct agent *ag, pid_t pid)
{
	for (int depth = 0; pid > 1 && depth < 256; depth++) {
		for (struct container *c = ag->containers; c; c = c->next)
			if (c->msg.pid == pid)
				return true;
		struct proc_stat st;
		if (procfs_stat(pid, &st) < 0)
			return true; /* cannot tell: refused */
		pid = st.ppid;
	}
	return false;
}

/* ---- metrics ------------------------------------------------------------ */

/* A container answering a scrape: no longer than this. */
#define METRICS_WAIT_MS 2000

/* The node's exposition: the agent's own families, then every running
 * container's (each made on its own thread), labelled container, name
 * and policy, each family declared once (state/promtext.h). up: 0 in
 * --metrics-file's last write, when the agent stops. */
static char *agent_metrics(struct agent *ag, bool up)
{
	size_t n = 0, unanswered = 0, running = 0;
	for (struct container *c = ag->containers; c; c = c->next)
		n++;
	const char **texts = xcalloc(n + 1, sizeof(*texts));
	char **labels = xcalloc(n + 1, sizeof(*labels));
	char *own = NULL;
	size_t k = 1;
	/* Every container asked first, then each answer taken: a scrape
	 * waits for the slowest container, not for the sum of them. */
	bool *asked = xcalloc(n + 1, sizeof(*asked));
	size_t a = 0;
	for (struct container *c = ag->containers; c; c = c->next, a++)
		asked[a] = up && !atomic_load(&c->ended) && container_metrics_ask(c);
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += METRICS_WAIT_MS / 1000;
	until.tv_nsec += (long)(METRICS_WAIT_MS % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	a = 0;
	for (struct container *c = ag->containers; c; c = c->next, a++) {
		if (atomic_load(&c->ended) && !asked[a])
			continue;
		running++;
		char *text = asked[a] ? container_metrics_take(c, &until) : NULL;
		if (!text) {
			unanswered += up;
			continue;
		}
		size_t len = 0;
		promtext_label(&labels[k], &len, "container", c->msg.id);
		if (c->msg.name[0])
			promtext_label(&labels[k], &len, "name", c->msg.name);
		promtext_label(&labels[k], &len, "policy",
			       c->msg.policy[0] ? c->msg.policy : "default");
		texts[k++] = text;
	}
	FILE *f = open_memstream(&own, &(size_t){0});
	fprintf(f,
		"# HELP memvisor_agent_up 1 while the agent runs; 0 in --metrics-file's last "
		"write.\n# TYPE memvisor_agent_up gauge\nmemvisor_agent_up %d\n",
		up ? 1 : 0);
	fprintf(f,
		"# HELP memvisor_agent_info The agent's version.\n# TYPE memvisor_agent_info "
		"gauge\nmemvisor_agent_info{version=\"%s\"} 1\n",
		MV_VERSION);
	fprintf(f,
		"# HELP memvisor_agent_containers Containers supervised now.\n# TYPE "
		"memvisor_agent_containers gauge\nmemvisor_agent_containers %zu\n",
		running);
	fprintf(f,
		"# HELP memvisor_agent_containers_started_total Containers taken into "
		"supervision.\n# TYPE memvisor_agent_containers_started_total "
		"counter\nmemvisor_agent_containers_started_total %llu\n",
		(unsigned long long)ag->started);
	fprintf(f, "# HELP memvisor_agent_refused_total What runtimes sent that was refused: "
		   "a message (malformed, incomplete, its fds), a container, an exec.\n# TYPE "
		   "memvisor_agent_refused_total counter\n");
	for (int i = 0; i < 3; i++)
		fprintf(f, "memvisor_agent_refused_total{what=\"%s\"} %llu\n", refusal_name[i],
			(unsigned long long)ag->refused[i]);
	fprintf(f,
		"# HELP memvisor_agent_restarts_total Restarts in place (SIGUSR2) that handed "
		"every container over; refused ones apart.\n# TYPE memvisor_agent_restarts_total "
		"counter\nmemvisor_agent_restarts_total{outcome=\"done\"} "
		"%llu\nmemvisor_agent_restarts_total{outcome=\"refused\"} %llu\n",
		(unsigned long long)ag->restarts, (unsigned long long)ag->restarts_refused);
	fprintf(f,
		"# HELP memvisor_agent_containers_unanswered Containers whose series this "
		"exposition lacks (no answer within %d ms).\n# TYPE "
		"memvisor_agent_containers_unanswered gauge\nmemvisor_agent_containers_unanswered "
		"%zu\n",
		METRICS_WAIT_MS, unanswered);
	fclose(f);
	texts[0] = own;
	char *all = promtext_merge(texts, (const char *const *)labels, k);
	for (size_t i = 0; i < k; i++) {
		free((char *)texts[i]);
		free(labels[i]);
	}
	free(texts);
	free(labels);
	free(asked);
	return all;
}

static void metrics_file_write(struct agent *ag, bool up)
{
	_cleanup_free_ char *text = agent_metrics(ag, up);
	int rc = metrics_write_file(ag->o->metrics_file, text);
	if (rc < 0 && rc != ag->metrics_err)
		log_warn("cannot write --metrics-file %s: %s", ag->o->metrics_file, strerror(-rc));
	ag->metrics_err = rc;
}

static void on_metrics_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	metrics_file_write(w->data, true);
}

static json_t *hello_json(struct agent *ag)
{
	int n = 0;
	for (struct container *c = ag->containers; c; c = c->next)
		n += !atomic_load(&c->ended);
	return json_pack("{s:s, s:s, s:i, s:s, s:s, s:s?, s:s?, s:i, s:[ssss]}", "version",
			 MV_VERSION, "role", "agent", "pid", (int)getpid(), "listen", ag->o->listen,
			 "socket", ag->o->socket, "policy", ag->o->policy_path, "policy_dir",
			 ag->o->policy_dir, "containers", n, "commands", "hello", "containers",
			 "container", "metrics");
}

static json_t *cmd_reply(struct agent *ag, json_t *req, const char **code, const char **why)
{
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	json_t *args = json_object_get(req, "args");
	if (!cmd)
		return *code = MV_E_BAD_REQUEST, *why = "cmd: expected a string", NULL;
	if (!strcmp(cmd, "hello"))
		return hello_json(ag);
	if (!strcmp(cmd, "containers")) {
		json_t *all = json_array();
		for (struct container *c = ag->containers; c; c = c->next)
			if (!atomic_load(&c->ended))
				json_array_append_new(all, container_json(c));
		return json_pack("{s:o}", "containers", all);
	}
	if (!strcmp(cmd, "metrics")) {
		_cleanup_free_ char *text = agent_metrics(ag, true);
		return json_pack("{s:s, s:s}", "content_type", METRICS_CONTENT_TYPE, "text", text);
	}
	if (!strcmp(cmd, "container")) {
		const char *id = json_string_value(json_object_get(args, "id"));
		if (!id)
			return *code = MV_E_BAD_REQUEST, *why = "args.id: expected a string", NULL;
		char *ids = NULL;
		struct container *c = find_container(ag, id, &ids);
		if (ids) {
			/* Refused rather than the newest picked: a name is not
			 * unique, and ctl must not steer the wrong one. */
			static __thread char msg[1024];
			snprintf(msg, sizeof(msg),
				 "the name %s is carried by several containers: %s (give an id)",
				 id, ids);
			free(ids);
			return *code = MV_E_BAD_REQUEST, *why = msg, NULL;
		}
		if (!c)
			return *code = MV_E_NO_SUCH_PROCESS, *why = "no such container", NULL;
		return container_json(c);
	}
	*code = MV_E_UNKNOWN_COMMAND;
	*why = "unknown command (the agent answers hello, containers, container, metrics; a "
	       "container's own socket answers the rest: ctl -c ID)";
	return NULL;
}

static char *reply_line(struct agent *ag, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	const char *code = MV_E_BAD_JSON, *why = "invalid JSON";
	json_t *id = json_is_object(req) ? json_object_get(req, "id") : NULL;
	json_t *res = json_is_object(req) ? cmd_reply(ag, req, &code, &why) : NULL;
	if (req && !json_is_object(req))
		code = MV_E_BAD_REQUEST, why = "a request must be a JSON object";
	json_t *msg = res ? json_pack("{s:O?, s:b, s:o}", "id", id, "ok", 1, "result", res)
			  : json_pack("{s:O?, s:b, s:{s:s, s:s}}", "id", id, "ok", 0, "error",
				      "code", code, "message", why);
	char *s = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	json_decref(req);
	return s;
}

static void client_free(struct client *c)
{
	ev_io_stop(c->ag->loop, &c->io);
	close(c->fd);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	c->ag->n_clients--;
	free(c);
}

static void on_client(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client *c = w->data;
	ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_free(c);
		return;
	}
	if (c->refused)
		return; /* discarded: closing with it unread would reset the reply */
	c->len += (size_t)n;
	char *nl;
	while ((nl = memchr(c->buf, '\n', c->len))) {
		char *reply = reply_line(c->ag, c->buf, (size_t)(nl - c->buf));
		/* Replies are small; a client that does not read them is cut. */
		bool ok = reply &&
			  send(c->fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT) ==
			      (ssize_t)strlen(reply) &&
			  send(c->fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
		free(reply);
		c->len -= (size_t)(nl + 1 - c->buf);
		memmove(c->buf, nl + 1, c->len);
		if (!ok) {
			client_free(c);
			return;
		}
	}
	if (c->len == sizeof(c->buf))
		client_free(c); /* a line of 64 KiB: no request is that long */
}

static void on_ctl(struct ev_loop *loop, ev_io *w, int revents)
{
	struct agent *ag = w->data;
	pid_t pid;
	int fd = accept_trusted(ag->ctl_fd, &pid);
	if (fd < 0)
		return;
	bool refuse = ag->n_clients >= CLIENTS_MAX || in_a_container(ag, pid);
	if (refuse && ag->n_clients >= 2 * CLIENTS_MAX) {
		close(fd);
		return;
	}
	struct client *c = xcalloc(1, sizeof(*c));
	if (refuse) {
		static const char no[] =
		    "{\"id\":null,\"ok\":false,\"error\":{\"code\":\"forbidden\",\"message\":"
		    "\"refused: a process inside a container, or too many clients\"}}\n";
		(void)!send(fd, no, sizeof(no) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		shutdown(fd, SHUT_WR);
		log_info("control client pid %d refused", pid);
		c->refused = true;
	}
	c->ag = ag;
	c->fd = fd;
	c->next = ag->clients;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &ag->clients;
	ag->clients = c;
	ag->n_clients++;
	ev_io_init(&c->io, on_client, fd, EV_READ);
	c->io.data = c;
	ev_io_start(loop, &c->io);
}

/* ---- life ----------------------------------------------------------------- */

/* Join and free the containers whose threads have ended; once stopping,
 * leave the loop when none is left. */
static void on_ended(struct ev_loop *loop, ev_async *w, int revents)
{
	struct agent *ag = w->data;
	for (struct container **pp = &ag->containers; *pp;) {
		struct container *c = *pp;
		if (!atomic_load(&c->ended)) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		log_info("container %s dropped", c->msg.id);
		container_free(c);
	}
	if (ag->stopping && !ag->containers)
		ev_break(loop, EVBREAK_ALL);
}

/* Stop: end every container (the keeper kills them once its master
 * socket closes), then leave when each thread has ended. */
static void stop(struct agent *ag)
{
	if (ag->stopping)
		return;
	ag->stopping = true;
	ev_io_stop(ag->loop, &ag->listen_io);
	ev_io_stop(ag->loop, &ag->keeper_io);
	close(ag->env.keeper);
	ag->env.keeper = -1;
	for (struct container *c = ag->containers; c; c = c->next)
		container_stop(c);
	on_ended(ag->loop, &ag->ended, 0);
}

/* ---- restart in place (SIGUSR2) ---------------------------------------- */

/* How long a restart waits for containers to ready themselves (jobs to
 * end, evicted memory to load back) before it is refused. */
#define RESTART_WAIT_NS (300ull * 1000000000ull)

/* The environment variable that tells an agent it was exec'd by the one
 * before it, and where that one's state is (a memfd's number). */
#define STATE_ENV "MEMVISOR_AGENT_STATE"

static void keep_across_exec(int fd, bool keep)
{
	if (fd >= 0)
		fcntl(fd, F_SETFD, keep ? 0 : FD_CLOEXEC);
}

/* The fds a handover keeps open across the exec, or closes on the next
 * exec once taken back. */
static void handover_fds(struct container_handover *h, bool keep)
{
	keep_across_exec(h->listener, keep);
	keep_across_exec(h->pidfd, keep);
	keep_across_exec(h->chan, keep);
	for (size_t i = 0; i < h->n_adopted; i++)
		keep_across_exec(h->adopted[i].fd, keep);
}

static json_t *handover_json(const struct container_handover *h)
{
	json_t *ad = json_array();
	for (size_t i = 0; i < h->n_adopted; i++)
		json_array_append_new(
		    ad, json_pack("[i, i]", h->adopted[i].fd, (int)h->adopted[i].pid));
	return json_pack("{s:s, s:s, s:i, s:s, s:s*, s:s*, s:s, s:s*, s:i, s:i, s:i, s:I, s:I, "
			 "s:o}",
			 "id", h->msg.id, "name", h->msg.name, "pid", (int)h->msg.pid, "status",
			 h->msg.status, "bundle", h->msg.bundle, "metadata", h->msg.metadata,
			 "policy", h->msg.policy, "policy_file", h->policy_path, "listener",
			 h->listener, "pidfd", h->pidfd, "chan", h->chan, "started_ns",
			 (json_int_t)h->started_wall_ns, "execs", (json_int_t)h->execs, "adopted",
			 ad);
}

/* One container of the state: into *h. 0, or -1 when a field is wrong. */
static int handover_from_json(json_t *j, struct container_handover *h)
{
	memset(h, 0, sizeof(*h));
	h->listener = h->pidfd = h->chan = -1;
	const char *id = NULL, *name = NULL, *status = NULL, *bundle = NULL, *md = NULL,
		   *pol = NULL, *pfile = NULL;
	int pid = 0;
	json_int_t started = 0, execs = 0;
	json_t *ad = NULL;
	if (json_unpack(j, "{s:s, s:s, s:i, s:s, s?s, s?s, s:s, s?s, s:i, s:i, s:i, s:I, s:I, s:o}",
			"id", &id, "name", &name, "pid", &pid, "status", &status, "bundle", &bundle,
			"metadata", &md, "policy", &pol, "policy_file", &pfile, "listener",
			&h->listener, "pidfd", &h->pidfd, "chan", &h->chan, "started_ns", &started,
			"execs", &execs, "adopted", &ad) < 0 ||
	    !ocistate_id_ok(id) || !json_is_array(ad))
		return -1;
	snprintf(h->msg.id, sizeof(h->msg.id), "%s", id);
	snprintf(h->msg.name, sizeof(h->msg.name), "%s", name);
	snprintf(h->msg.status, sizeof(h->msg.status), "%s", status);
	snprintf(h->msg.policy, sizeof(h->msg.policy), "%s", pol);
	h->msg.pid = h->msg.proc_pid = pid;
	h->msg.bundle = bundle ? xstrdup(bundle) : NULL;
	h->msg.metadata = md ? xstrdup(md) : NULL;
	h->policy_path = pfile ? xstrdup(pfile) : NULL;
	h->started_wall_ns = (uint64_t)started;
	h->execs = (uint64_t)execs;
	h->adopted = xcalloc(json_array_size(ad) + 1, sizeof(*h->adopted));
	size_t i;
	json_t *e;
	json_array_foreach(ad, i, e)
	{
		int fd = -1, root = 0;
		if (json_unpack(e, "[i, i]", &fd, &root) == 0)
			h->adopted[h->n_adopted++] = (struct container_exec){root, fd, true};
	}
	return 0;
}

/* Supervise the handed-over containers h[0..n) here (after a failed
 * restart, or in the new agent). */
static void resume_all(struct agent *ag, struct container_handover *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!h[i].msg.id[0])
			continue; /* unreadable: freed */
		handover_fds(&h[i], false);
		struct container *c;
		if (container_resume(&ag->env, &h[i], &c) == 0) {
			c->next = ag->containers;
			ag->containers = c;
		}
		container_handover_free(&h[i]);
	}
}

/* SIGUSR2: the agent executes its binary again (a new one, if the file
 * was replaced: an upgrade) in the same process, and the containers run
 * on. Each container hands over what keeps it supervised (its listeners,
 * its init's pidfd, its keeper channel): its notify threads stop and its
 * notified calls wait in the kernel until the new agent answers them.
 * Before that, jobs are waited for and evicted memory is loaded back (the
 * agent's loop waits, up to RESTART_WAIT_NS); a container holding a mark
 * refuses: then nothing is restarted, and the log says which and why. */
static void restart(struct agent *ag)
{
	if (!ag->o->exe || !ag->o->argv) {
		log_warn("restart refused: the agent's binary or command line was not readable "
			 "at start");
		ag->restarts_refused++;
		sdnotify("READY=1");
		return;
	}
	size_t n = 0, k = 0;
	for (struct container *c = ag->containers; c; c = c->next)
		n++;
	struct container_handover *h = xcalloc(n + 1, sizeof(*h));
	char why[256];
	bool refused = false;
	uint64_t deadline = mv_now_ns() + RESTART_WAIT_NS;
	/* First every container readies itself, running on meanwhile: jobs
	 * end, evicted memory is loaded back. Only then does any hand over,
	 * so that no container's calls wait while another drains. */
	for (bool ready = false; !ready && !refused;) {
		ready = true;
		for (struct container *c = ag->containers; c && !refused; c = c->next) {
			int rc = atomic_load(&c->ended)
				     ? -ESRCH
				     : container_handover(c, NULL, why, sizeof(why));
			if (rc == -EAGAIN) {
				log_info("restart: container %s: %s", c->msg.id, why);
				ready = false;
			}
			if (rc == -EBUSY || (rc == -EAGAIN && mv_now_ns() > deadline)) {
				log_warn(
				    "restart refused: container %s: %s%s; the agent runs on as "
				    "it was",
				    c->msg.id, why, rc == -EAGAIN ? " (waited too long)" : "");
				refused = true;
			}
		}
		if (!ready && !refused)
			usleep(50 * 1000);
	}
	for (struct container **pp = &ag->containers; *pp && !refused;) {
		struct container *c = *pp;
		int rc = atomic_load(&c->ended) ? -ESRCH
						: container_handover(c, &h[k], why, sizeof(why));
		if (rc == -EAGAIN && mv_now_ns() <= deadline) {
			usleep(10 * 1000); /* a job begun since: wait for it */
			continue;
		}
		if (rc == -EBUSY || rc == -EAGAIN) {
			log_warn("restart refused: container %s: %s; the agent runs on as it was",
				 c->msg.id, why);
			refused = true;
			break;
		}
		if (rc == 0)
			k++;
		*pp = c->next;
		container_free(c);
	}
	if (refused) {
		ag->restarts_refused++;
		resume_all(ag, h, k);
		free(h);
		sdnotify("READY=1");
		return;
	}
	json_t *cs = json_array();
	for (size_t i = 0; i < k; i++)
		json_array_append_new(cs, handover_json(&h[i]));
	json_t *state =
	    json_pack("{s:I, s:I, s:i, s:i, s:i, s:i, s:I, s:[I, I, I], s:o}", "restarts",
		      (json_int_t)ag->restarts + 1, "restarts_refused",
		      (json_int_t)ag->restarts_refused, "keeper_pid", (int)ag->keeper_pid, "keeper",
		      ag->env.keeper, "listen", ag->listen_fd, "ctl", ag->ctl_fd, "started",
		      (json_int_t)ag->started, "refused", (json_int_t)ag->refused[0],
		      (json_int_t)ag->refused[1], (json_int_t)ag->refused[2], "containers", cs);
	_cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
	json_decref(state);
	int mfd = (int)syscall(SYS_memfd_create, "memvisor-agent-state", 0);
	if (mfd < 0 || mv_write_all(mfd, text, strlen(text)) < 0 || lseek(mfd, 0, SEEK_SET) < 0) {
		log_error("restart: cannot keep the state (%s): the agent runs on as it was",
			  strerror(errno));
		if (mfd >= 0)
			close(mfd);
		ag->restarts_refused++;
		resume_all(ag, h, k);
		free(h);
		sdnotify("READY=1");
		return;
	}
	for (size_t i = 0; i < k; i++)
		handover_fds(&h[i], true);
	keep_across_exec(ag->env.keeper, true);
	keep_across_exec(ag->listen_fd, true);
	keep_across_exec(ag->ctl_fd, true);
	char num[16];
	snprintf(num, sizeof(num), "%d", mfd);
	setenv(STATE_ENV, num, 1);
	log_warn("restart: executing %s again, %zu container%s handed over", ag->o->exe, k,
		 k == 1 ? "" : "s");
	execv(ag->o->exe, ag->o->argv);
	int err = errno;
	unsetenv(STATE_ENV);
	close(mfd);
	keep_across_exec(ag->env.keeper, false);
	keep_across_exec(ag->listen_fd, false);
	keep_across_exec(ag->ctl_fd, false);
	log_error("restart: cannot execute %s (%s): the containers stay with this agent",
		  ag->o->exe, strerror(err));
	ag->restarts_refused++;
	resume_all(ag, h, k);
	free(h);
	sdnotify("READY=1");
}

/* The agent before this one handed over its state (restart): its keeper,
 * its sockets, its containers. 0 (nothing handed over: 1), or -1 after a
 * message when the state cannot be read (then the agent does not start:
 * the keeper ends the containers). */
static int take_state(struct agent *ag, json_t **containers)
{
	const char *v = getenv(STATE_ENV);
	if (!v)
		return 1;
	int fd = atoi(v);
	unsetenv(STATE_ENV);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = mv_read_fd_max(fd, 64u << 20, &text, &len);
	close(fd);
	json_error_t jerr;
	json_t *state = rc == 0 ? json_loadb(text, len, 0, &jerr) : NULL;
	int keeper_pid = 0;
	json_int_t started = 0, r0 = 0, r1 = 0, r2 = 0, restarts = 0, rrefused = 0;
	json_t *cs = NULL;
	if (!state ||
	    json_unpack(state, "{s:I, s:I, s:i, s:i, s:i, s:i, s:I, s:[I, I, I], s:o}", "restarts",
			&restarts, "restarts_refused", &rrefused, "keeper_pid", &keeper_pid,
			"keeper", &ag->env.keeper, "listen", &ag->listen_fd, "ctl", &ag->ctl_fd,
			"started", &started, "refused", &r0, &r1, &r2, "containers", &cs) < 0 ||
	    !json_is_array(cs)) {
		fprintf(stderr, "memvisor agent: the state of the agent before cannot be read\n");
		json_decref(state);
		return -1;
	}
	ag->keeper_pid = keeper_pid;
	ag->restarts = (uint64_t)restarts;
	ag->restarts_refused = (uint64_t)rrefused;
	ag->started = (uint64_t)started;
	ag->refused[0] = (uint64_t)r0, ag->refused[1] = (uint64_t)r1, ag->refused[2] = (uint64_t)r2;
	keep_across_exec(ag->env.keeper, false);
	keep_across_exec(ag->listen_fd, false);
	keep_across_exec(ag->ctl_fd, false);
	*containers = json_incref(cs);
	json_decref(state);
	return 0;
}

/* Does the policy file at path load? Read as `policy set` reads it (a
 * regular file only: a FIFO would hold the agent's loop). msg: the first
 * errors. */
static int check_policy_file(const char *path, char *msg, size_t len)
{
	struct policy *pol = NULL;
	struct pol_diag d = {0};
	_cleanup_free_ char *text = NULL;
	size_t n = 0;
	int rc = policy_read_file(path, true, &text, &n, &d);
	if (rc == 0)
		rc = policy_parse(text, n, path, &pol, &d);
	msg[0] = '\0';
	for (size_t i = 0, off = 0; i < d.n && off + 1 < len; i++) {
		int k = snprintf(msg + off, len - off, "%s%s", i ? "; " : "", d.msg[i]);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	pol_diag_free(&d);
	if (pol)
		policy_free(pol);
	return rc < 0 ? -1 : 0;
}

/* SIGHUP (systemctl reload): the --policy file again, for every running
 * container (each validates it and keeps its policy if it does not load)
 * and for the containers to come, which read it when they start. The
 * containers run on: SIGHUP was handled as SIGTERM, and a reload killed
 * every container on the node. */
static void reload_policy(struct agent *ag)
{
	if (!ag->o->policy_path && !ag->o->policy_dir) {
		log_warn(
		    "SIGHUP: no --policy or --policy-dir to read again; the containers run on");
		return;
	}
	char msg[512];
	bool def_ok = ag->o->policy_path;
	if (def_ok && check_policy_file(ag->o->policy_path, msg, sizeof(msg)) < 0) {
		log_warn("SIGHUP: policy %s does not load, every container that runs it keeps the "
			 "one it had, and a container started now would be refused: %s",
			 ag->o->policy_path, msg);
		def_ok = false;
	}
	/* A container that named its policy reads its own file (and keeps
	 * what it had if that does not load). */
	size_t n = 0;
	for (struct container *c = ag->containers; c; c = c->next)
		if (c->msg.policy[0] || def_ok)
			n += container_reload_policy(c);
	log_warn("SIGHUP: policies read again: sent to %zu running container%s (each says "
		 "whether it can enforce its policy with the filter it was started with); "
		 "containers started from now on read theirs when they start",
		 n, n == 1 ? "" : "s");
}

static void on_signal(struct ev_loop *loop, ev_io *w, int revents)
{
	struct agent *ag = w->data;
	struct signalfd_siginfo si;
	while (read(ag->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			int st;
			if (waitpid(ag->keeper_pid, &st, WNOHANG) == ag->keeper_pid)
				ag->keeper_pid = -1;
			continue;
		}
		if (si.ssi_signo == SIGHUP) {
			/* Type=notify-reload (systemd 253) waits for READY=1 after
			 * RELOADING=1 with the time. */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			char msg[96];
			snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
				 (unsigned long long)ts.tv_sec * 1000000ull +
				     (unsigned long long)ts.tv_nsec / 1000);
			sdnotify(msg);
			reload_policy(ag);
			sdnotify("READY=1");
			continue;
		}
		if (si.ssi_signo == SIGUSR2) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			char msg[96];
			snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
				 (unsigned long long)ts.tv_sec * 1000000ull +
				     (unsigned long long)ts.tv_nsec / 1000);
			sdnotify(msg);
			restart(ag); /* returns only when it did not restart */
			continue;
		}
		log_info("signal %d: stopping; every container is killed", si.ssi_signo);
		stop(ag);
	}
}

/* The keeper's end closed: it died. Without it the agent's own death
 * would leave containers unsupervised: end them all, and stop. */
static void on_keeper(struct ev_loop *loop, ev_io *w, int revents)
{
	struct agent *ag = w->data;
	log_error("the agent's keeper process died: killing every container and stopping");
	for (struct container *c = ag->containers; c; c = c->next)
		if (c->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	ag->status = 125;
	stop(ag);
}

static int sock_dir(struct agent *ag);

static int open_sockets(struct agent *ag)
{
	const struct agent_opts *o = ag->o;
	ag->listen_fd = listen_at(o->listen);
	if (ag->listen_fd < 0) {
		fprintf(stderr, "memvisor agent: cannot listen on %s: %s\n", o->listen,
			strerror(-ag->listen_fd));
		return ag->listen_fd;
	}
	ag->ctl_fd = listen_at(o->socket);
	if (ag->ctl_fd < 0) {
		fprintf(stderr, "memvisor agent: cannot listen on %s: %s\n", o->socket,
			strerror(-ag->ctl_fd));
		return ag->ctl_fd;
	}
	return sock_dir(ag);
}

/* The directory of the containers' sockets, SOCKET.d. */
static int sock_dir(struct agent *ag)
{
	const struct agent_opts *o = ag->o;
	char *dir;
	if (asprintf(&dir, "%s.d", o->socket) < 0)
		return -ENOMEM;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "memvisor agent: cannot make %s: %s\n", dir, strerror(errno));
		free(dir);
		return -errno;
	}
	ag->env.sock_dir = dir;
	return 0;
}

static void start_watchers(struct agent *ag)
{
	ev_io_init(&ag->listen_io, on_listen, ag->listen_fd, EV_READ);
	ev_io_init(&ag->ctl_io, on_ctl, ag->ctl_fd, EV_READ);
	ev_io_init(&ag->sig_io, on_signal, ag->sigfd, EV_READ);
	ev_io_init(&ag->keeper_io, on_keeper, ag->env.keeper, EV_READ);
	ev_async_init(&ag->ended, on_ended);
	ag->listen_io.data = ag->ctl_io.data = ag->sig_io.data = ag->keeper_io.data = ag;
	ag->ended.data = ag;
	ev_io_start(ag->loop, &ag->listen_io);
	ev_io_start(ag->loop, &ag->ctl_io);
	ev_io_start(ag->loop, &ag->sig_io);
	ev_io_start(ag->loop, &ag->keeper_io);
	ev_async_start(ag->loop, &ag->ended);
}

int agent_run(const struct agent_opts *o)
{
	struct agent a = {.o = o, .listen_fd = -1, .ctl_fd = -1, .sigfd = -1};
	struct agent *ag = &a;
	sdnotify_init();
	json_t *handed = NULL;
	int taken = take_state(ag, &handed);
	if (taken < 0)
		return 125;
	/* The keeper first: it must hold nothing of ours but its socket. */
	if (taken > 0)
		ag->keeper_pid = keeper_start(&ag->env.keeper);
	if (ag->keeper_pid < 0) {
		fprintf(stderr, "memvisor agent: cannot fork the keeper: %s\n",
			strerror(-ag->keeper_pid));
		return 125;
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	ag->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	features_probe(&ag->env.feat);
	ag->env.policy_path = o->policy_path;
	ag->env.policy_dir = o->policy_dir;
	/* Not the default loop: it watches SIGCHLD and reaps with
	 * waitpid(-1, WUNTRACED), which takes the ptrace stops of a
	 * checkpoint's tracees from the job threads (they belong to the whole
	 * thread group); and libev 4.33 unblocks SIGCHLD in the thread that
	 * starts a signal watcher under EVFLAG_NOSIGMASK, which every thread
	 * started later would inherit. */
	ag->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK);
	ptrace_quiet_stops();
	ag->env.agent_loop = ag->loop;
	ag->env.ended = &ag->ended;
	if (ag->sigfd < 0 || (taken > 0 ? open_sockets(ag) : sock_dir(ag)) < 0) {
		close(ag->env.keeper); /* the keeper exits (ending what it holds) */
		return 125;
	}
	start_watchers(ag);
	if (handed) {
		size_t n = json_array_size(handed), i;
		struct container_handover *h = xcalloc(n + 1, sizeof(*h));
		json_t *e;
		json_array_foreach(handed, i, e)
		{
			if (handover_from_json(e, &h[i]) < 0) {
				log_error("restart: container %zu of the state cannot be read: the "
					  "keeper ends it",
					  i);
				container_handover_free(&h[i]);
			}
		}
		resume_all(ag, h, n);
		free(h);
		json_decref(handed);
		log_warn("restarted: %zu container%s supervised again", n, n == 1 ? "" : "s");
	}
	if (o->metrics_file) {
		/* A file that cannot be written stops the agent before any
		 * container, as under run. */
		_cleanup_free_ char *text = agent_metrics(ag, true);
		int rc = metrics_write_file(o->metrics_file, text);
		if (rc < 0) {
			fprintf(stderr, "memvisor agent: cannot write --metrics-file %s: %s\n",
				o->metrics_file, strerror(-rc));
			return 125;
		}
		double every = o->metrics_interval_ms / 1000.0;
		ev_timer_init(&ag->metrics_timer, on_metrics_timer, every, every);
		ag->metrics_timer.data = ag;
		ev_timer_start(ag->loop, &ag->metrics_timer);
	}
	/* One line at any log level: an operator (and journald) sees where
	 * it listens and with which policy. */
	fprintf(stderr,
		"memvisor agent %s (pid %d): runtimes connect to %s; control socket %s; policy "
		"%s%s%s\n",
		MV_VERSION, (int)getpid(), o->listen, o->socket,
		o->policy_path ? o->policy_path : "none (every call allowed)",
		o->policy_dir ? "; named policies in " : "", o->policy_dir ? o->policy_dir : "");
	char ready[512];
	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=runtimes connect to %s; control socket %s",
		 o->listen, o->socket);
	sdnotify(ready);
	ev_run(ag->loop, 0);
	sdnotify("STOPPING=1");
	if (o->metrics_file) {
		ev_timer_stop(ag->loop, &ag->metrics_timer);
		metrics_file_write(ag, false);
	}
	while (ag->runtimes)
		runtime_free(ag->runtimes);
	while (ag->clients)
		client_free(ag->clients);
	ev_loop_destroy(ag->loop);
	unlink(o->listen);
	unlink(o->socket);
	rmdir(ag->env.sock_dir);
	free((char *)ag->env.sock_dir);
	return ag->status;
}
