/*
 * fuzz_meta_snapshot.c — the metadata image snapshot loader.
 *
 * Input: bytes offered as an image snapshot. Whatever loads must satisfy
 * every image invariant and save back to exactly the same bytes (the
 * snapshot encoding is canonical). The checksum makes random inputs fail
 * early; the driver's seed corpus (if any) and libFuzzer's comparison
 * tracing get past it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meta_image img;
	meta_image_init(&img, NULL);
	struct meta_errbuf eb;
	enum keel_err err = meta_image_load_from_memory(&img, data, size, &eb);
	if (err == KEEL_OK) {
		KEEL_ASSERT(meta_image_check(&img, &eb));
		size_t out_size;
		enum keel_err serr;
		uint8_t *out = meta_image_save_to_memory(&img, size + 64, &out_size, &serr);
		KEEL_ASSERT(out != NULL);
		KEEL_ASSERT(out_size == size);
		KEEL_ASSERT(memcmp(out, data, size) == 0);
		free(out);
	} else {
		KEEL_ASSERT(img.broker_count == 0 && img.topic_count == 0);
	}
	meta_image_close(&img);
	return 0;
}
