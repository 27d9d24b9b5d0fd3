/* Evicting a stopped process: its userfaultfd, the map of what the image
 * owes it, register and drop (supervisor/reload/evict.h). */
#include "supervisor/reload/space.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

bool evict_region_evictable(const struct img_region *r)
{
	return r->content == IMG_PRIVATE && !r->shared && r->ext.n &&
	       (r->kind == AS_ANON || r->kind == AS_HEAP || r->kind == AS_STACK);
}

/* The image map of ip's evictable regions, with their pages' checksums
 * (from im). */
static void build_map(struct evspace *s, const struct img *im, const struct img_proc *ip)
{
	size_t n = 0, pages = 0;
	for (size_t k = 0; k < ip->n_r; k++)
		if (evict_region_evictable(&ip->r[k]))
			for (size_t x = 0; x < ip->r[k].ext.n; x++, n++)
				pages += ip->r[k].ext.v[x].pages;
	s->sums = xmalloc(MV_MAX(pages, 1) * sizeof(*s->sums));
	s->ext = xcalloc(MV_MAX(n, 1), sizeof(*s->ext));
	s->ch = xcalloc(MV_MAX(n, 1), sizeof(*s->ch));
	s->cap_ch = MV_MAX(n, 1);
	for (size_t k = 0; k < ip->n_r; k++) {
		if (!evict_region_evictable(&ip->r[k]))
			continue;
		for (size_t x = 0; x < ip->r[k].ext.n; x++) {
			const struct img_extent *e = &ip->r[k].ext.v[x];
			s->ext[s->n_ext] =
			    (struct ev_ext){e->off, e->pages, (uint32_t)s->n_sums, {0}};
			for (uint32_t p = 0; p < e->pages; p++)
				s->sums[s->n_sums++] = img_page_sum(im, e->off + (uint64_t)p * PG);
			s->ch[s->n_ch++] =
			    (struct ev_chunk){e->addr, (uint32_t)s->n_ext, 0, e->pages};
			s->n_ext++;
		}
	}
	chunks_sort(s);
}

static int setup_space(struct evspace *s, struct ptrace_proc *pp, struct remote *r, const char *dir,
		       const char *id, struct mv_err *err)
{
	int rc = remote_userfaultfd_stopped(r, pp->pidfd, &s->uffd, err);
	if (rc < 0)
		return rc;
	rc =
	    uffd_api_best(s->uffd, UFFD_EVICT_FEATURES,
			  UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_POISON | UFFD_FEATURE_MISSING_SHMEM,
			  &s->features);
	if (rc < 0)
		return mv_err_set(
		    err, rc, NULL,
		    "userfaultfd of process %d: UFFDIO_API: %s (features missing: %#llx)", pp->pid,
		    strerror(-rc), (unsigned long long)s->features);
	/* Before anything is dropped: should we die, the reaper keeps the
	 * ranges registered until the program is dead (reaper.h). */
	rc = space_keep_uffd(s);
	if (rc < 0 && rc != -ENOTCONN)
		return mv_err_set(err, rc, NULL,
				  "handing process %d's userfaultfd to the reaper: %s", pp->pid,
				  strerror(-rc));
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, IMG_PAGES);
	/* A regular file only: the program is stopped while we open it. */
	s->pagesfd = mv_open_regular_at(AT_FDCWD, path, 0, path, NULL, err);
	if (s->pagesfd < 0)
		return s->pagesfd;
	/* The loader reads what the page cache lacks straight into its
	 * buffer (the image was written with O_DIRECT, so usually all of
	 * it): half the CPU of a buffered read, which copies twice. The
	 * same file, opened again through our descriptor. */
	s->directfd = mv_reopen_direct(s->pagesfd);
	if (s->stopfd < 0)
		return mv_err_set(err, -EMFILE, NULL, "eventfd: %s", strerror(EMFILE));
	s->pid = s->tgid = pp->pid;
	s->pidfd = fcntl(pp->pidfd, F_DUPFD_CLOEXEC, 0);
	s->probe = r->vdso_start;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->dir = xstrdup(dir);
	return 0;
}

/* Register, then drop: a region whose registration fails keeps its pages;
 * one whose madvise fails stays registered with its pages present (the
 * pages it lacks are not in the image either: zeros are right). */
static int drop_pages(struct remote *r, uint64_t start, uint64_t len)
{
	long a[6] = {(long)start, (long)len, MADV_DONTNEED}, ret = 0;
	int rc = remote_syscall_stopped(r, SYS_madvise, a, &ret);
	return rc < 0 ? rc : ret < 0 ? (int)ret : 0;
}

/* The extents of g, adjacent ones together. */
static int drop_extents(struct remote *r, const struct img_region *g, uint64_t *failed_at)
{
	for (size_t x = 0; x < g->ext.n;) {
		uint64_t start = g->ext.v[x].addr, end = start + img_extent_len(&g->ext.v[x]);
		for (x++; x < g->ext.n && g->ext.v[x].addr == end; x++)
			end += img_extent_len(&g->ext.v[x]);
		int rc = drop_pages(r, start, end - start);
		if (rc < 0) {
			*failed_at = start;
			return rc;
		}
	}
	return 0;
}

/* Region g stays resident: say why in the evict's result (st->kept). */
static void keep_region(struct evspace *s, const struct img_region *g, struct evict_stats *st,
			const char *why)
{
	char a[32], b[32];
	snprintf(a, sizeof(a), "%#llx", (unsigned long long)g->start);
	snprintf(b, sizeof(b), "%#llx", (unsigned long long)g->end);
	if (!st->kept)
		st->kept = json_array();
	json_array_append_new(st->kept, json_pack("{s:i, s:s, s:s, s:s}", "pid", s->pid, "start", a,
						  "end", b, "reason", why));
	st->kept_regions++;
}

/* Where g's huge pages may be: its runs of adjacent extents that hold a
 * whole aligned 2 MiB (a huge page is present whole, so its 512 pages
 * are one run; shorter runs cannot hold one, and are not scanned). */
static size_t thp_where(const struct img_region *g, struct as_range **out)
{
	const uint64_t huge = 2ull << 20;
	size_t n = 0, cap = 0;
	*out = NULL;
	for (size_t x = 0; x < g->ext.n;) {
		uint64_t start = g->ext.v[x].addr, end = start + img_extent_len(&g->ext.v[x]);
		for (x++; x < g->ext.n && g->ext.v[x].addr == end; x++)
			end += img_extent_len(&g->ext.v[x]);
		if (((start + huge - 1) & ~(huge - 1)) + huge > end)
			continue;
		if (n == cap)
			*out = xrealloc(*out, (cap = cap ? cap * 2 : 16) * sizeof(**out));
		(*out)[n++] = (struct as_range){start, end};
	}
	return n;
}

static void evict_region(struct evspace *s, struct remote *r, const struct img_region *g,
			 bool whole, struct evict_stats *st)
{
	uint64_t len = g->end - g->start;
	int rc = uffd_register(s->uffd, g->start, len);
	if (rc < 0) {
		/* Its pages stay, so the image owes none of them: the map
		 * must not cover a range our uffd does not hold. EBUSY: a
		 * userfaultfd of the program's own holds it, and the kernel
		 * lets any uffd of the mm copy into a registered vma
		 * (mm/userfaultfd.c validate_dst_vma checks that the vma has
		 * a context, not whose). The loader copied the image's pages
		 * into the range once the program had dropped them itself
		 * and registered it again (a madvise we hear nothing of):
		 * its writes since the evict were lost (issue 24). */
		pthread_rwlock_wrlock(&s->lay);
		pthread_mutex_lock(&s->mu);
		chunks_drop_locked(s, g->start, g->end);
		pthread_mutex_unlock(&s->mu);
		pthread_rwlock_unlock(&s->lay);
		log_job_warn("evict: process %d: registering %#llx-%#llx: %s; left resident",
			     s->pid, (unsigned long long)g->start, (unsigned long long)g->end,
			     strerror(-rc));
		char why[320];
		if (rc == -EBUSY)
			snprintf(
			    why, sizeof(why),
			    "registered with a userfaultfd of the program's (UFFDIO_REGISTER: %s): "
			    "whoever reads that userfaultfd serves its faults, so it stays "
			    "resident and memvisor never installs a page there",
			    strerror(-rc));
		else
			snprintf(why, sizeof(why), "UFFDIO_REGISTER: %s: left resident",
				 strerror(-rc));
		keep_region(s, g, st, why);
		return;
	}
	/* Only a region we hold: the reload unregisters and collapses its
	 * huge runs (thp.h). */
	struct as_range *where = NULL;
	size_t nw = thp_where(g, &where);
	pthread_mutex_lock(&s->mu);
	int trc = evict_thp_note(&s->thp, s->pid, where, nw);
	free(where);
	if (trc < 0)
		log_debug("evict: process %d: no huge page scan of %#llx-%#llx", s->pid,
			  (unsigned long long)g->start, (unsigned long long)g->end);
	pthread_mutex_unlock(&s->mu);
	uint64_t at = g->start;
	rc = whole ? drop_pages(r, g->start, len) : drop_extents(r, g, &at);
	if (rc < 0) {
		/* What was dropped before is in the map, and served. */
		log_job_warn(
		    "evict: process %d: madvise(DONTNEED) of %#llx-%#llx from %#llx: %s; left "
		    "resident",
		    s->pid, (unsigned long long)g->start, (unsigned long long)g->end,
		    (unsigned long long)at, strerror(-rc));
		char why[160];
		snprintf(why, sizeof(why),
			 "madvise(MADV_DONTNEED) from %#llx: %s: the pages from there on stay "
			 "resident",
			 (unsigned long long)at, strerror(-rc));
		keep_region(s, g, st, why);
		return;
	}
	st->regions++;
	for (size_t x = 0; x < g->ext.n; x++)
		st->bytes += img_extent_len(&g->ext.v[x]);
}

/* Register a mapping of shared object g->object (in shm's plan) in
 * missing mode: the object's pages are punched only once every mapping
 * of it is registered (evict_stage.c), so a failure here leaves the
 * object resident (failed[k]); a registered mapping whose pages stay
 * present takes no fault but for a hole, which is served as zeros as
 * the kernel would. Faults are told the object and offset by the
 * process's region at the address (serve_shared), which needs the
 * faulting thread's id (THREAD_ID: a fork child's pid) and shmem
 * support (MISSING_SHMEM, Linux 4.11). */
static void register_shared(struct evspace *s, const struct img_region *g,
			    const struct evict_shm *shm, struct evict_stats *st)
{
	size_t k = (size_t)g->object;
	if (!shm || g->object < 0 || k >= shm->n || !shm->evict[k]) {
		st->shared_regions++;
		return;
	}
	uint64_t need = UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_THREAD_ID;
	int rc = (s->features & need) == need ? uffd_register(s->uffd, g->start, g->end - g->start)
					      : -EOPNOTSUPP;
	if (rc < 0) {
		log_job_warn(
		    "evict: process %d: registering the shared mapping %#llx-%#llx: %s; its "
		    "object stays resident",
		    s->pid, (unsigned long long)g->start, (unsigned long long)g->end,
		    strerror(-rc));
		shm->failed[k] = true;
		st->shared_regions++;
		return;
	}
	s->shared = true;
	shm->regions[k]++;
}

int evict_proc_stopped(struct evict *reg, struct ptrace_proc *pp, const struct img *im,
		       const struct img_proc *ip, const char *dir, const bool *whole,
		       const struct evict_shm *shm, struct evict_stats *st, struct mv_err *err)
{
	struct remote r;
	int rc = remote_open_stopped(&r, pp, &reg->mv->injecting);
	if (rc < 0)
		return mv_err_set(err, rc, NULL,
				  "process %d: none of its threads is stopped (a vfork parent "
				  "waits until its child execs or exits), so no system call can "
				  "be injected into it: %s",
				  pp->pid, strerror(-rc));
	struct evspace *s = space_new(reg);
	rc = setup_space(s, pp, &r, dir, im->id, err);
	if (rc < 0) {
		evict_put(s);
		return rc;
	}
	build_map(s, im, ip);
	for (size_t i = 0; i < s->n_ch; i++)
		s->owed += (uint64_t)s->ch[i].n * PG;
	s->evicting = true;
	if ((rc = workers_start(s)) < 0) {
		evict_put(s);
		return mv_err_set(err, rc, NULL, "starting the fault workers: %s", strerror(-rc));
	}
	space_link(s);
	uint64_t regions_before = st->regions, bytes_before = st->bytes;
	for (size_t k = 0; k < ip->n_r; k++) {
		if (evict_region_evictable(&ip->r[k]))
			evict_region(s, &r, &ip->r[k], !whole || whole[k], st);
		else if (ip->r[k].content == IMG_SHARED)
			register_shared(s, &ip->r[k], shm, st);
	}
	/* Each injected madvise returned once a worker had read its REMOVE
	 * event (fs/userfaultfd.c userfaultfd_remove waits for the read),
	 * and a worker holds s->lay for writing from its read until the
	 * events are applied: once we hold it, every REMOVE of ours has been
	 * recognised as ours. Only then may a REMOVE be the program's. */
	pthread_rwlock_wrlock(&s->lay);
	s->evicting = false;
	pthread_rwlock_unlock(&s->lay);
	pthread_mutex_lock(&reg->mu);
	reg->evicted += st->bytes - bytes_before;
	pthread_mutex_unlock(&reg->mu);
	if (st->regions == regions_before && !s->shared)
		space_stop(s); /* nothing dropped: nothing to serve */
	evict_put(s);
	return 0;
}
