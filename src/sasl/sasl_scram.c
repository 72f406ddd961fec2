/*
 * sasl_scram.c — SASL PLAIN and SCRAM-SHA-256/512, server side
 * (sasl_scram.h).
 */
#include "sasl/sasl_scram.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/assert.h"

/* ---- mechanisms ---- */

static const char *const mech_names[] = {
	[SASL_MECH_NONE] = "",
	[SASL_MECH_PLAIN] = "PLAIN",
	[SASL_MECH_SCRAM_SHA_256] = "SCRAM-SHA-256",
	[SASL_MECH_SCRAM_SHA_512] = "SCRAM-SHA-512",
};

enum sasl_mech sasl_mech_of(const char *name, size_t size)
{
	for (int m = SASL_MECH_PLAIN; m <= SASL_MECH_SCRAM_SHA_512; m++) {
		if (strlen(mech_names[m]) == size && memcmp(mech_names[m], name, size) == 0) {
			return (enum sasl_mech)m;
		}
	}
	return SASL_MECH_NONE;
}

const char *sasl_mech_name(enum sasl_mech mech)
{
	KEEL_ASSERT(mech >= SASL_MECH_NONE && mech <= SASL_MECH_SCRAM_SHA_512);
	return mech_names[mech];
}

/* ---- PLAIN ---- */

enum keel_err sasl_plain_check(const struct sasl_users *users, const void *msg, size_t size,
			       char user[SASL_NAME_MAX + 1], const char **why)
{
	const char *p = msg;
	const char *nul1 = memchr(p, '\0', size);
	const char *nul2 = nul1 != NULL ? memchr(nul1 + 1, '\0', size - (size_t)(nul1 + 1 - p))
					: NULL;
	if (nul2 == NULL) {
		*why = "the PLAIN message is not authzid NUL user NUL password";
		return KEEL_AUTH;
	}
	size_t authzid_size = (size_t)(nul1 - p);
	const char *name = nul1 + 1;
	size_t name_size = (size_t)(nul2 - name);
	const char *password = nul2 + 1;
	size_t password_size = size - (size_t)(password - p);
	if (authzid_size != 0 &&
	    (authzid_size != name_size || memcmp(p, name, name_size) != 0)) {
		*why = "the authorization id is not the user";
		return KEEL_AUTH;
	}
	const struct sasl_user *u = sasl_users_find(users, name, name_size);
	if (u == NULL) {
		*why = "no such user";
		return KEEL_AUTH;
	}
	if (!sasl_bytes_equal(u->password, u->password_size, password, password_size)) {
		*why = "wrong password";
		return KEEL_AUTH;
	}
	memcpy(user, u->name, u->name_size + 1);
	return KEEL_OK;
}

/* ---- base64 ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t sasl_base64_encode(const uint8_t *in, size_t size, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < size; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		if (i + 1 < size) {
			v |= (uint32_t)in[i + 1] << 8;
		}
		if (i + 2 < size) {
			v |= in[i + 2];
		}
		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < size ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < size ? b64[v & 63] : '=';
	}
	return o;
}

static int b64_value(char c)
{
	const char *p = c != '\0' ? strchr(b64, c) : NULL;
	return p != NULL ? (int)(p - b64) : -1;
}

bool sasl_base64_decode(const char *in, size_t size, uint8_t *out, size_t max, size_t *out_size)
{
	if (size % 4 != 0) {
		return false;
	}
	size_t o = 0;
	for (size_t i = 0; i < size; i += 4) {
		bool last = i + 4 == size;
		int pad = (in[i + 3] == '=') + (in[i + 2] == '=' && in[i + 3] == '=');
		if (pad > 0 && !last) {
			return false;
		}
		uint32_t v = 0;
		for (int k = 0; k < 4 - pad; k++) {
			int d = b64_value(in[i + (size_t)k]);
			if (d < 0) {
				return false;
			}
			v |= (uint32_t)d << (18 - 6 * k);
		}
		size_t n = 3u - (size_t)pad;
		if (o + n > max) {
			return false;
		}
		for (size_t k = 0; k < n; k++) {
			out[o++] = (uint8_t)(v >> (16 - 8 * k));
		}
		/* Canonical: the bits under the padding are zero. */
		if ((pad == 1 && (v & 0xff) != 0) || (pad == 2 && (v & 0xffff) != 0)) {
			return false;
		}
	}
	*out_size = o;
	return true;
}

/* ---- SCRAM ---- */

static const EVP_MD *md_of(enum sasl_mech mech)
{
	return mech == SASL_MECH_SCRAM_SHA_512 ? EVP_sha512() : EVP_sha256();
}

static size_t md_size(enum sasl_mech mech)
{
	return mech == SASL_MECH_SCRAM_SHA_512 ? 64u : 32u;
}

static void hmac(enum sasl_mech mech, const void *key, size_t key_size, const void *msg,
		 size_t size, uint8_t *out)
{
	unsigned int n = 0;
	uint8_t *r = HMAC(md_of(mech), key, (int)key_size, msg, size, out, &n);
	KEEL_ASSERT(r != NULL);
	KEEL_ASSERT(n == md_size(mech));
}

static void hash(enum sasl_mech mech, const void *msg, size_t size, uint8_t *out)
{
	unsigned int n = 0;
	int ok = EVP_Digest(msg, size, out, &n, md_of(mech), NULL);
	KEEL_ASSERT(ok == 1);
	KEEL_ASSERT(n == md_size(mech));
}

void sasl_scram_server_init(struct sasl_scram_server *s, enum sasl_mech mech,
			    const uint8_t key[SASL_SCRAM_KEY_BYTES])
{
	KEEL_ASSERT(mech == SASL_MECH_SCRAM_SHA_256 || mech == SASL_MECH_SCRAM_SHA_512);
	memset(s, 0, sizeof(*s));
	s->mech = mech;
	s->state = SASL_SCRAM_START;
	memcpy(s->key, key, SASL_SCRAM_KEY_BYTES);
}

static enum keel_err fail(struct sasl_scram_server *s, const char *why)
{
	s->state = SASL_SCRAM_FAILED;
	s->why = why;
	OPENSSL_cleanse(s->salted, sizeof(s->salted));
	return KEEL_AUTH;
}

/* Splits off the next ','-separated field of [*pos, size). */
static bool next_field(const char *m, size_t size, size_t *pos, const char **f, size_t *f_size)
{
	if (*pos > size) {
		return false;
	}
	const char *start = m + *pos;
	const char *comma = memchr(start, ',', size - *pos);
	*f = start;
	*f_size = comma != NULL ? (size_t)(comma - start) : size - *pos;
	*pos += *f_size + 1;
	return true;
}

static bool field_is(const char *f, size_t f_size, char attr)
{
	return f_size >= 2 && f[0] == attr && f[1] == '=';
}

/* saslname -> user name: "=2C" is ',', "=3D" is '='; any other '=' is
 * invalid. */
static bool decode_saslname(const char *in, size_t size, char *out, size_t max, size_t *out_size)
{
	size_t o = 0;
	for (size_t i = 0; i < size; i++) {
		char c = in[i];
		if (c == '=') {
			if (i + 2 >= size) {
				return false;
			}
			if (in[i + 1] == '2' && in[i + 2] == 'C') {
				c = ',';
			} else if (in[i + 1] == '3' && in[i + 2] == 'D') {
				c = '=';
			} else {
				return false;
			}
			i += 2;
		}
		if (o >= max) {
			return false;
		}
		out[o++] = c;
	}
	*out_size = o;
	return true;
}

static bool printable_nonce(const char *n, size_t size)
{
	if (size == 0) {
		return false;
	}
	for (size_t i = 0; i < size; i++) {
		if (n[i] < 0x21 || n[i] > 0x7e || n[i] == ',') {
			return false;
		}
	}
	return true;
}

static void derive_salt(const struct sasl_scram_server *s, uint8_t salt[SASL_SCRAM_SALT_BYTES])
{
	uint8_t msg[64 + SASL_NAME_MAX];
	const char *mech = sasl_mech_name(s->mech);
	size_t n = strlen(mech);
	memcpy(msg, mech, n);
	msg[n++] = 0;
	memcpy(msg + n, s->user, s->user_size);
	n += s->user_size;
	uint8_t mac[32];
	unsigned int len = 0;
	uint8_t *r = HMAC(EVP_sha256(), s->key, SASL_SCRAM_KEY_BYTES, msg, n, mac, &len);
	KEEL_ASSERT(r != NULL);
	memcpy(salt, mac, SASL_SCRAM_SALT_BYTES);
}

static void put(struct keel_wbuf *w, const char *s, size_t n)
{
	keel_wbuf_bytes(w, s, n);
}

/* client-first: "gs2-header n=USER,r=CNONCE[,ext...]". Sets s->gs2 and
 * s->user, *bare_at (where client-first-bare starts) and the r= field;
 * returns NULL, or why it is refused. */
static const char *parse_client_first(struct sasl_scram_server *s, const char *m, size_t size,
				      size_t *bare_at, const char **cnonce, size_t *cnonce_size)
{
	size_t pos = 0;
	const char *f;
	size_t fs;
	/* gs2-header: cbind-flag "," [authzid] "," */
	if (!next_field(m, size, &pos, &f, &fs) || fs != 1 || (f[0] != 'n' && f[0] != 'y')) {
		return "channel binding is not supported (gs2 flag must be n or y)";
	}
	const char *authzid;
	size_t authzid_size;
	if (!next_field(m, size, &pos, &authzid, &authzid_size) ||
	    (authzid_size != 0 && !field_is(authzid, authzid_size, 'a'))) {
		return "malformed gs2 header";
	}
	if (pos > size) {
		return "malformed client-first message";
	}
	s->gs2_size = pos;
	memcpy(s->gs2, m, pos);
	*bare_at = pos;
	if (!next_field(m, size, &pos, &f, &fs) || !field_is(f, fs, 'n') ||
	    !decode_saslname(f + 2, fs - 2, s->user, SASL_NAME_MAX, &s->user_size)) {
		return "malformed user name";
	}
	s->user[s->user_size] = '\0';
	if (authzid_size != 0) {
		char az[SASL_NAME_MAX + 1];
		size_t az_size = 0;
		if (!decode_saslname(authzid + 2, authzid_size - 2, az, SASL_NAME_MAX, &az_size) ||
		    az_size != s->user_size || memcmp(az, s->user, az_size) != 0) {
			return "the authorization id is not the user";
		}
	}
	if (!next_field(m, size, &pos, cnonce, cnonce_size) ||
	    !field_is(*cnonce, *cnonce_size, 'r') ||
	    !printable_nonce(*cnonce + 2, *cnonce_size - 2)) {
		return "malformed client nonce";
	}
	while (pos <= size && next_field(m, size, &pos, &f, &fs)) {
		if (fs >= 10 && memcmp(f, "tokenauth=", 10) == 0) {
			return "delegation tokens are not supported";
		}
	}
	return NULL;
}

static enum keel_err client_first(struct sasl_scram_server *s, const struct sasl_users *users,
				  const char *m, size_t size,
				  const uint8_t random[SASL_SCRAM_NONCE_BYTES], struct keel_wbuf *out)
{
	size_t bare_at = 0;
	const char *cnonce = NULL;
	size_t cnonce_size = 0;
	const char *why = parse_client_first(s, m, size, &bare_at, &cnonce, &cnonce_size);
	if (why != NULL) {
		return fail(s, why);
	}
	const char *bare = m + bare_at;
	size_t bare_size = size - bare_at;
	const struct sasl_user *u = sasl_users_find(users, s->user, s->user_size);
	if (u == NULL) {
		return fail(s, "no such user");
	}

	uint8_t salt[SASL_SCRAM_SALT_BYTES];
	const uint8_t *salt_p = salt;
	size_t salt_size = sizeof(salt);
	if (s->test_salt != NULL) {
		salt_p = s->test_salt;
		salt_size = s->test_salt_size;
	} else {
		derive_salt(s, salt);
	}
	char snonce[64];
	size_t snonce_size;
	if (s->test_server_nonce != NULL) {
		snonce_size = strlen(s->test_server_nonce);
		KEEL_ASSERT(snonce_size < sizeof(snonce));
		memcpy(snonce, s->test_server_nonce, snonce_size);
	} else {
		snonce_size = sasl_base64_encode(random, SASL_SCRAM_NONCE_BYTES, snonce);
	}
	s->nonce_size = cnonce_size - 2 + snonce_size;
	if (s->nonce_size > sizeof(s->nonce)) {
		return fail(s, "the client nonce is too long");
	}
	memcpy(s->nonce, cnonce + 2, cnonce_size - 2);
	s->cnonce_size = cnonce_size - 2;
	memcpy(s->nonce + cnonce_size - 2, snonce, snonce_size);

	int ok = PKCS5_PBKDF2_HMAC(u->password, (int)u->password_size, salt_p, (int)salt_size,
				   (int)SASL_SCRAM_ITERATIONS, md_of(s->mech), (int)md_size(s->mech),
				   s->salted);
	KEEL_ASSERT(ok == 1);

	/* server-first, and the auth message so far. */
	char salt64[SASL_SCRAM_MSG_MAX];
	size_t salt64_size = sasl_base64_encode(salt_p, salt_size, salt64);
	char iters[16];
	size_t iters_size = 0;
	for (uint32_t v = SASL_SCRAM_ITERATIONS, d = 1000000000u; d > 0; d /= 10) {
		if (v / d != 0 || iters_size > 0 || d == 1) {
			iters[iters_size++] = (char)('0' + (v / d) % 10);
		}
	}
	struct keel_wbuf am;
	keel_wbuf_init_fixed(&am, s->auth_message, sizeof(s->auth_message));
	put(&am, bare, bare_size);
	put(&am, ",", 1);
	size_t first_at = am.size;
	put(&am, "r=", 2);
	put(&am, s->nonce, s->nonce_size);
	put(&am, ",s=", 3);
	put(&am, salt64, salt64_size);
	put(&am, ",i=", 3);
	put(&am, iters, iters_size);
	if (!keel_wbuf_ok(&am)) {
		return fail(s, "the client-first message is too long");
	}
	s->auth_message_size = am.size;
	put(out, s->auth_message + first_at, am.size - first_at);
	s->state = SASL_SCRAM_SENT_FIRST;
	return KEEL_OK;
}

/* RFC 5802 3: the proof is ClientKey XOR HMAC(StoredKey, AuthMessage);
 * recover ClientKey from it and check that H(ClientKey) is StoredKey. */
static bool proof_matches(const struct sasl_scram_server *s, const uint8_t *proof,
			  size_t auth_message_size)
{
	size_t hs = md_size(s->mech);
	uint8_t client_key[SASL_SCRAM_HASH_MAX];
	uint8_t stored_key[SASL_SCRAM_HASH_MAX];
	uint8_t signature[SASL_SCRAM_HASH_MAX];
	uint8_t recovered[SASL_SCRAM_HASH_MAX];
	uint8_t recovered_stored[SASL_SCRAM_HASH_MAX];
	hmac(s->mech, s->salted, hs, "Client Key", 10, client_key);
	hash(s->mech, client_key, hs, stored_key);
	hmac(s->mech, stored_key, hs, s->auth_message, auth_message_size, signature);
	for (size_t i = 0; i < hs; i++) {
		recovered[i] = (uint8_t)(proof[i] ^ signature[i]);
	}
	hash(s->mech, recovered, hs, recovered_stored);
	OPENSSL_cleanse(client_key, sizeof(client_key));
	OPENSSL_cleanse(recovered, sizeof(recovered));
	return sasl_bytes_equal(recovered_stored, hs, stored_key, hs);
}

/* The client-final nonce is the server-first one (RFC 5802), or, from
 * librdkafka, the client nonce followed by it (Kafka's server accepts any
 * nonce that ends with its own; we accept just these two forms). */
static bool nonce_echoed(const struct sasl_scram_server *s, const char *r, size_t size)
{
	if (size == s->nonce_size) {
		return memcmp(r, s->nonce, size) == 0;
	}
	return size == s->cnonce_size + s->nonce_size &&
	       memcmp(r, s->nonce, s->cnonce_size) == 0 &&
	       memcmp(r + s->cnonce_size, s->nonce, s->nonce_size) == 0;
}

static enum keel_err client_final(struct sasl_scram_server *s, const char *m, size_t size,
				  struct keel_wbuf *out)
{
	size_t pos = 0;
	const char *c;
	size_t c_size;
	const char *r;
	size_t r_size;
	if (!next_field(m, size, &pos, &c, &c_size) || !field_is(c, c_size, 'c') ||
	    !next_field(m, size, &pos, &r, &r_size) || !field_is(r, r_size, 'r')) {
		return fail(s, "malformed client-final message");
	}
	/* c= is base64 of the gs2 header (no channel binding data). */
	uint8_t gs2[SASL_SCRAM_MSG_MAX];
	size_t gs2_size = 0;
	if (!sasl_base64_decode(c + 2, c_size - 2, gs2, sizeof(gs2), &gs2_size) ||
	    gs2_size != s->gs2_size || memcmp(gs2, s->gs2, gs2_size) != 0) {
		return fail(s, "channel binding data is not the gs2 header");
	}
	if (!nonce_echoed(s, r + 2, r_size - 2)) {
		return fail(s, "the nonce is not this exchange's");
	}
	/* Extensions may follow; the proof is last. */
	const char *p = NULL;
	size_t p_size = 0;
	size_t without_proof = 0;
	const char *f;
	size_t fs;
	while (pos <= size) {
		size_t at = pos;
		if (!next_field(m, size, &pos, &f, &fs)) {
			break;
		}
		if (field_is(f, fs, 'p')) {
			p = f;
			p_size = fs;
			without_proof = at - 1;
			if (pos <= size) {
				return fail(s, "the proof is not the last attribute");
			}
		}
	}
	if (p == NULL) {
		return fail(s, "the client-final message has no proof");
	}
	uint8_t proof[SASL_SCRAM_HASH_MAX];
	size_t proof_size = 0;
	size_t hs = md_size(s->mech);
	if (!sasl_base64_decode(p + 2, p_size - 2, proof, sizeof(proof), &proof_size) ||
	    proof_size != hs) {
		return fail(s, "malformed proof");
	}
	struct keel_wbuf am;
	keel_wbuf_init_fixed(&am, s->auth_message, sizeof(s->auth_message));
	am.size = s->auth_message_size;
	put(&am, ",", 1);
	put(&am, m, without_proof);
	if (!keel_wbuf_ok(&am)) {
		return fail(s, "the client-final message is too long");
	}
	if (!proof_matches(s, proof, am.size)) {
		return fail(s, "wrong password");
	}
	uint8_t server_key[SASL_SCRAM_HASH_MAX];
	uint8_t server_sig[SASL_SCRAM_HASH_MAX];
	hmac(s->mech, s->salted, hs, "Server Key", 10, server_key);
	hmac(s->mech, server_key, hs, s->auth_message, am.size, server_sig);
	OPENSSL_cleanse(s->salted, sizeof(s->salted));
	char v[2 * SASL_SCRAM_HASH_MAX];
	size_t v_size = sasl_base64_encode(server_sig, hs, v);
	put(out, "v=", 2);
	put(out, v, v_size);
	s->state = SASL_SCRAM_DONE;
	return KEEL_OK;
}

enum keel_err sasl_scram_step(struct sasl_scram_server *s, const struct sasl_users *users,
			      const void *msg, size_t size,
			      const uint8_t random[SASL_SCRAM_NONCE_BYTES], struct keel_wbuf *out)
{
	if (size > SASL_SCRAM_MSG_MAX || memchr(msg, '\0', size) != NULL) {
		return fail(s, "malformed SCRAM message");
	}
	switch (s->state) {
	case SASL_SCRAM_START:
		return client_first(s, users, msg, size, random, out);
	case SASL_SCRAM_SENT_FIRST:
		return client_final(s, msg, size, out);
	case SASL_SCRAM_DONE:
		return fail(s, "SCRAM authentication already completed");
	case SASL_SCRAM_FAILED:
	default:
		return fail(s, s->why != NULL ? s->why : "the exchange failed");
	}
}

/* ---- SCRAM, client side ---- */

static enum keel_err client_fail(struct sasl_scram_client *c, const char *why)
{
	c->why = why;
	return KEEL_AUTH;
}

enum keel_err sasl_scram_client_first(struct sasl_scram_client *c, enum sasl_mech mech,
				      const char *user, const uint8_t random[SASL_SCRAM_NONCE_BYTES],
				      struct keel_wbuf *out)
{
	KEEL_ASSERT(mech == SASL_MECH_SCRAM_SHA_256 || mech == SASL_MECH_SCRAM_SHA_512);
	memset(c, 0, sizeof(*c));
	c->mech = mech;
	c->cnonce_size = sasl_base64_encode(random, SASL_SCRAM_NONCE_BYTES, c->cnonce);
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, c->first_bare, sizeof(c->first_bare));
	put(&w, "n=", 2);
	for (const char *p = user; *p != '\0'; p++) {
		if (*p == ',') {
			put(&w, "=2C", 3);
		} else if (*p == '=') {
			put(&w, "=3D", 3);
		} else {
			put(&w, p, 1);
		}
	}
	put(&w, ",r=", 3);
	put(&w, c->cnonce, c->cnonce_size);
	if (!keel_wbuf_ok(&w)) {
		return client_fail(c, "the user name is too long");
	}
	c->first_bare_size = w.size;
	put(out, "n,,", 3);
	put(out, c->first_bare, c->first_bare_size);
	return KEEL_OK;
}

enum keel_err sasl_scram_client_final(struct sasl_scram_client *c, const char *password,
				      size_t password_size, const void *server_first, size_t size,
				      struct keel_wbuf *out)
{
	const char *m = server_first;
	if (size > SASL_SCRAM_MSG_MAX || memchr(m, '\0', size) != NULL) {
		return client_fail(c, "malformed server-first message");
	}
	size_t pos = 0;
	const char *r, *s64, *it;
	size_t r_size, s_size, it_size;
	if (!next_field(m, size, &pos, &r, &r_size) || !field_is(r, r_size, 'r') ||
	    !next_field(m, size, &pos, &s64, &s_size) || !field_is(s64, s_size, 's') ||
	    !next_field(m, size, &pos, &it, &it_size) || !field_is(it, it_size, 'i')) {
		return client_fail(c, "malformed server-first message");
	}
	if (r_size - 2 <= c->cnonce_size || memcmp(r + 2, c->cnonce, c->cnonce_size) != 0 ||
	    !printable_nonce(r + 2, r_size - 2)) {
		return client_fail(c, "the server nonce does not extend ours");
	}
	uint8_t salt[SASL_SCRAM_MSG_MAX];
	size_t salt_size = 0;
	if (!sasl_base64_decode(s64 + 2, s_size - 2, salt, sizeof(salt), &salt_size) ||
	    salt_size == 0) {
		return client_fail(c, "malformed salt");
	}
	uint32_t iterations = 0;
	for (size_t i = 2; i < it_size; i++) {
		if (it[i] < '0' || it[i] > '9' || iterations > SASL_SCRAM_CLIENT_MAX_ITERATIONS) {
			return client_fail(c, "malformed iteration count");
		}
		iterations = iterations * 10 + (uint32_t)(it[i] - '0');
	}
	if (iterations < SASL_SCRAM_ITERATIONS || iterations > SASL_SCRAM_CLIENT_MAX_ITERATIONS) {
		return client_fail(c, "iteration count out of range");
	}
	size_t hs = md_size(c->mech);
	uint8_t salted[SASL_SCRAM_HASH_MAX];
	int ok = PKCS5_PBKDF2_HMAC(password, (int)password_size, salt, (int)salt_size,
				   (int)iterations, md_of(c->mech), (int)hs, salted);
	KEEL_ASSERT(ok == 1);
	/* AuthMessage = client-first-bare "," server-first "," without-proof */
	char am[3 * SASL_SCRAM_MSG_MAX + 64];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, am, sizeof(am));
	put(&w, c->first_bare, c->first_bare_size);
	put(&w, ",", 1);
	put(&w, m, size);
	put(&w, ",", 1);
	size_t final_at = w.size;
	put(&w, "c=biws,", 7);
	put(&w, r, r_size);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	uint8_t client_key[SASL_SCRAM_HASH_MAX], stored_key[SASL_SCRAM_HASH_MAX];
	uint8_t signature[SASL_SCRAM_HASH_MAX], server_key[SASL_SCRAM_HASH_MAX];
	hmac(c->mech, salted, hs, "Client Key", 10, client_key);
	hash(c->mech, client_key, hs, stored_key);
	hmac(c->mech, stored_key, hs, am, w.size, signature);
	hmac(c->mech, salted, hs, "Server Key", 10, server_key);
	hmac(c->mech, server_key, hs, am, w.size, c->server_signature);
	OPENSSL_cleanse(salted, sizeof(salted));
	uint8_t proof[SASL_SCRAM_HASH_MAX];
	for (size_t i = 0; i < hs; i++) {
		proof[i] = (uint8_t)(client_key[i] ^ signature[i]);
	}
	OPENSSL_cleanse(client_key, sizeof(client_key));
	char p64[2 * SASL_SCRAM_HASH_MAX];
	size_t p64_size = sasl_base64_encode(proof, hs, p64);
	put(out, am + final_at, w.size - final_at);
	put(out, ",p=", 3);
	put(out, p64, p64_size);
	c->final_sent = true;
	return KEEL_OK;
}

enum keel_err sasl_scram_client_verify(struct sasl_scram_client *c, const void *server_final,
				       size_t size)
{
	const char *m = server_final;
	if (!c->final_sent) {
		return client_fail(c, "no client-final message was sent");
	}
	if (size < 2 || m[0] != 'v' || m[1] != '=') {
		return client_fail(c, "the server-final message has no verifier");
	}
	size_t end = 2;
	while (end < size && m[end] != ',') {
		end++;
	}
	uint8_t v[SASL_SCRAM_HASH_MAX + 3];
	size_t v_size = 0;
	size_t hs = md_size(c->mech);
	if (!sasl_base64_decode(m + 2, end - 2, v, sizeof(v), &v_size) ||
	    !sasl_bytes_equal(v, v_size, c->server_signature, hs)) {
		return client_fail(c, "the server signature is wrong (the server does not know the "
				      "password)");
	}
	return KEEL_OK;
}
