/* quant_k_avx2.c - the affine k-quant search (quant_k_aff.h) and the q3_k/q6_k sub-block fits
 * (quant_k_symfit.h) and superblock search (quant_k_sym.h) built for AVX2; the Makefile compiles this file with -mavx2 on x86 and
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
#define SYM_BLOCK qtk_sym_block_avx2
#define SYM_REF_Q3 qtk_ref_q3_x16_avx2
#include "quant_k_sym.h"
bool qtk_aff_have_avx2(void) { return true; }

/* make_q3_quants of the sixteen sub-blocks of each of nsb superblocks (1 or 2; x holds them one
 * after the other, rs gets 16 scales each), lane j of register h the sub-block 8h + j: every
 * step is the scalar one (quant_k.c's ref_q3) on the lane's values, in its order. Each step
 * waits on the sums the step before may have changed, so the registers' chains (two per
 * superblock) run side by side: two superblocks at once keep more of them in flight. */
static inline __attribute__((always_inline)) void ref_q3_lanes(const float *x, float *rs, const int nsb)
{
    enum { MAXH = 4 };
    const int H = 2 * nsb, NJ = NSUB * nsb;
    float xt[SUB][8 * MAXH], wt[SUB][8 * MAXH], wxt[SUB][8 * MAXH], Lt[SUB][8 * MAXH];
    for (int j = 0; j < NJ; j++)
        for (int i = 0; i < SUB; i++) {
            const float v = x[j * SUB + i], w = v * v;
            xt[i][j] = v;
            wt[i][j] = w;
            wxt[i][j] = w * v;
        }
    const __m256 sgn = _mm256_set1_ps(-0.f), zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
    const __m256 lo = _mm256_set1_ps(-4.f), hi = _mm256_set1_ps(3.f), M = _mm256_set1_ps(12582912.f);
    __m256 live[MAXH], sumlx[MAXH], suml2[MAXH];
    for (int h = 0; h < H; h++) {
        /* the largest |x| (the first on a tie) and its value */
        __m256 amax = zero, max = zero;
        for (int i = 0; i < SUB; i++) {
            const __m256 v = _mm256_loadu_ps(xt[i] + 8 * h), av = _mm256_andnot_ps(sgn, v);
            const __m256 gt = _mm256_cmp_ps(av, amax, _CMP_GT_OQ);
            amax = _mm256_blendv_ps(amax, av, gt);
            max = _mm256_blendv_ps(max, v, gt);
        }
        live[h] = _mm256_cmp_ps(amax, _mm256_set1_ps(GROUP_EPS), _CMP_GE_OQ);
        /* dead lanes (all below GROUP_EPS) divide by 1 instead: their results are replaced */
        const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(-4.f), _mm256_blendv_ps(one, max, live[h]));
        __m256 slx = zero, sl2 = zero;
        for (int i = 0; i < SUB; i++) {
            const __m256 v = _mm256_mul_ps(iscale, _mm256_loadu_ps(xt[i] + 8 * h));
            const __m256 l = _mm256_sub_ps(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), M), M);
            _mm256_storeu_ps(Lt[i] + 8 * h, l);
            slx = _mm256_add_ps(slx, _mm256_mul_ps(_mm256_loadu_ps(wxt[i] + 8 * h), l));
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(wt[i] + 8 * h), l), l));
        }
        sumlx[h] = slx;
        suml2[h] = sl2;
    }
    for (int itry = 0; itry < 5; ++itry) {
        __m256 any = zero;
        for (int i = 0; i < SUB; i++)
            for (int h = 0; h < H; h++) {
                const __m256 xv = _mm256_loadu_ps(xt[i] + 8 * h), w = _mm256_loadu_ps(wt[i] + 8 * h);
                const __m256 wx = _mm256_loadu_ps(wxt[i] + 8 * h), L = _mm256_loadu_ps(Lt[i] + 8 * h);
                __m256 slx = _mm256_sub_ps(sumlx[h], _mm256_mul_ps(wx, L));
                const __m256 pos = _mm256_cmp_ps(slx, zero, _CMP_GT_OQ);
                __m256 sl2 = _mm256_sub_ps(suml2[h], _mm256_mul_ps(_mm256_mul_ps(w, L), L));
                const __m256 q = _mm256_div_ps(_mm256_mul_ps(xv, sl2), slx);
                /* lanes not taken may hold NaN here; they are discarded */
                const __m256 nl = _mm256_sub_ps(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(q, lo), hi), M), M);
                const __m256 ne = _mm256_and_ps(pos, _mm256_cmp_ps(nl, L, _CMP_NEQ_OQ));
                slx = _mm256_add_ps(slx, _mm256_mul_ps(wx, nl));
                sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, nl), nl));
                const __m256 better =
                    _mm256_cmp_ps(_mm256_mul_ps(_mm256_mul_ps(slx, slx), suml2[h]),
                                  _mm256_mul_ps(_mm256_mul_ps(sumlx[h], sumlx[h]), sl2), _CMP_GT_OQ);
                const __m256 take = _mm256_and_ps(_mm256_and_ps(ne, _mm256_cmp_ps(sl2, zero, _CMP_GT_OQ)), better);
                _mm256_storeu_ps(Lt[i] + 8 * h, _mm256_blendv_ps(L, nl, take));
                sumlx[h] = _mm256_blendv_ps(sumlx[h], slx, take);
                suml2[h] = _mm256_blendv_ps(suml2[h], sl2, take);
                any = _mm256_or_ps(any, take);
            }
        /* a try that changed no lane leaves every lane where the next would start: done (a
         * lane whose own try changed nothing runs further tries that change nothing either) */
        if (!_mm256_movemask_ps(any))
            break;
    }
    for (int h = 0; h < H; h++) {
        const __m256 has = _mm256_cmp_ps(suml2[h], zero, _CMP_GT_OQ);
        const __m256 sc = _mm256_div_ps(sumlx[h], _mm256_blendv_ps(one, suml2[h], has));
        _mm256_storeu_ps(rs + 8 * h, _mm256_and_ps(_mm256_and_ps(sc, has), live[h]));
    }
}

void qtk_ref_q3_x16_avx2(const float *x, float *rs)
{
    ref_q3_lanes(x, rs, 1);
}

void qtk_ref_q3_x32_avx2(const float *x, float *rs)
{
    ref_q3_lanes(x, rs, 2);
}
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
void qtk_ref_q3_x16_avx2(const float *x, float *rs) { qtk_ref_q3_x16_c(x, rs); }
void qtk_ref_q3_x32_avx2(const float *x, float *rs)
{
    qtk_ref_q3_x16_c(x, rs);
    qtk_ref_q3_x16_c(x + QK, rs + NSUB);
}
void qtk_sym_block_avx2(const sym_cfg *c, bool q6, const float *x, const float *w,
                        const float *wr, const float *rs, sym_st *st)
{
    qtk_sym_block_c(c, q6, x, w, wr, rs, st);
}
#endif
