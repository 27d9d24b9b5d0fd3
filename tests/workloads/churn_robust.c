/* churn_robust: processes and threads that die holding robust mutexes,
 * for the churn tier (tests/churn). The kernel marks a dead owner's
 * mutexes FUTEX_OWNER_DIED from the exiting thread (exit_robust_list) and
 * clears its exit word for pthread_join (mm_release), where a userfaultfd
 * does not wait: memvisor must keep that memory resident across evict and
 * --live (docs/reload.md, "What the kernel touches").
 *
 *   churn_robust [--procs K] [--rounds N] [--mutexes M] [--threads T]
 *                [--ops L] [--heap-mutexes H]
 *
 * (defaults: K 4, N 1000, M 16, T 3, L 1000, H 8; about 3 s natively)
 *
 * The parent shares M process-shared robust mutexes (PTHREAD_MUTEX_ROBUST,
 * PTHREAD_PROCESS_SHARED), each on a page of its own with a pair of
 * counters, half in MAP_SHARED|MAP_ANONYMOUS memory and half in a memfd
 * mapping (its descriptor closed), with K child slots. The child of slot
 * k does rounds 0..N-1: in round r it locks mutex mix(k, r) % M, checks
 * the pair, increments the first counter, and, when (k*7 + r) % 13 == 0,
 * dies holding the mutex before it increments the second: by _exit, by
 * SIGKILL from the parent (it asks through a pipe and waits), or by
 * SIGKILL to itself, in turn. Otherwise it increments the second and
 * unlocks. The parent respawns a dead child, which goes on from the next
 * round, until every slot has done its N rounds.
 *
 * Meanwhile T threads of the parent do the same with H private robust
 * mutexes in the heap: thread slot t does operations 0..L-1 and exits
 * holding its mutex (returning, or pthread_exit, in turn) when
 * (t*5 + i) % 11 == 0; a manager thread per slot joins it and starts the
 * next, which goes on from the next operation.
 *
 * Whoever locks a mutex and gets EOWNERDEAD checks that the pair is one
 * increment apart (the owner died between them), repairs it (second =
 * first), makes the mutex consistent and counts a recovery; at the end the
 * parent locks every mutex (recovering the deaths nobody met yet) and
 * checks every pair. Which process dies when does not depend on
 * scheduling: the deaths are planned, and the recoveries observed must
 * equal them, as must the deaths the parent saw. Every lock waits at most
 * 10 s (pthread_mutex_timedlock), every join too: a timeout means the
 * kernel never marked the owner dead (or never cleared the exit word):
 * "HANG mutex sharedM" or "heapM" (or "HANG join thread T"), exit 3. A
 * pair found wrong: "MISMATCH ...", exit 1.
 *
 * The parent prints the totals (increments, deaths of each kind,
 * recoveries), each pair's count, and "ok": the same on every run with
 * the same arguments. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/workloads/wl.h"

#define PG	      4096ul
#define MAXK	      32
#define MAXT	      16
#define LOCK_WAIT_S   10
#define DIED_EXIT     42 /* a child's planned _exit */
#define FAIL_HANG     3
#define FAIL_MISMATCH 1

struct pair {
	pthread_mutex_t m;
	uint64_t first, second;
};

/* The first page of the shared anonymous memory. */
struct ctl {
	atomic_ulong recoveries; /* EOWNERDEAD seen on shared mutexes */
	int done[MAXK];		 /* the next round of each slot */
};

static int nprocs = 4, rounds = 1000, nmutex = 16, nthreads = 3, ops = 1000, nheap = 8;
static struct ctl *ctl;
static struct pair *shared_pair[256];
static struct pair *heap_pair; /* nheap, in the heap */
static atomic_ulong heap_recoveries;
static int done_t[MAXT];
static sem_t exiting[MAXT];
static int kill_pipe[2];
static pid_t child_pid[MAXK];
static int my_slot = -1; /* in a child: its slot */

/* The end: a child ends alone (the parent sees its status), the parent
 * takes its children with it. A verdict on what the kernel or memvisor
 * did (HANG, MISMATCH) goes to stdout, where the churn driver compares it
 * with a native run's, and to stderr; any other failure (a system call
 * refused: fork fails ENOSYS once memvisor is gone) to stderr only. */
static __attribute__((noreturn)) void end(int code, int out, const char *fmt, va_list ap)
{
	char b[256];
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	if (n > (int)sizeof(b) - 1)
		n = (int)sizeof(b) - 1;
	if ((out && write(1, b, (size_t)n) < 0) || write(2, b, (size_t)n) < 0)
		code = 4;
	if (my_slot < 0)
		for (int k = 0; k < nprocs; k++)
			if (child_pid[k] > 0)
				kill(child_pid[k], SIGKILL);
	_exit(code);
}

static __attribute__((noreturn, format(printf, 2, 3))) void verdict(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	end(code, 1, fmt, ap);
}

static __attribute__((noreturn, format(printf, 2, 3))) void fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	end(code, 0, fmt, ap);
}

static void nap_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void init_robust(pthread_mutex_t *m, int pshared)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (pshared)
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (pthread_mutex_init(m, &a) != 0)
		fail(2, "churn_robust: pthread_mutex_init\n");
	pthread_mutexattr_destroy(&a);
}

/* Lock pair p (named what, index idx), repairing it if its owner died:
 * 1 if it did (a recovery), 0 if not. */
static int lock_pair(struct pair *p, const char *what, int idx)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += LOCK_WAIT_S;
	int rc = pthread_mutex_timedlock(&p->m, &ts);
	if (rc == ETIMEDOUT)
		verdict(FAIL_HANG, "HANG mutex %s%d\n", what, idx);
	if (rc == EOWNERDEAD) {
		/* The owner died between its two increments. */
		if (p->first != p->second + 1)
			verdict(
			    FAIL_MISMATCH,
			    "MISMATCH mutex %s%d after its owner died: first %llu second %llu\n",
			    what, idx, (unsigned long long)p->first, (unsigned long long)p->second);
		p->second = p->first;
		if (pthread_mutex_consistent(&p->m) != 0)
			fail(2, "churn_robust: pthread_mutex_consistent %s%d\n", what, idx);
		return 1;
	}
	if (rc != 0)
		fail(2, "churn_robust: lock %s%d: %s\n", what, idx, strerror(rc));
	if (p->first != p->second)
		verdict(FAIL_MISMATCH, "MISMATCH mutex %s%d: first %llu second %llu\n", what, idx,
			(unsigned long long)p->first, (unsigned long long)p->second);
	return 0;
}

static int child_dies(int k, int r)
{
	return (k * 7 + r) % 13 == 0;
}

static int thread_dies(int t, int i)
{
	return (t * 5 + i) % 11 == 0;
}

/* How child k dies in round r: 0 _exit, 1 SIGKILL from the parent, 2
 * SIGKILL to itself. */
static int child_death_kind(int k, int r)
{
	return (k + r / 13) % 3;
}

static __attribute__((noreturn)) void child(int k)
{
	my_slot = k;
	close(kill_pipe[0]);
	for (int r = ctl->done[k]; r < rounds; r++) {
		int m = (int)(mix((uint64_t)k << 32 | (uint64_t)r) % (uint64_t)nmutex);
		struct pair *p = shared_pair[m];
		if (lock_pair(p, "shared", m))
			atomic_fetch_add(&ctl->recoveries, 1);
		p->first++;
		if (r % 8 == 0)
			nap_us(300); /* holding it: others wait on it */
		if (child_dies(k, r)) {
			ctl->done[k] = r + 1;
			switch (child_death_kind(k, r)) {
			case 0:
				_exit(DIED_EXIT);
			case 1: {
				char c = (char)k;
				if (write(kill_pipe[1], &c, 1) != 1)
					_exit(5);
				for (;;)
					pause();
			}
			default:
				kill(getpid(), SIGKILL);
				for (;;)
					pause();
			}
		}
		p->second++;
		pthread_mutex_unlock(&p->m);
		ctl->done[k] = r + 1;
		nap_us(1500);
	}
	_exit(0);
}

static pid_t spawn(int k)
{
	pid_t pid = fork();
	if (pid < 0)
		fail(2, "churn_robust: fork: %s\n", strerror(errno));
	if (pid == 0)
		child(k);
	return pid;
}

static void *thread_work(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = done_t[t]; i < ops; i++) {
		int m = (int)(mix((uint64_t)(1000 + t) << 32 | (uint64_t)i) % (uint64_t)nheap);
		struct pair *p = &heap_pair[m];
		if (lock_pair(p, "heap", m))
			atomic_fetch_add(&heap_recoveries, 1);
		p->first++;
		if (i % 8 == 0)
			nap_us(300);
		if (thread_dies(t, i)) {
			done_t[t] = i + 1;
			sem_post(&exiting[t]);
			if ((t + i) % 2)
				pthread_exit(NULL);
			return NULL; /* holding the mutex */
		}
		p->second++;
		pthread_mutex_unlock(&p->m);
		done_t[t] = i + 1;
		nap_us(1500);
	}
	sem_post(&exiting[t]);
	return NULL;
}

/* One per thread slot: start a thread, join it when it says it exits
 * (waiting at most LOCK_WAIT_S for the kernel to clear its exit word),
 * start the next until the slot's operations are done. */
static void *manager(void *arg)
{
	int t = (int)(intptr_t)arg;
	while (done_t[t] < ops) {
		pthread_t th;
		if (pthread_create(&th, NULL, thread_work, (void *)(intptr_t)t) != 0)
			fail(2, "churn_robust: pthread_create\n");
		while (sem_wait(&exiting[t]) < 0 && errno == EINTR)
			;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += LOCK_WAIT_S;
		int rc = pthread_timedjoin_np(th, NULL, &ts);
		if (rc == ETIMEDOUT)
			verdict(FAIL_HANG, "HANG join thread %d\n", t);
		if (rc != 0)
			fail(2, "churn_robust: pthread_join: %s\n", strerror(rc));
	}
	return NULL;
}

static void *map_shared_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail(2, "churn_robust: mmap: %s\n", strerror(errno));
	return p;
}

static void *map_memfd(size_t len)
{
	int fd = memfd_create("churn_robust", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		fail(2, "churn_robust: memfd: %s\n", strerror(errno));
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		fail(2, "churn_robust: mmap memfd: %s\n", strerror(errno));
	close(fd); /* the mapping holds it */
	return p;
}

static int opt_int(const char *s, int lo, int hi, const char *name)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "churn_robust: %s must be %d to %d\n", name, lo, hi);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"procs", required_argument, 0, 'k'},
					     {"rounds", required_argument, 0, 'n'},
					     {"mutexes", required_argument, 0, 'm'},
					     {"threads", required_argument, 0, 't'},
					     {"ops", required_argument, 0, 'l'},
					     {"heap-mutexes", required_argument, 0, 'h'},
					     {0}};
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (o) {
		case 'k':
			nprocs = opt_int(optarg, 1, MAXK, "--procs");
			break;
		case 'n':
			rounds = opt_int(optarg, 1, 1 << 24, "--rounds");
			break;
		case 'm':
			nmutex = opt_int(optarg, 2, 256, "--mutexes");
			break;
		case 't':
			nthreads = opt_int(optarg, 0, MAXT, "--threads");
			break;
		case 'l':
			ops = opt_int(optarg, 1, 1 << 24, "--ops");
			break;
		case 'h':
			nheap = opt_int(optarg, 1, 256, "--heap-mutexes");
			break;
		default:
			return 2;
		}
	}

	/* The shared mutexes, a page each: the first half after the ctl
	 * page of the anonymous memory, the rest in the memfd. */
	int n_anon = nmutex / 2, n_memfd = nmutex - n_anon;
	uint8_t *anon = map_shared_anon((size_t)(1 + n_anon) * PG);
	uint8_t *mfd = map_memfd((size_t)n_memfd * PG);
	ctl = (struct ctl *)anon;
	for (int m = 0; m < nmutex; m++) {
		shared_pair[m] = (struct pair *)(m < n_anon ? anon + (size_t)(1 + m) * PG
							    : mfd + (size_t)(m - n_anon) * PG);
		init_robust(&shared_pair[m]->m, 1);
	}
	heap_pair = calloc((size_t)nheap, sizeof(*heap_pair));
	if (!heap_pair)
		fail(2, "churn_robust: calloc\n");
	for (int m = 0; m < nheap; m++)
		init_robust(&heap_pair[m].m, 0);
	if (pipe(kill_pipe) < 0)
		fail(2, "churn_robust: pipe: %s\n", strerror(errno));

	pthread_t mgr[MAXT];
	for (int t = 0; t < nthreads; t++) {
		sem_init(&exiting[t], 0, 0);
		if (pthread_create(&mgr[t], NULL, manager, (void *)(intptr_t)t) != 0)
			fail(2, "churn_robust: pthread_create\n");
	}

	/* The children: respawned until every slot is done. */
	unsigned long deaths_seen[3] = {0, 0, 0};
	int running = 0;
	for (int k = 0; k < nprocs; k++) {
		child_pid[k] = spawn(k);
		running++;
	}
	while (running) {
		struct pollfd pfd = {kill_pipe[0], POLLIN, 0};
		if (poll(&pfd, 1, 5) > 0) {
			char c;
			if (read(kill_pipe[0], &c, 1) == 1 && c >= 0 && c < nprocs &&
			    child_pid[(int)c] > 0)
				kill(child_pid[(int)c], SIGKILL);
		}
		int st;
		pid_t pid;
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			int k = 0;
			while (k < nprocs && child_pid[k] != pid)
				k++;
			if (k == nprocs)
				continue;
			child_pid[k] = 0;
			running--;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				if (ctl->done[k] != rounds)
					verdict(1, "MISMATCH child %d ended at round %d of %d\n", k,
						ctl->done[k], rounds);
				continue;
			}
			/* A death: planned in the round it last did. */
			int r = ctl->done[k] - 1;
			int kind = WIFEXITED(st) && WEXITSTATUS(st) == DIED_EXIT ? 0
				   : WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL	 ? 1
										 : -1;
			if (kind < 0) {
				/* Its own failure: it said why. */
				fail(WIFEXITED(st) ? WEXITSTATUS(st) : 1,
				     "churn_robust: child %d ended with status %#x in round %d\n",
				     k, st, r + 1);
			}
			int planned = r >= 0 && child_dies(k, r) ? child_death_kind(k, r) : -1;
			/* Killed by someone else (memvisor's end takes the
			 * tree with it): not a verdict on the memory. */
			if (planned < 0 || (kind == 0) != (planned == 0))
				fail(1,
				     "churn_robust: child %d died unplanned in round %d (status "
				     "%#x)\n",
				     k, r, st);
			deaths_seen[planned]++;
			if (ctl->done[k] < rounds) {
				child_pid[k] = spawn(k);
				running++;
			}
		}
	}
	for (int t = 0; t < nthreads; t++)
		pthread_join(mgr[t], NULL);

	/* Every pair, the deaths nobody met yet recovered now. */
	unsigned long sum = 0, hsum = 0;
	for (int m = 0; m < nmutex; m++) {
		struct pair *p = shared_pair[m];
		if (lock_pair(p, "shared", m))
			atomic_fetch_add(&ctl->recoveries, 1);
		sum += p->first;
		pthread_mutex_unlock(&p->m);
	}
	for (int m = 0; m < nheap; m++) {
		struct pair *p = &heap_pair[m];
		if (lock_pair(p, "heap", m))
			atomic_fetch_add(&heap_recoveries, 1);
		hsum += p->first;
		pthread_mutex_unlock(&p->m);
	}

	/* What was planned. */
	unsigned long planned[3] = {0, 0, 0}, tplanned = 0;
	for (int k = 0; k < nprocs; k++)
		for (int r = 0; r < rounds; r++)
			if (child_dies(k, r))
				planned[child_death_kind(k, r)]++;
	for (int t = 0; t < nthreads; t++)
		for (int i = 0; i < ops; i++)
			tplanned += thread_dies(t, i);
	unsigned long pdeaths = planned[0] + planned[1] + planned[2];
	unsigned long rec = atomic_load(&ctl->recoveries), hrec = atomic_load(&heap_recoveries);
	if (sum != (unsigned long)nprocs * (unsigned long)rounds)
		verdict(1, "MISMATCH shared increments %lu, planned %lu\n", sum,
			(unsigned long)nprocs * (unsigned long)rounds);
	if (hsum != (unsigned long)nthreads * (unsigned long)ops)
		verdict(1, "MISMATCH heap increments %lu, planned %lu\n", hsum,
			(unsigned long)nthreads * (unsigned long)ops);
	/* Kinds 1 and 2 both end by SIGKILL: told apart by the plan only. */
	if (deaths_seen[0] != planned[0] ||
	    deaths_seen[1] + deaths_seen[2] != planned[1] + planned[2])
		verdict(1, "MISMATCH deaths seen %lu by _exit, %lu by SIGKILL; planned %lu, %lu\n",
			deaths_seen[0], deaths_seen[1] + deaths_seen[2], planned[0],
			planned[1] + planned[2]);
	if (rec != pdeaths)
		verdict(1, "MISMATCH shared recoveries %lu, planned deaths %lu\n", rec, pdeaths);
	if (hrec != tplanned)
		verdict(1, "MISMATCH heap recoveries %lu, planned deaths %lu\n", hrec, tplanned);

	say("processes %d, rounds %d, shared mutexes %d: increments %lu, deaths %lu "
	    "(%lu _exit, %lu SIGKILL by the parent, %lu SIGKILL by itself), recoveries %lu\n",
	    nprocs, rounds, nmutex, sum, pdeaths, planned[0], planned[1], planned[2], rec);
	say("threads %d, operations %d, heap mutexes %d: increments %lu, deaths %lu, recoveries "
	    "%lu\n",
	    nthreads, ops, nheap, hsum, tplanned, hrec);
	char line[4096];
	int n = snprintf(line, sizeof(line), "shared pairs:");
	for (int m = 0; m < nmutex && n < (int)sizeof(line) - 32; m++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %llu",
			      (unsigned long long)shared_pair[m]->first);
	say("%s\n", line);
	n = snprintf(line, sizeof(line), "heap pairs:");
	for (int m = 0; m < nheap && n < (int)sizeof(line) - 32; m++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %llu",
			      (unsigned long long)heap_pair[m].first);
	say("%s\n", line);
	say("ok\n");
	return 0;
}
