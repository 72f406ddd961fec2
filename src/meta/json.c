/* json.c — the tiny JSON writer (see json.h). */
#include "meta/json.h"

#include <string.h>

#include "meta/fmt.h"

void meta_json_init(struct meta_json *j, struct keel_wbuf *w)
{
	j->w = w;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
}

/* Separator before a value (or a key) at the current level. */
static void before_value(struct meta_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth]) {
		keel_wbuf_u8(j->w, ',');
	}
	j->first[j->depth] = false;
}

static void json_open(struct meta_json *j, char c)
{
	before_value(j);
	if (j->depth + 1 >= META_JSON_MAX_DEPTH) {
		j->w->failed = true;
		return;
	}
	keel_wbuf_u8(j->w, (uint8_t)c);
	j->depth++;
	j->first[j->depth] = true;
}

static void close_level(struct meta_json *j, char c)
{
	if (j->depth == 0) {
		j->w->failed = true;
		return;
	}
	keel_wbuf_u8(j->w, (uint8_t)c);
	j->depth--;
}

void meta_json_begin_object(struct meta_json *j)
{
	json_open(j, '{');
}

void meta_json_end_object(struct meta_json *j)
{
	close_level(j, '}');
}

void meta_json_begin_array(struct meta_json *j)
{
	json_open(j, '[');
}

void meta_json_end_array(struct meta_json *j)
{
	close_level(j, ']');
}

static void quoted(struct keel_wbuf *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	keel_wbuf_u8(w, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\') {
			keel_wbuf_u8(w, '\\');
			keel_wbuf_u8(w, *p);
		} else if (*p < 0x20) {
			uint8_t esc[6] = {'\\', 'u', '0', '0', (uint8_t)hex[*p >> 4],
					  (uint8_t)hex[*p & 15]};
			keel_wbuf_bytes(w, esc, sizeof(esc));
		} else {
			keel_wbuf_u8(w, *p);
		}
	}
	keel_wbuf_u8(w, '"');
}

void meta_json_key(struct meta_json *j, const char *key)
{
	before_value(j);
	quoted(j->w, key);
	keel_wbuf_u8(j->w, ':');
	j->after_key = true;
}

void meta_json_str(struct meta_json *j, const char *s)
{
	before_value(j);
	quoted(j->w, s);
}

void meta_json_i64(struct meta_json *j, int64_t v)
{
	before_value(j);
	char digits[24];
	struct meta_fmt f;
	meta_fmt_init(&f, digits, sizeof(digits));
	meta_fmt_i64(&f, v);
	keel_wbuf_bytes(j->w, digits, f.len);
}

void meta_json_null(struct meta_json *j)
{
	before_value(j);
	keel_wbuf_bytes(j->w, "null", 4);
}
