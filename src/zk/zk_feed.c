/* zk_feed.c — the change feed's codec and history (zk_feed.h). */
#include "zk/zk_feed.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_tree.h"

const char *zk_feed_type_name(int32_t type)
{
	switch (type) {
	case ZK_FEED_CREATED:
		return "created";
	case ZK_FEED_DELETED:
		return "deleted";
	case ZK_FEED_DATA:
		return "data";
	case ZK_FEED_CHILD:
		return "child";
	case ZK_FEED_ACL:
		return "acl";
	default:
		return "unknown";
	}
}

/* ---- codec ---- */

static bool version_ok(struct keel_rbuf *r)
{
	int16_t version = (int16_t)keel_rbuf_u16(r);
	if (keel_rbuf_ok(r) && version != ZK_FEED_VERSION) {
		keel_rbuf_fail(r);
	}
	return keel_rbuf_ok(r);
}

void zk_feed_request_encode(struct keel_wbuf *w, const struct zk_feed_request *rq)
{
	keel_wbuf_u16(w, ZK_FEED_VERSION);
	keel_wbuf_i64(w, rq->from_zxid);
	keel_wbuf_i32(w, rq->from_seq);
	zk_write_bytes(w, rq->path);
	keel_wbuf_i32(w, rq->flags);
}

enum keel_err zk_feed_request_decode(struct zk_feed_request *rq, const void *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	memset(rq, 0, sizeof(*rq));
	if (!version_ok(&r)) {
		return KEEL_PROTO;
	}
	rq->from_zxid = keel_rbuf_i64(&r);
	rq->from_seq = keel_rbuf_i32(&r);
	rq->path = zk_read_bytes(&r);
	rq->flags = keel_rbuf_i32(&r);
	if (!keel_rbuf_ok(&r) || zk_bytes_is_null(rq->path) || rq->from_seq < 0 ||
	    (rq->flags & ~ZK_FEED_FLAGS_ALL) != 0) {
		return KEEL_PROTO;
	}
	return KEEL_OK;
}

void zk_feed_response_encode(struct keel_wbuf *w, const struct zk_feed_response *rs)
{
	keel_wbuf_u16(w, ZK_FEED_VERSION);
	keel_wbuf_u16(w, (uint16_t)rs->error);
	keel_wbuf_i64(w, rs->oldest_zxid);
	keel_wbuf_i64(w, rs->last_zxid);
}

enum keel_err zk_feed_response_decode(struct zk_feed_response *rs, const void *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	memset(rs, 0, sizeof(*rs));
	if (!version_ok(&r)) {
		return KEEL_PROTO;
	}
	rs->error = (int16_t)keel_rbuf_u16(&r);
	rs->oldest_zxid = keel_rbuf_i64(&r);
	rs->last_zxid = keel_rbuf_i64(&r);
	return keel_rbuf_ok(&r) ? KEEL_OK : KEEL_PROTO;
}

void zk_feed_event_encode(struct keel_wbuf *w, const struct zk_feed_event *ev)
{
	keel_wbuf_u16(w, ZK_FEED_VERSION);
	keel_wbuf_u16(w, (uint16_t)ev->status);
	keel_wbuf_i64(w, ev->zxid);
	keel_wbuf_i32(w, ev->seq);
	keel_wbuf_i32(w, ev->type);
	zk_write_bytes(w, ev->path);
	zk_write_stat(w, &ev->stat);
	zk_write_bytes(w, ev->data);
}

enum keel_err zk_feed_event_decode(struct zk_feed_event *ev, const void *body, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	memset(ev, 0, sizeof(*ev));
	if (!version_ok(&r)) {
		return KEEL_PROTO;
	}
	ev->status = (int16_t)keel_rbuf_u16(&r);
	ev->zxid = keel_rbuf_i64(&r);
	ev->seq = keel_rbuf_i32(&r);
	ev->type = keel_rbuf_i32(&r);
	ev->path = zk_read_bytes(&r);
	zk_read_stat(&r, &ev->stat);
	ev->data = zk_read_bytes(&r);
	if (!keel_rbuf_ok(&r) || ev->seq < 0) {
		return KEEL_PROTO;
	}
	return KEEL_OK;
}

bool zk_feed_path_under(struct zk_bytes prefix, struct zk_bytes path)
{
	size_t pl = zk_bytes_len(prefix);
	size_t l = zk_bytes_len(path);
	if (pl <= 1) {
		return true; /* "/" (or ""): everything */
	}
	if (l < pl || memcmp(prefix.data, path.data, pl) != 0) {
		return false;
	}
	return l == pl || path.data[pl] == '/';
}

/* ---- the history ---- */

void zk_feed_log_init(struct zk_feed_log *log, size_t max_bytes, int64_t floor)
{
	memset(log, 0, sizeof(*log));
	log->max_bytes = max_bytes;
	log->floor = floor;
	log->last_zxid = floor;
}

static struct zk_feed_change **slot(const struct zk_feed_log *log, uint64_t pos)
{
	KEEL_ASSERT(pos >= log->first);
	KEEL_ASSERT(pos < zk_feed_log_end(log));
	return &log->ring[(log->head + (uint32_t)(pos - log->first)) & (log->capacity - 1)];
}

/* Drops the oldest change; the floor rises to its zxid. */
static void drop_oldest(struct zk_feed_log *log)
{
	KEEL_ASSERT(log->count > 0);
	struct zk_feed_change **s = slot(log, log->first);
	struct zk_feed_change *ch = *s;
	*s = NULL;
	KEEL_ASSERT(log->bytes >= ch->bytes);
	log->bytes -= ch->bytes;
	log->floor = KEEL_MAX(log->floor, ch->zxid);
	free(ch);
	log->head = (log->head + 1) & (log->capacity - 1);
	log->count--;
	log->first++;
}

void zk_feed_log_trim(struct zk_feed_log *log, int64_t floor)
{
	while (log->count > 0 && (*slot(log, log->first))->zxid <= floor) {
		drop_oldest(log);
	}
	log->floor = KEEL_MAX(log->floor, floor);
}

void zk_feed_log_reset(struct zk_feed_log *log, int64_t floor)
{
	while (log->count > 0) {
		drop_oldest(log);
	}
	log->floor = floor;
	log->last_zxid = floor;
}

void zk_feed_log_close(struct zk_feed_log *log)
{
	zk_feed_log_reset(log, log->floor);
	free(log->ring);
	log->ring = NULL;
	log->capacity = 0;
}

static enum keel_err ring_reserve(struct zk_feed_log *log)
{
	if (log->count < log->capacity) {
		return KEEL_OK;
	}
	uint32_t cap = log->capacity == 0 ? 64 : log->capacity * 2;
	if (cap <= log->capacity) {
		return KEEL_NOMEM;
	}
	struct zk_feed_change **ring = calloc(cap, sizeof(*ring));
	if (ring == NULL) {
		return KEEL_NOMEM;
	}
	for (uint32_t i = 0; i < log->count; i++) {
		ring[i] = log->ring[(log->head + i) & (log->capacity - 1)];
	}
	free(log->ring);
	log->ring = ring;
	log->capacity = cap;
	log->head = 0;
	return KEEL_OK;
}

static int32_t feed_type_of(int32_t trigger_type)
{
	switch (trigger_type) {
	case ZK_EVENT_NODE_CREATED:
		return ZK_FEED_CREATED;
	case ZK_EVENT_NODE_DELETED:
		return ZK_FEED_DELETED;
	case ZK_EVENT_NODE_DATA_CHANGED:
		return ZK_FEED_DATA;
	case ZK_EVENT_NODE_CHILDREN_CHANGED:
		return ZK_FEED_CHILD;
	case ZK_EVENT_KEEL_ACL_CHANGED:
		return ZK_FEED_ACL;
	default:
		return 0;
	}
}

/* What one trigger records: the node as `st` holds it after the apply. */
struct rec_source {
	int32_t type;
	struct zk_bytes path;
	struct zk_stat stat;
	struct zk_bytes data;
	struct zk_acl_vec acl;
};

static void rec_source_of(const struct zk_state *st, const struct zk_result *res,
			  const struct zk_trigger *t, struct rec_source *src)
{
	memset(src, 0, sizeof(*src));
	src->type = feed_type_of(t->type);
	src->path = zk_trigger_path(res, t);
	src->data = ZK_BYTES_NULL;
	src->acl = zk_acl_table_get(&st->acls, t->acl);
	uint32_t id = zk_state_lookup(st, src->path);
	if (src->type == ZK_FEED_DELETED || id == ZK_NODE_NONE) {
		return;
	}
	zk_state_stat(st, id, &src->stat);
	const struct zk_node *n = zk_tree_node(&st->tree, id);
	if (src->type == ZK_FEED_CREATED || src->type == ZK_FEED_DATA) {
		src->data = zk_bytes_of(zk_node_data(n), n->data_size);
	}
	src->acl = zk_acl_table_get(&st->acls, n->acl);
}

static size_t rec_area_size(const struct rec_source *src)
{
	return zk_bytes_len(src->path) + zk_bytes_len(src->data) + src->acl.size;
}

static uint32_t area_put(uint8_t *area, size_t *used, const void *data, size_t size)
{
	uint32_t off = (uint32_t)*used;
	if (size > 0) {
		memcpy(area + *used, data, size);
	}
	*used += size;
	return off;
}

enum keel_err zk_feed_log_append(struct zk_feed_log *log, const struct zk_state *st,
				 const struct zk_result *res)
{
	KEEL_ASSERT(res->zxid > log->last_zxid);
	log->last_zxid = res->zxid;
	uint32_t count = 0;
	size_t area_size = 0;
	for (uint32_t i = 0; i < res->trigger_count; i++) {
		struct rec_source src;
		rec_source_of(st, res, &res->triggers[i], &src);
		if (src.type != 0) {
			count++;
			area_size += rec_area_size(&src);
		}
	}
	if (count == 0) {
		return KEEL_OK;
	}
	size_t head_size = sizeof(struct zk_feed_change) + (size_t)count * sizeof(struct zk_feed_rec);
	struct zk_feed_change *ch = NULL;
	if (area_size <= UINT32_MAX && ring_reserve(log) == KEEL_OK) {
		ch = malloc(head_size + area_size);
	}
	if (ch == NULL) {
		zk_feed_log_reset(log, res->zxid);
		return KEEL_NOMEM;
	}
	ch->zxid = res->zxid;
	ch->count = count;
	ch->bytes = head_size + area_size;
	uint8_t *area = (uint8_t *)ch + head_size;
	ch->area = area;
	size_t used = 0;
	uint32_t k = 0;
	for (uint32_t i = 0; i < res->trigger_count; i++) {
		struct rec_source src;
		rec_source_of(st, res, &res->triggers[i], &src);
		if (src.type == 0) {
			continue;
		}
		struct zk_feed_rec *r = &ch->recs[k++];
		r->type = src.type;
		r->stat = src.stat;
		r->path_size = (uint32_t)zk_bytes_len(src.path);
		r->path_offset = area_put(area, &used, src.path.data, r->path_size);
		r->data_size = src.data.size < 0 ? -1 : src.data.size;
		r->data_offset = area_put(area, &used, src.data.data, zk_bytes_len(src.data));
		r->acl_count = src.acl.count;
		r->acl_size = src.acl.size;
		r->acl_offset = area_put(area, &used, src.acl.data, src.acl.size);
	}
	KEEL_ASSERT(k == count);
	KEEL_ASSERT(used == area_size);
	log->ring[(log->head + log->count) & (log->capacity - 1)] = ch;
	log->count++;
	log->bytes += ch->bytes;
	while (log->bytes > log->max_bytes && log->count > 1) {
		drop_oldest(log);
	}
	return KEEL_OK;
}

uint64_t zk_feed_log_seek(const struct zk_feed_log *log, int64_t zxid)
{
	uint64_t lo = log->first;
	uint64_t hi = zk_feed_log_end(log);
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if ((*slot(log, mid))->zxid < zxid) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

const struct zk_feed_change *zk_feed_log_at(const struct zk_feed_log *log, uint64_t pos)
{
	return *slot(log, pos);
}

/* ---- reading the history ---- */

void zk_feed_cursor_init(struct zk_feed_cursor *cur, const struct zk_feed_log *log,
			 int64_t from_zxid, int32_t from_seq, struct zk_bytes prefix, int32_t flags,
			 const struct zk_ids *ids)
{
	*cur = (struct zk_feed_cursor){
		.pos = zk_feed_log_seek(log, from_zxid),
		.seq = 0,
		.from_zxid = from_zxid,
		.from_seq = from_seq,
		.prefix = prefix,
		.flags = flags,
		.ids = ids,
	};
}

static bool cursor_wants(const struct zk_feed_cursor *cur, const struct zk_feed_change *ch,
			 uint32_t i)
{
	const struct zk_feed_rec *r = &ch->recs[i];
	if (zk_feed_position_before(ch->zxid, (int32_t)i, cur->from_zxid, cur->from_seq)) {
		return false;
	}
	if (r->type == ZK_FEED_CHILD && (cur->flags & ZK_FEED_CHILDREN) == 0) {
		return false;
	}
	if (!zk_feed_path_under(cur->prefix, zk_feed_rec_path(ch, r))) {
		return false;
	}
	/* As a watch: only what the session may read. */
	return cur->ids == NULL || zk_acl_check(zk_feed_rec_acl(ch, r), ZK_PERM_READ, cur->ids);
}

enum zk_feed_step zk_feed_cursor_next(struct zk_feed_cursor *cur, const struct zk_feed_log *log,
				      const struct zk_feed_change **ch, uint32_t *index)
{
	while (cur->pos < zk_feed_log_end(log)) {
		if (cur->pos < log->first) {
			return ZK_FEED_STEP_COMPACTED;
		}
		const struct zk_feed_change *c = zk_feed_log_at(log, cur->pos);
		while (cur->seq < c->count) {
			uint32_t i = cur->seq++;
			if (cursor_wants(cur, c, i)) {
				*ch = c;
				*index = i;
				/* Step over what it does not want of the rest, so
				 * that dropping a change it is done with never
				 * leaves it behind. */
				while (cur->seq < c->count && !cursor_wants(cur, c, cur->seq)) {
					cur->seq++;
				}
				if (cur->seq == c->count) {
					cur->pos++;
					cur->seq = 0;
				}
				return ZK_FEED_STEP_EVENT;
			}
		}
		cur->pos++;
		cur->seq = 0;
	}
	return cur->pos < log->first ? ZK_FEED_STEP_COMPACTED : ZK_FEED_STEP_END;
}

void zk_feed_event_of(const struct zk_feed_change *ch, uint32_t index, int32_t flags,
		      struct zk_feed_event *ev)
{
	KEEL_ASSERT(index < ch->count);
	const struct zk_feed_rec *r = &ch->recs[index];
	*ev = (struct zk_feed_event){
		.status = ZK_FEED_OK,
		.zxid = ch->zxid,
		.seq = (int32_t)index,
		.type = r->type,
		.path = zk_feed_rec_path(ch, r),
		.stat = r->stat,
		.data = (flags & ZK_FEED_WITH_DATA) != 0 ? zk_feed_rec_data(ch, r) : ZK_BYTES_NULL,
	};
}
