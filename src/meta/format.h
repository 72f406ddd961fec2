/*
 * format.h — human-readable lines for metadata records, partitions and
 * brokers: what `keel log dump`, `keel topics describe`, `keel brokers`
 * and the server's logs print.
 *
 * Every partition record (Partition or PartitionChange) prints as
 *
 *   [Topic: sensor-data, Partition: 0, Leader: Broker-1, ISR: {Broker-1, Broker-2}] LeaderEpoch: 3, PartitionEpoch: 5
 *
 * followed by what else the record says (", Replicas: {...}" for a new
 * partition, ", Changed: {Leader, ISR}" for a change, ", LeaderRecoveryState:
 * RECOVERING" when recovering). A leader of -1 prints as "none". The topic
 * name comes from the image; when the image does not know the id, the id
 * prints in base64url instead.
 *
 * All functions append to a caller's `struct meta_fmt` (fmt.h): no stdio,
 * no allocation. Lines carry no trailing newline.
 */
#ifndef KEEL_META_FORMAT_H
#define KEEL_META_FORMAT_H

#include <stdint.h>

#include "meta/fmt.h"
#include "meta/image.h"
#include "meta/record.h"

/*
 * One record. `before` is the image as it is BEFORE the record is applied
 * (it supplies topic names and, for a PartitionChange, the fields the
 * change leaves as they were); it may be NULL.
 */
void meta_format_record(struct meta_fmt *f, const struct meta_record *rec,
			const struct meta_image *before);

/* "[Topic: T, Partition: P, Leader: Broker-L, ISR: {...}] LeaderEpoch: E, PartitionEpoch: PE" */
void meta_format_partition_state(struct meta_fmt *f, const char *topic, int32_t partition_id,
				 int32_t leader, const int32_t *isr, uint32_t isr_count,
				 int32_t leader_epoch, int32_t partition_epoch);

/* "Batch at offset 17: controller 1, epoch 3, time 1700000000123, 4 records" */
void meta_format_batch_header(struct meta_fmt *f, int64_t offset, const struct meta_batch *batch);

/* Kafka's describe form, tab-separated:
 * "Topic: sensor-data\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tLeaderEpoch: 0" */
void meta_format_describe_partition(struct meta_fmt *f, const char *topic, int32_t partition_id,
				    int32_t leader, const int32_t *replicas, uint32_t replica_count,
				    const int32_t *isr, uint32_t isr_count, int32_t leader_epoch);

/* "Broker: 1\tEpoch: 5\tRack: r1\tState: active" (State: active|fenced; a
 * broker in controlled shutdown gets "\tControlledShutdown: true"; a broker
 * without a rack prints "Rack: none"). */
void meta_format_broker_line(struct meta_fmt *f, int32_t id, int64_t epoch, const char *rack,
			     bool fenced, bool in_controlled_shutdown);

/*
 * `keel log dump` for one batch: calls line(ctx, text) for a header line
 * and then one line per record, formatting each record against the image
 * before it and then applying it to `img` (the dump's running image), with
 * " (ignored: <why>)" appended to records that re-validation rejected.
 * Returns what meta_image_begin_batch/apply_record return for fatal cases
 * (KEEL_INVAL for a non-increasing offset, KEEL_NOMEM), else KEEL_OK.
 */
typedef void (*meta_line_fn)(void *ctx, const char *line);
enum keel_err meta_log_dump_batch(struct meta_image *img, int64_t offset,
				  const struct meta_batch *batch, meta_line_fn line, void *ctx);

#endif
