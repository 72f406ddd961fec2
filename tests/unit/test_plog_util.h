/* test_plog_util.h — helpers shared by the plog unit tests (not a test
 * binary): a hand-made batch builder, a fault-vfs fixture, and a model of
 * what was appended. Include after <cmocka.h>. */
#ifndef KEEL_TEST_PLOG_UTIL_H
#define KEEL_TEST_PLOG_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/rng.h"
#include "plog/batch.h"
#include "plog/plog.h"
#include "wal/vfs.h"

#define TEST_PLOG_DIR "/data/t-0"

/* Builds an uncompressed batch of `count` records into out (capacity cap):
 * record i has key "k<i>", a value of value_size bytes of `fill`, one header
 * when i is odd, timestamp base_ts + ts_step * i. Returns the batch size. */
__attribute__((unused)) static size_t build_batch(uint8_t *out, size_t cap, int32_t count,
						  int64_t base_ts, int64_t ts_step,
						  size_t value_size, uint8_t fill)
{
	size_t pos = PLOG_BATCH_HEADER_SIZE;
	int64_t max_ts = base_ts;
	for (int32_t i = 0; i < count; i++) {
		uint8_t body[4096];
		size_t n = 0;
		body[n++] = 0; /* attributes */
		n += plog_varint_write(body + n, ts_step * i);
		n += plog_varint_write(body + n, i);
		char key[16];
		int key_len = snprintf(key, sizeof(key), "k%d", i);
		n += plog_varint_write(body + n, key_len);
		memcpy(body + n, key, (size_t)key_len);
		n += (size_t)key_len;
		assert_true(value_size + 64 < sizeof(body));
		n += plog_varint_write(body + n, (int64_t)value_size);
		memset(body + n, fill, value_size);
		n += value_size;
		if (i % 2 == 1) {
			n += plog_varint_write(body + n, 1);
			n += plog_varint_write(body + n, 1);
			body[n++] = 'h';
			n += plog_varint_write(body + n, 2);
			body[n++] = 'v';
			body[n++] = (uint8_t)i;
		} else {
			n += plog_varint_write(body + n, 0);
		}
		assert_true(pos + n + 10 <= cap);
		pos += plog_varint_write(out + pos, (int64_t)n);
		memcpy(out + pos, body, n);
		pos += n;
		if (base_ts + ts_step * i > max_ts) {
			max_ts = base_ts + ts_step * i;
		}
	}
	keel_store_be64(out, 0);
	keel_store_be32(out + 12, 0);
	out[16] = PLOG_BATCH_MAGIC;
	keel_store_be16(out + 21, 0);
	keel_store_be32(out + 23, (uint32_t)(count - 1));
	keel_store_be64(out + 27, (uint64_t)base_ts);
	keel_store_be64(out + 35, (uint64_t)max_ts);
	keel_store_be64(out + 43, (uint64_t)-1);
	keel_store_be16(out + 51, (uint16_t)-1);
	keel_store_be32(out + 53, (uint32_t)-1);
	keel_store_be32(out + 57, (uint32_t)count);
	plog_batch_seal(out, pos);
	return pos;
}

/* Reads $KEEL_TEST_DATA/plog/<name> (at most 64 KiB; one spare byte after
 * it) into a fresh buffer the caller frees. */
__attribute__((unused)) static uint8_t *plog_test_data(const char *name, size_t *size)
{
	const char *dir = getenv("KEEL_TEST_DATA");
	assert_non_null(dir);
	char path[1024];
	snprintf(path, sizeof(path), "%s/plog/%s", dir, name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	uint8_t *buf = malloc((1 << 16) + 1);
	assert_non_null(buf);
	*size = fread(buf, 1, 1 << 16, f);
	fclose(f);
	return buf;
}

struct plog_fixture {
	struct keel_rng rng;
	struct wal_vfs vfs;
	struct plog_config config;
	struct plog log;
	struct plog_recovery rec;
	bool open;
};

__attribute__((unused)) static void plog_fixture_init(struct plog_fixture *fx, uint64_t seed)
{
	memset(fx, 0, sizeof(*fx));
	keel_rng_seed(&fx->rng, seed);
	struct wal_vfs_fault_config vc = {.rng = &fx->rng};
	assert_int_equal(wal_vfs_fault_init(&fx->vfs, &vc), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(&fx->vfs, "/data"), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(&fx->vfs, "/"), KEEL_OK);
	plog_config_init(&fx->config, &fx->vfs, TEST_PLOG_DIR);
	fx->config.segment_bytes = 2048;
	fx->config.index_interval_bytes = 256;
	fx->config.max_batch_bytes = 8192;
	fx->config.segment_ms = -1;
	fx->config.retention_ms = -1;
}

__attribute__((unused)) static enum keel_err plog_fixture_open(struct plog_fixture *fx)
{
	assert_false(fx->open);
	enum keel_err err = plog_open(&fx->log, &fx->config, &fx->rec);
	fx->open = err == KEEL_OK;
	return err;
}

__attribute__((unused)) static void plog_fixture_close(struct plog_fixture *fx)
{
	if (fx->open) {
		plog_close(&fx->log);
		fx->open = false;
	}
}

__attribute__((unused)) static void plog_fixture_free(struct plog_fixture *fx)
{
	plog_fixture_close(fx);
	wal_vfs_fault_close(&fx->vfs);
}

/* Reads the whole visible log [from, end) by repeated plog_read calls with
 * max_bytes, copying into a fresh buffer (*size bytes; caller frees). */
__attribute__((unused)) static uint8_t *read_all(struct plog *log, int64_t from,
						 uint64_t max_bytes, size_t *size)
{
	size_t cap = 1 << 16;
	size_t used = 0;
	uint8_t *buf = malloc(cap);
	assert_non_null(buf);
	int64_t offset = from;
	while (offset < plog_log_end_offset(log)) {
		struct plog_read_result r;
		assert_int_equal(plog_read(log, offset, plog_log_end_offset(log), max_bytes, &r),
				 KEEL_OK);
		assert_true(r.size > 0);
		assert_true(r.next_offset > offset);
		while (used + r.size > cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		assert_int_equal(plog_read_copy(log, &r, buf + used), KEEL_OK);
		used += (size_t)r.size;
		offset = r.next_offset;
	}
	*size = used;
	return buf;
}

/* What the test appended: every batch as stored (after the rewrite). */
struct model {
	uint8_t *bytes;
	size_t size;
	int64_t batch_base[4096];
	int64_t batch_ts[4096];
	size_t batch_pos[4096];
	size_t batch_count;
};

__attribute__((unused)) static void model_add(struct model *m, const uint8_t *batch, size_t size, int64_t base,
		      int64_t max_ts)
{
	m->bytes = realloc(m->bytes, m->size + size);
	assert_non_null(m->bytes);
	memcpy(m->bytes + m->size, batch, size);
	assert_true(m->batch_count < 4096);
	m->batch_base[m->batch_count] = base;
	m->batch_ts[m->batch_count] = max_ts;
	m->batch_pos[m->batch_count] = m->size;
	m->batch_count++;
	m->size += size;
}

/* Appends n batches of 1..4 records with value sizes varying by i. */
__attribute__((unused)) static void append_batches(struct plog_fixture *fx, struct model *m, int n, int32_t epoch,
			   int64_t ts_base)
{
	for (int i = 0; i < n; i++) {
		uint8_t buf[8192];
		int32_t count = 1 + (int32_t)(m->batch_count % 4);
		size_t size = build_batch(buf, sizeof(buf), count, ts_base + 100 * (int64_t)i, 3,
					  (size_t)(20 + (m->batch_count * 37) % 300),
					  (uint8_t)m->batch_count);
		struct plog_append_info info;
		int64_t end = plog_log_end_offset(&fx->log);
		assert_int_equal(plog_append(&fx->log, buf, size, epoch, &info), KEEL_OK);
		assert_int_equal(info.first_offset, end);
		assert_int_equal(info.last_offset, end + count - 1);
		assert_int_equal(info.batch_count, 1);
		assert_int_equal(plog_log_end_offset(&fx->log), end + count);
		model_add(m, buf, size, end, ts_base + 100 * (int64_t)i + 3 * (count - 1));
	}
}

/* The bytes from the batch holding `offset` to the end of the model. */
__attribute__((unused)) static size_t model_pos_of(const struct model *m, int64_t offset)
{
	for (size_t i = m->batch_count; i-- > 0;) {
		if (m->batch_base[i] <= offset) {
			return m->batch_pos[i];
		}
	}
	return 0;
}

__attribute__((unused)) static void expect_log_equals_model(struct plog_fixture *fx, const struct model *m,
				    uint64_t max_bytes)
{
	int64_t start = plog_log_start_offset(&fx->log);
	size_t from = model_pos_of(m, start);
	size_t size = 0;
	uint8_t *all = read_all(&fx->log, start, max_bytes, &size);
	assert_int_equal(size, m->size - from);
	assert_memory_equal(all, m->bytes + from, size);
	free(all);
}

#endif
