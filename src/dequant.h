/* dequant.h - bit-exact decoding of quantized weights to F32.
 *
 * ggml block types follow ggml's scalar reference (dequantize_row_*) operation by operation;
 * AWQ-GEMM and GPTQ follow AutoAWQ's unpacker and the way engines load GPTQ checkpoints.
 * Build with -ffp-contract=off: a fused multiply-add would change the rounding. */
#ifndef QTK_DEQUANT_H
#define QTK_DEQUANT_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* fp16/bf16 <-> f32, bit-exact with ggml's reference (ggml_compute_fp16_to_fp32 scalar path;
 * round-to-nearest-even for f32->fp16) */
float qtk_fp16_to_f32(uint16_t h);
uint16_t qtk_f32_to_fp16(float f);
float qtk_bf16_to_f32(uint16_t h);
uint16_t qtk_f32_to_bf16(float f);   /* ggml's rounding incl. NaN handling */

/* F16 -> F32 of n values with the F16C instruction (dequant_f16c.c; when it was not built with
 * F16C, qtk_dq_f16c_built() is false and qtk_dq_f16_f16c converts in plain C). Internal: the F16
 * decoder calls it when the CPU has F16C and AVX2 and QTK_SIMD is not "generic". */
bool qtk_dq_f16c_built(void);
void qtk_dq_f16_f16c(const uint8_t *restrict x, float *restrict y, uint64_t n);

/* Decode n elements of ggml type id `type` (ggml enum ids: F32=0 F16=1 Q4_0=2 ... BF16=30
 * TQ1_0=34 TQ2_0=35 MXFP4=39 NVFP4=40 Q1_0=41 Q2_0=42, I8=24..I64=27, F64=28) from
 * little-endian bytes `src` into dst. n must be a multiple of the type's block size. Returns 0,
 * or -1 when the type has no decoder (Q8_1, Q8_K, removed or unknown ids). Follows ggml's
 * reference operation order exactly (build uses -ffp-contract=off), so results are
 * bit-identical to ggml's dequantize_row_* scalar code. */
int qtk_dequant_ggml(unsigned type, const void *src, float *dst, uint64_t n);

/* Block geometry of ggml type id `type`: elements per block and bytes per block, as in ggml's
 * type_traits (also for Q8_1/Q8_K, which have no decoder). Returns 0, or -1 for removed or
 * unknown ids (outputs untouched). */
int qtk_ggml_block_info(unsigned type, uint32_t *blck_elems, uint32_t *blck_bytes);

/* 1 when qtk_dequant_ggml can decode `type`, else 0. */
int qtk_dequant_ggml_supported(unsigned type);

/* AutoAWQ GEMM: qweight int32 [in][out/8] (nibble order 0,2,4,6,1,3,5,7 within each int32),
 * qzeros int32 [in/group][out/8] same order, scales fp16 [in/group][out]. Writes dst in HF
 * orientation [out][in]: dst[o*in + i] = (q - z) * s computed in F32 as AutoAWQ's reference
 * does. Returns 0, or -1 on bad parameters (in % group != 0, out % 8 != 0 ...).
 * Also -1 when scratch memory (4 bytes per scale) cannot be allocated. */
int qtk_dequant_awq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                    uint32_t in, uint32_t out, uint32_t group, float *dst);

/* GPTQ (AutoGPTQ packing): bits in {2,3,4,8}; qweight int32 [in*bits/32][out] (packed along
 * in), qzeros int32 [ngroups][out*bits/32] (packed along out), scales fp16 [ngroups][out],
 * g_idx int32 [in] or NULL (then g = i / group). version 1: zero = stored + 1 with NO
 * wrap-around (so stored 2^bits-1 decodes as 2^bits), as vLLM/exllama load v1; version 2:
 * zero = stored. 3-bit uses AutoGPTQ's cross-word packing. dst [out][in]. Returns 0, or -1 on
 * bad params or a g_idx entry out of range [0, ngroups).
 * Also -1 when in % 32 != 0 or out*bits % 32 != 0 (AutoGPTQ/GPTQModel layouts need both), or
 * when scratch memory (8 bytes per group*out entry) cannot be allocated. */
int qtk_dequant_gptq(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                     const int32_t *g_idx, uint32_t in, uint32_t out, uint32_t group,
                     uint32_t ngroups, unsigned bits, int version, float *dst);

/* Output features o0 .. o0+n-1 only, into dst [n][in] (the rows of the full decode): AWQ with
 * o0 and n multiples of 8, GPTQ with o0*bits and n*bits multiples of 32 (whole qzeros words).
 * Same values as the whole decode;
 * memory is the slice's. 0, or -1 on bad arguments or allocation failure. */
int qtk_dequant_awq_rows(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                         uint32_t in, uint32_t out, uint32_t group, uint32_t o0, uint32_t n, float *dst);
int qtk_dequant_gptq_rows(const int32_t *qweight, const int32_t *qzeros, const uint16_t *scales,
                          const int32_t *g_idx, uint32_t in, uint32_t out, uint32_t group,
                          uint32_t ngroups, unsigned bits, int version, uint32_t o0, uint32_t n,
                          float *dst);

/* Internal: per-type decoders of whole blocks, shared between dequant.c and dequant_iq.c.
 * `src` points at nblocks packed blocks (any alignment); writes nblocks*256 floats (32 for
 * IQ4_NL). Callers outside the dequant files use qtk_dequant_ggml instead. */
void qtk_dq_iq2_xxs(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq2_xs(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq2_s(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq3_xxs(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq3_s(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq1_s(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq1_m(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq4_nl(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
void qtk_dq_iq4_xs(const uint8_t *restrict src, float *restrict dst, uint64_t nblocks);
/* IQ4_NL / IQ4_XS codebook: the 16 integers a code stands for (the decoders multiply them by the
 * block's or sub-block's scale) */
extern const int8_t *const qtk_iq4nl_codebook;

/* Q3_K's sixteen 6-bit sub-block scales (stored +32) from its 12-byte field b. */
static inline void qtk_q3k_scales(const uint8_t *b, int *sc)
{
    for (int k = 0; k < 4; k++) {
        sc[k] = (b[k] & 0xF) | ((b[8 + k] & 3) << 4);
        sc[4 + k] = (b[4 + k] & 0xF) | (((b[8 + k] >> 2) & 3) << 4);
        sc[8 + k] = (b[k] >> 4) | (((b[8 + k] >> 4) & 3) << 4);
        sc[12 + k] = (b[4 + k] >> 4) | ((b[8 + k] >> 6) << 4);
    }
}

/* ggml get_scale_min_k4: Q4_K/Q5_K's 6-bit scale and min j (0..7) from the 12-byte field q. */
static inline void qtk_k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#endif /* QTK_DEQUANT_H */
