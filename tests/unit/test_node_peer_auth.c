/* Unit tests: the peer handshake and the operator proof (node/peer_auth.h) —
 * a correct exchange, a wrong secret, a replayed proof, a reflected proof, a
 * non-member id, truncated frames, secret files and key rotation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "node/peer_auth.h"

#define SECRET_A "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
#define SECRET_B "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n"

static struct peer_auth_keys keys_of(const char *text)
{
	struct peer_auth_keys k;
	char err[256];
	assert_int_equal(peer_auth_parse_secret(text, strlen(text), &k, err, sizeof(err)), KEEL_OK);
	return k;
}

static bool members_1_2_3(void *ctx, uint64_t id)
{
	(void)ctx;
	return id >= 1 && id <= 3;
}

struct frame {
	uint8_t data[512];
	size_t size;
};

static void nonce_fill(uint8_t *n, uint8_t seed)
{
	for (size_t i = 0; i < PEER_AUTH_NONCE_SIZE; i++) {
		n[i] = (uint8_t)(seed + i * 7);
	}
}

/* One handshake between dialer 1 and acceptor 2; frames kept for replays. */
struct exchange {
	struct peer_handshake dialer;
	struct peer_handshake acceptor;
	struct frame hello;
	struct frame challenge;
	struct frame proof;
	enum keel_err accept_rc;
	enum keel_err challenge_rc;
	enum keel_err proof_rc;
};

static void wbuf_to(struct keel_wbuf *w, struct frame *f)
{
	keel_wbuf_init_fixed(w, f->data, sizeof(f->data));
}

static void run(struct exchange *x, const struct peer_auth_keys *kd,
		const struct peer_auth_keys *ka, uint8_t seed_d, uint8_t seed_a)
{
	memset(x, 0, sizeof(*x));
	uint8_t nd[PEER_AUTH_NONCE_SIZE], na[PEER_AUTH_NONCE_SIZE];
	nonce_fill(nd, seed_d);
	nonce_fill(na, seed_a);
	struct keel_wbuf w;
	wbuf_to(&w, &x->hello);
	peer_hs_dial(&x->dialer, 1, 2, "127.0.0.1:20001", nd, &w);
	x->hello.size = w.size;
	struct peer_hello_info info;
	wbuf_to(&w, &x->challenge);
	x->accept_rc = peer_hs_accept_hello(&x->acceptor, ka, 2, na, x->hello.data, x->hello.size,
					    members_1_2_3, NULL, &info, &w);
	x->challenge.size = w.size;
	if (x->accept_rc != KEEL_OK) {
		return;
	}
	assert_int_equal(info.from, 1);
	assert_int_equal(info.to, 2);
	assert_string_equal(info.addr, "127.0.0.1:20001");
	/* Round trip: what the HELLO claimed encodes to the same bytes. */
	struct frame again;
	struct peer_handshake hs2;
	wbuf_to(&w, &again);
	peer_hs_dial(&hs2, info.from, info.to, info.addr, x->acceptor.nonce_dialer, &w);
	assert_int_equal(w.size, x->hello.size);
	assert_memory_equal(again.data, x->hello.data, w.size);
	wbuf_to(&w, &x->challenge);
	x->accept_rc = peer_hs_accept_hello(&x->acceptor, ka, 2, na, x->hello.data, x->hello.size,
					    members_1_2_3, NULL, &info, &w);
	x->challenge.size = w.size;
	wbuf_to(&w, &x->proof);
	x->challenge_rc = peer_hs_dialer_on_challenge(&x->dialer, kd, x->challenge.data,
						      x->challenge.size, &w);
	x->proof.size = w.size;
	if (x->challenge_rc != KEEL_OK) {
		return;
	}
	x->proof_rc =
		peer_hs_acceptor_on_proof(&x->acceptor, ka, x->proof.data, x->proof.size);
}

static void test_correct_exchange(void **state)
{
	(void)state;
	struct peer_auth_keys k = keys_of(SECRET_A);
	struct exchange x;
	run(&x, &k, &k, 1, 100);
	assert_int_equal(x.accept_rc, KEEL_OK);
	assert_int_equal(x.challenge_rc, KEEL_OK);
	assert_int_equal(x.proof_rc, KEEL_OK);
	assert_true(x.dialer.done);
	assert_true(x.acceptor.done);
	assert_int_equal(x.acceptor.remote_id, 1);
	assert_int_equal(x.hello.size, 1 + 4 + 2 + 8 + 8 + 2 + 15 + PEER_AUTH_NONCE_SIZE);
	assert_int_equal(x.challenge.size, 1 + 8 + 8 + PEER_AUTH_NONCE_SIZE + PEER_AUTH_MAC_SIZE);
	assert_int_equal(x.proof.size, 1 + PEER_AUTH_MAC_SIZE);
	/* A second PROOF on a finished handshake is a protocol error. */
	assert_int_equal(peer_hs_acceptor_on_proof(&x.acceptor, &k, x.proof.data, x.proof.size),
			 KEEL_PROTO);
}

static void test_wrong_secret(void **state)
{
	(void)state;
	struct peer_auth_keys a = keys_of(SECRET_A);
	struct peer_auth_keys b = keys_of(SECRET_B);
	struct exchange x;
	/* The acceptor holds another secret: the dialer refuses its challenge. */
	run(&x, &a, &b, 1, 100);
	assert_int_equal(x.accept_rc, KEEL_OK);
	assert_int_equal(x.challenge_rc, KEEL_AUTH);
	assert_false(x.dialer.done);
	/* The dialer holds another secret (and skips the check on its side):
	 * the acceptor refuses the proof. */
	struct exchange y;
	run(&y, &a, &a, 1, 100);
	uint8_t forged[PEER_AUTH_MAC_SIZE];
	peer_auth_mac(&b.key[0], PEER_AUTH_ROLE_DIALER, 1, 2, y.acceptor.nonce_dialer,
		      y.acceptor.nonce_acceptor, forged);
	struct peer_handshake acc = y.acceptor;
	acc.done = false;
	uint8_t proof[1 + PEER_AUTH_MAC_SIZE];
	proof[0] = PEER_AUTH_PROOF;
	memcpy(proof + 1, forged, sizeof(forged));
	assert_int_equal(peer_hs_acceptor_on_proof(&acc, &a, proof, sizeof(proof)), KEEL_AUTH);
	assert_false(acc.done);
	/* Insecure on one side only: refused too. */
	struct peer_auth_keys none;
	memset(&none, 0, sizeof(none));
	run(&x, &none, &a, 1, 100);
	assert_int_equal(x.challenge_rc, KEEL_AUTH);
	run(&x, &none, &none, 1, 100);
	assert_int_equal(x.proof_rc, KEEL_OK);
}

static void test_replayed_proof(void **state)
{
	(void)state;
	struct peer_auth_keys k = keys_of(SECRET_A);
	struct exchange first;
	run(&first, &k, &k, 1, 100);
	assert_int_equal(first.proof_rc, KEEL_OK);
	/* An attacker replays the recorded HELLO and PROOF; the acceptor picks
	 * a fresh nonce, so the old proof does not match. */
	struct peer_handshake acc;
	struct peer_hello_info info;
	struct frame ch;
	struct keel_wbuf w;
	wbuf_to(&w, &ch);
	uint8_t na[PEER_AUTH_NONCE_SIZE];
	nonce_fill(na, 200);
	assert_int_equal(peer_hs_accept_hello(&acc, &k, 2, na, first.hello.data, first.hello.size,
					      members_1_2_3, NULL, &info, &w),
			 KEEL_OK);
	assert_int_equal(peer_hs_acceptor_on_proof(&acc, &k, first.proof.data, first.proof.size),
			 KEEL_AUTH);
	assert_false(acc.done);
	/* A replayed CHALLENGE fails at a dialer with a fresh nonce. */
	struct peer_handshake dia;
	struct frame hello, proof;
	wbuf_to(&w, &hello);
	uint8_t nd[PEER_AUTH_NONCE_SIZE];
	nonce_fill(nd, 50);
	peer_hs_dial(&dia, 1, 2, "127.0.0.1:20001", nd, &w);
	wbuf_to(&w, &proof);
	assert_int_equal(peer_hs_dialer_on_challenge(&dia, &k, first.challenge.data,
						     first.challenge.size, &w),
			 KEEL_AUTH);
	assert_int_equal(w.size, 0);
}

static void test_reflected_proof(void **state)
{
	(void)state;
	struct peer_auth_keys k = keys_of(SECRET_A);
	struct exchange x;
	run(&x, &k, &k, 1, 100);
	assert_int_equal(x.accept_rc, KEEL_OK);
	/* Without the secret, send the acceptor's own MAC back as the proof. */
	struct peer_handshake acc = x.acceptor;
	acc.done = false;
	uint8_t proof[1 + PEER_AUTH_MAC_SIZE];
	proof[0] = PEER_AUTH_PROOF;
	memcpy(proof + 1, x.challenge.data + 1 + 16 + PEER_AUTH_NONCE_SIZE, PEER_AUTH_MAC_SIZE);
	assert_int_equal(peer_hs_acceptor_on_proof(&acc, &k, proof, sizeof(proof)), KEEL_AUTH);
	/* Nor does a dialer accept a challenge that carries the dialer-role
	 * MAC (ids swapped back at it). */
	struct peer_handshake dia = x.dialer;
	dia.done = false;
	uint8_t ch[1 + 16 + PEER_AUTH_NONCE_SIZE + PEER_AUTH_MAC_SIZE];
	memcpy(ch, x.challenge.data, sizeof(ch));
	memcpy(ch + 1 + 16 + PEER_AUTH_NONCE_SIZE, x.proof.data + 1, PEER_AUTH_MAC_SIZE);
	struct frame out;
	struct keel_wbuf w;
	wbuf_to(&w, &out);
	assert_int_equal(peer_hs_dialer_on_challenge(&dia, &k, ch, sizeof(ch), &w), KEEL_AUTH);
}

static void test_non_member(void **state)
{
	(void)state;
	struct peer_auth_keys k = keys_of(SECRET_A);
	uint8_t nd[PEER_AUTH_NONCE_SIZE], na[PEER_AUTH_NONCE_SIZE];
	nonce_fill(nd, 1);
	nonce_fill(na, 2);
	struct frame hello, ch;
	struct keel_wbuf w;
	wbuf_to(&w, &hello);
	struct peer_handshake dia, acc;
	peer_hs_dial(&dia, 99, 2, "10.0.0.9:1", nd, &w);
	hello.size = w.size;
	struct peer_hello_info info;
	wbuf_to(&w, &ch);
	assert_int_equal(peer_hs_accept_hello(&acc, &k, 2, na, hello.data, hello.size,
					      members_1_2_3, NULL, &info, &w),
			 KEEL_AUTH);
	assert_int_equal(info.from, 99);
	assert_string_equal(info.addr, "10.0.0.9:1");
	assert_int_equal(w.size, 0); /* nothing answered */
	/* Addressed to another server, or claiming to be the acceptor. */
	wbuf_to(&w, &hello);
	peer_hs_dial(&dia, 1, 3, "x:1", nd, &w);
	hello.size = w.size;
	wbuf_to(&w, &ch);
	assert_int_equal(peer_hs_accept_hello(&acc, &k, 2, na, hello.data, hello.size,
					      members_1_2_3, NULL, &info, &w),
			 KEEL_PROTO);
	wbuf_to(&w, &hello);
	peer_hs_dial(&dia, 2, 2, "x:1", nd, &w);
	hello.size = w.size;
	wbuf_to(&w, &ch);
	assert_int_equal(peer_hs_accept_hello(&acc, &k, 2, na, hello.data, hello.size,
					      members_1_2_3, NULL, &info, &w),
			 KEEL_PROTO);
}

static void test_truncated_frames(void **state)
{
	(void)state;
	struct peer_auth_keys k = keys_of(SECRET_A);
	struct exchange x;
	run(&x, &k, &k, 1, 100);
	assert_int_equal(x.proof_rc, KEEL_OK);
	uint8_t na[PEER_AUTH_NONCE_SIZE];
	nonce_fill(na, 9);
	for (size_t n = 0; n < x.hello.size; n++) {
		struct peer_handshake acc;
		struct peer_hello_info info;
		struct frame ch;
		struct keel_wbuf w;
		wbuf_to(&w, &ch);
		uint8_t *copy = malloc(n + 1); /* exact size: ASan sees overreads */
		memcpy(copy, x.hello.data, n);
		assert_int_equal(peer_hs_accept_hello(&acc, &k, 2, na, copy, n, members_1_2_3,
						      NULL, &info, &w),
				 KEEL_PROTO);
		assert_int_equal(w.size, 0);
		free(copy);
	}
	for (size_t n = 0; n < x.challenge.size; n++) {
		struct peer_handshake dia = x.dialer;
		dia.done = false;
		struct frame out;
		struct keel_wbuf w;
		wbuf_to(&w, &out);
		uint8_t *copy = malloc(n + 1);
		memcpy(copy, x.challenge.data, n);
		assert_int_equal(peer_hs_dialer_on_challenge(&dia, &k, copy, n, &w), KEEL_PROTO);
		free(copy);
	}
	for (size_t n = 0; n < x.proof.size; n++) {
		struct peer_handshake acc = x.acceptor;
		acc.done = false;
		uint8_t *copy = malloc(n + 1);
		memcpy(copy, x.proof.data, n);
		assert_int_equal(peer_hs_acceptor_on_proof(&acc, &k, copy, n), KEEL_PROTO);
		free(copy);
	}
	/* One byte too many is malformed too. */
	struct peer_handshake acc = x.acceptor;
	acc.done = false;
	uint8_t longer[2 + PEER_AUTH_MAC_SIZE];
	memcpy(longer, x.proof.data, x.proof.size);
	longer[x.proof.size] = 0;
	assert_int_equal(peer_hs_acceptor_on_proof(&acc, &k, longer, sizeof(longer)), KEEL_PROTO);
}

static void test_rotation(void **state)
{
	(void)state;
	/* Rolling rotation A -> B: "A,B" talks to "A" and to "B,A"; "B,A"
	 * talks to "B". Old and new directly do not. */
	struct peer_auth_keys a = keys_of(SECRET_A);
	struct peer_auth_keys ab = keys_of(SECRET_A SECRET_B);
	struct peer_auth_keys ba = keys_of("# rotated\n" SECRET_B "\n" SECRET_A);
	struct peer_auth_keys b = keys_of(SECRET_B);
	assert_int_equal(ab.count, 2);
	assert_int_equal(ba.count, 2);
	const struct peer_auth_keys *stages[] = {&a, &ab, &ba, &b};
	for (size_t i = 0; i < 4; i++) {
		for (size_t j = 0; j < 4; j++) {
			struct exchange x;
			run(&x, stages[i], stages[j], (uint8_t)i, (uint8_t)(j + 50));
			bool adjacent = i == j || i + 1 == j || j + 1 == i;
			bool ok = x.challenge_rc == KEEL_OK && x.proof_rc == KEEL_OK;
			assert_int_equal(ok, adjacent);
		}
	}
}

static void test_secret_parse(void **state)
{
	(void)state;
	struct peer_auth_keys k;
	char err[256];
	assert_int_equal(peer_auth_parse_secret("", 0, &k, err, sizeof(err)), KEEL_CONFIG);
	assert_int_equal(peer_auth_parse_secret("abcd\n", 5, &k, err, sizeof(err)), KEEL_CONFIG);
	const char *bad = "zz112233445566778899aabbccddeeff";
	assert_int_equal(peer_auth_parse_secret(bad, strlen(bad), &k, err, sizeof(err)),
			 KEEL_CONFIG);
	const char *three = SECRET_A SECRET_B SECRET_A;
	assert_int_equal(peer_auth_parse_secret(three, strlen(three), &k, err, sizeof(err)),
			 KEEL_CONFIG);
	const char *crlf = "  00112233445566778899AABBCCDDEEFF\r\n";
	assert_int_equal(peer_auth_parse_secret(crlf, strlen(crlf), &k, err, sizeof(err)), KEEL_OK);
	assert_int_equal(k.count, 1);
	assert_int_equal(k.key[0].size, 16);
	assert_int_equal(k.key[0].bytes[15], 0xff);
	char hex[2 * 16 + 1];
	peer_auth_hex(k.key[0].bytes, 16, hex);
	assert_string_equal(hex, "00112233445566778899aabbccddeeff");
	uint8_t r1[32], r2[32];
	assert_int_equal(peer_auth_random(r1, sizeof(r1)), KEEL_OK);
	assert_int_equal(peer_auth_random(r2, sizeof(r2)), KEEL_OK);
	assert_memory_not_equal(r1, r2, sizeof(r1));
}

static void test_admin_proof(void **state)
{
	(void)state;
	struct peer_auth_keys a = keys_of(SECRET_A);
	struct peer_auth_keys b = keys_of(SECRET_B);
	struct peer_auth_keys none;
	memset(&none, 0, sizeof(none));
	uint8_t sn[PEER_AUTH_NONCE_SIZE], cn[PEER_AUTH_NONCE_SIZE], mac[PEER_AUTH_MAC_SIZE];
	nonce_fill(sn, 3);
	nonce_fill(cn, 4);
	peer_auth_admin_mac(&a, 7, sn, cn, mac);
	assert_true(peer_auth_admin_verify(&a, 7, sn, cn, mac));
	assert_false(peer_auth_admin_verify(&b, 7, sn, cn, mac));   /* wrong secret */
	assert_false(peer_auth_admin_verify(&a, 8, sn, cn, mac));   /* another server */
	assert_false(peer_auth_admin_verify(&none, 7, sn, cn, mac)); /* no secret */
	uint8_t sn2[PEER_AUTH_NONCE_SIZE];
	nonce_fill(sn2, 5);
	assert_false(peer_auth_admin_verify(&a, 7, sn2, cn, mac)); /* replay, new nonce */
	/* The peer handshake's MACs are no operator proof, nor the reverse. */
	uint8_t peer_mac[PEER_AUTH_MAC_SIZE];
	peer_auth_mac(&a.key[0], PEER_AUTH_ROLE_DIALER, 7, 0, sn, cn, peer_mac);
	assert_memory_not_equal(peer_mac, mac, PEER_AUTH_MAC_SIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_correct_exchange), cmocka_unit_test(test_wrong_secret),
		cmocka_unit_test(test_replayed_proof),   cmocka_unit_test(test_reflected_proof),
		cmocka_unit_test(test_non_member),       cmocka_unit_test(test_truncated_frames),
		cmocka_unit_test(test_rotation),         cmocka_unit_test(test_secret_parse),
		cmocka_unit_test(test_admin_proof),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
