/*
 * reassign.c — `keel partitions reassign`: move partition replicas between
 * brokers, as kafka-reassign-partitions.sh does (Kafka's JSON files, its
 * actions and its messages), through the controller's
 * AlterPartitionReassignments / ListPartitionReassignments (KIP-455).
 *
 *	keel partitions reassign --servers HOSTS
 *	    --reassignment-json-file F --execute [--throttle BYTES_PER_SEC]
 *	    --reassignment-json-file F --verify
 *	    --reassignment-json-file F --cancel
 *	    --list
 *	    --generate --topics-to-move-json-file F --broker-list 1,2,3
 *
 * The reassignment file: {"version":1,"partitions":[{"topic":"t",
 * "partition":0,"replicas":[2,3]}, ...]} ("log_dirs" is accepted and
 * ignored). --execute prints the current assignment of those partitions
 * (save it to roll back), optionally sets Kafka's replication throttles
 * (the topic's leader/follower.replication.throttled.replicas, the moving
 * brokers' leader/follower.replication.throttled.rate), then starts the
 * reassignments. --verify says for each partition whether it is done, and
 * once all are, removes the throttles. --cancel reverts the ongoing ones.
 * --generate proposes a placement of the topics named in
 * {"version":1,"topics":[{"topic":"t"}]} over the broker list (striped,
 * same replication factor), without changing anything.
 *
 * Exit status: 0; 1 when a request was refused, a partition's replicas
 * differ from the target with no reassignment running (--verify), or the
 * cluster cannot be reached; 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "cli/cli.h"
#include "cli/json.h"
#include "cli/meta_cli.h"
#include "meta/record.h"

#define WHO "keel partitions reassign"
#define MAX_MOVES 10000
#define MAX_FILE_BYTES (16u << 20)
#define MAX_BROKER_LIST 1024

struct move {
	const char *topic;
	int32_t partition;
	int32_t replicas[META_MAX_REPLICAS];
	uint32_t count;
};

struct reassign_args {
	const char *servers;
	const char *file;        /* --reassignment-json-file */
	const char *topics_file; /* --topics-to-move-json-file */
	char *broker_list;
	bool execute, verify, cancel, list, generate;
	long long throttle; /* -1: none */
	int32_t timeout_ms;
};

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel partitions reassign --servers HOSTS ACTION\n"
		"  --reassignment-json-file F --execute [--throttle BYTES_PER_SEC]\n"
		"  --reassignment-json-file F --verify\n"
		"  --reassignment-json-file F --cancel\n"
		"  --list\n"
		"  --generate --topics-to-move-json-file F --broker-list 1,2,3\n\n"
		"Moves partition replicas between brokers (kafka-reassign-partitions.sh's\n"
		"files and actions). A reassignment adds the new replicas first and drops the\n"
		"old ones once the new ones are in sync. --timeout-ms MS bounds the retries\n"
		"while the cluster elects a controller (default 15000).\n");
	return out == stdout ? 0 : 2;
}

/* ---- files ---- */

static char *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "%s: cannot open %s: %s\n", WHO, path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(MAX_FILE_BYTES + 1);
	size_t n = buf != NULL ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
	bool err = ferror(f) != 0;
	fclose(f);
	if (buf == NULL || err || n > MAX_FILE_BYTES) {
		fprintf(stderr, "%s: cannot read %s (unreadable, or over %u bytes)\n", WHO, path,
			MAX_FILE_BYTES);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*size = n;
	return buf;
}

static bool int_value(const struct json *v, long long min, long long max, long long *out)
{
	if (v == NULL || v->type != JSON_NUMBER || v->number < (double)min ||
	    v->number > (double)max || v->number != (double)(long long)v->number) {
		return false;
	}
	*out = (long long)v->number;
	return true;
}

/* Reads Kafka's reassignment file into `moves`; false (message printed) on
 * a malformed one. */
static bool parse_plan(const char *path, struct keel_arena *arena, struct move **moves,
		       uint32_t *count)
{
	size_t size = 0;
	char *text = read_file(path, &size);
	if (text == NULL) {
		return false;
	}
	const struct json *doc = json_parse(arena, text, size);
	const struct json *parts = json_get(doc, "partitions");
	bool ok = parts != NULL && parts->type == JSON_ARRAY;
	uint32_t n = 0;
	for (const struct json *p = ok ? parts->child : NULL; p != NULL; p = p->next) {
		n++;
	}
	if (ok && (n == 0 || n > MAX_MOVES)) {
		fprintf(stderr, "%s: %s names %s partitions (1 to %d)\n", WHO, path,
			n == 0 ? "no" : "too many", MAX_MOVES);
		free(text);
		return false;
	}
	struct move *m = ok ? keel_arena_alloc(arena, (size_t)n * sizeof(*m)) : NULL;
	uint32_t i = 0;
	for (const struct json *p = ok ? parts->child : NULL; m != NULL && p != NULL;
	     p = p->next, i++) {
		const char *topic = json_str(p, "topic", NULL);
		long long pid = 0;
		const struct json *reps = json_get(p, "replicas");
		if (topic == NULL || !int_value(json_get(p, "partition"), 0, INT32_MAX, &pid) ||
		    reps == NULL || reps->type != JSON_ARRAY) {
			ok = false;
			break;
		}
		m[i].topic = topic;
		m[i].partition = (int32_t)pid;
		m[i].count = 0;
		for (const struct json *r = reps->child; ok && r != NULL; r = r->next) {
			long long id = 0;
			ok = m[i].count < META_MAX_REPLICAS && int_value(r, 0, INT32_MAX, &id);
			if (ok) {
				m[i].replicas[m[i].count++] = (int32_t)id;
			}
		}
	}
	free(text);
	if (!ok || m == NULL) {
		fprintf(stderr,
			"%s: %s is not a reassignment file: {\"version\":1,\"partitions\":"
			"[{\"topic\":T,\"partition\":P,\"replicas\":[B,...]}, ...]}\n",
			WHO, path);
		return false;
	}
	*moves = m;
	*count = n;
	return true;
}

/* ---- what the cluster says ---- */

static const struct meta_describe_partition *find_partition(
	const struct meta_describe_cluster_response *rs, const char *topic, int32_t pid)
{
	for (uint32_t t = 0; t < rs->topic_count; t++) {
		const struct meta_describe_topic *dt = &rs->topics[t];
		if (dt->error != META_ERR_NONE || strcmp(dt->name, topic) != 0) {
			continue;
		}
		for (uint32_t p = 0; p < dt->partition_count; p++) {
			if (dt->partitions[p].partition_id == pid) {
				return &dt->partitions[p];
			}
		}
	}
	return NULL;
}

static void print_ids(const int32_t *v, uint32_t n, const char *sep)
{
	for (uint32_t i = 0; i < n; i++) {
		printf("%s%d", i > 0 ? sep : "", v[i]);
	}
}

static void print_assignment_entry(bool first, const char *topic, int32_t pid,
				   const int32_t *replicas, uint32_t n)
{
	printf("%s{\"topic\":\"%s\",\"partition\":%d,\"replicas\":[", first ? "" : ",", topic, pid);
	print_ids(replicas, n, ",");
	printf("],\"log_dirs\":[");
	for (uint32_t i = 0; i < n; i++) {
		printf("%s\"any\"", i > 0 ? "," : "");
	}
	printf("]}");
}

/* Kafka's "Current partition replica assignment" JSON of the moves'
 * partitions (those that exist). */
static void print_current(const struct meta_describe_cluster_response *rs,
			  const struct move *moves, uint32_t count)
{
	printf("{\"version\":1,\"partitions\":[");
	bool first = true;
	for (uint32_t i = 0; i < count; i++) {
		const struct meta_describe_partition *p =
			find_partition(rs, moves[i].topic, moves[i].partition);
		if (p != NULL) {
			print_assignment_entry(first, moves[i].topic, moves[i].partition,
					       p->replicas, p->replica_count);
			first = false;
		}
	}
	printf("]}\n");
}

/* ---- requests ---- */

static bool decode_alter_reassign(const uint8_t *body, size_t size, struct keel_arena *arena,
				  void *out, int16_t *error)
{
	struct meta_alter_reassignments_response *rs = out;
	if (meta_decode_alter_reassignments_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->error;
	return true;
}

static bool decode_list(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			int16_t *error)
{
	struct meta_list_reassignments_response *rs = out;
	if (meta_decode_list_reassignments_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->error;
	return true;
}

static bool decode_configs(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			   int16_t *error)
{
	struct meta_alter_configs_response *rs = out;
	if (meta_decode_alter_configs_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = META_ERR_NONE;
	for (uint32_t i = 0; i < rs->result_count && *error == META_ERR_NONE; i++) {
		*error = rs->results[i].error == META_ERR_NOT_CONTROLLER ? META_ERR_NOT_CONTROLLER
									  : META_ERR_NONE;
	}
	return true;
}

/* One controller request whose response's request-wide error is reported
 * (with `what`); 0 when the controller answered without one. */
static int controller_call(struct kc_client *c, const struct reassign_args *a,
			   enum meta_api api, const struct keel_wbuf *w, meta_cli_decode_fn decode,
			   struct keel_arena *arena, void *out)
{
	int16_t error = META_ERR_NONE;
	if (meta_cli_controller_call(c, WHO, api, w, a->timeout_ms, decode, arena, out, &error) !=
	    0) {
		return 1;
	}
	if (error != META_ERR_NONE) {
		fprintf(stderr, "%s: %s: %s\n", WHO, meta_api_name(api), meta_error_name(error));
		return 1;
	}
	return 0;
}

/* Starts (or cancels) the reassignments of `moves`; prints Kafka's lines. */
static int alter(struct kc_client *c, const struct reassign_args *a, const struct move *moves,
		 uint32_t count, bool cancel, struct keel_arena *arena)
{
	struct meta_reassign_topic *topics = keel_arena_alloc(arena, count * sizeof(*topics));
	struct meta_reassign_partition *parts = keel_arena_alloc(arena, count * sizeof(*parts));
	if (topics == NULL || parts == NULL) {
		fprintf(stderr, "%s: out of memory\n", WHO);
		return 1;
	}
	for (uint32_t i = 0; i < count; i++) {
		parts[i] = (struct meta_reassign_partition){moves[i].partition, cancel,
							    moves[i].replicas, moves[i].count};
		topics[i] = (struct meta_reassign_topic){moves[i].topic, &parts[i], 1};
	}
	struct meta_alter_reassignments_request rq = {topics, count};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 1024, 64u << 20);
	meta_encode_alter_reassignments_request(&w, &rq);
	struct meta_alter_reassignments_response rs;
	struct keel_arena reply;
	keel_arena_init(&reply, 64 * 1024);
	int status = controller_call(c, a, META_API_ALTER_PARTITION_REASSIGNMENTS, &w,
				     decode_alter_reassign, &reply, &rs);
	keel_wbuf_free(&w);
	if (status != 0) {
		keel_arena_close(&reply);
		return status;
	}
	bool any = false;
	for (uint32_t i = 0; i < rs.result_count; i++) {
		const struct meta_elect_partition_result *r = &rs.results[i];
		if (r->error == META_ERR_NONE) {
			printf("%s%s-%d", any ? "," : (cancel ? "Successfully cancelled partition "
								"reassignments for: "
							      : "Successfully started partition "
								"reassignments for "),
			       r->topic, r->partition_id);
			any = true;
		}
	}
	if (any) {
		printf("\n");
	}
	bool header = false;
	for (uint32_t i = 0; i < rs.result_count; i++) {
		const struct meta_elect_partition_result *r = &rs.results[i];
		if (r->error == META_ERR_NONE ||
		    (cancel && r->error == META_ERR_NO_REASSIGNMENT_IN_PROGRESS)) {
			continue; /* Kafka's tool cancels only what is running */
		}
		if (!header) {
			printf("Error reassigning partition(s):\n");
			header = true;
		}
		printf("%s-%d: %s%s%s\n", r->topic, r->partition_id, meta_error_name(r->error),
		       r->error_message != NULL ? ": " : "",
		       r->error_message != NULL ? r->error_message : "");
		status = 1;
	}
	keel_arena_close(&reply);
	return status;
}

/* ---- throttles ---- */

#define THROTTLE_LEADER_REPLICAS "leader.replication.throttled.replicas"
#define THROTTLE_FOLLOWER_REPLICAS "follower.replication.throttled.replicas"
#define THROTTLE_LEADER_RATE "leader.replication.throttled.rate"
#define THROTTLE_FOLLOWER_RATE "follower.replication.throttled.rate"

static bool add_id(int32_t *ids, uint32_t *n, uint32_t max, int32_t id)
{
	if (meta_list_contains(ids, *n, id)) {
		return true;
	}
	if (*n == max) {
		return false;
	}
	ids[(*n)++] = id;
	return true;
}

/* Appends "P:B,..." for `moves` of `topic`: the current replicas (leader
 * side) or the ones being added (follower side), as Kafka's tool sets them. */
static void throttled_list(struct keel_wbuf *v, const struct meta_describe_cluster_response *rs,
			   const struct move *moves, uint32_t count, const char *topic,
			   bool follower)
{
	for (uint32_t i = 0; i < count; i++) {
		const struct move *m = &moves[i];
		const struct meta_describe_partition *p =
			strcmp(m->topic, topic) == 0 ? find_partition(rs, m->topic, m->partition)
						     : NULL;
		if (p == NULL) {
			continue;
		}
		const int32_t *ids = follower ? m->replicas : p->replicas;
		uint32_t n = follower ? m->count : p->replica_count;
		for (uint32_t r = 0; r < n; r++) {
			if (follower && meta_list_contains(p->replicas, p->replica_count, ids[r])) {
				continue;
			}
			char item[32];
			int len = snprintf(item, sizeof(item), "%s%d:%d", v->size > 0 ? "," : "",
					   m->partition, ids[r]);
			keel_wbuf_bytes(v, item, (size_t)len);
		}
	}
	keel_wbuf_u8(v, 0);
}

/*
 * Sets (rate >= 0) or clears (rate < 0) the throttles of `moves`: the two
 * topic configs of every topic moved, and the two broker rates of
 * `brokers`. One AlterConfigs with a resource per topic and broker.
 */
static int set_throttles(struct kc_client *c, const struct reassign_args *a,
			 const struct meta_describe_cluster_response *rs, const struct move *moves,
			 uint32_t count, const int32_t *brokers, uint32_t broker_count,
			 long long rate, struct keel_arena *arena)
{
	uint32_t max = count + broker_count;
	struct meta_alter_config_resource *res = keel_arena_alloc(arena, (max + 1) * sizeof(*res));
	struct meta_config_kv *kvs = keel_arena_alloc(arena, 2 * (max + 1) * sizeof(*kvs));
	if (res == NULL || kvs == NULL) {
		return 1;
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < count; i++) {
		bool seen = false;
		for (uint32_t j = 0; j < i; j++) {
			seen |= strcmp(moves[j].topic, moves[i].topic) == 0;
		}
		if (seen || find_partition(rs, moves[i].topic, moves[i].partition) == NULL) {
			continue;
		}
		struct meta_config_kv *kv = &kvs[2 * n];
		kv[0] = (struct meta_config_kv){THROTTLE_LEADER_REPLICAS, NULL};
		kv[1] = (struct meta_config_kv){THROTTLE_FOLLOWER_REPLICAS, NULL};
		for (int side = 0; rate >= 0 && side < 2; side++) {
			struct keel_wbuf v;
			keel_wbuf_init_dynamic(&v, 64, 1u << 20);
			throttled_list(&v, rs, moves, count, moves[i].topic, side == 1);
			kv[side].value = keel_wbuf_ok(&v) ? keel_arena_dup(arena, v.data, v.size)
							  : NULL;
			keel_wbuf_free(&v);
			if (kv[side].value == NULL) {
				return 1;
			}
		}
		res[n++] = (struct meta_alter_config_resource){META_RESOURCE_TOPIC, moves[i].topic,
							       kv, 2};
	}
	char rate_text[32];
	snprintf(rate_text, sizeof(rate_text), "%lld", rate);
	for (uint32_t i = 0; i < broker_count; i++) {
		char name[16];
		snprintf(name, sizeof(name), "%d", brokers[i]);
		struct meta_config_kv *kv = &kvs[2 * n];
		const char *value = rate >= 0 ? keel_arena_dup(arena, rate_text, strlen(rate_text) + 1)
					      : NULL;
		kv[0] = (struct meta_config_kv){THROTTLE_LEADER_RATE, value};
		kv[1] = (struct meta_config_kv){THROTTLE_FOLLOWER_RATE, value};
		const char *rname = keel_arena_dup(arena, name, strlen(name) + 1);
		if (rname == NULL || (rate >= 0 && value == NULL)) {
			return 1;
		}
		res[n++] = (struct meta_alter_config_resource){META_RESOURCE_BROKER, rname, kv, 2};
	}
	struct meta_alter_configs_request rq = {res, n, false};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 1024, 64u << 20);
	meta_encode_alter_configs_request(&w, &rq);
	struct meta_alter_configs_response out;
	struct keel_arena reply;
	keel_arena_init(&reply, 16 * 1024);
	int status = controller_call(c, a, META_API_ALTER_CONFIGS, &w, decode_configs, &reply,
				     &out);
	for (uint32_t i = 0; status == 0 && i < out.result_count; i++) {
		if (out.results[i].error != META_ERR_NONE) {
			fprintf(stderr, "%s: throttle on %s: %s%s%s\n", WHO,
				out.results[i].resource_name, meta_error_name(out.results[i].error),
				out.results[i].error_message ? ": " : "",
				out.results[i].error_message ? out.results[i].error_message : "");
			status = 1;
		}
	}
	keel_arena_close(&reply);
	keel_wbuf_free(&w);
	return status;
}

/* ---- actions ---- */

static int do_execute(struct kc_client *c, const struct reassign_args *a,
		      const struct move *moves, uint32_t count, struct keel_arena *arena)
{
	struct meta_describe_cluster_response rs;
	if (meta_cli_describe(c, WHO, NULL, false, true, arena, &rs) != 0) {
		return 1;
	}
	printf("Current partition replica assignment\n\n");
	print_current(&rs, moves, count);
	printf("\nSave this to use as the --reassignment-json-file option during rollback\n");
	if (a->throttle >= 0) {
		int32_t brokers[MAX_BROKER_LIST];
		uint32_t n = 0;
		for (uint32_t i = 0; i < count; i++) {
			const struct meta_describe_partition *p =
				find_partition(&rs, moves[i].topic, moves[i].partition);
			for (uint32_t r = 0; p != NULL && r < p->replica_count; r++) {
				(void)add_id(brokers, &n, MAX_BROKER_LIST, p->replicas[r]);
			}
			for (uint32_t r = 0; r < moves[i].count; r++) {
				(void)add_id(brokers, &n, MAX_BROKER_LIST, moves[i].replicas[r]);
			}
		}
		if (set_throttles(c, a, &rs, moves, count, brokers, n, a->throttle, arena) != 0) {
			return 1;
		}
		printf("Warning: You must run --verify periodically, until the reassignment "
		       "completes, to ensure the throttle is removed.\n");
		printf("The inter-broker throttle limit was set to %lld B/s\n", a->throttle);
	}
	return alter(c, a, moves, count, false, arena);
}

static bool fetch_ongoing(struct kc_client *c, const struct reassign_args *a,
			  struct keel_arena *arena, struct meta_list_reassignments_response *out)
{
	struct meta_list_reassignments_request rq = {NULL, 0};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1u << 16);
	meta_encode_list_reassignments_request(&w, &rq);
	int status = controller_call(c, a, META_API_LIST_PARTITION_REASSIGNMENTS, &w, decode_list,
				     arena, out);
	keel_wbuf_free(&w);
	return status == 0;
}

static bool ongoing(const struct meta_list_reassignments_response *ls, const char *topic,
		    int32_t pid)
{
	for (uint32_t i = 0; i < ls->reassignment_count; i++) {
		if (ls->reassignments[i].partition_id == pid &&
		    strcmp(ls->reassignments[i].topic, topic) == 0) {
			return true;
		}
	}
	return false;
}

/* Clears every throttle the plan's topics and the cluster's brokers carry. */
static int clear_throttles(struct kc_client *c, const struct reassign_args *a,
			   const struct move *moves, uint32_t count, struct keel_arena *arena)
{
	struct meta_describe_cluster_response rs;
	if (meta_cli_describe(c, WHO, NULL, true, true, arena, &rs) != 0) {
		return 1;
	}
	int32_t brokers[MAX_BROKER_LIST];
	uint32_t n = 0;
	for (uint32_t i = 0; i < rs.broker_count && n < MAX_BROKER_LIST; i++) {
		brokers[n++] = rs.brokers[i].id;
	}
	printf("Clearing broker-level throttles on brokers ");
	print_ids(brokers, n, ",");
	printf("\n");
	for (uint32_t i = 0; i < count; i++) {
		bool seen = false;
		for (uint32_t j = 0; j < i; j++) {
			seen |= strcmp(moves[j].topic, moves[i].topic) == 0;
		}
		if (!seen && find_partition(&rs, moves[i].topic, moves[i].partition) != NULL) {
			printf("Clearing topic-level throttles on topic %s\n", moves[i].topic);
		}
	}
	return set_throttles(c, a, &rs, moves, count, brokers, n, -1, arena);
}

static int do_verify(struct kc_client *c, const struct reassign_args *a,
		     const struct move *moves, uint32_t count, struct keel_arena *arena)
{
	struct keel_arena list_arena;
	keel_arena_init(&list_arena, 16 * 1024);
	struct meta_list_reassignments_response ls;
	struct meta_describe_cluster_response rs;
	if (!fetch_ongoing(c, a, &list_arena, &ls) ||
	    meta_cli_describe(c, WHO, NULL, false, true, arena, &rs) != 0) {
		keel_arena_close(&list_arena);
		return 1;
	}
	printf("Status of partition reassignment:\n");
	bool running = false, mismatch = false;
	for (uint32_t i = 0; i < count; i++) {
		const struct move *m = &moves[i];
		const struct meta_describe_partition *p = find_partition(&rs, m->topic, m->partition);
		if (ongoing(&ls, m->topic, m->partition)) {
			printf("Reassignment of partition %s-%d is still in progress.\n", m->topic,
			       m->partition);
			running = true;
		} else if (p != NULL && p->replica_count == m->count &&
			   memcmp(p->replicas, m->replicas, m->count * sizeof(int32_t)) == 0) {
			printf("Reassignment of partition %s-%d is completed.\n", m->topic,
			       m->partition);
		} else if (p == NULL) {
			printf("Partition %s-%d does not exist.\n", m->topic, m->partition);
			mismatch = true;
		} else {
			printf("There is no active reassignment of partition %s-%d, but replica set "
			       "is ",
			       m->topic, m->partition);
			print_ids(p->replicas, p->replica_count, ",");
			printf(" rather than ");
			print_ids(m->replicas, m->count, ",");
			printf(".\n");
			mismatch = true;
		}
	}
	keel_arena_close(&list_arena);
	if (running) {
		return 0;
	}
	int status = clear_throttles(c, a, moves, count, arena);
	return mismatch ? 1 : status;
}

static int do_cancel(struct kc_client *c, const struct reassign_args *a,
		     const struct move *moves, uint32_t count, struct keel_arena *arena)
{
	int status = alter(c, a, moves, count, true, arena);
	if (status == 0) {
		status = clear_throttles(c, a, moves, count, arena);
	}
	return status;
}

static int do_list(struct kc_client *c, const struct reassign_args *a, struct keel_arena *arena)
{
	struct meta_list_reassignments_response ls;
	if (!fetch_ongoing(c, a, arena, &ls)) {
		return 1;
	}
	if (ls.reassignment_count == 0) {
		printf("No partition reassignments found.\n");
		return 0;
	}
	printf("Current partition reassignments:\n");
	for (uint32_t i = 0; i < ls.reassignment_count; i++) {
		const struct meta_ongoing_reassignment *r = &ls.reassignments[i];
		printf("%s-%d: replicas: ", r->topic, r->partition_id);
		print_ids(r->replicas, r->replica_count, ",");
		printf(". adding: ");
		print_ids(r->adding, r->adding_count, ",");
		printf(". removing: ");
		print_ids(r->removing, r->removing_count, ",");
		printf(".\n");
	}
	return 0;
}

/* --generate: the named topics' partitions striped over the broker list
 * (replica i of partition p on broker (start + p + i) mod n, start from the
 * topic name), keeping each topic's replication factor. */
static int do_generate(struct kc_client *c, const struct reassign_args *a,
		       struct keel_arena *arena)
{
	int32_t brokers[MAX_BROKER_LIST];
	uint32_t nb = 0;
	for (char *save = NULL, *item = strtok_r(a->broker_list, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		char *end = NULL;
		errno = 0;
		long id = strtol(item, &end, 10);
		if (errno != 0 || end == item || *end != '\0' || id < 0 || id > INT32_MAX ||
		    !add_id(brokers, &nb, MAX_BROKER_LIST, (int32_t)id)) {
			fprintf(stderr, "%s: --broker-list wants broker ids like 1,2,3, not '%s'\n",
				WHO, item);
			return 2;
		}
	}
	size_t size = 0;
	char *text = read_file(a->topics_file, &size);
	if (text == NULL) {
		return 1;
	}
	const struct json *doc = json_parse(arena, text, size);
	free(text);
	const struct json *topics = json_get(doc, "topics");
	if (nb == 0 || topics == NULL || topics->type != JSON_ARRAY) {
		fprintf(stderr, "%s: %s is not a topics file: {\"version\":1,\"topics\":"
				"[{\"topic\":T}, ...]} (or --broker-list is empty)\n",
			WHO, a->topics_file);
		return 1;
	}
	struct meta_describe_cluster_response rs;
	if (meta_cli_describe(c, WHO, NULL, false, true, arena, &rs) != 0) {
		return 1;
	}
	for (int pass = 0; pass < 2; pass++) {
		printf(pass == 0 ? "Current partition replica assignment\n"
				 : "\nProposed partition reassignment configuration\n");
		printf("{\"version\":1,\"partitions\":[");
		bool first = true;
		for (const struct json *t = topics->child; t != NULL; t = t->next) {
			const char *name = json_str(t, "topic", NULL);
			const struct meta_describe_topic *dt = NULL;
			for (uint32_t i = 0; name != NULL && i < rs.topic_count; i++) {
				if (strcmp(rs.topics[i].name, name) == 0) {
					dt = &rs.topics[i];
				}
			}
			if (dt == NULL) {
				printf("\n");
				fprintf(stderr, "%s: topic '%s' does not exist\n", WHO,
					name != NULL ? name : "(no name)");
				return 1;
			}
			uint32_t rf = dt->partition_count > 0 ? dt->partitions[0].replica_count : 0;
			if (rf > nb) {
				printf("\n");
				fprintf(stderr,
					"%s: topic '%s' has replication factor %u, more than the %u "
					"brokers listed\n",
					WHO, name, rf, nb);
				return 1;
			}
			uint32_t start = (uint32_t)(strlen(name) * 31u + (uint8_t)name[0]) % nb;
			for (uint32_t p = 0; p < dt->partition_count; p++) {
				const struct meta_describe_partition *dp = &dt->partitions[p];
				int32_t row[META_MAX_REPLICAS];
				for (uint32_t r = 0; r < rf; r++) {
					row[r] = brokers[(start + p + r) % nb];
				}
				print_assignment_entry(first, name, dp->partition_id,
						       pass == 0 ? dp->replicas : row,
						       pass == 0 ? dp->replica_count : rf);
				first = false;
			}
		}
		printf("]}\n");
	}
	return 0;
}

/* ---- arguments ---- */

static bool parse_args(struct reassign_args *a, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	a->throttle = -1;
	a->timeout_ms = 15000;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		bool has_value = i + 1 < argc;
		if (strcmp(arg, "--execute") == 0) {
			a->execute = true;
		} else if (strcmp(arg, "--verify") == 0) {
			a->verify = true;
		} else if (strcmp(arg, "--cancel") == 0) {
			a->cancel = true;
		} else if (strcmp(arg, "--list") == 0) {
			a->list = true;
		} else if (strcmp(arg, "--generate") == 0) {
			a->generate = true;
		} else if (!has_value) {
			fprintf(stderr, "%s: unknown option '%s' (or its value is missing)\n", WHO,
				arg);
			return false;
		} else if (strcmp(arg, "--servers") == 0 || strcmp(arg, "--bootstrap-server") == 0) {
			a->servers = argv[++i];
		} else if (strcmp(arg, "--reassignment-json-file") == 0) {
			a->file = argv[++i];
		} else if (strcmp(arg, "--topics-to-move-json-file") == 0) {
			a->topics_file = argv[++i];
		} else if (strcmp(arg, "--broker-list") == 0) {
			a->broker_list = argv[++i];
		} else if (strcmp(arg, "--throttle") == 0 || strcmp(arg, "--timeout-ms") == 0) {
			char *end = NULL;
			errno = 0;
			long long v = strtoll(argv[++i], &end, 10);
			if (errno != 0 || end == argv[i] || *end != '\0' || v < 0 ||
			    (arg[2] == 't' && arg[3] == 'i' && (v == 0 || v > INT32_MAX))) {
				fprintf(stderr, "%s: %s wants a number, not '%s'\n", WHO, arg, argv[i]);
				return false;
			}
			if (strcmp(arg, "--throttle") == 0) {
				a->throttle = v;
			} else {
				a->timeout_ms = (int32_t)v;
			}
		} else {
			fprintf(stderr, "%s: unknown option '%s'\n", WHO, arg);
			return false;
		}
	}
	int actions = a->execute + a->verify + a->cancel + a->list + a->generate;
	if (a->servers == NULL || actions != 1) {
		fprintf(stderr, "%s: --servers and exactly one of --execute, --verify, --cancel, "
				"--list, --generate are required\n",
			WHO);
		return false;
	}
	if ((a->execute || a->verify || a->cancel) && a->file == NULL) {
		fprintf(stderr, "%s: --reassignment-json-file is required\n", WHO);
		return false;
	}
	if (a->generate && (a->topics_file == NULL || a->broker_list == NULL)) {
		fprintf(stderr, "%s: --generate needs --topics-to-move-json-file and --broker-list\n",
			WHO);
		return false;
	}
	if (a->throttle >= 0 && !a->execute) {
		fprintf(stderr, "%s: --throttle goes with --execute\n", WHO);
		return false;
	}
	return true;
}

static int partitions_reassign(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return usage(stdout);
		}
	}
	struct reassign_args a;
	if (!parse_args(&a, argc, argv)) {
		return usage(stderr);
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 64 * 1024);
	struct move *moves = NULL;
	uint32_t count = 0;
	if (a.file != NULL && !(a.execute || a.verify || a.cancel)) {
		a.file = NULL;
	}
	if (a.file != NULL && !parse_plan(a.file, &arena, &moves, &count)) {
		keel_arena_close(&arena);
		return 1;
	}
	struct kc_client client;
	bool initialized = false;
	int status = 1;
	if (meta_cli_open(&client, &initialized, WHO, a.servers, 10000, a.timeout_ms) == ZK_OK) {
		if (a.execute) {
			status = do_execute(&client, &a, moves, count, &arena);
		} else if (a.verify) {
			status = do_verify(&client, &a, moves, count, &arena);
		} else if (a.cancel) {
			status = do_cancel(&client, &a, moves, count, &arena);
		} else if (a.list) {
			status = do_list(&client, &a, &arena);
		} else {
			status = do_generate(&client, &a, &arena);
		}
	}
	if (initialized) {
		kc_close(&client);
	}
	keel_arena_close(&arena);
	return status;
}

static int partitions_usage(FILE *out)
{
	fprintf(out, "usage: keel partitions reassign ... (see keel partitions reassign --help)\n");
	return out == stdout ? 0 : 2;
}

int cli_partitions(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "reassign") == 0) {
		return partitions_reassign(argc - 1, argv + 1);
	}
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		return partitions_usage(stdout);
	}
	if (argc >= 2) {
		fprintf(stderr, "keel partitions: unknown action '%s'\n", argv[1]);
	}
	return partitions_usage(stderr);
}
