/* dequant_awq.c - AutoAWQ GEMM and GPTQ (v1/v2, 2/3/4/8-bit, g_idx) decoded to F32 in HF
 * orientation [out][in].
 *
 * Both compute (q - z) * s with the integer difference converted to float and the fp16 scale
 * widened to F32, as AutoAWQ's dequantize_gemm and the engines' GPTQ loaders do. For every
 * supported width the product is exact in F32 (|q - z| <= 256, 11-bit scale mantissa), so the
 * result does not depend on evaluation order.
 *
 * Packed words are int32 tensors stored little-endian; the host is little-endian, so they are
 * read as native values and reinterpreted as uint32_t for logical shifts. */
#include "dequant.h"
#include "packing.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>


/* Rows decoded per pass: each output row receives a contiguous run of this many floats. */
#define ROWS 32
/* Packed words (AWQ) or output columns (GPTQ) per tile; bounds the set of output rows being
 * written at once (page/TLB locality). */
#define COLW 8
#define COLS 64

/* All fp16 scales widened once: n entries. NULL on allocation failure. */
static float *widen_scales(const uint16_t *scales, uint64_t n)
{
    if (n > SIZE_MAX / sizeof(float))
        return NULL;
    float *f = malloc(n ? (size_t)n * sizeof *f : 1);
    if (f)
        for (uint64_t k = 0; k < n; k++)
            f[k] = qtk_fp16_to_f32(scales[k]);
    return f;
}

int qtk_dequant_awq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                    uint32_t in, uint32_t out, uint32_t group, float *dst)
{
    if (!qweight || !qzeros || !scales || !dst || group == 0 || in % group != 0 || out % 8 != 0)
        return -1;
    const uint64_t words = out / 8;      /* int32 per qweight / qzeros row */
    float *sf = widen_scales(scales, (uint64_t)(in / group) * out);
    if (!sf)
        return -1;
    /* Blocks of COLW words (8*COLW output rows) walk down all input rows, so the writes stay
     * within a few dozen output rows at a time. */
    for (uint64_t c0 = 0; c0 < words; c0 += COLW) {
        const uint64_t c1 = words - c0 < COLW ? words : c0 + COLW;
        for (uint32_t i0 = 0; i0 < in; i0 += ROWS) {
            const uint32_t rows = in - i0 < ROWS ? in - i0 : ROWS;
            uint64_t g[ROWS];
            for (uint32_t r = 0; r < rows; r++)
                g[r] = (i0 + r) / group;
            for (uint64_t c = c0; c < c1; c++) {
                uint32_t w[ROWS], z[ROWS];
                for (uint32_t r = 0; r < rows; r++) {
                    w[r] = (uint32_t)qweight[(i0 + r) * words + c];
                    z[r] = (uint32_t)qzeros[g[r] * words + c];
                }
                /* a whole tile in one group: one scale and zero per output row (a fixed count
                 * of rows, so the compiler vectorises the loop) */
                const bool one_group = rows == ROWS && g[0] == g[ROWS - 1];
                for (unsigned j = 0; j < 8; j++) {
                    const unsigned sh = qtk_awq_shift(j);
                    const float *s = sf + 8 * c + j;
                    float *y = dst + (8 * c + j) * (uint64_t)in + i0;
                    if (one_group) {
                        const float sg = s[g[0] * out];
                        const int zg = (int)((z[0] >> sh) & 15u);
                        for (uint32_t r = 0; r < ROWS; r++)
                            y[r] = (float)((int)((w[r] >> sh) & 15u) - zg) * sg;
                        continue;
                    }
                    for (uint32_t r = 0; r < rows; r++) {
                        const int q = (int)((w[r] >> sh) & 15u);
                        const int zz = (int)((z[r] >> sh) & 15u);
                        y[r] = (float)(q - zz) * s[g[r] * out];
                    }
                }
            }
        }
    }
    free(sf);
    return 0;
}

/* `bits`-wide field at bit `sh` of the 64-bit window lo | hi << 32 (3-bit fields straddle). */
static inline unsigned field(uint32_t lo, uint32_t hi, unsigned sh, unsigned bits)
{
    const uint64_t v = (uint64_t)lo | (uint64_t)hi << 32;
    return (unsigned)(v >> sh) & ((1u << bits) - 1u);
}

/* The 32 codes of one column of a 32-row chunk from its `bits` words (LSB-first stream). */
static inline void unpack32(const uint32_t *w, unsigned bits, int *q)
{
    if (bits == 3) {
        for (unsigned r = 0; r < 32; r++) {
            const unsigned pos = 3 * r;
            q[r] = (int)field(w[pos / 32], w[pos / 32 + 1], pos % 32, 3);
        }
    } else {
        const unsigned per = 32 / bits, mask = (1u << bits) - 1u;
        for (unsigned k = 0; k < bits; k++)
            for (unsigned t = 0; t < per; t++)
                q[k * per + t] = (int)((w[k] >> (bits * t)) & mask);
    }
}

int qtk_dequant_gptq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                     const int32_t *g_idx, uint32_t in, uint32_t out, uint32_t group,
                     uint32_t ngroups, unsigned bits, int version, float *dst)
{
    if (!qweight || !qzeros || !scales || !dst || ngroups == 0)
        return -1;
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
        return -1;
    if (version != 1 && version != 2)
        return -1;
    if (in % 32 != 0 || ((uint64_t)out * bits) % 32 != 0)
        return -1;
    if (g_idx) {
        for (uint32_t i = 0; i < in; i++)
            if (g_idx[i] < 0 || (uint32_t)g_idx[i] >= ngroups)
                return -1;
    } else if (group == 0 || in == 0 || (in - 1) / group >= ngroups) {
        return -1;
    }

    /* Zeros and scales per (column, group), column-major so one column's groups are adjacent.
     * v1 adds 1 to the stored field without wrap-around. */
    const uint64_t nz = (uint64_t)ngroups * out;
    if (nz > SIZE_MAX / sizeof(int32_t))
        return -1;
    int32_t *zero = malloc((size_t)nz * sizeof *zero);
    float *scale = malloc((size_t)nz * sizeof *scale);
    if (!zero || !scale) {
        free(zero);
        free(scale);
        return -1;
    }
    const uint64_t zwords = (uint64_t)out * bits / 32;   /* int32 per qzeros row */
    const int32_t zoff = version == 1 ? 1 : 0;
    for (uint64_t g = 0; g < ngroups; g++) {
        const int32_t *zr = qzeros + g * zwords;
        for (uint64_t o = 0; o < out; o++) {
            const uint64_t pos = o * bits, wi = pos / 32;
            const uint32_t hi = wi + 1 < zwords ? (uint32_t)zr[wi + 1] : 0;
            zero[o * ngroups + g] = (int32_t)field((uint32_t)zr[wi], hi, (unsigned)(pos % 32), bits) + zoff;
            scale[o * ngroups + g] = qtk_fp16_to_f32(scales[g * out + o]);
        }
    }

    for (uint64_t o0 = 0; o0 < out; o0 += COLS) {
        const uint64_t o1 = out - o0 < COLS ? out : o0 + COLS;
        for (uint32_t c = 0; c < in / 32; c++) {
            /* group of each row of the chunk; `one` >= 0 when the chunk has a single group */
            uint32_t gr[32];
            for (uint32_t r = 0; r < 32; r++)
                gr[r] = g_idx ? (uint32_t)g_idx[c * 32 + r] : (c * 32 + r) / group;
            int64_t one = gr[0];
            for (uint32_t r = 1; r < 32; r++)
                if (gr[r] != gr[0])
                    one = -1;
            const int32_t *wrow = qweight + (uint64_t)c * bits * out;
            for (uint64_t o = o0; o < o1; o++) {
                uint32_t w[9];
                int q[32];
                for (unsigned k = 0; k < bits; k++)
                    w[k] = (uint32_t)wrow[(uint64_t)k * out + o];
                w[bits] = 0;
                switch (bits) {   /* constant widths let the unpack loops unroll */
                case 2: unpack32(w, 2, q); break;
                case 3: unpack32(w, 3, q); break;
                case 4: unpack32(w, 4, q); break;
                default: unpack32(w, 8, q); break;
                }
                const int32_t *zo = zero + o * ngroups;
                const float *so = scale + o * ngroups;
                float *y = dst + o * in + (uint64_t)c * 32;
                if (one >= 0) {
                    const int32_t z = zo[one];
                    const float s = so[one];
                    for (unsigned r = 0; r < 32; r++)
                        y[r] = (float)(q[r] - z) * s;
                } else {
                    for (unsigned r = 0; r < 32; r++)
                        y[r] = (float)(q[r] - zo[gr[r]]) * so[gr[r]];
                }
            }
        }
    }
    free(zero);
    free(scale);
    return 0;
}

/* ---- slices of output features: the slice's own packed arrays, decoded whole ---- */

int qtk_dequant_awq_rows(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                         uint32_t in, uint32_t out, uint32_t group, uint32_t o0, uint32_t n, float *dst)
{
    if (!qweight || !qzeros || !scales || !dst || group == 0 || in % group != 0 || out % 8 != 0 ||
        o0 % 8 != 0 || n == 0 || n % 8 != 0 || o0 > out || n > out - o0)
        return -1;
    const uint64_t words = out / 8, sw = n / 8, ng = in / group;
    int32_t *qw = malloc((size_t)(in * sw) * sizeof *qw), *qz = malloc((size_t)(ng * sw) * sizeof *qz);
    uint16_t *sc = malloc((size_t)(ng * n) * sizeof *sc);
    int rc = -1;
    if (qw && qz && sc) {
        for (uint64_t i = 0; i < in; i++)
            memcpy(qw + i * sw, qweight + i * words + o0 / 8, (size_t)sw * sizeof *qw);
        for (uint64_t g = 0; g < ng; g++) {
            memcpy(qz + g * sw, qzeros + g * words + o0 / 8, (size_t)sw * sizeof *qz);
            memcpy(sc + g * n, scales + g * out + o0, (size_t)n * sizeof *sc);
        }
        rc = qtk_dequant_awq(qw, qz, sc, in, n, group, dst);
    }
    free(qw);
    free(qz);
    free(sc);
    return rc;
}

int qtk_dequant_gptq_rows(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                          const int32_t *g_idx, uint32_t in, uint32_t out, uint32_t group,
                          uint32_t ngroups, unsigned bits, int version, uint32_t o0, uint32_t n,
                          float *dst)
{
    if (!qweight || !qzeros || !scales || !dst || bits == 0 || bits > 8 || in % 32 != 0 ||
        ((uint64_t)out * bits) % 32 != 0 || ((uint64_t)o0 * bits) % 32 != 0 || n == 0 ||
        ((uint64_t)n * bits) % 32 != 0 || o0 > out || n > out - o0)
        return -1;
    const uint64_t wrows = (uint64_t)in / 32 * bits, zw = (uint64_t)out * bits / 32;
    const uint64_t szw = (uint64_t)n * bits / 32, z0 = (uint64_t)o0 * bits / 32;
    int32_t *qw = malloc((size_t)(wrows * n) * sizeof *qw);
    int32_t *qz = malloc((size_t)(ngroups * szw) * sizeof *qz);
    uint16_t *sc = malloc((size_t)ngroups * n * sizeof *sc);
    int rc = -1;
    if (qw && qz && sc) {
        for (uint64_t r = 0; r < wrows; r++)
            memcpy(qw + r * n, qweight + r * out + o0, (size_t)n * sizeof *qw);
        for (uint64_t g = 0; g < ngroups; g++) {
            memcpy(qz + g * szw, qzeros + g * zw + z0, (size_t)szw * sizeof *qz);
            memcpy(sc + g * n, scales + g * out + o0, (size_t)n * sizeof *sc);
        }
        rc = qtk_dequant_gptq(qw, qz, sc, g_idx, in, n, group, ngroups, bits, version, dst);
    }
    free(qw);
    free(qz);
    free(sc);
    return rc;
}
