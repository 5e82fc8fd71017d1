/* dequant_f16c.c - F16 -> F32 with the F16C conversion instruction, eight values at a time.
 * The Makefile compiles this file with -mavx -mf16c on x86; dequant.c picks it at run time when
 * the CPU has F16C and QTK_SIMD is not "generic". The instruction converts every half exactly
 * and gives the same bits as qtk_h2f for all 65536 inputs, NaNs included (quieted, payload
 * kept, as the multiply in qtk_h2f does); test_dequant checks every one of them. */
#include "dequant.h"
#include "fp16.h"

#if defined(__F16C__) && defined(__AVX__) && !defined(QTK_QV_PLAIN)
#include <immintrin.h>

bool qtk_dq_f16c_built(void) { return true; }

void qtk_dq_f16_f16c(const uint8_t *restrict x, float *restrict y, uint64_t n)
{
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 2 * i))));
    for (; i < n; i++) { /* host is little-endian */
        uint16_t h;
        memcpy(&h, x + 2 * i, sizeof h);
        y[i] = qtk_h2f(h);
    }
}
#else
bool qtk_dq_f16c_built(void) { return false; }

void qtk_dq_f16_f16c(const uint8_t *restrict x, float *restrict y, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, x + 2 * i, sizeof h);
        y[i] = qtk_h2f(h);
    }
}
#endif
