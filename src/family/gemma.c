/* gemma.c - Gemma 2 and Gemma 3 (text).
 *
 * Facts from llama.cpp's convert_hf_to_gguf.py (Gemma2Model, Gemma3Model, TextModel) and
 * gguf-py's tensor-name tables and GGUFWriter; the code is our own. Gemma stores its RMS norm weights as w with the scale 1 + w;
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
	QTK_RULES_ATTN('q', 'k'),
	QTK_RULES_MLP,
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

/* Gemma 3: Gemma 2's blocks with RMS norms on each head's queries and keys (also stored + 1) */
static const qtk_name_rule gemma3_block[] = {
	{"input_layernorm", "attn_norm", 0, QTK_RULE_PLUS1},
	{"post_attention_layernorm", "post_attention_norm", 0, QTK_RULE_PLUS1},
	{"pre_feedforward_layernorm", "ffn_norm", 0, QTK_RULE_PLUS1},
	{"post_feedforward_layernorm", "post_ffw_norm", 0, QTK_RULE_PLUS1},
	{"self_attn.q_norm", "attn_q_norm", 0, QTK_RULE_PLUS1},
	{"self_attn.k_norm", "attn_k_norm", 0, QTK_RULE_PLUS1},
	QTK_RULES_ATTN(0, 0),
	QTK_RULES_MLP,
};

/* Gemma3Model writes the base class's keys, then its own: a key the base already wrote keeps
 * its place (GGUFWriter overwrites a key in place), a default for one config.json lacks comes
 * after general.file_type. */
static const qtk_key_spec gemma3_keys[] = {
	{.kind = QTK_KEY_HP, .hp = QTK_HP_LAYER},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_CTX},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EMBD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_FF},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD_KV},
	{.kind = QTK_KEY_ROPE_SCALING},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_THETA},
	{.kind = QTK_KEY_F32, .gguf = "rope.freq_base_swa", .hf = "rope_local_base_freq", .def = -1},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_RMS},
	{.kind = QTK_KEY_HEAD_DIM},
	{.kind = QTK_KEY_FILE_TYPE},
	/* Gemma3Model's defaults, in its order */
	{.kind = QTK_KEY_U32, .gguf = "context_length", .hf = "max_position_embeddings", .def = 131072,
	 .opt = QTK_KS_IF_ABSENT},
	{.kind = QTK_KEY_F32, .gguf = "attention.layer_norm_rms_epsilon", .hf = "rms_norm_eps", .def = 1e-6,
	 .opt = QTK_KS_IF_ABSENT},
	{.kind = QTK_KEY_U32, .gguf = "attention.key_length", .hf = "head_dim", .def = 256, .opt = QTK_KS_IF_ABSENT},
	{.kind = QTK_KEY_U32, .gguf = "attention.value_length", .hf = "head_dim", .def = 256, .opt = QTK_KS_IF_ABSENT},
	{.kind = QTK_KEY_F32, .gguf = "rope.freq_base", .hf = "rope_theta", .def = 1e6, .opt = QTK_KS_IF_ABSENT},
	{.kind = QTK_KEY_ABSENT, .hf = "attn_logit_softcapping"},
	{.kind = QTK_KEY_F32, .gguf = "final_logit_softcapping", .hf = "final_logit_softcapping", .def = -1,
	 .opt = QTK_KS_NONZERO},
	{.kind = QTK_KEY_U32, .gguf = "attention.sliding_window", .hf = "sliding_window", .def = -1,
	 .opt = QTK_KS_REQUIRED, .skip_if_one = "sliding_window_pattern"},
	{.kind = QTK_KEY_U32, .gguf = "attention.head_count_kv", .hf = "num_key_value_heads", .def = 4,
	 .opt = QTK_KS_IF_ABSENT},
	{.kind = QTK_KEY_END},
};

static const char *const gemma3_archs[] = {"Gemma3ForCausalLM", NULL};

const qtk_family qtk_family_gemma3 = {
	.name = "gemma3",
	.hf_archs = gemma3_archs,
	.hf_model_type = "gemma3_text",
	.gguf_arch = "gemma3",
	.hf_arch_out = "Gemma3ForCausalLM",
	.hf_block = "model.layers.",
	.gguf_block = "blk.",
	.top = top_names,
	.ntop = sizeof top_names / sizeof *top_names,
	.block = gemma3_block,
	.nblock = sizeof gemma3_block / sizeof *gemma3_block,
	.suffixes = suffixes,
	.dropped = dropped,
	.keys = &qtk_family_std_keys,
	/* add_space_prefix false after a SentencePiece vocabulary (not after tokenizer.json's) */
	.flags = QTK_FAM_NO_SPACE_PREFIX | QTK_FAM_NO_SPACE_PREFIX_SPM | QTK_FAM_EMBD_VOCAB,
	.gguf_keys = gemma3_keys,
	.hidden_act = "gelu_pytorch_tanh",
	.hidden_act_key = "hidden_activation",
	/* not in the GGUF: llama.cpp scales queries by the head size, by n_embd / n_head for its 27B
	 * (62 layers); it fixes the sliding-window pattern at 6 */
	.hf_head_dim_copy = "query_pre_attn_scalar",
	.hf_head_dim_copy_embd_layers = 62,
	.hf_swa_pattern = 6,
	.default_rms_eps = 1e-6,
	.bpe_class = "GemmaTokenizerFast",
	.spm_class = "GemmaTokenizer",
};
