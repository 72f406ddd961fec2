/*
 * fuzz_raft_step.c — a Raft core fed arbitrary peer messages.
 *
 * The input is a sequence of records: u8 op, u16 length, then `length`
 * bytes. op 0 decodes the bytes as a message and steps it into server 1 of
 * a bootstrapped 3-voter cluster (from/to are forced into range so that
 * most messages reach the state machine); op 1 advances the clock by the
 * first byte in ms and ticks; op 2 makes every outstanding persist batch
 * durable. After each record the ready loop runs. Property: no input trips
 * an assertion, leaks or touches memory it should not (ASan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "raft/raft.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(struct raft *r, uint64_t *batches, size_t *n_batches)
{
	struct raft_ready rd;
	while (raft_ready(r, &rd)) {
		if (rd.persist_id != 0 && *n_batches < 1024) {
			batches[(*n_batches)++] = rd.persist_id;
		}
		uint64_t last = rd.n_committed > 0 ? rd.committed[rd.n_committed - 1].index : 0;
		raft_advance(r, &rd);
		if (last > 0) {
			raft_applied(r, last);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct raft_options o;
	raft_options_default(&o);
	o.id = 1;
	keel_rng_seed(&o.rng, 1);
	o.max_append_entries = 16;
	o.max_entry_bytes = 1024;
	o.snapshot_chunk_bytes = 1024;
	o.max_pending_reads = 64; /* small tables: many short runs */
	o.max_inflight_msgs = 8;
	o.max_persist_batches = 8;
	o.max_outbox_msgs = 256;
	struct raft *r;
	if (raft_init(&r, &o) != KEEL_OK) {
		return 0;
	}
	struct raft_config c = {.count = 3};
	for (uint32_t i = 0; i < 3; i++) {
		c.members[i].id = i + 1;
		c.members[i].role = RAFT_VOTER;
	}
	uint8_t buf[256];
	struct keel_wbuf w;
	keel_wbuf_init_fixed(&w, buf, sizeof(buf));
	struct raft_entry boot;
	KEEL_ASSERT(raft_bootstrap_entry(&c, &w, &boot) == KEEL_OK);
	struct raft_hard_state hs = {.term = 1, .vote = 0};
	KEEL_ASSERT(raft_restore(r, &hs, NULL, &boot, 1) == KEEL_OK);
	uint64_t now = 1000;
	raft_tick(r, now);
	struct raft_msg_limits limits;
	raft_options_msg_limits(&o, &limits);
	struct raft_entry entries[16];
	uint64_t batches[1024];
	size_t n_batches = 0;
	size_t pos = 0;
	while (pos + 3 <= size) {
		uint8_t op = data[pos];
		size_t len = (size_t)data[pos + 1] << 8 | data[pos + 2];
		pos += 3;
		if (len > size - pos) {
			len = size - pos;
		}
		const uint8_t *rec = data + pos;
		pos += len;
		if (op % 3 == 0) {
			struct raft_msg m;
			if (raft_msg_decode(rec, len, &limits, &m, entries, 16) != KEEL_OK) {
				continue;
			}
			m.to = 1;
			m.from = 2 + m.from % 3; /* 2, 3 (members) or 4 (a stranger) */
			enum keel_err err = raft_step(r, &m);
			KEEL_ASSERT(err == KEEL_OK || err == KEEL_PROTO);
		} else if (op % 3 == 1) {
			now += len > 0 ? rec[0] * 16u : 1;
			raft_tick(r, now);
		} else if (n_batches > 0) {
			KEEL_ASSERT(raft_persisted(r, batches[n_batches - 1]) == KEEL_OK);
			n_batches = 0;
		}
		drain(r, batches, &n_batches);
	}
	raft_close(r);
	return 0;
}
