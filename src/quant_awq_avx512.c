/* quant_awq_avx512.c - the AWQ/GPTQ group search's error sum and codes (quant_awq_ev.h) built for
 * AVX-512 (F and DQ): sixteen float lanes, and the eight double lanes of the sums in one register.
 * The Makefile compiles this file with -mavx512f -mavx512dq on x86 and quant_awq.c picks it at
 * run time when the CPU has them (qtk_simd_avx512). Every operation is the element-wise IEEE one
 * of the other builds, and element j still goes into double lane j mod 8, added in the same
 * order, so the sums and codes are theirs bit for bit (quant_awq_ev.h). */
#include "quant.h"

#include <stdbool.h>
#include <stdint.h>

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>

/* VMAXPS / VMINPS return their second operand unless the first is greater (resp. less): the
 * clamps of quant_awq_ev.h in one instruction each, as in the AVX2 build */
#define EV_LO(c, v) ((ev_wf)_mm512_max_ps((__m512)(c), (__m512)(v)))
#define EV_HI(c, v) ((ev_wf)_mm512_min_ps((__m512)(c), (__m512)(v)))
/* the eight low and eight high floats of a register of sixteen, widened to double */
#define EV_PD_LO(v) ((ev_hd)_mm512_cvtps_pd(_mm512_castps512_ps256((__m512)(v))))
#define EV_PD_HI(v) ((ev_hd)_mm512_cvtps_pd(_mm512_extractf32x8_ps((__m512)(v), 1)))
/* sixteen codes (integer-valued floats in [0, 255]) to bytes */
#define EV_STORE_CODES(p, q)                                                                       \
    do {                                                                                           \
        const __m512i i_ = _mm512_cvttps_epi32((__m512)(q));                                       \
        _mm_storeu_si128((__m128i *)(void *)(p), _mm512_cvtepi32_epi8(i_));                        \
    } while (0)
/* some lane of a mask clear */
#define EV_ANY_CLEAR(m) (_mm512_movepi32_mask((__m512i)(m)) != 0xffff)
#define EV_SUM qtk_awq_ev_sum_avx512
#define EV_CODES qtk_awq_ev_codes_avx512
#define EV_REFINE3 qtk_awq_ev_refine3_avx512
#define EV_WIDE
#define EV_WIDE16
#include "quant_awq_ev.h"
bool qtk_awq_have_avx512(void) { return true; }
#else
bool qtk_awq_have_avx512(void) { return false; }
/* never called: qtk_awq_have_avx512() is false */
double qtk_awq_ev_sum_avx512(const float *x, const double *xd, uint32_t n, float s, float zf,
                             float mf, double limit)
{
    (void)x, (void)xd, (void)n, (void)s, (void)zf, (void)mf;
    return limit;
}
void qtk_awq_ev_codes_avx512(const float *x, const double *xd, uint32_t n, float s, float zf,
                             float mf, uint8_t *codes)
{
    (void)x, (void)xd, (void)n, (void)s, (void)zf, (void)mf, (void)codes;
}
void qtk_awq_ev_refine3_avx512(const float *x, const double *xd, uint32_t n, float s, float zf,
                               float mf, double abs_sum, double sxq[3], double sqq[3],
                               double err[2])
{
    (void)x, (void)xd, (void)n, (void)s, (void)zf, (void)mf, (void)abs_sum, (void)sxq, (void)sqq,
        (void)err;
}
#endif
