/* dequant.c - ggml block types (legacy, k-quants, ternary, MXFP4/NVFP4, Q1_0/Q2_0) and the
 * plain float/int types decoded to F32, plus fp16/bf16 conversions.
 *
 * Every decoder reproduces ggml's scalar dequantize_row_* (ggml-org/ggml src/ggml-quants.c)
 * operation by operation: the same int->float conversions, the same products in the same
 * association order. Blocks are read byte by byte from the packed little-endian stream, never
 * through struct casts, so any source alignment works. IQ types live in dequant_iq.c. */
#include "dequant.h"
#include "fp16.h"
#include "quant.h" /* qtk_simd_avx2, qtk_cpu_f16c */

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ---------------------------------------------------------------- scalar conversions */

static inline float half_to_float(uint16_t h)
{
    return qtk_h2f(h);
}

float qtk_fp16_to_f32(uint16_t h)
{
    return half_to_float(h);
}

uint16_t qtk_f32_to_fp16(float f)
{
    return qtk_f2h(f);
}

float qtk_bf16_to_f32(uint16_t h)
{
    return qtk_bits_f32((uint32_t)h << 16);
}

/* ggml_compute_fp32_to_bf16: NaN keeps its top bits and is forced quiet; everything else
 * rounds to nearest even (overflow correctly carries into infinity). */
uint16_t qtk_f32_to_bf16(float f)
{
    const uint32_t u = qtk_f32_bits(f);
    if ((u & UINT32_C(0x7fffffff)) > UINT32_C(0x7f800000))
        return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (UINT32_C(0x7fff) + ((u >> 16) & 1))) >> 16);
}

/* ---------------------------------------------------------------- byte access */

static inline uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rd64(const uint8_t *p)
{
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static inline float half_at(const uint8_t *p)
{
    return half_to_float(rd16(p));
}

/* E2M1 values doubled (ggml kvalues_mxfp4), shared by MXFP4 and NVFP4. */
static const int8_t k_fp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* ggml_e8m0_to_fp32_half: 2^(e-128), subnormal patterns for e < 2. */
static inline float e8m0_half(uint8_t e)
{
    const uint32_t bits = e < 2 ? UINT32_C(0x00200000) << e : (uint32_t)(e - 1) << 23;
    return qtk_bits_f32(bits);
}

/* ggml_ue4m3_to_fp32: unsigned E4M3 (bias 7), 0 and 0x7F give 0, result halved. */
static inline float ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F)
        return 0.0f;
    const int ex = (x >> 3) & 0xF;
    const int man = x & 0x7;
    const float raw = ex == 0 ? ldexpf((float)man, -9)
                              : ldexpf(1.0f + (float)man / 8.0f, ex - 7);
    return raw * 0.5f;
}

/* ---------------------------------------------------------------- plain types */

typedef void (*dq_fn)(const uint8_t *restrict x, float *restrict y, uint64_t nb);

static void dq_f32(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    memcpy(y, x, (size_t)nb * sizeof(float));  /* host is little-endian */
}

/* F16: with the F16C instruction when the CPU has it (the same bits, dequant_f16c.c), else in
 * chunks through an aligned u16 buffer (host is little-endian) so the loop vectorizes. */
static void dq_f16(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    if (qtk_dq_f16c_built() && qtk_simd_avx2() && qtk_cpu_f16c()) {
        qtk_dq_f16_f16c(x, y, nb);
        return;
    }
    uint16_t h[256];   /* aligned copy; the host is little-endian */
    for (; nb >= 256; nb -= 256, x += 512, y += 256) {
        memcpy(h, x, sizeof h);
        for (size_t i = 0; i < 256; i++)
            y[i] = half_to_float(h[i]);
    }
    memcpy(h, x, (size_t)nb * 2);
    for (size_t i = 0; i < nb; i++)
        y[i] = half_to_float(h[i]);
}

static void dq_bf16(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    uint16_t h[256];   /* aligned copy; the host is little-endian */
    for (; nb >= 256; nb -= 256, x += 512, y += 256) {
        memcpy(h, x, sizeof h);
        for (size_t i = 0; i < 256; i++)
            y[i] = qtk_bits_f32((uint32_t)h[i] << 16);
    }
    memcpy(h, x, (size_t)nb * 2);
    for (size_t i = 0; i < nb; i++)
        y[i] = qtk_bits_f32((uint32_t)h[i] << 16);
}

static void dq_f64(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++) {
        double v;
        uint64_t b = rd64(x + 8 * i);
        memcpy(&v, &b, sizeof v);
        y[i] = (float)v;
    }
}

static void dq_i8(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++)
        y[i] = (float)(int8_t)x[i];
}

static void dq_i16(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++)
        y[i] = (float)(int16_t)rd16(x + 2 * i);
}

static void dq_i32(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++)
        y[i] = (float)(int32_t)rd32(x + 4 * i);
}

static void dq_i64(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t i = 0; i < nb; i++)
        y[i] = (float)(int64_t)rd64(x + 8 * i);
}

/* ---------------------------------------------------------------- legacy 32-blocks */

/* The four legacy 4/5-bit types in SSE2 lanes: each element's code made as the loops below
 * make it (nibble, fifth bit from qh, minus the offset), converted, multiplied by d and (q4_1,
 * q5_1) m added, lane by lane in the same order: the same bits. */
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
#include <emmintrin.h>
#define DQ_LEGACY_SSE2 1

/* 0x10 in byte j where bit j of the 16 bits is set */
static inline __m128i qh_bytes(uint32_t bits16)
{
    __m128i v = _mm_cvtsi32_si128((int)(bits16 & 0xFFFFu));
    v = _mm_unpacklo_epi8(v, v);
    v = _mm_unpacklo_epi16(v, v);
    v = _mm_unpacklo_epi32(v, v); /* bytes 0-7: low byte, 8-15: high byte */
    const __m128i m = _mm_set_epi8(-128, 64, 32, 16, 8, 4, 2, 1, -128, 64, 32, 16, 8, 4, 2, 1);
    return _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(v, m), m), _mm_set1_epi8(0x10));
}

/* 16 codes (bytes) minus off, times d, plus m (add_m) into y[0..15] */
static inline void codes_to_f32(__m128i c, int off, __m128 vd, __m128 vm, bool add_m, float *y)
{
    const __m128i z = _mm_setzero_si128(), vo = _mm_set1_epi32(off);
    const __m128i w0 = _mm_unpacklo_epi8(c, z), w1 = _mm_unpackhi_epi8(c, z);
    const __m128i q[4] = { _mm_unpacklo_epi16(w0, z), _mm_unpackhi_epi16(w0, z),
                           _mm_unpacklo_epi16(w1, z), _mm_unpackhi_epi16(w1, z) };
    for (int k = 0; k < 4; k++) {
        __m128 v = _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(q[k], vo)), vd);
        if (add_m)
            v = _mm_add_ps(v, vm);
        _mm_storeu_ps(y + 4 * k, v);
    }
}

/* one block's 16 packed bytes: low nibbles (elements 0-15) and high nibbles (16-31), each
 * with its fifth bits from qh (has_qh) */
static inline void dq_legacy_block(const uint8_t *qs, bool has_qh, uint32_t qh, int off, float d,
                                   float m, bool add_m, float *y)
{
    const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)qs);
    const __m128i nib = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(raw, nib), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), nib);
    if (has_qh) {
        lo = _mm_or_si128(lo, qh_bytes(qh));
        hi = _mm_or_si128(hi, qh_bytes(qh >> 16));
    }
    const __m128 vd = _mm_set1_ps(d), vm = _mm_set1_ps(m);
    codes_to_f32(lo, off, vd, vm, add_m, y);
    codes_to_f32(hi, off, vd, vm, add_m, y + 16);
}
#endif

/* Q4_0 (18 B): d; qs[16]. Element j = low nibble of qs[j], j+16 = high nibble; (q-8)*d. */
static void dq_q4_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 18, y += 32) {
        const float d = half_at(x);
        const uint8_t *qs = x + 2;
#ifdef DQ_LEGACY_SSE2
        dq_legacy_block(qs, false, 0, 8, d, 0.f, false, y);
#else
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((qs[j] & 0x0F) - 8) * d;
            y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
#endif
    }
}

/* Q4_1 (20 B): d, m; qs[16]. q*d + m. */
static void dq_q4_1(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 20, y += 32) {
        const float d = half_at(x);
        const float m = half_at(x + 2);
        const uint8_t *qs = x + 4;
#ifdef DQ_LEGACY_SSE2
        dq_legacy_block(qs, false, 0, 0, d, m, true, y);
#else
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(qs[j] & 0x0F) * d + m;
            y[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
#endif
    }
}

/* Q5_0 (22 B): d; qh (LE u32, bit j = 5th bit of element j); qs[16]. (q-16)*d. */
static void dq_q5_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 22, y += 32) {
        const float d = half_at(x);
        const uint32_t qh = rd32(x + 2);
        const uint8_t *qs = x + 6;
#ifdef DQ_LEGACY_SSE2
        dq_legacy_block(qs, true, qh, 16, d, 0.f, false, y);
#else
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)(((qh >> j) << 4) & 0x10);
            const int h1 = (int)((qh >> (j + 12)) & 0x10);
            y[j] = (float)(((qs[j] & 0x0F) | h0) - 16) * d;
            y[j + 16] = (float)(((qs[j] >> 4) | h1) - 16) * d;
        }
#endif
    }
}

/* Q5_1 (24 B): d, m; qh; qs[16]. q*d + m. */
static void dq_q5_1(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 24, y += 32) {
        const float d = half_at(x);
        const float m = half_at(x + 2);
        const uint32_t qh = rd32(x + 4);
        const uint8_t *qs = x + 8;
#ifdef DQ_LEGACY_SSE2
        dq_legacy_block(qs, true, qh, 0, d, m, true, y);
#else
        for (int j = 0; j < 16; j++) {
            const int h0 = (int)(((qh >> j) << 4) & 0x10);
            const int h1 = (int)((qh >> (j + 12)) & 0x10);
            y[j] = (float)((qs[j] & 0x0F) | h0) * d + m;
            y[j + 16] = (float)((qs[j] >> 4) | h1) * d + m;
        }
#endif
    }
}

/* Q8_0 (34 B): d; int8 qs[32]. q*d. */
static void dq_q8_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 34, y += 32) {
        const float d = half_at(x);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)x[2 + j] * d;
    }
}

/* MXFP4 (17 B): E8M0 e; qs[16] (nibble order as Q4_0). fp4(q) * 2^(e-128). */
static void dq_mxfp4(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 17, y += 32) {
        const float d = e8m0_half(x[0]);
        const uint8_t *qs = x + 1;
        for (int j = 0; j < 16; j++) {
            y[j] = (float)k_fp4[qs[j] & 0x0F] * d;
            y[j + 16] = (float)k_fp4[qs[j] >> 4] * d;
        }
    }
}

/* NVFP4 (36 B, 64 elements): UE4M3 d[4], one per 16; qs[32], 8 bytes per 16 (lo = j, hi = j+8). */
static void dq_nvfp4(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 36, y += 64) {
        for (int s = 0; s < 4; s++) {
            const float d = ue4m3_half(x[s]);
            const uint8_t *qs = x + 4 + 8 * s;
            float *ys = y + 16 * s;
            for (int j = 0; j < 8; j++) {
                ys[j] = (float)k_fp4[qs[j] & 0x0F] * d;
                ys[j + 8] = (float)k_fp4[qs[j] >> 4] * d;
            }
        }
    }
}

/* Q1_0 (18 B, 128 elements): d; qs[16], bit j%8 of qs[j/8] (LSB first): 1 -> +d, 0 -> -d. */
static void dq_q1_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 18, y += 128) {
        const float d = half_at(x);
        const uint32_t pos = qtk_f32_bits(d), neg = qtk_f32_bits(-d);
        for (int j = 0; j < 128; j++) {
            const uint32_t m = 0u - (uint32_t)((x[2 + j / 8] >> (j % 8)) & 1);
            y[j] = qtk_bits_f32((pos & m) | (neg & ~m));   /* bit ? d : -d */
        }
    }
}

/* Q2_0 (18 B, 64 elements): d; qs[16], 2-bit codes LSB first; (q-1)*d. */
static void dq_q2_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 18, y += 64) {
        const float d = half_at(x);
        for (int j = 0; j < 64; j++)
            y[j] = (float)(((x[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

/* ---------------------------------------------------------------- ternary */

/* Trit n of a TQ1_0 byte: the byte is a base-3 fixed-point fraction; multiplying by 3^n
 * (mod 256) shifts trit n to the top, *3 >> 8 reads it. */
static inline float tq1_val(uint8_t byte, uint8_t pow3, float d)
{
    const uint8_t q = (uint8_t)(byte * pow3);
    const int t = (q * 3) >> 8;
    return (float)(t - 1) * d;
}

/* TQ1_0 (54 B): qs[48]; qh[4]; d (last). qs[0..31] -> 32n+m, qs[32..47] -> 160+16n+m,
 * qh -> 240+4n+j. */
static void dq_tq1_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
    for (uint64_t b = 0; b < nb; b++, x += 54) {
        const float d = half_at(x + 52);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 32; m++)
                *y++ = tq1_val(x[m], pow3[n], d);
        for (int n = 0; n < 5; n++)
            for (int m = 0; m < 16; m++)
                *y++ = tq1_val(x[32 + m], pow3[n], d);
        for (int n = 0; n < 4; n++)
            for (int j = 0; j < 4; j++)
                *y++ = tq1_val(x[48 + j], pow3[n], d);
    }
}

/* TQ2_0 (66 B): qs[64]; d (last). Byte m of 32-byte group g holds 128g+32l+m at bits 2l. */
static void dq_tq2_0(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 66) {
        const float d = half_at(x + 64);
        for (int g = 0; g < 2; g++)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++)
                    *y++ = (float)(((x[32 * g + m] >> (2 * l)) & 3) - 1) * d;
    }
}

/* ---------------------------------------------------------------- k-quants */

/* Q2_K (84 B): scales[16] (lo nibble scale, hi nibble min); qs[64]; d; dmin.
 * y = (d*sc)*q - dmin*m per 16-element sub-block. */
static void dq_q2_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 84) {
        const uint8_t *sc = x;
        const uint8_t *q = x + 16;
        const float d = half_at(x + 80);
        const float dmin = half_at(x + 82);
        int is = 0;
        for (int c = 0; c < 2; c++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++, is++) {
                    const float dl = d * (float)(sc[is] & 0xF);
                    const float ml = dmin * (float)(sc[is] >> 4);
                    const uint8_t *qq = q + 16 * h;
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((qq[l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* Q3_K (110 B): hmask[32]; qs[64]; scales[12]; d. q = 2 low bits - (hmask bit clear ? 4 : 0);
 * y = (d*(sc-32))*q. Geometry as Q2_K; hmask bit (4c+j) of hmask[l] / hmask[l+16]. */
static void dq_q3_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 110) {
        const uint8_t *hm = x;
        const uint8_t *q = x + 32;
        const float d_all = half_at(x + 108);
        int sc[16];
        qtk_q3k_scales(x + 96, sc);
        int is = 0;
        unsigned m = 1;
        for (int c = 0; c < 2; c++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int h = 0; h < 2; h++, is++) {
                    const float dl = d_all * (float)(sc[is] - 32);
                    const uint8_t *qq = q + 16 * h;
                    const uint8_t *hh = hm + 16 * h;
                    for (int l = 0; l < 16; l++) {
                        const int v = ((qq[l] >> shift) & 3) - ((hh[l] & m) ? 0 : 4);
                        *y++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* Q4_K (144 B): d; dmin; scales[12]; qs[128]. Per 64-chunk: low nibbles then high nibbles of
 * 32 bytes; y = (d*sc)*q - dmin*m. */
static void dq_q4_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 144) {
        const float d = half_at(x);
        const float dmin = half_at(x + 2);
        const uint8_t *scales = x + 4;
        const uint8_t *q = x + 16;
        for (int j = 0; j < 8; j += 2, q += 32) {
            int sc, m;
            qtk_k4_scale_min(j, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            qtk_k4_scale_min(j + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K (176 B): d; dmin; scales[12]; qh[32]; qs[128]. As Q4_K plus 16 from qh bits 2j, 2j+1. */
static void dq_q5_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 176) {
        const float d = half_at(x);
        const float dmin = half_at(x + 2);
        const uint8_t *scales = x + 4;
        const uint8_t *qh = x + 16;
        const uint8_t *ql = x + 48;
        for (int j = 0; j < 8; j += 2, ql += 32) {
            int sc, m;
            qtk_k4_scale_min(j, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            qtk_k4_scale_min(j + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (((qh[l] >> j) & 1) << 4)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (((qh[l] >> (j + 1)) & 1) << 4)) - m2;
        }
    }
}

/* Q6_K (210 B): ql[128]; qh[64]; int8 scales[16]; d. y = (d*sc)*(q-32). */
static void dq_q6_k(const uint8_t *restrict x, float *restrict y, uint64_t nb)
{
    for (uint64_t b = 0; b < nb; b++, x += 210) {
        const float d = half_at(x + 208);
        const uint8_t *ql = x;
        const uint8_t *qh = x + 128;
        const int8_t *scb = (const int8_t *)(x + 192);
        for (int n = 0; n < 2; n++, y += 128, ql += 64, qh += 32, scb += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)scb[is] * (float)q1;
                y[l + 32] = d * (float)scb[is + 2] * (float)q2;
                y[l + 64] = d * (float)scb[is + 4] * (float)q3;
                y[l + 96] = d * (float)scb[is + 6] * (float)q4;
            }
        }
    }
}

/* ---------------------------------------------------------------- type table */

struct type_info {
    uint16_t blck;   /* elements per block; 0 = id unused */
    uint16_t bytes;  /* bytes per block */
    dq_fn fn;        /* NULL = no decoder */
};

static const struct type_info k_types[] = {
    [0] = { 1, 4, dq_f32 },              /* F32 */
    [1] = { 1, 2, dq_f16 },              /* F16 */
    [2] = { 32, 18, dq_q4_0 },           /* Q4_0 */
    [3] = { 32, 20, dq_q4_1 },           /* Q4_1 */
    [6] = { 32, 22, dq_q5_0 },           /* Q5_0 */
    [7] = { 32, 24, dq_q5_1 },           /* Q5_1 */
    [8] = { 32, 34, dq_q8_0 },           /* Q8_0 */
    [9] = { 32, 36, NULL },              /* Q8_1: activation-only, no to_float */
    [10] = { 256, 84, dq_q2_k },         /* Q2_K */
    [11] = { 256, 110, dq_q3_k },        /* Q3_K */
    [12] = { 256, 144, dq_q4_k },        /* Q4_K */
    [13] = { 256, 176, dq_q5_k },        /* Q5_K */
    [14] = { 256, 210, dq_q6_k },        /* Q6_K */
    [15] = { 256, 292, NULL },           /* Q8_K: intermediate only */
    [16] = { 256, 66, qtk_dq_iq2_xxs },  /* IQ2_XXS */
    [17] = { 256, 74, qtk_dq_iq2_xs },   /* IQ2_XS */
    [18] = { 256, 98, qtk_dq_iq3_xxs },  /* IQ3_XXS */
    [19] = { 256, 50, qtk_dq_iq1_s },    /* IQ1_S */
    [20] = { 32, 18, qtk_dq_iq4_nl },    /* IQ4_NL */
    [21] = { 256, 110, qtk_dq_iq3_s },   /* IQ3_S */
    [22] = { 256, 82, qtk_dq_iq2_s },    /* IQ2_S */
    [23] = { 256, 136, qtk_dq_iq4_xs },  /* IQ4_XS */
    [24] = { 1, 1, dq_i8 },              /* I8 */
    [25] = { 1, 2, dq_i16 },             /* I16 */
    [26] = { 1, 4, dq_i32 },             /* I32 */
    [27] = { 1, 8, dq_i64 },             /* I64 */
    [28] = { 1, 8, dq_f64 },             /* F64 */
    [29] = { 256, 56, qtk_dq_iq1_m },    /* IQ1_M */
    [30] = { 1, 2, dq_bf16 },            /* BF16 */
    [34] = { 256, 54, dq_tq1_0 },        /* TQ1_0 */
    [35] = { 256, 66, dq_tq2_0 },        /* TQ2_0 */
    [39] = { 32, 17, dq_mxfp4 },         /* MXFP4 */
    [40] = { 64, 36, dq_nvfp4 },         /* NVFP4 */
    [41] = { 128, 18, dq_q1_0 },         /* Q1_0 */
    [42] = { 64, 18, dq_q2_0 },          /* Q2_0 */
};

#define N_TYPES (sizeof k_types / sizeof k_types[0])

int qtk_ggml_block_info(unsigned type, uint32_t *blck_elems, uint32_t *blck_bytes)
{
    if (type >= N_TYPES || k_types[type].blck == 0)
        return -1;
    if (blck_elems)
        *blck_elems = k_types[type].blck;
    if (blck_bytes)
        *blck_bytes = k_types[type].bytes;
    return 0;
}

int qtk_dequant_ggml_supported(unsigned type)
{
    return type < N_TYPES && k_types[type].fn != NULL;
}

int qtk_dequant_ggml(unsigned type, const void *src, float *dst, uint64_t n)
{
    if (!qtk_dequant_ggml_supported(type))
        return -1;
    const struct type_info *t = &k_types[type];
    if (n % t->blck != 0)
        return -1;
    if (n == 0)
        return 0;
    t->fn((const uint8_t *)src, dst, n / t->blck);
    return 0;
}
