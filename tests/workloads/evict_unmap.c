/* evict_unmap: a thread faults on evicted memory while another unmaps an
 * evicted region, for the evict safety tests.
 *
 *   evict_unmap [--sparse-mib N] [--big-mib M]
 *
 * At start: a "sparse" region of N MiB (default 64) with every other page
 * written (each written page is an extent of its own in the image, so
 * every page costs a fault after an evict) and a 1 MiB region R, written,
 * followed by M MiB (default 1024) reserved with PROT_NONE; prints "ready".
 * Commands (one answer line each, written with write(2)):
 *   go      map and fill M MiB over the reservation (after the evict, so
 *           it is not registered), start a thread reading the sparse
 *           region, then munmap R and the M MiB at once: "unmapped MS"
 *           (the munmap's time), once the reader has checked every page
 *   check   the sparse region holds its pattern: "ok", or "MISMATCH ..."
 *
 * The munmap: the kernel counts an unmap in progress on R's userfaultfd
 * (userfaultfd_unmap_prep) before it zaps the pages of both regions and
 * sends R's UNMAP event only after (userfaultfd_unmap_complete): all that
 * time every UFFDIO_COPY fails with EAGAIN, and the reader's fault is
 * answered, woken and raised again, over and over. */
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ul

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static uint8_t *sparse, *r;
static size_t sparse_len, big_len, r_len = 1 << 20;
static volatile int reader_started;

static void say(const char *fmt, ...)
{
	char b[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (write(1, b, (size_t)n) < 0)
		_exit(4);
}

/* Page i's byte: its pattern on even pages, zero on the odd ones (never
 * written). */
static uint8_t want(size_t i)
{
	size_t pg = i / PAGE;
	if (pg & 1)
		return 0;
	uint32_t x = (uint32_t)pg * 2654435761u ^ (uint32_t)i;
	return (uint8_t)(x ^ x >> 13 ^ 0x5a);
}

static int check(void)
{
	for (size_t i = 0; i < sparse_len; i++)
		if (sparse[i] != want(i)) {
			say("MISMATCH sparse offset %zu got %#x want %#x\n", i, sparse[i], want(i));
			return -1;
		}
	return 0;
}

static void *reader(void *arg)
{
	(void)arg;
	reader_started = 1;
	return (void *)(intptr_t)check();
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void go(void)
{
	uint8_t *big = mmap(r + r_len, big_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (big == MAP_FAILED || madvise(big, big_len, MADV_NOHUGEPAGE) < 0) {
		say("mmap failed\n");
		return;
	}
	if (madvise(big, big_len, MADV_POPULATE_WRITE) < 0) /* Linux 5.14 */
		for (size_t i = 0; i < big_len; i += PAGE)
			big[i] = 1;
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	while (!reader_started)
		;
	usleep(1000); /* the reader is in its first faults */
	double t0 = now_ms();
	if (munmap(r, r_len + big_len) < 0) {
		say("munmap failed\n");
		return;
	}
	double dt = now_ms() - t0;
	void *rc;
	pthread_join(t, &rc);
	if (rc == NULL)
		say("unmapped %.0f\n", dt);
}

int main(int argc, char **argv)
{
	size_t smib = 64, bmib = 1024;
	static const struct option o[] = {{"sparse-mib", 1, 0, 's'}, {"big-mib", 1, 0, 'b'}, {0}};
	for (int c; (c = getopt_long(argc, argv, "", o, NULL)) != -1;) {
		if (c == 's')
			smib = strtoul(optarg, NULL, 0);
		else if (c == 'b')
			bmib = strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	sparse_len = smib << 20;
	big_len = bmib << 20;
	sparse = mmap(NULL, sparse_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = mmap(NULL, r_len + big_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		 0);
	if (sparse == MAP_FAILED || r == MAP_FAILED ||
	    madvise(sparse, sparse_len, MADV_NOHUGEPAGE) < 0 ||
	    mprotect(r, r_len, PROT_READ | PROT_WRITE) < 0) {
		perror("mmap");
		return 2;
	}
	for (size_t i = 0; i < sparse_len; i += 2 * PAGE)
		for (size_t k = i; k < i + PAGE; k++)
			sparse[k] = want(k);
	memset(r, 7, r_len);
	say("ready\n");
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "go", 2))
			go();
		else if (!strncmp(line, "check", 5) && check() == 0)
			say("ok\n");
	}
	return 0;
}
