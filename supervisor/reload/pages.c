/* Image pages of an evicted space: read, checked, installed, or poisoned
 * when the image cannot give them back (supervisor/reload/space.h). */
#include "supervisor/reload/space.h"
#include "common/compat.h"
#include "common/crc32c.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Extents from this size on are read with O_DIRECT (pages_read). */
#define DIRECT_MIN (256u << 10) /* bytes */

/* Read pages [a, b) of extent e into buf, each at its place in the
 * extent (buf holds a whole extent), and check each against its own
 * checksum: ok gets the ev_bit of every good page of [a, b), and only those
 * may be installed. 0 when all are good; else the error of the first bad
 * one: -EBADMSG for a checksum mismatch, -EIO for a short read (the
 * image was truncated under us), -errno. */
int pages_read(struct evspace *s, const struct ev_ext *e, uint32_t a, uint32_t b, void *buf,
	       uint64_t ok[EXT_WORDS], bool bulk)
{
	size_t len = (size_t)(b - a) * PG, got = 0;
	char *dst = (char *)buf + (size_t)a * PG;
	off_t at = (off_t)(e->off + (uint64_t)a * PG);
	int rc = 0;
	for (uint32_t p = a; p < b; p++)
		ok[p / 64] &= ~(1ull << (p % 64));
	/* The loader reads a range the page cache does not hold whole with
	 * O_DIRECT (whole pages: buf is page-aligned), unless it is small:
	 * extents of sparse memory follow one another in the pages file, and
	 * the page cache's read-ahead reads them many at a time where
	 * O_DIRECT would read each with its own request (16,384 one-page
	 * extents: 0.9 s against 0.4 s, bench/README.md). */
	bool direct = bulk && len >= DIRECT_MIN && s->directfd >= 0 &&
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
		chunks_mark_loaded_locked(s, c->ext, k, k + 1);
		pthread_mutex_unlock(&s->mu);
	}
	return 0;
}

/* Install the pages of [a, b) (extent page indexes within chunk c) that
 * are checked good in buf (ok, pages_read) and not known to be there.
 * Under s->lay (read), with c looked up under it. *enoent counts the
 * pages no registered vma holds (they stay owed). */
int pages_copy_runs(struct evspace *s, const struct ev_chunk *c, uint32_t a, uint32_t b,
		    const void *buf, const uint64_t *ok, unsigned *enoent)
{
	const struct ev_ext *e = &s->ext[c->ext];
	uint32_t p = MV_MAX(a, c->first);
	b = MV_MIN(b, c->first + c->n);
	while (p < b) {
		pthread_mutex_lock(&s->mu);
		while (p < b && (ev_page_loaded(e, p) || !ev_bit(ok, p)))
			p++;
		uint32_t q = p;
		while (q < b && !ev_page_loaded(e, q) && ev_bit(ok, q))
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
			chunks_mark_loaded_locked(s, c->ext, p, p + done);
			pthread_mutex_unlock(&s->mu);
			rc = copy_pages(s, c, p + done, q, buf, enoent);
		} else if (rc == 0) {
			pthread_mutex_lock(&s->mu);
			chunks_mark_loaded_locked(s, c->ext, p, q);
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
int pages_unservable(struct evspace *s, uint64_t addr, pid_t who, const struct ev_ext *e, int err)
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
