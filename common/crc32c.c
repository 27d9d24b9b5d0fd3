/* CRC32C, reflected polynomial 0x82f63b78, initial and final inversion
 * (RFC 3720 appendix B.4: crc32c("123456789") = 0xe3069283).
 *
 * The crc32 instruction has a latency of 3 cycles and a throughput of one
 * a cycle, so a single dependency chain runs at a third of what the CPU
 * can do. Three lanes of LANE bytes are summed independently and then
 * combined: the CRC register is linear, so the register after A||B is
 * Z(|B|)(reg after A) xor (reg of B from 0), where Z(n) feeds n zero
 * bytes. Z(LANE) is a fixed 32x32 bit matrix, applied with four 256-entry
 * tables (the technique of Mark Adler's crc32c.c and the Linux kernel's
 * crc32c-intel). */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u
#define LANE 1360 /* bytes: 3 lanes = 4080, so a 4 KiB page is one block */

static uint32_t table[8][256];	    /* slicing-by-8 */
static uint32_t shift_lane[4][256]; /* Z(LANE) by byte of the register */
static uint32_t shift_page[4][256]; /* Z(4096) by byte of the register */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool have_hw, force_table;

/* The register after feeding n zero bytes from reg (no inversion). */
static uint32_t zeros_slow(uint32_t reg, size_t n)
{
	while (n--)
		reg = (reg >> 8) ^ table[0][reg & 0xff];
	return reg;
}

/* The tables of Z(n), a 32x32 bit matrix, by byte of the register. */
static void shift_table(uint32_t t[4][256], size_t n)
{
	uint32_t basis[32];
	for (int b = 0; b < 32; b++)
		basis[b] = zeros_slow(1u << b, n);
	for (int k = 0; k < 4; k++)
		for (uint32_t v = 0; v < 256; v++) {
			uint32_t r = 0;
			for (int j = 0; j < 8; j++)
				if (v & (1u << j))
					r ^= basis[8 * k + j];
			t[k][v] = r;
		}
}

static void init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (int k = 1; k < 8; k++)
		for (uint32_t i = 0; i < 256; i++)
			table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xff];
	shift_table(shift_lane, LANE);
	shift_table(shift_page, 4096);
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint32_t shift(uint32_t reg)
{
	return shift_lane[0][reg & 0xff] ^ shift_lane[1][(reg >> 8) & 0xff] ^
	       shift_lane[2][(reg >> 16) & 0xff] ^ shift_lane[3][reg >> 24];
}

static uint32_t sw_update(uint32_t reg, const unsigned char *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		reg = (reg >> 8) ^ table[0][(reg ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= reg;
		reg = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		      table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
		      table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		reg = (reg >> 8) ^ table[0][(reg ^ *p++) & 0xff];
	return reg;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t hw_update(uint32_t reg, const unsigned char *p,
							    size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		reg = __builtin_ia32_crc32qi(reg, *p++);
		len--;
	}
	uint64_t a = reg;
	while (len >= 3 * LANE) {
		uint64_t b = 0, c = 0;
		const uint64_t *q = (const uint64_t *)(const void *)p;
		for (size_t i = 0; i < LANE / 8; i++) {
			a = __builtin_ia32_crc32di(a, q[i]);
			b = __builtin_ia32_crc32di(b, q[i + LANE / 8]);
			c = __builtin_ia32_crc32di(c, q[i + 2 * LANE / 8]);
		}
		a = shift(shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
		p += 3 * LANE;
		len -= 3 * LANE;
	}
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		a = __builtin_ia32_crc32di(a, w);
		p += 8;
		len -= 8;
	}
	reg = (uint32_t)a;
	while (len--)
		reg = __builtin_ia32_crc32qi(reg, *p++);
	return reg;
}
#endif

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
	uint32_t reg = ~crc;
#if defined(__x86_64__)
	if (have_hw && !force_table)
		return ~hw_update(reg, buf, len);
#endif
	return ~sw_update(reg, buf, len);
}

/* crc(A||B) = Z(|B|)(crc(A)) xor crc(B): the initial and final
 * inversions cancel (Z is linear), as in zlib's crc32_combine. */
uint32_t crc32c_combine_page(uint32_t crc_a, uint32_t crc_page)
{
	pthread_once(&once, init);
	return shift_page[0][crc_a & 0xff] ^ shift_page[1][(crc_a >> 8) & 0xff] ^
	       shift_page[2][(crc_a >> 16) & 0xff] ^ shift_page[3][crc_a >> 24] ^ crc_page;
}

const char *crc32c_impl(void)
{
	pthread_once(&once, init);
	return have_hw && !force_table ? "sse4.2" : "table";
}

void crc32c_force_table(bool on)
{
	force_table = on;
}
