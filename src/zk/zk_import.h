/*
 * zk_import.h — reading an Apache ZooKeeper data directory's files into a
 * keel ZooKeeper state (the pure half of `keel import-zookeeper`).
 *
 * The caller hands over whole files as bytes (this layer does no I/O):
 *
 *	zk_import_init(imp, cfg)
 *	zk_import_snapshot(imp, bytes, size, name_zxid, &err)   newest snapshot
 *	    (or zk_import_empty(imp): no snapshot, ZooKeeper's initial tree)
 *	zk_import_log(imp, bytes, size, &err)   every log.* that may hold txns
 *	    after the snapshot, in zxid order
 *	zk_import_finish(imp, dropped, ctx)     drop ephemerals; imp->st is then
 *	    a state zk_snapshot_write() can write
 *	zk_import_close(imp)
 *
 * File formats (ZooKeeper 3.x, all big-endian jute):
 *
 *   snapshot.<zxid hex>   FileHeader {int magic "ZKSN", int version 2,
 *                         long dbid}; int sessions, per session {long id,
 *                         int timeout}; the ACL cache: int lists, per list
 *                         {long key, vector<ACL>}; nodes in pre-order until
 *                         the path "/": {ustring path ("" is the root),
 *                         buffer data, long acl key (-1: world:anyone:ALL),
 *                         StatPersisted}; a seal {long Adler-32 of every byte
 *                         before it, ustring "/"}. 3.6+ append the tree
 *                         digest {long zxid, int version, long digest} and a
 *                         second seal; 3.9 may add {long lastZxid} and a third.
 *   log.<zxid hex>        FileHeader {"ZKLG", 2, dbid}; records {long
 *                         Adler-32 of the txn bytes, buffer txn bytes, byte
 *                         'B'}; a record of length 0 ends the log and every
 *                         byte after it is preallocation padding (zeros).
 *                         Txn bytes: TxnHeader {long session, int cxid, long
 *                         zxid, long time, int type}, the type's record, and
 *                         in 3.6+ an optional TxnDigest {int, long}.
 *
 * Replay follows ZooKeeper's DataTree.processTxn exactly, including what
 * makes replaying a fuzzy snapshot's txns idempotent: a txn whose zxid is
 * at or below what was already applied is skipped; a create of a node that
 * exists replaces its ACL and (for plain create) raises the parent's
 * cversion/pzxid to the txn's; a create raises the parent's cversion only
 * when the txn's parentCVersion is higher; a delete raises the parent's
 * pzxid only when the txn's zxid is higher; NoNode and NodeExists are
 * ignored. A multi containing an error txn changes nothing.
 *
 * Stats are kept as ZooKeeper persisted them (czxid, mzxid, pzxid, ctime,
 * mtime, version, persisted cversion, aversion, owner), so a client sees the
 * same Stat. Sessions are not imported; ephemeral nodes are dropped at
 * finish (without touching their parents' stats). /zookeeper/config is
 * reset to keel's own (empty, world:anyone:READ, aversion -1).
 *
 * Errors: every function returns KEEL_OK or KEEL_CORRUPT (with err->offset
 * the file offset where the problem is and err->reason a fixed sentence),
 * KEEL_NOMEM or KEEL_LIMIT. After an error the import is unusable (close it).
 * Decoders check every length and count against the bytes left before
 * allocating anything.
 */
#ifndef KEEL_ZK_IMPORT_H
#define KEEL_ZK_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "zk/zk_state.h"

struct zk_import_error {
	uint64_t offset;    /* in the file being read */
	const char *reason; /* static text */
	int64_t value;      /* a number that goes with the reason, if any */
};

struct zk_import_stats {
	uint32_t snapshot_sessions; /* sessions listed in the snapshot (not imported) */
	uint32_t snapshot_nodes;
	uint64_t txns_read;         /* valid records in the logs */
	uint64_t txns_applied;      /* zxid above the snapshot's */
	uint64_t txns_ignored;      /* already in the snapshot (zxid at or below) */
	uint64_t txn_errors;        /* applied txns that ZooKeeper would also
				     * have found failing (NoNode, NodeExists) */
	uint64_t ephemerals_dropped;
};

struct zk_import_acl;

struct zk_import {
	struct zk_state st;
	bool started;            /* a snapshot or the initial tree is in st */
	int64_t snapshot_zxid;
	int64_t last_zxid;       /* highest zxid reflected in st */
	struct zk_import_acl *acls; /* the snapshot's ACL cache, sorted by key */
	uint32_t acl_count;
	struct keel_wbuf path;   /* scratch */
	struct zk_import_stats stats;
};

enum keel_err zk_import_init(struct zk_import *imp, const struct zk_config *cfg);
void zk_import_close(struct zk_import *imp);

/* ZooKeeper's own test for a snapshot that was written to the end: at
 * least the header and a final seal ("...\0\0\0\1/"). */
bool zk_import_snapshot_complete(const uint8_t *bytes, size_t size);

/* Loads a snapshot file whose name carries `name_zxid`. */
enum keel_err zk_import_snapshot(struct zk_import *imp, const uint8_t *bytes, size_t size,
				 int64_t name_zxid, struct zk_import_error *err);

/* No snapshot at all: start from ZooKeeper's initial tree at zxid 0. */
enum keel_err zk_import_empty(struct zk_import *imp);

/* Verifies one log file and applies its txns above imp->last_zxid. A txn
 * that would leave a hole (not last + 1, and not the first of a later
 * epoch) is refused: a log file is missing. */
enum keel_err zk_import_log(struct zk_import *imp, const uint8_t *bytes, size_t size,
			    struct zk_import_error *err);

/* Called for each ephemeral node dropped, with its path and owner. */
typedef void (*zk_import_dropped_fn)(void *ctx, const uint8_t *path, size_t path_size,
				     int64_t owner);

/* Drops ephemerals, resets /zookeeper/config, stamps last_zxid and
 * recomputes the digests. */
enum keel_err zk_import_finish(struct zk_import *imp, zk_import_dropped_fn dropped, void *ctx);

/* Adler-32 (zlib's), as ZooKeeper's checksums use it. */
uint32_t zk_import_adler32(uint32_t adler, const uint8_t *data, size_t size);

#endif
