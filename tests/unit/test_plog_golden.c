/*
 * Unit test: a partition directory written by plog format version 1 is
 * checked into tests/unit/data/plog/golden, so the on-disk format cannot
 * change by accident: the script below must produce exactly those bytes,
 * and the committed files must open and read back to what was appended.
 *
 * Regenerate on purpose (and review the diff) with:
 *   KEEL_PLOG_REGENERATE=1 build/tests/test_plog_golden
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_plog_util.h"

static const char *const files[] = {
	"00000000000000000000.log",       "00000000000000000000.index",
	"00000000000000000000.timeindex", "00000000000000000009.log",
	PLOG_EPOCH_FILE,                  PLOG_METADATA_FILE,
};
#define FILE_COUNT (sizeof(files) / sizeof(files[0]))

/* The script: two epochs, a roll at offset 9, a topic id. */
static void write_log(struct plog_fixture *fx, struct model *m)
{
	fx->config.segment_bytes = 2000;
	fx->config.index_interval_bytes = 300;
	assert_int_equal(plog_fixture_open(fx), KEEL_OK);
	for (int i = 0; i < 8; i++) {
		uint8_t buf[2048];
		size_t size = build_batch(buf, sizeof(buf), 1 + i % 3, 1700000000000 + 1000 * i, 7,
					  (size_t)(40 + 30 * i), (uint8_t)('a' + i));
		struct plog_append_info info;
		int64_t end = plog_log_end_offset(&fx->log);
		assert_int_equal(plog_append(&fx->log, buf, size, i < 5 ? 3 : 4, &info), KEEL_OK);
		model_add(m, buf, size, end, info.max_timestamp);
	}
	uint8_t id[PLOG_TOPIC_ID_SIZE];
	for (int i = 0; i < PLOG_TOPIC_ID_SIZE; i++) {
		id[i] = (uint8_t)(0x10 + i);
	}
	assert_int_equal(plog_set_topic_id(&fx->log, id), KEEL_OK);
	assert_int_equal(plog_sync(&fx->log, NULL), KEEL_OK);
	assert_int_equal(fx->log.segment_count, 2);
	struct plog_segment_info second;
	plog_segment_info(&fx->log, 1, &second);
	assert_int_equal(second.base_offset, 9); /* the file names below */
}

static uint8_t *vfs_read(struct wal_vfs *vfs, const char *name, size_t *size)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", TEST_PLOG_DIR, name);
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_OK);
	uint64_t n = 0;
	assert_int_equal(wal_vfs_size(f, &n), KEEL_OK);
	uint8_t *data = malloc(n + 1);
	assert_non_null(data);
	assert_int_equal(wal_vfs_pread_exact(f, data, (size_t)n, 0), KEEL_OK);
	wal_vfs_close(f);
	*size = (size_t)n;
	return data;
}

static void golden_path(char *out, size_t cap, const char *name)
{
	const char *dir = getenv("KEEL_TEST_DATA");
	assert_non_null(dir);
	snprintf(out, cap, "%s/plog/golden/%s", dir, name);
}

static uint8_t *disk_read(const char *name, size_t *size)
{
	char rel[256];
	snprintf(rel, sizeof(rel), "golden/%s", name);
	return plog_test_data(rel, size);
}

static void test_script_writes_the_golden_bytes(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	plog_fixture_init(&fx, 1);
	write_log(&fx, &m);
	bool regenerate = getenv("KEEL_PLOG_REGENERATE") != NULL;
	for (size_t i = 0; i < FILE_COUNT; i++) {
		size_t size;
		uint8_t *data = vfs_read(&fx.vfs, files[i], &size);
		if (regenerate) {
			char path[1024];
			golden_path(path, sizeof(path), files[i]);
			FILE *f = fopen(path, "wb");
			assert_non_null(f);
			assert_int_equal(fwrite(data, 1, size, f), size);
			fclose(f);
		}
		size_t want_size;
		uint8_t *want = disk_read(files[i], &want_size);
		if (want_size != size || memcmp(want, data, size) != 0) {
			fprintf(stderr, "%s differs from the golden file\n", files[i]);
		}
		assert_int_equal(size, want_size);
		assert_memory_equal(data, want, size);
		free(want);
		free(data);
	}
	plog_fixture_free(&fx);
	free(m.bytes);
}

static void test_golden_files_open_and_read(void **state)
{
	(void)state;
	struct plog_fixture fx;
	struct model m = {0};
	/* The model, from the same script on a scratch vfs. */
	plog_fixture_init(&fx, 2);
	write_log(&fx, &m);
	plog_fixture_free(&fx);

	plog_fixture_init(&fx, 3);
	assert_int_equal(wal_vfs_mkdir(&fx.vfs, TEST_PLOG_DIR), KEEL_OK);
	for (size_t i = 0; i < FILE_COUNT; i++) {
		size_t size;
		uint8_t *data = disk_read(files[i], &size);
		char path[256];
		snprintf(path, sizeof(path), "%s/%s", TEST_PLOG_DIR, files[i]);
		struct wal_vfs_file *f;
		assert_int_equal(wal_vfs_open(&fx.vfs, path, WAL_VFS_CREATE, &f), KEEL_OK);
		assert_int_equal(wal_vfs_pwrite(f, data, size, 0), KEEL_OK);
		wal_vfs_close(f);
		free(data);
	}
	fx.config.segment_bytes = 2000;
	fx.config.index_interval_bytes = 300;
	assert_int_equal(plog_fixture_open(&fx), KEEL_OK);
	assert_int_equal(fx.rec.rebuilt_indexes, 0);
	assert_int_equal(fx.rec.truncated_bytes, 0);
	assert_int_equal(plog_check(&fx.log), KEEL_OK);
	expect_log_equals_model(&fx, &m, 500);
	int32_t epoch;
	int64_t end;
	plog_end_offset_for_epoch(&fx.log, 3, &epoch, &end);
	assert_int_equal(epoch, 3);
	assert_int_equal(end, m.batch_base[5]);
	assert_true(fx.log.has_topic_id);
	assert_int_equal(fx.log.topic_id[0], 0x10);
	plog_fixture_free(&fx);
	free(m.bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_script_writes_the_golden_bytes),
		cmocka_unit_test(test_golden_files_open_and_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
