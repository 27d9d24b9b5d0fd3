/* ckpt_churn: processes and threads that come and go, for the checkpoint
 * tests.
 *
 *   ckpt_churn threads       threads created and ended without pause
 *                            (4 long-lived, short ones ending after a few
 *                            ms); stdin "count" -> "created N"
 *   ckpt_churn fork N DIR    N children, each with a 4 MiB region of its
 *                            own pattern, dumped to DIR/child-I.bin and
 *                            announced as "child I PID START END"; they
 *                            live until the parent's stdin ends
 *   ckpt_churn procs         children forked and ending without pause;
 *                            stdin "count" -> "forked N"
 *   ckpt_churn big MIB       a dense MIB region and one child ("child
 *                            PID"), both waiting for stdin's end
 *   ckpt_churn vfork         vfork()s children that sleep 1 s before they
 *                            exec true, one after the other, until stdin
 *                            ends: the parent is nearly always waiting in
 *                            vfork
 *   ckpt_churn vfork1        the same from a single-threaded parent (which
 *                            then has no thread that can stop while its
 *                            child sleeps), after forking a child that
 *                            holds 4 MiB it wrote ("child PID"); stdin is
 *                            polled between the vforks
 *   ckpt_churn execs         exec all the time: a child that execs itself
 *                            without pause (from a second thread while a
 *                            third runs, then from the leader while
 *                            another thread runs, in turn), while the
 *                            parent forks children that exec /bin/true;
 *                            stdin "count" -> "execs N" (the child's
 *                            generation); at stdin's end the child is
 *                            killed
 *   ckpt_churn compute       deterministic work: 4 threads, 200 rounds of
 *                            hashing 4 MiB each, with 2 ms sleeps and
 *                            mmap/munmap between rounds; prints the hashes
 * Every mode prints "ready PID" when set up, and exits 0 at stdin's end
 * (compute: when done). */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static atomic_long created;
static atomic_bool stopping;

static void nap_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void *short_thread(void *arg)
{
	char buf[16384];
	memset(buf, (int)(intptr_t)arg, sizeof(buf));
	nap_us(1000 + (long)((intptr_t)arg % 4) * 1000);
	return NULL;
}

static void *long_thread(void *arg)
{
	volatile uint64_t x = (uint64_t)(intptr_t)arg;
	while (!atomic_load(&stopping)) {
		x = mix(x);
		nap_us(500);
	}
	return NULL;
}

static void *spawner(void *arg)
{
	for (intptr_t i = 0; !atomic_load(&stopping); i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_thread, (void *)i) == 0) {
			pthread_detach(t);
			atomic_fetch_add(&created, 1);
		}
		nap_us(200);
	}
	return NULL;
}

static void answer_counts(const char *word)
{
	char line[256];
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "count", 5) == 0) {
			printf("%s %ld\n", word, atomic_load(&created));
			fflush(stdout);
		}
	}
}

static int mode_threads(void)
{
	pthread_t l[4], s;
	for (intptr_t i = 0; i < 4; i++)
		pthread_create(&l[i], NULL, long_thread, (void *)i);
	pthread_create(&s, NULL, spawner, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	answer_counts("created");
	atomic_store(&stopping, true);
	pthread_join(s, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(l[i], NULL);
	return 0;
}

static void child_main(int idx, const char *dir, int hold)
{
	size_t len = 4u << 20;
	uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t i = 0; i < len / 8; i++)
		p[i] = mix((uint64_t)idx << 40 | i);
	char path[4096];
	snprintf(path, sizeof(path), "%s/child-%d.bin", dir, idx);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, p, len) != (ssize_t)len)
		_exit(3);
	close(fd);
	printf("child %d %d %lx %lx\n", idx, (int)getpid(), (unsigned long)p, (unsigned long)p + len);
	fflush(stdout);
	char c;
	while (read(hold, &c, 1) > 0)
		;
	_exit(0);
}

static int mode_fork(int n, const char *dir)
{
	int hold[2];
	if (pipe(hold) < 0)
		return 2;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			close(hold[1]);
			child_main(i, dir, hold[0]);
		}
	}
	close(hold[0]);
	nap_us(100000);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char line[256];
	while (fgets(line, sizeof(line), stdin))
		;
	close(hold[1]);
	while (wait(NULL) > 0)
		;
	return 0;
}

static void *answer_forked(void *arg)
{
	(void)arg;
	answer_counts("forked");
	return NULL;
}

static int mode_procs(void)
{
	pthread_t t;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	/* The answering thread reads stdin; this one forks. */
	pthread_create(&t, NULL, answer_forked, NULL);
	signal(SIGCHLD, SIG_DFL);
	for (long i = 0;; i++) {
		int st;
		while (waitpid(-1, &st, WNOHANG) > 0)
			;
		if (pthread_tryjoin_np(t, NULL) == 0)
			break;
		pid_t pid = fork();
		if (pid == 0) {
			nap_us(1000 * (i % 20));
			_exit(0);
		}
		if (pid > 0)
			atomic_fetch_add(&created, 1);
		nap_us(2000);
	}
	while (wait(NULL) > 0)
		;
	return 0;
}

static int mode_big(size_t mib)
{
	size_t len = mib << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (size_t off = 0; off < len; off += PAGE)
		memset(p + off, (int)(off / PAGE), PAGE);
	int hold[2];
	if (pipe(hold) < 0)
		return 2;
	pid_t child = fork();
	if (child == 0) {
		close(hold[1]);
		char c;
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(hold[0]);
	printf("ready %d\nchild %d\n", (int)getpid(), (int)child);
	fflush(stdout);
	char line[256];
	while (fgets(line, sizeof(line), stdin))
		;
	close(hold[1]);
	waitpid(child, NULL, 0);
	return 0;
}

static atomic_bool input_over;

static void *watch_stdin(void *arg)
{
	(void)arg;
	char line[256];
	while (fgets(line, sizeof(line), stdin))
		;
	atomic_store(&input_over, true);
	return NULL;
}

static int mode_vfork1(void)
{
	pid_t holder = fork();
	if (holder == 0) {
		size_t len = 4u << 20;
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		for (size_t off = 0; off < len; off += PAGE)
			memset(p + off, (int)(off / PAGE) | 1, PAGE);
		for (;;)
			pause();
	}
	printf("ready %d\nchild %d\n", (int)getpid(), (int)holder);
	fflush(stdout);
	for (;;) {
		struct pollfd pfd = {.fd = 0, .events = POLLIN};
		char buf[256];
		if (poll(&pfd, 1, 0) > 0 && read(0, buf, sizeof(buf)) <= 0)
			break;
		pid_t pid = vfork();
		if (pid == 0) {
			struct timespec ts = {1, 0};
			nanosleep(&ts, NULL);
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	return 0;
}

/* stdin "count" -> "execs N", N read from the file arg names; stdin's
 * end sets input_over. */
static void *watch_counts(void *arg)
{
	char line[256];
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "count", 5) != 0)
			continue;
		char gen[32] = "0";
		/* The child truncates the file before it writes the next
		 * number: an empty read is that moment, not a count. */
		for (int tries = 0; tries < 1000; tries++) {
			int fd = open(arg, O_RDONLY | O_CLOEXEC);
			ssize_t n = fd >= 0 ? read(fd, gen, sizeof(gen) - 1) : -1;
			if (fd >= 0)
				close(fd);
			gen[n > 0 ? n : 0] = '\0';
			if (n > 0)
				break;
			nap_us(1000);
		}
		printf("execs %s\n", gen);
		fflush(stdout);
	}
	atomic_store(&input_over, true);
	return NULL;
}

static int mode_vfork(void)
{
	pthread_t t;
	pthread_create(&t, NULL, watch_stdin, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (!atomic_load(&input_over)) {
		pid_t pid = vfork();
		if (pid == 0) {
			/* Only async-signal-safe calls in a vfork child. */
			struct timespec ts = {1, 0};
			nanosleep(&ts, NULL);
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	pthread_join(t, NULL);
	return 0;
}

/* ---- execs ---------------------------------------------------------- */

static char **exec_argv;

static void exec_next(void)
{
	execv("/proc/self/exe", exec_argv);
	_exit(127);
}

static void *exec_thread(void *arg)
{
	(void)arg;
	exec_next();
	return NULL;
}

static void *spin_thread(void *arg)
{
	(void)arg;
	for (;;)
		nap_us(100);
	return NULL;
}

/* One generation of the exec-self child: argv[2] is its number, which it
 * writes to the file argv[3] names before the next exec. */
static int mode_exec_self(char **argv)
{
	long gen = atol(argv[2]);
	char next[32];
	snprintf(next, sizeof(next), "%ld", gen + 1);
	int fd = open(argv[3], O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, next, strlen(next)) < 0)
			_exit(3);
		close(fd);
	}
	char *nargv[] = {argv[0], argv[1], next, argv[3], NULL};
	exec_argv = nargv;
	pthread_t t, u;
	pthread_create(&u, NULL, spin_thread, NULL);
	if (gen % 2) {
		/* The leader is killed; the exec'ing thread takes its tid. */
		pthread_create(&t, NULL, exec_thread, NULL);
		for (;;)
			pause();
	}
	exec_next();
	return 1;
}

static int mode_execs(const char *self)
{
	const char *tmp = getenv("TMPDIR");
	char genfile[4096];
	snprintf(genfile, sizeof(genfile), "%s/ckpt_churn.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int gfd = mkstemp(genfile);
	if (gfd < 0)
		return 2;
	close(gfd);
	pid_t child = fork();
	if (child == 0) {
		char *argv[] = {(char *)self, "exec-self", "0", genfile, NULL};
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	pthread_t t;
	pthread_create(&t, NULL, watch_counts, genfile);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (!atomic_load(&input_over)) {
		pid_t pid = fork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pthread_join(t, NULL);
	unlink(genfile);
	return 0;
}

#define C_THREADS 4
#define C_ROUNDS 200
static uint64_t results[C_THREADS][C_ROUNDS];

static void *compute_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	size_t len = 4u << 20;
	uint64_t *buf = malloc(len);
	for (size_t i = 0; i < len / 8; i++)
		buf[i] = mix((uint64_t)id << 32 | i);
	for (int r = 0; r < C_ROUNDS; r++) {
		uint64_t h = (uint64_t)r;
		for (size_t i = 0; i < len / 8; i++) {
			h = mix(h ^ buf[i]);
			buf[i] = h;
		}
		results[id][r] = h;
		void *m = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset(m, r, 65536);
		munmap(m, 65536);
		nap_us(2000);
	}
	free(buf);
	return NULL;
}

static int mode_compute(void)
{
	pthread_t t[C_THREADS];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (intptr_t i = 0; i < C_THREADS; i++)
		pthread_create(&t[i], NULL, compute_thread, (void *)i);
	for (int i = 0; i < C_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < C_THREADS; i++)
		for (int r = 0; r < C_ROUNDS; r += 8)
			printf("thread %d round %d %016llx\n", i, r, (unsigned long long)results[i][r]);
	printf("done\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "threads") == 0)
		return mode_threads();
	if (argc >= 4 && strcmp(argv[1], "fork") == 0)
		return mode_fork(atoi(argv[2]), argv[3]);
	if (argc >= 2 && strcmp(argv[1], "procs") == 0)
		return mode_procs();
	if (argc >= 3 && strcmp(argv[1], "big") == 0)
		return mode_big(strtoul(argv[2], NULL, 0));
	if (argc >= 2 && strcmp(argv[1], "compute") == 0)
		return mode_compute();
	if (argc >= 2 && strcmp(argv[1], "vfork") == 0)
		return mode_vfork();
	if (argc >= 2 && strcmp(argv[1], "vfork1") == 0)
		return mode_vfork1();
	if (argc >= 2 && strcmp(argv[1], "execs") == 0)
		return mode_execs(argv[0]);
	if (argc >= 4 && strcmp(argv[1], "exec-self") == 0)
		return mode_exec_self(argv);
	fprintf(stderr, "usage: ckpt_churn threads|fork N DIR|procs|big MIB|compute|vfork|vfork1|execs\n");
	return 2;
}
