/*
 * Fuzz target: zk_snapshot_load() on arbitrary bytes.
 *
 * Properties: never crashes or leaks, allocates no more than the limits
 * allow, and a snapshot that loads has a state hash that a full recompute
 * confirms (the loader checks it; this target asserts it again) and writes
 * back to the very same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct src {
	const uint8_t *data;
	size_t size;
	size_t pos;
};

static enum keel_err src_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct src *s = ctx;
	/* Small pieces exercise the reader's refills. */
	size_t n = s->size - s->pos;
	n = n < max ? n : max;
	n = n < 777 ? n : 777;
	memcpy(buf, s->data + s->pos, n);
	s->pos += n;
	*got = n;
	return KEEL_OK;
}

struct sink {
	const uint8_t *expect;
	size_t size;
	size_t pos;
};

static enum keel_err sink_write(void *ctx, const void *data, size_t size)
{
	struct sink *s = ctx;
	KEEL_ASSERT(s->pos + size <= s->size);
	KEEL_ASSERT(memcmp(s->expect + s->pos, data, size) == 0);
	s->pos += size;
	return KEEL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zk_config cfg;
	zk_config_default(&cfg);
	cfg.max_packet_size = 4096; /* keeps per-node allocations small */
	cfg.max_nodes = 100000;
	cfg.max_sessions = 10000;
	struct src s = {data, size, 0};
	struct zk_state st;
	if (zk_snapshot_load(&st, &cfg, src_read, &s) != KEEL_OK) {
		return 0;
	}
	KEEL_ASSERT(zk_state_hash(&st) == zk_state_hash_full(&st));
	/* A loaded snapshot re-serializes to exactly the bytes it was. */
	struct sink k = {data, s.pos, 0};
	KEEL_ASSERT(zk_snapshot_write(&st, sink_write, &k, NULL) == KEEL_OK);
	KEEL_ASSERT(k.pos == s.pos);
	zk_state_close(&st);
	return 0;
}
