/* Unit tests: TLS sessions (net/tls.h) driven against each other in memory
 * — handshake, data both ways, client certificates optional or required, a
 * certificate from another CA, plaintext on a TLS session, bad files — and
 * TLS framed connections over loopback (net_conn with cfg.tls): many frames,
 * frames larger than a TLS record, a plaintext client refused while a TLS
 * client keeps working. Certificates are made here with OpenSSL's API into a
 * temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <uv.h>

#include "net/net.h"
#include "net/tls.h"
#include "test_tls_certs.h"

/* ---- throwaway certificates (test_tls_certs.h) ---- */

static char dir[64];

static struct test_cert ca, other_ca, server_cert, client_cert, stranger_cert;

static int make_certs(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/keel-tls-unit-XXXXXX");
	if (mkdtemp(dir) == NULL) {
		return -1;
	}
	bool ok = test_cert_make(&ca, dir, "ca", "test CA", NULL) &&
	          test_cert_make(&other_ca, dir, "other-ca", "other CA", NULL) &&
	          test_cert_make(&server_cert, dir, "server", "server", &ca) &&
	          test_cert_make(&client_cert, dir, "client", "client", &ca) &&
	          test_cert_make(&stranger_cert, dir, "stranger", "stranger", &other_ca);
	return ok ? 0 : -1;
}

static int remove_certs(void **state)
{
	(void)state;
	test_cert_free(&ca);
	test_cert_free(&other_ca);
	test_cert_free(&server_cert);
	test_cert_free(&client_cert);
	test_cert_free(&stranger_cert);
	rmdir(dir);
	return 0;
}

static struct net_tls_ctx *new_ctx(bool server, const struct test_cert *c,
                                   const struct test_cert *trust, bool require)
{
	struct net_tls_options o = {
	        .cert_file = c != NULL ? c->cert_path : NULL,
	        .key_file = c != NULL ? c->key_path : NULL,
	        .ca_file = trust != NULL ? trust->cert_path : NULL,
	        .server = server,
	        .require_peer_cert = require,
	};
	struct net_tls_ctx *ctx = NULL;
	char err[256];
	assert_int_equal(net_tls_ctx_new(&ctx, &o, err, sizeof(err)), KEEL_OK);
	return ctx;
}

/* ---- two sessions in memory ---- */

/* Moves ciphertext from one session to the other. */
static void shuttle(struct net_tls *from, struct net_tls *to)
{
	uint8_t buf[4096];
	size_t n;
	while ((n = net_tls_take_out(from, buf, sizeof(buf))) > 0) {
		assert_int_equal(net_tls_feed(to, buf, n), KEEL_OK);
	}
}

/* Runs the handshake until neither side makes progress; returns the last
 * results of each side's read. */
static void handshake(struct net_tls *cli, struct net_tls *srv, enum keel_err *cli_rc,
                      enum keel_err *srv_rc)
{
	uint8_t buf[64];
	size_t got;
	*cli_rc = *srv_rc = KEEL_OK;
	for (int round = 0; round < 10; round++) {
		shuttle(cli, srv);
		if (*srv_rc == KEEL_OK) {
			*srv_rc = net_tls_read(srv, buf, sizeof(buf), &got);
			assert_int_equal(got, 0);
		}
		shuttle(srv, cli);
		if (*cli_rc == KEEL_OK) {
			*cli_rc = net_tls_read(cli, buf, sizeof(buf), &got);
			assert_int_equal(got, 0);
		}
	}
}

/* Sends `size` bytes through, reading them back in pieces of `piece`. */
static void transfer(struct net_tls *from, struct net_tls *to, size_t size, size_t piece)
{
	uint8_t *msg = malloc(size);
	uint8_t *back = malloc(size);
	assert_non_null(msg);
	assert_non_null(back);
	for (size_t i = 0; i < size; i++) {
		msg[i] = (uint8_t)(i * 7u + 3u);
	}
	assert_int_equal(net_tls_write(from, msg, size), KEEL_OK);
	assert_true(net_tls_pending_out(from) > size); /* records add headers and tags */
	shuttle(from, to);
	size_t have = 0;
	while (have < size) {
		size_t got = 0;
		size_t want = size - have < piece ? size - have : piece;
		assert_int_equal(net_tls_read(to, back + have, want, &got), KEEL_OK);
		assert_true(got > 0);
		have += got;
	}
	assert_memory_equal(msg, back, size);
	free(msg);
	free(back);
}

static void test_handshake_and_data(void **state)
{
	(void)state;
	struct net_tls_ctx *sctx = new_ctx(true, &server_cert, &ca, false);
	struct net_tls_ctx *cctx = new_ctx(false, &client_cert, &ca, false);
	struct net_tls *srv = net_tls_new(sctx);
	struct net_tls *cli = net_tls_new(cctx);
	assert_int_equal(net_tls_state(srv), NET_TLS_HANDSHAKE);
	assert_true(net_tls_pending_out(cli) > 0); /* the ClientHello is ready */
	assert_int_equal(net_tls_write(cli, (const uint8_t *)"x", 1), KEEL_INVAL);
	enum keel_err crc, src;
	handshake(cli, srv, &crc, &src);
	assert_int_equal(crc, KEEL_OK);
	assert_int_equal(src, KEEL_OK);
	assert_int_equal(net_tls_state(cli), NET_TLS_OPEN);
	assert_int_equal(net_tls_state(srv), NET_TLS_OPEN);
	assert_string_equal(net_tls_version(srv), "TLSv1.3");
	char subject[256];
	assert_true(net_tls_peer_subject(srv, subject, sizeof(subject)));
	assert_string_equal(subject, "CN=client,O=keel-test");
	assert_true(net_tls_peer_subject(cli, subject, sizeof(subject)));
	assert_string_equal(subject, "CN=server,O=keel-test");
	assert_false(net_tls_peer_subject(srv, subject, 8)); /* does not fit: no identity */
	transfer(cli, srv, 100, 100);
	transfer(srv, cli, 200000, 3000); /* many records, read in odd pieces */
	/* A clean close (close_notify) is not a failure. */
	net_tls_shutdown(cli);
	shuttle(cli, srv);
	size_t got;
	uint8_t byte;
	assert_int_equal(net_tls_read(srv, &byte, 1, &got), KEEL_SHUTDOWN);
	assert_int_equal(net_tls_state(srv), NET_TLS_CLOSED);
	assert_string_equal(net_tls_error(srv), "");
	net_tls_free(cli);
	net_tls_free(srv);
	net_tls_ctx_free(cctx);
	net_tls_ctx_free(sctx);
}

static void test_client_certificate_optional(void **state)
{
	(void)state;
	struct net_tls_ctx *sctx = new_ctx(true, &server_cert, &ca, false);
	struct net_tls_ctx *cctx = new_ctx(false, NULL, &ca, false);
	struct net_tls *srv = net_tls_new(sctx);
	struct net_tls *cli = net_tls_new(cctx);
	enum keel_err crc, src;
	handshake(cli, srv, &crc, &src);
	assert_int_equal(src, KEEL_OK);
	assert_int_equal(net_tls_state(srv), NET_TLS_OPEN);
	char subject[256];
	assert_false(net_tls_peer_subject(srv, subject, sizeof(subject)));
	transfer(cli, srv, 5000, 5000);
	net_tls_free(cli);
	net_tls_free(srv);
	net_tls_ctx_free(cctx);
	net_tls_ctx_free(sctx);
}

/* Runs a handshake expected to fail on `failing` with `rc` and a reason
 * containing `text`. */
static void expect_refusal(struct net_tls_ctx *sctx, struct net_tls_ctx *cctx, bool server_fails,
                           enum keel_err rc, const char *text)
{
	struct net_tls *srv = net_tls_new(sctx);
	struct net_tls *cli = net_tls_new(cctx);
	enum keel_err crc, src;
	handshake(cli, srv, &crc, &src);
	struct net_tls *failing = server_fails ? srv : cli;
	assert_int_equal(server_fails ? src : crc, rc);
	assert_int_equal(net_tls_state(failing), NET_TLS_FAILED);
	if (strstr(net_tls_error(failing), text) == NULL) {
		fail_msg("error '%s' does not say '%s'", net_tls_error(failing), text);
	}
	char subject[64];
	assert_false(net_tls_peer_subject(failing, subject, sizeof(subject)));
	assert_int_equal(net_tls_write(failing, (const uint8_t *)"x", 1), KEEL_INVAL);
	net_tls_free(cli);
	net_tls_free(srv);
}

static void test_required_client_certificate(void **state)
{
	(void)state;
	struct net_tls_ctx *sctx = new_ctx(true, &server_cert, &ca, true);
	struct net_tls_ctx *anon = new_ctx(false, NULL, &ca, false);
	struct net_tls_ctx *good = new_ctx(false, &client_cert, &ca, false);
	expect_refusal(sctx, anon, true, KEEL_AUTH, "no certificate");
	/* The same server admits a client with a certificate. */
	struct net_tls *srv = net_tls_new(sctx);
	struct net_tls *cli = net_tls_new(good);
	enum keel_err crc, src;
	handshake(cli, srv, &crc, &src);
	assert_int_equal(net_tls_state(srv), NET_TLS_OPEN);
	net_tls_free(cli);
	net_tls_free(srv);
	net_tls_ctx_free(good);
	net_tls_ctx_free(anon);
	net_tls_ctx_free(sctx);
}

static void test_certificate_from_another_ca(void **state)
{
	(void)state;
	struct net_tls_ctx *sctx = new_ctx(true, &server_cert, &ca, true);
	struct net_tls_ctx *stranger = new_ctx(false, &stranger_cert, &ca, false);
	expect_refusal(sctx, stranger, true, KEEL_AUTH, "certificate refused");
	/* A server whose certificate the client's CA did not sign. */
	struct net_tls_ctx *odd_server = new_ctx(true, &stranger_cert, &other_ca, false);
	struct net_tls_ctx *cli = new_ctx(false, &client_cert, &ca, false);
	expect_refusal(odd_server, cli, false, KEEL_AUTH, "certificate refused");
	net_tls_ctx_free(cli);
	net_tls_ctx_free(odd_server);
	net_tls_ctx_free(stranger);
	net_tls_ctx_free(sctx);
}

static void test_plaintext_is_refused(void **state)
{
	(void)state;
	struct net_tls_ctx *sctx = new_ctx(true, &server_cert, &ca, false);
	struct net_tls *srv = net_tls_new(sctx);
	/* A ZooKeeper ConnectRequest's first bytes, in clear. */
	const uint8_t plain[] = {0, 0, 0, 44, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	assert_int_equal(net_tls_feed(srv, plain, sizeof(plain)), KEEL_OK);
	size_t got;
	uint8_t buf[16];
	assert_int_equal(net_tls_read(srv, buf, sizeof(buf), &got), KEEL_PROTO);
	assert_int_equal(got, 0);
	assert_int_equal(net_tls_state(srv), NET_TLS_FAILED);
	assert_non_null(strstr(net_tls_error(srv), "TLS handshake failed"));
	/* It stays failed. */
	assert_int_equal(net_tls_read(srv, buf, sizeof(buf), &got), KEEL_PROTO);
	net_tls_free(srv);
	net_tls_ctx_free(sctx);
}

static void test_bad_files(void **state)
{
	(void)state;
	struct net_tls_ctx *ctx = NULL;
	char err[256];
	struct net_tls_options o = {.cert_file = "/nonexistent/server.crt",
	                            .key_file = server_cert.key_path,
	                            .server = true};
	assert_int_equal(net_tls_ctx_new(&ctx, &o, err, sizeof(err)), KEEL_CONFIG);
	assert_null(ctx);
	assert_non_null(strstr(err, "/nonexistent/server.crt"));
	/* A key that is not the certificate's. */
	o.cert_file = server_cert.cert_path;
	o.key_file = client_cert.key_path;
	assert_int_equal(net_tls_ctx_new(&ctx, &o, err, sizeof(err)), KEEL_CONFIG);
	assert_non_null(strstr(err, client_cert.key_path));
	/* A dialer that could not verify anyone. */
	struct net_tls_options d = {.server = false};
	assert_int_equal(net_tls_ctx_new(&ctx, &d, err, sizeof(err)), KEEL_CONFIG);
	/* A listener with no certificate. */
	struct net_tls_options l = {.server = true, .ca_file = ca.cert_path};
	assert_int_equal(net_tls_ctx_new(&ctx, &l, err, sizeof(err)), KEEL_CONFIG);
	assert_null(ctx);
}

/* ---- framed connections over loopback ---- */

struct side {
	struct net_conn conn;
	int frames;
	size_t bytes;
	bool closed;
	enum keel_err reason;
	bool echo;
};

struct fixture {
	uv_loop_t loop;
	struct net_loop nl;
	uv_tcp_t server;
	struct side srv[2];
	int accepted;
	struct side cli;
	uv_tcp_t raw; /* a plaintext client */
	uv_connect_t raw_connect;
	uv_write_t raw_write;
	bool raw_closed;
	struct net_conn_config srv_cfg;
	struct net_conn_config cli_cfg;
	int port;
};

static struct fixture *fx;

static bool on_frame(struct net_conn *conn, const uint8_t *p, size_t n)
{
	struct side *s = conn->user;
	s->frames++;
	s->bytes += n;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != (uint8_t)(i * 13u)) {
			fail_msg("frame byte %zu corrupted", i);
		}
	}
	if (s->echo) {
		net_conn_send(conn, p, n);
	}
	return true;
}

static void on_close(struct net_conn *conn, enum keel_err reason)
{
	struct side *s = conn->user;
	s->closed = true;
	s->reason = reason;
}

static const struct net_conn_ops ops = {on_frame, NULL, on_close};

static void on_connection(uv_stream_t *server, int status)
{
	assert_int_equal(status, 0);
	assert_true(fx->accepted < 2);
	struct side *s = &fx->srv[fx->accepted++];
	s->echo = true;
	assert_int_equal(net_conn_accept(&s->conn, &fx->nl, server, &fx->srv_cfg, &ops, s),
	                 KEEL_OK);
}

static void run_until(bool (*done)(void))
{
	for (int i = 0; i < 20000 && !done(); i++) {
		uv_run(&fx->loop, UV_RUN_ONCE);
	}
	assert_true(done());
}

static int conn_setup(void **state)
{
	(void)state;
	fx = calloc(1, sizeof(*fx));
	assert_int_equal(uv_loop_init(&fx->loop), 0);
	assert_int_equal(net_loop_init(&fx->nl, &fx->loop), KEEL_OK);
	fx->srv_cfg.max_frame_bytes = 1u << 20;
	fx->srv_cfg.max_output_bytes = 64u << 20;
	fx->srv_cfg.tls = new_ctx(true, &server_cert, &ca, false);
	fx->cli_cfg = fx->srv_cfg;
	fx->cli_cfg.tls = new_ctx(false, &client_cert, &ca, false);
	char err[128];
	assert_int_equal(net_listen(&fx->server, &fx->loop, "127.0.0.1:0", on_connection, fx, err,
	                            sizeof(err)),
	                 KEEL_OK);
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss);
	uv_tcp_getsockname(&fx->server, (struct sockaddr *)&ss, &len);
	fx->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

static bool all_closed(void)
{
	return (fx->cli.closed || !fx->cli.conn.started) &&
	       (fx->accepted < 1 || fx->srv[0].closed) && (fx->accepted < 2 || fx->srv[1].closed);
}

static int conn_teardown(void **state)
{
	(void)state;
	if (fx->cli.conn.started && !fx->cli.closed) {
		net_conn_close(&fx->cli.conn, KEEL_OK, false);
	}
	for (int i = 0; i < fx->accepted; i++) {
		if (!fx->srv[i].closed) {
			net_conn_close(&fx->srv[i].conn, KEEL_OK, false);
		}
	}
	run_until(all_closed);
	uv_close((uv_handle_t *)&fx->server, NULL);
	net_loop_close(&fx->nl);
	uv_run(&fx->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&fx->loop), 0);
	net_tls_ctx_free(fx->srv_cfg.tls);
	net_tls_ctx_free(fx->cli_cfg.tls);
	free(fx);
	return 0;
}

static void connect_client(void)
{
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", fx->port, &sa);
	assert_int_equal(net_conn_connect(&fx->cli.conn, &fx->nl, (struct sockaddr *)&sa,
	                                  &fx->cli_cfg, &ops, &fx->cli, NULL),
	                 KEEL_OK);
}

static void send_frame(size_t size)
{
	size_t mark;
	struct keel_wbuf *w = net_conn_frame_begin(&fx->cli.conn, &mark);
	assert_non_null(w);
	for (size_t i = 0; i < size; i++) {
		keel_wbuf_u8(w, (uint8_t)(i * 13u));
	}
	net_conn_frame_end(&fx->cli.conn, mark);
}

static bool echoed_300(void)
{
	return fx->cli.frames == 300 || fx->cli.closed;
}

static void test_tls_frames_over_loopback(void **state)
{
	(void)state;
	connect_client();
	/* Queued before the handshake: they wait for it. */
	for (int i = 0; i < 100; i++) {
		send_frame(10 + (size_t)i);
	}
	for (int i = 0; i < 200; i++) {
		send_frame(i % 50 == 0 ? 300000 : 100); /* some frames span many records */
	}
	run_until(echoed_300);
	assert_false(fx->cli.closed);
	assert_int_equal(fx->srv[0].frames, 300);
	assert_int_equal(fx->cli.bytes, fx->srv[0].bytes);
	char subject[128];
	assert_true(net_conn_tls_subject(&fx->srv[0].conn, subject, sizeof(subject)));
	assert_string_equal(subject, "CN=client,O=keel-test");
	assert_true(fx->nl.bytes_in > fx->srv[0].bytes * 2); /* ciphertext counted */
}

static void on_raw_closed(uv_handle_t *h)
{
	(void)h;
	fx->raw_closed = true;
}

static void on_raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	free(buf->base);
	if (nread < 0) {
		uv_close((uv_handle_t *)s, on_raw_closed);
	}
}

static void raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	*buf = uv_buf_init(malloc(suggested), (unsigned)suggested);
}

static void on_raw_written(uv_write_t *req, int status)
{
	(void)req;
	(void)status;
}

static void on_raw_connected(uv_connect_t *req, int status)
{
	assert_int_equal(status, 0);
	static char hello[] = "\0\0\0\x2c plaintext ConnectRequest on a TLS port....";
	uv_buf_t b = uv_buf_init(hello, sizeof(hello) - 1);
	uv_write(&fx->raw_write, req->handle, &b, 1, on_raw_written);
	uv_read_start(req->handle, raw_alloc, on_raw_read);
}

static bool raw_refused(void)
{
	return fx->raw_closed && fx->accepted == 2 && fx->srv[1].closed;
}

static bool echoed_one_more(void)
{
	return fx->cli.frames == 2 || fx->cli.closed;
}

static bool echoed_first(void)
{
	return fx->cli.frames >= 1 || fx->cli.closed;
}

static void test_plaintext_client_on_tls_listener(void **state)
{
	(void)state;
	connect_client();
	send_frame(64);
	run_until(echoed_first);
	assert_int_equal(fx->accepted, 1);
	struct sockaddr_in sa;
	uv_ip4_addr("127.0.0.1", fx->port, &sa);
	uv_tcp_init(&fx->loop, &fx->raw);
	uv_tcp_connect(&fx->raw_connect, &fx->raw, (struct sockaddr *)&sa, on_raw_connected);
	run_until(raw_refused);
	assert_int_equal(fx->srv[1].reason, KEEL_PROTO);
	assert_int_equal(fx->srv[1].frames, 0);
	assert_int_equal(fx->nl.tls_failures, 1);
	/* The TLS client is still served. */
	send_frame(64);
	run_until(echoed_one_more);
	assert_false(fx->cli.closed);
	assert_int_equal(fx->cli.frames, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_handshake_and_data),
	        cmocka_unit_test(test_client_certificate_optional),
	        cmocka_unit_test(test_required_client_certificate),
	        cmocka_unit_test(test_certificate_from_another_ca),
	        cmocka_unit_test(test_plaintext_is_refused),
	        cmocka_unit_test(test_bad_files),
	        cmocka_unit_test_setup_teardown(test_tls_frames_over_loopback, conn_setup,
	                                        conn_teardown),
	        cmocka_unit_test_setup_teardown(test_plaintext_client_on_tls_listener, conn_setup,
	                                        conn_teardown),
	};
	return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
