/*
 * core.c — the server core's side of core.h: the effect shorthands (each a
 * call through the host's table) and the seed every pseudo-random choice
 * derives from.
 */
#include "node/core.h"

#include "base/assert.h"
#include "base/rng.h"
#include "node/client.h"
#include "node/node.h"

uint64_t core_seed_next(struct node *n)
{
	return keel_splitmix64(&n->seed_state);
}

uint64_t core_now_ms(const struct node *n)
{
	return n->host.ops->now_ms(n->host.ctx);
}

int64_t core_wall_ms(const struct node *n)
{
	return n->host.ops->wall_ms(n->host.ctx);
}

uint64_t core_mono_ns(const struct node *n)
{
	return n->host.ops->mono_ns(n->host.ctx);
}

enum keel_err core_random(struct node *n, void *buf, size_t size)
{
	return n->host.ops->random(n->host.ctx, buf, size);
}

struct keel_wbuf *core_peer_begin(struct node *n, uint64_t to, uint8_t type, size_t *mark)
{
	return n->host.ops->peer_begin(n->host.ctx, to, type, mark);
}

void core_peer_end(struct node *n, uint64_t to, size_t mark)
{
	n->host.ops->peer_end(n->host.ctx, to, mark);
}

bool core_peer_connected(struct node *n, uint64_t to)
{
	return n->host.ops->peer_connected(n->host.ctx, to);
}

struct keel_wbuf *core_client_begin(struct node *n, struct node_client *c, size_t *mark)
{
	return n->host.ops->client_begin(n->host.ctx, c, mark);
}

void core_client_end(struct node *n, struct node_client *c, size_t mark)
{
	n->host.ops->client_end(n->host.ctx, c, mark);
}

void core_client_send(struct node *n, struct node_client *c, const void *payload, size_t size)
{
	n->host.ops->client_send(n->host.ctx, c, payload, size);
}

void core_client_pause(struct node *n, struct node_client *c, bool paused)
{
	n->host.ops->client_pause(n->host.ctx, c, paused);
}

void core_client_close(struct node *n, struct node_client *c, enum keel_err reason, bool flush)
{
	n->host.ops->client_close(n->host.ctx, c, reason, flush);
}
