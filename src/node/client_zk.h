/*
 * client_zk.h — serving ZooKeeper clients: sessions, requests, watches.
 *
 * Called by client.c for connections that speak the ZooKeeper protocol and
 * by the node for Raft events that concern them (applied entries, read
 * indexes, leader changes, forwarded requests on peer links).
 */
#ifndef KEEL_NODE_CLIENT_ZK_H
#define KEEL_NODE_CLIENT_ZK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "node/client.h"
#include "core/entry.h"
#include "node/node.h"

enum keel_err zk_clients_init(struct node *n, char *err, size_t err_size);
void zk_clients_close(struct node *n);

/* The first frame of a ZooKeeper connection (a ConnectRequest). */
bool zk_conn_on_connect_frame(struct node *n, struct node_client *c, const uint8_t *payload,
			      size_t size);
bool zk_conn_on_frame(struct node *n, struct node_client *c, const uint8_t *payload, size_t size);
void zk_conn_on_close(struct node *n, struct node_client *c);
void zk_conn_describe(struct node *n, struct node_client *c, struct keel_wbuf *out, bool detailed);

/* No leader is known: `isro` answers "ro" (read-only mode serves reads
 * only, and writes wait for a leader). */
bool zk_clients_read_only(struct node *n);
void zk_clients_stats(struct node *n, struct node_client_stats *out);
void zk_clients_reset_stats(struct node *n);
void zk_clients_on_leader_change(struct node *n, uint64_t old_leader, uint64_t new_leader);
void zk_clients_on_reads(struct node *n, const struct raft_read_result *reads, size_t count);
/* PEER_FRAME_SESSION_TOUCH from a follower; PEER_FRAME_SESSION_MOVED from a
 * server where a session of ours was resumed. */
void zk_clients_on_peer_frame(struct node *n, uint64_t from, uint8_t type, const uint8_t *body,
			      size_t size);
/* A write forwarded by server `from` (a tracked request, TRACK_ZK_WRITE):
 * proposed when this server leads, else refused in a PEER_FRAME_REPLY. */
void zk_clients_on_forward(struct node *n, uint64_t from, uint64_t request_id,
			   const uint8_t *body, size_t size);
/* The tracker's callbacks for TRACK_ZK_WRITE (ctx: the node). */
extern const struct tracker_kind_ops zk_write_track_ops;
void zk_clients_tick(struct node *n, uint64_t now_ms);
void zk_clients_after_apply(struct node *n);

struct zk_result;
/* A ZooKeeper txn was applied at res->zxid: fire watches, answer the
 * waiting client if it is ours, close expired sessions' connections. */
void zk_clients_on_applied(struct node *n, const struct node_entry *ne,
			   const struct zk_result *res);
/* A txn from this server could not be decoded: fail its request. */
void zk_clients_on_apply_failed(struct node *n, const struct node_entry *ne);
void zk_clients_on_snapshot_installed(struct node *n);

/* Keel extension requests (core/controller.h): answers the controller
 * request `request_id` of a client of this server (dropped if it is gone),
 * with ReplyHeader.err `err` and, when err is 0, `body`. */
void zk_clients_ext_complete(struct node *n, uint64_t request_id, int32_t err,
			     const uint8_t *body, size_t size);
/* One step of a ZooKeeper reconfig (admin_member_change_for_zk) ended. */
void zk_clients_reconfig_step_done(struct node *n, uint64_t request_id, enum keel_err err,
				   const char *msg);
/* Fires the watch triggers of a system write (the metadata view). */
void zk_clients_fire_system(struct node *n, const struct zk_result *res);

#endif
