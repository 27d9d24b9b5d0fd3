/* A process's regions against the mark's (supervisor/rollback/mark.h):
 * pure, no system call (tests/unit/test_rollback.c). */
#include "common/util.h"
#include "supervisor/rollback/mark.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rb_same_mapping(const struct rb_region *a, const struct rb_region *b, uint64_t addr)
{
	if (a->shared != b->shared || a->special != b->special || a->inode != b->inode ||
	    a->dev_major != b->dev_major || a->dev_minor != b->dev_minor)
		return false;
	if (a->special)
		return strcmp(a->name, b->name) == 0;
	if (a->inode == 0 && !a->shared)
		return true; /* anonymous private: the heap, stacks, mmap */
	return a->offset + (addr - a->start) == b->offset + (addr - b->start);
}

const struct rb_region *rb_region_at(const struct rb_region *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].end <= addr)
			lo = mid + 1;
		else if (v[mid].start > addr)
			hi = mid;
		else
			return &v[mid];
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void add_change(struct rb_change **out, size_t *n, size_t *cap, enum rb_fix fix,
		       uint64_t start, uint64_t end, const struct rb_region *was)
{
	if (*n) {
		struct rb_change *l = &(*out)[*n - 1];
		if (l->fix == fix && l->end == start && l->was == was) {
			l->end = end;
			return;
		}
	}
	if (*n == *cap)
		*out = xrealloc(*out, (*cap = *cap ? *cap * 2 : 16) * sizeof(**out));
	(*out)[(*n)++] = (struct rb_change){fix, start, end, was};
}

/* Every boundary of both layouts cuts the address space into pieces; each
 * piece is mapped in the mark, now, in both (the same mapping or not,
 * with the same protection or not), or in neither. */
void rb_layout_diff(const struct rb_mark *m, const struct rb_region *now, size_t n_now,
		    struct rb_change **out, size_t *n)
{
	size_t nb = 2 * (m->n_r + n_now), k = 0, cap = 0;
	uint64_t *b = xmalloc((nb ? nb : 1) * sizeof(*b));
	for (size_t i = 0; i < m->n_r; i++) {
		b[k++] = m->r[i].start;
		b[k++] = m->r[i].end;
	}
	for (size_t i = 0; i < n_now; i++) {
		b[k++] = now[i].start;
		b[k++] = now[i].end;
	}
	qsort(b, k, sizeof(*b), cmp_u64);
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i + 1 < k; i++) {
		uint64_t s = b[i], e = b[i + 1];
		if (s == e)
			continue;
		const struct rb_region *was = rb_region_at(m->r, m->n_r, s);
		const struct rb_region *is = rb_region_at(now, n_now, s);
		if (!was && !is)
			continue;
		if (is && (!was || !rb_same_mapping(was, is, s))) {
			add_change(out, n, &cap, RB_UNMAP, s, e, NULL);
			is = NULL;
		}
		if (!is && was)
			add_change(out, n, &cap, RB_MAP, s, e, was);
		else if (!is)
			continue;
		else if (was->r != is->r || was->w != is->w || was->x != is->x)
			add_change(out, n, &cap, RB_PROTECT, s, e, was);
	}
	free(b);
}

uint64_t rb_heap_end(const struct rb_region *v, size_t n)
{
	uint64_t end = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].name, "[heap]") == 0)
			end = MV_MAX(end, v[i].end);
	return end;
}

void rb_describe(const struct rb_region *r, uint64_t start, uint64_t end, char *buf, size_t len)
{
	const char *name = r && r->name[0] ? r->name : "anonymous";
	snprintf(buf, len, "%#llx-%#llx (%s)", (unsigned long long)start, (unsigned long long)end,
		 name);
}
