/* Control commands: the {name, handler} table behind the control socket
 * (docs/protocol.md). Handlers run on the main thread, take mv->lock
 * themselves for what they read, and must not block for long: anything
 * long is a job (supervisor/supervise/jobs.h).
 *
 * A handler returns 0 with *result set (a new reference), or -1 with err
 * filled in; the server turns either into the reply line. */
#ifndef MV_CTL_H
#define MV_CTL_H

#include "common/err.h"
#include "supervisor/supervise/mv.h"

#include <jansson.h>

/* What a handler may ask of the connection besides its result. */
struct ctl_call {
	/* The result as JSON text instead of *result (for large results,
	 * written without building a jansson tree); the server frees it. */
	char *raw_result;
	/* Make the client an event subscriber (the events command). */
	bool subscribe;
	/* Answer when job wait_job has ended, or after wait_ms: the reply
	 * is then the job (as the job command gives it), not *result. */
	int wait_job;
	unsigned wait_ms;
};

/* args.wait_ms (optional, 0 to 86400000, 0 when absent): how long the
 * request may wait for its job's end (docs/protocol.md, "job"). */
int ctl_arg_wait(json_t *args, unsigned *ms, struct mv_err *err);

typedef int (*ctl_handler)(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
			   struct mv_err *err);

struct ctl_cmd {
	const char *name;
	ctl_handler fn;
	const char *summary;
};

/* Look a command up in the table; NULL if unknown. */
const struct ctl_cmd *ctl_cmd_find(const char *name);

/* Iterate the table (for hello and help). */
const struct ctl_cmd *ctl_cmd_table(size_t *n);

/* A handler fails by filling err (common/err.h: a code of the protocol
 * and a message) and returning -1: ctl_fail does both, printf-style. */
#define ctl_fail(err, code, ...) mv_err_set((err), -1, (code), __VA_ARGS__)

/* Argument helpers: 0, or -1 with a bad_request naming "args.KEY". When
 * the key is absent, *_opt variants leave *out alone and return 0. */
int ctl_arg_int(json_t *args, const char *key, long long *out, struct mv_err *err);
int ctl_arg_int_opt(json_t *args, const char *key, long long *out, struct mv_err *err);
int ctl_arg_string(json_t *args, const char *key, const char **out, struct mv_err *err);
int ctl_arg_string_opt(json_t *args, const char *key, const char **out, struct mv_err *err);
int ctl_arg_bool_opt(json_t *args, const char *key, bool *out, struct mv_err *err);
/* A supervised, running pid: no_such_process when it is not one. */
int ctl_arg_pid(struct mv *mv, json_t *args, const char *key, pid_t *out, struct mv_err *err);

#endif
