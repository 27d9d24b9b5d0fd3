/* storm THREADS SECONDS: THREADS threads doing mmap/munmap/mremap/mprotect
 * as fast as they can for SECONDS, each checking the content of its own
 * mappings after every change. Prints "storm ok OPS" and exits 0, or names
 * the first corruption and exits 3. Used by the storm tests (make check
 * runs it briefly, make soak for longer). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096UL

static double seconds;
static volatile int failed;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i += 512)
		p[i] = (unsigned char)(seed + i / 512);
}

static int check(const unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i += 512)
		if (p[i] != (unsigned char)(seed + i / 512))
			return -1;
	return 0;
}

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u;
	unsigned long ops = 0;
	double end = now() + seconds;
	while (!failed && now() < end) {
		size_t len = ((seed = seed * 1103515245u + 12345u) % 16 + 1) * PAGE;
		unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("storm: mmap");
			failed = 2;
			break;
		}
		fill(p, len, seed);
		if (mprotect(p, len, PROT_READ) < 0 || check(p, len, seed) < 0 ||
		    mprotect(p, len, PROT_READ | PROT_WRITE) < 0) {
			fprintf(stderr, "storm: mprotect round trip lost content\n");
			failed = 3;
		}
		unsigned char *q = mremap(p, len, len * 2, MREMAP_MAYMOVE);
		if (q == MAP_FAILED) {
			perror("storm: mremap");
			failed = 2;
			munmap(p, len);
			break;
		}
		if (check(q, len, seed) < 0) {
			fprintf(stderr, "storm: mremap lost content\n");
			failed = 3;
		}
		munmap(q, len * 2);
		ops += 5;
	}
	return (void *)(uintptr_t)ops;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 64;
	seconds = argc > 2 ? atof(argv[2]) : 5;
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) != 0) {
			perror("storm: pthread_create");
			return 2;
		}
	unsigned long total = 0;
	for (int i = 0; i < threads; i++) {
		void *ops;
		pthread_join(t[i], &ops);
		total += (unsigned long)(uintptr_t)ops;
	}
	if (failed)
		return failed;
	printf("storm ok %lu\n", total);
	return 0;
}
