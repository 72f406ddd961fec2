/*
 * fuzz_peer_auth.c — the peer handshake decoders and the secret file parser
 * on arbitrary bytes (node/peer_auth.h).
 *
 * Properties: nothing crashes or reads out of bounds (ASan); a HELLO that is
 * accepted re-encodes to exactly the same bytes from what it claimed; a
 * CHALLENGE or PROOF that does not carry the right MAC never authenticates;
 * a secret that parses holds one or two keys of an allowed size.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "node/peer_auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool any_member(void *ctx, uint64_t id)
{
	(void)ctx;
	return id != 13;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct peer_auth_keys keys;
	memset(&keys, 0, sizeof(keys));
	keys.count = 1;
	keys.key[0].size = 32;
	memset(keys.key[0].bytes, 0x5a, 32);
	uint8_t nonce[PEER_AUTH_NONCE_SIZE];
	memset(nonce, 7, sizeof(nonce));

	/* As a HELLO to acceptor 2. */
	struct peer_handshake acc;
	struct peer_hello_info info;
	uint8_t out[512];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	if (peer_hs_accept_hello(&acc, &keys, 2, nonce, data, size, any_member, NULL, &info, &w) ==
	    KEEL_OK) {
		struct peer_handshake again;
		uint8_t re[512];
		struct keel_wbuf rw;
		keel_wbuf_init_fixed(&rw, re, sizeof(re));
		peer_hs_dial(&again, info.from, info.to, info.addr, data + size - PEER_AUTH_NONCE_SIZE,
			     &rw);
		KEEL_ASSERT(rw.size == size);
		KEEL_ASSERT(memcmp(re, data, size) == 0);
		/* The same bytes as a PROOF to this acceptor: never enough. */
		KEEL_ASSERT(peer_hs_acceptor_on_proof(&acc, &keys, data, size) != KEEL_OK);
	}

	/* As a CHALLENGE to dialer 1 that dialed 2. */
	struct peer_handshake dia;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	peer_hs_dial(&dia, 1, 2, "127.0.0.1:1", nonce, &w);
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	KEEL_ASSERT(peer_hs_dialer_on_challenge(&dia, &keys, data, size, &w) != KEEL_OK);

	/* As a secret file. */
	struct peer_auth_keys parsed;
	char err[256];
	if (peer_auth_parse_secret((const char *)data, size, &parsed, err, sizeof(err)) ==
	    KEEL_OK) {
		KEEL_ASSERT(parsed.count >= 1 && parsed.count <= PEER_AUTH_KEYS_MAX);
		for (size_t i = 0; i < parsed.count; i++) {
			KEEL_ASSERT(parsed.key[i].size >= PEER_AUTH_SECRET_MIN_SIZE);
			KEEL_ASSERT(parsed.key[i].size <= PEER_AUTH_SECRET_MAX_SIZE);
		}
		char hex[2 * PEER_AUTH_SECRET_MAX_SIZE + 1];
		peer_auth_hex(parsed.key[0].bytes, parsed.key[0].size, hex);
		KEEL_ASSERT(strlen(hex) == 2 * parsed.key[0].size);
	}
	return 0;
}
