/*
 * sasl_digest.h — the server side of SASL DIGEST-MD5 (RFC 2831), as
 * ZooKeeper's SaslServer uses it for clients: service "zookeeper", server
 * name and realm "zk-sasl-md5", qop "auth" only (no integrity or
 * confidentiality layer), algorithm md5-sess, charset utf-8.
 *
 * The exchange (one sasl request per step, opcode 102):
 *
 *   START --any token--> CHALLENGED     server sends the digest-challenge
 *                                       (realm, nonce, charset, algorithm; no
 *                                       qop directive, which means auth, as
 *                                       ZooKeeper's server sends it)
 *   CHALLENGED --digest-response--> DONE  server checks it against the
 *                                       user table and sends rspauth=...
 *   any other token, a bad response --> FAILED (and stays so)
 *
 * The nonce's randomness comes from the caller (this layer is pure). A
 * response token is at most SASL_DIGEST_TOKEN_MAX bytes, each directive
 * value at most SASL_DIGEST_VALUE_MAX after unquoting; directives may come
 * in any order, unknown ones are ignored (RFC 2831 2.1.2), a repeated one
 * is an error.
 */
#ifndef KEEL_SASL_DIGEST_H
#define KEEL_SASL_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "sasl/sasl_users.h"

#define SASL_DIGEST_SERVICE "zookeeper"
#define SASL_DIGEST_SERVER_NAME "zk-sasl-md5"
#define SASL_DIGEST_NONCE_BYTES 16u
#define SASL_DIGEST_TOKEN_MAX 4096u
#define SASL_DIGEST_VALUE_MAX 512u

enum sasl_digest_field {
	SDF_USERNAME = 0,
	SDF_REALM,
	SDF_NONCE,
	SDF_CNONCE,
	SDF_NC,
	SDF_QOP,
	SDF_DIGEST_URI,
	SDF_RESPONSE,
	SDF_MAXBUF,
	SDF_CHARSET,
	SDF_CIPHER,
	SDF_AUTHZID,
	SDF_COUNT,
};

/* A parsed digest-response: each directive unquoted and NUL-terminated. */
struct sasl_digest_response {
	bool present[SDF_COUNT];
	uint16_t size[SDF_COUNT];
	char value[SDF_COUNT][SASL_DIGEST_VALUE_MAX + 1];
};

/* The directive's name ("digest-uri" for SDF_DIGEST_URI). */
const char *sasl_digest_field_name(enum sasl_digest_field f);

/* KEEL_OK, or KEEL_PROTO for a malformed token (syntax, a value or the
 * token too long, a directive repeated). Never allocates. */
enum keel_err sasl_digest_response_parse(struct sasl_digest_response *r, const void *token,
					 size_t size);

/* Writes r back as a token (every present directive, quoted); parsing it
 * gives r again. */
void sasl_digest_response_encode(const struct sasl_digest_response *r, struct keel_wbuf *w);

/* What the exchange is bound to: the realm offered and the digest-uri
 * expected ("zookeeper/zk-sasl-md5" for ZooKeeper). */
struct sasl_digest_params {
	const char *realm;
	const char *digest_uri;
};

/* The response value and rspauth for r and a password, as 32 lowercase
 * hex digits each (NUL-terminated), per RFC 2831 2.1.2.1 and 2.1.3. r must
 * have username, nonce, cnonce, nc and digest-uri; realm, qop and authzid
 * are used when present. */
void sasl_digest_compute(const struct sasl_digest_response *r, const char *password,
			 size_t password_size, char response_hex[33], char rspauth_hex[33]);

enum sasl_digest_state {
	SASL_DIGEST_START = 0,
	SASL_DIGEST_CHALLENGED,
	SASL_DIGEST_DONE,
	SASL_DIGEST_FAILED,
};

struct sasl_digest_server {
	enum sasl_digest_state state;
	struct sasl_digest_params params;
	char nonce[2 * SASL_DIGEST_NONCE_BYTES + 1];
	char user[SASL_NAME_MAX + 1]; /* DONE: the authenticated user */
	size_t user_size;
	const char *why; /* FAILED: a reason for the log (static text) */
};

void sasl_digest_server_init(struct sasl_digest_server *s, struct sasl_digest_params params);

/*
 * One step: the client's token in, the server's token out (appended to
 * out). `random` is SASL_DIGEST_NONCE_BYTES fresh random bytes (used on
 * the first step only).
 *   KEEL_OK    out holds the next token; s->state is CHALLENGED or DONE.
 *   KEEL_AUTH  the exchange failed (s->state FAILED, s->why says why):
 *              answer AuthFailed and close, as ZooKeeper does.
 */
enum keel_err sasl_digest_step(struct sasl_digest_server *s, const struct sasl_users *users,
			       const void *token, size_t size,
			       const uint8_t random[SASL_DIGEST_NONCE_BYTES], struct keel_wbuf *out);

#endif
