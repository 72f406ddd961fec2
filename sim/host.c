/*
 * host.c — the simulator's host of the real server core (src/core/core.h).
 *
 * A simulated server runs `struct node_core` — the Raft core, the ready
 * loop (core/drive.c) and the replicated state machine (core/fsm.c: the
 * ZooKeeper tree) — linked from the same library as `keel server`. This
 * file implements the core's effects over the simulated world:
 *
 *   persist        a writer batch of the real WAL writer (wal/writer.h, in
 *                  manual mode) over the server's fault vfs (waldisk.c):
 *                  hard state, received snapshot chunks and install in the
 *                  prelude (wal/install.h, the server's code), truncation,
 *                  entries. A disk event later runs the group; each
 *                  completion goes to core_on_durable in persist order;
 *   peer frames    packets on the simulated network (net.c): the core's
 *                  frame body with its type, delayed, dropped, duplicated,
 *                  cut by partitions, delivered to core_on_peer_frame;
 *   time           the server's drifting clock (sim_local_time);
 *   randomness     the run's seeded generator;
 *   snapshots      snapshot_read / snapshot_load over the WAL's snapshot
 *                  files; the server's own snapshots are the fsm's stream
 *                  (fsm_snapshot_write) saved like the snapshotter does,
 *                  then raft_snapshot_taken and a compaction batch;
 *   after apply    maybe_snapshot: reads whose index is applied are
 *                  served, and the server may take its snapshot;
 *   book, addrs    book_changed does nothing and addr_ok says yes: the
 *                  simulated network reaches servers by id;
 *   client_*       controller mode: the brokers' connection to the core's
 *                  ZooKeeper clients (core/client_zk.c). Opened at the first
 *                  request with a ConnectRequest (a real session through
 *                  Raft); each request is a keel extension frame (request
 *                  header + the meta/proto.h body) read by the real decoder
 *                  and handed to the controller glue; the ConnectResponse
 *                  and the answers come back through client_end/client_send
 *                  and are matched by xid. Frames wait while the core
 *                  pauses the connection; when it closes it, its requests
 *                  are lost and their brokers try another server at once.
 *                  session_proof_ok is not used (no cluster credential
 *                  asked): it fails the run loudly. The ZooKeeper
 *                  workload's connections go to zkworld.c, the change-feed
 *                  consumers' (and feed_wait) to zkfeedworld.c.
 *
 * The checkers see what the core hands its own parts through its observer
 * (core.h, struct core_observer): each applied entry with what it produced
 * (apply order, the committed-log checks, the register writes' outcomes)
 * and the ReadIndex results.
 *
 * The register workload of client.c runs as ZooKeeper transactions: key K
 * is the znode /kK holding its value as 8 big-endian bytes (a missing
 * node reads 0). A write is a setData (or a create while the node is
 * missing on the proposing server), proposed on the leader through
 * core_propose in the server's entry envelope, under one session the
 * workload opens (createSession with a fixed id) before its first write;
 * its outcome is apply's: OK when the txn succeeded, FAILED when apply
 * refused it (no effect) or its log slot went to another entry. A read is
 * a ReadIndex through the core, served from the local tree once applied.
 *
 * KEEL_PLANT_BUG_ACK_BEFORE_PERSIST: batches are reported durable right
 * after the ready that submitted them, before the disk has them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "core/client_zk.h"
#include "core/controller.h"
#include "core/core.h"
#include "core/entry.h"
#include "core/feed.h"
#include "core/fsm.h"
#include "sim/ctl_int.h"
#include "sim/sim.h"
#include "wal/ready.h"
#include "wal/writer.h"
#include "zk/zk_codes.h"
#include "zk/zk_jute.h"
#include "zk/zk_proto.h"
#include "zk/zk_state.h"
#include "zk/zk_tree.h"
#include "zk/zk_txn.h"

#define SIM_TICK_MS 10
#define SIM_WALL_EPOCH_MS 1700000000000ll
#define SIM_ZK_SESSION 0x5157ll /* the workload's session */
#define SIM_ZK_SESSION_TIMEOUT_MS 30000

/* A batch handed to the writer: what it does not copy (the chunks), and
 * what its completion reports. Owned by the node from submit until its
 * completion or the node's crash. */
struct host_batch {
	struct sim_node *n;
	uint64_t persist_id; /* 0: a compaction */
	struct raft_snapshot_chunk *chunks;
	size_t n_chunks;
	bool has_install;
	struct raft_snapshot_install install;
	struct host_batch *next;
};

/* The per-node host state (sim_node.host). */
struct sim_host {
	struct sim *s;
	struct sim_node *n;
	struct node_core core;
	struct keel_wbuf frame; /* the peer frame being built */
	uint64_t frame_to;
	struct host_batch *head, *tail; /* in the writer, in submit order */
	struct {
		uint64_t persist_id;
		enum keel_err result;
	} *done; /* completions of the last run, in order */
	size_t n_done, cap_done;
	struct wal_ready_scratch scratch;
	struct raft_entry *decode_entries; /* for traces and the rotation nemesis */
	struct raft_msg_limits limits;
	struct fsm_image_ops image; /* controller mode: the controller glue's */
	/* Controller mode: the brokers' connection to this server's
	 * ZooKeeper clients (core/client_zk.c), opened at the first request,
	 * reopened after the core closes it. */
	struct {
		uint64_t id; /* 0: none */
		bool connected; /* its ConnectResponse came */
		bool paused;    /* the core stopped reading it */
		bool closed;    /* the core closed it: forget it after the drive */
		int32_t next_xid;
		struct keel_wbuf out; /* the frame being written (client_begin) */
		/* Frames not yet read by the core, in order. */
		struct {
			uint8_t *data;
			size_t size;
		} *queued;
		size_t n_queued, cap_queued;
		/* Requests sent, waiting for their answer (by xid). */
		struct {
			int32_t xid;
			struct sim_ctl_msg msg;
		} *waiting;
		size_t n_waiting, cap_waiting;
	} bc;
	uint64_t next_conn;
	bool ctl_active; /* as of the last process: counts controller starts */
	struct core_observer observer; /* host_observer_ops on this host */
};

static struct sim_host *host_of(void *ctx)
{
	return ctx;
}

/* ---- batches ---- */

static void batch_free(struct host_batch *b)
{
	for (size_t i = 0; i < b->n_chunks; i++) {
		free((void *)b->chunks[i].data);
	}
	free(b->chunks);
	free(b);
}

static enum keel_err batch_prelude(void *user_data, struct wal *wal, char errmsg[WAL_ERRMSG_SIZE])
{
	struct host_batch *b = user_data;
	return sim_waldisk_receive(b->n->disk, wal, b->chunks, b->n_chunks,
				   b->has_install ? &b->install : NULL, errmsg);
}

static void on_written(void *arg, const struct wal_completion *c)
{
	struct sim_host *h = arg;
	struct host_batch *b = c->user_data;
	KEEL_ASSERT(b == h->head);
	h->head = b->next;
	if (h->head == NULL) {
		h->tail = NULL;
	}
	if (b->persist_id != 0) {
		if (h->n_done == h->cap_done) {
			h->cap_done = h->cap_done == 0 ? 16 : 2 * h->cap_done;
			h->done = realloc(h->done, h->cap_done * sizeof(*h->done));
			KEEL_ASSERT(h->done != NULL);
		}
		h->done[h->n_done].persist_id = b->persist_id;
		h->done[h->n_done].result = c->result;
		h->n_done++;
	}
	batch_free(b);
}

static void schedule_disk(struct sim *s, struct sim_node *n, uint64_t persist_id)
{
	uint64_t start = KEEL_MAX(s->now, n->disk_busy_until);
	uint64_t done = start + keel_rng_between(&s->rng, n->fsync_min_ms, n->fsync_max_ms);
	n->disk_busy_until = done;
	sim_schedule(s, done, SIM_EV_DISK, n->id, persist_id, NULL);
}

/* Hands a batch to the writer; the batch is the node's until completed. */
static enum keel_err batch_submit(struct sim_host *h, struct host_batch *b, struct wal_batch *wb)
{
	wb->user_data = b;
	if (b->n_chunks > 0 || b->has_install) {
		wb->prelude = batch_prelude;
	}
	enum keel_err err = sim_waldisk_writer_submit(h->n->disk, wb);
	if (err != KEEL_OK) {
		batch_free(b);
		return err;
	}
	if (h->tail == NULL) {
		h->head = b;
	} else {
		h->tail->next = b;
	}
	h->tail = b;
	schedule_disk(h->s, h->n, b->persist_id);
	return KEEL_OK;
}

static void copy_chunks(struct host_batch *b, const struct raft_ready *rd)
{
	if (rd->n_chunks == 0) {
		return;
	}
	b->chunks = calloc(rd->n_chunks, sizeof(*b->chunks));
	KEEL_ASSERT(b->chunks != NULL);
	for (size_t i = 0; i < rd->n_chunks; i++) {
		b->chunks[i] = rd->chunks[i];
		uint8_t *data = malloc(rd->chunks[i].size > 0 ? rd->chunks[i].size : 1);
		KEEL_ASSERT(data != NULL);
		memcpy(data, rd->chunks[i].data, rd->chunks[i].size);
		b->chunks[i].data = data;
		b->n_chunks++;
	}
}

/* ---- effects: storage ---- */

static enum keel_err host_persist(void *ctx, const struct raft_ready *rd)
{
	struct sim_host *h = host_of(ctx);
	struct sim *s = h->s;
	struct sim_node *n = h->n;
	sim_node_note_persist(s, n, rd);
	struct host_batch *b = calloc(1, sizeof(*b));
	KEEL_ASSERT(b != NULL);
	b->n = n;
	b->persist_id = rd->persist_id;
	copy_chunks(b, rd);
	struct wal_batch wb;
	enum keel_err err = wal_batch_from_ready(rd, &h->scratch, &wb);
	KEEL_ASSERT(err == KEEL_OK);
	if (rd->install != NULL) {
		b->has_install = true;
		b->install = *rd->install;
		sim_tracef(s, "node %llu: install snapshot %llu/%llu (batch %llu)%s",
			   (unsigned long long)n->id, (unsigned long long)rd->install->meta.index,
			   (unsigned long long)rd->install->meta.term,
			   (unsigned long long)rd->persist_id,
			   rd->install->discard_log ? ", log discarded" : "");
	}
	err = batch_submit(h, b, &wb);
	if (err != KEEL_OK) {
		if (err != KEEL_FAILED) {
			sim_fail(s, "node %llu: the WAL writer refused batch %llu: %s",
				 (unsigned long long)n->id, (unsigned long long)rd->persist_id,
				 keel_errname(err));
		}
		return err;
	}
	struct sim_submitted sub;
	memset(&sub, 0, sizeof(sub));
	sub.id = rd->persist_id;
	sub.install = rd->install != NULL;
	sim_node_submitted_push(n, &sub);
	sim_trace_hash(s, rd->persist_id ^ (rd->n_entries << 32));
	return KEEL_OK;
}

/* Reports the completions of the last writer run to the core, in persist
 * order (batches reported early by the planted bug are skipped). */
static void report_completions(struct sim_host *h)
{
	struct sim_node *n = h->n;
	for (size_t i = 0; i < h->n_done && n->up; i++) {
		KEEL_ASSERT(n->n_submitted > 0);
		KEEL_ASSERT(n->submitted[0].id == h->done[i].persist_id);
		bool early = n->submitted[0].reported;
		sim_node_submitted_pop(n);
		if (!early) {
			core_on_durable(&h->core, h->done[i].persist_id, h->done[i].result);
		}
		if (h->done[i].result != KEEL_OK) {
			break;
		}
	}
	h->n_done = 0;
}

static enum keel_err host_snapshot_read(void *ctx, uint64_t index, uint64_t term, uint64_t offset,
					void *buf, size_t size, size_t *got)
{
	struct sim_host *h = host_of(ctx);
	uint64_t file_size = 0;
	const uint8_t *bytes = h->n->disk->ops->snapshot_bytes(h->n->disk, index, term, &file_size);
	*got = 0;
	if (bytes == NULL || offset > file_size) {
		return KEEL_NOENT;
	}
	size_t n = (size_t)KEEL_MIN((uint64_t)size, file_size - offset);
	memcpy(buf, bytes + offset, n);
	*got = n;
	return KEEL_OK;
}

struct mem_reader {
	const uint8_t *data;
	size_t size;
	size_t at;
};

static enum keel_err mem_read(void *ctx, void *buf, size_t size, size_t *got)
{
	struct mem_reader *r = ctx;
	size_t n = KEEL_MIN(size, r->size - r->at);
	memcpy(buf, r->data + r->at, n);
	r->at += n;
	*got = n;
	return KEEL_OK;
}

/* Replaces the state machine with a snapshot's payload. */
static enum keel_err load_payload(struct sim_host *h, const uint8_t *data, size_t size)
{
	struct mem_reader r = {data, size, 0};
	char why[256];
	enum keel_err err = fsm_snapshot_read(&h->core, mem_read, &r, why, sizeof(why));
	if (err != KEEL_OK) {
		sim_fail(h->s, "node %llu: a snapshot does not load: %s: %s",
			 (unsigned long long)h->n->id, keel_errname(err), why);
	}
	return err;
}

static enum keel_err host_snapshot_load(void *ctx, const struct raft_snapshot_meta *meta)
{
	struct sim_host *h = host_of(ctx);
	uint64_t size = 0;
	const uint8_t *bytes =
		h->n->disk->ops->snapshot_payload(h->n->disk, meta->index, meta->term, &size);
	if (bytes == NULL) {
		/* Installed and verified, but unreadable now (the power went). */
		KEEL_ASSERT(h->n->disk->ops->failed(h->n->disk));
		return KEEL_IO;
	}
	struct sim *s = h->s;
	struct sim_node *n = h->n;
	n->sm.config = meta->config;
	enum keel_err err = load_payload(h, bytes, (size_t)size);
	if (err != KEEL_OK) {
		return err;
	}
	n->sm.applied = meta->index;
	n->sm.applied_term = meta->term;
	h->core.applied_config = meta->config;
	sim_check_snapshot_loaded(s, n);
	n->last_snapshot_index = meta->index;
	s->stat_snap_installs++;
	sim_node_writes_unknown_below(s, n, meta->index);
	sim_zkf_snapshot_installed(s, n->id);
	return KEEL_OK;
}

/* ---- effects: peers ---- */

static struct keel_wbuf *host_peer_begin(void *ctx, uint64_t to, uint8_t type, size_t *mark)
{
	struct sim_host *h = host_of(ctx);
	if (to < 1 || to > h->s->n_slots || to == h->n->id) {
		return NULL; /* a server that never existed in this run */
	}
	keel_wbuf_reset(&h->frame);
	keel_wbuf_u8(&h->frame, type);
	h->frame_to = to;
	*mark = 0;
	return &h->frame;
}

static void host_peer_end(void *ctx, uint64_t to, size_t mark)
{
	struct sim_host *h = host_of(ctx);
	(void)mark;
	KEEL_ASSERT(to == h->frame_to);
	KEEL_ASSERT(keel_wbuf_ok(&h->frame));
	const struct raft_msg *m = NULL;
	struct raft_msg msg;
	struct sim *s = h->s;
	bool rotation = s->rot_state == 3 && s->rot_drop_new && s->rot_a == h->n->id;
	if (h->frame.data[0] == PEER_FRAME_RAFT && (rotation || s->cfg.verbose)) {
		/* Decoded for the rotation nemesis and the trace (the network
		 * carries the bytes; the receiver's core decodes them). */
		enum keel_err err = raft_msg_decode(h->frame.data + 1, h->frame.size - 1, &h->limits,
						    &msg, h->decode_entries, h->limits.max_entries);
		KEEL_ASSERT(err == KEEL_OK);
		m = &msg;
	}
	sim_net_send_frame(s, h->n->id, to, h->frame.data, h->frame.size, m);
}

static bool host_peer_connected(void *ctx, uint64_t to)
{
	struct sim_host *h = host_of(ctx);
	return to >= 1 && to <= h->s->n_slots && !h->s->net.blocked[h->n->id][to];
}

void sim_host_deliver(struct sim *s, struct sim_node *n, uint64_t from, const uint8_t *bytes,
		      size_t size)
{
	struct sim_host *h = n->host;
	KEEL_ASSERT(size >= 1);
	core_on_peer_frame(&h->core, from, bytes[0], bytes + 1, size - 1);
	sim_host_process(s, n);
}

/* ---- effects: clients (the ZooKeeper part comes next) ---- */

static void no_client(const char *what)
{
	keel_assert_fail(what, __FILE__, __LINE__, "sim host: an effect the simulator does not use");
}

static struct sim_host *conn_host(void *ctx, uint64_t conn)
{
	struct sim_host *h = host_of(ctx);
	if (conn == 0 || conn != h->bc.id) {
		sim_fail(h->s, "node %llu: the core wrote to connection %llu, not the brokers' %llu",
			 (unsigned long long)h->n->id, (unsigned long long)conn,
			 (unsigned long long)h->bc.id);
	}
	return h;
}

/* The ZooKeeper workload's connections (zkworld.c). */
static bool zk_conn(void *ctx, uint64_t conn)
{
	(void)ctx;
	return conn >= SIM_ZK_CONN_BASE && conn < SIM_FEED_CONN_BASE;
}

/* The change-feed consumers' connections (zkfeedworld.c). */
static bool feed_conn(void *ctx, uint64_t conn)
{
	(void)ctx;
	return conn >= SIM_FEED_CONN_BASE;
}

static struct keel_wbuf *host_client_begin(void *ctx, uint64_t conn, size_t *mark)
{
	if (feed_conn(ctx, conn)) {
		*mark = 0;
		return sim_zkf_client_begin(host_of(ctx)->s, host_of(ctx)->n->id, conn);
	}
	if (zk_conn(ctx, conn)) {
		*mark = 0;
		return sim_zkw_client_begin(host_of(ctx)->s, host_of(ctx)->n->id, conn);
	}
	struct sim_host *h = conn_host(ctx, conn);
	keel_wbuf_reset(&h->bc.out);
	*mark = 0;
	return h->bc.closed ? NULL : &h->bc.out;
}

static void host_client_send(void *ctx, uint64_t conn, const void *payload, size_t size);

static void host_client_end(void *ctx, uint64_t conn, size_t mark)
{
	if (feed_conn(ctx, conn)) {
		KEEL_ASSERT(mark == 0);
		sim_zkf_client_end(host_of(ctx)->s, host_of(ctx)->n->id, conn);
		return;
	}
	if (zk_conn(ctx, conn)) {
		KEEL_ASSERT(mark == 0);
		sim_zkw_client_end(host_of(ctx)->s, host_of(ctx)->n->id, conn);
		return;
	}
	struct sim_host *h = conn_host(ctx, conn);
	KEEL_ASSERT(mark == 0 && keel_wbuf_ok(&h->bc.out));
	host_client_send(ctx, conn, h->bc.out.data, h->bc.out.size);
}

static void broker_answer(struct sim_host *h, int32_t xid, int32_t err, const uint8_t *body,
			  size_t size)
{
	for (size_t i = 0; i < h->bc.n_waiting; i++) {
		if (h->bc.waiting[i].xid != xid) {
			continue;
		}
		struct sim_ctl_msg *reply = malloc(sizeof(*reply));
		KEEL_ASSERT(reply != NULL);
		*reply = h->bc.waiting[i].msg;
		memmove(&h->bc.waiting[i], &h->bc.waiting[i + 1],
			(h->bc.n_waiting - i - 1) * sizeof(h->bc.waiting[0]));
		h->bc.n_waiting--;
		sim_ctl_decode_reply(h->s, reply, err, body, size);
		sim_ctl_release(h->s, h->n, reply);
		return;
	}
	sim_fail(h->s, "node %llu: an answer to xid %d nobody asked", (unsigned long long)h->n->id,
		 (int)xid);
}

/* A frame the core sent the brokers' connection: the ConnectResponse,
 * then the answers to their requests. */
static void host_client_send(void *ctx, uint64_t conn, const void *payload, size_t size)
{
	if (zk_conn(ctx, conn)) {
		sim_zkw_client_send(host_of(ctx)->s, host_of(ctx)->n->id, conn, payload, size);
		return;
	}
	struct sim_host *h = conn_host(ctx, conn);
	if (h->bc.closed) {
		return;
	}
	if (!h->bc.connected) {
		struct zk_connect_response rsp;
		if (zk_connect_response_decode(&rsp, payload, size) != KEEL_OK ||
		    rsp.timeout_ms <= 0) {
			sim_fail(h->s, "node %llu: a bad ConnectResponse (%zu bytes)",
				 (unsigned long long)h->n->id, size);
			return;
		}
		h->bc.connected = true;
		return;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, payload, size);
	struct zk_reply_header rh;
	if (zk_reply_header_decode(&rh, &r) != KEEL_OK) {
		sim_fail(h->s, "node %llu: a reply of %zu bytes without its header",
			 (unsigned long long)h->n->id, size);
		return;
	}
	if (rh.xid < 0) {
		return; /* a watch event or ping: the brokers ask for none */
	}
	broker_answer(h, rh.xid, rh.err, r.data + r.pos, keel_rbuf_remaining(&r));
}

static void host_client_pause(void *ctx, uint64_t conn, bool paused)
{
	if (zk_conn(ctx, conn)) {
		sim_zkw_client_pause(host_of(ctx)->s, host_of(ctx)->n->id, conn, paused);
		return;
	}
	conn_host(ctx, conn)->bc.paused = paused;
}

static void host_client_close(void *ctx, uint64_t conn, enum keel_err reason, bool flush)
{
	if (feed_conn(ctx, conn)) {
		/* flush or not: what the core wrote is with the consumer already */
		sim_zkf_client_close(host_of(ctx)->s, host_of(ctx)->n->id, conn);
		return;
	}
	if (zk_conn(ctx, conn)) {
		/* flush or not: what the core wrote is on the wire already */
		sim_tracef(host_of(ctx)->s, "node %llu: the core closes connection %llu: %s",
			   (unsigned long long)host_of(ctx)->n->id,
			   (unsigned long long)(conn - SIM_ZK_CONN_BASE), keel_errname(reason));
		sim_zkw_client_close(host_of(ctx)->s, host_of(ctx)->n->id, conn);
		return;
	}
	struct sim_host *h = conn_host(ctx, conn);
	(void)flush;
	sim_tracef(h->s, "node %llu: the core closed the brokers' connection: %s",
		   (unsigned long long)h->n->id, keel_errname(reason));
	h->bc.closed = true;
}

static bool host_client_paused(void *ctx, uint64_t conn)
{
	if (zk_conn(ctx, conn)) {
		return sim_zkw_client_paused(host_of(ctx)->s, host_of(ctx)->n->id, conn);
	}
	return conn_host(ctx, conn)->bc.paused;
}

static size_t host_client_output_bytes(void *ctx, uint64_t conn)
{
	if (feed_conn(ctx, conn)) {
		return sim_zkf_client_output_bytes(host_of(ctx)->s, host_of(ctx)->n->id, conn);
	}
	if (zk_conn(ctx, conn)) {
		return 0; /* on the wire at once */
	}
	(void)conn_host(ctx, conn);
	return 0; /* delivered at once */
}

static void host_feed_wait(void *ctx, bool waiting)
{
	sim_zkf_feed_wait(host_of(ctx)->s, host_of(ctx)->n->id, waiting);
}

static bool host_session_proof_ok(void *ctx, uint64_t session_id, const uint8_t passwd[16],
				  const uint8_t *proof, size_t size)
{
	(void)ctx, (void)session_id, (void)passwd, (void)proof, (void)size;
	no_client("session_proof_ok");
	return false;
}

static bool host_addr_ok(void *ctx, const char *addr)
{
	(void)ctx, (void)addr;
	return true; /* the simulated network reaches any server by id */
}

static void host_book_changed(void *ctx)
{
	(void)ctx; /* the simulated network links servers by id, not address */
}

/* ---- effects: time, randomness, logs ---- */

static uint64_t host_now_ms(void *ctx)
{
	struct sim_host *h = host_of(ctx);
	uint64_t local = sim_local_time(h->s, h->n);
	if (local < h->n->last_local) {
		local = h->n->last_local;
	}
	h->n->last_local = local;
	return local;
}

static int64_t host_wall_ms(void *ctx)
{
	return SIM_WALL_EPOCH_MS + (int64_t)host_now_ms(ctx);
}

static uint64_t host_mono_ns(void *ctx)
{
	return host_now_ms(ctx) * 1000000u;
}

static enum keel_err host_random(void *ctx, void *buf, size_t size)
{
	struct sim_host *h = host_of(ctx);
	uint8_t *p = buf;
	for (size_t i = 0; i < size; i++) {
		p[i] = (uint8_t)keel_rng_next(&h->s->rng);
	}
	return KEEL_OK;
}

__attribute__((format(printf, 3, 0))) static void host_log(void *ctx, enum core_log_level level,
							   const char *fmt, va_list ap)
{
	struct sim_host *h = host_of(ctx);
	if (level < CORE_LOG_WARN && !h->s->cfg.verbose) {
		return;
	}
	char line[160];
	vsnprintf(line, sizeof(line), fmt, ap);
	sim_tracef(h->s, "node %llu: %s", (unsigned long long)h->n->id, line);
}

static void host_schedule_drive(void *ctx)
{
	(void)ctx; /* every input is followed by sim_host_process */
}

static void host_on_failed(void *ctx)
{
	struct sim_host *h = host_of(ctx);
	if (!h->n->stop_pending) {
		sim_tracef(h->s, "node %llu: storage failed: %.100s", (unsigned long long)h->n->id,
			   h->n->disk->ops->errmsg(h->n->disk));
	}
	h->n->stop_pending = true;
}

/* ---- the register workload over the ZooKeeper state ---- */

static void key_path(uint32_t key, char out[8])
{
	snprintf(out, 8, "/k%u", key);
}

/* The value of register `key` in this server's tree (0: no node). */
static uint64_t read_key(struct sim_host *h, uint32_t key)
{
	char path[8];
	key_path(key, path);
	struct zk_state *st = fsm_zk(h->core.fsm);
	uint32_t id = zk_state_lookup(st, zk_bytes_str(path));
	if (id == ZK_NODE_NONE) {
		return 0;
	}
	const struct zk_node *node = zk_tree_node(&st->tree, id);
	if (node->data_size != 8) {
		return 0;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, zk_node_data(node), 8);
	return keel_rbuf_u64(&r);
}

static void host_on_applied(void *ctx, const struct raft_entry *entry,
			    const struct fsm_applied *applied)
{
	struct sim_host *h = host_of(ctx);
	struct sim_node *n = h->n;
	if (entry->index != n->sm.applied + 1) {
		sim_fail(h->s, "apply order: node %llu got entry %llu after %llu",
			 (unsigned long long)n->id, (unsigned long long)entry->index,
			 (unsigned long long)n->sm.applied);
		return;
	}
	n->sm.applied = entry->index;
	n->sm.applied_term = entry->term;
	if (entry->type == RAFT_ENTRY_CONFIG) {
		n->sm.config = h->core.applied_config;
	}
	if (applied->kind == FSM_APPLIED_META && h->core.ctl != NULL && !h->core.failed) {
		struct meta_apply_result res;
		node_ctl_last_apply(&h->core, &res);
		sim_ctl_note_applied(h->s, n, entry->index, applied->entry.payload,
				     applied->entry.payload_size, &res);
	}
	if (applied->kind == FSM_APPLIED_ZK && applied->zk->kind == ZK_TXN_REQUEST) {
		sim_zkw_note_applied(h->s, applied->zk->session_id, applied->zk->xid);
	}
	sim_zkf_note_applied(h->s, n, entry->index,
			     applied->kind == FSM_APPLIED_ZK || applied->kind == FSM_APPLIED_ZK_SYSTEM
				     ? applied->zk
				     : NULL);
	sim_check_applied(h->s, n, entry);
	sim_node_complete_writes(h->s, n, entry,
				 applied->kind == FSM_APPLIED_ZK && applied->zk->err == 0);
}

static void host_on_reads(void *ctx, const struct raft_read_result *reads, size_t count)
{
	struct sim_host *h = host_of(ctx);
	sim_node_take_reads(h->s, h->n, reads, count);
}

static void serve_reads(struct sim_host *h)
{
	struct sim_node *n = h->n;
	size_t k = 0;
	for (size_t i = 0; i < n->n_reads; i++) {
		struct sim_pending_read *p = &n->reads[i];
		if (p->index != 0 && h->core.applied_index >= p->index) {
			sim_hist_complete(h->s, p->op, SIM_OP_OK, read_key(h, h->s->hist[p->op].key));
		} else {
			n->reads[k++] = *p;
		}
	}
	n->n_reads = k;
}

static enum keel_err wbuf_write(void *ctx, const void *data, size_t size)
{
	keel_wbuf_bytes(ctx, data, size);
	return keel_wbuf_ok(ctx) ? KEEL_OK : KEEL_NOMEM;
}

/* The server's own snapshot, as its snapshotter takes it: the fsm's stream
 * in a snapshot file (durable), then the core hears of it, then the log is
 * compacted behind it. */
static void maybe_snapshot(struct sim_host *h)
{
	struct sim *s = h->s;
	struct sim_node *n = h->n;
	struct node_core *c = &h->core;
	if (n->stop_pending || c->applied_index < n->last_snapshot_index + n->snapshot_every) {
		return;
	}
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 1024, 64u << 20);
	enum keel_err err = fsm_snapshot_write(c, wbuf_write, &w);
	KEEL_ASSERT(err == KEEL_OK);
	struct raft_snapshot_meta meta;
	memset(&meta, 0, sizeof(meta));
	meta.index = c->applied_index;
	meta.term = c->applied_term;
	meta.config = c->applied_config;
	err = sim_waldisk_snapshot_file(n->disk, &meta, w.data, w.size, &meta.size_bytes);
	keel_wbuf_free(&w);
	if (err != KEEL_OK) {
		if (n->disk->ops->failed(n->disk)) {
			host_on_failed(h);
		} else {
			sim_fail(s, "node %llu: storage refused a snapshot: %s",
				 (unsigned long long)n->id, keel_errname(err));
		}
		return;
	}
	err = raft_snapshot_taken(c->raft, &meta);
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: raft_snapshot_taken(%llu/%llu) failed: %s",
			 (unsigned long long)n->id, (unsigned long long)meta.index,
			 (unsigned long long)meta.term, keel_errname(err));
		return;
	}
	c->snapshot_index = meta.index;
	c->bytes_since_snapshot = 0;
	n->last_snapshot_index = meta.index;
	s->stat_snapshots++;
	struct host_batch *b = calloc(1, sizeof(*b));
	KEEL_ASSERT(b != NULL);
	b->n = n;
	struct wal_batch wb = {.compact_upto = meta.index, .prune_snapshots = true};
	err = batch_submit(h, b, &wb);
	if (err != KEEL_OK && err != KEEL_FAILED) {
		sim_fail(s, "node %llu: the WAL writer refused a compaction: %s",
			 (unsigned long long)n->id, keel_errname(err));
	}
	/* As the server's snapshotter does: the feed's history follows the log. */
	node_feed_on_snapshot_taken(c, meta.index);
}

/* After an apply: reads whose index is applied are served, and the
 * server may take its snapshot. */
static void host_maybe_snapshot(void *ctx)
{
	struct sim_host *h = host_of(ctx);
	serve_reads(h);
	maybe_snapshot(h);
}

/* ---- the metadata image section ---- */

static enum keel_err image_none_save(void *ctx, fsm_write_fn write, void *write_ctx)
{
	(void)ctx, (void)write, (void)write_ctx;
	return KEEL_OK; /* no controller: an empty section */
}

static enum keel_err image_none_load(void *ctx, const uint8_t *data, size_t size, char *err,
				     size_t err_size)
{
	(void)ctx, (void)data;
	if (size != 0) {
		snprintf(err, err_size, "a metadata image in a run without a controller");
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}

static enum keel_err image_ctl_save(void *ctx, fsm_write_fn write, void *write_ctx)
{
	return node_ctl_save_image(ctx, write, write_ctx);
}

static enum keel_err image_ctl_load(void *ctx, const uint8_t *data, size_t size, char *err,
				    size_t err_size)
{
	return node_ctl_load_image(ctx, data, size, err, err_size);
}

static const struct core_host_ops host_ops = {
	.persist = host_persist,
	.peer_begin = host_peer_begin,
	.peer_end = host_peer_end,
	.peer_connected = host_peer_connected,
	.client_begin = host_client_begin,
	.client_end = host_client_end,
	.client_send = host_client_send,
	.client_pause = host_client_pause,
	.client_close = host_client_close,
	.client_paused = host_client_paused,
	.now_ms = host_now_ms,
	.wall_ms = host_wall_ms,
	.mono_ns = host_mono_ns,
	.random_bytes = host_random,
	.log = host_log,
	.snapshot_read = host_snapshot_read,
	.snapshot_load = host_snapshot_load,
	.schedule_drive = host_schedule_drive,
	.on_failed = host_on_failed,
	.book_changed = host_book_changed,
	.maybe_snapshot = host_maybe_snapshot,
	.addr_ok = host_addr_ok,
	.session_proof_ok = host_session_proof_ok,
	.client_output_bytes = host_client_output_bytes,
	.feed_wait = host_feed_wait,
};

/* What the core hands its own parts, seen by the checkers. */
static const struct core_observer host_observer_ops = {
	.applied = host_on_applied,
	.reads = host_on_reads,
};

/* ---- the brokers' connection (controller mode) ---- */

static void broker_conn_queue(struct sim_host *h, const uint8_t *data, size_t size)
{
	if (h->bc.n_queued == h->bc.cap_queued) {
		h->bc.cap_queued = h->bc.cap_queued == 0 ? 16 : 2 * h->bc.cap_queued;
		h->bc.queued = realloc(h->bc.queued, h->bc.cap_queued * sizeof(*h->bc.queued));
		KEEL_ASSERT(h->bc.queued != NULL);
	}
	uint8_t *copy = malloc(size);
	KEEL_ASSERT(copy != NULL);
	memcpy(copy, data, size);
	h->bc.queued[h->bc.n_queued].data = copy;
	h->bc.queued[h->bc.n_queued].size = size;
	h->bc.n_queued++;
}

/* A new connection and its ConnectRequest (a new session). */
static void broker_conn_open(struct sim_host *h)
{
	h->bc.id = ++h->next_conn;
	h->bc.connected = false;
	h->bc.paused = false;
	h->bc.closed = false;
	h->bc.next_xid = 1;
	uint8_t passwd[ZK_PASSWD_SIZE] = {0};
	struct zk_connect_request cr = {
		.timeout_ms = SIM_ZK_SESSION_TIMEOUT_MS,
		.passwd = zk_bytes_of(passwd, sizeof(passwd)),
	};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 4096);
	zk_connect_request_encode(&w, &cr);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	broker_conn_queue(h, w.data, w.size);
	keel_wbuf_free(&w);
	zk_conn_open(&h->core, h->bc.id, "sim-broker:0", NULL);
}

/* The connection is gone: what waited on it is lost (the brokers time
 * their requests out). */
static void broker_conn_forget(struct sim_host *h)
{
	if (h->bc.id == 0) {
		return;
	}
	zk_conn_on_close(&h->core, h->bc.id);
	for (size_t i = 0; i < h->bc.n_queued; i++) {
		free(h->bc.queued[i].data);
	}
	h->bc.n_queued = 0;
	for (size_t i = 0; i < h->bc.n_waiting; i++) {
		sim_broker_request_lost(h->s, &h->bc.waiting[i].msg);
	}
	h->bc.n_waiting = 0;
	h->bc.id = 0;
}

/* Hands the core the queued frames while it reads the connection. */
static void broker_conn_pump(struct sim_host *h)
{
	while (h->bc.id != 0 && !h->n->stop_pending && !h->s->failed) {
		if (h->bc.closed) {
			broker_conn_forget(h);
			return;
		}
		if (h->bc.paused || h->bc.n_queued == 0) {
			return;
		}
		uint8_t *data = h->bc.queued[0].data;
		size_t size = h->bc.queued[0].size;
		h->bc.n_queued--;
		memmove(&h->bc.queued[0], &h->bc.queued[1], h->bc.n_queued * sizeof(h->bc.queued[0]));
		(void)zk_conn_on_frame(&h->core, h->bc.id, data, size);
		free(data);
		core_drive(&h->core);
	}
}

/* ---- lifecycle ---- */

/* Controller mode: the controller glue on the core, with the run's
 * controller configuration. */
static void ctl_open(struct sim_host *h)
{
	const struct meta_controller_config *cfg = sim_ctl_config(h->s);
	struct node_ctl_options o = {
		.broker_session_timeout_ms = (uint32_t)cfg->session_timeout_ms,
		.leader_rebalance_interval_ms = (uint32_t)cfg->rebalance_interval_ms,
		.max_packet_bytes = 1u << 20,
		.config = cfg,
	};
	char why[256];
	enum keel_err err = node_ctl_create(&h->core, &o, why, sizeof(why));
	KEEL_ASSERT(err == KEEL_OK);
	/* The brokers reach the glue as a real broker does: keel extension
	 * frames on a ZooKeeper session (no cluster credential asked). */
	struct zk_clients_options zo = {
		.max_packet_bytes = 1u << 20,
		.max_pending_per_connection = 1000,
		.max_watches_per_connection = 100,
		.housekeeping_ms = 1000,
		.insecure_peers = true,
	};
	err = zk_clients_open(&h->core, &zo, why, sizeof(why));
	KEEL_ASSERT(err == KEEL_OK);
	keel_wbuf_init_dynamic(&h->bc.out, 256, 1u << 20);
	/* The stand-in's image field shows the glue's committed image to the
	 * brokers and checkers (read-only; the glue owns it). */
	h->n->sm.image = (struct meta_image *)node_ctl_image(&h->core);
}

/* The ZooKeeper workload: the core serves ZooKeeper clients (no cluster
 * credential asked). */
static void zk_open(struct sim_host *h)
{
	struct zk_clients_options zo = {
		.max_packet_bytes = 1u << 20,
		.max_pending_per_connection = 1000,
		.max_watches_per_connection = 1000,
		.housekeeping_ms = 1000,
		.insecure_peers = true,
	};
	/* The change feed's history and high water: small, drawn by the
	 * feed's consumers (zkfeedworld.c), so that they fall behind. */
	sim_zkf_options(h->s, &zo.feed_retain_bytes, &zo.feed_high_water_bytes);
	char why[256];
	enum keel_err err = zk_clients_open(&h->core, &zo, why, sizeof(why));
	KEEL_ASSERT(err == KEEL_OK);
}

struct node_core *sim_host_core(struct sim_node *n)
{
	KEEL_ASSERT(n->host != NULL);
	return &n->host->core;
}

bool sim_host_start(struct sim *s, struct sim_node *n, const struct sim_disk_state *st)
{
	KEEL_ASSERT(n->host == NULL);
	struct sim_host *h = calloc(1, sizeof(*h));
	KEEL_ASSERT(h != NULL);
	h->s = s;
	h->n = n;
	keel_wbuf_init_dynamic(&h->frame, 256, 64u << 20);
	n->host = h;
	struct core_host host = {&host_ops, h};
	core_init(&h->core, n->id, &host, keel_rng_next(&s->rng));
	h->observer = host_observer_ops;
	h->observer.ctx = h;
	h->core.observer = &h->observer;
	if (s->cfg.controller) {
		h->image = (struct fsm_image_ops){image_ctl_save, image_ctl_load, &h->core};
	} else {
		h->image = (struct fsm_image_ops){image_none_save, image_none_load, NULL};
	}
	struct zk_config zk;
	zk_config_default(&zk);
	struct core_options co = {
		.election_timeout_ms = s->opts.election_timeout_ms,
		.heartbeat_ms = s->opts.heartbeat_interval_ms,
		.snapshot_chunk_bytes = s->opts.snapshot_chunk_bytes,
		.snapshot_trailing = s->opts.snapshot_trailing_entries,
		.max_entry_bytes = s->opts.max_entry_bytes,
		.zk_config = &zk,
		.image = &h->image,
		.raft = &s->opts,
	};
	char why[256];
	enum keel_err err = core_open(&h->core, &co, why, sizeof(why));
	KEEL_ASSERT(err == KEEL_OK);
	memset(&n->sm, 0, sizeof(n->sm));
	if (s->cfg.controller) {
		ctl_open(h);
	}
	raft_options_msg_limits(&h->core.raft_opts, &h->limits);
	h->decode_entries = calloc(h->limits.max_entries, sizeof(*h->decode_entries));
	KEEL_ASSERT(h->decode_entries != NULL);
	if (st->has_snapshot) {
		if (load_payload(h, st->snapshot_payload, (size_t)st->snapshot_payload_size) !=
		    KEEL_OK) {
			return false;
		}
		h->core.applied_index = st->snapshot.index;
		h->core.applied_term = st->snapshot.term;
		h->core.commit_index = st->snapshot.index;
		h->core.snapshot_index = st->snapshot.index;
		h->core.applied_config = st->snapshot.config;
		n->sm.applied = st->snapshot.index;
		n->sm.applied_term = st->snapshot.term;
		n->sm.config = st->snapshot.config;
	}
	if (s->cfg.zk && !s->cfg.controller) {
		/* After the snapshot, as the server opens its clients after
		 * recovery: the change feed's history starts after it. */
		zk_open(h);
	}
	err = raft_restore(h->core.raft, &st->hs, st->has_snapshot ? &st->snapshot : NULL,
			   st->entries, st->n_entries);
	if (err != KEEL_OK) {
		sim_fail(s, "node %llu: restore from its disk failed: %s", (unsigned long long)n->id,
			 keel_errname(err));
		return false;
	}
	n->r = h->core.raft;
	err = sim_waldisk_writer_start(n->disk, on_written, h);
	KEEL_ASSERT(err == KEEL_OK);
	if (st->has_snapshot) {
		sim_check_snapshot_loaded(s, n);
	}
	return true;
}

void sim_host_tick(struct sim *s, struct sim_node *n, uint64_t local)
{
	core_tick(&n->host->core, local);
	if (n->host->core.ctl != NULL) {
		sim_ctl_check_working(s, n);
	}
}

/* A disk completion: the writer writes and syncs everything queued as one
 * group; the completions go to the core in persist order. */
void sim_host_disk_done(struct sim *s, struct sim_node *n)
{
	struct sim_host *h = n->host;
	(void)sim_waldisk_writer_run(n->disk);
	report_completions(h);
	sim_host_process(s, n);
}

/* Planted bug: claims durability for what the last ready submitted,
 * before the disk has it (an install waits: it loads only from disk). */
static void ack_early(struct sim_host *h)
{
#ifdef KEEL_PLANT_BUG_ACK_BEFORE_PERSIST
	struct sim_node *n = h->n;
	for (size_t i = 0; i < n->n_submitted && n->up && !h->core.failed; i++) {
		struct sim_submitted *sub = &n->submitted[i];
		if (sub->install) {
			break;
		}
		if (!sub->reported) {
			sub->reported = true;
			core_on_durable(&h->core, sub->id, KEEL_OK);
			core_drive(&h->core);
		}
	}
#else
	(void)h;
#endif
}

void sim_host_process(struct sim *s, struct sim_node *n)
{
	if (!n->up || s->failed) {
		return;
	}
	struct sim_host *h = n->host;
	core_drive(&h->core);
	ack_early(h);
	broker_conn_pump(h);
	sim_zkw_pump(s, n);
	sim_zkf_pump(s, n);
	if (s->failed) {
		return;
	}
	sim_node_note_role(s, n, raft_role(n->r), raft_leader(n->r), raft_term(n->r));
	if (h->core.ctl != NULL) {
		bool active = node_ctl_active(&h->core);
		sim_ctlw(s)->stat_controllers += active && !h->ctl_active;
		h->ctl_active = active;
	}
	if (n->stop_pending) {
		sim_node_stop_after_failure(s, n);
		return;
	}
	sim_node_check_commit(s, n);
}

void sim_host_close(struct sim_node *n)
{
	struct sim_host *h = n->host;
	if (h == NULL) {
		return;
	}
	core_stop(&h->core);
	if (h->core.ctl != NULL) {
		broker_conn_forget(h);
		zk_clients_close(&h->core);
		keel_wbuf_free(&h->bc.out);
		node_ctl_destroy(&h->core);
		n->sm.image = NULL;
	} else if (h->core.zk_server != NULL) {
		sim_zkw_server_down(h->s, n->id, true);
		zk_clients_close(&h->core);
	}
	core_close(&h->core);
	free(h->bc.queued);
	free(h->bc.waiting);
	while (h->head != NULL) {
		struct host_batch *b = h->head;
		h->head = b->next;
		batch_free(b);
	}
	keel_wbuf_free(&h->frame);
	free(h->done);
	wal_ready_scratch_free(&h->scratch);
	free(h->decode_entries);
	free(h);
	n->host = NULL;
	n->r = NULL;
}

/* ---- workload entry points ---- */

/* Proposes one ZooKeeper txn in the server's envelope. */
static enum keel_err propose_txn(struct sim_host *h, const struct keel_wbuf *txn,
				 uint64_t *index, uint64_t *term)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, NODE_ENTRY_HEADER_SIZE + txn->size, 1u << 20);
	node_entry_encode_header(&w, NODE_ENTRY_ZK, h->n->id, 0, core_wall_ms(&h->core));
	keel_wbuf_bytes(&w, txn->data, txn->size);
	KEEL_ASSERT(keel_wbuf_ok(&w));
	enum keel_err err = core_propose(&h->core, w.data, (uint32_t)w.size, index, term);
	keel_wbuf_free(&w);
	return err;
}

/* The workload's session, proposed before its first write on a server
 * whose state does not hold it yet (apply refuses a second one). */
static bool ensure_session(struct sim_host *h)
{
	if (zk_state_session(fsm_zk(h->core.fsm), SIM_ZK_SESSION) != NULL) {
		return true;
	}
	struct keel_wbuf txn;
	keel_wbuf_init_dynamic(&txn, 64, 4096);
	struct zk_txn_meta meta = {core_wall_ms(&h->core), h->n->id, 0, SIM_ZK_SESSION};
	uint8_t passwd[ZK_PASSWD_SIZE] = {0};
	zk_txn_encode_create_session(&txn, &meta, SIM_ZK_SESSION_TIMEOUT_MS, passwd);
	uint64_t index, term;
	enum keel_err err = propose_txn(h, &txn, &index, &term);
	keel_wbuf_free(&txn);
	return err == KEEL_OK;
}

/* setData /kK (or create it while missing here) with the 8-byte value. */
static void encode_write(struct sim_host *h, uint32_t key, uint64_t value, int32_t xid,
			 struct keel_wbuf *txn)
{
	char path[8];
	key_path(key, path);
	uint8_t data[8];
	struct keel_wbuf v;
	keel_wbuf_init_fixed(&v, data, sizeof(data));
	keel_wbuf_u64(&v, value);
	bool exists = zk_state_lookup(fsm_zk(h->core.fsm), zk_bytes_str(path)) != ZK_NODE_NONE;
	struct keel_wbuf body;
	keel_wbuf_init_dynamic(&body, 64, 4096);
	zk_write_str(&body, path);
	zk_write_bytes(&body, zk_bytes_of(data, sizeof(data)));
	int32_t opcode;
	if (exists) {
		opcode = ZK_OP_SET_DATA;
		keel_wbuf_i32(&body, -1); /* any version */
	} else {
		opcode = ZK_OP_CREATE;
		zk_write_acl_vec(&body, zk_acl_open_unsafe());
		keel_wbuf_i32(&body, 0); /* persistent */
	}
	KEEL_ASSERT(keel_wbuf_ok(&body));
	struct zk_ids ids;
	zk_ids_init(&ids);
	struct zk_txn_meta meta = {core_wall_ms(&h->core), h->n->id, xid, SIM_ZK_SESSION};
	zk_txn_encode_request(txn, &meta, &ids, opcode, body.data, body.size);
	keel_wbuf_free(&body);
}

bool sim_host_propose(struct sim *s, struct sim_node *n, size_t op)
{
	struct sim_host *h = n->host;
	struct sim_hist_op *hop = &s->hist[op];
	if (!ensure_session(h)) {
		return false;
	}
	struct keel_wbuf txn;
	keel_wbuf_init_dynamic(&txn, 128, 4096);
	encode_write(h, hop->key, hop->value, (int32_t)(op & 0x7fffffff), &txn);
	KEEL_ASSERT(keel_wbuf_ok(&txn));
	uint64_t index, term;
	enum keel_err err = propose_txn(h, &txn, &index, &term);
	keel_wbuf_free(&txn);
	if (err != KEEL_OK) {
		sim_host_process(s, n);
		return false;
	}
	hop->index = index;
	hop->term = term;
	hop->node = n->id;
	sim_node_add_write(n, op, index, term);
	sim_host_process(s, n);
	return true;
}

bool sim_host_read(struct sim *s, struct sim_node *n, size_t op)
{
	struct sim_host *h = n->host;
	uint64_t ctx = ++s->next_ctx;
	if (raft_read_index(h->core.raft, ctx) != KEEL_OK) {
		return false;
	}
	s->hist[op].node = n->id;
	sim_node_add_read(n, op, ctx);
	sim_host_process(s, n);
	return true;
}

uint64_t sim_host_state_hash(const struct sim_node *n)
{
	uint64_t hash = zk_state_hash(fsm_zk(n->host->core.fsm));
	if (n->host->core.ctl != NULL) {
		hash = keel_hash_u64(hash ^ meta_image_hash(node_ctl_image(&n->host->core)));
	}
	return hash;
}

/* ---- controller mode ---- */

void sim_host_ctl_request(struct sim *s, struct sim_node *n, const struct sim_ctl_msg *m)
{
	struct sim_host *h = n->host;
	if (h->bc.id == 0) {
		broker_conn_open(h);
	}
	struct keel_wbuf frame;
	keel_wbuf_init_dynamic(&frame, 256, 1u << 20);
	int32_t xid = h->bc.next_xid++;
	keel_wbuf_i32(&frame, xid);
	keel_wbuf_i32(&frame, 0); /* the opcode, once known */
	int32_t opcode = 0;
	sim_ctl_encode_request(m, &frame, &opcode);
	KEEL_ASSERT(keel_wbuf_ok(&frame));
	keel_store_be32(frame.data + 4, (uint32_t)opcode);
	if (h->bc.n_waiting == h->bc.cap_waiting) {
		h->bc.cap_waiting = h->bc.cap_waiting == 0 ? 16 : 2 * h->bc.cap_waiting;
		h->bc.waiting = realloc(h->bc.waiting, h->bc.cap_waiting * sizeof(*h->bc.waiting));
		KEEL_ASSERT(h->bc.waiting != NULL);
	}
	h->bc.waiting[h->bc.n_waiting].xid = xid;
	h->bc.waiting[h->bc.n_waiting].msg = *m;
	h->bc.n_waiting++;
	broker_conn_queue(h, frame.data, frame.size);
	keel_wbuf_free(&frame);
	sim_host_process(s, n);
}

const struct meta_controller *sim_host_controller(const struct sim_node *n,
						  uint64_t *last_proposed_index)
{
	*last_proposed_index = 0;
	if (n->host == NULL || n->host->core.ctl == NULL) {
		return NULL;
	}
	return node_ctl_controller(&n->host->core, last_proposed_index);
}
