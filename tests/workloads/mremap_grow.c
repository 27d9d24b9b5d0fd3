/*
 * mremap_grow — one mapping grown by repeated mremap, then moved with
 * MREMAP_FIXED.
 *
 * Usage: mremap_grow [MAX_MIB=64]
 *
 * Maps one anonymous page and doubles it with mremap(MREMAP_MAYMOVE) until it
 * is MAX_MIB MiB. Before every other growth step a PROT_NONE guard page is
 * placed right after the mapping, so the kernel has to move it (the other
 * steps may grow in place). After each step the old part must still hold its
 * pattern, the new part must read as zeros, and is then filled. Then the whole
 * mapping is moved with MREMAP_MAYMOVE|MREMAP_FIXED into the middle of a
 * reserved PROT_NONE area (the result must be that address, the old range must
 * be gone), and moved once more with MREMAP_FIXED while growing by 16 pages.
 * The pattern depends only on the offset, never on the address, so the output
 * is the same however the kernel places things.
 *
 * Tests use it to check that memvisor keeps the size and the address of a
 * mapping right across moves (and that limits apply to mremap growth).
 *
 * Output: "grew to N bytes in K steps", "fixed moves ok", "checksum X".
 * Exit: 0 ok, 2 a syscall failed, 3 content mismatch, 100 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static size_t page_size;

/* FNV-1a step over a whole 64-bit word, plus a shift so high bits feed back. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * FNV_PRIME;
	return h ^ (h >> 29);
}

static void die_sys(const char *what)
{
	fprintf(stderr, "mremap_grow: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t pattern(size_t i)
{
	return (i * 0x9e3779b97f4a7c15ULL) ^ 0xa5a5a5a5a5a5a5a5ULL;
}

static void fill(uint64_t *w, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		w[i] = pattern(i);
}

static void verify(const char *what, const uint64_t *w, size_t from, size_t to, int zero)
{
	/* Fast branch-free pass first (vectorizes); locate a mismatch only if any. */
	uint64_t diff = 0;
	if (zero) {
		for (size_t i = from; i < to; i++)
			diff |= w[i];
	} else {
		for (size_t i = from; i < to; i++)
			diff |= w[i] ^ pattern(i);
	}
	if (!diff)
		return;
	for (size_t i = from; i < to; i++) {
		uint64_t want = zero ? 0 : pattern(i);
		if (w[i] != want) {
			fprintf(stderr,
				"mremap_grow: %s: mismatch at byte offset %zu: got 0x%016" PRIx64
				" want 0x%016" PRIx64 "\n",
				what, i * 8, w[i], want);
			exit(3);
		}
	}
}

static int is_unmapped(void *p, size_t len)
{
	unsigned char vec[16];
	size_t n = len / page_size < 16 ? len / page_size : 16;
	return mincore(p, n * page_size, vec) != 0 && errno == ENOMEM;
}

int main(int argc, char **argv)
{
	size_t max_mib = 64;

	page_size = (size_t)sysconf(_SC_PAGESIZE);
	if (argc > 2) {
		fprintf(stderr, "usage: mremap_grow [MAX_MIB]\n");
		return 100;
	}
	if (argc == 2) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || v < 1 || v > 65536) {
			fprintf(stderr, "mremap_grow: bad MAX_MIB '%s' (1..65536)\n", argv[1]);
			return 100;
		}
		max_mib = v;
	}
	size_t max = max_mib << 20;

	size_t len = page_size;
	uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die_sys("mmap");
	fill(p, 0, len / 8);

	int steps = 0, moves = 0;
	while (len < max) {
		size_t nlen = len * 2 > max ? max : len * 2;
		char *end = (char *)p + len;
		void *guard = MAP_FAILED;
		if (steps % 2 == 0) {
			guard = mmap(end, page_size, PROT_NONE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (guard != MAP_FAILED && guard != end) {
				/* Old kernel treated it as a hint: not a guard. */
				munmap(guard, page_size);
				guard = MAP_FAILED;
			}
		}
		uint64_t *q = mremap(p, len, nlen, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			die_sys("mremap(MREMAP_MAYMOVE)");
		if (guard != MAP_FAILED && munmap(guard, page_size) != 0)
			die_sys("munmap(guard)");
		if (q != p)
			moves++;
		verify("grow: old part", q, 0, len / 8, 0);
		verify("grow: new part zero", q, len / 8, nlen / 8, 1);
		fill(q, len / 8, nlen / 8);
		p = q;
		len = nlen;
		steps++;
	}
	fprintf(stderr, "mremap_grow: %d steps, %d moved\n", steps, moves);
	printf("grew to %zu bytes in %d steps\n", len, steps);

	/* MREMAP_FIXED into the middle of a reserved area. */
	size_t rlen = len + 2 * page_size;
	char *res = mmap(NULL, rlen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		die_sys("mmap(reserve)");
	void *target = res + page_size;
	void *old = p;
	uint64_t *q = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, target);
	if (q == MAP_FAILED)
		die_sys("mremap(MREMAP_FIXED)");
	if ((void *)q != target) {
		fprintf(stderr, "mremap_grow: MREMAP_FIXED moved to the wrong address\n");
		return 3;
	}
	if (!is_unmapped(old, len)) {
		fprintf(stderr, "mremap_grow: old range still mapped after MREMAP_FIXED\n");
		return 3;
	}
	verify("fixed move", q, 0, len / 8, 0);
	p = q;

	/* MREMAP_FIXED while growing, into a second reservation. */
	size_t glen = len + 16 * page_size;
	char *res2 =
	    mmap(NULL, glen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res2 == MAP_FAILED)
		die_sys("mmap(reserve 2)");
	q = mremap(p, len, glen, MREMAP_MAYMOVE | MREMAP_FIXED, res2);
	if (q == MAP_FAILED)
		die_sys("mremap(MREMAP_FIXED grow)");
	if ((char *)q != res2) {
		fprintf(stderr, "mremap_grow: MREMAP_FIXED grow moved to the wrong address\n");
		return 3;
	}
	if (!is_unmapped(p, len)) {
		fprintf(stderr, "mremap_grow: old range still mapped after MREMAP_FIXED grow\n");
		return 3;
	}
	verify("fixed grow: new part zero", q, len / 8, glen / 8, 1);
	fill(q, len / 8, glen / 8);
	p = q;
	len = glen;
	printf("fixed moves ok\n");

	uint64_t h = fnv_u64(FNV_OFFSET, len);
	for (size_t i = 0; i < len / 8; i++) {
		if (p[i] != pattern(i)) {
			fprintf(stderr, "mremap_grow: final mismatch at byte offset %zu\n", i * 8);
			return 3;
		}
		h = fnv_u64(h, p[i]);
	}
	if (munmap(p, len) != 0)
		die_sys("munmap");
	/* What is left of the first reservation: its first and last page. */
	if (munmap(res, rlen) != 0)
		die_sys("munmap(reserve)");
	printf("checksum %016" PRIx64 "\n", h);
	return fflush(stdout) == 0 ? 0 : 2;
}
