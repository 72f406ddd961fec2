/* hist.c — latency histograms with fixed buckets (see hist.h). */
#include "core/hist.h"

#include "base/assert.h"

static const uint64_t bounds_us[METRICS_BUCKETS] = {
        50,     100,    250,    500,     1000,    2000,    5000,    10000,   20000,    50000,
        100000, 200000, 500000, 1000000, 2000000, 3000000, 5000000, 7500000, 10000000,
};

void metrics_hist_observe(struct metrics_hist *h, uint64_t value_us)
{
	size_t i = 0;
	while (i < METRICS_BUCKETS && value_us > bounds_us[i]) {
		i++;
	}
	h->counts[i]++;
	h->total++;
	h->sum_us += value_us;
}

uint64_t metrics_hist_quantile(const struct metrics_hist *h, double q)
{
	if (h->total == 0) {
		return 0;
	}
	uint64_t want = (uint64_t)((double)h->total * q);
	uint64_t seen = 0;
	for (size_t i = 0; i < METRICS_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen > want) {
			return bounds_us[i];
		}
	}
	return bounds_us[METRICS_BUCKETS - 1];
}

uint64_t metrics_hist_bound_us(size_t bucket)
{
	KEEL_ASSERT(bucket < METRICS_BUCKETS);
	return bounds_us[bucket];
}
