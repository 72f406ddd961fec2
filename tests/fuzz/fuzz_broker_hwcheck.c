/*
 * fuzz_broker_hwcheck.c — the high-watermark checkpoint decoder
 * (src/broker/hwcheck.c): any input is refused or decodes to entries that
 * account for every byte, none negative.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/assert.h"
#include "broker/broker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct broker_hw_entry *e = NULL;
	uint32_t n = 0;
	char why[128];
	enum keel_err err = broker_hw_checkpoint_decode(data, size, &e, &n, why, sizeof(why));
	if (err != KEEL_OK) {
		KEEL_ASSERT(e == NULL && n == 0);
		KEEL_ASSERT(err == KEEL_CORRUPT || err == KEEL_NOMEM);
		return 0;
	}
	KEEL_ASSERT(size == 14 + (size_t)n * 28);
	for (uint32_t i = 0; i < n; i++) {
		KEEL_ASSERT(e[i].partition >= 0);
		KEEL_ASSERT(e[i].high_watermark >= 0);
	}
	free(e);
	return 0;
}
