/*
 * Fuzz target: zk_apply() driven by a byte program, plus reads, watches,
 * housekeeping and a snapshot round trip at the end.
 *
 * Each step consumes a few input bytes to pick an op (create of any kind,
 * delete, setData, setACL, check, multi of 1..4 such ops, session create
 * and close, housekeeping deletes, reads with watches) over a small set of
 * paths, so the fuzzer reaches deep states (ephemerals, multi rollbacks,
 * containers, TTL nodes) instead of bouncing off the txn decoder.
 *
 * Properties after every step: the incremental state hash equals a full
 * recompute; a failed write left the hash unchanged; no crash or leak; the
 * change feed's history (zk_feed.h, a small byte bound) records one event
 * per trigger, and a cursor reading it sees positions only go up.
 * At the end: a snapshot loads back with the same hash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_feed.h"
#include "zk/zk_housekeeping.h"
#include "zk/zk_read.h"
#include "zk/zk_snapshot.h"
#include "zk/zk_state.h"
#include "zk/zk_txn.h"
#include "zk/zk_watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t take(struct input *in)
{
	if (in->left == 0) {
		return 0;
	}
	in->left--;
	return *in->p++;
}

static const char *const paths[] = {
	"/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f", "/", "/zookeeper", "/a/", "/x-",
	"/e/f/g", "/zookeeper/config", "//", "/a/./b", "/c", "/c/k",
};

static struct zk_bytes pick_path(struct input *in)
{
	return zk_bytes_str(paths[take(in) % (sizeof(paths) / sizeof(paths[0]))]);
}

struct fz {
	struct zk_state st;
	struct zk_result res;
	struct zk_watches wm;
	struct zk_watch_conn conn;
	struct zk_ids ids;
	struct keel_wbuf body;
	struct keel_wbuf txn;
	struct keel_wbuf acl;
	uint64_t zxid;
	int64_t now;
	int64_t sessions[4];
	int events;
	struct zk_feed_log feed;
	struct zk_feed_cursor cur;
	int64_t cur_zxid; /* the last position the cursor gave */
	int32_t cur_seq;
};

/* Records the applied txn in the feed history and reads the cursor to its
 * end (from the oldest held when it fell behind). */
static void feed_follow(struct fz *f)
{
	uint32_t before = f->feed.count;
	KEEL_ASSERT(zk_feed_log_append(&f->feed, &f->st, &f->res) == KEEL_OK);
	if (f->res.trigger_count > 0) {
		const struct zk_feed_change *ch =
			zk_feed_log_at(&f->feed, zk_feed_log_end(&f->feed) - 1);
		KEEL_ASSERT(ch->zxid == f->res.zxid);
		KEEL_ASSERT(ch->count == f->res.trigger_count);
	} else {
		KEEL_ASSERT(f->feed.count <= before);
	}
	const struct zk_feed_change *ch;
	uint32_t i;
	enum zk_feed_step step;
	while ((step = zk_feed_cursor_next(&f->cur, &f->feed, &ch, &i)) != ZK_FEED_STEP_END) {
		if (step == ZK_FEED_STEP_COMPACTED) {
			zk_feed_cursor_init(&f->cur, &f->feed, zk_feed_log_oldest(&f->feed), 0,
					    zk_bytes_str("/"), ZK_FEED_CHILDREN, NULL);
			continue;
		}
		KEEL_ASSERT(zk_feed_position_before(f->cur_zxid, f->cur_seq, ch->zxid, (int32_t)i));
		f->cur_zxid = ch->zxid;
		f->cur_seq = (int32_t)i;
	}
}

static void on_event(void *ctx, struct zk_watch_conn *conn, const struct zk_watch_event *ev)
{
	(void)conn;
	(void)ev;
	((struct fz *)ctx)->events++;
}

static struct zk_acl_vec pick_acl(struct fz *f, struct input *in)
{
	static const char *const schemes[] = {"world", "auth", "digest", "ip", "bogus"};
	static const char *const ids[] = {"anyone", "", "u:h", "127.0.0.1", "10.0.0.0/8"};
	keel_wbuf_reset(&f->acl);
	uint8_t n = (uint8_t)(take(in) % 3);
	struct zk_acl a[2];
	for (uint8_t i = 0; i < n; i++) {
		a[i].perms = take(in) & 0x1f;
		a[i].id.scheme = zk_bytes_str(schemes[take(in) % 5]);
		a[i].id.id = zk_bytes_str(ids[take(in) % 5]);
	}
	if (n == 0) {
		a[0] = (struct zk_acl){31, {zk_bytes_str("world"), zk_bytes_str("anyone")}};
		n = 1;
	}
	return zk_acl_vec_build(&f->acl, a, n);
}

static void pick_op(struct fz *f, struct input *in, struct zk_multi_op *op, bool in_multi)
{
	memset(op, 0, sizeof(*op));
	uint8_t k = (uint8_t)(take(in) % (in_multi ? 5 : 6));
	static const char data[] = "0123456789abcdef";
	switch (k) {
	case 0: {
		static const int32_t creates[] = {ZK_OP_CREATE, ZK_OP_CREATE2, ZK_OP_CREATE_CONTAINER,
						  ZK_OP_CREATE_TTL};
		op->opcode = creates[take(in) % 4];
		op->u.create.path = pick_path(in);
		op->u.create.data = take(in) % 5 == 0 ? ZK_BYTES_NULL : zk_bytes_of(data, take(in) % 16);
		op->u.create.acl = pick_acl(f, in);
		op->u.create.flags = (int32_t)(take(in) % 8) - 1;
		op->u.create.ttl_ms = op->opcode == ZK_OP_CREATE_TTL ? (int64_t)take(in) * 10 - 5 : -1;
		break;
	}
	case 1:
		op->opcode = ZK_OP_DELETE;
		op->u.delete_.path = pick_path(in);
		op->u.delete_.version = (int32_t)(take(in) % 4) - 1;
		break;
	case 2:
		op->opcode = ZK_OP_SET_DATA;
		op->u.set_data.path = pick_path(in);
		op->u.set_data.data = zk_bytes_of(data, take(in) % 16);
		op->u.set_data.version = (int32_t)(take(in) % 4) - 1;
		break;
	case 3:
	case 4:
		op->opcode = ZK_OP_CHECK;
		op->u.check.path = pick_path(in);
		op->u.check.version = (int32_t)(take(in) % 4) - 1;
		break;
	default:
		op->opcode = ZK_OP_SET_ACL; /* not allowed in multi */
		break;
	}
}

static void apply(struct fz *f)
{
	uint64_t before = zk_state_hash(&f->st);
	enum keel_err err = zk_apply(&f->st, ++f->zxid, f->txn.data, f->txn.size, &f->res);
	KEEL_ASSERT(err == KEEL_OK);
	KEEL_ASSERT(zk_state_hash(&f->st) == zk_state_hash_full(&f->st));
	bool failed_single = f->res.err != ZK_OK && f->res.kind == ZK_TXN_REQUEST &&
			     f->res.opcode != ZK_OP_MULTI;
	if (failed_single) {
		KEEL_ASSERT(zk_state_hash(&f->st) == before);
		KEEL_ASSERT(f->res.trigger_count == 0);
	}
	feed_follow(f);
	zk_watches_fire(&f->wm, &f->st, &f->res);
}

static void request(struct fz *f, int64_t sid, int32_t opcode)
{
	struct zk_txn_meta meta = {f->now, 1, 2, sid};
	keel_wbuf_reset(&f->txn);
	zk_txn_encode_request(&f->txn, &meta, &f->ids, opcode, f->body.data, f->body.size);
	apply(f);
}

static void step(struct fz *f, struct input *in)
{
	f->now += take(in) * 100;
	int64_t sid = f->sessions[take(in) % 4];
	uint8_t what = take(in) % 10;
	keel_wbuf_reset(&f->body);
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	if (what <= 3) {
		struct zk_multi_op op;
		pick_op(f, in, &op, false);
		if (op.opcode == ZK_OP_SET_ACL) {
			req.u.set_acl = (struct zk_set_acl_request){pick_path(in), pick_acl(f, in),
								    (int32_t)(take(in) % 3) - 1};
		} else if (op.opcode == ZK_OP_CHECK) {
			req.u.check = op.u.check;
		} else {
			memcpy(&req.u, &op.u, sizeof(op.u));
		}
		req.opcode = op.opcode;
		zk_request_body_encode(&f->body, &req);
		request(f, sid, op.opcode);
	} else if (what <= 5) {
		struct zk_multi_op ops[4];
		size_t n = take(in) % 5;
		for (size_t i = 0; i < n; i++) {
			pick_op(f, in, &ops[i], true);
		}
		zk_multi_encode(&f->body, ops, n);
		request(f, sid, ZK_OP_MULTI);
	} else if (what == 6) {
		uint8_t pw[ZK_PASSWD_SIZE] = {take(in)};
		struct zk_txn_meta meta = {f->now, 0, 0, 0};
		keel_wbuf_reset(&f->txn);
		zk_txn_encode_create_session(&f->txn, &meta, 4000, pw);
		apply(f);
		if (f->res.err == ZK_OK) {
			f->sessions[take(in) % 4] = f->res.new_session_id;
		}
	} else if (what == 7) {
		struct zk_txn_meta meta = {f->now, 0, 0, sid};
		keel_wbuf_reset(&f->txn);
		zk_txn_encode_close_session(&f->txn, &meta, ZK_CLOSE_EXPIRED);
		apply(f);
	} else if (what == 8) {
		struct zk_bytes p = pick_path(in);
		keel_wbuf_reset(&f->txn);
		zk_txn_encode_delete(&f->txn, take(in) & 1 ? ZK_TXN_DELETE_TTL : ZK_TXN_DELETE_CONTAINER,
				     f->now, (const char *)p.data, (size_t)p.size);
		apply(f);
	} else {
		static const int32_t reads[] = {ZK_OP_EXISTS, ZK_OP_GET_DATA, ZK_OP_GET_CHILDREN,
						ZK_OP_GET_CHILDREN2, ZK_OP_GET_ACL,
						ZK_OP_GET_ALL_CHILDREN_NUMBER, ZK_OP_ADD_WATCH};
		req.opcode = reads[take(in) % 7];
		if (req.opcode == ZK_OP_GET_ACL || req.opcode == ZK_OP_GET_ALL_CHILDREN_NUMBER) {
			req.u.path.path = pick_path(in);
		} else if (req.opcode == ZK_OP_ADD_WATCH) {
			req.u.add_watch = (struct zk_add_watch_request){pick_path(in), take(in) % 2};
		} else {
			req.u.read = (struct zk_path_watch_request){pick_path(in), (take(in) & 1) != 0};
		}
		struct zk_read_ctx ctx = {&f->st, &f->wm, &f->conn, &f->ids, sid};
		uint64_t before = zk_state_hash(&f->st);
		(void)zk_read(&ctx, &req, &f->body);
		KEEL_ASSERT(zk_state_hash(&f->st) == before);
	}
}

struct mem {
	uint8_t *data;
	size_t size;
	size_t pos;
};

static enum keel_err mem_write(void *ctx, const void *data, size_t size)
{
	struct mem *m = ctx;
	uint8_t *p = realloc(m->data, m->size + size);
	if (p == NULL) {
		return KEEL_NOMEM;
	}
	m->data = p;
	memcpy(m->data + m->size, data, size);
	m->size += size;
	return KEEL_OK;
}

static enum keel_err mem_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct mem *m = ctx;
	size_t n = m->size - m->pos < max ? m->size - m->pos : max;
	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	*got = n;
	return KEEL_OK;
}

static void reap(void *ctx, enum zk_txn_kind kind, struct zk_bytes path)
{
	struct fz *f = ctx;
	keel_wbuf_reset(&f->txn);
	zk_txn_encode_delete(&f->txn, kind, f->now, (const char *)path.data, (size_t)path.size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f;
	memset(&f, 0, sizeof(f));
	struct zk_config cfg;
	zk_config_default(&cfg);
	cfg.container_max_never_used_ms = 1000;
	KEEL_ASSERT(zk_state_init(&f.st, &cfg) == KEEL_OK);
	zk_result_init(&f.res, cfg.max_reply_size);
	KEEL_ASSERT(zk_watches_init(&f.wm, 64, 1, on_event, &f) == KEEL_OK);
	zk_ids_init(&f.ids);
	(void)zk_ids_add(&f.ids, zk_bytes_str("ip"), zk_bytes_str("127.0.0.1"));
	if (size > 0 && (data[0] & 1) != 0) {
		(void)zk_ids_add(&f.ids, zk_bytes_str("digest"), zk_bytes_str("u:h"));
	}
	KEEL_ASSERT(zk_watches_attach(&f.wm, &f.conn, 1, &f.ids) == KEEL_OK);
	keel_wbuf_init_dynamic(&f.body, 256, 1 << 20);
	keel_wbuf_init_dynamic(&f.txn, 256, 1 << 20);
	keel_wbuf_init_dynamic(&f.acl, 256, 1 << 16);
	f.now = 1000000;
	zk_feed_log_init(&f.feed, 4096, 0);
	zk_feed_cursor_init(&f.cur, &f.feed, 1, 0, zk_bytes_str("/"), ZK_FEED_CHILDREN, NULL);
	f.cur_zxid = -1;
	uint8_t pw[ZK_PASSWD_SIZE] = {0};
	for (int i = 0; i < 2; i++) {
		struct zk_txn_meta meta = {f.now, 0, 0, 0};
		keel_wbuf_reset(&f.txn);
		zk_txn_encode_create_session(&f.txn, &meta, 4000, pw);
		apply(&f);
		f.sessions[i] = f.res.new_session_id;
	}
	f.sessions[2] = 999; /* never existed */
	f.sessions[3] = f.sessions[0];

	struct input in = {data, size};
	for (int steps = 0; in.left > 0 && steps < 200; steps++) {
		step(&f, &in);
	}
	/* Housekeeping: every candidate applies cleanly when proposed now. */
	(void)zk_housekeeping_scan(&f.st, f.now + 100000000, 1, reap, &f);

	struct mem m = {NULL, 0, 0};
	KEEL_ASSERT(zk_snapshot_write(&f.st, mem_write, &m, NULL) == KEEL_OK);
	struct zk_state copy;
	KEEL_ASSERT(zk_snapshot_load(&copy, &cfg, mem_read, &m) == KEEL_OK);
	KEEL_ASSERT(zk_state_hash(&copy) == zk_state_hash(&f.st));
	zk_state_close(&copy);
	free(m.data);

	zk_feed_log_close(&f.feed);
	zk_watches_detach(&f.wm, &f.conn);
	zk_watches_close(&f.wm);
	keel_wbuf_free(&f.body);
	keel_wbuf_free(&f.txn);
	keel_wbuf_free(&f.acl);
	zk_result_close(&f.res);
	zk_state_close(&f.st);
	return 0;
}
