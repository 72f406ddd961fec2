/*
 * configs.c — `keel configs describe|alter`: dynamic configs of a topic, a
 * broker or the cluster default, like kafka-configs.sh.
 *
 *	keel configs describe (--topic T | --broker N | --cluster) --servers HOSTS
 *	keel configs alter (--topic T | --broker N | --cluster)
 *	                   [--add-config K=V[,K=V...]] [--delete-config K[,K...]]
 *	                   --servers HOSTS
 *
 * describe reads the ZooKeeper view the servers keep of the metadata
 * (/config/topics/T, /config/brokers/N, /config/brokers/<default>, see
 * docs/controller.md) after a sync, and prints
 *	Dynamic configs for topic T are:
 *	  retention.ms=1000
 * alter sends one AlterConfigs to the controller (set and delete in one
 * batch); unknown names are refused by the controller, and the error names
 * the key. Exit status: 0, 1 refused or unreachable, 2 usage.
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

#define MAX_ENTRIES 64

struct configs_args {
	const char *action;
	const char *servers;
	uint8_t resource_type;
	const char *resource_name; /* "" for the cluster default */
	const char *what;          /* "topic T", "broker N", "the cluster default" */
	char what_buf[300];
	struct meta_config_kv entries[MAX_ENTRIES];
	uint32_t entry_count;
	int32_t timeout_ms;
};

static int usage(FILE *out)
{
	fprintf(out,
		"usage: keel configs describe (--topic T | --broker N | --cluster) --servers HOSTS\n"
		"       keel configs alter (--topic T | --broker N | --cluster)\n"
		"                          [--add-config K=V[,K=V...]] [--delete-config K[,K...]]\n"
		"                          --servers HOSTS\n\n"
		"Dynamic configs of a topic, a broker or the cluster-wide default (the\n"
		"defaults every topic and broker inherit). Names are Kafka's topic and broker\n"
		"config names; unknown names are refused. --timeout-ms MS bounds the retries\n"
		"while the cluster elects a controller (default 15000).\n");
	return out == stdout ? 0 : 2;
}

/* Splits "a=1,b=2" (or "a,b" for deletes) into entries; false on a bad one. */
static bool add_entries(struct configs_args *a, char *list, bool deletes)
{
	for (char *save = NULL, *item = strtok_r(list, ",", &save); item != NULL;
	     item = strtok_r(NULL, ",", &save)) {
		if (a->entry_count == MAX_ENTRIES) {
			fprintf(stderr, "keel configs: at most %d changes at once\n", MAX_ENTRIES);
			return false;
		}
		struct meta_config_kv *kv = &a->entries[a->entry_count];
		char *eq = strchr(item, '=');
		if (deletes) {
			if (eq != NULL || *item == '\0') {
				fprintf(stderr, "keel configs: --delete-config wants names, not '%s'\n",
					item);
				return false;
			}
			kv->key = item;
			kv->value = NULL;
		} else {
			if (eq == NULL || eq == item) {
				fprintf(stderr, "keel configs: --add-config wants KEY=VALUE, not '%s'\n",
					item);
				return false;
			}
			*eq = '\0';
			kv->key = item;
			kv->value = eq + 1;
		}
		a->entry_count++;
	}
	return true;
}

static bool set_resource(struct configs_args *a, uint8_t type, const char *name)
{
	if (a->resource_name != NULL) {
		fprintf(stderr, "keel configs: give one of --topic, --broker, --cluster\n");
		return false;
	}
	a->resource_type = type;
	a->resource_name = name;
	return true;
}

static bool parse_args(struct configs_args *a, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	a->action = argv[1];
	a->timeout_ms = 15000;
	for (int i = 2; i < argc; i++) {
		const char *arg = argv[i];
		bool has_value = i + 1 < argc;
		bool ok = true;
		if (strcmp(arg, "--cluster") == 0) {
			ok = set_resource(a, META_RESOURCE_BROKER, "");
		} else if (!has_value) {
			fprintf(stderr, "keel configs: unknown option '%s' (or its value is missing)\n",
				arg);
			return false;
		} else if (strcmp(arg, "--servers") == 0) {
			a->servers = argv[++i];
		} else if (strcmp(arg, "--topic") == 0) {
			ok = set_resource(a, META_RESOURCE_TOPIC, argv[++i]);
		} else if (strcmp(arg, "--broker") == 0) {
			char *end = NULL;
			errno = 0;
			long id = strtol(argv[i + 1], &end, 10);
			if (errno != 0 || *end != '\0' || end == argv[i + 1] || id < 0 ||
			    id > INT32_MAX) {
				fprintf(stderr, "keel configs: --broker wants a broker id, not '%s'\n",
					argv[i + 1]);
				return false;
			}
			ok = set_resource(a, META_RESOURCE_BROKER, argv[++i]);
		} else if (strcmp(arg, "--add-config") == 0 || strcmp(arg, "--set") == 0) {
			ok = add_entries(a, argv[++i], false);
		} else if (strcmp(arg, "--delete-config") == 0 || strcmp(arg, "--delete") == 0) {
			ok = add_entries(a, argv[++i], true);
		} else if (strcmp(arg, "--timeout-ms") == 0) {
			char *end = NULL;
			long v = strtol(argv[++i], &end, 10);
			if (*end != '\0' || v <= 0 || v > INT32_MAX) {
				fprintf(stderr, "keel configs: --timeout-ms wants a positive number\n");
				return false;
			}
			a->timeout_ms = (int32_t)v;
		} else {
			fprintf(stderr, "keel configs: unknown option '%s'\n", arg);
			return false;
		}
		if (!ok) {
			return false;
		}
	}
	if (a->servers == NULL || a->resource_name == NULL) {
		fprintf(stderr, "keel configs: --servers and one of --topic, --broker, --cluster "
				"are required\n");
		return false;
	}
	if (strcmp(a->action, "alter") == 0 && a->entry_count == 0) {
		fprintf(stderr, "keel configs alter: nothing to change (--add-config, "
				"--delete-config)\n");
		return false;
	}
	if (strcmp(a->action, "describe") == 0 && a->entry_count > 0) {
		fprintf(stderr, "keel configs describe: changes go with alter\n");
		return false;
	}
	if (a->resource_type == META_RESOURCE_TOPIC) {
		snprintf(a->what_buf, sizeof(a->what_buf), "topic %s", a->resource_name);
	} else if (a->resource_name[0] != '\0') {
		snprintf(a->what_buf, sizeof(a->what_buf), "broker %s", a->resource_name);
	} else {
		snprintf(a->what_buf, sizeof(a->what_buf), "the cluster default");
	}
	a->what = a->what_buf;
	return true;
}

static int configs_describe(struct kc_client *c, const struct configs_args *a)
{
	char path[300];
	if (a->resource_type == META_RESOURCE_TOPIC) {
		snprintf(path, sizeof(path), "/config/topics/%s", a->resource_name);
	} else {
		snprintf(path, sizeof(path), "/config/brokers/%s",
			 a->resource_name[0] != '\0' ? a->resource_name : "<default>");
	}
	int32_t err = kc_sync(c, "/");
	struct zk_bytes data = {NULL, 0};
	if (err == ZK_OK) {
		err = kc_get(c, path, false, &data, NULL);
	}
	if (err == ZK_NO_NODE) {
		if (a->resource_type == META_RESOURCE_TOPIC) {
			char topic[300];
			snprintf(topic, sizeof(topic), "/brokers/topics/%s", a->resource_name);
			if (kc_get(c, topic, false, &data, NULL) == ZK_NO_NODE) {
				fprintf(stderr, "keel configs: topic '%s' does not exist\n",
					a->resource_name);
				return 1;
			}
		}
		printf("Dynamic configs for %s are:\n", a->what);
		return 0;
	}
	if (err != ZK_OK) {
		fprintf(stderr, "keel configs: reading %s: %s\n", path, kc_err_message(err));
		return 1;
	}
	struct keel_arena arena;
	keel_arena_init(&arena, 16 * 1024);
	const struct json *doc =
		json_parse(&arena, data.data != NULL ? (const char *)data.data : "", (size_t)data.size);
	const struct json *config = doc != NULL ? json_get(doc, "config") : NULL;
	if (config == NULL || config->type != JSON_OBJECT) {
		fprintf(stderr, "keel configs: %s does not hold a config document\n", path);
		keel_arena_close(&arena);
		return 1;
	}
	printf("Dynamic configs for %s are:\n", a->what);
	for (const struct json *m = config->child; m != NULL; m = m->next) {
		/* keel's own cluster id lives among the cluster configs; it is
		 * shown at /cluster/id, not as a config to change. */
		if (strncmp(m->key, "keel.cluster.", 13) == 0) {
			continue;
		}
		printf("  %s=%s\n", m->key, m->type == JSON_STRING ? m->string : "");
	}
	keel_arena_close(&arena);
	return 0;
}

static bool decode_alter(const uint8_t *body, size_t size, struct keel_arena *arena, void *out,
			 int16_t *error)
{
	struct meta_alter_configs_response *rs = out;
	if (meta_decode_alter_configs_response(body, size, arena, rs, NULL) != KEEL_OK) {
		return false;
	}
	*error = rs->result_count > 0 ? rs->results[0].error : META_ERR_INVALID_REQUEST;
	return true;
}

static int configs_alter(struct kc_client *c, const struct configs_args *a)
{
	const char *who = "keel configs alter";
	struct meta_alter_config_resource res = {a->resource_type, a->resource_name, a->entries,
						 a->entry_count};
	struct meta_alter_configs_request rq = {&res, 1, false};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1u << 20);
	meta_encode_alter_configs_request(&w, &rq);
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_alter_configs_response rs;
	int16_t error = 0;
	int status = meta_cli_controller_call(c, who, META_API_ALTER_CONFIGS, &w, a->timeout_ms,
					      decode_alter, &arena, &rs, &error);
	if (status == 0 && error != META_ERR_NONE) {
		const char *msg = rs.results[0].error_message;
		fprintf(stderr, "%s: %s: %s%s%s\n", who, a->what, meta_error_name(error),
			msg ? ": " : "", msg ? msg : "");
		status = 1;
	} else if (status == 0) {
		printf("Completed updating config for %s.\n", a->what);
	}
	keel_arena_close(&arena);
	keel_wbuf_free(&w);
	return status;
}

int cli_configs(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		return usage(argc < 2 ? stderr : stdout);
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			return usage(stdout);
		}
	}
	if (strcmp(argv[1], "describe") != 0 && strcmp(argv[1], "alter") != 0) {
		fprintf(stderr, "keel configs: unknown action '%s'\n", argv[1]);
		return usage(stderr);
	}
	struct configs_args a;
	if (!parse_args(&a, argc, argv)) {
		return usage(stderr);
	}
	struct kc_client client;
	bool initialized = false;
	if (meta_cli_open(&client, &initialized, "keel configs", a.servers, 10000, a.timeout_ms) !=
	    ZK_OK) {
		if (initialized) {
			kc_close(&client);
		}
		return 1;
	}
	int status = strcmp(a.action, "alter") == 0 ? configs_alter(&client, &a)
						    : configs_describe(&client, &a);
	kc_close(&client);
	return status;
}
