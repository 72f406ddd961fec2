/*
 * Unit test: a WAL directory written by format version 1, checked into
 * tests/unit/data/wal/v1, still recovers to exactly what was written — so
 * the on-disk format cannot change by accident.
 *
 * Regenerate on purpose (and review the diff) with:
 *   KEEL_WAL_REGENERATE=1 build/tests/test_wal_golden
 * which rewrites $KEEL_TEST_DATA/wal/v1 from the script below.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "test_wal_util.h"

static struct model_entry model[64];

static void golden_config(struct wal_config *config, struct wal_vfs *vfs, const char *dir)
{
	wal_vfs_posix_init(vfs);
	wal_config_init(config, vfs, dir);
	config->segment_size_bytes = 4096;
	config->max_entry_size_bytes = 1024;
	config->write_buffer_bytes = 4096;
	config->spare_segments = 1;
}

static void model_init(void)
{
	for (uint64_t i = 1; i < 64; i++) {
		model[i] = (struct model_entry){.index = i, .term = i < 18 ? 1 : 3, .salt = i < 18 ? 0 : 1};
	}
}

/* The script that wrote the golden directory. */
static void generate(const char *dir)
{
	struct wal_vfs vfs;
	struct wal_config config;
	golden_config(&config, &vfs, dir);
	struct wal wal;
	struct wal_recovered rec;
	assert_int_equal(wal_open(&wal, &config, &rec), KEEL_OK);
	wal_recovered_free(&rec);
	struct wal_hard_state hs = {.term = 1};
	assert_int_equal(wal_save_hard_state(&wal, &hs), KEEL_OK);
	for (uint64_t i = 1; i <= 20; i += 5) {
		struct model_entry old[5];
		for (size_t k = 0; k < 5; k++) {
			old[k] = (struct model_entry){.index = i + k, .term = 1, .salt = 0};
		}
		assert_int_equal(append_model(&wal, old, 5), KEEL_OK);
		assert_int_equal(wal_sync(&wal), KEEL_OK);
	}
	char errmsg[WAL_ERRMSG_SIZE];
	assert_int_equal(wal_snapshot_save(&config, 10, 1, "1,2,3", 5, "state@10", 8, errmsg),
			 KEEL_OK);
	assert_int_equal(wal_compact(&wal, 10), KEEL_OK);
	hs = (struct wal_hard_state){.term = 3, .voted_for = 2, .commit_index = 12};
	assert_int_equal(wal_save_hard_state(&wal, &hs), KEEL_OK);
	assert_int_equal(wal_truncate_suffix(&wal, 18), KEEL_OK);
	for (uint64_t i = 18; i <= 30; i += 4) {
		size_t n = KEEL_MIN(4, 31 - i);
		assert_int_equal(append_model(&wal, &model[i], n), KEEL_OK);
		assert_int_equal(wal_sync(&wal), KEEL_OK);
	}
	wal_close(&wal);
}

static void regenerate(void **state)
{
	generate(*state);
}

static void golden_dir(char *out, size_t size)
{
	const char *data = getenv("KEEL_TEST_DATA");
	assert_non_null(data);
	snprintf(out, size, "%s/wal/v1", data);
}

static void check_recovered(const struct wal_recovered *rec)
{
	assert_true(rec->has_hard_state);
	assert_int_equal(rec->hard_state.term, 3);
	assert_int_equal(rec->hard_state.voted_for, 2);
	assert_int_equal(rec->hard_state.commit_index, 12);
	assert_true(rec->has_snapshot);
	assert_int_equal(rec->snapshot.index, 10);
	assert_int_equal(rec->snapshot.term, 1);
	assert_int_equal(rec->snapshot.membership_size, 5);
	assert_memory_equal(rec->snapshot.membership, "1,2,3", 5);
	assert_int_equal(rec->snapshot.payload_size, 8);
	assert_log(rec, &model[11], 20);
	assert_int_equal(rec->last_index, 30);
	assert_int_equal(rec->last_term, 3);
}

static void test_golden_v1_recovers(void **state)
{
	(void)state;
	char dir[512];
	golden_dir(dir, sizeof(dir));
	struct wal_vfs vfs;
	struct wal_config config;
	golden_config(&config, &vfs, dir);
	struct wal_recovered rec;
	char errmsg[WAL_ERRMSG_SIZE];
	enum keel_err err = wal_check(&config, &rec, errmsg);
	if (err != KEEL_OK) {
		fprintf(stderr, "%s\n", errmsg);
	}
	assert_int_equal(err, KEEL_OK);
	assert_string_equal(rec.notes, "");
	check_recovered(&rec);
	wal_recovered_free(&rec);
}

/* wal_open on a copy: recovery writes (syncs), so not on the checked-in one. */
static void test_golden_v1_copy_continues(void **state)
{
	(void)state;
	char src[512];
	golden_dir(src, sizeof(src));
	char tmp[] = "/tmp/keel-wal-golden-XXXXXX";
	assert_non_null(mkdtemp(tmp));
	DIR *d = opendir(src);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.') {
			continue;
		}
		char from[1024];
		char to[1024];
		snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", tmp, e->d_name);
		FILE *in = fopen(from, "rb");
		FILE *out = fopen(to, "wb");
		assert_non_null(in);
		assert_non_null(out);
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
			assert_int_equal(fwrite(buf, 1, n, out), n);
		}
		fclose(in);
		fclose(out);
	}
	closedir(d);
	struct wal_vfs vfs;
	struct wal_config config;
	golden_config(&config, &vfs, tmp);
	struct wal wal;
	struct wal_recovered rec;
	assert_int_equal(wal_open(&wal, &config, &rec), KEEL_OK);
	check_recovered(&rec);
	wal_recovered_free(&rec);
	assert_int_equal(append_model(&wal, &model[31], 5), KEEL_OK);
	assert_int_equal(wal_sync(&wal), KEEL_OK);
	wal_close(&wal);
	assert_int_equal(wal_open(&wal, &config, &rec), KEEL_OK);
	assert_log(&rec, &model[11], 25);
	wal_recovered_free(&rec);
	wal_close(&wal);
	d = opendir(tmp);
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] != '.') {
			char path[1024];
			snprintf(path, sizeof(path), "%s/%s", tmp, e->d_name);
			assert_int_equal(unlink(path), 0);
		}
	}
	closedir(d);
	assert_int_equal(rmdir(tmp), 0);
}

int main(void)
{
	model_init();
	if (getenv("KEEL_WAL_REGENERATE") != NULL) {
		char dir[512];
		golden_dir(dir, sizeof(dir));
		char parent[600];
		snprintf(parent, sizeof(parent), "%s/..", dir);
		mkdir(parent, 0755);
		/* Start from nothing: remove the old files, keep the directory. */
		DIR *d = opendir(dir);
		if (d != NULL) {
			struct dirent *e;
			while ((e = readdir(d)) != NULL) {
				char path[1024];
				snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
				if (e->d_name[0] != '.') {
					unlink(path);
				}
			}
			closedir(d);
		}
		const struct CMUnitTest gen[] = {cmocka_unit_test_prestate(regenerate, dir)};
		return cmocka_run_group_tests(gen, NULL, NULL);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_v1_recovers),
		cmocka_unit_test(test_golden_v1_copy_continues),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
