/*
 * client_zk.c — serving ZooKeeper clients (client_zk.h).
 *
 * A connection's life:
 *
 *   HANDSHAKE --ConnectRequest--> decide (zk_session_connect)
 *      NEW      propose CREATE_SESSION; reply ConnectResponse when applied
 *      RESUME   reply now
 *      EXPIRED/REFUSE  first a ReadIndex barrier (this server may be
 *               behind), then decide again; still EXPIRED: reply timeOut 0
 *               and close; still REFUSE: close
 *   ACTIVE --requests--> ... --closeSession applied / expired / error--> CLOSED
 *
 * Replies leave in request order. Every request becomes a `struct
 * zk_pending` in the connection's FIFO:
 *   write   proposed at once (forwarded to the leader on a follower); its
 *           reply is made when this server applies the entry;
 *   read    served from the local state when it reaches the FIFO head, so
 *           it sees every earlier write of the session;
 *   sync    a ReadIndex barrier; served once applied >= the read index.
 * A reply made while earlier requests are still open is kept and sent when
 * it reaches the head. Watch events are written to the connection as apply
 * fires them, so they precede any later reply.
 *
 * Writes (and session creations) are tracked requests (tracker.h, kind
 * TRACK_ZK_WRITE): forwarded to the leader in PEER_FRAME_REQUEST, decided
 * when this server applies their entry, or refused by the leader. When the
 * leader changes, writes whose fate is unknown cannot be answered
 * truthfully: past the tracker's deadline their connections are closed (the
 * client sees ConnectionLoss and decides, as with ZooKeeper). Writes made
 * while no leader is known wait for one, within the same deadline.
 *
 * A pending request's membership: the connection's FIFO (fifo_link, until
 * its reply is sent), the request map (in_map: writes, handshakes, syncs,
 * controller requests, until decided), the barrier list (barrier_link:
 * syncs and handshakes waiting for a read index; enum barrier_state) and the
 * tracker (track: writes, while the leader decides them).
 *
 * Session liveness: every request or ping touches the session. The leader
 * keeps the expiry tracker; followers report the sessions they heard from
 * every SESSION_REPORT_MS; the leader proposes CLOSE_SESSION for sessions
 * silent past their timeout.
 */
#include "core/client_zk.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"
#include "core/controller.h"
#include "core/core.h"
#include "core/feed.h"
#include "core/fsm.h"
#include "core/membership.h"
#include "sasl/sasl_digest.h"
#include "zk/zk_housekeeping.h"
#include "zk/zk_read.h"
#include "zk/zk_reconfig.h"
#include "zk/zk_session.h"
#include "zk/zk_txn.h"
#include "zk/zk_watch.h"

#define SESSION_REPORT_MS 500u
#define MAX_TOUCH_REPORT 4096u
#define MAX_EXPIRE_PER_TICK 256u
#define MAX_REAP_PER_SCAN 1000u

enum conn_state {
	ZC_HANDSHAKE = 1,
	ZC_ACTIVE = 2,
	ZC_CLOSING = 3,
};

enum pending_kind {
	PK_CONNECT = 1, /* handshake: CREATE_SESSION or a barrier */
	PK_WRITE = 2,
	PK_READ = 3,
	PK_SYNC = 4,
	PK_EXT_READ = 5, /* keel extension read (core/controller.h): served at its turn */
	PK_EXT = 6,      /* keel controller request: completed by zk_clients_ext_complete */
	PK_RECONFIG = 7, /* membership steps (admin.c), then a barrier, then the config */
};

/* A sync's or a handshake's ReadIndex barrier:
 *
 *   NONE --start_barrier--> ASKED --read index confirmed--> CONFIRMED
 *            |                 |                              |
 *            | refused         | failed (leadership moved)    | applied >= index
 *            v                 v                              v
 *          RETRY <-------------+                           served
 *            |--asked again on tick--> ASKED
 *            '--barrier_deadline_ms--> connection closed (NOLEADER)
 */
enum barrier_state {
	BARRIER_NONE = 0,
	BARRIER_RETRY,
	BARRIER_ASKED,
	BARRIER_CONFIRMED,
};

struct zk_pending {
	struct keel_list fifo_link;    /* in zc->fifo */
	struct keel_list barrier_link; /* in zs->barriers */
	struct tracker_req track;      /* writes: the leader decides (tracker.h) */
	struct zk_conn *zc;      /* NULL once the connection is gone */
	uint8_t kind;
	bool in_map;             /* in zs->by_request (writes, connects, syncs, ext) */
	enum barrier_state barrier;
	int32_t xid;
	int32_t opcode;
	uint64_t request_id;
	uint64_t read_index;
	uint64_t start_ns;
	uint64_t barrier_deadline_ms; /* RETRY: give up then */
	uint8_t *frame; /* reads/syncs: the request; unsent writes: the entry */
	size_t frame_size;
	uint8_t *reply; /* a whole reply payload made before its turn */
	size_t reply_size;
	bool behind_sync; /* a write kept (entry in frame) until the syncs before it are served */
};

struct zk_conn {
	struct node_core *core;
	uint64_t conn_id;              /* the host's connection id */
	struct keel_list link;         /* in zs->conns */
	char peer_addr[CORE_ADDR_SIZE]; /* "HOST:PORT", copied at open */
	bool connect_seen;             /* its first frame (ConnectRequest) came */
	enum conn_state state;
	int64_t session_id;
	int32_t timeout_ms;
	bool has_read_only;
	/* The session was resumed on another connection (here or on another
	 * server): the next request gets SessionMoved and the connection
	 * closes. */
	bool moved;
	/* Served by this server cut off from the quorum (read-only mode). */
	bool read_only;
	bool attached;
	bool touched;
	struct zk_auth_info auth;
	struct sasl_digest_server *sasl; /* the SASL exchange, from the first sasl request */
	struct zk_watch_conn wconn;
	struct zk_connect_request connect; /* kept during the handshake */
	uint8_t connect_passwd[ZK_PASSWD_SIZE];
	bool barrier_done;
	struct keel_list fifo; /* of zk_pending, in request order */
	uint32_t pending_count;
	bool paused_for_backlog;
	uint64_t last_heard_ms;
	struct zk_pending *connect_pending; /* the handshake's, until decided */
	/* For `cons`. */
	int32_t last_cxid;
	int64_t last_zxid;
	int32_t last_op;
	uint64_t last_latency_ms;
	uint64_t min_latency_ms;
	uint64_t max_latency_ms;
	uint64_t total_latency_ms;
	uint64_t replies;
};

struct zk_server {
	struct zk_clients_options opts;
	struct keel_list conns;      /* of zk_conn: every open ZooKeeper connection */
	struct keel_hmap by_conn;    /* host connection id -> zk_conn */
	struct tracker *tracker;     /* the node's (request ids, writes in flight) */
	struct keel_list barriers;   /* of zk_pending: syncs and handshakes behind a barrier */
	bool release_pending;        /* writes behind served syncs wait for the ready's end */
	struct zk_watches watches;
	struct zk_expiry expiry;
	bool expiry_active;
	struct keel_hmap by_request; /* request id -> pending */
	struct keel_hmap by_session; /* session id -> conn on this server */
	struct keel_wbuf scratch;
	uint64_t last_report_ms;
	uint64_t last_housekeeping_ms;
	/* Since when no leader is known (0: one is); past leaderless_limit()
	 * the clients are sent to servers in the quorum. */
	uint64_t leaderless_since_ms;
	bool leaderless_closed;
	uint64_t local_sessions; /* read-only mode's session ids made so far */
	struct zk_reconfig_run *reconfig; /* the reconfig running (one at a time), or NULL */
	/* Stats. */
	uint64_t latency_min_ms;
	uint64_t latency_max_ms;
	uint64_t latency_total_ms;
	uint64_t latency_count;
	uint64_t outstanding;
};

static struct zk_server *server_of(const struct node_core *core)
{
	return core->zk_server;
}

static void core_schedule_drive(struct node_core *core)
{
	core->host.ops->schedule_drive(core->host.ctx);
}

/* ---- maps ---- */

static bool pending_eq(const void *item, const void *key)
{
	return ((const struct zk_pending *)item)->request_id == *(const uint64_t *)key;
}

static bool conn_session_eq(const void *item, const void *key)
{
	return ((const struct zk_conn *)item)->session_id == *(const int64_t *)key;
}

static struct zk_pending *pending_lookup(struct zk_server *zs, uint64_t request_id)
{
	return keel_hmap_find(&zs->by_request, keel_hash_u64(request_id), pending_eq, &request_id);
}

static bool in_fifo(const struct zk_pending *p)
{
	return keel_list_linked(&p->fifo_link);
}

static void barrier_unlink(struct zk_pending *p)
{
	keel_list_remove(&p->barrier_link);
}

static void barrier_link(struct zk_server *zs, struct zk_pending *p)
{
	if (!keel_list_linked(&p->barrier_link)) {
		keel_list_push_front(&zs->barriers, &p->barrier_link);
	}
}

/* Takes `p` out of the request map, the barrier list and the tracker: it
 * is decided (or given up). */
static void pending_map_remove(struct zk_server *zs, struct zk_pending *p)
{
	if (p->in_map) {
		keel_hmap_remove_item(&zs->by_request, keel_hash_u64(p->request_id), p);
		p->in_map = false;
	}
	tracker_finish(zs->tracker, &p->track);
	barrier_unlink(p);
	if (p->zc != NULL && p->zc->connect_pending == p) {
		p->zc->connect_pending = NULL;
	}
}

static void pending_free(struct zk_server *zs, struct zk_pending *p)
{
	KEEL_ASSERT(!in_fifo(p));
	pending_map_remove(zs, p);
	if (zs->outstanding > 0) {
		zs->outstanding--;
	}
	free(p->frame);
	free(p->reply);
	free(p);
}

/* `p` is decided: out of the map. False when its connection is gone (then
 * it is freed, unless a FIFO still holds it): nobody to answer. */
static bool pending_decided(struct zk_server *zs, struct zk_pending *p)
{
	pending_map_remove(zs, p);
	if (p->zc != NULL) {
		return true;
	}
	if (!in_fifo(p)) {
		pending_free(zs, p);
	}
	return false;
}

static struct zk_pending *pending_new(struct zk_server *zs, struct zk_conn *zc, uint8_t kind,
				      int32_t xid, int32_t opcode)
{
	struct zk_pending *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		return NULL;
	}
	keel_list_init(&p->fifo_link);
	keel_list_init(&p->barrier_link);
	keel_list_init(&p->track.link);
	p->zc = zc;
	p->kind = kind;
	p->xid = xid;
	p->opcode = opcode;
	p->start_ns = core_mono_ns(zc->core);
	zs->outstanding++;
	return p;
}

/* Gives `p` a fresh request id (the tracker's counter: one per server) and
 * puts it in the request map. */
static enum keel_err pending_map_add(struct zk_server *zs, struct zk_pending *p)
{
	KEEL_ASSERT(!p->in_map);
	p->request_id = tracker_next_id(zs->tracker);
	p->track.request_id = p->request_id;
	enum keel_err rc = keel_hmap_insert(&zs->by_request, keel_hash_u64(p->request_id), p);
	if (rc == KEEL_OK) {
		p->in_map = true;
	}
	return rc;
}

/* ---- connection helpers ---- */

static bool conn_id_eq(const void *item, const void *key)
{
	return ((const struct zk_conn *)item)->conn_id == *(const uint64_t *)key;
}

static struct zk_conn *zc_of(struct node_core *core, uint64_t conn)
{
	struct zk_server *zs = server_of(core);
	return zs != NULL ? keel_hmap_find(&zs->by_conn, keel_hash_u64(conn), conn_id_eq, &conn)
			  : NULL;
}

static void conn_close(struct zk_conn *zc, enum keel_err reason, bool flush)
{
	if (zc->state == ZC_CLOSING) {
		return;
	}
	zc->state = ZC_CLOSING;
	core_client_close(zc->core, zc->conn_id, reason, flush);
}

static void record_latency(struct node_core *core, struct zk_conn *zc, struct zk_pending *p)
{
	struct zk_server *zs = server_of(core);
	uint64_t us = (core_mono_ns(core) - p->start_ns) / 1000u;
	uint64_t ms = us / 1000u;
	metrics_hist_observe(&core->stats.request_latency, us);
	if (zs->latency_count == 0 || ms < zs->latency_min_ms) {
		zs->latency_min_ms = ms;
	}
	zs->latency_max_ms = KEEL_MAX(zs->latency_max_ms, ms);
	zs->latency_total_ms += ms;
	zs->latency_count++;
	zc->last_latency_ms = ms;
	if (zc->replies == 0 || ms < zc->min_latency_ms) {
		zc->min_latency_ms = ms;
	}
	zc->max_latency_ms = KEEL_MAX(zc->max_latency_ms, ms);
	zc->total_latency_ms += ms;
	zc->replies++;
}

/* Writes a reply (header + body) as one frame on the connection. */
static void send_reply(struct zk_conn *zc, int32_t xid, int64_t zxid, int32_t err,
		       const uint8_t *body, size_t body_size)
{
	size_t mark;
	struct keel_wbuf *w = core_client_begin(zc->core, zc->conn_id, &mark);
	if (w == NULL) {
		return;
	}
	zk_reply_header_encode(w, xid, zxid, err);
	if (err == 0 && body_size > 0) {
		keel_wbuf_bytes(w, body, body_size);
	}
	core_client_end(zc->core, zc->conn_id, mark);
	zc->last_zxid = zxid;
}

static void send_raw_payload(struct zk_conn *zc, const uint8_t *payload, size_t size)
{
	core_client_send(zc->core, zc->conn_id, payload, size);
}

static void fifo_push(struct zk_conn *zc, struct zk_pending *p)
{
	keel_list_push_back(&zc->fifo, &p->fifo_link);
	zc->pending_count++;
	if (zc->pending_count >= zc->core->zk_server->opts.max_pending_per_connection &&
	    !zc->paused_for_backlog) {
		zc->paused_for_backlog = true;
		core_client_pause(zc->core, zc->conn_id, true);
	}
}

static struct zk_pending *fifo_pop(struct zk_conn *zc)
{
	struct keel_list *first = keel_list_pop_front(&zc->fifo);
	KEEL_ASSERT(first != NULL);
	zc->pending_count--;
	return KEEL_LIST_ITEM(first, struct zk_pending, fifo_link);
}

/* The oldest open request of the connection, or NULL. */
static struct zk_pending *fifo_head(const struct zk_conn *zc)
{
	struct keel_list *first = keel_list_first(&zc->fifo);
	return first != NULL ? KEEL_LIST_ITEM(first, struct zk_pending, fifo_link) : NULL;
}

static void serve_read(struct node_core *core, struct zk_conn *zc, struct zk_pending *p);
static void fifo_advance(struct node_core *core, struct zk_conn *zc);
static void release_behind_sync(struct node_core *core, struct zk_conn *zc);
static bool sync_before(const struct zk_conn *zc, const struct zk_pending *p);

/* Completes `p` with a reply payload: sent now if it is the head, else kept. */
static void complete(struct node_core *core, struct zk_pending *p, int32_t err, int64_t zxid,
		     const uint8_t *body, size_t body_size)
{
	struct zk_conn *zc = p->zc;
	if (zc == NULL || zc->state == ZC_CLOSING) {
		return;
	}
	if (fifo_head(zc) == p) {
		send_reply(zc, p->xid, zxid, err, body, body_size);
		record_latency(core, zc, p);
		fifo_pop(zc);
		pending_free(server_of(core), p);
		fifo_advance(core, zc);
		return;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, ZK_REPLY_HEADER_SIZE + body_size, SIZE_MAX);
	zk_reply_header_encode(&w, p->xid, zxid, err);
	if (err == 0 && body_size > 0) {
		keel_wbuf_bytes(&w, body, body_size);
	}
	if (!keel_wbuf_ok(&w)) {
		keel_wbuf_free(&w);
		conn_close(zc, KEEL_NOMEM, false);
		return;
	}
	p->reply = keel_wbuf_release(&w, &p->reply_size);
}

/* Sends what is ready at the head of the FIFO: kept replies, and reads
 * whose turn has come. Stops at a write or sync still in flight. */
static void fifo_advance(struct node_core *core, struct zk_conn *zc)
{
	struct zk_pending *p;
	while ((p = fifo_head(zc)) != NULL && zc->state == ZC_ACTIVE) {
		if (p->reply != NULL) {
			send_raw_payload(zc, p->reply, p->reply_size);
			record_latency(core, zc, p);
			fifo_pop(zc);
			pending_free(server_of(core), p);
			continue;
		}
		if (p->kind == PK_READ || p->kind == PK_EXT_READ ||
		    ((p->kind == PK_SYNC || p->kind == PK_RECONFIG) &&
		     p->barrier == BARRIER_CONFIRMED &&
		     core->applied_index >= p->read_index)) {
			fifo_pop(zc);
			serve_read(core, zc, p);
			pending_free(server_of(core), p);
			continue;
		}
		break;
	}
	release_behind_sync(core, zc);
	if (zc->paused_for_backlog &&
	    zc->pending_count < zc->core->zk_server->opts.max_pending_per_connection / 2) {
		zc->paused_for_backlog = false;
		core_client_pause(zc->core, zc->conn_id, false);
	}
}

/* ---- watch events ---- */

#ifdef KEEL_PLANT_BUG_WATCH_AFTER_DATA
/* PLANTED BUG (simulator only: build/keel-sim-bug-watch-after-data;
 * tests/sim catches it): an event for a connection with requests open is
 * queued in its FIFO behind them, like a reply, so the reply that shows
 * the change (the write's own, a read waiting behind it) goes out first. */
static bool queue_event(struct zk_conn *zc, const struct zk_watch_event *ev)
{
	if (keel_list_empty(&zc->fifo)) {
		return false;
	}
	struct zk_pending *p = pending_new(server_of(zc->core), zc, PK_READ, -1, 0);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, SIZE_MAX);
	zk_reply_header_encode(&w, -1, -1, 0);
	struct zk_watcher_event we = {ev->type, ZK_STATE_SYNC_CONNECTED, ev->path};
	zk_watcher_event_encode(&w, &we);
	if (p == NULL || !keel_wbuf_ok(&w)) {
		keel_wbuf_free(&w);
		if (p != NULL) {
			pending_free(server_of(zc->core), p);
		}
		conn_close(zc, KEEL_NOMEM, false);
		return true;
	}
	p->reply = keel_wbuf_release(&w, &p->reply_size);
	fifo_push(zc, p);
	return true;
}
#endif

static void on_watch_fire(void *ctx, struct zk_watch_conn *wconn, const struct zk_watch_event *ev)
{
	(void)ctx;
	struct zk_conn *zc = KEEL_CONTAINER_OF(wconn, struct zk_conn, wconn);
	if (zc->state == ZC_CLOSING) {
		return;
	}
#ifdef KEEL_PLANT_BUG_WATCH_AFTER_DATA
	if (queue_event(zc, ev)) {
		return;
	}
#endif
	size_t mark;
	struct keel_wbuf *w = core_client_begin(zc->core, zc->conn_id, &mark);
	if (w == NULL) {
		return;
	}
	/* ZooKeeper 3.8 sends notifications with zxid -1. */
	zk_reply_header_encode(w, -1, -1, 0);
	struct zk_watcher_event we = {ev->type, ZK_STATE_SYNC_CONNECTED, ev->path};
	zk_watcher_event_encode(w, &we);
	core_client_end(zc->core, zc->conn_id, mark);
}

/* ---- sessions ---- */

static void touch(struct node_core *core, struct zk_conn *zc)
{
	zc->last_heard_ms = core_now_ms(core);
	if (zc->session_id == 0) {
		return;
	}
	struct zk_server *zs = server_of(core);
	if (zs->expiry_active) {
		zk_expiry_touch(&zs->expiry, zc->session_id, (int64_t)core_now_ms(core));
	} else {
		zc->touched = true;
	}
}

/* ---- SessionMoved ----
 *
 * A session lives on the connection that last resumed it. When a client
 * resumes its session elsewhere (this server: session_map_add; another
 * server: PEER_FRAME_SESSION_MOVED from it), the older connection no longer
 * owns the session: it leaves the session map (no watches of it are
 * re-armed, no touches reported) and its next request is answered
 * SessionMoved (-118), after which it closes, as ZooKeeper tears down such
 * a connection. Requests it sent before the notice arrived are served as
 * usual: the notice is a peer frame, not a log entry (docs/zookeeper-compat.md).
 */
static void mark_moved(struct zk_conn *zc)
{
	CORE_INFO(zc->core, "client %s: session 0x%llx was resumed on another connection: its next "
		  "request here gets SessionMoved",
		  zc->peer_addr,
		  (unsigned long long)zc->session_id);
	zc->moved = true;
	zc->session_id = 0;
	zc->touched = false;
}

/* Tells every other server that `session_id` now lives here. */
static void broadcast_session_moved(struct node_core *core, int64_t session_id)
{
	const struct node_addr_book *book = &core->book;
	for (size_t i = 0; i < book->count; i++) {
		uint64_t to = book->addrs[i].id;
		size_t mark;
		struct keel_wbuf *w;
		if (to == core->id || !core_peer_connected(core, to) ||
		    (w = core_peer_begin(core, to, PEER_FRAME_SESSION_MOVED, &mark)) == NULL) {
			continue;
		}
		keel_wbuf_i64(w, session_id);
		core_peer_end(core, to, mark);
	}
}

static void on_session_moved_frame(struct node_core *core, uint64_t from, const uint8_t *body,
				   size_t size)
{
	struct zk_server *zs = server_of(core);
	struct keel_rbuf r;
	keel_rbuf_init(&r, body, size);
	int64_t sid = keel_rbuf_i64(&r);
	if (!keel_rbuf_ok(&r) || sid == 0) {
		CORE_WARN(core, "peer %llu: malformed session-moved frame, ignored",
			  (unsigned long long)from);
		return;
	}
	struct zk_conn *zc = keel_hmap_remove(&zs->by_session, keel_hash_u64((uint64_t)sid),
					      conn_session_eq, &sid);
	if (zc != NULL) {
		mark_moved(zc);
	}
}

/* A request on a connection whose session moved: SessionMoved, then close. */
static void refuse_moved(struct node_core *core, struct zk_conn *zc, int32_t xid)
{
	if (keel_list_empty(&zc->fifo)) {
		send_reply(zc, xid, (int64_t)core->applied_index, ZK_SESSION_MOVED, NULL, 0);
	}
	conn_close(zc, KEEL_EXIST, true);
}

static void session_map_add(struct zk_server *zs, struct zk_conn *zc)
{
	int64_t id = zc->session_id;
	struct zk_conn *old = keel_hmap_remove(&zs->by_session, keel_hash_u64((uint64_t)id),
	                                       conn_session_eq, &id);
	if (old != NULL && old != zc) {
		mark_moved(old); /* the session moved to a new connection */
	}
	keel_hmap_insert(&zs->by_session, keel_hash_u64((uint64_t)id), zc);
}

static void session_map_remove(struct zk_server *zs, struct zk_conn *zc)
{
	if (zc->session_id != 0) {
		keel_hmap_remove_item(&zs->by_session, keel_hash_u64((uint64_t)zc->session_id), zc);
	}
}

static void activate(struct node_core *core, struct zk_conn *zc, int64_t session_id,
                     int32_t timeout_ms)
{
	struct zk_server *zs = server_of(core);
	zc->session_id = session_id;
	zc->timeout_ms = timeout_ms;
	zc->state = ZC_ACTIVE;
	session_map_add(zs, zc);
	if (!zc->attached &&
	    zk_watches_attach(&zs->watches, &zc->wconn, zc->conn_id, &zc->auth.ids) == KEEL_OK) {
		zc->attached = true;
	}
	touch(core, zc);
	core_client_pause(zc->core, zc->conn_id, false);
}

/* ---- proposing ---- */

/* Hands an encoded entry to Raft (leader) or to the leader (follower).
 * Returns where it went (this server's id when proposed here), or 0 when it
 * cannot be sent now (no leader, link down, proposal refused). */
static uint64_t submit_entry(struct node_core *core, struct zk_pending *p, const uint8_t *entry,
			     size_t size)
{
	if (core->role == RAFT_LEADER) {
		uint64_t index, term;
		enum keel_err rc = core_propose(core, entry, (uint32_t)size, &index, &term);
		if (rc != KEEL_OK) {
			CORE_DEBUG(core, "propose failed: %s", keel_strerror(rc));
			return 0;
		}
		core_schedule_drive(core);
		return core->id;
	}
	uint64_t to;
	size_t mark;
	struct keel_wbuf *w = core_request_begin(core, TRACK_ZK_WRITE, p->request_id, &to, &mark);
	if (w == NULL) {
		return 0;
	}
	keel_wbuf_bytes(w, entry, size);
	core_peer_end(core, to, mark);
	return to;
}

/* Builds the envelope + txn for `p` in the scratch writer. */
static void encode_entry_header(struct node_core *core, struct zk_pending *p, struct keel_wbuf *w)
{
	keel_wbuf_reset(w);
	node_entry_encode_header(w, NODE_ENTRY_ZK, core->id, p->request_id, core_wall_ms(core));
}

/* Proposes now or keeps the entry until a leader is known; either way the
 * tracker follows it from here. */
static void propose_or_hold(struct node_core *core, struct zk_pending *p, struct keel_wbuf *entry)
{
	struct zk_server *zs = server_of(core);
	/* Behind a held write, this one is held too: the tracker resends
	 * them in order, so a session's writes reach the log in its order. */
	bool behind = tracker_holds(zs->tracker, TRACK_ZK_WRITE);
	uint64_t sent_to = behind ? 0 : submit_entry(core, p, entry->data, entry->size);
	if (sent_to == 0 && !behind && (core->role == RAFT_LEADER ||
			     (core->leader != 0 && core_peer_connected(core, core->leader)))) {
		/* A leader that refused (busy, transferring): give up on it. */
		if (p->zc != NULL) {
			conn_close(p->zc, KEEL_BUSY, true);
		}
		return;
	}
#ifdef KEEL_PLANT_BUG_KEEP_PENDING_ON_LEADER_CHANGE
	if (true) { /* the entry is kept for a resend (tracker.c) */
#else
	if (sent_to == 0) {
#endif
		p->frame = malloc(entry->size);
		if (p->frame == NULL) {
			if (p->zc != NULL) {
				conn_close(p->zc, KEEL_NOMEM, false);
			}
			return;
		}
		memcpy(p->frame, entry->data, entry->size);
		p->frame_size = entry->size;
	}
	if (tracker_add(zs->tracker, &p->track, TRACK_ZK_WRITE, 0, sent_to, core->term,
			core_now_ms(core)) != KEEL_OK &&
	    p->zc != NULL) {
		conn_close(p->zc, KEEL_NOMEM, false);
	}
}

/* The tracker's resend: a held entry, now that a leader is known. */
static bool track_resend(void *ctx, struct tracker_req *req)
{
	struct node_core *core = ctx;
	struct zk_pending *p = KEEL_CONTAINER_OF(req, struct zk_pending, track);
	KEEL_ASSERT(p->frame != NULL);
	if (submit_entry(core, p, p->frame, p->frame_size) == 0) {
		return false;
	}
#ifndef KEEL_PLANT_BUG_KEEP_PENDING_ON_LEADER_CHANGE /* else kept for a resend (tracker.c) */
	free(p->frame);
	p->frame = NULL;
	p->frame_size = 0;
#endif
	return true;
}

/* The tracker gave up on a write (no leader in time, its term ended
 * without it, the leader refused it): its client cannot be told the truth,
 * so the connection closes (ConnectionLoss; the client decides). */
static void track_fail(void *ctx, struct tracker_req *req, enum keel_err err)
{
	struct node_core *core = ctx;
	struct zk_server *zs = server_of(core);
	struct zk_pending *p = KEEL_CONTAINER_OF(req, struct zk_pending, track);
	pending_map_remove(zs, p);
	if (p->zc != NULL) {
		CORE_DEBUG(core, "client %s: write not decided (%s)", p->zc->peer_addr,
			   keel_strerror(err));
		conn_close(p->zc, err, true);
	}
	if (!in_fifo(p)) {
		pending_free(zs, p);
	}
}

const struct tracker_kind_ops zk_write_track_ops = {
	.fail = track_fail,
	.reply = NULL, /* decided by apply; the leader replies only to refuse */
	.resend = track_resend,
};

/* ---- handshake ---- */

/* Asks for a ReadIndex barrier; refused now, it is asked again on tick
 * within the tracker's deadline policy. */
static void ask_barrier(struct node_core *core, struct zk_pending *p)
{
	if (raft_read_index(core->raft, p->request_id) != KEEL_OK) {
		if (p->barrier != BARRIER_RETRY) {
			p->barrier = BARRIER_RETRY;
			p->barrier_deadline_ms =
				core_now_ms(core) + server_of(core)->tracker->policy.leader_wait_ms;
		}
		return;
	}
	p->barrier = BARRIER_ASKED;
	p->barrier_deadline_ms = 0;
	core_schedule_drive(core);
}

static void start_barrier(struct node_core *core, struct zk_pending *p)
{
	barrier_link(server_of(core), p);
	p->barrier = BARRIER_NONE;
	ask_barrier(core, p);
}

static void send_connect_response(struct zk_conn *zc, const struct zk_connect_response *rsp)
{
	struct keel_wbuf *w;
	size_t mark;
	w = core_client_begin(zc->core, zc->conn_id, &mark);
	if (w == NULL) {
		return;
	}
	zk_connect_response_encode(w, rsp);
	core_client_end(zc->core, zc->conn_id, mark);
}

/*
 * A server that has known no leader for this long (twice the election
 * timeout: a healthy cluster elects within it) is cut off from the quorum
 * or the quorum is lost. As a ZooKeeper server that loses its leader does,
 * it closes its clients' connections and refuses new ones, so that clients
 * move to a server in the quorum while their sessions live — instead of
 * holding them with pings answered here while the leader expires them.
 */
static uint64_t leaderless_limit(const struct node_core *core)
{
	return 2 * (uint64_t)core->raft_opts.election_timeout_ms;
}

static bool leaderless_too_long(const struct node_core *core, const struct zk_server *zs,
                                uint64_t now)
{
	return zs->leaderless_since_ms != 0 &&
	       now - zs->leaderless_since_ms >= leaderless_limit(core);
}

static void close_zk_clients(struct node_core *core, enum keel_err why)
{
	struct zk_server *zs = server_of(core);
	struct keel_list *it;
	/* conn_close only marks a connection: the host's close comes later. */
	KEEL_LIST_FOR_EACH (it, &zs->conns) {
		conn_close(KEEL_LIST_ITEM(it, struct zk_conn, link), why, true);
	}
}

/* ---- read-only mode ----
 *
 * A server cut off from the quorum (no leader for leaderless_limit()) still
 * serves clients that said in their ConnectRequest they accept a read-only
 * server (canBeReadOnly), unless --no-read-only (ZooKeeper's
 * readonlymode.enabled, on by default):
 *   - a known session resumes here read-only; a new one gets a local
 *     session: an id from this server's own range (never a zxid, so never
 *     one the log made) that is never committed and lives as long as its
 *     connection;
 *   - the ConnectResponse says readOnly=true, `isro` answers "ro";
 *   - reads (and pings, auth) are served from the local state; writes,
 *     sync and reconfig get NotReadOnly (-119); closeSession closes the
 *     connection only (the quorum expires a resumed session as usual);
 *   - when a leader is known again the read-only connections are closed,
 *     and the clients reconnect read-write (they look for a server whose
 *     `isro` says "rw").
 * Clients without canBeReadOnly are refused, as before.
 */
static bool read_only_allowed(const struct node_core *core, const struct zk_conn *zc)
{
	return !server_of(core)->opts.no_read_only && zc->connect.has_read_only &&
	       zc->connect.read_only;
}

/* A session id this server makes in read-only mode: bit 62 set (zxids, the
 * ids of committed sessions, never reach it), the server id, a counter. */
static int64_t local_session_id(struct node_core *core)
{
	struct zk_server *zs = server_of(core);
	zs->local_sessions++;
	return (int64_t)((UINT64_C(1) << 62) | ((core->id & 0xffu) << 48) |
			 (zs->local_sessions & ((UINT64_C(1) << 48) - 1)));
}

static void connect_read_only(struct node_core *core, struct zk_conn *zc, struct zk_pending *p)
{
	struct zk_connect_response rsp;
	int32_t timeout = 0;
	enum zk_connect_action action =
		zk_session_connect(fsm_zk(core->fsm), fsm_zk_config(core->fsm), &zc->connect,
				   (int64_t)core->applied_index, &rsp, &timeout);
	pending_free(server_of(core), p);
	switch (action) {
	case ZK_CONNECT_REFUSE:
		CORE_INFO(core,
		          "client %s saw zxid 0x%llx, this read-only server is at 0x%llx: refused",
		          zc->peer_addr, (unsigned long long)zc->connect.last_zxid_seen,
		          (unsigned long long)core->applied_index);
		conn_close(zc, KEEL_STALE, false);
		return;
	case ZK_CONNECT_EXPIRED:
		send_connect_response(zc, &rsp);
		conn_close(zc, KEEL_OK, true);
		return;
	case ZK_CONNECT_NEW:
		if (core_random(core, zc->connect_passwd, ZK_PASSWD_SIZE) != KEEL_OK) {
			conn_close(zc, KEEL_NOMEM, false);
			return;
		}
		rsp.session_id = local_session_id(core);
		rsp.timeout_ms = timeout;
		rsp.passwd = zk_bytes_of(zc->connect_passwd, ZK_PASSWD_SIZE);
		break;
	case ZK_CONNECT_RESUME:
		break;
	}
	CORE_INFO(core, "client %s: session 0x%llx served read-only (no quorum)",
		  zc->peer_addr, (unsigned long long)rsp.session_id);
	rsp.read_only = true;
	zc->read_only = true;
	int64_t sid = rsp.session_id;
	send_connect_response(zc, &rsp);
	activate(core, zc, sid, rsp.timeout_ms);
}

/* A request a read-only connection may not make: answered here (true). */
static bool refuse_read_only(struct node_core *core, struct zk_conn *zc,
                             const struct zk_request *req, enum keel_err decoded)
{
	bool refused;
	if (decoded == KEEL_UNSUPPORTED) {
		refused =
		        node_ctl_opcode_known(req->opcode) && !node_ctl_opcode_is_read(req->opcode);
	} else {
		enum zk_op_class cls = zk_op_classify(req->opcode);
		if (cls == ZK_CLASS_CLOSE) {
			send_reply(zc, req->xid, (int64_t)core->applied_index, ZK_OK, NULL, 0);
			conn_close(zc, KEEL_OK, true);
			return true;
		}
		refused = cls == ZK_CLASS_WRITE || cls == ZK_CLASS_SYNC ||
			  req->opcode == ZK_OP_RECONFIG;
	}
	if (refused) {
		send_reply(zc, req->xid, (int64_t)core->applied_index, ZK_NOT_READ_ONLY, NULL, 0);
	}
	return refused;
}

static void close_read_only_clients(struct node_core *core)
{
	struct zk_server *zs = server_of(core);
	struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &zs->conns) {
		struct zk_conn *zc = KEEL_LIST_ITEM(it, struct zk_conn, link);
		if (zc->read_only) {
			conn_close(zc, KEEL_NOTLEADER, true);
		}
	}
}

bool zk_clients_read_only(const struct node_core *core)
{
	struct zk_server *zs = server_of(core);
	return zs != NULL && zs->leaderless_since_ms != 0;
}

/* Decides a handshake. `final` after a barrier: EXPIRED/REFUSE stand. */
static void decide_connect(struct node_core *core, struct zk_conn *zc, struct zk_pending *p,
                           bool final)
{
	struct zk_server *zs = server_of(core);
	uint64_t now = core_now_ms(core);
	if (!final && leaderless_too_long(core, zs, now) && read_only_allowed(core, zc)) {
		connect_read_only(core, zc, p);
		return;
	}
	if (!final && leaderless_too_long(core, zs, now)) {
		CORE_INFO(core,
		          "client %s: no leader for %llu ms: refused, so that it connects to a "
		          "server in the quorum",
		          zc->peer_addr, (unsigned long long)(now - zs->leaderless_since_ms));
		pending_free(zs, p);
		conn_close(zc, KEEL_NOTLEADER, false);
		return;
	}
	struct zk_connect_response rsp;
	int32_t timeout = 0;
	enum zk_connect_action action =
		zk_session_connect(fsm_zk(core->fsm), fsm_zk_config(core->fsm), &zc->connect,
				   (int64_t)core->applied_index, &rsp, &timeout);
	if (!final && (action == ZK_CONNECT_REFUSE || action == ZK_CONNECT_EXPIRED)) {
		/* This server may be behind: look again after a barrier. */
		if (pending_map_add(zs, p) != KEEL_OK) {
			conn_close(zc, KEEL_NOMEM, false);
			return;
		}
		start_barrier(core, p);
		return;
	}
	switch (action) {
	case ZK_CONNECT_REFUSE:
		CORE_INFO(core, "client %s saw zxid 0x%llx, this server is at 0x%llx: refused",
			  zc->peer_addr, (unsigned long long)zc->connect.last_zxid_seen,
			  (unsigned long long)core->applied_index);
		conn_close(zc, KEEL_STALE, false);
		break;
	case ZK_CONNECT_EXPIRED:
		send_connect_response(zc, &rsp);
		conn_close(zc, KEEL_OK, true);
		break;
	case ZK_CONNECT_RESUME: {
		int64_t sid = rsp.session_id;
		send_connect_response(zc, &rsp);
		activate(core, zc, sid, rsp.timeout_ms);
		broadcast_session_moved(core, sid);
		break;
	}
	case ZK_CONNECT_NEW: {
		if (pending_map_add(zs, p) != KEEL_OK ||
		    core_random(core, zc->connect_passwd, ZK_PASSWD_SIZE) != KEEL_OK) {
			conn_close(zc, KEEL_NOMEM, false);
			return;
		}
		p->kind = PK_CONNECT;
		/* Again: a barrier before this decision took it out of the map
		 * and cleared it, and a close must find it to forget the
		 * connection it points to. */
		zc->connect_pending = p;
		zc->timeout_ms = timeout;
		struct keel_wbuf *w = &zs->scratch;
		encode_entry_header(core, p, w);
		struct zk_txn_meta meta = {core_wall_ms(core), core->id, 0, 0};
		zk_txn_encode_create_session(w, &meta, timeout, zc->connect_passwd);
		propose_or_hold(core, p, w);
		return; /* p stays in the map until applied */
	}
	}
	if (!p->in_map) {
		pending_free(zs, p);
	}
}

/* A client certificate verified on the secure port is the connection's
 * x509 identity: its subject DN, as ZooKeeper's X509AuthenticationProvider. */
static void add_x509_identity(struct node_core *core, struct zk_conn *zc, const char *dn)
{
	const char *super_dn = server_of(core)->opts.x509_super_user;
	if (zk_auth_info_add(&zc->auth, zk_bytes_str(ZK_X509_SCHEME),
	                     zk_bytes_of(dn, strlen(dn))) == KEEL_OK) {
		CORE_DEBUG(core, "client %s: x509 identity '%s'", zc->peer_addr, dn);
	}
	if (super_dn[0] != '\0' && strcmp(dn, super_dn) == 0 &&
	    zk_auth_info_add(&zc->auth, zk_bytes_str("super"), zk_bytes_of(dn, strlen(dn))) ==
		    KEEL_OK) {
		CORE_INFO(core, "client %s: certificate '%s' is the x509 super user", zc->peer_addr,
			  dn);
	}
}

void zk_conn_open(struct node_core *core, uint64_t conn, const char *peer_addr,
		  const char *tls_subject)
{
	struct zk_server *zs = server_of(core);
	KEEL_ASSERT(conn != 0);
	KEEL_ASSERT(zc_of(core, conn) == NULL);
	struct zk_conn *zc = calloc(1, sizeof(*zc));
	if (zc == NULL || keel_hmap_insert(&zs->by_conn, keel_hash_u64(conn), zc) != KEEL_OK) {
		free(zc);
		core_client_close(core, conn, KEEL_NOMEM, false);
		return;
	}
	zc->core = core;
	zc->conn_id = conn;
	keel_list_init(&zc->link);
	keel_list_push_front(&zs->conns, &zc->link);
	keel_fmt(zc->peer_addr, sizeof(zc->peer_addr), "%s", peer_addr);
	keel_list_init(&zc->fifo);
	zc->state = ZC_HANDSHAKE;
	zk_auth_info_init(&zc->auth);
	/* Every connection carries its ip identity (ACL scheme "ip"). */
	char ip[CORE_ADDR_SIZE];
	keel_fmt(ip, sizeof(ip), "%s", peer_addr);
	char *colon = strrchr(ip, ':');
	if (colon != NULL) {
		*colon = '\0';
	}
	zk_auth_info_add(&zc->auth, zk_bytes_of("ip", 2), zk_bytes_of(ip, strlen(ip)));
	if (tls_subject != NULL) {
		add_x509_identity(core, zc, tls_subject);
	}
}

/* The first frame of a ZooKeeper connection (a ConnectRequest). */
static bool on_connect_frame(struct node_core *core, struct zk_conn *zc, const uint8_t *payload,
			     size_t size)
{
	struct zk_server *zs = server_of(core);
	zc->connect_seen = true;
	if (zk_connect_request_decode(&zc->connect, payload, size) != KEEL_OK) {
		CORE_DEBUG(core, "client %s: malformed ConnectRequest", zc->peer_addr);
		conn_close(zc, KEEL_PROTO, false);
		return false;
	}
	/* The request's password points into the frame: keep a copy. */
	size_t plen = zc->connect.passwd.size > 0 ? (size_t)zc->connect.passwd.size : 0;
	if (plen > ZK_PASSWD_SIZE) {
		plen = ZK_PASSWD_SIZE + 1; /* never matches; zk_session_password_ok says so */
		zc->connect.passwd = zk_bytes_of(zc->connect_passwd, 0);
		zc->connect.passwd.size = ZK_PASSWD_SIZE + 1;
	} else {
		memcpy(zc->connect_passwd, zc->connect.passwd.data, plen);
		zc->connect.passwd = zk_bytes_of(zc->connect_passwd, plen);
	}
	zc->has_read_only = zc->connect.has_read_only;
	struct zk_pending *p = pending_new(zs, zc, PK_CONNECT, 0, ZK_OP_CREATE_SESSION);
	if (p == NULL) {
		conn_close(zc, KEEL_NOMEM, false);
		return false;
	}
	/* No request is read before the handshake is decided. */
	core_client_pause(core, zc->conn_id, true);
	zc->connect_pending = p;
	decide_connect(core, zc, p, false);
	return false;
}

/* ---- requests ---- */

/* The change feed (core/feed.h): answered and started at its turn. */
static void serve_feed(struct node_core *core, struct zk_conn *zc, struct zk_pending *p)
{
	node_feed_serve(core, zc->conn_id, zc->peer_addr, &zc->auth.ids, p->xid,
			p->frame + ZK_REQUEST_HEADER_SIZE, p->frame_size - ZK_REQUEST_HEADER_SIZE);
	record_latency(core, zc, p);
}

/* A keel extension read (DescribeCluster, FetchMetadata): controller.c. */
static void serve_ext_read(struct node_core *core, struct zk_conn *zc, struct zk_pending *p)
{
	if (p->opcode == ZK_OP_KEEL_FEED) {
		serve_feed(core, zc, p);
		return;
	}
	struct keel_wbuf *body = &server_of(core)->scratch;
	keel_wbuf_reset(body);
	int32_t err = node_ctl_serve_read(core, p->opcode, p->frame + ZK_REQUEST_HEADER_SIZE,
					  p->frame_size - ZK_REQUEST_HEADER_SIZE, body);
	if (!keel_wbuf_ok(body)) {
		conn_close(zc, KEEL_TOOBIG, false);
		return;
	}
	send_reply(zc, p->xid, (int64_t)core->applied_index, err, body->data, body->size);
	record_latency(core, zc, p);
}

static void serve_config(struct node_core *core, struct zk_conn *zc, struct zk_pending *p);

static void serve_read(struct node_core *core, struct zk_conn *zc, struct zk_pending *p)
{
	struct zk_server *zs = server_of(core);
	if (p->kind == PK_EXT_READ) {
		serve_ext_read(core, zc, p);
		return;
	}
	if (p->kind == PK_RECONFIG) {
		serve_config(core, zc, p);
		return;
	}
	struct zk_request req;
	enum keel_err rc = zk_request_decode(&req, p->frame, p->frame_size);
	KEEL_ASSERT(rc == KEEL_OK); /* decoded once already */
	struct zk_read_ctx ctx = {
		.state = fsm_zk(core->fsm),
		.watches = zc->attached ? &zs->watches : NULL,
		.conn = &zc->wconn,
		.ids = &zc->auth.ids,
		.session_id = zc->session_id,
	};
	struct keel_wbuf *body = &zs->scratch;
	keel_wbuf_reset(body);
	int32_t err = zk_read(&ctx, &req, body);
	if (!keel_wbuf_ok(body)) {
		conn_close(zc, KEEL_TOOBIG, false);
		return;
	}
	if (zc->state == ZC_CLOSING) {
		return;
	}
	send_reply(zc, p->xid, (int64_t)core->applied_index, err, body->data, body->size);
	record_latency(core, zc, p);
}

/* A request decided later (a write, a controller request): a pending with
 * a request id, at the end of the connection's FIFO. NULL when out of
 * memory (the connection is then closing). */
static struct zk_pending *pending_queue(struct zk_server *zs, struct zk_conn *zc, uint8_t kind,
					const struct zk_request *req)
{
	struct zk_pending *p = pending_new(zs, zc, kind, req->xid, req->opcode);
	if (p == NULL || pending_map_add(zs, p) != KEEL_OK) {
		if (p != NULL) {
			pending_free(zs, p);
		}
		conn_close(zc, KEEL_NOMEM, false);
		return NULL;
	}
	fifo_push(zc, p);
	return p;
}

static void handle_write(struct node_core *core, struct zk_conn *zc, const struct zk_request *req)
{
	struct zk_server *zs = server_of(core);
	struct zk_pending *p = pending_queue(zs, zc, PK_WRITE, req);
	if (p == NULL) {
		return;
	}
	struct keel_wbuf *w = &zs->scratch;
	encode_entry_header(core, p, w);
	struct zk_txn_meta meta = {core_wall_ms(core), core->id, req->xid, zc->session_id};
	zk_txn_encode_request(w, &meta, &zc->auth.ids, req->opcode, req->body, req->body_size);
	if (!keel_wbuf_ok(w)) {
		conn_close(zc, KEEL_TOOBIG, false);
		return;
	}
	if (sync_before(zc, p)) {
		p->frame = malloc(w->size);
		if (p->frame == NULL) {
			conn_close(zc, KEEL_NOMEM, false);
			return;
		}
		memcpy(p->frame, w->data, w->size);
		p->frame_size = w->size;
		p->behind_sync = true;
		return;
	}
	propose_or_hold(core, p, w);
}

/* Proposes the writes that waited behind syncs now served (fifo_advance). */
static void release_behind_sync(struct node_core *core, struct zk_conn *zc)
{
	if (core->in_ready) {
		/* proposing waits until the ready is handled */
		server_of(core)->release_pending = true;
		return;
	}
	struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &zc->fifo) {
		struct zk_pending *p = KEEL_LIST_ITEM(it, struct zk_pending, fifo_link);
		if (p->kind == PK_SYNC || p->kind == PK_RECONFIG) {
			return;
		}
		if (!p->behind_sync) {
			continue;
		}
		p->behind_sync = false;
		struct keel_wbuf entry;
		keel_wbuf_init_fixed(&entry, p->frame, p->frame_size);
		entry.size = p->frame_size;
		uint8_t *frame = p->frame;
		p->frame = NULL;
		p->frame_size = 0;
		propose_or_hold(core, p, &entry);
		free(frame);
		if (zc->state != ZC_ACTIVE) {
			return;
		}
	}
}

/* Whether a sync (or reconfig) before `p` in the connection's order is not
 * served yet: the reads behind it are served once it is, from the state
 * then applied, which must not hold a write the client sent after them. */
static bool sync_before(const struct zk_conn *zc, const struct zk_pending *p)
{
	const struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &zc->fifo) {
		const struct zk_pending *q = KEEL_LIST_ITEM(it, struct zk_pending, fifo_link);
		if (q == p) {
			return false;
		}
		if (q->kind == PK_SYNC || q->kind == PK_RECONFIG || q->behind_sync) {
			return true;
		}
	}
	return false;
}

/* A reconfig may wait long for its membership steps (a new voter catching
 * up): pings behind it are answered at once (clients match a ping reply by
 * its xid -2, never by order), so the client keeps the connection. */
static bool ping_jumps_queue(const struct zk_conn *zc, const struct zk_request *req)
{
	const struct zk_pending *head = fifo_head(zc);
	return req->opcode == ZK_OP_PING && head != NULL && head->kind == PK_RECONFIG;
}

static void queue_read(struct node_core *core, struct zk_conn *zc, const struct zk_request *req,
		       const uint8_t *frame, size_t size, uint8_t kind)
{
	struct zk_server *zs = server_of(core);
	struct zk_pending *p = pending_new(zs, zc, kind, req->xid, req->opcode);
	if (p == NULL) {
		conn_close(zc, KEEL_NOMEM, false);
		return;
	}
	if ((kind == PK_READ || kind == PK_EXT_READ) &&
	    (keel_list_empty(&zc->fifo) || ping_jumps_queue(zc, req))) {
		/* Nothing before it: serve straight from the frame. */
		p->frame = (uint8_t *)frame;
		p->frame_size = size;
		serve_read(core, zc, p);
		p->frame = NULL;
		pending_free(zs, p);
		return;
	}
	p->frame = malloc(size);
	if (p->frame == NULL) {
		pending_free(zs, p);
		conn_close(zc, KEEL_NOMEM, false);
		return;
	}
	memcpy(p->frame, frame, size);
	p->frame_size = size;
	fifo_push(zc, p);
#ifdef KEEL_PLANT_BUG_SYNC_NO_BARRIER
	/* PLANTED BUG (tests only: cmake -DKEEL_PLANT_BUG=SYNC_NO_BARRIER; the
	 * fault suite must catch it, tests/faults/test_planted_bugs.py): sync
	 * answers as soon as its turn comes, without the ReadIndex barrier, so
	 * a follower that lags or is cut off serves sync + read stale. */
	if (kind == PK_SYNC) {
		p->barrier = BARRIER_CONFIRMED;
		p->read_index = 0;
		fifo_advance(core, zc);
		return;
	}
#endif
	if (kind == PK_SYNC) {
		if (pending_map_add(zs, p) != KEEL_OK) {
			conn_close(zc, KEEL_NOMEM, false);
			return;
		}
		start_barrier(core, p);
	}
}

/* addauth "keel": the session credential, made with the cluster secret for
 * this session and checked by the host (session_proof_ok). Without a
 * secret (--insecure-peers) there is nothing to prove and it is taken as
 * given. */
static int32_t cluster_auth(struct node_core *core, struct zk_conn *zc,
                            const struct zk_auth_request *auth)
{
	bool ok = server_of(core)->opts.insecure_peers ||
		  (zc->session_id != 0 &&
		   core->host.ops->session_proof_ok(core->host.ctx, (uint64_t)zc->session_id,
						    zc->connect_passwd, auth->auth.data,
						    zk_bytes_len(auth->auth)));
	if (!ok) {
		CORE_WARN(core, "client %s: the cluster credential (addauth %s) was refused",
			  zc->peer_addr, CORE_ZK_CLUSTER_SCHEME);
		return ZK_AUTH_FAILED;
	}
	return zk_auth_info_add(&zc->auth, zk_bytes_str(CORE_ZK_CLUSTER_SCHEME),
				zk_bytes_str("cluster")) == KEEL_OK
		       ? ZK_OK
		       : ZK_AUTH_FAILED;
}

/* SASL DIGEST-MD5 succeeded: the session gets the identity sasl:USER
 * (and super, for --sasl-super-user), as ZooKeeper's processSasl. */
static void sasl_authenticated(struct node_core *core, struct zk_conn *zc, const char *user,
			       size_t user_size)
{
	enum keel_err rc = zk_auth_info_add(&zc->auth, zk_bytes_str("sasl"),
					    zk_bytes_of(user, user_size));
	if (rc == KEEL_OK && server_of(core)->opts.sasl_super_user[0] != '\0' &&
	    strcmp(server_of(core)->opts.sasl_super_user, user) == 0) {
		rc = zk_auth_info_add(&zc->auth, zk_bytes_str("super"), zk_bytes_str(""));
	}
	CORE_INFO(core, "client %s: session 0x%llx authenticated as sasl:%s%s",
		  zc->peer_addr, (unsigned long long)zc->session_id,
		  user, rc == KEEL_OK ? "" : " (but the identity could not be added)");
}

/* sasl (opcode 102), as ZooKeeper answers it: with no mechanism configured,
 * OK and no token; otherwise one DIGEST-MD5 step (sasl/sasl_digest.h), and
 * a failed exchange answers AuthFailed and closes the connection. Returns
 * false when the connection is closing. */
static bool handle_sasl(struct node_core *core, struct zk_conn *zc, const struct zk_request *req)
{
	uint8_t token[4 + 512];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, token, sizeof(token));
	const struct sasl_users *users = server_of(core)->opts.sasl_users;
	if (users == NULL) {
		keel_wbuf_i32(&w, -1);
		send_reply(zc, req->xid, 0, ZK_OK, token, w.size);
		return true;
	}
	if (zc->sasl == NULL) {
		zc->sasl = malloc(sizeof(*zc->sasl));
		if (zc->sasl == NULL) {
			conn_close(zc, KEEL_NOMEM, false);
			return false;
		}
		struct sasl_digest_params params = {
			SASL_DIGEST_SERVER_NAME, SASL_DIGEST_SERVICE "/" SASL_DIGEST_SERVER_NAME};
		sasl_digest_server_init(zc->sasl, params);
	}
	uint8_t random[SASL_DIGEST_NONCE_BYTES];
	enum keel_err rc = core_random(core, random, sizeof(random));
	keel_wbuf_i32(&w, 0); /* the token's length, set below */
	if (rc == KEEL_OK) {
		rc = sasl_digest_step(zc->sasl, users, req->u.sasl.token.data,
				      zk_bytes_len(req->u.sasl.token), random, &w);
	}
	if (rc != KEEL_OK || !keel_wbuf_ok(&w)) {
		CORE_WARN(core, "client %s: SASL DIGEST-MD5 authentication failed: %s; closing",
			  zc->peer_addr,
			  zc->sasl->why != NULL ? zc->sasl->why : keel_strerror(rc));
		/* As ZooKeeper: AuthFailed with SetSASLResponse(null), then close. */
		keel_wbuf_init_fixed(&w, token, sizeof(token));
		zk_reply_header_encode(&w, req->xid, 0, ZK_AUTH_FAILED);
		keel_wbuf_i32(&w, -1);
		send_raw_payload(zc, token, w.size);
		conn_close(zc, KEEL_AUTH, true);
		return false;
	}
	keel_store_be32(token, (uint32_t)(w.size - 4));
	if (zc->sasl->state == SASL_DIGEST_DONE) {
		sasl_authenticated(core, zc, zc->sasl->user, zc->sasl->user_size);
	}
	send_reply(zc, req->xid, 0, ZK_OK, token, w.size);
	return true;
}

/* Whether the session may send the controller requests that only brokers
 * and operators send (node_ctl_opcode_needs_cluster): it proved the cluster
 * credential or authenticated as super, or the servers run without one. */
static bool cluster_member(const struct node_core *core, const struct zk_conn *zc)
{
	return server_of(core)->opts.insecure_peers ||
	       zk_ids_contains(&zc->auth.ids, zk_bytes_str(CORE_ZK_CLUSTER_SCHEME),
			       zk_bytes_str("cluster")) ||
	       zk_ids_is_super(&zc->auth.ids);
}

/* A keel extension request (core/controller.h). Reads take their turn in
 * the FIFO like ZooKeeper reads; controller requests complete through
 * zk_clients_ext_complete. */
static void handle_ext(struct node_core *core, struct zk_conn *zc, const struct zk_request *req,
		       const uint8_t *frame, size_t size)
{
	if (node_ctl_opcode_is_read(req->opcode)) {
		queue_read(core, zc, req, frame, size, PK_EXT_READ);
		return;
	}
	if (node_ctl_opcode_needs_cluster(req->opcode) && !cluster_member(core, zc)) {
		CORE_INFO(core, "client %s: %s refused: the session has not proved the cluster "
			  "credential",
			  zc->peer_addr,
			  node_ctl_opcode_name(req->opcode));
		send_reply(zc, req->xid, (int64_t)core->applied_index, ZK_NO_AUTH, NULL, 0);
		return;
	}
	struct zk_pending *p = pending_queue(server_of(core), zc, PK_EXT, req);
	if (p == NULL) {
		return;
	}
	/* May complete (and free) p before it returns. */
	node_ctl_submit(core, p->request_id, req->opcode, req->body, req->body_size);
}

void zk_clients_ext_complete(struct node_core *core, uint64_t request_id, int32_t err,
			     const uint8_t *body, size_t size)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	struct zk_pending *p = pending_lookup(zs, request_id);
	if (p == NULL || p->kind != PK_EXT) {
		return;
	}
	if (pending_decided(zs, p)) {
		complete(core, p, err, (int64_t)core->applied_index, body, size);
	}
}

void zk_clients_fire_system(struct node_core *core, const struct zk_result *res)
{
	struct zk_server *zs = server_of(core);
	if (zs != NULL) {
		zk_watches_fire(&zs->watches, fsm_zk(core->fsm), res);
		node_feed_on_applied(core, res);
	}
}

/* ---- reconfig (opcode 16) ----
 *
 * A ReconfigRequest becomes a plan of one-server-at-a-time membership steps
 * (zk_reconfig_plan), run one after the other through the admin module's
 * membership machinery (on the leader; forwarded from a follower). When
 * the last step has committed, a ReadIndex barrier makes sure this server
 * has applied it, and the reply is /zookeeper/config as a GetDataResponse
 * (data + Stat), as ZooKeeper answers. Refusals: NoAuth without super or
 * the cluster credential, ReconfigInProgress while another runs on this
 * server, BadVersion when curConfigId (not -1) is not the version of
 * /zookeeper/config, BadArguments for what does not parse or plan; a step
 * that fails ends the reconfig with its error (steps already committed
 * stay: membership changes one server at a time).
 */
struct zk_reconfig_run {
	struct zk_pending *p; /* in the request map until the last step ends */
	struct zk_reconfig_step steps[ZK_RECONFIG_MAX_SERVERS + RAFT_MAX_MEMBERS];
	size_t count;
	size_t next;
};

static const char config_path[] = "/zookeeper/config";

static int32_t reconfig_error(enum keel_err err)
{
	switch (err) {
	case KEEL_OK:
		return ZK_OK;
	case KEEL_INVAL:
	case KEEL_EXIST:
	case KEEL_NOENT:
	case KEEL_LIMIT:
		return ZK_BAD_ARGUMENTS;
	case KEEL_AUTH:
		return ZK_NO_AUTH;
	default:
		return ZK_NEW_CONFIG_NO_QUORUM; /* no leader, leader changed, timed out */
	}
}

/* The version of the configuration in force: the zxid that wrote
 * /zookeeper/config (its text ends with the same number). */
static int64_t config_version(struct node_core *core)
{
	const struct zk_state *st = fsm_zk(core->fsm);
	uint32_t id = zk_state_lookup(st, zk_bytes_of(config_path, sizeof(config_path) - 1));
	struct zk_stat stat;
	memset(&stat, 0, sizeof(stat));
	if (id != ZK_NODE_NONE) {
		zk_state_stat(st, id, &stat);
	}
	return stat.mzxid;
}

/* The reply: getData("/zookeeper/config") with the caller's identities. */
static void serve_config(struct node_core *core, struct zk_conn *zc, struct zk_pending *p)
{
	uint8_t frame[64];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, frame, sizeof(frame));
	keel_wbuf_i32(&w, p->xid);
	keel_wbuf_i32(&w, ZK_OP_GET_DATA);
	zk_write_str(&w, config_path);
	keel_wbuf_bool(&w, false);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	uint8_t *saved = p->frame;
	size_t saved_size = p->frame_size;
	p->frame = frame;
	p->frame_size = w.size;
	p->kind = PK_READ;
	serve_read(core, zc, p);
	p->kind = PK_RECONFIG;
	p->frame = saved;
	p->frame_size = saved_size;
}

static void reconfig_end(struct node_core *core, struct zk_reconfig_run *run, enum keel_err err,
			 const char *msg)
{
	struct zk_server *zs = server_of(core);
	struct zk_pending *p = run->p;
	const struct zk_reconfig_step *last = run->next > 0 ? &run->steps[run->next - 1] : NULL;
	uint64_t undo = err != KEEL_OK && last != NULL && last->kind == ZK_STEP_ADD_PARTICIPANT
				? last->server.id
				: 0;
	zs->reconfig = NULL;
	free(run);
	if (undo != 0) {
		/* A voter that never caught up stays out: take back its learner
		 * (no one waits for that; KEEL_NOENT if it was never added). */
		admin_member_change_for_zk(core, 0, ADMIN_MEMBER_REMOVE, undo, "", "");
	}
	if (err == KEEL_OK && p->zc != NULL) {
		/* Served once this server has applied what the leader committed. */
		start_barrier(core, p);
		return;
	}
	if (!pending_decided(zs, p)) {
		return;
	}
	CORE_INFO(core, "client %s: reconfig failed: %s",
		  p->zc->peer_addr, msg);
	complete(core, p, reconfig_error(err), (int64_t)core->applied_index, NULL, 0);
}

static void reconfig_next(struct node_core *core, struct zk_reconfig_run *run)
{
	if (run->next == run->count) {
		reconfig_end(core, run, KEEL_OK, "");
		return;
	}
	const struct zk_reconfig_step *st = &run->steps[run->next++];
	uint8_t change = st->kind == ZK_STEP_ADD_OBSERVER      ? ADMIN_MEMBER_ADD_LEARNER
			 : st->kind == ZK_STEP_ADD_PARTICIPANT ? ADMIN_MEMBER_ADD
			 : st->kind == ZK_STEP_PROMOTE         ? ADMIN_MEMBER_PROMOTE
							       : ADMIN_MEMBER_REMOVE;
	/* May end the step (and call back) before it returns. */
	admin_member_change_for_zk(core, run->p->request_id, change, st->server.id,
	                           st->server.peer_addr, st->server.tail);
}

void zk_clients_reconfig_step_done(struct node_core *core, uint64_t request_id, enum keel_err err,
				   const char *msg)
{
	struct zk_server *zs = server_of(core);
	struct zk_reconfig_run *run = zs != NULL ? zs->reconfig : NULL;
	if (run == NULL || run->p->request_id != request_id) {
		return;
	}
	if (err != KEEL_OK) {
		reconfig_end(core, run, err, msg);
	} else {
		reconfig_next(core, run);
	}
}

/* The plan for `req` against the members in force; ZooKeeper's error. */
static int32_t reconfig_plan(struct node_core *core, const struct zk_reconfig_request *req,
			     struct zk_reconfig_run *run)
{
	if (req->cur_config_id != -1 && req->cur_config_id != config_version(core)) {
		return ZK_BAD_VERSION;
	}
	const struct raft_config *config = raft_config(core->raft);
	struct zk_member_role members[RAFT_MAX_MEMBERS];
	for (uint32_t i = 0; i < config->count; i++) {
		members[i].id = config->members[i].id;
		members[i].role = config->members[i].role == RAFT_LEARNER ? ZK_ROLE_OBSERVER
									   : ZK_ROLE_PARTICIPANT;
	}
	enum keel_err rc = zk_reconfig_plan(members, config->count, req->joining_servers,
					    req->leaving_servers, req->new_members, run->steps,
					    KEEL_ARRAY_SIZE(run->steps), &run->count);
	return rc == KEEL_OK ? ZK_OK : ZK_BAD_ARGUMENTS;
}

static void handle_reconfig(struct node_core *core, struct zk_conn *zc,
                            const struct zk_request *req)
{
	struct zk_server *zs = server_of(core);
	int32_t err = ZK_OK;
	struct zk_reconfig_run *run = NULL;
	if (!cluster_member(core, zc)) {
		CORE_INFO(core,
		          "client %s: reconfig refused: neither super nor the cluster credential",
		          zc->peer_addr);
		err = ZK_NO_AUTH;
	} else if (zs->reconfig != NULL) {
		err = ZK_RECONFIG_IN_PROGRESS;
	} else if ((run = calloc(1, sizeof(*run))) == NULL) {
		conn_close(zc, KEEL_NOMEM, false);
		return;
	} else {
		err = reconfig_plan(core, &req->u.reconfig, run);
	}
	struct zk_pending *p = pending_new(zs, zc, PK_RECONFIG, req->xid, req->opcode);
	if (p == NULL || (err == ZK_OK && pending_map_add(zs, p) != KEEL_OK)) {
		free(run);
		if (p != NULL) {
			pending_free(zs, p);
		}
		conn_close(zc, KEEL_NOMEM, false);
		return;
	}
	fifo_push(zc, p);
	if (err != ZK_OK) {
		free(run);
		complete(core, p, err, (int64_t)core->applied_index, NULL, 0);
		return;
	}
	CORE_INFO(core, "client %s: reconfig of %zu membership steps",
		  zc->peer_addr, run->count);
	run->p = p;
	zs->reconfig = run;
	reconfig_next(core, run);
}

bool zk_conn_on_frame(struct node_core *core, uint64_t conn, const uint8_t *payload, size_t size)
{
	struct zk_conn *zc = zc_of(core, conn);
	if (zc != NULL && zc->state == ZC_HANDSHAKE && !zc->connect_seen) {
		return on_connect_frame(core, zc, payload, size);
	}
	if (zc == NULL || zc->state != ZC_ACTIVE) {
		return false;
	}
	core->stats.requests++;
	struct zk_request req;
	enum keel_err rc = zk_request_decode(&req, payload, size);
	if (rc == KEEL_SHORT) {
		conn_close(zc, KEEL_PROTO, false);
		return false;
	}
	zc->last_cxid = req.xid;
	zc->last_op = req.opcode;
	if (zc->moved) {
		refuse_moved(core, zc, req.xid);
		return false;
	}
	touch(core, zc);
	if (zc->read_only && refuse_read_only(core, zc, &req, rc)) {
		return zc->state == ZC_ACTIVE && !core_client_paused(core, conn);
	}
	if (rc == KEEL_OK && req.opcode == ZK_OP_RECONFIG) {
		handle_reconfig(core, zc, &req);
		return zc->state == ZC_ACTIVE && !core_client_paused(core, conn);
	}
	if (rc == KEEL_UNSUPPORTED && req.opcode == ZK_OP_KEEL_FEED) {
		queue_read(core, zc, &req, payload, size, PK_EXT_READ);
		return zc->state == ZC_ACTIVE && !core_client_paused(core, conn);
	}
	if (rc == KEEL_UNSUPPORTED && node_ctl_opcode_known(req.opcode)) {
		handle_ext(core, zc, &req, payload, size);
		return zc->state == ZC_ACTIVE && !core_client_paused(core, conn);
	}
	if (rc == KEEL_UNSUPPORTED) {
		CORE_DEBUG(core, "client %s: unknown opcode %d", zc->peer_addr, req.opcode);
		send_reply(zc, req.xid, -1, ZK_UNIMPLEMENTED, NULL, 0);
		conn_close(zc, KEEL_PROTO, true);
		return false;
	}
	if (rc != KEEL_OK) {
		send_reply(zc, req.xid, (int64_t)core->applied_index, ZK_MARSHALLING_ERROR, NULL,
		           0);
		return true;
	}
	if (req.opcode == ZK_OP_SASL) {
		return handle_sasl(core, zc, &req) && !core_client_paused(core, conn);
	}
	switch (zk_op_classify(req.opcode)) {
	case ZK_CLASS_READ:
	case ZK_CLASS_PING:
		queue_read(core, zc, &req, payload, size, PK_READ);
		break;
	case ZK_CLASS_SYNC:
		queue_read(core, zc, &req, payload, size, PK_SYNC);
		break;
	case ZK_CLASS_WRITE:
	case ZK_CLASS_CLOSE:
		handle_write(core, zc, &req);
		break;
	case ZK_CLASS_AUTH: {
		int32_t err = zk_bytes_eq_str(req.u.auth.scheme, CORE_ZK_CLUSTER_SCHEME)
				      ? cluster_auth(core, zc, &req.u.auth)
				      : zk_auth_handle(&zc->auth, &req.u.auth,
						       server_of(core)->opts.super_digest[0] != '\0'
							       ? server_of(core)->opts.super_digest
							       : NULL);
		send_reply(zc, -4, 0, err, NULL, 0);
		if (err != 0) {
			conn_close(zc, KEEL_PROTO, true);
			return false;
		}
		break;
	}
	case ZK_CLASS_REFUSE:
		send_reply(zc, req.xid, (int64_t)core->applied_index, zk_op_refusal(req.opcode),
		           NULL, 0);
		break;
	case ZK_CLASS_UNKNOWN:
	default:
		send_reply(zc, req.xid, -1, ZK_UNIMPLEMENTED, NULL, 0);
		conn_close(zc, KEEL_PROTO, true);
		return false;
	}
	return zc->state == ZC_ACTIVE && !core_client_paused(core, conn);
}

void zk_conn_on_close(struct node_core *core, uint64_t conn)
{
	struct zk_server *zs = server_of(core);
	struct zk_conn *zc = zc_of(core, conn);
	if (zc == NULL) {
		return;
	}
	while (!keel_list_empty(&zc->fifo)) {
		struct zk_pending *p = fifo_pop(zc);
		p->zc = NULL;
		if (p->behind_sync) {
			pending_map_remove(zs, p); /* never sent: nothing to resolve */
		}
		if (!p->in_map) {
			pending_free(zs, p);
		}
	}
	/* Pendings still in the map (writes in flight, the handshake's) resolve
	 * on their own, answering no one. */
	if (zc->connect_pending != NULL) {
		zc->connect_pending->zc = NULL;
		zc->connect_pending = NULL;
	}
	if (zc->attached) {
		zk_watches_detach(&zs->watches, &zc->wconn);
	}
	node_feed_on_close(core, conn); /* it holds the session's identities */
	session_map_remove(zs, zc);
	zk_auth_info_close(&zc->auth);
	free(zc->sasl);
	keel_list_remove(&zc->link);
	keel_hmap_remove_item(&zs->by_conn, keel_hash_u64(zc->conn_id), zc);
	free(zc);
}

/* ---- apply ---- */

#ifdef KEEL_PLANT_BUG_REPLY_BEFORE_APPLY
/* PLANTED BUG (simulator only: build/keel-sim-bug-reply-before-apply;
 * tests/sim catches it): the leader sends the result of a forwarded write
 * to its origin as soon as it applies it, and the origin answers its
 * client from that, before applying the entry itself: a read the client
 * sends next may be served from a state without its write. */
static void tell_origin(struct node_core *core, const struct node_entry *ne,
			const struct zk_result *res)
{
	if (core->role != RAFT_LEADER || ne->origin == core->id || ne->request_id == 0 ||
	    res->kind != ZK_TXN_REQUEST || res->opcode == ZK_OP_CLOSE_SESSION) {
		return;
	}
	struct tracker_reply hdr = {TRACK_ZK_WRITE, ne->origin, ne->request_id, KEEL_OK,
				    (uint64_t)res->zxid};
	size_t mark;
	struct keel_wbuf *w = core_reply_begin(core, &hdr, &mark);
	if (w != NULL) {
		keel_wbuf_i32(w, res->err);
		keel_wbuf_bytes(w, res->body.data, res->body.size);
		core_peer_end(core, ne->origin, mark);
	}
}

bool zk_clients_on_leader_result(struct node_core *core, const struct tracker_reply *hdr,
				 const uint8_t *body, size_t size)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL || hdr->kind != TRACK_ZK_WRITE || hdr->err != KEEL_OK ||
	    hdr->origin != core->id || size < 4) {
		return false;
	}
	struct zk_pending *p = pending_lookup(zs, hdr->request_id);
	if (p == NULL || p->kind != PK_WRITE) {
		return false;
	}
	if (!pending_decided(zs, p)) {
		return true;
	}
	int32_t err = (int32_t)keel_load_be32(body);
	complete(core, p, err, (int64_t)hdr->wait_index, body + 4, size - 4);
	return true;
}
#endif

void zk_clients_on_applied(struct node_core *core, const struct node_entry *ne,
			   const struct zk_result *res)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	struct zk_state *st = fsm_zk(core->fsm);
	/* Events first: they precede any reply made after this entry. */
	zk_watches_fire(&zs->watches, st, res);
	node_feed_on_applied(core, res);
	if (res->kind == ZK_TXN_CREATE_SESSION && res->err == 0 && zs->expiry_active) {
		zk_expiry_add(&zs->expiry, res->new_session_id, res->new_session_timeout_ms,
			      (int64_t)core_now_ms(core));
	}
	if (res->closed_session_id != 0) {
		if (zs->expiry_active) {
			zk_expiry_remove(&zs->expiry, res->closed_session_id);
		}
		int64_t sid = res->closed_session_id;
		struct zk_conn *owner = keel_hmap_find(
		        &zs->by_session, keel_hash_u64((uint64_t)sid), conn_session_eq, &sid);
		bool own_close = ne->origin == core->id && res->kind == ZK_TXN_REQUEST;
		if (owner != NULL && !own_close) {
			/* Expired (or closed through another server): the client
			 * learns it when it reconnects. */
			session_map_remove(zs, owner);
			owner->session_id = 0;
			conn_close(owner, KEEL_OK, true);
		}
	}
#ifdef KEEL_PLANT_BUG_REPLY_BEFORE_APPLY
	tell_origin(core, ne, res);
#endif
	if (ne->origin != core->id || ne->request_id == 0) {
		return;
	}
	struct zk_pending *p = pending_lookup(zs, ne->request_id);
	if (p == NULL) {
		return; /* its connection was closed, e.g. on a leader change */
	}
	pending_map_remove(zs, p);
	struct zk_conn *zc = p->zc;
	if (p->kind == PK_CONNECT) {
		if (zc != NULL && zc->state == ZC_HANDSHAKE) {
			struct zk_connect_response rsp;
			zk_session_created(res, zc->has_read_only, &rsp);
			send_connect_response(zc, &rsp);
			if (rsp.timeout_ms <= 0) {
				conn_close(zc, KEEL_LIMIT, true);
			} else {
				activate(core, zc, res->new_session_id,
				         res->new_session_timeout_ms);
			}
		}
		pending_free(zs, p);
		return;
	}
	if (zc == NULL) {
		if (!in_fifo(p)) {
			pending_free(zs, p);
		}
		return;
	}
	bool closing = p->opcode == ZK_OP_CLOSE_SESSION;
	if (closing) {
		session_map_remove(zs, zc);
	}
	complete(core, p, res->err, (int64_t)res->zxid, res->body.data, res->body.size);
	if (closing) {
		zc->session_id = 0;
		conn_close(zc, KEEL_OK, true);
	}
}

void zk_clients_on_apply_failed(struct node_core *core, const struct node_entry *ne)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	if (ne->origin != core->id) {
		return;
	}
	struct zk_pending *p = pending_lookup(zs, ne->request_id);
	if (p == NULL) {
		return;
	}
	pending_map_remove(zs, p);
	if (p->zc != NULL) {
		conn_close(p->zc, KEEL_CORRUPT, false);
	}
	if (!in_fifo(p)) {
		pending_free(zs, p);
	}
}

/* Serves syncs and handshake barriers whose index is now applied, and
 * advances FIFOs. Runs after every applied batch. */
void zk_clients_after_apply(struct node_core *core)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	if (zs->release_pending) {
		zs->release_pending = false;
		struct keel_list *c;
		KEEL_LIST_FOR_EACH (c, &zs->conns) {
			struct zk_conn *zc = KEEL_LIST_ITEM(c, struct zk_conn, link);
			if (zc->state == ZC_ACTIVE) {
				release_behind_sync(core, zc);
			}
		}
	}
	struct keel_list *it = keel_list_first(&zs->barriers);
	while (it != NULL) {
		struct zk_pending *p = KEEL_LIST_ITEM(it, struct zk_pending, barrier_link);
		if (p->barrier != BARRIER_CONFIRMED || core->applied_index < p->read_index) {
			it = it->next != &zs->barriers ? it->next : NULL;
			continue;
		}
		pending_map_remove(zs, p);
		struct zk_conn *zc = p->zc;
		if (p->kind == PK_CONNECT) {
			if (zc != NULL && zc->state == ZC_HANDSHAKE) {
				decide_connect(core, zc, p, true);
			} else {
				pending_free(zs, p);
			}
		} else if (zc == NULL) {
			if (!in_fifo(p)) {
				pending_free(zs, p);
			}
		} else {
			fifo_advance(core, zc);
		}
		/* The list may have changed under us (decide_connect): restart. */
		it = keel_list_first(&zs->barriers);
	}
}

void zk_clients_on_reads(struct node_core *core, const struct raft_read_result *reads, size_t count)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	for (size_t i = 0; i < count; i++) {
		struct zk_pending *p = pending_lookup(zs, reads[i].ctx);
		if (p == NULL ||
		    (p->kind != PK_SYNC && p->kind != PK_CONNECT && p->kind != PK_RECONFIG)) {
			continue;
		}
		if (reads[i].err == KEEL_OK) {
			p->barrier = BARRIER_CONFIRMED;
			p->read_index = reads[i].index;
			p->barrier_deadline_ms = 0;
		} else if (p->barrier != BARRIER_RETRY) {
			/* Not confirmed (leadership moved, lost messages): ask again
			 * on the next tick, within the deadline. */
			p->barrier = BARRIER_RETRY;
			p->barrier_deadline_ms =
			        core_now_ms(core) + zs->tracker->policy.leader_wait_ms;
		}
	}
	/* Served after the ready (they may already be applied). */
}

/* ---- leader changes, peers, ticks ---- */

static void reap_emit(void *ctx, enum zk_txn_kind kind, struct zk_bytes path)
{
	struct node_core *core = ctx;
	struct zk_server *zs = server_of(core);
	struct keel_wbuf *w = &zs->scratch;
	keel_wbuf_reset(w);
	int64_t now = core_wall_ms(core);
	node_entry_encode_header(w, NODE_ENTRY_ZK, 0, 0, now);
	zk_txn_encode_delete(w, kind, now, (const char *)path.data, (size_t)path.size);
	uint64_t index, term;
	if (keel_wbuf_ok(w)) {
		(void)core_propose(core, w->data, (uint32_t)w->size, &index, &term);
	}
}

static void propose_session_close(struct node_core *core, int64_t session_id)
{
	struct zk_server *zs = server_of(core);
	struct keel_wbuf *w = &zs->scratch;
	keel_wbuf_reset(w);
	int64_t now = core_wall_ms(core);
	node_entry_encode_header(w, NODE_ENTRY_ZK, 0, 0, now);
	struct zk_txn_meta meta = {now, 0, 0, session_id};
	zk_txn_encode_close_session(w, &meta, ZK_CLOSE_EXPIRED);
	uint64_t index, term;
	(void)core_propose(core, w->data, (uint32_t)w->size, &index, &term);
}

void zk_clients_on_leader_change(struct node_core *core, uint64_t old_leader, uint64_t new_leader)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	(void)old_leader;
	if (new_leader == 0 && zs->leaderless_since_ms == 0) {
		zs->leaderless_since_ms = core_now_ms(core);
	} else if (new_leader != 0) {
		zs->leaderless_since_ms = 0;
		zs->leaderless_closed = false;
		close_read_only_clients(core);
	}
	if (new_leader == core->id && core->role == RAFT_LEADER) {
		zk_expiry_rebuild(&zs->expiry, fsm_zk(core->fsm), (int64_t)core_now_ms(core));
		zs->expiry_active = true;
		zs->last_housekeeping_ms = core_now_ms(core);
	} else if (zs->expiry_active) {
		zs->expiry_active = false;
		zk_expiry_close(&zs->expiry);
		zk_expiry_init(&zs->expiry, 0);
	}
	/* Writes already handed to a leader may still commit (the new leader
	 * may hold them) or be lost: the tracker gives them until its deadline
	 * (node.c tells it of the change). */
}

/* A follower's client write, forwarded to us as the leader: stamp our
 * time, propose; refuse it in a reply when we cannot. */
void zk_clients_on_forward(struct node_core *core, uint64_t from, uint64_t request_id,
			   const uint8_t *body, size_t size)
{
	if (server_of(core) == NULL) {
		return; /* the origin's deadline answers */
	}
	struct node_entry ne;
	if (node_entry_decode(body, size, &ne) != KEEL_OK || ne.kind != NODE_ENTRY_ZK ||
	    ne.origin != from || ne.request_id != request_id) {
		CORE_WARN(core, "peer %llu: forwarded write does not match its frame, ignored",
			  (unsigned long long)from);
		return;
	}
	enum keel_err rc = KEEL_NOTLEADER;
	if (core->role == RAFT_LEADER) {
		uint8_t *copy = malloc(size);
		if (copy == NULL) {
			rc = KEEL_NOMEM;
		} else {
			memcpy(copy, body, size);
			int64_t now = core_wall_ms(core);
			keel_store_be64(copy + NODE_ENTRY_TIME_OFFSET, (uint64_t)now);
			size_t off = NODE_ENTRY_HEADER_SIZE;
			rc = zk_txn_set_time(copy + off, size - off, now);
			if (rc == KEEL_OK) {
				uint64_t index, term;
				rc = core_propose(core, copy, (uint32_t)size, &index, &term);
			}
			free(copy);
		}
	}
	if (rc != KEEL_OK) {
		struct tracker_reply hdr = {TRACK_ZK_WRITE, from, request_id, rc, 0};
		size_t mark;
		if (core_reply_begin(core, &hdr, &mark) != NULL) {
			core_peer_end(core, from, mark);
		}
	}
	core_schedule_drive(core);
}

void zk_clients_on_peer_frame(struct node_core *core, uint64_t from, uint8_t type,
                              const uint8_t *body, size_t size)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	if (type == PEER_FRAME_SESSION_MOVED) {
		on_session_moved_frame(core, from, body, size);
		return;
	}
	if (type == PEER_FRAME_SESSION_TOUCH && zs->expiry_active) {
		struct keel_rbuf r;
		keel_rbuf_init(&r, body, size);
		uint32_t count = keel_rbuf_u32(&r);
		int64_t now = (int64_t)core_now_ms(core);
		for (uint32_t i = 0; i < count && keel_rbuf_ok(&r); i++) {
			int64_t sid = keel_rbuf_i64(&r);
			if (keel_rbuf_ok(&r)) {
				zk_expiry_touch(&zs->expiry, sid, now);
			}
		}
	}
}

static void report_sessions(struct node_core *core, uint64_t now)
{
	struct zk_server *zs = server_of(core);
	if (now < zs->last_report_ms + SESSION_REPORT_MS) {
		return;
	}
	zs->last_report_ms = now;
	if (core->role == RAFT_LEADER || core->leader == 0) {
		return;
	}
	size_t mark;
	struct keel_wbuf *w = NULL;
	size_t count_pos = 0;
	uint32_t count = 0;
	struct keel_list *it;
	KEEL_LIST_FOR_EACH (it, &zs->conns) {
		struct zk_conn *zc = KEEL_LIST_ITEM(it, struct zk_conn, link);
		if (!zc->touched || zc->session_id == 0) {
			continue;
		}
		if (w == NULL) {
			w = core_peer_begin(core, core->leader, PEER_FRAME_SESSION_TOUCH, &mark);
			if (w == NULL) {
				return; /* retried next time; flags stay set */
			}
			count_pos = w->size;
			keel_wbuf_u32(w, 0);
		}
		keel_wbuf_i64(w, zc->session_id);
		zc->touched = false;
		if (++count == MAX_TOUCH_REPORT) {
			break;
		}
	}
	if (w != NULL) {
		keel_wbuf_patch_u32(w, count_pos, count);
		core_peer_end(core, core->leader, mark);
	}
}

/* Asks again for barriers that were refused, and gives up on those past
 * their deadline. (Held writes are the tracker's: node.c ticks it.) */
static void retry_barriers(struct node_core *core, uint64_t now)
{
	struct zk_server *zs = server_of(core);
	struct keel_list *it, *next;
	KEEL_LIST_FOR_EACH_SAFE (it, next, &zs->barriers) {
		struct zk_pending *p = KEEL_LIST_ITEM(it, struct zk_pending, barrier_link);
		if (p->barrier != BARRIER_RETRY) {
			continue;
		}
		ask_barrier(core, p);
		if (p->barrier != BARRIER_RETRY || now < p->barrier_deadline_ms) {
			continue;
		}
		pending_map_remove(zs, p);
		if (p->zc != NULL) {
			CORE_DEBUG(core,
			           "client %s: request not served in time after a leader change",
			           p->zc->peer_addr);
			conn_close(p->zc, KEEL_NOLEADER, true);
		}
		if (!in_fifo(p)) {
			pending_free(zs, p);
		}
	}
}

void zk_clients_tick(struct node_core *core, uint64_t now_ms)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	if (leaderless_too_long(core, zs, now_ms) && !zs->leaderless_closed) {
		zs->leaderless_closed = true;
		size_t count = keel_hmap_count(&zs->by_conn);
		CORE_WARN(core,
		          "no leader for %llu ms: closing %zu client connections so that they move "
		          "to a server in the quorum (their sessions live on there)",
		          (unsigned long long)(now_ms - zs->leaderless_since_ms), count);
		close_zk_clients(core, KEEL_NOTLEADER);
	}
	retry_barriers(core, now_ms);
	report_sessions(core, now_ms);
	if (zs->expiry_active && core->role == RAFT_LEADER) {
		int64_t ids[MAX_EXPIRE_PER_TICK];
		size_t count = zk_expiry_expired(&zs->expiry, (int64_t)now_ms, ids,
						 KEEL_ARRAY_SIZE(ids));
		for (size_t i = 0; i < count; i++) {
			CORE_INFO(core, "session 0x%llx expired", (unsigned long long)ids[i]);
			propose_session_close(core, ids[i]);
		}
		if (now_ms >= zs->last_housekeeping_ms + server_of(core)->opts.housekeeping_ms) {
			zs->last_housekeeping_ms = now_ms;
			zk_housekeeping_scan(fsm_zk(core->fsm), core_wall_ms(core),
			                     MAX_REAP_PER_SCAN, reap_emit, core);
		}
	}
}

void zk_clients_on_snapshot_installed(struct node_core *core)
{
	if (server_of(core) == NULL) {
		return;
	}
	/* Watches cannot see what a snapshot changed: drop every ZooKeeper
	 * connection; clients reconnect and setWatches reports the changes. */
	node_feed_on_snapshot_installed(core, core->applied_index);
	close_zk_clients(core, KEEL_CANCELED);
}

/* ---- set-up, stats ---- */

enum keel_err zk_clients_open(struct node_core *core, const struct zk_clients_options *o, char *err,
			      size_t err_size)
{
	struct zk_server *zs = calloc(1, sizeof(*zs));
	if (zs == NULL) {
		keel_fmt(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	core->zk_server = zs;
	zs->opts = *o;
	keel_list_init(&zs->conns);
	keel_list_init(&zs->barriers);
	zs->tracker = &core->tracker;
	struct tracker_kind_ops track_ops = zk_write_track_ops;
	track_ops.ctx = core;
	tracker_set_kind(zs->tracker, TRACK_ZK_WRITE, &track_ops);
	zs->leaderless_since_ms = KEEL_MAX(core_now_ms(core), 1); /* none known at start */
	uint64_t seed = core_seed_next(core);
	if (zk_watches_init(&zs->watches, o->max_watches_per_connection, seed, on_watch_fire,
			    core) != KEEL_OK ||
	    zk_expiry_init(&zs->expiry, 0) != KEEL_OK ||
	    keel_hmap_init(&zs->by_request, 1024) != KEEL_OK ||
	    keel_hmap_init(&zs->by_session, 1024) != KEEL_OK ||
	    keel_hmap_init(&zs->by_conn, 64) != KEEL_OK) {
		keel_fmt(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	zk_watches_set_max_bytes(&zs->watches, o->max_watch_bytes_per_connection);
	keel_wbuf_init_dynamic(&zs->scratch, 4096, 2u * o->max_packet_bytes + 65536u);
	if (node_feeds_init(core, o->feed_retain_bytes, o->feed_high_water_bytes,
	                    o->max_packet_bytes) != KEEL_OK) {
		keel_fmt(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	return KEEL_OK;
}

void zk_clients_close(struct node_core *core)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	/* Every connection is closed: what is left is only in the map. */
	KEEL_ASSERT(keel_list_empty(&zs->conns));
	size_t cursor = 0;
	struct zk_pending *p;
	while ((p = keel_hmap_next(&zs->by_request, &cursor)) != NULL) {
		KEEL_ASSERT(!in_fifo(p));
		tracker_finish(zs->tracker, &p->track);
		free(p->frame);
		free(p->reply);
		free(p);
	}
	free(zs->reconfig);
	keel_hmap_close(&zs->by_request);
	keel_hmap_close(&zs->by_session);
	keel_hmap_close(&zs->by_conn);
	zk_watches_close(&zs->watches);
	zk_expiry_close(&zs->expiry);
	keel_wbuf_free(&zs->scratch);
	free(zs);
	core->zk_server = NULL;
	node_feeds_close(core);
}

void zk_conn_describe(struct node_core *core, uint64_t conn, struct keel_wbuf *out, bool detailed,
		      uint64_t packets_received, uint64_t packets_sent, uint64_t connected_ms)
{
	struct zk_conn *zc = zc_of(core, conn);
	char line[512];
	size_t len;
	if (zc == NULL) {
		return;
	}
	if (!detailed) {
		len = keel_fmt(line, sizeof(line), " /%s[1](queued=%u,recved=%llu,sent=%llu)\n",
			       zc->peer_addr, zc->pending_count,
			       (unsigned long long)packets_received,
			       (unsigned long long)packets_sent);
	} else {
		uint64_t avg = zc->replies > 0 ? zc->total_latency_ms / zc->replies : 0;
		len = keel_fmt(line, sizeof(line),
			       " /%s[1](queued=%u,recved=%llu,sent=%llu,sid=0x%llx,lop=%s,est=%llu,"
			       "to=%d,lcxid=0x%x,lzxid=0x%llx,lresp=%llu,llat=%llu,minlat=%llu,"
			       "avglat=%llu,maxlat=%llu)\n",
			       zc->peer_addr, zc->pending_count,
			       (unsigned long long)packets_received,
			       (unsigned long long)packets_sent,
			       (unsigned long long)zc->session_id, zk_op_name(zc->last_op),
			       (unsigned long long)connected_ms, zc->timeout_ms,
			       (unsigned)zc->last_cxid, (unsigned long long)zc->last_zxid,
			       (unsigned long long)zc->last_heard_ms,
			       (unsigned long long)zc->last_latency_ms,
			       (unsigned long long)zc->min_latency_ms, (unsigned long long)avg,
			       (unsigned long long)zc->max_latency_ms);
	}
	keel_wbuf_bytes(out, line, KEEL_MIN(len, sizeof(line) - 1));
}

void zk_clients_stats(const struct node_core *core, struct node_client_stats *out)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	out->outstanding = zs->outstanding;
	out->latency_min_ms = zs->latency_min_ms;
	out->latency_max_ms = zs->latency_max_ms;
	out->latency_avg_ms = zs->latency_count > 0
	                              ? (double)zs->latency_total_ms / (double)zs->latency_count
	                              : 0;
	out->watches = zk_watches_count(&zs->watches);
	out->watched_paths = zs->watches.path_count;
}

void zk_clients_reset_stats(struct node_core *core)
{
	struct zk_server *zs = server_of(core);
	if (zs == NULL) {
		return;
	}
	zs->latency_min_ms = zs->latency_max_ms = zs->latency_total_ms = zs->latency_count = 0;
}
