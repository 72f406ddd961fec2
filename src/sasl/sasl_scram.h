/*
 * sasl_scram.h — the server side of SASL PLAIN (RFC 4616) and SCRAM-SHA-256
 * / SCRAM-SHA-512 (RFC 5802, RFC 7677), the mechanisms of Kafka listeners.
 *
 * PLAIN is one message: [authzid] NUL authcid NUL password. The authzid,
 * if given, must be the user (as Kafka's PlainSaslServer).
 *
 * SCRAM, without channel binding (gs2 flag 'n' or 'y'):
 *
 *   START --client-first "n,[a=U],n=USER,r=CNONCE[,ext...]"--> SENT_FIRST
 *         server-first "r=CNONCE+SNONCE,s=SALT,i=ITERATIONS"
 *   SENT_FIRST --client-final "c=GS2,r=NONCE,p=PROOF"--> DONE
 *         server-final "v=SERVER-SIGNATURE"
 *   anything else --> FAILED (and stays so)
 *
 * The server keeps no salted passwords: a user's salt is derived from a
 * per-process random key (HMAC-SHA-256 of the mechanism and the user name),
 * so it is stable for the process and unknown outside it, and the salted
 * password is computed (PBKDF2, SASL_SCRAM_ITERATIONS) during the exchange.
 * Randomness (the key, the server nonce) comes from the caller.
 *
 * Messages are at most SASL_SCRAM_MSG_MAX bytes; user names are decoded
 * from saslname ("=2C" is ',', "=3D" is '=').
 */
#ifndef KEEL_SASL_SCRAM_H
#define KEEL_SASL_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "sasl/sasl_users.h"

enum sasl_mech {
	SASL_MECH_NONE = 0,
	SASL_MECH_PLAIN,
	SASL_MECH_SCRAM_SHA_256,
	SASL_MECH_SCRAM_SHA_512,
};

#define SASL_MECH_NAMES "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"

/* The mechanism for a name ("PLAIN", "SCRAM-SHA-256"...), or NONE. */
enum sasl_mech sasl_mech_of(const char *name, size_t size);
const char *sasl_mech_name(enum sasl_mech mech);

/* PLAIN: KEEL_OK and the user's name in `user` when the message carries
 * a known user's password; KEEL_AUTH otherwise (*why says why). */
enum keel_err sasl_plain_check(const struct sasl_users *users, const void *msg, size_t size,
			       char user[SASL_NAME_MAX + 1], const char **why);

#define SASL_SCRAM_MSG_MAX 1024u
#define SASL_SCRAM_ITERATIONS 4096u
#define SASL_SCRAM_NONCE_BYTES 18u /* 24 base64 characters */
#define SASL_SCRAM_KEY_BYTES 32u
#define SASL_SCRAM_SALT_BYTES 16u
#define SASL_SCRAM_HASH_MAX 64u

enum sasl_scram_state {
	SASL_SCRAM_START = 0,
	SASL_SCRAM_SENT_FIRST,
	SASL_SCRAM_DONE,
	SASL_SCRAM_FAILED,
};

struct sasl_scram_server {
	enum sasl_mech mech;
	enum sasl_scram_state state;
	const char *why; /* FAILED: a reason for the log (static text) */
	char user[SASL_NAME_MAX + 1];
	size_t user_size;
	uint8_t key[SASL_SCRAM_KEY_BYTES]; /* the process's salt key */
	char gs2[SASL_SCRAM_MSG_MAX];      /* the gs2 header, e.g. "n,," */
	size_t gs2_size;
	char auth_message[3 * SASL_SCRAM_MSG_MAX]; /* client-first-bare "," server-first */
	size_t auth_message_size;
	char nonce[SASL_SCRAM_MSG_MAX]; /* client nonce + server nonce */
	size_t nonce_size;
	size_t cnonce_size; /* the client's part of nonce */
	uint8_t salted[SASL_SCRAM_HASH_MAX];
	/* Tests only (RFC 7677's vector): a fixed salt and server nonce. */
	const uint8_t *test_salt;
	size_t test_salt_size;
	const char *test_server_nonce;
};

void sasl_scram_server_init(struct sasl_scram_server *s, enum sasl_mech mech,
			    const uint8_t key[SASL_SCRAM_KEY_BYTES]);

/* One step: the client's message in, the server's appended to out.
 * `random` is SASL_SCRAM_NONCE_BYTES fresh bytes (the first step's server
 * nonce). KEEL_OK: out holds the next message (state SENT_FIRST or DONE);
 * KEEL_AUTH: the exchange failed (state FAILED, s->why). Clears the salted
 * password when it is done with it. */
enum keel_err sasl_scram_step(struct sasl_scram_server *s, const struct sasl_users *users,
			      const void *msg, size_t size,
			      const uint8_t random[SASL_SCRAM_NONCE_BYTES], struct keel_wbuf *out);

/*
 * The client side of SCRAM (the brokers' replica fetchers use it):
 *
 *   sasl_scram_client_first   "n,,n=USER,r=CNONCE"
 *   sasl_scram_client_final   server-first in, "c=biws,r=NONCE,p=PROOF" out
 *   sasl_scram_client_verify  server-final in: its v= must be the server
 *                             signature for this exchange (the server knew
 *                             the password too)
 *
 * Each returns KEEL_AUTH (c->why says why) on a malformed or wrong
 * message; an iteration count outside [SASL_SCRAM_ITERATIONS,
 * SASL_SCRAM_CLIENT_MAX_ITERATIONS] is refused.
 */
#define SASL_SCRAM_CLIENT_MAX_ITERATIONS 100000u

struct sasl_scram_client {
	enum sasl_mech mech;
	const char *why;
	char first_bare[SASL_SCRAM_MSG_MAX];
	size_t first_bare_size;
	char cnonce[2 * SASL_SCRAM_NONCE_BYTES];
	size_t cnonce_size;
	uint8_t server_signature[SASL_SCRAM_HASH_MAX];
	bool final_sent;
};

enum keel_err sasl_scram_client_first(struct sasl_scram_client *c, enum sasl_mech mech,
				      const char *user, const uint8_t random[SASL_SCRAM_NONCE_BYTES],
				      struct keel_wbuf *out);
enum keel_err sasl_scram_client_final(struct sasl_scram_client *c, const char *password,
				      size_t password_size, const void *server_first, size_t size,
				      struct keel_wbuf *out);
enum keel_err sasl_scram_client_verify(struct sasl_scram_client *c, const void *server_final,
				       size_t size);

/* Base64 (standard alphabet, '=' padding). encode writes 4*ceil(n/3)
 * characters; decode is strict (length a multiple of 4, valid padding)
 * and returns false on bad input or when out (max bytes) is too small. */
size_t sasl_base64_encode(const uint8_t *in, size_t size, char *out);
bool sasl_base64_decode(const char *in, size_t size, uint8_t *out, size_t max, size_t *out_size);

#endif
