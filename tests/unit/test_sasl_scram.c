/* Unit tests: SASL PLAIN and SCRAM-SHA-256/512 (sasl/sasl_scram.h) — RFC
 * 7677's SCRAM-SHA-256 exchange byte for byte, a whole SCRAM-SHA-512
 * exchange against a client computed here, every refusal, PLAIN, and
 * base64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sasl/sasl_scram.h"

static const uint8_t zero_key[SASL_SCRAM_KEY_BYTES];
static const uint8_t random_bytes[SASL_SCRAM_NONCE_BYTES] = {1, 2, 3};

static void users_init(struct sasl_users *u)
{
	sasl_users_init(u);
	assert_int_equal(sasl_users_add(u, "user", 4, "pencil", 6), KEEL_OK);
	assert_int_equal(sasl_users_add(u, "a,b=c", 5, "pw", 2), KEEL_OK);
}

struct msg {
	char text[2048];
	size_t size;
};

static enum keel_err step(struct sasl_scram_server *s, const struct sasl_users *u, const char *in,
			  struct msg *out)
{
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out->text, sizeof(out->text) - 1);
	enum keel_err rc = sasl_scram_step(s, u, in, strlen(in), random_bytes, &w);
	out->size = w.size;
	out->text[w.size] = '\0';
	return rc;
}

/* RFC 7677 section 3. */
static void test_rfc7677_vector(void **state)
{
	(void)state;
	struct sasl_users u;
	users_init(&u);
	static struct sasl_scram_server s;
	sasl_scram_server_init(&s, SASL_MECH_SCRAM_SHA_256, zero_key);
	uint8_t salt[32];
	size_t salt_size = 0;
	assert_true(sasl_base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==", 24, salt, sizeof(salt),
				       &salt_size));
	s.test_salt = salt;
	s.test_salt_size = salt_size;
	s.test_server_nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
	struct msg out;
	assert_int_equal(step(&s, &u, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &out), KEEL_OK);
	assert_string_equal(out.text, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
				      "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
	assert_int_equal(s.state, SASL_SCRAM_SENT_FIRST);
	assert_int_equal(step(&s, &u,
			      "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
			      "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
			      &out),
			 KEEL_OK);
	assert_string_equal(out.text, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
	assert_int_equal(s.state, SASL_SCRAM_DONE);
	assert_string_equal(s.user, "user");
	/* Nothing after completion. */
	assert_int_equal(step(&s, &u, "x", &out), KEEL_AUTH);
	sasl_users_close(&u);
}

/* A SCRAM client, from RFC 5802 section 3. */
static bool librdkafka_form;

static void client_final(enum sasl_mech mech, const char *password, const char *client_first_bare,
			 const char *server_first, const char *gs2, struct msg *out)
{
	const EVP_MD *md = mech == SASL_MECH_SCRAM_SHA_512 ? EVP_sha512() : EVP_sha256();
	int hs = EVP_MD_get_size(md);
	const char *r = strstr(server_first, "r=") + 2;
	const char *r_end = strchr(r, ',');
	const char *s64 = strstr(server_first, ",s=") + 3;
	const char *s_end = strchr(s64, ',');
	uint8_t salt[64];
	size_t salt_size = 0;
	assert_true(sasl_base64_decode(s64, (size_t)(s_end - s64), salt, sizeof(salt), &salt_size));
	uint8_t salted[64], ck[64], sk[64], sig[64], proof[64];
	assert_int_equal(PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_size,
					   4096, md, hs, salted),
			 1);
	unsigned n = 0;
	HMAC(md, salted, hs, (const uint8_t *)"Client Key", 10, ck, &n);
	EVP_Digest(ck, (size_t)hs, sk, &n, md, NULL);
	char gs2_64[64];
	size_t g = sasl_base64_encode((const uint8_t *)gs2, strlen(gs2), gs2_64);
	gs2_64[g] = '\0';
	char without_proof[512];
	/* librdkafka's form: the client nonce, then the whole server nonce. */
	const char *cnonce = strstr(client_first_bare, ",r=") + 3;
	snprintf(without_proof, sizeof(without_proof), "c=%s,r=%.*s%.*s", gs2_64,
		 librdkafka_form ? (int)strlen(cnonce) : 0, cnonce, (int)(r_end - r), r);
	char am[8192];
	snprintf(am, sizeof(am), "%s,%s,%s", client_first_bare, server_first, without_proof);
	HMAC(md, sk, hs, (const uint8_t *)am, strlen(am), sig, &n);
	for (int i = 0; i < hs; i++) {
		proof[i] = ck[i] ^ sig[i];
	}
	char p64[128];
	size_t pn = sasl_base64_encode(proof, (size_t)hs, p64);
	p64[pn] = '\0';
	out->size = (size_t)snprintf(out->text, sizeof(out->text), "%s,p=%s", without_proof, p64);
}

static void exchange(enum sasl_mech mech, const char *gs2, const char *name, const char *password,
		     enum keel_err want_first, enum keel_err want_final)
{
	struct sasl_users u;
	users_init(&u);
	static struct sasl_scram_server s;
	uint8_t key[SASL_SCRAM_KEY_BYTES] = {42};
	sasl_scram_server_init(&s, mech, key);
	char first[256];
	snprintf(first, sizeof(first), "%sn=%s,r=fyko+d2lbbFgONRv9qkxdawL", gs2, name);
	struct msg server_first;
	assert_int_equal(step(&s, &u, first, &server_first), want_first);
	if (want_first != KEEL_OK) {
		assert_int_equal(s.state, SASL_SCRAM_FAILED);
		sasl_users_close(&u);
		return;
	}
	struct msg final;
	client_final(mech, password, first + strlen(gs2), server_first.text, gs2, &final);
	struct msg out;
	assert_int_equal(step(&s, &u, final.text, &out), want_final);
	if (want_final == KEEL_OK) {
		assert_int_equal(s.state, SASL_SCRAM_DONE);
		assert_int_equal(strncmp(out.text, "v=", 2), 0);
		assert_int_equal(out.size, 2 + (mech == SASL_MECH_SCRAM_SHA_512 ? 88 : 44));
	} else {
		assert_int_equal(s.state, SASL_SCRAM_FAILED);
		assert_int_equal(out.size, 0);
	}
	sasl_users_close(&u);
}

static void test_scram_exchanges(void **state)
{
	(void)state;
	exchange(SASL_MECH_SCRAM_SHA_512, "n,,", "user", "pencil", KEEL_OK, KEEL_OK);
	exchange(SASL_MECH_SCRAM_SHA_256, "n,,", "user", "pencil", KEEL_OK, KEEL_OK);
	exchange(SASL_MECH_SCRAM_SHA_256, "y,,", "user", "pencil", KEEL_OK, KEEL_OK);
	exchange(SASL_MECH_SCRAM_SHA_256, "n,a=user,", "user", "pencil", KEEL_OK, KEEL_OK);
	exchange(SASL_MECH_SCRAM_SHA_512, "n,,", "a=2Cb=3Dc", "pw", KEEL_OK, KEEL_OK);
	exchange(SASL_MECH_SCRAM_SHA_512, "n,,", "user", "pencil!", KEEL_OK, KEEL_AUTH);
	exchange(SASL_MECH_SCRAM_SHA_256, "n,,", "nobody", "pencil", KEEL_AUTH, KEEL_AUTH);
	exchange(SASL_MECH_SCRAM_SHA_256, "p=tls-unique,,", "user", "pencil", KEEL_AUTH, KEEL_AUTH);
	exchange(SASL_MECH_SCRAM_SHA_256, "n,a=other,", "user", "pencil", KEEL_AUTH, KEEL_AUTH);
	exchange(SASL_MECH_SCRAM_SHA_256, "n,,", "a=2Xb", "pw", KEEL_AUTH, KEEL_AUTH);
	librdkafka_form = true;
	exchange(SASL_MECH_SCRAM_SHA_256, "n,,", "user", "pencil", KEEL_OK, KEEL_OK);
	exchange(SASL_MECH_SCRAM_SHA_512, "n,,", "user", "pencil", KEEL_OK, KEEL_OK);
	librdkafka_form = false;
}

static void test_scram_bad_messages(void **state)
{
	(void)state;
	struct sasl_users u;
	users_init(&u);
	static struct sasl_scram_server s;
	struct msg out;
	const char *bad_first[] = {"", "n", "n,", "n,,", "n,,n=user", "n,,n=user,r=",
				   "n,,r=abc,n=user", "x,,n=user,r=abc",
				   "n,,n=user,r=abc,tokenauth=true"};
	for (size_t i = 0; i < sizeof(bad_first) / sizeof(bad_first[0]); i++) {
		sasl_scram_server_init(&s, SASL_MECH_SCRAM_SHA_256, zero_key);
		assert_int_equal(step(&s, &u, bad_first[i], &out), KEEL_AUTH);
		assert_non_null(s.why);
	}
	const char *bad_final[] = {
		"",
		"c=biws",
		"c=biws,r=abc,p=AAAA",                     /* another nonce */
		"c=eSws,r=abc" /* placeholder, nonce fixed below */,
	};
	for (size_t i = 0; i < sizeof(bad_final) / sizeof(bad_final[0]); i++) {
		sasl_scram_server_init(&s, SASL_MECH_SCRAM_SHA_256, zero_key);
		assert_int_equal(step(&s, &u, "n,,n=user,r=abc", &out), KEEL_OK);
		assert_int_equal(step(&s, &u, bad_final[i], &out), KEEL_AUTH);
		assert_int_equal(out.size, 0);
	}
	/* The right nonce but the wrong gs2 header, no proof, proof not last. */
	sasl_scram_server_init(&s, SASL_MECH_SCRAM_SHA_256, zero_key);
	assert_int_equal(step(&s, &u, "n,,n=user,r=abc", &out), KEEL_OK);
	char nonce[128];
	const char *r = out.text + 2;
	snprintf(nonce, sizeof(nonce), "%.*s", (int)(strchr(r, ',') - r), r);
	char line[512];
	const char *forms[] = {"c=eSws,r=%s,p=AAAA", "c=biws,r=%s", "c=biws,r=%s,p=AAAA,x=1"};
	for (size_t i = 0; i < 3; i++) {
		static struct sasl_scram_server t;
		sasl_scram_server_init(&t, SASL_MECH_SCRAM_SHA_256, zero_key);
		assert_int_equal(step(&t, &u, "n,,n=user,r=abc", &out), KEEL_OK);
		snprintf(line, sizeof(line), forms[i], nonce);
		assert_int_equal(step(&t, &u, line, &out), KEEL_AUTH);
	}
	/* Over the size limit, or with a NUL. */
	char big[SASL_SCRAM_MSG_MAX + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sasl_scram_server_init(&s, SASL_MECH_SCRAM_SHA_256, zero_key);
	assert_int_equal(step(&s, &u, big, &out), KEEL_AUTH);
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out.text, sizeof(out.text));
	sasl_scram_server_init(&s, SASL_MECH_SCRAM_SHA_256, zero_key);
	assert_int_equal(sasl_scram_step(&s, &u, "n,,n=u\0ser,r=a", 14, random_bytes, &w), KEEL_AUTH);
	sasl_users_close(&u);
}

static void test_plain(void **state)
{
	(void)state;
	struct sasl_users u;
	users_init(&u);
	char user[SASL_NAME_MAX + 1];
	const char *why = NULL;
	assert_int_equal(sasl_plain_check(&u, "\0user\0pencil", 12, user, &why), KEEL_OK);
	assert_string_equal(user, "user");
	assert_int_equal(sasl_plain_check(&u, "user\0user\0pencil", 16, user, &why), KEEL_OK);
	assert_int_equal(sasl_plain_check(&u, "\0user\0pencil!", 13, user, &why), KEEL_AUTH);
	assert_string_equal(why, "wrong password");
	assert_int_equal(sasl_plain_check(&u, "\0user\0pencil", 11, user, &why), KEEL_AUTH);
	assert_int_equal(sasl_plain_check(&u, "\0nobody\0pencil", 14, user, &why), KEEL_AUTH);
	assert_string_equal(why, "no such user");
	assert_int_equal(sasl_plain_check(&u, "other\0user\0pencil", 17, user, &why), KEEL_AUTH);
	assert_int_equal(sasl_plain_check(&u, "user\0pencil", 11, user, &why), KEEL_AUTH);
	assert_int_equal(sasl_plain_check(&u, "", 0, user, &why), KEEL_AUTH);
	sasl_users_close(&u);
}

static void test_mechs_and_base64(void **state)
{
	(void)state;
	assert_int_equal(sasl_mech_of("PLAIN", 5), SASL_MECH_PLAIN);
	assert_int_equal(sasl_mech_of("SCRAM-SHA-512", 13), SASL_MECH_SCRAM_SHA_512);
	assert_int_equal(sasl_mech_of("SCRAM-SHA-1", 11), SASL_MECH_NONE);
	assert_int_equal(sasl_mech_of("plain", 5), SASL_MECH_NONE);
	assert_string_equal(sasl_mech_name(SASL_MECH_SCRAM_SHA_256), "SCRAM-SHA-256");
	const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (size_t i = 0; i < 7; i++) {
		char out[16];
		size_t n = sasl_base64_encode((const uint8_t *)plain[i], strlen(plain[i]), out);
		assert_int_equal(n, strlen(enc[i]));
		assert_memory_equal(out, enc[i], n);
		uint8_t back[16];
		size_t m = 99;
		assert_true(sasl_base64_decode(enc[i], n, back, sizeof(back), &m));
		assert_int_equal(m, strlen(plain[i]));
		assert_memory_equal(back, plain[i], m);
	}
	uint8_t b[16];
	size_t m;
	assert_false(sasl_base64_decode("Zg=", 3, b, sizeof(b), &m));
	assert_false(sasl_base64_decode("Zh==", 4, b, sizeof(b), &m)); /* non-zero pad bits */
	assert_false(sasl_base64_decode("Zg==Zg==", 8, b, sizeof(b), &m));
	assert_false(sasl_base64_decode("Z!==", 4, b, sizeof(b), &m));
	assert_false(sasl_base64_decode("Zm9vYmFy", 8, b, 5, &m)); /* too small */
}

/* The library's client against the server, and what it refuses. */
static void client_exchange(enum sasl_mech mech, const char *user, const char *password,
			    bool want_ok)
{
	struct sasl_users u;
	users_init(&u);
	static struct sasl_scram_server s;
	static struct sasl_scram_client cl;
	uint8_t key[SASL_SCRAM_KEY_BYTES] = {7};
	static const uint8_t crandom[SASL_SCRAM_NONCE_BYTES] = {9, 8, 7};
	sasl_scram_server_init(&s, mech, key);
	struct msg a, b;
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, a.text, sizeof(a.text) - 1);
	assert_int_equal(sasl_scram_client_first(&cl, mech, user, crandom, &w), KEEL_OK);
	a.text[w.size] = '\0';
	assert_int_equal(step(&s, &u, a.text, &b), KEEL_OK);
	keel_wbuf_init_fixed(&w, a.text, sizeof(a.text) - 1);
	assert_int_equal(sasl_scram_client_final(&cl, password, strlen(password), b.text, b.size, &w),
			 KEEL_OK);
	a.text[w.size] = '\0';
	assert_int_equal(step(&s, &u, a.text, &b), want_ok ? KEEL_OK : KEEL_AUTH);
	if (want_ok) {
		assert_int_equal(sasl_scram_client_verify(&cl, b.text, b.size), KEEL_OK);
		/* A tampered verifier is refused. */
		b.text[3] = b.text[3] == 'A' ? 'B' : 'A';
		assert_int_equal(sasl_scram_client_verify(&cl, b.text, b.size), KEEL_AUTH);
		assert_int_equal(sasl_scram_client_verify(&cl, "e=invalid-proof", 15), KEEL_AUTH);
	}
	sasl_users_close(&u);
}

static void test_scram_client(void **state)
{
	(void)state;
	client_exchange(SASL_MECH_SCRAM_SHA_256, "user", "pencil", true);
	client_exchange(SASL_MECH_SCRAM_SHA_512, "user", "pencil", true);
	client_exchange(SASL_MECH_SCRAM_SHA_512, "a,b=c", "pw", true);
	client_exchange(SASL_MECH_SCRAM_SHA_256, "user", "pencil2", false);
	/* Server-first messages the client refuses. */
	static struct sasl_scram_client cl;
	static const uint8_t crandom[SASL_SCRAM_NONCE_BYTES] = {0};
	char first[256];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, first, sizeof(first));
	assert_int_equal(sasl_scram_client_first(&cl, SASL_MECH_SCRAM_SHA_256, "user", crandom, &w),
			 KEEL_OK);
	assert_int_equal(w.size, strlen("n,,n=user,r=") + 24);
	char cn[32];
	snprintf(cn, sizeof(cn), "%.*s", 24, first + strlen("n,,n=user,r="));
	char bad[4][256];
	snprintf(bad[0], sizeof(bad[0]), "r=other,s=QSXCR+Q6sek8bf92,i=4096");
	snprintf(bad[1], sizeof(bad[1]), "r=%sX,s=QSXCR+Q6sek8bf92,i=100", cn);
	snprintf(bad[2], sizeof(bad[2]), "r=%sX,s=QSXCR+Q6sek8bf92,i=99999999999", cn);
	snprintf(bad[3], sizeof(bad[3]), "r=%sX,s=!!,i=4096", cn);
	char out[512];
	for (int i = 0; i < 4; i++) {
		keel_wbuf_init_fixed(&w, out, sizeof(out));
		assert_int_equal(sasl_scram_client_final(&cl, "pencil", 6, bad[i], strlen(bad[i]), &w),
				 KEEL_AUTH);
		assert_non_null(cl.why);
	}
	assert_int_equal(sasl_scram_client_verify(&cl, "v=AAAA", 6), KEEL_AUTH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc7677_vector),
		cmocka_unit_test(test_scram_exchanges),
		cmocka_unit_test(test_scram_bad_messages),
		cmocka_unit_test(test_scram_client),
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_mechs_and_base64),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
