/* entry.c — encode/decode of the entry envelope (see entry.h). */
#include "core/entry.h"

void node_entry_encode_header(struct keel_wbuf *w, uint8_t kind, uint64_t origin,
			      uint64_t request_id, int64_t time_ms)
{
	keel_wbuf_u8(w, kind);
	keel_wbuf_u8(w, NODE_ENTRY_VERSION);
	keel_wbuf_u64(w, origin);
	keel_wbuf_u64(w, request_id);
	keel_wbuf_i64(w, time_ms);
}

enum keel_err node_entry_decode(const uint8_t *data, size_t size, struct node_entry *out)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	out->kind = keel_rbuf_u8(&r);
	uint8_t version = keel_rbuf_u8(&r);
	out->origin = keel_rbuf_u64(&r);
	out->request_id = keel_rbuf_u64(&r);
	out->time_ms = keel_rbuf_i64(&r);
	if (!keel_rbuf_ok(&r)) {
		return KEEL_SHORT;
	}
	if (version != NODE_ENTRY_VERSION || out->kind < NODE_ENTRY_ZK ||
	    out->kind > NODE_ENTRY_CLUSTER) {
		return KEEL_CORRUPT;
	}
	out->payload_size = keel_rbuf_remaining(&r);
	out->payload = keel_rbuf_bytes(&r, out->payload_size);
	return KEEL_OK;
}
