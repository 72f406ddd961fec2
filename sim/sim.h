/*
 * sim.h — the deterministic cluster simulator (keel-sim).
 *
 * One process, one thread: N Raft cores (src/raft) wired to a simulated
 * network, simulated disks (disk.h) and per-node clocks, all driven by one
 * seeded generator through one event queue ordered by (time, sequence).
 * Nothing reads a real clock or a real random source, so a seed replays the
 * same run exactly; a running hash over every event ("trace hash") proves it.
 *
 * Files: sim.c (world, event loop, faults, phases), net.c (network),
 * node.c (glue between a core, its disk, its KV state machine and clients),
 * kv.c (state machine + snapshots), client.c (workload + history),
 * check.c (per-step invariants), linearize.c (history checker),
 * memdisk.c (disk model), main.c (CLI).
 */
#ifndef KEEL_SIM_SIM_H
#define KEEL_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/rng.h"
#include "raft/raft.h"
#include "sim/disk.h"

#define SIM_MAX_NODES 8
#define SIM_KEYS 6
#define SIM_MAX_CLIENTS 8
#define SIM_TIME_INF UINT64_MAX

/* ---- KV state machine (kv.c) ---- */

struct sim_kv {
	uint64_t values[SIM_KEYS];
	uint64_t applied;
	uint64_t applied_term;
	struct raft_config config; /* in force at `applied` */
};

/* A write encoded as an entry's data. */
struct sim_op_data {
	uint64_t op_id; /* unique per write */
	uint32_t key;
	uint64_t value;
};
#define SIM_OP_BYTES (1 + 8 + 4 + 8)

void sim_kv_reset(struct sim_kv *kv);
/* Applies one committed entry (any type); asserts order. */
void sim_kv_apply(struct sim_kv *kv, const struct raft_entry *e);
uint64_t sim_kv_hash(const struct sim_kv *kv);
void sim_op_encode(const struct sim_op_data *op, uint8_t out[SIM_OP_BYTES]);
bool sim_op_decode(const uint8_t *data, size_t size, struct sim_op_data *op);
/* Snapshot bytes (malloc'd) of the state; padded to pad_to bytes. */
uint8_t *sim_kv_snapshot(const struct sim_kv *kv, size_t pad_to, size_t *size);
bool sim_kv_load(struct sim_kv *kv, const uint8_t *bytes, size_t size);

/* ---- network (net.c) ---- */

struct sim_packet {
	uint64_t from;
	uint64_t to;
	uint8_t *bytes; /* the encoded message */
	size_t size;
};

struct sim_net {
	bool blocked[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1]; /* [from][to] */
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
	struct raft_snapshot_meta meta;
};

struct sim_node {
	uint64_t id;
	bool exists;   /* a server process slot (member or spare) */
	bool up;       /* running */
	bool paused;
	bool removed;  /* left the cluster: not restarted again */
	struct raft *r;
	struct sim_disk *disk;
	struct keel_rng rng;
	double clock_rate;    /* drift: local ms per simulated ms */
	uint64_t clock_base;  /* local time at sim time 0 */
	uint64_t last_local;  /* last local time given to the core */
	uint64_t incarnation;
	struct sim_kv kv;
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
	uint64_t synced_batches;  /* ACK_BEFORE_PERSIST: reported early */
	uint64_t reported_batches;
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
};

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
	size_t snapshot_pad;
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
};

/* sim.c */
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

/* sim.c: a node just became leader (the leader-hunting nemesis). */
void sim_on_new_leader(struct sim *s, struct sim_node *n);
/* sim.c: whether the rotation nemesis eats this message. */
bool sim_rotation_drops(struct sim *s, const struct raft_msg *m);

/* node.c */
void sim_node_boot(struct sim *s, struct sim_node *n, bool member_of_initial);
void sim_node_start(struct sim *s, struct sim_node *n);
void sim_node_crash(struct sim *s, struct sim_node *n);
void sim_node_process(struct sim *s, struct sim_node *n);
void sim_node_disk_done(struct sim *s, struct sim_node *n);
void sim_node_tick(struct sim *s, struct sim_node *n);
void sim_node_free(struct sim_node *n);
bool sim_node_propose(struct sim *s, struct sim_node *n, size_t op);
bool sim_node_read(struct sim *s, struct sim_node *n, size_t op);

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

/* linearize.c: true when the history of every key is linearizable;
 * otherwise fills why. */
bool sim_linearizable(const struct sim_hist_op *ops, size_t n, char *why, size_t why_size);

#endif
