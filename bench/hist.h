/*
 * hist.h — a log-linear latency histogram for the benchmark tools.
 *
 * Values are nanoseconds (any uint64_t). Values below 2^BENCH_HIST_SUB_BITS
 * get one bucket each; above that every power of two is split into
 * 2^BENCH_HIST_SUB_BITS equal buckets, so a bucket is never wider than
 * 1/128 of its lower bound: a quantile read from the histogram is within
 * 0.8% of the exact sample (HdrHistogram's idea, our own code). min, max
 * and the sum are kept exactly.
 *
 * The struct is plain data, about 60 KiB, with no allocation: embed it or
 * allocate it yourself; bench_hist_init() clears it. It is not thread-safe:
 * one writer per histogram, merge them with bench_hist_merge() afterwards.
 */
#ifndef KEEL_BENCH_HIST_H
#define KEEL_BENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB_BITS 7
#define BENCH_HIST_SUB_COUNT (1u << BENCH_HIST_SUB_BITS)
/* Octaves BENCH_HIST_SUB_BITS .. 63, plus the exact range below. */
#define BENCH_HIST_BUCKETS ((64u - BENCH_HIST_SUB_BITS + 1u) * BENCH_HIST_SUB_COUNT)

struct bench_hist {
	uint64_t counts[BENCH_HIST_BUCKETS];
	uint64_t total;
	uint64_t min;
	uint64_t max;
	long double sum;
};

void bench_hist_init(struct bench_hist *h);
void bench_hist_record(struct bench_hist *h, uint64_t value);
/* Adds every sample of `from` to `into`. */
void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from);

/*
 * The sample at quantile q (0 < q <= 1): the smallest bucket whose
 * cumulative count reaches ceil(q * total), reported as the middle of that
 * bucket, clamped to [min, max]. 0 when the histogram is empty.
 */
uint64_t bench_hist_quantile(const struct bench_hist *h, double q);
double bench_hist_mean(const struct bench_hist *h);

/* Bucket index of a value and the lowest value of a bucket (for tests). */
uint32_t bench_hist_bucket(uint64_t value);
uint64_t bench_hist_bucket_low(uint32_t bucket);
uint64_t bench_hist_bucket_width(uint32_t bucket);

#endif
