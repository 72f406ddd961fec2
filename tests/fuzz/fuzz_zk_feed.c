/*
 * Fuzz target: the change feed's decoders (zk/zk_feed.h): FeedRequest,
 * FeedResponse and FeedEvent.
 *
 * Properties: no crash, no out-of-bounds read, no allocation; whatever
 * decodes re-encodes to bytes that decode to the same encoding (a fixed
 * point), and that encoding is a prefix of the input (decoders accept
 * trailing bytes, nothing else).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_feed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t first[1 << 17];
static uint8_t second[1 << 17];

static void same_prefix(const struct keel_wbuf *w, const uint8_t *data, size_t size)
{
	KEEL_ASSERT(keel_wbuf_ok(w));
	KEEL_ASSERT(w->size <= size);
	KEEL_ASSERT(memcmp(w->data, data, w->size) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct keel_wbuf w1;
	struct keel_wbuf w2;
	struct zk_feed_request rq;
	if (zk_feed_request_decode(&rq, data, size) == KEEL_OK) {
		keel_wbuf_init_fixed(&w1, first, sizeof(first));
		zk_feed_request_encode(&w1, &rq);
		same_prefix(&w1, data, size);
		struct zk_feed_request again;
		KEEL_ASSERT(zk_feed_request_decode(&again, w1.data, w1.size) == KEEL_OK);
		keel_wbuf_init_fixed(&w2, second, sizeof(second));
		zk_feed_request_encode(&w2, &again);
		KEEL_ASSERT(w1.size == w2.size && memcmp(w1.data, w2.data, w1.size) == 0);
	}
	struct zk_feed_response rs;
	if (zk_feed_response_decode(&rs, data, size) == KEEL_OK) {
		keel_wbuf_init_fixed(&w1, first, sizeof(first));
		zk_feed_response_encode(&w1, &rs);
		same_prefix(&w1, data, size);
	}
	struct zk_feed_event ev;
	if (zk_feed_event_decode(&ev, data, size) == KEEL_OK) {
		keel_wbuf_init_fixed(&w1, first, sizeof(first));
		zk_feed_event_encode(&w1, &ev);
		same_prefix(&w1, data, size);
		struct zk_feed_event again;
		KEEL_ASSERT(zk_feed_event_decode(&again, w1.data, w1.size) == KEEL_OK);
		keel_wbuf_init_fixed(&w2, second, sizeof(second));
		zk_feed_event_encode(&w2, &again);
		KEEL_ASSERT(w1.size == w2.size && memcmp(w1.data, w2.data, w1.size) == 0);
	}
	return 0;
}
