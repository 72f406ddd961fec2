/*
 * disk.h — the storage of a simulated server: the REAL write-ahead log
 * (src/wal) over the fault-injecting in-memory file system (src/wal/vfs.h),
 * waldisk.c. The server core persists through the real WAL writer over it
 * (sim_waldisk_writer_*, below); the table is the rest of a disk's life:
 *   load(out)       what a starting process finds (hard state, newest
 *                   snapshot with its state-machine payload, the entries
 *                   after it) — or a refusal to start (KEEL_CORRUPT and a
 *                   reason: the server needs repair, see sim/repair.c);
 *   crash(rng)      power loss: what was not synced is lost, except what the
 *                   fault model lets survive (a prefix, a torn write);
 *   snapshot_bytes()   a retained snapshot as it is sent to followers
 *                   (chunk offsets count in these bytes: meta.size_bytes);
 *   snapshot_payload() the state machine's part of a retained snapshot;
 *   inject/heal     storage faults; failed/errmsg; stats; describe.
 *
 * Errors. A call that fails because the storage failed (injected EIO, the
 * power went off mid-operation) returns an error and failed() turns true
 * (sticky): the server must stop serving and restart, which runs recovery —
 * the real server's rule. Any other error (KEEL_INVAL: the server asked for
 * something inconsistent) is a bug the simulator reports.
 *
 * Ownership: pointers returned by load, snapshot_bytes and
 * snapshot_payload point into the disk and stay valid until the next call
 * that changes it (a writer run, crash, load, a snapshot, close).
 */
#ifndef KEEL_SIM_DISK_H
#define KEEL_SIM_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/rng.h"
#include "raft/raft.h"

struct sim_disk_state {
	struct raft_hard_state hs;
	bool has_snapshot;
	struct raft_snapshot_meta snapshot; /* size_bytes: the transfer size */
	const uint8_t *snapshot_payload;    /* the state machine's bytes */
	uint64_t snapshot_payload_size;
	const struct raft_entry *entries;
	size_t n_entries;
};

/* Faults a disk may support (inject returns false when it does not). */
enum sim_disk_fault {
	/* The nth of the next few writes, syncs, renames or directory syncs
	 * fails with EIO (sticky: the node stops). */
	SIM_DISK_EIO_SOON = 1,
	/* The power goes off after a few more mutating calls: the node dies
	 * in the middle of whatever the WAL is doing then. */
	SIM_DISK_POWER_CUT_SOON = 2,
	/* One of the next few reads flips a bit (the stored bytes stay
	 * intact): a transient error the storage must ride out. */
	SIM_DISK_READ_FLIP = 3,
	/* Bit rot: one stored bit flips in a file other than the log's tail
	 * segment (only while the node is down). */
	SIM_DISK_BIT_ROT = 4,
};

/* Counters a disk keeps for the run's report. */
struct sim_disk_stats {
	uint64_t segment_rolls;     /* a new tail segment was started */
	uint64_t segments_reused;   /* ... in a recycled spare file */
	uint64_t compactions;       /* segments retired behind a snapshot */
	uint64_t torn_crashes;      /* crashes with unsynced writes in flight */
	uint64_t injected_failures; /* EIO and power cuts that fired */
	uint64_t read_flips;
	uint64_t repairs_at_start;  /* recovery repaired something (notes) */
};

struct sim_disk;

struct sim_disk_ops {
	enum keel_err (*load)(struct sim_disk *d, struct sim_disk_state *out, char *why,
			      size_t why_size);
	/* Returns true when unsynced writes were in flight. */
	bool (*crash)(struct sim_disk *d, struct keel_rng *rng);
	const uint8_t *(*snapshot_bytes)(struct sim_disk *d, uint64_t index, uint64_t term,
					 uint64_t *size);
	const uint8_t *(*snapshot_payload)(struct sim_disk *d, uint64_t index, uint64_t term,
					   uint64_t *size);
	bool (*failed)(const struct sim_disk *d);
	/* Why the last call failed (or the failure that made it sticky). */
	const char *(*errmsg)(const struct sim_disk *d);
	bool (*inject)(struct sim_disk *d, enum sim_disk_fault fault, struct keel_rng *rng);
	/* Cancels every injected fault that has not fired. */
	void (*heal)(struct sim_disk *d);
	void (*stats)(const struct sim_disk *d, struct sim_disk_stats *out);
	/* A line naming the files and their sizes (for traces of refusals). */
	void (*describe)(struct sim_disk *d, char *out, size_t size);
	void (*close)(struct sim_disk *d);
};

struct sim_disk {
	const struct sim_disk_ops *ops;
};


/* What every node of a run shares: the segment size (small, so that
 * segments roll, are compacted and reused in every run) and the largest
 * entry a segment holds (the Raft core's max_entry_bytes must not exceed
 * it). */
struct sim_wal_params {
	uint64_t segment_size_bytes;
	uint32_t max_entry_bytes;
};

void sim_waldisk_params(struct keel_rng *rng, struct sim_wal_params *out);
/* Raises the segment size (and the largest entry) to at least this. */
void sim_waldisk_params_at_least(struct sim_wal_params *p, uint64_t segment_size_bytes);

/* The real WAL over a fault vfs of its own, seeded with `seed` (waldisk.c).
 * The per-node parameters (preallocation mode, spares, write buffer,
 * snapshots retained) are drawn from the seed too. */
struct sim_disk *sim_waldisk_new(uint64_t seed, const struct sim_wal_params *params);

/* The server's persistence path over a WAL disk (sim/host.c), instead of
 * submit/sync_one: after load, the real WAL writer (wal/writer.h) in manual
 * mode over the disk's WAL; `done` gets each completion (inside run), except
 * those of a crash. A crash with batches queued cuts the power inside the
 * group's writes half of the time, else drops them unwritten. */
struct wal;
struct wal_batch;
struct wal_completion;
enum keel_err sim_waldisk_writer_start(struct sim_disk *d,
				       void (*done)(void *arg, const struct wal_completion *c),
				       void *arg);
enum keel_err sim_waldisk_writer_submit(struct sim_disk *d, const struct wal_batch *batch);
/* A new member's first write (after load): the bootstrap entry with term 1,
 * through the writer, durable on return. */
enum keel_err sim_waldisk_bootstrap(struct sim_disk *d, const struct raft_entry *entry);
/* Writes and syncs what is queued as one group (completions run inside);
 * returns how many batches completed. */
size_t sim_waldisk_writer_run(struct sim_disk *d);
/* A writer prelude's work for received snapshot chunks and an install. */
enum keel_err sim_waldisk_receive(struct sim_disk *d, struct wal *wal,
				  const struct raft_snapshot_chunk *chunks, size_t n_chunks,
				  const struct raft_snapshot_install *install, char *errmsg);
/* The node's own snapshot file (durable on return), without compaction. */
enum keel_err sim_waldisk_snapshot_file(struct sim_disk *d, const struct raft_snapshot_meta *meta,
					const uint8_t *payload, uint64_t payload_size,
					uint64_t *transfer_size);

#endif
