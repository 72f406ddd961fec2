/* zk_acl.c — identities, the ACL gate, validation, the ACL table. */
#include "zk/zk_acl.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_codes.h"

/* ---- identities ---- */

bool zk_ids_contains(const struct zk_ids *ids, struct zk_bytes scheme, struct zk_bytes id)
{
	for (uint32_t i = 0; i < ids->count; i++) {
		if (zk_bytes_eq(ids->ids[i].scheme, scheme) && zk_bytes_eq(ids->ids[i].id, id)) {
			return true;
		}
	}
	return false;
}

enum keel_err zk_ids_add(struct zk_ids *ids, struct zk_bytes scheme, struct zk_bytes id)
{
	if (zk_ids_contains(ids, scheme, id)) {
		return KEEL_OK;
	}
	if (ids->count == ZK_IDS_MAX) {
		return KEEL_LIMIT;
	}
	ids->ids[ids->count].scheme = scheme;
	ids->ids[ids->count].id = id;
	ids->count++;
	return KEEL_OK;
}

bool zk_ids_is_super(const struct zk_ids *ids)
{
	for (uint32_t i = 0; i < ids->count; i++) {
		if (zk_bytes_eq_str(ids->ids[i].scheme, "super")) {
			return true;
		}
	}
	return false;
}

void zk_auth_info_init(struct zk_auth_info *info)
{
	zk_ids_init(&info->ids);
	memset(info->copies, 0, sizeof(info->copies));
}

void zk_auth_info_close(struct zk_auth_info *info)
{
	for (uint32_t i = 0; i < ZK_IDS_MAX; i++) {
		free(info->copies[i]);
		info->copies[i] = NULL;
	}
	info->ids.count = 0;
}

enum keel_err zk_auth_info_add(struct zk_auth_info *info, struct zk_bytes scheme,
			       struct zk_bytes id)
{
	if (zk_ids_contains(&info->ids, scheme, id)) {
		return KEEL_OK;
	}
	uint32_t n = info->ids.count;
	if (n == ZK_IDS_MAX) {
		return KEEL_LIMIT;
	}
	size_t s = zk_bytes_len(scheme);
	size_t i = zk_bytes_len(id);
	uint8_t *copy = malloc(s + i + 1);
	if (copy == NULL) {
		return KEEL_NOMEM;
	}
	if (s > 0) {
		memcpy(copy, scheme.data, s);
	}
	if (i > 0) {
		memcpy(copy + s, id.data, i);
	}
	info->copies[n] = copy;
	info->ids.ids[n].scheme = zk_bytes_of(copy, s);
	info->ids.ids[n].id = zk_bytes_of(copy + s, i);
	info->ids.count = n + 1;
	return KEEL_OK;
}

void zk_ids_who_am_i(struct keel_wbuf *w, const struct zk_ids *ids)
{
	keel_wbuf_i32(w, (int32_t)ids->count);
	for (uint32_t i = 0; i < ids->count; i++) {
		const struct zk_id *id = &ids->ids[i];
		struct zk_bytes user = zk_bytes_of("", 0);
		if (zk_bytes_eq_str(id->scheme, "digest")) {
			/* Java: id.split(":")[0] */
			size_t n = zk_bytes_len(id->id);
			size_t k = 0;
			while (k < n && id->id.data[k] != ':') {
				k++;
			}
			user = zk_bytes_of(id->id.data, k);
		} else if (zk_bytes_eq_str(id->scheme, "ip") || zk_bytes_eq_str(id->scheme, "sasl") ||
			   zk_bytes_eq_str(id->scheme, ZK_X509_SCHEME)) {
			user = id->id;
		}
		zk_write_bytes(w, id->scheme);
		zk_write_bytes(w, user);
	}
}

/* ---- IPv4 matching (IPAuthenticationProvider) ---- */

/* Java Integer.parseInt on ASCII: optional sign, at least one digit. */
static bool parse_int(const uint8_t *p, size_t n, int64_t *out)
{
	size_t i = 0;
	bool neg = false;
	if (n > 0 && (p[0] == '+' || p[0] == '-')) {
		neg = p[0] == '-';
		i = 1;
	}
	if (i == n) {
		return false;
	}
	int64_t v = 0;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9') {
			return false;
		}
		v = v * 10 + (p[i] - '0');
		if (v > INT32_MAX + (int64_t)1) {
			return false; /* NumberFormatException */
		}
	}
	if (!neg && v > INT32_MAX) {
		return false;
	}
	*out = neg ? -v : v;
	return true;
}

/* "a.b.c.d" with each part 0..255 (split on '.', keeping empty parts). */
static bool parse_v4(const uint8_t *p, size_t n, uint8_t addr[4])
{
	size_t part = 0;
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '.') {
			continue;
		}
		if (part == 4) {
			return false;
		}
		int64_t v;
		if (!parse_int(p + start, i - start, &v) || v < 0 || v > 255) {
			return false;
		}
		addr[part++] = (uint8_t)v;
		start = i + 1;
	}
	return part == 4;
}

/* Splits "addr/bits" at the first '/'; bits = 32 without one. */
static bool parse_cidr(struct zk_bytes expr, uint8_t addr[4], int *bits)
{
	size_t n = zk_bytes_len(expr);
	const uint8_t *p = expr.data;
	size_t slash = n;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '/') {
			slash = i;
			break;
		}
	}
	if (!parse_v4(p, slash, addr)) {
		return false;
	}
	*bits = 32;
	if (slash < n) {
		int64_t v;
		if (!parse_int(p + slash + 1, n - slash - 1, &v) || v < 0 || v > 32) {
			return false;
		}
		*bits = (int)v;
	}
	return true;
}

static void mask_v4(uint8_t addr[4], int bits)
{
	for (int i = 0; i < 4; i++) {
		int keep = bits - 8 * i;
		if (keep >= 8) {
			continue;
		}
		addr[i] = keep <= 0 ? 0 : (uint8_t)(addr[i] & (0xff << (8 - keep)));
	}
}

bool zk_acl_ip_valid(struct zk_bytes acl_expr)
{
	uint8_t addr[4];
	int bits;
	return parse_cidr(acl_expr, addr, &bits);
}

bool zk_acl_ip_matches(struct zk_bytes ip, struct zk_bytes acl_expr)
{
	uint8_t acl_addr[4];
	int bits;
	if (!parse_cidr(acl_expr, acl_addr, &bits)) {
		return false;
	}
	uint8_t remote[4];
	if (!parse_v4(ip.data, zk_bytes_len(ip), remote)) {
		return false;
	}
	mask_v4(acl_addr, bits);
	mask_v4(remote, bits);
	return memcmp(acl_addr, remote, 4) == 0;
}

/* DigestAuthenticationProvider.isValid: id.split(":").length == 2, where
 * Java drops trailing empty strings ("a:b:" is 2 parts, "a:b:c" is 3). */
bool zk_acl_digest_valid(struct zk_bytes id)
{
	size_t n = zk_bytes_len(id);
	/* Drop trailing ':' (they only make trailing empty parts). */
	while (n > 0 && id.data[n - 1] == ':') {
		n--;
	}
	if (n == 0) {
		return false; /* "" -> [""], "::" -> [] */
	}
	size_t colons = 0;
	for (size_t i = 0; i < n; i++) {
		colons += id.data[i] == ':';
	}
	return colons == 1;
}

/* ---- sasl (SASLAuthenticationProvider) ---- */

/* The identity is the SASL user name; "super" matches every sasl entry. */
bool zk_acl_sasl_matches(struct zk_bytes id, struct zk_bytes acl_id)
{
	return zk_bytes_eq(id, acl_id) || zk_bytes_eq_str(id, "super");
}

/* As ZooKeeper's KerberosName check: a name with '@' must read
 * primary[/instance]@REALM (no further '/' or '@'); one without is any
 * string. */
bool zk_acl_sasl_valid(struct zk_bytes id)
{
	if (zk_bytes_is_null(id)) {
		return false;
	}
	size_t n = zk_bytes_len(id);
	size_t at = n;
	size_t slashes = 0;
	size_t ats = 0;
	for (size_t i = 0; i < n; i++) {
		if (id.data[i] == '@') {
			ats++;
			at = i;
		} else if (id.data[i] == '/') {
			slashes += at == n ? 1u : 2u; /* after '@' never allowed */
		}
	}
	return ats == 0 || (ats == 1 && slashes <= 1);
}

/* ---- the gate ---- */

static bool entry_matches(const struct zk_acl *a, const struct zk_ids *ids)
{
	if (zk_bytes_eq_str(a->id.scheme, "world") && zk_bytes_eq_str(a->id.id, "anyone")) {
		return true;
	}
	/* x509 (X509AuthenticationProvider) matches like digest: equal ids. */
	bool digest = zk_bytes_eq_str(a->id.scheme, "digest") ||
		      zk_bytes_eq_str(a->id.scheme, ZK_X509_SCHEME);
	bool ip = zk_bytes_eq_str(a->id.scheme, "ip");
	bool sasl = zk_bytes_eq_str(a->id.scheme, "sasl");
	if (!digest && !ip && !sasl) {
		return false; /* no provider for the scheme */
	}
	for (uint32_t i = 0; i < ids->count; i++) {
		const struct zk_id *id = &ids->ids[i];
		if (!zk_bytes_eq(id->scheme, a->id.scheme)) {
			continue;
		}
		if (digest && zk_bytes_eq(id->id, a->id.id)) {
			return true;
		}
		if (ip && zk_acl_ip_matches(id->id, a->id.id)) {
			return true;
		}
		if (sasl && zk_acl_sasl_matches(id->id, a->id.id)) {
			return true;
		}
	}
	return false;
}

bool zk_acl_check(struct zk_acl_vec acl, int32_t perm, const struct zk_ids *ids)
{
	if (acl.count <= 0) {
		return true;
	}
	if (zk_ids_is_super(ids)) {
		return true;
	}
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, acl);
	while (zk_acl_iter_next(&it, &a)) {
		if ((a.perms & perm) != 0 && entry_matches(&a, ids)) {
			return true;
		}
	}
	return false;
}

/* ---- validation ---- */

static bool acl_eq(const struct zk_acl *a, const struct zk_acl *b)
{
	return a->perms == b->perms && zk_bytes_eq(a->id.scheme, b->id.scheme) &&
	       zk_bytes_eq(a->id.id, b->id.id);
}

/* Is element `index` of `v` a repeat of an earlier one? */
static bool seen_before(struct zk_acl_vec v, int32_t index, const struct zk_acl *a)
{
	struct zk_acl_iter it;
	struct zk_acl b;
	zk_acl_iter_init(&it, v);
	for (int32_t i = 0; i < index && zk_acl_iter_next(&it, &b); i++) {
		if (acl_eq(a, &b)) {
			return true;
		}
	}
	return false;
}

/* Digest, sasl and x509 identities count as authenticated ("auth" expands to
 * them); ip does not, and "super" has no provider. */
static int32_t expand_auth(const struct zk_acl *a, const struct zk_ids *ids, struct keel_wbuf *out,
			   int32_t *count)
{
	bool any = false;
	for (uint32_t i = 0; i < ids->count; i++) {
		if (!zk_bytes_eq_str(ids->ids[i].scheme, "digest") &&
		    !zk_bytes_eq_str(ids->ids[i].scheme, "sasl") &&
		    !zk_bytes_eq_str(ids->ids[i].scheme, ZK_X509_SCHEME)) {
			continue;
		}
		struct zk_acl e = {a->perms, ids->ids[i]};
		zk_write_acl(out, &e);
		(*count)++;
		any = true;
	}
	return any ? ZK_OK : ZK_INVALID_ACL;
}

/* A distinguished name, as far as an ACL needs one: "TYPE=value" first. */
static bool x509_id_valid(struct zk_bytes id)
{
	size_t n = zk_bytes_is_null(id) ? 0 : zk_bytes_len(id);
	for (size_t i = 1; i + 1 < n; i++) {
		if (id.data[i] == '=') {
			return true;
		}
	}
	return false;
}

int32_t zk_acl_fixup(struct zk_acl_vec in, const struct zk_ids *ids, struct keel_wbuf *out,
		     int32_t *count)
{
	*count = 0;
	if (in.count <= 0 || in.count > ZK_ACL_MAX_ENTRIES) {
		return ZK_INVALID_ACL;
	}
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, in);
	for (int32_t index = 0; zk_acl_iter_next(&it, &a); index++) {
		if (seen_before(in, index, &a)) {
			continue;
		}
		if (zk_bytes_is_null(a.id.scheme)) {
			return ZK_INVALID_ACL;
		}
		if (zk_bytes_eq_str(a.id.scheme, "world") && zk_bytes_eq_str(a.id.id, "anyone")) {
			zk_write_acl(out, &a);
			(*count)++;
		} else if (zk_bytes_eq_str(a.id.scheme, "auth")) {
			int32_t rc = expand_auth(&a, ids, out, count);
			if (rc != ZK_OK) {
				return rc;
			}
		} else if (zk_bytes_eq_str(a.id.scheme, "digest")) {
			if (!zk_acl_digest_valid(a.id.id)) {
				return ZK_INVALID_ACL;
			}
			zk_write_acl(out, &a);
			(*count)++;
		} else if (zk_bytes_eq_str(a.id.scheme, "ip")) {
			if (zk_bytes_is_null(a.id.id) || !zk_acl_ip_valid(a.id.id)) {
				return ZK_INVALID_ACL;
			}
			zk_write_acl(out, &a);
			(*count)++;
		} else if (zk_bytes_eq_str(a.id.scheme, "sasl")) {
			if (!zk_acl_sasl_valid(a.id.id)) {
				return ZK_INVALID_ACL;
			}
			zk_write_acl(out, &a);
			(*count)++;
		} else if (zk_bytes_eq_str(a.id.scheme, ZK_X509_SCHEME)) {
			if (!x509_id_valid(a.id.id)) {
				return ZK_INVALID_ACL;
			}
			zk_write_acl(out, &a);
			(*count)++;
		} else {
			return ZK_INVALID_ACL;
		}
	}
	return keel_wbuf_ok(out) ? ZK_OK : ZK_MARSHALLING_ERROR;
}

void zk_acl_write_masked(struct keel_wbuf *w, struct zk_acl_vec acl)
{
	keel_wbuf_i32(w, acl.count < 0 ? 0 : acl.count);
	struct zk_acl_iter it;
	struct zk_acl a;
	zk_acl_iter_init(&it, acl);
	while (zk_acl_iter_next(&it, &a)) {
		if (!zk_bytes_eq_str(a.id.scheme, "digest")) {
			zk_write_acl(w, &a);
			continue;
		}
		/* Java: id.replaceAll(":.*", ":x") — from the first ':' on. */
		size_t n = zk_bytes_len(a.id.id);
		size_t k = 0;
		while (k < n && a.id.id.data[k] != ':') {
			k++;
		}
		keel_wbuf_i32(w, a.perms);
		zk_write_bytes(w, a.id.scheme);
		if (k == n) {
			zk_write_bytes(w, a.id.id);
		} else {
			keel_wbuf_i32(w, (int32_t)(k + 2));
			keel_wbuf_bytes(w, a.id.id.data, k);
			keel_wbuf_bytes(w, ":x", 2);
		}
	}
}

/* ---- the table ---- */

struct zk_acl_list {
	uint64_t hash;
	uint32_t refs;
	int32_t count;
	uint32_t size;
	uint32_t id;
	uint8_t bytes[];
};

#define ACL_HASH_SEED UINT64_C(0x6b65656c2d61636c) /* fixed: hashes are replicated */

uint64_t zk_acl_content_hash(struct zk_acl_vec v)
{
	uint64_t h = keel_hash_bytes(v.data, v.count < 0 ? 0 : v.size, ACL_HASH_SEED);
	return keel_hash_u64(h ^ (uint64_t)(uint32_t)v.count);
}

enum keel_err zk_acl_table_init(struct zk_acl_table *t, uint64_t seed)
{
	memset(t, 0, sizeof(*t));
	t->seed = seed;
	return keel_hmap_init(&t->index, 16);
}

void zk_acl_table_close(struct zk_acl_table *t)
{
	for (uint32_t i = 0; i < t->capacity; i++) {
		free(t->lists[i]);
	}
	free(t->lists);
	free(t->free_ids);
	free(t->pending);
	keel_hmap_close(&t->index);
	memset(t, 0, sizeof(*t));
}

struct intern_key {
	struct zk_acl_vec v;
};

static bool list_eq(const void *item, const void *key)
{
	const struct zk_acl_list *l = item;
	const struct intern_key *k = key;
	return l->count == k->v.count && l->size == k->v.size &&
	       (l->size == 0 || memcmp(l->bytes, k->v.data, l->size) == 0);
}

static bool grow_ids(struct zk_acl_table *t)
{
	uint32_t cap = t->capacity == 0 ? 16 : t->capacity * 2;
	struct zk_acl_list **lists = realloc(t->lists, cap * sizeof(*lists));
	if (lists == NULL) {
		return false;
	}
	t->lists = lists;
	uint32_t *free_ids = realloc(t->free_ids, cap * sizeof(*free_ids));
	if (free_ids == NULL) {
		return false;
	}
	t->free_ids = free_ids;
	/* New ids go on the free stack highest first, so the lowest pops first. */
	for (uint32_t i = cap; i-- > t->capacity;) {
		t->lists[i] = NULL;
		t->free_ids[t->free_count++] = i;
	}
	t->capacity = cap;
	return true;
}

uint32_t zk_acl_table_intern(struct zk_acl_table *t, struct zk_acl_vec v)
{
	KEEL_ASSERT(v.count >= 0);
	uint64_t hash = zk_acl_content_hash(v);
	struct intern_key key = {v};
	struct zk_acl_list *l = keel_hmap_find(&t->index, hash, list_eq, &key);
	if (l != NULL) {
		l->refs++;
		return l->id;
	}
	if (t->free_count == 0 && !grow_ids(t)) {
		return ZK_ACL_NONE;
	}
	l = malloc(sizeof(*l) + v.size);
	if (l == NULL) {
		return ZK_ACL_NONE;
	}
	l->hash = hash;
	l->refs = 1;
	l->count = v.count;
	l->size = v.size;
	if (v.size > 0) {
		memcpy(l->bytes, v.data, v.size);
	}
	if (keel_hmap_insert(&t->index, hash, l) != KEEL_OK) {
		free(l);
		return ZK_ACL_NONE;
	}
	l->id = t->free_ids[--t->free_count];
	t->lists[l->id] = l;
	t->count++;
	t->bytes += sizeof(*l) + v.size;
	return l->id;
}

static struct zk_acl_list *list_at(const struct zk_acl_table *t, uint32_t id)
{
	KEEL_ASSERT(id < t->capacity);
	struct zk_acl_list *l = t->lists[id];
	KEEL_ASSERT(l != NULL);
	return l;
}

void zk_acl_table_ref(struct zk_acl_table *t, uint32_t id)
{
	list_at(t, id)->refs++;
}

void zk_acl_table_unref(struct zk_acl_table *t, uint32_t id)
{
	struct zk_acl_list *l = list_at(t, id);
	KEEL_ASSERT(l->refs > 0);
	l->refs--;
	if (l->refs > 0) {
		return;
	}
	if (t->pending_count == t->pending_capacity) {
		uint32_t cap = t->pending_capacity == 0 ? 16 : t->pending_capacity * 2;
		uint32_t *p = realloc(t->pending, cap * sizeof(*p));
		if (p == NULL) {
			return; /* kept until a later unref/collect finds room */
		}
		t->pending = p;
		t->pending_capacity = cap;
	}
	t->pending[t->pending_count++] = id;
}

void zk_acl_table_collect(struct zk_acl_table *t)
{
	for (uint32_t i = 0; i < t->pending_count; i++) {
		uint32_t id = t->pending[i];
		struct zk_acl_list *l = t->lists[id];
		if (l == NULL || l->refs > 0) {
			continue; /* re-referenced since, or listed twice */
		}
		bool removed = keel_hmap_remove_item(&t->index, l->hash, l);
		KEEL_ASSERT(removed);
		t->bytes -= sizeof(*l) + l->size;
		free(l);
		t->lists[id] = NULL;
		t->free_ids[t->free_count++] = id;
		t->count--;
	}
	t->pending_count = 0;
}

struct zk_acl_vec zk_acl_table_get(const struct zk_acl_table *t, uint32_t id)
{
	const struct zk_acl_list *l = list_at(t, id);
	struct zk_acl_vec v = {l->count, l->bytes, l->size};
	return v;
}

uint64_t zk_acl_table_hash(const struct zk_acl_table *t, uint32_t id)
{
	return list_at(t, id)->hash;
}

uint32_t zk_acl_table_refs(const struct zk_acl_table *t, uint32_t id)
{
	return list_at(t, id)->refs;
}
