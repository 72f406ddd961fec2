/*
 * Unit tests: the client's connection (src/client/kc_conn.c) against a
 * scripted fake server (test_client_fake.h): the handshake, framing and
 * its bounds, reply matching, events before replies, pings and the read
 * timeout, server failover, reconnecting with the same session (password,
 * lastZxidSeen, credentials and watches re-sent), session expiry, auth
 * failure, closeSession, and a server that sends garbage.
 */
#include <pthread.h>
#include <time.h>

#include "os/clock.h"
#include "test_client_fake.h"

static uint8_t buf[1u << 20];

/* ---- handshake ---- */

static void test_handshake(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "10.0.0.1:2181", true);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_state(&c), KC_IDLE);
	assert_int_equal(kc_connect(&c), ZK_OK);
	assert_int_equal(kc_state(&c), KC_CONNECTED);
	assert_int_equal(kc_session_id(&c), FAKE_SESSION_ID);
	assert_int_equal(kc_session_timeout_ms(&c), 9000);
	assert_string_equal(kc_server(&c), "10.0.0.1:2181");
	assert_int_equal(kc_session_passwd(&c)[0], 0x5a);
	assert_int_equal(kc_fd(&c) >= 0, true);

	struct zk_connect_request req;
	fake_read_connect(f.fds[0], buf, sizeof(buf), &req);
	assert_int_equal(req.protocol_version, 0);
	assert_int_equal(req.last_zxid_seen, 0);
	assert_int_equal(req.timeout_ms, 10000);
	assert_int_equal(req.session_id, 0);
	assert_int_equal(zk_bytes_len(req.passwd), ZK_PASSWD_SIZE);
	for (int i = 0; i < ZK_PASSWD_SIZE; i++) {
		assert_int_equal(req.passwd.data[i], 0);
	}
	assert_true(req.has_read_only);
	assert_false(req.read_only);

	struct kc_event ev;
	assert_true(kc_next_event(&c, &ev));
	assert_int_equal(ev.type, ZK_EVENT_NONE);
	assert_int_equal(ev.state, ZK_STATE_SYNC_CONNECTED);
	assert_string_equal(ev.path, "");
	assert_false(kc_next_event(&c, &ev));
	fake_close(&f); /* first: closing then cannot wait for a reply */
	kc_close(&c);
}

static void test_bad_server_lists(void **state)
{
	(void)state;
	const char *bad[] = {"", " , ", "host", "host:", "host:0", "host:70000", "host:12a",
			     "a:1/chroot", "[::1]2181", ":2181"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kc_options o;
		memset(&o, 0, sizeof(o));
		o.servers = bad[i];
		struct kc_client c;
		assert_int_equal(kc_init(&c, &o), KEEL_INVAL);
		assert_true(strlen(kc_message(&c)) > 0);
	}
	struct kc_options o;
	memset(&o, 0, sizeof(o));
	o.servers = " a:1 ,[::1]:2181,localhost:3";
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(c.server_count, 3);
	kc_close(&c);
}

/* The shuffle is a permutation, and a seed fixes it. */
static void test_shuffle(void **state)
{
	(void)state;
	bool first_seen[4] = {false};
	for (uint64_t seed = 1; seed <= 64; seed++) {
		struct kc_options o;
		memset(&o, 0, sizeof(o));
		o.servers = "h0:1,h1:1,h2:1,h3:1";
		o.seed = seed;
		struct kc_client a, b;
		assert_int_equal(kc_init(&a, &o), KEEL_OK);
		assert_int_equal(kc_init(&b, &o), KEEL_OK);
		bool seen[4] = {false};
		for (uint32_t i = 0; i < 4; i++) {
			assert_string_equal(a.servers[i].addr, b.servers[i].addr);
			seen[a.servers[i].addr[1] - '0'] = true;
		}
		for (int i = 0; i < 4; i++) {
			assert_true(seen[i]);
		}
		first_seen[a.servers[0].addr[1] - '0'] = true;
		kc_close(&a);
		kc_close(&b);
	}
	for (int i = 0; i < 4; i++) {
		assert_true(first_seen[i]); /* every server gets to be first */
	}
}

/* ---- replies and events ---- */

static void test_get_and_events_in_order(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", false);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	int fd = f.fds[0];
	fake_read_frame(fd, buf, sizeof(buf));

	/* Two events the server sent before the reply come first, in order. */
	fake_event(fd, ZK_EVENT_NODE_CREATED, "/x");
	fake_event(fd, ZK_EVENT_NODE_CHILDREN_CHANGED, "/");
	fake_get_reply(fd, 1, 0x42, "hello", 7);
	struct zk_bytes data;
	struct zk_stat st;
	assert_int_equal(kc_get(&c, "/a", true, &data, &st), ZK_OK);
	assert_true(zk_bytes_eq_str(data, "hello"));
	assert_int_equal(st.version, 7);
	assert_int_equal(kc_last_zxid(&c), 0x42);
	assert_int_equal(f.event_count, 3); /* SyncConnected + 2 */
	assert_int_equal(f.event_states[0], ZK_STATE_SYNC_CONNECTED);
	assert_int_equal(f.event_types[1], ZK_EVENT_NODE_CREATED);
	assert_string_equal(f.event_paths[1], "/x");
	assert_int_equal(f.event_types[2], ZK_EVENT_NODE_CHILDREN_CHANGED);
	assert_string_equal(f.event_paths[2], "/");

	struct zk_request req;
	fake_read_request(fd, buf, sizeof(buf), &req);
	assert_int_equal(req.xid, 1);
	assert_int_equal(req.opcode, ZK_OP_GET_DATA);
	assert_true(zk_bytes_eq_str(req.u.read.path, "/a"));
	assert_true(req.u.read.watch);
	assert_int_equal(kc_watch_count(&c), 1);

	/* The data watch fires: it is consumed; an event after the reply
	 * is delivered by the next call (here kc_poll). */
	fake_event(fd, ZK_EVENT_NODE_DATA_CHANGED, "/a");
	assert_int_equal(kc_poll(&c, 1000), ZK_OK);
	assert_int_equal(f.event_count, 4);
	assert_int_equal(f.event_types[3], ZK_EVENT_NODE_DATA_CHANGED);
	assert_int_equal(kc_watch_count(&c), 0);

	/* kc_poll(c, 0) takes in what already arrived without waiting. */
	fake_event(fd, ZK_EVENT_NODE_CHILDREN_CHANGED, "/zero");
	struct pollfd pfd = {.fd = kc_fd(&c), .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	assert_int_equal(kc_poll(&c, 0), ZK_OK);
	assert_int_equal(f.event_count, 5);
	assert_string_equal(f.event_paths[4], "/zero");
	assert_int_equal(kc_poll(&c, 0), ZK_OK); /* nothing more: returns at once */
	assert_int_equal(f.event_count, 5);

	/* exists on a missing node leaves an exist watch. */
	fake_reply(fd, 2, 0x43, ZK_NO_NODE, NULL, 0);
	assert_int_equal(kc_exists(&c, "/missing", true, NULL), ZK_NO_NODE);
	assert_int_equal(kc_watch_count(&c), 1);
	fake_event(fd, ZK_EVENT_NODE_CREATED, "/missing");
	assert_int_equal(kc_poll(&c, 1000), ZK_OK);
	assert_int_equal(kc_watch_count(&c), 0);
	fake_close(&f);
	kc_close(&c);
}

/* A reply trickled one byte at a time is reassembled. */
struct trickle {
	int fd;
	uint8_t bytes[256];
	size_t size;
};

static void *trickle_main(void *arg)
{
	struct trickle *t = arg;
	for (size_t i = 0; i < t->size; i++) {
		fake_write(t->fd, t->bytes + i, 1);
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void test_trickled_reply(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", true);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	struct trickle t = {.fd = f.fds[0]};
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, t.bytes, sizeof(t.bytes));
	size_t start = zk_frame_begin(&w);
	zk_reply_header_encode(&w, 1, 9, 0);
	zk_write_bytes(&w, zk_bytes_str("slow"));
	struct zk_stat st = fake_stat(1);
	zk_write_stat(&w, &st);
	zk_frame_end(&w, start);
	assert_true(keel_wbuf_ok(&w));
	t.size = w.size;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, trickle_main, &t), 0);
	struct zk_bytes data;
	assert_int_equal(kc_get(&c, "/s", false, &data, NULL), ZK_OK);
	assert_true(zk_bytes_eq_str(data, "slow"));
	pthread_join(th, NULL);
	fake_close(&f);
	kc_close(&c);
}

/* ---- malicious or broken servers ---- */

static void connect_one_conn(struct fake *f, struct kc_client *c, struct kc_options *o)
{
	fake_init(f);
	f->on_dial = fake_hook_accept;
	for (int i = 1; i < FAKE_MAX_CONNS; i++) {
		f->script[i] = FAKE_REFUSE; /* no second chance: failures stay visible */
	}
	*o = fake_options(f, "a:1", true);
	o->max_packet = 4096;
	o->call_timeout_ms = 1000;
	assert_int_equal(kc_init(c, o), KEEL_OK);
	assert_int_equal(kc_connect(c), ZK_OK);
	fake_read_frame(f->fds[0], buf, sizeof(buf));
}

static void expect_lost(struct kc_client *c, int32_t got, int32_t want, const char *needle)
{
	assert_int_equal(got, want);
	assert_int_equal(kc_state(c), KC_DISCONNECTED);
	if (needle != NULL && strstr(kc_message(c), needle) == NULL) {
		fail_msg("message '%s' lacks '%s'", kc_message(c), needle);
	}
	assert_true(c->rx_capacity <= c->opt.max_packet + 4);
	/* The Disconnected event follows SyncConnected in the queue. */
	struct kc_event ev;
	bool disconnected = false;
	while (kc_next_event(c, &ev)) {
		disconnected = disconnected || ev.state == ZK_STATE_DISCONNECTED;
	}
	assert_true(disconnected);
}

static void test_oversized_frame(void **state)
{
	(void)state;
	uint32_t lengths[] = {0x7fffffffu, 0x80000000u, 0xffffffffu, 4097};
	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
		struct fake f;
		struct kc_options o;
		struct kc_client c;
		connect_one_conn(&f, &c, &o);
		uint8_t prefix[4];
		keel_store_be32(prefix, lengths[i]);
		fake_write(f.fds[0], prefix, 4);
		int32_t rc = kc_get(&c, "/a", false, NULL, NULL);
		expect_lost(&c, rc, ZK_CONNECTION_LOSS,
			    lengths[i] & 0x80000000u ? "negative" : "max packet");
		fake_close(&f);
		kc_close(&c);
	}
}

static void test_malformed_replies(void **state)
{
	(void)state;
	/* getData body cut short */
	struct fake f;
	struct kc_options o;
	struct kc_client c;
	connect_one_conn(&f, &c, &o);
	uint8_t body[8] = {0, 0, 0, 5, 'h', 'e', 'l', 'l'};
	fake_reply(f.fds[0], 1, 5, 0, body, sizeof(body));
	expect_lost(&c, kc_get(&c, "/a", false, NULL, NULL), ZK_MARSHALLING_ERROR, "malformed");
	fake_close(&f);
	kc_close(&c);

	/* a children vector claiming 2^31-1 entries */
	connect_one_conn(&f, &c, &o);
	uint8_t vec[12] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'x'};
	fake_reply(f.fds[0], 1, 5, 0, vec, sizeof(vec));
	struct zk_str_vec kids;
	expect_lost(&c, kc_get_children(&c, "/", false, &kids, NULL), ZK_MARSHALLING_ERROR,
		    "malformed");
	fake_close(&f);
	kc_close(&c);

	/* a reply for an xid nobody asked for */
	connect_one_conn(&f, &c, &o);
	fake_get_reply(f.fds[0], 7, 5, "x", 0);
	expect_lost(&c, kc_get(&c, "/a", false, NULL, NULL), ZK_CONNECTION_LOSS, "xid 7");
	fake_close(&f);
	kc_close(&c);

	/* a frame shorter than a reply header */
	connect_one_conn(&f, &c, &o);
	fake_frame(f.fds[0], "abc", 3);
	expect_lost(&c, kc_get(&c, "/a", false, NULL, NULL), ZK_CONNECTION_LOSS, "short");
	fake_close(&f);
	kc_close(&c);

	/* a notification with a path length past the frame */
	connect_one_conn(&f, &c, &o);
	uint8_t ev[12] = {0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0x10, 0};
	fake_reply(f.fds[0], -1, -1, 0, ev, sizeof(ev));
	expect_lost(&c, kc_poll(&c, 1000), ZK_CONNECTION_LOSS, "malformed notification");
	fake_close(&f);
	kc_close(&c);
}

/* Random bytes after the handshake: every call ends with an error code or
 * a reply, never a crash, never more memory than max_packet. */
static void test_garbage_server(void **state)
{
	(void)state;
	struct keel_rng rng;
	keel_rng_seed(&rng, 99);
	for (int round = 0; round < 200; round++) {
		struct fake f;
		struct kc_options o;
		struct kc_client c;
		connect_one_conn(&f, &c, &o);
		uint8_t junk[512];
		size_t n = 1 + keel_rng_below(&rng, sizeof(junk));
		for (size_t i = 0; i < n; i++) {
			junk[i] = (uint8_t)keel_rng_next(&rng);
		}
		if (round % 2 == 0) {
			/* a plausible frame of garbage rather than raw noise */
			keel_store_be32(junk, (uint32_t)(n - 4 < 4 ? 0 : n - 4));
		}
		fake_write(f.fds[0], junk, n);
		shutdown(f.fds[0], SHUT_WR);
		int32_t rc = kc_get(&c, "/a", false, NULL, NULL);
		assert_true(rc == ZK_OK || rc < 0);
		assert_true(c.rx_capacity <= c.opt.max_packet + 4);
		fake_close(&f);
		kc_close(&c);
	}
}

/* ---- timing: pings and the read timeout ---- */

static void test_ping_then_read_timeout(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	f.session_timeout_ms = 300; /* ping every 100 ms, silent after 200 ms */
	f.script[1] = FAKE_REFUSE;
	struct kc_options o = fake_options(&f, "a:1", false);
	o.connect_timeout_ms = 200;
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	int fd = f.fds[0];
	fake_read_frame(fd, buf, sizeof(buf));
	assert_int_equal(kc_poll_timeout_ms(&c) <= 100, true);

	/* Idle for 150 ms: one ping leaves after ~100 ms. */
	assert_int_equal(kc_poll(&c, 150), ZK_OK);
	struct zk_request req;
	fake_read_request(fd, buf, sizeof(buf), &req);
	assert_int_equal(req.xid, ZK_XID_PING);
	assert_int_equal(req.opcode, ZK_OP_PING);
	fake_reply(fd, ZK_XID_PING, 0, 0, NULL, 0);
	assert_int_equal(kc_poll(&c, 10), ZK_OK);
	assert_int_equal(kc_state(&c), KC_CONNECTED);

	/* Now the server goes silent: after 2/3 of the timeout the client
	 * calls the connection lost and tries the next server (refused). */
	uint64_t start = keel_clock_mono_ms();
	int32_t rc = ZK_OK;
	while (rc == ZK_OK && keel_clock_mono_ms() - start < 2000) {
		rc = kc_poll(&c, 100);
	}
	assert_int_equal(rc, ZK_CONNECTION_LOSS);
	assert_int_equal(kc_state(&c), KC_DISCONNECTED);
	assert_non_null(strstr(kc_message(&c), "no word from the server"));
	assert_int_equal(f.dial_count, 1);
	/* The next poll tries to reconnect (the script refuses). */
	assert_int_equal(kc_poll(&c, 10), ZK_CONNECTION_LOSS);
	assert_int_equal(f.dial_count, 2);
	assert_true(kc_disconnected_ms(&c) < 2000);
	assert_int_equal(f.event_states[f.event_count - 1], ZK_STATE_DISCONNECTED);
	fake_close(&f);
	kc_close(&c); /* disconnected: no closeSession */
}

/* A call that gets no reply fails with OperationTimeout and drops the
 * connection, so a late reply cannot answer the next call. */
static void test_call_timeout(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", true);
	o.call_timeout_ms = 200;
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	uint64_t start = keel_clock_mono_ms();
	assert_int_equal(kc_get(&c, "/slow", false, NULL, NULL), ZK_OPERATION_TIMEOUT);
	uint64_t took = keel_clock_mono_ms() - start;
	assert_true(took >= 190 && took < 1500);
	assert_int_equal(kc_state(&c), KC_DISCONNECTED);
	fake_close(&f);
	kc_close(&c);
}

/* ---- failover and reconnect ---- */

static void test_failover_on_refusal(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	f.script[0] = FAKE_REFUSE;
	struct kc_options o = fake_options(&f, "a:1,b:2,c:3", true);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	assert_int_equal(f.dial_count, 2);
	assert_string_not_equal(f.dialed[0], f.dialed[1]);
	assert_string_equal(kc_server(&c), f.dialed[1]);
	fake_close(&f);
	kc_close(&c);
}

/* A server that closes without a ConnectResponse (keel refuses a client
 * whose lastZxidSeen is ahead of it): the next server is tried. */
static void hook_first_silent(struct fake *f, int conn)
{
	if (conn == 0) {
		shutdown(f->fds[conn], SHUT_WR);
	} else {
		fake_hook_accept(f, conn);
	}
}

static void test_failover_on_closed_handshake(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = hook_first_silent;
	struct kc_options o = fake_options(&f, "a:1,b:2", true);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	assert_int_equal(f.dial_count, 2);
	fake_close(&f);
	kc_close(&c);
}

static void test_nothing_reachable(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	for (int i = 0; i < FAKE_MAX_CONNS; i++) {
		f.script[i] = FAKE_REFUSE;
	}
	struct kc_options o = fake_options(&f, "a:1,b:2", true);
	o.call_timeout_ms = 300;
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	uint64_t start = keel_clock_mono_ms();
	assert_int_equal(kc_get(&c, "/a", false, NULL, NULL), ZK_CONNECTION_LOSS);
	uint64_t took = keel_clock_mono_ms() - start;
	assert_true(took >= 250 && took < 2000);
	assert_non_null(strstr(kc_message(&c), "no server reachable"));
	assert_non_null(strstr(kc_message(&c), "refused by script"));
	assert_true(f.dial_count >= 4); /* several rounds, with pauses */
	assert_true(f.dial_count < FAKE_MAX_CONNS);
	assert_int_equal(kc_state(&c), KC_IDLE);
	fake_close(&f);
	kc_close(&c);
}

/* Reconnect: same session id and password, lastZxidSeen, credentials
 * re-sent, watches re-set with setWatches, then the call proceeds. */
static void hook_resume(struct fake *f, int conn)
{
	int fd = f->fds[conn];
	fake_connect_response(fd, 9000, FAKE_SESSION_ID);
	if (conn == 1) {
		fake_reply(fd, ZK_XID_AUTH, 0, 0, NULL, 0);
		fake_reply(fd, ZK_XID_SET_WATCHES, 0x99, 0, NULL, 0);
		fake_event(fd, ZK_EVENT_NODE_DATA_CHANGED, "/w"); /* catch-up */
		fake_get_reply(fd, 2, 0x99, "again", 2);
	}
}

static void test_reconnect_resumes_session(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = hook_resume;
	struct kc_options o = fake_options(&f, "a:1,b:2", false);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	int fd = -1;
	assert_int_equal(kc_connect(&c), ZK_OK);
	fd = f.fds[0];
	fake_read_frame(fd, buf, sizeof(buf));

	fake_reply(fd, ZK_XID_AUTH, 0, 0, NULL, 0);
	assert_int_equal(kc_add_auth(&c, "digest", zk_bytes_str("bob:secret")), ZK_OK);
	fake_get_reply(fd, 1, 0x77, "first", 1);
	assert_int_equal(kc_get(&c, "/w", true, NULL, NULL), ZK_OK);
	fake_drain(fd);

	/* The server dies (its end closes). The next call notices before
	 * sending, reconnects to the other server and succeeds there. */
	close(fd);
	f.fds[0] = -1;
	struct zk_bytes data;
	assert_int_equal(kc_get(&c, "/w", false, &data, NULL), ZK_OK);
	assert_true(zk_bytes_eq_str(data, "again"));
	assert_int_equal(f.dial_count, 2);
	assert_string_not_equal(f.dialed[0], f.dialed[1]);
	assert_int_equal(kc_last_zxid(&c), 0x99);

	/* What the second server heard, in order. */
	int fd2 = f.fds[1];
	struct zk_connect_request creq;
	fake_read_connect(fd2, buf, sizeof(buf), &creq);
	assert_int_equal(creq.session_id, FAKE_SESSION_ID);
	assert_int_equal(creq.last_zxid_seen, 0x77);
	assert_int_equal(zk_bytes_len(creq.passwd), ZK_PASSWD_SIZE);
	assert_int_equal(creq.passwd.data[0], 0x5a);
	struct zk_request req;
	fake_read_request(fd2, buf, sizeof(buf), &req);
	assert_int_equal(req.xid, ZK_XID_AUTH);
	assert_int_equal(req.opcode, ZK_OP_AUTH);
	assert_true(zk_bytes_eq_str(req.u.auth.scheme, "digest"));
	assert_true(zk_bytes_eq_str(req.u.auth.auth, "bob:secret"));
	fake_read_request(fd2, buf, sizeof(buf), &req);
	assert_int_equal(req.xid, ZK_XID_SET_WATCHES);
	assert_int_equal(req.opcode, ZK_OP_SET_WATCHES);
	assert_int_equal(req.u.set_watches.relative_zxid, 0x77);
	assert_int_equal(req.u.set_watches.lists[ZK_SW_DATA].count, 1);
	assert_int_equal(req.u.set_watches.lists[ZK_SW_EXIST].count, 0);
	assert_int_equal(req.u.set_watches.lists[ZK_SW_CHILD].count, 0);
	fake_read_request(fd2, buf, sizeof(buf), &req);
	assert_int_equal(req.xid, 2);
	assert_int_equal(req.opcode, ZK_OP_GET_DATA);

	/* Events: SyncConnected, Disconnected, SyncConnected, the catch-up. */
	assert_int_equal(f.event_count, 4);
	assert_int_equal(f.event_states[0], ZK_STATE_SYNC_CONNECTED);
	assert_int_equal(f.event_states[1], ZK_STATE_DISCONNECTED);
	assert_int_equal(f.event_states[2], ZK_STATE_SYNC_CONNECTED);
	assert_int_equal(f.event_types[3], ZK_EVENT_NODE_DATA_CHANGED);
	assert_int_equal(kc_watch_count(&c), 0); /* consumed by the catch-up */
	fake_close(&f);
	kc_close(&c);
}

static void hook_expire_second(struct fake *f, int conn)
{
	fake_connect_response(f->fds[conn], conn == 0 ? 9000 : 0, conn == 0 ? FAKE_SESSION_ID : 0);
}

static void test_expired_on_reconnect(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = hook_expire_second;
	struct kc_options o = fake_options(&f, "a:1,b:2", false);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	shutdown(f.fds[0], SHUT_WR);
	assert_int_equal(kc_get(&c, "/a", false, NULL, NULL), ZK_SESSION_EXPIRED);
	assert_int_equal(kc_state(&c), KC_EXPIRED);
	assert_int_equal(f.event_states[f.event_count - 1], ZK_STATE_EXPIRED);
	int dials = f.dial_count;
	assert_int_equal(kc_get(&c, "/a", false, NULL, NULL), ZK_SESSION_EXPIRED);
	assert_int_equal(kc_poll(&c, 10), ZK_SESSION_EXPIRED);
	assert_int_equal(kc_poll_timeout_ms(&c), -1);
	assert_int_equal(f.dial_count, dials); /* final: nothing dialed */
	fake_close(&f);
	kc_close(&c);
}

static void test_auth_failed(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", false);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	fake_reply(f.fds[0], ZK_XID_AUTH, 0, ZK_AUTH_FAILED, NULL, 0);
	assert_int_equal(kc_add_auth(&c, "digest", zk_bytes_str("x")), ZK_AUTH_FAILED);
	assert_int_equal(kc_state(&c), KC_AUTH_FAILED);
	assert_int_equal(f.event_states[f.event_count - 1], ZK_STATE_AUTH_FAILED);
	assert_int_equal(kc_get(&c, "/", false, NULL, NULL), ZK_AUTH_FAILED);
	fake_close(&f);
	kc_close(&c);
}

static void test_close_session(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", false);
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	int fd = f.fds[0];
	fake_read_frame(fd, buf, sizeof(buf));
	fake_reply(fd, 1, 0x10, 0, NULL, 0);
	assert_int_equal(kc_close_session(&c), ZK_OK);
	assert_int_equal(kc_state(&c), KC_CLOSED);
	assert_int_equal(f.event_states[f.event_count - 1], ZK_STATE_CLOSED);
	struct zk_request req;
	fake_read_request(fd, buf, sizeof(buf), &req);
	assert_int_equal(req.opcode, ZK_OP_CLOSE_SESSION);
	assert_int_equal(kc_get(&c, "/", false, NULL, NULL), ZK_CONNECTION_LOSS);
	assert_int_equal(f.dial_count, 1);
	fake_close(&f);
	kc_close(&c);
}

/* Resuming a given session id + password (another process's session). */
static void test_resume_given_session(void **state)
{
	(void)state;
	struct fake f;
	fake_init(&f);
	f.on_dial = fake_hook_accept;
	struct kc_options o = fake_options(&f, "a:1", true);
	o.session_id = FAKE_SESSION_ID;
	memset(o.passwd, 0x33, sizeof(o.passwd));
	struct kc_client c;
	assert_int_equal(kc_init(&c, &o), KEEL_OK);
	assert_int_equal(kc_connect(&c), ZK_OK);
	struct zk_connect_request creq;
	fake_read_connect(f.fds[0], buf, sizeof(buf), &creq);
	assert_int_equal(creq.session_id, FAKE_SESSION_ID);
	assert_int_equal(creq.passwd.data[15], 0x33);
	fake_close(&f);
	kc_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake),
		cmocka_unit_test(test_bad_server_lists),
		cmocka_unit_test(test_shuffle),
		cmocka_unit_test(test_get_and_events_in_order),
		cmocka_unit_test(test_trickled_reply),
		cmocka_unit_test(test_oversized_frame),
		cmocka_unit_test(test_malformed_replies),
		cmocka_unit_test(test_garbage_server),
		cmocka_unit_test(test_ping_then_read_timeout),
		cmocka_unit_test(test_call_timeout),
		cmocka_unit_test(test_failover_on_refusal),
		cmocka_unit_test(test_failover_on_closed_handshake),
		cmocka_unit_test(test_nothing_reachable),
		cmocka_unit_test(test_reconnect_resumes_session),
		cmocka_unit_test(test_expired_on_reconnect),
		cmocka_unit_test(test_auth_failed),
		cmocka_unit_test(test_close_session),
		cmocka_unit_test(test_resume_given_session),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
