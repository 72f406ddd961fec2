/*
 * feed.h — serving the change feed (zk/zk_feed.h, docs/change-feed.md) to
 * ZooKeeper connections of this server.
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
#ifndef KEEL_NODE_FEED_H
#define KEEL_NODE_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "zk/zk_acl.h"
#include "zk/zk_state.h"

struct node;
struct node_client;

/* Unsent output of a subscriber's connection above which the feed waits. */
#define FEED_HIGH_WATER_BYTES (1u << 20)

enum keel_err node_feeds_init(struct node *n);
void node_feeds_close(struct node *n);

/* A keel feed request (ZK_OP_KEEL_FEED) at its turn in the connection's
 * order: answers it (ReplyHeader with `xid`) and starts streaming. `ids`
 * are the session's identities (for the READ check of each event); they
 * must stay valid until node_feed_on_close(). */
void node_feed_serve(struct node *n, struct node_client *c, const struct zk_ids *ids, int32_t xid,
		     const uint8_t *body, size_t size);
/* The connection is going away: drop its subscription. */
void node_feed_on_close(struct node *n, struct node_client *c);

/* A transaction was applied at res->zxid (client or system write). */
void node_feed_on_applied(struct node *n, const struct zk_result *res);
/* This server took a snapshot at `index` and compacted its log. */
void node_feed_on_snapshot_taken(struct node *n, uint64_t index);
/* The state was replaced by a snapshot from the leader at `index`. */
void node_feed_on_snapshot_installed(struct node *n, uint64_t index);

/* Prometheus gauges: subscriptions, the history's size and oldest start. */
void node_feed_metrics(struct node *n, struct keel_wbuf *w);

#endif
