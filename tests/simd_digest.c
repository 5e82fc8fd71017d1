/* simd_digest.c - prints a digest of every encoder's output on fixed pseudo-random data, with and
 * without an importance matrix: one line per type, and of the AWQ/GPTQ group fits. tests/test_simd.sh builds it on the
 * machine's lanes and on plain-C lanes (and, with a cross compiler and qemu, for AArch64 NEON)
 * and requires identical lines: the same bytes on every machine. Depends only on the
 * encoders and decoders (no container code), so it cross-compiles from the sources alone. */
#include "qtk.h"
#include "quant.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t g_rng = 0x73696d642d646967ull;
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
    float s = 0;
    for (int i = 0; i < 12; i++)
        s += unif();
    return s - 6.f;
}

static uint64_t fnv(const uint8_t *p, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

typedef struct {
    unsigned t;
    const char *name;
    uint32_t bytes; /* per block of blk values */
} enc_type;

/* "LABEL TYPE DIGEST" of each type's encoding of rows x cols values x (no importance matrix)
 * into q; nonzero when an encoder fails */
static int print_digests(const char *label, const enc_type *t, int n, const float *x,
                         uint32_t rows, uint32_t cols, uint32_t blk, uint8_t *q)
{
    int rc = 0;
    for (int k = 0; k < n; k++) {
        if (qtk_quant_ggml(t[k].t, x, q, rows, cols, NULL) != 0) {
            printf("%s %s: encoder failed\n", label, t[k].name);
            rc = 1;
            continue;
        }
        printf("%s %s %016llx\n", label, t[k].name,
               (unsigned long long)fnv(q, (size_t)rows * cols / blk * t[k].bytes, 0xcbf29ce484222325ull));
    }
    return rc;
}

int main(void)
{
    static const struct { unsigned t; const char *name; uint32_t bytes; } types[] = {
        { QTK_T_Q4_0, "q4_0", 18 }, { QTK_T_Q4_1, "q4_1", 20 }, { QTK_T_Q5_0, "q5_0", 22 },
        { QTK_T_Q5_1, "q5_1", 24 }, { QTK_T_Q8_0, "q8_0", 34 }, { QTK_T_Q2_K, "q2_k", 84 },
        { QTK_T_Q3_K, "q3_k", 110 }, { QTK_T_Q4_K, "q4_k", 144 }, { QTK_T_Q5_K, "q5_k", 176 },
        { QTK_T_Q6_K, "q6_k", 210 }, { QTK_T_IQ4_NL, "iq4_nl", 18 }, { QTK_T_IQ4_XS, "iq4_xs", 136 },
    };
    enum { ROWS = 24, COLS = 1024 };
    float *x = malloc(sizeof(float) * ROWS * COLS), *im = malloc(sizeof(float) * COLS);
    uint8_t *q = malloc((size_t)ROWS * COLS * 2); /* at most 34/32 bytes per value (q8_0) */
    if (!x || !im || !q)
        return 1;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            float v = gauss() * (r % 4 == 1 ? 1e-5f : 0.02f);
            if (r % 4 == 2 && c % 61 == 0)
                v *= 30.f; /* outliers */
            if (r % 4 == 3 && c % 64 < 32)
                v = v < 0 ? -v : v; /* one-signed sub-blocks */
            if (r == ROWS - 1 && c < 256)
                v = 0.f; /* an all-zero superblock */
            x[r * COLS + c] = v;
        }
    for (int c = 0; c < COLS; c++)
        im[c] = (c % 13 == 0) ? 0.f : unif() * 5.f;
    int rc = 0;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (int w = 0; w < 2; w++) {
            uint32_t blk = types[k].t == QTK_T_Q4_0 || types[k].t == QTK_T_Q4_1 || types[k].t == QTK_T_Q5_0 ||
                                   types[k].t == QTK_T_Q5_1 || types[k].t == QTK_T_Q8_0 ||
                                   types[k].t == QTK_T_IQ4_NL
                               ? 32
                               : 256;
            size_t n = (size_t)ROWS * COLS / blk * types[k].bytes;
            if (qtk_quant_ggml(types[k].t, x, q, ROWS, COLS, w ? im : NULL) != 0) {
                printf("%s imatrix=%d: encoder failed\n", types[k].name, w);
                rc = 1;
                continue;
            }
            printf("%s imatrix=%d %016llx\n", types[k].name, w, (unsigned long long)fnv(q, n, 0xcbf29ce484222325ull));
        }
    /* The legacy types on rows of seven blocks (q4_1/q5_1 search blocks two at a time, so one
     * is searched alone) with an importance matrix that has two all-zero blocks (q5_1 searches
     * those beside weighted ones, which take llama.cpp's choice) */
    enum { OCOLS = 224 };
    float *xo = malloc(sizeof(float) * ROWS * OCOLS), imo[OCOLS];
    if (!xo)
        return 1;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < OCOLS; c++)
            xo[r * OCOLS + c] = x[r * COLS + c];
    for (int c = 0; c < OCOLS; c++)
        imo[c] = (c >= 64 && c < 96) || (c >= 160 && c < 192) ? 0.f : im[c];
    for (size_t k = 0; k < 5; k++)
        for (int w = 0; w < 2; w++) {
            const size_t n = (size_t)ROWS * OCOLS / 32 * types[k].bytes;
            if (qtk_quant_ggml(types[k].t, xo, q, ROWS, OCOLS, w ? imo : NULL) != 0) {
                printf("odd %s w=%d: encoder failed\n", types[k].name, w);
                rc = 1;
                continue;
            }
            printf("odd rows %s w=%d %016llx\n", types[k].name, w,
                   (unsigned long long)fnv(q, n, 0xcbf29ce484222325ull));
        }
    free(xo);
    /* AWQ/GPTQ group fits (qtk_fit_group: the error sum has an AVX2 build): groups of 128 and
     * 32, asymmetric (zero from 0 and from 1, GPTQ v1) and symmetric, 4 and 3 bits */
    static const struct { uint32_t g; unsigned bits; bool sym; int zmin; } fits[] = {
        { 128, 4, false, 0 }, { 128, 4, false, 1 }, { 32, 4, true, 0 }, { 128, 3, false, 0 },
    };
    for (size_t k = 0; k < sizeof fits / sizeof fits[0]; k++) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t o = 0; o + fits[k].g <= (size_t)ROWS * COLS; o += fits[k].g) {
            float sc;
            int z;
            if (qtk_fit_group(x + o, fits[k].g, fits[k].bits, fits[k].sym, fits[k].zmin, &sc, &z,
                              q) != 0) {
                printf("fit %zu: failed\n", k);
                rc = 1;
                break;
            }
            h = fnv((const uint8_t *)&sc, sizeof sc, h);
            h = fnv((const uint8_t *)&z, sizeof z, h);
            h = fnv(q, fits[k].g, h);
        }
        printf("group fit g%u b%u %s z%d %016llx\n", fits[k].g, fits[k].bits,
               fits[k].sym ? "sym" : "asym", fits[k].zmin, (unsigned long long)h);
    }
    /* q3_k, q6_k, q2_k, q4_k and q5_k on rows of eleven superblocks (q3_k's AVX2 build fits
     * eight sub-blocks at a time, one per lane, then three; q4_k's and q5_k's fit a superblock's
     * eight sub-blocks of 32 one per lane), each sub-block of 16 values of its own kind: zero,
     * tiny, huge, sparse, one-signed, one outlier or plain, so live and dead lanes share
     * registers */
    {
        enum { MR = 13, MC = 256 * 11 };
        float *m = malloc(sizeof(float) * MR * MC);
        uint8_t *mq = malloc((size_t)MR * MC);
        if (!m || !mq)
            return 1;
        for (int s = 0; s < MR * MC / 16; s++) {
            const unsigned kind = rnd32() % 8;
            const float sc = kind == 0 ? 0.f : kind == 1 ? 1e-20f : kind == 2 ? 1e20f : kind == 3 ? 1e-8f
                                                                                                 : unif();
            for (int i = 0; i < 16; i++) {
                float v = gauss() * sc;
                if (kind == 4 && i % 3)
                    v = 0.f;
                if (kind == 5 && v < 0)
                    v = -v;
                if (kind == 6 && i == 5)
                    v *= 100.f;
                m[s * 16 + i] = v;
            }
        }
        static const enc_type mt[] = { { QTK_T_Q3_K, "q3_k", 110 }, { QTK_T_Q6_K, "q6_k", 210 },
                                       { QTK_T_Q2_K, "q2_k", 84 },  { QTK_T_Q4_K, "q4_k", 144 },
                                       { QTK_T_Q5_K, "q5_k", 176 } };
        rc |= print_digests("mixed sub-blocks", mt, 5, m, MR, MC, 256, mq);
        free(m);
        free(mq);
    }
    /* q4_0, q5_0 and q8_0 without weights on rows of eleven blocks (the AVX2 build searches
     * q4_0's and q8_0's eight at a time, one block per lane, then pairs), each block of its own
     * kind: zero, -0, tiny, huge, a NaN or an infinity (sanitised), the largest magnitude twice
     * with both signs, one nonzero value, or plain */
    {
        enum { LR = 9, LC = 32 * 11 };
        float *m = malloc(sizeof(float) * LR * LC);
        uint8_t *mq = malloc((size_t)LR * LC / 32 * 34);
        if (!m || !mq)
            return 1;
        for (int s = 0; s < LR * LC / 32; s++) {
            const unsigned kind = rnd32() % 10;
            const float sc = kind == 2 ? 1e-30f : kind == 3 ? 3e38f : unif();
            for (int i = 0; i < 32; i++) {
                float v = gauss() * sc;
                if (kind == 0)
                    v = 0.f;
                else if (kind == 1)
                    v = -0.f;
                else if (kind == 4 && i == 7)
                    v = __builtin_nanf("");
                else if (kind == 5 && i == 31)
                    v = -__builtin_inff();
                else if (kind == 6 && (i == 3 || i == 20))
                    v = i == 3 ? 4.f * sc : -4.f * sc;
                else if (kind == 7)
                    v = i == 11 ? sc : 0.f;
                m[s * 32 + i] = v;
            }
        }
        static const enc_type lt[] = { { QTK_T_Q4_0, "q4_0", 18 }, { QTK_T_Q5_0, "q5_0", 22 },
                                       { QTK_T_Q8_0, "q8_0", 34 } };
        rc |= print_digests("mixed blocks", lt, 3, m, LR, LC, 32, mq);
        free(m);
        free(mq);
    }
    free(x);
    free(im);
    free(q);
    return rc;
}
