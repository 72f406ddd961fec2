/*
 * Fuzz target: the ZooKeeper snapshot and txn-log readers (zk_import).
 *
 * The first byte picks the mode:
 *   even: the rest is a ZooKeeper snapshot file;
 *   odd:  the rest is a list of txn bodies (u16 length + bytes each) that
 *         this target frames into a valid log (header, Adler-32, 'B'), so
 *         the replay itself is exercised past the checksums; it starts
 *         from ZooKeeper's initial tree.
 * Properties: never crashes or leaks; an input that is accepted finishes
 * into a keel state whose snapshot loads back with the same state hash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "zk/zk_import.h"
#include "zk/zk_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum keel_err collect(void *ctx, const void *data, size_t size)
{
	struct keel_wbuf *w = ctx;
	keel_wbuf_bytes(w, data, size);
	return keel_wbuf_ok(w) ? KEEL_OK : KEEL_NOMEM;
}

struct src {
	const uint8_t *data;
	size_t size;
	size_t pos;
};

static enum keel_err src_read(void *ctx, void *buf, size_t max, size_t *got)
{
	struct src *s = ctx;
	size_t n = s->size - s->pos < max ? s->size - s->pos : max;
	memcpy(buf, s->data + s->pos, n);
	s->pos += n;
	*got = n;
	return KEEL_OK;
}

/* The finished state must be a keel snapshot that loads back equal. */
static void check_round_trip(struct zk_import *imp, const struct zk_config *cfg)
{
	if (zk_import_finish(imp, NULL, NULL) != KEEL_OK) {
		return;
	}
	struct keel_wbuf out;
	keel_wbuf_init_dynamic(&out, 4096, 1u << 26);
	KEEL_ASSERT(zk_snapshot_write(&imp->st, collect, &out, NULL) == KEEL_OK);
	struct src s = {out.data, out.size, 0};
	struct zk_state loaded;
	KEEL_ASSERT(zk_snapshot_load(&loaded, cfg, src_read, &s) == KEEL_OK);
	KEEL_ASSERT(zk_state_hash(&loaded) == zk_state_hash(&imp->st));
	zk_state_close(&loaded);
	keel_wbuf_free(&out);
}

static void frame_log(const uint8_t *data, size_t size, struct keel_wbuf *log)
{
	keel_wbuf_u32(log, 0x5a4b4c47); /* "ZKLG" */
	keel_wbuf_i32(log, 2);
	keel_wbuf_i64(log, 0);
	size_t pos = 0;
	while (pos + 2 <= size) {
		size_t len = (size_t)data[pos] << 8 | data[pos + 1];
		pos += 2;
		len = len < size - pos ? len : size - pos;
		if (len == 0) {
			break;
		}
		keel_wbuf_u64(log, zk_import_adler32(1, data + pos, len));
		keel_wbuf_u32(log, (uint32_t)len);
		keel_wbuf_bytes(log, data + pos, len);
		keel_wbuf_u8(log, 'B');
		pos += len;
	}
	keel_wbuf_zero(log, 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1) {
		return 0;
	}
	struct zk_config cfg;
	zk_config_default(&cfg);
	cfg.max_nodes = 10000;
	struct zk_import imp;
	if (zk_import_init(&imp, &cfg) != KEEL_OK) {
		return 0;
	}
	struct zk_import_error err;
	if ((data[0] & 1) == 0) {
		err.reason = NULL;
		enum keel_err rc = zk_import_snapshot(&imp, data + 1, size - 1, 0, &err);
		if (rc == KEEL_OK) {
			check_round_trip(&imp, &cfg);
		} else if (rc == KEEL_CORRUPT) {
			KEEL_ASSERT(err.reason != NULL && err.offset <= size - 1);
		}
	} else {
		struct keel_wbuf log;
		keel_wbuf_init_dynamic(&log, 1024, 1u << 24);
		frame_log(data + 1, size - 1, &log);
		if (zk_import_empty(&imp) == KEEL_OK &&
		    zk_import_log(&imp, log.data, log.size, &err) == KEEL_OK) {
			check_round_trip(&imp, &cfg);
		}
		keel_wbuf_free(&log);
	}
	zk_import_close(&imp);
	return 0;
}
