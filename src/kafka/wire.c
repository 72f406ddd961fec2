/*
 * wire.c — Kafka's variable-length integers and string views.
 */
#include "kafka/wire.h"

#include <string.h>

struct kafka_str kafka_str(const char *cstr)
{
	if (cstr == NULL) {
		return KAFKA_STR_NULL;
	}
	size_t n = strlen(cstr);
	/* Over INT16_MAX is kept as is: the encoder refuses it, rather than
	 * sending a string cut short. */
	return (struct kafka_str){cstr, n > INT32_MAX ? INT32_MAX : (int32_t)n};
}

bool kafka_str_eq(struct kafka_str s, const char *cstr)
{
	if (s.len < 0 || cstr == NULL) {
		return false;
	}
	size_t n = strlen(cstr);
	return n == (size_t)s.len && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}

bool kafka_str_same(struct kafka_str a, struct kafka_str b)
{
	if (a.len < 0 || b.len < 0) {
		return a.len < 0 && b.len < 0;
	}
	return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0);
}

/* Reads up to max_bytes 7-bit groups; fails the reader on a longer one. */
static uint64_t read_uvarint_bits(struct keel_rbuf *r, unsigned max_bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < max_bytes; i++) {
		uint8_t b = keel_rbuf_u8(r);
		if (!keel_rbuf_ok(r)) {
			return 0;
		}
		v |= (uint64_t)(b & 0x7fu) << (7u * i);
		if ((b & 0x80u) == 0) {
			return v;
		}
	}
	keel_rbuf_fail(r);
	return 0;
}

uint32_t kafka_read_uvarint(struct keel_rbuf *r)
{
	uint64_t v = read_uvarint_bits(r, 5);
	if (v > UINT32_MAX) {
		keel_rbuf_fail(r);
		return 0;
	}
	return (uint32_t)v;
}

int32_t kafka_read_varint(struct keel_rbuf *r)
{
	uint32_t u = kafka_read_uvarint(r);
	return (int32_t)((u >> 1) ^ (~(u & 1u) + 1u));
}

int64_t kafka_read_varlong(struct keel_rbuf *r)
{
	/* 10 groups carry 70 bits; the tenth may only hold the top bit. */
	uint64_t v = 0;
	for (unsigned i = 0; i < 10; i++) {
		uint8_t b = keel_rbuf_u8(r);
		if (!keel_rbuf_ok(r)) {
			return 0;
		}
		if (i == 9 && (b & 0xfeu) != 0) {
			keel_rbuf_fail(r);
			return 0;
		}
		v |= (uint64_t)(b & 0x7fu) << (7u * i);
		if ((b & 0x80u) == 0) {
			return (int64_t)((v >> 1) ^ (~(v & 1u) + 1u));
		}
	}
	keel_rbuf_fail(r);
	return 0;
}

static void write_uvarint_bits(struct keel_wbuf *w, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;
	while (v >= 0x80u) {
		tmp[n++] = (uint8_t)(v | 0x80u);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	keel_wbuf_bytes(w, tmp, n);
}

void kafka_write_uvarint(struct keel_wbuf *w, uint32_t v)
{
	write_uvarint_bits(w, v);
}

void kafka_write_varint(struct keel_wbuf *w, int32_t v)
{
	uint32_t u = (uint32_t)v;
	write_uvarint_bits(w, (u << 1) ^ (0u - (u >> 31))); /* zigzag */
}

void kafka_write_varlong(struct keel_wbuf *w, int64_t v)
{
	uint64_t u = (uint64_t)v;
	write_uvarint_bits(w, (u << 1) ^ (0u - (u >> 63))); /* zigzag */
}

size_t kafka_uvarint_size(uint32_t v)
{
	size_t n = 1;
	while (v >= 0x80u) {
		v >>= 7;
		n++;
	}
	return n;
}
