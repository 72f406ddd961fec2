/*
 * json.h — a tiny JSON writer (no library) for the znode payloads Kafka
 * wrote in ZooKeeper mode.
 *
 * Writes compact JSON onto a keel_wbuf; commas are placed automatically.
 * Strings are escaped (quote, backslash, control characters as \u00XX);
 * bytes >= 0x80 pass through (names are ASCII or UTF-8 already). Nesting
 * deeper than META_JSON_MAX_DEPTH fails the writer. Check keel_wbuf_ok()
 * once at the end.
 *
 *	meta_json_begin_object(&j);
 *	meta_json_key(&j, "version");  meta_json_i64(&j, 1);
 *	meta_json_key(&j, "isr");      meta_json_begin_array(&j); ... end_array
 *	meta_json_end_object(&j);
 */
#ifndef KEEL_META_JSON_H
#define KEEL_META_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"

#define META_JSON_MAX_DEPTH 8

struct meta_json {
	struct keel_wbuf *w;
	int depth;
	bool first[META_JSON_MAX_DEPTH]; /* no value written yet at this level */
	bool after_key;
};

void meta_json_init(struct meta_json *j, struct keel_wbuf *w);
void meta_json_begin_object(struct meta_json *j);
void meta_json_end_object(struct meta_json *j);
void meta_json_begin_array(struct meta_json *j);
void meta_json_end_array(struct meta_json *j);
void meta_json_key(struct meta_json *j, const char *key);
void meta_json_str(struct meta_json *j, const char *s);
void meta_json_i64(struct meta_json *j, int64_t v);
void meta_json_null(struct meta_json *j);

#endif
