/* zk_digest.c — SHA-1 (FIPS 180-4), base64 and digest identities. */
#include "zk/zk_digest.h"

#include <string.h>

#include "base/buf.h"

static uint32_t rol(uint32_t x, unsigned n)
{
	return x << n | x >> (32 - n);
}

static void sha1_block(uint32_t h[5], const uint8_t block[64])
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++) {
		w[i] = keel_load_be32(block + 4 * i);
	}
	for (int i = 16; i < 80; i++) {
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f;
		uint32_t k;
		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999u;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1u;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdcu;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6u;
		}
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void zk_sha1(const void *data, size_t size, uint8_t out[ZK_SHA1_SIZE])
{
	uint32_t h[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
	const uint8_t *p = data;
	size_t left = size;
	while (left >= 64) {
		sha1_block(h, p);
		p += 64;
		left -= 64;
	}
	/* Padding: 0x80, zeros, then the bit length in 8 bytes. */
	uint8_t tail[128];
	memset(tail, 0, sizeof(tail));
	if (left > 0) {
		memcpy(tail, p, left);
	}
	tail[left] = 0x80;
	size_t tail_size = left + 1 + 8 <= 64 ? 64 : 128;
	keel_store_be64(tail + tail_size - 8, (uint64_t)size * 8);
	sha1_block(h, tail);
	if (tail_size == 128) {
		sha1_block(h, tail + 64);
	}
	for (int i = 0; i < 5; i++) {
		keel_store_be32(out + 4 * i, h[i]);
	}
}

size_t zk_base64_encode(const void *data, size_t size, char *out)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const uint8_t *p = data;
	size_t o = 0;
	size_t i = 0;
	while (i + 3 <= size) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = alphabet[v >> 18 & 63];
		out[o++] = alphabet[v >> 12 & 63];
		out[o++] = alphabet[v >> 6 & 63];
		out[o++] = alphabet[v & 63];
		i += 3;
	}
	if (size - i == 1) {
		uint32_t v = (uint32_t)p[i] << 16;
		out[o++] = alphabet[v >> 18 & 63];
		out[o++] = alphabet[v >> 12 & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (size - i == 2) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
		out[o++] = alphabet[v >> 18 & 63];
		out[o++] = alphabet[v >> 12 & 63];
		out[o++] = alphabet[v >> 6 & 63];
		out[o++] = '=';
	}
	return o;
}

size_t zk_digest_id(const char *user_password, size_t size, char *out)
{
	size_t user = size;
	for (size_t i = 0; i < size; i++) {
		if (user_password[i] == ':') {
			user = i;
			break;
		}
	}
	uint8_t hash[ZK_SHA1_SIZE];
	zk_sha1(user_password, size, hash);
	if (user > 0) {
		memcpy(out, user_password, user);
	}
	out[user] = ':';
	size_t n = zk_base64_encode(hash, sizeof(hash), out + user + 1);
	return user + 1 + n;
}
