/* kheld: memory the kernel reads or writes on the program's behalf, with
 * no fault of the program's own: robust mutexes and thread-exit words
 * (written by the kernel at exit), io_uring registered buffers (pinned)
 * and registered files, an exec's path. Driven by lines on stdin, for
 * the evict and --live tests (tests/bats/kernel_held.bats).
 *
 *   kheld [--mib N] [--dir DIR]
 *
 * At start: a private region of N MiB (default 16) filled with a pattern,
 * something to copy; the robust mutexes live in its last page, so a
 * --live copy reaches them last. Prints "ready PID". Commands (one
 * answer line each, written with write(2)):
 *   robust-lock     a thread locks a robust mutex and waits: "locked"
 *   robust-exit     it exits holding the mutex: "exited"
 *   robust-check    lock it, waiting at most 3 s: "EOWNERDEAD", "timeout"
 *                   or "rc N"
 *   pshared-lock    a child process locks a process-shared robust mutex
 *                   in shared anonymous memory and waits: "child locked"
 *   pshared-exit    the child exits holding it: "child exited"
 *   pshared-check   as robust-check, on that mutex
 *   join-start      a thread starts and waits: "started". Made with
 *                   clone(CLONE_CHILD_CLEARTID) as pthread_create does,
 *                   its exit word on a page of the region of its own,
 *                   which nothing touches until the join
 *   join            the thread exits; 0.2 s later wait (at most 3 s) for
 *                   the kernel to clear its exit word, as pthread_join
 *                   does: "joined" or "timeout"
 *   uring-setup     an io_uring with a registered buffer of 16 KiB (a
 *                   mapping of its own, pattern A) and a file in DIR
 *                   (default $TMPDIR or /tmp): "uring ready ADDR"
 *   uring-read      write pattern B to the file, READ_FIXED it into the
 *                   buffer: "read ok" or "read MISMATCH at N"
 *   uring-write     store pattern C into the buffer, WRITE_FIXED it to
 *                   the file, read the file: "write ok" or "write
 *                   MISMATCH at N"
 *   memfd-setup     a memfd of 64 KiB mapped shared, pattern D, in the
 *                   ring's registered files, its descriptor closed:
 *                   "memfd ready"
 *   memfd-read      an io_uring READ of its first page (registered file):
 *                   "memfd read ok" or "memfd read MISMATCH at N"
 *   memfd-write     an io_uring WRITE of 16 bytes at offset 100, then the
 *                   page through the mapping: "memfd write ok" or "memfd
 *                   write MISMATCH at N"
 *   gen-start       a thread: for gen = 1, 2, ...: store gen in a word of
 *                   the private region (a plain store), write gen to the
 *                   file, READ_FIXED it into the buffer; "gen WORD BUF"
 *                   (the two addresses). So at any instant the buffer's
 *                   word is at most the plain word.
 *   gen-stop        stop it: "gen stopped N"
 *   exec-prepare    copy this program's path and "--exec-ok" into fresh
 *                   pages: "prepared"
 *   exec-go         execv() them; the new program prints "exec ok" and
 *                   exits 0; on failure: "exec failed ERRNO"
 *   async-start     an io_uring read of a pipe forced to an io_uring
 *                   worker thread (IOSQE_ASYNC), which waits in it:
 *                   "async waiting"
 *   async-finish    write 64 bytes of pattern E to the pipe, wait for the
 *                   read: "async ok" or "async MISMATCH at N"
 *   mark            write a 16-byte marker "KHELD-MARK-nnnn" at the start
 *                   of each page of the region: "marked N"
 *   abort           abort(): SIGABRT, a core dump where the limit allows
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/workloads/wl.h"

#define PG	 4096u
#define BUF_LEN	 (4 * PG)
#define MEMFD_SZ (16 * PG)

static uint8_t *region;
static size_t region_len;
static pthread_mutex_t *robust; /* in the region's last page */
static pthread_mutex_t *pshared;
static int robust_pipe[2], join_pipe[2];
static pthread_t robust_thr, gen_thr;
static pid_t child = -1;
static struct io_uring ring;
static bool have_ring;
static uint8_t *ubuf;
static int file_fd = -1;
static uint8_t *mf_map;
static atomic_bool gen_run;
static atomic_ulong gen_count;
static char *exec_path, *exec_arg;

static uint8_t pat(unsigned salt, size_t i)
{
	uint32_t x = (uint32_t)(i >> 12) * 2654435761u ^ salt * 40503u ^ (uint32_t)i;
	return (uint8_t)(x ^ x >> 11 ^ 0x5a);
}

static void fill(uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(salt, i);
}

static long bad_at(const volatile uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pat(salt, i))
			return (long)i;
	return -1;
}

static void init_robust(pthread_mutex_t *m, bool shared)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (shared)
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

static void *robust_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(robust);
	say("locked\n");
	char c;
	while (read(robust_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	/* Exits holding the mutex: the kernel marks it FUTEX_OWNER_DIED
	 * (kernel/futex/core.c exit_robust_list). Nothing here touches it. */
	return NULL;
}

static void check_lock(pthread_mutex_t *m)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3;
	int rc = pthread_mutex_timedlock(m, &ts);
	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(m);
		pthread_mutex_unlock(m);
		say("EOWNERDEAD\n");
	} else if (rc == ETIMEDOUT) {
		say("timeout\n");
	} else {
		say("rc %d\n", rc);
	}
}

/* The clone thread's exit word: the region's second page. */
static volatile pid_t *exit_word(void)
{
	return (volatile pid_t *)(region + PG);
}

/* Raw system calls only: the thread shares the creator's TLS. */
static int join_main(void *arg)
{
	(void)arg;
	char c;
	while (syscall(SYS_read, join_pipe[0], &c, 1) < 0)
		;
	syscall(SYS_exit, 0);
	return 0;
}

static void join_start(void)
{
	size_t len = 256 << 10;
	char *stack = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
		    CLONE_SYSVSEM | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
	if (pipe(join_pipe) < 0 ||
	    clone(join_main, stack + len, flags, NULL, NULL, NULL, (pid_t *)exit_word()) < 0) {
		say("failed %d\n", errno);
		return;
	}
	while (!*exit_word())
		usleep(1000);
	say("started\n");
}

static void join(void)
{
	if (write(join_pipe[1], "x", 1) != 1) {
		say("failed %d\n", errno);
		return;
	}
	usleep(200000);
	for (int i = 0; i < 300; i++) {
		pid_t w = *exit_word();
		if (!w) {
			say("joined\n");
			return;
		}
		struct timespec ts = {0, 10 * 1000000};
		syscall(SYS_futex, exit_word(), FUTEX_WAIT, w, &ts, NULL, 0);
	}
	say("timeout\n");
}

static int uring_wait(void)
{
	struct io_uring_cqe *cqe;
	int rc = io_uring_submit(&ring);
	if (rc < 0)
		return rc;
	rc = io_uring_wait_cqe(&ring, &cqe);
	if (rc < 0)
		return rc;
	rc = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	return rc;
}

static void uring_setup(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/kheld.XXXXXX", dir);
	file_fd = mkstemp(path);
	if (file_fd < 0) {
		say("uring failed mkstemp %d\n", errno);
		return;
	}
	unlink(path);
	ubuf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(ubuf, BUF_LEN, 'A');
	int rc = io_uring_queue_init(8, &ring, 0);
	if (rc < 0) {
		say("uring failed init %d\n", -rc);
		return;
	}
	have_ring = true;
	struct iovec iov = {ubuf, BUF_LEN};
	rc = io_uring_register_buffers(&ring, &iov, 1);
	if (rc < 0) {
		say("uring failed register %d\n", -rc);
		return;
	}
	say("uring ready %p\n", (void *)ubuf);
}

static void uring_read(void)
{
	static uint8_t b[BUF_LEN];
	fill(b, BUF_LEN, 'B');
	if (pwrite(file_fd, b, BUF_LEN, 0) != BUF_LEN) {
		say("read failed pwrite %d\n", errno);
		return;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read_fixed(sqe, file_fd, ubuf, BUF_LEN, 0, 0);
	int rc = uring_wait();
	if (rc != BUF_LEN) {
		say("read failed %d\n", rc);
		return;
	}
	long at = bad_at(ubuf, BUF_LEN, 'B');
	if (at < 0)
		say("read ok\n");
	else
		say("read MISMATCH at %ld\n", at);
}

static void uring_write(void)
{
	static uint8_t b[BUF_LEN];
	fill(ubuf, BUF_LEN, 'C');
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write_fixed(sqe, file_fd, ubuf, BUF_LEN, 0, 0);
	int rc = uring_wait();
	if (rc != BUF_LEN || pread(file_fd, b, BUF_LEN, 0) != BUF_LEN) {
		say("write failed %d\n", rc);
		return;
	}
	long at = bad_at(b, BUF_LEN, 'C');
	if (at < 0)
		say("write ok\n");
	else
		say("write MISMATCH at %ld\n", at);
}

static void memfd_setup(void)
{
	int fd = memfd_create("kheld", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, MEMFD_SZ) < 0) {
		say("memfd failed %d\n", errno);
		return;
	}
	mf_map = mmap(NULL, MEMFD_SZ, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	fill(mf_map, MEMFD_SZ, 'D');
	int rc = io_uring_register_files(&ring, &fd, 1);
	close(fd); /* the ring's table holds it now, and the mapping */
	if (rc < 0)
		say("memfd failed register %d\n", -rc);
	else
		say("memfd ready\n");
}

static void memfd_read(void)
{
	static uint8_t b[PG];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, 0, b, PG, 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	int rc = uring_wait();
	if (rc != (int)PG) {
		say("memfd read failed %d\n", rc);
		return;
	}
	long at = bad_at(b, PG, 'D');
	if (at < 0)
		say("memfd read ok\n");
	else
		say("memfd read MISMATCH at %ld\n", at);
}

static void memfd_write(void)
{
	static uint8_t b[16];
	memset(b, 0xee, sizeof(b));
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write(sqe, 0, b, sizeof(b), 100);
	sqe->flags |= IOSQE_FIXED_FILE;
	int rc = uring_wait();
	if (rc != (int)sizeof(b)) {
		say("memfd write failed %d\n", rc);
		return;
	}
	for (size_t i = 0; i < PG; i++) {
		uint8_t want = i >= 100 && i < 116 ? 0xee : pat('D', i);
		if (mf_map[i] != want) {
			say("memfd write MISMATCH at %zu\n", i);
			return;
		}
	}
	say("memfd write ok\n");
}

/* The word of the region the gen thread stores into: its first page,
 * which a --live copy reaches first. */
static volatile uint64_t *gen_word(void)
{
	return (volatile uint64_t *)region;
}

static void *gen_main(void *arg)
{
	(void)arg;
	uint64_t gen = 0;
	while (atomic_load(&gen_run)) {
		gen++;
		*gen_word() = gen;
		if (pwrite(file_fd, &gen, sizeof(gen), 0) != sizeof(gen))
			break;
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		io_uring_prep_read_fixed(sqe, file_fd, ubuf, sizeof(gen), 0, 0);
		if (uring_wait() != sizeof(gen))
			break;
		atomic_store(&gen_count, gen);
	}
	return NULL;
}

static int async_pipe[2];
static uint8_t async_buf[64];

static void async_start(void)
{
	if (pipe(async_pipe) < 0) {
		say("async failed %d\n", errno);
		return;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, async_pipe[0], async_buf, sizeof(async_buf), 0);
	sqe->flags |= IOSQE_ASYNC;
	int rc = io_uring_submit(&ring);
	if (rc != 1) {
		say("async failed %d\n", rc);
		return;
	}
	say("async waiting\n");
}

static void async_finish(void)
{
	uint8_t b[64];
	fill(b, sizeof(b), 'E');
	if (write(async_pipe[1], b, sizeof(b)) != sizeof(b)) {
		say("async failed %d\n", errno);
		return;
	}
	struct io_uring_cqe *cqe;
	int rc = io_uring_wait_cqe(&ring, &cqe);
	if (rc == 0) {
		rc = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	if (rc != (int)sizeof(b)) {
		say("async failed %d\n", rc);
		return;
	}
	long at = bad_at(async_buf, sizeof(b), 'E');
	if (at < 0)
		say("async ok\n");
	else
		say("async MISMATCH at %ld\n", at);
}

static char *in_fresh_pages(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = mmap(NULL, (n + PG - 1) / PG * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(p, s, n);
	return p;
}

static void command(char *line, const char *dir)
{
	if (strcmp(line, "robust-lock") == 0) {
		if (pipe(robust_pipe) < 0 ||
		    pthread_create(&robust_thr, NULL, robust_main, NULL) != 0)
			say("failed %d\n", errno);
	} else if (strcmp(line, "robust-exit") == 0) {
		if (write(robust_pipe[1], "x", 1) != 1)
			say("failed %d\n", errno);
		/* Joined without waiting for ever: the join test is about
		 * a join that does not return. */
		for (int i = 0; i < 3000; i++) {
			if (pthread_tryjoin_np(robust_thr, NULL) == 0)
				break;
			usleep(1000);
		}
		say("exited\n");
	} else if (strcmp(line, "robust-check") == 0) {
		check_lock(robust);
	} else if (strcmp(line, "pshared-lock") == 0) {
		int p[2];
		if (pipe(p) < 0) {
			say("failed %d\n", errno);
			return;
		}
		child = fork();
		if (child == 0) {
			pthread_mutex_lock(pshared);
			if (write(p[1], "l", 1) != 1)
				_exit(5);
			for (;;)
				pause();
			_exit(0);
		}
		char c;
		if (read(p[0], &c, 1) != 1) {
			say("failed child\n");
			return;
		}
		close(p[0]);
		close(p[1]);
		say("child locked\n");
	} else if (strcmp(line, "pshared-exit") == 0) {
		kill(child, SIGTERM);
		int st;
		waitpid(child, &st, 0);
		say("child exited\n");
	} else if (strcmp(line, "pshared-check") == 0) {
		check_lock(pshared);
	} else if (strcmp(line, "join-start") == 0) {
		join_start();
	} else if (strcmp(line, "join") == 0) {
		join();
	} else if (strcmp(line, "uring-setup") == 0) {
		uring_setup(dir);
	} else if (strcmp(line, "uring-read") == 0) {
		uring_read();
	} else if (strcmp(line, "uring-write") == 0) {
		uring_write();
	} else if (strcmp(line, "memfd-setup") == 0) {
		memfd_setup();
	} else if (strcmp(line, "memfd-read") == 0) {
		memfd_read();
	} else if (strcmp(line, "memfd-write") == 0) {
		memfd_write();
	} else if (strcmp(line, "gen-start") == 0) {
		atomic_store(&gen_run, true);
		if (pthread_create(&gen_thr, NULL, gen_main, NULL) != 0)
			say("failed\n");
		else
			say("gen %p %p\n", (void *)gen_word(), (void *)ubuf);
	} else if (strcmp(line, "gen-stop") == 0) {
		atomic_store(&gen_run, false);
		pthread_join(gen_thr, NULL);
		say("gen stopped %lu\n", atomic_load(&gen_count));
	} else if (strcmp(line, "exec-prepare") == 0) {
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0) {
			say("failed %d\n", errno);
			return;
		}
		self[n] = 0;
		exec_path = in_fresh_pages(self);
		exec_arg = in_fresh_pages("--exec-ok");
		say("prepared\n");
	} else if (strcmp(line, "exec-go") == 0) {
		char *argv[] = {exec_path, exec_arg, NULL};
		execv(exec_path, argv);
		say("exec failed %d\n", errno);
	} else if (strcmp(line, "async-start") == 0) {
		async_start();
	} else if (strcmp(line, "async-finish") == 0) {
		async_finish();
	} else if (strcmp(line, "mark") == 0) {
		size_t n = region_len / PG;
		for (size_t i = 0; i < n; i++)
			snprintf((char *)region + i * PG, 16, "KHELD-MARK%05zu", i % 100000);
		say("marked %zu\n", n);
	} else if (strcmp(line, "abort") == 0) {
		abort();
	} else {
		say("unknown command\n");
	}
}

int main(int argc, char **argv)
{
	size_t mib = 16;
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (argc == 2 && strcmp(argv[1], "--exec-ok") == 0) {
		say("exec ok\n");
		return 0;
	}
	static const struct option opts[] = {
	    {"mib", required_argument, 0, 'm'}, {"dir", required_argument, 0, 'd'}, {0}};
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (o == 'm')
			mib = strtoul(optarg, NULL, 10);
		else if (o == 'd')
			dir = optarg;
		else
			return 2;
	}
	region_len = (mib ? mib : 1) << 20;
	region = mmap(NULL, region_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill(region, region_len, 'R');
	robust = (pthread_mutex_t *)(region + region_len - PG);
	init_robust(robust, false);
	pshared = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	init_robust(pshared, true);
	say("ready %d\n", getpid());
	char line[256];
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (c != '\n') {
			if (n < sizeof(line) - 1)
				line[n++] = c;
			continue;
		}
		line[n] = 0;
		n = 0;
		command(line, dir);
	}
	if (child > 0)
		kill(child, SIGKILL);
	if (have_ring)
		io_uring_queue_exit(&ring);
	return 0;
}
