/*
 * zk_reconfig.h — ZooKeeper's dynamic reconfiguration in keel's terms: the
 * server-string syntax, the plan of one-server-at-a-time membership steps a
 * ReconfigRequest asks for, and the text of /zookeeper/config.
 *
 * ZooKeeper names a server as
 *
 *	server.ID=HOST:QUORUM_PORT:ELECTION_PORT[:participant|:observer][;[CLIENT_HOST:]CLIENT_PORT]
 *
 * keel has one peer port per server: QUORUM_PORT is it (HOST:QUORUM_PORT is
 * the address peers dial); ELECTION_PORT is kept only to show the line back
 * as it was given; `observer` is a Raft learner (non-voting), `participant`
 * (the default) a voter. The client address is likewise only shown.
 * The part after the peer address (":ELECTION_PORT;CLIENT") is what the
 * address book keeps as the server's ZooKeeper tail (node_addr.client_addr).
 *
 * /zookeeper/config reads, as ZooKeeper's does, one line per member in id
 * order and then the version (the zxid of the membership entry, in hex),
 * with no newline after it:
 *
 *	server.1=127.0.0.1:2888:2888:participant
 *	server.4=127.0.0.1:2890:3890:observer;127.0.0.1:2184
 *	version=1a
 *
 * Parsing never allocates; every string is bounded (ZK_RECONFIG_ADDR_SIZE)
 * and every list (ZK_RECONFIG_MAX_SERVERS); anything else is KEEL_INVAL,
 * which the server answers BadArguments.
 */
#ifndef KEEL_ZK_RECONFIG_H
#define KEEL_ZK_RECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "zk/zk_jute.h"

#define ZK_RECONFIG_MAX_SERVERS 32
#define ZK_RECONFIG_ADDR_SIZE 128
#define ZK_RECONFIG_MAX_ID 254 /* keel's server ids */

enum zk_server_role {
	ZK_ROLE_PARTICIPANT = 1, /* a Raft voter */
	ZK_ROLE_OBSERVER = 2,    /* a Raft learner */
};

struct zk_server_spec {
	uint64_t id;
	uint8_t role;
	char peer_addr[ZK_RECONFIG_ADDR_SIZE]; /* HOST:QUORUM_PORT */
	char tail[ZK_RECONFIG_ADDR_SIZE];      /* ":ELECTION_PORT" [";CLIENT"] */
};

/* Parses one "server.ID=..." (exactly `len` bytes, no surrounding blanks
 * beyond what ZooKeeper trims). */
enum keel_err zk_server_spec_parse(const char *s, size_t len, struct zk_server_spec *out);

/* The change one ReconfigRequest asks for, applied in this order. */
enum zk_step_kind {
	ZK_STEP_ADD_OBSERVER = 1, /* learner */
	ZK_STEP_ADD_PARTICIPANT,  /* learner, catch up, promote */
	ZK_STEP_PROMOTE,          /* observer -> participant */
	ZK_STEP_REMOVE,
};

struct zk_reconfig_step {
	uint8_t kind;
	struct zk_server_spec server; /* REMOVE, PROMOTE: only id */
};

struct zk_member_role {
	uint64_t id;
	uint8_t role; /* enum zk_server_role */
};

/*
 * Plans the steps of a reconfig against the current members:
 *   incremental: `joining` (server strings, comma-separated) are added
 *     (an observer already a member may rejoin as a participant: promoted),
 *     `leaving` (ids, comma-separated) removed;
 *   non-incremental: `new_members` (server strings) is the whole new
 *     membership: absent servers are added, observers listed as
 *     participants promoted, members not listed removed.
 * Adds come first and removals last, so the quorum never shrinks before it
 * grows. KEEL_INVAL for bad syntax, both forms at once, nothing to do, an
 * unknown leaving id, a participant asked to become an observer (keel
 * cannot demote a voter), or an id in both lists.
 */
enum keel_err zk_reconfig_plan(const struct zk_member_role *members, size_t member_count,
			       struct zk_bytes joining, struct zk_bytes leaving,
			       struct zk_bytes new_members, struct zk_reconfig_step *steps,
			       size_t max_steps, size_t *step_count);

/* One member as /zookeeper/config shows it. */
struct zk_config_member {
	uint64_t id;
	uint8_t role;
	const char *peer_addr; /* HOST:PORT */
	const char *tail;      /* the kept tail, or "" (the election port shows as the peer port) */
};

/* Appends the text of /zookeeper/config (members sorted by the caller). */
void zk_config_render(const struct zk_config_member *members, size_t count, uint64_t version,
		      struct keel_wbuf *out);

#endif
