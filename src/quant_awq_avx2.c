/* quant_awq_avx2.c - the AWQ/GPTQ group search's error sum and codes (quant_awq_ev.h) built for
 * AVX2; the Makefile compiles this file with -mavx2 on x86 and quant_awq.c picks it at run time
 * when the CPU has AVX2. The sums and codes are the generic build's bit for bit (quant_awq_ev.h
 * says why). */
#include "quant.h"

#include <stdbool.h>
#include <stdint.h>

#if defined(__AVX2__)
#include <immintrin.h>

/* the four low and four high floats of a register of eight, widened to double */
#define EV_PD_LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128((__m256)(v)))
#define EV_PD_HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps((__m256)(v), 1))
/* eight codes (integer-valued floats in [0, 255]) to bytes: truncated to int32, packed twice */
#define EV_STORE_CODES(p, q)                                                                       \
    do {                                                                                           \
        const __m256i i_ = _mm256_cvttps_epi32((__m256)(q));                                       \
        const __m128i w_ =                                                                         \
            _mm_packus_epi32(_mm256_castsi256_si128(i_), _mm256_extracti128_si256(i_, 1));         \
        _mm_storel_epi64((__m128i *)(void *)(p), _mm_packus_epi16(w_, w_));                        \
    } while (0)
/* some lane of a mask clear */
#define EV_ANY_CLEAR(m) (_mm256_movemask_ps((__m256)(m)) != 0xff)
#define EV_SUM qtk_awq_ev_sum_avx2
#define EV_CODES qtk_awq_ev_codes_avx2
#define EV_REFINE3 qtk_awq_ev_refine3_avx2
#define EV_WIDE
#include "quant_awq_ev.h"
bool qtk_awq_have_avx2(void) { return true; }
#else
bool qtk_awq_have_avx2(void) { return false; }
/* never called: qtk_awq_have_avx2() is false */
double qtk_awq_ev_sum_avx2(const float *x, const double *xd, uint32_t n, float s, float zf,
                           float mf, double limit)
{
    (void)x, (void)xd, (void)n, (void)s, (void)zf, (void)mf;
    return limit;
}
void qtk_awq_ev_codes_avx2(const float *x, const double *xd, uint32_t n, float s, float zf,
                           float mf, uint8_t *codes)
{
    (void)x, (void)xd, (void)n, (void)s, (void)zf, (void)mf, (void)codes;
}
void qtk_awq_ev_refine3_avx2(const float *x, const double *xd, uint32_t n, float s, float zf,
                             float mf, double abs_sum, double sxq[3], double sqq[3],
                             double err[2])
{
    (void)x, (void)xd, (void)n, (void)s, (void)zf, (void)mf, (void)abs_sum, (void)sxq, (void)sqq,
        (void)err;
}
#endif
