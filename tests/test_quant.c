/* test_quant.c - checks for src/quant.h (F32 -> ggml block encoders).
 *
 * (a) Synthetic data from a fixed PRNG: round-trip error bounds per type, exactness where the
 *     input already lies on a grid, all-zero blocks, NaN/Inf inputs, determinism (twice, and
 *     row by row vs all rows at once), the importance-matrix path (lower weighted error than
 *     without), argument errors, and the AVX2 build of the affine k-quant search giving the
 *     generic build's results bit for bit.
 * (b) Fixtures (skipped when absent): every tensor of llama-quantize's tiny-<TYPE>.gguf whose
 *     type we encode is re-encoded from tiny-f32.gguf; the RMSE of our decoded values against
 *     the float source must be <= that of llama.cpp's for EVERY tensor. Prints a per-type
 *     table (tensors, mean and max ratio ours/llama).
 *
 * Run from the repository root. Last line: "N passed, N failed". */
#include "quant.h"
#include "quant_k.h"
#include "dequant.h"
#include "view/decode.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <time.h>

static const unsigned k_types[] = { QTK_T_Q4_0, QTK_T_Q4_1, QTK_T_Q5_0, QTK_T_Q5_1, QTK_T_Q8_0,
                                    QTK_T_Q2_K, QTK_T_Q3_K, QTK_T_Q4_K, QTK_T_Q5_K, QTK_T_Q6_K };
#define NTYPES (sizeof k_types / sizeof k_types[0])

static const char *tname(unsigned t)
{
    switch (t) {
    case QTK_T_Q4_0: return "q4_0";
    case QTK_T_Q4_1: return "q4_1";
    case QTK_T_Q5_0: return "q5_0";
    case QTK_T_Q5_1: return "q5_1";
    case QTK_T_Q8_0: return "q8_0";
    case QTK_T_Q2_K: return "q2_k";
    case QTK_T_Q3_K: return "q3_k";
    case QTK_T_Q4_K: return "q4_k";
    case QTK_T_Q5_K: return "q5_k";
    case QTK_T_Q6_K: return "q6_k";
    default: return "?";
    }
}

/* ---- deterministic PRNG (xorshift64*) ---- */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545F4914F6CDD1Dull) >> 32);
}
static float unif(void) { return ((float)(rnd32() >> 8) + 0.5f) / 16777216.f; }
static float gauss(void)
{
    /* sum of 12 uniforms: no libm, deterministic */
    float s = 0;
    for (int i = 0; i < 12; i++)
        s += unif();
    return s - 6.f;
}

static size_t row_bytes(unsigned type, uint64_t n)
{
    uint32_t be, bb;
    if (qtk_ggml_block_info(type, &be, &bb) != 0)
        return 0;
    return (size_t)(n / be * bb);
}

/* Encode + decode; returns sum of w*(y-x)^2 (w NULL = 1). */
static double roundtrip(unsigned type, const float *x, uint64_t rows, uint64_t n,
                        const float *imat, const float *wcol, float *y)
{
    const size_t rb = row_bytes(type, n);
    uint8_t *q = malloc(rb * rows);
    double e = 0;
    if (!q || qtk_quant_ggml(type, x, q, rows, n, imat) != 0 ||
        qtk_dequant_ggml(type, q, y, rows * n) != 0) {
        free(q);
        return -1;
    }
    for (uint64_t i = 0; i < rows * n; i++) {
        const double d = (double)y[i] - (double)x[i];
        e += (wcol ? (double)wcol[i % n] : 1.0) * d * d;
    }
    free(q);
    return e;
}

static void test_roundtrip(void)
{
    /* relative RMSE bounds for N(0,1) data (llama's own figures are ~0.6-0.9 of these) */
    static const double bound[] = { 0.12, 0.11, 0.06,  0.055, 0.0075,
                                    0.36, 0.20, 0.09, 0.045, 0.022 };
    const uint64_t rows = 16, n = 1024;
    float *x = malloc(rows * n * sizeof *x), *y = malloc(rows * n * sizeof *y);
    for (uint64_t i = 0; i < rows * n; i++)
        x[i] = gauss() * (1.f + (float)(i % 7));
    double ss = 0;
    for (uint64_t i = 0; i < rows * n; i++)
        ss += (double)x[i] * x[i];
    for (size_t t = 0; t < NTYPES; t++) {
        const double e = roundtrip(k_types[t], x, rows, n, NULL, NULL, y);
        const double rel = sqrt(e / ss);
        CHECK(e >= 0 && rel < bound[t], "%s: relative rmse %.5f (bound %.4f)", tname(k_types[t]),
              rel, bound[t]);
        printf("roundtrip %-5s relative rmse %.5f\n", tname(k_types[t]), rel);
    }
    free(x);
    free(y);
}

static void test_exact(void)
{
    const uint64_t n = 256;
    float x[256], y[256];
    /* q8_0: d fp16, codes with |q| = 127 present in every block */
    const float d8 = qtk_fp16_to_f32(qtk_f32_to_fp16(0.0123f));
    for (int i = 0; i < 256; i++) {
        int q = (int)(rnd32() % 255) - 127;
        if (i % 32 == 5)
            q = (i & 64) ? 127 : -127;
        x[i] = (float)q * d8;
    }
    CHECK(roundtrip(QTK_T_Q8_0, x, 1, n, NULL, NULL, y) == 0.0, "q8_0 grid values not exact");
    /* q4_0: codes -8..7 with a -8 in every block */
    const float d4 = qtk_fp16_to_f32(qtk_f32_to_fp16(0.37f));
    for (int i = 0; i < 256; i++) {
        int q = (int)(rnd32() % 16) - 8;
        if (i % 32 == 3)
            q = -8;
        x[i] = (float)q * d4;
    }
    CHECK(roundtrip(QTK_T_Q4_0, x, 1, n, NULL, NULL, y) == 0.0, "q4_0 grid values not exact");
    /* q5_0 likewise */
    for (int i = 0; i < 256; i++) {
        int q = (int)(rnd32() % 32) - 16;
        if (i % 32 == 9)
            q = -16;
        x[i] = (float)q * d4;
    }
    CHECK(roundtrip(QTK_T_Q5_0, x, 1, n, NULL, NULL, y) == 0.0, "q5_0 grid values not exact");
}

static void test_zero_nan(void)
{
    const uint64_t n = 512;
    float x[512], y[512];
    uint8_t q1[512 * 2], q2[512 * 2];
    for (size_t t = 0; t < NTYPES; t++) {
        const unsigned ty = k_types[t];
        memset(x, 0, sizeof x);
        CHECK(roundtrip(ty, x, 1, n, NULL, NULL, y) == 0.0, "%s: zeros", tname(ty));
        bool allz = true;
        for (int i = 0; i < 512; i++)
            allz = allz && y[i] == 0.f;
        CHECK(allz, "%s: zero block decodes non-zero", tname(ty));
        /* one zero block next to a busy one */
        for (int i = 256; i < 512; i++)
            x[i] = gauss();
        roundtrip(ty, x, 1, n, NULL, NULL, y);
        allz = true;
        for (int i = 0; i < 256; i++)
            allz = allz && y[i] == 0.f;
        CHECK(allz, "%s: zero block beside data decodes non-zero", tname(ty));
        /* constant blocks (positive, negative) come back within fp16/sub-scale precision */
        for (int i = 0; i < 512; i++)
            x[i] = i < 256 ? 0.37f : -2.5f;
        roundtrip(ty, x, 1, n, NULL, NULL, y);
        double cerr = 0;
        for (int i = 0; i < 512; i++)
            cerr = fmax(cerr, fabs((double)y[i] - (double)x[i]) / fabs((double)x[i]));
        CHECK(cerr < 2e-3, "%s: constant block relative error %g", tname(ty), cerr);
        /* NaN / Inf / huge / tiny */
        for (int i = 0; i < 512; i++)
            x[i] = gauss();
        x[3] = NAN;
        x[40] = INFINITY;
        x[41] = -INFINITY;
        x[300] = 3e38f;
        x[301] = -1e-40f;
        for (int i = 320; i < 352; i++)
            x[i] = NAN;
        for (int i = 384; i < 416; i++)
            x[i] = 1e-30f * (float)(i - 400);
        const size_t rb = row_bytes(ty, n);
        CHECK(qtk_quant_ggml(ty, x, q1, 1, n, NULL) == 0, "%s: nan encode", tname(ty));
        CHECK(qtk_quant_ggml(ty, x, q2, 1, n, NULL) == 0 && memcmp(q1, q2, rb) == 0,
              "%s: nan encode not deterministic", tname(ty));
        qtk_dequant_ggml(ty, q1, y, n);
        bool fin = true;
        for (int i = 0; i < 512; i++)
            fin = fin && isfinite(y[i]);
        CHECK(fin, "%s: non-finite output for NaN/Inf input", tname(ty));
    }
}

/* ggml's q5_1 choice keeps the first of the block's smallest values as its offset m: with -0
 * and +0 both the smallest, the one that comes first (its sign is m's fp16 bit), whichever
 * lanes they sit in. */
static void test_signed_zero_min(void)
{
    static const int at[][2] = { { 2, 5 }, { 5, 2 }, { 0, 31 }, { 30, 1 }, { 4, 8 } };
    for (size_t c = 0; c < sizeof at / sizeof at[0]; c++) {
        for (int neg_first = 0; neg_first < 2; neg_first++) { /* the sign at at[c][0] */
            float x[32];
            uint8_t b[24];
            for (int i = 0; i < 32; i++)
                x[i] = 0.1f + 0.03f * (float)i;
            x[at[c][0]] = neg_first ? -0.f : 0.f;
            x[at[c][1]] = neg_first ? 0.f : -0.f;
            CHECK(qtk_quant_ggml_ex(QTK_T_Q5_1, x, b, 1, 32, NULL, QTK_QUANT_IMATRIX_RUN) == 0,
                  "q5_1 ref encode");
            const unsigned m = (unsigned)b[2] | (unsigned)b[3] << 8;
            const bool neg = at[c][0] < at[c][1] ? neg_first : !neg_first; /* the lower index */
            CHECK(m == (neg ? 0x8000u : 0u),
                  "q5_1 ggml choice: %s at %d, %s at %d: m bits %04x", neg_first ? "-0" : "+0",
                  at[c][0], neg_first ? "+0" : "-0", at[c][1], m);
        }
    }
}

/* The fp16 rounding the q4_1/q5_1 search does four values at a time (SSE2 integer lanes, or
 * F16C in the AVX2 build) against the one-value rounding, over a sweep of every float bit
 * pattern class (the whole range was checked once: no difference). */
static void test_qh16x4(void)
{
    CHECK(qtk_asym_qh16_check_c(251) == 0, "four-at-once fp16 rounding (this build's lanes)");
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx2") && qtk_cpu_f16c() && qtk_asym_have_avx2())
        CHECK(qtk_asym_qh16_check_avx2(251) == 0, "four-at-once fp16 rounding (F16C)");
    else
        printf("skipped: the F16C rounding check (no AVX2/F16C here)\n");
#endif
}

/* q4_1/q5_1 search blocks two at a time: a block's encoding must not depend on its partner or
 * on having none. A row of seven blocks (three pairs and one alone; a constant, a zero and a
 * tiny-valued block among them) against the same blocks as seven rows of one (each alone). */
static void test_pair_independence(void)
{
    enum { NB = 7 };
    float x[NB * 32];
    uint8_t a[NB * 24], b[NB * 24];
    const uint64_t saved = g_rng; /* the later tests keep their data */
    for (int i = 0; i < NB * 32; i++)
        x[i] = gauss();
    g_rng = saved;
    for (int i = 32; i < 64; i++)
        x[i] = 0.25f;
    for (int i = 96; i < 128; i++)
        x[i] = 0.f;
    for (int i = 128; i < 160; i++)
        x[i] = 1e-6f * gauss();
    static const unsigned ty[] = { QTK_T_Q4_1, QTK_T_Q5_1 };
    for (size_t t = 0; t < 2; t++) {
        const size_t bs = ty[t] == QTK_T_Q4_1 ? 20 : 24;
        CHECK(qtk_quant_ggml(ty[t], x, a, 1, NB * 32, NULL) == 0, "%s row", tname(ty[t]));
        CHECK(qtk_quant_ggml(ty[t], x, b, NB, 32, NULL) == 0, "%s rows", tname(ty[t]));
        for (size_t k = 0; k < NB; k++)
            CHECK(memcmp(a + k * bs, b + k * bs, bs) == 0,
                  "%s: block %zu encoded beside another differs from it alone", tname(ty[t]), k);
    }
}

/* qtk_qprep's sanitising, four lanes at a time and the scalar tail alike: NaN -> +0, beyond
 * +-1e8 -> +-1e8, everything else (signed zeros, subnormals) bit for bit. */
static void test_qprep(void)
{
    const float sp[] = { NAN, -NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e8f, -1e8f, 1.0000001e8f,
                         -0.f, 0.f, -1e-40f, 1e-45f, 0.5f, -7.25f, 99999992.f, -99999992.f };
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    for (int n = 1; n <= 2 * ns; n++) { /* every length: lanes and tails */
        float x[64], xs[64], ws[64];
        for (int i = 0; i < n; i++)
            x[i] = sp[(i * 7 + n) % ns];
        qtk_qprep(x, NULL, n, xs, ws);
        for (int i = 0; i < n; i++) {
            const float v = x[i];
            const float e = !(v == v) ? 0.f : v > 1e8f ? 1e8f : v < -1e8f ? -1e8f : v;
            CHECK(memcmp(&e, &xs[i], sizeof e) == 0, "qprep n=%d [%d]: %a -> %a, want %a", n, i,
                  (double)v, (double)xs[i], (double)e);
        }
    }
}

static void test_determinism(void)
{
    const uint64_t rows = 6, n = 512;
    float *x = malloc(rows * n * sizeof *x), imat[512];
    for (uint64_t i = 0; i < rows * n; i++)
        x[i] = gauss() * 0.02f + (i % 97 == 0 ? 0.3f : 0.f);
    for (int i = 0; i < 512; i++)
        imat[i] = unif() * 3.f;
    for (size_t t = 0; t < NTYPES; t++) {
        const unsigned ty = k_types[t];
        const size_t rb = row_bytes(ty, n);
        uint8_t *a = malloc(rb * rows), *b = malloc(rb * rows), *c = malloc(rb * rows);
        for (int im = 0; im < 2; im++) {
            const float *w = im ? imat : NULL;
            qtk_quant_ggml(ty, x, a, rows, n, w);
            qtk_quant_ggml(ty, x, b, rows, n, w);
            for (uint64_t r = 0; r < rows; r++)
                qtk_quant_ggml(ty, x + r * n, c + r * rb, 1, n, w);
            CHECK(memcmp(a, b, rb * rows) == 0, "%s: not deterministic (imatrix %d)", tname(ty),
                  im);
            CHECK(memcmp(a, c, rb * rows) == 0, "%s: row-by-row differs (imatrix %d)", tname(ty),
                  im);
        }
        free(a);
        free(b);
        free(c);
    }
    free(x);
}

/* The AVX2 build of the affine search (quant_k_avx2.c) against the generic one: identical
 * scales, mins, codes and errors for every superblock, with and without importance weights. */
static void test_simd(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (!qtk_aff_have_avx2() || !__builtin_cpu_supports("avx2")) {
        T_SKIP("no AVX2 build or CPU: the generic k-quant search is the only one");
        return;
    }
    static const aff_cfg *const cfgs[] = { &qtk_aff_q2k, &qtk_aff_q4k, &qtk_aff_q5k };
    static const char *const names[] = { "q2_k", "q4_k", "q5_k" };
    float x[QK], w[QK];
    for (int c = 0; c < 3; c++) {
        int diff = 0;
        for (int b = 0; b < 400; b++) {
            const int kind = b % 8;
            for (int i = 0; i < QK; i++) {
                float v = gauss() * (kind == 1 ? 1e-6f : 0.03f);
                if (kind == 2 && i % 37 == 0)
                    v *= 40.f; /* outliers */
                if (kind == 3)
                    v = fabsf(v); /* no negative values: min clamps to 0 */
                if (kind == 4)
                    v = 0.25f; /* constant */
                if (kind == 5 && i % 32 < 16)
                    v = 0.f; /* half-zero sub-blocks */
                x[i] = v;
                w[i] = b % 2 ? unif() * 4.f * (i % 11 == 0 ? 0.f : 1.f) : 1.f;
            }
            aff_st a, v; /* sub-blocks beyond nsub are unused */
            const bool uni = b % 2 == 0;
            qtk_aff_block_c(cfgs[c], x, w, uni, &a);
            qtk_aff_block_avx2(cfgs[c], x, w, uni, &v);
            const size_t ns = (size_t)cfgs[c]->nsub * sizeof(int);
            diff += memcmp(&a.d, &v.d, sizeof a.d) || memcmp(&a.dmin, &v.dmin, sizeof a.d) ||
                    memcmp(a.ls, v.ls, ns) || memcmp(a.lm, v.lm, ns) ||
                    memcmp(a.e, v.e, (size_t)cfgs[c]->nsub * sizeof(float)) ||
                    memcmp(a.L, v.L, sizeof a.L);
        }
        CHECK(diff == 0, "%s: AVX2 search differs from the generic one in %d of 400 superblocks",
              names[c], diff);
    }
#else
    T_SKIP("not x86: no AVX2 build");
#endif
}

/* q6_k with an importance matrix is llama.cpp's choice: per sub-block of 16 the scale of the
 * best of 19 candidate grids -(32 + 0.1k)/max (k = 0, then -9..9 without 0) by the weighted
 * least-squares criterion (the raw importances as weights, float sums in element order); the
 * superblock's fp16 d maps the largest |scale| to -128; codes round x/(d*sc). Written here from
 * that description, values compared with the encoder's decoded output. */
static float q6_ref_scale(const float *x, const float *qw)
{
    float max = 0, amax = 0;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f)
        return 0.f;
    static const int ks[19] = { 0, -9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    float scale = 0, best = 0;
    for (int c = 0; c < 19; c++) {
        const float is = -(32.f + 0.1f * (float)ks[c]) / max;
        float a = 0, b = 0;
        for (int i = 0; i < 16; i++) {
            float l = rintf(is * x[i]);
            l = l < -32.f ? -32.f : l > 31.f ? 31.f : l;
            a += qw[i] * x[i] * l;
            b += qw[i] * l * l;
        }
        if (c == 0) {
            scale = b != 0.f ? a / b : 0.f;
            best = scale * a;
        } else if (b > 0 && a * a > best * b) {
            scale = a / b;
            best = scale * a;
        }
    }
    return scale;
}

/* values of y (rows of n) that differ from llama.cpp's q6_k choice under weights im (n per row),
 * or x^2 when im is NULL */
static uint64_t q6_ref_diff(const float *x, const float *im, uint64_t rows, uint64_t n, const float *y)
{
    uint64_t diff = 0;
    for (uint64_t b = 0; b < rows * n / 256; b++) {
        const float *xb = x + b * 256;
        float wb[256], s[16], ms = 0, ams = 0;
        for (int i = 0; i < 256; i++)
            wb[i] = im ? im[(b * 256) % n + (uint64_t)i] : xb[i] * xb[i];
        for (int j = 0; j < 16; j++) {
            s[j] = q6_ref_scale(xb + 16 * j, wb + 16 * j);
            if (fabsf(s[j]) > ams) {
                ams = fabsf(s[j]);
                ms = s[j];
            }
        }
        const float isc = ams > 0 ? -128.f / ms : 0.f, d = ams > 0 ? qtk_qh16(1 / isc) : 0.f;
        for (int j = 0; j < 16; j++) {
            const float sc = ams > 0 ? fminf(127.f, rintf(isc * s[j])) : 0.f, dl = d * sc;
            for (int i = 0; i < 16; i++) {
                float l = dl != 0.f ? rintf(xb[16 * j + i] / dl) : 0.f;
                l = l < -32.f ? -32.f : l > 31.f ? 31.f : l;
                diff += y[b * 256 + (uint64_t)(16 * j + i)] != dl * l;
            }
        }
    }
    return diff;
}

/* q3_k with an importance matrix is llama.cpp's choice: each sub-block of 16 is fitted like
 * q6_k's (19 grids -(nmax + 0.1k)/max, weighted least squares) with nmax 4 and weights
 * im*sqrt(sigma2 + x^2), sigma2 = 2*mean(x^2) over the superblock; the 16 sub-scales are fitted
 * the same way with nmax 32, each weighted by its sub-block's total weight, which gives the fp16
 * d and the sub-scales; codes round x/(d*sc) into -4..3. Written here from that description. */
static float q3_ref_fit(int n, int nmax, const float *x, const float *w, float *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; i++)
            L[i] = 0.f;
        return 0.f;
    }
    static const int ks[19] = { 0, -9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    float scale = 0, best = 0, bis = 0;
    for (int c = 0; c < 19; c++) {
        const float is = -((float)nmax + 0.1f * (float)ks[c]) / max;
        float a = 0, b = 0;
        for (int i = 0; i < n; i++) {
            float l = rintf(is * x[i]);
            l = l < (float)-nmax ? (float)-nmax : l > (float)(nmax - 1) ? (float)(nmax - 1) : l;
            a += w[i] * x[i] * l;
            b += w[i] * l * l;
        }
        if (c == 0 || (b > 0 && a * a > best * b)) {
            scale = c == 0 && b == 0.f ? 0.f : a / b;
            best = scale * a;
            bis = is;
        }
    }
    for (int i = 0; i < n; i++) {
        float l = rintf(bis * x[i]);
        L[i] = l < (float)-nmax ? (float)-nmax : l > (float)(nmax - 1) ? (float)(nmax - 1) : l;
    }
    return scale;
}

static uint64_t q3_ref_im_diff(const float *x, const float *im, uint64_t rows, uint64_t n,
                               const float *y)
{
    uint64_t diff = 0;
    for (uint64_t b = 0; b < rows * n / 256; b++) {
        const float *xb = x + b * 256, *wb = im + (b * 256) % n;
        float s2 = 0, s[16], sw[16], Ls[16], wt[16], L[256];
        for (int i = 0; i < 256; i++)
            s2 += xb[i] * xb[i];
        const float sigma2 = 2 * s2 / 256;
        for (int j = 0; j < 16; j++) {
            sw[j] = 0;
            for (int i = 0; i < 16; i++) {
                const float v = xb[16 * j + i];
                wt[i] = wb[16 * j + i] * sqrtf(sigma2 + v * v);
                sw[j] += wt[i];
            }
            s[j] = q3_ref_fit(16, 4, xb + 16 * j, wt, L + 16 * j);
        }
        const float d = qtk_qh16(q3_ref_fit(16, 32, s, sw, Ls));
        for (int j = 0; j < 16; j++) {
            const float dl = d * Ls[j];
            for (int i = 0; i < 16; i++) {
                float l = dl != 0.f ? rintf(xb[16 * j + i] / dl) : 0.f;
                l = l < -4.f ? -4.f : l > 3.f ? 3.f : l;
                diff += y[b * 256 + (uint64_t)(16 * j + i)] != dl * l;
            }
        }
    }
    return diff;
}

static void test_q3k_imatrix(void)
{
    const uint64_t rows = 8, n = 1024;
    float *x = malloc(rows * n * sizeof *x), *y = malloc(rows * n * sizeof *y), im[1024];
    for (uint64_t i = 0; i < rows * n; i++) {
        const float g = gauss();
        x[i] = i % 89 == 3 ? g * 20.f : (i % 256 < 8 ? g * 5.f : g);
    }
    for (int i = 0; i < 1024; i++) {
        const float u = unif();
        im[i] = u * u * u * 50.f + 0.01f;
    }
    CHECK(roundtrip(QTK_T_Q3_K, x, rows, n, im, NULL, y) >= 0, "q3_k imatrix encode");
    const uint64_t diff = q3_ref_im_diff(x, im, rows, n, y);
    CHECK(diff == 0, "q3_k with an imatrix: %llu of %llu values differ from llama.cpp's choice",
          (unsigned long long)diff, (unsigned long long)(rows * n));
    free(x);
    free(y);
}

static void test_q6k_imatrix(void)
{
    const uint64_t rows = 8, n = 1024;
    float *x = malloc(rows * n * sizeof *x), *y = malloc(rows * n * sizeof *y), im[1024];
    for (uint64_t i = 0; i < rows * n; i++) {
        const float g = gauss();
        x[i] = i % 97 == 5 ? g * 20.f : (i % 256 < 8 ? g * 5.f : g); /* spikes, channels */
    }
    for (int i = 0; i < 1024; i++) {
        const float u = unif();
        im[i] = u * u * u * 50.f + 0.01f;
    }
    CHECK(roundtrip(QTK_T_Q6_K, x, rows, n, im, NULL, y) >= 0, "q6_k imatrix encode");
    uint64_t diff = q6_ref_diff(x, im, rows, n, y);
    CHECK(diff == 0, "q6_k with an imatrix: %llu of %llu values differ from llama.cpp's choice",
          (unsigned long long)diff, (unsigned long long)(rows * n));
    /* a tensor the matrix does not cover, in a conversion that uses one: llama's choice too */
    uint8_t *q = malloc(row_bytes(QTK_T_Q6_K, n) * rows);
    CHECK(qtk_quant_ggml_ex(QTK_T_Q6_K, x, q, rows, n, NULL, QTK_QUANT_IMATRIX_RUN) == 0 &&
              qtk_dequant_ggml(QTK_T_Q6_K, q, y, rows * n) == 0,
          "q6_k imatrix-run encode");
    diff = q6_ref_diff(x, NULL, rows, n, y);
    CHECK(diff == 0, "q6_k without an imatrix entry in an imatrix run: %llu values differ from "
                     "llama.cpp's choice", (unsigned long long)diff);
    /* without a matrix: the search, which differs */
    CHECK(roundtrip(QTK_T_Q6_K, x, rows, n, NULL, NULL, y) >= 0 && q6_ref_diff(x, NULL, rows, n, y) > 0,
          "q6_k without an imatrix: expected the search to change some values");
    free(q);
    free(x);
    free(y);
}

static void test_imatrix(void)
{
    const uint64_t rows = 32, n = 512;
    float *x = malloc(rows * n * sizeof *x), *y = malloc(rows * n * sizeof *y), imat[512];
    for (uint64_t i = 0; i < rows * n; i++)
        x[i] = gauss();
    for (int i = 0; i < 512; i++) {
        const float u = unif();
        imat[i] = u * u * u * 50.f + 0.01f; /* heavy-tailed importances */
    }
    for (size_t t = 0; t < NTYPES; t++) {
        const double e0 = roundtrip(k_types[t], x, rows, n, NULL, imat, y);
        const double e1 = roundtrip(k_types[t], x, rows, n, imat, imat, y);
        CHECK(e1 >= 0 && e1 < e0, "%s: imatrix does not lower weighted error (%g vs %g)",
              tname(k_types[t]), e1, e0);
        printf("imatrix   %-5s weighted error ratio with/without %.4f\n", tname(k_types[t]),
               e1 / e0);
    }
    /* all-zero / invalid importances fall back to uniform */
    float bad[512];
    for (int i = 0; i < 512; i++)
        bad[i] = (i % 3 == 0) ? NAN : (i % 3 == 1 ? -1.f : 0.f);
    uint8_t *a = malloc(row_bytes(QTK_T_Q4_K, n)), *b = malloc(row_bytes(QTK_T_Q4_K, n));
    qtk_quant_ggml(QTK_T_Q4_K, x, a, 1, n, bad);
    qtk_quant_ggml(QTK_T_Q4_K, x, b, 1, n, NULL);
    CHECK(memcmp(a, b, row_bytes(QTK_T_Q4_K, n)) == 0, "invalid imatrix not treated as uniform");
    free(a);
    free(b);
    free(x);
    free(y);
}

static void test_args(void)
{
    float x[64] = { 0 };
    uint8_t q[256];
    CHECK(qtk_quant_ggml(QTK_T_F16, x, q, 1, 64, NULL) == -1, "f16 has no encoder here");
    CHECK(qtk_quant_ggml(QTK_T_Q4_0, x, q, 1, 48, NULL) == -1, "48 is not a multiple of 32");
    CHECK(qtk_quant_ggml(QTK_T_Q4_K, x, q, 1, 64, NULL) == -1, "64 is not a multiple of 256");
    CHECK(!qtk_quant_supported(QTK_T_IQ2_XXS) && qtk_quant_supported(QTK_T_Q6_K), "supported()");
    CHECK(qtk_quant_ggml(QTK_T_Q8_0, x, q, 0, 64, NULL) == 0, "zero rows");
    /* iq4_nl / iq4_xs are dispatched to quant_iq4.c's encoders */
    float r[512];
    uint8_t a[512], b[512];
    for (int i = 0; i < 512; i++)
        r[i] = gauss();
    CHECK(qtk_quant_supported(QTK_T_IQ4_NL) && qtk_quant_supported(QTK_T_IQ4_XS), "iq4 supported");
    CHECK(qtk_quant_ggml(QTK_T_IQ4_NL, r, a, 2, 256, NULL) == 0 &&
          qtk_quant_iq4_nl(r, b, 2, 256, NULL) == 0 &&
          memcmp(a, b, row_bytes(QTK_T_IQ4_NL, 512)) == 0,
          "iq4_nl dispatch");
    CHECK(qtk_quant_ggml(QTK_T_IQ4_XS, r, a, 2, 256, NULL) == 0 &&
          qtk_quant_iq4_xs(r, b, 2, 256, NULL) == 0 &&
          memcmp(a, b, row_bytes(QTK_T_IQ4_XS, 512)) == 0,
          "iq4_xs dispatch");
}

/* q4_1/q5_1 keep nothing that raises the second error over ggml's reference choice: under x^2
 * without an importance matrix, under llama.cpp's weights imatrix * sqrt(sigma2 + x^2) with one
 * (sigma2: mean x^2 of the row). Checked block by block against ggml's rule computed here. */
static void test_asym_guard(void)
{
    const uint64_t rows = 8, n = 512;
    float *x = malloc(rows * n * sizeof *x), *y = malloc(rows * n * sizeof *y), imat[512];
    for (uint64_t i = 0; i < rows * n; i++) {
        const float g = gauss();
        x[i] = (i % 37 == 0) ? g * 8.f : g; /* outliers */
    }
    for (int i = 0; i < 512; i++) {
        const float u = unif();
        imat[i] = u * u * u * 50.f + 0.01f;
    }
    static const unsigned ty[] = { QTK_T_Q4_1, QTK_T_Q5_1 };
    for (int t = 0; t < 2; t++) {
        const int nmax = t ? 31 : 15;
        for (int im = 0; im < 2; im++) {
            /* q5_1 with a matrix is llama.cpp's own choice (quantize_row_q5_1_impl), not the
             * guarded search: nothing bounds it by ggml's plain choice (on other data a block
             * is above it) */
            if (t == 1 && im == 1)
                continue;
            if (roundtrip(ty[t], x, rows, n, im ? imat : NULL, NULL, y) < 0) {
                CHECK(0, "%s: encode", tname(ty[t]));
                continue;
            }
            uint64_t worse = 0, blocks = 0;
            for (uint64_t r = 0; r < rows; r++) {
                const float *xr = x + r * n, *yr = y + r * n;
                double s2 = 0;
                for (uint64_t i = 0; i < n; i++)
                    s2 += (double)xr[i] * xr[i];
                const float sigma2 = (float)(s2 / (double)n);
                for (uint64_t b = 0; b < n; b += 32, blocks++) {
                    float mn = xr[b], mx = xr[b];
                    for (uint64_t i = 1; i < 32; i++) {
                        mn = xr[b + i] < mn ? xr[b + i] : mn;
                        mx = xr[b + i] > mx ? xr[b + i] : mx;
                    }
                    const float d = (mx - mn) / (float)nmax, id = d != 0.f ? 1.f / d : 0.f;
                    const float dh = qtk_fp16_to_f32(qtk_f32_to_fp16(d));
                    const float mh = qtk_fp16_to_f32(qtk_f32_to_fp16(mn));
                    double eo = 0, er = 0;
                    for (uint64_t i = 0; i < 32; i++) {
                        const float v = xr[b + i];
                        float c = (v - mn) * id + 0.5f;
                        c = c < 0.f ? 0.f : c > (float)nmax ? (float)nmax : c;
                        const float yref = (float)(int)c * dh + mh;
                        const double wgt = im ? (double)imat[b + i] * sqrt((double)sigma2 + (double)v * v)
                                              : (double)v * v;
                        eo += wgt * ((double)yr[b + i] - v) * ((double)yr[b + i] - v);
                        er += wgt * ((double)yref - v) * ((double)yref - v);
                    }
                    worse += eo > er * (1 + 1e-5) + 1e-30;
                }
            }
            CHECK(worse == 0, "%s (imatrix %d): %llu of %llu blocks raise the guarded error",
                  tname(ty[t]), im, (unsigned long long)worse, (unsigned long long)blocks);
        }
    }
    free(x);
    free(y);
}

/* ---- fixtures ---- */

struct stat_row {
    unsigned n;
    double sum, max;
    uint64_t blocks, worse; /* blocks compared, blocks where ours has the larger error */
};

static void test_fixtures(void)
{
    const char *root = t_fixtures();
    if (!root) {
        T_SKIP("fixtures absent");
        return;
    }
    static const char *files[] = { "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S",
                                   "Q3_K_M", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K" };
    char path[1024];
    qtk_err err;
    snprintf(path, sizeof path, "%s/gguf/tiny-f32.gguf", root);
    qtk_model *src = qtk_open(path, &err);
    CHECK(src != NULL, "open %s", path);
    if (!src)
        return;
    struct stat_row st[64];
    memset(st, 0, sizeof st);
    /* (name, type) pairs already compared: llama's reference output is the same in every file */
    char seen[512][80];
    unsigned seen_t[512], nseen = 0;
    double secs = 0;
    int q41_search_differs = 0; /* tensors where the imatrix run's q4_1 is not the default's */
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        snprintf(path, sizeof path, "%s/gguf/tiny-%s.gguf", root, files[f]);
        qtk_model *m = qtk_open(path, &err);
        CHECK(m != NULL, "open %s", path);
        if (!m)
            continue;
        for (size_t k = 0; k < m->ntensors; k++) {
            const qtk_tensor *t = &m->tensors[k];
            const unsigned ty = t->layout.type;
            if (t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_quant_supported(ty))
                continue;
            bool dup = false;
            for (unsigned s = 0; s < nseen && !dup; s++)
                dup = seen_t[s] == ty && strcmp(seen[s], t->name) == 0;
            if (dup || nseen >= 512)
                continue;
            snprintf(seen[nseen], sizeof seen[nseen], "%s", t->name);
            seen_t[nseen++] = ty;
            const qtk_tensor *ts = qtk_tensor_find(src, t->name);
            CHECK(ts != NULL, "%s missing in f32", t->name);
            if (!ts)
                continue;
            const uint64_t rows = qtk_tensor_rows(ts), n = qtk_tensor_cols(ts);
            const uint64_t cnt = rows * n;
            float *x = malloc(cnt * sizeof *x), *yl = malloc(cnt * sizeof *yl);
            float *yo = malloc(cnt * sizeof *yo);
            if (!x || !yl || !yo || qtk_decode_tensor(src, ts, x) != 0 ||
                qtk_decode_tensor(m, t, yl) != 0) {
                CHECK(0, "decode %s", t->name);
                free(x);
                free(yl);
                free(yo);
                continue;
            }
            const clock_t c0 = clock();
            const double eo = roundtrip(ty, x, rows, n, NULL, NULL, yo);
            secs += (double)(clock() - c0) / CLOCKS_PER_SEC;
            double el = 0, rl = 0, ro = 0; /* rl, ro: error under ggml's q3_k weights x^2 */
            double eb = 0;                  /* ours, summed in el's order */
            uint32_t be = 1;
            qtk_ggml_block_info(ty, &be, NULL);
            for (uint64_t b0 = 0; b0 < cnt; b0 += be) {
                double bl = 0, bo = 0;
                for (uint64_t i = b0; i < b0 + be; i++) {
                    const double d = (double)yl[i] - (double)x[i];
                    const double o = (double)yo[i] - (double)x[i];
                    bl += d * d;
                    bo += o * o;
                    rl += (double)x[i] * x[i] * d * d;
                    ro += (double)x[i] * x[i] * o * o;
                }
                el += bl;
                eb += bo;
                st[ty].blocks++;
                st[ty].worse += bo > bl;
            }
            const double ratio = el > 0 ? sqrt(eb / el) : (eb > 0 ? 99.0 : 1.0);
            CHECK(eo >= 0 && ratio <= 1.0, "%s %s (%s): rmse ratio ours/llama %.5f", files[f],
                  t->name, tname(ty), ratio);
            /* q5_0 without an importance matrix is ggml's choice: the same decoded values */
            if (ty == QTK_T_Q5_0)
                CHECK(memcmp(yo, yl, cnt * sizeof *yo) == 0, "%s %s (q5_0): not ggml's values",
                      files[f], t->name);
            /* q3_k, q4_k, q5_k, q5_1 and q6_k in a conversion that uses an importance matrix,
             * for a tensor it does not cover: llama.cpp's own choice, the values of its file */
            if (ty == QTK_T_Q3_K || ty == QTK_T_Q4_K || ty == QTK_T_Q5_K || ty == QTK_T_Q5_1 ||
                ty == QTK_T_Q6_K) {
                uint8_t *qb = malloc(row_bytes(ty, n) * rows);
                CHECK(qb && qtk_quant_ggml_ex(ty, x, qb, rows, n, NULL, QTK_QUANT_IMATRIX_RUN) == 0 &&
                          qtk_dequant_ggml(ty, qb, yo, cnt) == 0 &&
                          memcmp(yo, yl, cnt * sizeof *yo) == 0,
                      "%s %s (%s, imatrix run without an entry): not llama.cpp's values", files[f],
                      t->name, tname(ty));
                free(qb);
            }
            /* q4_1 in a conversion that uses an importance matrix, for a tensor it does not
             * cover: the full search (not the one step taken without a matrix), which never
             * loses to llama.cpp's choice either, under plain or x^2 weights */
            if (ty == QTK_T_Q4_1) {
                uint8_t *qb = malloc(row_bytes(ty, n) * rows), *q1 = malloc(row_bytes(ty, n) * rows);
                float *ys = malloc(cnt * sizeof *ys);
                double es = 0, rs = 0;
                const bool ok = qb && q1 && ys &&
                                qtk_quant_ggml_ex(ty, x, qb, rows, n, NULL, QTK_QUANT_IMATRIX_RUN) == 0 &&
                                qtk_quant_ggml(ty, x, q1, rows, n, NULL) == 0 &&
                                qtk_dequant_ggml(ty, qb, ys, cnt) == 0;
                CHECK(ok, "%s %s (q4_1, imatrix run without an entry): encode", files[f], t->name);
                for (uint64_t i = 0; ok && i < cnt; i++) {
                    const double d = (double)ys[i] - x[i];
                    es += d * d;
                    rs += (double)x[i] * x[i] * d * d;
                }
                double ll = 0;
                for (uint64_t i = 0; ok && i < cnt; i++)
                    ll += ((double)yl[i] - x[i]) * ((double)yl[i] - x[i]);
                CHECK(ok && es <= ll && rs <= rl, "%s %s (q4_1, imatrix run without an entry): error %.9g "
                      "(x^2 %.9g) above llama's %.9g (%.9g)", files[f], t->name, es, rs, ll, rl);
                q41_search_differs += ok && memcmp(qb, q1, row_bytes(ty, n) * rows) != 0;
                free(qb);
                free(q1);
                free(ys);
            }
            /* q3_k, q4_1 and q5_1 without an importance matrix never give up the error under
             * x^2 weights (q3_k: ggml's own objective) */
            if (ty == QTK_T_Q3_K || ty == QTK_T_Q4_1 || ty == QTK_T_Q5_1)
                CHECK(ro <= rl, "%s %s (%s): x^2-weighted error ours %.9g > llama %.9g",
                      files[f], t->name, tname(ty), ro, rl);
            st[ty].n++;
            st[ty].sum += ratio;
            if (ratio > st[ty].max)
                st[ty].max = ratio;
            free(x);
            free(yl);
            free(yo);
        }
        qtk_close(m);
    }
    qtk_close(src);
    CHECK(q41_search_differs > 0, "q4_1 in an imatrix run without an entry is the one-step default "
          "on every fixture tensor (the full search is not taken)");
    printf("fixture RMSE ratio ours/llama-quantize (no imatrix), encode time %.2f s\n", secs);
    printf("  %-5s %7s %10s %10s %18s\n", "type", "tensors", "mean", "max", "blocks worse");
    for (size_t t = 0; t < NTYPES; t++) {
        const struct stat_row *r = &st[k_types[t]];
        if (r->n)
            printf("  %-5s %7u %10.4f %10.4f %8llu / %-8llu\n", tname(k_types[t]), r->n,
                   r->sum / r->n, r->max, (unsigned long long)r->worse,
                   (unsigned long long)r->blocks);
    }
}

int main(void)
{
    test_args();
    test_exact();
    test_zero_nan();
    test_signed_zero_min();
    test_qh16x4();
    test_pair_independence();
    test_qprep();
    test_determinism();
    test_simd();
    test_imatrix();
    test_asym_guard();
    test_q6k_imatrix();
    test_q3k_imatrix();
    test_roundtrip();
    test_fixtures();
    return T_DONE();
}
