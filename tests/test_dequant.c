/* test_dequant.c - checks for src/dequant.h.
 *
 * (a) Hand-made blocks for every decodable ggml type, AWQ and GPTQ: expected values come from
 *     the documented per-element formulas (ggml's and AutoAWQ/AutoGPTQ's dequantization formulas), written
 *     independently of the decoders and chosen so every product is exact.
 * (b) Fixture digests: every tensor of ../shared/fixtures/gguf/tiny-*.gguf and every linear
 *     layer of ../shared/fixtures/hf/tiny-llama/{awq,gptq}-* is decoded and its F32 bytes are
 *     hashed (SHA-256) against the reference digests. Root override: env QTK_FIXTURES.
 *     Prints "skipped: fixtures absent" when the directory does not exist.
 *
 * Run from the repository root. Last line: "N passed, N failed"; exit status 1 on failure. */
#include "dequant.h"
#include "quant.h" /* qtk_simd_avx2, qtk_cpu_f16c */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

static unsigned g_pass, g_fail;

static void check(int ok, const char *what)
{
    if (ok)
        g_pass++;
    else
        g_fail++;
    printf("%s - %s\n", ok ? "ok" : "FAIL", what);
}

/* ================================================================ helpers */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFF);
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

static uint32_t g_rng = 12345u;

static uint32_t rnd(void)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}

static uint8_t rnd8(void)
{
    return (uint8_t)(rnd() & 0xFF);
}

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = rnd8();
}

/* Decode n elements of `type` from blk (plus the same block at an odd address) and compare
 * bitwise with want[]. */
static void check_block(const char *name, unsigned type, const uint8_t *blk, size_t bytes,
                        const float *want, size_t n)
{
    float got[512];
    static uint8_t shifted[1024];
    char msg[160];
    int ok = n <= 512 && bytes < sizeof shifted - 1;
    if (ok)
        ok = qtk_dequant_ggml(type, blk, got, n) == 0;
    size_t bad = n;
    for (size_t i = 0; ok && i < n; i++) {
        if (f2u(got[i]) != f2u(want[i])) {
            bad = i;
            ok = 0;
        }
    }
    if (ok) {   /* unaligned source */
        memcpy(shifted + 1, blk, bytes);
        ok = qtk_dequant_ggml(type, shifted + 1, got, n) == 0 && memcmp(got, want, n * 4) == 0;
    }
    if (bad < n)
        snprintf(msg, sizeof msg, "%s block: element %zu got %.9g want %.9g", name, bad,
                 (double)got[bad], (double)want[bad]);
    else
        snprintf(msg, sizeof msg, "%s block decodes to the documented values", name);
    check(ok, msg);
}

/* ================================================================ (a) conversions */

static void test_fp16(void)
{
    check(qtk_fp16_to_f32(0x3C00) == 1.0f && qtk_fp16_to_f32(0xC000) == -2.0f
          && qtk_fp16_to_f32(0x7BFF) == 65504.0f && qtk_fp16_to_f32(0x0001) == ldexpf(1, -24)
          && qtk_fp16_to_f32(0x03FF) == ldexpf(1023, -24) && f2u(qtk_fp16_to_f32(0x8000)) == 0x80000000u
          && isinf(qtk_fp16_to_f32(0xFC00)) && qtk_fp16_to_f32(0xFC00) < 0
          && isnan(qtk_fp16_to_f32(0x7E00)),
          "fp16->f32 special values (normal, subnormal, -0, inf, NaN)");

    /* every non-NaN half round-trips, and matches an exact ldexp construction */
    int ok = 1;
    for (uint32_t h = 0; h < 65536 && ok; h++) {
        const uint32_t e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m)
            continue;
        float want = e == 0 ? ldexpf((float)m, -24)
                   : e == 31 ? INFINITY : ldexpf((float)(m | 1024), (int)e - 25);
        if (h & 0x8000)
            want = -want;
        const float got = qtk_fp16_to_f32((uint16_t)h);
        ok = f2u(got) == f2u(want) && qtk_f32_to_fp16(got) == h;
    }
    check(ok, "fp16<->f32 exact and round-trip for all 63488 non-NaN halves");

    /* the F16 decoder (the F16C instruction where the CPU has it) against the scalar conversion
     * on all 65536 halves, NaNs included, at every offset of the 8-value loop and its tail */
    {
        static uint8_t raw[2 * 65536 + 2 * 7];
        static float got[65536 + 7];
        for (uint32_t h = 0; h < 65536 + 7; h++) {
            raw[2 * h] = (uint8_t)(h & 0xFF);
            raw[2 * h + 1] = (uint8_t)((h >> 8) & 0xFF);
        }
        /* the instruction only where the CPU has it (the decoder asks the same) */
        const int can = qtk_dq_f16c_built() && qtk_simd_avx2() && qtk_cpu_f16c();
        int same = 1, same_f16c = 1;
        for (uint32_t off = 0; off < 8; off++) {
            const uint64_t n = 65536 - off;
            memset(got, 0xFF, sizeof got); /* a value not written stays a NaN no half gives */
            if (qtk_dequant_ggml(1, raw + 2 * off, got, n) != 0)
                same = 0;
            for (uint64_t i = 0; i < n && same; i++)
                same = f2u(got[i]) == f2u(qtk_fp16_to_f32((uint16_t)((i + off) & 0xFFFF)));
            if (!can && qtk_dq_f16c_built())
                continue;
            memset(got, 0xFF, sizeof got);
            qtk_dq_f16_f16c(raw + 2 * off, got, n);
            for (uint64_t i = 0; i < n && same_f16c; i++)
                same_f16c = f2u(got[i]) == f2u(qtk_fp16_to_f32((uint16_t)((i + off) & 0xFFFF)));
        }
        check(same, "F16 decoder = scalar fp16->f32 on all 65536 halves (NaN bits too), 8 offsets");
        check(same_f16c, can ? "F16C conversion = scalar fp16->f32 on all 65536 halves"
                         : qtk_dq_f16c_built() ? "F16C conversion not run (the CPU lacks it, or QTK_SIMD=generic)"
                                               : "F16 conversion without F16C (not built) = scalar");
    }

    check(qtk_f32_to_fp16(1.0f + ldexpf(1, -11)) == 0x3C00
          && qtk_f32_to_fp16(1.0f + 3 * ldexpf(1, -11)) == 0x3C02
          && qtk_f32_to_fp16(65519.0f) == 0x7BFF && qtk_f32_to_fp16(65520.0f) == 0x7C00
          && qtk_f32_to_fp16(ldexpf(1, -25)) == 0x0000 && qtk_f32_to_fp16(ldexpf(3, -26)) == 0x0001
          && qtk_f32_to_fp16(-1e30f) == 0xFC00 && qtk_f32_to_fp16(u2f(0x7FC00001u)) == 0x7E00
          && qtk_f32_to_fp16(u2f(0xFF800001u)) == 0xFE00,
          "f32->fp16 rounds to nearest even, overflows to inf, NaN -> 0x7E00");

    check(qtk_bf16_to_f32(0x3F80) == 1.0f && qtk_bf16_to_f32(0xC040) == -3.0f
          && qtk_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3F80
          && qtk_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)) == 0x3F82
          && qtk_f32_to_bf16(u2f(0x7F7FFFFFu)) == 0x7F80
          && qtk_f32_to_bf16(u2f(0x7F800001u)) == 0x7FC0
          && qtk_f32_to_bf16(u2f(0xFF810000u)) == 0xFFC1,
          "bf16 conversions (round to nearest even, NaN forced quiet)");
}

static void test_plain(void)
{
    uint8_t b[64];
    float want[8], got[8];
    /* F32 */
    for (int i = 0; i < 4; i++) {
        want[i] = (float)i * 1.5f - 2.0f;
        put32(b + 4 * i, f2u(want[i]));
    }
    int ok = qtk_dequant_ggml(0, b, got, 4) == 0 && memcmp(got, want, 16) == 0;
    /* F16 / BF16 */
    put16(b, 0x3C00); put16(b + 2, 0xB800); put16(b + 4, 0x0001); put16(b + 6, 0x7BFF);
    ok = ok && qtk_dequant_ggml(1, b, got, 4) == 0 && got[0] == 1.0f && got[1] == -0.5f
         && got[2] == ldexpf(1, -24) && got[3] == 65504.0f;
    put16(b, 0x3F80); put16(b + 2, 0xC040);
    ok = ok && qtk_dequant_ggml(30, b, got, 2) == 0 && got[0] == 1.0f && got[1] == -3.0f;
    /* I8 I16 I32 I64 F64 */
    b[0] = 0x80; b[1] = 0x7F;
    ok = ok && qtk_dequant_ggml(24, b, got, 2) == 0 && got[0] == -128.0f && got[1] == 127.0f;
    put16(b, 0x8000); put16(b + 2, 0x1234);
    ok = ok && qtk_dequant_ggml(25, b, got, 2) == 0 && got[0] == -32768.0f && got[1] == 4660.0f;
    put32(b, 0xFFFFFFFFu); put32(b + 4, 0x01000001u);
    ok = ok && qtk_dequant_ggml(26, b, got, 2) == 0 && got[0] == -1.0f && got[1] == 16777216.0f;
    put32(b, 0xFFFFFFFEu); put32(b + 4, 0xFFFFFFFFu);
    ok = ok && qtk_dequant_ggml(27, b, got, 1) == 0 && got[0] == -2.0f;
    const double dv = -0.1;
    memcpy(b + 1, &dv, 8);
    ok = ok && qtk_dequant_ggml(28, b + 1, got, 1) == 0 && got[0] == -0.1f;
    check(ok, "F32 F16 BF16 I8 I16 I32 I64 F64 decode");

    ok = 1;
    static const unsigned none[] = { 4, 5, 9, 15, 31, 32, 33, 36, 37, 38, 43, 200 };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        ok = ok && qtk_dequant_ggml(none[i], b, got, 256) == -1;
    ok = ok && qtk_dequant_ggml(2, b, got, 31) == -1;   /* not a whole block */
    check(ok, "Q8_1, Q8_K, removed and unknown ids return -1; partial block returns -1");

    uint32_t be, by;
    ok = qtk_ggml_block_info(12, &be, &by) == 0 && be == 256 && by == 144
         && qtk_ggml_block_info(9, &be, &by) == 0 && be == 32 && by == 36
         && qtk_ggml_block_info(40, &be, &by) == 0 && be == 64 && by == 36
         && qtk_ggml_block_info(4, &be, &by) == -1 && qtk_ggml_block_info(43, &be, &by) == -1;
    check(ok, "block geometry (Q4_K 256/144, Q8_1 32/36, NVFP4 64/36, removed ids)");
}

/* ================================================================ (a) legacy blocks */

static int bit(const uint8_t *p, unsigned k)
{
    return (p[k / 8] >> (k % 8)) & 1;
}

static void test_legacy(void)
{
    uint8_t b[64];
    float w[256];

    /* Q4_0: d=0.5, y[j] = (lo-8)*d, y[j+16] = (hi-8)*d */
    put16(b, 0x3800);
    fill(b + 2, 16);
    for (int j = 0; j < 16; j++) {
        w[j] = (float)((b[2 + j] & 15) - 8) * 0.5f;
        w[j + 16] = (float)((b[2 + j] >> 4) - 8) * 0.5f;
    }
    check_block("Q4_0", 2, b, 18, w, 32);

    /* Q4_1: d=0.25, m=-1.5 */
    put16(b, 0x3400); put16(b + 2, 0xBE00);
    fill(b + 4, 16);
    for (int j = 0; j < 16; j++) {
        w[j] = (float)(b[4 + j] & 15) * 0.25f - 1.5f;
        w[j + 16] = (float)(b[4 + j] >> 4) * 0.25f - 1.5f;
    }
    check_block("Q4_1", 3, b, 20, w, 32);

    /* Q5_0: d=-2, qh bit j is the 5th bit of element j */
    put16(b, 0xC000);
    fill(b + 2, 20);
    for (int j = 0; j < 16; j++) {
        w[j] = (float)(((b[6 + j] & 15) | bit(b + 2, (unsigned)j) << 4) - 16) * -2.0f;
        w[j + 16] = (float)(((b[6 + j] >> 4) | bit(b + 2, (unsigned)j + 16) << 4) - 16) * -2.0f;
    }
    check_block("Q5_0", 6, b, 22, w, 32);

    /* Q5_1: d=0.125, m=3 */
    put16(b, 0x3000); put16(b + 2, 0x4200);
    fill(b + 4, 20);
    for (int j = 0; j < 16; j++) {
        w[j] = (float)((b[8 + j] & 15) | bit(b + 4, (unsigned)j) << 4) * 0.125f + 3.0f;
        w[j + 16] = (float)((b[8 + j] >> 4) | bit(b + 4, (unsigned)j + 16) << 4) * 0.125f + 3.0f;
    }
    check_block("Q5_1", 7, b, 24, w, 32);

    /* the four again with random fp16 scales and offsets (finite: subnormals, zeros, both
     * signs, the largest) on random codes and fifth bits, many blocks: the lanes' decode
     * against the formulas, bit for bit */
    for (int it = 0; it < 400; it++) {
        static const unsigned ty[4] = { 2, 3, 6, 7 };
        static const size_t sz[4] = { 18, 20, 22, 24 };
        const int t = it % 4;
        fill(b, sz[t]);
        for (int k = 0; k < 2; k++) /* no NaN or infinity: exponent 31 -> 30 */
            if ((b[2 * k + 1] & 0x7C) == 0x7C)
                b[2 * k + 1] = (uint8_t)(b[2 * k + 1] & ~0x04);
        if (it < 24) { /* the first blocks of each type: the edge scales and offsets */
            static const uint16_t edge[6] = { 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x8000, 0x0000 };
            put16(b, edge[(it / 4) % 6]);
            if (t == 1 || t == 3)
                put16(b + 2, edge[(it / 4 + 1) % 6]);
        }
        const float d = qtk_fp16_to_f32((uint16_t)(b[0] | b[1] << 8));
        const float m = qtk_fp16_to_f32((uint16_t)(b[2] | b[3] << 8));
        const uint8_t *qs = b + (t == 0 ? 2 : t == 1 ? 4 : t == 2 ? 6 : 8);
        const uint8_t *qh = t == 2 ? b + 2 : b + 4;
        for (int j = 0; j < 32; j++) {
            int c = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
            if (t >= 2)
                c |= (int)bit(qh, (unsigned)j) << 4;
            w[j] = t == 0 ? (float)(c - 8) * d : t == 1 ? (float)c * d + m
                 : t == 2 ? (float)(c - 16) * d : (float)c * d + m;
        }
        char name[32];
        snprintf(name, sizeof name, "%s random %d", t == 0 ? "Q4_0" : t == 1 ? "Q4_1" : t == 2 ? "Q5_0" : "Q5_1", it);
        check_block(name, ty[t], b, sz[t], w, 32);
    }

    /* Q8_0: d=0.5, int8 */
    put16(b, 0x3800);
    fill(b + 2, 32);
    for (int j = 0; j < 32; j++)
        w[j] = (float)(int8_t)b[2 + j] * 0.5f;
    check_block("Q8_0", 8, b, 34, w, 32);

    /* IQ4_NL: d=0.5, codebook */
    static const int kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
    put16(b, 0x3800);
    fill(b + 2, 16);
    for (int j = 0; j < 16; j++) {
        w[j] = (float)kv[b[2 + j] & 15] * 0.5f;
        w[j + 16] = (float)kv[b[2 + j] >> 4] * 0.5f;
    }
    check_block("IQ4_NL", 20, b, 18, w, 32);

    /* MXFP4: value = kvalues_fp4[nibble] * 2^(e-128) (doubled E2M1 times half the E8M0
     * scale); e = 0 and 1 give subnormal scales */
    static const int kf4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
    static const uint8_t es[4] = { 127, 0, 1, 140 };
    for (int t = 0; t < 4; t++) {
        b[0] = es[t];
        fill(b + 1, 16);
        const float dd = ldexpf(1.0f, es[t] - 128);
        for (int j = 0; j < 16; j++) {
            w[j] = (float)kf4[b[1 + j] & 15] * dd;
            w[j + 16] = (float)kf4[b[1 + j] >> 4] * dd;
        }
        char name[32];
        snprintf(name, sizeof name, "MXFP4 e=%u", es[t]);
        check_block(name, 39, b, 17, w, 32);
    }

    /* NVFP4: d[s] UE4M3 halved: 0x38 = 1.0 -> 0.5; 0x3C = 1.5 -> 0.75; 0x01 = 2^-9 -> 2^-10;
     * 0x7F -> 0 */
    static const uint8_t ds[4] = { 0x38, 0x3C, 0x01, 0x7F };
    static const float dv[4] = { 0.5f, 0.75f, 0x1.0p-10f, 0.0f };
    memcpy(b, ds, 4);
    fill(b + 4, 32);
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 8; j++) {
            w[16 * s + j] = (float)kf4[b[4 + 8 * s + j] & 15] * dv[s];
            w[16 * s + j + 8] = (float)kf4[b[4 + 8 * s + j] >> 4] * dv[s];
        }
    check_block("NVFP4", 40, b, 36, w, 64);

    /* Q1_0: 128 elements, bit set -> +d, clear -> -d; d = 0.75 */
    put16(b, 0x3A00);
    fill(b + 2, 16);
    for (unsigned j = 0; j < 128; j++)
        w[j] = bit(b + 2, j) ? 0.75f : -0.75f;
    check_block("Q1_0", 41, b, 18, w, 128);

    /* Q2_0: 64 elements, code c at bits 2(j%4) of qs[j/4], y = (c-1)*d; d = 1.5 */
    put16(b, 0x3E00);
    fill(b + 2, 16);
    for (int j = 0; j < 64; j++)
        w[j] = (float)(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * 1.5f;
    check_block("Q2_0", 42, b, 18, w, 64);
}

/* ================================================================ (a) ternary */

static void test_ternary(void)
{
    uint8_t b[66];
    float w[256];
    int t[256];

    /* TQ1_0: trits packed as base-3 fixed-point fractions, first trit most significant */
    for (int i = 0; i < 256; i++)
        t[i] = (int)(rnd() % 3);
    for (int m = 0; m < 32; m++) {
        unsigned q = 0;
        for (int n = 0; n < 5; n++)
            q = q * 3 + (unsigned)t[32 * n + m];
        b[m] = (uint8_t)((q * 256 + 242) / 243);
    }
    for (int m = 0; m < 16; m++) {
        unsigned q = 0;
        for (int n = 0; n < 5; n++)
            q = q * 3 + (unsigned)t[160 + 16 * n + m];
        b[32 + m] = (uint8_t)((q * 256 + 242) / 243);
    }
    for (int j = 0; j < 4; j++) {
        unsigned q = 0;
        for (int n = 0; n < 4; n++)
            q = q * 3 + (unsigned)t[240 + 4 * n + j];
        q *= 3;
        b[48 + j] = (uint8_t)((q * 256 + 242) / 243);
    }
    put16(b + 52, 0x3800);   /* d = 0.5, stored last */
    for (int i = 0; i < 256; i++)
        w[i] = (float)(t[i] - 1) * 0.5f;
    check_block("TQ1_0", 34, b, 54, w, 256);

    /* TQ2_0: byte m of 32-byte group g holds 128g+32l+m at bits 2l */
    fill(b, 64);
    put16(b + 64, 0xC200);   /* d = -3 */
    for (int i = 0; i < 256; i++) {
        const int g = i / 128, l = (i % 128) / 32, m = i % 32;
        w[i] = (float)(((b[32 * g + m] >> (2 * l)) & 3) - 1) * -3.0f;
    }
    check_block("TQ2_0", 35, b, 66, w, 256);
}

/* ================================================================ (a) k-quants */

/* 6-bit Q3_K scale k (0..15), written from the byte layout rather than ggml's word tricks. */
static int q3k_scale(const uint8_t *s, int k)
{
    const int lo = k < 8 ? s[k] & 15 : s[k - 8] >> 4;
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    return lo | hi << 4;
}

/* get_scale_min_k4 as documented: bytes 0-3 scales 0-3 (+ top bits of 4-7), 4-7 mins, 8-11
 * low nibbles of scales 4-7 and high nibbles of mins 4-7. */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static void test_kquants(void)
{
    uint8_t b[210];
    float w[256];

    /* Q2_K: element e = 128c + 32j + 16h + l uses bits 2j of qs[32c+16h+l], scale byte 8c+2j+h */
    fill(b, 80);
    put16(b + 80, 0x3C00); put16(b + 82, 0x3800);   /* d = 1, dmin = 0.5 */
    for (int e = 0; e < 256; e++) {
        const int c = e / 128, j = (e % 128) / 32, h = (e % 32) / 16, l = e % 16;
        const int q = (b[16 + 32 * c + 16 * h + l] >> (2 * j)) & 3;
        const int sc = b[8 * c + 2 * j + h];
        w[e] = (float)((sc & 15) * q) - 0.5f * (float)(sc >> 4);
    }
    check_block("Q2_K", 10, b, 84, w, 256);

    /* Q3_K: q = 2 low bits - 4 unless hmask bit (4c+j) of hmask[16h+l] is set; y = d*(sc-32)*q */
    fill(b, 108);
    put16(b + 108, 0xB400);   /* d = -0.25 */
    for (int e = 0; e < 256; e++) {
        const int c = e / 128, j = (e % 128) / 32, h = (e % 32) / 16, l = e % 16;
        int q = (b[32 + 32 * c + 16 * h + l] >> (2 * j)) & 3;
        if (!((b[16 * h + l] >> (4 * c + j)) & 1))
            q -= 4;
        /* ggml order: (d*(sc-32))*q, which fixes the sign of zero products */
        w[e] = (-0.25f * (float)(q3k_scale(b + 96, 8 * c + 2 * j + h) - 32)) * (float)q;
    }
    check_block("Q3_K", 11, b, 110, w, 256);

    /* Q4_K: 64-chunk k: low nibbles of qs[32k..] = sub-block 2k, high nibbles = 2k+1 */
    put16(b, 0x3C00); put16(b + 2, 0x3400);   /* d = 1, dmin = 0.25 */
    fill(b + 4, 140);
    for (int e = 0; e < 256; e++) {
        const int k = e / 64, hi = (e % 64) / 32, l = e % 32;
        const uint8_t byte = b[16 + 32 * k + l];
        int sc, m;
        k4_scale_min(b + 4, 2 * k + hi, &sc, &m);
        w[e] = (float)(sc * (hi ? byte >> 4 : byte & 15)) - 0.25f * (float)m;
    }
    check_block("Q4_K", 12, b, 144, w, 256);

    /* Q5_K: plus 16 when bit 2k+hi of qh[l] is set */
    put16(b, 0x3800); put16(b + 2, 0x3C00);   /* d = 0.5, dmin = 1 */
    fill(b + 4, 172);
    for (int e = 0; e < 256; e++) {
        const int k = e / 64, hi = (e % 64) / 32, l = e % 32;
        const uint8_t byte = b[48 + 32 * k + l];
        int sc, m;
        k4_scale_min(b + 4, 2 * k + hi, &sc, &m);
        const int q = (hi ? byte >> 4 : byte & 15) + 16 * ((b[16 + l] >> (2 * k + hi)) & 1);
        w[e] = 0.5f * (float)(sc * q) - (float)m;
    }
    check_block("Q5_K", 13, b, 176, w, 256);

    /* Q6_K: half n, quarter r: low nibble of ql[64n+l] (r=0), ql[64n+l+32] (1), high nibbles
     * (2, 3); 2 bits at 2r of qh[32n+l]; scale int8 scales[8n + l/16 + 2r]; d = 0.125 */
    fill(b, 208);
    put16(b + 208, 0x3000);
    for (int e = 0; e < 256; e++) {
        const int n = e / 128, r = (e % 128) / 32, l = e % 32;
        const uint8_t lb = b[64 * n + l + (r & 1) * 32];
        const int lo = r < 2 ? lb & 15 : lb >> 4;
        const int hi2 = (b[128 + 32 * n + l] >> (2 * r)) & 3;
        const int sc = (int8_t)b[192 + 8 * n + l / 16 + 2 * r];
        w[e] = (0.125f * (float)sc) * (float)((lo | hi2 << 4) - 32);   /* ggml: (d*sc)*q */
    }
    check_block("Q6_K", 14, b, 210, w, 256);

    /* IQ4_XS: ls = 4 bits of scales_l[ib/2] (low for even ib) | 2 bits of scales_h << 4 */
    static const int kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
    put16(b, 0x2C00);   /* d = 1/16 */
    fill(b + 2, 134);
    for (int e = 0; e < 256; e++) {
        const int ib = e / 32, j = e % 32;
        const unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (int)((sh >> (2 * ib)) & 3) << 4;
        const uint8_t q = b[8 + 16 * ib + j % 16];
        w[e] = 0.0625f * (float)((ls - 32) * kv[j < 16 ? q & 15 : q >> 4]);
    }
    check_block("IQ4_XS", 23, b, 136, w, 256);
}

/* ================================================================ (a) i-quants */

/* A few codebook entries from ggml-common.h, used to build blocks by hand. */
static const uint64_t IQ2XXS_1 = 0x080808080808082bull, IQ2XXS_255 = 0x2b2b2b1908081908ull;
static const uint64_t IQ2XS_300 = 0x1908190808191908ull, IQ2XS_511 = 0x2b2b2b2b2b2b2b2bull;
static const uint64_t IQ2S_300 = 0x08191908192b1908ull, IQ2S_700 = 0x1919082b2b080808ull;
static const uint32_t IQ3XXS_3 = 0x04040c0cu, IQ3XXS_255 = 0x3e341c04u;
static const uint32_t IQ3S_3 = 0x0101010bu, IQ3S_256 = 0x05090507u, IQ3S_511 = 0x0f0f0101u;
static const uint64_t IQ1S_1 = 0xffffffffffffff01ull, IQ1S_256 = 0xff00ff01000100ffull;
static const uint64_t IQ1S_1000 = 0x00000000ffff00ffull, IQ1S_2047 = 0x0101010101010101ull;

static float gbyte(uint64_t g, int j)
{
    return (float)((g >> (8 * j)) & 0xFF);
}

static float gsigned(uint64_t g, int j)
{
    return (float)(int8_t)(uint8_t)((g >> (8 * j)) & 0xFF);
}

/* Sign byte for a 7-bit index: the 8th sign makes the count of negatives even. */
static unsigned ksign(unsigned idx7)
{
    unsigned p = 0;
    for (unsigned k = 0; k < 7; k++)
        p ^= (idx7 >> k) & 1;
    return idx7 | p << 7;
}

static float sgn(unsigned signs, int j)
{
    return (signs >> j) & 1 ? -1.0f : 1.0f;
}

static void test_iquants(void)
{
    uint8_t b[128];
    float w[256];

    /* IQ2_XXS: per 32-block: 4 grid-index bytes, then u32 of 4 x 7-bit signs | scale << 28 */
    memset(b, 0, sizeof b);
    put16(b, 0x3C00);   /* d = 1 */
    static const uint8_t idx2[4] = { 1, 255, 0, 1 };
    for (int ib = 0; ib < 8; ib++) {
        const unsigned sg[4] = { (unsigned)ib * 13 % 128, 127, 0, 85 };
        const uint32_t s = (uint32_t)(ib * 2 + 1);
        memcpy(b + 2 + 8 * ib, idx2, 4);
        put32(b + 6 + 8 * ib, sg[0] | sg[1] << 7 | sg[2] << 14 | sg[3] << 21 | s << 28);
    }
    for (int ib = 0; ib < 8; ib++) {
        const float db = (0.5f + (float)(ib * 2 + 1)) * 0.25f;
        const unsigned sg[4] = { (unsigned)ib * 13 % 128, 127, 0, 85 };
        const uint64_t gr[4] = { IQ2XXS_1, IQ2XXS_255, 0x0808080808080808ull, IQ2XXS_1 };
        for (int l = 0; l < 4; l++)
            for (int j = 0; j < 8; j++)
                w[32 * ib + 8 * l + j] = db * gbyte(gr[l], j) * sgn(ksign(sg[l]), j);
    }
    check_block("IQ2_XXS", 16, b, 66, w, 256);

    /* IQ2_XS: u16 = 9-bit grid index | 7-bit sign index << 9; scales nibble per 16 elements */
    memset(b, 0, sizeof b);
    put16(b, 0x3800);   /* d = 0.5 */
    for (int k = 0; k < 32; k++) {
        const unsigned gi = k % 2 ? 511u : 300u, si = (unsigned)(k * 5 % 128);
        put16(b + 2 + 2 * k, (uint16_t)(gi | si << 9));
    }
    for (int ib = 0; ib < 8; ib++)
        b[66 + ib] = (uint8_t)(ib | (15 - ib) << 4);
    for (int e = 0; e < 256; e++) {
        const int k = e / 8, j = e % 8, ib = e / 32, l = (e % 32) / 8;
        const int s = l < 2 ? ib : 15 - ib;
        const float db = 0.5f * (0.5f + (float)s) * 0.25f;
        w[e] = db * gbyte(k % 2 ? IQ2XS_511 : IQ2XS_300, j) * sgn(ksign((unsigned)(k * 5 % 128)), j);
    }
    check_block("IQ2_XS", 17, b, 74, w, 256);

    /* IQ2_S: index = qs[k] | 2 bits of qh[ib] at 2l << 8; explicit sign bytes at qs+32 */
    memset(b, 0, sizeof b);
    put16(b, 0x4000);   /* d = 2 */
    for (int k = 0; k < 32; k++) {
        const unsigned gi = k % 2 ? 700u : 300u;
        b[2 + k] = (uint8_t)(gi & 0xFF);
        b[34 + k] = rnd8();
        b[66 + k / 4] = (uint8_t)(b[66 + k / 4] | ((gi >> 8) << (2 * (k % 4))));
    }
    for (int ib = 0; ib < 8; ib++)
        b[74 + ib] = (uint8_t)((ib + 3) | (ib << 4));
    for (int e = 0; e < 256; e++) {
        const int k = e / 8, j = e % 8, ib = e / 32, l = (e % 32) / 8;
        const int s = l < 2 ? ib + 3 : ib;
        const float db = 2.0f * (0.5f + (float)s) * 0.25f;
        w[e] = db * gbyte(k % 2 ? IQ2S_700 : IQ2S_300, j) * sgn(b[34 + k], j);
    }
    check_block("IQ2_S", 22, b, 82, w, 256);

    /* IQ3_XXS: 64 index bytes (4 values each), then per 32-block u32 signs | scale << 28 */
    memset(b, 0, sizeof b);
    put16(b, 0x3400);   /* d = 0.25 */
    for (int k = 0; k < 64; k++)
        b[2 + k] = k % 2 ? 255 : 3;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t a = (uint32_t)(15 - ib) << 28;
        for (int l = 0; l < 4; l++)
            a |= (uint32_t)((ib * 4 + l) * 7 % 128) << (7 * l);
        put32(b + 66 + 4 * ib, a);
    }
    for (int e = 0; e < 256; e++) {
        const int ib = e / 32, l = (e % 32) / 8, j = e % 8;
        const float db = 0.25f * (0.5f + (float)(15 - ib)) * 0.5f;
        const uint32_t g = j < 4 ? IQ3XXS_3 : IQ3XXS_255;
        w[e] = db * gbyte(g, j % 4) * sgn(ksign((unsigned)((ib * 4 + l) * 7 % 128)), j);
    }
    check_block("IQ3_XXS", 18, b, 98, w, 256);

    /* IQ3_S: index k = qs[k] | bit (k%8) of qh[ib] << 8; one sign bit per element;
     * scales[ib/2] nibble s -> d*(1+2s) */
    memset(b, 0, sizeof b);
    put16(b, 0x3800);   /* d = 0.5 */
    static const unsigned gis[3] = { 3, 256, 511 };
    for (int k = 0; k < 64; k++) {
        const unsigned gi = gis[k % 3];
        b[2 + k] = (uint8_t)(gi & 0xFF);
        b[66 + k / 8] = (uint8_t)(b[66 + k / 8] | ((gi >> 8) << (k % 8)));
    }
    fill(b + 74, 32);
    for (int i = 0; i < 4; i++)
        b[106 + i] = (uint8_t)(2 * i | (15 - i) << 4);
    for (int e = 0; e < 256; e++) {
        const int ib = e / 32, k = e / 4;
        const int s = ib % 2 ? 15 - ib / 2 : 2 * (ib / 2);
        const float db = 0.5f * (float)(1 + 2 * s);
        const uint32_t g = gis[k % 3] == 3 ? IQ3S_3 : gis[k % 3] == 256 ? IQ3S_256 : IQ3S_511;
        w[e] = db * gbyte(g, e % 4) * sgn(b[74 + e / 8], e % 8);
    }
    check_block("IQ3_S", 21, b, 110, w, 256);

    /* IQ1_S: index = qs[k] | 3 bits of qh[ib] at 3l << 8; scale bits 12-14; delta sign bit 15 */
    memset(b, 0, sizeof b);
    put16(b, 0x3C00);   /* d = 1 */
    static const unsigned g1[4] = { 1, 256, 1000, 2047 };
    for (int ib = 0; ib < 8; ib++) {
        unsigned qh = (unsigned)(ib % 8) << 12 | (ib % 2 ? 0x8000u : 0);
        for (int l = 0; l < 4; l++) {
            const unsigned gi = g1[(l + ib) % 4];
            b[2 + 4 * ib + l] = (uint8_t)(gi & 0xFF);
            qh |= (gi >> 8) << (3 * l);
        }
        put16(b + 34 + 2 * ib, (uint16_t)qh);
    }
    for (int e = 0; e < 256; e++) {
        const int ib = e / 32, l = (e % 32) / 8;
        const unsigned gi = g1[(l + ib) % 4];
        const uint64_t g = gi == 1 ? IQ1S_1 : gi == 256 ? IQ1S_256 : gi == 1000 ? IQ1S_1000 : IQ1S_2047;
        const float dl = (float)(2 * ib + 1), delta = ib % 2 ? -0.125f : 0.125f;
        w[e] = dl * (gsigned(g, e % 8) + delta);
    }
    check_block("IQ1_S", 19, b, 50, w, 256);

    /* IQ1_M: per 8-group nibble of qh (3 index bits + delta sign bit 3); two 3-bit scales per
     * 32-block in scales[] u16 words; fp16 super-scale in the top nibbles of the 4 words */
    memset(b, 0, sizeof b);
    const uint16_t dh = 0x3800;   /* d = 0.5 */
    uint16_t sc[4] = { 0, 0, 0, 0 };
    for (int ib = 0; ib < 8; ib++) {
        const unsigned s1 = (unsigned)ib % 8, s2 = 7u - (unsigned)ib % 8;
        sc[ib / 2] = (uint16_t)(sc[ib / 2] | (s1 | s2 << 3) << (6 * (ib % 2)));
        for (int l = 0; l < 4; l++) {
            const unsigned gi = g1[(l + ib) % 4];
            const unsigned nib = (gi >> 8) | ((unsigned)(l + ib) % 3 == 0 ? 8u : 0u);
            b[4 * ib + l] = (uint8_t)(gi & 0xFF);
            b[32 + 2 * ib + l / 2] = (uint8_t)(b[32 + 2 * ib + l / 2] | nib << (4 * (l % 2)));
        }
    }
    for (int k = 0; k < 4; k++) {
        sc[k] = (uint16_t)(sc[k] | ((dh >> (4 * k)) & 15) << 12);
        put16(b + 48 + 2 * k, sc[k]);
    }
    for (int e = 0; e < 256; e++) {
        const int ib = e / 32, l = (e % 32) / 8;
        const unsigned gi = g1[(l + ib) % 4];
        const uint64_t g = gi == 1 ? IQ1S_1 : gi == 256 ? IQ1S_256 : gi == 1000 ? IQ1S_1000 : IQ1S_2047;
        const int s = l < 2 ? ib % 8 : 7 - ib % 8;
        const float dl = 0.5f * (float)(2 * s + 1);
        const float delta = (l + ib) % 3 == 0 ? -0.125f : 0.125f;
        w[e] = dl * (gsigned(g, e % 8) + delta);
    }
    check_block("IQ1_M", 29, b, 56, w, 256);
}

/* ================================================================ (a) AWQ / GPTQ */

static void test_awq_gptq(void)
{
    /* A small worked example: K = N = G = 8, q[k][n] = (3k+n) mod 16. */
    static const int z[8] = { 8, 7, 9, 8, 0, 15, 3, 8 };
    static const uint32_t awq_w[8] = { 0x75316420u, 0xA8649753u, 0xDB97CA86u, 0x0ECAFDB9u,
                                       0x31FD20ECu, 0x6420531Fu, 0x97538642u, 0xCA86B975u };
    uint16_t s[8];
    for (int n = 0; n < 8; n++)
        s[n] = qtk_f32_to_fp16(0.01f * (float)(n + 1));
    float want[64], got[64];
    for (int n = 0; n < 8; n++)
        for (int k = 0; k < 8; k++)
            want[n * 8 + k] = (float)((3 * k + n) % 16 - z[n]) * qtk_fp16_to_f32(s[n]);
    int32_t qw[8], qz[1];
    for (int k = 0; k < 8; k++)
        qw[k] = (int32_t)awq_w[k];
    qz[0] = (int32_t)0x8F873098u;
    int ok = qtk_dequant_awq(qw, qz, s, 8, 8, 8, got) == 0 && memcmp(got, want, sizeof want) == 0;
    check(ok, "AWQ GEMM worked example (order 0,2,4,6,1,3,5,7) decodes to (q-z)*s");
    ok = qtk_dequant_awq(qw, qz, s, 8, 8, 3, got) == -1 && qtk_dequant_awq(qw, qz, s, 8, 4, 8, got) == -1
         && qtk_dequant_awq(qw, qz, s, 8, 8, 0, got) == -1;
    check(ok, "AWQ rejects in % group != 0, out % 8 != 0, group 0");

    /* GPTQ, random shapes: K = 64, N = 32, group 16 (4 groups), every width, v1 and v2, with
     * and without a g_idx. Expected values from the 96-bit LSB-first stream rule. */
    enum { K = 64, N = 32, G = 16, NG = 4 };
    static const unsigned widths[4] = { 2, 3, 4, 8 };
    for (int wi = 0; wi < 4; wi++) {
        const unsigned bits = widths[wi], maxq = (1u << bits) - 1;
        static int q[K][N], zs[NG][N];
        static uint16_t sc[NG][N];
        static int32_t gq[K * 8 / 32 * N], gz[NG * N * 8 / 32], gidx[K];
        static float out[N * K], exp1[N * K], exp2[N * K];
        memset(gq, 0, sizeof gq);
        memset(gz, 0, sizeof gz);
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                q[k][n] = (int)(rnd() & maxq);
        for (int g = 0; g < NG; g++)
            for (int n = 0; n < N; n++) {
                zs[g][n] = (int)(rnd() & maxq);
                if (n == 5)
                    zs[g][n] = (int)maxq;   /* v1: decodes as 2^bits, no wrap */
                sc[g][n] = (uint16_t)(0x2000 + (rnd() & 0x3FFF));
            }
        for (int k = 0; k < K; k++)
            gidx[k] = (k * 7 + 3) % NG;
        /* pack: column n of qweight is a stream of K*bits bits, 32 bits per row */
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++)
                for (unsigned t = 0; t < bits; t++) {
                    const unsigned pos = (unsigned)k * bits + t;
                    if ((q[k][n] >> t) & 1)
                        gq[(pos / 32) * N + (unsigned)n] |= (int32_t)(1u << (pos % 32));
                }
        const unsigned zw = N * bits / 32;
        for (int g = 0; g < NG; g++)
            for (int n = 0; n < N; n++)
                for (unsigned t = 0; t < bits; t++) {
                    const unsigned pos = (unsigned)n * bits + t;
                    if ((zs[g][n] >> t) & 1)
                        gz[(unsigned)g * zw + pos / 32] |= (int32_t)(1u << (pos % 32));
                }
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) {
                const float f = qtk_fp16_to_f32(sc[k / G][n]);
                exp1[n * K + k] = (float)(q[k][n] - zs[k / G][n] - 1) * f;
                const int g2 = gidx[k];
                exp2[n * K + k] = (float)(q[k][n] - zs[g2][n]) * qtk_fp16_to_f32(sc[g2][n]);
            }
        char msg[128];
        ok = qtk_dequant_gptq(gq, gz, &sc[0][0], NULL, K, N, G, NG, bits, 1, out) == 0
             && memcmp(out, exp1, sizeof exp1) == 0;
        snprintf(msg, sizeof msg, "GPTQ %u-bit v1 (zero = stored + 1, no wrap) packed stream", bits);
        check(ok, msg);
        ok = qtk_dequant_gptq(gq, gz, &sc[0][0], gidx, K, N, 0, NG, bits, 2, out) == 0
             && memcmp(out, exp2, sizeof exp2) == 0;
        snprintf(msg, sizeof msg, "GPTQ %u-bit v2 with a permuted g_idx", bits);
        check(ok, msg);
        gidx[7] = NG;
        ok = qtk_dequant_gptq(gq, gz, &sc[0][0], gidx, K, N, G, NG, bits, 2, out) == -1;
        gidx[7] = -1;
        ok = ok && qtk_dequant_gptq(gq, gz, &sc[0][0], gidx, K, N, G, NG, bits, 2, out) == -1;
        snprintf(msg, sizeof msg, "GPTQ %u-bit rejects g_idx outside [0, ngroups)", bits);
        check(ok, msg);
    }

    /* §11: 3-bit codes k mod 8 for k = 0..31 pack to 0x88FAC688 0xC688FAC6 0xFAC688FA. Use 32
     * identical columns (3-bit qzeros need N*3 % 32 == 0); zero stored 0 (v2), scale 1. */
    {
        static int32_t qw3[3 * 32], qz3[3];
        static uint16_t s3[32];
        static float o3[32 * 32];
        static const uint32_t words[3] = { 0x88FAC688u, 0xC688FAC6u, 0xFAC688FAu };
        for (int r = 0; r < 3; r++)
            for (int n = 0; n < 32; n++)
                qw3[r * 32 + n] = (int32_t)words[r];
        for (int n = 0; n < 32; n++)
            s3[n] = 0x3C00;
        ok = qtk_dequant_gptq(qw3, qz3, s3, NULL, 32, 32, 32, 1, 3, 2, o3) == 0;
        for (int n = 0; ok && n < 32; n++)
            for (int k = 0; ok && k < 32; k++)
                ok = o3[n * 32 + k] == (float)(k % 8);
        check(ok, "GPTQ 3-bit cross-word packing matches the AutoGPTQ worked example");
    }
}

/* ================================================================ (b) fixtures: file access */

struct buf {
    uint8_t *p;
    size_t n;
};

/* Read a whole file (at most 1 GiB). Returns 0 on success. */
static int read_file(const char *path, struct buf *b)
{
    b->p = NULL;
    b->n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 20;
    uint8_t *p = malloc(cap);
    size_t n = 0;
    while (p) {
        if (n == cap) {
            if (cap >= (size_t)1 << 30) {
                free(p);
                p = NULL;
                break;
            }
            uint8_t *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                p = NULL;
                break;
            }
            p = q;
            cap *= 2;
        }
        const size_t got = fread(p + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    const int err = ferror(f);
    fclose(f);
    if (!p || err) {
        free(p);
        return -1;
    }
    b->p = p;
    b->n = n;
    return 0;
}

static int join(char *out, size_t cap, const char *a, const char *b)
{
    const int n = snprintf(out, cap, "%s/%s", a, b);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static void sha256_hex(const void *data, size_t n, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    static const char digits[] = "0123456789abcdef";
    if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) || len != 32) {
        hex[0] = 0;
        return;
    }
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = 0;
}

/* Split a line in place at tabs; returns the number of fields (at most max). */
static int split_tabs(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        fields[n++] = p;
        char *t = strchr(p, '\t');
        if (!t)
            break;
        *t = 0;
        p = t + 1;
    }
    return n;
}

/* Next line of a text buffer (modified in place: newline replaced by NUL). */
static char *next_line(char **cursor, char *end)
{
    char *p = *cursor;
    if (p >= end)
        return NULL;
    char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl) {
        *nl = 0;
        *cursor = nl + 1;
    } else {
        *end = 0;
        *cursor = end;
    }
    size_t len = strlen(p);
    if (len && p[len - 1] == '\r')
        p[len - 1] = 0;
    return p;
}

/* ================================================================ (b) minimal GGUF reader */

struct cur {
    const uint8_t *p;
    size_t n, off;
    int bad;
};

static const uint8_t *take(struct cur *c, size_t k)
{
    if (c->bad || k > c->n - c->off) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *p = c->p + c->off;
    c->off += k;
    return p;
}

static uint64_t get_le(struct cur *c, size_t k)
{
    const uint8_t *p = take(c, k);
    uint64_t v = 0;
    for (size_t i = 0; p && i < k; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

struct gguf_tensor {
    char name[96];
    unsigned type;
    uint64_t ne[4];
    unsigned nd;
    uint64_t offset;
};

struct gguf {
    struct gguf_tensor *t;
    uint64_t nt;
    uint64_t data_start;
};

static const size_t k_kv_size[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

/* Skip one metadata value of type vt (arrays of scalars and strings; no nested arrays). */
static void skip_value(struct cur *c, uint32_t vt, uint32_t *u32_out)
{
    if (vt == 8) {
        const uint64_t len = get_le(c, 8);
        take(c, (size_t)len);
    } else if (vt == 9) {
        const uint32_t et = (uint32_t)get_le(c, 4);
        const uint64_t cnt = get_le(c, 8);
        if (et == 9 || et > 12 || cnt > c->n) {
            c->bad = 1;
        } else if (et == 8) {
            for (uint64_t i = 0; i < cnt && !c->bad; i++)
                skip_value(c, 8, NULL);
        } else {
            take(c, (size_t)(cnt * k_kv_size[et]));
        }
    } else if (vt <= 12) {
        const uint64_t v = get_le(c, k_kv_size[vt]);
        if (u32_out && (vt == 4 || vt == 5))
            *u32_out = (uint32_t)v;
    } else {
        c->bad = 1;
    }
}

static int gguf_parse(const struct buf *f, struct gguf *g)
{
    struct cur c = { f->p, f->n, 0, 0 };
    g->t = NULL;
    const uint8_t *magic = take(&c, 4);
    if (!magic || memcmp(magic, "GGUF", 4) != 0)
        return -1;
    const uint32_t ver = (uint32_t)get_le(&c, 4);
    const uint64_t nt = get_le(&c, 8), nkv = get_le(&c, 8);
    if (c.bad || (ver != 2 && ver != 3) || nt > 100000 || nkv > 100000)
        return -1;
    uint32_t align = 32;
    for (uint64_t i = 0; i < nkv && !c.bad; i++) {
        const uint64_t klen = get_le(&c, 8);
        const uint8_t *key = take(&c, (size_t)klen);
        const uint32_t vt = (uint32_t)get_le(&c, 4);
        uint32_t v = 0;
        skip_value(&c, vt, &v);
        if (key && klen == 17 && memcmp(key, "general.alignment", 17) == 0 && vt == 4)
            align = v;
    }
    if (c.bad || align == 0 || (align & (align - 1)) != 0)
        return -1;
    g->t = calloc(nt ? (size_t)nt : 1, sizeof *g->t);
    if (!g->t)
        return -1;
    g->nt = nt;
    for (uint64_t i = 0; i < nt && !c.bad; i++) {
        struct gguf_tensor *t = &g->t[i];
        const uint64_t len = get_le(&c, 8);
        const uint8_t *nm = take(&c, (size_t)len);
        if (!nm || len >= sizeof t->name) {
            c.bad = 1;
            break;
        }
        memcpy(t->name, nm, (size_t)len);
        t->name[len] = 0;
        t->nd = (unsigned)get_le(&c, 4);
        if (t->nd == 0 || t->nd > 4) {
            c.bad = 1;
            break;
        }
        for (unsigned d = 0; d < t->nd; d++)
            t->ne[d] = get_le(&c, 8);
        t->type = (unsigned)get_le(&c, 4);
        t->offset = get_le(&c, 8);
    }
    if (c.bad) {
        free(g->t);
        g->t = NULL;
        return -1;
    }
    g->data_start = (c.off + align - 1) / align * align;
    return 0;
}

/* ggml type names as printed in the digest files. */
static const char *const k_type_names[43] = {
    [0] = "f32", [1] = "f16", [2] = "q4_0", [3] = "q4_1", [6] = "q5_0", [7] = "q5_1",
    [8] = "q8_0", [9] = "q8_1", [10] = "q2_K", [11] = "q3_K", [12] = "q4_K", [13] = "q5_K",
    [14] = "q6_K", [15] = "q8_K", [16] = "iq2_xxs", [17] = "iq2_xs", [18] = "iq3_xxs",
    [19] = "iq1_s", [20] = "iq4_nl", [21] = "iq3_s", [22] = "iq2_s", [23] = "iq4_xs",
    [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64", [28] = "f64", [29] = "iq1_m",
    [30] = "bf16", [34] = "tq1_0", [35] = "tq2_0", [39] = "mxfp4", [40] = "nvfp4",
    [41] = "q1_0", [42] = "q2_0",
};

/* Per-type tallies over all GGUF fixtures, for the summary. */
static unsigned g_type_ok[43], g_type_all[43];

/* Check every tensor listed in one tiny-<X>.digest.tsv against tiny-<X>.gguf. */
static void check_gguf_fixture(const char *dir, const char *stem)
{
    char path[1024], fname[256], msg[512];
    snprintf(fname, sizeof fname, "%s.gguf", stem);
    struct buf f, tsv;
    struct gguf g;
    if (join(path, sizeof path, dir, fname) || read_file(path, &f)) {
        snprintf(msg, sizeof msg, "%s: readable", fname);
        check(0, msg);
        return;
    }
    snprintf(fname, sizeof fname, "%s.digest.tsv", stem);
    if (join(path, sizeof path, dir, fname) || read_file(path, &tsv)) {
        free(f.p);
        snprintf(msg, sizeof msg, "%s: readable", fname);
        check(0, msg);
        return;
    }
    if (gguf_parse(&f, &g)) {
        snprintf(msg, sizeof msg, "%s.gguf: header parses", stem);
        check(0, msg);
        free(f.p);
        free(tsv.p);
        return;
    }
    unsigned ok_by_type[43] = { 0 }, all_by_type[43] = { 0 };
    unsigned rows = 0, missing = 0;
    char *tp = malloc(tsv.n + 1);
    if (!tp) {
        free(f.p);
        free(tsv.p);
        free(g.t);
        return;
    }
    memcpy(tp, tsv.p, tsv.n);
    tp[tsv.n] = 0;
    char *cursor = tp, *end = tp + tsv.n, *line;
    while ((line = next_line(&cursor, end))) {
        char *fld[8];
        if (!*line || split_tabs(line, fld, 8) < 5)
            continue;
        rows++;
        const struct gguf_tensor *t = NULL;
        for (uint64_t i = 0; i < g.nt; i++)
            if (strcmp(g.t[i].name, fld[0]) == 0)
                t = &g.t[i];
        if (!t || t->type >= 43 || !k_type_names[t->type]
            || strcmp(k_type_names[t->type], fld[1]) != 0) {
            missing++;
            printf("  %s: tensor %s (%s) not found or type differs\n", stem, fld[0], fld[1]);
            continue;
        }
        uint64_t n = 1;
        for (unsigned d = 0; d < t->nd; d++)
            n *= t->ne[d];
        uint32_t be = 0, bb = 0;
        const int known = qtk_ggml_block_info(t->type, &be, &bb) == 0;
        const uint64_t bytes = known ? n / be * bb : 0;
        const uint64_t at = g.data_start + t->offset;
        all_by_type[t->type]++;
        char hex[65] = "";
        if (known && n % be == 0 && at <= f.n && bytes <= f.n - at
            && strtoull(fld[3], NULL, 10) == bytes) {
            float *y = malloc((size_t)n * sizeof *y);
            if (y && qtk_dequant_ggml(t->type, f.p + at, y, n) == 0)
                sha256_hex(y, (size_t)n * sizeof *y, hex);
            free(y);
        }
        if (strcmp(hex, fld[4]) == 0)
            ok_by_type[t->type]++;
        else
            printf("  %s: %s (%s) sha256 %s, want %s\n", stem, t->name, fld[1],
                   hex[0] ? hex : "(not decoded)", fld[4]);
    }
    snprintf(msg, sizeof msg, "%s.gguf: all %u digest rows name a tensor of the listed type",
             stem, rows);
    check(rows > 0 && missing == 0, msg);
    for (unsigned ty = 0; ty < 43; ty++) {
        if (!all_by_type[ty])
            continue;
        g_type_ok[ty] += ok_by_type[ty];
        g_type_all[ty] += all_by_type[ty];
        snprintf(msg, sizeof msg, "%s.gguf: %s %u/%u tensors bit-exact", stem, k_type_names[ty],
                 ok_by_type[ty], all_by_type[ty]);
        check(ok_by_type[ty] == all_by_type[ty], msg);
    }
    free(tp);
    free(g.t);
    free(f.p);
    free(tsv.p);
}

/* ================================================================ (b) minimal safetensors reader */

struct st_tensor {
    char name[128];
    char dtype[8];
    uint64_t shape[4];
    unsigned nd;
    uint64_t begin, end;
};

struct st {
    struct st_tensor *t;
    size_t nt, cap;
    const uint8_t *data;
    size_t data_len;
};

struct jp {
    const char *s;
    size_t n, i;
    int bad;
};

static void jws(struct jp *j)
{
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\n' || j->s[j->i] == '\r'
                           || j->s[j->i] == '\t'))
        j->i++;
}

static int jpeek(struct jp *j)
{
    jws(j);
    return j->i < j->n ? (unsigned char)j->s[j->i] : -1;
}

static int jexpect(struct jp *j, char ch)
{
    if (jpeek(j) != (unsigned char)ch) {
        j->bad = 1;
        return 0;
    }
    j->i++;
    return 1;
}

/* String into out (raw bytes, escapes kept as-is except \" and \\); truncation marks bad. */
static void jstring(struct jp *j, char *out, size_t cap)
{
    size_t k = 0;
    if (!jexpect(j, '"'))
        return;
    while (j->i < j->n && j->s[j->i] != '"') {
        char ch = j->s[j->i++];
        if (ch == '\\' && j->i < j->n)
            ch = j->s[j->i++];
        if (out) {
            if (k + 1 >= cap) {
                j->bad = 1;
                return;
            }
            out[k++] = ch;
        }
    }
    if (out && cap)
        out[k] = 0;
    if (!jexpect(j, '"'))
        j->bad = 1;
}

static uint64_t jnumber(struct jp *j)
{
    jws(j);
    uint64_t v = 0;
    size_t start = j->i;
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
        v = v * 10 + (uint64_t)(j->s[j->i] - '0');
        j->i++;
    }
    if (j->i == start || j->i - start > 18)
        j->bad = 1;
    return v;
}

static void jskip(struct jp *j, int depth)
{
    const int c = jpeek(j);
    if (depth > 32 || c < 0) {
        j->bad = 1;
    } else if (c == '"') {
        jstring(j, NULL, 0);
    } else if (c == '{' || c == '[') {
        const char close = c == '{' ? '}' : ']';
        j->i++;
        if (jpeek(j) == close) {
            j->i++;
            return;
        }
        while (!j->bad) {
            if (c == '{') {
                jstring(j, NULL, 0);
                jexpect(j, ':');
            }
            jskip(j, depth + 1);
            if (jpeek(j) == ',') {
                j->i++;
                continue;
            }
            jexpect(j, close);
            break;
        }
    } else {
        while (j->i < j->n && j->s[j->i] != ',' && j->s[j->i] != '}' && j->s[j->i] != ']')
            j->i++;
    }
}

/* Array of up to `max` unsigned integers; returns the count. */
static unsigned jarray(struct jp *j, uint64_t *v, unsigned max)
{
    unsigned k = 0;
    if (!jexpect(j, '['))
        return 0;
    if (jpeek(j) == ']') {
        j->i++;
        return 0;
    }
    while (!j->bad) {
        const uint64_t x = jnumber(j);
        if (k < max)
            v[k++] = x;
        else
            j->bad = 1;
        if (jpeek(j) == ',') {
            j->i++;
            continue;
        }
        jexpect(j, ']');
        break;
    }
    return k;
}

static int st_parse(const struct buf *f, struct st *st)
{
    memset(st, 0, sizeof *st);
    if (f->n < 8)
        return -1;
    uint64_t hl = 0;
    for (int k = 0; k < 8; k++)
        hl |= (uint64_t)f->p[k] << (8 * k);
    if (hl > f->n - 8 || hl > (100u << 20))
        return -1;
    struct jp j = { (const char *)f->p + 8, (size_t)hl, 0, 0 };
    st->data = f->p + 8 + hl;
    st->data_len = f->n - 8 - (size_t)hl;
    if (!jexpect(&j, '{'))
        return -1;
    while (!j.bad && jpeek(&j) != '}') {
        char key[128];
        jstring(&j, key, sizeof key);
        jexpect(&j, ':');
        if (j.bad)
            break;
        if (strcmp(key, "__metadata__") == 0) {
            jskip(&j, 0);
        } else {
            if (st->nt == st->cap) {
                const size_t nc = st->cap ? st->cap * 2 : 64;
                struct st_tensor *nt = realloc(st->t, nc * sizeof *nt);
                if (!nt) {
                    j.bad = 1;
                    break;
                }
                st->t = nt;
                st->cap = nc;
            }
            struct st_tensor *t = &st->t[st->nt];
            memset(t, 0, sizeof *t);
            memcpy(t->name, key, sizeof t->name);
            uint64_t offs[2] = { 0, 0 };
            unsigned noffs = 0;
            jexpect(&j, '{');
            while (!j.bad && jpeek(&j) != '}') {
                char fk[32];
                jstring(&j, fk, sizeof fk);
                jexpect(&j, ':');
                if (strcmp(fk, "dtype") == 0)
                    jstring(&j, t->dtype, sizeof t->dtype);
                else if (strcmp(fk, "shape") == 0)
                    t->nd = jarray(&j, t->shape, 4);
                else if (strcmp(fk, "data_offsets") == 0)
                    noffs = jarray(&j, offs, 2);
                else
                    jskip(&j, 1);
                if (jpeek(&j) == ',')
                    j.i++;
            }
            jexpect(&j, '}');
            if (noffs != 2 || offs[0] > offs[1] || offs[1] > st->data_len)
                j.bad = 1;
            t->begin = offs[0];
            t->end = offs[1];
            st->nt++;
        }
        if (jpeek(&j) == ',')
            j.i++;
    }
    if (j.bad) {
        free(st->t);
        st->t = NULL;
        return -1;
    }
    return 0;
}

/* Copy of a tensor's bytes (aligned), checking dtype and element size; NULL if absent. */
static void *st_get(const struct st *st, const char *name, const char *dtype, size_t esize,
                    const struct st_tensor **info)
{
    for (size_t i = 0; i < st->nt; i++) {
        const struct st_tensor *t = &st->t[i];
        if (strcmp(t->name, name) != 0)
            continue;
        uint64_t n = 1;
        for (unsigned d = 0; d < t->nd; d++)
            n *= t->shape[d];
        if (strcmp(t->dtype, dtype) != 0 || t->end - t->begin != n * esize)
            return NULL;
        void *p = malloc(t->end - t->begin ? (size_t)(t->end - t->begin) : 1);
        if (p)
            memcpy(p, st->data + t->begin, (size_t)(t->end - t->begin));
        if (info)
            *info = t;
        return p;
    }
    return NULL;
}

/* Decode every layer in ref/<variant>.digest.tsv from <variant>/model.safetensors. */
static void check_hf_fixture(const char *hfdir, const char *variant)
{
    char path[1024], sub[256], msg[512];
    struct buf f, tsv;
    snprintf(sub, sizeof sub, "%s/model.safetensors", variant);
    if (join(path, sizeof path, hfdir, sub) || read_file(path, &f)) {
        snprintf(msg, sizeof msg, "%s: model.safetensors readable", variant);
        check(0, msg);
        return;
    }
    snprintf(sub, sizeof sub, "ref/%s.digest.tsv", variant);
    if (join(path, sizeof path, hfdir, sub) || read_file(path, &tsv)) {
        free(f.p);
        snprintf(msg, sizeof msg, "%s: digest readable", variant);
        check(0, msg);
        return;
    }
    struct st st;
    if (st_parse(&f, &st)) {
        free(f.p);
        free(tsv.p);
        snprintf(msg, sizeof msg, "%s: safetensors header parses", variant);
        check(0, msg);
        return;
    }
    const int awq = strncmp(variant, "awq-", 4) == 0;
    unsigned bits = 4, group = 128;
    if (awq) {
        group = (unsigned)strtoul(variant + 5, NULL, 10);
    } else {
        char *e;
        bits = (unsigned)strtoul(variant + 5, &e, 10);
        group = (unsigned)strtoul(e + 1, NULL, 10);
    }
    char *tp = malloc(tsv.n + 1);
    unsigned rows = 0, good = 0, rows_ok = 0, rows_n = 0;
    if (tp) {
        memcpy(tp, tsv.p, tsv.n);
        tp[tsv.n] = 0;
    }
    char *cursor = tp, *end = tp ? tp + tsv.n : tp, *line;
    while (tp && (line = next_line(&cursor, end))) {
        char *fld[8];
        if (!*line || split_tabs(line, fld, 8) < 3 || strcmp(fld[0], "name") == 0)
            continue;
        rows++;
        char nq[200], nz[200], ns[200], ng[200];
        snprintf(nq, sizeof nq, "%s.qweight", fld[0]);
        snprintf(nz, sizeof nz, "%s.qzeros", fld[0]);
        snprintf(ns, sizeof ns, "%s.scales", fld[0]);
        snprintf(ng, sizeof ng, "%s.g_idx", fld[0]);
        const struct st_tensor *tq = NULL, *tz = NULL, *ts = NULL, *tg = NULL;
        int32_t *qw = st_get(&st, nq, "I32", 4, &tq);
        int32_t *qz = st_get(&st, nz, "I32", 4, &tz);
        uint16_t *sc = st_get(&st, ns, "F16", 2, &ts);
        int32_t *gi = awq ? NULL : st_get(&st, ng, "I32", 4, &tg);
        char hex[65] = "";
        const uint64_t n = strtoull(fld[1], NULL, 10);
        if (qw && qz && sc && tq->nd == 2 && ts->nd == 2 && n > 0 && n < (1u << 28)) {
            float *y = malloc((size_t)n * sizeof *y);
            int rc = -1;
            if (awq) {
                const uint32_t in = (uint32_t)tq->shape[0], out = (uint32_t)tq->shape[1] * 8;
                if ((uint64_t)in * out == n && ts->shape[1] == out
                    && ts->shape[0] * group == in && y)
                    rc = qtk_dequant_awq(qw, qz, sc, in, out, group, y);
            } else {
                const uint32_t in = (uint32_t)(tq->shape[0] * 32 / bits);
                const uint32_t out = (uint32_t)tq->shape[1];
                const uint32_t ngr = (uint32_t)ts->shape[0];
                if ((uint64_t)in * out == n && ts->shape[1] == out && y
                    && (!gi || (tg->nd == 1 && tg->shape[0] == in)))
                    rc = qtk_dequant_gptq(qw, qz, sc, gi, in, out, group, ngr, bits, 1, y);
            }
            if (rc == 0)
                sha256_hex(y, (size_t)n * sizeof *y, hex);
            /* the same values decoded in slices of output features (qtk_dequant_*_rows) */
            float *y2 = rc == 0 ? malloc((size_t)n * sizeof *y2) : NULL;
            if (y2) {
                const uint32_t in = awq ? (uint32_t)tq->shape[0] : (uint32_t)(tq->shape[0] * 32 / bits);
                const uint32_t out = awq ? (uint32_t)tq->shape[1] * 8 : (uint32_t)tq->shape[1];
                const uint32_t step = awq ? 40 : 64; /* slices that do not divide out evenly */
                int r2 = 0;
                for (uint32_t o0 = 0; o0 < out && !r2; o0 += step) {
                    const uint32_t k = out - o0 < step ? out - o0 : step;
                    r2 = awq ? qtk_dequant_awq_rows(qw, qz, sc, in, out, group, o0, k, y2 + (uint64_t)o0 * in)
                             : qtk_dequant_gptq_rows(qw, qz, sc, gi, in, out, group, (uint32_t)ts->shape[0], bits,
                                                     1, o0, k, y2 + (uint64_t)o0 * in);
                }
                rows_ok += r2 == 0 && memcmp(y, y2, (size_t)n * sizeof *y) == 0;
                rows_n++;
                free(y2);
            }
            free(y);
        }
        if (strcmp(hex, fld[2]) == 0)
            good++;
        else
            printf("  %s: %s sha256 %s, want %s\n", variant, fld[0],
                   hex[0] ? hex : "(not decoded)", fld[2]);
        free(qw);
        free(qz);
        free(sc);
        free(gi);
    }
    snprintf(msg, sizeof msg, "%s: %u/%u linear layers bit-exact", variant, good, rows);
    check(rows > 0 && good == rows, msg);
    snprintf(msg, sizeof msg, "%s: %u/%u layers decode the same in slices of output features", variant, rows_ok,
             rows_n);
    check(rows_n > 0 && rows_ok == rows_n, msg);
    free(tp);
    free(st.t);
    free(f.p);
    free(tsv.p);
}

static void test_fixtures(void)
{
    const char *root = getenv("QTK_FIXTURES");
    if (!root || !*root)
        root = "../shared/fixtures";
    char gdir[1024], hdir[1024], probe[1100];
    if (join(gdir, sizeof gdir, root, "gguf") || join(hdir, sizeof hdir, root, "hf/tiny-llama"))
        return;
    struct buf b;
    if (join(probe, sizeof probe, gdir, "tiny-f32.digest.tsv") || read_file(probe, &b)) {
        printf("skipped: fixtures absent (%s)\n", root);
        return;
    }
    free(b.p);
    static const char *const gg[] = {
        "tiny-f32", "tiny-F16", "tiny-BF16", "tiny-Q8_0", "tiny-Q4_0", "tiny-Q4_1", "tiny-Q5_0",
        "tiny-Q5_1", "tiny-Q2_K", "tiny-Q3_K_S", "tiny-Q3_K_M", "tiny-Q4_K_S", "tiny-Q4_K_M",
        "tiny-Q5_K_M", "tiny-Q6_K", "tiny-IQ4_NL", "tiny-IQ4_XS", "tiny-IQ3_S", "tiny-TQ2_0",
        "tiny-IQ1_S", "tiny-IQ1_M", "tiny-IQ2_XXS", "tiny-IQ2_XS", "tiny-IQ2_S", "tiny-IQ3_XXS",
    };
    for (size_t i = 0; i < sizeof gg / sizeof gg[0]; i++)
        check_gguf_fixture(gdir, gg[i]);
    for (unsigned ty = 0; ty < 43; ty++)
        if (g_type_all[ty])
            printf("  summary: %-8s %u/%u tensors bit-exact over all GGUF fixtures\n",
                   k_type_names[ty], g_type_ok[ty], g_type_all[ty]);

    static const char *const hf[] = {
        "awq-g128", "gptq-4-128-0", "gptq-4-128-1", "gptq-8-128-0", "gptq-3-128-0",
        "gptq-2-64-0", "gptq-4-32-1s",
    };
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++)
        check_hf_fixture(hdir, hf[i]);
}

int main(void)
{
    test_fp16();
    test_plain();
    test_legacy();
    test_ternary();
    test_kquants();
    test_iquants();
    test_awq_gptq();
    test_fixtures();
    printf("%u passed, %u failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
