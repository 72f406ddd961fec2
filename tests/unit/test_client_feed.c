/* Unit tests: the change feed on keel's client (kc_feed_*, kc.h) against
 * the scripted fake server: it subscribes from its start, delivers changes
 * in order, and after its server goes away subscribes on the next one from
 * the position after the last change it delivered, dropping a repeat;
 * COMPACTED ends it with the oldest start. */
#include "test_client_fake.h"

#include "zk/zk_feed.h"

struct seen {
	int count;
	int64_t zxid[16];
	int32_t seq[16];
	int32_t type[16];
	char path[16][32];
};

static void on_change(void *ctx, const struct kc_feed_change *ch)
{
	struct seen *s = ctx;
	assert_true(s->count < 16);
	s->zxid[s->count] = ch->zxid;
	s->seq[s->count] = ch->seq;
	s->type[s->count] = ch->type;
	snprintf(s->path[s->count], sizeof(s->path[0]), "%.*s", (int)zk_bytes_len(ch->path),
		 (const char *)ch->path.data);
	s->count++;
}

static void feed_reply(int fd, int32_t xid, int16_t error, int64_t oldest)
{
	uint8_t mem[64];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	struct zk_feed_response rs = {error, oldest, 100};
	zk_feed_response_encode(&w, &rs);
	fake_reply(fd, xid, 100, 0, w.data, w.size);
}

static void feed_event(int fd, int64_t zxid, int32_t seq, int32_t type, const char *path)
{
	uint8_t mem[256];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, mem, sizeof(mem));
	struct zk_feed_event ev = {ZK_FEED_OK, zxid, seq, type, zk_bytes_str(path), fake_stat(1),
				   ZK_BYTES_NULL};
	zk_feed_event_encode(&w, &ev);
	fake_reply(fd, ZK_XID_FEED, zxid, 0, w.data, w.size);
}

/* A new connection's ConnectRequest, then the FeedRequest. */
static void read_feed_request(int fd, int32_t xid, int64_t from_zxid, int32_t from_seq)
{
	uint8_t buf[1024];
	struct zk_connect_request creq;
	fake_read_connect(fd, buf, sizeof(buf), &creq);
	long n = fake_read_frame(fd, buf, sizeof(buf));
	assert_true(n >= 8);
	struct zk_request req;
	assert_int_equal(zk_request_decode(&req, buf, (size_t)n), KEEL_UNSUPPORTED);
	assert_int_equal(req.opcode, ZK_OP_KEEL_FEED);
	assert_int_equal(req.xid, xid);
	struct zk_feed_request rq;
	assert_int_equal(zk_feed_request_decode(&rq, req.body, req.body_size), KEEL_OK);
	assert_int_equal(rq.from_zxid, from_zxid);
	assert_int_equal(rq.from_seq, from_seq);
	assert_true(zk_bytes_eq_str(rq.path, "/app"));
	assert_int_equal(rq.flags, ZK_FEED_CHILDREN);
}

/* Server 1 streams three changes then dies; server 2 repeats the last one
 * (a client must drop it) and goes on. */
static void hook(struct fake *f, int conn)
{
	int fd = f->fds[conn];
	fake_connect_response(fd, f->session_timeout_ms, FAKE_SESSION_ID);
	if (conn == 0) {
		feed_reply(fd, 1, ZK_FEED_OK, 5);
		feed_event(fd, 10, 0, ZK_FEED_CREATED, "/app/a");
		feed_event(fd, 10, 1, ZK_FEED_CHILD, "/app");
		feed_event(fd, 11, 0, ZK_FEED_DATA, "/app/a");
	} else if (conn == 1) {
		feed_reply(fd, 2, ZK_FEED_OK, 5);
		feed_event(fd, 11, 0, ZK_FEED_DATA, "/app/a"); /* already delivered */
		feed_event(fd, 11, 1, ZK_FEED_ACL, "/app/a");
		feed_event(fd, 12, 0, ZK_FEED_DELETED, "/app/a");
	} else {
		feed_reply(fd, conn + 1, ZK_FEED_COMPACTED, 50 + conn);
	}
}

static void test_feed_resumes_after_last_change(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = hook;
	struct kc_options o = fake_options(&f, "a:1,b:2", false);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	struct seen seen = {0};
	struct kc_feed feed;
	assert_int_equal(kc_feed_init(&feed, &c, "bad//path", 10, 0, on_change, &seen),
			 KEEL_INVAL);
	assert_int_equal(kc_feed_init(&feed, &c, "/app", 10, 8, on_change, &seen), KEEL_INVAL);
	assert_int_equal(kc_feed_init(&feed, &c, "/app", 10, ZK_FEED_CHILDREN, on_change, &seen),
			 KEEL_OK);
	assert_int_equal(kc_feed_poll(&feed, 200), ZK_OK);
	read_feed_request(f.fds[0], 1, 10, 0);
	assert_int_equal(seen.count, 3);
	assert_int_equal(feed.next_zxid, 11);
	assert_int_equal(feed.next_seq, 1);
	/* Server 1 dies. */
	close(f.fds[0]);
	f.fds[0] = -1;
	int32_t rc = kc_feed_poll(&feed, 200);
	assert_true(rc == ZK_OK || rc == ZK_CONNECTION_LOSS);
	while (seen.count < 5 && f.dial_count < 3) {
		rc = kc_feed_poll(&feed, 200);
		assert_true(rc == ZK_OK || rc == ZK_CONNECTION_LOSS);
	}
	assert_int_equal(f.dial_count, 2);
	read_feed_request(f.fds[1], 2, 11, 1);
	assert_int_equal(seen.count, 5);
	const char *want[] = {"/app/a", "/app", "/app/a", "/app/a", "/app/a"};
	const int64_t zx[] = {10, 10, 11, 11, 12};
	const int32_t sq[] = {0, 1, 0, 1, 0};
	const int32_t ty[] = {ZK_FEED_CREATED, ZK_FEED_CHILD, ZK_FEED_DATA, ZK_FEED_ACL,
			      ZK_FEED_DELETED};
	for (int i = 0; i < 5; i++) {
		assert_string_equal(seen.path[i], want[i]);
		assert_int_equal(seen.zxid[i], zx[i]);
		assert_int_equal(seen.seq[i], sq[i]);
		assert_int_equal(seen.type[i], ty[i]);
	}
	/* Server 2 dies too; then both servers in turn answer COMPACTED: the
	 * feed tries each before it ends, with the last one's oldest start. */
	close(f.fds[1]);
	f.fds[1] = -1;
	rc = ZK_OK;
	for (int i = 0; i < 10 && rc != KC_FEED_COMPACTED; i++) {
		rc = kc_feed_poll(&feed, 200);
	}
	assert_int_equal(rc, KC_FEED_COMPACTED);
	assert_int_equal(f.dial_count, 4);
	assert_int_equal(feed.oldest_zxid, 53);
	read_feed_request(f.fds[2], 3, 12, 1);
	read_feed_request(f.fds[3], 4, 12, 1);
	assert_string_not_equal(f.dialed[2], f.dialed[3]); /* both servers asked */
	assert_int_equal(kc_feed_poll(&feed, 0), KC_FEED_COMPACTED);
	assert_int_equal(seen.count, 5);
	kc_feed_close(&feed);
	fake_close(&f);
	kc_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_feed_resumes_after_last_change),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
