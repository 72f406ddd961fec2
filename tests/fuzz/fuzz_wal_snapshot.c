/*
 * fuzz_wal_snapshot.c — the snapshot header decoder (and the hard state
 * decoder, the other small file the WAL reads back) on arbitrary bytes.
 *
 * Properties checked: no crash or out-of-bounds read; a decoded header's
 * membership lies inside the input and within the limit; a decoded header
 * re-encodes to the same bytes; a decoded hard state's extra blob lies
 * inside the input and re-encodes to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "wal/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MEMBERSHIP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wal_snapshot_header h;
	size_t header_size = 0;
	char why[128];
	if (wal_snapshot_header_decode(data, size, MAX_MEMBERSHIP, &h, &header_size, why,
				       sizeof(why)) == KEEL_OK) {
		KEEL_ASSERT(header_size == WAL_SNAPSHOT_FIXED_SIZE + h.membership_size);
		KEEL_ASSERT(header_size <= size);
		KEEL_ASSERT(h.membership_size <= MAX_MEMBERSHIP);
		KEEL_ASSERT(h.membership_size == 0 || h.membership == data + WAL_SNAPSHOT_FIXED_SIZE);
		uint8_t *again = malloc(header_size);
		KEEL_ASSERT(again != NULL);
		wal_snapshot_header_encode(again, &h);
		KEEL_ASSERT(memcmp(again, data, header_size) == 0);
		free(again);
	}
	struct wal_hard_state hs;
	if (wal_hard_state_decode(data, size, &hs, why, sizeof(why)) == KEEL_OK) {
		KEEL_ASSERT(wal_hard_state_encoded_size(&hs) == size);
		KEEL_ASSERT(hs.extra_size == 0 ||
			    (hs.extra >= data && hs.extra + hs.extra_size <= data + size));
		uint8_t *again = malloc(size);
		KEEL_ASSERT(again != NULL);
		wal_hard_state_encode(again, &hs);
		KEEL_ASSERT(memcmp(again, data, size) == 0);
		free(again);
	}
	return 0;
}
