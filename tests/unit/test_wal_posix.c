/* Unit tests: the WAL on the real file system (POSIX vfs) in a temporary
 * directory under /tmp, removed afterwards — each preallocation mode, the
 * writer thread, truncation, snapshots, compaction and reopening. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/assert.h"
#include "wal/writer.h"
#include "test_wal_util.h"

static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
			continue;
		}
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		assert_int_equal(unlink(path), 0);
	}
	closedir(d);
	assert_int_equal(rmdir(dir), 0);
}

static size_t file_count(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	}
	closedir(d);
	return n;
}

static struct model_entry model[600];

struct done_count {
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	size_t count;
	size_t failures;
	uint64_t last_durable;
};

static void count_done(void *arg, const struct wal_completion *c)
{
	struct done_count *d = arg;
	pthread_mutex_lock(&d->mutex);
	d->count++;
	d->failures += c->result != KEEL_OK;
	d->last_durable = c->durable_index;
	pthread_mutex_unlock(&d->mutex);
}

static void append_range(struct wal *wal, uint64_t first, size_t count, uint64_t term,
			 uint64_t salt)
{
	for (size_t i = 0; i < count; i += 20) {
		size_t n = KEEL_MIN(count - i, 20);
		for (size_t k = 0; k < n; k++) {
			model[first + i + k] = (struct model_entry){.index = first + i + k,
								    .term = term, .salt = salt};
		}
		assert_int_equal(append_model(wal, &model[first + i], n), KEEL_OK);
		assert_int_equal(wal_sync(wal), KEEL_OK);
	}
}

static void run_mode(enum wal_prealloc mode)
{
	char root[] = "/tmp/keel-wal-test-XXXXXX";
	assert_non_null(mkdtemp(root));
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/wal", root); /* wal_open creates it */
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	struct wal_config config;
	wal_config_init(&config, &vfs, dir);
	config.segment_size_bytes = 16 * 1024;
	config.max_entry_size_bytes = 4096;
	config.write_buffer_bytes = 8192;
	config.prealloc = mode;

	struct wal wal;
	struct wal_recovered rec;
	assert_int_equal(wal_open(&wal, &config, &rec), KEEL_OK);
	wal_recovered_free(&rec);
	struct wal_hard_state hs = {.term = 3, .voted_for = 1};
	assert_int_equal(wal_save_hard_state(&wal, &hs), KEEL_OK);
	append_range(&wal, 1, 300, 2, 0);
	assert_true(file_count(dir, "seg-") > 3);
	assert_int_equal(wal_truncate_suffix(&wal, 251), KEEL_OK);
	append_range(&wal, 251, 100, 3, 1);
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_save(&config, 200, 2, "m", 1, "snapshot", 8, errmsg),
			 KEEL_OK);
	assert_int_equal(wal_compact(&wal, 200), KEEL_OK);
	wal_close(&wal);

	/* Reopen, continue through the writer thread. */
	assert_int_equal(wal_open(&wal, &config, &rec), KEEL_OK);
	assert_int_equal(rec.snapshot.index, 200);
	assert_int_equal(rec.hard_state.term, 3);
	assert_log(&rec, model + 201, 150);
	wal_recovered_free(&rec);
	struct done_count done = {0};
	pthread_mutex_init(&done.mutex, NULL);
	pthread_cond_init(&done.cond, NULL);
	struct wal_writer w;
	struct wal_writer_config wc = {.done = count_done, .done_arg = &done,
				       .prepare_spares = true};
	assert_int_equal(wal_writer_start(&w, &wal, &wc), KEEL_OK);
	for (uint64_t i = 351; i <= 400; i += 10) {
		struct wal_entry entries[10];
		uint8_t payloads[10][TEST_MAX_PAYLOAD];
		for (size_t k = 0; k < 10; k++) {
			model[i + k] = (struct model_entry){.index = i + k, .term = 3, .salt = 2};
			payload_fill(payloads[k], i + k, 3, 2);
			entries[k] = (struct wal_entry){.index = i + k, .term = 3,
							.type = (uint8_t)((i + k) % 3),
							.size = payload_size(i + k, 2),
							.data = payloads[k]};
		}
		struct wal_batch b = {.entries = entries, .entry_count = 10};
		uint64_t seq;
		assert_int_equal(wal_writer_submit(&w, &b, &seq), KEEL_OK);
	}
	wal_writer_stop(&w);
	assert_int_equal(done.count, 5);
	assert_int_equal(done.failures, 0);
	assert_int_equal(done.last_durable, 400);
	pthread_cond_destroy(&done.cond);
	pthread_mutex_destroy(&done.mutex);
	wal_close(&wal);
	if (mode == WAL_PREALLOC_NONE) {
		assert_int_equal(file_count(dir, "spare-"), 0);
	} else {
		assert_true(file_count(dir, "spare-") <= 2);
	}

	assert_int_equal(wal_open(&wal, &config, &rec), KEEL_OK);
	assert_log(&rec, model + 201, 200);
	assert_string_equal(rec.notes, "");
	wal_recovered_free(&rec);
	wal_close(&wal);
	remove_tree(dir);
	assert_int_equal(rmdir(root), 0);
}

static void test_posix_zero_fill(void **state)
{
	(void)state;
	run_mode(WAL_PREALLOC_ZERO_FILL);
}

static void test_posix_fallocate(void **state)
{
	(void)state;
	run_mode(WAL_PREALLOC_FALLOCATE);
}

static void test_posix_growing(void **state)
{
	(void)state;
	run_mode(WAL_PREALLOC_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_posix_zero_fill),
		cmocka_unit_test(test_posix_fallocate),
		cmocka_unit_test(test_posix_growing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
