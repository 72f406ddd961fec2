/*
 * zk_snapshot.h — the replicated state as a byte stream, and back.
 *
 * zk_snapshot_write() serializes the state through a caller-supplied write
 * callback in chunks (this layer does no I/O); zk_snapshot_load() rebuilds
 * a state from a read callback. The format (big-endian, version 1):
 *
 *	"KEELZKS1"  u32 version  u32 flags(0)
 *	u64 last_zxid  u64 state hash (zk_state_hash)
 *	u32 acl lists  u32 sessions  u32 nodes
 *	ACL lists     per list: u32 entries, u32 bytes, jute ACL elements
 *	sessions      by id:   i64 id, i32 timeout_ms, 16 bytes password
 *	nodes         pre-order, children in ring order, per node:
 *	              u32 name bytes, name, u32 children that follow,
 *	              u32 flags, i32 version, i32 cversion (persisted),
 *	              i32 aversion, i64 czxid mzxid pzxid ctime mtime owner,
 *	              u32 ACL list index, u32 data bytes, data
 *	u32 CRC32C of everything above, "KEELZKSE"
 *
 * The root comes first (empty name). Loading checks every count, size and
 * reference against the input and the configured limits (a name or data
 * longer than max_packet_size, a duplicate sibling, an ephemeral with
 * children or without its session, a bad ACL index — KEEL_CORRUPT), the
 * CRC, that the stream ends right after the end marker, and finally that
 * the recomputed state hash equals the stored one.
 * Nothing is allocated beyond what the bytes read so far justify (each
 * node's allocation is bounded by max_packet_size).
 *
 * Children order and ephemeral membership survive a round trip, so a
 * loaded state answers every read exactly as the original.
 *
 * The state must not change while it is written. For a large tree the
 * server can serialize into memory on its loop (about the speed of
 * memcpy) and write the file from another thread.
 */
#ifndef KEEL_ZK_SNAPSHOT_H
#define KEEL_ZK_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "zk/zk_state.h"

#define ZK_SNAPSHOT_CHUNK (64u << 10)

/* Takes `size` bytes (the whole chunk); an error aborts the snapshot and
 * is returned by zk_snapshot_write(). */
typedef enum keel_err (*zk_snapshot_write_fn)(void *ctx, const void *data, size_t size);

/* Reads up to `max` bytes into buf; *got = 0 means end of input. */
typedef enum keel_err (*zk_snapshot_read_fn)(void *ctx, void *buf, size_t max, size_t *got);

/* Writes the state in chunks of at most ZK_SNAPSHOT_CHUNK bytes;
 * *written (optional) gets the total. */
enum keel_err zk_snapshot_write(const struct zk_state *st, zk_snapshot_write_fn write,
				void *ctx, uint64_t *written);

/* Builds `st` (not initialized yet) from a snapshot, with `cfg` as its
 * configuration. On error `st` is left closed (nothing to free):
 * KEEL_CORRUPT for any structural problem, KEEL_SHORT for a truncated
 * stream, KEEL_NOMEM, or the read callback's error. */
enum keel_err zk_snapshot_load(struct zk_state *st, const struct zk_config *cfg,
			       zk_snapshot_read_fn read, void *ctx);

#endif
