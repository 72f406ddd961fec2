/*
 * zk_proto.h — ZooKeeper client protocol messages: framing, handshake,
 * request and reply headers, every request body, every response body,
 * watch notifications and multi.
 *
 * Wire shape (all jute, see zk_jute.h):
 *
 *	frame    = int32 length + payload            (length <= max packet)
 *	connect  = ConnectRequest  -> ConnectResponse (no headers)
 *	request  = RequestHeader{xid, type} + body
 *	reply    = ReplyHeader{xid, zxid, err} + body (body only when err == 0,
 *	           except multi, whose header err is 0 even when an op failed)
 *	event    = ReplyHeader{-1, zxid, 0} + WatcherEvent{type, state, path}
 *
 * Ownership: decoders never allocate and never copy. Every `struct
 * zk_bytes`, ACL vector, string vector and multi op list in a decoded
 * message points into the caller's input and lives exactly as long as it.
 * Encoders append to a caller-owned `struct keel_wbuf` (fixed or bounded
 * dynamic); a write past its limit fails the writer (check keel_wbuf_ok).
 *
 * Decoders accept trailing bytes after a body (ZooKeeper's jute reader
 * ignores them too) but nothing short, no negative length other than -1,
 * and no vector count that cannot fit in what is left.
 */
#ifndef KEEL_ZK_PROTO_H
#define KEEL_ZK_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "zk/zk_codes.h"
#include "zk/zk_jute.h"

/* ZooKeeper's jute.maxbuffer default: the largest frame payload accepted. */
#define ZK_DEFAULT_MAX_PACKET 0xfffffu
#define ZK_PASSWD_SIZE 16

/* ---- framing ---- */

enum zk_frame_status {
	ZK_FRAME_NEED_MORE, /* fewer than 4 + length bytes buffered */
	ZK_FRAME_READY,     /* one whole frame at the start of the input */
	ZK_FRAME_TOO_BIG,   /* length > max packet: close the connection */
	ZK_FRAME_NEGATIVE,  /* length < 0: close the connection */
};

/* Looks at the start of a receive buffer. On ZK_FRAME_READY *payload_size
 * is the payload length (the frame is 4 + *payload_size bytes). On
 * NEED_MORE it is the payload length if the prefix is complete, else 0. */
enum zk_frame_status zk_frame_check(const void *data, size_t size, uint32_t max_packet,
				    uint32_t *payload_size);

/* Reserves a length prefix; returns its offset for zk_frame_end(). */
size_t zk_frame_begin(struct keel_wbuf *w);
/* Patches the prefix at `start` with the number of bytes written since. */
void zk_frame_end(struct keel_wbuf *w, size_t start);

/* ---- handshake ---- */

struct zk_connect_request {
	int32_t protocol_version;
	int64_t last_zxid_seen;
	int32_t timeout_ms;
	int64_t session_id;
	struct zk_bytes passwd;
	bool read_only;
	bool has_read_only; /* the optional trailing byte (3.8) / field (3.9) was sent */
};

struct zk_connect_response {
	int32_t protocol_version;
	int32_t timeout_ms; /* <= 0: the session expired */
	int64_t session_id;
	struct zk_bytes passwd;
	bool read_only;
	bool has_read_only; /* send it iff the request had it */
};

/* KEEL_PROTO when the fixed part is short or malformed. */
enum keel_err zk_connect_request_decode(struct zk_connect_request *req, const void *data,
					size_t size);
void zk_connect_request_encode(struct keel_wbuf *w, const struct zk_connect_request *req);
enum keel_err zk_connect_response_decode(struct zk_connect_response *rsp, const void *data,
					 size_t size);
void zk_connect_response_encode(struct keel_wbuf *w, const struct zk_connect_response *rsp);

/* ---- headers ---- */

struct zk_reply_header {
	int32_t xid;
	int64_t zxid;
	int32_t err;
};

#define ZK_REQUEST_HEADER_SIZE 8
#define ZK_REPLY_HEADER_SIZE 16
_Static_assert(ZK_REQUEST_HEADER_SIZE == 4 + 4, "RequestHeader: int xid, int type");
_Static_assert(ZK_REPLY_HEADER_SIZE == 4 + 8 + 4, "ReplyHeader: int xid, long zxid, int err");

void zk_reply_header_encode(struct keel_wbuf *w, int32_t xid, int64_t zxid, int32_t err);
enum keel_err zk_reply_header_decode(struct zk_reply_header *h, struct keel_rbuf *r);

/* ---- request bodies ---- */

/* create, create2, createContainer, createTTL (ttl is -1 unless createTTL) */
struct zk_create_request {
	struct zk_bytes path;
	struct zk_bytes data;
	struct zk_acl_vec acl;
	int32_t flags;
	int64_t ttl_ms;
};

struct zk_delete_request {
	struct zk_bytes path;
	int32_t version;
};

/* exists, getData, getChildren, getChildren2 */
struct zk_path_watch_request {
	struct zk_bytes path;
	bool watch;
};

struct zk_set_data_request {
	struct zk_bytes path;
	struct zk_bytes data;
	int32_t version;
};

/* getACL, sync, getAllChildrenNumber, getEphemerals (prefix), and the raw
 * path bytes of a client-sent deleteContainer (ZooKeeper reads its body as
 * raw UTF-8, not as a ustring). */
struct zk_path_request {
	struct zk_bytes path;
};

struct zk_set_acl_request {
	struct zk_bytes path;
	struct zk_acl_vec acl;
	int32_t version;
};

/* check (CheckVersionRequest) */
struct zk_check_request {
	struct zk_bytes path;
	int32_t version;
};

/* multi / multiRead: the encoded op list (MultiHeader + body per op, the
 * terminating header excluded), validated at decode time. */
struct zk_multi_request {
	const uint8_t *ops;
	uint32_t size;
	uint32_t count;
};

struct zk_reconfig_request {
	struct zk_bytes joining_servers;
	struct zk_bytes leaving_servers;
	struct zk_bytes new_members;
	int64_t cur_config_id;
};

/* checkWatches, removeWatches */
struct zk_watches_request {
	struct zk_bytes path;
	int32_t type; /* enum zk_watcher_type */
};

/* setWatches (lists 0..2) and setWatches2 (lists 0..4) */
enum zk_set_watches_list {
	ZK_SW_DATA,
	ZK_SW_EXIST,
	ZK_SW_CHILD,
	ZK_SW_PERSISTENT,
	ZK_SW_PERSISTENT_RECURSIVE,
	ZK_SW_LIST_COUNT,
};

struct zk_set_watches_request {
	int64_t relative_zxid;
	struct zk_str_vec lists[ZK_SW_LIST_COUNT]; /* absent lists are empty */
};

struct zk_auth_request {
	int32_t type;
	struct zk_bytes scheme;
	struct zk_bytes auth;
};

struct zk_add_watch_request {
	struct zk_bytes path;
	int32_t mode; /* enum zk_add_watch_mode */
};

struct zk_sasl_request {
	struct zk_bytes token;
};

struct zk_request {
	int32_t xid;
	int32_t opcode;
	const uint8_t *body; /* the bytes after the header, as received */
	size_t body_size;
	union {
		struct zk_create_request create;
		struct zk_delete_request delete_;
		struct zk_path_watch_request read;
		struct zk_set_data_request set_data;
		struct zk_path_request path;
		struct zk_set_acl_request set_acl;
		struct zk_check_request check;
		struct zk_multi_request multi;
		struct zk_reconfig_request reconfig;
		struct zk_watches_request watches;
		struct zk_set_watches_request set_watches;
		struct zk_auth_request auth;
		struct zk_add_watch_request add_watch;
		struct zk_sasl_request sasl;
	} u;
};

/* Is this an opcode a client may send (and keel can decode)? */
bool zk_op_known(int32_t opcode);

/*
 * Decodes a request frame payload (header + body).
 *   KEEL_OK          decoded; pointers into `frame`.
 *   KEEL_SHORT       fewer than 8 bytes: not a request, close the connection.
 *   KEEL_UNSUPPORTED unknown opcode: reply Unimplemented (-6) with zxid -1,
 *                    then close, as ZooKeeper does. xid/opcode are set.
 *   KEEL_PROTO       the body does not decode: reply MarshallingError (-5).
 *                    xid/opcode are set.
 */
enum keel_err zk_request_decode(struct zk_request *req, const void *frame, size_t size);

/* Decodes just a body for a known opcode (what apply does with a txn). */
enum keel_err zk_request_decode_body(struct zk_request *req, int32_t opcode, const void *body,
				     size_t size);

/* Encodes header + body from req->u (req->body is ignored). */
void zk_request_encode(struct keel_wbuf *w, const struct zk_request *req);
/* Encodes only the body of req->u. */
void zk_request_body_encode(struct keel_wbuf *w, const struct zk_request *req);

/* ---- multi ---- */

/* One op inside multi/multiRead. create2/createContainer/createTTL use
 * u.create; getData/getChildren use u.read (watch is always false). */
struct zk_multi_op {
	int32_t opcode;
	union {
		struct zk_create_request create;
		struct zk_delete_request delete_;
		struct zk_set_data_request set_data;
		struct zk_check_request check;
		struct zk_path_watch_request read;
	} u;
};

struct zk_multi_iter {
	struct keel_rbuf r;
	uint32_t left;
};

void zk_multi_iter_init(struct zk_multi_iter *it, const struct zk_multi_request *m);
/* Next op, false after the last. Never fails on a decoded request. */
bool zk_multi_iter_next(struct zk_multi_iter *it, struct zk_multi_op *op);

/* Client side: encode a multi body from ops (MultiHeader{op,false,-1} +
 * body each, then MultiHeader{-1,true,-1}). */
void zk_multi_encode(struct keel_wbuf *w, const struct zk_multi_op *ops, size_t count);

/* Server side: multi results. Each result is MultiHeader{type, false, err}
 * + body; zk_multi_result_end() writes the terminator {-1, true, -1}. */
void zk_multi_result_header(struct keel_wbuf *w, int32_t type, int32_t err);
void zk_multi_result_error(struct keel_wbuf *w, int32_t err);
void zk_multi_result_end(struct keel_wbuf *w);

struct zk_multi_result {
	int32_t type; /* opcode, or -1 for an error */
	int32_t err;
	struct zk_bytes path;     /* create, create2 */
	struct zk_stat stat;      /* create2, setData, getData */
	struct zk_bytes data;     /* getData */
	struct zk_str_vec children; /* getChildren */
};

struct zk_multi_result_iter {
	struct keel_rbuf r;
	bool failed;
};

void zk_multi_result_iter_init(struct zk_multi_result_iter *it, const void *body, size_t size);
/* Next result; false at the terminator or when the input is malformed
 * (then it->failed is true). */
bool zk_multi_result_next(struct zk_multi_result_iter *it, struct zk_multi_result *res);

/* ---- responses (bodies after a ReplyHeader with err == 0) ---- */

struct zk_client_info {
	struct zk_bytes auth_scheme;
	struct zk_bytes user;
};

struct zk_response {
	int32_t opcode; /* the request it answers */
	struct zk_bytes path;       /* create, create2 (+ container/TTL), sync */
	struct zk_stat stat;        /* create2, exists, getData, setData, getACL, setACL, getChildren2 */
	struct zk_bytes data;       /* getData */
	struct zk_acl_vec acl;      /* getACL */
	struct zk_str_vec strings;  /* getChildren, getChildren2, getEphemerals, whoAmI (scheme,user pairs) */
	int32_t number;             /* getAllChildrenNumber; addWatch's ErrorResponse */
	const uint8_t *multi;       /* multi/multiRead results, for zk_multi_result_iter */
	size_t multi_size;
};

/* Decodes the body of a successful reply to `opcode`. KEEL_PROTO when it
 * does not decode. Ops without a body (delete, ping, setWatches, check,
 * removeWatches, checkWatches, closeSession, auth) accept any input. */
enum keel_err zk_response_decode(struct zk_response *rsp, int32_t opcode, const void *body,
				 size_t size);

/* whoAmI body from identities (scheme, user) pairs. */
void zk_who_am_i_encode(struct keel_wbuf *w, const struct zk_client_info *infos, size_t count);

/* ---- watch notifications ---- */

struct zk_watcher_event {
	int32_t type;  /* enum zk_event_type */
	int32_t state; /* enum zk_keeper_state */
	struct zk_bytes path;
};

void zk_watcher_event_encode(struct keel_wbuf *w, const struct zk_watcher_event *ev);
enum keel_err zk_watcher_event_decode(struct zk_watcher_event *ev, struct keel_rbuf *r);

/* A whole notification frame: length + ReplyHeader{-1, zxid, 0} + event.
 * ZooKeeper 3.8 sends zxid -1; 3.9 sends the triggering zxid. */
void zk_notification_encode(struct keel_wbuf *w, int64_t zxid, int32_t type, int32_t state,
			    struct zk_bytes path);

#endif
