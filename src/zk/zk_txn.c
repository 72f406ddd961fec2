/* zk_txn.c — the txn (log entry) format (see zk_txn.h). */
#include "zk/zk_txn.h"

#include "base/assert.h"

static void write_meta(struct keel_wbuf *w, enum zk_txn_kind kind, const struct zk_txn_meta *m)
{
	keel_wbuf_u8(w, ZK_TXN_MAGIC);
	keel_wbuf_u8(w, ZK_TXN_VERSION);
	keel_wbuf_u8(w, (uint8_t)kind);
	keel_wbuf_i64(w, m->time_ms);
	keel_wbuf_u64(w, m->origin);
	keel_wbuf_i32(w, m->xid);
	keel_wbuf_i64(w, m->session_id);
}

void zk_txn_encode_request(struct keel_wbuf *w, const struct zk_txn_meta *meta,
			   const struct zk_ids *ids, int32_t opcode, const void *body,
			   size_t body_size)
{
	KEEL_ASSERT(ids->count <= ZK_IDS_MAX);
	write_meta(w, ZK_TXN_REQUEST, meta);
	keel_wbuf_u8(w, (uint8_t)ids->count);
	for (uint32_t i = 0; i < ids->count; i++) {
		zk_write_bytes(w, ids->ids[i].scheme);
		zk_write_bytes(w, ids->ids[i].id);
	}
	keel_wbuf_i32(w, opcode);
	keel_wbuf_bytes(w, body, body_size);
}

void zk_txn_encode_create_session(struct keel_wbuf *w, const struct zk_txn_meta *meta,
				  int32_t timeout_ms, const uint8_t passwd[ZK_PASSWD_SIZE])
{
	write_meta(w, ZK_TXN_CREATE_SESSION, meta);
	keel_wbuf_i32(w, timeout_ms);
	keel_wbuf_bytes(w, passwd, ZK_PASSWD_SIZE);
}

void zk_txn_encode_close_session(struct keel_wbuf *w, const struct zk_txn_meta *meta,
				 enum zk_close_reason reason)
{
	write_meta(w, ZK_TXN_CLOSE_SESSION, meta);
	keel_wbuf_u8(w, (uint8_t)reason);
}

void zk_txn_encode_delete(struct keel_wbuf *w, enum zk_txn_kind kind, int64_t time_ms,
			  const char *path, size_t path_size)
{
	KEEL_ASSERT(kind == ZK_TXN_DELETE_CONTAINER || kind == ZK_TXN_DELETE_TTL);
	struct zk_txn_meta meta = {time_ms, 0, 0, 0};
	write_meta(w, kind, &meta);
	zk_write_bytes(w, zk_bytes_of(path, path_size));
}

/* magic, version, kind, then time_ms */
#define TIME_OFFSET 3u

enum keel_err zk_txn_set_time(void *txn, size_t size, int64_t time_ms)
{
	uint8_t *p = txn;
	if (size < TIME_OFFSET + 8 || p[0] != ZK_TXN_MAGIC || p[1] != ZK_TXN_VERSION) {
		return KEEL_PROTO;
	}
	keel_store_be64(p + TIME_OFFSET, (uint64_t)time_ms);
	return KEEL_OK;
}

enum keel_err zk_txn_decode(struct zk_txn *txn, const void *data, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	uint8_t magic = keel_rbuf_u8(&r);
	uint8_t version = keel_rbuf_u8(&r);
	uint8_t kind = keel_rbuf_u8(&r);
	if (!keel_rbuf_ok(&r)) {
		return KEEL_PROTO;
	}
	if (magic != ZK_TXN_MAGIC || version != ZK_TXN_VERSION) {
		return KEEL_CORRUPT;
	}
	txn->kind = (enum zk_txn_kind)kind;
	txn->meta.time_ms = keel_rbuf_i64(&r);
	txn->meta.origin = keel_rbuf_u64(&r);
	txn->meta.xid = keel_rbuf_i32(&r);
	txn->meta.session_id = keel_rbuf_i64(&r);
	zk_ids_init(&txn->ids);
	txn->opcode = 0;
	txn->body = NULL;
	txn->body_size = 0;
	txn->timeout_ms = 0;
	memset(txn->passwd, 0, sizeof(txn->passwd));
	txn->reason = ZK_CLOSE_BY_CLIENT;
	txn->path = ZK_BYTES_NULL;
	switch (kind) {
	case ZK_TXN_REQUEST: {
		uint8_t count = keel_rbuf_u8(&r);
		if (count > ZK_IDS_MAX) {
			return KEEL_PROTO;
		}
		for (uint8_t i = 0; i < count; i++) {
			struct zk_bytes scheme = zk_read_bytes(&r);
			struct zk_bytes id = zk_read_bytes(&r);
			if (!keel_rbuf_ok(&r)) {
				return KEEL_PROTO;
			}
			/* Kept as sent (duplicates included): apply compares only. */
			txn->ids.ids[txn->ids.count].scheme = scheme;
			txn->ids.ids[txn->ids.count].id = id;
			txn->ids.count++;
		}
		txn->opcode = keel_rbuf_i32(&r);
		if (!keel_rbuf_ok(&r)) {
			return KEEL_PROTO;
		}
		txn->body = r.data + r.pos;
		txn->body_size = keel_rbuf_remaining(&r);
		return KEEL_OK;
	}
	case ZK_TXN_CREATE_SESSION:
		txn->timeout_ms = keel_rbuf_i32(&r);
		keel_rbuf_copy(&r, txn->passwd, ZK_PASSWD_SIZE);
		break;
	case ZK_TXN_CLOSE_SESSION: {
		uint8_t reason = keel_rbuf_u8(&r);
		if (reason != ZK_CLOSE_BY_CLIENT && reason != ZK_CLOSE_EXPIRED) {
			return KEEL_PROTO;
		}
		txn->reason = (enum zk_close_reason)reason;
		break;
	}
	case ZK_TXN_DELETE_CONTAINER:
	case ZK_TXN_DELETE_TTL:
		txn->path = zk_read_bytes(&r);
		if (keel_rbuf_ok(&r) && zk_bytes_is_null(txn->path)) {
			return KEEL_PROTO;
		}
		break;
	default:
		return KEEL_CORRUPT;
	}
	return keel_rbuf_done(&r) ? KEEL_OK : KEEL_PROTO;
}
