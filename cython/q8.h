/* float32 rows <-> int8 levels on one float32 scale per row: the compact codec of merge deltas.
 * A row's largest |value| maps to level 127; the sender's row becomes exactly what the receiver
 * computes from the levels (level * scale, in float32), so both sides add bit-identical values.
 * Plain loops without branches, which the compiler vectorizes (no libm calls). */
#ifndef DW2V_Q8_H
#define DW2V_Q8_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* out = levels of row, row = levels * scale; returns the scale (0 for a row of zeros, or one too
 * small for a float32 scale: nothing goes, the row becomes 0). row must be finite. */
static float dw2v_to_q8(float *row, int8_t *out, ptrdiff_t n) {
    /* the largest |value|: as the bits of |value|, which order as the values do (an integer max
     * vectorizes; a float max would need -ffast-math) */
    int32_t top_bits = 0;
    for (ptrdiff_t j = 0; j < n; j++) {
        int32_t bits;
        memcpy(&bits, &row[j], sizeof bits);
        bits &= 0x7fffffff;
        top_bits = bits > top_bits ? bits : top_bits;
    }
    float top;
    memcpy(&top, &top_bits, sizeof top);
    float scale = top / 127.0f;
    if (!(scale > 0.0f)) {
        memset(out, 0, (size_t)n);
        memset(row, 0, (size_t)n * sizeof(float));
        return 0.0f;
    }
    float inv = 127.0f / top;  /* |row[j] * inv| <= 127 (plus rounding), so no level passes 127 */
    for (ptrdiff_t j = 0; j < n; j++) {
        /* + and - 1.5 * 2**23 rounds to the nearest integer, ties to even (C keeps the order) */
        float y = (row[j] * inv + 12582912.0f) - 12582912.0f;
        int32_t q = (int32_t)y;
        out[j] = (int8_t)q;
        row[j] = (float)q * scale;
    }
    return scale;
}

/* row = levels * scale */
static void dw2v_from_q8(const int8_t *levels, float scale, float *row, ptrdiff_t n) {
    for (ptrdiff_t j = 0; j < n; j++)
        row[j] = (float)levels[j] * scale;
}
#endif
