/* quant.h - encoding F32 into ggml block types (the inverse of dequant.h).
 *
 * Every encoder minimises the (optionally importance-weighted) squared error of the DECODED
 * values, as qtk_dequant_ggml decodes them (fp16 d/dmin, packed sub-scales). ggml's reference
 * choice (quantize_row_*_ref, what llama-quantize writes without an imatrix) is always one of
 * the candidates, so a block is not worse than ggml's: exactly so for q4_0 q4_1 q5_0 q5_1 q8_0
 * q3_k; for q2_k q4_k q5_k q6_k ggml's selection rule is reproduced with sums in a different
 * (4-lane) order: the same decoded block for ~97-98% of superblocks, otherwise a near-tie of
 * ggml's own criterion. With an importance matrix q4_k and q6_k are llama.cpp's choice itself
 * (its weighted fits, float sums in its order: bit for bit). Output is deterministic: plain IEEE +,-,*,/ and sqrtf under
 * -ffp-contract=off, fixed operation order (the SSE2 and plain-C paths give identical bytes),
 * no threads, no mutable globals. */
#ifndef QTK_QUANT_H
#define QTK_QUANT_H

#include <float.h>
#include <stdint.h>
#include <stdbool.h>

/* The encoders give the same bytes on every machine only when float and double expressions
 * round in their own types (SSE2 or NEON maths, not x87's extended precision): their scalar and
 * vector paths rely on it. */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "qtk's encoders need FLT_EVAL_METHOD 0 (on 32-bit x86: -msse2 -mfpmath=sse)"
#endif

/* Quantize nrows rows of n_per_row floats (row-major) into ggml type `type` (QTK_T_* ids).
 * n_per_row must be a multiple of the type's block size. imatrix: NULL, or n_per_row importance
 * weights (llama.cpp imatrix semantics, one per column); the squared error of column c is then
 * weighted by imatrix[c] itself (llama.cpp uses imatrix[c]*sqrt(sigma^2 + x^2) for most types;
 * plain imatrix[c] is the expected output-error weight). Negative, NaN or Inf weights count as
 * 0; a block whose weights are all 0 falls back to uniform weights. Output: nrows * row_bytes
 * bytes. NaN inputs are encoded as 0 and +-Inf as +-1e8 (finite inputs beyond that are clamped
 * too), so any input gives finite, valid blocks. An all-zero block decodes to zeros. Returns 0,
 * or -1 when the type has no encoder or n_per_row is not a multiple of the block size.
 * Thread-safe. */
int qtk_quant_ggml(unsigned type, const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                   const float *imatrix);

/* qtk_quant_ggml with flags. QTK_QUANT_IMATRIX_RUN: the conversion uses an importance matrix,
 * which may have no entry for this tensor (imatrix NULL); q3_k, q4_k, q5_k, q5_1 and q6_k then give
 * llama.cpp's own choice for it too, as they do for every tensor the matrix covers, and q4_1 its
 * full search, as for the covered ones. */
#define QTK_QUANT_IMATRIX_RUN 1u
int qtk_quant_ggml_ex(unsigned type, const float *src, void *dst, uint64_t nrows,
                      uint64_t n_per_row, const float *imatrix, unsigned flags);

/* true when qtk_quant_ggml supports type */
bool qtk_quant_supported(unsigned type);

/* ---- Internal: per-type row encoders behind qtk_quant_ggml's dispatch table (quant.c).
 * Each encodes nblocks consecutive blocks: x = nblocks*blck floats, w = the matching
 * importance weights or NULL, dst = nblocks*blck_bytes bytes. Inputs are raw (the encoder
 * sanitises NaN/Inf itself). To add a type: define a function of this shape in its own file,
 * declare it here and add one row to k_encoders[] in quant.c (whole-matrix encoders with
 * qtk_quant_ggml's signature, like qtk_quant_iq4_nl/xs, go in k_mat_encoders[] instead). */
typedef void (*qtk_qrow_fn)(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);

void qtk_qrow_q2_k(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
void qtk_qrow_q3_k(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
void qtk_qrow_q4_k(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
/* llama.cpp's q4_k choice (quantize_row_q4_K_impl with w, quantize_row_q4_K_ref without), bit
 * for bit */
/* llama.cpp's make_qkx2_quants / make_qkx3_quants (the same sweep; its steps as arguments) for
 * 32 values x under weights w, codes 0..nmax in L (as floats), float sums in its order: the
 * scale is returned, the negated offset in *the_min. */
float qtk_qkx_fit(const float *x, const float *w, int nmax, float rmin, float rdelta, int nstep,
                  float *L, float *the_min);
void qtk_qrow_q4_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
void qtk_qrow_q5_k(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
/* llama.cpp's q5_k choice (quantize_row_q5_K_impl with w, quantize_row_q5_K_ref without), bit
 * for bit */
void qtk_qrow_q5_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
void qtk_qrow_q6_k(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
/* llama.cpp's q6_k choice (quantize_row_q6_K_impl with w, quantize_row_q6_K_ref without), bit
 * for bit */
void qtk_qrow_q6_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);
/* llama.cpp's q3_k choice (quantize_row_q3_K_impl with w, quantize_row_q3_K_ref without), bit
 * for bit */
void qtk_qrow_q3_k_ref(const float *x, const float *w, uint8_t *dst, uint64_t nblocks);

/* The q4_1/q5_1 search of two blocks of QTK_ASYM_QB values at once (quant_asym.h), generic
 * (quant.c) and AVX2 + F16C (quant_asym_avx2.c; qtk_asym_have_avx2: built so; quant.c calls it
 * when qtk_simd_avx2 and qtk_cpu_f16c): identical results. X, W, XR, RQ and Q hold the two
 * blocks interleaved four values at a time; mn, mx,
 * ref_d, ref_m, dout and mout two values each. search false: only one guarded least-squares
 * step from ggml's choice. */
#define QTK_ASYM_QB 32
void qtk_asym_pair_c(const float *X, const float *W, const float *XR, const float *mn,
                     const float *mx, int nmax, bool search, const float *ref_d,
                     const float *ref_m, const float *RQ, float *Q, float *dout, float *mout);
void qtk_asym_pair_avx2(const float *X, const float *W, const float *XR, const float *mn,
                        const float *mx, int nmax, bool search, const float *ref_d,
                        const float *ref_m, const float *RQ, float *Q, float *dout, float *mout);
bool qtk_asym_have_avx2(void);
/* The four-at-once fp16 rounding of each build against the one-value one, on every stride-th
 * float bit pattern and the three after it: the number of values where they differ (0). For
 * tests (the _avx2 one needs a CPU with AVX2 and F16C when built so). */
uint64_t qtk_asym_qh16_check_c(uint32_t stride);
uint64_t qtk_asym_qh16_check_avx2(uint32_t stride);

/* The q4_0/q5_0/q8_0 search (quant_sym.h) of two blocks of QTK_SYM_QB values at once: the code
 * range [lo, hi]; ggml's reference rule (half > 0: q4_0/q5_0, d = max/-half and truncation;
 * half 0: q8_0, d = amax/127 and roundf); nstep candidate scales per orientation, d0 levels
 * inside the end level and step levels apart; the least-squares rounds' iterations. Generic
 * (quant.c) and AVX2 (quant_sym_avx2.c; qtk_sym_have_avx2: built so; quant.c calls it when
 * qtk_simd_avx2): identical results, each block the bytes of the one-block search. */
#define QTK_SYM_QB 32
typedef struct {
    int lo, hi, half, nstep;
    float d0, step;
    int iters1, iters2; /* least-squares steps from the best candidate, then from the best */
} qtk_sym_type;
void qtk_sym_pair_c(const qtk_sym_type *T, const float *x0, const float *x1, const float *w0,
                    const float *w1, float *q0, float *q1, float *d);
void qtk_sym_pair_avx2(const qtk_sym_type *T, const float *x0, const float *x1, const float *w0,
                       const float *w1, float *q0, float *q1, float *d);
bool qtk_sym_have_avx2(void);
/* the uniform-weight search of eight blocks x (back to back, sanitised) at once, one per lane:
 * codes into q (eight blocks), scales into d[0..7]; each block the bytes of the one-block
 * search. Built when qtk_sym_have_oct_avx2; call it only when qtk_simd_avx2 and qtk_cpu_f16c. */
void qtk_sym_oct_avx2(const qtk_sym_type *T, const float *x, float *q, float *d);
bool qtk_sym_have_oct_avx2(void);

/* May the AVX2 builds (quant_k_avx2.c, quant_awq_avx2.c, quant_iq4_avx2.c, quant_asym_avx2.c,
 * quant_sym_avx2.c) run: an x86 CPU with
 * AVX2, QTK_SIMD not "generic", not the plain-C build (QTK_QV_PLAIN); decided once (quant.c).
 * Each caller also asks its own build whether it was compiled with AVX2. */
bool qtk_simd_avx2(void);
/* May the AVX-512 build (quant_awq_avx512.c) run: qtk_simd_avx2, a CPU with AVX-512 F and DQ,
 * and QTK_SIMD not "avx2" (which keeps the AVX2 builds for tests); decided once (quant.c). */
bool qtk_simd_avx512(void);
/* The CPU converts fp16 (F16C; x86 only, whatever the build; never for plain-C lanes). */
bool qtk_cpu_f16c(void);

/* Shared helpers (quant.c). qtk_qprep copies n values into xs with NaN -> 0 and values clamped
 * to +-1e8, and fills ws with sanitised weights (w NULL or all-zero -> 1; with w NULL, ws may be
 * NULL: nothing written). Returns true when the weights are uniform (all 1), so callers may take
 * unweighted fast paths. */
bool qtk_qprep(const float *x, const float *w, int n, float *xs, float *ws);
/* llama.cpp's importance weights for n values: qw[j] * sqrt(sigma2 + x[j]^2), sigma2 = 2 mean(x^2)
 * over the n values (its IQ4 and k-quant quantizers); qw NULL: all 1. */
void qtk_llama_weights(const float *x, int n, const float *qw, float *w);
/* Round a float to the nearest fp16 value (saturating at +-65504, NaN -> 0), as a float. */
float qtk_qh16(float f);

/* ---- IQ4_NL / IQ4_XS (quant_iq4.c), AWQ / GPTQ (quant_awq.c) ------------------------------ */

/* IQ4_NL (ggml type 20, blocks of 32) and IQ4_XS (type 23, super-blocks of 256): same contract
 * as qtk_quant_ggml (n_per_row a multiple of 32 resp. 256; imatrix NULL or n_per_row weights;
 * NaN -> 0, +-Inf -> +-1e8; a block whose weights are all <= 0 is fitted unweighted). Each
 * block's decoded error is <= that of llama.cpp's quantize_iq4_nl / quantize_iq4_xs (whose
 * algorithm is one of the candidates). Returns 0, or -1 on bad arguments. */
int qtk_quant_iq4_nl(const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                     const float *imatrix);
int qtk_quant_iq4_xs(const float *src, void *dst, uint64_t nrows, uint64_t n_per_row,
                     const float *imatrix);
/* The codebook lookup of those encoders (a table by floor(x)) against ggml's binary search, on
 * a dense sweep, every interval end and tie with their neighbouring floats, infinities and NaN:
 * the number of inputs where they differ (0). For tests. */
uint64_t qtk_quant_iq4_index_check(void);

/* AutoAWQ GEMM 4-bit from float W [out][in] (HF orientation): qweight int32 [in][out/8]
 * (columns 0,2,4,6,1,3,5,7 from the LSB), qzeros int32 [in/group][out/8] (same order, real
 * zeros in [0,15]), scales fp16 [in/group][out]. Each group (one output row, `group`
 * consecutive inputs) is fitted by qtk_fit_group(bits 4, asym, zmin 0). Needs group > 0,
 * in % group == 0, out % 8 == 0. Decodes with qtk_dequant_awq to exactly the values the fit
 * assumed. Returns 0, or -1 on bad arguments. */
int qtk_quant_awq(const float *w, uint32_t out, uint32_t in, uint32_t group, int32_t *qweight,
                  int32_t *qzeros, uint16_t *scales);

/* GPTQ (AutoGPTQ packing) from float W [out][in]: bits 2/3/4/8, sym or asym, version 1 (stores
 * zero-1; engines add 1 back without wrap-around, so an asymmetric fit is restricted to zeros
 * >= 1, i.e. zmin 1) or 2 (stores the zero). qweight int32 [in*bits/32][out] (LSB-first stream
 * along in; 3-bit crosses words), qzeros int32 [in/group][out*bits/32], scales fp16
 * [in/group][out], g_idx int32 [in] = i/group. Symmetric: zero = 2^(bits-1). Needs
 * in % 32 == 0, in % group == 0, out*bits % 32 == 0. Decodes with qtk_dequant_gptq (same
 * version) to exactly the values the fit assumed. Returns 0, or -1 on bad arguments. */
int qtk_quant_gptq(const float *w, uint32_t out, uint32_t in, uint32_t group, unsigned bits,
                   bool sym, int version, int32_t *qweight, int32_t *qzeros, uint16_t *scales,
                   int32_t *g_idx);

/* Fit one group of n values: codes q in [0, 2^bits-1], integer zero z, fp16 scale s, decoded
 * as (float)(q - z) * s (F32). Minimises the squared error of the decoded values over a
 * min-max/clipping grid (shrink factors of the range, both ends and each end alone), exact
 * step candidates range/k (so values that are already on such a grid are reproduced exactly),
 * least-squares refits and fp16 neighbours. Asymmetric: z in [zmin, 2^bits-1]; symmetric:
 * z = 2^(bits-1) (zmin ignored). bits 1..8, n >= 1. NaN inputs count as 0, +-Inf as +-1e8.
 * An all-zero group gives s = 0, z as above, q = z. *scale_out is the fp16 scale widened to
 * F32 (qtk_f32_to_fp16 gives back its bits). Returns 0, or -1 on bad arguments. */
int qtk_fit_group(const float *x, uint32_t n, unsigned bits, bool sym, int zmin,
                  float *scale_out, int *zero_out, uint8_t *codes_out);

/* The kernels of that search (quant_awq_ev.h), generic (_c) and AVX2 (_avx2: only when
 * qtk_awq_have_avx2() and qtk_simd_avx2()); each gives the same results. x: n values (n a
 * multiple of 16, sanitised: finite, |x| <= 1e8), xd the same in double; s a positive fp16 value,
 * zf the zero and mf = 2^bits - 1 as floats. codes: each value's code, the nearest decoded
 * (code - z) * s in [0, maxq]; sum: the squared error of those decoded values, summed in double
 * with element j in lane j mod 8 and the lanes folded in a fixed order, or an early value >=
 * limit when the error is sure to reach limit. For quant_awq.c and tests. */
double qtk_awq_ev_sum_c(const float *x, const double *xd, uint32_t n, float s, float zf, float mf,
                        double limit);
void qtk_awq_ev_codes_c(const float *x, const double *xd, uint32_t n, float s, float zf, float mf,
                        uint8_t *codes);
double qtk_awq_ev_sum_avx2(const float *x, const double *xd, uint32_t n, float s, float zf,
                           float mf, double limit);
void qtk_awq_ev_codes_avx2(const float *x, const double *xd, uint32_t n, float s, float zf,
                           float mf, uint8_t *codes);
/* a refinement round's sums for the zeros zf - 1, zf, zf + 1 (d = 0, 1, 2): sxq[d] = the sum of
 * k_j * x_j (k = code - zero) in element order, sqq[d] = the sum of k_j^2, and err[0], err[1]
 * the squared errors for zf - 1 and zf + 1 (as _sum gives them in full); abs_sum at least the
 * sum of |x| (any larger value, e.g. INFINITY, is correct too, possibly slower). A zero outside
 * [0, mf] (zf - 1 < 0, zf + 1 > mf) gives values with no meaning: callers skip them. */
void qtk_awq_ev_refine3_c(const float *x, const double *xd, uint32_t n, float s, float zf,
                          float mf, double abs_sum, double sxq[3], double sqq[3], double err[2]);
void qtk_awq_ev_refine3_avx2(const float *x, const double *xd, uint32_t n, float s, float zf,
                             float mf, double abs_sum, double sxq[3], double sqq[3],
                             double err[2]);
/* The same kernels built for AVX-512 F + DQ (quant_awq_avx512.c): only when qtk_awq_have_avx512()
 * and qtk_simd_avx512(); the same results. */
double qtk_awq_ev_sum_avx512(const float *x, const double *xd, uint32_t n, float s, float zf,
                             float mf, double limit);
void qtk_awq_ev_codes_avx512(const float *x, const double *xd, uint32_t n, float s, float zf,
                             float mf, uint8_t *codes);
void qtk_awq_ev_refine3_avx512(const float *x, const double *xd, uint32_t n, float s, float zf,
                               float mf, double abs_sum, double sxq[3], double sqq[3],
                               double err[2]);
bool qtk_awq_have_avx512(void);
bool qtk_awq_have_avx2(void);

#ifdef QTK_QUANT_IMPL
#include "fp16.h"

#include <math.h>
#include <string.h>
/* Four-lane float helpers for the encoders (quant.c, quant_k.c only). SSE2 or NEON (AArch64)
 * where available, otherwise plain C with the very same per-lane operations, so results are bit-identical on
 * every machine: sums are always accumulated in 4 lanes (element i in lane i%4) and reduced
 * as (l0+l2)+(l1+l3). Rounding is (v + 1.5*2^23) - 1.5*2^23: ties to even, for |v| < 2^22.
 * QTK_QV_PLAIN selects the plain-C lanes on any machine (tests/test_simd.sh compares the
 * builds). */
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
#include <emmintrin.h>
typedef __m128 qv4;
static inline qv4 qv_ld(const float *p) { return _mm_loadu_ps(p); }
static inline void qv_st(float *p, qv4 a) { _mm_storeu_ps(p, a); }
static inline qv4 qv_set(float a) { return _mm_set1_ps(a); }
static inline qv4 qv_add(qv4 a, qv4 b) { return _mm_add_ps(a, b); }
static inline qv4 qv_sub(qv4 a, qv4 b) { return _mm_sub_ps(a, b); }
static inline qv4 qv_mul(qv4 a, qv4 b) { return _mm_mul_ps(a, b); }
static inline qv4 qv_div(qv4 a, qv4 b) { return _mm_div_ps(a, b); }
static inline qv4 qv_min(qv4 a, qv4 b) { return _mm_min_ps(a, b); }
static inline qv4 qv_max(qv4 a, qv4 b) { return _mm_max_ps(a, b); }
static inline qv4 qv_abs(qv4 a) { return _mm_andnot_ps(_mm_set1_ps(-0.f), a); }
/* Whether a and b hold the same bits in every lane. */
static inline bool qv_same(qv4 a, qv4 b)
{
    return _mm_movemask_epi8(_mm_cmpeq_epi32(_mm_castps_si128(a), _mm_castps_si128(b))) == 0xffff;
}
/* Bit k set where lane k of a equals lane k of b (as floats). */
static inline unsigned qv_eqmask(qv4 a, qv4 b) { return (unsigned)_mm_movemask_ps(_mm_cmpeq_ps(a, b)); }
/* NaN -> +0, every other value as it is */
static inline qv4 qv_nan0(qv4 a) { return _mm_and_ps(a, _mm_cmpord_ps(a, a)); }
/* toward zero, |a| < 2^31 */
static inline qv4 qv_trunc(qv4 a) { return _mm_cvtepi32_ps(_mm_cvttps_epi32(a)); }
/* C roundf (half away from zero), |a| < 2^31 */
static inline qv4 qv_roundf(qv4 a)
{
    const __m128 t = _mm_cvtepi32_ps(_mm_cvttps_epi32(a));
    const __m128 f = _mm_andnot_ps(_mm_set1_ps(-0.f), _mm_sub_ps(a, t));
    const __m128 one = _mm_or_ps(_mm_set1_ps(1.f), _mm_and_ps(a, _mm_set1_ps(-0.f)));
    return _mm_add_ps(t, _mm_and_ps(_mm_cmpge_ps(f, _mm_set1_ps(0.5f)), one));
}
#elif defined(__aarch64__) && defined(__ARM_NEON) && !defined(QTK_QV_PLAIN)
#include <arm_neon.h>
typedef float32x4_t qv4;
static inline qv4 qv_ld(const float *p) { return vld1q_f32(p); }
static inline void qv_st(float *p, qv4 a) { vst1q_f32(p, a); }
static inline qv4 qv_set(float a) { return vdupq_n_f32(a); }
static inline qv4 qv_add(qv4 a, qv4 b) { return vaddq_f32(a, b); }
static inline qv4 qv_sub(qv4 a, qv4 b) { return vsubq_f32(a, b); }
static inline qv4 qv_mul(qv4 a, qv4 b) { return vmulq_f32(a, b); }
static inline qv4 qv_div(qv4 a, qv4 b) { return vdivq_f32(a, b); }
/* SSE's minps/maxps: the second operand unless the comparison holds (NaN included) */
static inline qv4 qv_min(qv4 a, qv4 b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
static inline qv4 qv_max(qv4 a, qv4 b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
static inline qv4 qv_abs(qv4 a) { return vabsq_f32(a); }
static inline bool qv_same(qv4 a, qv4 b)
{
    return vminvq_u32(vceqq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b))) != 0;
}
static inline unsigned qv_eqmask(qv4 a, qv4 b)
{
    static const uint32_t bit[4] = { 1, 2, 4, 8 };
    return vaddvq_u32(vandq_u32(vceqq_f32(a, b), vld1q_u32(bit)));
}
static inline qv4 qv_nan0(qv4 a) { return vbslq_f32(vceqq_f32(a, a), a, vdupq_n_f32(0.f)); }
static inline qv4 qv_trunc(qv4 a) { return vcvtq_f32_s32(vcvtq_s32_f32(a)); }
static inline qv4 qv_roundf(qv4 a)
{
    const float32x4_t t = vcvtq_f32_s32(vcvtq_s32_f32(a));
    const float32x4_t f = vabsq_f32(vsubq_f32(a, t));
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(a), vdupq_n_u32(0x80000000u));
    const float32x4_t one = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(vdupq_n_f32(1.f)), sign));
    const uint32x4_t up = vcgeq_f32(f, vdupq_n_f32(0.5f));
    return vaddq_f32(t, vreinterpretq_f32_u32(vandq_u32(up, vreinterpretq_u32_f32(one))));
}
#else
#include <string.h>
typedef struct { float f[4]; } qv4;
static inline qv4 qv_ld(const float *p)
{
    qv4 r;
    for (int k = 0; k < 4; k++)
        r.f[k] = p[k];
    return r;
}
static inline void qv_st(float *p, qv4 a)
{
    for (int k = 0; k < 4; k++)
        p[k] = a.f[k];
}
static inline qv4 qv_set(float a)
{
    qv4 r;
    for (int k = 0; k < 4; k++)
        r.f[k] = a;
    return r;
}
static inline qv4 qv_add(qv4 a, qv4 b)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] + b.f[k];
    return a;
}
static inline qv4 qv_sub(qv4 a, qv4 b)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] - b.f[k];
    return a;
}
static inline qv4 qv_mul(qv4 a, qv4 b)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] * b.f[k];
    return a;
}
static inline qv4 qv_div(qv4 a, qv4 b)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] / b.f[k];
    return a;
}
/* same results as SSE minps/maxps: the second operand unless the comparison holds */
static inline qv4 qv_min(qv4 a, qv4 b)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] < b.f[k] ? a.f[k] : b.f[k];
    return a;
}
static inline qv4 qv_max(qv4 a, qv4 b)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] > b.f[k] ? a.f[k] : b.f[k];
    return a;
}
static inline qv4 qv_nan0(qv4 a)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = a.f[k] == a.f[k] ? a.f[k] : 0.f;
    return a;
}
static inline qv4 qv_abs(qv4 a)
{
    for (int k = 0; k < 4; k++) {
        uint32_t u;
        memcpy(&u, &a.f[k], sizeof u);
        u &= 0x7FFFFFFFu;
        memcpy(&a.f[k], &u, sizeof u);
    }
    return a;
}
static inline bool qv_same(qv4 a, qv4 b) { return memcmp(a.f, b.f, sizeof a.f) == 0; }
static inline unsigned qv_eqmask(qv4 a, qv4 b)
{
    unsigned m = 0;
    for (int k = 0; k < 4; k++)
        m |= (unsigned)(a.f[k] == b.f[k]) << k;
    return m;
}
static inline qv4 qv_trunc(qv4 a)
{
    for (int k = 0; k < 4; k++)
        a.f[k] = (float)(int32_t)a.f[k];
    return a;
}
static inline qv4 qv_roundf(qv4 a)
{
    for (int k = 0; k < 4; k++) {
        const float t = (float)(int32_t)a.f[k], f = a.f[k] - t;
        a.f[k] = (f >= 0.5f || f <= -0.5f) ? t + (a.f[k] < 0.f ? -1.f : 1.f) : t;
    }
    return a;
}
#endif
static inline qv4 qv_round(qv4 a)
{
    const qv4 m = qv_set(12582912.f);
    return qv_sub(qv_add(a, m), m);
}
static inline float qv_sum(qv4 a)
{
    float t[4];
    qv_st(t, a);
    return (t[0] + t[2]) + (t[1] + t[3]);
}
/* the four qv_sum results of a, b, c, d at once (same values) */
static inline void qv_sum4(qv4 a, qv4 b, qv4 c, qv4 d, float *out)
{
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
    const __m128 u = _mm_add_ps(_mm_unpacklo_ps(a, b), _mm_unpackhi_ps(a, b));
    const __m128 v = _mm_add_ps(_mm_unpacklo_ps(c, d), _mm_unpackhi_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm_movelh_ps(u, v), _mm_movehl_ps(v, u)));
#else
    out[0] = qv_sum(a);
    out[1] = qv_sum(b);
    out[2] = qv_sum(c);
    out[3] = qv_sum(d);
#endif
}

/* Round a float to the nearest fp16 value (saturating at +-65504, NaN -> 0), as a float: qtk_qh16,
 * inlined (fp16.h's conversions, which dequant.c's are). */
static inline float qv_qh16(float f)
{
    if (!(f == f))
        return 0.f;
    if (f > 65504.f)
        f = 65504.f;
    if (f < -65504.f)
        f = -65504.f;
    return qtk_h2f(qtk_f2h(f));
}

#if (defined(__AVX__) || defined(__F16C__)) && !defined(QTK_QV_PLAIN)
#include <immintrin.h>
#endif
/* qv_qh16 of four values at once (the same bits, checked on every float): with F16C the
 * conversion instructions, with SSE2 integer lanes doing its operations (the unsigned
 * comparisons as signed ones of the values with their top bit flipped), elsewhere lane by
 * lane. */
#if defined(__F16C__) && !defined(QTK_QV_PLAIN)
/* the conversion instructions (round to nearest even, as qv_to_h16) on the clamped values */
static inline qv4 qv_qh16_4(qv4 f)
{
    f = _mm_and_ps(f, _mm_cmpord_ps(f, f)); /* NaN -> +0 */
    f = _mm_max_ps(_mm_min_ps(f, _mm_set1_ps(65504.f)), _mm_set1_ps(-65504.f));
    return _mm_cvtph_ps(_mm_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#elif defined(__SSE2__) && !defined(QTK_QV_PLAIN)
static inline qv4 qv_qh16_4(qv4 f)
{
    const __m128i top = _mm_set1_epi32((int)0x80000000u);
    f = _mm_and_ps(f, _mm_cmpord_ps(f, f)); /* NaN -> +0 */
    f = _mm_max_ps(_mm_min_ps(f, _mm_set1_ps(65504.f)), _mm_set1_ps(-65504.f));
    /* qv_to_h16 (f finite here, so never the NaN code) */
    const __m128i w = _mm_castps_si128(f), shl1 = _mm_add_epi32(w, w);
    const __m128i sign = _mm_and_si128(w, top);
    const __m128 af = _mm_andnot_ps(_mm_set1_ps(-0.f), f);
    __m128 base = _mm_mul_ps(_mm_mul_ps(af, _mm_set1_ps(0x1.0p+112f)), _mm_set1_ps(0x1.0p-110f));
    __m128i bias = _mm_and_si128(shl1, _mm_set1_epi32((int)0xFF000000u));
    const __m128i lt = _mm_cmplt_epi32(_mm_xor_si128(bias, top),
                                       _mm_set1_epi32((int)(0x71000000u ^ 0x80000000u)));
    bias = _mm_or_si128(_mm_and_si128(lt, _mm_set1_epi32(0x71000000)), _mm_andnot_si128(lt, bias));
    base = _mm_add_ps(_mm_castsi128_ps(_mm_add_epi32(_mm_srli_epi32(bias, 1),
                                                     _mm_set1_epi32(0x07800000))),
                      base);
    const __m128i bits = _mm_castps_si128(base);
    const __m128i nonsign =
        _mm_add_epi32(_mm_and_si128(_mm_srli_epi32(bits, 13), _mm_set1_epi32(0x7C00)),
                      _mm_and_si128(bits, _mm_set1_epi32(0x0FFF)));
    const __m128i h = _mm_or_si128(_mm_srli_epi32(sign, 16), nonsign);
    /* qv_from_h16 */
    const __m128i w2 = _mm_slli_epi32(h, 16), two_w = _mm_add_epi32(w2, w2);
    const __m128 normalized =
        _mm_mul_ps(_mm_castsi128_ps(_mm_add_epi32(_mm_srli_epi32(two_w, 4),
                                                  _mm_set1_epi32((int)(0xE0u << 23)))),
                   _mm_set1_ps(0x1.0p-112f));
    const __m128 denormalized = _mm_sub_ps(
        _mm_castsi128_ps(_mm_or_si128(_mm_srli_epi32(two_w, 17), _mm_set1_epi32(126 << 23))),
        _mm_set1_ps(0.5f));
    const __m128i is_den = _mm_cmplt_epi32(_mm_xor_si128(two_w, top),
                                           _mm_set1_epi32((int)((1u << 27) ^ 0x80000000u)));
    return _mm_castsi128_ps(_mm_or_si128(
        _mm_and_si128(w2, top),
        _mm_or_si128(_mm_and_si128(_mm_castps_si128(denormalized), is_den),
                     _mm_andnot_si128(is_den, _mm_castps_si128(normalized)))));
}
#else
static inline qv4 qv_qh16_4(qv4 f)
{
    float t[4];
    qv_st(t, f);
    for (int k = 0; k < 4; k++)
        t[k] = qv_qh16(t[k]);
    return qv_ld(t);
}
#endif

/* out[k] = num[k] / den[k] for k < 4, in double (IEEE division: the same bits however many at
 * once). */
static inline void qv_div4d(const double *num, const double *den, double *out)
{
#if defined(__AVX__) && !defined(QTK_QV_PLAIN)
    _mm256_storeu_pd(out, _mm256_div_pd(_mm256_loadu_pd(num), _mm256_loadu_pd(den)));
#elif defined(__SSE2__) && !defined(QTK_QV_PLAIN)
    _mm_storeu_pd(out, _mm_div_pd(_mm_loadu_pd(num), _mm_loadu_pd(den)));
    _mm_storeu_pd(out + 2, _mm_div_pd(_mm_loadu_pd(num + 2), _mm_loadu_pd(den + 2)));
#else
    for (int k = 0; k < 4; k++)
        out[k] = num[k] / den[k];
#endif
}

/* Eight-lane sums for the hot k-quant search (quant_k_aff.h): element i accumulates in lane
 * i%8 and lanes fold as (l0+l4, l1+l5, l2+l6, l3+l7) before qv_sum's four-lane order. With
 * AVX2 (quant_k_avx2.c is built with -mavx2 and chosen at run time) one 256-bit register,
 * otherwise two qv4 halves doing the very same per-lane operations: identical results. */
#if defined(__AVX2__) && !defined(QTK_QV_PLAIN)
#include <immintrin.h>
typedef __m256 qv8;
static inline qv8 qv8_ld(const float *p) { return _mm256_loadu_ps(p); }
static inline void qv8_st(float *p, qv8 a) { _mm256_storeu_ps(p, a); }
static inline qv8 qv8_set(float a) { return _mm256_set1_ps(a); }
/* four floats at p in both halves */
static inline qv8 qv8_ld2(const float *p)
{
    return _mm256_broadcast_ps((const __m128 *)(const void *)p);
}
/* four floats at p in the low half, four at q in the high; and the store back */
static inline qv8 qv8_ldp(const float *p, const float *q)
{
    return _mm256_set_m128(_mm_loadu_ps(q), _mm_loadu_ps(p));
}
static inline void qv8_stp(float *p, float *q, qv8 a)
{
    _mm_storeu_ps(p, _mm256_castps256_ps128(a));
    _mm_storeu_ps(q, _mm256_extractf128_ps(a, 1));
}
static inline qv8 qv8_add(qv8 a, qv8 b) { return _mm256_add_ps(a, b); }
static inline qv8 qv8_sub(qv8 a, qv8 b) { return _mm256_sub_ps(a, b); }
static inline qv8 qv8_mul(qv8 a, qv8 b) { return _mm256_mul_ps(a, b); }
static inline qv8 qv8_div(qv8 a, qv8 b) { return _mm256_div_ps(a, b); }
static inline qv8 qv8_min(qv8 a, qv8 b) { return _mm256_min_ps(a, b); }
static inline qv8 qv8_max(qv8 a, qv8 b) { return _mm256_max_ps(a, b); }
static inline qv8 qv8_abs(qv8 a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
/* qv_trunc and qv_roundf in eight lanes (the same operations) */
static inline qv8 qv8_trunc(qv8 a) { return _mm256_cvtepi32_ps(_mm256_cvttps_epi32(a)); }
static inline qv8 qv8_roundf(qv8 a)
{
    const __m256 t = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(a));
    const __m256 f = _mm256_andnot_ps(_mm256_set1_ps(-0.f), _mm256_sub_ps(a, t));
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.f), _mm256_and_ps(a, _mm256_set1_ps(-0.f)));
    return _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one));
}
static inline qv4 qv8_fold(qv8 a)
{
    return _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
}
static inline bool qv8_same(qv8 a, qv8 b)
{
    return _mm256_movemask_epi8(_mm256_cmpeq_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b))) == -1;
}
/* an 8 x 8 transpose in place (lane i of r[j] <-> lane j of r[i]): the AVX2 builds' rows of
 * eight blocks turned into columns, one block per lane, and back */
static inline void qv8_tr8(qv8 r[8])
{
    __m256 b[8], a[8];
    for (int j = 0; j < 8; j += 2) {
        b[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
        b[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 8; j += 4)
        for (int k = 0; k < 2; k++) {
            a[j + k] = _mm256_shuffle_ps(b[j + k], b[j + k + 2], 0x44);
            a[j + k + 2] = _mm256_shuffle_ps(b[j + k], b[j + k + 2], 0xEE);
        }
    /* a[0]: rows 0-3 of columns 0 and 4, a[2]: columns 1 and 5, a[1]: 2 and 6, a[3]: 3 and 7 */
    static const int col[4] = { 0, 2, 1, 3 };
    for (int k = 0; k < 4; k++) {
        r[col[k]] = _mm256_permute2f128_ps(a[k], a[k + 4], 0x20);
        r[col[k] + 4] = _mm256_permute2f128_ps(a[k], a[k + 4], 0x31);
    }
}
/* the AVX2 builds' searches with one block per lane (quant_sym_avx2.c, quant_k_avx2.c): 32-value
 * rows of eight blocks, back to back, into 32 columns (lane j of cols[i]: element i of block j),
 * and back */
static inline void qv8_cols32(const float *rows, qv8 *cols)
{
    for (int c = 0; c < 32; c += 8) {
        for (int j = 0; j < 8; j++)
            cols[c + j] = _mm256_loadu_ps(rows + j * 32 + c);
        qv8_tr8(cols + c);
    }
}
static inline void qv8_rows32(const qv8 *cols, float *rows)
{
    for (int c = 0; c < 32; c += 8) {
        qv8 r[8];
        for (int i = 0; i < 8; i++)
            r[i] = cols[c + i];
        qv8_tr8(r); /* the transpose is its own inverse */
        for (int j = 0; j < 8; j++)
            _mm256_storeu_ps(rows + j * 32 + c, r[j]);
    }
}
/* qv_sum's order over four partial sums, lane by lane: (a0 + a2) + (a1 + a3) */
static inline qv8 qv8_fold4(const qv8 *a)
{
    return _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
}
/* lanes 0-3 (h 0) or 4-7 (h 1) of a as doubles; eight floats from two such halves (rounded as a
 * cast rounds); an eight-lane mask from two four-lane double masks (all ones converts to a NaN) */
static inline __m256d qv8_pd_half(qv8 a, int h)
{
    return _mm256_cvtps_pd(h ? _mm256_extractf128_ps(a, 1) : _mm256_castps256_ps128(a));
}
static inline qv8 qv8_from_pd(__m256d lo, __m256d hi)
{
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}
static inline qv8 qv8_pd_mask(__m256d lo, __m256d hi)
{
    const qv8 m = qv8_from_pd(lo, hi);
    return _mm256_cmp_ps(m, m, _CMP_UNORD_Q);
}
#else
typedef struct { qv4 lo, hi; } qv8;
static inline qv8 qv8_ld(const float *p) { return (qv8){ qv_ld(p), qv_ld(p + 4) }; }
static inline void qv8_st(float *p, qv8 a)
{
    qv_st(p, a.lo);
    qv_st(p + 4, a.hi);
}
static inline qv8 qv8_set(float a) { return (qv8){ qv_set(a), qv_set(a) }; }
static inline qv8 qv8_ld2(const float *p) { return (qv8){ qv_ld(p), qv_ld(p) }; }
static inline qv8 qv8_ldp(const float *p, const float *q) { return (qv8){ qv_ld(p), qv_ld(q) }; }
static inline void qv8_stp(float *p, float *q, qv8 a)
{
    qv_st(p, a.lo);
    qv_st(q, a.hi);
}
static inline qv8 qv8_add(qv8 a, qv8 b) { return (qv8){ qv_add(a.lo, b.lo), qv_add(a.hi, b.hi) }; }
static inline qv8 qv8_sub(qv8 a, qv8 b) { return (qv8){ qv_sub(a.lo, b.lo), qv_sub(a.hi, b.hi) }; }
static inline qv8 qv8_mul(qv8 a, qv8 b) { return (qv8){ qv_mul(a.lo, b.lo), qv_mul(a.hi, b.hi) }; }
static inline qv8 qv8_div(qv8 a, qv8 b) { return (qv8){ qv_div(a.lo, b.lo), qv_div(a.hi, b.hi) }; }
static inline qv8 qv8_min(qv8 a, qv8 b) { return (qv8){ qv_min(a.lo, b.lo), qv_min(a.hi, b.hi) }; }
static inline qv8 qv8_max(qv8 a, qv8 b) { return (qv8){ qv_max(a.lo, b.lo), qv_max(a.hi, b.hi) }; }
static inline qv8 qv8_abs(qv8 a) { return (qv8){ qv_abs(a.lo), qv_abs(a.hi) }; }
static inline qv8 qv8_trunc(qv8 a) { return (qv8){ qv_trunc(a.lo), qv_trunc(a.hi) }; }
static inline qv8 qv8_roundf(qv8 a) { return (qv8){ qv_roundf(a.lo), qv_roundf(a.hi) }; }
static inline qv4 qv8_fold(qv8 a) { return qv_add(a.lo, a.hi); }
static inline bool qv8_same(qv8 a, qv8 b) { return qv_same(a.lo, b.lo) && qv_same(a.hi, b.hi); }
#endif
static inline qv8 qv8_round(qv8 a)
{
    const qv8 m = qv8_set(12582912.f);
    return qv8_sub(qv8_add(a, m), m);
}
static inline float qv8_sum(qv8 a) { return qv_sum(qv8_fold(a)); }
/* qv8_sum of six registers at once (the same values): out[0..5] */
static inline void qv8_sum6(qv8 a0, qv8 a1, qv8 a2, qv8 a3, qv8 a4, qv8 a5, float *out)
{
#if defined(__AVX2__) && !defined(QTK_QV_PLAIN)
    /* [fold a0 | fold a1], [fold a2 | fold a3], [fold a4 | fold a5] */
    const __m256 f0 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a0, a1, 0x31));
    const __m256 f1 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a3, 0x20), _mm256_permute2f128_ps(a2, a3, 0x31));
    const __m256 f2 = _mm256_add_ps(_mm256_permute2f128_ps(a4, a5, 0x20), _mm256_permute2f128_ps(a4, a5, 0x31));
    /* qv_sum4 per half: (a0, a2, a4, a4) low, (a1, a3, a5, a5) high */
    const __m256 u = _mm256_add_ps(_mm256_unpacklo_ps(f0, f1), _mm256_unpackhi_ps(f0, f1));
    const __m256 v = _mm256_add_ps(_mm256_unpacklo_ps(f2, f2), _mm256_unpackhi_ps(f2, f2));
    const __m256d ud = _mm256_castps_pd(u), vd = _mm256_castps_pd(v);
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(ud, vd)),
                                      _mm256_castpd_ps(_mm256_unpackhi_pd(ud, vd))));
    out[0] = t[0], out[1] = t[4], out[2] = t[1], out[3] = t[5], out[4] = t[2], out[5] = t[6];
#else
    float t[8];
    qv_sum4(qv8_fold(a0), qv8_fold(a1), qv8_fold(a2), qv8_fold(a3), t);
    qv_sum4(qv8_fold(a4), qv8_fold(a5), qv8_fold(a5), qv8_fold(a5), t + 4);
    for (int k = 0; k < 6; k++)
        out[k] = t[k];
#endif
}

/* Two four-lane halves (quant_asym.h: two blocks side by side). qv8_set2: a in the low half, b
 * in the high. qv8_sum4h: qv_sum4 of each half, the low half's four sums in out[0..3], the high
 * half's in out[4..7] (the same values). */
#if defined(__AVX2__) && !defined(QTK_QV_PLAIN)
static inline qv8 qv8_set2(float a, float b) { return _mm256_setr_ps(a, a, a, a, b, b, b, b); }
static inline void qv8_sum4h(qv8 a, qv8 b, qv8 c, qv8 d, float *out)
{
    /* qv_sum4's steps, which stay within each 128-bit half */
    const __m256 u = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
    const __m256 v = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
    const __m256d ud = _mm256_castps_pd(u), vd = _mm256_castps_pd(v);
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(ud, vd)),
                                        _mm256_castpd_ps(_mm256_unpackhi_pd(ud, vd))));
}
#else
static inline qv8 qv8_set2(float a, float b) { return (qv8){ qv_set(a), qv_set(b) }; }
static inline void qv8_sum4h(qv8 a, qv8 b, qv8 c, qv8 d, float *out)
{
    qv_sum4(a.lo, b.lo, c.lo, d.lo, out);
    qv_sum4(a.hi, b.hi, c.hi, d.hi, out + 4);
}
#endif
#endif /* QTK_QUANT_IMPL */

#endif /* QTK_QUANT_H */
