/* mix.h - llama.cpp's named quantization mixes (Q4_K_M, ...): which tensors are quantized, and
 * to what (mix.c). The family-dependent inputs come from the model's family descriptor. */
#ifndef QTK_FAMILY_MIX_H
#define QTK_FAMILY_MIX_H
#include "family/family.h"

typedef struct qtk_mix_state {
	const qtk_model *m;
	int ftype;
	int n_head, n_head_kv, n_expert, n_layer;
	bool is_70b;
	bool has_output; /* an output.weight / lm_head.weight exists; else token_embd is treated as it */
	int n_attn_v, i_attn_v, n_ffn_down, i_ffn_down;
} qtk_mix_state;

/* The base type and llama_ftype of mix `name` (case matters: Q4_K_M is a mix, q4_k a type);
 * -1 when name is no mix. */
int qtk_mix_lookup(const char *name, unsigned *base, int *ftype);
/* general.file_type for a single-type target (llama-quantize --pure); -1 when none. */
int qtk_mix_ftype_for_type(unsigned type);
/* The i-th mix name ("Q4_0" ... "IQ4_XS"), NULL past the last. */
const char *qtk_mix_name(size_t i);
/* llama.cpp's tensor_allows_quantization (GGUF and HF names). */
bool qtk_mix_quantizable(const qtk_tensor *t);
/* Counters and model numbers (heads, experts, layers, the family's 70B rule) for qtk_mix_type.
 * The expert and layer counts come from the <arch>.expert_count and <arch>.block_count keys;
 * without them, from the 3-D *_exps tensors and the highest block number. */
void qtk_mix_init(qtk_mix_state *s, const qtk_model *m, int ftype);
/* The type llama.cpp would give tensor t in mix s (call in file order). */
unsigned qtk_mix_type(qtk_mix_state *s, const qtk_tensor *t, unsigned base, bool has_imatrix);
/* llama.cpp's fallback when the row length does not divide ty's block. */
unsigned qtk_mix_fallback(const qtk_tensor *t, unsigned ty);
#endif
