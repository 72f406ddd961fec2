/*
 * wire.h — Kafka's primitive types on top of keel_rbuf / keel_wbuf.
 *
 * Kafka writes fixed-width integers big-endian (int8/16/32/64, uint32) and,
 * since KIP-482 ("flexible versions"), three variable-length integers:
 *
 *   unsigned varint  7 bits a byte, low group first, high bit = "more";
 *                    at most 5 bytes for a uint32
 *   varint / varlong zigzag-mapped signed values ((n << 1) ^ (n >> 31)),
 *                    then as an unsigned varint (5 / 10 bytes at most)
 *
 * These helpers share the sticky failure flag of the base buffers: a read
 * that runs past the end or finds an over-long varint fails the reader and
 * returns 0. Nothing here allocates.
 *
 * Strings and byte strings are views, never NUL-terminated: a kafka_str's
 * pointer is into whatever buffer it was read from (or the caller's memory
 * when encoding) and lives as long as that buffer. len == -1 means null.
 */
#ifndef KEEL_KAFKA_WIRE_H
#define KEEL_KAFKA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

struct kafka_str {
	const char *ptr;
	int32_t len; /* -1: null */
};

struct kafka_bytes {
	const uint8_t *ptr;
	int32_t len; /* -1: null */
};

struct kafka_uuid {
	uint8_t b[16];
};

#define KAFKA_STR_NULL ((struct kafka_str){NULL, -1})

/* A view of a NUL-terminated string (NULL gives the null string). */
struct kafka_str kafka_str(const char *cstr);

/* True when s is not null and holds exactly the bytes of cstr. */
bool kafka_str_eq(struct kafka_str s, const char *cstr);

/* True when both are null, or both hold the same bytes. */
bool kafka_str_same(struct kafka_str a, struct kafka_str b);

/* ---- variable-length integers ---- */

uint32_t kafka_read_uvarint(struct keel_rbuf *r);
int32_t kafka_read_varint(struct keel_rbuf *r);
int64_t kafka_read_varlong(struct keel_rbuf *r);

void kafka_write_uvarint(struct keel_wbuf *w, uint32_t v);
void kafka_write_varint(struct keel_wbuf *w, int32_t v);
void kafka_write_varlong(struct keel_wbuf *w, int64_t v);

/* Bytes kafka_write_uvarint() uses for v (1..5). */
size_t kafka_uvarint_size(uint32_t v);

/* ---- fixed-width signed integers ---- */

static inline int8_t kafka_read_i8(struct keel_rbuf *r)
{
	return (int8_t)keel_rbuf_u8(r);
}

static inline int16_t kafka_read_i16(struct keel_rbuf *r)
{
	return (int16_t)keel_rbuf_u16(r);
}

static inline void kafka_write_i8(struct keel_wbuf *w, int8_t v)
{
	keel_wbuf_u8(w, (uint8_t)v);
}

static inline void kafka_write_i16(struct keel_wbuf *w, int16_t v)
{
	keel_wbuf_u16(w, (uint16_t)v);
}

#endif
