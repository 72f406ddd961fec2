/*
 * fsm.h — the replicated state machine of a server: everything committed
 * entries change, and its snapshot.
 *
 * It owns the ZooKeeper state (src/zk), the metadata image (src/meta) and
 * the address book, and dispatches each committed NORMAL entry by its
 * envelope kind (entry.h). Deterministic: the same entries in the same order
 * give the same state on every server (fsm_hash() compares them in tests).
 */
#ifndef KEEL_NODE_FSM_H
#define KEEL_NODE_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "node/node.h"
#include "zk/zk_state.h"

struct node_fsm;

enum keel_err fsm_create(struct node *n, struct node_fsm **out);
void fsm_destroy(struct node_fsm *fsm);

/* Applies one committed entry (any type) at its index. */
void fsm_apply(struct node *n, const struct raft_entry *entry);

/* Applies the payload of a NODE_ENTRY_CLUSTER entry to the address book.
 * With `final` false it only learns addresses (start-up pre-scan). */
void fsm_apply_cluster_payload(struct node *n, const uint8_t *payload, size_t size, bool final);

/* The snapshot stream (the payload of a WAL snapshot file):
 *	u32 magic "KSNP" | u16 version
 *	sections: u8 tag, then chunks (u32 size + bytes) ending with size 0
 *	u8 tag 0 ends the stream
 * Tags: 1 address book, 2 ZooKeeper state, 3 metadata image. */
typedef enum keel_err (*fsm_write_fn)(void *ctx, const void *data, size_t size);
typedef enum keel_err (*fsm_read_fn)(void *ctx, void *buf, size_t size, size_t *got);
enum keel_err fsm_snapshot_write(struct node *n, fsm_write_fn write, void *ctx);

/* The same stream for a state no server holds yet (keel import-zookeeper):
 * the address book and the ZooKeeper state, and no metadata section (an
 * empty metadata image). */
enum keel_err fsm_snapshot_write_parts(const struct node_addr_book *book,
				       const struct zk_state *zk, fsm_write_fn write, void *ctx);

/* Replaces the whole state with the snapshot in `path` (a WAL snapshot
 * file) taken at `index`. On error the old state is kept. */
enum keel_err fsm_snapshot_load(struct node *n, const char *path, uint64_t index, char *err,
				size_t err_size);

/* Reads a snapshot stream into a fresh state, replacing the current one. */
enum keel_err fsm_snapshot_read(struct node *n, fsm_read_fn read, void *ctx, char *err,
				size_t err_size);

/* Counts for 4lw/metrics. */
uint64_t fsm_znode_count(const struct node_fsm *fsm);
uint64_t fsm_session_count(const struct node_fsm *fsm);
uint64_t fsm_hash(const struct node_fsm *fsm);

/* The replicated ZooKeeper state and its configuration. */
struct zk_state *fsm_zk(struct node_fsm *fsm);
const struct zk_config *fsm_zk_config(const struct node_fsm *fsm);
uint64_t fsm_ephemeral_count(const struct node_fsm *fsm);
uint64_t fsm_data_bytes(const struct node_fsm *fsm);

#endif
