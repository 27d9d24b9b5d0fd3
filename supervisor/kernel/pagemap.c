#include "supervisor/kernel/pagemap.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PAGE		  4096ull
#define PM_PRESENT	  (1ull << 63)
#define PM_SWAPPED	  (1ull << 62)
#define PM_FILE		  (1ull << 61)
#define PM_UFFD_WP	  (1ull << 57)	     /* Linux 5.19 */
#define PM_MMAP_EXCLUSIVE (1ull << 56)	     /* Linux 4.2 */
#define PM_PFN		  ((1ull << 55) - 1) /* 0 without CAP_SYS_ADMIN (Linux 4.2) */

int pagemap_open(pid_t pid, bool try_scan, struct pagemap *pm)
{
	*pm = (struct pagemap){.fd = procfs_open(pid, "pagemap", O_RDONLY)};
	if (pm->fd < 0) {
		int rc = pm->fd;
		pm->fd = -1;
		return rc;
	}
	pm->scan = try_scan;
	return 0;
}

/* No prefetched walk: pagemap_runs asks the kernel again. */
static void prefetch_forget(struct pagemap *pm)
{
	free(pm->pre);
	pm->pre = NULL;
	pm->n_pre = 0;
	pm->pre_start = pm->pre_end = 0;
}

void pagemap_close(struct pagemap *pm)
{
	if (pm->fd >= 0)
		close(pm->fd);
	pm->fd = -1;
	prefetch_forget(pm);
}

static void add_run(struct as_range **runs, size_t *n, size_t *cap, uint64_t s, uint64_t e)
{
	if (*n && (*runs)[*n - 1].end == s) {
		(*runs)[*n - 1].end = e;
		return;
	}
	if (*n == *cap)
		*runs = xrealloc(*runs, (*cap = *cap ? *cap * 2 : 256) * sizeof(**runs));
	(*runs)[(*n)++] = (struct as_range){s, e};
}

/* One PAGEMAP_SCAN of [at, end): the regions in vec (got, returned),
 * with the categories of ret, and in *next where the next call starts
 * (<= at: the range is done). first: one matching page will do. */
static int scan_all(struct pagemap *pm, uint64_t at, uint64_t end, uint64_t all, uint64_t anyof,
		    uint64_t none, uint64_t ret, bool first, struct page_region *vec, size_t len,
		    uint64_t *next)
{
	/* A page must have every category of category_mask after the
	 * inversion: inverting the excluded ones asks for their absence. */
	struct pm_scan_arg a = {
	    .size = sizeof(a),
	    .start = at,
	    .end = end,
	    .vec = (uint64_t)(uintptr_t)vec,
	    .vec_len = len,
	    .max_pages = first ? 1 : 0,
	    .category_inverted = none,
	    .category_mask = none | all,
	    .category_anyof_mask = anyof,
	    .return_mask = ret,
	};
	int got = ioctl(pm->fd, PAGEMAP_SCAN, &a);
	if (got < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/* walk_end may stop short of the range even when every region was
	 * returned, and when the vector is full it can even lie before the
	 * last region returned (seen on 6.18: a 1 GiB region with 16,384
	 * runs came back with 512 of them twice): continue from whichever
	 * is further, never re-count. */
	*next = a.walk_end;
	if (got > 0 && vec[got - 1].end > *next)
		*next = vec[got - 1].end;
	return got;
}

static int scan_once(struct pagemap *pm, uint64_t at, uint64_t end, uint64_t anyof, uint64_t none,
		     uint64_t ret, bool first, struct page_region *vec, size_t len, uint64_t *next)
{
	return scan_all(pm, at, end, 0, anyof, none, ret, first, vec, len, next);
}

/* first: the first matching page will do (a yes/no question). */
static int runs_scan(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t none, bool first, struct as_range **runs, size_t *n, size_t *cap)
{
	struct page_region vec[1024];
	for (uint64_t at = start, next; at < end; at = next) {
		int got =
		    scan_once(pm, at, end, anyof, none, anyof, first, vec, ARRAY_SIZE(vec), &next);
		if (got < 0)
			return got;
		for (int i = 0; i < got; i++)
			add_run(runs, n, cap, vec[i].start, vec[i].end);
		if ((first && got > 0) || next <= at)
			break;
	}
	return 0;
}

/* A page's categories from its pagemap entry, as PAGEMAP_SCAN has them:
 * a present page that is not write-protected by a userfaultfd has been
 * written since it was protected (or never was). */
static uint64_t entry_categories(uint64_t ent)
{
	uint64_t cat = (ent & PM_PRESENT ? PAGE_IS_PRESENT : 0) |
		       (ent & PM_SWAPPED ? PAGE_IS_SWAPPED : 0) |
		       (ent & PM_FILE ? PAGE_IS_FILE : 0);
	if ((ent & PM_PRESENT) && !(ent & PM_UFFD_WP))
		cat |= PAGE_IS_WRITTEN;
	return cat;
}

/* Each page of [start, end) with its pagemap entry (the pagemap file, 8
 * bytes a page: what there is without PAGEMAP_SCAN), until visit says
 * stop. 0 or -errno. */
typedef bool entry_fn(void *arg, uint64_t addr, uint64_t ent);
static int walk_entries(struct pagemap *pm, uint64_t start, uint64_t end, entry_fn *visit,
			void *arg)
{
	uint64_t ent[4096];
	for (uint64_t at = start; at < end;) {
		size_t pages = MV_MIN((end - at) / PAGE, ARRAY_SIZE(ent));
		ssize_t got = pread(pm->fd, ent, pages * 8, (off_t)(at / PAGE * 8));
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		for (size_t i = 0; i < (size_t)got / 8; i++)
			if (!visit(arg, at + i * PAGE, ent[i]))
				return 0;
		at += (uint64_t)got / 8 * PAGE;
	}
	return 0;
}

/* A run of the prefetched walk, merged with the last one when it
 * continues it with the same categories. */
static void pre_add(struct pagemap *pm, size_t *cap, uint64_t s, uint64_t e, uint64_t cat)
{
	struct pm_run *last = pm->n_pre ? &pm->pre[pm->n_pre - 1] : NULL;
	if (last && last->end == s && last->cat == cat) {
		last->end = e;
		return;
	}
	if (pm->n_pre == *cap)
		pm->pre = xrealloc(pm->pre, (*cap = *cap ? *cap * 2 : 256) * sizeof(*pm->pre));
	pm->pre[pm->n_pre++] = (struct pm_run){s, e, cat};
}

/* The walk of [start, end) is done: what it knows. */
static void pre_done(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t known)
{
	pm->pre_start = start;
	pm->pre_end = end;
	pm->pre_anyof = anyof;
	pm->pre_known = known;
}

struct prefetch_walk {
	struct pagemap *pm;
	uint64_t anyof, keep;
	size_t cap;
};

static bool prefetch_one(void *arg, uint64_t s, uint64_t ent)
{
	struct prefetch_walk *w = arg;
	uint64_t cat = entry_categories(ent) & w->keep;
	if (cat & w->anyof)
		pre_add(w->pm, &w->cap, s, s + PAGE, cat);
	return true;
}

int pagemap_prefetch(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t known)
{
	prefetch_forget(pm);
	if (!pm->scan)
		return -ENOTTY;
	struct page_region vec[1024];
	size_t cap = 0;
	for (uint64_t at = start, next; at < end; at = next) {
		int got = scan_once(pm, at, end, anyof, 0, known | anyof, false, vec,
				    ARRAY_SIZE(vec), &next);
		if (got < 0) {
			prefetch_forget(pm);
			return got;
		}
		for (int i = 0; i < got; i++) {
			/* As runs_scan: never count a page twice. */
			uint64_t s = vec[i].start;
			if (pm->n_pre && s < pm->pre[pm->n_pre - 1].end)
				s = pm->pre[pm->n_pre - 1].end;
			if (s < vec[i].end)
				pre_add(pm, &cap, s, vec[i].end, vec[i].categories);
		}
		if (next <= at)
			break;
	}
	pre_done(pm, start, end, anyof, known | anyof);
	return 0;
}

int pagemap_prefetch_any(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
			 uint64_t known)
{
	int rc = pagemap_prefetch(pm, start, end, anyof, known);
	if (rc != -ENOTTY)
		return rc;
	struct prefetch_walk w = {pm, anyof, (known | anyof) & ~PAGE_IS_PFNZERO, 0};
	rc = walk_entries(pm, start, end, prefetch_one, &w);
	if (rc < 0) {
		prefetch_forget(pm);
		return rc;
	}
	pre_done(pm, start, end, anyof, w.keep);
	return 0;
}

/* pagemap_runs from the prefetched walk; false if it cannot answer. */
static bool runs_prefetched(const struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
			    uint64_t none, struct as_range **runs, size_t *n, size_t *cap)
{
	if (!pm->pre_end || start < pm->pre_start || end > pm->pre_end ||
	    (anyof & ~pm->pre_anyof) || ((anyof | none) & ~pm->pre_known))
		return false;
	size_t lo = 0, hi = pm->n_pre;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (pm->pre[mid].end <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < pm->n_pre && pm->pre[i].start < end; i++) {
		const struct pm_run *r = &pm->pre[i];
		if (!(r->cat & anyof) || (r->cat & none))
			continue;
		add_run(runs, n, cap, MV_MAX(r->start, start), MV_MIN(r->end, end));
	}
	return true;
}

struct runs_walk {
	uint64_t anyof, none;
	bool first;
	struct as_range **runs;
	size_t *n, *cap;
};

static bool runs_one(void *arg, uint64_t addr, uint64_t ent)
{
	struct runs_walk *w = arg;
	uint64_t cat = entry_categories(ent);
	if (!(cat & w->anyof) || (cat & w->none))
		return true;
	add_run(w->runs, w->n, w->cap, addr, addr + PAGE);
	return !w->first;
}

/* Present or swapped, and not write-protected by a userfaultfd. */
static bool written_one(void *arg, uint64_t addr, uint64_t ent)
{
	struct runs_walk *w = arg;
	if ((ent & (PM_PRESENT | PM_SWAPPED)) && !(ent & PM_UFFD_WP))
		add_run(w->runs, w->n, w->cap, addr, addr + PAGE);
	return true;
}

static int runs_read(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t none, bool first, struct as_range **runs, size_t *n, size_t *cap)
{
	struct runs_walk w = {anyof, none, first, runs, n, cap};
	return walk_entries(pm, start, end, runs_one, &w);
}

int pagemap_runs(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof, uint64_t none,
		 struct as_range **runs, size_t *n, size_t *cap)
{
	if (runs_prefetched(pm, start, end, anyof, none, runs, n, cap))
		return 0;
	if (pm->scan) {
		int rc = runs_scan(pm, start, end, anyof, none, false, runs, n, cap);
		if (rc != -ENOTTY && rc != -EINVAL)
			return rc;
		pm->scan = false;
	}
	return runs_read(pm, start, end, anyof & ~PAGE_IS_PFNZERO, none & ~PAGE_IS_PFNZERO, false,
			 runs, n, cap);
}

int pagemap_written_runs(struct pagemap *pm, uint64_t start, uint64_t end, struct as_range **runs,
			 size_t *n, size_t *cap)
{
	const uint64_t anyof = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	if (pm->scan) {
		struct page_region vec[1024];
		int got = 0;
		for (uint64_t at = start, next; at < end; at = next) {
			got = scan_all(pm, at, end, PAGE_IS_WRITTEN, anyof, 0, anyof, false, vec,
				       ARRAY_SIZE(vec), &next);
			if (got < 0)
				break;
			for (int i = 0; i < got; i++)
				add_run(runs, n, cap, vec[i].start, vec[i].end);
			if (next <= at)
				break;
		}
		if (got >= 0)
			return 0;
		if (got != -ENOTTY && got != -EINVAL)
			return got;
		pm->scan = false;
	}
	struct runs_walk w = {.runs = runs, .n = n, .cap = cap};
	return walk_entries(pm, start, end, written_one, &w);
}

/* Present and mapped by this process alone. */
static bool exclusive_one(void *arg, uint64_t addr, uint64_t ent)
{
	struct runs_walk *w = arg;
	if ((ent & PM_PRESENT) && (ent & PM_MMAP_EXCLUSIVE))
		add_run(w->runs, w->n, w->cap, addr, addr + PAGE);
	return true;
}

int pagemap_exclusive_runs(struct pagemap *pm, uint64_t start, uint64_t end, struct as_range **runs,
			   size_t *n, size_t *cap)
{
	struct runs_walk w = {.runs = runs, .n = n, .cap = cap};
	return walk_entries(pm, start, end, exclusive_one, &w);
}

struct pfns_walk {
	uint64_t *pfn, next;
	bool *hidden;
};

static bool pfns_one(void *arg, uint64_t addr, uint64_t e)
{
	struct pfns_walk *w = arg;
	bool shared = (e & PM_PRESENT) && !(e & (PM_MMAP_EXCLUSIVE | PM_FILE));
	*w->pfn++ = shared ? e & PM_PFN : 0;
	if (shared && !(e & PM_PFN))
		*w->hidden = true;
	w->next = addr + PAGE;
	return true;
}

int pagemap_shared_pfns(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t *pfn,
			bool *hidden)
{
	struct pfns_walk w = {pfn, start, hidden};
	int rc = walk_entries(pm, start, end, pfns_one, &w);
	/* The file ends short, or is gone with the mm. */
	if (rc == -ENOENT || (rc == 0 && w.next < end))
		return -ESRCH;
	return rc;
}

int pagemap_written(pid_t pid, bool use_scan, uint64_t start, uint64_t end, bool *yes)
{
	*yes = false;
	struct pagemap pm;
	int rc = pagemap_open(pid, use_scan, &pm);
	if (rc < 0)
		return rc;
	start &= ~(PAGE - 1);
	end = end > UINT64_MAX - (PAGE - 1) ? UINT64_MAX : (end + PAGE - 1) & ~(PAGE - 1);
	/* Pages that are not file pages and are present or swapped: copies
	 * made on write. Any failure of the scan leaves it to the entries. */
	uint64_t anyof = PAGE_IS_PRESENT | PAGE_IS_SWAPPED, none = PAGE_IS_FILE;
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	rc = pm.scan ? runs_scan(&pm, start, end, anyof, none, true, &runs, &n, &cap) : -ENOTTY;
	if (rc < 0) {
		n = 0;
		rc = runs_read(&pm, start, end, anyof, none, true, &runs, &n, &cap);
	}
	*yes = n > 0;
	free(runs);
	pagemap_close(&pm);
	return rc;
}

bool pagemap_scan_works(void)
{
	/* One page of ours, present: the scan must find it. */
	static char page[4096] __attribute__((aligned(4096)));
	page[0] = 1;
	struct pagemap pm;
	if (pagemap_open(getpid(), true, &pm) < 0)
		return false;
	struct page_region r[1];
	struct pm_scan_arg a = {
	    .size = sizeof(a),
	    .start = (uint64_t)(uintptr_t)page,
	    .end = (uint64_t)(uintptr_t)page + sizeof(page),
	    .vec = (uint64_t)(uintptr_t)r,
	    .vec_len = 1,
	    .category_anyof_mask = PAGE_IS_PRESENT,
	    .return_mask = PAGE_IS_PRESENT,
	};
	bool ok = ioctl(pm.fd, PAGEMAP_SCAN, &a) >= 0;
	pagemap_close(&pm);
	return ok;
}
