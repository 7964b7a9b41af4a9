/* float32 <-> float16 in bulk with the CPU's conversion instructions (x86-64 F16C), chosen at run
 * time; dw2v_f16c() says whether they are there (elsewhere the caller falls back to numpy).
 * Rounding is IEEE round-to-nearest-even, as numpy's astype, so results are bit-identical. */
#ifndef DW2V_HALF_H
#define DW2V_HALF_H
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

static int dw2v_f16c(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}

__attribute__((target("avx,f16c")))
static void dw2v_to_half(const float *src, uint16_t *dst, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(src[i]), _MM_FROUND_TO_NEAREST_INT), 0);
}

__attribute__((target("avx,f16c")))
static void dw2v_from_half(const uint16_t *src, float *dst, ptrdiff_t n) {
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(src[i])));
}

#else
static int dw2v_f16c(void) { return 0; }
static void dw2v_to_half(const float *src, uint16_t *dst, ptrdiff_t n) { (void)src; (void)dst; (void)n; }
static void dw2v_from_half(const uint16_t *src, float *dst, ptrdiff_t n) { (void)src; (void)dst; (void)n; }
#endif
#endif
