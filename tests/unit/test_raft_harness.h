/*
 * test_raft_harness.h — a tiny deterministic cluster for the raft unit and
 * trace tests (header-only: each test binary is one .c file).
 *
 * Every node has its own clock, a "disk" (hard state, entries, snapshot)
 * and a list of persist batches handed out but not yet durable; nothing is
 * persisted until the test says so (th_persist) unless auto_persist is on.
 * Messages go into one FIFO queue, deep-copied (entries and chunk bytes), and
 * are delivered when the test says so; links can be cut per direction.
 * The state machine is a hash chain over applied entry data, so two nodes
 * that applied the same entries have the same hash; a snapshot is that hash
 * and index padded to snap_size bytes, so that it travels in several chunks.
 *
 * Not thread-safe, not for production: aborts on allocation failure.
 */
#ifndef KEEL_TEST_RAFT_HARNESS_H
#define KEEL_TEST_RAFT_HARNESS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "raft/raft.h"

#define TH_MAX_NODES 8
#define TH_MAX_APPLIED 4096

struct th_entry {
	struct raft_entry e;
	uint8_t *data;
};

struct th_batch {
	uint64_t id;
	bool has_hs;
	struct raft_hard_state hs;
	bool has_install;
	struct raft_snapshot_install install;
	struct th_entry *entries;
	size_t n_entries;
	/* chunk bytes appended to the temp snapshot */
	uint8_t *chunk_bytes;
	size_t chunk_size;
	uint64_t chunk_offset;
	bool has_chunk;
};

struct th_msg {
	struct raft_msg m;
	struct th_entry *entries; /* copies */
	struct raft_entry *views;
	uint8_t *chunk;
};

struct th_node {
	uint64_t id;
	struct raft *r;
	bool up;
	uint64_t now_ms;
	bool auto_persist;
	/* disk */
	struct raft_hard_state hs;
	struct th_entry *log;
	size_t n_log;
	size_t cap_log;
	bool has_snap;
	struct raft_snapshot_meta snap;
	uint8_t *snap_bytes;
	uint8_t *temp_bytes; /* snapshot being received */
	size_t temp_size;
	/* not yet durable */
	struct th_batch *pending;
	size_t n_pending;
	/* state machine */
	uint64_t applied;
	uint64_t sm_hash;
	uint64_t applied_hash[TH_MAX_APPLIED]; /* sm hash after index i */
	uint64_t applied_term[TH_MAX_APPLIED];
	/* outputs the tests look at */
	struct raft_read_result reads[64];
	size_t n_reads;
	uint8_t role;
	uint64_t leader;
};

struct th_cluster {
	struct th_node nodes[TH_MAX_NODES];
	size_t n;
	struct th_msg *queue;
	size_t n_queue;
	size_t cap_queue;
	bool cut[TH_MAX_NODES + 1][TH_MAX_NODES + 1]; /* [from][to] by id */
	struct raft_options opts;
	uint64_t snap_size;
	uint64_t seed;
	FILE *trace; /* NULL: silent */
	bool trace_heartbeats;
};

static inline void *th_xmalloc(size_t n)
{
	void *p = malloc(n == 0 ? 1 : n);
	if (p == NULL) {
		abort();
	}
	return p;
}

static inline void *th_xrealloc(void *p, size_t n)
{
	p = realloc(p, n == 0 ? 1 : n);
	if (p == NULL) {
		abort();
	}
	return p;
}

static inline void th_tracef(struct th_cluster *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void th_tracef(struct th_cluster *c, const char *fmt, ...)
{
	if (c->trace == NULL) {
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	vfprintf(c->trace, fmt, ap);
	va_end(ap);
}

static inline struct th_node *th_node(struct th_cluster *c, uint64_t id)
{
	if (id == 0 || id > c->n) {
		abort();
	}
	return &c->nodes[id - 1];
}

static inline void th_entry_copy(struct th_entry *dst, const struct raft_entry *src)
{
	dst->e = *src;
	dst->data = NULL;
	if (src->size > 0) {
		dst->data = th_xmalloc(src->size);
		memcpy(dst->data, src->data, src->size);
	}
	dst->e.data = dst->data;
}

static inline void th_node_start(struct th_cluster *c, struct th_node *n)
{
	struct raft_options o = c->opts;
	o.id = n->id;
	keel_rng_seed(&o.rng, c->seed * 131 + n->id);
	if (raft_init(&n->r, &o) != KEEL_OK) {
		abort();
	}
	struct raft_entry *views = th_xmalloc(sizeof(*views) * (n->n_log + 1));
	for (size_t i = 0; i < n->n_log; i++) {
		views[i] = n->log[i].e;
	}
	enum keel_err err = raft_restore(n->r, &n->hs, n->has_snap ? &n->snap : NULL, views, n->n_log);
	free(views);
	if (err != KEEL_OK) {
		abort();
	}
	n->up = true;
	n->applied = n->has_snap ? n->snap.index : 0;
	if (n->has_snap) {
		memcpy(&n->sm_hash, n->snap_bytes + 8, 8);
	} else {
		n->sm_hash = 0;
	}
	n->role = RAFT_FOLLOWER;
	n->leader = 0;
	raft_tick(n->r, n->now_ms);
}

/* A cluster of n_voters voters (ids 1..n_voters) plus n_learners learners;
 * every member is bootstrapped with the same config entry. */
static inline void th_init(struct th_cluster *c, size_t n_voters, size_t n_learners,
		    const struct raft_options *opts, uint64_t seed)
{
	memset(c, 0, sizeof(*c));
	c->n = n_voters + n_learners;
	c->seed = seed;
	c->snap_size = 100;
	if (opts != NULL) {
		c->opts = *opts;
	} else {
		raft_options_default(&c->opts);
		c->opts.election_timeout_ms = 1000;
		c->opts.heartbeat_interval_ms = 100;
		c->opts.snapshot_chunk_bytes = 40;
		c->opts.snapshot_trailing_entries = 0;
	}
	struct raft_config config = {0};
	for (size_t i = 0; i < c->n; i++) {
		config.members[i].id = i + 1;
		config.members[i].role = i < n_voters ? RAFT_VOTER : RAFT_LEARNER;
	}
	config.count = (uint32_t)c->n;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 4096);
	struct raft_entry boot;
	if (raft_bootstrap_entry(&config, &w, &boot) != KEEL_OK) {
		abort();
	}
	for (size_t i = 0; i < c->n; i++) {
		struct th_node *n = &c->nodes[i];
		n->id = i + 1;
		n->hs.term = 1;
		n->log = th_xmalloc(sizeof(*n->log) * 16);
		n->cap_log = 16;
		th_entry_copy(&n->log[0], &boot);
		n->n_log = 1;
		th_node_start(c, n);
	}
	keel_wbuf_free(&w);
}

/* A node that joins later: empty disk. */
static inline uint64_t th_add_empty_node(struct th_cluster *c)
{
	struct th_node *n = &c->nodes[c->n++];
	memset(n, 0, sizeof(*n));
	n->id = c->n;
	n->now_ms = c->nodes[0].now_ms;
	n->log = th_xmalloc(sizeof(*n->log) * 16);
	n->cap_log = 16;
	th_node_start(c, n);
	return n->id;
}

static inline void th_batch_free(struct th_batch *b)
{
	for (size_t i = 0; i < b->n_entries; i++) {
		free(b->entries[i].data);
	}
	free(b->entries);
	free(b->chunk_bytes);
}

static inline void th_disk_truncate(struct th_node *n, uint64_t from_index)
{
	while (n->n_log > 0 && n->log[n->n_log - 1].e.index >= from_index) {
		free(n->log[n->n_log - 1].data);
		n->n_log--;
	}
}

static inline void th_disk_drop_upto(struct th_node *n, uint64_t index)
{
	size_t k = 0;
	for (size_t i = 0; i < n->n_log; i++) {
		if (n->log[i].e.index <= index) {
			free(n->log[i].data);
		} else {
			n->log[k++] = n->log[i];
		}
	}
	n->n_log = k;
}

static inline void th_sm_apply(struct th_node *n, const struct raft_entry *e)
{
	if (e->index != n->applied + 1) {
		abort(); /* applied out of order */
	}
	if (e->type == RAFT_ENTRY_NORMAL) {
		n->sm_hash = keel_hash_bytes(e->data, e->size, n->sm_hash ^ e->index);
	}
	n->applied = e->index;
	if (e->index < TH_MAX_APPLIED) {
		n->applied_hash[e->index] = n->sm_hash;
		n->applied_term[e->index] = e->term;
	}
}

/* Makes the oldest pending batch durable and tells the core. */
static inline void th_persist_one(struct th_cluster *c, struct th_node *n)
{
	if (n->n_pending == 0) {
		return;
	}
	struct th_batch *b = &n->pending[0];
	if (b->has_chunk) {
		if (b->chunk_offset == 0) {
			free(n->temp_bytes);
			n->temp_bytes = NULL;
			n->temp_size = 0;
		}
		if (b->chunk_offset == n->temp_size) {
			n->temp_bytes = th_xrealloc(n->temp_bytes, n->temp_size + b->chunk_size);
			memcpy(n->temp_bytes + n->temp_size, b->chunk_bytes, b->chunk_size);
			n->temp_size += b->chunk_size;
		}
	}
	if (b->has_install) {
		if (n->temp_size != b->install.meta.size_bytes) {
			abort(); /* installed an incomplete snapshot */
		}
		free(n->snap_bytes);
		n->snap_bytes = n->temp_bytes;
		n->temp_bytes = NULL;
		n->temp_size = 0;
		n->snap = b->install.meta;
		n->has_snap = true;
		if (b->install.discard_log) {
			th_disk_truncate(n, 0);
		} else {
			th_disk_drop_upto(n, b->install.meta.index);
		}
		memcpy(&n->sm_hash, n->snap_bytes + 8, 8);
		n->applied = b->install.meta.index;
		if (n->applied < TH_MAX_APPLIED) {
			n->applied_hash[n->applied] = n->sm_hash;
			n->applied_term[n->applied] = b->install.meta.term;
		}
	}
	if (b->n_entries > 0) {
		th_disk_truncate(n, b->entries[0].e.index);
		for (size_t i = 0; i < b->n_entries; i++) {
			if (n->n_log == n->cap_log) {
				n->cap_log *= 2;
				n->log = th_xrealloc(n->log, sizeof(*n->log) * n->cap_log);
			}
			n->log[n->n_log++] = b->entries[i];
			b->entries[i].data = NULL;
		}
	}
	if (b->has_hs) {
		n->hs = b->hs;
	}
	uint64_t id = b->id;
	bool installed = b->has_install;
	th_batch_free(b);
	memmove(&n->pending[0], &n->pending[1], (n->n_pending - 1) * sizeof(*n->pending));
	n->n_pending--;
	if (raft_persisted(n->r, id) != KEEL_OK) {
		abort();
	}
	if (installed) {
		raft_applied(n->r, n->applied);
	}
	(void)c;
}

static inline void th_persist(struct th_cluster *c, uint64_t id)
{
	struct th_node *n = th_node(c, id);
	while (n->n_pending > 0) {
		th_persist_one(c, n);
	}
}

static inline void th_msg_trace(struct th_cluster *c, const struct raft_msg *m, const char *verb)
{
	if (c->trace == NULL) {
		return;
	}
	if (!c->trace_heartbeats &&
	    (m->type == RAFT_MSG_HEARTBEAT || m->type == RAFT_MSG_HEARTBEAT_RESP)) {
		return;
	}
	th_tracef(c, "%s %llu->%llu %s term=%llu", verb, (unsigned long long)m->from,
		  (unsigned long long)m->to, raft_msg_type_name(m->type),
		  (unsigned long long)m->term);
	switch (m->type) {
	case RAFT_MSG_APPEND:
		th_tracef(c, " prev=%llu/%llu commit=%llu entries=[", (unsigned long long)m->append.prev_index,
			  (unsigned long long)m->append.prev_term, (unsigned long long)m->append.commit);
		for (uint32_t i = 0; i < m->append.n_entries; i++) {
			const struct raft_entry *e = &m->append.entries[i];
			th_tracef(c, "%s%llu/%llu", i ? " " : "", (unsigned long long)e->index,
				  (unsigned long long)e->term);
		}
		th_tracef(c, "]");
		break;
	case RAFT_MSG_APPEND_RESP:
		th_tracef(c, " %s index=%llu", m->append_resp.reject ? "reject" : "ok",
			  (unsigned long long)m->append_resp.index);
		if (m->append_resp.reject) {
			th_tracef(c, " hint=%llu/%llu", (unsigned long long)m->append_resp.hint_index,
				  (unsigned long long)m->append_resp.hint_term);
		}
		break;
	case RAFT_MSG_VOTE:
		th_tracef(c, "%s last=%llu/%llu", m->vote.pre_vote ? " pre" : "",
			  (unsigned long long)m->vote.last_index, (unsigned long long)m->vote.last_term);
		break;
	case RAFT_MSG_VOTE_RESP:
		th_tracef(c, "%s %s", m->vote_resp.pre_vote ? " pre" : "",
			  m->vote_resp.granted ? "granted" : "rejected");
		break;
	case RAFT_MSG_SNAPSHOT:
		th_tracef(c, " snap=%llu/%llu off=%llu size=%u%s", (unsigned long long)m->snapshot.meta.index,
			  (unsigned long long)m->snapshot.meta.term, (unsigned long long)m->snapshot.offset,
			  m->snapshot.size, m->snapshot.last ? " last" : "");
		break;
	case RAFT_MSG_SNAPSHOT_RESP:
		th_tracef(c, " snap=%llu next=%llu%s%s", (unsigned long long)m->snapshot_resp.index,
			  (unsigned long long)m->snapshot_resp.next_offset,
			  m->snapshot_resp.reject ? " reject" : "", m->snapshot_resp.done ? " done" : "");
		break;
	case RAFT_MSG_HEARTBEAT:
		th_tracef(c, " commit=%llu seq=%llu", (unsigned long long)m->heartbeat.commit,
			  (unsigned long long)m->heartbeat.read_seq);
		break;
	case RAFT_MSG_HEARTBEAT_RESP:
		th_tracef(c, " seq=%llu", (unsigned long long)m->heartbeat_resp.read_seq);
		break;
	case RAFT_MSG_READ_INDEX:
		th_tracef(c, " ctx=%llu", (unsigned long long)m->read_index.ctx);
		break;
	case RAFT_MSG_READ_INDEX_RESP:
		th_tracef(c, " ctx=%llu index=%llu err=%u", (unsigned long long)m->read_index_resp.ctx,
			  (unsigned long long)m->read_index_resp.index, m->read_index_resp.err);
		break;
	default:
		break;
	}
	th_tracef(c, "\n");
}

/* Queues a deep copy; the sender fills snapshot chunk bytes. Returns the
 * peer whose chunk the sender could not supply (to report after advance),
 * or 0. */
static inline uint64_t th_enqueue(struct th_cluster *c, struct th_node *from, const struct raft_msg *m)
{
	if (c->n_queue == c->cap_queue) {
		c->cap_queue = c->cap_queue == 0 ? 64 : c->cap_queue * 2;
		c->queue = th_xrealloc(c->queue, sizeof(*c->queue) * c->cap_queue);
	}
	struct th_msg *q = &c->queue[c->n_queue++];
	memset(q, 0, sizeof(*q));
	q->m = *m;
	if (m->type == RAFT_MSG_APPEND && m->append.n_entries > 0) {
		q->entries = th_xmalloc(sizeof(*q->entries) * m->append.n_entries);
		q->views = th_xmalloc(sizeof(*q->views) * m->append.n_entries);
		for (uint32_t i = 0; i < m->append.n_entries; i++) {
			th_entry_copy(&q->entries[i], &m->append.entries[i]);
			q->views[i] = q->entries[i].e;
		}
		q->m.append.entries = q->views;
	}
	if (m->type == RAFT_MSG_SNAPSHOT) {
		if (!from->has_snap || from->snap.index != m->snapshot.meta.index ||
		    m->snapshot.offset + m->snapshot.size > from->snap.size_bytes) {
			c->n_queue--;
			return m->to;
		}
		q->chunk = th_xmalloc(m->snapshot.size);
		memcpy(q->chunk, from->snap_bytes + m->snapshot.offset, m->snapshot.size);
		q->m.snapshot.data = q->chunk;
	}
	th_msg_trace(c, &q->m, "send");
	return 0;
}

static inline void th_msg_free(struct th_msg *q)
{
	if (q->entries != NULL) {
		for (uint32_t i = 0; i < q->m.append.n_entries; i++) {
			free(q->entries[i].data);
		}
	}
	free(q->entries);
	free(q->views);
	free(q->chunk);
}

/* One ready round for a node. Returns whether there was one. */
static inline bool th_ready(struct th_cluster *c, struct th_node *n)
{
	if (!n->up) {
		return false;
	}
	struct raft_ready rd;
	if (!raft_ready(n->r, &rd)) {
		return false;
	}
	if (rd.soft_state_changed) {
		if (rd.role != n->role || rd.leader != n->leader) {
			th_tracef(c, "node %llu: %s term=%llu leader=%llu\n", (unsigned long long)n->id,
				  raft_role_name(rd.role), (unsigned long long)rd.term,
				  (unsigned long long)rd.leader);
		}
		n->role = rd.role;
		n->leader = rd.leader;
	}
	if (rd.persist_id != 0) {
		n->pending = th_xrealloc(n->pending, sizeof(*n->pending) * (n->n_pending + 1));
		struct th_batch *b = &n->pending[n->n_pending++];
		memset(b, 0, sizeof(*b));
		b->id = rd.persist_id;
		b->has_hs = rd.hard_state_changed;
		b->hs = rd.hard_state;
		if (rd.n_chunks > 1) {
			abort(); /* the harness keeps one chunk per batch */
		}
		if (rd.n_chunks == 1) {
			b->has_chunk = true;
			b->chunk_offset = rd.chunks[0].offset;
			b->chunk_size = rd.chunks[0].size;
			b->chunk_bytes = th_xmalloc(b->chunk_size);
			memcpy(b->chunk_bytes, rd.chunks[0].data, b->chunk_size);
		}
		if (rd.install != NULL) {
			b->has_install = true;
			b->install = *rd.install;
		}
		b->n_entries = rd.n_entries;
		b->entries = th_xmalloc(sizeof(*b->entries) * (rd.n_entries + 1));
		for (size_t i = 0; i < rd.n_entries; i++) {
			th_entry_copy(&b->entries[i], &rd.entries[i]);
		}
	}
	uint64_t failed[TH_MAX_NODES];
	size_t n_failed = 0;
	for (size_t i = 0; i < rd.n_msgs; i++) {
		uint64_t peer = th_enqueue(c, n, &rd.msgs[i]);
		if (peer != 0 && n_failed < TH_MAX_NODES) {
			failed[n_failed++] = peer;
		}
	}
	for (size_t i = 0; i < rd.n_committed; i++) {
		th_sm_apply(n, &rd.committed[i]);
		th_tracef(c, "node %llu: apply %llu/%llu\n", (unsigned long long)n->id,
			  (unsigned long long)rd.committed[i].index,
			  (unsigned long long)rd.committed[i].term);
	}
	for (size_t i = 0; i < rd.n_reads; i++) {
		th_tracef(c, "node %llu: read ctx=%llu index=%llu %s\n", (unsigned long long)n->id,
			  (unsigned long long)rd.reads[i].ctx, (unsigned long long)rd.reads[i].index,
			  keel_errname(rd.reads[i].err));
		if (n->n_reads < 64) {
			n->reads[n->n_reads++] = rd.reads[i];
		}
	}
	uint64_t last_applied = rd.n_committed > 0 ? rd.committed[rd.n_committed - 1].index : 0;
	raft_advance(n->r, &rd);
	if (last_applied > 0) {
		raft_applied(n->r, last_applied);
	}
	for (size_t i = 0; i < n_failed; i++) {
		raft_report_snapshot(n->r, failed[i], RAFT_SNAPSHOT_FAILED);
	}
	if (n->auto_persist) {
		th_persist(c, n->id);
	}
	return true;
}

/* Readies every node until none has anything. */
static inline void th_ready_all(struct th_cluster *c)
{
	bool any = true;
	while (any) {
		any = false;
		for (size_t i = 0; i < c->n; i++) {
			any |= th_ready(c, &c->nodes[i]);
		}
	}
}

/* Delivers the first queued message; drops it if its link is cut or the
 * target is down. Returns false when the queue is empty. */
static inline bool th_deliver_one(struct th_cluster *c)
{
	if (c->n_queue == 0) {
		return false;
	}
	struct th_msg q = c->queue[0];
	memmove(&c->queue[0], &c->queue[1], (c->n_queue - 1) * sizeof(*c->queue));
	c->n_queue--;
	struct th_node *to = th_node(c, q.m.to);
	if (!c->cut[q.m.from][q.m.to] && to->up) {
		th_msg_trace(c, &q.m, "recv");
		if (raft_step(to->r, &q.m) != KEEL_OK) {
			abort();
		}
	}
	th_msg_free(&q);
	return true;
}

/* Runs to quiescence: readies, persists (if persist_all), delivers. */
static inline void th_stabilize(struct th_cluster *c, bool persist_all)
{
	for (int rounds = 0; rounds < 100000; rounds++) {
		th_ready_all(c);
		if (persist_all) {
			bool any = false;
			for (size_t i = 0; i < c->n; i++) {
				if (c->nodes[i].up && c->nodes[i].n_pending > 0) {
					th_persist(c, c->nodes[i].id);
					any = true;
				}
			}
			if (any) {
				continue;
			}
		}
		if (!th_deliver_one(c)) {
			th_ready_all(c);
			if (c->n_queue == 0) {
				return;
			}
		}
	}
	abort(); /* no quiescence */
}

static inline void th_tick(struct th_cluster *c, uint64_t id, uint64_t now_ms)
{
	struct th_node *n = th_node(c, id);
	n->now_ms = now_ms;
	if (n->up) {
		raft_tick(n->r, now_ms);
	}
}

static inline void th_tick_all(struct th_cluster *c, uint64_t delta_ms)
{
	for (size_t i = 0; i < c->n; i++) {
		th_tick(c, c->nodes[i].id, c->nodes[i].now_ms + delta_ms);
	}
}

/* Makes `id` campaign (its election timer fires) and runs to quiescence
 * with everything persisted. */
static inline void th_elect(struct th_cluster *c, uint64_t id)
{
	struct th_node *n = th_node(c, id);
	th_tick(c, id, n->now_ms + 2 * c->opts.election_timeout_ms);
	th_stabilize(c, true);
}

static inline void th_crash(struct th_cluster *c, uint64_t id)
{
	struct th_node *n = th_node(c, id);
	if (!n->up) {
		return;
	}
	for (size_t i = 0; i < n->n_pending; i++) {
		th_batch_free(&n->pending[i]);
	}
	n->n_pending = 0;
	raft_close(n->r);
	n->r = NULL;
	n->up = false;
	th_tracef(c, "node %llu: crash\n", (unsigned long long)id);
}

static inline void th_restart(struct th_cluster *c, uint64_t id)
{
	struct th_node *n = th_node(c, id);
	th_crash(c, id);
	th_node_start(c, n);
	th_tracef(c, "node %llu: restart\n", (unsigned long long)id);
}

static inline void th_isolate(struct th_cluster *c, uint64_t id, bool cut)
{
	for (size_t i = 1; i <= c->n; i++) {
		c->cut[id][i] = cut;
		c->cut[i][id] = cut;
	}
}

static inline void th_heal(struct th_cluster *c)
{
	memset(c->cut, 0, sizeof(c->cut));
}

static inline enum keel_err th_propose(struct th_cluster *c, uint64_t id, const char *text,
				uint64_t *index)
{
	uint64_t idx = 0, term = 0;
	enum keel_err err = raft_propose(th_node(c, id)->r, text, (uint32_t)strlen(text), &idx, &term);
	if (index != NULL) {
		*index = idx;
	}
	return err;
}

/* The node's snapshot of its state machine at its applied index. */
static inline void th_take_snapshot(struct th_cluster *c, uint64_t id)
{
	struct th_node *n = th_node(c, id);
	struct raft_status st;
	raft_status(n->r, &st);
	struct raft_snapshot_meta meta;
	memset(&meta, 0, sizeof(meta));
	meta.index = n->applied;
	meta.term = n->applied_term[n->applied];
	meta.size_bytes = c->snap_size;
	/* The config at that index: the harness asks the only place that
	 * knows, the entries on disk or the previous snapshot. */
	meta.config = n->has_snap ? n->snap.config : (struct raft_config){0};
	for (size_t i = 0; i < n->n_log; i++) {
		if (n->log[i].e.index <= meta.index && n->log[i].e.type == RAFT_ENTRY_CONFIG) {
			raft_config_decode(n->log[i].data, n->log[i].e.size, &meta.config);
		}
	}
	uint8_t *bytes = th_xmalloc(c->snap_size);
	memset(bytes, 0xab, c->snap_size);
	memcpy(bytes, &meta.index, 8);
	memcpy(bytes + 8, &n->sm_hash, 8);
	if (raft_snapshot_taken(n->r, &meta) != KEEL_OK) {
		abort();
	}
	free(n->snap_bytes);
	n->snap_bytes = bytes;
	n->snap = meta;
	n->has_snap = true;
	th_disk_drop_upto(n, meta.index);
	(void)st;
}

static inline void th_close(struct th_cluster *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct th_node *n = &c->nodes[i];
		th_crash(c, n->id);
		th_disk_truncate(n, 0);
		free(n->log);
		free(n->pending);
		free(n->snap_bytes);
		free(n->temp_bytes);
	}
	for (size_t i = 0; i < c->n_queue; i++) {
		th_msg_free(&c->queue[i]);
	}
	free(c->queue);
}

static inline struct raft_status th_status(struct th_cluster *c, uint64_t id)
{
	struct raft_status st;
	raft_status(th_node(c, id)->r, &st);
	return st;
}

static inline uint64_t th_leader(struct th_cluster *c)
{
	uint64_t leader = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct th_node *n = &c->nodes[i];
		if (n->up && th_status(c, n->id).role == RAFT_LEADER) {
			leader = n->id;
		}
	}
	return leader;
}

#endif
