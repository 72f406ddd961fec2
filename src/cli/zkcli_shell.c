/*
 * zkcli_shell.c — `keel shell`: an interactive session in zkCli's words.
 *
 * Reads commands from stdin, one per line (a terminal or a pipe), and runs
 * them on one session, so ephemeral nodes and watches live as long as the
 * shell. While it waits for a line it keeps the session alive: it polls
 * stdin and the client's socket together and lets kc_poll() ping,
 * reconnect and deliver watch events, which print as they come:
 *
 *	WATCHER::
 *
 *	WatchedEvent state:SyncConnected type:NodeDataChanged path:/a
 *
 * (node events on stdout, connection state changes on stderr). Results go
 * to stdout and errors to stderr in zkCli's forms; the prompt shows only
 * on a terminal. `quit` (or end of input) closes the session. The exit
 * status is that of the last command (0 ok, 1 ZooKeeper error, 2 usage).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/zkcli.h"

#define MAX_LINE (1u << 20)
#define MAX_TOKENS 16

struct shell {
	struct kc_client c;
	bool tty;
	int status;
	uint64_t commands;
	/* input: [0, len) buffered, lines end in '\n' */
	char *in;
	size_t len;
	bool eof;
	bool skipping; /* discarding the rest of an over-long line */
};

/* ---- events ---- */

static void shell_event(void *ctx, const struct kc_event *ev)
{
	(void)ctx;
	bool node = ev->type != ZK_EVENT_NONE;
	if (!node && ev->state == ZK_STATE_CLOSED) {
		return; /* we closed it: quit or end of input */
	}
	FILE *out = node ? stdout : stderr;
	fprintf(out, "\nWATCHER::\n\nWatchedEvent state:%s type:%s path:%s\n",
		zkcli_state_name(node ? ZK_STATE_SYNC_CONNECTED : ev->state),
		zkcli_event_name(ev->type), node ? ev->path : "null");
	fflush(out);
}

/* ---- input ---- */

/* Takes one line out of the buffer into *line (NUL-terminated, '\r'
 * dropped); the caller frees it. 1 line, 0 none buffered. */
static int take_line(struct shell *sh, char **line)
{
	char *nl = memchr(sh->in, '\n', sh->len);
	if (nl == NULL && !(sh->eof && sh->len > 0)) {
		return 0;
	}
	size_t n = nl != NULL ? (size_t)(nl - sh->in) : sh->len;
	size_t consumed = nl != NULL ? n + 1 : n;
	if (n > 0 && sh->in[n - 1] == '\r') {
		n--;
	}
	*line = strndup(sh->in, n);
	memmove(sh->in, sh->in + consumed, sh->len - consumed);
	sh->len -= consumed;
	return *line != NULL ? 1 : 0;
}

static void prompt(struct shell *sh)
{
	if (!sh->tty) {
		return;
	}
	const char *server = kc_server(&sh->c);
	const char *state = kc_state(&sh->c) == KC_CONNECTED ? "CONNECTED" : "DISCONNECTED";
	printf("[keel: %s(%s) %llu] ", server != NULL ? server : "-", state,
	       (unsigned long long)sh->commands);
	fflush(stdout);
}

/* Waits for the next line while keeping the session alive. 1 line, 0 end
 * of input, -1 stopped by a signal. */
static int next_line(struct shell *sh, char **line)
{
	for (;;) {
		if (!sh->skipping && take_line(sh, line) == 1) {
			return 1;
		}
		if (sh->eof) {
			return 0;
		}
		if (zkcli_stop_requested()) {
			return -1;
		}
		struct pollfd fds[2] = {
			{.fd = STDIN_FILENO, .events = POLLIN},
			{.fd = kc_fd(&sh->c), .events = POLLIN},
		};
		int rc = poll(fds, fds[1].fd >= 0 ? 2 : 1, kc_poll_timeout_ms(&sh->c));
		if (rc < 0 && errno != EINTR) {
			return 0;
		}
		if (rc == 0 || (rc > 0 && fds[1].fd >= 0 && fds[1].revents != 0) ||
		    kc_state(&sh->c) == KC_DISCONNECTED) {
			(void)kc_poll(&sh->c, 0);
		}
		if (rc <= 0 || fds[0].revents == 0) {
			continue;
		}
		if (sh->len == MAX_LINE) {
			/* No newline in 1 MiB: drop it, say so, resync. */
			fprintf(stderr, "line longer than %u bytes ignored\n", MAX_LINE);
			sh->len = 0;
			sh->skipping = true;
		}
		ssize_t n = read(STDIN_FILENO, sh->in + sh->len, MAX_LINE - sh->len);
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			sh->eof = true;
			continue;
		}
		if (sh->skipping) {
			char *nl = memchr(sh->in, '\n', (size_t)n);
			if (nl == NULL) {
				continue;
			}
			size_t rest = (size_t)n - (size_t)(nl + 1 - sh->in);
			memmove(sh->in, nl + 1, rest);
			sh->len = rest;
			sh->skipping = false;
			continue;
		}
		sh->len += (size_t)n;
	}
}

/* Splits a line into words; "double" and 'single' quotes group, and a
 * backslash escapes the next character inside double quotes. Returns the
 * count, or -1 for an unterminated quote. Words point into `line`. */
static int tokenize(char *line, char **words, int max)
{
	int count = 0;
	char *src = line;
	while (*src != '\0') {
		while (*src == ' ' || *src == '\t') {
			src++;
		}
		if (*src == '\0') {
			break;
		}
		if (count == max) {
			return -1;
		}
		char *dst = src;
		words[count++] = dst;
		while (*src != '\0' && *src != ' ' && *src != '\t') {
			char quote = *src;
			if (quote != '"' && quote != '\'') {
				*dst++ = *src++;
				continue;
			}
			src++;
			while (*src != '\0' && *src != quote) {
				if (quote == '"' && *src == '\\' && src[1] != '\0') {
					src++;
				}
				*dst++ = *src++;
			}
			if (*src != quote) {
				return -1;
			}
			src++;
		}
		bool end = *src == '\0';
		*dst = '\0';
		if (!end) {
			src++;
		}
	}
	return count;
}

/* ---- per-command flags ---- */

/* Flags of one command: single letters; those in `with_value` take the
 * next word. Non-flags are collected as positionals. */
struct flags {
	bool set[26];
	const char *value[26];
	const char *pos[MAX_TOKENS];
	int pos_count;
};

static bool parse_flags(char **words, int count, const char *allowed, const char *with_value,
			struct flags *f)
{
	memset(f, 0, sizeof(*f));
	for (int i = 1; i < count; i++) {
		const char *w = words[i];
		if (w[0] == '-' && w[1] >= 'a' && w[1] <= 'z' && w[2] == '\0' &&
		    strchr(allowed, w[1]) != NULL) {
			int k = w[1] - 'a';
			f->set[k] = true;
			if (strchr(with_value, w[1]) != NULL) {
				if (i + 1 >= count) {
					return false;
				}
				f->value[k] = words[++i];
			}
			continue;
		}
		if (w[0] == '-' && w[1] == 'R' && w[2] == '\0' && strchr(allowed, 'R') != NULL) {
			f->set['r' - 'a'] = true;
			continue;
		}
		f->pos[f->pos_count++] = w;
	}
	return true;
}

static bool flag(const struct flags *f, char letter)
{
	return f->set[letter - 'a'];
}

static bool flag_int(const struct flags *f, char letter, int64_t lo, int64_t hi, int64_t *out)
{
	const char *v = f->value[letter - 'a'];
	if (v == NULL) {
		return true;
	}
	char *end;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || *v == '\0' || n < lo || n > hi) {
		return false;
	}
	*out = n;
	return true;
}

static int fail(struct shell *sh, int32_t err, const char *path)
{
	zkcli_print_error(stderr, &sh->c, err, path);
	return ZKCLI_ZK_ERROR;
}

static int usage(const char *text)
{
	fprintf(stderr, "%s\n", text);
	return ZKCLI_USAGE;
}

/* ---- commands ---- */

static int cmd_create(struct shell *sh, const struct flags *f)
{
	const char *u = "create [-s] [-e] [-c] [-t ttl] path [data] [acl]";
	int64_t ttl = 0;
	if (f->pos_count < 1 || f->pos_count > 3 || !flag_int(f, 't', 1, ZK_TTL_MAX_MS, &ttl)) {
		return usage(u);
	}
	bool seq = flag(f, 's');
	bool eph = flag(f, 'e');
	bool ttl_set = flag(f, 't');
	if ((flag(f, 'c') && (seq || eph || ttl_set)) || (ttl_set && eph)) {
		return usage(u);
	}
	struct kc_create_args args = {ZK_CREATE_PERSISTENT, 0, NULL, 0};
	if (ttl_set) {
		args.mode = seq ? ZK_CREATE_PERSISTENT_SEQUENTIAL_WITH_TTL
				: ZK_CREATE_PERSISTENT_WITH_TTL;
		args.ttl_ms = ttl;
	} else if (eph) {
		args.mode = seq ? ZK_CREATE_EPHEMERAL_SEQUENTIAL : ZK_CREATE_EPHEMERAL;
	} else if (flag(f, 'c')) {
		args.mode = ZK_CREATE_CONTAINER;
	} else if (seq) {
		args.mode = ZK_CREATE_PERSISTENT_SEQUENTIAL;
	}
	struct zk_acl acl[ZKCLI_MAX_ACL];
	char *acl_text = NULL;
	if (f->pos_count == 3) {
		char err[160];
		acl_text = strdup(f->pos[2]);
		if (acl_text == NULL) {
			return usage("out of memory");
		}
		int n = zkcli_parse_acl(acl_text, acl, ZKCLI_MAX_ACL, err, sizeof(err));
		if (n < 0) {
			free(acl_text);
			return usage(err);
		}
		args.acl = acl;
		args.acl_count = (size_t)n;
	}
	struct zk_bytes data = f->pos_count > 1 ? zk_bytes_str(f->pos[1]) : zk_bytes_of("", 0);
	struct zk_bytes created;
	int32_t err = kc_create(&sh->c, f->pos[0], data, &args, &created, NULL);
	free(acl_text);
	if (err != ZK_OK) {
		return fail(sh, err, f->pos[0]);
	}
	printf("Created %.*s\n", (int)zk_bytes_len(created), (const char *)created.data);
	return ZKCLI_OK;
}

static int cmd_get(struct shell *sh, const struct flags *f)
{
	if (f->pos_count != 1) {
		return usage("get [-s] [-w] path");
	}
	struct zk_bytes data;
	struct zk_stat st;
	int32_t err = kc_get(&sh->c, f->pos[0], flag(f, 'w'), &data, &st);
	if (err != ZK_OK) {
		return fail(sh, err, f->pos[0]);
	}
	if (zk_bytes_is_null(data)) {
		printf("null\n");
	} else {
		fwrite(data.data, 1, zk_bytes_len(data), stdout);
		fputc('\n', stdout);
	}
	if (flag(f, 's')) {
		zkcli_print_stat(stdout, &st);
	}
	return ZKCLI_OK;
}

static int cmd_set(struct shell *sh, const struct flags *f)
{
	int64_t version = -1;
	if (f->pos_count != 2 || !flag_int(f, 'v', -1, INT32_MAX, &version)) {
		return usage("set [-s] [-v version] path data");
	}
	struct zk_stat st;
	int32_t err = kc_set(&sh->c, f->pos[0], zk_bytes_str(f->pos[1]), (int32_t)version, &st);
	if (err != ZK_OK) {
		return fail(sh, err, f->pos[0]);
	}
	if (flag(f, 's')) {
		zkcli_print_stat(stdout, &st);
	}
	return ZKCLI_OK;
}

static int cmd_ls(struct shell *sh, const struct flags *f)
{
	if (f->pos_count != 1) {
		return usage("ls [-s] [-w] [-R] path");
	}
	const char *path = f->pos[0];
	if (flag(f, 'r')) {
		char failed[1024] = "";
		int32_t err = zkcli_list_recursive(&sh->c, path, stdout, failed, sizeof(failed));
		return err == ZK_OK ? ZKCLI_OK : fail(sh, err, failed[0] != '\0' ? failed : path);
	}
	char **names;
	int32_t count;
	struct zk_stat st;
	int32_t err =
		zkcli_children(&sh->c, path, flag(f, 'w'), &names, &count, flag(f, 's') ? &st : NULL);
	if (err != ZK_OK) {
		return fail(sh, err, path);
	}
	printf("[");
	for (int32_t i = 0; i < count; i++) {
		printf("%s%s", i > 0 ? ", " : "", names[i]);
	}
	printf("]\n");
	zkcli_free_names(names, count);
	if (flag(f, 's')) {
		zkcli_print_stat(stdout, &st);
	}
	return ZKCLI_OK;
}

static int cmd_stat(struct shell *sh, const struct flags *f)
{
	if (f->pos_count != 1) {
		return usage("stat [-w] path");
	}
	struct zk_stat st;
	int32_t err = kc_exists(&sh->c, f->pos[0], flag(f, 'w'), &st);
	if (err != ZK_OK) {
		return fail(sh, err, f->pos[0]);
	}
	zkcli_print_stat(stdout, &st);
	return ZKCLI_OK;
}

static int cmd_delete(struct shell *sh, const struct flags *f)
{
	int64_t version = -1;
	if (f->pos_count != 1 || !flag_int(f, 'v', -1, INT32_MAX, &version)) {
		return usage("delete [-v version] path");
	}
	int32_t err = kc_delete(&sh->c, f->pos[0], (int32_t)version);
	return err == ZK_OK ? ZKCLI_OK : fail(sh, err, f->pos[0]);
}

static int cmd_deleteall(struct shell *sh, const struct flags *f)
{
	if (f->pos_count != 1) {
		return usage("deleteall path");
	}
	char failed[1024] = "";
	int32_t err = zkcli_delete_recursive(&sh->c, f->pos[0], failed, sizeof(failed));
	return err == ZK_OK ? ZKCLI_OK : fail(sh, err, failed[0] != '\0' ? failed : f->pos[0]);
}

static int cmd_sync(struct shell *sh, const struct flags *f)
{
	if (f->pos_count != 1) {
		return usage("sync path");
	}
	int32_t err = kc_sync(&sh->c, f->pos[0]);
	if (err != ZK_OK) {
		return fail(sh, err, f->pos[0]);
	}
	printf("Sync is OK\n");
	return ZKCLI_OK;
}

static int cmd_addauth(struct shell *sh, const struct flags *f)
{
	if (f->pos_count < 1 || f->pos_count > 2) {
		return usage("addauth scheme auth");
	}
	const char *cred = f->pos_count == 2 ? f->pos[1] : "";
	int32_t err = kc_add_auth(&sh->c, f->pos[0], zk_bytes_str(cred));
	return err == ZK_OK ? ZKCLI_OK : fail(sh, err, "");
}

static int cmd_get_acl(struct shell *sh, const struct flags *f)
{
	if (f->pos_count != 1) {
		return usage("getAcl [-s] path");
	}
	struct zk_acl_vec vec;
	struct zk_stat st;
	int32_t err = kc_get_acl(&sh->c, f->pos[0], &vec, &st);
	if (err != ZK_OK) {
		return fail(sh, err, f->pos[0]);
	}
	struct zk_acl_iter it;
	struct zk_acl acl;
	zk_acl_iter_init(&it, vec);
	while (zk_acl_iter_next(&it, &acl)) {
		char perms[6];
		zkcli_perms_string(acl.perms, perms);
		printf("'%.*s,'%.*s\n: %s\n", (int)zk_bytes_len(acl.id.scheme),
		       (const char *)acl.id.scheme.data, (int)zk_bytes_len(acl.id.id),
		       (const char *)acl.id.id.data, perms);
	}
	if (flag(f, 's')) {
		zkcli_print_stat(stdout, &st);
	}
	return ZKCLI_OK;
}

/* setAcl on path and (recursive) every descendant. */
static int32_t set_acl_tree(struct kc_client *c, const char *path, const struct zk_acl *acl,
			    size_t count, int32_t version, bool recursive, struct zk_stat *st,
			    char *failed, size_t failed_size)
{
	int32_t err = kc_set_acl(c, path, acl, count, version, st);
	if (err != ZK_OK || !recursive) {
		if (err != ZK_OK) {
			snprintf(failed, failed_size, "%s", path);
		}
		return err;
	}
	char **names;
	int32_t n;
	err = zkcli_children(c, path, false, &names, &n, NULL);
	for (int32_t i = 0; i < n && err == ZK_OK; i++) {
		size_t size = strlen(path) + strlen(names[i]) + 2;
		char *child = malloc(size);
		if (child == NULL) {
			err = ZK_SYSTEM_ERROR;
			break;
		}
		snprintf(child, size, "%s/%s", strcmp(path, "/") == 0 ? "" : path, names[i]);
		err = set_acl_tree(c, child, acl, count, -1, true, NULL, failed, failed_size);
		free(child);
	}
	zkcli_free_names(names, n);
	return err;
}

static int cmd_set_acl(struct shell *sh, const struct flags *f)
{
	int64_t version = -1;
	const char *u = "setAcl [-s] [-v version] [-R] path acl";
	if (f->pos_count != 2 || !flag_int(f, 'v', -1, INT32_MAX, &version)) {
		return usage(u);
	}
	struct zk_acl acl[ZKCLI_MAX_ACL];
	char err_text[160];
	char *text = strdup(f->pos[1]);
	if (text == NULL) {
		return usage("out of memory");
	}
	int n = zkcli_parse_acl(text, acl, ZKCLI_MAX_ACL, err_text, sizeof(err_text));
	if (n < 0) {
		free(text);
		return usage(err_text);
	}
	struct zk_stat st;
	char failed[1024] = "";
	int32_t err = set_acl_tree(&sh->c, f->pos[0], acl, (size_t)n, (int32_t)version,
				   flag(f, 'r'), &st, failed, sizeof(failed));
	free(text);
	if (err != ZK_OK) {
		return fail(sh, err, failed[0] != '\0' ? failed : f->pos[0]);
	}
	if (flag(f, 's')) {
		zkcli_print_stat(stdout, &st);
	}
	return ZKCLI_OK;
}

static int cmd_add_watch(struct shell *sh, const struct flags *f)
{
	const char *mode_text = f->value['m' - 'a'];
	int32_t mode = ZK_ADD_WATCH_PERSISTENT_RECURSIVE; /* zkCli's default */
	if (mode_text != NULL && strcmp(mode_text, "PERSISTENT") == 0) {
		mode = ZK_ADD_WATCH_PERSISTENT;
	} else if (mode_text != NULL && strcmp(mode_text, "PERSISTENT_RECURSIVE") != 0) {
		return usage("addWatch [-m PERSISTENT|PERSISTENT_RECURSIVE] path");
	}
	if (f->pos_count != 1) {
		return usage("addWatch [-m PERSISTENT|PERSISTENT_RECURSIVE] path");
	}
	int32_t err = kc_add_watch(&sh->c, f->pos[0], mode);
	return err == ZK_OK ? ZKCLI_OK : fail(sh, err, f->pos[0]);
}

static int cmd_session(struct shell *sh, const struct flags *f)
{
	(void)f;
	const char *server = kc_server(&sh->c);
	printf("session 0x%llx timeout %d ms server %s state %s\n",
	       (unsigned long long)kc_session_id(&sh->c), kc_session_timeout_ms(&sh->c),
	       server != NULL ? server : "-",
	       kc_state(&sh->c) == KC_CONNECTED ? "CONNECTED" : "DISCONNECTED");
	return ZKCLI_OK;
}

static void help(void)
{
	printf("commands:\n"
	       "  create [-s] [-e] [-c] [-t ttl] path [data] [acl]\n"
	       "  get [-s] [-w] path\n"
	       "  set [-s] [-v version] path data\n"
	       "  ls [-s] [-w] [-R] path\n"
	       "  stat [-w] path\n"
	       "  delete [-v version] path\n"
	       "  deleteall path\n"
	       "  sync path\n"
	       "  addauth scheme auth\n"
	       "  getAcl [-s] path\n"
	       "  setAcl [-s] [-v version] [-R] path acl\n"
	       "  addWatch [-m PERSISTENT|PERSISTENT_RECURSIVE] path\n"
	       "  session   (the session id, timeout and server connected to)\n"
	       "  help\n"
	       "  quit\n");
}

struct shell_command {
	const char *name;
	const char *flags;      /* letters accepted */
	const char *with_value; /* letters that take a value */
	int (*run)(struct shell *sh, const struct flags *f);
};

static const struct shell_command shell_commands[] = {
	{"create", "sect", "t", cmd_create},
	{"get", "sw", "", cmd_get},
	{"set", "sv", "v", cmd_set},
	{"ls", "swR", "", cmd_ls},
	{"stat", "w", "", cmd_stat},
	{"delete", "v", "v", cmd_delete},
	{"deleteall", "", "", cmd_deleteall},
	{"rmr", "", "", cmd_deleteall},
	{"sync", "", "", cmd_sync},
	{"addauth", "", "", cmd_addauth},
	{"getAcl", "s", "", cmd_get_acl},
	{"setAcl", "svR", "v", cmd_set_acl},
	{"addWatch", "m", "m", cmd_add_watch},
	{"session", "", "", cmd_session},
	{NULL, NULL, NULL, NULL},
};

/* Runs one line. Returns false when the shell should end. */
static bool run_line(struct shell *sh, char *line)
{
	char *words[MAX_TOKENS];
	int count = tokenize(line, words, MAX_TOKENS);
	if (count < 0) {
		sh->status = usage("unterminated quote or too many words");
		return true;
	}
	if (count == 0 || words[0][0] == '#') {
		return true;
	}
	sh->commands++;
	if (strcmp(words[0], "quit") == 0 || strcmp(words[0], "exit") == 0) {
		return false;
	}
	if (strcmp(words[0], "help") == 0) {
		help();
		sh->status = ZKCLI_OK;
		return true;
	}
	for (const struct shell_command *cmd = shell_commands; cmd->name != NULL; cmd++) {
		if (strcmp(words[0], cmd->name) != 0) {
			continue;
		}
		struct flags f;
		if (!parse_flags(words, count, cmd->flags, cmd->with_value, &f)) {
			sh->status = usage("a flag is missing its value");
		} else {
			sh->status = cmd->run(sh, &f);
		}
		fflush(stdout);
		return true;
	}
	fprintf(stderr, "Unknown command: %s (try help)\n", words[0]);
	sh->status = ZKCLI_USAGE;
	return true;
}

int cli_shell(int argc, char **argv)
{
	static const char usage_text[] =
		"usage: keel shell [--servers HOSTS] [--session-timeout-ms MS] [--timeout-ms MS]\n"
		"                  [--auth SCHEME:CREDENTIAL]\n"
		"Runs zkCli-style commands read from stdin on one session (type help).\n";
	struct zkcli_common co;
	zkcli_common_init(&co);
	const struct zkcli_opt opts[] = {{NULL, NULL, ZKCLI_FLAG, NULL}};
	char *pos[1];
	int pos_count;
	if (zkcli_parse(argc, argv, opts, &co, pos, 0, &pos_count) != ZKCLI_OK) {
		fprintf(stderr, "%s", usage_text);
		return ZKCLI_USAGE;
	}
	if (co.help) {
		printf("%s", usage_text);
		return ZKCLI_OK;
	}
	static struct shell sh;
	memset(&sh, 0, sizeof(sh));
	sh.tty = isatty(STDIN_FILENO) == 1;
	sh.in = malloc(MAX_LINE);
	if (sh.in == NULL) {
		fprintf(stderr, "out of memory\n");
		return ZKCLI_ZK_ERROR;
	}
	zkcli_catch_signals();
	int rc = zkcli_open(&sh.c, &co, shell_event, &sh);
	if (rc != ZKCLI_OK) {
		free(sh.in);
		return rc;
	}
	for (;;) {
		prompt(&sh);
		char *line = NULL;
		int got = next_line(&sh, &line);
		if (got <= 0) {
			break;
		}
		bool more = run_line(&sh, line);
		free(line);
		if (!more) {
			break;
		}
	}
	if (sh.tty) {
		printf("\n");
	}
	fflush(stdout);
	kc_close(&sh.c);
	free(sh.in);
	return sh.status;
}
