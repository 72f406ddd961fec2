/*
 * admin_auth.c — who may run operator requests on the client port (the
 * AUTH_NONCE / AUTH ops of admin.h): the cluster secret, proven by
 * challenge-response (node/peer_auth.h), or ZooKeeper's super digest; or,
 * on the secure client port, a client certificate whose subject DN is
 * --x509-super-user (no AUTH op needed: the TLS handshake proved it).
 *
 *   connection --AUTH_NONCE--> nonce held --AUTH ok--> operator
 *                                         --AUTH bad--> nonce dropped
 */
#include <openssl/crypto.h>
#include <string.h>

#include "base/assert.h"
#include "node/admin.h"
#include "node/client.h"
#include "node/peer_auth.h"
#include "os/log.h"
#include "zk/zk_digest.h"

_Static_assert(sizeof(((struct node_client *)0)->admin_nonce) == PEER_AUTH_NONCE_SIZE,
	       "the admin nonce is a peer_auth nonce");

#define DIGEST_AUTH_MAX 256

static void reply(struct node_client *c, uint8_t op, uint64_t req_id, enum keel_err err,
		  const char *msg, const uint8_t *body, size_t size)
{
	size_t mark;
	struct keel_wbuf *w = net_conn_frame_begin(&c->conn, &mark);
	if (w == NULL) {
		return;
	}
	admin_encode_reply_header(w, op, req_id, err, msg);
	keel_wbuf_bytes(w, body, size);
	net_conn_frame_end(&c->conn, mark);
}

/* "super:PASSWORD" against --super-digest ("super:BASE64"). */
static bool digest_ok(const struct node *n, const uint8_t *auth, size_t len)
{
	const char *want = n->cfg.super_digest;
	if (want[0] == '\0' || len == 0 || len > DIGEST_AUTH_MAX || len < 6 ||
	    memcmp(auth, "super:", 6) != 0) {
		return false;
	}
	char id[DIGEST_AUTH_MAX + 1 + ZK_DIGEST_B64_SIZE];
	KEEL_ASSERT(zk_digest_id_size(len) <= sizeof(id));
	size_t id_len = zk_digest_id((const char *)auth, len, id);
	return id_len == strlen(want) && CRYPTO_memcmp(id, want, id_len) == 0;
}

static bool secret_ok(const struct node *n, struct node_client *c, const uint8_t *body,
		      size_t size)
{
	if (!c->admin_nonce_valid || size != PEER_AUTH_NONCE_SIZE + PEER_AUTH_MAC_SIZE) {
		return false;
	}
	return peer_auth_admin_verify(&n->peers.keys, n->cfg.id, c->admin_nonce, body,
				      body + PEER_AUTH_NONCE_SIZE);
}

void admin_auth_on_frame(struct node *n, struct node_client *c, uint8_t op, uint64_t req_id,
			 const uint8_t *body, size_t size)
{
	if (op == ADMIN_OP_AUTH_NONCE) {
		if (peer_auth_random(c->admin_nonce, sizeof(c->admin_nonce)) != KEEL_OK) {
			reply(c, op, req_id, KEEL_IO, "no random bytes", NULL, 0);
			return;
		}
		c->admin_nonce_valid = true;
		uint8_t out[PEER_AUTH_NONCE_SIZE + 8];
		memcpy(out, c->admin_nonce, PEER_AUTH_NONCE_SIZE);
		keel_store_be64(out + PEER_AUTH_NONCE_SIZE, n->cfg.id);
		reply(c, op, req_id, KEEL_OK, "", out, sizeof(out));
		return;
	}
	KEEL_ASSERT(op == ADMIN_OP_AUTH);
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	uint8_t method = keel_rbuf_u8(&r);
	size_t rest = keel_rbuf_remaining(&r);
	const uint8_t *p = keel_rbuf_bytes(&r, rest);
	bool ok = false;
	if (keel_rbuf_ok(&r) && method == ADMIN_AUTH_SECRET) {
		ok = secret_ok(n, c, p, rest);
	} else if (keel_rbuf_ok(&r) && method == ADMIN_AUTH_DIGEST && rest >= 2 &&
		   keel_load_be16(p) == rest - 2) {
		ok = digest_ok(n, p + 2, rest - 2);
	}
	c->admin_nonce_valid = false; /* one attempt per nonce */
	memset(c->admin_nonce, 0, sizeof(c->admin_nonce));
	if (!ok) {
		KEEL_WARN("admin authentication from %s failed (method %u)", c->conn.peer_addr,
			  method);
		reply(c, op, req_id, KEEL_AUTH, "authentication failed", NULL, 0);
		return;
	}
	c->operator_authenticated = true;
	KEEL_INFO("admin connection from %s authenticated (%s)", c->conn.peer_addr,
		  method == ADMIN_AUTH_SECRET ? "cluster secret" : "super digest");
	reply(c, op, req_id, KEEL_OK, "authenticated", NULL, 0);
}

static bool x509_super(const struct node *n, const struct node_client *c)
{
	char dn[sizeof(n->cfg.x509_super_user)];
	return n->cfg.x509_super_user[0] != '\0' &&
	       net_conn_tls_subject(&c->conn, dn, sizeof(dn)) &&
	       strcmp(dn, n->cfg.x509_super_user) == 0;
}

bool admin_auth_allowed(const struct node *n, const struct node_client *c)
{
	return n->cfg.insecure_peers || c->operator_authenticated || x509_super(n, c);
}
