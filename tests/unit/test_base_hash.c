/* Unit tests: hashing and the open-addressing table, including a randomized
 * comparison against a simple reference under heavy insert/remove churn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/hash.h"
#include "base/rng.h"

struct item {
	uint64_t key;
	int value;
};

static bool item_eq(const void *item, const void *key)
{
	return ((const struct item *)item)->key == *(const uint64_t *)key;
}

static void test_hash_bytes(void **state)
{
	(void)state;
	assert_true(keel_hash_bytes("abc", 3, 1) == keel_hash_bytes("abc", 3, 1));
	assert_true(keel_hash_bytes("abc", 3, 1) != keel_hash_bytes("abc", 3, 2));
	assert_true(keel_hash_bytes("abc", 3, 1) != keel_hash_bytes("abd", 3, 1));
	assert_true(keel_hash_bytes("abc", 2, 1) != keel_hash_bytes("abc", 3, 1));
	assert_true(keel_hash_bytes("", 0, 1) != keel_hash_bytes("\0", 1, 1));
	/* Long keys: a change in any word matters. */
	char a[40], b[40];
	memset(a, 'x', sizeof(a));
	memcpy(b, a, sizeof(b));
	b[33] = 'y';
	assert_true(keel_hash_bytes(a, 40, 0) != keel_hash_bytes(b, 40, 0));
}

static void test_basic_ops(void **state)
{
	(void)state;
	struct keel_hmap map;
	assert_int_equal(keel_hmap_init(&map, 0), KEEL_OK);
	uint64_t k = 5;
	assert_null(keel_hmap_find(&map, keel_hash_u64(k), item_eq, &k));
	assert_null(keel_hmap_remove(&map, keel_hash_u64(k), item_eq, &k));
	struct item items[100];
	for (int i = 0; i < 100; i++) {
		items[i].key = (uint64_t)i * 7;
		items[i].value = i;
		assert_int_equal(keel_hmap_insert(&map, keel_hash_u64(items[i].key), &items[i]),
				 KEEL_OK);
	}
	assert_int_equal(keel_hmap_count(&map), 100);
	for (int i = 0; i < 100; i++) {
		uint64_t key = (uint64_t)i * 7;
		struct item *it = keel_hmap_find(&map, keel_hash_u64(key), item_eq, &key);
		assert_non_null(it);
		assert_int_equal(it->value, i);
		key++;
		assert_null(keel_hmap_find(&map, keel_hash_u64(key), item_eq, &key));
	}
	assert_true(keel_hmap_remove_item(&map, keel_hash_u64(items[3].key), &items[3]));
	assert_false(keel_hmap_remove_item(&map, keel_hash_u64(items[3].key), &items[3]));
	size_t cursor = 0, seen = 0;
	while (keel_hmap_next(&map, &cursor) != NULL) {
		seen++;
	}
	assert_int_equal(seen, 99);
	keel_hmap_close(&map);
}

/* Colliding hashes (all the same) exercise probe runs and backward shift. */
static void test_all_collide(void **state)
{
	(void)state;
	struct keel_hmap map;
	assert_int_equal(keel_hmap_init(&map, 8), KEEL_OK);
	struct item items[50];
	for (int i = 0; i < 50; i++) {
		items[i].key = (uint64_t)i;
		assert_int_equal(keel_hmap_insert(&map, 42, &items[i]), KEEL_OK);
	}
	for (int i = 0; i < 50; i += 2) {
		uint64_t key = (uint64_t)i;
		assert_ptr_equal(keel_hmap_remove(&map, 42, item_eq, &key), &items[i]);
	}
	for (int i = 0; i < 50; i++) {
		uint64_t key = (uint64_t)i;
		void *found = keel_hmap_find(&map, 42, item_eq, &key);
		if (i % 2 == 0) {
			assert_null(found);
		} else {
			assert_ptr_equal(found, &items[i]);
		}
	}
	keel_hmap_close(&map);
}

static void test_random_churn_against_reference(void **state)
{
	(void)state;
	enum { KEYS = 2000, OPS = 200000 };
	struct keel_rng rng;
	keel_rng_seed(&rng, 2024);
	struct keel_hmap map;
	assert_int_equal(keel_hmap_init(&map, 0), KEEL_OK);
	struct item *items = calloc(KEYS, sizeof(*items));
	bool *present = calloc(KEYS, sizeof(*present));
	size_t count = 0;
	for (int op = 0; op < OPS; op++) {
		uint64_t key = keel_rng_below(&rng, KEYS);
		/* Few distinct hash values: long probe runs that wrap around. */
		uint64_t hash = keel_hash_u64(key % 300);
		if (keel_rng_chance(&rng, 1, 2)) {
			if (!present[key]) {
				items[key].key = key;
				assert_int_equal(keel_hmap_insert(&map, hash, &items[key]), KEEL_OK);
				present[key] = true;
				count++;
			}
		} else {
			void *got = keel_hmap_remove(&map, hash, item_eq, &key);
			assert_true((got != NULL) == present[key]);
			if (got != NULL) {
				present[key] = false;
				count--;
			}
		}
		if (op % 5000 == 0) {
			for (uint64_t k = 0; k < KEYS; k++) {
				void *f = keel_hmap_find(&map, keel_hash_u64(k % 300), item_eq, &k);
				assert_true((f != NULL) == present[k]);
			}
		}
		assert_int_equal(keel_hmap_count(&map), count);
	}
	assert_true(keel_hmap_memory(&map) >= count * sizeof(struct keel_hmap_slot));
	keel_hmap_close(&map);
	free(items);
	free(present);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_bytes),
		cmocka_unit_test(test_basic_ops),
		cmocka_unit_test(test_all_collide),
		cmocka_unit_test(test_random_churn_against_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
