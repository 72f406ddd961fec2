/*
 * json.h — a small JSON reader for the CLI (status documents, broker
 * metadata). Parses into a tree of nodes allocated from one arena; strings
 * are unescaped copies. Depth and size are bounded.
 */
#ifndef KEEL_CLI_JSON_H
#define KEEL_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "base/alloc.h"

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
	enum json_type type;
	bool boolean;
	double number;
	const char *string;  /* JSON_STRING; also the key of an object member */
	const char *key;     /* set on object members */
	struct json *child;  /* first element/member */
	struct json *next;   /* next sibling */
};

/* NULL on malformed input. Everything lives in `arena`. */
struct json *json_parse(struct keel_arena *arena, const char *text, size_t size);

/* Member `key` of an object, or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
double json_num(const struct json *obj, const char *key, double fallback);
const char *json_str(const struct json *obj, const char *key, const char *fallback);
bool json_bool(const struct json *obj, const char *key, bool fallback);

#endif
