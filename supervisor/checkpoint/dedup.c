/* A checkpoint's pages shared copy-on-write, stored once
 * (supervisor/checkpoint/job.h, docs/image-format.md "Extents").
 *
 * After a fork, parent and children map the same physical pages until
 * one writes. A page of process i whose frame (pagemap's PFN, readable
 * with CAP_SYS_ADMIN) is the frame of a page another process planned
 * before is the same page: its extent refers to the bytes the first one
 * stores. Frame numbers are only a hint: a page may move (compaction,
 * khugepaged) while the tree is stopped and its old frame be reused. So
 * the copy still reads every referring page (no write: one read, as
 * before, and no disk) and checksums it, and once the writers have
 * checksummed the bytes referred to, each page's checksum must be theirs
 * (ckpt_dedup_check); one that is not makes the checkpoint start again
 * storing every page of every process. Every process is stopped: no
 * page changes between the two reads. */
#include "common/crc32c.h"
#include "common/fault.h"
#include "common/util.h"
#include "supervisor/checkpoint/job.h"

#include <stdio.h>
#include <string.h>

#define PG    4096ull
#define CHUNK 512 /* pages compared at once: 2 MiB each side */

void ckpt_dedup_start(struct ckpt *c)
{
	struct dedup *dd = &c->dd;
	size_t alive = 0;
	for (size_t i = 0; i < c->n; i++)
		alive += !c->p[i].pt.gone;
	if (dd->off_why || alive < 2)
		return;
	dd->on = true;
	dd->cap = 1024;
	dd->tab = xcalloc(dd->cap, sizeof(*dd->tab));
	dd->pfn = xmalloc(CHUNK * sizeof(*dd->pfn));
	dd->a = xmalloc(IMG_EXTENT_MAX);
}

void ckpt_dedup_free(struct dedup *dd)
{
	free(dd->tab);
	free(dd->pairs);
	free(dd->pfn);
	free(dd->a);
	free(dd->sums);
	dd->tab = NULL;
	dd->pairs = NULL;
	dd->pfn = NULL;
	dd->a = NULL;
	dd->sums = NULL;
}

static size_t slot_of(const struct dedup *dd, uint64_t pfn)
{
	uint64_t h = pfn * 0x9E3779B97F4A7C15ull;
	size_t k = (size_t)(h >> 20) & (dd->cap - 1);
	while (dd->tab[k].pfn && dd->tab[k].pfn != pfn)
		k = (k + 1) & (dd->cap - 1);
	return k;
}

static const struct dedup_slot *lookup(const struct dedup *dd, uint64_t pfn)
{
	size_t k = slot_of(dd, pfn);
	return dd->tab[k].pfn ? &dd->tab[k] : NULL;
}

static void insert(struct dedup *dd, struct dedup_slot s)
{
	if (2 * (dd->used + 1) > dd->cap) {
		struct dedup_slot *old = dd->tab;
		size_t n = dd->cap;
		dd->cap *= 2;
		dd->tab = xcalloc(dd->cap, sizeof(*dd->tab));
		for (size_t k = 0; k < n; k++)
			if (old[k].pfn)
				dd->tab[slot_of(dd, old[k].pfn)] = old[k];
		free(old);
	}
	size_t k = slot_of(dd, s.pfn);
	if (!dd->tab[k].pfn) {
		dd->tab[k] = s;
		dd->used++;
	}
}

static void add_pair(struct dedup *dd, size_t proc, size_t src)
{
	for (size_t k = dd->n_pairs; k-- > 0;)
		if (dd->pairs[k].proc == proc && dd->pairs[k].src == src)
			return;
	if (dd->n_pairs == dd->cap_pairs)
		dd->pairs =
		    xrealloc(dd->pairs, (dd->cap_pairs = dd->cap_pairs ? 2 * dd->cap_pairs : 8) *
					    sizeof(*dd->pairs));
	dd->pairs[dd->n_pairs++] = (struct dedup_pair){proc, src};
}

/* The extents of one region being built, page by page in address order. */
struct emit {
	struct ckpt *c;
	size_t proc;
	struct img_region *r;
	bool pending; /* pages [ns, next) to store, at c->off on */
	uint64_t ns;
	bool ref_open; /* the last extent refers and may grow */
};

static void flush(struct emit *m, uint64_t end)
{
	if (m->pending)
		img_extents_add_run(&m->r->ext, m->ns, end, &m->c->off);
	m->pending = false;
}

static void store(struct emit *m, uint64_t addr, uint64_t pfn)
{
	m->ref_open = false;
	if (!m->pending) {
		m->pending = true;
		m->ns = addr;
	}
	if (pfn)
		insert(&m->c->dd, (struct dedup_slot){pfn, m->c->off + (addr - m->ns), m->proc});
}

static void refer(struct emit *m, uint64_t addr, const struct dedup_slot *s)
{
	flush(m, addr);
	struct img_extents *x = &m->r->ext;
	struct img_extent *e = x->n ? &x->v[x->n - 1] : NULL;
	if (m->ref_open && e && e->addr + img_extent_len(e) == addr &&
	    e->off + img_extent_len(e) == s->off && addr % IMG_EXTENT_MAX) {
		e->pages++;
	} else {
		if (x->n == x->cap)
			x->v = xrealloc(x->v, (x->cap = x->cap ? 2 * x->cap : 16) * sizeof(*x->v));
		e = &x->v[x->n++];
		*e = (struct img_extent){.addr = addr, .off = s->off, .pages = 1, .crc = 0};
		m->ref_open = true;
	}
	m->c->dd.ref_bytes += PG;
	add_pair(&m->c->dd, m->proc, s->proc);
}

/* Pages [at, end) of the region (at most CHUNK). */
static int chunk(struct emit *m, struct pagemap *pm, uint64_t at, uint64_t end)
{
	struct dedup *dd = &m->c->dd;
	size_t n = (size_t)((end - at) / PG);
	int rc = pagemap_shared_pfns(pm, at, end, dd->pfn, &dd->hidden);
	if (rc < 0)
		return rc;
	struct dedup_slot src[CHUNK];
	for (size_t k = 0; k < n; k++) {
		/* Another process's: the format lets only extents of
		 * different processes share bytes (a KSM page mapped twice by
		 * one process is stored twice). Looked up before any insert:
		 * an insert may move the table. */
		const struct dedup_slot *s = dd->pfn[k] ? lookup(dd, dd->pfn[k]) : NULL;
		src[k] = s && s->proc != m->proc ? *s : (struct dedup_slot){0};
	}
	for (size_t k = 0; k < n; k++) {
		if (src[k].pfn)
			refer(m, at + k * PG, &src[k]);
		else
			store(m, at + k * PG, dd->pfn[k]);
	}
	return 0;
}

int ckpt_dedup_region(struct ckpt *c, size_t i, struct pagemap *pm, struct img_region *r,
		      const struct as_range *runs, size_t n)
{
	struct emit m = {.c = c, .proc = i, .r = r};
	for (size_t k = 0; k < n; k++) {
		for (uint64_t at = runs[k].start; at < runs[k].end;) {
			uint64_t end = MV_MIN(runs[k].end, at + CHUNK * PG);
			int rc = chunk(&m, pm, at, end);
			if (rc < 0)
				return rc;
			at = end;
		}
		flush(&m, runs[k].end);
		m.ref_open = false;
	}
	return 0;
}

int ckpt_dedup_read(struct ckpt *c, size_t i, struct img_extent *e)
{
	struct dedup *dd = &c->dd;
	size_t len = img_extent_len(e);
	uint64_t t0 = mv_now_ns();
	int rc = c->p[i].died ? -ESRCH : ckpt_read_mem(&c->p[i], e->addr, dd->a, len);
	if (rc == -ESRCH || (rc < 0 && ckpt_proc_dead(&c->p[i]))) {
		c->p[i].died = true; /* its record is forgotten (ckpt_settle) */
		return 0;
	}
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_INTERNAL,
				 "reading %zu bytes of process %d at %#llx: %s", len,
				 c->p[i].pt.pid, (unsigned long long)e->addr, strerror(-rc));
	if (dd->n_sums + e->pages > dd->cap_sums)
		dd->sums = xrealloc(
		    dd->sums, (dd->cap_sums = MV_MAX(2 * dd->cap_sums, dd->n_sums + e->pages)) *
				  sizeof(*dd->sums));
	uint32_t crc = 0;
	for (uint32_t k = 0; k < e->pages; k++) {
		uint32_t pc = crc32c(dd->a + k * PG, PG);
		dd->sums[dd->n_sums++] = (struct dedup_sum){e->off + k * PG, pc};
		crc = k ? crc32c_combine_page(crc, pc) : pc;
	}
	e->crc = crc;
	dd->verify_ns += mv_now_ns() - t0;
	return 0;
}

int ckpt_dedup_check(struct ckpt *c)
{
	struct dedup *dd = &c->dd;
	for (size_t k = 0; k < dd->n_pairs; k++) {
		const struct dedup_pair *p = &dd->pairs[k];
		if (c->p[p->src].died && !c->p[p->proc].died) {
			snprintf(dd->why, sizeof(dd->why),
				 "process %d, whose pages others share, was killed during the copy",
				 c->p[p->src].pt.pid);
			return -ESTALE;
		}
	}
	/* The writers have checksummed every page of the file. */
	for (size_t k = 0; k < dd->n_sums; k++) {
		uint64_t page = (dd->sums[k].off - IMG_HEADER_SIZE) / PG;
		if (c->im.sums[page] != dd->sums[k].crc || (k == 0 && fault_hit("dedup_differs"))) {
			snprintf(dd->why, sizeof(dd->why),
				 "a page at pages offset %#llx shared by the page frame number "
				 "differs from its copy (the frame was reused)",
				 (unsigned long long)dd->sums[k].off);
			return -ESTALE;
		}
	}
	return 0;
}

json_t *ckpt_dedup_json(const struct ckpt *c)
{
	const struct dedup *dd = &c->dd;
	const char *why = NULL;
	if (dd->off_why)
		why = dd->off_why;
	else if (!dd->on)
		why = "one process";
	else if (dd->hidden && !dd->ref_bytes)
		why = "page frame numbers are hidden (pagemap shows them with CAP_SYS_ADMIN)";
	if (why)
		return json_pack("{s:b, s:s}", "on", 0, "why", why);
	return json_pack("{s:b, s:I, s:I}", "on", 1, "bytes", (json_int_t)dd->ref_bytes, "read_ns",
			 (json_int_t)dd->verify_ns);
}
