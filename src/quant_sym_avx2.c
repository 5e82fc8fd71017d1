/* quant_sym_avx2.c - the q4_0/q5_0/q8_0 search of two blocks (quant_sym.h) built for AVX2: one
 * 256-bit register holds four values of each block, every lane doing the generic build's
 * operations in its order, so the results are the same bits. The Makefile compiles this file
 * with -mavx2 on x86; quant.c picks it at run time when qtk_simd_avx2. */
#define QTK_QUANT_IMPL
#include "quant.h"

#if defined(__AVX2__) && !defined(QTK_QV_PLAIN)
#define SYM_PAIR qtk_sym_pair_avx2
#include "quant_sym.h"
bool qtk_sym_have_avx2(void) { return true; }
#else
bool qtk_sym_have_avx2(void) { return false; }
void qtk_sym_pair_avx2(const qtk_sym_type *T, const float *x0, const float *x1, const float *w0,
                       const float *w1, float *q0, float *q1, float *d)
{
    qtk_sym_pair_c(T, x0, x1, w0, w1, q0, q1, d);
}
#endif
