/*
 * Unit tests: the watch manager and the watch-related requests.
 *
 * Event sequences are those Apache ZooKeeper 3.8 delivered in probes p6/p7
 * (data, exist and child watches, persistent and recursive watches,
 * checkWatches/removeWatches, setWatches/setWatches2 after a reconnect,
 * ACL-filtered delivery), except two places where keel follows ZooKeeper
 * 3.9's fixed WatchManager (ZOOKEEPER-4466): a one-shot watch added on top
 * of a persistent one no longer downgrades it, and checkWatches/
 * removeWatches with type Data/Children name only one-shot watches.
 */
#include "test_zk_helpers.h"

#include "base/assert.h"
#include "zk/zk_read.h"
#include "zk/zk_watch.h"

#define MAX_EVENTS 64

struct conn {
	struct zk_watch_conn wc;
	struct zk_ids ids;
	int count;
	int32_t type[MAX_EVENTS];
	char path[MAX_EVENTS][64];
};

static void on_event(void *ctx, struct zk_watch_conn *wc, const struct zk_watch_event *ev)
{
	(void)ctx;
	struct conn *c = KEEL_CONTAINER_OF(wc, struct conn, wc);
	assert_true(c->count < MAX_EVENTS);
	c->type[c->count] = ev->type;
	assert_true(ev->path.size < 64);
	memcpy(c->path[c->count], ev->path.data, (size_t)ev->path.size);
	c->path[c->count][ev->path.size] = '\0';
	c->count++;
}

struct world {
	struct zt z;
	struct zk_watches wm;
	int64_t sid;
	struct keel_wbuf out;
};

static void world_init(struct world *w, uint32_t max_per_conn)
{
	zt_init(&w->z);
	assert_int_equal(zk_watches_init(&w->wm, max_per_conn, 42, on_event, NULL), KEEL_OK);
	w->sid = zt_session(&w->z, 10000);
	keel_wbuf_init_dynamic(&w->out, 0, 1 << 16);
}

static void world_close(struct world *w)
{
	zk_watches_close(&w->wm);
	keel_wbuf_free(&w->out);
	zt_close(&w->z);
}

static void conn_open(struct world *w, struct conn *c, uint64_t id)
{
	memset(c, 0, sizeof(*c));
	zk_ids_init(&c->ids);
	assert_int_equal(zk_ids_add(&c->ids, zt_b("ip"), zt_b("127.0.0.1")), KEEL_OK);
	assert_int_equal(zk_watches_attach(&w->wm, &c->wc, id, &c->ids), KEEL_OK);
}

/* Applies a write as z's session and fires its triggers. */
static void fire(struct world *w)
{
	zk_watches_fire(&w->wm, &w->z.st, &w->z.res);
}

static void w_create(struct world *w, const char *path)
{
	assert_int_equal(zt_create(&w->z, w->sid, path, "", 0), ZK_OK);
	fire(w);
}

static void w_set(struct world *w, const char *path, const char *data)
{
	assert_int_equal(zt_set(&w->z, w->sid, path, zt_b(data), -1, NULL), ZK_OK);
	fire(w);
}

static void w_delete(struct world *w, const char *path)
{
	assert_int_equal(zt_delete(&w->z, w->sid, path, -1), ZK_OK);
	fire(w);
}

static int32_t rd(struct world *w, struct conn *c, int32_t opcode, const char *path, bool watch)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = opcode;
	req.u.read = (struct zk_path_watch_request){zt_b(path), watch};
	struct zk_read_ctx ctx = {&w->z.st, &w->wm, &c->wc, &c->ids, w->sid};
	keel_wbuf_reset(&w->out);
	return zk_read(&ctx, &req, &w->out);
}

static int32_t watch_op(struct world *w, struct conn *c, int32_t opcode, const char *path,
			int32_t type)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = opcode;
	if (opcode == ZK_OP_ADD_WATCH) {
		req.u.add_watch = (struct zk_add_watch_request){zt_b(path), type};
	} else {
		req.u.watches = (struct zk_watches_request){zt_b(path), type};
	}
	struct zk_read_ctx ctx = {&w->z.st, &w->wm, &c->wc, &c->ids, w->sid};
	keel_wbuf_reset(&w->out);
	return zk_read(&ctx, &req, &w->out);
}

/* Asserts the events since the last call, then forgets them. */
static void expect(struct conn *c, int n, ...)
{
	va_list ap;
	va_start(ap, n);
	if (c->count != n) {
		for (int i = 0; i < c->count; i++) {
			print_error("  event %d: %d %s\n", i, c->type[i], c->path[i]);
		}
	}
	assert_int_equal(c->count, n);
	for (int i = 0; i < n; i++) {
		int32_t type = va_arg(ap, int32_t);
		const char *path = va_arg(ap, const char *);
		assert_int_equal(c->type[i], type);
		assert_string_equal(c->path[i], path);
	}
	va_end(ap);
	c->count = 0;
}

static void test_one_shot_watches(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn b;
	conn_open(&w, &b, 2);
	w_create(&w, "/w");
	w_create(&w, "/w/x");
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/w/x", true), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/w/y", true), ZK_NO_NODE);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN, "/w", true), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/w/x", true), ZK_OK);
	w_set(&w, "/w/x", "2");
	expect(&b, 1, ZK_EVENT_NODE_DATA_CHANGED, "/w/x");
	w_set(&w, "/w/x", "3");
	expect(&b, 0); /* one-shot */
	w_create(&w, "/w/y");
	expect(&b, 2, ZK_EVENT_NODE_CREATED, "/w/y", ZK_EVENT_NODE_CHILDREN_CHANGED, "/w");
	/* A data and a child watch on one node: one NodeDeleted. */
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/w/x", true), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN, "/w/x", true), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN, "/w", true), ZK_OK);
	w_delete(&w, "/w/x");
	expect(&b, 2, ZK_EVENT_NODE_DELETED, "/w/x", ZK_EVENT_NODE_CHILDREN_CHANGED, "/w");
	assert_int_equal(zk_watches_count(&w.wm), 0);
	/* Failed reads set no watch (NoNode for getData/getChildren). */
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/nope", true), ZK_NO_NODE);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN, "/nope", true), ZK_NO_NODE);
	assert_int_equal(zk_watches_count(&w.wm), 0);
	/* getChildren2 watches children too. */
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN2, "/w", true), ZK_OK);
	w_create(&w, "/w/z");
	expect(&b, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/w");
	world_close(&w);
}

static void test_check_and_remove_watches(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn b, other;
	conn_open(&w, &b, 2);
	conn_open(&w, &other, 3);
	w_create(&w, "/w");
	w_create(&w, "/w/z");
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/w/z", true), ZK_OK);
	assert_int_equal(rd(&w, &other, ZK_OP_GET_CHILDREN, "/w/z", true), ZK_OK);
	/* Probe p6 answers, for b (which has only a data watch): */
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w/z", 1), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w/z", 2), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w/z", 3), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "/w/z", 1), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "/w/z", 2), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "/w/z", 2), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "/nonode", 3), ZK_NO_WATCHER);
	/* A path with no '/' breaks checkWatches' walk to the root in
	 * ZooKeeper (MarshallingError); removeWatches just finds nothing. */
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "wz", 2), ZK_MARSHALLING_ERROR);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "w/z", 2), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "", 2), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "w/z", 2), ZK_NO_WATCHER);
	assert_int_equal(w.out.size, 0);
	/* Types outside 1..5 do not parse (WatcherType.fromInt). */
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w/z", 0), ZK_MARSHALLING_ERROR);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w/z", 6), ZK_MARSHALLING_ERROR);
	/* The other connection's watch is untouched and still fires. */
	assert_int_equal(watch_op(&w, &other, ZK_OP_CHECK_WATCHES, "/w/z", 1), ZK_OK);
	w_create(&w, "/w/z/k");
	expect(&b, 0);
	expect(&other, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/w/z");
	/* removeWatches type Any drops every mode at the path. */
	assert_int_equal(watch_op(&w, &b, ZK_OP_ADD_WATCH, "/w", 0), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/w", true), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "/w", 3), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w", 3), ZK_NO_WATCHER);
	/* No watch manager (e.g. a read without a connection): NoWatcher. */
	struct zk_read_ctx ctx = {&w.z.st, NULL, NULL, &b.ids, w.sid};
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = ZK_OP_CHECK_WATCHES;
	req.u.watches = (struct zk_watches_request){zt_b("/w"), 3};
	assert_int_equal(zk_read(&ctx, &req, &w.out), ZK_NO_WATCHER);
	world_close(&w);
}

static void test_persistent_and_recursive(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn b;
	conn_open(&w, &b, 2);
	w_create(&w, "/w");
	/* addWatch answers ErrorResponse{0}; mode 2 does not parse. */
	assert_int_equal(watch_op(&w, &b, ZK_OP_ADD_WATCH, "/w", 0), ZK_OK);
	assert_int_equal(w.out.size, 4);
	assert_int_equal(keel_load_be32(w.out.data), 0);
	assert_int_equal(watch_op(&w, &b, ZK_OP_ADD_WATCH, "/r", 1), ZK_OK); /* need not exist */
	assert_int_equal(watch_op(&w, &b, ZK_OP_ADD_WATCH, "/r", 2), ZK_MARSHALLING_ERROR);
	w_create(&w, "/w/p");
	w_set(&w, "/w", "d");
	w_delete(&w, "/w/p");
	expect(&b, 3, ZK_EVENT_NODE_CHILDREN_CHANGED, "/w", ZK_EVENT_NODE_DATA_CHANGED, "/w",
	       ZK_EVENT_NODE_CHILDREN_CHANGED, "/w");
	w_create(&w, "/r");
	w_create(&w, "/r/a");
	w_create(&w, "/r/a/b");
	w_set(&w, "/r/a/b", "x");
	w_delete(&w, "/r/a/b");
	w_set(&w, "/r", "y");
	expect(&b, 6, ZK_EVENT_NODE_CREATED, "/r", ZK_EVENT_NODE_CREATED, "/r/a",
	       ZK_EVENT_NODE_CREATED, "/r/a/b", ZK_EVENT_NODE_DATA_CHANGED, "/r/a/b",
	       ZK_EVENT_NODE_DELETED, "/r/a/b", ZK_EVENT_NODE_DATA_CHANGED, "/r");
	/* Which types name a recursive watch (3.9 semantics). */
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/r", 3), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/r/a", 3), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/r", 2), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/r", 1), ZK_NO_WATCHER);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/r", 5), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w", 4), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/w", 5), ZK_NO_WATCHER);
	/* A one-shot data watch on top of a persistent one: both fire once,
	 * the persistent one stays (ZooKeeper 3.9; 3.8.0 downgraded it). */
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/w", true), ZK_OK);
	w_set(&w, "/w", "d2");
	w_set(&w, "/w", "d3");
	expect(&b, 2, ZK_EVENT_NODE_DATA_CHANGED, "/w", ZK_EVENT_NODE_DATA_CHANGED, "/w");
	/* removeWatches Persistent leaves nothing at /w. */
	assert_int_equal(watch_op(&w, &b, ZK_OP_REMOVE_WATCHES, "/w", 4), ZK_OK);
	w_set(&w, "/w", "d4");
	expect(&b, 0);
	/* Deleting the recursive root is seen too. */
	w_delete(&w, "/r/a");
	w_delete(&w, "/r");
	expect(&b, 2, ZK_EVENT_NODE_DELETED, "/r/a", ZK_EVENT_NODE_DELETED, "/r");
	world_close(&w);
}

static void test_dedup_and_many_connections(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn c[4];
	for (int i = 0; i < 4; i++) {
		conn_open(&w, &c[i], (uint64_t)i + 10);
	}
	w_create(&w, "/a");
	w_create(&w, "/a/b");
	/* c0: recursive on / and /a plus a data watch on /a/b: one event. */
	assert_int_equal(watch_op(&w, &c[0], ZK_OP_ADD_WATCH, "/", 1), ZK_OK);
	assert_int_equal(watch_op(&w, &c[0], ZK_OP_ADD_WATCH, "/a", 1), ZK_OK);
	assert_int_equal(rd(&w, &c[0], ZK_OP_GET_DATA, "/a/b", true), ZK_OK);
	for (int i = 1; i < 4; i++) {
		assert_int_equal(rd(&w, &c[i], ZK_OP_GET_DATA, "/a/b", true), ZK_OK);
	}
	w_set(&w, "/a/b", "x");
	for (int i = 0; i < 4; i++) {
		expect(&c[i], 1, ZK_EVENT_NODE_DATA_CHANGED, "/a/b");
	}
	w_set(&w, "/a/b", "y");
	expect(&c[0], 1, ZK_EVENT_NODE_DATA_CHANGED, "/a/b"); /* recursive only now */
	expect(&c[1], 0);
	/* Detaching drops every watch of the connection. */
	size_t before = zk_watches_count(&w.wm);
	zk_watches_detach(&w.wm, &c[0].wc);
	assert_int_equal(zk_watches_count(&w.wm), before - 2);
	w_set(&w, "/a/b", "z");
	expect(&c[0], 0);
	zk_watches_detach(&w.wm, &c[0].wc); /* twice is harmless */
	world_close(&w);
}

static void test_acl_filtered_delivery(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn b;
	conn_open(&w, &b, 2);
	/* The writer authenticates as u:p and creates nodes only it can read. */
	assert_int_equal(zk_ids_add(&w.z.ids, zt_b("digest"), zt_b("u:uWuE2q1Fv3A0TB/pXTNr+4g5Ufk=")),
			 KEEL_OK);
	struct zk_acl auth = {31, {zt_b("auth"), zt_b("")}};
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/sec", true), ZK_NO_NODE);
	keel_wbuf_reset(&w.z.acl);
	assert_int_equal(zt_create_full(&w.z, w.sid, ZK_OP_CREATE, "/sec", zt_b(""), 0,
					zk_acl_vec_build(&w.z.acl, &auth, 1), -1, NULL, NULL),
			 ZK_OK);
	fire(&w);
	expect(&b, 0);
	/* ... and the one-shot watch is consumed all the same. */
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/sec", 2), ZK_NO_WATCHER);
	/* Recursive: the protected node's event filtered, the open child's not. */
	assert_int_equal(watch_op(&w, &b, ZK_OP_ADD_WATCH, "/sec2", 1), ZK_OK);
	keel_wbuf_reset(&w.z.acl);
	assert_int_equal(zt_create_full(&w.z, w.sid, ZK_OP_CREATE, "/sec2", zt_b(""), 0,
					zk_acl_vec_build(&w.z.acl, &auth, 1), -1, NULL, NULL),
			 ZK_OK);
	fire(&w);
	w_create(&w, "/sec2/k");
	expect(&b, 1, ZK_EVENT_NODE_CREATED, "/sec2/k");
	/* exists() on a node without READ answers and sets its watch, as in
	 * ZooKeeper 3.8 (tests/compat/test_kazoo_data.py checks both). */
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/sec", true), ZK_OK);
	assert_int_equal(watch_op(&w, &b, ZK_OP_CHECK_WATCHES, "/sec", 2), ZK_OK);
	world_close(&w);
}

static int32_t set_watches(struct world *w, struct conn *c, int32_t opcode, int64_t rel,
			   const char *const *lists[5], const size_t counts[5])
{
	struct keel_wbuf e[5];
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	req.opcode = opcode;
	req.u.set_watches.relative_zxid = rel;
	for (int i = 0; i < 5; i++) {
		keel_wbuf_init_dynamic(&e[i], 0, 4096);
		req.u.set_watches.lists[i] = zk_str_vec_build(&e[i], lists[i], counts[i]);
	}
	struct zk_read_ctx ctx = {&w->z.st, &w->wm, &c->wc, &c->ids, w->sid};
	keel_wbuf_reset(&w->out);
	int32_t rc = zk_read(&ctx, &req, &w->out);
	for (int i = 0; i < 5; i++) {
		keel_wbuf_free(&e[i]);
	}
	return rc;
}

/* Probe p7: what changed since relativeZxid fires at once. */
static void test_set_watches_after_reconnect(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn b;
	conn_open(&w, &b, 2);
	w_create(&w, "/sw");
	assert_int_equal(zt_create(&w.z, w.sid, "/sw/d", "1", 0), ZK_OK);
	w_create(&w, "/sw/c");
	w_create(&w, "/sw/gone");
	int64_t rel = (int64_t)w.z.zxid;
	w_set(&w, "/sw/d", "2");
	w_create(&w, "/sw/c/k");
	w_delete(&w, "/sw/gone");
	w_create(&w, "/sw/new");
	const char *data[] = {"/sw/d", "/sw/gone", "/sw"};
	const char *exist[] = {"/sw/new", "/sw/nothere"};
	const char *child[] = {"/sw/c", "/sw/gone", "/sw/d"};
	const char *const *lists[5] = {data, exist, child, NULL, NULL};
	size_t counts[5] = {3, 2, 3, 0, 0};
	assert_int_equal(set_watches(&w, &b, ZK_OP_SET_WATCHES, rel, lists, counts), ZK_OK);
	assert_int_equal(w.out.size, 0);
	expect(&b, 5, ZK_EVENT_NODE_DATA_CHANGED, "/sw/d", ZK_EVENT_NODE_DELETED, "/sw/gone",
	       ZK_EVENT_NODE_CREATED, "/sw/new", ZK_EVENT_NODE_CHILDREN_CHANGED, "/sw/c",
	       ZK_EVENT_NODE_DELETED, "/sw/gone");
	/* The rest were registered. */
	w_create(&w, "/sw/nothere");
	w_set(&w, "/sw", "x");
	expect(&b, 2, ZK_EVENT_NODE_CREATED, "/sw/nothere", ZK_EVENT_NODE_DATA_CHANGED, "/sw");

	/* setWatches2: nothing new since (huge zxid); persistent lists too. */
	const char *d2[] = {"/sw/d"};
	const char *c2[] = {"/sw/c"};
	const char *p2[] = {"/sw/p"};
	const char *r2[] = {"/sw/r"};
	const char *const *lists2[5] = {d2, NULL, c2, p2, r2};
	size_t counts2[5] = {1, 0, 1, 1, 1};
	assert_int_equal(set_watches(&w, &b, ZK_OP_SET_WATCHES2, INT64_C(1) << 40, lists2, counts2),
			 ZK_OK);
	expect(&b, 0);
	w_set(&w, "/sw/d", "3");
	w_create(&w, "/sw/c/k2");
	w_create(&w, "/sw/p");
	w_create(&w, "/sw/r");
	w_create(&w, "/sw/r/x");
	expect(&b, 5, ZK_EVENT_NODE_DATA_CHANGED, "/sw/d", ZK_EVENT_NODE_CHILDREN_CHANGED, "/sw/c",
	       ZK_EVENT_NODE_CREATED, "/sw/p", ZK_EVENT_NODE_CREATED, "/sw/r", ZK_EVENT_NODE_CREATED,
	       "/sw/r/x");
	world_close(&w);
}

static void test_limit_and_memory(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 3);
	struct conn b;
	conn_open(&w, &b, 2);
	w_create(&w, "/a");
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/x1", true), ZK_NO_NODE);
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/x2", true), ZK_NO_NODE);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_DATA, "/a", true), ZK_OK);
	/* A second mode on a watched path is not a new watch. */
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN, "/a", true), ZK_OK);
	assert_int_equal(zk_watches_conn_count(&b.wc), 3);
	/* A fourth path: keel's per-connection limit. */
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/x3", true), ZK_QUOTA_EXCEEDED);
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/x3", false), ZK_NO_NODE);
	zk_watches_detach(&w.wm, &b.wc);
	world_close(&w);

	/* Many watches: entries are 28 bytes, paths interned once. */
	world_init(&w, 0);
	static struct conn many[100];
	for (int i = 0; i < 100; i++) {
		conn_open(&w, &many[i], (uint64_t)i);
	}
	char p[32];
	for (int k = 0; k < 1000; k++) {
		snprintf(p, sizeof(p), "/n%d", k);
		for (int i = 0; i < 100; i++) {
			assert_int_equal(rd(&w, &many[i], ZK_OP_EXISTS, p, true), ZK_NO_NODE);
		}
	}
	assert_int_equal(zk_watches_count(&w.wm), 100000);
	size_t bytes = zk_watches_memory(&w.wm);
	print_message("100000 watches on 1000 paths: %zu bytes (%.1f per watch)\n", bytes,
		      (double)bytes / 100000.0);
	assert_true(bytes / 100000 < 40);
	w_create(&w, "/n7");
	for (int i = 0; i < 100; i++) {
		expect(&many[i], 1, ZK_EVENT_NODE_CREATED, "/n7");
	}
	assert_int_equal(zk_watches_count(&w.wm), 99900);
	for (int i = 0; i < 100; i++) {
		zk_watches_detach(&w.wm, &many[i].wc);
	}
	assert_int_equal(zk_watches_count(&w.wm), 0);
	assert_int_equal(w.wm.path_count, 0);
	world_close(&w);
}

/* Issue 18: watches are weighed by their path bytes per connection. One
 * connection hits the byte budget with a clear QuotaExceeded; another
 * connection still watches the same paths; firing and removing a watch
 * gives its bytes back. */
static void test_watch_bytes_budget(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	zk_watches_set_max_bytes(&w.wm, 100);
	struct conn a, b;
	conn_open(&w, &a, 1);
	conn_open(&w, &b, 2);
	char p1[48], p2[48], p3[48];
	memset(p1, 'a', sizeof(p1));
	p1[0] = '/';
	p1[40] = '\0';
	memcpy(p2, p1, sizeof(p2));
	p2[1] = 'b';
	memcpy(p3, p1, sizeof(p3));
	p3[1] = 'c';
	assert_int_equal(rd(&w, &a, ZK_OP_EXISTS, p1, true), ZK_NO_NODE);
	assert_int_equal(rd(&w, &a, ZK_OP_EXISTS, p2, true), ZK_NO_NODE);
	assert_int_equal(a.wc.path_bytes, 80);
	/* Another mode on a held path costs nothing more. */
	assert_int_equal(watch_op(&w, &a, ZK_OP_ADD_WATCH, p2, ZK_ADD_WATCH_PERSISTENT), ZK_OK);
	assert_int_equal(a.wc.path_bytes, 80);
	/* 80 + 40 > 100: refused, the read itself still answered without it. */
	assert_int_equal(rd(&w, &a, ZK_OP_EXISTS, p3, true), ZK_QUOTA_EXCEEDED);
	assert_int_equal(rd(&w, &a, ZK_OP_EXISTS, p3, false), ZK_NO_NODE);
	assert_int_equal(zk_watches_conn_count(&a.wc), 2);
	/* The budget is per connection. */
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, p3, true), ZK_NO_NODE);
	assert_int_equal(b.wc.path_bytes, 40);
	/* A one-shot watch that fires gives its bytes back. */
	w_create(&w, p1);
	expect(&a, 1, ZK_EVENT_NODE_CREATED, p1);
	assert_int_equal(a.wc.path_bytes, 40);
	assert_int_equal(rd(&w, &a, ZK_OP_EXISTS, p3, true), ZK_NO_NODE);
	assert_int_equal(a.wc.path_bytes, 80);
	zk_watches_detach(&w.wm, &a.wc);
	zk_watches_detach(&w.wm, &b.wc);
	assert_int_equal(zk_watches_count(&w.wm), 0);
	world_close(&w);
}

static void test_session_close_fires(void **state)
{
	(void)state;
	struct world w;
	world_init(&w, 0);
	struct conn b;
	conn_open(&w, &b, 2);
	int64_t e = zt_session(&w.z, 4000);
	assert_int_equal(zt_create(&w.z, e, "/eph1", "", 1), ZK_OK);
	assert_int_equal(zt_create(&w.z, e, "/eph2", "", 1), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_EXISTS, "/eph1", true), ZK_OK);
	assert_int_equal(rd(&w, &b, ZK_OP_GET_CHILDREN, "/", true), ZK_OK);
	assert_int_equal(zt_close_session(&w.z, e), ZK_OK);
	fire(&w);
	expect(&b, 2, ZK_EVENT_NODE_DELETED, "/eph1", ZK_EVENT_NODE_CHILDREN_CHANGED, "/");
	world_close(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_shot_watches),
		cmocka_unit_test(test_check_and_remove_watches),
		cmocka_unit_test(test_persistent_and_recursive),
		cmocka_unit_test(test_dedup_and_many_connections),
		cmocka_unit_test(test_acl_filtered_delivery),
		cmocka_unit_test(test_set_watches_after_reconnect),
		cmocka_unit_test(test_limit_and_memory),
		cmocka_unit_test(test_watch_bytes_budget),
		cmocka_unit_test(test_session_close_fires),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
