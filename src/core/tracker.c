/*
 * tracker.c — requests that wait on the Raft leader (tracker.h).
 *
 * Ending requests from a sweep (leader change, link down, tick): the ones
 * to fail are first untracked and moved to a local list, then their
 * callbacks run one by one. A callback may therefore free its request,
 * finish others, or track new ones without disturbing the sweep.
 */
#include "core/tracker.h"

#include "base/assert.h"

static bool req_eq(const void *item, const void *key)
{
	return ((const struct tracker_req *)item)->request_id == *(const uint64_t *)key;
}

static uint64_t id_hash(uint64_t request_id)
{
	return keel_hash_u64(request_id);
}

enum keel_err tracker_init(struct tracker *t, const struct tracker_policy *policy,
			   uint64_t first_request_id)
{
	KEEL_ASSERT(policy->leader_wait_ms > 0);
	*t = (struct tracker){0};
	t->policy = *policy;
	keel_list_init(&t->reqs);
	t->next_request_id = first_request_id != 0 ? first_request_id : 1;
	return keel_hmap_init(&t->by_id, 256);
}

void tracker_close(struct tracker *t)
{
	struct keel_list *it;
	while ((it = keel_list_pop_front(&t->reqs)) != NULL) {
		KEEL_LIST_ITEM(it, struct tracker_req, link)->state = TRACK_FINISHED;
	}
	keel_hmap_close(&t->by_id);
}

void tracker_set_kind(struct tracker *t, enum tracker_kind kind,
		      const struct tracker_kind_ops *ops)
{
	KEEL_ASSERT(kind >= TRACK_ZK_WRITE);
	KEEL_ASSERT(kind <= TRACK_KIND_MAX);
	KEEL_ASSERT(ops->fail != NULL);
	t->kinds[kind] = *ops;
}

uint64_t tracker_next_id(struct tracker *t)
{
	uint64_t id = t->next_request_id++;
	if (id == 0) {
		id = t->next_request_id++;
	}
	return id;
}

bool tracker_tracked(const struct tracker_req *req)
{
	return req->state != TRACK_FINISHED;
}

static void set_sent(struct tracker *t, struct tracker_req *req, uint64_t leader, uint64_t term,
		     uint64_t now_ms)
{
	(void)t;
	req->state = TRACK_SENT;
	req->leader = leader;
	req->term = term;
	req->deadline_ms = req->timeout_ms != 0 ? now_ms + req->timeout_ms : 0;
}

enum keel_err tracker_add(struct tracker *t, struct tracker_req *req, enum tracker_kind kind,
			  uint64_t timeout_ms, uint64_t sent_to, uint64_t term, uint64_t now_ms)
{
	KEEL_ASSERT(req->request_id != 0);
	KEEL_ASSERT(kind >= TRACK_ZK_WRITE && kind <= TRACK_KIND_MAX);
	KEEL_ASSERT(t->kinds[kind].fail != NULL);
	KEEL_ASSERT(tracker_find(t, req->request_id) == NULL);
	enum keel_err rc = keel_hmap_insert(&t->by_id, id_hash(req->request_id), req);
	if (rc != KEEL_OK) {
		req->state = TRACK_FINISHED;
		return rc;
	}
	req->kind = (uint8_t)kind;
	req->timeout_ms = timeout_ms;
	keel_list_init(&req->link);
	keel_list_push_back(&t->reqs, &req->link);
	if (sent_to != 0) {
		set_sent(t, req, sent_to, term, now_ms);
	} else {
		KEEL_ASSERT(t->kinds[kind].resend != NULL);
		req->state = TRACK_WAIT_LEADER;
		req->leader = 0;
		req->term = 0;
		req->deadline_ms = now_ms + t->policy.leader_wait_ms;
	}
	return KEEL_OK;
}

struct tracker_req *tracker_find(const struct tracker *t, uint64_t request_id)
{
	return keel_hmap_find(&t->by_id, id_hash(request_id), req_eq, &request_id);
}

static void untrack(struct tracker *t, struct tracker_req *req)
{
	bool removed = keel_hmap_remove_item(&t->by_id, id_hash(req->request_id), req);
	KEEL_ASSERT(removed);
	keel_list_remove(&req->link);
	req->state = TRACK_FINISHED;
	req->deadline_ms = 0;
}

void tracker_finish(struct tracker *t, struct tracker_req *req)
{
	if (req->state == TRACK_FINISHED) {
		keel_list_remove(&req->link); /* maybe in a sweep's list */
		return;
	}
	untrack(t, req);
}

void tracker_fail(struct tracker *t, struct tracker_req *req, enum keel_err err)
{
	KEEL_ASSERT(err != KEEL_OK);
	KEEL_ASSERT(req->state != TRACK_FINISHED);
	untrack(t, req);
	t->failed++;
	const struct tracker_kind_ops *ops = &t->kinds[req->kind];
	ops->fail(ops->ctx, req, err);
}

bool tracker_on_reply(struct tracker *t, uint64_t self_id, const struct tracker_reply *hdr,
		      const uint8_t *body, size_t size)
{
	if (hdr->origin != self_id) {
		return false;
	}
	struct tracker_req *req = tracker_find(t, hdr->request_id);
	if (req == NULL || req->kind != hdr->kind) {
		return false;
	}
	const struct tracker_kind_ops *ops = &t->kinds[req->kind];
	if (ops->reply == NULL) {
		/* Decided by apply: the leader speaks only to refuse. */
		if (hdr->err == KEEL_OK) {
			return false;
		}
		tracker_fail(t, req, hdr->err);
		return true;
	}
	untrack(t, req);
	ops->reply(ops->ctx, req, hdr, body, size);
	return true;
}

/* Fails every request in `doomed` (already untracked) with `err`. */
static void fail_list(struct tracker *t, struct keel_list *doomed, enum keel_err err)
{
	struct keel_list *it;
	while ((it = keel_list_pop_front(doomed)) != NULL) {
		struct tracker_req *req = KEEL_LIST_ITEM(it, struct tracker_req, link);
		t->failed++;
		const struct tracker_kind_ops *ops = &t->kinds[req->kind];
		ops->fail(ops->ctx, req, err);
	}
}

static void doom(struct tracker *t, struct tracker_req *req, struct keel_list *doomed)
{
	untrack(t, req);
	keel_list_push_back(doomed, &req->link);
}

static void set_in_doubt(struct tracker *t, struct tracker_req *req, uint64_t now_ms)
{
	/* A later change never extends the wait. */
	uint64_t deadline = now_ms + t->policy.leader_wait_ms;
	if (req->deadline_ms == 0 || req->deadline_ms > deadline) {
		req->deadline_ms = deadline;
	}
	req->state = TRACK_IN_DOUBT;
}

void tracker_on_leader_change(struct tracker *t, uint64_t leader, uint64_t now_ms)
{
	struct keel_list doomed;
	keel_list_init(&doomed);
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &t->reqs) {
		struct tracker_req *req = KEEL_LIST_ITEM(it, struct tracker_req, link);
		if ((req->state != TRACK_SENT && req->state != TRACK_IN_DOUBT) ||
		    req->leader == leader) {
			continue;
		}
		if (t->kinds[req->kind].fail_on_leader_change) {
			doom(t, req, &doomed);
		} else {
#ifdef KEEL_PLANT_BUG_KEEP_PENDING_ON_LEADER_CHANGE
			/* PLANTED BUG (simulator only: build/keel-sim-bug-keep-
			 * pending-on-leader-change; tests/sim catches it): a
			 * request decided by apply stays pending and goes again
			 * to the new leader, as if the old one had surely lost
			 * it. When the old leader's entry survives, the write is
			 * applied twice (its client hears of the first). */
			if (t->kinds[req->kind].reply == NULL && t->kinds[req->kind].resend != NULL) {
				req->state = TRACK_WAIT_LEADER;
				req->leader = 0;
				req->term = 0;
				req->deadline_ms = now_ms + t->policy.leader_wait_ms;
				continue;
			}
#endif
			set_in_doubt(t, req, now_ms);
		}
	}
	fail_list(t, &doomed, KEEL_NOTLEADER);
}

void tracker_on_link_down(struct tracker *t, uint64_t peer, uint64_t now_ms)
{
	struct keel_list doomed;
	keel_list_init(&doomed);
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &t->reqs) {
		struct tracker_req *req = KEEL_LIST_ITEM(it, struct tracker_req, link);
		if ((req->state != TRACK_SENT && req->state != TRACK_IN_DOUBT) ||
		    req->leader != peer) {
			continue;
		}
		if (t->kinds[req->kind].reply != NULL) {
			doom(t, req, &doomed);
		} else {
			set_in_doubt(t, req, now_ms);
		}
	}
	fail_list(t, &doomed, KEEL_NOLEADER);
}

void tracker_on_term_applied(struct tracker *t, uint64_t term)
{
	struct keel_list doomed;
	keel_list_init(&doomed);
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &t->reqs) {
		struct tracker_req *req = KEEL_LIST_ITEM(it, struct tracker_req, link);
		if ((req->state == TRACK_SENT || req->state == TRACK_IN_DOUBT) &&
		    t->kinds[req->kind].reply == NULL && req->term != 0 && req->term < term) {
			doom(t, req, &doomed);
		}
	}
	fail_list(t, &doomed, KEEL_NOTLEADER);
}

void tracker_tick(struct tracker *t, uint64_t leader, uint64_t term, uint64_t now_ms)
{
	struct keel_list no_leader, timed_out;
	keel_list_init(&no_leader);
	keel_list_init(&timed_out);
	struct keel_list *it, *next;
	/* Held requests go in the order they were added: once one of a kind
	 * cannot go, the later ones of that kind wait behind it. */
	bool stuck[TRACK_KIND_MAX + 1] = {false};
	KEEL_LIST_FOR_EACH_SAFE (it, next, &t->reqs) {
		struct tracker_req *req = KEEL_LIST_ITEM(it, struct tracker_req, link);
		if (req->state == TRACK_WAIT_LEADER && leader != 0 && !stuck[req->kind]) {
			const struct tracker_kind_ops *ops = &t->kinds[req->kind];
			if (ops->resend(ops->ctx, req)) {
				set_sent(t, req, leader, term, now_ms);
				continue;
			}
			stuck[req->kind] = true;
		}
		if (req->deadline_ms == 0 || now_ms < req->deadline_ms) {
			continue;
		}
		doom(t, req, req->state == TRACK_SENT ? &timed_out : &no_leader);
	}
	fail_list(t, &no_leader, KEEL_NOLEADER);
	fail_list(t, &timed_out, KEEL_TIMEOUT);
}

bool tracker_holds(const struct tracker *t, enum tracker_kind kind)
{
	const struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &t->reqs) {
		const struct tracker_req *req = KEEL_LIST_ITEM(it, struct tracker_req, link);
		if (req->state == TRACK_WAIT_LEADER && req->kind == kind) {
			return true;
		}
	}
	return false;
}

size_t tracker_count(const struct tracker *t)
{
	return keel_hmap_count(&t->by_id);
}

/* ---- frames ---- */

static bool kind_known(uint8_t kind)
{
	return kind >= TRACK_ZK_WRITE && kind <= TRACK_KIND_MAX;
}

void tracker_request_encode(struct keel_wbuf *w, enum tracker_kind kind, uint64_t origin,
			    uint64_t request_id)
{
	keel_wbuf_u8(w, (uint8_t)kind);
	keel_wbuf_u64(w, origin);
	keel_wbuf_u64(w, request_id);
}

enum keel_err tracker_request_decode(const uint8_t *data, size_t size, uint8_t *kind,
				     uint64_t *origin, uint64_t *request_id, const uint8_t **body,
				     size_t *body_size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	*kind = keel_rbuf_u8(&r);
	*origin = keel_rbuf_u64(&r);
	*request_id = keel_rbuf_u64(&r);
	if (!keel_rbuf_ok(&r) || !kind_known(*kind) || *origin == 0 || *request_id == 0) {
		return KEEL_PROTO;
	}
	*body_size = keel_rbuf_remaining(&r);
	*body = data + TRACKER_REQUEST_HEADER_SIZE;
	return KEEL_OK;
}

void tracker_reply_encode(struct keel_wbuf *w, const struct tracker_reply *hdr)
{
	keel_wbuf_u8(w, hdr->kind);
	keel_wbuf_u64(w, hdr->origin);
	keel_wbuf_u64(w, hdr->request_id);
	keel_wbuf_u32(w, (uint32_t)hdr->err);
	keel_wbuf_u64(w, hdr->wait_index);
}

enum keel_err tracker_reply_decode(const uint8_t *data, size_t size, struct tracker_reply *hdr,
				   const uint8_t **body, size_t *body_size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, data, size);
	hdr->kind = keel_rbuf_u8(&r);
	hdr->origin = keel_rbuf_u64(&r);
	hdr->request_id = keel_rbuf_u64(&r);
	uint32_t err = keel_rbuf_u32(&r);
	hdr->wait_index = keel_rbuf_u64(&r);
	if (!keel_rbuf_ok(&r) || !kind_known(hdr->kind) || err >= (uint32_t)KEEL_ERR_COUNT ||
	    hdr->origin == 0 || hdr->request_id == 0) {
		return KEEL_PROTO;
	}
	hdr->err = (enum keel_err)err;
	*body_size = keel_rbuf_remaining(&r);
	*body = data + TRACKER_REPLY_HEADER_SIZE;
	return KEEL_OK;
}
