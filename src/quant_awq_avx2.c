/* quant_awq_avx2.c - the AWQ/GPTQ group search's error sum (quant_awq_ev.h) built for AVX2; the
 * Makefile compiles this file with -mavx2 on x86 and quant_awq.c picks it at run time when the
 * CPU has AVX2. The sum is the generic build's bit for bit (quant_awq_ev.h says why). */
#include "quant.h"

#include <stdbool.h>
#include <stdint.h>

double qtk_awq_ev_sum_avx2(const float *x, uint32_t n, float s, float zf, float mf, double limit);
void qtk_awq_ev_codes_avx2(const float *x, uint32_t n, float s, float zf, float mf, uint8_t *codes);
bool qtk_awq_have_avx2(void);

#if defined(__AVX2__)
#define EV_SUM qtk_awq_ev_sum_avx2
#define EV_CODES qtk_awq_ev_codes_avx2
#define EV_WIDE
#include "quant_awq_ev.h"
bool qtk_awq_have_avx2(void) { return true; }
#else
bool qtk_awq_have_avx2(void) { return false; }
double qtk_awq_ev_sum_avx2(const float *x, uint32_t n, float s, float zf, float mf, double limit)
{
    (void)x, (void)n, (void)s, (void)zf, (void)mf;
    return limit; /* never called: qtk_awq_have_avx2() is false */
}
void qtk_awq_ev_codes_avx2(const float *x, uint32_t n, float s, float zf, float mf, uint8_t *codes)
{
    (void)x, (void)n, (void)s, (void)zf, (void)mf, (void)codes;
}
#endif
