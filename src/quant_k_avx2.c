/* quant_k_avx2.c - the affine k-quant search (quant_k_aff.h) and the q3_k/q6_k sub-block fits
 * (quant_k_symfit.h) and superblock search (quant_k_sym.h) built for AVX2; the Makefile compiles
 * this file with -mavx2 on x86 and quant_k.c picks it at run time when the CPU has AVX2. For
 * q3_k (weights all ones) the sub-block fits and the first refinement pass also run with one
 * sub-block per lane (ref_q3_lanes, q3_refine_lanes), and so do q6_k's sub-block fits
 * (q6_fits_lanes) and the candidate sweep of q4_k's and q5_k's eight sub-blocks of 32
 * (aff_fit_lanes), with any weights, each lane repeating the
 * generic build's operations in their order. Results are identical to the generic build (see
 * qv8 in quant.h). */
#define QTK_QUANT_IMPL
#include "quant.h"
#include "quant_k.h"

#if defined(__AVX2__)
static void aff_fit_lanes(const aff_cfg *c, const float *x, const float *w, bool own, float *rs,
                          float *rm, float *os, float *om);
#define AFF_FIT_LANES aff_fit_lanes
#define QK_AFF_BLOCK qtk_aff_block_avx2
#include "quant_k_aff.h"
#define SYM_FITS qtk_sym_fits_avx2
#include "quant_k_symfit.h"
static void q3_refine_lanes(const sym_cfg *c, const float *x, const float *w, const float *wr,
                            float *cap, sym_st *st);
static void q6_fits_lanes(const sym_cfg *c, const float *x, const float *w, float *rs, float *os);
#define SYM_FITS_Q6_LANES q6_fits_lanes
#define SYM_BLOCK qtk_sym_block_avx2
#define SYM_REF_Q3 qtk_ref_q3_x16_avx2
#define SYM_REFINE_Q3 q3_refine_lanes
#include "quant_k_sym.h"
bool qtk_aff_have_avx2(void) { return true; }

/* make_q3_quants of the sixteen sub-blocks of each of nsb superblocks (x holds them one after
 * the other, rs gets 16 scales each), lane j of register r the sub-block 8r + j: every step is
 * the scalar one (quant_k.c's ref_q3) on the lane's values, in its order.
 *
 * Each step waits on the sums the step before may have changed, so SLOTS registers' chains run
 * side by side. A register leaves its slot after its fifth pass or after a pass that changed
 * none of its lanes (a lane whose pass changed nothing would change nothing in any further
 * pass), and the next register takes the slot: the registers still at work are always SLOTS
 * side by side. (Two superblocks' registers run their passes in lock step until all four were
 * done: 3.2 passes each on the bench matrix, where each needs 2.3.) */
enum { REF_Q3_SLOTS = 4 };

typedef struct {
    __m256 x[SUB], w[SUB], wx[SUB], L[SUB];
} ref_q3_reg;

/* one step of make_q3_quants' pass (value i) on register g, its sums in *sx, *s2; true when a
 * lane took the new code */
static inline __attribute__((always_inline)) __m256 ref_q3_step(ref_q3_reg *g, int i, __m256 *sx,
                                                                __m256 *s2)
{
    const __m256 zero = _mm256_setzero_ps(), lo = _mm256_set1_ps(-4.f), hi = _mm256_set1_ps(3.f);
    const __m256 M = _mm256_set1_ps(12582912.f);
    const __m256 xv = g->x[i], w = g->w[i], wx = g->wx[i], L = g->L[i];
    __m256 slx = _mm256_sub_ps(*sx, _mm256_mul_ps(wx, L));
    const __m256 pos = _mm256_cmp_ps(slx, zero, _CMP_GT_OQ);
    __m256 sl2 = _mm256_sub_ps(*s2, _mm256_mul_ps(_mm256_mul_ps(w, L), L));
    const __m256 q = _mm256_div_ps(_mm256_mul_ps(xv, sl2), slx);
    /* lanes not taken may hold NaN here; they are discarded */
    const __m256 nl = _mm256_sub_ps(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(q, lo), hi), M), M);
    const __m256 ne = _mm256_and_ps(pos, _mm256_cmp_ps(nl, L, _CMP_NEQ_OQ));
    slx = _mm256_add_ps(slx, _mm256_mul_ps(wx, nl));
    sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(w, nl), nl));
    const __m256 better = _mm256_cmp_ps(_mm256_mul_ps(_mm256_mul_ps(slx, slx), *s2),
                                        _mm256_mul_ps(_mm256_mul_ps(*sx, *sx), sl2), _CMP_GT_OQ);
    const __m256 take = _mm256_and_ps(_mm256_and_ps(ne, _mm256_cmp_ps(sl2, zero, _CMP_GT_OQ)), better);
    g->L[i] = _mm256_blendv_ps(L, nl, take);
    *sx = _mm256_blendv_ps(*sx, slx, take);
    *s2 = _mm256_blendv_ps(*s2, sl2, take);
    return take;
}

/* Ours (quant_k_symfit.h's q3_k fit under weights 1, which are q3_k's whenever it searches) of
 * the eight sub-blocks of register g, whose largest |x| is max (lanes not live: 0), in *os, ggml's
 * in rs the fallback: lane j does the four-lane sweeps of sym_sweep2_x4 in four partial sums per
 * quantity (sum k holds the values i = k mod 4, in their order) and adds them up as qv8_sum4h
 * does; candidates are judged in their order in double, as sym_ours_try_n. */
/* round half to even; a code of -0 where the scalar sweep has +0 changes no sum (x*l is then a
 * zero, and sums that start at +0 stay +0 until a nonzero term) */
#define OURS_ROUND(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* sym_ours_try_n's judgement of one candidate in four lanes: its sums s0, s1 in double; the best
 * score so far in *best, its sums in *b0, *b1 */
static inline __attribute__((always_inline)) void ours_judge(__m128 s0, __m128 s1, __m256d *best,
                                                             __m256d *b0, __m256d *b1)
{
    const __m256d d0 = _mm256_cvtps_pd(s0), d1 = _mm256_cvtps_pd(s1);
    const __m256d pos = _mm256_cmp_pd(d1, _mm256_setzero_pd(), _CMP_GT_OQ);
    const __m256d num = _mm256_and_pd(pos, _mm256_mul_pd(d0, d0));
    const __m256d den = _mm256_blendv_pd(_mm256_set1_pd(1.0), d1, pos);
    const __m256d sc = _mm256_div_pd(num, den);
    const __m256d win = _mm256_and_pd(pos, _mm256_cmp_pd(sc, *best, _CMP_GT_OQ));
    *best = _mm256_blendv_pd(*best, sc, win);
    *b0 = _mm256_blendv_pd(*b0, d0, win);
    *b1 = _mm256_blendv_pd(*b1, d1, win);
}

static inline void ours_q3_lanes(const ref_q3_reg *g, __m256 max, __m256 live, __m256 rs, __m256 *os)
{
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
    const __m256 lo = _mm256_set1_ps(-4.f), hi = _mm256_set1_ps(3.f);
    const __m256 mx = _mm256_blendv_ps(one, max, live);
    __m256d best0 = _mm256_set1_pd(-1.0), best1 = best0;
    __m256d b00 = _mm256_setzero_pd(), b01 = b00, b10 = b00, b11 = b00;
    for (int c = 0; c < 12; c++) {
        const float off = 0.2f * (float)(c / 2) - 0.5f;
        const __m256 is = _mm256_div_ps(_mm256_set1_ps(c % 2 ? 3.f + off : -4.f - off), mx);
        /* sum x*l in four partial sums; sum l*l is a small integer, exact in any order */
        __m256 p0 = zero, p1 = zero, p2 = zero, p3 = zero, s1 = zero;
#define OURS_STEP(p, i)                                                                            \
    do {                                                                                           \
        const __m256 xv = g->x[i];                                                                 \
        const __m256 l = OURS_ROUND(_mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(is, xv), lo), hi));  \
        p = _mm256_add_ps(p, _mm256_mul_ps(xv, l));                                                \
        s1 = _mm256_add_ps(s1, _mm256_mul_ps(l, l));                                               \
    } while (0)
        for (int m = 0; m < SUB; m += 4) {
            OURS_STEP(p0, m);
            OURS_STEP(p1, m + 1);
            OURS_STEP(p2, m + 2);
            OURS_STEP(p3, m + 3);
        }
#undef OURS_STEP
        const __m256 s0 = _mm256_add_ps(_mm256_add_ps(p0, p2), _mm256_add_ps(p1, p3));
        ours_judge(_mm256_castps256_ps128(s0), _mm256_castps256_ps128(s1), &best0, &b00, &b10);
        ours_judge(_mm256_extractf128_ps(s0, 1), _mm256_extractf128_ps(s1, 1), &best1, &b01, &b11);
    }
    const __m256d best[2] = { best0, best1 }, b0[2] = { b00, b01 }, b1[2] = { b10, b11 };
    __m128 o[2], use[2];
    const __m256i lo32 = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int h = 0; h < 2; h++) {
        const __m256d ok = _mm256_cmp_pd(best[h], _mm256_setzero_pd(), _CMP_GT_OQ);
        /* lanes without a winner divide 0 by 1 instead: their results are replaced */
        o[h] = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_and_pd(ok, b0[h]),
                                             _mm256_blendv_pd(_mm256_set1_pd(1.0), b1[h], ok)));
        /* the four 64-bit masks as 32-bit ones */
        use[h] = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(_mm256_castpd_ps(ok), lo32));
    }
    const __m256 ov = _mm256_set_m128(o[1], o[0]), okv = _mm256_set_m128(use[1], use[0]);
    *os = _mm256_and_ps(live, _mm256_blendv_ps(rs, ov, okv));
}

/* t[i] lane j = p[j * SUB + i], i, j < 8: eight rows of a sub-block matrix turned into columns */
static inline void transpose8(const float *p, __m256 *t)
{
    for (int j = 0; j < 8; j++)
        t[j] = _mm256_loadu_ps(p + j * SUB);
    qv8_tr8(t);
}

/* out: nsb superblocks' 16 ggml scales each or, with ours, 32 each (ggml's 16, then ours) */
static void ref_q3_lanes(const float *x, float *out, int nsb, bool ours)
{
    ref_q3_reg g[2 * REF_Q3_MAXSB];
    __m256 live[2 * REF_Q3_MAXSB], amx[2 * REF_Q3_MAXSB], sumlx[2 * REF_Q3_MAXSB], suml2[2 * REF_Q3_MAXSB];
    const int R = 2 * nsb;
    const __m256 sgn = _mm256_set1_ps(-0.f), zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
    const __m256 lo = _mm256_set1_ps(-4.f), hi = _mm256_set1_ps(3.f), M = _mm256_set1_ps(12582912.f);
    for (int r = 0; r < R; r++) {
        ref_q3_reg *gr = &g[r];
        transpose8(x + 8 * r * SUB, gr->x);
        transpose8(x + 8 * r * SUB + 8, gr->x + 8);
        /* the largest |x| (the first on a tie) and its value */
        __m256 amax = zero, max = zero;
        for (int i = 0; i < SUB; i++) {
            const __m256 v = gr->x[i], av = _mm256_andnot_ps(sgn, v);
            const __m256 w = _mm256_mul_ps(v, v);
            gr->w[i] = w;
            gr->wx[i] = _mm256_mul_ps(w, v);
            const __m256 gt = _mm256_cmp_ps(av, amax, _CMP_GT_OQ);
            amax = _mm256_blendv_ps(amax, av, gt);
            max = _mm256_blendv_ps(max, v, gt);
        }
        live[r] = _mm256_cmp_ps(amax, _mm256_set1_ps(GROUP_EPS), _CMP_GE_OQ);
        amx[r] = max;
        /* dead lanes (all below GROUP_EPS) divide by 1 instead: their results are replaced */
        const __m256 iscale = _mm256_div_ps(_mm256_set1_ps(-4.f), _mm256_blendv_ps(one, max, live[r]));
        __m256 slx = zero, sl2 = zero;
        for (int i = 0; i < SUB; i++) {
            const __m256 v = _mm256_mul_ps(iscale, gr->x[i]);
            const __m256 l = _mm256_sub_ps(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), M), M);
            gr->L[i] = l;
            slx = _mm256_add_ps(slx, _mm256_mul_ps(gr->wx[i], l));
            sl2 = _mm256_add_ps(sl2, _mm256_mul_ps(_mm256_mul_ps(gr->w[i], l), l));
        }
        sumlx[r] = slx;
        suml2[r] = sl2;
    }
    /* slot k works on register reg[k] (-1: none left), in its pass tries[k] */
    int reg[REF_Q3_SLOTS], tries[REF_Q3_SLOTS], next = 0;
    __m256 sx[REF_Q3_SLOTS], s2[REF_Q3_SLOTS];
    for (int k = 0; k < REF_Q3_SLOTS; k++) {
        reg[k] = next < R ? next++ : -1;
        tries[k] = 0;
        sx[k] = reg[k] >= 0 ? sumlx[reg[k]] : zero;
        s2[k] = reg[k] >= 0 ? suml2[reg[k]] : zero;
    }
    for (;;) {
        __m256 any[REF_Q3_SLOTS];
        if (reg[0] >= 0 && reg[1] >= 0 && reg[2] >= 0 && reg[3] >= 0) {
            ref_q3_reg *g0 = &g[reg[0]], *g1 = &g[reg[1]], *g2 = &g[reg[2]], *g3 = &g[reg[3]];
            __m256 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
            for (int i = 0; i < SUB; i++) {
                a0 = _mm256_or_ps(a0, ref_q3_step(g0, i, &sx[0], &s2[0]));
                a1 = _mm256_or_ps(a1, ref_q3_step(g1, i, &sx[1], &s2[1]));
                a2 = _mm256_or_ps(a2, ref_q3_step(g2, i, &sx[2], &s2[2]));
                a3 = _mm256_or_ps(a3, ref_q3_step(g3, i, &sx[3], &s2[3]));
            }
            any[0] = a0, any[1] = a1, any[2] = a2, any[3] = a3;
        } else {
            bool busy = false;
            for (int k = 0; k < REF_Q3_SLOTS; k++) {
                any[k] = zero;
                if (reg[k] < 0)
                    continue;
                busy = true;
                for (int i = 0; i < SUB; i++)
                    any[k] = _mm256_or_ps(any[k], ref_q3_step(&g[reg[k]], i, &sx[k], &s2[k]));
            }
            if (!busy)
                break;
        }
        for (int k = 0; k < REF_Q3_SLOTS; k++) {
            if (reg[k] < 0 || (++tries[k] < 5 && _mm256_movemask_ps(any[k])))
                continue;
            sumlx[reg[k]] = sx[k];
            suml2[reg[k]] = s2[k];
            reg[k] = next < R ? next++ : -1;
            tries[k] = 0;
            if (reg[k] >= 0)
                sx[k] = sumlx[reg[k]], s2[k] = suml2[reg[k]];
        }
    }
    for (int r = 0; r < R; r++) {
        const __m256 has = _mm256_cmp_ps(suml2[r], zero, _CMP_GT_OQ);
        const __m256 sc = _mm256_div_ps(sumlx[r], _mm256_blendv_ps(one, suml2[r], has));
        const __m256 rs = _mm256_and_ps(_mm256_and_ps(sc, has), live[r]);
        float *o = ours ? out + (r / 2) * 2 * NSUB + (r % 2) * 8 : out + 8 * r;
        _mm256_storeu_ps(o, rs);
        if (ours) {
            __m256 os;
            ours_q3_lanes(&g[r], amx[r], live[r], rs, &os);
            _mm256_storeu_ps(o + NSUB, os);
        }
    }
}

void qtk_ref_q3_x16_avx2(const float *x, float *rs)
{
    ref_q3_lanes(x, rs, 1, false);
}

/* q3_k's sym_refine with weights all ones (w, used only by the second passes): the first pass of
 * sym_refine_sub for all sixteen sub-blocks at once, one sub-block per lane, then each
 * sub-block's choices judged in order as there, and its second pass (when the first changed
 * it) by sym_refine_sub itself. A sub-block's first-pass candidates depend only on its own
 * codes, sub-scale and d, which nothing before its turn changes; only the judging (the cap on
 * the error under wr, summed over all sub-blocks) must run in order. Every value is computed
 * with sym_refine_sub's operations in its order (lsum2's and qv_sum's partial sums), so the
 * codes are the same bits. */
static void q3_refine_lanes(const sym_cfg *c, const float *x, const float *w, const float *wr,
                            float *cap, sym_st *st)
{
    enum { NC = 5 };
    if (st->d == 0.f)
        return;
    const float d = st->d;
    const __m256 zero = _mm256_setzero_ps(), M = _mm256_set1_ps(12582912.f);
    const __m256 lo = _mm256_set1_ps((float)c->lo), hi = _mm256_set1_ps((float)c->hi);
    const __m256 lo5 = _mm256_set1_ps((float)c->lo - 0.5f), hi5 = _mm256_set1_ps((float)c->hi + 0.5f);
    const __m256i slo = _mm256_set1_epi32(c->slo), shi = _mm256_set1_epi32(c->shi);
    /* per sub-block j = 8h + lane: candidate k's sub-scale, whether it is tried, its errors */
    int cand[NC][NSUB], ok[NC][NSUB];
    float E[NC][NSUB], R[NC][NSUB];
    __m256 T[2][NC][SUB]; /* candidate codes, lanes = sub-blocks */
    for (int h = 0; h < 2; h++) {
        __m256 X[SUB], WR[SUB], L[SUB];
        transpose8(x + 8 * h * SUB, X);
        transpose8(x + 8 * h * SUB + 8, X + 8);
        transpose8(wr + 8 * h * SUB, WR);
        transpose8(wr + 8 * h * SUB + 8, WR + 8);
        transpose8(st->L + 8 * h * SUB, L);
        transpose8(st->L + 8 * h * SUB + 8, L + 8);
        const __m256i s0 = _mm256_loadu_si256((const __m256i *)(const void *)(st->sc + 8 * h));
        /* lsum2(wl, x) and lsum2(wl, L) with wl = 1 * L = L: eight partial sums (k, k + 8), folded
         * (k, k + 4), then qv_sum's (0 + 2) + (1 + 3) */
        __m256 tx[8], tl[8];
        for (int k = 0; k < 8; k++) {
            tx[k] = _mm256_add_ps(_mm256_add_ps(zero, _mm256_mul_ps(L[k], X[k])), _mm256_mul_ps(L[k + 8], X[k + 8]));
            tl[k] = _mm256_add_ps(_mm256_add_ps(zero, _mm256_mul_ps(L[k], L[k])), _mm256_mul_ps(L[k + 8], L[k + 8]));
        }
        __m256 ux[4], ul[4];
        for (int k = 0; k < 4; k++) {
            ux[k] = _mm256_add_ps(tx[k], tx[k + 4]);
            ul[k] = _mm256_add_ps(tl[k], tl[k + 4]);
        }
        const __m256 sxl = _mm256_add_ps(_mm256_add_ps(ux[0], ux[2]), _mm256_add_ps(ux[1], ux[3]));
        const __m256 sll = _mm256_add_ps(_mm256_add_ps(ul[0], ul[2]), _mm256_add_ps(ul[1], ul[3]));
        /* a = qclr((float)(sxl / sll / d), slo, shi) where sll > 0 */
        const __m256 has = _mm256_cmp_ps(sll, zero, _CMP_GT_OQ);
        const __m256 one = _mm256_set1_ps(1.f);
        const __m256 sllv = _mm256_blendv_ps(one, sll, has);
        __m128 q[2];
        for (int half = 0; half < 2; half++) {
            const __m256d nx = _mm256_cvtps_pd(half ? _mm256_extractf128_ps(sxl, 1) : _mm256_castps256_ps128(sxl));
            const __m256d nl = _mm256_cvtps_pd(half ? _mm256_extractf128_ps(sllv, 1) : _mm256_castps256_ps128(sllv));
            q[half] = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_div_pd(nx, nl), _mm256_set1_pd((double)d)));
        }
        __m256 av = _mm256_set_m128(q[1], q[0]);
        av = _mm256_min_ps(_mm256_max_ps(av, _mm256_cvtepi32_ps(slo)), _mm256_cvtepi32_ps(shi));
        const __m256i a = _mm256_cvtps_epi32(_mm256_sub_ps(_mm256_add_ps(av, M), M));
        const __m256i hasi = _mm256_castps_si256(has), one_i = _mm256_set1_epi32(1);
        const __m256i cv[NC] = { _mm256_add_epi32(s0, one_i), _mm256_sub_epi32(s0, one_i), a,
                                 _mm256_add_epi32(a, one_i), _mm256_sub_epi32(a, one_i) };
        __m256i okv[NC];
        for (int k = 0; k < NC; k++) {
            /* in range, not the current one, not one tried before it; the last three need sll > 0 */
            __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi32(slo, cv[k]), _mm256_cmpgt_epi32(cv[k], shi));
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(cv[k], s0));
            for (int k2 = 0; k2 < k; k2++)
                bad = _mm256_or_si256(bad, _mm256_and_si256(okv[k2], _mm256_cmpeq_epi32(cv[k], cv[k2])));
            okv[k] = _mm256_andnot_si256(bad, k >= 2 ? hasi : _mm256_set1_epi32(-1));
            _mm256_storeu_si256((__m256i *)(void *)(cand[k] + 8 * h), cv[k]);
            _mm256_storeu_si256((__m256i *)(void *)(ok[k] + 8 * h), okv[k]);
            if (_mm256_testz_si256(okv[k], okv[k]))
                continue;
            /* sym_sub(div false, noclip) at dl = d * cand: lanes with dl 0 take codes 0 and no
             * clipping test, as sym_sub; lanes not tried compute at dl = d, unused */
            const __m256 cf = _mm256_cvtepi32_ps(_mm256_blendv_epi8(one_i, cv[k], okv[k]));
            const __m256 dl = _mm256_mul_ps(_mm256_set1_ps(d), cf);
            const __m256 nz = _mm256_cmp_ps(dl, zero, _CMP_NEQ_UQ);
            const __m256 vid = _mm256_div_ps(one, _mm256_blendv_ps(one, dl, nz));
            __m256 mn = zero, mx = zero, e0 = zero, e1 = zero, e2 = zero, e3 = zero;
            __m256 r0 = zero, r1 = zero, r2 = zero, r3 = zero;
            /* value i's error terms go to partial sums i % 4 (kept in registers) */
#define REFINE_STEP(e, r, i)                                                                       \
    do {                                                                                           \
        const __m256 v = _mm256_mul_ps(X[i], vid);                                                 \
        mn = _mm256_min_ps(mn, v);                                                                 \
        mx = _mm256_max_ps(mx, v);                                                                 \
        const __m256 l =                                                                           \
            _mm256_and_ps(nz, _mm256_sub_ps(_mm256_add_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), M), M)); \
        T[h][k][i] = l;                                                                            \
        const __m256 diff = _mm256_sub_ps(_mm256_mul_ps(dl, l), X[i]);                             \
        e = _mm256_add_ps(e, _mm256_mul_ps(diff, diff));                                           \
        r = _mm256_add_ps(r, _mm256_mul_ps(_mm256_mul_ps(WR[i], diff), diff));                     \
    } while (0)
            for (int i = 0; i < SUB; i += 4) {
                REFINE_STEP(e0, r0, i);
                REFINE_STEP(e1, r1, i + 1);
                REFINE_STEP(e2, r2, i + 2);
                REFINE_STEP(e3, r3, i + 3);
            }
#undef REFINE_STEP
            __m256 ev = _mm256_add_ps(_mm256_add_ps(e0, e2), _mm256_add_ps(e1, e3));
            const __m256 rv = _mm256_add_ps(_mm256_add_ps(r0, r2), _mm256_add_ps(r1, r3));
            if (c->noclip) {
                const __m256 clip = _mm256_and_ps(nz, _mm256_or_ps(_mm256_cmp_ps(mn, lo5, _CMP_LT_OQ),
                                                                   _mm256_cmp_ps(mx, hi5, _CMP_GT_OQ)));
                ev = _mm256_blendv_ps(ev, _mm256_set1_ps(FLT_MAX), clip);
            }
            _mm256_storeu_ps(E[k] + 8 * h, ev);
            _mm256_storeu_ps(R[k] + 8 * h, rv);
        }
    }
    for (int j = 0; j < NSUB; j++) {
        bool changed = false;
        int kept = -1;
        for (int k = 0; k < NC; k++) {
            if (!ok[k][j] || !(E[k][j] < st->e[j]))
                continue;
            if (!(sym_rtotal(st) - st->r[j] + R[k][j] <= *cap))
                continue;
            st->e[j] = E[k][j];
            st->r[j] = R[k][j];
            *cap = sym_rtotal(st);
            st->sc[j] = cand[k][j];
            kept = k;
            changed = true;
        }
        if (!changed)
            continue;
        /* the kept candidate's codes, lane j % 8 of its registers */
        float col[SUB][8];
        for (int i = 0; i < SUB; i++)
            _mm256_storeu_ps(col[i], T[j / 8][kept][i]);
        for (int i = 0; i < SUB; i++)
            st->L[j * SUB + i] = col[i][j % 8];
        sym_refine_sub(c, x, w, wr, cap, st, j, 1);
    }
}

void qtk_q3_fits_avx2(const float *x, float *fits, int nsb)
{
    ref_q3_lanes(x, fits, nsb, true);
}

/* ---- q6_k's sub-block fits (quant_k_symfit.h, q6), eight sub-blocks per register --------
 * Lane j of register g is sub-block 8g + j. Each lane does SYM_FITS' operations on its
 * sub-block in their order: a sum's term i goes to partial sum i%4 (the four-lane sweep's lane),
 * the four added (p0 + p2) + (p1 + p3) as qv_sum4 adds them; ggml's candidates judged in
 * double in their order, then ours as sym_ours_try_n judges them. With weights all 1 the
 * products with them (exact) are left out, and sum l*l, a sum of small integers, is exact in
 * any order, so it takes one sum. */
typedef struct {
    __m256 x[SUB], wo[SUB], wox[SUB], wr[SUB], wrx[SUB];
} q6_reg;

/* sums of the codes of inverse scales is: s[0] = sum wox*l, s[1] = sum wo*l*l and, with ggml
 * (ggml's weights), s[2] = sum wrx*l, s[3] = sum wr*l*l */
static inline __attribute__((always_inline)) void q6_sweep(const q6_reg *g, __m256 is, bool one,
                                                           bool ggml, __m256 *s)
{
    const __m256 z = _mm256_setzero_ps(), m = _mm256_set1_ps(12582912.f);
    const __m256 lo = _mm256_set1_ps(-32.f), hi = _mm256_set1_ps(31.f);
    __m256 a0[4] = { z, z, z, z }, a1[4] = { z, z, z, z }, b0[4] = { z, z, z, z };
    __m256 b1[4] = { z, z, z, z }, ll = z;
#pragma GCC unroll 16
    for (int i = 0; i < SUB; i++) {
        const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(is, g->x[i]), lo), hi);
        const __m256 l = _mm256_sub_ps(_mm256_add_ps(v, m), m);
        a0[i % 4] = _mm256_add_ps(a0[i % 4], _mm256_mul_ps(g->wox[i], l));
        if (one)
            ll = _mm256_add_ps(ll, _mm256_mul_ps(l, l));
        else
            a1[i % 4] = _mm256_add_ps(a1[i % 4], _mm256_mul_ps(_mm256_mul_ps(g->wo[i], l), l));
        if (ggml) {
            b0[i % 4] = _mm256_add_ps(b0[i % 4], _mm256_mul_ps(g->wrx[i], l));
            b1[i % 4] = _mm256_add_ps(b1[i % 4], _mm256_mul_ps(_mm256_mul_ps(g->wr[i], l), l));
        }
    }
    s[0] = qv8_fold4(a0);
    s[1] = one ? ll : qv8_fold4(a1);
    if (ggml) {
        s[2] = qv8_fold4(b0);
        s[3] = qv8_fold4(b1);
    }
}

static void q6_fits_reg(const sym_cfg *c, const float *x, const float *w, float *rs, float *os)
{
    q6_reg g;
    transpose8(x, g.x);
    transpose8(x + 8, g.x + 8);
    transpose8(w, g.wo);
    transpose8(w + 8, g.wo + 8);
    const __m256 z = _mm256_setzero_ps(), sg = _mm256_set1_ps(-0.f);
    /* the largest |x| and the first value with it (sub_absmax) */
    __m256 amax = z, max = z;
    for (int i = 0; i < SUB; i++) {
        const __m256 ax = _mm256_andnot_ps(sg, g.x[i]);
        const __m256 gt = _mm256_cmp_ps(ax, amax, _CMP_GT_OQ);
        amax = _mm256_blendv_ps(amax, ax, gt);
        max = _mm256_blendv_ps(max, g.x[i], gt);
    }
    const __m256 live = _mm256_cmp_ps(amax, _mm256_set1_ps(GROUP_EPS), _CMP_GE_OQ);
    if (!_mm256_movemask_ps(live)) {
        _mm256_storeu_ps(rs, z);
        _mm256_storeu_ps(os, z);
        return;
    }
    __m256 one = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    for (int i = 0; i < SUB; i++) {
        g.wox[i] = _mm256_mul_ps(g.wo[i], g.x[i]);
        g.wr[i] = _mm256_mul_ps(g.x[i], g.x[i]);
        g.wrx[i] = _mm256_mul_ps(g.wr[i], g.x[i]);
        one = _mm256_and_ps(one, _mm256_cmp_ps(g.wo[i], _mm256_set1_ps(1.f), _CMP_EQ_OQ));
    }
    const bool ones = _mm256_movemask_ps(one) == 0xFF;
    const float nmax = (float)-c->lo, hi = (float)c->hi;
    const __m256 mx = _mm256_blendv_ps(_mm256_set1_ps(1.f), max, live); /* dead lanes: unused */
    /* ggml's 19 inverse scales in its order, each judged as SYM_FITS judges it; ours after */
    __m256d scale[2] = { _mm256_setzero_pd(), _mm256_setzero_pd() }, best[2] = { scale[0], scale[1] };
    __m256d ob[2] = { _mm256_set1_pd(-1.0), _mm256_set1_pd(-1.0) }, o0[2] = { scale[0], scale[1] };
    __m256d o1[2] = { scale[0], scale[1] };
    for (int k = 0; k < 25; k++) {
        float num;
        if (k == 0)
            num = -nmax;
        else if (k < 19) {
            const int is = k <= 9 ? k - 10 : k - 9; /* -9..-1, 1..9 */
            num = -(nmax + 0.1f * (float)is);
        } else
            num = hi + 0.2f * (float)(k - 19) - 0.4f;
        const __m256 is = _mm256_div_ps(_mm256_set1_ps(num), mx);
        __m256 S[4];
        if (k < 19) {
            if (ones)
                q6_sweep(&g, is, true, true, S);
            else
                q6_sweep(&g, is, false, true, S);
        } else {
            if (ones)
                q6_sweep(&g, is, true, false, S);
            else
                q6_sweep(&g, is, false, false, S);
        }
        for (int h = 0; h < 2; h++) {
            const __m256d t0 = qv8_pd_half(S[0], h), t1 = qv8_pd_half(S[1], h);
            if (k < 19) {
                const __m256d t2 = qv8_pd_half(S[2], h), t3 = qv8_pd_half(S[3], h);
                const __m256d zd = _mm256_setzero_pd();
                if (k == 0) {
                    const __m256d nz = _mm256_cmp_pd(t3, zd, _CMP_NEQ_UQ);
                    scale[h] = _mm256_and_pd(nz, _mm256_div_pd(t2, t3));
                    best[h] = _mm256_mul_pd(scale[h], t2);
                } else {
                    const __m256d take = _mm256_and_pd(_mm256_cmp_pd(t3, zd, _CMP_GT_OQ),
                                                       _mm256_cmp_pd(_mm256_mul_pd(t2, t2), _mm256_mul_pd(best[h], t3), _CMP_GT_OQ));
                    if (_mm256_movemask_pd(take)) {
                        const __m256d sn = _mm256_div_pd(t2, t3);
                        scale[h] = _mm256_blendv_pd(scale[h], sn, take);
                        best[h] = _mm256_blendv_pd(best[h], _mm256_mul_pd(sn, t2), take);
                    }
                }
            }
            /* sym_ours_try_n's judgement of candidate k */
            const __m256d pos = _mm256_cmp_pd(t1, _mm256_setzero_pd(), _CMP_GT_OQ);
            const __m256d sc = _mm256_div_pd(_mm256_and_pd(pos, _mm256_mul_pd(t0, t0)),
                                             _mm256_blendv_pd(_mm256_set1_pd(1.0), t1, pos));
            const __m256d win = _mm256_and_pd(pos, _mm256_cmp_pd(sc, ob[h], _CMP_GT_OQ));
            ob[h] = _mm256_blendv_pd(ob[h], sc, win);
            o0[h] = _mm256_blendv_pd(o0[h], t0, win);
            o1[h] = _mm256_blendv_pd(o1[h], t1, win);
        }
    }
    const __m256 r = _mm256_and_ps(live, qv8_from_pd(scale[0], scale[1]));
    __m256d okd[2], od[2];
    for (int h = 0; h < 2; h++) {
        okd[h] = _mm256_cmp_pd(ob[h], _mm256_setzero_pd(), _CMP_GT_OQ);
        od[h] = _mm256_div_pd(o0[h], _mm256_blendv_pd(_mm256_set1_pd(1.0), o1[h], okd[h]));
    }
    const __m256 o = _mm256_and_ps(live, _mm256_blendv_ps(r, qv8_from_pd(od[0], od[1]), qv8_pd_mask(okd[0], okd[1])));
    _mm256_storeu_ps(rs, r);
    _mm256_storeu_ps(os, o);
}

static void q6_fits_lanes(const sym_cfg *c, const float *x, const float *w, float *rs, float *os)
{
    for (int g = 0; g < NSUB / 8; g++)
        q6_fits_reg(c, x + g * 8 * SUB, w + g * 8 * SUB, rs + 8 * g, os + 8 * g);
}

/* ---- aff_fit_n of eight sub-blocks of 32, one per lane -----------------------------------
 * Lane j of every register is sub-block j; element i of the eight in AX[i]. Each lane does
 * aff_fit_n's operations on its sub-block in their order: a sum's term i goes to accumulator
 * i%8, folded ((a0+a4) + (a2+a6)) + ((a1+a5) + (a3+a7)) as qv8_sum does; the least-squares
 * choices in double, two registers of four lanes; a branch becomes a mask. aff_fit_n skips a
 * candidate whose codes or sums equal the previous one's; scoring it again changes nothing
 * (the same sums give the same fit, which cannot beat itself), so every lane scores every
 * candidate here. */
enum { AL = 32 };

/* qv8_sum's order over accumulators acc[0..7] */
static inline __m256 aff_tree(const __m256 *a)
{
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                         _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])));
}

/* lsum2 of every lane: sum a[i]*b[i] (b NULL: sum a[i]) */
static inline __m256 aff_lsum(const __m256 *a, const __m256 *b)
{
    __m256 acc[8];
    for (int r = 0; r < 8; r++) {
        acc[r] = _mm256_setzero_ps();
        for (int i = r; i < AL; i += 8)
            acc[r] = _mm256_add_ps(acc[r], b ? _mm256_mul_ps(a[i], b[i]) : a[i]);
    }
    return aff_tree(acc);
}

/* which of our sums aff_lsweep takes: none (ggml's fit alone), under weights WO, or under
 * weights all 1 (WO's products with them are exact, so left out) */
enum { OURS_NONE, OURS_W, OURS_ONE };

/* the codes of inverse scales is for values U and their sums under (WO, WOX) (ours), and with
 * WR under (WR, WRX): S[0..2], S[3..5] (aff_sweep; aff_sweep3 without WR) */
static inline __attribute__((always_inline)) void aff_lsweep(const __m256 *U, const __m256 *WO,
                                                             const __m256 *WOX, const __m256 *WR,
                                                             const __m256 *WRX, __m256 is,
                                                             __m256 fn, int ours, __m256 *S)
{
    const __m256 z = _mm256_setzero_ps(), m = _mm256_set1_ps(12582912.f);
    __m256 a[6][8];
    for (int r = 0; r < 8; r++) {
        __m256 a0 = z, a1 = z, a2 = z, b0 = z, b1 = z, b2 = z;
#pragma GCC unroll 4
        for (int i = r; i < AL; i += 8) {
            const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(is, U[i]), z), fn);
            const __m256 l = _mm256_sub_ps(_mm256_add_ps(v, m), m);
            __m256 t;
            if (ours != OURS_NONE) {
                t = ours == OURS_ONE ? l : _mm256_mul_ps(WO[i], l);
                a0 = _mm256_add_ps(a0, t);
                a1 = _mm256_add_ps(a1, _mm256_mul_ps(t, l));
                a2 = _mm256_add_ps(a2, _mm256_mul_ps(WOX[i], l));
            }
            if (WR) {
                t = _mm256_mul_ps(WR[i], l);
                b0 = _mm256_add_ps(b0, t);
                b1 = _mm256_add_ps(b1, _mm256_mul_ps(t, l));
                b2 = _mm256_add_ps(b2, _mm256_mul_ps(WRX[i], l));
            }
        }
        if (ours != OURS_NONE)
            a[0][r] = a0, a[1][r] = a1, a[2][r] = a2;
        if (WR)
            a[3][r] = b0, a[4][r] = b1, a[5][r] = b2;
    }
    for (int k = ours != OURS_NONE ? 0 : 3; k < (WR ? 6 : 3); k++)
        S[k] = aff_tree(a[k]);
}

/* aff_lsweep for each kind of our sums, with and without ggml's */
static void aff_lsweep_ref(const __m256 *U, const __m256 *WO, const __m256 *WOX, const __m256 *WR,
                           const __m256 *WRX, __m256 is, __m256 fn, int ours, __m256 *S)
{
    if (ours == OURS_ONE)
        aff_lsweep(U, WO, WOX, WR, WRX, is, fn, OURS_ONE, S);
    else if (ours == OURS_W)
        aff_lsweep(U, WO, WOX, WR, WRX, is, fn, OURS_W, S);
    else
        aff_lsweep(U, WO, WOX, WR, WRX, is, fn, OURS_NONE, S);
}
static void aff_lsweep_ours(const __m256 *U, const __m256 *WO, const __m256 *WOX, __m256 is,
                            __m256 fn, int ours, __m256 *S)
{
    if (ours == OURS_ONE)
        aff_lsweep(U, WO, WOX, NULL, NULL, is, fn, OURS_ONE, S);
    else
        aff_lsweep(U, WO, WOX, NULL, NULL, is, fn, OURS_W, S);
}

/* aff_ls in four lanes: the mask of lanes where it returns true, with *s, *m, *e there */
static inline __attribute__((always_inline)) __m256d aff_ls4(__m256d sw, __m256d sx, __m256d sxx,
                                                             __m256d sl, __m256d sll, __m256d sxl,
                                                             bool ours, __m256d best, __m256d *s,
                                                             __m256d *m, __m256d *e)
{
    const __m256d z = _mm256_setzero_pd();
    const __m256d D = _mm256_sub_pd(_mm256_mul_pd(sw, sll), _mm256_mul_pd(sl, sl));
    const __m256d pD = _mm256_cmp_pd(D, z, _CMP_GT_OQ);
    const __m256d ns = _mm256_sub_pd(_mm256_mul_pd(sw, sxl), _mm256_mul_pd(sx, sl));
    const __m256d nm = _mm256_sub_pd(_mm256_mul_pd(sll, sx), _mm256_mul_pd(sl, sxl));
    const __m256d inA = _mm256_and_pd(pD, _mm256_cmp_pd(nm, z, _CMP_LE_OQ));
    __m256d okA = _mm256_cmp_pd(_mm256_sub_pd(_mm256_sub_pd(_mm256_mul_pd(sxx, D), _mm256_mul_pd(ns, sxl)),
                                              _mm256_mul_pd(nm, sx)),
                                _mm256_mul_pd(best, D), _CMP_LT_OQ);
    if (ours)
        okA = _mm256_and_pd(okA, _mm256_cmp_pd(ns, z, _CMP_GE_OQ));
    okA = _mm256_and_pd(okA, inA);
    /* m clamped to 0: from D > 0 with nm > 0 (or unordered), or (ours) D not positive, sll > 0 */
    __m256d inB = _mm256_andnot_pd(_mm256_cmp_pd(nm, z, _CMP_LE_OQ), pD);
    if (ours)
        inB = _mm256_or_pd(inB, _mm256_andnot_pd(pD, _mm256_cmp_pd(sll, z, _CMP_GT_OQ)));
    __m256d okB = _mm256_cmp_pd(_mm256_sub_pd(_mm256_mul_pd(sxx, sll), _mm256_mul_pd(sxl, sxl)),
                                _mm256_mul_pd(best, sll), _CMP_LT_OQ);
    if (ours)
        okB = _mm256_and_pd(okB, _mm256_cmp_pd(sxl, z, _CMP_GE_OQ));
    okB = _mm256_and_pd(okB, inB);
    const __m256d ok = _mm256_or_pd(okA, okB);
    if (!_mm256_movemask_pd(ok)) { /* no lane wins: only a winner pays for divisions */
        *s = *m = *e = z;
        return ok;
    }
    const __m256d iD = _mm256_div_pd(_mm256_set1_pd(1.0), D);
    const __m256d sA = _mm256_mul_pd(ns, iD), mA = _mm256_mul_pd(nm, iD);
    const __m256d eA = _mm256_sub_pd(_mm256_sub_pd(sxx, _mm256_mul_pd(sA, sxl)), _mm256_mul_pd(mA, sx));
    const __m256d sB = _mm256_div_pd(sxl, sll);
    const __m256d eB = _mm256_sub_pd(sxx, _mm256_mul_pd(sB, sxl));
    *s = _mm256_blendv_pd(sB, sA, okA);
    *m = _mm256_and_pd(mA, okA); /* +0 from the clamp */
    *e = _mm256_blendv_pd(eB, eA, okA);
    return ok;
}

/* aff_ours in eight lanes (two halves of four) */
typedef struct {
    __m256d w[2], x[2], xx[2], best[2];
    __m256 s, m;
} aff_ours8;

static inline __attribute__((always_inline)) void aff_ours_try8(aff_ours8 *o, const __m256 *S)
{
    __m256d ok[2], sv[2], mv[2];
    for (int h = 0; h < 2; h++) {
        __m256d e;
        ok[h] = aff_ls4(o->w[h], o->x[h], o->xx[h], qv8_pd_half(S[0], h),
                        qv8_pd_half(S[1], h), qv8_pd_half(S[2], h), true,
                        o->best[h], &sv[h], &mv[h], &e);
        o->best[h] = _mm256_blendv_pd(o->best[h], e, ok[h]);
    }
    const __m256 okf = qv8_pd_mask(ok[0], ok[1]);
    o->s = _mm256_blendv_ps(o->s, qv8_from_pd(sv[0], sv[1]), okf);
    o->m = _mm256_blendv_ps(o->m, qv8_from_pd(mv[0], mv[1]), okf);
}

static void aff_fit_lanes(const aff_cfg *c, const float *x, const float *w, bool own, float *rs,
                          float *rm, float *os, float *om)
{
    __m256 X[AL], WO[AL], WOX[AL], WR[AL], WRX[AL], U[AL];
    qv8_cols32(x, X);
    qv8_cols32(w, WO);
    const float fns = (float)c->nmax;
    const __m256 z = _mm256_setzero_ps(), fn = _mm256_set1_ps(fns);
    /* ggml's weights rms + |x| (c->wabs is q2_k's, never here) */
    const __m256 av = _mm256_sqrt_ps(_mm256_div_ps(aff_lsum(X, X), _mm256_set1_ps((float)AL)));
    __m256 min = X[0], max = X[0];
    for (int i = 1; i < AL; i++) {
        min = _mm256_blendv_ps(min, X[i], _mm256_cmp_ps(X[i], min, _CMP_LT_OQ));
        max = _mm256_blendv_ps(max, X[i], _mm256_cmp_ps(X[i], max, _CMP_GT_OQ));
    }
    min = _mm256_blendv_ps(min, z, _mm256_cmp_ps(min, z, _CMP_GT_OQ));
    const __m256 flat = _mm256_cmp_ps(max, min, _CMP_EQ_OQ);
    for (int i = 0; i < AL; i++) {
        WR[i] = _mm256_add_ps(av, _mm256_andnot_ps(_mm256_set1_ps(-0.f), X[i]));
        U[i] = _mm256_sub_ps(X[i], min);
        WOX[i] = _mm256_mul_ps(WO[i], X[i]);
        WRX[i] = _mm256_mul_ps(WR[i], X[i]);
    }
    __m256d swr[2], sxr[2], sxxr[2];
    {
        const __m256 a = aff_lsum(WR, NULL), b = aff_lsum(WRX, NULL), cc = aff_lsum(WRX, X);
        swr[0] = qv8_pd_half(a, 0), swr[1] = qv8_pd_half(a, 1);
        sxr[0] = qv8_pd_half(b, 0), sxr[1] = qv8_pd_half(b, 1);
        sxxr[0] = qv8_pd_half(cc, 0), sxxr[1] = qv8_pd_half(cc, 1);
    }
    aff_ours8 o;
    {
        const __m256 a = aff_lsum(WO, NULL), b = aff_lsum(WOX, NULL), cc = aff_lsum(WOX, X);
        o.w[0] = qv8_pd_half(a, 0), o.w[1] = qv8_pd_half(a, 1);
        o.x[0] = qv8_pd_half(b, 0), o.x[1] = qv8_pd_half(b, 1);
        o.xx[0] = qv8_pd_half(cc, 0), o.xx[1] = qv8_pd_half(cc, 1);
        o.best[0] = o.best[1] = _mm256_set1_pd(DBL_MAX);
        o.s = o.m = z;
    }
    /* weights all 1 (no importance matrix) */
    __m256 one = _mm256_cmp_ps(WO[0], _mm256_set1_ps(1.f), _CMP_EQ_OQ);
    for (int i = 1; i < AL; i++)
        one = _mm256_and_ps(one, _mm256_cmp_ps(WO[i], _mm256_set1_ps(1.f), _CMP_EQ_OQ));
    const int ours = !own ? OURS_NONE : _mm256_movemask_ps(one) == 0xFF ? OURS_ONE : OURS_W;
    __m256 range = _mm256_sub_ps(max, min);
    __m256 S[6];
    __m256 is = _mm256_div_ps(fn, range);
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1.f), is), bmin = min;
    aff_lsweep_ref(U, WO, WOX, WR, WRX, is, fn, ours, S);
    if (own)
        aff_ours_try8(&o, S);
    __m256d best[2];
    for (int h = 0; h < 2; h++) {
        /* aff_quad(scale, min, S + 3, swr, sxr, sxxr) */
        const __m256d s = qv8_pd_half(scale, h), m = qv8_pd_half(min, h);
        const __m256d S3 = qv8_pd_half(S[3], h), S4 = qv8_pd_half(S[4], h);
        const __m256d S5 = qv8_pd_half(S[5], h), two = _mm256_set1_pd(2.0);
        __m256d q = _mm256_mul_pd(_mm256_mul_pd(s, s), S4);
        q = _mm256_add_pd(q, _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(two, s), m), S3));
        q = _mm256_add_pd(q, _mm256_mul_pd(_mm256_mul_pd(m, m), swr[h]));
        q = _mm256_sub_pd(q, _mm256_mul_pd(_mm256_mul_pd(two, s), S5));
        q = _mm256_sub_pd(q, _mm256_mul_pd(_mm256_mul_pd(two, m), sxr[h]));
        best[h] = _mm256_add_pd(q, sxxr[h]);
    }
    for (int k = 0; k <= c->nstep; k++) {
        is = _mm256_div_ps(_mm256_set1_ps(c->rmin + c->rdelta * (float)k + fns), range);
        aff_lsweep_ref(U, WO, WOX, WR, WRX, is, fn, ours, S);
        if (own)
            aff_ours_try8(&o, S);
        __m256d up[2], ts[2], tm[2];
        for (int h = 0; h < 2; h++) {
            __m256d e;
            const __m256d ok = aff_ls4(swr[h], sxr[h], sxxr[h], qv8_pd_half(S[3], h),
                                       qv8_pd_half(S[4], h), qv8_pd_half(S[5], h),
                                       false, best[h], &ts[h], &tm[h], &e);
            up[h] = _mm256_and_pd(ok, _mm256_cmp_pd(e, best[h], _CMP_LT_OQ));
            best[h] = _mm256_blendv_pd(best[h], e, up[h]);
        }
        const __m256 upf = qv8_pd_mask(up[0], up[1]);
        if (_mm256_movemask_ps(upf)) {
            scale = _mm256_blendv_ps(scale, qv8_from_pd(ts[0], ts[1]), upf);
            bmin = _mm256_blendv_ps(bmin, qv8_from_pd(tm[0], tm[1]), upf);
            /* as ggml does: later candidates are coded relative to the new minimum */
            range = _mm256_blendv_ps(range, _mm256_sub_ps(max, bmin), upf);
            for (int i = 0; i < AL; i++)
                U[i] = _mm256_blendv_ps(U[i], _mm256_sub_ps(X[i], bmin), upf);
        }
    }
    range = _mm256_sub_ps(max, min);
    /* ours only: the lowest codes clipped, a coarser sweep */
    for (int sh = 1; own && sh <= 2; sh++) {
        const __m256 mn2 = _mm256_add_ps(min, _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps((float)sh * 0.25f), range), fn));
        for (int i = 0; i < AL; i++)
            U[i] = _mm256_max_ps(_mm256_sub_ps(X[i], mn2), z);
        const __m256 span = _mm256_sub_ps(max, mn2);
        for (int k = 0; k <= 3; k++) {
            is = _mm256_div_ps(_mm256_set1_ps(-1.f + 0.6f * (float)k + fns), span);
            aff_lsweep_ours(U, WO, WOX, is, fn, ours, S);
            aff_ours_try8(&o, S);
        }
    }
    const __m256d big = _mm256_set1_pd(DBL_MAX);
    const __m256 set = qv8_pd_mask(_mm256_cmp_pd(o.best[0], big, _CMP_LT_OQ),
                               _mm256_cmp_pd(o.best[1], big, _CMP_LT_OQ));
    /* -v as the scalar negation is: a sign flip */
    const __m256 sg = _mm256_set1_ps(-0.f);
    const __m256 vrs = _mm256_andnot_ps(flat, scale);
    const __m256 vrm = _mm256_blendv_ps(_mm256_xor_ps(bmin, sg), _mm256_xor_ps(min, sg), flat);
    const __m256 vos = _mm256_andnot_ps(flat, _mm256_blendv_ps(scale, o.s, set));
    const __m256 vom = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_xor_ps(bmin, sg), _mm256_xor_ps(o.m, sg), set),
                                        _mm256_xor_ps(min, sg), flat);
    _mm256_storeu_ps(rs, vrs);
    _mm256_storeu_ps(rm, vrm);
    _mm256_storeu_ps(os, vos);
    _mm256_storeu_ps(om, vom);
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
void qtk_q3_fits_avx2(const float *x, float *fits, int nsb) { qtk_q3_fits_c(x, fits, nsb); }
void qtk_sym_block_avx2(const sym_cfg *c, bool q6, const float *x, const float *w,
                        const float *wr, const float *rs, sym_st *st)
{
    qtk_sym_block_c(c, q6, x, w, wr, rs, st);
}
#endif
