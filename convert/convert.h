/* convert.h - qconvert's plan and execution. */
#ifndef QTK_CONVERT_H
#define QTK_CONVERT_H
#include "qtk_ext.h"

enum { NAMES_DEFAULT = 0, NAMES_KEEP, NAMES_HF, NAMES_GGUF };

typedef enum { TGT_KEEP = 0, TGT_TYPE, TGT_MIX, TGT_AWQ, TGT_GPTQ, TGT_AUTO_EXACT, TGT_MLX, TGT_CT, TGT_CT_FP8 } target_kind;

typedef struct conv_target {
	target_kind kind;
	unsigned type; /* TGT_TYPE: storage type; TGT_MIX: the mix's base type */
	int ftype;     /* llama_ftype for general.file_type, -1 when none */
	int gptq_version; /* TGT_GPTQ: 0 = v1 when every zero fits, else v2; 1; 2 */
} conv_target;

#define CONV_MAX_SETS 256

typedef struct conv_opts {
	const char *input, *output;
	qtk_out_kind out_kind;
	conv_target target;
	bool exact, dry_run, has_max_error, sym, pure;
	bool force;          /* --force: replace a directory OUTPUT whatever it holds */
	bool nv_scale_ok;    /* the run can add <name>.scale tensors beside NVFP4 blocks (conv_nvfp4_scaled) */
	const bool *nv_pick; /* per input tensor: shuffled into NVFP4 blocks (conv_nvfp4_scaled), or NULL */
	const float *nv_scales; /* ... with this per-tensor multiplier */
	unsigned bits;       /* --bits (gptq, mlx), 0 = default */
	uint32_t group_size; /* --group-size, 0 = default */
	bool fp8_block;      /* --strategy block: ct-fp8 in 128 x 128 blocks (else per channel) */
	bool has_strategy;   /* --strategy given */
	const char *imatrix_path;
	const char *target_name; /* the --to value as given, NULL = keep */
	int names;           /* NAMES_* (--names), NAMES_DEFAULT from the output's form */
	uint64_t split_max_size;
	double max_error_db;
	const char *report;
	int threads;
	int nsets;
	const char *sets[CONV_MAX_SETS];
	size_t ncarry;                      /* --carry NAME: side files carried though not known */
	const char *carry[CONV_MAX_SETS];
} conv_opts;

/* Error of a converted tensor against its decoded source. */
typedef struct errstat {
	double sum_sq_err, sum_sq_ref, sum_sq_out, dot, max_abs;
	uint64_t n;
	uint64_t n_diff_bits; /* 0 when every value's bits are equal (else positive: a count of them
			       * or, from the vector path, of chunks holding one) */
} errstat;

typedef struct tensor_result {
	char *name;            /* owned (conv_result_free) */
	const char *from, *to; /* layout ids, interned (qtk_intern) */
	bool exact, lossy_possible;
	double rmse, max_abs_err, sqnr_db, cosine;
	double bias; /* <out, src> / <src, src>: 1 when unbiased, < 1 when the fit shrinks the weights */
	uint64_t bytes_in, bytes_out;
} tensor_result;

typedef struct conv_result {
	size_t n;
	tensor_result *t;
	uint64_t bytes_in, bytes_out, params;
	size_t n_exact, n_requant;
	double worst_sqnr;
	const char *worst_name;
	double elapsed;
	qtk_outlist outs;
} conv_result;

/* How a tensor is produced. */
typedef enum {
	M_COPY,   /* parts copied byte for byte */
	M_ROWS,   /* row chunks decoded and re-encoded (or transcoded) to a plain type */
	M_GROUPS, /* whole tensor to AWQ/GPTQ/MLX: transcoded when exact, else re-fitted */
} conv_method;

typedef struct plan {
	const qtk_tensor *src;
	const char *out_name; /* output name (the source's, or mapped HF <-> GGUF) */
	int perm_heads;       /* > 0: permute rows (llama.cpp's Q/K order) with this many heads */
	bool perm_inverse;    /* undo the permutation (GGUF -> HF) */
	unsigned map_otype;   /* with a name mapping: the float type to keep (qtk_hfmap_out.otype) */
	bool force_f32;       /* with a name mapping: F32 in a GGUF whatever the target (MoE routers) */
	conv_method method;
	qtk_tensor *out;     /* output description (name borrowed from src): conv_plan fills the
			      * caller's array; once the output's description holds the tensors,
			      * its own entry (one table of descriptions, not two) */
	const float *imatrix;/* per-column importance, or NULL */
	uint64_t imatrix_rows; /* > 0: a vector of importance per this many rows (one per expert of a
				* 3-D tensor), consecutive in imatrix; 0: one vector for every row */
	bool imatrix_run;    /* the conversion uses an importance matrix (imatrix may still be NULL) */
	const char *note;    /* for the plan line: "exact", "lossy", "repack" ... */
	bool nv_scaled;      /* NVFP4 layer into ggml NVFP4 blocks by a byte shuffle; the values are the
			      * blocks times nv_scale (written beside as <name>.scale unless it is 1) */
	float nv_scale;
} plan;

enum { CONV_TARGET_UNKNOWN = -1, CONV_TARGET_READ_ONLY = -2 };
/* 0, CONV_TARGET_UNKNOWN or CONV_TARGET_READ_ONLY (a type qtk reads but cannot write). */
int conv_parse_target(const char *s, conv_target *t);
/* --pure: a mix becomes its base type for every matrix; -1 when the target is not a ggml mix/type. */
int conv_apply_pure(conv_target *t);
/* Every name --to accepts (up to cap); returns the count. */
size_t conv_target_names(const char **names, size_t cap);
/* An NVFP4 layer (ModelOpt, compressed-tensors) that goes into a GGUF as ggml NVFP4 blocks (a
 * byte shuffle) with the per-tensor multiplier llama.cpp keeps beside them as `<name>.scale`:
 * 1 (*scale its F32 value), 0 when it goes another way, or an error status. */
int conv_nvfp4_scaled(qtk_model *in, const conv_opts *o, const qtk_tensor *t, float *scale, qtk_err *err);
/* Decide every tensor's method and output; fills plans[] and outs[] (in->ntensors each),
 * plans[i].out pointing at outs[i]. Each output's parts go into room of its own in `room`'s
 * part chunks (exactly as many as it has; the output model's, which then takes them over). */
int conv_plan(qtk_model *in, const conv_opts *o, const void *imatrix, const qtk_hfmap *map, plan *plans,
	      qtk_tensor *outs, qtk_model *room, qtk_err *err);
/* The output's metadata and side files. */
int conv_build_meta(qtk_model *in, const conv_opts *o, qtk_model *d, qtk_err *err);
/* card.c: the README.md of a Hugging Face directory output (front matter base_model: the
 * source's hub id, base_model_relation: quantized), set as d's side file. */
int conv_model_card(const qtk_model *in, qtk_model *d, const conv_opts *o, qtk_err *err);
/* A hub repository id owner/name (letters, digits, . _ -; no "--" or ".."). */
bool conv_repo_id_ok(const char *s);
/* The provenance record's decoded-tier sink, when there is one, and where the tensor goes in the
 * output's description: a packed output's check hashes the values it decodes and hands the
 * leaf to the sink (qtk_digest_sink_decoded), which then need not hold the parts to decode them. */
typedef struct conv_rec {
	qtk_digest_sink *dec;
	const qtk_model *desc;
	size_t k;
	bool src_leaf; /* the source's digests will hold this tensor's decoded leaf (same canonical
			* name, shape and row order), for outputs proven to decode to the same values */
} conv_rec;
/* Can a packed 2-D tensor's rows (output features) be moved as rows of its parts? Its scheme
 * says its parts are (parts_by_row: MLX, FP8, NVFP4, MXFP4, compressed-tensors int), and this
 * tensor's are: rows of output features, tensor-wide (at most 2 elements) or indexed by input
 * (act-order's g_idx: left as it is); not asymmetric ct-int, whose zero points pack output
 * features across a word as AWQ's and GPTQ's codes do. */
bool conv_rows_movable(const qtk_tensor *t);
/* Produce one tensor into the writer; measures the error against the decoded source. rec may be
 * NULL. */
int conv_tensor(qtk_model *in, qtk_writer *w, const plan *p, int threads, const conv_rec *rec, tensor_result *r,
		qtk_err *err);
/* repack.c: an exact 4-bit AWQ <-> GPTQ repack streamed by bands of input rows, when the tensor
 * is one (*done; else nothing was written and the caller takes another path). */
int conv_stream_repack(qtk_model *in, qtk_writer *w, const plan *p, int threads, const conv_rec *rec,
		       tensor_result *r, bool *done, qtk_err *err);
/* Plan, write and verify. Returns the exit status (0, 1, or an error status). */
int conv_run(qtk_model *in, const conv_opts *o, conv_result *res);
void conv_print_summary(const conv_opts *o, const conv_result *res);
void conv_result_free(conv_result *res);
#endif
