#include "common/hist.h"

unsigned hist_index(uint64_t v)
{
	if (v < (1u << HIST_SUB_BITS))
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	if (msb > HIST_MAX_MSB)
		return HIST_BUCKETS - 1;
	unsigned sub = (unsigned)(v >> (msb - HIST_SUB_BITS)) & ((1u << HIST_SUB_BITS) - 1);
	return ((msb - HIST_SUB_BITS + 1) << HIST_SUB_BITS) + sub;
}

uint64_t hist_bucket_low(unsigned idx)
{
	if (idx < (1u << HIST_SUB_BITS))
		return idx;
	unsigned msb = (idx >> HIST_SUB_BITS) + HIST_SUB_BITS - 1;
	uint64_t sub = idx & ((1u << HIST_SUB_BITS) - 1);
	return (1ull << msb) | (sub << (msb - HIST_SUB_BITS));
}

static uint64_t bucket_width(unsigned idx)
{
	if (idx < (1u << HIST_SUB_BITS))
		return 1;
	unsigned msb = (idx >> HIST_SUB_BITS) + HIST_SUB_BITS - 1;
	return 1ull << (msb - HIST_SUB_BITS);
}

void hist_add(struct hist *h, uint64_t v)
{
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
	h->bucket[hist_index(v)]++;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	if (h->count == 0)
		return 0;
	/* The rank of the sample we want, 1-based: ceil(q * count). */
	double r = q * (double)h->count;
	uint64_t rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank == 0)
		rank = 1;
	if (rank >= h->count)
		return h->max;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t mid = hist_bucket_low(i) + bucket_width(i) / 2;
			return mid > h->max ? h->max : mid;
		}
	}
	return h->max;
}

uint64_t hist_count_below(const struct hist *h, uint64_t v)
{
	unsigned end = hist_index(v);
	if (hist_bucket_low(end) < v)
		end++; /* v is inside its bucket: count the bucket */
	uint64_t n = 0;
	for (unsigned i = 0; i < end && i < HIST_BUCKETS; i++)
		n += h->bucket[i];
	return n;
}
