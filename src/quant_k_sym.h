/* quant_k_sym.h - the q3_k/q6_k superblock search (see quant_k.c for the method): ggml's and our
 * sub-block fits (quant_k_symfit.h) quantized the way quantize_row_*_ref does, then refined by
 * steps that only ever lower the error. Included once per instruction set (quant_k.c generic,
 * quant_k_avx2.c with -mavx2) with SYM_BLOCK naming the exported function, SYM_FITS and
 * SYM_REF_Q3 the same build's fits; every sum keeps its lanes' order, so both builds give the
 * same encodings. quant_k.c also uses sym_init for llama.cpp's own choices. */
#if !defined(SYM_BLOCK) || !defined(SYM_FITS) || !defined(SYM_REF_Q3)
#error "define SYM_BLOCK, SYM_FITS and SYM_REF_Q3 before including quant_k_sym.h"
#endif

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

/* sym_err under w (returned) and under wr (*r) in one pass: the same bits as each on its own */
static float sym_err2(const float *x, const float *w, const float *wr, const float *L, float dl,
                      float *r)
{
    const qv4 vdl = qv_set(dl);
    qv4 a = qv_set(0.f), b = a;
    for (int i = 0; i < SUB; i += 4) {
        const qv4 diff = qv_sub(qv_mul(vdl, qv_ld(L + i)), qv_ld(x + i));
        a = qv_add(a, qv_mul(qv_mul(qv_ld(w + i), diff), diff));
        b = qv_add(b, qv_mul(qv_mul(qv_ld(wr + i), diff), diff));
    }
    *r = qv_sum(b);
    return qv_sum(a);
}

/* Codes and exact decoded error of one sub-block for sub-scale sc (div: as ggml rounds).
 * noclip: FLT_MAX (never chosen) when a value lies more than half a step outside the codes'
 * range, i.e. the encoding clips it. With wr (not NULL), the codes' error under wr in *r (also
 * when refused: the refinement's cap sums every sub-block's). */
static float sym_sub(const sym_cfg *c, const float *x, const float *w, const float *wr, float *r,
                     float d, int sc, bool div, bool noclip, float *L)
{
    const float dl = d * (float)sc;
    if (dl == 0.f) {
        for (int i = 0; i < SUB; i++)
            L[i] = 0.f;
    } else {
        const qv4 vdl = qv_set(dl), vid = qv_set(1.f / dl);
        const qv4 vlo = qv_set((float)c->lo), vhi = qv_set((float)c->hi);
        qv4 mn = qv_set(0.f), mx = mn;
        for (int i = 0; i < SUB; i += 4) {
            const qv4 v = div ? qv_div(qv_ld(x + i), vdl) : qv_mul(qv_ld(x + i), vid);
            mn = qv_min(mn, v);
            mx = qv_max(mx, v);
            qv_st(L + i, qv_round(qv_min(qv_max(v, vlo), vhi)));
        }
        if (noclip) {
            float a[4], b[4];
            qv_st(a, mn);
            qv_st(b, mx);
            for (int k = 0; k < 4; k++)
                if (a[k] < (float)c->lo - 0.5f || b[k] > (float)c->hi + 0.5f) {
                    if (wr)
                        *r = sym_err(x, wr, L, dl);
                    return FLT_MAX;
                }
        }
    }
    return wr ? sym_err2(x, w, wr, L, dl, r) : sym_err(x, w, L, dl);
}

/* sym_sub of two (sub-block, sub-scale product) pairs at once, dl0 and dl1 not 0: the low four
 * lanes do sym_sub's operations for x0 at dl0, the high four for x1 at dl1 (x1 may be x0), each
 * in its order, so every value is sym_sub's. Codes in L0, L1; errors under w in e[0], e[1]; with
 * wr, under wr in r[0], r[1]. */
static inline __attribute__((always_inline)) void sym_sub_x2(const sym_cfg *c, const float *x0, const float *x1,
                                                             const float *w0, const float *w1,
                                                             const float *wr0, const float *wr1,
                                                             float dl0, float dl1, bool div,
                                                             bool noclip, float *L0, float *L1,
                                                             float *e, float *r)
{
    const qv8 vdl = qv8_set2(dl0, dl1), vid = qv8_set2(1.f / dl0, 1.f / dl1);
    const qv8 vlo = qv8_set((float)c->lo), vhi = qv8_set((float)c->hi);
    qv8 mn = qv8_set(0.f), mx = mn, a = mn, b = mn;
    for (int i = 0; i < SUB; i += 4) {
        const qv8 xv = qv8_ldp(x0 + i, x1 + i);
        const qv8 v = div ? qv8_div(xv, vdl) : qv8_mul(xv, vid);
        mn = qv8_min(mn, v);
        mx = qv8_max(mx, v);
        const qv8 l = qv8_round(qv8_min(qv8_max(v, vlo), vhi));
        qv8_stp(L0 + i, L1 + i, l);
        const qv8 diff = qv8_sub(qv8_mul(vdl, l), xv);
        a = qv8_add(a, qv8_mul(qv8_mul(qv8_ldp(w0 + i, w1 + i), diff), diff));
        if (wr0)
            b = qv8_add(b, qv8_mul(qv8_mul(qv8_ldp(wr0 + i, wr1 + i), diff), diff));
    }
    float t[8];
    qv8_sum4h(a, b, a, b, t);
    e[0] = t[0];
    e[1] = t[4];
    if (wr0) {
        r[0] = t[1];
        r[1] = t[5];
    }
    if (noclip) {
        float lo[8], hi[8];
        qv8_st(lo, mn);
        qv8_st(hi, mx);
        for (int k = 0; k < 8; k++)
            if (lo[k] < (float)c->lo - 0.5f || hi[k] > (float)c->hi + 0.5f)
                e[k / 4] = FLT_MAX;
    }
}

/* sym_sub of sub-blocks j and j + 1 (sub-scales sc[j], sc[j + 1]) into st: the pair at once when
 * neither product is 0 (sym_sub_x2), else one by one. With wr, st->r gets their errors under it. */
static inline void sym_sub_pair(const sym_cfg *c, const float *x, const float *w, const float *wr,
                                bool div, bool noclip, sym_st *st, int j)
{
    const float dl0 = st->d * (float)st->sc[j], dl1 = st->d * (float)st->sc[j + 1];
    const size_t o = (size_t)j * SUB;
    if (dl0 == 0.f || dl1 == 0.f) {
        for (int k = j; k < j + 2; k++)
            st->e[k] = sym_sub(c, x + k * SUB, w + k * SUB, wr ? wr + k * SUB : NULL, &st->r[k],
                               st->d, st->sc[k], div, noclip, st->L + k * SUB);
        return;
    }
    sym_sub_x2(c, x + o, x + o + SUB, w + o, w + o + SUB, wr ? wr + o : NULL,
               wr ? wr + o + SUB : NULL, dl0, dl1, div, noclip, st->L + o, st->L + o + SUB,
               st->e + j, st->r + j);
}

/* FLT_MAX when a sub-block's encoding is refused (sym_sub's noclip) */
static float sym_total(const sym_st *st)
{
    float t = 0;
    for (int j = 0; j < NSUB; j++) {
        if (st->e[j] == FLT_MAX)
            return FLT_MAX;
        t += st->e[j];
    }
    return t;
}

static float sym_rtotal(const sym_st *st)
{
    float t = 0;
    for (int j = 0; j < NSUB; j++)
        t += st->r[j];
    return t;
}

/* quantize_row_q3_K_ref / q6_K_ref superblock step: the largest |scale| maps to slo. noclip
 * as sym_sub (ggml's own fit is never refused); wr (or NULL): ggml's weights, for st->r. */
static void sym_init(const sym_cfg *c, const float *x, const float *w, const float *wr,
                     const float *s, bool noclip, sym_st *st)
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
        st->r[j] = 0.f;
    for (int j = 0; j < NSUB; j += 2)
        sym_sub_pair(c, x, w, wr, true, noclip, st, j);
}

/* A change is kept when it lowers the error under w and, with wr, does not take the total
 * error under wr above *cap (then lowered to the new total). */
static void sym_refine_sub(const sym_cfg *c, const float *x, const float *w, const float *wr,
                           float *cap, sym_st *st, int j, int passes)
{
    const float *xj = x + j * SUB, *wj = w + j * SUB, *wrj = wr ? wr + j * SUB : NULL;
    float *Lj = st->L + j * SUB;
    float wl[SUB];
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
        /* the distinct candidates in range, in their order; a candidate's codes and errors
         * do not depend on which of those before it were kept, so pairs are scored at once */
        int va[5], nv = 0;
        for (int k = 0; k < nc; k++) {
            const int a = cand[k];
            bool skip = a < c->slo || a > c->shi || a == s0;
            for (int k2 = 0; k2 < nv && !skip; k2++)
                skip = va[k2] == a;
            if (!skip)
                va[nv++] = a;
        }
        float E[5], R[5], T[5][SUB];
        for (int k = 0; k < nv; k += 2) {
            const float dl0 = st->d * (float)va[k];
            const float dl1 = k + 1 < nv ? st->d * (float)va[k + 1] : 0.f;
            if (dl0 != 0.f && dl1 != 0.f) {
                sym_sub_x2(c, xj, xj, wj, wj, wrj, wrj, dl0, dl1, false, c->noclip, T[k], T[k + 1],
                           E + k, R + k);
                continue;
            }
            for (int h = k; h < k + 2 && h < nv; h++) {
                R[h] = 0.f;
                E[h] = sym_sub(c, xj, wj, wrj, &R[h], st->d, va[h], false, c->noclip, T[h]);
            }
        }
        bool changed = false;
        for (int k = 0; k < nv; k++) {
            if (!(E[k] < st->e[j]))
                continue;
            const float r = wr ? R[k] : 0.f;
            if (wr && !(sym_rtotal(st) - st->r[j] + r <= *cap))
                continue;
            st->e[j] = E[k];
            st->r[j] = r;
            if (wr)
                *cap = sym_rtotal(st);
            st->sc[j] = va[k];
            memcpy(Lj, T[k], sizeof T[k]);
            changed = true;
        }
        if (!changed)
            break;
    }
}

static void sym_refine(const sym_cfg *c, const float *x, const float *w, const float *wr,
                       float *cap, sym_st *st, int rounds)
{
    float wl[SUB];
    for (int j = 0; j < NSUB; j++)
        sym_refine_sub(c, x, w, wr, cap, st, j, 2);
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
        /* every sub-block's error first: sym_refine_sub's cap check sums all of them */
        for (int j = 0; j < NSUB; j++)
            t.r[j] = 0.f;
        for (int j = 0; j < NSUB; j += 2)
            sym_sub_pair(c, x, w, wr, false, c->noclip, &t, j);
        for (int j = 0; j < NSUB; j++)
            sym_refine_sub(c, x, w, wr, cap, &t, j, 1);
        if (!(sym_total(&t) < sym_total(st)))
            return;
        if (wr && !(sym_rtotal(&t) <= *cap))
            return;
        *st = t;
    }
}

/* wr (or NULL): ggml's own weights; with them every encoding kept beyond ggml's has a lower error
 * under w and no higher total error under wr than the one before it (ggml's objective). fits
 * (q3_k, or NULL): the sub-block fits, already computed (qtk_q3_fits_*, w all ones). */
void SYM_BLOCK(const sym_cfg *c, bool q6, const float *x, const float *w, const float *wr,
               const float *fits, sym_st *st)
{
    float rs[NSUB], os[NSUB];
    if (!q6 && fits) {
        memcpy(rs, fits, sizeof rs);
        memcpy(os, fits + NSUB, sizeof os);
    } else {
        if (!q6)
            SYM_REF_Q3(x, rs);
#ifdef SYM_FITS_Q6_LANES
        if (q6) /* eight sub-blocks at once, one per lane */
            SYM_FITS_Q6_LANES(c, x, w, rs, os);
        else
#endif
            for (int j = 0; j < NSUB; j++)
                SYM_FITS(c, x + j * SUB, w + j * SUB, q6, &rs[j], &os[j]);
    }
    sym_st o;
    sym_init(c, x, w, wr, rs, false, st);
    sym_init(c, x, w, wr, os, c->noclip, &o);
    float cap = sym_rtotal(st);
    if (sym_total(&o) < sym_total(st) && (!wr || sym_rtotal(&o) <= cap)) {
        *st = o;
        cap = sym_rtotal(st);
    }
    /* q3_k: the per-sub-block steps alone. Its superblock d refits (two rounds, each one
     * re-choosing all 16 sub-blocks) cost a fifth of the encoder's time and moved its RMSE
     * by under 0.01%; its output divergence on the bench models was the same without them. */
    if (!(sym_total(st) > 0))
        return;
#ifdef SYM_REFINE_Q3
    if (!q6 && wr && fits) { /* q3_k with weights all ones: its first pass in lanes */
        SYM_REFINE_Q3(c, x, w, wr, &cap, st);
        return;
    }
#endif
    sym_refine(c, x, w, wr, &cap, st, q6 ? 2 : 0);
}
