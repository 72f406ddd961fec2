/*
 * node.c — the server's loop: start-up, the Raft ready loop, peer messages,
 * storage completions, the tick, shutdown.
 *
 * The ready loop (node_drive) is the only place outputs of the Raft core are
 * handled, in this order per ready: hand the persist batch to storage, send
 * messages, apply committed entries, answer reads, note soft state, advance.
 * Work that must call back into the core (admin waiters completing,
 * snapshot-read failures) is queued while a ready is open and run after
 * raft_advance(), because the core forbids calls between ready and advance.
 *
 *   start --recover--> FOLLOWER/... (Raft decides) --SIGTERM--> STOPPING
 *                                                    --storage error--> FAILED
 */
#include "node/node.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "node/admin.h"
#include "node/client.h"
#include "node/client_zk.h"
#include "node/controller.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "node/host.h"
#include "node/snapshot.h"
#include "os/clock.h"
#include "os/log.h"

#define PERSIST_RING 256

static void node_after_advance(struct node *n);

/* The largest peer frame: an AppendEntries at its byte limit (or one entry
 * at the entry limit) with per-entry overhead, or a snapshot chunk. */
static size_t peer_max_frame_bytes(const struct raft_options *o)
{
	size_t append = (size_t)KEEL_MAX(o->max_append_bytes, o->max_entry_bytes) +
			(size_t)o->max_append_entries * 64u;
	size_t chunk = (size_t)o->snapshot_chunk_bytes + 64u * RAFT_MAX_MEMBERS + 1024u;
	return KEEL_MAX(append, chunk) + 4096u;
}

uint64_t node_now_ms(const struct node *n)
{
	return uv_now(n->loop);
}

/* ---- deferred work (runs after raft_advance) ---- */

static void defer_snapshot_failure(struct node *n, uint64_t peer)
{
	if (n->core.deferred_snap_fail_count < KEEL_ARRAY_SIZE(n->core.deferred_snap_fail)) {
		n->core.deferred_snap_fail[n->core.deferred_snap_fail_count++] = peer;
	}
}

static void defer_unreachable(struct node *n, uint64_t peer)
{
	for (size_t i = 0; i < n->core.deferred_unreachable_count; i++) {
		if (n->core.deferred_unreachable[i] == peer) {
			return;
		}
	}
	if (n->core.deferred_unreachable_count < KEEL_ARRAY_SIZE(n->core.deferred_unreachable)) {
		n->core.deferred_unreachable[n->core.deferred_unreachable_count++] = peer;
	}
}

/* ---- waiters (admin operations on the leader) ---- */

void node_wait_commit(struct node *n, struct node_waiter *w)
{
	struct keel_list *last = keel_list_last(&n->core.waiters);
	KEEL_ASSERT(last == NULL ||
		    KEEL_LIST_ITEM(last, struct node_waiter, link)->index < w->index);
	keel_list_init(&w->link);
	keel_list_push_back(&n->core.waiters, &w->link);
}

/* Moves a decided waiter to the done list: its callback runs after
 * raft_advance (it may call into Raft). */
static void waiter_decided(struct node *n, struct node_waiter *w, enum keel_err result)
{
	keel_list_remove(&w->link);
	w->result = result;
	keel_list_push_back(&n->core.done, &w->link);
}

/* A committed entry at (index, term): waiters up to it are decided. */
static void waiters_on_commit(struct node *n, uint64_t index, uint64_t term)
{
	struct keel_list *it;
	while ((it = keel_list_first(&n->core.waiters)) != NULL) {
		struct node_waiter *w = KEEL_LIST_ITEM(it, struct node_waiter, link);
		if (w->index > index) {
			break;
		}
		waiter_decided(n, w, (w->index == index && w->term == term) ? KEEL_OK
									      : KEEL_CANCELED);
	}
}

/* Waiters for entries past `commit` fail with err; those at or below it
 * stay: their entries are committed (a leader's own committed entries never
 * leave its log) and waiters_on_commit() decides them when they apply. A
 * leader that removed itself steps down as soon as the removal commits,
 * before it applies it. */
static void waiters_fail_uncommitted(struct node *n, uint64_t commit, enum keel_err err)
{
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &n->core.waiters) {
		struct node_waiter *w = KEEL_LIST_ITEM(it, struct node_waiter, link);
		if (w->index > commit) {
			waiter_decided(n, w, err);
		}
	}
}

/* ---- sending Raft messages ---- */

static void send_raft_msg(struct node *n, const struct raft_msg *msg)
{
	struct raft_msg copy;
	const struct raft_msg *m = msg;
	if (msg->type == RAFT_MSG_SNAPSHOT) {
		/* Fill the chunk from the snapshot file. */
		copy = *msg;
		size_t got = 0;
		enum keel_err rc = node_storage_snapshot_read(
			n->storage, msg->snapshot.meta.index, msg->snapshot.meta.term,
			msg->snapshot.offset, n->core.snapshot_chunk_buf, msg->snapshot.size, &got);
		if (rc != KEEL_OK || got != msg->snapshot.size) {
			KEEL_WARN("snapshot %llu for peer %llu: cannot read chunk at %llu (%s)",
				  (unsigned long long)msg->snapshot.meta.index,
				  (unsigned long long)msg->to, (unsigned long long)msg->snapshot.offset,
				  keel_strerror(rc));
			defer_snapshot_failure(n, msg->to);
			return;
		}
		copy.snapshot.data = n->core.snapshot_chunk_buf;
		m = &copy;
	}
	size_t mark;
	struct keel_wbuf *w = peers_send_begin(&n->peers, m->to, PEER_FRAME_RAFT, &mark);
	if (w == NULL) {
		defer_unreachable(n, m->to);
		return;
	}
	enum keel_err rc = raft_msg_encode(m, w);
	KEEL_ASSERT(rc == KEEL_OK);
	peers_send_end(&n->peers, m->to, mark);
}

/* ---- soft state ---- */

static void on_soft_state(struct node *n, const struct raft_ready *rd)
{
	bool leader_changed = rd->leader != n->core.leader;
	uint8_t old_role = n->core.role;
	n->core.role = rd->role;
	n->core.term = rd->term;
	if (leader_changed) {
		n->core.stats.leader_changes++;
		if (rd->leader == n->cfg.id) {
			KEEL_INFO("became leader in term %llu", (unsigned long long)rd->term);
		} else if (rd->leader != 0) {
			KEEL_INFO("following leader %llu in term %llu",
				  (unsigned long long)rd->leader, (unsigned long long)rd->term);
		} else {
			KEEL_INFO("no leader in term %llu (%s)", (unsigned long long)rd->term,
				  raft_role_name(rd->role));
		}
	} else if (old_role != rd->role && rd->role == RAFT_CANDIDATE) {
		n->core.stats.elections_seen++;
		KEEL_INFO("starting election for term %llu", (unsigned long long)rd->term);
	}
	uint64_t old_leader = n->core.leader;
	n->core.leader = rd->leader;
	if (leader_changed) {
		if (old_leader == n->cfg.id) {
			/* Lost leadership: admin operations waiting here for
			 * entries not yet committed fail. */
			waiters_fail_uncommitted(n, rd->commit, KEEL_NOTLEADER);
		}
		node_clients_on_leader_change(n, old_leader, rd->leader);
		node_ctl_on_leader_change(n);
		admin_on_leader_change(n); /* before the tracker: transfers succeed */
		tracker_on_leader_change(&n->core.tracker, rd->leader, node_now_ms(n));
	}
}

/* ---- the ready loop ---- */

/* Hands what an applied entry produced to whoever waits for it: the
 * ZooKeeper clients (watches, the waiting request) and the peer links. */
static void route_applied(struct node *n, const struct raft_entry *e,
			  const struct fsm_applied *applied)
{
	switch (applied->kind) {
	case FSM_APPLIED_ZK:
		zk_clients_on_applied(n, &applied->entry, applied->zk);
		return;
	case FSM_APPLIED_ZK_FAILED:
		zk_clients_on_apply_failed(n, &applied->entry);
		return;
	case FSM_APPLIED_BOOK:
		node_book_changed(n);
		return;
	case FSM_APPLIED_META:
		node_ctl_apply(n, e, &applied->entry); /* the image is the controller glue's */
		return;
	case FSM_APPLIED_NOTHING:
		return;
	}
}

static void handle_ready(struct node *n, struct raft_ready *rd)
{
	if (rd->persist_id != 0) {
		if (rd->install != NULL) {
			KEEL_INFO("installing snapshot %llu (term %llu, %llu bytes) from the leader",
				  (unsigned long long)rd->install->meta.index,
				  (unsigned long long)rd->install->meta.term,
				  (unsigned long long)rd->install->meta.size_bytes);
			KEEL_ASSERT(n->core.n_installs < KEEL_ARRAY_SIZE(n->core.installs));
			n->core.installs[n->core.n_installs].persist_id = rd->persist_id;
			n->core.installs[n->core.n_installs].meta = rd->install->meta;
			n->core.n_installs++;
		}
		n->core.persist_submitted_ns[rd->persist_id % PERSIST_RING] = core_mono_ns(&n->core);
		enum keel_err rc = n->core.host.ops->persist(n->core.host.ctx, rd);
		if (rc != KEEL_OK) {
			KEEL_ERROR("storage refused a batch (%s): stopping", keel_strerror(rc));
			n->core.failed = true;
		}
		n->core.stats.persist_batches++;
	}
	for (size_t i = 0; i < rd->n_msgs; i++) {
		send_raft_msg(n, &rd->msgs[i]);
	}
	for (size_t i = 0; i < rd->n_committed; i++) {
		const struct raft_entry *e = &rd->committed[i];
		KEEL_ASSERT(e->index == n->core.applied_index + 1);
		if (e->term > n->core.applied_term && n->core.applied_term != 0) {
			tracker_on_term_applied(&n->core.tracker, e->term);
		}
		if (e->type == RAFT_ENTRY_CONFIG) {
			enum keel_err crc = raft_config_decode(e->data, e->size, &n->core.applied_config);
			KEEL_ASSERT(crc == KEEL_OK);
		}
		struct fsm_applied applied;
		fsm_apply(&n->core, e, &applied);
		route_applied(n, e, &applied);
		n->core.bytes_since_snapshot += e->size;
		n->core.applied_index = e->index;
		n->core.applied_term = e->term;
		n->core.stats.entries_applied++;
		waiters_on_commit(n, e->index, e->term);
	}
	if (rd->n_reads > 0) {
		node_clients_on_reads(n, rd->reads, rd->n_reads);
		admin_on_reads(n, rd->reads, rd->n_reads);
	}
	n->core.commit_index = rd->commit;
	if (rd->soft_state_changed) {
		on_soft_state(n, rd);
	}
}

void node_drive(struct node *n)
{
	if (n->core.in_ready) {
		n->core.drive_again = true;
		return;
	}
	if (n->core.raft == NULL || n->stopping) {
		return;
	}
	do {
		n->core.drive_again = false;
		struct raft_ready rd;
		while (!n->core.failed && raft_ready(n->core.raft, &rd)) {
			uint64_t applied_before = n->core.applied_index;
			n->core.in_ready = true;
			handle_ready(n, &rd);
			raft_advance(n->core.raft, &rd);
			n->core.in_ready = false;
			if (n->core.applied_index != applied_before) {
				raft_applied(n->core.raft, n->core.applied_index);
			}
			node_after_advance(n);
		}
	} while (n->core.drive_again && !n->core.failed);
	if (n->core.failed && !n->stopping) {
		KEEL_ERROR("stopping: the server cannot make writes durable");
		n->exit_code = 1;
		uv_stop(n->loop);
	}
}

static void on_drive_idle(uv_idle_t *idle)
{
	(void)idle;
}

static void on_drive_check(uv_check_t *check)
{
	struct node *n = check->data;
	if (n->drive_scheduled) {
		n->drive_scheduled = false;
		uv_idle_stop(&n->drive_idle);
		node_drive(n);
	}
}

void node_schedule_drive(struct node *n)
{
	if (!n->drive_scheduled && !n->stopping) {
		n->drive_scheduled = true;
		uv_idle_start(&n->drive_idle, on_drive_idle);
	}
}

static void node_after_advance(struct node *n)
{
	for (size_t i = 0; i < n->core.deferred_snap_fail_count; i++) {
		raft_report_snapshot(n->core.raft, n->core.deferred_snap_fail[i], RAFT_SNAPSHOT_FAILED);
	}
	n->core.deferred_snap_fail_count = 0;
	for (size_t i = 0; i < n->core.deferred_unreachable_count; i++) {
		raft_report_unreachable(n->core.raft, n->core.deferred_unreachable[i]);
	}
	n->core.deferred_unreachable_count = 0;
	struct keel_list *it;
	while ((it = keel_list_pop_front(&n->core.done)) != NULL) {
		struct node_waiter *w = KEEL_LIST_ITEM(it, struct node_waiter, link);
		w->done(&n->core, w, w->result);
	}
	node_ctl_after_apply(n);
	node_clients_after_apply(n);
	snapshot_maybe_start(n);
}

enum keel_err node_propose(struct node *n, const void *data, uint32_t size, uint64_t *index,
			   uint64_t *term)
{
	KEEL_ASSERT(!n->core.in_ready);
	enum keel_err rc = raft_propose(n->core.raft, data, size, index, term);
	if (rc == KEEL_OK) {
		n->core.stats.proposals++;
	} else {
		n->core.stats.proposals_failed++;
	}
	return rc;
}

/* ---- storage completions ---- */

static void on_durable(void *ctx, uint64_t persist_id, enum keel_err err)
{
	struct node *n = ctx;
	if (n->stopping) {
		return;
	}
	if (err != KEEL_OK) {
		KEEL_ERROR("storage failed (%s): refusing to acknowledge anything more",
			   keel_strerror(err));
		n->core.failed = true;
		node_drive(n);
		return;
	}
	uint64_t started = n->core.persist_submitted_ns[persist_id % PERSIST_RING];
	if (started != 0) {
		metrics_hist_observe(&n->core.stats.append_latency,
				     (core_mono_ns(&n->core) - started) / 1000u);
	}
	while (n->core.n_installs > 0 && n->core.installs[0].persist_id <= persist_id) {
		/* A received snapshot is durable: load it before telling Raft. */
		struct raft_snapshot_meta meta = n->core.installs[0].meta;
		n->core.n_installs--;
		memmove(&n->core.installs[0], &n->core.installs[1], n->core.n_installs * sizeof(n->core.installs[0]));
		char path[2048];
		char msg[256];
		node_storage_snapshot_path_for(n->storage, meta.index, meta.term, path, sizeof(path));
		enum keel_err rc = fsm_snapshot_load(n, path, meta.index, msg, sizeof(msg));
		if (rc != KEEL_OK) {
			KEEL_ERROR("cannot load installed snapshot %s: %s", path, msg);
			n->core.failed = true;
			node_drive(n);
			return;
		}
		n->core.applied_index = meta.index;
		n->core.applied_term = meta.term;
		n->core.snapshot_index = meta.index;
		n->core.bytes_since_snapshot = 0;
		n->core.commit_index = KEEL_MAX(n->core.commit_index, n->core.applied_index);
		n->core.stats.snapshots_installed++;
		node_clients_on_snapshot_installed(n);
		KEEL_INFO("snapshot %llu installed", (unsigned long long)meta.index);
	}
	enum keel_err rc = raft_persisted(n->core.raft, persist_id);
	KEEL_ASSERT(rc == KEEL_OK);
	if (n->core.applied_index > 0) {
		raft_applied(n->core.raft, n->core.applied_index);
	}
	node_schedule_drive(n);
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
		return m->vote.last_index < RAFT_VALUE_LIMIT && m->vote.last_term < RAFT_VALUE_LIMIT;
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
static void on_tracked_request(struct node *n, uint64_t from, const uint8_t *body, size_t size)
{
	uint8_t kind;
	uint64_t origin, request_id;
	const uint8_t *rest;
	size_t rest_size;
	if (tracker_request_decode(body, size, &kind, &origin, &request_id, &rest, &rest_size) !=
		    KEEL_OK ||
	    origin != from) {
		KEEL_WARN("peer %llu: malformed request frame, ignored", (unsigned long long)from);
		return;
	}
	switch ((enum tracker_kind)kind) {
	case TRACK_ZK_WRITE:
		zk_clients_on_forward(n, from, request_id, rest, rest_size);
		return;
	case TRACK_ADMIN:
		admin_on_forward(n, from, request_id, rest, rest_size);
		return;
	case TRACK_META:
		node_ctl_on_forward(n, from, request_id, rest, rest_size);
		return;
	}
	KEEL_UNREACHABLE(); /* the decoder accepts only known kinds */
}

struct keel_wbuf *node_request_begin(struct node *n, enum tracker_kind kind, uint64_t request_id,
				     uint64_t *to, size_t *mark)
{
	*to = n->core.leader;
	if (n->core.leader == 0 || n->core.leader == n->cfg.id) {
		return NULL;
	}
	struct keel_wbuf *w = peers_send_begin(&n->peers, n->core.leader, PEER_FRAME_REQUEST, mark);
	if (w != NULL) {
		tracker_request_encode(w, kind, n->cfg.id, request_id);
	}
	return w;
}

struct keel_wbuf *node_reply_begin(struct node *n, const struct tracker_reply *hdr, size_t *mark)
{
	struct keel_wbuf *w = peers_send_begin(&n->peers, hdr->origin, PEER_FRAME_REPLY, mark);
	if (w != NULL) {
		tracker_reply_encode(w, hdr);
	}
	return w;
}

static void on_peer_message(void *ctx, uint64_t from, uint8_t type, const uint8_t *body,
			    size_t size)
{
	struct node *n = ctx;
	switch (type) {
	case PEER_FRAME_RAFT: {
		struct raft_msg msg;
		enum keel_err rc = raft_msg_decode(body, size, &n->core.msg_limits, &msg,
						   n->core.decode_entries, n->core.msg_limits.max_entries);
		if (rc != KEEL_OK || msg.from != from || msg.to != n->cfg.id) {
			KEEL_WARN("peer %llu: bad Raft message (%s), ignored",
				  (unsigned long long)from, keel_strerror(rc));
			return;
		}
		if (!raft_msg_plausible(&msg)) {
			KEEL_WARN("peer %llu: Raft message type %u with an impossible term or index "
				  "(term %llu), refused",
				  (unsigned long long)from, msg.type, (unsigned long long)msg.term);
			return;
		}
		rc = raft_step(n->core.raft, &msg);
		if (rc != KEEL_OK && rc != KEEL_INVAL) {
			KEEL_WARN("raft_step: %s", keel_strerror(rc));
		}
		node_schedule_drive(n);
		return;
	}
	case PEER_FRAME_SESSION_TOUCH:
		node_clients_on_peer_frame(n, from, type, body, size);
		return;
	case PEER_FRAME_REQUEST:
		on_tracked_request(n, from, body, size);
		return;
	case PEER_FRAME_REPLY: {
		struct tracker_reply hdr;
		const uint8_t *rest;
		size_t rest_size;
		if (tracker_reply_decode(body, size, &hdr, &rest, &rest_size) != KEEL_OK) {
			KEEL_WARN("peer %llu: malformed reply frame, ignored",
				  (unsigned long long)from);
			return;
		}
		/* No match: already ended (timed out, failed on a change). */
		(void)tracker_on_reply(&n->core.tracker, n->cfg.id, &hdr, rest, rest_size);
		return;
	}
	default:
		KEEL_WARN("peer %llu: unknown frame type %u", (unsigned long long)from, type);
	}
}

/* A peer may link to us when it is in the address book; a server that is
 * not in its own book yet (started with --join, waiting to be added) takes
 * any peer that proves the cluster secret, or it could never be added. */
static bool peer_is_member(void *ctx, uint64_t id)
{
	struct node *n = ctx;
	return core_addr_find(&n->core, id) != NULL || core_addr_find(&n->core, n->cfg.id) == NULL;
}

static void on_peer_link(void *ctx, uint64_t id, bool up)
{
	struct node *n = ctx;
	if (!up) {
		/* Replies from `id` sent before the link went are lost. */
		tracker_on_link_down(&n->core.tracker, id, node_now_ms(n));
	}
	if (!up && n->core.raft != NULL && !n->core.in_ready) {
		raft_report_unreachable(n->core.raft, id);
		node_drive(n);
	}
}

/* ---- timers and signals ---- */

static void on_tick(uv_timer_t *t)
{
	struct node *n = t->data;
	uint64_t now = node_now_ms(n);
	raft_tick(n->core.raft, now);
	peers_tick(&n->peers, now);
	node_clients_tick(n, now);
	node_ctl_tick(n, now);
	admin_tick(n, now);
	tracker_tick(&n->core.tracker, n->core.leader, n->core.term, now);
	snapshot_tick(n);
	node_drive(n);
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct node *n = s->data;
	if (n->stopping) {
		return;
	}
	KEEL_INFO("received %s: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
	n->stopping = true;
	uv_stop(n->loop);
}

/* ---- start-up ---- */

/* The address book at start: --cluster, plus CLUSTER entries in the log
 * that are not applied yet (so that peers can be dialed before replay). */
static void book_seed(struct node *n)
{
	for (size_t i = 0; i < n->cfg.cluster_count; i++) {
		if (core_addr_find(&n->core, n->cfg.cluster[i].id) == NULL &&
		    n->core.book.count < KEEL_ARRAY_SIZE(n->core.book.addrs)) {
			struct node_addr *a = &n->core.book.addrs[n->core.book.count++];
			memset(a, 0, sizeof(*a));
			a->id = n->cfg.cluster[i].id;
			snprintf(a->peer_addr, sizeof(a->peer_addr), "%s", n->cfg.cluster[i].peer_addr);
		}
	}
}

void node_book_changed(struct node *n)
{
	for (size_t i = 0; i < n->core.book.count; i++) {
		const struct node_addr *a = &n->core.book.addrs[i];
		if (a->id != n->cfg.id && a->peer_addr[0] != '\0') {
			peers_set(&n->peers, a->id, a->peer_addr);
		}
	}
	/* Forget peers no longer in the book. */
	for (size_t i = 0; i < n->peers.count;) {
		uint64_t id = n->peers.table[i].id;
		if (core_addr_find(&n->core, id) == NULL) {
			peers_remove(&n->peers, id);
		} else {
			i++;
		}
	}
}

static enum keel_err recover_and_restore(struct node *n, char *err, size_t err_size)
{
	struct node_storage_options so = {
		.data_dir = n->cfg.data_dir,
		.segment_bytes = n->cfg.segment_bytes,
		.max_entry_bytes = n->core.raft_opts.max_entry_bytes,
		.loop = n->loop,
		.on_durable = on_durable,
		.ctx = n,
		.fsync_hist = &n->core.stats.fsync_latency,
	};
	struct node_recovered rec;
	memset(&rec, 0, sizeof(rec));
	enum keel_err rc = node_storage_open(&n->storage, &so, &rec, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct keel_wbuf boot;
	keel_wbuf_init_dynamic(&boot, 0, 1 << 16);
	struct raft_entry boot_entry;
	if (rec.empty && !n->cfg.join) {
		if (n->cfg.cluster_count == 0) {
			snprintf(err, err_size, "a new server needs --cluster (or --join to be added)");
			keel_wbuf_free(&boot);
			return KEEL_CONFIG;
		}
		struct raft_config config;
		memset(&config, 0, sizeof(config));
		for (size_t i = 0; i < n->cfg.cluster_count; i++) {
			config.members[i].id = n->cfg.cluster[i].id;
			config.members[i].role = RAFT_VOTER;
		}
		config.count = (uint32_t)n->cfg.cluster_count;
		/* Sorted by id, as raft_config requires. */
		for (uint32_t i = 1; i < config.count; i++) {
			for (uint32_t j = i; j > 0 && config.members[j - 1].id > config.members[j].id;
			     j--) {
				struct raft_member t = config.members[j];
				config.members[j] = config.members[j - 1];
				config.members[j - 1] = t;
			}
		}
		if (raft_config_role(&config, n->cfg.id) == 0) {
			snprintf(err, err_size, "--cluster does not list this server's id %llu",
				 (unsigned long long)n->cfg.id);
			keel_wbuf_free(&boot);
			return KEEL_CONFIG;
		}
		rc = raft_bootstrap_entry(&config, &boot, &boot_entry);
		KEEL_ASSERT(rc == KEEL_OK);
		struct raft_hard_state hs = {.term = 1, .vote = 0};
		rc = node_storage_bootstrap(n->storage, &boot_entry, &hs, err, err_size);
		if (rc != KEEL_OK) {
			keel_wbuf_free(&boot);
			return rc;
		}
		KEEL_INFO("bootstrapped a new cluster of %u voters", config.count);
		rec.hard_state = hs;
		rec.entries = &boot_entry;
		rec.n_entries = 1;
	}
	if (rec.has_snapshot) {
		char msg[256];
		rc = fsm_snapshot_load(n, rec.snapshot_path, rec.snapshot.index, msg, sizeof(msg));
		if (rc != KEEL_OK) {
			snprintf(err, err_size, "cannot load snapshot %s: %s", rec.snapshot_path, msg);
			keel_wbuf_free(&boot);
			return rc;
		}
		n->core.applied_index = rec.snapshot.index;
		n->core.commit_index = rec.snapshot.index;
		n->core.snapshot_index = rec.snapshot.index;
		KEEL_INFO("loaded snapshot %llu (term %llu)", (unsigned long long)rec.snapshot.index,
			  (unsigned long long)rec.snapshot.term);
	}
	book_seed(n);
	/* Addresses from log entries not yet applied. */
	for (size_t i = 0; i < rec.n_entries; i++) {
		const struct raft_entry *e = &rec.entries[i];
		if (e->type == RAFT_ENTRY_NORMAL) {
			struct node_entry ne;
			if (node_entry_decode(e->data, e->size, &ne) == KEEL_OK &&
			    ne.kind == NODE_ENTRY_CLUSTER) {
				fsm_apply_cluster_payload(&n->core, ne.payload, ne.payload_size, false);
			}
		}
	}
	rc = raft_restore(n->core.raft, &rec.hard_state, rec.has_snapshot ? &rec.snapshot : NULL,
			  rec.entries, rec.n_entries);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "the log on disk does not fit together (%s)",
			 keel_strerror(rc));
	} else {
		KEEL_INFO("recovered term %llu, %zu log entries%s", (unsigned long long)rec.hard_state.term,
			  rec.n_entries, rec.has_snapshot ? " after the snapshot" : "");
	}
	if (rec.entries != &boot_entry) {
		node_storage_release_recovered(n->storage, &rec);
	}
	keel_wbuf_free(&boot);
	return rc;
}

/* The state machine's configuration from the server's. */
static void zk_config_from(const struct node_config *c, struct zk_config *zc)
{
	zk_config_default(zc);
	zc->max_packet_size = c->max_packet_bytes;
	zc->tick_time_ms = (int32_t)c->tick_ms;
	zc->min_session_timeout_ms = (int32_t)c->min_session_timeout_ms;
	zc->max_session_timeout_ms = (int32_t)c->max_session_timeout_ms;
	zc->max_watches_per_conn = c->max_watches_per_connection;
}

/* The metadata image's snapshot section is the controller glue's. */
static enum keel_err ctl_image_save(void *ctx, fsm_write_fn write, void *write_ctx)
{
	return node_ctl_save_image(ctx, write, write_ctx);
}

static enum keel_err ctl_image_load(void *ctx, const uint8_t *data, size_t size, char *err,
				    size_t err_size)
{
	return node_ctl_load_image(ctx, data, size, err, err_size);
}

/* The request tracker: its deadline policy and its three kinds. Request
 * ids start at random: they travel in log entries (origin, request id) and
 * find their waiting request when the entry is applied -- also entries this
 * server proposed before it restarted, replayed from its log or committed
 * late by the leader. Starting at 1 in every process matched those old
 * entries to new requests (a reconnecting client got another session's
 * ConnectResponse). A random 63-bit start makes the ranges of two process
 * lives overlap with negligible probability. */
static enum keel_err tracker_setup(struct node *n)
{
	struct tracker_policy policy = {tracker_leader_wait_ms(n->cfg.election_timeout_ms)};
	uint64_t start = core_seed_next(&n->core);
	enum keel_err rc = tracker_init(&n->core.tracker, &policy, (start >> 1) | 1u);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct tracker_kind_ops ops = zk_write_track_ops;
	ops.ctx = n;
	tracker_set_kind(&n->core.tracker, TRACK_ZK_WRITE, &ops);
	ops = admin_track_ops;
	ops.ctx = n;
	tracker_set_kind(&n->core.tracker, TRACK_ADMIN, &ops);
	ops = node_ctl_track_ops;
	ops.ctx = n;
	tracker_set_kind(&n->core.tracker, TRACK_META, &ops);
	return KEEL_OK;
}

enum keel_err node_init(struct node *n, uv_loop_t *loop, const struct node_config *cfg, char *err,
			size_t err_size)
{
	memset(n, 0, sizeof(*n));
	uint64_t seed = 0;
	if (keel_os_random(&seed, sizeof(seed)) != KEEL_OK) {
		seed = (uint64_t)keel_clock_wall_ms() << 20;
	}
	struct core_host host = node_host(n);
	core_init(&n->core, cfg->id, &host, seed);
	keel_list_init(&n->core.waiters);
	keel_list_init(&n->core.done);
	n->cfg = *cfg;
	n->loop = loop;
	char prefix[32];
	snprintf(prefix, sizeof(prefix), "id=%llu", (unsigned long long)cfg->id);
	keel_log_set_prefix(prefix);
	keel_log_set_level((enum keel_log_level)keel_log_parse_level(cfg->log_level));
	uv_update_time(loop);
	n->start_ms = node_now_ms(n);
	/* First, before storage opens files: the descriptor limit and reserve. */
	uint64_t limits_seed;
	keel_os_random(&limits_seed, sizeof(limits_seed));
	if (node_limits_init(&n->limits, cfg, limits_seed) != KEEL_OK) {
		snprintf(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}

	enum keel_err rc = net_loop_init(&n->nl, loop);
	/* libuv runs check handles newest first: started after net's flush
	 * hook, the drive runs before it, so its messages leave this turn. */
	uv_check_init(loop, &n->drive_check);
	uv_idle_init(loop, &n->drive_idle);
	n->drive_check.data = n;
	uv_check_start(&n->drive_check, on_drive_check);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "cannot set up the event loop");
		return rc;
	}
	raft_options_default(&n->core.raft_opts);
	n->core.raft_opts.id = cfg->id;
	keel_rng_seed(&n->core.raft_opts.rng, core_seed_next(&n->core));
	n->core.raft_opts.election_timeout_ms = cfg->election_timeout_ms;
	rc = tracker_setup(n);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "out of memory");
		return rc;
	}
	n->core.raft_opts.heartbeat_interval_ms = cfg->heartbeat_ms;
	n->core.raft_opts.snapshot_chunk_bytes = cfg->snapshot_chunk_bytes;
	n->core.raft_opts.snapshot_trailing_entries = cfg->snapshot_trailing;
	n->core.raft_opts.max_entry_bytes = cfg->max_packet_bytes + 4096;
	raft_options_msg_limits(&n->core.raft_opts, &n->core.msg_limits);
	n->core.decode_entries = calloc(n->core.msg_limits.max_entries, sizeof(struct raft_entry));
	n->core.snapshot_chunk_buf = malloc(cfg->snapshot_chunk_bytes);
	if (n->core.decode_entries == NULL || n->core.snapshot_chunk_buf == NULL) {
		snprintf(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	rc = raft_init(&n->core.raft, &n->core.raft_opts);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "invalid Raft options (%s)", keel_strerror(rc));
		return rc;
	}
	struct zk_config zk_config;
	zk_config_from(cfg, &zk_config);
	struct fsm_image_ops image = {ctl_image_save, ctl_image_load, n};
	rc = fsm_create(&zk_config, &image, &n->core.fsm);
	if (rc != KEEL_OK) {
		snprintf(err, err_size, "cannot create the state machine (%s)", keel_strerror(rc));
		return rc;
	}
	rc = node_ctl_create(n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	struct peer_auth_keys keys;
	memset(&keys, 0, sizeof(keys));
	if (!cfg->insecure_peers) {
		rc = peer_auth_load_file(cfg->cluster_secret_file, &keys, err, err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
	} else {
		KEEL_WARN("--insecure-peers: anyone who reaches %s can act as a peer, and admin "
			  "requests need no credential",
			  cfg->peer_listen);
	}
	rc = peers_init(&n->peers, &n->nl, cfg->id, cfg->peer_listen,
			peer_max_frame_bytes(&n->core.raft_opts), on_peer_message, on_peer_link, n,
			err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	peers_set_auth(&n->peers, &keys, peer_is_member, cfg->peer_handshake_timeout_ms,
		       cfg->max_peer_handshakes);
	rc = recover_and_restore(n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	node_book_changed(n);
	rc = node_clients_init(n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	if (cfg->metrics_listen[0] != '\0') {
		rc = http_server_start(&n->http, loop, cfg->metrics_listen, admin_http_handler, n, err,
				       err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
		n->http_running = true;
		struct http_limits hl = {cfg->max_metrics_connections, cfg->metrics_request_timeout_ms,
					 cfg->metrics_idle_timeout_ms, &n->limits.fds};
		http_server_set_limits(&n->http, &hl);
	}
	uv_timer_init(loop, &n->tick_timer);
	n->tick_timer.data = n;
	uint64_t tick = KEEL_MAX(cfg->heartbeat_ms / 2, 5u);
	uv_timer_start(&n->tick_timer, on_tick, tick, tick);
	uv_signal_init(loop, &n->sigterm);
	uv_signal_init(loop, &n->sigint);
	n->sigterm.data = n;
	n->sigint.data = n;
	uv_signal_start(&n->sigterm, on_signal, SIGTERM);
	uv_signal_start(&n->sigint, on_signal, SIGINT);
	KEEL_INFO("keel server %llu: clients on %s, peers on %s%s%s, data in %s",
		  (unsigned long long)cfg->id, cfg->listen, cfg->peer_listen,
		  cfg->metrics_listen[0] ? ", metrics on " : "", cfg->metrics_listen,
		  cfg->data_dir);
	raft_tick(n->core.raft, node_now_ms(n));
	node_drive(n);
	return KEEL_OK;
}

int node_run(struct node *n)
{
	uv_run(n->loop, UV_RUN_DEFAULT);
	return n->exit_code;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h)) {
		uv_close(h, NULL);
	}
}

void node_close(struct node *n)
{
	/* Nothing is driven from here on: completions that still arrive are
	 * not acknowledged to anyone (their clients are gone). */
	n->stopping = true;
	uv_timer_stop(&n->tick_timer);
	node_clients_close(n);
	admin_close(n);
	peers_close(&n->peers);
	if (n->http_running) {
		http_server_close(&n->http);
	}
	snapshot_close(n);
	/* Let sockets flush and close. */
	for (int i = 0; i < 50 && uv_run(n->loop, UV_RUN_NOWAIT) != 0; i++) {
		uv_sleep(2);
	}
	/* Finish the syncs in flight, stop the storage thread. */
	if (n->storage != NULL) {
		node_storage_close(n->storage);
		n->storage = NULL;
	}
	net_loop_close(&n->nl);
	uv_walk(n->loop, close_walk, NULL);
	uv_run(n->loop, UV_RUN_DEFAULT);
	/* Every handle is closed: free what callbacks could have touched. */
	node_clients_free(n);
	node_limits_close(&n->limits);
	if (n->core.raft != NULL) {
		raft_close(n->core.raft);
		n->core.raft = NULL;
	}
	node_ctl_destroy(n);
	tracker_close(&n->core.tracker);
	if (n->core.fsm != NULL) {
		fsm_destroy(n->core.fsm);
		n->core.fsm = NULL;
	}
	free(n->core.decode_entries);
	free(n->core.snapshot_chunk_buf);
	KEEL_INFO("stopped");
}
