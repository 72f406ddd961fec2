/*
 * kafka_meta_server — a test tool, not a broker: it answers ApiVersions and
 * Metadata with keel's codecs (src/kafka) so that real clients (kcat,
 * kafka-python, confluent-kafka) check keel's wire format, and it can save
 * every request frame it receives as a golden vector.
 *
 *   kafka_meta_server BASE_PORT [RECORD_DIR] [SECONDS] [all]
 *
 * Binds 127.0.0.1 on the first free port from BASE_PORT up (100 tries),
 * prints "port N" on stdout, and serves until killed or SECONDS (default
 * 60) have passed. It is one broker (node 1, at that port) leading topic
 * "keel-test" with partitions 0 and 1. Any other request closes that
 * connection. With RECORD_DIR, request frame number K of connection C is
 * written to RECORD_DIR/cC-K-<api_key>-v<version>.bin (the bytes after the
 * size prefix). ApiVersions advertises the core and admin APIs, or every
 * API keel has codecs for with `all`, and then also answers FindCoordinator
 * (to record a client's JoinGroup).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kafka/api.h"

#define MAX_CONNS 32
#define MAX_FRAME (1u << 20)

struct conn {
	int fd;
	int id;
	int frames;
	uint8_t *buf;
	size_t used;
};

static int listen_port;
static const char *record_dir;
static struct kafka_limits limits;
/* What a broker of issue 13 serves (no groups, idempotence or SASL yet). */
static unsigned advertised = KAFKA_SET_CORE | KAFKA_SET_ADMIN;

static void record(struct conn *c, const uint8_t *frame, size_t size)
{
	if (record_dir == NULL || size < 4) {
		return;
	}
	char path[512];
	snprintf(path, sizeof(path), "%s/c%d-%d-%d-v%d.bin", record_dir, c->id, c->frames,
	         (int16_t)keel_load_be16(frame), (int16_t)keel_load_be16(frame + 2));
	FILE *f = fopen(path, "wb");
	if (f != NULL) {
		fwrite(frame, 1, size, f);
		fclose(f);
	}
}

static enum keel_err answer_metadata(struct keel_wbuf *w, const struct kafka_request *req)
{
	static int32_t replicas[] = {1};
	struct kafka_metadata_broker broker = {1, kafka_str("127.0.0.1"), listen_port,
	                                       KAFKA_STR_NULL};
	struct kafka_metadata_partition parts[2];
	for (int32_t i = 0; i < 2; i++) {
		parts[i] = (struct kafka_metadata_partition){.partition_index = i,
		                                             .leader_id = 1,
		                                             .leader_epoch = 3,
		                                             .replica_nodes = {replicas, 1},
		                                             .isr_nodes = {replicas, 1}};
	}
	struct kafka_metadata_topic topic = {.name = kafka_str("keel-test"),
	                                     .partitions = parts,
	                                     .partition_count = 2,
	                                     .topic_authorized_operations = INT32_MIN};
	memset(topic.topic_id.b, 0x4b, sizeof(topic.topic_id.b));
	struct kafka_metadata_response m = {.brokers = &broker,
	                                    .broker_count = 1,
	                                    .cluster_id = kafka_str("keel-cluster"),
	                                    .controller_id = 1,
	                                    .topics = &topic,
	                                    .topic_count = 1,
	                                    .cluster_authorized_operations = INT32_MIN};
	return kafka_encode_response(w, req->header.correlation_id, KAFKA_API_METADATA,
	                             req->header.api_version, &m, NULL, 0, NULL);
}

/* With `all`: this server coordinates every group (so that a client goes
 * on to JoinGroup, which is recorded and then refused). */
static enum keel_err answer_find_coordinator(struct keel_wbuf *w, const struct kafka_request *req)
{
	const struct kafka_find_coordinator_request *q = &req->body.find_coordinator;
	struct kafka_coordinator coordinators[8];
	struct kafka_find_coordinator_response m = {
		.error_message = KAFKA_STR_NULL, .node_id = 1, .host = kafka_str("127.0.0.1"),
		.port = listen_port, .coordinators = coordinators};
	for (int32_t i = 0; i < q->coordinator_keys.count && i < 8; i++) {
		coordinators[i] = (struct kafka_coordinator){
			q->coordinator_keys.items[i], 1,    kafka_str("127.0.0.1"),
			listen_port,                  0, KAFKA_STR_NULL};
		m.coordinator_count = i + 1;
	}
	return kafka_encode_response(w, req->header.correlation_id, KAFKA_API_FIND_COORDINATOR,
				     req->header.api_version, &m, NULL, 0, NULL);
}

/* Answers one frame; false closes the connection. */
static bool serve_frame(struct conn *c, const uint8_t *frame, size_t size)
{
	record(c, frame, size);
	c->frames++;
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 256, MAX_FRAME);
	struct kafka_request req;
	const char *why = NULL;
	enum keel_err err = kafka_decode_request(frame, size, &arena, &limits, &req, &why);
	if (err == KEEL_UNSUPPORTED) {
		err = kafka_encode_unsupported(&w, &req.header, advertised);
	} else if (err != KEEL_OK) {
		fprintf(stderr, "bad request: %s (%s)\n", keel_errname(err), why ? why : "");
	} else if (req.header.api_key == KAFKA_API_API_VERSIONS) {
		struct kafka_api_versions_response r;
		err = kafka_api_versions_table(&arena, advertised, &r);
		if (err == KEEL_OK) {
			err = kafka_encode_response(&w, req.header.correlation_id,
			                            KAFKA_API_API_VERSIONS, req.header.api_version,
			                            &r, NULL, 0, NULL);
		}
	} else if (req.header.api_key == KAFKA_API_METADATA) {
		err = answer_metadata(&w, &req);
	} else if (req.header.api_key == KAFKA_API_FIND_COORDINATOR &&
		   advertised == KAFKA_SET_ALL) {
		err = answer_find_coordinator(&w, &req);
	} else {
		fprintf(stderr, "api %d not served here\n", req.header.api_key);
		err = KEEL_UNSUPPORTED;
	}
	bool ok = err == KEEL_OK;
	size_t off = 0;
	while (ok && off < w.size) {
		ssize_t n = write(c->fd, w.data + off, w.size - off);
		if (n <= 0) {
			ok = false;
		} else {
			off += (size_t)n;
		}
	}
	keel_wbuf_free(&w);
	keel_arena_close(&arena);
	return ok;
}

/* Reads what is there and serves every whole frame; false on close. */
static bool serve_readable(struct conn *c)
{
	ssize_t n = read(c->fd, c->buf + c->used, MAX_FRAME + 4 - c->used);
	if (n <= 0) {
		return false;
	}
	c->used += (size_t)n;
	for (;;) {
		uint32_t frame_size;
		enum keel_err err = kafka_frame_size(c->buf, c->used, &limits, &frame_size);
		if (err == KEEL_SHORT) {
			return true;
		}
		if (err != KEEL_OK) {
			return false;
		}
		if (c->used < 4 + (size_t)frame_size) {
			return true;
		}
		if (!serve_frame(c, c->buf + 4, frame_size)) {
			return false;
		}
		memmove(c->buf, c->buf + 4 + frame_size, c->used - 4 - frame_size);
		c->used -= 4 + frame_size;
	}
}

static int bind_listener(int base_port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	for (int port = base_port; port < base_port + 100; port++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 16) == 0) {
			listen_port = port;
			return fd;
		}
	}
	close(fd);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: kafka_meta_server BASE_PORT [RECORD_DIR] [SECONDS] [all]\n");
		return 2;
	}
	record_dir = argc > 2 && argv[2][0] != '\0' ? argv[2] : NULL;
	int seconds = argc > 3 ? atoi(argv[3]) : 60;
	if (argc > 4 && strcmp(argv[4], "all") == 0) {
		advertised = KAFKA_SET_ALL;
	}
	kafka_limits_default(&limits);
	limits.max_frame_size = MAX_FRAME;
	int lfd = bind_listener(atoi(argv[1]));
	if (lfd < 0) {
		fprintf(stderr, "no free port from %s\n", argv[1]);
		return 1;
	}
	printf("port %d\n", listen_port);
	fflush(stdout);
	struct conn conns[MAX_CONNS];
	int nconns = 0, next_id = 0;
	time_t end = time(NULL) + seconds;
	while (time(NULL) < end) {
		struct pollfd pfds[MAX_CONNS + 1];
		pfds[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < nconns; i++) {
			pfds[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
		}
		if (poll(pfds, (nfds_t)nconns + 1, 200) < 0 && errno != EINTR) {
			return 1;
		}
		for (int i = nconns - 1; i >= 0; i--) {
			if (pfds[i + 1].revents != 0 && !serve_readable(&conns[i])) {
				close(conns[i].fd);
				free(conns[i].buf);
				conns[i] = conns[--nconns];
			}
		}
		if ((pfds[0].revents & POLLIN) != 0 && nconns < MAX_CONNS) {
			int fd = accept(lfd, NULL, NULL);
			if (fd >= 0) {
				conns[nconns++] =
				        (struct conn){fd, next_id++, 0, malloc(MAX_FRAME + 4), 0};
			}
		}
	}
	for (int i = 0; i < nconns; i++) {
		close(conns[i].fd);
		free(conns[i].buf);
	}
	close(lfd);
	return 0;
}
