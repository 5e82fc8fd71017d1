/* dequant_f16c.c - F16 -> F32 with the F16C conversion instruction, eight values at a time.
 * The Makefile compiles this file with -mavx -mf16c on x86; dequant.c picks it at run time when
 * the CPU has F16C and QTK_SIMD is not "generic". The instruction converts every half exactly
 * and gives the same bits as qtk_h2f for all 65536 inputs, NaNs included (quieted, payload
 * kept, as the multiply in qtk_h2f does); test_dequant checks every one of them. */
#include "dequant.h"
#include "fp16.h"

#if defined(__F16C__) && defined(__AVX__) && !defined(QTK_QV_PLAIN)
#include <immintrin.h>
#define DQ_F16C 1
#else
#define DQ_F16C 0
#endif

bool qtk_dq_f16c_built(void) { return DQ_F16C; }

void qtk_dq_f16_f16c(const uint8_t *restrict x, float *restrict y, uint64_t n)
{
    uint64_t i = 0;
#if DQ_F16C
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + 2 * i))));
#endif
    for (; i < n; i++) { /* the tail, or all of it without F16C; host is little-endian */
        uint16_t h;
        memcpy(&h, x + 2 * i, sizeof h);
        y[i] = qtk_h2f(h);
    }
}
