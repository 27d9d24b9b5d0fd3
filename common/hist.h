/* Latency histogram: log-linear buckets (16 per power of two), so any
 * percentile is reported within 1/16 (6%) of the true value, from 1 ns to
 * about 18 minutes, in a fixed 5 KiB. Not thread-safe: one writer. */
#ifndef MV_HIST_H
#define MV_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 4
#define HIST_MAX_MSB  40
#define HIST_BUCKETS  (((HIST_MAX_MSB - HIST_SUB_BITS + 1) << HIST_SUB_BITS) + (1 << HIST_SUB_BITS))

struct hist {
	uint64_t count;
	uint64_t sum;
	uint64_t max;
	uint64_t bucket[HIST_BUCKETS];
};

void hist_add(struct hist *h, uint64_t v);

/* Add every sample of src into dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value at quantile q (0 < q <= 1): the midpoint of the bucket holding
 * it, capped at the recorded maximum. 0 when the histogram is empty. */
uint64_t hist_quantile(const struct hist *h, double q);

/* How many samples are below v: exact when v is a bucket's low bound,
 * as every power of two is (else the bucket holding v counts whole). For
 * a Prometheus histogram, whose buckets count samples <= le: le = v - 1. */
uint64_t hist_count_below(const struct hist *h, uint64_t v);

/* Bucket helpers, exported for the unit tests. */
unsigned hist_index(uint64_t v);
uint64_t hist_bucket_low(unsigned idx);

#endif
