/*
 * forkexec_chain — a chain of fork+exec generations, each doing mmap work.
 *
 * Usage: forkexec_chain [DEPTH=3 [FAILCODE]]
 *
 * At DEPTH > 0 the process forks; the child redirects its stdout into a pipe
 * and execs /proc/self/exe (falling back to argv[0]) with DEPTH-1. Meanwhile
 * the parent does its own mmap/mremap/munmap work, then reads the child's
 * "checksum X" line from the pipe, waits for it, and combines both. DEPTH 0
 * only does the mmap work (and, if FAILCODE is given, then exits with it
 * instead of printing, to test exit-status propagation). So DEPTH+1 processes run in a chain, each
 * one exec'd (except the first) from a forked child: tests use it to check that memvisor follows
 * fork and exec across generations and that the output matches a native run.
 *
 * Output: "checksum X" (one line).
 * Exit: 0 ok, 2 a syscall failed, 3 content mismatch (or a malformed child
 * output), 100 usage; a child that fails makes every ancestor exit with the
 * same code (128+N if it was killed by signal N).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL
#define MAX_DEPTH  64

/* FNV-1a step over a whole 64-bit word, plus a shift so high bits feed back. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * FNV_PRIME;
	return h ^ (h >> 29);
}

static void die_sys(const char *what)
{
	fprintf(stderr, "forkexec_chain: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t pattern(long depth, size_t i)
{
	return ((uint64_t)depth << 48) ^ (i * 0x9e3779b97f4a7c15ULL) ^ 0x5a5a5a5a5a5a5a5aULL;
}

/* mmap (depth+2) pages, fill, grow with mremap, verify, checksum, unmap. */
static uint64_t mmap_work(long depth)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (size_t)(depth + 2) * ps;
	size_t glen = 2 * len;
	uint64_t h = fnv_u64(FNV_OFFSET, (uint64_t)depth);

	uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die_sys("mmap");
	for (size_t i = 0; i < len / 8; i++)
		p[i] = pattern(depth, i);
	uint64_t *q = mremap(p, len, glen, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		die_sys("mremap");
	for (size_t i = len / 8; i < glen / 8; i++) {
		if (q[i] != 0) {
			fprintf(stderr,
				"forkexec_chain: depth %ld: grown tail not zero at word %zu\n",
				depth, i);
			exit(3);
		}
		q[i] = pattern(depth, i);
	}
	if (mprotect(q, glen, PROT_READ) != 0)
		die_sys("mprotect");
	for (size_t i = 0; i < glen / 8; i++) {
		if (q[i] != pattern(depth, i)) {
			fprintf(stderr, "forkexec_chain: depth %ld: mismatch at word %zu\n", depth,
				i);
			exit(3);
		}
		h = fnv_u64(h, q[i]);
	}
	if (munmap(q, glen) != 0)
		die_sys("munmap");
	return h;
}

static int status_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 2;
}

int main(int argc, char **argv)
{
	long depth = 3;
	long failcode = 0;

	if (argc > 3) {
		fprintf(stderr, "usage: forkexec_chain [DEPTH [FAILCODE]]\n");
		return 100;
	}
	if (argc == 3) {
		char *end;
		errno = 0;
		failcode = strtol(argv[2], &end, 10);
		if (errno || *end || end == argv[2] || failcode < 0 || failcode > 255) {
			fprintf(stderr, "forkexec_chain: bad FAILCODE '%s' (0..255)\n", argv[2]);
			return 100;
		}
	}
	if (argc >= 2) {
		char *end;
		errno = 0;
		depth = strtol(argv[1], &end, 10);
		if (errno || *end || end == argv[1] || depth < 0 || depth > MAX_DEPTH) {
			fprintf(stderr, "forkexec_chain: bad depth '%s' (0..%d)\n", argv[1],
				MAX_DEPTH);
			return 100;
		}
	}

	if (depth == 0) {
		uint64_t h = mmap_work(0);
		if (failcode) {
			fprintf(stderr, "forkexec_chain: depth 0: exiting with FAILCODE %ld\n",
				failcode);
			return (int)failcode;
		}
		printf("checksum %016" PRIx64 "\n", h);
		return fflush(stdout) == 0 ? 0 : 2;
	}

	int fds[2];
	if (pipe(fds) != 0)
		die_sys("pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die_sys("fork");
	if (pid == 0) {
		char arg[32];
		snprintf(arg, sizeof(arg), "%ld", depth - 1);
		close(fds[0]);
		if (dup2(fds[1], STDOUT_FILENO) < 0) {
			fprintf(stderr, "forkexec_chain: dup2: %s\n", strerror(errno));
			_exit(2);
		}
		close(fds[1]);
		char *args[] = {argv[0], arg, argc == 3 ? argv[2] : NULL, NULL};
		execv("/proc/self/exe", args);
		int e = errno;
		execv(argv[0], args);
		fprintf(stderr, "forkexec_chain: exec /proc/self/exe: %s; exec %s: %s\n",
			strerror(e), argv[0], strerror(errno));
		_exit(2);
	}
	close(fds[1]);

	uint64_t own = mmap_work(depth);

	char buf[256];
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fds[0], buf + n, sizeof(buf) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die_sys("read from child");
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == sizeof(buf) - 1)
			break;
	}
	buf[n] = '\0';
	close(fds[0]);

	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			die_sys("waitpid");
	}
	if (status_code(st) != 0) {
		fprintf(stderr, "forkexec_chain: depth %ld: child (depth %ld) failed with %d\n",
			depth, depth - 1, status_code(st));
		return status_code(st);
	}

	uint64_t child;
	char nl;
	if (sscanf(buf, "checksum %16" SCNx64 "%c", &child, &nl) != 2 || nl != '\n') {
		fprintf(stderr, "forkexec_chain: depth %ld: bad child output '%s'\n", depth, buf);
		return 3;
	}
	printf("checksum %016" PRIx64 "\n", fnv_u64(fnv_u64(own, child), (uint64_t)depth));
	return fflush(stdout) == 0 ? 0 : 2;
}
