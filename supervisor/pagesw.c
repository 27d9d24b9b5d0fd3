#include "supervisor/pagesw.h"
#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct pagesw {
	int fd;
	bool direct;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* any change: a buffer freed or queued, the end */
	struct pagesw_buf *bufs;
	size_t n_bufs;
	void *mem; /* the buffers' memory, one mapping */
	size_t mem_len;
	/* Under lock: */
	struct pagesw_buf **free_list, **queue;
	size_t n_free, q_head, q_len;
	bool writing; /* the thread holds a buffer */
	bool stop;
	int error;
};

/* One whole buffer at its offset. O_DIRECT writes need aligned memory,
 * offset and length, which every buffer has; a file system that takes
 * O_DIRECT at open but refuses it at write (EINVAL) gets buffered writes
 * from then on. */
static int write_buf(struct pagesw *w, const struct pagesw_buf *b)
{
	size_t done = 0;
	while (done < b->len) {
		ssize_t n = pwrite(w->fd, (const char *)b->data + done, b->len - done,
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
		w->writing = true;
		int err = w->error;
		bool drop = w->stop;
		pthread_mutex_unlock(&w->lock);
		/* After a failure, or when the job gives up, the rest is
		 * dropped. */
		if (!err && !drop)
			err = write_buf(w, b);
		pthread_mutex_lock(&w->lock);
		if (err && !w->error)
			w->error = err;
		w->writing = false;
		w->free_list[w->n_free++] = b;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int pagesw_open(int dirfd, size_t buf_size, size_t n_bufs, struct pagesw **out)
{
	struct pagesw *w = xcalloc(1, sizeof(*w));
	w->fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
	w->fd = openat(dirfd, IMG_PAGES, flags | O_DIRECT, 0600);
	w->direct = w->fd >= 0;
	if (w->fd < 0 && errno == EINVAL)
		w->fd = openat(dirfd, IMG_PAGES, flags, 0600);
	if (w->fd < 0 || fchmod(w->fd, 0600) < 0)
		goto fail;
	buf_size = (buf_size + IMG_PAGE - 1) / IMG_PAGE * IMG_PAGE;
	w->n_bufs = n_bufs;
	w->mem_len = buf_size * n_bufs;
	/* Populated now: faulting the buffers in during the copy would be
	 * paid while the program is stopped. */
	w->mem = mmap(NULL, w->mem_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (w->mem == MAP_FAILED) {
		w->mem = NULL;
		goto fail;
	}
	w->bufs = xcalloc(n_bufs, sizeof(*w->bufs));
	w->free_list = xcalloc(n_bufs, sizeof(*w->free_list));
	w->queue = xcalloc(n_bufs, sizeof(*w->queue));
	for (size_t i = 0; i < n_bufs; i++) {
		w->bufs[i].data = (char *)w->mem + i * buf_size;
		w->bufs[i].cap = buf_size;
		w->free_list[w->n_free++] = &w->bufs[i];
	}
	int rc = pthread_create(&w->thread, NULL, writer, w);
	if (rc) {
		errno = rc;
		goto fail;
	}
	w->started = true;
	*out = w;
	return 0;
fail:;
	int e = errno;
	pagesw_close(w);
	return -e;
}

struct pagesw_buf *pagesw_get(struct pagesw *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->n_free && !w->error)
		pthread_cond_wait(&w->cond, &w->lock);
	struct pagesw_buf *b = w->error ? NULL : w->free_list[--w->n_free];
	pthread_mutex_unlock(&w->lock);
	if (b)
		b->len = 0;
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

int pagesw_finish(struct pagesw *w, const struct img_header *h)
{
	pthread_mutex_lock(&w->lock);
	while (w->q_len || w->writing)
		pthread_cond_wait(&w->cond, &w->lock);
	int err = w->error;
	pthread_mutex_unlock(&w->lock);
	if (err)
		return err;
	/* The header goes last: a pages file with a valid header has all
	 * its extents written. The first buffer is free now. */
	struct pagesw_buf hb = w->bufs[0];
	img_header_encode(h, hb.data);
	hb.len = IMG_HEADER_SIZE;
	hb.off = 0;
	if ((err = write_buf(w, &hb)) < 0)
		return err;
	/* fdatasync also makes the file size durable (fsync(2)). */
	if (fdatasync(w->fd) < 0)
		return -errno;
	return 0;
}

void pagesw_close(struct pagesw *w)
{
	if (!w)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	if (w->mem)
		munmap(w->mem, w->mem_len);
	if (w->fd >= 0)
		close(w->fd);
	free(w->bufs);
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
