/*
 * format.h — the partition log's files other than the batches themselves:
 * names, the offset and time indexes, the leader-epoch checkpoint and
 * partition.metadata. docs/plog-format.md describes them byte by byte.
 *
 * A partition directory `<topic>-<partition>/` holds
 *
 *   <base:20 digits>.log        batches exactly as stored (batch.h)
 *   <base:20 digits>.index      sparse offset index of a rolled segment
 *   <base:20 digits>.timeindex  time index of a rolled segment
 *   leader-epoch-checkpoint     epoch -> start offset
 *   partition.metadata          the topic id
 *
 * Index files are written whole when a segment is rolled (the active
 * segment keeps its indexes in memory and is rescanned on open). Each starts
 * with a 48-byte header that names the log size and end offset it describes
 * and a CRC-32C over the header and all entries, so a stale, torn or foreign
 * index is recognized and rebuilt by a scan instead of trusted:
 *
 *    0 magic "KEELPIDX" / "KEELPTIX"   8 u32 version   12 u32 entry count
 *   16 u64 log size   24 i64 end offset (the next offset after the segment)
 *   32 i64 max timestamp   40 u32 reserved (0)   44 u32 crc32c
 *   48 entries: offset index u32 relative offset, u32 position (8 bytes);
 *              time index   i64 timestamp, u32 relative offset (12 bytes)
 *
 * leader-epoch-checkpoint and partition.metadata are replaced whole (temp
 * file, datasync, rename, sync_dir):
 *
 *   epoch:    0 "KEELPEPO"  8 u32 version  12 u32 count  16 entries
 *             (i32 epoch, i64 start offset: 12 bytes each), then u32 crc32c
 *             of everything before it
 *   metadata: 0 "KEELPMET"  8 u32 version  12 16-byte topic id  28 u32 crc32c
 *
 * Everything is big-endian. Pure: encoders write caller memory, decoders
 * check every count against the bytes present before anything is used.
 */
#ifndef KEEL_PLOG_FORMAT_H
#define KEEL_PLOG_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define PLOG_FORMAT_VERSION 1

#define PLOG_OFFSET_DIGITS 20
/* Longest file name we create ("<20 digits>.timeindex" and the temp names). */
#define PLOG_NAME_MAX 40

#define PLOG_EPOCH_FILE "leader-epoch-checkpoint"
#define PLOG_METADATA_FILE "partition.metadata"
#define PLOG_TEMP_SUFFIX ".tmp"

enum plog_file_kind {
	PLOG_FILE_OTHER,
	PLOG_FILE_LOG,
	PLOG_FILE_INDEX,
	PLOG_FILE_TIMEINDEX,
	PLOG_FILE_TEMP, /* a leftover "*.tmp" from an interrupted replace */
	PLOG_FILE_SNAPSHOT, /* producer state (producer.h) */
};

/* Classifies a directory entry; for segment files sets *base_offset. */
enum plog_file_kind plog_parse_file_name(const char *name, int64_t *base_offset);

/* "<base:20 digits><suffix>" into out (PLOG_NAME_MAX bytes). */
void plog_file_name(char *out, int64_t base_offset, enum plog_file_kind kind);

/* ---- index files ---- */

#define PLOG_INDEX_HEADER_SIZE 48
#define PLOG_INDEX_ENTRY_SIZE 8
#define PLOG_TIMEINDEX_ENTRY_SIZE 12

struct plog_index_entry {
	uint32_t relative_offset;
	uint32_t position;
};

struct plog_time_entry {
	int64_t timestamp;
	uint32_t relative_offset;
};

/* What an index file header promises about its segment. */
struct plog_index_header {
	uint32_t entry_count;
	uint64_t log_size;
	int64_t end_offset;
	int64_t max_timestamp;
};

/* Bytes of an index file with `count` entries of `entry_size`. */
static inline size_t plog_index_file_size(uint32_t count, size_t entry_size)
{
	return PLOG_INDEX_HEADER_SIZE + (size_t)count * entry_size;
}

/* Encode whole files into out (plog_index_file_size bytes). */
void plog_index_encode(uint8_t *out, const struct plog_index_header *h,
		       const struct plog_index_entry *entries);
void plog_timeindex_encode(uint8_t *out, const struct plog_index_header *h,
			   const struct plog_time_entry *entries);

/* Decode a whole file of `size` bytes: KEEL_CORRUPT on a bad magic,
 * checksum, count or size, KEEL_UNSUPPORTED on another version. Entries are
 * written to `entries` (room for h->entry_count, which the caller sizes from
 * plog_index_peek_count first). */
enum keel_err plog_index_peek_count(const uint8_t *buf, size_t size, bool time_index,
				    uint32_t *count);
enum keel_err plog_index_decode(const uint8_t *buf, size_t size, struct plog_index_header *h,
				struct plog_index_entry *entries);
enum keel_err plog_timeindex_decode(const uint8_t *buf, size_t size, struct plog_index_header *h,
				    struct plog_time_entry *entries);

/* ---- leader-epoch checkpoint ---- */

#define PLOG_EPOCH_HEADER_SIZE 16
#define PLOG_EPOCH_ENTRY_SIZE 12
/* Most entries a checkpoint may hold (a decoder refuses more). */
#define PLOG_EPOCH_MAX_ENTRIES 65536

struct plog_epoch_entry {
	int32_t epoch;
	int64_t start_offset;
};

static inline size_t plog_epoch_file_size(uint32_t count)
{
	return PLOG_EPOCH_HEADER_SIZE + (size_t)count * PLOG_EPOCH_ENTRY_SIZE + 4;
}

void plog_epoch_file_encode(uint8_t *out, const struct plog_epoch_entry *entries,
			    uint32_t count);

/* Decodes into entries (room for max_count); also checks that epochs and
 * start offsets both increase. */
enum keel_err plog_epoch_file_decode(const uint8_t *buf, size_t size,
				     struct plog_epoch_entry *entries, uint32_t max_count,
				     uint32_t *count);

/* ---- partition.metadata ---- */

#define PLOG_TOPIC_ID_SIZE 16
#define PLOG_METADATA_FILE_SIZE 32

void plog_metadata_encode(uint8_t out[PLOG_METADATA_FILE_SIZE],
			  const uint8_t topic_id[PLOG_TOPIC_ID_SIZE]);
enum keel_err plog_metadata_decode(const uint8_t *buf, size_t size,
				   uint8_t topic_id[PLOG_TOPIC_ID_SIZE]);

#endif
