/*
 * format.h — the WAL's on-disk formats: segment header, record, hard state,
 * snapshot header, file names, and the segment scanner.
 *
 * Everything here is pure: it encodes into and decodes from caller memory,
 * never allocates, never does I/O. Every integer is big-endian and read
 * through bounds checks (base/buf.h); every structure carries a CRC-32C.
 * docs/storage-format.md describes the layouts byte by byte and explains
 * the choices (why a generation number, why a batch offset).
 *
 * Segment file  = header (64 bytes) + records, each padded to 8 bytes.
 *
 *   header   0 magic "KEELWSEG"  8 u32 version  12 u32 header size (64)
 *           16 u64 generation   24 u64 first index  32 u64 segment size
 *           40 u64 prev term    48 reserved (12 zero bytes)
 *           60 u32 crc32c of 0..60
 *
 *   record   0 u32 payload size  4 u32 crc32c (of bytes 0..4 and 8..end)
 *            8 u64 generation   16 u64 term   24 u64 index
 *           32 u32 batch offset 36 u8 type    37 three zero bytes
 *           40 payload, then zero padding to a multiple of 8
 *
 * generation: unique per segment file life (it is in the file name too). A
 *   record counts only if its generation equals its segment's, so stale
 *   records left in a reused file, or past a truncation point, never do.
 * prev term: the term of the entry just before the first index when the
 *   segment was started (the snapshot's term after a reset), so that
 *   recovery can check log matching where one segment follows another.
 * batch offset: how many records precede this one in the same sync batch
 *   (the records written between two fdatasyncs). index - batch offset is
 *   the first index of the batch; the scanner uses it to tell a torn last
 *   batch (cut it) from damage followed by a later, hence synced, batch
 *   (corruption).
 *
 * Lifetimes: decoded structures point into the caller's buffer (payload,
 * membership, extra) and live as long as it does.
 */
#ifndef KEEL_WAL_FORMAT_H
#define KEEL_WAL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define WAL_FORMAT_VERSION 1

/* ---- segments and records ---- */

#define WAL_SEGMENT_MAGIC "KEELWSEG"
#define WAL_SEGMENT_HEADER_SIZE 64
#define WAL_RECORD_HEADER_SIZE 40
#define WAL_RECORD_ALIGN 8

struct wal_segment_header {
	uint32_t version;
	uint64_t generation;         /* > 0 */
	uint64_t first_index;        /* index of the first record, > 0 */
	uint64_t segment_size_bytes; /* the size it was created for (information) */
	uint64_t prev_term;          /* term of entry first_index - 1 (0: none) */
};

void wal_segment_header_encode(uint8_t out[WAL_SEGMENT_HEADER_SIZE],
			       const struct wal_segment_header *h);

/* KEEL_SHORT (fewer than 64 bytes), KEEL_CORRUPT (magic, checksum, zero
 * generation or index) or KEEL_UNSUPPORTED (a newer version); `why` says
 * which, for the operator. */
enum keel_err wal_segment_header_decode(const uint8_t *buf, size_t size,
					struct wal_segment_header *out, char *why,
					size_t why_size);

struct wal_record {
	uint64_t generation;
	uint64_t term;
	uint64_t index;
	uint32_t batch_offset;
	uint8_t type;
	uint32_t size;       /* payload bytes */
	const uint8_t *data; /* payload (into the decoded buffer) */
};

/* Bytes a record with `payload_size` bytes of payload takes on disk. */
static inline uint64_t wal_record_encoded_size(uint32_t payload_size)
{
	return WAL_RECORD_HEADER_SIZE +
	       (((uint64_t)payload_size + WAL_RECORD_ALIGN - 1) & ~(uint64_t)(WAL_RECORD_ALIGN - 1));
}

/* Writes wal_record_encoded_size(rec->size) bytes to out. */
void wal_record_encode(uint8_t *out, const struct wal_record *rec);

/* Writes only the 40-byte header (its checksum covers rec->data), for a
 * record whose payload is written separately, followed by zero padding to
 * wal_record_encoded_size(). */
void wal_record_encode_header(uint8_t out[WAL_RECORD_HEADER_SIZE], const struct wal_record *rec);

enum wal_record_check {
	WAL_RECORD_OK,
	WAL_RECORD_EMPTY,            /* all-zero header: never written */
	WAL_RECORD_OTHER_GENERATION, /* a record (or garbage) from another life */
	WAL_RECORD_SHORT,            /* fewer bytes left than the header or payload needs */
	WAL_RECORD_BAD_SIZE,         /* payload size over the limit */
	WAL_RECORD_BAD_CHECKSUM,
	WAL_RECORD_BAD_FIELD,        /* checksum fine, but index 0 or nonzero reserved bytes */
};

const char *wal_record_check_name(enum wal_record_check check);

/* Decodes the record at buf (avail bytes to the end of the segment) that
 * must belong to `generation`. On WAL_RECORD_OK, `out` is filled and its
 * data points into buf. */
enum wal_record_check wal_record_decode(const uint8_t *buf, size_t avail, uint64_t generation,
					uint32_t max_payload, struct wal_record *out);

/* ---- the segment scanner (recovery, the dump tool, the fuzzer) ---- */

enum wal_scan_end {
	WAL_SCAN_LIMIT,   /* stopped after the record with index == limit */
	WAL_SCAN_CLEAN,   /* records end; zeros, stale records or end of file follow */
	WAL_SCAN_TORN,    /* a damaged record in the last sync batch: cut here */
	WAL_SCAN_CORRUPT, /* damage or disorder that a torn write cannot explain */
};

const char *wal_scan_end_name(enum wal_scan_end end);

struct wal_scan_result {
	enum wal_scan_end end;
	uint64_t record_count;
	uint64_t last_index;  /* first_index - 1 when there is no record */
	uint64_t last_term;   /* 0 when there is no record */
	uint64_t end_offset;  /* just past the last valid record */
	uint64_t bad_offset;  /* TORN/CORRUPT: where the damage starts */
	bool ends_in_zeros;   /* CLEAN: the records end at zeros or the file's end */
	char reason[192];     /* TORN/CORRUPT: what is wrong, for the operator */
};

/* Called for each valid record in order; an error stops the scan and is
 * returned by wal_scan_segment. */
typedef enum keel_err (*wal_scan_fn)(void *arg, const struct wal_record *rec, uint64_t offset);

/*
 * Scans the records of one segment whose whole file (header included) is in
 * data[0..size). Records must carry the header's generation, consecutive
 * indexes from header->first_index and non-decreasing terms (starting from
 * min_term, the term before the segment, or 0 if unknown). Stops after the
 * record for `limit_index` (UINT64_MAX: no limit). When records end early it
 * searches the rest of the file for later records of this generation to
 * classify the end as CLEAN, TORN or CORRUPT (see the batch offset above).
 * `fn` may be NULL. Returns KEEL_OK (the verdict is in `out`) or the error
 * of `fn`.
 */
enum keel_err wal_scan_segment(const uint8_t *data, size_t size,
			       const struct wal_segment_header *header, uint64_t min_term,
			       uint64_t limit_index, uint32_t max_payload, wal_scan_fn fn, void *arg,
			       struct wal_scan_result *out);

/* ---- hard state ---- */

#define WAL_HARD_STATE_MAGIC "KEELHARD"
#define WAL_HARD_STATE_MAX_EXTRA (64u * 1024)
#define WAL_HARD_STATE_FIXED_SIZE 16 /* magic, version, body size */
#define WAL_HARD_STATE_BODY_V1 28    /* term, voted_for, commit_index, extra size */

/*
 * The Raft hard state: current term, the vote cast in it (0 = none), an
 * optional commit index (0 = not recorded; after a crash it may be ahead of
 * the durable log, Raft must clamp it) and an optional opaque blob for
 * whatever the core needs later (e.g. a membership configuration).
 *
 *   0 magic "KEELHARD"  8 u32 version  12 u32 body size
 *  16 body: u64 term, u64 voted_for, u64 commit_index, u32 extra size, extra
 *  16 + body size: u32 crc32c of everything before it
 *
 * A later version appends fields to the body (body size grows); a reader
 * refuses versions newer than it knows.
 */
struct wal_hard_state {
	uint64_t term;
	uint64_t voted_for;
	uint64_t commit_index;
	uint32_t extra_size;  /* <= WAL_HARD_STATE_MAX_EXTRA */
	const uint8_t *extra; /* NULL when extra_size is 0 */
};

size_t wal_hard_state_encoded_size(const struct wal_hard_state *hs);

/* Writes wal_hard_state_encoded_size(hs) bytes. */
void wal_hard_state_encode(uint8_t *out, const struct wal_hard_state *hs);

/* KEEL_CORRUPT / KEEL_SHORT / KEEL_UNSUPPORTED with `why`; on success
 * out->extra points into buf. */
enum keel_err wal_hard_state_decode(const uint8_t *buf, size_t size, struct wal_hard_state *out,
				    char *why, size_t why_size);

/* ---- snapshot header ---- */

#define WAL_SNAPSHOT_MAGIC "KEELSNAP"
#define WAL_SNAPSHOT_FIXED_SIZE 48

/*
 *   0 magic "KEELSNAP"  8 u32 version  12 u32 membership size
 *  16 u64 index  24 u64 term  32 u64 payload size  40 u32 payload crc32c
 *  44 u32 header crc32c (of bytes 0..44, then the membership bytes)
 *  48 membership blob, then the payload. The file is exactly
 *  48 + membership size + payload size bytes.
 */
struct wal_snapshot_header {
	uint32_t version;
	uint64_t index;
	uint64_t term;
	uint64_t payload_size;
	uint32_t payload_crc;
	uint32_t membership_size;
	const uint8_t *membership;
};

/* Writes WAL_SNAPSHOT_FIXED_SIZE + h->membership_size bytes. */
void wal_snapshot_header_encode(uint8_t *out, const struct wal_snapshot_header *h);

/* Decodes the header at the start of buf. KEEL_SHORT when buf is too small
 * to hold it (*header_size then says how much is needed, if known),
 * KEEL_TOOBIG when the membership is over max_membership, KEEL_CORRUPT or
 * KEEL_UNSUPPORTED with `why`. */
enum keel_err wal_snapshot_header_decode(const uint8_t *buf, size_t size,
					 uint32_t max_membership,
					 struct wal_snapshot_header *out, size_t *header_size,
					 char *why, size_t why_size);

/* ---- file names ---- */

#define WAL_NAME_MAX 64
#define WAL_HARD_STATE_NAME "hardstate"
#define WAL_HARD_STATE_TMP_NAME "hardstate.tmp"

enum wal_file_kind {
	WAL_FILE_OTHER,          /* not ours: left alone */
	WAL_FILE_SEGMENT,        /* seg-<generation>.wal */
	WAL_FILE_SPARE,          /* spare-<generation>.wal (reusable, not part of the log) */
	WAL_FILE_SNAPSHOT,       /* snap-<index>-<term>.snap */
	WAL_FILE_SNAPSHOT_TMP,   /* snap-<index>-<term>.snap.tmp */
	WAL_FILE_HARD_STATE,     /* hardstate */
	WAL_FILE_HARD_STATE_TMP, /* hardstate.tmp */
};

/* Numbers are 16 lowercase hex digits. */
void wal_segment_name(char out[WAL_NAME_MAX], uint64_t generation);
void wal_spare_name(char out[WAL_NAME_MAX], uint64_t generation);
void wal_snapshot_name(char out[WAL_NAME_MAX], uint64_t index, uint64_t term, bool tmp);

/* Classifies a directory entry; a and b get the numbers in the name
 * (generation; or index and term). */
enum wal_file_kind wal_parse_file_name(const char *name, uint64_t *a, uint64_t *b);

#endif
