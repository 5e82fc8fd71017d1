/* quant_sym_avx2.c - the candidate scales of the q4_0/q8_0 search (quant.c, sym_block_impl)
 * built for AVX2: two candidates per 8-lane vector, the lower four lanes one candidate's and
 * the upper four another's, each lane doing the generic build's operations in its order, so the
 * sums are the same bits. The Makefile compiles this file with -mavx2 on x86; quant.c picks it
 * at run time when qtk_simd_avx2. */
#define QTK_QUANT_IMPL
#include "quant.h"

#if defined(__AVX2__) && !defined(QTK_QV_PLAIN)
#include <immintrin.h>

bool qtk_sym_have_avx2(void) { return true; }

/* The generic (t0 + t2) + (t1 + t3) of each half (quant.h's qv_sum). */
static inline void sum_halves(__m256 v, float *lo, float *hi)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    *lo = (t[0] + t[2]) + (t[1] + t[3]);
    *hi = (t[4] + t[6]) + (t[5] + t[7]);
}

/* nk vectors (two candidates each, from cis[c]) over the block; nk and uni are constants in
 * each inlined copy, so the sums stay in registers. */
static inline __attribute__((always_inline)) void cands_n(const float *x, const float *w,
                                                         const float *wx, bool uni,
                                                         const float *cis, int c, int nc,
                                                         float lo, float hi, float *cxl,
                                                         float *cll, const int nk)
{
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi), m = _mm256_set1_ps(12582912.f);
    __m256 vis[4], a[4], b[4];
#pragma GCC unroll 4
    for (int k = 0; k < nk; k++) {
        const int c0 = c + 2 * k < nc ? c + 2 * k : c, c1 = c0 + 1 < nc ? c0 + 1 : c0;
        vis[k] = _mm256_setr_m128(_mm_set1_ps(cis[c0]), _mm_set1_ps(cis[c1]));
        a[k] = b[k] = _mm256_setzero_ps();
    }
    for (int i = 0; i < QTK_SYM_QB; i += 4) {
        const __m256 xv = _mm256_broadcast_ps((const __m128 *)(x + i));
        const __m256 wxv = _mm256_broadcast_ps((const __m128 *)(wx + i));
        const __m256 wv = uni ? xv : _mm256_broadcast_ps((const __m128 *)(w + i));
#pragma GCC unroll 4
        for (int k = 0; k < nk; k++) {
            const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(vis[k], xv), vlo), vhi);
            const __m256 l = _mm256_sub_ps(_mm256_add_ps(v, m), m);
            a[k] = _mm256_add_ps(a[k], _mm256_mul_ps(wxv, l));
            b[k] = _mm256_add_ps(b[k], _mm256_mul_ps(uni ? l : _mm256_mul_ps(wv, l), l));
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < nk; k++) {
        float a0, a1, b0, b1;
        sum_halves(a[k], &a0, &a1);
        sum_halves(b[k], &b0, &b1);
        if (c + 2 * k < nc) {
            cxl[c + 2 * k] = a0;
            cll[c + 2 * k] = b0;
        }
        if (c + 2 * k + 1 < nc) {
            cxl[c + 2 * k + 1] = a1;
            cll[c + 2 * k + 1] = b1;
        }
    }
}

void qtk_sym_cands_avx2(const float *x, const float *w, const float *wx, bool uni, const float *cis,
                        int nc, float lo, float hi, float *cxl, float *cll)
{
    for (int c = 0; c < nc; c += 8) {
        const int left = nc - c;
        if (left <= 2) {
            if (uni)
                cands_n(x, w, wx, true, cis, c, nc, lo, hi, cxl, cll, 1);
            else
                cands_n(x, w, wx, false, cis, c, nc, lo, hi, cxl, cll, 1);
        } else if (uni) {
            cands_n(x, w, wx, true, cis, c, nc, lo, hi, cxl, cll, 4);
        } else {
            cands_n(x, w, wx, false, cis, c, nc, lo, hi, cxl, cll, 4);
        }
    }
}
#else
bool qtk_sym_have_avx2(void) { return false; }
void qtk_sym_cands_avx2(const float *x, const float *w, const float *wx, bool uni, const float *cis,
                        int nc, float lo, float hi, float *cxl, float *cll)
{
    qtk_sym_cands_c(x, w, wx, uni, cis, nc, lo, hi, cxl, cll);
}
#endif
