/* rb_iter MIB PAGES MODE [N]: one iteration of fuzzing-like work, reset
 * between iterations (bench/rollback.sh, issue 26).
 *
 * MIB MiB of heap, all written once. An iteration writes PAGES
 * pseudo-random pages of it.
 *
 *   fork N    the fork-server baseline (AFL's scheme): for each of N
 *             iterations the parent forks, the child does the iteration and
 *             exits, the parent waits. Prints "fork n=N p50_us=P50
 *             p99_us=P99 per_s=R" (each iteration's time, iterations a
 *             second).
 *   plain N   the iterations one after another, never reset (the work's
 *             own cost). The same line, "plain".
 *   stdin     for memvisor's mark and rollback: prints "ready PID", then
 *             for each byte read from stdin does an iteration seeded by
 *             that byte and writes one byte "d" to stdout. A rollback to a
 *             mark taken in the read puts it back before the next one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG 4096ul

static unsigned char *heap;
static size_t npages;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void iteration(uint64_t seed, size_t pages)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < pages; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		heap[(s % npages) * PG + (s >> 40) % PG] ^= 1;
	}
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *mode, uint64_t *t, size_t n, uint64_t total)
{
	qsort(t, n, sizeof(*t), cmp);
	printf("%s n=%zu p50_us=%.1f p99_us=%.1f per_s=%.0f\n", mode, n,
	       (double)t[n / 2] / 1e3, (double)t[n * 99 / 100] / 1e3, (double)n * 1e9 / (double)total);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: rb_iter MIB PAGES fork|plain|stdin [N]\n");
		return 2;
	}
	size_t len = strtoul(argv[1], NULL, 0) << 20, pages = strtoul(argv[2], NULL, 0);
	const char *mode = argv[3];
	size_t n = argc > 4 ? strtoul(argv[4], NULL, 0) : 1000;
	npages = len / PG;
	heap = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < len; i += PG)
		heap[i] = (unsigned char)i;
	if (strcmp(mode, "stdin") == 0) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		unsigned char c;
		while (read(0, &c, 1) == 1) {
			iteration(c, pages);
			if (write(1, "d", 1) != 1)
				return 1;
		}
		return 0;
	}
	uint64_t *t = calloc(n, sizeof(*t)), start = now_ns();
	for (size_t i = 0; i < n; i++) {
		uint64_t a = now_ns();
		if (strcmp(mode, "fork") == 0) {
			pid_t pid = fork();
			if (pid == 0) {
				iteration(i, pages);
				_exit(0);
			}
			int st;
			waitpid(pid, &st, 0);
		} else {
			iteration(i, pages);
		}
		t[i] = now_ns() - a;
	}
	report(mode, t, n, now_ns() - start);
	return 0;
}
