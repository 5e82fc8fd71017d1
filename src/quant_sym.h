/* quant_sym.h - the q4_0/q5_0/q8_0 search (y = q*d, q in [lo, hi]) of two blocks at once.
 * Included once per instruction set (quant.c generic, quant_sym_avx2.c with -mavx2) with
 * SYM_PAIR naming the exported function.
 *
 * As in quant_asym.h, the two blocks' values are interleaved four by four (A[0..3] B[0..3]
 * A[4..7] B[4..7] ...), so one eight-lane register (quant.h's qv8) holds four values of each and
 * every lane does what the four-lane search of one block does: block A's element i accumulates
 * in lane i%4 of the low half, B's in the high half, each half reduced in qv_sum's order. Each
 * block's decisions are its own; where one block's refinement stops and the other's goes on,
 * the stopped half's lanes compute values nobody reads. So every block gets the bytes of the
 * one-block search on every build (tests/data/simd_digest.expected).
 *
 * The search of one block: ggml's reference choice (quantize_row_*_ref: half > 0, q4_0/q5_0:
 * d = max/-half and truncation; half 0, q8_0: d = amax/127 and roundf); nstep candidate scales
 * per orientation (the largest |x| mapped near lo, or near hi), spaced `step` levels apart from
 * `d0` levels inside the end level, ranked by the continuous least-squares error; the best
 * refined by alternating least-squares scale (fp16) and rounded codes, kept when its exact
 * decoded error beats ggml's; then a second round from what was kept. nstep 0 (q5_0): with an
 * importance matrix, least-squares steps from ggml's choice; without one, ggml's choice. */
#ifndef SYM_PAIR
#error "define SYM_PAIR before including quant_sym.h"
#endif

#include <float.h>
#include <string.h>

#define SP_QB QTK_SYM_QB
#define SP_N (2 * SP_QB) /* two interleaved blocks */
#define SP_MAXC 16       /* candidate scales per block (2 orientations x nstep) */

/* block h's four values of every eight, from src to dst */
static inline void sp_copy_half(float *dst, const float *src, int h)
{
    for (int i = 4 * h; i < SP_N; i += 8)
        memcpy(dst + i, src + i, 4 * sizeof *dst);
}

/* Largest |x| of a block and the first value attaining it (0 for an all-zero block). */
static inline float sp_amax(const float *x, float *max)
{
    qv4 m = qv_set(0.f);
    for (int i = 0; i < SP_QB; i += 4)
        m = qv_max(m, qv_abs(qv_ld(x + i)));
    float t[4];
    qv_st(t, m);
    const float a01 = t[0] > t[1] ? t[0] : t[1], a23 = t[2] > t[3] ? t[2] : t[3];
    const float amax = a01 > a23 ? a01 : a23;
    *max = 0.f;
    if (amax > 0.f) { /* the first index attaining it, without a branch per value */
        const qv4 va = qv_set(amax);
        uint32_t at = 0;
        for (int i = 0; i < SP_QB; i += 4)
            at |= (uint32_t)qv_eqmask(qv_abs(qv_ld(x + i)), va) << i;
        *max = x[__builtin_ctz(at)];
    }
    return amax;
}

/* One step of a pass over codes l of values xv (eight lanes at i): their decoded error and
 * least-squares sums, accumulated; sp_sums ends a pass. */
static inline __attribute__((always_inline)) void sp_acc(const float *W, const float *WX,
                                                        const bool uni, int i, qv8 xv, qv8 l,
                                                        qv8 vd, qv8 *ea, qv8 *a, qv8 *b)
{
    const qv8 diff = qv8_sub(qv8_mul(l, vd), xv);
    *ea = qv8_add(*ea, qv8_mul(uni ? diff : qv8_mul(qv8_ld(W + i), diff), diff));
    *a = qv8_add(*a, qv8_mul(qv8_ld(WX + i), l));
    *b = qv8_add(*b, qv8_mul(uni ? l : qv8_mul(qv8_ld(W + i), l), l));
}

/* Each block's error (e), sum wx*l (sxl) and sum w*l*l (sll) in qv_sum's order. */
static inline void sp_sums(qv8 ea, qv8 a, qv8 b, float *e, float *sxl, float *sll)
{
    float t[8];
    qv8_sum4h(ea, a, b, b, t);
    for (int h = 0; h < 2; h++)
        e[h] = t[4 * h], sxl[h] = t[4 * h + 1], sll[h] = t[4 * h + 2];
}

/* One pass for each block's scale d[h]: codes t = round(x/d) clamped to [lo, hi] (via the
 * reciprocal; 0 when d is 0) into Q, their exact decoded errors sum w*(t*d - x)^2 (e) and
 * least-squares sums (sxl, sll). uni: every weight 1, whose multiplications (exact) are left
 * out. */
static inline __attribute__((always_inline)) void sp_pass(const float *X, const float *W,
                                                         const float *WX, const bool uni,
                                                         const float *d, float lo, float hi,
                                                         float *Q, float *e, float *sxl,
                                                         float *sll)
{
    const qv8 vd = qv8_set2(d[0], d[1]);
    const qv8 id = qv8_set2(d[0] != 0.f ? 1.f / d[0] : 0.f, d[1] != 0.f ? 1.f / d[1] : 0.f);
    const qv8 vlo = qv8_set(lo), vhi = qv8_set(hi);
    qv8 ea = qv8_set(0.f), a = ea, b = ea;
    for (int i = 0; i < SP_N; i += 8) {
        const qv8 xv = qv8_ld(X + i);
        /* a scale of 0 has reciprocal 0: every code +0, as the one-block search set them */
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(xv, id), vlo), vhi));
        qv8_st(Q + i, l);
        sp_acc(W, WX, uni, i, xv, l, vd, &ea, &a, &b);
    }
    sp_sums(ea, a, b, e, sxl, sll);
}

/* Alternate least-squares d (fp16) and rounded codes for each block with run[h], from codes Q,
 * scales d, errors e and least-squares sums sxl, sll; each block keeps its best state. full[h]:
 * it ran all iters steps (the only case where another round from the result could change
 * anything: it stopped at a fixed point otherwise). */
static inline __attribute__((always_inline)) void sp_lloyd(const float *X, const float *W,
                                                          const float *WX, const bool uni,
                                                          float lo, float hi, int iters,
                                                          const bool *run_in, float *Q, float *d,
                                                          float *e, float *sxl, float *sll,
                                                          bool *full)
{
    bool run[2] = { run_in[0], run_in[1] };
    float t[SP_N];
    for (int it = 0; it < iters && (run[0] || run[1]); it++) {
        float dn[2] = { 0.f, 0.f };
        for (int h = 0; h < 2; h++) {
            if (!run[h])
                continue;
            const double dxl = sxl[h], dll = sll[h];
            if (!(dll > 0)) {
                run[h] = false;
                continue;
            }
            dn[h] = qv_qh16((float)(dxl / dll));
            if (dn[h] == d[h] && it > 0)
                run[h] = false;
        }
        if (!run[0] && !run[1])
            break;
        float en[2], nxl[2], nll[2];
        sp_pass(X, W, WX, uni, dn, lo, hi, t, en, nxl, nll);
        for (int h = 0; h < 2; h++) {
            if (!run[h])
                continue;
            if (!(en[h] < e[h])) {
                run[h] = false;
                continue;
            }
            e[h] = en[h], d[h] = dn[h], sxl[h] = nxl[h], sll[h] = nll[h];
            sp_copy_half(Q, t, h);
        }
    }
    full[0] = run[0], full[1] = run[1];
}

/* ggml's reference choice of each block (quantize_row_*_ref's formulas) into Q, with its exact
 * decoded error (fp16 d) and least-squares sums, in one pass; the fp16 d into d. */
static inline __attribute__((always_inline)) void sp_ref(const qtk_sym_type *T, const float *X,
                                                        const float *W, const float *WX,
                                                        const bool uni, const float *amax,
                                                        const float *max, float *Q, float *d,
                                                        float *e, float *sxl, float *sll)
{
    float id[2];
    for (int h = 0; h < 2; h++) {
        const float dd = T->half ? max[h] / (float)-T->half : amax[h] / 127.f;
        id[h] = dd != 0.f ? 1.f / dd : 0.f;
        d[h] = qv_qh16(dd);
    }
    const qv8 vid = qv8_set2(id[0], id[1]), vd = qv8_set2(d[0], d[1]);
    const qv8 off = qv8_set((float)T->half + 0.5f), z = qv8_set(0.f);
    const qv8 top = qv8_set((float)(2 * T->half - 1)), vh = qv8_set((float)T->half);
    const qv8 lo = qv8_set(-127.f), hi = qv8_set(127.f);
    qv8 ea = qv8_set(0.f), a = ea, b = ea;
    for (int i = 0; i < SP_N; i += 8) {
        const qv8 xv = qv8_ld(X + i);
        const qv8 l = T->half ? qv8_sub(qv8_trunc(qv8_min(qv8_max(qv8_add(qv8_mul(xv, vid), off), z), top)), vh)
                              : qv8_roundf(qv8_min(qv8_max(qv8_mul(xv, vid), lo), hi));
        qv8_st(Q + i, l);
        sp_acc(W, WX, uni, i, xv, l, vd, &ea, &a, &b);
    }
    sp_sums(ea, a, b, e, sxl, sll);
}

/* The search of two interleaved blocks X (sanitised), weights W (uni: all 1, not read), into
 * interleaved codes Q and scales dout. weighted[h]: block h has an importance vector (W holds
 * 1s for a block without one, whose multiplications are exact, but it decides q5_0's steps). */
static inline __attribute__((always_inline)) void sp_search(const qtk_sym_type *T, const float *X,
                                                           const float *W, const bool uni,
                                                           const bool *weighted,
                                                           const float *amax, const float *max,
                                                           float *Q, float *dout)
{
    float wxb[SP_N];
    const float *WX = X;
    if (!uni) {
        for (int i = 0; i < SP_N; i += 8)
            qv8_st(wxb + i, qv8_mul(qv8_ld(W + i), qv8_ld(X + i)));
        WX = wxb;
    }
    float bd[2], be[2], rxl[2], rll[2];
    sp_ref(T, X, W, WX, uni, amax, max, Q, bd, be, rxl, rll);
    bool act[2];
    for (int h = 0; h < 2; h++)
        act[h] = !(amax[h] == 0.f || be[h] == 0.f);
    const float flo = (float)T->lo, fhi = (float)T->hi;
    bool full[2];
    if (!act[0] && !act[1]) {
    } else if (T->nstep == 0) { /* no candidates: least-squares steps from ggml's choice (with
                                  * an importance matrix; without one, ggml's choice stands) */
        const bool run[2] = { act[0] && weighted[0], act[1] && weighted[1] };
        if (T->iters1 && !uni)
            sp_lloyd(X, W, WX, uni, flo, fhi, T->iters1, run, Q, bd, be, rxl, rll, full);
    } else {
        /* candidate inverse scales, candidate c of block h at cis[h][c] */
        const int nstep = T->nstep, nc = 2 * nstep;
        float cis[2][SP_MAXC];
        for (int h = 0; h < 2; h++)
            for (int o = 0, c = 0; o < 2; o++)
                for (int k = 0; k < nstep; k++, c++)
                    cis[h][c] = act[h] ? (o == 0 ? flo - (T->d0 + T->step * (float)k)
                                                 : fhi + (T->d0 + T->step * (float)k)) / max[h]
                                       : 0.f;
        /* their least-squares sums, two candidates a pass */
        float cxl[2][SP_MAXC], cll[2][SP_MAXC];
        const qv8 vlo = qv8_set(flo), vhi = qv8_set(fhi);
        for (int c = 0; c < nc; c += 2) {
            const int c1 = c + 1 < nc ? c + 1 : c;
            const qv8 v0 = qv8_set2(cis[0][c], cis[1][c]), v1 = qv8_set2(cis[0][c1], cis[1][c1]);
            qv8 a0 = qv8_set(0.f), b0 = a0, a1 = a0, b1 = a0;
            for (int i = 0; i < SP_N; i += 8) {
                const qv8 xv = qv8_ld(X + i), wxv = qv8_ld(WX + i);
                const qv8 l0 = qv8_round(qv8_min(qv8_max(qv8_mul(v0, xv), vlo), vhi));
                const qv8 l1 = qv8_round(qv8_min(qv8_max(qv8_mul(v1, xv), vlo), vhi));
                a0 = qv8_add(a0, qv8_mul(wxv, l0));
                b0 = qv8_add(b0, qv8_mul(uni ? l0 : qv8_mul(qv8_ld(W + i), l0), l0));
                a1 = qv8_add(a1, qv8_mul(wxv, l1));
                b1 = qv8_add(b1, qv8_mul(uni ? l1 : qv8_mul(qv8_ld(W + i), l1), l1));
            }
            float t[8];
            qv8_sum4h(a0, b0, a1, b1, t);
            for (int h = 0; h < 2; h++) {
                cxl[h][c] = t[4 * h], cll[h][c] = t[4 * h + 1];
                cxl[h][c1] = t[4 * h + 2], cll[h][c1] = t[4 * h + 3];
            }
        }
        /* each block's first best score sxl^2 / sll (sll > 0), the divisions four at a time
         * (the same quotients as one by one) */
        int bc[2] = { -1, -1 };
        for (int h = 0; h < 2; h++) {
            double num[SP_MAXC], den[SP_MAXC], score[SP_MAXC], best = -1.0;
            for (int c = 0; c < (nc + 3) / 4 * 4; c++) {
                const bool pos = c < nc && cll[h][c] > 0;
                num[c] = pos ? (double)cxl[h][c] * (double)cxl[h][c] : 0.0;
                den[c] = pos ? (double)cll[h][c] : 1.0;
            }
            for (int c = 0; c < nc; c += 4)
                qv_div4d(num + c, den + c, score + c);
            /* without a branch per candidate (which one wins is data: often mispredicted) */
            for (int c = 0; act[h] && c < nc; c++) {
                const bool win = cll[h][c] > 0 && score[c] > best;
                best = win ? score[c] : best;
                bc[h] = win ? c : bc[h];
            }
            if (!(best > 0))
                bc[h] = -1;
        }
        /* the best candidate's codes, refined, kept when they beat ggml's; then a second round
         * from what was kept, unless the candidate's round stopped at a fixed point (the round
         * would only repeat its last step) */
        bool run[2] = { bc[0] >= 0, bc[1] >= 0 }, more[2];
        if (run[0] || run[1]) {
            float LB[SP_N], d[2] = { 0.f, 0.f }, e[2] = { FLT_MAX, FLT_MAX }, sxl[2], sll[2];
            const qv8 vis = qv8_set2(run[0] ? cis[0][bc[0]] : 0.f, run[1] ? cis[1][bc[1]] : 0.f);
            for (int i = 0; i < SP_N; i += 8)
                qv8_st(LB + i, qv8_round(qv8_min(qv8_max(qv8_mul(vis, qv8_ld(X + i)), vlo), vhi)));
            for (int h = 0; h < 2; h++) {
                sxl[h] = run[h] ? cxl[h][bc[h]] : 0.f;
                sll[h] = run[h] ? cll[h][bc[h]] : 0.f;
            }
            sp_lloyd(X, W, WX, uni, flo, fhi, T->iters1, run, LB, d, e, sxl, sll, full);
            for (int h = 0; h < 2; h++) {
                more[h] = act[h];
                if (run[h] && e[h] < be[h]) {
                    more[h] = full[h];
                    be[h] = e[h], bd[h] = d[h], rxl[h] = sxl[h], rll[h] = sll[h];
                    sp_copy_half(Q, LB, h);
                }
            }
        } else {
            more[0] = act[0], more[1] = act[1];
        }
        if (T->iters2)
            sp_lloyd(X, W, WX, uni, flo, fhi, T->iters2, more, Q, bd, be, rxl, rll, full);
    }
    dout[0] = bd[0], dout[1] = bd[1];
}

/* The best symmetric encodings of blocks x0 and x1 (sanitised, QTK_SYM_QB values each) under
 * weights w0, w1 (NULL: all 1): codes into q0, q1, scales into d[0], d[1]. */
void SYM_PAIR(const qtk_sym_type *T, const float *x0, const float *x1, const float *w0,
              const float *w1, float *q0, float *q1, float *d)
{
    float X[SP_N], W[SP_N], Q[SP_N], amax[2], max[2];
    amax[0] = sp_amax(x0, &max[0]);
    amax[1] = sp_amax(x1, &max[1]);
    for (int i = 0; i < SP_QB; i += 4) {
        memcpy(X + 2 * i, x0 + i, 4 * sizeof *X);
        memcpy(X + 2 * i + 4, x1 + i, 4 * sizeof *X);
    }
    const bool weighted[2] = { w0 != NULL, w1 != NULL };
    if (w0 || w1) {
        for (int i = 0; i < SP_QB; i += 4)
            for (int k = 0; k < 4; k++) {
                W[2 * i + k] = w0 ? w0[i + k] : 1.f;
                W[2 * i + 4 + k] = w1 ? w1[i + k] : 1.f;
            }
        sp_search(T, X, W, false, weighted, amax, max, Q, d);
    } else {
        sp_search(T, X, W, true, weighted, amax, max, Q, d);
    }
    for (int i = 0; i < SP_QB; i += 4) {
        memcpy(q0 + i, Q + 2 * i, 4 * sizeof *Q);
        memcpy(q1 + i, Q + 2 * i + 4, 4 * sizeof *Q);
    }
}
