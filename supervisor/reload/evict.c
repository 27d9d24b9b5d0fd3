/* Evicted spaces and their fault workers (supervisor/reload/evict.h). */
#include "supervisor/reload/evict.h"
#include "common/compat.h"
#include "common/crc32c.h"
#include "common/fault.h"
#include "common/hist.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/reload/shm.h"
#include "supervisor/reload/thp.h"
#include "supervisor/kernel/procmap.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/mv.h"
#include "supervisor/supervise/reaper.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/kernel/uffd.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PG	  4096ull
#define EXT_WORDS (IMG_EXTENT_MAX / IMG_PAGE / 64)
#define MSG_BATCH 16
#define PROBE_MS  500
/* A fault reads, checks and installs the aligned window of this many
 * pages around it before it wakes the thread, then the rest of the
 * extent (read-ahead). One page's read and checksum cost microseconds
 * from the page cache; a whole 2 MiB extent's cost a millisecond. */
#define FAULT_WINDOW 16u

/* An extent of the image: where its bytes are, where its pages'
 * checksums are in s->sums, and which of its pages are installed in
 * this space already. */
struct ev_ext {
	uint64_t off;
	uint32_t pages, sum0;
	uint64_t loaded[EXT_WORDS];
};

/* Pages [first, first+n) of extent ext, now at address addr. */
struct ev_chunk {
	uint64_t addr;
	uint32_t ext, first, n;
};

/* Locks. s->lay orders the layout against page installs: a worker holds
 * it for writing from the read(2) of the uffd's messages until the events
 * among them are applied to the chunk map, and everything that installs
 * pages (UFFDIO_COPY, ZEROPAGE, POISON) holds it for reading from looking
 * up the chunk to the end of the ioctl. So events are applied in the
 * order the kernel delivered them, a copy never uses a chunk an event
 * read before it has changed, and an event read after a copy started
 * (the madvise or munmap it releases runs after our read) finds the copy
 * done. s->mu guards the chunk map's contents and counters for short
 * steps; never held across storage I/O. */
struct evspace {
	pthread_mutex_t mu;
	pthread_rwlock_t lay;
	struct evict *reg; /* the registry it is (or was) in */
	int refs;	   /* under reg->mu */
	uint64_t keep_id;  /* the reaper holds a duplicate of uffd under this id (0: not held) */
	uint64_t features; /* granted by UFFDIO_API */
	pid_t tgid;	   /* the process whose mm this is, when known (a fork child: its
			    * first fault tells) */
	struct as_range *wipe; /* MADV_WIPEONFORK regions inherited at fork (a fork child) */
	size_t n_wipe;
	uint64_t poisoned; /* pages made unservable */
	char id[33];
	char *dir;
	pid_t pid, parent;
	int uffd, pagesfd, stopfd;
	int directfd;	      /* the pages file again, O_DIRECT (the loader), or -1; fixed */
	bool direct_refused;  /* atomic: a read through directfd failed with EINVAL */
	int pidfd;	      /* the evicted process (-1 for a fork child): THP collapse */
	struct evict_thp thp; /* under mu */
	uint64_t probe;	      /* an address of the mm never registered (the vdso) */
	bool evicting; /* under lay: our own MADV_DONTNEED runs, its REMOVE events are ours */
	bool shared;   /* mappings of evicted shared memory are registered (shm.h) */
	bool dead, stopping, linked;
	struct ev_ext *ext;
	size_t n_ext;
	uint32_t *sums; /* the extents' page checksums (ev_ext.sum0), fixed */
	size_t n_sums;
	struct ev_chunk *ch;
	size_t n_ch, cap_ch;
	uint64_t owed, loaded; /* bytes */
	size_t cursor;	       /* the loader's place in ch[] */
	unsigned enoent;       /* the loader's copies in a row that found no range */
	uint64_t faults, fault_bytes, zero_faults;
	uint64_t cpu_ns; /* the workers' CPU time serving faults (atomic) */
	struct hist lat;
	struct evspace *next;
};

/* ---- the registry ------------------------------------------------------ */

/* The evicted spaces of one supervisor. reg->mu comes before any space's
 * locks and is never held across I/O. */
struct evict {
	struct mv *mv;
	pthread_mutex_t mu;
	struct evspace *head;
	uint64_t next_keep_id; /* atomic: ids of the uffds the reaper holds */
	struct evobj **objs;   /* evicted shared-memory objects (under mu) */
	size_t n_objs;
	/* Under mu: bytes evicted over the run, and the counters of the
	 * spaces that left the list (evict_totals). */
	uint64_t evicted;
	struct evict_totals gone;
};

struct evict *evict_new(struct mv *mv)
{
	struct evict *reg = xcalloc(1, sizeof(*reg));
	reg->mv = mv;
	pthread_mutex_init(&reg->mu, NULL);
	return reg;
}

static void space_free(struct evspace *s)
{
	if (s->keep_id)
		reaper_release_fd(s->reg->mv->reaper_wr, s->keep_id);
	if (s->uffd >= 0)
		close(s->uffd); /* userfaultfd_release: every range unregistered */
	if (s->pagesfd >= 0)
		close(s->pagesfd);
	if (s->directfd >= 0)
		close(s->directfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	evict_thp_free(&s->thp);
	pthread_mutex_destroy(&s->mu);
	pthread_rwlock_destroy(&s->lay);
	free(s->wipe);
	free(s->dir);
	free(s->ext);
	free(s->sums);
	free(s->ch);
	free(s);
}

/* Under reg->mu: what a space leaving the list served stays counted (a
 * fault its last worker serves after this is not). */
static void count_gone_locked(struct evspace *s)
{
	struct evict_totals *g = &s->reg->gone;
	pthread_mutex_lock(&s->mu);
	g->loaded += s->loaded;
	g->faults += s->faults;
	hist_merge(&g->lat, &s->lat);
	pthread_mutex_unlock(&s->mu);
}

static void unlink_locked(struct evspace *s)
{
	for (struct evspace **p = &s->reg->head; *p; p = &(*p)->next)
		if (*p == s) {
			count_gone_locked(s);
			*p = s->next;
			s->linked = false;
			s->refs--;
			return;
		}
}

void evict_put(struct evspace *s)
{
	struct evict *reg = s->reg;
	pthread_mutex_lock(&reg->mu);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&reg->mu);
	if (last)
		space_free(s);
}

static void get_locked(struct evspace *s)
{
	s->refs++;
}

static void link_space(struct evspace *s)
{
	pthread_mutex_lock(&s->reg->mu);
	s->next = s->reg->head;
	s->reg->head = s;
	s->linked = true;
	s->refs++;
	pthread_mutex_unlock(&s->reg->mu);
}

/* Stop the workers (they drop their references as they go). */
static void stop_space(struct evspace *s)
{
	pthread_mutex_lock(&s->reg->mu);
	s->stopping = true;
	if (s->linked)
		unlink_locked(s);
	pthread_mutex_unlock(&s->reg->mu);
	uint64_t one = 1;
	if (write(s->stopfd, &one, sizeof(one)) < 0)
		log_warn("evict: waking the workers of process %d: %s", s->pid, strerror(errno));
}

void evict_add_object(struct evict *reg, struct evobj *o)
{
	evshm_get(o);
	pthread_mutex_lock(&reg->mu);
	reg->objs = xrealloc(reg->objs, (reg->n_objs + 1) * sizeof(*reg->objs));
	reg->objs[reg->n_objs++] = o;
	pthread_mutex_unlock(&reg->mu);
}

size_t evict_objects_of(struct evict *reg, const char *id, struct evobj ***out)
{
	pthread_mutex_lock(&reg->mu);
	struct evobj **v = xcalloc(MV_MAX(reg->n_objs, 1), sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < reg->n_objs; i++)
		if (strcmp(evshm_id(reg->objs[i]), id) == 0) {
			evshm_get(reg->objs[i]);
			v[n++] = reg->objs[i];
		}
	pthread_mutex_unlock(&reg->mu);
	*out = v;
	return n;
}

void evict_drop_object(struct evict *reg, struct evobj *o)
{
	bool found = false;
	pthread_mutex_lock(&reg->mu);
	for (size_t i = 0; i < reg->n_objs && !found; i++)
		if (reg->objs[i] == o) {
			reg->objs[i] = reg->objs[--reg->n_objs];
			found = true;
		}
	pthread_mutex_unlock(&reg->mu);
	if (found)
		evshm_put(o);
}

void evict_drop_idle(struct evict *reg, const char *id)
{
	struct evspace **v;
	struct evobj **objs;
	size_t no = evict_objects_of(reg, id, &objs);
	for (size_t i = 0; i < no; i++)
		evshm_put(objs[i]);
	free(objs);
	size_t n = evict_spaces_of(reg, id, &v);
	for (size_t i = 0; i < n; i++) {
		uint64_t owed, loaded;
		evict_space_counts(v[i], &owed, &loaded);
		if (!no && owed == 0 && loaded == 0)
			stop_space(v[i]);
		evict_put(v[i]);
	}
	free(v);
}

/* The evicted object a shared mapping v maps (a reference), or NULL. */
static struct evobj *object_of(struct evict *reg, const struct proc_vma *v)
{
	struct evobj *o = NULL;
	if (!v->shared)
		return NULL;
	pthread_mutex_lock(&reg->mu);
	for (size_t i = 0; i < reg->n_objs && !o; i++)
		if (evshm_is(reg->objs[i], proc_vma_dev(v), v->inode))
			o = reg->objs[i];
	if (o)
		evshm_get(o);
	pthread_mutex_unlock(&reg->mu);
	return o;
}

bool evict_some_image(struct evict *reg, char *id, size_t idlen, char *dir, size_t dirlen)
{
	pthread_mutex_lock(&reg->mu);
	struct evspace *s = reg->head;
	if (s) {
		snprintf(id, idlen, "%s", s->id);
		snprintf(dir, dirlen, "%s", s->dir);
	}
	pthread_mutex_unlock(&reg->mu);
	return s != NULL;
}

size_t evict_spaces_of(struct evict *reg, const char *id, struct evspace ***out)
{
	size_t n = 0, cap = 4;
	struct evspace **v = xcalloc(cap, sizeof(*v));
	pthread_mutex_lock(&reg->mu);
	for (struct evspace *s = reg->head; s; s = s->next) {
		if (strcmp(s->id, id) != 0 || s->dead)
			continue;
		if (n == cap)
			v = xrealloc(v, (cap *= 2) * sizeof(*v));
		get_locked(s);
		v[n++] = s;
	}
	pthread_mutex_unlock(&reg->mu);
	*out = v;
	return n;
}

pid_t evict_space_pid(const struct evspace *s)
{
	return s->pid ? s->pid : s->parent;
}

/* ---- chunks (under s->mu) ---------------------------------------------- */

static uint64_t chunk_end(const struct ev_chunk *c)
{
	return c->addr + (uint64_t)c->n * PG;
}

/* The first chunk ending after addr. */
static size_t lower_bound(const struct evspace *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n_ch;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (chunk_end(&s->ch[mid]) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct ev_chunk *find_chunk(struct evspace *s, uint64_t addr)
{
	size_t i = lower_bound(s, addr);
	if (i < s->n_ch && s->ch[i].addr <= addr)
		return &s->ch[i];
	return NULL;
}

static void insert_chunk(struct evspace *s, size_t at, struct ev_chunk c)
{
	if (s->n_ch == s->cap_ch)
		s->ch =
		    xrealloc(s->ch, (s->cap_ch = s->cap_ch ? s->cap_ch * 2 : 64) * sizeof(*s->ch));
	memmove(&s->ch[at + 1], &s->ch[at], (s->n_ch - at) * sizeof(*s->ch));
	s->ch[at] = c;
	s->n_ch++;
}

/* No chunk straddles addr afterwards. */
static void split_at(struct evspace *s, uint64_t addr)
{
	size_t i = lower_bound(s, addr);
	if (i >= s->n_ch || s->ch[i].addr >= addr)
		return;
	struct ev_chunk *c = &s->ch[i];
	uint32_t k = (uint32_t)((addr - c->addr) / PG);
	struct ev_chunk tail = {addr, c->ext, c->first + k, c->n - k};
	c->n = k;
	insert_chunk(s, i + 1, tail);
}

static bool bit(const uint64_t *v, uint32_t p)
{
	return v[p / 64] >> (p % 64) & 1;
}

static bool page_loaded(const struct ev_ext *e, uint32_t p)
{
	return bit(e->loaded, p);
}

static uint64_t owed_in(const struct evspace *s, const struct ev_chunk *c)
{
	uint64_t n = 0;
	for (uint32_t p = c->first; p < c->first + c->n; p++)
		n += !page_loaded(&s->ext[c->ext], p);
	return n * PG;
}

/* munmap, madvise(DONTNEED/FREE): the image no longer owes these pages. */
static void drop_range(struct evspace *s, uint64_t start, uint64_t end)
{
	split_at(s, start);
	split_at(s, end);
	size_t a = lower_bound(s, start), b = a;
	while (b < s->n_ch && s->ch[b].addr < end) {
		uint64_t o = owed_in(s, &s->ch[b]);
		s->owed -= MV_MIN(o, s->owed);
		b++;
	}
	memmove(&s->ch[a], &s->ch[b], (s->n_ch - b) * sizeof(*s->ch));
	s->n_ch -= b - a;
}

static int cmp_chunk(const void *x, const void *y)
{
	const struct ev_chunk *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* mremap moved [from, from+len) to to (mm/mremap.c move_vma). */
static void move_range(struct evspace *s, uint64_t from, uint64_t to, uint64_t len)
{
	split_at(s, from);
	split_at(s, from + len);
	for (size_t i = lower_bound(s, from); i < s->n_ch && s->ch[i].addr < from + len; i++)
		s->ch[i].addr = s->ch[i].addr - from + to;
	mv_qsort(s->ch, s->n_ch, sizeof(*s->ch), cmp_chunk);
}

static void mark_loaded(struct evspace *s, uint32_t ext, uint32_t a, uint32_t b)
{
	struct ev_ext *e = &s->ext[ext];
	for (uint32_t p = a; p < b; p++) {
		if (page_loaded(e, p))
			continue;
		e->loaded[p / 64] |= 1ull << (p % 64);
		s->loaded += PG;
		s->owed -= MV_MIN(PG, s->owed);
	}
}

/* ---- serving pages --------------------------------------------------- */

/* Is [off, off+len) of fd in the page cache, every page? Asked with
 * cachestat(2) (Linux 6.5), which neither reads nor starts readahead
 * (preadv2 with RWF_NOWAIT starts readahead for what it lacks, so the
 * O_DIRECT read after it found the pages cached and copied them twice).
 * Without it: yes (the buffered read, as before). */
static bool cached(int fd, off_t off, size_t len)
{
#ifdef SYS_cachestat
	struct mv_cachestat_range r = {(uint64_t)off, len};
	struct mv_cachestat cs;
	if (syscall(SYS_cachestat, fd, &r, &cs, 0) == 0)
		return cs.nr_cache >= len / PG;
#endif
	return true;
}

/* Read pages [a, b) of extent e into buf, each at its place in the
 * extent (buf holds a whole extent), and check each against its own
 * checksum: ok gets the bit of every good page of [a, b), and only those
 * may be installed. 0 when all are good; else the error of the first bad
 * one: -EBADMSG for a checksum mismatch, -EIO for a short read (the
 * image was truncated under us), -errno. */
static int read_pages(struct evspace *s, const struct ev_ext *e, uint32_t a, uint32_t b, void *buf,
		      uint64_t ok[EXT_WORDS], bool bulk)
{
	size_t len = (size_t)(b - a) * PG, got = 0;
	char *dst = (char *)buf + (size_t)a * PG;
	off_t at = (off_t)(e->off + (uint64_t)a * PG);
	int rc = 0;
	for (uint32_t p = a; p < b; p++)
		ok[p / 64] &= ~(1ull << (p % 64));
	/* The loader reads a range the page cache does not hold whole with
	 * O_DIRECT (whole pages: buf is page-aligned). */
	bool direct = bulk && s->directfd >= 0 &&
		      !__atomic_load_n(&s->direct_refused, __ATOMIC_RELAXED) &&
		      !cached(s->pagesfd, at, len);
	while (got < len) {
		int fd = direct ? s->directfd : s->pagesfd;
		ssize_t n = fault_hit("evict_read")
				? (errno = EIO, -1)
				: pread(fd, dst + got, len - got, at + (off_t)got);
		if (n < 0 && errno == EINVAL && direct) {
			/* A file system that refuses O_DIRECT reads here. The
			 * fd stays open: the other reader may be using it. */
			__atomic_store_n(&s->direct_refused, true, __ATOMIC_RELAXED);
			direct = false;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		got += (size_t)n;
	}
	for (uint32_t p = a; p < a + got / PG; p++) {
		if (crc32c(dst + (size_t)(p - a) * PG, PG) == s->sums[e->sum0 + p])
			ok[p / 64] |= 1ull << (p % 64);
		else if (rc == 0)
			rc = -EBADMSG;
	}
	return rc;
}

/* The chunk at addr now, copied out with its extent (under s->mu). */
static bool chunk_at(struct evspace *s, uint64_t addr, struct ev_chunk *c, struct ev_ext *e)
{
	pthread_mutex_lock(&s->mu);
	struct ev_chunk *cp = find_chunk(s, addr);
	if (cp) {
		*c = *cp;
		if (e)
			*e = s->ext[cp->ext];
	}
	pthread_mutex_unlock(&s->mu);
	return cp != NULL;
}

/* Copy pages [p, q) of chunk c, one at a time: a copy that spans two vmas
 * fails whole with ENOENT (mm/userfaultfd.c validate_dst_vma), which
 * happens once the program mprotect()s part of an evicted region. Pages
 * outside any registered vma are left owed (*enoent counts them). */
static int copy_pages(struct evspace *s, const struct ev_chunk *c, uint32_t p, uint32_t q,
		      const void *buf, unsigned *enoent)
{
	for (uint32_t k = p; k < q; k++) {
		uint64_t got;
		int rc = uffd_copy(s->uffd, c->addr + (uint64_t)(k - c->first) * PG,
				   (const char *)buf + (uint64_t)k * PG, PG, &got);
		if (rc == -ENOENT) {
			(*enoent)++;
			continue;
		}
		if (rc < 0)
			return rc;
		pthread_mutex_lock(&s->mu);
		mark_loaded(s, c->ext, k, k + 1);
		pthread_mutex_unlock(&s->mu);
	}
	return 0;
}

/* Install the pages of [a, b) (extent page indexes within chunk c) that
 * are checked good in buf (ok, read_pages) and not known to be there.
 * Under s->lay (read), with c looked up under it. *enoent counts the
 * pages no registered vma holds (they stay owed). */
static int copy_runs(struct evspace *s, const struct ev_chunk *c, uint32_t a, uint32_t b,
		     const void *buf, const uint64_t *ok, unsigned *enoent)
{
	const struct ev_ext *e = &s->ext[c->ext];
	uint32_t p = MV_MAX(a, c->first);
	b = MV_MIN(b, c->first + c->n);
	while (p < b) {
		pthread_mutex_lock(&s->mu);
		while (p < b && (page_loaded(e, p) || !bit(ok, p)))
			p++;
		uint32_t q = p;
		while (q < b && !page_loaded(e, q) && bit(ok, q))
			q++;
		pthread_mutex_unlock(&s->mu);
		if (p == q)
			break;
		uint64_t dst = c->addr + (uint64_t)(p - c->first) * PG, got;
		int rc = uffd_copy(s->uffd, dst, (const char *)buf + (uint64_t)p * PG,
				   (uint64_t)(q - p) * PG, &got);
		if (rc == -ENOENT) {
			/* got: the pages before the failing one are in. */
			uint32_t done = (uint32_t)(got / PG);
			pthread_mutex_lock(&s->mu);
			mark_loaded(s, c->ext, p, p + done);
			pthread_mutex_unlock(&s->mu);
			rc = copy_pages(s, c, p + done, q, buf, enoent);
		} else if (rc == 0) {
			pthread_mutex_lock(&s->mu);
			mark_loaded(s, c->ext, p, q);
			pthread_mutex_unlock(&s->mu);
		}
		if (rc < 0)
			return rc;
		p = q;
	}
	return 0;
}

/* The image cannot give this page back (a read error, a truncated image,
 * a checksum mismatch): the program must not see anything in its place.
 * Poison the page, as a memory error would (an access raises SIGBUS, a
 * kernel access fails with EFAULT), or, on kernels without UFFDIO_POISON
 * (Linux < 6.6), kill the process. Under s->lay (read). */
static int unservable(struct evspace *s, uint64_t addr, pid_t who, const struct ev_ext *e, int err)
{
	pid_t pid = s->tgid ? s->tgid : who;
	int rc = -EOPNOTSUPP;
	if (s->features & UFFD_FEATURE_POISON)
		rc = uffd_poison(s->uffd, addr);
	bool first = __atomic_fetch_add(&s->poisoned, 1, __ATOMIC_RELAXED) == 0;
	bool poisoned = rc == 0 || rc == -EEXIST;
	if (poisoned) {
		if (first)
			log_error("evict: the image %s cannot give back the extent at pages offset "
				  "%#llx (%s): process %d gets SIGBUS where it touches those pages",
				  s->dir, (unsigned long long)e->off, strerror(-err), pid);
		rc = 0;
	} else if (rc != -EAGAIN) {
		log_error("evict: the image %s cannot give back the extent at pages offset %#llx "
			  "(%s): killing process %d, whose memory it holds",
			  s->dir, (unsigned long long)e->off, strerror(-err), pid);
		if (who > 0)
			kill(who, SIGKILL);
		rc = 0;
	}
	if (first) {
		char a[32];
		snprintf(a, sizeof(a), "%#llx", (unsigned long long)addr);
		events_emit(s->reg->mv, "evict_unservable",
			    json_pack("{s:i, s:s, s:s, s:I, s:s, s:s}", "pid", pid, "image", s->dir,
				      "address", a, "extent_offset", (json_int_t)e->off, "error",
				      strerror(-err), "outcome", poisoned ? "sigbus" : "killed"));
	}
	return rc;
}

/* Narrow [*a, *b) (pages of extent ext) to its first and last page not
 * installed yet; false if there is none. */
static bool owed_span(struct evspace *s, uint32_t ext, uint32_t *a, uint32_t *b)
{
	const struct ev_ext *e = &s->ext[ext];
	pthread_mutex_lock(&s->mu);
	while (*a < *b && page_loaded(e, *a))
		(*a)++;
	while (*b > *a && page_loaded(e, *b - 1))
		(*b)--;
	pthread_mutex_unlock(&s->mu);
	return *a < *b;
}

/* Pages [a, b) of chunk c's extent that are still owed: read them and
 * install the good ones (read_pages). Under nothing; takes s->lay (read)
 * to install, and does nothing if the chunk at addr changed meanwhile.
 * *bad gets the error of a bad page (0 if none). */
static int fetch_range(struct evspace *s, uint64_t addr, const struct ev_chunk *c, uint32_t a,
		       uint32_t b, void *buf, uint64_t *ok, int *bad, unsigned *enoent)
{
	struct ev_chunk now;
	*bad = 0;
	if (!owed_span(s, c->ext, &a, &b))
		return 0;
	*bad = read_pages(s, &s->ext[c->ext], a, b, buf, ok, false);
	pthread_rwlock_rdlock(&s->lay);
	int rc = -ESTALE;
	if (chunk_at(s, addr, &now, NULL) && now.ext == c->ext)
		rc = copy_runs(s, &now, a, b, buf, ok, enoent);
	pthread_rwlock_unlock(&s->lay);
	return rc;
}

/* The read-ahead after a fault was served: the rest of its extent's chunk
 * at addr, in the two pieces around the window [lo, hi). Best effort. */
static void read_ahead(struct evspace *s, uint64_t addr, const struct ev_chunk *c, uint32_t lo,
		       uint32_t hi, void *buf)
{
	uint64_t ok[EXT_WORDS] = {0};
	unsigned enoent = 0;
	int bad;
	if (c->first < lo && fetch_range(s, addr, c, c->first, lo, buf, ok, &bad, &enoent) < 0)
		return;
	if (hi < c->first + c->n)
		fetch_range(s, addr, c, hi, c->first + c->n, buf, ok, &bad, &enoent);
}

/* The region of process pid holding addr, without its name. */
static int vma_one(void *arg, const struct proc_vma *v)
{
	struct proc_vma *out = arg;
	*out = *v;
	out->name = NULL;
	out->name_len = 0;
	return 1;
}

/* 1: v is the region at addr now; 0: no region holds addr; -errno: the
 * process cannot be asked (its pid is not known yet: a fork child whose
 * faulting thread left before we read its status). */
static int vma_lookup(struct evspace *s, uint64_t addr, struct proc_vma *v)
{
	memset(v, 0, sizeof(*v));
	if (s->tgid <= 0)
		return -ESRCH;
	int rc = procmap_vmas(s->tgid, s->reg->mv->feat.procmap_query, addr, addr + 1, vma_one, v);
	if (rc < 0)
		return rc;
	return v->start <= addr && addr < v->end;
}

static bool vma_at(struct evspace *s, uint64_t addr, struct proc_vma *v)
{
	return vma_lookup(s, addr, v) == 1;
}

/* A fault at addr that no chunk covers, in region v (as the kernel had
 * it under s->lay) of evicted shared-memory object o: the page is missing
 * from the object's page cache. The object page comes from the mapping
 * as the kernel has it now (the region at addr, its file and offset:
 * PROCMAP_QUERY), not from a map of our own: mremap, fork and munmap
 * need nothing then. The window around it is read with no lock held,
 * then the region is looked up again under s->lay (read) and installed
 * with UFFDIO_COPY: into the page cache, shared by every mapper, and
 * this mapping. A page that is not owed (a hole of the image, loaded
 * since the kernel raised the fault, or dropped by the program with
 * MADV_REMOVE after it was loaded) gets UFFDIO_ZEROPAGE, which fails
 * with EEXIST, and wakes the thread, when the page is in the page cache.
 * Returns 1 when the region changed meanwhile (look again). */
static int serve_shared(struct evspace *s, uint64_t addr, pid_t who, void *buf, uint64_t *woken,
			struct evobj *o, const struct proc_vma *v)
{
	struct proc_vma now;
	uint64_t pg = (v->offset + addr - v->start) / PG, a = pg, b = pg + 1;
	uint64_t lo = v->offset / PG, hi = lo + (v->end - v->start) / PG;
	bool owed = evshm_window(o, pg, lo, hi, &a, &b);
	bool ok[FAULT_WINDOW] = {0};
	int bad = 0;
	if (owed) {
		bad = evshm_read(o, a, b, buf, ok);
		for (int t = 0; t < 2 && !ok[pg - a] && bad != -EBADMSG; t++)
			bad = evshm_read(o, a, b, buf, ok);
	}
	pthread_rwlock_rdlock(&s->lay);
	if (!vma_at(s, addr, &now) || now.start != v->start || now.end != v->end ||
	    now.offset != v->offset || now.inode != v->inode || !now.shared) {
		pthread_rwlock_unlock(&s->lay);
		return 1;
	}
	int rc;
	if (!owed) {
		rc = uffd_zeropage(s->uffd, addr);
	} else if (!ok[pg - a]) {
		struct ev_ext e = {.off = pg * PG};
		rc = unservable(s, addr, who, &e, bad);
	} else {
		rc = evshm_install(o, s->uffd, v->start + a * PG - v->offset, a, b, buf, ok);
		if (rc == 0)
			uffd_wake(s->uffd, addr, PG); /* the page may have come from another */
	}
	pthread_rwlock_unlock(&s->lay);
	if (rc == -EAGAIN)
		return rc; /* still waiting, and served again (serve_queue) */
	*woken = mv_now_ns();
	if (rc == 0 && owed) {
		pthread_mutex_lock(&s->mu);
		s->fault_bytes += (b - a) * PG;
		pthread_mutex_unlock(&s->mu);
	}
	return rc;
}

/* The read-ahead a served fault owes: the rest of its chunk (read_ahead). */
struct ahead {
	uint64_t addr;
	struct ev_chunk c;
	uint32_t lo, hi;
};

/* A fault at addr: look the page up and install the window around it
 * (FAULT_WINDOW pages), each page checked against its own checksum, then
 * wake the thread; the read-ahead it owes goes to *ra (addr 0: none), for
 * after the faults waiting (serve_queue). The pages are read without any lock;
 * then the chunk is looked up again under s->lay, since events may have
 * moved or dropped it meanwhile. A bad page is never installed: the
 * faulting one is made unservable (SIGBUS), the others stay owed. */
static int serve_fault(struct evspace *s, uint64_t addr, pid_t who, void *buf, uint64_t *woken,
		       struct ahead *ra)
{
	ra->addr = 0;
	for (;;) {
		struct ev_chunk c;
		struct ev_ext e;
		pthread_rwlock_rdlock(&s->lay);
		if (!chunk_at(s, addr, &c, &e)) {
			struct proc_vma v;
			int vr = s->shared ? vma_lookup(s, addr, &v) : 0;
			if (vr < 0) {
				/* It may be a page of evicted shared memory:
				 * zeros would go into the object, for every
				 * process. Let the thread fault again (with
				 * its pid learnt, or gone). */
				pthread_rwlock_unlock(&s->lay);
				uffd_wake(s->uffd, addr, PG);
				*woken = mv_now_ns();
				return 0;
			}
			struct evobj *o = vr ? object_of(s->reg, &v) : NULL;
			if (o) {
				pthread_rwlock_unlock(&s->lay);
				int src = serve_shared(s, addr, who, buf, woken, o, &v);
				evshm_put(o);
				if (src == 1)
					continue; /* the layout changed meanwhile: look again */
				return src;
			}
			/* Never written, or dropped by the program (munmap,
			 * madvise): zeros, as without evict. */
			__atomic_fetch_add(&s->zero_faults, 1, __ATOMIC_RELAXED);
			int zrc = uffd_zeropage(s->uffd, addr);
			pthread_rwlock_unlock(&s->lay);
			*woken = mv_now_ns();
			return zrc;
		}
		pthread_rwlock_unlock(&s->lay);
		uint32_t idx = c.first + (uint32_t)((addr - c.addr) / PG);
		uint32_t lo = MV_MAX(c.first, idx / FAULT_WINDOW * FAULT_WINDOW);
		uint32_t hi =
		    MV_MIN(c.first + c.n, idx / FAULT_WINDOW * FAULT_WINDOW + FAULT_WINDOW);
		uint64_t ok[EXT_WORDS] = {0};
		int bad = read_pages(s, &e, lo, hi, buf, ok, false);
		/* A read error may pass; a checksum mismatch does not. */
		for (int t = 0; t < 2 && !bit(ok, idx) && bad != -EBADMSG; t++)
			bad = read_pages(s, &e, lo, hi, buf, ok, false);
		pthread_rwlock_rdlock(&s->lay);
		struct ev_chunk now;
		if (!chunk_at(s, addr, &now, NULL) || now.ext != c.ext) {
			pthread_rwlock_unlock(&s->lay);
			continue; /* the layout changed under us: look again */
		}
		if (!bit(ok, idx)) {
			int rc = unservable(s, addr, who, &e, bad);
			pthread_rwlock_unlock(&s->lay);
			*woken = mv_now_ns();
			return rc;
		}
		unsigned enoent = 0;
		int rc = copy_runs(s, &now, lo, hi, buf, ok, &enoent);
		pthread_rwlock_unlock(&s->lay);
		if (rc == -EAGAIN)
			return rc; /* still waiting, and served again (serve_queue) */
		uffd_wake(s->uffd, addr, PG);
		*woken = mv_now_ns();
		if (rc < 0)
			return rc;
		*ra = (struct ahead){addr, now, lo, hi};
		return 0;
	}
}

/* ---- events ------------------------------------------------------------ */

static struct evspace *space_new(struct evict *reg);
static int start_workers(struct evspace *s);

/* Remove [start, end) ranges of v from the chunk map (fork exclusions). */
static void drop_ranges(struct evspace *s, const struct as_range *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		drop_range(s, v[i].start, v[i].end);
}

/* Hold a duplicate of the space's uffd in the reaper (reaper_hold_fd). */
static int keep_uffd(struct evspace *s)
{
	uint64_t id = __atomic_add_fetch(&s->reg->next_keep_id, 1, __ATOMIC_RELAXED);
	int rc = reaper_hold_fd(s->reg->mv->reaper_wr, s->uffd, id);
	if (rc == 0)
		s->keep_id = id;
	return rc;
}

/* fork: the child's mm has the parent's registered ranges, with a uffd of
 * its own, and misses the pages the parent missed when it forked. It owes
 * every page the parent's image map still covers (pages the parent had
 * loaded are present in the child too: copying them fails with EEXIST),
 * except where fork gives the child something else (kernel/fork.c
 * dup_mmap): MADV_DONTFORK regions are not in the child at all, and
 * MADV_WIPEONFORK regions are empty there (zeros). Those are read from the
 * parent's smaps while the parent waits in fork for this event to be
 * read; a parent whose pid is not known yet (a fork child that has not
 * faulted) uses the WIPEONFORK regions it inherited. Called under s->lay
 * (write), in the order of the events. */
static void on_fork(struct evspace *s, int ufd)
{
	struct evspace *c = space_new(s->reg);
	c->uffd = ufd;
	c->features = s->features;
	c->pagesfd = fcntl(s->pagesfd, F_DUPFD_CLOEXEC, 0);
	c->directfd = s->directfd >= 0 ? fcntl(s->directfd, F_DUPFD_CLOEXEC, 0) : -1;
	c->parent = s->pid ? s->pid : s->parent;
	c->probe = s->probe;
	c->shared = s->shared; /* fork copies the registered shared mappings */
	snprintf(c->id, sizeof(c->id), "%s", s->id);
	c->dir = xstrdup(s->dir);
	struct as_range *dc = NULL, *wf = NULL;
	size_t n_dc = 0, n_wf = 0;
	if (!s->tgid || procfs_fork_flags(s->tgid, &dc, &n_dc, &wf, &n_wf) < 0) {
		n_wf = s->n_wipe;
		wf = n_wf ? xmalloc(n_wf * sizeof(*wf)) : NULL;
		if (n_wf)
			memcpy(wf, s->wipe, n_wf * sizeof(*wf));
	}
	pthread_mutex_lock(&s->mu);
	c->n_ext = s->n_ext;
	c->ext = xcalloc(MV_MAX(c->n_ext, 1), sizeof(*c->ext));
	for (size_t i = 0; i < c->n_ext; i++)
		c->ext[i] = (struct ev_ext){s->ext[i].off, s->ext[i].pages, s->ext[i].sum0, {0}};
	c->n_sums = s->n_sums;
	c->sums = xmalloc(MV_MAX(c->n_sums, 1) * sizeof(*c->sums));
	memcpy(c->sums, s->sums, c->n_sums * sizeof(*c->sums));
	c->n_ch = c->cap_ch = s->n_ch;
	c->ch = xcalloc(MV_MAX(c->n_ch, 1), sizeof(*c->ch));
	memcpy(c->ch, s->ch, s->n_ch * sizeof(*s->ch));
	pthread_mutex_unlock(&s->mu);
	drop_ranges(c, dc, n_dc);
	drop_ranges(c, wf, n_wf);
	for (size_t i = 0; i < c->n_ch; i++)
		c->owed += (uint64_t)c->ch[i].n * PG;
	c->wipe = wf;
	c->n_wipe = n_wf;
	free(dc);
	int krc = keep_uffd(c);
	if (krc < 0 && krc != -ENOTCONN)
		log_warn("evict: the reaper cannot hold the userfaultfd of process %d's fork "
			 "child: %s",
			 c->parent, strerror(-krc));
	link_space(c);
	if (c->pagesfd < 0 || start_workers(c) < 0)
		log_error("evict: cannot serve the fork child of process %d: its evicted memory "
			  "cannot be read",
			  c->parent);
	evict_put(c); /* the registry and the workers hold it */
}

/* Under s->lay (write). */
static void on_event(struct evspace *s, const struct uffd_msg *m)
{
	switch (m->event) {
	case UFFD_EVENT_FORK:
		on_fork(s, (int)m->arg.fork.ufd);
		return;
	case UFFD_EVENT_REMAP:
		pthread_mutex_lock(&s->mu);
		move_range(s, m->arg.remap.from, m->arg.remap.to, m->arg.remap.len);
		evict_thp_forget(&s->thp, m->arg.remap.from, m->arg.remap.from + m->arg.remap.len);
		evict_thp_forget(&s->thp, m->arg.remap.to, m->arg.remap.to + m->arg.remap.len);
		pthread_mutex_unlock(&s->mu);
		return;
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		/* While evicting, every thread of the program is stopped: a
		 * REMOVE is our own MADV_DONTNEED. evicting is cleared under
		 * s->lay (write) once the last of them is applied, so this
		 * test is exact. */
		if (m->event == UFFD_EVENT_REMOVE && s->evicting)
			return;
		pthread_mutex_lock(&s->mu);
		drop_range(s, m->arg.remove.start, m->arg.remove.end);
		evict_thp_forget(&s->thp, m->arg.remove.start, m->arg.remove.end);
		pthread_mutex_unlock(&s->mu);
		return;
	default:
		return;
	}
}

/* ---- the workers ------------------------------------------------------- */

struct fault {
	uint64_t addr, t0;
	pid_t who;
};

struct worker {
	struct evspace *s;
	bool prober;
	void *buf;
	struct fault q[MSG_BATCH * 4];
	size_t nq;
	struct ahead ra[MSG_BATCH * 4]; /* read-aheads owed: a ring, oldest at ra_head */
	size_t ra_head, n_ra;
};

/* A fork child's pid, from the first fault that names a thread. */
static void learn_tgid(struct evspace *s, pid_t who)
{
	struct proc_status st;
	if (s->tgid || who <= 0 || procfs_status(who, &st) < 0)
		return;
	s->tgid = st.tgid;
}

static bool queued(const struct worker *w, uint64_t addr)
{
	for (size_t i = 0; i < w->nq; i++)
		if (w->q[i].addr == addr)
			return true;
	return false;
}

/* A fault already queued is dropped: serving the queued one wakes every
 * thread waiting on the page. One that finds the queue full is woken,
 * to fault again: it is never left unread and unanswered. */
static void take_messages(struct worker *w, struct uffd_msg *m, ssize_t n)
{
	struct evspace *s = w->s;
	for (ssize_t i = 0; i < n; i++) {
		if (m[i].event != UFFD_EVENT_PAGEFAULT) {
			on_event(s, &m[i]);
			continue;
		}
		uint64_t addr = m[i].arg.pagefault.address & ~(PG - 1);
		pid_t who =
		    m[i].arg.pagefault.feat.ptid ? (pid_t)m[i].arg.pagefault.feat.ptid : s->pid;
		learn_tgid(s, who);
		if (queued(w, addr))
			continue;
		if (w->nq < ARRAY_SIZE(w->q))
			w->q[w->nq++] = (struct fault){addr, mv_now_ns(), who};
		else
			uffd_wake(s->uffd, addr, PG);
	}
}

/* Read what the uffd has (non-blocking) and apply its events, under
 * s->lay (write) from the read on; 0 when it had nothing. Always a whole
 * batch, whatever room the queue has: the kernel hands out every pending
 * fault before any event (fs/userfaultfd.c userfaultfd_ctx_read), so a
 * read with room for faults only would never reach the event that holds
 * every copy back (serve_queue). */
static ssize_t read_messages(struct worker *w)
{
	struct uffd_msg m[MSG_BATCH];
	pthread_rwlock_wrlock(&w->s->lay);
	ssize_t n = read(w->s->uffd, m, sizeof(m));
	if (n > 0)
		take_messages(w, m, n / (ssize_t)sizeof(m[0]));
	pthread_rwlock_unlock(&w->s->lay);
	return n > 0 ? n / (ssize_t)sizeof(m[0]) : 0;
}

static void mark_dead(struct evspace *s, const char *why)
{
	if (!s->dead)
		log_info("evict: process %d: %s; its pending pages are dropped", evict_space_pid(s),
			 why);
	s->dead = true;
	stop_space(s);
}

/* Until the uffd has something to read, at most us microseconds. */
static void wait_readable(struct evspace *s, unsigned us)
{
	struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
	struct timespec ts = {0, (long)us * 1000};
	ppoll(&pfd, 1, &ts, NULL);
}

/* The oldest read-ahead owed, at normal priority: nobody waits on it. */
static void read_ahead_one(struct worker *w)
{
	struct ahead a = w->ra[w->ra_head];
	w->ra_head = (w->ra_head + 1) % ARRAY_SIZE(w->ra);
	w->n_ra--;
	bool rt = evict_fault_rt(false);
	read_ahead(w->s, a.addr, &a.c, a.lo, a.hi, w->buf);
	if (rt)
		evict_fault_rt(true);
}

/* EAGAIN: the kernel refuses every copy while an event of this uffd is
 * under way (mmap_changing: munmap, mremap, madvise, fork), from before
 * the change until the event is read. Timeline (a munmap): thread A
 * enters munmap (userfaultfd_unmap_prep: copies fail from now on), zaps
 * the pages, and only then queues its UNMAP event and waits for it to be
 * read; thread B faults meanwhile and its copy fails. B's fault is kept,
 * and B not woken: a woken B faults again, each copy fails and wakes it
 * once more, and its faults, read before any event, filled every
 * worker's queue with copies of one fault until no worker read the uffd
 * any more, and A waited for good (the churn node hang). So the fault
 * waits here until the uffd has the event (or another fault) to read. */
static void serve_queue(struct worker *w)
{
	struct evspace *s = w->s;
	unsigned backoff = 50;
	while (w->nq) {
		struct fault f = w->q[--w->nq];
		uint64_t woken = 0;
		struct ahead ra;
		int rc = serve_fault(s, f.addr, f.who, w->buf, &woken, &ra);
		if (rc == -EAGAIN) {
			w->q[w->nq++] = f;
			if (!read_messages(w)) {
				wait_readable(s, backoff);
				backoff = MV_MIN(backoff * 2, 5000u);
			}
			continue;
		}
		backoff = 50;
		if (rc == -ESRCH) {
			mark_dead(s, "its address space is gone (exit or exec)");
			w->nq = w->n_ra = 0;
			return;
		}
		if (ra.addr) {
			if (w->n_ra == ARRAY_SIZE(w->ra))
				read_ahead_one(w); /* full: the oldest now */
			w->ra[(w->ra_head + w->n_ra++) % ARRAY_SIZE(w->ra)] = ra;
		}
		if (rc == -ENOENT)
			uffd_wake(s->uffd, f.addr, PG); /* unmapped meanwhile: let it fault again */
		else if (rc < 0)
			log_warn("evict: serving a fault at %#llx in process %d: %s",
				 (unsigned long long)f.addr, evict_space_pid(s), strerror(-rc));
		uint64_t dt = (woken ? woken : mv_now_ns()) - f.t0;
		pthread_mutex_lock(&s->mu);
		s->faults++;
		hist_add(&s->lat, dt);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Faults first, read-ahead after: a batch of faults read at once (8 threads
 * touching their pages together) was served one by one, each followed by
 * the read-ahead of its chunk (up to 2 MiB), so the last waited for all
 * the others' read-ahead too (fault p99 in milliseconds). Now every
 * queued fault is served, then the read-aheads run one by one, oldest
 * first, and a fault that arrives meanwhile is served before the next. */
static void serve_all(struct worker *w)
{
	struct evspace *s = w->s;
	for (;;) {
		serve_queue(w);
		if (!w->n_ra || s->stopping) {
			w->ra_head = w->n_ra = 0;
			return;
		}
		read_ahead_one(w);
		struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
		if (w->n_ra && poll(&pfd, 1, 0) > 0)
			read_messages(w);
	}
}

/* A fault worker sleeps until a thread of the program waits on it: let it
 * run before the program's busy threads (nice -10 where we may; they are
 * bounded by the faults they serve). */
void evict_boost_thread(int nice)
{
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) < 0 && errno != EACCES &&
	    errno != EPERM)
		log_debug("evict: setpriority: %s", strerror(errno));
}

/* Whether this thread serves faults under SCHED_FIFO (evict_fault_rt). */
static __thread bool fault_rt;

/* nice -10 is not enough where the program keeps every CPU busy: the
 * scheduler still gives its threads their share first, and a fault waited
 * milliseconds for a worker to run (bench/README.md, "2026-12-04").
 * A thread serving faults runs SCHED_FIFO at the lowest real-time
 * priority where memvisor may (CAP_SYS_NICE or RLIMIT_RTPRIO), for just
 * the work a program thread waits on: evict_fault_rt(false) before work
 * nobody waits on (read-ahead), true again after. MEMVISOR_FAULT_RT=0
 * keeps nice alone. Returns whether the thread was real-time before. */
bool evict_fault_rt(bool on)
{
	bool was = fault_rt;
	static int allowed = -1; /* unknown; a machine fact, racy but idempotent */
	int a = __atomic_load_n(&allowed, __ATOMIC_RELAXED);
	if (a < 0) {
		const char *env = getenv("MEMVISOR_FAULT_RT");
		a = !(env && strcmp(env, "0") == 0);
		__atomic_store_n(&allowed, a, __ATOMIC_RELAXED);
	}
	if (!a || on == fault_rt)
		return was;
	struct sched_param sp = {.sched_priority = on ? 1 : 0};
	int rc = pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &sp);
	if (rc == 0)
		fault_rt = on;
	else if (on && (rc == EPERM || rc == EACCES))
		__atomic_store_n(&allowed, 0, __ATOMIC_RELAXED); /* not ours to have */
	else
		log_debug("evict: scheduling policy: %s", strerror(rc));
	return was;
}

void evict_fault_thread(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	evict_boost_thread(EVICT_WORKER_NICE);
	evict_fault_rt(true);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct evspace *s = w->s;
	evict_fault_thread("mv-fault");
	struct pollfd pfd[2] = {{.fd = s->uffd, .events = POLLIN},
				{.fd = s->stopfd, .events = POLLIN}};
	while (!s->stopping) {
		int n = poll(pfd, 2, PROBE_MS);
		if (n < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (n == 0 && w->prober && !uffd_mm_alive(s->uffd, s->probe)) {
			mark_dead(s, "its address space is gone (exit or exec)");
			break;
		}
		if (n > 0 && read_messages(w)) {
			uint64_t t0 = mv_thread_cpu_ns();
			serve_all(w);
			__atomic_fetch_add(&s->cpu_ns, mv_thread_cpu_ns() - t0, __ATOMIC_RELAXED);
		}
	}
	free(w->buf);
	evict_put(s);
	free(w);
	return NULL;
}

static int start_workers(struct evspace *s)
{
	for (int i = 0; i < EVICT_WORKERS; i++) {
		struct worker *w = xcalloc(1, sizeof(*w));
		w->s = s;
		w->prober = i == 0;
		w->buf = xmalloc_pages(IMG_EXTENT_MAX);
		pthread_mutex_lock(&s->reg->mu);
		get_locked(s);
		pthread_mutex_unlock(&s->reg->mu);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &at, worker_main, w);
		pthread_attr_destroy(&at);
		if (rc != 0) {
			free(w->buf);
			free(w);
			evict_put(s);
			return i ? 0 : -rc;
		}
	}
	return 0;
}

static struct evspace *space_new(struct evict *reg)
{
	struct evspace *s = xcalloc(1, sizeof(*s));
	s->reg = reg;
	pthread_mutex_init(&s->mu, NULL);
	/* Writers first: a worker waiting to read the uffd must not starve
	 * behind a stream of copies (its event holds a program thread). */
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->lay, &ra);
	pthread_rwlockattr_destroy(&ra);
	s->refs = 1;
	s->uffd = s->pagesfd = s->directfd = s->pidfd = -1;
	s->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return s;
}

/* ---- evicting a stopped process --------------------------------------- */

bool evict_region_evictable(const struct img_region *r)
{
	return r->content == IMG_PRIVATE && !r->shared && r->ext.n &&
	       (r->kind == AS_ANON || r->kind == AS_HEAP || r->kind == AS_STACK);
}

/* The image map of ip's evictable regions, with their pages' checksums
 * (from im). */
static void build_map(struct evspace *s, const struct img *im, const struct img_proc *ip)
{
	size_t n = 0, pages = 0;
	for (size_t k = 0; k < ip->n_r; k++)
		if (evict_region_evictable(&ip->r[k]))
			for (size_t x = 0; x < ip->r[k].ext.n; x++, n++)
				pages += ip->r[k].ext.v[x].pages;
	s->sums = xmalloc(MV_MAX(pages, 1) * sizeof(*s->sums));
	s->ext = xcalloc(MV_MAX(n, 1), sizeof(*s->ext));
	s->ch = xcalloc(MV_MAX(n, 1), sizeof(*s->ch));
	s->cap_ch = MV_MAX(n, 1);
	for (size_t k = 0; k < ip->n_r; k++) {
		if (!evict_region_evictable(&ip->r[k]))
			continue;
		for (size_t x = 0; x < ip->r[k].ext.n; x++) {
			const struct img_extent *e = &ip->r[k].ext.v[x];
			s->ext[s->n_ext] =
			    (struct ev_ext){e->off, e->pages, (uint32_t)s->n_sums, {0}};
			for (uint32_t p = 0; p < e->pages; p++)
				s->sums[s->n_sums++] = img_page_sum(im, e->off + (uint64_t)p * PG);
			s->ch[s->n_ch++] =
			    (struct ev_chunk){e->addr, (uint32_t)s->n_ext, 0, e->pages};
			s->n_ext++;
		}
	}
	mv_qsort(s->ch, s->n_ch, sizeof(*s->ch), cmp_chunk);
}

static int setup_space(struct evspace *s, struct ptrace_proc *pp, struct remote *r, const char *dir,
		       const char *id, struct mv_err *err)
{
	int rc = remote_userfaultfd_stopped(r, pp->pidfd, &s->uffd, err);
	if (rc < 0)
		return rc;
	rc =
	    uffd_api_best(s->uffd, UFFD_EVICT_FEATURES,
			  UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_POISON | UFFD_FEATURE_MISSING_SHMEM,
			  &s->features);
	if (rc < 0)
		return mv_err_set(
		    err, rc, NULL,
		    "userfaultfd of process %d: UFFDIO_API: %s (features missing: %#llx)", pp->pid,
		    strerror(-rc), (unsigned long long)s->features);
	/* Before anything is dropped: should we die, the reaper keeps the
	 * ranges registered until the program is dead (reaper.h). */
	rc = keep_uffd(s);
	if (rc < 0 && rc != -ENOTCONN)
		return mv_err_set(err, rc, NULL,
				  "handing process %d's userfaultfd to the reaper: %s", pp->pid,
				  strerror(-rc));
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, IMG_PAGES);
	s->pagesfd = open(path, O_RDONLY | O_CLOEXEC);
	/* The loader reads what the page cache lacks straight into its
	 * buffer (the image was written with O_DIRECT, so usually all of
	 * it): half the CPU of a buffered read, which copies twice. */
	s->directfd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (s->pagesfd < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", path, strerror(errno));
	if (s->stopfd < 0)
		return mv_err_set(err, -EMFILE, NULL, "eventfd: %s", strerror(EMFILE));
	s->pid = s->tgid = pp->pid;
	s->pidfd = fcntl(pp->pidfd, F_DUPFD_CLOEXEC, 0);
	s->probe = r->vdso_start;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->dir = xstrdup(dir);
	return 0;
}

/* Register, then drop: a region whose registration fails keeps its pages;
 * one whose madvise fails stays registered with its pages present (the
 * pages it lacks are not in the image either: zeros are right). */
static int drop_pages(struct remote *r, uint64_t start, uint64_t len)
{
	long a[6] = {(long)start, (long)len, MADV_DONTNEED}, ret = 0;
	int rc = remote_syscall_stopped(r, SYS_madvise, a, &ret);
	return rc < 0 ? rc : ret < 0 ? (int)ret : 0;
}

/* The extents of g, adjacent ones together. */
static int drop_extents(struct remote *r, const struct img_region *g, uint64_t *failed_at)
{
	for (size_t x = 0; x < g->ext.n;) {
		uint64_t start = g->ext.v[x].addr, end = start + img_extent_len(&g->ext.v[x]);
		for (x++; x < g->ext.n && g->ext.v[x].addr == end; x++)
			end += img_extent_len(&g->ext.v[x]);
		int rc = drop_pages(r, start, end - start);
		if (rc < 0) {
			*failed_at = start;
			return rc;
		}
	}
	return 0;
}

static void evict_region(struct evspace *s, struct remote *r, const struct img_region *g,
			 bool whole, struct evict_stats *st)
{
	uint64_t len = g->end - g->start;
	pthread_mutex_lock(&s->mu);
	if (evict_thp_note(&s->thp, s->pid, g->start, g->end) < 0)
		log_debug("evict: process %d: no huge page scan of %#llx-%#llx", s->pid,
			  (unsigned long long)g->start, (unsigned long long)g->end);
	pthread_mutex_unlock(&s->mu);
	int rc = uffd_register(s->uffd, g->start, len);
	if (rc < 0) {
		log_warn("evict: process %d: registering %#llx-%#llx: %s; left resident", s->pid,
			 (unsigned long long)g->start, (unsigned long long)g->end, strerror(-rc));
		st->kept_regions++;
		return;
	}
	uint64_t at = g->start;
	rc = whole ? drop_pages(r, g->start, len) : drop_extents(r, g, &at);
	if (rc < 0) {
		/* What was dropped before is in the map, and served. */
		log_warn("evict: process %d: madvise(DONTNEED) of %#llx-%#llx from %#llx: %s; left "
			 "resident",
			 s->pid, (unsigned long long)g->start, (unsigned long long)g->end,
			 (unsigned long long)at, strerror(-rc));
		st->kept_regions++;
		return;
	}
	st->regions++;
	for (size_t x = 0; x < g->ext.n; x++)
		st->bytes += img_extent_len(&g->ext.v[x]);
}

/* Register a mapping of shared object g->object (in shm's plan) in
 * missing mode: the object's pages are punched only once every mapping
 * of it is registered (evict_stage.c), so a failure here leaves the
 * object resident (failed[k]); a registered mapping whose pages stay
 * present takes no fault but for a hole, which is served as zeros as
 * the kernel would. Faults are told the object and offset by the
 * process's region at the address (serve_shared), which needs the
 * faulting thread's id (THREAD_ID: a fork child's pid) and shmem
 * support (MISSING_SHMEM, Linux 4.11). */
static void register_shared(struct evspace *s, const struct img_region *g,
			    const struct evict_shm *shm, struct evict_stats *st)
{
	size_t k = (size_t)g->object;
	if (!shm || g->object < 0 || k >= shm->n || !shm->evict[k]) {
		st->shared_regions++;
		return;
	}
	uint64_t need = UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_THREAD_ID;
	int rc = (s->features & need) == need ? uffd_register(s->uffd, g->start, g->end - g->start)
					      : -EOPNOTSUPP;
	if (rc < 0) {
		log_warn("evict: process %d: registering the shared mapping %#llx-%#llx: %s; its "
			 "object stays resident",
			 s->pid, (unsigned long long)g->start, (unsigned long long)g->end,
			 strerror(-rc));
		shm->failed[k] = true;
		st->shared_regions++;
		return;
	}
	s->shared = true;
	shm->regions[k]++;
}

int evict_proc_stopped(struct evict *reg, struct ptrace_proc *pp, const struct img *im,
		       const struct img_proc *ip, const char *dir, const bool *whole,
		       const struct evict_shm *shm, struct evict_stats *st, struct mv_err *err)
{
	struct remote r;
	int rc = remote_open_stopped(&r, pp, &reg->mv->injecting);
	if (rc < 0)
		return mv_err_set(err, rc, NULL,
				  "process %d: none of its threads is stopped (a vfork parent "
				  "waits until its child execs or exits), so no system call can "
				  "be injected into it: %s",
				  pp->pid, strerror(-rc));
	struct evspace *s = space_new(reg);
	rc = setup_space(s, pp, &r, dir, im->id, err);
	if (rc < 0) {
		evict_put(s);
		return rc;
	}
	build_map(s, im, ip);
	for (size_t i = 0; i < s->n_ch; i++)
		s->owed += (uint64_t)s->ch[i].n * PG;
	s->evicting = true;
	if ((rc = start_workers(s)) < 0) {
		evict_put(s);
		return mv_err_set(err, rc, NULL, "starting the fault workers: %s", strerror(-rc));
	}
	link_space(s);
	uint64_t regions_before = st->regions, bytes_before = st->bytes;
	for (size_t k = 0; k < ip->n_r; k++) {
		if (evict_region_evictable(&ip->r[k]))
			evict_region(s, &r, &ip->r[k], !whole || whole[k], st);
		else if (ip->r[k].content == IMG_SHARED)
			register_shared(s, &ip->r[k], shm, st);
	}
	/* Each injected madvise returned once a worker had read its REMOVE
	 * event (fs/userfaultfd.c userfaultfd_remove waits for the read),
	 * and a worker holds s->lay for writing from its read until the
	 * events are applied: once we hold it, every REMOVE of ours has been
	 * recognised as ours. Only then may a REMOVE be the program's. */
	pthread_rwlock_wrlock(&s->lay);
	s->evicting = false;
	pthread_rwlock_unlock(&s->lay);
	pthread_mutex_lock(&reg->mu);
	reg->evicted += st->bytes - bytes_before;
	pthread_mutex_unlock(&reg->mu);
	if (st->regions == regions_before && !s->shared)
		stop_space(s); /* nothing dropped: nothing to serve */
	evict_put(s);
	return 0;
}

/* ---- the loader's side ------------------------------------------------- */

void evict_space_counts(struct evspace *s, uint64_t *owed, uint64_t *loaded)
{
	pthread_mutex_lock(&s->mu);
	*owed = s->owed;
	*loaded = s->loaded;
	pthread_mutex_unlock(&s->mu);
}

/* The next chunk with pages still owed, copied out with its extent. The
 * scan resumes where the last one stopped (a cursor, wrapping once), so
 * that the lock is held for a short step, not a pass over every chunk. */
static bool next_owed(struct evspace *s, struct ev_chunk *c, struct ev_ext *e)
{
	bool found = false;
	pthread_mutex_lock(&s->mu);
	for (size_t k = 0; k < s->n_ch && !found; k++) {
		size_t i = (s->cursor + k) % s->n_ch;
		if (!owed_in(s, &s->ch[i]))
			continue;
		*c = s->ch[i];
		*e = s->ext[c->ext];
		s->cursor = i;
		found = true;
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

/* Install every owed page of extent ext that is good in buf (ok),
 * wherever its chunks are now. Under s->lay (read): the chunk array does
 * not change shape. */
static int copy_ext(struct evspace *s, uint32_t ext, const void *buf, const uint64_t *ok,
		    unsigned *enoent)
{
	for (size_t i = 0;; i++) {
		pthread_mutex_lock(&s->mu);
		bool more = i < s->n_ch;
		struct ev_chunk c = more ? s->ch[i] : (struct ev_chunk){0};
		pthread_mutex_unlock(&s->mu);
		if (!more)
			return 0;
		if (c.ext != ext)
			continue;
		int rc = copy_runs(s, &c, c.first, c.first + c.n, buf, ok, enoent);
		if (rc < 0)
			return rc;
	}
}

/* Pages of extent ext that no registered vma holds (ENOENT,
 * mm/userfaultfd.c validate_dst_vma). Usually an event is on its way: the
 * program unmapped or moved the range (the kernel checks the vma before
 * it checks for a pending event), and the worker that reads it fixes the
 * map. Timeline: program mremaps X to Y (vma moved, REMAP queued);
 * loader's UFFDIO_COPY at X -> ENOENT; worker reads the event, the chunk
 * moves to Y. So wait for the workers; pages still unreachable after
 * 100 tries (100 ms at least), with no message waiting on the uffd, are
 * dropped: no access can fault on them through this uffd (a fork child's
 * MADV_DONTFORK range it made itself, for instance). */
static int range_gone(struct evspace *s, uint32_t ext)
{
	usleep(1000);
	if (++s->enoent < 100)
		return 1;
	pthread_rwlock_wrlock(&s->lay);
	/* An event waiting to be read may be the one that explains the
	 * ENOENT: let the workers have it first. */
	struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
	if (poll(&pfd, 1, 0) > 0) {
		pthread_rwlock_unlock(&s->lay);
		s->enoent = 50;
		return 1;
	}
	s->enoent = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_ch;) {
		struct ev_chunk c = s->ch[i];
		if (c.ext != ext || !owed_in(s, &c)) {
			i++;
			continue;
		}
		log_debug("evict: process %d: %#llx-%#llx is no longer registered; dropped",
			  evict_space_pid(s), (unsigned long long)c.addr,
			  (unsigned long long)chunk_end(&c));
		drop_range(s, c.addr, chunk_end(&c));
	}
	pthread_mutex_unlock(&s->mu);
	pthread_rwlock_unlock(&s->lay);
	return 1;
}

/* Install the good pages of extent e (read into buf, ok) wherever its
 * chunks are now; the second half of a load step. Returns 1, or -errno
 * as evict_load_all. */
static int install(struct evspace *s, uint32_t ext, const struct ev_ext *e, const void *buf,
		   const uint64_t *ok, int bad)
{
	unsigned enoent;
	int rc;
	for (int tries = 0;; tries++) {
		enoent = 0;
		pthread_rwlock_rdlock(&s->lay);
		/* Failure point reload_copy_gone: as if the range was just unmapped. */
		if (fault_hit("reload_copy_gone"))
			enoent = 1, rc = 0;
		else
			rc = copy_ext(s, ext, buf, ok, &enoent);
		pthread_rwlock_unlock(&s->lay);
		if (rc != -EAGAIN || tries > 10000)
			break;
		usleep(100); /* a worker reads the event that holds copies back */
	}
	if (rc == -ESRCH)
		mark_dead(s, "its address space is gone (exit or exec)");
	if (rc == 0 && bad) {
		/* The good pages are in; the bad ones stay owed, and a fault
		 * on one makes it unservable (SIGBUS), never zeros. */
		log_error(
		    "evict: the image %s cannot give back pages of the extent at pages offset "
		    "%#llx: %s",
		    s->dir, (unsigned long long)e->off,
		    bad == -EBADMSG ? "a page fails its checksum" : strerror(-bad));
		return bad;
	}
	if (rc == 0 && enoent)
		return range_gone(s, ext);
	s->enoent = 0;
	return rc < 0 ? rc : 1;
}

/* ---- the loader's pipeline: threads read, the caller installs ---- */

#define LOAD_READERS 2 /* O_DIRECT reads in flight: one at a time left the disk idle */
#define LOAD_SLOTS   (2 * LOAD_READERS)

enum { SLOT_FREE, SLOT_READING, SLOT_FULL };

struct lslot {
	struct ev_chunk c;
	struct ev_ext e;
	uint64_t ok[EXT_WORDS];
	int bad;
	int state; /* under lpipe.mu */
	void *buf;
};

struct lpipe {
	struct evspace *s;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lslot sl[LOAD_SLOTS];
	bool end;  /* a reader found nothing owed */
	bool stop; /* the installer gave up */
	const struct evict_load_ops *ops;
	void *arg;
	uint64_t reader_cpu_ns; /* under mu */
};

/* The next chunk with owed pages after the last one picked: the readers
 * move on while the installer works on what they read (a chunk picked
 * again before it was installed is read twice, and installed once). */
static bool pick(struct evspace *s, struct ev_chunk *c, struct ev_ext *e)
{
	if (!next_owed(s, c, e))
		return false;
	pthread_mutex_lock(&s->mu);
	s->cursor = s->n_ch ? (s->cursor + 1) % s->n_ch : 0;
	pthread_mutex_unlock(&s->mu);
	return true;
}

/* A slot in state from, or NULL. Under p->mu. */
static struct lslot *slot_in(struct lpipe *p, int from)
{
	for (int i = 0; i < LOAD_SLOTS; i++)
		if (p->sl[i].state == from)
			return &p->sl[i];
	return NULL;
}

static void *reader_main(void *arg)
{
	struct lpipe *p = arg;
	struct evspace *s = p->s;
	evict_boost_thread(EVICT_LOADER_NICE);
	for (;;) {
		pthread_mutex_lock(&p->mu);
		struct lslot *sl;
		while (!(sl = slot_in(p, SLOT_FREE)) && !p->stop && !p->end)
			pthread_cond_wait(&p->cv, &p->mu);
		bool go = sl && !p->stop && !p->end;
		if (go)
			sl->state = SLOT_READING;
		pthread_mutex_unlock(&p->mu);
		if (!go)
			break;
		p->ops->pace(p->arg);
		bool more = !s->dead && pick(s, &sl->c, &sl->e);
		if (more) {
			uint32_t a = 0, b = sl->e.pages;
			memset(sl->ok, 0, sizeof(sl->ok));
			sl->bad = 0;
			if (owed_span(s, sl->c.ext, &a, &b)) {
				sl->bad = read_pages(s, &sl->e, a, b, sl->buf, sl->ok, true);
				p->ops->read(p->arg, (uint64_t)(b - a) * PG);
			}
		}
		pthread_mutex_lock(&p->mu);
		sl->state = more ? SLOT_FULL : SLOT_FREE;
		if (!more)
			p->end = true;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	uint64_t cpu = mv_thread_cpu_ns();
	pthread_mutex_lock(&p->mu);
	p->reader_cpu_ns += cpu;
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int evict_load_all(struct evspace *s, const struct evict_load_ops *ops, void *arg,
		   uint64_t *reader_cpu_ns)
{
	struct lpipe p = {.s = s, .ops = ops, .arg = arg};
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	for (int i = 0; i < LOAD_SLOTS; i++)
		p.sl[i].buf = xmalloc_pages(IMG_EXTENT_MAX);
	pthread_t t[LOAD_READERS];
	int started = 0, rc = 0;
	for (; started < LOAD_READERS; started++)
		if ((rc = -pthread_create(&t[started], NULL, reader_main, &p)) < 0)
			break;
	if (started)
		rc = 0;
	for (;;) {
		pthread_mutex_lock(&p.mu);
		struct lslot *sl;
		while (!(sl = slot_in(&p, SLOT_FULL)) && !(p.end && !slot_in(&p, SLOT_READING)) &&
		       started)
			pthread_cond_wait(&p.cv, &p.mu);
		pthread_mutex_unlock(&p.mu);
		if (!sl)
			break; /* the readers ended and every slot is installed */
		int r = s->dead ? -ESRCH : install(s, sl->c.ext, &sl->e, sl->buf, sl->ok, sl->bad);
		pthread_mutex_lock(&p.mu);
		sl->state = SLOT_FREE;
		if (r < 0)
			p.stop = true;
		pthread_cond_broadcast(&p.cv);
		pthread_mutex_unlock(&p.mu);
		ops->progress(arg);
		if (r < 0) {
			rc = r;
			break;
		}
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	/* A process that exited between two slots had its pending pages
	 * dropped (mark_dead): the readers then found nothing owed and the
	 * loop ended as if everything was loaded. It is gone. */
	pthread_mutex_lock(&s->mu);
	if (rc == 0 && s->dead)
		rc = -ESRCH;
	pthread_mutex_unlock(&s->mu);
	*reader_cpu_ns += p.reader_cpu_ns;
	for (int i = 0; i < LOAD_SLOTS; i++)
		free(p.sl[i].buf);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	return rc;
}

void evict_space_finish(struct evspace *s, uint64_t *huge, uint64_t *huge_restored)
{
	pthread_mutex_lock(&s->mu);
	struct evict_thp t = s->thp;
	t.v = t.n ? xmalloc(t.n * sizeof(*t.v)) : NULL;
	if (t.n)
		memcpy(t.v, s->thp.v, t.n * sizeof(*t.v));
	bool dead = s->dead;
	pthread_mutex_unlock(&s->mu);
	/* An exec since the last probe: the pidfd names a new program, whose
	 * ranges are not ours to collapse. */
	dead = dead || !uffd_mm_alive(s->uffd, s->probe);
	if (!dead) /* the collapse runs in the job thread, the program runs on */
		evict_thp_restore(&t, s->pidfd, s->uffd);
	*huge += t.bytes;
	*huge_restored += t.restored;
	evict_thp_free(&t);
	stop_space(s);
}

void evict_space_faults(struct evspace *s, void *hist, uint64_t *faults, uint64_t *bytes,
			uint64_t *cpu_ns)
{
	pthread_mutex_lock(&s->mu);
	hist_merge(hist, &s->lat);
	*faults += s->faults;
	*bytes += s->loaded;
	pthread_mutex_unlock(&s->mu);
	*cpu_ns += __atomic_load_n(&s->cpu_ns, __ATOMIC_RELAXED);
}

json_t *evict_status_json(struct evict *reg)
{
	json_t *a = json_array();
	pthread_mutex_lock(&reg->mu);
	for (struct evspace *s = reg->head; s; s = s->next) {
		pthread_mutex_lock(&s->mu);
		json_array_append_new(
		    a, json_pack("{s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "pid", s->pid,
				 "parent", s->parent, "image", s->dir, "id", s->id, "owed_bytes",
				 (json_int_t)s->owed, "loaded_bytes", (json_int_t)s->loaded,
				 "faults", (json_int_t)s->faults, "fault_p50_ns",
				 (json_int_t)hist_quantile(&s->lat, 0.5), "fault_p99_ns",
				 (json_int_t)hist_quantile(&s->lat, 0.99)));
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&reg->mu);
	return a;
}

void evict_totals(struct evict *reg, struct evict_totals *t)
{
	pthread_mutex_lock(&reg->mu);
	*t = reg->gone;
	t->evicted = reg->evicted;
	for (struct evspace *s = reg->head; s; s = s->next) {
		pthread_mutex_lock(&s->mu);
		t->spaces++;
		t->owed += s->owed;
		t->loaded += s->loaded;
		t->faults += s->faults;
		hist_merge(&t->lat, &s->lat);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&reg->mu);
}
