/* quant_k_aff.h - the affine k-quant search (q2_k, q4_k, q5_k): one superblock's scales,
 * mins and codes. Included once per instruction set (quant_k.c generic, quant_k_avx2.c with
 * -mavx2) with QK_AFF_BLOCK naming the exported function; every sum runs in quant.h's
 * eight-lane order, so both builds give identical bytes. See quant_k.c for the method. */
#ifndef QK_AFF_BLOCK
#error "define QK_AFF_BLOCK before including quant_k_aff.h"
#endif

#include "dequant.h"

#include <float.h>
#include <math.h>

/* Least-squares fit x ~ s*l + m of one sub-block's codes l under weights with totals
 * (sw, sx, sxx) = (sum w, sum wx, sum wx^2) and code sums (sl, sll, sxl), m clamped to <= 0 as
 * the format requires. Ours (ours true) also needs s >= 0 and falls back to m = 0 when the
 * determinant vanishes; ggml's fit needs a positive determinant. With (s, m) the least-squares solution the
 * residual is sxx - s*sxl - m*sx; it is compared with best scaled by the (positive)
 * determinant, so only a winner pays for divisions. True, with s, m and the residual in *e,
 * when the residual is below best. */
static inline bool aff_ls(double sw, double sx, double sxx, double sl, double sll, double sxl,
                          bool ours, double best, double *s, double *m, double *e)
{
    const double D = sw * sll - sl * sl;
    if (D > 0) {
        const double ns = sw * sxl - sx * sl, nm = sll * sx - sl * sxl; /* s*D, m*D */
        if (nm <= 0) {
            if ((ours && !(ns >= 0)) || !(sxx * D - ns * sxl - nm * sx < best * D))
                return false;
            const double iD = 1 / D;
            *s = ns * iD;
            *m = nm * iD;
            *e = sxx - *s * sxl - *m * sx;
            return true;
        }
    } else if (!ours || !(sll > 0)) {
        return false;
    }
    /* m clamped to 0: s = sxl/sll, residual sxx - sxl^2/sll */
    if ((ours && !(sxl >= 0)) || !(sxx * sll - sxl * sxl < best * sll))
        return false;
    *s = sxl / sll;
    *m = 0;
    *e = sxx - *s * sxl;
    return true;
}

/* Our candidate bookkeeping for one sub-block: totals under our weights, the lowest residual
 * so far and its (scale, -min). */
typedef struct {
    double w, x, xx; /* sum w, sum wx, sum wx^2 */
    double best;
    float s, m;
} aff_ours;

static inline void aff_ours_try(aff_ours *o, double sl, double sll, double sxl)
{
    double s, m, e;
    if (aff_ls(o->w, o->x, o->xx, sl, sll, sxl, true, o->best, &s, &m, &e)) {
        o->best = e;
        o->s = (float)s;
        o->m = (float)m;
    }
}

/* The codes l = round(min(is*u, nmax)) of one sub-block (n = 16 or 32 values) for inverse scale
 * is, in registers (n / 8 of them). */
static inline void aff_codes(int n, const float *u, float is, float nmax, qv8 *L)
{
    const qv8 vis = qv8_set(is), vmax = qv8_set(nmax), z = qv8_set(0.f);
    #pragma GCC unroll 4
    for (int i = 0; i < n / 8; i++)
        L[i] = qv8_round(qv8_min(qv8_max(qv8_mul(vis, qv8_ld(u + 8 * i)), z), vmax));
}

static inline bool aff_codes_same(int n, const qv8 *a, const qv8 *b)
{
    bool same = true;
    #pragma GCC unroll 4
    for (int i = 0; i < n / 8; i++)
        same &= qv8_same(a[i], b[i]);
    return same;
}

/* Sums for the codes L (aff_codes) under two weightings: s[0..2] = sum wo*l, sum wo*l*l,
 * sum wox*l; s[3..5] the same with wr, wrx. */
static inline void aff_sums(int n, const qv8 *L, const float *wo, const float *wox,
                            const float *wr, const float *wrx, double *s)
{
    qv8 a0 = qv8_set(0.f), a1 = a0, a2 = a0, b0 = a0, b1 = a0, b2 = a0;
    #pragma GCC unroll 4
    for (int i = 0; i < n / 8; i++) {
        const qv8 l = L[i];
        qv8 t = qv8_mul(qv8_ld(wo + 8 * i), l);
        a0 = qv8_add(a0, t);
        a1 = qv8_add(a1, qv8_mul(t, l));
        a2 = qv8_add(a2, qv8_mul(qv8_ld(wox + 8 * i), l));
        t = qv8_mul(qv8_ld(wr + 8 * i), l);
        b0 = qv8_add(b0, t);
        b1 = qv8_add(b1, qv8_mul(t, l));
        b2 = qv8_add(b2, qv8_mul(qv8_ld(wrx + 8 * i), l));
    }
    float t[8];
    qv8_sum6(a0, a1, a2, b0, b1, b2, t);
    s[0] = t[0], s[1] = t[1], s[2] = t[2], s[3] = t[3], s[4] = t[4], s[5] = t[5];
}

/* aff_sums of the codes for inverse scale is. */
static inline void aff_sweep(int n, const float *u, const float *wo, const float *wox,
                             const float *wr, const float *wrx, float is, float nmax, double *s)
{
    qv8 L[4];
    aff_codes(n, u, is, nmax, L);
    aff_sums(n, L, wo, wox, wr, wrx, s);
}

/* aff_sweep's first three sums only. */
static inline void aff_sweep3(int n, const float *u, const float *wo, const float *wox, float is,
                              float nmax, double *s)
{
    const qv8 vis = qv8_set(is), vmax = qv8_set(nmax), z = qv8_set(0.f);
    qv8 a0 = z, a1 = a0, a2 = a0;
    for (int i = 0; i < n; i += 8) {
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(vis, qv8_ld(u + i)), z), vmax));
        const qv8 t = qv8_mul(qv8_ld(wo + i), l);
        a0 = qv8_add(a0, t);
        a1 = qv8_add(a1, qv8_mul(t, l));
        a2 = qv8_add(a2, qv8_mul(qv8_ld(wox + i), l));
    }
    float t[4];
    qv_sum4(qv8_fold(a0), qv8_fold(a1), qv8_fold(a2), qv8_fold(a2), t);
    s[0] = t[0], s[1] = t[1], s[2] = t[2];
}

/* sum wr*|s*l + m - x| for the codes of inverse scale is (ggml's q2_k criterion). */
static double aff_mad(int n, const float *u, const float *x, const float *wr, float is, float nmax,
                      float s, float m)
{
    const qv8 vis = qv8_set(is), vmax = qv8_set(nmax), vs = qv8_set(s), vm = qv8_set(m);
    const qv8 z = qv8_set(0.f);
    qv8 a = z;
    for (int i = 0; i < n; i += 8) {
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(vis, qv8_ld(u + i)), z), vmax));
        const qv8 diff = qv8_sub(qv8_add(qv8_mul(vs, l), vm), qv8_ld(x + i));
        a = qv8_add(a, qv8_mul(qv8_ld(wr + i), qv8_abs(diff)));
    }
    return qv8_sum(a);
}

/* sum w*(s*l + m - x)^2 from the sums (l, ll, xl) and the totals (w, x, xx). */
static inline double aff_quad(double s, double m, const double *S, double sw, double sx, double sxx)
{
    return s * s * S[1] + 2 * s * m * S[0] + m * m * sw - 2 * s * S[2] - 2 * m * sx + sxx;
}

static inline double lsum(int n, const float *a)
{
    qv8 t = qv8_set(0.f);
    for (int i = 0; i < n; i += 8)
        t = qv8_add(t, qv8_ld(a + i));
    return qv8_sum(t);
}

static inline double lsum2(int n, const float *a, const float *b)
{
    qv8 t = qv8_set(0.f);
    for (int i = 0; i < n; i += 8)
        t = qv8_add(t, qv8_mul(qv8_ld(a + i), qv8_ld(b + i)));
    return qv8_sum(t);
}

/* One sub-block (n = 16 or 32): ggml's make_qkx2_quants choice (rs, rm = the_min) under ggml's
 * weights and criterion, and ours (os, om) under weights wo, from the same candidate codes.
 * ggml's choice is reproduced with lane-ordered sums, so it can differ from ggml's own only
 * where two candidates tie to rounding precision. */
static inline __attribute__((always_inline)) void aff_fit_n(const aff_cfg *c, const int n, const float *x,
                                                             const float *wo, bool own, float *rs,
                                                             float *rm, float *os, float *om)
{
    const float fn = (float)c->nmax;
    float wr[32], u[32], wox[32], wrx[32];
    if (c->wabs) {
        for (int i = 0; i < n; i++)
            wr[i] = fabsf(x[i]);
    } else {
        const float av = sqrtf((float)lsum2(n, x, x) / (float)n);
        for (int i = 0; i < n; i++)
            wr[i] = av + fabsf(x[i]);
    }
    float min = x[0], max = x[0];
    for (int i = 1; i < n; i++) {
        min = x[i] < min ? x[i] : min;
        max = x[i] > max ? x[i] : max;
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        *rs = *os = 0.f;
        *rm = *om = -min;
        return;
    }
    for (int i = 0; i < n; i++) {
        u[i] = x[i] - min;
        wox[i] = wo[i] * x[i];
        wrx[i] = wr[i] * x[i];
    }
    const double swr = lsum(n, wr), sxr = lsum(n, wrx), sxxr = lsum2(n, wrx, x);
    aff_ours o = { lsum(n, wo), lsum(n, wox), lsum2(n, wox, x), DBL_MAX, 0.f, 0.f };
    float range = max - min;
    double S[6], P[6];
    float is = fn / range;
    float scale = 1 / is, bmin = min;
    aff_sweep(n, u, wo, wox, wr, wrx, is, fn, S);
    if (own)
        aff_ours_try(&o, S[0], S[1], S[2]);
    double best = c->mad ? aff_mad(n, u, x, wr, is, fn, scale, min)
                         : aff_quad(scale, min, S + 3, swr, sxr, sxxr);
    qv8 Lc[4], Lp[4];
    for (int k = 0; k <= c->nstep; k++) {
        is = (c->rmin + c->rdelta * (float)k + fn) / range;
        /* neighbouring inverse scales often give the same codes: nothing new to score. The
         * same codes give the same sums (the weights never change), so they are not summed. */
        aff_codes(n, u, is, fn, Lc);
        if (k > 0 && aff_codes_same(n, Lc, Lp))
            continue;
        aff_sums(n, Lc, wo, wox, wr, wrx, S);
        #pragma GCC unroll 4
        for (int i = 0; i < n / 8; i++)
            Lp[i] = Lc[i];
        if (k > 0 && memcmp(S, P, sizeof S) == 0)
            continue;
        memcpy(P, S, sizeof S);
        if (own)
            aff_ours_try(&o, S[0], S[1], S[2]);
        double ts, tm, e;
        if (c->mad) {
            /* ggml's q2_k scores the fit by sum wr*|error| */
            const double D = swr * S[4] - S[3] * S[3];
            if (!(D > 0))
                continue;
            ts = (swr * S[5] - sxr * S[3]) / D;
            tm = (S[4] * sxr - S[3] * S[5]) / D;
            if (tm > 0) {
                tm = 0;
                ts = S[5] / S[4];
            }
            e = aff_mad(n, u, x, wr, is, fn, (float)ts, (float)tm);
        } else if (!aff_ls(swr, sxr, sxxr, S[3], S[4], S[5], false, best, &ts, &tm, &e)) {
            continue;
        }
        if (e < best) {
            best = e;
            scale = (float)ts;
            bmin = (float)tm;
            /* as ggml does: later candidates are coded relative to the new minimum */
            range = max - bmin;
            for (int i = 0; i < n; i++)
                u[i] = x[i] - bmin;
        }
    }
    range = max - min;
    /* ours only: the same with the lowest codes clipped (code 0 starts 1/4 and 1/2 step above
     * the minimum), a coarser sweep */
    for (int sh = 1; own && sh <= 2; sh++) {
        const float mn2 = min + (float)sh * 0.25f * range / fn;
        for (int i = 0; i < n; i++) {
            const float t = x[i] - mn2;
            u[i] = t > 0 ? t : 0;
        }
        for (int k = 0; k <= 3; k++) {
            is = (-1.f + 0.6f * (float)k + fn) / (max - mn2);
            aff_sweep3(n, u, wo, wox, is, fn, S);
            if (k > 0 && memcmp(S, P, 3 * sizeof *S) == 0)
                continue;
            memcpy(P, S, 3 * sizeof *S);
            aff_ours_try(&o, S[0], S[1], S[2]);
        }
    }
    *rs = scale;
    *rm = -bmin;
    if (o.best < DBL_MAX) {
        *os = o.s;
        *om = -o.m;
    } else {
        *os = scale;
        *om = -bmin;
    }
}

/* aff_fit_n built for each sub-block size (16 or 32 values). */
static void aff_fit(const aff_cfg *c, const float *x, const float *wo, bool own, float *rs,
                    float *rm, float *os, float *om)
{
    if (c->sub == 32)
        aff_fit_n(c, 32, x, wo, own, rs, rm, os, om);
    else
        aff_fit_n(c, 16, x, wo, own, rs, rm, os, om);
}

/* Exact decoded error of codes L (floats) with y = dl*q - dm. */
static float aff_err(int n, const float *x, const float *w, bool one, const float *L, float dl,
                     float dm)
{
    const qv8 vdl = qv8_set(dl), vdm = qv8_set(dm);
    qv8 a = qv8_set(0.f);
    for (int i = 0; i < n; i += 8) {
        const qv8 diff = qv8_sub(qv8_sub(qv8_mul(vdl, qv8_ld(L + i)), vdm), qv8_ld(x + i));
        a = qv8_add(a, qv8_mul(one ? diff : qv8_mul(qv8_ld(w + i), diff), diff));
    }
    return qv8_sum(a);
}

/* Codes (rounded, clamped) and exact decoded error of one sub-block for sub-scale ls and sub-min
 * lm. div: round (x+dm)/dl as ggml's reference does; else (x+dm)*(1/dl). */
static float aff_sub(const aff_cfg *c, const float *x, const float *w, bool one, float d,
                     float dmin, int ls, int lm, bool div, float *L)
{
    const int n = c->sub, nmax = c->nmax;
    const float dl = d * (float)ls, dm = dmin * (float)lm;
    if (dl == 0.f) {
        for (int i = 0; i < n; i++)
            L[i] = 0.f;
    } else {
        const qv8 vdl = qv8_set(dl), vid = qv8_set(1.f / dl), vdm = qv8_set(dm), z = qv8_set(0.f);
        const qv8 vmax = qv8_set((float)nmax);
        for (int i = 0; i < n; i += 8) {
            const qv8 t = qv8_add(qv8_ld(x + i), vdm);
            const qv8 v = div ? qv8_div(t, vdl) : qv8_mul(t, vid);
            qv8_st(L + i, qv8_round(qv8_min(qv8_max(v, z), vmax)));
        }
    }
    /* each call with a constant, so each loop is built without the test */
    return one ? aff_err(n, x, w, true, L, dl, dm) : aff_err(n, x, w, false, L, dl, dm);
}

static float aff_total(const aff_cfg *c, const aff_st *st)
{
    float t = 0;
    for (int j = 0; j < c->nsub; j++)
        t += st->e[j];
    return t;
}

/* quantize_row_*_ref's superblock step: sub-scales and mins relative to their maxima. */
static void aff_init(const aff_cfg *c, const float *x, const float *w, const float *sc,
                     const float *mn, aff_st *st)
{
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < c->nsub; j++) {
        if (sc[j] > max_scale)
            max_scale = sc[j];
        if (mn[j] > max_min)
            max_min = mn[j];
    }
    const float fs = (float)c->smax;
    const float inv_s = max_scale > 0 ? fs / max_scale : 0.f;
    const float inv_m = max_min > 0 ? fs / max_min : 0.f;
    for (int j = 0; j < c->nsub; j++) {
        st->ls[j] = qclr(inv_s * sc[j], 0, c->smax);
        st->lm[j] = qclr(inv_m * mn[j], 0, c->smax);
    }
    st->d = qtk_qh16(max_scale / fs);
    st->dmin = qtk_qh16(max_min / fs);
    for (int j = 0; j < c->nsub; j++)
        st->e[j] = aff_sub(c, x + j * c->sub, w + j * c->sub, st->one, st->d, st->dmin, st->ls[j],
                           st->lm[j], true, st->L + j * c->sub);
}

/* Re-choose (ls, lm) of sub-block j given d, dmin: neighbours and the LS value of its codes. */
static void aff_refine_sub(const aff_cfg *c, const float *x, const float *w, aff_st *st, int j,
                           int passes)
{
    const int n = c->sub;
    const float *xj = x + j * n, *wj = w + j * n;
    float *Lj = st->L + j * n;
    float T[32], wl[32];
    for (int pass = 0; pass < passes; pass++) {
        int cand[24][2], nc = 0;
        const int ls = st->ls[j], lm = st->lm[j];
        cand[nc][0] = ls + 1, cand[nc++][1] = lm;
        cand[nc][0] = ls - 1, cand[nc++][1] = lm;
        cand[nc][0] = ls, cand[nc++][1] = lm + 1;
        cand[nc][0] = ls, cand[nc++][1] = lm - 1;
        /* least squares of x ~ s*q - m for the current codes */
        const float *wlj = Lj; /* w*L is L when the weights are all 1 */
        if (!st->one) {
            for (int i = 0; i < n; i++)
                wl[i] = wj[i] * Lj[i];
            wlj = wl;
        }
        const double sw = lsum(n, wj), sl = lsum(n, wlj), sll = lsum2(n, wlj, Lj);
        const double sx = lsum2(n, wj, xj), sxl = lsum2(n, wlj, xj);
        const double D = sw * sll - sl * sl;
        if (D > 0 && st->d > 0) {
            const double s = (sw * sxl - sx * sl) / D;
            const double m = -(sll * sx - sl * sxl) / D;
            const int a = qclr((float)(s / (double)st->d), 0, c->smax);
            const int b = st->dmin > 0 ? qclr((float)(m / (double)st->dmin), 0, c->smax) : lm;
            cand[nc][0] = a, cand[nc++][1] = b;
            cand[nc][0] = a + 1, cand[nc++][1] = b;
            cand[nc][0] = a - 1, cand[nc++][1] = b;
        }
        bool changed = false;
        for (int k = 0; k < nc; k++) {
            const int a = cand[k][0], b = cand[k][1];
            if (a < 0 || a > c->smax || b < 0 || b > c->smax || (a == ls && b == lm))
                continue;
            bool dup = false;
            for (int k2 = 0; k2 < k && !dup; k2++)
                dup = cand[k2][0] == a && cand[k2][1] == b;
            if (dup)
                continue;
            if (b != 0 && st->dmin == 0.f)
                continue;
            const float e = aff_sub(c, xj, wj, st->one, st->d, st->dmin, a, b, false, T);
            if (e < st->e[j]) {
                st->e[j] = e;
                st->ls[j] = a;
                st->lm[j] = b;
                memcpy(Lj, T, (size_t)n * sizeof *T);
                changed = true;
            }
        }
        if (!changed)
            break;
    }
}

/* Least-squares d, dmin over the superblock for the current sub-scales and codes. */
static bool aff_refit(const aff_cfg *c, const float *x, const float *w, const aff_st *st, float *d,
                      float *dmin)
{
    double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
    float wl[32];
    for (int j = 0; j < c->nsub; j++) {
        const int n = c->sub;
        const float *xj = x + j * n, *wj = w + j * n, *Lj = st->L + j * n;
        const float *wlj = Lj; /* w*L is L when the weights are all 1 */
        if (!st->one) {
            for (int i = 0; i < n; i++)
                wl[i] = wj[i] * Lj[i];
            wlj = wl;
        }
        const double qa = lsum(n, wlj), qaa = lsum2(n, wlj, Lj), qx = lsum2(n, wlj, xj);
        const double qw = lsum(n, wj), qwx = lsum2(n, wj, xj);
        const double ls = (double)st->ls[j], b = -(double)st->lm[j];
        saa += ls * ls * qaa;
        sab += ls * b * qa;
        sbb += b * b * qw;
        sax += ls * qx;
        sbx += b * qwx;
    }
    double dd, dm;
    const double D = saa * sbb - sab * sab;
    if (sbb > 0 && D > 0) {
        dd = (sbb * sax - sab * sbx) / D;
        dm = (saa * sbx - sab * sax) / D;
        if (dm < 0) {
            dm = 0;
            dd = sax / saa;
        }
    } else if (saa > 0) {
        dm = st->dmin;
        dd = (sax - dm * sab) / saa;
    } else {
        return false;
    }
    if (!(dd > 0))
        return false;
    *d = qtk_qh16((float)dd);
    *dmin = qtk_qh16((float)dm);
    return *d > 0;
}

static void aff_refine(const aff_cfg *c, const float *x, const float *w, aff_st *st, int rounds)
{
    for (int j = 0; j < c->nsub; j++)
        aff_refine_sub(c, x, w, st, j, 1);
    for (int r = 0; r < rounds; r++) {
        aff_st t;
        t.one = st->one;
        if (!aff_refit(c, x, w, st, &t.d, &t.dmin))
            return;
        if (t.d == st->d && t.dmin == st->dmin)
            return;
        memcpy(t.ls, st->ls, sizeof t.ls);
        memcpy(t.lm, st->lm, sizeof t.lm);
        for (int j = 0; j < c->nsub; j++) {
            if (t.dmin == 0.f)
                t.lm[j] = 0;
            t.e[j] = aff_sub(c, x + j * c->sub, w + j * c->sub, t.one, t.d, t.dmin, t.ls[j], t.lm[j],
                             false, t.L + j * c->sub);
            aff_refine_sub(c, x, w, &t, j, 1);
        }
        if (!(aff_total(c, &t) < aff_total(c, st)))
            return;
        *st = t;
    }
}

void QK_AFF_BLOCK(const aff_cfg *c, const float *x, const float *w, bool uniform, aff_st *st)
{
    float rs[16] = { 0 }, rm[16] = { 0 }, os[16], om[16];
    const bool own = !(uniform && c->ref_only);
#ifdef AFF_FIT_LANES
    /* eight sub-blocks of 32 scored by ggml's criterion (q4_k, q5_k): one per lane */
    if (c->sub == 32 && c->nsub == 8 && !c->mad)
        AFF_FIT_LANES(c, x, w, own, rs, rm, os, om);
    else
#endif
        for (int j = 0; j < c->nsub; j++)
            aff_fit(c, x + j * c->sub, w + j * c->sub, own, &rs[j], &rm[j], &os[j], &om[j]);
    st->one = uniform;
    aff_init(c, x, w, rs, rm, st);
    if (own) {
        aff_st o;
        o.one = uniform;
        aff_init(c, x, w, os, om, &o);
        if (aff_total(c, &o) < aff_total(c, st))
            *st = o;
    }
    if (aff_total(c, st) > 0)
        aff_refine(c, x, w, st, 1);
}
