/*
 * host.c — the libuv shell's implementation of the core's host (core.h):
 * persist batches go to node/storage.c, peer frames to node/peers.c,
 * client frames to the connection's net_conn (found by its id); time is
 * the loop's clock
 * and the process clocks, randomness the OS source.
 */
#include "node/host.h"

#include <uv.h>

#include "core/fsm.h"
#include "node/client.h"
#include "core/feed.h"
#include "node/node.h"
#include "node/peer_auth.h"
#include "node/snapshot.h"
#include "os/clock.h"
#include "os/log.h"

static enum keel_err host_persist(void *ctx, const struct raft_ready *rd)
{
	struct node *n = ctx;
	return node_storage_submit(n->storage, rd);
}

static struct keel_wbuf *host_peer_begin(void *ctx, uint64_t to, uint8_t type, size_t *mark)
{
	struct node *n = ctx;
	return peers_send_begin(&n->peers, to, type, mark);
}

static void host_peer_end(void *ctx, uint64_t to, size_t mark)
{
	struct node *n = ctx;
	peers_send_end(&n->peers, to, mark);
}

static bool host_peer_connected(void *ctx, uint64_t to)
{
	struct node *n = ctx;
	return peers_connected(&n->peers, to);
}

/* The client connection `id` of the shell (NULL once it is closing: what
 * the core does to it then is dropped, as net_conn drops it). */
static struct node_client *client_of(void *ctx, uint64_t id)
{
	return node_client_find(ctx, id);
}

static struct keel_wbuf *host_client_begin(void *ctx, uint64_t conn, size_t *mark)
{
	struct node_client *c = client_of(ctx, conn);
	return c != NULL ? net_conn_frame_begin(&c->conn, mark) : NULL;
}

/* Frames the core sends to ZooKeeper clients are counted as sent packets
 * (mntr, cons). */
static void count_sent(struct node_client *c)
{
	if (c->mode == CLIENT_ZK) {
		c->packets_sent++;
	}
}

static void host_client_end(void *ctx, uint64_t conn, size_t mark)
{
	struct node_client *c = client_of(ctx, conn);
	KEEL_ASSERT(c != NULL); /* begin found it, and nothing ran in between */
	net_conn_frame_end(&c->conn, mark);
	count_sent(c);
}

static void host_client_send(void *ctx, uint64_t conn, const void *payload, size_t size)
{
	struct node_client *c = client_of(ctx, conn);
	if (c != NULL) {
		net_conn_send(&c->conn, payload, size);
		count_sent(c);
	}
}

static void host_client_pause(void *ctx, uint64_t conn, bool paused)
{
	struct node *n = ctx;
	struct node_client *c = client_of(ctx, conn);
	if (c == NULL) {
		return;
	}
	if (paused) {
		net_conn_pause(&c->conn);
	} else if (n->core.in_ready) {
		/* Resumed while an entry is applied (a session became active):
		 * frames the client pipelined behind its ConnectRequest must not
		 * be proposed inside the ready; they are served after it. */
		net_conn_resume_soon(&c->conn);
	} else {
		net_conn_resume(&c->conn);
	}
}

static void host_client_close(void *ctx, uint64_t conn, enum keel_err reason, bool flush)
{
	struct node_client *c = client_of(ctx, conn);
	if (c != NULL) {
		net_conn_close(&c->conn, reason, flush);
	}
}

static size_t host_client_output_bytes(void *ctx, uint64_t conn)
{
	struct node_client *c = client_of(ctx, conn);
	return c != NULL ? net_conn_pending_output(&c->conn) : 0;
}

static void on_feed_check(uv_check_t *check)
{
	struct node *n = check->data;
	node_feed_pump(&n->core);
}

static void host_feed_wait(void *ctx, bool waiting)
{
	struct node *n = ctx;
	n->feed_check.data = n;
	if (waiting) {
		uv_check_start(&n->feed_check, on_feed_check);
	} else {
		uv_check_stop(&n->feed_check);
	}
}

static bool host_client_paused(void *ctx, uint64_t conn)
{
	struct node_client *c = client_of(ctx, conn);
	return c == NULL || c->conn.paused;
}

static uint64_t host_now_ms(void *ctx)
{
	struct node *n = ctx;
	return uv_now(n->loop);
}

static int64_t host_wall_ms(void *ctx)
{
	(void)ctx;
	return keel_clock_wall_ms();
}

static uint64_t host_mono_ns(void *ctx)
{
	(void)ctx;
	return keel_clock_mono_ns();
}

static enum keel_err host_random(void *ctx, void *buf, size_t size)
{
	(void)ctx;
	return keel_os_random(buf, size);
}

_Static_assert((int)CORE_LOG_DEBUG == (int)KEEL_LOG_DEBUG &&
                       (int)CORE_LOG_INFO == (int)KEEL_LOG_INFO &&
                       (int)CORE_LOG_WARN == (int)KEEL_LOG_WARN &&
                       (int)CORE_LOG_ERROR == (int)KEEL_LOG_ERROR,
               "core and os log levels agree");

__attribute__((format(printf, 3, 0))) static void host_log(void *ctx, enum core_log_level level,
                                                           const char *fmt, va_list ap)
{
	(void)ctx;
	keel_logv((enum keel_log_level)level, fmt, ap);
}

static enum keel_err host_snapshot_read(void *ctx, uint64_t index, uint64_t term, uint64_t offset,
                                        void *buf, size_t size, size_t *got)
{
	struct node *n = ctx;
	return node_storage_snapshot_read(n->storage, index, term, offset, buf, size, got);
}

static enum keel_err host_snapshot_load(void *ctx, const struct raft_snapshot_meta *meta)
{
	struct node *n = ctx;
	char path[2048];
	char msg[256];
	node_storage_snapshot_path_for(n->storage, meta->index, meta->term, path, sizeof(path));
	enum keel_err rc = fsm_snapshot_load(n, path, meta->index, msg, sizeof(msg));
	if (rc != KEEL_OK) {
		KEEL_ERROR("cannot load installed snapshot %s: %s", path, msg);
	}
	return rc;
}

static void host_schedule_drive(void *ctx)
{
	node_schedule_drive(ctx);
}

static void host_on_failed(void *ctx)
{
	struct node *n = ctx;
	n->exit_code = 1;
	uv_stop(n->loop);
}

static void host_book_changed(void *ctx)
{
	node_book_changed(ctx);
}

static void host_maybe_snapshot(void *ctx)
{
	snapshot_maybe_start(ctx);
}

static bool host_addr_ok(void *ctx, const char *addr)
{
	(void)ctx;
	struct sockaddr_storage ss;
	return net_parse_addr(addr, &ss) == KEEL_OK;
}

static bool host_session_proof_ok(void *ctx, uint64_t session_id, const uint8_t passwd[16],
                                  const uint8_t *proof, size_t size)
{
	struct node *n = ctx;
	return peer_auth_session_verify(&n->peers.keys, session_id, passwd, proof, size);
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

struct core_host node_host(struct node *n)
{
	struct core_host h = {&host_ops, n};
	return h;
}
