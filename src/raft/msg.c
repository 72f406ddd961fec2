/*
 * msg.c — the peer message codec (layout in docs/raft.md).
 *
 *	u8 version | u8 type | u64 from | u64 to | u64 term | body
 *
 * Decoding is bounds-checked field by field through keel_rbuf, checks every
 * count and length against the limits before use, allocates nothing (entry
 * structs go to the caller's array; data pointers point into the input)
 * and rejects trailing bytes.
 */
#include <string.h>

#include "raft/raft_int.h"

#define VOTE_PRE 0x1
#define VOTE_TRANSFER 0x2
#define VOTE_RESP_GRANTED 0x1
#define VOTE_RESP_PRE 0x2
#define SNAP_RESP_REJECT 0x1
#define SNAP_RESP_DONE 0x2
#define HEADER_BYTES (2 + 3 * 8)
#define ENTRY_HEADER_BYTES (8 + 8 + 1 + 4)
#define CONFIG_MAX_BYTES (1 + 4 + RAFT_MAX_MEMBERS * 9)

const char *raft_msg_type_name(uint8_t type)
{
	static const char *const names[] = {
		[RAFT_MSG_APPEND] = "APPEND",
		[RAFT_MSG_APPEND_RESP] = "APPEND_RESP",
		[RAFT_MSG_HEARTBEAT] = "HEARTBEAT",
		[RAFT_MSG_HEARTBEAT_RESP] = "HEARTBEAT_RESP",
		[RAFT_MSG_VOTE] = "VOTE",
		[RAFT_MSG_VOTE_RESP] = "VOTE_RESP",
		[RAFT_MSG_SNAPSHOT] = "SNAPSHOT",
		[RAFT_MSG_SNAPSHOT_RESP] = "SNAPSHOT_RESP",
		[RAFT_MSG_TIMEOUT_NOW] = "TIMEOUT_NOW",
		[RAFT_MSG_READ_INDEX] = "READ_INDEX",
		[RAFT_MSG_READ_INDEX_RESP] = "READ_INDEX_RESP",
	};
	if (type == 0 || type > RAFT_MSG_TYPE_MAX) {
		return "?";
	}
	return names[type];
}

size_t raft_msg_encoded_size(const struct raft_msg *msg)
{
	size_t size = HEADER_BYTES + 64; /* fixed bodies fit in 64 */
	if (msg->type == RAFT_MSG_APPEND) {
		size += 4;
		for (uint32_t i = 0; i < msg->append.n_entries; i++) {
			size += ENTRY_HEADER_BYTES + msg->append.entries[i].size;
		}
	} else if (msg->type == RAFT_MSG_SNAPSHOT) {
		size += 4 + CONFIG_MAX_BYTES + msg->snapshot.size;
	}
	return size;
}

static enum keel_err encode_append(const struct raft_msg_append *a, struct keel_wbuf *w)
{
	if (a->n_entries > 0 && a->entries == NULL) {
		return KEEL_INVAL;
	}
	keel_wbuf_u64(w, a->prev_index);
	keel_wbuf_u64(w, a->prev_term);
	keel_wbuf_u64(w, a->commit);
	keel_wbuf_u32(w, a->n_entries);
	for (uint32_t i = 0; i < a->n_entries; i++) {
		const struct raft_entry *e = &a->entries[i];
		keel_wbuf_u64(w, e->term);
		keel_wbuf_u64(w, e->index);
		keel_wbuf_u8(w, e->type);
		keel_wbuf_u32(w, e->size);
		keel_wbuf_bytes(w, e->data, e->size);
	}
	return KEEL_OK;
}

static enum keel_err encode_snapshot(const struct raft_msg_snapshot *s, struct keel_wbuf *w)
{
	if ((s->size > 0 && s->data == NULL) || !raft_config_valid(&s->meta.config)) {
		return KEEL_INVAL;
	}
	keel_wbuf_u64(w, s->meta.index);
	keel_wbuf_u64(w, s->meta.term);
	keel_wbuf_u64(w, s->meta.size_bytes);
	size_t len_pos = w->size;
	keel_wbuf_u32(w, 0);
	size_t start = w->size;
	raft_config_encode(&s->meta.config, w);
	keel_wbuf_patch_u32(w, len_pos, (uint32_t)(w->size - start));
	keel_wbuf_u64(w, s->offset);
	keel_wbuf_u32(w, s->size);
	keel_wbuf_bool(w, s->last);
	keel_wbuf_bytes(w, s->data, s->size);
	return KEEL_OK;
}

enum keel_err raft_msg_encode(const struct raft_msg *m, struct keel_wbuf *w)
{
	if (m->type == 0 || m->type > RAFT_MSG_TYPE_MAX) {
		return KEEL_INVAL;
	}
	keel_wbuf_u8(w, RAFT_MSG_VERSION);
	keel_wbuf_u8(w, m->type);
	keel_wbuf_u64(w, m->from);
	keel_wbuf_u64(w, m->to);
	keel_wbuf_u64(w, m->term);
	switch (m->type) {
	case RAFT_MSG_APPEND:
		return encode_append(&m->append, w);
	case RAFT_MSG_APPEND_RESP:
		keel_wbuf_bool(w, m->append_resp.reject);
		keel_wbuf_u64(w, m->append_resp.index);
		keel_wbuf_u64(w, m->append_resp.hint_index);
		keel_wbuf_u64(w, m->append_resp.hint_term);
		break;
	case RAFT_MSG_HEARTBEAT:
		keel_wbuf_u64(w, m->heartbeat.commit);
		keel_wbuf_u64(w, m->heartbeat.read_seq);
		break;
	case RAFT_MSG_HEARTBEAT_RESP:
		keel_wbuf_u64(w, m->heartbeat_resp.read_seq);
		break;
	case RAFT_MSG_VOTE:
		keel_wbuf_u64(w, m->vote.last_index);
		keel_wbuf_u64(w, m->vote.last_term);
		keel_wbuf_u8(w, (uint8_t)((m->vote.pre_vote ? VOTE_PRE : 0) |
					  (m->vote.transfer ? VOTE_TRANSFER : 0)));
		break;
	case RAFT_MSG_VOTE_RESP:
		keel_wbuf_u8(w, (uint8_t)((m->vote_resp.granted ? VOTE_RESP_GRANTED : 0) |
					  (m->vote_resp.pre_vote ? VOTE_RESP_PRE : 0)));
		break;
	case RAFT_MSG_SNAPSHOT:
		return encode_snapshot(&m->snapshot, w);
	case RAFT_MSG_SNAPSHOT_RESP:
		keel_wbuf_u64(w, m->snapshot_resp.index);
		keel_wbuf_u64(w, m->snapshot_resp.snap_term);
		keel_wbuf_u64(w, m->snapshot_resp.next_offset);
		keel_wbuf_u8(w, (uint8_t)((m->snapshot_resp.reject ? SNAP_RESP_REJECT : 0) |
					  (m->snapshot_resp.done ? SNAP_RESP_DONE : 0)));
		break;
	case RAFT_MSG_TIMEOUT_NOW:
		break;
	case RAFT_MSG_READ_INDEX:
		keel_wbuf_u64(w, m->read_index.ctx);
		break;
	case RAFT_MSG_READ_INDEX_RESP:
		keel_wbuf_u64(w, m->read_index_resp.ctx);
		keel_wbuf_u64(w, m->read_index_resp.index);
		keel_wbuf_u32(w, m->read_index_resp.err);
		break;
	default:
		KEEL_UNREACHABLE();
	}
	return KEEL_OK;
}

static enum keel_err decode_append(struct keel_rbuf *r, const struct raft_msg_limits *limits,
				   struct raft_msg *m, struct raft_entry *entries,
				   uint32_t entries_cap)
{
	struct raft_msg_append *a = &m->append;
	a->prev_index = keel_rbuf_u64(r);
	a->prev_term = keel_rbuf_u64(r);
	a->commit = keel_rbuf_u64(r);
	a->n_entries = keel_rbuf_u32(r);
	a->entries = NULL;
	if (!keel_rbuf_ok(r)) {
		return KEEL_SHORT;
	}
	if (a->n_entries > limits->max_entries || a->n_entries > entries_cap) {
		return KEEL_TOOBIG;
	}
	/* Each entry takes at least its header: a cheap bound on the count. */
	if ((uint64_t)a->n_entries * ENTRY_HEADER_BYTES > keel_rbuf_remaining(r)) {
		return KEEL_SHORT;
	}
	for (uint32_t i = 0; i < a->n_entries; i++) {
		struct raft_entry *e = &entries[i];
		e->term = keel_rbuf_u64(r);
		e->index = keel_rbuf_u64(r);
		e->type = keel_rbuf_u8(r);
		e->size = keel_rbuf_u32(r);
		if (!keel_rbuf_ok(r)) {
			return KEEL_SHORT;
		}
		if (e->size > limits->max_entry_bytes) {
			return KEEL_TOOBIG;
		}
		if (e->type != RAFT_ENTRY_NORMAL && e->type != RAFT_ENTRY_NOOP &&
		    e->type != RAFT_ENTRY_CONFIG) {
			return KEEL_PROTO;
		}
		e->data = e->size > 0 ? keel_rbuf_bytes(r, e->size) : NULL;
		if (!keel_rbuf_ok(r)) {
			return KEEL_SHORT;
		}
	}
	if (a->n_entries > 0) {
		a->entries = entries;
	}
	return KEEL_OK;
}

static enum keel_err decode_snapshot(struct keel_rbuf *r, const struct raft_msg_limits *limits,
				     struct raft_msg *m)
{
	struct raft_msg_snapshot *s = &m->snapshot;
	s->meta.index = keel_rbuf_u64(r);
	s->meta.term = keel_rbuf_u64(r);
	s->meta.size_bytes = keel_rbuf_u64(r);
	uint32_t config_len = keel_rbuf_u32(r);
	if (!keel_rbuf_ok(r)) {
		return KEEL_SHORT;
	}
	if (config_len > CONFIG_MAX_BYTES) {
		return KEEL_TOOBIG;
	}
	const uint8_t *config = keel_rbuf_bytes(r, config_len);
	s->offset = keel_rbuf_u64(r);
	s->size = keel_rbuf_u32(r);
	uint8_t last = keel_rbuf_u8(r);
	if (!keel_rbuf_ok(r)) {
		return KEEL_SHORT;
	}
	if (last > 1) {
		return KEEL_PROTO;
	}
	s->last = last == 1;
	if (s->size > limits->max_chunk_bytes) {
		return KEEL_TOOBIG;
	}
	s->data = keel_rbuf_bytes(r, s->size);
	if (!keel_rbuf_ok(r)) {
		return KEEL_SHORT;
	}
	if (raft_config_decode(config, config_len, &s->meta.config) != KEEL_OK) {
		return KEEL_CORRUPT;
	}
	return KEEL_OK;
}

static enum keel_err decode_body(struct keel_rbuf *r, const struct raft_msg_limits *limits,
				 struct raft_msg *m, struct raft_entry *entries,
				 uint32_t entries_cap)
{
	uint8_t flags;
	switch (m->type) {
	case RAFT_MSG_APPEND:
		return decode_append(r, limits, m, entries, entries_cap);
	case RAFT_MSG_APPEND_RESP: {
		uint8_t reject = keel_rbuf_u8(r);
		m->append_resp.reject = reject == 1;
		m->append_resp.index = keel_rbuf_u64(r);
		m->append_resp.hint_index = keel_rbuf_u64(r);
		m->append_resp.hint_term = keel_rbuf_u64(r);
		if (keel_rbuf_ok(r) && reject > 1) {
			return KEEL_PROTO;
		}
		break;
	}
	case RAFT_MSG_HEARTBEAT:
		m->heartbeat.commit = keel_rbuf_u64(r);
		m->heartbeat.read_seq = keel_rbuf_u64(r);
		break;
	case RAFT_MSG_HEARTBEAT_RESP:
		m->heartbeat_resp.read_seq = keel_rbuf_u64(r);
		break;
	case RAFT_MSG_VOTE:
		m->vote.last_index = keel_rbuf_u64(r);
		m->vote.last_term = keel_rbuf_u64(r);
		flags = keel_rbuf_u8(r);
		if (keel_rbuf_ok(r) && (flags & ~(VOTE_PRE | VOTE_TRANSFER)) != 0) {
			return KEEL_PROTO;
		}
		m->vote.pre_vote = (flags & VOTE_PRE) != 0;
		m->vote.transfer = (flags & VOTE_TRANSFER) != 0;
		break;
	case RAFT_MSG_VOTE_RESP:
		flags = keel_rbuf_u8(r);
		if (keel_rbuf_ok(r) && (flags & ~(VOTE_RESP_GRANTED | VOTE_RESP_PRE)) != 0) {
			return KEEL_PROTO;
		}
		m->vote_resp.granted = (flags & VOTE_RESP_GRANTED) != 0;
		m->vote_resp.pre_vote = (flags & VOTE_RESP_PRE) != 0;
		break;
	case RAFT_MSG_SNAPSHOT:
		return decode_snapshot(r, limits, m);
	case RAFT_MSG_SNAPSHOT_RESP:
		m->snapshot_resp.index = keel_rbuf_u64(r);
		m->snapshot_resp.snap_term = keel_rbuf_u64(r);
		m->snapshot_resp.next_offset = keel_rbuf_u64(r);
		flags = keel_rbuf_u8(r);
		if (keel_rbuf_ok(r) && (flags & ~(SNAP_RESP_REJECT | SNAP_RESP_DONE)) != 0) {
			return KEEL_PROTO;
		}
		m->snapshot_resp.reject = (flags & SNAP_RESP_REJECT) != 0;
		m->snapshot_resp.done = (flags & SNAP_RESP_DONE) != 0;
		break;
	case RAFT_MSG_TIMEOUT_NOW:
		break;
	case RAFT_MSG_READ_INDEX:
		m->read_index.ctx = keel_rbuf_u64(r);
		break;
	case RAFT_MSG_READ_INDEX_RESP:
		m->read_index_resp.ctx = keel_rbuf_u64(r);
		m->read_index_resp.index = keel_rbuf_u64(r);
		m->read_index_resp.err = keel_rbuf_u32(r);
		break;
	default:
		return KEEL_PROTO;
	}
	return keel_rbuf_ok(r) ? KEEL_OK : KEEL_SHORT;
}

/* Every term a message names is at most the sender's own term, and that
 * is at most RAFT_TERM_MAX: a log entry, snapshot or vote request cannot
 * come from a term the sender has not reached. Every index is at most
 * RAFT_INDEX_MAX, so that no arithmetic on it can wrap. */
static bool numbers_plausible(const struct raft_msg *m)
{
	if (m->term > RAFT_TERM_MAX) {
		return false;
	}
	switch (m->type) {
	case RAFT_MSG_APPEND: {
		const struct raft_msg_append *a = &m->append;
		if (a->prev_term > m->term || a->prev_index > RAFT_INDEX_MAX - a->n_entries ||
		    a->commit > RAFT_INDEX_MAX) {
			return false;
		}
		for (uint32_t i = 0; i < a->n_entries; i++) {
			if (a->entries[i].term > m->term || a->entries[i].index > RAFT_INDEX_MAX) {
				return false;
			}
		}
		return true;
	}
	case RAFT_MSG_APPEND_RESP:
		return m->append_resp.hint_term <= m->term &&
		       m->append_resp.index <= RAFT_INDEX_MAX &&
		       m->append_resp.hint_index <= RAFT_INDEX_MAX;
	case RAFT_MSG_HEARTBEAT:
		return m->heartbeat.commit <= RAFT_INDEX_MAX;
	case RAFT_MSG_VOTE:
		return m->vote.last_term <= m->term && m->vote.last_index <= RAFT_INDEX_MAX;
	case RAFT_MSG_SNAPSHOT:
		return m->snapshot.meta.term <= m->term && m->snapshot.meta.index <= RAFT_INDEX_MAX;
	case RAFT_MSG_SNAPSHOT_RESP:
		return m->snapshot_resp.snap_term <= m->term &&
		       m->snapshot_resp.index <= RAFT_INDEX_MAX;
	case RAFT_MSG_READ_INDEX_RESP:
		return m->read_index_resp.index <= RAFT_INDEX_MAX;
	default:
		return true;
	}
}

enum keel_err raft_msg_decode(const void *buf, size_t size, const struct raft_msg_limits *limits,
			      struct raft_msg *m, struct raft_entry *entries, uint32_t entries_cap)
{
	struct keel_rbuf r;
	keel_rbuf_init(&r, buf, size);
	memset(m, 0, sizeof(*m));
	uint8_t version = keel_rbuf_u8(&r);
	m->type = keel_rbuf_u8(&r);
	m->from = keel_rbuf_u64(&r);
	m->to = keel_rbuf_u64(&r);
	m->term = keel_rbuf_u64(&r);
	if (!keel_rbuf_ok(&r)) {
		return KEEL_SHORT;
	}
	if (version != RAFT_MSG_VERSION || m->type == 0 || m->type > RAFT_MSG_TYPE_MAX) {
		return KEEL_PROTO;
	}
	enum keel_err err = decode_body(&r, limits, m, entries, entries_cap);
	if (err != KEEL_OK) {
		return err;
	}
	if (!keel_rbuf_done(&r)) {
		return KEEL_PROTO; /* trailing bytes */
	}
	return numbers_plausible(m) ? KEEL_OK : KEEL_PROTO;
}
