/* quant_k.h - shared by quant_k.c and the per-instruction-set builds of the affine k-quant
 * search (quant_k_aff.h), the q3_k/q6_k sub-block fits (quant_k_symfit.h) and superblock search
 * (quant_k_sym.h), each included
 * by quant_k.c and quant_k_avx2.c. Internal. */
#ifndef QTK_QUANT_K_H
#define QTK_QUANT_K_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define QK 256

/* affine types: y = (d*ls)*q - dmin*lm */
typedef struct {
    int sub, nsub, nmax, smax; /* sub-block size and count, code max, sub-scale max */
    float rmin, rdelta;        /* ggml's make_qkx2_quants sweep */
    int nstep;
    bool mad;                  /* ggml's sweep scores |error| (q2_k) */
    bool wabs;                 /* ggml's weights: |x| (q2_k) or rms + |x| */
    bool ref_only;             /* without an importance matrix, refine ggml's fit alone (no
                                * fit of our own: q5_k, see quant_k.c) */
} aff_cfg;

typedef struct {
    float d, dmin;
    bool one; /* the weights are all 1: their products (exact) are left out */
    int ls[16], lm[16];
    float e[16];
    float L[QK]; /* codes, as floats */
} aff_st;

/* the search settings of q2_k, q4_k and q5_k */
extern const aff_cfg qtk_aff_q2k, qtk_aff_q4k, qtk_aff_q5k;

/* One superblock of 256 values x under importance w (uniform: no importance matrix, w all 1):
 * the chosen scales, mins and codes. The generic build and the AVX2 build give identical
 * results (quant.h's eight-lane order). */
void qtk_aff_block_c(const aff_cfg *c, const float *x, const float *w, bool uniform, aff_st *st);
void qtk_aff_block_avx2(const aff_cfg *c, const float *x, const float *w, bool uniform, aff_st *st);
/* false when this build has no AVX2 variant */
bool qtk_aff_have_avx2(void);

/* symmetric types: y = (d*sc)*q, sub-blocks of SUB values */
#define SUB 16
#define NSUB 16
#define GROUP_EPS 1e-15f

typedef struct {
    int lo, hi;   /* codes */
    int slo, shi; /* sub-scales */
    bool noclip;  /* our encodings may not clip a value (see quant_k.c's sym_sub) */
} sym_cfg;

typedef struct {
    float d;
    int sc[NSUB];
    float e[NSUB];
    float r[NSUB]; /* error under ggml's weights x^2 (only with them: q3_k, see sym_block) */
    float L[QK];   /* codes, as floats */
} sym_st;

/* One superblock's q3_k (q6 false) or q6_k search (quant_k_sym.h) under weights w, wr (or NULL):
 * ggml's weights, see quant_k.c. q3_k's sub-block fits are fits when given (qtk_q3_fits_*: ggml's
 * 16 scales, then ours; only when w is all ones), else computed here. The generic and AVX2
 * builds give identical results. */
void qtk_sym_block_c(const sym_cfg *c, bool q6, const float *x, const float *w, const float *wr,
                     const float *fits, sym_st *st);
void qtk_sym_block_avx2(const sym_cfg *c, bool q6, const float *x, const float *w,
                        const float *wr, const float *fits, sym_st *st);

/* One sub-block's two float fits (quant_k_symfit.h): ggml's scale in *rs (q6_k; for q3_k *rs
 * is given, from qtk_ref_q3_x16 or qtk_q3_fits_*), ours in *os. The generic and AVX2 builds give identical
 * results. */
void qtk_sym_fits_c(const sym_cfg *c, const float *x, const float *wo, bool q6, float *rs,
                    float *os);
void qtk_sym_fits_avx2(const sym_cfg *c, const float *x, const float *wo, bool q6, float *rs,
                       float *os);

/* ggml's make_q3_quants(16, 4, x, L, true) scale of each of the NSUB sub-blocks of x (QK values)
 * in rs. Sequential by nature within a sub-block: the AVX2 build runs eight sub-blocks side by
 * side, one per lane, each lane doing the scalar steps of its own; identical results (a lane
 * whose pass changed nothing changes nothing in the passes the others still need). */
void qtk_ref_q3_x16_c(const float *x, float *rs);
void qtk_ref_q3_x16_avx2(const float *x, float *rs);
/* The sub-block fits of nsb (1 .. REF_Q3_MAXSB) superblocks (x: nsb * QK values) under weights
 * 1 (q3_k's whenever it searches): for each, 2 * NSUB floats in fits, ggml's 16 scales (as
 * qtk_ref_q3_x16_*) then ours (as qtk_sym_fits_* with w all ones). The AVX2 build runs them
 * one sub-block per lane, many sub-blocks' chains side by side; identical results. */
enum { REF_Q3_MAXSB = 8 };
void qtk_q3_fits_c(const float *x, float *fits, int nsb);
void qtk_q3_fits_avx2(const float *x, float *fits, int nsb);

/* round to nearest, ties to even, |v| < 2^22 */
static inline int qrint(float v)
{
    const float t = v + 12582912.f;
    uint32_t i;
    memcpy(&i, &t, sizeof i);
    return (int)(i & 0x007fffffu) - 0x00400000;
}

static inline int qclr(float v, int lo, int hi)
{
    if (v < (float)lo)
        v = (float)lo;
    if (v > (float)hi)
        v = (float)hi;
    return qrint(v);
}

#endif
