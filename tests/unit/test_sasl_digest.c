/* Unit tests: SASL DIGEST-MD5 (sasl/sasl_digest.h) — RFC 2831's worked
 * example, a whole exchange as ZooKeeper clients run it, every refusal,
 * the digest-response parser round trip and its errors — and the user
 * table's two file formats (sasl/sasl_users.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sasl/sasl_digest.h"

static const struct sasl_digest_params zk_params = {SASL_DIGEST_SERVER_NAME,
						    SASL_DIGEST_SERVICE "/" SASL_DIGEST_SERVER_NAME};

static void parse_ok(struct sasl_digest_response *r, const char *token)
{
	assert_int_equal(sasl_digest_response_parse(r, token, strlen(token)), KEEL_OK);
}

/* RFC 2831 section 4: the example exchange, response and rspauth. */
static void test_rfc2831_example(void **state)
{
	(void)state;
	static struct sasl_digest_response r;
	parse_ok(&r, "charset=utf-8,username=\"chris\",realm=\"elwood.innosoft.com\","
		     "nonce=\"OA6MG9tEQGm2hh\",nc=00000001,cnonce=\"OA6MHXh6VqTrRk\","
		     "digest-uri=\"imap/elwood.innosoft.com\","
		     "response=d388dad90d4bbd760a152321f2143af7,qop=auth");
	char response[33];
	char rspauth[33];
	sasl_digest_compute(&r, "secret", 6, response, rspauth);
	assert_string_equal(response, "d388dad90d4bbd760a152321f2143af7");
	assert_string_equal(rspauth, "ea40f60335c427b5527b84dbabcdfffd");
	assert_string_equal(r.value[SDF_RESPONSE], response);
	/* Another password gives another response. */
	sasl_digest_compute(&r, "secreT", 6, response, rspauth);
	assert_string_not_equal(response, "d388dad90d4bbd760a152321f2143af7");
}

static void users_with_alice(struct sasl_users *u)
{
	sasl_users_init(u);
	assert_int_equal(sasl_users_add(u, "alice", 5, "secret", 6), KEEL_OK);
	assert_int_equal(sasl_users_add(u, "bob", 3, "p:w", 3), KEEL_OK);
}

/* The value of `key` in a challenge like realm="x",nonce="y",... */
static void challenge_value(const char *challenge, const char *key, char *out, size_t size)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "%s=\"", key);
	const char *p = strstr(challenge, pat);
	assert_non_null(p);
	p += strlen(pat);
	const char *end = strchr(p, '"');
	assert_non_null(end);
	assert_true((size_t)(end - p) < size);
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
}

struct client_msg {
	char text[2048];
	size_t size;
};

/* What a client (kazoo's pure-sasl, Java's DigestMD5Client) answers. */
static void client_response(struct client_msg *m, const char *challenge, const char *user,
			    const char *password, const char *uri, const char *nc)
{
	char nonce[128];
	char realm[128];
	challenge_value(challenge, "nonce", nonce, sizeof(nonce));
	challenge_value(challenge, "realm", realm, sizeof(realm));
	static struct sasl_digest_response r;
	char token[1024];
	snprintf(token, sizeof(token),
		 "charset=utf-8,username=\"%s\",realm=\"%s\",nonce=\"%s\",nc=%s,"
		 "cnonce=\"c0ffee42\",digest-uri=\"%s\",maxbuf=65536,qop=auth",
		 user, realm, nonce, nc, uri);
	parse_ok(&r, token);
	char response[33];
	char rspauth[33];
	sasl_digest_compute(&r, password, strlen(password), response, rspauth);
	m->size = (size_t)snprintf(m->text, sizeof(m->text), "%s,response=%s", token, response);
}

static const uint8_t random_bytes[SASL_DIGEST_NONCE_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8,
							      9, 10, 11, 12, 13, 14, 15, 16};

/* Runs START -> challenge; returns the challenge text in ch. */
static void start(struct sasl_digest_server *s, const struct sasl_users *u, char *ch, size_t size)
{
	sasl_digest_server_init(s, zk_params);
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, ch, size - 1);
	assert_int_equal(sasl_digest_step(s, u, "", 0, random_bytes, &w), KEEL_OK);
	ch[w.size] = '\0';
	assert_int_equal(s->state, SASL_DIGEST_CHALLENGED);
}

static void test_exchange_ok(void **state)
{
	(void)state;
	struct sasl_users u;
	users_with_alice(&u);
	struct sasl_digest_server s;
	char ch[512];
	start(&s, &u, ch, sizeof(ch));
	assert_non_null(strstr(ch, "realm=\"zk-sasl-md5\""));
	assert_non_null(strstr(ch, "nonce=\"0102030405060708090a0b0c0d0e0f10\""));
	assert_null(strstr(ch, "qop=")); /* as ZooKeeper: absent means auth */
	assert_non_null(strstr(ch, "algorithm=md5-sess"));

	struct client_msg m;
	client_response(&m, ch, "bob", "p:w", "zookeeper/zk-sasl-md5", "00000001");
	char out[256];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, sizeof(out) - 1);
	assert_int_equal(sasl_digest_step(&s, &u, m.text, m.size, random_bytes, &w), KEEL_OK);
	out[w.size] = '\0';
	assert_int_equal(s.state, SASL_DIGEST_DONE);
	assert_string_equal(s.user, "bob");
	assert_int_equal(s.user_size, 3);
	/* rspauth is what the client computes for the same response. */
	static struct sasl_digest_response r;
	parse_ok(&r, m.text);
	char response[33];
	char rspauth[33];
	sasl_digest_compute(&r, "p:w", 3, response, rspauth);
	char want[64];
	snprintf(want, sizeof(want), "rspauth=%s", rspauth);
	assert_string_equal(out, want);
	/* A step after completion is refused. */
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	assert_int_equal(sasl_digest_step(&s, &u, "", 0, random_bytes, &w), KEEL_AUTH);
	assert_int_equal(s.state, SASL_DIGEST_FAILED);
	sasl_users_close(&u);
}

/* Each bad response fails the exchange, which then stays failed. */
static void refused(const char *user, const char *password, const char *uri, const char *nc,
		    const char *why_part)
{
	struct sasl_users u;
	users_with_alice(&u);
	struct sasl_digest_server s;
	char ch[512];
	start(&s, &u, ch, sizeof(ch));
	struct client_msg m;
	client_response(&m, ch, user, password, uri, nc);
	char out[256];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	assert_int_equal(sasl_digest_step(&s, &u, m.text, m.size, random_bytes, &w), KEEL_AUTH);
	assert_int_equal(s.state, SASL_DIGEST_FAILED);
	assert_int_equal(w.size, 0);
	assert_non_null(strstr(s.why, why_part));
	assert_int_equal(s.user_size, 0);
	/* The right answer no longer helps. */
	client_response(&m, ch, "alice", "secret", "zookeeper/zk-sasl-md5", "00000001");
	assert_int_equal(sasl_digest_step(&s, &u, m.text, m.size, random_bytes, &w), KEEL_AUTH);
	sasl_users_close(&u);
}

static void test_refusals(void **state)
{
	(void)state;
	refused("alice", "wrong", "zookeeper/zk-sasl-md5", "00000001", "wrong password");
	refused("alice", "secre", "zookeeper/zk-sasl-md5", "00000001", "wrong password");
	refused("carol", "secret", "zookeeper/zk-sasl-md5", "00000001", "no such user");
	refused("alice", "secret", "zookeeper/other", "00000001", "digest-uri");
	refused("alice", "secret", "zookeeper/zk-sasl-md5", "00000002", "nonce-count");
}

static void test_other_refusals(void **state)
{
	(void)state;
	struct sasl_users u;
	users_with_alice(&u);
	struct sasl_digest_server s;
	char out[512];
	struct keel_wbuf w;
	/* An initial response is ignored (as ZooKeeper's server does). */
	sasl_digest_server_init(&s, zk_params);
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	assert_int_equal(sasl_digest_step(&s, &u, "x", 1, random_bytes, &w), KEEL_OK);
	assert_int_equal(s.state, SASL_DIGEST_CHALLENGED);
	assert_true(w.size > 0);
	/* A response for another nonce (a replay from another exchange). */
	char ch[512];
	start(&s, &u, ch, sizeof(ch));
	struct client_msg m;
	client_response(&m, ch, "alice", "secret", "zookeeper/zk-sasl-md5", "00000001");
	struct sasl_digest_server s2;
	static const uint8_t other[SASL_DIGEST_NONCE_BYTES] = {9};
	sasl_digest_server_init(&s2, zk_params);
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	assert_int_equal(sasl_digest_step(&s2, &u, "", 0, other, &w), KEEL_OK);
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	assert_int_equal(sasl_digest_step(&s2, &u, m.text, m.size, other, &w), KEEL_AUTH);
	assert_non_null(strstr(s2.why, "nonce"));
	/* Garbage. */
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	assert_int_equal(sasl_digest_step(&s, &u, "a=\"", 3, random_bytes, &w), KEEL_AUTH);
	assert_non_null(strstr(s.why, "parse"));
	sasl_users_close(&u);
}

static void assert_same(const struct sasl_digest_response *a, const struct sasl_digest_response *b)
{
	for (int f = 0; f < SDF_COUNT; f++) {
		assert_int_equal(a->present[f], b->present[f]);
		if (a->present[f]) {
			assert_int_equal(a->size[f], b->size[f]);
			assert_memory_equal(a->value[f], b->value[f], a->size[f]);
		}
	}
}

static void test_parse_round_trip(void **state)
{
	(void)state;
	static struct sasl_digest_response a;
	static struct sasl_digest_response b;
	parse_ok(&a, " , USERNAME = \"a\\\"l\\\\ice\" ,, realm=\"\",unknown=\"x,y\", nc=00000001 ,"
		     "authzid=\"z\"");
	assert_true(a.present[SDF_USERNAME]);
	assert_string_equal(a.value[SDF_USERNAME], "a\"l\\ice");
	assert_true(a.present[SDF_REALM]);
	assert_int_equal(a.size[SDF_REALM], 0);
	assert_string_equal(a.value[SDF_NC], "00000001");
	assert_false(a.present[SDF_NONCE]);
	char buf[SASL_DIGEST_TOKEN_MAX];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	sasl_digest_response_encode(&a, &w);
	assert_true(keel_wbuf_ok(&w));
	assert_int_equal(sasl_digest_response_parse(&b, buf, w.size), KEEL_OK);
	assert_same(&a, &b);
	assert_string_equal(sasl_digest_field_name(SDF_DIGEST_URI), "digest-uri");
}

static void test_parse_errors(void **state)
{
	(void)state;
	static struct sasl_digest_response r;
	const char *bad[] = {
		"username=\"a\",username=\"b\"", /* repeated */
		"username=\"a",                  /* unterminated */
		"username",                      /* no '=' */
		"=x",                            /* no name */
		"username=",                     /* no value */
		"username=\"a\" nonce=\"b\"",    /* no comma */
		"username=\"a\\",                /* escape at the end */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sasl_digest_response_parse(&r, bad[i], strlen(bad[i])), KEEL_PROTO);
	}
	/* A value over SASL_DIGEST_VALUE_MAX, a token over SASL_DIGEST_TOKEN_MAX. */
	char big[SASL_DIGEST_TOKEN_MAX + 2];
	memset(big, 'a', sizeof(big));
	memcpy(big, "cnonce=", 7);
	assert_int_equal(sasl_digest_response_parse(&r, big, 7 + SASL_DIGEST_VALUE_MAX + 1),
			 KEEL_PROTO);
	assert_int_equal(sasl_digest_response_parse(&r, big, 7 + SASL_DIGEST_VALUE_MAX), KEEL_OK);
	assert_int_equal(r.size[SDF_CNONCE], SASL_DIGEST_VALUE_MAX);
	assert_int_equal(sasl_digest_response_parse(&r, big, sizeof(big)), KEEL_PROTO);
	/* A NUL inside a quoted value. */
	assert_int_equal(sasl_digest_response_parse(&r, "nc=\"a\0b\"", 8), KEEL_PROTO);
}

static void test_users_file(void **state)
{
	(void)state;
	struct sasl_users u;
	char err[256];
	sasl_users_init(&u);
	const char *text = "# users\nalice:secret\r\n\nbob:p:w:x\ncarol:\n";
	assert_int_equal(sasl_users_parse(&u, text, strlen(text), err, sizeof(err)), KEEL_OK);
	assert_int_equal(u.count, 3);
	const struct sasl_user *b = sasl_users_find(&u, "bob", 3);
	assert_non_null(b);
	assert_string_equal(b->password, "p:w:x");
	assert_string_equal(sasl_users_find(&u, "alice", 5)->password, "secret");
	assert_int_equal(sasl_users_find(&u, "carol", 5)->password_size, 0);
	assert_null(sasl_users_find(&u, "ali", 3));
	sasl_users_close(&u);

	const char *bad[] = {"alice\n", "alice:a\nalice:b\n", ":pw\n", "a b:pw\n"};
	const char *line[] = {"line 1", "line 2", "line 1", "line 1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sasl_users_init(&u);
		assert_int_not_equal(sasl_users_parse(&u, bad[i], strlen(bad[i]), err, sizeof(err)),
				     KEEL_OK);
		assert_non_null(strstr(err, line[i]));
		sasl_users_close(&u);
	}
}

static void test_jaas(void **state)
{
	(void)state;
	struct sasl_users u;
	char err[256];
	const char *text =
		"// ZooKeeper's JAAS file\n"
		"Server {\n"
		"  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
		"  user_super=\"adminsecret\"\n"
		"  /* two users */ user_alice=\"sec\\\"ret\" debug=true\n"
		"  user_bob=\"bobsecret\";\n"
		"};\n"
		"Client {\n"
		"  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
		"  username=\"bob\" password=\"bobsecret\";\n"
		"};\n";
	sasl_users_init(&u);
	assert_int_equal(sasl_users_parse_jaas(&u, text, strlen(text), "Server", err, sizeof(err)),
			 KEEL_OK);
	assert_int_equal(u.count, 3);
	assert_string_equal(sasl_users_find(&u, "alice", 5)->password, "sec\"ret");
	assert_string_equal(sasl_users_find(&u, "super", 5)->password, "adminsecret");
	assert_null(sasl_users_find(&u, "username", 8));
	sasl_users_close(&u);

	/* The Client section alone has no Server. */
	sasl_users_init(&u);
	assert_int_equal(sasl_users_parse_jaas(&u, text, strlen(text), "Other", err, sizeof(err)),
			 KEEL_CONFIG);
	assert_non_null(strstr(err, "no section named Other"));
	sasl_users_close(&u);

	const char *bad[] = {
		"Server { com.sun.security.auth.module.Krb5LoginModule required keyTab=\"x\"; };",
		"Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"x\" };",
		"Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"x\"; }",
		"Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a=\"x;};",
		"Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a; };",
		"Server /* unterminated { };",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sasl_users_init(&u);
		err[0] = '\0';
		assert_int_equal(
			sasl_users_parse_jaas(&u, bad[i], strlen(bad[i]), "Server", err, sizeof(err)),
			KEEL_CONFIG);
		assert_true(strlen(err) > 0);
		sasl_users_close(&u);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc2831_example),  cmocka_unit_test(test_exchange_ok),
		cmocka_unit_test(test_refusals),         cmocka_unit_test(test_other_refusals),
		cmocka_unit_test(test_parse_round_trip), cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_users_file),       cmocka_unit_test(test_jaas),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
