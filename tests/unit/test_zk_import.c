/*
 * Unit tests: reading ZooKeeper snapshot and txn-log files (zk_import).
 *
 * The files are built here byte by byte in ZooKeeper's format (FileSnap,
 * FileTxnLog, zookeeper.jute), imported, and the resulting tree checked
 * field by field: snapshot decoding, every txn type with ZooKeeper's
 * fuzzy-snapshot replay rules, ephemerals dropped at finish, a keel
 * snapshot round trip of the result, and refusal (KEEL_CORRUPT with the
 * offset) of every single flipped byte of a snapshot and of a log, of a
 * truncated log, of nonzero padding and of a zxid gap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "zk/zk_import.h"
#include "zk/zk_snapshot.h"

#define SESSION_A 0x100
#define SESSION_B 0x200
#define TTL_OWNER ((int64_t)(UINT64_C(0xff00000000000000) | 60000u))
#define SNAP_ZXID 5

/* ---- writing ZooKeeper's formats ---- */

static void w_acl(struct keel_wbuf *w, int32_t perms, const char *scheme, const char *id)
{
	keel_wbuf_i32(w, 1);
	keel_wbuf_i32(w, perms);
	zk_write_str(w, scheme);
	zk_write_str(w, id);
}

struct stat_in {
	int64_t czxid, mzxid, ctime, mtime;
	int32_t version, cversion, aversion;
	int64_t owner, pzxid;
};

static void w_node(struct keel_wbuf *w, const char *path, const char *data, int64_t acl,
		   struct stat_in s)
{
	zk_write_str(w, path);
	zk_write_str(w, data);
	keel_wbuf_i64(w, acl);
	keel_wbuf_i64(w, s.czxid);
	keel_wbuf_i64(w, s.mzxid);
	keel_wbuf_i64(w, s.ctime);
	keel_wbuf_i64(w, s.mtime);
	keel_wbuf_i32(w, s.version);
	keel_wbuf_i32(w, s.cversion);
	keel_wbuf_i32(w, s.aversion);
	keel_wbuf_i64(w, s.owner);
	keel_wbuf_i64(w, s.pzxid);
}

static void w_seal(struct keel_wbuf *w)
{
	keel_wbuf_u64(w, zk_import_adler32(1, w->data, w->size));
	zk_write_str(w, "/");
}

/* A snapshot at zxid 5 of:
 *	/ (cversion 3, pzxid 5)   /zookeeper  /zookeeper/quota
 *	/a "hello" digest alice, version 1, cversion 1, pzxid 3
 *	/a/e ephemeral of SESSION_A    /c container (world READ)    /t TTL */
static void build_snapshot(struct keel_wbuf *w)
{
	keel_wbuf_u32(w, 0x5a4b534e);
	keel_wbuf_i32(w, 2);
	keel_wbuf_i64(w, -1);
	keel_wbuf_i32(w, 1); /* sessions */
	keel_wbuf_i64(w, SESSION_A);
	keel_wbuf_i32(w, 30000);
	keel_wbuf_i32(w, 2); /* ACL cache */
	keel_wbuf_i64(w, 7);
	w_acl(w, 31, "digest", "alice:hash=");
	keel_wbuf_i64(w, 8);
	w_acl(w, 1, "world", "anyone");
	w_node(w, "", "", -1, (struct stat_in){0, 0, 0, 0, 0, 4, 0, 0, 5});
	w_node(w, "/zookeeper", "", -1, (struct stat_in){0});
	w_node(w, "/zookeeper/quota", "", -1, (struct stat_in){0});
	w_node(w, "/a", "hello", 7, (struct stat_in){2, 4, 1000, 2000, 1, 1, 0, 0, 3});
	w_node(w, "/a/e", "", -1, (struct stat_in){3, 3, 1500, 1500, 0, 0, 0, SESSION_A, 3});
	w_node(w, "/c", "", 8, (struct stat_in){4, 4, 1600, 1600, 0, 0, 0, INT64_MIN, 4});
	w_node(w, "/t", "ttl", -1, (struct stat_in){5, 5, 1700, 1700, 0, 0, 0, TTL_OWNER, 5});
	zk_write_str(w, "/");
	w_seal(w);
	/* 3.6+ digest trailer and its seal. */
	keel_wbuf_i64(w, SNAP_ZXID);
	keel_wbuf_i32(w, 2);
	keel_wbuf_i64(w, 123456789);
	w_seal(w);
}

struct txn {
	struct keel_wbuf w;
};

static void t_begin(struct txn *t, int64_t session, int64_t zxid, int32_t type)
{
	keel_wbuf_init_dynamic(&t->w, 256, 1u << 20);
	keel_wbuf_i64(&t->w, session);
	keel_wbuf_i32(&t->w, 1);
	keel_wbuf_i64(&t->w, zxid);
	keel_wbuf_i64(&t->w, 10000 + zxid);
	keel_wbuf_i32(&t->w, type);
}

/* Appends one record {adler, length, bytes, 'B'} and frees the txn. */
static void t_end(struct keel_wbuf *log, struct txn *t, bool digest)
{
	if (digest) {
		keel_wbuf_i32(&t->w, 2);
		keel_wbuf_i64(&t->w, 42);
	}
	keel_wbuf_u64(log, zk_import_adler32(1, t->w.data, t->w.size));
	keel_wbuf_u32(log, (uint32_t)t->w.size);
	keel_wbuf_bytes(log, t->w.data, t->w.size);
	keel_wbuf_u8(log, 'B');
	keel_wbuf_free(&t->w);
}

static void r_create(struct keel_wbuf *w, const char *path, const char *data, bool ephemeral,
		     int32_t parent_cversion)
{
	zk_write_str(w, path);
	zk_write_str(w, data);
	w_acl(w, 31, "world", "anyone");
	keel_wbuf_bool(w, ephemeral);
	keel_wbuf_i32(w, parent_cversion);
}

/* CreateContainerTxn, or CreateTTLTxn before its ttl. */
static void r_create_extended(struct keel_wbuf *w, const char *path, const char *data,
			      int32_t parent_cversion)
{
	zk_write_str(w, path);
	zk_write_str(w, data);
	w_acl(w, 31, "world", "anyone");
	keel_wbuf_i32(w, parent_cversion);
}

static void r_set_data(struct keel_wbuf *w, const char *path, const char *data, int32_t version)
{
	zk_write_str(w, path);
	zk_write_str(w, data);
	keel_wbuf_i32(w, version);
}

/* Appends a multi sub-txn {int type, buffer record}. */
static void sub(struct keel_wbuf *w, int32_t type, const struct keel_wbuf *rec)
{
	keel_wbuf_i32(w, type);
	keel_wbuf_i32(w, (int32_t)rec->size);
	keel_wbuf_bytes(w, rec->data, rec->size);
}

#define LOG_PADDING 200u

/* A log starting at zxid 4 (4 and 5 are in the snapshot), txns 6..19. */
static void build_log(struct keel_wbuf *log)
{
	keel_wbuf_u32(log, 0x5a4b4c47);
	keel_wbuf_i32(log, 2);
	keel_wbuf_i64(log, 0);
	struct txn t;
	struct keel_wbuf rec;
	keel_wbuf_init_dynamic(&rec, 256, 1u << 20);

	t_begin(&t, SESSION_A, 4, ZK_OP_CREATE); /* in the snapshot already */
	r_create(&t.w, "/c/old", "", false, 1);
	t_end(log, &t, true);
	t_begin(&t, SESSION_A, 5, ZK_OP_DELETE);
	zk_write_str(&t.w, "/zookeeper");
	t_end(log, &t, true);
	t_begin(&t, SESSION_A, 6, ZK_OP_CREATE);
	r_create(&t.w, "/a/f", "f", false, 2);
	t_end(log, &t, true);
	t_begin(&t, SESSION_A, 7, ZK_OP_SET_DATA);
	r_set_data(&t.w, "/a", "hello2", 2);
	t_end(log, &t, false);
	t_begin(&t, SESSION_A, 8, ZK_OP_SET_ACL);
	zk_write_str(&t.w, "/c");
	w_acl(&t.w, 3, "ip", "10.0.0.0/8");
	keel_wbuf_i32(&t.w, 1);
	t_end(log, &t, true);

	/* 9: a multi that commits. */
	t_begin(&t, SESSION_A, 9, ZK_OP_MULTI);
	keel_wbuf_i32(&t.w, 4);
	keel_wbuf_reset(&rec);
	r_create(&rec, "/m", "m", false, 5);
	sub(&t.w, ZK_OP_CREATE, &rec);
	keel_wbuf_reset(&rec);
	r_create(&rec, "/m/x", "x", false, 1);
	sub(&t.w, ZK_OP_CREATE2, &rec);
	keel_wbuf_reset(&rec);
	r_set_data(&rec, "/a", "hello3", 3);
	sub(&t.w, ZK_OP_SET_DATA, &rec);
	keel_wbuf_reset(&rec);
	zk_write_str(&rec, "/a");
	keel_wbuf_i32(&rec, 3);
	sub(&t.w, ZK_OP_CHECK, &rec);
	t_end(log, &t, true);

	/* 10: a multi that failed: nothing of it applies. */
	t_begin(&t, SESSION_A, 10, ZK_OP_MULTI);
	keel_wbuf_i32(&t.w, 2);
	keel_wbuf_reset(&rec);
	keel_wbuf_i32(&rec, 0);
	sub(&t.w, ZK_OP_ERROR, &rec);
	keel_wbuf_reset(&rec);
	keel_wbuf_i32(&rec, -103);
	sub(&t.w, ZK_OP_ERROR, &rec);
	t_end(log, &t, true);

	t_begin(&t, SESSION_A, 11, ZK_OP_DELETE);
	zk_write_str(&t.w, "/t");
	t_end(log, &t, true);
	t_begin(&t, SESSION_A, 12, ZK_OP_CREATE_CONTAINER);
	r_create_extended(&t.w, "/k", "k", 6);
	t_end(log, &t, true);
	t_begin(&t, SESSION_A, 13, ZK_OP_CREATE_TTL);
	r_create_extended(&t.w, "/k/t", "", 1);
	keel_wbuf_i64(&t.w, 90000);
	t_end(log, &t, true);
	t_begin(&t, SESSION_A, 14, ZK_OP_CLOSE_SESSION);
	keel_wbuf_i32(&t.w, 1);
	zk_write_str(&t.w, "/a/e");
	t_end(log, &t, true);
	t_begin(&t, SESSION_B, 15, ZK_OP_CREATE_SESSION);
	keel_wbuf_i32(&t.w, 30000);
	t_end(log, &t, true);
	t_begin(&t, SESSION_B, 16, ZK_OP_CREATE2);
	r_create(&t.w, "/a/e2", "", true, 3);
	t_end(log, &t, true);
	t_begin(&t, SESSION_B, 17, ZK_OP_ERROR);
	keel_wbuf_i32(&t.w, -101);
	t_end(log, &t, true);
	/* 18: create of an existing node (fuzzy snapshot): the ACL is
	 * replaced and the parent's cversion raised. */
	t_begin(&t, SESSION_B, 18, ZK_OP_CREATE);
	zk_write_str(&t.w, "/a");
	zk_write_str(&t.w, "ignored");
	w_acl(&t.w, 1, "world", "anyone");
	keel_wbuf_bool(&t.w, false);
	keel_wbuf_i32(&t.w, 10);
	t_end(log, &t, true);
	/* 19: delete of a missing node still moves the parent's pzxid. */
	t_begin(&t, SESSION_B, 19, ZK_OP_DELETE);
	zk_write_str(&t.w, "/missing");
	t_end(log, &t, true);
	keel_wbuf_free(&rec);
	keel_wbuf_zero(log, LOG_PADDING);
}

/* ---- helpers ---- */

static enum keel_err mem_write(void *ctx, const void *data, size_t size)
{
	struct keel_wbuf *w = ctx;
	keel_wbuf_bytes(w, data, size);
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_NOMEM;
}

struct mem_reader {
	const uint8_t *data;
	size_t size;
	size_t pos;
};

static enum keel_err mem_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct mem_reader *m = ctx;
	size_t n = m->size - m->pos < max ? m->size - m->pos : max;
	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	*got = n;
	return KEEL_OK;
}

struct files {
	struct keel_wbuf snap;
	struct keel_wbuf log;
};

static void files_build(struct files *f)
{
	keel_wbuf_init_dynamic(&f->snap, 1024, 1u << 20);
	keel_wbuf_init_dynamic(&f->log, 1024, 1u << 20);
	build_snapshot(&f->snap);
	build_log(&f->log);
	assert_true(keel_wbuf_ok(&f->snap));
	assert_true(keel_wbuf_ok(&f->log));
}

static void files_free(struct files *f)
{
	keel_wbuf_free(&f->snap);
	keel_wbuf_free(&f->log);
}

static void init(struct zk_import *imp)
{
	struct zk_config cfg;
	zk_config_default(&cfg);
	assert_int_equal(zk_import_init(imp, &cfg), KEEL_OK);
}

static uint32_t node_id(struct zk_import *imp, const char *path)
{
	return zk_state_lookup(&imp->st, zk_bytes_str(path));
}

static struct zk_node *node(struct zk_import *imp, const char *path)
{
	uint32_t id = node_id(imp, path);
	assert_int_not_equal(id, ZK_NODE_NONE);
	return zk_tree_node(&imp->st.tree, id);
}

static void assert_data(struct zk_import *imp, const char *path, const char *data)
{
	struct zk_node *n = node(imp, path);
	assert_int_equal(n->data_size, strlen(data));
	assert_memory_equal(zk_node_data(n), data, strlen(data));
}

/* The node's ACL has one entry (perms, scheme, id). */
static void assert_acl(struct zk_import *imp, const char *path, int32_t perms,
		       const char *scheme, const char *id)
{
	struct zk_acl_vec v = zk_state_node_acl(&imp->st, node_id(imp, path));
	assert_int_equal(v.count, 1);
	struct zk_acl_iter it;
	struct zk_acl acl;
	zk_acl_iter_init(&it, v);
	assert_true(zk_acl_iter_next(&it, &acl));
	assert_int_equal(acl.perms, perms);
	assert_true(zk_bytes_eq_str(acl.id.scheme, scheme));
	assert_true(zk_bytes_eq_str(acl.id.id, id));
}

struct dropped {
	int count;
	char path[64];
	int64_t owner;
};

static void on_dropped(void *ctx, const uint8_t *path, size_t size, int64_t owner)
{
	struct dropped *d = ctx;
	d->count++;
	assert_true(size < sizeof(d->path));
	memcpy(d->path, path, size);
	d->path[size] = '\0';
	d->owner = owner;
}

/* ---- tests ---- */

static void test_adler32(void **state)
{
	(void)state;
	assert_int_equal(zk_import_adler32(1, (const uint8_t *)"Wikipedia", 9), 0x11E60398u);
	assert_int_equal(zk_import_adler32(1, NULL, 0), 1u);
	/* Long input crosses the 5552-byte reduction blocks. */
	uint8_t big[20000];
	memset(big, 0xff, sizeof(big));
	uint32_t whole = zk_import_adler32(1, big, sizeof(big));
	uint32_t parts = zk_import_adler32(zk_import_adler32(1, big, 7777), big + 7777,
					   sizeof(big) - 7777);
	assert_int_equal(whole, parts);
}

static void test_snapshot(void **state)
{
	(void)state;
	struct files f;
	files_build(&f);
	assert_true(zk_import_snapshot_complete(f.snap.data, f.snap.size));
	assert_false(zk_import_snapshot_complete(f.snap.data, f.snap.size - 1));
	struct zk_import imp;
	init(&imp);
	struct zk_import_error err;
	assert_int_equal(zk_import_snapshot(&imp, f.snap.data, f.snap.size, SNAP_ZXID, &err),
			 KEEL_OK);
	assert_int_equal(imp.stats.snapshot_nodes, 7);
	assert_int_equal(imp.stats.snapshot_sessions, 1);
	assert_int_equal(imp.last_zxid, SNAP_ZXID);
	struct zk_node *a = node(&imp, "/a");
	assert_int_equal(a->czxid, 2);
	assert_int_equal(a->mzxid, 4);
	assert_int_equal(a->ctime, 1000);
	assert_int_equal(a->mtime, 2000);
	assert_int_equal(a->version, 1);
	assert_int_equal(a->cversion, 1);
	assert_int_equal(a->pzxid, 3);
	assert_data(&imp, "/a", "hello");
	assert_acl(&imp, "/a", 31, "digest", "alice:hash=");
	assert_acl(&imp, "/", 31, "world", "anyone");
	assert_acl(&imp, "/c", 1, "world", "anyone");
	assert_int_equal(node(&imp, "/a/e")->ephemeral_owner, SESSION_A);
	assert_int_equal(node(&imp, "/c")->ephemeral_owner, INT64_MIN);
	assert_int_equal(node(&imp, "/t")->ephemeral_owner, TTL_OWNER);
	assert_int_equal(node(&imp, "/")->cversion, 4);

	/* Without logs: the ephemeral is dropped, /zookeeper/config is keel's. */
	struct dropped d = {0, "", 0};
	assert_int_equal(zk_import_finish(&imp, on_dropped, &d), KEEL_OK);
	assert_int_equal(d.count, 1);
	assert_string_equal(d.path, "/a/e");
	assert_int_equal(d.owner, SESSION_A);
	assert_int_equal(node_id(&imp, "/a/e"), ZK_NODE_NONE);
	assert_int_equal(node(&imp, "/a")->pzxid, 3); /* untouched */
	assert_int_equal(node(&imp, "/zookeeper/config")->aversion, -1);
	assert_acl(&imp, "/zookeeper/config", 1, "world", "anyone");
	assert_int_equal(imp.st.last_zxid, SNAP_ZXID);
	zk_import_close(&imp);
	files_free(&f);
}

static void test_log_replay(void **state)
{
	(void)state;
	struct files f;
	files_build(&f);
	struct zk_import imp;
	init(&imp);
	struct zk_import_error err;
	assert_int_equal(zk_import_snapshot(&imp, f.snap.data, f.snap.size, SNAP_ZXID, &err),
			 KEEL_OK);
	assert_int_equal(zk_import_log(&imp, f.log.data, f.log.size, &err), KEEL_OK);
	assert_int_equal(imp.stats.txns_read, 16);
	assert_int_equal(imp.stats.txns_ignored, 2);
	assert_int_equal(imp.stats.txns_applied, 14);
	assert_int_equal(imp.stats.txn_errors, 2); /* 18 NodeExists, 19 NoNode */
	assert_int_equal(imp.last_zxid, 19);
	/* Txns 4 and 5 were in the snapshot: not applied again. */
	assert_int_equal(node_id(&imp, "/c/old"), ZK_NODE_NONE);
	assert_int_not_equal(node_id(&imp, "/zookeeper"), ZK_NODE_NONE);

	struct zk_node *a = node(&imp, "/a");
	assert_data(&imp, "/a", "hello3");
	assert_int_equal(a->version, 3);
	assert_int_equal(a->mzxid, 9);
	assert_int_equal(a->mtime, 10009);
	assert_int_equal(a->cversion, 3);  /* /a/f (2), /a/e2 (3) */
	assert_int_equal(a->pzxid, 16);
	assert_int_equal(a->czxid, 2);
	assert_acl(&imp, "/a", 1, "world", "anyone"); /* replaced by txn 18 */
	struct zk_node *af = node(&imp, "/a/f");
	assert_int_equal(af->czxid, 6);
	assert_int_equal(af->ctime, 10006);
	assert_int_equal(af->version, 0);
	assert_int_equal(node_id(&imp, "/a/e"), ZK_NODE_NONE); /* closeSession */
	struct zk_node *c = node(&imp, "/c");
	assert_int_equal(c->aversion, 1);
	assert_acl(&imp, "/c", 3, "ip", "10.0.0.0/8");
	assert_data(&imp, "/m", "m");
	assert_data(&imp, "/m/x", "x");
	assert_int_equal(node(&imp, "/m")->cversion, 1);
	assert_int_equal(node_id(&imp, "/t"), ZK_NODE_NONE);
	assert_int_equal(node(&imp, "/k")->ephemeral_owner, INT64_MIN);
	assert_int_equal(node(&imp, "/k/t")->ephemeral_owner, (int64_t)(UINT64_C(0xff00000000000000) | 90000u));
	struct zk_node *root = node(&imp, "/");
	assert_int_equal(root->cversion, 10); /* raised by txn 18 */
	assert_int_equal(root->pzxid, 19);    /* moved by txn 19 */

	struct dropped d = {0, "", 0};
	assert_int_equal(zk_import_finish(&imp, on_dropped, &d), KEEL_OK);
	assert_int_equal(d.count, 1);
	assert_string_equal(d.path, "/a/e2");
	assert_int_equal(d.owner, SESSION_B);
	assert_int_equal(imp.st.last_zxid, 19);

	/* The result is a valid keel state: its snapshot loads back equal. */
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 4096, 1u << 24);
	assert_int_equal(zk_snapshot_write(&imp.st, mem_write, &out, NULL), KEEL_OK);
	struct mem_reader mr = {out.data, out.size, 0};
	struct zk_config cfg;
	zk_config_default(&cfg);
	struct zk_state loaded;
	assert_int_equal(zk_snapshot_load(&loaded, &cfg, mem_read, &mr), KEEL_OK);
	assert_int_equal(zk_state_hash(&loaded), zk_state_hash(&imp.st));
	assert_int_equal(zk_state_node_count(&loaded), zk_state_node_count(&imp.st));
	const char *paths[] = {"/", "/a", "/a/f", "/c", "/k", "/k/t", "/m/x", "/zookeeper/config"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct zk_stat s1, s2;
		zk_state_stat(&imp.st, node_id(&imp, paths[i]), &s1);
		zk_state_stat(&loaded, zk_state_lookup(&loaded, zk_bytes_str(paths[i])), &s2);
		assert_true(zk_stat_eq(&s1, &s2));
	}
	zk_state_close(&loaded);
	keel_wbuf_free(&out);
	zk_import_close(&imp);
	files_free(&f);
}

static void test_empty_start(void **state)
{
	(void)state;
	struct keel_wbuf log;
	keel_wbuf_init_dynamic(&log, 1024, 1u << 20);
	keel_wbuf_u32(&log, 0x5a4b4c47);
	keel_wbuf_i32(&log, 2);
	keel_wbuf_i64(&log, 0);
	struct txn t;
	t_begin(&t, SESSION_A, 0x100000001, ZK_OP_CREATE);
	r_create(&t.w, "/x", "x", false, -1); /* V0-style: parent's + 1 */
	t_end(&log, &t, false);
	struct zk_import imp;
	init(&imp);
	assert_int_equal(zk_import_empty(&imp), KEEL_OK);
	struct zk_import_error err;
	assert_int_equal(zk_import_log(&imp, log.data, log.size, &err), KEEL_OK);
	assert_data(&imp, "/x", "x");
	/* ZooKeeper's initial root counts no create for /zookeeper. */
	assert_int_equal(node(&imp, "/")->cversion, 1);
	assert_int_equal(node(&imp, "/")->pzxid, 0x100000001);
	assert_int_equal(zk_import_finish(&imp, NULL, NULL), KEEL_OK);
	zk_import_close(&imp);
	keel_wbuf_free(&log);
}

/* Loads the snapshot, then the log; returns the log's result. */
static enum keel_err import_log(const struct files *f, const uint8_t *log, size_t size,
				struct zk_import_error *err)
{
	struct zk_import imp;
	init(&imp);
	assert_int_equal(zk_import_snapshot(&imp, f->snap.data, f->snap.size, SNAP_ZXID, err),
			 KEEL_OK);
	enum keel_err rc = zk_import_log(&imp, log, size, err);
	zk_import_close(&imp);
	return rc;
}

static void test_every_flipped_byte_refused(void **state)
{
	(void)state;
	struct files f;
	files_build(&f);
	uint8_t *copy = malloc(f.snap.size + f.log.size);
	assert_non_null(copy);
	struct zk_import_error err;
	for (size_t i = 0; i < f.snap.size; i++) {
		memcpy(copy, f.snap.data, f.snap.size);
		copy[i] ^= 0x10;
		struct zk_import imp;
		init(&imp);
		err.reason = NULL;
		assert_int_equal(zk_import_snapshot(&imp, copy, f.snap.size, SNAP_ZXID, &err),
				 KEEL_CORRUPT);
		assert_non_null(err.reason);
		assert_true(err.offset <= f.snap.size);
		zk_import_close(&imp);
	}
	for (size_t i = 0; i < f.log.size; i++) {
		if (i >= 8 && i < 16) {
			continue; /* the dbid: no checksum covers it, ZooKeeper ignores it */
		}
		memcpy(copy, f.log.data, f.log.size);
		copy[i] ^= 0x10;
		err.reason = NULL;
		assert_int_equal(import_log(&f, copy, f.log.size, &err), KEEL_CORRUPT);
		assert_non_null(err.reason);
		assert_true(err.offset <= i); /* at or before the damage */
	}
	/* A flipped byte in the padding is reported where it is. */
	memcpy(copy, f.log.data, f.log.size);
	copy[f.log.size - 7] = 1;
	assert_int_equal(import_log(&f, copy, f.log.size, &err), KEEL_CORRUPT);
	assert_int_equal(err.offset, f.log.size - 7);
	/* A txn record damaged: reported at its start (the first after the
	 * 16-byte header). */
	memcpy(copy, f.log.data, f.log.size);
	copy[16 + 12 + 3] ^= 1;
	assert_int_equal(import_log(&f, copy, f.log.size, &err), KEEL_CORRUPT);
	assert_int_equal(err.offset, 16);
	assert_string_equal(err.reason, "txn checksum (Adler-32) mismatch");
	free(copy);
	files_free(&f);
}

static void test_truncated_inputs_refused(void **state)
{
	(void)state;
	struct files f;
	files_build(&f);
	struct zk_import_error err;
	size_t end = f.log.size - LOG_PADDING;
	/* Cut anywhere inside the records: refused. A cut at a record
	 * boundary, or up to 4 bytes after it (the zero high half of the next
	 * record's checksum), is a log that simply ends there, as ZooKeeper
	 * reads it. */
	size_t boundaries = 0;
	for (size_t cut = 16; cut < end; cut++) {
		enum keel_err rc = import_log(&f, f.log.data, cut, &err);
		if (rc == KEEL_OK) {
			boundaries++;
		} else {
			assert_int_equal(rc, KEEL_CORRUPT);
		}
	}
	assert_int_equal(boundaries, 16 * 5); /* 16 records */
	/* A snapshot cut anywhere is refused, except right after the first
	 * seal: that is a snapshot from before 3.6, without the digest. */
	size_t first_seal_end = f.snap.size - (8 + 4 + 8) - (8 + 4 + 1);
	for (size_t cut = 0; cut < f.snap.size; cut++) {
		struct zk_import imp;
		init(&imp);
		assert_int_equal(zk_import_snapshot(&imp, f.snap.data, cut, SNAP_ZXID, &err),
				 cut == first_seal_end ? KEEL_OK : KEEL_CORRUPT);
		zk_import_close(&imp);
	}
	files_free(&f);
}

static void test_zxid_gap_refused(void **state)
{
	(void)state;
	struct files f;
	files_build(&f);
	struct keel_wbuf log;
	keel_wbuf_init_dynamic(&log, 1024, 1u << 20);
	keel_wbuf_u32(&log, 0x5a4b4c47);
	keel_wbuf_i32(&log, 2);
	keel_wbuf_i64(&log, 0);
	struct txn t;
	t_begin(&t, SESSION_A, SNAP_ZXID + 2, ZK_OP_CREATE); /* SNAP_ZXID + 1 missing */
	r_create(&t.w, "/x", "x", false, 5);
	t_end(&log, &t, false);
	size_t record = 16;
	struct zk_import_error err;
	assert_int_equal(import_log(&f, log.data, log.size, &err), KEEL_CORRUPT);
	assert_int_equal(err.offset, record);
	assert_int_equal(err.value, SNAP_ZXID + 2);
	keel_wbuf_free(&log);
	files_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adler32),
		cmocka_unit_test(test_snapshot),
		cmocka_unit_test(test_log_replay),
		cmocka_unit_test(test_empty_start),
		cmocka_unit_test(test_every_flipped_byte_refused),
		cmocka_unit_test(test_truncated_inputs_refused),
		cmocka_unit_test(test_zxid_gap_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
