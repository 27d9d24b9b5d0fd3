/* many_regions N: make a process with about N regions (a mapping whose
 * pages alternate between PROT_READ and PROT_READ|PROT_WRITE, so the
 * kernel cannot merge them), touch every page, print "ready" and wait for
 * EOF on stdin. Used by bench/regions.sh to time the regions query. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long page = sysconf(_SC_PAGESIZE);
	/* The program itself has about 25 regions. */
	long pages = n > 30 ? n - 25 : 1;
	char *p = mmap(NULL, (size_t)(pages * page), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("many_regions: mmap");
		return 2;
	}
	for (long i = 0; i < pages; i++)
		p[i * page] = 1;
	for (long i = 1; i < pages; i += 2) {
		if (mprotect(p + i * page, (size_t)page, PROT_READ) < 0) {
			perror("many_regions: mprotect (vm.max_map_count?)");
			return 2;
		}
	}
	printf("ready\n");
	fflush(stdout);
	char buf[64];
	while (fgets(buf, sizeof(buf), stdin))
		;
	return 0;
}
