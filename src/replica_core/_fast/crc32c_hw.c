/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by Kafka's record batch v2.
 *
 * Two engines behind one entry point:
 *   - x86-64 with SSE4.2: the CRC32 instruction over three independent lanes at once (the
 *     instruction has a latency of three cycles but a throughput of one per cycle), the lane
 *     results joined with precomputed "append n zero bytes" tables;
 *   - anywhere else: table-driven slicing-by-8.
 * The engine is picked once, at first use, from the CPU's feature flags.
 *
 * All functions here work on the *register* value (pre-inverted); rc_crc32c() applies the
 * standard ~ on entry and exit.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "crc32c_hw.h"

#define POLY 0x82F63B78u

static uint32_t sw_table[8][256];
static int initialised = 0;
static int use_hw = 0;

/* Lane sizes for the three-way hardware loop; zero-append tables for each. */
#define LANE_LONG 8192
#define LANE_SHORT 256
static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];

static uint32_t sw_update(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = sw_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        w ^= crc;
        crc = sw_table[7][w & 0xff] ^ sw_table[6][(w >> 8) & 0xff] ^
              sw_table[5][(w >> 16) & 0xff] ^ sw_table[4][(w >> 24) & 0xff] ^
              sw_table[3][(w >> 32) & 0xff] ^ sw_table[2][(w >> 40) & 0xff] ^
              sw_table[1][(w >> 48) & 0xff] ^ sw_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) {
        crc = sw_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return crc;
}

/* Register after feeding n zero bytes, byte at a time (used only to build tables). */
static uint32_t zeros_slow(uint32_t crc, size_t n)
{
    while (n--) {
        crc = sw_table[0][crc & 0xff] ^ (crc >> 8);
    }
    return crc;
}

/* The zero-append map is linear over GF(2): build it from its 32 basis images. */
static void build_shift(uint32_t table[4][256], size_t n)
{
    uint32_t basis[32];
    for (int b = 0; b < 32; b++) {
        basis[b] = zeros_slow(1u << b, n);
    }
    for (int k = 0; k < 4; k++) {
        for (int v = 0; v < 256; v++) {
            uint32_t acc = 0;
            for (int bit = 0; bit < 8; bit++) {
                if (v & (1 << bit)) {
                    acc ^= basis[k * 8 + bit];
                }
            }
            table[k][v] = acc;
        }
    }
}

static inline uint32_t apply_shift(uint32_t table[4][256], uint32_t crc)
{
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
           table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_X86_HW 1

__attribute__((target("sse4.2")))
static uint32_t hw_update(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c0 = crc;
    while (n && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        n--;
    }
    /* Three lanes of LANE_LONG, then of LANE_SHORT, each joined by a zero-append shift. */
    while (n >= 3 * LANE_LONG) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + LANE_LONG;
        while (p < end) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p, 8);
            memcpy(&w1, p + LANE_LONG, 8);
            memcpy(&w2, p + 2 * LANE_LONG, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            p += 8;
        }
        c0 = apply_shift(shift_long, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = apply_shift(shift_long, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * LANE_LONG;
        n -= 3 * LANE_LONG;
    }
    while (n >= 3 * LANE_SHORT) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + LANE_SHORT;
        while (p < end) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p, 8);
            memcpy(&w1, p + LANE_SHORT, 8);
            memcpy(&w2, p + 2 * LANE_SHORT, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            p += 8;
        }
        c0 = apply_shift(shift_short, (uint32_t)c0) ^ (uint32_t)c1;
        c0 = apply_shift(shift_short, (uint32_t)c0) ^ (uint32_t)c2;
        p += 2 * LANE_SHORT;
        n -= 3 * LANE_SHORT;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
        p += 8;
        n -= 8;
    }
    while (n--) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    }
    return (uint32_t)c0;
}
#endif

static void init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        }
        sw_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = sw_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = sw_table[0][c & 0xff] ^ (c >> 8);
            sw_table[t][i] = c;
        }
    }
    build_shift(shift_long, LANE_LONG);
    build_shift(shift_short, LANE_SHORT);
#ifdef HAVE_X86_HW
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    initialised = 1;
}

void rc_crc32c_init(void)
{
    if (!initialised) {
        init();
    }
}

void rc_crc32c_set_engine(int hardware)
{
    rc_crc32c_init();
#ifdef HAVE_X86_HW
    use_hw = hardware && __builtin_cpu_supports("sse4.2");
#else
    (void)hardware;
#endif
}

int rc_crc32c_hardware(void)
{
    rc_crc32c_init();
    return use_hw;
}

uint32_t rc_crc32c_update(uint32_t crc, const unsigned char *data, size_t len)
{
    uint32_t reg = ~crc;
#ifdef HAVE_X86_HW
    if (use_hw) {
        return ~hw_update(reg, data, len);
    }
#endif
    return ~sw_update(reg, data, len);
}

uint32_t rc_crc32c(const unsigned char *data, size_t len)
{
    return rc_crc32c_update(0, data, len);
}
