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
} qtk_name_rule;

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
	const char *const *suffixes;   /* name suffixes that map (".weight", ".bias"; NULL-terminated) */
	const char *const *dropped;    /* HF name endings llama.cpp does not write (NULL-terminated) */
	/* llama.cpp's Q/K row permutation (HF -> GGUF) for the rules with qk set: 'q' rows
	 * permuted with keys.n_head heads, 'k' with keys.n_head_kv */
	bool permute_qk;
	/* config.json <-> GGUF metadata */
	const qtk_family_keys *keys;
	unsigned flags;                /* QTK_FAM_* */
	double default_rms_eps;        /* config.json rms_norm_eps when the GGUF has none */
	/* tokenizer */
	const char *bpe_pre;           /* tokenizer.ggml.pre for a tokenizer.json vocabulary */
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

/* True when llama.cpp does not write HF tensor `name` of family f (rotary inv_freq, ...). */
bool qtk_family_dropped(const qtk_family *f, const char *name);

/* Canonical (digest) name of a tensor name: GGUF names of the known families -> HF names
 * (token_embd.weight -> model.embed_tokens.weight, blk.N.attn_q.weight ->
 * model.layers.N.self_attn.q_proj.weight, ...), anything else unchanged. The one name rule
 * of qverify, qconvert and qinspect --diff. Returns 1 when mapped, 0 when unchanged,
 * QTK_E_DATA when buf is too small. *qk is 'q' or 'k' for GGUF attn_q / attn_k names, else 0. */
int qtk_canon_name(const char *name, char *buf, size_t n, int *qk);

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
