/* Unit tests: framed connections over loopback — round trips, batching of
 * many frames, checksummed frames, corrupt and oversized frames closing only
 * the offending connection, the bad-prefix hook (four-letter words), and
 * the abuse bounds: a partial frame holds what arrived, not what its header
 * announced; its deadline; the shared budget of partial-frame bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <uv.h>

#include "net/limits.h"
#include "net/net.h"

struct side {
	struct net_conn conn;
	int frames;
	size_t bytes;
	uint32_t last_seq;
	bool closed;
	enum keel_err reason;
	bool echo;
	bool saw_prefix;
	uint64_t turn_of[64]; /* nl.deferrals when frame i was delivered */
};

struct fixture {
	uv_loop_t loop;
	struct net_loop nl;
	uv_tcp_t server;
	struct side srv;
	struct side cli;
	struct net_conn_config cfg;
	int port;
	uv_timer_t stop_timer;
};

static struct fixture *fx;

static bool on_frame(struct net_conn *conn, const uint8_t *p, size_t n)
{
	struct side *s = conn->user;
	if (s->frames < 64) {
		s->turn_of[s->frames] = fx->nl.deferrals;
	}
	s->frames++;
	s->bytes += n;
	if (n >= 4) {
		uint32_t seq = keel_load_be32(p);
		if (s->frames > 1) {
			assert_int_equal(seq, s->last_seq + 1); /* in order */
		}
		s->last_seq = seq;
	}
	if (s->echo) {
		net_conn_send(conn, p, n);
	}
	return true;
}

static bool on_bad_prefix(struct net_conn *conn, const uint8_t prefix[4])
{
	struct side *s = conn->user;
	if (memcmp(prefix, "ruok", 4) == 0) {
		s->saw_prefix = true;
		net_conn_send_raw(conn, "imok", 4);
		net_conn_close(conn, KEEL_OK, true);
		return true;
	}
	return false;
}

static void on_close(struct net_conn *conn, enum keel_err reason)
{
	struct side *s = conn->user;
	s->closed = true;
	s->reason = reason;
}

static const struct net_conn_ops ops = {on_frame, on_bad_prefix, on_close};

static void on_connection(uv_stream_t *server, int status)
{
	assert_int_equal(status, 0);
	(void)server;
	assert_int_equal(net_conn_accept(&fx->srv.conn, &fx->nl, server, &fx->cfg, &ops, &fx->srv),
			 KEEL_OK);
}

static void setup_pair(bool checksummed, size_t max_frame)
{
	fx = calloc(1, sizeof(*fx));
	uv_loop_init(&fx->loop);
	assert_int_equal(net_loop_init(&fx->nl, &fx->loop), KEEL_OK);
	fx->cfg.max_frame_bytes = max_frame;
	fx->cfg.max_output_bytes = 64u << 20;
	fx->cfg.checksummed = checksummed;
	char err[128];
	assert_int_equal(net_listen(&fx->server, &fx->loop, "127.0.0.1:0", on_connection, fx, err,
				    sizeof(err)),
			 KEEL_OK);
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	uv_tcp_getsockname(&fx->server, (struct sockaddr *)&ss, &len);
	fx->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void connect_client(void)
{
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", fx->port);
	struct sockaddr_storage ss;
	assert_int_equal(net_parse_addr(addr, &ss), KEEL_OK);
	assert_int_equal(net_conn_connect(&fx->cli.conn, &fx->nl, (struct sockaddr *)&ss, &fx->cfg,
					  &ops, &fx->cli, NULL),
			 KEEL_OK);
}

static void run_until(bool *flag)
{
	for (int i = 0; i < 2000 && !*flag; i++) {
		uv_run(&fx->loop, UV_RUN_ONCE);
	}
}

static void run_for_frames(struct side *s, int frames)
{
	for (int i = 0; i < 200000 && s->frames < frames && !s->closed; i++) {
		uv_run(&fx->loop, UV_RUN_ONCE);
	}
}

static void teardown_pair(void)
{
	if (!fx->cli.closed && fx->cli.conn.started) {
		net_conn_close(&fx->cli.conn, KEEL_OK, false);
	}
	if (!fx->srv.closed && fx->srv.conn.started) {
		net_conn_close(&fx->srv.conn, KEEL_OK, false);
	}
	uv_close((uv_handle_t *)&fx->server, NULL);
	net_loop_close(&fx->nl);
	uv_run(&fx->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&fx->loop), 0);
	free(fx);
	fx = NULL;
}

static void send_seq(struct net_conn *c, uint32_t seq, size_t size)
{
	size_t mark;
	struct keel_wbuf *w = net_conn_frame_begin(c, &mark);
	assert_non_null(w);
	keel_wbuf_u32(w, seq);
	keel_wbuf_zero(w, size - 4);
	net_conn_frame_end(c, mark);
}

static void test_echo_many_frames(void **state)
{
	(void)state;
	for (int checksummed = 0; checksummed <= 1; checksummed++) {
		setup_pair(checksummed, 1 << 20);
		fx->srv.echo = true;
		connect_client();
		/* Queued before the connection is up: must still go out, in order. */
		for (uint32_t i = 0; i < 5000; i++) {
			send_seq(&fx->cli.conn, i, 4 + (i % 300));
		}
		send_seq(&fx->cli.conn, 5000, 200000); /* one big frame */
		run_for_frames(&fx->cli, 5001);
		assert_int_equal(fx->cli.frames, 5001);
		assert_int_equal(fx->srv.frames, 5001);
		assert_false(fx->cli.closed);
		/* Batching: far fewer write calls than frames. */
		assert_true(fx->nl.frames_out >= 10002);
		assert_true(fx->nl.writes * 10 < fx->nl.frames_out);
		teardown_pair();
	}
}

static void test_oversized_frame_closes_only_that_connection(void **state)
{
	(void)state;
	setup_pair(false, 1024);
	connect_client();
	run_until(&fx->cli.conn.connected);
	uint8_t hdr[4];
	keel_store_be32(hdr, 4096); /* over the 1024 limit */
	net_conn_send_raw(&fx->cli.conn, hdr, 4);
	run_until(&fx->srv.closed);
	assert_true(fx->srv.closed);
	assert_int_equal(fx->srv.reason, KEEL_TOOBIG);
	teardown_pair();
}

static void test_corrupt_checksum_closes(void **state)
{
	(void)state;
	setup_pair(true, 1024);
	connect_client();
	run_until(&fx->cli.conn.connected);
	uint8_t frame[12] = {0, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4};
	net_conn_send_raw(&fx->cli.conn, frame, sizeof(frame));
	run_until(&fx->srv.closed);
	assert_int_equal(fx->srv.reason, KEEL_CORRUPT);
	assert_int_equal(fx->srv.frames, 0);
	teardown_pair();
}

static void test_bad_prefix_hook(void **state)
{
	(void)state;
	setup_pair(false, 1 << 20);
	connect_client();
	run_until(&fx->cli.conn.connected);
	net_conn_send_raw(&fx->cli.conn, "ruok", 4);
	run_until(&fx->cli.closed); /* server replies and closes */
	assert_true(fx->srv.saw_prefix);
	assert_true(fx->cli.closed);
	teardown_pair();
}

static void test_pause_resume(void **state)
{
	(void)state;
	setup_pair(false, 1 << 20);
	connect_client();
	run_until(&fx->cli.conn.connected);
	run_until(&fx->srv.conn.started);
	for (int i = 0; i < 10 && !fx->srv.conn.connected; i++) {
		uv_run(&fx->loop, UV_RUN_ONCE);
	}
	net_conn_pause(&fx->srv.conn);
	for (uint32_t i = 0; i < 100; i++) {
		send_seq(&fx->cli.conn, i, 8);
	}
	for (int i = 0; i < 50; i++) {
		uv_run(&fx->loop, UV_RUN_NOWAIT);
	}
	assert_int_equal(fx->srv.frames, 0);
	net_conn_resume(&fx->srv.conn);
	run_for_frames(&fx->srv, 100);
	assert_int_equal(fx->srv.frames, 100);
	teardown_pair();
}

/* Runs the loop until the server has buffered `bytes` (or it closed). */
static void run_until_buffered(size_t bytes)
{
	for (int i = 0; i < 20000 && fx->srv.conn.rlen < bytes && !fx->srv.closed; i++) {
		uv_run(&fx->loop, UV_RUN_ONCE);
	}
}

static void test_partial_frame_holds_what_arrived(void **state)
{
	(void)state;
	setup_pair(false, 1 << 20);
	connect_client();
	run_until(&fx->cli.conn.connected);
	size_t announced = (1u << 20) - 1;
	uint8_t *frame = calloc(1, 4 + announced);
	assert_non_null(frame);
	keel_store_be32(frame, (uint32_t)announced);
	net_conn_send_raw(&fx->cli.conn, frame, 4 + 100);
	run_until_buffered(104);
	assert_int_equal(fx->srv.conn.rlen, 104);
	/* Held: one read chunk, not the 1 MiB the header announced. */
	assert_true(fx->srv.conn.rcap <= 16384);
	uint64_t since = fx->srv.conn.partial_since_ms;
	assert_true(since != 0);
	assert_false(net_conn_frame_overdue(&fx->srv.conn, since + 999, 1000));
	assert_true(net_conn_frame_overdue(&fx->srv.conn, since + 1000, 1000));
	/* Half of it: the buffer has grown with the bytes, no further. */
	net_conn_send_raw(&fx->cli.conn, frame + 104, announced / 2);
	run_until_buffered(104 + announced / 2);
	assert_true(fx->srv.conn.rcap <= 2 * fx->srv.conn.rlen);
	/* The rest: delivered, and no frame is pending any more. */
	net_conn_send_raw(&fx->cli.conn, frame + 104 + announced / 2, announced - 100 - announced / 2);
	run_for_frames(&fx->srv, 1);
	assert_int_equal(fx->srv.frames, 1);
	assert_int_equal(fx->srv.bytes, announced);
	assert_int_equal(fx->srv.conn.partial_since_ms, 0);
	assert_false(net_conn_frame_overdue(&fx->srv.conn, since + 1000000, 1000));
	free(frame);
	teardown_pair();
}

static void test_read_budget_closes_the_hog(void **state)
{
	(void)state;
	struct net_byte_budget budget = {64u << 10, 0, 0};
	setup_pair(false, 1 << 20);
	fx->cfg.read_budget = &budget;
	connect_client();
	run_until(&fx->cli.conn.connected);
	size_t sent = 200u << 10;
	uint8_t *bytes = calloc(1, 4 + sent);
	assert_non_null(bytes);
	keel_store_be32(bytes, 512u << 10); /* announces 512 KiB, under the frame limit */
	net_conn_send_raw(&fx->cli.conn, bytes, 4 + sent);
	run_until(&fx->srv.closed);
	assert_true(fx->srv.closed);
	assert_int_equal(fx->srv.reason, KEEL_LIMIT);
	assert_int_equal(budget.refusals, 1);
	assert_true(budget.used_bytes <= (64u << 10));
	free(bytes);
	teardown_pair();
	assert_int_equal(budget.used_bytes, 0); /* every buffer given back */
}

/* Fairness: a turn hands on at most max_frames_per_turn frames (or stops
 * once its output reaches max_output_per_turn); the rest follows in later
 * loop iterations, in order, with reading stopped meanwhile. */
static void check_turns(uint32_t frames_cap, size_t output_cap, bool echo, uint32_t per_turn)
{
	setup_pair(false, 1 << 20);
	fx->cfg.max_frames_per_turn = frames_cap;
	fx->cfg.max_output_per_turn = output_cap;
	fx->srv.echo = echo;
	connect_client();
	run_until(&fx->cli.conn.connected);
	uint8_t frames[20 * 8];
	for (uint32_t i = 0; i < 20; i++) {
		keel_store_be32(frames + 8 * i, 4);
		keel_store_be32(frames + 8 * i + 4, i);
	}
	net_conn_send_raw(&fx->cli.conn, frames, sizeof(frames)); /* one write */
	run_for_frames(&fx->srv, 20);
	assert_int_equal(fx->srv.frames, 20); /* all, in order (on_frame checks) */
	assert_true(fx->nl.deferrals >= 20 / per_turn - 1);
	for (int i = 0; i < 20; i++) {
		uint32_t same = 0;
		for (int j = 0; j < 20; j++) {
			same += fx->srv.turn_of[j] == fx->srv.turn_of[i];
		}
		assert_true(same <= per_turn);
	}
	assert_false(fx->srv.conn.deferred);
	assert_null(fx->nl.deferred);
	teardown_pair();
}

static void test_turns_are_capped(void **state)
{
	(void)state;
	check_turns(4, 0, false, 4);
	check_turns(0, 1, true, 1); /* each echo reply uses up the turn */
}

/* The shared output budget counts every connection's unsent bytes and,
 * once over, closes a connection that holds more than 1/64 of it. */
static void test_output_budget(void **state)
{
	(void)state;
	struct net_byte_budget budget = {64u << 10, 0, 0};
	setup_pair(false, 1 << 20);
	fx->cfg.output_budget = &budget;
	connect_client(); /* frames queued before the connection is up stay unsent */
	for (uint32_t i = 0; i < 15; i++) {
		send_seq(&fx->cli.conn, i, 4096);
		assert_int_equal(budget.used_bytes, (i + 1) * (4 + 4096));
	}
	assert_false(fx->cli.conn.closing);
	assert_int_equal(budget.refusals, 0);
	send_seq(&fx->cli.conn, 15, 4096); /* 16 * 4100 > 64 KiB */
	assert_true(fx->cli.conn.closing);
	assert_int_equal(budget.refusals, 1);
	run_until(&fx->cli.closed);
	assert_int_equal(fx->cli.reason, KEEL_LIMIT);
	teardown_pair();
	assert_int_equal(budget.used_bytes, 0);
}

static void test_parse_addr(void **state)
{
	(void)state;
	struct sockaddr_storage ss;
	assert_int_equal(net_parse_addr("127.0.0.1:2181", &ss), KEEL_OK);
	char buf[64];
	net_format_addr((struct sockaddr *)&ss, buf, sizeof(buf));
	assert_string_equal(buf, "127.0.0.1:2181");
	assert_int_equal(net_parse_addr("[::1]:9", &ss), KEEL_OK);
	net_format_addr((struct sockaddr *)&ss, buf, sizeof(buf));
	assert_string_equal(buf, "[::1]:9");
	assert_int_equal(net_parse_addr("localhost:80", &ss), KEEL_OK);
	assert_int_equal(net_parse_addr("127.0.0.1", &ss), KEEL_INVAL);
	assert_int_equal(net_parse_addr("127.0.0.1:99999", &ss), KEEL_INVAL);
	assert_int_equal(net_parse_addr("127.0.0.1:", &ss), KEEL_INVAL);
	assert_int_equal(net_parse_addr("127.0.0.1:12x", &ss), KEEL_INVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo_many_frames),
		cmocka_unit_test(test_oversized_frame_closes_only_that_connection),
		cmocka_unit_test(test_corrupt_checksum_closes),
		cmocka_unit_test(test_bad_prefix_hook),
		cmocka_unit_test(test_pause_resume),
		cmocka_unit_test(test_partial_frame_holds_what_arrived),
		cmocka_unit_test(test_read_budget_closes_the_hog),
		cmocka_unit_test(test_turns_are_capped),
		cmocka_unit_test(test_output_budget),
		cmocka_unit_test(test_parse_addr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
