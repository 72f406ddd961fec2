/*
 * zk_txn.h — the log entry ("txn") format of the ZooKeeper service.
 *
 * The Raft log carries requests, not diffs (DESIGN.md). A txn is what a
 * server proposes; zk_apply() turns it into a state change on every server.
 * Layout (big-endian, all fields always present for a kind):
 *
 *	u8  magic 'Z' (0x5a)     u8 version (1)     u8 kind
 *	i64 time_ms              leader-stamped wall clock (ctime/mtime, TTL)
 *	u64 origin               opaque to apply: server-local correlation
 *	                         (e.g. originating server id + request number)
 *	i32 xid                  the client's xid, echoed in the result
 *	i64 session_id
 *	kind REQUEST:
 *	  u8  id count, then (ustring scheme, ustring id) per identity
 *	  i32 opcode, then the request body exactly as the client sent it
 *	kind CREATE_SESSION:
 *	  i32 timeout_ms (negotiated), 16 bytes password (random, from the
 *	  server); session_id 0 = let apply assign one (from the zxid)
 *	kind CLOSE_SESSION:
 *	  u8 reason (1 = client closeSession, 2 = expired)
 *	kind DELETE_CONTAINER, DELETE_TTL:
 *	  ustring path (leader housekeeping; re-checked at apply)
 *
 * Apply needs neither origin nor xid; they only travel so that the server
 * that proposed the entry can find the connection waiting for the reply.
 *
 * Decoded txns point into the input bytes (lifetime of the input).
 */
#ifndef KEEL_ZK_TXN_H
#define KEEL_ZK_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "zk/zk_acl.h"
#include "zk/zk_jute.h"
#include "zk/zk_proto.h"

#define ZK_TXN_MAGIC 0x5au
#define ZK_TXN_VERSION 1u

enum zk_txn_kind {
	ZK_TXN_REQUEST = 1,
	ZK_TXN_CREATE_SESSION = 2,
	ZK_TXN_CLOSE_SESSION = 3,
	ZK_TXN_DELETE_CONTAINER = 4,
	ZK_TXN_DELETE_TTL = 5,
};

enum zk_close_reason {
	ZK_CLOSE_BY_CLIENT = 1,
	ZK_CLOSE_EXPIRED = 2,
};

/* Fields every txn has. */
struct zk_txn_meta {
	int64_t time_ms;
	uint64_t origin;
	int32_t xid;
	int64_t session_id;
};

struct zk_txn {
	enum zk_txn_kind kind;
	struct zk_txn_meta meta;
	/* REQUEST */
	struct zk_ids ids;
	int32_t opcode;
	const uint8_t *body;
	size_t body_size;
	/* CREATE_SESSION */
	int32_t timeout_ms;
	uint8_t passwd[ZK_PASSWD_SIZE];
	/* CLOSE_SESSION */
	enum zk_close_reason reason;
	/* DELETE_CONTAINER, DELETE_TTL */
	struct zk_bytes path;
};

/* A client write (create*, delete, setData, setACL, check, multi, or
 * closeSession) with the caller's identities. `body` is the request body
 * after the RequestHeader. */
void zk_txn_encode_request(struct keel_wbuf *w, const struct zk_txn_meta *meta,
			   const struct zk_ids *ids, int32_t opcode, const void *body,
			   size_t body_size);
void zk_txn_encode_create_session(struct keel_wbuf *w, const struct zk_txn_meta *meta,
				  int32_t timeout_ms, const uint8_t passwd[ZK_PASSWD_SIZE]);
void zk_txn_encode_close_session(struct keel_wbuf *w, const struct zk_txn_meta *meta,
				 enum zk_close_reason reason);
/* Housekeeping: kind is ZK_TXN_DELETE_CONTAINER or ZK_TXN_DELETE_TTL. */
void zk_txn_encode_delete(struct keel_wbuf *w, enum zk_txn_kind kind, int64_t time_ms,
			  const char *path, size_t path_size);

/* Re-stamps an encoded txn's time in place (the leader stamps entries a
 * follower forwarded). KEEL_PROTO if `txn` is not an encoded txn. */
enum keel_err zk_txn_set_time(void *txn, size_t size, int64_t time_ms);

/* KEEL_CORRUPT for a wrong magic/version/kind, KEEL_PROTO when short or
 * malformed. */
enum keel_err zk_txn_decode(struct zk_txn *txn, const void *data, size_t size);

#endif
