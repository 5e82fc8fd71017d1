/* quant_k_avx2.c - the affine k-quant search (quant_k_aff.h) built for AVX2; the Makefile
 * compiles this file with -mavx2 on x86 and quant_k.c picks it at run time when the CPU has
 * AVX2. Results are identical to the generic build (see qv8 in quant.h). */
#define QTK_QUANT_IMPL
#include "quant.h"
#include "quant_k.h"

#if defined(__AVX2__)
#define QK_AFF_BLOCK qtk_aff_block_avx2
#include "quant_k_aff.h"
bool qtk_aff_have_avx2(void) { return true; }
#else
bool qtk_aff_have_avx2(void) { return false; }
void qtk_aff_block_avx2(const aff_cfg *c, const float *x, const float *w, bool uniform, aff_st *st)
{
    qtk_aff_block_c(c, x, w, uniform, st);
}
#endif
