/*
 * mmap_pairs — time mmap+munmap pairs, for comparing how a policy is
 * enforced (in the kernel, or through a notification).
 *
 * Usage: mmap_pairs [PAIRS [KIB [PROT]]]
 *   PAIRS  number of mmap+munmap pairs (default 20000)
 *   KIB    mapping size in KiB (default 64)
 *   PROT   "rw" (default) or "rx" (PROT_READ|PROT_EXEC of a file, which a
 *          W^X policy must look at)
 *
 * Output: "N pairs, M ns per pair" (wall clock, after a short warm-up).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	size_t len = (size_t)(argc > 2 ? atol(argv[2]) : 64) << 10;
	int rx = argc > 3 && strcmp(argv[3], "rx") == 0;
	int fd = -1, prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
	if (rx) {
		fd = open("/proc/self/exe", O_RDONLY);
		if (fd < 0)
			return 101;
		prot = PROT_READ | PROT_EXEC;
		flags = MAP_PRIVATE;
		len = 4096;
	}
	long long t0 = 0;
	for (long i = -n / 10; i < n; i++) {
		if (i == 0)
			t0 = now_ns();
		void *p = mmap(NULL, len, prot, flags, fd, 0);
		if (p == MAP_FAILED || munmap(p, len))
			return 1;
	}
	long long dt = now_ns() - t0;
	printf("%ld pairs, %lld ns per pair\n", n, dt / n);
	return 0;
}
