/* rb_layout_diff (supervisor/rollback/layout.c): the changes that make a
 * layout the mark's again, piece by piece. */
#include "tap.h"

#include "supervisor/rollback/mark.h"

#include <stdlib.h>
#include <string.h>

#define MB (1ull << 20)

static struct rb_region anon(uint64_t s, uint64_t e, bool w)
{
	return (struct rb_region){.start = s, .end = e, .r = true, .w = w};
}

static struct rb_region file(uint64_t s, uint64_t e, uint64_t ino, uint64_t off)
{
	return (struct rb_region){.start = s, .end = e, .r = true, .inode = ino, .offset = off};
}

static size_t diff(struct rb_region *was, size_t n_was, struct rb_region *now, size_t n_now,
		   struct rb_change **ch)
{
	struct rb_mark m = {.r = was, .n_r = n_was};
	size_t n = 0;
	rb_layout_diff(&m, now, n_now, ch, &n);
	return n;
}

static int is(const struct rb_change *c, enum rb_fix fix, uint64_t s, uint64_t e)
{
	return c->fix == fix && c->start == s && c->end == e;
}

int main(void)
{
	struct rb_change *ch = NULL;
	size_t n;

	/* The same layout, split differently into regions: nothing. */
	struct rb_region a[] = {anon(10 * MB, 20 * MB, true), file(30 * MB, 31 * MB, 7, 0)};
	struct rb_region b[] = {anon(10 * MB, 15 * MB, true), anon(15 * MB, 20 * MB, true),
				file(30 * MB, 31 * MB, 7, 0)};
	n = diff(a, 2, b, 3, &ch);
	is_u64(n, 0, "the same layout split in two regions: no change");
	free(ch);

	/* A region mapped since, and the heap grown: unmapped. */
	struct rb_region c[] = {anon(10 * MB, 22 * MB, true), file(30 * MB, 31 * MB, 7, 0),
				anon(40 * MB, 41 * MB, true)};
	n = diff(a, 2, c, 3, &ch);
	is_u64(n, 2, "grown and mapped since: two changes");
	ok(n == 2 && is(&ch[0], RB_UNMAP, 20 * MB, 22 * MB) && is(&ch[1], RB_UNMAP, 40 * MB, 41 * MB),
	   "each unmapped, in address order");
	free(ch);

	/* A piece unmapped since, another made read-only: mapped again with
	 * the mark's region, protected back. */
	struct rb_region d[] = {anon(10 * MB, 12 * MB, true), anon(13 * MB, 14 * MB, false),
				anon(14 * MB, 20 * MB, true), file(30 * MB, 31 * MB, 7, 0)};
	n = diff(a, 2, d, 4, &ch);
	ok(n == 2 && is(&ch[0], RB_MAP, 12 * MB, 13 * MB) && ch[0].was == &a[0] &&
	       is(&ch[1], RB_PROTECT, 13 * MB, 14 * MB) && ch[1].was == &a[0],
	   "a hole mapped again, a read-only piece protected back");
	free(ch);

	/* The file replaced by anonymous memory, and the same file at another
	 * offset: each is unmapped, then mapped as the mark had it. */
	struct rb_region e[] = {anon(10 * MB, 20 * MB, true), anon(30 * MB, 31 * MB, true)};
	n = diff(a, 2, e, 2, &ch);
	ok(n == 2 && is(&ch[0], RB_UNMAP, 30 * MB, 31 * MB) && is(&ch[1], RB_MAP, 30 * MB, 31 * MB) &&
	       ch[1].was == &a[1],
	   "a file mapping replaced by anonymous memory: unmap, then map the file's piece");
	free(ch);
	struct rb_region f[] = {anon(10 * MB, 20 * MB, true), file(30 * MB, 31 * MB, 7, 4096)};
	n = diff(a, 2, f, 2, &ch);
	ok(n == 2 && ch[0].fix == RB_UNMAP && ch[1].fix == RB_MAP,
	   "the same file at another offset is another mapping");
	free(ch);

	/* Shared against private over the same range. */
	struct rb_region g[] = {anon(10 * MB, 20 * MB, true), file(30 * MB, 31 * MB, 7, 0)};
	g[0].shared = true;
	n = diff(a, 2, g, 2, &ch);
	ok(n == 2 && is(&ch[0], RB_UNMAP, 10 * MB, 20 * MB) && is(&ch[1], RB_MAP, 10 * MB, 20 * MB),
	   "shared anonymous memory where private was: replaced");
	free(ch);

	/* Nothing now: every region to map back. */
	n = diff(a, 2, NULL, 0, &ch);
	ok(n == 2 && ch[0].fix == RB_MAP && ch[1].fix == RB_MAP, "an empty layout: all mapped back");
	free(ch);

	const struct rb_region *r = rb_region_at(b, 3, 15 * MB);
	ok(r == &b[1], "rb_region_at finds the region at its start");
	ok(rb_region_at(b, 3, 20 * MB) == NULL && rb_region_at(b, 3, 9 * MB) == NULL,
	   "and none between or before regions");
	return tap_done();
}
