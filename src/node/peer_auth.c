/* peer_auth.c — cluster secret, peer handshake and operator proof (see
 * peer_auth.h for the protocol and its byte layout). */
#include "node/peer_auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/assert.h"
#include "os/log.h"

#define PEER_LABEL "keel-peer-auth-v2"
#define ADMIN_LABEL "keel-admin-auth-v2"
#define SESSION_LABEL "keel-session-auth-v1"
#define SECRET_FILE_MAX 4096

/* ---- secrets ---- */

static int hex_value(char c)
{
	if (c >= '0' && c <= '9') {
		return c - '0';
	}
	if (c >= 'a' && c <= 'f') {
		return c - 'a' + 10;
	}
	if (c >= 'A' && c <= 'F') {
		return c - 'A' + 10;
	}
	return -1;
}

static enum keel_err parse_line(const char *s, size_t len, struct peer_auth_key *key, char *err,
				size_t err_size, int lineno)
{
	if (len % 2 != 0 || len / 2 < PEER_AUTH_SECRET_MIN_SIZE ||
	    len / 2 > PEER_AUTH_SECRET_MAX_SIZE) {
		snprintf(err, err_size,
			 "secret on line %d: want %d to %d bytes as hex digits (keel secret generate)",
			 lineno, PEER_AUTH_SECRET_MIN_SIZE, PEER_AUTH_SECRET_MAX_SIZE);
		return KEEL_CONFIG;
	}
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hex_value(s[2 * i]);
		int lo = hex_value(s[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			snprintf(err, err_size, "secret on line %d: not a hex digit", lineno);
			return KEEL_CONFIG;
		}
		key->bytes[i] = (uint8_t)(hi * 16 + lo);
	}
	key->size = len / 2;
	return KEEL_OK;
}

enum keel_err peer_auth_parse_secret(const char *text, size_t size, struct peer_auth_keys *keys,
				     char *err, size_t err_size)
{
	memset(keys, 0, sizeof(*keys));
	size_t pos = 0;
	int lineno = 0;
	while (pos < size) {
		size_t end = pos;
		while (end < size && text[end] != '\n') {
			end++;
		}
		lineno++;
		size_t b = pos;
		size_t e = end;
		while (b < e && (text[b] == ' ' || text[b] == '\t' || text[b] == '\r')) {
			b++;
		}
		while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r')) {
			e--;
		}
		pos = end + 1;
		if (b == e || text[b] == '#') {
			continue;
		}
		if (keys->count == PEER_AUTH_KEYS_MAX) {
			snprintf(err, err_size,
				 "more than %d secrets (want the current one and at most one previous)",
				 PEER_AUTH_KEYS_MAX);
			return KEEL_CONFIG;
		}
		enum keel_err rc = parse_line(text + b, e - b, &keys->key[keys->count], err,
					      err_size, lineno);
		if (rc != KEEL_OK) {
			return rc;
		}
		keys->count++;
	}
	if (keys->count == 0) {
		snprintf(err, err_size, "no secret in the file (make one with `keel secret generate`)");
		return KEEL_CONFIG;
	}
	return KEEL_OK;
}

enum keel_err peer_auth_load_file(const char *path, struct peer_auth_keys *keys, char *err,
				  size_t err_size)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, err_size, "cannot open secret file %s: %s", path, strerror(errno));
		return KEEL_CONFIG;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077) != 0) {
		KEEL_WARN("secret file %s can be read by other users: chmod 600 it", path);
	}
	char text[SECRET_FILE_MAX];
	size_t n = fread(text, 1, sizeof(text), f);
	bool too_big = n == sizeof(text);
	fclose(f);
	if (too_big) {
		snprintf(err, err_size, "secret file %s is larger than %d bytes", path,
			 SECRET_FILE_MAX - 1);
		return KEEL_CONFIG;
	}
	char msg[256];
	enum keel_err rc = peer_auth_parse_secret(text, n, keys, msg, sizeof(msg));
	OPENSSL_cleanse(text, sizeof(text));
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "%s: %s", path, msg);
	}
	return rc;
}

enum keel_err peer_auth_random(void *out, size_t size)
{
	KEEL_ASSERT(size <= (size_t)INT32_MAX);
	return RAND_bytes(out, (int)size) == 1 ? KEEL_OK : KEEL_IO;
}

void peer_auth_hex(const uint8_t *bytes, size_t size, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < size; i++) {
		out[2 * i] = digits[bytes[i] >> 4];
		out[2 * i + 1] = digits[bytes[i] & 15];
	}
	out[2 * size] = '\0';
}

/* ---- MACs ---- */

static const struct peer_auth_key empty_key;

static const struct peer_auth_key *key_at(const struct peer_auth_keys *keys, size_t i)
{
	return keys->count == 0 ? &empty_key : &keys->key[i];
}

static size_t key_count(const struct peer_auth_keys *keys)
{
	return keys->count == 0 ? 1 : keys->count;
}

static void hmac(const struct peer_auth_key *key, const uint8_t *msg, size_t size,
		 uint8_t out[PEER_AUTH_MAC_SIZE])
{
	unsigned int len = 0;
	/* A non-NULL pointer even for the empty key: OpenSSL reads NULL as
	 * "reuse the previous key". */
	const uint8_t *k = key->bytes;
	uint8_t *r = HMAC(EVP_sha256(), k, (int)key->size, msg, size, out, &len);
	KEEL_ASSERT(r != NULL);
	KEEL_ASSERT(len == PEER_AUTH_MAC_SIZE);
}

void peer_auth_mac(const struct peer_auth_key *key, enum peer_auth_role role, uint64_t dialer,
		   uint64_t acceptor, const uint8_t nonce_dialer[PEER_AUTH_NONCE_SIZE],
		   const uint8_t nonce_acceptor[PEER_AUTH_NONCE_SIZE],
		   uint8_t out[PEER_AUTH_MAC_SIZE])
{
	uint8_t msg[sizeof(PEER_LABEL) - 1 + 1 + 16 + 2 * PEER_AUTH_NONCE_SIZE];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, msg, sizeof(msg));
	keel_wbuf_bytes(&w, PEER_LABEL, sizeof(PEER_LABEL) - 1);
	keel_wbuf_u8(&w, (uint8_t)role);
	keel_wbuf_u64(&w, dialer);
	keel_wbuf_u64(&w, acceptor);
	keel_wbuf_bytes(&w, nonce_dialer, PEER_AUTH_NONCE_SIZE);
	keel_wbuf_bytes(&w, nonce_acceptor, PEER_AUTH_NONCE_SIZE);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	KEEL_ASSERT(w.size == sizeof(msg));
	hmac(key, msg, sizeof(msg), out);
}

/* True when `mac` is role's MAC under any accepted key (constant time per key). */
static bool verify_role(const struct peer_auth_keys *keys, const struct peer_handshake *hs,
			enum peer_auth_role role, uint64_t dialer, uint64_t acceptor,
			const uint8_t mac[PEER_AUTH_MAC_SIZE])
{
	bool ok = false;
	for (size_t i = 0; i < key_count(keys); i++) {
		uint8_t want[PEER_AUTH_MAC_SIZE];
		peer_auth_mac(key_at(keys, i), role, dialer, acceptor, hs->nonce_dialer,
			      hs->nonce_acceptor, want);
		if (CRYPTO_memcmp(want, mac, PEER_AUTH_MAC_SIZE) == 0) {
			ok = true;
		}
	}
	return ok;
}

static void admin_mac_key(const struct peer_auth_key *key, uint64_t server_id,
			  const uint8_t server_nonce[PEER_AUTH_NONCE_SIZE],
			  const uint8_t client_nonce[PEER_AUTH_NONCE_SIZE],
			  uint8_t out[PEER_AUTH_MAC_SIZE])
{
	uint8_t msg[sizeof(ADMIN_LABEL) - 1 + 8 + 2 * PEER_AUTH_NONCE_SIZE];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, msg, sizeof(msg));
	keel_wbuf_bytes(&w, ADMIN_LABEL, sizeof(ADMIN_LABEL) - 1);
	keel_wbuf_u64(&w, server_id);
	keel_wbuf_bytes(&w, server_nonce, PEER_AUTH_NONCE_SIZE);
	keel_wbuf_bytes(&w, client_nonce, PEER_AUTH_NONCE_SIZE);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	KEEL_ASSERT(w.size == sizeof(msg));
	hmac(key, msg, sizeof(msg), out);
}

void peer_auth_admin_mac(const struct peer_auth_keys *keys, uint64_t server_id,
			 const uint8_t server_nonce[PEER_AUTH_NONCE_SIZE],
			 const uint8_t client_nonce[PEER_AUTH_NONCE_SIZE],
			 uint8_t out[PEER_AUTH_MAC_SIZE])
{
	admin_mac_key(key_at(keys, 0), server_id, server_nonce, client_nonce, out);
}

bool peer_auth_admin_verify(const struct peer_auth_keys *keys, uint64_t server_id,
			    const uint8_t server_nonce[PEER_AUTH_NONCE_SIZE],
			    const uint8_t client_nonce[PEER_AUTH_NONCE_SIZE],
			    const uint8_t mac[PEER_AUTH_MAC_SIZE])
{
	bool ok = false;
	for (size_t i = 0; i < keys->count; i++) {
		uint8_t want[PEER_AUTH_MAC_SIZE];
		admin_mac_key(&keys->key[i], server_id, server_nonce, client_nonce, want);
		if (CRYPTO_memcmp(want, mac, PEER_AUTH_MAC_SIZE) == 0) {
			ok = true;
		}
	}
	return ok; /* no secret: no operator can prove anything with one */
}

/* The session credential: one MAC over the session's id and password. */
static void session_mac_key(const struct peer_auth_key *key, uint64_t session_id,
			    const uint8_t passwd[PEER_AUTH_SESSION_PASSWD_SIZE],
			    uint8_t out[PEER_AUTH_MAC_SIZE])
{
	uint8_t msg[sizeof(SESSION_LABEL) - 1 + 8 + PEER_AUTH_SESSION_PASSWD_SIZE];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, msg, sizeof(msg));
	keel_wbuf_bytes(&w, SESSION_LABEL, sizeof(SESSION_LABEL) - 1);
	keel_wbuf_u64(&w, session_id);
	keel_wbuf_bytes(&w, passwd, PEER_AUTH_SESSION_PASSWD_SIZE);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	KEEL_ASSERT(w.size == sizeof(msg));
	hmac(key, msg, sizeof(msg), out);
}

void peer_auth_session_mac(const struct peer_auth_keys *keys, uint64_t session_id,
			   const uint8_t passwd[PEER_AUTH_SESSION_PASSWD_SIZE],
			   uint8_t out[PEER_AUTH_MAC_SIZE])
{
	session_mac_key(key_at(keys, 0), session_id, passwd, out);
}

bool peer_auth_session_verify(const struct peer_auth_keys *keys, uint64_t session_id,
			      const uint8_t passwd[PEER_AUTH_SESSION_PASSWD_SIZE],
			      const uint8_t *mac, size_t mac_size)
{
	bool ok = false;
	for (size_t i = 0; mac_size == PEER_AUTH_MAC_SIZE && i < keys->count; i++) {
		uint8_t want[PEER_AUTH_MAC_SIZE];
		session_mac_key(&keys->key[i], session_id, passwd, want);
		if (CRYPTO_memcmp(want, mac, PEER_AUTH_MAC_SIZE) == 0) {
			ok = true;
		}
	}
	return ok;
}

/* ---- the handshake ---- */

void peer_hs_dial(struct peer_handshake *hs, uint64_t self_id, uint64_t remote_id,
		  const char *self_addr, const uint8_t nonce[PEER_AUTH_NONCE_SIZE],
		  struct keel_wbuf *w)
{
	memset(hs, 0, sizeof(*hs));
	hs->role = PEER_AUTH_ROLE_DIALER;
	hs->self_id = self_id;
	hs->remote_id = remote_id;
	memcpy(hs->nonce_dialer, nonce, PEER_AUTH_NONCE_SIZE);
	size_t alen = strlen(self_addr);
	KEEL_ASSERT(alen < PEER_AUTH_ADDR_MAX);
	keel_wbuf_u8(w, PEER_AUTH_HELLO);
	keel_wbuf_u32(w, PEER_AUTH_MAGIC);
	keel_wbuf_u16(w, PEER_AUTH_VERSION);
	keel_wbuf_u64(w, self_id);
	keel_wbuf_u64(w, remote_id);
	keel_wbuf_u16(w, (uint16_t)alen);
	keel_wbuf_bytes(w, self_addr, alen);
	keel_wbuf_bytes(w, nonce, PEER_AUTH_NONCE_SIZE);
}

enum keel_err peer_hs_accept_hello(struct peer_handshake *hs, const struct peer_auth_keys *keys,
				   uint64_t self_id, const uint8_t nonce[PEER_AUTH_NONCE_SIZE],
				   const uint8_t *frame, size_t size, peer_auth_member_fn is_member,
				   void *member_ctx, struct peer_hello_info *info,
				   struct keel_wbuf *w)
{
	memset(hs, 0, sizeof(*hs));
	memset(info, 0, sizeof(*info));
	hs->role = PEER_AUTH_ROLE_ACCEPTOR;
	hs->self_id = self_id;
	struct keel_rbuf r;
	keel_rbuf_init(&r, frame, size);
	uint8_t type = keel_rbuf_u8(&r);
	uint32_t magic = keel_rbuf_u32(&r);
	uint16_t version = keel_rbuf_u16(&r);
	info->from = keel_rbuf_u64(&r);
	info->to = keel_rbuf_u64(&r);
	uint16_t alen = keel_rbuf_u16(&r);
	const uint8_t *addr = alen < PEER_AUTH_ADDR_MAX ? keel_rbuf_bytes(&r, alen) : NULL;
	const uint8_t *nonce_d = keel_rbuf_bytes(&r, PEER_AUTH_NONCE_SIZE);
	if (!keel_rbuf_ok(&r) || addr == NULL || nonce_d == NULL || type != PEER_AUTH_HELLO ||
	    magic != PEER_AUTH_MAGIC || version != PEER_AUTH_VERSION ||
	    keel_rbuf_remaining(&r) != 0) {
		return KEEL_PROTO;
	}
	memcpy(info->addr, addr, alen);
	info->addr[alen] = '\0';
	if (memchr(info->addr, '\0', alen) != NULL) {
		return KEEL_PROTO;
	}
	if (info->to != self_id || info->from == 0 || info->from == self_id) {
		return KEEL_PROTO;
	}
	if (!is_member(member_ctx, info->from)) {
		return KEEL_AUTH;
	}
	hs->remote_id = info->from;
	memcpy(hs->nonce_dialer, nonce_d, PEER_AUTH_NONCE_SIZE);
	memcpy(hs->nonce_acceptor, nonce, PEER_AUTH_NONCE_SIZE);
	uint8_t mac[PEER_AUTH_MAC_SIZE];
	peer_auth_mac(key_at(keys, 0), PEER_AUTH_ROLE_ACCEPTOR, hs->remote_id, self_id,
		      hs->nonce_dialer, hs->nonce_acceptor, mac);
	keel_wbuf_u8(w, PEER_AUTH_CHALLENGE);
	keel_wbuf_u64(w, self_id);
	keel_wbuf_u64(w, hs->remote_id);
	keel_wbuf_bytes(w, hs->nonce_acceptor, PEER_AUTH_NONCE_SIZE);
	keel_wbuf_bytes(w, mac, PEER_AUTH_MAC_SIZE);
	hs->hello_seen = true;
	return KEEL_OK;
}

enum keel_err peer_hs_dialer_on_challenge(struct peer_handshake *hs,
					  const struct peer_auth_keys *keys, const uint8_t *frame,
					  size_t size, struct keel_wbuf *w)
{
	KEEL_ASSERT(hs->role == PEER_AUTH_ROLE_DIALER);
	if (hs->done) {
		return KEEL_PROTO;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, frame, size);
	uint8_t type = keel_rbuf_u8(&r);
	uint64_t from = keel_rbuf_u64(&r);
	uint64_t to = keel_rbuf_u64(&r);
	const uint8_t *nonce_a = keel_rbuf_bytes(&r, PEER_AUTH_NONCE_SIZE);
	const uint8_t *mac = keel_rbuf_bytes(&r, PEER_AUTH_MAC_SIZE);
	if (!keel_rbuf_ok(&r) || type != PEER_AUTH_CHALLENGE || keel_rbuf_remaining(&r) != 0 ||
	    from != hs->remote_id || to != hs->self_id) {
		return KEEL_PROTO;
	}
	memcpy(hs->nonce_acceptor, nonce_a, PEER_AUTH_NONCE_SIZE);
	if (!verify_role(keys, hs, PEER_AUTH_ROLE_ACCEPTOR, hs->self_id, hs->remote_id, mac)) {
		return KEEL_AUTH;
	}
	uint8_t proof[PEER_AUTH_MAC_SIZE];
	peer_auth_mac(key_at(keys, 0), PEER_AUTH_ROLE_DIALER, hs->self_id, hs->remote_id,
		      hs->nonce_dialer, hs->nonce_acceptor, proof);
	keel_wbuf_u8(w, PEER_AUTH_PROOF);
	keel_wbuf_bytes(w, proof, PEER_AUTH_MAC_SIZE);
	hs->done = true;
	return KEEL_OK;
}

enum keel_err peer_hs_acceptor_on_proof(struct peer_handshake *hs,
					const struct peer_auth_keys *keys, const uint8_t *frame,
					size_t size)
{
	KEEL_ASSERT(hs->role == PEER_AUTH_ROLE_ACCEPTOR);
	if (!hs->hello_seen || hs->done) {
		return KEEL_PROTO;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, frame, size);
	uint8_t type = keel_rbuf_u8(&r);
	const uint8_t *mac = keel_rbuf_bytes(&r, PEER_AUTH_MAC_SIZE);
	if (!keel_rbuf_ok(&r) || type != PEER_AUTH_PROOF || keel_rbuf_remaining(&r) != 0) {
		return KEEL_PROTO;
	}
	if (!verify_role(keys, hs, PEER_AUTH_ROLE_DIALER, hs->remote_id, hs->self_id, mac)) {
		return KEEL_AUTH;
	}
	hs->done = true;
	return KEEL_OK;
}
