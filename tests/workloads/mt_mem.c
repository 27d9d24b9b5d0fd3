/*
 * mt_mem — multi-threaded memory-syscall workload.
 *
 * Usage: mt_mem [ITERS=32 [THREADS=8]]
 *
 * Each thread runs ITERS rounds with its own deterministic PRNG. A round:
 * mmap an anonymous private region of 1-64 pages, fill it with a pattern,
 * mprotect it read-only (verify) and back to read-write, mremap it larger
 * (MREMAP_MAYMOVE; the new tail must read as zeros and is then filled),
 * mremap it smaller, madvise(MADV_DONTNEED) a run of pages (they must read
 * back as zeros), munmap one middle page (mincore must then report ENOMEM for
 * it), verify every remaining page, then munmap both pieces.
 *
 * The per-thread checksums (over all verified content) are combined in thread
 * index order, so the output depends only on the arguments. Tests run it
 * natively and under memvisor and compare stdout; many threads issuing
 * memory syscalls at once exercise concurrent notifications.
 *
 * Output: "thread N checksum X" per thread, then "checksum X".
 * Exit: 0 ok, 2 a syscall failed, 3 content mismatch, 100 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL
#define MAX_PAGES  (64 + 2 + 64)

static size_t page_size;
static long iters = 32;

struct worker {
	pthread_t tid;
	int index;
	uint64_t checksum;
};

/* FNV-1a step over a whole 64-bit word, plus a shift so high bits feed back. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * FNV_PRIME;
	return h ^ (h >> 29);
}

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return splitmix(*state);
}

static void die_sys(int thread, const char *what)
{
	fprintf(stderr, "mt_mem: thread %d: %s: %s\n", thread, what, strerror(errno));
	exit(2);
}

static void die_bad(int thread, long iter, size_t page, size_t word, uint64_t got, uint64_t want)
{
	fprintf(stderr,
		"mt_mem: thread %d iter %ld: content mismatch at page %zu word %zu: "
		"got 0x%016" PRIx64 " want 0x%016" PRIx64 "\n",
		thread, iter, page, word, got, want);
	exit(3);
}

/* Expected word of a page: tag 0 means "must be zero". */
static uint64_t want_word(uint64_t tag, size_t word)
{
	return tag ? tag ^ (word * 0x9e3779b97f4a7c15ULL) : 0;
}

static void fill_page(char *base, size_t page, uint64_t tag)
{
	uint64_t *w = (uint64_t *)(base + page * page_size);
	size_t n = page_size / sizeof(uint64_t);

	for (size_t i = 0; i < n; i++)
		w[i] = want_word(tag, i);
}

/* Verify one page against its tag; optionally fold it into *h. */
static void check_page(int thread, long iter, char *base, size_t page, uint64_t tag, uint64_t *h)
{
	const uint64_t *w = (const uint64_t *)(base + page * page_size);
	size_t n = page_size / sizeof(uint64_t);

	for (size_t i = 0; i < n; i++) {
		uint64_t want = want_word(tag, i);
		if (w[i] != want)
			die_bad(thread, iter, page, i, w[i], want);
		if (h)
			*h = fnv_u64(*h, w[i]);
	}
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	int t = wk->index;
	uint64_t state = 0x6d656d7669736f72ULL + (uint64_t)t * 0x1234567ULL;
	uint64_t h = FNV_OFFSET;
	uint64_t tags[MAX_PAGES];
	unsigned char vec[1];

	for (long it = 0; it < iters; it++) {
		size_t npages = 1 + rnd(&state) % 64;
		size_t len = npages * page_size;
		char *p =
		    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			die_sys(t, "mmap");

		/* Fresh anonymous memory is zero; then fill it. */
		for (size_t pg = 0; pg < npages; pg++) {
			check_page(t, it, p, pg, 0, NULL);
			tags[pg] = rnd(&state) | 1;
			fill_page(p, pg, tags[pg]);
		}

		/* Read-only, verify, back to read-write and rewrite page 0. */
		if (mprotect(p, len, PROT_READ) != 0)
			die_sys(t, "mprotect(PROT_READ)");
		for (size_t pg = 0; pg < npages; pg++)
			check_page(t, it, p, pg, tags[pg], NULL);
		if (mprotect(p, len, PROT_READ | PROT_WRITE) != 0)
			die_sys(t, "mprotect(PROT_READ|PROT_WRITE)");
		tags[0] = rnd(&state) | 1;
		fill_page(p, 0, tags[0]);

		/* Grow; the tail is fresh zero memory, then filled. */
		size_t gpages = npages + 2 + rnd(&state) % 64;
		char *q = mremap(p, len, gpages * page_size, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			die_sys(t, "mremap(grow)");
		p = q;
		for (size_t pg = 0; pg < npages; pg++)
			check_page(t, it, p, pg, tags[pg], NULL);
		for (size_t pg = npages; pg < gpages; pg++) {
			check_page(t, it, p, pg, 0, NULL);
			tags[pg] = rnd(&state) | 1;
			fill_page(p, pg, tags[pg]);
		}

		/* Shrink to 3..gpages pages (never moves). */
		size_t spages = 3 + rnd(&state) % (gpages - 2);
		q = mremap(p, gpages * page_size, spages * page_size, 0);
		if (q == MAP_FAILED)
			die_sys(t, "mremap(shrink)");
		if (q != p) {
			fprintf(stderr, "mt_mem: thread %d: shrinking mremap moved the mapping\n",
				t);
			exit(3);
		}

		/* Drop a run of pages: they must read back as zeros. */
		size_t dstart = rnd(&state) % spages;
		size_t dcount = 1 + rnd(&state) % (spages - dstart);
		if (madvise(p + dstart * page_size, dcount * page_size, MADV_DONTNEED) != 0)
			die_sys(t, "madvise(MADV_DONTNEED)");
		for (size_t pg = dstart; pg < dstart + dcount; pg++)
			tags[pg] = 0;

		/* Punch out one middle page. */
		size_t hole = 1 + rnd(&state) % (spages - 2);
		if (munmap(p + hole * page_size, page_size) != 0)
			die_sys(t, "munmap(middle page)");
		if (mincore(p + hole * page_size, page_size, vec) == 0 || errno != ENOMEM) {
			fprintf(stderr, "mt_mem: thread %d: punched page still mapped\n", t);
			exit(3);
		}

		/* Verify and checksum everything that is left. */
		h = fnv_u64(h, npages);
		h = fnv_u64(h, gpages);
		h = fnv_u64(h, spages);
		h = fnv_u64(h, hole);
		for (size_t pg = 0; pg < spages; pg++)
			if (pg != hole)
				check_page(t, it, p, pg, tags[pg], &h);

		if (munmap(p, hole * page_size) != 0)
			die_sys(t, "munmap(head)");
		if (munmap(p + (hole + 1) * page_size, (spages - hole - 1) * page_size) != 0)
			die_sys(t, "munmap(tail)");
	}
	wk->checksum = h;
	return NULL;
}

static long parse_count(const char *s, const char *what, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *end || v < 1 || v > max) {
		fprintf(stderr, "mt_mem: bad %s '%s' (1..%ld)\nusage: mt_mem [ITERS [THREADS]]\n",
			what, s, max);
		exit(100);
	}
	return v;
}

int main(int argc, char **argv)
{
	long nthreads = 8;

	if (argc > 3) {
		fprintf(stderr, "usage: mt_mem [ITERS [THREADS]]\n");
		return 100;
	}
	if (argc > 1)
		iters = parse_count(argv[1], "iteration count", 100000000L);
	if (argc > 2)
		nthreads = parse_count(argv[2], "thread count", 1024);
	page_size = (size_t)sysconf(_SC_PAGESIZE);

	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	if (!w) {
		fprintf(stderr, "mt_mem: calloc: %s\n", strerror(errno));
		return 2;
	}
	for (long i = 0; i < nthreads; i++) {
		w[i].index = (int)i;
		int rc = pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
		if (rc != 0) {
			fprintf(stderr, "mt_mem: pthread_create: %s\n", strerror(rc));
			return 2;
		}
	}
	uint64_t h = FNV_OFFSET;
	for (long i = 0; i < nthreads; i++) {
		int rc = pthread_join(w[i].tid, NULL);
		if (rc != 0) {
			fprintf(stderr, "mt_mem: pthread_join: %s\n", strerror(rc));
			return 2;
		}
		printf("thread %ld checksum %016" PRIx64 "\n", i, w[i].checksum);
		h = fnv_u64(h, w[i].checksum);
	}
	printf("checksum %016" PRIx64 "\n", h);
	free(w);
	return fflush(stdout) == 0 ? 0 : 2;
}
