/* enc.c - make bench's encoder figures: each ggml type qtk writes, encoded from the same
 * pseudo-random F32 matrix (1024 x 4096, sums of uniforms: roughly Gaussian, as weights are) on
 * one thread with no file, no record and no check around it, the best of five runs in
 * nanoseconds per value. A change in an encoder's speed shows here undisturbed by I/O and
 * hashing; the digest of its output says whether its bytes changed too. Not a test: nothing
 * is compared against a limit. Output: one JSON object per line. Arguments, if any, name the
 * types to run (for a profile of one encoder); none runs them all. Besides the ggml types: awq
 * (AutoAWQ 4-bit, groups of 128 along the 4096 inputs) from the same matrix, and awq-g32-q4k
 * (groups of 32) from its q4_k decoding, the re-fit of a k-quant source. */
#include "qtk.h"
#include "quant.h"
#include "dequant.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 1024, COLS = 4096 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    static const struct { unsigned t; const char *name; } types[] = {
        { QTK_T_Q4_0, "q4_0" }, { QTK_T_Q4_1, "q4_1" },     { QTK_T_Q5_0, "q5_0" },
        { QTK_T_Q5_1, "q5_1" }, { QTK_T_Q8_0, "q8_0" },     { QTK_T_Q2_K, "q2_k" },
        { QTK_T_Q3_K, "q3_k" }, { QTK_T_Q4_K, "q4_k" },     { QTK_T_Q5_K, "q5_k" },
        { QTK_T_Q6_K, "q6_k" }, { QTK_T_IQ4_NL, "iq4_nl" }, { QTK_T_IQ4_XS, "iq4_xs" },
    };
    const size_t n = (size_t)ROWS * COLS;
    float *x = malloc(n * sizeof *x);
    uint8_t *q = malloc(n * 2); /* more than any of these types takes */
    if (!x || !q)
        return 1;
    uint64_t s = 0x656e632d62656e63ull;
    for (size_t i = 0; i < n; i++) {
        float a = 0.f;
        for (int k = 0; k < 4; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            a += (float)(s >> 40) / 16777216.f;
        }
        x[i] = (a - 2.f) * 0.05f;
    }
    /* AWQ re-fits: the matrix as [out = ROWS][in = COLS] */
    static const struct { const char *name; uint32_t group; bool from_q4k; } awq[] = {
        { "awq", 128, false }, { "awq-g32-q4k", 32, true },
    };
    for (size_t k = 0; k < sizeof awq / sizeof awq[0]; k++) {
        bool want = argc < 2;
        for (int a = 1; a < argc && !want; a++)
            want = strcmp(argv[a], awq[k].name) == 0;
        if (!want)
            continue;
        const uint32_t g = awq[k].group, ng = COLS / g;
        float *src = x, *dq = NULL;
        if (awq[k].from_q4k) {
            dq = malloc(n * sizeof *dq);
            if (!dq || qtk_quant_ggml(QTK_T_Q4_K, x, q, ROWS, COLS, NULL) != 0 ||
                qtk_dequant_ggml(QTK_T_Q4_K, q, dq, n) != 0)
                return 1;
            src = dq;
        }
        int32_t *qw = malloc((size_t)COLS * (ROWS / 8) * 4), *qz = malloc((size_t)ng * (ROWS / 8) * 4);
        uint16_t *sc = malloc((size_t)ng * ROWS * 2);
        if (!qw || !qz || !sc)
            return 1;
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            const double t0 = now();
            if (qtk_quant_awq(src, ROWS, COLS, g, qw, qz, sc) != 0) {
                fprintf(stderr, "enc: %s failed\n", awq[k].name);
                return 1;
            }
            const double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        uint64_t h = 0xcbf29ce484222325ull;
        const uint8_t *parts[3] = { (const uint8_t *)qw, (const uint8_t *)qz, (const uint8_t *)sc };
        const size_t sizes[3] = { (size_t)COLS * (ROWS / 8) * 4, (size_t)ng * (ROWS / 8) * 4,
                                  (size_t)ng * ROWS * 2 };
        for (int p = 0; p < 3; p++)
            for (size_t i = 0; i < sizes[p]; i++)
                h = (h ^ parts[p][i]) * 0x100000001b3ull;
        printf("{\"type\": \"%s\", \"ns_per_value\": %.2f, \"digest\": \"%016llx\"}\n", awq[k].name,
               best * 1e9 / (double)n, (unsigned long long)h);
        free(qw);
        free(qz);
        free(sc);
        free(dq);
    }
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        bool want = argc < 2;
        for (int a = 1; a < argc && !want; a++)
            want = strcmp(argv[a], types[k].name) == 0;
        if (!want)
            continue;
        uint64_t bytes;
        if (qtk_type_nbytes(types[k].t, n, &bytes) || bytes > n * 2)
            return 1;
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            const double t0 = now();
            if (qtk_quant_ggml(types[k].t, x, q, ROWS, COLS, NULL) != 0) {
                fprintf(stderr, "enc: %s failed\n", types[k].name);
                return 1;
            }
            const double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        uint64_t h = 0xcbf29ce484222325ull;
        for (uint64_t i = 0; i < bytes; i++)
            h = (h ^ q[i]) * 0x100000001b3ull;
        printf("{\"type\": \"%s\", \"ns_per_value\": %.2f, \"digest\": \"%016llx\"}\n", types[k].name,
               best * 1e9 / (double)n, (unsigned long long)h);
    }
    free(x);
    free(q);
    return 0;
}
