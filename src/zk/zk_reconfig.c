/* zk_reconfig.c — server strings, reconfig plans, /zookeeper/config (see zk_reconfig.h). */
#include "zk/zk_reconfig.h"

#include <string.h>

#include "base/assert.h"
#include "base/fmt.h"

/* ---- parsing ---- */

struct span {
	const char *p;
	size_t len;
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static struct span trim(struct span s)
{
	while (s.len > 0 && is_blank(s.p[0])) {
		s.p++;
		s.len--;
	}
	while (s.len > 0 && is_blank(s.p[s.len - 1])) {
		s.len--;
	}
	return s;
}

static bool span_eq(struct span s, const char *lit)
{
	size_t n = strlen(lit);
	return s.len == n && memcmp(s.p, lit, n) == 0;
}

/* Decimal, 1..max, no sign, no leading blanks. */
static bool parse_uint(struct span s, uint64_t max, uint64_t *out)
{
	if (s.len == 0 || s.len > 10) {
		return false;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < s.len; i++) {
		if (s.p[i] < '0' || s.p[i] > '9') {
			return false;
		}
		v = v * 10 + (uint64_t)(s.p[i] - '0');
	}
	if (v == 0 || v > max) {
		return false;
	}
	*out = v;
	return true;
}

static bool valid_port(struct span s)
{
	uint64_t port;
	return parse_uint(s, 65535, &port);
}

/* A host: a bracketed IPv6 address or a name/IPv4 of [A-Za-z0-9.-_]. */
static bool valid_host(struct span s)
{
	if (s.len == 0) {
		return false;
	}
	if (s.p[0] == '[') {
		if (s.len < 3 || s.p[s.len - 1] != ']') {
			return false;
		}
		for (size_t i = 1; i + 1 < s.len; i++) {
			char c = s.p[i];
			bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
				  (c >= 'A' && c <= 'F') || c == ':' || c == '.';
			if (!ok) {
				return false;
			}
		}
		return true;
	}
	for (size_t i = 0; i < s.len; i++) {
		char c = s.p[i];
		bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  c == '.' || c == '-' || c == '_';
		if (!ok) {
			return false;
		}
	}
	return true;
}

/* Splits "HOST:PORT" at its last colon (after a bracketed host). */
static bool split_host_port(struct span s, struct span *host, struct span *port)
{
	size_t start = 0;
	if (s.len > 0 && s.p[0] == '[') {
		const char *close = memchr(s.p, ']', s.len);
		if (close == NULL) {
			return false;
		}
		start = (size_t)(close - s.p);
	}
	for (size_t i = s.len; i > start; i--) {
		if (s.p[i - 1] == ':') {
			*host = (struct span){s.p, i - 1};
			*port = (struct span){s.p + i, s.len - i};
			return valid_host(*host) && valid_port(*port);
		}
	}
	return false;
}

/* The client part: "[HOST:]PORT". */
static bool valid_client(struct span s)
{
	struct span host, port;
	if (memchr(s.p, ':', s.len) == NULL) {
		return valid_port(s);
	}
	return split_host_port(s, &host, &port);
}

/* Takes the last ":FIELD" off `rest` (never a colon inside brackets). */
static bool peel_last(struct span *rest, struct span *field)
{
	for (size_t i = rest->len; i > 0; i--) {
		char c = rest->p[i - 1];
		if (c == ']') {
			return false;
		}
		if (c == ':') {
			*field = (struct span){rest->p + i, rest->len - i};
			rest->len = i - 1;
			return true;
		}
	}
	return false;
}

enum keel_err zk_server_spec_parse(const char *text, size_t len, struct zk_server_spec *out)
{
	memset(out, 0, sizeof(*out));
	struct span s = trim((struct span){text, len});
	static const char prefix[] = "server.";
	if (s.len < sizeof(prefix) - 1 || memcmp(s.p, prefix, sizeof(prefix) - 1) != 0) {
		return KEEL_INVAL;
	}
	s.p += sizeof(prefix) - 1;
	s.len -= sizeof(prefix) - 1;
	const char *eq = memchr(s.p, '=', s.len);
	if (eq == NULL) {
		return KEEL_INVAL;
	}
	struct span id = trim((struct span){s.p, (size_t)(eq - s.p)});
	struct span value = trim((struct span){eq + 1, s.len - (size_t)(eq - s.p) - 1});
	if (!parse_uint(id, ZK_RECONFIG_MAX_ID, &out->id)) {
		return KEEL_INVAL;
	}
	/* "HOST:QP:EP[:ROLE]" [";CLIENT"] */
	struct span quorum = value, client = {NULL, 0};
	const char *semi = memchr(value.p, ';', value.len);
	if (semi != NULL) {
		quorum = trim((struct span){value.p, (size_t)(semi - value.p)});
		client = trim((struct span){semi + 1, value.len - (size_t)(semi - value.p) - 1});
		if (!valid_client(client)) {
			return KEEL_INVAL;
		}
	}
	/* Peel the role (optional) and the election port off the right. */
	out->role = ZK_ROLE_PARTICIPANT;
	struct span rest = quorum, last;
	if (!peel_last(&rest, &last)) {
		return KEEL_INVAL;
	}
	if (span_eq(last, "participant") || span_eq(last, "observer")) {
		out->role = span_eq(last, "observer") ? ZK_ROLE_OBSERVER : ZK_ROLE_PARTICIPANT;
		if (!peel_last(&rest, &last)) {
			return KEEL_INVAL;
		}
	}
	/* `last` is the election port; `rest` is HOST:QUORUM_PORT. */
	struct span host, port;
	if (!valid_port(last) || !split_host_port(rest, &host, &port)) {
		return KEEL_INVAL;
	}
	if (rest.len >= sizeof(out->peer_addr) ||
	    keel_fmt(out->tail, sizeof(out->tail), ":%.*s%s%.*s", (int)last.len, last.p,
		     client.len > 0 ? ";" : "", (int)client.len, client.p) >= sizeof(out->tail)) {
		return KEEL_INVAL;
	}
	memcpy(out->peer_addr, rest.p, rest.len);
	out->peer_addr[rest.len] = '\0';
	return KEEL_OK;
}

/* Calls fn on each comma-separated item of `text` (blank items skipped). */
static enum keel_err each_item(struct zk_bytes text,
			       enum keel_err (*fn)(struct span item, void *arg), void *arg)
{
	const char *p = (const char *)text.data;
	size_t len = zk_bytes_len(text);
	if (len == 0) {
		return KEEL_OK; /* also a null string: no pointer arithmetic on NULL */
	}
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || p[i] == ',') {
			struct span item = trim((struct span){p + start, i - start});
			if (item.len > 0) {
				enum keel_err rc = fn(item, arg);
				if (rc != KEEL_OK) {
					return rc;
				}
			}
			start = i + 1;
		}
	}
	return KEEL_OK;
}

/* ---- planning ---- */

struct plan {
	const struct zk_member_role *members;
	size_t member_count;
	struct zk_reconfig_step *steps;
	size_t max_steps;
	size_t count;
	uint64_t listed[ZK_RECONFIG_MAX_SERVERS]; /* ids named so far */
	size_t listed_count;
};

static uint8_t role_of(const struct plan *pl, uint64_t id)
{
	for (size_t i = 0; i < pl->member_count; i++) {
		if (pl->members[i].id == id) {
			return pl->members[i].role;
		}
	}
	return 0;
}

/* Records that `id` was named; KEEL_INVAL if it was already. */
static enum keel_err name_once(struct plan *pl, uint64_t id)
{
	for (size_t i = 0; i < pl->listed_count; i++) {
		if (pl->listed[i] == id) {
			return KEEL_INVAL;
		}
	}
	if (pl->listed_count == ZK_RECONFIG_MAX_SERVERS) {
		return KEEL_INVAL;
	}
	pl->listed[pl->listed_count++] = id;
	return KEEL_OK;
}

static enum keel_err push(struct plan *pl, uint8_t kind, const struct zk_server_spec *spec,
			  uint64_t id)
{
	if (pl->count == pl->max_steps) {
		return KEEL_INVAL;
	}
	struct zk_reconfig_step *st = &pl->steps[pl->count++];
	memset(st, 0, sizeof(*st));
	st->kind = kind;
	if (spec != NULL) {
		st->server = *spec;
	}
	st->server.id = id;
	return KEEL_OK;
}

/* A server string of joining/newMembers: add, promote, or nothing. */
static enum keel_err plan_join(struct span item, void *arg)
{
	struct plan *pl = arg;
	struct zk_server_spec spec;
	enum keel_err rc = zk_server_spec_parse(item.p, item.len, &spec);
	if (rc == KEEL_OK) {
		rc = name_once(pl, spec.id);
	}
	if (rc != KEEL_OK) {
		return rc;
	}
	uint8_t current = role_of(pl, spec.id);
	if (current == 0) {
		return push(pl,
			    spec.role == ZK_ROLE_OBSERVER ? ZK_STEP_ADD_OBSERVER
							  : ZK_STEP_ADD_PARTICIPANT,
			    &spec, spec.id);
	}
	if (current == ZK_ROLE_OBSERVER && spec.role == ZK_ROLE_PARTICIPANT) {
		return push(pl, ZK_STEP_PROMOTE, NULL, spec.id);
	}
	if (current == ZK_ROLE_PARTICIPANT && spec.role == ZK_ROLE_OBSERVER) {
		return KEEL_INVAL; /* a voter cannot become a learner in keel */
	}
	return KEEL_OK; /* already as asked */
}

static enum keel_err plan_leave(struct span item, void *arg)
{
	struct plan *pl = arg;
	uint64_t id;
	if (!parse_uint(item, ZK_RECONFIG_MAX_ID, &id) || role_of(pl, id) == 0) {
		return KEEL_INVAL;
	}
	enum keel_err rc = name_once(pl, id);
	return rc == KEEL_OK ? push(pl, ZK_STEP_REMOVE, NULL, id) : rc;
}

enum keel_err zk_reconfig_plan(const struct zk_member_role *members, size_t member_count,
			       struct zk_bytes joining, struct zk_bytes leaving,
			       struct zk_bytes new_members, struct zk_reconfig_step *steps,
			       size_t max_steps, size_t *step_count)
{
	*step_count = 0;
	struct plan pl = {.members = members,
			  .member_count = member_count,
			  .steps = steps,
			  .max_steps = max_steps};
	bool incremental = zk_bytes_len(joining) > 0 || zk_bytes_len(leaving) > 0;
	bool whole = zk_bytes_len(new_members) > 0;
	if (incremental == whole) {
		return KEEL_INVAL; /* both forms, or neither */
	}
	enum keel_err rc;
	if (incremental) {
		rc = each_item(joining, plan_join, &pl);
		if (rc == KEEL_OK) {
			rc = each_item(leaving, plan_leave, &pl);
		}
	} else {
		rc = each_item(new_members, plan_join, &pl);
		for (size_t i = 0; rc == KEEL_OK && i < member_count; i++) {
			bool kept = false;
			for (size_t j = 0; j < pl.listed_count; j++) {
				kept = kept || pl.listed[j] == members[i].id;
			}
			if (!kept) {
				rc = push(&pl, ZK_STEP_REMOVE, NULL, members[i].id);
			}
		}
	}
	if (rc != KEEL_OK) {
		return rc;
	}
	if (pl.count == 0) {
		return KEEL_INVAL; /* nothing would change */
	}
	/* Adds and promotions before removals (stable: kinds are ordered). */
	for (size_t i = 1; i < pl.count; i++) {
		struct zk_reconfig_step cur = steps[i];
		size_t j = i;
		while (j > 0 && steps[j - 1].kind > cur.kind) {
			steps[j] = steps[j - 1];
			j--;
		}
		steps[j] = cur;
	}
	*step_count = pl.count;
	return KEEL_OK;
}

/* ---- /zookeeper/config ---- */

static void wtext(struct keel_wbuf *out, const char *s)
{
	keel_wbuf_bytes(out, s, strlen(s));
}

void zk_config_render(const struct zk_config_member *members, size_t count, uint64_t version,
		      struct keel_wbuf *out)
{
	char line[3 * ZK_RECONFIG_ADDR_SIZE + 64];
	for (size_t i = 0; i < count; i++) {
		const struct zk_config_member *m = &members[i];
		const char *role = m->role == ZK_ROLE_OBSERVER ? "observer" : "participant";
		const char *tail = m->tail != NULL ? m->tail : "";
		const char *client = strchr(tail, ';');
		size_t election_len = client != NULL ? (size_t)(client - tail) : strlen(tail);
		if (election_len == 0) {
			/* No kept tail: the election port shows as the peer port. */
			const char *colon = strrchr(m->peer_addr, ':');
			tail = colon != NULL ? colon : "";
			election_len = strlen(tail);
		}
		keel_fmt(line, sizeof(line), "server.%llu=%s%.*s:%s%s\n", (unsigned long long)m->id,
			 m->peer_addr, (int)election_len, tail, role, client != NULL ? client : "");
		wtext(out, line);
	}
	keel_fmt(line, sizeof(line), "version=%llx", (unsigned long long)version);
	wtext(out, line);
}
