/*
 * host.c — the libuv shell's implementation of the core's host (core.h):
 * persist batches go to node/storage.c, peer frames to node/peers.c,
 * client frames to the connection's net_conn; time is the loop's clock
 * and the process clocks, randomness the OS source.
 */
#include "node/host.h"

#include <uv.h>

#include "core/fsm.h"
#include "node/admin.h"
#include "node/client.h"
#include "node/client_zk.h"
#include "node/node.h"
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

static struct keel_wbuf *host_client_begin(void *ctx, struct node_client *c, size_t *mark)
{
	(void)ctx;
	return net_conn_frame_begin(&c->conn, mark);
}

static void host_client_end(void *ctx, struct node_client *c, size_t mark)
{
	(void)ctx;
	net_conn_frame_end(&c->conn, mark);
}

static void host_client_send(void *ctx, struct node_client *c, const void *payload, size_t size)
{
	(void)ctx;
	net_conn_send(&c->conn, payload, size);
}

static void host_client_pause(void *ctx, struct node_client *c, bool paused)
{
	struct node *n = ctx;
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

static void host_client_close(void *ctx, struct node_client *c, enum keel_err reason, bool flush)
{
	(void)ctx;
	net_conn_close(&c->conn, reason, flush);
}

static bool host_client_paused(void *ctx, const struct node_client *c)
{
	(void)ctx;
	return c->conn.paused;
}

static const char *host_client_peer_addr(void *ctx, const struct node_client *c)
{
	(void)ctx;
	return c->conn.peer_addr;
}

static bool host_client_tls_subject(void *ctx, const struct node_client *c, char *buf,
				    size_t size)
{
	(void)ctx;
	return net_conn_tls_subject(&c->conn, buf, size);
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

/* ---- the parts not yet in the core ---- */

/* Hands what an applied entry produced to whoever waits for it: the
 * ZooKeeper clients (watches, the waiting request), the peer links, the
 * controller glue (the metadata image is its). */
static void host_on_applied(void *ctx, const struct raft_entry *entry,
                            const struct fsm_applied *applied)
{
	(void)entry;
	struct node *n = ctx;
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
	case FSM_APPLIED_ZK_SYSTEM:
		zk_clients_fire_system(n, applied->zk);
		return;
	case FSM_APPLIED_META: /* the controller (core/controller.c) applied it */
		return;
	case FSM_APPLIED_NOTHING:
		return;
	}
}

static void host_on_reads(void *ctx, const struct raft_read_result *reads, size_t count)
{
	struct node *n = ctx;
	node_clients_on_reads(n, reads, count);
	admin_on_reads(n, reads, count);
}

static void host_on_leader_change(void *ctx, uint64_t old_leader, uint64_t new_leader)
{
	struct node *n = ctx;
	node_clients_on_leader_change(n, old_leader, new_leader);
	admin_on_leader_change(n);
}

static void host_after_apply(void *ctx)
{
	struct node *n = ctx;
	node_clients_after_apply(n);
	snapshot_maybe_start(n);
}

static void host_on_snapshot_installed(void *ctx)
{
	node_clients_on_snapshot_installed(ctx);
}

static void host_on_request(void *ctx, uint64_t from, enum tracker_kind kind, uint64_t request_id,
                            const uint8_t *body, size_t size)
{
	struct node *n = ctx;
	switch (kind) {
	case TRACK_ZK_WRITE:
		zk_clients_on_forward(n, from, request_id, body, size);
		return;
	case TRACK_ADMIN:
		admin_on_forward(n, from, request_id, body, size);
		return;
	case TRACK_META: /* the controller's (core/controller.c) */
		break;
	}
	KEEL_UNREACHABLE();
}

static void host_on_session_frame(void *ctx, uint64_t from, uint8_t type, const uint8_t *body,
                                  size_t size)
{
	node_clients_on_peer_frame(ctx, from, type, body, size);
}

static void host_ctl_complete(void *ctx, uint64_t request_id, int32_t zk_err,
                              const uint8_t *body, size_t size)
{
	zk_clients_ext_complete(ctx, request_id, zk_err, body, size);
}

static void host_fire_system(void *ctx, const struct zk_result *res)
{
	zk_clients_fire_system(ctx, res);
}

static void host_tick(void *ctx, uint64_t now_ms)
{
	struct node *n = ctx;
	node_clients_tick(n, now_ms);
	admin_tick(n, now_ms);
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
        .client_peer_addr = host_client_peer_addr,
        .client_tls_subject = host_client_tls_subject,
        .now_ms = host_now_ms,
        .wall_ms = host_wall_ms,
        .mono_ns = host_mono_ns,
        .random_bytes = host_random,
        .log = host_log,
        .snapshot_read = host_snapshot_read,
        .snapshot_load = host_snapshot_load,
        .schedule_drive = host_schedule_drive,
        .on_failed = host_on_failed,
        .on_applied = host_on_applied,
        .on_reads = host_on_reads,
        .on_leader_change = host_on_leader_change,
        .after_apply = host_after_apply,
        .on_snapshot_installed = host_on_snapshot_installed,
        .on_request = host_on_request,
        .on_session_frame = host_on_session_frame,
        .tick = host_tick,
        .ctl_complete = host_ctl_complete,
        .fire_system = host_fire_system,
};

struct core_host node_host(struct node *n)
{
	struct core_host h = {&host_ops, n};
	return h;
}
