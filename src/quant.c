/* quant.c - F32 -> ggml legacy block types (q4_0 q4_1 q5_0 q5_1 q8_0) and the dispatch table
 * behind qtk_quant_ggml (k-quants live in quant_k.c).
 *
 * Per block: ggml's reference choice (quantize_row_*_ref, reimplemented from its formulas) is
 * one candidate; a scale sweep ranked by the least-squares error of its codes gives more; the
 * best ones are refined by alternating "codes given the fp16 scale(s)" and "least-squares
 * scale(s) given the codes" (fp16-rounded each time). Every candidate is scored by the exact
 * error of the values the decoder will produce; the lowest wins. */
#define QTK_QUANT_IMPL
#include "quant.h"
#include "dequant.h"
#include "qtk.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
#include <cpuid.h>
#endif

#define QX_MAX 1e8f

/* ---- shared helpers -------------------------------------------------- */

static inline float qh16(float f) { return qv_qh16(f); }
static inline uint16_t to_h16(float f) { return qtk_f2h(f); }

float qtk_qh16(float f) { return qh16(f); }

static inline void put16(uint8_t *p, float v)
{
    const uint16_t h = to_h16(v);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

bool qtk_simd_avx2(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
    static int state; /* 0 unknown, 1 no, 2 yes */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (!s) {
        const char *e = getenv("QTK_SIMD");
        s = !(e && strcmp(e, "generic") == 0) && __builtin_cpu_supports("avx2") ? 2 : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 2;
#else
    return false;
#endif
}

bool qtk_simd_avx512(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
    static int state; /* 0 unknown, 1 no, 2 yes */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (!s) {
        const char *e = getenv("QTK_SIMD");
        s = qtk_simd_avx2() && !(e && strcmp(e, "avx2") == 0) &&
                    __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
                ? 2
                : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 2;
#else
    return false;
#endif
}

bool qtk_cpu_f16c(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
    /* decided once: cpuid leaves a virtual machine (tens of microseconds) */
    static int state; /* 0 unknown, 1 no, 2 yes */
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (!s) {
        unsigned a, b, c, d;
        s = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0 ? 2 : 1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s == 2;
#else
    return false;
#endif
}

bool qtk_qprep(const float *x, const float *w, int n, float *xs, float *ws)
{
    int i0 = 0;
    /* four at a time: NaN -> +0, then the clamps (min/max keep the value when it is in range) */
    for (const qv4 hi = qv_set(QX_MAX), lo = qv_set(-QX_MAX); i0 + 4 <= n; i0 += 4)
        qv_st(xs + i0, qv_max(qv_min(qv_nan0(qv_ld(x + i0)), hi), lo));
    for (int i = i0; i < n; i++) {
        float v = x[i];
        if (!(v == v))
            v = 0.f;
        else if (v > QX_MAX)
            v = QX_MAX;
        else if (v < -QX_MAX)
            v = -QX_MAX;
        xs[i] = v;
    }
    if (w) {
        float mx = 0.f;
        for (int i = 0; i < n; i++) {
            float u = w[i];
            if (!(u > 0.f) || u > FLT_MAX)
                u = 0.f;
            ws[i] = u;
            if (u > mx)
                mx = u;
        }
        if (mx > 0.f) {
            for (int i = 0; i < n; i++)
                ws[i] = ws[i] / mx;
            return false;
        }
    }
    if (ws)
        for (int i = 0; i < n; i++)
            ws[i] = 1.f;
    return true;
}

void qtk_llama_weights(const float *x, int n, const float *qw, float *w)
{
    if (!qw) {
        for (int j = 0; j < n; j++)
            w[j] = 1.f;
        return;
    }
    float sigma2 = 0;
    for (int j = 0; j < n; ++j)
        sigma2 += x[j] * x[j];
    sigma2 *= 2.f / (float)n;
    for (int j = 0; j < n; j++)
        w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* ---- symmetric types: y = q*d, q in [lo, hi] --------------------------- */

#define QB QTK_SYM_QB /* legacy block size */

#define SYM_PAIR qtk_sym_pair_c
#include "quant_sym.h"

typedef qtk_sym_type sym_type;
typedef void (*sym_pair_fn)(const qtk_sym_type *, const float *, const float *, const float *,
                            const float *, float *, float *, float *);

/* The AVX2 build when the CPU has AVX2 and QTK_SIMD is not "generic". */
static sym_pair_fn sym_pair_impl(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
    if (qtk_simd_avx2() && qtk_sym_have_avx2())
        return qtk_sym_pair_avx2;
#endif
    return qtk_sym_pair_c;
}

/* Sanitised copy of a block (qtk_qprep's rule) and its weights; true when uniform (ws unset:
 * the search never reads it then; ws may be NULL when w is). */
static inline bool sym_prep(const float *x, const float *w, float *xs, float *ws)
{
    if (!w) {
        /* |x| <= QX_MAX in every lane (a NaN's min is QX_MAX, never equal to it), without a
         * branch per value */
        const qv4 lim = qv_set(QX_MAX);
        unsigned all = 0xF;
        for (int i = 0; i < QB; i += 4) {
            const qv4 a = qv_abs(qv_ld(x + i));
            all &= qv_eqmask(qv_min(a, lim), a);
        }
        if (all == 0xF) {
            memcpy(xs, x, QB * sizeof *xs);
            return true;
        }
    }
    return qtk_qprep(x, w, QB, xs, ws);
}

/* Encode nb blocks of a symmetric type, two at a time (quant_sym.h): d (fp16) and codes per
 * block, handed to pack. An odd last block is searched beside a copy of itself. */
static inline void sym_rows(const sym_type *T, const float *x, const float *w, uint8_t *dst,
                            uint64_t nb, size_t bsize,
                            void (*pack)(const float *q, float d, uint8_t *dst))
{
    float xs[2][QB], ws[2][QB], q[2][QB], d[2];
    const sym_pair_fn pair = sym_pair_impl();
    uint64_t b = 0;
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
    /* without weights, eight blocks at once where the AVX2 build has them (the same bytes);
     * not for a type without a candidate search (q5_0), whose pairs are cheaper than the
     * transposes */
    if (!w && T->nstep > 0 && pair == qtk_sym_pair_avx2 && qtk_sym_have_oct_avx2() &&
        qtk_cpu_f16c()) {
        float x8[8 * QB], q8[8 * QB], d8[8];
        for (; nb - b >= 8; b += 8, x += 8 * QB, dst += 8 * bsize) {
            for (int h = 0; h < 8; h++)
                sym_prep(x + h * QB, NULL, x8 + h * QB, NULL);
            qtk_sym_oct_avx2(T, x8, q8, d8);
            for (int h = 0; h < 8; h++)
                pack(q8 + h * QB, d8[h], dst + (size_t)h * bsize);
        }
    }
#endif
    for (; b < nb; b += 2, x += 2 * QB, dst += 2 * bsize) {
        const int n = nb - b > 1 ? 2 : 1;
        bool uni[2];
        for (int h = 0; h < n; h++)
            uni[h] = sym_prep(x + h * QB, w ? w + (b + (uint64_t)h) * QB : NULL, xs[h], ws[h]);
        if (n == 1) {
            memcpy(xs[1], xs[0], sizeof xs[0]);
            if (!uni[0])
                memcpy(ws[1], ws[0], sizeof ws[0]);
            uni[1] = uni[0];
        }
        pair(T, xs[0], xs[1], uni[0] ? NULL : ws[0], uni[1] ? NULL : ws[1], q[0], q[1], d);
        for (int h = 0; h < n; h++)
            pack(q[h], d[h], dst + (size_t)h * bsize);
    }
}

/* ---- asymmetric types: y = q*d + m, q in [0, nmax] ---------------------- */

#define ASYM_PAIR qtk_asym_pair_c
#define ASYM_QH16_CHECK qtk_asym_qh16_check_c
#include "quant_asym.h"

typedef void (*asym_pair_fn)(const float *, const float *, const float *, const float *,
                             const float *, int, bool, const float *, const float *, const float *,
                             float *, float *, float *);

/* The AVX2 build when the CPU has AVX2 and F16C and QTK_SIMD is not "generic". */
static asym_pair_fn asym_pair_impl(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(QTK_QV_PLAIN)
    if (qtk_simd_avx2() && qtk_cpu_f16c() && qtk_asym_have_avx2())
        return qtk_asym_pair_avx2;
#endif
    return qtk_asym_pair_c;
}

/* Two blocks' arrays a, b interleaved four values at a time (quant_asym.h's layout), and back. */
static void ap_interleave(const float *a, const float *b, float *out)
{
    for (int i = 0; i < QB; i += 4) {
        memcpy(out + 2 * i, a + i, 4 * sizeof *out);
        memcpy(out + 2 * i + 4, b + i, 4 * sizeof *out);
    }
}

static void ap_split(const float *in, float *a, float *b)
{
    for (int i = 0; i < QB; i += 4) {
        memcpy(a + i, in + 2 * i, 4 * sizeof *a);
        memcpy(b + i, in + 2 * i + 4, 4 * sizeof *b);
    }
}

/* The smallest and largest of a block's 32 values (sanitised: no NaN), the first of equal ones
 * as ggml's loop keeps them: four lanes, and that loop itself when a result is zero (the only
 * value whose equal copies may differ in bits, -0 and +0). */
static void block_minmax(const float *x, float *mnp, float *mxp)
{
    qv4 a = qv_ld(x), b = a;
    for (int i = 4; i < QB; i += 4) {
        const qv4 v = qv_ld(x + i);
        a = qv_min(v, a); /* v < a ? v : a */
        b = qv_max(v, b);
    }
    float ta[4], tb[4];
    qv_st(ta, a);
    qv_st(tb, b);
    float mn = ta[0], mx = tb[0];
    for (int k = 1; k < 4; k++) {
        mn = ta[k] < mn ? ta[k] : mn;
        mx = tb[k] > mx ? tb[k] : mx;
    }
    if (mn == 0.f || mx == 0.f) {
        mn = mx = x[0];
        for (int i = 1; i < QB; i++) {
            mn = x[i] < mn ? x[i] : mn;
            mx = x[i] > mx ? x[i] : mx;
        }
    }
    *mnp = mn;
    *mxp = mx;
}

/* ---- ggml reference choices (formulas of quantize_row_*_ref) ----------- */

/* q4_1 / q5_1: d = (max-min)/nmax, m = min, code = min(nmax, trunc((x-min)/d + 0.5)). */
static void ref_asym(const float *x, float mn, float mx, int nmax, float *q, float *dout,
                     float *mout)
{
    const float d = (mx - mn) / (float)nmax;
    const float id = d != 0.f ? 1.f / d : 0.f;
    const qv4 vid = qv_set(id), vmn = qv_set(mn), h = qv_set(0.5f), z = qv_set(0.f);
    const qv4 top = qv_set((float)nmax);
    for (int i = 0; i < QB; i += 4) {
        const qv4 v = qv_add(qv_mul(qv_sub(qv_ld(x + i), vmn), vid), h);
        qv_st(q + i, qv_trunc(qv_min(qv_max(v, z), top)));
    }
    *dout = qh16(d);
    *mout = qh16(mn);
}

/* ---- row encoders ------------------------------------------------------ */

static void to_u8(const float *q, int off, uint8_t *u)
{
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
    /* the codes are whole numbers in [-128, 255 - off]: truncation is exact, and the 32-bit
     * sums fit the saturating packs (low byte of code + off, as the cast takes it) */
    const __m128i vo = _mm_set1_epi32(off), m = _mm_set1_epi32(0xFF);
    for (int i = 0; i < QB; i += 16) {
        __m128i a[4];
        for (int k = 0; k < 4; k++) {
            const __m128i c = _mm_cvttps_epi32(_mm_loadu_ps(q + i + 4 * k));
            a[k] = _mm_and_si128(_mm_add_epi32(c, vo), m);
        }
        const __m128i lo = _mm_packs_epi32(a[0], a[1]), hi = _mm_packs_epi32(a[2], a[3]);
        _mm_storeu_si128((__m128i *)(void *)(u + i), _mm_packus_epi16(lo, hi));
    }
#else
    for (int i = 0; i < QB; i++)
        u[i] = (uint8_t)((int)q[i] + off);
#endif
}

static void pack_nib(const uint8_t *u, uint8_t *qs)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((u[j] & 0x0F) | ((u[j + 16] & 0x0F) << 4));
}

/* bit 4 of each of the 32 codes, code j at bit j */
static void pack_qh(const uint8_t *u, uint8_t *qh)
{
    uint32_t h = 0;
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
    /* a 16-bit shift by 3 puts each byte's bit 4 on its bit 7, which movemask gathers */
    for (int j = 0; j < QB; j += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(u + j));
        h |= (uint32_t)_mm_movemask_epi8(_mm_slli_epi16(v, 3)) << j;
    }
#else
    for (int j = 0; j < QB; j++)
        h |= (uint32_t)((u[j] >> 4) & 1) << j;
#endif
    qh[0] = (uint8_t)h;
    qh[1] = (uint8_t)(h >> 8);
    qh[2] = (uint8_t)(h >> 16);
    qh[3] = (uint8_t)(h >> 24);
}

static void pack_q4_0(const float *q, float d, uint8_t *dst)
{
    uint8_t u[QB];
    to_u8(q, 8, u);
    put16(dst, d);
    pack_nib(u, dst + 2);
}

static void pack_q5_0(const float *q, float d, uint8_t *dst)
{
    uint8_t u[QB];
    to_u8(q, 16, u);
    put16(dst, d);
    pack_qh(u, dst + 2);
    pack_nib(u, dst + 6);
}

static void pack_q8_0(const float *q, float d, uint8_t *dst)
{
    put16(dst, d);
    for (int i = 0; i < QB; i++)
        dst[2 + i] = (uint8_t)(int8_t)(int)q[i];
}

/* q8_0 takes one refinement step and no second round: with 255 levels the orientation
 * candidate (the largest |x| on -128, a level ggml's rule never uses) is most of the gain, and
 * the further steps cost a fifth of a q8_0 run for 0.4% of RMSE (0.943x ggml's instead of 0.939x
 * on the bench model). q5_0 without an importance matrix is ggml's choice exactly (the largest
 * |x| on -16, codes already the nearest for the fp16 scale): every change of scale measured
 * raised the output divergence on the fixture's heavy-tailed tiny model, averaged over
 * perturbed copies (one least-squares step 1.07x llama-quantize's KLD at 0.989x its RMSE; the
 * step only when it grows the scale 1.008x; only when it lowers the x^2-weighted error 1.02x;
 * the full search 1.07x; docs/benchmarks.md). With an importance matrix it takes one weighted
 * least-squares step from ggml's choice. q4_0 keeps the full search, whose KLD was 0.96x
 * llama-quantize's while one step gave 1.090x and four candidates with one step 1.196x. Never
 * worse than ggml's RMSE: its choice is the baseline and a candidate or step is kept only when
 * it lowers the block's error. */
static const sym_type k_q4_0 = { -8, 7, 8, 4, -0.3f, 0.3f, 4, 3 };
static const sym_type k_q5_0 = { -16, 15, 16, 0, 0.f, 0.f, 1, 0 };
static const sym_type k_q8_0 = { -128, 127, 0, 1, 0.f, 0.f, 1, 0 };

static void qrow_q4_0(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    sym_rows(&k_q4_0, x, w, dst, nb, 18, pack_q4_0);
}

static void qrow_q5_0(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    sym_rows(&k_q5_0, x, w, dst, nb, 22, pack_q5_0);
}

static void qrow_q8_0(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    sym_rows(&k_q8_0, x, w, dst, nb, 34, pack_q8_0);
}

/* The weights of the second error q4_1/q5_1 never raise (quant_asym.h's XR): without an importance
 * matrix x^2; with one, llama.cpp's own weighting imatrix * sqrt(sigma2 + x^2), sigma2 the mean of
 * x^2 over the row (quantize_row_q4_1_impl's). */
static float row_sigma2(const float *x, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* qtk_qprep's rule: NaN -> 0, clamped to +-QX_MAX */
        const float v = !(x[i] == x[i]) ? 0.f : x[i] > QX_MAX ? QX_MAX : x[i] < -QX_MAX ? -QX_MAX : x[i];
        s += (double)v * v;
    }
    return (float)(s / (double)n);
}

static void guard_weights(const float *xs, const float *ws, bool uniform, float sigma2, float *xr)
{
    if (uniform)
        for (int i = 0; i < QB; i += 4)
            qv_st(xr + i, qv_mul(qv_ld(xs + i), qv_ld(xs + i)));
    else
        for (int i = 0; i < QB; i++)
            xr[i] = ws[i] * sqrtf(sigma2 + xs[i] * xs[i]);
}

/* One block ready for the search: sanitised values and weights, guard weights, its smallest
 * and largest value, ggml's choice, and where its encoding goes. */
typedef struct {
    float xs[QB], ws[QB], xr[QB], rq[QB], rd, rm, mn, mx;
    uint8_t *dst;
} asym_in;

/* The rest of *in from its sanitised block in->xs: extremes and ggml's choice. */
static void asym_ref(asym_in *in, int nmax)
{
    block_minmax(in->xs, &in->mn, &in->mx);
    ref_asym(in->xs, in->mn, in->mx, nmax, in->rq, &in->rd, &in->rm);
}

/* The search of blocks a and b (b NULL: a alone, searched beside a copy of itself), each
 * encoding handed to pack; search false: one guarded step from ggml's choice (quant_asym.h). */
static void asym_run(asym_pair_fn fn, int nmax, bool search, const asym_in *a, const asym_in *b,
                     void (*pack)(const float *q, float d, float m, uint8_t *dst))
{
    const asym_in *o = b ? b : a;
    float X[2 * QB], W[2 * QB], XR[2 * QB], RQ[2 * QB], Q[2 * QB], qa[QB], qb[QB];
    ap_interleave(a->xs, o->xs, X);
    ap_interleave(a->ws, o->ws, W);
    ap_interleave(a->xr, o->xr, XR);
    ap_interleave(a->rq, o->rq, RQ);
    const float mn[2] = { a->mn, o->mn }, mx[2] = { a->mx, o->mx };
    const float rd[2] = { a->rd, o->rd }, rm[2] = { a->rm, o->rm };
    float d[2], m[2];
    fn(X, W, XR, mn, mx, nmax, search, rd, rm, RQ, Q, d, m);
    ap_split(Q, qa, qb);
    pack(qa, d[0], m[0], a->dst);
    if (b)
        pack(qb, d[1], m[1], b->dst);
}

static void pack_q4_1(const float *q, float d, float m, uint8_t *dst)
{
    uint8_t u[QB];
    to_u8(q, 0, u);
    put16(dst, d);
    put16(dst + 2, m);
    pack_nib(u, dst + 4);
}

static void pack_q5_1(const float *q, float d, float m, uint8_t *dst)
{
    uint8_t u[QB];
    to_u8(q, 0, u);
    put16(dst, d);
    put16(dst + 2, m);
    pack_qh(u, dst + 4);
    pack_nib(u, dst + 8);
}

/* q4_1 and q5_1 without an importance matrix: ggml's choice and one least-squares step from it,
 * kept when it lowers the block's error without raising its x^2-weighted one (quant_asym.h's
 * guard). The full search (four candidate scales, then two rounds of steps) took 8 ns a value
 * against llama.cpp's 1.4, for 0.934x ggml's RMSE on the bench model; the one step takes 3.7 for
 * 0.969x and makes both types faster than llama-quantize. Its output divergence is lower too
 * where it counts: q4_1 0.989x llama-quantize's KLD on the fixture's tiny model, where the full
 * search measured 1.010x the same day (0.991x against 0.979x on the 32k-vocabulary model; q5_1
 * 0.920x and 0.929x, the full search 0.917x and 0.897x; docs/benchmarks.md). With an
 * importance matrix q4_1 keeps the full search (KLD 0.81-0.99x). */
static void q4_1_rows(const float *x, const float *w, uint8_t *dst, uint64_t nb, bool search)
{
    const asym_pair_fn fn = asym_pair_impl();
    const float sigma2 = w ? row_sigma2(x, nb * QB) : 0.f;
    asym_in in[2];
    int n = 0;
    for (uint64_t b = 0; b < nb; b++, x += QB, dst += 20) {
        asym_in *p = &in[n];
        const bool uniform = qtk_qprep(x, w ? w + b * QB : NULL, QB, p->xs, p->ws);
        guard_weights(p->xs, p->ws, uniform, sigma2, p->xr);
        asym_ref(p, 15);
        p->dst = dst;
        if (++n == 2) {
            asym_run(fn, 15, search, &in[0], &in[1], pack_q4_1);
            n = 0;
        }
    }
    if (n)
        asym_run(fn, 15, search, &in[0], NULL, pack_q4_1);
}

static void qrow_q4_1(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    q4_1_rows(x, w, dst, nb, w != NULL);
}

/* q4_1 for a tensor an importance matrix does not cover, in a conversion that uses one: the
 * full search, as where it covers (the figures with a matrix were measured so) */
static void qrow_q4_1_search(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    q4_1_rows(x, w, dst, nb, true);
}

/* q5_1: without an importance matrix ggml's choice and one guarded step (above). With one,
 * llama.cpp's choice as it is (quantize_row_q5_1_impl: make_qkx3_quants(32, 31, -0.9, 0.05, 36)
 * under imatrix * sqrt(sigma2 + x^2), sigma2 the row's mean x^2, codes as fitted, d and m
 * rounded to fp16), and in a conversion that uses a matrix ggml's plain choice for the tensors
 * it does not cover (qrow_q5_1_ref): the guarded search measured 1.18x llama's divergence with
 * a matrix on the project's sample model (every copy above 1; 0.96x on the fixture's tiny
 * model), llama's choice for the covered tensors alone 0.99x and 1.07x (docs/benchmarks.md). */
static void qrow_q5_1(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    const asym_pair_fn fn = asym_pair_impl();
    const bool search = w != NULL;
    float sigma2 = 0.f;
    if (w) {
        /* llama's float sum, of the sanitised values */
        for (uint64_t j = 0; j < nb * QB; j++) {
            const float v = !(x[j] == x[j]) ? 0.f : x[j] > QX_MAX ? QX_MAX : x[j] < -QX_MAX ? -QX_MAX : x[j];
            sigma2 += v * v;
        }
        sigma2 = sigma2 / (float)(nb * QB);
    }
    asym_in in[2];
    int n = 0;
    for (uint64_t b = 0; b < nb; b++, x += QB, dst += 24) {
        asym_in *p = &in[n];
        if (qtk_qprep(x, w ? w + b * QB : NULL, QB, p->xs, p->ws)) {
            guard_weights(p->xs, p->ws, true, 0.f, p->xr);
            asym_ref(p, 31);
            p->dst = dst;
            if (++n == 2) {
                asym_run(fn, 31, search, &in[0], &in[1], pack_q5_1);
                n = 0;
            }
        } else {
            float lw[QB], q[QB], mn;
            for (int j = 0; j < QB; j++) {
                const float u = w[b * QB + (uint64_t)j];
                lw[j] = (u > 0.f && u <= FLT_MAX ? u : 0.f) * sqrtf(sigma2 + p->xs[j] * p->xs[j]);
            }
            const float d = qh16(qtk_qkx_fit(p->xs, lw, 31, -0.9f, 0.05f, 36, q, &mn));
            pack_q5_1(q, d, qh16(-mn), dst);
        }
    }
    if (n)
        asym_run(fn, 31, search, &in[0], NULL, pack_q5_1);
}

/* ggml's q5_1 choice (quantize_row_q5_1_ref), importances unused */
static void qrow_q5_1_ref(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    (void)w;
    float xs[QB], ws[QB], q[QB], d, m;
    for (uint64_t b = 0; b < nb; b++, x += QB, dst += 24) {
        qtk_qprep(x, NULL, QB, xs, ws);
        float mn, mx;
        block_minmax(xs, &mn, &mx);
        ref_asym(xs, mn, mx, 31, q, &d, &m);
        pack_q5_1(q, d, m, dst);
    }
}

/* ---- dispatch ---------------------------------------------------------- */

/* Row encoders: called once per row with that row's blocks. */
/* MXFP4 (ggml's quantize_row_mxfp4_ref arithmetic): e = floor(log2 amax) - 2 + 127 (0 for an
 * all-zero block; clamped to 0..255 where ggml's cast would be undefined), d = 2^(e-128), each
 * value the nearest of the doubled E2M1 table times d, the lowest code on a tie. Element j in
 * the low nibble of byte j, element j+16 in the high nibble. The importance vector is unused. */
static const int8_t mx_kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

static uint8_t mx_nearest(float x, float d)
{
    uint8_t best = 0;
    float err = fabsf((float)mx_kv[0] * d - x);
    for (uint8_t i = 1; i < 16; i++) {
        float e = fabsf((float)mx_kv[i] * d - x);
        if (e < err) {
            best = i;
            err = e;
        }
    }
    return best;
}

static void qrow_mxfp4(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    (void)w;
    for (uint64_t b = 0; b < nb; b++, x += 32, dst += 17) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j]))
                amax = fabsf(x[j]);
        float fe = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;
        uint8_t e = fe <= 0.0f ? 0 : fe >= 255.0f ? 255 : (uint8_t)fe;
        uint32_t bits = e < 2 ? UINT32_C(0x00200000) << e : (uint32_t)(e - 1) << 23;
        float d;
        memcpy(&d, &bits, 4);
        dst[0] = e;
        for (int j = 0; j < 16; j++)
            dst[1 + j] = (uint8_t)(mx_nearest(x[j], d) | mx_nearest(x[j + 16], d) << 4);
    }
}

/* NVFP4 (ggml's quantize_row_nvfp4_ref arithmetic): 64 elements in four sub-blocks of 16, each
 * with the UE4M3 scale byte of amax/6 (ggml_fp32_to_ue4m3: clamped to 448, the fourth mantissa
 * bit rounds half up, subnormals man = (int)(x*512 + 0.5), 0 for x <= 0 or NaN), the scale the
 * byte decodes to (halved, as ggml's doubled E2M1 table wants) and each value the nearest table
 * entry, as MXFP4. Block: d[4], then qs[32]; sub-block s puts element 16s+j (j < 8) in the low
 * nibble of qs[8s+j] and element 16s+8+j in its high nibble. No importance weighting. */
static uint8_t f32_to_ue4m3(float x)
{
    if (!(x > 0.0f))
        return 0;
    if (x > 448.0f)
        x = 448.0f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    const int ex = (int)((bits >> 23) & 0xFF) - 127 + 7;
    if (ex <= 0) {
        int man = (int)(x * 512.0f + 0.5f);
        if (man > 7)
            man = 7;
        return man < 1 ? 0 : (uint8_t)man;
    }
    if (ex >= 15)
        return 0x7E;
    int man = (int)((bits >> 20) & 0x7) + (int)((bits >> 19) & 1);
    int e = ex;
    if (man > 7) {
        man = 0;
        if (++e >= 15)
            return 0x7E;
    }
    return (uint8_t)(e << 3 | man);
}

static float ue4m3_half_q(uint8_t x)
{
    if (x == 0 || x == 0x7F)
        return 0.0f;
    const int ex = (x >> 3) & 0xF, man = x & 0x7;
    const float raw = ex == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, ex - 7);
    return raw * 0.5f;
}

static void qrow_nvfp4(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    (void)w;
    for (uint64_t b = 0; b < nb; b++, x += 64, dst += 36) {
        for (int s = 0; s < 4; s++) {
            const float *xb = x + 16 * s;
            float amax = 0.0f;
            for (int j = 0; j < 16; j++)
                if (amax < fabsf(xb[j]))
                    amax = fabsf(xb[j]);
            const uint8_t ue = f32_to_ue4m3(amax / 6.0f);
            const float d = ue4m3_half_q(ue);
            dst[s] = ue;
            for (int j = 0; j < 8; j++)
                dst[4 + 8 * s + j] = (uint8_t)(mx_nearest(xb[j], d) | mx_nearest(xb[j + 8], d) << 4);
        }
    }
}

static const struct {
    unsigned type;
    qtk_qrow_fn fn;
} k_encoders[] = {
    { QTK_T_Q4_0, qrow_q4_0 },
    { QTK_T_Q4_1, qrow_q4_1 },
    { QTK_T_Q5_0, qrow_q5_0 },
    { QTK_T_Q5_1, qrow_q5_1 },
    { QTK_T_Q8_0, qrow_q8_0 },
    { QTK_T_Q2_K, qtk_qrow_q2_k },
    { QTK_T_Q3_K, qtk_qrow_q3_k },
    { QTK_T_Q4_K, qtk_qrow_q4_k },
    { QTK_T_Q5_K, qtk_qrow_q5_k },
    { QTK_T_Q6_K, qtk_qrow_q6_k },
    { QTK_T_MXFP4, qrow_mxfp4 },
    { QTK_T_NVFP4, qrow_nvfp4 },
};

/* Whole-matrix encoders with qtk_quant_ggml's own signature (quant_iq4.c). */
typedef int (*qtk_qmat_fn)(const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                           const float *imatrix);
static const struct {
    unsigned type;
    qtk_qmat_fn fn;
} k_mat_encoders[] = {
    { QTK_T_IQ4_NL, qtk_quant_iq4_nl },
    { QTK_T_IQ4_XS, qtk_quant_iq4_xs },
};

static qtk_qrow_fn find_row_encoder(unsigned type)
{
    for (size_t i = 0; i < sizeof k_encoders / sizeof k_encoders[0]; i++)
        if (k_encoders[i].type == type)
            return k_encoders[i].fn;
    return NULL;
}

static qtk_qmat_fn find_mat_encoder(unsigned type)
{
    for (size_t i = 0; i < sizeof k_mat_encoders / sizeof k_mat_encoders[0]; i++)
        if (k_mat_encoders[i].type == type)
            return k_mat_encoders[i].fn;
    return NULL;
}

bool qtk_quant_supported(unsigned type)
{
    return find_row_encoder(type) != NULL || find_mat_encoder(type) != NULL;
}

int qtk_quant_ggml(unsigned type, const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                   const float *imatrix)
{
    return qtk_quant_ggml_ex(type, src, dst, nrows, n_per_row, imatrix, 0);
}

int qtk_quant_ggml_ex(unsigned type, const float *src, void *dst, uint64_t nrows,
                      uint64_t n_per_row, const float *imatrix, unsigned flags)
{
    const qtk_qmat_fn mfn = find_mat_encoder(type);
    if (mfn)
        return mfn(src, dst, nrows, n_per_row, imatrix);
    qtk_qrow_fn fn = find_row_encoder(type);
    if (flags & QTK_QUANT_IMATRIX_RUN)
        fn = type == QTK_T_Q6_K   ? qtk_qrow_q6_k_ref
             : type == QTK_T_Q4_K ? qtk_qrow_q4_k_ref
             : type == QTK_T_Q5_K ? qtk_qrow_q5_k_ref
             : type == QTK_T_Q3_K ? qtk_qrow_q3_k_ref
             : type == QTK_T_Q5_1 && !imatrix ? qrow_q5_1_ref
             : type == QTK_T_Q4_1 && !imatrix ? qrow_q4_1_search
                                  : fn;
    uint32_t be, bb;
    if (!fn || qtk_ggml_block_info(type, &be, &bb) != 0 || be == 0 || n_per_row % be != 0)
        return -1;
    const uint64_t nb = n_per_row / be;
    uint8_t *out = (uint8_t *)dst;
    for (uint64_t r = 0; r < nrows; r++)
        fn(src + r * n_per_row, imatrix, out + r * nb * bb, nb);
    return 0;
}
