/* family.h - the model-family layer: everything qtk knows about an architecture family.
 *
 * One descriptor (qtk_family) per family, each in its own file (llama.c: llama, mistral,
 * qwen2), found through one table (family.c). The descriptor says: which config.json
 * "architectures" / model_type and which GGUF general.architecture it is; the HF <-> GGUF
 * tensor-name rules (both directions); which tensors carry llama.cpp's Q/K row permutation
 * and which head count goes with them; the config.json <-> GGUF metadata keys (hfmap.c);
 * the tokenizer; the family-dependent inputs of llama.cpp's quantization mixes (mix.c); and
 * the numbers the memory estimate needs (qtk_family_hparams).
 *
 * Adding a family = one new file defining a `const qtk_family qtk_family_<name>` plus its row
 * in the table in family.c. Fields a family does not need stay zero.
 */
#ifndef QTK_FAMILY_H
#define QTK_FAMILY_H
#include "qtk.h"

/* One tensor-name rule: the HF stem and the GGUF stem llama.cpp's converter writes for it,
 * without the suffix (".weight", ".bias") and, for block rules, without the block prefix
 * ("model.layers.N." / "blk.N."). */
typedef struct qtk_name_rule {
	const char *hf, *gguf;
	char qk; /* 'q' / 'k': the attention Q / K projection (see qtk_family.permute_qk), else 0 */
	unsigned char flags; /* QTK_RULE_* */
} qtk_name_rule;

enum {
	QTK_RULE_F32 = 1u << 0,   /* stored as F32 in a GGUF whatever the source type (MoE routers) */
	QTK_RULE_PLUS1 = 1u << 1, /* the GGUF holds 1 + w, rounded to the checkpoint's float type (Gemma
				   * norms); GGUF -> HF subtracts 1 again */
};

/* Rule rows most families share (llama.cpp's names for the llama-style layout), for the
 * descriptors' tables: whole-model tensors, the two block norms, attention (q and k: the qk
 * marks, 'q'/'k' or 0), the gated MLP. */
#define QTK_RULES_TOP                                                                                   \
	{"model.embed_tokens", "token_embd", 0, 0}, {"model.norm", "output_norm", 0, 0},               \
	{"lm_head", "output", 0, 0}
#define QTK_RULES_NORMS {"input_layernorm", "attn_norm", 0, 0}, {"post_attention_layernorm", "ffn_norm", 0, 0}
#define QTK_RULES_ATTN(q, k)                                                                            \
	{"self_attn.q_proj", "attn_q", q, 0}, {"self_attn.k_proj", "attn_k", k, 0},                    \
	{"self_attn.v_proj", "attn_v", 0, 0}, {"self_attn.o_proj", "attn_output", 0, 0}
#define QTK_RULES_MLP                                                                                   \
	{"mlp.gate_proj", "ffn_gate", 0, 0}, {"mlp.up_proj", "ffn_up", 0, 0},                          \
	{"mlp.down_proj", "ffn_down", 0, 0}

/* An expert rule: the HF stem of one expert's matrix with "%" where the expert number goes
 * ("block_sparse_moe.experts.%.w1") and the GGUF stem of the stacked 3-D tensor holding all
 * of a block's experts ("ffn_gate_exps"), both within the block prefix. */
typedef struct qtk_expert_rule {
	const char *hf, *gguf;
} qtk_expert_rule;

/* The standard hyperparameters of qtk_family_keys, for a key schedule. */
typedef enum {
	QTK_HP_LAYER = 1, QTK_HP_CTX, QTK_HP_EMBD, QTK_HP_FF, QTK_HP_HEAD, QTK_HP_HEAD_KV, QTK_HP_THETA,
	QTK_HP_RMS, QTK_HP_EXPERT, QTK_HP_EXPERT_USED
} qtk_hp_id;

/* One GGUF key of a family's schedule (HF -> GGUF writes them in this order). */
typedef enum {
	QTK_KEY_END = 0,
	QTK_KEY_HP,        /* a standard hyperparameter (hp), written when config.json has it */
	QTK_KEY_FILE_TYPE, /* general.file_type */
	QTK_KEY_HEAD_DIM,  /* key_length and value_length from head_dim, when config.json has it */
	QTK_KEY_ROPE_DIM,  /* rope.dimension_count: the per-head size */
	QTK_KEY_U32,       /* <arch>.gguf from config.json hf (absent: def, or not written when def < 0) */
	QTK_KEY_F32,       /* the same, as F32 */
	QTK_KEY_ROPE_SCALING, /* rope.scaling.* from rope_scaling (rope_type, else type) as llama.cpp's base
			       * class writes them: linear -> type, factor; yarn -> type, factor,
			       * original_context_length and the yarn_* values present */
	QTK_KEY_ABSENT,    /* no key: config.json must not set hf (llama.cpp's converter refuses it) */
} qtk_key_kind;

/* qtk_key_spec.opt */
enum {
	QTK_KS_IF_ABSENT = 1u << 0, /* U32/F32: written with def only when config.json lacks hf (a default
				     * llama.cpp adds after its base keys); never read back */
	QTK_KS_REQUIRED = 1u << 1,  /* U32/F32: config.json must have hf (unless skip_if_one says otherwise) */
	QTK_KS_NONZERO = 1u << 2,   /* U32/F32: not written when the value is 0 */
};

typedef struct qtk_key_spec {
	qtk_key_kind kind;
	qtk_hp_id hp;     /* QTK_KEY_HP */
	const char *gguf; /* QTK_KEY_U32/F32: the key after "<arch>." */
	const char *hf;   /* QTK_KEY_U32/F32: the config.json name */
	double def;       /* QTK_KEY_U32/F32: the value when config.json lacks it; < 0: leave the key out */
	const char *def_hf; /* QTK_KEY_U32: another config.json name giving the default */
	unsigned opt;       /* QTK_KS_* */
	const char *skip_if_one; /* U32/F32: not written (nor required) when config.json's skip_if_one is 1 */
} qtk_key_spec;

/* A hyperparameter: its GGUF key after "<arch>.", the config.json name qtk writes (and names
 * in messages), and the config.json names it reads (NULL-terminated, the first one present
 * counts as llama.cpp's find_hparam does; NULL: hf alone). */
typedef struct qtk_hparam_key {
	const char *gguf;
	const char *hf;
	const char *const *find;
} qtk_hparam_key;

/* The hyperparameters qtk reads and writes (config.json <-> GGUF metadata). */
typedef struct qtk_family_keys {
	qtk_hparam_key n_layer, n_ctx, n_embd, n_ff, n_head, n_head_kv, head_dim, vocab, rope_theta, rms_eps,
		norm_eps, n_expert, n_expert_used;
	const char *value_length;  /* GGUF key written beside head_dim's key_length */
	const char *rope_dim;      /* GGUF rope.dimension_count */
	const char *rope_type, *rope_factor, *rope_orig_ctx; /* GGUF rope.scaling.* */
} qtk_family_keys;

/* The keys llama.cpp uses for every family qtk knows (and the defaults for unknown ones). */
extern const qtk_family_keys qtk_family_std_keys;

/* Family-specific GGUF metadata written after general.file_type (HF -> GGUF), and read back
 * (GGUF -> HF). */
enum {
	QTK_FAM_VOCAB_KEY = 1u << 0,   /* <arch>.vocab_size (config.json vocab_size is then required) */
	QTK_FAM_ROPE_DIM = 1u << 1,    /* <arch>.rope.dimension_count */
	QTK_FAM_ROPE_LINEAR = 1u << 2, /* rope_scaling of type linear -> rope.scaling.type/factor */
	QTK_FAM_ROPE_YARN = 1u << 3,   /* rope_scaling of type yarn -> type/factor/original_context_length */
	QTK_FAM_SPM_PREFIX = 1u << 4,  /* tokenizer_config.json add_prefix_space -> tokenizer.ggml.add_space_prefix */
	QTK_FAM_ROPE_LLAMA3 = 1u << 5, /* rope_scaling of type llama3 -> a generated rope_freqs tensor */
	QTK_FAM_NO_SPACE_PREFIX = 1u << 6, /* tokenizer.ggml.add_space_prefix false after the special tokens */
	QTK_FAM_MOE = 1u << 7,         /* a mixture of experts: expert_count > 0 in the GGUF */
	QTK_FAM_ROPE_LONG = 1u << 8,   /* Phi-3 longrope: rope_factors_long/short tensors from rope_scaling's
					* long_factor/short_factor and <arch>.rope.scaling.attn_factor */
	QTK_FAM_NO_SPACE_PREFIX_SPM = 1u << 9, /* QTK_FAM_NO_SPACE_PREFIX only with a tokenizer.model */
	QTK_FAM_EMBD_VOCAB = 1u << 10, /* the converter keeps only the token embedding rows of the
					* vocabulary (qtk refuses an embedding with more rows than tokens) */
};

typedef struct qtk_family {
	const char *name;              /* the family's name ("llama", "mistral", "qwen2") */
	/* identification */
	const char *const *hf_archs;   /* config.json architectures[0] values (NULL-terminated) */
	const char *hf_model_type;     /* config.json model_type */
	const char *gguf_arch;         /* GGUF general.architecture */
	const char *hf_arch_out;       /* architectures[0] written for a GGUF of this family */
	/* tensor names */
	const char *hf_block, *gguf_block;  /* block prefixes before the block number */
	const qtk_name_rule *top;      /* whole-model tensors */
	size_t ntop;
	const qtk_name_rule *block;    /* per-block tensors */
	size_t nblock;
	const qtk_expert_rule *experts; /* per-expert matrices stacked into 3-D tensors */
	size_t nexperts;
	const char *const *suffixes;   /* name suffixes that map (".weight", ".bias"; NULL-terminated) */
	const char *const *dropped;    /* HF name endings llama.cpp does not write (NULL-terminated) */
	/* llama.cpp's Q/K row permutation (HF -> GGUF) for the rules with qk set: 'q' rows
	 * permuted with keys.n_head heads, 'k' with keys.n_head_kv */
	bool permute_qk;
	/* config.json <-> GGUF metadata */
	const qtk_family_keys *keys;
	unsigned flags;                /* QTK_FAM_* */
	const qtk_key_spec *gguf_keys; /* the family's key order (QTK_KEY_END-terminated); NULL: llama's */
	const char *hidden_act;        /* config.json hidden_act written for a GGUF (NULL: "silu") */
	const char *hidden_act_key;    /* ... under this name (NULL: "hidden_act") */
	const char *hf_head_dim_copy;  /* a config.json key written with the per-head size (GGUF -> HF) */
	int hf_head_dim_copy_embd_layers; /* a layer count at which hf_head_dim_copy is n_embd / n_head
					   * instead (llama.cpp's Gemma 3 27B), 0: none */
	uint32_t hf_swa_pattern;       /* config.json sliding_window_pattern and layer_types written for a
					* GGUF with a sliding window (llama.cpp's fixed pattern), 0: none */
	double default_rms_eps;        /* config.json rms_norm_eps when the GGUF has none */
	/* tokenizer (tokenizer.ggml.pre comes from the tokenizer.json itself: qtk_bpe_identify_pre) */
	const char *bpe_class;         /* tokenizer_class written with tokenizer.json */
	const char *spm_class;         /* tokenizer_class written with tokenizer.model */
	/* llama.cpp's quantization mixes: layer count of its 70B model type (0: none) */
	int mix_70b_layers;
} qtk_family;

/* ---- lookups -------------------------------------------------------------------------- */

/* The table, in lookup order: i < qtk_family_count(). */
size_t qtk_family_count(void);
const qtk_family *qtk_family_at(size_t i);
/* By config.json architectures[0]; NULL when unknown. */
const qtk_family *qtk_family_by_hf_arch(const char *arch);
/* By GGUF general.architecture (the first family writing it); NULL when unknown. */
const qtk_family *qtk_family_by_gguf_arch(const char *arch);
/* For an open model: its general.architecture, else config.json's architectures[0]; NULL
 * when neither names a known family. */
const qtk_family *qtk_family_of_model(const qtk_model *m);

/* ---- tensor names --------------------------------------------------------------------- */

/* name mapped HF -> GGUF (to_gguf) or GGUF -> HF by f's rules into buf. Block numbers are
 * decimal without leading zeros; only f's suffixes map. Returns 1 when mapped, 0 when f has no
 * rule for name, QTK_E_DATA when buf is too small. *qk: the rule's qk ('q', 'k' or 0). */
int qtk_family_map_name(const qtk_family *f, const char *name, bool to_gguf, char *buf, size_t n, int *qk);

/* The rule mapping name (as qtk_family_map_name), or NULL when none maps it. */
const qtk_name_rule *qtk_family_rule(const qtk_family *f, const char *name, bool to_gguf);

/* HF name of one expert's matrix -> the GGUF name of its block's stacked tensor ("blk.N.
 * ffn_gate_exps.weight") into buf and the expert number into *expert. Returns 1 when mapped,
 * 0 when name is no expert matrix of f, QTK_E_DATA when buf is too small. */
int qtk_family_expert_to_gguf(const qtk_family *f, const char *name, char *buf, size_t n, uint32_t *expert);
/* GGUF name of a stacked expert tensor -> the HF name of expert e's matrix. Returns 1, 0 or
 * QTK_E_DATA as above. */
int qtk_family_expert_to_hf(const qtk_family *f, const char *name, uint32_t e, char *buf, size_t n);

/* llama.cpp's Llama 3 rope factors (rope_freqs.weight): dim/2 values from rope_theta, the
 * per-head size and rope_scaling's factor, low_freq_factor, high_freq_factor and
 * original_max_position_embeddings, computed in single precision as the converter does. */
void qtk_family_llama3_rope(double theta, uint32_t dim, double factor, double low, double high, double orig_ctx,
			    float *out);

/* True when llama.cpp does not write HF tensor `name` of family f (rotary inv_freq, ...). */
bool qtk_family_dropped(const qtk_family *f, const char *name);

/* Canonical (digest) name of a tensor name of model m (NULL: any model): GGUF names of the known families -> HF names
 * (token_embd.weight -> model.embed_tokens.weight, blk.N.attn_q.weight ->
 * model.layers.N.self_attn.q_proj.weight, ...), anything else unchanged. The one name rule
 * of qverify, qconvert and qinspect --diff. Returns 1 when mapped, 0 when unchanged,
 * QTK_E_DATA when buf is too small. *qk is 'q' or 'k' for GGUF attn_q / attn_k names, else 0.
 * A GGUF name maps by the rules of m's family (general.architecture) first, since families
 * give one GGUF name different meanings (Gemma's ffn_norm is llama's post-attention norm's
 * place, not its role), then by the first family with a rule for it. */
int qtk_canon_name(const qtk_model *m, const char *name, char *buf, size_t n, int *qk);

/* ---- llama.cpp's Q/K row permutation -------------------------------------------------- */

/* Permute whole rows of a row-major matrix (rows x row_bytes): HF rows viewed as
 * (heads, 2, rows/heads/2) with the two inner axes swapped (HF -> GGUF); inverse undoes it.
 * rows must be a multiple of 2*heads (else the rows are copied unchanged). */
void qtk_family_permute_rows(const uint8_t *src, uint8_t *dst, uint64_t rows, uint64_t row_bytes, int heads,
			     bool inverse);

/* Heads for un-permuting tensor t of model m (a GGUF): > 0 for a Q/K tensor of a family that
 * permutes them, from the family's head-count keys (integers or decimal strings), else 0.
 * QTK_E_DATA when the counts are missing, malformed or do not split the rows into even heads. */
int qtk_family_qk_heads(const qtk_model *m, const qtk_tensor *t, int *heads, qtk_err *err);

/* ---- what the memory estimate needs ---------------------------------------------------- */

/* Per-layer lists (KV heads, sliding-layer patterns) longer than this are not believed. */
#define QTK_HP_MAX_LAYERS 1024

typedef struct qtk_hparams {
	char arch[64];
	uint64_t n_layer, n_head, n_head_kv, n_embd, head_dim, ctx_max, n_vocab;
	bool head_dim_explicit; /* key_length / head_dim given, not n_embd / n_head */
	const char *source;     /* "GGUF keys" or "config.json" */
	/* The KV cache, exactly: a layer l caches n_head_kv(l) x head_dim elements of K and
	 * n_head_kv(l) x head_dim_v of V per token. n_head_kv above is the largest n_head_kv(l);
	 * the sums over the layers that cache every token and over the sliding layers, which cache
	 * at most swa_window tokens, are exact. */
	uint64_t head_dim_v;        /* value_length; head_dim when not given */
	uint64_t kv_heads_full;     /* sum of n_head_kv(l) over the layers that are not sliding */
	uint64_t kv_heads_swa;      /* sum of n_head_kv(l) over the sliding layers */
	uint64_t n_head_kv_min;     /* the smallest n_head_kv(l) */
	bool kv_per_layer;          /* head_count_kv (num_key_value_heads) was a per-layer list */
#define QTK_HP_KV_TOKEN_MAX (1ull << 40) /* KV cache bytes a token beyond which it is not estimated */
	char kv_unknown[160];       /* non-empty: why the KV cache cannot be computed (then the sums are 0) */
	/* Sliding-window attention. swa_window is the declared window (0: none); the layers in
	 * n_layer_swa hold min(context, swa_window) tokens (llama.cpp's SWA cache). swa_note says
	 * which rule chose the layers, or, with n_layer_swa 0 and a window, why none slides. */
	uint64_t swa_window, n_layer_swa;
	bool swa_explicit;          /* the sliding layers are listed (swa_layers), not a period */
	uint32_t swa_period;        /* !swa_explicit: layer l slides when l % period < period - 1
	                             * (llama.cpp's pattern: 0 = every layer, 1 = none) */
	uint64_t swa_layers[QTK_HP_MAX_LAYERS / 64]; /* swa_explicit: bit l set = layer l slides */
	const char *swa_note;
	/* Mixture of experts (0 when the file does not say). */
	uint64_t n_expert, n_expert_used, n_ff_expert, n_ff_shared_expert;
} qtk_hparams;
/* The architecture numbers of m from its GGUF keys (<arch>.block_count, ...; per-layer arrays
 * of head counts: the largest, and the exact per-layer KV sums) or its config.json
 * (text_config when the top level has no layer count), by the family's keys (llama.cpp's for
 * unknown architectures). 0 when found, -1 when the file does not say. Inconsistent numbers
 * (a per-layer list of the wrong length, ...) are not an error: kv_unknown says why. */
int qtk_family_hparams(const qtk_model *m, qtk_hparams *hp);

/* True when layer l of hp is a sliding-window layer. */
bool qtk_family_layer_swa(const qtk_hparams *hp, uint64_t l);

/* Parameters and stored bytes of m, in total and as read for one token: the expert tensors of
 * a mixture of experts (GGUF "*_exps" tensors [n_expert, ...], HF "...experts.N..." tensors
 * or fused "...experts..." tensors [n_expert, ...]) count n_expert_used / n_expert of their
 * size, every other tensor (shared experts, routers, embeddings) counts fully. */
typedef struct qtk_active {
	uint64_t params, bytes;               /* every tensor */
	uint64_t params_active, bytes_active; /* per token; equal to the totals for a dense model */
	uint64_t n_expert_tensors;            /* tensors counted as experts */
	char unknown[160];                    /* non-empty: why the per-token counts are unknown
	                                       * (then they equal the totals) */
} qtk_active;
void qtk_family_active(const qtk_model *m, const qtk_hparams *hp, qtk_active *a);

#endif
