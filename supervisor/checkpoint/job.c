/* What the checkpoint job's files share (supervisor/checkpoint/job.h):
 * the processes it holds, their image records, and its first failure. */
#include "supervisor/checkpoint/job.h"
#include "common/log.h"
#include "common/util.h"

#include <stdarg.h>
#include <string.h>

/* Record the first failure; later ones are consequences. */
int ckpt_fail(struct ckpt *c, int rc, const char *code, const char *fmt, ...)
{
	if (!mv_err_isset(&c->err)) {
		va_list ap;
		va_start(ap, fmt);
		mv_err_vset(&c->err, rc, code, fmt, ap);
		va_end(ap);
	}
	return rc < 0 ? rc : -EIO;
}

struct cproc *ckpt_add_proc(struct ckpt *c, pid_t pid, int pidfd, bool requested)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16;
		c->p = xrealloc(c->p, c->cap * sizeof(*c->p));
	}
	struct cproc *p = &c->p[c->n++];
	memset(p, 0, sizeof(*p));
	ptrace_proc_init(&p->pt, pid, pidfd);
	p->requested = requested;
	p->memfd = -1;
	p->img = -1;
	return p;
}

int ckpt_proc_lost(struct ckpt *c, struct cproc *p)
{
	p->pt.gone = true;
	if (p->requested)
		return ckpt_fail(c, -ESRCH, MV_E_NO_SUCH_PROCESS,
				 "process %d exited during the checkpoint", p->pt.pid);
	log_info("checkpoint: process %d exited meanwhile; recorded as gone", p->pt.pid);
	return 0;
}

struct img_proc *ckpt_iproc(struct ckpt *c, size_t i)
{
	return &c->im.p[c->p[i].img];
}
