/*
 * zk_read.h — requests served from the local state, and the opcode
 * classifier the server routes by.
 *
 * Reads never go through the log: the server answers them from its applied
 * state (after any apply it has already done), registers watches in its own
 * watch manager, and replies with ReplyHeader{xid, last applied zxid, err}.
 * Each read passes the same ACL gate as writes (zk_acl_check):
 *
 *	exists                 READ if the node exists (ZooKeeper 3.8.6/3.9)
 *	getData, getChildren,  READ
 *	getChildren2, getAllChildrenNumber
 *	getACL                 READ or ADMIN; without ADMIN digest ids are
 *	                       masked to "user:x"
 *	multiRead              per op, errors per op (no rollback)
 *	getEphemerals, sync, whoAmI, ping, addWatch, setWatches,
 *	checkWatches, removeWatches: no node permission (as ZooKeeper);
 *	watch events are filtered by READ at delivery.
 *
 * Ownership: the body is appended to the caller's writer; nothing the
 * caller passes is retained (watch paths are copied).
 */
#ifndef KEEL_ZK_READ_H
#define KEEL_ZK_READ_H

#include <stdint.h>

#include "base/buf.h"
#include "zk/zk_acl.h"
#include "zk/zk_proto.h"
#include "zk/zk_state.h"
#include "zk/zk_watch.h"

/* How the server handles an opcode. */
enum zk_op_class {
	ZK_CLASS_READ,     /* zk_read() now, on this server */
	ZK_CLASS_WRITE,    /* zk_txn_encode_request() -> Raft -> zk_apply() */
	ZK_CLASS_SYNC,     /* ReadIndex barrier, then zk_read() (SyncResponse) */
	ZK_CLASS_PING,     /* reply xid -2 at once (zk_read() gives the body) */
	ZK_CLASS_AUTH,     /* zk_auth_handle(), xid -4 */
	ZK_CLASS_CLOSE,    /* closeSession: write, then close the connection */
	ZK_CLASS_REFUSE,   /* reply with zk_op_refusal() (no log entry) */
	ZK_CLASS_UNKNOWN,  /* Unimplemented (-6) with zxid -1, then close */
};

enum zk_op_class zk_op_classify(int32_t opcode);

/* The error for a ZK_CLASS_REFUSE opcode: reconfig -> ReconfigDisabled,
 * sasl -> AuthFailed... see the table in zk_read.c. */
int32_t zk_op_refusal(int32_t opcode);

struct zk_read_ctx {
	const struct zk_state *state;
	struct zk_watches *watches;   /* NULL: no watch registration */
	struct zk_watch_conn *conn;   /* attached (zk_watches_attach) if watches */
	const struct zk_ids *ids;     /* the caller's identities (required) */
	int64_t session_id;           /* for getEphemerals */
};

/*
 * Serves a decoded ZK_CLASS_READ/SYNC/PING request. Returns the ZooKeeper
 * error for ReplyHeader.err; the reply body is appended to `body` when the
 * result is 0 (multiRead: always 0 with per-op results). setWatches and
 * setWatches2 send their catch-up events through the watch manager's
 * callback before returning, as ZooKeeper does before its reply.
 */
int32_t zk_read(const struct zk_read_ctx *ctx, const struct zk_request *req,
		struct keel_wbuf *body);

/* ---- auth (server side) ---- */

/*
 * Handles an AuthPacket for a connection: scheme "digest" adds the digest
 * identity of the auth data (and ("super", "") when it equals
 * `super_digest`, e.g. "super:D/InIHSb7yEEbrWz8b9l71RjZJU=", NULL for none);
 * scheme "ip" succeeds and adds nothing new (the connection already has its
 * ip identity). Returns 0, or AuthFailed (-115) for any other scheme or a
 * full identity list — ZooKeeper then closes the connection after the
 * reply (xid -4, zxid 0).
 */
int32_t zk_auth_handle(struct zk_auth_info *info, const struct zk_auth_request *auth,
		       const char *super_digest);

#endif
