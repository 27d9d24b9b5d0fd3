/* rb_tree [MIB]: a parent and a child to roll back as a tree
 * (tests/bats/rollback.bats).
 *
 * Each maps MIB MiB (default 4) of private memory and fills it with a
 * pattern of its own; 1 MiB of shared anonymous memory mapped before the
 * fork is both's, and in both hashes; the parent forks the child at the start and talks
 * to it through two pipes. The parent answers one input line at a time
 * from stdin, passing each to the child and printing, once the child
 * answered:
 *
 *   hashes N PARENT CHILD   N inputs seen before this one, the hash of
 *                           each process's memory and input count
 *
 * Commands: "w SEED K" each writes K pseudo-random pages of its memory;
 * "W SEED" each writes 8 pages of the shared memory; "G" the child forks
 * a grandchild that writes every page of the shared memory and exits, and
 * waits for it;
 * "m" each maps and writes a new 1 MiB region; "f" the child forks a
 * grandchild, which forks a great-grandchild, and both sleep ("forked
 * PID", the grandchild's, instead of hashes); "x" the child
 * exits ("child exited", once it has: the parent waits for its end
 * without reaping it, and answers the next inputs alone, "-" for the child's hash); "E" the child runs sleep
 * 300 in its place ("child runs sleep", then as after "x"); "U" the child
 * unmaps the private mapping of its own executable it made at the start;
 * "d" the child forks a grandchild that forks a great-grandchild and
 * exits, leaving it an orphan ("daemon PID", the great-grandchild's,
 * which sleeps); "S" the child writes to address 16 (SIGSEGV), the parent waits for its
 * answer; "K" the parent sends the child SIGTERM and reaps it ("child
 * killed", then as after "x"); anything else is just counted. At the start it prints "ready PARENT CHILD".
 *
 * With RB_NODUMP=1 the child makes itself not dumpable (PR_SET_DUMPABLE
 * 0): without privilege no process of its user may trace it.
 *
 * After a rollback of the tree to a mark taken while both waited for
 * input, the next "hashes" line must be the mark's. */
#include "wl.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096ul

static unsigned char *mem;
static size_t mem_len;
static uint64_t count;
static unsigned char *extra;
#define SHM_LEN (1ul << 20)
static unsigned char *shm;
/* Read at run time: the compiler does not see the write to 16 coming. */
static volatile int *volatile bad_ptr = (volatile int *)0x10;

static uint64_t hash(void)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < mem_len; i++)
		h = (h ^ mem[i]) * 0x100000001b3ull;
	for (size_t i = 0; i < SHM_LEN; i++)
		h = (h ^ shm[i]) * 0x100000001b3ull;
	h = mix(h ^ count);
	return mix(h ^ (uint64_t)(uintptr_t)extra);
}

static void fill(uint64_t seed)
{
	for (size_t i = 0; i < mem_len; i += 8) {
		uint64_t v = mix(seed + i);
		memcpy(mem + i, &v, 8);
	}
}

/* One command, in either process: what it writes. */
static void apply(const char *line)
{
	unsigned long long seed = 1, k = 0;
	count++;
	if (line[0] == 'w' && sscanf(line + 1, "%llu %llu", &seed, &k) == 2) {
		uint64_t s = mix(seed * 2654435761u + (uint64_t)getpid());
		for (unsigned long long i = 0; i < k; i++) {
			s = mix(s);
			mem[(s % (mem_len / PG)) * PG + (s >> 40) % PG] ^= (unsigned char)(s | 1);
		}
	} else if (line[0] == 'W' && sscanf(line + 1, "%llu", &seed) == 1) {
		uint64_t s = mix(seed + (uint64_t)getpid());
		for (int i = 0; i < 8; i++) {
			s = mix(s);
			shm[(s % (SHM_LEN / PG)) * PG + (s >> 40) % PG] ^= (unsigned char)(s | 1);
		}
	} else if (line[0] == 'm') {
		extra = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			     -1, 0);
		if (extra != MAP_FAILED)
			memset(extra, 7, 1 << 20);
	}
}

/* A line from fd, up to its newline; 0 at its end. */
static ssize_t read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		ssize_t r = read(fd, buf + n, 1);
		if (r <= 0)
			return r;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = 0;
	return (ssize_t)n;
}

/* The parent's next line of stdin, read a block at a time (a line
 * written whole is one read(2), the stop point of rollback --until
 * read:0); what came after it waits in pend. 0 at the end. */
static char pend[512];
static size_t n_pend;
static ssize_t read_input(char *buf, size_t len)
{
	for (;;) {
		char *nl = memchr(pend, '\n', n_pend);
		if (nl || n_pend == sizeof(pend)) {
			size_t n = nl ? (size_t)(nl - pend) + 1 : n_pend;
			if (n >= len)
				n = len - 1;
			memcpy(buf, pend, n);
			buf[n] = 0;
			memmove(pend, pend + n, n_pend - n);
			n_pend -= n;
			return (ssize_t)n;
		}
		ssize_t r = read(0, pend + n_pend, sizeof(pend) - n_pend);
		if (r <= 0)
			return r;
		n_pend += (size_t)r;
	}
}

static void child(int in, int out)
{
	char line[256], reply[64];
	fill(2);
	/* RB_NODUMP=1: the child forbids tracing by its own user
	 * (PR_SET_DUMPABLE 0), as a set-user-ID program is. */
	if (getenv("RB_NODUMP"))
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* A private mapping of a file, which "U" unmaps. */
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	void *file = fd >= 0 ? mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	for (;;) {
		if (read_line(in, line, sizeof(line)) <= 0)
			_exit(0);
		if (line[0] == 'x')
			_exit(0);
		if (line[0] == 'S')
			*bad_ptr = 1;
		if (line[0] == 'U' && file != MAP_FAILED) {
			munmap(file, 4096);
			file = MAP_FAILED;
		}
		if (line[0] == 'E') { /* a new program, which answers nothing */
			execl("/bin/sleep", "sleep", "300", (char *)NULL);
			_exit(6);
		}
		if (line[0] == 'd') {
			int p[2];
			pid_t h = -1;
			if (pipe(p) == 0) {
				if (fork() == 0) {
					pid_t g = fork();
					if (g == 0) {
						for (;;)
							pause();
					}
					if (write(p[1], &g, sizeof(g)) < 0)
						_exit(1);
					_exit(0);
				}
				if (read(p[0], &h, sizeof(h)) != sizeof(h))
					h = -1;
				close(p[0]);
				close(p[1]);
			}
			snprintf(reply, sizeof(reply), "daemon %d\n", (int)h);
		} else if (line[0] == 'G') {
			pid_t g = fork();
			if (g == 0) {
				for (size_t i = 0; i < SHM_LEN; i += PG)
					shm[i] ^= 0x5a;
				_exit(0);
			}
			if (g > 0)
				waitpid(g, NULL, 0);
			apply(line);
			snprintf(reply, sizeof(reply), "%016llx\n", (unsigned long long)hash());
		} else if (line[0] == 'f') {
			pid_t g = fork();
			if (g == 0) {
				if (fork() < 0)
					_exit(1);
				for (;;)
					pause();
			}
			snprintf(reply, sizeof(reply), "forked %d\n", (int)g);
		} else {
			apply(line);
			snprintf(reply, sizeof(reply), "%016llx\n", (unsigned long long)hash());
		}
		if (write(out, reply, strlen(reply)) < 0)
			_exit(4);
	}
}

int main(int argc, char **argv)
{
	mem_len = (size_t)(argc > 1 ? atoi(argv[1]) : 4) << 20;
	mem = mmap(NULL, mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	fill(1);
	shm = mmap(NULL, SHM_LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED)
		return 1;
	for (size_t i = 0; i < SHM_LEN; i += 64)
		shm[i] = (unsigned char)(i >> 6);
	int down[2], up[2];
	if (pipe(down) < 0 || pipe(up) < 0)
		return 1;
	pid_t kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0) {
		close(down[1]);
		close(up[0]);
		child(down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	say("ready %d %d\n", (int)getpid(), (int)kid);
	char line[256], reply[64];
	int gone = 0;
	for (;;) {
		if (read_input(line, sizeof(line)) <= 0)
			return 0;
		uint64_t n = count;
		if (!gone && line[0] == 'K') {
			count++;
			kill(kid, SIGTERM);
			waitpid(kid, NULL, 0);
			gone = 1;
			say("child killed\n");
			continue;
		}
		if (!gone && (line[0] == 'x' || line[0] == 'f' || line[0] == 'E' || line[0] == 'S' ||
			     line[0] == 'd')) {
			count++;
			if (write(down[1], line, strlen(line)) < 0)
				return 4;
			if (line[0] == 'x') {
				/* Ended before the next read (a zombie, not reaped):
				 * "x" never leaves its line in the pipe. */
				siginfo_t si;
				waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT);
			}
			if (line[0] == 'x' || line[0] == 'E') {
				gone = 1;
				say(line[0] == 'x' ? "child exited\n" : "child runs sleep\n");
				continue;
			}
			if (read_line(up[0], reply, sizeof(reply)) <= 0)
				return 5;
			say("%s", reply);
			continue;
		}
		apply(line);
		if (gone)
			strcpy(reply, "-");
		else if (write(down[1], line, strlen(line)) < 0 ||
			 read_line(up[0], reply, sizeof(reply)) <= 0)
			return 5;
		reply[strcspn(reply, "\n")] = 0;
		say("hashes %llu %016llx %s\n", (unsigned long long)n, (unsigned long long)hash(),
		    reply);
	}
}
