/* Unit tests: the request tracker (core/tracker.h) walks the state diagram
 * of its header, ends every request exactly once with the right error, and
 * its peer frames round-trip and refuse short or unknown input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/tracker.h"

#define SELF 1u
#define LEADER 2u
#define OTHER 3u
#define WAIT_MS 4000u

struct outcome {
	int fails;
	int replies;
	enum keel_err last_err;
	uint64_t last_wait_index;
	size_t last_body_size;
	bool resend_ok;
	int resends;
};

struct world {
	struct tracker t;
	struct outcome by_kind[TRACK_KIND_MAX + 1];
};

static struct world *world_of(void *ctx)
{
	return ctx;
}

static void on_fail(void *ctx, struct tracker_req *req, enum keel_err err)
{
	struct outcome *o = &world_of(ctx)->by_kind[req->kind];
	assert_false(tracker_tracked(req));
	o->fails++;
	o->last_err = err;
}

static void on_reply(void *ctx, struct tracker_req *req, const struct tracker_reply *hdr,
		     const uint8_t *body, size_t size)
{
	(void)body;
	struct outcome *o = &world_of(ctx)->by_kind[req->kind];
	assert_false(tracker_tracked(req));
	o->replies++;
	o->last_err = hdr->err;
	o->last_wait_index = hdr->wait_index;
	o->last_body_size = size;
}

static bool on_resend(void *ctx, struct tracker_req *req)
{
	struct outcome *o = &world_of(ctx)->by_kind[req->kind];
	o->resends++;
	return o->resend_ok;
}

static int setup(void **state)
{
	static struct world w;
	memset(&w, 0, sizeof(w));
	struct tracker_policy policy = {tracker_leader_wait_ms(1000)};
	assert_int_equal(policy.leader_wait_ms, WAIT_MS);
	assert_int_equal(tracker_init(&w.t, &policy, 100), KEEL_OK);
	/* ZooKeeper writes: decided by apply (no reply callback), may wait. */
	struct tracker_kind_ops zk = {on_fail, NULL, on_resend, &w, false};
	struct tracker_kind_ops admin = {on_fail, on_reply, NULL, &w, false};
	struct tracker_kind_ops meta = {on_fail, on_reply, NULL, &w, true};
	tracker_set_kind(&w.t, TRACK_ZK_WRITE, &zk);
	tracker_set_kind(&w.t, TRACK_ADMIN, &admin);
	tracker_set_kind(&w.t, TRACK_META, &meta);
	*state = &w;
	return 0;
}

static int teardown(void **state)
{
	struct world *w = *state;
	tracker_close(&w->t);
	return 0;
}

static void add(struct world *w, struct tracker_req *req, enum tracker_kind kind,
		uint64_t timeout_ms, uint64_t sent_to, uint64_t term, uint64_t now)
{
	memset(req, 0, sizeof(*req));
	req->request_id = tracker_next_id(&w->t);
	assert_int_equal(tracker_add(&w->t, req, kind, timeout_ms, sent_to, term, now), KEEL_OK);
}

static struct tracker_reply reply_to(const struct tracker_req *req, enum keel_err err)
{
	struct tracker_reply hdr = {req->kind, SELF, req->request_id, err, 0};
	return hdr;
}

static void test_ids_are_distinct_and_never_zero(void **state)
{
	struct world *w = *state;
	uint64_t a = tracker_next_id(&w->t);
	uint64_t b = tracker_next_id(&w->t);
	assert_int_equal(a, 100);
	assert_int_equal(b, 101);
	w->t.next_request_id = UINT64_MAX;
	assert_int_equal(tracker_next_id(&w->t), UINT64_MAX);
	assert_int_equal(tracker_next_id(&w->t), 1); /* 0 is skipped */
}

static void test_finish_ends_without_callback(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_ZK_WRITE, 0, LEADER, 5, 0);
	assert_int_equal(req.state, TRACK_SENT);
	assert_ptr_equal(tracker_find(&w->t, req.request_id), &req);
	assert_int_equal(tracker_count(&w->t), 1);
	tracker_finish(&w->t, &req);
	assert_false(tracker_tracked(&req));
	assert_null(tracker_find(&w->t, req.request_id));
	assert_int_equal(tracker_count(&w->t), 0);
	tracker_tick(&w->t, LEADER, 5, 1000000);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 0);
}

static void test_wait_leader_fails_noleader_once(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_ZK_WRITE, 0, 0, 0, 1000);
	assert_int_equal(req.state, TRACK_WAIT_LEADER);
	assert_int_equal(req.deadline_ms, 1000 + WAIT_MS);
	tracker_tick(&w->t, 0, 0, 1000 + WAIT_MS - 1);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 0);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].resends, 0); /* no leader: not tried */
	tracker_tick(&w->t, 0, 0, 1000 + WAIT_MS);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 1);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].last_err, KEEL_NOLEADER);
	tracker_tick(&w->t, 0, 0, 1000 + 2 * WAIT_MS);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 1);
}

static void test_wait_leader_resent_when_leader_known(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_ZK_WRITE, 0, 0, 0, 1000);
	w->by_kind[TRACK_ZK_WRITE].resend_ok = false; /* link not up yet */
	tracker_tick(&w->t, LEADER, 7, 1500);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].resends, 1);
	assert_int_equal(req.state, TRACK_WAIT_LEADER);
	w->by_kind[TRACK_ZK_WRITE].resend_ok = true;
	tracker_tick(&w->t, LEADER, 7, 1600);
	assert_int_equal(req.state, TRACK_SENT);
	assert_int_equal(req.leader, LEADER);
	assert_int_equal(req.term, 7);
	assert_int_equal(req.deadline_ms, 0); /* no timeout while SENT */
	tracker_tick(&w->t, LEADER, 7, 1000000);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 0);
	tracker_finish(&w->t, &req);
}

/* Held requests go in the order they were added: once one cannot go, the
 * later ones of its kind wait behind it; tracker_holds says one waits. */
static void test_held_requests_resend_in_order(void **state)
{
	struct world *w = *state;
	struct tracker_req first, second;
	assert_false(tracker_holds(&w->t, TRACK_ZK_WRITE));
	add(w, &first, TRACK_ZK_WRITE, 0, 0, 0, 1000);
	add(w, &second, TRACK_ZK_WRITE, 0, 0, 0, 1000);
	assert_true(tracker_holds(&w->t, TRACK_ZK_WRITE));
	assert_false(tracker_holds(&w->t, TRACK_ADMIN));
	w->by_kind[TRACK_ZK_WRITE].resend_ok = false;
	tracker_tick(&w->t, LEADER, 7, 1500);
	/* the first could not go: the second was not tried */
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].resends, 1);
	assert_int_equal(first.state, TRACK_WAIT_LEADER);
	assert_int_equal(second.state, TRACK_WAIT_LEADER);
	w->by_kind[TRACK_ZK_WRITE].resend_ok = true;
	tracker_tick(&w->t, LEADER, 7, 1600);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].resends, 3);
	assert_int_equal(first.state, TRACK_SENT);
	assert_int_equal(second.state, TRACK_SENT);
	assert_false(tracker_holds(&w->t, TRACK_ZK_WRITE));
	tracker_finish(&w->t, &first);
	tracker_finish(&w->t, &second);
}

static void test_leader_change_puts_in_doubt_and_reply_still_counts(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_ADMIN, 300000, LEADER, 3, 0);
	assert_int_equal(req.deadline_ms, 300000);
	tracker_on_leader_change(&w->t, OTHER, 100);
	assert_int_equal(req.state, TRACK_IN_DOUBT);
	assert_int_equal(req.deadline_ms, 100 + WAIT_MS);
	/* A second change never extends the wait. */
	tracker_on_leader_change(&w->t, LEADER, 200);
	assert_int_equal(req.deadline_ms, 100 + WAIT_MS);
	/* The old leader's reply crossing the change still ends it. */
	struct tracker_reply hdr = reply_to(&req, KEEL_OK);
	hdr.wait_index = 42;
	uint8_t body[3] = {1, 2, 3};
	assert_true(tracker_on_reply(&w->t, SELF, &hdr, body, sizeof(body)));
	assert_int_equal(w->by_kind[TRACK_ADMIN].replies, 1);
	assert_int_equal(w->by_kind[TRACK_ADMIN].last_wait_index, 42);
	assert_int_equal(w->by_kind[TRACK_ADMIN].last_body_size, 3);
	/* A duplicate is dropped: exactly once. */
	assert_false(tracker_on_reply(&w->t, SELF, &hdr, body, sizeof(body)));
	tracker_tick(&w->t, 0, 0, 1000000);
	assert_int_equal(w->by_kind[TRACK_ADMIN].replies, 1);
	assert_int_equal(w->by_kind[TRACK_ADMIN].fails, 0);
}

static void test_leader_change_fails_retry_safe_kinds_at_once(void **state)
{
	struct world *w = *state;
	struct tracker_req admin, meta, meta_same;
	add(w, &admin, TRACK_ADMIN, 300000, LEADER, 3, 0);
	add(w, &meta, TRACK_META, WAIT_MS, LEADER, 3, 0);
	add(w, &meta_same, TRACK_META, WAIT_MS, OTHER, 3, 0);
	tracker_on_leader_change(&w->t, OTHER, 10);
	assert_int_equal(w->by_kind[TRACK_META].fails, 1);
	assert_int_equal(w->by_kind[TRACK_META].last_err, KEEL_NOTLEADER);
	assert_false(tracker_tracked(&meta));
	assert_int_equal(meta_same.state, TRACK_SENT); /* sent to the new leader */
	assert_int_equal(admin.state, TRACK_IN_DOUBT);
	assert_int_equal(w->by_kind[TRACK_ADMIN].fails, 0);
	tracker_finish(&w->t, &admin);
	tracker_finish(&w->t, &meta_same);
	assert_int_equal(tracker_count(&w->t), 0);
}

static void test_in_doubt_deadline_fails_noleader(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_ZK_WRITE, 0, SELF, 3, 0); /* proposed here, on the leader */
	tracker_on_leader_change(&w->t, SELF, 10);  /* still us: nothing changes */
	assert_int_equal(req.state, TRACK_SENT);
	tracker_on_leader_change(&w->t, 0, 20);
	assert_int_equal(req.state, TRACK_IN_DOUBT);
	tracker_tick(&w->t, 0, 0, 20 + WAIT_MS - 1);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 0);
	tracker_tick(&w->t, 0, 0, 20 + WAIT_MS);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 1);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].last_err, KEEL_NOLEADER);
	/* A late reply for it finds nothing. */
	struct tracker_reply hdr = reply_to(&req, KEEL_BUSY);
	assert_false(tracker_on_reply(&w->t, SELF, &hdr, NULL, 0));
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 1);
}

static void test_link_down_fails_reply_kinds_only(void **state)
{
	struct world *w = *state;
	struct tracker_req zk, admin, meta, elsewhere;
	add(w, &zk, TRACK_ZK_WRITE, 0, LEADER, 3, 0);
	add(w, &admin, TRACK_ADMIN, 300000, LEADER, 3, 0);
	add(w, &meta, TRACK_META, WAIT_MS, LEADER, 3, 0);
	add(w, &elsewhere, TRACK_META, WAIT_MS, OTHER, 3, 0);
	tracker_on_link_down(&w->t, LEADER, 50);
	assert_int_equal(w->by_kind[TRACK_ADMIN].fails, 1);
	assert_int_equal(w->by_kind[TRACK_ADMIN].last_err, KEEL_NOLEADER);
	assert_int_equal(w->by_kind[TRACK_META].fails, 1);
	assert_false(tracker_tracked(&admin));
	assert_false(tracker_tracked(&meta));
	/* A write may still be applied: in doubt, not failed. */
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 0);
	assert_int_equal(zk.state, TRACK_IN_DOUBT);
	assert_int_equal(zk.deadline_ms, 50 + WAIT_MS);
	assert_int_equal(elsewhere.state, TRACK_SENT);
	assert_int_equal(tracker_count(&w->t), 2);
	tracker_finish(&w->t, &zk);
	tracker_finish(&w->t, &elsewhere);
}

static void test_sent_timeout_fails_timeout(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_META, WAIT_MS, LEADER, 3, 500);
	assert_int_equal(req.deadline_ms, 500 + WAIT_MS);
	tracker_tick(&w->t, LEADER, 3, 500 + WAIT_MS - 1);
	assert_true(tracker_tracked(&req));
	tracker_tick(&w->t, LEADER, 3, 500 + WAIT_MS);
	assert_int_equal(w->by_kind[TRACK_META].fails, 1);
	assert_int_equal(w->by_kind[TRACK_META].last_err, KEEL_TIMEOUT);
}

static void test_newer_term_applied_fails_older_writes(void **state)
{
	struct world *w = *state;
	struct tracker_req old_write, new_write, admin;
	add(w, &old_write, TRACK_ZK_WRITE, 0, LEADER, 2, 0);
	add(w, &new_write, TRACK_ZK_WRITE, 0, LEADER, 3, 0);
	add(w, &admin, TRACK_ADMIN, 300000, LEADER, 2, 0);
	tracker_on_term_applied(&w->t, 2);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 0);
	tracker_on_term_applied(&w->t, 3);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 1);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].last_err, KEEL_NOTLEADER);
	assert_false(tracker_tracked(&old_write));
	assert_true(tracker_tracked(&new_write));
	assert_true(tracker_tracked(&admin)); /* decided by a reply, not by apply */
	tracker_finish(&w->t, &new_write);
	tracker_finish(&w->t, &admin);
}

static void test_refusal_of_apply_kind_fails_with_its_error(void **state)
{
	struct world *w = *state;
	struct tracker_req req;
	add(w, &req, TRACK_ZK_WRITE, 0, LEADER, 3, 0);
	struct tracker_reply ok = reply_to(&req, KEEL_OK);
	assert_false(tracker_on_reply(&w->t, SELF, &ok, NULL, 0)); /* not how writes end */
	struct tracker_reply other_origin = reply_to(&req, KEEL_BUSY);
	other_origin.origin = OTHER;
	assert_false(tracker_on_reply(&w->t, SELF, &other_origin, NULL, 0));
	struct tracker_reply other_kind = reply_to(&req, KEEL_BUSY);
	other_kind.kind = TRACK_ADMIN;
	assert_false(tracker_on_reply(&w->t, SELF, &other_kind, NULL, 0));
	assert_true(tracker_tracked(&req));
	struct tracker_reply busy = reply_to(&req, KEEL_BUSY);
	assert_true(tracker_on_reply(&w->t, SELF, &busy, NULL, 0));
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].fails, 1);
	assert_int_equal(w->by_kind[TRACK_ZK_WRITE].last_err, KEEL_BUSY);
	assert_int_equal(w->t.failed, 1);
}

/* A fail callback that frees (here: reuses) its request and ends another
 * one must not disturb the sweep that called it. */
static struct tracker_req *victim;

static void fail_and_finish_other(void *ctx, struct tracker_req *req, enum keel_err err)
{
	struct world *w = ctx;
	on_fail(ctx, req, err);
	if (victim != NULL) {
		tracker_finish(&w->t, victim);
		victim = NULL;
	}
	memset(req, 0xa5, sizeof(*req) - sizeof(req->link));
}

static void test_callbacks_may_end_others_during_a_sweep(void **state)
{
	struct world *w = *state;
	struct tracker_kind_ops meta = {fail_and_finish_other, on_reply, NULL, w, false};
	tracker_set_kind(&w->t, TRACK_META, &meta);
	struct tracker_req a, b, c;
	add(w, &a, TRACK_META, 0, LEADER, 3, 0);
	add(w, &b, TRACK_META, 0, LEADER, 3, 0);
	add(w, &c, TRACK_META, 0, OTHER, 3, 0);
	victim = &c;
	tracker_on_link_down(&w->t, LEADER, 0);
	assert_int_equal(w->by_kind[TRACK_META].fails, 2);
	assert_null(victim);
	assert_int_equal(tracker_count(&w->t), 0);
}

static void test_frames_round_trip(void **state)
{
	(void)state;
	uint8_t mem[128];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	tracker_request_encode(&w, TRACK_META, 7, 0x1122334455667788ull);
	keel_wbuf_bytes(&w, "xyz", 3);
	assert_true(keel_wbuf_ok(&w));
	assert_int_equal(w.size, TRACKER_REQUEST_HEADER_SIZE + 3);
	uint8_t kind;
	uint64_t origin, id;
	const uint8_t *body;
	size_t body_size;
	assert_int_equal(tracker_request_decode(mem, w.size, &kind, &origin, &id, &body,
						&body_size),
			 KEEL_OK);
	assert_int_equal(kind, TRACK_META);
	assert_int_equal(origin, 7);
	assert_int_equal(id, 0x1122334455667788ull);
	assert_int_equal(body_size, 3);
	assert_memory_equal(body, "xyz", 3);
	for (size_t cut = 0; cut < TRACKER_REQUEST_HEADER_SIZE; cut++) {
		assert_int_equal(tracker_request_decode(mem, cut, &kind, &origin, &id, &body,
							&body_size),
				 KEEL_PROTO);
	}
	mem[0] = 9; /* unknown kind */
	assert_int_equal(tracker_request_decode(mem, w.size, &kind, &origin, &id, &body,
						&body_size),
			 KEEL_PROTO);

	keel_wbuf_reset(&w);
	struct tracker_reply in = {TRACK_ADMIN, 3, 99, KEEL_NOTLEADER, 1234};
	tracker_reply_encode(&w, &in);
	assert_int_equal(w.size, TRACKER_REPLY_HEADER_SIZE);
	struct tracker_reply out;
	assert_int_equal(tracker_reply_decode(mem, w.size, &out, &body, &body_size), KEEL_OK);
	assert_int_equal(out.kind, TRACK_ADMIN);
	assert_int_equal(out.origin, 3);
	assert_int_equal(out.request_id, 99);
	assert_int_equal(out.err, KEEL_NOTLEADER);
	assert_int_equal(out.wait_index, 1234);
	assert_int_equal(body_size, 0);
	for (size_t cut = 0; cut < TRACKER_REPLY_HEADER_SIZE; cut++) {
		assert_int_equal(tracker_reply_decode(mem, cut, &out, &body, &body_size),
				 KEEL_PROTO);
	}
	keel_store_be32(mem + 17, 10000); /* an error code outside the table */
	assert_int_equal(tracker_reply_decode(mem, w.size, &out, &body, &body_size), KEEL_PROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ids_are_distinct_and_never_zero, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_finish_ends_without_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_leader_fails_noleader_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wait_leader_resent_when_leader_known, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_held_requests_resend_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_leader_change_puts_in_doubt_and_reply_still_counts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leader_change_fails_retry_safe_kinds_at_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_in_doubt_deadline_fails_noleader, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_link_down_fails_reply_kinds_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sent_timeout_fails_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_term_applied_fails_older_writes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refusal_of_apply_kind_fails_with_its_error,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_callbacks_may_end_others_during_a_sweep, setup,
						teardown),
		cmocka_unit_test(test_frames_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
