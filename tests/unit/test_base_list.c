/* Unit tests: the intrusive list keeps order, tells membership without a
 * flag, survives removal during iteration, and splices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/list.h"

struct item {
	int value;
	struct keel_list link;
};

static int value_at(const struct keel_list *node)
{
	return KEEL_LIST_ITEM(node, struct item, link)->value;
}

/* The values of the list in order, as a number in base 10 (items are 1-9). */
static int digits(const struct keel_list *head)
{
	int out = 0;
	const struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, head) {
		out = out * 10 + value_at(it);
	}
	return out;
}

static void make_items(struct item *items, int count)
{
	for (int i = 0; i < count; i++) {
		items[i].value = i + 1;
		keel_list_init(&items[i].link);
	}
}

static void test_empty_list(void **state)
{
	(void)state;
	struct keel_list head;
	keel_list_init(&head);
	assert_true(keel_list_empty(&head));
	assert_false(keel_list_linked(&head));
	assert_null(keel_list_first(&head));
	assert_null(keel_list_last(&head));
	assert_null(keel_list_pop_front(&head));
	assert_int_equal(keel_list_length(&head), 0);
}

static void test_push_back_front_keeps_order(void **state)
{
	(void)state;
	struct keel_list head;
	struct item items[4];
	keel_list_init(&head);
	make_items(items, 4);
	keel_list_push_back(&head, &items[1].link);  /* 2 */
	keel_list_push_back(&head, &items[2].link);  /* 2 3 */
	keel_list_push_front(&head, &items[0].link); /* 1 2 3 */
	keel_list_push_back(&head, &items[3].link);  /* 1 2 3 4 */
	assert_int_equal(digits(&head), 1234);
	assert_int_equal(keel_list_length(&head), 4);
	assert_int_equal(value_at(keel_list_first(&head)), 1);
	assert_int_equal(value_at(keel_list_last(&head)), 4);
	assert_false(keel_list_empty(&head));
}

static void test_remove_tells_membership(void **state)
{
	(void)state;
	struct keel_list head;
	struct item items[3];
	keel_list_init(&head);
	make_items(items, 3);
	assert_false(keel_list_linked(&items[1].link));
	for (int i = 0; i < 3; i++) {
		keel_list_push_back(&head, &items[i].link);
	}
	assert_true(keel_list_linked(&items[1].link));
	keel_list_remove(&items[1].link);
	assert_false(keel_list_linked(&items[1].link));
	assert_int_equal(digits(&head), 13);
	/* A second removal of an unlinked node changes nothing. */
	keel_list_remove(&items[1].link);
	assert_int_equal(digits(&head), 13);
	keel_list_remove(&items[0].link);
	keel_list_remove(&items[2].link);
	assert_true(keel_list_empty(&head));
}

static void test_pop_front_drains_in_order(void **state)
{
	(void)state;
	struct keel_list head;
	struct item items[5];
	keel_list_init(&head);
	make_items(items, 5);
	for (int i = 0; i < 5; i++) {
		keel_list_push_back(&head, &items[i].link);
	}
	for (int i = 0; i < 5; i++) {
		struct keel_list *node = keel_list_pop_front(&head);
		assert_non_null(node);
		assert_int_equal(value_at(node), i + 1);
		assert_false(keel_list_linked(node));
	}
	assert_null(keel_list_pop_front(&head));
}

static void test_remove_while_iterating(void **state)
{
	(void)state;
	struct keel_list head;
	struct item items[6];
	keel_list_init(&head);
	make_items(items, 6);
	for (int i = 0; i < 6; i++) {
		keel_list_push_back(&head, &items[i].link);
	}
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &head) {
		if (value_at(it) % 2 == 0) {
			keel_list_remove(it);
		}
	}
	assert_int_equal(digits(&head), 135);
	KEEL_LIST_FOR_EACH_SAFE (it, next, &head) {
		keel_list_remove(it);
	}
	assert_true(keel_list_empty(&head));
}

static void test_splice_back(void **state)
{
	(void)state;
	struct keel_list a, b;
	struct item items[5];
	keel_list_init(&a);
	keel_list_init(&b);
	make_items(items, 5);
	keel_list_push_back(&a, &items[0].link);
	keel_list_push_back(&a, &items[1].link);
	keel_list_push_back(&b, &items[2].link);
	keel_list_push_back(&b, &items[3].link);
	keel_list_push_back(&b, &items[4].link);
	keel_list_splice_back(&a, &b);
	assert_int_equal(digits(&a), 12345);
	assert_true(keel_list_empty(&b));
	/* Splicing an empty list changes nothing; into an empty one moves all. */
	keel_list_splice_back(&a, &b);
	assert_int_equal(digits(&a), 12345);
	keel_list_splice_back(&b, &a);
	assert_int_equal(digits(&b), 12345);
	assert_true(keel_list_empty(&a));
	assert_int_equal(value_at(keel_list_last(&b)), 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_list),
		cmocka_unit_test(test_push_back_front_keeps_order),
		cmocka_unit_test(test_remove_tells_membership),
		cmocka_unit_test(test_pop_front_drains_in_order),
		cmocka_unit_test(test_remove_while_iterating),
		cmocka_unit_test(test_splice_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
