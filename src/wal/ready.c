/*
 * ready.c — a Raft ready as a writer batch (ready.h).
 */
#include "wal/ready.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

enum keel_err wal_batch_from_ready(const struct raft_ready *rd, struct wal_ready_scratch *scratch,
				   struct wal_batch *out)
{
	memset(out, 0, sizeof(*out));
	if (rd->install != NULL) {
		out->install_index = rd->install->meta.index;
		out->prune_snapshots = true;
	}
	if (rd->hard_state_changed) {
		memset(&scratch->hard_state, 0, sizeof(scratch->hard_state));
		scratch->hard_state.term = rd->hard_state.term;
		scratch->hard_state.voted_for = rd->hard_state.vote;
		out->hard_state = &scratch->hard_state;
	}
	if (rd->n_entries == 0) {
		return KEEL_OK;
	}
	if (rd->n_entries > scratch->capacity) {
		size_t cap = KEEL_MAX(rd->n_entries, 2 * scratch->capacity);
		struct wal_entry *grown = realloc(scratch->entries, cap * sizeof(*grown));
		if (grown == NULL) {
			return KEEL_NOMEM;
		}
		scratch->entries = grown;
		scratch->capacity = cap;
	}
	for (size_t i = 0; i < rd->n_entries; i++) {
		const struct raft_entry *e = &rd->entries[i];
		scratch->entries[i] = (struct wal_entry){.index = e->index, .term = e->term,
							 .type = e->type, .size = e->size,
							 .data = e->data};
	}
	/* Raft: stored entries from the first one on are replaced. */
	out->truncate_from = rd->entries[0].index;
	out->entries = scratch->entries;
	out->entry_count = rd->n_entries;
	return KEEL_OK;
}

void wal_ready_scratch_free(struct wal_ready_scratch *scratch)
{
	free(scratch->entries);
	scratch->entries = NULL;
	scratch->capacity = 0;
}
