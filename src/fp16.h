/* fp16.h - IEEE half <-> float, inline, as ggml computes them (ggml_compute_fp16_to_fp32 and
 * ggml_compute_fp32_to_fp16): dequant.c's qtk_fp16_to_f32 / qtk_f32_to_fp16, and the encoders'
 * per-block scale rounding (quant.h). Internal. */
#ifndef QTK_FP16_H
#define QTK_FP16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* a float's bits and back */
static inline float qtk_bits_f32(uint32_t w)
{
    float f;
    memcpy(&f, &w, sizeof f);
    return f;
}

static inline uint32_t qtk_f32_bits(float f)
{
    uint32_t w;
    memcpy(&w, &f, sizeof w);
    return w;
}

/* exponent rebias by one multiply for normals and infinities, magic-number subtraction for
 * subnormals; the final choice is a bit mask instead of ggml's ternary (same bits, but loops
 * vectorize) */
static inline float qtk_h2f(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16, sign = w & UINT32_C(0x80000000), two_w = w + w;
    const float normalized = qtk_bits_f32((two_w >> 4) + (UINT32_C(0xE0) << 23)) * 0x1.0p-112f;
    const float denormalized = qtk_bits_f32((two_w >> 17) | (UINT32_C(126) << 23)) - 0.5f;
    const uint32_t is_den = (uint32_t)0 - (uint32_t)(two_w < (UINT32_C(1) << 27));
    return qtk_bits_f32(sign | (qtk_f32_bits(denormalized) & is_den) |
                          (qtk_f32_bits(normalized) & ~is_den));
}

/* round to nearest even via float addition; NaN -> 0x7E00 */
static inline uint16_t qtk_f2h(float f)
{
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = qtk_f32_bits(f), shl1_w = w + w, sign = w & UINT32_C(0x80000000);
    uint32_t bias = shl1_w & UINT32_C(0xFF000000);
    if (bias < UINT32_C(0x71000000))
        bias = UINT32_C(0x71000000);
    base = qtk_bits_f32((bias >> 1) + UINT32_C(0x07800000)) + base;
    const uint32_t bits = qtk_f32_bits(base);
    const uint32_t nonsign = ((bits >> 13) & UINT32_C(0x00007C00)) + (bits & UINT32_C(0x00000FFF));
    return (uint16_t)((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? UINT32_C(0x7E00) : nonsign));
}

#endif
