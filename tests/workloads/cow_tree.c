/* cow_tree: a forked tree sharing a heap copy-on-write, for the evict
 * tests (tests/bats/evict_safety.bats) and bench/cow.sh.
 *
 * Usage: cow_tree [--mib M] [--children K] [--stride S] [--fill-stride F]
 * The parent fills M MiB (default 64) of private anonymous memory, every
 * word of every F-th page (default 1: all) a function of its address (the
 * other pages are never touched: a sparse heap), then forks K children
 * (default 4).
 * Child c writes the first word of every S-th page (default 64) starting
 * at page c: its pages are its own, the rest stays shared with the parent
 * and the other children until someone writes it. Then it prints
 * "heap ADDRESS BYTES" and "ready PARENT CHILD..." and reads stdin:
 *   verify  every process checks every word of its view of the heap ->
 *           "verify ok" or "verify bad N" (words that differ, summed)
 *   exit    (or EOF) the children exit, then the parent.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAXK 64

static uint64_t *heap;
static size_t words, pages, stride = 64, fill = 1;

static uint64_t base_word(size_t i)
{
	return (uint64_t)i * 0x9e3779b97f4a7c15ull ^ 0xc0ffee;
}

static uint64_t child_word(int c, size_t page)
{
	return ((uint64_t)(c + 1) << 48) | page;
}

/* Words of the heap that differ from what child c (-1: the parent) must see. */
static uint64_t bad_words(int c)
{
	uint64_t bad = 0;
	size_t per = PAGE / 8;
	for (size_t i = 0; i < words; i++) {
		size_t p = i / per;
		uint64_t want = p % fill ? 0 : base_word(i);
		if (c >= 0 && i % per == 0 && p % stride == (size_t)c % stride)
			want = child_word(c, p);
		bad += heap[i] != want;
	}
	return bad;
}

static void child(int c, int cmd, int res)
{
	size_t per = PAGE / 8;
	for (size_t p = (size_t)c % stride; p < pages; p += stride)
		heap[p * per] = child_word(c, p);
	uint64_t ready = 0;
	if (write(res, &ready, sizeof(ready)) != sizeof(ready))
		_exit(2);
	char op;
	while (read(cmd, &op, 1) == 1 && op == 'v') {
		uint64_t bad = bad_words(c);
		if (write(res, &bad, sizeof(bad)) != sizeof(bad))
			_exit(2);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	size_t mib = 64, k = 4;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--mib") == 0)
			mib = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--children") == 0)
			k = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--stride") == 0)
			stride = strtoul(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--fill-stride") == 0)
			fill = strtoul(argv[i + 1], NULL, 0);
	}
	if (!mib || k > MAXK || !stride || !fill) {
		fprintf(stderr,
			"usage: cow_tree [--mib M] [--children 0-%d] [--stride S] [--fill-stride F]\n",
			MAXK);
		return 2;
	}
	size_t len = mib << 20;
	heap = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == MAP_FAILED) {
		perror("cow_tree: mmap");
		return 2;
	}
	/* 4 KiB pages: a huge page would be copied whole on a child's write. */
	madvise(heap, len, MADV_NOHUGEPAGE);
	words = len / 8;
	pages = len / PAGE;
	for (size_t i = 0; i < words; i++)
		if ((i / (PAGE / 8)) % fill == 0)
			heap[i] = base_word(i);
	int res[2];
	if (pipe(res) < 0)
		return 2;
	int cmd[MAXK];
	pid_t kid[MAXK];
	for (size_t c = 0; c < k; c++) {
		int p[2];
		if (pipe(p) < 0)
			return 2;
		kid[c] = fork();
		if (kid[c] < 0)
			return 2;
		if (kid[c] == 0) {
			close(p[1]);
			close(res[0]);
			child((int)c, p[0], res[1]);
		}
		close(p[0]);
		cmd[c] = p[1];
	}
	close(res[1]);
	for (size_t c = 0; c < k; c++) {
		uint64_t x;
		if (read(res[0], &x, sizeof(x)) != sizeof(x))
			return 2;
	}
	printf("heap %p %zu\n", (void *)heap, words * sizeof(*heap));
	printf("ready %d", (int)getpid());
	for (size_t c = 0; c < k; c++)
		printf(" %d", (int)kid[c]);
	printf("\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin) && strncmp(line, "exit", 4) != 0) {
		if (strncmp(line, "verify", 6) != 0)
			continue;
		uint64_t bad = bad_words(-1);
		for (size_t c = 0; c < k; c++)
			if (write(cmd[c], "v", 1) != 1)
				bad++;
		for (size_t c = 0; c < k; c++) {
			uint64_t b;
			if (read(res[0], &b, sizeof(b)) != sizeof(b))
				b = 1;
			bad += b;
		}
		if (bad)
			printf("verify bad %llu\n", (unsigned long long)bad);
		else
			printf("verify ok\n");
		fflush(stdout);
	}
	for (size_t c = 0; c < k; c++)
		close(cmd[c]);
	int st, fail = 0;
	for (size_t c = 0; c < k; c++)
		if (waitpid(kid[c], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			fail = 1;
	return fail;
}
