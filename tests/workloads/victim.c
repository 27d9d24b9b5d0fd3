/*
 * victim — a long-lived process driven over a pipe, one command at a time.
 *
 * Usage: victim          (commands on stdin, answers on stdout)
 *
 * Tests start it under memvisor with a coprocess/fifo, send one command per
 * line and read exactly one answer line per command (stdout is flushed after
 * every answer), so they can change its memory step by step and look at what
 * memvisor reports in between. Empty lines are ignored (no answer).
 *
 *   map NAME SIZE      anonymous private RW mapping of SIZE bytes (K/M/G
 *                      suffixes, 0x hex), filled with a pattern derived from
 *                      NAME                          -> ok 0x<start address>
 *   unmap NAME         munmap it                     -> ok
 *   remap NAME SIZE    mremap(MREMAP_MAYMOVE) to SIZE, any new part filled
 *                                                    -> ok 0x<start address>
 *   protect NAME PROT  mprotect to r, rw or none     -> ok
 *   touch NAME         rewrite the pattern (needs rw) -> ok
 *   check              verify every mapping's pattern (none-protected ones
 *                      are skipped)                  -> ok <checksum> | bad <NAME>
 *   sbrk DELTA         move the program break by DELTA (may be negative)
 *                                                    -> ok 0x<new break>
 *   fork               fork a child that does nothing until killed (it dies
 *                      with the victim, and has stdin/stdout on /dev/null)
 *                                                    -> ok <child pid>
 *   pid                                              -> ok <pid>
 *   ping                                             -> ok
 *   exit N             exit with status N at once (no answer)
 * EOF on stdin: exit 0.
 *
 * Errors never end the process: "err usage", "err unknown", "err exists",
 * "err nomap", "err full", "err toolong", "err protected", or, when a
 * syscall fails, "err <errno> <NAME>" (e.g. "err 12 ENOMEM" when memvisor
 * refuses a mapping). The check checksum depends only on the names, sizes and
 * contents of the live mappings (not their addresses or creation order).
 * Exit: 0 on EOF, N for "exit N", 2 if reading stdin fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL
#define MAX_MAPS   256
#define NAME_MAX_  63

struct map {
	char name[NAME_MAX_ + 1];
	uint64_t *addr; /* NULL: slot free */
	size_t size;	/* as requested */
	size_t len;	/* page-rounded */
	int prot;
};

static struct map maps[MAX_MAPS];
static size_t page_size;

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * FNV_PRIME;
	return h ^ (h >> 29);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = FNV_OFFSET;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= FNV_PRIME;
	}
	return h;
}

static uint64_t pattern(uint64_t seed, size_t i)
{
	return seed ^ (i * 0x9e3779b97f4a7c15ULL);
}

static void answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void answer(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void answer_errno(int e)
{
	const char *name = strerrorname_np(e);
	answer("err %d %s", e, name ? name : "?");
}

static int parse_size(const char *s, long long *out, int allow_negative)
{
	const char *p = s;
	int neg = 0;
	if (!s)
		return -1;
	if (*p == '-') {
		if (!allow_negative)
			return -1;
		neg = 1;
		p++;
	}
	if (*p < '0' || *p > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, 0);
	if (errno)
		return -1;
	unsigned shift = 0;
	if (*end == 'k' || *end == 'K')
		shift = 10;
	else if (*end == 'm' || *end == 'M')
		shift = 20;
	else if (*end == 'g' || *end == 'G')
		shift = 30;
	if (shift)
		end++;
	if (*end || v > (unsigned long long)INT64_MAX >> shift)
		return -1;
	*out = neg ? -(long long)(v << shift) : (long long)(v << shift);
	return 0;
}

static size_t round_pages(size_t n)
{
	return (n + page_size - 1) & ~(page_size - 1);
}

static struct map *find(const char *name)
{
	for (int i = 0; i < MAX_MAPS; i++)
		if (maps[i].addr && strcmp(maps[i].name, name) == 0)
			return &maps[i];
	return NULL;
}

static void fill(struct map *m, size_t from_word)
{
	uint64_t seed = name_hash(m->name);
	for (size_t i = from_word; i < m->len / 8; i++)
		m->addr[i] = pattern(seed, i);
}

static void cmd_map(const char *name, const char *sizestr)
{
	long long size;
	if (!name || parse_size(sizestr, &size, 0) != 0 || size == 0 || strlen(name) > NAME_MAX_) {
		answer("err usage");
		return;
	}
	if (find(name)) {
		answer("err exists");
		return;
	}
	struct map *m = NULL;
	for (int i = 0; i < MAX_MAPS && !m; i++)
		if (!maps[i].addr)
			m = &maps[i];
	if (!m) {
		answer("err full");
		return;
	}
	size_t len = round_pages((size_t)size);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		answer_errno(errno);
		return;
	}
	strcpy(m->name, name);
	m->addr = p;
	m->size = (size_t)size;
	m->len = len;
	m->prot = PROT_READ | PROT_WRITE;
	fill(m, 0);
	answer("ok %p", p);
}

static void cmd_unmap(const char *name)
{
	struct map *m = name ? find(name) : NULL;
	if (!name) {
		answer("err usage");
		return;
	}
	if (!m) {
		answer("err nomap");
		return;
	}
	if (munmap(m->addr, m->len) != 0) {
		answer_errno(errno);
		return;
	}
	m->addr = NULL;
	answer("ok");
}

static void cmd_remap(const char *name, const char *sizestr)
{
	long long size;
	if (!name || parse_size(sizestr, &size, 0) != 0 || size == 0) {
		answer("err usage");
		return;
	}
	struct map *m = find(name);
	if (!m) {
		answer("err nomap");
		return;
	}
	size_t len = round_pages((size_t)size);
	if (len > m->len && !(m->prot & PROT_WRITE)) {
		answer("err protected");
		return;
	}
	void *p = mremap(m->addr, m->len, len, MREMAP_MAYMOVE);
	if (p == MAP_FAILED) {
		answer_errno(errno);
		return;
	}
	size_t old = m->len;
	m->addr = p;
	m->size = (size_t)size;
	m->len = len;
	if (len > old)
		fill(m, old / 8);
	answer("ok %p", p);
}

static void cmd_protect(const char *name, const char *protstr)
{
	int prot;
	if (!name || !protstr) {
		answer("err usage");
		return;
	}
	if (strcmp(protstr, "rw") == 0)
		prot = PROT_READ | PROT_WRITE;
	else if (strcmp(protstr, "r") == 0)
		prot = PROT_READ;
	else if (strcmp(protstr, "none") == 0)
		prot = PROT_NONE;
	else {
		answer("err usage");
		return;
	}
	struct map *m = find(name);
	if (!m) {
		answer("err nomap");
		return;
	}
	if (mprotect(m->addr, m->len, prot) != 0) {
		answer_errno(errno);
		return;
	}
	m->prot = prot;
	answer("ok");
}

static void cmd_touch(const char *name)
{
	if (!name) {
		answer("err usage");
		return;
	}
	struct map *m = find(name);
	if (!m) {
		answer("err nomap");
		return;
	}
	if (!(m->prot & PROT_WRITE)) {
		answer("err protected");
		return;
	}
	fill(m, 0);
	answer("ok");
}

static void cmd_check(void)
{
	uint64_t sum = 0;
	for (int i = 0; i < MAX_MAPS; i++) {
		struct map *m = &maps[i];
		if (!m->addr)
			continue;
		uint64_t seed = name_hash(m->name);
		uint64_t h = fnv_u64(seed, m->size);
		if (m->prot & PROT_READ) {
			for (size_t w = 0; w < m->len / 8; w++) {
				if (m->addr[w] != pattern(seed, w)) {
					fprintf(stderr,
						"victim: %s: mismatch at byte offset %zu: got "
						"0x%016" PRIx64 "\n",
						m->name, w * 8, m->addr[w]);
					answer("bad %s", m->name);
					return;
				}
				h = fnv_u64(h, m->addr[w]);
			}
		}
		sum += h;
	}
	answer("ok %016" PRIx64, fnv_u64(FNV_OFFSET, sum));
}

static void cmd_sbrk(const char *deltastr)
{
	long long delta;
	if (parse_size(deltastr, &delta, 1) != 0) {
		answer("err usage");
		return;
	}
	void *old = sbrk((intptr_t)delta);
	if (old == (void *)-1) {
		answer_errno(errno);
		return;
	}
	answer("ok %p", (void *)((char *)old + delta));
}

static void cmd_fork(void)
{
	pid_t parent = getpid();
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		answer_errno(errno);
		return;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			dup2(fd, STDOUT_FILENO);
			if (fd > STDOUT_FILENO)
				close(fd);
		}
		for (;;)
			pause();
	}
	answer("ok %d", (int)pid);
}

int main(int argc, char **argv)
{
	char line[512];

	page_size = (size_t)sysconf(_SC_PAGESIZE);
	if (argc != 1) {
		fprintf(stderr, "usage: victim  (commands on stdin; see the source)\n");
		return 100;
	}
	/* Forked children are reaped automatically. */
	signal(SIGCHLD, SIG_IGN);

	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strlen(line);
		if (n && line[n - 1] == '\n') {
			line[n - 1] = '\0';
		} else if (!feof(stdin)) {
			int c;
			while ((c = getchar()) != EOF && c != '\n')
				;
			answer("err toolong");
			continue;
		}
		char *save;
		char *cmd = strtok_r(line, " \t\r", &save);
		if (!cmd)
			continue;
		char *a1 = strtok_r(NULL, " \t\r", &save);
		char *a2 = strtok_r(NULL, " \t\r", &save);

		if (strcmp(cmd, "map") == 0)
			cmd_map(a1, a2);
		else if (strcmp(cmd, "unmap") == 0)
			cmd_unmap(a1);
		else if (strcmp(cmd, "remap") == 0)
			cmd_remap(a1, a2);
		else if (strcmp(cmd, "protect") == 0)
			cmd_protect(a1, a2);
		else if (strcmp(cmd, "touch") == 0)
			cmd_touch(a1);
		else if (strcmp(cmd, "check") == 0)
			cmd_check();
		else if (strcmp(cmd, "sbrk") == 0)
			cmd_sbrk(a1);
		else if (strcmp(cmd, "fork") == 0)
			cmd_fork();
		else if (strcmp(cmd, "pid") == 0)
			answer("ok %d", (int)getpid());
		else if (strcmp(cmd, "ping") == 0)
			answer("ok");
		else if (strcmp(cmd, "exit") == 0) {
			char *end;
			long code = a1 ? strtol(a1, &end, 10) : 0;
			if (!a1 || *end || code < 0 || code > 255) {
				answer("err usage");
				continue;
			}
			fflush(stdout);
			_exit((int)code);
		} else
			answer("err unknown");
	}
	if (ferror(stdin)) {
		fprintf(stderr, "victim: read stdin: %s\n", strerror(errno));
		return 2;
	}
	return 0;
}
