/* ckpt_raw: the raw bandwidths a checkpoint is measured against, in one
 * run, on the disk and CPU it uses (bench/checkpoint.sh).
 *
 * Usage: ckpt_raw [-m MIB] [-d] DIR      (-d: disk_direct only)
 * Prints key=value lines, bytes per second:
 *   disk_direct    O_DIRECT pwrite of 8 MiB buffers, then fdatasync
 *   disk_buffered  buffered write, then fsync
 *   memcpy_first   memcpy between two resident buffers, first pass
 *   memcpy_warm    the same again
 *   memcpy_fresh   memcpy into freshly mapped memory (faults, no THP)
 *   vm_readv_first process_vm_readv from another process, 512 KiB calls,
 *                  into a buffer never written by the kernel before
 *   vm_readv       the same again
 *   crc32c         the checksum memvisor uses (common/crc32c.c)
 * The file written in DIR is removed. */
#include "common/crc32c.c"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *populated(size_t len, char fill)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		perror("ckpt_raw: mmap");
		exit(2);
	}
	/* Not shared copy-on-write with the vm_readv child. */
	madvise(p, len, MADV_DONTFORK);
	memset(p, fill, len);
	return p;
}

static double disk(const char *dir, const char *src, size_t len, int direct)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/ckpt_raw.%d", dir, (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0600);
	if (fd < 0) {
		perror("ckpt_raw: open");
		exit(2);
	}
	unlink(path);
	size_t chunk = 8u << 20;
	double t0 = now();
	for (size_t off = 0; off < len; off += chunk)
		if (pwrite(fd, src + off, chunk, (off_t)off) != (ssize_t)chunk) {
			perror("ckpt_raw: pwrite");
			exit(2);
		}
	if (fdatasync(fd) < 0) {
		perror("ckpt_raw: fdatasync");
		exit(2);
	}
	double t = now() - t0;
	close(fd);
	return (double)len / t;
}

static double vm_readv(char *dst, size_t len)
{
	int pipefd[2];
	if (pipe(pipefd) < 0)
		exit(2);
	pid_t child = fork();
	if (child == 0) {
		char *mem = populated(len, 7);
		uint64_t addr = (uint64_t)(uintptr_t)mem;
		if (write(pipefd[1], &addr, sizeof(addr)) != sizeof(addr))
			_exit(2);
		pause();
		_exit(0);
	}
	uint64_t addr;
	if (read(pipefd[0], &addr, sizeof(addr)) != sizeof(addr))
		exit(2);
	size_t chunk = 512u << 10;
	double t = 0;
	for (int pass = 0; pass < 2; pass++) {
		double t0 = now();
		for (size_t off = 0; off < len; off += chunk) {
			struct iovec l = {dst + off, chunk}, r = {(void *)(uintptr_t)(addr + off), chunk};
			if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)chunk) {
				perror("ckpt_raw: process_vm_readv");
				exit(2);
			}
		}
		t = now() - t0;
		if (pass == 0)
			printf("vm_readv_first=%.0f\n", (double)len / t);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return (double)len / t;
}

int main(int argc, char **argv)
{
	size_t mib = 1024;
	int c, disk_only = 0;
	while ((c = getopt(argc, argv, "m:d")) != -1) {
		if (c == 'm')
			mib = strtoul(optarg, NULL, 0);
		else if (c == 'd')
			disk_only = 1;
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: ckpt_raw [-m MIB] DIR\n");
		return 2;
	}
	size_t len = mib << 20;
	char *src = populated(len, 1), *dst = disk_only ? NULL : populated(len, 2);
	printf("size=%zu\n", len);
	printf("disk_direct=%.0f\n", disk(argv[optind], src, len, 1));
	if (disk_only)
		return 0;
	printf("disk_buffered=%.0f\n", disk(argv[optind], src, len, 0));
	/* The first pass over a buffer pays for this VM's first touches
	 * (bench/README.md); the second is the memory's own speed. */
	double t0 = now();
	memcpy(dst, src, len);
	printf("memcpy_first=%.0f\n", (double)len / (now() - t0));
	t0 = now();
	memcpy(dst, src, len);
	printf("memcpy_warm=%.0f\n", (double)len / (now() - t0));
	char *fresh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	madvise(fresh, len, MADV_NOHUGEPAGE);
	t0 = now();
	memcpy(fresh, src, len);
	printf("memcpy_fresh=%.0f\n", (double)len / (now() - t0));
	munmap(fresh, len);
	printf("vm_readv=%.0f\n", vm_readv(dst, len));
	t0 = now();
	volatile uint32_t crc = crc32c(src, len);
	(void)crc;
	printf("crc32c=%.0f\n", (double)len / (now() - t0));
	printf("crc32c_impl=%s\n", crc32c_impl());
	return 0;
}
