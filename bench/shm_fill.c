/* shm_fill: ways to put evicted pages back into a shmem object (a memfd
 * whose pages were punched out), timed; the choice is in docs/reload.md,
 * "Shared memory".
 *
 *   shm_fill [MIB] [RUNS]     (default 256 MiB, 5 runs; medians)
 *
 * A memfd is mapped twice: "program" (registered with a userfaultfd) and
 * "memvisor" (not registered, or registered when it is the target).
 *   copy-4k     UFFDIO_COPY in 4 KiB units into the registered mapping
 *   copy-2m     UFFDIO_COPY in 2 MiB units (what memvisor does)
 *   memcpy+cont memcpy into memvisor's unregistered mapping, then
 *               UFFDIO_CONTINUE of the program's mapping in 2 MiB units
 *               (minor mode); also the CONTINUE alone
 *   pwrite      pwrite(2) on the memfd, 2 MiB at a time (no PTEs)
 * Each run punches the whole object first (FALLOC_FL_PUNCH_HOLE). */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef UFFD_FEATURE_MINOR_SHMEM
#define UFFD_FEATURE_MINOR_SHMEM (1 << 10)
#endif
#ifndef UFFDIO_REGISTER_MODE_MINOR
#define UFFDIO_REGISTER_MODE_MINOR ((__u64)1 << 2)
#endif

#define UNIT (2u << 20)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int uffd_new(uint64_t features)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	struct uffdio_api api = {.api = UFFD_API, .features = features};
	if (fd < 0 || ioctl(fd, UFFDIO_API, &api) < 0)
		die("userfaultfd");
	return fd;
}

static void reg(int uffd, void *p, size_t len, uint64_t mode)
{
	struct uffdio_register r = {.range = {(uint64_t)(uintptr_t)p, len}, .mode = mode};
	if (ioctl(uffd, UFFDIO_REGISTER, &r) < 0)
		die("UFFDIO_REGISTER");
}

static void punch(int fd, size_t len)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)len) < 0)
		die("punch");
}

static void copy(int uffd, char *dst, const char *src, size_t len, size_t unit)
{
	for (size_t o = 0; o < len; o += unit) {
		struct uffdio_copy c = {(uint64_t)(uintptr_t)(dst + o), (uint64_t)(uintptr_t)(src + o % UNIT),
					unit, 0, 0};
		if (ioctl(uffd, UFFDIO_COPY, &c) < 0)
			die("UFFDIO_COPY");
	}
}

static void cont(int uffd, char *dst, size_t len)
{
	for (size_t o = 0; o < len; o += UNIT) {
		struct uffdio_continue c = {.range = {(uint64_t)(uintptr_t)(dst + o), UNIT}};
		if (ioctl(uffd, UFFDIO_CONTINUE, &c) < 0)
			die("UFFDIO_CONTINUE");
	}
}

int main(int argc, char **argv)
{
	size_t len = (argc > 1 ? strtoull(argv[1], NULL, 10) : 256) << 20;
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	char *src = aligned_alloc(UNIT, UNIT);
	for (size_t i = 0; i < UNIT; i++)
		src[i] = (char)(i * 131 + 7);
	int fd = (int)syscall(SYS_memfd_create, "shm_fill", 0);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		die("memfd");
	enum { C4K, C2M, MEMCPY_CONT, CONT_ONLY, PWRITE, N };
	const char *name[N] = {"copy-4k", "copy-2m", "memcpy+cont", "cont-only", "pwrite"};
	double t[N][64];
	for (int r = 0; r < runs && r < 64; r++) {
		for (int m = 0; m < N; m++) {
			if (m == CONT_ONLY)
				continue;
			char *prog = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			char *mine = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (prog == MAP_FAILED || mine == MAP_FAILED)
				die("mmap");
			punch(fd, len);
			int uffd = uffd_new(m == MEMCPY_CONT ? UFFD_FEATURE_MINOR_SHMEM
							     : UFFD_FEATURE_MISSING_SHMEM);
			double t0 = now(), t1 = 0;
			if (m == C4K || m == C2M) {
				reg(uffd, prog, len, UFFDIO_REGISTER_MODE_MISSING);
				t0 = now();
				copy(uffd, prog, src, len, m == C4K ? 4096 : UNIT);
			} else if (m == MEMCPY_CONT) {
				reg(uffd, prog, len,
				    UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR);
				t0 = now();
				for (size_t o = 0; o < len; o += UNIT)
					memcpy(mine + o, src, UNIT);
				t1 = now();
				cont(uffd, prog, len);
			} else {
				t0 = now();
				for (size_t o = 0; o < len; o += UNIT)
					if (pwrite(fd, src, UNIT, (off_t)o) != UNIT)
						die("pwrite");
			}
			double t2 = now();
			t[m][r] = t2 - t0;
			if (m == MEMCPY_CONT)
				t[CONT_ONLY][r] = t2 - t1;
			close(uffd);
			munmap(prog, len);
			munmap(mine, len);
		}
	}
	printf("%zu MiB, %d runs, medians\n", len >> 20, runs);
	for (int m = 0; m < N; m++) {
		qsort(t[m], (size_t)runs, sizeof(double), cmp);
		double med = t[m][runs / 2];
		printf("%-12s %8.1f ms %6.2f GB/s\n", name[m], med * 1e3, (double)len / med / 1e9);
	}
	return 0;
}
