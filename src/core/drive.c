/*
 * drive.c — the server core's ready loop and its inputs from peers and
 * storage (core.h).
 *
 * The ready loop (core_drive) is the only place outputs of the Raft core are
 * handled, in this order per ready: hand the persist batch to the host, send
 * messages, apply committed entries, answer reads, note soft state, advance.
 * Work that must call back into Raft (admin waiters completing,
 * snapshot-read failures) is queued while a ready is open and run after
 * raft_advance(), because Raft forbids calls between ready and advance.
 *
 *   start --restore--> FOLLOWER/... (Raft decides) --core_stop--> STOPPED
 *                                                  --storage error--> FAILED
 */
#include "core/core.h"

#include <string.h>

#include "base/assert.h"
#include "core/client_zk.h"
#include "core/controller.h"
#include "core/fsm.h"
#include "core/membership.h"

#define PERSIST_RING 256
_Static_assert(PERSIST_RING == KEEL_ARRAY_SIZE(((struct node_core *)0)->persist_submitted_ns),
               "one slot per persist id modulo the ring");

static void after_advance(struct node_core *c);

/* ---- deferred work (runs after raft_advance) ---- */

static void defer_snapshot_failure(struct node_core *c, uint64_t peer)
{
	if (c->deferred_snap_fail_count < KEEL_ARRAY_SIZE(c->deferred_snap_fail)) {
		c->deferred_snap_fail[c->deferred_snap_fail_count++] = peer;
	}
}

static void defer_unreachable(struct node_core *c, uint64_t peer)
{
	for (size_t i = 0; i < c->deferred_unreachable_count; i++) {
		if (c->deferred_unreachable[i] == peer) {
			return;
		}
	}
	if (c->deferred_unreachable_count < KEEL_ARRAY_SIZE(c->deferred_unreachable)) {
		c->deferred_unreachable[c->deferred_unreachable_count++] = peer;
	}
}

/* ---- waiters (admin operations on the leader) ---- */

void core_wait_commit(struct node_core *c, struct node_waiter *w)
{
	struct keel_list *last = keel_list_last(&c->waiters);
	KEEL_ASSERT(last == NULL ||
	            KEEL_LIST_ITEM(last, struct node_waiter, link)->index < w->index);
	keel_list_init(&w->link);
	keel_list_push_back(&c->waiters, &w->link);
}

/* Moves a decided waiter to the done list: its callback runs after
 * raft_advance (it may call into Raft). */
static void waiter_decided(struct node_core *c, struct node_waiter *w, enum keel_err result)
{
	keel_list_remove(&w->link);
	w->result = result;
	keel_list_push_back(&c->done, &w->link);
}

/* A committed entry at (index, term): waiters up to it are decided. */
static void waiters_on_commit(struct node_core *c, uint64_t index, uint64_t term)
{
	struct keel_list *it;
	while ((it = keel_list_first(&c->waiters)) != NULL) {
		struct node_waiter *w = KEEL_LIST_ITEM(it, struct node_waiter, link);
		if (w->index > index) {
			break;
		}
		waiter_decided(c, w,
		               (w->index == index && w->term == term) ? KEEL_OK : KEEL_CANCELED);
	}
}

/* Waiters for entries past `commit` fail with err; those at or below it
 * stay: their entries are committed (a leader's own committed entries never
 * leave its log) and waiters_on_commit() decides them when they apply. A
 * leader that removed itself steps down as soon as the removal commits,
 * before it applies it. */
static void waiters_fail_uncommitted(struct node_core *c, uint64_t commit, enum keel_err err)
{
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE(it, next, &c->waiters)
	{
		struct node_waiter *w = KEEL_LIST_ITEM(it, struct node_waiter, link);
		if (w->index > commit) {
			waiter_decided(c, w, err);
		}
	}
}

/* ---- sending Raft messages ---- */

static void send_raft_msg(struct node_core *c, const struct raft_msg *msg)
{
	struct raft_msg copy;
	const struct raft_msg *m = msg;
	if (msg->type == RAFT_MSG_SNAPSHOT) {
		/* Fill the chunk from the snapshot file. */
		copy = *msg;
		size_t got = 0;
		enum keel_err rc = c->host.ops->snapshot_read(
		        c->host.ctx, msg->snapshot.meta.index, msg->snapshot.meta.term,
		        msg->snapshot.offset, c->snapshot_chunk_buf, msg->snapshot.size, &got);
		if (rc != KEEL_OK || got != msg->snapshot.size) {
			CORE_WARN(c, "snapshot %llu for peer %llu: cannot read chunk at %llu (%s)",
			          (unsigned long long)msg->snapshot.meta.index,
			          (unsigned long long)msg->to,
			          (unsigned long long)msg->snapshot.offset, keel_strerror(rc));
			defer_snapshot_failure(c, msg->to);
			return;
		}
		copy.snapshot.data = c->snapshot_chunk_buf;
		m = &copy;
	}
	size_t mark;
	struct keel_wbuf *w = core_peer_begin(c, m->to, PEER_FRAME_RAFT, &mark);
	if (w == NULL) {
		defer_unreachable(c, m->to);
		return;
	}
	enum keel_err rc = raft_msg_encode(m, w);
	KEEL_ASSERT(rc == KEEL_OK);
	core_peer_end(c, m->to, mark);
}

/* ---- soft state ---- */

static void on_soft_state(struct node_core *c, const struct raft_ready *rd)
{
	bool leader_changed = rd->leader != c->leader;
	uint8_t old_role = c->role;
	c->role = rd->role;
	c->term = rd->term;
	if (leader_changed) {
		c->stats.leader_changes++;
		if (rd->leader == c->id) {
			CORE_INFO(c, "became leader in term %llu", (unsigned long long)rd->term);
		} else if (rd->leader != 0) {
			CORE_INFO(c, "following leader %llu in term %llu",
			          (unsigned long long)rd->leader, (unsigned long long)rd->term);
		} else {
			CORE_INFO(c, "no leader in term %llu (%s)", (unsigned long long)rd->term,
			          raft_role_name(rd->role));
		}
	} else if (old_role != rd->role && rd->role == RAFT_CANDIDATE) {
		c->stats.elections_seen++;
		CORE_INFO(c, "starting election for term %llu", (unsigned long long)rd->term);
	}
	uint64_t old_leader = c->leader;
	c->leader = rd->leader;
	if (leader_changed) {
		if (old_leader == c->id) {
			/* Lost leadership: admin operations waiting here for
			 * entries not yet committed fail. */
			waiters_fail_uncommitted(c, rd->commit, KEEL_NOTLEADER);
		}
		/* The parts first (admin before the tracker: transfers succeed). */
		zk_clients_on_leader_change(c, old_leader, rd->leader);
		admin_on_leader_change(c);
		if (c->ctl != NULL) {
			node_ctl_on_leader_change(c);
		}
		tracker_on_leader_change(&c->tracker, rd->leader, core_now_ms(c));
	}
}

/* ---- the ready loop ---- */

/* Hands what an applied entry produced to whoever waits for it: the
 * ZooKeeper clients (watches, the waiting request), the host's peer links
 * (the address book). The controller's META entries were applied by
 * node_ctl_apply. */
static void on_applied(struct node_core *c, const struct fsm_applied *applied)
{
	switch (applied->kind) {
	case FSM_APPLIED_ZK:
		zk_clients_on_applied(c, &applied->entry, applied->zk);
		return;
	case FSM_APPLIED_ZK_FAILED:
		zk_clients_on_apply_failed(c, &applied->entry);
		return;
	case FSM_APPLIED_BOOK:
		c->host.ops->book_changed(c->host.ctx);
		return;
	case FSM_APPLIED_ZK_SYSTEM:
		zk_clients_fire_system(c, applied->zk);
		return;
	case FSM_APPLIED_META:
	case FSM_APPLIED_NOTHING:
		return;
	}
}

static void handle_ready(struct node_core *c, struct raft_ready *rd)
{
	if (rd->persist_id != 0) {
		if (rd->install != NULL) {
			CORE_INFO(
			        c,
			        "installing snapshot %llu (term %llu, %llu bytes) from the leader",
			        (unsigned long long)rd->install->meta.index,
			        (unsigned long long)rd->install->meta.term,
			        (unsigned long long)rd->install->meta.size_bytes);
			KEEL_ASSERT(c->n_installs < KEEL_ARRAY_SIZE(c->installs));
			c->installs[c->n_installs].persist_id = rd->persist_id;
			c->installs[c->n_installs].meta = rd->install->meta;
			c->n_installs++;
		}
		c->persist_submitted_ns[rd->persist_id % PERSIST_RING] = core_mono_ns(c);
		enum keel_err rc = c->host.ops->persist(c->host.ctx, rd);
		c->stats.persist_batches++;
		if (rc != KEEL_OK) {
			/* Nothing more from this batch: its messages may answer for
			 * entries that are not on disk, and the server stops. */
			CORE_ERROR(c, "storage refused a batch (%s): stopping", keel_strerror(rc));
			c->failed = true;
			return;
		}
	}
	for (size_t i = 0; i < rd->n_msgs; i++) {
		send_raft_msg(c, &rd->msgs[i]);
	}
	for (size_t i = 0; i < rd->n_committed; i++) {
		const struct raft_entry *e = &rd->committed[i];
		KEEL_ASSERT(e->index == c->applied_index + 1);
		if (e->term > c->applied_term && c->applied_term != 0) {
			tracker_on_term_applied(&c->tracker, e->term);
		}
		if (e->type == RAFT_ENTRY_CONFIG) {
			enum keel_err crc =
			        raft_config_decode(e->data, e->size, &c->applied_config);
			KEEL_ASSERT(crc == KEEL_OK);
		}
		struct fsm_applied applied;
		fsm_apply(c, e, &applied);
		if (applied.kind == FSM_APPLIED_META && c->ctl != NULL) {
			node_ctl_apply(c, e, &applied.entry);
		}
		if (c->failed) {
			/* This entry could not be applied in full (out of
			 * memory, or the controller cannot follow it): it does
			 * not count as applied, nor does anything after it (the
			 * server stops). */
			break;
		}
		/* Applied from here on: a read that on_applied serves behind a
		 * write of this entry (its turn in the connection's FIFO) is
		 * answered with this index as its zxid, never an older one. */
		c->applied_index = e->index;
		c->applied_term = e->term;
		on_applied(c, &applied);
		if (c->observer != NULL) {
			c->observer->applied(c->observer->ctx, e, &applied);
		}
		c->bytes_since_snapshot += e->size;
		c->stats.entries_applied++;
		waiters_on_commit(c, e->index, e->term);
	}
	if (rd->n_reads > 0) {
		zk_clients_on_reads(c, rd->reads, rd->n_reads);
		if (c->observer != NULL) {
			c->observer->reads(c->observer->ctx, rd->reads, rd->n_reads);
		}
	}
	c->commit_index = rd->commit;
	if (rd->soft_state_changed) {
		on_soft_state(c, rd);
	}
}

void core_drive(struct node_core *c)
{
	if (c->in_ready) {
		c->drive_again = true;
		return;
	}
	if (c->raft == NULL || c->stopped) {
		return;
	}
	do {
		c->drive_again = false;
		struct raft_ready rd;
		while (!c->failed && raft_ready(c->raft, &rd)) {
			uint64_t applied_before = c->applied_index;
			c->in_ready = true;
			handle_ready(c, &rd);
			raft_advance(c->raft, &rd);
			c->in_ready = false;
			if (c->applied_index != applied_before) {
				raft_applied(c->raft, c->applied_index);
			}
			after_advance(c);
		}
	} while (c->drive_again && !c->failed);
	if (c->failed && !c->stopped) {
		CORE_ERROR(c, "stopping: the server cannot make writes durable");
		c->host.ops->on_failed(c->host.ctx);
	}
}

static void after_advance(struct node_core *c)
{
	for (size_t i = 0; i < c->deferred_snap_fail_count; i++) {
		raft_report_snapshot(c->raft, c->deferred_snap_fail[i], RAFT_SNAPSHOT_FAILED);
	}
	c->deferred_snap_fail_count = 0;
	for (size_t i = 0; i < c->deferred_unreachable_count; i++) {
		raft_report_unreachable(c->raft, c->deferred_unreachable[i]);
	}
	c->deferred_unreachable_count = 0;
	struct keel_list *it;
	while ((it = keel_list_pop_front(&c->done)) != NULL) {
		struct node_waiter *w = KEEL_LIST_ITEM(it, struct node_waiter, link);
		w->done(c, w, w->result);
	}
	if (c->ctl != NULL) {
		node_ctl_after_apply(c);
	}
	zk_clients_after_apply(c);
	c->host.ops->maybe_snapshot(c->host.ctx);
}

enum keel_err core_propose(struct node_core *c, const void *data, uint32_t size, uint64_t *index,
                           uint64_t *term)
{
	KEEL_ASSERT(!c->in_ready);
	enum keel_err rc = raft_propose(c->raft, data, size, index, term);
	if (rc == KEEL_OK) {
		c->stats.proposals++;
	} else {
		c->stats.proposals_failed++;
	}
	return rc;
}

/* ---- storage completions ---- */

void core_on_durable(struct node_core *c, uint64_t persist_id, enum keel_err err)
{
	if (c->stopped) {
		return;
	}
	if (err != KEEL_OK) {
		CORE_ERROR(c, "storage failed (%s): refusing to acknowledge anything more",
		           keel_strerror(err));
		c->failed = true;
		core_drive(c);
		return;
	}
	uint64_t started = c->persist_submitted_ns[persist_id % PERSIST_RING];
	if (started != 0) {
		metrics_hist_observe(&c->stats.append_latency, (core_mono_ns(c) - started) / 1000u);
	}
	while (c->n_installs > 0 && c->installs[0].persist_id <= persist_id) {
		/* A received snapshot is durable: load it before telling Raft. */
		struct raft_snapshot_meta meta = c->installs[0].meta;
		c->n_installs--;
		memmove(&c->installs[0], &c->installs[1], c->n_installs * sizeof(c->installs[0]));
		enum keel_err rc = c->host.ops->snapshot_load(c->host.ctx, &meta);
		if (rc != KEEL_OK) {
			c->failed = true;
			core_drive(c);
			return;
		}
		c->applied_index = meta.index;
		c->applied_term = meta.term;
		c->snapshot_index = meta.index;
		c->bytes_since_snapshot = 0;
		c->commit_index = KEEL_MAX(c->commit_index, c->applied_index);
		c->stats.snapshots_installed++;
		zk_clients_on_snapshot_installed(c);
		CORE_INFO(c, "snapshot %llu installed", (unsigned long long)meta.index);
	}
	enum keel_err rc = raft_persisted(c->raft, persist_id);
	KEEL_ASSERT(rc == KEEL_OK);
	if (c->applied_index > 0) {
		raft_applied(c->raft, c->applied_index);
	}
	c->host.ops->schedule_drive(c->host.ctx);
}

/* ---- peer messages ---- */

/* No real cluster reaches a term or an index of 2^48 (one election or one
 * entry per microsecond for eight years). A message carrying one is refused,
 * whoever sent it: a buggy or hostile member must not push every server to
 * a term where term + 1 overflows or no election can follow. */
#define RAFT_VALUE_LIMIT (1ull << 48)

static bool raft_msg_plausible(const struct raft_msg *m)
{
	if (m->term >= RAFT_VALUE_LIMIT) {
		return false;
	}
	switch (m->type) {
	case RAFT_MSG_APPEND:
		if (m->append.prev_index >= RAFT_VALUE_LIMIT ||
		    m->append.prev_term >= RAFT_VALUE_LIMIT ||
		    m->append.commit >= RAFT_VALUE_LIMIT) {
			return false;
		}
		for (uint32_t i = 0; i < m->append.n_entries; i++) {
			if (m->append.entries[i].index >= RAFT_VALUE_LIMIT ||
			    m->append.entries[i].term >= RAFT_VALUE_LIMIT) {
				return false;
			}
		}
		return true;
	case RAFT_MSG_HEARTBEAT:
		return m->heartbeat.commit < RAFT_VALUE_LIMIT;
	case RAFT_MSG_VOTE:
		return m->vote.last_index < RAFT_VALUE_LIMIT &&
		       m->vote.last_term < RAFT_VALUE_LIMIT;
	case RAFT_MSG_SNAPSHOT:
		return m->snapshot.meta.index < RAFT_VALUE_LIMIT &&
		       m->snapshot.meta.term < RAFT_VALUE_LIMIT;
	default:
		return true;
	}
}

/* A request another server sends us to decide as the leader. Its origin
 * must be the link's authenticated peer: a server speaks only for its own
 * clients. */
static void on_tracked_request(struct node_core *c, uint64_t from, const uint8_t *body, size_t size)
{
	uint8_t kind;
	uint64_t origin, request_id;
	const uint8_t *rest;
	size_t rest_size;
	if (tracker_request_decode(body, size, &kind, &origin, &request_id, &rest, &rest_size) !=
	            KEEL_OK ||
	    origin != from) {
		CORE_WARN(c, "peer %llu: malformed request frame, ignored",
		          (unsigned long long)from);
		return;
	}
	switch ((enum tracker_kind)kind) {
	case TRACK_ZK_WRITE:
		zk_clients_on_forward(c, from, request_id, rest, rest_size);
		return;
	case TRACK_ADMIN:
		admin_on_forward(c, from, request_id, rest, rest_size);
		return;
	case TRACK_META:
		if (c->ctl != NULL) {
			node_ctl_on_forward(c, from, request_id, rest, rest_size);
		}
		return;
	}
	KEEL_UNREACHABLE(); /* the decoder accepts only known kinds */
}

struct keel_wbuf *core_request_begin(struct node_core *c, enum tracker_kind kind,
                                     uint64_t request_id, uint64_t *to, size_t *mark)
{
	*to = c->leader;
	if (c->leader == 0 || c->leader == c->id) {
		return NULL;
	}
	struct keel_wbuf *w = core_peer_begin(c, c->leader, PEER_FRAME_REQUEST, mark);
	if (w != NULL) {
		tracker_request_encode(w, kind, c->id, request_id);
	}
	return w;
}

struct keel_wbuf *core_reply_begin(struct node_core *c, const struct tracker_reply *hdr,
                                   size_t *mark)
{
	struct keel_wbuf *w = core_peer_begin(c, hdr->origin, PEER_FRAME_REPLY, mark);
	if (w != NULL) {
		tracker_reply_encode(w, hdr);
	}
	return w;
}

void core_on_peer_frame(struct node_core *c, uint64_t from, uint8_t type, const uint8_t *body,
                        size_t size)
{
	switch (type) {
	case PEER_FRAME_RAFT: {
		struct raft_msg msg;
		enum keel_err rc = raft_msg_decode(body, size, &c->msg_limits, &msg,
		                                   c->decode_entries, c->msg_limits.max_entries);
		if (rc != KEEL_OK || msg.from != from || msg.to != c->id) {
			CORE_WARN(c, "peer %llu: bad Raft message (%s), ignored",
			          (unsigned long long)from, keel_strerror(rc));
			return;
		}
		if (!raft_msg_plausible(&msg)) {
			CORE_WARN(
			        c,
			        "peer %llu: Raft message type %u with an impossible term or index "
			        "(term %llu), refused",
			        (unsigned long long)from, msg.type, (unsigned long long)msg.term);
			return;
		}
		rc = raft_step(c->raft, &msg);
		if (rc != KEEL_OK && rc != KEEL_INVAL) {
			CORE_WARN(c, "raft_step: %s", keel_strerror(rc));
		}
		c->host.ops->schedule_drive(c->host.ctx);
		return;
	}
	case PEER_FRAME_SESSION_TOUCH:
	case PEER_FRAME_SESSION_MOVED:
		zk_clients_on_peer_frame(c, from, type, body, size);
		return;
	case PEER_FRAME_REQUEST:
		on_tracked_request(c, from, body, size);
		return;
	case PEER_FRAME_REPLY: {
		struct tracker_reply hdr;
		const uint8_t *rest;
		size_t rest_size;
		if (tracker_reply_decode(body, size, &hdr, &rest, &rest_size) != KEEL_OK) {
			CORE_WARN(c, "peer %llu: malformed reply frame, ignored",
			          (unsigned long long)from);
			return;
		}
#ifdef KEEL_PLANT_BUG_REPLY_BEFORE_APPLY
		if (zk_clients_on_leader_result(c, &hdr, rest, rest_size)) {
			return;
		}
#endif
		/* No match: already ended (timed out, failed on a change). */
		(void)tracker_on_reply(&c->tracker, c->id, &hdr, rest, rest_size);
		return;
	}
	default:
		CORE_WARN(c, "peer %llu: unknown frame type %u", (unsigned long long)from, type);
	}
}

void core_on_peer_link(struct node_core *c, uint64_t id, bool up)
{
	if (!up) {
		/* Replies from `id` sent before the link went are lost. */
		tracker_on_link_down(&c->tracker, id, core_now_ms(c));
	}
	if (!up && c->raft != NULL && !c->in_ready) {
		raft_report_unreachable(c->raft, id);
		core_drive(c);
	}
}

void core_tick(struct node_core *c, uint64_t now_ms)
{
	raft_tick(c->raft, now_ms);
	zk_clients_tick(c, now_ms);
	admin_tick(c, now_ms);
	if (c->ctl != NULL) {
		node_ctl_tick(c, now_ms);
	}
	tracker_tick(&c->tracker, c->leader, c->term, now_ms);
}

void core_stop(struct node_core *c)
{
	c->stopped = true;
}
