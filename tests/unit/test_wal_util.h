/* test_wal_util.h — helpers shared by the WAL unit tests (not a test binary):
 * a fault-vfs fixture, deterministic entry payloads, and checks of what
 * recovery returned. Include after <cmocka.h>. */
#ifndef KEEL_TEST_WAL_UTIL_H
#define KEEL_TEST_WAL_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/rng.h"
#include "wal/vfs.h"
#include "wal/wal.h"

#define TEST_DIR "/wal"
#define TEST_SEGMENT_SIZE 4096
#define TEST_MAX_ENTRY 1024
#define TEST_MAX_PAYLOAD 300

struct wal_fixture {
	struct keel_rng rng;
	struct wal_vfs vfs;
	struct wal_config config;
	struct wal wal;
	struct wal_recovered rec;
	bool open;
};

__attribute__((unused)) static void fixture_init(struct wal_fixture *fx, uint64_t seed)
{
	memset(fx, 0, sizeof(*fx));
	keel_rng_seed(&fx->rng, seed);
	struct wal_vfs_fault_config vc = {.rng = &fx->rng};
	assert_int_equal(wal_vfs_fault_init(&fx->vfs, &vc), KEEL_OK);
	wal_config_init(&fx->config, &fx->vfs, TEST_DIR);
	fx->config.segment_size_bytes = TEST_SEGMENT_SIZE;
	fx->config.max_entry_size_bytes = TEST_MAX_ENTRY;
	fx->config.write_buffer_bytes = 4096;
	fx->config.spare_segments = 2;
}

/* Opens the WAL; returns the error (the recovered result is in fx->rec). */
__attribute__((unused)) static enum keel_err fixture_open(struct wal_fixture *fx)
{
	assert_false(fx->open);
	enum keel_err err = wal_open(&fx->wal, &fx->config, &fx->rec);
	fx->open = err == KEEL_OK;
	return err;
}

__attribute__((unused)) static void fixture_close(struct wal_fixture *fx)
{
	if (fx->open) {
		wal_close(&fx->wal);
		wal_recovered_free(&fx->rec);
		fx->open = false;
	}
}

__attribute__((unused)) static void fixture_free(struct wal_fixture *fx)
{
	fixture_close(fx);
	wal_vfs_fault_close(&fx->vfs);
}

/* Power loss and reboot: the WAL (if open) is dropped first. */
__attribute__((unused)) static void fixture_crash(struct wal_fixture *fx,
						  enum wal_vfs_crash_mode mode, bool lose_dir_ops)
{
	fixture_close(fx);
	struct wal_vfs_crash crash = {.mode = mode, .lose_dir_ops = lose_dir_ops};
	wal_vfs_fault_crash(&fx->vfs, &crash);
}

/* Payload of entry (index, term, generation of writing `salt`): its size
 * and bytes depend on all three, so a stale or wrong entry never matches. */
__attribute__((unused)) static uint32_t payload_size(uint64_t index, uint64_t salt)
{
	return (uint32_t)((index * 37 + salt * 11) % TEST_MAX_PAYLOAD);
}

__attribute__((unused)) static void payload_fill(uint8_t *buf, uint64_t index, uint64_t term,
						 uint64_t salt)
{
	uint32_t n = payload_size(index, salt);
	for (uint32_t i = 0; i < n; i++) {
		buf[i] = (uint8_t)(index * 131 + term * 17 + salt * 7 + i);
	}
}

/* One expected entry of the model log. */
struct model_entry {
	uint64_t index;
	uint64_t term;
	uint64_t salt;
};

__attribute__((unused)) static enum keel_err append_model(struct wal *wal,
							  const struct model_entry *m,
							  size_t count)
{
	struct wal_entry entries[64];
	uint8_t payloads[64][TEST_MAX_PAYLOAD];
	assert_true(count <= 64);
	for (size_t i = 0; i < count; i++) {
		payload_fill(payloads[i], m[i].index, m[i].term, m[i].salt);
		entries[i] = (struct wal_entry){.index = m[i].index, .term = m[i].term,
						.type = (uint8_t)(m[i].index % 3),
						.size = payload_size(m[i].index, m[i].salt),
						.data = payloads[i]};
	}
	return wal_append(wal, entries, count);
}

/* True when a recovered entry is exactly the model entry. */
__attribute__((unused)) static bool entry_matches(const struct wal_entry *e,
						  const struct model_entry *m)
{
	if (e->index != m->index || e->term != m->term || e->type != (uint8_t)(m->index % 3) ||
	    e->size != payload_size(m->index, m->salt)) {
		return false;
	}
	uint8_t expect[TEST_MAX_PAYLOAD];
	payload_fill(expect, m->index, m->term, m->salt);
	return e->size == 0 || memcmp(e->data, expect, e->size) == 0;
}

/* Asserts the recovered log is exactly model[0..count). */
__attribute__((unused)) static void assert_log(const struct wal_recovered *rec,
					       const struct model_entry *model, size_t count)
{
	if (rec->entry_count != count) {
		fprintf(stderr, "recovered %zu entries, expected %zu\n", rec->entry_count, count);
	}
	assert_int_equal(rec->entry_count, count);
	for (size_t i = 0; i < count; i++) {
		if (!entry_matches(&rec->entries[i], &model[i])) {
			fprintf(stderr, "entry %zu: got index %llu term %llu size %u\n", i,
				(unsigned long long)rec->entries[i].index,
				(unsigned long long)rec->entries[i].term, rec->entries[i].size);
		}
		assert_true(entry_matches(&rec->entries[i], &model[i]));
	}
}

#endif
