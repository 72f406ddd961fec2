/*
 * zkcli_util.c — option parsing, connecting, output formats and tree
 * walks shared by the ZooKeeper-client commands and `keel shell`
 * (zkcli.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/zkcli.h"

/* ---- options ---- */

void zkcli_common_init(struct zkcli_common *co)
{
	memset(co, 0, sizeof(*co));
	co->servers = ZKCLI_DEFAULT_SERVERS;
	co->session_timeout_ms = ZKCLI_DEFAULT_SESSION_TIMEOUT_MS;
	co->timeout_ms = ZKCLI_DEFAULT_TIMEOUT_MS;
}

static bool parse_int(const char *text, int64_t *out)
{
	if (text == NULL || *text == '\0') {
		return false;
	}
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0') {
		return false;
	}
	*out = v;
	return true;
}

static const struct zkcli_opt *find_opt(const struct zkcli_opt *opts, const char *name,
					size_t name_len)
{
	for (const struct zkcli_opt *o = opts; o != NULL && o->name != NULL; o++) {
		if ((strlen(o->name) == name_len && strncmp(o->name, name, name_len) == 0) ||
		    (o->alias != NULL && strlen(o->alias) == name_len &&
		     strncmp(o->alias, name, name_len) == 0)) {
			return o;
		}
	}
	return NULL;
}

/* Applies one option; ZKCLI_USAGE with a message when the value is bad. */
static int apply_opt(const struct zkcli_opt *o, struct zkcli_common *co, const char *value)
{
	switch (o->kind) {
	case ZKCLI_FLAG:
		*(bool *)o->out = true;
		return ZKCLI_OK;
	case ZKCLI_STR:
		*(const char **)o->out = value;
		return ZKCLI_OK;
	case ZKCLI_INT:
		if (!parse_int(value, (int64_t *)o->out)) {
			fprintf(stderr, "%s needs a number, not '%s'\n", o->name, value);
			return ZKCLI_USAGE;
		}
		return ZKCLI_OK;
	case ZKCLI_AUTH:
		if (co->auth_count == ZKCLI_MAX_AUTHS) {
			fprintf(stderr, "at most %d %s options\n", ZKCLI_MAX_AUTHS, o->name);
			return ZKCLI_USAGE;
		}
		if (strchr(value, ':') == NULL) {
			fprintf(stderr, "%s wants SCHEME:CREDENTIAL (e.g. digest:user:password)\n",
				o->name);
			return ZKCLI_USAGE;
		}
		co->auth[co->auth_count++] = value;
		return ZKCLI_OK;
	default:
		return ZKCLI_USAGE;
	}
}

int zkcli_parse(int argc, char **argv, const struct zkcli_opt *opts, struct zkcli_common *co,
		char **pos, int max_pos, int *pos_count)
{
	const struct zkcli_opt common[] = {
		{"--servers", NULL, ZKCLI_STR, co != NULL ? &co->servers : NULL},
		{"--session-timeout-ms", NULL, ZKCLI_INT,
		 co != NULL ? &co->session_timeout_ms : NULL},
		{"--timeout-ms", NULL, ZKCLI_INT, co != NULL ? &co->timeout_ms : NULL},
		{"--auth", NULL, ZKCLI_AUTH, NULL},
		{"--no-sync", NULL, ZKCLI_FLAG, co != NULL ? &co->no_sync : NULL},
		{"--help", "-h", ZKCLI_FLAG, co != NULL ? &co->help : NULL},
		{NULL, NULL, ZKCLI_FLAG, NULL},
	};
	*pos_count = 0;
	bool options_done = false;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (!options_done && strcmp(arg, "--") == 0) {
			options_done = true;
			continue;
		}
		if (options_done || arg[0] != '-' || arg[1] == '\0' ||
		    (arg[1] >= '0' && arg[1] <= '9')) {
			if (*pos_count == max_pos) {
				fprintf(stderr, "unexpected argument '%s'\n", arg);
				return ZKCLI_USAGE;
			}
			pos[(*pos_count)++] = argv[i];
			continue;
		}
		const char *eq = strchr(arg, '=');
		size_t name_len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
		const struct zkcli_opt *o = find_opt(opts, arg, name_len);
		if (o == NULL && co != NULL) {
			o = find_opt(common, arg, name_len);
		}
		if (o == NULL) {
			fprintf(stderr, "unknown option %s\n", arg);
			return ZKCLI_USAGE;
		}
		const char *value = NULL;
		if (o->kind != ZKCLI_FLAG) {
			if (eq != NULL) {
				value = eq + 1;
			} else if (i + 1 < argc) {
				value = argv[++i];
			} else {
				fprintf(stderr, "%s needs a value\n", o->name);
				return ZKCLI_USAGE;
			}
		} else if (eq != NULL) {
			fprintf(stderr, "%s takes no value\n", o->name);
			return ZKCLI_USAGE;
		}
		int rc = apply_opt(o, co, value);
		if (rc != ZKCLI_OK) {
			return rc;
		}
	}
	if (co != NULL && (co->session_timeout_ms <= 0 || co->session_timeout_ms > INT32_MAX ||
			   co->timeout_ms <= 0 || co->timeout_ms > INT32_MAX)) {
		fprintf(stderr, "timeouts must be positive milliseconds\n");
		return ZKCLI_USAGE;
	}
	return ZKCLI_OK;
}

/* ---- connecting ---- */

int zkcli_open(struct kc_client *c, const struct zkcli_common *co, kc_event_fn on_event,
	       void *ctx)
{
	struct kc_options o;
	memset(&o, 0, sizeof(o));
	o.servers = co->servers;
	o.session_timeout_ms = (int32_t)co->session_timeout_ms;
	o.call_timeout_ms = (int32_t)co->timeout_ms;
	o.on_event = on_event;
	o.event_ctx = ctx;
	if (kc_init(c, &o) != KEEL_OK) {
		fprintf(stderr, "--servers: %s\n", kc_message(c));
		return ZKCLI_USAGE;
	}
	int32_t rc = kc_connect(c);
	if (rc != ZK_OK) {
		fprintf(stderr, "cannot connect to %s: %s (%s)%s\n", co->servers,
			kc_err_message(rc), kc_message(c), cli_quorum_hint(rc));
		kc_close(c);
		return ZKCLI_ZK_ERROR;
	}
	for (int i = 0; i < co->auth_count; i++) {
		const char *colon = strchr(co->auth[i], ':');
		char scheme[32];
		size_t len = (size_t)(colon - co->auth[i]);
		if (len == 0 || len >= sizeof(scheme)) {
			fprintf(stderr, "--auth: bad scheme in '%s'\n", co->auth[i]);
			kc_close(c);
			return ZKCLI_USAGE;
		}
		memcpy(scheme, co->auth[i], len);
		scheme[len] = '\0';
		rc = kc_add_auth(c, scheme, zk_bytes_str(colon + 1));
		if (rc != ZK_OK) {
			fprintf(stderr, "--auth %s: %s\n", scheme, kc_err_message(rc));
			kc_close(c);
			return ZKCLI_ZK_ERROR;
		}
	}
	return ZKCLI_OK;
}

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int signum)
{
	(void)signum;
	stop_requested = 1;
}

void zkcli_catch_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: a blocked poll/read returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

bool zkcli_stop_requested(void)
{
	return stop_requested != 0;
}

/* ---- output ---- */

void zkcli_print_error(FILE *out, const struct kc_client *c, int32_t err, const char *path)
{
	const char *detail = c != NULL ? kc_message(c) : "";
	switch (err) {
	case ZK_NO_NODE:
		fprintf(out, "Node does not exist: %s\n", path);
		return;
	case ZK_NO_CHILDREN_FOR_EPHEMERALS:
		fprintf(out, "Ephemerals cannot have children: %s\n", path);
		return;
	case ZK_NODE_EXISTS:
		fprintf(out, "Node already exists: %s\n", path);
		return;
	case ZK_NOT_EMPTY:
		fprintf(out, "Node not empty: %s\n", path);
		return;
	case ZK_NOT_READ_ONLY:
		fprintf(out, "Not a read-only call: %s\n", path);
		return;
	case ZK_INVALID_ACL:
		fprintf(out, "Acl is not valid : %s\n", path);
		return;
	case ZK_NO_AUTH:
		fprintf(out, "Authentication is not valid : %s\n", path);
		return;
	case ZK_BAD_VERSION:
		fprintf(out, "version No is not valid : %s\n", path);
		return;
	case ZK_BAD_ARGUMENTS:
		if (detail[0] != '\0') {
			fprintf(out, "%s\n", detail); /* the client's own check */
		} else {
			fprintf(out, "Arguments are not valid : %s\n", path);
		}
		return;
	default:
		if (detail[0] != '\0') {
			fprintf(out, "KeeperErrorCode = %s for %s (%s)\n", kc_err_message(err), path,
				detail);
		} else {
			fprintf(out, "KeeperErrorCode = %s for %s\n", kc_err_message(err), path);
		}
		return;
	}
}

static void print_time(FILE *out, const char *name, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char text[64];
	if (localtime_r(&t, &tm) == NULL ||
	    strftime(text, sizeof(text), "%a %b %d %H:%M:%S %Z %Y", &tm) == 0) {
		snprintf(text, sizeof(text), "%lld", (long long)ms);
	}
	fprintf(out, "%s = %s\n", name, text);
}

void zkcli_print_stat(FILE *out, const struct zk_stat *st)
{
	fprintf(out, "cZxid = 0x%llx\n", (unsigned long long)st->czxid);
	print_time(out, "ctime", st->ctime);
	fprintf(out, "mZxid = 0x%llx\n", (unsigned long long)st->mzxid);
	print_time(out, "mtime", st->mtime);
	fprintf(out, "pZxid = 0x%llx\n", (unsigned long long)st->pzxid);
	fprintf(out, "cversion = %d\n", st->cversion);
	fprintf(out, "dataVersion = %d\n", st->version);
	fprintf(out, "aclVersion = %d\n", st->aversion);
	fprintf(out, "ephemeralOwner = 0x%llx\n", (unsigned long long)st->ephemeral_owner);
	fprintf(out, "dataLength = %d\n", st->data_length);
	fprintf(out, "numChildren = %d\n", st->num_children);
}

void zkcli_perms_string(int32_t perms, char out[6])
{
	size_t n = 0;
	if (perms & ZK_PERM_CREATE) {
		out[n++] = 'c';
	}
	if (perms & ZK_PERM_DELETE) {
		out[n++] = 'd';
	}
	if (perms & ZK_PERM_READ) {
		out[n++] = 'r';
	}
	if (perms & ZK_PERM_WRITE) {
		out[n++] = 'w';
	}
	if (perms & ZK_PERM_ADMIN) {
		out[n++] = 'a';
	}
	out[n] = '\0';
}

const char *zkcli_event_name(int32_t type)
{
	switch (type) {
	case ZK_EVENT_NONE: return "None";
	case ZK_EVENT_NODE_CREATED: return "NodeCreated";
	case ZK_EVENT_NODE_DELETED: return "NodeDeleted";
	case ZK_EVENT_NODE_DATA_CHANGED: return "NodeDataChanged";
	case ZK_EVENT_NODE_CHILDREN_CHANGED: return "NodeChildrenChanged";
	case ZK_EVENT_DATA_WATCH_REMOVED: return "DataWatchRemoved";
	case ZK_EVENT_CHILD_WATCH_REMOVED: return "ChildWatchRemoved";
	case ZK_EVENT_PERSISTENT_WATCH_REMOVED: return "PersistentWatchRemoved";
	default: return "Unknown";
	}
}

const char *zkcli_state_name(int32_t state)
{
	switch (state) {
	case ZK_STATE_DISCONNECTED: return "Disconnected";
	case ZK_STATE_NO_SYNC_CONNECTED: return "NoSyncConnected";
	case ZK_STATE_SYNC_CONNECTED: return "SyncConnected";
	case ZK_STATE_AUTH_FAILED: return "AuthFailed";
	case ZK_STATE_CONNECTED_READ_ONLY: return "ConnectedReadOnly";
	case ZK_STATE_SASL_AUTHENTICATED: return "SaslAuthenticated";
	case ZK_STATE_EXPIRED: return "Expired";
	case ZK_STATE_CLOSED: return "Closed";
	default: return "Unknown";
	}
}

/* ---- arguments ---- */

static int parse_perms(const char *text, int32_t *perms)
{
	*perms = 0;
	for (const char *p = text; *p != '\0'; p++) {
		switch (*p) {
		case 'r': *perms |= ZK_PERM_READ; break;
		case 'w': *perms |= ZK_PERM_WRITE; break;
		case 'c': *perms |= ZK_PERM_CREATE; break;
		case 'd': *perms |= ZK_PERM_DELETE; break;
		case 'a': *perms |= ZK_PERM_ADMIN; break;
		default: return -1;
		}
	}
	return 0;
}

int zkcli_parse_acl(char *text, struct zk_acl *acl, int max, char *err, size_t err_size)
{
	int count = 0;
	char *save = NULL;
	for (char *item = strtok_r(text, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		char *first = strchr(item, ':');
		char *last = strrchr(item, ':');
		if (first == NULL || first == last) {
			snprintf(err, err_size, "'%s' is not SCHEME:ID:PERMS", item);
			return -1;
		}
		if (count == max) {
			snprintf(err, err_size, "more than %d ACL entries", max);
			return -1;
		}
		*first = '\0';
		*last = '\0';
		int32_t perms;
		if (parse_perms(last + 1, &perms) != 0) {
			snprintf(err, err_size, "bad permissions '%s' (letters of cdrwa)", last + 1);
			return -1;
		}
		acl[count].perms = perms;
		acl[count].id.scheme = zk_bytes_str(item);
		acl[count].id.id = zk_bytes_str(first + 1);
		count++;
	}
	if (count == 0) {
		snprintf(err, err_size, "empty ACL");
		return -1;
	}
	return count;
}

/* ---- tree walks ---- */

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void zkcli_free_names(char **names, int32_t count)
{
	for (int32_t i = 0; i < count; i++) {
		free(names[i]);
	}
	free(names);
}

int32_t zkcli_children(struct kc_client *c, const char *path, bool watch, char ***names,
		       int32_t *count, struct zk_stat *stat)
{
	struct zk_str_vec kids;
	*names = NULL;
	*count = 0;
	int32_t rc = kc_get_children(c, path, watch, &kids, stat);
	if (rc != ZK_OK) {
		return rc;
	}
	char **out = calloc((size_t)kids.count + 1, sizeof(*out));
	if (out == NULL) {
		return ZK_SYSTEM_ERROR;
	}
	struct zk_str_iter it;
	struct zk_bytes name;
	int32_t n = 0;
	zk_str_iter_init(&it, kids);
	while (zk_str_iter_next(&it, &name)) {
		out[n] = strndup((const char *)name.data, zk_bytes_len(name));
		if (out[n] == NULL) {
			zkcli_free_names(out, n);
			return ZK_SYSTEM_ERROR;
		}
		n++;
	}
	qsort(out, (size_t)n, sizeof(*out), compare_names);
	*names = out;
	*count = n;
	return ZK_OK;
}

static char *child_path(const char *parent, const char *name)
{
	size_t plen = strlen(parent);
	size_t nlen = strlen(name);
	bool root = plen == 1 && parent[0] == '/';
	char *out = malloc(plen + nlen + 2);
	if (out != NULL) {
		memcpy(out, parent, root ? 0 : plen);
		size_t at = root ? 0 : plen;
		out[at] = '/';
		memcpy(out + at + 1, name, nlen + 1);
	}
	return out;
}

static void note_failed(char *failed_path, size_t failed_size, const char *path)
{
	if (failed_path != NULL && failed_size > 0) {
		snprintf(failed_path, failed_size, "%s", path);
	}
}

int32_t zkcli_delete_recursive(struct kc_client *c, const char *path, char *failed_path,
			       size_t failed_size)
{
	char **names;
	int32_t count;
	int32_t rc = zkcli_children(c, path, false, &names, &count, NULL);
	if (rc != ZK_OK) {
		note_failed(failed_path, failed_size, path);
		return rc;
	}
	for (int32_t i = 0; i < count && rc == ZK_OK; i++) {
		char *child = child_path(path, names[i]);
		if (child == NULL) {
			rc = ZK_SYSTEM_ERROR;
			break;
		}
		rc = zkcli_delete_recursive(c, child, failed_path, failed_size);
		/* Gone meanwhile (an ephemeral, a concurrent delete): fine. */
		if (rc == ZK_NO_NODE) {
			rc = ZK_OK;
		}
		free(child);
	}
	zkcli_free_names(names, count);
	if (rc != ZK_OK) {
		return rc;
	}
	if (strcmp(path, "/") == 0 || strcmp(path, "/zookeeper") == 0) {
		return ZK_OK; /* the root and /zookeeper stay, as in zkCli */
	}
	rc = kc_delete(c, path, -1);
	if (rc != ZK_OK) {
		note_failed(failed_path, failed_size, path);
	}
	return rc;
}

static int32_t list_walk(struct kc_client *c, const char *path, bool top, FILE *out,
			 char *failed_path, size_t failed_size)
{
	char **names;
	int32_t count;
	int32_t rc = zkcli_children(c, path, false, &names, &count, NULL);
	if (rc == ZK_NO_NODE && !top) {
		return ZK_OK; /* deleted while we walked */
	}
	if (rc != ZK_OK) {
		note_failed(failed_path, failed_size, path);
		return rc;
	}
	fprintf(out, "%s\n", path);
	for (int32_t i = 0; i < count && rc == ZK_OK; i++) {
		char *child = child_path(path, names[i]);
		if (child == NULL) {
			rc = ZK_SYSTEM_ERROR;
			break;
		}
		rc = list_walk(c, child, false, out, failed_path, failed_size);
		free(child);
	}
	zkcli_free_names(names, count);
	return rc;
}

int32_t zkcli_list_recursive(struct kc_client *c, const char *path, FILE *out,
			     char *failed_path, size_t failed_size)
{
	return list_walk(c, path, true, out, failed_path, failed_size);
}
