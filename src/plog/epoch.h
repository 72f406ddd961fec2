/*
 * epoch.h — the leader-epoch cache: which leader epoch wrote which offsets
 * (KIP-101, KIP-279). In memory here; plog.c persists it as
 * leader-epoch-checkpoint (format.h) after every change.
 *
 * Entries (epoch, start offset) with both strictly/weakly increasing:
 * epochs strictly, start offsets never decreasing. Entry i covers offsets
 * [start_i, start_{i+1}) and the last one covers up to the log end offset.
 *
 * Pure: the caller owns the struct; plog_epochs_close frees the array.
 */
#ifndef KEEL_PLOG_EPOCH_H
#define KEEL_PLOG_EPOCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "plog/format.h"

/* Kafka's "undefined" for epochs and offsets. */
#define PLOG_UNDEFINED_EPOCH (-1)
#define PLOG_UNDEFINED_OFFSET (-1)

struct plog_epochs {
	struct plog_epoch_entry *entries;
	uint32_t count;
	uint32_t capacity;
};

void plog_epochs_init(struct plog_epochs *e);
void plog_epochs_close(struct plog_epochs *e);

/* The latest epoch, or PLOG_UNDEFINED_EPOCH when empty. */
int32_t plog_epochs_latest(const struct plog_epochs *e);

/* Records that `epoch` starts at `start_offset`. No change (and *changed
 * false) when epoch is already the latest. KEEL_STALE when epoch is below the
 * latest or start_offset below the latest's start; KEEL_LIMIT past
 * PLOG_EPOCH_MAX_ENTRIES; KEEL_NOMEM. */
enum keel_err plog_epochs_assign(struct plog_epochs *e, int32_t epoch, int64_t start_offset,
				 bool *changed);

/* OffsetForLeaderEpoch: for a requested epoch, the largest known epoch <=
 * it and the offset where the epochs after it begin (log_end_offset when the
 * requested epoch is the latest). Kafka's rules: (UNDEFINED, UNDEFINED) for
 * an undefined or a newer-than-known epoch; (requested, first start) when
 * the request is older than every entry. */
void plog_epochs_end_offset_for(const struct plog_epochs *e, int32_t requested,
				int64_t log_end_offset, int32_t *epoch, int64_t *end_offset);

/* After the log was cut to end at `end_offset`: drops entries that start at
 * or after it. Returns whether anything changed. */
bool plog_epochs_truncate_end(struct plog_epochs *e, int64_t end_offset);

/* After the log start moved to `start_offset`: drops entries wholly below
 * it and moves the start of the one that straddles it. */
bool plog_epochs_truncate_start(struct plog_epochs *e, int64_t start_offset);

/* Replaces the contents (KEEL_NOMEM). */
enum keel_err plog_epochs_set(struct plog_epochs *e, const struct plog_epoch_entry *entries,
			      uint32_t count);

#endif
