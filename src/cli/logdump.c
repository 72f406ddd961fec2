/*
 * logdump.c — `keel log dump --data-dir DIR [--metadata-only]`: the
 * replicated log of a stopped server, decoded.
 *
 * Where `keel wal dump` shows the WAL's files and records, this shows what
 * the entries SAY, in log order, after the newest snapshot:
 *
 *   42  term 3  zk create /app/lock-0000000007 (session 0x1000002a, xid 5)
 *   43  term 3  Batch at offset 43: controller 1, epoch 3, time ..., 2 records
 *                 FenceBroker ...
 *                 [Topic: sensor-data, Partition: 0, Leader: Broker-2, ISR: {Broker-2}] ...
 *
 * Metadata batches are decoded and applied to a running image (started
 * from the snapshot's metadata section, when there is one) so that
 * partition records print with topic names and changes with the fields
 * they leave alone (meta_log_dump_batch). Reads only; the WAL decision is
 * wal_check's (the same a server start would reach).
 *
 * ZooKeeper transactions are also applied, to a ZooKeeper state started
 * from the snapshot's (with the default limits; a server started with other
 * limits may have refused a txn the dump accepts, or the reverse), so that
 * a txn that failed at apply is marked with the error its client got
 * (`-> ZNODE_EXISTS`). Times (batch headers, txn stamps) print as ISO 8601
 * UTC. A directory a running server holds (its keel.lock is locked) is
 * dumped with a warning: the tail may be mid-write.
 *
 * Exit status: 0 when everything decoded, 1 when the directory is not a
 * keel data directory (no hard state and no log), the WAL would not start
 * or an entry did not decode, 2 on a usage error.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "cli/cli.h"
#include "meta/fmt.h"
#include "meta/format.h"
#include "meta/image.h"
#include "meta/record.h"
#include "core/entry.h"
#include "raft/raft.h"
#include "wal/snapshot.h"
#include "wal/wal.h"
#include "zk/zk_codes.h"
#include "zk/zk_proto.h"
#include "zk/zk_snapshot.h"
#include "zk/zk_state.h"
#include "zk/zk_txn.h"

/* The server's snapshot stream (core/fsm.h): "KSNP", version, sections of
 * chunks; tag 3 holds the metadata image. */
#define SNAP_MAGIC 0x4b534e50u
#define SNAP_VERSION 1
#define SNAP_TAG_END 0
#define SNAP_TAG_ZK 2
#define SNAP_TAG_META 3
#define SNAP_MAX_CHUNK (64u << 20)
#define MAX_SECTION_BYTES (1u << 30)

struct dump {
	struct meta_image image;
	struct zk_config zk_config;
	struct zk_state zk;
	bool zk_ready; /* zk holds the state to apply txns to */
	struct zk_result zk_result;
	unsigned zk_failed; /* txns whose apply gave an error */
	struct keel_arena arena;
	bool metadata_only;
	uint64_t index;
	uint64_t term;
	unsigned lines; /* of the current batch */
	unsigned errors;
};

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel log dump --data-dir DIR [--metadata-only]\n\n"
		"Decodes the replicated log of a stopped server: cluster-metadata batches\n"
		"(every partition record as [Topic: T, Partition: P, Leader: Broker-L, ISR: {...}]\n"
		"with its epochs), ZooKeeper transactions (operation and path), membership\n"
		"and address-book changes. --metadata-only prints the metadata batches only.\n");
	return out == stdout ? 0 : 2;
}

/* ---- the metadata section of the snapshot ---- */

struct snap_in {
	struct wal_snapshot_reader r;
	enum keel_err err;
};

static bool snap_get(struct snap_in *in, void *buf, size_t size)
{
	size_t got = 0;
	while (in->err == KEEL_OK && got < size) {
		size_t n = 0;
		in->err = wal_snapshot_read(&in->r, (uint8_t *)buf + got, size - got, &n);
		if (in->err == KEEL_OK && n == 0) {
			in->err = KEEL_SHORT;
		}
		got += n;
	}
	return in->err == KEEL_OK;
}

/* Reads (into `out`, when given) or skips one section's chunks. */
static bool snap_section(struct snap_in *in, struct keel_wbuf *out)
{
	uint8_t skip[4096];
	for (;;) {
		uint8_t hdr[4];
		if (!snap_get(in, hdr, 4)) {
			return false;
		}
		uint32_t len = keel_load_be32(hdr);
		if (len == 0) {
			return true;
		}
		if (len > SNAP_MAX_CHUNK) {
			in->err = KEEL_CORRUPT;
			return false;
		}
		while (len > 0) {
			size_t n = len < sizeof(skip) ? len : sizeof(skip);
			if (!snap_get(in, skip, n)) {
				return false;
			}
			if (out != NULL) {
				keel_wbuf_bytes(out, skip, n);
			}
			len -= (uint32_t)n;
		}
	}
}

struct mem_in {
	const uint8_t *data;
	size_t size;
	size_t at;
};

static enum keel_err mem_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct mem_in *m = ctx;
	size_t n = m->size - m->at < max ? m->size - m->at : max;
	memcpy(buf, m->data + m->at, n);
	m->at += n;
	*got = n;
	return KEEL_OK;
}

/* The snapshot's ZooKeeper state into d->zk (d->zk_ready on success). */
static enum keel_err load_snapshot_zk(struct dump *d, const char *name, const struct keel_wbuf *zk)
{
	struct mem_in m = {zk->data, zk->size, 0};
	enum keel_err rc = zk_snapshot_load(&d->zk, &d->zk_config, mem_read, &m);
	if (rc != KEEL_OK) {
		fprintf(stderr, "keel log dump: snapshot %s: ZooKeeper state: %s\n", name,
			keel_strerror(rc));
		return rc;
	}
	d->zk_ready = true;
	return KEEL_OK;
}

/* Loads the snapshot's metadata image into d->image (empty if it has none)
 * and its ZooKeeper state into d->zk. */
static enum keel_err load_snapshot_image(struct dump *d, const struct wal_config *config,
					 const char *name)
{
	struct snap_in in = {.err = KEEL_OK};
	enum keel_err rc = wal_snapshot_open(&in.r, config, name, NULL);
	if (rc != KEEL_OK) {
		fprintf(stderr, "keel log dump: snapshot %s: %s\n", name, in.r.errmsg);
		return rc;
	}
	struct keel_wbuf meta;
	keel_wbuf_init_dynamic(&meta, 4096, MAX_SECTION_BYTES);
	struct keel_wbuf zk;
	keel_wbuf_init_dynamic(&zk, 4096, MAX_SECTION_BYTES);
	uint8_t head[6];
	bool ok = snap_get(&in, head, sizeof(head)) && keel_load_be32(head) == SNAP_MAGIC &&
		  keel_load_be16(head + 4) == SNAP_VERSION;
	bool found = false;
	while (ok) {
		uint8_t tag;
		if (!snap_get(&in, &tag, 1)) {
			ok = false;
			break;
		}
		if (tag == SNAP_TAG_END) {
			break;
		}
		found = found || tag == SNAP_TAG_META;
		ok = snap_section(&in, tag == SNAP_TAG_META ? &meta
					 : tag == SNAP_TAG_ZK ? &zk
							      : NULL);
	}
	wal_snapshot_close(&in.r);
	rc = ok && keel_wbuf_ok(&meta) && keel_wbuf_ok(&zk) ? KEEL_OK : KEEL_CORRUPT;
	if (rc == KEEL_OK) {
		rc = load_snapshot_zk(d, name, &zk);
	}
	if (rc == KEEL_OK && found) {
		struct meta_errbuf eb;
		memset(&eb, 0, sizeof(eb));
		rc = meta_image_load_from_memory(&d->image, meta.data, meta.size, &eb);
		if (rc != KEEL_OK) {
			fprintf(stderr, "keel log dump: snapshot %s: metadata image: %s\n", name,
				eb.msg);
		}
	} else if (rc != KEEL_OK) {
		fprintf(stderr, "keel log dump: snapshot %s is not a readable keel snapshot\n", name);
	}
	keel_wbuf_free(&meta);
	keel_wbuf_free(&zk);
	return rc;
}

/* ---- entries ---- */

static void print_line(void *ctx, const char *text)
{
	struct dump *d = ctx;
	if (d->lines++ == 0) {
		printf("%" PRIu64 "\tterm %" PRIu64 "\t%s\n", d->index, d->term, text);
	} else {
		printf("\t\t  %s\n", text);
	}
}

static void dump_meta(struct dump *d, const uint8_t *payload, size_t size)
{
	keel_arena_reset(&d->arena);
	struct meta_batch batch;
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	enum keel_err rc = meta_batch_decode(payload, size, &d->arena, &batch, &eb);
	if (rc != KEEL_OK) {
		printf("%" PRIu64 "\tterm %" PRIu64 "\tmetadata batch that does not decode: %s\n",
		       d->index, d->term, eb.msg);
		d->errors++;
		return;
	}
	d->lines = 0;
	rc = meta_log_dump_batch(&d->image, (int64_t)d->index, &batch, print_line, d);
	if (rc != KEEL_OK) {
		printf("\t\t  (cannot apply: %s)\n", keel_strerror(rc));
		d->errors++;
	}
}

static void print_path(const char *what, struct zk_bytes path)
{
	printf(" %s%.*s", what, path.size > 0 ? (int)path.size : 0,
	       path.size > 0 ? (const char *)path.data : "");
}

/* ZooKeeper's CreateMode flags, as a suffix. */
static const char *create_mode(int32_t flags)
{
	switch (flags) {
	case 0:
		return "";
	case 1:
		return ", ephemeral";
	case 2:
		return ", sequential";
	case 3:
		return ", ephemeral sequential";
	case 4:
		return ", container";
	case 5:
		return ", TTL";
	case 6:
		return ", sequential TTL";
	default:
		return ", unknown mode";
	}
}

/* The path(s) a ZooKeeper write names. */
static void print_request_paths(int32_t opcode, const uint8_t *body, size_t size)
{
	struct zk_request req;
	memset(&req, 0, sizeof(req));
	if (zk_request_decode_body(&req, opcode, body, size) != KEEL_OK) {
		printf(" (body does not decode)");
		return;
	}
	switch (opcode) {
	case ZK_OP_CREATE:
	case ZK_OP_CREATE2:
	case ZK_OP_CREATE_CONTAINER:
	case ZK_OP_CREATE_TTL:
		print_path("", req.u.create.path);
		printf(" (%d bytes%s)", req.u.create.data.size > 0 ? req.u.create.data.size : 0,
		       create_mode(req.u.create.flags));
		break;
	case ZK_OP_DELETE:
		print_path("", req.u.delete_.path);
		break;
	case ZK_OP_SET_DATA:
		print_path("", req.u.set_data.path);
		printf(" (%d bytes)", req.u.set_data.data.size > 0 ? req.u.set_data.data.size : 0);
		break;
	case ZK_OP_SET_ACL:
		print_path("", req.u.set_acl.path);
		break;
	case ZK_OP_CHECK:
		print_path("", req.u.check.path);
		break;
	case ZK_OP_MULTI: {
		struct zk_multi_iter it;
		struct zk_multi_op op;
		zk_multi_iter_init(&it, &req.u.multi);
		printf(" [");
		for (unsigned i = 0; zk_multi_iter_next(&it, &op); i++) {
			printf("%s%s", i > 0 ? ", " : "", zk_op_name(op.opcode));
			/* Every write op of a multi starts with its path. */
			print_path("", op.u.create.path);
		}
		printf("]");
		break;
	}
	default:
		break;
	}
}

static void print_time(int64_t ms)
{
	char text[40];
	struct meta_fmt f;
	meta_fmt_init(&f, text, sizeof(text));
	meta_fmt_iso8601(&f, ms);
	printf(" at %s", text);
}

/* Applies the txn to the dump's ZooKeeper state and marks a failure with
 * the error its client got. Without a state (a snapshot that did not load)
 * nothing is said. */
static void print_apply_result(struct dump *d, const uint8_t *payload, size_t size)
{
	if (!d->zk_ready) {
		return;
	}
	zk_result_reset(&d->zk_result);
	enum keel_err rc = zk_apply(&d->zk, d->index, payload, size, &d->zk_result);
	if (rc != KEEL_OK) {
		printf(" (cannot apply: %s)", keel_strerror(rc));
		d->zk_ready = rc != KEEL_NOMEM;
		return;
	}
	if (d->zk_result.err != 0) {
		printf(" -> %s", zk_err_name(d->zk_result.err));
		d->zk_failed++;
	}
}

static void print_txn(const struct zk_txn *t)
{
	switch (t->kind) {
	case ZK_TXN_REQUEST:
		printf("%s", zk_op_name(t->opcode));
		print_request_paths(t->opcode, t->body, t->body_size);
		printf(" (session 0x%" PRIx64 ", xid %d)", (uint64_t)t->meta.session_id,
		       t->meta.xid);
		break;
	case ZK_TXN_CREATE_SESSION:
		printf("createSession (timeout %d ms)", t->timeout_ms);
		break;
	case ZK_TXN_CLOSE_SESSION:
		printf("closeSession 0x%" PRIx64 " (%s)", (uint64_t)t->meta.session_id,
		       t->reason == ZK_CLOSE_EXPIRED ? "expired" : "by the client");
		break;
	case ZK_TXN_DELETE_CONTAINER:
		print_path("deleteContainer ", t->path);
		break;
	case ZK_TXN_DELETE_TTL:
		print_path("deleteTTL ", t->path);
		break;
	default:
		printf("txn of kind %d", (int)t->kind);
		break;
	}
}

static void dump_zk(struct dump *d, const uint8_t *payload, size_t size)
{
	struct zk_txn txn;
	if (zk_txn_decode(&txn, payload, size) != KEEL_OK) {
		printf("%" PRIu64 "\tterm %" PRIu64 "\tzk txn that does not decode\n", d->index,
		       d->term);
		d->errors++;
		return;
	}
	printf("%" PRIu64 "\tterm %" PRIu64 "\tzk ", d->index, d->term);
	print_txn(&txn);
	print_time(txn.meta.time_ms);
	print_apply_result(d, payload, size);
	printf("\n");
}

static void dump_cluster(struct dump *d, const uint8_t *payload, size_t size)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, payload, size);
	uint8_t op = keel_rbuf_u8(&r);
	uint64_t id = keel_rbuf_u64(&r);
	printf("%" PRIu64 "\tterm %" PRIu64 "\taddress book: ", d->index, d->term);
	if (!keel_rbuf_ok(&r)) {
		printf("malformed\n");
		d->errors++;
	} else if (op == NODE_CLUSTER_SET_ADDR) {
		uint16_t len = keel_rbuf_u16(&r);
		const uint8_t *peer = keel_rbuf_bytes(&r, len);
		printf("server %" PRIu64 " at %.*s\n", id, peer != NULL ? (int)len : 0,
		       peer != NULL ? (const char *)peer : "");
	} else if (op == NODE_CLUSTER_DEL_ADDR) {
		printf("server %" PRIu64 " removed\n", id);
	} else {
		printf("operation %u on server %" PRIu64 "\n", op, id);
	}
}

static void dump_entry(struct dump *d, const struct wal_entry *e)
{
	d->index = e->index;
	d->term = e->term;
	if (e->type != RAFT_ENTRY_NORMAL) {
		if (d->metadata_only) {
			return;
		}
		if (e->type == RAFT_ENTRY_CONFIG) {
			struct raft_config config;
			if (raft_config_decode(e->data, e->size, &config) == KEEL_OK) {
				printf("%" PRIu64 "\tterm %" PRIu64 "\tmembership:", e->index, e->term);
				for (uint32_t i = 0; i < config.count; i++) {
					printf(" %" PRIu64 "%s", config.members[i].id,
					       config.members[i].role == RAFT_VOTER ? "" : " (learner)");
				}
				printf("\n");
			} else {
				printf("%" PRIu64 "\tterm %" PRIu64 "\tmembership that does not decode\n",
				       e->index, e->term);
				d->errors++;
			}
		} else {
			printf("%" PRIu64 "\tterm %" PRIu64 "\tleader no-op\n", e->index, e->term);
		}
		return;
	}
	struct node_entry ne;
	if (node_entry_decode(e->data, e->size, &ne) != KEEL_OK) {
		printf("%" PRIu64 "\tterm %" PRIu64 "\tentry with a malformed envelope\n", e->index,
		       e->term);
		d->errors++;
		return;
	}
	if (ne.kind == NODE_ENTRY_META) {
		dump_meta(d, ne.payload, ne.payload_size);
	} else if (d->metadata_only) {
		return;
	} else if (ne.kind == NODE_ENTRY_ZK) {
		dump_zk(d, ne.payload, ne.payload_size);
	} else if (ne.kind == NODE_ENTRY_CLUSTER) {
		dump_cluster(d, ne.payload, ne.payload_size);
	} else {
		printf("%" PRIu64 "\tterm %" PRIu64 "\tentry of unknown kind %u\n", e->index, e->term,
		       ne.kind);
		d->errors++;
	}
}

/* Whether a running server holds `dir` (it keeps keel.lock locked). */
static bool held_by_running_server(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/keel.lock", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return false;
	}
	struct flock lk;
	memset(&lk, 0, sizeof(lk));
	lk.l_type = F_RDLCK;
	lk.l_whence = SEEK_SET;
	bool held = fcntl(fd, F_GETLK, &lk) == 0 && lk.l_type != F_UNLCK;
	close(fd);
	return held;
}

static int log_dump(const char *dir, bool metadata_only)
{
	if (held_by_running_server(dir)) {
		fprintf(stderr, "keel log dump: warning: %s belongs to a running server; its "
				"newest entries may be mid-write and missing or torn in this dump\n",
			dir);
	}
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	struct wal_config config;
	wal_config_init(&config, &vfs, dir);
	struct wal_recovered rec;
	char errmsg[WAL_ERRMSG_SIZE];
	if (wal_check(&config, &rec, errmsg) != KEEL_OK) {
		fprintf(stderr, "keel log dump: %s\n", errmsg);
		return 1;
	}
	if (!rec.has_hard_state && !rec.has_snapshot && rec.entry_count == 0) {
		fprintf(stderr,
			"keel log dump: %s is not a keel data directory (no hard state, snapshot "
			"or log)\n",
			dir);
		wal_recovered_free(&rec);
		return 1;
	}
	struct dump d;
	memset(&d, 0, sizeof(d));
	d.metadata_only = metadata_only;
	meta_image_init(&d.image, NULL);
	keel_arena_init(&d.arena, 64 * 1024);
	zk_config_default(&d.zk_config);
	zk_result_init(&d.zk_result, d.zk_config.max_reply_size);
	int status = 0;
	if (rec.has_snapshot) {
		if (load_snapshot_image(&d, &config, rec.snapshot.name) != KEEL_OK) {
			status = 1;
		}
		printf("snapshot at index %" PRIu64 " (term %" PRIu64 "): metadata offset %" PRId64
		       ", %u brokers, %u topics, %u znodes\n",
		       rec.snapshot.index, rec.snapshot.term, d.image.offset, d.image.broker_count,
		       d.image.topic_count, d.zk_ready ? zk_state_node_count(&d.zk) : 0u);
		printf("%zu entries after it, last index %" PRIu64 " (term %" PRIu64 ")\n",
		       rec.entry_count, rec.last_index, rec.last_term);
	} else {
		d.zk_ready = zk_state_init(&d.zk, &d.zk_config) == KEEL_OK;
		printf("no snapshot: %zu entries from index %" PRIu64 ", last index %" PRIu64
		       " (term %" PRIu64 ")\n",
		       rec.entry_count, rec.entry_count > 0 ? rec.entries[0].index : 0,
		       rec.last_index, rec.last_term);
	}
	for (size_t i = 0; i < rec.entry_count; i++) {
		dump_entry(&d, &rec.entries[i]);
	}
	if (!metadata_only) {
		printf("%u ZooKeeper transactions failed at apply (marked -> ERROR)\n", d.zk_failed);
	}
	if (d.errors > 0) {
		printf("%u entries did not decode\n", d.errors);
		status = 1;
	}
	if (d.zk_ready) {
		zk_state_close(&d.zk);
	}
	zk_result_close(&d.zk_result);
	meta_image_close(&d.image);
	keel_arena_close(&d.arena);
	wal_recovered_free(&rec);
	return status;
}

int cli_log(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		return usage(argc < 2 ? stderr : stdout);
	}
	if (strcmp(argv[1], "dump") != 0) {
		fprintf(stderr, "keel log: unknown subcommand '%s'\n", argv[1]);
		return usage(stderr);
	}
	const char *dir = NULL;
	bool metadata_only = false;
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--metadata-only") == 0) {
			metadata_only = true;
		} else if (strcmp(argv[i], "--help") == 0) {
			return usage(stdout);
		} else {
			fprintf(stderr, "keel log dump: unexpected argument '%s'\n", argv[i]);
			return usage(stderr);
		}
	}
	if (dir == NULL) {
		return usage(stderr);
	}
	return log_dump(dir, metadata_only);
}
