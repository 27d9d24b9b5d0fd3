/* reload_wl: a process with known memory that keeps using it, for the
 * evict and reload tests (tests/bats/reload.bats).
 *
 * Usage: reload_wl [--mib M] [--file PATH] [--thp]
 * (--thp: the regions are madvise(MADV_HUGEPAGE)d before they are filled)
 * Makes, filled with patterns: A (M MiB, default 64), B (4 MiB), C (1 MiB);
 * with --file, writes 1 MiB of pattern F to PATH (from a buffer freed
 * before any eviction). Prints "ready" (stdout) and "pid N" (stderr),
 * then obeys stdin, one line each, with output that does not depend on
 * addresses or timing (a run with evict must print what a run without
 * prints):
 *   check        verify A, B, C                        -> ok | bad R PAGE
 *   sum          a checksum of A, B, C                 -> sum HEX
 *   page R I     verify page I of region R (A, B or C)  -> page ok | page bad
 *   where R      region R's address                    -> at HEX
 *   loop         start a thread verifying A in a loop  -> looping
 *   unloop       stop it                               -> loop ok | loop bad
 *   write PATH   write(2) A's first MiB to PATH, compare -> write ok | write bad
 *   read         read(2) --file into C, verify it      -> read ok | read bad
 *   threads N    N threads verify slices of A at once  -> threads ok | threads bad
 *   fork         a child verifies A, B, C              -> fork ok | fork bad
 *   munmap       unmap A's second half; map it again: zeros -> munmap ok
 *   mremap       move B elsewhere; verify it there     -> mremap ok
 *   dontneed     MADV_DONTNEED B's first MiB: zeros; refill -> dontneed ok
 *   protect      mprotect B read-only, verify, back; mlock C, verify -> protect ok
 *   exec         execve /bin/echo "exec ok" with its path and argument
 *                strings in A (the supervisor reads them there)
 *   exit         -> bye, and exit 0 at once */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096UL
#define MIB (1UL << 20)

struct region {
	char name;
	char pat; /* which pattern fills it */
	char *addr;
	size_t len;
};

static struct region R[3];
static const char *file_path;
static int thp;
static volatile int looping;
static int loop_bad, loop_passes;
static pthread_t loop_thread;

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill_page(char *p, char pat, size_t page)
{
	uint64_t k = mix((uint64_t)pat << 40 ^ page), *w = (uint64_t *)(void *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		w[i] = mix(k + i);
}

static int check_page(const char *p, char pat, size_t page)
{
	uint64_t k = mix((uint64_t)pat << 40 ^ page);
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t i = 0; i < PAGE / 8; i++)
		if (w[i] != mix(k + i))
			return -1;
	return 0;
}

static long check_range(const struct region *r, size_t first, size_t last)
{
	for (size_t pg = first; pg < last; pg++)
		if (check_page(r->addr + pg * PAGE, r->pat, pg) < 0)
			return (long)pg;
	return -1;
}

static int zero_range(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return -1;
	return 0;
}

static void *xmap(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("reload_wl: mmap");
		exit(2);
	}
	if (thp && madvise(p, len, MADV_HUGEPAGE) < 0)
		perror("reload_wl: madvise(MADV_HUGEPAGE)");
	return p;
}

static void make(struct region *r, char name, size_t len)
{
	r->name = r->pat = name;
	r->len = len;
	r->addr = xmap(len);
	for (size_t pg = 0; pg < len / PAGE; pg++)
		fill_page(r->addr + pg * PAGE, r->pat, pg);
}

static void do_check(void)
{
	for (int i = 0; i < 3; i++) {
		long bad = check_range(&R[i], 0, R[i].len / PAGE);
		if (bad >= 0) {
			printf("bad %c %ld\n", R[i].name, bad);
			return;
		}
	}
	printf("ok\n");
}

static void do_page(const char *arg)
{
	char name;
	size_t pg;
	for (int i = 0; i < 3; i++)
		if (sscanf(arg, "%c %zu", &name, &pg) == 2 && name == R[i].name &&
		    pg < R[i].len / PAGE) {
			printf(check_range(&R[i], pg, pg + 1) < 0 ? "page ok\n" : "page bad\n");
			return;
		}
	printf("page what\n");
}

static void do_where(const char *arg)
{
	for (int i = 0; i < 3; i++)
		if (arg[0] == R[i].name) {
			printf("at %lx\n", (unsigned long)R[i].addr);
			return;
		}
	printf("at what\n");
}

static void do_sum(void)
{
	uint64_t s = 0;
	for (int i = 0; i < 3; i++) {
		const uint64_t *w = (const uint64_t *)(const void *)R[i].addr;
		for (size_t k = 0; k < R[i].len / 8; k++)
			s = mix(s ^ w[k]);
	}
	printf("sum %016llx\n", (unsigned long long)s);
}

static void *loop_main(void *arg)
{
	(void)arg;
	while (looping) {
		if (check_range(&R[0], 0, R[0].len / PAGE) >= 0)
			loop_bad++;
		loop_passes++;
	}
	return NULL;
}

static void do_write(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	int ok = fd >= 0 && write(fd, R[0].addr, MIB) == (ssize_t)MIB;
	char *back = xmap(MIB);
	ok = ok && pread(fd, back, MIB, 0) == (ssize_t)MIB;
	for (size_t pg = 0; ok && pg < MIB / PAGE; pg++)
		ok = check_page(back + pg * PAGE, R[0].pat, pg) == 0;
	munmap(back, MIB);
	if (fd >= 0)
		close(fd);
	printf(ok ? "write ok\n" : "write bad\n");
}

static void make_file(void)
{
	int fd = open(file_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char *buf = xmap(MIB);
	for (size_t pg = 0; pg < MIB / PAGE; pg++)
		fill_page(buf + pg * PAGE, 'F', pg);
	if (fd < 0 || write(fd, buf, MIB) != (ssize_t)MIB) {
		perror("reload_wl: writing --file");
		exit(2);
	}
	close(fd);
	munmap(buf, MIB);
}

static void do_read(void)
{
	int fd = file_path ? open(file_path, O_RDONLY) : -1;
	int ok = fd >= 0 && read(fd, R[2].addr, MIB) == (ssize_t)MIB;
	if (fd >= 0)
		close(fd);
	R[2].pat = 'F';
	ok = ok && check_range(&R[2], 0, MIB / PAGE) < 0;
	printf(ok ? "read ok\n" : "read bad\n");
}

struct slice {
	size_t first, last;
	long bad;
	pthread_barrier_t *bar;
};

static void *slice_main(void *arg)
{
	struct slice *s = arg;
	pthread_barrier_wait(s->bar);
	s->bad = check_range(&R[0], s->first, s->last);
	return NULL;
}

static void do_threads(int n)
{
	pthread_t t[64];
	struct slice s[64];
	pthread_barrier_t bar;
	if (n < 1 || n > 64)
		n = 8;
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	size_t pages = R[0].len / PAGE, per = pages / (size_t)n;
	for (int i = 0; i < n; i++) {
		s[i] = (struct slice){per * (size_t)i, i == n - 1 ? pages : per * (size_t)(i + 1), -1, &bar};
		pthread_create(&t[i], NULL, slice_main, &s[i]);
	}
	int ok = 1;
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		ok &= s[i].bad < 0;
	}
	pthread_barrier_destroy(&bar);
	printf(ok ? "threads ok\n" : "threads bad\n");
}

static void do_fork(void)
{
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		for (int i = 0; i < 3; i++)
			if (check_range(&R[i], 0, R[i].len / PAGE) >= 0)
				_exit(1);
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	printf(c > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "fork ok\n" : "fork bad\n");
}

static void do_munmap(void)
{
	size_t half = R[0].len / 2;
	char *tail = R[0].addr + half;
	munmap(tail, half);
	R[0].len = half;
	char *p = mmap(tail, half, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	int ok = p == tail && zero_range(p, half) == 0;
	if (p != MAP_FAILED)
		munmap(p, half);
	ok = ok && check_range(&R[0], 0, half / PAGE) < 0;
	printf(ok ? "munmap ok\n" : "munmap bad\n");
}

static void do_mremap(void)
{
	char *to = mmap(NULL, R[1].len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p = mremap(R[1].addr, R[1].len, R[1].len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	int ok = p == to;
	if (ok)
		R[1].addr = p;
	ok = ok && check_range(&R[1], 0, R[1].len / PAGE) < 0;
	printf(ok ? "mremap ok\n" : "mremap bad\n");
}

static void do_dontneed(void)
{
	madvise(R[1].addr, MIB, MADV_DONTNEED);
	int ok = zero_range(R[1].addr, MIB) == 0;
	for (size_t pg = 0; pg < MIB / PAGE; pg++)
		fill_page(R[1].addr + pg * PAGE, R[1].pat, pg);
	ok = ok && check_range(&R[1], 0, R[1].len / PAGE) < 0;
	printf(ok ? "dontneed ok\n" : "dontneed bad\n");
}

static void do_protect(void)
{
	int ok = mprotect(R[1].addr, R[1].len, PROT_READ) == 0;
	ok = ok && check_range(&R[1], 0, R[1].len / PAGE) < 0;
	ok = ok && mprotect(R[1].addr, R[1].len, PROT_READ | PROT_WRITE) == 0;
	ok = ok && mlock(R[2].addr, R[2].len) == 0;
	ok = ok && check_range(&R[2], 0, R[2].len / PAGE) < 0;
	munlock(R[2].addr, R[2].len);
	printf(ok ? "protect ok\n" : "protect bad\n");
}

/* The strings go into A (evicted): the supervisor's own read of the
 * exec's arguments must be served like any other access. The pages they
 * overwrite are A's; nothing checks A after an exec. */
static void do_exec(void)
{
	char *path = R[0].addr + R[0].len / 2, *arg = path + 64;
	strcpy(path, "/bin/echo");
	strcpy(arg, "exec ok");
	char *argv[] = {path, arg, NULL};
	fflush(stdout);
	execv(path, argv);
	printf("exec bad\n");
}

static void command(char *line)
{
	if (strcmp(line, "check") == 0)
		do_check();
	else if (strcmp(line, "sum") == 0)
		do_sum();
	else if (strncmp(line, "page ", 5) == 0)
		do_page(line + 5);
	else if (strncmp(line, "where ", 6) == 0)
		do_where(line + 6);
	else if (strcmp(line, "loop") == 0) {
		looping = 1;
		pthread_create(&loop_thread, NULL, loop_main, NULL);
		printf("looping\n");
	} else if (strcmp(line, "unloop") == 0) {
		looping = 0;
		pthread_join(loop_thread, NULL);
		printf(loop_bad || !loop_passes ? "loop bad\n" : "loop ok\n");
	} else if (strncmp(line, "write ", 6) == 0)
		do_write(line + 6);
	else if (strcmp(line, "read") == 0)
		do_read();
	else if (strncmp(line, "threads ", 8) == 0)
		do_threads(atoi(line + 8));
	else if (strcmp(line, "fork") == 0)
		do_fork();
	else if (strcmp(line, "munmap") == 0)
		do_munmap();
	else if (strcmp(line, "mremap") == 0)
		do_mremap();
	else if (strcmp(line, "dontneed") == 0)
		do_dontneed();
	else if (strcmp(line, "protect") == 0)
		do_protect();
	else if (strcmp(line, "exec") == 0)
		do_exec();
	else if (strcmp(line, "exit") == 0) {
		printf("bye\n");
		fflush(stdout);
		_exit(0);
	} else
		printf("unknown %s\n", line);
}

int main(int argc, char **argv)
{
	size_t mib = 64;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--thp") == 0)
			thp = 1;
		else if (i + 1 < argc && strcmp(argv[i], "--mib") == 0)
			mib = strtoul(argv[++i], NULL, 0);
		else if (i + 1 < argc && strcmp(argv[i], "--file") == 0)
			file_path = argv[++i];
	}
	if (file_path)
		make_file();
	make(&R[0], 'A', mib * MIB);
	make(&R[1], 'B', 4 * MIB);
	make(&R[2], 'C', MIB);
	fprintf(stderr, "pid %d\n", (int)getpid());
	printf("ready\n");
	fflush(stdout);
	char line[4200];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		command(line);
		fflush(stdout);
	}
	return 0;
}
