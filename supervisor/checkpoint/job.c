/* What the checkpoint job's files share (supervisor/checkpoint/job.h):
 * the processes it holds, their image records, and its first failure. */
#include "supervisor/checkpoint/job.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/vm.h"

#include <fcntl.h>

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

/* Read [addr, addr + len) of p through /proc/TID/mem, opened on first
 * need while the thread is stopped (the file holds that mm: a read after
 * an exec fails instead of reading the new program).
 *
 * Not process_vm_readv: it pins the pages it reads (FOLL_PIN), and since
 * Linux 5.19 a read pin of an anonymous page shared copy-on-write with
 * another process (after a fork) unshares it, so every checkpoint gave
 * each process of a forked tree a private copy of all it shared (a
 * parent and 4 children over 64 MiB: 64 MiB of memory became 320). A
 * read of /proc/PID/mem takes a plain reference, copies out and shares
 * nothing less; it also reads PROT_NONE and write-only pages. About 20%
 * slower than process_vm_readv where nothing is shared (1.75 against 2.2
 * GB/s here), far above the disk's rate. */
int ckpt_read_mem(struct cproc *p, uint64_t addr, void *dst, size_t len)
{
	if (p->memfd < 0) {
		p->memfd = procfs_open(p->tid, "mem", O_RDONLY);
		if (p->memfd < 0)
			return p->memfd;
	}
	return vm_pread_mem(p->memfd, addr, dst, len);
}
