/*
 * test_kafka_util.h — the arena and limits every Kafka unit test decodes
 * with, and the cmocka group setup/teardown that make them.
 */
#ifndef KEEL_TESTS_KAFKA_UTIL_H
#define KEEL_TESTS_KAFKA_UTIL_H

#include "base/alloc.h"
#include "kafka/io.h"

static struct keel_arena arena;
static struct kafka_limits limits;

static int setup(void **state)
{
	(void)state;
	keel_arena_init(&arena, 1 << 16);
	kafka_limits_default(&limits);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	keel_arena_close(&arena);
	return 0;
}

#endif
