/*
 * client_zk.c — placeholder until the ZooKeeper layer (src/zk) lands: a
 * ZooKeeper client is told nothing and disconnected, with a log line.
 */
#include "node/client_zk.h"

#include "os/log.h"

enum keel_err zk_clients_init(struct node *n, char *err, size_t err_size)
{
	(void)n;
	(void)err;
	(void)err_size;
	return KEEL_OK;
}

void zk_clients_close(struct node *n)
{
	(void)n;
}

bool zk_conn_on_connect_frame(struct node *n, struct node_client *c, const uint8_t *payload,
			      size_t size)
{
	(void)n;
	(void)payload;
	(void)size;
	KEEL_WARN("client %s: the ZooKeeper protocol is not served yet", c->conn.peer_addr);
	net_conn_close(&c->conn, KEEL_UNSUPPORTED, false);
	return false;
}

bool zk_conn_on_frame(struct node *n, struct node_client *c, const uint8_t *payload, size_t size)
{
	return zk_conn_on_connect_frame(n, c, payload, size);
}

void zk_conn_on_close(struct node *n, struct node_client *c)
{
	(void)n;
	(void)c;
}

void zk_conn_describe(struct node *n, struct node_client *c, struct keel_wbuf *out, bool detailed)
{
	(void)n;
	(void)c;
	(void)out;
	(void)detailed;
}

void zk_clients_stats(struct node *n, struct node_client_stats *out)
{
	(void)n;
	(void)out;
}

void zk_clients_reset_stats(struct node *n)
{
	(void)n;
}

void zk_clients_on_leader_change(struct node *n, uint64_t old_leader, uint64_t new_leader)
{
	(void)n;
	(void)old_leader;
	(void)new_leader;
}

void zk_clients_on_reads(struct node *n, const struct raft_read_result *reads, size_t count)
{
	(void)n;
	(void)reads;
	(void)count;
}

void zk_clients_on_peer_frame(struct node *n, uint64_t from, uint8_t type, const uint8_t *body,
			      size_t size)
{
	(void)n;
	(void)from;
	(void)type;
	(void)body;
	(void)size;
}

void zk_clients_tick(struct node *n, uint64_t now_ms)
{
	(void)n;
	(void)now_ms;
}

void zk_clients_after_apply(struct node *n)
{
	(void)n;
}

void zk_clients_on_snapshot_installed(struct node *n)
{
	(void)n;
}
