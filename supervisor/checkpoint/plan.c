/* A checkpoint's layout stage: registers of every thread, regions,
 * committed pages, shared-memory objects (supervisor/checkpoint/job.h). */
#include "supervisor/checkpoint/job.h"
#include "common/util.h"
#include "supervisor/kernel/backing.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/procmap.h"

#include <elf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- layout ------------------------------------------------------------ */

static void add_regsets(struct img_thread *it, struct ptrace_thread *t)
{
	img_thread_add_regset(it, "prstatus", NT_PRSTATUS, t->prstatus, t->prstatus_len);
	if (t->fpstate)
		img_thread_add_regset(it, t->fpstate_note == NT_PRFPREG ? "fpregs" : "xstate",
				      t->fpstate_note, t->fpstate, t->fpstate_len);
}

/* A thread whose registers cannot be read fails the checkpoint: an image
 * without it would look whole and restore a process short of a thread. */
static int plan_threads(struct ckpt *c, size_t i)
{
	struct ptrace_proc *pp = &c->p[i].pt;
	for (size_t k = 0; k < pp->n; k++) {
		struct ptrace_thread *t = &pp->t[k];
		if (t->state == PT_BLOCKED) {
			img_add_thread(ckpt_iproc(c, i), t->tid)->vfork_wait = true;
			continue;
		}
		if (t->state != PT_STOPPED)
			continue;
		int rc = ptrace_save_regs_stopped(t);
		/* ESRCH: killed while stopped; the process goes too and the
		 * reads will tell. */
		if (rc == -ESRCH)
			continue;
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_INTERNAL,
					 "reading the registers of thread %d: %s", t->tid,
					 strerror(-rc));
		struct img_thread *it = img_add_thread(ckpt_iproc(c, i), t->tid);
		it->signal = t->signal;
		it->group_stop = t->group_stop;
		add_regsets(it, t);
	}
	return 0;
}

static void plan_identity(struct ckpt *c, size_t i)
{
	struct img_proc *ip = ckpt_iproc(c, i);
	struct proc_identity id;
	if (procfs_identity(c->p[i].pt.pid, &id) < 0) {
		procfs_identity_free(&id);
		if (procfs_identity(c->p[i].tid, &id) < 0) {
			procfs_identity_free(&id);
			return;
		}
	}
	ip->ppid = id.ppid;
	ip->exe = mv_steal_ptr(id.exe);
	ip->cmdline = mv_steal_ptr(id.cmdline);
	ip->cmdline_len = id.cmdline_len;
	procfs_identity_free(&id);
}

/* Private memory: the pages the process has written (anonymous pages),
 * present or swapped; not page-cache pages of a file (PAGE_IS_FILE: clean
 * file pages are the file's, a reference), not the shared zero page. A
 * page shared copy-on-write with a process planned before is stored once
 * (dedup.c). */
static int plan_private(struct ckpt *c, size_t i, struct pagemap *pm, struct img_region *r)
{
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	int rc = pagemap_runs(pm, r->start, r->end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			      PAGE_IS_FILE | PAGE_IS_PFNZERO, &runs, &n, &cap);
	if (rc == 0 && c->dd.on)
		rc = ckpt_dedup_region(c, i, pm, r, runs, n);
	for (size_t k = 0; rc == 0 && !c->dd.on && k < n; k++)
		img_extents_add_run(&r->ext, runs[k].start, runs[k].end, &c->off);
	free(runs);
	return rc;
}

static void add_piece(struct cobj *o, struct piece p)
{
	if (o->n_pc == o->cap_pc)
		o->pc =
		    xrealloc(o->pc, (o->cap_pc = o->cap_pc ? o->cap_pc * 2 : 16) * sizeof(*o->pc));
	o->pc[o->n_pc++] = p;
}

/* Without the object's file: the pages present in this mapping of it,
 * for the part of the object no earlier mapping covered. */
static int plan_mapped(struct ckpt *c, size_t i, struct pagemap *pm, const struct as_region *src,
		       long idx)
{
	struct cobj *o = &c->obj[idx];
	struct img_object *io = &c->im.o[idx];
	uint64_t ostart = src->offset, oend = src->offset + (src->end - src->start);
	io->size = MV_MAX(io->size, oend);
	struct as_range *todo = NULL, *runs = NULL;
	size_t nt = 0, ct = 0, nr = 0, cr = 0;
	img_ranges_subtract(o->mapped, o->n_m, ostart, oend, &todo, &nt, &ct);
	int rc = 0;
	for (size_t k = 0; rc == 0 && k < nt; k++) {
		uint64_t a = src->start + (todo[k].start - ostart);
		nr = 0;
		rc = pagemap_runs(pm, a, a + (todo[k].end - todo[k].start),
				  PAGE_IS_PRESENT | PAGE_IS_SWAPPED, 0, &runs, &nr, &cr);
		for (size_t q = 0; rc == 0 && q < nr; q++)
			add_piece(o, (struct piece){ostart + (runs[q].start - src->start),
						    ostart + (runs[q].end - src->start), i,
						    runs[q].start});
	}
	free(todo);
	free(runs);
	if (o->n_m == o->cap_m)
		o->mapped = xrealloc(o->mapped,
				     (o->cap_m = o->cap_m ? o->cap_m * 2 : 8) * sizeof(*o->mapped));
	o->mapped[o->n_m++] = (struct as_range){ostart, oend};
	mv_qsort(o->mapped, o->n_m, sizeof(*o->mapped), as_range_cmp);
	return rc;
}

static long new_object(struct ckpt *c, size_t i, const struct as_region *src)
{
	struct img_object *io =
	    img_add_object(&c->im, src->inode, src->dev_major, src->dev_minor, src->path);
	long idx = (long)c->im.n_o - 1;
	if ((size_t)idx >= c->cap_obj) {
		c->cap_obj = c->cap_obj ? c->cap_obj * 2 : 8;
		c->obj = xrealloc(c->obj, c->cap_obj * sizeof(*c->obj));
	}
	struct cobj *o = &c->obj[idx];
	memset(o, 0, sizeof(*o));
	const char *source = "mapping";
	o->fd = backing_open(c->p[i].tid, src, &source);
	struct stat st;
	if (o->fd >= 0 && fstat(o->fd, &st) == 0) {
		io->size = ((uint64_t)st.st_size + IMG_PAGE - 1) & ~(uint64_t)(IMG_PAGE - 1);
		io->coverage = IMG_COVER_WHOLE;
	} else {
		if (o->fd >= 0)
			close(o->fd);
		o->fd = -1;
		source = "mapping";
		io->coverage = IMG_COVER_MAPPED;
	}
	snprintf(io->source, sizeof(io->source), "%s", source);
	return idx;
}

static int plan_region(struct ckpt *c, size_t i, struct pagemap *pm, struct as_region *src)
{
	long idx = -1;
	if (src->shared && src->kind == AS_SHMEM) {
		idx = img_find_object(&c->im, src->inode, src->dev_major, src->dev_minor);
		if (idx < 0)
			idx = new_object(c, i, src);
	}
	struct img_region *r = img_add_region(ckpt_iproc(c, i), src);
	src->path = NULL; /* the image has it now */
	switch (r->kind) {
	case AS_VDSO:
	case AS_VVAR:
	case AS_VSYSCALL:
	case AS_OTHER:
		r->content = IMG_SKIPPED;
		return 0;
	default:
		break;
	}
	if (!r->shared) {
		r->content = IMG_PRIVATE;
		return plan_private(c, i, pm, r);
	}
	if (idx < 0) {
		r->content = IMG_FILE;
		return 0;
	}
	r->content = IMG_SHARED;
	r->object = idx;
	if (c->obj[idx].fd >= 0)
		return 0;
	/* src's path was handed over; plan_mapped needs only the bounds. */
	return plan_mapped(c, i, pm, src, idx);
}

static int plan_proc(struct ckpt *c, size_t i)
{
	struct cproc *p = &c->p[i];
	p->tid = ptrace_reader_tid(&p->pt);
	if (!p->tid)
		return ckpt_proc_lost(c, p);
	struct img_proc *ip = img_add_proc(&c->im, p->pt.pid);
	p->img = (long)c->im.n_p - 1;
	(void)ip;
	plan_identity(c, i);
	int rc = plan_threads(c, i);
	if (rc < 0)
		return rc;
	struct as_model m;
	as_model_init(&m);
	const char *how = NULL;
	/* The layout through the stopped thread's /proc entry: the leader
	 * may be a zombie whose maps read empty. */
	struct pagemap pm = {.fd = -1};
	rc = pagemap_open(p->tid, c->mv->feat.pagemap_scan, &pm);
	/* One walk of the page tables for the layout's resident sizes and
	 * every region's pages below. */
	if (rc == 0)
		rc = procmap_snapshot_keep(p->tid, &c->mv->feat, PROCMAP_SRC_AUTO, &m, &how, &pm);
	if (rc == 0)
		c->layout_how = how;
	for (size_t k = 0; rc == 0 && k < m.n; k++)
		rc = plan_region(c, i, &pm, &m.r[k]);
	pagemap_close(&pm);
	as_model_free(&m);
	if (rc == -ESRCH) {
		p->died = true;
		return 0;
	}
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_INTERNAL, "reading the layout of process %d: %s",
				 p->pt.pid, strerror(-rc));
	return 0;
}

static int plan_objects(struct ckpt *c)
{
	for (size_t k = 0; k < c->im.n_o; k++) {
		struct cobj *o = &c->obj[k];
		struct img_object *io = &c->im.o[k];
		if (o->fd < 0) {
			for (size_t q = 0; q < o->n_pc; q++)
				img_extents_add_run(&io->ext, o->pc[q].start, o->pc[q].end,
						    &c->off);
			continue;
		}
		struct as_range *runs = NULL;
		size_t n = 0, cap = 0;
		int rc = backing_data_runs(o->fd, io->size, &runs, &n, &cap);
		for (size_t q = 0; rc == 0 && q < n; q++)
			img_extents_add_run(&io->ext, runs[q].start, MV_MIN(runs[q].end, io->size),
					    &c->off);
		free(runs);
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_INTERNAL, "reading the holes of %s: %s",
					 io->path ? io->path : "a shared memory object",
					 strerror(-rc));
	}
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int ckpt_plan_all(struct ckpt *c)
{
	job_progress(c->j, "layout", 0, 0);
	c->off = IMG_HEADER_SIZE;
	ckpt_dedup_start(c);
	for (size_t i = 0; i < c->n; i++) {
		if (c->p[i].pt.gone)
			continue;
		int rc = plan_proc(c, i);
		if (rc < 0)
			return rc;
	}
	for (size_t k = 0; k < c->im.n_o; k++)
		mv_qsort(c->obj[k].pc, c->obj[k].n_pc, sizeof(struct piece), cmp_piece);
	int rc = plan_objects(c);
	c->total = c->off - IMG_HEADER_SIZE;
	c->t_planned = mv_now_ns();
	return rc;
}
