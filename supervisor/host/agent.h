/* memvisor agent: the daemon OCI runtimes hand seccomp listeners to
 * (docs/agent.md). It listens at --listen for runtimes (root only,
 * SO_PEERCRED), runs one supervisor per container (container.h), answers
 * `containers` and `container` on its own control socket, and has a keeper
 * (keeper.h) end the containers if it dies. */
#ifndef MV_AGENT_H
#define MV_AGENT_H

#include "common/log.h"

struct agent_opts {
	const char *listen;	  /* where runtimes connect (listenerPath) */
	const char *socket;	  /* the agent's control socket */
	const char *policy_path;  /* the policy of a container that names none */
	const char *policy_dir;	  /* NAME.json: the policy of a container naming NAME */
	const char *metrics_file; /* --metrics-file: the node's exposition, rewritten */
	int metrics_interval_ms;
	const char *log_path;
	const char *exe; /* the binary, as it was named at start (a restart runs it again) */
	char **argv;	 /* the whole command line, for the same */
	enum mv_log_level log_level;
};

/* Run until SIGINT or SIGTERM. The exit status: 0, or 125 when the agent
 * could not start or lost its keeper (said on stderr / in the log). */
int agent_run(const struct agent_opts *o);

/* The default control socket: /run/memvisor/agent/agent.sock for root, else in
 * $XDG_RUNTIME_DIR/memvisor/. malloc'd. */
char *agent_default_socket(void);

#endif
