/*
 * mem_static — memory syscalls from a statically linked program.
 *
 * Usage: mem_static [ROUNDS=4]
 *
 * Built with -static (the Makefile links every *_static.c that way), so no
 * dynamic loader runs and glibc's startup is the static one. Each round:
 *   brk    — sbrk() the heap up in several steps (each new piece must be zero),
 *            fill, verify, shrink it back with sbrk(-n) and raw brk(), grow
 *            again (the regrown pages must read as zeros), and finally return
 *            the break to where the round started;
 *   mmap   — anonymous mapping, filled, grown with mremap(MREMAP_MAYMOVE)
 *            three times, verified after every step, unmapped;
 *   malloc — small blocks (brk arena) and large blocks (mmap'd by malloc),
 *            a large block grown by realloc (mremap inside glibc), all
 *            verified and freed.
 * The brk phase runs before anything else in the round allocates, so malloc
 * never owns memory above the break being moved.
 *
 * Tests run it natively and under memvisor and compare stdout.
 *
 * Output: "round N checksum X" per round, then "checksum X".
 * Exit: 0 ok, 2 a syscall failed, 3 content mismatch, 100 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL

static size_t page_size;

/* FNV-1a step over a whole 64-bit word, plus a shift so high bits feed back. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * FNV_PRIME;
	return h ^ (h >> 29);
}

static void die_sys(const char *what)
{
	fprintf(stderr, "mem_static: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void die_bad(const char *what, size_t word, uint64_t got, uint64_t want)
{
	fprintf(stderr,
		"mem_static: %s: mismatch at word %zu: got 0x%016" PRIx64 " want 0x%016" PRIx64
		"\n",
		what, word, got, want);
	exit(3);
}

static uint64_t pattern(uint64_t tag, size_t i)
{
	return tag ^ (i * 0x9e3779b97f4a7c15ULL);
}

static void fill(void *p, size_t from, size_t to, uint64_t tag)
{
	uint64_t *w = p;
	for (size_t i = from; i < to; i++)
		w[i] = pattern(tag, i);
}

/* Verify words [from,to) hold the pattern (tag 0: zeros); fold into h. */
static uint64_t verify(const char *what, const void *p, size_t from, size_t to, uint64_t tag,
		       uint64_t h)
{
	const uint64_t *w = p;
	for (size_t i = from; i < to; i++) {
		uint64_t want = tag ? pattern(tag, i) : 0;
		if (w[i] != want)
			die_bad(what, i, w[i], want);
		h = fnv_u64(h, w[i]);
	}
	return h;
}

static uint64_t brk_phase(long round, uint64_t h)
{
	char *start = sbrk(0);
	if (start == (void *)-1)
		die_sys("sbrk(0)");
	/* Page-align the working area so shrinking really unmaps whole pages. */
	uintptr_t pad = (page_size - ((uintptr_t)start & (page_size - 1))) & (page_size - 1);
	if (pad && sbrk((intptr_t)pad) == (void *)-1)
		die_sys("sbrk(align)");
	char *base = start + pad;
	size_t steps[] = {1, 3, 8, 20};
	size_t total = 0;
	uint64_t tag = 0xb7b7000000000000ULL + (uint64_t)round;

	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		size_t add = steps[s] * page_size;
		char *old = sbrk((intptr_t)add);
		if (old == (void *)-1)
			die_sys("sbrk(grow)");
		if (old != base + total) {
			fprintf(stderr, "mem_static: sbrk returned an unexpected old break\n");
			exit(3);
		}
		h = verify("brk new piece zero", base, total / 8, (total + add) / 8, 0, h);
		fill(base, total / 8, (total + add) / 8, tag);
		total += add;
	}
	h = verify("brk grown", base, 0, total / 8, tag, h);

	/* Shrink by half with sbrk, then by a further page with raw brk. */
	size_t half = total / 2;
	if (sbrk(-(intptr_t)(total - half)) == (void *)-1)
		die_sys("sbrk(shrink)");
	long r = syscall(SYS_brk, base + half - page_size);
	if (r != (long)(uintptr_t)(base + half - page_size)) {
		fprintf(stderr, "mem_static: raw brk shrink returned %#lx\n", r);
		exit(2);
	}
	/* Keep glibc's idea of the break in sync: brk() updates it. */
	if (brk(base + half - page_size) != 0)
		die_sys("brk(sync)");
	size_t kept = half - page_size;
	h = verify("brk after shrink", base, 0, kept / 8, tag, h);

	/* Grow back: the pages given up must come back zeroed. */
	if (brk(base + total) != 0)
		die_sys("brk(regrow)");
	h = verify("brk kept part", base, 0, kept / 8, tag, h);
	h = verify("brk regrown zero", base, kept / 8, total / 8, 0, h);
	fill(base, kept / 8, total / 8, tag);
	h = verify("brk regrown", base, 0, total / 8, tag, h);

	if (brk(start) != 0)
		die_sys("brk(restore)");
	if (sbrk(0) != start) {
		fprintf(stderr, "mem_static: break not restored\n");
		exit(3);
	}
	return fnv_u64(h, total);
}

static uint64_t mmap_phase(long round, uint64_t h)
{
	size_t len = (size_t)(2 + round % 5) * page_size;
	uint64_t tag = 0x3131000000000000ULL + (uint64_t)round;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die_sys("mmap");
	fill(p, 0, len / 8, tag);
	for (int i = 0; i < 3; i++) {
		size_t nlen = len * 2 + page_size;
		char *q = mremap(p, len, nlen, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			die_sys("mremap");
		h = verify("mremap kept", q, 0, len / 8, tag, h);
		h = verify("mremap new zero", q, len / 8, nlen / 8, 0, h);
		fill(q, len / 8, nlen / 8, tag);
		p = q;
		len = nlen;
	}
	h = verify("mmap final", p, 0, len / 8, tag, h);
	if (munmap(p, len) != 0)
		die_sys("munmap");
	return fnv_u64(h, len);
}

static uint64_t malloc_phase(long round, uint64_t h)
{
	enum { NSMALL = 64, NLARGE = 4 };
	uint64_t *small[NSMALL];
	uint64_t *large[NLARGE];
	size_t ssize[NSMALL], lsize[NLARGE];
	uint64_t tag = 0x7777000000000000ULL + (uint64_t)round;

	for (int i = 0; i < NSMALL; i++) {
		ssize[i] = (size_t)(1 + (i * 7 + round) % 40) * 8;
		small[i] = malloc(ssize[i] * 8);
		if (!small[i])
			die_sys("malloc(small)");
		fill(small[i], 0, ssize[i], tag + (uint64_t)i);
	}
	for (int i = 0; i < NLARGE; i++) {
		/* Well above the 128 KiB mmap threshold. */
		lsize[i] = ((size_t)(256 + 64 * i) << 10) / 8;
		large[i] = malloc(lsize[i] * 8);
		if (!large[i])
			die_sys("malloc(large)");
		fill(large[i], 0, lsize[i], tag + 1000 + (uint64_t)i);
	}
	/* Grow a large block: glibc uses mremap for mmap'd chunks. */
	size_t nsize = lsize[0] * 4;
	uint64_t *grown = realloc(large[0], nsize * 8);
	if (!grown)
		die_sys("realloc(large)");
	large[0] = grown;
	h = verify("realloc kept", grown, 0, lsize[0], tag + 1000, h);
	fill(grown, lsize[0], nsize, tag + 1000);
	lsize[0] = nsize;

	for (int i = 0; i < NSMALL; i++) {
		h = verify("malloc small", small[i], 0, ssize[i], tag + (uint64_t)i, h);
		free(small[i]);
	}
	for (int i = 0; i < NLARGE; i++) {
		h = verify("malloc large", large[i], 0, lsize[i], tag + 1000 + (uint64_t)i, h);
		free(large[i]);
	}
	return h;
}

int main(int argc, char **argv)
{
	long rounds = 4;

	page_size = (size_t)sysconf(_SC_PAGESIZE);
	if (argc > 2) {
		fprintf(stderr, "usage: mem_static [ROUNDS]\n");
		return 100;
	}
	if (argc == 2) {
		char *end;
		errno = 0;
		rounds = strtol(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || rounds < 1 || rounds > 100000) {
			fprintf(stderr, "mem_static: bad ROUNDS '%s'\n", argv[1]);
			return 100;
		}
	}

	/* Results are kept until the end so no stdio buffer is malloc'd before
	 * the first brk phase (stdout's buffer would sit on the heap anyway,
	 * below the break we move, but this keeps the phases clean). */
	uint64_t *sums = mmap(NULL, (size_t)rounds * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sums == MAP_FAILED)
		die_sys("mmap(results)");
	for (long r = 0; r < rounds; r++) {
		uint64_t h = fnv_u64(FNV_OFFSET, (uint64_t)r);
		h = brk_phase(r, h);
		h = mmap_phase(r, h);
		h = malloc_phase(r, h);
		sums[r] = h;
	}
	uint64_t h = FNV_OFFSET;
	for (long r = 0; r < rounds; r++) {
		printf("round %ld checksum %016" PRIx64 "\n", r, sums[r]);
		h = fnv_u64(h, sums[r]);
	}
	printf("checksum %016" PRIx64 "\n", h);
	munmap(sums, (size_t)rounds * sizeof(uint64_t));
	return fflush(stdout) == 0 ? 0 : 2;
}
