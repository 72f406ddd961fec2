/*
 * Trace tests: scripts of steps with the expected trace of each, in the
 * manner of etcd's raft testdata. Every .txt file in tests/unit/data/raft/
 * is a sequence of blocks:
 *
 *	# comments (kept)
 *	command args...
 *	----
 *	expected output, one line per event (messages sent and received,
 *	role changes, applied entries, read results, status lines)
 *	<blank line>
 *
 * Commands (ids are 1-based; times in ms):
 *	cluster voters=N [learners=M] [seed=S] [prevote=0|1] [checkquorum=0|1]
 *	        [max-append=N] [inflight=N] [trailing=N] [chunk=N]
 *	        [heartbeats=1]   (heartbeats are left out of traces by default)
 *	tick ID MS | tick-all MS      advance clocks (and tick)
 *	stabilize                     deliver everything, persisting all batches
 *	stabilize-nopersist           deliver everything, persist nothing
 *	deliver N                     deliver the next N queued messages
 *	ready                         run every node's ready loop once over
 *	persist ID                    make node ID's outstanding batches durable
 *	propose ID TEXT               (prints the result and index)
 *	isolate ID | reconnect ID | heal
 *	crash ID | restart ID
 *	snapshot ID                   node ID snapshots its applied state
 *	transfer ID TARGET
 *	change ID add-voter|add-learner|promote|remove TARGET
 *	read ID CTX                   ReadIndex
 *	status ID                     one line of raft_status
 *	log ID                        the entries in memory
 *
 * Regenerate on purpose, then review the diff:
 *	KEEL_RAFT_TRACE_REWRITE=1 KEEL_TEST_DATA=tests/unit/data \
 *	    build/tests/test_raft_trace
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>

#include "test_raft_harness.h"

struct block {
	char *comments; /* lines before the command, verbatim */
	char *command;
	char *expected;
	char *actual;
};

static char *xstrndup(const char *s, size_t n)
{
	char *p = th_xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		return NULL;
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = th_xmalloc((size_t)size + 1);
	size_t n = fread(buf, 1, (size_t)size, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Appends a line (and its newline) to a growing string. */
static void append_line(char **dst, const char *line, size_t len)
{
	size_t old = *dst == NULL ? 0 : strlen(*dst);
	*dst = th_xrealloc(*dst, old + len + 2);
	memcpy(*dst + old, line, len);
	(*dst)[old + len] = '\n';
	(*dst)[old + len + 1] = '\0';
}

/* Splits a file into blocks. Returns the count. */
static size_t parse(const char *text, struct block *blocks, size_t cap)
{
	size_t n = 0;
	const char *p = text;
	char *comments = NULL;
	enum { BETWEEN, SEPARATOR, EXPECTED } st = BETWEEN;
	while (*p != '\0') {
		const char *eol = strchr(p, '\n');
		size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
		const char *next = eol != NULL ? eol + 1 : p + len;
		switch (st) {
		case BETWEEN:
			if (len == 0 || p[0] == '#') {
				append_line(&comments, p, len);
				break;
			}
			assert_true(n < cap);
			memset(&blocks[n], 0, sizeof(blocks[n]));
			blocks[n].comments = comments != NULL ? comments : xstrndup("", 0);
			blocks[n].command = xstrndup(p, len);
			blocks[n].expected = xstrndup("", 0);
			comments = NULL;
			n++;
			st = SEPARATOR;
			break;
		case SEPARATOR:
			assert_true(len == 4 && strncmp(p, "----", 4) == 0);
			st = EXPECTED;
			break;
		case EXPECTED:
			if (len == 0) {
				st = BETWEEN;
			} else {
				append_line(&blocks[n - 1].expected, p, len);
			}
			break;
		}
		p = next;
	}
	free(comments);
	return n;
}

static uint64_t arg_u64(const char *args, const char *key, uint64_t dflt)
{
	const char *p = strstr(args, key);
	if (p == NULL) {
		return dflt;
	}
	return strtoull(p + strlen(key), NULL, 10);
}

static const char *change_name(enum raft_change c)
{
	switch (c) {
	case RAFT_ADD_VOTER:
		return "add-voter";
	case RAFT_ADD_LEARNER:
		return "add-learner";
	case RAFT_PROMOTE:
		return "promote";
	case RAFT_REMOVE:
		return "remove";
	default:
		return "?";
	}
}

static void print_status(struct th_cluster *c, uint64_t id)
{
	struct raft_status st;
	raft_status(th_node(c, id)->r, &st);
	th_tracef(c, "status %llu: %s term=%llu vote=%llu leader=%llu commit=%llu applied=%llu "
		     "persisted=%llu log=%llu..%llu snapshot=%llu",
		  (unsigned long long)id, raft_role_name(st.role), (unsigned long long)st.term,
		  (unsigned long long)st.vote, (unsigned long long)st.leader,
		  (unsigned long long)st.commit_index, (unsigned long long)st.applied_index,
		  (unsigned long long)st.persisted_index, (unsigned long long)st.first_index,
		  (unsigned long long)st.last_index, (unsigned long long)st.snapshot_index);
	for (uint32_t i = 0; i < st.n_members; i++) {
		const struct raft_member_status *m = &st.members[i];
		th_tracef(c, " [%llu %s", (unsigned long long)m->id,
			  m->role == RAFT_VOTER ? "voter" : "learner");
		if (st.role == RAFT_LEADER) {
			th_tracef(c, " match=%llu next=%llu %s", (unsigned long long)m->match_index,
				  (unsigned long long)m->next_index, raft_progress_state_name(m->state));
		}
		th_tracef(c, "]");
	}
	th_tracef(c, "\n");
}

static void print_log(struct th_cluster *c, uint64_t id)
{
	struct raft *r = th_node(c, id)->r;
	th_tracef(c, "log %llu:", (unsigned long long)id);
	for (uint64_t i = raft_first_index(r); i <= raft_last_index(r); i++) {
		struct raft_entry e;
		assert_true(raft_entry_at(r, i, &e));
		th_tracef(c, " %llu/%llu:", (unsigned long long)e.index, (unsigned long long)e.term);
		if (e.type == RAFT_ENTRY_NORMAL) {
			th_tracef(c, "%.*s", (int)e.size, (const char *)e.data);
		} else {
			th_tracef(c, "%s", e.type == RAFT_ENTRY_NOOP ? "noop" : "config");
		}
	}
	th_tracef(c, "\n");
}

static void deliver_n(struct th_cluster *c, uint64_t n)
{
	for (uint64_t i = 0; i < n && th_deliver_one(c); i++) {
	}
}

static void stabilize_nopersist(struct th_cluster *c)
{
	th_stabilize(c, false);
}

/* Runs one command; its trace goes to c->trace. */
static void run(struct th_cluster *c, bool *have_cluster, const char *cmd)
{
	char verb[32] = {0};
	unsigned long long a = 0, b = 0;
	char text[128] = {0};
	sscanf(cmd, "%31s", verb);
	const char *args = cmd + strlen(verb);
	if (strcmp(verb, "cluster") == 0) {
		if (*have_cluster) {
			FILE *keep = c->trace;
			c->trace = NULL;
			th_close(c);
			c->trace = keep;
		}
		struct raft_options o;
		raft_options_default(&o);
		o.election_timeout_ms = 1000;
		o.heartbeat_interval_ms = 100;
		o.pre_vote = arg_u64(args, "prevote=", 1) != 0;
		o.check_quorum = arg_u64(args, "checkquorum=", 1) != 0;
		o.max_append_entries = (uint32_t)arg_u64(args, "max-append=", 256);
		o.max_inflight_msgs = (uint32_t)arg_u64(args, "inflight=", 64);
		o.snapshot_trailing_entries = arg_u64(args, "trailing=", 0);
		o.snapshot_chunk_bytes = (uint32_t)arg_u64(args, "chunk=", 40);
		FILE *trace = c->trace;
		th_init(c, arg_u64(args, "voters=", 3), arg_u64(args, "learners=", 0), &o,
			arg_u64(args, "seed=", 1));
		c->trace = trace;
		c->trace_heartbeats = arg_u64(args, "heartbeats=", 0) != 0;
		*have_cluster = true;
		return;
	}
	assert_true(*have_cluster);
	if (strcmp(verb, "tick") == 0 && sscanf(args, "%llu %llu", &a, &b) == 2) {
		th_tick(c, a, th_node(c, a)->now_ms + b);
	} else if (strcmp(verb, "tick-all") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_tick_all(c, a);
	} else if (strcmp(verb, "stabilize") == 0) {
		th_stabilize(c, true);
	} else if (strcmp(verb, "stabilize-nopersist") == 0) {
		stabilize_nopersist(c);
	} else if (strcmp(verb, "deliver") == 0 && sscanf(args, "%llu", &a) == 1) {
		deliver_n(c, a);
	} else if (strcmp(verb, "ready") == 0) {
		th_ready_all(c);
	} else if (strcmp(verb, "persist") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_persist(c, a);
	} else if (strcmp(verb, "propose") == 0 && sscanf(args, "%llu %127s", &a, text) == 2) {
		uint64_t index = 0;
		enum keel_err err = th_propose(c, a, text, &index);
		th_tracef(c, "propose %llu %s: %s index=%llu\n", a, text, keel_errname(err),
			  (unsigned long long)index);
	} else if (strcmp(verb, "isolate") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_isolate(c, a, true);
	} else if (strcmp(verb, "reconnect") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_isolate(c, a, false);
	} else if (strcmp(verb, "heal") == 0) {
		th_heal(c);
	} else if (strcmp(verb, "crash") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_crash(c, a);
	} else if (strcmp(verb, "restart") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_restart(c, a);
	} else if (strcmp(verb, "snapshot") == 0 && sscanf(args, "%llu", &a) == 1) {
		th_take_snapshot(c, a);
		th_tracef(c, "snapshot %llu at %llu/%llu\n", a, (unsigned long long)th_node(c, a)->snap.index,
			  (unsigned long long)th_node(c, a)->snap.term);
	} else if (strcmp(verb, "transfer") == 0 && sscanf(args, "%llu %llu", &a, &b) == 2) {
		th_tracef(c, "transfer %llu -> %llu: %s\n", a, b,
			  keel_errname(raft_transfer_leader(th_node(c, a)->r, b)));
	} else if (strcmp(verb, "change") == 0 && sscanf(args, "%llu %127s %llu", &a, text, &b) == 3) {
		enum raft_change ch = 0;
		for (int k = RAFT_ADD_VOTER; k <= RAFT_REMOVE; k++) {
			if (strcmp(text, change_name((enum raft_change)k)) == 0) {
				ch = (enum raft_change)k;
			}
		}
		uint64_t index = 0, term = 0;
		enum keel_err err = raft_change_member(th_node(c, a)->r, ch, b, &index, &term);
		th_tracef(c, "change %llu %s %llu: %s index=%llu\n", a, text, b, keel_errname(err),
			  (unsigned long long)index);
	} else if (strcmp(verb, "add-node") == 0) {
		uint64_t id = th_add_empty_node(c);
		th_tracef(c, "added empty node %llu\n", (unsigned long long)id);
	} else if (strcmp(verb, "read") == 0 && sscanf(args, "%llu %llu", &a, &b) == 2) {
		th_tracef(c, "read %llu ctx=%llu: %s\n", a, b,
			  keel_errname(raft_read_index(th_node(c, a)->r, b)));
	} else if (strcmp(verb, "status") == 0 && sscanf(args, "%llu", &a) == 1) {
		print_status(c, a);
	} else if (strcmp(verb, "log") == 0 && sscanf(args, "%llu", &a) == 1) {
		print_log(c, a);
	} else {
		fail_msg("unknown or malformed command: %s", cmd);
	}
}

static bool rewrite_mode(void)
{
	const char *v = getenv("KEEL_RAFT_TRACE_REWRITE");
	return v != NULL && strcmp(v, "1") == 0;
}

static void run_file(const char *path)
{
	char *text = read_file(path);
	assert_non_null(text);
	struct block *blocks = calloc(512, sizeof(*blocks));
	size_t n = parse(text, blocks, 512);
	assert_true(n > 0);
	struct th_cluster *c = calloc(1, sizeof(*c));
	bool have_cluster = false;
	size_t mismatches = 0;
	for (size_t i = 0; i < n; i++) {
		char *out = NULL;
		size_t out_size = 0;
		FILE *mem = open_memstream(&out, &out_size);
		assert_non_null(mem);
		c->trace = mem;
		run(c, &have_cluster, blocks[i].command);
		fclose(mem);
		c->trace = NULL;
		blocks[i].actual = out;
		if (strcmp(blocks[i].actual, blocks[i].expected) != 0) {
			mismatches++;
			if (!rewrite_mode()) {
				fprintf(stderr, "%s: block %zu \"%s\"\n--- expected\n%s--- actual\n%s---\n",
					path, i + 1, blocks[i].command, blocks[i].expected,
					blocks[i].actual);
			}
		}
	}
	if (rewrite_mode() && mismatches > 0) {
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		for (size_t i = 0; i < n; i++) {
			fprintf(f, "%s%s\n----\n%s\n", blocks[i].comments, blocks[i].command,
				blocks[i].actual);
		}
		fclose(f);
		fprintf(stderr, "%s: rewritten (%zu blocks changed)\n", path, mismatches);
		mismatches = 0;
	}
	if (have_cluster) {
		th_close(c);
	}
	for (size_t i = 0; i < n; i++) {
		free(blocks[i].comments);
		free(blocks[i].command);
		free(blocks[i].expected);
		free(blocks[i].actual);
	}
	free(blocks);
	free(c);
	free(text);
	assert_int_equal(mismatches, 0);
}

static void test_traces(void **state)
{
	(void)state;
	const char *root = getenv("KEEL_TEST_DATA");
	assert_non_null(root);
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/raft", root);
	DIR *d = opendir(dir);
	assert_non_null(d);
	char names[64][256];
	size_t count = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && count < 64) {
		size_t len = strlen(e->d_name);
		if (len > 4 && strcmp(e->d_name + len - 4, ".txt") == 0) {
			snprintf(names[count++], sizeof(names[0]), "%s", e->d_name);
		}
	}
	closedir(d);
	qsort(names, count, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
	assert_true(count > 0);
	for (size_t i = 0; i < count; i++) {
		char path[1400];
		if ((size_t)snprintf(path, sizeof(path), "%.1000s/%.255s", dir, names[i]) >= sizeof(path)) {
			fail_msg("path too long");
		}
		run_file(path);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_traces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
