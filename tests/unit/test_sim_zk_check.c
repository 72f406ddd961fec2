/* Unit tests: the ZooKeeper workload's checkers (sim/zk_check.c) on
 * hand-made histories. Each violation kind is caught, with the checker
 * that must catch it, and a correct history passes every checker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sim/zk_sim.h"
#include "zk/zk_codes.h"
#include "zk/zk_txn.h"

/* ---- building histories ---- */

static size_t send_op(struct simzk_history *h, uint64_t conn, int64_t session, int32_t opcode,
		      const char *path, uint64_t value, int32_t version)
{
	struct simzk_op op;
	memset(&op, 0, sizeof(op));
	op.kind = SIMZK_REQUEST;
	op.client = (uint32_t)conn;
	op.conn = conn;
	op.session = session;
	op.opcode = opcode;
	op.xid = (int32_t)h->op_count + 1;
	snprintf(op.path, sizeof(op.path), "%s", path);
	op.value = value;
	op.version = version;
	op.after_sync = SIMZK_NONE;
	op.zxid = -1;
	return simzk_history_invoke(h, &op);
}

static struct simzk_op *answer(struct simzk_history *h, size_t i, int32_t err, int64_t zxid)
{
	struct simzk_op *o = simzk_history_complete(h, i);
	o->err = err;
	o->zxid = zxid;
	return o;
}

/* A request answered at once. */
static struct simzk_op *call(struct simzk_history *h, uint64_t conn, int64_t session,
			     int32_t opcode, const char *path, uint64_t value, int32_t err,
			     int64_t zxid)
{
	return answer(h, send_op(h, conn, session, opcode, path, value, -1), err, zxid);
}

static struct simzk_op *get(struct simzk_history *h, uint64_t conn, int64_t session,
			    const char *path, bool watch, uint64_t value, int32_t version, int64_t zxid)
{
	size_t i = send_op(h, conn, session, ZK_OP_GET_DATA, path, 0, -1);
	h->ops[i].watch = watch;
	struct simzk_op *o = answer(h, i, value == 0 ? ZK_NO_NODE : 0, zxid);
	o->read_value = value;
	o->stat.version = version;
	return o;
}

static void event(struct simzk_history *h, uint64_t conn, int32_t type, const char *path)
{
	struct simzk_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.conn = conn;
	ev.type = type;
	ev.zxid = -1;
	snprintf(ev.path, sizeof(ev.path), "%s", path);
	simzk_history_event(h, &ev);
}

static const struct simzk_view no_servers = {NULL, 0, NULL, NULL};

/* create /w/k0 = 1 at zxid 2 (conn 1), set to 2 at zxid 3 (conn 2). */
static void base_history(struct simzk_history *h)
{
	simzk_history_init(h);
	struct simzk_op *c = call(h, 1, 11, ZK_OP_CREATE2, "/w/k0", 1, 0, 2);
	snprintf(c->created, sizeof(c->created), "/w/k0");
	get(h, 1, 11, "/w/k0", true, 1, 0, 2);
	struct simzk_op *s = call(h, 2, 22, ZK_OP_SET_DATA, "/w/k0", 2, 0, 3);
	s->stat.version = 1;
}

typedef bool (*checker_fn)(const struct simzk_history *h, char *why, size_t why_size);

/* The checker rejects h and says `says` (if not NULL) in why; frees h. */
static void rejects(struct simzk_history *h, checker_fn check, const char *says)
{
	char why[512] = "";
	assert_false(check(h, why, sizeof(why)));
	if (says != NULL && strstr(why, says) == NULL) {
		fail_msg("expected \"%s\" in: %s", says, why);
	}
	simzk_history_free(h);
}

static bool all_pass(const struct simzk_history *h, char *why, size_t size)
{
	return simzk_check_all(h, &no_servers, why, size);
}

/* ---- a correct history ---- */

static void test_correct_history_passes(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	event(&h, 1, ZK_EVENT_NODE_DATA_CHANGED, "/w/k0");
	get(&h, 1, 11, "/w/k0", false, 2, 1, 3);
	/* sync + read on conn 2 sees the set */
	size_t sync = send_op(&h, 2, 22, ZK_OP_SYNC, "/w/k0", 0, -1);
	size_t read = send_op(&h, 2, 22, ZK_OP_GET_DATA, "/w/k0", 0, -1);
	h.ops[read].after_sync = sync;
	answer(&h, sync, 0, 3);
	struct simzk_op *r = answer(&h, read, 0, 3);
	r->read_value = 2;
	r->stat.version = 1;
	/* a plain read may lag: at zxid 2 it shows value 1 */
	get(&h, 3, 33, "/w/k0", false, 1, 0, 2);
	char why[512] = "";
	assert_true(all_pass(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

/* ---- fifo ---- */

static void test_fifo_catches_out_of_order_reply(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	size_t a = send_op(&h, 1, 11, ZK_OP_GET_DATA, "/w/k0", 0, -1);
	size_t b = send_op(&h, 1, 11, ZK_OP_EXISTS, "/w/k0", 0, -1);
	answer(&h, b, ZK_NO_NODE, 1);
	answer(&h, a, ZK_NO_NODE, 1);
	rejects(&h, simzk_check_fifo, "before xid");
}

static void test_fifo_catches_reply_after_unanswered(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	size_t a = send_op(&h, 1, 11, ZK_OP_SET_DATA, "/w/k0", 5, -1);
	size_t b = send_op(&h, 1, 11, ZK_OP_EXISTS, "/w/k0", 0, -1);
	answer(&h, b, ZK_NO_NODE, 1);
	simzk_history_unknown(&h, a); /* never answered, the connection went on */
	rejects(&h, simzk_check_fifo, NULL);
}

static void test_fifo_catches_stray_reply(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	simzk_history_stray(&h, 1, 1, 7, "reply to xid 7, expected 0");
	rejects(&h, simzk_check_fifo, "xid 7");
}

static void test_fifo_catches_session_zxid_going_back(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	/* session 22 saw zxid 3; after a move it reads at zxid 2 */
	get(&h, 4, 22, "/w/k0", false, 1, 0, 2);
	char why[512] = "";
	assert_false(simzk_check_fifo(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "session 0x16"));
	/* another session may lag */
	simzk_history_free(&h);
	base_history(&h);
	get(&h, 4, 44, "/w/k0", false, 1, 0, 2);
	assert_true(simzk_check_fifo(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

/* ---- paths ---- */

static void test_paths_catch_stale_read_after_sync(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	/* plain read of the old value: fine (reads may lag) */
	get(&h, 3, 33, "/w/k0", false, 1, 0, 2);
	char why[512] = "";
	assert_true(simzk_check_paths(&h, why, sizeof(why)));
	/* the same read behind a sync invoked after the set returned: stale */
	size_t sync = send_op(&h, 3, 33, ZK_OP_SYNC, "/w/k0", 0, -1);
	size_t read = send_op(&h, 3, 33, ZK_OP_GET_DATA, "/w/k0", 0, -1);
	h.ops[read].after_sync = sync;
	answer(&h, sync, 0, 2);
	struct simzk_op *r = answer(&h, read, 0, 2);
	r->read_value = 1;
	r->stat.version = 0;
	assert_false(simzk_check_paths(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "not linearizable"));
	simzk_history_free(&h);
}

static void test_paths_catch_value_nobody_wrote(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	get(&h, 3, 33, "/w/k0", false, 99, 1, 3);
	rejects(&h, simzk_check_paths, "no write wrote");
}

static void test_paths_catch_value_of_failed_write(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	call(&h, 2, 22, ZK_OP_SET_DATA, "/w/k0", 7, ZK_BAD_VERSION, 4);
	get(&h, 3, 33, "/w/k0", false, 7, 2, 4);
	rejects(&h, simzk_check_paths, "failed");
}

static void test_paths_catch_read_missing_write_at_its_zxid(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	/* a read at zxid 3 must show the set of zxid 3 */
	get(&h, 3, 33, "/w/k0", false, 1, 0, 3);
	rejects(&h, simzk_check_paths, "but not the setData of zxid 3");
}

static void test_paths_catch_read_from_the_future(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	get(&h, 3, 33, "/w/k0", false, 2, 1, 2);
	rejects(&h, simzk_check_paths, "saw the write of zxid 3");
}

static void test_paths_catch_write_applied_twice(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	/* a second set whose Stat says version 3: one write applied twice */
	struct simzk_op *s = call(&h, 2, 22, ZK_OP_SET_DATA, "/w/k0", 3, 0, 5);
	s->stat.version = 3;
	char why[512] = "";
	assert_false(simzk_check_paths(&h, why, sizeof(why)));
	/* version 2 is right */
	s->stat.version = 2;
	assert_true(simzk_check_paths(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_paths_catch_two_creates(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	call(&h, 3, 33, ZK_OP_CREATE2, "/w/k0", 9, 0, 6);
	rejects(&h, simzk_check_paths, NULL);
}

static void test_paths_unknown_write_may_have_applied(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	size_t u = send_op(&h, 2, 22, ZK_OP_SET_DATA, "/w/k0", 8, -1);
	simzk_history_unknown(&h, u);
	get(&h, 3, 33, "/w/k0", false, 8, 2, 4);
	char why[512] = "";
	assert_true(simzk_check_paths(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_paths_ephemeral_goes_with_its_session(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	size_t c = send_op(&h, 1, 11, ZK_OP_CREATE2, "/e/k1", 1, -1);
	h.ops[c].flags = ZK_CREATE_EPHEMERAL;
	answer(&h, c, 0, 2);
	/* sync + read: gone before the session ended is wrong */
	size_t sync = send_op(&h, 2, 22, ZK_OP_SYNC, "/e/k1", 0, -1);
	size_t read = send_op(&h, 2, 22, ZK_OP_EXISTS, "/e/k1", 0, -1);
	h.ops[read].after_sync = sync;
	answer(&h, sync, 0, 2);
	answer(&h, read, ZK_NO_NODE, 2);
	char why[512] = "";
	/* The session may have ended after its last write: allowed. */
	assert_true(simzk_check_paths(&h, why, sizeof(why)));
	/* But not if the session wrote again after the sync read. */
	call(&h, 1, 11, ZK_OP_SET_DATA, "/w/k2", 5, ZK_NO_NODE, 3);
	struct simzk_op *later = call(&h, 1, 11, ZK_OP_CREATE2, "/w/k3", 6, 0, 4);
	(void)later;
	/* the read returned before that write was invoked, and the session
	 * was alive when the write was invoked: the ephemeral was there */
	assert_false(simzk_check_paths(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_paths_catch_sequence_out_of_order(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	struct simzk_op *a = call(&h, 1, 11, ZK_OP_CREATE2, "/s/n-", 1, 0, 5);
	a->flags = ZK_CREATE_PERSISTENT_SEQUENTIAL;
	snprintf(a->created, sizeof(a->created), "/s/n-0000000003");
	struct simzk_op *b = call(&h, 2, 22, ZK_OP_CREATE2, "/s/n-", 2, 0, 7);
	b->flags = ZK_CREATE_EPHEMERAL_SEQUENTIAL;
	snprintf(b->created, sizeof(b->created), "/s/n-0000000002");
	char why[512] = "";
	assert_false(simzk_check_paths(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "sequential"));
	snprintf(b->created, sizeof(b->created), "/s/n-0000000004");
	assert_true(simzk_check_paths(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

/* ---- watches ---- */

static void test_watch_order_catches_event_after_data(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	get(&h, 1, 11, "/w/k0", false, 2, 1, 3); /* shows the set... */
	event(&h, 1, ZK_EVENT_NODE_DATA_CHANGED, "/w/k0"); /* ...before its event */
	char why[512] = "";
	assert_false(simzk_check_watch_order(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "watch order"));
	assert_true(simzk_check_watch_lost(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_watch_lost_catches_missing_event(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	get(&h, 1, 11, "/w/k0", false, 2, 1, 3);
	char why[512] = "";
	assert_false(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "never notified"));
	assert_true(simzk_check_watch_order(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_watch_needs_nothing_of_a_connection_that_ended(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	/* conn 1 never saw zxid 3: its request was cut off */
	size_t i = send_op(&h, 1, 11, ZK_OP_GET_DATA, "/w/k0", 0, -1);
	simzk_history_unknown(&h, i);
	char why[512] = "";
	assert_true(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_true(simzk_check_watch_order(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_child_and_exists_watches(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	size_t e = send_op(&h, 1, 11, ZK_OP_EXISTS, "/w/k1", 0, -1);
	h.ops[e].watch = true;
	answer(&h, e, ZK_NO_NODE, 4);
	size_t ch = send_op(&h, 1, 11, ZK_OP_GET_CHILDREN, "/w", 0, -1);
	h.ops[ch].watch = true;
	answer(&h, ch, 0, 4);
	struct simzk_op *c = call(&h, 2, 22, ZK_OP_CREATE2, "/w/k1", 3, 0, 5);
	snprintf(c->created, sizeof(c->created), "/w/k1");
	event(&h, 1, ZK_EVENT_NODE_CREATED, "/w/k1");
	call(&h, 1, 11, ZK_OP_PING, "", 0, 0, 5);
	char why[512] = "";
	/* the child watch on /w got no NodeChildrenChanged */
	assert_false(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "watched /w "));
	simzk_history_free(&h);
}

static void test_recursive_watch_counts_every_change(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	size_t a = send_op(&h, 1, 11, ZK_OP_ADD_WATCH, "/w", 0, -1);
	h.ops[a].mode = ZK_ADD_WATCH_PERSISTENT_RECURSIVE;
	answer(&h, a, 0, 4);
	call(&h, 2, 22, ZK_OP_SET_DATA, "/w/k0", 5, 0, 5)->stat.version = 1;
	call(&h, 2, 22, ZK_OP_SET_DATA, "/w/k0", 6, 0, 6)->stat.version = 2;
	event(&h, 1, ZK_EVENT_NODE_DATA_CHANGED, "/w/k0");
	call(&h, 1, 11, ZK_OP_PING, "", 0, 0, 6);
	char why[512] = "";
	assert_false(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "recursively"));
	/* the second event, late */
	event(&h, 1, ZK_EVENT_NODE_DATA_CHANGED, "/w/k0");
	assert_true(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_false(simzk_check_watch_order(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_persistent_watch_sees_its_node_only(void **state)
{
	(void)state;
	struct simzk_history h;
	simzk_history_init(&h);
	size_t a = send_op(&h, 1, 11, ZK_OP_ADD_WATCH, "/w", 0, -1);
	h.ops[a].mode = ZK_ADD_WATCH_PERSISTENT;
	answer(&h, a, 0, 4);
	call(&h, 2, 22, ZK_OP_CREATE2, "/w/k1", 5, 0, 5);
	/* not below: the set of the child is not owed to a non-recursive watch */
	call(&h, 2, 22, ZK_OP_SET_DATA, "/w/k1", 6, 0, 6)->stat.version = 1;
	call(&h, 1, 11, ZK_OP_PING, "", 0, 0, 6);
	char why[512] = "";
	assert_false(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "persistently"));
	assert_non_null(strstr(why, "(type 4)"));
	simzk_history_free(&h);
	simzk_history_init(&h);
	a = send_op(&h, 1, 11, ZK_OP_ADD_WATCH, "/w", 0, -1);
	h.ops[a].mode = ZK_ADD_WATCH_PERSISTENT;
	answer(&h, a, 0, 4);
	call(&h, 2, 22, ZK_OP_CREATE2, "/w/k1", 5, 0, 5);
	event(&h, 1, ZK_EVENT_NODE_CHILDREN_CHANGED, "/w");
	call(&h, 2, 22, ZK_OP_SET_DATA, "/w/k1", 6, 0, 6)->stat.version = 1;
	call(&h, 1, 11, ZK_OP_PING, "", 0, 0, 6);
	assert_true(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_true(simzk_check_watch_order(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

/* setWatches on conn 5 after a move, relative to zxid 2: the data watch
 * on /w/k0 (bit 3) and the exist watch on /w/k1 (bit 4). */
static size_t set_watches(struct simzk_history *h)
{
	size_t i = send_op(h, 5, 11, ZK_OP_SET_WATCHES, "", 0, -1);
	h->ops[i].sw_data = (uint16_t)(1u << simzk_path_index("/w/k0"));
	h->ops[i].sw_exist = (uint16_t)(1u << simzk_path_index("/w/k1"));
	h->ops[i].relative_zxid = 2;
	return i;
}

static void test_set_watches_owes_catch_up_events(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h); /* the set of /w/k0 at zxid 3 is after zxid 2 */
	size_t sw = set_watches(&h);
	answer(&h, sw, 0, 3);
	char why[512] = "";
	assert_false(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_non_null(strstr(why, "setWatches"));
	simzk_history_free(&h);
	/* the catch-up event before the reply */
	base_history(&h);
	sw = set_watches(&h);
	event(&h, 5, ZK_EVENT_NODE_DATA_CHANGED, "/w/k0");
	answer(&h, sw, 0, 3);
	assert_true(simzk_check_watch_lost(&h, why, sizeof(why)));
	assert_true(simzk_check_watch_order(&h, why, sizeof(why)));
	simzk_history_free(&h);
}

static void test_set_watches_exist_owes_only_later_changes(void **state)
{
	(void)state;
	struct simzk_history h;
	base_history(&h);
	/* /w/k1 created and deleted between zxid 2 and the setWatches: no
	 * event is owed for the create */
	call(&h, 2, 22, ZK_OP_CREATE2, "/w/k1", 5, 0, 4);
	call(&h, 2, 22, ZK_OP_DELETE, "/w/k1", 0, 0, 5);
	size_t sw = set_watches(&h);
	event(&h, 5, ZK_EVENT_NODE_DATA_CHANGED, "/w/k0");
	answer(&h, sw, 0, 5);
	char why[512] = "";
	assert_true(simzk_check_watch_lost(&h, why, sizeof(why)));
	/* a create after the reply is owed */
	call(&h, 2, 22, ZK_OP_CREATE2, "/w/k1", 6, 0, 6);
	call(&h, 5, 11, ZK_OP_PING, "", 0, 0, 6);
	rejects(&h, simzk_check_watch_lost, "watched /w/k1");
}

/* ---- ephemerals and tree hash, over real ZooKeeper states ---- */

struct states {
	struct zk_state st[2];
	uint64_t applied[2];
};

static const struct zk_state *st_of(void *ctx, uint32_t server)
{
	return &((struct states *)ctx)->st[server];
}

static uint64_t applied_of(void *ctx, uint32_t server)
{
	return ((struct states *)ctx)->applied[server];
}

static void apply(struct states *s, uint32_t server, const struct keel_wbuf *txn,
		  struct zk_result *res)
{
	uint64_t zxid = ++s->applied[server];
	assert_int_equal(zk_apply(&s->st[server], zxid, txn->data, txn->size, res), KEEL_OK);
}

/* Both servers: a session (returned) with an ephemeral /e1. */
static int64_t setup_states(struct states *s, struct zk_result *res)
{
	struct zk_config cfg;
	zk_config_default(&cfg);
	memset(s, 0, sizeof(*s));
	struct keel_wbuf w, body;
	keel_wbuf_init_dynamic(&w, 256, 1 << 20);
	keel_wbuf_init_dynamic(&body, 256, 1 << 20);
	uint8_t passwd[ZK_PASSWD_SIZE] = {1};
	struct zk_txn_meta meta = {1000, 1, 0, 0};
	zk_txn_encode_create_session(&w, &meta, 10000, passwd);
	int64_t sid = 0;
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(zk_state_init(&s->st[i], &cfg), KEEL_OK);
		apply(s, i, &w, res);
		sid = res->new_session_id;
	}
	struct zk_request req = {.opcode = ZK_OP_CREATE};
	req.u.create = (struct zk_create_request){zk_bytes_str("/e1"), zk_bytes_of("x", 1),
						  zk_acl_open_unsafe(), ZK_CREATE_EPHEMERAL, -1};
	zk_request_body_encode(&body, &req);
	struct zk_ids ids;
	memset(&ids, 0, sizeof(ids));
	keel_wbuf_reset(&w);
	meta = (struct zk_txn_meta){1001, 1, 1, sid};
	zk_txn_encode_request(&w, &meta, &ids, ZK_OP_CREATE, body.data, body.size);
	for (uint32_t i = 0; i < 2; i++) {
		apply(s, i, &w, res);
		assert_int_equal(res->err, 0);
	}
	keel_wbuf_free(&w);
	keel_wbuf_free(&body);
	return sid;
}

static void close_session(struct states *s, uint32_t server, int64_t sid, struct zk_result *res)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1 << 20);
	struct zk_txn_meta meta = {1002, 0, 0, sid};
	zk_txn_encode_close_session(&w, &meta, ZK_CLOSE_EXPIRED);
	apply(s, server, &w, res);
	keel_wbuf_free(&w);
}

static void test_ephemerals_of_an_expired_session_must_go(void **state)
{
	(void)state;
	struct states s;
	struct zk_result res;
	zk_result_init(&res, 1 << 20);
	int64_t sid = setup_states(&s, &res);
	struct simzk_view v = {&s, 2, st_of, applied_of};
	struct simzk_history h;
	simzk_history_init(&h);
	char why[512] = "";
	/* nobody learned the session ended: holding it is fine */
	assert_true(simzk_check_ephemerals(&h, &v, why, sizeof(why)));
	/* a client was told it expired */
	struct simzk_op op;
	memset(&op, 0, sizeof(op));
	op.kind = SIMZK_CONNECT;
	op.session = sid;
	op.after_sync = SIMZK_NONE;
	size_t i = simzk_history_invoke(&h, &op);
	simzk_history_complete(&h, i)->expired = true;
	assert_false(simzk_check_ephemerals(&h, &v, why, sizeof(why)));
	assert_non_null(strstr(why, "server 0"));
	/* server 0 applies the expiry; server 1 still holds it */
	close_session(&s, 0, sid, &res);
	assert_false(simzk_check_ephemerals(&h, &v, why, sizeof(why)));
	assert_non_null(strstr(why, "server 1"));
	close_session(&s, 1, sid, &res);
	assert_true(simzk_check_ephemerals(&h, &v, why, sizeof(why)));
	simzk_history_free(&h);
	zk_state_close(&s.st[0]);
	zk_state_close(&s.st[1]);
	zk_result_close(&res);
}

static void test_tree_hash_differs(void **state)
{
	(void)state;
	struct states s;
	struct zk_result res;
	zk_result_init(&res, 1 << 20);
	int64_t sid = setup_states(&s, &res);
	struct simzk_view v = {&s, 2, st_of, applied_of};
	char why[512] = "";
	assert_true(simzk_check_tree_hash(&v, why, sizeof(why)));
	close_session(&s, 0, sid, &res);
	assert_false(simzk_check_tree_hash(&v, why, sizeof(why)));
	/* same index, different trees */
	s.applied[1] = s.applied[0];
	assert_false(simzk_check_tree_hash(&v, why, sizeof(why)));
	assert_non_null(strstr(why, "server 1 at index"));
	s.applied[1]--;
	close_session(&s, 1, sid, &res);
	assert_true(simzk_check_tree_hash(&v, why, sizeof(why)));
	zk_state_close(&s.st[0]);
	zk_state_close(&s.st[1]);
	zk_result_close(&res);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_correct_history_passes),
		cmocka_unit_test(test_fifo_catches_out_of_order_reply),
		cmocka_unit_test(test_fifo_catches_reply_after_unanswered),
		cmocka_unit_test(test_fifo_catches_stray_reply),
		cmocka_unit_test(test_fifo_catches_session_zxid_going_back),
		cmocka_unit_test(test_paths_catch_stale_read_after_sync),
		cmocka_unit_test(test_paths_catch_value_nobody_wrote),
		cmocka_unit_test(test_paths_catch_value_of_failed_write),
		cmocka_unit_test(test_paths_catch_read_missing_write_at_its_zxid),
		cmocka_unit_test(test_paths_catch_read_from_the_future),
		cmocka_unit_test(test_paths_catch_write_applied_twice),
		cmocka_unit_test(test_paths_catch_two_creates),
		cmocka_unit_test(test_paths_unknown_write_may_have_applied),
		cmocka_unit_test(test_paths_ephemeral_goes_with_its_session),
		cmocka_unit_test(test_paths_catch_sequence_out_of_order),
		cmocka_unit_test(test_watch_order_catches_event_after_data),
		cmocka_unit_test(test_watch_lost_catches_missing_event),
		cmocka_unit_test(test_watch_needs_nothing_of_a_connection_that_ended),
		cmocka_unit_test(test_child_and_exists_watches),
		cmocka_unit_test(test_recursive_watch_counts_every_change),
		cmocka_unit_test(test_persistent_watch_sees_its_node_only),
		cmocka_unit_test(test_set_watches_owes_catch_up_events),
		cmocka_unit_test(test_set_watches_exist_owes_only_later_changes),
		cmocka_unit_test(test_ephemerals_of_an_expired_session_must_go),
		cmocka_unit_test(test_tree_hash_differs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
