/*
 * kafka_client.c — `keel produce` and `keel consume`: a small blocking
 * Kafka client for quick use, written with keel's own codecs (src/kafka)
 * and batch helpers (src/plog/batch.h).
 *
 *	keel produce --brokers HOST:PORT --topic T [--key K] [--partition P]
 *	keel consume --brokers HOST:PORT --topic T [--partition P]
 *	             [--from-beginning] [--max-messages N]
 *
 * produce reads lines from stdin and sends each 500 lines (or what is there
 * at the end) as one uncompressed batch, acks=all, to the partition's
 * leader: --partition, else Kafka's murmur2 partitioner on --key, else
 * partitions in turn. consume reads one partition (default 0) from its
 * leader, printing each record's value on a line; compressed batches are
 * reported and skipped (decompression is the clients' business).
 * Versions: Metadata v1, Produce v3, ListOffsets v1, Fetch v4 (none
 * flexible). Errors are printed and the command exits 1.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "cli/cli.h"
#include "cli/kafka_conn.h"
#include "kafka/api.h"
#include "plog/batch.h"

#define BATCH_LINES 500
#define MAX_LINE    (1 << 20)

int kclient_dial(const char *who, const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host)) {
		fprintf(stderr, "%s: '%s' is not HOST:PORT\n", who, hostport);
		return -1;
	}
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = '\0';
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_socktype = SOCK_STREAM;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "%s: %s: %s\n", who, hostport, gai_strerror(rc));
		return -1;
	}
	int fd = -1;
	for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot connect to %s: %s\n", who, hostport, strerror(errno));
	}
	return fd;
}

static bool io_all(int fd, void *buf, size_t n, bool writing)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t r = writing ? write(fd, p, n) : read(fd, p, n);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			return false;
		}
		p += r;
		n -= (size_t)r;
	}
	return true;
}

bool kclient_call(struct kclient *k, int16_t api_key, int16_t version, const void *body, void *resp)
{
	struct kafka_request_header h = {api_key, version, ++k->correlation_id,
	                                 kafka_str("keel-cli")};
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 4096, 64u << 20);
	bool ok = kafka_encode_request(&w, &h, body) == KEEL_OK &&
	          io_all(k->fd, w.data, w.size, true);
	keel_wbuf_free(&w);
	uint8_t prefix[4];
	uint32_t size = 0;
	if (!ok || !io_all(k->fd, prefix, 4, false) ||
	    kafka_frame_size(prefix, 4, &k->limits, &size) != KEEL_OK) {
		fprintf(stderr, "%s: the broker closed the connection\n", k->who);
		return false;
	}
	if (size > k->frame_cap) {
		uint8_t *n = realloc(k->frame, size);
		if (n == NULL) {
			return false;
		}
		k->frame = n;
		k->frame_cap = size;
	}
	int32_t corr = 0;
	const char *why = NULL;
	if (!io_all(k->fd, k->frame, size, false) ||
	    kafka_decode_response(k->frame, size, api_key, version, &k->arena, &k->limits, &corr,
	                          resp, &why) != KEEL_OK ||
	    corr != h.correlation_id) {
		fprintf(stderr, "%s: bad response from the broker%s%s\n", k->who,
		        why != NULL ? ": " : "", why != NULL ? why : "");
		return false;
	}
	return true;
}

struct kargs {
	const char *brokers, *topic, *key;
	long partition; /* -1: not given */
	long max_messages;
	bool from_beginning;
};

/* Leaders of the topic's partitions (by index) and their endpoints; the
 * connection then moves to `partition`'s leader. Returns the partition
 * count, or -1. */
static int32_t connect_leader(struct kclient *k, const struct kargs *a, int32_t *partition)
{
	struct kafka_metadata_request_topic t = {{{0}}, kafka_str(a->topic)};
	struct kafka_metadata_request rq = {&t, 1, false, false, false};
	struct kafka_metadata_response md;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_METADATA, 1, &rq, &md)) {
		return -1;
	}
	if (md.topic_count != 1 || md.topics[0].error_code != KAFKA_NONE) {
		fprintf(stderr, "%s: topic '%s': %s\n", k->who, a->topic,
		        kafka_error_name(md.topic_count == 1 ? md.topics[0].error_code
		                                             : KAFKA_UNKNOWN_SERVER_ERROR));
		return -1;
	}
	int32_t n = md.topics[0].partition_count;
	if (*partition >= n) {
		fprintf(stderr, "%s: topic '%s' has %d partitions\n", k->who, a->topic, n);
		return -1;
	}
	int32_t leader = -1;
	for (int32_t i = 0; i < n; i++) {
		if (md.topics[0].partitions[i].partition_index == *partition) {
			leader = md.topics[0].partitions[i].leader_id;
		}
	}
	for (int32_t i = 0; i < md.broker_count; i++) {
		if (md.brokers[i].node_id != leader) {
			continue;
		}
		char hp[300];
		snprintf(hp, sizeof(hp), "%.*s:%d", (int)md.brokers[i].host.len,
		         md.brokers[i].host.ptr, md.brokers[i].port);
		int fd = kclient_dial(k->who, hp);
		if (fd < 0) {
			return -1;
		}
		close(k->fd);
		k->fd = fd;
		return n;
	}
	fprintf(stderr, "%s: %s-%d has no leader\n", k->who, a->topic, *partition);
	return -1;
}

/* ---- produce ---- */

/* Kafka's default partitioner: murmur2 of the key, made positive. */
static uint32_t murmur2(const uint8_t *data, size_t len)
{
	const uint32_t m = 0x5bd1e995u;
	uint32_t h = 0x9747b28cu ^ (uint32_t)len;
	size_t i = 0;
	for (; i + 4 <= len; i += 4) {
		uint32_t k = (uint32_t)data[i] | (uint32_t)data[i + 1] << 8 |
		             (uint32_t)data[i + 2] << 16 | (uint32_t)data[i + 3] << 24;
		k *= m;
		k ^= k >> 24;
		k *= m;
		h *= m;
		h ^= k;
	}
	switch (len - i) {
	case 3:
		h ^= (uint32_t)data[i + 2] << 16;
		/* fall through */
	case 2:
		h ^= (uint32_t)data[i + 1] << 8;
		/* fall through */
	case 1:
		h ^= data[i];
		h *= m;
	}
	h ^= h >> 13;
	h *= m;
	h ^= h >> 15;
	return h & 0x7fffffffu;
}

/* Appends one record (offset delta i) to w. */
static void put_record(struct keel_wbuf *w, int32_t i, const char *key, const char *value,
                       size_t value_len)
{
	uint8_t head[64];
	size_t klen = key != NULL ? strlen(key) : 0;
	size_t n = 0;
	head[n++] = 0;                       /* attributes */
	n += plog_varint_write(head + n, 0); /* timestamp delta */
	n += plog_varint_write(head + n, i); /* offset delta */
	n += plog_varint_write(head + n, key != NULL ? (int64_t)klen : -1);
	uint8_t vlen[10];
	size_t vn = plog_varint_write(vlen, (int64_t)value_len);
	size_t body = n + klen + vn + value_len + 1;
	uint8_t len[10];
	keel_wbuf_bytes(w, len, plog_varint_write(len, (int64_t)body));
	keel_wbuf_bytes(w, head, n);
	keel_wbuf_bytes(w, key, klen);
	keel_wbuf_bytes(w, vlen, vn);
	keel_wbuf_bytes(w, value, value_len);
	keel_wbuf_u8(w, 0); /* no headers */
}

static bool send_batch(struct kclient *k, const struct kargs *a, int32_t partition,
                       struct keel_wbuf *b, int32_t count, int64_t now_ms)
{
	uint8_t *p = b->data;
	keel_store_be64(p, 0);
	keel_store_be32(p + 8, (uint32_t)(b->size - PLOG_BATCH_LOG_OVERHEAD));
	keel_store_be32(p + 12, 0);
	p[16] = PLOG_BATCH_MAGIC;
	keel_store_be16(p + 21, 0);
	keel_store_be32(p + 23, (uint32_t)(count - 1));
	keel_store_be64(p + 27, (uint64_t)now_ms);
	keel_store_be64(p + 35, (uint64_t)now_ms);
	keel_store_be64(p + 43, (uint64_t)-1);
	keel_store_be16(p + 51, (uint16_t)-1);
	keel_store_be32(p + 53, (uint32_t)-1);
	keel_store_be32(p + 57, (uint32_t)count);
	plog_batch_seal(p, b->size);
	struct kafka_produce_partition pp = {partition, {p, (int32_t)b->size}};
	struct kafka_produce_topic pt = {kafka_str(a->topic), &pp, 1};
	struct kafka_produce_request rq = {KAFKA_STR_NULL, -1, 30000, &pt, 1};
	struct kafka_produce_response rs;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_PRODUCE, 3, &rq, &rs)) {
		return false;
	}
	int16_t err = rs.topic_count == 1 && rs.topics[0].partition_count == 1
	                      ? rs.topics[0].partitions[0].error_code
	                      : KAFKA_UNKNOWN_SERVER_ERROR;
	if (err != KAFKA_NONE) {
		fprintf(stderr, "%s: %s-%d: %s\n", k->who, a->topic, partition,
		        kafka_error_name(err));
		return false;
	}
	return true;
}

static int produce(struct kclient *k, const struct kargs *a)
{
	int32_t partition = a->partition >= 0 ? (int32_t)a->partition : 0;
	int32_t count = connect_leader(k, a, &partition);
	if (count < 0) {
		return 1;
	}
	if (a->partition < 0 && a->key != NULL) {
		partition = (int32_t)(murmur2((const uint8_t *)a->key, strlen(a->key)) %
		                      (uint32_t)count);
	}
	char *line = malloc(MAX_LINE);
	struct keel_wbuf b;
	keel_wbuf_init_dynamic(&b, 64 * 1024, 64u << 20);
	int status = line == NULL ? 1 : 0;
	int32_t next = partition;
	bool eof = false;
	while (status == 0 && !eof) {
		keel_wbuf_reset(&b);
		keel_wbuf_zero(&b, PLOG_BATCH_HEADER_SIZE);
		int32_t n = 0;
		while (n < BATCH_LINES && !(eof = fgets(line, MAX_LINE, stdin) == NULL)) {
			size_t len = strcspn(line, "\n");
			put_record(&b, n++, a->key, line, len);
		}
		if (n == 0) {
			break;
		}
		int32_t target = a->partition >= 0 || a->key != NULL ? partition : next;
		next = (next + 1) % count;
		if (target != partition || k->fd < 0) {
			int32_t t = target;
			if (connect_leader(k, a, &t) < 0) {
				status = 1;
				break;
			}
		}
		partition = target;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		status = keel_wbuf_ok(&b) && send_batch(k, a, target, &b, n, now_ms) ? 0 : 1;
	}
	keel_wbuf_free(&b);
	free(line);
	return status;
}

/* ---- consume ---- */

/* Prints the values of an uncompressed batch's records from `from` on;
 * returns how many it printed (up to `left`). */
static long print_records(const struct plog_batch *bt, int64_t from, long left)
{
	const uint8_t *p = bt->data + PLOG_BATCH_HEADER_SIZE;
	const uint8_t *end = bt->data + bt->size;
	long printed = 0;
	for (int32_t i = 0; i < bt->record_count && p < end && printed < left; i++) {
		int64_t len = 0, v = 0;
		size_t n = plog_varint_read(p, (size_t)(end - p), &len);
		if (n == 0 || len < 0 || len > end - p - (int64_t)n) {
			break;
		}
		const uint8_t *r = p + n, *rend = r + len;
		p = rend;
		r++;                                              /* attributes */
		r += plog_varint_read(r, (size_t)(rend - r), &v); /* timestamp delta */
		int64_t delta = 0;
		r += plog_varint_read(r, (size_t)(rend - r), &delta);
		int64_t klen = 0, vlen = 0;
		r += plog_varint_read(r, (size_t)(rend - r), &klen);
		r += klen > 0 ? klen : 0;
		r += plog_varint_read(r, (size_t)(rend - r), &vlen);
		if (r > rend || vlen > rend - r) {
			break;
		}
		if (bt->base_offset + delta < from) {
			continue;
		}
		fwrite(r, 1, vlen > 0 ? (size_t)vlen : 0, stdout);
		fputc('\n', stdout);
		printed++;
	}
	fflush(stdout);
	return printed;
}

static int consume(struct kclient *k, const struct kargs *a)
{
	int32_t partition = a->partition >= 0 ? (int32_t)a->partition : 0;
	if (connect_leader(k, a, &partition) < 0) {
		return 1;
	}
	struct kafka_list_offsets_partition lp = {partition, -1,
	                                          a->from_beginning ? KAFKA_LIST_OFFSETS_EARLIEST
	                                                            : KAFKA_LIST_OFFSETS_LATEST};
	struct kafka_list_offsets_topic lt = {kafka_str(a->topic), &lp, 1};
	struct kafka_list_offsets_request lrq = {-1, 0, &lt, 1};
	struct kafka_list_offsets_response lr;
	keel_arena_reset(&k->arena);
	if (!kclient_call(k, KAFKA_API_LIST_OFFSETS, 1, &lrq, &lr)) {
		return 1;
	}
	if (lr.topics[0].partitions[0].error_code != KAFKA_NONE) {
		fprintf(stderr, "%s: ListOffsets: %s\n", k->who,
		        kafka_error_name(lr.topics[0].partitions[0].error_code));
		return 1;
	}
	int64_t offset = lr.topics[0].partitions[0].offset;
	long left = a->max_messages > 0 ? a->max_messages : LONG_MAX;
	while (left > 0) {
		struct kafka_fetch_partition fp = {partition, -1, offset, -1, -1, 1 << 20};
		struct kafka_fetch_topic ft = {kafka_str(a->topic), &fp, 1};
		struct kafka_fetch_request rq;
		memset(&rq, 0, sizeof(rq));
		rq.replica_id = -1;
		rq.max_wait_ms = 500;
		rq.min_bytes = 1;
		rq.max_bytes = 1 << 20;
		rq.topics = &ft;
		rq.topic_count = 1;
		struct kafka_fetch_response rs;
		keel_arena_reset(&k->arena);
		if (!kclient_call(k, KAFKA_API_FETCH, 4, &rq, &rs)) {
			return 1;
		}
		const struct kafka_fetch_partition_data *pd = &rs.topics[0].partitions[0];
		if (pd->error_code != KAFKA_NONE) {
			fprintf(stderr, "%s: %s-%d: %s\n", k->who, a->topic, partition,
			        kafka_error_name(pd->error_code));
			return 1;
		}
		size_t pos = 0, size = pd->records.size > 0 ? (size_t)pd->records.size : 0;
		while (pos < size && left > 0) {
			struct plog_batch bt;
			if (plog_batch_next(pd->records.data, size, &pos, UINT32_MAX, &bt) !=
			    PLOG_BATCH_OK) {
				break; /* a partial batch at the end of the response */
			}
			if (plog_batch_compression(&bt) != PLOG_COMPRESSION_NONE) {
				fprintf(stderr,
				        "%s: skipping a compressed batch at offset %" PRId64 "\n",
				        k->who, bt.base_offset);
			} else {
				left -= print_records(&bt, offset, left);
			}
			offset = plog_batch_last_offset(&bt) + 1;
		}
	}
	return 0;
}

/* ---- options ---- */

static int usage(const char *cmd, FILE *out)
{
	if (strcmp(cmd, "produce") == 0) {
		fprintf(out, "usage: keel produce --brokers HOST:PORT --topic T [--key K] "
		             "[--partition P]\n\nSends stdin's lines as records (acks=all).\n");
	} else {
		fprintf(out, "usage: keel consume --brokers HOST:PORT --topic T [--partition P]\n"
		             "                    [--from-beginning] [--max-messages N]\n\n"
		             "Prints the values of one partition's records, one per line.\n");
	}
	return out == stdout ? 0 : 2;
}

static int kafka_cli(const char *cmd, int argc, char **argv)
{
	char who[32];
	snprintf(who, sizeof(who), "keel %s", cmd);
	struct kargs a = {NULL, NULL, NULL, -1, -1, false};
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			return usage(cmd, stdout);
		}
		if (strcmp(arg, "--from-beginning") == 0) {
			a.from_beginning = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "%s: '%s' needs a value\n", who, arg);
			return usage(cmd, stderr);
		}
		const char *v = argv[++i];
		char *end = NULL;
		if (strcmp(arg, "--brokers") == 0) {
			a.brokers = v;
		} else if (strcmp(arg, "--topic") == 0) {
			a.topic = v;
		} else if (strcmp(arg, "--key") == 0 && strcmp(cmd, "produce") == 0) {
			a.key = v;
		} else if (strcmp(arg, "--partition") == 0 &&
		           (a.partition = strtol(v, &end, 10), *end == '\0' && a.partition >= 0)) {
		} else if (strcmp(arg, "--max-messages") == 0 && strcmp(cmd, "consume") == 0 &&
		           (a.max_messages = strtol(v, &end, 10),
		            *end == '\0' && a.max_messages > 0)) {
		} else {
			fprintf(stderr, "%s: bad option '%s %s'\n", who, arg, v);
			return usage(cmd, stderr);
		}
	}
	if (a.brokers == NULL || a.topic == NULL) {
		fprintf(stderr, "%s: --brokers and --topic are required\n", who);
		return usage(cmd, stderr);
	}
	signal(SIGPIPE, SIG_IGN);
	struct kclient k = {who, -1, 0, {0}, {0}, NULL, 0};
	char first[300];
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(a.brokers, ","), a.brokers);
	k.fd = kclient_dial(who, first);
	if (k.fd < 0) {
		return 1;
	}
	keel_arena_init(&k.arena, 64 * 1024);
	kafka_limits_default(&k.limits);
	int status = strcmp(cmd, "produce") == 0 ? produce(&k, &a) : consume(&k, &a);
	close(k.fd);
	keel_arena_close(&k.arena);
	free(k.frame);
	return status;
}

int cli_produce(int argc, char **argv)
{
	return kafka_cli("produce", argc, argv);
}

int cli_consume(int argc, char **argv)
{
	return kafka_cli("consume", argc, argv);
}
