/* The image format in memory: building, extent math, totals, the pages
 * header, layout matching. The manifest's text form is image_manifest.c;
 * docs/image-format.md is the reference. */
#include "state/image.h"
#include "common/crc32c.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

static const char *const content_names[IMG_CONTENT_COUNT] = {"private", "shared", "file",
							     "skipped"};
static const char *const coverage_names[IMG_COVER_COUNT] = {"whole", "mapped"};

const char *img_content_name(enum img_content c)
{
	return c < IMG_CONTENT_COUNT ? content_names[c] : "unknown";
}

const char *img_coverage_name(enum img_coverage c)
{
	return c < IMG_COVER_COUNT ? coverage_names[c] : "unknown";
}

void img_init(struct img *im)
{
	memset(im, 0, sizeof(*im));
	im->version = IMG_VERSION;
}

static void proc_clear(struct img_proc *p)
{
	for (size_t i = 0; i < p->n_t; i++)
		for (size_t k = 0; k < p->t[i].n_regs; k++)
			free(p->t[i].regs[k].data);
	free(p->t);
	for (size_t i = 0; i < p->n_r; i++) {
		free(p->r[i].path);
		free(p->r[i].ext.v);
	}
	free(p->r);
	p->t = NULL;
	p->r = NULL;
	p->n_t = p->cap_t = p->n_r = p->cap_r = 0;
}

static void proc_free(struct img_proc *p)
{
	proc_clear(p);
	free(p->exe);
	free(p->cmdline);
}

void img_proc_forget(struct img_proc *p)
{
	proc_clear(p);
	p->gone = true;
}

void img_free(struct img *im)
{
	for (size_t i = 0; i < im->n_p; i++)
		proc_free(&im->p[i]);
	free(im->p);
	for (size_t i = 0; i < im->n_o; i++) {
		free(im->o[i].path);
		free(im->o[i].ext.v);
	}
	free(im->o);
	free(im->sums);
	img_init(im);
}

/* Grow *v (of *cap elements of size sz) to hold one more. */
static void grow(void **v, size_t n, size_t *cap, size_t sz)
{
	if (n < *cap)
		return;
	*cap = *cap ? *cap * 2 : 8;
	*v = xrealloc(*v, *cap * sz);
}

struct img_proc *img_add_proc(struct img *im, pid_t pid)
{
	grow((void **)&im->p, im->n_p, &im->cap_p, sizeof(*im->p));
	struct img_proc *p = &im->p[im->n_p++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	return p;
}

struct img_thread *img_add_thread(struct img_proc *p, pid_t tid)
{
	grow((void **)&p->t, p->n_t, &p->cap_t, sizeof(*p->t));
	struct img_thread *t = &p->t[p->n_t++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

void img_thread_add_regset(struct img_thread *t, const char *name, uint32_t note, const void *data,
			   size_t len)
{
	if (t->n_regs >= IMG_MAX_REGSETS)
		return;
	struct img_regset *r = &t->regs[t->n_regs++];
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->note = note;
	r->data = xmalloc(len);
	memcpy(r->data, data, len);
	r->len = len;
}

struct img_region *img_add_region(struct img_proc *p, const struct as_region *src)
{
	grow((void **)&p->r, p->n_r, &p->cap_r, sizeof(*p->r));
	struct img_region *r = &p->r[p->n_r++];
	memset(r, 0, sizeof(*r));
	r->start = src->start;
	r->end = src->end;
	r->offset = src->offset;
	r->inode = src->inode;
	r->dev_major = src->dev_major;
	r->dev_minor = src->dev_minor;
	r->prot = src->prot;
	r->shared = src->shared;
	r->kind = src->kind;
	r->path = src->path;
	r->committed = src->committed;
	r->object = -1;
	return r;
}

struct img_object *img_add_object(struct img *im, uint64_t inode, uint32_t dev_major,
				  uint32_t dev_minor, const char *path)
{
	grow((void **)&im->o, im->n_o, &im->cap_o, sizeof(*im->o));
	struct img_object *o = &im->o[im->n_o++];
	memset(o, 0, sizeof(*o));
	o->inode = inode;
	o->dev_major = dev_major;
	o->dev_minor = dev_minor;
	o->path = path ? xstrdup(path) : NULL;
	return o;
}

long img_find_object(const struct img *im, uint64_t inode, uint32_t dev_major, uint32_t dev_minor)
{
	for (size_t i = 0; i < im->n_o; i++)
		if (im->o[i].inode == inode && im->o[i].dev_major == dev_major &&
		    im->o[i].dev_minor == dev_minor)
			return (long)i;
	return -1;
}

size_t img_extents_add_run(struct img_extents *x, uint64_t start, uint64_t end, uint64_t *off)
{
	size_t added = 0;
	while (start < end) {
		/* Up to the next 2 MiB boundary: an extent never straddles a
		 * huge page, so reload can place it with one 2 MiB copy. */
		uint64_t block_end = (start | (IMG_EXTENT_MAX - 1)) + 1;
		uint64_t e = MV_MIN(end, block_end);
		grow((void **)&x->v, x->n, &x->cap, sizeof(*x->v));
		x->v[x->n++] = (struct img_extent){
		    .addr = start,
		    .off = *off,
		    .pages = (uint32_t)((e - start) / IMG_PAGE),
		};
		*off += e - start;
		start = e;
		added++;
	}
	return added;
}

const struct img_extent *img_extents_find(const struct img_extents *x, uint64_t addr)
{
	size_t lo = 0, hi = x->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct img_extent *e = &x->v[mid];
		if (addr < e->addr)
			hi = mid;
		else if (addr >= e->addr + img_extent_len(e))
			lo = mid + 1;
		else
			return e;
	}
	return NULL;
}

void img_extents_within(const struct img_extents *x, const struct as_range *runs, size_t n,
			struct img_extents *out)
{
	size_t r = 0;
	for (size_t i = 0; i < x->n; i++) {
		const struct img_extent *e = &x->v[i];
		uint64_t end = e->addr + img_extent_len(e);
		while (r < n && runs[r].end <= e->addr)
			r++;
		for (size_t k = r; k < n && runs[k].start < end; k++) {
			uint64_t a = MV_MAX(runs[k].start, e->addr), b = MV_MIN(runs[k].end, end);
			grow((void **)&out->v, out->n, &out->cap, sizeof(*out->v));
			out->v[out->n++] =
			    (struct img_extent){.addr = a,
						.off = e->off + (a - e->addr),
						.pages = (uint32_t)((b - a) / IMG_PAGE)};
		}
	}
}

void img_ranges_subtract(const struct as_range *have, size_t n, uint64_t start, uint64_t end,
			 struct as_range **out, size_t *n_out, size_t *cap_out)
{
	uint64_t at = start;
	for (size_t i = 0; i < n && at < end; i++) {
		if (have[i].end <= at)
			continue;
		if (have[i].start >= end)
			break;
		if (have[i].start > at) {
			grow((void **)out, *n_out, cap_out, sizeof(**out));
			(*out)[(*n_out)++] = (struct as_range){at, have[i].start};
		}
		at = MV_MAX(at, have[i].end);
	}
	if (at < end) {
		grow((void **)out, *n_out, cap_out, sizeof(**out));
		(*out)[(*n_out)++] = (struct as_range){at, end};
	}
}

uint64_t img_extents_bytes(const struct img_extents *x)
{
	uint64_t b = 0;
	for (size_t i = 0; i < x->n; i++)
		b += img_extent_len(&x->v[i]);
	return b;
}

void img_totals(const struct img *im, struct img_totals *t)
{
	memset(t, 0, sizeof(*t));
	t->processes = im->n_p;
	t->objects = im->n_o;
	for (size_t i = 0; i < im->n_p; i++) {
		const struct img_proc *p = &im->p[i];
		t->gone += p->gone;
		t->threads += p->n_t;
		t->regions += p->n_r;
		for (size_t k = 0; k < p->n_r; k++) {
			const struct img_region *r = &p->r[k];
			uint64_t b = img_extents_bytes(&r->ext);
			t->extents += r->ext.n;
			t->data_bytes += b;
			t->committed += r->committed;
			if (r->kind < AS_KIND_COUNT)
				t->by_kind[r->kind] += b;
		}
	}
	for (size_t i = 0; i < im->n_o; i++) {
		uint64_t b = img_extents_bytes(&im->o[i].ext);
		t->extents += im->o[i].ext.n;
		t->data_bytes += b;
		t->shared_bytes += b;
		t->by_kind[AS_SHMEM] += b;
	}
}

struct span {
	uint64_t off, len;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

static void add_spans(const struct img_extents *x, struct span *v, size_t *n)
{
	for (size_t i = 0; i < x->n; i++)
		v[(*n)++] = (struct span){x->v[i].off, img_extent_len(&x->v[i])};
}

uint64_t img_stored_bytes(const struct img *im)
{
	size_t cap = 0, n = 0;
	for (size_t i = 0; i < im->n_p; i++)
		for (size_t k = 0; k < im->p[i].n_r; k++)
			cap += im->p[i].r[k].ext.n;
	for (size_t k = 0; k < im->n_o; k++)
		cap += im->o[k].ext.n;
	struct span *v = xcalloc(cap + 1, sizeof(*v));
	for (size_t i = 0; i < im->n_p; i++)
		for (size_t k = 0; k < im->p[i].n_r; k++)
			add_spans(&im->p[i].r[k].ext, v, &n);
	for (size_t k = 0; k < im->n_o; k++)
		add_spans(&im->o[k].ext, v, &n);
	mv_qsort(v, n, sizeof(*v), cmp_span);
	uint64_t bytes = 0, end = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t e = v[i].off + v[i].len;
		if (e > end) {
			bytes += e - MV_MAX(v[i].off, end);
			end = e;
		}
	}
	free(v);
	return bytes;
}

/* ---- the pages header ----------------------------------------------- */

static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static uint64_t get64(const unsigned char *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

/* The pages file is little-endian, its page checksums written as they
 * are in memory. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the image format is little-endian");

enum {
	H_MAGIC = 0,
	H_VERSION = 8,
	H_SIZE = 12,
	H_ID = 16,
	H_PAGES_SIZE = 48,
	H_DATA = 56,
	H_MANIFEST_SIZE = 64,
	H_MANIFEST_CRC = 72,
	H_PAGE = 76,
	H_CRC = 80, /* v1: CRC32C of bytes [0, H_CRC); v2: of the whole header, this field as 0 */
	H_SUMS_OFF = 84,
	H_SUMS_CRC = 92,
};

static uint32_t header_crc(const unsigned char *b, uint32_t version)
{
	static const unsigned char zero[4];
	if (version < 2)
		return crc32c(b, H_CRC);
	uint32_t c = crc32c_update(crc32c(b, H_CRC), zero, 4);
	return crc32c_update(c, b + H_CRC + 4, IMG_HEADER_SIZE - H_CRC - 4);
}

uint32_t img_sums_crc(const void *table, uint64_t sums_off)
{
	static const unsigned char zero[64];
	uint64_t n = img_sums_count(sums_off) * 4, pad = img_sums_bytes(sums_off) - n;
	uint32_t c = crc32c(table, n);
	for (; pad; pad -= MV_MIN(pad, sizeof(zero)))
		c = crc32c_update(c, zero, MV_MIN(pad, sizeof(zero)));
	return c;
}

void img_header_encode(const struct img_header *h, void *buf)
{
	unsigned char *b = buf;
	memset(b, 0, IMG_HEADER_SIZE);
	memcpy(b + H_MAGIC, IMG_MAGIC, 8);
	put32(b + H_VERSION, h->version);
	put32(b + H_SIZE, IMG_HEADER_SIZE);
	memcpy(b + H_ID, h->id, 32);
	put64(b + H_PAGES_SIZE, h->pages_size);
	put64(b + H_DATA, h->data_bytes);
	put64(b + H_MANIFEST_SIZE, h->manifest_size);
	put32(b + H_MANIFEST_CRC, h->manifest_crc);
	put32(b + H_PAGE, IMG_PAGE);
	if (h->version >= 2) {
		put64(b + H_SUMS_OFF, h->sums_off);
		put32(b + H_SUMS_CRC, h->sums_crc);
	}
	put32(b + H_CRC, header_crc(b, h->version));
}

int img_header_decode(const void *buf, struct img_header *h, struct mv_err *err)
{
	const unsigned char *b = buf;
	if (memcmp(b + H_MAGIC, IMG_MAGIC, 8) != 0)
		return mv_err_set(err, -EINVAL, NULL,
				  "pages: not a memvisor pages file (bad magic)");
	memset(h, 0, sizeof(*h));
	h->version = get32(b + H_VERSION);
	if (h->version < IMG_VERSION_MIN || h->version > IMG_VERSION)
		return mv_err_set(err, -EINVAL, NULL,
				  "pages: format version %u, this memvisor reads %u to %u",
				  h->version, IMG_VERSION_MIN, IMG_VERSION);
	uint32_t want = get32(b + H_CRC), got = header_crc(b, h->version);
	if (want != got)
		return mv_err_set(err, -EINVAL, NULL,
				  "pages: header checksum mismatch (stored %08x, computed %08x)",
				  want, got);
	if (get32(b + H_SIZE) != IMG_HEADER_SIZE || get32(b + H_PAGE) != IMG_PAGE)
		return mv_err_set(err, -EINVAL, NULL, "pages: unexpected header or page size");
	memcpy(h->id, b + H_ID, 32);
	h->id[32] = '\0';
	h->pages_size = get64(b + H_PAGES_SIZE);
	h->data_bytes = get64(b + H_DATA);
	h->manifest_size = get64(b + H_MANIFEST_SIZE);
	h->manifest_crc = get32(b + H_MANIFEST_CRC);
	if (h->version >= 2) {
		h->sums_off = get64(b + H_SUMS_OFF);
		h->sums_crc = get32(b + H_SUMS_CRC);
	}
	return 0;
}

/* ---- layout matching -------------------------------------------------- */

static bool same_backing(const struct img_region *r, const struct as_region *l)
{
	if (r->prot != l->prot || r->shared != l->shared || r->inode != l->inode ||
	    r->dev_major != l->dev_major || r->dev_minor != l->dev_minor)
		return false;
	/* The file offset at the recorded start, for a region that has
	 * grown or been split since. */
	if (r->inode && r->offset != l->offset + (r->start - l->start))
		return false;
	return true;
}

int img_match_layout(const struct img_proc *p, const struct as_model *live, struct mv_err *err)
{
	for (size_t i = 0; i < p->n_r; i++) {
		const struct img_region *r = &p->r[i];
		if (r->content != IMG_PRIVATE && r->content != IMG_SHARED)
			continue;
		long k = as_find(live, r->start);
		const struct as_region *l = k >= 0 ? &live->r[k] : NULL;
		if (!l || l->end < r->end) {
			mv_err_set(
			    err, 0, NULL,
			    "process %d: region %#llx-%#llx (%s) is no longer mapped as a whole",
			    p->pid, (unsigned long long)r->start, (unsigned long long)r->end,
			    as_kind_name(r->kind));
			return -ESTALE;
		}
		if (!same_backing(r, l)) {
			mv_err_set(
			    err, 0, NULL,
			    "process %d: region %#llx-%#llx (%s) has changed (now %#llx-%#llx, %s)",
			    p->pid, (unsigned long long)r->start, (unsigned long long)r->end,
			    as_kind_name(r->kind), (unsigned long long)l->start,
			    (unsigned long long)l->end, as_kind_name(l->kind));
			return -ESTALE;
		}
	}
	return 0;
}

/* ---- base64, ids ------------------------------------------------------ */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *img_b64_encode(const void *data, size_t len)
{
	const unsigned char *s = data;
	char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i = 0;
	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = b64[(v >> 6) & 63];
		*o++ = b64[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < len ? (uint32_t)s[i + 1] << 8 : 0);
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

long img_b64_decode(const char *s, size_t slen, void *out, size_t max)
{
	unsigned char *o = out;
	size_t n = 0;
	if (slen % 4)
		return -1;
	for (size_t i = 0; i < slen; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == slen && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_value(s[i + k])) < 0) {
				return -1;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		for (int k = 0; k < 3 - pad; k++) {
			if (n >= max)
				return -1;
			o[n++] = (unsigned char)(w >> (16 - 8 * k));
		}
	}
	return (long)n;
}

void img_new_id(char id[33])
{
	unsigned char r[16];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		/* No entropy source: time and pid still tell images apart. */
		uint64_t a = mv_wall_ns(), b = (uint64_t)getpid() << 32 ^ mv_now_ns();
		memcpy(r, &a, 8);
		memcpy(r + 8, &b, 8);
	}
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", r[i]);
}
