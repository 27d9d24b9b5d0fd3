/* uffd_move: what the loader's install step costs if the image's pages are
 * moved into place (UFFDIO_MOVE, 6.8+) instead of copied (UFFDIO_COPY),
 * measured in one mm: what a helper sharing the program's mm would do
 * (issue 25, "a loader that does not copy"; bench/README.md).
 *
 *   uffd_move [-m MIB] [-c CHUNK_KIB] [-r REPS] [-d DIR] [-D] [MODE...]
 *
 * Writes an image of MIB MiB (default 256) to DIR (default /var/tmp) and,
 * for each mode, REPS times (alternating the modes), installs it into a
 * fresh region registered with a userfaultfd for missing pages, CHUNK_KIB
 * (default 2048) at a time:
 *
 *   copy      pread into a reused buffer, then UFFDIO_COPY (today's loader)
 *   move      pread into a staging area, then UFFDIO_MOVE from it (the
 *             staging pages are gone after the move: each read faults in
 *             fresh ones, zeroed by the kernel)
 *   move-thp  the same with the staging area and the region in 2 MiB
 *             pages (MADV_HUGEPAGE, aligned): whole huge pages move
 *   copy-collapse    copy into a region in 2 MiB pages, then MADV_COLLAPSE
 *             of it (how today's loader gives a program its huge pages)
 *   writev-move-thp  pread into a reused buffer, process_vm_writev into a
 *             2 MiB staging page (what a supervisor without a helper in
 *             the program's mm could do: one copy, through the kernel),
 *             then UFFDIO_MOVE of the whole huge page
 *
 * -D reads with O_DIRECT (the image dropped from the page cache first:
 * "cold"); otherwise the image is read once before ("warm"). Each install
 * is checked byte for byte against the image (outside the timing).
 * Prints, per mode, the medians of the install's CPU time (the thread's
 * user + system) per GiB and its wall rate. Exit 77 when the kernel has
 * no UFFDIO_MOVE. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#ifndef UFFDIO_MOVE
struct uffdio_move {
	uint64_t dst, src, len, mode;
	int64_t move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#endif

#define HUGE (2ul << 20)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum mode { M_COPY, M_MOVE, M_MOVE_THP, M_COPY_COLLAPSE, M_WRITEV_MOVE_THP, M_COUNT };
static const char *mode_name[M_COUNT] = {"copy", "move", "move-thp", "copy-collapse",
					 "writev-move-thp"};

static void die(const char *what)
{
	fprintf(stderr, "uffd_move: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* An anonymous area of len bytes aligned to 2 MiB. */
static char *area(size_t len, int huge)
{
	char *p = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	char *a = (char *)(((uintptr_t)p + HUGE - 1) & ~(HUGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + len, (size_t)(p + HUGE - a));
	if (madvise(a, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) < 0)
		die("madvise");
	return a;
}

static void full_pread(int fd, char *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, off);
		if (n <= 0)
			die("pread");
		buf += n, len -= (size_t)n, off += n;
	}
}

struct run {
	uint64_t cpu, wall;
};

static struct run install(enum mode m, int img, size_t size, size_t chunk, char *buf)
{
	int huge = m == M_MOVE_THP || m == M_COPY_COLLAPSE || m == M_WRITEV_MOVE_THP;
	int copies = m == M_COPY || m == M_COPY_COLLAPSE;
	char *dst = area(size, huge);
	char *stage = copies ? buf : area(chunk, huge);
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		die("userfaultfd");
	struct uffdio_api api = {.api = UFFD_API, .features = copies ? 0 : UFFD_FEATURE_MOVE};
	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		die("UFFDIO_API");
	struct uffdio_register reg = {.range = {(uintptr_t)dst, size}, .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		die("UFFDIO_REGISTER");

	uint64_t c0 = cpu_ns(), w0 = now_ns();
	for (size_t off = 0; off < size; off += chunk) {
		/* The staging pages moved away are holes: faulted in as one
		 * call, not a fault a page inside the read. */
		if (!copies && madvise(stage, chunk, MADV_POPULATE_WRITE) < 0)
			die("MADV_POPULATE_WRITE");
		if (m == M_WRITEV_MOVE_THP) {
			full_pread(img, buf, chunk, (off_t)off);
			struct iovec l = {buf, chunk}, r = {stage, chunk};
			if (process_vm_writev(getpid(), &l, 1, &r, 1, 0) != (ssize_t)chunk)
				die("process_vm_writev");
		} else {
			full_pread(img, stage, chunk, (off_t)off);
		}
		if (copies) {
			struct uffdio_copy cp = {.dst = (uintptr_t)(dst + off), .src = (uintptr_t)stage, .len = chunk};
			if (ioctl(uffd, UFFDIO_COPY, &cp) < 0)
				die("UFFDIO_COPY");
		} else {
			struct uffdio_move mv = {.dst = (uintptr_t)(dst + off), .src = (uintptr_t)stage, .len = chunk};
			if (ioctl(uffd, UFFDIO_MOVE, &mv) < 0)
				die("UFFDIO_MOVE");
		}
	}
	if (m == M_COPY_COLLAPSE) {
		if (ioctl(uffd, UFFDIO_UNREGISTER, &reg.range) < 0)
			die("UFFDIO_UNREGISTER");
		/* EAGAIN: a transient refusal (pages still on a CPU's LRU
		 * batch); once more, as the loader would. */
		int tries = 0;
		while (madvise(dst, size, MADV_COLLAPSE) < 0)
			if (errno != EAGAIN || ++tries == 3)
				die("MADV_COLLAPSE");
	}
	struct run r = {cpu_ns() - c0, now_ns() - w0};

	/* Checked outside the timing: every byte as the image has it. */
	for (size_t off = 0; off < size; off += chunk) {
		full_pread(img, buf, chunk, (off_t)off);
		if (memcmp(buf, dst + off, chunk) != 0) {
			fprintf(stderr, "uffd_move: %s: bytes differ at %zu\n", mode_name[m], off);
			exit(1);
		}
	}
	close(uffd);
	munmap(dst, size);
	if (!copies)
		munmap(stage, chunk);
	return r;
}

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_u64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	size_t mib = 256, chunk_kib = 2048;
	int reps = 5, direct = 0, opt;
	const char *dir = "/var/tmp";
	while ((opt = getopt(argc, argv, "m:c:r:d:D")) != -1) {
		switch (opt) {
		case 'm': mib = strtoul(optarg, NULL, 10); break;
		case 'c': chunk_kib = strtoul(optarg, NULL, 10); break;
		case 'r': reps = atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 'D': direct = 1; break;
		default:
			fprintf(stderr, "usage: uffd_move [-m MIB] [-c CHUNK_KIB] [-r REPS] [-d DIR] [-D] [MODE...]\n");
			return 2;
		}
	}
	size_t size = mib << 20, chunk = chunk_kib << 10;
	if (!mib || !chunk_kib || chunk_kib % 4 || size % chunk || reps < 1 || reps > 99) {
		fprintf(stderr, "uffd_move: MIB and CHUNK_KIB > 0, CHUNK_KIB a multiple of 4 dividing MIB, 1-99 reps\n");
		return 2;
	}
	int want[M_COUNT] = {0}, any = 0;
	for (int i = optind; i < argc; i++) {
		int k = 0;
		while (k < M_COUNT && strcmp(argv[i], mode_name[k]) != 0)
			k++;
		if (k == M_COUNT) {
			fprintf(stderr, "uffd_move: no mode %s\n", argv[i]);
			return 2;
		}
		want[k] = any = 1;
	}
	if (!any)
		for (int k = 0; k < M_COUNT; k++)
			want[k] = 1;

	/* The kernel's UFFDIO_MOVE, or exit 77. */
	int probe = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = {.api = UFFD_API};
	if (probe < 0 || ioctl(probe, UFFDIO_API, &api) < 0)
		die("userfaultfd");
	close(probe);
	if (!(api.features & UFFD_FEATURE_MOVE)) {
		fprintf(stderr, "uffd_move: no UFFDIO_MOVE in this kernel\n");
		return 77;
	}

	char path[4096];
	snprintf(path, sizeof path, "%s/uffd_move.XXXXXX", dir);
	int w = mkstemp(path);
	if (w < 0)
		die("mkstemp");
	char *buf = area(chunk, 0);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t off = 0; off < size; off += chunk) {
		for (size_t i = 0; i < chunk; i += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(buf + i, &x, 8);
		}
		if (write(w, buf, chunk) != (ssize_t)chunk)
			die("write");
	}
	if (fsync(w) < 0)
		die("fsync");
	int img = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
	if (img < 0)
		die(path);
	unlink(path);
	close(w);

	uint64_t cpu[M_COUNT][99], wall[M_COUNT][99];
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < M_COUNT; k++) {
			if (!want[k])
				continue;
			if (direct)
				posix_fadvise(img, 0, 0, POSIX_FADV_DONTNEED);
			else
				for (size_t off = 0; off < size; off += chunk)
					full_pread(img, buf, chunk, (off_t)off);
			struct run one = install((enum mode)k, img, size, chunk, buf);
			cpu[k][r] = one.cpu, wall[k][r] = one.wall;
		}

	double gib = (double)size / (1 << 30);
	printf("# %zu MiB, %zu KiB a read, %s, medians of %d\n", mib, chunk_kib,
	       direct ? "cold (O_DIRECT)" : "warm (page cache)", reps);
	printf("| mode | CPU s/GiB | MB/s |\n|---|---:|---:|\n");
	for (int k = 0; k < M_COUNT; k++) {
		if (!want[k])
			continue;
		double c = (double)median(cpu[k], reps) / 1e9, s = (double)median(wall[k], reps) / 1e9;
		printf("| %s | %.3f | %.0f |\n", mode_name[k], c / gib, (double)size / s / 1e6);
	}
	return 0;
}
