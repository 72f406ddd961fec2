/*
 * feed.h — serving the change feed (zk/zk_feed.h, docs/change-feed.md) to
 * ZooKeeper connections of this server, in the server core (pure; its
 * connections are the ZooKeeper clients' of core/client_zk.c, by id).
 *
 * Every server, leader or follower, records the changes of each
 * transaction it applies in its history (struct zk_feed_log) and streams
 * them from there: a subscription is a position in that history, and
 * catch-up and live changes are the same loop (send from the position
 * while the connection's unsent output is below FEED_HIGH_WATER_BYTES),
 * so there is no switch-over where a change could be lost or repeated.
 *
 * Flow control: a subscriber that does not read stops being sent to (its
 * position waits); the server holds no more for it than the history
 * already holds. When its position falls out of the history (the oldest
 * changes go first once the history passes --feed-retain-bytes, or when a
 * snapshot compacts the log) it gets a final COMPACTED event and its
 * connection is closed; it may resume from its last position wherever
 * that is still held.
 *
 * History bounds on this server: everything after the snapshot it started
 * from or installed, then after (its own snapshot index - the trailing
 * log entries it keeps), and at most --feed-retain-bytes.
 */
#ifndef KEEL_CORE_FEED_H
#define KEEL_CORE_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "zk/zk_acl.h"
#include "zk/zk_state.h"

struct node_core;

/* Unsent output of a subscriber's connection above which the feed waits
 * (the server's; a host may ask for less, as the simulator does so that
 * its slow consumers fall behind within a run). */
#define FEED_HIGH_WATER_BYTES (1u << 20)

/* Creates core->feeds (from zk_clients_open): a history of at most
 * `retain_bytes`, starting after what is applied now; waits on a
 * subscriber above `high_water_bytes` of unsent output (0:
 * FEED_HIGH_WATER_BYTES); frames up to `max_packet_bytes`. */
enum keel_err node_feeds_init(struct node_core *core, uint64_t retain_bytes,
                              uint32_t high_water_bytes, uint32_t max_packet_bytes);
void node_feeds_close(struct node_core *core);

/* A keel feed request (ZK_OP_KEEL_FEED) at its turn in connection `conn`'s
 * order: answers it (ReplyHeader with `xid`) and starts streaming.
 * `peer_addr` is copied (logs); `ids` are the session's identities (for
 * the READ check of each event) and must stay valid until
 * node_feed_on_close(). */
void node_feed_serve(struct node_core *core, uint64_t conn, const char *peer_addr,
                     const struct zk_ids *ids, int32_t xid, const uint8_t *body, size_t size);
/* The connection is going away: drop its subscription. */
void node_feed_on_close(struct node_core *core, uint64_t conn);

/* A transaction was applied at res->zxid (client or system write). */
void node_feed_on_applied(struct node_core *core, const struct zk_result *res);
/* This server took a snapshot at `index` and compacted its log (an input
 * from the host, whose snapshotter took it). */
void node_feed_on_snapshot_taken(struct node_core *core, uint64_t index);
/* The state was replaced by a snapshot from the leader at `index`. */
void node_feed_on_snapshot_installed(struct node_core *core, uint64_t index);
/* An input: the host's turn of its loop while the core asked for it with
 * feed_wait(true) (core.h): sends to subscribers whose output drained. */
void node_feed_pump(struct node_core *core);

/* Figures for the Prometheus gauges. */
struct node_feed_stats {
	uint64_t subscriptions;
	uint64_t history_changes; /* transactions held */
	uint64_t history_bytes;
	int64_t oldest_zxid; /* the oldest start accepted */
};
void node_feed_stats(const struct node_core *core, struct node_feed_stats *out);

#endif
