/*
 * fuzz_node_tracker.c — the tracker's peer frames (core/tracker.h).
 *
 * Input: one frame body. It goes through the request decoder and the reply
 * decoder; whatever decodes is encoded again and must give back the same
 * bytes (the header) and the same body.
 */
#include <stdint.h>
#include <string.h>

#include "base/assert.h"
#include "core/tracker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mem[TRACKER_REPLY_HEADER_SIZE];
	struct keel_wbuf w;
	const uint8_t *body;
	size_t body_size;

	uint8_t kind;
	uint64_t origin, request_id;
	if (tracker_request_decode(data, size, &kind, &origin, &request_id, &body, &body_size) ==
	    KEEL_OK) {
		KEEL_ASSERT(body_size == size - TRACKER_REQUEST_HEADER_SIZE);
		KEEL_ASSERT(body == data + TRACKER_REQUEST_HEADER_SIZE);
		keel_wbuf_init_fixed(&w, mem, sizeof(mem));
		tracker_request_encode(&w, (enum tracker_kind)kind, origin, request_id);
		KEEL_ASSERT(keel_wbuf_ok(&w));
		KEEL_ASSERT(w.size == TRACKER_REQUEST_HEADER_SIZE);
		KEEL_ASSERT(memcmp(mem, data, w.size) == 0);
	} else {
		KEEL_ASSERT(size < TRACKER_REQUEST_HEADER_SIZE || data[0] == 0 ||
			    data[0] > TRACK_KIND_MAX || keel_load_be64(data + 1) == 0 ||
			    keel_load_be64(data + 9) == 0);
	}

	struct tracker_reply hdr;
	if (tracker_reply_decode(data, size, &hdr, &body, &body_size) == KEEL_OK) {
		KEEL_ASSERT(body_size == size - TRACKER_REPLY_HEADER_SIZE);
		keel_wbuf_init_fixed(&w, mem, sizeof(mem));
		tracker_reply_encode(&w, &hdr);
		KEEL_ASSERT(keel_wbuf_ok(&w));
		KEEL_ASSERT(w.size == TRACKER_REPLY_HEADER_SIZE);
		KEEL_ASSERT(memcmp(mem, data, w.size) == 0);
	}
	return 0;
}
