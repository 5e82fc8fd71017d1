/* quant_asym_avx2.c - the q4_1/q5_1 search of two blocks (quant_asym.h) built for AVX2 and F16C;
 * the Makefile compiles this file with -mavx2 -mf16c on x86 and quant.c picks it at run time
 * when the CPU has both. Results are identical to the generic build (see qv8 and qv_qh16_4 in
 * quant.h). */
#define QTK_QUANT_IMPL
#include "quant.h"

#if defined(__AVX2__) && defined(__F16C__) && !defined(QTK_QV_PLAIN)
#define ASYM_PAIR qtk_asym_pair_avx2
#define ASYM_QH16_CHECK qtk_asym_qh16_check_avx2
#include "quant_asym.h"
bool qtk_asym_have_avx2(void) { return true; }
#else
bool qtk_asym_have_avx2(void) { return false; }
void qtk_asym_pair_avx2(const float *X, const float *W, const float *XR, const float *mn,
                        const float *mx, int nmax, bool search, const float *ref_d,
                        const float *ref_m, const float *RQ, float *Q, float *dout, float *mout)
{
    qtk_asym_pair_c(X, W, XR, mn, mx, nmax, search, ref_d, ref_m, RQ, Q, dout, mout);
}
uint64_t qtk_asym_qh16_check_avx2(uint32_t stride) { return qtk_asym_qh16_check_c(stride); }
#endif
