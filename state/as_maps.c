/* The address-space model's storage, and its regions from the kernel's
 * (state/procparse.c parses the text). */
#include "state/as.h"
#include "common/util.h"
#include "state/procparse.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[AS_KIND_COUNT] = {
    "anon", "file", "shmem", "heap", "stack", "vdso", "vvar", "vsyscall", "other",
};

const char *as_kind_name(enum as_kind k)
{
	return k < AS_KIND_COUNT ? kind_names[k] : "unknown";
}

void as_model_init(struct as_model *m)
{
	memset(m, 0, sizeof(*m));
}

void as_model_free(struct as_model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->r[i].path);
	free(m->r);
	as_model_init(m);
}

struct as_region *as_model_push(struct as_model *m, const struct as_region *r)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->r = xrealloc(m->r, m->cap * sizeof(*m->r));
	}
	m->r[m->n] = *r;
	return &m->r[m->n++];
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum as_kind as_classify(const char *path, bool shared, uint64_t inode)
{
	if (!path || !*path)
		return shared ? AS_SHMEM : AS_ANON;
	if (path[0] == '[') {
		if (strcmp(path, "[heap]") == 0)
			return AS_HEAP;
		if (starts_with(path, "[stack"))
			return AS_STACK;
		if (strcmp(path, "[vdso]") == 0)
			return AS_VDSO;
		if (starts_with(path, "[vvar"))
			return AS_VVAR;
		if (strcmp(path, "[vsyscall]") == 0)
			return AS_VSYSCALL;
		if (starts_with(path, "[anon_shmem:"))
			return AS_SHMEM;
		if (starts_with(path, "[anon:"))
			return shared ? AS_SHMEM : AS_ANON;
		return AS_OTHER;
	}
	/* Shared anonymous memory is a shmem file the kernel names
	 * "/dev/zero (deleted)"; memfds are "/memfd:NAME"; SysV segments
	 * "/SYSV<key>". */
	if (starts_with(path, "/memfd:") || starts_with(path, "/SYSV"))
		return AS_SHMEM;
	if (shared && (strcmp(path, "/dev/zero (deleted)") == 0 || starts_with(path, "/dev/shm/")))
		return AS_SHMEM;
	return AS_FILE;
}

int as_model_add_vma(void *model, const struct proc_vma *v)
{
	struct as_region r;
	memset(&r, 0, sizeof(r));
	r.start = v->start;
	r.end = v->end;
	r.offset = v->offset;
	r.inode = v->inode;
	r.dev_major = v->dev_major;
	r.dev_minor = v->dev_minor;
	r.prot = (v->r ? AS_PROT_READ : 0) | (v->w ? AS_PROT_WRITE : 0) | (v->x ? AS_PROT_EXEC : 0);
	r.shared = v->shared;
	if (v->name_len) {
		r.path = xmalloc(v->name_len + 1);
		memcpy(r.path, v->name, v->name_len);
		r.path[v->name_len] = '\0';
	}
	r.kind = as_classify(r.path, r.shared, r.inode);
	r.created.sc = r.changed.sc = MV_SC_UNKNOWN;
	as_model_push(model, &r);
	return 0;
}

int as_parse_maps(const char *text, struct as_model *m)
{
	as_model_free(m);
	int rc = parse_maps(text, 0, UINT64_MAX, as_model_add_vma, m);
	as_model_totals(m);
	return rc;
}

static int set_rss(void *arg, uint64_t start, uint64_t rss)
{
	struct as_model *m = arg;
	long i = as_find(m, start);
	if (i >= 0)
		m->r[i].committed = rss;
	return 0;
}

int as_apply_smaps_rss(const char *text, struct as_model *m)
{
	int rc = parse_smaps_rss(text, set_rss, m);
	as_model_totals(m);
	return rc;
}

void as_model_totals(struct as_model *m)
{
	m->mapped = m->committed = 0;
	for (size_t i = 0; i < m->n; i++) {
		m->mapped += m->r[i].end - m->r[i].start;
		m->committed += m->r[i].committed;
	}
}

long as_find(const struct as_model *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < m->r[mid].start)
			hi = mid;
		else if (addr >= m->r[mid].end)
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

int as_range_cmp(const void *a, const void *b)
{
	const struct as_range *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

size_t as_ranges_merge(struct as_range *v, size_t n)
{
	mv_qsort(v, n, sizeof(*v), as_range_cmp);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (out && v[i].start <= v[out - 1].end)
			v[out - 1].end = MV_MAX(v[out - 1].end, v[i].end);
		else
			v[out++] = v[i];
	}
	return out;
}

void as_apply_resident(struct as_model *m, const struct as_range *runs, size_t n)
{
	size_t j = 0;
	for (size_t i = 0; i < m->n; i++) {
		struct as_region *r = &m->r[i];
		r->committed = 0;
		/* Runs are sorted; skip those wholly before this region. */
		while (j < n && runs[j].end <= r->start)
			j++;
		for (size_t k = j; k < n && runs[k].start < r->end; k++) {
			uint64_t s = MV_MAX(runs[k].start, r->start);
			uint64_t e = MV_MIN(runs[k].end, r->end);
			if (e > s)
				r->committed += e - s;
		}
	}
	as_model_totals(m);
}
