/* dequant_iq.c - ggml i-quant types decoded to F32 (IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ3_XXS
 * IQ3_S IQ4_NL IQ4_XS).
 *
 * Each decoder follows ggml's scalar dequantize_row_iq* operation by operation (same products,
 * same association; the +-1 sign multiply is a sign flip, see put8), so the F32 output is
 * bit-identical. Blocks are read byte-wise from the packed little-endian stream. Codebooks are
 * in iq_tables.h. */
#include "dequant.h"
#include "iq_tables.h"

#include <string.h>

#define IQ1_DELTA 0.125f   /* ggml IQ1S_DELTA == IQ1M_DELTA */

static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline float half_at(const uint8_t *p)
{
    return qtk_fp16_to_f32(rd16(p));
}

/* 8 values db*grid[j]*sign[j] of one 8-group, bit j of `signs` meaning negative. ggml writes
 * (db * grid) * (neg ? -1.f : 1.f); a multiply by +-1 is exactly a negation except for the sign
 * of a NaN, and GCC compiles ggml's expression to a sign flip, so a sign-bit XOR reproduces
 * ggml's output bit for bit, NaN scales included. Grid byte j is bits 8j..8j+7 of the entry
 * (memcpy of the u64 gives that order on the little-endian host). Branch-free: vectorizes. */
static inline void put8(float *restrict y, float db, uint64_t g, unsigned signs)
{
    uint8_t gb[8];
    memcpy(gb, &g, sizeof gb);
    for (int j = 0; j < 8; j++) {
        const float v = db * (float)gb[j];
        uint32_t u;
        memcpy(&u, &v, sizeof u);
        u ^= ((signs >> j) & 1u) << 31;
        memcpy(&y[j], &u, sizeof u);
    }
}

/* IQ2_XXS (66 B): d; per 32-block two LE u32: a0 = 4 grid indices (bytes), a1 = 4 x 7-bit sign
 * indices + scale in bits 28..31. db = d*(0.5+s)*0.25. */
void qtk_dq_iq2_xxs(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 66) {
        const float d = half_at(x);
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *q = x + 2 + 8 * ib;
            const uint32_t a1 = rd32(q + 4);
            const float db = d * (0.5f + (float)(a1 >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                put8(y, db, qtk_iq2xxs_grid[q[l]], qtk_ksigns_iq2xs[(a1 >> (7 * l)) & 127]);
        }
    }
}

/* IQ2_XS (74 B): d; u16 qs[32] (9-bit grid index | 7-bit sign index << 9); scales[8]
 * (low nibble for groups 0-1, high for 2-3). */
void qtk_dq_iq2_xs(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 74) {
        const float d = half_at(x);
        const uint8_t *scales = x + 66;
        for (int ib = 0; ib < 8; ib++) {
            float db[2];
            db[0] = d * (0.5f + (float)(scales[ib] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = rd16(x + 2 + 2 * (4 * ib + l));
                put8(y, db[l / 2], qtk_iq2xs_grid[q & 511], qtk_ksigns_iq2xs[q >> 9]);
            }
        }
    }
}

/* IQ2_S (82 B): d; qs[32] grid index low bytes; signs[32]; qh[8] (2 high index bits per
 * group); scales[8] as IQ2_XS. */
void qtk_dq_iq2_s(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 82) {
        const float d = half_at(x);
        const uint8_t *qs = x + 2;
        const uint8_t *signs = x + 34;
        const uint8_t *qh = x + 66;
        const uint8_t *scales = x + 74;
        for (int ib = 0; ib < 8; ib++, qs += 4, signs += 4) {
            float db[2];
            db[0] = d * (0.5f + (float)(scales[ib] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned idx = qs[l] | (((unsigned)qh[ib] << (8 - 2 * l)) & 0x300);
                put8(y, db[l / 2], qtk_iq2s_grid[idx], signs[l]);
            }
        }
    }
}

/* IQ3_XXS (98 B): d; qs[64] grid indices (4 values each); per 32-block LE u32 of 4 x 7-bit sign
 * indices + scale in bits 28..31. db = d*(0.5+s)*0.5. */
void qtk_dq_iq3_xxs(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 98) {
        const float d = half_at(x);
        const uint8_t *qs = x + 2;
        const uint8_t *ss = x + 66;
        for (int ib = 0; ib < 8; ib++, qs += 8) {
            const uint32_t aux = rd32(ss + 4 * ib);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned signs = qtk_ksigns_iq2xs[(aux >> (7 * l)) & 127];
                const uint64_t g = qtk_iq3xxs_grid[qs[2 * l]]
                                 | (uint64_t)qtk_iq3xxs_grid[qs[2 * l + 1]] << 32;
                put8(y, db, g, signs);
            }
        }
    }
}

/* IQ3_S (110 B): d; qs[64]; qh[8] (9th index bit, one per grid index); signs[32] (one bit per
 * element); scales[4] (low nibble even 32-block, high odd). db = d*(1+2s). */
void qtk_dq_iq3_s(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 110) {
        const float d = half_at(x);
        const uint8_t *qs = x + 2;
        const uint8_t *qh = x + 66;
        const uint8_t *signs = x + 74;
        const uint8_t *scales = x + 106;
        for (int ib = 0; ib < 8; ib++, qs += 8, signs += 4) {
            const unsigned s = ib & 1 ? scales[ib / 2] >> 4 : scales[ib / 2] & 0xf;
            const float db = d * (float)(1 + 2 * (int)s);
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned i1 = qs[2 * l] | (((unsigned)qh[ib] << (8 - 2 * l)) & 256);
                const unsigned i2 = qs[2 * l + 1] | (((unsigned)qh[ib] << (7 - 2 * l)) & 256);
                const uint64_t g = qtk_iq3s_grid[i1] | (uint64_t)qtk_iq3s_grid[i2] << 32;
                put8(y, db, g, signs[l]);
            }
        }
    }
}

/* 8 values dl*(grid[j] + delta) of one IQ1 8-group; grid bytes are int8 in {-1,0,1}. */
static inline void put8_iq1(float *restrict y, float dl, float delta, uint64_t g)
{
    int8_t gb[8];
    memcpy(gb, &g, sizeof gb);   /* byte j = bits 8j..8j+7 on the little-endian host */
    for (int j = 0; j < 8; j++)
        y[j] = dl * ((float)gb[j] + delta);
}

/* IQ1_S (50 B): d; qs[32] (low 8 index bits); LE u16 qh[8]: 3 high bits per group, 3-bit
 * scale at 12..14, delta sign at 15. y = dl*(grid + delta), dl = d*(2s+1). */
void qtk_dq_iq1_s(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 50) {
        const float d = half_at(x);
        const uint8_t *qs = x + 2;
        for (int ib = 0; ib < 8; ib++, qs += 4) {
            const unsigned qh = rd16(x + 34 + 2 * ib);
            const float dl = d * (float)(2 * (int)((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -IQ1_DELTA : IQ1_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                put8_iq1(y, dl, delta, qtk_iq1s_grid[qs[l] | (((qh >> (3 * l)) & 7) << 8)]);
            }
        }
    }
}

/* IQ1_M (56 B): qs[32]; qh[16] (per 8-group nibble: 3 index bits + delta sign); scales[8] read
 * as 4 LE u16 holding 3-bit sub-scales and, in their top nibbles, the fp16 super-scale. */
void qtk_dq_iq1_m(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 56) {
        unsigned sc[4];
        for (int k = 0; k < 4; k++)
            sc[k] = rd16(x + 48 + 2 * k);
        const unsigned u = (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00)
                         | (sc[3] & 0xf000);
        const float d = qtk_fp16_to_f32((uint16_t)u);
        const uint8_t *qs = x;
        const uint8_t *qh = x + 32;
        for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
            const unsigned s = sc[ib / 2] >> (6 * (ib % 2));
            const float dl[2] = { d * (float)(2 * (int)(s & 7) + 1),
                                  d * (float)(2 * (int)((s >> 3) & 7) + 1) };
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned nib = (unsigned)qh[l / 2] >> (4 * (l % 2));   /* 4 bits used */
                const uint64_t g = qtk_iq1s_grid[qs[l] | ((nib & 7) << 8)];
                const float delta = nib & 8 ? -IQ1_DELTA : IQ1_DELTA;
                put8_iq1(y, dl[l / 2], delta, g);
            }
        }
    }
}

const int8_t *const qtk_iq4nl_codebook = qtk_kvalues_iq4nl;

/* IQ4_NL (18 B, 32 elements): d; qs[16] (nibble order as Q4_0). y = d*kvalues[q]. */
void qtk_dq_iq4_nl(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 18, y += 32) {
        const float d = half_at(x);
        const uint8_t *qs = x + 2;
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)qtk_kvalues_iq4nl[qs[j] & 0xf];
            y[j + 16] = d * (float)qtk_kvalues_iq4nl[qs[j] >> 4];
        }
    }
}

/* IQ4_XS (136 B): d; LE u16 scales_h (2 bits per 32-block); scales_l[4] (nibbles); qs[128].
 * dl = d*(ls-32) with the 6-bit ls; values as IQ4_NL. */
void qtk_dq_iq4_xs(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 136) {
        const float d = half_at(x);
        const unsigned sh = rd16(x + 2);
        const uint8_t *sl = x + 4;
        const uint8_t *qs = x + 8;
        for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
            const int ls = (int)(((unsigned)sl[ib / 2] >> (4 * (ib % 2))) & 0xf)
                         | (int)(((sh >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)qtk_kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * (float)qtk_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}
