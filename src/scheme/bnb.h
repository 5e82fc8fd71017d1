/* bnb.h - bitsandbytes 4-bit (NF4 / FP4) and LLM.int8 pieces the tests use directly. */
#ifndef QTK_SCHEME_BNB_H
#define QTK_SCHEME_BNB_H

#include "qtk.h"

/* A quant_state JSON as checked by qtk_bnb_parse_state. */
typedef struct qtk_bnb_state {
	bool fp4;                  /* quant_type "fp4" (else "nf4") */
	uint32_t blocksize;
	unsigned dtype;            /* QTK_T_F16, QTK_T_BF16, QTK_T_F32 */
	uint64_t out, in;          /* shape */
	uint32_t nested_blocksize; /* 0: no double quantization */
	float nested_offset;
} qtk_bnb_state;

/* Parse len bytes of a quant_state JSON strictly (known keys only, every field checked);
 * 0, or QTK_E_DATA with the problem in why. */
int qtk_bnb_parse_state(const char *text, size_t len, qtk_bnb_state *s, char *why, size_t wn);
/* bitsandbytes' NF4 (fp4 = 0) or FP4 code table as float32 bits. */
const uint32_t *qtk_bnb_code_table(int fp4);
/* Rows o0 .. o0+n-1 of bnb4 tensor t from its whole parts; cast: round to the quant-state
 * dtype (bitsandbytes' output), else the float32 product. 0, or -1 on bad arguments or a
 * non-finite absmax. */
int qtk_bnb_decode(const qtk_tensor *t, const void *const *parts, bool cast, uint64_t o0, uint64_t n, float *dst);
/* Rows o0 .. o0+n-1 of bnb8 (LLM.int8) tensor t from its parts (weight I8, SCB F32):
 * f32(f32(w * SCB) * f32(1/127)), bitsandbytes' int8_vectorwise_dequant. 0, or -1 on bad
 * arguments or a non-finite or negative SCB. */
int qtk_bnb8_decode(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, float *dst);

#endif
