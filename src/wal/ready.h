/*
 * ready.h — the persistent part of a Raft ready as a WAL writer batch.
 *
 * Both hosts of the server core persist through the writer (writer.h): the
 * server's storage adapter (node/storage.c) and the simulator's
 * (sim/host.c). This is their one translation of a ready (raft.h) into a
 * batch: the hard state (term, vote), the install's index (the prelude
 * installs the snapshot and decides reset or compact) with the pruning of
 * older snapshot files, and the entries, which replace the stored log from
 * the first one on (truncate_from). Received snapshot chunks and the install
 * itself are the caller's prelude (install.h); prelude and user_data are
 * left for the caller to set.
 *
 * Ownership: the batch points into `rd` (entry data) and into `scratch`
 * (the entry array and the hard state), valid until the next call with the
 * same scratch; wal_writer_submit copies what it keeps.
 */
#ifndef KEEL_WAL_READY_H
#define KEEL_WAL_READY_H

#include <stddef.h>

#include "base/err.h"
#include "raft/raft.h"
#include "wal/writer.h"

struct wal_ready_scratch {
	struct wal_entry *entries; /* grown as needed; free with wal_ready_scratch_free */
	size_t capacity;
	struct wal_hard_state hard_state;
};

/* Fills `out` (zeroed first) from the ready; KEEL_NOMEM when the entry
 * array cannot grow. */
enum keel_err wal_batch_from_ready(const struct raft_ready *rd, struct wal_ready_scratch *scratch,
				   struct wal_batch *out);

void wal_ready_scratch_free(struct wal_ready_scratch *scratch);

#endif
