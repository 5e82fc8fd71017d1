/* qgroups.h - group-quantized integers (codes, zeros, fp16 scales) and the
 * exact transcodes between AWQ, GPTQ and ggml's legacy blocks. */
#ifndef QTK_QGROUPS_H
#define QTK_QGROUPS_H
#include "qtk.h"

/* Values decode as (q - z) * s, HF orientation: q [out][in], z and s [out][ngroups]. */
typedef struct qgroups {
	uint32_t out, in, group, ngroups;
	unsigned bits;
	uint8_t *q;
	int16_t *z;     /* the zero the decoder subtracts (GPTQ v1: stored + 1) */
	uint16_t *s;    /* fp16 bits */
	int32_t *g_idx; /* group of each input; NULL means i / group */
	uint16_t *m;    /* MLX: an fp16 bias per group added after scaling, (q - z) * s + m with
			 * z = 0 (a z other than 0 marks a group no ggml type holds); NULL: none */
} qgroups;

void qg_free(qgroups *g);
/* Set g up for out x in codes in ngroups groups of `group` inputs (codes, zeros and scales
 * allocated, uninitialised; no g_idx). 0, or -1 when out of memory (g is then empty). */
int qg_alloc(qgroups *g, uint32_t out, uint32_t in, uint32_t group, uint32_t ngroups, unsigned bits);
uint32_t qg_group_of(const qgroups *g, uint32_t i);
bool qg_act_order(const qgroups *g);
/* Unpack. Return 0, or -1 on bad parameters / allocation failure / not representable. */
int qg_from_awq(const uint32_t *qweight, const uint32_t *qzeros, const uint16_t *scales, uint32_t out, uint32_t in,
		uint32_t group, qgroups *g);
int qg_from_gptq(const uint32_t *qweight, const uint32_t *qzeros, const uint16_t *scales, const int32_t *g_idx,
		 uint32_t out, uint32_t in, uint32_t group, uint32_t ngroups, unsigned bits, int version, qgroups *g);
/* q4_0, q8_0, and q4_1 where every block's min is -z*d for an integer z; rows of in/32 blocks. */
int qg_from_ggml(unsigned type, const uint8_t *src, uint32_t out, uint32_t in, qgroups *g);
/* Any q4_1 as codes with z = 0 and its minimum as the bias g->m (q * d + m, MLX's form). */
int qg_from_q4_1_bias(const uint8_t *src, uint32_t out, uint32_t in, qgroups *g);
/* Pack. -1 when the target cannot hold the values (zero range, bits, act-order, code range). */
int qg_to_awq(const qgroups *g, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales);
bool qg_gptq_storable(const qgroups *g, int version);
/* wrap: write unstorable v1 zeros wrapped (as AutoGPTQ/AutoAWQ do; the result then decodes differently). */
int qg_to_gptq(const qgroups *g, int version, bool wrap, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales,
	       int32_t *g_idx);
int qg_to_ggml(const qgroups *g, unsigned type, uint32_t row0, uint32_t nrows, uint8_t *dst);

/* ---- 4-bit AWQ <-> GPTQ without the codes array, a band of input rows at a time ----
 * `units` groups of 8 input rows: rows 8u .. 8u+7 of AWQ's qweight ([in][out/8], outputs in
 * AWQ's nibble order) are row u of GPTQ's ([in/8][out], 8 inputs per word, LSB first). */
void qg_awq_rows_to_gptq(const uint32_t *awq, uint64_t units, uint32_t out, uint32_t *gptq);
void qg_gptq_rows_to_awq(const uint32_t *gptq, uint64_t units, uint32_t out, uint32_t *awq);
/* The codes that differ between such bands, each read as its own decoder reads it (0: equal). */
uint64_t qg_awq_gptq_rows_diff(const uint32_t *awq, const uint32_t *gptq, uint64_t units, uint32_t out);
/* Zeros, nwords words of 8 (AWQ [ng][out/8], GPTQ 4-bit [ng][out/8]; GPTQ v1 stores z - 1):
 * -1 when one cannot be stored in the target (no word is then guaranteed written). */
int qg_awq_zeros_to_gptq(const uint32_t *az, uint64_t nwords, int version, uint32_t *gz);
int qg_gptq_zeros_to_awq(const uint32_t *gz, uint64_t nwords, int version, uint32_t *az);
/* The zeros that differ as the two decoders read them (GPTQ v1: stored + 1). */
uint64_t qg_awq_gptq_zeros_diff(const uint32_t *az, const uint32_t *gz, uint64_t nwords, int version);
#endif
