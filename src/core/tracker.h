/*
 * tracker.h — requests that wait on the Raft leader, tracked until their
 * outcome is known: one key, one deadline policy, one life.
 *
 * Three kinds of request are decided by the leader rather than by the
 * server the client is connected to:
 *   TRACK_ZK_WRITE  a ZooKeeper write or session creation: the leader
 *                   proposes its entry; the outcome is the entry applied on
 *                   THIS server (read-your-writes), or the leader's refusal;
 *   TRACK_ADMIN     a membership change or leadership transfer: the outcome
 *                   is the leader's reply;
 *   TRACK_META      a controller request: the outcome is the leader's reply
 *                   (which may name a log index this server must apply
 *                   before the client is answered).
 * Each is keyed by (origin server, request id): the origin is the server the
 * client is connected to, the id comes from that server's one counter
 * (tracker_next_id), so a key names one request cluster-wide. The module
 * that owns the request embeds a `struct tracker_req` in it.
 *
 * A request's life (state names are enum tracker_state):
 *
 *        tracker_add
 *             |
 *             +--no leader / no link--> WAIT_LEADER --deadline--> failed NOLEADER
 *             |                              |
 *             |               resend() sends it (tracker_tick)
 *             v                              v
 *           SENT <---------------------------+
 *             |  \--timeout_ms elapsed (if set)--> failed TIMEOUT
 *             |   \--leader changed, or the link to it went down:
 *             |        outcome by reply: link down --> failed NOLEADER
 *             |        safe to retry: leader changed --> failed NOTLEADER
 *             |        otherwise --> IN_DOUBT (deadline: the policy)
 *             |                        |--deadline--> failed NOLEADER
 *             v                        v
 *          outcome (reply, apply, refusal) --> FINISHED
 *
 * And from SENT or IN_DOUBT, for a kind decided by apply: an entry of a
 * newer term than the one it was sent in is applied --> failed NOTLEADER
 * (tracker_on_term_applied).
 *
 * Every path ends the request exactly once: tracker_finish (the caller has
 * its outcome), the kind's reply callback (the leader's reply arrived), or
 * the kind's fail callback (with the error above). Afterwards the key is
 * forgotten, so a late reply or a late apply finds nothing and is dropped.
 *
 * The deadline policy (struct tracker_policy) is one number, leader_wait_ms
 * (tracker_leader_wait_ms: twice the election timeout plus 2 s): how long a
 * request may wait for a leader to be known, and how long its outcome may
 * stay in doubt after the leader changed, before the client is told.
 *
 * Pure: no I/O, no clock (now is an argument), no randomness (the first id
 * is an argument). The peer frames that carry requests and replies are
 * encoded here too (see PEER_FRAME_REQUEST / PEER_FRAME_REPLY in peers.h).
 *
 * Ownership: the caller owns every tracker_req; the tracker only links it.
 * A tracked request must be finished (tracker_finish) before it is freed.
 * Callbacks run with the request already untracked; they may free it.
 */
#ifndef KEEL_CORE_TRACKER_H
#define KEEL_CORE_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hash.h"
#include "base/list.h"

enum tracker_kind {
	TRACK_ZK_WRITE = 1,
	TRACK_ADMIN = 2,
	TRACK_META = 3,
};
#define TRACK_KIND_MAX 3

enum tracker_state {
	TRACK_FINISHED = 0, /* not tracked: before tracker_add, after the end */
	TRACK_WAIT_LEADER,  /* not sent yet: no leader known or no link to it */
	TRACK_SENT,         /* with the leader (or proposed here, on the leader) */
	TRACK_IN_DOUBT,     /* sent, then the leader changed: may still succeed */
};

struct tracker_req {
	uint64_t request_id;
	uint8_t kind;             /* enum tracker_kind */
	enum tracker_state state;
	uint64_t leader;          /* SENT/IN_DOUBT: where it went (self: proposed here) */
	uint64_t term;            /* SENT/IN_DOUBT: this server's term when it was sent */
	uint64_t timeout_ms;      /* SENT: give up this long after sending; 0: never */
	uint64_t deadline_ms;     /* 0: none */
	struct keel_list link;    /* in tracker.reqs */
};

/* The header of a leader's reply to a tracked request (the kind's body
 * follows): err is KEEL_OK when the body is the kind's answer, else why the
 * leader did not take the request (NOTLEADER, BUSY, NOMEM ...). */
struct tracker_reply {
	uint8_t kind;
	uint64_t origin;
	uint64_t request_id;
	enum keel_err err;
	uint64_t wait_index; /* the log index the answer depends on (0: none) */
};

/* What a kind does with its requests. `reply` is NULL for a kind whose
 * outcome is an applied entry (ZooKeeper writes): for it the leader replies
 * only to refuse, which is delivered to `fail`. `resend` is NULL for a kind
 * that never waits for a leader; it returns whether it sent the request. */
struct tracker_kind_ops {
	void (*fail)(void *ctx, struct tracker_req *req, enum keel_err err);
	void (*reply)(void *ctx, struct tracker_req *req, const struct tracker_reply *hdr,
		      const uint8_t *body, size_t size);
	bool (*resend)(void *ctx, struct tracker_req *req);
	void *ctx;
	/* Safe to retry: on a leader change fail NOTLEADER at once (the
	 * client asks the new leader sooner than the doubt would clear). */
	bool fail_on_leader_change;
};

struct tracker_policy {
	uint64_t leader_wait_ms;
};

static inline uint64_t tracker_leader_wait_ms(uint32_t election_timeout_ms)
{
	return 2u * (uint64_t)election_timeout_ms + 2000u;
}

struct tracker {
	struct tracker_policy policy;
	struct keel_hmap by_id;    /* request id -> tracker_req */
	struct keel_list reqs;     /* every tracked request, oldest first */
	uint64_t next_request_id;
	struct tracker_kind_ops kinds[TRACK_KIND_MAX + 1];
	uint64_t failed;           /* stats: requests that ended in fail */
};

/* Request ids start at `first_request_id` (the shell draws it at random so
 * the ids of two process lives do not meet in the log). */
enum keel_err tracker_init(struct tracker *t, const struct tracker_policy *policy,
			   uint64_t first_request_id);
/* Forgets every request without calling anyone (shutdown). */
void tracker_close(struct tracker *t);
void tracker_set_kind(struct tracker *t, enum tracker_kind kind,
		      const struct tracker_kind_ops *ops);

/* A fresh request id of this server (never 0). */
uint64_t tracker_next_id(struct tracker *t);

/* Starts tracking `req` (req->request_id from tracker_next_id) in state
 * FINISHED -> SENT (sent_to != 0: it went to that leader in `term`) or
 * WAIT_LEADER (sent_to == 0: deadline now + leader_wait_ms). `timeout_ms`
 * bounds SENT (0: no bound). KEEL_NOMEM leaves it untracked. */
enum keel_err tracker_add(struct tracker *t, struct tracker_req *req, enum tracker_kind kind,
			  uint64_t timeout_ms, uint64_t sent_to, uint64_t term, uint64_t now_ms);

struct tracker_req *tracker_find(const struct tracker *t, uint64_t request_id);
bool tracker_tracked(const struct tracker_req *req);

/* Ends `req` because its outcome is in the caller's hands (no callback). */
void tracker_finish(struct tracker *t, struct tracker_req *req);
/* Ends `req` with `err` through its kind's fail callback. */
void tracker_fail(struct tracker *t, struct tracker_req *req, enum keel_err err);

/* A leader's reply arrived: ends the request it names through its kind's
 * reply callback (or fail, for kinds decided by apply, with hdr->err).
 * Returns false when nothing matches (late, or not ours). */
bool tracker_on_reply(struct tracker *t, uint64_t self_id, const struct tracker_reply *hdr,
		      const uint8_t *body, size_t size);

/* The leader is now `leader` (0: unknown): what was sent to another one
 * is IN_DOUBT until now + leader_wait_ms, or fails NOTLEADER for kinds that
 * are safe to retry. */
void tracker_on_leader_change(struct tracker *t, uint64_t leader, uint64_t now_ms);
/* The link to `peer` went down: what was sent there and is decided by a
 * reply fails NOLEADER (the reply is lost); the rest is IN_DOUBT. */
void tracker_on_link_down(struct tracker *t, uint64_t peer, uint64_t now_ms);
/* An entry of `term` is about to be applied: its leader has committed in
 * that term, so an entry proposed in an older term and not applied yet is
 * gone for good. Requests decided by apply, sent in an older term, fail
 * NOTLEADER. */
void tracker_on_term_applied(struct tracker *t, uint64_t term);
/* Resends what waits for a leader (when one is known) and fails what is
 * past its deadline. `leader` and `term` are this server's current view. */
void tracker_tick(struct tracker *t, uint64_t leader, uint64_t term, uint64_t now_ms);

/* Whether a request of `kind` waits for a leader (TRACK_WAIT_LEADER): a
 * new one of that kind must wait behind it (the tick resends in order). */
bool tracker_holds(const struct tracker *t, enum tracker_kind kind);
size_t tracker_count(const struct tracker *t);

/* ---- the peer frames (after the frame type byte) ----
 *	request:  u8 kind | u64 origin | u64 request id | body
 *	reply:    u8 kind | u64 origin | u64 request id | u32 err | u64 wait index | body
 * The receiver checks the origin against the link's authenticated peer. */
#define TRACKER_REQUEST_HEADER_SIZE 17u
#define TRACKER_REPLY_HEADER_SIZE 29u
_Static_assert(TRACKER_REQUEST_HEADER_SIZE == 1 + 8 + 8, "request: kind, origin, request id");
_Static_assert(TRACKER_REPLY_HEADER_SIZE == 1 + 8 + 8 + 4 + 8,
	       "reply: kind, origin, request id, err, wait index");

void tracker_request_encode(struct keel_wbuf *w, enum tracker_kind kind, uint64_t origin,
			    uint64_t request_id);
/* Decodes a request header; *body points into `data`. KEEL_PROTO for a
 * short frame or an unknown kind. */
enum keel_err tracker_request_decode(const uint8_t *data, size_t size, uint8_t *kind,
				     uint64_t *origin, uint64_t *request_id, const uint8_t **body,
				     size_t *body_size);
void tracker_reply_encode(struct keel_wbuf *w, const struct tracker_reply *hdr);
enum keel_err tracker_reply_decode(const uint8_t *data, size_t size, struct tracker_reply *hdr,
				   const uint8_t **body, size_t *body_size);

#endif
