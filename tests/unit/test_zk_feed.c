/* test_zk_feed.c — the change feed's codec and history (zk/zk_feed.h). */
#include "test_zk_helpers.h"

#include "zk/zk_feed.h"

/* ---- codec ---- */

static void test_request_round_trip(void **state)
{
	(void)state;
	uint8_t mem[256];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	struct zk_feed_request rq = {1234567890123, 7, zt_b("/app/config"),
				     ZK_FEED_WITH_DATA | ZK_FEED_CHILDREN};
	zk_feed_request_encode(&w, &rq);
	assert_true(keel_wbuf_ok(&w));
	struct zk_feed_request out;
	assert_int_equal(zk_feed_request_decode(&out, w.data, w.size), KEEL_OK);
	assert_int_equal(out.from_zxid, rq.from_zxid);
	assert_int_equal(out.from_seq, 7);
	assert_true(zk_bytes_eq(out.path, rq.path));
	assert_int_equal(out.flags, rq.flags);
	/* Every strict prefix is short. */
	for (size_t n = 0; n < w.size; n++) {
		assert_int_equal(zk_feed_request_decode(&out, w.data, n), KEEL_PROTO);
	}
	/* A newer version, unknown flags, a negative seq and a null path are refused. */
	mem[1] = 1;
	assert_int_equal(zk_feed_request_decode(&out, w.data, w.size), KEEL_PROTO);
	mem[1] = 0;
	rq.flags = 4;
	keel_wbuf_reset(&w);
	zk_feed_request_encode(&w, &rq);
	assert_int_equal(zk_feed_request_decode(&out, w.data, w.size), KEEL_PROTO);
	rq.flags = 0;
	rq.from_seq = -1;
	keel_wbuf_reset(&w);
	zk_feed_request_encode(&w, &rq);
	assert_int_equal(zk_feed_request_decode(&out, w.data, w.size), KEEL_PROTO);
	rq.from_seq = 0;
	rq.path = ZK_BYTES_NULL;
	keel_wbuf_reset(&w);
	zk_feed_request_encode(&w, &rq);
	assert_int_equal(zk_feed_request_decode(&out, w.data, w.size), KEEL_PROTO);
}

static void test_response_and_event_round_trip(void **state)
{
	(void)state;
	uint8_t mem[512];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	struct zk_feed_response rs = {ZK_FEED_COMPACTED, 501, 9000};
	zk_feed_response_encode(&w, &rs);
	struct zk_feed_response rs2;
	assert_int_equal(zk_feed_response_decode(&rs2, w.data, w.size), KEEL_OK);
	assert_int_equal(rs2.error, ZK_FEED_COMPACTED);
	assert_int_equal(rs2.oldest_zxid, 501);
	assert_int_equal(rs2.last_zxid, 9000);
	assert_int_equal(zk_feed_response_decode(&rs2, w.data, w.size - 1), KEEL_PROTO);

	struct zk_feed_event ev = {
		.status = ZK_FEED_OK,
		.zxid = 77,
		.seq = 2,
		.type = ZK_FEED_DATA,
		.path = zt_b("/a/b"),
		.stat = {.czxid = 5, .mzxid = 77, .version = 3, .data_length = 2, .pzxid = 5},
		.data = zt_b("hi"),
	};
	keel_wbuf_reset(&w);
	zk_feed_event_encode(&w, &ev);
	struct zk_feed_event out;
	assert_int_equal(zk_feed_event_decode(&out, w.data, w.size), KEEL_OK);
	assert_int_equal(out.zxid, 77);
	assert_int_equal(out.seq, 2);
	assert_int_equal(out.type, ZK_FEED_DATA);
	assert_true(zk_bytes_eq(out.path, ev.path));
	assert_true(zk_stat_eq(&out.stat, &ev.stat));
	assert_true(zk_bytes_eq(out.data, ev.data));
	for (size_t n = 0; n < w.size; n++) {
		assert_int_equal(zk_feed_event_decode(&out, w.data, n), KEEL_PROTO);
	}
	/* No data: null survives. */
	ev.data = ZK_BYTES_NULL;
	keel_wbuf_reset(&w);
	zk_feed_event_encode(&w, &ev);
	assert_int_equal(zk_feed_event_decode(&out, w.data, w.size), KEEL_OK);
	assert_true(zk_bytes_is_null(out.data));
}

static void test_path_under(void **state)
{
	(void)state;
	assert_true(zk_feed_path_under(zt_b("/"), zt_b("/x")));
	assert_true(zk_feed_path_under(zt_b("/a"), zt_b("/a")));
	assert_true(zk_feed_path_under(zt_b("/a"), zt_b("/a/b/c")));
	assert_false(zk_feed_path_under(zt_b("/a"), zt_b("/ab")));
	assert_false(zk_feed_path_under(zt_b("/a/b"), zt_b("/a")));
}

/* ---- history ---- */

struct fl {
	struct zt z;
	struct zk_feed_log log;
	int64_t sid;
};

static void fl_init(struct fl *f, size_t max_bytes)
{
	zt_init(&f->z);
	f->sid = zt_session(&f->z, 10000);
	zk_feed_log_init(&f->log, max_bytes, (int64_t)f->z.zxid);
	/* The session's creation changed no node. */
	assert_int_equal(f->log.count, 0);
}

static void fl_record(struct fl *f)
{
	assert_int_equal(zk_feed_log_append(&f->log, &f->z.st, &f->z.res), KEEL_OK);
}

static void fl_close(struct fl *f)
{
	zk_feed_log_close(&f->log);
	zt_close(&f->z);
}

static const struct zk_feed_change *fl_last(const struct fl *f)
{
	return zk_feed_log_at(&f->log, zk_feed_log_end(&f->log) - 1);
}

static void assert_rec(const struct zk_feed_change *ch, uint32_t i, int32_t type, const char *path)
{
	assert_true(i < ch->count);
	assert_int_equal(ch->recs[i].type, type);
	assert_true(zk_bytes_eq(zk_feed_rec_path(ch, &ch->recs[i]), zt_b(path)));
}

static void test_log_records_every_kind(void **state)
{
	(void)state;
	struct fl f;
	fl_init(&f, 1u << 20);
	assert_int_equal(zt_create(&f.z, f.sid, "/a", "one", 0), ZK_OK);
	fl_record(&f);
	const struct zk_feed_change *ch = fl_last(&f);
	assert_int_equal(ch->zxid, (int64_t)f.z.zxid);
	assert_int_equal(ch->count, 2);
	assert_rec(ch, 0, ZK_FEED_CREATED, "/a");
	assert_rec(ch, 1, ZK_FEED_CHILD, "/");
	assert_true(zk_bytes_eq(zk_feed_rec_data(ch, &ch->recs[0]), zt_b("one")));
	assert_int_equal(ch->recs[0].stat.czxid, (int64_t)f.z.zxid);
	assert_true(zk_bytes_is_null(zk_feed_rec_data(ch, &ch->recs[1])));

	assert_int_equal(zt_set(&f.z, f.sid, "/a", zt_b("two"), -1, NULL), ZK_OK);
	fl_record(&f);
	ch = fl_last(&f);
	assert_int_equal(ch->count, 1);
	assert_rec(ch, 0, ZK_FEED_DATA, "/a");
	assert_int_equal(ch->recs[0].stat.version, 1);
	assert_true(zk_bytes_eq(zk_feed_rec_data(ch, &ch->recs[0]), zt_b("two")));

	assert_int_equal(zt_set_acl(&f.z, f.sid, "/a", zt_open_acl(&f.z), -1, NULL), ZK_OK);
	fl_record(&f);
	ch = fl_last(&f);
	assert_int_equal(ch->count, 1);
	assert_rec(ch, 0, ZK_FEED_ACL, "/a");
	assert_int_equal(ch->recs[0].stat.aversion, 1);

	/* A failed write changes nothing and records nothing. */
	uint32_t before = f.log.count;
	assert_int_equal(zt_create(&f.z, f.sid, "/a", "x", 0), ZK_NODE_EXISTS);
	fl_record(&f);
	assert_int_equal(f.log.count, before);

	assert_int_equal(zt_delete(&f.z, f.sid, "/a", -1), ZK_OK);
	fl_record(&f);
	ch = fl_last(&f);
	assert_rec(ch, 0, ZK_FEED_DELETED, "/a");
	assert_int_equal(ch->recs[0].stat.czxid, 0);
	/* The deleted node's ACL is kept for the READ check. */
	assert_true(zk_acl_check(zk_feed_rec_acl(ch, &ch->recs[0]), ZK_PERM_READ, &f.z.ids));
	fl_close(&f);
}

static void test_log_seek_trim_and_bound(void **state)
{
	(void)state;
	struct fl f;
	fl_init(&f, 1u << 20);
	int64_t floor = f.log.floor;
	char path[32];
	int64_t zx[40];
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "/n%d", i);
		assert_int_equal(zt_create(&f.z, f.sid, path, "", 0), ZK_OK);
		fl_record(&f);
		zx[i] = (int64_t)f.z.zxid;
	}
	assert_int_equal(f.log.count, 40);
	assert_int_equal(zk_feed_log_oldest(&f.log), floor + 1);
	/* Seek finds the first change at or after a zxid. */
	assert_int_equal(zk_feed_log_seek(&f.log, zx[10]), f.log.first + 10);
	assert_int_equal(zk_feed_log_at(&f.log, zk_feed_log_seek(&f.log, zx[10]))->zxid, zx[10]);
	assert_int_equal(zk_feed_log_seek(&f.log, zx[39] + 1), zk_feed_log_end(&f.log));
	/* Trim drops what a snapshot compacted; positions stay absolute. */
	uint64_t pos20 = zk_feed_log_seek(&f.log, zx[20]);
	zk_feed_log_trim(&f.log, zx[9]);
	assert_int_equal(f.log.count, 30);
	assert_int_equal(zk_feed_log_oldest(&f.log), zx[9] + 1);
	assert_int_equal(zk_feed_log_at(&f.log, pos20)->zxid, zx[20]);
	/* The byte bound drops the oldest, never the newest. */
	size_t per = f.log.bytes / f.log.count;
	f.log.max_bytes = per * 5;
	snprintf(path, sizeof(path), "/n%d", 40);
	assert_int_equal(zt_create(&f.z, f.sid, path, "", 0), ZK_OK);
	fl_record(&f);
	assert_true(f.log.bytes <= f.log.max_bytes);
	assert_true(f.log.count >= 1 && f.log.count <= 5);
	assert_int_equal(fl_last(&f)->zxid, (int64_t)f.z.zxid);
	assert_true(pos20 < f.log.first); /* a reader there is behind: COMPACTED */
	assert_true(zk_feed_log_at(&f.log, f.log.first)->zxid > f.log.floor);
	assert_true(f.log.floor >= zx[20]);
	f.log.max_bytes = 1;
	assert_int_equal(zt_set(&f.z, f.sid, "/n40", zt_b("big"), -1, NULL), ZK_OK);
	fl_record(&f);
	assert_int_equal(f.log.count, 1);
	/* Reset: nothing held, history restarts after the given zxid. */
	zk_feed_log_reset(&f.log, 1000);
	assert_int_equal(f.log.count, 0);
	assert_int_equal(zk_feed_log_oldest(&f.log), 1001);
	fl_close(&f);
}

static void test_log_multi_sequence(void **state)
{
	(void)state;
	struct fl f;
	fl_init(&f, 1u << 20);
	assert_int_equal(zt_create(&f.z, f.sid, "/p", "", 0), ZK_OK);
	fl_record(&f);
	/* Session close deletes its ephemerals: several changes, one zxid. */
	int64_t s2 = zt_session(&f.z, 10000);
	fl_record(&f);
	assert_int_equal(zt_create(&f.z, s2, "/p/e1", "", ZK_CREATE_EPHEMERAL), ZK_OK);
	fl_record(&f);
	assert_int_equal(zt_create(&f.z, s2, "/p/e2", "", ZK_CREATE_EPHEMERAL), ZK_OK);
	fl_record(&f);
	assert_int_equal(zt_close_session(&f.z, s2), ZK_OK);
	fl_record(&f);
	const struct zk_feed_change *ch = fl_last(&f);
	assert_int_equal(ch->zxid, (int64_t)f.z.zxid);
	uint32_t deleted = 0;
	for (uint32_t i = 0; i < ch->count; i++) {
		deleted += ch->recs[i].type == ZK_FEED_DELETED;
	}
	assert_int_equal(deleted, 2);
	fl_close(&f);
}


/* Every event a cursor hands out from (zxid, seq), as "zxid.seq type path". */
static size_t drain(const struct zk_feed_log *log, struct zk_feed_cursor *cur, char out[][64],
		    size_t max, enum zk_feed_step *last)
{
	size_t n = 0;
	const struct zk_feed_change *ch;
	uint32_t i;
	while ((*last = zk_feed_cursor_next(cur, log, &ch, &i)) == ZK_FEED_STEP_EVENT) {
		assert_true(n < max);
		struct zk_feed_event ev;
		zk_feed_event_of(ch, i, cur->flags, &ev);
		snprintf(out[n++], 64, "%lld.%d %s %.*s", (long long)ev.zxid, ev.seq,
			 zk_feed_type_name(ev.type), (int)zk_bytes_len(ev.path),
			 (const char *)ev.path.data);
	}
	return n;
}

static void test_cursor_filters_and_resumes_exactly(void **state)
{
	(void)state;
	struct fl f;
	fl_init(&f, 1u << 20);
	int64_t start = (int64_t)f.z.zxid + 1;
	assert_int_equal(zt_create(&f.z, f.sid, "/a", "", 0), ZK_OK);
	fl_record(&f);
	assert_int_equal(zt_create(&f.z, f.sid, "/a/x", "1", 0), ZK_OK);
	fl_record(&f);
	assert_int_equal(zt_create(&f.z, f.sid, "/b", "", 0), ZK_OK);
	fl_record(&f);
	/* A node only digest:u:pw may read. */
	struct zk_acl secret = {ZK_PERM_ALL, {zt_b("digest"), zt_b("u:x")}};
	keel_wbuf_reset(&f.z.acl);
	assert_int_equal(zt_create_full(&f.z, f.sid, ZK_OP_CREATE, "/a/hidden", zt_b("s"), 0,
					zk_acl_vec_build(&f.z.acl, &secret, 1), -1, NULL, NULL),
			 ZK_OK);
	fl_record(&f);
	assert_int_equal(zt_set(&f.z, f.sid, "/a/x", zt_b("2"), -1, NULL), ZK_OK);
	fl_record(&f);
	int64_t last = (int64_t)f.z.zxid;

	struct zk_feed_cursor cur;
	char got[32][64];
	enum zk_feed_step step;
	/* Under /a, no child events, as an ip:127.0.0.1 session: /b and the
	 * hidden node are not delivered. */
	zk_feed_cursor_init(&cur, &f.log, start, 0, zt_b("/a"), 0, &f.z.ids);
	size_t n = drain(&f.log, &cur, got, 32, &step);
	assert_int_equal(step, ZK_FEED_STEP_END);
	assert_int_equal(n, 3);
	char want[64];
	snprintf(want, sizeof(want), "%lld.0 created /a", (long long)start);
	assert_string_equal(got[0], want);
	snprintf(want, sizeof(want), "%lld.0 created /a/x", (long long)start + 1);
	assert_string_equal(got[1], want);
	snprintf(want, sizeof(want), "%lld.0 data /a/x", (long long)last);
	assert_string_equal(got[2], want);
	/* With child events: the parents' too, at seq 1 of their zxid. */
	zk_feed_cursor_init(&cur, &f.log, start, 0, zt_b("/"), ZK_FEED_CHILDREN, NULL);
	n = drain(&f.log, &cur, got, 32, &step);
	assert_int_equal(n, 9);
	snprintf(want, sizeof(want), "%lld.1 child /", (long long)start);
	assert_string_equal(got[1], want);
	/* Resuming after each event gives the rest, exactly. */
	char all[32][64];
	memcpy(all, got, sizeof(all));
	for (size_t k = 0; k < n; k++) {
		long long z;
		int sq;
		assert_int_equal(sscanf(all[k], "%lld.%d", &z, &sq), 2);
		zk_feed_cursor_init(&cur, &f.log, z, sq + 1, zt_b("/"), ZK_FEED_CHILDREN, NULL);
		size_t m = drain(&f.log, &cur, got, 32, &step);
		assert_int_equal(m, n - k - 1);
		for (size_t j = 0; j < m; j++) {
			assert_string_equal(got[j], all[k + 1 + j]);
		}
	}
	/* A live append reaches a caught-up cursor. */
	assert_int_equal(zt_delete(&f.z, f.sid, "/b", -1), ZK_OK);
	fl_record(&f);
	n = drain(&f.log, &cur, got, 32, &step);
	assert_int_equal(n, 2); /* deleted /b, child / */
	/* Trimming what a cursor has passed leaves it be (it does not wait on
	 * the unwanted rest of a change); trimming what it needs ends it. */
	zk_feed_cursor_init(&cur, &f.log, start, 0, zt_b("/"), 0, NULL);
	const struct zk_feed_change *ch;
	uint32_t i;
	assert_int_equal(zk_feed_cursor_next(&cur, &f.log, &ch, &i), ZK_FEED_STEP_EVENT);
	assert_int_equal(ch->zxid, start);
	zk_feed_log_trim(&f.log, start);
	assert_int_equal(zk_feed_cursor_next(&cur, &f.log, &ch, &i), ZK_FEED_STEP_EVENT);
	assert_int_equal(ch->zxid, start + 1);
	zk_feed_log_trim(&f.log, start + 2);
	assert_int_equal(zk_feed_cursor_next(&cur, &f.log, &ch, &i), ZK_FEED_STEP_COMPACTED);
	fl_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_response_and_event_round_trip),
		cmocka_unit_test(test_path_under),
		cmocka_unit_test(test_log_records_every_kind),
		cmocka_unit_test(test_log_seek_trim_and_bound),
		cmocka_unit_test(test_log_multi_sequence),
		cmocka_unit_test(test_cursor_filters_and_resumes_exactly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
