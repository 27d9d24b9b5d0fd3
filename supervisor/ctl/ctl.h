/* Control commands: the {name, handler} table behind the control socket
 * (docs/protocol.md). Handlers run on the main thread, take mv->lock
 * themselves for what they read, and must not block for long: anything
 * long is a job (supervisor/supervise/jobs.h).
 *
 * A handler returns 0 with *result set (a new reference), or -1 with err
 * filled in; the server turns either into the reply line. */
#ifndef MV_CTL_H
#define MV_CTL_H

#include "supervisor/supervise/mv.h"

#include <jansson.h>

struct ctl_client;

/* Error codes (the "code" slug of an error reply). */
#define CTL_E_BAD_JSON	      "bad_json"
#define CTL_E_BAD_REQUEST     "bad_request"
#define CTL_E_UNKNOWN_COMMAND "unknown_command"
#define CTL_E_NO_SUCH_PROCESS "no_such_process"
#define CTL_E_BUSY	      "busy"
#define CTL_E_INTERNAL	      "internal"
#define CTL_E_TOO_LARGE	      "too_large"
#define CTL_E_PERMISSION      "permission_denied"
#define CTL_E_NOT_SUPPORTED   "not_supported"
#define CTL_E_INVALID	      "invalid"
#define CTL_E_FORBIDDEN	      "forbidden"

struct ctl_err {
	const char *code;
	char message[512];
};

typedef int (*ctl_handler)(struct mv *mv, struct ctl_client *c, json_t *args, json_t **result,
			   struct ctl_err *err);

struct ctl_cmd {
	const char *name;
	ctl_handler fn;
	const char *summary;
};

/* Look a command up in the table; NULL if unknown. */
const struct ctl_cmd *ctl_cmd_find(const char *name);

/* Iterate the table (for hello and help). */
const struct ctl_cmd *ctl_cmd_table(size_t *n);

/* Set err and return -1, printf-style. */
int ctl_fail(struct ctl_err *err, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Argument helpers: 0, or -1 with a bad_request naming "args.KEY". When
 * the key is absent, *_opt variants leave *out alone and return 0. */
int ctl_arg_int(json_t *args, const char *key, long long *out, struct ctl_err *err);
int ctl_arg_int_opt(json_t *args, const char *key, long long *out, struct ctl_err *err);
int ctl_arg_string(json_t *args, const char *key, const char **out, struct ctl_err *err);
int ctl_arg_string_opt(json_t *args, const char *key, const char **out, struct ctl_err *err);
int ctl_arg_bool_opt(json_t *args, const char *key, bool *out, struct ctl_err *err);
/* A supervised, running pid: no_such_process when it is not one. */
int ctl_arg_pid(struct mv *mv, json_t *args, const char *key, pid_t *out, struct ctl_err *err);

#endif
