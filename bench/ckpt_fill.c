/* ckpt_fill: memory to checkpoint, for bench/checkpoint.sh.
 *
 * Usage: ckpt_fill [-m MIB] [-s STRIDE] [-t]
 *   -m MIB     size of the private anonymous region (default 1024)
 *   -s STRIDE  write one page in STRIDE (default 1: dense)
 *   -t         allow transparent huge pages (default: MADV_NOHUGEPAGE,
 *              so that a sparse region stays sparse)
 * Prints "ready PID" once the memory is written, then waits for EOF on
 * stdin and exits 0. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t mib = 1024, stride = 1;
	int thp = 0, c;
	while ((c = getopt(argc, argv, "m:s:t")) != -1) {
		if (c == 'm')
			mib = strtoul(optarg, NULL, 0);
		else if (c == 's')
			stride = strtoul(optarg, NULL, 0);
		else if (c == 't')
			thp = 1;
		else
			return 2;
	}
	size_t len = mib << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("ckpt_fill: mmap");
		return 2;
	}
	madvise(p, len, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	uint64_t x = 88172645463325252ull;
	for (size_t off = 0; off < len; off += 4096 * stride) {
		uint64_t *w = (uint64_t *)(void *)(p + off);
		for (size_t i = 0; i < 512; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			w[i] = x;
		}
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char buf[256];
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
