/* Serving one fault of an evicted space, private or shared memory
 * (supervisor/reload/space.h). */
#include "supervisor/reload/space.h"
#include "supervisor/kernel/procfs.h"
#include "common/fault.h"
#include "common/util.h"
#include "supervisor/reload/shm.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Pages [a, b) of chunk c's extent that are still owed: read them and
 * install the good ones (pages_read). Under nothing; takes s->lay (read)
 * to install, and does nothing if the chunk at addr changed meanwhile.
 * *bad gets the error of a bad page (0 if none). */
static int fetch_range(struct evspace *s, uint64_t addr, const struct ev_chunk *c, uint32_t a,
		       uint32_t b, void *buf, uint64_t *ok, int *bad, unsigned *enoent)
{
	struct ev_chunk now;
	*bad = 0;
	if (!chunks_owed_span(s, c->ext, &a, &b))
		return 0;
	*bad = pages_read(s, &s->ext[c->ext], a, b, buf, ok, false);
	/* In steps of COPY_STEP pages, s->lay released between them: a
	 * worker reading the uffd takes it for writing, and a fault waited
	 * behind the copy of a whole 2 MiB read-ahead (p50 520 us for a
	 * thread touching pages one by one). */
	int rc = 0;
	for (uint32_t p = a; p < b && rc == 0; p += COPY_STEP) {
		pthread_rwlock_rdlock(&s->lay);
		rc = -ESTALE;
		if (chunks_at(s, addr, &now, NULL) && now.ext == c->ext)
			rc = pages_copy_runs(s, &now, p, MV_MIN(b, p + COPY_STEP), buf, ok, enoent);
		pthread_rwlock_unlock(&s->lay);
	}
	return rc;
}

/* The read-ahead after a fault was served: the rest of its extent's chunk
 * at addr, in the two pieces around the window [lo, hi). Best effort. */
void serve_read_ahead(struct evspace *s, uint64_t addr, const struct ev_chunk *c, uint32_t lo,
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
		rc = pages_unservable(s, addr, who, &e, bad);
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

/* A fault at addr: look the page up and install the window around it
 * (FAULT_WINDOW pages), each page checked against its own checksum, then
 * wake the thread; the read-ahead it owes goes to *ra (addr 0: none), for
 * after the faults waiting (serve_queue). The pages are read without any lock;
 * then the chunk is looked up again under s->lay, since events may have
 * moved or dropped it meanwhile. A bad page is never installed: the
 * faulting one is made pages_unservable (SIGBUS), the others stay owed. */
int serve_fault(struct evspace *s, uint64_t addr, pid_t who, uint64_t gen, void *buf,
		uint64_t *woken, struct ahead *ra)
{
	ra->addr = 0;
	bool stalled = false;
	for (;;) {
		struct ev_chunk c;
		struct ev_ext e;
		pthread_rwlock_rdlock(&s->lay);
		if (!chunks_at(s, addr, &c, &e)) {
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
			struct evobj *o = vr ? space_object_of(s->reg, &v) : NULL;
			if (o) {
				pthread_rwlock_unlock(&s->lay);
				int src = serve_shared(s, addr, who, buf, woken, o, &v);
				evshm_put(o);
				if (src == 1)
					continue; /* the layout changed meanwhile: look again */
				return src;
			}
			/* Failure point serve_zero_stall: this worker is slow to
			 * take the fault, so that a layout event can come first
			 * (kernel_held.bats, the program's own userfaultfd). */
			if (!stalled && fault_hit("serve_zero_stall")) {
				pthread_rwlock_unlock(&s->lay);
				stalled = true;
				usleep(300 * 1000);
				continue;
			}
			if (gen != s->layout_gen) {
				/* The range changed since the fault was read: it
				 * may be another mapping now, registered with a
				 * userfaultfd of the program's, which the kernel
				 * lets ours fill too (mm/userfaultfd.c
				 * validate_dst_vma). Timeline: a thread faults on
				 * our range; the program maps over it
				 * (MAP_FIXED), our worker reads the UNMAP event,
				 * the program registers the new mapping with its
				 * own uffd; a zero page from us would fill it
				 * behind the program's back. Wake the thread: it
				 * faults again where the range is now. */
				pthread_rwlock_unlock(&s->lay);
				uffd_wake(s->uffd, addr, PG);
				*woken = mv_now_ns();
				return 0;
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
		int bad = pages_read(s, &e, lo, hi, buf, ok, false);
		/* A read error may pass; a checksum mismatch does not. */
		for (int t = 0; t < 2 && !ev_bit(ok, idx) && bad != -EBADMSG; t++)
			bad = pages_read(s, &e, lo, hi, buf, ok, false);
		pthread_rwlock_rdlock(&s->lay);
		struct ev_chunk now;
		if (!chunks_at(s, addr, &now, NULL) || now.ext != c.ext) {
			pthread_rwlock_unlock(&s->lay);
			continue; /* the layout changed under us: look again */
		}
		if (!ev_bit(ok, idx)) {
			int rc = pages_unservable(s, addr, who, &e, bad);
			pthread_rwlock_unlock(&s->lay);
			*woken = mv_now_ns();
			return rc;
		}
		unsigned enoent = 0;
		int rc = pages_copy_runs(s, &now, lo, hi, buf, ok, &enoent);
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

/* Does the image owe the page at addr (a chunk covers it, or it is a
 * page of an evicted shared-memory object)? Only such a page is ours to
 * fill: a page we do not owe may lie in a range the program registered
 * with its own userfaultfd, which the kernel would let us fill too. */
static bool owed_here(struct evspace *s, uint64_t addr)
{
	struct ev_chunk c;
	pthread_rwlock_rdlock(&s->lay);
	bool owed = chunks_at(s, addr, &c, NULL);
	pthread_rwlock_unlock(&s->lay);
	struct proc_vma v;
	if (!owed && s->shared && vma_lookup(s, addr, &v) == 1) {
		struct evobj *o = space_object_of(s->reg, &v);
		owed = o != NULL;
		if (o)
			evshm_put(o);
	}
	return owed;
}

/* A fault nobody took: memvisor's own read of the program's memory
 * (kernel/vm.h), each page the image owes served as a fault would be,
 * waiting out a layout change under way (-EAGAIN) for up to a second. */
int evict_fault_in(void *arg, pid_t tid, uint64_t addr, size_t len)
{
	struct evict *reg = arg;
	struct proc_status st;
	pid_t tgid = tid;
	if (procfs_status(tid, &st) == 0 && st.tgid > 0)
		tgid = st.tgid;
	struct evspace *s = space_find(reg, tgid);
	if (!s)
		return 0;
	void *buf = xmalloc_pages(IMG_EXTENT_MAX);
	int rc = 1, served = 0;
	for (uint64_t a = addr & ~(PG - 1); rc > 0 && a < addr + len; a += PG) {
		uint64_t woken;
		struct ahead ra;
		int r = -EAGAIN;
		if (!owed_here(s, a))
			continue; /* present, or not ours to fill */
		served++;
		for (int tries = 0; r == -EAGAIN && tries < 5000; tries++) {
			pthread_rwlock_rdlock(&s->lay);
			uint64_t gen = s->layout_gen;
			pthread_rwlock_unlock(&s->lay);
			r = serve_fault(s, a, tid, gen, buf, &woken, &ra);
			if (r == -EAGAIN)
				usleep(200);
		}
		if (r < 0 && r != -EEXIST)
			rc = r == -ESRCH ? -ESRCH : 0;
	}
	free(buf);
	evict_put(s);
	return rc > 0 && served ? 1 : rc < 0 ? rc : 0;
}
