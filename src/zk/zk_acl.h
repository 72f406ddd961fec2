/*
 * zk_acl.h — identities, ACL checks, ACL validation and the ACL table.
 *
 * Identities. A connection (and every write it proposes) carries a list of
 * (scheme, id) pairs: ("ip", "10.1.2.3") from the socket at connect time,
 * ("digest", "user:base64sha1") for each successful digest auth,
 * ("x509", "CN=...,O=...") for a client certificate verified on a TLS port
 * (its subject DN, RFC 2253, as ZooKeeper's X509AuthenticationProvider),
 * and ("super", "") for the super user. The server computes them (see
 * zk_digest.h); this layer only compares strings. `struct zk_ids` is a
 * non-owning view (ZK_IDS_MAX entries); `struct zk_auth_info` owns copies
 * (one per connection, server side).
 *
 * The gate. zk_acl_check() is the one permission check every opcode goes
 * through (create/delete on the parent, read/write/admin on the node, each op
 * of a multi, getACL, exists, watch delivery). It is ZooKeeper's checkACL():
 * an empty ACL allows everything, a "super" identity allows everything, else
 * some entry with a wanted permission bit must match: world:anyone matches
 * all, "digest" and "x509" match an equal identity, "ip" matches an ip
 * identity inside its address/prefix (IPv4 only, as in ZooKeeper 3.8).
 *
 * Validation. zk_acl_fixup() is ZooKeeper's fixupACL() for create/setACL:
 * duplicates removed (first kept), "auth" entries replaced by every digest
 * and x509 identity of the caller (InvalidACL if it has none), world only
 * with id "anyone", digest ids must be "x:y" (Java split rules), ip ids a
 * valid IPv4 address with an optional /0..32 prefix, x509 ids a DN
 * ("TYPE=value..."); any other scheme is InvalidACL.
 *
 * The table. Nodes do not store ACLs: they store a 32-bit id into a table of
 * distinct ACL lists (ZooKeeper's ReferenceCountedACLCache). Lists are kept
 * in their jute encoding (count excluded), deduplicated by content, counted
 * by references. A list whose count drops to zero is freed at the next
 * zk_acl_table_collect() — not at once — so that an id carried by a watch
 * trigger stays valid until the server has fired the triggers of an apply.
 */
#ifndef KEEL_ZK_ACL_H
#define KEEL_ZK_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/hash.h"
#include "zk/zk_jute.h"

/* ---- identities ---- */

#define ZK_IDS_MAX 16
#define ZK_X509_SCHEME "x509"

struct zk_ids {
	uint32_t count;
	struct zk_id ids[ZK_IDS_MAX];
};

static inline void zk_ids_init(struct zk_ids *ids)
{
	ids->count = 0;
}

/* Adds (scheme, id) unless present (pointers are kept, not copied).
 * KEEL_LIMIT when full. */
enum keel_err zk_ids_add(struct zk_ids *ids, struct zk_bytes scheme, struct zk_bytes id);
bool zk_ids_contains(const struct zk_ids *ids, struct zk_bytes scheme, struct zk_bytes id);
bool zk_ids_is_super(const struct zk_ids *ids);

/* Owning identity list for a connection: zk_auth_info_add() copies. */
struct zk_auth_info {
	struct zk_ids ids;
	uint8_t *copies[ZK_IDS_MAX];
};

void zk_auth_info_init(struct zk_auth_info *info);
void zk_auth_info_close(struct zk_auth_info *info);
/* KEEL_LIMIT when full, KEEL_NOMEM; adding a present identity is KEEL_OK. */
enum keel_err zk_auth_info_add(struct zk_auth_info *info, struct zk_bytes scheme,
			       struct zk_bytes id);

/* whoAmI: (scheme, user) per identity, in order; digest users are the part
 * before ':', super's is "". Returns the encoded body in `w`. */
/* The sasl scheme (ZooKeeper's SASLAuthenticationProvider): does identity
 * `id` match the ACL entry's id, and is an ACL id valid. */
bool zk_acl_sasl_matches(struct zk_bytes id, struct zk_bytes acl_id);
bool zk_acl_sasl_valid(struct zk_bytes id);

void zk_ids_who_am_i(struct keel_wbuf *w, const struct zk_ids *ids);

/* ---- the gate ---- */

/* Does the caller hold one of the permission bits in `perm`? */
bool zk_acl_check(struct zk_acl_vec acl, int32_t perm, const struct zk_ids *ids);

/* ZooKeeper's IP matcher: does address `ip` (the caller's "ip" identity)
 * fall inside `acl_expr` ("a.b.c.d" or "a.b.c.d/bits")? */
bool zk_acl_ip_matches(struct zk_bytes ip, struct zk_bytes acl_expr);
bool zk_acl_ip_valid(struct zk_bytes acl_expr);
bool zk_acl_digest_valid(struct zk_bytes id);

/* ---- validation ---- */

/* Most entries a create/setACL list may carry (keel's limit; deduplication
 * is quadratic, like ZooKeeper's). */
#define ZK_ACL_MAX_ENTRIES 1024

/* Validates and expands `in` for a create/setACL by a caller with `ids`.
 * On ZK_OK the resulting elements (without count) are in `out` (appended)
 * and *count is their number. Returns ZK_OK, ZK_INVALID_ACL, or
 * ZK_MARSHALLING_ERROR if `out` could not hold them. */
int32_t zk_acl_fixup(struct zk_acl_vec in, const struct zk_ids *ids, struct keel_wbuf *out,
		     int32_t *count);

/* getACL for a caller without ADMIN: digest ids shown as "user:x". Writes
 * the full vector (count included). */
void zk_acl_write_masked(struct keel_wbuf *w, struct zk_acl_vec acl);

/* ---- the table ---- */

#define ZK_ACL_NONE UINT32_MAX

struct zk_acl_list;

struct zk_acl_table {
	struct zk_acl_list **lists; /* by id; NULL for free ids */
	uint32_t capacity;
	uint32_t count;             /* live lists (refs > 0 or pending) */
	uint32_t *free_ids;         /* stack of free ids */
	uint32_t free_count;
	uint32_t *pending;          /* ids whose refs reached 0, freed at collect */
	uint32_t pending_count;
	uint32_t pending_capacity;
	struct keel_hmap index;     /* content hash -> list */
	uint64_t seed;
	size_t bytes;               /* memory held by lists */
};

enum keel_err zk_acl_table_init(struct zk_acl_table *t, uint64_t seed);
void zk_acl_table_close(struct zk_acl_table *t);

/* Finds or adds the list whose elements are `v` and takes a reference.
 * Returns the id, or ZK_ACL_NONE when out of memory. */
uint32_t zk_acl_table_intern(struct zk_acl_table *t, struct zk_acl_vec v);
void zk_acl_table_ref(struct zk_acl_table *t, uint32_t id);
void zk_acl_table_unref(struct zk_acl_table *t, uint32_t id);
/* Frees lists whose references dropped to zero (and are still zero). */
void zk_acl_table_collect(struct zk_acl_table *t);

/* The list (valid while the id is referenced or pending). */
struct zk_acl_vec zk_acl_table_get(const struct zk_acl_table *t, uint32_t id);
/* Content hash, identical on every server for equal lists. */
uint64_t zk_acl_table_hash(const struct zk_acl_table *t, uint32_t id);
uint32_t zk_acl_table_refs(const struct zk_acl_table *t, uint32_t id);

/* Content hash of an encoded list (what the table and the digest use). */
uint64_t zk_acl_content_hash(struct zk_acl_vec v);

#endif
