/* qwen.c - the Qwen families beyond Qwen2 (llama.c): Qwen2-MoE, Qwen3 and Qwen3-MoE.
 *
 * Facts from llama.cpp's convert_hf_to_gguf.py (Qwen2MoeModel as of 2025-02; Qwen3Model,
 * Qwen3MoeModel and the TextModel base class they use, as of today) and gguf-py's tensor-name
 * tables; the code is our own. None of them permutes Q/K (NEOX rope). */
#include "family/family.h"

static const qtk_name_rule top_names[] = {
	QTK_RULES_TOP,
};

static const char *const suffixes[] = {".weight", ".bias", NULL};
static const char *const dropped[] = {".rotary_emb.inv_freq", NULL};

#define QWEN_NAMES                                                                                      \
	.hf_block = "model.layers.", .gguf_block = "blk.", .top = top_names,                            \
	.ntop = sizeof top_names / sizeof *top_names, .suffixes = suffixes, .dropped = dropped,         \
	.keys = &qtk_family_std_keys, .permute_qk = false, .default_rms_eps = 1e-6, \
	.bpe_class = "Qwen2Tokenizer", .spm_class = "LlamaTokenizer"

/* Qwen2-MoE: routed experts stacked, the router as ffn_gate_inp (F32), a shared expert with its
 * own one-output gate (kept in the checkpoint's type) */
static const qtk_name_rule qwen2moe_block[] = {
	QTK_RULES_NORMS,
	QTK_RULES_ATTN('q', 'k'),
	{"mlp.gate", "ffn_gate_inp", 0, QTK_RULE_F32},
	{"mlp.shared_expert.gate_proj", "ffn_gate_shexp", 0, 0},
	{"mlp.shared_expert.up_proj", "ffn_up_shexp", 0, 0},
	{"mlp.shared_expert.down_proj", "ffn_down_shexp", 0, 0},
	{"mlp.shared_expert_gate", "ffn_gate_inp_shexp", 0, 0},
};

static const qtk_expert_rule qwen_experts[] = {
	{"mlp.experts.%.gate_proj", "ffn_gate_exps"},
	{"mlp.experts.%.up_proj", "ffn_up_exps"},
	{"mlp.experts.%.down_proj", "ffn_down_exps"},
};

/* the converter's base keys, then the expert counts and sizes (read from num_experts, which
 * the base does not look for) */
static const qtk_key_spec qwen2moe_keys[] = {
	{.kind = QTK_KEY_HP, .hp = QTK_HP_LAYER},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_CTX},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EMBD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_FF},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD_KV},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_THETA},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_RMS},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EXPERT_USED},
	{.kind = QTK_KEY_HEAD_DIM},
	{.kind = QTK_KEY_FILE_TYPE},
	{.kind = QTK_KEY_U32, .gguf = "expert_count", .hf = "num_experts", .def = -1},
	{.kind = QTK_KEY_U32, .gguf = "expert_feed_forward_length", .hf = "moe_intermediate_size", .def = -1},
	{.kind = QTK_KEY_U32, .gguf = "expert_shared_feed_forward_length", .hf = "shared_expert_intermediate_size",
	 .def = -1},
	{.kind = QTK_KEY_END},
};

static const char *const qwen2moe_archs[] = {"Qwen2MoeForCausalLM", NULL};

const qtk_family qtk_family_qwen2moe = {
	.name = "qwen2moe",
	.hf_archs = qwen2moe_archs,
	.hf_model_type = "qwen2_moe",
	.gguf_arch = "qwen2moe",
	.hf_arch_out = "Qwen2MoeForCausalLM",
	QWEN_NAMES,
	.block = qwen2moe_block,
	.nblock = sizeof qwen2moe_block / sizeof *qwen2moe_block,
	.experts = qwen_experts,
	.nexperts = sizeof qwen_experts / sizeof *qwen_experts,
	.flags = QTK_FAM_ROPE_YARN | QTK_FAM_MOE,
	.gguf_keys = qwen2moe_keys,
};

/* Qwen3: Qwen2 without the q/k/v biases, with RMS norms on each head's queries and keys */
static const qtk_name_rule qwen3_block[] = {
	QTK_RULES_NORMS,
	QTK_RULES_ATTN('q', 'k'),
	{"self_attn.q_norm", "attn_q_norm", 0, 0},
	{"self_attn.k_norm", "attn_k_norm", 0, 0},
	QTK_RULES_MLP,
};

/* Qwen3Model (via Qwen2Model) writes the base class's keys: rope scaling before the rope base,
 * the expert counts (num_local_experts, else num_experts) after the norm epsilon, key/value
 * length from head_dim, then general.file_type; Qwen3MoeModel (via Qwen2MoeModel) adds the
 * expert sizes after it. */
#define QWEN3_BASE_KEYS                                                                                  \
	{.kind = QTK_KEY_HP, .hp = QTK_HP_LAYER}, {.kind = QTK_KEY_HP, .hp = QTK_HP_CTX},                  \
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EMBD}, {.kind = QTK_KEY_HP, .hp = QTK_HP_FF},                    \
	{.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD}, {.kind = QTK_KEY_HP, .hp = QTK_HP_HEAD_KV},               \
	{.kind = QTK_KEY_ROPE_SCALING}, {.kind = QTK_KEY_HP, .hp = QTK_HP_THETA},                          \
	{.kind = QTK_KEY_HP, .hp = QTK_HP_RMS}

static const qtk_key_spec qwen3_keys[] = {
	QWEN3_BASE_KEYS,
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EXPERT_USED},
	{.kind = QTK_KEY_HEAD_DIM},
	{.kind = QTK_KEY_FILE_TYPE},
	{.kind = QTK_KEY_END},
};

static const qtk_key_spec qwen3moe_keys[] = {
	QWEN3_BASE_KEYS,
	{.kind = QTK_KEY_U32, .gguf = "expert_count", .hf = "num_experts", .def = -1, .def_hf = "num_local_experts"},
	{.kind = QTK_KEY_HP, .hp = QTK_HP_EXPERT_USED},
	{.kind = QTK_KEY_HEAD_DIM},
	{.kind = QTK_KEY_FILE_TYPE},
	{.kind = QTK_KEY_U32, .gguf = "expert_feed_forward_length", .hf = "moe_intermediate_size", .def = -1},
	{.kind = QTK_KEY_U32, .gguf = "expert_shared_feed_forward_length", .hf = "shared_expert_intermediate_size",
	 .def = -1},
	{.kind = QTK_KEY_END},
};

static const char *const qwen3_archs[] = {"Qwen3ForCausalLM", NULL};

const qtk_family qtk_family_qwen3 = {
	.name = "qwen3",
	.hf_archs = qwen3_archs,
	.hf_model_type = "qwen3",
	.gguf_arch = "qwen3",
	.hf_arch_out = "Qwen3ForCausalLM",
	QWEN_NAMES,
	.block = qwen3_block,
	.nblock = sizeof qwen3_block / sizeof *qwen3_block,
	.flags = QTK_FAM_ROPE_YARN,
	.gguf_keys = qwen3_keys,
};

/* Qwen3-MoE: Qwen3's attention, Qwen2-MoE's routed experts, no shared expert */
static const qtk_name_rule qwen3moe_block[] = {
	QTK_RULES_NORMS,
	QTK_RULES_ATTN('q', 'k'),
	{"self_attn.q_norm", "attn_q_norm", 0, 0},
	{"self_attn.k_norm", "attn_k_norm", 0, 0},
	{"mlp.gate", "ffn_gate_inp", 0, QTK_RULE_F32},
};

static const char *const qwen3moe_archs[] = {"Qwen3MoeForCausalLM", NULL};

const qtk_family qtk_family_qwen3moe = {
	.name = "qwen3moe",
	.hf_archs = qwen3moe_archs,
	.hf_model_type = "qwen3_moe",
	.gguf_arch = "qwen3moe",
	.hf_arch_out = "Qwen3MoeForCausalLM",
	QWEN_NAMES,
	.block = qwen3moe_block,
	.nblock = sizeof qwen3moe_block / sizeof *qwen3moe_block,
	.experts = qwen_experts,
	.nexperts = sizeof qwen_experts / sizeof *qwen_experts,
	.flags = QTK_FAM_ROPE_YARN | QTK_FAM_MOE,
	.gguf_keys = qwen3moe_keys,
};
