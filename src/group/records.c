/*
 * records.c — __consumer_offsets keys, values and batches (records.h has
 * the byte layouts).
 */
#include <string.h>

#include "base/assert.h"
#include "group/records.h"
#include "plog/batch.h"

#define OFFSET_KEY_VERSION   1
#define GROUP_KEY_VERSION    2
#define OFFSET_VALUE_VERSION 3
#define GROUP_VALUE_VERSION  3

/* ---- encoding ---- */

static void put_str(struct keel_wbuf *w, const char *s)
{
	if (s == NULL) {
		keel_wbuf_u16(w, (uint16_t)-1);
		return;
	}
	size_t n = strnlen(s, INT16_MAX);
	keel_wbuf_u16(w, (uint16_t)n);
	keel_wbuf_bytes(w, s, n);
}

static void put_bytes(struct keel_wbuf *w, const struct group_bytes *b)
{
	int32_t n = b->len < 0 ? 0 : b->len;
	keel_wbuf_u32(w, (uint32_t)n);
	keel_wbuf_bytes(w, b->ptr, (size_t)n);
}

void group_encode_offset_key(struct keel_wbuf *w, const char *group_id, const char *topic,
                             int32_t partition)
{
	keel_wbuf_u16(w, OFFSET_KEY_VERSION);
	put_str(w, group_id);
	put_str(w, topic);
	keel_wbuf_u32(w, (uint32_t)partition);
}

void group_encode_offset_value(struct keel_wbuf *w, int64_t offset, int32_t leader_epoch,
                               const char *metadata, int64_t commit_timestamp_ms)
{
	keel_wbuf_u16(w, OFFSET_VALUE_VERSION);
	keel_wbuf_u64(w, (uint64_t)offset);
	keel_wbuf_u32(w, (uint32_t)leader_epoch);
	put_str(w, metadata != NULL ? metadata : "");
	keel_wbuf_u64(w, (uint64_t)commit_timestamp_ms);
}

void group_encode_group_key(struct keel_wbuf *w, const char *group_id)
{
	keel_wbuf_u16(w, GROUP_KEY_VERSION);
	put_str(w, group_id);
}

void group_encode_group_value(struct keel_wbuf *w, const struct group *g)
{
	keel_wbuf_u16(w, GROUP_VALUE_VERSION);
	put_str(w, g->protocol_type != NULL ? g->protocol_type : "");
	keel_wbuf_u32(w, (uint32_t)g->generation);
	put_str(w, g->protocol_name);
	put_str(w, g->leader_id);
	keel_wbuf_u64(w, (uint64_t)g->state_wall_ms); /* currentStateTimestamp: wall clock */
	keel_wbuf_u32(w, g->member_count);
	for (uint32_t i = 0; i < g->member_count; i++) {
		const struct group_member *m = g->members[i];
		put_str(w, m->member_id);
		put_str(w, m->instance_id);
		put_str(w, m->client_id);
		put_str(w, m->client_host);
		keel_wbuf_u32(w, (uint32_t)m->rebalance_timeout_ms);
		keel_wbuf_u32(w, (uint32_t)m->session_timeout_ms);
		struct group_bytes none = {NULL, 0};
		const struct group_bytes *sub = &none;
		for (uint32_t p = 0; p < m->protocol_count; p++) {
			if (g->protocol_name != NULL &&
			    strcmp(m->protocols[p].name, g->protocol_name) == 0) {
				sub = &m->protocols[p].metadata;
			}
		}
		put_bytes(w, sub);
		put_bytes(w, &m->assignment);
	}
}

/* ---- decoding ---- */

/* A NUL-terminated copy of an i16-length string (NULL for null); *ok false
 * on short input or a bad length. */
static const char *get_str(struct keel_rbuf *r, struct keel_arena *arena, bool nullable, bool *ok)
{
	int16_t n = (int16_t)keel_rbuf_u16(r);
	if (!keel_rbuf_ok(r)) {
		*ok = false;
		return NULL;
	}
	if (n < 0) {
		*ok &= nullable && n == -1;
		return NULL;
	}
	const uint8_t *p = keel_rbuf_bytes(r, (size_t)n);
	char *s = p != NULL ? keel_arena_alloc(arena, (size_t)n + 1) : NULL;
	if (s == NULL) {
		*ok = false;
		return NULL;
	}
	memcpy(s, p, (size_t)n);
	s[n] = '\0';
	return s;
}

static void skip_bytes(struct keel_rbuf *r, bool *ok)
{
	int32_t n = keel_rbuf_i32(r);
	if (n < -1) {
		*ok = false;
		return;
	}
	if (n > 0) {
		(void)keel_rbuf_bytes(r, (size_t)n);
	}
}

static enum keel_err decode_offset_value(struct keel_rbuf *r, struct keel_arena *arena,
                                         struct group_record *out)
{
	bool ok = true;
	int16_t v = (int16_t)keel_rbuf_u16(r);
	if (v < 0 || v > 4) {
		return KEEL_UNSUPPORTED;
	}
	out->offset = keel_rbuf_i64(r);
	out->leader_epoch = v >= 3 ? keel_rbuf_i32(r) : -1;
	out->metadata = get_str(r, arena, false, &ok);
	out->commit_timestamp_ms = keel_rbuf_i64(r);
	if (v == 1) {
		(void)keel_rbuf_i64(r); /* expire timestamp */
	}
	/* v4 is flexible: its tagged fields follow and are ignored */
	if (!ok || !keel_rbuf_ok(r)) {
		return KEEL_SHORT;
	}
	return KEEL_OK;
}

static enum keel_err decode_group_value(struct keel_rbuf *r, struct keel_arena *arena,
                                        struct group_record *out)
{
	bool ok = true;
	int16_t v = (int16_t)keel_rbuf_u16(r);
	if (v < 0 || v > 3) {
		return KEEL_UNSUPPORTED;
	}
	out->protocol_type = get_str(r, arena, false, &ok);
	out->generation = keel_rbuf_i32(r);
	out->protocol_name = get_str(r, arena, true, &ok);
	out->leader_id = get_str(r, arena, true, &ok);
	out->state_timestamp_ms = v >= 2 ? keel_rbuf_i64(r) : -1;
	int32_t n = keel_rbuf_i32(r);
	/* each member is at least 4 strings + 2 bytes fields + the timeouts */
	if (!ok || !keel_rbuf_ok(r) || n < 0 || (size_t)n > keel_rbuf_remaining(r) / 8) {
		return KEEL_CORRUPT;
	}
	out->member_count = (uint32_t)n;
	for (int32_t i = 0; i < n && ok; i++) {
		(void)get_str(r, arena, false, &ok); /* member id */
		if (v >= 3) {
			(void)get_str(r, arena, true, &ok);
		}
		(void)get_str(r, arena, false, &ok); /* client id */
		(void)get_str(r, arena, false, &ok); /* client host */
		if (v >= 1) {
			(void)keel_rbuf_i32(r);
		}
		(void)keel_rbuf_i32(r);
		skip_bytes(r, &ok);
		skip_bytes(r, &ok);
	}
	if (!ok || !keel_rbuf_ok(r)) {
		return KEEL_SHORT;
	}
	return KEEL_OK;
}

enum keel_err group_record_decode(const uint8_t *key, int32_t key_len, const uint8_t *value,
                                  int32_t value_len, struct keel_arena *arena,
                                  struct group_record *out)
{
	memset(out, 0, sizeof(*out));
	if (key == NULL || key_len < 2) {
		return KEEL_CORRUPT;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, key, (size_t)key_len);
	int16_t kv = (int16_t)keel_rbuf_u16(&r);
	bool ok = true;
	if (kv == 0 || kv == 1) {
		out->kind = GROUP_RECORD_OFFSET;
		out->group_id = get_str(&r, arena, false, &ok);
		out->topic = get_str(&r, arena, false, &ok);
		out->partition = keel_rbuf_i32(&r);
	} else if (kv == 2) {
		out->kind = GROUP_RECORD_GROUP;
		out->group_id = get_str(&r, arena, false, &ok);
	} else {
		return KEEL_UNSUPPORTED;
	}
	if (!ok || !keel_rbuf_ok(&r)) {
		return KEEL_SHORT;
	}
	if (!keel_rbuf_done(&r)) {
		return KEEL_CORRUPT;
	}
	if (value == NULL || value_len < 0) {
		out->tombstone = true;
		return KEEL_OK;
	}
	keel_rbuf_init(&r, value, (size_t)value_len);
	return out->kind == GROUP_RECORD_OFFSET ? decode_offset_value(&r, arena, out)
	                                        : decode_group_value(&r, arena, out);
}

/* ---- batches ---- */

void group_batch_init(struct group_batch *b, int64_t timestamp_ms)
{
	memset(b, 0, sizeof(*b));
	keel_wbuf_init_dynamic(&b->w, 1024, 16u << 20);
	keel_wbuf_zero(&b->w, PLOG_BATCH_HEADER_SIZE);
	b->timestamp_ms = timestamp_ms;
}

void group_batch_add(struct group_batch *b, const uint8_t *key, size_t key_len,
                     const uint8_t *value, int32_t value_len)
{
	uint8_t head[32];
	size_t n = 0;
	head[n++] = 0;                              /* attributes */
	n += plog_varint_write(head + n, 0);        /* timestamp delta */
	n += plog_varint_write(head + n, b->count); /* offset delta */
	n += plog_varint_write(head + n, (int64_t)key_len);
	uint8_t vlen[10];
	size_t vn = plog_varint_write(vlen, value_len < 0 ? -1 : value_len);
	size_t vbytes = value_len > 0 ? (size_t)value_len : 0;
	size_t body = n + key_len + vn + vbytes + 1;
	uint8_t len[10];
	keel_wbuf_bytes(&b->w, len, plog_varint_write(len, (int64_t)body));
	keel_wbuf_bytes(&b->w, head, n);
	keel_wbuf_bytes(&b->w, key, key_len);
	keel_wbuf_bytes(&b->w, vlen, vn);
	keel_wbuf_bytes(&b->w, value, vbytes);
	keel_wbuf_u8(&b->w, 0); /* no headers */
	b->count++;
}

enum keel_err group_batch_finish(struct group_batch *b)
{
	if (!keel_wbuf_ok(&b->w) || b->count == 0) {
		return b->count == 0 ? KEEL_INVAL : KEEL_NOMEM;
	}
	uint8_t *p = b->w.data;
	keel_store_be64(p, 0);
	keel_store_be32(p + 8, (uint32_t)(b->w.size - PLOG_BATCH_LOG_OVERHEAD));
	keel_store_be32(p + 12, 0);
	p[16] = PLOG_BATCH_MAGIC;
	keel_store_be16(p + 21, 0);
	keel_store_be32(p + 23, (uint32_t)(b->count - 1));
	keel_store_be64(p + 27, (uint64_t)b->timestamp_ms);
	keel_store_be64(p + 35, (uint64_t)b->timestamp_ms);
	keel_store_be64(p + 43, (uint64_t)-1);
	keel_store_be16(p + 51, (uint16_t)-1);
	keel_store_be32(p + 53, (uint32_t)-1);
	keel_store_be32(p + 57, (uint32_t)b->count);
	plog_batch_seal(p, b->w.size);
	return KEEL_OK;
}

void group_batch_free(struct group_batch *b)
{
	keel_wbuf_free(&b->w);
}

/* One varint field of a record; false on bad input. */
static bool read_varint(const uint8_t *p, size_t end, size_t *pos, int64_t *v)
{
	size_t n = plog_varint_read(p + *pos, end - *pos, v);
	*pos += n;
	return n > 0;
}

enum keel_err group_batch_records(const uint8_t *data, size_t size, group_record_fn fn, void *arg)
{
	struct plog_batch b;
	enum plog_batch_check check =
	        plog_batch_validate(data, size, (uint32_t)KEEL_MIN(size, INT32_MAX), &b);
	if (check != PLOG_BATCH_OK) {
		return KEEL_CORRUPT;
	}
	if (plog_batch_compression(&b) != PLOG_COMPRESSION_NONE) {
		return KEEL_UNSUPPORTED;
	}
	if ((b.attributes & PLOG_ATTR_CONTROL) != 0) {
		return KEEL_OK; /* transaction markers carry no group state */
	}
	size_t pos = PLOG_BATCH_HEADER_SIZE;
	for (int32_t i = 0; i < b.record_count; i++) {
		int64_t len = 0, skip = 0, klen = 0, vlen = 0;
		if (!read_varint(data, b.size, &pos, &len) || len < 0 ||
		    (uint64_t)len > b.size - pos) {
			return KEEL_CORRUPT;
		}
		size_t end = pos + (size_t)len;
		pos++; /* attributes */
		if (pos > end || !read_varint(data, end, &pos, &skip) ||
		    !read_varint(data, end, &pos, &skip) || !read_varint(data, end, &pos, &klen) ||
		    klen < -1 || klen > (int64_t)(end - pos)) {
			return KEEL_CORRUPT;
		}
		const uint8_t *key = klen >= 0 ? data + pos : NULL;
		pos += klen > 0 ? (size_t)klen : 0;
		if (!read_varint(data, end, &pos, &vlen) || vlen < -1 ||
		    vlen > (int64_t)(end - pos)) {
			return KEEL_CORRUPT;
		}
		const uint8_t *value = vlen >= 0 ? data + pos : NULL;
		fn(arg, key, (int32_t)klen, value, (int32_t)vlen);
		pos = end;
	}
	return KEEL_OK;
}
