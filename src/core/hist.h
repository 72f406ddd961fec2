/*
 * hist.h — latency histograms.
 *
 * Fixed bucket bounds in microseconds (50 us .. 10 s, about x2 apart);
 * observe() is O(buckets) with no allocation. Rendered for Prometheus by
 * node/metrics.h.
 */
#ifndef KEEL_CORE_HIST_H
#define KEEL_CORE_HIST_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_BUCKETS 19

struct metrics_hist {
	uint64_t counts[METRICS_BUCKETS + 1]; /* last: +Inf */
	uint64_t total;
	uint64_t sum_us;
};

void metrics_hist_observe(struct metrics_hist *h, uint64_t value_us);

/* The value at quantile q (0..1) as a bucket upper bound in microseconds. */
uint64_t metrics_hist_quantile(const struct metrics_hist *h, double q);

/* The upper bound of bucket `bucket` (< METRICS_BUCKETS) in microseconds. */
uint64_t metrics_hist_bound_us(size_t bucket);

#endif
