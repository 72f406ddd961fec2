/*
 * disk.h — the storage a simulated node persists to, behind a small
 * interface so that the real WAL (src/wal over a fault-injecting vfs) can
 * replace the in-memory model without touching the rest of the simulator.
 *
 * The contract mirrors what the real node does with a raft_ready:
 *   submit(batch)   queue the persistent part of one ready (copied);
 *   sync_one()      the oldest queued batch becomes durable (its fsync
 *                   returned); batches become durable in submit order;
 *   crash(rng)      the process dies: batches not synced are lost, except
 *                   that a prefix of their writes, in order, may survive
 *                   (a torn batch, or batches whose fsync never returned);
 *   load(out)       what a restarting process finds (hard state, newest
 *                   snapshot with its bytes, the entries after it);
 *   save_snapshot() a snapshot the node took (durable at once: written to a
 *                   temp file, synced and renamed before it is reported);
 *   snapshot_bytes() read a retained snapshot to send chunks from it.
 *
 * Ownership: submit copies everything; pointers returned by load and
 * snapshot_bytes point into the disk and stay valid until the next call
 * that changes it.
 */
#ifndef KEEL_SIM_DISK_H
#define KEEL_SIM_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "raft/raft.h"

struct sim_disk_state {
	struct raft_hard_state hs;
	bool has_snapshot;
	struct raft_snapshot_meta snapshot;
	const uint8_t *snapshot_bytes;
	const struct raft_entry *entries;
	size_t n_entries;
};

struct sim_disk;

struct sim_disk_ops {
	void (*submit)(struct sim_disk *d, const struct raft_ready *rd);
	/* Returns the persist id made durable (0 if nothing was queued). */
	uint64_t (*sync_one)(struct sim_disk *d);
	/* Returns true when some unsynced writes survived the crash. */
	bool (*crash)(struct sim_disk *d, struct keel_rng *rng);
	void (*load)(struct sim_disk *d, struct sim_disk_state *out);
	void (*save_snapshot)(struct sim_disk *d, const struct raft_snapshot_meta *meta,
			      const uint8_t *bytes);
	/* Bytes of a retained snapshot (index, term), or NULL if pruned. */
	const uint8_t *(*snapshot_bytes)(struct sim_disk *d, uint64_t index, uint64_t term,
					 uint64_t *size);
	/* Batches submitted and not yet durable. */
	size_t (*pending)(const struct sim_disk *d);
	void (*close)(struct sim_disk *d);
};

struct sim_disk {
	const struct sim_disk_ops *ops;
};

/* The in-memory model (memdisk.c). */
struct sim_disk *sim_memdisk_new(void);

#endif
