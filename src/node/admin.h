/*
 * admin.h — operating a server: the admin protocol on the client port, the
 * four-letter words, the metrics endpoint.
 *
 * Admin protocol (used by `keel status`, `keel members`, `keel leader`):
 * a client-port connection whose first frame starts with ADMIN_MAGIC is an
 * admin connection. The framing, MEMBER_CHANGE and TRANSFER are described
 * in core/membership.h, which runs them; this side answers
 *
 *	ADMIN_OP_STATUS         -> JSON text: this server's view of the cluster
 *	ADMIN_OP_SNAPSHOT       (empty)
 *	ADMIN_OP_AUTH_NONCE     (empty) -> 32 bytes server nonce | u64 server id
 *	ADMIN_OP_AUTH           u8 method, then
 *	    ADMIN_AUTH_SECRET:  32 bytes client nonce | 32 bytes HMAC-SHA256
 *				(the operator proof of node/peer_auth.h over the
 *				nonce from the last AUTH_NONCE on this connection)
 *	    ADMIN_AUTH_DIGEST:  u16 len + "super:PASSWORD" (checked against
 *				--super-digest, as ZooKeeper's addauth digest)
 *
 * Authorization: MEMBER_CHANGE, TRANSFER and SNAPSHOT need an operator —
 * a connection that passed ADMIN_OP_AUTH — and otherwise get KEEL_AUTH and
 * change nothing (the connection stays open). STATUS stays open: it is the
 * same read-only document as GET /status and the `mntr` word. A server run
 * with --insecure-peers has no secret and asks no credential. A nonce is
 * good for one AUTH attempt; a failed one is logged with the client's address.
 *
 */
#ifndef KEEL_NODE_ADMIN_H
#define KEEL_NODE_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/membership.h"
#include "node/node.h"

enum admin_auth_method {
	ADMIN_AUTH_SECRET = 1,
	ADMIN_AUTH_DIGEST = 2,
};


struct node_client;

/* AUTH_NONCE and AUTH (admin_auth.c); replies on c. */
void admin_auth_on_frame(struct node *n, struct node_client *c, uint8_t op, uint64_t req_id,
			 const uint8_t *body, size_t size);
/* True when c may run operator requests. */
bool admin_auth_allowed(const struct node *n, const struct node_client *c);

/* A frame from an admin connection (the client module routes it here). */
void admin_on_frame(struct node *n, struct node_client *c, const uint8_t *payload, size_t size);

/* A four-letter word on the client port; writes the answer to `out`.
 * Returns false for a word keel does not know. */
bool admin_four_letter(struct node *n, const char word[4], struct keel_wbuf *out);

/* GET handler of the metrics/health HTTP endpoint. */
int admin_http_handler(void *ctx, const char *path, struct keel_wbuf *body,
		       const char **content_type);

/* The JSON status document (shared by the admin op and GET /status). */
void admin_status_json(struct node *n, struct keel_wbuf *w);

#endif
