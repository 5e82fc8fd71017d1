/* quant_k.c - F32 -> ggml k-quants (q2_k q3_k q4_k q5_k q6_k), superblocks of 256.
 *
 * Per superblock:
 *  1. every sub-block gets two float fits from one sweep over candidate inverse scales: ggml's
 *     (make_qkx2_quants / make_qx_quants / make_q3_quants with ggml's own weights and criterion,
 *     replicated from its formulas; the sums are accumulated in 4 lanes, so near-ties can
 *     resolve differently) and ours (least squares under the real objective: uniform weights,
 *     or the importance matrix; for the affine types also sweeps with the lowest codes
 *     clipped);
 *  2. each set of fits is quantized the way quantize_row_*_ref does it (fp16 d/dmin, 4/6/8-bit
 *     sub-scales, codes re-rounded against the decoded scales); the encoding with the lower
 *     exact decoded error starts, so the result is not worse than ggml's reference;
 *  3. refinement that only ever accepts improvements: per sub-block, the integer scale (and
 *     min) is re-chosen among its neighbours and the least-squares value for its codes; then
 *     the superblock d (and dmin) is refitted by least squares over all 256 values, rounded to
 *     fp16, codes re-rounded and sub-blocks re-chosen; kept only when the error drops.
 * Errors are always those of the values qtk_dequant_ggml produces (same float operations). */
#define QTK_QUANT_IMPL
#include "quant.h"
#include "dequant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define QK 256
#define GROUP_EPS 1e-15f

static inline int qrint(float v)
{
    const float t = v + 12582912.f;
    uint32_t i;
    memcpy(&i, &t, sizeof i);
    return (int)(i & 0x007fffffu) - 0x00400000;
}

static inline int qclr(float v, int lo, int hi)
{
    if (v < (float)lo)
        v = (float)lo;
    if (v > (float)hi)
        v = (float)hi;
    return qrint(v);
}

static inline void put16(uint8_t *p, float v)
{
    const uint16_t h = qtk_f32_to_fp16(v);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

/* ======================= affine types: y = (d*ls)*q - dmin*lm ======================= */

typedef struct {
    int sub, nsub, nmax, smax; /* sub-block size and count, code max, sub-scale max */
    float rmin, rdelta;        /* ggml's make_qkx2_quants sweep */
    int nstep;
    bool mad;                  /* ggml's sweep scores |error| (q2_k) */
    bool wabs;                 /* ggml's weights: |x| (q2_k) or rms + |x| */
} aff_cfg;

static const aff_cfg k_q2k = { 16, 16, 3, 15, -0.5f, 0.1f, 15, true, true };
static const aff_cfg k_q4k = { 32, 8, 15, 63, -1.f, 0.1f, 20, false, false };
static const aff_cfg k_q5k = { 32, 8, 31, 63, -0.5f, 0.1f, 15, false, false };

typedef struct {
    float d, dmin;
    int ls[16], lm[16];
    float e[16];
    float L[QK]; /* codes, as floats */
} aff_st;

/* Our candidate bookkeeping for one sub-block: least-squares (scale, -min) of codes under
 * weights w (sums sl, sll, sxl), min clamped to <= 0 as the format requires; keeps the lowest
 * residual. */
typedef struct {
    double w, x, xx; /* sum w, sum wx, sum wx^2 */
    double best;
    float s, m;
} aff_ours;

static inline void aff_ours_try(aff_ours *o, double sl, double sll, double sxl)
{
    const double D = o->w * sll - sl * sl;
    double s, m;
    if (D > 0) {
        const double iD = 1 / D;
        s = (o->w * sxl - o->x * sl) * iD;
        m = (sll * o->x - sl * sxl) * iD;
        if (m > 0) {
            m = 0;
            s = sxl / sll;
        }
    } else if (sll > 0) {
        m = 0;
        s = sxl / sll;
    } else {
        return;
    }
    if (!(s >= 0))
        return;
    const double e =
        s * s * sll + 2 * s * m * sl + m * m * o->w - 2 * s * sxl - 2 * m * o->x + o->xx;
    if (e < o->best) {
        o->best = e;
        o->s = (float)s;
        o->m = (float)m;
    }
}

/* Sums for the codes l = round(min(is*u, nmax)) of one sub-block under two weightings:
 * s[0..2] = sum wo*l, sum wo*l*l, sum wox*l; s[3..5] the same with wr, wrx. */
static inline void aff_sweep(int n, const float *u, const float *wo, const float *wox,
                             const float *wr, const float *wrx, float is, float nmax, double *s)
{
    const qv4 vis = qv_set(is), vmax = qv_set(nmax), z = qv_set(0.f);
    qv4 a0 = z, a1 = a0, a2 = a0, b0 = a0, b1 = a0, b2 = a0;
    for (int i = 0; i < n; i += 4) {
        const qv4 l = qv_round(qv_min(qv_max(qv_mul(vis, qv_ld(u + i)), z), vmax));
        qv4 t = qv_mul(qv_ld(wo + i), l);
        a0 = qv_add(a0, t);
        a1 = qv_add(a1, qv_mul(t, l));
        a2 = qv_add(a2, qv_mul(qv_ld(wox + i), l));
        t = qv_mul(qv_ld(wr + i), l);
        b0 = qv_add(b0, t);
        b1 = qv_add(b1, qv_mul(t, l));
        b2 = qv_add(b2, qv_mul(qv_ld(wrx + i), l));
    }
    float t[8];
    qv_sum4(a0, a1, a2, b0, t);
    qv_sum4(b1, b2, b2, b2, t + 4);
    s[0] = t[0], s[1] = t[1], s[2] = t[2], s[3] = t[3], s[4] = t[4], s[5] = t[5];
}

/* aff_sweep's first three sums only. */
static inline void aff_sweep3(int n, const float *u, const float *wo, const float *wox, float is,
                              float nmax, double *s)
{
    const qv4 vis = qv_set(is), vmax = qv_set(nmax), z = qv_set(0.f);
    qv4 a0 = z, a1 = a0, a2 = a0;
    for (int i = 0; i < n; i += 4) {
        const qv4 l = qv_round(qv_min(qv_max(qv_mul(vis, qv_ld(u + i)), z), vmax));
        const qv4 t = qv_mul(qv_ld(wo + i), l);
        a0 = qv_add(a0, t);
        a1 = qv_add(a1, qv_mul(t, l));
        a2 = qv_add(a2, qv_mul(qv_ld(wox + i), l));
    }
    float t[4];
    qv_sum4(a0, a1, a2, a2, t);
    s[0] = t[0], s[1] = t[1], s[2] = t[2];
}

/* sum wr*|s*l + m - x| for the codes of inverse scale is (ggml's q2_k criterion). */
static double aff_mad(int n, const float *u, const float *x, const float *wr, float is, float nmax,
                      float s, float m)
{
    const qv4 vis = qv_set(is), vmax = qv_set(nmax), vs = qv_set(s), vm = qv_set(m);
    const qv4 z = qv_set(0.f);
    qv4 a = z;
    for (int i = 0; i < n; i += 4) {
        const qv4 l = qv_round(qv_min(qv_max(qv_mul(vis, qv_ld(u + i)), z), vmax));
        const qv4 diff = qv_sub(qv_add(qv_mul(vs, l), vm), qv_ld(x + i));
        a = qv_add(a, qv_mul(qv_ld(wr + i), qv_abs(diff)));
    }
    return qv_sum(a);
}

/* sum w*(s*l + m - x)^2 from the sums (l, ll, xl) and the totals (w, x, xx). */
static inline double aff_quad(double s, double m, const double *S, double sw, double sx, double sxx)
{
    return s * s * S[1] + 2 * s * m * S[0] + m * m * sw - 2 * s * S[2] - 2 * m * sx + sxx;
}

static inline double lsum(int n, const float *a)
{
    qv4 t = qv_set(0.f);
    for (int i = 0; i < n; i += 4)
        t = qv_add(t, qv_ld(a + i));
    return qv_sum(t);
}

static inline double lsum2(int n, const float *a, const float *b)
{
    qv4 t = qv_set(0.f);
    for (int i = 0; i < n; i += 4)
        t = qv_add(t, qv_mul(qv_ld(a + i), qv_ld(b + i)));
    return qv_sum(t);
}

/* One sub-block (n = 16 or 32): ggml's make_qkx2_quants choice (rs, rm = the_min) under ggml's
 * weights and criterion, and ours (os, om) under weights wo, from the same candidate codes.
 * ggml's choice is reproduced with lane-ordered sums, so it can differ from ggml's own only
 * where two candidates tie to rounding precision. */
static void aff_fit(const aff_cfg *c, const float *x, const float *wo, float *rs, float *rm,
                    float *os, float *om)
{
    const int n = c->sub;
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
    aff_ours_try(&o, S[0], S[1], S[2]);
    double best = c->mad ? aff_mad(n, u, x, wr, is, fn, scale, min)
                         : aff_quad(scale, min, S + 3, swr, sxr, sxxr);
    for (int k = 0; k <= c->nstep; k++) {
        is = (c->rmin + c->rdelta * (float)k + fn) / range;
        aff_sweep(n, u, wo, wox, wr, wrx, is, fn, S);
        /* neighbouring inverse scales often give the same codes: nothing new to score */
        if (k > 0 && memcmp(S, P, sizeof S) == 0)
            continue;
        memcpy(P, S, sizeof S);
        aff_ours_try(&o, S[0], S[1], S[2]);
        const double D = swr * S[4] - S[3] * S[3];
        if (D > 0) {
            const double iD = 1 / D;
            double ts = (swr * S[5] - sxr * S[3]) * iD;
            double tm = (S[4] * sxr - S[3] * S[5]) * iD;
            if (tm > 0) {
                tm = 0;
                ts = S[5] / S[4];
            }
            const double e = c->mad ? aff_mad(n, u, x, wr, is, fn, (float)ts, (float)tm)
                                    : aff_quad(ts, tm, S + 3, swr, sxr, sxxr);
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
    }
    range = max - min;
    /* ours only: the same with the lowest codes clipped (code 0 starts 1/4 and 1/2 step above
     * the minimum), a coarser sweep */
    for (int sh = 1; sh <= 2; sh++) {
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

/* Exact decoded error of codes L (floats) with y = dl*q - dm. */
static float aff_err(int n, const float *x, const float *w, const float *L, float dl, float dm)
{
    const qv4 vdl = qv_set(dl), vdm = qv_set(dm);
    qv4 a = qv_set(0.f);
    for (int i = 0; i < n; i += 4) {
        const qv4 diff = qv_sub(qv_sub(qv_mul(vdl, qv_ld(L + i)), vdm), qv_ld(x + i));
        a = qv_add(a, qv_mul(qv_mul(qv_ld(w + i), diff), diff));
    }
    return qv_sum(a);
}

/* Codes (rounded, clamped) and exact decoded error of one sub-block for sub-scale ls and sub-min
 * lm. div: round (x+dm)/dl as ggml's reference does; else (x+dm)*(1/dl). */
static float aff_sub(const aff_cfg *c, const float *x, const float *w, float d, float dmin, int ls,
                     int lm, bool div, float *L)
{
    const int n = c->sub, nmax = c->nmax;
    const float dl = d * (float)ls, dm = dmin * (float)lm;
    if (dl == 0.f) {
        for (int i = 0; i < n; i++)
            L[i] = 0.f;
    } else {
        const qv4 vdl = qv_set(dl), vid = qv_set(1.f / dl), vdm = qv_set(dm), z = qv_set(0.f);
        const qv4 vmax = qv_set((float)nmax);
        for (int i = 0; i < n; i += 4) {
            const qv4 t = qv_add(qv_ld(x + i), vdm);
            const qv4 v = div ? qv_div(t, vdl) : qv_mul(t, vid);
            qv_st(L + i, qv_round(qv_min(qv_max(v, z), vmax)));
        }
    }
    return aff_err(n, x, w, L, dl, dm);
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
        st->e[j] = aff_sub(c, x + j * c->sub, w + j * c->sub, st->d, st->dmin, st->ls[j],
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
        for (int i = 0; i < n; i++)
            wl[i] = wj[i] * Lj[i];
        const double sw = lsum(n, wj), sl = lsum(n, wl), sll = lsum2(n, wl, Lj);
        const double sx = lsum2(n, wj, xj), sxl = lsum2(n, wl, xj);
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
            const float e = aff_sub(c, xj, wj, st->d, st->dmin, a, b, false, T);
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
        for (int i = 0; i < n; i++)
            wl[i] = wj[i] * Lj[i];
        const double qa = lsum(n, wl), qaa = lsum2(n, wl, Lj), qx = lsum2(n, wl, xj);
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
        if (!aff_refit(c, x, w, st, &t.d, &t.dmin))
            return;
        if (t.d == st->d && t.dmin == st->dmin)
            return;
        memcpy(t.ls, st->ls, sizeof t.ls);
        memcpy(t.lm, st->lm, sizeof t.lm);
        for (int j = 0; j < c->nsub; j++) {
            if (t.dmin == 0.f)
                t.lm[j] = 0;
            t.e[j] = aff_sub(c, x + j * c->sub, w + j * c->sub, t.d, t.dmin, t.ls[j], t.lm[j],
                             false, t.L + j * c->sub);
            aff_refine_sub(c, x, w, &t, j, 1);
        }
        if (!(aff_total(c, &t) < aff_total(c, st)))
            return;
        *st = t;
    }
}

static void aff_block(const aff_cfg *c, const float *x, const float *w, aff_st *st)
{
    float rs[16], rm[16], os[16], om[16];
    for (int j = 0; j < c->nsub; j++)
        aff_fit(c, x + j * c->sub, w + j * c->sub, &rs[j], &rm[j], &os[j], &om[j]);
    aff_st o;
    aff_init(c, x, w, rs, rm, st);
    aff_init(c, x, w, os, om, &o);
    if (aff_total(c, &o) < aff_total(c, st))
        *st = o;
    if (aff_total(c, st) > 0)
        aff_refine(c, x, w, st, 1);
}

/* ---- packing ---- */

static void pack_k4_scales(const int *ls, const int *lm, uint8_t *s)
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        const unsigned a = (unsigned)ls[j], b = (unsigned)lm[j];
        if (j < 4) {
            s[j] = (uint8_t)a;
            s[j + 4] = (uint8_t)b;
        } else {
            s[j + 4] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            s[j - 4] |= (uint8_t)((a >> 4) << 6);
            s[j] |= (uint8_t)((b >> 4) << 6);
        }
    }
}

/* 2-bit codes of 256 values in the Q2_K/Q3_K geometry. */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < QK; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)((L[j + l] & 3) | ((L[j + l + 32] & 3) << 2) |
                                      ((L[j + l + 64] & 3) << 4) | ((L[j + l + 96] & 3) << 6));
}

/* float codes -> bytes, with an offset (codes are exact small integers) */
static void codes_u8(const float *L, int off, uint8_t *u)
{
    for (int i = 0; i < QK; i++)
        u[i] = (uint8_t)((int)L[i] + off);
}

void qtk_qrow_q2_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    uint8_t L[QK];
    aff_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 84) {
        qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws);
        aff_block(&k_q2k, xs, ws, &st);
        for (int j = 0; j < 16; j++)
            dst[j] = (uint8_t)(st.ls[j] | (st.lm[j] << 4));
        codes_u8(st.L, 0, L);
        pack_2bit(L, dst + 16);
        put16(dst + 80, st.d);
        put16(dst + 82, st.dmin);
    }
}

void qtk_qrow_q4_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    uint8_t L[QK];
    aff_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 144) {
        qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws);
        aff_block(&k_q4k, xs, ws, &st);
        put16(dst, st.d);
        put16(dst + 2, st.dmin);
        pack_k4_scales(st.ls, st.lm, dst + 4);
        codes_u8(st.L, 0, L);
        uint8_t *q = dst + 16;
        for (int j = 0; j < QK; j += 64, q += 32)
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void qtk_qrow_q5_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    uint8_t L[QK];
    aff_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 176) {
        qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws);
        aff_block(&k_q5k, xs, ws, &st);
        put16(dst, st.d);
        put16(dst + 2, st.dmin);
        pack_k4_scales(st.ls, st.lm, dst + 4);
        codes_u8(st.L, 0, L);
        uint8_t *qh = dst + 16, *ql = dst + 48;
        memset(qh, 0, 32);
        unsigned m1 = 1, m2 = 2;
        for (int n = 0; n < QK; n += 64, ql += 32, m1 <<= 2, m2 <<= 2) {
            for (int j = 0; j < 32; j++) {
                unsigned l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] = (uint8_t)(qh[j] | m1);
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] = (uint8_t)(qh[j] | m2);
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

/* ======================= symmetric types: y = (d*sc)*q ======================= */

#define SUB 16
#define NSUB 16

typedef struct {
    int lo, hi;   /* codes */
    int slo, shi; /* sub-scales */
} sym_cfg;

static const sym_cfg k_q3k = { -4, 3, -32, 31 };
static const sym_cfg k_q6k = { -32, 31, -128, 127 };

typedef struct {
    float d;
    int sc[NSUB];
    float e[NSUB];
    float L[QK]; /* codes, as floats */
} sym_st;

/* Ours: rank candidate codes by the continuous LS residual (sum wxl)^2 / sum wll. */
typedef struct {
    double best;
    float s;
} sym_ours;

static inline void sym_ours_try(sym_ours *o, double sxl, double sll)
{
    if (sll > 0) {
        const double sc = sxl * sxl / sll;
        if (sc > o->best) {
            o->best = sc;
            o->s = (float)(sxl / sll);
        }
    }
}

/* Sums for the codes l = round(clamp(is*x, lo, hi)) of one sub-block: s[0] = sum wox*l,
 * s[1] = sum wo*l*l, s[2] = sum wrx*l, s[3] = sum wr*l*l. */
static inline void sym_sweep(const float *x, const float *wo, const float *wox, const float *wr,
                             const float *wrx, float is, float lo, float hi, double *s)
{
    const qv4 vis = qv_set(is), vlo = qv_set(lo), vhi = qv_set(hi);
    qv4 a0 = qv_set(0.f), a1 = a0, b0 = a0, b1 = a0;
    for (int i = 0; i < SUB; i += 4) {
        const qv4 l = qv_round(qv_min(qv_max(qv_mul(vis, qv_ld(x + i)), vlo), vhi));
        a0 = qv_add(a0, qv_mul(qv_ld(wox + i), l));
        a1 = qv_add(a1, qv_mul(qv_mul(qv_ld(wo + i), l), l));
        b0 = qv_add(b0, qv_mul(qv_ld(wrx + i), l));
        b1 = qv_add(b1, qv_mul(qv_mul(qv_ld(wr + i), l), l));
    }
    float t[4];
    qv_sum4(a0, a1, b0, b1, t);
    s[0] = t[0], s[1] = t[1], s[2] = t[2], s[3] = t[3];
}

/* sym_sweep's first two sums only. */
static inline void sym_sweep2(const float *x, const float *wo, const float *wox, float is, float lo,
                              float hi, double *s)
{
    const qv4 vis = qv_set(is), vlo = qv_set(lo), vhi = qv_set(hi);
    qv4 a0 = qv_set(0.f), a1 = a0;
    for (int i = 0; i < SUB; i += 4) {
        const qv4 l = qv_round(qv_min(qv_max(qv_mul(vis, qv_ld(x + i)), vlo), vhi));
        a0 = qv_add(a0, qv_mul(qv_ld(wox + i), l));
        a1 = qv_add(a1, qv_mul(qv_mul(qv_ld(wo + i), l), l));
    }
    float t[4];
    qv_sum4(a0, a1, a1, a1, t);
    s[0] = t[0], s[1] = t[1];
}

/* ggml's make_q3_quants(16, 4, x, L, true) scale (sequential by nature; q3_k only). */
static float ref_q3(const float *x)
{
    const int nmax = 4;
    float max = 0, amax = 0;
    for (int i = 0; i < SUB; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_EPS)
        return 0.f;
    const float iscale = (float)-nmax / max;
    int L[SUB];
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < SUB; i++) {
        const int l = qclr(iscale * x[i], -nmax, nmax - 1);
        L[i] = l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < SUB; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                const int new_l = qclr(x[i] * sl2 / slx, -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ggml's fit of one sub-block (q6: make_qx_quants(16, 32, rmse_type 1) with weights x^2, its
 * candidates shared with our sweep; q3: make_q3_quants) in *rs, ours in *os. Ours sweeps the
 * largest |x| onto codes near lo and near hi and ranks by LS residual under wo. */
static void sym_fits(const sym_cfg *c, const float *x, const float *wo, bool q6, float *rs,
                     float *os)
{
    float max = 0, amax = 0;
    for (int i = 0; i < SUB; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
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
    double S[4];
    if (q6) {
        const float nmax = (float)-c->lo;
        sym_sweep(x, wo, wox, wr, wrx, -nmax / max, lo, hi, S);
        sym_ours_try(&o, S[0], S[1]);
        double scale = S[3] != 0 ? S[2] / S[3] : 0.0;
        double best = scale * S[2];
        for (int is = -9; is <= 9; ++is) {
            if (is == 0)
                continue;
            sym_sweep(x, wo, wox, wr, wrx, -(nmax + 0.1f * (float)is) / max, lo, hi, S);
            sym_ours_try(&o, S[0], S[1]);
            if (S[3] > 0 && S[2] * S[2] > best * S[3]) {
                scale = S[2] / S[3];
                best = scale * S[2];
            }
        }
        *rs = (float)scale;
        for (int k = 0; k < 6; k++) {
            sym_sweep2(x, wo, wox, (hi + 0.2f * (float)k - 0.4f) / max, lo, hi, S);
            sym_ours_try(&o, S[0], S[1]);
        }
    } else {
        *rs = ref_q3(x);
        for (int k = 0; k < 6; k++) {
            const float off = 0.2f * (float)k - 0.5f;
            sym_sweep2(x, wo, wox, (lo - off) / max, lo, hi, S);
            sym_ours_try(&o, S[0], S[1]);
            sym_sweep2(x, wo, wox, (hi + off) / max, lo, hi, S);
            sym_ours_try(&o, S[0], S[1]);
        }
    }
    *os = o.best > 0 ? o.s : *rs;
}

static float sym_err(const float *x, const float *w, const float *L, float dl)
{
    const qv4 vdl = qv_set(dl);
    qv4 a = qv_set(0.f);
    for (int i = 0; i < SUB; i += 4) {
        const qv4 diff = qv_sub(qv_mul(vdl, qv_ld(L + i)), qv_ld(x + i));
        a = qv_add(a, qv_mul(qv_mul(qv_ld(w + i), diff), diff));
    }
    return qv_sum(a);
}

/* Codes and exact decoded error of one sub-block for sub-scale sc (div: as ggml rounds). */
static float sym_sub(const sym_cfg *c, const float *x, const float *w, float d, int sc, bool div,
                     float *L)
{
    const float dl = d * (float)sc;
    if (dl == 0.f) {
        for (int i = 0; i < SUB; i++)
            L[i] = 0.f;
    } else {
        const qv4 vdl = qv_set(dl), vid = qv_set(1.f / dl);
        const qv4 vlo = qv_set((float)c->lo), vhi = qv_set((float)c->hi);
        for (int i = 0; i < SUB; i += 4) {
            const qv4 v = div ? qv_div(qv_ld(x + i), vdl) : qv_mul(qv_ld(x + i), vid);
            qv_st(L + i, qv_round(qv_min(qv_max(v, vlo), vhi)));
        }
    }
    return sym_err(x, w, L, dl);
}

static float sym_total(const sym_st *st)
{
    float t = 0;
    for (int j = 0; j < NSUB; j++)
        t += st->e[j];
    return t;
}

/* quantize_row_q3_K_ref / q6_K_ref superblock step: the largest |scale| maps to slo. */
static void sym_init(const sym_cfg *c, const float *x, const float *w, const float *s, sym_st *st)
{
    float max_scale = 0, amax = 0;
    for (int j = 0; j < NSUB; j++) {
        if (fabsf(s[j]) > amax) {
            amax = fabsf(s[j]);
            max_scale = s[j];
        }
    }
    if (amax < GROUP_EPS) {
        st->d = 0;
        for (int j = 0; j < NSUB; j++)
            st->sc[j] = 0;
    } else {
        const float iscale = (float)c->slo / max_scale;
        for (int j = 0; j < NSUB; j++)
            st->sc[j] = qclr(iscale * s[j], c->slo, c->shi);
        st->d = qtk_qh16(1 / iscale);
    }
    for (int j = 0; j < NSUB; j++)
        st->e[j] = sym_sub(c, x + j * SUB, w + j * SUB, st->d, st->sc[j], true, st->L + j * SUB);
}

static void sym_refine_sub(const sym_cfg *c, const float *x, const float *w, sym_st *st, int j,
                           int passes)
{
    const float *xj = x + j * SUB, *wj = w + j * SUB;
    float *Lj = st->L + j * SUB;
    float T[SUB], wl[SUB];
    if (st->d == 0.f)
        return;
    for (int pass = 0; pass < passes; pass++) {
        int cand[5], nc = 0;
        const int s0 = st->sc[j];
        cand[nc++] = s0 + 1;
        cand[nc++] = s0 - 1;
        for (int i = 0; i < SUB; i++)
            wl[i] = wj[i] * Lj[i];
        const double sxl = lsum2(SUB, wl, xj), sll = lsum2(SUB, wl, Lj);
        if (sll > 0) {
            const int a = qclr((float)(sxl / sll / (double)st->d), c->slo, c->shi);
            cand[nc++] = a;
            cand[nc++] = a + 1;
            cand[nc++] = a - 1;
        }
        bool changed = false;
        for (int k = 0; k < nc; k++) {
            const int a = cand[k];
            if (a < c->slo || a > c->shi || a == s0)
                continue;
            bool dup = false;
            for (int k2 = 0; k2 < k && !dup; k2++)
                dup = cand[k2] == a;
            if (dup)
                continue;
            const float e = sym_sub(c, xj, wj, st->d, a, false, T);
            if (e < st->e[j]) {
                st->e[j] = e;
                st->sc[j] = a;
                memcpy(Lj, T, sizeof T);
                changed = true;
            }
        }
        if (!changed)
            break;
    }
}

static void sym_refine(const sym_cfg *c, const float *x, const float *w, sym_st *st, int rounds)
{
    float wl[SUB];
    for (int j = 0; j < NSUB; j++)
        sym_refine_sub(c, x, w, st, j, 2);
    for (int r = 0; r < rounds; r++) {
        double num = 0, den = 0;
        for (int j = 0; j < NSUB; j++) {
            const float *xj = x + j * SUB, *wj = w + j * SUB, *Lj = st->L + j * SUB;
            for (int i = 0; i < SUB; i++)
                wl[i] = wj[i] * Lj[i];
            const double sc = (double)st->sc[j];
            num += sc * lsum2(SUB, wl, xj);
            den += sc * sc * lsum2(SUB, wl, Lj);
        }
        if (!(den > 0))
            return;
        sym_st t;
        t.d = qtk_qh16((float)(num / den));
        if (t.d == st->d || t.d == 0.f)
            return;
        memcpy(t.sc, st->sc, sizeof t.sc);
        for (int j = 0; j < NSUB; j++) {
            t.e[j] = sym_sub(c, x + j * SUB, w + j * SUB, t.d, t.sc[j], false, t.L + j * SUB);
            sym_refine_sub(c, x, w, &t, j, 1);
        }
        if (!(sym_total(&t) < sym_total(st)))
            return;
        *st = t;
    }
}

static void sym_block(const sym_cfg *c, bool q6, const float *x, const float *w, sym_st *st)
{
    float rs[NSUB], os[NSUB];
    for (int j = 0; j < NSUB; j++)
        sym_fits(c, x + j * SUB, w + j * SUB, q6, &rs[j], &os[j]);
    sym_st o;
    sym_init(c, x, w, rs, st);
    sym_init(c, x, w, os, &o);
    if (sym_total(&o) < sym_total(st))
        *st = o;
    if (sym_total(st) > 0)
        sym_refine(c, x, w, st, 2);
}

void qtk_qrow_q3_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    uint8_t L[QK];
    sym_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 110) {
        qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws);
        sym_block(&k_q3k, false, xs, ws, &st);
        uint8_t *hm = dst, *qs = dst + 32, *sc = dst + 96;
        codes_u8(st.L, 4, L);
        memset(hm, 0, 32);
        for (int j = 0; j < QK; j++) {
            if (L[j] > 3) {
                hm[j % 32] = (uint8_t)(hm[j % 32] | (1u << (j / 32)));
                L[j] = (uint8_t)(L[j] - 4);
            }
        }
        pack_2bit(L, qs);
        memset(sc, 0, 12);
        for (int j = 0; j < NSUB; j++) {
            const unsigned l = (unsigned)(st.sc[j] + 32);
            if (j < 8)
                sc[j] = (uint8_t)(l & 0xF);
            else
                sc[j - 8] = (uint8_t)(sc[j - 8] | ((l & 0xF) << 4));
            sc[j % 4 + 8] = (uint8_t)(sc[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
        }
        put16(dst + 108, st.d);
    }
}

void qtk_qrow_q6_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    uint8_t L[QK];
    sym_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 210) {
        qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws);
        sym_block(&k_q6k, true, xs, ws, &st);
        uint8_t *ql = dst, *qh = dst + 128;
        codes_u8(st.L, 32, L);
        for (int j = 0; j < QK; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const unsigned q1 = L[j + l], q2 = L[j + l + 32];
                const unsigned q3 = L[j + l + 64], q4 = L[j + l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                  ((q4 >> 4) << 6));
            }
        }
        for (int j = 0; j < NSUB; j++)
            dst[192 + j] = (uint8_t)(int8_t)st.sc[j];
        put16(dst + 208, st.d);
    }
}
