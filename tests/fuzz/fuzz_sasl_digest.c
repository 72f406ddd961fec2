/*
 * fuzz_sasl_digest.c — SASL DIGEST-MD5 (sasl/sasl_digest.h) and the SASL
 * user files (sasl/sasl_users.h) on arbitrary bytes.
 *
 * Properties: nothing crashes or reads out of bounds (ASan); a
 * digest-response that parses re-encodes to a token that parses to the
 * same directives; an exchange fed arbitrary bytes as the response never
 * authenticates (the response would have to carry the MD5 of a password
 * it does not know for a nonce it did not see) and ends FAILED; a user
 * file that parses holds only valid names, each once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sasl/sasl_digest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const struct sasl_digest_response *a, const struct sasl_digest_response *b)
{
	for (int f = 0; f < SDF_COUNT; f++) {
		KEEL_ASSERT(a->present[f] == b->present[f]);
		if (a->present[f]) {
			KEEL_ASSERT(a->size[f] == b->size[f]);
			KEEL_ASSERT(memcmp(a->value[f], b->value[f], a->size[f]) == 0);
			KEEL_ASSERT(a->value[f][a->size[f]] == '\0');
		}
	}
}

static void users_file(const uint8_t *data, size_t size, bool jaas)
{
	struct sasl_users u;
	char err[256];
	sasl_users_init(&u);
	enum keel_err rc = jaas ? sasl_users_parse_jaas(&u, (const char *)data, size, "Server",
							err, sizeof(err))
				: sasl_users_parse(&u, (const char *)data, size, err, sizeof(err));
	if (rc == KEEL_OK) {
		for (uint32_t i = 0; i < u.count; i++) {
			const struct sasl_user *x = &u.users[i];
			KEEL_ASSERT(x->name_size > 0 && x->name_size <= SASL_NAME_MAX);
			KEEL_ASSERT(x->password_size <= SASL_PASSWORD_MAX);
			KEEL_ASSERT(sasl_users_find(&u, x->name, x->name_size) == x);
		}
	}
	sasl_users_close(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sasl_digest_response a;
	static struct sasl_digest_response b;
	if (sasl_digest_response_parse(&a, data, size) == KEEL_OK) {
		uint8_t *buf = malloc(SASL_DIGEST_TOKEN_MAX * 3);
		KEEL_ASSERT(buf != NULL);
		struct keel_wbuf w;
		keel_wbuf_init_fixed(&w, buf, SASL_DIGEST_TOKEN_MAX * 3);
		sasl_digest_response_encode(&a, &w);
		KEEL_ASSERT(keel_wbuf_ok(&w));
		/* Escapes can make the re-encoding longer than the token limit. */
		if (w.size <= SASL_DIGEST_TOKEN_MAX) {
			KEEL_ASSERT(sasl_digest_response_parse(&b, buf, w.size) == KEEL_OK);
			same(&a, &b);
		}
		free(buf);
	}

	struct sasl_users users;
	sasl_users_init(&users);
	KEEL_ASSERT(sasl_users_add(&users, "alice", 5, "secret", 6) == KEEL_OK);
	struct sasl_digest_server s;
	struct sasl_digest_params params = {SASL_DIGEST_SERVER_NAME,
					    SASL_DIGEST_SERVICE "/" SASL_DIGEST_SERVER_NAME};
	sasl_digest_server_init(&s, params);
	static const uint8_t random[SASL_DIGEST_NONCE_BYTES] = {7};
	uint8_t out[512];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	KEEL_ASSERT(sasl_digest_step(&s, &users, "", 0, random, &w) == KEEL_OK);
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	KEEL_ASSERT(sasl_digest_step(&s, &users, data, size, random, &w) == KEEL_AUTH);
	KEEL_ASSERT(s.state == SASL_DIGEST_FAILED);
	KEEL_ASSERT(w.size == 0);
	sasl_users_close(&users);

	users_file(data, size, false);
	users_file(data, size, true);
	return 0;
}
