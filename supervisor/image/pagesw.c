#include "supervisor/image/pagesw.h"
#include "common/crc32c.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>

#define STAGE_BUF  (8u << 20) /* one pwrite */
#define N_WRITERS  2	      /* one checksums while the other waits on its write */
#define FLUSH_STEP (512ull << 20)

/* The staging buffers, kept between checkpoints (one runs at a time). */
struct pagesw_pool {
	pthread_mutex_t lock;
	void *mem;
	size_t len;
	struct pagesw_buf *bufs;
	size_t n;
	/* The warmer: a thread that faults the buffers in while the first
	 * job runs (warm_async). */
	pthread_t warmer;
	bool warming;
	atomic_bool stop_warming;
	_Atomic size_t warmed; /* buffers warm, from the first */
	/* A job holds the program stopped (pagesw_quiet): the warmer waits
	 * and leaves the CPUs to its copy, unless a thread waits for a
	 * buffer it has not warmed yet (waiting). */
	atomic_bool quiet;
	atomic_int waiting;
};

struct pagesw {
	struct pagesw_pool *pool;
	uint32_t *sums; /* the page checksums, by page of the file after the header */
	int fd;
	bool direct;
	pthread_t writers[N_WRITERS], flusher;
	size_t n_writers;
	bool flusher_started;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* any change: a buffer freed or queued, bytes written, the end */
	/* Under lock: */
	struct pagesw_buf **free_list, **queue;
	size_t n_free, q_head, q_len, n_bufs;
	size_t busy;		    /* buffers a writer holds */
	bool stop;		    /* give up: drop what is queued */
	bool eager;		    /* the reading is over: flush whatever is written */
	bool final_req, final_done; /* the flush after the header */
	bool flusher_done;	    /* the flusher has left (error, or stop) */
	int final_err;
	int error;
	uint64_t written, flushed;
	uint64_t ns_write, ns_sync;
};

/* Touch every page of the buffers once the way a checkpoint will: a
 * kernel write (process_vm_readv from ourselves) and a user read. The
 * source is one 64 KiB block read again and again (a fresh 1 MiB a
 * buffer cost 256 page faults more, 0.7 ms on the VMs measured). */
#define WARM_SRC (64u << 10)
static void warm(struct pagesw_pool *pool, void *mem, size_t len, const char *src)
{
	const size_t step = 1u << 20;
	struct iovec r[(1u << 20) / WARM_SRC];
	for (size_t i = 0; i < ARRAY_SIZE(r); i++)
		r[i] = (struct iovec){(void *)src, WARM_SRC};
	for (size_t off = 0; off < len; off += step) {
		while (pool && atomic_load(&pool->quiet) && !atomic_load(&pool->waiting) &&
		       !atomic_load(&pool->stop_warming)) {
			struct timespec ts = {0, 200 * 1000};
			nanosleep(&ts, NULL);
		}
		struct iovec l = {(char *)mem + off, MV_MIN(step, len - off)};
		if (process_vm_readv(getpid(), &l, 1, r, ARRAY_SIZE(r), 0) < 0)
			break;
	}
	volatile uint32_t sink = crc32c(mem, len);
	(void)sink;
}

static char *warm_src(void)
{
	char *src = xmalloc(WARM_SRC);
	memset(src, 0x5a, WARM_SRC);
	return src;
}

/* Warm the buffers one by one, in the order jobs take them (pagesw_get
 * takes the first first, and waits for a buffer not warm yet): the first
 * checkpoint of a supervisor starts at once instead of after 0.35 s (4.3 s
 * under load) of warming 64 MiB, waits before it stops the program only
 * for as many buffers as the program has resident memory, and a short
 * program can be saved before it ends. */
static void *warm_async(void *arg)
{
	struct pagesw_pool *pool = arg;
	uint64_t t0 = mv_now_ns();
	_cleanup_free_ char *src = warm_src();
	for (size_t i = 0; i < pool->n && !atomic_load(&pool->stop_warming); i++) {
		warm(pool, pool->bufs[i].data, pool->bufs[i].cap, src);
		atomic_store(&pool->warmed, i + 1);
	}
	log_debug("checkpoint: %zu MiB of staging buffers warmed in %.1f ms", pool->len >> 20,
		  (double)(mv_now_ns() - t0) / 1e6);
	return NULL;
}

struct pagesw_pool *pagesw_pool_new(void)
{
	struct pagesw_pool *pool = xcalloc(1, sizeof(*pool));
	pthread_mutex_init(&pool->lock, NULL);
	return pool;
}

static void pool_unmake(struct pagesw_pool *pool)
{
	if (pool->warming) {
		atomic_store(&pool->stop_warming, true);
		pthread_join(pool->warmer, NULL);
		pool->warming = false;
		atomic_store(&pool->stop_warming, false);
	}
	if (!pool->mem)
		return;
	munmap(pool->mem, pool->len);
	for (size_t i = 0; i < pool->n; i++)
		free(pool->bufs[i].sums);
	free(pool->bufs);
	pool->mem = NULL;
	pool->bufs = NULL;
	pool->n = 0;
}

void pagesw_pool_free(struct pagesw_pool *pool)
{
	if (!pool)
		return;
	pool_unmake(pool);
	pthread_mutex_destroy(&pool->lock);
	free(pool);
}

static int pool_make(struct pagesw_pool *pool, size_t buffer)
{
	size_t n = MV_MAX(buffer / STAGE_BUF, (size_t)N_WRITERS + 1);
	if (pool->mem && pool->n == n)
		return 0;
	pool_unmake(pool);
	size_t len = n * STAGE_BUF;
	void *mem = fault_hit("ckpt_alloc") ? (errno = ENOMEM, MAP_FAILED) : mv_map_huge(len);
	if (mem == MAP_FAILED)
		return -errno;
	/* Not copied into a child should the supervisor ever fork. */
	madvise(mem, len, MADV_DONTFORK);
	/* In huge pages (mv_map_huge; THP "madvise", as Debian ships):
	 * warming 64 MiB then takes 8 ms instead of 290 (one fault and one
	 * zeroing per 2 MiB), and reading the buffers back to checksum them
	 * takes 2.5 ms instead of 92 on the VMs measured (bench/README.md). */
	pool->mem = mem;
	pool->len = len;
	pool->n = n;
	pool->bufs = xcalloc(n, sizeof(*pool->bufs));
	for (size_t i = 0; i < n; i++) {
		pool->bufs[i].data = (char *)mem + i * STAGE_BUF;
		pool->bufs[i].cap = STAGE_BUF;
		pool->bufs[i].sums = xcalloc(STAGE_BUF / IMG_PAGE, sizeof(*pool->bufs[i].sums));
	}
	atomic_store(&pool->warmed, 0);
	if (pthread_create(&pool->warmer, NULL, warm_async, pool) == 0) {
		pool->warming = true;
	} else {
		uint64_t t0 = mv_now_ns();
		_cleanup_free_ char *src = warm_src();
		warm(NULL, mem, len, src);
		atomic_store(&pool->warmed, n);
		log_info("checkpoint: %zu MiB of staging buffers made in %.1f ms", len >> 20,
			 (double)(mv_now_ns() - t0) / 1e6);
	}
	return 0;
}

/* One whole buffer at its offset. O_DIRECT needs aligned memory, offset
 * and length, which every buffer has; a file system that takes O_DIRECT
 * at open but refuses it at write (EINVAL) gets buffered writes. */
static int write_buf(struct pagesw *w, const struct pagesw_buf *b)
{
	size_t done = 0;
	while (done < b->len) {
		ssize_t n = fault_hit("ckpt_pages_write")
				? (errno = EIO, -1)
				: pwrite(w->fd, (const char *)b->data + done, b->len - done,
					 (off_t)(b->off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && w->direct) {
			int fl = fcntl(w->fd, F_GETFL);
			if (fl >= 0 && fcntl(w->fd, F_SETFL, fl & ~O_DIRECT) == 0) {
				w->direct = false;
				continue;
			}
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

/* Every page's checksum, then each extent's from its pages' (one pass
 * over the data). */
static void checksum(struct pagesw *w, struct pagesw_buf *b)
{
	uint32_t *ps = w->sums + (b->off - IMG_HEADER_SIZE) / IMG_PAGE;
	for (size_t i = 0; i < b->len / IMG_PAGE; i++)
		ps[i] = crc32c((const char *)b->data + i * IMG_PAGE, IMG_PAGE);
	for (size_t i = 0; i < b->n_sums; i++) {
		const uint32_t *q = ps + b->sums[i].off / IMG_PAGE;
		uint32_t c = q[0];
		for (size_t k = 1; k < b->sums[i].len / IMG_PAGE; k++)
			c = crc32c_combine_page(c, q[k]);
		*b->sums[i].crc = c;
	}
}

static void *writer(void *arg)
{
	struct pagesw *w = arg;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->q_len && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->q_len)
			break;
		struct pagesw_buf *b = w->queue[w->q_head];
		w->q_head = (w->q_head + 1) % w->n_bufs;
		w->q_len--;
		w->busy++;
		int err = w->error;
		bool drop = w->stop;
		pthread_mutex_unlock(&w->lock);
		/* After a failure, or when the job gives up, the rest is
		 * dropped. */
		uint64_t t0 = mv_now_ns();
		if (!err && !drop) {
			checksum(w, b);
			err = write_buf(w, b);
		}
		uint64_t dt = mv_now_ns() - t0;
		pthread_mutex_lock(&w->lock);
		if (err && !w->error)
			w->error = err;
		if (!err)
			w->written += b->len;
		w->ns_write += dt;
		w->busy--;
		w->free_list[w->n_free++] = b;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Make written bytes durable while the rest is read: the device's cache
 * flush is the slowest part of a checkpoint on a virtual disk, and it
 * overlaps the reading this way. Once the reading is over (eager) and
 * the writers have caught up, what is left is flushed at once, while the
 * job thread builds the manifest; the final flush (after the header)
 * runs here too, while the job thread writes the manifest. */
static bool flush_due(const struct pagesw *w)
{
	/* Eagerly only once the writers have caught up: flushes queued
	 * behind every write of a backlog would serialise them. */
	return (w->final_req && !w->final_done) || w->written - w->flushed >= FLUSH_STEP ||
	       (w->eager && w->written > w->flushed && !w->q_len && !w->busy);
}

static void *flusher(void *arg)
{
	struct pagesw *w = arg;
	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->stop && !w->error && !flush_due(w))
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop || w->error)
			break;
		bool final = w->final_req && !w->final_done;
		uint64_t upto = w->written;
		pthread_mutex_unlock(&w->lock);
		uint64_t t0 = mv_now_ns();
		int err = fault_hit("ckpt_pages_sync") ? -EIO : fdatasync(w->fd) < 0 ? -errno : 0;
		pthread_mutex_lock(&w->lock);
		if (final) {
			w->ns_sync = mv_now_ns() - t0;
			w->final_done = true;
			w->final_err = err;
		} else if (err && !w->error) {
			w->error = err;
		}
		w->flushed = upto;
		pthread_cond_broadcast(&w->cond);
	}
	w->flusher_done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int open_file(int dirfd, struct pagesw *w)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
	FAULT_RETURN("ckpt_pages_open", EMFILE);
	w->fd = openat(dirfd, IMG_PAGES, flags | O_DIRECT, 0600);
	w->direct = w->fd >= 0;
	if (w->fd < 0 && errno == EINVAL)
		w->fd = openat(dirfd, IMG_PAGES, flags, 0600);
	if (w->fd < 0 || fchmod(w->fd, 0600) < 0)
		return -errno;
	return 0;
}

/* Wait until the first want buffers are warm, polling every poll_ns;
 * counted in pool->waiting meanwhile, so that a quiet warmer goes on.
 * false: give_up (if any) said so first. */
static bool wait_warmed(struct pagesw_pool *pool, size_t want, long poll_ns,
			bool (*give_up)(void *), void *arg)
{
	if (atomic_load(&pool->warmed) >= want)
		return true;
	bool ok = true;
	atomic_fetch_add(&pool->waiting, 1);
	while (atomic_load(&pool->warmed) < want) {
		if (give_up && give_up(arg)) {
			ok = false;
			break;
		}
		struct timespec ts = {0, poll_ns};
		nanosleep(&ts, NULL);
	}
	atomic_fetch_sub(&pool->waiting, 1);
	return ok;
}

bool pagesw_pool_wait_warm(struct pagesw_pool *pool, size_t bytes, bool (*give_up)(void *),
			   void *arg)
{
	size_t want = MV_MIN((bytes + STAGE_BUF - 1) / STAGE_BUF, pool->n);
	return wait_warmed(pool, want, 2 * 1000 * 1000, give_up, arg);
}

void pagesw_quiet(struct pagesw *w, bool quiet)
{
	atomic_store(&w->pool->quiet, quiet);
}

int pagesw_open(struct pagesw_pool *pool, int dirfd, size_t buffer, struct pagesw **out)
{
	struct pagesw *w = xcalloc(1, sizeof(*w));
	w->pool = pool;
	w->fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	int rc = open_file(dirfd, w);
	pthread_mutex_lock(&pool->lock);
	if (rc == 0)
		rc = pool_make(pool, buffer);
	pthread_mutex_unlock(&pool->lock);
	if (rc < 0)
		goto fail;
	w->n_bufs = pool->n;
	w->free_list = xcalloc(pool->n, sizeof(*w->free_list));
	w->queue = xcalloc(pool->n, sizeof(*w->queue));
	for (size_t i = 0; i < pool->n; i++)
		w->free_list[w->n_free++] = &pool->bufs[pool->n - 1 - i]; /* the first last */
	for (; w->n_writers < N_WRITERS; w->n_writers++)
		if ((rc = -pthread_create(&w->writers[w->n_writers], NULL, writer, w)) < 0)
			goto fail;
	if ((rc = -pthread_create(&w->flusher, NULL, flusher, w)) < 0)
		goto fail;
	w->flusher_started = true;
	*out = w;
	return 0;
fail:
	pagesw_close(w);
	return rc;
}

struct pagesw_buf *pagesw_get(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->n_free && !w->error)
		pthread_cond_wait(&w->cond, &w->lock);
	struct pagesw_buf *b = w->error ? NULL : w->free_list[--w->n_free];
	pthread_mutex_unlock(&w->lock);
	if (!b)
		return NULL;
	/* Not warm yet: the warmer writes it; wait for it to be done. */
	wait_warmed(w->pool, (size_t)(b - w->pool->bufs) + 1, 100 * 1000, NULL, NULL);
	b->len = b->n_sums = 0;
	return b;
}

struct pagesw_buf *pagesw_try_get(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	struct pagesw_buf *b = NULL;
	if (w->n_free && !w->error) {
		b = w->free_list[w->n_free - 1];
		if (atomic_load(&w->pool->warmed) > (size_t)(b - w->pool->bufs))
			w->n_free--;
		else
			b = NULL;
	}
	pthread_mutex_unlock(&w->lock);
	if (b)
		b->len = b->n_sums = 0;
	return b;
}

void pagesw_submit(struct pagesw *w, struct pagesw_buf *b)
{
	pthread_mutex_lock(&w->lock);
	if (b->len) {
		w->queue[(w->q_head + w->q_len) % w->n_bufs] = b;
		w->q_len++;
	} else {
		w->free_list[w->n_free++] = b;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

int pagesw_error(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	int e = w->error;
	pthread_mutex_unlock(&w->lock);
	return e;
}

int pagesw_drain(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	while (w->q_len || w->busy)
		pthread_cond_wait(&w->cond, &w->lock);
	int err = w->error;
	pthread_mutex_unlock(&w->lock);
	return err;
}

void pagesw_flush_now(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	w->eager = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void pagesw_set_sums(struct pagesw *w, uint32_t *sums)
{
	w->sums = sums;
}

/* The page checksums at h->sums_off, little-endian (as in memory: the
 * format is little-endian, image.c), through the first buffer (every
 * buffer is free now), O_DIRECT-aligned: a chunk of cap / 4 entries is
 * a whole number of pages. */
static int write_sums(struct pagesw *w, const struct img_header *h)
{
	uint64_t n = img_sums_count(h->sums_off), done = 0;
	struct pagesw_buf sb = w->pool->bufs[0];
	while (done < n) {
		size_t k = (size_t)MV_MIN(n - done, sb.cap / 4);
		size_t bytes = (k * 4 + IMG_PAGE - 1) / IMG_PAGE * IMG_PAGE;
		memset((char *)sb.data + k * 4, 0, bytes - k * 4);
		memcpy(sb.data, w->sums + done, k * 4);
		sb.len = bytes;
		sb.off = h->sums_off + done * 4;
		int err = write_buf(w, &sb);
		if (err)
			return err;
		done += k;
	}
	return 0;
}

int pagesw_seal(struct pagesw *w, const struct img_header *h)
{
	int err = pagesw_drain(w);
	if (err)
		return err;
	if ((err = write_sums(w, h)) < 0)
		return err;
	/* The header goes last: a pages file with a valid header has all
	 * its extents written. Every buffer is free now. */
	struct pagesw_buf hb = w->pool->bufs[0];
	img_header_encode(h, hb.data);
	hb.len = IMG_HEADER_SIZE;
	hb.off = 0;
	if ((err = write_buf(w, &hb)) < 0)
		return err;
	/* fdatasync also makes the file size durable (fsync(2)). */
	pthread_mutex_lock(&w->lock);
	w->final_req = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int pagesw_sealed(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	/* The flusher leaves at its first error, maybe before it saw the
	 * request. */
	while (!w->final_done && !w->flusher_done)
		pthread_cond_wait(&w->cond, &w->lock);
	int err = w->final_done ? w->final_err : w->error ? w->error : -EIO;
	pthread_mutex_unlock(&w->lock);
	return err;
}

void pagesw_close(struct pagesw *w)
{
	if (!w)
		return;
	pagesw_quiet(w, false);
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < w->n_writers; i++)
		pthread_join(w->writers[i], NULL);
	if (w->flusher_started)
		pthread_join(w->flusher, NULL);
	if (w->fd >= 0)
		close(w->fd);
	free(w->free_list);
	free(w->queue);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

bool pagesw_direct(const struct pagesw *w)
{
	return w->direct;
}

void pagesw_times(const struct pagesw *w, uint64_t *write_ns, uint64_t *sync_ns)
{
	*write_ns = w->ns_write;
	*sync_ns = w->ns_sync;
}
