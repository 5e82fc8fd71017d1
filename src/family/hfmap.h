/* hfmap.h - Hugging Face <-> GGUF model mapping for the families of family.h:
 * tensor names, llama.cpp's Q/K row permutation, config.json <-> GGUF keys and
 * the tokenizer (SentencePiece tokenizer.model, BPE tokenizer.json <->
 * tokenizer.ggml.*), each as the family's descriptor says.
 *
 * The reference is llama.cpp's convert_hf_to_gguf.py: metadata keys, their
 * types and their order are the ones it writes.
 */
#ifndef QTK_HFMAP_H
#define QTK_HFMAP_H

#include "family/family.h"
#include "json.h"
#include "qtk_util.h"

typedef struct qtk_hfmap qtk_hfmap;

/* HF model of a known family (tensors with HF names; blobs config.json,
 * tokenizer.model and/or tokenizer.json, tokenizer_config.json, ...) -> GGUF.
 * Fills meta->kv with the keys llama.cpp's converter writes, in its order:
 * general.architecture, general.type, general.name (the directory's base
 * name: llama.cpp's model-card/dir-name heuristics are not reproduced),
 * general.size_label (computed as llama.cpp does), the hyperparameters,
 * general.file_type (a placeholder from the source dtypes: 0 all F32,
 * 32 BF16, else 1; the caller overwrites it with qtk_hfmap_set_file_type),
 * vocab_size, rope.dimension_count, tokenizer.ggml.*, chat template,
 * general.quantization_version (2). Errors: QTK_E_DATA naming the config key
 * or file; "unsupported architecture X". */
int qtk_hfmap_hf_to_gguf(const qtk_model *hf, qtk_model *meta, qtk_hfmap **map, qtk_err *err);

/* GGUF of a known family -> HF: fills meta->blobs with config.json,
 * generation_config.json, tokenizer.model (SentencePiece vocabularies) or
 * tokenizer.json (BPE), tokenizer_config.json and special_tokens_map.json. */
int qtk_hfmap_gguf_to_hf(const qtk_model *gguf, qtk_model *meta, qtk_hfmap **map, qtk_err *err);

/* For a source tensor name: the output name (NULL: not mapped, keep the
 * source name and warn) and the row permutation: *heads > 0 means permute
 * rows with that many heads (qtk_family_permute_rows); *inverse is true when
 * going GGUF -> HF. */
const char *qtk_hfmap_name(const qtk_hfmap *m, const char *src_name, int *heads, bool *inverse);

/* The output order of tensors as indices into src->tensors: the source order
 * (for an HF source: each shard's header order, shards in order), leaving out
 * the tensors llama.cpp drops (rotary_emb.inv_freq, attention.masked_bias,
 * attention.bias). This is the order of fixtures/.../llamacpp-from-hf-f16.gguf.
 * Returns the number of entries written (qtk_hfmap_count(m); order[] must hold
 * src->ntensors entries). */
size_t qtk_hfmap_order(const qtk_hfmap *m, const qtk_model *src, size_t *order);
/* The same set in the order llama.cpp's convert_hf_to_gguf.py iterates a
 * real checkpoint: shards in file order, tensor names sorted (bytewise)
 * within each shard, as safetensors' safe_open().keys() returns them. Equal
 * to qtk_hfmap_order for files whose header is already sorted (what
 * save_pretrained writes for a single dtype). */
size_t qtk_hfmap_order_sorted(const qtk_hfmap *m, const qtk_model *src, size_t *order);
/* Number of output tensors (source tensors minus the dropped ones). */
size_t qtk_hfmap_count(const qtk_hfmap *m);

/* Storage type for a plain float source tensor in the output, following
 * llama.cpp: HF -> GGUF: 1-D tensors, *_norm.weight and non-".weight"
 * tensors (biases) become F32, others keep `type`. GGUF -> HF: F32 1-D
 * tensors go back to the model dtype (F16/BF16 from torch_dtype) when the
 * matrices are F16/BF16; the caller must check the F32 -> F16 conversion is
 * exact (it is when the values came from F16) and keep F32 otherwise. */
unsigned qtk_hfmap_out_type(const qtk_hfmap *m, const qtk_tensor *src);

/* ---- the output as a view of the source --------------------------------------------------- */

/* What the converter needs to know about output tensor k of the view. */
typedef struct qtk_hfmap_out {
	int heads;      /* > 0: permute rows with this many heads (qtk_family_permute_rows) */
	bool inverse;   /* ... undoing llama.cpp's order (GGUF -> HF) */
	unsigned otype; /* storage type to write for a plain float tensor when the target keeps types */
	bool force_f32; /* stored as F32 in a GGUF whatever the target (MoE routers) */
	bool copy;      /* the bytes are one source tensor's own (no stacking, slicing or new values) */
	bool unmapped;  /* the family has no name for it: the source name is kept */
} qtk_hfmap_out;

/* The output's tensors in output order, as a model whose tensor k is output tensor k under
 * its output name, made of views (qtk_view) onto src's tensors: HF -> GGUF stacks each MoE
 * block's experts into one 3-D tensor (checking that every expert is there with the same
 * shape and layout), adds the tensors llama.cpp generates (Llama 3's rope_freqs) and the values
 * it changes (Gemma's norms + 1); GGUF -> HF splits the stacks and undoes those changes.
 * *view has no format: it is read through its views only; the metadata of meta (when not NULL)
 * is copied into it (the output's keys, for the quantization mixes). src and the map must
 * outlive *view; close *view with qtk_close before freeing the map. */
int qtk_hfmap_view(qtk_hfmap *m, qtk_model *src, const qtk_model *meta, qtk_model **view, qtk_err *err);
/* Output tensor k of the view (k < the view's ntensors). */
const qtk_hfmap_out *qtk_hfmap_view_out(const qtk_hfmap *m, size_t k);

/* Does GGUF g hold tensors an HF checkpoint stores otherwise: stacked experts, or tensors
 * llama.cpp's converter generates (rope factors)? */
bool qtk_hfmap_restructured(const qtk_model *g);
/* The GGUF g shaped like the HF checkpoint, for comparing the two (qverify --against, qinspect
 * --diff): its family's view with each expert split out under its HF name and generated
 * tensors left out, other tensors under their GGUF names (so canonical names still undo the
 * Q/K order). NULL (err set) when g has no known family. Close the model, then free *map. */
qtk_model *qtk_hfmap_hf_shaped(qtk_model *g, qtk_hfmap **map, qtk_err *err);

/* Set general.file_type (u32) in place in meta (added if absent). */
int qtk_hfmap_set_file_type(qtk_model *meta, uint32_t ftype);

void qtk_hfmap_free(qtk_hfmap *m);

/* A note for the user about something approximated or left out (for example
 * no tokenizer in the source), or NULL. */
const char *qtk_hfmap_warning(const qtk_hfmap *m);

/* ---- internal: BPE tokenizer.json <-> tokenizer.ggml.* (bpe.c) ------------ */
/* Append tokenizer.ggml.model "gpt2", pre, tokens, token_type and merges
 * (merges after the special ids as llama.cpp orders them is handled by the
 * caller: bpe writes model, pre, tokens, token_type and returns the merges
 * list through *merges / *nmerges, caller-owned qtk_str[]). n_vocab is
 * config.json's vocab_size (0: the tokenizer's size). pre NULL: the name
 * qtk_bpe_identify_pre finds in the tokenizer.json (its errors pass through). */
int qtk_bpe_hf_vocab(const qtk_model *hf, const char *pre, uint64_t n_vocab, qtk_model *meta,
		 qtk_str **merges, size_t *nmerges, qtk_err *err);
/* The tokenizer.ggml.pre name of a tokenizer.json (the parsed root, from the
 * strict parser), from its own definition rather than llama.cpp's hash of the
 * tokenizer's output: the pre_tokenizer, the normalizer and model.ignore_merges
 * must be exactly one of the shapes qtk knows (types, Split regex after JSON
 * unescaping, the flags that change the ids; unknown fields refuse):
 *   "llama-bpe" (Llama 3): Sequence[Split(Llama 3 regex, Isolated), ByteLevel
 *               without prefix space or regex], no normalizer, ignore_merges;
 *   "qwen2" (Qwen2, Qwen2.5, Qwen3): the same with the Qwen2 regex (single
 *               digits), NFC normalizer, no ignore_merges;
 *   "gpt-2":    a lone ByteLevel with its own regex, no prefix space, no
 *               normalizer, no ignore_merges.
 * *name is a static string. Anything else, or no pre_tokenizer: QTK_E_DATA
 * naming tokenizer.json, what was found and what is recognised. */
int qtk_bpe_identify_pre(const cJSON *tokenizer_json_root, const char **name, qtk_err *err);
/* tokenizer.json text from tokenizer.ggml.* ("gpt2" vocabularies). */
int qtk_bpe_gguf_tokenizer_json(const qtk_model *gguf, qtk_buf *out, qtk_err *err);

#endif
