/* One container under `memvisor agent`: a struct mv of its own, run on a
 * thread of its own with its own libev loop (as `memvisor run`'s main
 * thread runs its one), from the listener a runtime handed over until
 * the container's init exits. */
#ifndef MV_CONTAINER_H
#define MV_CONTAINER_H

#include "state/ocistate.h"
#include "supervisor/kernel/features.h"

#include <ev.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

struct container_env {
	const char *policy_path; /* a container naming no policy */
	const char *policy_dir;	 /* NAME.json for one naming NAME */
	const char *sock_dir;	 /* the containers' control sockets: ID.sock */
	struct features feat;
	int keeper; /* the keeper's master socket */
	struct ev_loop *agent_loop;
	ev_async *ended; /* sent on agent_loop when a container's thread ends */
};

struct container_exec {
	pid_t pid;
	int fd;
	bool resumed; /* handed over from the agent before: adopted again */
};

/* What a container is made of when the agent hands it over to its next
 * self (agent.c: a restart in place): its state and the fds that keep it
 * supervised, none closed between. */
struct container_handover {
	struct oci_msg msg;
	char *policy_path; /* malloc'd, or NULL */
	int listener, pidfd, chan;
	uint64_t started_wall_ns, execs;
	struct container_exec *adopted; /* listeners of exec'd processes, malloc'd */
	size_t n_adopted;
};

struct container {
	struct oci_msg msg;
	char *socket;	   /* its control socket */
	char *policy_path; /* its policy file (env's or the one it named), or NULL */
	int listener, pidfd, chan;
	uint64_t started_wall_ns;
	pthread_t thread;
	ev_async stop;	/* on the container's loop: end it */
	ev_async hup;	/* on the container's loop: load the agent's policy again */
	ev_async adopt; /* on the container's loop: take the queued exec listeners */
	ev_timer sweep; /* releases adopted listeners no process uses */
	struct mv *mv;	/* its supervisor, while its thread runs */
	pthread_mutex_t adopt_mu;
	struct container_exec *queued; /* listeners of exec'd processes, under adopt_mu */
	size_t n_queued, cap_queued;
	bool adopt_closed; /* under adopt_mu: the thread takes no more */
	/* The agent's metrics: asked on the agent's thread, made on the
	 * container's (metrics_text reads the supervisor's own state). */
	ev_async metrics_ask;
	pthread_cond_t metrics_cond; /* with adopt_mu */
	bool metrics_asked;	     /* under adopt_mu */
	char *metrics_text;	     /* under adopt_mu: the answer, or NULL */
	uint64_t execs;		     /* exec'd processes adopted (container thread) */
	/* A handover (container_handover): asked on the agent's thread,
	 * done on the container's, all under adopt_mu. */
	ev_async handover_ask;
	bool handover_asked, handover_done, handing_over, handover_check_only;
	bool thread_over; /* its thread is past everything (under adopt_mu) */
	int handover_rc;
	char handover_why[256];
	struct container_handover *handover_out;
	struct ev_loop *loop;
	atomic_bool running; /* its loop runs: stop may be sent */
	atomic_bool ended;   /* its thread is done: join it */
	const struct container_env *env;
	struct container *next;
};

/* Start supervising the container msg describes, whose listener is fd
 * (taken over, like msg's strings). 0 with *out, or -errno after logging
 * why (fd closed). */
int container_start(const struct container_env *env, struct oci_msg *msg, int fd,
		    struct container **out);

/* A process `runc exec` started in the container came with a listener of
 * its own: hand it to the container's supervisor (fd taken over). 0, or
 * -errno after logging why (fd closed, the process killed: its notified
 * calls would fail with ENOSYS). */
int container_adopt(struct container *c, pid_t pid, int fd);

/* Its metrics exposition, made on its thread: ask (false when its loop
 * does not run), then take it, waiting until the CLOCK_MONOTONIC time
 * until; NULL when it did not answer by then or ended. malloc'd. Agent
 * thread: every container is asked before any is waited for. */
bool container_metrics_ask(struct container *c);
char *container_metrics_take(struct container *c, const struct timespec *until);

/* Hand the container over: on its thread, if it runs no job, holds no
 * mark and has no evicted memory owed, its notify threads stop (calls
 * wait in the kernel), its thread ends without a word to the keeper, and
 * *h gets everything that keeps it supervised: 0 (then join and free c).
 * h NULL only asks whether it could: 0 when it could now. -EAGAIN with
 * why when it could later (a job runs; or it has evicted memory, and a
 * reload of it is started), -EBUSY when it cannot (a mark), -ESRCH if it
 * ended; it runs on as before. Agent thread. */
int container_handover(struct container *c, struct container_handover *h, char *why, size_t len);

/* Supervise again a container handed over (by this agent or the one
 * before it): as container_start, with h's fds (taken over). 0 with *out,
 * or -errno after logging why (the container is killed). */
int container_resume(const struct container_env *env, struct container_handover *h,
		     struct container **out);

/* Close and free what h holds (a handover that is not resumed: the
 * keeper then ends the container). */
void container_handover_free(struct container_handover *h);

/* Ask its thread to end (the agent stops): the container is killed by
 * the keeper then. */
void container_stop(struct container *c);

/* Load the agent's --policy file again into its supervisor (SIGHUP);
 * false if its loop does not run. The outcome is logged. */
bool container_reload_policy(struct container *c);

/* Join its thread (after ended) and free it. */
void container_free(struct container *c);

/* Its row for `ctl containers`. */
json_t *container_json(const struct container *c);

#endif
