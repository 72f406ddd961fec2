/*
 * core.c — the server core's side of core.h: its own fields, the effect
 * shorthands (each a call through the host's table) and the seed every
 * pseudo-random choice derives from.
 */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"
#include "base/rng.h"
#include "core/fsm.h"
#include "core/membership.h"

void core_init(struct node_core *c, uint64_t id, const struct core_host *host, uint64_t seed)
{
	const struct core_host_ops *ops = host->ops;
	KEEL_ASSERT(ops != NULL);
	/* What the ready loop and its inputs call; the client effects are
	 * checked where they are used. */
	KEEL_ASSERT(ops->persist != NULL);
	KEEL_ASSERT(ops->peer_begin != NULL);
	KEEL_ASSERT(ops->peer_end != NULL);
	KEEL_ASSERT(ops->now_ms != NULL);
	KEEL_ASSERT(ops->mono_ns != NULL);
	KEEL_ASSERT(ops->log != NULL);
	KEEL_ASSERT(ops->snapshot_read != NULL);
	KEEL_ASSERT(ops->snapshot_load != NULL);
	KEEL_ASSERT(ops->schedule_drive != NULL);
	KEEL_ASSERT(ops->on_failed != NULL);
	KEEL_ASSERT(ops->book_changed != NULL);
	KEEL_ASSERT(ops->maybe_snapshot != NULL);
	memset(c, 0, sizeof(*c));
	c->host = *host;
	c->id = id;
	c->seed_state = seed;
	keel_list_init(&c->waiters);
	keel_list_init(&c->done);
	keel_list_init(&c->admin_reqs);
}

enum keel_err core_open(struct node_core *c, const struct core_options *o, char *err,
                        size_t err_size)
{
	if (o->raft != NULL) {
		c->raft_opts = *o->raft;
	} else {
		raft_options_default(&c->raft_opts);
	}
	c->raft_opts.id = c->id;
	keel_rng_seed(&c->raft_opts.rng, core_seed_next(c));
	c->raft_opts.election_timeout_ms = o->election_timeout_ms;
	/* Request ids start at random: they travel in log entries (origin,
	 * request id) and find their waiting request when the entry is
	 * applied -- also entries this server proposed before it restarted,
	 * replayed from its log or committed late by the leader. Starting at
	 * 1 in every process matched those old entries to new requests (a
	 * reconnecting client got another session's ConnectResponse). A
	 * random 63-bit start makes the ranges of two process lives overlap
	 * with negligible probability. */
	struct tracker_policy policy = {tracker_leader_wait_ms(o->election_timeout_ms)};
	uint64_t start = core_seed_next(c);
	enum keel_err rc = tracker_init(&c->tracker, &policy, (start >> 1) | 1u);
	if (rc != KEEL_OK) {
		keel_fmt(err, err_size, "out of memory");
		return rc;
	}
	struct tracker_kind_ops admin_ops = admin_track_ops;
	admin_ops.ctx = c;
	tracker_set_kind(&c->tracker, TRACK_ADMIN, &admin_ops);
	c->raft_opts.heartbeat_interval_ms = o->heartbeat_ms;
	c->raft_opts.snapshot_chunk_bytes = o->snapshot_chunk_bytes;
	c->raft_opts.snapshot_trailing_entries = o->snapshot_trailing;
	c->raft_opts.max_entry_bytes = o->max_entry_bytes;
	raft_options_msg_limits(&c->raft_opts, &c->msg_limits);
	c->decode_entries = calloc(c->msg_limits.max_entries, sizeof(struct raft_entry));
	c->snapshot_chunk_buf = malloc(o->snapshot_chunk_bytes);
	if (c->decode_entries == NULL || c->snapshot_chunk_buf == NULL) {
		keel_fmt(err, err_size, "out of memory");
		return KEEL_NOMEM;
	}
	rc = raft_init(&c->raft, &c->raft_opts);
	if (rc != KEEL_OK) {
		keel_fmt(err, err_size, "invalid Raft options (%s)", keel_strerror(rc));
		return rc;
	}
	rc = fsm_create(o->zk_config, o->image, &c->fsm);
	if (rc != KEEL_OK) {
		keel_fmt(err, err_size, "cannot create the state machine (%s)", keel_strerror(rc));
		return rc;
	}
	return KEEL_OK;
}

void core_close(struct node_core *c)
{
	if (c->raft != NULL) {
		raft_close(c->raft);
		c->raft = NULL;
	}
	tracker_close(&c->tracker);
	if (c->fsm != NULL) {
		fsm_destroy(c->fsm);
		c->fsm = NULL;
	}
	free(c->decode_entries);
	c->decode_entries = NULL;
	free(c->snapshot_chunk_buf);
	c->snapshot_chunk_buf = NULL;
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

struct keel_wbuf *core_client_begin(struct node_core *c, uint64_t conn, size_t *mark)
{
	return c->host.ops->client_begin(c->host.ctx, conn, mark);
}

void core_client_end(struct node_core *c, uint64_t conn, size_t mark)
{
	c->host.ops->client_end(c->host.ctx, conn, mark);
}

void core_client_send(struct node_core *c, uint64_t conn, const void *payload, size_t size)
{
	c->host.ops->client_send(c->host.ctx, conn, payload, size);
}

void core_client_pause(struct node_core *c, uint64_t conn, bool paused)
{
	c->host.ops->client_pause(c->host.ctx, conn, paused);
}

void core_client_close(struct node_core *c, uint64_t conn, enum keel_err reason, bool flush)
{
	c->host.ops->client_close(c->host.ctx, conn, reason, flush);
}

bool core_client_paused(const struct node_core *c, uint64_t conn)
{
	return c->host.ops->client_paused(c->host.ctx, conn);
}
