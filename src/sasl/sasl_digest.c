/*
 * sasl_digest.c — SASL DIGEST-MD5, server side (sasl_digest.h).
 */
#include "sasl/sasl_digest.h"

#include <string.h>

#include <openssl/evp.h>

#include "base/assert.h"

static const char *const field_names[SDF_COUNT] = {
	[SDF_USERNAME] = "username", [SDF_REALM] = "realm",   [SDF_NONCE] = "nonce",
	[SDF_CNONCE] = "cnonce",     [SDF_NC] = "nc",         [SDF_QOP] = "qop",
	[SDF_DIGEST_URI] = "digest-uri", [SDF_RESPONSE] = "response",
	[SDF_MAXBUF] = "maxbuf",     [SDF_CHARSET] = "charset", [SDF_CIPHER] = "cipher",
	[SDF_AUTHZID] = "authzid",
};

const char *sasl_digest_field_name(enum sasl_digest_field f)
{
	KEEL_ASSERT((unsigned)f < SDF_COUNT);
	return field_names[f];
}

/* ---- parsing ---- */

static bool is_lws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_token_char(char c)
{
	/* RFC 2616 token: CHARs except CTLs and separators. */
	if ((unsigned char)c <= 32 || (unsigned char)c >= 127) {
		return false;
	}
	return strchr("()<>@,;:\\\"/[]?={}", c) == NULL;
}

static int field_of(const char *name, size_t size)
{
	for (int f = 0; f < SDF_COUNT; f++) {
		size_t n = strlen(field_names[f]);
		if (n != size) {
			continue;
		}
		size_t i = 0;
		while (i < n && (name[i] | 0x20) == field_names[f][i]) {
			i++;
		}
		if (i == n) {
			return f;
		}
	}
	return -1;
}

struct scan {
	const char *p;
	size_t size;
	size_t pos;
};

static void skip_lws(struct scan *s)
{
	while (s->pos < s->size && is_lws(s->p[s->pos])) {
		s->pos++;
	}
}

/* Reads a value (token or quoted-string) into dst (room for max + NUL). */
static bool read_value(struct scan *s, char *dst, size_t max, uint16_t *out_size)
{
	size_t n = 0;
	if (s->pos < s->size && s->p[s->pos] == '"') {
		s->pos++;
		for (;;) {
			if (s->pos >= s->size) {
				return false;
			}
			char c = s->p[s->pos++];
			if (c == '"') {
				break;
			}
			if (c == '\\') {
				if (s->pos >= s->size) {
					return false;
				}
				c = s->p[s->pos++];
			}
			if (c == '\0' || n >= max) {
				return false;
			}
			dst[n++] = c;
		}
	} else {
		while (s->pos < s->size && is_token_char(s->p[s->pos])) {
			if (n >= max) {
				return false;
			}
			dst[n++] = s->p[s->pos++];
		}
		if (n == 0) {
			return false;
		}
	}
	dst[n] = '\0';
	*out_size = (uint16_t)n;
	return true;
}

enum keel_err sasl_digest_response_parse(struct sasl_digest_response *r, const void *token,
					 size_t size)
{
	memset(r->present, 0, sizeof(r->present));
	memset(r->size, 0, sizeof(r->size));
	if (size > SASL_DIGEST_TOKEN_MAX) {
		return KEEL_PROTO;
	}
	struct scan s = {token, size, 0};
	char ignored[SASL_DIGEST_VALUE_MAX + 1];
	for (;;) {
		skip_lws(&s);
		while (s.pos < s.size && s.p[s.pos] == ',') { /* empty list elements */
			s.pos++;
			skip_lws(&s);
		}
		if (s.pos >= s.size) {
			break;
		}
		size_t name = s.pos;
		while (s.pos < s.size && is_token_char(s.p[s.pos])) {
			s.pos++;
		}
		size_t name_size = s.pos - name;
		skip_lws(&s);
		if (name_size == 0 || s.pos >= s.size || s.p[s.pos] != '=') {
			return KEEL_PROTO;
		}
		s.pos++;
		skip_lws(&s);
		int f = field_of(s.p + name, name_size);
		uint16_t n;
		if (f < 0) {
			if (!read_value(&s, ignored, SASL_DIGEST_VALUE_MAX, &n)) {
				return KEEL_PROTO;
			}
		} else {
			if (r->present[f] ||
			    !read_value(&s, r->value[f], SASL_DIGEST_VALUE_MAX, &r->size[f])) {
				return KEEL_PROTO;
			}
			r->present[f] = true;
		}
		skip_lws(&s);
		if (s.pos < s.size && s.p[s.pos] != ',') {
			return KEEL_PROTO;
		}
	}
	return KEEL_OK;
}

void sasl_digest_response_encode(const struct sasl_digest_response *r, struct keel_wbuf *w)
{
	bool first = true;
	for (int f = 0; f < SDF_COUNT; f++) {
		if (!r->present[f]) {
			continue;
		}
		if (!first) {
			keel_wbuf_bytes(w, ",", 1);
		}
		first = false;
		keel_wbuf_bytes(w, field_names[f], strlen(field_names[f]));
		keel_wbuf_bytes(w, "=\"", 2);
		for (size_t i = 0; i < r->size[f]; i++) {
			char c = r->value[f][i];
			if (c == '"' || c == '\\') {
				keel_wbuf_bytes(w, "\\", 1);
			}
			keel_wbuf_bytes(w, &c, 1);
		}
		keel_wbuf_bytes(w, "\"", 1);
	}
}

/* ---- the digest ---- */

#define MD5_SIZE 16u

static void md5(const void *data, size_t size, uint8_t out[MD5_SIZE])
{
	unsigned int n = 0;
	int ok = EVP_Digest(data, size, out, &n, EVP_md5(), NULL);
	KEEL_ASSERT(ok == 1);
	KEEL_ASSERT(n == MD5_SIZE);
}

static void hex(const uint8_t *bytes, size_t size, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < size; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * size] = '\0';
}

/* RFC 2831 2.1.2.1: with charset=utf-8, user, realm and password are hashed
 * in ISO 8859-1 when every character fits in it, as UTF-8 otherwise. */
static void put_latin1(struct keel_wbuf *w, const char *s, size_t size, bool utf8)
{
	if (utf8) {
		uint8_t tmp[SASL_PASSWORD_MAX + SASL_DIGEST_VALUE_MAX];
		size_t n = 0;
		bool fits = size <= sizeof(tmp);
		for (size_t i = 0; fits && i < size; i++) {
			uint8_t c = (uint8_t)s[i];
			if (c < 0x80) {
				tmp[n++] = c;
			} else if ((c == 0xc2 || c == 0xc3) && i + 1 < size &&
				   ((uint8_t)s[i + 1] & 0xc0) == 0x80) {
				tmp[n++] = (uint8_t)(((c & 0x03) << 6) | ((uint8_t)s[i + 1] & 0x3f));
				i++;
			} else {
				fits = false;
			}
		}
		if (fits) {
			keel_wbuf_bytes(w, tmp, n);
			return;
		}
	}
	keel_wbuf_bytes(w, s, size);
}

static void put_field(struct keel_wbuf *w, const struct sasl_digest_response *r,
		      enum sasl_digest_field f)
{
	keel_wbuf_bytes(w, r->value[f], r->present[f] ? r->size[f] : 0);
}

/* KD(HEX(H(A1)), nonce:nc:cnonce:qop:HEX(H(A2))) with A2 = prefix digest-uri. */
static void response_for(const struct sasl_digest_response *r, const char ha1_hex[33],
			 const char *a2_prefix, char out_hex[33])
{
	uint8_t buf[SASL_DIGEST_VALUE_MAX * 6];
	struct keel_wbuf w;
	uint8_t digest[MD5_SIZE];

	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	keel_wbuf_bytes(&w, a2_prefix, strlen(a2_prefix));
	put_field(&w, r, SDF_DIGEST_URI);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	md5(buf, w.size, digest);
	char ha2_hex[33];
	hex(digest, MD5_SIZE, ha2_hex);

	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	keel_wbuf_bytes(&w, ha1_hex, 32);
	keel_wbuf_bytes(&w, ":", 1);
	put_field(&w, r, SDF_NONCE);
	keel_wbuf_bytes(&w, ":", 1);
	put_field(&w, r, SDF_NC);
	keel_wbuf_bytes(&w, ":", 1);
	put_field(&w, r, SDF_CNONCE);
	keel_wbuf_bytes(&w, ":", 1);
	if (r->present[SDF_QOP]) {
		put_field(&w, r, SDF_QOP);
	} else {
		keel_wbuf_bytes(&w, "auth", 4);
	}
	keel_wbuf_bytes(&w, ":", 1);
	keel_wbuf_bytes(&w, ha2_hex, 32);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	md5(buf, w.size, digest);
	hex(digest, MD5_SIZE, out_hex);
}

void sasl_digest_compute(const struct sasl_digest_response *r, const char *password,
			 size_t password_size, char response_hex[33], char rspauth_hex[33])
{
	KEEL_ASSERT(password_size <= SASL_PASSWORD_MAX);
	bool utf8 = r->present[SDF_CHARSET] && strcmp(r->value[SDF_CHARSET], "utf-8") == 0;
	uint8_t buf[SASL_PASSWORD_MAX + SASL_DIGEST_VALUE_MAX * 4];
	struct keel_wbuf w;
	uint8_t digest[MD5_SIZE];

	/* H({username:realm:password}) */
	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	put_latin1(&w, r->value[SDF_USERNAME], r->size[SDF_USERNAME], utf8);
	keel_wbuf_bytes(&w, ":", 1);
	put_latin1(&w, r->value[SDF_REALM], r->present[SDF_REALM] ? r->size[SDF_REALM] : 0, utf8);
	keel_wbuf_bytes(&w, ":", 1);
	put_latin1(&w, password, password_size, utf8);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	md5(buf, w.size, digest);

	/* A1 = that : nonce : cnonce [: authzid] */
	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	keel_wbuf_bytes(&w, digest, MD5_SIZE);
	keel_wbuf_bytes(&w, ":", 1);
	put_field(&w, r, SDF_NONCE);
	keel_wbuf_bytes(&w, ":", 1);
	put_field(&w, r, SDF_CNONCE);
	if (r->present[SDF_AUTHZID]) {
		keel_wbuf_bytes(&w, ":", 1);
		put_field(&w, r, SDF_AUTHZID);
	}
	KEEL_ASSERT(keel_wbuf_ok(&w));
	md5(buf, w.size, digest);
	char ha1_hex[33];
	hex(digest, MD5_SIZE, ha1_hex);
	OPENSSL_cleanse(buf, sizeof(buf));

	response_for(r, ha1_hex, "AUTHENTICATE:", response_hex);
	response_for(r, ha1_hex, ":", rspauth_hex);
}

/* ---- the exchange ---- */

void sasl_digest_server_init(struct sasl_digest_server *s, struct sasl_digest_params params)
{
	memset(s, 0, sizeof(*s));
	s->state = SASL_DIGEST_START;
	s->params = params;
}

static enum keel_err fail(struct sasl_digest_server *s, const char *why)
{
	s->state = SASL_DIGEST_FAILED;
	s->why = why;
	return KEEL_AUTH;
}

static void write_challenge(struct sasl_digest_server *s, struct keel_wbuf *out)
{
	const char *parts[] = {"realm=\"", s->params.realm, "\",nonce=\"", s->nonce,
			       "\",charset=utf-8,algorithm=md5-sess"};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		keel_wbuf_bytes(out, parts[i], strlen(parts[i]));
	}
}

static bool field_is(const struct sasl_digest_response *r, enum sasl_digest_field f,
		     const char *want)
{
	return r->present[f] && strcmp(r->value[f], want) == 0;
}

/* The checks of RFC 2831 2.1.2 a server makes before the digest. */
static const char *response_problem(const struct sasl_digest_server *s,
				    const struct sasl_digest_response *r)
{
	if (!r->present[SDF_USERNAME] || !r->present[SDF_NONCE] || !r->present[SDF_CNONCE] ||
	    !r->present[SDF_NC] || !r->present[SDF_DIGEST_URI] || !r->present[SDF_RESPONSE]) {
		return "the digest-response lacks a required directive";
	}
	if (!field_is(r, SDF_NONCE, s->nonce)) {
		return "the digest-response has another nonce";
	}
	if (!field_is(r, SDF_NC, "00000001")) {
		return "nonce-count is not 00000001";
	}
	if (r->present[SDF_QOP] && !field_is(r, SDF_QOP, "auth")) {
		return "qop is not auth (the only one offered)";
	}
	if (r->present[SDF_REALM] && !field_is(r, SDF_REALM, s->params.realm)) {
		return "the digest-response names another realm";
	}
	if (!field_is(r, SDF_DIGEST_URI, s->params.digest_uri)) {
		return "digest-uri is not this service's";
	}
	if (r->present[SDF_CHARSET] && !field_is(r, SDF_CHARSET, "utf-8")) {
		return "charset is not utf-8";
	}
	return NULL;
}

static enum keel_err check_response(struct sasl_digest_server *s, const struct sasl_users *users,
				    const void *token, size_t size, struct keel_wbuf *out)
{
	struct sasl_digest_response r;
	if (sasl_digest_response_parse(&r, token, size) != KEEL_OK) {
		return fail(s, "the digest-response does not parse");
	}
	const char *problem = response_problem(s, &r);
	if (problem != NULL) {
		return fail(s, problem);
	}
	const struct sasl_user *u =
		sasl_users_find(users, r.value[SDF_USERNAME], r.size[SDF_USERNAME]);
	if (u == NULL) {
		return fail(s, "no such user");
	}
	char response_hex[33];
	char rspauth_hex[33];
	sasl_digest_compute(&r, u->password, u->password_size, response_hex, rspauth_hex);
	if (!sasl_bytes_equal(response_hex, 32, r.value[SDF_RESPONSE], r.size[SDF_RESPONSE])) {
		return fail(s, "wrong password");
	}
	KEEL_ASSERT(u->name_size < sizeof(s->user));
	memcpy(s->user, u->name, u->name_size + 1);
	s->user_size = u->name_size;
	s->state = SASL_DIGEST_DONE;
	keel_wbuf_bytes(out, "rspauth=", 8);
	keel_wbuf_bytes(out, rspauth_hex, 32);
	return KEEL_OK;
}

enum keel_err sasl_digest_step(struct sasl_digest_server *s, const struct sasl_users *users,
			       const void *token, size_t size,
			       const uint8_t random[SASL_DIGEST_NONCE_BYTES], struct keel_wbuf *out)
{
	switch (s->state) {
	case SASL_DIGEST_START:
		/* Any first token gets the challenge: DIGEST-MD5 has no initial
		 * response, and ZooKeeper's server ignores what is sent. */
		(void)token;
		(void)size;
		hex(random, SASL_DIGEST_NONCE_BYTES, s->nonce);
		write_challenge(s, out);
		s->state = SASL_DIGEST_CHALLENGED;
		return KEEL_OK;
	case SASL_DIGEST_CHALLENGED:
		return check_response(s, users, token, size, out);
	case SASL_DIGEST_DONE:
		return fail(s, "DIGEST-MD5 authentication already completed");
	case SASL_DIGEST_FAILED:
	default:
		return fail(s, s->why != NULL ? s->why : "the exchange failed");
	}
}
