/*
 * io.c — the field walkers behind every Kafka message codec (see io.h).
 */
#include "kafka/io.h"

#include <string.h>

#include "base/assert.h"

/* A tagged field's body is encoded aside first, up to this size. */
#define MAX_TAGGED_FIELD_SIZE 4096u

void kafka_limits_default(struct kafka_limits *limits)
{
	limits->max_array_count = 100000;
	limits->max_tagged_fields = 64;
	limits->max_frame_size = 100u << 20;
}

void kafka_io_reader(struct kafka_io *io, const void *data, size_t size, int16_t version,
                     bool flexible, struct keel_arena *arena, const struct kafka_limits *limits)
{
	KEEL_ASSERT(arena != NULL);
	KEEL_ASSERT(limits != NULL);
	memset(io, 0, sizeof(*io));
	keel_rbuf_init(&io->r, data, size);
	io->arena = arena;
	io->limits = limits;
	io->version = version;
	io->flexible = flexible;
	io->writing = false;
	io->err = KEEL_OK;
}

void kafka_io_writer(struct kafka_io *io, struct keel_wbuf *w, int16_t version, bool flexible)
{
	KEEL_ASSERT(w != NULL);
	memset(io, 0, sizeof(*io));
	io->w = w;
	io->version = version;
	io->flexible = flexible;
	io->writing = true;
	io->err = KEEL_OK;
}

void kafka_io_fail(struct kafka_io *io, enum keel_err err, const char *why)
{
	KEEL_ASSERT(err != KEEL_OK);
	if (io->err == KEEL_OK) {
		io->err = err;
		io->why = why;
	}
	if (io->writing) {
		io->w->failed = true;
	} else {
		keel_rbuf_fail(&io->r);
	}
}

enum keel_err kafka_io_finish(struct kafka_io *io)
{
	if (io->err != KEEL_OK) {
		return io->err;
	}
	if (io->writing) {
		if (!keel_wbuf_ok(io->w)) {
			io->why = "the encoded message is over the writer's maximum";
			return io->err = KEEL_TOOBIG;
		}
		return KEEL_OK;
	}
	if (!keel_rbuf_ok(&io->r)) {
		io->why = "the input ends early";
		return io->err = KEEL_SHORT;
	}
	if (!keel_rbuf_done(&io->r)) {
		io->why = "bytes are left over after the message";
		return io->err = KEEL_CORRUPT;
	}
	return KEEL_OK;
}

/* ---- fixed-width fields ---- */

void kio_i8(struct kafka_io *io, int8_t *v)
{
	if (io->writing) {
		kafka_write_i8(io->w, *v);
	} else {
		*v = kafka_read_i8(&io->r);
	}
}

void kio_i16(struct kafka_io *io, int16_t *v)
{
	if (io->writing) {
		kafka_write_i16(io->w, *v);
	} else {
		*v = kafka_read_i16(&io->r);
	}
}

void kio_i32(struct kafka_io *io, int32_t *v)
{
	if (io->writing) {
		keel_wbuf_i32(io->w, *v);
	} else {
		*v = keel_rbuf_i32(&io->r);
	}
}

void kio_i64(struct kafka_io *io, int64_t *v)
{
	if (io->writing) {
		keel_wbuf_i64(io->w, *v);
	} else {
		*v = keel_rbuf_i64(&io->r);
	}
}

void kio_bool(struct kafka_io *io, bool *v)
{
	if (io->writing) {
		keel_wbuf_bool(io->w, *v);
		return;
	}
	uint8_t b = keel_rbuf_u8(&io->r);
	if (b > 1) {
		kafka_io_fail(io, KEEL_CORRUPT, "a boolean is neither 0 nor 1");
		return;
	}
	*v = b == 1;
}

void kio_uuid(struct kafka_io *io, struct kafka_uuid *v)
{
	if (io->writing) {
		keel_wbuf_bytes(io->w, v->b, sizeof(v->b));
	} else {
		keel_rbuf_copy(&io->r, v->b, sizeof(v->b));
	}
}

/* ---- lengths: int16/int32 in classic versions, uvarint+1 in flexible ---- */

/* Reads a length (-1 = null) of a string (`wide` false) or bytes/array. */
static int64_t read_length(struct kafka_io *io, bool wide)
{
	if (io->flexible) {
		uint32_t n = kafka_read_uvarint(&io->r);
		return (int64_t)n - 1;
	}
	int64_t n = wide ? (int64_t)keel_rbuf_i32(&io->r) : (int64_t)kafka_read_i16(&io->r);
	if (keel_rbuf_ok(&io->r) && n < -1) {
		kafka_io_fail(io, KEEL_CORRUPT, "a length is negative");
	}
	return n;
}

static void write_length(struct kafka_io *io, int32_t n, bool wide)
{
	KEEL_ASSERT(n >= -1);
	if (io->flexible) {
		kafka_write_uvarint(io->w, (uint32_t)(n + 1));
	} else if (wide) {
		keel_wbuf_i32(io->w, n);
	} else {
		kafka_write_i16(io->w, (int16_t)n);
	}
}

/* Reads `len` bytes as a view; checks null against `nullable`. */
static const uint8_t *read_view(struct kafka_io *io, int64_t len, bool nullable)
{
	if (!kafka_io_ok(io)) {
		return NULL;
	}
	if (len < 0) {
		if (!nullable) {
			kafka_io_fail(io, KEEL_CORRUPT, "a null where the field is not nullable");
		}
		return NULL;
	}
	if ((uint64_t)len > keel_rbuf_remaining(&io->r)) {
		keel_rbuf_fail(&io->r);
		return NULL;
	}
	return keel_rbuf_bytes(&io->r, (size_t)len);
}

static void write_view(struct kafka_io *io, const void *ptr, int32_t len, bool nullable, bool wide)
{
	if (len < 0 && !nullable) {
		kafka_io_fail(io, KEEL_INVAL, "a null where this version cannot carry one");
		return;
	}
	if (len > 0 && ptr == NULL) {
		kafka_io_fail(io, KEEL_INVAL, "a length without bytes");
		return;
	}
	write_length(io, len < 0 ? -1 : len, wide);
	if (len > 0) {
		keel_wbuf_bytes(io->w, ptr, (size_t)len);
	}
}

/* Kafka caps strings at 32767 bytes in both forms (compact included). */
#define MAX_STRING_SIZE INT16_MAX

void kio_str(struct kafka_io *io, struct kafka_str *v, bool nullable)
{
	if (io->writing) {
		if (v->len > MAX_STRING_SIZE) {
			kafka_io_fail(io, KEEL_INVAL, "a string is longer than 32767 bytes");
			return;
		}
		write_view(io, v->ptr, v->len, nullable, false);
		return;
	}
	int64_t len = read_length(io, false);
	if (len > MAX_STRING_SIZE) {
		kafka_io_fail(io, KEEL_CORRUPT, "a string is longer than 32767 bytes");
		return;
	}
	const uint8_t *p = read_view(io, len, nullable);
	bool ok = kafka_io_ok(io);
	v->ptr = ok ? (const char *)p : NULL;
	v->len = ok && len >= 0 ? (int32_t)len : -1;
}

void kio_bytes(struct kafka_io *io, struct kafka_bytes *v, bool nullable)
{
	if (io->writing) {
		write_view(io, v->ptr, v->len, nullable, true);
		return;
	}
	int64_t len = read_length(io, true);
	const uint8_t *p = read_view(io, len, nullable);
	bool ok = kafka_io_ok(io);
	v->ptr = ok ? p : NULL;
	v->len = ok && len >= 0 ? (int32_t)len : -1;
}

void kio_records(struct kafka_io *io, struct kafka_records *v)
{
	if (!io->writing || io->splices == NULL) {
		struct kafka_bytes b = {v->data, v->size};
		kio_bytes(io, &b, true);
		v->data = b.ptr;
		v->size = b.len;
		return;
	}
	/* Spliced: write the length, leave a hole for the caller's bytes. */
	write_length(io, v->size < 0 ? -1 : v->size, true);
	if (v->size <= 0 || !kafka_io_ok(io)) {
		return;
	}
	if (io->splice_count == io->splice_capacity) {
		kafka_io_fail(io, KEEL_LIMIT, "more record sets than splice slots");
		return;
	}
	io->splices[io->splice_count++] = (struct kafka_splice){
	        .offset = io->w->size,
	        .size = (size_t)v->size,
	        .topic_index = io->topic_at,
	        .partition_index = io->partition_at,
	};
}

/* ---- fields present in some versions only ---- */

#define KIO_IF(name, type)                                                         \
	void kio_##name##_if(struct kafka_io *io, bool present, type *v, type def) \
	{                                                                          \
		if (present) {                                                     \
			kio_##name(io, v);                                         \
		} else if (!io->writing) {                                         \
			*v = def;                                                  \
		}                                                                  \
	}

KIO_IF(i8, int8_t)
KIO_IF(i16, int16_t)
KIO_IF(i32, int32_t)
KIO_IF(i64, int64_t)
KIO_IF(bool, bool)

void kio_uuid_if(struct kafka_io *io, bool present, struct kafka_uuid *v)
{
	if (present) {
		kio_uuid(io, v);
	} else if (!io->writing) {
		memset(v, 0, sizeof(*v));
	}
}

void kio_str_if(struct kafka_io *io, bool present, struct kafka_str *v, bool nullable)
{
	if (present) {
		kio_str(io, v, nullable);
	} else if (!io->writing) {
		*v = nullable ? KAFKA_STR_NULL : (struct kafka_str){"", 0};
	}
}

/* ---- arrays ---- */

int32_t kio_array(struct kafka_io *io, int32_t *count, void **items, size_t item_size,
                  size_t min_wire_size, bool nullable)
{
	KEEL_ASSERT(item_size > 0);
	KEEL_ASSERT(min_wire_size > 0);
	if (io->writing) {
		if (*count < 0 && !nullable) {
			kafka_io_fail(io, KEEL_INVAL,
			              "a null array where this version cannot carry one");
			return 0;
		}
		if (*count > 0 && *items == NULL) {
			kafka_io_fail(io, KEEL_INVAL, "an array count without items");
			return 0;
		}
		write_length(io, *count < 0 ? -1 : *count, true);
		return kafka_io_ok(io) && *count > 0 ? *count : 0;
	}
	*items = NULL;
	*count = 0;
	int64_t n = read_length(io, true);
	if (!kafka_io_ok(io)) {
		return 0;
	}
	if (n < 0) {
		if (!nullable) {
			kafka_io_fail(io, KEEL_CORRUPT,
			              "a null array where the field is not nullable");
			return 0;
		}
		*count = -1;
		return 0;
	}
	if (n > (int64_t)io->limits->max_array_count) {
		kafka_io_fail(io, KEEL_TOOBIG, "an array count is over the limit");
		return 0;
	}
	if ((uint64_t)n > keel_rbuf_remaining(&io->r) / min_wire_size) {
		keel_rbuf_fail(&io->r); /* cannot fit: the input is short */
		return 0;
	}
	if (n > 0) {
		*items = keel_arena_alloc(io->arena, (size_t)n * item_size);
		if (*items == NULL) {
			kafka_io_fail(io, KEEL_NOMEM, "the arena is out of memory");
			return 0;
		}
		memset(*items, 0, (size_t)n * item_size);
	}
	*count = (int32_t)n;
	return *count;
}

void kio_i32_array(struct kafka_io *io, struct kafka_i32_array *a, bool nullable)
{
	int32_t n = kio_array(io, &a->count, (void **)&a->items, sizeof(int32_t), 4, nullable);
	for (int32_t i = 0; i < n; i++) {
		kio_i32(io, &a->items[i]);
	}
}

void kio_str_array(struct kafka_io *io, struct kafka_str_array *a, bool nullable)
{
	int32_t n = kio_array(io, &a->count, (void **)&a->items, sizeof(struct kafka_str),
	                      io->flexible ? 1 : 2, nullable);
	for (int32_t i = 0; i < n; i++) {
		kio_str(io, &a->items[i], false);
	}
}

/* ---- tagged fields ---- */

static void write_tags(struct kafka_io *io, const struct kio_tag *tags, size_t count)
{
	uint32_t present = 0;
	for (size_t i = 0; i < count; i++) {
		KEEL_ASSERT(i == 0 || tags[i - 1].tag < tags[i].tag);
		present += *tags[i].present ? 1u : 0u;
	}
	kafka_write_uvarint(io->w, present);
	for (size_t i = 0; i < count && kafka_io_ok(io); i++) {
		if (!*tags[i].present) {
			continue;
		}
		uint8_t mem[MAX_TAGGED_FIELD_SIZE];
		struct keel_wbuf body;
		keel_wbuf_init_fixed(&body, mem, sizeof(mem));
		struct kafka_io sub;
		kafka_io_writer(&sub, &body, io->version, io->flexible);
		tags[i].walk(&sub, tags[i].obj);
		if (kafka_io_finish(&sub) != KEEL_OK) {
			kafka_io_fail(io, sub.err, sub.why);
			return;
		}
		kafka_write_uvarint(io->w, tags[i].tag);
		kafka_write_uvarint(io->w, (uint32_t)body.size);
		keel_wbuf_bytes(io->w, body.data, body.size);
	}
}

static void read_tags(struct kafka_io *io, const struct kio_tag *tags, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		*tags[i].present = false;
	}
	uint32_t n = kafka_read_uvarint(&io->r);
	if (kafka_io_ok(io) && n > io->limits->max_tagged_fields) {
		kafka_io_fail(io, KEEL_TOOBIG, "too many tagged fields");
		return;
	}
	int64_t last = -1;
	for (uint32_t k = 0; k < n && kafka_io_ok(io); k++) {
		uint32_t tag = kafka_read_uvarint(&io->r);
		uint32_t size = kafka_read_uvarint(&io->r);
		const uint8_t *body = keel_rbuf_bytes(&io->r, size);
		if (!kafka_io_ok(io)) {
			return;
		}
		if ((int64_t)tag <= last) {
			kafka_io_fail(io, KEEL_CORRUPT, "tagged fields out of order");
			return;
		}
		last = tag;
		for (size_t i = 0; i < count; i++) {
			if (tags[i].tag != tag) {
				continue;
			}
			struct kafka_io sub;
			kafka_io_reader(&sub, body, size, io->version, io->flexible, io->arena,
			                io->limits);
			tags[i].walk(&sub, tags[i].obj);
			if (kafka_io_finish(&sub) != KEEL_OK) {
				kafka_io_fail(io, sub.err == KEEL_SHORT ? KEEL_CORRUPT : sub.err,
				              sub.err == KEEL_SHORT ? "a tagged field is cut short"
				                                    : sub.why);
				return;
			}
			*tags[i].present = true;
		}
	}
}

void kio_tags(struct kafka_io *io, const struct kio_tag *tags, size_t count)
{
	if (!io->flexible) {
		return;
	}
	if (io->writing) {
		write_tags(io, tags, count);
	} else {
		read_tags(io, tags, count);
	}
}
