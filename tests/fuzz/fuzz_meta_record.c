/*
 * fuzz_meta_record.c — the metadata batch decoder, and apply of whatever
 * decodes.
 *
 * Input: one encoded batch. A batch that decodes must re-encode to the same
 * bytes (the codec is canonical), and applying it to an image (fresh, then
 * again on top of itself) must keep every image invariant, whatever the
 * records say.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "meta/image.h"
#include "meta/record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct keel_arena arena;
	keel_arena_init(&arena, 4096);
	struct meta_batch batch;
	struct meta_errbuf eb;
	enum keel_err err = meta_batch_decode(data, size, &arena, &batch, &eb);
	if (err == KEEL_OK) {
		struct keel_wbuf w;
		keel_wbuf_init_dynamic(&w, 0, size + 64);
		KEEL_ASSERT(meta_batch_encode(&batch, &w) == KEEL_OK);
		KEEL_ASSERT(w.size == size);
		KEEL_ASSERT(memcmp(w.data, data, size) == 0);
		keel_wbuf_free(&w);

		struct meta_image img;
		meta_image_init(&img, NULL);
		struct meta_changes ch;
		meta_changes_init(&ch, 4096);
		struct meta_apply_result res;
		KEEL_ASSERT(meta_image_apply(&img, 1, &batch, &ch, &res) == KEEL_OK);
		KEEL_ASSERT(res.applied + res.ignored == batch.count);
		KEEL_ASSERT(meta_image_check(&img, &eb));
		KEEL_ASSERT(meta_image_apply(&img, 2, &batch, &ch, &res) == KEEL_OK);
		KEEL_ASSERT(meta_image_check(&img, &eb));
		meta_changes_close(&ch);
		meta_image_close(&img);
	} else {
		KEEL_ASSERT(err == KEEL_SHORT || err == KEEL_CORRUPT || err == KEEL_TOOBIG ||
			    err == KEEL_UNSUPPORTED);
		KEEL_ASSERT(eb.msg[0] != '\0');
	}
	keel_arena_close(&arena);
	return 0;
}
