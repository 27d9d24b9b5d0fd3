/*
 * spawn — child creation through vfork()+execve(), posix_spawn() and fork().
 *
 * Usage: spawn [ROUNDS=3]
 *        spawn child K      (internal: the exec'd child mode)
 *
 * Each round starts three children, one after the other, each with its own
 * key K (0, 1, 2, 3, ... in order):
 *   vfork  — vfork(), then dup2 of a pipe onto stdout and execve() of
 *            /proc/self/exe "child K" (falling back to argv[0]);
 *   spawn  — posix_spawn() of the same, the pipe dup'ed by a file action;
 *   fork   — fork(), the child does the work itself, writes to the pipe and
 *            _exit()s without exec.
 * The child work maps memory (mmap, mremap, mprotect, munmap), verifies it,
 * prints "child K checksum X" and exits with K % 4. The parent reads each
 * child's output, waits for it, and checks that the output and exit code are
 * exactly what it computes itself for K.
 *
 * Tests run it natively and under memvisor and compare stdout; it checks that
 * vfork-style (CLONE_VFORK|CLONE_VM) children, posix_spawn and plain fork
 * children are followed and keep working.
 *
 * Output: "<how> K exit E checksum X" per child, then "checksum X".
 * Exit: 0 ok, 2 a syscall failed, 3 content or child output/exit mismatch,
 * 100 usage. The child mode exits K % 4 on success, 2/3 on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL
#define MAX_ROUNDS 1000

extern char **environ;

/* FNV-1a step over a whole 64-bit word, plus a shift so high bits feed back. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * FNV_PRIME;
	return h ^ (h >> 29);
}

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= FNV_PRIME;
	}
	return h;
}

static void die_sys(const char *what)
{
	fprintf(stderr, "spawn: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t pattern(long key, size_t i)
{
	return ((uint64_t)key << 40) ^ (i * 0x9e3779b97f4a7c15ULL) ^ 0xc3c3c3c3c3c3c3c3ULL;
}

/* The child's work: deterministic in K. Exits 2/3 on failure. */
static uint64_t child_work(long key)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (size_t)(1 + key % 8) * ps;
	size_t glen = len + 3 * ps;
	uint64_t h = fnv_u64(FNV_OFFSET, (uint64_t)key);

	uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die_sys("child mmap");
	for (size_t i = 0; i < len / 8; i++)
		p[i] = pattern(key, i);
	p = mremap(p, len, glen, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		die_sys("child mremap");
	for (size_t i = len / 8; i < glen / 8; i++)
		p[i] = pattern(key, i);
	if (mprotect(p, glen, PROT_READ) != 0)
		die_sys("child mprotect");
	for (size_t i = 0; i < glen / 8; i++) {
		if (p[i] != pattern(key, i)) {
			fprintf(stderr, "spawn: child %ld: mismatch at word %zu\n", key, i);
			exit(3);
		}
		h = fnv_u64(h, p[i]);
	}
	if (munmap(p, glen) != 0)
		die_sys("child munmap");
	return h;
}

static int child_line(char *buf, size_t size, long key)
{
	return snprintf(buf, size, "child %ld checksum %016" PRIx64 "\n", key, child_work(key));
}

static int status_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

/* Read everything from fd until EOF (at most size-1 bytes kept). */
static size_t slurp(int fd, char *buf, size_t size)
{
	size_t n = 0;
	for (;;) {
		char tmp[256];
		ssize_t r = read(fd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die_sys("read from child");
		if (r == 0)
			break;
		size_t take = (size_t)r;
		if (take > size - 1 - n)
			take = size - 1 - n;
		memcpy(buf + n, tmp, take);
		n += take;
	}
	buf[n] = '\0';
	return n;
}

enum how { HOW_VFORK, HOW_SPAWN, HOW_FORK };
static const char *const how_name[] = {"vfork", "spawn", "fork"};

/* Start child K the given way, collect its output and exit; fold into h. */
static uint64_t run_child(enum how how, long key, const char *self, uint64_t h)
{
	char keystr[32];
	snprintf(keystr, sizeof(keystr), "%ld", key);
	char *args[] = {(char *)self, "child", keystr, NULL};
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		die_sys("pipe2");
	fflush(NULL);

	switch (how) {
	case HOW_VFORK:
		pid = vfork();
		if (pid < 0)
			die_sys("vfork");
		if (pid == 0) {
			/* Only async-signal-safe syscalls here; nothing that writes memory. */
			if (dup2(fds[1], STDOUT_FILENO) < 0)
				_exit(126);
			execve("/proc/self/exe", args, environ);
			execve(self, args, environ);
			_exit(127);
		}
		break;
	case HOW_SPAWN: {
		posix_spawn_file_actions_t fa;
		int rc = posix_spawn_file_actions_init(&fa);
		if (rc == 0)
			rc = posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
		if (rc != 0) {
			errno = rc;
			die_sys("posix_spawn_file_actions");
		}
		rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, args, environ);
		if (rc == ENOENT || rc == EACCES)
			rc = posix_spawn(&pid, self, &fa, NULL, args, environ);
		if (rc != 0) {
			errno = rc;
			die_sys("posix_spawn");
		}
		posix_spawn_file_actions_destroy(&fa);
		break;
	}
	case HOW_FORK:
		pid = fork();
		if (pid < 0)
			die_sys("fork");
		if (pid == 0) {
			char line[128];
			int n = child_line(line, sizeof(line), key);
			if (write(fds[1], line, (size_t)n) != n)
				_exit(2);
			_exit((int)(key % 4));
		}
		break;
	}
	close(fds[1]);

	char out[512];
	size_t n = slurp(fds[0], out, sizeof(out));
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			die_sys("waitpid");
	}
	int code = status_code(st);

	char want[128];
	child_line(want, sizeof(want), key);
	if (code != (int)(key % 4) || strcmp(out, want) != 0) {
		fprintf(stderr,
			"spawn: %s child %ld: got exit %d output '%s'; want exit %ld output '%s'\n",
			how_name[how], key, code, out, key % 4, want);
		exit(3);
	}
	uint64_t csum;
	sscanf(out, "child %*d checksum %" SCNx64, &csum);
	printf("%s %ld exit %d checksum %016" PRIx64 "\n", how_name[how], key, code, csum);
	h = fnv_u64(h, (uint64_t)how);
	h = fnv_u64(h, (uint64_t)code);
	return fnv_bytes(h, out, n);
}

static long parse_num(const char *s, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v > max) {
		fprintf(stderr,
			"spawn: bad number '%s' (0..%ld)\n"
			"usage: spawn [ROUNDS] | spawn child K\n",
			s, max);
		exit(100);
	}
	return v;
}

int main(int argc, char **argv)
{
	long rounds = 3;

	if (argc == 3 && strcmp(argv[1], "child") == 0) {
		long key = parse_num(argv[2], 1000000);
		char line[128];
		child_line(line, sizeof(line), key);
		fputs(line, stdout);
		if (fflush(stdout) != 0)
			die_sys("child write");
		return (int)(key % 4);
	}
	if (argc > 2) {
		fprintf(stderr, "usage: spawn [ROUNDS] | spawn child K\n");
		return 100;
	}
	if (argc == 2)
		rounds = parse_num(argv[1], MAX_ROUNDS);

	uint64_t h = FNV_OFFSET;
	long key = 0;
	for (long r = 0; r < rounds; r++) {
		h = run_child(HOW_VFORK, key++, argv[0], h);
		h = run_child(HOW_SPAWN, key++, argv[0], h);
		h = run_child(HOW_FORK, key++, argv[0], h);
	}
	printf("checksum %016" PRIx64 "\n", h);
	return fflush(stdout) == 0 ? 0 : 2;
}
