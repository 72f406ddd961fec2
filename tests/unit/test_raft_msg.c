/*
 * Unit tests of the peer message codec: a round trip for every type, and
 * the decoder's refusals (truncation at every byte, limits, bad version,
 * bad flags, trailing bytes) — never a crash, never an allocation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "raft/raft.h"

static const struct raft_msg_limits limits = {
	.max_entries = 16,
	.max_entry_bytes = 1024,
	.max_chunk_bytes = 4096,
};

static const uint8_t payload_a[] = "hello";
static const uint8_t payload_b[] = {0, 1, 2, 3, 255};
static const uint8_t chunk[] = "0123456789abcdef";

static struct raft_entry entries[3];

/* One message of each type, with every field set. */
static size_t sample_msgs(struct raft_msg *out)
{
	memset(entries, 0, sizeof(entries));
	entries[0] = (struct raft_entry){.term = 4, .index = 11, .type = RAFT_ENTRY_NORMAL,
					 .size = 5, .data = payload_a};
	entries[1] = (struct raft_entry){.term = 4, .index = 12, .type = RAFT_ENTRY_NOOP};
	entries[2] = (struct raft_entry){.term = 5, .index = 13, .type = RAFT_ENTRY_NORMAL,
					 .size = sizeof(payload_b), .data = payload_b};
	size_t n = 0;
	struct raft_msg m;
#define BASE(t)                                   \
	memset(&m, 0, sizeof(m));                 \
	m.type = (t);                             \
	m.from = 0x0102030405060708ull;           \
	m.to = 3;                                 \
	m.term = 0x3ffffffffffffff0ull
	BASE(RAFT_MSG_APPEND);
	m.append.prev_index = 10;
	m.append.prev_term = 3;
	m.append.commit = 9;
	m.append.n_entries = 3;
	m.append.entries = entries;
	out[n++] = m;
	BASE(RAFT_MSG_APPEND);
	m.append.prev_index = 7; /* an empty probe */
	out[n++] = m;
	BASE(RAFT_MSG_APPEND_RESP);
	m.append_resp.reject = true;
	m.append_resp.index = 12;
	m.append_resp.hint_index = 8;
	m.append_resp.hint_term = 2;
	out[n++] = m;
	BASE(RAFT_MSG_HEARTBEAT);
	m.heartbeat.commit = 44;
	m.heartbeat.read_seq = 45;
	out[n++] = m;
	BASE(RAFT_MSG_HEARTBEAT_RESP);
	m.heartbeat_resp.read_seq = 45;
	out[n++] = m;
	BASE(RAFT_MSG_VOTE);
	m.vote.last_index = 100;
	m.vote.last_term = 7;
	m.vote.pre_vote = true;
	m.vote.transfer = true;
	out[n++] = m;
	BASE(RAFT_MSG_VOTE_RESP);
	m.vote_resp.granted = true;
	m.vote_resp.pre_vote = true;
	out[n++] = m;
	BASE(RAFT_MSG_SNAPSHOT);
	m.snapshot.meta.index = 90;
	m.snapshot.meta.term = 6;
	m.snapshot.meta.size_bytes = 1000;
	m.snapshot.meta.config.count = 2;
	m.snapshot.meta.config.members[0] = (struct raft_member){.id = 1, .role = RAFT_VOTER};
	m.snapshot.meta.config.members[1] = (struct raft_member){.id = 4, .role = RAFT_LEARNER};
	m.snapshot.offset = 984;
	m.snapshot.size = 16;
	m.snapshot.last = true;
	m.snapshot.data = chunk;
	out[n++] = m;
	BASE(RAFT_MSG_SNAPSHOT_RESP);
	m.snapshot_resp.index = 90;
	m.snapshot_resp.snap_term = 6;
	m.snapshot_resp.next_offset = 1000;
	m.snapshot_resp.done = true;
	out[n++] = m;
	BASE(RAFT_MSG_TIMEOUT_NOW);
	out[n++] = m;
	BASE(RAFT_MSG_READ_INDEX);
	m.read_index.ctx = 77;
	out[n++] = m;
	BASE(RAFT_MSG_READ_INDEX_RESP);
	m.read_index_resp.ctx = 77;
	m.read_index_resp.index = 50;
	m.read_index_resp.err = KEEL_NOTLEADER;
	out[n++] = m;
#undef BASE
	return n;
}

static void assert_msgs_equal(const struct raft_msg *a, const struct raft_msg *b)
{
	assert_int_equal(a->type, b->type);
	assert_true(a->from == b->from);
	assert_true(a->to == b->to);
	assert_true(a->term == b->term);
	switch (a->type) {
	case RAFT_MSG_APPEND:
		assert_int_equal(a->append.prev_index, b->append.prev_index);
		assert_int_equal(a->append.prev_term, b->append.prev_term);
		assert_int_equal(a->append.commit, b->append.commit);
		assert_int_equal(a->append.n_entries, b->append.n_entries);
		for (uint32_t i = 0; i < a->append.n_entries; i++) {
			const struct raft_entry *x = &a->append.entries[i], *y = &b->append.entries[i];
			assert_int_equal(x->term, y->term);
			assert_int_equal(x->index, y->index);
			assert_int_equal(x->type, y->type);
			assert_int_equal(x->size, y->size);
			if (x->size > 0) {
				assert_memory_equal(x->data, y->data, x->size);
			}
		}
		break;
	case RAFT_MSG_SNAPSHOT:
		assert_int_equal(a->snapshot.meta.index, b->snapshot.meta.index);
		assert_int_equal(a->snapshot.meta.term, b->snapshot.meta.term);
		assert_int_equal(a->snapshot.meta.size_bytes, b->snapshot.meta.size_bytes);
		assert_int_equal(a->snapshot.meta.config.count, b->snapshot.meta.config.count);
		assert_memory_equal(a->snapshot.meta.config.members, b->snapshot.meta.config.members,
				    a->snapshot.meta.config.count * sizeof(struct raft_member));
		assert_int_equal(a->snapshot.offset, b->snapshot.offset);
		assert_int_equal(a->snapshot.size, b->snapshot.size);
		assert_int_equal(a->snapshot.last, b->snapshot.last);
		assert_memory_equal(a->snapshot.data, b->snapshot.data, a->snapshot.size);
		break;
	default: {
		/* Every other body is plain values: the union compares as bytes
		 * (both sides were zeroed before being filled). */
		struct raft_msg x = *a, y = *b;
		x.append.entries = NULL;
		y.append.entries = NULL;
		assert_memory_equal(&x, &y, sizeof(x));
	}
	}
}

static uint8_t *encode(const struct raft_msg *m, size_t *size)
{
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1 << 20);
	assert_int_equal(raft_msg_encode(m, &w), KEEL_OK);
	assert_true(keel_wbuf_ok(&w));
	assert_true(w.size <= raft_msg_encoded_size(m));
	return keel_wbuf_release(&w, size);
}

static void test_roundtrip_every_type(void **state)
{
	(void)state;
	struct raft_msg msgs[16];
	size_t n = sample_msgs(msgs);
	bool seen[RAFT_MSG_TYPE_MAX + 1] = {false};
	for (size_t i = 0; i < n; i++) {
		size_t size;
		uint8_t *buf = encode(&msgs[i], &size);
		struct raft_msg out;
		struct raft_entry ents[16];
		assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_OK);
		assert_msgs_equal(&msgs[i], &out);
		/* decoded data points into the input buffer */
		if (out.type == RAFT_MSG_APPEND && out.append.n_entries > 0) {
			assert_true(out.append.entries[0].data >= buf);
			assert_true(out.append.entries[0].data < buf + size);
		}
		if (out.type == RAFT_MSG_SNAPSHOT) {
			assert_true(out.snapshot.data >= buf && out.snapshot.data < buf + size);
		}
		seen[msgs[i].type] = true;
		free(buf);
	}
	for (int t = 1; t <= RAFT_MSG_TYPE_MAX; t++) {
		assert_true(seen[t]);
		assert_string_not_equal(raft_msg_type_name((uint8_t)t), "?");
	}
	assert_string_equal(raft_msg_type_name(0), "?");
}

/* Every strict prefix of every message is refused as short (or, where a
 * prefix happens to end a valid smaller shape, something else) — never OK. */
static void test_truncation_refused(void **state)
{
	(void)state;
	struct raft_msg msgs[16];
	size_t n = sample_msgs(msgs);
	for (size_t i = 0; i < n; i++) {
		size_t size;
		uint8_t *buf = encode(&msgs[i], &size);
		for (size_t cut = 0; cut < size; cut++) {
			struct raft_msg out;
			struct raft_entry ents[16];
			enum keel_err err = raft_msg_decode(buf, cut, &limits, &out, ents, 16);
			assert_int_not_equal(err, KEEL_OK);
		}
		/* one trailing byte is a protocol error */
		uint8_t *longer = malloc(size + 1);
		memcpy(longer, buf, size);
		longer[size] = 0;
		struct raft_msg out;
		struct raft_entry ents[16];
		assert_int_equal(raft_msg_decode(longer, size + 1, &limits, &out, ents, 16), KEEL_PROTO);
		free(longer);
		free(buf);
	}
}

static void test_limits_enforced(void **state)
{
	(void)state;
	struct raft_msg msgs[16];
	sample_msgs(msgs);
	size_t size;
	uint8_t *buf = encode(&msgs[0], &size); /* 3 entries, 6 and 5 bytes */
	struct raft_msg out;
	struct raft_entry ents[16];
	struct raft_msg_limits tight = limits;
	tight.max_entries = 2;
	assert_int_equal(raft_msg_decode(buf, size, &tight, &out, ents, 16), KEEL_TOOBIG);
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 2), KEEL_TOOBIG);
	tight = limits;
	tight.max_entry_bytes = 4;
	assert_int_equal(raft_msg_decode(buf, size, &tight, &out, ents, 16), KEEL_TOOBIG);
	free(buf);
	buf = encode(&msgs[7], &size); /* snapshot chunk of 16 bytes */
	tight = limits;
	tight.max_chunk_bytes = 15;
	assert_int_equal(raft_msg_decode(buf, size, &tight, &out, ents, 16), KEEL_TOOBIG);
	free(buf);
	/* a huge entry count with a tiny body: refused before any use */
	uint8_t huge[2 + 24 + 28];
	memset(huge, 0, sizeof(huge));
	huge[0] = RAFT_MSG_VERSION;
	huge[1] = RAFT_MSG_APPEND;
	huge[2 + 24 + 24] = 0x0f; /* n_entries = 0x0fxxxxxx */
	struct raft_msg_limits loose = limits;
	loose.max_entries = UINT32_MAX;
	assert_int_not_equal(raft_msg_decode(huge, sizeof(huge), &loose, &out, ents, UINT32_MAX),
			     KEEL_OK);
}

static void test_bad_header_and_flags(void **state)
{
	(void)state;
	struct raft_msg msgs[16];
	sample_msgs(msgs);
	struct raft_msg out;
	struct raft_entry ents[16];
	size_t size;
	uint8_t *buf = encode(&msgs[3], &size); /* heartbeat */
	buf[0] = 2; /* version */
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	buf[0] = RAFT_MSG_VERSION;
	buf[1] = 0; /* type */
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	buf[1] = RAFT_MSG_TYPE_MAX + 1;
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	free(buf);
	buf = encode(&msgs[5], &size); /* vote: flags are the last byte */
	buf[size - 1] |= 0x80;
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	free(buf);
	buf = encode(&msgs[0], &size); /* append: first entry's type byte */
	buf[2 + 24 + 28 + 16] = 9;
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	free(buf);
	buf = encode(&msgs[7], &size); /* snapshot: corrupt the config */
	buf[2 + 24 + 24 + 4] = 9; /* config version byte */
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_CORRUPT);
	free(buf);
}

/* A term past RAFT_TERM_MAX, or a term inside a message above the
 * sender's own, is refused: taking it would wrap the term on the next
 * campaign (found by fuzz_raft_step). */
static void test_implausible_terms_refused(void **state)
{
	(void)state;
	struct raft_msg msgs[16];
	size_t n = sample_msgs(msgs);
	struct raft_msg out;
	struct raft_entry ents[16];
	for (size_t i = 0; i < n; i++) {
		struct raft_msg m = msgs[i];
		m.term = UINT64_MAX;
		size_t size;
		uint8_t *buf = encode(&m, &size);
		assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
		free(buf);
	}
	struct raft_msg m = msgs[0]; /* append whose last entry is from term 5 */
	m.term = 4;
	size_t size;
	uint8_t *buf = encode(&m, &size);
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	free(buf);
	m.term = 5;
	buf = encode(&m, &size);
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_OK);
	free(buf);
	m = msgs[5]; /* a vote request naming a log term above its own */
	m.term = 2;
	m.vote.last_term = 3;
	buf = encode(&m, &size);
	assert_int_equal(raft_msg_decode(buf, size, &limits, &out, ents, 16), KEEL_PROTO);
	free(buf);
}

static void test_encode_refuses_malformed(void **state)
{
	(void)state;
	struct keel_wbuf w;
	keel_wbuf_init_dynamic(&w, 0, 1024);
	struct raft_msg m = {.type = 0};
	assert_int_equal(raft_msg_encode(&m, &w), KEEL_INVAL);
	m.type = RAFT_MSG_APPEND;
	m.append.n_entries = 2; /* no entries array */
	assert_int_equal(raft_msg_encode(&m, &w), KEEL_INVAL);
	memset(&m, 0, sizeof(m));
	m.type = RAFT_MSG_SNAPSHOT;
	m.snapshot.size = 10; /* no data: the node did not fill it */
	assert_int_equal(raft_msg_encode(&m, &w), KEEL_INVAL);
	keel_wbuf_free(&w);
	/* a writer at its maximum reports overflow through its flag */
	struct raft_msg msgs[16];
	sample_msgs(msgs);
	keel_wbuf_init_dynamic(&w, 0, 16);
	assert_int_equal(raft_msg_encode(&msgs[0], &w), KEEL_OK);
	assert_false(keel_wbuf_ok(&w));
	keel_wbuf_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_every_type),
		cmocka_unit_test(test_truncation_refused),
		cmocka_unit_test(test_limits_enforced),
		cmocka_unit_test(test_bad_header_and_flags),
		cmocka_unit_test(test_implausible_terms_refused),
		cmocka_unit_test(test_encode_refuses_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
