/*
 * elect.c — `keel leader-election`: on-demand partition leader elections,
 * as kafka-leader-election.sh runs them (ElectLeaders on the controller).
 *
 *	keel leader-election --election-type preferred|unclean
 *	                     (--topic T [--partition P] | --all-topic-partitions)
 *	                     --servers HOSTS
 *
 * preferred: every named partition whose first replica is eligible and in
 * the ISR gets it as leader. unclean: a named partition without a leader
 * gets its first eligible replica, even outside the ISR (it may lose
 * acknowledged records: for when the ISR is gone for good); --all-topic-
 * partitions is refused with unclean, as Kafka refuses it.
 *
 * One line per partition:
 *	Successfully completed leader election (PREFERRED) for partition T-0
 *	Valid replica already elected for partition T-1
 *	Error completing leader election (PREFERRED) for partition T-2: PREFERRED_LEADER_NOT_AVAILABLE: ...
 * Exit status: 0 when every partition was elected or needed nothing, 1 on
 * any error, 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/alloc.h"
#include "cli/cli.h"
#include "cli/meta_cli.h"

#define MAX_TOPIC_PARTITIONS 100000

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel leader-election --election-type preferred|unclean\n"
		"                            (--topic T [--partition P] | --all-topic-partitions)\n"
		"                            --servers HOSTS [CREDENTIAL]\n\n"
		"Elects partition leaders now. preferred: the first replica takes over where it\n"
		"is eligible and in sync. unclean: an offline partition takes any live replica,\n"
		"which may lose acknowledged records.\n"
		"CREDENTIAL (needed when the servers have a secret): --cluster-secret-file\n"
		"FILE (the servers' secret) or --auth super:PASSWORD.\n");
	return out == stdout ? 0 : 2;
}

static bool decode_elect(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			 int16_t *error)
{
	struct meta_elect_leaders_response *rs = out;
	if (meta_decode_elect_leaders_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->error;
	return true;
}

static bool parse_long(const char *what, const char *text, long max, long *out)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || v < 0 || v > max) {
		fprintf(stderr, "keel leader-election: %s wants a number, not '%s'\n", what, text);
		return false;
	}
	*out = v;
	return true;
}

int cli_leader_election(int argc, char **argv)
{
	const char *servers = NULL;
	const char *type_name = NULL;
	const char *topic = NULL;
	long partition = -1;
	bool all = false;
	int32_t timeout_ms = 15000;
	static struct meta_cli_credential cred;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		bool has_value = i + 1 < argc;
		long v = 0;
		int took = meta_cli_credential_arg(argc, argv, &i, &cred, "keel leader-election");
		if (took < 0) {
			return 2;
		}
		if (took > 0) {
			continue;
		}
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			return usage(stdout);
		} else if (strcmp(arg, "--all-topic-partitions") == 0) {
			all = true;
		} else if (strcmp(arg, "--servers") == 0 && has_value) {
			servers = argv[++i];
		} else if (strcmp(arg, "--election-type") == 0 && has_value) {
			type_name = argv[++i];
		} else if (strcmp(arg, "--topic") == 0 && has_value) {
			topic = argv[++i];
		} else if (strcmp(arg, "--partition") == 0 && has_value) {
			if (!parse_long("--partition", argv[++i], INT32_MAX, &partition)) {
				return 2;
			}
		} else if (strcmp(arg, "--timeout-ms") == 0 && has_value) {
			if (!parse_long("--timeout-ms", argv[++i], INT32_MAX, &v) || v == 0) {
				return 2;
			}
			timeout_ms = (int32_t)v;
		} else {
			fprintf(stderr, "keel leader-election: unexpected argument '%s'\n", arg);
			return usage(stderr);
		}
	}
	int8_t type;
	if (type_name != NULL && strcasecmp(type_name, "preferred") == 0) {
		type = META_ELECTION_PREFERRED;
	} else if (type_name != NULL && strcasecmp(type_name, "unclean") == 0) {
		type = META_ELECTION_UNCLEAN;
	} else {
		fprintf(stderr, "keel leader-election: --election-type is preferred or unclean\n");
		return usage(stderr);
	}
	if (servers == NULL || (topic == NULL) == !all || (partition >= 0 && topic == NULL)) {
		fprintf(stderr, "keel leader-election: --servers and either --topic T [--partition "
				"P] or --all-topic-partitions are required\n");
		return usage(stderr);
	}
	struct kc_client client;
	bool initialized = false;
	if (meta_cli_open(&client, &initialized, "keel leader-election", servers, 10000,
			  timeout_ms) != ZK_OK ||
	    !meta_cli_prove_credential(&client, &cred, "keel leader-election")) {
		if (initialized) {
			kc_close(&client);
		}
		return 1;
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 64 * 1024);
	/* A topic without --partition means all its partitions: list them. */
	int32_t *parts = NULL;
	uint32_t part_count = 0;
	int status = 0;
	if (topic != NULL && partition < 0) {
		struct meta_describe_cluster_response ds;
		const char *names[1] = {topic};
		struct meta_describe_cluster_request dq = {names, 1, false, true};
		struct keel_wbuf dw;
		keel_wbuf_init_dynamic(&dw, 256, 1u << 16);
		meta_encode_describe_cluster_request(&dw, &dq);
		struct kc_raw_reply reply;
		int32_t err = meta_cli_call(&client, META_API_DESCRIBE_CLUSTER, &dw, &reply);
		keel_wbuf_free(&dw);
		if (err != ZK_OK || meta_decode_describe_cluster_response(reply.body, reply.body_size,
									  &arena, &ds, NULL) != KEEL_OK ||
		    ds.topic_count != 1 || ds.topics[0].error != META_ERR_NONE) {
			fprintf(stderr, "keel leader-election: topic '%s' does not exist\n", topic);
			status = 1;
		} else {
			part_count = ds.topics[0].partition_count;
			parts = keel_arena_alloc(&arena, (part_count + 1u) * sizeof(*parts));
			for (uint32_t i = 0; parts != NULL && i < part_count; i++) {
				parts[i] = ds.topics[0].partitions[i].partition_id;
			}
		}
	} else if (topic != NULL) {
		parts = keel_arena_alloc(&arena, sizeof(*parts));
		if (parts != NULL) {
			parts[0] = (int32_t)partition;
			part_count = 1;
		}
	}
	const char *label = type == META_ELECTION_PREFERRED ? "PREFERRED" : "UNCLEAN";
	if (status == 0) {
		struct meta_elect_topic t = {topic, parts, part_count};
		struct meta_elect_leaders_request rq = {type, all, &t, all ? 0u : 1u};
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 256, 1u << 20);
		meta_encode_elect_leaders_request(&w, &rq);
		struct meta_elect_leaders_response rs;
		int16_t error = 0;
		struct keel_arena reply_arena;
		keel_arena_init(&reply_arena, 64 * 1024);
		status = meta_cli_controller_call(&client, "keel leader-election",
						  META_API_ELECT_LEADERS, &w, timeout_ms,
						  decode_elect, &reply_arena, &rs, &error);
		if (status == 0 && error != META_ERR_NONE) {
			fprintf(stderr, "keel leader-election: %s%s%s\n", meta_error_name(error),
				rs.error_message ? ": " : "", rs.error_message ? rs.error_message : "");
			status = 1;
		}
		for (uint32_t i = 0; status == 0 && i < rs.result_count; i++) {
			const struct meta_elect_partition_result *r = &rs.results[i];
			if (r->error == META_ERR_NONE) {
				printf("Successfully completed leader election (%s) for partition "
				       "%s-%d\n",
				       label, r->topic, r->partition_id);
			} else if (r->error == META_ERR_ELECTION_NOT_NEEDED) {
				printf("Valid replica already elected for partition %s-%d\n",
				       r->topic, r->partition_id);
			} else {
				printf("Error completing leader election (%s) for partition %s-%d: "
				       "%s%s%s\n",
				       label, r->topic, r->partition_id, meta_error_name(r->error),
				       r->error_message ? ": " : "",
				       r->error_message ? r->error_message : "");
			}
		}
		for (uint32_t i = 0; status == 0 && i < rs.result_count; i++) {
			int16_t e = rs.results[i].error;
			if (e != META_ERR_NONE && e != META_ERR_ELECTION_NOT_NEEDED) {
				status = 1;
			}
		}
		keel_arena_close(&reply_arena);
		keel_wbuf_free(&w);
	}
	keel_arena_close(&arena);
	kc_close(&client);
	return status;
}
