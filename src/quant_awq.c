/* quant_awq.c - AutoAWQ GEMM and GPTQ (AutoGPTQ packing) encoders from float weights.
 *
 * Each group (one output row, `group` consecutive inputs) is fitted by qtk_fit_group: min-max
 * round-to-nearest with an MSE-optimal clipping search, scored by the squared error of the
 * values as the decoders compute them, (float)(q - z) * fp16_to_f32(s) - so the packed output
 * decodes bit-exactly (qtk_dequant_awq / qtk_dequant_gptq) to what the search assumed.
 *
 * Candidates per group (the lowest error wins; ties keep the earlier candidate):
 *   - s = 0 (all values decode to 0);
 *   - min-max over [min, max] (AutoAWQ) shrunk by p = 1.00, 0.95, ..., 0.60 at both ends
 *     (symmetric: max|x| shrunk the same way, both for GPTQ's 2*amax/maxq and amax/2^(b-1));
 *     min-max over [min(min,0), max(max,0)] (GPTQ's find_params);
 *   - AutoAWQ's pseudo_quantize_tensor computed in fp16 arithmetic;
 *   - exact steps: range/k for k = 1..maxq-1 when the first values lie on that grid, with the
 *     zero placing the low end at code 0 or the high end at maxq - values already on some
 *     (q - z)*s grid with an fp16 s are reproduced exactly (re-encoding decoded AWQ/GPTQ is
 *     lossless);
 *   - refinement of the winner: zero -1/0/+1 with a least-squares scale for its codes, and the
 *     fp16 neighbours of the scale, repeated while a round improves (at most 4 rounds).
 * For every candidate scale the zero is the rounded -lo/s (for both the unrounded and the fp16
 * scale) and the codes are the per-element nearest decoded values, so each candidate's error is
 * the least achievable with its (s, z).
 *
 * What the search leaves out never changes the winner (tests/test_awq_search.c holds it to the
 * same search written plainly): a pair it has tried before (memo_seen), a first-phase pair
 * whose clipped smallest and largest values alone cost the incumbent's error (clip_bound), the
 * rest of an error sum once it is sure to reach the incumbent's (quant_awq_ev.h), and the
 * refinement after a first phase of error 0.
 *
 * Zeros: AWQ and GPTQ v2 store the zero itself (0..2^bits-1). GPTQ v1 stores zero - 1 and
 * engines add 1 back without wrap-around, so a zero of 0 would be written as 2^bits - 1 and
 * decode as 2^bits: for v1 the asymmetric search is restricted to zeros >= 1 (zmin 1), which
 * costs a little accuracy in groups whose values are all (nearly) >= 0 but keeps the file
 * decoding as intended. Symmetric: zero = 2^(bits-1) in every version.
 *
 * Deterministic: element-wise IEEE arithmetic under -ffp-contract=off, error sums in double in a
 * fixed order (quant_awq_ev.h: the same value from the generic and the AVX2 build), no libm
 * beyond fabsf; no threads, no mutable globals. */
#include "quant.h"
#include "dequant.h"
#include "packing.h"
#include "fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XCLAMP 1e8f
#define FP16_MAX_BITS 0x7bffu
/* search effort (chosen on the tiny fixtures: more buys < 0.1% RMSE at 1.5-2x the time) */
#define GRID_N 8        /* shrink factors p = 1 - GRID_STEP*i, i = 0..GRID_N */
#define GRID_STEP 0.05f
#define REFINE_ITERS 4  /* refinement rounds (stop early when a round does not improve) */
#define REF_NEIGH 1     /* fp16 scale neighbours tried on each side per round */
#define MEMO_SLOTS 128  /* open-addressing table of the pairs a group has tried (a power of 2) */

/* round half to even for |f| < 2^22 (inputs are clamped first; NaN -> clamp low) */
static int rint_i(float f)
{
    if (!(f >= -4194303.f))
        f = -4194303.f;
    if (f > 4194303.f)
        f = 4194303.f;
    const float val = f + 12582912.f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static float fp16r(float f) { return qtk_h2f(qtk_f2h(f)); }

typedef struct gfit {
    const float *x;    /* the values, zeros from n to n16 */
    const double *xd;  /* the same in double */
    uint32_t n, n16;   /* n16: n rounded up to a multiple of 16 */
    int maxq;
    int zlo, zhi;      /* allowed zeros (equal when symmetric) */
    float xmin, xmax;  /* of the (sanitised) values */
    double e0;         /* the error of s = 0: the sum of x^2 in element order */
    double abs_sum;    /* the sum of |x|, rounded up (by far more than its rounding errors) */
    const struct ev_impl *ev; /* the kernels: generic or AVX2 */
    bool phase0;       /* the first candidates (clip_bound pays only there) */
    /* incumbent */
    double err;
    uint16_t h;        /* fp16 scale bits */
    int z;
    /* the (h, z) pairs tried and refitted so far (memo_seen) */
    uint32_t memo[MEMO_SLOTS];
} gfit;

/* The error sum: quant_awq_ev.h, generic here, AVX2 in quant_awq_avx2.c, AVX-512 in
 * quant_awq_avx512.c (the same value). */
#define EV_SUM qtk_awq_ev_sum_c
#define EV_CODES qtk_awq_ev_codes_c
#define EV_REFINE3 qtk_awq_ev_refine3_c
#include "quant_awq_ev.h"
#undef EV_SUM
#undef EV_CODES
#undef EV_REFINE3

typedef struct ev_impl {
    double (*sum)(const float *, const double *, uint32_t, float, float, float, double);
    void (*codes)(const float *, const double *, uint32_t, float, float, float, uint8_t *);
    void (*refine3)(const float *, const double *, uint32_t, float, float, float, double, double *,
                    double *, double *);
} ev_impl;

static const ev_impl k_ev_c = { qtk_awq_ev_sum_c, qtk_awq_ev_codes_c, qtk_awq_ev_refine3_c };
static const ev_impl k_ev_avx2 = { qtk_awq_ev_sum_avx2, qtk_awq_ev_codes_avx2,
                                   qtk_awq_ev_refine3_avx2 };

static const ev_impl k_ev_avx512 = { qtk_awq_ev_sum_avx512, qtk_awq_ev_codes_avx512,
                                     qtk_awq_ev_refine3_avx512 };

static const ev_impl *ev(void)
{
    if (qtk_awq_have_avx512() && qtk_simd_avx512())
        return &k_ev_avx512;
    return qtk_awq_have_avx2() && qtk_simd_avx2() ? &k_ev_avx2 : &k_ev_c;
}

/* Error of (s, z) with per-element nearest codes (quant_awq_ev.h), the squares summed in double in
 * eight lanes (element j into lane j mod 8, lanes added in a fixed order: the same sum on every
 * build); may stop early, returning a value >= limit, once the error is sure to reach `limit`.
 * s = 0: the sum of x^2 in element order (made with the group's copies). codes, when not NULL,
 * get the codes (n16 of them; the sum is then not computed: 0; callers that want codes ignore
 * it). */
static double eval_sz(const gfit *g, float s, int z, double limit, uint8_t *codes)
{
    if (s == 0.f) {
        if (codes)
            memset(codes, z, g->n16);
        return g->e0;
    }
    const float zf = (float)z, mf = (float)g->maxq;
    if (codes) {
        g->ev->codes(g->x, g->xd, g->n16, s, zf, mf, codes);
        return 0;
    }
    return g->ev->sum(g->x, g->xd, g->n16, s, zf, mf, limit);
}

/* fp16 bits for a positive scale: 0 when it rounds to zero or is not positive, saturated at
 * the largest finite fp16. */
static uint16_t scale_bits(float s)
{
    if (!(s > 0.f))
        return 0;
    uint16_t h = qtk_f2h(s);
    if ((h & 0x7fffu) > FP16_MAX_BITS)
        h = FP16_MAX_BITS;
    return h;
}

static int clampz(const gfit *g, int z) { return z < g->zlo ? g->zlo : z > g->zhi ? g->zhi : z; }

/* Memo of the candidates a group has met. A pair (h, z) tried once can never win again: its
 * error is the same each time, and it lost to (or became) an incumbent whose error only falls
 * since. Likewise a pair refitted once yields the same least-squares candidate. So skipping a
 * second try or refit leaves every result as it was. Keys: h << 8 | z, bit 31 for a refit;
 * slot value key + 1 (0: empty). When the table fills, candidates are simply evaluated. */
#define MEMO_REFIT 0x80000000u
/* true when key was there already; else records it (when there is room) */
static bool memo_seen(gfit *g, uint32_t key)
{
    for (uint32_t i = (key * 0x9e3779b1u) >> 25, k = 0; k < 8; k++, i = (i + 1) & (MEMO_SLOTS - 1)) {
        if (g->memo[i] == key + 1)
            return true;
        if (g->memo[i] == 0) {
            g->memo[i] = key + 1;
            return false;
        }
    }
    return false;
}

static uint32_t hz_key(uint16_t h, int z) { return (uint32_t)h << 8 | (uint32_t)z; }

/* A lower bound of eval_sz's full sum for (s, z), s > 0: the terms of the smallest and the
 * largest value when (s, z) clips them to code 0 and maxq (test 1/s * x <= -z, resp. >= maxq - z,
 * as the kernels do: such a lane's t is clamped to the bound, its step count is the bound, and
 * the neighbour test never moves it - quant_awq_ev.h's argument for clamped lanes), computed as
 * the kernels compute a term: (x - k*s)^2 in double with k*s a float. The kernels' sum adds
 * non-negative terms, and floating-point addition is monotone, so the sum is at least these two
 * terms added (the others as zeros). They are two elements: one value cannot pass both tests
 * (-z < maxq - z), so with n = 1, or a constant group, at most one term is counted. */
static double clip_bound(const gfit *g, float s, int z)
{
    const float inv = 1.f / s, klo = (float)-z, khi = (float)(g->maxq - z);
    double lb = 0;
    if (g->xmin * inv <= klo) {
        const double d = (double)g->xmin - (double)(klo * s);
        lb = d * d;
    }
    if (g->xmax * inv >= khi) {
        const double d = (double)g->xmax - (double)(khi * s);
        lb += d * d;
    }
    return lb;
}

/* (h, z) with error e becomes the incumbent when it is strictly better */
static void take(gfit *g, uint16_t h, int z, double e)
{
    if (e < g->err) {
        g->err = e;
        g->h = h;
        g->z = z;
    }
}

/* Try (h, z); known, when not NULL, is its full error (from a pass that also made codes). */
static void try_hz_known(gfit *g, uint16_t h, int z, const double *known)
{
    if (h == 0 || h > FP16_MAX_BITS)
        return;
    z = clampz(g, z);
    if (memo_seen(g, hz_key(h, z)))
        return;
    if (!known && g->phase0 && clip_bound(g, qtk_h2f(h), z) >= g->err)
        return;
    take(g, h, z, known ? *known : eval_sz(g, qtk_h2f(h), z, g->err, NULL));
}

static void try_hz(gfit *g, uint16_t h, int z) { try_hz_known(g, h, z, NULL); }

/* try_hz for a pair whose zero is clamped already and whose clip_bound is lb */
static void try_pre(gfit *g, uint16_t h, int z, double lb)
{
    if (h == 0 || memo_seen(g, hz_key(h, z)) || lb >= g->err)
        return;
    take(g, h, z, eval_sz(g, qtk_h2f(h), z, g->err, NULL));
}

/* Candidate scale s (unrounded) for the range [lo, hi]: zeros from the unrounded and the
 * rounded scale mapping lo to code 0; with `both_ends` also hi to maxq. */
static void try_scale(gfit *g, float s, float lo, float hi, bool both_ends)
{
    const uint16_t h = scale_bits(s);
    if (!h)
        return;
    const float sh = qtk_h2f(h);
    if (g->zlo == g->zhi) {
        try_hz(g, h, g->zlo);
        return;
    }
    const int z1 = clampz(g, rint_i(-lo / s));
    const int z2 = clampz(g, rint_i(-lo / sh));
    try_hz(g, h, z1);
    if (z2 != z1)
        try_hz(g, h, z2);
    if (both_ends) {
        const int z3 = clampz(g, rint_i((float)g->maxq - hi / sh));
        if (z3 != z1 && z3 != z2)
            try_hz(g, h, z3);
    }
}

/* AutoAWQ pseudo_quantize_tensor (zero point) in fp16 tensor arithmetic: each op rounds to
 * fp16. */
static void try_autoawq(gfit *g)
{
    if (g->zlo == g->zhi)
        return;
    float r = fp16r(g->xmax - g->xmin);
    const float eps = fp16r(1e-5f);
    if (r < eps)
        r = eps;
    const float s = fp16r(r / (float)g->maxq);
    const uint16_t h = scale_bits(s);
    if (!h)
        return;
    const int z = -rint_i(fp16r(g->xmin / qtk_h2f(h)));
    try_hz(g, h, z);
}

/* One refinement round around the incumbent (h, z): for zz = z-1, z, z+1 (within the allowed
 * zeros) the least-squares scale of the codes (h, zz) assigns is tried at zz, and for zz != z
 * (h, zz) itself; then the fp16 neighbours of h at z. The three least-squares scales depend only
 * on (h, z), so their sums (sxq in element order, sqq exact) and the errors of (h, z -+ 1) are
 * made first, in one pass (refine3), and the tries then run in their order: the same results as
 * one refit after the other. */
static void refine_round(gfit *g)
{
    const uint16_t h = g->h;
    const int z = g->z;
    bool fitted[3] = { false, false, false };
    for (int d = 0; d < 3; d++) {
        const int zz = z + d - 1;
        fitted[d] = zz >= g->zlo && zz <= g->zhi && !memo_seen(g, MEMO_REFIT | hz_key(h, zz));
    }
    double sxq[3], sqq[3], e[2];
    uint16_t hl[3] = { 0, 0, 0 }; /* the least-squares scales, all made before the tries */
    if (fitted[0] || fitted[1] || fitted[2]) {
        g->ev->refine3(g->x, g->xd, g->n16, qtk_h2f(h), (float)z, (float)g->maxq, g->abs_sum, sxq,
                      sqq, e);
        for (int d = 0; d < 3; d++)
            if (fitted[d] && sqq[d] > 0 && sxq[d] > 0)
                hl[d] = scale_bits((float)(sxq[d] / sqq[d]));
    }
    for (int d = 0; d < 3; d++) {
        const int zz = z + d - 1;
        if (zz < g->zlo || zz > g->zhi)
            continue;
        /* the pass's error of (h, zz), when it ran */
        const double *known = d != 1 && fitted[d] ? &e[d / 2] : NULL;
        if (fitted[d] && sqq[d] > 0 && sxq[d] > 0)
            try_hz_known(g, hl[d], zz, hl[d] == h ? known : NULL);
        if (d != 1)
            try_hz_known(g, h, zz, known);
    }
    for (int k = -REF_NEIGH; k <= REF_NEIGH; k++) {
        const int hb = (int)h + k;
        if (k && hb > 0 && hb <= (int)FP16_MAX_BITS)
            try_hz(g, (uint16_t)hb, z);
    }
}

/* Cheap test whether the values could lie on a grid of step s anchored at lo: the first few
 * (x - lo)/s must be within 1e-3 of integers (a NaN quotient counts as within). Used to skip
 * hopeless exact-step candidates. Eight values at once in two registers of four: the same
 * quotients, rint_i's clamps and rounding lane by lane. */
typedef float og_f4 __attribute__((vector_size(16)));
typedef int32_t og_i4 __attribute__((vector_size(16)));

/* rint_i lane by lane, as a float (integer-valued) */
static og_f4 og_rint(og_f4 t)
{
    const og_f4 nb = { -4194303.f, -4194303.f, -4194303.f, -4194303.f };
    const og_f4 pb = { 4194303.f, 4194303.f, 4194303.f, 4194303.f };
    const og_f4 mg = { 12582912.f, 12582912.f, 12582912.f, 12582912.f };
    const og_i4 ok = t >= nb; /* NaN -> the low clamp, as rint_i */
    og_f4 f = (og_f4)((ok & (og_i4)t) | (~ok & (og_i4)nb));
    const og_i4 gt = f > pb;
    f = (og_f4)((gt & (og_i4)pb) | (~gt & (og_i4)f));
    return (f + mg) - mg;
}

static og_i4 og_far(og_f4 t)
{
    const og_f4 ep = { 1e-3f, 1e-3f, 1e-3f, 1e-3f }, en = { -1e-3f, -1e-3f, -1e-3f, -1e-3f };
    const og_f4 d = t - og_rint(t);
    return (d > ep) | (d < en);
}

static bool on_grid(const gfit *g, float s, float lo)
{
    if (g->n < 8) {
        for (uint32_t j = 0; j < g->n; j++) {
            const float t = (g->x[j] - lo) / s;
            const float d = t - (float)rint_i(t);
            if (d > 1e-3f || d < -1e-3f)
                return false;
        }
        return true;
    }
    og_f4 a, b;
    memcpy(&a, g->x, sizeof a);
    memcpy(&b, g->x + 4, sizeof b);
    const og_f4 vs = { s, s, s, s }, vl = { lo, lo, lo, lo };
    const og_i4 far = og_far((a - vl) / vs) | og_far((b - vl) / vs);
    uint64_t u[2];
    memcpy(u, &far, sizeof u);
    return (u[0] | u[1]) == 0;
}

/* The steps range/k, k = 1 .. kend-1, whose grid from lo holds the first value as on_grid tests
 * it (the same quotients, four k at a time): bit k of pass (8 words: k < 256). A step off for
 * the first value is off for on_grid, so only the steps left need its whole test. */
static void first_on_grid(const gfit *g, float range, float lo, int kend, uint32_t pass[8])
{
    memset(pass, 0, 8 * sizeof *pass);
    const og_f4 vr = { range, range, range, range }, vl = { lo, lo, lo, lo };
    const og_f4 x0 = { g->x[0], g->x[0], g->x[0], g->x[0] };
    for (int k = 1; k < kend; k += 4) {
        const og_f4 kv = { (float)k, (float)(k + 1), (float)(k + 2), (float)(k + 3) };
        const og_i4 far = og_far((x0 - vl) / (vr / kv));
        for (int i = 0; i < 4 && k + i < kend; i++)
            if (!far[i])
                pass[(k + i) >> 5] |= 1u << ((k + i) & 31);
    }
}

static bool has_k(const uint32_t pass[8], int k) { return pass[k >> 5] >> (k & 31) & 1u; }

/* The asymmetric shrink grid's candidates, i = 0..GRID_N, four at a time: what try_scale(g,
 * (p hi - p lo) / maxq, p lo, p hi, false) computes for p = 1 - GRID_STEP i - the scale bits h
 * (scale_bits), the zeros z1 (from the unrounded scale) and z2 (from the fp16 one), clamped,
 * and clip_bound's value for (h, z1) and (h, z2) - by the same IEEE operations lane by lane
 * (fp16.h's conversions written for vectors). The search then tries them in order (try_pre). */
enum { SHRINK_N = GRID_N + 1, SHRINK_V = (SHRINK_N + 3) / 4 };
/* lanes SHRINK_N .. 4 SHRINK_V - 1 are computed (p = 0.55, ...) and never read; a lane whose s
 * is 0 divides by 0 (IEEE: no trap), and its h = 0 makes try_pre skip it */
typedef uint32_t og_u4 __attribute__((vector_size(16)));
typedef double og_d4 __attribute__((vector_size(32)));
typedef struct shrink_c {
    uint16_t h[SHRINK_V * 4];
    int32_t z1[SHRINK_V * 4], z2[SHRINK_V * 4];
    double lb1[SHRINK_V * 4], lb2[SHRINK_V * 4];
} shrink_c;

static og_f4 og_bits_f(og_u4 u)
{
    og_f4 f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static og_u4 og_f_bits(og_f4 f)
{
    og_u4 u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static og_u4 og_sel(og_i4 m, og_u4 a, og_u4 b) { return ((og_u4)m & a) | (~(og_u4)m & b); }

/* qtk_f2h lane by lane */
static og_u4 og_f2h(og_f4 f)
{
    const og_u4 w = og_f_bits(f), shl1 = w + w, sign = w & 0x80000000u;
    og_f4 base = (og_bits_f(w & 0x7fffffffu) * 0x1.0p+112f) * 0x1.0p-110f;
    og_u4 bias = shl1 & 0xFF000000u;
    bias = og_sel(bias < 0x71000000u, (og_u4) { 0x71000000u, 0x71000000u, 0x71000000u, 0x71000000u },
                  bias);
    base = og_bits_f((bias >> 1) + 0x07800000u) + base;
    const og_u4 bits = og_f_bits(base);
    const og_u4 nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (sign >> 16) |
           og_sel(shl1 > 0xFF000000u, (og_u4) { 0x7E00u, 0x7E00u, 0x7E00u, 0x7E00u }, nonsign);
}

/* qtk_h2f lane by lane (h in the low 16 bits) */
static og_f4 og_h2f(og_u4 h)
{
    const og_u4 w = h << 16, sign = w & 0x80000000u, two_w = w + w;
    const og_f4 norm = og_bits_f((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
    const og_f4 den = og_bits_f((two_w >> 17) | (126u << 23)) - 0.5f;
    return og_bits_f(sign | og_sel(two_w < (1u << 27), og_f_bits(den), og_f_bits(norm)));
}

/* rint_i lane by lane, then clampz */
static og_i4 og_zero(og_f4 t, int zlo, int zhi)
{
    og_i4 z = __builtin_convertvector(og_rint(t), og_i4);
    const og_i4 vlo = { zlo, zlo, zlo, zlo }, vhi = { zhi, zhi, zhi, zhi };
    z = ((z < vlo) & vlo) | (~(z < vlo) & z);
    return ((z > vhi) & vhi) | (~(z > vhi) & z);
}

/* clip_bound lane by lane (inv = 1 / s) */
static void og_clip(const gfit *g, og_f4 s, og_f4 inv, og_i4 z, double *lb)
{
    const og_f4 klo = __builtin_convertvector(-z, og_f4);
    const og_f4 khi = __builtin_convertvector(g->maxq - z, og_f4);
    const og_i4 clo = g->xmin * inv <= klo, chi = g->xmax * inv >= khi;
    const og_d4 dlo = (double)g->xmin - __builtin_convertvector(klo * s, og_d4);
    const og_d4 dhi = (double)g->xmax - __builtin_convertvector(khi * s, og_d4);
    og_d4 a = dlo * dlo, b = dhi * dhi;
    const og_d4 zero = { 0, 0, 0, 0 };
    typedef int64_t og_l4 __attribute__((vector_size(32)));
    const og_l4 mlo = __builtin_convertvector(clo, og_l4);
    a = (og_d4)((mlo & (og_l4)a) | (~mlo & (og_l4)zero));
    const og_l4 mhi = __builtin_convertvector(chi, og_l4);
    b = (og_d4)((mhi & (og_l4)b) | (~mhi & (og_l4)zero));
    const og_d4 r = a + b;
    memcpy(lb, &r, sizeof r);
}

static void shrink_grid(const gfit *g, float lo1, float hi1, shrink_c *c)
{
    const float mq = (float)g->maxq;
    for (int v = 0; v < SHRINK_V; v++) {
        og_f4 p;
        for (int l = 0; l < 4; l++)
            p[l] = 1.f - GRID_STEP * (float)(4 * v + l);
        const og_f4 plo = p * lo1, s = (p * hi1 - plo) / mq;
        og_u4 h = og_f2h(s);
        h = og_sel((h & 0x7fffu) > FP16_MAX_BITS,
                   (og_u4) { FP16_MAX_BITS, FP16_MAX_BITS, FP16_MAX_BITS, FP16_MAX_BITS }, h);
        h = og_sel(s > 0.f, h, (og_u4) { 0, 0, 0, 0 });
        const og_f4 sh = og_h2f(h);
        const og_i4 z1 = og_zero(-plo / s, g->zlo, g->zhi), z2 = og_zero(-plo / sh, g->zlo, g->zhi);
        for (int l = 0; l < 4; l++) {
            c->h[4 * v + l] = (uint16_t)h[l];
            c->z1[4 * v + l] = z1[l];
            c->z2[4 * v + l] = z2[l];
        }
        const og_f4 inv = 1.f / sh;
        og_clip(g, sh, inv, z1, c->lb1 + 4 * v);
        og_clip(g, sh, inv, z2, c->lb2 + 4 * v);
    }
}

static void search(gfit *g, unsigned bits)
{
    const int maxq = g->maxq;
    const bool sym = g->zlo == g->zhi;
    (void)bits;
    /* s = 0 */
    g->h = 0;
    memset(g->memo, 0, sizeof g->memo);
    g->err = g->e0;
    g->phase0 = true;
    if (g->err == 0)
        return;
    const float lo0 = g->xmin < 0.f ? g->xmin : 0.f, hi0 = g->xmax > 0.f ? g->xmax : 0.f;
    if (sym) {
        /* codes q - z in [-2^(b-1), 2^(b-1) - 1] */
        const int neg = g->zlo, pos = maxq - g->zlo;
        const float amax = -lo0 > hi0 ? -lo0 : hi0;
        for (int i = 0; i <= GRID_N; i++) {
            const float p = 1.f - GRID_STEP * (float)i;
            try_scale(g, p * 2.f * amax / (float)maxq, 0.f, 0.f, false); /* GPTQ */
            try_scale(g, p * amax / (float)neg, 0.f, 0.f, false);
        }
        uint32_t pn[8], pp[8];
        if (lo0 < 0.f)
            first_on_grid(g, -lo0, 0.f, neg, pn);
        if (hi0 > 0.f)
            first_on_grid(g, hi0, 0.f, pos, pp);
        for (int k = 1; k < neg; k++)
            if (lo0 < 0.f && has_k(pn, k) && on_grid(g, -lo0 / (float)k, 0.f))
                try_scale(g, -lo0 / (float)k, 0.f, 0.f, false);
        for (int k = 1; k < pos; k++)
            if (hi0 > 0.f && has_k(pp, k) && on_grid(g, hi0 / (float)k, 0.f))
                try_scale(g, hi0 / (float)k, 0.f, 0.f, false);
        if (hi0 > 0.f && pos > 0)
            try_scale(g, hi0 / (float)pos, 0.f, 0.f, false);
    } else {
        const float lo1 = g->xmin, hi1 = g->xmax;
        const bool two = lo0 != lo1 || hi0 != hi1;
        shrink_c c;
        if (hi1 > lo1)
            shrink_grid(g, lo1, hi1, &c);
        for (int i = 0; i <= GRID_N; i++) {
            if (hi1 > lo1) { /* try_scale(g, (p hi1 - p lo1) / maxq, p lo1, p hi1, false) */
                try_pre(g, c.h[i], c.z1[i], c.lb1[i]);
                if (c.z2[i] != c.z1[i])
                    try_pre(g, c.h[i], c.z2[i], c.lb2[i]);
            }
            if (two && i == 0) /* GPTQ's range including 0: min-max only */
                try_scale(g, (hi0 - lo0) / (float)maxq, lo0, hi0, false);
        }
        try_autoawq(g);
        uint32_t p1[8], p0[8];
        if (hi1 > lo1)
            first_on_grid(g, hi1 - lo1, lo1, maxq, p1);
        if (two)
            first_on_grid(g, hi0 - lo0, lo0, maxq, p0);
        for (int k = 1; k < maxq; k++) {
            if (hi1 > lo1 && has_k(p1, k) && on_grid(g, (hi1 - lo1) / (float)k, lo1))
                try_scale(g, (hi1 - lo1) / (float)k, lo1, hi1, true);
            if (two && has_k(p0, k) && on_grid(g, (hi0 - lo0) / (float)k, lo0))
                try_scale(g, (hi0 - lo0) / (float)k, lo0, hi0, true);
        }
        if (hi1 > lo1)
            try_scale(g, (hi1 - lo1) / (float)maxq, lo1, hi1, true);
    }
    if (g->h == 0 || g->err == 0)
        return; /* s = 0 won, or the values are reproduced exactly: no error is below 0 */
    /* refinement */
    g->phase0 = false;
    for (int it = 0; it < REFINE_ITERS; it++) {
        const double before = g->err;
        refine_round(g);
        if (!(g->err < before))
            break;
    }
}

static float sanitize(float v)
{
    if (v != v)
        return 0.f;
    return v > XCLAMP ? XCLAMP : v < -XCLAMP ? -XCLAMP : v;
}

/* A group's scratch: the sanitised values padded with zeros to a multiple of 16, in float and
 * double, and codes for as many. */
typedef struct fitbuf {
    float *x;
    double *xd;
    uint8_t *codes;
} fitbuf;

static uint32_t round16(uint32_t n) { return (n + 15u) & ~15u; }

static int fitbuf_init(fitbuf *b, uint32_t n)
{
    b->x = NULL;
    b->xd = NULL;
    b->codes = NULL;
    if (n > UINT32_MAX - 15)
        return -1;
    const size_t cap = round16(n); /* the values padded to 16 */
    b->x = malloc(cap * sizeof *b->x);
    b->xd = malloc(cap * sizeof *b->xd);
    b->codes = malloc(cap);
    return b->x && b->xd && b->codes ? 0 : -1;
}

static void fitbuf_free(fitbuf *b)
{
    free(b->x);
    free(b->xd);
    free(b->codes);
}

/* Fit x[0..n) (b made for at least n values); codes, when not NULL, get its n codes. */
static void fit(const float *x, uint32_t n, unsigned bits, bool sym, int zmin, uint16_t *h_out,
                int *z_out, uint8_t *codes, const fitbuf *b)
{
    const int maxq = (1 << bits) - 1;
    const uint32_t n16 = round16(n);
    /* one pass: the sanitised copies, the range, and the error of s = 0 (in element order) */
    float lo = sanitize(x[0]), hi = lo;
    double e0 = 0, as = 0;
    for (uint32_t j = 0; j < n; j++) {
        const float v = sanitize(x[j]);
        const double vd = (double)v;
        b->x[j] = v;
        b->xd[j] = vd;
        e0 += vd * vd;
        as += fabs(vd);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    for (uint32_t j = n; j < n16; j++) {
        b->x[j] = 0.f;
        b->xd[j] = 0.0;
    }
    x = b->x;
    gfit g;
    g.e0 = e0;
    g.ev = ev();
    g.abs_sum = as * (1.0 + 0x1p-20); /* n < 2^32 terms: relative error below 2^-21 */
    g.x = x;
    g.xd = b->xd;
    g.n = n;
    g.n16 = n16;
    g.maxq = maxq;
    if (sym) {
        g.zlo = g.zhi = 1 << (bits - 1);
    } else {
        g.zlo = zmin;
        g.zhi = maxq;
    }
    g.xmin = lo;
    g.xmax = hi;
    g.z = clampz(&g, 1 << (bits - 1));
    search(&g, bits);
    *h_out = g.h;
    *z_out = g.z;
    if (codes) {
        eval_sz(&g, qtk_h2f(g.h), g.z, 0, b->codes);
        memcpy(codes, b->codes, n);
    }
}

int qtk_fit_group(const float *x, uint32_t n, unsigned bits, bool sym, int zmin,
                  float *scale_out, int *zero_out, uint8_t *codes_out)
{
    if (!x || n == 0 || bits < 1 || bits > 8 || !scale_out || !zero_out)
        return -1;
    if (!sym && (zmin < 0 || zmin > (1 << bits) - 1))
        return -1;
    fitbuf b;
    if (fitbuf_init(&b, n) != 0) {
        fitbuf_free(&b);
        return -1;
    }
    uint16_t h;
    int z;
    fit(x, n, bits, sym, zmin, &h, &z, codes_out, &b);
    *scale_out = qtk_h2f(h);
    *zero_out = z;
    fitbuf_free(&b);
    return 0;
}

/* ---------------------------------------------------------------- AWQ GEMM */

int qtk_quant_awq(const float *w, uint32_t out, uint32_t in, uint32_t group, int32_t *qweight,
                  int32_t *qzeros, uint16_t *scales)
{
    if (!w || !qweight || !qzeros || !scales || group == 0 || in == 0 || in % group != 0 ||
        out == 0 || out % 8 != 0)
        return -1;
    const uint64_t words = out / 8, ngroups = in / group;
    fitbuf fb;
    uint8_t *codes = malloc((size_t)group * 8); /* the group's codes of eight rows */
    if (fitbuf_init(&fb, group) != 0 || !codes) {
        free(codes);
        fitbuf_free(&fb);
        return -1;
    }
    /* a word column (eight output rows) at a time: each word written once, whole (every group
     * is fitted on its own, so the order of the fits does not matter) */
    for (uint64_t c = 0; c < words; c++)
        for (uint64_t g = 0; g < ngroups; g++) {
            uint32_t zw = 0;
            for (unsigned r = 0; r < 8; r++) {
                const uint64_t o = 8 * c + r;
                uint16_t h;
                int z;
                fit(w + o * in + g * group, group, 4, false, 0, &h, &z, codes + (size_t)r * group, &fb);
                scales[g * out + o] = h;
                zw |= (uint32_t)z << qtk_awq_shift(r);
            }
            qzeros[g * words + c] = (int32_t)zw;
            for (uint32_t j = 0; j < group; j++) {
                uint32_t v = 0;
                for (unsigned r = 0; r < 8; r++)
                    v |= (uint32_t)codes[(size_t)r * group + j] << qtk_awq_shift(r);
                qweight[(g * group + j) * words + c] = (int32_t)v;
            }
        }
    fitbuf_free(&fb);
    free(codes);
    return 0;
}

/* ---------------------------------------------------------------- GPTQ */

int qtk_quant_gptq(const float *w, uint32_t out, uint32_t in, uint32_t group, unsigned bits,
                   bool sym, int version, int32_t *qweight, int32_t *qzeros, uint16_t *scales,
                   int32_t *g_idx)
{
    if (!w || !qweight || !qzeros || !scales || !g_idx)
        return -1;
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
        return -1;
    if (version != 1 && version != 2)
        return -1;
    if (group == 0 || in == 0 || out == 0 || in % 32 != 0 || in % group != 0 ||
        ((uint64_t)out * bits) % 32 != 0)
        return -1;
    const uint64_t ngroups = in / group, zwords = (uint64_t)out * bits / 32;
    const int zmin = version == 1 ? 1 : 0;
    fitbuf fb;
    uint8_t *codes = malloc(group);
    if (fitbuf_init(&fb, group) != 0 || !codes) {
        free(codes);
        fitbuf_free(&fb);
        return -1;
    }
    memset(qweight, 0, (size_t)((uint64_t)in / 32 * bits * out) * sizeof *qweight);
    memset(qzeros, 0, (size_t)(ngroups * zwords) * sizeof *qzeros);
    for (uint32_t i = 0; i < in; i++)
        g_idx[i] = (int32_t)(i / group);
    const uint32_t mask = (1u << bits) - 1u;
    for (uint64_t o = 0; o < out; o++) {
        for (uint64_t g = 0; g < ngroups; g++) {
            uint16_t h;
            int z;
            fit(w + o * in + g * group, group, bits, sym, zmin, &h, &z, codes, &fb);
            scales[g * out + o] = h;
            /* zeros: stream along out; v1 stores z - 1 (z >= 1 here) */
            const uint32_t zs = (uint32_t)(z - (version == 1 ? 1 : 0)) & mask;
            qtk_bits_put((uint32_t *)&qzeros[g * zwords], 1, o * bits, bits, zs);
            /* codes: column o is a stream along in (`bits` words per 32 rows, out apart) */
            if ((uint64_t)group * bits % 32 == 0) { /* the group's own whole words, each once */
                uint32_t *q = (uint32_t *)qweight + o;
                uint64_t acc = 0, wi = g * group * bits / 32;
                unsigned nb = 0;
                for (uint32_t j = 0; j < group; j++) {
                    acc |= (uint64_t)codes[j] << nb;
                    nb += bits;
                    if (nb >= 32) {
                        q[wi++ * out] = (uint32_t)acc;
                        acc >>= 32;
                        nb -= 32;
                    }
                }
            } else {
                for (uint32_t j = 0; j < group; j++)
                    qtk_bits_put((uint32_t *)qweight + o, out, (g * group + j) * bits, bits, codes[j]);
            }
        }
    }
    fitbuf_free(&fb);
    free(codes);
    return 0;
}
