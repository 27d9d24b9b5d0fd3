/* Evicted shared-memory objects (supervisor/reload/shm.h). */
#include "supervisor/reload/shm.h"
#include "common/crc32c.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/uffd.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define PG 4096ull

/* Pages [addr/PG, addr/PG + pages) of the object are at off in the pages
 * file; their checksums at sums[sum0...]. */
struct shm_ext {
	uint64_t addr, off;
	uint32_t pages, sum0;
};

struct evobj {
	pthread_mutex_t mu;
	int refs; /* atomic */
	uint64_t dev, ino;
	char *path;
	char id[33];
	int fd;	      /* the object, read-write */
	int pagesfd;  /* the image's pages */
	int directfd; /* the same with O_DIRECT (the loader), or -1 */
	int uffd;     /* memvisor's own, registered on map */
	void *map;    /* memvisor's mapping of the whole object; never touched */
	uint64_t size;
	struct shm_ext *ext;
	size_t n_ext;
	uint32_t *sums;
	uint64_t *owed; /* a bit per object page: in the image, not installed yet (under mu) */
	uint64_t bytes, n_owed, n_loaded; /* n_*: pages (under mu) */
};

static bool owed_bit(const struct evobj *o, uint64_t pg)
{
	return pg < o->size / PG && (o->owed[pg / 64] >> (pg % 64) & 1);
}

static void obj_free(struct evobj *o)
{
	if (o->map && o->map != MAP_FAILED)
		munmap(o->map, o->size);
	if (o->uffd >= 0)
		close(o->uffd);
	if (o->fd >= 0)
		close(o->fd);
	if (o->pagesfd >= 0)
		close(o->pagesfd);
	if (o->directfd >= 0)
		close(o->directfd);
	pthread_mutex_destroy(&o->mu);
	free(o->path);
	free(o->ext);
	free(o->sums);
	free(o->owed);
	free(o);
}

void evshm_get(struct evobj *o)
{
	__atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
}

void evshm_put(struct evobj *o)
{
	if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0)
		obj_free(o);
}

bool evshm_is(const struct evobj *o, uint64_t dev, uint64_t ino)
{
	return o->dev == dev && o->ino == ino;
}

const char *evshm_id(const struct evobj *o)
{
	return o->id;
}

const char *evshm_path(const struct evobj *o)
{
	return o->path ? o->path : "shared memory";
}

uint64_t evshm_bytes(const struct evobj *o)
{
	return o->bytes;
}

void evshm_counts(struct evobj *o, uint64_t *owed, uint64_t *loaded)
{
	pthread_mutex_lock(&o->mu);
	*owed = o->n_owed * PG;
	*loaded = o->n_loaded * PG;
	pthread_mutex_unlock(&o->mu);
}

/* The image map: extents, checksums, and every extent page owed. */
static void build(struct evobj *o, const struct img *im, const struct img_object *io)
{
	size_t pages = 0;
	for (size_t x = 0; x < io->ext.n; x++)
		pages += io->ext.v[x].pages;
	o->ext = xcalloc(MV_MAX(io->ext.n, 1), sizeof(*o->ext));
	o->sums = xmalloc(MV_MAX(pages, 1) * sizeof(*o->sums));
	o->owed = xcalloc(MV_MAX((o->size / PG + 63) / 64, 1), sizeof(uint64_t));
	uint32_t sum = 0;
	for (size_t x = 0; x < io->ext.n; x++) {
		const struct img_extent *e = &io->ext.v[x];
		o->ext[o->n_ext++] = (struct shm_ext){e->addr, e->off, e->pages, sum};
		for (uint32_t p = 0; p < e->pages; p++) {
			o->sums[sum++] = img_page_sum(im, e->off + (uint64_t)p * PG);
			uint64_t pg = e->addr / PG + p;
			if (pg < o->size / PG)
				o->owed[pg / 64] |= 1ull << (pg % 64);
		}
		o->bytes += img_extent_len(e);
	}
	for (uint64_t w = 0; w < (o->size / PG + 63) / 64; w++)
		o->n_owed += (uint64_t)__builtin_popcountll(o->owed[w]);
}

int evshm_new(const struct img *im, size_t k, int fd, const char *dir, struct evobj **out,
	      struct mv_err *err)
{
	const struct img_object *io = &im->o[k];
	struct evobj *o = xcalloc(1, sizeof(*o));
	pthread_mutex_init(&o->mu, NULL);
	o->refs = 1;
	o->fd = fd;
	o->uffd = o->pagesfd = o->directfd = -1;
	o->dev = makedev(io->dev_major, io->dev_minor);
	o->ino = io->inode;
	o->path = io->path ? xstrdup(io->path) : NULL;
	snprintf(o->id, sizeof(o->id), "%s", im->id);
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = mv_err_set(err, -errno, NULL, "fstat: %s", strerror(errno));
	o->size = ((uint64_t)st.st_size + PG - 1) & ~(PG - 1);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, IMG_PAGES);
	if (rc == 0 && (o->pagesfd = mv_open_regular_at(AT_FDCWD, path, 0, path, NULL, err)) < 0)
		rc = o->pagesfd;
	/* The loader reads with O_DIRECT, as for private memory (loader.c):
	 * the image is not kept a second time in the page cache. */
	if (rc == 0)
		o->directfd = mv_reopen_direct(o->pagesfd);
	if (rc == 0 && o->size) {
		/* Never touched by memvisor (a touch of a hole would wait on
		 * our own uffd for good): only the target of UFFDIO_COPY. */
		o->map = mmap(NULL, o->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (o->map == MAP_FAILED)
			rc = mv_err_set(err, -errno, NULL, "mapping it: %s", strerror(errno));
		else
			madvise(o->map, o->size, MADV_DONTFORK);
	}
	if (rc == 0 && (rc = uffd_open_local(UFFD_FEATURE_MISSING_SHMEM, &o->uffd)) < 0)
		mv_err_set(err, rc, NULL, "a userfaultfd of memvisor's own: %s", strerror(-rc));
	if (rc == 0 && o->size && (rc = uffd_register(o->uffd, (uint64_t)o->map, o->size)) < 0)
		mv_err_set(err, rc, NULL, "registering memvisor's mapping of it: %s",
			   strerror(-rc));
	if (rc < 0) {
		obj_free(o);
		return rc;
	}
	build(o, im, io);
	*out = o;
	return 0;
}

int evshm_punch(struct evobj *o)
{
	if (fault_hit("shm_punch"))
		return -EIO;
	/* mm/shmem.c shmem_fallocate: unmap_mapping_range zaps the pages in
	 * every mapping, shmem_truncate_range frees them. No uffd event. */
	if (o->size &&
	    fallocate(o->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)o->size) < 0)
		return -errno;
	return 0;
}

/* The extent holding page pg, or NULL. */
static const struct shm_ext *ext_of(const struct evobj *o, uint64_t pg)
{
	size_t lo = 0, hi = o->n_ext;
	uint64_t at = pg * PG;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct shm_ext *e = &o->ext[mid];
		if (e->addr + (uint64_t)e->pages * PG <= at)
			lo = mid + 1;
		else if (e->addr > at)
			hi = mid;
		else
			return e;
	}
	return NULL;
}

int evshm_window(struct evobj *o, uint64_t pg, uint64_t lo, uint64_t hi, uint64_t *a, uint64_t *b)
{
	pthread_mutex_lock(&o->mu);
	const struct shm_ext *e = owed_bit(o, pg) ? ext_of(o, pg) : NULL;
	if (e) {
		uint64_t first = e->addr / PG, end = first + e->pages;
		*a = MV_MAX(MV_MAX(first, lo), pg / 16 * 16);
		*b = MV_MIN(MV_MIN(end, hi), pg / 16 * 16 + 16);
		while (*a < pg && !owed_bit(o, *a))
			(*a)++;
		while (*b > pg + 1 && !owed_bit(o, *b - 1))
			(*b)--;
	}
	pthread_mutex_unlock(&o->mu);
	return e != NULL;
}

static int read_from(struct evobj *o, int fd, uint64_t a, uint64_t b, void *buf, bool *ok);

int evshm_read(struct evobj *o, uint64_t a, uint64_t b, void *buf, bool *ok)
{
	return read_from(o, o->pagesfd, a, b, buf, ok);
}

/* The loader's read: O_DIRECT (buf is page-aligned) unless refused. */
static int read_bulk(struct evobj *o, uint64_t a, uint64_t b, void *buf, bool *ok)
{
	if (o->directfd >= 0) {
		int rc = read_from(o, o->directfd, a, b, buf, ok);
		if (rc != -EINVAL)
			return rc;
		close(o->directfd); /* a file system that refuses O_DIRECT reads */
		o->directfd = -1;
	}
	return read_from(o, o->pagesfd, a, b, buf, ok);
}

static int read_from(struct evobj *o, int fd, uint64_t a, uint64_t b, void *buf, bool *ok)
{
	const struct shm_ext *e = ext_of(o, a); /* fixed after evshm_new */
	size_t len = (size_t)(b - a) * PG, got = 0;
	int rc = 0;
	memset(ok, 0, (size_t)(b - a) * sizeof(*ok));
	if (!e || a * PG + len > e->addr + (uint64_t)e->pages * PG)
		return -EINVAL;
	off_t at = (off_t)(e->off + a * PG - e->addr);
	while (got < len) {
		ssize_t n = fault_hit("evict_read")
				? (errno = EIO, -1)
				: pread(fd, (char *)buf + got, len - got, at + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		got += (size_t)n;
	}
	uint32_t sum0 = e->sum0 + (uint32_t)(a - e->addr / PG);
	for (size_t p = 0; p < got / PG; p++) {
		ok[p] = crc32c((char *)buf + p * PG, PG) == o->sums[sum0 + p];
		if (!ok[p] && rc == 0)
			rc = -EBADMSG;
	}
	return rc;
}

static void mark_loaded(struct evobj *o, uint64_t a, uint64_t b)
{
	pthread_mutex_lock(&o->mu);
	for (uint64_t p = a; p < b; p++)
		if (owed_bit(o, p)) {
			o->owed[p / 64] &= ~(1ull << (p % 64));
			o->n_owed--;
			o->n_loaded++;
		}
	pthread_mutex_unlock(&o->mu);
}

int evshm_install(struct evobj *o, int uffd, uint64_t dst, uint64_t a, uint64_t b, const void *buf,
		  const bool *ok)
{
	uint64_t p = a;
	while (p < b) {
		pthread_mutex_lock(&o->mu);
		while (p < b && !(ok[p - a] && owed_bit(o, p)))
			p++;
		uint64_t q = p;
		while (q < b && ok[q - a] && owed_bit(o, q))
			q++;
		pthread_mutex_unlock(&o->mu);
		if (p == q)
			break;
		uint64_t got = 0;
		int rc = uffd_copy(uffd, dst + (p - a) * PG, (const char *)buf + (p - a) * PG,
				   (q - p) * PG, &got);
		if (rc < 0) {
			/* got: the pages before the failing one are in. */
			mark_loaded(o, p, p + got / PG);
			return rc;
		}
		/* Installed, or there already (EEXIST): in the page cache. */
		mark_loaded(o, p, q);
		p = q;
	}
	return 0;
}

/* The owed span of extent e: [*a, *b) in object pages; false if none. */
static bool owed_span(struct evobj *o, const struct shm_ext *e, uint64_t *a, uint64_t *b)
{
	*a = e->addr / PG;
	*b = *a + e->pages;
	pthread_mutex_lock(&o->mu);
	while (*a < *b && !owed_bit(o, *a))
		(*a)++;
	while (*b > *a && !owed_bit(o, *b - 1))
		(*b)--;
	pthread_mutex_unlock(&o->mu);
	return *a < *b;
}

/* The loader's pipeline: a thread reads the next extent's owed pages
 * while the caller installs the last one (two slots), so that the disk
 * and the copies overlap, as for private memory. */
struct oslot {
	uint64_t a, b;
	int rc;
	bool full;
	bool ok[IMG_EXTENT_MAX / PG];
	void *buf;
};

struct opipe {
	struct evobj *o;
	const struct evict_load_ops *ops;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct oslot sl[2];
	size_t next; /* the next extent to look at (the reader's) */
	bool end, stop;
};

static void *oreader_main(void *arg)
{
	struct opipe *p = arg;
	for (unsigned k = 0;; k ^= 1) {
		struct oslot *sl = &p->sl[k];
		pthread_mutex_lock(&p->mu);
		while (sl->full && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		bool stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			break;
		bool found = false;
		while (p->next < p->o->n_ext && !found)
			found = owed_span(p->o, &p->o->ext[p->next++], &sl->a, &sl->b);
		if (found) {
			p->ops->pace(p->arg);
			sl->rc = read_bulk(p->o, sl->a, sl->b, sl->buf, sl->ok);
			p->ops->read(p->arg, (sl->b - sl->a) * PG);
		}
		pthread_mutex_lock(&p->mu);
		sl->full = found;
		p->end = !found;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		if (!found)
			break;
	}
	return NULL;
}

/* Install slot sl through memvisor's own mapping: it never changes, so
 * EAGAIN (an event of another uffd on the same mm? none) is retried a
 * while only. */
static int install_slot(struct evobj *o, struct oslot *sl)
{
	int rc = 0;
	for (int t = 0; t <= 1000; t++) {
		rc = evshm_install(o, o->uffd, (uint64_t)o->map + sl->a * PG, sl->a, sl->b, sl->buf,
				   sl->ok);
		if (rc != -EAGAIN && rc != -EINTR)
			break;
		usleep(100);
	}
	return rc;
}

int evshm_load_all(struct evobj *o, const struct evict_load_ops *ops, void *arg)
{
	struct opipe p = {.o = o, .ops = ops, .arg = arg};
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	for (int k = 0; k < 2; k++)
		p.sl[k].buf = xmalloc_pages(IMG_EXTENT_MAX);
	pthread_t t;
	int rc = -pthread_create(&t, NULL, oreader_main, &p), bad = 0;
	bool started = rc == 0;
	for (unsigned k = 0; rc == 0; k ^= 1) {
		struct oslot *sl = &p.sl[k];
		pthread_mutex_lock(&p.mu);
		while (!sl->full && !p.end)
			pthread_cond_wait(&p.cv, &p.mu);
		bool full = sl->full;
		pthread_mutex_unlock(&p.mu);
		if (!full)
			break; /* the reader found nothing more */
		if (sl->rc < 0 && !bad)
			bad = sl->rc;
		rc = install_slot(o, sl);
		ops->progress(arg);
		pthread_mutex_lock(&p.mu);
		sl->full = false;
		pthread_cond_broadcast(&p.cv);
		pthread_mutex_unlock(&p.mu);
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	if (started)
		pthread_join(t, NULL);
	for (int k = 0; k < 2; k++)
		free(p.sl[k].buf);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	if (rc == 0 && bad)
		log_error("evict: the image of %s cannot give back some of its pages: %s",
			  evshm_path(o),
			  bad == -EBADMSG ? "a page fails its checksum" : strerror(-bad));
	return rc < 0 ? rc : bad;
}

void evshm_finish(struct evobj *o)
{
	pthread_mutex_lock(&o->mu);
	bool done = o->n_owed == 0;
	pthread_mutex_unlock(&o->mu);
	if (!done)
		return;
	if (o->map && o->map != MAP_FAILED)
		munmap(o->map, o->size);
	o->map = NULL;
	if (o->uffd >= 0)
		close(o->uffd);
	o->uffd = -1;
}
