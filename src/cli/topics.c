/*
 * topics.c — `keel topics ...` and `keel brokers`: the cluster metadata
 * from the command line, through the keel extension opcodes
 * (docs/controller.md) on a ZooKeeper session.
 *
 *	keel topics create NAME --partitions P --replication-factor R
 *	                   [--config KEY=VALUE]... --servers HOSTS
 *	keel topics create NAME --replica-assignment B:B,B:B... [--config ...]
 *	                   --servers HOSTS   (row i: partition i's replicas,
 *	                   the first the preferred leader; kafka-topics.sh's)
 *	keel topics alter NAME --partitions N [--replica-assignment B:B,B:B...]
 *	                  --servers HOSTS
 *	keel topics delete NAME --servers HOSTS
 *	keel topics list --servers HOSTS
 *	keel topics describe [PATTERN] [--under-replicated-partitions]
 *	                   [--unavailable-partitions] [--under-min-isr-partitions]
 *	                   --servers HOSTS
 *	keel brokers --servers HOSTS
 *	keel brokers unregister ID --servers HOSTS
 *
 * `--` ends the options, so a topic whose name starts with '-' is given as
 * `keel topics create -- -name ...`. PATTERN is a topic name or a shell
 * glob (`sensor-*`). The filters keep the partitions that are
 * under-replicated (ISR smaller than the replicas), unavailable (no leader,
 * or a leader that is fenced) or under min ISR (ISR smaller than the
 * topic's, else the cluster's, min.insync.replicas, default 1); given
 * several, a partition is shown when any of them holds, and only topics
 * with such partitions are printed, as kafka-topics.sh does.
 *
 * Controller requests that meet NOT_CONTROLLER (an election in progress)
 * are retried for --timeout-ms. Reads (list, describe, brokers) sync first,
 * so they see every change committed before the command started.
 *
 * Output: `describe` prints, per topic, Kafka's topic line
 * ("Topic: T\tTopicId: ...\tPartitionCount: 6\tReplicationFactor: 2\tConfigs: ")
 * and then one line per partition
 * ("\tTopic: T\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2\tLeaderEpoch: 0",
 * indented by a tab as kafka-topics.sh indents them;
 * leader "none" when offline); `brokers` one line per broker
 * ("Broker: 1\tEpoch: 5\tRack: r1\tState: active").
 *
 * Exit status: 0 success, 1 the cluster refused or could not be reached,
 * 2 usage.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/cli.h"
#include "cli/meta_cli.h"
#include "meta/fmt.h"
#include "meta/format.h"
#include "meta/proto.h"

#define MAX_CONFIGS 64

struct topics_args {
	const char *action;
	const char *name;
	const char *servers;
	int32_t partitions;
	int16_t replication_factor;
	struct meta_config_kv configs[MAX_CONFIGS];
	uint32_t config_count;
	int32_t timeout_ms;
	bool under_replicated;
	bool unavailable;
	bool under_min_isr;
	char *replica_assignment; /* alter: "1:2,2:3" (one row per new partition) */
};

static bool any_filter(const struct topics_args *a)
{
	return a->under_replicated || a->unavailable || a->under_min_isr;
}

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel topics create NAME --partitions P --replication-factor R\n"
		"                   [--config KEY=VALUE]... --servers HOSTS\n"
		"       keel topics create NAME --replica-assignment B:B,B:B... [--config ...]\n"
		"                   --servers HOSTS\n"
		"       keel topics alter NAME --partitions N [--replica-assignment B:B,B:B...]\n"
		"                   --servers HOSTS\n"
		"       keel topics delete NAME --servers HOSTS\n"
		"       keel topics list --servers HOSTS\n"
		"       keel topics describe [PATTERN] [--under-replicated-partitions]\n"
		"                   [--unavailable-partitions] [--under-min-isr-partitions]\n"
		"                   --servers HOSTS\n"
		"       keel brokers --servers HOSTS\n"
		"       keel brokers unregister ID --servers HOSTS [CREDENTIAL]\n\n"
		"CREDENTIAL (needed when the servers have a secret): --cluster-secret-file\n"
		"FILE (the servers' secret) or --auth super:PASSWORD.\n"
		"HOSTS is a ZooKeeper connect string (host:port,...). --timeout-ms MS bounds\n"
		"the retries while the cluster elects a controller (default 15000).\n"
		"PATTERN is a topic name or a glob (sensor-*). `--` ends the options, so\n"
		"a name may start with '-'.\n");
	return out == stdout ? 0 : 2;
}

/* A session, or NULL (message printed). */
static struct kc_client *open_session(const char *who, const char *servers, int32_t timeout_ms,
				      bool *initialized)
{
	static struct kc_client client;
	if (meta_cli_open(&client, initialized, who, servers, 10000, timeout_ms) != ZK_OK) {
		if (*initialized) {
			kc_close(&client);
			*initialized = false;
		}
		return NULL;
	}
	return &client;
}

/* ---- reads ---- */

/* The value of `key` among a topic's configs, or NULL. */
static const char *topic_config(const struct meta_describe_topic *t, const char *key)
{
	for (uint32_t i = 0; i < t->config_count; i++) {
		if (strcmp(t->configs[i].key, key) == 0) {
			return t->configs[i].value;
		}
	}
	return NULL;
}

static bool broker_fenced(const struct meta_describe_cluster_response *rs, int32_t id)
{
	for (uint32_t i = 0; i < rs->broker_count; i++) {
		if (rs->brokers[i].id == id) {
			return rs->brokers[i].fenced;
		}
	}
	return true; /* not registered: not serving */
}

/* Whether partition p passes the filters of `a` (all pass without any). */
static bool partition_shown(const struct topics_args *a, const struct meta_describe_cluster_response *rs,
			    const struct meta_describe_partition *p, long min_isr)
{
	if (!any_filter(a)) {
		return true;
	}
	/* As Kafka counts it: replicas still being added are not missing. */
	if (a->under_replicated && p->isr_count < p->replica_count - p->adding_count) {
		return true;
	}
	if (a->unavailable && (p->leader == META_NO_LEADER || broker_fenced(rs, p->leader))) {
		return true;
	}
	return a->under_min_isr && (long)p->isr_count < min_isr;
}

static long min_isr_of(const struct meta_describe_topic *t)
{
	const char *v = topic_config(t, "min.insync.replicas");
	long n = v != NULL ? strtol(v, NULL, 10) : 1;
	return n >= 1 ? n : 1;
}

static void print_topic_line(const struct meta_describe_topic *t)
{
	char id[META_UUID_TEXT_LEN + 1];
	struct meta_fmt f;
	meta_fmt_init(&f, id, sizeof(id));
	meta_fmt_uuid(&f, t->topic_id);
	/* As kafka-topics.sh counts it: replicas a reassignment removes do not count. */
	uint32_t rf = t->partition_count > 0
			      ? t->partitions[0].replica_count - t->partitions[0].removing_count
			      : 0;
	printf("Topic: %s\tTopicId: %s\tPartitionCount: %u\tReplicationFactor: %u\tConfigs: ",
	       t->name, id, t->partition_count, rf);
	for (uint32_t i = 0; i < t->config_count; i++) {
		printf("%s%s=%s", i > 0 ? "," : "", t->configs[i].key,
		       t->configs[i].value != NULL ? t->configs[i].value : "");
	}
	printf("\n");
}

static void print_partition_line(const struct meta_describe_topic *t,
				 const struct meta_describe_partition *p)
{
	char line[1024];
	struct meta_fmt f;
	meta_fmt_init(&f, line, sizeof(line));
	meta_format_describe_partition(&f, t->name, p->partition_id, p->leader, p->replicas,
				       p->replica_count, p->isr, p->isr_count, p->leader_epoch);
	printf("\t%s%s", line,
	       p->leader_recovery_state == META_RECOVERING ? "\tLeaderRecoveryState: RECOVERING" : "");
	if (p->adding_count > 0 || p->removing_count > 0) {
		/* An ongoing reassignment, in kafka-topics.sh's words. */
		printf("\tAdding Replicas: ");
		for (uint32_t i = 0; i < p->adding_count; i++) {
			printf("%s%d", i > 0 ? "," : "", p->adding[i]);
		}
		printf("\tRemoving Replicas: ");
		for (uint32_t i = 0; i < p->removing_count; i++) {
			printf("%s%d", i > 0 ? "," : "", p->removing[i]);
		}
	}
	printf("\n");
}

/* Prints a topic and those of its partitions the filters keep; with
 * filters, a topic none of whose partitions is kept is left out. */
static void print_topic(const struct topics_args *a, const struct meta_describe_cluster_response *rs,
			const struct meta_describe_topic *t)
{
	long min_isr = min_isr_of(t);
	bool header = !any_filter(a);
	if (header) {
		print_topic_line(t);
	}
	for (uint32_t i = 0; i < t->partition_count; i++) {
		const struct meta_describe_partition *p = &t->partitions[i];
		if (partition_shown(a, rs, p, min_isr)) {
			print_partition_line(t, p);
		}
	}
}

/* Where Kafka clients reach each broker (the leaders above among them). */
static void print_brokers(const struct meta_describe_cluster_response *rs)
{
	printf("Brokers:\n");
	for (uint32_t i = 0; i < rs->broker_count; i++) {
		const struct meta_describe_broker *b = &rs->brokers[i];
		printf("\tBroker: %d\tEndpoint: ", b->id);
		for (uint32_t e = 0; e < b->endpoint_count; e++) {
			printf("%s%s://%s:%u", e > 0 ? "," : "", b->endpoints[e].name,
			       b->endpoints[e].host, b->endpoints[e].port);
		}
		printf("\tRack: %s\tState: %s\n", b->rack != NULL ? b->rack : "none",
		       b->fenced ? "fenced" : b->in_controlled_shutdown ? "shutting-down" : "active");
	}
}

static bool is_pattern(const char *name)
{
	return name != NULL && strpbrk(name, "*?[") != NULL;
}

static int topics_read(struct kc_client *c, const struct topics_args *a)
{
	const char *who = "keel topics";
	struct keel_arena arena;
	keel_arena_init(&arena, 64 * 1024);
	struct meta_describe_cluster_response rs;
	bool list = strcmp(a->action, "list") == 0;
	/* A pattern is matched here, over every topic; a plain name is asked for. */
	const char *ask = list || is_pattern(a->name) ? NULL : a->name;
	int status = meta_cli_describe(c, who, ask, any_filter(a) || !list, true, &arena, &rs);
	uint32_t matched = 0;
	for (uint32_t i = 0; status == 0 && i < rs.topic_count; i++) {
		const struct meta_describe_topic *t = &rs.topics[i];
		if (a->name != NULL && is_pattern(a->name) && fnmatch(a->name, t->name, 0) != 0) {
			continue;
		}
		matched++;
		if (t->error != META_ERR_NONE) {
			fprintf(stderr, "%s: topic '%s': %s\n", who, t->name,
				meta_error_name(t->error));
			status = 1;
		} else if (list) {
			printf("%s\n", t->name);
		} else {
			print_topic(a, &rs, t);
		}
	}
	if (status == 0 && matched == 0 && a->name != NULL && !any_filter(a)) {
		fprintf(stderr, "%s: no topic matches '%s'\n", who, a->name);
		status = 1;
	}
	if (status == 0 && !list && !any_filter(a)) {
		print_brokers(&rs);
	}
	keel_arena_close(&arena);
	return status;
}

/* A whole decimal number in [min, max], or false (a usage error). */
static bool parse_number(const char *option, const char *text, long min, long max, long *out)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "keel topics: %s wants a number from %ld to %ld, not '%s'\n", option,
			min, max, text);
		return false;
	}
	*out = v;
	return true;
}

static bool decode_unregister(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			      int16_t *error)
{
	struct meta_unregister_broker_response *rs = out;
	if (meta_decode_unregister_broker_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->error;
	return true;
}

/* keel brokers unregister ID --servers HOSTS: removes a dead broker's
 * registration (kafka-cluster.sh unregister). A live broker registers again
 * at its next heartbeat, so this is for brokers that are gone for good. */
static int brokers_unregister(int argc, char **argv)
{
	const char *who = "keel brokers unregister";
	const char *servers = NULL;
	long id = -1;
	int32_t timeout_ms = 15000;
	static struct meta_cli_credential cred;
	for (int i = 2; i < argc; i++) {
		long v = 0;
		int took = meta_cli_credential_arg(argc, argv, &i, &cred, who);
		if (took < 0) {
			return 2;
		}
		if (took > 0) {
			continue;
		}
		if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc) {
			servers = argv[++i];
		} else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
			if (!parse_number("--timeout-ms", argv[++i], 1, INT32_MAX, &v)) {
				return usage(stderr);
			}
			timeout_ms = (int32_t)v;
		} else if (id < 0 && argv[i][0] != '-') {
			if (!parse_number("the broker id", argv[i], 0, INT32_MAX, &id)) {
				return usage(stderr);
			}
		} else {
			fprintf(stderr, "%s: unexpected argument '%s'\n", who, argv[i]);
			return usage(stderr);
		}
	}
	if (servers == NULL || id < 0) {
		fprintf(stderr, "%s: a broker id and --servers are required\n", who);
		return usage(stderr);
	}
	bool initialized = false;
	struct kc_client *c = open_session(who, servers, timeout_ms, &initialized);
	if (c == NULL) {
		return 1;
	}
	if (!meta_cli_prove_credential(c, &cred, who)) {
		kc_close(c);
		return 1;
	}
	struct meta_unregister_broker_request rq = {(int32_t)id};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1024);
	meta_encode_unregister_broker_request(&w, &rq);
	struct keel_arena arena;
	keel_arena_init(&arena, 1024);
	struct meta_unregister_broker_response rs;
	int16_t error = 0;
	int status = meta_cli_controller_call(c, who, META_API_UNREGISTER_BROKER, &w, timeout_ms,
					      decode_unregister, &arena, &rs, &error);
	if (status == 0 && error != META_ERR_NONE) {
		fprintf(stderr, "%s: broker %ld: %s%s%s\n", who, id, meta_error_name(error),
			rs.error_message ? ": " : "", rs.error_message ? rs.error_message : "");
		status = 1;
	} else if (status == 0) {
		printf("Unregistered broker %ld.\n", id);
	}
	keel_arena_close(&arena);
	keel_wbuf_free(&w);
	kc_close(c);
	return status;
}

int cli_brokers(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "unregister") == 0) {
		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
				return usage(stdout);
			}
		}
		return brokers_unregister(argc, argv);
	}
	const char *servers = NULL;
	int32_t timeout_ms = 15000;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc) {
			servers = argv[++i];
		} else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
			long v = 0;
			if (!parse_number("--timeout-ms", argv[++i], 1, INT32_MAX, &v)) {
				return usage(stderr);
			}
			timeout_ms = (int32_t)v;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return usage(stdout);
		} else {
			fprintf(stderr, "keel brokers: unexpected argument '%s'\n", argv[i]);
			return usage(stderr);
		}
	}
	if (servers == NULL || timeout_ms <= 0) {
		return usage(stderr);
	}
	bool initialized = false;
	struct kc_client *c = open_session("keel brokers", servers, timeout_ms, &initialized);
	if (c == NULL) {
		return 1;
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 64 * 1024);
	struct meta_describe_cluster_response rs;
	int status = meta_cli_describe(c, "keel brokers", NULL, true, false, &arena, &rs);
	for (uint32_t i = 0; status == 0 && i < rs.broker_count; i++) {
		const struct meta_describe_broker *b = &rs.brokers[i];
		char line[512];
		struct meta_fmt f;
		meta_fmt_init(&f, line, sizeof(line));
		meta_format_broker_line(&f, b->id, b->epoch, b->rack, b->fenced,
					b->in_controlled_shutdown);
		printf("%s\n", line);
	}
	keel_arena_close(&arena);
	kc_close(c);
	return status;
}

/* ---- controller requests ---- */

static bool decode_create(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			  int16_t *error)
{
	struct meta_create_topics_response *rs = out;
	if (meta_decode_create_topics_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->topic_count > 0 ? rs->topics[0].error : META_ERR_INVALID_REQUEST;
	return true;
}

static bool decode_delete(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			  int16_t *error)
{
	struct meta_delete_topics_response *rs = out;
	if (meta_decode_delete_topics_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->result_count > 0 ? rs->results[0].error : META_ERR_INVALID_REQUEST;
	return true;
}

#define MAX_ASSIGNED_PARTITIONS 1024

/* "1:2,2:3" -> rows of broker ids in `ids` (rows x width); false with a
 * message when it is not rows of equal width of numbers. */
static bool parse_assignment(const char *who, const char *topic, char *text, int32_t *ids,
			     const int32_t **rows, uint32_t *sizes, uint32_t *row_count)
{
	uint32_t n = 0, at = 0;
	for (char *save = NULL, *row = strtok_r(text, ",", &save); row != NULL;
	     row = strtok_r(NULL, ",", &save)) {
		if (n == MAX_ASSIGNED_PARTITIONS) {
			fprintf(stderr, "%s: topic '%s': at most %d partitions in an assignment\n",
				who, topic, MAX_ASSIGNED_PARTITIONS);
			return false;
		}
		rows[n] = &ids[at];
		sizes[n] = 0;
		for (char *s2 = NULL, *id = strtok_r(row, ":", &s2); id != NULL;
		     id = strtok_r(NULL, ":", &s2)) {
			long v = 0;
			if (sizes[n] == META_MAX_REPLICAS ||
			    !parse_number("--replica-assignment", id, 0, INT32_MAX, &v)) {
				return false;
			}
			ids[at++] = (int32_t)v;
			sizes[n]++;
		}
		n++;
	}
	*row_count = n;
	return n > 0;
}

static int topics_create(struct kc_client *c, const struct topics_args *a)
{
	const char *who = "keel topics create";
	struct meta_create_topic t = {a->name, a->partitions, a->replication_factor, a->configs,
				      a->config_count, NULL, 0};
	static struct meta_replica_assignment assigned[MAX_ASSIGNED_PARTITIONS];
	if (a->replica_assignment != NULL) {
		static int32_t ids[MAX_ASSIGNED_PARTITIONS * META_MAX_REPLICAS];
		static const int32_t *rows[MAX_ASSIGNED_PARTITIONS];
		static uint32_t sizes[MAX_ASSIGNED_PARTITIONS];
		uint32_t n = 0;
		if (!parse_assignment(who, a->name, a->replica_assignment, ids, rows, sizes, &n)) {
			return 2;
		}
		for (uint32_t i = 0; i < n; i++) {
			assigned[i] = (struct meta_replica_assignment){(int32_t)i, rows[i], sizes[i]};
		}
		t.assignments = assigned;
		t.assignment_count = n;
	}
	struct meta_create_topics_request rq = {&t, 1, false};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1u << 20);
	meta_encode_create_topics_request(&w, &rq);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_create_topics_response rs;
	int16_t error = 0;
	int status = meta_cli_controller_call(c, who, META_API_CREATE_TOPICS, &w, a->timeout_ms,
				     decode_create, &arena, &rs, &error);
	if (status == 0 && error != META_ERR_NONE) {
		const char *msg = rs.topics[0].error_message;
		fprintf(stderr, "%s: topic '%s': %s%s%s\n", who, a->name, meta_error_name(error),
			msg ? ": " : "", msg ? msg : "");
		status = 1;
	} else if (status == 0) {
		printf("Created topic %s.\n", a->name);
	}
	keel_arena_close(&arena);
	keel_wbuf_free(&w);
	return status;
}

static bool decode_create_partitions(const uint8_t *body, size_t size, struct keel_arena *arena,
				     void *out, int16_t *error)
{
	struct meta_create_partitions_response *rs = out;
	if (meta_decode_create_partitions_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->result_count > 0 ? rs->results[0].error : META_ERR_INVALID_REQUEST;
	return true;
}

/* kafka-topics.sh --alter --partitions N [--replica-assignment ...]. */
static int topics_alter(struct kc_client *c, const struct topics_args *a)
{
	const char *who = "keel topics alter";
	static int32_t ids[MAX_ASSIGNED_PARTITIONS * META_MAX_REPLICAS];
	static const int32_t *rows[MAX_ASSIGNED_PARTITIONS];
	static uint32_t sizes[MAX_ASSIGNED_PARTITIONS];
	uint32_t row_count = 0;
	if (a->replica_assignment != NULL &&
	    !parse_assignment(who, a->name, a->replica_assignment, ids, rows, sizes, &row_count)) {
		return 2;
	}
	struct meta_create_partitions_topic t = {a->name, a->partitions, rows, sizes, row_count};
	struct meta_create_partitions_request rq = {&t, 1, false};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1u << 20);
	meta_encode_create_partitions_request(&w, &rq);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_create_partitions_response rs;
	int16_t error = 0;
	int status = meta_cli_controller_call(c, who, META_API_CREATE_PARTITIONS, &w, a->timeout_ms,
					      decode_create_partitions, &arena, &rs, &error);
	if (status == 0 && error != META_ERR_NONE) {
		const char *msg = rs.results[0].error_message;
		fprintf(stderr, "%s: topic '%s': %s%s%s\n", who, a->name, meta_error_name(error),
			msg ? ": " : "", msg ? msg : "");
		status = 1;
	} else if (status == 0) {
		printf("Topic %s now has %d partitions.\n", a->name, a->partitions);
	}
	keel_arena_close(&arena);
	keel_wbuf_free(&w);
	return status;
}

static int topics_delete(struct kc_client *c, const struct topics_args *a)
{
	const char *who = "keel topics delete";
	const char *names[1] = {a->name};
	struct meta_delete_topics_request rq = {names, 1};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1u << 20);
	meta_encode_delete_topics_request(&w, &rq);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_delete_topics_response rs;
	int16_t error = 0;
	int status = meta_cli_controller_call(c, who, META_API_DELETE_TOPICS, &w, a->timeout_ms,
				     decode_delete, &arena, &rs, &error);
	if (status == 0 && error != META_ERR_NONE) {
		fprintf(stderr, "%s: topic '%s': %s\n", who, a->name, meta_error_name(error));
		status = 1;
	} else if (status == 0) {
		printf("Deleted topic %s.\n", a->name);
	}
	keel_arena_close(&arena);
	keel_wbuf_free(&w);
	return status;
}

/* ---- arguments ---- */

static bool parse_config(struct topics_args *a, char *text)
{
	char *eq = strchr(text, '=');
	if (eq == NULL || eq == text || a->config_count == MAX_CONFIGS) {
		return false;
	}
	*eq = '\0';
	a->configs[a->config_count].key = text;
	a->configs[a->config_count].value = eq + 1;
	a->config_count++;
	return true;
}

static bool parse_flag(struct topics_args *a, const char *arg)
{
	if (strcmp(arg, "--under-replicated-partitions") == 0) {
		a->under_replicated = true;
	} else if (strcmp(arg, "--unavailable-partitions") == 0) {
		a->unavailable = true;
	} else if (strcmp(arg, "--under-min-isr-partitions") == 0) {
		a->under_min_isr = true;
	} else {
		return false;
	}
	return true;
}

/* Options that take a value; false with a message on a bad one. */
static bool parse_valued(struct topics_args *a, const char *arg, char *value, bool *known)
{
	long v = 0;
	*known = true;
	if (strcmp(arg, "--servers") == 0) {
		a->servers = value;
	} else if (strcmp(arg, "--partitions") == 0) {
		if (!parse_number(arg, value, INT32_MIN, INT32_MAX, &v)) {
			return false;
		}
		a->partitions = (int32_t)v;
	} else if (strcmp(arg, "--replication-factor") == 0) {
		if (!parse_number(arg, value, INT16_MIN, INT16_MAX, &v)) {
			return false;
		}
		a->replication_factor = (int16_t)v;
	} else if (strcmp(arg, "--config") == 0) {
		if (!parse_config(a, value)) {
			fprintf(stderr, "keel topics: --config wants KEY=VALUE, not '%s'\n", value);
			return false;
		}
	} else if (strcmp(arg, "--timeout-ms") == 0) {
		if (!parse_number(arg, value, 1, INT32_MAX, &v)) {
			return false;
		}
		a->timeout_ms = (int32_t)v;
	} else if (strcmp(arg, "--replica-assignment") == 0) {
		a->replica_assignment = value;
	} else {
		*known = false;
	}
	return true;
}

static bool parse_topics_args(struct topics_args *a, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	a->partitions = -1;
	a->replication_factor = -1;
	a->timeout_ms = 15000;
	a->action = argv[1];
	bool options_done = false;
	for (int i = 2; i < argc; i++) {
		char *arg = argv[i];
		bool known = false;
		if (!options_done && strcmp(arg, "--") == 0) {
			options_done = true;
			continue;
		}
		if (!options_done && arg[0] == '-' && arg[1] != '\0') {
			if (parse_flag(a, arg)) {
				continue;
			}
			if (i + 1 < argc && !parse_valued(a, arg, argv[i + 1], &known)) {
				return false;
			}
			if (known) {
				i++;
				continue;
			}
			fprintf(stderr, "keel topics: unknown option '%s'%s\n", arg,
				i + 1 < argc ? "" : " (or its value is missing)");
			return false;
		}
		if (a->name != NULL) {
			fprintf(stderr, "keel topics: unexpected argument '%s' (the topic is '%s')\n",
				arg, a->name);
			return false;
		}
		a->name = arg;
	}
	if (a->servers == NULL) {
		fprintf(stderr, "keel topics: --servers is required\n");
		return false;
	}
	bool needs_name = strcmp(a->action, "create") == 0 || strcmp(a->action, "delete") == 0 ||
			  strcmp(a->action, "alter") == 0;
	if (needs_name && a->name == NULL) {
		fprintf(stderr, "keel topics %s: the topic name is required\n", a->action);
		return false;
	}
	if (strcmp(a->action, "create") == 0 && a->replication_factor == 0) {
		fprintf(stderr,
			"keel topics create: topic '%s': --replication-factor must be at least 1\n",
			a->name);
		return false;
	}
	if (strcmp(a->action, "alter") == 0 && a->partitions < 1) {
		fprintf(stderr, "keel topics alter: topic '%s': --partitions N (the new count) is "
				"required\n",
			a->name);
		return false;
	}
	if (a->replica_assignment != NULL && strcmp(a->action, "alter") != 0 &&
	    strcmp(a->action, "create") != 0) {
		fprintf(stderr, "keel topics %s: --replica-assignment goes with create or alter\n",
			a->action);
		return false;
	}
	if (a->replica_assignment != NULL && strcmp(a->action, "create") == 0 &&
	    (a->partitions != -1 || a->replication_factor != -1)) {
		fprintf(stderr, "keel topics create: topic '%s': --replica-assignment gives the "
				"partitions and replicas; it cannot go with --partitions or "
				"--replication-factor\n",
			a->name);
		return false;
	}
	if (any_filter(a) && strcmp(a->action, "describe") != 0) {
		fprintf(stderr, "keel topics %s: the partition filters go with describe\n",
			a->action);
		return false;
	}
	return true;
}

static bool wants_help(int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			return false;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return true;
		}
	}
	return false;
}

int cli_topics(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		return usage(argc < 2 ? stderr : stdout);
	}
	const char *action = argv[1];
	bool known = strcmp(action, "create") == 0 || strcmp(action, "delete") == 0 ||
		     strcmp(action, "alter") == 0 ||
		     strcmp(action, "list") == 0 || strcmp(action, "describe") == 0;
	if (!known) {
		fprintf(stderr, "keel topics: unknown action '%s'\n", action);
		return usage(stderr);
	}
	if (wants_help(argc, argv)) {
		return usage(stdout);
	}
	struct topics_args a;
	if (!parse_topics_args(&a, argc, argv)) {
		return usage(stderr);
	}
	bool initialized = false;
	struct kc_client *c = open_session("keel topics", a.servers, a.timeout_ms, &initialized);
	if (c == NULL) {
		return 1;
	}
	int status;
	if (strcmp(action, "create") == 0) {
		status = topics_create(c, &a);
	} else if (strcmp(action, "alter") == 0) {
		status = topics_alter(c, &a);
	} else if (strcmp(action, "delete") == 0) {
		status = topics_delete(c, &a);
	} else {
		status = topics_read(c, &a);
	}
	kc_close(c);
	return status;
}
