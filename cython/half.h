/* float32 <-> float16 in bulk: with the CPU's conversion instructions (x86-64 F16C) where it has
 * them, chosen at run time, else in portable integer code. Either way the rounding is IEEE
 * round-to-nearest-even, as numpy's astype, so finite values and infinities convert bit-identically
 * on every machine (NaNs stay NaNs; their payloads are not promised).
 * dw2v_f16c() says whether the instructions are there; dw2v_half_hardware(on) chooses the path
 * (tests run the portable one on machines that have F16C) and returns the path now in use. */
#ifndef DW2V_HALF_H
#define DW2V_HALF_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* --- portable conversions, one value at a time --- */

static inline uint16_t dw2v_half_of(float value) {
    uint32_t x, sign, exponent, mantissa, shift, q, rest, halfway;
    memcpy(&x, &value, sizeof x);
    sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u)  /* inf, or NaN (kept a NaN: the quiet bit set, the payload's top bits kept) */
        return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x0200u | ((x >> 13) & 0x03ffu) : 0u));
    if (x >= 0x477ff000u)  /* at or beyond the midpoint of 65504 and 65536: rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x >= 0x38800000u) {  /* a normal float16: rebias the exponent, round 13 bits away */
        q = (x - 0x38000000u) >> 13;
        rest = x & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (q & 1u)))
            q += 1u;  /* a carry into the exponent is the right result */
        return (uint16_t)(sign | q);
    }
    if (x <= 0x33000000u)  /* at or below half the smallest subnormal (2**-25): ties to even, 0 */
        return (uint16_t)sign;
    exponent = x >> 23;  /* 102 .. 112: a subnormal float16, in units of 2**-24 */
    mantissa = (x & 0x007fffffu) | 0x00800000u;
    shift = 126u - exponent;  /* 14 .. 24 */
    q = mantissa >> shift;
    rest = mantissa & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (q & 1u)))
        q += 1u;  /* 0x400 is the smallest normal: right too */
    return (uint16_t)(sign | q);
}

static inline float dw2v_float_of(uint16_t half) {
    uint32_t sign = ((uint32_t)half & 0x8000u) << 16, exponent = ((uint32_t)half >> 10) & 0x1fu;
    uint32_t mantissa = (uint32_t)half & 0x03ffu, x, top = 0;
    float value;
    if (exponent == 0x1fu)
        x = sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u);
    else if (exponent)
        x = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    else if (!mantissa)
        x = sign;
    else {  /* subnormal: mantissa x 2**-24, normalised */
        while (mantissa >> (top + 1u))
            top++;
        x = sign | ((top + 103u) << 23) | ((mantissa << (23u - top)) & 0x007fffffu);
    }
    memcpy(&value, &x, sizeof value);
    return value;
}

static void dw2v_to_half_portable(const float *src, uint16_t *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = dw2v_half_of(src[i]);
}

static void dw2v_from_half_portable(const uint16_t *src, float *dst, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++)
        dst[i] = dw2v_float_of(src[i]);
}

/* --- the CPU's instructions --- */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

static int dw2v_f16c(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}

__attribute__((target("avx,f16c")))
static void dw2v_to_half_f16c(const float *src, uint16_t *dst, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(src[i]), _MM_FROUND_TO_NEAREST_INT), 0);
}

__attribute__((target("avx,f16c")))
static void dw2v_from_half_f16c(const uint16_t *src, float *dst, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(src[i])));
}

#else
static int dw2v_f16c(void) { return 0; }
static void dw2v_to_half_f16c(const float *src, uint16_t *dst, ptrdiff_t n) { dw2v_to_half_portable(src, dst, n); }
static void dw2v_from_half_f16c(const uint16_t *src, float *dst, ptrdiff_t n) { dw2v_from_half_portable(src, dst, n); }
#endif

/* --- the path in use: the instructions where the CPU has them --- */

static int dw2v_half_hw = -1;  /* -1: not chosen yet */

static int dw2v_half_hardware(int on) {
    dw2v_half_hw = on && dw2v_f16c();
    return dw2v_half_hw;
}

static inline int dw2v_half_on_hardware(void) {
    if (dw2v_half_hw < 0)
        dw2v_half_hw = dw2v_f16c();
    return dw2v_half_hw;
}

static void dw2v_to_half(const float *src, uint16_t *dst, ptrdiff_t n) {
    if (dw2v_half_on_hardware())
        dw2v_to_half_f16c(src, dst, n);
    else
        dw2v_to_half_portable(src, dst, n);
}

static void dw2v_from_half(const uint16_t *src, float *dst, ptrdiff_t n) {
    if (dw2v_half_on_hardware())
        dw2v_from_half_f16c(src, dst, n);
    else
        dw2v_from_half_portable(src, dst, n);
}
#endif
