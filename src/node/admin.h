/*
 * admin.h — operating a server: the admin protocol on the client port, the
 * four-letter words, the metrics endpoint.
 *
 * Admin protocol (used by `keel status`, `keel members`, `keel leader`):
 * a client-port connection whose first frame starts with ADMIN_MAGIC is an
 * admin connection. Every frame (both ways):
 *
 *	u32 magic "KEEL" | u8 version 1 | u8 op | u64 request id | body
 *
 * and replies carry, after that header, u32 err (enum keel_err), u16
 * message length + message (for humans), then an op-specific body.
 *
 *	ADMIN_OP_STATUS         -> JSON text: this server's view of the cluster
 *	ADMIN_OP_MEMBER_CHANGE  u8 change, u64 id, u16 len + peer address
 *	ADMIN_OP_TRANSFER       u64 id
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
 * Membership changes and transfers run on the leader: a follower forwards
 * them over the peer link (a tracked request, tracker.h) and relays the
 * reply. `add`
 * adds the server as a learner, waits until it has caught up with the
 * commit index, then promotes it, so a new voter never stalls the quorum.
 */
#ifndef KEEL_NODE_ADMIN_H
#define KEEL_NODE_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/membership.h"
#include "node/node.h"

#define ADMIN_MAGIC 0x4b45454cu /* "KEEL" */
#define ADMIN_VERSION 1

enum admin_op {
	ADMIN_OP_STATUS = 1,
	ADMIN_OP_MEMBER_CHANGE = 2,
	ADMIN_OP_TRANSFER = 3,
	ADMIN_OP_SNAPSHOT = 4, /* take a snapshot now (operators, tests) */
	ADMIN_OP_AUTH_NONCE = 5,
	ADMIN_OP_AUTH = 6,
};

enum admin_auth_method {
	ADMIN_AUTH_SECRET = 1,
	ADMIN_AUTH_DIGEST = 2,
};


struct node_client;

/* The header of every admin reply (see above). */
void admin_encode_reply_header(struct keel_wbuf *w, uint8_t op, uint64_t req_id, enum keel_err err,
			       const char *msg);

/* AUTH_NONCE and AUTH (admin_auth.c); replies on c. */
void admin_auth_on_frame(struct node *n, struct node_client *c, uint8_t op, uint64_t req_id,
			 const uint8_t *body, size_t size);
/* True when c may run operator requests. */
bool admin_auth_allowed(const struct node *n, const struct node_client *c);

/* A membership change a ZooKeeper reconfig asks for (core/client_zk.c): runs as
 * ADMIN_OP_MEMBER_CHANGE does (here on the leader, else forwarded to it)
 * and ends with zk_clients_reconfig_step_done(&n->core, zk_request_id, err,
 * msg).
 * `zk_tail` is kept in the address book as the server's ZooKeeper view
 * (zk_reconfig.h); "" for none. */
void admin_member_change_for_zk(struct node *n, uint64_t zk_request_id, uint8_t change,
				uint64_t id, const char *peer_addr, const char *zk_tail);

/* A frame from an admin connection (the client module routes it here). */
void admin_on_frame(struct node *n, struct node_client *c, const uint8_t *payload, size_t size);
/* The connection went away: drop pending replies to it. */
void admin_on_client_closed(struct node *n, struct node_client *c);

/* A four-letter word on the client port; writes the answer to `out`.
 * Returns false for a word keel does not know. */
bool admin_four_letter(struct node *n, const char word[4], struct keel_wbuf *out);

/* An admin request forwarded by server `from` (a tracked request,
 * TRACK_ADMIN; body: u8 op, then the op's body). Answered in a
 * PEER_FRAME_REPLY whose body is u16 length + message. */
void admin_on_forward(struct node *n, uint64_t from, uint64_t request_id, const uint8_t *body,
		      size_t size);
/* The tracker's callbacks for TRACK_ADMIN (ctx: the node). */
extern const struct tracker_kind_ops admin_track_ops;
void admin_on_reads(struct node *n, const struct raft_read_result *reads, size_t count);
void admin_on_leader_change(struct node *n);
void admin_tick(struct node *n, uint64_t now_ms);
void admin_close(struct node *n);

/* GET handler of the metrics/health HTTP endpoint. */
int admin_http_handler(void *ctx, const char *path, struct keel_wbuf *body,
		       const char **content_type);

/* The JSON status document (shared by the admin op and GET /status). */
void admin_status_json(struct node *n, struct keel_wbuf *w);

#endif
