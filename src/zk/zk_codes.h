/*
 * zk_codes.h — the numbers of the ZooKeeper wire protocol.
 *
 * Opcodes, error codes, watch event types, session states, permission bits,
 * create modes and special xids, with the values Apache ZooKeeper 3.8/3.9
 * puts on the wire (ZooDefs, KeeperException.Code, Watcher.Event, CreateMode).
 * These are protocol facts, not keel errors: ZooKeeper error codes travel in
 * ReplyHeader.err and never leave the zk/ layer as `enum keel_err` values.
 *
 * Everything here is a constant; zk_err_name()/zk_op_name() return static
 * strings for logs and test output.
 */
#ifndef KEEL_ZK_CODES_H
#define KEEL_ZK_CODES_H

#include <stdbool.h>
#include <stdint.h>

/* ---- opcodes (RequestHeader.type, MultiHeader.type) ---- */
enum zk_op {
	ZK_OP_NOTIFICATION = 0,
	ZK_OP_CREATE = 1,
	ZK_OP_DELETE = 2,
	ZK_OP_EXISTS = 3,
	ZK_OP_GET_DATA = 4,
	ZK_OP_SET_DATA = 5,
	ZK_OP_GET_ACL = 6,
	ZK_OP_SET_ACL = 7,
	ZK_OP_GET_CHILDREN = 8,
	ZK_OP_SYNC = 9,
	ZK_OP_PING = 11,
	ZK_OP_GET_CHILDREN2 = 12,
	ZK_OP_CHECK = 13,
	ZK_OP_MULTI = 14,
	ZK_OP_CREATE2 = 15,
	ZK_OP_RECONFIG = 16,
	ZK_OP_CHECK_WATCHES = 17,
	ZK_OP_REMOVE_WATCHES = 18,
	ZK_OP_CREATE_CONTAINER = 19,
	ZK_OP_DELETE_CONTAINER = 20,
	ZK_OP_CREATE_TTL = 21,
	ZK_OP_MULTI_READ = 22,
	ZK_OP_AUTH = 100,
	ZK_OP_SET_WATCHES = 101,
	ZK_OP_SASL = 102,
	ZK_OP_GET_EPHEMERALS = 103,
	ZK_OP_GET_ALL_CHILDREN_NUMBER = 104,
	ZK_OP_SET_WATCHES2 = 105,
	ZK_OP_ADD_WATCH = 106,
	ZK_OP_WHO_AM_I = 107,
	/* keel extension (never sent by ZooKeeper clients): subscribe to the
	 * change feed (zk_feed.h). The controller's extensions use 1000+. */
	ZK_OP_KEEL_FEED = 2000,
	ZK_OP_CREATE_SESSION = -10,
	ZK_OP_CLOSE_SESSION = -11,
	ZK_OP_ERROR = -1,
};

/* ---- error codes (ReplyHeader.err, ErrorResponse.err) ---- */
#define ZK_ERRORS(X)                                                          \
	X(OK, 0)                                                              \
	X(SYSTEM_ERROR, -1)                                                   \
	X(RUNTIME_INCONSISTENCY, -2)                                          \
	X(DATA_INCONSISTENCY, -3)                                             \
	X(CONNECTION_LOSS, -4)                                                \
	X(MARSHALLING_ERROR, -5)                                              \
	X(UNIMPLEMENTED, -6)                                                  \
	X(OPERATION_TIMEOUT, -7)                                              \
	X(BAD_ARGUMENTS, -8)                                                  \
	X(UNKNOWN_SESSION, -12)                                               \
	X(NEW_CONFIG_NO_QUORUM, -13)                                          \
	X(RECONFIG_IN_PROGRESS, -14)                                          \
	X(API_ERROR, -100)                                                    \
	X(NO_NODE, -101)                                                      \
	X(NO_AUTH, -102)                                                      \
	X(BAD_VERSION, -103)                                                  \
	X(NO_CHILDREN_FOR_EPHEMERALS, -108)                                   \
	X(NODE_EXISTS, -110)                                                  \
	X(NOT_EMPTY, -111)                                                    \
	X(SESSION_EXPIRED, -112)                                              \
	X(INVALID_CALLBACK, -113)                                             \
	X(INVALID_ACL, -114)                                                  \
	X(AUTH_FAILED, -115)                                                  \
	X(SESSION_MOVED, -118)                                                \
	X(NOT_READ_ONLY, -119)                                                \
	X(EPHEMERAL_ON_LOCAL_SESSION, -120)                                   \
	X(NO_WATCHER, -121)                                                   \
	X(REQUEST_TIMEOUT, -122)                                              \
	X(RECONFIG_DISABLED, -123)                                            \
	X(SESSION_CLOSED_REQUIRE_SASL_AUTH, -124)                             \
	X(QUOTA_EXCEEDED, -125)                                               \
	X(THROTTLED_OP, -127)

enum zk_err {
#define ZK_ERR_ENUM(name, value) ZK_##name = value,
	ZK_ERRORS(ZK_ERR_ENUM)
#undef ZK_ERR_ENUM
};

/* In a failed multi, ops before the failing one report 0 with result type
 * -1 (clients call it "RolledBack"), ops after it RuntimeInconsistency. */
#define ZK_ROLLED_BACK ZK_OK

/* "ZNONODE"-style name of a ZooKeeper error code; "ZUNKNOWN" otherwise. */
const char *zk_err_name(int32_t err);

/* Opcode name ("create", "getData", ...); "unknown" otherwise. */
const char *zk_op_name(int32_t op);

/* ---- watch events (WatcherEvent.type) ---- */
enum zk_event_type {
	ZK_EVENT_NONE = -1,
	ZK_EVENT_NODE_CREATED = 1,
	ZK_EVENT_NODE_DELETED = 2,
	ZK_EVENT_NODE_DATA_CHANGED = 3,
	ZK_EVENT_NODE_CHILDREN_CHANGED = 4,
	ZK_EVENT_DATA_WATCH_REMOVED = 5,
	ZK_EVENT_CHILD_WATCH_REMOVED = 6,
	ZK_EVENT_PERSISTENT_WATCH_REMOVED = 7,
	/* keel-internal trigger (never on the wire, never reaches a watch):
	 * a node's ACL changed, for the change feed (zk_feed.h). */
	ZK_EVENT_KEEL_ACL_CHANGED = 100,
};

/* ---- session states (WatcherEvent.state) ---- */
enum zk_keeper_state {
	ZK_STATE_UNKNOWN = -1,
	ZK_STATE_DISCONNECTED = 0,
	ZK_STATE_NO_SYNC_CONNECTED = 1,
	ZK_STATE_SYNC_CONNECTED = 3,
	ZK_STATE_AUTH_FAILED = 4,
	ZK_STATE_CONNECTED_READ_ONLY = 5,
	ZK_STATE_SASL_AUTHENTICATED = 6,
	ZK_STATE_EXPIRED = -112,
	ZK_STATE_CLOSED = 7,
};

/* ---- watcher types (CheckWatchesRequest/RemoveWatchesRequest.type) ----
 * 4 and 5 exist since ZooKeeper 3.9; keel accepts them from any client. */
enum zk_watcher_type {
	ZK_WATCHER_CHILDREN = 1,
	ZK_WATCHER_DATA = 2,
	ZK_WATCHER_ANY = 3,
	ZK_WATCHER_PERSISTENT = 4,
	ZK_WATCHER_PERSISTENT_RECURSIVE = 5,
};

/* ---- addWatch modes (AddWatchRequest.mode) ---- */
enum zk_add_watch_mode {
	ZK_ADD_WATCH_PERSISTENT = 0,
	ZK_ADD_WATCH_PERSISTENT_RECURSIVE = 1,
};

/* ---- ACL permission bits (ACL.perms) ---- */
enum zk_perm {
	ZK_PERM_READ = 1 << 0,
	ZK_PERM_WRITE = 1 << 1,
	ZK_PERM_CREATE = 1 << 2,
	ZK_PERM_DELETE = 1 << 3,
	ZK_PERM_ADMIN = 1 << 4,
	ZK_PERM_ALL = 0x1f,
};

/* ---- create modes (CreateRequest.flags) ---- */
enum zk_create_mode {
	ZK_CREATE_PERSISTENT = 0,
	ZK_CREATE_EPHEMERAL = 1,
	ZK_CREATE_PERSISTENT_SEQUENTIAL = 2,
	ZK_CREATE_EPHEMERAL_SEQUENTIAL = 3,
	ZK_CREATE_CONTAINER = 4,
	ZK_CREATE_PERSISTENT_WITH_TTL = 5,
	ZK_CREATE_PERSISTENT_SEQUENTIAL_WITH_TTL = 6,
};

static inline bool zk_create_mode_valid(int32_t flags)
{
	return flags >= 0 && flags <= 6;
}

static inline bool zk_create_mode_sequential(int32_t flags)
{
	return flags == ZK_CREATE_PERSISTENT_SEQUENTIAL ||
	       flags == ZK_CREATE_EPHEMERAL_SEQUENTIAL ||
	       flags == ZK_CREATE_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

static inline bool zk_create_mode_ephemeral(int32_t flags)
{
	return flags == ZK_CREATE_EPHEMERAL || flags == ZK_CREATE_EPHEMERAL_SEQUENTIAL;
}

static inline bool zk_create_mode_ttl(int32_t flags)
{
	return flags == ZK_CREATE_PERSISTENT_WITH_TTL ||
	       flags == ZK_CREATE_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

/* ---- special xids ---- */
enum zk_xid {
	ZK_XID_NOTIFICATION = -1,
	ZK_XID_PING = -2,
	ZK_XID_AUTH = -4,
	ZK_XID_SET_WATCHES = -8,
	ZK_XID_FEED = -100, /* keel: a change feed event (zk_feed.h) */
};

/* ---- ephemeralOwner encodings (EphemeralType, extended types on) ----
 * A container's owner is the most negative long; a TTL node's owner is
 * 0xFF in the top byte, zero reserved bits, and the TTL in the low 40 bits.
 * Clients see ephemeralOwner 0 for both: only session ephemerals show it. */
#define ZK_OWNER_CONTAINER ((int64_t)INT64_MIN)
#define ZK_OWNER_EXTENDED_MASK UINT64_C(0xff00000000000000)
#define ZK_OWNER_RESERVED_MASK UINT64_C(0x00ffff0000000000)
#define ZK_TTL_MAX_MS ((int64_t)((UINT64_C(1) << 40) - 1))

enum zk_node_kind {
	ZK_KIND_PERSISTENT, /* ephemeralOwner 0 */
	ZK_KIND_EPHEMERAL,  /* owned by a session */
	ZK_KIND_CONTAINER,
	ZK_KIND_TTL,
};

static inline int64_t zk_owner_for_ttl(int64_t ttl_ms)
{
	return (int64_t)(ZK_OWNER_EXTENDED_MASK | (uint64_t)ttl_ms);
}

/* Kind of a node from its stored ephemeralOwner. Extended types are always
 * enabled in keel, so an owner with the top byte 0xFF is a TTL node (or an
 * unknown extended type, reported as TTL with its low bits; keel never
 * creates one). Session ids never have that top byte. */
static inline enum zk_node_kind zk_owner_kind(int64_t owner)
{
	if (owner == 0) {
		return ZK_KIND_PERSISTENT;
	}
	if (owner == ZK_OWNER_CONTAINER) {
		return ZK_KIND_CONTAINER;
	}
	if (((uint64_t)owner & ZK_OWNER_EXTENDED_MASK) == ZK_OWNER_EXTENDED_MASK) {
		return ZK_KIND_TTL;
	}
	return ZK_KIND_EPHEMERAL;
}

static inline int64_t zk_owner_ttl_ms(int64_t owner)
{
	return (int64_t)((uint64_t)owner & ~(ZK_OWNER_EXTENDED_MASK | ZK_OWNER_RESERVED_MASK));
}

/* What a client sees in Stat.ephemeralOwner. */
static inline int64_t zk_owner_visible(int64_t owner)
{
	return zk_owner_kind(owner) == ZK_KIND_EPHEMERAL ? owner : 0;
}

#endif
