/* mappings: a process with known mappings, for the regions tests.
 *
 * Makes: a dense private anonymous region (64 pages, all written), a
 * read-only private file mapping (/proc/self/exe, first page read), a
 * written private file mapping (a temporary file, 4 pages, 2 written),
 * shared anonymous memory (16 pages, 8 written), a memfd mapping (8 pages,
 * all written), a PROT_NONE guard of 4 pages between two RW pages, and a
 * 1 GiB sparse region with one page in 16 written. Prints "ready <pid>"
 * and one line per mapping ("NAME START END"), then waits for EOF on
 * stdin (or "fork"/"exec" commands for the ps tests) and exits 0. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL

static void *xmap(void *addr, size_t len, int prot, int flags, int fd, const char *what)
{
	void *p = mmap(addr, len, prot, flags, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mappings: mmap %s: %m\n", what);
		exit(2);
	}
	printf("%s %lx %lx\n", what, (unsigned long)p, (unsigned long)p + len);
	return p;
}

static void touch(char *p, size_t len, size_t stride)
{
	for (size_t off = 0; off < len; off += stride)
		p[off] = (char)(off / PAGE + 1);
}

int main(int argc, char **argv)
{
	char *dense = xmap(NULL, 64 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, "dense");
	touch(dense, 64 * PAGE, PAGE);

	int exe = open("/proc/self/exe", O_RDONLY);
	char *ro = xmap(NULL, PAGE, PROT_READ, MAP_PRIVATE, exe, "file_ro");
	volatile char c = ro[0];
	(void)c;

	char tmpl[] = "/tmp/mappings.XXXXXX";
	int tf = mkstemp(tmpl);
	if (tf < 0 || ftruncate(tf, 4 * PAGE) < 0) {
		perror("mappings: temp file");
		return 2;
	}
	unlink(tmpl);
	char *cow = xmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, tf, "file_cow");
	touch(cow, 2 * PAGE, PAGE);

	char *shared = xmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, "shared");
	touch(shared, 8 * PAGE, PAGE);

	int mfd = memfd_create("mappings-memfd", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, 8 * PAGE) < 0) {
		perror("mappings: memfd");
		return 2;
	}
	char *mem = xmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, "memfd");
	touch(mem, 8 * PAGE, PAGE);

	/* RW page, 4-page PROT_NONE guard, RW page. */
	char *g = xmap(NULL, 6 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, "guarded");
	if (mprotect(g + PAGE, 4 * PAGE, PROT_NONE) < 0) {
		perror("mappings: mprotect");
		return 2;
	}
	g[0] = 1;
	g[5 * PAGE] = 1;

	char *sparse = xmap(NULL, 1UL << 30, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, "sparse");
	/* No huge pages here: the test counts 4 KiB pages. */
	madvise(sparse, 1UL << 30, MADV_NOHUGEPAGE);
	touch(sparse, 1UL << 30, 16 * PAGE);

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[256];
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "fork", 4) == 0) {
			/* A child that execs sleep; the parent reports its pid. */
			pid_t pid = fork();
			if (pid == 0) {
				execlp("sleep", "sleep", "300", (char *)NULL);
				_exit(127);
			}
			printf("child %d\n", (int)pid);
		} else if (strncmp(line, "reap", 4) == 0) {
			pid_t pid = (pid_t)atoi(line + 5);
			kill(pid, SIGTERM);
			waitpid(pid, NULL, 0);
			printf("reaped %d\n", (int)pid);
		} else if (strncmp(line, "mmap ", 5) == 0) {
			size_t len = strtoul(line + 5, NULL, 0);
			xmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, "asked");
		}
		fflush(stdout);
	}
	return 0;
}
