/*
 * entry.h — the envelope of every NORMAL Raft entry keel proposes.
 *
 * The log carries requests, not diffs (DESIGN.md). Each NORMAL entry's data
 * is this envelope followed by a payload owned by one layer:
 *
 *	u8  kind        enum node_entry_kind
 *	u8  version     NODE_ENTRY_VERSION
 *	u64 origin      id of the server whose client asked (0: the leader itself)
 *	u64 request_id  that server's id for the waiting request (0: none)
 *	i64 time_ms     wall-clock time stamped by the leader when proposing
 *	... payload     kind-specific (zk txn, meta record, cluster admin)
 *
 * The origin pair lets the server a client is connected to find the
 * request waiting for this entry when it applies it, whichever server
 * proposed it (follower writes are forwarded to the leader).
 */
#ifndef KEEL_CORE_ENTRY_H
#define KEEL_CORE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define NODE_ENTRY_VERSION 1
#define NODE_ENTRY_HEADER_SIZE 26
#define NODE_ENTRY_TIME_OFFSET 18 /* where time_ms sits (the leader re-stamps it) */
_Static_assert(NODE_ENTRY_HEADER_SIZE == 1 + 1 + 8 + 8 + 8,
	       "envelope: kind, version, origin, request id, time");
_Static_assert(NODE_ENTRY_TIME_OFFSET == 1 + 1 + 8 + 8, "time_ms follows the request id");

enum node_entry_kind {
	NODE_ENTRY_ZK = 1,      /* a ZooKeeper txn (src/zk) */
	NODE_ENTRY_META = 2,    /* cluster-controller records (src/meta) */
	NODE_ENTRY_CLUSTER = 3, /* server address book changes */
};

struct node_entry {
	uint8_t kind;
	uint64_t origin;
	uint64_t request_id;
	int64_t time_ms;
	const uint8_t *payload; /* points into the decoded buffer */
	size_t payload_size;
};

void node_entry_encode_header(struct keel_wbuf *w, uint8_t kind, uint64_t origin,
			      uint64_t request_id, int64_t time_ms);
enum keel_err node_entry_decode(const uint8_t *data, size_t size, struct node_entry *out);

/* Cluster entries: the address book of servers (peer and client ports). */
enum node_cluster_op {
	NODE_CLUSTER_SET_ADDR = 1,
	NODE_CLUSTER_DEL_ADDR = 2,
};

#endif
