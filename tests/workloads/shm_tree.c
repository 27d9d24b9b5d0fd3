/* shm_tree: a parent and its forked children sharing one region of shared
 * memory, driven by lines on stdin, for the shared-memory evict tests.
 *
 *   shm_tree --kind memfd|anon|sysv [--mib N] [--procs N] [--keep-fd]
 *            [--private-mib N]
 *
 * The region (N MiB, default 16): a memfd (its fd closed after the mmap
 * unless --keep-fd), MAP_SHARED|MAP_ANONYMOUS memory, or a SysV segment
 * (IPC_PRIVATE, removed once attached). Each page is a record: a sequence
 * word (odd while its writer writes it), a value, and 4080 bytes made
 * from the value and the page's index. Page i is written only by process
 * i % (procs + 1) (the parent is process 0), so any process can tell a
 * page it reads is whole (the sequence word did not move) and right (the
 * bytes match the value), and that no value went backwards (lost writes,
 * or a page read as zeros).
 *
 * --private-mib: the parent also fills N MiB of private anonymous memory,
 * after the fork (for benchmarks: never checked).
 *
 * Prints "pid P" on stderr, then "ready P" once the children run.
 * Commands (one answer line each, written with write(2)):
 *   check  every process reads every page: "ok N" (N processes) or
 *          "MISMATCH ..."
 *   pids   "pids P C1 C2 ..."
 *   move   the parent moves its mapping of the region elsewhere (mremap
 *          MREMAP_MAYMOVE|MREMAP_FIXED): "moved"
 *   drop   the parent drops its page table entries of the region
 *          (madvise MADV_DONTNEED: shared memory keeps its content):
 *          "dropped"
 *   fork   the parent forks a new child that reads every page and writes
 *          its own page 0 anew, then exits: "forked ok" or "forked
 *          MISMATCH ..."
 *   spin   every process writes its own pages (but page 0, which is the
 *          fork children's) and reads random pages of the others', until
 *          stop: "spinning"
 *   stop   "stopped N writes" then every process reads every page: as
 *          check ("ok N" or "MISMATCH ...") on the same line
 * EOF ends every process. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG 4096u
#define MAXP 16

struct page {
	uint64_t seq, value;
	uint8_t b[PG - 16];
};

static struct page *region;
static size_t npages;
static int nprocs = 5; /* the parent and 4 children */
static int me;	       /* 0: the parent */
static uint64_t *seen; /* the highest value seen of each page */
static volatile bool spinning;
static uint64_t writes;
static char fail[256];

static void say(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (write(1, b, (size_t)n) < 0)
		_exit(4);
}

static uint8_t pat(uint64_t value, size_t page, size_t i)
{
	uint32_t x = (uint32_t)(value * 2654435761u) ^ (uint32_t)page * 40503u ^ (uint32_t)i;
	return (uint8_t)(x ^ x >> 11 ^ 0x5a);
}

static void write_page(size_t p, uint64_t value)
{
	struct page *g = &region[p];
	uint64_t s = __atomic_load_n(&g->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&g->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&g->value, value, __ATOMIC_RELAXED);
	for (size_t i = 0; i < sizeof(g->b); i++)
		((volatile uint8_t *)g->b)[i] = pat(value, p, i);
	__atomic_store_n(&g->seq, s + 2, __ATOMIC_RELEASE);
}

/* Check page p: whole, right, not older than before. false (and fail
 * set) on a mismatch. */
static bool check_page(size_t p)
{
	struct page *g = &region[p];
	time_t t0 = time(NULL);
	for (int tries = 0;; tries++) {
		uint64_t s1 = __atomic_load_n(&g->seq, __ATOMIC_ACQUIRE);
		uint64_t v = __atomic_load_n(&g->value, __ATOMIC_RELAXED);
		size_t bad = SIZE_MAX;
		for (size_t i = 0; i < sizeof(g->b) && bad == SIZE_MAX; i++)
			if (((volatile uint8_t *)g->b)[i] != pat(v, p, i))
				bad = i;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint64_t s2 = __atomic_load_n(&g->seq, __ATOMIC_RELAXED);
		if ((s1 & 1) || s1 != s2) {
			/* Its writer is in the middle of it: on a loaded
			 * machine it may wait for a CPU for seconds. */
			if (tries % 64 == 63)
				sched_yield();
			if (time(NULL) - t0 < 60)
				continue;
			snprintf(fail, sizeof(fail), "page %zu never settles (seq %llu)", p,
				 (unsigned long long)s1);
			return false;
		}
		if (s1 == 0 || v < seen[p] || bad != SIZE_MAX) {
			snprintf(fail, sizeof(fail),
				 "process %d (%d): page %zu: seq %llu value %llu (seen %llu), byte "
				 "%zd wrong",
				 me, getpid(), p, (unsigned long long)s1, (unsigned long long)v,
				 (unsigned long long)seen[p], bad == SIZE_MAX ? -1 : (ssize_t)bad);
			return false;
		}
		seen[p] = v;
		return true;
	}
}

static bool check_all(void)
{
	for (size_t p = 0; p < npages; p++)
		if (!check_page(p))
			return false;
	return true;
}

static void *spin_main(void *arg)
{
	(void)arg;
	uint64_t r = (uint64_t)getpid() * 6364136223846793005ull + 1;
	/* Page 0 is the fork children's (one at a time): a child forked
	 * while the parent spins would otherwise write it beside the
	 * parent's own writer, and a value could go back. */
	size_t first = me ? (size_t)me : (size_t)nprocs, own = first;
	while (spinning && !fail[0] && first < npages) {
		write_page(own, seen[own] + 1);
		seen[own]++;
		writes++;
		own += (size_t)nprocs;
		if (own >= npages)
			own = first;
		for (int k = 0; k < 4 && !fail[0]; k++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			check_page((size_t)(r >> 33) % npages);
		}
	}
	return NULL;
}

/* A child: commands from the parent on in, answers on out. */
static int cmd_in[MAXP], cmd_out[MAXP];

static void answer(int fd, const char *s)
{
	char b[300];
	snprintf(b, sizeof(b), "%s", s);
	if (write(fd, b, sizeof(b)) != (ssize_t)sizeof(b))
		_exit(4);
}

/* One command in this process: "check", "spin" or "stop"; the answer in
 * out (a "!" first on a mismatch). */
static pthread_t spinner;

static void run_cmd(char c, char *out, size_t len)
{
	if (c == 's') {
		spinning = true;
		pthread_create(&spinner, NULL, spin_main, NULL);
		snprintf(out, len, "spinning");
		return;
	}
	if (c == 'x' && spinning) {
		spinning = false;
		pthread_join(spinner, NULL);
	}
	if (!fail[0])
		check_all();
	if (fail[0])
		snprintf(out, len, "!%s", fail);
	else
		snprintf(out, len, "%llu", (unsigned long long)writes);
}

static void child_main(int in, int out)
{
	char c;
	while (read(in, &c, 1) == 1) {
		char b[300];
		run_cmd(c, b, sizeof(b));
		answer(out, b);
	}
	_exit(0);
}

/* Run c in every process; say the outcome. */
static void everyone(char c, const char *what)
{
	char mine[300], worst[300] = "";
	uint64_t total = 0;
	run_cmd(c, mine, sizeof(mine));
	if (mine[0] == '!')
		snprintf(worst, sizeof(worst), "%s", mine + 1);
	else
		total += strtoull(mine, NULL, 10);
	for (int k = 1; k < nprocs; k++) {
		char b[300];
		if (write(cmd_in[k], &c, 1) != 1 || read(cmd_out[k], b, sizeof(b)) != sizeof(b))
			snprintf(b, sizeof(b), "!child %d is gone", k);
		if (b[0] == '!' && !worst[0])
			snprintf(worst, sizeof(worst), "%s", b + 1);
		else if (b[0] != '!')
			total += strtoull(b, NULL, 10);
	}
	if (c == 's')
		say("spinning\n");
	else if (worst[0])
		say("%sMISMATCH %s\n", what, worst);
	else if (c == 'x')
		say("stopped %llu writes ok %d\n", (unsigned long long)total, nprocs);
	else
		say("ok %d\n", nprocs);
}

static void *map_region(const char *kind, size_t len, bool keep_fd)
{
	void *p = MAP_FAILED;
	if (strcmp(kind, "memfd") == 0) {
		int fd = (int)syscall(SYS_memfd_create, "shm_tree", 0);
		if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
			return MAP_FAILED;
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (!keep_fd)
			close(fd);
	} else if (strcmp(kind, "anon") == 0) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	} else if (strcmp(kind, "sysv") == 0) {
		int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
		if (id < 0)
			return MAP_FAILED;
		p = shmat(id, NULL, 0);
		shmctl(id, IPC_RMID, NULL); /* gone once every process detaches */
		if (p == (void *)-1)
			p = MAP_FAILED;
	}
	return p;
}

int main(int argc, char **argv)
{
	const char *kind = "memfd";
	size_t mib = 16;
	bool keep_fd = false;
	size_t private_mib = 0;
	static const struct option opts[] = {{"kind", 1, 0, 'k'},
					     {"mib", 1, 0, 'm'},
					     {"procs", 1, 0, 'p'},
					     {"keep-fd", 0, 0, 'f'},
					     {"private-mib", 1, 0, 'P'},
					     {0}};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'k')
			kind = optarg;
		else if (o == 'm')
			mib = strtoul(optarg, NULL, 10);
		else if (o == 'p')
			nprocs = atoi(optarg) + 1;
		else if (o == 'f')
			keep_fd = true;
		else if (o == 'P')
			private_mib = strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (nprocs < 1 || nprocs > MAXP)
		return 2;
	npages = (mib << 20) / PG;
	region = map_region(kind, npages * PG, keep_fd);
	if (region == MAP_FAILED) {
		perror("shm_tree: the region");
		return 1;
	}
	seen = calloc(npages, sizeof(*seen));
	for (size_t p = 0; p < npages; p++) {
		write_page(p, p * 7 + 1);
		seen[p] = p * 7 + 1;
	}
	fprintf(stderr, "pid %d\n", getpid());
	pid_t kids[MAXP] = {0};
	for (int k = 1; k < nprocs; k++) {
		int a[2], b[2];
		if (pipe(a) < 0 || pipe(b) < 0)
			return 1;
		kids[k] = fork();
		if (kids[k] == 0) {
			me = k;
			for (int j = 1; j < k; j++) { /* the parent's ends for older children */
				close(cmd_in[j]);
				close(cmd_out[j]);
			}
			close(a[1]);
			close(b[0]);
			child_main(a[0], b[1]);
		}
		close(a[0]);
		close(b[1]);
		cmd_in[k] = a[1];
		cmd_out[k] = b[0];
	}
	if (private_mib) {
		char *q = mmap(NULL, private_mib << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (q == MAP_FAILED)
			return 1;
		for (size_t i = 0; i < private_mib << 20; i += 64)
			q[i] = (char)(i >> 12);
	}
	say("ready %d\n", getpid());
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "check", 5) == 0) {
			everyone('c', "");
		} else if (strncmp(line, "spin", 4) == 0) {
			everyone('s', "");
		} else if (strncmp(line, "stop", 4) == 0) {
			everyone('x', "stopped ");
		} else if (strncmp(line, "fork", 4) == 0) {
			int pfd[2];
			if (pipe(pfd) < 0)
				return 1;
			pid_t c = fork();
			if (c == 0) {
				close(pfd[0]);
				if (check_all()) {
					write_page(0, seen[0] + 1);
					snprintf(fail, sizeof(fail), "ok");
				}
				answer(pfd[1], fail);
				_exit(0);
			}
			close(pfd[1]);
			char b[300] = "the child died";
			if (read(pfd[0], b, sizeof(b)) <= 0)
				snprintf(b, sizeof(b), "the child died");
			close(pfd[0]);
			waitpid(c, NULL, 0);
			if (strcmp(b, "ok") == 0)
				say("forked ok\n");
			else
				say("forked MISMATCH %s\n", b);
		} else if (strncmp(line, "move", 4) == 0) {
			size_t len = npages * PG;
			void *to = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			void *p = to == MAP_FAILED ? MAP_FAILED
						   : mremap(region, len, len,
							    MREMAP_MAYMOVE | MREMAP_FIXED, to);
			if (p == MAP_FAILED) {
				say("move failed\n");
				continue;
			}
			region = p;
			say("moved\n");
		} else if (strncmp(line, "drop", 4) == 0) {
			madvise(region, npages * PG, MADV_DONTNEED);
			say("dropped\n");
		} else if (strncmp(line, "pids", 4) == 0) {
			char b[256];
			int n = snprintf(b, sizeof(b), "pids %d", getpid());
			for (int k = 1; k < nprocs; k++)
				n += snprintf(b + n, sizeof(b) - (size_t)n, " %d", kids[k]);
			say("%s\n", b);
		} else {
			say("unknown command\n");
		}
	}
	for (int k = 1; k < nprocs; k++) {
		close(cmd_in[k]);
		waitpid(kids[k], NULL, 0);
	}
	return 0;
}
