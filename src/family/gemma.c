/* gemma.c - Gemma 2 (text).
 *
 * Facts from llama.cpp's convert_hf_to_gguf.py (Gemma2Model) and gguf-py's tensor-name
 * tables; the code is our own. Gemma stores its RMS norm weights as w with the scale 1 + w;
 * llama.cpp's converter adds the 1 (in the checkpoint's float type) so the GGUF holds the
 * scale. Four norms per block; logit softcapping and the sliding window are keys; the
 * embeddings are tied. */
#include "family/family.h"

static const qtk_name_rule top_names[] = {
	{"model.embed_tokens", "token_embd", 0, 0},
	{"model.norm", "output_norm", 0, QTK_RULE_PLUS1},
	{"lm_head", "output", 0, 0},
};

static const qtk_name_rule block_names[] = {
	{"input_layernorm", "attn_norm", 0, QTK_RULE_PLUS1},
	{"post_attention_layernorm", "post_attention_norm", 0, QTK_RULE_PLUS1},
	{"pre_feedforward_layernorm", "ffn_norm", 0, QTK_RULE_PLUS1},
	{"post_feedforward_layernorm", "post_ffw_norm", 0, QTK_RULE_PLUS1},
	{"self_attn.q_proj", "attn_q", 'q', 0},
	{"self_attn.k_proj", "attn_k", 'k', 0},
	{"self_attn.v_proj", "attn_v", 0, 0},
	{"self_attn.o_proj", "attn_output", 0, 0},
	{"mlp.gate_proj", "ffn_gate", 0, 0},
	{"mlp.up_proj", "ffn_up", 0, 0},
	{"mlp.down_proj", "ffn_down", 0, 0},
};

static const char *const suffixes[] = {".weight", NULL};
static const char *const dropped[] = {".rotary_emb.inv_freq", NULL};

/* Gemma2Model writes its own keys (no rope.freq_base; query_pre_attn_scalar is not written) */
static const qtk_key_spec gemma2_keys[] = {
	{.kind = QTK_KEY_HP, .hp = QTK_HP_CTX},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EMBD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_LAYER},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_FF},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD_KV},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_RMS},
	{.kind = QTK_KEY_HEAD_DIM},
	{.kind = QTK_KEY_FILE_TYPE},
	{.kind = QTK_KEY_F32, .gguf = "attn_logit_softcapping", .hf = "attn_logit_softcapping", .def = -1},
	{.kind = QTK_KEY_F32, .gguf = "final_logit_softcapping", .hf = "final_logit_softcapping", .def = -1},
	{.kind = QTK_KEY_U32, .gguf = "attention.sliding_window", .hf = "sliding_window", .def = -1},
	{.kind = QTK_KEY_END},
};

static const char *const gemma2_archs[] = {"Gemma2ForCausalLM", NULL};

const qtk_family qtk_family_gemma2 = {
	.name = "gemma2",
	.hf_archs = gemma2_archs,
	.hf_model_type = "gemma2",
	.gguf_arch = "gemma2",
	.hf_arch_out = "Gemma2ForCausalLM",
	.hf_block = "model.layers.",
	.gguf_block = "blk.",
	.top = top_names,
	.ntop = sizeof top_names / sizeof *top_names,
	.block = block_names,
	.nblock = sizeof block_names / sizeof *block_names,
	.suffixes = suffixes,
	.dropped = dropped,
	.keys = &qtk_family_std_keys,
	.flags = QTK_FAM_NO_SPACE_PREFIX,
	.gguf_keys = gemma2_keys,
	.hidden_act = "gelu_pytorch_tanh",
	.hidden_act_key = "hidden_activation",
	/* not in the GGUF: llama.cpp scales queries by the head size for Gemma 2's 2B and 9B */
	.hf_head_dim_copy = "query_pre_attn_scalar",
	.default_rms_eps = 1e-6,
	.bpe_class = "GemmaTokenizerFast",
	.spm_class = "GemmaTokenizer",
};
