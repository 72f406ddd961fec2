/*
 * hard_state.h — the Raft hard state file (term, vote, ...) in the WAL dir.
 *
 * The file `hardstate` is replaced atomically: written to `hardstate.tmp`,
 * datasynced, renamed over `hardstate`, directory synced. After save returns
 * KEEL_OK the new state survives any crash; a crash during save leaves the
 * old one. The format is in format.h (versioned, with a body size so later
 * versions can add fields).
 *
 * These functions only touch the two hard-state files, so they may run on
 * any thread; wal_save_hard_state() (wal.h) is the same save plus the WAL's
 * sticky failure state.
 */
#ifndef KEEL_WAL_HARD_STATE_H
#define KEEL_WAL_HARD_STATE_H

#include <stdbool.h>

#include "base/alloc.h"
#include "wal/config.h"
#include "wal/format.h"

enum keel_err wal_hard_state_save(const struct wal_config *config, const struct wal_hard_state *hs,
				  char errmsg[WAL_ERRMSG_SIZE]);

/* Loads the hard state. A missing file is not an error: *found is false and
 * *out is all zeros (term 0, no vote). A damaged file is KEEL_CORRUPT with
 * the file named in errmsg. out->extra is copied into `arena` and lives as
 * long as the arena. */
enum keel_err wal_hard_state_load(const struct wal_config *config, struct keel_arena *arena,
				  struct wal_hard_state *out, bool *found,
				  char errmsg[WAL_ERRMSG_SIZE]);

#endif
