/* Unit tests: object pool (reuse, limits, alignment) and arena. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/alloc.h"
#include "base/err.h"

static void test_pool_reuse_and_alignment(void **state)
{
	(void)state;
	struct keel_pool pool;
	keel_pool_init(&pool, 24, 4, 0);
	void *objs[10];
	for (int i = 0; i < 10; i++) {
		objs[i] = keel_pool_alloc(&pool);
		assert_non_null(objs[i]);
		assert_int_equal((uintptr_t)objs[i] % 16, 0);
		memset(objs[i], 0xee, 24);
	}
	assert_int_equal(pool.live, 10);
	assert_int_equal(pool.allocated, 12);
	keel_pool_free(&pool, objs[4]);
	assert_ptr_equal(keel_pool_alloc(&pool), objs[4]);
	assert_true(keel_pool_memory(&pool) >= 12 * 32);
	keel_pool_close(&pool);
}

static void test_pool_limit(void **state)
{
	(void)state;
	struct keel_pool pool;
	keel_pool_init(&pool, 8, 3, 5);
	void *objs[5];
	for (int i = 0; i < 5; i++) {
		objs[i] = keel_pool_alloc(&pool);
		assert_non_null(objs[i]);
	}
	assert_null(keel_pool_alloc(&pool));
	keel_pool_free(&pool, objs[0]);
	assert_non_null(keel_pool_alloc(&pool));
	assert_null(keel_pool_alloc(&pool));
	keel_pool_close(&pool);
}

static void test_arena(void **state)
{
	(void)state;
	struct keel_arena arena;
	keel_arena_init(&arena, 256);
	char *a = keel_arena_dup(&arena, "hello", 6);
	assert_string_equal(a, "hello");
	for (int i = 0; i < 100; i++) {
		void *p = keel_arena_alloc(&arena, 40);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 16, 0);
	}
	void *big = keel_arena_alloc(&arena, 10000); /* larger than a block */
	assert_non_null(big);
	memset(big, 1, 10000);
	assert_true(arena.total >= 10000);
	keel_arena_reset(&arena);
	assert_int_equal(arena.total, 256);
	assert_non_null(keel_arena_alloc(&arena, 16));
	keel_arena_close(&arena);
	assert_int_equal(arena.total, 0);
}

static void test_errors_have_messages(void **state)
{
	(void)state;
	for (int e = 0; e < KEEL_ERR_COUNT; e++) {
		assert_non_null(keel_strerror((enum keel_err)e));
		assert_true(strncmp(keel_errname((enum keel_err)e), "KEEL_", 5) == 0);
	}
	assert_string_equal(keel_strerror(KEEL_OK), "success");
	assert_string_equal(keel_errname(KEEL_CORRUPT), "KEEL_CORRUPT");
	assert_string_equal(keel_strerror((enum keel_err)999), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_reuse_and_alignment),
		cmocka_unit_test(test_pool_limit),
		cmocka_unit_test(test_arena),
		cmocka_unit_test(test_errors_have_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
