/* quant_iq4.c - IQ4_NL and IQ4_XS encoders (ggml types 20 and 23).
 *
 * Per block (IQ4_NL: 32 values; IQ4_XS: a 256-value super-block) two kinds of candidates are
 * built and the one whose DECODED values (as qtk_dq_iq4_nl / qtk_dq_iq4_xs compute them, fp16
 * scale and all) have the lowest error wins:
 *   1. llama.cpp's own result: a reimplementation of ggml's quantize_row_iq4_nl_impl with
 *      ntry = 7 (what quantize_iq4_nl / quantize_iq4_xs use), including its float
 *      evaluation order;
 *   2. our search: scale grids in both sign orientations, each followed by a least-squares
 *      refit, the scale rounded to fp16 and the codes re-assigned for the rounded scale; a few
 *      fp16 neighbours of the winner; for IQ4_XS the 6-bit sub-scales are chosen per sub-block
 *      from a window around the ideal value for each candidate super-scale.
 * Since (1) is always a candidate, each block's error is never above llama.cpp's, hence neither
 * is the tensor's. IQ4_XS without an importance matrix is (1) alone: the search (2) lowered the
 * squared error (0.97x llama's) but raised the output divergence on the project's sample model
 * (llama-perplexity KLD against the F16 model, mean over perturbed copies: 1.078x
 * llama-quantize's; 1.065x even when every kept candidate also had to keep the x^2-weighted
 * error, ggml's objective, no higher; docs/benchmarks.md). IQ4_NL is (1) alone where the
 * importance matrix has weights for the block: the search under llama's weights measured 1.02x
 * llama-quantize's KLD on that model with a matrix (1.026x over four copies, every copy above
 * 1), (1) there and the search on the tensors the matrix does not cover 0.979x (0.932x on the
 * fixture's tiny model). IQ4_XS with a matrix keeps the search (0.86-0.96x).
 *
 * Error: sum of (x - y)^2 without an importance matrix (the per-tensor RMSE is the target);
 * with one, sum of w*(x - y)^2 with llama.cpp's weights w = imatrix[col]*sqrt(sigma2 + x^2)
 * (sigma2 = 2*mean(x^2) over the block / super-block).
 *
 * Deterministic: scalar code (the code assignment also built for AVX2 in quant_iq4_avx2.c, with
 * the same operations per element and the same order of the sum), no libm beyond sqrtf/fabsf;
 * error sums in double.
 * The reimplementation of (1) reproduces llama-quantize's bytes exactly: all 53248 IQ4_NL and
 * 6656 IQ4_XS blocks of the tiny fixtures (checked with the search switched off).
 *
 * Non-finite inputs are sanitized (NaN -> 0, +-Inf and huge values clamped to +-1e8, as
 * qtk_quant_ggml does) before the search, so nothing converts NaN or out-of-range floats to
 * int. A block whose values are all zero is written with d = +0, codes 8 (value +1) and, for
 * IQ4_XS, sub-scales l = 0, so it decodes to +0.0. */
#include "quant.h"
#include "dequant.h"
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static const int8_t kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                               1, 13, 25, 38, 53, 69, 89, 113 };

/* k_cell[i]: the code nearest to t = i - 128 (i = 0..242), a starting point for t in
 * [i - 128, i - 127) */
static const int32_t k_cell[243] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9,
    9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11,
    11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 13, 13,
    13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13, 14, 14, 14, 14, 14, 14, 14, 14,
    14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15,
};

#define GROUP_MAX_EPS 1e-15f
#define XCLAMP 1e8f
#define NTRY 7
/* The search's sizes. IQ4_NL keeps grids of 4 (2 levels apart) and two fp16 neighbours: with
 * ggml's binary search replaced by a table its run costs 1.6x llama-quantize's CPU (27.8 s
 * against 17.7 s on a 30M-parameter bench model, 2 threads; 48 s before the table); grids of 1
 * (3 levels apart) and one neighbour took it under llama's (15.2 s) at nearly the same RMSE
 * (0.975x ggml's against 0.969x), but the fixture model's output divergence went from 0.81x
 * llama-quantize's to 1.05x, so that trade was not taken. IQ4_XS: one sub-scale target per
 * orientation, two super-scale candidates and no fp16 neighbours, 0.973x ggml's RMSE at about
 * 1.1x llama's time (0.966x at 2x), divergence 0.92x llama's. With the AVX2 code assignment
 * (quant_iq4_avx2.c) IQ4_NL's full grids take 0.8x llama-quantize's time (10.3 s against 12.9 s
 * on a 100M-parameter model, 2 threads, no record). */
#define NL_GRID 4      /* NL scale grid: 2*NL_GRID+1 points per sign orientation ... */
#define NL_STEP 2.0f   /* ... NL_STEP codebook units apart */
#define NL_REFIT 1     /* least-squares refits per grid point */
#define NL_NEIGH 2     /* fp16 neighbours of the winner tried on each side */
#define XS_SUBTRY 0    /* sub-block scale grid (unconstrained), like NL_GRID ... */
#define XS_SUBSTEP 3.0f
#define XS_NCAND 2     /* super-scale candidates per orientation */
#define XS_WIN 1       /* sub-scales tried on each side of the ideal one */
#define XS_NEIGH 0     /* fp16 neighbours of the winning super-scale */

/* ggml's nearest_int (round half to even via the 1.5*2^23 trick), made total: NaN and values
 * beyond the trick's range are clamped first. Identical to ggml for |f| <= 4194303. */
static int nearest_int(float f)
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

/* k_low[c + 127] (c = -127 .. 112): the largest m with kv[m] <= c, i.e. the codebook interval
 * [kv[m], kv[m+1]) that holds every t with floor(t) = c (the values are integers). */
static uint8_t k_low[240];
static pthread_once_t k_low_once = PTHREAD_ONCE_INIT;
static void k_low_init(void)
{
    for (int c = -127; c <= 112; c++) {
        int m = 0;
        while (m < 15 && kv[m + 1] <= c)
            m++;
        k_low[c + 127] = (uint8_t)m;
    }
}

/* ggml's best_index_int8 over the 16 codebook values: x below kv[0] or above kv[15] at the
 * ends; else the interval kv[m] <= x < kv[m+1] (its binary search's ml, mu), found from
 * floor(x) by table, and the nearer end, the upper one on a tie, with ggml's own float
 * comparison. The same result for every float as the binary search (NaN: 15, as there). */
static inline int best_index(float x)
{
    if (x <= (float)kv[0])
        return 0;
    if (x >= (float)kv[15] || x != x)
        return 15;
    int c = (int)x; /* -127 < x < 113: exact truncation */
    c -= (float)c > x;
    const int m = k_low[c + 127];
    return x - (float)kv[m] < (float)kv[m + 1] - x ? m : m + 1;
}

/* The binary search itself, for the check in qtk_quant_iq4_selftest. */
static int best_index_search(float x)
{
    if (x <= (float)kv[0])
        return 0;
    if (x >= (float)kv[15])
        return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        const int mav = (ml + mu) / 2;
        if (x < (float)kv[mav])
            mu = mav;
        else
            ml = mav;
    }
    return x - (float)kv[mu - 1] < (float)kv[mu] - x ? mu - 1 : mu;
}

static float sanitize(float v)
{
    if (v != v)
        return 0.f;
    if (v > XCLAMP)
        return XCLAMP;
    if (v < -XCLAMP)
        return -XCLAMP;
    return v;
}

/* ---------------------------------------------------------------- llama.cpp's algorithm */

/* quantize_row_iq4_nl_impl(super, 32, ..., kvalues_iq4nl, qw, ntry = 7) for super = 32 or 256.
 * Writes the fp16 super-scale to *dh, the per-element codes to L[super], and for super = 256
 * the 6-bit stored sub-scales (l + 32) to ls[8]. `weight` is scratch[32]. */
static void llama_ref(int super, const float *x, const float *qw, uint16_t *dh, uint8_t *L,
                      uint8_t *ls)
{
    float scales[8], weight[32];
    float sigma2 = 0;
    for (int j = 0; j < super; ++j)
        sigma2 += x[j] * x[j];
    sigma2 *= 2.f / (float)super;

    *dh = qtk_f32_to_fp16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < super / 32; ++ib) {
        const float *xb = x + ib * 32;
        uint8_t *Lb = L + ib * 32;
        if (qw) {
            const float *q = qw + ib * 32;
            for (int j = 0; j < 32; ++j)
                weight[j] = q[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        } else {
            for (int j = 0; j < 32; ++j)
                weight[j] = xb[j] * xb[j];
        }
        float amax = 0, max = 0;
        for (int j = 0; j < 32; ++j) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            memset(Lb, 8, 32);
            continue;
        }
        float d = -max / (float)kv[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const float al = id * xb[j];
            const int l = best_index(al);
            Lb[j] = (uint8_t)l;
            const float q = (float)kv[l];
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -NTRY; itry <= NTRY; ++itry) {
            id = (float)(itry + kv[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; ++j) {
                const float al = id * xb[j];
                const int l = best_index(al);
                const float q = (float)kv[l];
                const float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        const float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }

    if (super > 32) {
        const float d = -max_scale / 32;
        *dh = qtk_f32_to_fp16(d);
        const float id = d != 0.f ? 1 / d : 0.f;
        for (int ib = 0; ib < super / 32; ++ib) {
            int l = nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l;
            const float idl = dl != 0.f ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * 32;
            const float *xb = x + ib * 32;
            for (int j = 0; j < 32; ++j)
                Lb[j] = (uint8_t)best_index(idl * xb[j]);
            ls[ib] = (uint8_t)(l + 32);
        }
    } else {
        *dh = qtk_f32_to_fp16(scales[0]);
        const float id = scales[0] != 0.f ? 1 / scales[0] : 0.f;
        for (int j = 0; j < super; ++j)
            L[j] = (uint8_t)best_index(id * x[j]);
    }
}

/* ---------------------------------------------------------------- exact-decode evaluation */

/* Error of n values decoded as dl * kv[L[j]] (the decoder's float product). */
static double eval_codes(const float *x, const float *w, int n, float dl, const uint8_t *L)
{
    double err = 0;
    for (int j = 0; j < n; j++) {
        const double e = (double)x[j] - (double)(dl * (float)kv[L[j]]);
        err += (double)w[j] * (e * e);
    }
    return err;
}

/* assign for 32 values on AVX2 (quant_iq4_avx2.c: the same codes and error) */
bool qtk_iq4_have_avx2(void);
double qtk_iq4_assign32_avx2(const float *x, const float *w, float dl, const float *v,
                             const int32_t *cell, uint8_t *L);

/* Best codes for a fixed decoded step dl (each element independently: nearest decoded value);
 * returns the error. Ties keep the lower code of the binary search's pick. */
static double assign(const float *x, const float *w, int n, float dl, uint8_t *L)
{
    float v[16];
    for (int k = 0; k < 16; k++)
        v[k] = dl * (float)kv[k];
    if (n == 32 && dl != 0.f && dl == dl && qtk_iq4_have_avx2() && qtk_simd_avx2())
        return qtk_iq4_assign32_avx2(x, w, dl, v, k_cell, L);
    double err = 0;
    if (dl == 0.f || dl != dl) {
        for (int j = 0; j < n; j++) {
            L[j] = 8;
            const double e = (double)x[j] - (double)v[8];
            err += (double)w[j] * (e * e);
        }
        return err;
    }
    const float id = 1.f / dl;
    for (int j = 0; j < n; j++) {
        /* nearest code of t = x/dl from a table over unit cells of t; the pick is checked
         * against its neighbours with the exact decoded values (float differences rank them) */
        float t = id * x[j];
        t = t < -128.f ? -128.f : t > 114.f ? 114.f : t; /* NaN cannot occur: x, dl finite */
        const int k0 = k_cell[(int)(t + 128.f)];
        int kb = k0;
        float e = x[j] - v[k0], be = e * e;
        if (k0 > 0) {
            e = x[j] - v[k0 - 1];
            if (e * e < be) {
                be = e * e;
                kb = k0 - 1;
            }
        }
        if (k0 < 15) {
            e = x[j] - v[k0 + 1];
            if (e * e < be)
                kb = k0 + 1;
        }
        L[j] = (uint8_t)kb;
        const double ed = (double)x[j] - (double)v[kb];
        err += (double)w[j] * (ed * ed);
    }
    return err;
}

/* Least-squares step for fixed codes: argmin_d sum w (x - d*c_j)^2 with c_j = mult*kv[L[j]].
 * Returns 0 when undefined. */
static float ls_refit(const float *x, const float *w, int n, const uint8_t *L, const float *mult)
{
    double sxq = 0, sqq = 0;
    for (int j = 0; j < n; j++) {
        const double q = (double)kv[L[j]] * (double)(mult ? mult[j / 32] : 1.f);
        sxq += (double)w[j] * q * (double)x[j];
        sqq += (double)w[j] * q * q;
    }
    if (!(sqq > 0))
        return 0.f;
    const double d = sxq / sqq;
    return (float)d;
}

/* fp16 value k ulps away from h (same sign; stops at zero / infinity). */
static uint16_t fp16_step(uint16_t h, int k)
{
    const uint16_t sign = h & 0x8000u;
    int mag = (int)(h & 0x7fffu) + k;
    if (mag < 0)
        mag = 0;
    if (mag > 0x7bff)
        mag = 0x7bff;
    return (uint16_t)(sign | (uint16_t)mag);
}

/* ---------------------------------------------------------------- IQ4_NL block */

/* Best fp16 scale and codes for one 32-block; *bd/L hold the incumbent on entry (llama's
 * result, error *berr) and the winner on return. */
static void nl_search(const float *x, const float *w, uint16_t *bd, uint8_t *L, double *berr)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < GROUP_MAX_EPS)
        return;
    uint8_t T[32];
    /* grids: the largest |x| mapped near the most negative code (-127) or the largest
     * positive one (+113), then least-squares refits, each scale rounded to fp16 */
    for (int side = 0; side < 2; side++) {
        const int base = side ? kv[15] : kv[0];
        for (int itry = -NL_GRID; itry <= NL_GRID; itry++) {
            const float t = (float)base + NL_STEP * (float)itry;
            const float d0 = max / t;
            uint16_t h = qtk_f32_to_fp16(d0);
            double e = assign(x, w, 32, qtk_fp16_to_f32(h), T);
            if (e < *berr) {
                *berr = e;
                *bd = h;
                memcpy(L, T, 32);
            }
            for (int it = 0; it < NL_REFIT; it++) {
                const float d1 = ls_refit(x, w, 32, T, NULL);
                const uint16_t h1 = qtk_f32_to_fp16(d1);
                if (h1 == h)
                    break;
                h = h1;
                e = assign(x, w, 32, qtk_fp16_to_f32(h), T);
                if (e < *berr) {
                    *berr = e;
                    *bd = h;
                    memcpy(L, T, 32);
                }
            }
        }
    }
    /* fp16 neighbours of the winner */
    const uint16_t h0 = *bd;
    for (int k = -NL_NEIGH; k <= NL_NEIGH; k++) {
        if (!k)
            continue;
        const uint16_t h = fp16_step(h0, k);
        const double e = assign(x, w, 32, qtk_fp16_to_f32(h), T);
        if (e < *berr) {
            *berr = e;
            *bd = h;
            memcpy(L, T, 32);
        }
    }
}

static bool all_zero(const float *x, int n)
{
    for (int j = 0; j < n; j++)
        if (x[j] != 0.f)
            return false;
    return true;
}

static void pack_nibbles(const uint8_t *L, int n, uint8_t *qs)
{
    for (int i = 0; i < n / 32; ++i)
        for (int j = 0; j < 16; ++j)
            qs[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

/* Importance weights of one block, made safe: NaN and negative values -> 0, huge -> 1e30.
 * NULL (fit unweighted) when every weight is 0. */
static const float *copy_qw(const float *qw, int n, float *dst)
{
    bool any = false;
    for (int j = 0; j < n; j++) {
        const float q = qw[j];
        dst[j] = q > 1e30f ? 1e30f : q >= 0.f ? q : 0.f;
        any = any || dst[j] > 0.f;
    }
    return any ? dst : NULL;
}

uint64_t qtk_quant_iq4_index_check(void)
{
    pthread_once(&k_low_once, k_low_init);
    uint64_t bad = 0;
    /* every 1/1024 step, every integer and midpoint between codebook values with the eight
     * floats on each side (the interval ends and the ties), infinities and NaN */
    for (int i = -130 * 1024; i <= 116 * 1024; i++)
        bad += best_index((float)i / 1024.f) != best_index_search((float)i / 1024.f);
    for (int m = 0; m < 16; m++)
        for (int h = 0; h < 2; h++) {
            float a = h && m < 15 ? ((float)kv[m] + (float)kv[m + 1]) / 2.f : (float)kv[m];
            for (int k = 0; k < 8; k++, a = nextafterf(a, -INFINITY))
                ;
            for (int k = 0; k < 17; k++, a = nextafterf(a, INFINITY))
                bad += best_index(a) != best_index_search(a);
        }
    const float odd[] = {INFINITY, -INFINITY, NAN, -0.f, 0.f, 1e30f, -1e30f};
    for (size_t k = 0; k < sizeof odd / sizeof *odd; k++)
        bad += best_index(odd[k]) != best_index_search(odd[k]);
    return bad;
}

int qtk_quant_iq4_nl(const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                     const float *imatrix)
{
    pthread_once(&k_low_once, k_low_init);
    if (!src || !dst || n_per_row == 0 || n_per_row % 32 != 0)
        return -1;
    uint8_t *out = dst;
    const uint64_t nb = n_per_row / 32;
    for (uint64_t r = 0; r < nrows; r++) {
        for (uint64_t b = 0; b < nb; b++, out += 18) {
            float x[32], w[32];
            const float *s = src + r * n_per_row + b * 32;
            for (int j = 0; j < 32; j++)
                x[j] = sanitize(s[j]);
            if (all_zero(x, 32)) {
                qtk_wr16(out, 0);
                memset(out + 2, 0x88, 16);
                continue;
            }
            float qwc[32];
            const float *qw = imatrix ? copy_qw(imatrix + b * 32, 32, qwc) : NULL;
            uint8_t L[32], ls[8];
            uint16_t dh;
            llama_ref(32, x, qw, &dh, L, ls);
            qtk_llama_weights(x, 32, qw, w);
            double err = eval_codes(x, w, 32, qtk_fp16_to_f32(dh), L);
            if (!(err == err)) /* non-finite reference (overflowing scale): any candidate */
                err = INFINITY;
            if (!qw) /* with importance weights llama's choice stands (see the top) */
                nl_search(x, w, &dh, L, &err);
            qtk_wr16(out, dh);
            pack_nibbles(L, 32, out + 2);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- IQ4_XS super-block */

typedef struct xs_state {
    uint16_t d;
    uint8_t ls[8]; /* stored sub-scales, l + 32 */
    uint8_t L[256];
    double err;
} xs_state;

static double xs_eval(const float *x, const float *w, const xs_state *s)
{
    const float d = qtk_fp16_to_f32(s->d);
    double err = 0;
    for (int ib = 0; ib < 8; ib++) {
        const float dl = d * (float)((int)s->ls[ib] - 32);
        err += eval_codes(x + 32 * ib, w + 32 * ib, 32, dl, s->L + 32 * ib);
    }
    return err;
}

/* For fp16 super-scale h: per sub-block the best l in a window around the ideal sub-scale
 * sc[ib] / d, codes re-assigned for each. Fills t; returns its error. */
static double xs_fit(const float *x, const float *w, const float *sc, uint16_t h, xs_state *t)
{
    const float d = qtk_fp16_to_f32(h);
    t->d = h;
    double total = 0;
    uint8_t T[32];
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = x + 32 * ib, *wb = w + 32 * ib;
        int l0 = d != 0.f ? nearest_int(sc[ib] / d) : 0;
        double best = INFINITY;
        int bl = 0;
        bool have = false;
        for (int dlt = -XS_WIN; dlt <= XS_WIN; dlt++) {
            int l = l0 + dlt;
            if (l < -32 || l > 31)
                continue;
            const double e = assign(xb, wb, 32, d * (float)l, T);
            if (!have || e < best) {
                have = true;
                best = e;
                bl = l;
                memcpy(t->L + 32 * ib, T, 32);
            }
        }
        /* l = 0 decodes the sub-block to zeros: always a candidate */
        if (bl != 0) {
            const double e = assign(xb, wb, 32, 0.f, T);
            if (e < best) {
                best = e;
                bl = 0;
                memcpy(t->L + 32 * ib, T, 32);
            }
        }
        if (!have) { /* l0 far outside [-32, 31]: clamp */
            bl = l0 < -32 ? -32 : 31;
            best = assign(xb, wb, 32, d * (float)bl, t->L + 32 * ib);
        }
        t->ls[ib] = (uint8_t)(bl + 32);
        total += best;
    }
    t->err = total;
    return total;
}

/* Unconstrained best float scale of one 32-block (for the sub-scale targets). */
static float sub_scale(const float *x, const float *w)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax < GROUP_MAX_EPS)
        return 0.f;
    uint8_t T[32];
    float bd = 0.f;
    double be = INFINITY;
    for (int side = 0; side < 2; side++) {
        const int base = side ? kv[15] : kv[0];
        for (int itry = -XS_SUBTRY; itry <= XS_SUBTRY; itry++) {
            const float d0 = max / ((float)base + XS_SUBSTEP * (float)itry);
            assign(x, w, 32, d0, T);
            const float d1 = ls_refit(x, w, 32, T, NULL);
            const double e = assign(x, w, 32, d1, T);
            if (e < be) {
                be = e;
                bd = d1;
            }
        }
    }
    return bd;
}

static void xs_try(const float *x, const float *w, const float *sc, uint16_t h, xs_state *best,
                   xs_state *tmp)
{
    const double e = xs_fit(x, w, sc, h, tmp);
    if (e < best->err)
        *best = *tmp;
}

static void xs_search(const float *x, const float *w, xs_state *best)
{
    float sc[8];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ib++) {
        sc[ib] = sub_scale(x + 32 * ib, w + 32 * ib);
        if (fabsf(sc[ib]) > amax_scale) {
            amax_scale = fabsf(sc[ib]);
            max_scale = sc[ib];
        }
    }
    if (amax_scale < GROUP_MAX_EPS)
        return;
    xs_state tmp;
    /* largest sub-scale at l = -32 (llama's choice) or l = +31, and a little finer */
    for (int k = 0; k <= XS_NCAND; k++) {
        const float t = 0.5f * (float)k;
        xs_try(x, w, sc, qtk_f32_to_fp16(-max_scale / (32.f - t)), best, &tmp);
        xs_try(x, w, sc, qtk_f32_to_fp16(max_scale / (31.f - t)), best, &tmp);
    }
    /* least-squares refits of the super-scale for the winner's sub-scales and codes */
    for (int it = 0; it < 3; it++) {
        float mult[8];
        for (int ib = 0; ib < 8; ib++)
            mult[ib] = (float)((int)best->ls[ib] - 32);
        const float d1 = ls_refit(x, w, 256, best->L, mult);
        const uint16_t h1 = qtk_f32_to_fp16(d1);
        if (h1 == best->d)
            break;
        const double before = best->err;
        xs_try(x, w, sc, h1, best, &tmp);
        if (!(best->err < before))
            break;
    }
    const uint16_t h0 = best->d;
    for (int k = -XS_NEIGH; k <= XS_NEIGH; k++)
        if (k)
            xs_try(x, w, sc, fp16_step(h0, k), best, &tmp);
}

int qtk_quant_iq4_xs(const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                     const float *imatrix)
{
    pthread_once(&k_low_once, k_low_init);
    if (!src || !dst || n_per_row == 0 || n_per_row % 256 != 0)
        return -1;
    uint8_t *out = dst;
    const uint64_t nb = n_per_row / 256;
    for (uint64_t r = 0; r < nrows; r++) {
        for (uint64_t b = 0; b < nb; b++, out += 136) {
            float x[256], w[256], qwc[256];
            const float *s = src + r * n_per_row + b * 256;
            for (int j = 0; j < 256; j++)
                x[j] = sanitize(s[j]);
            memset(out, 0, 136);
            if (all_zero(x, 256)) {
                /* d = +0, every sub-scale stored as 32 (l = 0), codes 8 */
                for (int ib = 0; ib < 8; ib++) {
                    /* ls = 32: low nibble 0, high bits 2 */
                    out[2 + ib / 4] = (uint8_t)(out[2 + ib / 4] | (2u << (2 * (ib % 4))));
                }
                memset(out + 8, 0x88, 128);
                continue;
            }
            const float *qw = imatrix ? copy_qw(imatrix + b * 256, 256, qwc) : NULL;
            xs_state best;
            llama_ref(256, x, qw, &best.d, best.L, best.ls);
            /* without an importance matrix llama.cpp's choice stands (see the top); with one,
             * its weights use the super-block's sigma2 */
            if (qw) {
                qtk_llama_weights(x, 256, qw, w);
                best.err = xs_eval(x, w, &best);
                if (!(best.err == best.err))
                    best.err = INFINITY;
                xs_search(x, w, &best);
            }
            /* pack: d; scales_h (2 high bits per sub-block); scales_l (nibbles); qs */
            qtk_wr16(out, best.d);
            uint16_t sh = 0;
            for (int ib = 0; ib < 8; ib++) {
                const unsigned l = best.ls[ib];
                out[4 + ib / 2] = (uint8_t)(out[4 + ib / 2] | ((l & 0xfu) << (4 * (ib % 2))));
                sh = (uint16_t)(sh | ((l >> 4) << (2 * ib)));
            }
            qtk_wr16(out + 2, sh);
            pack_nibbles(best.L, 256, out + 8);
        }
    }
    return 0;
}
