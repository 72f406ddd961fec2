/*
 * client.h — connections on the client port.
 *
 * A new connection's first bytes decide what it is: a four-letter word
 * (answered and closed), an admin connection (first frame starts with
 * ADMIN_MAGIC, see admin.h) or a ZooKeeper client (first frame is a
 * ConnectRequest). ZooKeeper connections are served by the core
 * (core/client_zk.h), which names them by their id.
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
#include "core/client_zk.h"
#include "net/limits.h"
#include "net/net.h"
#include "node/node.h"

enum node_client_mode {
	CLIENT_NEW = 0,
	CLIENT_ZK = 1,
	CLIENT_ADMIN = 2,
	CLIENT_FOUR_LETTER = 3,
};

struct node_client {
	struct net_conn conn;
	struct node *node;
	uint64_t id;
	enum node_client_mode mode;
	uint64_t connected_ms;
	uint64_t packets_received;
	uint64_t packets_sent;
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

enum keel_err node_clients_init(struct node *n, char *err, size_t err_size);
/* Stops accepting and closes every connection (callbacks follow in the
 * loop); node_clients_free() releases the structures once they ran. */
void node_clients_close(struct node *n);
void node_clients_free(struct node *n);

struct node_client *node_client_find(struct node *n, uint64_t id);
size_t node_clients_count(struct node *n);
void node_clients_stats(struct node *n, struct node_client_stats *out);
void node_clients_reset_stats(struct node *n);
/* One line per connection, as ZooKeeper's `cons` (detailed) or `stat`. */
void node_clients_describe(struct node *n, struct keel_wbuf *out, bool detailed);

/* Closes connections past the client port's deadlines (from the tick). */
void node_clients_sweep(struct node *n, uint64_t now_ms);

#endif
