/* forkstorm PROCS SECONDS: PROCS processes at once, each forking a child
 * that execs this program again ("forkstorm child K") as fast as it can
 * for SECONDS. The exec'd child maps memory, fills it with a pattern made
 * from K, checks it, and exits with status K % 100; its parent checks that
 * status. Prints "forkstorm ok SPAWNS" and exits 0, or names the first
 * mismatch and exits 3 (2 when a setup call failed). Used by the storm
 * tests (make check runs it briefly, make soak for longer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The exec'd child: map, fill, check, exit with K % 100 (a mismatch exits
 * 101, a failed mmap 102: never a status K % 100 can be). */
static int child(unsigned k)
{
	size_t len = (k % 8 + 1) * PAGE;
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 102;
	for (size_t i = 0; i < len; i += 256)
		p[i] = (unsigned char)(k + i / 256);
	for (size_t i = 0; i < len; i += 256)
		if (p[i] != (unsigned char)(k + i / 256))
			return 101;
	munmap(p, len);
	return (int)(k % 100);
}

/* One of the PROCS processes: fork+exec+wait in a loop; writes its number
 * of spawns to the pipe out. */
static int worker(const char *self, unsigned id, double seconds, int go, int out)
{
	unsigned long spawns = 0;
	char c;
	/* All PROCS start together: EOF on go once every one is forked. */
	if (read(go, &c, 1) < 0)
		return 2;
	double end = now() + seconds;
	while (now() < end) {
		unsigned k = id * 7919u + (unsigned)spawns;
		char arg[16];
		snprintf(arg, sizeof(arg), "%u", k);
		pid_t pid = fork();
		if (pid < 0) {
			perror("forkstorm: fork");
			return 2;
		}
		if (pid == 0) {
			execl(self, self, "child", arg, (char *)NULL);
			_exit(127);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid) {
			perror("forkstorm: waitpid");
			return 2;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != (int)(k % 100)) {
			fprintf(stderr, "forkstorm: child %u ended with status %#x, not exit %u\n", k,
				status, k % 100);
			return 3;
		}
		spawns++;
	}
	if (write(out, &spawns, sizeof(spawns)) != (ssize_t)sizeof(spawns))
		return 2;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child((unsigned)strtoul(argv[2], NULL, 10));
	int procs = argc > 1 ? atoi(argv[1]) : 200;
	double seconds = argc > 2 ? atof(argv[2]) : 5;
	int fds[2], go[2];
	if (pipe(fds) < 0 || pipe(go) < 0) {
		perror("forkstorm: pipe");
		return 2;
	}
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("forkstorm: fork");
			return 2;
		}
		if (pid == 0) {
			close(fds[0]);
			close(go[1]);
			_exit(worker("/proc/self/exe", (unsigned)i, seconds, go[0], fds[1]));
		}
	}
	close(fds[1]);
	close(go[1]);
	int rc = 0;
	for (int i = 0; i < procs; i++) {
		int status;
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 3;
	}
	unsigned long total = 0, n;
	while (read(fds[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
		total += n;
	if (rc)
		return rc;
	printf("forkstorm ok %lu\n", total);
	return 0;
}
