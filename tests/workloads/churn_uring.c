/* churn_uring: io_uring with registered buffers and registered files, for
 * the churn tier (tests/churn): the kernel reads and writes this memory
 * through its pin while memvisor evicts and reloads it over and over
 * (docs/reload.md, "What the kernel touches").
 *
 *   churn_uring [--rounds N] [--every E] [--dir DIR] [--buffered] [--sqpoll]
 *
 * Two workers, the main thread and one more thread, each with a ring of
 * its own and its own files:
 *   - registered (fixed) buffers of several sizes: each in a mapping of
 *     its own (4 KiB to 1 MiB) and in the heap (the main arena or the
 *     thread's, and a large block malloc maps by itself), a set written
 *     from and a set read into;
 *   - a registered-file table holding a temp file in DIR (default
 *     $TMPDIR or /tmp, unlinked at once) and a memfd, whose descriptor is
 *     closed once registered: the ring's table and a MAP_SHARED mapping
 *     of it are all that hold it.
 * Each round, with patterns that depend on (worker, round, buffer,
 * offset):
 *   - the write set is filled by plain stores, WRITE_FIXED to the file
 *     (fixed file), READ_FIXED back into the read set, and both sets are
 *     checked byte for byte;
 *   - the memfd through the ring: a pattern stored through the mapping is
 *     READ (fixed file) into a heap buffer and READ_FIXED into a fixed
 *     one; a heap buffer is WRITTEN and a fixed buffer WRITE_FIXED into
 *     it, and checked through the mapping;
 *   - plain (non-fixed) WRITEV from heap buffers to the file and READV
 *     back into heap buffers cut at other places.
 * The file is opened O_DIRECT when the file system takes it (a probe at
 * start; --buffered: never), else buffered; the output does not depend
 * on it (stderr says which). The plain READV/WRITEV go through a
 * buffered descriptor of the same file either way: direct I/O into
 * memory that is not a registered buffer is pinned only while in flight,
 * which memvisor does not cover (docs/reload.md). --sqpoll: the thread's
 * ring is polled by a kernel thread (IORING_SETUP_SQPOLL), which then
 * does its submissions from the kernel.
 *
 * Every E rounds (default 50) the workers meet at a barrier and the main
 * thread prints "round R: MAIN THREAD", each a running checksum of all
 * the data read back; "ok" at the end. The output is the same on every
 * run with the same arguments. On the first difference it prints
 * "MISMATCH round R buffer B offset O" (stdout and stderr) and exits 1;
 * an I/O error or short transfer: "IOERROR round R OP: RES", exit 2. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tests/workloads/wl.h"

#define PG 4096u

/* The registered buffer sets: sizes, and whether each is a mapping of
 * its own or heap memory. */
static const struct {
	size_t len;
	int heap;
} bufs[] = {
    {4 << 10, 0}, {12 << 10, 0}, {64 << 10, 0}, {256 << 10, 0},
    {1 << 20, 0}, {8 << 10, 1},	 {40 << 10, 1}, {192 << 10, 1},
};
#define NB (sizeof(bufs) / sizeof(bufs[0]))
/* Fixed-buffer indexes: the write set 0..NB-1, the read set NB..2NB-1,
 * then the two memfd buffers. */
#define MF_WBUF	   (2 * NB)
#define MF_RBUF	   (2 * NB + 1)
#define MF_BUF_LEN (16u << 10)

/* The memfd: A, stored by the program and read by the ring; B, written
 * by the ring from the heap; C, written by the ring from a fixed buffer;
 * the rest keeps the pattern of the start. */
#define MF_LEN	 (256u << 10)
#define MF_A	 0u
#define MF_A_LEN (64u << 10)
#define MF_B	 (64u << 10)
#define MF_B_LEN (64u << 10)
#define MF_C	 (128u << 10)
#define MF_REST	 (144u << 10)

/* READV/WRITEV: the same bytes cut in three, two ways. */
static const size_t wv_len[3] = {3000, 20000, 150000};
static const size_t rv_len[3] = {7000, 100000, 66000};
#define VEC_LEN 173000u

/* File indexes in the ring's table. */
#define FILE_DATA  0
#define FILE_MEMFD 1

struct worker {
	int id;
	struct io_uring ring;
	uint8_t *w[NB], *r[NB];	    /* registered */
	uint8_t *mf_wbuf, *mf_rbuf; /* registered */
	uint8_t *mf;		    /* the memfd, mapped shared */
	uint8_t *heap_a, *heap_b;   /* not registered: memfd READ and WRITE */
	uint8_t *wv[3], *rv[3];	    /* not registered: WRITEV and READV */
	off_t off[NB], vec_off;
	int buffered_fd; /* the file again, buffered, for READV/WRITEV */
	uint64_t ck;
	uint64_t *cks; /* the checksum at each report */
};

static int rounds = 600, every = 50;
static const char *dir;
static int direct_io, buffered_only, sqpoll;
static struct worker workers[2];
static pthread_barrier_t meet;

/* A verdict on what the kernel or memvisor did (MISMATCH, IOERROR) goes
 * to stdout, where the churn driver compares it with a native run's, and
 * to stderr; any other failure to stderr only. */
static __attribute__((noreturn)) void end(int code, int out, const char *fmt, va_list ap)
{
	char b[256];
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	if (n > (int)sizeof(b) - 1)
		n = (int)sizeof(b) - 1;
	if ((out && write(1, b, (size_t)n) < 0) || write(2, b, (size_t)n) < 0)
		_exit(code);
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

/* Keep the compiler from proving that memory is not read again. */
static void *launder(void *p)
{
	__asm__ volatile("" : "+r"(p) : : "memory");
	return p;
}

static uint64_t key(int worker, int round, int what)
{
	return mix(((uint64_t)(worker + 1) << 48) ^ ((uint64_t)what << 32) ^ (uint64_t)round);
}

/* The pattern is a byte stream: byte pos of stream k is byte pos % 8 of
 * mix(k + pos / 8). fill and check take a piece of it at offset pos. */
static __attribute__((noinline)) void fill(void *p, size_t len, uint64_t k, size_t pos)
{
	uint8_t *c = launder(p);
	size_t i = 0;
	for (; i < len && (pos + i) % 8; i++)
		c[i] = (uint8_t)(mix(k + (pos + i) / 8) >> (8 * ((pos + i) % 8)));
	if (((uintptr_t)(c + i) & 7) == 0) {
		uint64_t *w = (uint64_t *)(c + i);
		size_t j0 = (pos + i) / 8, n = (len - i) / 8;
		for (size_t j = 0; j < n; j++)
			w[j] = mix(k + j0 + j);
		i += n * 8;
	}
	for (; i < len; i++)
		c[i] = (uint8_t)(mix(k + (pos + i) / 8) >> (8 * ((pos + i) % 8)));
}

/* The first wrong byte, or fold the bytes into *ck. */
static __attribute__((noinline)) void check(const char *what, int round, const void *p, size_t len,
					    uint64_t k, size_t pos, uint64_t *ck)
{
	const uint8_t *c = launder((void *)p);
	uint64_t h = *ck;
	size_t i = 0;
	if ((pos % 8) == 0 && ((uintptr_t)c & 7) == 0) {
		const uint64_t *w = (const uint64_t *)c;
		for (; i + 8 <= len; i += 8) {
			uint64_t want = mix(k + (pos + i) / 8);
			if (w[i / 8] != want)
				break;
			h = (h ^ want) * 0x100000001b3ull;
		}
	}
	for (; i < len; i++) {
		uint8_t want = (uint8_t)(mix(k + (pos + i) / 8) >> (8 * ((pos + i) % 8)));
		if (c[i] != want)
			verdict(1, "MISMATCH round %d buffer %s offset %zu\n", round, what, i);
		h = (h ^ want) * 0x100000001b3ull;
	}
	*ck = h;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail(2, "churn_uring: mmap %zu: %s\n", len, strerror(errno));
	return p;
}

static void *heap(size_t len, size_t align)
{
	void *p = NULL;
	if (align ? posix_memalign(&p, align, len) != 0 : (p = malloc(len)) == NULL)
		fail(2, "churn_uring: malloc %zu\n", len);
	return p;
}

/* Does the file system take O_DIRECT? One aligned write and read. */
static int probe_direct(const char *path)
{
	int fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0)
		return -1;
	void *b = heap(PG, PG);
	memset(b, 0x5a, PG);
	int ok = pwrite(fd, b, PG, 0) == PG && pread(fd, b, PG, 0) == PG;
	free(b);
	if (!ok) {
		close(fd);
		return -1;
	}
	return fd;
}

static void setup(struct worker *wk, int id)
{
	wk->id = id;
	char path[4096];
	snprintf(path, sizeof(path), "%s/churn_uring.XXXXXX", dir);
	int fd = mkstemp(path);
	if (fd < 0)
		fail(2, "churn_uring: mkstemp in %s: %s\n", dir, strerror(errno));
	int dfd = buffered_only ? -1 : probe_direct(path);
	if (id == 0)
		direct_io = dfd >= 0;
	/* Both workers do the same: the first one's probe decides. */
	if (dfd >= 0 && !direct_io) {
		close(dfd);
		dfd = -1;
	} else if (dfd < 0 && direct_io) {
		fail(2, "churn_uring: O_DIRECT worked for one file in %s, not another\n", dir);
	}
	unlink(path);
	wk->buffered_fd = fd;
	int data_fd = dfd >= 0 ? dfd : fd;

	struct iovec iov[2 * NB + 2];
	off_t off = 0;
	for (size_t b = 0; b < NB; b++) {
		size_t len = bufs[b].len;
		wk->w[b] = bufs[b].heap ? heap(len, PG) : map(len);
		wk->r[b] = bufs[b].heap ? heap(len, PG) : map(len);
		memset(wk->r[b], 0xa5, len);
		iov[b] = (struct iovec){wk->w[b], len};
		iov[NB + b] = (struct iovec){wk->r[b], len};
		wk->off[b] = off;
		off += (off_t)len;
	}
	wk->vec_off = off;
	wk->mf_wbuf = heap(MF_BUF_LEN, PG);
	wk->mf_rbuf = map(MF_BUF_LEN);
	iov[MF_WBUF] = (struct iovec){wk->mf_wbuf, MF_BUF_LEN};
	iov[MF_RBUF] = (struct iovec){wk->mf_rbuf, MF_BUF_LEN};
	wk->heap_a = heap(MF_A_LEN, 0);
	wk->heap_b = heap(MF_B_LEN, 0);
	for (int i = 0; i < 3; i++) {
		wk->wv[i] = heap(wv_len[i], 0);
		wk->rv[i] = heap(rv_len[i], 0);
	}

	int mfd = memfd_create("churn_uring", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, MF_LEN) < 0)
		fail(2, "churn_uring: memfd: %s\n", strerror(errno));
	wk->mf = mmap(NULL, MF_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (wk->mf == MAP_FAILED)
		fail(2, "churn_uring: mmap memfd: %s\n", strerror(errno));
	fill(wk->mf, MF_LEN, key(id, -1, 100), 0);

	struct io_uring_params par = {0};
	if (id == 1 && sqpoll) {
		par.flags = IORING_SETUP_SQPOLL;
		par.sq_thread_idle = 20; /* ms: it sleeps between rounds too */
	}
	int rc = io_uring_queue_init_params(32, &wk->ring, &par);
	if (rc < 0)
		fail(2, "churn_uring: io_uring_queue_init: %s\n", strerror(-rc));
	rc = io_uring_register_buffers(&wk->ring, iov, 2 * NB + 2);
	if (rc < 0)
		fail(2, "churn_uring: register buffers: %s\n", strerror(-rc));
	int files[2] = {data_fd, mfd};
	rc = io_uring_register_files(&wk->ring, files, 2);
	if (rc < 0)
		fail(2, "churn_uring: register files: %s\n", strerror(-rc));
	/* The table holds them now; the data file stays open buffered. */
	close(mfd);
	if (dfd >= 0)
		close(dfd);
	wk->cks = calloc((size_t)rounds / (size_t)every + 1, sizeof(uint64_t));
}

static struct io_uring_sqe *sqe_of(struct worker *wk)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&wk->ring);
	if (!sqe)
		fail(2, "churn_uring: no sqe\n");
	return sqe;
}

/* Submit what is queued, wait for n completions; each must have
 * transferred its whole length (user_data). */
static void complete(struct worker *wk, int round, const char *op, unsigned n)
{
	int rc = io_uring_submit(&wk->ring);
	if (rc < 0)
		verdict(2, "IOERROR round %d %s submit: %d\n", round, op, rc);
	for (unsigned i = 0; i < n; i++) {
		struct io_uring_cqe *cqe;
		do
			rc = io_uring_wait_cqe(&wk->ring, &cqe);
		while (rc == -EINTR);
		if (rc < 0)
			verdict(2, "IOERROR round %d %s wait: %d\n", round, op, rc);
		if (cqe->res < 0 || (uint64_t)cqe->res != cqe->user_data)
			verdict(2, "IOERROR round %d %s: %d of %llu bytes\n", round, op, cqe->res,
				(unsigned long long)cqe->user_data);
		io_uring_cqe_seen(&wk->ring, cqe);
	}
}

static void name(char *b, size_t n, struct worker *wk, const char *what, int idx)
{
	snprintf(b, n, "%s/%s%d", wk->id ? "thread" : "main", what, idx);
}

static void round_fixed(struct worker *wk, int round)
{
	char nm[64];
	for (size_t b = 0; b < NB; b++)
		fill(wk->w[b], bufs[b].len, key(wk->id, round, (int)b), 0);
	for (size_t b = 0; b < NB; b++) {
		struct io_uring_sqe *sqe = sqe_of(wk);
		io_uring_prep_write_fixed(sqe, FILE_DATA, wk->w[b], (unsigned)bufs[b].len,
					  (uint64_t)wk->off[b], (int)b);
		sqe->flags |= IOSQE_FIXED_FILE;
		sqe->user_data = bufs[b].len;
	}
	complete(wk, round, "write_fixed", NB);
	for (size_t b = 0; b < NB; b++) {
		struct io_uring_sqe *sqe = sqe_of(wk);
		io_uring_prep_read_fixed(sqe, FILE_DATA, wk->r[b], (unsigned)bufs[b].len,
					 (uint64_t)wk->off[b], (int)(NB + b));
		sqe->flags |= IOSQE_FIXED_FILE;
		sqe->user_data = bufs[b].len;
	}
	complete(wk, round, "read_fixed", NB);
	for (size_t b = 0; b < NB; b++) {
		name(nm, sizeof(nm), wk, "read-fixed-", (int)b);
		check(nm, round, wk->r[b], bufs[b].len, key(wk->id, round, (int)b), 0, &wk->ck);
		name(nm, sizeof(nm), wk, "write-fixed-", (int)b);
		uint64_t unused = 0;
		check(nm, round, wk->w[b], bufs[b].len, key(wk->id, round, (int)b), 0, &unused);
	}
}

static void round_memfd(struct worker *wk, int round)
{
	char nm[64];
	uint64_t ka = key(wk->id, round, 200), kb = key(wk->id, round, 201),
		 kc = key(wk->id, round, 202);
	/* A: stored through the mapping, read by the ring. */
	fill(wk->mf + MF_A, MF_A_LEN, ka, 0);
	memset(wk->heap_a, 0, MF_A_LEN);
	struct io_uring_sqe *sqe = sqe_of(wk);
	io_uring_prep_read(sqe, FILE_MEMFD, wk->heap_a, MF_A_LEN, MF_A);
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = MF_A_LEN;
	sqe = sqe_of(wk);
	io_uring_prep_read_fixed(sqe, FILE_MEMFD, wk->mf_rbuf, MF_BUF_LEN, MF_A + PG, MF_RBUF);
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = MF_BUF_LEN;
	/* B: written by the ring from the heap; C: from a fixed buffer. */
	fill(wk->heap_b, MF_B_LEN, kb, 0);
	fill(wk->mf_wbuf, MF_BUF_LEN, kc, 0);
	sqe = sqe_of(wk);
	io_uring_prep_write(sqe, FILE_MEMFD, wk->heap_b, MF_B_LEN, MF_B);
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = MF_B_LEN;
	sqe = sqe_of(wk);
	io_uring_prep_write_fixed(sqe, FILE_MEMFD, wk->mf_wbuf, MF_BUF_LEN, MF_C, MF_WBUF);
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = MF_BUF_LEN;
	complete(wk, round, "memfd", 4);

	name(nm, sizeof(nm), wk, "memfd-read-heap", 0);
	check(nm, round, wk->heap_a, MF_A_LEN, ka, 0, &wk->ck);
	name(nm, sizeof(nm), wk, "memfd-read-fixed", 0);
	check(nm, round, wk->mf_rbuf, MF_BUF_LEN, ka, PG, &wk->ck);
	name(nm, sizeof(nm), wk, "memfd-map-b", 0);
	check(nm, round, wk->mf + MF_B, MF_B_LEN, kb, 0, &wk->ck);
	name(nm, sizeof(nm), wk, "memfd-map-c", 0);
	check(nm, round, wk->mf + MF_C, MF_BUF_LEN, kc, 0, &wk->ck);
	if (round % every == 0) {
		uint64_t unused = 0;
		name(nm, sizeof(nm), wk, "memfd-map-rest", 0);
		check(nm, round, wk->mf + MF_REST, MF_LEN - MF_REST, key(wk->id, -1, 100), MF_REST,
		      &unused);
	}
}

static void round_vec(struct worker *wk, int round)
{
	char nm[64];
	uint64_t k = key(wk->id, round, 300);
	struct iovec wv[3], rv[3];
	size_t pos = 0;
	for (int i = 0; i < 3; i++) {
		fill(wk->wv[i], wv_len[i], k, pos);
		memset(wk->rv[i], 0, rv_len[i]);
		wv[i] = (struct iovec){wk->wv[i], wv_len[i]};
		rv[i] = (struct iovec){wk->rv[i], rv_len[i]};
		pos += wv_len[i];
	}
	struct io_uring_sqe *sqe = sqe_of(wk);
	io_uring_prep_writev(sqe, wk->buffered_fd, wv, 3, (uint64_t)wk->vec_off);
	sqe->user_data = VEC_LEN;
	complete(wk, round, "writev", 1);
	sqe = sqe_of(wk);
	io_uring_prep_readv(sqe, wk->buffered_fd, rv, 3, (uint64_t)wk->vec_off);
	sqe->user_data = VEC_LEN;
	complete(wk, round, "readv", 1);
	pos = 0;
	for (int i = 0; i < 3; i++) {
		name(nm, sizeof(nm), wk, "readv-", i);
		check(nm, round, wk->rv[i], rv_len[i], k, pos, &wk->ck);
		pos += rv_len[i];
	}
}

static void *work(void *arg)
{
	struct worker *wk = arg;
	for (int round = 1; round <= rounds; round++) {
		round_fixed(wk, round);
		round_memfd(wk, round);
		round_vec(wk, round);
		if (round % every == 0) {
			wk->cks[round / every] = wk->ck;
			pthread_barrier_wait(&meet);
			if (wk->id == 0)
				say("round %d: %016llx %016llx\n", round,
				    (unsigned long long)workers[0].cks[round / every],
				    (unsigned long long)workers[1].cks[round / every]);
		}
	}
	return NULL;
}

static void *thread_main(void *arg)
{
	(void)arg;
	/* Set up here: its heap buffers come from this thread's arena. */
	setup(&workers[1], 1);
	pthread_barrier_wait(&meet);
	return work(&workers[1]);
}

int main(int argc, char **argv)
{
	dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	static const struct option opts[] = {
	    {"rounds", required_argument, 0, 'r'}, {"every", required_argument, 0, 'e'},
	    {"dir", required_argument, 0, 'd'},	   {"buffered", no_argument, 0, 'b'},
	    {"sqpoll", no_argument, 0, 's'},	   {0}};
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (o == 'r')
			rounds = atoi(optarg);
		else if (o == 'e')
			every = atoi(optarg);
		else if (o == 'd')
			dir = optarg;
		else if (o == 'b')
			buffered_only = 1;
		else if (o == 's')
			sqpoll = 1;
		else
			return 2;
	}
	if (rounds < 1 || every < 1) {
		fprintf(stderr, "churn_uring: --rounds and --every must be at least 1\n");
		return 2;
	}
	setup(&workers[0], 0);
	fprintf(stderr, "churn_uring: %s I/O on the files in %s\n",
		direct_io ? "O_DIRECT" : "buffered", dir);
	pthread_barrier_init(&meet, NULL, 2);
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, NULL) != 0)
		fail(2, "churn_uring: pthread_create\n");
	pthread_barrier_wait(&meet);
	work(&workers[0]);
	pthread_join(t, NULL);
	for (int i = 0; i < 2; i++)
		io_uring_queue_exit(&workers[i].ring);
	say("ok\n");
	return 0;
}
