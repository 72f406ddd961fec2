/*
 * fuzz_net_tls.c — TLS sessions (net/tls.h) on hostile bytes.
 *
 * Two kinds of input, chosen by the first byte:
 *  - the rest is what a client sent to a server session, fed in pieces of
 *    fuzzed sizes and read with fuzzed buffer sizes: the session never
 *    crashes, never yields plaintext, and ends HANDSHAKE or FAILED;
 *  - (one input in 64, a handshake costs) a real client and server talk
 *    while the input picks how the ciphertext is cut between them and one
 *    byte to flip in flight: whatever happens, a session that hands out
 *    plaintext hands out exactly what the other end wrote.
 * Certificates are made once, in a temporary directory.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/test_tls_certs.h"
#include "base/assert.h"
#include "net/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct net_tls_ctx *server_ctx;
static struct net_tls_ctx *client_ctx;

static void setup(void)
{
	static char dir[64] = "/tmp/keel-fuzz-tls-XXXXXX";
	KEEL_ASSERT(mkdtemp(dir) != NULL);
	struct test_cert ca, server;
	KEEL_ASSERT(test_cert_make(&ca, dir, "ca", "fuzz CA", NULL));
	KEEL_ASSERT(test_cert_make(&server, dir, "server", "server", &ca));
	char err[256];
	struct net_tls_options s = {server.cert_path, server.key_path, ca.cert_path, true, false};
	struct net_tls_options c = {NULL, NULL, ca.cert_path, false, false};
	KEEL_ASSERT(net_tls_ctx_new(&server_ctx, &s, err, sizeof(err)) == KEEL_OK);
	KEEL_ASSERT(net_tls_ctx_new(&client_ctx, &c, err, sizeof(err)) == KEEL_OK);
	test_cert_free(&server); /* the contexts hold what they loaded */
	test_cert_free(&ca);
	rmdir(dir);
}

/* The next fuzzed piece size in [1, max]. */
static size_t next_size(const uint8_t **data, size_t *size, size_t max)
{
	if (*size == 0) {
		return max;
	}
	size_t n = 1 + (size_t)(**data) % max;
	(*data)++;
	(*size)--;
	return n;
}

static void garbage_to_server(const uint8_t *data, size_t size)
{
	struct net_tls *t = net_tls_new(server_ctx);
	KEEL_ASSERT(t != NULL);
	uint8_t out[512];
	while (size > 0) {
		size_t n = next_size(&data, &size, 64);
		n = n < size ? n : size;
		KEEL_ASSERT(net_tls_feed(t, data, n) == KEEL_OK);
		data += n;
		size -= n;
		size_t got = 0;
		enum keel_err rc = net_tls_read(t, out, next_size(&data, &size, sizeof(out)), &got);
		KEEL_ASSERT(got == 0); /* nothing decrypts without a handshake */
		if (rc != KEEL_OK) {
			KEEL_ASSERT(net_tls_state(t) == NET_TLS_FAILED);
			KEEL_ASSERT(net_tls_error(t)[0] != '\0');
			break;
		}
		KEEL_ASSERT(net_tls_state(t) == NET_TLS_HANDSHAKE);
	}
	uint8_t sink[4096];
	while (net_tls_take_out(t, sink, sizeof(sink)) > 0) {
	}
	net_tls_free(t);
}

/* Moves ciphertext in pieces, flipping the byte at *flip_at (counted over
 * all moved bytes) with `flip`. */
static void move(struct net_tls *from, struct net_tls *to, const uint8_t **data, size_t *size,
                 size_t *moved, size_t flip_at, uint8_t flip)
{
	uint8_t buf[2048];
	size_t n;
	while ((n = net_tls_take_out(from, buf, next_size(data, size, sizeof(buf)))) > 0) {
		if (flip_at >= *moved && flip_at < *moved + n) {
			buf[flip_at - *moved] ^= flip;
		}
		*moved += n;
		KEEL_ASSERT(net_tls_feed(to, buf, n) == KEEL_OK);
	}
}

/* Reads what `t` decrypts and checks it against `want` from `*have` on. */
static void check_read(struct net_tls *t, const uint8_t *want, size_t want_size, size_t *have,
                       const uint8_t **data, size_t *size)
{
	uint8_t buf[1024];
	for (;;) {
		size_t got = 0;
		if (net_tls_read(t, buf, next_size(data, size, sizeof(buf)), &got) != KEEL_OK ||
		    got == 0) {
			return;
		}
		KEEL_ASSERT(*have + got <= want_size);
		KEEL_ASSERT(memcmp(buf, want + *have, got) == 0);
		*have += got;
	}
}

static void conversation(const uint8_t *data, size_t size)
{
	size_t flip_at = size >= 2 ? (size_t)data[0] << 4 | (size_t)(data[1] & 15) : SIZE_MAX;
	uint8_t flip = size >= 3 ? data[2] : 0;
	data += size >= 3 ? 3 : size;
	size -= size >= 3 ? 3 : size;
	struct net_tls *cli = net_tls_new(client_ctx);
	struct net_tls *srv = net_tls_new(server_ctx);
	KEEL_ASSERT(cli != NULL && srv != NULL);
	uint8_t msg[3000];
	for (size_t i = 0; i < sizeof(msg); i++) {
		msg[i] = (uint8_t)(i * 31u);
	}
	size_t moved = 0, srv_have = 0, cli_have = 0;
	bool cli_sent = false, srv_sent = false;
	for (int round = 0; round < 12; round++) {
		move(cli, srv, &data, &size, &moved, flip_at, flip);
		check_read(srv, msg, sizeof(msg), &srv_have, &data, &size);
		if (!srv_sent && net_tls_state(srv) == NET_TLS_OPEN) {
			KEEL_ASSERT(net_tls_write(srv, msg, sizeof(msg)) == KEEL_OK);
			srv_sent = true;
		}
		move(srv, cli, &data, &size, &moved, flip_at, flip);
		check_read(cli, msg, sizeof(msg), &cli_have, &data, &size);
		if (!cli_sent && net_tls_state(cli) == NET_TLS_OPEN) {
			KEEL_ASSERT(net_tls_write(cli, msg, sizeof(msg)) == KEEL_OK);
			cli_sent = true;
		}
	}
	if (flip == 0) {
		/* Nothing was damaged: everything arrived. */
		KEEL_ASSERT(srv_have == sizeof(msg));
		KEEL_ASSERT(cli_have == sizeof(msg));
	}
	net_tls_free(cli);
	net_tls_free(srv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (server_ctx == NULL) {
		setup();
	}
	if (size == 0) {
		return 0;
	}
	if (data[0] % 64 == 63) {
		conversation(data + 1, size - 1);
	} else {
		garbage_to_server(data + 1, size - 1);
	}
	return 0;
}
