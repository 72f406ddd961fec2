/*
 * crc32c.h — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78).
 *
 * Used for every checksum keel writes: WAL records, snapshots, peer frames.
 * Uses the SSE4.2 crc32 instruction when the CPU has it and a table
 * otherwise; both give the same result (tested against published vectors).
 *
 * Incremental use: crc = keel_crc32c(0, a, n); crc = keel_crc32c(crc, b, m)
 * equals keel_crc32c(0, ab, n + m). The pre/post inversion is internal.
 */
#ifndef KEEL_BASE_CRC32C_H
#define KEEL_BASE_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint32_t keel_crc32c(uint32_t crc, const void *data, size_t size);

/* The portable table-driven path (exposed so tests compare both). */
uint32_t keel_crc32c_sw(uint32_t crc, const void *data, size_t size);

/* True when keel_crc32c() uses the hardware instruction on this CPU. */
bool keel_crc32c_hw_available(void);

#endif
