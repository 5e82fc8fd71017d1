/* st_json.h - the pieces the safetensors, Hugging Face directory and archive
 * plugins share (the strict JSON parser itself is src/json.h). */
#ifndef QTK_ST_JSON_H
#define QTK_ST_JSON_H

#include "internal.h"
#include "json.h"

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

/* Can safetensors (a file or an HF directory) store t: every part a dtype with a
 * safetensors name, nbytes matching its shape, rank <= 8; with_name: entry names
 * non-empty and not "__metadata__". The capability of both descriptors. */
int qtk_st_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err);

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

#endif
