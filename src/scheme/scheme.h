/* scheme.h - the packed-scheme layer: one descriptor per packed weight scheme.
 *
 * A packed scheme stores one logical matrix [out, in] as several parts (codes, zero points,
 * scales, a group map ...) whose dtypes and shapes follow from out, in, the code bits and the
 * group size. Everything qtk knows about a scheme is in its descriptor (awq.c, gptq.c), found
 * through the table in scheme.c by layout kind, by name or by a quantization config's
 * quant_method: the parts, the ONE validation every reader, writer and planner uses, row decode
 * and encode (hooks to the codecs), the exact transcodes, the quantization-config keys
 * (fold.c) and the byte accounting.
 *
 * Adding a scheme: a new file with its descriptor, a qtk_layout_kind, one row in scheme.c's
 * table. The descriptor already has room for what the next schemes need: per-tensor, -channel
 * or -group scales (strategy), float codes (codes), a global scale or nested quantization
 * state (extra parts, optional or not, with their own shape functions).
 *
 * Group rule (all schemes so far): groups are whole, `in % group == 0`, ngroups = in / group.
 * AutoGPTQ writes ceil(in / group) groups when they are not, and qtk's GPTQ decoder could decode
 * them, but the AWQ decoder, both encoders, the exact transcodes and QPK's group map (every
 * group has exactly `group` members) need whole groups, so every reader refuses a partial last
 * group with the same message. */
#ifndef QTK_SCHEME_H
#define QTK_SCHEME_H

#include "qtk.h"

struct cJSON;   /* quantization configs (fold.h) */
struct qgroups; /* integer groups (qgroups.h) */

/* How scales are shared. */
typedef enum {
	QTK_SCHEME_PER_TENSOR, /* one scale (and zero) for the matrix */
	QTK_SCHEME_PER_CHANNEL,/* one per output feature */
	QTK_SCHEME_PER_GROUP,  /* one per output feature and group of `group` inputs */
	QTK_SCHEME_PER_BLOCK,  /* one per tile of `group` x `group` (FP8 block) */
} qtk_scheme_strategy;

/* What a code is. */
typedef enum {
	QTK_SCHEME_CODES_INT,   /* unsigned integer codes: (q - zero) * scale */
	QTK_SCHEME_CODES_FLOAT, /* small floats (fp8, fp4) times a scale */
} qtk_scheme_codes;

/* The sizes a part's shape is a function of. */
typedef struct qtk_scheme_dims {
	uint64_t out, in;     /* logical [out, in] */
	uint64_t bits, group; /* code bits, group size (in for one group) */
	uint64_t ngroups;     /* in / group */
} qtk_scheme_dims;

typedef struct qtk_scheme_part {
	const char *role; /* the part's role, also the checkpoint suffix "<prefix>.<role>" */
	unsigned type;    /* storage dtype (QTK_T_*) */
	int ndim;
	bool optional;    /* may be absent (GPTQ's g_idx); optional parts come last */
	bool marks;       /* a checkpoint tensor "<prefix>.<role>" is always a packed part: without
			   * its "<prefix>.<first role>" it is an error, not a plain tensor */
	void (*shape)(const qtk_scheme_dims *d, uint64_t shape[2]);
} qtk_scheme_part;

/* An exact transcode: a source of this scheme with these bits (and symmetry, group alignment)
 * becomes `kind` (another scheme, or PLAIN with ggml `type`) with bit-identical values. Rows are
 * listed smallest target first. */
typedef struct qtk_scheme_transcode {
	qtk_layout_kind kind;
	unsigned type;        /* PLAIN: the ggml type */
	uint32_t bits_mask;   /* bit b set: b-bit sources */
	bool need_sym;        /* only symmetric sources */
	uint32_t group_align; /* the source group (and in) must be a multiple of this; 0: any */
} qtk_scheme_transcode;

typedef struct qtk_qcfg qtk_qcfg;
typedef struct qtk_scheme qtk_scheme;

/* A checkpoint form of a scheme: the part roles (checkpoint suffixes through the scheme's
 * suffix map) that together mark one packed module, and the storage type the first must have
 * (0: any). Used to recognise packed parts when the quantization config that would fold them is
 * missing (qtk_scheme_unexplained). */
typedef struct qtk_scheme_form {
	const char *role[4]; /* NULL-terminated */
	unsigned type;
} qtk_scheme_form;

struct qtk_scheme {
	const char *name;         /* "awq-gemm", "gptq" */
	const char *title;        /* in messages: "awq (gemm)", "gptq" */
	const char *quant_method; /* the quantization config's quant_method ("awq", "gptq") */
	qtk_layout_kind kind;
	qtk_scheme_strategy strategy;
	qtk_scheme_codes codes;
	uint32_t bits_mask;       /* bit b set: b-bit codes are decoded and encoded */
	bool has_version;         /* layout.gptq_version is meaningful (1 or 2) */
	uint32_t row_align;       /* decode_rows/encode_rows take rows from multiples of this */
	/* encode_rows of the rows from 0 also writes values that decoding any row reads (GPTQ's
	 * g_idx); this puts them in place first, so that every slice can be encoded and checked at
	 * once (encode_rows then leaves them be). NULL: the scheme has no such values. */
	void (*write_shared)(const qtk_tensor *t, void *const *pp);
	/* every part is rows of output features ([out][...]), tensor-wide (at most 2 elements: a
	 * global scale, the shape) or indexed by input (act-order's g_idx): a tensor's output rows
	 * move as rows of its parts (checked per tensor: conv_rows_movable), unlike AWQ's and GPTQ's,
	 * which pack output features across a word */
	bool parts_by_row;
	int nparts;
	const qtk_scheme_part *parts;
	/* The storage type part k of t must have, when it depends on the tensor (MLX scales in the
	 * model's float type); NULL: parts[k].type. */
	unsigned (*part_type)(const qtk_tensor *t, int k);
	/* Scheme-specific layout rules beyond bits, group, ranges and part shapes (flags, version,
	 * packing divisibility); 0 or QTK_E_DATA with the problem in why. */
	int (*check_layout)(const qtk_tensor *t, char *why, size_t wn);
	/* The logical [out, in] from the stored parts (present[k]: part k exists); 0, or QTK_E_DATA
	 * with the problem in why and *bad the offending part. */
	int (*infer)(const qtk_part *parts, const bool *present, unsigned bits, uint64_t *out, uint64_t *in,
		     int *bad, char *why, size_t wn);
	/* Output features o0 .. o0+n-1 of a valid tensor t from its whole parts, into dst [n][in]. */
	int (*decode_rows)(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, float *dst);
	/* Fit output features o0 .. o0+n-1 (values x [n][in]) into the whole parts of t. */
	int (*encode_rows)(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *parts);
	/* Integer codes (QTK_SCHEME_CODES_INT): the whole tensor as integer groups, and back into
	 * the parts of o (wrap: as in qg_to_gptq); 0, or -1 when not representable. */
	int (*to_groups)(const qtk_tensor *t, const void *const *parts, struct qgroups *g);
	int (*from_groups)(const struct qgroups *g, const qtk_tensor *o, bool wrap, void *const *parts);
	const qtk_scheme_transcode *transcodes;
	int ntranscodes;
	/* Quantization config (fold.c): read the scheme's keys of config object o into q (q->bad
	 * says why it cannot be used), and add q's keys to a new object o. */
	void (*config_read)(const struct cJSON *o, qtk_qcfg *q);
	bool (*config_write)(const qtk_qcfg *q, struct cJSON *o);
	/* Schemes whose parts depend on the layout beyond the shape functions (which parts exist,
	 * their dtypes: compressed-tensors, FP8, NVFP4): every part of layout l on d in storage
	 * order (role, type, ndim, shape) into p, whether each is optional into opt; returns the
	 * count. qtk_scheme_check matches a tensor's parts against this list in order (an absent
	 * optional part is skipped), qtk_scheme_describe takes the optional ones when asked. */
	int (*part_specs)(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS],
			  bool opt[QTK_MAX_PARTS]);
	/* The checkpoint suffix of a role when it is not the role itself (roles have 7 bytes at
	 * most); NULL: the roles are the suffixes. */
	const char *(*suffix)(const char *role);
	/* Output features o0 .. o0+n-1 of t (whole parts, or a window's, as t describes them) as
	 * the runs of content digest version 3 (docs/provenance.md 1.2, form 8): per run of 32
	 * inputs the F32 bits of its scale (little-endian u32), then its 32 differences code - zero
	 * as bytes, as the decoder reads them; in / 32 runs of 36 bytes a row into w, rows in stored
	 * order. With n = 0 (parts and w unused): whether t has that form here. 0, or -1 when it has
	 * not (the caller decodes instead). NULL: never. */
	int (*runs_rows)(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, uint8_t *w);
	/* Rows o0 .. o0+n-1 of a valid 2-D tensor t as blocks of ggml type `type` with the same
	 * codes and scales (a byte shuffle: MXFP4), into dst; 0, or -1 when it has no such form. */
	int (*to_ggml_rows)(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, unsigned type,
			    void *dst);
	/* The checkpoint forms of its modules; NULL: one form, the required parts (parts[], the
	 * first one's type). */
	const qtk_scheme_form *forms;
	int nforms;
	/* The quantization config that explains its parts, for messages: where it lives and the
	 * keys it needs, e.g. `config.json "quantization_config": {"quant_method": "awq", ...}`. */
	const char *config_hint;
};

/* NVFP4 (ct.c): the per-tensor F32 multiplier llama.cpp keeps beside the ggml NVFP4 blocks of
 * qtk_scheme_to_ggml_rows as `<name>.scale`: ModelOpt's weight_scale_2, compressed-tensors'
 * 1/weight_global_scale (in F32, as llama.cpp's converter computes it). 0, or -1. */
int qtk_nvfp4_ggml_scale(const qtk_tensor *t, const void *const *parts, float *scale);

/* ggml NVFP4 blocks of `rows` rows of `in` inputs as ModelOpt's codes [rows, in/2] and E4M3 block
 * scales [rows, in/16] (either may be NULL: only checked), a byte shuffle that decodes (ModelOpt as
 * llama.cpp reads it) to ggml's values bit for bit; -1 when in % 64 or a scale byte has no E4M3
 * form (0xFF, which ggml reads as 480). */
int qtk_nvfp4_from_ggml(const uint8_t *blocks, uint64_t rows, uint64_t in, uint8_t *codes, uint8_t *scales);

/* MXFP4 (mxfp4.c): layout.scale_type of compressed-tensors' mxfp4-pack-quantized form (0 is
 * gpt-oss's blocks/scales). */
#define QTK_MXFP4_CT 1
/* ggml MXFP4 blocks of `rows` rows of `in` inputs as compressed-tensors' (and gpt-oss's) codes
 * [rows, in/2] and E8M0 scales [rows, in/32] (either may be NULL), a byte shuffle that decodes to
 * ggml's values (code 8: -0.0 there, +0.0 in ggml); -1 when in % 32. */
int qtk_mxfp4_from_ggml(const uint8_t *blocks, uint64_t rows, uint64_t in, uint8_t *codes, uint8_t *scales);
/* The checkpoint suffix of part p of packed tensor t ("<prefix>.<suffix>"). */
const char *qtk_scheme_part_suffix(const qtk_tensor *t, int p);

/* ---- lookup ---------------------------------------------------------------------------- */

size_t qtk_scheme_count(void);
const qtk_scheme *qtk_scheme_at(size_t i);
/* NULL when the kind is not a packed scheme (PLAIN). */
const qtk_scheme *qtk_scheme_by_kind(qtk_layout_kind kind);
const qtk_scheme *qtk_scheme_by_name(const char *name);
/* By a quantization config's quant_method (case-insensitive); NULL for other methods. */
const qtk_scheme *qtk_scheme_by_method(const char *quant_method);
/* The scheme of a tensor, NULL for a plain tensor. */
const qtk_scheme *qtk_scheme_of(const qtk_tensor *t);
/* Index of the part with this role, or -1. */
int qtk_scheme_part_index(const qtk_scheme *s, const char *role);
/* Index of tensor t's part with this role, or -1. */
int qtk_tensor_part_index(const qtk_tensor *t, const char *role);
/* runs_rows of 4-bit AWQ and GPTQ (scheme.h): the checks they share (4 bits, no act-order,
 * groups a multiple of 32, qweight/qzeros/scales of the 4-bit sizes, F16 scales, rows o0 and n
 * whole words of 8 outputs) and the runs' scales written into w (each the F32 bits of its
 * group's scale, as the decoder widens it). -1: t has no such form; 0: a probe (n = 0) that
 * qualifies; 1: the caller writes the differences (the geometry and the packed parts in r). */
typedef struct qtk_int4_runs {
	const uint8_t *qw, *qz;
	uint64_t out, in, g, ng, runs;
} qtk_int4_runs;
int qtk_int4_runs_begin(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, uint8_t *w,
			qtk_int4_runs *r);

/* "2, 3, 4 or 8", "4": the bits a scheme supports. */
void qtk_scheme_bits_text(const qtk_scheme *s, char *buf, size_t n);

/* Packed parts that no quantization config explained: a plain tensor of m that, with the
 * tensors named beside it, has the parts of a checkpoint form of some scheme (a bare AWQ
 * model.safetensors without its config.json: qweight, qzeros and scales stay I32/F16 tensors).
 * 0 when there is none; else QTK_E_DATA with a message in err (file m's path, subject the first
 * such tensor) that names the scheme(s) it looks like, the parts found, the modules so affected
 * and the config that would explain them. Readers fold first; programs then ask here (qconvert
 * refuses, qinspect warns). */
int qtk_scheme_unexplained(const qtk_model *m, qtk_err *err);

/* ---- shapes, validation, bytes ---------------------------------------------------------- */

/* The dims of a layout on [out, in]; QTK_E_DATA (why) when the group does not give whole
 * groups. */
int qtk_scheme_dims_of(const qtk_layout *l, uint64_t out, uint64_t in, qtk_scheme_dims *d, char *why, size_t wn);

/* THE validation of a packed tensor description: rank, bits, group, ranges, the scheme's
 * layout rules, the number of parts and each part's role, dtype and shape. 0, or QTK_E_DATA
 * with the problem in why and *bad_part the offending part index (-1: the layout itself).
 * Part byte sizes against their shapes are the container's business. */
int qtk_scheme_check(const qtk_tensor *t, int *bad_part, char *why, size_t wn);

/* Fill t (name not touched) as a tensor of layout l on [out, in] with the scheme's parts (the
 * optional ones when with_optional), byte sizes set, qtk_tensor_finish applied. QTK_E_DATA
 * (why) when l is not a valid packed layout for [out, in]. */
int qtk_scheme_describe(qtk_tensor *t, const qtk_layout *l, uint64_t out, uint64_t in, bool with_optional,
			char *why, size_t wn);

/* Bytes of every part of layout l on [out, in] (optional parts when with_optional) into
 * bytes[part] (may be NULL) and their sum into *total; QTK_E_DATA on a bad layout. */
int qtk_scheme_bytes(const qtk_layout *l, uint64_t out, uint64_t in, bool with_optional,
		     uint64_t bytes[QTK_MAX_PARTS], uint64_t *total);

/* ---- codecs ------------------------------------------------------------------------------ */

/* Rows o0 .. o0+n-1 of valid packed tensor t from its whole parts (o0 a multiple of
 * s->row_align, n too unless the rows reach the last one): 0, or -1 on bad arguments /
 * inconsistent parts / out of memory. */
int qtk_scheme_decode_rows(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, float *dst);
/* Where the bytes of a window of rows sit in one part: `count` runs of `len` bytes, the first
 * at byte `off` of the part, each `stride` bytes after the one before. */
typedef struct qtk_scheme_slice {
	uint64_t off, len, stride, count;
} qtk_scheme_slice;
/* Rows o0 .. o0+n-1 of packed t (3-D: within one expert; o0 and n as for decode_rows) as a
 * 2-D packed tensor of their own: *sub describes them (shape [n, in], each part's shape and
 * bytes; no file offsets), sl[p] says which bytes of t's part p hold sub's part p, so that
 * decode_rows, to_groups ... on sub with those bytes give t's rows. Parts that do not depend on
 * the rows (a g_idx) are read whole. -1 when t's parts do not split by rows that way. */
int qtk_scheme_window(const qtk_tensor *t, uint64_t o0, uint64_t n, qtk_tensor *sub, qtk_scheme_slice *sl);
/* After the parts of 2-D packed o were built window by window (from_groups on each window's
 * sub-tensor, every window's bytes copied to its slices): the parts that describe the whole
 * tensor rather than its rows are set for o (compressed-tensors' weight_shape, which each window
 * wrote as its own [n, in]). */
void qtk_scheme_window_finish(const qtk_tensor *o, void *const *parts);
/* Rows o0 .. o0+n-1 of packed tensor t (3-D: expert after expert) as ggml blocks of `type` by
 * the scheme's byte shuffle (to_ggml_rows): 0, or -1 when it has none for type. */
int qtk_scheme_to_ggml_rows(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, unsigned type,
			    void *dst);
/* Fit rows o0 .. o0+n-1 (values x [n][in]) into the whole parts of t: 0 or -1. */
int qtk_scheme_encode_rows(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *parts);

/* The whole packed tensor t as integer groups (qgroups.h; qg_free), and integer groups into
 * the whole parts of o: the exact repacks. 0, or -1 on inconsistent parts, allocation failure,
 * or values the target cannot hold. */
int qtk_scheme_to_groups(const qtk_tensor *t, const void *const *parts, struct qgroups *g);
int qtk_scheme_from_groups(const struct qgroups *g, const qtk_tensor *o, bool wrap, void *const *parts);

/* ---- exact transcodes ---------------------------------------------------------------------- */

/* The exact transcodes of integer groups with fp16 scales (AWQ, GPTQ, and ggml's q4_0/q8_0 as
 * sources), smallest target first. */
#define QTK_SCHEME_INT_NTRANSCODES 6
extern const qtk_scheme_transcode qtk_scheme_int_transcodes[QTK_SCHEME_INT_NTRANSCODES];

/* The smallest ggml type that holds a source of packed kind `from` with these bits, symmetry
 * and group on `in` inputs exactly (without act-order), or 0. */
unsigned qtk_scheme_exact_ggml(qtk_layout_kind from, unsigned bits, bool sym, uint64_t group, uint64_t in);
/* Does the scheme `from` have an exact transcode to packed kind `to` for these bits? */
bool qtk_scheme_exact_to(qtk_layout_kind from, qtk_layout_kind to, unsigned bits);

#endif
