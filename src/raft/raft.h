/*
 * raft.h — the Raft consensus core as a pure state machine.
 *
 * The core never does I/O, reads no clock and draws no randomness of its
 * own: the node feeds it inputs (messages, ticks with the current time in
 * milliseconds, proposals) and collects outputs through raft_ready(). The
 * model is etcd's ready/advance loop with asynchronous, pipelined storage:
 *
 *	raft_tick(r, now_ms);            // from a timer, any cadence <= heartbeat/2
 *	raft_step(r, &msg);              // every peer message, after decoding
 *	raft_propose(r, data, size, ..); // on the leader
 *	while (raft_ready(r, &rd)) {
 *		if (rd.persist_id != 0)   hand rd's persistent part to the storage
 *		                           thread (copy or encode the bytes now);
 *		send rd.msgs[];            // safe to send at once, see below
 *		apply rd.committed[];      // in order; later raft_applied(index)
 *		answer rd.reads[];
 *		raft_advance(r, &rd);
 *	}
 *	... storage thread finishes batch N durably (fdatasync) ...
 *	raft_persisted(r, N);            // on the loop thread, in batch order
 *
 * Features: leader election with randomized timeouts in [T, 2T), pre-vote,
 * check-quorum with leader stickiness, a no-op entry at the start of every
 * term, commit only by counting entries of the current term, batched and
 * pipelined AppendEntries with per-follower flow control (probe / replicate /
 * snapshot states, bounded in-flight messages and bytes), fast conflict
 * back-off, log compaction behind node-made snapshots with chunked
 * InstallSnapshot whose bytes never enter the core, voters and non-voting
 * learners with single-server membership changes, leadership transfer with
 * TimeoutNow, and ReadIndex. docs/raft.md explains the choices.
 *
 * ---- Persistence rules (enforced by the core, not just documented) ----
 *
 * A ready with persist_id != 0 carries a batch to make durable, in this
 * order: the hard state first, then snapshot chunks, then a snapshot
 * install, then entries (see struct raft_ready; the server's WAL writer and
 * the simulator's, src/wal/writer.h, do exactly this). The hard state goes
 * first so that a crash part-way through a batch never leaves a chunk, an
 * install or entries of a term newer than the stored term, which recovery
 * would refuse as corrupt; a term or vote saved ahead of its entries is
 * harmless, because nothing that depends on the batch leaves the node before
 * the whole batch is durable (see below). Batches are made durable in
 * persist_id order (a FIFO storage
 * thread does this naturally) and several may be outstanding at once, up to
 * options.max_persist_batches; past that, ready() holds new persistent work
 * back until raft_persisted() catches up (backpressure, never unbounded).
 *
 * rd.msgs never contains a message that depends on state not yet durable.
 * Vote grants (after term+vote are durable), append acks (after the acked
 * entries are durable) and snapshot-chunk acks (after the chunk is durable)
 * are held inside the core and released in a later ready, once
 * raft_persisted() covers the batch they depend on. The leader's own
 * AppendEntries, heartbeats and snapshot chunks go out at once, while its
 * own write is still in flight; the leader counts ITSELF toward a commit
 * quorum only for entries raft_persisted() reported, and a candidate counts
 * its own vote only once the batch with its term+vote is durable. So the
 * node needs no "send after persist" queue of its own: it sends every
 * message of rd.msgs as soon as it has them.
 *
 * Committed entries come out of ready() exactly once, in index order, and
 * only when they are also durable locally (index <= persisted index).
 *
 * ---- Ownership and lifetimes ----
 *
 * Everything reachable from a struct raft_ready (entry structs, entry data,
 * messages, message entry arrays, snapshot chunk bytes, configs, read
 * results) is owned by the core and valid until raft_advance() for that
 * ready. Between raft_ready() and raft_advance() the node must not call any
 * other function that takes a non-const struct raft *. The storage thread
 * must therefore get its own copy of entry bytes (or the encoded WAL record)
 * before advance.
 *
 * Inputs are copied: raft_step(), raft_propose(), raft_restore() copy every
 * byte they keep; the caller's buffers need to live only during the call.
 *
 * ---- Time ----
 *
 * The core's clock is the now_ms of the latest raft_tick() (0 before the
 * first). now_ms must never go backwards. Every timeout is in milliseconds;
 * ticks at least every heartbeat_interval_ms / 2 keep the timing accurate.
 *
 * ---- Threading ----
 *
 * A struct raft is not thread-safe; one thread (the node's loop) calls it.
 */
#ifndef KEEL_RAFT_RAFT_H
#define KEEL_RAFT_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/rng.h"

/* Compile-time cap on a configuration's size (voters + learners). Keeps
 * configs, status and messages fixed-size. */
#define RAFT_MAX_MEMBERS 32

/* ---- Log entries ---- */

enum raft_entry_type {
	RAFT_ENTRY_NORMAL = 1, /* a proposal: data is the node's request */
	RAFT_ENTRY_NOOP = 2,   /* appended by every new leader; no data */
	RAFT_ENTRY_CONFIG = 3, /* data is an encoded struct raft_config */
};

struct raft_entry {
	uint64_t term;
	uint64_t index;
	uint8_t type;       /* enum raft_entry_type */
	uint32_t size;      /* bytes of data */
	const uint8_t *data; /* NULL when size == 0 */
};

/* ---- Membership ---- */

enum raft_member_role {
	RAFT_VOTER = 1,
	RAFT_LEARNER = 2, /* replicates, never votes, never counts in a quorum */
};

struct raft_member {
	uint64_t id; /* nonzero */
	uint8_t role; /* enum raft_member_role */
};

/* A configuration: the members in force at some log index. Invariants:
 * count <= RAFT_MAX_MEMBERS, ids nonzero and distinct, sorted by id. A
 * config with no voter exists only before bootstrap (an empty node). */
struct raft_config {
	uint32_t count;
	struct raft_member members[RAFT_MAX_MEMBERS];
};

/* Encodes a config (the data of a RAFT_ENTRY_CONFIG entry and of snapshot
 * files). The writer's failure flag reports overflow. */
void raft_config_encode(const struct raft_config *config, struct keel_wbuf *w);

/* Decodes and validates (distinct nonzero ids, sorted, count in bounds, no
 * trailing bytes). KEEL_CORRUPT on anything malformed. */
enum keel_err raft_config_decode(const void *data, size_t size, struct raft_config *config);

/* The role of `id`, or 0 when it is not a member. */
uint8_t raft_config_role(const struct raft_config *config, uint64_t id);

/* Number of voters. */
uint32_t raft_config_voters(const struct raft_config *config);

/* Bootstrap: every initial member of a brand-new cluster stores the same
 * first entry {index 1, term 1, CONFIG, encode(config)} and hard state
 * {term 1, vote 0}, then calls raft_restore() with them. Servers that join
 * later start with nothing (no entries) and are added by a membership change.
 * This fills `entry` (its data points into `w`, which the caller owns). */
enum keel_err raft_bootstrap_entry(const struct raft_config *config, struct keel_wbuf *w,
				   struct raft_entry *entry);

/* ---- Durable state the node keeps ---- */

struct raft_hard_state {
	uint64_t term;
	uint64_t vote; /* 0: no vote in this term */
};

/* A snapshot the node holds (file bytes are the node's business): the state
 * machine after applying every entry up to `index`, whose term is `term`,
 * and the configuration in force at that index. */
struct raft_snapshot_meta {
	uint64_t index;
	uint64_t term;
	uint64_t size_bytes; /* size of the snapshot file */
	struct raft_config config;
};

/* ---- Peer messages ---- */

enum raft_msg_type {
	RAFT_MSG_APPEND = 1,      /* AppendEntries (entries may be empty: a probe) */
	RAFT_MSG_APPEND_RESP = 2,
	RAFT_MSG_HEARTBEAT = 3,   /* leader liveness + commit + ReadIndex round */
	RAFT_MSG_HEARTBEAT_RESP = 4,
	RAFT_MSG_VOTE = 5,        /* RequestVote, also pre-vote (vote.pre_vote) */
	RAFT_MSG_VOTE_RESP = 6,
	RAFT_MSG_SNAPSHOT = 7,    /* one InstallSnapshot chunk */
	RAFT_MSG_SNAPSHOT_RESP = 8,
	RAFT_MSG_TIMEOUT_NOW = 9, /* leadership transfer: campaign now */
	RAFT_MSG_READ_INDEX = 10, /* follower forwards a ReadIndex request */
	RAFT_MSG_READ_INDEX_RESP = 11,
};
#define RAFT_MSG_TYPE_MAX 11

/* The largest term a message may carry. Real terms grow by one per
 * election; a term near 2^64 can only come from a broken or hostile peer,
 * and accepting it would leave no room to campaign (the term would wrap). */
#define RAFT_TERM_MAX ((uint64_t)1 << 62)
/* Likewise the largest log index a message may name: index + 1 must never
 * wrap, whatever a peer sends. */
#define RAFT_INDEX_MAX ((uint64_t)1 << 62)

struct raft_msg_append {
	uint64_t prev_index;
	uint64_t prev_term;
	uint64_t commit;
	uint32_t n_entries;
	const struct raft_entry *entries; /* see "Ownership" above */
};

struct raft_msg_append_resp {
	bool reject;
	/* Accepted: the follower's log matches the leader's up to `index`.
	 * Rejected: `index` is the prev_index that did not match. */
	uint64_t index;
	/* Rejected only: fast back-off hint — the follower's last index whose
	 * term is <= the leader's prev_term (hint_index), and that term. */
	uint64_t hint_index;
	uint64_t hint_term;
};

struct raft_msg_heartbeat {
	uint64_t commit;   /* min(follower's match, leader's commit) */
	uint64_t read_seq; /* ReadIndex round; echoed in the response */
};

struct raft_msg_heartbeat_resp {
	uint64_t read_seq;
};

struct raft_msg_vote {
	uint64_t last_index;
	uint64_t last_term;
	bool pre_vote; /* term is the term the candidate would campaign in */
	bool transfer; /* campaign started by TimeoutNow: ignore stickiness */
};

struct raft_msg_vote_resp {
	bool granted;
	bool pre_vote;
};

/* InstallSnapshot chunk. The core fills meta and offset (and size/last, from
 * meta.size_bytes and options.snapshot_chunk_bytes); the SENDING NODE points
 * `data` at `size` bytes of the snapshot file (meta.index, meta.term) read
 * at `offset` before it encodes the message. If it no longer has that
 * snapshot it drops the message and calls raft_report_snapshot(peer,
 * RAFT_SNAPSHOT_FAILED). On the receiving side data points into the decoded
 * input (see raft_msg_decode). */
struct raft_msg_snapshot {
	struct raft_snapshot_meta meta;
	uint64_t offset;
	uint32_t size;
	bool last; /* offset + size == meta.size_bytes */
	const uint8_t *data;
};

struct raft_msg_snapshot_resp {
	uint64_t index;       /* the snapshot acked (meta.index) */
	uint64_t snap_term;   /* and its term */
	uint64_t next_offset; /* bytes durable so far (the next offset wanted) */
	bool reject;          /* next_offset is where to resume */
	bool done;            /* snapshot installed durably (or not needed) */
};

struct raft_msg_read_index {
	uint64_t ctx; /* the follower's request id */
};

struct raft_msg_read_index_resp {
	uint64_t ctx;
	uint64_t index; /* read index when err == KEEL_OK */
	uint32_t err;   /* enum keel_err: KEEL_OK, KEEL_NOTLEADER, KEEL_LIMIT, ... */
};

struct raft_msg {
	uint8_t type; /* enum raft_msg_type */
	uint64_t from;
	uint64_t to;
	uint64_t term;
	union {
		struct raft_msg_append append;
		struct raft_msg_append_resp append_resp;
		struct raft_msg_heartbeat heartbeat;
		struct raft_msg_heartbeat_resp heartbeat_resp;
		struct raft_msg_vote vote;
		struct raft_msg_vote_resp vote_resp;
		struct raft_msg_snapshot snapshot;
		struct raft_msg_snapshot_resp snapshot_resp;
		struct raft_msg_read_index read_index;
		struct raft_msg_read_index_resp read_index_resp;
	};
};

/* ---- Wire format of peer messages ----
 *
 * One message per frame (framing is the transport's): version byte, type,
 * from, to, term, then the body in big-endian (format in docs/raft.md).
 * Encoding a RAFT_MSG_SNAPSHOT copies `size` bytes from `data`. */
#define RAFT_MSG_VERSION 1

/* Appends the encoding to `w`; the writer's failure flag reports overflow
 * of its maximum. Returns KEEL_INVAL for a malformed message (bad type). */
enum keel_err raft_msg_encode(const struct raft_msg *msg, struct keel_wbuf *w);

/* Upper bound of the encoded size (for sizing a fixed writer). */
size_t raft_msg_encoded_size(const struct raft_msg *msg);

struct raft_msg_limits {
	uint32_t max_entries;     /* entries in one APPEND */
	uint32_t max_entry_bytes; /* data bytes of one entry */
	uint32_t max_chunk_bytes; /* data bytes of one snapshot chunk */
};

/* Decodes one message, checking every length against `limits` and the
 * input size before use. Never allocates: entry structs are written to the
 * caller's `entries` array (capacity `entries_cap`; more entries than that
 * or than limits->max_entries is KEEL_TOOBIG), and every data pointer
 * (entry data, snapshot chunk data) POINTS INTO `buf`, valid as long as
 * `buf` is. Errors: KEEL_SHORT (truncated), KEEL_TOOBIG (over a limit),
 * KEEL_PROTO (bad version/type/flag, trailing bytes), KEEL_CORRUPT (bad
 * config). */
enum keel_err raft_msg_decode(const void *buf, size_t size, const struct raft_msg_limits *limits,
			      struct raft_msg *msg, struct raft_entry *entries, uint32_t entries_cap);

/* Name of a message type ("APPEND", ...) for logs; "?" when unknown. */
const char *raft_msg_type_name(uint8_t type);

/* ---- Options ---- */

struct raft_options {
	uint64_t id;              /* this server, nonzero */
	struct keel_rng rng;      /* seeded by the caller; the core keeps a copy */

	uint32_t election_timeout_ms;   /* T: randomized in [T, 2T) */
	uint32_t heartbeat_interval_ms; /* < T */
	bool pre_vote;                  /* default true */
	bool check_quorum;              /* default true (also enables stickiness) */

	uint32_t max_append_entries;  /* entries per AppendEntries */
	uint32_t max_append_bytes;    /* data bytes per AppendEntries (>= 1 entry) */
	uint32_t max_inflight_msgs;   /* AppendEntries in flight per follower */
	uint64_t max_inflight_bytes;  /* data bytes in flight per follower */
	uint32_t max_entry_bytes;     /* a proposal's data limit */
	uint64_t max_uncommitted_bytes; /* leader refuses proposals past it (KEEL_BUSY) */
	uint64_t max_apply_bytes;     /* committed data per ready (>= 1 entry) */
	uint32_t max_persist_batches; /* persist batches outstanding */
	uint32_t max_outbox_msgs;     /* messages queued between readies; more are dropped */

	uint32_t snapshot_chunk_bytes;     /* InstallSnapshot chunk size */
	uint32_t max_inflight_chunks;      /* chunks in flight per follower */
	uint64_t snapshot_trailing_entries; /* kept behind a snapshot for slow followers */

	uint32_t max_pending_reads; /* ReadIndex requests outstanding */
	uint32_t read_timeout_ms;   /* a ReadIndex not answered by then fails (KEEL_TIMEOUT) */
};

/* Fills defaults (T=1000ms, heartbeat 100ms, pre-vote and check-quorum on,
 * 256 entries / 1 MiB per append, 64 msgs / 8 MiB in flight, 1 MiB entries,
 * 64 MiB uncommitted, 8 MiB applied per ready, 64 persist batches, 4096
 * outbox messages, 1 MiB chunks, 4 chunks in flight, 1000 trailing entries,
 * 4096 pending reads, read timeout = 2T). The caller sets id and rng. */
void raft_options_default(struct raft_options *opts);

/* The decode limits matching these options (what a peer may send us). */
void raft_options_msg_limits(const struct raft_options *opts, struct raft_msg_limits *limits);

/* ---- Lifecycle ---- */

struct raft;

/* Allocates a core (the one allocation besides the log and queues).
 * KEEL_INVAL for bad options (id 0, heartbeat >= election timeout, a zero
 * limit), KEEL_NOMEM. On error *out is untouched. */
enum keel_err raft_init(struct raft **out, const struct raft_options *opts);

/* Loads durable state, once, before anything else: the hard state, the
 * newest snapshot (NULL: none) and the entries after it (indexes contiguous
 * from snap->index + 1, or from 1 without a snapshot; terms non-decreasing
 * and <= hs->term). The configuration is that of the last config entry, or
 * the snapshot's. Copies everything. KEEL_CORRUPT when the pieces do not fit
 * together (gap, term order), KEEL_NOMEM. The node counts the snapshot as
 * applied: commit and applied start at snap->index (0 without one). */
enum keel_err raft_restore(struct raft *r, const struct raft_hard_state *hs,
			   const struct raft_snapshot_meta *snap, const struct raft_entry *entries,
			   size_t n_entries);

/* Frees everything; pointers from the last ready die. */
void raft_close(struct raft *r);

/* ---- Inputs ---- */

/* Advances the clock: elections, heartbeats, check-quorum, timeouts. */
void raft_tick(struct raft *r, uint64_t now_ms);

/* Feeds a peer message addressed to this server. Messages with a stale
 * term, from unknown servers where that matters, or otherwise unusable are
 * ignored (KEEL_OK); KEEL_INVAL for messages that are malformed as structs
 * (to != this id, from == 0 or == this id, unknown type); KEEL_PROTO for a
 * message only a broken peer sends (a second leader of our term). No input
 * can trip an assertion. */
enum keel_err raft_step(struct raft *r, const struct raft_msg *msg);

/* Appends a proposal on the leader and returns its (index, term). The
 * proposal is committed iff a later ready's committed[] has an entry with
 * that index AND that term; an entry with that index but another term means
 * it was lost (leadership changed) and the node fails the request.
 * KEEL_NOTLEADER (not leader, or leader removed from the config),
 * KEEL_BUSY (leadership transfer in progress, or uncommitted bytes over
 * max_uncommitted_bytes), KEEL_TOOBIG (size > max_entry_bytes), KEEL_NOMEM. */
enum keel_err raft_propose(struct raft *r, const void *data, uint32_t size, uint64_t *index,
			   uint64_t *term);

/* Asks for a read index for the node-chosen `ctx` (unique among pending
 * reads). Every call that returns KEEL_OK yields exactly one struct
 * raft_read_result with this ctx in a later ready: either KEEL_OK with an
 * index (serve the read once applied >= index: linearizable), or an error
 * (KEEL_NOTLEADER: leadership was lost; KEEL_NOLEADER; KEEL_TIMEOUT: not
 * confirmed within read_timeout_ms, e.g. messages were lost). The node may
 * retry with a new ctx. Leader: confirmed by a heartbeat round acked by a
 * quorum, after the leader committed an entry of its term. Follower:
 * forwarded to the leader. Errors returned now: KEEL_NOLEADER (follower
 * knows no leader), KEEL_LIMIT (max_pending_reads). */
enum keel_err raft_read_index(struct raft *r, uint64_t ctx);

/* Leadership transfer to voter `id` (leader only): catch it up, then send
 * TimeoutNow. Proposals get KEEL_BUSY until it ends; it is abandoned after
 * an election timeout. KEEL_NOTLEADER, KEEL_NOENT (not a voter), KEEL_OK if
 * id is this leader already. */
enum keel_err raft_transfer_leader(struct raft *r, uint64_t id);

enum raft_change {
	RAFT_ADD_VOTER = 1,
	RAFT_ADD_LEARNER = 2,
	RAFT_PROMOTE = 3, /* learner -> voter */
	RAFT_REMOVE = 4,  /* voter or learner; may be the leader itself */
};

/* Single-server membership change (leader only): appends a config entry,
 * in force as soon as it is appended. One change at a time, and only after
 * the leader committed an entry of its term. Returns the entry's (index,
 * term) like raft_propose. A leader that removes itself keeps leading until
 * the change commits, then steps down. KEEL_NOTLEADER, KEEL_BUSY (a change
 * is uncommitted, the term's first entry is not committed yet, or a transfer
 * is in progress), KEEL_EXIST (already in that role), KEEL_NOENT (not a
 * member), KEEL_INVAL (id 0; promoting a voter; removing the last voter),
 * KEEL_LIMIT (RAFT_MAX_MEMBERS). */
enum keel_err raft_change_member(struct raft *r, enum raft_change change, uint64_t id,
				 uint64_t *index, uint64_t *term);

/* ---- Outputs ---- */

struct raft_snapshot_chunk {
	struct raft_snapshot_meta meta; /* the snapshot this chunk belongs to */
	uint64_t offset;                /* offset 0 starts a new temp file */
	uint32_t size;
	bool last;
	const uint8_t *data;
};

struct raft_snapshot_install {
	struct raft_snapshot_meta meta;
	/* true: every stored entry is obsolete (delete them all); false: the
	 * stored entries after meta.index still match and stay. Stored entries
	 * <= meta.index are obsolete either way. */
	bool discard_log;
};

struct raft_read_result {
	uint64_t ctx;
	uint64_t index; /* when err == KEEL_OK */
	enum keel_err err;
};

enum raft_role {
	RAFT_FOLLOWER = 1,
	RAFT_PRE_CANDIDATE = 2,
	RAFT_CANDIDATE = 3,
	RAFT_LEADER = 4,
};

struct raft_ready {
	/* ---- the persist batch (persist_id == 0: nothing to persist) ----
	 * Make durable in this order, then raft_persisted(persist_id):
	 * 1. hard state, if hard_state_changed (atomically: write-temp, fsync,
	 *    rename), before everything else of the batch, so that no chunk,
	 *    install or entry of a newer term is ever on disk under an older
	 *    stored term (recovery refuses that). Saving only the newest hard
	 *    state of several batches written together, before all of them, is
	 *    as good: terms only grow, and the server's WAL writer does that;
	 * 2. chunks[]: write chunk bytes to the temp file of chunk.meta
	 *    (offset 0 truncates/creates it);
	 * 3. install (if not NULL): the temp file is complete — make it the
	 *    current snapshot, drop stored entries as install->discard_log says;
	 *    once durable, load it into the state machine BEFORE calling
	 *    raft_persisted() (the core then counts install->meta.index as
	 *    applied; report it with raft_applied() too);
	 * 4. entries[]: delete stored entries with index >= entries[0].index,
	 *    then append these.
	 * A crash part-way leaves a prefix of these steps, which recovery
	 * accepts: raft_persisted() comes only after all of it is synced, so no
	 * vote, ack or commit has relied on the missing part. */
	uint64_t persist_id;
	const struct raft_snapshot_chunk *chunks;
	size_t n_chunks;
	const struct raft_snapshot_install *install;
	const struct raft_entry *entries;
	size_t n_entries;
	bool hard_state_changed;
	struct raft_hard_state hard_state;

	/* ---- to do now, whatever the batch ---- */
	const struct raft_msg *msgs; /* send; all are safe to send at once */
	size_t n_msgs;
	const struct raft_entry *committed; /* apply in order (index, term, type, data) */
	size_t n_committed;
	const struct raft_read_result *reads; /* answered ReadIndex requests */
	size_t n_reads;

	/* ---- soft state (for routing and logs) ---- */
	bool soft_state_changed; /* role or leader differs from the last ready */
	uint8_t role;            /* enum raft_role */
	uint64_t leader;         /* 0: unknown */
	uint64_t term;
	uint64_t commit;
};


/* Collects the outputs accumulated since the last advance. Returns false
 * (and zeroes *rd) when there is nothing. */
bool raft_ready(struct raft *r, struct raft_ready *rd);

/* Marks everything in rd as handed over: its batch to storage, its messages
 * as sent, its committed entries as being applied, its reads as answered.
 * rd must be the ready just returned. */
void raft_advance(struct raft *r, const struct raft_ready *rd);

/* Batch `persist_id` (and every earlier one) is durable. Must be called in
 * order, for batches handed out. KEEL_INVAL otherwise. */
enum keel_err raft_persisted(struct raft *r, uint64_t persist_id);

/* The state machine has applied every committed entry up to `index`
 * (monotonic, <= the last committed entry handed out). */
void raft_applied(struct raft *r, uint64_t index);

/* The node wrote a snapshot durably: the state machine after `meta->index`
 * (<= applied), whose term and config must match the log's. The core sends
 * it to followers that need it and compacts the log to keep
 * snapshot_trailing_entries entries before meta->index. The node may delete
 * older snapshots, except one still being sent (it reports failure if it
 * did). KEEL_INVAL on mismatch, KEEL_STALE when older than the newest. */
enum keel_err raft_snapshot_taken(struct raft *r, const struct raft_snapshot_meta *meta);

enum raft_snapshot_status {
	RAFT_SNAPSHOT_FAILED = 1, /* node could not read the snapshot a chunk asked for */
};

/* The snapshot transfer to `peer` cannot continue; the core restarts it
 * with the newest snapshot after a pause. */
void raft_report_snapshot(struct raft *r, uint64_t peer, enum raft_snapshot_status status);

/* The transport could not deliver to `peer` (link down). On the leader:
 * stop pipelining to it and probe instead. On a follower whose leader it
 * is: stop counting the leader as live for pre-vote stickiness and campaign
 * after 2-4 heartbeat intervals unless the leader is heard from again —
 * a leader whose process died is replaced in a fraction of an election
 * timeout. Optional; lost messages are detected anyway. */
void raft_report_unreachable(struct raft *r, uint64_t peer);

/* ---- Status, for operators and tests ---- */

enum raft_progress_state {
	RAFT_PROGRESS_PROBE = 1,     /* one AppendEntries at a time, finding next */
	RAFT_PROGRESS_REPLICATE = 2, /* pipelining */
	RAFT_PROGRESS_SNAPSHOT = 3,  /* sending a snapshot */
};

struct raft_member_status {
	uint64_t id;
	uint8_t role;      /* enum raft_member_role */
	/* Leader only (zero elsewhere; for the leader itself, match is its
	 * persisted index): */
	uint64_t match_index;
	uint64_t next_index;
	uint8_t state;     /* enum raft_progress_state */
	uint32_t inflight; /* messages (or chunks) in flight */
	bool recent_active;
	uint64_t snapshot_index; /* snapshot being sent, 0 if none */
	uint64_t snapshot_offset;
};

struct raft_status {
	uint64_t id;
	uint8_t role; /* enum raft_role */
	uint64_t term;
	uint64_t vote;
	uint64_t leader;
	uint64_t commit_index;
	uint64_t applied_index;
	uint64_t persisted_index;
	uint64_t first_index; /* first entry in memory */
	uint64_t last_index;
	uint64_t last_term;
	uint64_t snapshot_index;
	uint64_t snapshot_term;
	uint64_t config_index; /* index of the config in force (0: snapshot/boot) */
	uint64_t transfer_target; /* 0: none */
	uint32_t pending_reads;
	uint32_t persist_batches; /* handed out, not yet persisted */
	/* Times a follower was found missing entries it had acknowledged (its
	 * disk lost them); each is re-replicated. Nonzero deserves a look. */
	uint64_t follower_lost_entries;
	uint32_t n_members;
	struct raft_member_status members[RAFT_MAX_MEMBERS];
};

void raft_status(const struct raft *r, struct raft_status *st);

/* Cheap read-only accessors (no copy of the whole status). */
uint8_t raft_role(const struct raft *r);
uint64_t raft_term(const struct raft *r);
uint64_t raft_leader(const struct raft *r);
uint64_t raft_commit_index(const struct raft *r);
uint64_t raft_last_index(const struct raft *r);
uint64_t raft_first_index(const struct raft *r); /* first entry in memory */

/* The entry at `index` if it is in memory (first..last): its data points
 * into the core, valid until the next call that takes a non-const struct
 * raft *. False otherwise. For checkers and for serving log reads. */
bool raft_entry_at(const struct raft *r, uint64_t index, struct raft_entry *out);

/* The configuration in force now (the latest in the log). Valid until the
 * next call that takes a non-const struct raft *. */
const struct raft_config *raft_config(const struct raft *r);

/* The configuration in force at `index` (what a snapshot taken at that
 * applied index must carry). KEEL_NOENT when index is before the log in
 * memory (compacted, other than the compaction point itself) or past its
 * end. */
enum keel_err raft_config_at_index(const struct raft *r, uint64_t index, struct raft_config *out);

/* Names for logs ("leader", "probe", ...); "?" when unknown. */
const char *raft_role_name(uint8_t role);
const char *raft_progress_state_name(uint8_t state);

#endif
