/* fmt.c — the tiny formatter and error buffer (see fmt.h). */
#include "meta/fmt.h"

#include <string.h>

#include "base/assert.h"

void meta_fmt_init(struct meta_fmt *f, char *buf, size_t size)
{
	KEEL_ASSERT(buf != NULL);
	KEEL_ASSERT(size >= 1);
	f->buf = buf;
	f->size = size;
	f->len = 0;
	f->truncated = false;
	buf[0] = '\0';
}

void meta_fmt_mem(struct meta_fmt *f, const char *s, size_t n)
{
	if (f == NULL || n == 0) {
		return;
	}
	size_t room = f->size - 1 - f->len;
	if (n > room) {
		n = room;
		f->truncated = true;
	}
	memcpy(f->buf + f->len, s, n);
	f->len += n;
	f->buf[f->len] = '\0';
}

void meta_fmt_char(struct meta_fmt *f, char c)
{
	meta_fmt_mem(f, &c, 1);
}

void meta_fmt_str(struct meta_fmt *f, const char *s)
{
	if (s == NULL) {
		s = "null";
	}
	meta_fmt_mem(f, s, strlen(s));
}

void meta_fmt_u64(struct meta_fmt *f, uint64_t v)
{
	char digits[20];
	size_t n = 0;
	do {
		digits[sizeof(digits) - 1 - n] = (char)('0' + v % 10);
		v /= 10;
		n++;
	} while (v != 0);
	meta_fmt_mem(f, digits + sizeof(digits) - n, n);
}

void meta_fmt_i64(struct meta_fmt *f, int64_t v)
{
	if (v < 0) {
		meta_fmt_char(f, '-');
		/* Negate in unsigned arithmetic so INT64_MIN does not overflow. */
		meta_fmt_u64(f, (uint64_t)0 - (uint64_t)v);
		return;
	}
	meta_fmt_u64(f, (uint64_t)v);
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void meta_fmt_uuid(struct meta_fmt *f, const uint8_t id[16])
{
	char out[META_UUID_TEXT_LEN];
	size_t o = 0;
	/* 16 bytes = 5 groups of 3 plus one trailing byte (2 characters). */
	for (size_t i = 0; i < 15; i += 3) {
		uint32_t v = (uint32_t)id[i] << 16 | (uint32_t)id[i + 1] << 8 | id[i + 2];
		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
		out[o++] = b64url[(v >> 6) & 63];
		out[o++] = b64url[v & 63];
	}
	out[o++] = b64url[id[15] >> 2];
	out[o++] = b64url[(id[15] & 3) << 4];
	KEEL_ASSERT(o == META_UUID_TEXT_LEN);
	meta_fmt_mem(f, out, o);
}

static int b64url_value(char c)
{
	const char *p = memchr(b64url, c, sizeof(b64url) - 1);
	return (c != '\0' && p != NULL) ? (int)(p - b64url) : -1;
}

bool meta_uuid_parse(const char *text, uint8_t id[16])
{
	if (text == NULL || strlen(text) != META_UUID_TEXT_LEN) {
		return false;
	}
	int v[META_UUID_TEXT_LEN];
	for (size_t i = 0; i < META_UUID_TEXT_LEN; i++) {
		v[i] = b64url_value(text[i]);
		if (v[i] < 0) {
			return false;
		}
	}
	/* The last character carries only 2 bits; the low 4 must be zero. */
	if ((v[21] & 15) != 0) {
		return false;
	}
	size_t o = 0;
	for (size_t i = 0; i < 20; i += 4) {
		uint32_t w = (uint32_t)v[i] << 18 | (uint32_t)v[i + 1] << 12 |
			     (uint32_t)v[i + 2] << 6 | (uint32_t)v[i + 3];
		id[o++] = (uint8_t)(w >> 16);
		id[o++] = (uint8_t)(w >> 8);
		id[o++] = (uint8_t)w;
	}
	id[15] = (uint8_t)((uint32_t)v[20] << 2 | (uint32_t)v[21] >> 4);
	return true;
}

struct meta_fmt *meta_errbuf_begin(struct meta_errbuf *eb, struct meta_fmt *f)
{
	if (eb == NULL) {
		return NULL;
	}
	meta_fmt_init(f, eb->msg, sizeof(eb->msg));
	return f;
}

void meta_errbuf_set(struct meta_errbuf *eb, const char *msg)
{
	struct meta_fmt f;
	meta_fmt_str(meta_errbuf_begin(eb, &f), msg);
}

/* Zero-padded decimal of `width` digits (v >= 0). */
static void fmt_padded(struct meta_fmt *f, int64_t v, int width)
{
	char digits[24];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0 && n < (int)sizeof(digits));
	for (int i = n; i < width; i++) {
		meta_fmt_char(f, '0');
	}
	while (n > 0) {
		meta_fmt_char(f, digits[--n]);
	}
}

void meta_fmt_iso8601(struct meta_fmt *f, int64_t epoch_ms)
{
	if (epoch_ms < 0) {
		meta_fmt_i64(f, epoch_ms);
		return;
	}
	int64_t days = epoch_ms / 86400000;
	int64_t ms_of_day = epoch_ms % 86400000;
	/* Civil date from days since 1970-01-01 (Howard Hinnant's algorithm). */
	int64_t z = days + 719468;
	int64_t era = z / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t day = doy - (153 * mp + 2) / 5 + 1;
	int64_t month = mp < 10 ? mp + 3 : mp - 9;
	int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
	fmt_padded(f, year, 4);
	meta_fmt_char(f, '-');
	fmt_padded(f, month, 2);
	meta_fmt_char(f, '-');
	fmt_padded(f, day, 2);
	meta_fmt_char(f, 'T');
	fmt_padded(f, ms_of_day / 3600000, 2);
	meta_fmt_char(f, ':');
	fmt_padded(f, ms_of_day / 60000 % 60, 2);
	meta_fmt_char(f, ':');
	fmt_padded(f, ms_of_day / 1000 % 60, 2);
	meta_fmt_char(f, '.');
	fmt_padded(f, ms_of_day % 1000, 3);
	meta_fmt_char(f, 'Z');
}
