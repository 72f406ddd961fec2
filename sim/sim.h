/*
 * sim.h — the deterministic cluster simulator (keel-sim).
 *
 * One process, one thread: N servers — the real server core (src/core,
 * through host.c) — wired to a simulated network, the real WAL over
 * simulated disks (disk.h) and per-node clocks, all driven by one
 * seeded generator through one event queue ordered by (time, sequence).
 * Nothing reads a real clock or a real random source, so a seed replays the
 * same run exactly; a running hash over every event ("trace hash") proves it.
 *
 * Files: sim.c (world, event loop, faults, phases), net.c (network),
 * host.c (the host of the real server core), node.c (a server's life),
 * client.c (workload + history),
 * check.c (per-step invariants), linearize.c (history checker),
 * waldisk.c (the real WAL over a fault vfs), repair.c (servers whose
 * storage refuses to start), ctl.c + ctl_wire.c (controller mode: the
 * brokers' requests to the real controller glue), broker.c (simulated
 * brokers and the admin client), ctl_check.c (controller invariants),
 * main.c (CLI). docs/simulator.md describes the whole.
 */
#ifndef KEEL_SIM_SIM_H
#define KEEL_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/rng.h"
#include "meta/controller.h"
#include "meta/follower.h"
#include "meta/image.h"
#include "raft/raft.h"
#include "sim/disk.h"

#define SIM_MAX_NODES 12 /* initial servers, spares, and replacements after repairs */
#define SIM_KEYS 6
#define SIM_MAX_CLIENTS 8
#define SIM_TIME_INF UINT64_MAX

/* What a server's core has applied, as the workload and checkers see it
 * (host.c keeps it current). */
struct sim_sm {
	uint64_t applied;
	uint64_t applied_term;
	struct raft_config config;       /* in force at `applied` */
	const struct meta_image *image;  /* controller mode: the glue's (not owned) */
};

struct sim;
struct sim_node;

/* ---- network (net.c) ---- */

struct sim_packet {
	uint64_t from;
	uint64_t to;
	uint8_t *bytes; /* the encoded message */
	size_t size;
};

struct sim_net {
	bool blocked[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1]; /* [from][to] */
	/* the last delivery time of an in-order frame on each link */
	uint64_t link_last_at[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	/* in-order frames numbered per link (the event's arg) and the last
	 * one taken off the link: one that comes early waits */
	uint64_t link_sent[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	uint64_t link_taken[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	uint32_t drop_per_mille;
	uint32_t dup_per_mille;
	uint32_t slow_per_mille; /* delayed by up to slow_max_ms instead */
	uint64_t slow_max_ms;
	uint64_t min_delay_ms;
	uint64_t max_delay_ms;
	uint64_t sent;
	uint64_t dropped;
	uint64_t duplicated;
};

/* ---- history (client.c) ---- */

enum sim_op_kind { SIM_WRITE = 1, SIM_READ = 2 };
enum sim_op_status { SIM_OP_PENDING = 0, SIM_OP_OK = 1, SIM_OP_FAILED = 2, SIM_OP_UNKNOWN = 3 };

struct sim_hist_op {
	uint32_t client;
	uint8_t kind;
	uint8_t status;
	uint32_t key;
	uint64_t value;  /* written, or read */
	uint64_t invoke; /* event sequence numbers: a strict real-time order */
	uint64_t response; /* SIM_TIME_INF while pending/unknown */
	uint64_t index;  /* write: assigned (index, term); read: read index */
	uint64_t term;
	uint64_t node;
};

struct sim_client {
	uint32_t id;
	bool busy;
	size_t op;          /* history index of the outstanding op */
	uint64_t deadline;  /* sim time when the client gives up */
	uint64_t next_at;   /* sim time of the next op */
	uint64_t gen;       /* generation of its scheduled event */
	uint64_t guess_leader;
};

/* ---- a node (node.c) ---- */

struct sim_pending_write {
	size_t op;
	uint64_t index;
	uint64_t term;
};

struct sim_pending_read {
	size_t op;
	uint64_t ctx;
	uint64_t index; /* 0 until the read index is known */
};

/* A persist batch handed to the disk, not yet reported durable. */
struct sim_submitted {
	uint64_t id;
	bool install;
	bool reported; /* ACK_BEFORE_PERSIST (host.c): reported before durable */
	struct raft_snapshot_meta meta;
};

struct sim_node {
	uint64_t id;
	bool exists;   /* a server process slot (member or spare) */
	bool up;       /* running */
	bool paused;
	bool broken;   /* its storage refused to start twice: needs repair */
	bool retired;  /* repaired: replaced by a new server id, never runs again */
	bool stop_pending; /* its storage failed: stops after this ready */
	bool rotted;       /* bit rot was injected into its disk (until wiped) */
	uint32_t refusals; /* starts refused in a row */
	struct raft *r;   /* the Raft core (the host's, when it runs the server core) */
	struct sim_host *host; /* the real server core (host.c), or NULL */
	struct sim_disk *disk;
	double clock_rate;    /* drift: local ms per simulated ms */
	uint64_t clock_base;  /* local time at sim time 0 */
	uint64_t last_local;  /* last local time given to the core */
	uint64_t incarnation;
	struct sim_sm sm;
	/* writes and reads of clients waiting on this node */
	struct sim_pending_write *writes;
	size_t n_writes;
	size_t cap_writes;
	struct sim_pending_read *reads;
	size_t n_reads;
	size_t cap_reads;
	struct sim_submitted *submitted; /* FIFO */
	size_t n_submitted;
	size_t cap_submitted;
	uint64_t disk_busy_until; /* FIFO: completions never reorder */
	uint64_t fsync_min_ms;    /* latency of one batch */
	uint64_t fsync_max_ms;
	uint64_t snapshot_every;
	uint64_t last_snapshot_index;
	/* checker bookkeeping */
	uint64_t last_commit;
	uint64_t lead_term;
	uint64_t lead_check_index;
	uint64_t lead_check_term;
	uint64_t lead_check_hash;
	uint8_t last_role;
	uint64_t last_leader;
};

/* ---- events (sim.c) ---- */

enum sim_event_kind {
	SIM_EV_DELIVER = 1,
	SIM_EV_TICK = 2,
	SIM_EV_DISK = 3,
	SIM_EV_CLIENT = 4,
	SIM_EV_FAULT = 5,
	SIM_EV_RESTART = 6,
	SIM_EV_RESUME = 7,
	SIM_EV_HEAL = 8,
	SIM_EV_ISOLATE = 9,
	SIM_EV_UNISOLATE = 10,
	SIM_EV_REPAIR = 11,        /* the operator looks at broken servers */
	SIM_EV_CTL_REQUEST = 12,   /* a broker/admin request reaches server `node` */
	SIM_EV_CTL_REPLY = 13,     /* a reply reaches broker `node` (0: admin) */
	SIM_EV_BROKER = 14,        /* broker `node`'s timer (arg: generation) */
	SIM_EV_BROKER_FAULT = 15,  /* the broker nemesis */
	SIM_EV_ADMIN = 16,         /* the admin client's next action */
	SIM_EV_BROKER_RESTART = 17,
	SIM_EV_BROKER_RESUME = 18,
	SIM_EV_ZK_TICK = 19, /* the ZooKeeper clients act */
	SIM_EV_ZK_NET = 20,  /* a client connection's item arrives (arg: conn*2+dir) */
};

struct sim_event {
	uint64_t at;
	uint64_t seq;
	uint8_t kind;
	uint64_t node;
	uint64_t arg;
	uint64_t incarnation; /* events for a crashed incarnation are void */
	struct sim_packet pkt;
};


struct sim_config {
	uint64_t seed;
	uint32_t nodes;   /* initial voters: 3 or 5 */
	uint64_t steps;   /* events in the fault phase */
	bool verbose;
	bool controller;  /* the state machine carries the metadata image */
	bool zk;          /* the ZooKeeper workload (zkworld.c) instead of registers */
};

struct sim_host;

struct sim_trace_line {
	char text[160];
};

struct sim {
	struct sim_config cfg;
	struct keel_rng rng;
	uint64_t now;      /* simulated ms */
	uint64_t seq;      /* event sequence, also history time */
	uint64_t steps;
	uint64_t trace_hash;
	struct sim_event *heap;
	size_t n_heap;
	size_t cap_heap;
	struct sim_net net;
	struct sim_node nodes[SIM_MAX_NODES + 1]; /* by id; [0] unused */
	uint32_t n_slots;  /* ids 1..n_slots exist (members + spares) */
	struct raft_options opts;
	struct sim_wal_params wal_params;
	size_t snapshot_pad;
	/* the operator (repair.c) */
	bool repair_scheduled;
	uint64_t repair_remove_index[SIM_MAX_NODES + 1]; /* 0: none proposed */
	uint64_t repair_remove_term[SIM_MAX_NODES + 1];
	uint8_t readd_role[SIM_MAX_NODES + 1]; /* role to restore after a wipe */
	uint64_t rot_node; /* a node whose disk rotted and has not restarted */
	/* controller mode */
	struct sim_ctl_world *ctlw;
	/* the ZooKeeper workload (zkworld.c) and its change-feed consumers
	 * (zkfeedworld.c) */
	struct sim_zk_world *zkw;
	struct sim_zk_feedw *zkf;
	/* workload */
	struct sim_client clients[SIM_MAX_CLIENTS];
	uint32_t n_clients;
	struct sim_hist_op *hist;
	size_t n_hist;
	size_t cap_hist;
	uint64_t client_timeout_ms; /* a client gives up on an op after this */
	uint64_t next_op_id;
	uint64_t next_ctx;
	bool workload_on;
	bool faults_on;
	uint32_t hunt_per_mille; /* a new leader is soon isolated with this chance */
	/* The rotation nemesis (sim.c): leaders with diverging tails. */
	uint8_t rot_state;
	uint64_t rot_a;
	uint64_t rot_b;
	uint64_t rot_deadline;
	bool rot_drop_new; /* step 3: A's appends with entries of its term are lost */
	/* global knowledge for the checkers (check.c) */
	uint64_t *term_leader; /* leader id by term */
	size_t cap_terms;
	struct sim_committed *committed; /* by index */
	size_t cap_committed;
	uint64_t max_committed;
	struct sim_logent *logents; /* hash map (index, term) -> entry facts */
	size_t cap_logents;
	size_t n_logents;
	/* failure */
	bool failed;
	char failure[512];
	/* trace ring for failure reports */
	struct sim_trace_line ring[64];
	size_t ring_next;
	/* statistics */
	uint64_t stat_crashes;
	uint64_t stat_torn;
	uint64_t stat_partitions;
	uint64_t stat_pauses;
	uint64_t stat_elections;
	uint64_t stat_snap_installs;
	uint64_t stat_member_changes;
	uint64_t stat_transfers;
	uint64_t stat_writes_ok;
	uint64_t stat_reads_ok;
	uint64_t stat_snapshots;
	uint64_t stat_refusals;     /* starts the storage refused */
	uint64_t stat_repairs;      /* servers removed, wiped, re-added */
	uint64_t stat_storage_stops; /* stops after a storage failure */
	uint64_t stat_disk_faults;  /* EIO, power cuts, bit rot injected */
};

/* sim.c */
/* Sets up server slot `id` (<= n_slots): its clock, snapshot cadence,
 * disk; boots it (with the bootstrap entry if member_of_initial). */
void sim_add_server(struct sim *s, uint64_t id, bool member_of_initial);
void sim_tracef(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_trace_hash(struct sim *s, uint64_t v);
void sim_fail(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_schedule(struct sim *s, uint64_t at, uint8_t kind, uint64_t node, uint64_t arg,
		  struct sim_packet *pkt);
uint64_t sim_local_time(const struct sim *s, const struct sim_node *n);
int sim_run(const struct sim_config *cfg);

/* net.c */
void sim_net_send(struct sim *s, const struct raft_msg *m);
void sim_net_deliver(struct sim *s, struct sim_event *ev);
void sim_net_heal(struct sim *s);
void sim_net_partition(struct sim *s, uint64_t target);
void sim_net_isolate(struct sim *s, uint64_t id);
void sim_net_unisolate(struct sim *s, uint64_t id);

/* net.c: one peer frame (type byte, then the core's body) from the server
 * core of `from`; `m` is its decoded Raft message (or NULL: another frame
 * type), for the rotation nemesis and traces. */
void sim_net_send_frame(struct sim *s, uint64_t from, uint64_t to, const uint8_t *bytes,
			size_t size, const struct raft_msg *m);

/* sim.c: a node just became leader (the leader-hunting nemesis). */
void sim_on_new_leader(struct sim *s, struct sim_node *n);
/* sim.c: whether the rotation nemesis eats this message. */
bool sim_rotation_drops(struct sim *s, const struct raft_msg *m);

/* node.c */
void sim_node_boot(struct sim *s, struct sim_node *n, bool member_of_initial);
void sim_disk_stats_add(struct sim_disk_stats *sum, const struct sim_disk_stats *add);
void sim_node_start(struct sim *s, struct sim_node *n);
void sim_node_crash(struct sim *s, struct sim_node *n);
void sim_node_process(struct sim *s, struct sim_node *n);
void sim_node_disk_done(struct sim *s, struct sim_node *n);
void sim_node_tick(struct sim *s, struct sim_node *n);
void sim_node_free(struct sim_node *n);
bool sim_node_propose(struct sim *s, struct sim_node *n, size_t op);
bool sim_node_read(struct sim *s, struct sim_node *n, size_t op);
/* A client's write waiting for (index, term) on n; a read for ctx. */
void sim_node_add_write(struct sim_node *n, size_t op, uint64_t index, uint64_t term);
void sim_node_add_read(struct sim_node *n, size_t op, uint64_t ctx);
/* Pieces both server kinds share: the FIFO of submitted batches; a
 * persist batch's check and trace; the writes waiting for entry e (OK when
 * e is theirs and applied_ok); the read indexes of a ready; writes at or
 * below a loaded snapshot (UNKNOWN); a role or leader change (elections,
 * the leader-hunting nemesis); the commit index never going back. */
void sim_node_submitted_push(struct sim_node *n, const struct sim_submitted *sub);
void sim_node_submitted_pop(struct sim_node *n);
void sim_node_note_persist(struct sim *s, struct sim_node *n, const struct raft_ready *rd);
void sim_node_complete_writes(struct sim *s, struct sim_node *n, const struct raft_entry *e,
			      bool applied_ok);
void sim_node_take_reads(struct sim *s, struct sim_node *n, const struct raft_read_result *reads,
			 size_t count);
void sim_node_writes_unknown_below(struct sim *s, struct sim_node *n, uint64_t index);
void sim_node_note_role(struct sim *s, struct sim_node *n, uint8_t role, uint64_t leader,
			uint64_t term);
void sim_node_check_commit(struct sim *s, struct sim_node *n);
/* The node stops after a storage failure; its supervisor restarts it. */
void sim_node_stop_after_failure(struct sim *s, struct sim_node *n);
/* The hash of n's replicated state (the state machine safety check). */
uint64_t sim_node_state_hash(const struct sim_node *n);

/* host.c: the real server core of a node (core mode). sim_host_start runs
 * after the disk loaded `st` (false: the run failed); the others are the
 * core-mode halves of the sim_node_* functions. */
struct sim_disk_state;
bool sim_host_start(struct sim *s, struct sim_node *n, const struct sim_disk_state *st);
void sim_host_close(struct sim_node *n);
void sim_host_process(struct sim *s, struct sim_node *n);
void sim_host_tick(struct sim *s, struct sim_node *n, uint64_t local);
void sim_host_disk_done(struct sim *s, struct sim_node *n);
void sim_host_deliver(struct sim *s, struct sim_node *n, uint64_t from, const uint8_t *bytes,
		      size_t size);
bool sim_host_propose(struct sim *s, struct sim_node *n, size_t op);
bool sim_host_read(struct sim *s, struct sim_node *n, size_t op);
uint64_t sim_host_state_hash(const struct sim_node *n);

/* repair.c: the operator's procedure for a server whose storage refuses
 * to start (remove it, wipe it once the removal is committed, add it
 * back); sim_repair_tick runs it, from SIM_EV_REPAIR events. */
void sim_repair_needed(struct sim *s, struct sim_node *n);
void sim_repair_tick(struct sim *s);
/* Nodes waiting for repair, or being re-added. */
bool sim_repair_busy(const struct sim *s);

/* ---- controller mode (ctl.c, broker.c, ctl_check.c) ---- */

#define SIM_MAX_BROKERS 6
#define SIM_CTL_SESSION_MAX_MS 2500 /* broker session timeouts are drawn below this */
#define SIM_MAX_ISR 8
#define SIM_TOPIC_NAME_MAX 24

enum sim_ctl_api {
	SIM_API_REGISTER = 1,
	SIM_API_HEARTBEAT = 2,
	SIM_API_ALTER_PARTITION = 3,
	SIM_API_CREATE_TOPIC = 4,
	SIM_API_DELETE_TOPIC = 5,
	SIM_API_ALTER_CONFIG = 6,
};

/* A request to the controller or its reply, carried in an event packet. */
struct sim_ctl_msg {
	uint8_t api;
	int32_t broker;       /* 0: the admin client */
	uint32_t incarnation; /* of the broker process that asked */
	uint8_t channel;      /* the broker's channel (0 heartbeat, 1 ISR) */
	uint64_t seq;         /* matches a reply to its request */
	uint64_t server;      /* the server that answered */
	/* request */
	int64_t broker_epoch; /* registration: the previous epoch, or -1 */
	char rack[8];         /* registration: "" for none */
	int64_t metadata_offset;
	bool want_shutdown;
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition;
	int32_t leader_epoch;
	int32_t partition_epoch;
	int32_t isr[SIM_MAX_ISR];
	uint32_t isr_count;
	uint8_t recovery;
	char topic[SIM_TOPIC_NAME_MAX];
	int32_t partitions;
	int16_t replication_factor;
	bool unclean;
	/* reply */
	int16_t error;
	uint64_t leader_hint; /* NOT_CONTROLLER: the server it believes leads */
	int64_t assigned_epoch;
	bool is_caught_up;
	bool is_fenced;
	bool should_shut_down;
	int32_t result_leader;
	int32_t result_leader_epoch;
	int32_t result_partition_epoch;
};

/* Global state of controller mode (broker.c allocates it). */
struct sim_ctl_world;

/* Draws the controller configuration (before the servers start: the
 * controller glue on each takes it), then the brokers and the admin. */
void sim_ctl_world_new(struct sim *s);
const struct meta_controller_config *sim_ctl_config(const struct sim *s);
void sim_ctl_world_init(struct sim *s);
void sim_ctl_world_free(struct sim *s);
void sim_ctl_request(struct sim *s, struct sim_event *ev);
/* broker.c */
void sim_ctl_reply(struct sim *s, struct sim_event *ev);
void sim_broker_event(struct sim *s, struct sim_event *ev);
void sim_broker_fault(struct sim *s);
void sim_broker_request_lost(struct sim *s, const struct sim_ctl_msg *m);
void sim_admin_event(struct sim *s, uint64_t gen);
void sim_ctl_send(struct sim *s, uint64_t server, const struct sim_ctl_msg *m);
void sim_ctl_heal(struct sim *s);
/* True once the metadata has settled after heal (every broker active,
 * every partition led with a full ISR); fills why otherwise. */
bool sim_ctl_settled(struct sim *s, char *why, size_t why_size);
void sim_ctl_report(const struct sim *s, char *out, size_t size);
/* ctl.c: a metadata batch (envelope or tag removed) applied on n with
 * `res`: at its first apply anywhere, it joins the committed metadata log
 * the brokers follow and is checked (sim_ctl_check_first_apply). */
void sim_ctl_note_applied(struct sim *s, struct sim_node *n, uint64_t index, const uint8_t *data,
			  size_t size, const struct meta_apply_result *res);
/* ctl.c: whether n runs the active controller (*ctl, and the index of its
 * last proposal). */
bool sim_node_controller(const struct sim_node *n, const struct meta_controller **ctl,
			 uint64_t *last_proposed_index);
/* ctl.c: a reply the server core released (owned): checked, then sent. */
void sim_ctl_release(struct sim *s, struct sim_node *n, struct sim_ctl_msg *reply);
/* ctl_wire.c: a request as the keel extension's body, and a reply's body
 * into the message's reply fields. */
void sim_ctl_encode_request(const struct sim_ctl_msg *m, struct keel_wbuf *w, int32_t *opcode);
void sim_ctl_decode_reply(struct sim *s, struct sim_ctl_msg *m, int32_t zk_err,
			  const uint8_t *body, size_t size);
/* host.c: controller mode on the real core. */
void sim_host_ctl_request(struct sim *s, struct sim_node *n, const struct sim_ctl_msg *m);
const struct meta_controller *sim_host_controller(const struct sim_node *n,
						  uint64_t *last_proposed_index);
/* ctl_check.c: the first apply of a metadata batch anywhere (log order):
 * image invariants, epoch history, ignored records. */
void sim_ctl_check_first_apply(struct sim *s, struct sim_node *n, uint64_t index,
			       const struct meta_apply_result *res);
/* ctl_check.c: a broker's role change (split-brain check). */
void sim_ctl_check_role(struct sim *s, int32_t broker, const struct meta_role_change *c);
/* ctl_check.c: a reply the controller releases on node n: what it
 * promises must hold in n's image. */
void sim_ctl_check_reply(struct sim *s, struct sim_node *n, const struct sim_ctl_msg *m);
/* ctl_check.c: a controller with nothing in flight agrees with the image. */
void sim_ctl_check_working(struct sim *s, struct sim_node *n);

/* client.c */
void sim_clients_init(struct sim *s, uint32_t n);
void sim_client_event(struct sim *s, uint32_t client);
size_t sim_hist_add(struct sim *s, uint32_t client, uint8_t kind, uint32_t key, uint64_t value);
void sim_hist_complete(struct sim *s, size_t op, uint8_t status, uint64_t value);
void sim_clients_on_node_crash(struct sim *s, struct sim_node *n);

/* check.c */
struct sim_committed {
	bool known;
	uint64_t term;
	uint64_t seen_term; /* term of the first server to apply it: >= commit term */
	uint64_t data_hash;
	uint64_t sm_hash;
};
struct sim_logent {
	uint64_t index; /* 0: empty slot */
	uint64_t term;
	uint64_t data_hash;
	uint64_t prev_term;
};
void sim_check_init(struct sim *s);
void sim_check_free(struct sim *s);
void sim_check_step(struct sim *s);
void sim_check_entries(struct sim *s, struct sim_node *n, const struct raft_entry *entries,
		       size_t count);
void sim_check_applied(struct sim *s, struct sim_node *n, const struct raft_entry *e);
void sim_check_snapshot_loaded(struct sim *s, struct sim_node *n);
uint64_t sim_entry_hash(const struct raft_entry *e);

/* ---- the ZooKeeper workload (zkworld.c) ----
 * Simulated ZooKeeper clients (zk_client.c) on simulated TCP connections
 * to the servers' real cores; the checkers of zk_check.c at the end. */

/* The core's id of a workload connection: the client's number plus this
 * (host.c tells them from the brokers' connection). */
#define SIM_ZK_CONN_BASE (1ull << 40)

struct sim_zk_world;
struct simzk_result;
struct node_core;
void sim_zkw_new(struct sim *s);
void sim_zkw_free(struct sim *s);
void sim_zkw_event(struct sim *s, const struct sim_event *ev);
/* Node n's core reads the frames waiting for it, forgets the connections
 * it closed (after each turn of its ready loop). */
void sim_zkw_pump(struct sim *s, struct sim_node *n);
/* Server `node` crashed (tell_core false: its core is gone) or is cut off
 * (sim_zkw_cut): its clients' connections break. */
void sim_zkw_server_down(struct sim *s, uint64_t node, bool tell_core);
void sim_zkw_cut(struct sim *s, uint64_t node);
/* The core's client effects on a workload connection. */
struct keel_wbuf *sim_zkw_client_begin(struct sim *s, uint64_t node, uint64_t id);
void sim_zkw_client_end(struct sim *s, uint64_t node, uint64_t id);
void sim_zkw_client_send(struct sim *s, uint64_t node, uint64_t id, const void *payload,
			 size_t size);
void sim_zkw_client_pause(struct sim *s, uint64_t node, uint64_t id, bool paused);
bool sim_zkw_client_paused(struct sim *s, uint64_t node, uint64_t id);
void sim_zkw_client_close(struct sim *s, uint64_t node, uint64_t id);
/* The end of the run: the clients finish (final sync + read); idle once
 * none waits for anything; check runs every checker and fills r. */
void sim_zkw_finish(struct sim *s);
bool sim_zkw_idle(struct sim *s);
bool sim_zkw_check(struct sim *s, struct simzk_result *r);
void sim_zkw_counts(struct sim *s, struct simzk_result *r);
void sim_zkw_print_stuck(struct sim *s);
/* host.c: a client txn (session, xid) was applied on some server. */
void sim_zkw_note_applied(struct sim *s, int64_t session, int32_t xid);

/* ---- the change-feed consumers (zkfeedworld.c, zk_feed.c) ----
 * Subscriptions to the servers' real feed (core/feed.c) on connections
 * of the core; the feed checker at the end. Only with the zk workload. */

/* The core's id of a feed connection: the consumer's number plus this. */
#define SIM_FEED_CONN_BASE (1ull << 44)

struct sim_zk_feedw;
struct zk_result;
/* Before the servers start; after the run. */
void sim_zkf_new(struct sim *s);
void sim_zkf_free(struct sim *s);
/* The feed's options of a server's core (its history, its high water). */
void sim_zkf_options(struct sim *s, uint64_t *retain_bytes, uint32_t *high_water_bytes);
/* A tick of the workload: a consumer acts. */
void sim_zkf_step(struct sim *s);
/* host.c: the core's effects on a feed connection, and its feed_wait. */
struct keel_wbuf *sim_zkf_client_begin(struct sim *s, uint64_t node, uint64_t id);
void sim_zkf_client_end(struct sim *s, uint64_t node, uint64_t id);
void sim_zkf_client_close(struct sim *s, uint64_t node, uint64_t id);
size_t sim_zkf_client_output_bytes(struct sim *s, uint64_t node, uint64_t id);
void sim_zkf_feed_wait(struct sim *s, uint64_t node, bool waiting);
/* host.c, after each turn of node n: the waiting feed sends, the core
 * forgets the connections it closed. */
void sim_zkf_pump(struct sim *s, struct sim_node *n);
/* host.c: node n applied `index` (res: its ZooKeeper result, or NULL). */
void sim_zkf_note_applied(struct sim *s, struct sim_node *n, uint64_t index,
			  const struct zk_result *res);
/* zkworld.c: server `node` crashed or was cut off (as sim_zkw_server_down). */
void sim_zkf_server_down(struct sim *s, uint64_t node, bool tell_core);
/* host.c: node `node` loaded a snapshot from the leader: after its turn its
 * feed connections close (the server closes its ZooKeeper connections). */
void sim_zkf_snapshot_installed(struct sim *s, uint64_t node);
/* The end: consumers read to the end, then the feed checker; the counts
 * and the feed's part of the trace. */
bool sim_zkf_check(struct sim *s, char *why, size_t why_size);
void sim_zkf_counts(struct sim *s, struct simzk_result *r);
/* host.c: node n's core (it runs). sim.c: the configuration of the
 * current leader (NULL: none). */
struct node_core *sim_host_core(struct sim_node *n);
const struct raft_config *sim_final_config(struct sim *s);

/* linearize.c: true when the history of every key is linearizable;
 * otherwise fills why. */
bool sim_linearizable(const struct sim_hist_op *ops, size_t n, char *why, size_t why_size);

#endif
