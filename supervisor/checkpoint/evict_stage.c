/* `checkpoint --evict`: the step between a durable image and the resume,
 * every thread still stopped (supervisor/checkpoint/job.h, supervisor/reload/evict.h). */
#include "supervisor/checkpoint/job.h"
#include "supervisor/checkpoint/held.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/backing.h"
#include "supervisor/kernel/features.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/reload/evict.h"
#include "supervisor/reload/shm.h"
#include "supervisor/supervise/mv.h"

#include <linux/kcmp.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A thread of p that waits in vfork (ptrace_classify_laggard). */
static bool in_vfork(const struct cproc *p)
{
	for (size_t k = 0; k < p->pt.n; k++)
		if (p->pt.t[k].state == PT_BLOCKED)
			return true;
	return false;
}

static bool same_mm(pid_t a, pid_t b)
{
	return a != b && syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0) == 0;
}

/* Why process i is not to be evicted, in why, or false. A vfork parent
 * sleeps in vfork until its child execs or exits, and the child runs on
 * the parent's memory until then: the parent has no thread that can run
 * an injected call, and an evict through the child would hand the
 * parent's memory to a userfaultfd made in a process that is about to
 * exec. Both keep their memory; the next evict, once the child has
 * exec'd, takes it. */
static bool vfork_skip(struct ckpt *c, size_t i, char *why, size_t len)
{
	struct cproc *p = &c->p[i];
	for (size_t q = 0; q < c->n; q++) {
		struct cproc *o = &c->p[q];
		if (q == i || o->pt.gone || !same_mm(p->pt.pid, o->pt.pid))
			continue;
		if (in_vfork(p)) {
			snprintf(why, len,
				 "waits in vfork for its child %d to exec or exit, and they share "
				 "this memory until then: left resident (evict again once the "
				 "child has exec'd)",
				 o->pt.pid);
			return true;
		}
		if (in_vfork(o)) {
			snprintf(
			    why, len,
			    "is a vfork child that has not exec'd yet: it runs on the memory of "
			    "its parent %d, which waits for it: left resident (evict again "
			    "once it has exec'd)",
			    o->pt.pid);
			return true;
		}
	}
	if (in_vfork(p) && !ptrace_stopped_count(&p->pt)) {
		snprintf(why, len,
			 "waits in vfork for a child that has not exec'd yet: no thread of it can "
			 "run a system call; left resident (evict again once the child has "
			 "exec'd)");
		return true;
	}
	return false;
}

static void skip(struct ckpt *c, size_t i, const char *why)
{
	if (!c->evict_skipped)
		c->evict_skipped = json_array();
	json_array_append_new(c->evict_skipped,
			      json_pack("{s:i, s:s}", "pid", c->p[i].pt.pid, "reason", why));
	log_info("evict: process %d %s", c->p[i].pt.pid, why);
}

/* ---- shared memory ---------------------------------------------------- */

/* Which shared-memory objects of the image the evict takes, and why the
 * others stay resident (docs/reload.md, "Shared memory"). */
struct shm_plan {
	struct ckpt *c;
	const struct held *held; /* by process (c->n) */
	size_t n;
	bool *evict, *failed, *skipped; /* skipped: by process (c->n) */
	uint64_t *regions;
	int *fd;
	char **why;
};

static void keep(struct shm_plan *sp, size_t k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void keep(struct shm_plan *sp, size_t k, const char *fmt, ...)
{
	sp->evict[k] = false;
	if (sp->why[k])
		return; /* the first reason stays */
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	sp->why[k] = xstrdup(buf);
}

static bool starts(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool ends(const char *s, const char *p)
{
	size_t a = strlen(s), b = strlen(p);
	return a >= b && strcmp(s + a - b, p) == 0;
}

static long tree_index(const struct ckpt *c, pid_t pid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i].pt.pid == pid && !c->p[i].pt.gone)
			return (long)i;
	return -1;
}

/* Only what no process can reach but through its mappings: shared
 * anonymous memory and memfds (unnamed, on tmpfs). A file with a name can
 * be opened and read(2), which userfaultfd does not see; a SysV segment
 * can be shmat(2)ed anew, a mapping no uffd of ours would hold. Opens the
 * object read-write through the first mapping of it (map_files). */
static void shm_kind(struct shm_plan *sp, size_t k)
{
	struct ckpt *c = sp->c;
	const struct img_object *io = &c->im.o[k];
	const char *path = io->path ? io->path : "";
	if (starts(path, "/SYSV")) {
		int err = features_uffd_sysv();
		if (err)
			keep(sp, k,
			     "a System V segment: the kernel refuses userfaultfd on its mappings "
			     "(UFFDIO_REGISTER: %s; it takes anonymous, shmem and hugetlb mappings "
			     "only)",
			     strerror(err));
		else
			keep(sp, k,
			     "a System V segment: a shmat(2) after the evict would map it with no "
			     "userfaultfd registration and read zeros");
		return;
	}
	if (!(starts(path, "/dev/zero") || starts(path, "/memfd:")) || !ends(path, " (deleted)")) {
		keep(sp, k,
		     "a shared file with a name: read(2) and write(2) through it would bypass "
		     "userfaultfd");
		return;
	}
	if (io->coverage != IMG_COVER_WHOLE) {
		keep(sp, k,
		     "the image holds only the pages that were mapped (its file could not "
		     "be opened)");
		return;
	}
	for (size_t i = 0; i < c->n && sp->fd[k] < 0; i++) {
		struct img_proc *ip = c->p[i].img >= 0 ? ckpt_iproc(c, i) : NULL;
		for (size_t r = 0; ip && r < ip->n_r && sp->fd[k] < 0; r++) {
			const struct img_region *g = &ip->r[r];
			if (g->content != IMG_SHARED || g->object != (long)k)
				continue;
			int fd = backing_open_rw(c->p[i].tid, g->start, g->end,
						 makedev(io->dev_major, io->dev_minor), io->inode);
			if (fd < 0) {
				keep(sp, k,
				     "it cannot be opened for writing through /proc/%d/map_files "
				     "(%s; that needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE)",
				     c->p[i].pt.pid, strerror(-fd));
				return;
			}
			sp->fd[k] = fd;
		}
	}
	struct statfs fs;
	if (sp->fd[k] < 0)
		keep(sp, k, "no process of the image maps it");
	else if (fstatfs(sp->fd[k], &fs) < 0 || fs.f_type != TMPFS_MAGIC)
		keep(sp, k, "it is not on tmpfs (shmem): no userfaultfd missing mode for it");
}

static void shm_user(void *arg, size_t k, pid_t pid, enum backing_use how)
{
	struct shm_plan *sp = arg;
	if (how == BACKING_UNKNOWN) {
		for (size_t q = 0; q < sp->n; q++)
			if (sp->evict[q])
				keep(sp, q,
				     "process %d's descriptors cannot be read: it may hold it open",
				     pid);
		return;
	}
	if (how == BACKING_MAPS_UNREAD) {
		/* Its descriptors show it holds none of ours. A process
		 * outside the tree reaches a memfd or shared anonymous memory
		 * of the tree only through a descriptor (SCM_RIGHTS,
		 * pidfd_getfd, /proc/PID/fd or map_files of a tree process):
		 * to map one and close it again is the case not covered
		 * (docs/reload.md). */
		log_debug("evict: process %d's maps cannot be read (it has capabilities memvisor "
			  "lacks); it holds no descriptor of the shared memory",
			  pid);
		return;
	}
	if (!sp->evict[k])
		return;
	long i = tree_index(sp->c, pid);
	if (how == BACKING_FD)
		keep(sp, k,
		     "process %d holds it open as a file descriptor: read(2), write(2) or "
		     "sendfile(2) through it would bypass userfaultfd",
		     pid);
	else if (i < 0)
		keep(sp, k, "process %d, outside the supervised tree, maps it", pid);
	else if (sp->skipped[i] || sp->c->p[i].img < 0 || sp->c->p[i].died)
		keep(sp, k, "process %d maps it and is not evicted", pid);
}

/* Objects the kernel reaches without a fault: a file in an io_uring's
 * registered-file table (read and write through the ring bypass
 * userfaultfd, and a write into a punched page makes a zeroed page of
 * it), and a mapping holding memory the kernel writes at exit or pins
 * (a process-shared robust mutex, an io_uring buffer). */
static void shm_held(struct shm_plan *sp)
{
	struct ckpt *c = sp->c;
	for (size_t i = 0; i < c->n; i++) {
		const struct held *h = &sp->held[i];
		for (size_t k = 0; k < sp->n; k++)
			if (sp->evict[k] && c->im.o[k].path && held_has_file(h, c->im.o[k].path))
				keep(sp, k,
				     "it is in the registered-file table of an io_uring of process "
				     "%d: reads and writes through the ring bypass userfaultfd",
				     c->p[i].pt.pid);
		struct img_proc *ip = c->p[i].img >= 0 ? ckpt_iproc(c, i) : NULL;
		for (size_t r = 0; ip && r < ip->n_r; r++) {
			const struct img_region *g = &ip->r[r];
			if (g->content != IMG_SHARED || g->object < 0 ||
			    (size_t)g->object >= sp->n || !sp->evict[g->object] ||
			    !held_overlaps(h, g->start, g->end))
				continue;
			keep(sp, (size_t)g->object,
			     "process %d keeps memory the kernel writes without a fault in it (a "
			     "robust mutex, an io_uring buffer)",
			     c->p[i].pt.pid);
		}
	}
}

/* Decide, before any process is evicted, which objects are taken: the
 * right kind, and mapped by evicted processes of the tree only, open as
 * a descriptor by no one (every process on the system is looked at). */
static void shm_plan(struct ckpt *c, struct shm_plan *sp, bool live)
{
	sp->c = c;
	sp->n = c->im.n_o;
	size_t n = MV_MAX(sp->n, 1);
	sp->evict = xcalloc(n, sizeof(bool));
	sp->failed = xcalloc(n, sizeof(bool));
	sp->regions = xcalloc(n, sizeof(uint64_t));
	sp->fd = xmalloc(n * sizeof(int));
	sp->why = xcalloc(n, sizeof(char *));
	size_t m = 0;
	for (size_t k = 0; k < sp->n; k++) {
		sp->fd[k] = -1;
		sp->evict[k] = true;
		if (live)
			keep(sp, k,
			     "--live: the program ran since the image's instant, and the image "
			     "does not hold what it wrote there since");
		else
			shm_kind(sp, k);
		m += sp->evict[k];
	}
	if (!m)
		return;
	shm_held(sp);
	struct backing_id *ids = xcalloc(sp->n, sizeof(*ids));
	for (size_t k = 0; k < sp->n; k++)
		ids[k] = (struct backing_id){makedev(c->im.o[k].dev_major, c->im.o[k].dev_minor),
					     c->im.o[k].inode};
	int rc = backing_users(ids, sp->n, c->mv->feat.procmap_query, shm_user, sp);
	free(ids);
	for (size_t k = 0; rc < 0 && k < sp->n; k++)
		if (sp->evict[k])
			keep(sp, k, "the processes that use it cannot be listed: %s",
			     strerror(-rc));
}

/* Process ip, which maps objects of the plan, is not evicted after all:
 * its mappings are not registered, so those objects stay resident. */
static void shm_not_evicted(struct shm_plan *sp, const struct img_proc *ip)
{
	for (size_t r = 0; r < ip->n_r; r++)
		if (ip->r[r].content == IMG_SHARED && ip->r[r].object >= 0 &&
		    (size_t)ip->r[r].object < sp->n)
			sp->failed[ip->r[r].object] = true;
}

/* Every mapping is registered: drop the pages. The object is served
 * (evict_add_object) before its punch, whatever the punch does. */
static void shm_evict(struct ckpt *c, struct shm_plan *sp, size_t k, struct evict_stats *st)
{
	if (sp->failed[k]) {
		keep(sp, k, "a mapping of it could not be registered with userfaultfd");
		st->shared_regions += sp->regions[k];
		return;
	}
	struct evobj *o;
	struct mv_err e = {0};
	int rc = evshm_new(&c->im, k, sp->fd[k], c->req->dir.dir, &o, &e);
	sp->fd[k] = -1; /* taken over, even on failure */
	if (rc < 0) {
		keep(sp, k, "%s", e.msg);
		st->shared_regions += sp->regions[k];
		return;
	}
	evict_add_object(c->mv->evict, o);
	rc = evshm_punch(o);
	if (rc < 0) {
		keep(sp, k, "punching its pages out: %s", strerror(-rc));
		st->shared_regions += sp->regions[k];
	} else {
		st->shared_objects++;
		st->shared_bytes += evshm_bytes(o);
		st->shared_evicted_regions += sp->regions[k];
	}
	evshm_put(o);
}

static void shm_done(struct ckpt *c, struct shm_plan *sp)
{
	for (size_t k = 0; k < sp->n; k++) {
		if (sp->fd[k] >= 0)
			close(sp->fd[k]);
		if (!sp->why[k])
			continue;
		if (!c->evict_shared)
			c->evict_shared = json_array();
		const char *path = c->im.o[k].path ? c->im.o[k].path : "";
		json_array_append_new(
		    c->evict_shared, json_pack("{s:s, s:s}", "object", path, "reason", sp->why[k]));
		log_info("evict: shared memory %s stays resident: %s", path, sp->why[k]);
		free(sp->why[k]);
	}
	free(sp->evict);
	free(sp->failed);
	free(sp->regions);
	free(sp->fd);
	free(sp->why);
	free(sp->skipped);
}

/* Runs of pages dropped in one region at most: each is an injected
 * madvise (about 46 us here), and a tree whose shared and private pages
 * alternate page by page took 3 s to evict 256 MiB (65,536 runs). */
#define MAX_RUNS 1024

static int cmp_len_desc(const void *a, const void *b)
{
	const struct as_range *x = a, *y = b;
	uint64_t lx = x->end - x->start, ly = y->end - y->start;
	return lx > ly ? -1 : lx < ly ? 1 : x->start < y->start ? -1 : x->start > y->start;
}

/* Keep in x the pages of its MAX_RUNS longest runs of adjacent extents;
 * returns the bytes left out (they stay resident). */
static uint64_t cap_runs(struct img_extents *x)
{
	struct as_range *runs = NULL;
	size_t n = 0;
	for (size_t i = 0; i < x->n;) {
		uint64_t start = x->v[i].addr, end = start + img_extent_len(&x->v[i]);
		for (i++; i < x->n && x->v[i].addr == end; i++)
			end += img_extent_len(&x->v[i]);
		runs = xrealloc(runs, (n + 1) * sizeof(*runs));
		runs[n++] = (struct as_range){start, end};
	}
	uint64_t left = 0;
	if (n > MAX_RUNS) {
		mv_qsort(runs, n, sizeof(*runs), cmp_len_desc);
		for (size_t k = MAX_RUNS; k < n; k++)
			left += runs[k].end - runs[k].start;
		mv_qsort(runs, MAX_RUNS, sizeof(*runs), as_range_cmp);
		struct img_extents kept = {0};
		img_extents_within(x, runs, MAX_RUNS, &kept);
		free(x->v);
		*x = kept;
	}
	free(runs);
	return left;
}

/* Runs of x's pages that this process maps alone. Only where the image
 * has pages: a region of terabytes reserved with a few pages written is
 * read in a few entries, not one per page of the reservation (a 64 TiB
 * region took 28 s). Extents less than GAP pages apart are read in one
 * call. */
#define GAP 64
static int exclusive_runs(struct pagemap *pm, const struct img_extents *x, struct as_range **runs,
			  size_t *n, size_t *cap)
{
	for (size_t i = 0; i < x->n;) {
		uint64_t start = x->v[i].addr, end = start + img_extent_len(&x->v[i]);
		for (i++; i < x->n && x->v[i].addr <= end + GAP * 4096ull; i++)
			end = x->v[i].addr + img_extent_len(&x->v[i]);
		int rc = pagemap_exclusive_runs(pm, start, end, runs, n, cap);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* src (process i's image record, or a view of it) limited to the pages
 * this process maps alone, in *out (ckpt_live_view_free) and *whole (per
 * region: may be dropped whole; only when src is the record itself and
 * nothing in the region is shared). A page shared copy-on-write with
 * another process after a fork stays: a reload gives each process a copy
 * of its own (UFFDIO_COPY allocates), so evicting it would multiply the
 * tree's memory by the number of processes sharing it; resident, it is
 * counted once (docs/reload.md, "Fork trees"). A region whose pages to
 * drop are scattered in more than MAX_RUNS runs, and that is not dropped
 * whole, drops its longest ones. */
static int exclusive_view(struct ckpt *c, size_t i, const struct img_proc *src, bool is_record,
			  const struct held *h, struct img_proc *out, bool **whole,
			  struct evict_stats *st)
{
	struct pagemap pm;
	int rc = pagemap_open(c->p[i].pt.pid, false, &pm);
	if (rc < 0)
		return rc;
	struct as_range *hv;
	size_t hn = held_merged(h, &hv);
	*out = *src;
	out->r = xcalloc(MV_MAX(src->n_r, 1), sizeof(*out->r));
	out->cap_r = MV_MAX(src->n_r, 1);
	*whole = xcalloc(MV_MAX(src->n_r, 1), sizeof(**whole));
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	for (size_t k = 0; k < src->n_r && rc == 0; k++) {
		const struct img_region *r = &src->r[k];
		out->r[k] = *r;
		out->r[k].ext = (struct img_extents){0};
		if (!evict_region_evictable(r))
			continue;
		n = 0;
		rc = exclusive_runs(&pm, &r->ext, &runs, &n, &cap);
		img_extents_within(&r->ext, runs, n, &out->r[k].ext);
		uint64_t total = img_extents_bytes(&r->ext),
			 mine = img_extents_bytes(&out->r[k].ext);
		/* Less what the kernel holds or touches on the program's
		 * behalf (held.h): it stays resident. */
		if (hn && held_overlaps(h, r->start, r->end)) {
			struct img_extents x = out->r[k].ext;
			out->r[k].ext = (struct img_extents){0};
			n = 0;
			img_ranges_subtract(hv, hn, r->start, r->end, &runs, &n, &cap);
			img_extents_within(&x, runs, n, &out->r[k].ext);
			free(x.v);
		}
		uint64_t left = img_extents_bytes(&out->r[k].ext);
		(*whole)[k] = is_record && left == total;
		st->cow_bytes += total - mine;
		st->kernel_bytes += mine - left;
		/* A region dropped whole is one madvise however scattered its
		 * pages: capped, it would drop pages the map no longer owes
		 * (zeros). */
		if (!(*whole)[k])
			st->scattered_bytes += cap_runs(&out->r[k].ext);
	}
	free(runs);
	free(hv);
	pagemap_close(&pm);
	if (rc < 0) {
		ckpt_live_view_free(out);
		free(*whole);
		*whole = NULL;
	}
	return rc;
}

/* A process the evict would take: held, in the image, alive. */
static bool evictable_proc(struct ckpt *c, size_t i)
{
	struct cproc *p = &c->p[i];
	return !p->pt.gone && p->img >= 0 && !p->died && !ckpt_proc_dead(p);
}

static void held_free_all(struct held *held, size_t n)
{
	for (size_t i = 0; i < n; i++)
		held_free(&held[i]);
	free(held);
}

/* Evict every process we hold; views (or NULL: each process's image
 * record) limit each to the pages it may lose, and each is limited again
 * to the pages it maps alone (exclusive_view). */
static int evict_each(struct ckpt *c, struct evict_stats *st, const struct img_proc *views,
		      const bool *have)
{
	job_progress(c->j, "evicting", c->done, c->total);
	struct shm_plan sp = {0};
	sp.skipped = xcalloc(MV_MAX(c->n, 1), sizeof(bool));
	char(*why)[512] = xcalloc(MV_MAX(c->n, 1), sizeof(*why));
	struct held *held = xcalloc(MV_MAX(c->n, 1), sizeof(*held));
	for (size_t i = 0; i < c->n; i++) {
		sp.skipped[i] = vfork_skip(c, i, why[i], sizeof(why[i])) || (views && !have[i]);
		if (sp.skipped[i] || !evictable_proc(c, i))
			continue;
		/* Before anything is registered: the scan injects calls. */
		int rc = held_scan_stopped(c, i, true, &held[i]);
		if (rc == 0 && held[i].unknown[0]) {
			snprintf(why[i], sizeof(why[i]), "%s", held[i].unknown);
			sp.skipped[i] = true;
		}
	}
	sp.held = held;
	shm_plan(c, &sp, views != NULL);
	struct evict_shm shm = {sp.n, sp.evict, sp.failed, sp.regions};
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (!evictable_proc(c, i))
			continue;
		if (views && !have[i])
			continue;
		if (sp.skipped[i]) {
			skip(c, i, why[i]);
			continue;
		}
		struct img_proc v;
		bool *whole;
		int rc = exclusive_view(c, i, views ? &views[i] : ckpt_iproc(c, i), !views,
					&held[i], &v, &whole, st);
		if (rc < 0) {
			char err[512];
			snprintf(err, sizeof(err),
				 "reading which pages it shares (pagemap): %s: left resident",
				 strerror(-rc));
			skip(c, i, err);
			shm_not_evicted(&sp, ckpt_iproc(c, i));
			continue;
		}
		struct mv_err e = {0};
		rc = evict_proc_stopped(c->mv->evict, &p->pt, &c->im, &v, c->req->dir.dir, whole,
					&shm, st, &e);
		ckpt_live_view_free(&v);
		free(whole);
		if (rc == 0) {
			if (!c->evict_kernel)
				c->evict_kernel = json_array();
			held_json(&held[i], p->pt.pid, c->evict_kernel);
		}
		if (rc < 0) {
			free(why);
			held_free_all(held, c->n);
			shm_done(c, &sp); /* nothing of shared memory was dropped */
			return ckpt_fail(c, rc, MV_E_EVICT_FAILED,
					 "%s; the image at %s is complete and the program keeps "
					 "its memory",
					 e.msg, c->req->dir.dir);
		}
	}
	free(why);
	held_free_all(held, c->n);
	/* Every process is evicted, and still stopped: drop the objects
	 * whose every mapping is registered. */
	for (size_t k = 0; k < sp.n; k++)
		if (sp.evict[k])
			shm_evict(c, &sp, k, st);
	shm_done(c, &sp);
	evict_drop_idle(c->mv->evict, c->im.id);
	log_info("evict: %llu regions, %llu bytes dropped (%llu left resident, %llu bytes shared "
		 "copy-on-write kept); shared memory: %llu objects, %llu bytes dropped (%llu "
		 "regions left resident)",
		 (unsigned long long)st->regions, (unsigned long long)st->bytes,
		 (unsigned long long)st->kept_regions, (unsigned long long)st->cow_bytes,
		 (unsigned long long)st->shared_objects, (unsigned long long)st->shared_bytes,
		 (unsigned long long)st->shared_regions);
	return 0;
}

int ckpt_evict_all(struct ckpt *c, struct evict_stats *st)
{
	return evict_each(c, st, NULL, NULL);
}

int ckpt_evict_live(struct ckpt *c, struct evict_stats *st, struct live_evict_times *t,
		    uint64_t *clean, uint64_t *written)
{
	uint64_t t0 = mv_now_ns();
	/* The program ran since the image's instant: stop it again, every
	 * thread and every process it forked meanwhile. A process that
	 * exited since is recorded, not a failure: the image is complete. */
	for (size_t i = 0; i < c->n; i++) {
		ptrace_proc_forget(&c->p[i].pt);
		c->p[i].requested = false;
	}
	c->stopped_again = true; /* the image's pause times stay the first's */
	job_progress(c->j, "stopping", c->done, c->total);
	int rc = ckpt_stop_all(c);
	ckpt_live_quiesce(c);
	uint64_t t1 = mv_now_ns();
	struct img_proc *views = xcalloc(MV_MAX(c->n, 1), sizeof(*views));
	bool *have = xcalloc(MV_MAX(c->n, 1), sizeof(*have));
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (p->pt.gone || p->img < 0 || p->died || ckpt_proc_dead(p))
			continue;
		int v = ckpt_live_evict_view(c, i, &views[i], clean, written);
		have[i] = v == 0;
		if (v == -ENOENT)
			skip(c, i,
			     "was copied during the pause, so what it wrote since is not known: "
			     "left resident");
		else if (v < 0 && v != -ESRCH) {
			char why[160];
			snprintf(why, sizeof(why),
				 "reading which pages it wrote since (pagemap): %s: left resident",
				 strerror(-v));
			skip(c, i, why);
		}
	}
	uint64_t t2 = mv_now_ns();
	/* Closing the uffds lifts the write protection: nothing runs. */
	ckpt_live_stop(c);
	uint64_t t3 = mv_now_ns();
	if (rc == 0)
		rc = evict_each(c, st, views, have);
	*t = (struct live_evict_times){.stop_ns = t1 - t0,
				       .scan_ns = t2 - t1,
				       .unprotect_ns = t3 - t2,
				       .drop_ns = mv_now_ns() - t3};
	for (size_t i = 0; i < c->n; i++)
		if (have[i])
			ckpt_live_view_free(&views[i]);
	free(views);
	free(have);
	return rc;
}
