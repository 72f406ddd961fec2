/*
 * io.h — one description of a message, used to both decode and encode it.
 *
 * Each Kafka message is written once, as a function that walks its fields
 * in wire order through a kafka_io (see msg_*.c). The same walk reads when
 * the io is a decoder and writes when it is an encoder, so the two sides
 * cannot drift apart. Fields present only in some versions are guarded by
 * the version in the walk; on decode, an absent field takes its default.
 *
 * Flexible versions (KIP-482) switch strings, bytes and arrays to their
 * compact forms (unsigned-varint length + 1, 0 = null) and end each struct
 * with tagged fields; io->flexible says which form is in use.
 *
 * Decoding never copies bytes: strings, bytes and records are views into
 * the input buffer (valid while it is). Arrays are allocated from the
 * caller's arena (valid until its reset), after the count is checked
 * against limits->max_array_count and against the bytes left in the input
 * times the element's minimum wire size — a hostile count cannot cause a
 * large allocation.
 *
 * Encoding writes into a keel_wbuf. A walk casts away the const of the
 * message it encodes; in writing mode it never stores into it.
 *
 * Errors are sticky: the first one is kept with a static description and
 * every later field is a no-op. kafka_io_finish() returns it:
 *   KEEL_SHORT    the input ended early
 *   KEEL_TOOBIG   a count over limits, or the writer reached its maximum
 *   KEEL_CORRUPT  a value that cannot be (negative length, bool not 0/1,
 *                 null where not nullable, over-long varint, bytes left over)
 *   KEEL_INVAL    (encoding) a null where the version cannot carry one, or
 *                 a count or length without its items or bytes, a string
 *                 over 32767 bytes
 *   KEEL_LIMIT    (encoding) more record sets than splice slots
 *   KEEL_NOMEM    the arena failed
 */
#ifndef KEEL_KAFKA_IO_H
#define KEEL_KAFKA_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "kafka/wire.h"

/* Every limit is a parameter; kafka_limits_default() gives sane ones. */
struct kafka_limits {
	uint32_t max_array_count;   /* elements in any one array */
	uint32_t max_tagged_fields; /* tagged fields in one struct */
	uint32_t max_frame_size;    /* a request's or response's size prefix */
};

void kafka_limits_default(struct kafka_limits *limits);

/* A record set (Produce, Fetch): opaque bytes, validated by the partition
 * log, not here. size -1 is null. */
struct kafka_records {
	const uint8_t *data;
	int32_t size;
};

/*
 * A hole left in an encoded Fetch response for the records of one
 * partition (see kafka_encode_fetch_response_spliced in msg.h): the encoded
 * bytes stop at `offset`, then `size` record bytes follow, which the caller
 * supplies (from memory, or a file with sendfile), then the encoded bytes
 * resume at `offset`.
 */
struct kafka_splice {
	size_t offset;            /* position in the writer's bytes (w->data) */
	size_t size;              /* record bytes the caller writes there */
	uint32_t topic_index;     /* which topic of the response ... */
	uint32_t partition_index; /* ... and which partition of it */
};

struct kafka_io {
	struct keel_rbuf r;       /* decoding */
	struct keel_wbuf *w;      /* encoding */
	struct keel_arena *arena; /* decoding: where arrays go */
	const struct kafka_limits *limits;
	int16_t version;
	bool writing;
	bool flexible;
	enum keel_err err; /* first failure that is not a short read */
	const char *why;   /* static text describing the first failure */
	/* Encoding a Fetch response with holes for its records (optional). */
	struct kafka_splice *splices;
	size_t splice_capacity;
	size_t splice_count;
	uint32_t topic_at, partition_at; /* set by the Fetch walk */
};

void kafka_io_reader(struct kafka_io *io, const void *data, size_t size, int16_t version,
                     bool flexible, struct keel_arena *arena, const struct kafka_limits *limits);
void kafka_io_writer(struct kafka_io *io, struct keel_wbuf *w, int16_t version, bool flexible);

static inline bool kafka_io_ok(const struct kafka_io *io)
{
	return io->err == KEEL_OK && (io->writing ? keel_wbuf_ok(io->w) : keel_rbuf_ok(&io->r));
}

/* Records the first failure and stops all later fields. */
void kafka_io_fail(struct kafka_io *io, enum keel_err err, const char *why);

/* The outcome; a decoder also requires that every byte was consumed. */
enum keel_err kafka_io_finish(struct kafka_io *io);

/* ---- fields (read into *v, or write *v) ---- */

void kio_i8(struct kafka_io *io, int8_t *v);
void kio_i16(struct kafka_io *io, int16_t *v);
void kio_i32(struct kafka_io *io, int32_t *v);
void kio_i64(struct kafka_io *io, int64_t *v);
void kio_bool(struct kafka_io *io, bool *v);
void kio_uuid(struct kafka_io *io, struct kafka_uuid *v);
void kio_str(struct kafka_io *io, struct kafka_str *v, bool nullable);
void kio_bytes(struct kafka_io *io, struct kafka_bytes *v, bool nullable);
void kio_records(struct kafka_io *io, struct kafka_records *v);

/*
 * Fields that exist only in some versions: when `present` the field is
 * read/written; otherwise a decoder stores `def` and an encoder leaves the
 * value out (the version cannot carry it; Kafka's own encoders do the same
 * for "ignorable" fields).
 */
void kio_i8_if(struct kafka_io *io, bool present, int8_t *v, int8_t def);
void kio_i16_if(struct kafka_io *io, bool present, int16_t *v, int16_t def);
void kio_i32_if(struct kafka_io *io, bool present, int32_t *v, int32_t def);
void kio_i64_if(struct kafka_io *io, bool present, int64_t *v, int64_t def);
void kio_bool_if(struct kafka_io *io, bool present, bool *v, bool def);
void kio_uuid_if(struct kafka_io *io, bool present, struct kafka_uuid *v);
void kio_str_if(struct kafka_io *io, bool present, struct kafka_str *v, bool nullable);

/*
 * An array header. Decoding: reads the count (-1 = null, allowed only when
 * `nullable`), checks it, and allocates *count zeroed items of item_size
 * from the arena into *items. Encoding: writes *count. Returns the number
 * of elements to walk (0 for null or on failure).
 */
int32_t kio_array(struct kafka_io *io, int32_t *count, void **items, size_t item_size,
                  size_t min_wire_size, bool nullable);

/* Arrays of int32 and of strings, the two primitive arrays Kafka uses. */
struct kafka_i32_array {
	int32_t *items;
	int32_t count; /* -1: null */
};

struct kafka_str_array {
	struct kafka_str *items;
	int32_t count; /* -1: null */
};

void kio_i32_array(struct kafka_io *io, struct kafka_i32_array *a, bool nullable);
void kio_str_array(struct kafka_io *io, struct kafka_str_array *a, bool nullable);

/*
 * The tagged-field section that ends every struct in a flexible version
 * (a no-op otherwise). `tags` lists the tagged fields this code knows, in
 * tag order: encoding writes those whose *present is true; decoding walks
 * the known ones (setting *present) and skips unknown tags.
 */
struct kio_tag {
	uint32_t tag;
	bool *present;
	void (*walk)(struct kafka_io *io, void *obj);
	void *obj;
};

void kio_tags(struct kafka_io *io, const struct kio_tag *tags, size_t count);

static inline void kio_no_tags(struct kafka_io *io)
{
	kio_tags(io, NULL, 0);
}

#endif
