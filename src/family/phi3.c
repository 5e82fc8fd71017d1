/* phi3.c - Phi-3 (and Phi-4, which shares its converter).
 *
 * Facts from llama.cpp's convert_hf_to_gguf.py (Phi3MiniModel) and gguf-py's tensor-name
 * tables; the code is our own. The attention's qkv_proj (rows q | k | v) and the MLP's
 * gate_up_proj (rows gate | up) stay fused as attn_qkv and ffn_up; no Q/K permutation. */
#include "family/family.h"

static const qtk_name_rule top_names[] = {
	QTK_RULES_TOP,
};

static const qtk_name_rule block_names[] = {
	QTK_RULES_NORMS,
	{"self_attn.qkv_proj", "attn_qkv", 0, 0},
	{"self_attn.o_proj", "attn_output", 0, 0},
	{"mlp.gate_up_proj", "ffn_up", 0, 0},
	{"mlp.down_proj", "ffn_down", 0, 0},
};

static const char *const suffixes[] = {".weight", ".bias", NULL};
static const char *const dropped[] = {".rotary_emb.inv_freq", NULL};

/* Phi3MiniModel writes its own keys; a missing sliding_window is written as 0 (Phi-4) */
static const qtk_key_spec phi3_keys[] = {
	{.kind = QTK_KEY_HP, .hp = QTK_HP_CTX},
	{.kind = QTK_KEY_U32, .gguf = "rope.scaling.original_context_length", .hf = "original_max_position_embeddings",
	 .def = -1, .def_hf = "max_position_embeddings"},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EMBD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_FF},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_LAYER},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD_KV},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_RMS},
	{.kind = QTK_KEY_ROPE_DIM},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_THETA},
	{.kind = QTK_KEY_FILE_TYPE},
	{.kind = QTK_KEY_U32, .gguf = "attention.sliding_window", .hf = "sliding_window", .def = 0},
	{.kind = QTK_KEY_END},
};

static const char *const phi3_archs[] = {"Phi3ForCausalLM", NULL};

const qtk_family qtk_family_phi3 = {
	.name = "phi3",
	.hf_archs = phi3_archs,
	.hf_model_type = "phi3",
	.gguf_arch = "phi3",
	.hf_arch_out = "Phi3ForCausalLM",
	.hf_block = "model.layers.",
	.gguf_block = "blk.",
	.top = top_names,
	.ntop = sizeof top_names / sizeof *top_names,
	.block = block_names,
	.nblock = sizeof block_names / sizeof *block_names,
	.suffixes = suffixes,
	.dropped = dropped,
	.keys = &qtk_family_std_keys,
	.flags = QTK_FAM_ROPE_LONG,
	.gguf_keys = phi3_keys,
	.default_rms_eps = 1e-5,
	.bpe_class = "LlamaTokenizerFast",
	.spm_class = "LlamaTokenizer",
};
