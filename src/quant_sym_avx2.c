/* quant_sym_avx2.c - the q4_0/q5_0/q8_0 search of two blocks (quant_sym.h) built for AVX2: one
 * 256-bit register holds four values of each block, every lane doing the generic build's
 * operations in its order, so the results are the same bits. The Makefile compiles this file
 * with -mavx2 -mf16c on x86; quant.c picks it at run time when qtk_simd_avx2. Without weights,
 * eight blocks at once, one per lane (qtk_sym_oct_avx2, below; also needs qtk_cpu_f16c). */
#define QTK_QUANT_IMPL
#include "quant.h"

#include <float.h>

#if defined(__AVX2__) && !defined(QTK_QV_PLAIN)
#define SYM_PAIR qtk_sym_pair_avx2
#include "quant_sym.h"
bool qtk_sym_have_avx2(void) { return true; }

/* ---- eight blocks, one per lane ------------------------------------------------------------
 * The uniform-weight search of eight blocks at once, block b in lane b of every register: the
 * values turned into columns (XT[i] holds element i of the eight blocks), each lane doing what
 * quant_sym.h's search does for its block, operation for operation: element i's terms go to
 * accumulator i%4 (the pair search's lane i%4), the four folded in qv_sum's order, candidates
 * ranked in double with the same first-best rule, the least-squares rounds run while any lane
 * still runs and a stopped lane's results left unread. So a block gets the same bytes here as
 * in a pair (tests/data/simd_digest.expected). The per-block branches become masks, and no
 * value leaves its lane until the codes are turned back into rows. */
#if defined(__F16C__)
typedef struct {
    __m256 e, sxl, sll; /* decoded error, sum x*l, sum l*l */
} oct_sums;

/* qv_qh16 in every lane (qv_qh16_4's conversion instructions) */
static inline __m256 oct_qh16(__m256 f)
{
    f = _mm256_and_ps(f, _mm256_cmp_ps(f, f, _CMP_ORD_Q));
    f = _mm256_max_ps(_mm256_min_ps(f, _mm256_set1_ps(65504.f)), _mm256_set1_ps(-65504.f));
    return _mm256_cvtph_ps(_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static inline __m256 oct_blend(__m256 a, __m256 b, __m256 m) { return _mm256_blendv_ps(a, b, m); }
static inline bool oct_any(__m256 m) { return _mm256_movemask_ps(m) != 0; }

/* (float)((double)n / (double)d) in every lane */
static inline __m256 oct_divd(__m256 n, __m256 d)
{
    return qv8_from_pd(_mm256_div_pd(qv8_pd_half(n, 0), qv8_pd_half(d, 0)),
                       _mm256_div_pd(qv8_pd_half(n, 1), qv8_pd_half(d, 1)));
}

/* codes round(x/d) clamped to [lo, hi] (reciprocal; 0 when d is 0) into Q with their sums:
 * sp_pass */
static inline __attribute__((always_inline)) oct_sums oct_pass(const __m256 *XT, __m256 d,
                                                               __m256 lo, __m256 hi, __m256 *Q)
{
    const __m256 z = _mm256_setzero_ps();
    const __m256 id = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.f), d),
                                    _mm256_cmp_ps(d, z, _CMP_NEQ_OQ));
    __m256 ea[4] = { z, z, z, z }, a[4] = { z, z, z, z }, b[4] = { z, z, z, z };
    for (int i0 = 0; i0 < QTK_SYM_QB; i0 += 4)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const __m256 xv = XT[i0 + j];
            const __m256 l = qv8_round(qv8_min(qv8_max(qv8_mul(xv, id), lo), hi));
            Q[i0 + j] = l;
            const __m256 diff = qv8_sub(qv8_mul(l, d), xv);
            ea[j] = qv8_add(ea[j], qv8_mul(diff, diff));
            a[j] = qv8_add(a[j], qv8_mul(xv, l));
            b[j] = qv8_add(b[j], qv8_mul(l, l));
        }
    return (oct_sums){ qv8_fold4(ea), qv8_fold4(a), qv8_fold4(b) };
}

/* sp_lloyd in every lane with run_in set: alternate least-squares d (fp16) and codes, each lane
 * keeping its best state; returns the lanes that ran all iters steps */
static inline __attribute__((always_inline)) __m256 oct_lloyd(const __m256 *XT, __m256 lo,
                                                              __m256 hi, int iters, __m256 run,
                                                              __m256 *Q, __m256 *d, oct_sums *s)
{
    const __m256 z = _mm256_setzero_ps();
    __m256 t[QTK_SYM_QB];
    for (int it = 0; it < iters && oct_any(run); it++) {
        run = _mm256_and_ps(run, _mm256_cmp_ps(s->sll, z, _CMP_GT_OQ));
        const __m256 dn = _mm256_and_ps(run, oct_qh16(oct_divd(s->sxl, s->sll)));
        if (it > 0)
            run = _mm256_andnot_ps(_mm256_cmp_ps(dn, *d, _CMP_EQ_OQ), run);
        if (!oct_any(run))
            break;
        const oct_sums n = oct_pass(XT, dn, lo, hi, t);
        run = _mm256_and_ps(run, _mm256_cmp_ps(n.e, s->e, _CMP_LT_OQ));
        s->e = oct_blend(s->e, n.e, run);
        s->sxl = oct_blend(s->sxl, n.sxl, run);
        s->sll = oct_blend(s->sll, n.sll, run);
        *d = oct_blend(*d, dn, run);
        for (int i = 0; i < QTK_SYM_QB; i++)
            Q[i] = oct_blend(Q[i], t[i], run);
    }
    return run;
}

void qtk_sym_oct_avx2(const qtk_sym_type *T, const float *x, float *q, float *dout)
{
    __m256 XT[QTK_SYM_QB], Q[QTK_SYM_QB];
    qv8_cols32(x, XT);
    const __m256 z = _mm256_setzero_ps(), sgn = _mm256_set1_ps(-0.f);
    /* the largest |x| and the first value attaining it (0 for an all-zero block): sp_amax */
    __m256 amax = z;
    for (int i = 0; i < QTK_SYM_QB; i++)
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sgn, XT[i]));
    __m256 max = z;
    for (int i = QTK_SYM_QB - 1; i >= 0; i--)
        max = oct_blend(max, XT[i], _mm256_cmp_ps(_mm256_andnot_ps(sgn, XT[i]), amax, _CMP_EQ_OQ));
    max = _mm256_and_ps(max, _mm256_cmp_ps(amax, z, _CMP_GT_OQ));

    /* ggml's reference choice: sp_ref */
    const __m256 dd = T->half ? _mm256_div_ps(max, _mm256_set1_ps((float)-T->half))
                              : _mm256_div_ps(amax, _mm256_set1_ps(127.f));
    const __m256 rid = _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.f), dd),
                                     _mm256_cmp_ps(dd, z, _CMP_NEQ_OQ));
    __m256 bd = oct_qh16(dd);
    oct_sums bs;
    {
        const __m256 off = _mm256_set1_ps((float)T->half + 0.5f);
        const __m256 top = _mm256_set1_ps((float)(2 * T->half - 1)), vh = _mm256_set1_ps((float)T->half);
        const __m256 lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
        __m256 ea[4] = { z, z, z, z }, a[4] = { z, z, z, z }, b[4] = { z, z, z, z };
        for (int i0 = 0; i0 < QTK_SYM_QB; i0 += 4)
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256 xv = XT[i0 + j];
                const __m256 l = T->half ? qv8_sub(qv8_trunc(qv8_min(qv8_max(qv8_add(qv8_mul(xv, rid), off), z), top)), vh)
                                         : qv8_roundf(qv8_min(qv8_max(qv8_mul(xv, rid), lo), hi));
                Q[i0 + j] = l;
                const __m256 diff = qv8_sub(qv8_mul(l, bd), xv);
                ea[j] = qv8_add(ea[j], qv8_mul(diff, diff));
                a[j] = qv8_add(a[j], qv8_mul(xv, l));
                b[j] = qv8_add(b[j], qv8_mul(l, l));
            }
        bs = (oct_sums){ qv8_fold4(ea), qv8_fold4(a), qv8_fold4(b) };
    }
    const __m256 act = _mm256_andnot_ps(_mm256_or_ps(_mm256_cmp_ps(amax, z, _CMP_EQ_OQ),
                                                     _mm256_cmp_ps(bs.e, z, _CMP_EQ_OQ)),
                                        _mm256_castsi256_ps(_mm256_set1_epi32(-1)));
    const __m256 flo = _mm256_set1_ps((float)T->lo), fhi = _mm256_set1_ps((float)T->hi);
    if (T->nstep > 0 && oct_any(act)) {
        /* the first best candidate's inverse scale and sums, by score sxl^2 / sll in double */
        const __m256d m1 = _mm256_set1_pd(-1.0);
        __m256d best[2] = { m1, m1 };
        __m256 cis_b = z, cxl_b = z, cll_b = z;
        for (int o = 0; o < 2; o++)
            for (int k = 0; k < T->nstep; k++) {
                const float lev = o == 0 ? (float)T->lo - (T->d0 + T->step * (float)k)
                                         : (float)T->hi + (T->d0 + T->step * (float)k);
                const __m256 cis = _mm256_and_ps(act, _mm256_div_ps(_mm256_set1_ps(lev), max));
                __m256 a[4] = { z, z, z, z }, b[4] = { z, z, z, z };
                for (int i0 = 0; i0 < QTK_SYM_QB; i0 += 4)
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++) {
                        const __m256 xv = XT[i0 + j];
                        const __m256 l = qv8_round(qv8_min(qv8_max(qv8_mul(cis, xv), flo), fhi));
                        a[j] = qv8_add(a[j], qv8_mul(xv, l));
                        b[j] = qv8_add(b[j], qv8_mul(l, l));
                    }
                const __m256 cxl = qv8_fold4(a), cll = qv8_fold4(b);
                const __m256 pos = _mm256_cmp_ps(cll, z, _CMP_GT_OQ);
                const __m256 num = _mm256_and_ps(pos, cxl);
                const __m256 den = oct_blend(_mm256_set1_ps(1.f), cll, pos);
                __m256d w[2];
                for (int h = 0; h < 2; h++) {
                    const __m128 nh = h ? _mm256_extractf128_ps(num, 1) : _mm256_castps256_ps128(num);
                    const __m128 dh = h ? _mm256_extractf128_ps(den, 1) : _mm256_castps256_ps128(den);
                    const __m128 ph = h ? _mm256_extractf128_ps(pos, 1) : _mm256_castps256_ps128(pos);
                    const __m256d nd = _mm256_cvtps_pd(nh);
                    const __m256d sc = _mm256_div_pd(_mm256_mul_pd(nd, nd), _mm256_cvtps_pd(dh));
                    const __m256d win = _mm256_cmp_pd(sc, best[h], _CMP_GT_OQ);
                    best[h] = _mm256_blendv_pd(best[h], sc, _mm256_and_pd(win, _mm256_cvtps_pd(ph)));
                    w[h] = win;
                }
                const __m256 win = _mm256_and_ps(_mm256_and_ps(act, pos), qv8_pd_mask(w[0], w[1]));
                cis_b = oct_blend(cis_b, cis, win);
                cxl_b = oct_blend(cxl_b, cxl, win);
                cll_b = oct_blend(cll_b, cll, win);
            }
        const __m256d zd = _mm256_setzero_pd();
        const __m256 run = _mm256_and_ps(act, qv8_pd_mask(_mm256_cmp_pd(best[0], zd, _CMP_GT_OQ),
                                                        _mm256_cmp_pd(best[1], zd, _CMP_GT_OQ)));
        __m256 more = act;
        if (oct_any(run)) {
            __m256 LB[QTK_SYM_QB];
            const __m256 vis = _mm256_and_ps(run, cis_b);
            for (int i = 0; i < QTK_SYM_QB; i++)
                LB[i] = qv8_round(qv8_min(qv8_max(qv8_mul(vis, XT[i]), flo), fhi));
            oct_sums s = { _mm256_set1_ps(FLT_MAX), _mm256_and_ps(run, cxl_b), _mm256_and_ps(run, cll_b) };
            __m256 d = z;
            const __m256 full = oct_lloyd(XT, flo, fhi, T->iters1, run, LB, &d, &s);
            const __m256 better = _mm256_and_ps(run, _mm256_cmp_ps(s.e, bs.e, _CMP_LT_OQ));
            more = oct_blend(more, full, better);
            bs.e = oct_blend(bs.e, s.e, better);
            bs.sxl = oct_blend(bs.sxl, s.sxl, better);
            bs.sll = oct_blend(bs.sll, s.sll, better);
            bd = oct_blend(bd, d, better);
            for (int i = 0; i < QTK_SYM_QB; i++)
                Q[i] = oct_blend(Q[i], LB[i], better);
        }
        if (T->iters2)
            oct_lloyd(XT, flo, fhi, T->iters2, more, Q, &bd, &bs);
    }
    qv8_rows32(Q, q);
    _mm256_storeu_ps(dout, bd);
}
bool qtk_sym_have_oct_avx2(void) { return true; }
#else
bool qtk_sym_have_oct_avx2(void) { return false; }
void qtk_sym_oct_avx2(const qtk_sym_type *T, const float *x, float *q, float *d)
{
    (void)T, (void)x, (void)q, (void)d;
}
#endif
#else
bool qtk_sym_have_avx2(void) { return false; }
void qtk_sym_pair_avx2(const qtk_sym_type *T, const float *x0, const float *x1, const float *w0,
                       const float *w1, float *q0, float *q1, float *d)
{
    qtk_sym_pair_c(T, x0, x1, w0, w1, q0, q1, d);
}
bool qtk_sym_have_oct_avx2(void) { return false; }
void qtk_sym_oct_avx2(const qtk_sym_type *T, const float *x, float *q, float *d)
{
    (void)T, (void)x, (void)q, (void)d;
}
#endif
