/* st_json.h - strict JSON on top of cJSON, and the pieces the safetensors and
 * Hugging Face directory plugins share.
 *
 * cJSON is lenient where a model-file parser must not be: it keeps the last of
 * duplicate keys (so two readers can see two different files: TOB-SFTN-7), it
 * reads every number as a double, it truncates strings at an escaped NUL and it
 * accepts "+1", "1." and trailing garbage. qtk_json_parse scans the raw text
 * first and rejects all of these, then lets cJSON build the tree.
 */
#ifndef QTK_ST_JSON_H
#define QTK_ST_JSON_H

#include "internal.h"
#include <cJSON.h>

/* Numbers must be plain non-negative integers <= 2^53 (safetensors headers). */
#define QTK_JSON_INTS 1u
/* The text must start with '{' (no leading whitespace). */
#define QTK_JSON_BRACE_FIRST 2u

typedef struct qtk_json_doc {
	cJSON *root;
	uint64_t *key_off; /* text offset of each top-level object key, in order */
	size_t nkeys;
} qtk_json_doc;

/* Parse `len` bytes of `text` strictly: valid UTF-8, one JSON value followed
 * only by whitespace, no duplicate keys at any depth, no \u0000, no raw control
 * characters in strings, strict number grammar (see QTK_JSON_INTS), nesting at
 * most 256 deep. On error sets err (QTK_E_DATA, or QTK_E_IO for out of memory)
 * naming `file` and the offset `base` + position, and returns it. On success
 * doc owns the tree; free with qtk_json_doc_free. */
int qtk_json_parse(const char *text, size_t len, unsigned flags, const char *file,
		   int64_t base, qtk_err *err, qtk_json_doc *doc);
void qtk_json_doc_free(qtk_json_doc *doc);
/* Slurp a JSON file (<= cap bytes) and parse it strictly. When raw is not
 * NULL, the file's bytes are kept there (caller frees with qtk_free). */
int qtk_json_load(const char *path, uint64_t cap, unsigned flags, qtk_err *err,
		  qtk_json_doc *doc, uint8_t **raw, size_t *rawlen);
/* Byte offset of the i-th top-level key (base added), or base when unknown. */
int64_t qtk_json_key_off(const qtk_json_doc *doc, size_t i, int64_t base);
/* An exact non-negative integer value (<= 2^53); false otherwise. */
bool qtk_json_u64(const cJSON *item, uint64_t *out);
/* An exact integer value in [-2^53, 2^53]; false otherwise. */
bool qtk_json_i64(const cJSON *item, int64_t *out);
/* Make cJSON allocate through qtk_malloc (idempotent, thread-safe). */
void qtk_json_init(void);

/* ---- safetensors, shared with the HF directory plugin ------------------ */

/* Load one .safetensors file or a model.safetensors.index.json (with its
 * shards) into m: files, plain tensors in header order (one part each) and
 * __metadata__ as string kvs. */
int qtk_st_load(qtk_model *m, const char *path);
int qtk_st_load_index(qtk_model *m, const char *index_path);
bool qtk_st_is_index_name(const char *path);

/* ---- AWQ / GPTQ interpretation (hfdir.c) ------------------------------- */

/* Look for a quantization config next to the weights (config.json's
 * "quantization_config", quantize_config.json, quant_config.json) in dir and,
 * when it says awq or gptq, fold each <prefix>.qweight/.qzeros/.scales/.g_idx
 * set of m into one logical tensor <prefix>.weight. No config: nothing to do. */
int qtk_hf_apply_quant_dir(qtk_model *m, const char *dir);

/* A bare .safetensors file written by qtk carries the quantization config of
 * its AWQ/GPTQ tensors in __metadata__ under this key (a JSON string), so it
 * reads back as the same logical tensors without a config.json. */
#define QTK_ST_QCFG_KEY "qtk.quantization_config"
/* Fold m by its embedded config; 1 when it has none, else 0 or an error. */
int qtk_hf_apply_quant_embedded(qtk_model *m);
/* The compact JSON quantization config describing desc's AWQ/GPTQ tensors
 * (new string, qtk_free), or *out = NULL when it has none. QTK_E_DATA when
 * its tensors mix settings that one config cannot describe. */
int qtk_hf_quant_json(const qtk_model *desc, const char *path, qtk_err *err, char **out);

/* ---- writing ---------------------------------------------------------- */

/* Name of part p of tensor t as a safetensors entry: the tensor's name for a
 * plain tensor, "<prefix>.<role>" for AWQ/GPTQ (prefix = name without
 * ".weight"). Returns a new string or NULL when out of memory. */
char *qtk_st_part_name(const qtk_tensor *t, int p);

/* Check that every part of desc can be stored in safetensors (a dtype with a
 * safetensors name, nbytes matching its shape, rank <= 8) and that the entry
 * names are unique, non-empty and not "__metadata__". */
int qtk_st_check_desc(const qtk_model *desc, const char *path, qtk_err *err);

/* One safetensors output file holding desc tensors [t0, t1). */
typedef struct qtk_st_out {
	qtk_ofile of;
	bool opened;
	char *path;
	size_t t0, t1;
	uint64_t data_bytes;
	uint64_t head_len;   /* JSON header bytes (after the 8-byte length) */
	bool embed_qcfg; /* write QTK_ST_QCFG_KEY (bare files; HF dirs have config.json) */
} qtk_st_out;

/* Lay out the header (__metadata__ from desc's string kvs, entries in desc
 * order), open the temporary output and write the header. */
int qtk_st_out_open(qtk_st_out *o, const qtk_model *desc, qtk_err *err);
/* JSON string literal of s (n bytes) appended to b; QTK_E_DATA when s is not
 * valid UTF-8 or holds a NUL, QTK_E_IO when out of memory. */
int qtk_json_put_str(qtk_buf *b, const char *s, size_t n);

#endif
