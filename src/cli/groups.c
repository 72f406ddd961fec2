/*
 * groups.c — `keel groups`: consumer groups from the command line, through
 * the brokers (the group APIs), like Kafka's kafka-consumer-groups.sh.
 *
 *	keel groups list --brokers HOST:PORT[,...]
 *	keel groups describe GROUP --brokers ...
 *	keel groups delete GROUP --brokers ...
 *	keel groups reset-offsets GROUP --topic T
 *	            (--to-earliest | --to-latest | --to-offset N) --brokers ...
 *
 * list asks every broker (ListGroups v4) and prints "GROUP STATE" lines.
 * describe finds the coordinator (FindCoordinator v1), reads the group
 * (DescribeGroups v1, the members' assignments decoded from the consumer
 * protocol) and its committed offsets (OffsetFetch v3, all partitions),
 * then each partition's log end from its leader (ListOffsets v1), and
 * prints one line per partition: committed offset, log end, lag, and the
 * member it is assigned to. delete is DeleteGroups v1 (the group must be
 * empty). reset-offsets commits new offsets for every partition of a topic
 * (OffsetCommit v2 outside the group protocol) — only while the group has
 * no members, as Kafka's tool insists; --to-offset is clamped to each
 * partition's [log start, log end].
 *
 * Exit status: 0 done, 1 a Kafka error or no connection, 2 bad usage.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/buf.h"
#include "cli/cli.h"
#include "cli/kafka_conn.h"

#define MAX_ROWS 100000

struct gargs {
	const char *cmd, *brokers, *group, *topic;
	int reset; /* 0 none, 1 earliest, 2 latest, 3 offset */
	int64_t to_offset;
};

struct endpoint {
	int32_t node_id;
	char hostport[300];
};

struct row {
	char *topic;
	int32_t partition;
	int64_t committed;  /* -1: none */
	int64_t log_end;    /* -1: unknown */
	const char *member; /* index into members: its id (not owned) */
	const char *client_id;
	const char *host;
};

struct member {
	char *member_id, *client_id, *host;
};

struct view {
	char state[64], protocol[256];
	struct member *members;
	int32_t member_count;
	struct row *rows;
	size_t row_count;
	struct endpoint *brokers;
	int32_t broker_count;
};

static char *dup_str(struct kafka_str s)
{
	size_t n = s.len > 0 ? (size_t)s.len : 0;
	char *c = malloc(n + 1);
	if (c != NULL) {
		memcpy(c, s.ptr, n);
		c[n] = '\0';
	}
	return c;
}

static bool reconnect(struct kclient *k, const char *hostport)
{
	int fd = kclient_dial(k->who, hostport);
	if (fd < 0) {
		return false;
	}
	if (k->fd >= 0) {
		close(k->fd);
	}
	k->fd = fd;
	return true;
}

static bool first_broker(struct kclient *k, const struct gargs *a)
{
	char first[300];
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(a->brokers, ","), a->brokers);
	return reconnect(k, first);
}

/* Metadata v1 for one topic (or all when topic is NULL): the brokers, and
 * the topic's partitions' leaders into *leaders (malloc'd, by index). */
static bool metadata(struct kclient *k, const char *topic, struct view *v, int32_t **leaders,
                     int32_t *partition_count)
{
	struct kafka_metadata_request_topic t = {{{0}}, kafka_str(topic)};
	struct kafka_metadata_request rq = {topic != NULL ? &t : NULL, topic != NULL ? 1 : -1,
	                                    false, false, false};
	struct kafka_metadata_response md;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_METADATA, 1, &rq, &md)) {
		return false;
	}
	free(v->brokers);
	v->brokers = calloc((size_t)KEEL_MAX(md.broker_count, 1), sizeof(*v->brokers));
	v->broker_count = 0;
	for (int32_t i = 0; v->brokers != NULL && i < md.broker_count; i++) {
		struct endpoint *e = &v->brokers[v->broker_count++];
		e->node_id = md.brokers[i].node_id;
		snprintf(e->hostport, sizeof(e->hostport), "%.*s:%d", (int)md.brokers[i].host.len,
		         md.brokers[i].host.ptr, md.brokers[i].port);
	}
	if (topic == NULL) {
		return v->brokers != NULL;
	}
	if (md.topic_count != 1 || md.topics[0].error_code != KAFKA_NONE) {
		fprintf(stderr, "%s: topic '%s': %s\n", k->who, topic,
		        kafka_error_name(md.topic_count == 1 ? md.topics[0].error_code
		                                             : KAFKA_UNKNOWN_SERVER_ERROR));
		return false;
	}
	int32_t n = md.topics[0].partition_count;
	*leaders = calloc((size_t)KEEL_MAX(n, 1), sizeof(**leaders));
	if (*leaders == NULL) {
		return false;
	}
	for (int32_t i = 0; i < n; i++) {
		int32_t idx = md.topics[0].partitions[i].partition_index;
		if (idx >= 0 && idx < n) {
			(*leaders)[idx] = md.topics[0].partitions[i].leader_id;
		}
	}
	*partition_count = n;
	return true;
}

static const char *endpoint_of(const struct view *v, int32_t node_id)
{
	for (int32_t i = 0; i < v->broker_count; i++) {
		if (v->brokers[i].node_id == node_id) {
			return v->brokers[i].hostport;
		}
	}
	return NULL;
}

/* Moves the connection to the group's coordinator. */
static bool to_coordinator(struct kclient *k, const struct gargs *a)
{
	if (!first_broker(k, a)) {
		return false;
	}
	for (int attempt = 0; attempt < 50; attempt++) {
		struct kafka_find_coordinator_request rq = {
		        kafka_str(a->group), KAFKA_COORDINATOR_GROUP, {NULL, 0}};
		struct kafka_find_coordinator_response rs;
		keel_arena_reset(&k->arena);
		if (!kclient_call(k, KAFKA_API_FIND_COORDINATOR, 1, &rq, &rs)) {
			return false;
		}
		if (rs.error_code == KAFKA_NONE) {
			char hp[300];
			snprintf(hp, sizeof(hp), "%.*s:%d", (int)rs.host.len, rs.host.ptr, rs.port);
			return reconnect(k, hp);
		}
		if (rs.error_code != KAFKA_COORDINATOR_NOT_AVAILABLE &&
		    rs.error_code != KAFKA_COORDINATOR_LOAD_IN_PROGRESS) {
			fprintf(stderr, "%s: no coordinator for group '%s': %s\n", k->who, a->group,
			        kafka_error_name(rs.error_code));
			return false;
		}
		usleep(200 * 1000); /* the offsets topic is being created or loaded */
	}
	fprintf(stderr, "%s: no coordinator for group '%s' yet\n", k->who, a->group);
	return false;
}

/* The partitions of a consumer-protocol assignment, as rows for `m`. */
static void assignment_rows(struct view *v, const struct kafka_bytes *b, const struct member *m)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, b->ptr, b->len > 0 ? (size_t)b->len : 0);
	if (b->len < 6) {
		return;
	}
	(void)keel_rbuf_u16(&r); /* version */
	int32_t topics = keel_rbuf_i32(&r);
	for (int32_t t = 0; t < topics && keel_rbuf_ok(&r); t++) {
		int16_t len = (int16_t)keel_rbuf_u16(&r);
		const uint8_t *name = len >= 0 ? keel_rbuf_bytes(&r, (size_t)len) : NULL;
		int32_t n = keel_rbuf_i32(&r);
		if (name == NULL || !keel_rbuf_ok(&r) || n < 0 ||
		    (size_t)n > keel_rbuf_remaining(&r) / 4) {
			return;
		}
		for (int32_t i = 0; i < n && v->row_count < MAX_ROWS; i++) {
			struct row *rw = &v->rows[v->row_count++];
			memset(rw, 0, sizeof(*rw));
			rw->topic = dup_str((struct kafka_str){(const char *)name, len});
			rw->partition = keel_rbuf_i32(&r);
			rw->committed = -1;
			rw->log_end = -1;
			rw->member = m->member_id;
			rw->client_id = m->client_id;
			rw->host = m->host;
		}
	}
}

static struct row *find_row(struct view *v, struct kafka_str topic, int32_t partition)
{
	for (size_t i = 0; i < v->row_count; i++) {
		if (v->rows[i].partition == partition && kafka_str_eq(topic, v->rows[i].topic)) {
			return &v->rows[i];
		}
	}
	return NULL;
}

/* DescribeGroups and OffsetFetch at the coordinator. */
static bool read_group(struct kclient *k, const struct gargs *a, struct view *v)
{
	struct kafka_str name = kafka_str(a->group);
	struct kafka_describe_groups_request drq = {{&name, 1}, false};
	struct kafka_describe_groups_response drs;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_DESCRIBE_GROUPS, 1, &drq, &drs)) {
		return false;
	}
	if (drs.group_count != 1 || drs.groups[0].error_code != KAFKA_NONE) {
		fprintf(stderr, "%s: group '%s': %s\n", k->who, a->group,
		        kafka_error_name(drs.group_count == 1 ? drs.groups[0].error_code
		                                              : KAFKA_UNKNOWN_SERVER_ERROR));
		return false;
	}
	const struct kafka_described_group *g = &drs.groups[0];
	snprintf(v->state, sizeof(v->state), "%.*s", (int)g->group_state.len, g->group_state.ptr);
	snprintf(v->protocol, sizeof(v->protocol), "%.*s", (int)KEEL_MAX(g->protocol_data.len, 0),
	         g->protocol_data.ptr);
	v->rows = calloc(MAX_ROWS, sizeof(*v->rows));
	v->members = calloc((size_t)KEEL_MAX(g->member_count, 1), sizeof(*v->members));
	if (v->rows == NULL || v->members == NULL) {
		return false;
	}
	for (int32_t i = 0; i < g->member_count; i++) {
		struct member *m = &v->members[v->member_count++];
		m->member_id = dup_str(g->members[i].member_id);
		m->client_id = dup_str(g->members[i].client_id);
		m->host = dup_str(g->members[i].client_host);
		assignment_rows(v, &g->members[i].member_assignment, m);
	}
	struct kafka_offset_fetch_request frq = {0};
	frq.group_id = name;
	frq.topics = NULL;
	frq.topic_count = -1; /* all */
	struct kafka_offset_fetch_response frs;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_OFFSET_FETCH, 3, &frq, &frs)) {
		return false;
	}
	if (frs.error_code != KAFKA_NONE) {
		fprintf(stderr, "%s: offsets of group '%s': %s\n", k->who, a->group,
		        kafka_error_name(frs.error_code));
		return false;
	}
	for (int32_t t = 0; t < frs.topic_count; t++) {
		const struct kafka_offset_fetch_topic_response *ft = &frs.topics[t];
		for (int32_t i = 0; i < ft->partition_count; i++) {
			const struct kafka_offset_fetch_partition *fp = &ft->partitions[i];
			struct row *rw = find_row(v, ft->name, fp->partition_index);
			if (rw == NULL && v->row_count < MAX_ROWS) {
				rw = &v->rows[v->row_count++];
				memset(rw, 0, sizeof(*rw));
				rw->topic = dup_str(ft->name);
				rw->partition = fp->partition_index;
				rw->log_end = -1;
			}
			if (rw != NULL) {
				rw->committed = fp->committed_offset;
			}
		}
	}
	return true;
}

/* ListOffsets v1 at the partition's leader: earliest or latest. */
static int64_t list_offset(struct kclient *k, struct view *v, const char *topic, int32_t partition,
                           int32_t leader, int64_t which)
{
	const char *hp = endpoint_of(v, leader);
	if (hp == NULL || !reconnect(k, hp)) {
		return -1;
	}
	struct kafka_list_offsets_partition lp = {partition, -1, which};
	struct kafka_list_offsets_topic lt = {kafka_str(topic), &lp, 1};
	struct kafka_list_offsets_request rq = {-1, 0, &lt, 1};
	struct kafka_list_offsets_response rs;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_LIST_OFFSETS, 1, &rq, &rs) || rs.topic_count != 1 ||
	    rs.topics[0].partition_count != 1 ||
	    rs.topics[0].partitions[0].error_code != KAFKA_NONE) {
		return -1;
	}
	return rs.topics[0].partitions[0].offset;
}

static int compare_rows(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	int c = strcmp(a->topic, b->topic);
	return c != 0 ? c : (a->partition > b->partition) - (a->partition < b->partition);
}

static void free_view(struct view *v)
{
	for (size_t i = 0; i < v->row_count; i++) {
		free(v->rows[i].topic);
	}
	for (int32_t i = 0; i < v->member_count; i++) {
		free(v->members[i].member_id);
		free(v->members[i].client_id);
		free(v->members[i].host);
	}
	free(v->rows);
	free(v->members);
	free(v->brokers);
}

static int describe(struct kclient *k, const struct gargs *a)
{
	struct view v = {0};
	int status = 1;
	if (!to_coordinator(k, a) || !read_group(k, a, &v) || !first_broker(k, a) ||
	    !metadata(k, NULL, &v, NULL, NULL)) {
		goto out;
	}
	qsort(v.rows, v.row_count, sizeof(*v.rows), compare_rows);
	for (size_t i = 0; i < v.row_count; i++) {
		struct row *rw = &v.rows[i];
		int32_t *leaders = NULL, n = 0;
		if (first_broker(k, a) && metadata(k, rw->topic, &v, &leaders, &n) &&
		    rw->partition >= 0 && rw->partition < n) {
			rw->log_end =
			        list_offset(k, &v, rw->topic, rw->partition, leaders[rw->partition],
			                    KAFKA_LIST_OFFSETS_LATEST);
		}
		free(leaders);
	}
	printf("Group %s is %s with %d member%s", a->group, v.state, v.member_count,
	       v.member_count == 1 ? "" : "s");
	printf(v.protocol[0] != '\0' ? " (assignor %s)\n\n" : "%s\n\n", v.protocol);
	printf("%-20s %-24s %9s %14s %14s %8s  %-36s %-16s %s\n", "GROUP", "TOPIC", "PARTITION",
	       "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID");
	for (size_t i = 0; i < v.row_count; i++) {
		const struct row *rw = &v.rows[i];
		char cur[24] = "-", end[24] = "-", lag[24] = "-";
		if (rw->committed >= 0) {
			snprintf(cur, sizeof(cur), "%" PRId64, rw->committed);
		}
		if (rw->log_end >= 0) {
			snprintf(end, sizeof(end), "%" PRId64, rw->log_end);
		}
		if (rw->log_end >= 0) {
			int64_t from = rw->committed >= 0 ? rw->committed : 0;
			snprintf(lag, sizeof(lag), "%" PRId64,
			         KEEL_MAX(rw->log_end - from, (int64_t)0));
		}
		printf("%-20s %-24s %9d %14s %14s %8s  %-36s %-16s %s\n", a->group, rw->topic,
		       rw->partition, cur, end, lag, rw->member != NULL ? rw->member : "-",
		       rw->host != NULL ? rw->host : "-",
		       rw->client_id != NULL ? rw->client_id : "-");
	}
	status = 0;
out:
	free_view(&v);
	return status;
}

static int list(struct kclient *k, const struct gargs *a)
{
	struct view v = {0};
	int status = 1;
	if (!first_broker(k, a) || !metadata(k, NULL, &v, NULL, NULL)) {
		goto out;
	}
	status = 0;
	for (int32_t b = 0; b < v.broker_count; b++) {
		struct kafka_list_groups_request rq = {{NULL, 0}};
		struct kafka_list_groups_response rs;
		keel_arena_reset(&k->arena);
		if (!reconnect(k, v.brokers[b].hostport) ||
		    !kclient_call(k, KAFKA_API_LIST_GROUPS, 4, &rq, &rs)) {
			status = 1;
			continue;
		}
		for (int32_t i = 0; i < rs.group_count; i++) {
			printf("%.*s\t%.*s\n", (int)rs.groups[i].group_id.len,
			       rs.groups[i].group_id.ptr,
			       (int)KEEL_MAX(rs.groups[i].group_state.len, 0),
			       rs.groups[i].group_state.ptr);
		}
	}
out:
	free_view(&v);
	return status;
}

static int delete_group(struct kclient *k, const struct gargs *a)
{
	if (!to_coordinator(k, a)) {
		return 1;
	}
	struct kafka_str name = kafka_str(a->group);
	struct kafka_delete_groups_request rq = {{&name, 1}};
	struct kafka_delete_groups_response rs;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_DELETE_GROUPS, 1, &rq, &rs)) {
		return 1;
	}
	int16_t err = rs.result_count == 1 ? rs.results[0].error_code : KAFKA_UNKNOWN_SERVER_ERROR;
	if (err != KAFKA_NONE) {
		fprintf(stderr, "%s: group '%s': %s\n", k->who, a->group, kafka_error_name(err));
		return 1;
	}
	printf("Deleted group %s\n", a->group);
	return 0;
}

static int reset_offsets(struct kclient *k, const struct gargs *a)
{
	struct view v = {0};
	int32_t *leaders = NULL, n = 0;
	int64_t *target = NULL;
	int status = 1;
	if (!to_coordinator(k, a) || !read_group(k, a, &v)) {
		goto out;
	}
	if (strcmp(v.state, "Empty") != 0 && strcmp(v.state, "Dead") != 0) {
		fprintf(stderr,
		        "%s: group '%s' is %s: stop its consumers first (offsets can be "
		        "reset only while it has no members)\n",
		        k->who, a->group, v.state);
		goto out;
	}
	if (!first_broker(k, a) || !metadata(k, a->topic, &v, &leaders, &n) ||
	    (target = calloc((size_t)KEEL_MAX(n, 1), sizeof(*target))) == NULL) {
		goto out;
	}
	for (int32_t p = 0; p < n; p++) {
		int64_t lo =
		        list_offset(k, &v, a->topic, p, leaders[p], KAFKA_LIST_OFFSETS_EARLIEST);
		int64_t hi = list_offset(k, &v, a->topic, p, leaders[p], KAFKA_LIST_OFFSETS_LATEST);
		if (lo < 0 || hi < 0) {
			fprintf(stderr, "%s: %s-%d: no offsets from its leader\n", k->who, a->topic,
			        p);
			goto out;
		}
		target[p] = a->reset == 1   ? lo
		            : a->reset == 2 ? hi
		                            : KEEL_MAX(lo, KEEL_MIN(a->to_offset, hi));
	}
	struct kafka_offset_commit_partition *cp = calloc((size_t)KEEL_MAX(n, 1), sizeof(*cp));
	if (cp == NULL) {
		goto out;
	}
	for (int32_t p = 0; p < n; p++) {
		cp[p] = (struct kafka_offset_commit_partition){p, target[p], -1, -1, kafka_str("")};
	}
	struct kafka_offset_commit_topic ct = {kafka_str(a->topic), cp, n};
	struct kafka_offset_commit_request rq = {
	        kafka_str(a->group), -1, kafka_str(""), KAFKA_STR_NULL, -1, &ct, 1};
	struct kafka_offset_commit_response rs;
	keel_arena_reset(&k->arena);
	bool ok = to_coordinator(k, a) && kclient_call(k, KAFKA_API_OFFSET_COMMIT, 2, &rq, &rs);
	free(cp);
	if (!ok) {
		goto out;
	}
	status = 0;
	printf("%-20s %-24s %9s %14s\n", "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET");
	for (int32_t t = 0; t < rs.topic_count; t++) {
		for (int32_t i = 0; i < rs.topics[t].partition_count; i++) {
			const struct kafka_partition_error *pe = &rs.topics[t].partitions[i];
			if (pe->error_code != KAFKA_NONE) {
				fprintf(stderr, "%s: %s-%d: %s\n", k->who, a->topic,
				        pe->partition_index, kafka_error_name(pe->error_code));
				status = 1;
				continue;
			}
			printf("%-20s %-24s %9d %14" PRId64 "\n", a->group, a->topic,
			       pe->partition_index, target[pe->partition_index]);
		}
	}
out:
	free(leaders);
	free(target);
	free_view(&v);
	return status;
}

/* ---- options ---- */

static int usage(FILE *out)
{
	fprintf(out,
	        "usage: keel groups list --brokers HOST:PORT[,...]\n"
	        "       keel groups describe GROUP --brokers ...\n"
	        "       keel groups delete GROUP --brokers ...\n"
	        "       keel groups reset-offsets GROUP --topic T\n"
	        "                   (--to-earliest | --to-latest | --to-offset N) --brokers ...\n\n"
	        "Consumer groups, through the brokers. describe shows each partition's committed\n"
	        "offset, log end offset and lag, and the member it is assigned to; delete and\n"
	        "reset-offsets need a group with no members.\n");
	return out == stdout ? 0 : 2;
}

static bool parse(struct gargs *a, int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--to-earliest") == 0 || strcmp(arg, "--to-latest") == 0) {
			a->reset = arg[5] == 'e' ? 1 : 2;
			continue;
		}
		if (arg[0] != '-') {
			if (a->group != NULL) {
				fprintf(stderr, "keel groups: unexpected '%s'\n", arg);
				return false;
			}
			a->group = arg;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "keel groups: '%s' needs a value\n", arg);
			return false;
		}
		const char *v = argv[++i];
		char *end = NULL;
		if (strcmp(arg, "--brokers") == 0) {
			a->brokers = v;
		} else if (strcmp(arg, "--topic") == 0) {
			a->topic = v;
		} else if (strcmp(arg, "--to-offset") == 0 && (a->to_offset = strtoll(v, &end, 10),
		                                               *end == '\0' && a->to_offset >= 0)) {
			a->reset = 3;
		} else {
			fprintf(stderr, "keel groups: bad option '%s %s'\n", arg, v);
			return false;
		}
	}
	return true;
}

int cli_groups(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		return usage(argc < 2 ? stderr : stdout);
	}
	struct gargs a = {argv[1], NULL, NULL, NULL, 0, 0};
	if (!parse(&a, argc, argv)) {
		return usage(stderr);
	}
	bool is_list = strcmp(a.cmd, "list") == 0;
	bool is_reset = strcmp(a.cmd, "reset-offsets") == 0;
	if (!is_list && strcmp(a.cmd, "describe") != 0 && strcmp(a.cmd, "delete") != 0 &&
	    !is_reset) {
		fprintf(stderr, "keel groups: unknown command '%s'\n", a.cmd);
		return usage(stderr);
	}
	if (a.brokers == NULL || (is_list ? a.group != NULL : a.group == NULL)) {
		fprintf(stderr, "keel groups %s: %s\n", a.cmd,
		        a.brokers == NULL ? "--brokers is required"
		        : is_list         ? "takes no group"
		                          : "which group?");
		return usage(stderr);
	}
	if (is_reset && (a.topic == NULL || a.reset == 0)) {
		fprintf(stderr, "keel groups reset-offsets: --topic and one of --to-earliest, "
		                "--to-latest, --to-offset N are required\n");
		return usage(stderr);
	}
	signal(SIGPIPE, SIG_IGN);
	char who[48];
	snprintf(who, sizeof(who), "keel groups %s", a.cmd);
	struct kclient k = {who, -1, 0, {0}, {0}, NULL, 0};
	keel_arena_init(&k.arena, 64 * 1024);
	kafka_limits_default(&k.limits);
	int status = is_list                          ? list(&k, &a)
	             : is_reset                       ? reset_offsets(&k, &a)
	             : strcmp(a.cmd, "describe") == 0 ? describe(&k, &a)
	                                              : delete_group(&k, &a);
	if (k.fd >= 0) {
		close(k.fd);
	}
	keel_arena_close(&k.arena);
	free(k.frame);
	return status;
}
