/* Which notified call made each region, and which last changed it.
 *
 * The kernel does not tell us where a CONTINUE'd mmap landed, so this is
 * matching, not bookkeeping: a region that overlaps a region of the
 * previous snapshot keeps that region's origin; a new one is matched to the
 * newest unused logged call that could have made it (a fixed mapping at
 * that address, else one of that size and protection). In the first
 * snapshot after an exec, what the kernel's exec itself maps (the
 * program, its bss, the stack, the special mappings) is the exec's.
 * Anything else is unknown (null): without --notify-all most mmap calls
 * stay in the kernel and are never logged, and calling such a region the
 * exec's would be a guess. Each call makes at most one region, except
 * fixed mappings, which own their whole range. */
#include "state/as.h"
#include "common/util.h"

#include <string.h>

#define PAGE		     4096ull
#define MAP_SHARED_	     0x01
#define MAP_FIXED_	     0x10
#define MAP_ANONYMOUS_	     0x20
#define MAP_FIXED_NOREPLACE_ 0x100000
#define MREMAP_FIXED_	     0x2

static uint64_t page_up(uint64_t v)
{
	return v > UINT64_MAX - (PAGE - 1) ? UINT64_MAX & ~(PAGE - 1)
					   : (v + PAGE - 1) & ~(PAGE - 1);
}

static bool logs_layout(enum mv_sc sc)
{
	switch (sc) {
	case MV_SC_mmap:
	case MV_SC_mmap2:
	case MV_SC_munmap:
	case MV_SC_mremap:
	case MV_SC_mprotect:
	case MV_SC_pkey_mprotect:
	case MV_SC_brk:
	case MV_SC_madvise:
	case MV_SC_mlock:
	case MV_SC_mlock2:
	case MV_SC_munlock:
	case MV_SC_remap_file_pages:
	case MV_SC_shmat:
	case MV_SC_shmdt:
	case MV_SC_ipc:
		return true;
	default:
		return false;
	}
}

void as_log_call(struct as_log *log, enum mv_sc sc, const uint64_t args[6], uint64_t time_ns)
{
	if (!logs_layout(sc))
		return;
	struct as_call *c = &log->call[log->head];
	c->sc = sc;
	memcpy(c->args, args, sizeof(c->args));
	c->time_ns = time_ns;
	log->head = (log->head + 1) % AS_LOG_SIZE;
	if (log->count < AS_LOG_SIZE)
		log->count++;
	else
		log->lost++;
}

void as_log_clear(struct as_log *log)
{
	log->head = 0;
	log->count = 0;
	log->lost = 0;
}

/* The i-th newest logged call (0 = newest). */
static const struct as_call *nth_newest(const struct as_log *log, size_t i)
{
	return &log->call[(log->head + AS_LOG_SIZE - 1 - i) % AS_LOG_SIZE];
}

static bool overlaps(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
	return s1 < e2 && s2 < e1;
}

/* The fixed range a call names, if it names one. */
static bool call_range(const struct as_call *c, uint64_t *s, uint64_t *e)
{
	switch (c->sc) {
	case MV_SC_mmap:
	case MV_SC_mmap2:
		if (!(c->args[3] & (MAP_FIXED_ | MAP_FIXED_NOREPLACE_)))
			return false;
		*s = c->args[0];
		*e = c->args[0] + page_up(c->args[1]);
		return true;
	case MV_SC_mremap:
		if (!(c->args[3] & MREMAP_FIXED_))
			return false;
		*s = c->args[4];
		*e = c->args[4] + page_up(c->args[2]);
		return true;
	case MV_SC_mprotect:
	case MV_SC_pkey_mprotect:
	case MV_SC_madvise:
	case MV_SC_mlock:
	case MV_SC_mlock2:
	case MV_SC_munlock:
		*s = c->args[0];
		*e = c->args[0] + page_up(c->args[1]);
		return true;
	default:
		return false;
	}
}

static bool creates(enum mv_sc sc)
{
	return sc == MV_SC_mmap || sc == MV_SC_mmap2 || sc == MV_SC_mremap || sc == MV_SC_brk ||
	       sc == MV_SC_shmat || sc == MV_SC_ipc;
}

/* Could call c have made region r, placed where the kernel chose? */
static bool could_make(const struct as_call *c, const struct as_region *r, bool exact)
{
	uint64_t size = r->end - r->start;
	switch (c->sc) {
	case MV_SC_mmap:
	case MV_SC_mmap2: {
		bool anon = c->args[3] & MAP_ANONYMOUS_;
		bool shared = c->args[3] & MAP_SHARED_;
		if ((c->args[2] & 7) != r->prot || shared != r->shared)
			return false;
		/* Shared anonymous memory shows as "/dev/zero (deleted)". */
		bool region_anon =
		    r->kind == AS_ANON ||
		    (r->kind == AS_SHMEM && r->path && strcmp(r->path, "/dev/zero (deleted)") == 0);
		if (anon != region_anon)
			return false;
		uint64_t len = page_up(c->args[1]);
		return exact ? len == size : len <= size;
	}
	case MV_SC_mremap:
		return exact ? page_up(c->args[2]) == size : page_up(c->args[2]) <= size;
	case MV_SC_brk:
		return r->kind == AS_HEAP;
	case MV_SC_shmat:
	case MV_SC_ipc:
		return r->kind == AS_SHMEM;
	default:
		return false;
	}
}

static bool same_object(const struct as_region *a, const struct as_region *b)
{
	if (a->kind != b->kind || a->inode != b->inode || a->shared != b->shared)
		return false;
	if (a->kind == AS_FILE || (a->kind == AS_SHMEM && a->inode))
		return a->offset - b->offset == a->start - b->start;
	return true;
}

/* Origin carried from the previous snapshot, if r existed there. The
 * old regions are sorted: find the first that ends after r starts. */
static const struct as_region *ancestor(const struct as_model *old, const struct as_region *r)
{
	if (!old || !old->n)
		return NULL;
	size_t lo = 0, hi = old->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (old->r[mid].end <= r->start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < old->n && old->r[i].start < r->end; i++)
		if (same_object(&old->r[i], r))
			return &old->r[i];
	return NULL;
}

/* The newest unused call that could have made a region of this size
 * and shape (r gives the shape; size may span several regions). */
static long match_size(const struct as_log *log, const bool *used, const struct as_region *r,
		       uint64_t size, bool exact)
{
	struct as_region shape = *r;
	shape.end = shape.start + size;
	for (size_t i = 0; i < log->count; i++) {
		const struct as_call *c = nth_newest(log, i);
		uint64_t s, e;
		if (used[i] || !creates(c->sc) || call_range(c, &s, &e))
			continue;
		if (could_make(c, &shape, exact))
			return (long)i;
	}
	return -1;
}

static long match_fixed(const struct as_log *log, const struct as_region *r)
{
	for (size_t i = 0; i < log->count; i++) {
		const struct as_call *c = nth_newest(log, i);
		uint64_t s, e;
		if (creates(c->sc) && call_range(c, &s, &e) && overlaps(s, e, r->start, r->end))
			return (long)i;
	}
	return -1;
}

/* Two neighbouring regions that one mapping split by mprotect, mlock or
 * a partial munmap would leave: adjacent, same object, same sharing
 * (protection may differ). */
static bool same_mapping(const struct as_region *a, const struct as_region *b)
{
	return a->end == b->start && a->shared == b->shared && a->kind == b->kind &&
	       a->inode == b->inode &&
	       (a->kind != AS_FILE || b->offset - a->offset == a->end - a->start);
}

static long match_change(const struct as_log *log, const struct as_region *r)
{
	for (size_t i = 0; i < log->count; i++) {
		const struct as_call *c = nth_newest(log, i);
		uint64_t s, e;
		if (!creates(c->sc) && call_range(c, &s, &e) && overlaps(s, e, r->start, r->end))
			return (long)i;
	}
	return -1;
}

/* In the first snapshot after an exec, what the kernel's exec made: the
 * program's own mappings, the anonymous rest of its bss right after its
 * last file page (fs/binfmt_elf.c maps it with the segments), and the
 * special ones. The dynamic loader's mappings of libraries are mmap
 * calls. */
static bool made_by_exec(const struct as_model *m, size_t i, const char *exe)
{
	const struct as_region *r = &m->r[i], *prev = i ? &m->r[i - 1] : NULL;
	switch (r->kind) {
	case AS_STACK:
	case AS_VDSO:
	case AS_VVAR:
	case AS_VSYSCALL:
		return true;
	case AS_FILE:
		return exe && r->path && strcmp(r->path, exe) == 0;
	case AS_ANON:
		return exe && prev && prev->end == r->start && prev->kind == AS_FILE &&
		       prev->path && strcmp(prev->path, exe) == 0;
	default:
		return false;
	}
}

static void set_origin(struct as_region *r, const struct as_call *c)
{
	r->created = (struct as_origin){c->sc, c->time_ns};
}

void as_provenance(struct as_model *fresh, const struct as_model *old, const struct as_log *log,
		   uint64_t exec_ns, const char *exe)
{
	bool *used = xcalloc(AS_LOG_SIZE, sizeof(bool));
	/* run_end[i]: the last region of the run of pieces of one mapping
	 * that region i belongs to (computed once: runs can be 50,000 long). */
	size_t *run_end = xmalloc((fresh->n + 1) * sizeof(*run_end));
	for (size_t i = fresh->n; i-- > 0;) {
		bool joined = i + 1 < fresh->n && same_mapping(&fresh->r[i], &fresh->r[i + 1]);
		run_end[i] = joined ? run_end[i + 1] : i;
	}
	for (size_t i = 0; i < fresh->n; i++) {
		fresh->r[i].created.sc = fresh->r[i].changed.sc = MV_SC_UNKNOWN;
		fresh->r[i].created.time_ns = fresh->r[i].changed.time_ns = 0;
	}
	for (size_t i = 0; i < fresh->n; i++) {
		struct as_region *r = &fresh->r[i];
		if (r->created.sc != MV_SC_UNKNOWN)
			continue; /* set with its run */
		const struct as_region *o = exec_ns ? NULL : ancestor(old, r);
		long m;
		if (o) {
			r->created = o->created;
			r->changed = o->changed;
		} else if (exec_ns && made_by_exec(fresh, i, exe)) {
			r->created = (struct as_origin){MV_SC_execve, exec_ns};
		} else if ((m = match_fixed(log, r)) >= 0 ||
			   (m = match_size(log, used, r, r->end - r->start, true)) >= 0) {
			used[m] = true;
			set_origin(r, nth_newest(log, (size_t)m));
		} else {
			/* One mapping later split (mprotect of a guard page,
			 * mlock, partial munmap): match the whole run. */
			size_t j = run_end[i];
			uint64_t size = fresh->r[j].end - r->start;
			if ((m = match_size(log, used, r, size, true)) >= 0 ||
			    (m = match_size(log, used, r, r->end - r->start, false)) >= 0) {
				used[m] = true;
				for (size_t k = i; k <= j; k++)
					set_origin(&fresh->r[k], nth_newest(log, (size_t)m));
			}
		}
	}
	/* A piece that a logged mprotect (or mlock, madvise) cut out of a
	 * mapping has the origin of the piece next to it. */
	for (size_t i = 0; i < fresh->n; i++) {
		struct as_region *r = &fresh->r[i];
		if (r->created.sc != MV_SC_UNKNOWN || match_change(log, r) < 0)
			continue;
		if (i > 0 && same_mapping(&fresh->r[i - 1], r) &&
		    fresh->r[i - 1].created.sc != MV_SC_UNKNOWN)
			r->created = fresh->r[i - 1].created;
		else if (i + 1 < fresh->n && same_mapping(r, &fresh->r[i + 1]))
			r->created = fresh->r[i + 1].created;
	}
	for (size_t i = 0; i < fresh->n; i++) {
		struct as_region *r = &fresh->r[i];
		long m = match_change(log, r);
		if (m >= 0 && nth_newest(log, (size_t)m)->time_ns >= r->created.time_ns)
			r->changed = (struct as_origin){nth_newest(log, (size_t)m)->sc,
							nth_newest(log, (size_t)m)->time_ns};
	}
	free(run_end);
	free(used);
}
