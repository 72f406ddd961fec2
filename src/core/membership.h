/*
 * membership.h — membership changes and leadership transfers of the
 * cluster, in the server core (membership.c; pure like the rest of
 * src/core). Asked for by operators over the admin protocol (the host
 * parses the frame and checks the operator credential: node/admin.h) and
 * by ZooKeeper reconfig (core/client_zk.c).
 *
 * Admin protocol frames (both ways):
 *
 *	u32 magic "KEEL" | u8 version 1 | u8 op | u64 request id | body
 *
 * and replies carry, after that header, u32 err (enum keel_err), u16
 * message length + message (for humans), then an op-specific body. The
 * ops run here:
 *
 *	ADMIN_OP_MEMBER_CHANGE  u8 change, u64 id, u16 len + peer address
 *	                        [, u16 len + ZooKeeper tail (reconfig)]
 *	ADMIN_OP_TRANSFER       u64 id
 *
 * They run on the leader: a follower forwards them over the peer link (a
 * tracked request, tracker.h, kind TRACK_ADMIN; body u8 op + the op's
 * body; the reply's body is u16 length + message) and relays the answer.
 * `add` adds the server as a learner, waits until it has caught up with
 * the commit index, then promotes it, so a new voter never stalls the
 * quorum.
 *
 * Requests live in core->admin_reqs until answered; the answer goes to the
 * host's admin connection through the client_* effects (dropped when it is
 * gone), to the forwarding peer, or to the waiting ZooKeeper reconfig.
 */
#ifndef KEEL_CORE_MEMBERSHIP_H
#define KEEL_CORE_MEMBERSHIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

struct node_core;
struct tracker_kind_ops;

#define ADMIN_MAGIC   0x4b45454cu /* "KEEL" */
#define ADMIN_VERSION 1

enum admin_op {
	ADMIN_OP_STATUS = 1,
	ADMIN_OP_MEMBER_CHANGE = 2,
	ADMIN_OP_TRANSFER = 3,
	ADMIN_OP_SNAPSHOT = 4, /* take a snapshot now (operators, tests) */
	ADMIN_OP_AUTH_NONCE = 5,
	ADMIN_OP_AUTH = 6,
};

enum admin_member_change {
	ADMIN_MEMBER_ADD = 1, /* learner, catch up, promote */
	ADMIN_MEMBER_ADD_LEARNER = 2,
	ADMIN_MEMBER_PROMOTE = 3,
	ADMIN_MEMBER_REMOVE = 4,
};

/* The header of every admin reply (see above). */
void admin_encode_reply_header(struct keel_wbuf *w, uint8_t op, uint64_t req_id, enum keel_err err,
                               const char *msg);

/* An operator's request `op` (any op but STATUS, SNAPSHOT and the AUTH
 * ones, which the host answers) on admin connection `conn`, already
 * authorized by the host: runs it and answers on `conn` (KEEL_INVAL for
 * an op or body it does not know). */
void admin_request(struct node_core *core, uint64_t conn, uint8_t op, uint64_t req_id,
                   const uint8_t *body, size_t size);
/* Admin connection `conn` went away: its requests finish, answering no one. */
void admin_on_conn_closed(struct node_core *core, uint64_t conn);

/* A membership change a ZooKeeper reconfig asks for: runs as
 * ADMIN_OP_MEMBER_CHANGE does and ends with
 * zk_clients_reconfig_step_done(core, zk_request_id, err, msg). `zk_tail`
 * is kept in the address book as the server's ZooKeeper view
 * (zk_reconfig.h); "" for none. */
void admin_member_change_for_zk(struct node_core *core, uint64_t zk_request_id, uint8_t change,
                                uint64_t id, const char *peer_addr, const char *zk_tail);

/* ---- from the ready loop ---- */

/* An admin request forwarded by server `from` (TRACK_ADMIN). */
void admin_on_forward(struct node_core *core, uint64_t from, uint64_t request_id,
                      const uint8_t *body, size_t size);
/* The tracker's callbacks for TRACK_ADMIN (ctx: the core; set by core_open). */
extern const struct tracker_kind_ops admin_track_ops;
void admin_on_leader_change(struct node_core *core);
void admin_tick(struct node_core *core, uint64_t now_ms);
/* Frees what is left (shutdown; no answer is sent). */
void admin_close(struct node_core *core);

#endif
