#include "supervisor/checkpoint.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/util.h"
#include "state/image.h"
#include "supervisor/backing.h"
#include "supervisor/ctl.h"
#include "supervisor/pagemap.h"
#include "supervisor/pagesw.h"
#include "supervisor/procfs.h"
#include "supervisor/procmap.h"
#include "supervisor/ptrace.h"
#include "supervisor/vm.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>

/* A thread that has not stopped after this long may be a vfork parent. */
#define VFORK_CHECK_NS (50 * 1000000ull)
/* One process_vm_readv: at most this much (so the data is still in the
 * cache when it is checksummed) and IOV_MAX ranges. */
#define BATCH_BYTES (512u << 10)
#define BATCH_IOV   1024

/* Where the bytes of an object's pages come from when its file cannot be
 * opened: a mapping of it in one of the processes. */
struct piece {
	uint64_t start, end; /* in the object */
	size_t proc;
	uint64_t addr; /* of start, in that process */
};

struct cobj {
	int fd; /* the object's file, or -1 */
	struct piece *pc;
	size_t n_pc, cap_pc;
	struct as_range *mapped; /* object ranges whose pages are planned */
	size_t n_m, cap_m;
};

struct cproc {
	struct ptrace_proc pt;
	bool requested;
	pid_t tid; /* memory and /proc are read through this thread */
	int memfd; /* /proc/TID/mem, opened on first need */
	long img;  /* index into im.p, or -1 */
	bool died; /* killed while we held it */
};

struct ckpt {
	struct job *j;
	struct mv *mv;
	struct checkpoint_req *req;
	struct cproc *p;
	size_t n, cap;
	struct img im;
	struct cobj *obj;
	size_t cap_obj;
	uint64_t off; /* the next free byte of the pages file */
	uint64_t total, done;
	struct pagesw *w;
	const char *layout_how;
	uint64_t t_start, t_stopped, t_planned, t_copied, t_resumed, t_end;
	uint64_t pause_start, pause_end;
	uint64_t ns_read, ns_wait; /* where the copy's time went */
	const char *code;
	char msg[512];
};

static int cfail(struct ckpt *c, int rc, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Record the first failure; later ones are consequences. */
static int cfail(struct ckpt *c, int rc, const char *code, const char *fmt, ...)
{
	if (!c->code) {
		c->code = code;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
		va_end(ap);
	}
	return rc < 0 ? rc : -EIO;
}

/* ---- stopping --------------------------------------------------------- */

static struct cproc *find_proc(struct ckpt *c, pid_t pid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i].pt.pid == pid)
			return &c->p[i];
	return NULL;
}

static struct cproc *add_proc(struct ckpt *c, pid_t pid, int pidfd, bool requested)
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

/* Has the process gone (killed while stopped: only SIGKILL ends a
 * stopped process)? Its mm may be torn down (process_vm_readv: ESRCH)
 * before the thread turns zombie, so any of the signs will do. */
static bool proc_dead(const struct cproc *p)
{
	if (p->pt.pidfd >= 0) {
		struct pollfd pfd = {.fd = p->pt.pidfd, .events = POLLIN};
		if (poll(&pfd, 1, 0) > 0)
			return true;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", p->tid);
	_cleanup_free_ char *text = NULL;
	if (mv_read_file_at(AT_FDCWD, path, &text, NULL) < 0)
		return true;
	char *rp = strrchr(text, ')');
	return !rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X';
}

/* Every process below the reaper that we do not hold yet: a process
 * forked by a thread before it stopped shows up here, once the parent
 * stopped (copy_process links the child before the parent returns). */
static size_t discover(struct ckpt *c)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0, added = 0;
	procfs_children(c->mv->reaper_pid, &v, &n, &cap);
	for (size_t i = 0; i < n; i++)
		procfs_children(v[i], &v, &n, &cap);
	for (size_t i = 0; i < n; i++) {
		if (find_proc(c, v[i]))
			continue;
		int fd = (int)syscall(SYS_pidfd_open, v[i], 0);
		if (fd < 0 && errno == ESRCH)
			continue;
		add_proc(c, v[i], fd, false);
		added++;
	}
	free(v);
	return added;
}

static int proc_lost(struct ckpt *c, struct cproc *p)
{
	p->pt.gone = true;
	if (p->requested)
		return cfail(c, -ESRCH, CTL_E_NO_SUCH_PROCESS,
			     "process %d exited during the checkpoint", p->pt.pid);
	log_info("checkpoint: process %d exited meanwhile; recorded as gone", p->pt.pid);
	return 0;
}

static int seize_round(struct ckpt *c, size_t *fresh)
{
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (p->pt.gone)
			continue;
		int r = ptrace_seize_new(&p->pt);
		if (r == -ESRCH) {
			if (proc_lost(c, p) < 0)
				return -ESRCH;
			continue;
		}
		if (r < 0)
			return cfail(c, r, r == -EPERM ? CTL_E_PERMISSION : CTL_E_INTERNAL,
				     "cannot stop process %d with ptrace: %s", p->pt.pid,
				     strerror(-r));
		*fresh += (size_t)r;
	}
	return 0;
}

static int stop_timeout(struct ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct ptrace_thread *t = ptrace_laggard(&c->p[i].pt);
		if (!t)
			continue;
		char why[160];
		ptrace_describe_thread(c->p[i].pt.pid, t->tid, why, sizeof(why));
		return cfail(c, -ETIMEDOUT, CKPT_E_TIMEOUT,
			     "thread %d of process %d did not stop within %d ms (%s)", t->tid,
			     c->p[i].pt.pid, c->req->stop_timeout_ms, why);
	}
	return 0;
}

/* Wait until every seized thread has stopped, exited, or is a blocked
 * vfork parent. Polling: a ptrace stop is reported to the tracer only by
 * wait (and a SIGCHLD that the main thread's signalfd takes). */
static int wait_round(struct ckpt *c, uint64_t deadline)
{
	uint64_t nap = 20 * 1000;
	for (;;) {
		size_t waiting = 0;
		uint64_t now = mv_now_ns();
		for (size_t i = 0; i < c->n; i++) {
			struct ptrace_proc *pp = &c->p[i].pt;
			if (pp->gone)
				continue;
			ptrace_poll_stops(pp);
			for (size_t k = 0; k < pp->n; k++) {
				struct ptrace_thread *t = &pp->t[k];
				if (t->state == PT_SEIZED && now - t->interrupt_ns > VFORK_CHECK_NS)
					ptrace_classify_laggard(pp, t);
				waiting += t->state == PT_SEIZED;
			}
		}
		if (!waiting)
			return 0;
		if (now > deadline)
			return stop_timeout(c);
		struct timespec ts = {0, (long)nap};
		nanosleep(&ts, NULL);
		nap = MV_MIN(nap * 2, 1000 * 1000);
	}
}

static int stop_all(struct ckpt *c)
{
	job_progress(c->j, "stopping", 0, 0);
	uint64_t deadline = mv_now_ns() + (uint64_t)c->req->stop_timeout_ms * 1000000ull;
	uint64_t t0 = mv_now_ns(), td = 0, ts = 0, tw = 0;
	if (c->req->all)
		discover(c);
	td = mv_now_ns() - t0;
	for (;;) {
		size_t fresh = 0;
		uint64_t a = mv_now_ns();
		int rc = seize_round(c, &fresh);
		if (rc < 0)
			return rc;
		uint64_t b = mv_now_ns();
		ts += b - a;
		if (c->req->all)
			fresh += discover(c);
		uint64_t d = mv_now_ns();
		td += d - b;
		if ((rc = wait_round(c, deadline)) < 0)
			return rc;
		tw += mv_now_ns() - d;
		if (!fresh)
			break;
	}
	log_debug("checkpoint: stop: discover %.2f ms, seize %.2f ms, wait %.2f ms",
		  (double)td / 1e6, (double)ts / 1e6, (double)tw / 1e6);
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (!p->pt.gone)
			ptrace_check_identity(&p->pt);
		if (p->pt.gone && proc_lost(c, p) < 0)
			return -ESRCH;
	}
	c->t_stopped = mv_now_ns();
	return 0;
}

/* ---- layout ------------------------------------------------------------ */

static struct img_proc *iproc(struct ckpt *c, size_t i)
{
	return &c->im.p[c->p[i].img];
}

static void add_regsets(struct img_thread *it, struct ptrace_thread *t)
{
	img_thread_add_regset(it, "prstatus", NT_PRSTATUS, t->prstatus, t->prstatus_len);
	if (t->fpstate)
		img_thread_add_regset(it, t->fpstate_note == NT_PRFPREG ? "fpregs" : "xstate",
				      t->fpstate_note, t->fpstate, t->fpstate_len);
}

static void plan_threads(struct ckpt *c, size_t i)
{
	struct ptrace_proc *pp = &c->p[i].pt;
	for (size_t k = 0; k < pp->n; k++) {
		struct ptrace_thread *t = &pp->t[k];
		if (t->state == PT_BLOCKED) {
			img_add_thread(iproc(c, i), t->tid)->vfork_wait = true;
			continue;
		}
		if (t->state != PT_STOPPED)
			continue;
		int rc = ptrace_save_regs_stopped(t);
		if (rc < 0) {
			/* ESRCH: killed while stopped; the process goes too and
			 * the reads will tell. */
			if (rc != -ESRCH)
				log_warn("checkpoint: registers of thread %d: %s", t->tid,
					 strerror(-rc));
			continue;
		}
		struct img_thread *it = img_add_thread(iproc(c, i), t->tid);
		it->signal = t->signal;
		it->group_stop = t->group_stop;
		add_regsets(it, t);
	}
}

static void plan_identity(struct ckpt *c, size_t i)
{
	struct img_proc *ip = iproc(c, i);
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
 * file pages are the file's, a reference), not the shared zero page. */
static int plan_private(struct ckpt *c, struct pagemap *pm, struct img_region *r)
{
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	int rc = pagemap_runs(pm, r->start, r->end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			      PAGE_IS_FILE | PAGE_IS_PFNZERO, &runs, &n, &cap);
	for (size_t k = 0; rc == 0 && k < n; k++)
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

static int cmp_range(const void *a, const void *b)
{
	const struct as_range *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
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
	qsort(o->mapped, o->n_m, sizeof(*o->mapped), cmp_range);
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
	struct img_region *r = img_add_region(iproc(c, i), src);
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
		return plan_private(c, pm, r);
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
		return proc_lost(c, p);
	struct img_proc *ip = img_add_proc(&c->im, p->pt.pid);
	p->img = (long)c->im.n_p - 1;
	(void)ip;
	plan_identity(c, i);
	plan_threads(c, i);
	struct as_model m;
	as_model_init(&m);
	const char *how = NULL;
	/* The layout through the stopped thread's /proc entry: the leader
	 * may be a zombie whose maps read empty. */
	int rc = procmap_snapshot(p->tid, &c->mv->feat, PROCMAP_SRC_AUTO, &m, &how);
	if (rc == 0)
		c->layout_how = how;
	struct pagemap pm = {.fd = -1};
	if (rc == 0)
		rc = pagemap_open(p->tid, c->mv->feat.pagemap_scan, &pm);
	for (size_t k = 0; rc == 0 && k < m.n; k++)
		rc = plan_region(c, i, &pm, &m.r[k]);
	pagemap_close(&pm);
	as_model_free(&m);
	if (rc == -ESRCH) {
		p->died = true;
		return 0;
	}
	if (rc < 0)
		return cfail(c, rc, CTL_E_INTERNAL, "reading the layout of process %d: %s",
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
			return cfail(c, rc, CTL_E_INTERNAL, "reading the holes of %s: %s",
				     io->path ? io->path : "a shared memory object", strerror(-rc));
	}
	return 0;
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int plan_all(struct ckpt *c)
{
	job_progress(c->j, "layout", 0, 0);
	c->off = IMG_HEADER_SIZE;
	for (size_t i = 0; i < c->n; i++) {
		if (c->p[i].pt.gone)
			continue;
		int rc = plan_proc(c, i);
		if (rc < 0)
			return rc;
	}
	for (size_t k = 0; k < c->im.n_o; k++)
		qsort(c->obj[k].pc, c->obj[k].n_pc, sizeof(struct piece), cmp_piece);
	int rc = plan_objects(c);
	c->total = c->off - IMG_HEADER_SIZE;
	c->t_planned = mv_now_ns();
	return rc;
}

/* ---- copying ------------------------------------------------------------ */

struct reader {
	struct ckpt *c;
	struct pagesw_buf *buf;
	/* The pending process_vm_readv: ranges of one process, landing back
	 * to back in buf from byte at. */
	size_t proc;
	struct iovec iov[BATCH_IOV];
	struct img_extent *ext[BATCH_IOV];
	size_t n, bytes, at;
};

static int writer_failed(struct ckpt *c)
{
	int e = pagesw_error(c->w);
	return cfail(c, e, CKPT_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
		     strerror(-e));
}

/* Read one extent through /proc/TID/mem: pages process_vm_readv refuses
 * (PROT_NONE, write-only) can be read that way. */
static int read_forced(struct ckpt *c, struct cproc *p, uint64_t addr, void *dst, size_t len)
{
	if (p->memfd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/mem", p->tid);
		p->memfd = open(path, O_RDONLY | O_CLOEXEC);
		if (p->memfd < 0)
			return -errno;
	}
	return vm_pread_mem(p->memfd, addr, dst, len);
}

static int read_batch(struct reader *r, struct cproc *p, char *dst)
{
	size_t i0 = 0;
	while (i0 < r->n) {
		size_t done;
		int rc = vm_readv(p->tid, &r->iov[i0], r->n - i0, dst, &done);
		if (rc == 0)
			return 0;
		size_t k = i0, acc = 0;
		while (k < r->n && acc + r->iov[k].iov_len <= done)
			acc += r->iov[k++].iov_len;
		if (rc == -EFAULT && k < r->n)
			rc = read_forced(r->c, p, (uint64_t)(uintptr_t)r->iov[k].iov_base,
					 dst + acc, r->iov[k].iov_len);
		if (rc < 0) {
			if (rc == -ESRCH || proc_dead(p))
				return -ESRCH;
			return cfail(r->c, rc, CTL_E_INTERNAL,
				     "reading %zu bytes of process %d at %#llx: %s",
				     r->iov[k].iov_len, p->pt.pid,
				     (unsigned long long)(uintptr_t)r->iov[k].iov_base,
				     strerror(-rc));
		}
		dst += acc + r->iov[k].iov_len;
		i0 = k + 1;
	}
	return 0;
}

static void add_sum(struct pagesw_buf *b, uint32_t *crc, size_t off, size_t len)
{
	b->sums[b->n_sums++] = (struct pagesw_sum){crc, (uint32_t)off, (uint32_t)len};
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
		add_sum(r->buf, &r->ext[k]->crc, at, r->iov[k].iov_len);
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
 * starts at e). */
static int place(struct reader *r, const struct img_extent *e)
{
	uint64_t len = img_extent_len(e);
	int rc;
	if (r->buf && r->buf->len + len > r->buf->cap && (rc = submit(r)) < 0)
		return rc;
	if (!r->buf) {
		uint64_t t0 = mv_now_ns();
		r->buf = pagesw_get(r->c->w);
		r->c->ns_wait += mv_now_ns() - t0;
		if (!r->buf)
			return writer_failed(r->c);
		r->buf->off = e->off;
	}
	if (r->buf->off + r->buf->len != e->off || len > r->buf->cap)
		return cfail(r->c, -EINVAL, CTL_E_INTERNAL,
			     "extent at pages offset %#llx out of order",
			     (unsigned long long)e->off);
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
		return cfail(r->c, rc, CTL_E_INTERNAL, "reading %s at %#llx: %s", what,
			     (unsigned long long)e->addr, strerror(-rc));
	add_sum(r->buf, &e->crc, r->buf->len, len);
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

static int copy_all(struct ckpt *c)
{
	struct reader *r = xcalloc(1, sizeof(*r));
	r->c = c;
	job_progress(c->j, "copying", 0, c->total);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		if (c->p[i].img < 0)
			continue;
		struct img_proc *ip = iproc(c, i);
		for (size_t k = 0; rc == 0 && k < ip->n_r; k++)
			for (size_t x = 0; rc == 0 && x < ip->r[k].ext.n; x++)
				rc = copy_vm(r, i, ip->r[k].ext.v[x].addr, &ip->r[k].ext.v[x]);
	}
	for (size_t k = 0; rc == 0 && k < c->im.n_o; k++)
		rc = copy_object(r, k);
	if (rc == 0)
		rc = submit(r);
	if (r->buf)
		pagesw_submit(c->w, (r->buf->len = 0, r->buf));
	free(r);
	c->t_copied = mv_now_ns();
	log_debug("checkpoint: copy %.1f ms: read %.1f, waiting for buffers %.1f",
		  (double)(c->t_copied - c->t_planned) / 1e6, (double)c->ns_read / 1e6,
		  (double)c->ns_wait / 1e6);
	return rc;
}

/* After the writers are done with the extents (their checksums land in
 * them): drop what was read from processes killed meanwhile. */
static int settle(struct ckpt *c)
{
	uint64_t t0 = mv_now_ns();
	int rc = pagesw_drain(c->w);
	log_debug("checkpoint: drain %.1f ms after resume", (double)(mv_now_ns() - t0) / 1e6);
	if (rc < 0)
		return cfail(c, rc, CKPT_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
			     strerror(-rc));
	for (size_t k = 0; k < c->im.n_o; k++)
		drop_dead_pieces(c, k);
	for (size_t i = 0; i < c->n; i++) {
		if (!c->p[i].died || c->p[i].img < 0)
			continue;
		img_proc_forget(iproc(c, i));
		if (proc_lost(c, &c->p[i]) < 0)
			return -ESRCH;
	}
	return 0;
}

/* ---- resuming, committing ----------------------------------------------- */

static void resume_all(struct ckpt *c)
{
	/* Stopped threads first: a vfork parent we could not stop moves
	 * only once its child runs again. */
	for (size_t i = 0; i < c->n; i++)
		ptrace_detach_stopped(&c->p[i].pt);
	uint64_t deadline = mv_now_ns() + 200 * 1000000ull;
	for (size_t i = 0; i < c->n; i++)
		ptrace_detach_rest(&c->p[i].pt, deadline);
	c->t_resumed = mv_now_ns();
	for (size_t i = 0; i < c->n; i++) {
		struct ptrace_proc *pp = &c->p[i].pt;
		if (!pp->first_interrupt_ns)
			continue;
		if (!c->pause_start || pp->first_interrupt_ns < c->pause_start)
			c->pause_start = pp->first_interrupt_ns;
		uint64_t end = MV_MAX(pp->last_detach_ns, pp->first_interrupt_ns);
		c->pause_end = MV_MAX(c->pause_end, end);
		if (c->p[i].img >= 0)
			iproc(c, i)->pause_ns = end - pp->first_interrupt_ns;
	}
}

static void fill_identity(struct ckpt *c)
{
	struct utsname u;
	img_new_id(c->im.id);
	snprintf(c->im.memvisor, sizeof(c->im.memvisor), "%s", MV_VERSION);
	if (uname(&u) == 0) {
		snprintf(c->im.kernel, sizeof(c->im.kernel), "%s %s", u.sysname, u.release);
		snprintf(c->im.arch, sizeof(c->im.arch), "%s", u.machine);
	}
	c->im.pages_size = c->off;
	c->im.pause_ns = c->pause_end - c->pause_start;
	img_totals(&c->im, &c->im.recorded);
}

static int commit(struct ckpt *c)
{
	job_progress(c->j, "syncing", c->done, c->total);
	uint64_t t0 = mv_now_ns();
	fill_identity(c);
	char err[IMG_ERR_LEN];
	/* Never commit an image we would refuse to read. */
	if (img_validate(&c->im, err, sizeof(err)) < 0)
		return cfail(c, -EINVAL, CTL_E_INTERNAL, "the image is inconsistent: %s", err);
	uint64_t t1 = mv_now_ns();
	size_t len;
	_cleanup_free_ char *text = img_manifest_write(&c->im, &len);
	uint64_t t2 = mv_now_ns();
	struct img_header h = {.version = IMG_VERSION,
			       .pages_size = c->off,
			       .data_bytes = c->im.recorded.data_bytes,
			       .manifest_size = len,
			       .manifest_crc = crc32c(text, len)};
	memcpy(h.id, c->im.id, sizeof(h.id));
	/* The pages' last fdatasync and the manifest's fsync run at once:
	 * on one journal they often share a commit and a device flush. */
	int rc = pagesw_seal(c->w, &h);
	if (rc < 0)
		return cfail(c, rc, CKPT_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
			     strerror(-rc));
	uint64_t t3 = mv_now_ns();
	rc = imgdir_write_file(&c->req->dir, IMG_MANIFEST, text, len);
	if (rc < 0)
		return cfail(c, rc, CKPT_E_IO, "writing %s/%s: %s", c->req->dir.dir, IMG_MANIFEST,
			     strerror(-rc));
	if ((rc = pagesw_sealed(c->w)) < 0)
		return cfail(c, rc, CKPT_E_IO, "syncing %s/%s: %s", c->req->dir.dir, IMG_PAGES,
			     strerror(-rc));
	uint64_t t4 = mv_now_ns();
	if ((rc = imgdir_commit(&c->req->dir, err, sizeof(err))) < 0)
		return cfail(c, rc, CKPT_E_IO, "%s", err);
	c->t_end = mv_now_ns();
	log_debug("checkpoint: commit: validate %.1f ms, manifest %.1f ms, drain+header %.1f ms, "
		  "manifest write and both syncs %.1f ms, rename+syncs %.1f ms",
		  (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6, (double)(t3 - t2) / 1e6,
		  (double)(t4 - t3) / 1e6, (double)(c->t_end - t4) / 1e6);
	return 0;
}

/* ---- the job ---------------------------------------------------------- */

static json_t *result_json(struct ckpt *c)
{
	json_t *procs = json_array();
	for (size_t i = 0; i < c->im.n_p; i++) {
		struct img_proc *p = &c->im.p[i];
		uint64_t bytes = 0;
		for (size_t k = 0; k < p->n_r; k++)
			for (size_t x = 0; x < p->r[k].ext.n; x++)
				bytes += img_extent_len(&p->r[k].ext.v[x]);
		json_array_append_new(
		    procs, json_pack("{s:i, s:s, s:I, s:I, s:I, s:I}", "pid", p->pid, "state",
				     p->gone ? "gone" : "dumped", "threads", (json_int_t)p->n_t,
				     "regions", (json_int_t)p->n_r, "bytes", (json_int_t)bytes,
				     "pause_ns", (json_int_t)p->pause_ns));
	}
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i].img < 0) /* gone before its layout was read */
			json_array_append_new(
			    procs, json_pack("{s:i, s:s}", "pid", c->p[i].pt.pid, "state", "gone"));
	const struct img_totals *t = &c->im.recorded;
	uint64_t busy = c->t_end - c->t_start;
	return json_pack(
	    "{s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
	    "s:I, s:I, s:f, s:b, s:s, s:s}",
	    "dir", c->req->dir.dir, "id", c->im.id, "processes", procs, "threads",
	    (json_int_t)t->threads, "regions", (json_int_t)t->regions, "extents",
	    (json_int_t)t->extents, "bytes", (json_int_t)t->data_bytes, "shared_bytes",
	    (json_int_t)t->shared_bytes, "committed", (json_int_t)t->committed, "pages_size",
	    (json_int_t)c->off, "pause_ns", (json_int_t)c->im.pause_ns, "prepare_ns",
	    (json_int_t)(c->pause_start - c->t_start), "stop_ns",
	    (json_int_t)(c->t_stopped - c->pause_start), "layout_ns",
	    (json_int_t)(c->t_planned - c->t_stopped), "copy_ns",
	    (json_int_t)(c->t_copied - c->t_planned), "sync_ns",
	    (json_int_t)(c->t_end - c->t_resumed), "elapsed_ns", (json_int_t)busy, "rate",
	    busy ? (double)t->data_bytes / ((double)busy / 1e9) : 0.0, "direct",
	    pagesw_direct(c->w), "checksum", crc32c_impl(), "layout_source",
	    c->layout_how ? c->layout_how : "");
}

static void init_procs(struct ckpt *c)
{
	struct checkpoint_req *req = c->req;
	for (size_t i = 0; i < req->n; i++) {
		add_proc(c, req->pids[i], req->pidfds[i], true);
		req->pidfds[i] = -1; /* the cproc has it */
	}
}

static void cleanup(struct ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->p[i].memfd >= 0)
			close(c->p[i].memfd);
		ptrace_proc_free(&c->p[i].pt);
	}
	free(c->p);
	for (size_t k = 0; k < c->im.n_o; k++) {
		if (c->obj[k].fd >= 0)
			close(c->obj[k].fd);
		free(c->obj[k].pc);
		free(c->obj[k].mapped);
	}
	free(c->obj);
	img_free(&c->im);
}

int checkpoint_run(struct job *j)
{
	struct ckpt c = {.j = j, .mv = j->mv, .req = j->ctx};
	c.t_start = mv_now_ns();
	img_init(&c.im);
	c.im.created_ns = mv_wall_ns();
	init_procs(&c);
	/* The buffers are made before the program stops: making them
	 * would otherwise add to the pause. */
	int rc = pagesw_open(c.req->dir.tmpfd, c.req->buffer, &c.w);
	if (rc < 0) {
		cfail(&c, rc, CKPT_E_IO, "creating %s/%s: %s", c.req->dir.dir, IMG_PAGES,
		      strerror(-rc));
		goto out_remove;
	}
	rc = stop_all(&c);
	if (rc == 0)
		rc = plan_all(&c);
	if (rc == 0)
		rc = copy_all(&c);
	resume_all(&c);
	pagesw_flush_now(c.w);
	if (rc == 0)
		rc = settle(&c);
	if (rc == 0)
		rc = commit(&c);
	if (rc < 0)
		goto out_remove;
	j->result = result_json(&c);
	pagesw_close(c.w);
	cleanup(&c);
	return 0;

out_remove:
	if (c.w)
		pagesw_close(c.w);
	imgdir_abort(&c.req->dir);
	job_fail(j, c.code ? c.code : CTL_E_INTERNAL, "%s", c.code ? c.msg : strerror(-rc));
	cleanup(&c);
	return rc < 0 ? rc : -EIO;
}

void checkpoint_req_free(void *ctx)
{
	struct checkpoint_req *req = ctx;
	if (!req)
		return;
	imgdir_abort(&req->dir);
	imgdir_free(&req->dir);
	for (size_t i = 0; i < req->n; i++)
		if (req->pidfds[i] >= 0)
			close(req->pidfds[i]);
	free(req->pids);
	free(req->pidfds);
	free(req);
}
