/* memvisor ctl: the connection to a supervisor's control socket. Who may
 * be trusted with a request, one request and its reply, the lines that
 * follow (events). docs/protocol.md has what is said on it. */
#ifndef MV_CLI_CTL_CONN_H
#define MV_CLI_CTL_CONN_H

#include "supervisor/cli/options.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The exit statuses of memvisor ctl, which every part of the client
 * returns: the supervisor answered with an error, the words were wrong,
 * no supervisor could be reached. */
enum ctl_exit { CTL_EXIT_OK = 0, CTL_EXIT_REPLY = 1, CTL_EXIT_USAGE = 2, CTL_EXIT_CONNECT = 3 };

struct ctl_conn {
	int fd;
	char *buf; /* received bytes not yet returned as lines */
	size_t len, cap;
	int timeout_ms;
	bool gone;	  /* memvisor closed the connection (EOF, reset, EPIPE) */
	bool quiet_eof;	  /* the caller says what that means (ctl_follow_job) */
	bool json_errors; /* an error reply goes to stderr as its JSON object */
	/* The arguments of the command asked (options.h rows), or none: an
	 * error about "args.KEY" is shown in their words (--opt or the
	 * operand alone). */
	const struct cli_arg *args;
	size_t n_args;
};

/* Connect to path after checking that the socket, its directory and what
 * listens on it belong to this user or root. The fd, or -errno: -EPERM
 * with why filled when something is not trusted. */
int ctl_conn_connect(const char *path, char *why, size_t n);

/* Open c on path; a reply that takes longer than timeout_ms is given up.
 * CTL_EXIT_OK, or CTL_EXIT_CONNECT after a message. */
int ctl_conn_open(const char *path, int timeout_ms, struct ctl_conn *c);

void ctl_conn_close(struct ctl_conn *c);

/* Read one line (a reply or an event); NULL at EOF (c->gone set), after
 * timeout_ms without a byte unless wait_forever, or when the line is not
 * JSON (all three said on stderr but EOF). */
json_t *ctl_conn_read(struct ctl_conn *c, bool wait_forever);

/* Send a request (args may be NULL; its reference is taken) and wait for
 * its reply, skipping events. CTL_EXIT_OK with a new reference in *result;
 * CTL_EXIT_REPLY after printing the error reply on stderr ("memvisor ctl:
 * MESSAGE", or {"code","message"} with json_errors); CTL_EXIT_CONNECT when
 * memvisor is gone or silent. */
int ctl_conn_call(struct ctl_conn *c, const char *cmd, json_t *args, json_t **result);

#endif
