/*
 * admin_client.c — `keel status`, `keel members ...`, `keel leader
 * transfer`, `keel snapshot` over the admin protocol.
 */
#include "cli/admin_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/buf.h"
#include "cli/json.h"
#include "net/net.h"
#include "node/admin.h"
#include "node/peer_auth.h"

#define DEFAULT_TIMEOUT_MS 10000
#define MAX_SERVERS 16
#define CREDENTIAL_HELP                                                                        \
	"CREDENTIAL: --cluster-secret-file FILE (the servers' secret), or --auth\n"             \
	"super:PASSWORD (the server's --super-digest); none for --insecure-peers servers.\n"

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli_connect(const char *addr, int timeout_ms)
{
	struct sockaddr_storage ss;
	if (net_parse_addr(addr, &ss) != KEEL_OK) {
		errno = EINVAL;
		return -1;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	socklen_t len = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
						: sizeof(struct sockaddr_in6);
	if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	struct pollfd pfd = {.fd = fd, .events = POLLOUT};
	if (poll(&pfd, 1, timeout_ms) != 1) {
		close(fd);
		errno = ETIMEDOUT;
		return -1;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr != 0) {
		close(fd);
		errno = soerr;
		return -1;
	}
	return fd;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				struct pollfd pfd = {.fd = fd, .events = POLLOUT};
				poll(&pfd, 1, 1000);
				continue;
			}
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int cli_send_frame(int fd, const void *payload, size_t size)
{
	uint8_t hdr[4];
	keel_store_be32(hdr, (uint32_t)size);
	if (write_all(fd, hdr, 4) != 0) {
		return -1;
	}
	return write_all(fd, payload, size);
}

static int read_all(int fd, uint8_t *p, size_t n, long deadline)
{
	while (n > 0) {
		long left = deadline - now_ms();
		if (left <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR) {
			continue;
		}
		if (pr <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		ssize_t r = recv(fd, p, n, 0);
		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				continue;
			}
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int cli_recv_frame(int fd, uint8_t **payload, size_t *size, size_t max_size, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	uint8_t hdr[4];
	if (read_all(fd, hdr, 4, deadline) != 0) {
		return -1;
	}
	uint32_t len = keel_load_be32(hdr);
	if (len > max_size) {
		errno = EMSGSIZE;
		return -1;
	}
	uint8_t *buf = malloc(len + 1);
	if (buf == NULL || read_all(fd, buf, len, deadline) != 0) {
		free(buf);
		return -1;
	}
	buf[len] = '\0';
	*payload = buf;
	*size = len;
	return 0;
}

/* One request and its reply on an open admin connection. */
static int admin_roundtrip(int fd, const char *addr, uint8_t op, const void *body,
			   size_t body_size, int timeout_ms, struct admin_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 64, 1 << 20);
	keel_wbuf_u32(&w, ADMIN_MAGIC);
	keel_wbuf_u8(&w, ADMIN_VERSION);
	keel_wbuf_u8(&w, op);
	keel_wbuf_u64(&w, 1);
	keel_wbuf_bytes(&w, body, body_size);
	uint8_t *resp = NULL;
	size_t resp_size = 0;
	int rc = cli_send_frame(fd, w.data, w.size);
	keel_wbuf_free(&w);
	if (rc == 0) {
		rc = cli_recv_frame(fd, &resp, &resp_size, 64u << 20, timeout_ms);
	}
	if (rc != 0) {
		snprintf(reply->message, sizeof(reply->message), "%s: %s", addr, strerror(errno));
		return -1;
	}
	struct keel_rbuf r;
	keel_rbuf_init(&r, resp, resp_size);
	uint32_t magic = keel_rbuf_u32(&r);
	keel_rbuf_u8(&r);
	keel_rbuf_u8(&r);
	keel_rbuf_u64(&r);
	reply->err = (enum keel_err)keel_rbuf_u32(&r);
	uint16_t mlen = keel_rbuf_u16(&r);
	const uint8_t *msg = keel_rbuf_bytes(&r, mlen);
	if (!keel_rbuf_ok(&r) || magic != ADMIN_MAGIC) {
		free(resp);
		snprintf(reply->message, sizeof(reply->message), "%s: malformed reply", addr);
		return -1;
	}
	size_t ml = KEEL_MIN((size_t)mlen, sizeof(reply->message) - 1);
	memcpy(reply->message, msg, ml);
	reply->message[ml] = '\0';
	reply->body_size = keel_rbuf_remaining(&r);
	reply->body = malloc(reply->body_size + 1);
	if (reply->body != NULL) {
		memcpy(reply->body, keel_rbuf_bytes(&r, reply->body_size), reply->body_size);
		reply->body[reply->body_size] = '\0';
	}
	free(resp);
	return 0;
}

/* Proves the credential on fd: 0 when accepted; otherwise reply says why
 * (reply->err KEEL_AUTH when refused, -1 on a connection problem). */
static int admin_authenticate(int fd, const char *addr, const struct admin_credential *cred,
			      int timeout_ms, struct admin_reply *reply)
{
	uint8_t body[3 + 256];
	size_t size;
	if (cred->keys != NULL) {
		if (admin_roundtrip(fd, addr, ADMIN_OP_AUTH_NONCE, NULL, 0, timeout_ms, reply) != 0) {
			return -1;
		}
		bool good = reply->err == KEEL_OK && reply->body != NULL &&
			    reply->body_size == PEER_AUTH_NONCE_SIZE + 8;
		uint8_t server_nonce[PEER_AUTH_NONCE_SIZE];
		uint64_t server_id = 0;
		if (good) {
			memcpy(server_nonce, reply->body, PEER_AUTH_NONCE_SIZE);
			server_id = keel_load_be64(reply->body + PEER_AUTH_NONCE_SIZE);
		}
		free(reply->body);
		if (!good) {
			return reply->err == KEEL_OK ? -1 : 1;
		}
		body[0] = ADMIN_AUTH_SECRET;
		if (peer_auth_random(body + 1, PEER_AUTH_NONCE_SIZE) != KEEL_OK) {
			snprintf(reply->message, sizeof(reply->message), "no random bytes");
			return -1;
		}
		peer_auth_admin_mac(cred->keys, server_id, server_nonce, body + 1,
				    body + 1 + PEER_AUTH_NONCE_SIZE);
		size = 1 + PEER_AUTH_NONCE_SIZE + PEER_AUTH_MAC_SIZE;
	} else {
		size_t len = strlen(cred->digest_auth);
		if (len > 256) {
			snprintf(reply->message, sizeof(reply->message), "--auth is too long");
			return -1;
		}
		body[0] = ADMIN_AUTH_DIGEST;
		keel_store_be16(body + 1, (uint16_t)len);
		memcpy(body + 3, cred->digest_auth, len);
		size = 3 + len;
	}
	if (admin_roundtrip(fd, addr, ADMIN_OP_AUTH, body, size, timeout_ms, reply) != 0) {
		return -1;
	}
	free(reply->body);
	reply->body = NULL;
	return reply->err == KEEL_OK ? 0 : 1;
}

int admin_call(const char *addr, const struct admin_credential *cred, uint8_t op,
	       const void *body, size_t body_size, int timeout_ms, struct admin_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	int fd = cli_connect(addr, KEEL_MIN(timeout_ms, 3000));
	if (fd < 0) {
		snprintf(reply->message, sizeof(reply->message), "cannot connect to %s: %s", addr,
			 strerror(errno));
		return -1;
	}
	int rc = 0;
	if (cred != NULL && (cred->keys != NULL || cred->digest_auth != NULL)) {
		rc = admin_authenticate(fd, addr, cred, timeout_ms, reply);
	}
	if (rc == 0) {
		rc = admin_roundtrip(fd, addr, op, body, body_size, timeout_ms, reply);
	} else if (rc > 0) {
		rc = 0; /* refused: the reply says so */
	}
	close(fd);
	return rc;
}

size_t cli_split_servers(char *list, char **out, size_t max)
{
	size_t n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(list, ",", &save); tok != NULL && n < max;
	     tok = strtok_r(NULL, ",", &save)) {
		out[n++] = tok;
	}
	return n;
}

struct common_opts {
	char *servers[MAX_SERVERS];
	size_t n_servers;
	int timeout_ms;
	bool json;
	char *positional[4];
	size_t n_positional;
	struct peer_auth_keys keys;
	struct admin_credential cred;
};

static int parse_common(int argc, char **argv, struct common_opts *o, const char *usage)
{
	memset(o, 0, sizeof(*o));
	o->timeout_ms = DEFAULT_TIMEOUT_MS;
	static char default_servers[] = "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183";
	char *servers = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc) {
			servers = argv[++i];
		} else if (strncmp(argv[i], "--servers=", 10) == 0) {
			servers = argv[i] + 10;
		} else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
			o->timeout_ms = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--json") == 0) {
			o->json = true;
		} else if (strcmp(argv[i], "--cluster-secret-file") == 0 && i + 1 < argc) {
			char err[512];
			if (peer_auth_load_file(argv[++i], &o->keys, err, sizeof(err)) != KEEL_OK) {
				fprintf(stderr, "%s\n", err);
				return 2;
			}
			o->cred.keys = &o->keys;
		} else if (strcmp(argv[i], "--auth") == 0 && i + 1 < argc) {
			o->cred.digest_auth = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("%s", usage);
			return 1;
		} else if (argv[i][0] == '-' && argv[i][1] == '-') {
			fprintf(stderr, "unknown option %s\n%s", argv[i], usage);
			return 2;
		} else if (o->n_positional < 4) {
			o->positional[o->n_positional++] = argv[i];
		}
	}
	o->n_servers = cli_split_servers(servers != NULL ? servers : default_servers, o->servers,
					 MAX_SERVERS);
	return 0;
}

/* Sends the request to each server until one answers (followers forward
 * to the leader themselves). Prints the outcome; returns the exit code. */
static int call_any(struct common_opts *o, uint8_t op, const void *body, size_t size)
{
	struct admin_reply reply;
	for (size_t i = 0; i < o->n_servers; i++) {
		if (admin_call(o->servers[i], &o->cred, op, body, size, o->timeout_ms, &reply) != 0) {
			fprintf(stderr, "%s\n", reply.message);
			continue;
		}
		free(reply.body);
		if (reply.err == KEEL_NOLEADER || reply.err == KEEL_NOTLEADER) {
			fprintf(stderr, "%s: %s\n", o->servers[i], reply.message);
			continue;
		}
		if (reply.err != KEEL_OK) {
			fprintf(stderr, "error: %s (%s)\n", reply.message, keel_strerror(reply.err));
			return 1;
		}
		printf("%s\n", reply.message);
		return 0;
	}
	fprintf(stderr, "error: no server could carry out the request\n");
	return 1;
}

int cli_status(int argc, char **argv)
{
	const char *usage = "usage: keel status [--servers HOST:PORT,...] [--json]\n"
			    "Shows every server's role, term, leader, commit and applied index,\n"
			    "and (from the leader) each member's replication lag. --json prints\n"
			    "one document: {\"servers\":[<each server's status or\n"
			    "{\"server\":ADDR,\"error\":\"unreachable\"}>, ...]}.\n";
	struct common_opts o;
	int prc = parse_common(argc, argv, &o, usage);
	if (prc != 0) {
		return prc == 1 ? 0 : 2;
	}
	int failures = 0;
	struct keel_arena arena;
	keel_arena_init(&arena, 1 << 16);
	const struct json *leader_doc = NULL;
	if (o.json) {
		printf("{\"servers\":[");
	} else {
		printf("%-4s %-22s %-10s %-6s %-7s %-10s %-10s %-10s\n", "ID", "CLIENT ADDRESS",
		       "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED", "SNAPSHOT");
	}
	for (size_t i = 0; i < o.n_servers; i++) {
		struct admin_reply reply;
		if (admin_call(o.servers[i], NULL, ADMIN_OP_STATUS, NULL, 0, o.timeout_ms, &reply) != 0) {
			if (o.json) {
				printf("%s{\"server\":\"%s\",\"error\":\"unreachable\"}",
				       i > 0 ? "," : "", o.servers[i]);
			} else {
				printf("%-4s %-22s %s\n", "?", o.servers[i], "unreachable");
			}
			failures++;
			continue;
		}
		if (o.json) {
			/* One server's document, as an element of the array. */
			size_t len = reply.body_size;
			while (len > 0 && (reply.body[len - 1] == '\n' || reply.body[len - 1] == ' ')) {
				len--;
			}
			printf("%s%.*s", i > 0 ? "," : "", (int)len, (const char *)reply.body);
			free(reply.body);
			continue;
		}
		const struct json *doc = json_parse(&arena, (const char *)reply.body, reply.body_size);
		if (doc == NULL) {
			printf("%-4s %-22s %s\n", "?", o.servers[i], "malformed status");
			free(reply.body);
			failures++;
			continue;
		}
		printf("%-4.0f %-22s %-10s %-6.0f %-7.0f %-10.0f %-10.0f %-10.0f\n",
		       json_num(doc, "id", 0), o.servers[i], json_str(doc, "role", "?"),
		       json_num(doc, "term", 0), json_num(doc, "leader", 0),
		       json_num(doc, "commit_index", 0), json_num(doc, "applied_index", 0),
		       json_num(doc, "snapshot_index", 0));
		if (strcmp(json_str(doc, "role", ""), "leader") == 0) {
			leader_doc = doc;
		}
		free(reply.body);
	}
	if (o.json) {
		printf("]}\n");
	}
	if (!o.json && leader_doc != NULL) {
		printf("\nmembers (leader's view):\n%-4s %-8s %-22s %-10s %-10s %-10s %s\n", "ID",
		       "ROLE", "PEER ADDRESS", "STATE", "MATCH", "LAG", "CONNECTED");
		const struct json *members = json_get(leader_doc, "members");
		for (const struct json *m = members != NULL ? members->child : NULL; m != NULL;
		     m = m->next) {
			printf("%-4.0f %-8s %-22s %-10s %-10.0f %-10.0f %s\n", json_num(m, "id", 0),
			       json_str(m, "role", "?"), json_str(m, "peer_addr", ""),
			       json_str(m, "state", "?"), json_num(m, "match_index", 0),
			       json_num(m, "lag", 0),
			       json_get(m, "connected") == NULL
				       ? "-"
				       : (json_bool(m, "connected", false) ? "yes" : "no"));
		}
	} else if (!o.json && failures < (int)o.n_servers) {
		printf("\nno leader among the servers asked\n");
	}
	keel_arena_close(&arena);
	return failures == (int)o.n_servers ? 1 : 0;
}

int cli_members(int argc, char **argv)
{
	const char *usage =
		"usage: keel members add ID=HOST:PEERPORT [--servers HOSTS] CREDENTIAL\n"
		"       keel members add-learner ID=HOST:PEERPORT [--servers HOSTS] CREDENTIAL\n"
		"       keel members promote ID [--servers HOSTS] CREDENTIAL\n"
		"       keel members remove ID [--servers HOSTS] CREDENTIAL\n"
		"`add` joins the server as a learner, waits until it caught up, then\n"
		"promotes it to voter. Start the new server with --join first.\n"
		CREDENTIAL_HELP;
	struct common_opts o;
	int prc = parse_common(argc, argv, &o, usage);
	if (prc != 0) {
		return prc == 1 ? 0 : 2;
	}
	if (o.n_positional != 2) {
		fprintf(stderr, "%s", usage);
		return 2;
	}
	const char *verb = o.positional[0];
	uint8_t change;
	if (strcmp(verb, "add") == 0) {
		change = ADMIN_MEMBER_ADD;
	} else if (strcmp(verb, "add-learner") == 0) {
		change = ADMIN_MEMBER_ADD_LEARNER;
	} else if (strcmp(verb, "promote") == 0) {
		change = ADMIN_MEMBER_PROMOTE;
	} else if (strcmp(verb, "remove") == 0) {
		change = ADMIN_MEMBER_REMOVE;
	} else {
		fprintf(stderr, "%s", usage);
		return 2;
	}
	char *arg = o.positional[1];
	char *eq = strchr(arg, '=');
	const char *addr = "";
	if (eq != NULL) {
		*eq = '\0';
		addr = eq + 1;
	}
	char *end;
	unsigned long long id = strtoull(arg, &end, 10);
	if (*arg == '\0' || *end != '\0' || id == 0 || id > 254) {
		fprintf(stderr, "bad server id '%s' (1..254)\n", arg);
		return 2;
	}
	if ((change == ADMIN_MEMBER_ADD || change == ADMIN_MEMBER_ADD_LEARNER) && *addr == '\0') {
		fprintf(stderr, "%s needs ID=HOST:PEERPORT\n", verb);
		return 2;
	}
	if (change == ADMIN_MEMBER_ADD && o.timeout_ms == DEFAULT_TIMEOUT_MS) {
		o.timeout_ms = 310000; /* catching up may take a while */
	}
	uint8_t body[NODE_ADDR_SIZE + 16];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, body, sizeof(body));
	keel_wbuf_u8(&w, change);
	keel_wbuf_u64(&w, id);
	size_t alen = strlen(addr);
	keel_wbuf_u16(&w, (uint16_t)alen);
	keel_wbuf_bytes(&w, addr, alen);
	if (!keel_wbuf_ok(&w)) {
		fprintf(stderr, "address too long\n");
		return 2;
	}
	return call_any(&o, ADMIN_OP_MEMBER_CHANGE, body, w.size);
}

int cli_leader(int argc, char **argv)
{
	const char *usage = "usage: keel leader transfer ID [--servers HOSTS] CREDENTIAL\n"
		CREDENTIAL_HELP;
	struct common_opts o;
	int prc = parse_common(argc, argv, &o, usage);
	if (prc != 0) {
		return prc == 1 ? 0 : 2;
	}
	if (o.n_positional != 2 || strcmp(o.positional[0], "transfer") != 0) {
		fprintf(stderr, "%s", usage);
		return 2;
	}
	char *end;
	unsigned long long id = strtoull(o.positional[1], &end, 10);
	if (*end != '\0' || id == 0) {
		fprintf(stderr, "bad server id '%s'\n", o.positional[1]);
		return 2;
	}
	uint8_t body[8];
	keel_store_be64(body, id);
	return call_any(&o, ADMIN_OP_TRANSFER, body, sizeof(body));
}

int cli_snapshot(int argc, char **argv)
{
	const char *usage = "usage: keel snapshot --servers HOST:PORT CREDENTIAL\n"
			    "Asks each listed server to write a snapshot now.\n" CREDENTIAL_HELP;
	struct common_opts o;
	int prc = parse_common(argc, argv, &o, usage);
	if (prc != 0) {
		return prc == 1 ? 0 : 2;
	}
	int rc = 0;
	for (size_t i = 0; i < o.n_servers; i++) {
		struct admin_reply reply;
		if (admin_call(o.servers[i], &o.cred, ADMIN_OP_SNAPSHOT, NULL, 0, o.timeout_ms, &reply) != 0) {
			fprintf(stderr, "%s\n", reply.message);
			rc = 1;
			continue;
		}
		printf("%s: %s\n", o.servers[i], reply.message);
		free(reply.body);
		if (reply.err != KEEL_OK) {
			rc = 1;
		}
	}
	return rc;
}
