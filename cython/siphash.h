/* SipHash (Aumasson and Bernstein, 2012) of a byte string under a 128-bit key: the keyed hash of the
 * word tables (tokens.pxi). Without the key, nobody can choose words that share a slot chain, which
 * an unkeyed hash (FNV-1a) lets anyone do. C_ROUNDS / D_ROUNDS are the compression and finalisation
 * rounds: 1 and 3 (SipHash-1-3, as CPython hashes str and bytes), 2 and 4 for the paper's test
 * vectors. Bytes are read little-endian whatever the machine, as the reference does. */
#ifndef GDW_SIPHASH_H
#define GDW_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define GDW_ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define GDW_SIPROUND              \
    do {                          \
        v0 += v1;                 \
        v1 = GDW_ROTL(v1, 13);    \
        v1 ^= v0;                 \
        v0 = GDW_ROTL(v0, 32);    \
        v2 += v3;                 \
        v3 = GDW_ROTL(v3, 16);    \
        v3 ^= v2;                 \
        v0 += v3;                 \
        v3 = GDW_ROTL(v3, 21);    \
        v3 ^= v0;                 \
        v2 += v1;                 \
        v1 = GDW_ROTL(v1, 17);    \
        v1 ^= v2;                 \
        v2 = GDW_ROTL(v2, 32);    \
    } while (0)

static inline uint64_t gdw_load64(const unsigned char *p) {
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) | ((uint64_t)p[3] << 24) |
           ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) | ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static inline uint64_t gdw_siphash(const unsigned char *p, size_t n, uint64_t k0, uint64_t k1,
                                   int c_rounds, int d_rounds) {
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
    uint64_t v3 = k1 ^ 0x7465646279746573ULL;
    size_t whole = n - (n & 7), i;
    uint64_t m, last = ((uint64_t)n) << 56;
    int r;
    for (i = 0; i < whole; i += 8) {
        m = gdw_load64(p + i);
        v3 ^= m;
        for (r = 0; r < c_rounds; r++)
            GDW_SIPROUND;
        v0 ^= m;
    }
    for (i = 0; i < (n & 7); i++)
        last |= ((uint64_t)p[whole + i]) << (8 * i);
    v3 ^= last;
    for (r = 0; r < c_rounds; r++)
        GDW_SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    for (r = 0; r < d_rounds; r++)
        GDW_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

#endif
