/*
 * producer.h — idempotent producers' state for one partition (KIP-98, with
 * KIP-360's rules for producers the partition does not know).
 *
 * For every producer id that wrote to the partition: its epoch and its last
 * PLOG_PRODUCER_BATCHES batches (first and last sequence, first and last
 * offset). The partition leader checks each batch of an idempotent producer
 * before it appends (plog_producers_check) and records it after
 * (plog_producers_update):
 *
 *   - same epoch, same sequence range as a kept batch: a retry. It is not
 *     written again; the client gets the original base offset (Kafka answers
 *     success, not DUPLICATE_SEQUENCE_NUMBER).
 *   - an epoch older than the producer's: INVALID_PRODUCER_EPOCH.
 *   - a newer epoch: its first sequence must be 0.
 *   - the same epoch: the first sequence must follow the last one (wrapping
 *     after INT32_MAX to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER.
 *   - a producer the partition does not know (never seen, or its batches
 *     gone with retention): any sequence is accepted (KIP-360).
 *   - the next batch in sequence was refused unwritten with a retriable
 *     error (plog_producers_refuse: the broker's NOT_ENOUGH_REPLICAS):
 *     a later batch of the same epoch, which can only be a gap until that
 *     one is written, gets PLOG_SEQ_AFTER_REFUSED — the same retriable
 *     answer — rather than OUT_OF_ORDER_SEQUENCE_NUMBER. It was in flight
 *     behind the refused one; the client retries both in order. (Kafka
 *     answers out of order here, which librdkafka before 2.3.0 can take as
 *     fatal: docs/brokers.md.) The mark is in memory only, and goes with
 *     the next batch written or a new epoch.
 *
 * The state is a function of the log: plog_producers_rebuild() recomputes
 * it from the newest usable snapshot file and the batches after it (batch
 * headers carry producer id, epoch and base sequence). A snapshot
 * `<offset:20>.snapshot` holds the state of the log [.., offset); it is
 * used only while it matches the log: offset within [log start, log end],
 * the same topic id, and the leader epoch of offset - 1 in the epoch cache
 * equal to the one it recorded (so a truncated and rewritten tail never
 * resurrects a state from the history it replaced).
 *
 * Snapshot file (big-endian):
 *   0 magic "KEELPSNP"  8 u32 version (1)  12 u32 producer count
 *  16 i64 offset  24 i32 leader epoch of offset - 1 (-1: none)
 *  28 topic id (16 bytes)
 *  44 count × (i64 producer id, i16 epoch, u8 n, n × (i32 first seq,
 *     i32 last seq, i64 first offset, i64 last offset))
 *     then u32 crc32c of everything before it
 *
 * Pure: files through the log's wal_vfs only. Memory: bounded by
 * PLOG_MAX_PRODUCERS per partition; past it, the producer whose last
 * batch is oldest is forgotten (as Kafka's expiry would).
 */
#ifndef KEEL_PLOG_PRODUCER_H
#define KEEL_PLOG_PRODUCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "plog/plog.h"

#define PLOG_PRODUCER_BATCHES 5
#define PLOG_MAX_PRODUCERS 100000
#define PLOG_SNAPSHOT_SUFFIX ".snapshot"

struct plog_producer_batch {
	int32_t first_seq;
	int32_t last_seq;
	int64_t first_offset;
	int64_t last_offset;
};

struct plog_producer {
	int64_t producer_id;
	int16_t epoch;
	uint8_t count; /* batches kept, oldest first */
	struct plog_producer_batch batches[PLOG_PRODUCER_BATCHES];
	int32_t refused_seq; /* first sequence of the refused next batch; -1: none */
};

struct plog_producers {
	struct plog_producer *items; /* sorted by producer id */
	uint32_t count;
	uint32_t capacity;
};

enum plog_seq_verdict {
	PLOG_SEQ_APPEND,       /* write it */
	PLOG_SEQ_DUPLICATE,    /* a retry of a kept batch: *dup says where it is */
	PLOG_SEQ_OUT_OF_ORDER, /* OUT_OF_ORDER_SEQUENCE_NUMBER */
	PLOG_SEQ_OLD_EPOCH,    /* INVALID_PRODUCER_EPOCH */
	PLOG_SEQ_AFTER_REFUSED, /* a gap that starts at a refused batch: refuse it alike */
};

void plog_producers_init(struct plog_producers *ps);
void plog_producers_close(struct plog_producers *ps);
void plog_producers_clear(struct plog_producers *ps);

/* The producer's entry, or NULL. */
const struct plog_producer *plog_producers_find(const struct plog_producers *ps,
						int64_t producer_id);

/* The last sequence of a batch that starts at first_seq and holds
 * last_offset_delta + 1 records (sequences wrap after INT32_MAX to 0). */
int32_t plog_producer_last_seq(int32_t first_seq, int32_t last_offset_delta);

/* The rules above, for a batch a client sent. *dup (may be NULL) is the
 * kept batch on PLOG_SEQ_DUPLICATE. */
enum plog_seq_verdict plog_producers_check(const struct plog_producers *ps, int64_t producer_id,
					   int16_t epoch, int32_t first_seq, int32_t last_seq,
					   struct plog_producer_batch *dup);

/* Marks a batch the leader refused unwritten with a retriable error, when
 * it was the producer's next batch in sequence (else nothing). */
void plog_producers_refuse(struct plog_producers *ps, int64_t producer_id, int16_t epoch,
			   int32_t first_seq);

/* Records a batch in the log (appended by this leader, or found by a
 * rebuild): a new epoch forgets the older epoch's batches, and any batch
 * the refused mark. KEEL_NOMEM. */
enum keel_err plog_producers_update(struct plog_producers *ps, int64_t producer_id, int16_t epoch,
				    const struct plog_producer_batch *batch);

/* Records every idempotent batch of `data` (whole batches with their
 * offsets, e.g. a follower's append or a scan); others are skipped. */
enum keel_err plog_producers_update_from(struct plog_producers *ps, const uint8_t *data,
					 size_t size);

/* ---- snapshot files and rebuild ---- */

/* Encodes the state as a snapshot of [.., offset) into a malloc'd buffer. */
uint8_t *plog_producers_encode(const struct plog_producers *ps, int64_t offset,
			       int32_t epoch_before, const uint8_t topic_id[PLOG_TOPIC_ID_SIZE],
			       size_t *size);

/* Decodes a snapshot (replacing ps's contents): KEEL_CORRUPT for a bad
 * magic, checksum, size or order, KEEL_UNSUPPORTED for a newer version,
 * KEEL_NOMEM. The header fields go to the out parameters. */
enum keel_err plog_producers_decode(struct plog_producers *ps, const uint8_t *data, size_t size,
				    int64_t *offset, int32_t *epoch_before,
				    uint8_t topic_id[PLOG_TOPIC_ID_SIZE]);

/* Writes `<log end>.snapshot` (replaced whole, durably) for the state of
 * the whole log, then deletes all older snapshots but the previous one.
 * Call only when everything appended is durable (after plog_sync). */
enum keel_err plog_producers_save(struct plog *log, const struct plog_producers *ps);

/* What a rebuild used, for logs and tests. */
struct plog_producers_rebuild_info {
	int64_t snapshot_offset; /* -1: no usable snapshot, scanned from the log start */
	int64_t scanned_batches;
	uint32_t snapshots_ignored; /* files that did not match the log or did not decode */
};

/* Recomputes ps from the newest usable snapshot and the log after it.
 * I/O errors are returned (ps is then empty). `info` may be NULL. */
enum keel_err plog_producers_rebuild(struct plog *log, struct plog_producers *ps,
				     struct plog_producers_rebuild_info *info);

/* Deletes every snapshot file at or after `offset` (0: all of them), for a
 * caller that rewrites the log from there (truncation, reset). */
enum keel_err plog_producers_drop_snapshots(struct plog *log, int64_t offset);

#endif
