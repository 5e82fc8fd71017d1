/* fold.h - quantization configs, and folding a checkpoint's packed parts into logical tensors.
 *
 * A packed linear layer is stored as <prefix>.<role> tensors (AWQ: qweight, qzeros, scales;
 * GPTQ: the same and an optional g_idx); under a quantization config naming a packed scheme
 * they become one logical tensor <prefix>.weight [out, in] whose parts are those tensors in
 * the scheme's order. Any reader of safetensors (a bare file, an HF directory, an archive
 * member) folds through these functions. */
#ifndef QTK_SCHEME_FOLD_H
#define QTK_SCHEME_FOLD_H

#include "scheme.h"

/* A quantization config as qtk reads and writes it. */
struct qtk_qcfg {
	qtk_layout_kind kind;     /* PLAIN: no packed-scheme config */
	const qtk_scheme *scheme; /* the scheme of kind, NULL for PLAIN */
	int bits;
	int64_t group;            /* -1: one group per input row */
	bool sym;
	bool desc_act;
	bool one_group;           /* every layer is a single group (group -1 fits) */
	int version;              /* GPTQ checkpoint format 1 or 2; 0 for schemes without versions */
	uint8_t strategy;         /* compressed-tensors: how scales are shared (qtk_scheme_strategy) */
	bool unpacked;            /* compressed-tensors int8 stored as I8 (int-quantized), not packed in I32 */
	uint16_t form;            /* MXFP4: layout.scale_type (0 gpt-oss, QTK_MXFP4_CT compressed-tensors) */
	char bad[160];            /* why this config cannot be used ("" when it can) */
	const qtk_model *desc;    /* qtk_qcfg_from_desc: the description (borrowed), for the modules
				   * left in float (modules_to_not_convert) */
};

/* Interpret a quantization config object; `def_method` is used when it names no quant_method
 * (quantize_config.json: "gptq"; quant_config.json: "awq"). Another method: kind PLAIN. */
void qtk_qcfg_read(const struct cJSON *o, const char *def_method, qtk_qcfg *q);
/* The config desc's packed tensors share (kind PLAIN when none); group -1 when the layers
 * differ only in being one group each. QTK_E_DATA (err) when one config cannot describe them. */
int qtk_qcfg_from_desc(const qtk_model *desc, const char *path, qtk_err *err, qtk_qcfg *q);
/* Does `have` (read from a file) describe the same quantization as `want` (from a desc)? */
bool qtk_qcfg_same(const qtk_qcfg *have, const qtk_qcfg *want);
/* New cJSON object for q (kind not PLAIN), NULL when out of memory. */
struct cJSON *qtk_qcfg_json(const qtk_qcfg *q);

/* ---- what every scheme's fold shares ---- */
/* m's tensors sorted by name, to find a module's parts PREFIX.SUFFIX. */
typedef struct qtk_fold_name {
	const char *name;
	size_t i;
} qtk_fold_name;
/* New index of m's tensors (qtk_free), NULL when out of memory. */
qtk_fold_name *qtk_fold_index(const qtk_model *m);
/* The tensor named prefix[0..plen) + "." + suffix among the n of ix, or -1. */
long qtk_fold_lookup(const qtk_fold_name *ix, size_t n, const char *prefix, size_t plen, const char *suffix);
/* A fold refuses a tensor: QTK_E_DATA in m->err naming the file of its first part (else the
 * model's path) and the tensor; returns QTK_E_DATA. */
int qtk_fold_terr(qtk_model *m, const char *tensor, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A logical tensor being made (an entry of a fold's table of modules, which replaces its
 * components in m): zeroed, with room for n parts in m. QTK_E_IO (m->err set) out of memory. */
int qtk_fold_new_tensor(qtk_model *m, qtk_tensor *out, int n);
/* A fold refuses a config key of cfgfile. */
int qtk_fold_cerr(qtk_model *m, const char *cfgfile, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Read t's one part, which must be exactly n bytes (a scale, a quant_state ...). */
int qtk_fold_read_small(qtk_model *m, const qtk_tensor *t, uint8_t *buf, size_t n);

/* Fold m's packed parts by the config object qc (cfgfile names it in errors). */
int qtk_scheme_fold(qtk_model *m, const struct cJSON *qc, const char *def_method, const char *cfgfile);
/* compressed-tensors (ct.c): fold m by quantization config qc, whose quant_method is
 * "compressed-tensors", module by module (config_groups targets, ignore). */
int qtk_ct_fold(qtk_model *m, const struct cJSON *qc, const char *cfgfile);
/* DeepSeek-style block FP8 (quant_method "fp8": weight F8_E4M3, weight_scale_inv F32 per
 * weight_block_size tile) and ModelOpt NVFP4 (quant_method "modelopt", quant_algo NVFP4: weight
 * U8, weight_scale F8_E4M3, weight_scale_2 F32 []), folded into fp8 / nvfp4 layouts (ct.c). */
int qtk_fp8_fold(qtk_model *m, const struct cJSON *qc, const char *cfgfile);
int qtk_modelopt_fold(qtk_model *m, const struct cJSON *qc, const char *cfgfile);
/* bitsandbytes 4-bit (quant_method "bitsandbytes", load_in_4bit): each module's weight,
 * absmax, quant_map, nested parts and quant_state JSON folded into a bnb4 layout (bnb.c). */
int qtk_bnb_fold(qtk_model *m, const struct cJSON *qc, const char *cfgfile);
/* bitsandbytes LLM.int8 (load_in_8bit): each module's I8 weight and F32 SCB folded into a bnb8
 * layout, its weight_format (0: row-major) checked and dropped (bnb8.c; called by qtk_bnb_fold). */
int qtk_bnb8_fold(qtk_model *m, const char *cfgfile);
/* gpt-oss MXFP4 (quant_method "mxfp4", mxfp4.c): <prefix>_blocks and <prefix>_scales into one
 * logical tensor <prefix>; modules_to_not_convert (globs) must hold no such pair. */
int qtk_mxfp4_fold(qtk_model *m, const struct cJSON *qc, const char *cfgfile);
/* llm-compressor's quantization_config for q (pack-quantized ct-int layers, float-quantized
 * FP8 per channel or 128 x 128 block); NULL when out of memory. */
struct cJSON *qtk_ct_config_json(const qtk_qcfg *q);
/* ModelOpt's NVFP4 export (ct.c): config.json's quantization_config (NULL when out of memory)
 * and the text of hf_quant_config.json (new string, qtk_free; NULL when out of memory), for q
 * of kind NVFP4 (ModelOpt's layout, scale_type 1). */
struct cJSON *qtk_modelopt_config_json(const qtk_qcfg *q);
char *qtk_modelopt_hf_quant_text(const qtk_qcfg *q);
/* Fold by the quantization config of a model directory: config.json's quantization_config
 * (`cfg` is config.json's parsed root when the caller has it, else it is read), else
 * quantize_config.json, else quant_config.json. No config: nothing to do. */
int qtk_scheme_fold_dir(qtk_model *m, const char *dir, const struct cJSON *cfg);

/* A bare .safetensors file written by qtk carries the quantization config of its packed
 * tensors in __metadata__ under this key (a JSON string), so it reads back as the same logical
 * tensors without a config.json. */
#define QTK_ST_QCFG_KEY "qtk.quantization_config"
/* Fold m by its embedded config; 1 when it has none, else 0 or an error. */
int qtk_scheme_fold_embedded(qtk_model *m);
/* The compact JSON quantization config describing desc's packed tensors (new string,
 * qtk_free), or *out = NULL when it has none. QTK_E_DATA when its tensors mix settings that
 * one config cannot describe. */
int qtk_scheme_quant_json(const qtk_model *desc, const char *path, qtk_err *err, char **out);

/* Put folded tensors in place of their components: tensor i of m stays when gid[i] < 0 (or is
 * dropped, its name freed, when drop && drop[i]); otherwise it is a component of mods[gid[i]],
 * which takes the place of its first component, and its name is freed. m then owns the mods
 * (their names) and *nmods becomes 0; the caller frees the mods array itself. QTK_E_IO in
 * m->err (m unchanged) when out of memory. The one reordering of every scheme's fold. */
int qtk_fold_replace(qtk_model *m, const long *gid, const bool *drop, qtk_tensor *mods, size_t *nmods);

#endif
