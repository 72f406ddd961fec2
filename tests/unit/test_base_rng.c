/* Unit tests: the seeded PRNG is reproducible, bounded and roughly uniform. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/rng.h"

static void test_same_seed_same_sequence(void **state)
{
	(void)state;
	struct keel_rng a, b, c;
	keel_rng_seed(&a, 7);
	keel_rng_seed(&b, 7);
	keel_rng_seed(&c, 8);
	int differ = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = keel_rng_next(&a);
		assert_true(x == keel_rng_next(&b));
		differ += x != keel_rng_next(&c);
	}
	assert_true(differ > 990);
}

static void test_seed_zero_works(void **state)
{
	(void)state;
	struct keel_rng r;
	keel_rng_seed(&r, 0);
	uint64_t x = keel_rng_next(&r);
	uint64_t y = keel_rng_next(&r);
	assert_true(x != y);
}

static void test_below_bounds_and_uniformity(void **state)
{
	(void)state;
	struct keel_rng r;
	keel_rng_seed(&r, 12345);
	unsigned counts[10] = {0};
	for (int i = 0; i < 100000; i++) {
		uint64_t v = keel_rng_below(&r, 10);
		assert_true(v < 10);
		counts[v]++;
	}
	for (int i = 0; i < 10; i++) {
		/* Expect 10000 each; 5 sigma is about 475. */
		assert_true(counts[i] > 9500 && counts[i] < 10500);
	}
	for (int i = 0; i < 1000; i++) {
		uint64_t v = keel_rng_between(&r, 150, 300);
		assert_true(v >= 150 && v <= 300);
	}
	assert_true(keel_rng_below(&r, 1) == 0);
	assert_true(keel_rng_between(&r, 5, 5) == 5);
}

static void test_chance(void **state)
{
	(void)state;
	struct keel_rng r;
	keel_rng_seed(&r, 99);
	int hits = 0;
	for (int i = 0; i < 100000; i++) {
		hits += keel_rng_chance(&r, 1, 4);
	}
	assert_true(hits > 24000 && hits < 26000);
	assert_false(keel_rng_chance(&r, 0, 5));
	assert_true(keel_rng_chance(&r, 5, 5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_seed_same_sequence),
		cmocka_unit_test(test_seed_zero_works),
		cmocka_unit_test(test_below_bounds_and_uniformity),
		cmocka_unit_test(test_chance),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
