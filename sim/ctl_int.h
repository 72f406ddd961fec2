/*
 * ctl_int.h — state shared by the controller-mode files of the simulator
 * (ctl.c: the controller on the Raft leader; broker.c: brokers and the
 * admin client; ctl_check.c: invariants). Not an API.
 *
 * The committed metadata log: the first time any server applies a
 * metadata entry (always in index order, see ctl_check.c), its batch is
 * appended to `log`. Brokers follow it: a broker applies the entries up to
 * the applied index of the server it fetches from — never further than
 * that server has applied, so brokers lag behind as real ones do.
 */
#ifndef KEEL_SIM_CTL_INT_H
#define KEEL_SIM_CTL_INT_H

#include "base/hash.h"
#include "sim/sim.h"

#define SIM_CTL_TICK_MS 100
#define SIM_MAX_HELD 256

struct sim_broker_chan {
	bool busy;
	uint64_t seq;      /* of the outstanding request */
	uint64_t deadline; /* sim time when the broker gives up on it */
};

struct sim_broker {
	int32_t id;
	char rack[8];
	bool alive;         /* process running */
	bool paused;        /* running, but neither heartbeats nor fetches */
	bool shutting_down; /* asks for a controlled shutdown */
	bool clean_stop;    /* stopped after one: re-registers with its old epoch */
	uint32_t incarnation; /* bumps on every start */
	bool registered;
	int64_t epoch;
	uint64_t guess_server; /* where it sends controller requests */
	uint64_t fetch_server; /* where it fetches the metadata log from */
	uint64_t gen;          /* generation of its timer event */
	uint64_t next_heartbeat_at;
	uint64_t next_isr_at;
	uint64_t down_since;
	uint64_t last_fetch_progress;
	struct sim_broker_chan chan[2]; /* 0: registration/heartbeat, 1: ISR */
	struct meta_follower follower;
	bool has_follower;
	size_t log_pos; /* next entry of the committed metadata log to apply */
};

struct sim_meta_entry {
	uint64_t index;
	uint8_t *data; /* the encoded batch, tag removed (owned) */
	size_t size;
};

/* Per (topic id, partition): the last state the log gave it. */
struct sim_part_hist {
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition;
	int32_t leader;
	int32_t leader_epoch;
	int32_t partition_epoch;
};

/* Per (topic id, partition, leader epoch): the broker that claimed to lead. */
struct sim_claim {
	uint8_t topic_id[META_UUID_SIZE];
	int32_t partition;
	int32_t leader_epoch;
	int32_t broker;
};

struct sim_ctl_world {
	struct meta_controller_config cfg;
	struct sim_broker brokers[SIM_MAX_BROKERS];
	uint32_t n_brokers;
	uint64_t heartbeat_ms;
	uint64_t request_timeout_ms;
	bool broker_faults_on;
	bool admin_on;
	/* the committed metadata log */
	struct sim_meta_entry *log;
	size_t n_log;
	size_t cap_log;
	/* checker history */
	struct keel_hmap hist;   /* struct sim_part_hist */
	struct keel_hmap claims; /* struct sim_claim */
	int32_t *epoch_owner;    /* broker epoch -> broker id (0: not handed out) */
	size_t cap_epoch_owner;
	/* the admin client */
	bool admin_busy;
	uint64_t admin_seq;
	uint64_t admin_deadline;
	uint64_t admin_guess;
	uint64_t admin_gen; /* of its pending event */
	uint64_t next_seq;
	struct keel_arena arena; /* decoding committed batches */
	/* statistics */
	uint64_t stat_batches;
	uint64_t stat_records;
	uint64_t stat_controllers;
	uint64_t stat_requests;
	uint64_t stat_not_controller;
	uint64_t stat_registrations;
	uint64_t stat_fences;
	uint64_t stat_leader_changes;
	uint64_t stat_isr_changes;
	uint64_t stat_shutdowns;
	uint64_t stat_broker_kills;
	uint64_t stat_topics;
	uint64_t stat_role_changes;
};

static inline struct sim_ctl_world *sim_ctlw(const struct sim *s)
{
	return s->ctlw;
}

/* ctl_check.c */
void sim_ctl_check_init(struct sim_ctl_world *w);
void sim_ctl_check_free(struct sim_ctl_world *w);
/* Is every partition led, every ISR full, every broker active in img? */
bool sim_ctl_image_settled(const struct sim_ctl_world *w, const struct meta_image *img, char *why,
			   size_t why_size);

/* ctl_wire.c: the incarnation id of a broker process. */
void sim_ctl_incarnation_id(int32_t broker, uint32_t incarnation, uint8_t out[META_UUID_SIZE]);

#endif
