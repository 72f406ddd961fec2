/*
 * host.c — the libuv shell's implementation of the core's host (core.h):
 * persist batches go to node/storage.c, peer frames to node/peers.c,
 * client frames to the connection's net_conn; time is the loop's clock
 * and the process clocks, randomness the OS source.
 */
#include "node/host.h"

#include <uv.h>

#include "node/client.h"
#include "node/node.h"
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
	(void)ctx;
	if (paused) {
		net_conn_pause(&c->conn);
	} else {
		net_conn_resume(&c->conn);
	}
}

static void host_client_close(void *ctx, struct node_client *c, enum keel_err reason, bool flush)
{
	(void)ctx;
	net_conn_close(&c->conn, reason, flush);
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

_Static_assert((int)CORE_LOG_DEBUG == (int)KEEL_LOG_DEBUG && (int)CORE_LOG_INFO == (int)KEEL_LOG_INFO &&
		       (int)CORE_LOG_WARN == (int)KEEL_LOG_WARN &&
		       (int)CORE_LOG_ERROR == (int)KEEL_LOG_ERROR,
	       "core and os log levels agree");

__attribute__((format(printf, 3, 0))) static void host_log(void *ctx, enum core_log_level level,
							   const char *fmt, va_list ap)
{
	(void)ctx;
	keel_logv((enum keel_log_level)level, fmt, ap);
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
	.now_ms = host_now_ms,
	.wall_ms = host_wall_ms,
	.mono_ns = host_mono_ns,
	.random_bytes = host_random,
	.log = host_log,
};

struct core_host node_host(struct node *n)
{
	struct core_host h = {&host_ops, n};
	return h;
}
