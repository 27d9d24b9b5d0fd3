/* The pages-file writer of a checkpoint: a ring of large page-aligned
 * buffers and a writer thread, so that reading the next batch of memory
 * (the job thread) overlaps writing the previous one. Buffers are written
 * whole with one pwrite each, with O_DIRECT where the file system takes
 * it (no copy into the page cache: the CPU is free for the reads and the
 * checksums); buffered writes otherwise.
 *
 * Failure points (named for fault injection, issue 7):
 *   pages.open    opening the pages file
 *   pages.write   a buffer's pwrite (ENOSPC, EIO)
 *   pages.sync    the final fdatasync
 * Functions return 0 or -errno. */
#ifndef MV_PAGESW_H
#define MV_PAGESW_H

#include "state/image.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pagesw;

struct pagesw_buf {
	void *data;
	size_t cap; /* bytes, a multiple of IMG_PAGE */
	size_t len; /* bytes filled, a multiple of IMG_PAGE */
	uint64_t off; /* where in the pages file */
};

/* Create dirfd/IMG_PAGES (mode 0600) and start the writer thread with
 * n_bufs buffers of buf_size bytes. */
int pagesw_open(int dirfd, size_t buf_size, size_t n_bufs, struct pagesw **out);

/* Job thread: a free buffer, waiting while every buffer is queued; NULL
 * once a write has failed (see pagesw_error). */
struct pagesw_buf *pagesw_get(struct pagesw *w);

/* Job thread: queue b to be written at b->off (b->len bytes). */
void pagesw_submit(struct pagesw *w, struct pagesw_buf *b);

/* The first write error, or 0. */
int pagesw_error(struct pagesw *w);

/* Wait until everything queued is written, write the header, fdatasync.
 * Returns the first error of any write. */
int pagesw_finish(struct pagesw *w, const struct img_header *h);

/* Stop the thread and free everything (after pagesw_finish, or to give
 * up). Closes the file. */
void pagesw_close(struct pagesw *w);

/* Was the file written with O_DIRECT? */
bool pagesw_direct(const struct pagesw *w);

#endif
