/*
 * client_zk.h — serving ZooKeeper clients in the server core: sessions,
 * requests, watches, forwarding writes to the leader, reconfig, read-only
 * mode, SASL DIGEST-MD5 and SessionMoved (client_zk.c). Pure like the rest
 * of src/core.
 *
 * The core keeps its own state for each ZooKeeper connection (its id, the
 * peer address copied when it was opened, its identities, FIFO and
 * watches); the host only owns the socket. A connection is named by the
 * host's 64-bit id (never 0) in both directions: the host calls the
 * inputs below, and everything the core does to a connection goes through
 * the client_* effects of core.h with that id.
 *
 * Inputs from the host (one thread, as every core input):
 *   zk_conn_open      a connection on the client port turned out to speak
 *                     ZooKeeper (its first frame is a ConnectRequest);
 *   zk_conn_on_frame  a frame of it (the first one included); returns
 *                     whether the host should go on reading its frames now;
 *   zk_conn_on_close  it is gone (after the core's client_close, or the
 *                     peer hung up): the core forgets it.
 * The ready loop (core/drive.c) calls the other entries below directly.
 */
#ifndef KEEL_CORE_CLIENT_ZK_H
#define KEEL_CORE_CLIENT_ZK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "core/core.h"
#include "core/entry.h"

struct sasl_users;
struct zk_result;

/* The addauth scheme of the session credential (the cluster secret's HMAC
 * over the session, node/peer_auth.h; checked by the host's
 * session_proof_ok effect). */
#define CORE_ZK_CLUSTER_SCHEME "keel"

/* What the ZooKeeper clients take from the server's configuration. */
struct zk_clients_options {
	uint32_t max_packet_bytes;           /* jute.maxbuffer */
	uint32_t max_pending_per_connection; /* reading pauses past it */
	uint32_t max_watches_per_connection;
	uint64_t max_watch_bytes_per_connection; /* 0: unlimited */
	uint32_t housekeeping_ms;                /* container/TTL scan interval */
	uint64_t feed_retain_bytes;              /* the change feed's history (core/feed.h) */
	uint32_t feed_high_water_bytes; /* a subscriber's unsent output the feed waits
	                                 * above; 0: FEED_HIGH_WATER_BYTES (the server) */
	bool no_read_only;                       /* readonlymode.enabled=false */
	bool insecure_peers;                     /* no cluster secret: no credential asked */
	char super_digest[256];                  /* "super:BASE64" or empty */
	char sasl_super_user[256];               /* the SASL user that is super, or empty */
	char x509_super_user[512];               /* the certificate DN that is super, or empty */
	/* The SASL DIGEST-MD5 users (loaded by the host), or NULL: no
	 * mechanism. Borrowed for the core's life. */
	const struct sasl_users *sasl_users;
};

/* Statistics of the ZooKeeper clients (mntr, srvr, /metrics). The packet
 * counts are the host's (it counts frames on its sockets). */
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

/* Creates core->zk_server (after core_open); zk_clients_close frees it
 * once every connection is closed. */
enum keel_err zk_clients_open(struct node_core *core, const struct zk_clients_options *o, char *err,
                              size_t err_size);
void zk_clients_close(struct node_core *core);

/* ---- inputs from the host ---- */

/* Connection `conn` speaks ZooKeeper: `peer_addr` ("HOST:PORT", copied)
 * gives its ip identity, `tls_subject` (NULL: none) the DN of the client
 * certificate it proved on a TLS port (its x509 identity). On error the
 * connection is closed through client_close. */
void zk_conn_open(struct node_core *core, uint64_t conn, const char *peer_addr,
                  const char *tls_subject);
bool zk_conn_on_frame(struct node_core *core, uint64_t conn, const uint8_t *payload, size_t size);
void zk_conn_on_close(struct node_core *core, uint64_t conn);
/* One line about connection `conn` for `cons` (detailed) or `stat`, with
 * the host's counters of its frames and the time it was accepted. */
void zk_conn_describe(struct node_core *core, uint64_t conn, struct keel_wbuf *out, bool detailed,
                      uint64_t packets_received, uint64_t packets_sent, uint64_t connected_ms);

/* No leader is known: `isro` answers "ro" (read-only mode serves reads
 * only, and writes wait for a leader). */
bool zk_clients_read_only(const struct node_core *core);
/* Fills the fields of `out` other than the packet counts. */
void zk_clients_stats(const struct node_core *core, struct node_client_stats *out);
void zk_clients_reset_stats(struct node_core *core);

/* ---- from the ready loop and the other core parts ---- */

void zk_clients_on_leader_change(struct node_core *core, uint64_t old_leader, uint64_t new_leader);
void zk_clients_on_reads(struct node_core *core, const struct raft_read_result *reads,
                         size_t count);
/* PEER_FRAME_SESSION_TOUCH from a follower; PEER_FRAME_SESSION_MOVED from a
 * server where a session of ours was resumed. */
void zk_clients_on_peer_frame(struct node_core *core, uint64_t from, uint8_t type,
                              const uint8_t *body, size_t size);
/* A write forwarded by server `from` (a tracked request, TRACK_ZK_WRITE):
 * proposed when this server leads, else refused in a PEER_FRAME_REPLY. */
void zk_clients_on_forward(struct node_core *core, uint64_t from, uint64_t request_id,
                           const uint8_t *body, size_t size);
/* The tracker's callbacks for TRACK_ZK_WRITE (ctx: the core; set by zk_clients_open). */
extern const struct tracker_kind_ops zk_write_track_ops;
void zk_clients_tick(struct node_core *core, uint64_t now_ms);
void zk_clients_after_apply(struct node_core *core);

/* A ZooKeeper txn was applied at res->zxid: fire watches, answer the
 * waiting client if it is ours, close expired sessions' connections. */
void zk_clients_on_applied(struct node_core *core, const struct node_entry *ne,
                           const struct zk_result *res);
#ifdef KEEL_PLANT_BUG_REPLY_BEFORE_APPLY
/* The leader's word on a forwarded write it applied (client_zk.c): true
 * when it answered a client of this server. */
bool zk_clients_on_leader_result(struct node_core *core, const struct tracker_reply *hdr,
				 const uint8_t *body, size_t size);
#endif
/* A txn from this server could not be decoded: fail its request. */
void zk_clients_on_apply_failed(struct node_core *core, const struct node_entry *ne);
void zk_clients_on_snapshot_installed(struct node_core *core);

/* Keel extension requests (core/controller.h): answers the controller
 * request `request_id` of a client of this server (dropped if it is gone),
 * with ReplyHeader.err `err` and, when err is 0, `body`. */
void zk_clients_ext_complete(struct node_core *core, uint64_t request_id, int32_t err,
                             const uint8_t *body, size_t size);
/* One step of a ZooKeeper reconfig (a membership change) ended. */
void zk_clients_reconfig_step_done(struct node_core *core, uint64_t request_id, enum keel_err err,
                                   const char *msg);
/* Fires the watch triggers of a system write (the metadata view). */
void zk_clients_fire_system(struct node_core *core, const struct zk_result *res);

#endif
