/* reload_hot: the seed workload of gVisor PR #16565, in C, for
 * bench/reload.sh.
 *
 * Usage: reload_hot --mib M --threads N --csv FILE [--walker] [--thp]
 *        reload_hot --memcpy M      (fresh-memory memcpy bandwidth, GB/s)
 *
 * A private anonymous mapping of M MiB (--thp: madvise(MADV_HUGEPAGE)d, for
 * transparent huge pages under the "madvise" setting), every page dirtied; N hot threads
 * each call syscall(SYS_getcpu) with both output pointers in a page of
 * their own inside the mapping (two 4-byte copy-outs a call). A sampler
 * writes "t_s,calls_per_s" to FILE every 50 ms. Every 64th call is timed;
 * the latencies go to a histogram per phase. stdin:
 *   mark NAME   start phase NAME (a "#NAME,t" line in the CSV) -> marked
 *   walk        (with --walker) one getcpu per 2 MiB across the mapping
 *   quit        print "phase NAME p50 p99 p999 (ns) calls" per phase, exit */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define NBUCKET 64
#define NPHASE 8

static char *map;
static size_t map_len;
static _Atomic uint64_t calls;
static _Atomic int phase;
static volatile int stop;
static char phase_name[NPHASE][32] = {"steady"};
static _Atomic uint64_t lat[NPHASE][NBUCKET * 4]; /* 4 sub-buckets per power of two */
static FILE *csv;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned bucket(uint64_t v)
{
	if (v < 4)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	return msb * 4 + (unsigned)((v >> (msb - 2)) & 3);
}

static uint64_t bucket_value(unsigned b)
{
	if (b < 4)
		return b;
	unsigned msb = b / 4;
	return (1ull << msb) + ((uint64_t)(b & 3) << (msb - 2));
}

static void *hot(void *arg)
{
	size_t i = (size_t)arg;
	unsigned *cpu = (unsigned *)(void *)(map + (i * 37 % (map_len / PAGE)) * PAGE);
	unsigned *node = cpu + 1;
	uint64_t n = 0;
	while (!stop) {
		if ((n & 63) == 0) {
			uint64_t t = now_ns();
			syscall(SYS_getcpu, cpu, node, NULL);
			atomic_fetch_add(&lat[phase][bucket(now_ns() - t)], 1);
		} else {
			syscall(SYS_getcpu, cpu, node, NULL);
		}
		if ((++n & 255) == 0)
			atomic_fetch_add(&calls, 256);
	}
	return NULL;
}

static void *sampler(void *arg)
{
	uint64_t t0 = *(uint64_t *)arg, last = 0, tl = t0;
	while (!stop) {
		usleep(50000);
		uint64_t t = now_ns(), c = atomic_load(&calls);
		fprintf(csv, "%.3f,%.0f\n", (double)(t - t0) / 1e9,
			(double)(c - last) / ((double)(t - tl) / 1e9));
		fflush(csv);
		last = c;
		tl = t;
	}
	return NULL;
}

static uint64_t quantile(int p, double q)
{
	uint64_t total = 0, seen = 0;
	for (int b = 0; b < NBUCKET * 4; b++)
		total += lat[p][b];
	for (int b = 0; b < NBUCKET * 4; b++) {
		seen += lat[p][b];
		if (total && seen >= (uint64_t)(q * (double)total))
			return bucket_value((unsigned)b);
	}
	return 0;
}

static void walk(void)
{
	for (size_t off = 0; off + 8 <= map_len; off += 2u << 20) {
		unsigned *p = (unsigned *)(void *)(map + off + PAGE * 3);
		syscall(SYS_getcpu, p, p + 1, NULL);
	}
}

static int memcpy_bench(size_t mib)
{
	size_t len = mib << 20;
	char *src = malloc(len);
	memset(src, 7, len);
	char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	madvise(dst, len, MADV_NOHUGEPAGE);
	uint64_t t = now_ns();
	for (size_t off = 0; off < len; off += PAGE)
		memcpy(dst + off, src + off, PAGE);
	double s = (double)(now_ns() - t) / 1e9;
	printf("memcpy %.2f GB/s\n", (double)len / s / 1e9);
	return 0;
}

int main(int argc, char **argv)
{
	size_t mib = 1024;
	int threads = 8;
	const char *csv_path = "/dev/null";
	int thp = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--memcpy") == 0 && i + 1 < argc)
			return memcpy_bench(strtoul(argv[++i], NULL, 0));
		if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
			mib = strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
			csv_path = argv[++i];
		else if (strcmp(argv[i], "--thp") == 0)
			thp = 1;
	}
	map_len = mib << 20;
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || !(csv = fopen(csv_path, "w"))) {
		perror("reload_hot");
		return 2;
	}
	if (thp && madvise(map, map_len, MADV_HUGEPAGE) < 0)
		perror("reload_hot: madvise(MADV_HUGEPAGE)");
	for (size_t off = 0; off < map_len; off += PAGE)
		map[off] = 1;
	uint64_t t0 = now_ns();
	pthread_t t;
	for (int i = 0; i < threads; i++)
		pthread_create(&t, NULL, hot, (void *)(size_t)i);
	pthread_create(&t, NULL, sampler, &t0);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[128];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "mark ", 5) == 0 && phase + 1 < NPHASE) {
			snprintf(phase_name[phase + 1], sizeof(phase_name[0]), "%.31s", line + 5);
			fprintf(csv, "#%s,%.3f\n", line + 5, (double)(now_ns() - t0) / 1e9);
			atomic_fetch_add(&phase, 1);
			printf("marked\n");
		} else if (strcmp(line, "walk") == 0) {
			walk();
			printf("walked\n");
		} else if (strcmp(line, "quit") == 0) {
			break;
		}
		fflush(stdout);
	}
	stop = 1;
	for (int p = 0; p <= phase; p++)
		printf("phase %s p50 %llu p99 %llu p999 %llu\n", phase_name[p],
		       (unsigned long long)quantile(p, 0.5), (unsigned long long)quantile(p, 0.99),
		       (unsigned long long)quantile(p, 0.999));
	fflush(stdout);
	return 0;
}
