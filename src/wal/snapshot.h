/*
 * snapshot.h — snapshot files in the WAL directory: write, read, list, prune.
 *
 * A snapshot file `snap-<index>-<term>.snap` holds the state machine at a log
 * index: a header (format.h) with index, term, a membership-configuration
 * blob and the payload's size and CRC-32C, then the payload bytes.
 *
 * Writing streams into `snap-<index>-<term>.snap.tmp` (begin, append any
 * number of times, commit): commit rewrites the header with the payload's
 * size and checksum, datasyncs, renames into place, syncs the directory and
 * prunes older snapshots (keeping config->snapshots_retained). Only a
 * complete, synced snapshot ever has the final name, so after commit returns
 * KEEL_OK the snapshot survives any crash, and a crash before that leaves
 * at most a .tmp file that the next wal_open() deletes.
 *
 * Reading streams the payload and verifies its checksum at the end: data
 * handed out before the last read returned KEEL_OK is unverified.
 *
 * Threads: these functions touch only snapshot files, never the log, so a
 * node may write snapshots on a background thread while the storage thread
 * appends. Two writers for the same (index, term) must not run at once.
 *
 * Ownership: writers and readers are caller-allocated; begin/open pair with
 * commit-or-abort/close. Metadata's membership points into the arena passed
 * to the function that filled it and lives as long as that arena.
 */
#ifndef KEEL_WAL_SNAPSHOT_H
#define KEEL_WAL_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "wal/config.h"
#include "wal/format.h"

struct wal_snapshot_meta {
	uint64_t index;
	uint64_t term;
	uint64_t payload_size;
	uint32_t payload_crc;
	uint32_t membership_size;
	const uint8_t *membership; /* NULL when membership_size is 0 or not loaded */
	char name[WAL_NAME_MAX];   /* file name within the directory */
};

struct wal_snapshot_writer {
	struct wal_config config;
	struct wal_vfs_file *file;
	struct wal_snapshot_header header;
	uint8_t *header_bytes; /* encoded header with the membership (owned) */
	size_t header_size;
	uint64_t written; /* payload bytes so far */
	uint32_t crc;     /* of the payload so far */
	bool failed;
	char tmp_name[WAL_NAME_MAX];
	char name[WAL_NAME_MAX];
	char errmsg[WAL_ERRMSG_SIZE];
};

/* Starts a snapshot at (index, term). The membership blob is copied. On
 * error nothing is left to abort; w->errmsg says why. */
enum keel_err wal_snapshot_begin(struct wal_snapshot_writer *w, const struct wal_config *config,
				 uint64_t index, uint64_t term, const void *membership,
				 uint32_t membership_size);

/* Appends payload bytes. After an error the writer only accepts abort. */
enum keel_err wal_snapshot_append(struct wal_snapshot_writer *w, const void *data, size_t size);

/* Makes the snapshot durable under its final name and prunes old ones. On
 * error the temp file is removed (best effort). Either way the writer is
 * finished; do not abort it afterwards. */
enum keel_err wal_snapshot_commit(struct wal_snapshot_writer *w);

/* Drops an unfinished snapshot (closes and removes the temp file). */
void wal_snapshot_abort(struct wal_snapshot_writer *w);

/* begin + append + commit in one call; errmsg gets the reason. */
enum keel_err wal_snapshot_save(const struct wal_config *config, uint64_t index, uint64_t term,
				const void *membership, uint32_t membership_size,
				const void *payload, uint64_t payload_size,
				char errmsg[WAL_ERRMSG_SIZE]);

struct wal_snapshot_reader {
	struct wal_vfs_file *file;
	struct wal_snapshot_meta meta;
	uint64_t payload_offset; /* where the payload starts in the file */
	uint64_t read;           /* payload bytes handed out */
	uint32_t crc;
	char errmsg[WAL_ERRMSG_SIZE];
};

/* Opens snapshot file `name`, reads and checks its header (and that the
 * file size matches). The membership is copied into `arena` when it is
 * not NULL. On error there is nothing to close. */
enum keel_err wal_snapshot_open(struct wal_snapshot_reader *r, const struct wal_config *config,
				const char *name, struct keel_arena *arena);

/* Reads the next payload bytes into buf (up to size); *nread is 0 at the
 * end. The call that delivers the last byte verifies the checksum and
 * returns KEEL_CORRUPT (with errmsg) on a mismatch. */
enum keel_err wal_snapshot_read(struct wal_snapshot_reader *r, void *buf, size_t size,
				size_t *nread);

void wal_snapshot_close(struct wal_snapshot_reader *r);

/* Opens, reads the whole payload and checks it: KEEL_OK only for a snapshot
 * that is entirely intact (one re-read is tried before a checksum mismatch
 * counts, to ride out a flipped bit in transit). */
enum keel_err wal_snapshot_verify(const struct wal_config *config, const char *name,
				  struct keel_arena *arena, struct wal_snapshot_meta *meta,
				  char errmsg[WAL_ERRMSG_SIZE]);

#define WAL_SNAPSHOT_LIST_MAX 64

/* The snapshot files (names only parsed, not opened), newest (highest
 * index, then term) first; at most WAL_SNAPSHOT_LIST_MAX (the newest). */
struct wal_snapshot_list {
	size_t count;
	struct {
		uint64_t index;
		uint64_t term;
		char name[WAL_NAME_MAX];
	} items[WAL_SNAPSHOT_LIST_MAX];
};

enum keel_err wal_snapshot_list(const struct wal_config *config, struct wal_snapshot_list *out,
				char errmsg[WAL_ERRMSG_SIZE]);

/* Removes all but the `retain` newest snapshot files. */
enum keel_err wal_snapshot_prune(const struct wal_config *config, uint32_t retain,
				 char errmsg[WAL_ERRMSG_SIZE]);

#endif
