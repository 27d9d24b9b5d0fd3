/* first_touch: the latency of a thread's first touch of evicted pages,
 * one page at a time, as the program sees it (bench/first_touch.sh).
 *
 *   first_touch MIB [STRIDE_PAGES]
 *
 * Maps MIB MiB private anonymous memory in small pages, writes every page
 * and prints "ready PID". Each line "go N" on stdin then touches N pages
 * (a read of the first byte), each STRIDE_PAGES (default 37) pages after
 * the last, wrapping (0: each a random page), timing each touch with CLOCK_MONOTONIC, and prints
 * "touch N p50 P50 p90 P90 p99 P99 max MAX" in microseconds, and "bad K"
 * if a page did not hold its pattern. */
#include "timing.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	size_t len = strtoull(argv[1], NULL, 0) << 20;
	size_t stride = argc > 2 ? strtoull(argv[2], NULL, 0) : 37;
	size_t pages = len / 4096;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || !pages)
		return 1;
	madvise(m, len, MADV_NOHUGEPAGE);
	for (size_t p = 0; p < pages; p++)
		memset(m + p * 4096, (int)(p * 7 + 1) & 0xff, 4096);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[64];
	size_t at = 0;
	uint64_t rng = 1;
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strtoull(line + 3, NULL, 0);
		if (strncmp(line, "go ", 3) || !n)
			continue;
		uint64_t *lat = calloc(n, sizeof(*lat));
		size_t bad = 0;
		for (size_t i = 0; i < n; i++) {
			/* stride 0: a random page each time (splitmix64) */
			if (stride) {
				at = (at + stride) % pages;
			} else {
				uint64_t x = (rng += 0x9e3779b97f4a7c15ull);
				x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
				x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
				at = (size_t)((x ^ (x >> 31)) % pages);
			}
			volatile uint8_t *p = m + at * 4096;
			uint64_t t0 = now_ns();
			uint8_t v = *p;
			lat[i] = now_ns() - t0;
			bad += v != ((at * 7 + 1) & 0xff);
		}
		qsort(lat, n, sizeof(*lat), cmp_u64);
		printf("touch %zu p50 %.1f p90 %.1f p99 %.1f max %.1f\n", n, lat[n / 2] / 1e3,
		       lat[n * 9 / 10] / 1e3, lat[n * 99 / 100] / 1e3, lat[n - 1] / 1e3);
		/* The touches that waited for a fault (over 20 us; a touch of
		 * a page already in place costs a few): how many, and their
		 * own percentiles. */
		size_t k = 0;
		while (k < n && lat[k] <= 20000)
			k++;
		if (k < n)
			printf("faults %zu p50 %.1f p90 %.1f p99 %.1f\n", n - k,
			       lat[k + (n - k) / 2] / 1e3, lat[k + (n - k) * 9 / 10] / 1e3,
			       lat[k + (n - k) * 99 / 100] / 1e3);
		if (bad)
			printf("bad %zu\n", bad);
		fflush(stdout);
		free(lat);
	}
	return 0;
}
