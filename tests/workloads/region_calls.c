/*
 * region_calls — split one mapping into many regions by a call other than
 * mmap/mprotect, until refused: for testing that max_regions counts every
 * call that makes or splits a region.
 *
 * Usage: region_calls HOW MAX
 *   HOW: mbind (MPOL_LOCAL on every other page), mseal (every other page),
 *        anon_name (prctl PR_SET_VMA_ANON_NAME, every other page),
 *        uffd (UFFDIO_REGISTER every other page), io_setup (one AIO ring
 *        mapping per context)
 *
 * Output: "made N, stopped by ERRNO, regions R" (R counted from
 * /proc/self/maps afterwards, without allocating). Exit 0; 101 on setup
 * failure; 77 with "unsupported ERRNO" when the kernel lacks the call for
 * the first attempt (ENOSYS, EINVAL, EPERM).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA	     0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
#define MPOL_LOCAL_ 4
#define NR_MSEAL    462

static int uffd = -1;

static long one(const char *how, char *base, long page, int i)
{
	char *p = base + 2L * i * page;
	if (!strcmp(how, "mbind"))
		return syscall(SYS_mbind, p, page, MPOL_LOCAL_, NULL, 0, 0);
	if (!strcmp(how, "mseal"))
		return syscall(NR_MSEAL, p, page, 0);
	if (!strcmp(how, "anon_name"))
		return prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, p, page, "mv");
	if (!strcmp(how, "uffd")) {
		struct uffdio_register r = {.range = {.start = (unsigned long)p, .len = page},
					    .mode = UFFDIO_REGISTER_MODE_MISSING};
		return ioctl(uffd, UFFDIO_REGISTER, &r);
	}
	if (!strcmp(how, "io_setup")) {
		unsigned long ctx = 0;
		return syscall(SYS_io_setup, 1, &ctx);
	}
	errno = EINVAL;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 101;
	const char *how = argv[1];
	int max = atoi(argv[2]), made = 0, err = 0;
	long page = sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/maps", O_RDONLY);
	char *base = mmap(NULL, 2L * max * page + page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fd < 0 || base == MAP_FAILED)
		return 101;
	if (!strcmp(how, "uffd")) {
		/* UFFD_USER_MODE_ONLY: allowed without privilege whatever
		 * vm.unprivileged_userfaultfd says (Linux 5.11). */
		uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | 1);
		struct uffdio_api api = {.api = UFFD_API};
		if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0) {
			printf("unsupported %s\n", strerrorname_np(errno));
			return 77;
		}
	}
	for (; made < max; made++) {
		if (one(how, base, page, made) < 0) {
			err = errno;
			break;
		}
	}
	if (made == 0 && (err == ENOSYS || err == EINVAL || err == EPERM)) {
		printf("unsupported %s\n", strerrorname_np(err));
		return 77;
	}
	static char buf[1 << 16];
	int regions = 0;
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			regions += buf[i] == '\n';
	char line[128];
	int len = snprintf(line, sizeof(line), "made %d, stopped by %s, regions %d\n", made,
			   err ? strerrorname_np(err) : "none", regions);
	return write(1, line, (size_t)len) == len ? 0 : 101;
}
