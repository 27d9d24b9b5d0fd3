/* A checkpoint's copy stage: committed pages read through /proc/TID/mem
 * (or through a shared-memory file) into the writer's staging buffers,
 * back to back in pages-file order (supervisor/checkpoint/job.h). */
#include "supervisor/checkpoint/job.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/backing.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/vm.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

/* ---- copying ------------------------------------------------------------ */

struct reader {
	struct ckpt *c;
	struct pagesw_buf *buf;
	/* The pending reads: ranges of one process, landing back to back in
	 * buf from byte at. */
	size_t proc;
	struct iovec iov[BATCH_IOV];
	struct img_extent *ext[BATCH_IOV];
	size_t n, bytes, at;
	uint64_t next; /* the pages-file offset after the last extent placed */
	bool live;     /* the program runs: a failed read is for the caller to judge */
};

static int writer_failed(struct ckpt *c)
{
	int e = pagesw_error(c->w);
	return ckpt_fail(c, e, MV_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
			 strerror(-e));
}

static int read_batch(struct reader *r, struct cproc *p, char *dst)
{
	for (size_t k = 0; k < r->n; k++) {
		uint64_t addr = (uint64_t)(uintptr_t)r->iov[k].iov_base;
		int rc =
		    fault_hit("ckpt_read") ? -EIO : ckpt_read_mem(p, addr, dst, r->iov[k].iov_len);
		if (rc < 0) {
			if (rc == -ESRCH || ckpt_proc_dead(p))
				return -ESRCH;
			if (r->live)
				return rc;
			return ckpt_fail(
			    r->c, rc, MV_E_INTERNAL, "reading %zu bytes of process %d at %#llx: %s",
			    r->iov[k].iov_len, p->pt.pid, (unsigned long long)addr, strerror(-rc));
		}
		dst += r->iov[k].iov_len;
	}
	return 0;
}

static int flush_batch(struct reader *r)
{
	if (!r->n)
		return 0;
	struct ckpt *c = r->c;
	struct cproc *p = &c->p[r->proc];
	char *dst = (char *)r->buf->data + r->at;
	uint64_t t0 = mv_now_ns();
	int rc = p->died ? -ESRCH : read_batch(r, p, dst);
	c->ns_read += mv_now_ns() - t0;
	if (rc == -ESRCH) {
		/* Killed while stopped (only SIGKILL ends a stopped
		 * process): its remaining extents become zeros that nothing
		 * refers to. */
		p->died = true;
		memset(dst, 0, r->bytes);
	} else if (rc < 0) {
		return rc;
	}
	/* The writer threads checksum them, off the pause. */
	size_t at = r->at;
	for (size_t k = 0; k < r->n; k++) {
		pagesw_add_sum(r->buf, &r->ext[k]->crc, at, r->iov[k].iov_len);
		at += r->iov[k].iov_len;
	}
	c->done += r->bytes;
	r->n = r->bytes = 0;
	return 0;
}

static int submit(struct reader *r)
{
	int rc = flush_batch(r);
	if (rc < 0)
		return rc;
	if (r->buf) {
		pagesw_submit(r->c->w, r->buf);
		r->buf = NULL;
		job_progress(r->c->j, "copying", r->c->done, r->c->total);
	}
	return 0;
}

/* Make room for extent e at the end of the current buffer (a new buffer
 * starts at e). While the program runs, the write-fault handler copies
 * some extents itself (live.c): the next one the copier copies may then
 * not follow its buffer's last, and starts a new buffer. */
static int place(struct reader *r, const struct img_extent *e)
{
	uint64_t len = img_extent_len(e);
	int rc;
	if (r->buf &&
	    (r->buf->len + len > r->buf->cap || (r->live && r->buf->off + r->buf->len != e->off)) &&
	    (rc = submit(r)) < 0)
		return rc;
	if (!r->buf) {
		uint64_t t0 = mv_now_ns();
		r->buf = r->live ? ckpt_live_get_buf(r->c) : pagesw_get(r->c->w);
		r->c->ns_wait += mv_now_ns() - t0;
		if (!r->buf)
			return writer_failed(r->c);
		r->buf->off = e->off;
	}
	if (r->buf->off + r->buf->len != e->off || len > r->buf->cap)
		return ckpt_fail(r->c, -EINVAL, MV_E_INTERNAL,
				 "extent at pages offset %#llx out of order",
				 (unsigned long long)e->off);
	r->next = e->off + len;
	return 0;
}

static int copy_vm(struct reader *r, size_t proc, uint64_t addr, struct img_extent *e)
{
	size_t len = img_extent_len(e);
	int rc = place(r, e);
	if (rc < 0)
		return rc;
	if (r->n && (r->proc != proc || r->n == BATCH_IOV || r->bytes + len > BATCH_BYTES) &&
	    (rc = flush_batch(r)) < 0)
		return rc;
	if (!r->n) {
		r->proc = proc;
		r->at = r->buf->len;
	}
	r->iov[r->n] = (struct iovec){.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	r->ext[r->n++] = e;
	r->bytes += len;
	r->buf->len += len;
	return 0;
}

static int copy_fd(struct reader *r, int fd, const char *what, struct img_extent *e)
{
	size_t len = img_extent_len(e);
	int rc = flush_batch(r);
	if (rc < 0 || (rc = place(r, e)) < 0)
		return rc;
	char *dst = (char *)r->buf->data + r->buf->len;
	rc = backing_read(fd, e->addr, dst, len);
	if (rc < 0)
		return ckpt_fail(r->c, rc, MV_E_INTERNAL, "reading %s at %#llx: %s", what,
				 (unsigned long long)e->addr, strerror(-rc));
	pagesw_add_sum(r->buf, &e->crc, r->buf->len, len);
	r->buf->len += len;
	r->c->done += len;
	return 0;
}

static int copy_object(struct reader *r, size_t k)
{
	struct cobj *o = &r->c->obj[k];
	struct img_object *io = &r->c->im.o[k];
	size_t q = 0;
	for (size_t x = 0; x < io->ext.n; x++) {
		struct img_extent *e = &io->ext.v[x];
		int rc;
		if (o->fd >= 0) {
			rc = copy_fd(r, o->fd, io->path ? io->path : "a shared memory object", e);
		} else {
			while (q < o->n_pc && o->pc[q].end <= e->addr)
				q++;
			const struct piece *pc = &o->pc[q];
			rc = copy_vm(r, pc->proc, pc->addr + (e->addr - pc->start), e);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Extents of an object read through a process that was killed hold
 * zeros, not the object's bytes: drop them. */
static void drop_dead_pieces(struct ckpt *c, size_t k)
{
	struct cobj *o = &c->obj[k];
	struct img_extents *x = &c->im.o[k].ext;
	size_t q = 0, kept = 0;
	if (o->fd >= 0)
		return;
	for (size_t i = 0; i < x->n; i++) {
		while (q < o->n_pc && o->pc[q].end <= x->v[i].addr)
			q++;
		if (q < o->n_pc && !c->p[o->pc[q].proc].died)
			x->v[kept++] = x->v[i];
	}
	x->n = kept;
}

/* The end of a pass: the last buffer queued, the reader freed. */
static int end_pass(struct reader *r, int rc)
{
	if (rc == 0)
		rc = submit(r);
	if (r->buf)
		pagesw_submit(r->c->w, (r->buf->len = 0, r->buf));
	free(r);
	return rc;
}

/* One extent of a write-protected region, while the program runs: read
 * it, then lift its protection (ckpt_live_commit); read again while a
 * layout change is under way. A process gone meanwhile leaves zeros
 * that nothing refers to, as in flush_batch. An extent the write-fault
 * handler copied (before or during the read) is left to it. */
static int copy_live_extent(struct reader *r, size_t proc, struct img_extent *e)
{
	struct ckpt *c = r->c;
	struct cproc *p = &c->p[proc];
	size_t len = img_extent_len(e);
	if (ckpt_live_taken(c, proc, e)) {
		c->done += len;
		return 0;
	}
	int rc = place(r, e);
	if (rc < 0)
		return rc;
	char *dst = (char *)r->buf->data + r->buf->len;
	for (unsigned tries = 0;; tries++) {
		r->iov[0] = (struct iovec){.iov_base = (void *)(uintptr_t)e->addr, .iov_len = len};
		r->n = 1;
		rc = p->died ? -ESRCH : read_batch(r, p, dst);
		r->n = 0;
		/* A read that fails while the program runs: most likely it
		 * unmapped the range, and the event will say so. */
		if (rc < 0 && rc != -ESRCH && tries > LIVE_TRIES)
			ckpt_live_lose(c, "process %d: reading %#llx: %s", p->pt.pid,
				       (unsigned long long)e->addr, strerror(-rc));
		else if (rc < 0 && rc != -ESRCH)
			rc = -EAGAIN;
		else if (rc == 0)
			rc = ckpt_live_commit(c, proc, e, dst);
		if (rc == -EAGAIN && (rc = ckpt_live_wait(c)) == 0)
			continue;
		if (rc == -EALREADY) {
			c->done += len;
			return 0;
		}
		if (rc < 0 && rc != -ESRCH)
			rc = -ECANCELED;
		break;
	}
	if (rc == -ESRCH) {
		p->died = true;
		memset(dst, 0, len);
		rc = 0;
	}
	if (rc < 0)
		return rc;
	pagesw_add_sum(r->buf, &e->crc, r->buf->len, len);
	r->buf->len += len;
	c->done += len;
	return 0;
}

/* The extents of the processes' private regions, in pages-file order:
 * those copied during the pause (r->live false: every region, or with
 * --live those not write-protected), or those copied while the program
 * runs (r->live). */
static int copy_regions(struct reader *r)
{
	struct ckpt *c = r->c;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		if (c->p[i].img < 0)
			continue;
		struct img_proc *ip = ckpt_iproc(c, i);
		for (size_t k = 0; rc == 0 && k < ip->n_r; k++) {
			if (ckpt_live_region(c, i, k) != r->live)
				continue;
			for (size_t x = 0; rc == 0 && x < ip->r[k].ext.n; x++) {
				struct img_extent *e = &ip->r[k].ext.v[x];
				/* Bytes stored for another process (dedup.c). */
				if (c->dd.on && e->off < r->next)
					rc = ckpt_dedup_read(c, i, e);
				else if (r->live)
					rc = copy_live_extent(r, i, e);
				else
					rc = copy_vm(r, i, e->addr, e);
			}
		}
	}
	return rc;
}

int ckpt_copy_all(struct ckpt *c)
{
	struct reader *r = xcalloc(1, sizeof(*r));
	r->c = c;
	job_progress(c->j, "copying", 0, c->total);
	int rc = copy_regions(r);
	for (size_t k = 0; rc == 0 && k < c->im.n_o; k++)
		rc = copy_object(r, k);
	rc = end_pass(r, rc);
	c->t_copied = mv_now_ns();
	log_debug("checkpoint: copy %.1f ms: read %.1f, waiting for buffers %.1f",
		  (double)(c->t_copied - c->t_planned) / 1e6, (double)c->ns_read / 1e6,
		  (double)c->ns_wait / 1e6);
	return rc;
}

int ckpt_copy_live(struct ckpt *c)
{
	struct reader *r = xcalloc(1, sizeof(*r));
	r->c = c;
	r->live = true;
	int rc = copy_regions(r);
	ckpt_live_copied(c);
	return end_pass(r, rc);
}

/* After the writers are done with the extents (their checksums land in
 * them): drop what was read from processes killed meanwhile. */
int ckpt_settle(struct ckpt *c)
{
	uint64_t t0 = mv_now_ns();
	int rc = pagesw_drain(c->w);
	log_debug("checkpoint: drain %.1f ms after resume", (double)(mv_now_ns() - t0) / 1e6);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
				 strerror(-rc));
	for (size_t k = 0; k < c->im.n_o; k++)
		drop_dead_pieces(c, k);
	for (size_t i = 0; i < c->n; i++) {
		if (!c->p[i].died || c->p[i].img < 0)
			continue;
		ckpt_live_forget(c, i); /* it points into the record */
		img_proc_forget(ckpt_iproc(c, i));
		if (ckpt_proc_lost(c, &c->p[i]) < 0)
			return -ESRCH;
	}
	return 0;
}
