/* Evicted memory inside supervisor/reload/ (the public side is evict.h):
 * the types of an evicted space and of the registry, their locks, and the
 * functions the files of this folder share. Each file is one mechanism:
 *
 *   registry.c  the spaces and shared objects of one supervisor, their
 *               references, stopping a space, counters for status/metrics
 *   chunks.c    the chunk map: image pages still owed at their current
 *               addresses (split, drop, move, mark loaded)
 *   pages.c     reading image pages and checking their checksums,
 *               installing them (UFFDIO_COPY), poisoning what is lost
 *   serve.c     serving one fault (private and shared), read-ahead
 *   uevent.c    applying uffd events (fork, remap, remove, unmap)
 *   workers.c   the fault workers: reading the uffd, queueing faults,
 *               their priority
 *   evict.c     evicting a stopped process: its uffd, the map, register
 *               and drop
 *   loader.c    the reload job's loader: read threads and installs
 *
 * Lock order (docs/design.md, "Locks"): s->lay, then the registry's
 * reg->mu, then s->mu; an evicted shared object's o->mu (shm.c) is a
 * leaf. s->mu and reg->mu are never held across storage I/O or an ioctl.
 *
 * Functions return 0 or -errno unless they say otherwise. */
#ifndef MV_RELOAD_SPACE_H
#define MV_RELOAD_SPACE_H

#include "common/hist.h"
#include "state/as.h"
#include "state/image.h"
#include "supervisor/kernel/procmap.h"
#include "supervisor/kernel/uffd.h"
#include "supervisor/reload/evict.h"
#include "supervisor/reload/thp.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PG	  4096ull
#define EXT_WORDS (IMG_EXTENT_MAX / IMG_PAGE / 64)
#define MSG_BATCH 16
#define PROBE_MS  500
/* A fault reads, checks and installs the aligned window of this many
 * pages around it before it wakes the thread, then the rest of the
 * extent (read-ahead). One page's read and checksum cost microseconds
 * from the page cache; a whole 2 MiB extent's cost a millisecond. */
#define FAULT_WINDOW 16u
/* Pages installed under one hold of s->lay (read) by the read-ahead
 * (about 20 us of copying) and by the loader (about 100 us: in steps of
 * 16 its 1 GiB took 20% longer, one UFFDIO_COPY a step): the longest a
 * worker waits to read the uffd, which takes s->lay for writing. */
#define COPY_STEP      16u
#define LOAD_COPY_STEP 128u

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
	uint64_t poisoned; /* pages made pages_unservable */
	char id[33];
	char *dir;
	pid_t pid, parent;
	int uffd, pagesfd, stopfd;
	int directfd;	      /* the pages file again, O_DIRECT (the loader), or -1; fixed */
	bool direct_refused;  /* atomic: a read through directfd failed with EINVAL */
	bool reading_ahead;   /* atomic: a worker is reading ahead (one at a time) */
	int pidfd;	      /* the evicted process (-1 for a fork child): THP collapse */
	struct evict_thp thp; /* under mu */
	uint64_t probe;	      /* an address of the mm never registered (the vdso) */
	bool evicting; /* under lay: our own MADV_DONTNEED runs, its REMOVE events are ours */
	/* Under lay: layout events applied (unmap, remap, the program's
	 * remove): a fault read before the last one may name a range that
	 * is no longer ours (serve_fault). */
	uint64_t layout_gen;
	bool shared; /* mappings of evicted shared memory are registered (shm.h) */
	bool dead, stopping, linked;
	struct ev_ext *ext;
	size_t n_ext;
	uint32_t *sums; /* the extents' page checksums (ev_ext.sum0), fixed */
	size_t n_sums;
	struct ev_chunk *ch;
	size_t n_ch, cap_ch;
	/* A chunk was split since the map was made: an extent may be in
	 * more than one chunk (until then each is in one at most). */
	bool split;
	uint64_t owed, loaded; /* bytes */
	size_t cursor;	       /* the loader's place in ch[] */
	unsigned enoent;       /* the loader's copies in a row that found no range */
	uint64_t faults, fault_bytes, zero_faults;
	uint64_t cpu_ns; /* the workers' CPU time serving faults (atomic) */
	struct hist lat;
	struct evspace *next;
};

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

/* The read-ahead a served fault owes: the rest of its chunk (serve_read_ahead). */
struct ahead {
	uint64_t addr;
	struct ev_chunk c;
	uint32_t lo, hi;
};

/* ---- small helpers ------------------------------------------------------ */

static inline bool ev_bit(const uint64_t *v, uint32_t p)
{
	return v[p / 64] >> (p % 64) & 1;
}

static inline uint64_t ev_chunk_end(const struct ev_chunk *c)
{
	return c->addr + (uint64_t)c->n * PG;
}

static inline bool ev_page_loaded(const struct ev_ext *e, uint32_t p)
{
	return ev_bit(e->loaded, p);
}

/* ---- registry.c: spaces, references, the registry ------------------------ */

/* A new space of reg with one reference (the caller's), its fds -1. */
struct evspace *space_new(struct evict *reg);
/* Under reg->mu: one more reference to s. */
void space_get_locked(struct evspace *s);
/* Put s in the registry's list (which holds a reference). */
void space_link(struct evspace *s);
/* Take s out of the list and stop its workers (they drop their
 * references as they go). */
void space_stop(struct evspace *s);
/* Hold a duplicate of s's uffd in the reaper (reaper_hold_fd). */
int space_keep_uffd(struct evspace *s);
/* The mm is gone (exit or exec): log why once, stop the space. */
void space_mark_dead(struct evspace *s, const char *why);
/* The live space of process tgid (a reference: evict_put), or NULL. */
struct evspace *space_find(struct evict *reg, pid_t tgid);
/* The evicted shared-memory object a shared mapping v maps (a
 * reference: evshm_put), or NULL. */
struct evobj *space_object_of(struct evict *reg, const struct proc_vma *v);

/* ---- chunks.c: the chunk map ----------------------------------------- */

/* Bytes of chunk c not installed yet (under s->mu). */
uint64_t chunks_owed_in_locked(const struct evspace *s, const struct ev_chunk *c);

/* The index of the chunk that starts at addr, or n_ch. Under s->mu. */
size_t chunks_index_at(const struct evspace *s, uint64_t addr);
/* munmap, madvise(DONTNEED/FREE): [start, end) is no longer owed (under
 * s->mu). */
void chunks_drop_locked(struct evspace *s, uint64_t start, uint64_t end);
/* Drop each of ranges v (under s->mu, or before s is shared). */
void chunks_drop_ranges(struct evspace *s, const struct as_range *v, size_t n);
/* mremap moved [from, from+len) to to (under s->mu). */
void chunks_move_locked(struct evspace *s, uint64_t from, uint64_t to, uint64_t len);
/* Pages [a, b) of extent ext are installed (under s->mu). */
void chunks_mark_loaded_locked(struct evspace *s, uint32_t ext, uint32_t a, uint32_t b);
/* Order the map by address (under s->mu, or before s is shared). */
void chunks_sort(struct evspace *s);
/* The chunk at addr now, copied out with its extent (e may be NULL);
 * takes s->mu. */
bool chunks_at(struct evspace *s, uint64_t addr, struct ev_chunk *c, struct ev_ext *e);
/* Narrow [*a, *b) (pages of extent ext) to its first and last page not
 * installed yet; false if there is none. Takes s->mu. */
bool chunks_owed_span(struct evspace *s, uint32_t ext, uint32_t *a, uint32_t *b);
/* The next chunk with pages still owed, from the loader's cursor,
 * copied out with its extent. Takes s->mu. */
bool chunks_next_owed(struct evspace *s, struct ev_chunk *c, struct ev_ext *e);

/* ---- pages.c: image pages ------------------------------------------------ */

/* Read pages [a, b) of extent e into buf (a whole extent's buffer, each
 * page at its place) and check each against its checksum: ok gets the
 * bit of each good page. 0 when all are good, else the first bad one's
 * error (-EBADMSG, -EIO, -errno). bulk: the loader (O_DIRECT where the
 * page cache lacks the range). Takes no lock. */
int pages_read(struct evspace *s, const struct ev_ext *e, uint32_t a, uint32_t b, void *buf,
	       uint64_t ok[EXT_WORDS], bool bulk);
/* Install the good pages of [a, b) of chunk c (ok) not installed yet.
 * Under s->lay (read), c looked up under it; *enoent counts the pages no
 * registered vma holds (they stay owed). -EAGAIN, -ESRCH as UFFDIO_COPY. */
int pages_copy_runs(struct evspace *s, const struct ev_chunk *c, uint32_t a, uint32_t b,
		    const void *buf, const uint64_t *ok, unsigned *enoent);
/* The page at addr cannot be given back: poison it (SIGBUS at the
 * access) or kill the process. Under s->lay (read). */
int pages_unservable(struct evspace *s, uint64_t addr, pid_t who, const struct ev_ext *e, int err);

/* ---- serve.c: one fault ------------------------------------------------ */

/* Serve a fault at addr by thread who, read when s->layout_gen was gen:
 * install the window around it, wake the thread (*woken: when), and
 * leave the read-ahead it owes in *ra (addr 0: none). -EAGAIN: a layout
 * change is under way, the thread still waits; -ESRCH: the mm is gone.
 * buf: an extent's buffer. */
int serve_fault(struct evspace *s, uint64_t addr, pid_t who, uint64_t gen, void *buf,
		uint64_t *woken, struct ahead *ra);
/* The read-ahead after a served fault (best effort). */
void serve_read_ahead(struct evspace *s, uint64_t addr, const struct ev_chunk *c, uint32_t lo,
		      uint32_t hi, void *buf);

/* ---- uevent.c: uffd events ---------------------------------------------- */

/* Apply event m (fork, remap, remove, unmap) to s. Under s->lay (write),
 * in the order the kernel delivered the events. A fork returns the
 * child's space (in the registry, a reference for the caller: hand it to
 * workers_adopt); anything else NULL. */
struct evspace *uevent_apply(struct evspace *s, const struct uffd_msg *m);

/* ---- workers.c: the fault workers ---------------------------------------- */

/* Start EVICT_WORKERS workers on s's uffd (each holds a reference). */
int workers_start(struct evspace *s);
/* Serve a fork child's space c (uevent_apply) with workers of its own;
 * takes the caller's reference. */
void workers_adopt(struct evspace *c);

#endif
