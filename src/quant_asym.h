/* quant_asym.h - the q4_1/q5_1 search (y = q*d + m, q in [0, nmax]) of two blocks at once.
 * Included once per instruction set (quant.c generic, quant_asym_avx2.c with -mavx2 -mf16c)
 * with ASYM_PAIR naming the exported function.
 *
 * The two blocks' values are interleaved four by four (A[0..3] B[0..3] A[4..7] B[4..7] ...), so
 * one eight-lane register (quant.h's qv8: one AVX2 register, or two four-lane halves) holds
 * four values of each and every lane does exactly what the four-lane search of one block did:
 * block A's element i accumulates in lane i%4 of the low half, B's in the high half, and each
 * half is reduced in qv_sum's order. Each block's decisions are its own: where one block's
 * refinement stops and the other's goes on, the stopped half's lanes compute values nobody
 * reads. So the bytes are those of the one-block search, on every build. Divisions whose
 * result is not used get 1 as their divisor (no division by zero raised for them). */
#ifndef ASYM_PAIR
#error "define ASYM_PAIR before including quant_asym.h"
#endif

#include <float.h>
#include <string.h>

#define AP_N (2 * QTK_ASYM_QB) /* two interleaved blocks */

/* q4_1/q5_1 candidate ranges: ASYM_NSTEP scales from (max-min)/(nmax - 0.6) to
 * (max-min)/(nmax + 0.6). Four (0.4 levels apart) instead of nine (0.15 apart) cost 0.4% of RMSE
 * (q4_1 0.897x ggml's on the bench model instead of 0.894x; 0.903x on the fixtures) and take
 * 30% off a q4_1 run. */
#define ASYM_NSTEP 4
#define ASYM_R0 (-0.6f)
#define ASYM_STEP 0.4f
#define AP_NC (2 * ASYM_NSTEP) /* both blocks' candidates */

/* Block totals for the weighted least squares x ~ s*l + m. */
typedef struct {
    double w, x, xx;
} asym_tot;

/* Weighted least squares x ~ s*l + m from the code sums S = { sum w*l, sum (w*l)*l, sum wx*l }
 * and the totals T: D = w*sll - sl^2 (degenerate unless positive), s = (w*sxl - x*sl)/D,
 * m = (sll*x - sl*sxl)/D, residual s^2*sll + 2sm*sl + m^2*w - 2s*sxl - 2m*x + xx, in that
 * order. Here for the ASYM_NSTEP candidates of both blocks (candidate k of block h at
 * h*ASYM_NSTEP + k) in straight-line loops the compiler may run in vector lanes (each lane
 * does the same operations: the same bits); ok: D is positive. ap_lloyd solves its two blocks
 * the same way. */
static void ap_solve_cands(const asym_tot *T, const float (*S)[3], double *e, bool *ok)
{
    double w[AP_NC], x[AP_NC], xx[AP_NC], sl[AP_NC], sll[AP_NC], sxl[AP_NC], D[AP_NC];
    double s[AP_NC], m[AP_NC];
    for (int j = 0; j < AP_NC; j++) {
        const asym_tot *t = &T[j / ASYM_NSTEP];
        w[j] = t->w, x[j] = t->x, xx[j] = t->xx;
        sl[j] = S[j][0], sll[j] = S[j][1], sxl[j] = S[j][2];
    }
    for (int j = 0; j < AP_NC; j++)
        D[j] = w[j] * sll[j] - sl[j] * sl[j];
    for (int j = 0; j < AP_NC; j++) {
        const double Dd = D[j] > 0 ? D[j] : 1.0; /* not ok: the values are not used */
        s[j] = (w[j] * sxl[j] - x[j] * sl[j]) / Dd;
        m[j] = (sll[j] * x[j] - sl[j] * sxl[j]) / Dd;
    }
    for (int j = 0; j < AP_NC; j++) {
        e[j] = s[j] * s[j] * sll[j] + 2 * s[j] * m[j] * sl[j] + m[j] * m[j] * w[j] -
               2 * s[j] * sxl[j] - 2 * m[j] * x[j] + xx[j];
        ok[j] = D[j] > 0;
    }
}

/* block h's four values of every eight, from src to dst */
static inline void ap_copy_half(float *dst, const float *src, int h)
{
    for (int i = 4 * h; i < AP_N; i += 8)
        memcpy(dst + i, src + i, 4 * sizeof *dst);
}

/* Each block's error of codes Q for (d, m) under XR. */
static void ap_err(const float *X, const float *XR, const float *Q, const float *d,
                   const float *m, float *er)
{
    const qv8 vd = qv8_set2(d[0], d[1]), vm = qv8_set2(m[0], m[1]);
    qv8 a = qv8_set(0.f);
    for (int i = 0; i < AP_N; i += 8) {
        const qv8 diff = qv8_sub(qv8_add(qv8_mul(qv8_ld(Q + i), vd), vm), qv8_ld(X + i));
        a = qv8_add(a, qv8_mul(qv8_mul(qv8_ld(XR + i), diff), diff));
    }
    float t[8];
    qv8_sum4h(a, a, a, a, t);
    er[0] = t[0], er[1] = t[4];
}

/* ... and under W (ew) and XR (er) in one pass. */
static void ap_err2(const float *X, const float *W, const float *XR, const float *Q,
                    const float *d, const float *m, float *ew, float *er)
{
    const qv8 vd = qv8_set2(d[0], d[1]), vm = qv8_set2(m[0], m[1]);
    qv8 a = qv8_set(0.f), b = a;
    for (int i = 0; i < AP_N; i += 8) {
        const qv8 diff = qv8_sub(qv8_add(qv8_mul(qv8_ld(Q + i), vd), vm), qv8_ld(X + i));
        a = qv8_add(a, qv8_mul(qv8_mul(qv8_ld(W + i), diff), diff));
        b = qv8_add(b, qv8_mul(qv8_mul(qv8_ld(XR + i), diff), diff));
    }
    float t[8];
    qv8_sum4h(a, b, a, b, t);
    ew[0] = t[0], er[0] = t[1], ew[1] = t[4], er[1] = t[5];
}

/* asym_solve's sums of codes Q, each block's. */
static void ap_sums(const float *W, const float *WX, const float *Q, float (*S)[3])
{
    qv8 a = qv8_set(0.f), b = a, c = a;
    for (int i = 0; i < AP_N; i += 8) {
        const qv8 vl = qv8_ld(Q + i), wl = qv8_mul(qv8_ld(W + i), vl);
        a = qv8_add(a, wl);
        b = qv8_add(b, qv8_mul(wl, vl));
        c = qv8_add(c, qv8_mul(qv8_ld(WX + i), vl));
    }
    float t[8];
    qv8_sum4h(a, b, c, c, t);
    for (int h = 0; h < 2; h++)
        S[h][0] = t[4 * h], S[h][1] = t[4 * h + 1], S[h][2] = t[4 * h + 2];
}

/* Codes of X for each block's (d, m) into Q, their errors under W (e), their sums (S) and,
 * with XR, their errors under XR (r), in one pass. A block whose d is 0 gets codes 0 (its
 * inverse scale taken as 0 makes every code +0, as the one-block search set them). */
static void ap_codes_err(const float *X, const float *W, const float *WX, const float *XR,
                         const float *d, const float *m, float nmax, float *Q, float (*S)[3],
                         float *e, float *r)
{
    const qv8 id = qv8_set2(d[0] == 0.f ? 0.f : 1.f / d[0], d[1] == 0.f ? 0.f : 1.f / d[1]);
    const qv8 vd = qv8_set2(d[0], d[1]), vm = qv8_set2(m[0], m[1]), z = qv8_set(0.f);
    const qv8 vmax = qv8_set(nmax);
    qv8 a = z, s0 = z, s1 = z, s2 = z, rr = z;
    for (int i = 0; i < AP_N; i += 8) {
        const qv8 xv = qv8_ld(X + i), wv = qv8_ld(W + i);
        const qv8 l = qv8_round(qv8_min(qv8_max(qv8_mul(qv8_sub(xv, vm), id), z), vmax));
        qv8_st(Q + i, l);
        const qv8 diff = qv8_sub(qv8_add(qv8_mul(l, vd), vm), xv);
        a = qv8_add(a, qv8_mul(qv8_mul(wv, diff), diff));
        if (XR)
            rr = qv8_add(rr, qv8_mul(qv8_mul(qv8_ld(XR + i), diff), diff));
        const qv8 wl = qv8_mul(wv, l);
        s0 = qv8_add(s0, wl);
        s1 = qv8_add(s1, qv8_mul(wl, l));
        s2 = qv8_add(s2, qv8_mul(qv8_ld(WX + i), l));
    }
    float t[8];
    qv8_sum4h(s0, s1, s2, a, t);
    for (int h = 0; h < 2; h++) {
        S[h][0] = t[4 * h], S[h][1] = t[4 * h + 1], S[h][2] = t[4 * h + 2];
        e[h] = t[4 * h + 3];
    }
    if (XR) {
        qv8_sum4h(rr, rr, rr, rr, t);
        r[0] = t[0], r[1] = t[4];
    }
}

/* Alternate least-squares (d, m) (fp16) and rounded codes from codes Q, for each block with
 * run[h], keeping each step that lowers its error e[h] under W; with XR a step must also keep
 * the error under XR at or below cap[h], which then becomes that error. S0 (or NULL): the sums
 * of Q. full[h]: every one of the iters steps was kept, the only case where another round from
 * the result could change anything (otherwise its first step recomputes the rejected one, or
 * the state itself, and stops). */
static void ap_lloyd(const float *X, const float *W, const float *WX, const float *XR,
                     const asym_tot *T, float nmax, int iters, float *cap,
                     const float (*S0)[3], const bool *run_in, float *Q, float *d, float *m,
                     float *e, bool *full)
{
    bool run[2] = { run_in[0], run_in[1] };
    float S[2][3], Sn[2][3], t[AP_N], en[2], r[2] = { 0.f, 0.f };
    full[0] = full[1] = false;
    if (!run[0] && !run[1])
        return;
    if (S0)
        memcpy(S, S0, sizeof S);
    else
        ap_sums(W, WX, Q, S);
    for (int it = 0; it < iters; it++) {
        /* both blocks' least squares (asym_solve's operations, lane by lane) and their fp16
         * roundings at once */
        double D[2], num[4], den[4], q[4];
        for (int h = 0; h < 2; h++) {
            const double sl = S[h][0], sll = S[h][1], sxl = S[h][2];
            D[h] = T[h].w * sll - sl * sl;
            num[2 * h] = T[h].w * sxl - T[h].x * sl;   /* s*D */
            num[2 * h + 1] = sll * T[h].x - sl * sxl;  /* m*D */
            den[2 * h] = den[2 * h + 1] = run[h] && D[h] > 0 ? D[h] : 1.0; /* else unused */
        }
        qv_div4d(num, den, q);
        float v[4] = { (float)q[0], (float)q[1], (float)q[2], (float)q[3] };
        qv_st(v, qv_qh16_4(qv_ld(v)));
        float dn[2], mn[2];
        for (int h = 0; h < 2; h++) {
            dn[h] = d[h], mn[h] = m[h];
            if (!run[h])
                continue;
            if (!(D[h] > 0)) {
                run[h] = false;
                continue;
            }
            dn[h] = v[2 * h], mn[h] = v[2 * h + 1];
            if (it > 0 && dn[h] == d[h] && mn[h] == m[h])
                run[h] = false;
        }
        if (!run[0] && !run[1])
            return;
        ap_codes_err(X, W, WX, XR, dn, mn, nmax, t, Sn, en, r);
        for (int h = 0; h < 2; h++) {
            if (!run[h])
                continue;
            if (!(en[h] < e[h]) || (XR && !(r[h] <= cap[h]))) {
                run[h] = false;
                continue;
            }
            if (XR)
                cap[h] = r[h];
            e[h] = en[h], d[h] = dn[h], m[h] = mn[h];
            memcpy(S[h], Sn[h], sizeof S[h]);
            ap_copy_half(Q, t, h);
        }
    }
    full[0] = run[0], full[1] = run[1];
}

/* Best asymmetric encodings of two blocks (interleaved X, weights W, guard weights XR; their
 * smallest and largest values mn, mx), ggml's choices (ref_d, ref_m, codes RQ) included: codes
 * into Q (interleaved), scales and offsets into d, m. Every encoding kept beyond ggml's also has
 * an error under XR (guard_weights) at or below that of the one it replaces, so never above
 * ggml's: without that rule the search lowered the error under W further but raised the output
 * divergence (KLD against the F16 model, mean over the fixture's tiny model and perturbed
 * copies: q4_1 1.009x llama-quantize's, 0.980x with it; with an importance matrix q5_1 1.023x,
 * 0.957x with it; docs/benchmarks.md). search false: no candidates, only one such step, guarded,
 * from ggml's choice (quant.c says when). */
void ASYM_PAIR(const float *X, const float *W, const float *XR, const float *mn, const float *mx,
               int nmax, bool search, const float *ref_d, const float *ref_m, const float *RQ,
               float *Q, float *dout, float *mout)
{
    float bd[2] = { ref_d[0], ref_d[1] }, bm[2] = { ref_m[0], ref_m[1] }, be[2], cap[2];
    memcpy(Q, RQ, AP_N * sizeof *Q);
    ap_err2(X, W, XR, RQ, ref_d, ref_m, be, cap);
    bool act[2];
    for (int h = 0; h < 2; h++)
        act[h] = mx[h] > mn[h] && be[h] > 0.f;
    if (act[0] || act[1]) {
        const float fmax = (float)nmax;
        float WX[AP_N], L[ASYM_NSTEP * AP_N], LB[AP_N];
        for (int i = 0; i < AP_N; i++)
            WX[i] = W[i] * X[i];
        asym_tot T[2];
        {
            qv8 a = qv8_set(0.f), b = a, c = a;
            for (int i = 0; i < AP_N; i += 8) {
                a = qv8_add(a, qv8_ld(W + i));
                b = qv8_add(b, qv8_ld(WX + i));
                c = qv8_add(c, qv8_mul(qv8_ld(WX + i), qv8_ld(X + i)));
            }
            float t[8];
            qv8_sum4h(a, b, c, c, t);
            for (int h = 0; h < 2; h++)
                T[h] = (asym_tot){ t[4 * h], t[4 * h + 1], t[4 * h + 2] };
        }
        if (!search) { /* one guarded least-squares step from ggml's choice */
            bool full[2];
            ap_lloyd(X, W, WX, XR, T, fmax, 1, cap, NULL, act, Q, bd, bm, be, full);
            dout[0] = bd[0], dout[1] = bd[1];
            mout[0] = bm[0], mout[1] = bm[1];
            return;
        }
        double best[2] = { DBL_MAX, DBL_MAX };
        float Sb[2][3] = { { 0.f, 0.f, 0.f }, { 0.f, 0.f, 0.f } };
        float Sc[AP_NC][3];
        const qv8 vmn = qv8_set2(act[0] ? mn[0] : 0.f, act[1] ? mn[1] : 0.f);
        const qv8 vmax = qv8_set(fmax);
        for (int k = 0; k < ASYM_NSTEP; k++) {
            float is[2];
            for (int h = 0; h < 2; h++)
                is[h] = act[h] ? (fmax + ASYM_R0 + ASYM_STEP * (float)k) / (mx[h] - mn[h]) : 0.f;
            const qv8 vis = qv8_set2(is[0], is[1]);
            /* the codes and their sums in one pass */
            qv8 s0 = qv8_set(0.f), s1 = s0, s2 = s0;
            float *Lk = L + k * AP_N;
            for (int i = 0; i < AP_N; i += 8) {
                const qv8 vl = qv8_round(qv8_min(qv8_mul(vis, qv8_sub(qv8_ld(X + i), vmn)), vmax));
                qv8_st(Lk + i, vl);
                const qv8 wl = qv8_mul(qv8_ld(W + i), vl);
                s0 = qv8_add(s0, wl);
                s1 = qv8_add(s1, qv8_mul(wl, vl));
                s2 = qv8_add(s2, qv8_mul(qv8_ld(WX + i), vl));
            }
            float t[8];
            qv8_sum4h(s0, s1, s2, s2, t);
            for (int h = 0; h < 2; h++)
                memcpy(Sc[h * ASYM_NSTEP + k], t + 4 * h, sizeof Sc[0]);
        }
        /* the residuals, then each block's lowest in candidate order */
        double ec[AP_NC];
        bool okc[AP_NC];
        ap_solve_cands(T, (const float (*)[3])Sc, ec, okc);
        int kb[2] = { -1, -1 };
        for (int h = 0; h < 2; h++)
            for (int k = 0; act[h] && k < ASYM_NSTEP; k++)
                if (okc[h * ASYM_NSTEP + k] && ec[h * ASYM_NSTEP + k] < best[h]) {
                    best[h] = ec[h * ASYM_NSTEP + k];
                    kb[h] = k;
                }
        for (int h = 0; h < 2; h++)
            if (kb[h] >= 0) {
                ap_copy_half(LB, L + kb[h] * AP_N, h);
                memcpy(Sb[h], Sc[h * ASYM_NSTEP + kb[h]], sizeof Sb[h]);
            } else {
                ap_copy_half(LB, RQ, h); /* never used: defined values for the other's passes */
            }
        /* each block's best candidate refined (no guard yet), kept when it beats ggml's under
         * W and not under XR; the second round, guarded, starts from what was kept, unless the
         * candidate's own round stopped early (it would only repeat that round's last step) */
        bool run[2], full[2], more[2], need[2];
        float d[2] = { 0.f, 0.f }, m[2] = { 0.f, 0.f }, e[2] = { FLT_MAX, FLT_MAX };
        for (int h = 0; h < 2; h++)
            run[h] = act[h] && best[h] < DBL_MAX;
        ap_lloyd(X, W, WX, NULL, T, fmax, 4, NULL, (const float (*)[3])Sb, run, LB, d, m, e,
                 full);
        for (int h = 0; h < 2; h++)
            need[h] = run[h] && e[h] < be[h];
        float r[2] = { 0.f, 0.f };
        if (need[0] || need[1])
            ap_err(X, XR, LB, d, m, r);
        for (int h = 0; h < 2; h++) {
            more[h] = act[h];
            if (need[h] && r[h] <= cap[h]) {
                cap[h] = r[h];
                be[h] = e[h];
                bd[h] = d[h];
                bm[h] = m[h];
                ap_copy_half(Q, LB, h);
                more[h] = full[h];
            }
        }
        ap_lloyd(X, W, WX, XR, T, fmax, 3, cap, NULL, more, Q, bd, bm, be, full);
    }
    dout[0] = bd[0], dout[1] = bd[1];
    mout[0] = bm[0], mout[1] = bm[1];
}

/* qv_qh16_4 against qv_qh16 on every stride-th float bit pattern (and the four after each):
 * the number of values where they differ (0). For tests. */
#ifdef ASYM_QH16_CHECK
uint64_t ASYM_QH16_CHECK(uint32_t stride)
{
    uint64_t bad = 0;
    for (uint64_t u = 0; u < (UINT64_C(1) << 32); u += stride) {
        float f[4], r[4];
        for (int k = 0; k < 4; k++) {
            const uint32_t b = (uint32_t)(u + (uint64_t)k);
            memcpy(&f[k], &b, sizeof b);
        }
        qv_st(r, qv_qh16_4(qv_ld(f)));
        for (int k = 0; k < 4; k++) {
            const float e = qv_qh16(f[k]);
            bad += memcmp(&e, &r[k], sizeof e) != 0;
        }
    }
    return bad;
}
#endif
