/* mmap_loop: the cost of one memory syscall, measured from inside the
 * process that makes it, so it runs the same natively and under memvisor.
 *
 *   mmap_loop [-m MODE] [-b BATCHES] [N]
 *
 * MODE (one op is):
 *   pair      mmap 64 KiB anon private RW, touch one byte, munmap (default)
 *   munmap    munmap of a 64 KiB range that is not mapped
 *   mprotect  mprotect of a mapped 64 KiB region, alternating R and RW
 *   getppid   getppid, a call no memvisor policy notifies (filter cost only)
 *
 * Runs BATCHES batches (default 7) of N ops (default 20000) after a warm-up
 * of N/10 ops and prints one line of key=value pairs with the median batch:
 *
 *   mode=pair ops=20000 batches=7 calls_per_op=2 ns_per_op=3412.5 min=.. max=..
 *
 * calls_per_op is how many calls of an op a strict memvisor policy
 * notifies; bench/run.sh divides the supervised-minus-native difference
 * by it to get the overhead of one notified call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REGION (64UL << 10)
#define MAX_BATCHES 101

struct mode {
	const char *name;
	int calls_per_op;
	void (*setup)(void);
	void (*op)(void);
};

static char *region;

static void __attribute__((noreturn)) die(const char *what)
{
	fprintf(stderr, "mmap_loop: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void op_pair(void)
{
	char *p = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	/* One write fault, so the pair also allocates and frees a page the
	 * way a real allocation does. */
	*(volatile char *)p = 1;
	if (munmap(p, REGION) < 0)
		die("munmap");
}

/* Reserve a range, then unmap it: the range stays free because nothing
 * else in this single-threaded process maps memory during the loop. */
static void setup_hole(void)
{
	region = mmap(NULL, REGION, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap");
	if (munmap(region, REGION) < 0)
		die("munmap");
}

/* munmap of an unmapped range succeeds (munmap(2)) but still takes the
 * mmap lock and walks the tree: the cheapest memory call there is. */
static void op_munmap(void)
{
	if (munmap(region, REGION) < 0)
		die("munmap");
}

static void setup_region(void)
{
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap");
	memset(region, 1, REGION);
}

/* The whole region each time, so the VMA is never split or merged. */
static void op_mprotect(void)
{
	static int rw;
	rw = !rw;
	if (mprotect(region, REGION, rw ? PROT_READ | PROT_WRITE : PROT_READ) < 0)
		die("mprotect");
}

/* The raw syscall: glibc does not cache getppid, but be explicit. */
static void op_getppid(void)
{
	if (syscall(SYS_getppid) < 0)
		die("getppid");
}

static const struct mode modes[] = {
	{"pair", 2, NULL, op_pair},
	{"munmap", 1, setup_hole, op_munmap},
	{"mprotect", 1, setup_region, op_mprotect},
	{"getppid", 0, NULL, op_getppid},
};

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double run_batch(const struct mode *m, long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		m->op();
	return (now_ns() - t0) / n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static const struct mode *find_mode(const char *name)
{
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(modes[i].name, name) == 0)
			return &modes[i];
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: mmap_loop [-m pair|munmap|mprotect|getppid] [-b BATCHES] [N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const struct mode *m = &modes[0];
	long n = 20000, batches = 7;
	int c;
	while ((c = getopt(argc, argv, "m:b:")) != -1) {
		if (c == 'm' && (m = find_mode(optarg)))
			continue;
		if (c == 'b' && (batches = atol(optarg)) > 0 && batches <= MAX_BATCHES)
			continue;
		usage();
	}
	if (optind < argc)
		n = atol(argv[optind]);
	if (n <= 0)
		usage();

	if (m->setup)
		m->setup();
	run_batch(m, n / 10 + 1);
	double ns[MAX_BATCHES];
	for (long b = 0; b < batches; b++)
		ns[b] = run_batch(m, n);
	qsort(ns, batches, sizeof(ns[0]), cmp_double);
	printf("mode=%s ops=%ld batches=%ld calls_per_op=%d ns_per_op=%.1f min=%.1f max=%.1f\n",
	       m->name, n, batches, m->calls_per_op, ns[batches / 2], ns[0], ns[batches - 1]);
	return 0;
}
