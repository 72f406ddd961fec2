/*
 * snapshot.c — compaction behind node-made snapshots, and chunked
 * InstallSnapshot whose bytes never live in the core.
 *
 * The node writes snapshots and tells the core (raft_snapshot_taken); the
 * core remembers the newest (index, term, config, size) and drops log
 * entries up to index - snapshot_trailing_entries.
 *
 * Leader: a follower whose next entry is compacted away goes to SNAPSHOT
 * state with the newest snapshot. The core queues chunk messages carrying
 * (meta, offset, size, last) but no bytes, at most max_inflight_chunks
 * ahead of what the follower acked; the sending node reads the bytes. Acks
 * move the window; a heartbeat answer with no progress since the previous
 * one rewinds to the acked offset (chunks were lost); a reject names the
 * offset to resume from; done ends the transfer (PROBE from index + 1).
 *
 *   follower state:  no transfer --offset 0--> receiving(meta, next_offset)
 *                    receiving --chunk at next_offset--> receiving
 *                    receiving --last chunk--> install (batch) --> no transfer
 *
 * Follower: a chunk at the expected offset of the snapshot being received
 * (or offset 0 of a new one) is copied into a chunk buffer and handed to the
 * node in the next persist batch; its ack leaves after that batch is
 * durable. The last chunk installs the snapshot: the log is compacted to it
 * if it already holds that entry, else replaced; the node gets the install
 * in the same batch.
 */
#include <stdlib.h>
#include <string.h>

#include "raft/raft_int.h"

void raft_chunks_free(struct raft *r, size_t n)
{
	KEEL_ASSERT(n <= r->n_chunks);
	for (size_t i = 0; i < n; i++) {
		free(r->chunks[i].data);
	}
	memmove(r->chunks, r->chunks + n, (r->n_chunks - n) * sizeof(*r->chunks));
	r->n_chunks -= (uint32_t)n;
}

/* ---- leader ---- */

void raft_snapshot_start(struct raft *r, struct raft_progress *pr)
{
	KEEL_ASSERT(r->snapshot.index >= r->log.base_index);
	KEEL_ASSERT(r->snapshot.index > 0);
	pr->state = RAFT_PROGRESS_SNAPSHOT;
	pr->snap = r->snapshot;
	pr->snap_next_offset = 0;
	pr->snap_acked_offset = 0;
	pr->snap_mark = 0;
	pr->snap_rewound = false;
	pr->probe_sent = false;
	pr->infl_count = 0;
	pr->infl_head = 0;
	pr->infl_total_bytes = 0;
	raft_snapshot_send(r, pr);
}

void raft_snapshot_send(struct raft *r, struct raft_progress *pr)
{
	KEEL_ASSERT(pr->state == RAFT_PROGRESS_SNAPSHOT);
	uint64_t chunk = r->opts.snapshot_chunk_bytes;
	uint64_t window = chunk * r->opts.max_inflight_chunks;
	uint64_t size = pr->snap.size_bytes;
	while (pr->snap_next_offset < size && pr->snap_next_offset - pr->snap_acked_offset < window) {
		uint64_t offset = pr->snap_next_offset;
		uint64_t len = KEEL_MIN(chunk, size - offset);
		struct raft_msg *m = raft_out_push(r, RAFT_MSG_SNAPSHOT, pr->id, false);
		m->snapshot.meta = pr->snap;
		m->snapshot.offset = offset;
		m->snapshot.size = (uint32_t)len;
		m->snapshot.last = offset + len == size;
		m->snapshot.data = NULL; /* the node fills it */
		pr->snap_next_offset = offset + len;
	}
}

void raft_snapshot_heartbeat_check(struct raft *r, struct raft_progress *pr)
{
	if (pr->snap_acked_offset == pr->snap_mark &&
	    pr->snap_next_offset > pr->snap_acked_offset) {
		pr->snap_next_offset = pr->snap_acked_offset; /* resend the window */
		pr->snap_rewound = true;
		pr->want_send = true;
	}
	(void)r;
	pr->snap_mark = pr->snap_acked_offset;
}

void raft_step_snapshot_resp(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_snapshot_resp *s = &m->snapshot_resp;
	if (r->role != RAFT_LEADER) {
		return;
	}
	struct raft_progress *pr = raft_progress_find(r, m->from);
	if (pr == NULL || pr->id == r->id) {
		return;
	}
	pr->recent_active = true;
	if (pr->state != RAFT_PROGRESS_SNAPSHOT || s->index != pr->snap.index ||
	    s->snap_term != pr->snap.term) {
		return;
	}
	if (s->done) {
		if (s->index > pr->match) {
			pr->match = s->index;
		}
		raft_progress_become_probe(pr);
		raft_maybe_commit(r);
		if (r->role == RAFT_LEADER) {
			raft_transfer_check(r, pr);
		}
		return;
	}
	if (s->next_offset > pr->snap.size_bytes) {
		return;
	}
	if (s->reject) {
		/* Every chunk behind a lost one is rejected: rewind once per
		 * loss, not once per reject, or resends multiply. */
		if (pr->snap_rewound && s->next_offset == pr->snap_acked_offset) {
			return;
		}
		pr->snap_acked_offset = s->next_offset;
		pr->snap_next_offset = s->next_offset;
		pr->snap_rewound = true;
	} else if (s->next_offset > pr->snap_acked_offset) {
		pr->snap_acked_offset = s->next_offset;
		pr->snap_rewound = false;
		if (pr->snap_next_offset < pr->snap_acked_offset) {
			pr->snap_next_offset = pr->snap_acked_offset;
		}
	}
	pr->want_send = true;
}

void raft_report_snapshot(struct raft *r, uint64_t peer, enum raft_snapshot_status status)
{
	KEEL_ASSERT(!r->handed.active);
	KEEL_ASSERT(status == RAFT_SNAPSHOT_FAILED);
	if (r->role != RAFT_LEADER) {
		return;
	}
	struct raft_progress *pr = raft_progress_find(r, peer);
	if (pr == NULL || pr->state != RAFT_PROGRESS_SNAPSHOT) {
		return;
	}
	/* Back to probing; paused until the next heartbeat answer, when the
	 * transfer starts over with the newest snapshot. */
	raft_progress_become_probe(pr);
	pr->probe_sent = true;
	pr->want_send = false;
	pr->want_empty = false;
}

enum keel_err raft_snapshot_taken(struct raft *r, const struct raft_snapshot_meta *meta)
{
	KEEL_ASSERT(!r->handed.active);
	if (meta->index <= r->snapshot.index) {
		return meta->index == r->snapshot.index && meta->term == r->snapshot.term
			       ? KEEL_OK
			       : KEEL_STALE;
	}
	if (meta->index > r->applied || meta->size_bytes == 0 || !raft_config_valid(&meta->config)) {
		return KEEL_INVAL;
	}
	uint64_t term;
	if (!raft_log_term(&r->log, meta->index, &term) || term != meta->term) {
		return KEEL_INVAL;
	}
	struct raft_config config;
	raft_config_at(r, meta->index, &config);
	if (!raft_config_equal(&config, &meta->config)) {
		return KEEL_INVAL;
	}
	r->snapshot = *meta;
	uint64_t trailing = r->opts.snapshot_trailing_entries;
	uint64_t target = meta->index > trailing ? meta->index - trailing : 0;
	if (target > r->log.base_index) {
		KEEL_ASSERT(target <= r->persisted_index);
		KEEL_ASSERT(target < r->unstable_index);
		raft_config_at(r, target, &r->base_config);
		raft_log_compact(&r->log, target);
		if (r->config_index < target) {
			r->config_index = target;
		}
	}
	return KEEL_OK;
}

/* ---- follower ---- */

static void snapshot_resp(struct raft *r, const struct raft_msg *m, uint64_t next_offset,
			  bool reject, bool done)
{
	/* Acks and "done" claim durable state: they wait for the disk. */
	struct raft_msg *resp = raft_out_push(r, RAFT_MSG_SNAPSHOT_RESP, m->from, !reject);
	resp->snapshot_resp.index = m->snapshot.meta.index;
	resp->snapshot_resp.snap_term = m->snapshot.meta.term;
	resp->snapshot_resp.next_offset = next_offset;
	resp->snapshot_resp.reject = reject;
	resp->snapshot_resp.done = done;
}

static bool chunk_valid(const struct raft_msg *m)
{
	const struct raft_msg_snapshot *s = &m->snapshot;
	uint64_t total = s->meta.size_bytes;
	return s->meta.index > 0 && s->meta.term > 0 && s->meta.term <= m->term && total > 0 &&
	       s->offset < total && s->size > 0 && s->size <= total - s->offset &&
	       s->last == (s->offset + s->size == total) && s->data != NULL &&
	       raft_config_valid(&s->meta.config);
}

static void install(struct raft *r, const struct raft_snapshot_meta *meta)
{
	KEEL_ASSERT(meta->index > r->commit);
	uint64_t term;
	bool keep = raft_log_term(&r->log, meta->index, &term) && term == meta->term;
	if (keep) {
		/* We hold that entry: the suffix after it still matches. */
		raft_log_compact(&r->log, meta->index);
	} else {
		raft_log_reset(&r->log, meta->index, meta->term);
		raft_on_truncate_persist(r, meta->index + 1);
	}
	if (r->unstable_index <= meta->index) {
		r->unstable_index = meta->index + 1;
	}
	r->base_config = meta->config;
	raft_config_reload(r);
	r->commit = meta->index;
	r->applied_handed = meta->index;
	r->snapshot = *meta;
	r->install_pending = true;
	r->install_wait_index = meta->index;
	r->install.meta = *meta;
	r->install.discard_log = !keep;
}

void raft_step_snapshot(struct raft *r, const struct raft_msg *m)
{
	const struct raft_msg_snapshot *s = &m->snapshot;
	KEEL_ASSERT(m->term == r->term);
	KEEL_ASSERT(r->role != RAFT_LEADER);
	if (r->role != RAFT_FOLLOWER || r->leader != m->from) {
		raft_become_follower(r, m->term, m->from);
	} else {
		r->leader_contact = true;
		r->leader_contact_ms = r->now_ms;
		raft_reset_election_timer(r);
	}
	if (!chunk_valid(m)) {
		return;
	}
	if (s->meta.index <= r->commit) {
		snapshot_resp(r, m, s->meta.size_bytes, false, true); /* have it */
		return;
	}
	/* Two servers' files of one snapshot need not be byte-identical:
	 * never mix chunks from different senders. */
	bool same = r->snapshot_pending && r->pending_meta.index == s->meta.index &&
		    r->pending_meta.term == s->meta.term &&
		    r->pending_meta.size_bytes == s->meta.size_bytes && r->pending_leader == m->from;
	if (same && s->offset < r->pending_next_offset) {
		snapshot_resp(r, m, r->pending_next_offset, false, false); /* duplicate */
		return;
	}
	if ((same && s->offset > r->pending_next_offset) || (!same && s->offset != 0)) {
		snapshot_resp(r, m, same ? r->pending_next_offset : 0, true, false);
		return;
	}
	if (r->n_chunks == r->opts.max_inflight_chunks) {
		return; /* no buffer: the leader resends after a heartbeat */
	}
	uint8_t *data = malloc(s->size);
	if (data == NULL) {
		return;
	}
	memcpy(data, s->data, s->size);
	if (!same) {
		r->snapshot_pending = true;
		r->pending_meta = s->meta;
		r->pending_next_offset = 0;
		r->pending_leader = m->from;
	}
	struct raft_chunk_buf *c = &r->chunks[r->n_chunks++];
	c->data = data;
	c->chunk.meta = s->meta;
	c->chunk.offset = s->offset;
	c->chunk.size = s->size;
	c->chunk.last = s->last;
	c->chunk.data = data;
	r->pending_next_offset = s->offset + s->size;
	if (s->last) {
		r->snapshot_pending = false;
		install(r, &s->meta);
		snapshot_resp(r, m, s->meta.size_bytes, false, true);
		return;
	}
	snapshot_resp(r, m, r->pending_next_offset, false, false);
}
