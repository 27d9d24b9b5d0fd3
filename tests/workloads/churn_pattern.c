/* churn_pattern: memory that must keep its contents, for the churn tier
 * (tests/churn): evict and reload it over and over while it runs.
 *
 *   churn_pattern [--procs P] [--threads T] [--rounds R] [--kib K] [--skip-wipe]
 *
 * The parent sets up, before it forks anything:
 *   - a MADV_WIPEONFORK region (every child must see it as zeros),
 *   - a MADV_DONTFORK region (no child may have it mapped),
 *   - a MAP_SHARED|MAP_ANONYMOUS region, a slot per worker thread and
 *     one result per worker process,
 *   - calloc'd memory, small (main arena) and large (its own mmap), that
 *     must read as zeros, and a private region with a pattern.
 * Then it forks P worker processes. Each runs T threads and its main
 * thread; every one of them owns a large local array on its stack, heap
 * blocks (threads allocate from secondary malloc arenas), one large
 * malloc (mmap'ed) and its slot of the shared region; the main thread
 * also a 4 MiB region with MADV_HUGEPAGE. For R rounds each
 * writes a pattern that depends on (process, thread, region, round,
 * offset) into all of it, sleeps a few milliseconds, and checks it; every
 * few rounds one heap block is freed and allocated again. Meanwhile the
 * parent checks its own regions, and every few rounds forks a short-lived
 * probe child that checks what a child must see: the wipe-on-fork region
 * zero, the dont-fork region unmapped, the calloc'd memory zero, and the
 * private pattern as the parent has it.
 *
 * On the first wrong byte, it prints (stdout and stderr) the process,
 * thread, region, round, address, offset, the byte found and the byte
 * wanted, and exits 1. At the end, the parent prints one checksum line
 * per worker process (a hash of what it last wrote, read back from
 * memory) and "ok"; the output is the same on every run with the same
 * arguments. --skip-wipe leaves out the wipe-on-fork check (to look past
 * that failure for others). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAXT 16
#define MAXP 16
#define NBLK 8

static int nprocs = 3, nthreads = 3, rounds = 120;
static size_t kib = 256; /* stack array and each heap unit */

static unsigned char *wipe, *dontfork, *priv, *calloc_big, *calloc_small[16];
static size_t wipe_len = 1 << 20, dontfork_len = 1 << 20, priv_len = 2 << 20;
static size_t cbig_len = 4 << 20, csmall_len = 3000;
static struct shared {
	uint64_t result[MAXP];
	unsigned char slot[]; /* (MAXT + 1) slots per process, slot_len each */
} *shm;
static size_t slot_len = 128 << 10;
static int my_proc = -1; /* -1: the parent */
static int skip_wipe;    /* --skip-wipe: do not check the wipe-on-fork region */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Keep the compiler from proving that memory is not read again. */
static void *launder(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t key(int proc, int thread, int region, int round)
{
	return mix(((uint64_t)(proc + 1) << 48) ^ ((uint64_t)(thread + 1) << 36) ^
		   ((uint64_t)region << 24) ^ (uint64_t)round);
}

static __attribute__((noreturn)) void mismatch(const char *what, int thread, int round,
					       const unsigned char *base, size_t off,
					       unsigned got, unsigned want)
{
	char line[320];
	int n = snprintf(line, sizeof(line),
			 "MISMATCH proc %d thread %d region %s round %d addr %p offset %zu: "
			 "got 0x%02x want 0x%02x\n",
			 my_proc, thread, what, round, (void *)(base + off), off, got, want);
	if (write(1, line, (size_t)n) < 0 || write(2, line, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

static __attribute__((noinline)) void fill(void *p, size_t len, uint64_t k)
{
	uint64_t *w = launder(p);
	for (size_t i = 0; i < len / 8; i++)
		w[i] = mix(k + i);
}

/* The first wrong byte of a pattern, or exit. */
static __attribute__((noinline)) void check(const char *what, int thread, int round,
					    const void *p, size_t len, uint64_t k)
{
	const uint64_t *w = launder((void *)p);
	for (size_t i = 0; i < len / 8; i++) {
		uint64_t want = mix(k + i);
		if (w[i] != want) {
			for (int b = 0; b < 8; b++) {
				unsigned g = (unsigned)(w[i] >> (8 * b)) & 0xff;
				unsigned x = (unsigned)(want >> (8 * b)) & 0xff;
				if (g != x)
					mismatch(what, thread, round, p, i * 8 + (size_t)b, g, x);
			}
		}
	}
}

static __attribute__((noinline)) void check_zero(const char *what, int thread, int round,
						 const void *p, size_t len)
{
	const unsigned char *c = launder((void *)p);
	for (size_t i = 0; i < len; i++)
		if (c[i])
			mismatch(what, thread, round, c, i, c[i], 0);
}

/* len bytes at a 2 MiB boundary, asked to be backed by transparent huge
 * pages (MADV_HUGEPAGE: the evict notes them and the reload collapses
 * them again, docs/reload.md); without THP they are small pages. */
static unsigned char *map_huge(size_t len)
{
	size_t align = 2UL << 20;
	unsigned char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("churn_pattern: mmap");
		_exit(3);
	}
	unsigned char *a = (unsigned char *)(((uintptr_t)p + align - 1) & ~(align - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + len, (size_t)(p + align - a));
	madvise(a, len, MADV_HUGEPAGE);
	return a;
}

static uint64_t hash(uint64_t h, const void *p, size_t len)
{
	const uint64_t *w = launder((void *)p);
	for (size_t i = 0; i < len / 8; i++)
		h = mix(h ^ w[i]);
	return h;
}

/* A worker thread (thread == nthreads: the process's main thread). */
static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	unsigned char stack_arr[256 << 10]; /* kib is capped to this size */
	size_t stack_len = kib << 10 < sizeof(stack_arr) ? kib << 10 : sizeof(stack_arr);
	size_t blk_len = (kib << 10) / 4;   /* below the mmap threshold: arena memory */
	size_t big_len = (kib << 10) * 4;   /* above it: a mapping of its own */
	unsigned char *blk[NBLK], *big = malloc(big_len);
	unsigned char *slot = shm->slot + ((size_t)my_proc * (MAXT + 1) + (size_t)t) * slot_len;
	size_t huge_len = t == nthreads ? 4UL << 20 : 0; /* the main thread's */
	unsigned char *huge = huge_len ? map_huge(huge_len) : NULL;
	for (int i = 0; i < NBLK; i++)
		blk[i] = malloc(blk_len);
	if (!big || !blk[NBLK - 1]) {
		fprintf(stderr, "churn_pattern: out of memory\n");
		_exit(3);
	}
	uint64_t seed = key(my_proc, t, 99, 0);
	for (int r = 1; r <= rounds; r++) {
		if (r % 7 == 0) { /* churn the heap a little */
			int i = (int)(mix(seed + (uint64_t)r) % NBLK);
			free(blk[i]);
			blk[i] = malloc(blk_len);
			if (!blk[i])
				_exit(3);
		}
		fill(stack_arr, stack_len, key(my_proc, t, 1, r));
		for (int i = 0; i < NBLK; i++)
			fill(blk[i], blk_len, key(my_proc, t, 10 + i, r));
		fill(big, big_len, key(my_proc, t, 2, r));
		fill(slot, slot_len, key(my_proc, t, 3, r));
		if (huge)
			fill(huge, huge_len, key(my_proc, t, 7, r));
		nap_ms(1 + (long)(mix(seed ^ (uint64_t)r) % 12));
		check("stack", t, r, stack_arr, stack_len, key(my_proc, t, 1, r));
		for (int i = 0; i < NBLK; i++)
			check("heap", t, r, blk[i], blk_len, key(my_proc, t, 10 + i, r));
		check("big-heap", t, r, big, big_len, key(my_proc, t, 2, r));
		check("shared", t, r, slot, slot_len, key(my_proc, t, 3, r));
		if (huge)
			check("hugepage", t, r, huge, huge_len, key(my_proc, t, 7, r));
	}
	uint64_t h = hash(key(my_proc, t, 0, 0), stack_arr, stack_len);
	for (int i = 0; i < NBLK; i++)
		h = hash(h, blk[i], blk_len);
	h = hash(h, big, big_len);
	h = hash(h, slot, slot_len);
	if (huge) {
		h = hash(h, huge, huge_len);
		munmap(huge, huge_len);
	}
	for (int i = 0; i < NBLK; i++)
		free(blk[i]);
	free(big);
	return (void *)(uintptr_t)h;
}

/* What every child must see of the parent's setup. */
static void child_checks(int thread, int round)
{
	unsigned char v;
	if (!skip_wipe)
		check_zero("wipeonfork", thread, round, wipe, wipe_len);
	if (mincore(dontfork, PAGE, &v) == 0 || errno != ENOMEM) {
		char line[160];
		int n = snprintf(line, sizeof(line),
				 "MISMATCH proc %d: the MADV_DONTFORK region %p is mapped in a child\n",
				 my_proc, (void *)dontfork);
		if (write(1, line, (size_t)n) < 0 || write(2, line, (size_t)n) < 0)
			_exit(1);
		_exit(1);
	}
	check_zero("calloc-big", thread, round, calloc_big, cbig_len);
	for (int i = 0; i < 16; i++)
		check_zero("calloc-small", thread, round, calloc_small[i], csmall_len);
}

static void worker_process(int p)
{
	my_proc = p;
	child_checks(-1, 0);
	pthread_t th[MAXT];
	for (int t = 0; t < nthreads; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t)) {
			fprintf(stderr, "churn_pattern: pthread_create failed\n");
			_exit(3);
		}
	uint64_t h = (uint64_t)(uintptr_t)worker((void *)(intptr_t)nthreads);
	for (int t = 0; t < nthreads; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		h = mix(h ^ (uint64_t)(uintptr_t)ret);
	}
	child_checks(-1, rounds);
	shm->result[p] = h;
	_exit(0);
}

static size_t num_arg(const char *s, size_t max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || v == 0 || v > max) {
		fprintf(stderr, "churn_pattern: bad number %s (1..%zu)\n", s, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "--skip-wipe")) {
			skip_wipe = 1;
			i--;
		} else if (i + 1 >= argc)
			goto usage;
		else if (!strcmp(argv[i], "--procs"))
			nprocs = (int)num_arg(argv[i + 1], MAXP);
		else if (!strcmp(argv[i], "--threads"))
			nthreads = (int)num_arg(argv[i + 1], MAXT);
		else if (!strcmp(argv[i], "--rounds"))
			rounds = (int)num_arg(argv[i + 1], 1000000);
		else if (!strcmp(argv[i], "--kib"))
			kib = num_arg(argv[i + 1], 256) / 8 * 8;
		else {
usage:
			fprintf(stderr, "usage: churn_pattern [--procs P] [--threads T] [--rounds R] [--kib K] "
					"[--skip-wipe]\n");
			return 2;
		}
	}
	if (kib < 8)
		kib = 8;

	int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
	wipe = mmap(NULL, wipe_len, prot, flags, -1, 0);
	dontfork = mmap(NULL, dontfork_len, prot, flags, -1, 0);
	priv = mmap(NULL, priv_len, prot, flags, -1, 0);
	size_t shm_len = sizeof(*shm) + (size_t)MAXP * (MAXT + 1) * slot_len;
	shm = mmap(NULL, shm_len, prot, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (wipe == MAP_FAILED || dontfork == MAP_FAILED || priv == MAP_FAILED || shm == MAP_FAILED) {
		perror("churn_pattern: mmap");
		return 3;
	}
	fill(wipe, wipe_len, key(-1, 0, 4, 0));
	fill(dontfork, dontfork_len, key(-1, 0, 5, 0));
	fill(priv, priv_len, key(-1, 0, 6, 0));
	if (madvise(wipe, wipe_len, MADV_WIPEONFORK) || madvise(dontfork, dontfork_len, MADV_DONTFORK)) {
		perror("churn_pattern: madvise");
		return 3;
	}
	calloc_big = calloc(1, cbig_len);
	for (int i = 0; i < 16; i++)
		calloc_small[i] = calloc(1, csmall_len);
	if (!calloc_big || !calloc_small[15])
		return 3;

	pid_t kids[MAXP];
	for (int p = 0; p < nprocs; p++) {
		kids[p] = fork();
		if (kids[p] < 0) {
			perror("churn_pattern: fork");
			return 3;
		}
		if (kids[p] == 0)
			worker_process(p);
	}

	/* The parent: check its own regions; fork a probe now and then. */
	int probes = 0, failed = 0;
	for (int r = 1; r <= rounds; r++) {
		fill(priv, priv_len, key(-1, 0, 6, r));
		nap_ms(5);
		check("wipeonfork-parent", -1, r, wipe, wipe_len, key(-1, 0, 4, 0));
		check("dontfork-parent", -1, r, dontfork, dontfork_len, key(-1, 0, 5, 0));
		check("private-parent", -1, r, priv, priv_len, key(-1, 0, 6, r));
		check_zero("calloc-big", -1, r, calloc_big, cbig_len);
		if (r % 10 == 0) {
			pid_t c = fork();
			if (c < 0) {
				perror("churn_pattern: fork");
				return 3;
			}
			if (c == 0) {
				my_proc = 100 + r;
				child_checks(-1, r);
				check("private-child", -1, r, priv, priv_len, key(-1, 0, 6, r));
				_exit(0);
			}
			int st;
			if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)) {
				printf("probe at round %d failed: status 0x%x\n", r, st);
				failed = 1;
			}
			probes++;
		}
	}
	for (int p = 0; p < nprocs; p++) {
		int st;
		if (waitpid(kids[p], &st, 0) != kids[p]) {
			perror("churn_pattern: waitpid");
			return 3;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			printf("proc %d: checksum %016llx\n", p, (unsigned long long)shm->result[p]);
		else {
			printf("proc %d: %s %d\n", p, WIFEXITED(st) ? "exit status" : "killed by signal",
			       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			failed = 1;
		}
	}
	printf("probes %d\n%s\n", probes, failed ? "FAILED" : "ok");
	return failed;
}
