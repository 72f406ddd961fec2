/*
 * zkcli.c — `keel get|set|create|delete|ls|stat|watch|acl`: one ZooKeeper
 * operation per process, on keel's own client (src/client/kc.h).
 *
 * Each command parses its options, opens a session (zkcli_open), does its
 * work, prints the result to stdout or the error (as zkCli words it) to
 * stderr, and closes the session — which removes any ephemeral node it
 * made, unless `create --hold` keeps the session until a signal. Output
 * formats are documented in docs/cli.md.
 *
 * Reads (get, ls, stat, acl get) first send `sync`: a new session has seen
 * nothing, so without the barrier it could read a follower that has not
 * yet applied a write another process just made. keel's sync is a
 * ReadIndex barrier, so sync + read is linearizable. --no-sync skips it.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/zkcli.h"
#include "zk/zk_feed.h"

#define COMMON_USAGE                                                                  \
	"common options:\n"                                                           \
	"  --servers HOST:PORT,...    servers to try, in random order\n"              \
	"                             (default " ZKCLI_DEFAULT_SERVERS ")\n"          \
	"  --session-timeout-ms MS    session timeout to ask for (default 10000)\n"  \
	"  --timeout-ms MS            give up on a request after MS (default 10000)\n" \
	"  --auth SCHEME:CREDENTIAL   authenticate first, e.g. digest:user:password\n" \
	"                             (may be repeated)\n"                            \
	"  --no-sync                  reads skip the sync barrier (may be stale)\n"   \
	"exit status: 0 ok, 1 ZooKeeper error (message on stderr), 2 usage error\n"

/* What a command needs beyond its option table. */
struct command {
	const char *usage;
	const struct zkcli_opt *opts;
	int min_pos;
	int max_pos;
	kc_event_fn on_event; /* NULL: events are ignored */
	void *event_ctx;
	int (*body)(struct kc_client *c, char **pos, int pos_count, void *ctx);
	void *ctx;
	/* Checks option combinations before connecting; NULL: none. */
	int (*check)(char **pos, int pos_count, void *ctx);
};

/* Whether reads send sync first (--no-sync clears it). */
static bool sync_reads = true;

/* The barrier before a read (see the file comment). */
static int32_t barrier(struct kc_client *c, const char *path)
{
	return sync_reads ? kc_sync(c, path) : ZK_OK;
}

static void ignore_event(void *ctx, const struct kc_event *ev)
{
	(void)ctx;
	(void)ev;
}

static int usage_error(const char *usage)
{
	fprintf(stderr, "%s", usage);
	return ZKCLI_USAGE;
}

static int drive(int argc, char **argv, const struct command *cmd)
{
	struct zkcli_common co;
	zkcli_common_init(&co);
	char *pos[4];
	int pos_count = 0;
	if (zkcli_parse(argc, argv, cmd->opts, &co, pos, cmd->max_pos, &pos_count) != ZKCLI_OK) {
		return usage_error(cmd->usage);
	}
	if (co.help) {
		printf("%s%s", cmd->usage, COMMON_USAGE);
		return ZKCLI_OK;
	}
	if (pos_count < cmd->min_pos) {
		return usage_error(cmd->usage);
	}
	if (cmd->check != NULL && cmd->check(pos, pos_count, cmd->ctx) != ZKCLI_OK) {
		return usage_error(cmd->usage);
	}
	sync_reads = !co.no_sync;
	struct kc_client c;
	int rc = zkcli_open(&c, &co, cmd->on_event != NULL ? cmd->on_event : ignore_event,
			    cmd->event_ctx);
	if (rc != ZKCLI_OK) {
		return rc;
	}
	rc = cmd->body(&c, pos, pos_count, cmd->ctx);
	fflush(stdout);
	kc_close(&c);
	return rc;
}

/* Prints the error and maps it to the exit status. */
static int result(struct kc_client *c, int32_t err, const char *path)
{
	if (err == ZK_OK) {
		return ZKCLI_OK;
	}
	zkcli_print_error(stderr, c, err, path);
	return ZKCLI_ZK_ERROR;
}

/* ---- get ---- */

struct get_args {
	bool stat;
};

static int get_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	struct get_args *a = ctx;
	struct zk_bytes data;
	struct zk_stat st;
	int32_t err = barrier(c, pos[0]);
	if (err == ZK_OK) {
		err = kc_get(c, pos[0], false, &data, &st);
	}
	if (err == ZK_OK) {
		fwrite(data.data, 1, zk_bytes_len(data), stdout);
		fputc('\n', stdout);
		if (a->stat) {
			zkcli_print_stat(stdout, &st);
		}
	}
	return result(c, err, pos[0]);
}

int cli_get(int argc, char **argv)
{
	struct get_args a = {false};
	const struct zkcli_opt opts[] = {
		{"--stat", "-s", ZKCLI_FLAG, &a.stat},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel get PATH [--stat]\n"
			 "Prints the node's data and a newline; --stat adds its Stat.\n",
		.opts = opts, .min_pos = 1, .max_pos = 1, .body = get_body, .ctx = &a,
	};
	return drive(argc, argv, &cmd);
}

/* ---- set ---- */

struct set_args {
	int64_t version;
	bool stat;
};

static int set_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	struct set_args *a = ctx;
	struct zk_stat st;
	int32_t err = kc_set(c, pos[0], zk_bytes_str(pos[1]), (int32_t)a->version, &st);
	if (err == ZK_OK && a->stat) {
		zkcli_print_stat(stdout, &st);
	}
	return result(c, err, pos[0]);
}

static int version_ok(int64_t version)
{
	if (version < -1 || version > INT32_MAX) {
		fprintf(stderr, "--version must be -1 (any) or a version number\n");
		return ZKCLI_USAGE;
	}
	return ZKCLI_OK;
}

static int set_check(char **pos, int pos_count, void *ctx)
{
	(void)pos;
	(void)pos_count;
	return version_ok(((struct set_args *)ctx)->version);
}

int cli_set(int argc, char **argv)
{
	struct set_args a = {-1, false};
	const struct zkcli_opt opts[] = {
		{"--version", "-v", ZKCLI_INT, &a.version},
		{"--stat", "-s", ZKCLI_FLAG, &a.stat},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel set PATH DATA [--version V] [--stat]\n"
			 "Replaces the node's data (only at version V when given).\n",
		.opts = opts, .min_pos = 2, .max_pos = 2, .body = set_body, .ctx = &a,
		.check = set_check,
	};
	return drive(argc, argv, &cmd);
}

/* ---- create ---- */

struct create_args {
	bool ephemeral;
	bool sequential;
	bool container;
	int64_t ttl_ms; /* -1: none */
	const char *acl;
	bool hold;
	bool parents;
	int32_t mode;
};

static int create_check(char **pos, int pos_count, void *ctx)
{
	(void)pos;
	(void)pos_count;
	struct create_args *a = ctx;
	bool ttl = a->ttl_ms != -1;
	if (ttl && (a->ttl_ms <= 0 || a->ttl_ms > ZK_TTL_MAX_MS)) {
		fprintf(stderr, "--ttl must be 1..%lld ms\n", (long long)ZK_TTL_MAX_MS);
		return ZKCLI_USAGE;
	}
	if (a->container && (a->ephemeral || a->sequential || ttl)) {
		fprintf(stderr, "--container goes with no other mode\n");
		return ZKCLI_USAGE;
	}
	if (ttl && a->ephemeral) {
		fprintf(stderr, "--ttl is for persistent nodes, not --ephemeral\n");
		return ZKCLI_USAGE;
	}
	if (a->hold && !a->ephemeral) {
		fprintf(stderr, "--hold keeps an --ephemeral node alive\n");
		return ZKCLI_USAGE;
	}
	if (ttl) {
		a->mode = a->sequential ? ZK_CREATE_PERSISTENT_SEQUENTIAL_WITH_TTL
					: ZK_CREATE_PERSISTENT_WITH_TTL;
	} else if (a->ephemeral) {
		a->mode = a->sequential ? ZK_CREATE_EPHEMERAL_SEQUENTIAL : ZK_CREATE_EPHEMERAL;
	} else if (a->container) {
		a->mode = ZK_CREATE_CONTAINER;
	} else {
		a->mode = a->sequential ? ZK_CREATE_PERSISTENT_SEQUENTIAL : ZK_CREATE_PERSISTENT;
	}
	return ZKCLI_OK;
}

/* Keeps the session (and its ephemerals) until SIGINT/SIGTERM. */
static int hold_session(struct kc_client *c)
{
	while (!zkcli_stop_requested()) {
		int32_t rc = kc_poll(c, 1000);
		if (rc == ZK_SESSION_EXPIRED || rc == ZK_AUTH_FAILED) {
			fprintf(stderr, "%s: the ephemeral node is gone\n", kc_err_message(rc));
			return ZKCLI_ZK_ERROR;
		}
	}
	return ZKCLI_OK;
}

/* The index of the first ancestor in prefixes[0..depth) that does not
 * exist (depth when all do), or a ZooKeeper error < 0 in *err. */
static size_t first_missing(struct kc_client *c, char **prefixes, size_t depth, int32_t *err)
{
	*err = ZK_OK;
	for (size_t i = 0; i < depth; i++) {
		int32_t rc = kc_exists(c, prefixes[i], false, NULL);
		if (rc == ZK_NO_NODE) {
			return i;
		}
		if (rc != ZK_OK) {
			*err = rc;
			return depth;
		}
	}
	return depth;
}

/* Ops creating prefixes[from..depth) then the node; returns their count. */
static size_t parent_ops(struct zk_multi_op *ops, char **prefixes, size_t from, size_t depth,
			 const char *path, struct zk_bytes data, struct zk_acl_vec acl,
			 const struct kc_create_args *args)
{
	size_t count = 0;
	for (size_t i = from; i < depth; i++, count++) {
		ops[count].opcode = ZK_OP_CREATE;
		ops[count].u.create = (struct zk_create_request){
			zk_bytes_str(prefixes[i]), zk_bytes_of("", 0), acl, ZK_CREATE_PERSISTENT, -1};
	}
	int32_t opcode = args->mode == ZK_CREATE_CONTAINER ? ZK_OP_CREATE_CONTAINER
			 : zk_create_mode_ttl(args->mode)  ? ZK_OP_CREATE_TTL
							   : ZK_OP_CREATE;
	ops[count].opcode = opcode;
	ops[count].u.create = (struct zk_create_request){
		zk_bytes_str(path), data, acl, args->mode,
		opcode == ZK_OP_CREATE_TTL ? args->ttl_ms : -1};
	return count + 1;
}

/* One multi: every missing ancestor (persistent, empty, same ACL) and
 * the node, all or nothing. A racing creator of an ancestor makes it fail
 * with NodeExists: look again, a few times. Prints the node's path. */
static int32_t create_with_parents(struct kc_client *c, const char *path, struct zk_bytes data,
				   const struct kc_create_args *args)
{
	static const struct zk_acl open = {ZK_PERM_ALL, {{(const uint8_t *)"world", 5},
							 {(const uint8_t *)"anyone", 6}}};
	size_t size = strlen(path);
	size_t depth = 0;
	for (size_t i = 1; i < size; i++) {
		depth += path[i] == '/';
	}
	char **prefixes = calloc(depth + 1, sizeof(*prefixes));
	struct zk_multi_op *ops = calloc(depth + 1, sizeof(*ops));
	struct keel_wbuf acl_buf;
	keel_wbuf_init_dynamic(&acl_buf, 256, 1u << 20);
	struct zk_acl_vec acl = args->acl != NULL
					? zk_acl_vec_build(&acl_buf, args->acl, args->acl_count)
					: zk_acl_vec_build(&acl_buf, &open, 1);
	int32_t err = ZK_SYSTEM_ERROR;
	bool ready = prefixes != NULL && ops != NULL && keel_wbuf_ok(&acl_buf);
	for (size_t i = 1, n = 0; ready && i < size; i++) {
		if (path[i] == '/') {
			prefixes[n] = strndup(path, i);
			ready = prefixes[n++] != NULL;
		}
	}
	for (int attempt = 0; ready && attempt < 3; attempt++) {
		size_t from = first_missing(c, prefixes, depth, &err);
		if (err != ZK_OK) {
			break;
		}
		size_t count = parent_ops(ops, prefixes, from, depth, path, data, acl, args);
		struct zk_multi_result_iter results;
		err = kc_multi(c, ops, count, &results);
		if (err == ZK_OK) {
			struct zk_multi_result res;
			struct zk_bytes created = zk_bytes_str(path);
			while (zk_multi_result_next(&results, &res)) {
				created = res.path;
			}
			printf("Created %.*s\n", (int)zk_bytes_len(created),
			       (const char *)created.data);
		}
		if (err != ZK_NODE_EXISTS || count == 1) {
			break;
		}
	}
	for (size_t i = 0; prefixes != NULL && i < depth; i++) {
		free(prefixes[i]);
	}
	free(prefixes);
	free(ops);
	keel_wbuf_free(&acl_buf);
	return err;
}

static int create_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	struct create_args *a = ctx;
	struct zk_acl acl[ZKCLI_MAX_ACL];
	struct kc_create_args args = {a->mode, a->ttl_ms == -1 ? 0 : a->ttl_ms, NULL, 0};
	char *acl_text = NULL;
	if (a->acl != NULL) {
		char err[160];
		acl_text = strdup(a->acl);
		if (acl_text == NULL) {
			fprintf(stderr, "out of memory\n");
			return ZKCLI_ZK_ERROR;
		}
		int n = zkcli_parse_acl(acl_text, acl, ZKCLI_MAX_ACL, err, sizeof(err));
		if (n < 0) {
			fprintf(stderr, "--acl: %s\n", err);
			free(acl_text);
			return ZKCLI_USAGE;
		}
		args.acl = acl;
		args.acl_count = (size_t)n;
	}
	struct zk_bytes data = pos_count > 1 ? zk_bytes_str(pos[1]) : zk_bytes_of("", 0);
	struct zk_bytes created;
	int32_t err;
	if (a->parents) {
		err = create_with_parents(c, pos[0], data, &args);
	} else {
		err = kc_create(c, pos[0], data, &args, &created, NULL);
		if (err == ZK_OK) {
			printf("Created %.*s\n", (int)zk_bytes_len(created),
			       (const char *)created.data);
		}
	}
	free(acl_text);
	if (err != ZK_OK) {
		return result(c, err, pos[0]);
	}
	fflush(stdout);
	if (a->hold) {
		return hold_session(c);
	}
	if (a->ephemeral) {
		fprintf(stderr, "note: the ephemeral node goes away with this command's session "
				"now; use --hold or keel shell to keep it\n");
	}
	return ZKCLI_OK;
}

int cli_create(int argc, char **argv)
{
	struct create_args a = {false, false, false, -1, NULL, false, false, 0};
	const struct zkcli_opt opts[] = {
		{"--ephemeral", "-e", ZKCLI_FLAG, &a.ephemeral},
		{"--sequential", "-s", ZKCLI_FLAG, &a.sequential},
		{"--container", "-c", ZKCLI_FLAG, &a.container},
		{"--ttl", "-t", ZKCLI_INT, &a.ttl_ms},
		{"--acl", NULL, ZKCLI_STR, &a.acl},
		{"--hold", NULL, ZKCLI_FLAG, &a.hold},
		{"--parents", "-p", ZKCLI_FLAG, &a.parents},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel create PATH [DATA] [--ephemeral] [--sequential] [--container]\n"
			 "                  [--ttl MS] [--acl SCHEME:ID:PERMS,...] [--parents] [--hold]\n"
			 "Creates a node and prints \"Created PATH\" (with the sequence suffix\n"
			 "for --sequential). --parents also creates missing ancestors (empty,\n"
			 "persistent), all in one multi. An --ephemeral node lives as long as\n"
			 "the session: --hold keeps the session open until SIGINT/SIGTERM.\n",
		.opts = opts, .min_pos = 1, .max_pos = 2, .body = create_body, .ctx = &a,
		.check = create_check,
	};
	zkcli_catch_signals();
	return drive(argc, argv, &cmd);
}

/* ---- delete ---- */

struct delete_args {
	int64_t version;
	bool recursive;
};

static int delete_check(char **pos, int pos_count, void *ctx)
{
	(void)pos;
	(void)pos_count;
	struct delete_args *a = ctx;
	if (a->recursive && a->version != -1) {
		fprintf(stderr, "--recursive deletes whatever version it finds; drop --version\n");
		return ZKCLI_USAGE;
	}
	return version_ok(a->version);
}

static int delete_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	struct delete_args *a = ctx;
	if (!a->recursive) {
		return result(c, kc_delete(c, pos[0], (int32_t)a->version), pos[0]);
	}
	char failed[1024] = "";
	int32_t err = zkcli_delete_recursive(c, pos[0], failed, sizeof(failed));
	return result(c, err, failed[0] != '\0' ? failed : pos[0]);
}

int cli_delete(int argc, char **argv)
{
	struct delete_args a = {-1, false};
	const struct zkcli_opt opts[] = {
		{"--version", "-v", ZKCLI_INT, &a.version},
		{"--recursive", "-r", ZKCLI_FLAG, &a.recursive},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel delete PATH [--version V] [--recursive]\n"
			 "Deletes the node (only at version V when given); --recursive\n"
			 "deletes its descendants first.\n",
		.opts = opts, .min_pos = 1, .max_pos = 1, .body = delete_body, .ctx = &a,
		.check = delete_check,
	};
	return drive(argc, argv, &cmd);
}

/* ---- ls ---- */

struct ls_args {
	bool stat;
	bool recursive;
};

static int ls_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	struct ls_args *a = ctx;
	int32_t synced = barrier(c, pos[0]);
	if (synced != ZK_OK) {
		return result(c, synced, pos[0]);
	}
	if (a->recursive) {
		char failed[1024] = "";
		int32_t err = zkcli_list_recursive(c, pos[0], stdout, failed, sizeof(failed));
		return result(c, err, failed[0] != '\0' ? failed : pos[0]);
	}
	char **names;
	int32_t count;
	struct zk_stat st;
	int32_t err = zkcli_children(c, pos[0], false, &names, &count, a->stat ? &st : NULL);
	if (err != ZK_OK) {
		return result(c, err, pos[0]);
	}
	for (int32_t i = 0; i < count; i++) {
		printf("%s\n", names[i]);
	}
	zkcli_free_names(names, count);
	if (a->stat) {
		zkcli_print_stat(stdout, &st);
	}
	return ZKCLI_OK;
}

int cli_ls(int argc, char **argv)
{
	struct ls_args a = {false, false};
	const struct zkcli_opt opts[] = {
		{"--stat", "-s", ZKCLI_FLAG, &a.stat},
		{"--recursive", "-R", ZKCLI_FLAG, &a.recursive},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel ls PATH [--stat] [--recursive]\n"
			 "Prints the node's children, one name per line, sorted; --stat adds\n"
			 "the node's Stat; --recursive prints the full path of the node and of\n"
			 "every descendant instead.\n",
		.opts = opts, .min_pos = 1, .max_pos = 1, .body = ls_body, .ctx = &a,
	};
	return drive(argc, argv, &cmd);
}

/* ---- stat ---- */

static int stat_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	(void)ctx;
	struct zk_stat st;
	int32_t err = barrier(c, pos[0]);
	if (err == ZK_OK) {
		err = kc_exists(c, pos[0], false, &st);
	}
	if (err == ZK_OK) {
		zkcli_print_stat(stdout, &st);
	}
	return result(c, err, pos[0]);
}

int cli_stat(int argc, char **argv)
{
	const struct zkcli_opt opts[] = {{NULL, NULL, ZKCLI_FLAG, NULL}};
	struct command cmd = {
		.usage = "usage: keel stat PATH\nPrints the node's Stat.\n",
		.opts = opts, .min_pos = 1, .max_pos = 1, .body = stat_body, .ctx = NULL,
	};
	return drive(argc, argv, &cmd);
}

/* ---- watch ---- */

struct watch_args {
	bool recursive;
	int64_t count; /* 0: until interrupted */
	int64_t seen;
	bool connected_once;
	/* The change feed (--from-zxid): docs/change-feed.md. */
	int64_t from_zxid; /* -1: a persistent watch instead */
	bool children;
	bool data;
};

static void watch_event(void *ctx, const struct kc_event *ev)
{
	struct watch_args *a = ctx;
	if (ev->type == ZK_EVENT_NONE) {
		if (ev->state == ZK_STATE_DISCONNECTED) {
			fprintf(stderr, "disconnected; reconnecting\n");
		} else if (ev->state == ZK_STATE_SYNC_CONNECTED && a->connected_once) {
			fprintf(stderr, "reconnected\n");
		}
		a->connected_once = a->connected_once || ev->state == ZK_STATE_SYNC_CONNECTED;
		return;
	}
	if (a->count > 0 && a->seen >= a->count) {
		return;
	}
	a->seen++;
	printf("%s %s\n", zkcli_event_name(ev->type), ev->path);
	fflush(stdout);
}

static int watch_check(char **pos, int pos_count, void *ctx)
{
	(void)pos;
	(void)pos_count;
	struct watch_args *a = ctx;
	if (a->count < 0) {
		fprintf(stderr, "--count must be positive\n");
		return ZKCLI_USAGE;
	}
	if (a->from_zxid < -1) {
		fprintf(stderr, "--from-zxid must be a zxid (0: from the start)\n");
		return ZKCLI_USAGE;
	}
	if (a->from_zxid == -1 && (a->children || a->data)) {
		fprintf(stderr, "--children and --data go with --from-zxid\n");
		return ZKCLI_USAGE;
	}
	if (a->from_zxid >= 0 && a->recursive) {
		fprintf(stderr, "--from-zxid always covers the whole subtree; drop --recursive\n");
		return ZKCLI_USAGE;
	}
	return ZKCLI_OK;
}

static int feed_body(struct kc_client *c, const char *path, struct watch_args *a);

static int watch_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	struct watch_args *a = ctx;
	if (a->from_zxid >= 0) {
		return feed_body(c, pos[0], a);
	}
	int32_t mode = a->recursive ? ZK_ADD_WATCH_PERSISTENT_RECURSIVE : ZK_ADD_WATCH_PERSISTENT;
	int32_t err = kc_add_watch(c, pos[0], mode);
	if (err != ZK_OK) {
		return result(c, err, pos[0]);
	}
	fprintf(stderr, "watching %s%s\n", pos[0], a->recursive ? " and below" : "");
	while (!zkcli_stop_requested() && (a->count == 0 || a->seen < a->count)) {
		err = kc_poll(c, 1000);
		if (err == ZK_SESSION_EXPIRED || err == ZK_AUTH_FAILED) {
			fprintf(stderr, "%s: the watch is gone\n", kc_err_message(err));
			return ZKCLI_ZK_ERROR;
		}
	}
	return ZKCLI_OK;
}

int cli_watch(int argc, char **argv)
{
	struct watch_args a = {false, 0, 0, false, -1, false, false};
	const struct zkcli_opt opts[] = {
		{"--recursive", "-r", ZKCLI_FLAG, &a.recursive},
		{"--count", "-n", ZKCLI_INT, &a.count},
		{"--from-zxid", "-z", ZKCLI_INT, &a.from_zxid},
		{"--children", NULL, ZKCLI_FLAG, &a.children},
		{"--data", NULL, ZKCLI_FLAG, &a.data},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel watch PATH [--recursive] [--count N]\n"
			 "       keel watch --from-zxid Z PATH [--children] [--data] [--count N]\n"
			 "Sets a persistent watch (recursive: on the whole subtree) and prints\n"
			 "one line per event, \"TYPE PATH\", until N events or SIGINT/SIGTERM.\n"
			 "Connection changes are reported on stderr; the watch survives them.\n"
			 "--from-zxid: the change feed instead: every committed change under\n"
			 "PATH at zxid >= Z (0: all the server holds), one line each,\n"
			 "\"ZXID SEQ TYPE PATH\" (--data: \"ZXID SEQ TYPE 0xHEX PATH\"), with\n"
			 "TYPE created/deleted/data/acl (and child with --children); it resumes\n"
			 "after the last change printed on any server of --servers, so no change\n"
			 "is missed or printed twice. A start the servers no longer hold: exit 1.\n",
		.opts = opts, .min_pos = 1, .max_pos = 1, .body = watch_body, .ctx = &a,
		.on_event = watch_event, .event_ctx = &a, .check = watch_check,
	};
	zkcli_catch_signals();
	return drive(argc, argv, &cmd);
}

/* ---- acl ---- */

struct acl_args {
	int64_t version;
};

static int acl_check(char **pos, int pos_count, void *ctx)
{
	struct acl_args *a = ctx;
	bool get = strcmp(pos[0], "get") == 0;
	bool set = strcmp(pos[0], "set") == 0;
	if ((get && pos_count != 2) || (set && pos_count != 3) || (!get && !set)) {
		return ZKCLI_USAGE;
	}
	if (get && a->version != -1) {
		fprintf(stderr, "--version goes with acl set\n");
		return ZKCLI_USAGE;
	}
	return version_ok(a->version);
}

static int acl_body(struct kc_client *c, char **pos, int pos_count, void *ctx)
{
	(void)pos_count;
	struct acl_args *a = ctx;
	const char *path = pos[1];
	if (strcmp(pos[0], "get") == 0) {
		struct zk_acl_vec vec;
		int32_t err = barrier(c, path);
		if (err == ZK_OK) {
			err = kc_get_acl(c, path, &vec, NULL);
		}
		if (err == ZK_OK) {
			struct zk_acl_iter it;
			struct zk_acl acl;
			zk_acl_iter_init(&it, vec);
			while (zk_acl_iter_next(&it, &acl)) {
				char perms[6];
				zkcli_perms_string(acl.perms, perms);
				printf("%.*s:%.*s:%s\n", (int)zk_bytes_len(acl.id.scheme),
				       (const char *)acl.id.scheme.data, (int)zk_bytes_len(acl.id.id),
				       (const char *)acl.id.id.data, perms);
			}
		}
		return result(c, err, path);
	}
	struct zk_acl acl[ZKCLI_MAX_ACL];
	char err_text[160];
	int n = zkcli_parse_acl(pos[2], acl, ZKCLI_MAX_ACL, err_text, sizeof(err_text));
	if (n < 0) {
		fprintf(stderr, "%s\n", err_text);
		return ZKCLI_USAGE;
	}
	return result(c, kc_set_acl(c, path, acl, (size_t)n, (int32_t)a->version, NULL), path);
}

int cli_acl(int argc, char **argv)
{
	struct acl_args a = {-1};
	const struct zkcli_opt opts[] = {
		{"--version", "-v", ZKCLI_INT, &a.version},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	struct command cmd = {
		.usage = "usage: keel acl get PATH\n"
			 "       keel acl set PATH SCHEME:ID:PERMS[,...] [--version V]\n"
			 "get prints one entry per line as SCHEME:ID:PERMS (PERMS letters of\n"
			 "cdrwa); set replaces the list (only at ACL version V when given).\n",
		.opts = opts, .min_pos = 2, .max_pos = 3, .body = acl_body, .ctx = &a,
		.check = acl_check,
	};
	return drive(argc, argv, &cmd);
}

/* ---- watch --from-zxid: the change feed ---- */

static void feed_print(void *ctx, const struct kc_feed_change *ch)
{
	struct watch_args *a = ctx;
	if (a->count > 0 && a->seen >= a->count) {
		return;
	}
	a->seen++;
	printf("%lld %d %s ", (long long)ch->zxid, (int)ch->seq, zk_feed_type_name(ch->type));
	if (a->data) {
		/* "-": none; "0x" then the bytes in hex (just "0x" when empty) */
		fputs(zk_bytes_is_null(ch->data) ? "-" : "0x", stdout);
		for (size_t i = 0; i < zk_bytes_len(ch->data); i++) {
			printf("%02x", ch->data.data[i]);
		}
		fputc(' ', stdout);
	}
	fwrite(ch->path.data, 1, zk_bytes_len(ch->path), stdout);
	fputc('\n', stdout);
	fflush(stdout);
}

/* A new session on the same servers (the old one expired), with the same
 * credentials. */
static int32_t feed_new_session(struct kc_client *c)
{
	struct kc_options o = c->opt;
	o.session_id = 0;
	o.on_push = NULL;
	o.push_ctx = NULL;
	struct kc_auth auths[KC_MAX_AUTHS];
	uint32_t auth_count = c->auth_count;
	memcpy(auths, c->auths, sizeof(auths));
	kc_close(c);
	if (kc_init(c, &o) != KEEL_OK) {
		return ZK_BAD_ARGUMENTS;
	}
	for (uint32_t i = 0; i < auth_count; i++) {
		int32_t rc = kc_add_auth(c, auths[i].scheme,
					 zk_bytes_of(auths[i].cred, auths[i].cred_size));
		if (rc != ZK_OK) {
			return rc;
		}
	}
	return ZK_OK;
}

static int feed_body(struct kc_client *c, const char *path, struct watch_args *a)
{
	int32_t flags = (a->data ? ZK_FEED_WITH_DATA : 0) | (a->children ? ZK_FEED_CHILDREN : 0);
	struct kc_feed f;
	if (kc_feed_init(&f, c, path, a->from_zxid, flags, feed_print, a) != KEEL_OK) {
		fprintf(stderr, "%s: bad path\n", path);
		return ZKCLI_USAGE;
	}
	int rc = ZKCLI_OK;
	uint64_t announced = 0;
	while (!zkcli_stop_requested() && (a->count == 0 || a->seen < a->count)) {
		int32_t err = kc_feed_poll(&f, 1000);
		if (f.subscribed_on != 0 && f.subscribed_on != announced && kc_server(c) != NULL) {
			fprintf(stderr, "feed of %s on %s\n", path, kc_server(c));
			announced = f.subscribed_on;
		}
		if (err == KC_FEED_COMPACTED) {
			fprintf(stderr,
				"compacted: the servers no longer hold changes from zxid %lld; "
				"the oldest start they hold is %lld\n",
				(long long)f.next_zxid, (long long)f.oldest_zxid);
			rc = ZKCLI_ZK_ERROR;
			break;
		}
		if (err == ZK_SESSION_EXPIRED) {
			fprintf(stderr, "session expired; resuming the feed at zxid %lld in a new "
					"session\n", (long long)f.next_zxid);
			err = feed_new_session(c);
			kc_feed_rebind(&f, c);
		}
		if (err == ZK_AUTH_FAILED || err == ZK_BAD_ARGUMENTS || err == ZK_NO_AUTH ||
		    err == ZK_UNIMPLEMENTED) {
			rc = result(c, err, path);
			break;
		}
	}
	kc_feed_close(&f);
	return rc;
}
