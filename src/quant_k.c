/* quant_k.c - F32 -> ggml k-quants (q2_k q3_k q4_k q5_k q6_k), superblocks of 256.
 *
 * Per superblock:
 *  1. every sub-block gets two float fits from one sweep over candidate inverse scales: ggml's
 *     (make_qkx2_quants / make_qx_quants / make_q3_quants with ggml's own weights and criterion,
 *     replicated from its formulas; the sums are accumulated in 4 lanes (8 for the affine
 *     types), so near-ties can resolve differently) and ours (least squares under the real objective: uniform weights,
 *     or the importance matrix; for the affine types also sweeps with the lowest codes
 *     clipped);
 *  2. each set of fits is quantized the way quantize_row_*_ref does it (fp16 d/dmin, 4/6/8-bit
 *     sub-scales, codes re-rounded against the decoded scales); the encoding with the lower
 *     exact decoded error starts, so the result is not worse than ggml's reference;
 *  3. refinement that only ever accepts improvements: per sub-block, the integer scale (and
 *     min) is re-chosen among its neighbours and the least-squares value for its codes; then
 *     the superblock d (and dmin) is refitted by least squares over all 256 values, rounded to
 *     fp16, codes re-rounded and sub-blocks re-chosen; kept only when the error drops. q3_k
 *     takes the per-sub-block steps alone: its two superblock refits were a fifth of its time
 *     for under 0.01% of RMSE and no change of output divergence (docs/benchmarks.md).
 * q5_k without an importance matrix skips our own fits (step 1 gives ggml's alone, step 2 has
 * one encoding): starting from ggml's choice and refining it gave lower output divergence
 * (llama-perplexity --kl-divergence against the F16 model) on every bench model than starting
 * from the lower-error fit, whose clipped lowest codes the outputs notice more than the error
 * does (docs/benchmarks.md, "Output divergence"); it is also the faster search.
 * q3_k without an importance matrix keeps only what improves on ggml's reference under both
 * objectives: an encoding of ours, and every refinement step, must lower the squared error,
 * must not raise the error under ggml's own weights (x^2, make_q3_quants' weighting) above
 * that of the encoding it replaces, and may not clip (put a value more than half a step outside
 * the codes' range). The unconstrained least-squares search shrinks scales until the largest
 * values of a sub-block clip: lower error, and higher output divergence on the bench model with
 * the heaviest outliers (docs/benchmarks.md, "Output divergence").
 * q4_k with an importance matrix falls back to ggml's fit (step 1's, refined by nothing) when the
 * searched encoding has a higher error under llama.cpp's own weights imatrix * sqrt(sigma2 + x^2)
 * (sigma2 = 2 mean(x^2) of the superblock): KLD with an importance matrix on the fixture's tiny
 * model, mean over perturbed copies, 1.095x llama-quantize's without the fallback, 0.906x with it.
 * Errors are always those of the values qtk_dequant_ggml produces (same float operations).
 * The affine search (q2_k, q4_k, q5_k) lives in quant_k_aff.h, built here and again with AVX2
 * (quant_k_avx2.c); the AVX2 build is used when the CPU has it, unless QTK_SIMD=generic. */
#define QTK_QUANT_IMPL
#include "quant.h"
#include "dequant.h"
#include "quant_k.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


static inline void put16(uint8_t *p, float v)
{
    const uint16_t h = qtk_f32_to_fp16(v);
    p[0] = (uint8_t)(h & 0xFF);
    p[1] = (uint8_t)(h >> 8);
}

#define QK_AFF_BLOCK qtk_aff_block_c
#include "quant_k_aff.h"

const aff_cfg qtk_aff_q2k = { 16, 16, 3, 15, -0.5f, 0.1f, 15, true, true, false };
const aff_cfg qtk_aff_q4k = { 32, 8, 15, 63, -1.f, 0.1f, 20, false, false, false };
const aff_cfg qtk_aff_q5k = { 32, 8, 31, 63, -0.5f, 0.1f, 15, false, false, true };

typedef void (*aff_block_fn)(const aff_cfg *, const float *, const float *, bool, aff_st *);

/* May quant_k_avx2.c's builds run: built with AVX2, and qtk_simd_avx2 (decided once there). */
static bool k_avx2(void)
{
    return qtk_aff_have_avx2() && qtk_simd_avx2();
}

static aff_block_fn aff_block_impl(void)
{
    return k_avx2() ? qtk_aff_block_avx2 : qtk_aff_block_c;
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

/* ---- the three affine row encoders: search each superblock, then pack it ---- */

static void pack_q2_k(const aff_st *st, const uint8_t *L, uint8_t *dst)
{
    for (int j = 0; j < 16; j++)
        dst[j] = (uint8_t)(st->ls[j] | (st->lm[j] << 4));
    pack_2bit(L, dst + 16);
    put16(dst + 80, st->d);
    put16(dst + 82, st->dmin);
}

static void pack_q4_k(const aff_st *st, const uint8_t *L, uint8_t *dst)
{
    put16(dst, st->d);
    put16(dst + 2, st->dmin);
    pack_k4_scales(st->ls, st->lm, dst + 4);
    uint8_t *q = dst + 16;
    for (int j = 0; j < QK; j += 64, q += 32)
        for (int l = 0; l < 32; l++)
            q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
}

static void pack_q5_k(const aff_st *st, const uint8_t *L, uint8_t *dst)
{
    put16(dst, st->d);
    put16(dst + 2, st->dmin);
    pack_k4_scales(st->ls, st->lm, dst + 4);
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

static void aff_rows(const aff_cfg *c, void (*pack)(const aff_st *, const uint8_t *, uint8_t *),
                     size_t bsize, const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    const aff_block_fn block = aff_block_impl();
    float xs[QK], ws[QK];
    uint8_t L[QK];
    aff_st st;
    if (!w) /* the weights of every superblock: all 1, written once */
        for (int i = 0; i < QK; i++)
            ws[i] = 1.f;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += bsize) {
        const bool uniform = qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, w ? ws : NULL);
        block(c, xs, ws, uniform, &st);
        codes_u8(st.L, 0, L);
        pack(&st, L, dst);
    }
}

/* llama.cpp's q4_k choice, float sums in its order so the result is its own. */
float qtk_qkx_fit(const float *x, const float *w, int nmax, float rmin, float rdelta, int nstep,
                  float *L, float *the_min)
{
    const int n = 32;
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max <= min) {
        for (int i = 0; i < n; i++)
            L[i] = 0.f;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (float)qclr(iscale * (x[i] - min), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        best += w[i] * diff;
    }
    float La[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sl = 0, sl2 = 0, sxl = 0;
        for (int i = 0; i < n; i++) {
            const float l = (float)qclr(iscale * (x[i] - min), 0, nmax);
            La[i] = l;
            sl += w[i] * l;
            sl2 += w[i] * l * l;
            sxl += w[i] * l * x[i];
        }
        const float D = sum_w * sl2 - sl * sl;
        if (D > 0) {
            float ts = (sum_w * sxl - sum_x * sl) / D, tm = (sl2 * sum_x - sl * sxl) / D;
            if (tm > 0) {
                tm = 0;
                ts = sxl / sl2;
            }
            float mad = 0;
            for (int i = 0; i < n; i++) {
                float diff = ts * La[i] + tm - x[i];
                diff = diff * diff;
                mad += w[i] * diff;
            }
            if (mad < best) {
                memcpy(L, La, sizeof La);
                best = mad;
                scale = ts;
                min = tm;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* make_qp_quants(8, 63, x, L, qw): the eight scales (or mins) to 6-bit multiples of one scale */
static float q4k_qp(const float *x, int *L, const float *qw)
{
    const int n = 8, nmax = 63;
    float max = 0;
    for (int i = 0; i < n; i++)
        max = max > x[i] ? max : x[i];
    if (!(max != 0.f)) {
        for (int i = 0; i < n; i++)
            L[i] = 0;
        return 0.f;
    }
    float iscale = (float)nmax / max, scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = qrint(iscale * x[i]);
        const float diff = x[i] - scale * (float)L[i];
        best += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0)
            continue;
        const float isi = (0.1f * (float)is + (float)nmax) / max, si = 1 / isi;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = qrint(isi * x[i]);
            l = l < nmax ? l : nmax;
            const float diff = x[i] - si * (float)l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best) {
            best = mse;
            iscale = isi;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = qrint(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = l;
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    for (int it = 0; it < 5; it++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = qw[i];
            float slx = sumlx - w * x[i] * (float)L[i], sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = qrint(x[i] * sl2 / slx);
                nl = nl < nmax ? nl : nmax;
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed)
            break;
    }
    return sumlx / suml2;
}

/* With an importance matrix (quantize_row_q4_K_impl, q5_K_impl with nmax 31): sub-blocks fitted
 * by make_qkx3_quants(32, nmax, -0.9, 0.05, 36) under w = qw * sqrt(sigma2 + x^2), sigma2 =
 * 2 mean(x^2) over the superblock; scales and mins by make_qp_quants under each sub-block's sum
 * of w. */
static void kq_ref_im(const float *x, const float *qw, int nmax, aff_st *st)
{
    float w[QK], sw[8], sc[8], mn[8], sum_x2 = 0;
    for (int l = 0; l < QK; l++)
        sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / QK;
    for (int j = 0; j < 8; j++) {
        float sumw = 0;
        for (int l = 0; l < 32; l++) {
            w[32 * j + l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
            sumw += w[32 * j + l];
        }
        sw[j] = sumw;
        sc[j] = qtk_qkx_fit(x + 32 * j, w + 32 * j, nmax, -0.9f, 0.05f, 36, st->L + 32 * j, &mn[j]);
    }
    int Ls[8], Lm[8];
    st->d = qtk_qh16(q4k_qp(sc, Ls, sw));
    st->dmin = qtk_qh16(q4k_qp(mn, Lm, sw));
    for (int j = 0; j < 8; j++) {
        st->ls[j] = Ls[j] & 63;
        st->lm[j] = Lm[j] & 63;
        const float d = st->d * (float)st->ls[j];
        if (!(d != 0.f))
            continue;
        const float dm = st->dmin * (float)st->lm[j];
        for (int i = 0; i < 32; i++)
            st->L[32 * j + i] = (float)qclr((x[32 * j + i] + dm) / d, 0, nmax);
    }
}

/* Without one (quantize_row_q4_K_ref: make_qkx2_quants(32, 15, -1, 0.1, 20); q5_K_ref:
 * (32, 31, -0.5, 0.1, 15)) under av + |x| (av the sub-block's rms); the largest scale and min
 * map to 63. */
static void kq_ref_plain(const float *x, int nmax, float rmin, float rdelta, int nstep, aff_st *st)
{
    float sc[8], mn[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xj[l] * xj[l];
        const float av = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av + fabsf(xj[l]);
        sc[j] = qtk_qkx_fit(xj, w, nmax, rmin, rdelta, nstep, st->L + 32 * j, &mn[j]);
        max_scale = sc[j] > max_scale ? sc[j] : max_scale;
        max_min = mn[j] > max_min ? mn[j] : max_min;
    }
    const float is = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float im = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        const int ls = (uint8_t)qrint(is * sc[j]), lm = (uint8_t)qrint(im * mn[j]);
        st->ls[j] = ls < 63 ? ls : 63;
        st->lm[j] = lm < 63 ? lm : 63;
    }
    st->d = qtk_qh16(max_scale / 63.f);
    st->dmin = qtk_qh16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        const float d = st->d * (float)st->ls[j];
        if (!(d != 0.f))
            continue;
        const float dm = st->dmin * (float)st->lm[j];
        for (int i = 0; i < 32; i++)
            st->L[32 * j + i] = (float)qclr((x[32 * j + i] + dm) / d, 0, nmax);
    }
}

/* llama.cpp's q4_k (q5: q5_k) choice for one superblock: under the raw importances w, or without
 * them when w is NULL or all 0. */
static void kq_ref_block(const float *xs, const float *w, bool q5, aff_st *st)
{
    float qw[QK], any = 0.f;
    if (w)
        for (int i = 0; i < QK; i++) {
            const float u = w[i];
            qw[i] = u > 0.f && u <= FLT_MAX ? u : 0.f;
            any = any > qw[i] ? any : qw[i];
        }
    if (any > 0.f)
        kq_ref_im(xs, qw, q5 ? 31 : 15, st);
    else if (q5)
        kq_ref_plain(xs, 31, -0.5f, 0.1f, 15, st);
    else
        kq_ref_plain(xs, 15, -1.f, 0.1f, 20, st);
}

typedef void (*aff_pack_fn)(const aff_st *, const uint8_t *, uint8_t *);

/* Rows of llama.cpp's q4_k (q5: q5_k) choice, bsize bytes a superblock. */
static void kq_ref_rows(bool q5, aff_pack_fn pack, uint32_t bsize, const float *x, const float *w,
                        uint8_t *dst, uint64_t nb)
{
    float xs[QK];
    uint8_t L[QK];
    aff_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += bsize) {
        qtk_qprep(x, NULL, QK, xs, NULL);
        kq_ref_block(xs, w ? w + b * QK : NULL, q5, &st);
        codes_u8(st.L, 0, L);
        pack(&st, L, dst);
    }
}

/* Rows of q4_k/q5_k under importances w: llama.cpp's choice where the block has weights, the
 * search (config c) where they are all 0; without w the search everywhere. */
static void kq_rows(const aff_cfg *c, bool q5, aff_pack_fn pack, uint32_t bsize, const float *x,
                    const float *w, uint8_t *dst, uint64_t nb)
{
    if (!w) {
        aff_rows(c, pack, bsize, x, w, dst, nb);
        return;
    }
    float xs[QK], ws[QK];
    uint8_t L[QK];
    aff_st st;
    const aff_block_fn block = aff_block_impl();
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += bsize) {
        if (qtk_qprep(x, w + b * QK, QK, xs, ws))
            block(c, xs, ws, true, &st);
        else
            kq_ref_block(xs, w + b * QK, q5, &st);
        codes_u8(st.L, 0, L);
        pack(&st, L, dst);
    }
}

void qtk_qrow_q4_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    kq_ref_rows(false, pack_q4_k, 144, x, w, dst, nb);
}

void qtk_qrow_q2_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    aff_rows(&qtk_aff_q2k, pack_q2_k, 84, x, w, dst, nb);
}

/* q4_k: without an importance matrix, our fits and ggml's, refined (KLD 0.85-0.98x
 * llama-quantize's on the bench models). With one, llama.cpp's choice as it is, and in a
 * conversion that uses a matrix also for the tensors it does not cover (qtk_qrow_q4_k_ref,
 * QTK_QUANT_IMATRIX_RUN): the searches measured gave q4_k alone 0.91-0.96x but the Q4_K_M mix,
 * where every q6_k tensor is llama's, 1.04-1.05x; even with every covered tensor llama's, our
 * token_embd (not covered) left the mix at 1.014x (docs/benchmarks.md). */
void qtk_qrow_q4_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    kq_rows(&qtk_aff_q4k, false, pack_q4_k, 144, x, w, dst, nb);
}

void qtk_qrow_q5_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    kq_ref_rows(true, pack_q5_k, 176, x, w, dst, nb);
}

/* q5_k: without an importance matrix, ggml's fit refined by our search. With one, llama.cpp's
 * choice as it is, and in a conversion that uses a matrix its plain choice for the tensors it
 * does not cover (qtk_qrow_q5_k_ref, QTK_QUANT_IMATRIX_RUN): the search under the importances
 * was 0.89-0.98x llama-quantize's output divergence on three bench models in single runs but
 * 1.005x over three copies of the 32k-vocabulary one (docs/benchmarks.md). */
void qtk_qrow_q5_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    kq_rows(&qtk_aff_q5k, true, pack_q5_k, 176, x, w, dst, nb);
}

/* ======================= symmetric types: y = (d*sc)*q ======================= */

static const sym_cfg k_q3k = { -4, 3, -32, 31, true };
static const sym_cfg k_q6k = { -32, 31, -128, 127, false };

#define SYM_FITS qtk_sym_fits_c
#include "quant_k_symfit.h"

/* ggml's make_q3_quants(16, 4, x, L, true) scale (sequential by nature; q3_k only), and in Lout
 * (or NULL) its signed codes. */
static float ref_q3(const float *x, float *Lout)
{
    const int nmax = 4;
    float max;
    const float amax = sub_absmax(x, &max);
    if (amax < GROUP_EPS) {
        if (Lout)
            for (int i = 0; i < SUB; i++)
                Lout[i] = 0.f;
        return 0.f;
    }
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
    if (Lout)
        for (int i = 0; i < SUB; i++)
            Lout[i] = (float)L[i];
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void qtk_ref_q3_x16_c(const float *x, float *rs)
{
    for (int j = 0; j < NSUB; j++)
        rs[j] = ref_q3(x + j * SUB, NULL);
}

void qtk_q3_fits_c(const float *x, float *fits, int nsb)
{
    static const float one[SUB] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    for (int k = 0; k < nsb; k++, x += QK, fits += 2 * NSUB) {
        qtk_ref_q3_x16_c(x, fits);
        for (int j = 0; j < NSUB; j++)
            qtk_sym_fits_c(&k_q3k, x + j * SUB, one, false, &fits[j], &fits[NSUB + j]);
    }
}

typedef void (*sym_block_fn)(const sym_cfg *, bool, const float *, const float *, const float *,
                             const float *, sym_st *);

static sym_block_fn sym_block_impl(void)
{
    return k_avx2() ? qtk_sym_block_avx2 : qtk_sym_block_c;
}

/* llama.cpp's make_qx_quants(n, nmax, x, L, 1, qw) with weights qw (n <= QK): the scale, and
 * in L (or NULL) the signed codes of the candidate chosen; its float sums in its order, so the
 * choice is llama-quantize's own. The q6_k sub-block fit with an importance matrix (the raw
 * importances as weights) and both of q3_k's fits with one (quantize_row_q3_K_impl). */
static float ref_qx(int n, int nmax, const float *x, const float *qw, float *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_EPS) {
        if (L)
            for (int i = 0; i < n; i++)
                L[i] = 0.f;
        return 0.f;
    }
    float scale = 0.f, best = 0.f, best_is = 0.f;
    for (int is = 0; is <= 18; is++) {
        /* is 0 first (the starting point), then -9..9 without 0, as ggml */
        const int k = is == 0 ? 0 : is <= 9 ? is - 10 : is - 9;
        const float iscale = -((float)nmax + 0.1f * (float)k) / max;
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; i++) {
            const float l = (float)qclr(iscale * x[i], -nmax, nmax - 1);
            sumlx += qw[i] * x[i] * l;
            suml2 += qw[i] * l * l;
        }
        if (is == 0) {
            scale = suml2 != 0.f ? sumlx / suml2 : 0.f;
            best = scale * sumlx;
            best_is = iscale;
        } else if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            scale = sumlx / suml2;
            best = scale * sumlx;
            best_is = iscale;
        }
    }
    if (L)
        for (int i = 0; i < n; i++)
            L[i] = (float)qclr(best_is * x[i], -nmax, nmax - 1);
    return scale;
}

static float ref_q6_weighted(const float *x, const float *qw)
{
    return ref_qx(SUB, 32, x, qw, NULL);
}

#define SYM_BLOCK qtk_sym_block_c
#define SYM_REF_Q3 qtk_ref_q3_x16_c
#include "quant_k_sym.h"


/* llama.cpp's q3_k choice for one superblock without an importance matrix
 * (quantize_row_q3_K_ref): make_q3_quants per sub-block, the largest |scale| onto -32; a
 * sub-block whose scale rounds to 0 keeps its fit's codes, as there. */
static void q3_ref_block(const float *xs, sym_st *st)
{
    float rs[NSUB], Lf[QK], one[QK];
    for (int j = 0; j < NSUB; j++)
        rs[j] = ref_q3(xs + j * SUB, Lf + j * SUB);
    for (int i = 0; i < QK; i++)
        one[i] = 1.f;
    sym_init(&k_q3k, xs, one, NULL, rs, false, st);
    for (int j = 0; j < NSUB; j++)
        if (st->d * (float)st->sc[j] == 0.f)
            memcpy(st->L + j * SUB, Lf + j * SUB, SUB * sizeof *Lf);
}

/* llama.cpp's q3_k choice for one superblock with an importance matrix w (raw values;
 * quantize_row_q3_K_impl): each sub-block's make_qx_quants(16, 4) fit under w*sqrt(sigma2 + x^2),
 * sigma2 = 2*mean(x^2), then one make_qx_quants(16, 32) over the 16 sub-scales weighted by each
 * sub-block's total weight gives d and the 6-bit scales; codes by division, as it rounds; a
 * sub-block whose scale is 0 keeps its fit's codes. */
static void q3_ref_im_block(const float *xs, const float *w, sym_st *st)
{
    float sumx2 = 0;
    for (int i = 0; i < QK; i++)
        sumx2 += xs[i] * xs[i];
    const float sigma2 = 2 * sumx2 / QK;
    float scales[NSUB], sw[NSUB], Ls[NSUB], wt[SUB];
    for (int j = 0; j < NSUB; j++) {
        const float *xj = xs + j * SUB, *wj = w + j * SUB;
        float sumw = 0;
        for (int l = 0; l < SUB; l++) {
            const float u = wj[l] > 0.f && wj[l] <= FLT_MAX ? wj[l] : 0.f;
            wt[l] = u * sqrtf(sigma2 + xj[l] * xj[l]);
            sumw += wt[l];
        }
        sw[j] = sumw;
        scales[j] = ref_qx(SUB, 4, xj, wt, st->L + j * SUB);
        st->e[j] = st->r[j] = 0.f;
    }
    st->d = qtk_qh16(ref_qx(NSUB, 32, scales, sw, Ls));
    for (int j = 0; j < NSUB; j++) {
        st->sc[j] = (int)Ls[j];
        const float dl = st->d * (float)st->sc[j];
        if (dl == 0.f)
            continue;
        for (int i = 0; i < SUB; i++)
            st->L[j * SUB + i] = (float)qclr(xs[j * SUB + i] / dl, -4, 3);
    }
}

static void pack_q3_k(const sym_st *st, uint8_t *dst)
{
    uint8_t L[QK];
    uint8_t *hm = dst, *qs = dst + 32, *sc = dst + 96;
    codes_u8(st->L, 4, L);
    /* codes 0..7: bit 2 is the mask; 32 consecutive codes at a time (vectorizes) */
    memset(hm, 0, 32);
    for (int k = 0; k < 8; k++)
        for (int l = 0; l < 32; l++) {
            const unsigned v = L[32 * k + l];
            hm[l] = (uint8_t)(hm[l] | ((v >> 2) << k));
            L[32 * k + l] = (uint8_t)(v & 3u);
        }
    pack_2bit(L, qs);
    memset(sc, 0, 12);
    for (int j = 0; j < NSUB; j++) {
        const unsigned l = (unsigned)(st->sc[j] + 32);
        if (j < 8)
            sc[j] = (uint8_t)(l & 0xF);
        else
            sc[j - 8] = (uint8_t)(sc[j - 8] | ((l & 0xF) << 4));
        sc[j % 4 + 8] = (uint8_t)(sc[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
    }
    put16(dst + 108, st->d);
}

/* q3_k: without an importance matrix, ggml's fit refined by our search, every kept step also not
 * raising ggml's x^2-weighted error. With one, llama.cpp's choice as it is (q3_ref_im_block), and
 * in a conversion that uses a matrix llama's plain choice for the tensors it does not cover
 * (qtk_qrow_q3_k_ref, see QTK_QUANT_IMATRIX_RUN): the search under the importances was 0.89x and
 * 0.94x llama-quantize's output divergence on two bench models but 1.003x on the 32k-vocabulary
 * one (docs/benchmarks.md). */
void qtk_qrow_q3_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[REF_Q3_MAXSB * QK], ws[REF_Q3_MAXSB * QK], xr[QK], fits[REF_Q3_MAXSB * 2 * NSUB];
    sym_st st;
    const sym_block_fn search = sym_block_impl();
    const bool avx2 = k_avx2();
    for (uint64_t b = 0; b < nb; b += REF_Q3_MAXSB) {
        const int n = nb - b < REF_Q3_MAXSB ? (int)(nb - b) : REF_Q3_MAXSB;
        bool uni[REF_Q3_MAXSB], any = false;
        for (int k = 0; k < n; k++) {
            uni[k] = qtk_qprep(x + (b + (uint64_t)k) * QK, w ? w + (b + (uint64_t)k) * QK : NULL, QK,
                               xs + k * QK, ws + k * QK);
            any = any || uni[k];
        }
        /* the sub-block fits of up to eight superblocks at once (AVX2: one sub-block per lane;
         * make_q3_quants is one chain of dependent steps per sub-block, and more chains side by
         * side wait less); only the superblocks searched (weights all ones) use them.
         * Otherwise the search computes its own. */
        if (avx2 && any)
            qtk_q3_fits_avx2(xs, fits, n);
        for (int k = 0; k < n; k++) {
            const float *xk = xs + k * QK;
            if (uni[k]) {
                for (int i = 0; i < QK; i++)
                    xr[i] = xk[i] * xk[i];
                search(&k_q3k, false, xk, ws + k * QK, xr, avx2 ? fits + k * 2 * NSUB : NULL, &st);
            } else {
                q3_ref_im_block(xk, w + (b + (uint64_t)k) * QK, &st);
            }
            pack_q3_k(&st, dst + (b + (uint64_t)k) * 110);
        }
    }
}

void qtk_qrow_q3_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    sym_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 110) {
        if (qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws))
            q3_ref_block(xs, &st);
        else
            q3_ref_im_block(xs, w + b * QK, &st);
        pack_q3_k(&st, dst);
    }
}

static void pack_q6_k(const sym_st *st, uint8_t *dst)
{
    uint8_t L[QK];
    uint8_t *ql = dst, *qh = dst + 128;
    codes_u8(st->L, 32, L);
    for (int j = 0; j < QK; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; l++) {
            const unsigned q1 = L[j + l], q2 = L[j + l + 32];
            const unsigned q3 = L[j + l + 64], q4 = L[j + l + 96];
            ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
    for (int j = 0; j < NSUB; j++)
        dst[192 + j] = (uint8_t)(int8_t)st->sc[j];
    put16(dst + 208, st->d);
}

/* llama.cpp's q6_k choice for one superblock: each sub-block's make_qx_quants fit under the
 * raw importances w, or under x^2 (its weighting without a matrix) when w is NULL or all 0. */
static void q6_ref_block(const float *xs, const float *w, sym_st *st)
{
    float qw[QK], rs[NSUB], any = 0.f;
    if (w)
        for (int i = 0; i < QK; i++) {
            const float u = w[i];
            qw[i] = u > 0.f && u <= FLT_MAX ? u : 0.f;
            any = any > qw[i] ? any : qw[i];
        }
    if (!(any > 0.f))
        for (int i = 0; i < QK; i++)
            qw[i] = xs[i] * xs[i];
    for (int j = 0; j < NSUB; j++)
        rs[j] = ref_q6_weighted(xs + j * SUB, qw + j * SUB);
    sym_init(&k_q6k, xs, qw, NULL, rs, false, st);
}

void qtk_qrow_q6_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    sym_st st;
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 210) {
        qtk_qprep(x, NULL, QK, xs, ws);
        q6_ref_block(xs, w ? w + b * QK : NULL, &st);
        pack_q6_k(&st, dst);
    }
}

/* q6_k: without an importance matrix, ggml's fit refined by our search (output divergence
 * 0.83-0.92x llama-quantize's on the bench models). With one, llama.cpp's choice as it is
 * (q6_ref_block), and in a conversion that uses a matrix also for the tensors it does not cover
 * (the converter calls qtk_qrow_q6_k_ref for them, see QTK_QUANT_IMATRIX_RUN): every search
 * measured on top of it raised the KLD on the fixture's tiny model, mean over four perturbed
 * copies, even those lowering both the plain and the importance-weighted error (1.04-1.33x;
 * the search alone 1.11x; searched only token_embd and output, which the matrix does not cover,
 * 1.066x), while its own choice is 1.00x (docs/benchmarks.md). */
void qtk_qrow_q6_k(const float *x, const float *w, uint8_t *dst, uint64_t nb)
{
    float xs[QK], ws[QK];
    sym_st st;
    const sym_block_fn search = sym_block_impl();
    for (uint64_t b = 0; b < nb; b++, x += QK, dst += 210) {
        if (qtk_qprep(x, w ? w + b * QK : NULL, QK, xs, ws))
            search(&k_q6k, true, xs, ws, NULL, NULL, &st);
        else
            q6_ref_block(xs, w + b * QK, &st);
        pack_q6_k(&st, dst);
    }
}
