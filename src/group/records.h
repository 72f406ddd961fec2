/*
 * records.h — the records of the internal topic __consumer_offsets, in
 * Kafka's key/value formats so that Kafka's tools can read them:
 *
 *   offset commit   key   i16 version=1 | group str | topic str | partition i32
 *                   value i16 version=3 | offset i64 | leader_epoch i32 |
 *                         metadata str | commit_timestamp i64
 *   group metadata  key   i16 version=2 | group str
 *                   value i16 version=3 | protocol_type str | generation i32 |
 *                         protocol nullable str | leader nullable str |
 *                         current_state_timestamp i64 | members array
 *                         (member_id str, group_instance_id nullable str,
 *                          client_id str, client_host str,
 *                          rebalance_timeout i32, session_timeout i32,
 *                          subscription bytes, assignment bytes)
 *   a null value is a tombstone: the offset (or the group) is gone.
 *
 * str = i16 length + bytes (-1: null), bytes = i32 length + bytes, big
 * endian. Decoding accepts offset values v0-v3 and group values v0-v3 (the
 * fields keel uses are in all of them) and checks every length against the
 * bytes left before copying; strings are copied NUL-terminated into the
 * caller's arena.
 *
 * Batches: group_batch_* build one uncompressed magic-2 batch of records
 * (offsets and epoch are stamped by plog_append); group_batch_records walks
 * the records of one batch.
 */
#ifndef KEEL_GROUP_RECORDS_H
#define KEEL_GROUP_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "group/group.h"

#define GROUP_OFFSETS_TOPIC "__consumer_offsets"

enum group_record_kind { GROUP_RECORD_OFFSET, GROUP_RECORD_GROUP };

struct group_record {
	enum group_record_kind kind;
	const char *group_id;
	const char *topic; /* OFFSET */
	int32_t partition; /* OFFSET */
	bool tombstone;    /* null value */
	/* OFFSET value */
	int64_t offset;
	int32_t leader_epoch; /* -1 before v3 */
	const char *metadata;
	int64_t commit_timestamp_ms;
	/* GROUP value */
	const char *protocol_type;
	int32_t generation;
	const char *protocol_name; /* NULL: null */
	const char *leader_id;     /* NULL: null */
	int64_t state_timestamp_ms;
	uint32_t member_count;
};

/* KEEL_OK, KEEL_SHORT/KEEL_CORRUPT for a malformed key or value,
 * KEEL_UNSUPPORTED for a key version keel does not know (skip it). */
enum keel_err group_record_decode(const uint8_t *key, int32_t key_len, const uint8_t *value,
                                  int32_t value_len, struct keel_arena *arena,
                                  struct group_record *out);

void group_encode_offset_key(struct keel_wbuf *w, const char *group_id, const char *topic,
                             int32_t partition);
void group_encode_offset_value(struct keel_wbuf *w, int64_t offset, int32_t leader_epoch,
                               const char *metadata, int64_t commit_timestamp_ms);
void group_encode_group_key(struct keel_wbuf *w, const char *group_id);
void group_encode_group_value(struct keel_wbuf *w, const struct group *g);

/* One batch under construction. */
struct group_batch {
	struct keel_wbuf w;
	int32_t count;
	int64_t timestamp_ms;
};

void group_batch_init(struct group_batch *b, int64_t timestamp_ms);
/* value_len -1: a tombstone. */
void group_batch_add(struct group_batch *b, const uint8_t *key, size_t key_len,
                     const uint8_t *value, int32_t value_len);
/* Seals the batch: b->w.data/size is it. KEEL_NOMEM if a write failed. */
enum keel_err group_batch_finish(struct group_batch *b);
void group_batch_free(struct group_batch *b);

typedef void (*group_record_fn)(void *arg, const uint8_t *key, int32_t key_len,
                                const uint8_t *value, int32_t value_len);
/* Calls fn for each record of one whole batch (data, size). KEEL_UNSUPPORTED
 * for a compressed batch, KEEL_CORRUPT for a malformed one. */
enum keel_err group_batch_records(const uint8_t *data, size_t size, group_record_fn fn, void *arg);

#endif
