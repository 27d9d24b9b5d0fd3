/* live_counter: memory that keeps changing, for checkpoint --live
 * (tests/bats/live.bats).
 *
 * Usage: live_counter [--mib M] [--threads T] [--churn-mib C] [--spare-mib S]
 * A region of M MiB (default 64). Writer thread t of T (default 2) owns
 * the pages p with p % T == t and sweeps them in order for ever, writing
 * its sweep number into the first 8 bytes of each. At any instant thread
 * t's pages, in its order, read [s+1, ..., s+1, s, ..., s]: an image of
 * one instant must show that (tests/helpers/livecheck.py). The first
 * sweep is over before "ready PID ADDR T" is printed, so every page is
 * committed.
 *
 * With --churn-mib C, a thread maps C MiB, fills it, and unmaps it (every
 * other time: madvise(MADV_DONTNEED) first) in a loop: memory that goes
 * away while a live checkpoint copies it.
 *
 * With --spare-mib S, a region of S MiB is filled at the start and then
 * changed only on request: "dontneed" (madvise(MADV_DONTNEED)) ->
 * "dropped", "unmap" -> "unmapped". A test drops it at an instant it chooses (while a live
 * copy is held back), where the churner's timing is left to chance.
 *
 * With --check, each writer first reads what it is about to overwrite,
 * which must be its previous sweep's number; anything else (a page that
 * came back older, or as zeros, after an evict) is reported on stderr and
 * the program exits 3. With --cold-mib K, a second region of K MiB is
 * filled once with a pattern and never written again ("verify" checks
 * it): memory an evict may drop while the writers run.
 *
 * stdin, one line each: "sweeps" -> "sweeps N" (sum over threads),
 * "verify" -> "verify ok" or "verify bad N" (words of the cold region
 * that differ), "exit".
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL

static char *region, *cold;
static size_t pages, nthreads = 2, churn_len, cold_len, spare_len;
static char *spare;
static int check;
static volatile uint64_t *sweeps;
static pthread_barrier_t first;

static void sweep(size_t t, uint64_t s)
{
	for (size_t p = t; p < pages; p += nthreads) {
		volatile uint64_t *w = (volatile uint64_t *)(region + p * PAGE);
		if (check && s > 1 && *w != s - 1) {
			fprintf(stderr, "live_counter: thread %zu, page %zu: found %llu, wanted %llu\n",
				t, p, (unsigned long long)*w, (unsigned long long)(s - 1));
			_exit(3);
		}
		*w = s;
	}
}

static uint64_t cold_word(size_t i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull ^ 0x5a5a5a5a5a5a5a5aull;
}

static size_t cold_bad(void)
{
	size_t bad = 0;
	for (size_t i = 0; i < cold_len / 8; i++)
		bad += ((volatile uint64_t *)cold)[i] != cold_word(i);
	return bad;
}

static void *writer(void *arg)
{
	size_t t = (size_t)(uintptr_t)arg;
	sweep(t, 1);
	sweeps[t] = 1;
	pthread_barrier_wait(&first);
	for (uint64_t s = 2;; s++) {
		sweep(t, s);
		sweeps[t] = s;
	}
	return NULL;
}

static void *churner(void *arg)
{
	char *m = arg;
	for (unsigned n = 0;; n++) {
		if (n)
			m = mmap(NULL, churn_len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			perror("live_counter: mmap");
			exit(2);
		}
		memset(m, (int)(n & 0xff) | 1, churn_len);
		if (n & 1)
			madvise(m, churn_len, MADV_DONTNEED);
		munmap(m, churn_len);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	size_t mib = 64;
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : "0";
		if (strcmp(argv[i], "--check") == 0)
			check = 1;
		else if (strcmp(argv[i], "--mib") == 0 && ++i)
			mib = strtoul(v, NULL, 0);
		else if (strcmp(argv[i], "--threads") == 0 && ++i)
			nthreads = strtoul(v, NULL, 0);
		else if (strcmp(argv[i], "--churn-mib") == 0 && ++i)
			churn_len = strtoul(v, NULL, 0) << 20;
		else if (strcmp(argv[i], "--spare-mib") == 0 && ++i)
			spare_len = strtoul(v, NULL, 0) << 20;
		else if (strcmp(argv[i], "--cold-mib") == 0 && ++i)
			cold_len = strtoul(v, NULL, 0) << 20;
	}
	if (!mib || !nthreads || nthreads > 64) {
		fprintf(stderr, "usage: live_counter [--mib M] [--threads 1-64] [--churn-mib C] "
				"[--spare-mib S] [--cold-mib K] [--check]\n");
		return 2;
	}
	pages = (mib << 20) / PAGE;
	/* The churned memory is mapped first: above the region (mappings
	 * go down from the top), so a checkpoint copies it last, after the
	 * region, and the churner unmaps it meanwhile; each new mapping of
	 * it takes the same place again. */
	char *churn = NULL;
	if (churn_len) {
		churn = mmap(NULL, churn_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			     -1, 0);
		if (churn == MAP_FAILED) {
			perror("live_counter: mmap");
			return 2;
		}
		memset(churn, 1, churn_len);
	}
	if (spare_len) {
		spare = mmap(NULL, spare_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			     -1, 0);
		if (spare == MAP_FAILED) {
			perror("live_counter: mmap");
			return 2;
		}
		memset(spare, 0x5a, spare_len);
	}
	if (cold_len) {
		cold = mmap(NULL, cold_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			    0);
		if (cold == MAP_FAILED) {
			perror("live_counter: mmap");
			return 2;
		}
		for (size_t i = 0; i < cold_len / 8; i++)
			((uint64_t *)cold)[i] = cold_word(i);
	}
	region = mmap(NULL, mib << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED) {
		perror("live_counter: mmap");
		return 2;
	}
	sweeps = calloc(nthreads, sizeof(*sweeps));
	pthread_barrier_init(&first, NULL, (unsigned)nthreads + 1);
	for (size_t t = 0; t < nthreads; t++) {
		pthread_t th;
		pthread_create(&th, NULL, writer, (void *)(uintptr_t)t);
	}
	pthread_barrier_wait(&first);
	if (churn_len) {
		pthread_t th;
		pthread_create(&th, NULL, churner, churn);
	}
	printf("ready %d %lx %zu\n", (int)getpid(), (unsigned long)region, nthreads);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "sweeps", 6) == 0) {
			uint64_t n = 0;
			for (size_t t = 0; t < nthreads; t++)
				n += sweeps[t];
			printf("sweeps %llu\n", (unsigned long long)n);
		} else if (strncmp(line, "verify", 6) == 0) {
			size_t bad = cold_bad();
			if (bad)
				printf("verify bad %zu\n", bad);
			else
				printf("verify ok\n");
		} else if (spare && strncmp(line, "dontneed", 8) == 0) {
			printf(madvise(spare, spare_len, MADV_DONTNEED) == 0 ? "dropped\n"
									     : "dontneed failed\n");
		} else if (spare && strncmp(line, "unmap", 5) == 0) {
			printf(munmap(spare, spare_len) == 0 ? "unmapped\n" : "unmap failed\n");
			spare = NULL;
		} else if (strncmp(line, "exit", 4) == 0) {
			printf("bye\n");
			fflush(stdout);
			_exit(0);
		}
		fflush(stdout);
	}
	_exit(0);
}
