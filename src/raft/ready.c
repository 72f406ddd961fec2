/*
 * ready.c — what the core hands to the node, and what must wait for disk.
 *
 * Outbox: messages queue here between readies (at most max_outbox_msgs;
 * more are dropped, which Raft tolerates like any network loss). A message
 * that depends on durable state (a vote grant, an append or snapshot-chunk
 * ack) carries need_batch: the persist batch that holds the state it
 * depends on. It stays in the outbox until raft_persisted() reports that
 * batch, and only then goes out in a ready's msgs. This is how the rules
 * "ack after persist" and "vote after term+vote are durable" are kept by
 * the core itself rather than by the node.
 *
 * Persist batches: a ready with unhanded persistent state (entries from
 * unstable_index on, a changed hard state, snapshot chunks or an install)
 * gets the next batch id. Up to max_persist_batches may be outstanding; the
 * ring `batches` remembers, per outstanding batch, the log prefix that will
 * be durable when it completes (valid_upto, lowered when a later truncation
 * removes entries it wrote), its hard state and snapshot install. Batches
 * complete in id order.
 *
 * Invariants: persisted_batch <= batch_seq; n_batches == batch_seq -
 * persisted_batch; persisted_index never counts an entry that is not in the
 * log with the term it was written with; unstable_index > persisted_index.
 */
#include <stdlib.h>
#include <string.h>

#include "raft/raft_int.h"

bool raft_needs_persist(const struct raft *r)
{
	return r->unstable_index <= raft_log_last(&r->log) || r->hard_state_dirty ||
	       r->n_chunks > 0 || r->install_pending;
}

void raft_mark_hard_state(struct raft *r)
{
	r->hard_state_dirty = true;
}

struct raft_msg *raft_out_push(struct raft *r, uint8_t type, uint64_t to, bool after_persist)
{
	KEEL_ASSERT(to != 0);
	KEEL_ASSERT(to != r->id);
	static const struct raft_msg zero_msg;
	if (r->n_out == r->out_cap) {
		size_t cap = r->out_cap == 0 ? 64 : r->out_cap * 2;
		if (cap > r->opts.max_outbox_msgs) {
			cap = r->opts.max_outbox_msgs;
		}
		struct raft_out *out = cap > r->out_cap ? realloc(r->out, cap * sizeof(*out)) : NULL;
		if (out == NULL) {
			/* Full (or no memory): lose this message, as a network
			 * would. The caller writes into a scratch slot. */
			r->out_dropped++;
			r->out_scratch.msg = zero_msg;
			return &r->out_scratch.msg;
		}
		r->out = out;
		r->out_cap = cap;
	}
	struct raft_out *o = &r->out[r->n_out++];
	memset(o, 0, sizeof(*o));
	o->msg.type = type;
	o->msg.from = r->id;
	o->msg.to = to;
	o->msg.term = r->term;
	if (after_persist) {
		uint64_t need = raft_needs_persist(r) ? r->batch_seq + 1 : r->batch_seq;
		o->need_batch = need > r->persisted_batch ? need : 0;
	}
	return &o->msg;
}

/* A leader that steps down must not send what it queued as leader. */
void raft_out_drop_leader_msgs(struct raft *r)
{
	size_t j = 0;
	for (size_t i = 0; i < r->n_out; i++) {
		uint8_t t = r->out[i].msg.type;
		bool leader_msg = t == RAFT_MSG_APPEND || t == RAFT_MSG_HEARTBEAT ||
				  t == RAFT_MSG_SNAPSHOT || t == RAFT_MSG_TIMEOUT_NOW;
		if (!leader_msg) {
			r->out[j++] = r->out[i];
		}
	}
	r->n_out = j;
}

/* Entries >= index leave the log (a follower's conflict, or a snapshot
 * that replaces the log): no outstanding batch may make them count. */
void raft_on_truncate_persist(struct raft *r, uint64_t index)
{
	KEEL_ASSERT(index > 0);
	if (r->persisted_index >= index) {
		r->persisted_index = index - 1;
	}
	if (r->unstable_index > index) {
		r->unstable_index = index;
	}
	uint32_t cap = r->opts.max_persist_batches;
	for (uint32_t i = 0; i < r->n_batches; i++) {
		struct raft_batch *b = &r->batches[(r->batch_head + i) % cap];
		if (b->valid_upto >= index) {
			b->valid_upto = index - 1;
		}
	}
}

static bool msgs_reserve(struct raft *r, size_t n)
{
	if (n <= r->ready_msgs_cap) {
		return true;
	}
	size_t cap = r->ready_msgs_cap == 0 ? 64 : r->ready_msgs_cap;
	while (cap < n) {
		cap *= 2;
	}
	struct raft_msg *msgs = realloc(r->ready_msgs, cap * sizeof(*msgs));
	if (msgs == NULL) {
		return false;
	}
	r->ready_msgs = msgs;
	r->ready_msgs_cap = cap;
	return true;
}

/* Points an outgoing append at its entries in the log. False when they are
 * gone (compacted since it was queued): the message is dropped, like a
 * lost one. */
static bool resolve_append(struct raft *r, struct raft_msg *m)
{
	struct raft_msg_append *a = &m->append;
	uint64_t term;
	if (!raft_log_term(&r->log, a->prev_index, &term) || term != a->prev_term) {
		return false;
	}
	if (a->n_entries == 0) {
		a->entries = NULL;
		return true;
	}
	if (a->prev_index + a->n_entries > raft_log_last(&r->log)) {
		return false;
	}
	a->entries = raft_log_get(&r->log, a->prev_index + 1);
	return true;
}

/* Whether a queued message may go out now: it depends on nothing, or on
 * a batch already durable. When nothing new waits to be persisted, "the
 * next batch" it waited for is really the last one handed out. */
static bool out_sendable(const struct raft *r, const struct raft_out *o)
{
	uint64_t need = o->need_batch;
	if (need > r->batch_seq && !raft_needs_persist(r)) {
		need = r->batch_seq;
	}
	return need == 0 || need <= r->persisted_batch;
}

/* Moves every sendable message from the outbox to the ready (held ones
 * stay queued, in order). */
static void collect_msgs(struct raft *r, struct raft_ready *rd)
{
	if (!msgs_reserve(r, r->n_out)) {
		return; /* retried at the next ready */
	}
	size_t n = 0;
	size_t kept = 0;
	for (size_t i = 0; i < r->n_out; i++) {
		struct raft_out *o = &r->out[i];
		if (!out_sendable(r, o)) {
			r->out[kept++] = *o;
			continue;
		}
		if (o->msg.type == RAFT_MSG_APPEND && !resolve_append(r, &o->msg)) {
			continue;
		}
		if (o->msg.type == RAFT_MSG_VOTE_RESP && o->msg.vote_resp.granted &&
		    !o->msg.vote_resp.pre_vote) {
			/* A real vote leaves only once it is durable. */
			KEEL_ASSERT(r->durable_hs.term >= o->msg.term);
			KEEL_ASSERT(r->durable_hs.term > o->msg.term ||
				    r->durable_hs.vote == o->msg.to);
		}
		r->ready_msgs[n++] = o->msg;
	}
	r->n_out = kept;
	rd->msgs = r->ready_msgs;
	rd->n_msgs = n;
}

static void collect_committed(struct raft *r, struct raft_ready *rd)
{
	uint64_t upto = KEEL_MIN(r->commit, r->persisted_index);
	upto = KEEL_MIN(upto, raft_log_last(&r->log));
	r->handed.last_committed = r->applied_handed;
	if (r->install_wait_index != 0 || upto <= r->applied_handed) {
		return;
	}
	uint64_t from = r->applied_handed + 1;
	KEEL_ASSERT(from > r->log.base_index);
	uint64_t bytes = 0;
	uint64_t last = from;
	for (uint64_t i = from; i <= upto; i++) {
		uint64_t size = raft_log_get(&r->log, i)->size;
		if (i > from && bytes + size > r->opts.max_apply_bytes) {
			break;
		}
		bytes += size;
		last = i;
	}
	rd->committed = raft_log_get(&r->log, from);
	rd->n_committed = (size_t)(last - from + 1);
	r->handed.last_committed = last;
}

static void collect_persist(struct raft *r, struct raft_ready *rd)
{
	r->handed.persist_id = 0;
	if (!raft_needs_persist(r)) {
		return;
	}
	if (r->n_batches >= r->opts.max_persist_batches) {
		return; /* backpressure: wait for raft_persisted() */
	}
	uint64_t id = r->batch_seq + 1;
	rd->persist_id = id;
	r->handed.persist_id = id;
	uint64_t last = raft_log_last(&r->log);
	r->handed.last_entry = last;
	if (r->unstable_index <= last) {
		KEEL_ASSERT(r->unstable_index > r->log.base_index);
		rd->entries = raft_log_get(&r->log, r->unstable_index);
		rd->n_entries = (size_t)(last - r->unstable_index + 1);
	}
	if (r->hard_state_dirty) {
		rd->hard_state_changed = true;
		rd->hard_state.term = r->term;
		rd->hard_state.vote = r->vote;
	}
	/* Chunk structs live in the chunk buffers; hand a parallel array. */
	if (r->n_chunks > 0) {
		rd->chunks = r->chunk_view;
		for (uint32_t i = 0; i < r->n_chunks; i++) {
			r->chunk_view[i] = r->chunks[i].chunk;
		}
		rd->n_chunks = r->n_chunks;
	}
	r->handed.n_chunks = r->n_chunks;
	if (r->install_pending) {
		rd->install = &r->install;
	}
}

bool raft_ready(struct raft *r, struct raft_ready *rd)
{
	KEEL_ASSERT(!r->handed.active);
	KEEL_ASSERT(r->restored);
	memset(rd, 0, sizeof(*rd));
	if (r->role == RAFT_LEADER) {
		raft_flush_appends(r);
	}
	memset(&r->handed, 0, sizeof(r->handed));
	collect_persist(r, rd);
	collect_msgs(r, rd);
	collect_committed(r, rd);
	rd->reads = r->results;
	rd->n_reads = r->n_results;
	r->handed.n_results = r->n_results;
	rd->role = r->role;
	rd->leader = r->leader;
	rd->term = r->term;
	rd->commit = r->commit;
	rd->soft_state_changed = r->role != r->last_role || r->leader != r->last_leader;
	bool any = rd->persist_id != 0 || rd->n_msgs > 0 || rd->n_committed > 0 ||
		   rd->n_reads > 0 || rd->soft_state_changed;
	r->handed.active = any;
	if (!any) {
		memset(rd, 0, sizeof(*rd));
	}
	return any;
}

void raft_advance(struct raft *r, const struct raft_ready *rd)
{
	if (!r->handed.active) {
		return; /* raft_ready() returned false (and nothing was handed) */
	}
	KEEL_ASSERT(rd->persist_id == r->handed.persist_id);
	if (rd->persist_id != 0) {
		KEEL_ASSERT(rd->persist_id == r->batch_seq + 1);
		KEEL_ASSERT(r->n_batches < r->opts.max_persist_batches);
		uint32_t cap = r->opts.max_persist_batches;
		struct raft_batch *b = &r->batches[(r->batch_head + r->n_batches) % cap];
		memset(b, 0, sizeof(*b));
		b->id = rd->persist_id;
		b->valid_upto = r->handed.last_entry;
		b->has_hard_state = rd->hard_state_changed;
		b->hard_state = rd->hard_state;
		b->install_index = rd->install != NULL ? rd->install->meta.index : 0;
		r->n_batches++;
		r->batch_seq = rd->persist_id;
		r->unstable_index = r->handed.last_entry + 1;
		if (rd->hard_state_changed) {
			r->hard_state_dirty = false;
		}
		raft_chunks_free(r, r->handed.n_chunks);
		r->install_pending = false;
	}
	KEEL_ASSERT(r->handed.last_committed >= r->applied_handed);
	r->applied_handed = r->handed.last_committed;
	KEEL_ASSERT(r->handed.n_results <= r->n_results);
	memmove(r->results, r->results + r->handed.n_results,
		(r->n_results - r->handed.n_results) * sizeof(*r->results));
	r->n_results -= (uint32_t)r->handed.n_results;
	r->last_role = rd->role;
	r->last_leader = rd->leader;
	r->handed.active = false;
}

enum keel_err raft_persisted(struct raft *r, uint64_t persist_id)
{
	KEEL_ASSERT(!r->handed.active);
	if (persist_id <= r->persisted_batch || persist_id > r->batch_seq) {
		return KEEL_INVAL;
	}
	uint32_t cap = r->opts.max_persist_batches;
	while (r->persisted_batch < persist_id) {
		KEEL_ASSERT(r->n_batches > 0);
		struct raft_batch *b = &r->batches[r->batch_head];
		KEEL_ASSERT(b->id == r->persisted_batch + 1);
		if (b->valid_upto > r->persisted_index) {
			r->persisted_index = b->valid_upto;
		}
		if (b->has_hard_state) {
			KEEL_ASSERT(b->hard_state.term >= r->durable_hs.term);
			r->durable_hs = b->hard_state;
		}
		if (b->install_index > r->applied) {
			r->applied = b->install_index;
		}
		if (b->install_index != 0 && b->install_index >= r->install_wait_index) {
			r->install_wait_index = 0;
		}
		r->persisted_batch = b->id;
		r->batch_head = (r->batch_head + 1) % cap;
		r->n_batches--;
	}
	KEEL_ASSERT(r->persisted_index <= raft_log_last(&r->log) ||
		    r->persisted_index == r->log.base_index);
	if (r->role == RAFT_LEADER) {
		struct raft_progress *self = raft_progress_find(r, r->id);
		if (self != NULL && r->persisted_index > self->match) {
			self->match = r->persisted_index;
			self->next = self->match + 1;
		}
		raft_maybe_commit(r);
	} else if (r->role == RAFT_CANDIDATE) {
		raft_tally_self_vote(r);
	}
	return KEEL_OK;
}
