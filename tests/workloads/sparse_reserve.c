/* sparse_reserve: a reservation of terabytes with a few pages written in
 * it, the way sanitizers, JVMs, Go and WebAssembly runtimes reserve, plus
 * a heap; driven by lines on stdin, for the evict stop tests and
 * bench/sparse_evict.sh.
 *
 *   sparse_reserve [--tib N] [--every-gib G] [--heap-mib M]
 *
 * At start: N TiB (default 64) mapped read-write and MAP_NORESERVE, one
 * page written every G GiB (default 4), each with its own pattern, and a
 * heap of M MiB (default 100) filled with a pattern; prints "ready PID
 * PAGES". Commands (one answer line each):
 *   check   every written page and the heap hold their patterns, and a
 *           page between them reads zero: "ok", or "MISMATCH ..."
 *   walk    the kernel's own cost of this layout, for comparison: one
 *           PAGEMAP_SCAN of the reservation ("walk MS") */
#include "wl.h"

#include "common/compat.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

static uint8_t *res, *heap;
static uint64_t res_len, step, heap_len;

static uint8_t pat(uint64_t i)
{
	return (uint8_t)(mix(i) | 1);
}

static void check(void)
{
	for (uint64_t off = 0; off < res_len; off += step) {
		if (res[off] != pat(off >> 12) || res[off + 4095] != pat(off >> 12)) {
			say("MISMATCH page at offset %#llx: %#x\n", (unsigned long long)off,
			    res[off]);
			return;
		}
		if (off + step / 2 < res_len && res[off + step / 2]) {
			say("MISMATCH hole at offset %#llx reads %#x\n",
			    (unsigned long long)(off + step / 2), res[off + step / 2]);
			return;
		}
	}
	for (uint64_t i = 0; i < heap_len; i += 512)
		if (heap[i] != pat(~i)) {
			say("MISMATCH heap at %#llx\n", (unsigned long long)i);
			return;
		}
	say("ok\n");
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void walk(void)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	struct page_region v[1024];
	double t0 = now_ms();
	uint64_t at = (uint64_t)(uintptr_t)res, end = at + res_len;
	while (fd >= 0 && at < end) {
		struct pm_scan_arg a = {.size = sizeof(a),
					.start = at,
					.end = end,
					.vec = (uint64_t)(uintptr_t)v,
					.vec_len = 1024,
					.category_anyof_mask = PAGE_IS_PRESENT,
					.return_mask = PAGE_IS_PRESENT};
		int got = ioctl(fd, PAGEMAP_SCAN, &a);
		if (got < 0)
			break;
		uint64_t next = a.walk_end;
		if (got > 0 && v[got - 1].end > next)
			next = v[got - 1].end;
		if (next <= at)
			break;
		at = next;
	}
	if (fd >= 0)
		close(fd);
	say(at >= end ? "walk %.1f\n" : "walk none\n", now_ms() - t0);
}

int main(int argc, char **argv)
{
	uint64_t tib = 64, gib = 4, mib = 100;
	static const struct option o[] = {
	    {"tib", 1, 0, 't'}, {"every-gib", 1, 0, 'g'}, {"heap-mib", 1, 0, 'm'}, {0, 0, 0, 0}};
	for (int c; (c = getopt_long(argc, argv, "", o, NULL)) != -1;) {
		if (c == 't')
			tib = strtoull(optarg, NULL, 0);
		else if (c == 'g')
			gib = strtoull(optarg, NULL, 0);
		else if (c == 'm')
			mib = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	res_len = tib << 40;
	step = gib << 30;
	heap_len = mib << 20;
	if (!res_len || !step)
		return 2;
	res = mmap(NULL, res_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	uint64_t pages = 0;
	for (uint64_t off = 0; off < res_len; off += step, pages++)
		memset(res + off, pat(off >> 12), 4096);
	heap = malloc(heap_len);
	if (!heap && heap_len)
		return 1;
	for (uint64_t i = 0; i < heap_len; i++)
		heap[i] = i % 512 ? (uint8_t)i : pat(~i);
	say("ready %d %llu\n", (int)getpid(), (unsigned long long)pages);
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "check", 5))
			check();
		else if (!strncmp(line, "walk", 4))
			walk();
		else
			say("unknown\n");
	}
	return 0;
}
