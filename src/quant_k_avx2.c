/* quant_k_avx2.c - the affine k-quant search (quant_k_aff.h) and the q3_k/q6_k sub-block fits
 * (quant_k_symfit.h) built for AVX2; the Makefile compiles this file with -mavx2 on x86 and
 * quant_k.c picks it at run time when the CPU has AVX2. Results are identical to the generic
 * build (see qv8 in quant.h). */
#define QTK_QUANT_IMPL
#include "quant.h"
#include "quant_k.h"

#if defined(__AVX2__)
#define QK_AFF_BLOCK qtk_aff_block_avx2
#include "quant_k_aff.h"
#define SYM_FITS qtk_sym_fits_avx2
#include "quant_k_symfit.h"
bool qtk_aff_have_avx2(void) { return true; }
#else
bool qtk_aff_have_avx2(void) { return false; }
void qtk_aff_block_avx2(const aff_cfg *c, const float *x, const float *w, bool uniform, aff_st *st)
{
    qtk_aff_block_c(c, x, w, uniform, st);
}
void qtk_sym_fits_avx2(const sym_cfg *c, const float *x, const float *wo, bool q6, float *rs,
                       float *os)
{
    qtk_sym_fits_c(c, x, wo, q6, rs, os);
}
#endif
