/* meta_cli.c — the session and request helpers of meta_cli.h. */
#include "cli/cli.h"
#include "cli/meta_cli.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "node/peer_auth.h"
#include "os/clock.h"

int32_t meta_cli_open(struct kc_client *c, bool *initialized, const char *who,
		      const char *servers, int32_t session_timeout_ms, int32_t call_timeout_ms)
{
	struct kc_options opt;
	memset(&opt, 0, sizeof(opt));
	opt.servers = servers;
	opt.session_timeout_ms = session_timeout_ms;
	opt.call_timeout_ms = call_timeout_ms;
	*initialized = false;
	if (kc_init(c, &opt) != KEEL_OK) {
		fprintf(stderr, "%s: %s\n", who, kc_message(c));
		return ZK_BAD_ARGUMENTS;
	}
	*initialized = true;
	int32_t err = kc_connect(c);
	if (err != ZK_OK) {
		fprintf(stderr, "%s: cannot connect to %s: %s (%s)%s\n", who, servers,
			kc_err_message(err), kc_message(c), cli_quorum_hint(err));
	}
	return err;
}

const char *cli_quorum_hint(int32_t zk_err)
{
	if (zk_err == ZK_CONNECTION_LOSS || zk_err == ZK_OPERATION_TIMEOUT) {
		return "; no server answered with a working quorum (none reachable, or fewer "
		       "than a majority of the cluster up)";
	}
	return "";
}

int32_t meta_cli_prove(struct kc_client *c, const struct peer_auth_keys *keys,
		       const char *digest)
{
	int32_t err = ZK_OK;
	if (keys != NULL && keys->count > 0) {
		err = kc_connect(c);
		if (err != ZK_OK) {
			return err;
		}
		uint8_t mac[PEER_AUTH_MAC_SIZE];
		peer_auth_session_mac(keys, (uint64_t)kc_session_id(c), kc_session_passwd(c), mac);
		err = kc_add_auth(c, PEER_AUTH_SESSION_SCHEME, zk_bytes_of(mac, sizeof(mac)));
	}
	if (err == ZK_OK && digest != NULL) {
		err = kc_add_auth(c, "digest", zk_bytes_of(digest, strlen(digest)));
	}
	return err;
}

int meta_cli_credential_arg(int argc, char **argv, int *i, struct meta_cli_credential *cred,
			    const char *who)
{
	if (*i + 1 >= argc) {
		return 0;
	}
	if (strcmp(argv[*i], "--cluster-secret-file") == 0) {
		char err[512];
		if (peer_auth_load_file(argv[*i + 1], &cred->keys, err, sizeof(err)) != KEEL_OK) {
			fprintf(stderr, "%s: %s\n", who, err);
			return -1;
		}
		*i += 1;
		return 1;
	}
	if (strcmp(argv[*i], "--auth") == 0) {
		cred->digest = argv[*i + 1];
		*i += 1;
		return 1;
	}
	return 0;
}

bool meta_cli_prove_credential(struct kc_client *c, const struct meta_cli_credential *cred,
			       const char *who)
{
	int32_t err = meta_cli_prove(c, &cred->keys, cred->digest);
	if (err == ZK_OK) {
		return true;
	}
	fprintf(stderr, "%s: %s%s\n", who,
		err == ZK_AUTH_FAILED ? "the servers refused the credential"
				      : kc_err_message(err),
		err == ZK_AUTH_FAILED ? " (--cluster-secret-file or --auth)" : "");
	return false;
}

int32_t meta_cli_call(struct kc_client *c, enum meta_api api, const struct keel_wbuf *req,
		      struct kc_raw_reply *reply)
{
	return kc_call_raw(c, META_CLI_OPCODE_BASE + (int32_t)api, req->data, req->size, reply);
}

void meta_cli_sleep(struct kc_client *c, int ms)
{
	uint64_t until = meta_cli_now_ms() + (uint64_t)(ms > 0 ? ms : 0);
	for (;;) {
		uint64_t now = meta_cli_now_ms();
		if (now >= until) {
			return;
		}
		if (kc_state(c) == KC_CONNECTED || kc_state(c) == KC_DISCONNECTED) {
			(void)kc_poll(c, (int)(until - now));
		} else {
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}

uint64_t meta_cli_now_ms(void)
{
	return keel_clock_mono_ms();
}

int meta_cli_controller_call(struct kc_client *c, const char *who, enum meta_api api,
			     const struct keel_wbuf *req, int32_t timeout_ms,
			     meta_cli_decode_fn decode, struct keel_arena *arena, void *out,
			     int16_t *error)
{
	uint64_t deadline = meta_cli_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		struct kc_raw_reply reply;
		int32_t err = meta_cli_call(c, api, req, &reply);
		if (err == ZK_OK) {
			keel_arena_reset(arena);
			if (!decode(reply.body, reply.body_size, arena, out, error)) {
				fprintf(stderr, "%s: the server's reply does not decode\n", who);
				return 1;
			}
			if (*error != META_ERR_NOT_CONTROLLER) {
				return 0;
			}
		} else if (err != ZK_CONNECTION_LOSS && err != ZK_OPERATION_TIMEOUT) {
			fprintf(stderr, "%s: %s: %s\n", who, meta_api_name(api), kc_err_message(err));
			return 1;
		}
		if (meta_cli_now_ms() >= deadline) {
			fprintf(stderr, "%s: no controller answered within %d ms\n", who, timeout_ms);
			return 1;
		}
		meta_cli_sleep(c, 200);
	}
}

/* DescribeCluster after a sync; the response points into `arena` and the
 * client's buffer (valid until the next call on c). */
int meta_cli_describe(struct kc_client *c, const char *who, const char *topic, bool brokers,
		      bool topics, struct keel_arena *arena, struct meta_describe_cluster_response *out)
{
	int32_t err = kc_sync(c, "/");
	if (err != ZK_OK) {
		fprintf(stderr, "%s: sync: %s\n", who, kc_err_message(err));
		return 1;
	}
	const char *names[1] = {topic};
	struct meta_describe_cluster_request rq = {names, topic != NULL ? 1u : 0u, brokers, topics};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, 1u << 20);
	meta_encode_describe_cluster_request(&w, &rq);
	struct kc_raw_reply reply;
	err = meta_cli_call(c, META_API_DESCRIBE_CLUSTER, &w, &reply);
	keel_wbuf_free(&w);
	if (err != ZK_OK) {
		fprintf(stderr, "%s: DescribeCluster: %s\n", who, kc_err_message(err));
		return 1;
	}
	struct meta_errbuf eb;
	memset(&eb, 0, sizeof(eb));
	if (meta_decode_describe_cluster_response(reply.body, reply.body_size, arena, out, &eb) !=
	    KEEL_OK) {
		fprintf(stderr, "%s: the server's reply does not decode: %s\n", who, eb.msg);
		return 1;
	}
	if (out->error != META_ERR_NONE) {
		fprintf(stderr, "%s: %s\n", who, meta_error_name(out->error));
		return 1;
	}
	return 0;
}
