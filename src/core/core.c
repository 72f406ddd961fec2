/*
 * core.c — the server core's side of core.h: its own fields, the effect
 * shorthands (each a call through the host's table) and the seed every
 * pseudo-random choice derives from.
 */
#include "core/core.h"

#include <string.h>

#include "base/assert.h"
#include "base/rng.h"

void core_init(struct node_core *c, uint64_t id, const struct core_host *host, uint64_t seed)
{
	KEEL_ASSERT(host->ops != NULL);
	memset(c, 0, sizeof(*c));
	c->host = *host;
	c->id = id;
	c->seed_state = seed;
}

uint64_t core_seed_next(struct node_core *c)
{
	return keel_splitmix64(&c->seed_state);
}

const struct node_addr *core_addr_find(const struct node_core *c, uint64_t id)
{
	for (size_t i = 0; i < c->book.count; i++) {
		if (c->book.addrs[i].id == id) {
			return &c->book.addrs[i];
		}
	}
	return NULL;
}

void core_log(const struct node_core *c, enum core_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	c->host.ops->log(c->host.ctx, level, fmt, ap);
	va_end(ap);
}

uint64_t core_now_ms(const struct node_core *c)
{
	return c->host.ops->now_ms(c->host.ctx);
}

int64_t core_wall_ms(const struct node_core *c)
{
	return c->host.ops->wall_ms(c->host.ctx);
}

uint64_t core_mono_ns(const struct node_core *c)
{
	return c->host.ops->mono_ns(c->host.ctx);
}

enum keel_err core_random(struct node_core *c, void *buf, size_t size)
{
	return c->host.ops->random_bytes(c->host.ctx, buf, size);
}

struct keel_wbuf *core_peer_begin(struct node_core *c, uint64_t to, uint8_t type, size_t *mark)
{
	return c->host.ops->peer_begin(c->host.ctx, to, type, mark);
}

void core_peer_end(struct node_core *c, uint64_t to, size_t mark)
{
	c->host.ops->peer_end(c->host.ctx, to, mark);
}

bool core_peer_connected(struct node_core *c, uint64_t to)
{
	return c->host.ops->peer_connected(c->host.ctx, to);
}

struct keel_wbuf *core_client_begin(struct node_core *c, struct node_client *conn, size_t *mark)
{
	return c->host.ops->client_begin(c->host.ctx, conn, mark);
}

void core_client_end(struct node_core *c, struct node_client *conn, size_t mark)
{
	c->host.ops->client_end(c->host.ctx, conn, mark);
}

void core_client_send(struct node_core *c, struct node_client *conn, const void *payload,
		      size_t size)
{
	c->host.ops->client_send(c->host.ctx, conn, payload, size);
}

void core_client_pause(struct node_core *c, struct node_client *conn, bool paused)
{
	c->host.ops->client_pause(c->host.ctx, conn, paused);
}

void core_client_close(struct node_core *c, struct node_client *conn, enum keel_err reason,
		       bool flush)
{
	c->host.ops->client_close(c->host.ctx, conn, reason, flush);
}
