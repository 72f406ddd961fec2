/*
 * fmt.h — a tiny text formatter into caller memory (the pure layer has no
 * stdio), and the error-detail buffer the meta decoders fill.
 *
 * A `struct meta_fmt` appends to a caller buffer and keeps it NUL-terminated
 * at all times. Output that does not fit is cut (never written past
 * `size`), and `truncated` says so; formatting never fails otherwise and
 * never allocates.
 *
 *	char line[256];
 *	struct meta_fmt f;
 *	meta_fmt_init(&f, line, sizeof(line));
 *	meta_fmt_str(&f, "Broker-");
 *	meta_fmt_i64(&f, 3);
 *	// line == "Broker-3"
 *
 * Topic and incarnation ids (16 bytes) print as Kafka prints them: 22
 * characters of URL-safe base64 without padding.
 */
#ifndef KEEL_META_FMT_H
#define KEEL_META_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct meta_fmt {
	char *buf;
	size_t size; /* bytes of buf, including room for the NUL */
	size_t len;  /* characters written (excluding the NUL) */
	bool truncated;
};

/* size must be at least 1 (room for the terminator). */
void meta_fmt_init(struct meta_fmt *f, char *buf, size_t size);

void meta_fmt_char(struct meta_fmt *f, char c);
void meta_fmt_mem(struct meta_fmt *f, const char *s, size_t n);
/* NULL prints as "null". */
void meta_fmt_str(struct meta_fmt *f, const char *s);
void meta_fmt_i64(struct meta_fmt *f, int64_t v);
void meta_fmt_u64(struct meta_fmt *f, uint64_t v);
void meta_fmt_uuid(struct meta_fmt *f, const uint8_t id[16]);

/* Length of the base64url form of a 16-byte id (no padding). */
#define META_UUID_TEXT_LEN 22

/* Parses the 22-character base64url form back; false on bad input. */
bool meta_uuid_parse(const char *text, uint8_t id[16]);

/*
 * Error detail for decoders and validators: a short human sentence saying
 * what was wrong ("record type 3 version 9 is newer than this server
 * supports (max 0)"). Functions take a `struct meta_errbuf *` that may be
 * NULL when the caller only wants the error code.
 */
struct meta_errbuf {
	char msg[160];
};

/* Starts a message (clears what was there) and returns a formatter on it,
 * or NULL when eb is NULL; the meta_fmt_* functions accept NULL. */
struct meta_fmt *meta_errbuf_begin(struct meta_errbuf *eb, struct meta_fmt *f);

/* Convenience: sets the message to one string. */
void meta_errbuf_set(struct meta_errbuf *eb, const char *msg);

/* Milliseconds since the Unix epoch as ISO 8601 in UTC,
 * 2023-11-14T22:13:20.000Z (proleptic Gregorian; pure arithmetic, no
 * time zone database). Negative values print as the plain number. */
void meta_fmt_iso8601(struct meta_fmt *f, int64_t epoch_ms);

#endif
