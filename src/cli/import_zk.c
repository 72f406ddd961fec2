/*
 * import_zk.c — `keel import-zookeeper`: turn a stopped Apache ZooKeeper's
 * data directory into a keel data directory (docs/migration.md).
 *
 *	keel import-zookeeper --from ZKDATADIR --data-dir DIR
 *	                      [--from-logs ZKLOGDIR] [--id ID]
 *	                      [--cluster ID=HOST:PEERPORT,...]
 *
 * Reads the newest complete snapshot.<zxid> (incomplete ones are skipped,
 * as ZooKeeper skips them; a complete one with a bad checksum is refused),
 * then every log.<zxid> that can hold later txns, through src/zk/zk_import
 * (which checks every checksum and refuses damage with the offset). Writes
 * DIR (which must be empty or absent) as a keel server's data directory: a
 * snapshot at log index = the last ZooKeeper zxid, term 1, whose membership
 * is the single voter ID, plus the hard state {term 1, no vote}. That server
 * starts alone and leads; the others start empty with --join and are added
 * with `keel members add`, receiving the tree by snapshot install.
 *
 * Output: a summary on stdout, one line per dropped ephemeral node.
 * Exit status: 0 done, 1 refused (corrupt or unusable input), 2 usage or
 * I/O error.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"
#include "cli/cli.h"
#include "core/fsm.h"
#include "node/config.h"
#include "raft/raft.h"
#include "wal/hard_state.h"
#include "wal/snapshot.h"
#include "zk/zk_import.h"
#include "zk/zk_snapshot.h"

#define MAX_ZK_FILES 100000

struct zk_file {
	int64_t zxid;
	char path[NODE_PATH_SIZE + 64];
};

struct zk_files {
	struct zk_file *items;
	size_t count;
	size_t capacity;
};

/* A whole file, mapped read-only. */
struct mapped {
	const uint8_t *bytes;
	size_t size;
};

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel import-zookeeper --from ZKDATADIR --data-dir DIR\n"
		"                             [--from-logs ZKLOGDIR] [--id ID]\n"
		"                             [--cluster ID=HOST:PEERPORT,...]\n"
		"\n"
		"Builds a keel data directory from a stopped Apache ZooKeeper's data\n"
		"(its version-2/ snapshot.* and log.* files; ZKDATADIR may be the\n"
		"dataDir or its version-2 directory). --from-logs: ZooKeeper's\n"
		"dataLogDir when it differs. DIR must be empty or absent.\n"
		"--id (default 1) is the server that will start on DIR; it becomes\n"
		"the only voter, and the other servers join it (docs/migration.md).\n"
		"--cluster records the servers' peer addresses in the snapshot.\n");
	return out == stdout ? 0 : 2;
}

/* "PREFIX<hex>" exactly: the zxid. */
static bool parse_name(const char *name, const char *prefix, int64_t *zxid)
{
	size_t n = strlen(prefix);
	if (strncmp(name, prefix, n) != 0 || name[n] == '\0') {
		return false;
	}
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(name + n, &end, 16);
	if (errno != 0 || *end != '\0' || v > INT64_MAX) {
		return false;
	}
	*zxid = (int64_t)v;
	return true;
}

static int file_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct zk_file *)a)->zxid;
	int64_t y = ((const struct zk_file *)b)->zxid;
	return (x > y) - (x < y);
}

/* The files named PREFIX<hex zxid> in dir, by zxid ascending. */
static int list_files(const char *dir, const char *prefix, struct zk_files *out)
{
	memset(out, 0, sizeof(*out));
	DIR *d = opendir(dir);
	if (d == NULL) {
		fprintf(stderr, "keel import-zookeeper: cannot read %s: %s\n", dir, strerror(errno));
		return 2;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int64_t zxid;
		if (!parse_name(e->d_name, prefix, &zxid)) {
			if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
				fprintf(stderr, "note: skipping %s/%s (not %s<hex zxid>; "
						"compressed snapshots are not supported)\n",
					dir, e->d_name, prefix);
			}
			continue;
		}
		if (out->count == MAX_ZK_FILES) {
			fprintf(stderr, "keel import-zookeeper: too many files in %s\n", dir);
			goto fail;
		}
		if (out->count == out->capacity) {
			size_t cap = out->capacity == 0 ? 16 : out->capacity * 2;
			struct zk_file *items = realloc(out->items, cap * sizeof(*items));
			if (items == NULL) {
				fprintf(stderr, "keel import-zookeeper: out of memory\n");
				goto fail;
			}
			out->items = items;
			out->capacity = cap;
		}
		struct zk_file *f = &out->items[out->count++];
		f->zxid = zxid;
		snprintf(f->path, sizeof(f->path), "%s/%s", dir, e->d_name);
	}
	closedir(d);
	if (out->count > 0) {
		qsort(out->items, out->count, sizeof(*out->items), file_cmp);
	}
	return 0;
fail:
	closedir(d);
	free(out->items);
	memset(out, 0, sizeof(*out));
	return 2;
}

static int map_file(const char *path, struct mapped *m)
{
	static const uint8_t empty[1];
	m->bytes = empty;
	m->size = 0;
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "keel import-zookeeper: cannot open %s: %s\n", path, strerror(errno));
		return 2;
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0) {
		fprintf(stderr, "keel import-zookeeper: cannot stat %s: %s\n", path, strerror(errno));
		fclose(f);
		return 2;
	}
	if (st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
		if (p == MAP_FAILED) {
			fprintf(stderr, "keel import-zookeeper: cannot map %s: %s\n", path,
				strerror(errno));
			fclose(f);
			return 2;
		}
		m->bytes = p;
		m->size = (size_t)st.st_size;
	}
	fclose(f);
	return 0;
}

static void unmap_file(struct mapped *m)
{
	if (m->size > 0) {
		munmap((void *)m->bytes, m->size);
	}
	m->size = 0;
}

static int refused(const char *path, enum keel_err rc, const struct zk_import_error *err)
{
	if (rc == KEEL_CORRUPT) {
		fprintf(stderr, "keel import-zookeeper: %s: refused at offset %" PRIu64 ": %s (%" PRId64
				")\n",
			path, err->offset, err->reason, err->value);
		return 1;
	}
	fprintf(stderr, "keel import-zookeeper: %s: %s\n", path, keel_strerror(rc));
	return rc == KEEL_LIMIT ? 1 : 2;
}

/* The newest complete snapshot, loaded; or the initial tree without one. */
static int load_snapshot(struct zk_import *imp, const struct zk_files *snaps)
{
	for (size_t i = snaps->count; i-- > 0;) {
		const struct zk_file *f = &snaps->items[i];
		struct mapped m;
		int status = map_file(f->path, &m);
		if (status != 0) {
			return status;
		}
		if (!zk_import_snapshot_complete(m.bytes, m.size)) {
			printf("skipped incomplete snapshot %s\n", f->path);
			unmap_file(&m);
			continue;
		}
		struct zk_import_error err;
		enum keel_err rc = zk_import_snapshot(imp, m.bytes, m.size, f->zxid, &err);
		unmap_file(&m);
		if (rc != KEEL_OK) {
			return refused(f->path, rc, &err);
		}
		printf("snapshot %s: zxid 0x%" PRIx64 ", %u nodes, %u sessions (not imported)\n",
		       f->path, (uint64_t)f->zxid, imp->stats.snapshot_nodes,
		       imp->stats.snapshot_sessions);
		return 0;
	}
	printf("no complete snapshot: starting from ZooKeeper's initial tree\n");
	return zk_import_empty(imp) == KEEL_OK ? 0 : 2;
}

/* Every log that may hold a txn above the snapshot: from the last one that
 * starts at or before snapshot zxid + 1. */
static int replay_logs(struct zk_import *imp, const struct zk_files *logs)
{
	size_t first = 0;
	for (size_t i = 0; i < logs->count; i++) {
		if (logs->items[i].zxid <= imp->snapshot_zxid + 1) {
			first = i;
		}
	}
	for (size_t i = first; i < logs->count; i++) {
		const struct zk_file *f = &logs->items[i];
		struct mapped m;
		int status = map_file(f->path, &m);
		if (status != 0) {
			return status;
		}
		uint64_t before = imp->stats.txns_applied;
		struct zk_import_error err;
		enum keel_err rc = zk_import_log(imp, m.bytes, m.size, &err);
		unmap_file(&m);
		if (rc != KEEL_OK) {
			return refused(f->path, rc, &err);
		}
		printf("log %s: %" PRIu64 " txns applied\n", f->path,
		       imp->stats.txns_applied - before);
	}
	return 0;
}

static void print_dropped(void *ctx, const uint8_t *path, size_t size, int64_t owner)
{
	(void)ctx;
	printf("dropped ephemeral %.*s (session 0x%" PRIx64 ")\n", (int)size, (const char *)path,
	       (uint64_t)owner);
}

/* keel's controller owns the paths Kafka used in ZooKeeper mode (see
 * src/meta/zkview.h): it rewrites or deletes them when it first leads. */
static void warn_kafka_paths(const struct zk_import *imp)
{
	static const char *const owned[] = {"/controller", "/controller_epoch", "/brokers",
					    "/config", "/admin", "/cluster"};
	for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++) {
		if (zk_state_lookup(&imp->st, zk_bytes_str(owned[i])) != ZK_NODE_NONE) {
			printf("warning: %s is imported, but keel's cluster controller owns it "
			       "(Kafka's view of keel's own metadata) and will rewrite it\n",
			       owned[i]);
		}
	}
}

static enum keel_err collect(void *ctx, const void *data, size_t size)
{
	struct keel_wbuf *w = ctx;
	keel_wbuf_bytes(w, data, size);
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_NOMEM;
}

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (d == NULL) {
		return errno == ENOENT;
	}
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			empty = false;
		}
	}
	closedir(d);
	return empty;
}

/* Writes DIR: the snapshot (index = last zxid, term 1) and the hard state. */
static int write_data_dir(const char *dir, const struct zk_import *imp, uint64_t id,
			  const struct node_member *members, size_t member_count)
{
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "keel import-zookeeper: cannot create %s: %s\n", dir, strerror(errno));
		return 2;
	}
	struct node_addr_book book;
	memset(&book, 0, sizeof(book));
	for (size_t i = 0; i < member_count && i < KEEL_ARRAY_SIZE(book.addrs); i++) {
		book.addrs[i].id = members[i].id;
		snprintf(book.addrs[i].peer_addr, sizeof(book.addrs[i].peer_addr), "%s",
			 members[i].peer_addr);
		book.count++;
	}
	struct raft_config config;
	memset(&config, 0, sizeof(config));
	config.count = 1;
	config.members[0].id = id;
	config.members[0].role = RAFT_VOTER;
	uint8_t membership[256];
	struct keel_wbuf mw;
	keel_wbuf_init_fixed(&mw, membership, sizeof(membership));
	raft_config_encode(&config, &mw);

	struct keel_wbuf payload;
	keel_wbuf_init_dynamic(&payload, 1u << 20, SIZE_MAX / 2);
	enum keel_err rc = fsm_snapshot_write_parts(&book, &imp->st, collect, &payload);
	if (rc != KEEL_OK || !keel_wbuf_ok(&mw)) {
		fprintf(stderr, "keel import-zookeeper: cannot build the snapshot: %s\n",
			keel_strerror(rc));
		keel_wbuf_free(&payload);
		return 2;
	}
	uint64_t index = imp->st.last_zxid > 0 ? imp->st.last_zxid : 1;
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	struct wal_config wc;
	wal_config_init(&wc, &vfs, dir);
	char msg[WAL_ERRMSG_SIZE];
	rc = wal_snapshot_save(&wc, index, 1, membership, (uint32_t)mw.size, payload.data,
			       payload.size, msg);
	size_t payload_size = payload.size;
	keel_wbuf_free(&payload);
	if (rc == KEEL_OK) {
		struct wal_hard_state hs;
		memset(&hs, 0, sizeof(hs));
		hs.term = 1;
		rc = wal_hard_state_save(&wc, &hs, msg);
	}
	if (rc != KEEL_OK) {
		fprintf(stderr, "keel import-zookeeper: cannot write %s: %s\n", dir, msg);
		return 2;
	}
	printf("wrote %s: snapshot at index %" PRIu64 " (term 1, %zu bytes), "
	       "membership {%" PRIu64 "}\n",
	       dir, index, payload_size, id);
	return 0;
}

struct options {
	const char *from;
	const char *from_logs;
	const char *data_dir;
	uint64_t id;
	struct node_member members[NODE_MAX_MEMBERS];
	size_t member_count;
};

static int parse_options(int argc, char **argv, struct options *o)
{
	memset(o, 0, sizeof(*o));
	const char *id_text = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			return usage(stdout) - 1; /* -1: done */
		}
		if (v == NULL) {
			fprintf(stderr, "keel import-zookeeper: unexpected argument '%s'\n", a);
			return usage(stderr);
		}
		i++;
		if (strcmp(a, "--from") == 0) {
			o->from = v;
		} else if (strcmp(a, "--from-logs") == 0) {
			o->from_logs = v;
		} else if (strcmp(a, "--data-dir") == 0) {
			o->data_dir = v;
		} else if (strcmp(a, "--id") == 0) {
			id_text = v;
		} else if (strcmp(a, "--cluster") == 0) {
			char err[256];
			if (node_parse_cluster(v, o->members, NODE_MAX_MEMBERS, &o->member_count, err,
					       sizeof(err)) != KEEL_OK) {
				fprintf(stderr, "keel import-zookeeper: %s\n", err);
				return 2;
			}
		} else {
			fprintf(stderr, "keel import-zookeeper: unexpected argument '%s'\n", a);
			return usage(stderr);
		}
	}
	if (o->from == NULL || o->data_dir == NULL) {
		return usage(stderr);
	}
	o->id = 1;
	if (id_text != NULL) {
		char *end = NULL;
		unsigned long long v = strtoull(id_text, &end, 10);
		if (*end != '\0' || v == 0 || v > 254) {
			fprintf(stderr, "keel import-zookeeper: bad --id '%s' (1..254)\n", id_text);
			return 2;
		}
		o->id = v;
	}
	if (o->member_count > 0) {
		bool found = false;
		for (size_t i = 0; i < o->member_count; i++) {
			found = found || o->members[i].id == o->id;
		}
		if (!found) {
			fprintf(stderr, "keel import-zookeeper: --cluster does not list --id %" PRIu64
					"\n",
				o->id);
			return 2;
		}
	}
	return 0;
}

static void print_summary(const struct zk_import *imp)
{
	const struct zk_import_stats *s = &imp->stats;
	printf("txns: %" PRIu64 " read, %" PRIu64 " applied, %" PRIu64
	       " already in the snapshot, %" PRIu64 " failed in ZooKeeper too\n",
	       s->txns_read, s->txns_applied, s->txns_ignored, s->txn_errors);
	printf("imported %u znodes up to zxid 0x%" PRIx64 "; dropped %" PRIu64
	       " ephemeral nodes; state hash %016" PRIx64 "\n",
	       zk_state_node_count(&imp->st), (uint64_t)imp->last_zxid, s->ephemerals_dropped,
	       zk_state_hash(&imp->st));
}

/* ZKDATADIR or ZKDATADIR/version-2, whichever holds the files. */
static void zk_dir(const char *from, char *out, size_t size)
{
	snprintf(out, size, "%s/version-2", from);
	struct stat st;
	if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(out, size, "%s", from);
	}
}

int cli_import_zookeeper(int argc, char **argv)
{
	struct options o;
	int status = parse_options(argc, argv, &o);
	if (status != 0) {
		return status < 0 ? 0 : status;
	}
	if (!dir_is_empty(o.data_dir)) {
		fprintf(stderr, "keel import-zookeeper: %s is not empty (refusing to overwrite)\n",
			o.data_dir);
		return 2;
	}
	char snap_dir[NODE_PATH_SIZE];
	char log_dir[NODE_PATH_SIZE];
	zk_dir(o.from, snap_dir, sizeof(snap_dir));
	zk_dir(o.from_logs != NULL ? o.from_logs : o.from, log_dir, sizeof(log_dir));
	struct zk_files snaps, logs;
	status = list_files(snap_dir, "snapshot.", &snaps);
	if (status == 0) {
		status = list_files(log_dir, "log.", &logs);
		if (status != 0) {
			free(snaps.items);
			return status;
		}
	} else {
		return status;
	}
	if (snaps.count == 0 && logs.count == 0) {
		fprintf(stderr,
			"keel import-zookeeper: no snapshot.* or log.* files in %s%s%s "
			"(is it ZooKeeper's dataDir?)\n",
			snap_dir, strcmp(snap_dir, log_dir) != 0 ? " or " : "",
			strcmp(snap_dir, log_dir) != 0 ? log_dir : "");
		free(snaps.items);
		free(logs.items);
		return 1;
	}
	struct zk_config cfg;
	zk_config_default(&cfg);
	struct zk_import imp;
	if (zk_import_init(&imp, &cfg) != KEEL_OK) {
		free(snaps.items);
		free(logs.items);
		return 2;
	}
	status = load_snapshot(&imp, &snaps);
	if (status == 0) {
		status = replay_logs(&imp, &logs);
	}
	if (status == 0) {
		enum keel_err rc = zk_import_finish(&imp, print_dropped, NULL);
		if (rc != KEEL_OK) {
			fprintf(stderr, "keel import-zookeeper: %s\n", keel_strerror(rc));
			status = 2;
		}
	}
	if (status == 0) {
		print_summary(&imp);
		warn_kafka_paths(&imp);
		status = write_data_dir(o.data_dir, &imp, o.id, o.members, o.member_count);
	}
	zk_import_close(&imp);
	free(snaps.items);
	free(logs.items);
	return status;
}
