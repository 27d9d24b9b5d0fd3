/* The error contract (common/err.h). */
#include "common/err.h"

#include <stdio.h>

int mv_err_vset(struct mv_err *e, int rc, const char *code, const char *fmt, va_list ap)
{
	if (!e)
		return rc;
	/* fmt may read e->msg ("...: %s", e->msg): format into a copy. */
	char buf[sizeof(e->msg)];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	snprintf(e->msg, sizeof(e->msg), "%s", buf);
	e->code = code;
	return rc;
}

int mv_err_set(struct mv_err *e, int rc, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mv_err_vset(e, rc, code, fmt, ap);
	va_end(ap);
	return rc;
}
