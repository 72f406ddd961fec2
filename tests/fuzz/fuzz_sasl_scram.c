/*
 * fuzz_sasl_scram.c — SASL PLAIN and SCRAM (sasl/sasl_scram.h) and base64
 * on arbitrary bytes.
 *
 * Properties: nothing crashes or reads out of bounds (ASan); arbitrary
 * bytes never authenticate with PLAIN (the password is not in them) nor
 * complete a SCRAM exchange, whether as the first message or as the final
 * one after a valid first; the client side takes arbitrary server messages
 * without harm and never accepts one as the server's signature; base64 that
 * decodes re-encodes to the same text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "sasl/sasl_scram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PASSWORD "fuzz-password-not-in-any-input-0123456789"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sasl_users users;
	sasl_users_init(&users);
	KEEL_ASSERT(sasl_users_add(&users, "user", 4, PASSWORD, strlen(PASSWORD)) == KEEL_OK);
	char user[SASL_NAME_MAX + 1];
	const char *why = NULL;
	if (memmem(data, size, PASSWORD, strlen(PASSWORD)) == NULL) {
		KEEL_ASSERT(sasl_plain_check(&users, data, size, user, &why) == KEEL_AUTH);
	}

	static const uint8_t key[SASL_SCRAM_KEY_BYTES] = {1};
	static const uint8_t random[SASL_SCRAM_NONCE_BYTES] = {2};
	static struct sasl_scram_server s;
	uint8_t out[SASL_SCRAM_MSG_MAX];
	struct keel_wbuf w;
	/* As a first message, to a table without users: everything is parsed,
	 * then "no such user" (no PBKDF2 per input, which would make the run
	 * slow without reaching more code). */
	struct sasl_users none;
	sasl_users_init(&none);
	for (int mech = SASL_MECH_SCRAM_SHA_256; mech <= SASL_MECH_SCRAM_SHA_512; mech++) {
		sasl_scram_server_init(&s, (enum sasl_mech)mech, key);
		keel_wbuf_init_fixed(&w, out, sizeof(out));
		KEEL_ASSERT(sasl_scram_step(&s, &none, data, size, random, &w) == KEEL_AUTH);
		KEEL_ASSERT(s.state == SASL_SCRAM_FAILED);
		KEEL_ASSERT(w.size == 0);
		if (mech == SASL_MECH_SCRAM_SHA_256 && size > 0 && data[0] == 'c') {
			/* As the final message of a real exchange (its first step,
			 * PBKDF2 and all, made once and copied). */
			static struct sasl_scram_server after_first;
			static bool have_first;
			if (!have_first) {
				sasl_scram_server_init(&after_first, (enum sasl_mech)mech, key);
				keel_wbuf_init_fixed(&w, out, sizeof(out));
				KEEL_ASSERT(sasl_scram_step(&after_first, &users, "n,,n=user,r=abc", 15,
							    random, &w) == KEEL_OK);
				have_first = true;
			}
			s = after_first;
			keel_wbuf_init_fixed(&w, out, sizeof(out));
			KEEL_ASSERT(sasl_scram_step(&s, &users, data, size, random, &w) == KEEL_AUTH);
			KEEL_ASSERT(s.state == SASL_SCRAM_FAILED);
		}
	}
	sasl_users_close(&users);

	/* The client side on arbitrary server messages: a server-first whose
	 * iteration count is in range runs PBKDF2, so only inputs that start
	 * "r=" + our nonce get that far; none verifies as server-final. */
	static struct sasl_scram_client cl;
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	KEEL_ASSERT(sasl_scram_client_first(&cl, SASL_MECH_SCRAM_SHA_256, "user", random, &w) ==
		    KEEL_OK);
	keel_wbuf_init_fixed(&w, out, sizeof(out));
	if (sasl_scram_client_final(&cl, "pw", 2, data, size, &w) == KEEL_OK) {
		KEEL_ASSERT(keel_wbuf_ok(&w) && w.size > 0);
	}
	KEEL_ASSERT(sasl_scram_client_verify(&cl, data, size) == KEEL_AUTH);

	uint8_t dec[4096];
	size_t n = 0;
	if (size <= 4096 && sasl_base64_decode((const char *)data, size, dec, sizeof(dec), &n)) {
		char *enc = malloc(size + 4);
		KEEL_ASSERT(enc != NULL);
		KEEL_ASSERT(sasl_base64_encode(dec, n, enc) == size);
		KEEL_ASSERT(memcmp(enc, data, size) == 0);
		free(enc);
	}
	return 0;
}
