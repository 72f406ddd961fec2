/*
 * driver.c — a stand-in for libFuzzer in builds without it.
 *
 *	fuzz_NAME ITERATIONS [CORPUS_DIR]
 *
 * Feeds every file of CORPUS_DIR, then ITERATIONS inputs made by mutating
 * them (or random bytes) with a fixed-seed generator, to the target. It has
 * no coverage feedback; the libFuzzer build (make debug) is the real fuzzer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DRIVER_MAX_INPUT 65536
#define MAX_SEEDS 256

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_sizes[MAX_SEEDS];
static size_t seed_count;

static void load_corpus(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL && seed_count < MAX_SEEDS) {
		if (e->d_name[0] == '.') {
			continue;
		}
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		if (f == NULL) {
			continue;
		}
		uint8_t *buf = malloc(DRIVER_MAX_INPUT);
		size_t n = fread(buf, 1, DRIVER_MAX_INPUT, f);
		fclose(f);
		seeds[seed_count] = buf;
		seed_sizes[seed_count] = n;
		seed_count++;
		LLVMFuzzerTestOneInput(buf, n);
	}
	closedir(d);
}

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 10000;
	if (argc > 2) {
		load_corpus(argv[2]);
	}
	struct keel_rng rng;
	keel_rng_seed(&rng, 0x6b65656c);
	uint8_t *buf = malloc(DRIVER_MAX_INPUT);
	for (long i = 0; i < iterations; i++) {
		size_t size;
		if (seed_count > 0 && keel_rng_chance(&rng, 3, 4)) {
			size_t s = (size_t)keel_rng_below(&rng, seed_count);
			size = seed_sizes[s];
			memcpy(buf, seeds[s], size);
			uint64_t flips = keel_rng_between(&rng, 1, 8);
			for (uint64_t k = 0; k < flips && size > 0; k++) {
				size_t at = (size_t)keel_rng_below(&rng, size);
				buf[at] = (uint8_t)keel_rng_next(&rng);
			}
			if (keel_rng_chance(&rng, 1, 4) && size > 0) {
				size = (size_t)keel_rng_below(&rng, size + 1);
			}
		} else {
			size = (size_t)keel_rng_below(&rng, 512);
			for (size_t k = 0; k < size; k++) {
				buf[k] = (uint8_t)keel_rng_next(&rng);
			}
		}
		LLVMFuzzerTestOneInput(buf, size);
	}
	free(buf);
	printf("fuzz driver: %ld inputs, %zu seeds, no crash\n", iterations, seed_count);
	return 0;
}
