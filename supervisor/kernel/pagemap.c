#include "supervisor/kernel/pagemap.h"
#include "common/util.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#define PAGE	   4096ull
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_FILE	   (1ull << 61)

int pagemap_open(pid_t pid, bool try_scan, struct pagemap *pm)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	pm->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pm->fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	pm->scan = try_scan;
	return 0;
}

void pagemap_close(struct pagemap *pm)
{
	if (pm->fd >= 0)
		close(pm->fd);
	pm->fd = -1;
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

static int runs_scan(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t none, struct as_range **runs, size_t *n, size_t *cap)
{
	struct page_region vec[1024];
	uint64_t at = start;
	while (at < end) {
		/* A page must have every category of category_mask after the
		 * inversion: inverting the excluded ones asks for their absence. */
		struct pm_scan_arg a = {
		    .size = sizeof(a),
		    .start = at,
		    .end = end,
		    .vec = (uint64_t)(uintptr_t)vec,
		    .vec_len = ARRAY_SIZE(vec),
		    .category_inverted = none,
		    .category_mask = none,
		    .category_anyof_mask = anyof,
		    .return_mask = anyof,
		};
		int got = ioctl(pm->fd, PAGEMAP_SCAN, &a);
		if (got < 0)
			return errno == ENOENT ? -ESRCH : -errno;
		for (int i = 0; i < got; i++)
			add_run(runs, n, cap, vec[i].start, vec[i].end);
		/* walk_end may stop short of the range even when every
		 * region was returned, and when the vector is full it can
		 * even lie before the last region returned (seen on 6.18: a
		 * 1 GiB region with 16,384 runs came back with 512 of them
		 * twice): continue from whichever is further, never
		 * re-count. */
		uint64_t next = a.walk_end;
		if (got > 0 && vec[got - 1].end > next)
			next = vec[got - 1].end;
		if (next <= at)
			break;
		at = next;
	}
	return 0;
}

static int runs_read(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t none, struct as_range **runs, size_t *n, size_t *cap)
{
	uint64_t ent[4096];
	for (uint64_t at = start; at < end;) {
		size_t pages = MV_MIN((end - at) / PAGE, ARRAY_SIZE(ent));
		ssize_t got = pread(pm->fd, ent, pages * 8, (off_t)(at / PAGE * 8));
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		for (size_t i = 0; i < (size_t)got / 8; i++) {
			uint64_t cat = (ent[i] & PM_PRESENT ? PAGE_IS_PRESENT : 0) |
				       (ent[i] & PM_SWAPPED ? PAGE_IS_SWAPPED : 0) |
				       (ent[i] & PM_FILE ? PAGE_IS_FILE : 0);
			if ((cat & anyof) && !(cat & none))
				add_run(runs, n, cap, at + i * PAGE, at + (i + 1) * PAGE);
		}
		at += (uint64_t)got / 8 * PAGE;
	}
	return 0;
}

int pagemap_runs(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof, uint64_t none,
		 struct as_range **runs, size_t *n, size_t *cap)
{
	if (pm->scan) {
		int rc = runs_scan(pm, start, end, anyof, none, runs, n, cap);
		if (rc != -ENOTTY && rc != -EINVAL)
			return rc;
		pm->scan = false;
	}
	return runs_read(pm, start, end, anyof & ~PAGE_IS_PFNZERO, none & ~PAGE_IS_PFNZERO, runs, n,
			 cap);
}
