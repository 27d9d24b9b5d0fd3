/* evict_stack: processes and threads that keep a pattern on their stacks
 * and heaps and check it again and again, for evict/reload while they run.
 *
 *   evict_stack [--procs N] [--threads N] [--seconds S] [--kib K]
 *
 * Each process (and each extra thread) fills a K KiB array on its stack
 * and a heap buffer with a pattern of its own, then sleeps 1-20 ms and
 * checks both, until S seconds have passed. A wrong byte prints
 * "MISMATCH pid P tid T stack|heap offset O got G want W" and exits 1.
 * The parent prints "ok N" when every process checked clean. Prints
 * "ready" on stdout once every process has filled its memory. */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int seconds = 10, kib = 64;
static volatile int failed;

static uint8_t pat(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u;
	return (uint8_t)(x >> 13 ^ x >> 5 ^ 0x5a);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int check(const volatile uint8_t *p, size_t n, uint32_t seed, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t want = pat(seed, i);
		if (p[i] != want) {
			fprintf(stderr, "MISMATCH pid %d tid %ld %s offset %zu got %#x want %#x\n",
				getpid(), (long)syscall(SYS_gettid), what, i, p[i], want);
			return -1;
		}
	}
	return 0;
}

/* Fill, then check until the deadline; a separate frame so that the
 * array is on this thread's stack. */
static int __attribute__((noinline)) keep(uint32_t seed, int fd_ready)
{
	size_t n = (size_t)kib << 10;
	volatile uint8_t *stack = __builtin_alloca(n);
	uint8_t *heap = malloc(n * 4);
	if (!heap)
		return -1;
	for (size_t i = 0; i < n; i++)
		stack[i] = pat(seed, i);
	for (size_t i = 0; i < n * 4; i++)
		heap[i] = pat(seed ^ 0xffff, i);
	if (fd_ready >= 0) {
		char c = 'r';
		if (write(fd_ready, &c, 1) != 1)
			return -1;
	}
	unsigned r = seed;
	double end = now() + seconds;
	while (now() < end && !failed) {
		r = r * 1103515245u + 12345u;
		usleep(1000 + (r >> 8) % 19000);
		if (check(stack, n, seed, "stack") < 0 ||
		    check(heap, n * 4, seed ^ 0xffff, "heap") < 0) {
			failed = 1;
			return -1;
		}
	}
	free(heap);
	return 0;
}

struct targ {
	uint32_t seed;
	int fd;
	int rc;
};

static void *thread_main(void *a)
{
	struct targ *t = a;
	t->rc = keep(t->seed, t->fd);
	return NULL;
}

static int process_main(uint32_t seed, int threads, int fd)
{
	pthread_t tid[64];
	struct targ ta[64];
	for (int i = 0; i < threads; i++) {
		ta[i] = (struct targ){seed * 131 + (uint32_t)i + 1, fd, 0};
		if (pthread_create(&tid[i], NULL, thread_main, &ta[i]) != 0)
			return 1;
	}
	int rc = keep(seed, fd) < 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
		rc |= ta[i].rc < 0;
	}
	return rc;
}

int main(int argc, char **argv)
{
	int procs = 8, threads = 0;
	static const struct option o[] = {{"procs", 1, 0, 'p'},
					  {"threads", 1, 0, 't'},
					  {"seconds", 1, 0, 's'},
					  {"kib", 1, 0, 'k'},
					  {0}};
	for (int c; (c = getopt_long(argc, argv, "", o, NULL)) != -1;) {
		switch (c) {
		case 'p': procs = atoi(optarg); break;
		case 't': threads = atoi(optarg) > 63 ? 63 : atoi(optarg); break;
		case 's': seconds = atoi(optarg); break;
		case 'k': kib = atoi(optarg); break;
		default: return 2;
		}
	}
	int p[2];
	if (pipe(p) < 0)
		return 2;
	pid_t *kids = calloc((size_t)procs, sizeof(*kids));
	for (int i = 0; i < procs; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 2;
		if (kids[i] == 0) {
			close(p[0]);
			_exit(process_main((uint32_t)getpid(), threads, p[1]));
		}
	}
	close(p[1]);
	int want = procs * (threads + 1);
	for (int got = 0; got < want;) {
		char c;
		if (read(p[0], &c, 1) != 1)
			break;
		got++;
	}
	printf("ready\n");
	fflush(stdout);
	int bad = 0;
	for (int i = 0; i < procs; i++) {
		int st;
		if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "process %d: status %#x\n", kids[i], st);
			bad++;
		}
	}
	if (bad)
		return 1;
	printf("ok %d\n", procs);
	return 0;
}
