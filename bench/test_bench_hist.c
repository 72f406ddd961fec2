/*
 * test_bench_hist.c — the benchmark's latency histogram: bucket layout,
 * quantile accuracy against exact order statistics, merging.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hist.h"

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every bucket's range starts where the previous one ended. */
static void test_buckets_are_contiguous(void **state)
{
	(void)state;
	for (uint32_t b = 1; b < BENCH_HIST_BUCKETS; b++) {
		uint64_t prev_end = bench_hist_bucket_low(b - 1) + bench_hist_bucket_width(b - 1);
		assert_int_equal(bench_hist_bucket_low(b), prev_end);
	}
	assert_int_equal(bench_hist_bucket(0), 0);
	assert_int_equal(bench_hist_bucket(UINT64_MAX), BENCH_HIST_BUCKETS - 1);
}

/* A value lands in the bucket whose range holds it; widths stay <= 1/128. */
static void test_value_in_its_bucket(void **state)
{
	(void)state;
	uint64_t v = 1;
	for (int i = 0; i < 2000; i++) {
		uint32_t b = bench_hist_bucket(v);
		assert_true(bench_hist_bucket_low(b) <= v);
		assert_true(v - bench_hist_bucket_low(b) < bench_hist_bucket_width(b));
		if (v >= BENCH_HIST_SUB_COUNT) {
			assert_true(bench_hist_bucket_width(b) * BENCH_HIST_SUB_COUNT <= bench_hist_bucket_low(b));
		}
		v += v / 64 + 1;
	}
}

/* Quantiles of a skewed sample are within 1% of the exact order statistic. */
static void test_quantiles_match_exact(void **state)
{
	(void)state;
	enum { N = 100000 };
	uint64_t *values = malloc(N * sizeof(*values));
	struct bench_hist *h = malloc(sizeof(*h));
	assert_non_null(values);
	assert_non_null(h);
	bench_hist_init(h);
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* 50 us .. ~100 ms, log-uniform-ish with a heavy tail. */
		uint64_t v = 50000u + (x % 1000u) * (x % 1000u) * (1u + (x >> 60));
		values[i] = v;
		bench_hist_record(h, v);
	}
	qsort(values, N, sizeof(*values), compare_u64);
	const double qs[] = {0.5, 0.9, 0.99, 0.999};
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
		size_t rank = (size_t)(qs[i] * N + 0.999999) - 1;
		double exact = (double)values[rank];
		double got = (double)bench_hist_quantile(h, qs[i]);
		assert_true(got >= exact * 0.99);
		assert_true(got <= exact * 1.01);
	}
	assert_int_equal(bench_hist_quantile(h, 1.0), values[N - 1]);
	assert_int_equal(h->min, values[0]);
	assert_int_equal(h->total, N);
	free(values);
	free(h);
}

static void test_merge_and_empty(void **state)
{
	(void)state;
	struct bench_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	assert_non_null(a);
	assert_non_null(b);
	bench_hist_init(a);
	bench_hist_init(b);
	assert_int_equal(bench_hist_quantile(a, 0.5), 0);
	for (uint64_t v = 1; v <= 100; v++) {
		bench_hist_record(v <= 50 ? a : b, v * 1000);
	}
	bench_hist_merge(a, b);
	assert_int_equal(a->total, 100);
	assert_int_equal(a->min, 1000);
	assert_int_equal(a->max, 100000);
	uint64_t p50 = bench_hist_quantile(a, 0.5);
	assert_true(p50 >= 49600 && p50 <= 50400);
	assert_true(bench_hist_mean(a) > 50499.0 && bench_hist_mean(a) < 50501.0);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buckets_are_contiguous),
		cmocka_unit_test(test_value_in_its_bucket),
		cmocka_unit_test(test_quantiles_match_exact),
		cmocka_unit_test(test_merge_and_empty),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
