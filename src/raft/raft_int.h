/*
 * raft_int.h — the inside of struct raft, shared by the core's files.
 *
 * Not for the node: it includes only raft.h. One .c per concern:
 *   log.c         in-memory log since the last snapshot
 *   config.c      configurations, their encoding, quorum arithmetic
 *   progress.c    the leader's view of each follower, flow control
 *   election.c    pre-vote, vote, role changes, check-quorum, transfer
 *   replication.c AppendEntries both ways, heartbeats, commit
 *   snapshot.c    chunked InstallSnapshot both ways, compaction
 *   membership.c  single-server configuration changes
 *   read_index.c  ReadIndex on leader and follower
 *   ready.c       outbox, persist batches, ready/advance/persisted
 *   raft.c        init/restore/close, tick, step dispatch, propose, status
 *   msg.c         wire codec
 *
 * State diagram of the role (terms only grow):
 *
 *              timeout (voter)          pre-vote quorum
 *   FOLLOWER ------------------> PRE_CANDIDATE ----------> CANDIDATE
 *      ^  ^                         |   (TimeoutNow skips it)  |
 *      |  +--- higher term / leader seen / pre-vote lost ------+
 *      |                                                   vote quorum
 *      +-- higher term, check-quorum fails, removed <--- LEADER <-+
 */
#ifndef KEEL_RAFT_RAFT_INT_H
#define KEEL_RAFT_RAFT_INT_H

#include "base/assert.h"
#include "raft/raft.h"

/* ---- log.c ---- */

/* Entries (base_index, base_index + count], contiguous in one array so that
 * a run of them can be handed out as a plain pointer. entries[off] is the
 * entry at base_index + 1. Data is malloc'd per entry and owned here. */
struct raft_log {
	struct raft_entry *slots;
	size_t cap;
	size_t off;   /* first live slot */
	size_t count; /* live entries */
	uint64_t base_index; /* entry before the first in memory (snapshot) */
	uint64_t base_term;
	uint64_t bytes; /* data bytes of live entries */
};

void raft_log_init(struct raft_log *log);
void raft_log_close(struct raft_log *log);
static inline uint64_t raft_log_first(const struct raft_log *log)
{
	return log->base_index + 1;
}
static inline uint64_t raft_log_last(const struct raft_log *log)
{
	return log->base_index + log->count;
}
/* The entry at index (first <= index <= last). */
const struct raft_entry *raft_log_get(const struct raft_log *log, uint64_t index);
/* Term at index: base_term at base_index, 0 at index 0; false when the index
 * is compacted away or past the end. */
bool raft_log_term(const struct raft_log *log, uint64_t index, uint64_t *term);
uint64_t raft_log_last_term(const struct raft_log *log);
/* Copies the entry (index must be last + 1). */
enum keel_err raft_log_append(struct raft_log *log, const struct raft_entry *entry);
/* Drops entries >= index (index > base_index). */
void raft_log_truncate(struct raft_log *log, uint64_t index);
/* Drops entries <= index (base_index < index <= last). */
void raft_log_compact(struct raft_log *log, uint64_t index);
/* Drops everything; the log restarts after (index, term). */
void raft_log_reset(struct raft_log *log, uint64_t index, uint64_t term);
/* Largest index <= index whose term is <= term, stopping at base_index;
 * an index below base_index comes back unchanged. */
uint64_t raft_log_find_conflict_by_term(const struct raft_log *log, uint64_t index,
					uint64_t term);

/* ---- config.c ---- */

bool raft_config_valid(const struct raft_config *config);
bool raft_config_equal(const struct raft_config *a, const struct raft_config *b);
/* Adds/changes/removes one member; keeps the array sorted. */
enum keel_err raft_config_set(struct raft_config *config, uint64_t id, uint8_t role);
void raft_config_remove(struct raft_config *config, uint64_t id);
static inline uint32_t raft_quorum(uint32_t voters)
{
	return voters / 2 + 1;
}

/* ---- progress.c ---- */

struct raft_progress {
	uint64_t id;
	uint8_t role;  /* from the config */
	uint8_t state; /* enum raft_progress_state */
	uint64_t match;
	uint64_t next;
	bool probe_sent;    /* PROBE: an append is out, wait for an answer */
	bool want_send;     /* flush appends at the next ready */
	bool want_empty;    /* ... and send one even with no entries (a probe) */
	bool recent_active; /* heard from since the last check-quorum */
	uint64_t commit_sent;   /* highest commit index told to it */
	uint64_t match_mark;    /* match at the previous heartbeat answer */
	uint64_t read_seq_acked;
	/* REPLICATE: ring of in-flight appends (last index, data bytes). */
	uint64_t *infl_last;
	uint64_t *infl_bytes;
	uint32_t infl_head;
	uint32_t infl_count;
	uint64_t infl_total_bytes;
	/* SNAPSHOT: the transfer in progress. */
	struct raft_snapshot_meta snap;
	uint64_t snap_next_offset;  /* next chunk to send */
	uint64_t snap_acked_offset; /* durable at the follower */
	uint64_t snap_mark;         /* acked offset at the previous heartbeat answer */
	bool snap_rewound;          /* resent from snap_acked_offset, no ack since */
};

void raft_progress_reset(struct raft *r, struct raft_progress *pr, uint64_t next);
void raft_progress_become_probe(struct raft_progress *pr);
void raft_progress_become_replicate(struct raft_progress *pr);
bool raft_progress_paused(const struct raft *r, const struct raft_progress *pr);
void raft_progress_infl_add(struct raft *r, struct raft_progress *pr, uint64_t last,
			    uint64_t bytes);
void raft_progress_infl_free_to(struct raft *r, struct raft_progress *pr, uint64_t index);
struct raft_progress *raft_progress_find(struct raft *r, uint64_t id);
/* Rebuilds the progress set from r->config (leader), keeping known peers. */
void raft_progress_sync(struct raft *r);

/* ---- the outbox and persist batches (ready.c) ---- */

struct raft_out {
	struct raft_msg msg;
	uint64_t need_batch; /* 0: send at once; else held until persisted */
};

struct raft_batch {
	uint64_t id;
	uint64_t valid_upto; /* durable prefix once done (lowered by truncation) */
	bool has_hard_state;
	struct raft_hard_state hard_state;
	uint64_t install_index; /* 0: no snapshot install in this batch */
};

struct raft_chunk_buf {
	struct raft_snapshot_chunk chunk;
	uint8_t *data; /* owned copy */
};

struct raft_read {
	uint64_t ctx;
	uint64_t from;  /* requester: this id (local) or a follower */
	uint64_t index; /* 0 while waiting for the term's first commit */
	uint64_t seq;   /* heartbeat round that confirms it (leader) */
	uint64_t deadline_ms;
};

/* What the last raft_ready() handed out, checked by raft_advance(). */
struct raft_handed {
	bool active;
	uint64_t persist_id;
	uint64_t last_entry; /* log last index handed to storage */
	uint64_t last_committed;
	size_t n_results;
	size_t n_chunks;
};

struct raft {
	struct raft_options opts;
	uint64_t id;
	struct keel_rng rng;
	uint64_t now_ms;
	bool clock_started; /* the first tick only sets the clock */
	bool restored;
	uint64_t *infl_block; /* the in-flight rings of all progress slots */

	/* persistent state (in memory; durable copy tracked below) */
	uint64_t term;
	uint64_t vote;
	struct raft_log log;

	/* volatile */
	uint8_t role;
	uint64_t leader;
	uint64_t commit;
	uint64_t applied;        /* reported by the node */
	uint64_t applied_handed; /* last committed entry handed out */
	uint64_t election_deadline_ms;
	uint64_t leader_contact_ms; /* last message from the current leader */
	bool leader_contact;        /* leader_contact_ms is meaningful */
	uint64_t follower_lost_entries; /* times a follower lost acked entries */

	/* configuration */
	struct raft_config config; /* in force: the latest in the log */
	uint64_t config_index;     /* its entry (base_index if from the base) */
	struct raft_config base_config; /* in force at log.base_index */

	/* snapshot */
	struct raft_snapshot_meta snapshot; /* newest known (index 0: none) */
	bool snapshot_pending;   /* follower: a transfer in progress */
	struct raft_snapshot_meta pending_meta;
	uint64_t pending_next_offset;
	uint64_t pending_leader;

	/* elections */
	uint64_t votes_granted[RAFT_MAX_MEMBERS];
	uint32_t n_granted;
	uint64_t votes_rejected[RAFT_MAX_MEMBERS];
	uint32_t n_rejected;
	bool self_vote_counted;
	bool campaign_transfer;

	/* leader */
	struct raft_progress progress[RAFT_MAX_MEMBERS];
	uint32_t n_progress;
	uint64_t term_start_index; /* the leader's no-op */
	uint64_t heartbeat_due_ms;
	uint64_t check_quorum_due_ms;
	uint64_t transfer_target;
	bool transfer_sent; /* TimeoutNow went out */
	uint64_t transfer_deadline_ms;
	uint64_t uncommitted_bytes;
	bool stepping_down; /* removed from the config; leaves at commit */

	/* ReadIndex: leader queue (by seq) or follower forwards */
	struct raft_read *reads;
	uint32_t n_reads;
	uint64_t read_seq;      /* last round started */
	bool read_round_wanted; /* a read waits for round read_seq + 1 */
	struct raft_read_result *results;
	uint32_t n_results;

	/* persistence */
	uint64_t unstable_index; /* first entry not yet handed to storage */
	bool hard_state_dirty;
	struct raft_hard_state durable_hs;
	uint64_t persisted_index;
	uint64_t batch_seq;       /* last batch id handed out */
	uint64_t persisted_batch; /* last batch id durable */
	struct raft_batch *batches; /* ring of handed, not durable */
	uint32_t batch_head;
	uint32_t n_batches;
	struct raft_chunk_buf *chunks; /* max_inflight_chunks */
	struct raft_snapshot_chunk *chunk_view;
	uint32_t n_chunks;
	bool install_pending;
	struct raft_snapshot_install install;
	/* A snapshot installed in memory whose batch is not durable yet: no
	 * committed entry may be handed out before the node has loaded it. */
	uint64_t install_wait_index;

	/* outbox */
	struct raft_out out_scratch; /* sink for messages dropped when full */
	struct raft_out *out;
	size_t n_out;
	size_t out_cap;
	uint64_t out_dropped;

	/* ready bookkeeping */
	struct raft_handed handed;
	struct raft_msg *ready_msgs;
	size_t ready_msgs_cap;
	uint8_t last_role;
	uint64_t last_leader;
};

/* ---- cross-file internals ---- */

/* raft.c */
uint64_t raft_random_timeout(struct raft *r);
void raft_reset_election_timer(struct raft *r);
bool raft_is_voter(const struct raft *r, uint64_t id);
/* A voter of the latest configuration, or of the one before it while the
 * latest (which leaves this server out) is not known to be committed. */
bool raft_may_campaign(const struct raft *r);
/* Recomputes r->config/config_index from the log and base_config. */
void raft_config_reload(struct raft *r);
/* The config in force at index (base_index <= index <= last). */
void raft_config_at(const struct raft *r, uint64_t index, struct raft_config *out);
/* Appends one entry with the current term on the leader (copying data). */
enum keel_err raft_leader_append(struct raft *r, uint8_t type, const void *data, uint32_t size,
				 uint64_t *index);
/* An entry was appended or truncated: config bookkeeping. */
void raft_on_config_entry(struct raft *r, const struct raft_entry *e);
void raft_truncate_log(struct raft *r, uint64_t index);

/* ready.c */
struct raft_msg *raft_out_push(struct raft *r, uint8_t type, uint64_t to, bool after_persist);
void raft_out_drop_leader_msgs(struct raft *r);
void raft_on_truncate_persist(struct raft *r, uint64_t index);
void raft_mark_hard_state(struct raft *r);
bool raft_needs_persist(const struct raft *r);

/* election.c */
void raft_become_follower(struct raft *r, uint64_t term, uint64_t leader);
void raft_campaign(struct raft *r, bool pre_vote, bool transfer);
void raft_tally_self_vote(struct raft *r);
void raft_step_vote(struct raft *r, const struct raft_msg *m);
void raft_step_vote_resp(struct raft *r, const struct raft_msg *m);
void raft_step_timeout_now(struct raft *r, const struct raft_msg *m);
void raft_leader_tick(struct raft *r);
void raft_transfer_check(struct raft *r, struct raft_progress *pr);
bool raft_in_lease(const struct raft *r);

/* replication.c */
void raft_flush_appends(struct raft *r);
void raft_bcast_heartbeat(struct raft *r);
void raft_maybe_commit(struct raft *r);
void raft_step_append(struct raft *r, const struct raft_msg *m);
void raft_step_append_resp(struct raft *r, const struct raft_msg *m);
void raft_step_heartbeat(struct raft *r, const struct raft_msg *m);
void raft_step_heartbeat_resp(struct raft *r, const struct raft_msg *m);
void raft_follower_commit_to(struct raft *r, uint64_t commit);
void raft_leader_commit_advanced(struct raft *r, uint64_t old_commit);

/* snapshot.c */
void raft_snapshot_start(struct raft *r, struct raft_progress *pr);
void raft_snapshot_send(struct raft *r, struct raft_progress *pr);
void raft_step_snapshot(struct raft *r, const struct raft_msg *m);
void raft_step_snapshot_resp(struct raft *r, const struct raft_msg *m);
void raft_snapshot_heartbeat_check(struct raft *r, struct raft_progress *pr);
void raft_chunks_free(struct raft *r, size_t n);

/* read_index.c */
void raft_reads_fail_all(struct raft *r, enum keel_err err);
void raft_reads_on_term_commit(struct raft *r);
void raft_reads_confirm(struct raft *r);
void raft_reads_tick(struct raft *r);
void raft_step_read_index(struct raft *r, const struct raft_msg *m);
void raft_step_read_index_resp(struct raft *r, const struct raft_msg *m);
void raft_read_result_push(struct raft *r, uint64_t ctx, uint64_t index, enum keel_err err);
bool raft_committed_in_term(const struct raft *r);

/* membership.c */
void raft_membership_on_commit(struct raft *r);

#endif
