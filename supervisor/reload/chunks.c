/* The chunk map of an evicted space: image pages still owed, at their
 * current addresses (supervisor/reload/space.h). */
#include "supervisor/reload/space.h"
#include "common/util.h"

#include <string.h>

/* The first chunk ending after addr. */
static size_t lower_bound(const struct evspace *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n_ch;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ev_chunk_end(&s->ch[mid]) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t chunks_index_at(const struct evspace *s, uint64_t addr)
{
	size_t i = lower_bound(s, addr);
	return i < s->n_ch && s->ch[i].addr == addr ? i : s->n_ch;
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
	s->split = true;
}

uint64_t chunks_owed_in_locked(const struct evspace *s, const struct ev_chunk *c)
{
	uint64_t n = 0;
	for (uint32_t p = c->first; p < c->first + c->n; p++)
		n += !ev_page_loaded(&s->ext[c->ext], p);
	return n * PG;
}

/* munmap, madvise(DONTNEED/FREE): the image no longer owes these pages. */
void chunks_drop_locked(struct evspace *s, uint64_t start, uint64_t end)
{
	split_at(s, start);
	split_at(s, end);
	size_t a = lower_bound(s, start), b = a;
	while (b < s->n_ch && s->ch[b].addr < end) {
		uint64_t o = chunks_owed_in_locked(s, &s->ch[b]);
		s->owed -= MV_MIN(o, s->owed);
		b++;
	}
	memmove(&s->ch[a], &s->ch[b], (s->n_ch - b) * sizeof(*s->ch));
	s->n_ch -= b - a;
}

/* Remove [start, end) ranges of v from the chunk map (fork exclusions). */
void chunks_drop_ranges(struct evspace *s, const struct as_range *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		chunks_drop_locked(s, v[i].start, v[i].end);
}

static int cmp_chunk(const void *x, const void *y)
{
	const struct ev_chunk *a = x, *b = y;
	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

void chunks_sort(struct evspace *s)
{
	mv_qsort(s->ch, s->n_ch, sizeof(*s->ch), cmp_chunk);
}

/* mremap moved [from, from+len) to to (mm/mremap.c move_vma). */
void chunks_move_locked(struct evspace *s, uint64_t from, uint64_t to, uint64_t len)
{
	split_at(s, from);
	split_at(s, from + len);
	for (size_t i = lower_bound(s, from); i < s->n_ch && s->ch[i].addr < from + len; i++)
		s->ch[i].addr = s->ch[i].addr - from + to;
	mv_qsort(s->ch, s->n_ch, sizeof(*s->ch), cmp_chunk);
}

void chunks_mark_loaded_locked(struct evspace *s, uint32_t ext, uint32_t a, uint32_t b)
{
	struct ev_ext *e = &s->ext[ext];
	for (uint32_t p = a; p < b; p++) {
		if (ev_page_loaded(e, p))
			continue;
		e->loaded[p / 64] |= 1ull << (p % 64);
		s->loaded += PG;
		s->owed -= MV_MIN(PG, s->owed);
	}
}

/* The chunk at addr now, copied out with its extent (under s->mu). */
bool chunks_at(struct evspace *s, uint64_t addr, struct ev_chunk *c, struct ev_ext *e)
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

/* Narrow [*a, *b) (pages of extent ext) to its first and last page not
 * installed yet; false if there is none. */
bool chunks_owed_span(struct evspace *s, uint32_t ext, uint32_t *a, uint32_t *b)
{
	const struct ev_ext *e = &s->ext[ext];
	pthread_mutex_lock(&s->mu);
	while (*a < *b && ev_page_loaded(e, *a))
		(*a)++;
	while (*b > *a && ev_page_loaded(e, *b - 1))
		(*b)--;
	pthread_mutex_unlock(&s->mu);
	return *a < *b;
}

/* The next chunk with pages still owed, copied out with its extent. The
 * scan resumes where the last one stopped (a cursor, wrapping once), so
 * that the lock is held for a short step, not a pass over every chunk. */
bool chunks_next_owed(struct evspace *s, struct ev_chunk *c, struct ev_ext *e)
{
	bool found = false;
	pthread_mutex_lock(&s->mu);
	for (size_t k = 0; k < s->n_ch && !found; k++) {
		size_t i = (s->cursor + k) % s->n_ch;
		if (!chunks_owed_in_locked(s, &s->ch[i]))
			continue;
		*c = s->ch[i];
		*e = s->ext[c->ext];
		s->cursor = i;
		found = true;
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}
