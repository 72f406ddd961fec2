/*
 * install.h — receiving a snapshot from the leader: its chunks written into
 * a temp file, then the install that puts it in place and drops the log it
 * replaces. The server's storage adapter (node/storage.c) and the
 * simulator's host (sim/host.c) both run these from a writer prelude
 * (writer.h), so a received snapshot is made durable by one piece of code.
 *
 *   chunk:    open snap-I-T.snap.tmp (create), truncate when the offset is
 *             0 (a transfer starting over), pwrite, fdatasync;
 *   install:  rename the temp file into place, fsync the directory,
 *             verify the file's checksum (a damaged one is unlinked), then
 *             wal_reset — or wal_compact when the log on disk itself holds
 *             the snapshot's entry with its term.
 *
 * Why "on disk itself": the core decides discard_log from its in-memory
 * log, which may hold the entry at the snapshot index before storage has
 * it (found by the simulator, pinned seed 1056/5); keeping the stored log
 * then leaves a gap at the next append.
 *
 * Errors: KEEL_IO / KEEL_NOSPACE (the storage failed), KEEL_CORRUPT (the
 * received file does not verify), or the WAL's own error; the reason is in
 * errmsg. Both functions use the WAL's vfs and directory (wal->config).
 */
#ifndef KEEL_WAL_INSTALL_H
#define KEEL_WAL_INSTALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "wal/wal.h"

enum keel_err wal_install_write_chunk(const struct wal_config *config, uint64_t index,
				      uint64_t term, uint64_t offset, const void *data,
				      size_t size, char errmsg[WAL_ERRMSG_SIZE]);

/* On success `name` (WAL_NAME_MAX) holds the installed file's name. */
enum keel_err wal_install_snapshot(struct wal *wal, uint64_t index, uint64_t term,
				   bool discard_log, char name[WAL_NAME_MAX],
				   char errmsg[WAL_ERRMSG_SIZE]);

#endif
