/*
 * fsm.h — the replicated state machine of a server: everything committed
 * entries change, and its snapshot.
 *
 * Ownership and lifetimes:
 *  - struct node_fsm (c->fsm; fsm_create allocates, fsm_destroy frees) owns
 *    the ZooKeeper state (src/zk), a copy of its configuration and the
 *    result buffer of the last applied txn (fsm_applied.zk points into it
 *    until the next fsm_apply). fsm_snapshot_read replaces the ZooKeeper
 *    state by value once its section has loaded whole: fsm_zk() keeps its
 *    address, but any pointer INTO the old tree (nodes, sessions, data) is
 *    dangling after a snapshot load.
 *  - The address book is c->book, a fixed array inside struct node_core
 *    (core/core.h), never allocated. fsm_apply of a CLUSTER entry edits it
 *    in place (a removal moves the last entry into the hole) and a snapshot
 *    load overwrites it whole, so a pointer from core_addr_find() is good
 *    only until the next fsm_apply or fsm_snapshot_read.
 *  - The metadata image is owned by the controller glue (struct node_ctl in
 *    core/controller.c allocates and frees it). It applies META entries
 *    itself (fsm_apply only says FSM_APPLIED_META) and saves and loads the
 *    image's snapshot section through `struct fsm_image_ops`: fsm_create
 *    copies the ops struct and keeps its ctx, which must outlive the fsm.
 *    The fsm keeps no pointer into the image.
 * Deterministic: the same entries in the same order give the same state on
 * every server (zk_state_hash() is equal; the ZooKeeper snapshot carries it).
 */
#ifndef KEEL_CORE_FSM_H
#define KEEL_CORE_FSM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "core/core.h"
#include "core/entry.h"
#include "zk/zk_state.h"

struct node_fsm;

typedef enum keel_err (*fsm_write_fn)(void *ctx, const void *data, size_t size);
typedef enum keel_err (*fsm_read_fn)(void *ctx, void *buf, size_t size, size_t *got);

/* The snapshot section of the metadata image, kept by its owner: `save`
 * streams the committed image through `write`; `load` replaces it with a
 * saved one (data NULL: an empty image) or, on error, keeps it and says why
 * in `err`. */
struct fsm_image_ops {
	enum keel_err (*save)(void *ctx, fsm_write_fn write, void *write_ctx);
	enum keel_err (*load)(void *ctx, const uint8_t *data, size_t size, char *err,
			      size_t err_size);
	void *ctx;
};

/* `zk_config` and the ops struct `image` are copied; image->ctx is kept
 * and must outlive the fsm. */
enum keel_err fsm_create(const struct zk_config *zk_config, const struct fsm_image_ops *image,
			 struct node_fsm **out);
void fsm_destroy(struct node_fsm *fsm);

/* What applying one entry produced, for the caller to route (to the
 * waiting client, the peer links ...). The fsm itself reaches into no
 * client state. */
enum fsm_applied_kind {
	FSM_APPLIED_NOTHING = 0, /* not a NORMAL entry, or malformed (skipped) */
	FSM_APPLIED_ZK,          /* a ZooKeeper txn: result in `zk` */
	FSM_APPLIED_ZK_FAILED,   /* a ZooKeeper txn that does not decode */
	FSM_APPLIED_META,        /* controller records: the image owner applies them */
	FSM_APPLIED_BOOK,        /* the address book changed */
	FSM_APPLIED_ZK_SYSTEM,   /* a membership entry rewrote /zookeeper/config: triggers in `zk` */
};

struct fsm_applied {
	enum fsm_applied_kind kind;
	struct node_entry entry;    /* the envelope (origin, request id); kind != NOTHING */
	const struct zk_result *zk; /* FSM_APPLIED_ZK(_SYSTEM); valid until the next fsm_apply */
};

/* Applies one committed entry (any type) at its index and says what came
 * of it in *out. Out of memory sets c->failed (the server cannot follow the
 * log). */
void fsm_apply(struct node_core *c, const struct raft_entry *entry, struct fsm_applied *out);

/* Applies the payload of a NODE_ENTRY_CLUSTER entry to the address book.
 * With `final` false it only learns addresses (start-up pre-scan). Returns
 * whether the book changed in a way the peer links must follow (final). */
bool fsm_apply_cluster_payload(struct node_core *c, const uint8_t *payload, size_t size, bool final);

/* The snapshot stream (the payload of a WAL snapshot file):
 *	u32 magic "KSNP" | u16 version
 *	sections: u8 tag, then chunks (u32 size + bytes) ending with size 0
 *	u8 tag 0 ends the stream
 * Tags: 1 address book, 2 ZooKeeper state, 3 metadata image. */
enum keel_err fsm_snapshot_write(struct node_core *c, fsm_write_fn write, void *ctx);

/* The same stream for a state no server holds yet (keel import-zookeeper):
 * the address book and the ZooKeeper state, and no metadata section (an
 * empty metadata image). */
enum keel_err fsm_snapshot_write_parts(const struct node_addr_book *book,
				       const struct zk_state *zk, fsm_write_fn write, void *ctx);

/* Reads a snapshot stream, replacing each part of the state as its section
 * is read. On error the state may be partly replaced: the caller must not
 * serve from it (start-up fails; an installed snapshot that does not load
 * stops the server). */
enum keel_err fsm_snapshot_read(struct node_core *c, fsm_read_fn read, void *ctx, char *err,
				size_t err_size);

/* Counts for 4lw/metrics. */
uint64_t fsm_znode_count(const struct node_fsm *fsm);
uint64_t fsm_session_count(const struct node_fsm *fsm);

/* The replicated ZooKeeper state and its configuration. */
struct zk_state *fsm_zk(struct node_fsm *fsm);
const struct zk_config *fsm_zk_config(const struct node_fsm *fsm);
uint64_t fsm_ephemeral_count(const struct node_fsm *fsm);
uint64_t fsm_data_bytes(const struct node_fsm *fsm);

#endif
