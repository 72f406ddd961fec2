/*
 * zk_feed.h — the change feed: a stream of every committed change under a
 * path, from any zxid the server still holds (docs/change-feed.md).
 *
 * Two parts, both pure:
 *
 *  1. The wire codec of the keel extension (jute encoding, zk_jute.h):
 *	request   RequestHeader{xid, ZK_OP_KEEL_FEED} + FeedRequest
 *	reply     ReplyHeader{xid, zxid, err} + FeedResponse   (err == 0)
 *	events    ReplyHeader{ZK_XID_FEED, zxid, 0} + FeedEvent, one per frame
 *
 *	FeedRequest  = int16 version (0) | int64 fromZxid | int32 fromSeq |
 *	               ustring path | int32 flags
 *	FeedResponse = int16 version (0) | int16 error | int64 oldestZxid |
 *	               int64 lastZxid
 *	FeedEvent    = int16 version (0) | int16 status | int64 zxid |
 *	               int32 seq | int32 type | ustring path | Stat stat |
 *	               buffer data (-1: none)
 *
 *     A position in the feed is (zxid, seq): seq numbers the changes one
 *     transaction made (a multi makes several), from 0, in apply order —
 *     the same on every server. A subscription from (Z, S) gets every
 *     change at a position >= (Z, S) in position order, so a consumer that
 *     resumes from the position after the last one it saw (on any server)
 *     sees each change exactly once. FeedResponse.error is ZK_FEED_OK or
 *     ZK_FEED_COMPACTED (the start is older than what the server holds:
 *     oldestZxid is the oldest start it accepts). An event with status
 *     ZK_FEED_COMPACTED ends the stream (the consumer fell so far behind
 *     that its position left the server's history; `zxid` is the oldest
 *     start the server still accepts); the server then closes.
 *
 *  2. The history (struct zk_feed_log): the changes of the last applied
 *     transactions, each with its events (type, path, Stat, data and the
 *     node's ACL, for the READ check at delivery), in zxid order. It holds
 *     every change with a zxid above `floor` and at most `max_bytes` (the
 *     oldest go first, raising the floor). Positions in it are absolute
 *     (`first` counts the changes ever dropped), so a reader's position
 *     stays meaningful while older changes are dropped.
 *
 * Ownership: decoders point into the input (zk_proto.h's rule). The log
 * owns copies of everything it holds; what zk_feed_log_at() returns lives
 * until the change is dropped (append, trim, reset, close).
 */
#ifndef KEEL_ZK_FEED_H
#define KEEL_ZK_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "zk/zk_jute.h"
#include "zk/zk_state.h"

#define ZK_FEED_VERSION 0

/* FeedRequest.flags */
enum zk_feed_flags {
	ZK_FEED_WITH_DATA = 1 << 0, /* events carry the node's data */
	ZK_FEED_CHILDREN = 1 << 1,  /* also "child" events on parents */
};
#define ZK_FEED_FLAGS_ALL (ZK_FEED_WITH_DATA | ZK_FEED_CHILDREN)

/* FeedResponse.error and FeedEvent.status */
enum zk_feed_status {
	ZK_FEED_OK = 0,
	ZK_FEED_COMPACTED = 1,
};

/* FeedEvent.type */
enum zk_feed_type {
	ZK_FEED_CREATED = 1,
	ZK_FEED_DELETED = 2,
	ZK_FEED_DATA = 3,
	ZK_FEED_CHILD = 4, /* the node's children changed (flag ZK_FEED_CHILDREN) */
	ZK_FEED_ACL = 5,
};

/* "created", "deleted", "data", "child", "acl"; "unknown" otherwise. */
const char *zk_feed_type_name(int32_t type);

struct zk_feed_request {
	int64_t from_zxid;
	int32_t from_seq;
	struct zk_bytes path;
	int32_t flags;
};

struct zk_feed_response {
	int16_t error;
	int64_t oldest_zxid;
	int64_t last_zxid;
};

struct zk_feed_event {
	int16_t status;
	int64_t zxid;
	int32_t seq;
	int32_t type;
	struct zk_bytes path;
	struct zk_stat stat;
	struct zk_bytes data; /* null when not asked for or not applicable */
};

void zk_feed_request_encode(struct keel_wbuf *w, const struct zk_feed_request *rq);
/* KEEL_PROTO: short, a newer version, a null path, negative seq, unknown
 * flags. (Path syntax is the server's check.) */
enum keel_err zk_feed_request_decode(struct zk_feed_request *rq, const void *body, size_t size);

void zk_feed_response_encode(struct keel_wbuf *w, const struct zk_feed_response *rs);
enum keel_err zk_feed_response_decode(struct zk_feed_response *rs, const void *body, size_t size);

void zk_feed_event_encode(struct keel_wbuf *w, const struct zk_feed_event *ev);
enum keel_err zk_feed_event_decode(struct zk_feed_event *ev, const void *body, size_t size);

/* Whether `path` is `prefix` or below it ("/" covers everything). */
bool zk_feed_path_under(struct zk_bytes prefix, struct zk_bytes path);

/* ---- the history ---- */

/* One event of a change, in the change's byte area. */
struct zk_feed_rec {
	int32_t type;
	uint32_t path_offset;
	uint32_t path_size;
	int32_t data_size; /* -1: none */
	uint32_t data_offset;
	uint32_t acl_offset; /* encoded ACL elements, see struct zk_acl_vec */
	uint32_t acl_size;
	int32_t acl_count;
	struct zk_stat stat;
};

/* The changes one transaction made. */
struct zk_feed_change {
	int64_t zxid;
	uint32_t count;
	size_t bytes; /* the allocation's size */
	const uint8_t *area;
	struct zk_feed_rec recs[];
};

static inline struct zk_bytes zk_feed_rec_path(const struct zk_feed_change *ch,
					       const struct zk_feed_rec *r)
{
	return zk_bytes_of(ch->area + r->path_offset, r->path_size);
}

static inline struct zk_bytes zk_feed_rec_data(const struct zk_feed_change *ch,
					       const struct zk_feed_rec *r)
{
	return r->data_size < 0 ? ZK_BYTES_NULL
				: zk_bytes_of(ch->area + r->data_offset, (size_t)r->data_size);
}

static inline struct zk_acl_vec zk_feed_rec_acl(const struct zk_feed_change *ch,
						const struct zk_feed_rec *r)
{
	struct zk_acl_vec v = {r->acl_count, ch->area + r->acl_offset, r->acl_size};
	return v;
}

struct zk_feed_log {
	struct zk_feed_change **ring;
	uint32_t capacity; /* power of two */
	uint32_t head;     /* ring index of the oldest change */
	uint32_t count;
	uint64_t first;    /* absolute position of the oldest change */
	int64_t floor;     /* every change with zxid > floor is held */
	int64_t last_zxid; /* highest zxid appended or reset to */
	size_t bytes;
	size_t max_bytes;
};

/* An empty history that holds everything after `floor`. */
void zk_feed_log_init(struct zk_feed_log *log, size_t max_bytes, int64_t floor);
void zk_feed_log_close(struct zk_feed_log *log);

/* Records the changes of the transaction applied at res->zxid (its
 * triggers, with Stat, data and ACL read from `st` after the apply; a
 * deleted node's Stat is zero). A transaction without changes records
 * nothing. Then drops the oldest changes while over max_bytes (never the
 * newest). KEEL_NOMEM: nothing recorded and the history restarts after
 * res->zxid (floor raised; readers behind it see COMPACTED). */
enum keel_err zk_feed_log_append(struct zk_feed_log *log, const struct zk_state *st,
				 const struct zk_result *res);

/* Drops every change with zxid <= floor and raises the floor to it. */
void zk_feed_log_trim(struct zk_feed_log *log, int64_t floor);
/* Drops everything: the history restarts after `floor`. */
void zk_feed_log_reset(struct zk_feed_log *log, int64_t floor);

/* The oldest start (zxid) a subscription may ask for. */
static inline int64_t zk_feed_log_oldest(const struct zk_feed_log *log)
{
	return log->floor + 1;
}

/* Absolute position one past the newest change. */
static inline uint64_t zk_feed_log_end(const struct zk_feed_log *log)
{
	return log->first + log->count;
}

/* Absolute position of the first change with zxid >= `zxid` (the end when
 * there is none). The caller checks zxid >= zk_feed_log_oldest() first. */
uint64_t zk_feed_log_seek(const struct zk_feed_log *log, int64_t zxid);

/* The change at absolute position `pos` (first <= pos < end). */
const struct zk_feed_change *zk_feed_log_at(const struct zk_feed_log *log, uint64_t pos);

/* ---- reading the history ----
 *
 * A cursor is one subscription's place in a history: the position of the
 * next change (absolute, see zk_feed_log) and the next event in it, plus
 * what the subscription wants. zk_feed_cursor_next() hands out the wanted
 * events in position order:
 *
 *	init(from) --next--> EVENT (ch, index) ... --next--> END (caught up:
 *	                        |                          call again after an
 *	                        v                          append)
 *	                    COMPACTED (its position left the history: final)
 */
struct zk_feed_cursor {
	uint64_t pos;
	uint32_t seq;
	int64_t from_zxid; /* events before (from_zxid, from_seq) are skipped */
	int32_t from_seq;
	struct zk_bytes prefix; /* borrowed: lives as long as the cursor */
	int32_t flags;
	const struct zk_ids *ids; /* READ check; NULL: no check */
};

enum zk_feed_step {
	ZK_FEED_STEP_EVENT,
	ZK_FEED_STEP_END,
	ZK_FEED_STEP_COMPACTED,
};

/* A cursor at the first event at or after (from_zxid, from_seq); the
 * caller checked from_zxid >= zk_feed_log_oldest(log). */
void zk_feed_cursor_init(struct zk_feed_cursor *cur, const struct zk_feed_log *log,
			 int64_t from_zxid, int32_t from_seq, struct zk_bytes prefix, int32_t flags,
			 const struct zk_ids *ids);
/* The next wanted event: *ch and *index name it (valid until the change
 * is dropped) and the cursor moves past it. */
enum zk_feed_step zk_feed_cursor_next(struct zk_feed_cursor *cur, const struct zk_feed_log *log,
				      const struct zk_feed_change **ch, uint32_t *index);
/* The event `index` of `ch` as it goes on the wire for `flags`. */
void zk_feed_event_of(const struct zk_feed_change *ch, uint32_t index, int32_t flags,
		      struct zk_feed_event *ev);

/* Positions (zxid, seq) in order: a before b. */
static inline bool zk_feed_position_before(int64_t a_zxid, int32_t a_seq, int64_t b_zxid,
					   int32_t b_seq)
{
	return a_zxid < b_zxid || (a_zxid == b_zxid && a_seq < b_seq);
}

#endif
