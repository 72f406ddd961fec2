/*
 * client.c — the client port: accept, classify, four-letter words, admin
 * connections, the connection table. ZooKeeper sessions: client_zk.c.
 * The secure client port (--secure-listen) is the same port inside TLS:
 * its connections differ only in their net_conn_config.
 */
#include "node/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "node/admin.h"
#include "os/log.h"

struct node_clients {
	uv_tcp_t listener;
	bool listening;
	struct node_client *head;
	size_t count;
	uint64_t next_id;
	struct keel_hmap by_id;
	struct net_conn_config cfg;
	uv_tcp_t secure_listener;
	bool secure_listening;
	struct net_conn_config secure_cfg; /* cfg with the client TLS context */
	uint64_t closed_packets_received;
	uint64_t closed_packets_sent;
};

static bool client_eq(const void *item, const void *key)
{
	return ((const struct node_client *)item)->id == *(const uint64_t *)key;
}

struct node_client *node_client_find(struct node *n, uint64_t id)
{
	if (n->clients == NULL || id == 0) {
		return NULL;
	}
	struct node_client *c =
	        keel_hmap_find(&n->clients->by_id, keel_hash_u64(id), client_eq, &id);
	return c != NULL && !c->conn.closing ? c : NULL;
}

size_t node_clients_count(struct node *n)
{
	return n->clients != NULL ? n->clients->count : 0;
}

static bool on_bad_prefix(struct net_conn *conn, const uint8_t prefix[4])
{
	struct node_client *c = conn->user;
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 1024, 16u << 20);
	if (!admin_four_letter(c->node, (const char *)prefix, &out)) {
		keel_wbuf_free(&out);
		return false; /* not a word we know: treated as a bad length */
	}
	c->mode = CLIENT_FOUR_LETTER;
	net_conn_send_raw(conn, out.data, out.size);
	keel_wbuf_free(&out);
	net_conn_close(conn, KEEL_OK, true);
	return true;
}

/* Hands a ZooKeeper connection to the core, with what it keeps of the
 * socket: the peer address and the certificate's subject on a TLS port. */
static void open_zk(struct node *n, struct node_client *c)
{
	char dn[512];
	bool has_dn = net_conn_tls_subject(&c->conn, dn, sizeof(dn));
	zk_conn_open(&n->core, c->id, c->conn.peer_addr, has_dn ? dn : NULL);
}

static bool on_frame(struct net_conn *conn, const uint8_t *payload, size_t size)
{
	struct node_client *c = conn->user;
	struct node *n = c->node;
	c->packets_received++;
	if (c->mode == CLIENT_NEW) {
		if (size >= 4 && keel_load_be32(payload) == ADMIN_MAGIC) {
			c->mode = CLIENT_ADMIN;
		} else {
			c->mode = CLIENT_ZK;
			open_zk(n, c);
		}
	}
	if (c->mode == CLIENT_ADMIN) {
		admin_on_frame(n, c, payload, size);
		return !conn->closing;
	}
	return zk_conn_on_frame(&n->core, c->id, payload, size);
}

static void on_close(struct net_conn *conn, enum keel_err reason)
{
	struct node_client *c = conn->user;
	struct node *n = c->node;
	struct node_clients *cl = n->clients;
	if (reason != KEEL_OK && reason != KEEL_SHUTDOWN && c->mode != CLIENT_FOUR_LETTER) {
		KEEL_DEBUG("client %s closed: %s", conn->peer_addr, keel_strerror(reason));
	}
	if (c->mode == CLIENT_ADMIN) {
		admin_on_conn_closed(&n->core, c->id);
	}
	if (c->mode == CLIENT_ZK) {
		zk_conn_on_close(&n->core, c->id);
	}
	if (c->admitted) {
		node_limits_release(&n->limits, &c->ip);
	}
	keel_hmap_remove_item(&cl->by_id, keel_hash_u64(c->id), c);
	if (c->prev != NULL) {
		c->prev->next = c->next;
	} else {
		cl->head = c->next;
	}
	if (c->next != NULL) {
		c->next->prev = c->prev;
	}
	cl->count--;
	cl->closed_packets_received += c->packets_received;
	cl->closed_packets_sent += c->packets_sent;
	free(c);
}

static const struct net_conn_ops client_ops = {on_frame, on_bad_prefix, on_close};

static void on_connection(uv_stream_t *server, int status)
{
	struct node *n = server->data;
	struct node_clients *cl = n->clients;
	if (status != 0 || n->stopping) {
		return;
	}
	struct node_client *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		return;
	}
	c->node = n;
	c->id = cl->next_id++;
	c->connected_ms = node_now_ms(n);
	if (keel_hmap_insert(&cl->by_id, keel_hash_u64(c->id), c) != KEEL_OK) {
		free(c);
		return;
	}
	c->next = cl->head;
	if (cl->head != NULL) {
		cl->head->prev = c;
	}
	cl->head = c;
	cl->count++;
	n->core.stats.client_connections_total++;
	bool secure = server == (uv_stream_t *)&cl->secure_listener;
	net_conn_accept(&c->conn, &n->nl, server, secure ? &cl->secure_cfg : &cl->cfg, &client_ops,
			c);
	if (c->conn.closing) {
		return;
	}
	/* Accept-and-close past a limit: the backlog drains, nothing spins. */
	net_tcp_peer_ip(&c->conn.tcp, &c->ip);
	c->admitted = node_limits_admit(&n->limits, &n->cfg, &c->conn.tcp, &c->ip, cl->count,
					c->conn.peer_addr);
	if (!c->admitted) {
		net_conn_close(&c->conn, KEEL_LIMIT, false);
	}
}

/* Deadlines of the client port, checked a few times a second: a connection
 * that has not sent its whole first frame connect_timeout_ms after accept,
 * or has left any frame unfinished for frame_timeout_ms, is closed. */
static void sweep_deadlines(struct node *n, uint64_t now_ms)
{
	struct node_limits *l = &n->limits;
	if (now_ms < l->last_sweep_ms + 100u) {
		return;
	}
	l->last_sweep_ms = now_ms;
	for (struct node_client *c = n->clients->head; c != NULL; c = c->next) {
		if (c->conn.closing) {
			continue;
		}
		if (n->cfg.connect_timeout_ms != 0 && c->mode == CLIENT_NEW &&
		    now_ms >= c->connected_ms + n->cfg.connect_timeout_ms) {
			l->connect_timeouts++;
			KEEL_DEBUG("client %s closed: no complete first frame in %u ms",
				   c->conn.peer_addr, n->cfg.connect_timeout_ms);
			net_conn_close(&c->conn, KEEL_TIMEOUT, false);
		} else if (n->cfg.frame_timeout_ms != 0 &&
			   net_conn_frame_overdue(&c->conn, now_ms, n->cfg.frame_timeout_ms)) {
			l->frame_timeouts++;
			KEEL_DEBUG("client %s closed: a frame unfinished for %u ms",
				   c->conn.peer_addr, n->cfg.frame_timeout_ms);
			net_conn_close(&c->conn, KEEL_TIMEOUT, false);
		}
	}
}

enum keel_err node_clients_init(struct node *n, char *err, size_t err_size)
{
	struct node_clients *cl = calloc(1, sizeof(*cl));
	if (cl == NULL) {
		return KEEL_NOMEM;
	}
	n->clients = cl;
	cl->next_id = 1;
	keel_hmap_init(&cl->by_id, 64);
	cl->cfg.max_frame_bytes = n->cfg.max_packet_bytes;
	cl->cfg.max_output_bytes = 64u * n->cfg.max_packet_bytes;
	cl->cfg.checksummed = false;
	cl->cfg.read_budget = &n->limits.read_budget;
	cl->cfg.output_budget = &n->limits.output_budget;
	cl->cfg.max_frames_per_turn = n->cfg.client_frames_per_turn;
	cl->cfg.max_output_per_turn = n->cfg.client_output_per_turn_bytes;
	const struct node_config *cfg = &n->cfg;
	struct zk_clients_options zo = {
		.max_packet_bytes = cfg->max_packet_bytes,
		.max_pending_per_connection = cfg->max_pending_per_connection,
		.max_watches_per_connection = cfg->max_watches_per_connection,
		.max_watch_bytes_per_connection = cfg->max_watch_bytes_per_connection,
		.housekeeping_ms = cfg->housekeeping_ms,
		.feed_retain_bytes = cfg->feed_retain_bytes,
		.no_read_only = cfg->no_read_only,
		.insecure_peers = cfg->insecure_peers,
		.sasl_users = n->sasl_users,
	};
	_Static_assert(sizeof(zo.super_digest) == sizeof(cfg->super_digest), "one size");
	_Static_assert(sizeof(zo.sasl_super_user) == sizeof(cfg->sasl_super_user), "one size");
	_Static_assert(sizeof(zo.x509_super_user) == sizeof(cfg->x509_super_user), "one size");
	memcpy(zo.super_digest, cfg->super_digest, sizeof(zo.super_digest));
	memcpy(zo.sasl_super_user, cfg->sasl_super_user, sizeof(zo.sasl_super_user));
	memcpy(zo.x509_super_user, cfg->x509_super_user, sizeof(zo.x509_super_user));
	enum keel_err rc = zk_clients_open(&n->core, &zo, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}

	rc = net_listen(&cl->listener, n->loop, n->cfg.listen, on_connection, n, err, err_size);
	if (rc != KEEL_OK) {
		return rc;
	}
	cl->listening = true;
	if (n->client_tls != NULL) {
		cl->secure_cfg = cl->cfg;
		cl->secure_cfg.tls = n->client_tls;
		rc = net_listen(&cl->secure_listener, n->loop, n->cfg.secure_listen, on_connection,
		                n, err, err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
		cl->secure_listening = true;
		KEEL_INFO("secure client port (TLS) on %s%s", n->cfg.secure_listen,
			  n->cfg.tls_ca[0] != '\0' ? ", client certificates give the x509 identity"
						   : "");
	}
	return KEEL_OK;
}

void node_clients_close(struct node *n)
{
	struct node_clients *cl = n->clients;
	if (cl == NULL) {
		return;
	}
	if (cl->listening) {
		uv_close((uv_handle_t *)&cl->listener, NULL);
		cl->listening = false;
	}
	if (cl->secure_listening) {
		uv_close((uv_handle_t *)&cl->secure_listener, NULL);
		cl->secure_listening = false;
	}
	for (struct node_client *c = cl->head; c != NULL; c = c->next) {
		net_conn_close(&c->conn, KEEL_SHUTDOWN, true);
	}
}

void node_clients_free(struct node *n)
{
	struct node_clients *cl = n->clients;
	if (cl == NULL) {
		return;
	}
	KEEL_ASSERT(cl->count == 0); /* every connection's on_close has run */
	zk_clients_close(&n->core);
	keel_hmap_close(&cl->by_id);
	free(cl);
	n->clients = NULL;
}

void node_clients_stats(struct node *n, struct node_client_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct node_clients *cl = n->clients;
	if (cl == NULL) {
		return;
	}
	out->packets_received = cl->closed_packets_received;
	out->packets_sent = cl->closed_packets_sent;
	for (struct node_client *c = cl->head; c != NULL; c = c->next) {
		out->packets_received += c->packets_received;
		out->packets_sent += c->packets_sent;
	}
	zk_clients_stats(&n->core, out);
}

void node_clients_reset_stats(struct node *n)
{
	struct node_clients *cl = n->clients;
	if (cl == NULL) {
		return;
	}
	cl->closed_packets_received = 0;
	cl->closed_packets_sent = 0;
	for (struct node_client *c = cl->head; c != NULL; c = c->next) {
		c->packets_received = 0;
		c->packets_sent = 0;
	}
	zk_clients_reset_stats(&n->core);
}

void node_clients_describe(struct node *n, struct keel_wbuf *out, bool detailed)
{
	struct node_clients *cl = n->clients;
	if (cl == NULL) {
		return;
	}
	for (struct node_client *c = cl->head; c != NULL; c = c->next) {
		if (c->mode != CLIENT_ZK) {
			continue;
		}
		zk_conn_describe(&n->core, c->id, out, detailed, c->packets_received,
				 c->packets_sent, c->connected_ms);
	}
}

void node_clients_sweep(struct node *n, uint64_t now_ms)
{
	if (n->clients != NULL) {
		sweep_deadlines(n, now_ms);
	}
}
