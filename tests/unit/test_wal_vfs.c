/* Unit tests: the POSIX vfs in a temporary directory, and the fault vfs's
 * durability model (what survives a crash), scripted failures, power-off,
 * bit flips and determinism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/rng.h"
#include "wal/vfs.h"

struct names {
	char list[32][64];
	size_t count;
};

static void collect(void *arg, const char *name)
{
	struct names *n = arg;
	if (n->count < 32) {
		snprintf(n->list[n->count++], 64, "%s", name);
	}
}

static bool has_name(const struct names *n, const char *name)
{
	for (size_t i = 0; i < n->count; i++) {
		if (strcmp(n->list[i], name) == 0) {
			return true;
		}
	}
	return false;
}

static void read_all(struct wal_vfs *vfs, const char *path, uint8_t *buf, size_t cap, size_t *n)
{
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, path, WAL_VFS_READ_ONLY, &f), KEEL_OK);
	assert_int_equal(wal_vfs_pread(f, buf, cap, 0, n), KEEL_OK);
	wal_vfs_close(f);
}

/* The operations every vfs must implement the same way. */
static void exercise_common(struct wal_vfs *vfs, const char *dir)
{
	char path[256];
	char path2[256];
	snprintf(path, sizeof(path), "%s/a", dir);
	snprintf(path2, sizeof(path2), "%s/b", dir);

	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, path, 0, &f), KEEL_NOENT);
	assert_int_equal(wal_vfs_open(vfs, path, WAL_VFS_CREATE, &f), KEEL_OK);
	assert_int_equal(wal_vfs_pwrite(f, "hello", 5, 0), KEEL_OK);
	assert_int_equal(wal_vfs_pwrite(f, "xy", 2, 10), KEEL_OK); /* leaves a hole */
	uint64_t size = 0;
	assert_int_equal(wal_vfs_size(f, &size), KEEL_OK);
	assert_int_equal(size, 12);
	uint8_t buf[64];
	size_t n = 0;
	assert_int_equal(wal_vfs_pread(f, buf, sizeof(buf), 0, &n), KEEL_OK);
	assert_int_equal(n, 12);
	assert_memory_equal(buf, "hello\0\0\0\0\0xy", 12);
	assert_int_equal(wal_vfs_pread_exact(f, buf, 20, 0), KEEL_SHORT);
	assert_int_equal(wal_vfs_datasync(f), KEEL_OK);
	assert_int_equal(wal_vfs_allocate(f, 4096), KEEL_OK);
	assert_int_equal(wal_vfs_size(f, &size), KEEL_OK);
	assert_int_equal(size, 4096);
	assert_int_equal(wal_vfs_pread_exact(f, buf, 4, 4000), KEEL_OK);
	assert_memory_equal(buf, "\0\0\0\0", 4);
	assert_int_equal(wal_vfs_truncate(f, 3), KEEL_OK);
	assert_int_equal(wal_vfs_size(f, &size), KEEL_OK);
	assert_int_equal(size, 3);
	assert_int_equal(wal_vfs_write_zeros(f, 3, 100000), KEEL_OK);
	assert_int_equal(wal_vfs_size(f, &size), KEEL_OK);
	assert_int_equal(size, 100003);
	wal_vfs_close(f);

	assert_int_equal(wal_vfs_open(vfs, path, WAL_VFS_CREATE | WAL_VFS_EXCLUSIVE, &f), KEEL_EXIST);
	assert_int_equal(wal_vfs_rename(vfs, path, path2), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(vfs, dir), KEEL_OK);
	struct names names = {0};
	assert_int_equal(wal_vfs_list(vfs, dir, collect, &names), KEEL_OK);
	assert_int_equal(names.count, 1);
	assert_true(has_name(&names, "b"));
	read_all(vfs, path2, buf, sizeof(buf), &n);
	assert_int_equal(n, 64);
	assert_memory_equal(buf, "hel\0", 4);
	assert_int_equal(wal_vfs_unlink(vfs, path2), KEEL_OK);
	assert_int_equal(wal_vfs_unlink(vfs, path2), KEEL_NOENT);
	assert_int_equal(wal_vfs_rename(vfs, path, path2), KEEL_NOENT);
	char sub[256];
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(wal_vfs_mkdir(vfs, sub), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(vfs, sub), KEEL_EXIST);
	names.count = 0;
	assert_int_equal(wal_vfs_list(vfs, dir, collect, &names), KEEL_OK);
	assert_int_equal(names.count, 1);
	assert_true(has_name(&names, "sub"));
	assert_int_equal(wal_vfs_list(vfs, path2, collect, &names), KEEL_NOENT);
}

static void test_posix_basics(void **state)
{
	(void)state;
	char dir[] = "/tmp/keel-wal-vfs-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct wal_vfs vfs;
	wal_vfs_posix_init(&vfs);
	exercise_common(&vfs, dir);
	/* The error detail names the operation and the path. */
	struct wal_vfs_file *f;
	char missing[256];
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	assert_int_equal(wal_vfs_open(&vfs, missing, 0, &f), KEEL_NOENT);
	assert_non_null(strstr(wal_vfs_last_error(), "missing"));
	char sub[300];
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_join(void **state)
{
	(void)state;
	char out[16];
	assert_int_equal(wal_vfs_join(out, sizeof(out), "d/", "x"), KEEL_OK);
	assert_string_equal(out, "d/x");
	assert_int_equal(wal_vfs_join(out, sizeof(out), "/", "x"), KEEL_OK);
	assert_string_equal(out, "/x");
	assert_int_equal(wal_vfs_join(out, sizeof(out), "long-directory", "name"), KEEL_TOOBIG);
}

struct fault_fixture {
	struct keel_rng rng;
	struct wal_vfs vfs;
};

static int fault_setup(void **state)
{
	struct fault_fixture *fx = calloc(1, sizeof(*fx));
	keel_rng_seed(&fx->rng, 42);
	struct wal_vfs_fault_config config = {.rng = &fx->rng};
	if (wal_vfs_fault_init(&fx->vfs, &config) != KEEL_OK) {
		return -1;
	}
	if (wal_vfs_mkdir(&fx->vfs, "/d") != KEEL_OK) {
		return -1;
	}
	*state = fx;
	return 0;
}

static int fault_teardown(void **state)
{
	struct fault_fixture *fx = *state;
	wal_vfs_fault_close(&fx->vfs);
	free(fx);
	return 0;
}

static void test_fault_basics(void **state)
{
	struct fault_fixture *fx = *state;
	exercise_common(&fx->vfs, "/d");
}

static void write_file(struct wal_vfs *vfs, const char *path, const char *text, bool sync)
{
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, path, WAL_VFS_CREATE, &f), KEEL_OK);
	assert_int_equal(wal_vfs_pwrite(f, text, strlen(text), 0), KEEL_OK);
	if (sync) {
		assert_int_equal(wal_vfs_datasync(f), KEEL_OK);
	}
	wal_vfs_close(f);
}

static size_t file_text(struct wal_vfs *vfs, const char *path, char *buf, size_t cap)
{
	size_t n = 0;
	read_all(vfs, path, (uint8_t *)buf, cap - 1, &n);
	buf[n] = '\0';
	return n;
}

static void test_fault_synced_survives_unsynced_does_not(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	write_file(vfs, "/d/synced", "durable", true);
	write_file(vfs, "/d/unsynced", "volatile", false);
	assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, "/d/synced", 0, &f), KEEL_OK);
	assert_int_equal(wal_vfs_pwrite(f, "XX", 2, 0), KEEL_OK); /* not synced */

	struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_DROP_UNSYNCED};
	wal_vfs_fault_crash(vfs, &crash);
	/* The old handle is stale now, but closing it is fine. */
	uint8_t b[4];
	assert_int_equal(wal_vfs_pwrite(f, b, 1, 0), KEEL_IO);
	wal_vfs_close(f);

	char text[64];
	file_text(vfs, "/d/synced", text, sizeof(text));
	assert_string_equal(text, "durable");
	assert_int_equal(file_text(vfs, "/d/unsynced", text, sizeof(text)), 0);
}

static void test_fault_torn_write_is_a_prefix(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	const char *full = "0123456789abcdefghijklmnopqrstuvwxyz";
	bool saw_empty = false;
	bool saw_torn = false;
	bool saw_full = false;
	for (int round = 0; round < 200; round++) {
		write_file(vfs, "/d/t", "", true);
		assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
		write_file(vfs, "/d/t", full, false);
		struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_TORN};
		wal_vfs_fault_crash(vfs, &crash);
		char text[64];
		size_t n = file_text(vfs, "/d/t", text, sizeof(text));
		assert_memory_equal(text, full, n); /* always a prefix */
		saw_empty |= n == 0;
		saw_torn |= n > 0 && n < strlen(full);
		saw_full |= n == strlen(full);
		assert_int_equal(wal_vfs_unlink(vfs, "/d/t"), KEEL_OK);
		assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
	}
	assert_true(saw_empty);
	assert_true(saw_torn);
	assert_true(saw_full);
}

static void test_fault_scramble_keeps_sectors(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	uint8_t data[4096];
	memset(data, 0xab, sizeof(data));
	bool saw_hole = false;
	for (int round = 0; round < 100; round++) {
		write_file(vfs, "/d/s", "", true);
		assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
		struct wal_vfs_file *f;
		assert_int_equal(wal_vfs_open(vfs, "/d/s", 0, &f), KEEL_OK);
		assert_int_equal(wal_vfs_pwrite(f, data, sizeof(data), 0), KEEL_OK);
		wal_vfs_close(f);
		struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_SCRAMBLE};
		wal_vfs_fault_crash(vfs, &crash);
		uint8_t out[4096];
		size_t n = 0;
		read_all(vfs, "/d/s", out, sizeof(out), &n);
		/* Every 512-byte sector is either all new data or all zeros. */
		for (size_t s = 0; s < n; s += 512) {
			size_t len = n - s < 512 ? n - s : 512;
			bool all_new = true;
			bool all_zero = true;
			for (size_t i = 0; i < len; i++) {
				all_new &= out[s + i] == 0xab;
				all_zero &= out[s + i] == 0;
			}
			assert_true(all_new || all_zero);
			saw_hole |= all_zero && s + len < n;
		}
		assert_int_equal(wal_vfs_unlink(vfs, "/d/s"), KEEL_OK);
		assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
	}
	assert_true(saw_hole); /* a later sector made it while an earlier did not */
}

static void test_fault_dir_ops_need_sync_dir(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	bool saw_lost = false;
	bool saw_kept = false;
	for (int round = 0; round < 50; round++) {
		write_file(vfs, "/d/new", "x", true); /* data synced, name not */
		struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_DROP_UNSYNCED,
					      .lose_dir_ops = true};
		wal_vfs_fault_crash(vfs, &crash);
		struct names names = {0};
		assert_int_equal(wal_vfs_list(vfs, "/d", collect, &names), KEEL_OK);
		if (has_name(&names, "new")) {
			saw_kept = true;
			assert_int_equal(wal_vfs_unlink(vfs, "/d/new"), KEEL_OK);
			assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
		} else {
			saw_lost = true;
		}
	}
	assert_true(saw_lost);
	assert_true(saw_kept);

	/* After sync_dir the name is durable, and a rename replaces atomically. */
	write_file(vfs, "/d/x.tmp", "v2", true);
	write_file(vfs, "/d/x", "v1", true);
	assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
	assert_int_equal(wal_vfs_rename(vfs, "/d/x.tmp", "/d/x"), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
	struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_DROP_UNSYNCED, .lose_dir_ops = true};
	wal_vfs_fault_crash(vfs, &crash);
	char text[8];
	file_text(vfs, "/d/x", text, sizeof(text));
	assert_string_equal(text, "v2");
	struct names names = {0};
	assert_int_equal(wal_vfs_list(vfs, "/d", collect, &names), KEEL_OK);
	assert_false(has_name(&names, "x.tmp"));
}

static void test_fault_scripted_failures(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, "/d/f", WAL_VFS_CREATE, &f), KEEL_OK);
	wal_vfs_fault_fail_nth(vfs, WAL_VFS_OP_SYNC, 2, KEEL_IO);
	assert_int_equal(wal_vfs_pwrite(f, "a", 1, 0), KEEL_OK);
	assert_int_equal(wal_vfs_datasync(f), KEEL_OK);
	assert_int_equal(wal_vfs_pwrite(f, "b", 1, 1), KEEL_OK);
	assert_int_equal(wal_vfs_datasync(f), KEEL_IO);
	assert_non_null(strstr(wal_vfs_last_error(), "datasync"));
	assert_int_equal(wal_vfs_datasync(f), KEEL_OK); /* once only */
	wal_vfs_fault_fail_nth(vfs, WAL_VFS_OP_WRITE, 1, KEEL_NOSPACE);
	assert_int_equal(wal_vfs_pwrite(f, "c", 1, 2), KEEL_NOSPACE);
	uint64_t size;
	assert_int_equal(wal_vfs_size(f, &size), KEEL_OK);
	assert_int_equal(size, 2); /* the failed write changed nothing */
	struct wal_vfs_fault_stats stats;
	wal_vfs_fault_get_stats(vfs, &stats);
	assert_int_equal(stats.injected_failures, 2);
	wal_vfs_close(f);
}

static void test_fault_power_off(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(vfs, "/d/p", WAL_VFS_CREATE, &f), KEEL_OK);
	assert_int_equal(wal_vfs_sync_dir(vfs, "/d"), KEEL_OK);
	wal_vfs_fault_power_off_after(vfs, 2);
	assert_int_equal(wal_vfs_pwrite(f, "ab", 2, 0), KEEL_OK);
	assert_int_equal(wal_vfs_datasync(f), KEEL_OK);
	assert_false(wal_vfs_fault_powered_off(vfs));
	assert_int_equal(wal_vfs_pwrite(f, "cd", 2, 2), KEEL_IO);
	assert_true(wal_vfs_fault_powered_off(vfs));
	uint8_t b[4];
	size_t n;
	assert_int_equal(wal_vfs_pread(f, b, 4, 0, &n), KEEL_IO);
	wal_vfs_close(f);
	struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_TORN};
	wal_vfs_fault_crash(vfs, &crash);
	assert_false(wal_vfs_fault_powered_off(vfs));
	char text[8];
	file_text(vfs, "/d/p", text, sizeof(text));
	assert_string_equal(text, "ab");
}

static void test_fault_read_flips_and_corrupt(void **state)
{
	struct fault_fixture *fx = *state;
	struct wal_vfs *vfs = &fx->vfs;
	write_file(vfs, "/d/r", "AAAAAAAA", true);
	wal_vfs_fault_set_read_flip_rate(vfs, 1, 1);
	char text[16];
	file_text(vfs, "/d/r", text, sizeof(text));
	assert_string_not_equal(text, "AAAAAAAA");
	wal_vfs_fault_set_read_flip_rate(vfs, 0, 1);
	file_text(vfs, "/d/r", text, sizeof(text));
	assert_string_equal(text, "AAAAAAAA"); /* stored bytes untouched */

	assert_int_equal(wal_vfs_fault_corrupt(vfs, "/d/r", 3, 0x01), KEEL_OK);
	struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_DROP_UNSYNCED};
	wal_vfs_fault_crash(vfs, &crash);
	file_text(vfs, "/d/r", text, sizeof(text));
	assert_string_equal(text, "AAA@AAAA"); /* bit rot is durable */
	assert_int_equal(wal_vfs_fault_corrupt(vfs, "/d/r", 99, 1), KEEL_INVAL);
	assert_int_equal(wal_vfs_fault_corrupt(vfs, "/d/none", 0, 1), KEEL_NOENT);
}

/* Same seed, same calls: the same crash outcome. */
static uint64_t run_seeded(uint64_t seed)
{
	struct keel_rng rng;
	keel_rng_seed(&rng, seed);
	struct wal_vfs vfs;
	struct wal_vfs_fault_config config = {.rng = &rng};
	assert_int_equal(wal_vfs_fault_init(&vfs, &config), KEEL_OK);
	assert_int_equal(wal_vfs_mkdir(&vfs, "/d"), KEEL_OK);
	struct wal_vfs_file *f;
	assert_int_equal(wal_vfs_open(&vfs, "/d/f", WAL_VFS_CREATE, &f), KEEL_OK);
	uint8_t data[3000];
	for (size_t i = 0; i < sizeof(data); i++) {
		data[i] = (uint8_t)(i * 7 + 1);
	}
	for (int i = 0; i < 5; i++) {
		assert_int_equal(wal_vfs_pwrite(f, data, sizeof(data), (uint64_t)i * 1000), KEEL_OK);
	}
	wal_vfs_close(f);
	struct wal_vfs_crash crash = {.mode = WAL_VFS_CRASH_SCRAMBLE, .lose_dir_ops = true};
	wal_vfs_fault_crash(&vfs, &crash);
	uint64_t digest = 0;
	if (wal_vfs_open(&vfs, "/d/f", WAL_VFS_READ_ONLY, &f) == KEEL_OK) {
		uint8_t out[8192];
		size_t n = 0;
		assert_int_equal(wal_vfs_pread(f, out, sizeof(out), 0, &n), KEEL_OK);
		digest = n + 1;
		for (size_t i = 0; i < n; i++) {
			digest = digest * 31 + out[i];
		}
		wal_vfs_close(f);
	}
	wal_vfs_fault_close(&vfs);
	return digest;
}

static void test_fault_deterministic(void **state)
{
	(void)state;
	uint64_t first = run_seeded(7);
	assert_true(first == run_seeded(7));
	bool any_different = false;
	for (uint64_t seed = 8; seed < 20; seed++) {
		any_different |= run_seeded(seed) != first;
	}
	assert_true(any_different);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_posix_basics),
		cmocka_unit_test(test_join),
		cmocka_unit_test_setup_teardown(test_fault_basics, fault_setup, fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_synced_survives_unsynced_does_not,
						fault_setup, fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_torn_write_is_a_prefix, fault_setup,
						fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_scramble_keeps_sectors, fault_setup,
						fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_dir_ops_need_sync_dir, fault_setup,
						fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_scripted_failures, fault_setup,
						fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_power_off, fault_setup, fault_teardown),
		cmocka_unit_test_setup_teardown(test_fault_read_flips_and_corrupt, fault_setup,
						fault_teardown),
		cmocka_unit_test(test_fault_deterministic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
