/* ckpt_pattern: a process with known memory, for the checkpoint tests.
 *
 * Usage: ckpt_pattern [--dense MIB] [--sparse MIB] [--threads N] [--seed S]
 *
 * Makes, each filled with a pattern that depends on the region's name,
 * the page and the seed:
 *   dense     private anonymous, every page written (default 32 MiB)
 *   sparse    private anonymous MAP_NORESERVE, one page in 16 written
 *             (default 1024 MiB; no huge pages)
 *   shared    MAP_SHARED|MAP_ANONYMOUS, 16 pages, the first 8 written
 *   memfd     a memfd of 16 pages mapped shared, pages 0-5 and 10-15
 *             written (6-9 a hole); the fd stays open
 *   cow       a temporary file of 8 pages (its own pattern) mapped
 *             private, pages 1 and 5 written: only those two are the
 *             process's own
 *   prot_none 4 pages written, then mprotect(PROT_NONE)
 *   tbufN     one 256 KiB buffer per thread, written by that thread, which
 *             then waits on a condition variable
 * Prints "ready PID" and "region NAME START END" lines, then obeys stdin:
 *   dump DIR   write each region as the process sees it to DIR/NAME.bin
 *              (prot_none read after an mprotect back and forth; sparse
 *              files for sparse memory) -> "dumped"
 *   check      verify every pattern -> "ok" or "bad NAME"
 *   touch      rewrite the dense region with the next seed -> "touched"
 * EOF: exit 0. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_THREADS 64
#define TBUF (256 * 1024UL)

struct region {
	char name[32];
	char *addr;
	size_t len;
	int prot;
	size_t stride; /* pages written every stride pages (1 = all) */
};

static struct region regions[16 + MAX_THREADS];
static int n_regions;
static uint64_t seed = 1;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int threads_ready;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t name_key(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static void fill_page(char *p, const char *name, size_t page, uint64_t s)
{
	uint64_t k = mix(name_key(name) ^ mix(page) ^ (s << 32));
	uint64_t *w = (uint64_t *)(void *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		w[i] = mix(k + i);
}

static int check_page(const char *p, const char *name, size_t page, uint64_t s)
{
	uint64_t k = mix(name_key(name) ^ mix(page) ^ (s << 32));
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		if (w[i] != mix(k + i))
			return -1;
	return 0;
}

static struct region *add(const char *name, char *addr, size_t len, int prot, size_t stride)
{
	struct region *r = &regions[n_regions++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->addr = addr;
	r->len = len;
	r->prot = prot;
	r->stride = stride;
	return r;
}

static void fill(struct region *r, size_t first, size_t last)
{
	for (size_t pg = first; pg < last; pg += r->stride)
		fill_page(r->addr + pg * PAGE, r->name, pg, seed);
}

static void *xmap(size_t len, int prot, int flags, int fd)
{
	void *p = mmap(NULL, len, prot, flags, fd, 0);
	if (p == MAP_FAILED) {
		perror("ckpt_pattern: mmap");
		exit(2);
	}
	return p;
}

static void *thread_main(void *arg)
{
	struct region *r = arg;
	fill(r, 0, r->len / PAGE);
	pthread_mutex_lock(&mu);
	threads_ready++;
	pthread_cond_broadcast(&cv);
	for (;;)
		pthread_cond_wait(&cv, &mu);
	return NULL;
}

static void make_file_cow(void)
{
	char tmpl[] = "/tmp/ckpt_pattern.XXXXXX";
	int fd = mkstemp(tmpl);
	if (fd < 0) {
		perror("ckpt_pattern: mkstemp");
		exit(2);
	}
	unlink(tmpl);
	char page[PAGE];
	for (size_t pg = 0; pg < 8; pg++) {
		fill_page(page, "cowfile", pg, 0);
		if (pwrite(fd, page, PAGE, (off_t)(pg * PAGE)) != (ssize_t)PAGE) {
			perror("ckpt_pattern: pwrite");
			exit(2);
		}
	}
	struct region *r = add("cow", xmap(8 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd), 8 * PAGE,
			       PROT_READ | PROT_WRITE, 4);
	fill(r, 1, 8); /* pages 1 and 5 */
}

static void make_regions(size_t dense_mib, size_t sparse_mib, int threads)
{
	int anon = MAP_PRIVATE | MAP_ANONYMOUS;
	struct region *r = add("dense", xmap(dense_mib << 20, PROT_READ | PROT_WRITE, anon, -1),
			       dense_mib << 20, PROT_READ | PROT_WRITE, 1);
	fill(r, 0, r->len / PAGE);
	if (sparse_mib) {
		r = add("sparse", xmap(sparse_mib << 20, PROT_READ | PROT_WRITE, anon | MAP_NORESERVE, -1),
			sparse_mib << 20, PROT_READ | PROT_WRITE, 16);
		madvise(r->addr, r->len, MADV_NOHUGEPAGE);
		fill(r, 0, r->len / PAGE);
	}
	r = add("shared", xmap(16 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1),
		16 * PAGE, PROT_READ | PROT_WRITE, 1);
	fill(r, 0, 8);
	int mfd = memfd_create("ckpt_pattern", 0);
	if (mfd < 0 || ftruncate(mfd, 16 * PAGE) < 0) {
		perror("ckpt_pattern: memfd");
		exit(2);
	}
	r = add("memfd", xmap(16 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd), 16 * PAGE,
		PROT_READ | PROT_WRITE, 1);
	fill(r, 0, 6);
	fill(r, 10, 16);
	make_file_cow();
	r = add("prot_none", xmap(4 * PAGE, PROT_READ | PROT_WRITE, anon, -1), 4 * PAGE, PROT_NONE, 1);
	fill(r, 0, 4);
	mprotect(r->addr, r->len, PROT_NONE);
	for (int i = 0; i < threads; i++) {
		char name[32];
		snprintf(name, sizeof(name), "tbuf%d", i);
		r = add(name, xmap(TBUF, PROT_READ | PROT_WRITE, anon, -1), TBUF, PROT_READ | PROT_WRITE, 1);
		pthread_t t;
		pthread_create(&t, NULL, thread_main, r);
	}
	pthread_mutex_lock(&mu);
	while (threads_ready < threads)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

/* Which pages of r the pattern covers: the memfd hole is 6-9, the shared
 * region's written half 0-7, cow pages 1 and 5. */
static int written(const struct region *r, size_t pg)
{
	if (strcmp(r->name, "memfd") == 0)
		return pg < 6 || pg >= 10;
	if (strcmp(r->name, "shared") == 0)
		return pg < 8;
	if (strcmp(r->name, "cow") == 0)
		return pg == 1 || pg == 5;
	return pg % r->stride == 0;
}

static const char *check(void)
{
	for (int i = 0; i < n_regions; i++) {
		struct region *r = &regions[i];
		if (r->prot == PROT_NONE)
			mprotect(r->addr, r->len, PROT_READ);
		for (size_t pg = 0; pg < r->len / PAGE; pg++) {
			if (!written(r, pg))
				continue;
			uint64_t s = strcmp(r->name, "dense") == 0 ? seed : 1;
			if (check_page(r->addr + pg * PAGE, r->name, pg, s) < 0)
				return r->name;
		}
		if (r->prot == PROT_NONE)
			mprotect(r->addr, r->len, PROT_NONE);
	}
	return NULL;
}

static int dump_region(const char *dir, struct region *r)
{
	char path[8192];
	if (snprintf(path, sizeof(path), "%s/%s.bin", dir, r->name) >= (int)sizeof(path))
		return -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)r->len) < 0)
		return -1;
	if (r->prot == PROT_NONE)
		mprotect(r->addr, r->len, PROT_READ);
	for (size_t off = 0; off < r->len; off += PAGE) {
		/* Pages never written are left as holes (zeros, or the
		 * file's own bytes for cow): the dump of a sparse gigabyte
		 * stays small, and reading a memfd hole through the mapping
		 * would allocate a page there (shmem_fault). */
		if (!written(r, off / PAGE))
			continue;
		if (pwrite(fd, r->addr + off, PAGE, (off_t)off) != (ssize_t)PAGE)
			return -1;
	}
	if (r->prot == PROT_NONE)
		mprotect(r->addr, r->len, PROT_NONE);
	return close(fd);
}

int main(int argc, char **argv)
{
	size_t dense = 32, sparse = 1024;
	int threads = 4;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--dense") == 0)
			dense = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--sparse") == 0)
			sparse = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 0);
	}
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	make_regions(dense, sparse, threads);
	printf("ready %d\n", (int)getpid());
	for (int i = 0; i < n_regions; i++)
		printf("region %s %lx %lx\n", regions[i].name, (unsigned long)regions[i].addr,
		       (unsigned long)(regions[i].addr + regions[i].len));
	fflush(stdout);
	char line[4200];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "dump ", 5) == 0) {
			int bad = 0;
			for (int i = 0; i < n_regions; i++)
				bad |= dump_region(line + 5, &regions[i]) < 0;
			printf(bad ? "dump failed\n" : "dumped\n");
		} else if (strcmp(line, "check") == 0) {
			const char *bad = check();
			if (bad)
				printf("bad %s\n", bad);
			else
				printf("ok\n");
		} else if (strcmp(line, "touch") == 0) {
			seed++;
			fill(&regions[0], 0, regions[0].len / PAGE);
			printf("touched\n");
		}
		fflush(stdout);
	}
	return 0;
}
