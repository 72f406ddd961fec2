/*
 * zk_session.h — the pure parts of session handling: timeout negotiation,
 * the connect decision, password checks, and the leader's expiry tracker.
 *
 * Sessions themselves are replicated (zk_state.h): a createSession txn adds
 * one (timeout and password chosen by the server that took the connect),
 * closeSession/expiry txns remove one with its ephemerals. What is NOT
 * replicated is liveness: the leader keeps a zk_expiry tracker, touches a
 * session whenever any server reports hearing from it, and proposes a
 * CLOSE_SESSION txn for each id zk_expiry_expired() returns. A new leader
 * rebuilds its tracker from the state with fresh deadlines for everyone.
 *
 *	client connect --> zk_session_connect()
 *	   REFUSE   client saw a newer zxid than this server: close, no reply
 *	   NEW      propose CREATE_SESSION; reply zk_session_created() after apply
 *	   RESUME   reply now (the session is in the applied state)
 *	   EXPIRED  reply timeOut 0 / id 0 / zero password, then close
 *
 * Time is always an argument (milliseconds, any monotonic origin the
 * caller likes, as long as it is consistent).
 */
#ifndef KEEL_ZK_SESSION_H
#define KEEL_ZK_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/hash.h"
#include "zk/zk_proto.h"
#include "zk/zk_state.h"

/* ZooKeeper's clamp: [min, max], defaulting to 2 and 20 ticks. */
int32_t zk_session_min_timeout(const struct zk_config *cfg);
int32_t zk_session_max_timeout(const struct zk_config *cfg);
int32_t zk_session_negotiate_timeout(const struct zk_config *cfg, int32_t requested_ms);

/* Constant-time comparison of a client's password with the stored one
 * (a password of any other length than 16 never matches). */
bool zk_session_password_ok(const struct zk_session *s, struct zk_bytes passwd);

enum zk_connect_action {
	ZK_CONNECT_REFUSE,
	ZK_CONNECT_NEW,
	ZK_CONNECT_RESUME,
	ZK_CONNECT_EXPIRED,
};

/*
 * Decides what to do with a ConnectRequest on a server whose applied state
 * is `st` at zxid `last_zxid`. Fills `rsp` for RESUME and EXPIRED (its
 * passwd points into the state for RESUME: copy it before the next apply);
 * for NEW, *timeout_ms is the negotiated timeout to put in the
 * CREATE_SESSION txn. readOnly is echoed iff the client sent it.
 */
enum zk_connect_action zk_session_connect(const struct zk_state *st,
					  const struct zk_config *cfg,
					  const struct zk_connect_request *req,
					  int64_t last_zxid, struct zk_connect_response *rsp,
					  int32_t *timeout_ms);

/* The ConnectResponse for a session a CREATE_SESSION apply just made (or
 * timeOut 0 if res->err says it failed). `rsp->passwd` points into `res`. */
void zk_session_created(const struct zk_result *res, bool has_read_only,
			struct zk_connect_response *rsp);

/* ---- the leader's expiry tracker ---- */

struct zk_expiry_entry;

struct zk_expiry {
	struct keel_hmap by_id;            /* session id -> entry */
	struct zk_expiry_entry **heap;     /* min-heap on deadline */
	uint32_t count;
	uint32_t capacity;
	uint32_t max_sessions;             /* 0: unlimited */
};

enum keel_err zk_expiry_init(struct zk_expiry *t, uint32_t max_sessions);
void zk_expiry_close(struct zk_expiry *t);

/* Tracks a session with deadline now + timeout (or re-tracks it). */
enum keel_err zk_expiry_add(struct zk_expiry *t, int64_t session_id, int32_t timeout_ms,
			    int64_t now_ms);
/* The session was heard from: deadline = now + timeout. False if unknown. */
bool zk_expiry_touch(struct zk_expiry *t, int64_t session_id, int64_t now_ms);
void zk_expiry_remove(struct zk_expiry *t, int64_t session_id);
size_t zk_expiry_count(const struct zk_expiry *t);

/* Sessions whose deadline has passed (deadline < now), earliest first, at
 * most `max`. Each returned session is re-armed for another timeout, so it
 * comes back if its close never gets applied; remove it when it does. */
size_t zk_expiry_expired(struct zk_expiry *t, int64_t now_ms, int64_t *ids, size_t max);

/* New leader: forget everything, track every session of `st` with a fresh
 * deadline (now + its timeout). */
enum keel_err zk_expiry_rebuild(struct zk_expiry *t, const struct zk_state *st, int64_t now_ms);

#endif
