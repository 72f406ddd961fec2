/* Unit tests: keel_sort() sorts any order and its comparison count stays
 * within keel_sort_bound() — counted, not timed — on the orders that make
 * an insertion sort quadratic (descending) and on random, equal and sorted
 * input, 10^5 items each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/rng.h"
#include "base/sort.h"

#define BIG 100000u

struct item {
	uint32_t key;
	uint32_t tag;
};

static int item_cmp(const void *a, const void *b, void *ctx)
{
	uint64_t *calls = ctx;
	(*calls)++;
	const struct item *x = a;
	const struct item *y = b;
	return (x->key > y->key) - (x->key < y->key);
}

/* Sorts, then checks order, that the items are a permutation of the input
 * (tags 0..n-1 each once), and that the returned count is the number of
 * comparator calls and within the bound. Returns the count. */
static uint64_t sort_and_check(struct item *items, size_t n)
{
	uint64_t calls = 0;
	uint64_t compares = keel_sort(items, n, sizeof(*items), item_cmp, &calls);
	assert_true(compares == calls);
	assert_true(compares <= keel_sort_bound(n));
	uint8_t *seen = calloc(n + 1, 1);
	assert_non_null(seen);
	for (size_t i = 0; i < n; i++) {
		if (i > 0) {
			assert_true(items[i - 1].key <= items[i].key);
		}
		assert_true(items[i].tag < n);
		assert_int_equal(seen[items[i].tag], 0);
		seen[items[i].tag] = 1;
	}
	free(seen);
	return compares;
}

static struct item *make(size_t n)
{
	struct item *items = malloc(n * sizeof(*items));
	assert_non_null(items);
	for (size_t i = 0; i < n; i++) {
		items[i].tag = (uint32_t)i;
	}
	return items;
}

static void test_small_and_edge(void **state)
{
	(void)state;
	struct item one = {7, 0};
	uint64_t calls = 0;
	assert_int_equal(keel_sort(NULL, 0, sizeof(one), item_cmp, &calls), 0);
	assert_int_equal(keel_sort(&one, 1, sizeof(one), item_cmp, &calls), 0);
	assert_int_equal(calls, 0);
	for (size_t n = 2; n < 40; n++) {
		struct item *items = make(n);
		for (size_t i = 0; i < n; i++) {
			items[i].key = (uint32_t)((i * 7919u) % 13u);
		}
		sort_and_check(items, n);
		free(items);
	}
	assert_int_equal(keel_sort_bound(0), 0);
	assert_int_equal(keel_sort_bound(1), 2);
	assert_int_equal(keel_sort_bound(8), 2 * 8 * 3 + 16);
}

static void test_descending(void **state)
{
	(void)state;
	struct item *items = make(BIG);
	for (size_t i = 0; i < BIG; i++) {
		items[i].key = (uint32_t)(BIG - i);
	}
	uint64_t compares = sort_and_check(items, BIG);
	/* An insertion sort makes n(n-1)/2 = 5e9 here; the bound is 3.6e6. */
	assert_true(compares < (uint64_t)BIG * BIG / 1000);
	free(items);
}

static void test_random_equal_sorted(void **state)
{
	(void)state;
	struct keel_rng rng;
	keel_rng_seed(&rng, 18);
	struct item *items = make(BIG);
	for (size_t i = 0; i < BIG; i++) {
		items[i].key = (uint32_t)keel_rng_next(&rng);
	}
	sort_and_check(items, BIG);
	for (size_t i = 0; i < BIG; i++) {
		items[i].key = 5; /* all equal */
		items[i].tag = (uint32_t)i;
	}
	sort_and_check(items, BIG);
	for (size_t i = 0; i < BIG; i++) {
		items[i].key = (uint32_t)i; /* already sorted */
		items[i].tag = (uint32_t)i;
	}
	sort_and_check(items, BIG);
	for (size_t i = 0; i < BIG; i++) {
		items[i].key = (uint32_t)(i % 2 == 0 ? i : BIG - i); /* organ pipe */
		items[i].tag = (uint32_t)i;
	}
	sort_and_check(items, BIG);
	free(items);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_small_and_edge),
		cmocka_unit_test(test_descending),
		cmocka_unit_test(test_random_equal_sorted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
