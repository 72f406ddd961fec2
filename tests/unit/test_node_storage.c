/* Unit tests: the server's storage adapter (node/storage.c) over the WAL
 * writer, on a real directory under /tmp — bootstrap, readies reported
 * durable in persist order on the loop thread, a conflicting suffix
 * replaced, a snapshot received in chunks and installed (with the entries
 * of the same ready after it), compaction queued between readies, the
 * fsync histogram, recovery of all of it, and a damaged received snapshot
 * failing storage for good. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/assert.h"
#include "node/storage.h"
#include "os/log.h"
#include "wal/snapshot.h"
#include "wal/vfs.h"

#define MAX_REPORTS 64

struct reports {
	uint64_t ids[MAX_REPORTS];
	enum keel_err errs[MAX_REPORTS];
	size_t count;
};

static void on_durable(void *ctx, uint64_t persist_id, enum keel_err err)
{
	struct reports *r = ctx;
	assert_true(r->count < MAX_REPORTS);
	r->ids[r->count] = persist_id;
	r->errs[r->count] = err;
	r->count++;
}

struct fixture {
	char root[64];
	char dir[128];
	uv_loop_t loop;
	struct reports reports;
	struct metrics_hist fsync;
	struct node_storage *s;
	struct node_recovered rec;
};

static void open_storage(struct fixture *fx)
{
	struct node_storage_options opts = {
		.data_dir = fx->dir,
		.segment_bytes = 64 * 1024,
		.max_entry_bytes = 4096,
		.loop = &fx->loop,
		.on_durable = on_durable,
		.ctx = &fx->reports,
		.fsync_hist = &fx->fsync,
	};
	char err[256];
	enum keel_err rc = node_storage_open(&fx->s, &opts, &fx->rec, err, sizeof(err));
	if (rc != KEEL_OK) {
		fprintf(stderr, "open: %s\n", err);
	}
	assert_int_equal(rc, KEEL_OK);
}

static void close_storage(struct fixture *fx)
{
	node_storage_release_recovered(fx->s, &fx->rec);
	node_storage_close(fx->s);
	fx->s = NULL;
	uv_run(&fx->loop, UV_RUN_DEFAULT); /* the async handle's close frees it */
}

static void fixture_setup(struct fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->root, sizeof(fx->root), "/tmp/keel-storage-test-XXXXXX");
	assert_non_null(mkdtemp(fx->root));
	snprintf(fx->dir, sizeof(fx->dir), "%s/data", fx->root);
	assert_int_equal(uv_loop_init(&fx->loop), 0);
}

static void remove_file(void *arg, const char *name)
{
	char path[WAL_VFS_PATH_MAX];
	assert_int_equal(wal_vfs_join(path, sizeof(path), arg, name), KEEL_OK);
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	(void)wal_vfs_unlink(&vfs, path);
}

static void remove_dir(const char *dir)
{
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	(void)wal_vfs_list(&vfs, dir, remove_file, (void *)dir);
	(void)rmdir(dir);
}

static void fixture_teardown(struct fixture *fx)
{
	assert_int_equal(uv_loop_close(&fx->loop), 0);
	remove_dir(fx->dir);
	char other[160];
	snprintf(other, sizeof(other), "%s/source", fx->root);
	remove_dir(other);
	(void)rmdir(fx->root);
}

/* Runs the loop until `count` batches were reported. */
static void wait_reports(struct fixture *fx, size_t count)
{
	while (fx->reports.count < count) {
		uv_run(&fx->loop, UV_RUN_ONCE);
	}
	assert_int_equal(fx->reports.count, count);
}

/* Entry payloads: 8 bytes naming (index, term). */
static uint8_t payloads[512][8];

static struct raft_entry make_entry(uint64_t index, uint64_t term)
{
	uint8_t *p = payloads[index % 512];
	for (int i = 0; i < 4; i++) {
		p[i] = (uint8_t)(index >> (8 * i));
		p[4 + i] = (uint8_t)(term >> (8 * i));
	}
	return (struct raft_entry){.term = term, .index = index, .type = RAFT_ENTRY_NORMAL,
				   .size = 8, .data = p};
}

static bool entry_is(const struct raft_entry *e, uint64_t index, uint64_t term)
{
	struct raft_entry want = make_entry(index, term);
	return e->index == index && e->term == term && e->size == 8 &&
	       memcmp(e->data, want.data, 8) == 0;
}

/* Submits entries [first, first+count) of `term` as ready `id`. */
static enum keel_err submit_entries(struct fixture *fx, uint64_t id, uint64_t first,
				    size_t count, uint64_t term, const struct raft_hard_state *hs)
{
	struct raft_entry entries[64];
	assert_true(count <= 64);
	for (size_t i = 0; i < count; i++) {
		entries[i] = make_entry(first + i, term);
	}
	struct raft_ready rd = {.persist_id = id, .entries = entries, .n_entries = count};
	if (hs != NULL) {
		rd.hard_state_changed = true;
		rd.hard_state = *hs;
	}
	return node_storage_submit(fx->s, &rd);
}

/* The bytes of a snapshot file at (index, term), made by the WAL's own
 * snapshot writer in another directory (what a leader would send). */
static uint8_t *snapshot_file(struct fixture *fx, uint64_t index, uint64_t term, size_t *size)
{
	char dir[160];
	snprintf(dir, sizeof(dir), "%s/source", fx->root);
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	(void)wal_vfs_mkdir(&vfs, dir);
	struct wal_config config;
	wal_config_init(&config, &vfs, dir);
	static const char payload[] = "the state machine at the snapshot";
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_save(&config, index, term, NULL, 0, payload,
					   sizeof(payload), errmsg),
			 KEEL_OK);
	char name[WAL_NAME_MAX], path[WAL_VFS_PATH_MAX];
	wal_snapshot_name(name, index, term, false);
	assert_int_equal(wal_vfs_join(path, sizeof(path), dir, name), KEEL_OK);
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(&vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_OK);
	uint64_t file_size = 0;
	assert_int_equal(wal_vfs_size(f, &file_size), KEEL_OK);
	uint8_t *bytes = malloc((size_t)file_size);
	assert_non_null(bytes);
	assert_int_equal(wal_vfs_pread_exact(f, bytes, (size_t)file_size, 0), KEEL_OK);
	wal_vfs_close(f);
	*size = (size_t)file_size;
	return bytes;
}

/* Sends a snapshot file in two chunks: the first alone as ready `id`, the
 * second with the install and the entries after it as ready `id`+1. */
static void submit_snapshot(struct fixture *fx, uint64_t id, const uint8_t *bytes, size_t size,
			    uint64_t index, uint64_t term, const struct raft_hard_state *hs,
			    size_t entries_after, bool wait_first)
{
	struct raft_snapshot_meta meta = {.index = index, .term = term, .size_bytes = size};
	size_t half = size / 2;
	struct raft_snapshot_chunk first = {.meta = meta, .offset = 0, .size = (uint32_t)half,
					    .data = bytes};
	struct raft_ready rd1 = {.persist_id = id, .chunks = &first, .n_chunks = 1};
	assert_int_equal(node_storage_submit(fx->s, &rd1), KEEL_OK);
	if (wait_first) {
		wait_reports(fx, fx->reports.count + 1);
	}
	struct raft_snapshot_chunk second = {.meta = meta, .offset = half,
					     .size = (uint32_t)(size - half), .last = true,
					     .data = bytes + half};
	struct raft_snapshot_install install = {.meta = meta, .discard_log = true};
	struct raft_entry entries[16];
	assert_true(entries_after <= 16);
	for (size_t i = 0; i < entries_after; i++) {
		entries[i] = make_entry(index + 1 + i, term);
	}
	struct raft_ready rd2 = {.persist_id = id + 1, .chunks = &second, .n_chunks = 1,
				 .install = &install, .entries = entries,
				 .n_entries = entries_after};
	if (hs != NULL) {
		rd2.hard_state_changed = true;
		rd2.hard_state = *hs;
	}
	assert_int_equal(node_storage_submit(fx->s, &rd2), KEEL_OK);
}

static void test_readies_install_compaction_and_recovery(void **state)
{
	(void)state;
	keel_log_set_level(KEEL_LOG_ERROR);
	struct fixture fx;
	fixture_setup(&fx);
	open_storage(&fx);
	assert_true(fx.rec.empty);
	struct raft_entry boot = make_entry(1, 1);
	struct raft_hard_state hs1 = {.term = 1};
	char err[256];
	assert_int_equal(node_storage_bootstrap(fx.s, &boot, &hs1, err, sizeof(err)), KEEL_OK);
	assert_int_equal(fx.reports.count, 0); /* bootstrap is not a ready */

	/* Readies, one of them replacing a conflicting suffix. */
	struct raft_hard_state hs2 = {.term = 2, .vote = 1};
	struct raft_hard_state hs3 = {.term = 3, .vote = 2};
	assert_int_equal(submit_entries(&fx, 1, 2, 10, 2, &hs2), KEEL_OK);
	assert_int_equal(submit_entries(&fx, 2, 12, 10, 2, NULL), KEEL_OK);
	assert_int_equal(submit_entries(&fx, 3, 15, 4, 3, &hs3), KEEL_OK);
	wait_reports(&fx, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(fx.reports.ids[i], i + 1);
		assert_int_equal(fx.reports.errs[i], KEEL_OK);
	}
	assert_true(fx.fsync.total >= 1);
	assert_true(fx.fsync.total <= 3); /* once per write+sync round */
	assert_false(node_storage_failed(fx.s));

	/* A snapshot at 100 received in two chunks and installed; the same
	 * ready carries the entries after it (the log continues at 101). */
	size_t size = 0;
	uint8_t *bytes = snapshot_file(&fx, 100, 3, &size);
	submit_snapshot(&fx, 4, bytes, size, 100, 3, NULL, 5, false);
	wait_reports(&fx, 5);
	assert_int_equal(fx.reports.ids[3], 4);
	assert_int_equal(fx.reports.ids[4], 5);
	assert_int_equal(fx.reports.errs[4], KEEL_OK);
	char path[2048], want[2048];
	node_storage_snapshot_path(fx.s, path, sizeof(path));
	node_storage_snapshot_path_for(fx.s, 100, 3, want, sizeof(want));
	assert_string_equal(path, want);
	uint64_t stored = 0;
	assert_int_equal(node_storage_snapshot_size(fx.s, 100, 3, &stored), KEEL_OK);
	assert_int_equal(stored, size);
	uint8_t back[64];
	size_t got = 0;
	assert_int_equal(node_storage_snapshot_read(fx.s, 100, 3, 0, back, sizeof(back), &got),
			 KEEL_OK);
	assert_int_equal(got, KEEL_MIN(sizeof(back), size));
	assert_memory_equal(back, bytes, got);
	free(bytes);

	/* Compaction queued between readies; the next ready still comes back. */
	node_storage_compact(fx.s, 100);
	assert_int_equal(submit_entries(&fx, 6, 106, 5, 3, NULL), KEEL_OK);
	wait_reports(&fx, 6);
	assert_int_equal(fx.reports.ids[5], 6);
	assert_int_equal(fx.reports.errs[5], KEEL_OK);
	assert_false(node_storage_failed(fx.s));
	close_storage(&fx);

	/* Everything is there after a restart. */
	open_storage(&fx);
	assert_false(fx.rec.empty);
	assert_int_equal(fx.rec.hard_state.term, 3);
	assert_int_equal(fx.rec.hard_state.vote, 2);
	assert_true(fx.rec.has_snapshot);
	assert_int_equal(fx.rec.snapshot.index, 100);
	assert_int_equal(fx.rec.snapshot.term, 3);
	assert_int_equal(fx.rec.snapshot.size_bytes, size);
	assert_int_equal(fx.rec.n_entries, 10);
	for (size_t i = 0; i < 10; i++) {
		assert_true(entry_is(&fx.rec.entries[i], 101 + i, 3));
	}
	close_storage(&fx);
	fixture_teardown(&fx);
}

static void test_recovered_log_after_conflict(void **state)
{
	(void)state;
	keel_log_set_level(KEEL_LOG_ERROR);
	struct fixture fx;
	fixture_setup(&fx);
	open_storage(&fx);
	struct raft_hard_state hs2 = {.term = 2};
	struct raft_hard_state hs3 = {.term = 3};
	assert_int_equal(submit_entries(&fx, 1, 1, 20, 2, &hs2), KEEL_OK);
	assert_int_equal(submit_entries(&fx, 2, 11, 3, 3, &hs3), KEEL_OK);
	wait_reports(&fx, 2);
	close_storage(&fx);
	open_storage(&fx);
	assert_int_equal(fx.rec.n_entries, 13);
	for (size_t i = 0; i < 10; i++) {
		assert_true(entry_is(&fx.rec.entries[i], 1 + i, 2));
	}
	for (size_t i = 10; i < 13; i++) {
		assert_true(entry_is(&fx.rec.entries[i], 1 + i, 3));
	}
	close_storage(&fx);
	fixture_teardown(&fx);
}

static void test_damaged_snapshot_fails_storage_for_good(void **state)
{
	(void)state;
	keel_log_set_level(KEEL_LOG_OFF);
	struct fixture fx;
	fixture_setup(&fx);
	open_storage(&fx);
	struct raft_hard_state hs2 = {.term = 2};
	assert_int_equal(submit_entries(&fx, 1, 1, 5, 2, &hs2), KEEL_OK);
	wait_reports(&fx, 1);
	size_t size = 0;
	uint8_t *bytes = snapshot_file(&fx, 50, 2, &size);
	bytes[size - 1] ^= 0x40; /* the payload's last byte */
	submit_snapshot(&fx, 2, bytes, size, 50, 2, NULL, 2, true);
	free(bytes);
	wait_reports(&fx, 3);
	assert_int_equal(fx.reports.errs[0], KEEL_OK);
	assert_int_equal(fx.reports.errs[1], KEEL_OK); /* the first chunk */
	assert_int_equal(fx.reports.errs[2], KEEL_CORRUPT);
	assert_true(node_storage_failed(fx.s));
	assert_int_equal(submit_entries(&fx, 4, 6, 1, 2, NULL), KEEL_FAILED);
	close_storage(&fx);
	/* The damaged file was removed; the log before it is intact. */
	open_storage(&fx);
	assert_false(fx.rec.has_snapshot);
	assert_int_equal(fx.rec.n_entries, 5);
	close_storage(&fx);
	fixture_teardown(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readies_install_compaction_and_recovery),
		cmocka_unit_test(test_recovered_log_after_conflict),
		cmocka_unit_test(test_damaged_snapshot_fails_storage_for_good),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
