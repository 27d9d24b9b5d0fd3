#include "supervisor/host/container.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/ctl/policy.h"
#include "supervisor/ctl/metrics.h"
#include "supervisor/ctl/server.h"
#include "supervisor/host/host.h"
#include "supervisor/host/keeper.h"
#include "supervisor/kernel/listener.h"
#include "supervisor/reload/evict.h"
#include "supervisor/reload/reload.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/notify.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static void on_init_exit(struct ev_loop *loop, ev_io *w, int revents)
{
	struct container *c = w->data;
	log_info("container %s: init %d exited", c->msg.id, c->msg.pid);
	ev_break(loop, EVBREAK_ALL);
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

/* The agent's SIGHUP: the policy file again, validated before the swap;
 * a file that does not load leaves the policy the container had. */
static void on_hup(struct ev_loop *loop, ev_async *w, int revents)
{
	struct mv *mv = w->data;
	const char *path = mv->opts.policy_path;
	if (!path)
		return;
	struct mv_err err = {0};
	if (ctl_policy_load(mv, path, &err) < 0)
		log_warn("container %s: SIGHUP: policy %s not loaded, the container keeps "
			 "the one it had: %s",
			 mv->opts.name, path, err.msg);
	else
		log_warn("container %s: SIGHUP: policy %s loaded", mv->opts.name, path);
}

/* The options of a container's supervisor: the agent's policy, its own
 * socket, its name. */
static void fill_opts(struct container *c, struct mv_opts *o)
{
	o->policy_path = c->policy_path;
	o->socket_path = c->socket;
	o->name = c->msg.name[0] ? c->msg.name : c->msg.id;
	o->log_level = MV_LOG_WARN;
	o->metrics_interval_ms = 5000;
}

/* Did this supervisor ever evict memory? Then fault workers may still
 * hold it and its keeper channel (evict.h: the registry lives as long as
 * the process), and it is never freed. */
static bool evicted_ever(struct mv *mv)
{
	struct evict_totals t;
	evict_totals(mv->evict, &t);
	return t.spaces > 0 || t.evicted > 0;
}

/* The queued exec listeners, each with a notify thread of its own. */
static void on_adopt(struct ev_loop *loop, ev_async *w, int revents)
{
	struct container *c = w->data;
	pthread_mutex_lock(&c->adopt_mu);
	struct container_exec *v = c->queued;
	size_t n = c->n_queued;
	c->queued = NULL;
	c->n_queued = c->cap_queued = 0;
	pthread_mutex_unlock(&c->adopt_mu);
	for (size_t i = 0; i < n; i++) {
		int rc = notify_adopt(c->mv, v[i].pid, v[i].fd);
		if (rc == 0 && v[i].resumed) {
			log_info("container %s: process %d (exec) supervised again", c->msg.id,
				 v[i].pid);
			continue;
		}
		if (rc < 0) {
			if (v[i].pid > 0)
				kill(v[i].pid, SIGKILL);
			log_error("container %s: process %d (exec) cannot be supervised (%s)%s",
				  c->msg.id, v[i].pid, strerror(-rc),
				  v[i].pid > 0 ? ": killed" : "");
			continue;
		}
		log_info("container %s: process %d (exec) supervised", c->msg.id, v[i].pid);
		c->execs++;
	}
	free(v);
	/* RLIMIT_AS for the newcomers, as for the rest of the tree. */
	if (n)
		enforce_attach(c->mv);
	if (n && !ev_is_active(&c->sweep))
		ev_timer_again(loop, &c->sweep);
}

/* The agent asks for this container's exposition. */
static void on_metrics(struct ev_loop *loop, ev_async *w, int revents)
{
	struct container *c = w->data;
	pthread_mutex_lock(&c->adopt_mu);
	bool asked = c->metrics_asked;
	pthread_mutex_unlock(&c->adopt_mu);
	if (!asked)
		return;
	char *text = metrics_text(c->mv);
	char line[160];
	snprintf(line, sizeof(line),
		 "# HELP memvisor_execs_total Processes exec'd into the container (runc exec), "
		 "adopted.\n# TYPE memvisor_execs_total counter\nmemvisor_execs_total %llu\n",
		 (unsigned long long)c->execs);
	size_t a = strlen(text), b = strlen(line);
	text = xrealloc(text, a + b + 1);
	memcpy(text + a, line, b + 1);
	pthread_mutex_lock(&c->adopt_mu);
	free(c->metrics_text);
	c->metrics_text = text;
	c->metrics_asked = false;
	pthread_cond_broadcast(&c->metrics_cond);
	pthread_mutex_unlock(&c->adopt_mu);
}

bool container_metrics_ask(struct container *c)
{
	if (!atomic_load(&c->running))
		return false;
	pthread_mutex_lock(&c->adopt_mu);
	free(c->metrics_text);
	c->metrics_text = NULL;
	c->metrics_asked = true;
	pthread_mutex_unlock(&c->adopt_mu);
	ev_async_send(c->loop, &c->metrics_ask);
	return true;
}

char *container_metrics_take(struct container *c, const struct timespec *until)
{
	pthread_mutex_lock(&c->adopt_mu);
	while (c->metrics_asked && !c->adopt_closed &&
	       pthread_cond_timedwait(&c->metrics_cond, &c->adopt_mu, until) == 0)
		;
	char *text = c->metrics_text;
	c->metrics_text = NULL;
	c->metrics_asked = false;
	pthread_mutex_unlock(&c->adopt_mu);
	return text;
}

/* The agent asks to hand the container over (container_handover). */
static void on_handover(struct ev_loop *loop, ev_async *w, int revents)
{
	struct container *c = w->data;
	struct mv *mv = c->mv;
	pthread_mutex_lock(&c->adopt_mu);
	bool asked = c->handover_asked;
	pthread_mutex_unlock(&c->adopt_mu);
	if (!asked)
		return;
	/* On this thread no job can start meanwhile: ctl runs here. A mark
	 * refuses; a job is waited for; evicted memory is loaded back
	 * first (the next agent would have no one serving its faults). */
	char why[sizeof(c->handover_why)] = "";
	int rc = 0;
	bool busy = false;
	pthread_mutex_lock(&mv->lock);
	for (int k = 0; k < JOB_KINDS && !busy; k++)
		busy = jobs_running_locked(mv, (enum job_kind)k);
	bool marked = mv->mark != NULL;
	pthread_mutex_unlock(&mv->lock);
	struct evict_totals t;
	evict_totals(mv->evict, &t);
	char id[40], dir[4096];
	if (marked) {
		rc = -EBUSY;
		snprintf(why, sizeof(why), "it holds a mark (ctl unmark first)");
	} else if (busy) {
		rc = -EAGAIN;
		snprintf(why, sizeof(why), "a job is running");
	} else if (t.spaces > 0 && evict_some_image(mv->evict, id, sizeof(id), dir, sizeof(dir))) {
		struct job *j;
		struct mv_err err = {0};
		rc = -EAGAIN;
		if (reload_start(mv, dir, 0, &j, id, sizeof(id), &err) == 0) {
			snprintf(why, sizeof(why),
				 "loading its evicted memory back from %.150s (job %d)", dir,
				 j->id);
		} else {
			rc = -EBUSY;
			snprintf(why, sizeof(why),
				 "its evicted memory cannot be loaded back: %.150s", err.msg);
		}
	}
	pthread_mutex_lock(&c->adopt_mu);
	c->handover_asked = false;
	if (rc < 0 || c->handover_check_only) {
		snprintf(c->handover_why, sizeof(c->handover_why), "%s", why);
		c->handover_rc = rc;
		c->handover_done = true;
		pthread_cond_broadcast(&c->metrics_cond);
	} else {
		c->handing_over = true;
		ev_break(loop, EVBREAK_ALL);
	}
	pthread_mutex_unlock(&c->adopt_mu);
}

static void on_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct container *c = w->data;
	if (notify_adopted_sweep(c->mv) == 0)
		ev_timer_stop(loop, w);
}

/* No more exec listeners: close what is queued and kill their processes. */
static void adopt_close(struct container *c)
{
	pthread_mutex_lock(&c->adopt_mu);
	c->adopt_closed = true;
	pthread_cond_broadcast(&c->metrics_cond);
	for (size_t i = 0; i < c->n_queued; i++) {
		/* 0: crun named none (never kill(0): that is our own group). */
		if (c->queued[i].pid > 0)
			kill(c->queued[i].pid, SIGKILL);
		close(c->queued[i].fd);
	}
	free(c->queued);
	c->queued = NULL;
	c->n_queued = c->cap_queued = 0;
	pthread_mutex_unlock(&c->adopt_mu);
}

/* Handing over: the adopted listeners (and those still queued) go with
 * the container, their threads stopped, none closed. */
static void hand_over_adopted(struct container *c, struct mv *mv)
{
	struct container_handover *h = c->handover_out;
	int *fds = NULL;
	pid_t *roots = NULL;
	size_t n = notify_detach_adopted(mv, &fds, &roots);
	pthread_mutex_lock(&c->adopt_mu);
	h->adopted = xcalloc(n + c->n_queued + 1, sizeof(*h->adopted));
	for (size_t i = 0; i < n; i++)
		h->adopted[h->n_adopted++] = (struct container_exec){roots[i], fds[i], false};
	for (size_t i = 0; i < c->n_queued; i++)
		h->adopted[h->n_adopted++] = c->queued[i];
	c->n_queued = 0;
	pthread_mutex_unlock(&c->adopt_mu);
	free(fds);
	free(roots);
}

static void run_container(struct container *c, struct mv *mv)
{
	ev_io init_io;
	ev_io_init(&init_io, on_init_exit, c->pidfd, EV_READ);
	init_io.data = c;
	ev_io_start(c->loop, &init_io);
	ev_async_init(&c->stop, on_stop);
	ev_async_start(c->loop, &c->stop);
	ev_async_init(&c->hup, on_hup);
	c->hup.data = mv;
	ev_async_start(c->loop, &c->hup);
	c->mv = mv;
	ev_async_init(&c->adopt, on_adopt);
	c->adopt.data = c;
	ev_async_start(c->loop, &c->adopt);
	ev_async_init(&c->metrics_ask, on_metrics);
	c->metrics_ask.data = c;
	ev_async_start(c->loop, &c->metrics_ask);
	ev_async_init(&c->handover_ask, on_handover);
	c->handover_ask.data = c;
	ev_async_start(c->loop, &c->handover_ask);
	ev_init(&c->sweep, on_sweep);
	c->sweep.repeat = 1.0;
	c->sweep.data = c;
	host_mv_watch(mv);
	atomic_store(&c->running, true);
	/* Listeners queued before the loop ran. */
	ev_async_send(c->loop, &c->adopt);
	ev_run(c->loop, 0);
	atomic_store(&c->running, false);
	if (c->handing_over)
		hand_over_adopted(c, mv);
	adopt_close(c);
	ev_io_stop(c->loop, &init_io);
	ev_async_stop(c->loop, &c->stop);
	ev_async_stop(c->loop, &c->hup);
	ev_async_stop(c->loop, &c->adopt);
	ev_async_stop(c->loop, &c->metrics_ask);
	ev_async_stop(c->loop, &c->handover_ask);
	ev_timer_stop(c->loop, &c->sweep);
	host_mv_finish(mv);
}

static void *container_thread(void *arg)
{
	struct container *c = arg;
	struct mv *mv = xcalloc(1, sizeof(*mv));
	mv->listener = mv->sigfd = mv->reaper_rd = mv->launch_sock = -1;
	mv->exits_epfd = -1;
	fill_opts(c, &mv->opts);
	mv->feat = c->env->feat;
	/* The runtime loaded the filter: whether with WAIT_KILLABLE_RECV is
	 * not said (the notify thread then expects withdrawn calls). */
	mv->feat.wait_killable_recv = false;
	mv->tree_top = mv->cmd_pid = c->msg.pid;
	mv->reaper_wr = c->chan;
	if (fault_hit("container_start_stall"))
		sleep(2);
	int rc = host_mv_init(mv, c->loop);
	if (rc == 0)
		rc = host_mv_listen(mv, mv_steal_fd(c->listener));
	if (rc < 0) {
		/* Its notified calls would fail with ENOSYS from now on: it
		 * must not run on unsupervised. */
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		log_error("container %s: cannot supervise it (%s): killed", c->msg.id,
			  strerror(-rc));
		adopt_close(c);
	} else {
		enforce_attach(mv);
		if (ctl_server_start(mv) < 0)
			log_warn("container %s: no control socket", c->msg.id);
		log_info("container %s: init %d supervised, socket %s", c->msg.id, c->msg.pid,
			 c->socket);
		run_container(c, mv);
	}
	if (c->handing_over) {
		/* Nothing closed that keeps it supervised: its listener, its
		 * init's pidfd, its keeper channel go to the next agent. */
		struct container_handover *h = c->handover_out;
		h->listener = mv->listener;
		mv->listener = -1;
		h->chan = c->chan;
		h->pidfd = c->pidfd;
		c->pidfd = -1;
		h->msg = c->msg;
		memset(&c->msg, 0, sizeof(c->msg));
		snprintf(c->msg.id, sizeof(c->msg.id), "%s", h->msg.id);
		h->policy_path = c->policy_path;
		c->policy_path = NULL;
		h->started_wall_ns = c->started_wall_ns;
		h->execs = c->execs;
		if (mv->evict && evicted_ever(mv))
			ctl_server_stop(mv); /* fault workers may hold it: kept */
		else
			host_mv_free(mv);
		log_info("container %s: handed over", h->msg.id);
	} else if (mv->evict && evicted_ever(mv)) {
		ctl_server_stop(mv);
		close(mv->listener);
		mv->listener = -1;
		log_info("container %s: ended; its evicted memory's records are kept", c->msg.id);
	} else {
		keeper_drop(c->chan);
		host_mv_free(mv);
	}
	c->chan = -1;
	pthread_mutex_lock(&c->adopt_mu);
	c->thread_over = true;
	pthread_cond_broadcast(&c->metrics_cond);
	pthread_mutex_unlock(&c->adopt_mu);
	atomic_store(&c->ended, true);
	ev_async_send(c->env->agent_loop, c->env->ended);
	return NULL;
}

/* Its policy file: the one it names (memvisor.policy=NAME) in the
 * agent's --policy-dir, or the agent's --policy. A name with no file
 * behind it is refused: the container asked for that policy, and its
 * filter was made for it. */
static int pick_policy(struct container *c, const char **why)
{
	static __thread char msg[512];
	const char *name = c->msg.policy;
	if (!name[0]) {
		c->policy_path = c->env->policy_path ? xstrdup(c->env->policy_path) : NULL;
		return 0;
	}
	if (!c->env->policy_dir) {
		snprintf(msg, sizeof(msg),
			 "it asks for policy %s, and the agent has no --policy-dir", name);
		*why = msg;
		return -ENOENT;
	}
	if (asprintf(&c->policy_path, "%s/%s.json", c->env->policy_dir, name) < 0) {
		c->policy_path = NULL;
		return -ENOMEM;
	}
	struct stat st;
	const char *bad = stat(c->policy_path, &st) < 0 ? strerror(errno)
			  : !S_ISREG(st.st_mode)	? "not a regular file"
							: NULL;
	if (bad) {
		snprintf(msg, sizeof(msg), "it asks for policy %s: %s: %s", name, c->policy_path,
			 bad);
		*why = msg;
		return -ENOENT;
	}
	return 0;
}

/* A container for msg (taken over) with listener fd, not started. */
static struct container *container_alloc(const struct container_env *env, struct oci_msg *msg,
					 int fd)
{
	struct container *c = xcalloc(1, sizeof(*c));
	c->msg = *msg;
	memset(msg, 0, sizeof(*msg));
	c->env = env;
	c->listener = fd;
	c->chan = c->pidfd = -1;
	pthread_mutex_init(&c->adopt_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->metrics_cond, &ca);
	pthread_condattr_destroy(&ca);
	c->started_wall_ns = mv_wall_ns();
	if (asprintf(&c->socket, "%s/%s.sock", env->sock_dir, c->msg.id) < 0)
		c->socket = NULL;
	return c;
}

int container_resume(const struct container_env *env, struct container_handover *h,
		     struct container **out)
{
	struct container *c = container_alloc(env, &h->msg, h->listener);
	c->pidfd = h->pidfd;
	c->chan = h->chan;
	h->listener = h->pidfd = h->chan = -1;
	c->policy_path = h->policy_path;
	h->policy_path = NULL;
	c->started_wall_ns = h->started_wall_ns;
	c->execs = h->execs;
	/* Its exec'd processes' listeners: adopted again when its loop runs. */
	c->queued = h->adopted;
	c->n_queued = c->cap_queued = h->n_adopted;
	for (size_t i = 0; i < c->n_queued; i++)
		c->queued[i].resumed = true;
	h->adopted = NULL;
	h->n_adopted = 0;
	int rc = 0;
	if (!(c->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK)))
		rc = -ENOMEM;
	if (rc == 0 && (rc = -pthread_create(&c->thread, NULL, container_thread, c)) == 0) {
		*out = c;
		return 0;
	}
	/* Its listener is closed with it: it must not run on unsupervised.
	 * Its keeper channel closes without a word: the keeper ends it too. */
	if (c->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	log_error("container %s: cannot supervise it again (%s): killed", c->msg.id, strerror(-rc));
	if (c->chan >= 0)
		close(c->chan);
	if (c->loop)
		ev_loop_destroy(c->loop);
	c->loop = NULL;
	c->thread = 0;
	container_free(c);
	return rc;
}

void container_handover_free(struct container_handover *h)
{
	ocistate_free(&h->msg);
	free(h->policy_path);
	for (size_t i = 0; i < h->n_adopted; i++)
		close(h->adopted[i].fd);
	free(h->adopted);
	if (h->listener >= 0)
		close(h->listener);
	if (h->pidfd >= 0)
		close(h->pidfd);
	if (h->chan >= 0)
		close(h->chan);
	memset(h, 0, sizeof(*h));
	h->listener = h->pidfd = h->chan = -1;
}

int container_start(const struct container_env *env, struct oci_msg *msg, int fd,
		    struct container **out)
{
	struct container *c = container_alloc(env, msg, fd);
	const char *why = NULL;
	int rc = pick_policy(c, &why);
	if (rc == 0 && (c->pidfd = (int)syscall(SYS_pidfd_open, c->msg.pid, 0)) < 0)
		rc = -errno;
	if (rc == 0 && !listener_is_one(fd))
		rc = -ENOTTY;
	if (rc == 0)
		rc = keeper_add(env->keeper, c->msg.pid, c->pidfd, &c->chan);
	if (rc == 0 && !(c->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK)))
		rc = -ENOMEM;
	if (rc == 0 && (rc = -pthread_create(&c->thread, NULL, container_thread, c)) == 0) {
		*out = c;
		return 0;
	}
	log_error("container %s: refused: %s", c->msg.id,
		  why		  ? why
		  : rc == -ENOTTY ? "the fd sent is not a seccomp listener"
				  : strerror(-rc));
	if (c->chan >= 0)
		keeper_drop(c->chan);
	if (c->loop)
		ev_loop_destroy(c->loop);
	c->loop = NULL;
	c->thread = 0;
	container_free(c);
	return rc;
}

bool container_reload_policy(struct container *c)
{
	if (!atomic_load(&c->running))
		return false;
	ev_async_send(c->loop, &c->hup);
	return true;
}

int container_handover(struct container *c, struct container_handover *h, char *why, size_t len)
{
	if (h) {
		memset(h, 0, sizeof(*h));
		h->listener = h->pidfd = h->chan = -1;
	}
	if (!atomic_load(&c->running)) {
		/* Not running yet (its thread is starting: a container just
		 * taken over, or one the agent before this one handed over) is
		 * waited for; only one whose thread ended is gone. Taken for
		 * gone, a starting container was freed: its thread joined while
		 * it ran, and the agent hung. */
		pthread_mutex_lock(&c->adopt_mu);
		bool over = c->thread_over;
		pthread_mutex_unlock(&c->adopt_mu);
		snprintf(why, len, "%s", over ? "it is not running" : "it is starting");
		return over ? -ESRCH : -EAGAIN;
	}
	pthread_mutex_lock(&c->adopt_mu);
	c->handover_out = h;
	c->handover_check_only = !h;
	c->handover_done = false;
	c->handover_asked = true;
	pthread_mutex_unlock(&c->adopt_mu);
	ev_async_send(c->loop, &c->handover_ask);
	pthread_mutex_lock(&c->adopt_mu);
	/* Its thread refuses, or ends: handed over, or its init exited. */
	while (!c->handover_done && !c->thread_over)
		pthread_cond_wait(&c->metrics_cond, &c->adopt_mu);
	int rc = c->handover_done ? c->handover_rc : c->handing_over ? 0 : -ESRCH;
	if (rc < 0)
		snprintf(why, len, "%s", rc == -ESRCH ? "it ended" : c->handover_why);
	c->handover_asked = false;
	c->handover_out = NULL;
	pthread_mutex_unlock(&c->adopt_mu);
	return rc;
}

/* Is pid in the PID namespace of the container's init? */
static bool same_pid_ns(pid_t pid, pid_t init)
{
	char a[64], b[64];
	struct stat sa, sb;
	snprintf(a, sizeof(a), "/proc/%d/ns/pid", (int)pid);
	snprintf(b, sizeof(b), "/proc/%d/ns/pid", (int)init);
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

int container_adopt(struct container *c, pid_t pid, int fd)
{
	const char *why = NULL;
	if (!listener_is_one(fd))
		why = "the fd sent is not a seccomp listener";
	else if (pid > 0 && !same_pid_ns(pid, c->msg.pid))
		why = "the process is not in the container's PID namespace";
	if (!why) {
		pthread_mutex_lock(&c->adopt_mu);
		if (c->adopt_closed || atomic_load(&c->ended)) {
			why = "the container is ending";
		} else {
			if (c->n_queued == c->cap_queued)
				c->queued = xrealloc(
				    c->queued,
				    (c->cap_queued = c->cap_queued ? c->cap_queued * 2 : 4) *
					sizeof(*c->queued));
			c->queued[c->n_queued++] = (struct container_exec){pid, fd, false};
		}
		pthread_mutex_unlock(&c->adopt_mu);
	}
	if (why) {
		log_warn("container %s: process %d (exec) refused: %s", c->msg.id, pid, why);
		close(fd);
		return -EINVAL;
	}
	/* Before its loop runs, its own first send takes the queue. */
	if (atomic_load(&c->running))
		ev_async_send(c->loop, &c->adopt);
	return 0;
}

void container_stop(struct container *c)
{
	if (atomic_load(&c->running))
		ev_async_send(c->loop, &c->stop);
}

void container_free(struct container *c)
{
	if (c->thread)
		pthread_join(c->thread, NULL);
	if (c->loop)
		ev_loop_destroy(c->loop);
	if (c->listener >= 0)
		close(c->listener);
	if (c->pidfd >= 0)
		close(c->pidfd);
	ocistate_free(&c->msg);
	free(c->socket);
	free(c->policy_path);
	for (size_t i = 0; i < c->n_queued; i++)
		close(c->queued[i].fd);
	free(c->queued);
	free(c->metrics_text);
	pthread_cond_destroy(&c->metrics_cond);
	pthread_mutex_destroy(&c->adopt_mu);
	free(c);
}

json_t *container_json(const struct container *c)
{
	return json_pack("{s:s, s:s?, s:i, s:s, s:s?, s:s?, s:s?, s:s?, s:I, s:b}", "id", c->msg.id,
			 "name", c->msg.name[0] ? c->msg.name : NULL, "pid", (int)c->msg.pid,
			 "socket", c->socket, "bundle", c->msg.bundle, "metadata", c->msg.metadata,
			 "policy", c->msg.policy[0] ? c->msg.policy : NULL, "policy_file",
			 c->policy_path, "started_ns", (json_int_t)c->started_wall_ns, "running",
			 !atomic_load(&c->ended));
}
