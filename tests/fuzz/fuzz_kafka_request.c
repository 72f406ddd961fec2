/*
 * fuzz_kafka_request.c — every Kafka request decoder (fuzz_kafka.h), and
 * whole request frames with their headers.
 *
 * Input: if byte 0 has its top bit set, the rest is a request frame (after
 * the size prefix) for kafka_decode_request(), which must either refuse it
 * or decode what re-encodes to a frame that decodes again. Otherwise, as
 * in fuzz_kafka.h.
 */
#include "fuzz_kafka.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_frame(const uint8_t *frame, size_t size)
{
	struct kafka_limits limits;
	kafka_limits_default(&limits);
	limits.max_array_count = 4096;
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct kafka_request *req = malloc(sizeof(*req));
	enum keel_err err = kafka_decode_request(frame, size, &arena, &limits, req, NULL);
	if (err == KEEL_UNSUPPORTED) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 1 << 16);
		err = kafka_encode_unsupported(&w, &req->header, KAFKA_SET_ALL);
		KEEL_ASSERT(err == KEEL_OK || w.size == 0);
		keel_wbuf_free(&w);
	} else if (err == KEEL_OK) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 1 << 24);
		KEEL_ASSERT(kafka_encode_request(&w, &req->header, &req->body) == KEEL_OK);
		KEEL_ASSERT(kafka_decode_request(w.data + 4, w.size - 4, &arena, &limits, req,
		                                 NULL) == KEEL_OK);
		keel_wbuf_free(&w);
	}
	free(req);
	keel_arena_close(&arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 1 && (data[0] & 0x80) != 0) {
		fuzz_frame(data + 1, size - 1);
	} else {
		fuzz_kafka_body(data, size, false);
	}
	return 0;
}
