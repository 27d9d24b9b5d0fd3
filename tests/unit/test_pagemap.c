/* pagemap_prefetch: pagemap_runs answered from one walk give what a walk
 * of their own gives (supervisor/kernel/pagemap.h), on this process's own
 * memory: pages written here and there in a reservation, a file mapping,
 * zero pages read. */
#include "tap.h"

#include "supervisor/kernel/pagemap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG 4096ull

static int same_runs(struct pagemap *walked, struct pagemap *fresh, uint64_t start, uint64_t end,
		     uint64_t anyof, uint64_t none, size_t *count)
{
	struct as_range *a = NULL, *b = NULL;
	size_t na = 0, ca = 0, nb = 0, cb = 0;
	int ra = pagemap_runs(walked, start, end, anyof, none, &a, &na, &ca);
	int rb = pagemap_runs(fresh, start, end, anyof, none, &b, &nb, &cb);
	int same = ra == 0 && rb == 0 && na == nb && (!na || !memcmp(a, b, na * sizeof(*a)));
	*count = na;
	free(a);
	free(b);
	return same;
}

int main(void)
{
	if (!pagemap_scan_works()) {
		printf("1..0 # SKIP no PAGEMAP_SCAN here (Linux 6.7)\n");
		return 0;
	}
	size_t len = 1ull << 34; /* 16 GiB reserved */
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ok(p != MAP_FAILED, "a 16 GiB reservation");
	if (p == MAP_FAILED)
		return tap_done();
	madvise(p, len, MADV_NOHUGEPAGE); /* small pages: runs as written */
	for (uint64_t off = 0; off < len; off += 1ull << 30)
		p[off] = 1, p[off + 3 * PG] = 2, p[off + 4 * PG] = 3;
	volatile uint8_t z = p[(1ull << 30) + (256ull << 20)]; /* the zero page */
	(void)z;
	char path[] = "/tmp/mv-unit-pagemap-XXXXXX";
	int fd = mkstemp(path);
	uint8_t *f = MAP_FAILED;
	if (fd >= 0 && ftruncate(fd, 8 * PG) == 0)
		f = mmap(NULL, 8 * PG, PROT_READ, MAP_PRIVATE, fd, 0);
	volatile uint8_t r = f != MAP_FAILED ? f[0] : 0;
	(void)r;

	struct pagemap walked, fresh;
	ok(pagemap_open(getpid(), true, &walked) == 0 && pagemap_open(getpid(), true, &fresh) == 0,
	   "two pagemaps of this process");
	uint64_t start = (uint64_t)(uintptr_t)p, end = start + len;
	ok(pagemap_prefetch(&walked, start, end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			    PAGE_IS_FILE | PAGE_IS_PFNZERO) == 0,
	   "one walk of the reservation");
	size_t n, written;
	/* 32 runs written (two a GiB); the page read is the zero page where
	 * the kernel maps one. */
	ok(same_runs(&walked, &fresh, start, end, PAGE_IS_PRESENT, PAGE_IS_PFNZERO, &written) &&
	       (written == 32 || written == 33),
	   "present, not the zero page: the same runs as a walk of their own (%zu)", written);
	ok(same_runs(&walked, &fresh, start, end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		     PAGE_IS_FILE | PAGE_IS_PFNZERO, &n) &&
	       n == written,
	   "present or swapped, not file nor zero: the same (%zu)", n);
	ok(same_runs(&walked, &fresh, start, end, PAGE_IS_PRESENT, 0, &n) && n == 33,
	   "present, zero page included: the same (%zu)", n);
	ok(same_runs(&walked, &fresh, start + PG, start + 4 * PG, PAGE_IS_PRESENT, 0, &n) && n == 1,
	   "a range that cuts a run: clipped the same (%zu)", n);
	/* Not what the walk kept: asked of the kernel again, still right. */
	ok(same_runs(&walked, &fresh, start, end, PAGE_IS_HUGE | PAGE_IS_PRESENT, 0, &n) && n == 33,
	   "a category the walk did not keep: walked again, the same (%zu)", n);
	if (f != MAP_FAILED) {
		uint64_t fs = (uint64_t)(uintptr_t)f;
		ok(same_runs(&walked, &fresh, fs, fs + 8 * PG, PAGE_IS_PRESENT, 0, &n),
		   "outside the walked range: walked again, the same (%zu)", n);
	}
	/* Written since the walk: the walk's answer is of its instant. */
	p[(2ull << 30) + 100 * PG] = 9;
	struct as_range *v = NULL;
	size_t nv = 0, cv = 0;
	pagemap_runs(&walked, start, end, PAGE_IS_PRESENT, PAGE_IS_PFNZERO, &v, &nv, &cv);
	ok(nv == written, "a page written after the walk is not in its answer (%zu runs)", nv);
	free(v);
	pagemap_close(&walked);
	pagemap_close(&fresh);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	return tap_done();
}
