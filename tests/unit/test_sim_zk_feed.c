/*
 * test_sim_zk_feed.c — the simulator's change-feed consumers and their
 * checker (sim/zk_feed.c) against scripted servers: each server keeps a
 * real history (zk_feed_log, trimmed now and then) and answers the
 * consumers' FeedRequests on the wire with the real encoders and cursor.
 * Correct servers pass; a server that loses or repeats an event, or says
 * COMPACTED for a position it holds, fails the check; so does the planted
 * consumer bug (resume after the last zxid instead of the last change).
 */
#include "test_zk_helpers.h"

#include "base/rng.h"
#include "sim/zk_sim.h"
#include "zk/zk_codes.h"
#include "zk/zk_feed.h"

#define SERVERS 3

enum fault { FAULT_NONE, FAULT_DROP, FAULT_REPEAT, FAULT_FALSE_COMPACTED };

struct sub {
	bool live;
	uint64_t conn;
	uint32_t server;
	char prefix[16];
	struct zk_feed_cursor cur;
};

struct world {
	struct zt z;
	int64_t sid;
	struct keel_rng rng;
	struct zk_feed_log log[SERVERS];
	bool up[SERVERS];
	struct sub sub[SIMZK_FEED_CONSUMERS];
	struct simzk_feed feed;
	enum fault fault;
	uint64_t events_sent;
	bool faulted;
	struct keel_wbuf w;
};

static void send_frame(struct world *wd, uint64_t conn)
{
	simzk_feed_on_frame(&wd->feed, conn, wd->w.data, wd->w.size);
}

/* Sends a subscriber what its server holds from its position. */
static void push(struct world *wd, struct sub *s)
{
	while (s->live) {
		const struct zk_feed_change *ch;
		uint32_t i;
		enum zk_feed_step st = zk_feed_cursor_next(&s->cur, &wd->log[s->server], &ch, &i);
		if (st == ZK_FEED_STEP_END) {
			return;
		}
		struct zk_feed_event ev;
		if (st == ZK_FEED_STEP_COMPACTED) {
			ev = (struct zk_feed_event){.status = ZK_FEED_COMPACTED,
						    .zxid = zk_feed_log_oldest(&wd->log[s->server]),
						    .path = ZK_BYTES_NULL,
						    .data = ZK_BYTES_NULL};
		} else {
			zk_feed_event_of(ch, i, s->cur.flags, &ev);
		}
		keel_wbuf_reset(&wd->w);
		zk_reply_header_encode(&wd->w, ZK_XID_FEED, ev.zxid, ZK_OK);
		zk_feed_event_encode(&wd->w, &ev);
		assert_true(keel_wbuf_ok(&wd->w));
		if (st == ZK_FEED_STEP_COMPACTED) {
			send_frame(wd, s->conn);
			simzk_feed_on_frame(&wd->feed, s->conn, NULL, 0);
			s->live = false;
			return;
		}
		wd->events_sent++;
		bool fault_now = !wd->faulted && wd->events_sent == 40;
		if (fault_now && wd->fault == FAULT_DROP) {
			wd->faulted = true;
			continue;
		}
		send_frame(wd, s->conn);
		if (fault_now && wd->fault == FAULT_REPEAT) {
			wd->faulted = true;
			send_frame(wd, s->conn);
		}
	}
}

static void reply(struct world *wd, uint64_t conn, int32_t xid, int16_t error, int64_t oldest)
{
	struct zk_feed_response rs = {error, oldest, (int64_t)wd->z.zxid};
	keel_wbuf_reset(&wd->w);
	zk_reply_header_encode(&wd->w, xid, (int64_t)wd->z.zxid, ZK_OK);
	zk_feed_response_encode(&wd->w, &rs);
	send_frame(wd, conn);
}

static bool tr_subscribe(void *ctx, uint32_t server, uint64_t conn, int32_t xid,
			 const uint8_t *body, size_t size)
{
	struct world *wd = ctx;
	if (!wd->up[server]) {
		return false;
	}
	struct zk_feed_request rq;
	assert_int_equal(zk_feed_request_decode(&rq, body, size), KEEL_OK);
	int64_t oldest = zk_feed_log_oldest(&wd->log[server]);
	if (wd->fault == FAULT_FALSE_COMPACTED && !wd->faulted && rq.from_zxid > 30) {
		wd->faulted = true;
		reply(wd, conn, xid, ZK_FEED_COMPACTED, rq.from_zxid);
		return true;
	}
	if (rq.from_zxid < oldest) {
		reply(wd, conn, xid, ZK_FEED_COMPACTED, oldest);
		return true;
	}
	reply(wd, conn, xid, ZK_FEED_OK, oldest);
	struct sub *s = &wd->sub[conn % SIMZK_FEED_CONSUMERS];
	s->live = true;
	s->conn = conn;
	s->server = server;
	size_t len = zk_bytes_len(rq.path);
	assert_true(len < sizeof(s->prefix));
	memcpy(s->prefix, rq.path.data, len);
	s->prefix[len] = '\0';
	zk_feed_cursor_init(&s->cur, &wd->log[server], rq.from_zxid, rq.from_seq,
			    zk_bytes_str(s->prefix), rq.flags, NULL);
	push(wd, s);
	return true;
}

static void tr_hang_up(void *ctx, uint64_t conn)
{
	struct world *wd = ctx;
	struct sub *s = &wd->sub[conn % SIMZK_FEED_CONSUMERS];
	if (s->conn == conn) {
		s->live = false;
	}
}

static void tr_drained(void *ctx, uint64_t conn)
{
	(void)ctx, (void)conn; /* everything was sent at once */
}

static bool tr_settled(void *ctx, uint32_t server)
{
	struct world *wd = ctx;
	return wd->up[server];
}

/* The last txn applied: every server's history, the reference, the
 * subscribers. */
static void applied(struct world *wd)
{
	for (uint32_t i = 0; i < SERVERS; i++) {
		assert_int_equal(zk_feed_log_append(&wd->log[i], &wd->z.st, &wd->z.res), KEEL_OK);
	}
	simzk_feed_on_commit(&wd->feed, &wd->z.st, &wd->z.res);
	for (uint32_t k = 0; k < SIMZK_FEED_CONSUMERS; k++) {
		push(wd, &wd->sub[k]);
	}
}

/* One write: a register under /w, or a session whose ephemerals under /e
 * go in one txn (several changes at one zxid). */
static void write_one(struct world *wd)
{
	char path[32];
	uint64_t r = keel_rng_below(&wd->rng, 10);
	if (r < 7) {
		snprintf(path, sizeof(path), "/w/k%u", (unsigned)keel_rng_below(&wd->rng, 4));
		if (!zt_exists(&wd->z, path)) {
			zt_create(&wd->z, wd->sid, path, "v", 0);
		} else if (r < 5) {
			zt_set(&wd->z, wd->sid, path, zt_b("data"), -1, NULL);
		} else {
			zt_delete(&wd->z, wd->sid, path, -1);
		}
		applied(wd);
		return;
	}
	int64_t s2 = zt_session(&wd->z, 10000);
	applied(wd);
	uint32_t n = (uint32_t)keel_rng_between(&wd->rng, 2, 3);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/e/n%u", i);
		assert_int_equal(zt_create(&wd->z, s2, path, "", ZK_CREATE_EPHEMERAL), ZK_OK);
		applied(wd);
	}
	assert_int_equal(zt_close_session(&wd->z, s2), ZK_OK);
	applied(wd);
}

static void server_down(struct world *wd, uint32_t server)
{
	wd->up[server] = false;
	for (uint32_t k = 0; k < SIMZK_FEED_CONSUMERS; k++) {
		struct sub *s = &wd->sub[k];
		if (s->live && s->server == server) {
			s->live = false;
			simzk_feed_on_frame(&wd->feed, s->conn, NULL, 0);
		}
	}
}

/* A run of `writes` writes with consumers, trims and server outages;
 * returns the checker's verdict. */
static bool run(uint64_t seed, enum fault fault, enum simzk_bug bug, uint32_t writes,
		struct simzk_result *counts, char *why, size_t why_size)
{
	struct world *wd = calloc(1, sizeof(*wd));
	assert_non_null(wd);
	zt_init(&wd->z);
	keel_rng_seed(&wd->rng, seed);
	keel_wbuf_init_dynamic(&wd->w, 256, 1u << 20);
	wd->fault = fault;
	struct simzk_feed_transport tr = {wd,	      SERVERS,	  tr_subscribe,
					  tr_hang_up, tr_drained, tr_settled};
	simzk_feed_init(&wd->feed, seed, bug, &tr);
	for (uint32_t i = 0; i < SERVERS; i++) {
		zk_feed_log_init(&wd->log[i], simzk_feed_history_bytes(&wd->feed),
				 (int64_t)wd->z.zxid);
		wd->up[i] = true;
	}
	wd->sid = zt_session(&wd->z, 10000);
	applied(wd);
	zt_create(&wd->z, wd->sid, "/w", "", 0);
	applied(wd);
	zt_create(&wd->z, wd->sid, "/e", "", 0);
	applied(wd);
	for (uint32_t n = 0; n < writes; n++) {
		write_one(wd);
		uint64_t r = keel_rng_below(&wd->rng, 100);
		uint32_t server = (uint32_t)keel_rng_below(&wd->rng, SERVERS);
		if (r < 4) {
			/* a snapshot: the history keeps a few trailing entries */
			int64_t keep = (int64_t)keel_rng_between(&wd->rng, 5, 60);
			if ((int64_t)wd->z.zxid > keep) {
				zk_feed_log_trim(&wd->log[server], (int64_t)wd->z.zxid - keep);
			}
			for (uint32_t k = 0; k < SIMZK_FEED_CONSUMERS; k++) {
				push(wd, &wd->sub[k]);
			}
		} else if (r < 6) {
			server_down(wd, server);
		} else if (r < 10) {
			wd->up[server] = true;
		}
		for (uint64_t k = keel_rng_between(&wd->rng, 1, 8); k > 0; k--) {
			simzk_feed_step(&wd->feed);
		}
	}
	for (uint32_t i = 0; i < SERVERS; i++) {
		wd->up[i] = true;
	}
	simzk_feed_drain(&wd->feed);
	bool ok = simzk_check_feed(&wd->feed, why, why_size);
	uint64_t trace = 0;
	simzk_feed_counts(&wd->feed, counts, &trace);
	simzk_feed_free(&wd->feed);
	for (uint32_t i = 0; i < SERVERS; i++) {
		zk_feed_log_close(&wd->log[i]);
	}
	keel_wbuf_free(&wd->w);
	zt_close(&wd->z);
	free(wd);
	return ok;
}

static void test_correct_servers_pass(void **state)
{
	(void)state;
	struct simzk_result total;
	memset(&total, 0, sizeof(total));
	for (uint64_t seed = 1; seed <= 30; seed++) {
		char why[512] = "";
		if (!run(seed, FAULT_NONE, SIMZK_BUG_NONE, 400, &total, why, sizeof(why))) {
			print_error("seed %llu: %s\n", (unsigned long long)seed, why);
			fail();
		}
	}
	/* The runs did what they are for: changes read, servers changed,
	 * positions compacted away, gaps announced. */
	assert_true(total.feed_changes > 3000);
	assert_true(total.feed_moves > 0);
	assert_true(total.feed_compacted > 0);
	assert_true(total.feed_gaps > 0);
}

static void expect_caught(enum fault fault, enum simzk_bug bug, const char *expect)
{
	for (uint64_t seed = 1; seed <= 30; seed++) {
		struct simzk_result counts;
		memset(&counts, 0, sizeof(counts));
		char why[512] = "";
		if (!run(seed, fault, bug, 400, &counts, why, sizeof(why))) {
			if (strstr(why, expect) == NULL) {
				print_error("seed %llu: caught, but by \"%s\"\n",
					    (unsigned long long)seed, why);
				fail();
			}
			return;
		}
	}
	print_error("not caught in 30 seeds\n");
	fail();
}

static void test_dropped_event_caught(void **state)
{
	(void)state;
	expect_caught(FAULT_DROP, SIMZK_BUG_NONE, "feed: consumer");
}

static void test_repeated_event_caught(void **state)
{
	(void)state;
	expect_caught(FAULT_REPEAT, SIMZK_BUG_NONE, "feed: consumer");
}

static void test_false_compacted_caught(void **state)
{
	(void)state;
	expect_caught(FAULT_FALSE_COMPACTED, SIMZK_BUG_NONE, "yet holds from");
}

static void test_resume_by_zxid_caught(void **state)
{
	(void)state;
	expect_caught(FAULT_NONE, SIMZK_BUG_FEED_RESUME_BY_ZXID, "feed: consumer");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_correct_servers_pass),
		cmocka_unit_test(test_dropped_event_caught),
		cmocka_unit_test(test_repeated_event_caught),
		cmocka_unit_test(test_false_compacted_caught),
		cmocka_unit_test(test_resume_by_zxid_caught),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
