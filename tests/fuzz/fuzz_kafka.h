/*
 * fuzz_kafka.h — the property both Kafka fuzz targets check: whatever
 * decodes re-encodes, and the re-encoding decodes and re-encodes to itself
 * (input may use non-canonical varints or unknown tagged fields, which a
 * re-encode normalises, so the first encoding need not equal the input).
 *
 * Input: byte 0 picks the API (an index into the table), byte 1 the version
 * within its range, the rest is the body.
 */
#ifndef KEEL_FUZZ_KAFKA_H
#define KEEL_FUZZ_KAFKA_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "kafka/api.h"

static void fuzz_kafka_body(const uint8_t *data, size_t size, bool response)
{
	if (size < 2) {
		return;
	}
	size_t count;
	const struct kafka_api_info *apis = kafka_apis(&count);
	const struct kafka_api_info *api = &apis[data[0] % count];
	int16_t v =
	        (int16_t)(api->min_version + data[1] % (api->max_version - api->min_version + 1));
	struct kafka_limits limits;
	kafka_limits_default(&limits);
	limits.max_array_count = 4096;
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	void *body = malloc(response ? api->response_size : api->request_size);
	if (kafka_decode_body(data + 2, size - 2, api->api_key, v, response, &arena, &limits, body,
	                      NULL) == KEEL_OK) {
		struct keel_wbuf w1, w2;
		keel_wbuf_init_dynamic(&w1, 256, 1 << 24);
		keel_wbuf_init_dynamic(&w2, 256, 1 << 24);
		KEEL_ASSERT(kafka_encode_body(&w1, api->api_key, v, response, body) == KEEL_OK);
		KEEL_ASSERT(kafka_decode_body(w1.data, w1.size, api->api_key, v, response, &arena,
		                              &limits, body, NULL) == KEEL_OK);
		KEEL_ASSERT(kafka_encode_body(&w2, api->api_key, v, response, body) == KEEL_OK);
		KEEL_ASSERT(w1.size == w2.size);
		KEEL_ASSERT(memcmp(w1.data, w2.data, w1.size) == 0);
		keel_wbuf_free(&w1);
		keel_wbuf_free(&w2);
	}
	free(body);
	keel_arena_close(&arena);
}

#endif
