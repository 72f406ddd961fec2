/*
 * client.h — connections on the client port.
 *
 * A new connection's first bytes decide what it is: a four-letter word
 * (answered and closed), an admin connection (first frame starts with
 * ADMIN_MAGIC, see admin.h) or a ZooKeeper client (first frame is a
 * ConnectRequest). ZooKeeper connections are served in client_zk.c.
 *
 * Connections are found by id (never by pointer across callbacks), so a
 * reply for a connection that has gone away is simply dropped.
 */
#ifndef KEEL_NODE_CLIENT_H
#define KEEL_NODE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "net/limits.h"
#include "net/net.h"
#include "node/node.h"

enum node_client_mode {
	CLIENT_NEW = 0,
	CLIENT_ZK = 1,
	CLIENT_ADMIN = 2,
	CLIENT_FOUR_LETTER = 3,
};

struct zk_conn; /* the ZooKeeper side of a connection (client_zk.c) */

struct node_client {
	struct net_conn conn;
	struct node *node;
	uint64_t id;
	enum node_client_mode mode;
	uint64_t connected_ms;
	uint64_t packets_received;
	uint64_t packets_sent;
	struct zk_conn *zk;
	/* Admin connections (admin_auth.c): an authenticated operator, and
	 * the nonce of the last AUTH_NONCE (good for one AUTH). */
	bool operator_authenticated;
	bool admin_nonce_valid;
	uint8_t admin_nonce[32];
	struct net_ip ip;   /* source address, counted in limits.per_ip ... */
	bool admitted;      /* ... when admitted (node_limits_admit) */
	struct node_client *prev;
	struct node_client *next;
};

struct node_client_stats {
	uint64_t packets_received;
	uint64_t packets_sent;
	uint64_t outstanding;
	uint64_t latency_min_ms;
	uint64_t latency_max_ms;
	double latency_avg_ms;
	uint64_t watches;
	uint64_t watched_paths;
};

enum keel_err node_clients_init(struct node *n, char *err, size_t err_size);
/* Stops accepting and closes every connection (callbacks follow in the
 * loop); node_clients_free() releases the structures once they ran. */
void node_clients_close(struct node *n);
void node_clients_free(struct node *n);

struct node_client *node_client_find(struct node *n, uint64_t id);
/* First of all open connections (follow ->next). */
struct node_client *node_clients_head(struct node *n);
size_t node_clients_count(struct node *n);
void node_clients_stats(struct node *n, struct node_client_stats *out);
void node_clients_reset_stats(struct node *n);
/* One line per connection, as ZooKeeper's `cons` (detailed) or `stat`. */
void node_clients_describe(struct node *n, struct keel_wbuf *out, bool detailed);

/* Hooks from the node. */
void node_clients_on_leader_change(struct node *n, uint64_t old_leader, uint64_t new_leader);
void node_clients_on_reads(struct node *n, const struct raft_read_result *reads, size_t count);
void node_clients_on_peer_frame(struct node *n, uint64_t from, uint8_t type, const uint8_t *body,
				size_t size);
void node_clients_tick(struct node *n, uint64_t now_ms);
void node_clients_after_apply(struct node *n);
void node_clients_on_snapshot_installed(struct node *n);

#endif
