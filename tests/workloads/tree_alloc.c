/*
 * tree_alloc — several forked children each map memory until they have
 * their share or the kernel (or memvisor) says ENOMEM, all holding it at
 * once: for testing a limit on a whole process tree.
 *
 * Usage: tree_alloc NCHILD MIB_EACH [CHUNK_MIB [HOLD_SECONDS]]
 *
 * Children run one after another (child i starts mapping when child i-1 is
 * done) and keep what they mapped until every child is done, so the sum
 * is what the tree held at its peak (for HOLD_SECONDS more, if given). Mappings are anonymous, PROT_READ|
 * PROT_WRITE and never touched: they cost address space, not memory.
 *
 * Output: one line per child, "child I: N MiB" with " (ENOMEM)" when it
 * stopped short, then "total: N MiB". Exit 0; 101 on setup failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct result {
	int mib;
	int err;
};

static void child(int mib, int chunk, int go, int done, int release, int release_wr)
{
	char c;
	close(release_wr); /* or the release pipe never reads EOF */
	if (read(go, &c, 1) != 1)
		_exit(101);
	struct result r = {0, 0};
	while (r.mib + chunk <= mib) {
		void *p = mmap(NULL, (size_t)chunk << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			r.err = errno;
			break;
		}
		r.mib += chunk;
	}
	if (write(done, &r, sizeof(r)) != sizeof(r))
		_exit(101);
	/* Hold the memory until everyone is done. */
	if (read(release, &c, 1) < 0)
		_exit(101);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tree_alloc NCHILD MIB_EACH [CHUNK_MIB]\n");
		return 100;
	}
	int n = atoi(argv[1]), mib = atoi(argv[2]), chunk = argc > 3 ? atoi(argv[3]) : 4;
	int done[2], release[2];
	if (pipe(done) || pipe(release))
		return 101;
	int *go = calloc((size_t)n, sizeof(int));
	for (int i = 0; i < n; i++) {
		int g[2];
		if (pipe(g))
			return 101;
		pid_t pid = fork();
		if (pid < 0) {
			printf("child %d: fork failed: %s\n", i, strerrorname_np(errno));
			n = i;
			break;
		}
		if (pid == 0)
			child(mib, chunk, g[0], done[1], release[0], release[1]);
		close(g[0]);
		go[i] = g[1];
	}
	close(release[0]);
	int total = 0;
	for (int i = 0; i < n; i++) {
		struct result r;
		if (write(go[i], "g", 1) != 1 || read(done[0], &r, sizeof(r)) != sizeof(r))
			return 101;
		printf("child %d: %d MiB%s\n", i, r.mib, r.err == ENOMEM ? " (ENOMEM)" : "");
		total += r.mib;
	}
	printf("total: %d MiB\n", total);
	fflush(stdout);
	if (argc > 4)
		sleep((unsigned)atoi(argv[4]));
	close(release[1]);
	while (wait(NULL) > 0)
		;
	return 0;
}
