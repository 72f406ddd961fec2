/*
 * hist.c — log-linear latency histogram (see hist.h).
 *
 * Bucket layout: for v < SUB_COUNT the bucket is v itself. Otherwise let
 * msb be the index of v's highest set bit (msb >= SUB_BITS) and take the
 * top SUB_BITS+1 bits of v, m = v >> (msb - SUB_BITS), in [SUB, 2 SUB).
 * The bucket is (msb - SUB_BITS + 1) * SUB + (m - SUB). For msb = SUB_BITS
 * this is v again, so the exact and log-linear ranges join without a gap.
 */
#include "hist.h"

#include <string.h>

void bench_hist_init(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

uint32_t bench_hist_bucket(uint64_t value)
{
	if (value < BENCH_HIST_SUB_COUNT) {
		return (uint32_t)value;
	}
	uint32_t msb = 63u - (uint32_t)__builtin_clzll(value);
	uint32_t shift = msb - BENCH_HIST_SUB_BITS;
	uint64_t mantissa = value >> shift;
	return (shift + 1u) * BENCH_HIST_SUB_COUNT + (uint32_t)(mantissa - BENCH_HIST_SUB_COUNT);
}

uint64_t bench_hist_bucket_low(uint32_t bucket)
{
	if (bucket < BENCH_HIST_SUB_COUNT) {
		return bucket;
	}
	uint32_t shift = bucket / BENCH_HIST_SUB_COUNT - 1u;
	uint64_t mantissa = (uint64_t)(bucket % BENCH_HIST_SUB_COUNT) + BENCH_HIST_SUB_COUNT;
	return mantissa << shift;
}

uint64_t bench_hist_bucket_width(uint32_t bucket)
{
	if (bucket < BENCH_HIST_SUB_COUNT) {
		return 1;
	}
	return (uint64_t)1 << (bucket / BENCH_HIST_SUB_COUNT - 1u);
}

void bench_hist_record(struct bench_hist *h, uint64_t value)
{
	h->counts[bench_hist_bucket(value)]++;
	h->total++;
	h->sum += (long double)value;
	if (value < h->min) {
		h->min = value;
	}
	if (value > h->max) {
		h->max = value;
	}
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from)
{
	for (uint32_t i = 0; i < BENCH_HIST_BUCKETS; i++) {
		into->counts[i] += from->counts[i];
	}
	into->total += from->total;
	into->sum += from->sum;
	if (from->min < into->min) {
		into->min = from->min;
	}
	if (from->max > into->max) {
		into->max = from->max;
	}
}

uint64_t bench_hist_quantile(const struct bench_hist *h, double q)
{
	if (h->total == 0) {
		return 0;
	}
	if (q >= 1.0) {
		return h->max;
	}
	double wanted = q * (double)h->total;
	uint64_t rank = (uint64_t)wanted;
	if ((double)rank < wanted || rank == 0) {
		rank++;
	}
	uint64_t seen = 0;
	for (uint32_t i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			uint64_t mid = bench_hist_bucket_low(i) + bench_hist_bucket_width(i) / 2;
			if (mid < h->min) {
				return h->min;
			}
			return mid > h->max ? h->max : mid;
		}
	}
	return h->max;
}

double bench_hist_mean(const struct bench_hist *h)
{
	return h->total == 0 ? 0.0 : (double)(h->sum / (long double)h->total);
}
