/* How a failure travels (docs/design.md, "Errors"; one contract for all
 * of memvisor):
 *
 *  1. A function that can fail returns 0 (or a count) on success and
 *     -errno on failure. For a process, ESRCH and ENOENT mean it is gone:
 *     an outcome its caller decides about, not an error to report.
 *  2. Where errno alone would not tell a person what went wrong, the
 *     function also takes a struct mv_err * and fills it where the most is
 *     known: what (the file, the process, the address) and why, in one
 *     sentence, without a "memvisor:" prefix. A caller that adds context
 *     writes a new message around the old one (mv_err_set with "%s").
 *  3. The code, when set, is one of the MV_E_* below: the words of
 *     docs/protocol.md that scripts match on. Left NULL, the caller picks
 *     it (often from the errno).
 *  4. Only the top renders it, once: a control reply {code, message}, a
 *     job's error, or "memvisor: MESSAGE" on stderr and an exit code
 *     (README, "Using it"). Code below the top does not log what it
 *     returns.
 *
 * Policy files have a richer diagnostic (FILE:LINE:COL: /pointer:
 * message, policy/policy.h) that ends up in an mv_err the same way. */
#ifndef MV_ERR_H
#define MV_ERR_H

#include <stdarg.h>
#include <stddef.h>

/* The error codes of the control protocol and of jobs (docs/protocol.md). */
#define MV_E_BAD_JSON	     "bad_json"
#define MV_E_BAD_REQUEST     "bad_request"
#define MV_E_UNKNOWN_COMMAND "unknown_command"
#define MV_E_NO_SUCH_PROCESS "no_such_process"
#define MV_E_BUSY	     "busy"
#define MV_E_INTERNAL	     "internal"
#define MV_E_TOO_LARGE	     "too_large"
#define MV_E_PERMISSION	     "permission_denied"
#define MV_E_NOT_SUPPORTED   "not_supported"
#define MV_E_INVALID	     "invalid"
#define MV_E_FORBIDDEN	     "forbidden"
#define MV_E_IO		     "io_error"
#define MV_E_TIMEOUT	     "timeout"
#define MV_E_EVICT_FAILED    "evict_failed"
#define MV_E_CORRUPT_IMAGE   "corrupt_image"
#define MV_E_IMAGE_MISMATCH  "image_mismatch"

struct mv_err {
	const char *code; /* an MV_E_* string, or NULL: the caller picks */
	char msg[512];
};

/* Fill e (when not NULL) and return rc, printf-style. */
int mv_err_set(struct mv_err *e, int rc, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int mv_err_vset(struct mv_err *e, int rc, const char *code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Has a message been set? */
static inline int mv_err_isset(const struct mv_err *e)
{
	return e->msg[0] != '\0';
}

#endif
