/* llama.c - the llama family: llama (Llama 2 and 3.x), mistral and mixtral (both written as GGUF
 * "llama") and qwen2.
 *
 * Facts from llama.cpp's convert_hf_to_gguf.py (LlamaModel, Qwen2Model) and gguf-py's
 * tensor-name tables; the code is our own. */
#include "family/family.h"

static const qtk_name_rule top_names[] = {
	QTK_RULES_TOP,
};

/* within model.layers.N. / blk.N. */
static const qtk_name_rule block_names[] = {
	QTK_RULES_NORMS,
	QTK_RULES_ATTN('q', 'k'),
	QTK_RULES_MLP,
};

static const char *const suffixes[] = {".weight", ".bias", NULL};
static const char *const dropped[] = {".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq", NULL};

#define LLAMA_NAMES_BASE                                                                                \
	.hf_block = "model.layers.", .gguf_block = "blk.", .top = top_names,                            \
	.ntop = sizeof top_names / sizeof *top_names, .suffixes = suffixes, .dropped = dropped,         \
	.keys = &qtk_family_std_keys

#define LLAMA_BLOCKS .block = block_names, .nblock = sizeof block_names / sizeof *block_names

#define LLAMA_NAMES LLAMA_NAMES_BASE, LLAMA_BLOCKS

#define LLAMA_FLAGS (QTK_FAM_VOCAB_KEY | QTK_FAM_ROPE_DIM | QTK_FAM_ROPE_LINEAR | QTK_FAM_SPM_PREFIX)

/* what llama.cpp's LlamaModel does: Q/K permuted, vocab_size and rope.dimension_count written,
 * linear rope scaling, SentencePiece's add_prefix_space; its 70B model type has 80 layers */
#define LLAMA_MODEL_BASE                                                                                \
	LLAMA_NAMES_BASE, .gguf_arch = "llama", .permute_qk = true, .default_rms_eps = 1e-5,            \
	.bpe_class = "PreTrainedTokenizerFast", .spm_class = "LlamaTokenizer", .mix_70b_layers = 80

static const char *const llama_archs[] = {"LlamaForCausalLM", "LLaMAForCausalLM", NULL};

const qtk_family qtk_family_llama = {
	.name = "llama",
	.hf_archs = llama_archs,
	.hf_model_type = "llama",
	.hf_arch_out = "LlamaForCausalLM",
	LLAMA_MODEL_BASE,
	LLAMA_BLOCKS,
	/* Llama 3.x: rope_scaling llama3 becomes the rope_freqs tensor */
	.flags = LLAMA_FLAGS | QTK_FAM_ROPE_LLAMA3,
};

/* llama.cpp converts Mistral checkpoints as llama models: a GGUF says "llama" and reads back
 * as a llama family model. */
static const char *const mistral_archs[] = {"MistralForCausalLM", NULL};

const qtk_family qtk_family_mistral = {
	.name = "mistral",
	.hf_archs = mistral_archs,
	.hf_model_type = "mistral",
	.hf_arch_out = "MistralForCausalLM",
	LLAMA_MODEL_BASE,
	LLAMA_BLOCKS,
	.flags = LLAMA_FLAGS,
};

/* Mixtral: llama.cpp writes it as a llama model with experts: each block's experts w1/w2/w3
 * stacked into ffn_gate_exps/ffn_down_exps/ffn_up_exps, the router as ffn_gate_inp (F32). */
static const qtk_name_rule mixtral_block[] = {
	QTK_RULES_NORMS,
	QTK_RULES_ATTN('q', 'k'),
	{"block_sparse_moe.gate", "ffn_gate_inp", 0, QTK_RULE_F32},
};

static const qtk_expert_rule mixtral_experts[] = {
	{"block_sparse_moe.experts.%.w1", "ffn_gate_exps"},
	{"block_sparse_moe.experts.%.w2", "ffn_down_exps"},
	{"block_sparse_moe.experts.%.w3", "ffn_up_exps"},
};

static const char *const mixtral_archs[] = {"MixtralForCausalLM", NULL};

const qtk_family qtk_family_mixtral = {
	.name = "mixtral",
	.hf_archs = mixtral_archs,
	.hf_model_type = "mixtral",
	.hf_arch_out = "MixtralForCausalLM",
	LLAMA_MODEL_BASE,
	.block = mixtral_block,
	.nblock = sizeof mixtral_block / sizeof *mixtral_block,
	.experts = mixtral_experts,
	.nexperts = sizeof mixtral_experts / sizeof *mixtral_experts,
	.flags = LLAMA_FLAGS | QTK_FAM_MOE,
};

static const char *const qwen2_archs[] = {"Qwen2ForCausalLM", NULL};

const qtk_family qtk_family_qwen2 = {
	.name = "qwen2",
	.hf_archs = qwen2_archs,
	.hf_model_type = "qwen2",
	.gguf_arch = "qwen2",
	.hf_arch_out = "Qwen2ForCausalLM",
	LLAMA_NAMES,
	.permute_qk = false,
	.flags = QTK_FAM_ROPE_YARN,
	.default_rms_eps = 1e-6,
	.bpe_class = "Qwen2Tokenizer",
	.spm_class = "LlamaTokenizer",
	.mix_70b_layers = 0,
};
