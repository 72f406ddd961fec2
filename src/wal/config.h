/*
 * config.h — what the WAL is told at start: where, through which vfs, and
 * the limits that bound every buffer it allocates.
 *
 * One `struct wal_config` describes one WAL directory. The same config is
 * passed to wal_open(), to the snapshot functions (which may run on another
 * thread) and to the hard-state functions. The WAL copies it; `vfs` and the
 * directory name are not owned and must outlive every user.
 */
#ifndef KEEL_WAL_CONFIG_H
#define KEEL_WAL_CONFIG_H

#include <stdint.h>

#include "base/err.h"
#include "wal/vfs.h"

/* Every error message buffer of the WAL API has this size. */
#define WAL_ERRMSG_SIZE 512

/* How a new segment file gets its blocks. */
enum wal_prealloc {
	/* Write zeros over the whole file and sync once, so that appends later
	 * overwrite allocated, written blocks: fdatasync then flushes data only
	 * (no journal commit for size or extent changes). Measured fastest. */
	WAL_PREALLOC_ZERO_FILL,
	/* fallocate(): blocks reserved but "unwritten"; the first write to each
	 * extent still needs a metadata update at fdatasync. */
	WAL_PREALLOC_FALLOCATE,
	/* Append to a growing file: every fdatasync also commits the size. */
	WAL_PREALLOC_NONE,
};

struct wal_config {
	struct wal_vfs *vfs; /* not owned */
	const char *dir;     /* the WAL's directory; not owned */

	uint64_t segment_size_bytes;   /* 64 MiB */
	uint32_t max_entry_size_bytes; /* 16 MiB; must fit a segment */
	enum wal_prealloc prealloc;    /* ZERO_FILL */
	/* Preallocated files kept ready for new segments; compacted segments
	 * are recycled into this pool instead of deleted (2). */
	uint32_t spare_segments;
	uint32_t write_buffer_bytes;   /* records gathered per pwrite (1 MiB) */
	uint32_t snapshots_retained;   /* snapshot files kept (2) */
	uint32_t max_membership_bytes; /* snapshot membership blob (1 MiB) */
	uint64_t max_snapshot_bytes;   /* snapshot payload (64 GiB) */
	/* Entries after the snapshot loaded into memory at open (1 GiB). */
	uint64_t max_recovery_bytes;
};

/* Fills `config` with the defaults above for `dir` through `vfs`. */
void wal_config_init(struct wal_config *config, struct wal_vfs *vfs, const char *dir);

/* KEEL_OK, or KEEL_CONFIG with the reason in errmsg. */
enum keel_err wal_config_check(const struct wal_config *config, char errmsg[WAL_ERRMSG_SIZE]);

#endif
