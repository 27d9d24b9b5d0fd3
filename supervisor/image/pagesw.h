/* The pages-file writer of a checkpoint. The job thread fills large
 * page-aligned staging buffers with memory (process_vm_readv) and queues
 * them; two writer threads checksum the extents of a buffer and write it
 * with one pwrite, with O_DIRECT where the file system takes it (no copy
 * into the page cache); a flusher thread makes what is written durable
 * (fdatasync) while the rest is still being read, so that the final sync
 * has little left to do. Reading, checksumming, writing and flushing all
 * overlap; only the reading happens while the program is stopped.
 *
 * The staging buffers are kept from one checkpoint to the next, and
 * touched once (by a process_vm_readv and a read) when first made: on the
 * VMs memvisor is measured on, the first kernel write to a page and the
 * first user read of it cost about 5 us each (bench/README.md), which
 * would otherwise be paid while the program is stopped.
 *
 * Failure points (MEMVISOR_FAULT, common/fault.h):
 *   ckpt_pages_open    creating the pages file (EMFILE)
 *   ckpt_pages_write   a buffer's pwrite (EIO)
 *   ckpt_pages_sync    an fdatasync (EIO)
 * Functions return 0 or -errno. */
#ifndef MV_PAGESW_H
#define MV_PAGESW_H

#include "state/image.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pagesw;

/* An extent to checksum in a buffer: the writer stores the CRC32C of
 * buf[off, off + len) into *crc before writing. */
struct pagesw_sum {
	uint32_t *crc;
	uint32_t off, len;
};

struct pagesw_buf {
	void *data;
	size_t cap;   /* bytes, a multiple of IMG_PAGE */
	size_t len;   /* bytes filled, a multiple of IMG_PAGE */
	uint64_t off; /* where in the pages file */
	struct pagesw_sum *sums;
	size_t n_sums; /* at most cap / IMG_PAGE */
};

/* Have the writer checksum b's bytes [off, off + len) into *crc. */
static inline void pagesw_add_sum(struct pagesw_buf *b, uint32_t *crc, size_t off, size_t len)
{
	b->sums[b->n_sums++] = (struct pagesw_sum){crc, (uint32_t)off, (uint32_t)len};
}

/* The staging buffers, kept between checkpoints of one supervisor
 * (mv->staging; one checkpoint runs at a time). */
struct pagesw_pool;
struct pagesw_pool *pagesw_pool_new(void);
void pagesw_pool_free(struct pagesw_pool *pool);

/* Create dirfd/IMG_PAGES (mode 0600) and start the threads, with staging
 * buffers of about `buffer` bytes in all from pool (made now if the kept
 * ones are not that size, and warmed by a thread of the pool's meanwhile:
 * pagesw_pool_wait_warm). */
int pagesw_open(struct pagesw_pool *pool, int dirfd, size_t buffer, struct pagesw **out);

/* Wait until the first `bytes` of the buffers are warm (a copy into them
 * costs no first touch while the program is stopped), asking give_up(arg)
 * every 2 ms: false if it said to give up. */
bool pagesw_pool_wait_warm(struct pagesw_pool *pool, size_t bytes, bool (*give_up)(void *),
			   void *arg);

/* Job thread, before the first buffer is submitted: where the writers
 * put every page's checksum (img.sums: entry i is the page at file
 * offset IMG_HEADER_SIZE + i * IMG_PAGE); extents' checksums are
 * combined from them. */
void pagesw_set_sums(struct pagesw *w, uint32_t *sums);
/* Job thread: a free buffer, waiting while every buffer is queued; NULL
 * once a write has failed (see pagesw_error). */
struct pagesw_buf *pagesw_get(struct pagesw *w);

/* Any thread: a free buffer that is warm, or NULL at once (none is
 * free, or a write has failed). Only one thread besides the job thread
 * may hold buffers. */
struct pagesw_buf *pagesw_try_get(struct pagesw *w);

/* Queue b to be checksummed and written at b->off (a buffer with
 * nothing in it goes back to the free ones). */
void pagesw_submit(struct pagesw *w, struct pagesw_buf *b);

/* Wait until every queued buffer is checksummed and written. Returns the
 * first error. After it, the checksums are in place. */
int pagesw_drain(struct pagesw *w);

/* The first write error, or 0. */
int pagesw_error(struct pagesw *w);

/* The reading is over: flush whatever is written from now on, without
 * waiting for a whole step. */
void pagesw_flush_now(struct pagesw *w);

/* Drain, write the page checksums at h->sums_off and the header, and start the final fdatasync (on
 * the flusher thread, so that the caller can write the manifest meanwhile). Returns the first
 * error. */
int pagesw_seal(struct pagesw *w, const struct img_header *h);

/* Wait for that fdatasync; its result. */
int pagesw_sealed(struct pagesw *w);

/* quiet: the program is stopped for this job. The buffers' warmer (a
 * fresh supervisor's first job) waits meanwhile, leaving the CPUs to
 * the copy, unless a thread waits for a buffer not warm yet. Ended by
 * pagesw_close at the latest. */
void pagesw_quiet(struct pagesw *w, bool quiet);

/* Stop the threads and close the file (after pagesw_sealed, or to give
 * up: queued buffers are dropped). The buffers are kept for next time. */
void pagesw_close(struct pagesw *w);

/* Was the file written with O_DIRECT? */
bool pagesw_direct(const struct pagesw *w);

/* Time spent writing, and in the final fdatasync, in ns. */
void pagesw_times(const struct pagesw *w, uint64_t *write_ns, uint64_t *sync_ns);

#endif
