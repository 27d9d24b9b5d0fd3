/*
 * region_fill — make regions until refused, then report how many the
 * process has: for testing max_regions.
 *
 * Usage: region_fill MAX
 *
 * Maps one page at a time, alternating PROT_READ and PROT_NONE so that
 * neighbours never merge; every mmap is a new region. Stops at the first
 * failure or after MAX mappings.
 *
 * Output: "made N, stopped by ERRNO, regions R" (R counted from
 * /proc/self/maps afterwards, without allocating). Exit 0; 101 on setup
 * failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int max = argc > 1 ? atoi(argv[1]) : 1000, made = 0, err = 0;
	long page = sysconf(_SC_PAGESIZE);
	/* Nothing below may allocate once the limit is reached: the maps file
	 * is opened first, read and printed without stdio. */
	int fd = open("/proc/self/maps", O_RDONLY);
	if (fd < 0)
		return 101;
	for (; made < max; made++) {
		void *p = mmap(NULL, (size_t)page, made % 2 ? PROT_NONE : PROT_READ,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			err = errno;
			break;
		}
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
