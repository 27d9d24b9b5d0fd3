/* CRC32C (Castagnoli, the iSCSI/ext4 checksum): the checksum of image
 * extents. Uses the SSE4.2 crc32 instruction on three interleaved lanes
 * when the CPU has it (about 8 bytes a cycle), slicing-by-8 tables
 * otherwise. Thread-safe; the tables are built on first use. */
#ifndef MV_CRC32C_H
#define MV_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Continue a CRC32C: crc32c_update(0, a) then crc32c_update(that, b)
 * equals crc32c of a followed by b. The start value is 0. */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);

static inline uint32_t crc32c(const void *buf, size_t len)
{
	return crc32c_update(0, buf, len);
}

/* The CRC32C of A followed by one 4096-byte page B, from crc32c(A) and
 * crc32c(B): an extent's checksum from its pages' (docs/image-format.md). */
uint32_t crc32c_combine_page(uint32_t crc_a, uint32_t crc_page);

/* Which implementation runs: "sse4.2" or "table". */
const char *crc32c_impl(void);

/* Force the table implementation (tests compare the two). */
void crc32c_force_table(bool on);

#endif
