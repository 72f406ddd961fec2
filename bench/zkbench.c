/*
 * zkbench.c — keel-zkbench: a load generator on the official ZooKeeper C
 * client (libzookeeper_mt), used against keel and against Apache ZooKeeper
 * alike, so that both are measured by the same client code.
 *
 * Modes (one JSON result line on stdout, progress on stderr):
 *
 *   async (default)  N sessions x D requests in flight. Each in-flight
 *                    request lives in a slot; when its completion runs, the
 *                    slot records the latency and issues the next request,
 *                    so every session always has D outstanding until the end.
 *   --sync           one session, the synchronous API, one request at a time.
 *   --failover-kill PID
 *                    one session creating znodes synchronously; after
 *                    --warmup seconds it sends SIGKILL to PID and measures
 *                    the time from the kill to the first write that was
 *                    issued after the kill and succeeded.
 *
 * Ops: create (new znode per request), set and get (random keys among
 * --key-count znodes created in a setup phase), mix (90% get, 10% set).
 * --multi B makes every create request one multi op of B creates (bulk
 * loads: the memory run); --rss-pids reports the VmRSS of the given server
 * processes before and after the run and the bytes per created znode.
 * Every run works under its own prefix (/keel-bench/r<pid>-<time> unless
 * --prefix is given), so runs never collide.
 *
 * Measurement window: requests are issued from t0; those that complete in
 * [t0 + warmup, t0 + warmup + duration) count toward throughput and the
 * latency histogram (CLOCK_MONOTONIC, from just before the zoo_a* call to
 * the start of its completion, so the client library's queueing is
 * included — it is part of what a user sees). With --ops K exactly K
 * requests are issued and all of them count.
 *
 * Threads: the C client runs an I/O thread and a completion thread per
 * session. A slot is touched only by whoever holds its one outstanding
 * request, and a session's histogram only by its completion thread; the main
 * thread reads them after `outstanding` has dropped to zero (the atomic
 * decrement orders the writes before it).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "hist.h"

#define BENCH_MAX_SESSIONS 1024
#define BENCH_MAX_INFLIGHT_TOTAL 100000
#define BENCH_MAX_VALUE_BYTES 1000000
#define BENCH_MAX_SERVERS 32
#define BENCH_MAX_PIDS 16
#define BENCH_PATH_SIZE 256
#define BENCH_PREFIX_SIZE 160
#define BENCH_ERR_CODES 128
#define BENCH_SETUP_WINDOW 256
#define BENCH_MAX_MULTI 256
#define NS_PER_S UINT64_C(1000000000)
#define NS_PER_MS UINT64_C(1000000)

enum bench_op { OP_CREATE, OP_SET, OP_GET, OP_MIX };
static const char *const bench_op_names[] = {"create", "set", "get", "mix"};

enum bench_mode { MODE_ASYNC, MODE_SYNC, MODE_FAILOVER };
static const char *const bench_mode_names[] = {"async", "sync", "failover"};

struct bench_config {
	char servers[1024];
	unsigned sessions;
	unsigned inflight;
	unsigned value_bytes;
	enum bench_op op;
	enum bench_mode mode;
	double duration_s;
	double warmup_s;
	uint64_t ops_total; /* 0: run for duration_s */
	unsigned multi;     /* create: znodes per request (a multi op when > 1) */
	unsigned key_count;
	int session_timeout_ms;
	char prefix[BENCH_PREFIX_SIZE];
	char label[64];
	pid_t rss_pids[BENCH_MAX_PIDS];
	unsigned rss_pid_count;
	double settle_s;
	pid_t kill_pid;
	uint64_t seed;
	bool verbose;
	char client_log[512]; /* empty: the client library logs to stderr */
};

struct bench_run;

struct bench_session {
	struct bench_run *run;
	zhandle_t *zh;
	unsigned index;
	char hosts[1024];
	atomic_bool connected;
	atomic_bool expired;
	atomic_uint connects;
	atomic_uint_fast64_t last_connect_ns;
	/* Completion thread only, read by main after the run drained. */
	struct bench_hist hist;
	uint64_t ok_in_window;
	uint64_t ok_total;
	uint64_t last_done_ns;
	char server_at_start[128];
};

struct bench_slot {
	struct bench_session *session;
	uint64_t rng;
	uint64_t start_ns;
	zoo_op_result_t *multi_results; /* config.multi entries, used when multi > 1 */
	char multi_created[BENCH_PATH_SIZE];
};

struct bench_run {
	const struct bench_config *config;
	struct bench_session *sessions;
	struct bench_slot *slots;
	zoo_op_result_t *multi_results; /* multi per slot, when multi > 1 */
	char *value;
	uint64_t window_start_ns;
	uint64_t window_end_ns;
	atomic_bool stopping;
	atomic_uint_fast64_t outstanding;
	atomic_uint_fast64_t issued;
	atomic_uint_fast64_t create_seq;
	atomic_uint_fast64_t errors[BENCH_ERR_CODES];
	atomic_uint_fast64_t errors_in_window;
};

static volatile sig_atomic_t bench_interrupted;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / NS_PER_S), .tv_nsec = (long)(ns % NS_PER_S)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
		if (bench_interrupted) {
			return;
		}
	}
}

static uint64_t cpu_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * NS_PER_S +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

/* xorshift64*: per-slot key choice, seeded from --seed and the slot number. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static void on_interrupt(int sig)
{
	bench_interrupted = sig;
}

/* ---- errors ------------------------------------------------------------- */

static void count_error(struct bench_run *run, int rc, uint64_t end_ns)
{
	unsigned code = rc < 0 && -rc < BENCH_ERR_CODES ? (unsigned)-rc : BENCH_ERR_CODES - 1;
	atomic_fetch_add(&run->errors[code], 1);
	if (end_ns >= run->window_start_ns && end_ns < run->window_end_ns) {
		atomic_fetch_add(&run->errors_in_window, 1);
	}
}

static uint64_t error_total(struct bench_run *run)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < BENCH_ERR_CODES; i++) {
		total += atomic_load(&run->errors[i]);
	}
	return total;
}

/* ---- sessions ----------------------------------------------------------- */

static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)path;
	struct bench_session *s = ctx;
	if (type != ZOO_SESSION_EVENT) {
		return;
	}
	if (state == ZOO_CONNECTED_STATE) {
		atomic_store(&s->last_connect_ns, now_ns());
		atomic_fetch_add(&s->connects, 1);
		atomic_store(&s->connected, true);
	} else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
		atomic_store(&s->expired, true);
		atomic_store(&s->connected, false);
	} else {
		atomic_store(&s->connected, false);
	}
}

/*
 * Session i lists the servers starting from server i mod n, and the client
 * keeps that order (zoo_deterministic_conn_order), so N sessions spread
 * evenly over the servers of the connect string.
 */
static int rotate_hosts(const char *servers, unsigned first, char *out, size_t out_size)
{
	char copy[1024];
	char *hosts[BENCH_MAX_SERVERS];
	unsigned n = 0;
	snprintf(copy, sizeof(copy), "%s", servers);
	for (char *save = NULL, *h = strtok_r(copy, ",", &save); h != NULL;
	     h = strtok_r(NULL, ",", &save)) {
		if (n == BENCH_MAX_SERVERS) {
			return -1;
		}
		hosts[n++] = h;
	}
	if (n == 0) {
		return -1;
	}
	out[0] = '\0';
	size_t used = 0;
	for (unsigned k = 0; k < n; k++) {
		int w = snprintf(out + used, out_size - used, "%s%s", k ? "," : "", hosts[(first + k) % n]);
		if (w < 0 || (size_t)w >= out_size - used) {
			return -1;
		}
		used += (size_t)w;
	}
	return (int)n;
}

static int session_open(struct bench_session *s)
{
	atomic_store(&s->connected, false);
	atomic_store(&s->expired, false);
	s->zh = zookeeper_init(s->hosts, session_watcher, s->run->config->session_timeout_ms, NULL, s, 0);
	if (s->zh == NULL) {
		fprintf(stderr, "zkbench: zookeeper_init(%s): %s\n", s->hosts, strerror(errno));
		return -1;
	}
	/*
	 * By default the client re-resolves the host list every time its I/O
	 * thread polls (getaddrinfo per wake-up: about half the client's CPU
	 * under load). The servers are literal addresses: resolve only when
	 * reconnecting.
	 */
	zoo_set_servers_resolution_delay(s->zh, -1);
	return 0;
}

static int sessions_wait_connected(struct bench_run *run, unsigned count, double timeout_s)
{
	uint64_t deadline = now_ns() + (uint64_t)(timeout_s * (double)NS_PER_S);
	for (;;) {
		unsigned up = 0;
		for (unsigned i = 0; i < count; i++) {
			up += atomic_load(&run->sessions[i].connected) ? 1u : 0u;
		}
		if (up == count) {
			return 0;
		}
		if (now_ns() > deadline || bench_interrupted) {
			fprintf(stderr, "zkbench: only %u of %u sessions connected to %s\n", up, count,
				run->config->servers);
			return -1;
		}
		sleep_ns(5 * NS_PER_MS);
	}
}

static int sessions_open(struct bench_run *run, unsigned count)
{
	zoo_deterministic_conn_order(1);
	for (unsigned i = 0; i < count; i++) {
		struct bench_session *s = &run->sessions[i];
		s->run = run;
		s->index = i;
		bench_hist_init(&s->hist);
		if (rotate_hosts(run->config->servers, i, s->hosts, sizeof(s->hosts)) < 0) {
			fprintf(stderr, "zkbench: bad --servers '%s'\n", run->config->servers);
			return -1;
		}
		if (session_open(s) != 0) {
			return -1;
		}
	}
	if (sessions_wait_connected(run, count, 30.0) != 0) {
		return -1;
	}
	for (unsigned i = 0; i < count; i++) {
		const char *server = zoo_get_current_server(run->sessions[i].zh);
		/* A buffer inside the client library, overwritten by the next call. */
		snprintf(run->sessions[i].server_at_start, sizeof(run->sessions[i].server_at_start), "%s",
			 server ? server : "?");
	}
	return 0;
}

static void sessions_close(struct bench_run *run, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		if (run->sessions[i].zh != NULL) {
			zookeeper_close(run->sessions[i].zh);
			run->sessions[i].zh = NULL;
		}
	}
}

/* ---- setup: the prefix and the keys set/get work on --------------------- */

static int create_path_sync(zhandle_t *zh, const char *path)
{
	int rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc != ZOK && rc != ZNODEEXISTS) {
		fprintf(stderr, "zkbench: create %s: %s\n", path, zerror(rc));
		return -1;
	}
	return 0;
}

/* Creates every ancestor of the prefix and the prefix itself. */
static int setup_prefix(struct bench_run *run)
{
	char path[BENCH_PATH_SIZE];
	const char *prefix = run->config->prefix;
	for (const char *p = strchr(prefix + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
		snprintf(path, sizeof(path), "%.*s", (int)(p - prefix), prefix);
		if (create_path_sync(run->sessions[0].zh, path) != 0) {
			return -1;
		}
	}
	return create_path_sync(run->sessions[0].zh, prefix);
}

struct setup_state {
	sem_t window;
	atomic_uint failures;
};

static void setup_done(int rc, const char *value, const void *data)
{
	(void)value;
	struct setup_state *st = (struct setup_state *)(uintptr_t)data;
	if (rc != ZOK && rc != ZNODEEXISTS) {
		atomic_fetch_add(&st->failures, 1);
	}
	sem_post(&st->window);
}

static void key_path(const struct bench_config *c, uint64_t key, char *out)
{
	snprintf(out, BENCH_PATH_SIZE, "%s/k%" PRIu64, c->prefix, key);
}

/* Creates keys k0 .. k(key_count-1) with values, BENCH_SETUP_WINDOW in flight. */
static int setup_keys(struct bench_run *run)
{
	const struct bench_config *c = run->config;
	struct setup_state st;
	char path[BENCH_PATH_SIZE];
	sem_init(&st.window, 0, BENCH_SETUP_WINDOW);
	atomic_init(&st.failures, 0);
	unsigned issued = 0;
	for (unsigned k = 0; k < c->key_count && !bench_interrupted; k++) {
		while (sem_wait(&st.window) != 0 && errno == EINTR) {
		}
		key_path(c, k, path);
		int rc = zoo_acreate(run->sessions[0].zh, path, run->value, (int)c->value_bytes,
				     &ZOO_OPEN_ACL_UNSAFE, 0, setup_done, &st);
		if (rc != ZOK) {
			sem_post(&st.window);
			atomic_fetch_add(&st.failures, 1);
			break;
		}
		issued++;
	}
	for (unsigned i = 0; i < BENCH_SETUP_WINDOW; i++) {
		while (sem_wait(&st.window) != 0 && errno == EINTR) {
		}
	}
	sem_destroy(&st.window);
	unsigned failures = atomic_load(&st.failures);
	if (failures != 0 || issued != c->key_count) {
		fprintf(stderr, "zkbench: setup: %u of %u key creates failed\n", failures + (c->key_count - issued),
			c->key_count);
		return -1;
	}
	return 0;
}

/* ---- the async load ----------------------------------------------------- */

static void slot_issue(struct bench_slot *slot);

static void slot_finish(struct bench_slot *slot, int rc)
{
	uint64_t end = now_ns();
	struct bench_session *s = slot->session;
	struct bench_run *run = s->run;
	if (rc == ZOK) {
		s->ok_total += run->config->multi;
		s->last_done_ns = end;
		if (end >= run->window_start_ns && end < run->window_end_ns) {
			bench_hist_record(&s->hist, end - slot->start_ns);
			s->ok_in_window += run->config->multi;
		}
	} else {
		count_error(run, rc, end);
	}
	if (end >= run->window_end_ns || atomic_load(&run->stopping)) {
		atomic_fetch_sub(&run->outstanding, 1);
		return;
	}
	slot_issue(slot);
}

static void on_string_done(int rc, const char *value, const void *data)
{
	(void)value;
	slot_finish((struct bench_slot *)(uintptr_t)data, rc);
}

static void on_stat_done(int rc, const struct Stat *stat, const void *data)
{
	(void)stat;
	slot_finish((struct bench_slot *)(uintptr_t)data, rc);
}

static void on_multi_done(int rc, const void *data)
{
	slot_finish((struct bench_slot *)(uintptr_t)data, rc);
}

static void on_data_done(int rc, const char *value, int value_len, const struct Stat *stat,
			 const void *data)
{
	(void)value;
	(void)value_len;
	(void)stat;
	slot_finish((struct bench_slot *)(uintptr_t)data, rc);
}

/* Which request to send next: the op, and for mix a 90/10 draw. */
static enum bench_op pick_op(const struct bench_config *c, uint64_t *rng)
{
	if (c->op != OP_MIX) {
		return c->op;
	}
	return rng_next(rng) % 10u == 0 ? OP_SET : OP_GET;
}

/* One multi request creating config.multi new znodes. */
static int issue_multi_create(struct bench_run *run, zhandle_t *zh, struct bench_slot *slot)
{
	const struct bench_config *c = run->config;
	zoo_op_t ops[BENCH_MAX_MULTI];
	char paths[BENCH_MAX_MULTI][BENCH_PATH_SIZE];
	uint64_t first = atomic_fetch_add(&run->create_seq, c->multi);
	for (unsigned i = 0; i < c->multi; i++) {
		/* Paths are serialized by zoo_amulti; results are written later. */
		snprintf(paths[i], sizeof(paths[i]), "%s/c%" PRIu64, c->prefix, first + i);
		zoo_create_op_init(&ops[i], paths[i], run->value, (int)c->value_bytes, &ZOO_OPEN_ACL_UNSAFE, 0,
				   slot->multi_created, (int)sizeof(slot->multi_created));
	}
	slot->start_ns = now_ns();
	return zoo_amulti(zh, (int)c->multi, ops, slot->multi_results, on_multi_done, slot);
}

static int issue_one(struct bench_run *run, zhandle_t *zh, uint64_t *rng, struct bench_slot *slot)
{
	const struct bench_config *c = run->config;
	char path[BENCH_PATH_SIZE];
	enum bench_op op = pick_op(c, rng);
	if (op == OP_CREATE) {
		snprintf(path, sizeof(path), "%s/c%" PRIu64, c->prefix, atomic_fetch_add(&run->create_seq, 1));
	} else {
		key_path(c, rng_next(rng) % c->key_count, path);
	}
	if (slot != NULL) {
		slot->start_ns = now_ns();
	}
	switch (op) {
	case OP_CREATE:
		if (slot == NULL) {
			return zoo_create(zh, path, run->value, (int)c->value_bytes, &ZOO_OPEN_ACL_UNSAFE, 0,
					  NULL, 0);
		}
		return zoo_acreate(zh, path, run->value, (int)c->value_bytes, &ZOO_OPEN_ACL_UNSAFE, 0,
				   on_string_done, slot);
	case OP_SET:
		if (slot == NULL) {
			return zoo_set(zh, path, run->value, (int)c->value_bytes, -1);
		}
		return zoo_aset(zh, path, run->value, (int)c->value_bytes, -1, on_stat_done, slot);
	case OP_GET:
	case OP_MIX:
		break;
	}
	if (slot == NULL) {
		char buf[BENCH_MAX_VALUE_BYTES < 4096 ? BENCH_MAX_VALUE_BYTES : 4096];
		int len = (int)sizeof(buf);
		int rc = zoo_get(zh, path, 0, buf, &len, NULL);
		return rc;
	}
	return zoo_aget(zh, path, 0, on_data_done, slot);
}

static void slot_issue(struct bench_slot *slot)
{
	struct bench_run *run = slot->session->run;
	const struct bench_config *c = run->config;
	if (c->ops_total != 0 && atomic_fetch_add(&run->issued, c->multi) >= c->ops_total) {
		atomic_fetch_sub(&run->outstanding, 1);
		return;
	}
	int rc = c->multi > 1 ? issue_multi_create(run, slot->session->zh, slot)
			      : issue_one(run, slot->session->zh, &slot->rng, slot);
	if (rc != ZOK) {
		/* The handle refused (expired or out of memory): retire the slot. */
		count_error(run, rc, now_ns());
		atomic_fetch_sub(&run->outstanding, 1);
	}
}

/* Waits until every slot retired, printing progress for long --ops runs. */
static void drain(struct bench_run *run, uint64_t deadline_ns)
{
	uint64_t next_report = now_ns() + 5 * NS_PER_S;
	while (atomic_load(&run->outstanding) != 0) {
		uint64_t now = now_ns();
		if (bench_interrupted) {
			atomic_store(&run->stopping, true);
		}
		if (now > deadline_ns) {
			fprintf(stderr, "zkbench: %" PRIuFAST64 " requests never completed\n",
				atomic_load(&run->outstanding));
			return;
		}
		if (run->config->ops_total != 0 && now > next_report) {
			fprintf(stderr, "zkbench: %" PRIuFAST64 " of %" PRIu64 " issued\n",
				atomic_load(&run->issued), run->config->ops_total);
			next_report = now + 5 * NS_PER_S;
		}
		sleep_ns(NS_PER_MS);
	}
}

static void run_async(struct bench_run *run, uint64_t t0)
{
	const struct bench_config *c = run->config;
	run->window_start_ns = t0 + (c->ops_total ? 0 : (uint64_t)(c->warmup_s * (double)NS_PER_S));
	run->window_end_ns = c->ops_total ? UINT64_MAX
					  : run->window_start_ns + (uint64_t)(c->duration_s * (double)NS_PER_S);
	unsigned total_slots = c->sessions * c->inflight;
	atomic_store(&run->outstanding, total_slots);
	for (unsigned i = 0; i < total_slots; i++) {
		struct bench_slot *slot = &run->slots[i];
		slot->session = &run->sessions[i % c->sessions];
		slot->rng = c->seed * 0x9E3779B97F4A7C15ull + i + 1;
		if (c->multi > 1) {
			slot->multi_results = &run->multi_results[(size_t)i * c->multi];
		}
		slot_issue(slot);
	}
	if (c->ops_total == 0) {
		while (now_ns() < run->window_end_ns && !bench_interrupted) {
			sleep_ns(10 * NS_PER_MS);
		}
	}
	/* Requests outstanding at the end get one session timeout to finish. */
	uint64_t grace = (uint64_t)(unsigned)c->session_timeout_ms * NS_PER_MS + 5 * NS_PER_S;
	drain(run, c->ops_total ? UINT64_MAX : now_ns() + grace);
}

/* ---- the synchronous load ----------------------------------------------- */

static void run_sync(struct bench_run *run, uint64_t t0)
{
	const struct bench_config *c = run->config;
	struct bench_session *s = &run->sessions[0];
	uint64_t rng = c->seed * 0x9E3779B97F4A7C15ull + 1;
	run->window_start_ns = t0 + (c->ops_total ? 0 : (uint64_t)(c->warmup_s * (double)NS_PER_S));
	run->window_end_ns = c->ops_total ? UINT64_MAX
					  : run->window_start_ns + (uint64_t)(c->duration_s * (double)NS_PER_S);
	for (uint64_t n = 0; !bench_interrupted && !atomic_load(&s->expired); n++) {
		if (c->ops_total != 0 && n >= c->ops_total) {
			break;
		}
		uint64_t start = now_ns();
		if (start >= run->window_end_ns) {
			break;
		}
		int rc = issue_one(run, s->zh, &rng, NULL);
		uint64_t end = now_ns();
		if (rc != ZOK) {
			count_error(run, rc, end);
			continue;
		}
		s->ok_total++;
		s->last_done_ns = end;
		if (end >= run->window_start_ns && end < run->window_end_ns) {
			bench_hist_record(&s->hist, end - start);
			s->ok_in_window++;
		}
	}
}

/* ---- failover ----------------------------------------------------------- */

struct failover_result {
	bool done;
	uint64_t writes_before_kill;
	uint64_t failover_ns;      /* kill -> first write issued after it acknowledged */
	uint64_t first_error_ns;   /* kill -> first failed request (0: none) */
	uint64_t reconnect_ns;     /* kill -> first session (re)connect after it (0: none) */
	unsigned sessions_reopened;
	char server_before[128];
	char server_after[128];
};

static void current_server(zhandle_t *zh, char *out, size_t size)
{
	const char *server = zoo_get_current_server(zh);
	snprintf(out, size, "%s", server ? server : "?");
}

static int failover_reopen(struct bench_session *s, struct failover_result *r)
{
	zookeeper_close(s->zh);
	s->zh = NULL;
	r->sessions_reopened++;
	if (session_open(s) != 0) {
		return -1;
	}
	return sessions_wait_connected(s->run, 1, 60.0);
}

static void run_failover(struct bench_run *run, uint64_t t0, struct failover_result *r)
{
	const struct bench_config *c = run->config;
	struct bench_session *s = &run->sessions[0];
	uint64_t rng = c->seed + 1;
	uint64_t kill_at = t0 + (uint64_t)(c->warmup_s * (double)NS_PER_S);
	uint64_t give_up = kill_at + (uint64_t)(c->duration_s * (double)NS_PER_S);
	uint64_t killed_ns = 0;
	run->window_start_ns = t0;
	run->window_end_ns = UINT64_MAX;
	memset(r, 0, sizeof(*r));
	while (!bench_interrupted) {
		uint64_t start = now_ns();
		if (killed_ns == 0 && start >= kill_at) {
			current_server(s->zh, r->server_before, sizeof(r->server_before));
			killed_ns = now_ns();
			if (kill(c->kill_pid, SIGKILL) != 0) {
				fprintf(stderr, "zkbench: kill %d: %s\n", (int)c->kill_pid, strerror(errno));
				return;
			}
			continue;
		}
		if (killed_ns != 0 && start > give_up) {
			return;
		}
		int rc = issue_one(run, s->zh, &rng, NULL);
		uint64_t end = now_ns();
		if (rc == ZOK) {
			if (killed_ns == 0) {
				r->writes_before_kill++;
				continue;
			}
			r->done = true;
			r->failover_ns = end - killed_ns;
			break;
		}
		count_error(run, rc, end);
		if (killed_ns != 0 && r->first_error_ns == 0) {
			r->first_error_ns = end - killed_ns;
		}
		if (atomic_load(&s->expired) && failover_reopen(s, r) != 0) {
			return;
		}
		sleep_ns(NS_PER_MS / 2); /* do not spin while the client reconnects */
	}
	uint64_t connected = atomic_load(&s->last_connect_ns);
	if (killed_ns != 0 && connected > killed_ns) {
		r->reconnect_ns = connected - killed_ns;
	}
	current_server(s->zh, r->server_after, sizeof(r->server_after));
}

/* ---- resident memory ---------------------------------------------------- */

/* VmRSS of a process in KiB, or -1. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		return -1;
	}
	long kib = -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) {
			break;
		}
	}
	fclose(f);
	return kib;
}

static void rss_sample(const struct bench_config *c, long *out)
{
	for (unsigned i = 0; i < c->rss_pid_count; i++) {
		out[i] = rss_kib(c->rss_pids[i]);
	}
}

/* ---- output ------------------------------------------------------------- */

static void print_us(const char *name, uint64_t ns, bool comma)
{
	printf("\"%s\":%.1f%s", name, (double)ns / 1000.0, comma ? "," : "");
}

static void print_errors(struct bench_run *run)
{
	printf("\"errors\":%" PRIu64 ",\"errors_in_window\":%" PRIuFAST64 ",\"error_codes\":{",
	       error_total(run), atomic_load(&run->errors_in_window));
	bool first = true;
	for (unsigned i = 0; i < BENCH_ERR_CODES; i++) {
		uint64_t n = atomic_load(&run->errors[i]);
		if (n != 0) {
			printf("%s\"%s\":%" PRIu64, first ? "" : ",", zerror(-(int)i), n);
			first = false;
		}
	}
	printf("}");
}

static void print_header(const struct bench_config *c)
{
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("{\"tool\":\"keel-zkbench\",\"time_utc\":\"%s\",\"label\":\"%s\",\"mode\":\"%s\","
	       "\"op\":\"%s\",\"servers\":\"%s\",\"sessions\":%u,\"inflight\":%u,\"value_bytes\":%u,"
	       "\"key_count\":%u,\"multi\":%u,\"prefix\":\"%s\",",
	       when, c->label, bench_mode_names[c->mode], bench_op_names[c->op], c->servers, c->sessions,
	       c->inflight, c->value_bytes, c->key_count, c->multi, c->prefix);
}

static void print_spread(struct bench_run *run)
{
	printf("\"session_servers\":[");
	for (unsigned i = 0; i < run->config->sessions; i++) {
		printf("%s\"%s\"", i ? "," : "", run->sessions[i].server_at_start);
	}
	printf("]");
}

static void print_memory(const struct bench_config *c, const long *before, const long *after,
			 uint64_t created)
{
	printf(",\"rss_kib_before\":[");
	for (unsigned i = 0; i < c->rss_pid_count; i++) {
		printf("%s%ld", i ? "," : "", before[i]);
	}
	printf("],\"rss_kib_after\":[");
	for (unsigned i = 0; i < c->rss_pid_count; i++) {
		printf("%s%ld", i ? "," : "", after[i]);
	}
	double sum = 0.0;
	unsigned n = 0;
	for (unsigned i = 0; i < c->rss_pid_count; i++) {
		if (before[i] >= 0 && after[i] >= 0) {
			sum += (double)(after[i] - before[i]) * 1024.0;
			n++;
		}
	}
	if (n != 0 && created != 0) {
		printf("],\"bytes_per_znode\":%.1f", sum / n / (double)created);
	} else {
		printf("],\"bytes_per_znode\":null");
	}
}

static void print_load_result(struct bench_run *run, uint64_t t0, uint64_t cpu_used_ns,
			      const long *rss_before, const long *rss_after)
{
	const struct bench_config *c = run->config;
	struct bench_hist all;
	uint64_t ok = 0, ok_total = 0, last_done = t0;
	bench_hist_init(&all);
	for (unsigned i = 0; i < c->sessions; i++) {
		bench_hist_merge(&all, &run->sessions[i].hist);
		ok += run->sessions[i].ok_in_window;
		ok_total += run->sessions[i].ok_total;
		if (run->sessions[i].last_done_ns > last_done) {
			last_done = run->sessions[i].last_done_ns;
		}
	}
	uint64_t window_end = c->ops_total ? last_done : run->window_end_ns;
	double window_s = (double)(window_end - run->window_start_ns) / (double)NS_PER_S;
	print_header(c);
	printf("\"duration_s\":%.3f,\"warmup_s\":%.3f,\"ops\":%" PRIu64 ",\"ops_per_s\":%.1f,", window_s,
	       c->ops_total ? 0.0 : c->warmup_s, ok, window_s > 0 ? (double)ok / window_s : 0.0);
	printf("\"lat_us\":{");
	print_us("p50", bench_hist_quantile(&all, 0.50), true);
	print_us("p90", bench_hist_quantile(&all, 0.90), true);
	print_us("p99", bench_hist_quantile(&all, 0.99), true);
	print_us("p999", bench_hist_quantile(&all, 0.999), true);
	print_us("max", all.total ? all.max : 0, true);
	printf("\"mean\":%.1f},", bench_hist_mean(&all) / 1000.0);
	print_errors(run);
	printf(",\"client_cpu_pct\":%.1f,", window_s > 0 ? 100.0 * (double)cpu_used_ns / (double)NS_PER_S / window_s : 0.0);
	print_spread(run);
	if (c->rss_pid_count != 0) {
		print_memory(c, rss_before, rss_after, c->op == OP_CREATE ? ok_total : 0);
	}
	printf("}\n");
	fflush(stdout);
}

static void print_failover_result(struct bench_run *run, const struct failover_result *r)
{
	print_header(run->config);
	printf("\"kill_pid\":%d,\"done\":%s,", (int)run->config->kill_pid, r->done ? "true" : "false");
	if (r->done) {
		printf("\"failover_ms\":%.1f,", (double)r->failover_ns / 1e6);
	} else {
		printf("\"failover_ms\":null,");
	}
	printf("\"first_error_ms\":%.1f,\"reconnect_ms\":%.1f,\"writes_before_kill\":%" PRIu64
	       ",\"sessions_reopened\":%u,\"server_before\":\"%s\",\"server_after\":\"%s\",",
	       (double)r->first_error_ns / 1e6, (double)r->reconnect_ns / 1e6, r->writes_before_kill,
	       r->sessions_reopened, r->server_before, r->server_after);
	print_errors(run);
	printf("}\n");
	fflush(stdout);
}

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: keel-zkbench --servers HOST:PORT[,...] [options]\n"
		"  --op create|set|get|mix   request type (mix: 90%% get, 10%% set); default create\n"
		"  --sessions N              client sessions, spread over the servers (default 8)\n"
		"  --inflight D              requests in flight per session (default 32)\n"
		"  --value-bytes V           value size (default 100)\n"
		"  --duration S              measured seconds (default 10)\n"
		"  --warmup S                seconds before measuring (default 2)\n"
		"  --ops K                   issue exactly K requests instead of --duration\n"
		"  --multi B                 create: B znodes per request, as one multi op\n"
		"                            (fast bulk loads; ops and --ops count znodes)\n"
		"  --key-count K             keys pre-created for set/get/mix (default 1000)\n"
		"  --sync                    one session, synchronous calls, one at a time\n"
		"  --failover-kill PID       failover run: after --warmup s, SIGKILL PID and time\n"
		"                            the first write issued afterwards that succeeds\n"
		"                            (gives up after --duration s)\n"
		"  --rss-pids P1,P2,...      report VmRSS of these processes before and after\n"
		"                            the run, and bytes per created znode\n"
		"  --settle S                wait S seconds before the last RSS sample (default 2)\n"
		"  --session-timeout-ms T    session timeout asked for (default 10000)\n"
		"  --prefix PATH             znode prefix (default /keel-bench/r<pid>-<time>)\n"
		"  --label NAME              copied into the result (e.g. keel, zookeeper)\n"
		"  --seed N                  key choice seed (default 1)\n"
		"  --verbose                 client library log at INFO\n"
		"  --client-log FILE         append the client library's log to FILE\n"
		"Prints one JSON line with ops/s, latency quantiles in microseconds and errors.\n");
}

static int parse_pids(const char *text, struct bench_config *c)
{
	char copy[512];
	snprintf(copy, sizeof(copy), "%s", text);
	c->rss_pid_count = 0;
	for (char *save = NULL, *p = strtok_r(copy, ",", &save); p != NULL; p = strtok_r(NULL, ",", &save)) {
		long pid = strtol(p, NULL, 10);
		if (pid <= 0 || c->rss_pid_count == BENCH_MAX_PIDS) {
			return -1;
		}
		c->rss_pids[c->rss_pid_count++] = (pid_t)pid;
	}
	return c->rss_pid_count == 0 ? -1 : 0;
}

static int parse_op(const char *text, enum bench_op *op)
{
	for (unsigned i = 0; i < sizeof(bench_op_names) / sizeof(bench_op_names[0]); i++) {
		if (strcmp(text, bench_op_names[i]) == 0) {
			*op = (enum bench_op)i;
			return 0;
		}
	}
	return -1;
}

/* Strings copied into the JSON result must need no escaping. */
static bool json_safe(const char *text)
{
	for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
		if (*p < 0x20 || *p == '"' || *p == '\\') {
			return false;
		}
	}
	return true;
}

static int check_config(struct bench_config *c)
{
	if (c->servers[0] == '\0') {
		fprintf(stderr, "zkbench: --servers is required\n");
		return -1;
	}
	if (c->mode != MODE_ASYNC) {
		c->sessions = 1;
		c->inflight = 1;
	}
	if (c->mode == MODE_FAILOVER) {
		c->op = OP_CREATE;
	}
	if (c->sessions == 0 || c->sessions > BENCH_MAX_SESSIONS || c->inflight == 0 ||
	    (uint64_t)c->sessions * c->inflight > BENCH_MAX_INFLIGHT_TOTAL) {
		fprintf(stderr, "zkbench: need 1..%d sessions and sessions x inflight <= %d\n",
			BENCH_MAX_SESSIONS, BENCH_MAX_INFLIGHT_TOTAL);
		return -1;
	}
	if (c->value_bytes > BENCH_MAX_VALUE_BYTES || (c->mode == MODE_SYNC && c->value_bytes > 4096)) {
		fprintf(stderr, "zkbench: --value-bytes too large\n");
		return -1;
	}
	if (c->multi == 0 || c->multi > BENCH_MAX_MULTI ||
	    (c->multi > 1 && (c->op != OP_CREATE || c->mode != MODE_ASYNC)) ||
	    (c->multi > 1 && c->ops_total % c->multi != 0)) {
		fprintf(stderr, "zkbench: --multi needs 1..%d, async create, and --ops a multiple of it\n",
			BENCH_MAX_MULTI);
		return -1;
	}
	if (c->op != OP_CREATE && c->key_count == 0) {
		fprintf(stderr, "zkbench: --key-count must be positive\n");
		return -1;
	}
	if (!(c->duration_s > 0) || c->warmup_s < 0 || c->settle_s < 0) {
		fprintf(stderr, "zkbench: bad --duration/--warmup/--settle\n");
		return -1;
	}
	if (c->prefix[0] == '\0') {
		snprintf(c->prefix, sizeof(c->prefix), "/keel-bench/r%d-%ld", (int)getpid(), (long)time(NULL));
	}
	if (c->prefix[0] != '/' || strlen(c->prefix) > BENCH_PREFIX_SIZE - 2 ||
	    c->prefix[strlen(c->prefix) - 1] == '/') {
		fprintf(stderr, "zkbench: --prefix must be an absolute path without a trailing /\n");
		return -1;
	}
	if (!json_safe(c->servers) || !json_safe(c->prefix) || !json_safe(c->label)) {
		fprintf(stderr, "zkbench: --servers, --prefix and --label may not hold quotes, backslashes "
				"or control characters\n");
		return -1;
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct bench_config *c)
{
	static const struct option options[] = {
		{"servers", required_argument, NULL, 's'},   {"sessions", required_argument, NULL, 'n'},
		{"inflight", required_argument, NULL, 'd'},  {"value-bytes", required_argument, NULL, 'v'},
		{"op", required_argument, NULL, 'o'},        {"duration", required_argument, NULL, 't'},
		{"warmup", required_argument, NULL, 'w'},    {"ops", required_argument, NULL, 'k'},
		{"key-count", required_argument, NULL, 'K'}, {"sync", no_argument, NULL, 'S'},
		{"failover-kill", required_argument, NULL, 'F'},
		{"rss-pids", required_argument, NULL, 'r'},  {"settle", required_argument, NULL, 'e'},
		{"session-timeout-ms", required_argument, NULL, 'T'},
		{"prefix", required_argument, NULL, 'p'},    {"label", required_argument, NULL, 'l'},
		{"seed", required_argument, NULL, 'R'},      {"verbose", no_argument, NULL, 'V'},
		{"client-log", required_argument, NULL, 'L'},
		{"multi", required_argument, NULL, 'M'},
		{"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
	};
	*c = (struct bench_config){.sessions = 8, .inflight = 32, .value_bytes = 100, .op = OP_CREATE,
				   .duration_s = 10, .warmup_s = 2, .key_count = 1000,
				   .session_timeout_ms = 10000, .settle_s = 2, .seed = 1,
				   .multi = 1};
	int opt;
	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 's': snprintf(c->servers, sizeof(c->servers), "%s", optarg); break;
		case 'n': c->sessions = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': c->inflight = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'v': c->value_bytes = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'o':
			if (parse_op(optarg, &c->op) != 0) {
				fprintf(stderr, "zkbench: unknown --op '%s'\n", optarg);
				return -1;
			}
			break;
		case 't': c->duration_s = strtod(optarg, NULL); break;
		case 'w': c->warmup_s = strtod(optarg, NULL); break;
		case 'k': c->ops_total = strtoull(optarg, NULL, 10); break;
		case 'M': c->multi = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'K': c->key_count = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'S': c->mode = MODE_SYNC; break;
		case 'F':
			c->mode = MODE_FAILOVER;
			c->kill_pid = (pid_t)strtol(optarg, NULL, 10);
			if (c->kill_pid <= 1) {
				fprintf(stderr, "zkbench: bad --failover-kill pid\n");
				return -1;
			}
			break;
		case 'r':
			if (parse_pids(optarg, c) != 0) {
				fprintf(stderr, "zkbench: bad --rss-pids '%s'\n", optarg);
				return -1;
			}
			break;
		case 'e': c->settle_s = strtod(optarg, NULL); break;
		case 'T': c->session_timeout_ms = (int)strtol(optarg, NULL, 10); break;
		case 'p': snprintf(c->prefix, sizeof(c->prefix), "%s", optarg); break;
		case 'l': snprintf(c->label, sizeof(c->label), "%s", optarg); break;
		case 'R': c->seed = strtoull(optarg, NULL, 10); break;
		case 'V': c->verbose = true; break;
		case 'L': snprintf(c->client_log, sizeof(c->client_log), "%s", optarg); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	return check_config(c);
}

/* ---- main --------------------------------------------------------------- */

static int bench_prepare(struct bench_run *run)
{
	const struct bench_config *c = run->config;
	if (setup_prefix(run) != 0) {
		return -1;
	}
	if (c->op != OP_CREATE && c->mode != MODE_FAILOVER) {
		fprintf(stderr, "zkbench: creating %u keys of %u bytes under %s\n", c->key_count, c->value_bytes,
			c->prefix);
		return setup_keys(run);
	}
	return 0;
}

static int bench_execute(struct bench_run *run)
{
	const struct bench_config *c = run->config;
	long rss_before[BENCH_MAX_PIDS], rss_after[BENCH_MAX_PIDS];
	if (c->mode == MODE_FAILOVER) {
		struct failover_result r;
		run_failover(run, now_ns(), &r);
		print_failover_result(run, &r);
		return r.done ? 0 : 1;
	}
	rss_sample(c, rss_before);
	uint64_t t0 = now_ns();
	uint64_t cpu_start = 0;
	if (c->mode == MODE_SYNC) {
		cpu_start = cpu_ns();
		run_sync(run, t0);
	} else {
		cpu_start = cpu_ns();
		run_async(run, t0);
	}
	uint64_t cpu_used = cpu_ns() - cpu_start;
	/* CPU over the whole run (warm-up included), scaled to the window below. */
	double run_s = (double)(now_ns() - t0) / (double)NS_PER_S;
	double window_s = c->ops_total ? run_s : c->duration_s;
	uint64_t cpu_in_window = run_s > 0 ? (uint64_t)((double)cpu_used * window_s / run_s) : 0;
	if (c->rss_pid_count != 0) {
		sleep_ns((uint64_t)(c->settle_s * (double)NS_PER_S));
		rss_sample(c, rss_after);
	}
	print_load_result(run, t0, cpu_in_window, rss_before, rss_after);
	return bench_interrupted ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bench_config config;
	if (parse_args(argc, argv, &config) != 0) {
		return 2;
	}
	zoo_set_debug_level(config.verbose ? ZOO_LOG_LEVEL_INFO : ZOO_LOG_LEVEL_ERROR);
	FILE *client_log = NULL;
	if (config.client_log[0] != '\0') {
		client_log = fopen(config.client_log, "a");
		if (client_log == NULL) {
			fprintf(stderr, "zkbench: %s: %s\n", config.client_log, strerror(errno));
			return 2;
		}
		zoo_set_log_stream(client_log);
	}
	signal(SIGINT, on_interrupt);
	signal(SIGTERM, on_interrupt);
	signal(SIGPIPE, SIG_IGN);

	struct bench_run run = {.config = &config};
	run.sessions = calloc(config.sessions, sizeof(*run.sessions));
	run.slots = calloc((size_t)config.sessions * config.inflight, sizeof(*run.slots));
	run.value = malloc(config.value_bytes + 1u);
	run.multi_results = calloc((size_t)config.sessions * config.inflight * config.multi,
				   sizeof(*run.multi_results));
	if (run.sessions == NULL || run.slots == NULL || run.value == NULL || run.multi_results == NULL) {
		fprintf(stderr, "zkbench: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < config.value_bytes; i++) {
		run.value[i] = (char)('a' + i % 26u);
	}
	int status = 1;
	if (sessions_open(&run, config.sessions) == 0 && bench_prepare(&run) == 0) {
		status = bench_execute(&run);
	}
	sessions_close(&run, config.sessions);
	free(run.value);
	free(run.multi_results);
	free(run.slots);
	free(run.sessions);
	if (client_log != NULL) {
		fclose(client_log);
	}
	if (bench_interrupted) {
		/* Die of the signal, so that a calling shell stops too. */
		signal(bench_interrupted, SIG_DFL);
		raise(bench_interrupted);
	}
	return status;
}
