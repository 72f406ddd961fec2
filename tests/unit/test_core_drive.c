/* Unit tests: the server core (core/core.h) runs without libuv behind a
 * fake host. A one-server cluster elects itself, and a proposed entry is
 * applied only after the host reported its persist batch durable (the
 * leader counts itself only after its own fsync); durability reports
 * come in persist order; randomness comes only from the start seed. A
 * ZooKeeper client connection, named only by its id, gets its session and
 * its write answered by the core's own client code (core/client_zk.h),
 * each only once its entry is durable and applied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/client_zk.h"
#include "core/core.h"
#include "core/entry.h"
#include "core/feed.h"
#include "core/fsm.h"
#include "zk/zk_codes.h"
#include "zk/zk_jute.h"
#include "zk/zk_proto.h"
#include "zk/zk_state.h"

#define MAX_PENDING 64

struct fake_host {
	uint64_t now_ms;
	uint64_t pending[MAX_PENDING]; /* persist ids handed out, not yet durable */
	size_t n_pending;
	uint64_t persisted_total;
	bool drive_due;
	bool failed;
	bool refuse_persist; /* persist returns KEEL_IO */
	size_t applied_book;
	/* The one client connection the tests open (its id: conn). */
	uint64_t conn;
	struct keel_wbuf out;  /* the frame being written (client_begin) */
	uint8_t *frames[8];    /* every frame sent to it, in order */
	size_t frame_sizes[8];
	size_t n_frames;
	bool paused;
	bool closed;
};

static enum keel_err fh_persist(void *ctx, const struct raft_ready *rd)
{
	struct fake_host *h = ctx;
	if (h->refuse_persist) {
		return KEEL_IO;
	}
	assert_true(h->n_pending < MAX_PENDING);
	if (h->n_pending > 0) {
		assert_true(rd->persist_id > h->pending[h->n_pending - 1]);
	}
	h->pending[h->n_pending++] = rd->persist_id;
	return KEEL_OK;
}

static struct keel_wbuf *fh_peer_begin(void *ctx, uint64_t to, uint8_t type, size_t *mark)
{
	(void)ctx, (void)to, (void)type, (void)mark;
	return NULL; /* one server: no peers */
}

static void fh_peer_end(void *ctx, uint64_t to, size_t mark)
{
	(void)ctx, (void)to, (void)mark;
	fail_msg("peer_end without a begin");
}

static bool fh_peer_connected(void *ctx, uint64_t to)
{
	(void)ctx, (void)to;
	return false;
}

static uint64_t fh_now_ms(void *ctx)
{
	return ((struct fake_host *)ctx)->now_ms;
}

static int64_t fh_wall_ms(void *ctx)
{
	return 1700000000000 + (int64_t)((struct fake_host *)ctx)->now_ms;
}

static uint64_t fh_mono_ns(void *ctx)
{
	return ((struct fake_host *)ctx)->now_ms * 1000000u;
}

static void fh_log(void *ctx, enum core_log_level level, const char *fmt, va_list ap)
{
	(void)ctx, (void)level, (void)fmt, (void)ap;
}

static enum keel_err fh_snapshot_read(void *ctx, uint64_t index, uint64_t term, uint64_t offset,
                                      void *buf, size_t size, size_t *got)
{
	(void)ctx, (void)index, (void)term, (void)offset, (void)buf, (void)size, (void)got;
	return KEEL_IO;
}

static enum keel_err fh_snapshot_load(void *ctx, const struct raft_snapshot_meta *meta)
{
	(void)ctx, (void)meta;
	return KEEL_IO;
}

static void fh_schedule_drive(void *ctx)
{
	((struct fake_host *)ctx)->drive_due = true;
}

static void fh_on_failed(void *ctx)
{
	((struct fake_host *)ctx)->failed = true;
}

static void fh_book_changed(void *ctx)
{
	((struct fake_host *)ctx)->applied_book++;
}

static void fh_nothing(void *ctx)
{
	(void)ctx;
}

static struct keel_wbuf *fh_client_begin(void *ctx, uint64_t conn, size_t *mark)
{
	struct fake_host *h = ctx;
	assert_int_equal(conn, h->conn);
	keel_wbuf_reset(&h->out);
	*mark = 0;
	return h->closed ? NULL : &h->out;
}

static void fh_client_send(void *ctx, uint64_t conn, const void *payload, size_t size)
{
	struct fake_host *h = ctx;
	assert_int_equal(conn, h->conn);
	assert_true(h->n_frames < KEEL_ARRAY_SIZE(h->frames));
	h->frames[h->n_frames] = malloc(size);
	assert_non_null(h->frames[h->n_frames]);
	memcpy(h->frames[h->n_frames], payload, size);
	h->frame_sizes[h->n_frames++] = size;
}

static void fh_client_end(void *ctx, uint64_t conn, size_t mark)
{
	struct fake_host *h = ctx;
	assert_int_equal(mark, 0);
	assert_true(keel_wbuf_ok(&h->out));
	fh_client_send(ctx, conn, h->out.data, h->out.size);
}

static void fh_client_pause(void *ctx, uint64_t conn, bool paused)
{
	struct fake_host *h = ctx;
	assert_int_equal(conn, h->conn);
	h->paused = paused;
}

static void fh_client_close(void *ctx, uint64_t conn, enum keel_err reason, bool flush)
{
	struct fake_host *h = ctx;
	(void)reason, (void)flush;
	assert_int_equal(conn, h->conn);
	h->closed = true;
}

static bool fh_client_paused(void *ctx, uint64_t conn)
{
	struct fake_host *h = ctx;
	assert_int_equal(conn, h->conn);
	return h->paused;
}

static enum keel_err fh_random(void *ctx, void *buf, size_t size)
{
	(void)ctx;
	memset(buf, 0x5a, size);
	return KEEL_OK;
}

static bool fh_addr_ok(void *ctx, const char *addr)
{
	(void)ctx;
	return strchr(addr, ':') != NULL;
}

static bool fh_session_proof_ok(void *ctx, uint64_t session_id, const uint8_t passwd[16],
                                const uint8_t *proof, size_t size)
{
	(void)ctx, (void)session_id, (void)passwd, (void)proof, (void)size;
	return false;
}

static size_t fh_client_output_bytes(void *ctx, uint64_t conn)
{
	(void)ctx, (void)conn;
	return 0; /* written at once */
}

static void fh_feed_wait(void *ctx, bool waiting)
{
	(void)ctx, (void)waiting;
	fail_msg("nothing waits on a feed here");
}

static const struct core_host_ops fake_ops = {
        .persist = fh_persist,
        .peer_begin = fh_peer_begin,
        .peer_end = fh_peer_end,
        .peer_connected = fh_peer_connected,
        .now_ms = fh_now_ms,
        .wall_ms = fh_wall_ms,
        .mono_ns = fh_mono_ns,
        .log = fh_log,
        .snapshot_read = fh_snapshot_read,
        .snapshot_load = fh_snapshot_load,
        .schedule_drive = fh_schedule_drive,
        .on_failed = fh_on_failed,
        .client_begin = fh_client_begin,
        .client_end = fh_client_end,
        .client_send = fh_client_send,
        .client_pause = fh_client_pause,
        .client_close = fh_client_close,
        .client_paused = fh_client_paused,
        .random_bytes = fh_random,
        .addr_ok = fh_addr_ok,
        .session_proof_ok = fh_session_proof_ok,
        .client_output_bytes = fh_client_output_bytes,
        .feed_wait = fh_feed_wait,
        .book_changed = fh_book_changed,
        .maybe_snapshot = fh_nothing,
};

static enum keel_err image_save(void *ctx, fsm_write_fn write, void *write_ctx)
{
	(void)ctx, (void)write, (void)write_ctx;
	return KEEL_OK;
}

static enum keel_err image_load(void *ctx, const uint8_t *data, size_t size, char *err,
                                size_t err_size)
{
	(void)ctx, (void)data, (void)size, (void)err, (void)err_size;
	return KEEL_OK;
}

static const struct fsm_image_ops image_ops = {image_save, image_load, NULL};

struct fixture {
	struct fake_host host;
	struct node_core core;
	struct zk_config zk;
};

/* A core for server 1 of a one-server cluster, restored from the
 * bootstrap entry. */
static void open_core(struct fixture *f, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	struct core_host host = {&fake_ops, &f->host};
	core_init(&f->core, 1, &host, seed);
	zk_config_default(&f->zk);
	struct core_options o = {
	        .election_timeout_ms = 100,
	        .heartbeat_ms = 20,
	        .snapshot_chunk_bytes = 4096,
	        .snapshot_trailing = 16,
	        .max_entry_bytes = 1 << 16,
	        .zk_config = &f->zk,
	        .image = &image_ops,
	};
	char err[128];
	assert_int_equal(core_open(&f->core, &o, err, sizeof(err)), KEEL_OK);
	struct raft_config config;
	memset(&config, 0, sizeof(config));
	config.members[0].id = 1;
	config.members[0].role = RAFT_VOTER;
	config.count = 1;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 4096);
	struct raft_entry boot;
	assert_int_equal(raft_bootstrap_entry(&config, &w, &boot), KEEL_OK);
	struct raft_hard_state hs = {.term = 1, .vote = 0};
	assert_int_equal(raft_restore(f->core.raft, &hs, NULL, &boot, 1), KEEL_OK);
	keel_wbuf_free(&w);
}

/* Reports every batch handed out so far durable, in order. */
static void make_durable(struct fixture *f)
{
	for (size_t i = 0; i < f->host.n_pending; i++) {
		core_on_durable(&f->core, f->host.pending[i], KEEL_OK);
		f->host.persisted_total++;
	}
	f->host.n_pending = 0;
	core_drive(&f->core);
}

/* Ticks (and makes everything durable) until the server leads. */
static void elect(struct fixture *f)
{
	for (int i = 0; i < 200 && f->core.leader != 1; i++) {
		f->host.now_ms += 10;
		core_tick(&f->core, f->host.now_ms);
		core_drive(&f->core);
		make_durable(f);
	}
	assert_int_equal(f->core.leader, 1);
	assert_int_equal(f->core.role, RAFT_LEADER);
}

static void propose_address(struct fixture *f, uint64_t id, const char *peer)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 4096);
	node_entry_encode_header(&w, NODE_ENTRY_CLUSTER, 0, 0, 0);
	keel_wbuf_u8(&w, NODE_CLUSTER_SET_ADDR);
	keel_wbuf_u64(&w, id);
	keel_wbuf_u16(&w, (uint16_t)strlen(peer));
	keel_wbuf_bytes(&w, peer, strlen(peer));
	keel_wbuf_u16(&w, 0);
	assert_true(keel_wbuf_ok(&w));
	uint64_t index = 0, term = 0;
	assert_int_equal(core_propose(&f->core, w.data, (uint32_t)w.size, &index, &term), KEEL_OK);
	assert_true(index > f->core.applied_index);
	keel_wbuf_free(&w);
}

static void test_applies_only_after_durable(void **state)
{
	(void)state;
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	open_core(f, 42);
	elect(f);
	uint64_t applied_before = f->core.applied_index;
	size_t book_before = f->host.applied_book;
	propose_address(f, 7, "127.0.0.1:7000");
	core_drive(&f->core);
	/* Handed to storage, not durable: nothing is applied. */
	assert_true(f->host.n_pending > 0);
	assert_int_equal(f->core.applied_index, applied_before);
	assert_null(core_addr_find(&f->core, 7));
	assert_int_equal(f->host.applied_book, book_before);
	make_durable(f);
	const struct node_addr *a = core_addr_find(&f->core, 7);
	assert_non_null(a);
	assert_string_equal(a->peer_addr, "127.0.0.1:7000");
	assert_int_equal(f->host.applied_book, book_before + 1);
	assert_true(f->core.applied_index > applied_before);
	assert_int_equal(f->core.commit_index, f->core.applied_index);
	assert_false(f->host.failed);
	core_stop(&f->core);
	core_close(&f->core);
	free(f);
}

/* A storage failure stops the core: nothing more is applied, the host is
 * told to stop. */
static void test_storage_failure_stops(void **state)
{
	(void)state;
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	open_core(f, 43);
	elect(f);
	uint64_t applied_before = f->core.applied_index;
	propose_address(f, 9, "127.0.0.1:9000");
	core_drive(&f->core);
	assert_true(f->host.n_pending > 0);
	core_on_durable(&f->core, f->host.pending[0], KEEL_IO);
	assert_true(f->core.failed);
	assert_true(f->host.failed);
	assert_int_equal(f->core.applied_index, applied_before);
	assert_null(core_addr_find(&f->core, 9));
	core_close(&f->core);
	free(f);
}

/* Storage refuses a batch whose ready also carries committed entries:
 * the core stops without applying them (nor sending anything), so no part
 * of the state moves on after the failure. */
static void test_refused_persist_applies_nothing(void **state)
{
	(void)state;
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	open_core(f, 44);
	elect(f);
	uint64_t applied_before = f->core.applied_index;
	propose_address(f, 9, "127.0.0.1:9000");
	core_drive(&f->core);
	assert_true(f->host.n_pending > 0);
	/* A second entry waits for the next ready, with the first's commit. */
	propose_address(f, 10, "127.0.0.1:10000");
	f->host.refuse_persist = true;
	for (size_t i = 0; i < f->host.n_pending; i++) {
		core_on_durable(&f->core, f->host.pending[i], KEEL_OK);
	}
	core_drive(&f->core);
	assert_true(f->core.failed);
	assert_true(f->host.failed);
	assert_int_equal(f->core.applied_index, applied_before);
	assert_null(core_addr_find(&f->core, 9));
	assert_null(core_addr_find(&f->core, 10));
	core_close(&f->core);
	free(f);
}

/* A ZooKeeper client of the core, by connection id only: its
 * ConnectRequest becomes a session and its create a znode, each answered
 * on the connection only once the entry is durable and applied. */
/* A create request (world:anyone, persistent) with one byte of data. */
static void encode_create(struct keel_wbuf *w, int32_t xid, const char *path, const char *data)
{
	keel_wbuf_reset(w);
	keel_wbuf_i32(w, xid);
	keel_wbuf_i32(w, ZK_OP_CREATE);
	zk_write_str(w, path);
	zk_write_bytes(w, zk_bytes_of(data, 1));
	keel_wbuf_i32(w, 1);
	keel_wbuf_i32(w, ZK_PERM_ALL);
	zk_write_str(w, "world");
	zk_write_str(w, "anyone");
	keel_wbuf_i32(w, 0);
}

static void test_zk_client_by_id(void **state)
{
	(void)state;
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	open_core(f, 44);
	struct fake_host *h = &f->host;
	keel_wbuf_init_dynamic(&h->out, 256, 1 << 16);
	h->conn = 7;
	struct zk_clients_options zo = {
	        .max_packet_bytes = 1 << 20,
	        .max_pending_per_connection = 100,
	        .max_watches_per_connection = 100,
	        .housekeeping_ms = 1000,
	        .insecure_peers = true,
	};
	char err[128];
	assert_int_equal(zk_clients_open(&f->core, &zo, err, sizeof(err)), KEEL_OK);
	elect(f);

	zk_conn_open(&f->core, 7, "10.0.0.1:4000", NULL);
	uint8_t passwd[16] = {0};
	struct zk_connect_request cr = {
	        .timeout_ms = 10000,
	        .passwd = zk_bytes_of(passwd, sizeof(passwd)),
	};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 4096);
	zk_connect_request_encode(&w, &cr);
	assert_false(zk_conn_on_frame(&f->core, 7, w.data, w.size));
	core_drive(&f->core);
	/* Proposed, not durable: no answer yet, and no request is read. */
	assert_true(h->paused);
	assert_int_equal(h->n_frames, 0);
	make_durable(f);
	assert_int_equal(h->n_frames, 1);
	struct zk_connect_response rsp;
	assert_int_equal(zk_connect_response_decode(&rsp, h->frames[0], h->frame_sizes[0]),
	                 KEEL_OK);
	assert_int_not_equal(rsp.session_id, 0);
	assert_int_equal(rsp.timeout_ms, 10000);
	assert_false(h->paused);

	/* create /a: answered after its entry is applied, with its path. */
	encode_create(&w, 1, "/a", "x");
	assert_true(keel_wbuf_ok(&w));
	struct node_feed_stats fs;
	node_feed_stats(&f->core, &fs);
	uint64_t held_before = fs.history_changes;
	assert_true(zk_conn_on_frame(&f->core, 7, w.data, w.size));
	core_drive(&f->core);
	assert_int_equal(h->n_frames, 1);
	make_durable(f);
	assert_int_equal(h->n_frames, 2);
	node_feed_stats(&f->core, &fs);
	assert_int_equal(fs.history_changes, held_before + 1); /* the feed saw the create */
	struct keel_rbuf r;
	keel_rbuf_init(&r, h->frames[1], h->frame_sizes[1]);
	struct zk_reply_header rh;
	assert_int_equal(zk_reply_header_decode(&rh, &r), KEEL_OK);
	assert_int_equal(rh.xid, 1);
	assert_int_equal(rh.err, ZK_OK);
	assert_int_equal(rh.zxid, (int64_t)f->core.applied_index);
	struct zk_bytes path = zk_read_bytes(&r);
	assert_true(keel_rbuf_ok(&r));
	assert_true(zk_bytes_eq_str(path, "/a"));
	assert_int_not_equal(zk_state_lookup(fsm_zk(f->core.fsm), zk_bytes_str("/a")),
	                     ZK_NODE_NONE);
	assert_false(h->closed);

	/* create /b, then getData /b behind it in the connection's order: the
	 * read is served when the create applies, sees /b, and answers with a
	 * zxid no older than the create's (it was the index before it). */
	encode_create(&w, 2, "/b", "y");
	assert_true(zk_conn_on_frame(&f->core, 7, w.data, w.size));
	keel_wbuf_reset(&w);
	keel_wbuf_i32(&w, 3);
	keel_wbuf_i32(&w, ZK_OP_GET_DATA);
	zk_write_str(&w, "/b");
	keel_wbuf_u8(&w, 0);
	assert_true(keel_wbuf_ok(&w));
	assert_true(zk_conn_on_frame(&f->core, 7, w.data, w.size));
	core_drive(&f->core);
	assert_int_equal(h->n_frames, 2);
	make_durable(f);
	assert_int_equal(h->n_frames, 4);
	struct zk_reply_header created, read;
	keel_rbuf_init(&r, h->frames[2], h->frame_sizes[2]);
	assert_int_equal(zk_reply_header_decode(&created, &r), KEEL_OK);
	keel_rbuf_init(&r, h->frames[3], h->frame_sizes[3]);
	assert_int_equal(zk_reply_header_decode(&read, &r), KEEL_OK);
	assert_int_equal(created.xid, 2);
	assert_int_equal(created.err, ZK_OK);
	assert_int_equal(read.xid, 3);
	assert_int_equal(read.err, ZK_OK);
	assert_true(read.zxid >= created.zxid);

	zk_conn_on_close(&f->core, 7);
	zk_clients_close(&f->core);
	core_stop(&f->core);
	core_close(&f->core);
	for (size_t i = 0; i < h->n_frames; i++) {
		free(h->frames[i]);
	}
	keel_wbuf_free(&h->out);
	keel_wbuf_free(&w);
	free(f);
}

/* The same seed gives the same derived seeds; another seed others. */
static void test_seeded(void **state)
{
	(void)state;
	struct core_host host = {&fake_ops, NULL};
	struct node_core *a = calloc(1, sizeof(*a));
	struct node_core *b = calloc(1, sizeof(*b));
	assert_non_null(a);
	assert_non_null(b);
	core_init(a, 1, &host, 5);
	core_init(b, 1, &host, 5);
	uint64_t x = core_seed_next(a);
	assert_int_equal(x, core_seed_next(b));
	core_init(b, 1, &host, 6);
	assert_int_not_equal(x, core_seed_next(b));
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_applies_only_after_durable),
	        cmocka_unit_test(test_storage_failure_stops),
	        cmocka_unit_test(test_refused_persist_applies_nothing),
	        cmocka_unit_test(test_zk_client_by_id),
	        cmocka_unit_test(test_seeded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
