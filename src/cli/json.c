/* json.c — recursive-descent JSON reader (see json.h). */
#include "cli/json.h"

#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

struct parser {
	const char *p;
	const char *end;
	struct keel_arena *arena;
	int depth;
};

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
				   *ps->p == '\r')) {
		ps->p++;
	}
}

static struct json *new_node(struct parser *ps, enum json_type type)
{
	struct json *j = keel_arena_alloc(ps->arena, sizeof(*j));
	if (j != NULL) {
		memset(j, 0, sizeof(*j));
		j->type = type;
	}
	return j;
}

static const char *parse_string(struct parser *ps)
{
	if (ps->p >= ps->end || *ps->p != '"') {
		return NULL;
	}
	ps->p++;
	const char *start = ps->p;
	size_t max = 0;
	while (ps->p < ps->end && *ps->p != '"') {
		if (*ps->p == '\\') {
			ps->p++;
		}
		ps->p++;
		max++;
	}
	if (ps->p >= ps->end) {
		return NULL;
	}
	char *out = keel_arena_alloc(ps->arena, max * 4 + 1);
	if (out == NULL) {
		return NULL;
	}
	size_t o = 0;
	for (const char *q = start; q < ps->p; q++) {
		if (*q != '\\') {
			out[o++] = *q;
			continue;
		}
		q++;
		switch (*q) {
		case 'n': out[o++] = '\n'; break;
		case 't': out[o++] = '\t'; break;
		case 'r': out[o++] = '\r'; break;
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'u': {
			if (ps->p - q < 5) {
				return NULL;
			}
			char hex[5] = {q[1], q[2], q[3], q[4], 0};
			unsigned long cp = strtoul(hex, NULL, 16);
			q += 4;
			if (cp < 0x80) {
				out[o++] = (char)cp;
			} else if (cp < 0x800) {
				out[o++] = (char)(0xc0 | (cp >> 6));
				out[o++] = (char)(0x80 | (cp & 0x3f));
			} else {
				out[o++] = (char)(0xe0 | (cp >> 12));
				out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				out[o++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default: out[o++] = *q; break;
		}
	}
	out[o] = '\0';
	ps->p++;
	return out;
}

static struct json *parse_value(struct parser *ps);

static struct json *parse_container(struct parser *ps, bool object)
{
	struct json *j = new_node(ps, object ? JSON_OBJECT : JSON_ARRAY);
	if (j == NULL || ++ps->depth > JSON_MAX_DEPTH) {
		return NULL;
	}
	ps->p++;
	struct json **tail = &j->child;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
		ps->p++;
		ps->depth--;
		return j;
	}
	for (;;) {
		const char *key = NULL;
		skip_ws(ps);
		if (object) {
			key = parse_string(ps);
			skip_ws(ps);
			if (key == NULL || ps->p >= ps->end || *ps->p != ':') {
				return NULL;
			}
			ps->p++;
		}
		struct json *v = parse_value(ps);
		if (v == NULL) {
			return NULL;
		}
		v->key = key;
		*tail = v;
		tail = &v->next;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == (object ? '}' : ']')) {
			ps->p++;
			ps->depth--;
			return j;
		}
		return NULL;
	}
}

static struct json *parse_value(struct parser *ps)
{
	skip_ws(ps);
	if (ps->p >= ps->end) {
		return NULL;
	}
	char c = *ps->p;
	if (c == '{' || c == '[') {
		return parse_container(ps, c == '{');
	}
	if (c == '"') {
		struct json *j = new_node(ps, JSON_STRING);
		if (j != NULL) {
			j->string = parse_string(ps);
		}
		return j != NULL && j->string != NULL ? j : NULL;
	}
	if ((size_t)(ps->end - ps->p) >= 4 && strncmp(ps->p, "true", 4) == 0) {
		ps->p += 4;
		struct json *j = new_node(ps, JSON_BOOL);
		if (j != NULL) {
			j->boolean = true;
		}
		return j;
	}
	if ((size_t)(ps->end - ps->p) >= 5 && strncmp(ps->p, "false", 5) == 0) {
		ps->p += 5;
		return new_node(ps, JSON_BOOL);
	}
	if ((size_t)(ps->end - ps->p) >= 4 && strncmp(ps->p, "null", 4) == 0) {
		ps->p += 4;
		return new_node(ps, JSON_NULL);
	}
	char buf[64];
	size_t n = 0;
	while (ps->p < ps->end && n < sizeof(buf) - 1 && strchr("+-0123456789.eE", *ps->p) != NULL) {
		buf[n++] = *ps->p++;
	}
	if (n == 0) {
		return NULL;
	}
	buf[n] = '\0';
	struct json *j = new_node(ps, JSON_NUMBER);
	if (j != NULL) {
		j->number = strtod(buf, NULL);
	}
	return j;
}

struct json *json_parse(struct keel_arena *arena, const char *text, size_t size)
{
	struct parser ps = {text, text + size, arena, 0};
	struct json *j = parse_value(&ps);
	skip_ws(&ps);
	return ps.p == ps.end ? j : NULL;
}

const struct json *json_get(const struct json *obj, const char *key)
{
	if (obj == NULL || obj->type != JSON_OBJECT) {
		return NULL;
	}
	for (const struct json *m = obj->child; m != NULL; m = m->next) {
		if (m->key != NULL && strcmp(m->key, key) == 0) {
			return m;
		}
	}
	return NULL;
}

double json_num(const struct json *obj, const char *key, double fallback)
{
	const struct json *v = json_get(obj, key);
	return v != NULL && v->type == JSON_NUMBER ? v->number : fallback;
}

const char *json_str(const struct json *obj, const char *key, const char *fallback)
{
	const struct json *v = json_get(obj, key);
	return v != NULL && v->type == JSON_STRING ? v->string : fallback;
}

bool json_bool(const struct json *obj, const char *key, bool fallback)
{
	const struct json *v = json_get(obj, key);
	return v != NULL && v->type == JSON_BOOL ? v->boolean : fallback;
}
