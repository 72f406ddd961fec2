/*
 * zkcli.h — what the ZooKeeper-client commands (zkcli.c) and `keel shell`
 * (zkcli_shell.c) share: option parsing, connecting, and the output
 * formats (docs/cli.md describes them).
 *
 * Exit statuses: ZKCLI_OK 0, ZKCLI_ZK_ERROR 1 (a ZooKeeper error,
 * including ConnectionLoss), ZKCLI_USAGE 2.
 */
#ifndef KEEL_CLI_ZKCLI_H
#define KEEL_CLI_ZKCLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client/kc.h"

enum {
	ZKCLI_OK = 0,
	ZKCLI_ZK_ERROR = 1,
	ZKCLI_USAGE = 2,
};

#define ZKCLI_DEFAULT_SERVERS "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"
#define ZKCLI_DEFAULT_SESSION_TIMEOUT_MS 10000
#define ZKCLI_DEFAULT_TIMEOUT_MS 10000
#define ZKCLI_MAX_AUTHS 8
#define ZKCLI_MAX_ACL 64

/* ---- options ---- */

enum zkcli_opt_kind {
	ZKCLI_FLAG, /* bool */
	ZKCLI_STR,  /* const char * */
	ZKCLI_INT,  /* int64_t; the text must be a whole decimal number */
	ZKCLI_AUTH, /* appended to struct zkcli_common.auth */
};

struct zkcli_opt {
	const char *name;  /* "--version" */
	const char *alias; /* "-v" or NULL */
	enum zkcli_opt_kind kind;
	void *out;
};

/* Options every command takes. */
struct zkcli_common {
	const char *servers;
	int64_t session_timeout_ms;
	int64_t timeout_ms;
	const char *auth[ZKCLI_MAX_AUTHS]; /* "scheme:credential" */
	int auth_count;
	bool no_sync; /* reads skip their sync barrier */
	bool help;
};

void zkcli_common_init(struct zkcli_common *co);

/* Parses argv[1..] against `opts` (NULL-name terminated) plus the common
 * options (when co is not NULL). Positionals go to pos[] (at most
 * max_pos; more is a usage error). "--name=value" works too; "--" ends
 * the options. Returns ZKCLI_OK or ZKCLI_USAGE (message printed). */
int zkcli_parse(int argc, char **argv, const struct zkcli_opt *opts, struct zkcli_common *co,
		char **pos, int max_pos, int *pos_count);

/* ---- connecting ---- */

/* kc_init + kc_connect + the --auth credentials. On failure prints why,
 * leaves nothing to close and returns ZKCLI_ZK_ERROR or ZKCLI_USAGE. */
int zkcli_open(struct kc_client *c, const struct zkcli_common *co, kc_event_fn on_event,
	       void *ctx);

/* Installs SIGINT/SIGTERM handlers (without SA_RESTART, so kc_poll and
 * reads return) that set the flag zkcli_stop_requested() reads. */
void zkcli_catch_signals(void);
bool zkcli_stop_requested(void);

/* ---- output ---- */

/* The error as zkCli prints it ("Node does not exist: /x", ...), with the
 * client's detail for client-side failures, on one line to `out`. */
void zkcli_print_error(FILE *out, const struct kc_client *c, int32_t err, const char *path);

/* zkCli's Stat block (cZxid = 0x..., ctime = ..., ...). */
void zkcli_print_stat(FILE *out, const struct zk_stat *st);

/* "cdrwa"-style permission letters (in that order) into out[6]. */
void zkcli_perms_string(int32_t perms, char out[6]);

/* Event type / keeper state names as ZooKeeper prints them. */
const char *zkcli_event_name(int32_t type);
const char *zkcli_state_name(int32_t state);

/* ---- arguments ---- */

/* Parses "scheme:id:perms[,scheme:id:perms...]" into acl[] (at most max).
 * The strings point into `text`, which must outlive the result. Returns
 * the count, or -1 (message in err). */
int zkcli_parse_acl(char *text, struct zk_acl *acl, int max, char *err, size_t err_size);

/* Children of `path` sorted, as malloc'd strings (free with
 * zkcli_free_names). ZooKeeper error code returned. */
int32_t zkcli_children(struct kc_client *c, const char *path, bool watch, char ***names,
		       int32_t *count, struct zk_stat *stat);
void zkcli_free_names(char **names, int32_t count);

/* Deletes path and everything below it (depth first). */
int32_t zkcli_delete_recursive(struct kc_client *c, const char *path, char *failed_path,
			       size_t failed_size);

/* Prints path and every descendant's full path, one per line, sorted. */
int32_t zkcli_list_recursive(struct kc_client *c, const char *path, FILE *out,
			     char *failed_path, size_t failed_size);

#endif
