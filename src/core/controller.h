/*
 * controller.h — the cluster controller inside a server: the glue between
 * the pure controller layer (src/meta) and the server core (Raft, the fsm,
 * the request tracker). Pure like the rest of src/core: it reaches peers,
 * time and the log through the core (core.h), and the ZooKeeper clients
 * through the host's ctl_complete and fire_system until they move in.
 *
 * What lives here, on EVERY server:
 *   - the committed metadata image: each committed NODE_ENTRY_META entry is
 *     decoded and applied to it (node_ctl_apply, for the entries fsm_apply
 *     reports as FSM_APPLIED_META), and its ZooKeeper view (/brokers/...,
 *     /controller, /config/...) is written into the ZooKeeper tree in the
 *     same apply, read-only for clients
 *     (world:anyone:READ), firing watches like any write;
 *   - a bounded ring of the most recent META entries (index + batch bytes)
 *     that FetchMetadata serves; a broker asking for an offset older than
 *     the ring gets an image snapshot instead;
 *   - the keel extension requests on the client port (opcodes
 *     NODE_CTL_OPCODE_BASE + enum meta_api): DescribeCluster and
 *     FetchMetadata are answered from this server's applied state; the
 *     controller APIs are handled here when this server is the active
 *     controller, else forwarded to the Raft leader over the peer link
 *     (a tracked request, core/tracker.h).
 *
 * On the Raft LEADER only, the active controller (struct meta_controller):
 *
 *   NONE --leader, applied every entry of earlier terms--> ACTIVE
 *   ACTIVE --leadership lost / propose failed / own batch ignored--> NONE
 *   (after a failure: rebuilt once applied >= the last proposed index)
 *
 * Each controller decision is ONE Raft entry (envelope kind NODE_ENTRY_META,
 * then the encoded batch). A reply is held until the applied index reaches
 * the last index this controller proposed (a reply describes decisions in
 * flight); if the controller goes away first, held replies are answered
 * NOT_CONTROLLER. A forwarded request's reply travels back to the server the
 * client is connected to, which completes it once ITS applied index has
 * reached the same index (read-your-writes on that server).
 *
 * Errors: a META entry that does not decode (or an image that runs out of
 * memory) stops the server — skipping it would let its image diverge.
 *
 * Ownership: `struct node_ctl` is owned by the core (core->ctl), created by
 * node_ctl_create and freed by node_ctl_destroy. Request bodies passed in
 * are the caller's and are copied when kept.
 */
#ifndef KEEL_CORE_CONTROLLER_H
#define KEEL_CORE_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "meta/controller.h"
#include "meta/image.h"
#include "core/entry.h"
#include "core/core.h"
#include "core/hist.h"

/* Keel extension opcodes on the ZooKeeper client port: base + enum meta_api
 * (1000 BrokerRegistration ... 1008 FetchMetadata). */
#define NODE_CTL_OPCODE_BASE 1000

struct node_ctl;

/* What the controller takes from the server's configuration. */
struct node_ctl_options {
	uint32_t broker_session_timeout_ms;
	uint32_t leader_rebalance_interval_ms;
	uint32_t max_packet_bytes; /* the client port's packet limit */
	/* Optional: the controller's whole configuration instead of the one
	 * derived from the fields above (the simulator draws it). */
	const struct meta_controller_config *config;
};

/* Creates core->ctl. */
enum keel_err node_ctl_create(struct node_core *core, const struct node_ctl_options *o, char *err,
                              size_t err_size);
void node_ctl_destroy(struct node_core *core);

/* ---- the replicated part (applied and snapshotted through core/fsm.h) ---- */

/* Applies a committed META entry at entry->index; on a fatal error sets
 * core->failed. */
void node_ctl_apply(struct node_core *core, const struct raft_entry *entry,
                    const struct node_entry *ne);

/* Streams the committed image (meta_image_save format) for the snapshot. */
typedef enum keel_err (*node_ctl_write_fn)(void *ctx, const void *data, size_t size);
enum keel_err node_ctl_save_image(struct node_core *core, node_ctl_write_fn write, void *ctx);

/* Replaces the committed image with a saved one (data NULL: an empty image,
 * for snapshots without a metadata section). On error the image is kept
 * and `err` says why. */
enum keel_err node_ctl_load_image(struct node_core *core, const uint8_t *data, size_t size,
                                  char *err, size_t err_size);

/* The committed image (read-only; valid until the next apply or load). */
const struct meta_image *node_ctl_image(const struct node_core *core);

/* ---- events from the node ---- */

void node_ctl_after_apply(struct node_core *core);
void node_ctl_tick(struct node_core *core, uint64_t now_ms);
void node_ctl_on_leader_change(struct node_core *core);
/* A controller request forwarded by server `from` (a tracked request,
 * TRACK_META; body: u8 api, then the request body). Answered in a
 * PEER_FRAME_REPLY whose body is i32 ZooKeeper error + response body, with
 * the log index the response depends on as its wait index. */
void node_ctl_on_forward(struct node_core *core, uint64_t from, uint64_t request_id,
                         const uint8_t *body, size_t size);
/* The tracker's callbacks for TRACK_META (ctx: the core; set by node_ctl_create). */
extern const struct tracker_kind_ops node_ctl_track_ops;

/* ---- extension requests (called from client_zk.c) ---- */

/* Is `opcode` a keel extension opcode this server knows? */
bool node_ctl_opcode_known(int32_t opcode);
/* Is it answered from local state (DescribeCluster, FetchMetadata)? */
bool node_ctl_opcode_is_read(int32_t opcode);
/* True for the requests only brokers and operators send — registration,
 * heartbeats, unregistering a broker, AlterPartition, ElectLeaders, AllocateProducerIds: a
 * session must first prove the cluster credential (addauth "keel",
 * node/peer_auth.h) or be super, else it gets NoAuth. Topic and config
 * requests stay open to any client, as a Kafka cluster without an
 * authorizer leaves them. */
bool node_ctl_opcode_needs_cluster(int32_t opcode);
/* The API's name ("BrokerHeartbeat"), for logs; "?" for others. */
const char *node_ctl_opcode_name(int32_t opcode);

/* Serves a read: appends the response body to `out`; returns the
 * ZooKeeper error for the reply header (0, or ZMARSHALLINGERROR for a body
 * that does not decode, ZUNIMPLEMENTED for a newer body version). */
int32_t node_ctl_serve_read(struct node_core *core, int32_t opcode, const uint8_t *body,
                            size_t size, struct keel_wbuf *out);

/* Starts a controller request of a client of this server. The answer comes
 * later through core_ctl_complete(core, request_id, ...), exactly once
 * (unless the server shuts down first). */
void node_ctl_submit(struct node_core *core, uint64_t request_id, int32_t opcode,
                     const uint8_t *body, size_t size);

/* Whether this server runs the active controller (it leads and its
 * controller has started). */
bool node_ctl_active(const struct node_core *core);

/* The metadata offset broker `id` last reported to this server's active
 * controller, or -1 (not active, no session or no heartbeat yet). */
int64_t node_ctl_broker_offset(const struct node_core *core, int32_t id);

/* For the simulator's checkers: what applying the last META entry did
 * (records ignored), and the active controller — NULL when there is none —
 * with the index of its last proposal. */
void node_ctl_last_apply(const struct node_core *core, struct meta_apply_result *out);
const struct meta_controller *node_ctl_controller(const struct node_core *core,
                                                  uint64_t *last_proposed_index);

/* Latency of controller requests on this server's active controller:
 * taken -> answer released (decided, committed, applied). */
const struct metrics_hist *node_ctl_request_latency(const struct node_core *core);

#endif
