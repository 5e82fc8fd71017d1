/* quant_k_symfit.h - the float fits of one q3_k/q6_k sub-block (ggml's and ours), from a
 * sweep of candidate inverse scales. Included once per instruction set (quant_k.c generic,
 * quant_k_avx2.c with -mavx2) with SYM_FITS naming the exported function. Candidates are
 * swept two at a time, one in each four-lane half of an eight-lane register (quant.h's qv8:
 * one AVX2 register, or two four-lane halves), each half doing exactly the four-lane sweep of
 * one candidate; the candidates are then judged one by one in their order. So both builds give
 * the one-candidate sweep's results. See quant_k.c for the method. */
#ifndef SYM_FITS
#error "define SYM_FITS before including quant_k_symfit.h"
#endif

/* Ours: rank candidate codes by the continuous LS residual (sum wxl)^2 / sum wll. */
typedef struct {
    double best;
    float s;
} sym_ours;

/* The largest |x| of a sub-block of 16 (the first one on a tie) and, in *max, that value. */
static inline float sub_absmax(const float *x, float *max)
{
    float amax = 0;
    *max = 0;
    for (int i = 0; i < SUB; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            *max = x[i];
        }
    }
    return amax;
}

/* Sums for the codes l = round(clamp(is*x, lo, hi)) of one sub-block, for two inverse scales
 * at once (is0's in s0, is1's in s1; each half of the registers does the four-lane sweep of
 * one): s[0] = sum wox*l, s[1] = sum wo*l*l, s[2] = sum wrx*l, s[3] = sum wr*l*l. */
static inline void sym_sweep_x2(const float *x, const float *wo, const float *wox, const float *wr,
                                const float *wrx, float is0, float is1, float lo, float hi,
                                double *s0, double *s1)
{
    const qv8 vis = qv8_set2(is0, is1), vlo = qv8_set(lo), vhi = qv8_set(hi);
    qv8 a0 = qv8_set(0.f), a1 = a0, b0 = a0, b1 = a0;
    for (int i = 0; i < SUB; i += 4) {
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(vis, qv8_ld2(x + i)), vlo), vhi));
        a0 = qv8_add(a0, qv8_mul(qv8_ld2(wox + i), l));
        a1 = qv8_add(a1, qv8_mul(qv8_mul(qv8_ld2(wo + i), l), l));
        b0 = qv8_add(b0, qv8_mul(qv8_ld2(wrx + i), l));
        b1 = qv8_add(b1, qv8_mul(qv8_mul(qv8_ld2(wr + i), l), l));
    }
    float t[8];
    qv8_sum4h(a0, a1, b0, b1, t);
    for (int k = 0; k < 4; k++)
        s0[k] = t[k], s1[k] = t[4 + k];
}

/* sym_sweep2 of two inverse scales at once */
static inline void sym_sweep2_x2(const float *x, const float *wo, const float *wox, float is0,
                                 float is1, float lo, float hi, double *s0, double *s1)
{
    const qv8 vis = qv8_set2(is0, is1), vlo = qv8_set(lo), vhi = qv8_set(hi);
    qv8 a0 = qv8_set(0.f), a1 = a0;
    for (int i = 0; i < SUB; i += 4) {
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(vis, qv8_ld2(x + i)), vlo), vhi));
        a0 = qv8_add(a0, qv8_mul(qv8_ld2(wox + i), l));
        a1 = qv8_add(a1, qv8_mul(qv8_mul(qv8_ld2(wo + i), l), l));
    }
    float t[8];
    qv8_sum4h(a0, a1, a1, a1, t);
    s0[0] = t[0], s0[1] = t[1], s1[0] = t[4], s1[1] = t[5];
}

/* sym_sweep2_x2 of four inverse scales (two pairs) at once: s[k] = {sum wox*l, sum wo*l*l} of
 * is[k], each in sym_sweep2_x2's lane order. */
static inline void sym_sweep2_x4(const float *x, const float *wo, const float *wox, const float *is,
                                 float lo, float hi, double (*s)[2])
{
    const qv8 vis0 = qv8_set2(is[0], is[1]), vis1 = qv8_set2(is[2], is[3]);
    const qv8 vlo = qv8_set(lo), vhi = qv8_set(hi);
    qv8 a0 = qv8_set(0.f), a1 = a0, c0 = a0, c1 = a0;
    for (int i = 0; i < SUB; i += 4) {
        const qv8 xv = qv8_ld2(x + i), woxv = qv8_ld2(wox + i), wov = qv8_ld2(wo + i);
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(vis0, xv), vlo), vhi));
        const qv8 m = qv8_round(qv8_min(qv8_max(qv8_mul(vis1, xv), vlo), vhi));
        a0 = qv8_add(a0, qv8_mul(woxv, l));
        a1 = qv8_add(a1, qv8_mul(qv8_mul(wov, l), l));
        c0 = qv8_add(c0, qv8_mul(woxv, m));
        c1 = qv8_add(c1, qv8_mul(qv8_mul(wov, m), m));
    }
    float t[8];
    qv8_sum4h(a0, a1, c0, c1, t);
    s[0][0] = t[0], s[0][1] = t[1], s[1][0] = t[4], s[1][1] = t[5];
    s[2][0] = t[2], s[2][1] = t[3], s[3][0] = t[6], s[3][1] = t[7];
}

/* Ours from n (at most 28) candidates' sums s[k] = {sum wox*l, sum wo*l*l}, tried in their
 * order: the best score sxl^2 / sll (sll > 0) wins, an equal one later does not. The scores'
 * divisions are done four at a time (the same IEEE quotients as one by one). */
static inline void sym_ours_try_n(sym_ours *o, const double (*s)[2], int n)
{
    double num[28], den[28], sc[28];
    for (int k = 0; k < (n + 3) / 4 * 4; k++) {
        const bool pos = k < n && s[k][1] > 0;
        num[k] = pos ? s[k][0] * s[k][0] : 0.0;
        den[k] = pos ? s[k][1] : 1.0;
    }
    for (int k = 0; k < n; k += 4)
        qv_div4d(num + k, den + k, sc + k);
    /* the winner without a branch per candidate (which one wins is data: often mispredicted),
     * its scale divided out once */
    int bk = -1;
    for (int k = 0; k < n; k++) {
        const bool win = s[k][1] > 0 && sc[k] > o->best;
        o->best = win ? sc[k] : o->best;
        bk = win ? k : bk;
    }
    if (bk >= 0)
        o->s = (float)(s[bk][0] / s[bk][1]);
}

/* ggml's fit of one sub-block (q6: make_qx_quants(16, 32, rmse_type 1) with weights x^2, its
 * candidates shared with our sweep) in *rs (q3: make_q3_quants', given in *rs), ours in *os. Ours sweeps the
 * largest |x| onto codes near lo and near hi and ranks by LS residual under wo. */
void SYM_FITS(const sym_cfg *c, const float *x, const float *wo, bool q6, float *rs, float *os)
{
    float max;
    const float amax = sub_absmax(x, &max);
    if (amax < GROUP_EPS) {
        *rs = *os = 0.f;
        return;
    }
    float wox[SUB], wr[SUB], wrx[SUB];
    for (int i = 0; i < SUB; i++) {
        wox[i] = wo[i] * x[i];
        wr[i] = x[i] * x[i];
        wrx[i] = wr[i] * x[i];
    }
    const float lo = (float)c->lo, hi = (float)c->hi;
    sym_ours o = { -1.0, 0.f };
    double S[2][4];
    if (q6) {
        /* ggml's 19 inverse scales in its order: -nmax/max first, then is = -9..9 without 0 */
        const float nmax = (float)-c->lo;
        float isc[19];
        isc[0] = -nmax / max;
        for (int is = -9, k = 1; is <= 9; ++is)
            if (is != 0)
                isc[k++] = -(nmax + 0.1f * (float)is) / max;
        double scale = 0.0, best = 0.0;
        double so[25][2]; /* ours: ggml's 19 candidates', then six more */
        for (int k = 0; k < 19; k += 2) {
            const int nk = k + 1 < 19 ? 2 : 1; /* the last one alone (its copy unused) */
            sym_sweep_x2(x, wo, wox, wr, wrx, isc[k], isc[k + nk - 1], lo, hi, S[0], S[1]);
            for (int h = 0; h < nk; h++) {
                const double *T = S[h];
                so[k + h][0] = T[0];
                so[k + h][1] = T[1];
                if (k + h == 0) {
                    scale = T[3] != 0 ? T[2] / T[3] : 0.0;
                    best = scale * T[2];
                } else if (T[3] > 0 && T[2] * T[2] > best * T[3]) {
                    scale = T[2] / T[3];
                    best = scale * T[2];
                }
            }
        }
        *rs = (float)scale;
        float is[6];
        for (int k = 0; k < 6; k++)
            is[k] = (hi + 0.2f * (float)k - 0.4f) / max;
        sym_sweep2_x4(x, wo, wox, is, lo, hi, so + 19);
        sym_sweep2_x2(x, wo, wox, is[4], is[5], lo, hi, S[0], S[1]);
        so[23][0] = S[0][0], so[23][1] = S[0][1], so[24][0] = S[1][0], so[24][1] = S[1][1];
        sym_ours_try_n(&o, (const double (*)[2])so, 25);
    } else { /* *rs: ggml's, given */
        float is[12];
        double s2[12][2];
        for (int k = 0; k < 6; k++) {
            const float off = 0.2f * (float)k - 0.5f;
            is[2 * k] = (lo - off) / max;
            is[2 * k + 1] = (hi + off) / max;
        }
        for (int k = 0; k < 12; k += 4)
            sym_sweep2_x4(x, wo, wox, is + k, lo, hi, s2 + k);
        sym_ours_try_n(&o, (const double (*)[2])s2, 12);
    }
    *os = o.best > 0 ? o.s : *rs;
}
