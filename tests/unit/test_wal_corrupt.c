/* Unit tests: recovery refuses damaged or missing synced data and says which
 * file and offset; repairs only what a crash can leave; rides out a bit
 * flipped in transit; and the WAL's sticky failure after an I/O error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_wal_util.h"

static struct model_entry model[512];
static size_t model_count;

/* Builds a log of `count` entries of term 1 in sync batches of `batch`. */
static void build_log(struct wal_fixture *fx, size_t count, size_t batch)
{
	assert_int_equal(fixture_open(fx), KEEL_OK);
	struct wal_hard_state hs = {.term = 1};
	assert_int_equal(wal_save_hard_state(&fx->wal, &hs), KEEL_OK);
	model_count = 0;
	for (size_t i = 0; i < count; i++) {
		model[i] = (struct model_entry){.index = i + 1, .term = 1};
	}
	for (size_t done = 0; done < count; done += batch) {
		size_t n = KEEL_MIN(batch, count - done);
		assert_int_equal(append_model(&fx->wal, model + done, n), KEEL_OK);
		assert_int_equal(wal_sync(&fx->wal), KEEL_OK);
	}
	model_count = count;
	fixture_close(fx);
}

struct found {
	uint64_t index;
	uint64_t best_generation;
	char name[WAL_NAME_MAX];
	uint64_t offset;
	uint64_t cur_generation;
	const char *cur_name;
	bool hit;
};

static enum keel_err find_cb(void *arg, const struct wal_record *rec, uint64_t offset)
{
	struct found *f = arg;
	if (rec->index == f->index && f->cur_generation >= f->best_generation) {
		f->best_generation = f->cur_generation;
		f->offset = offset;
		snprintf(f->name, sizeof(f->name), "%s", f->cur_name);
		f->hit = true;
	}
	return KEEL_OK;
}

static uint8_t *read_file(struct wal_fixture *fx, const char *path, size_t *size)
{
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(&fx->vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_OK);
	uint64_t file_size;
	assert_int_equal(wal_vfs_size(f, &file_size), KEEL_OK);
	uint8_t *data = malloc((size_t)file_size);
	assert_int_equal(wal_vfs_pread_exact(f, data, (size_t)file_size, 0), KEEL_OK);
	wal_vfs_close(f);
	*size = (size_t)file_size;
	return data;
}

struct seg_names {
	char names[64][WAL_NAME_MAX];
	uint64_t generations[64];
	size_t count;
};

static void collect_segment(void *arg, const char *name)
{
	struct seg_names *s = arg;
	uint64_t a;
	uint64_t b;
	if (wal_parse_file_name(name, &a, &b) == WAL_FILE_SEGMENT && s->count < 64) {
		snprintf(s->names[s->count], WAL_NAME_MAX, "%s", name);
		s->generations[s->count++] = a;
	}
}

/* Where the (newest) record for `index` lives: file path and offset. */
static void locate(struct wal_fixture *fx, uint64_t index, char path[WAL_VFS_PATH_MAX],
		   uint64_t *offset)
{
	struct seg_names segs = {0};
	assert_int_equal(wal_vfs_list(&fx->vfs, TEST_DIR, collect_segment, &segs), KEEL_OK);
	struct found f = {.index = index};
	for (size_t i = 0; i < segs.count; i++) {
		char p[WAL_VFS_PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", TEST_DIR, segs.names[i]);
		size_t size;
		uint8_t *data = read_file(fx, p, &size);
		struct wal_segment_header h;
		assert_int_equal(wal_segment_header_decode(data, size, &h, NULL, 0), KEEL_OK);
		f.cur_generation = segs.generations[i];
		f.cur_name = segs.names[i];
		struct wal_scan_result r;
		assert_int_equal(wal_scan_segment(data, size, &h, 0, UINT64_MAX, TEST_MAX_ENTRY,
						  find_cb, &f, &r),
				 KEEL_OK);
		free(data);
	}
	assert_true(f.hit);
	snprintf(path, WAL_VFS_PATH_MAX, "%s/%s", TEST_DIR, f.name);
	*offset = f.offset;
}

static void test_flip_in_sealed_segment_is_refused(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 21);
	build_log(&fx, 100, 5);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 20, path, &offset); /* an early segment */
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, offset + 45, 0x02), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, path));
	char at[64];
	snprintf(at, sizeof(at), "offset %llu", (unsigned long long)offset);
	assert_non_null(strstr(fx.wal.errmsg, at));
	assert_non_null(strstr(fx.wal.errmsg, "Refusing to start"));
	fixture_free(&fx);
}

static void test_flip_before_a_later_batch_is_refused(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 22);
	build_log(&fx, 100, 2);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 97, path, &offset); /* the last segment, batch 97..98; 99..100 follow */
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, offset + 20, 0x10), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, path));
	assert_non_null(strstr(fx.wal.errmsg, "later sync batch"));
	fixture_free(&fx);
}

/* The documented limit: damage in the last sync batch of the tail cannot be
 * told from a torn write, so it is cut like one (and said so). */
static void test_flip_in_last_batch_is_cut_as_torn(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 23);
	build_log(&fx, 100, 4);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 98, path, &offset); /* the last batch is 97..100 */
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, offset + 41, 0x01), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_log(&fx.rec, model, 97);
	assert_non_null(strstr(fx.rec.notes, "torn"));
	assert_non_null(strstr(fx.rec.notes, "seg-"));
	fixture_free(&fx);
}

static uint64_t reads_so_far(struct wal_fixture *fx)
{
	struct wal_vfs_fault_stats stats;
	wal_vfs_fault_get_stats(&fx->vfs, &stats);
	return stats.calls[WAL_VFS_OP_READ];
}

/* One flip per round, at each read recovery makes in turn (aimed at one
 * byte of the file when `aimed`, else anywhere in what that read returns):
 * every round recovers all `entries`. Returns how many rounds flipped a
 * bit; *max_flips is the most flips one round made. */
static uint64_t flip_each_read(uint64_t seed, size_t entries, size_t per_batch, bool aimed,
                               uint64_t at, uint8_t mask, uint64_t *reads_out, uint64_t *max_flips)
{
	struct wal_fixture fx;
	fixture_init(&fx, seed);
	build_log(&fx, entries, per_batch);
	uint64_t before = reads_so_far(&fx);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	uint64_t reads = reads_so_far(&fx) - before;
	fixture_free(&fx);
	uint64_t flipped_rounds = 0;
	*max_flips = 0;
	for (uint64_t nth = 1; nth <= reads; nth++) {
		fixture_init(&fx, seed);
		build_log(&fx, entries, per_batch);
		if (aimed) {
			wal_vfs_fault_flip_nth_read_at(&fx.vfs, nth, at, mask);
		} else {
			wal_vfs_fault_flip_nth_read(&fx.vfs, nth);
		}
		assert_int_equal(fixture_open(&fx), KEEL_OK);
		assert_log(&fx.rec, model, entries);
		struct wal_vfs_fault_stats stats;
		wal_vfs_fault_get_stats(&fx.vfs, &stats);
		if (stats.read_bit_flips > *max_flips) {
			*max_flips = stats.read_bit_flips;
		}
		flipped_rounds += stats.read_bit_flips;
		fixture_free(&fx);
	}
	*reads_out = reads;
	return flipped_rounds;
}

/* A bit flipped on the way from the disk, at each read recovery makes in
 * turn: the second read of the same data is clean, recovery goes on. (The
 * read counter also counts directory listings, so some rounds flip
 * nothing; the loop asserts at least one flip per round that had one.) */
static void test_transient_read_flip_is_ridden_out(void **state)
{
	(void)state;
	uint64_t reads;
	uint64_t max_flips;
	uint64_t flipped_rounds = flip_each_read(24, 60, 3, false, 0, 0, &reads, &max_flips);
	assert_true(reads >= 5);
	assert_true(max_flips <= 1);
	assert_true(flipped_rounds >= reads - 3); /* all but the listings */
}

/* A bit flipped in transit in the generation field of the log's last
 * record makes it look like a stale record of another life: the records
 * seem to end cleanly one entry early. That read must not be believed on
 * its own, or a synced (acknowledged) entry is silently dropped. Each read
 * recovery makes is tried in turn; the one of the tail segment flips. */
static void test_read_flip_in_last_record_generation_is_ridden_out(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 26);
	build_log(&fx, 40, 1);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 40, path, &offset);
	fixture_free(&fx);
	uint64_t reads;
	uint64_t max_flips;
	/* the generation's lowest byte: bytes 8..15 of the header, big-endian */
	uint64_t flipped_rounds =
	        flip_each_read(26, 40, 1, true, offset + 15, 0x01, &reads, &max_flips);
	assert_true(flipped_rounds >= 1);
}

/* A log of single-entry sync batches whose last record (100) is torn: the
 * tail segment holds many earlier, synced batches before it. */
static void build_torn_log(struct wal_fixture *fx, uint64_t seed)
{
	fixture_init(fx, seed);
	build_log(fx, 100, 1);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(fx, 100, path, &offset);
	assert_int_equal(wal_vfs_fault_corrupt(&fx->vfs, path, offset + 41, 0x01), KEEL_OK);
}

/* The same with a torn tail, which recovery reads twice (a damaged tail is
 * re-read before it is believed): a bit flipped on either read, also in a
 * record of an earlier (synced) batch, must not turn the torn tail into
 * "corruption". (Found by keel-sim: a flip on the re-read made recovery
 * refuse to start.) Each round flips one random bit at one read. */
static void test_transient_read_flip_with_torn_tail_is_ridden_out(void **state)
{
	(void)state;
	struct wal_fixture fx;
	build_torn_log(&fx, 25);
	uint64_t before = reads_so_far(&fx);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_log(&fx.rec, model, 99);
	uint64_t reads = reads_so_far(&fx) - before;
	fixture_free(&fx);
	assert_true(reads >= 5);
	uint64_t flips = 0;
	for (uint64_t seed = 1; seed <= 40; seed++) {
		for (uint64_t nth = 1; nth <= reads + 1; nth++) {
			build_torn_log(&fx, seed);
			wal_vfs_fault_flip_nth_read(&fx.vfs, nth);
			enum keel_err err = fixture_open(&fx);
			if (err != KEEL_OK) {
				fprintf(stderr, "seed %llu, flip at read %llu: %s\n",
					(unsigned long long)seed, (unsigned long long)nth,
					fx.wal.errmsg);
			}
			assert_int_equal(err, KEEL_OK);
			assert_log(&fx.rec, model, 99);
			struct wal_vfs_fault_stats stats;
			wal_vfs_fault_get_stats(&fx.vfs, &stats);
			flips += stats.read_bit_flips;
			fixture_free(&fx);
		}
	}
	assert_true(flips >= 40 * (reads - 3));
}

static void test_missing_segment_is_refused(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 25);
	build_log(&fx, 100, 5);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 50, path, &offset);
	assert_int_equal(wal_vfs_unlink(&fx.vfs, path), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, "missing"));
	/* The first segment gone: the log starts after a hole. */
	fixture_free(&fx);
	fixture_init(&fx, 25);
	build_log(&fx, 100, 5);
	locate(&fx, 1, path, &offset);
	assert_int_equal(wal_vfs_unlink(&fx.vfs, path), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, "starts at index"));
	fixture_free(&fx);
}

static void test_damaged_header_and_hard_state_are_refused(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 26);
	build_log(&fx, 40, 5);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 1, path, &offset);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 20, 0x01), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, path));
	assert_non_null(strstr(fx.wal.errmsg, "offset 0"));
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 20, 0x01), KEEL_OK); /* repair */
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, TEST_DIR "/hardstate", 17, 0x01), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, "hardstate"));
	fixture_free(&fx);
}

/* A segment whose header says it follows another term than the entry
 * before it: the log does not match itself. */
static void test_prev_term_mismatch_is_refused(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 30);
	build_log(&fx, 100, 5);
	char path[WAL_VFS_PATH_MAX];
	uint64_t offset;
	locate(&fx, 100, path, &offset); /* the last segment, which follows another */
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(&fx.vfs, path, 0, &f), KEEL_OK);
	uint8_t buf[WAL_SEGMENT_HEADER_SIZE];
	assert_int_equal(wal_vfs_pread_exact(f, buf, sizeof(buf), 0), KEEL_OK);
	struct wal_segment_header h;
	assert_int_equal(wal_segment_header_decode(buf, sizeof(buf), &h, NULL, 0), KEEL_OK);
	assert_true(h.first_index > 1);
	assert_int_equal(h.prev_term, 1);
	h.prev_term = 0; /* valid checksum, wrong history */
	wal_segment_header_encode(buf, &h);
	assert_int_equal(wal_vfs_pwrite(f, buf, sizeof(buf), 0), KEEL_OK);
	assert_int_equal(wal_vfs_datasync(f), KEEL_OK);
	wal_vfs_close(f);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, "does not match"));
	assert_non_null(strstr(fx.wal.errmsg, "seg-"));
	fixture_free(&fx);
}

static void save_snapshot(struct wal_fixture *fx, uint64_t index)
{
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_save(&fx->config, index, 1, NULL, 0, "payload", 7, errmsg),
			 KEEL_OK);
}

static void test_damaged_snapshot_falls_back_or_refuses(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 27);
	build_log(&fx, 100, 5);
	assert_int_equal(wal_vfs_mkdir(&fx.vfs, TEST_DIR), KEEL_EXIST);
	save_snapshot(&fx, 30);
	save_snapshot(&fx, 60);
	char name[WAL_NAME_MAX];
	char path[WAL_VFS_PATH_MAX];
	wal_snapshot_name(name, 60, 1, false);
	snprintf(path, sizeof(path), "%s/%s", TEST_DIR, name);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 50, 0x01), KEEL_OK);
	/* The log still holds everything after snapshot 30: use that one. */
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.snapshot.index, 30);
	assert_log(&fx.rec, model + 30, 70);
	assert_non_null(strstr(fx.rec.notes, "damaged"));
	/* Compacted past the surviving snapshot, the log cannot cover the gap. */
	save_snapshot(&fx, 90);
	assert_int_equal(wal_compact(&fx.wal, 90), KEEL_OK);
	fixture_close(&fx);
	wal_snapshot_name(name, 90, 1, false);
	snprintf(path, sizeof(path), "%s/%s", TEST_DIR, name);
	assert_int_equal(wal_vfs_fault_corrupt(&fx.vfs, path, 3, 0x01), KEEL_OK);
	assert_int_equal(fixture_open(&fx), KEEL_CORRUPT);
	assert_non_null(strstr(fx.wal.errmsg, "missing"));
	fixture_free(&fx);
}

static void test_sticky_failure_after_failed_sync(void **state)
{
	(void)state;
	struct wal_fixture fx;
	fixture_init(&fx, 28);
	build_log(&fx, 20, 5);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	struct model_entry more[5];
	for (size_t i = 0; i < 5; i++) {
		more[i] = (struct model_entry){.index = 21 + i, .term = 1};
	}
	assert_int_equal(append_model(&fx.wal, more, 3), KEEL_OK);
	wal_vfs_fault_fail_nth(&fx.vfs, WAL_VFS_OP_SYNC, 1, KEEL_IO);
	assert_int_equal(wal_sync(&fx.wal), KEEL_IO);
	assert_true(wal_failed(&fx.wal));
	assert_non_null(strstr(fx.wal.errmsg, "fdatasync"));
	assert_int_equal(wal_durable_index(&fx.wal), 20);
	/* Nothing is ever accepted again, even though the disk works now. */
	assert_int_equal(append_model(&fx.wal, more + 3, 2), KEEL_FAILED);
	assert_int_equal(wal_sync(&fx.wal), KEEL_FAILED);
	assert_int_equal(wal_truncate_suffix(&fx.wal, 21), KEEL_FAILED);
	struct wal_hard_state hs = {.term = 2};
	assert_int_equal(wal_save_hard_state(&fx.wal, &hs), KEEL_FAILED);
	assert_int_equal(wal_compact(&fx.wal, 1), KEEL_FAILED);
	assert_non_null(strstr(fx.wal.errmsg, "fdatasync")); /* the original cause stays */
	assert_int_equal(wal_durable_index(&fx.wal), 20);
	/* A restart recovers the synced entries (the unsynced may or may not). */
	fixture_crash(&fx, WAL_VFS_CRASH_TORN, true);
	assert_int_equal(fixture_open(&fx), KEEL_OK);
	assert_true(fx.rec.entry_count >= 20);
	assert_log(&fx.rec, model, 20);
	fixture_free(&fx);
}

static void test_sticky_failure_on_write_and_install(void **state)
{
	(void)state;
	enum wal_vfs_op ops[] = {WAL_VFS_OP_WRITE, WAL_VFS_OP_RENAME, WAL_VFS_OP_SYNC_DIR,
				 WAL_VFS_OP_OPEN};
	for (size_t k = 0; k < KEEL_ARRAY_SIZE(ops); k++) {
		struct wal_fixture fx;
		fixture_init(&fx, 29);
		build_log(&fx, 10, 5);
		assert_int_equal(fixture_open(&fx), KEEL_OK);
		wal_vfs_fault_fail_nth(&fx.vfs, ops[k], 1, KEEL_NOSPACE);
		/* Enough to fill the write buffer and roll segments. */
		enum keel_err err = KEEL_OK;
		for (uint64_t i = 11; i < 200 && err == KEEL_OK; i++) {
			struct model_entry e = {.index = i, .term = 1};
			err = append_model(&fx.wal, &e, 1);
			if (err == KEEL_OK && i % 7 == 0) {
				err = wal_sync(&fx.wal);
			}
		}
		assert_int_equal(err, KEEL_NOSPACE);
		assert_true(wal_failed(&fx.wal));
		struct model_entry e = {.index = wal_last_index(&fx.wal) + 1, .term = 1};
		assert_int_equal(append_model(&fx.wal, &e, 1), KEEL_FAILED);
		uint64_t durable = wal_durable_index(&fx.wal);
		fixture_crash(&fx, WAL_VFS_CRASH_SCRAMBLE, true);
		assert_int_equal(fixture_open(&fx), KEEL_OK);
		assert_true(fx.rec.entry_count >= durable);
		fixture_free(&fx);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flip_in_sealed_segment_is_refused),
		cmocka_unit_test(test_flip_before_a_later_batch_is_refused),
		cmocka_unit_test(test_flip_in_last_batch_is_cut_as_torn),
		cmocka_unit_test(test_transient_read_flip_is_ridden_out),
		cmocka_unit_test(test_transient_read_flip_with_torn_tail_is_ridden_out),
		cmocka_unit_test(test_read_flip_in_last_record_generation_is_ridden_out),
		cmocka_unit_test(test_missing_segment_is_refused),
		cmocka_unit_test(test_damaged_header_and_hard_state_are_refused),
		cmocka_unit_test(test_prev_term_mismatch_is_refused),
		cmocka_unit_test(test_damaged_snapshot_falls_back_or_refuses),
		cmocka_unit_test(test_sticky_failure_after_failed_sync),
		cmocka_unit_test(test_sticky_failure_on_write_and_install),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
