/* qtk.h - public interface of libqtk.
 *
 * The library never prints. Every fallible function returns 0 or a negative
 * QTK_E_* code and records details in a qtk_err owned by the caller or the
 * handle (the first error wins).
 */
#ifndef QTK_H
#define QTK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QTK_VERSION "0.1.0"

/* Error codes: the negation of the programs' exit status (docs/cli.md, "Exit status"). */
enum {
	QTK_OK = 0,
	QTK_E_CHECK = -1,    /* a check failed */
	QTK_E_USAGE = -2,    /* bad argument */
	QTK_E_DATA = -3,     /* malformed, inconsistent, unsupported or hostile input */
	QTK_E_IO = -4,       /* I/O or system error (incl. out of memory) */
	QTK_E_INTERNAL = -5, /* a bug */
};

typedef struct qtk_err {
	int code;          /* QTK_E_*, 0 when clear */
	int errnum;        /* errno for QTK_E_IO, else 0 */
	int64_t offset;    /* byte offset in file, -1 when none */
	char file[512];    /* file the error is about, "" when none */
	char subject[256]; /* tensor or key, "" when none */
	char msg[512];     /* the problem, lowercase, no trailing period */
} qtk_err;

void qtk_err_clear(qtk_err *e);
/* Record an error unless one is already recorded. Returns `code`. */
int qtk_err_set(qtk_err *e, int code, const char *file, int64_t offset,
		const char *subject, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Record an I/O error from errno. Returns QTK_E_IO. */
int qtk_err_sys(qtk_err *e, const char *file, const char *what);
/* "prog: file:0x1a40: error: tensor 'x': problem" into buf. */
void qtk_err_format(const qtk_err *e, const char *prog, char *buf, size_t n);
/* The exit status for an error code (0..5). */
int qtk_err_exit(int code);

/* ---- Layouts ---------------------------------------------------------- */

/* Storage types. Ids 0..QTK_GGML_MAX-1 are ggml's type ids; non-ggml
 * storage dtypes (safetensors) follow from QTK_DT_BOOL. */
enum {
	QTK_T_F32 = 0, QTK_T_F16 = 1, QTK_T_Q4_0 = 2, QTK_T_Q4_1 = 3,
	QTK_T_Q5_0 = 6, QTK_T_Q5_1 = 7, QTK_T_Q8_0 = 8, QTK_T_Q8_1 = 9,
	QTK_T_Q2_K = 10, QTK_T_Q3_K = 11, QTK_T_Q4_K = 12, QTK_T_Q5_K = 13,
	QTK_T_Q6_K = 14, QTK_T_Q8_K = 15, QTK_T_IQ2_XXS = 16, QTK_T_IQ2_XS = 17,
	QTK_T_IQ3_XXS = 18, QTK_T_IQ1_S = 19, QTK_T_IQ4_NL = 20, QTK_T_IQ3_S = 21,
	QTK_T_IQ2_S = 22, QTK_T_IQ4_XS = 23, QTK_T_I8 = 24, QTK_T_I16 = 25,
	QTK_T_I32 = 26, QTK_T_I64 = 27, QTK_T_F64 = 28, QTK_T_IQ1_M = 29,
	QTK_T_BF16 = 30, QTK_T_TQ1_0 = 34, QTK_T_TQ2_0 = 35, QTK_T_MXFP4 = 39,
	QTK_T_NVFP4 = 40, QTK_T_Q1_0 = 41, QTK_T_Q2_0 = 42,
	QTK_GGML_MAX = 43,
	/* safetensors-only dtypes */
	QTK_DT_BOOL = 64, QTK_DT_U8, QTK_DT_U16, QTK_DT_U32, QTK_DT_U64,
	QTK_DT_F8_E4M3, QTK_DT_F8_E5M2, QTK_DT_F8_E8M0, QTK_DT_F6_E2M3,
	QTK_DT_F6_E3M2, QTK_DT_F4,
	QTK_T_MAX
};

/* One row of the layout table: a storage type. */
typedef struct qtk_type_info {
	const char *name;    /* ggml's name ("q4_K") or safetensors dtype ("F16") */
	const char *upper;   /* upper-case name used in reports ("Q4_K") */
	const char *st_name; /* safetensors dtype string, NULL when none */
	uint32_t blck;       /* elements per block; 0 = removed/unknown */
	uint32_t bytes;      /* bytes per block (for sub-byte dtypes: bits per element) */
	uint8_t code_bits;   /* nominal code bits */
	uint8_t is_float;    /* plain float (F32/F16/BF16/F64/F8...) */
	uint8_t is_quant;    /* a quantized block type */
	uint8_t subbyte;     /* bytes field counts bits (F4, F6) */
	uint16_t group;      /* weights sharing one scale (finest), 0 = none */
} qtk_type_info;

/* NULL when `type` is not a known storage type. */
const qtk_type_info *qtk_type(unsigned type);
/* Storage type by safetensors dtype string; -1 when unknown. */
int qtk_type_by_st_name(const char *s);
/* Storage type by name ("q4_k", "Q4_K", "f16"; case-insensitive); -1. */
int qtk_type_by_name(const char *s);
/* Bytes for n elements of type; QTK_E_DATA on misfit or overflow. */
int qtk_type_nbytes(unsigned type, uint64_t n, uint64_t *out);

/* Logical layout of a tensor. */
/* Layout kinds. The numbers are stored in QPK files (formats/qpk.md, Layout_Kind): never
 * renumber. A packed kind is described by its scheme (src/scheme/). */
typedef enum {
	QTK_LAYOUT_PLAIN = 0, /* one component of a storage type (float, int or ggml block) */
	QTK_LAYOUT_AWQ = 1,   /* AutoAWQ GEMM */
	QTK_LAYOUT_GPTQ = 2,  /* AutoGPTQ packing, v1 or v2 */
	QTK_LAYOUT_CT_INT = 3,/* compressed-tensors integer codes (pack-quantized, int-quantized) */
	QTK_LAYOUT_FP8 = 4,   /* FP8 E4M3 codes with per-tensor, per-channel or block scales */
	QTK_LAYOUT_NVFP4 = 5, /* FP4 E2M1 in blocks of 16, E4M3 block scales, a global scale */
	QTK_LAYOUT_MXFP4 = 6, /* FP4 E2M1 in blocks of 32 with E8M0 scales (gpt-oss experts) */
	QTK_LAYOUT_MLX = 7,   /* MLX affine: U32 bit streams, scales and biases per group */
	QTK_LAYOUT_BNB4 = 8,  /* bitsandbytes NF4 / FP4 with its quant_state */
	QTK_LAYOUT_BNB8 = 9,  /* bitsandbytes LLM.int8 (row scales SCB) */
	QTK_LAYOUT_KINDS      /* count */
} qtk_layout_kind;

typedef struct qtk_layout {
	qtk_layout_kind kind;
	unsigned type;       /* PLAIN: storage type */
	uint8_t bits;        /* AWQ/GPTQ code bits; PLAIN: type's code bits */
	uint8_t gptq_version;/* 1 or 2 */
	bool sym;            /* symmetric quantization */
	bool act_order;      /* g_idx is not i/group */
	uint32_t group_size; /* AWQ/GPTQ group; ggml block size for quants; 0 = none */
	uint8_t strategy;    /* CT_INT/FP8: how scales are shared (qtk_scheme_strategy: 0 per tensor,
			      * 2 per group (a channel is one group of in), 3 per block) */
	uint16_t scale_type; /* CT_INT/FP8: storage type of the scales (QTK_T_F16, QTK_T_BF16, QTK_T_F32);
			      * NVFP4: 0 compressed-tensors (the global scale divides), 1 ModelOpt
			      * (weight_scale_2 multiplies); BNB4: the quant_state dtype the values are
			      * rounded to (QTK_T_F16, QTK_T_BF16, QTK_T_F32) */
	uint8_t code_kind;   /* BNB4: 0 nf4, 1 fp4 (which quant_state tensor it has) */
	uint16_t meta_len;   /* BNB4: bytes of the quant_state JSON part */
	uint32_t nested_group;/* BNB4: block size of the double quantization of absmax; 0: none */
} qtk_layout;

/* "ggml:q4_k", "f16", "awq", "gptq-v1", ... */
void qtk_layout_id(const qtk_layout *l, char *buf, size_t n);
/* "Q4_K", "F16", "AWQ", "GPTQ" */
const char *qtk_layout_type_name(const qtk_layout *l);

/* ---- Tensor model ----------------------------------------------------- */

#define QTK_MAX_DIMS 8
#define QTK_MAX_PARTS 8

/* A stored component of a logical tensor ("qweight", "qzeros", "scales",
 * "g_idx" for AWQ/GPTQ; "" for a plain tensor). Roles have 7 bytes at most; a scheme maps
 * longer checkpoint suffixes to them (qtk_scheme.suffix). */
typedef struct qtk_part {
	char role[8];
	unsigned type;                /* storage type of this component */
	int ndim;
	uint64_t shape[QTK_MAX_DIMS]; /* as stored, outermost first */
	uint32_t file;                /* index into the model's files */
	uint64_t offset;              /* absolute byte offset in that file */
	uint64_t nbytes;
} qtk_part;

typedef struct qtk_model qtk_model;
typedef struct qtk_view qtk_view;

/* A tensor's parts are not its own memory: a model's tensors have theirs in the model (room
 * for QTK_MAX_PARTS from qtk_model_add_tensor, or as many as qtk_model_add_tensor_room asks;
 * freed with the model), a tensor declared in a block has them in the block (QTK_TENSOR_LOCAL).
 * Assigning one tensor to another shares the parts; qtk_tensor_copy copies them. */
typedef struct qtk_tensor {
	char *name;                   /* logical name ("<prefix>.weight" for AWQ/GPTQ) */
	int ndim;
	uint64_t shape[QTK_MAX_DIMS]; /* logical, outermost first */
	qtk_layout layout;
	int nparts;
	int room;                     /* parts there is room for at `parts` (nparts <= room) */
	qtk_part *parts;
	uint64_t n_params;
	uint64_t n_bytes;             /* every stored byte of every part */
	const qtk_view *view;         /* NULL: stored; else made from other tensors when read */
} qtk_tensor;

/* A tensor with room for QTK_MAX_PARTS parts in the enclosing block:
 *   qtk_tensor t = QTK_TENSOR_LOCAL; */
#define QTK_TENSOR_LOCAL { .room = QTK_MAX_PARTS, .parts = (qtk_part[QTK_MAX_PARTS]){{.type = 0}} }
/* *dst = *src with src's parts copied into dst's room (dst keeps its parts and room; the name
 * pointer is copied as the other fields are). QTK_E_INTERNAL, dst unchanged, when they do not
 * fit. */
int qtk_tensor_copy(qtk_tensor *dst, const qtk_tensor *src);
/* Zero every field of t and its parts' room, keeping the room (what memset would do to a tensor
 * whose parts were inline). */
void qtk_tensor_clear(qtk_tensor *t);

/* A tensor that no file stores as such, made when it is read (qtk_read_part): the experts of
 * a mixture-of-experts layer stacked along a new outermost dimension, one of the equal slices
 * of such a stack along that dimension, or bytes held in memory (values a model family
 * computes, as llama.cpp's rope factors). The tensor's own parts give the shapes and sizes;
 * part p of a STACK is part p of every piece in order; part p of a SLICE is the index-th of
 * n equal ranges of piece part p; part p of a MEM tensor is mem + parts[p].offset; part p of a
 * JOIN (a packed layer whose parts a file stores as separate tensors: GGUF's NVFP4 blocks and
 * their `.scale`) is part 0 of piece p. */
typedef enum { QTK_VIEW_STACK = 1, QTK_VIEW_SLICE, QTK_VIEW_MEM, QTK_VIEW_JOIN } qtk_view_kind;
/* The name a file stores t under: a whole stored tensor seen under another name (a one-slice
 * view) gives its own name, a JOIN its first piece's, anything else t->name. For messages about
 * the input. */
const char *qtk_tensor_stored_name(const qtk_tensor *t);
struct qtk_view {
	qtk_view_kind kind;
	qtk_model *m;                    /* STACK, SLICE: the model the pieces belong to */
	const qtk_tensor *const *pieces; /* STACK, JOIN: n pieces; SLICE: pieces[0] */
	uint32_t n;                      /* STACK, JOIN: number of pieces; SLICE: number of slices */
	uint32_t index;                  /* SLICE: which slice */
	const uint8_t *mem;              /* MEM */
};

/* ---- Metadata --------------------------------------------------------- */

/* Value types: GGUF's ids. */
enum {
	QTK_V_U8 = 0, QTK_V_I8, QTK_V_U16, QTK_V_I16, QTK_V_U32, QTK_V_I32,
	QTK_V_F32, QTK_V_BOOL, QTK_V_STR, QTK_V_ARR, QTK_V_U64, QTK_V_I64,
	QTK_V_F64, QTK_V_MAX
};

typedef struct qtk_str {
	uint64_t len;
	char *s; /* NUL-terminated copy; may contain interior NULs (len counts) */
} qtk_str;

typedef struct qtk_value {
	uint8_t type;      /* QTK_V_* */
	uint8_t elem;      /* element type for QTK_V_ARR */
	uint64_t n;        /* array element count */
	union {
		uint64_t u;    /* unsigned ints and bool */
		int64_t i;     /* signed ints */
		double f;      /* F32 and F64 */
		qtk_str str;
	} v;
	void *arr;         /* ARR: packed LE elements, or qtk_str[n] for strings */
} qtk_value;

typedef struct qtk_kv {
	char *key;
	qtk_value val;
} qtk_kv;

/* A side file carried along (config.json, tokenizer files). */
typedef struct qtk_blob {
	char *name;
	uint8_t *data;
	size_t len;
} qtk_blob;

typedef struct qtk_format qtk_format;

struct qtk_model {
	const qtk_format *fmt;
	char *path;              /* what the user named */
	int format_version;      /* GGUF version, 0 when none */
	uint32_t alignment;      /* GGUF alignment */
	uint32_t nfiles;
	char **files;            /* data files, [0] is the primary */
	uint64_t *file_sizes;
	int *fds;
	size_t ntensors;
	qtk_tensor *tensors;
	size_t nkv;
	qtk_kv *kv;              /* GGUF KVs or safetensors __metadata__ (strings) */
	size_t nblobs;
	qtk_blob *blobs;         /* side files (HF directories) */
	void *priv;              /* plugin state */
	qtk_err err;
	/* capacity bookkeeping */
	size_t cap_tensors, cap_kv, cap_blobs;
	/* name -> index of tensors[] and kv[] (qtk_tensor_find, qtk_kv_find): valid while it covers
	 * exactly the first t_indexed / kv_indexed entries; code that renames, reorders or drops
	 * entries in place calls qtk_model_reindex. */
	struct qtk_strmap *t_index, *kv_index;
	size_t t_indexed, kv_indexed;
	struct qtk_part_chunk *part_chunks; /* the tensors' parts (model.c) */
	size_t parts_hint;                  /* parts the next chunk should hold at least */
};

/* Open any supported input (format detected from content). On failure
 * returns NULL with *err set. */
qtk_model *qtk_open(const char *path, qtk_err *err);
void qtk_close(qtk_model *m);
/* Format name: "gguf", "safetensors", "hf", "qpk". */
const char *qtk_model_format(const qtk_model *m);

/* Read n bytes at `off` within part `p` of tensor t into dst. */
int qtk_read_part(qtk_model *m, const qtk_tensor *t, int p, uint64_t off,
		  void *dst, size_t n);
/* Reads of a QPK part from its first byte to its last check the part's SHA-256 (from the
 * file's index) at the last byte, in the reading thread: the read that ends the part fails on a
 * mismatch. After qtk_read_verify_async(m), those checks run on a thread of m's own, on copies
 * of the bytes read, and a mismatch is reported by a later read or by qtk_read_settle(m), which
 * waits for the checks of every read made so far: a caller that turns this on must settle
 * before it acts on what it read (commits an output). Models without such checks (other
 * containers) ignore both; for a model of views, the models its tensors are read from. Call
 * qtk_read_verify_async before any thread reads m. A check that cannot be made (out of memory,
 * a failed SHA-256 call) is then an error too, reported the same way. */
void qtk_read_verify_async(qtk_model *m);
int qtk_read_settle(qtk_model *m);
/* Read a whole part into a new buffer (caller frees). */
int qtk_read_part_alloc(qtk_model *m, const qtk_tensor *t, int p, uint8_t **out);
/* qtk_read_part reporting into err instead of m->err: for a model read with pread (no format
 * reader) it touches no shared state, so another thread may read the same model meanwhile. */
int qtk_read_part_to(qtk_model *m, const qtk_tensor *t, int p, uint64_t off, void *dst, size_t n, qtk_err *err);

const qtk_kv *qtk_kv_find(const qtk_model *m, const char *key);
/* Rebuild m's name indexes after tensors[] or kv[] were changed other than by the model's own
 * adders (renamed, reordered, replaced). Lookups stay correct without it only if counts differ. */
void qtk_model_reindex(qtk_model *m);
const qtk_blob *qtk_blob_find(const qtk_model *m, const char *name);
/* Find a tensor by logical name; NULL when absent. */
const qtk_tensor *qtk_tensor_find(const qtk_model *m, const char *name);
/* True when m's tensor bytes come through its container's own reader (compressed chunks,
 * archive members) rather than as plain ranges of its files read with pread. */
bool qtk_model_streamed(const qtk_model *m);
/* True when m's container has a verify hook. */
bool qtk_model_can_verify(const qtk_model *m);
/* Run m's verify hook on tensor i (QTK_E_USAGE when the container has none). */
int qtk_model_verify_tensor(qtk_model *m, size_t i);

/* Size of one element of a metadata value type; 0 for STR/ARR. */
size_t qtk_value_size(unsigned vtype);
const char *qtk_value_type_name(unsigned vtype);
/* An integer value (any of the eight integer types; not bool) as int64 / uint64; false for
 * other types and for values out of the range (a negative one as uint64). */
bool qtk_value_as_i64(const qtk_value *v, int64_t *out);
bool qtk_value_as_u64(const qtk_value *v, uint64_t *out);

/* ---- Writing ---------------------------------------------------------- */

typedef struct qtk_writer qtk_writer;

/* Output description: a model (tensors with parts whose type, shape and
 * nbytes are set; offsets are ignored), metadata and blobs. The writer
 * lays out the file, then takes each tensor's parts' bytes in order
 * through qtk_writer_put. Output is written to a temporary file and
 * renamed into place by qtk_writer_finish; qtk_writer_abort removes it. */
/* Files a writer committed: path, size and SHA-256. */
typedef struct qtk_outfile {
	char *path;
	uint64_t size;
	uint8_t sha256[32];
} qtk_outfile;
typedef struct qtk_outlist {
	size_t n;
	qtk_outfile *f;
} qtk_outlist;
void qtk_outlist_free(qtk_outlist *l);
/* Lower-case hex of n bytes into out (2n+1 bytes). */
void qtk_hex(const uint8_t *d, size_t n, char *out);
/* SHA-256 over pieces: begin (NULL: out of memory), add any number of pieces (h may be NULL),
 * end writes the digest and frees h; false when any step failed. */
typedef struct qtk_sha256 qtk_sha256;
qtk_sha256 *qtk_sha256_begin(void);
void qtk_sha256_add(qtk_sha256 *h, const void *p, size_t n);
bool qtk_sha256_end(qtk_sha256 *h, uint8_t out[32]);

typedef struct qtk_write_opts {
	uint32_t alignment;      /* GGUF; 0 = default 32 */
	uint64_t split_max_size; /* 0 = no sharding */
	qtk_outlist *outs;       /* optional: receives every committed file */
	/* optional: sees every byte handed to qtk_writer_put, with its tensor's index (digests) */
	int (*tee)(void *ctx, size_t tensor, const void *buf, size_t n);
	void *tee_ctx;
	/* optional: run the tee on a thread of its own, on copies of the bytes, while the caller
	 * goes on (at most 8 MiB queued); its failures are reported by a later put, by
	 * qtk_writer_drain or by finish, with the message the tee left in *tee_err */
	bool tee_async;
	qtk_err *tee_err;
	/* optional, with tee_async: a second tee on a thread of its own that sees the same bytes in
	 * the same order (the two run side by side; a queued copy is freed when both have seen
	 * it); its message goes to *tee2_err */
	int (*tee2)(void *ctx, size_t tensor, const void *buf, size_t n);
	void *tee2_ctx;
	qtk_err *tee2_err;
	/* the caller will call qtk_writer_patch_header: files whose header is patched are hashed
	 * once, after the patch, instead of while writing and again after it */
	bool patch_pending;
	/* threads the writer may use beside the caller (QPK compresses its chunks on threads - 1
	 * workers); 0 or 1: none. The bytes written do not depend on it */
	int threads;
	/* a directory OUTPUT (replaced as a whole) may hold files qtk did not write: they go too */
	bool force;
	/* side files outside the known list (qtk_side_file_known) that the caller asked to carry
	 * by name (qconvert --carry); every writer refuses any other unknown side file */
	const char *const *carry;
	size_t ncarry;
	/* optional (GGUF and QPK; other writers refuse it): the description's "qtk.provenance"
	 * string is not held. Its key holds "" and, where the string goes, record_gen writes
	 * record_len bytes through put (in order; put returns 0 or the error code its message was
	 * set for); the writer refuses another length. For a record of tens of MB that is then
	 * never whole in memory */
	int (*record_gen)(void *ctx, int (*put)(void *pctx, const uint8_t *p, size_t n), void *pctx);
	void *record_ctx;
	size_t record_len;
} qtk_write_opts;

/* The metadata a GGUF writer is about to write (d's keys and counts), checked with the GGUF
 * reader's own rules: key syntax, split.* reserved to the writer, the types of well-known keys,
 * general.alignment a power of two, block counts, token ids below the vocabulary size, the
 * vocabulary arrays' lengths. QTK_E_DATA naming the key; the GGUF writer runs it first. */
int qtk_gguf_check_meta(const qtk_model *d, const char *path, qtk_err *err);

/* Side files. A model's side files are carried into outputs that hold them (HF directories,
 * QPK, bundles) only when their name is on the known list (config.json, tokenizer files, ...:
 * the names the HF directory reader reads), or when the caller names them (qtk_write_opts.carry).
 * Code (*.py) and pickles (*.bin, *.pt, *.pth, *.pkl, *.pickle, *.ckpt) are never on the list. */
bool qtk_side_file_known(const char *name);
/* Python code or a pickle: what runs when a model is loaded. */
bool qtk_side_file_executable(const char *name);
/* Known, or in o's carry list. */
bool qtk_side_file_allowed(const char *name, const qtk_write_opts *o);
/* Add the file `name` of HF directory m (opened by the hf reader) to m's blobs: a plain file
 * name, read with the side-file cap. QTK_E_USAGE when m is not a directory or the file is absent. */
int qtk_hf_load_side_file(qtk_model *m, const char *name, qtk_err *err);

/* Kind of output: the public handle of a writing container. Each value belongs to one
 * container descriptor (src/container.c), which holds its path forms, name and capability. */
typedef enum {
	QTK_OUT_UNKNOWN = 0, QTK_OUT_GGUF, QTK_OUT_SAFETENSORS, QTK_OUT_HF,
	QTK_OUT_QPK, QTK_OUT_ARCHIVE
} qtk_out_kind;
/* The output kind a path names: a directory (trailing '/' or an existing directory) is a
 * Hugging Face directory; else by suffix (.gguf, .safetensors, .qpk/.awq/.gptq,
 * .tar/.tar.zst/.zip). QTK_OUT_UNKNOWN when none matches. */
qtk_out_kind qtk_out_kind_for_path(const char *path);
/* The output path forms, for messages: ".gguf, .safetensors, ... or a directory/". */
void qtk_out_path_forms(char *buf, size_t n);
/* The container's name ("gguf", "safetensors", "hf", "qpk", "archive"); "unknown". */
const char *qtk_out_kind_name(qtk_out_kind k);
/* Can output kind k store tensor t (layout, part types, rank; with_name: also t->name)?
 * 0, or QTK_E_DATA with the message the user sees in err (file `path`; subject `subject`,
 * or the container's own naming of t when NULL); err may be NULL. The planner and the
 * writer (qtk_writer_open, on every tensor) both ask here. */
int qtk_out_can_store(qtk_out_kind k, const qtk_tensor *t, bool with_name, const char *path,
		      const char *subject, qtk_err *err);

qtk_writer *qtk_writer_open(const char *path, qtk_out_kind kind,
			    const qtk_model *desc, const qtk_write_opts *o,
			    qtk_err *err);
/* Append bytes of the current part (parts in tensor order, parts in order). */
int qtk_writer_put(qtk_writer *w, const void *buf, size_t n);
/* The same for n bytes of file fd (path, for messages) from offset off, copied by the
 * container without passing through the caller (GGUF, safetensors, HF directories: in the
 * kernel). A tee, when there is one, is given the bytes as the output holds them, read back
 * into back (n bytes; the tee needs it: without, 1). 1 without writing anything when the
 * container cannot (then read and put the bytes). */
int qtk_writer_put_file(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back);
/* Where part p of t is stored verbatim in one of m's files: true with its descriptor, path and
 * offset; false for views, format readers (compressed, archived) and the like. */
bool qtk_part_in_file(const qtk_model *m, const qtk_tensor *t, int p, int *fd, const char **path,
		      uint64_t *off);
/* Before qtk_writer_finish: let fn rewrite, in place and without changing its length, the
 * part of the output that holds the metadata (GGUF: KVs and tensor infos; safetensors: the
 * JSON header; QPK: the metadata section, then stored raw; HF directory: the side file
 * qtk-provenance.json). The file's SHA-256 is recomputed (one read of the file). QTK_E_USAGE
 * when the output kind cannot (archives). */
int qtk_writer_patch_header(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx);
/* Whether the writer can place the final record over the reserved one (it knows where the
 * description's "qtk.provenance" string went: GGUF, QPK, a safetensors file, a Hugging Face
 * directory's qtk-provenance.json; not archives). */
bool qtk_writer_has_put_record(const qtk_writer *w);
/* Before qtk_writer_finish: overwrite the bytes of the description's "qtk.provenance" string
 * where the writer put them with rec (n bytes, the same length), without reading the header
 * back. QTK_E_USAGE when the output kind cannot, QTK_E_INTERNAL when n differs. */
int qtk_writer_put_record(qtk_writer *w, const void *rec, size_t n);
/* The same a piece at a time, so the final record is never held whole: the record's bytes
 * from `at` (pieces in order, from 0: the first waits for the tensors' writing to drain), then
 * the end with the total, which must be the reserved length. */
int qtk_writer_record_piece(qtk_writer *w, uint64_t at, const void *p, size_t n);
int qtk_writer_record_end(qtk_writer *w, uint64_t total);
/* An unnamed scratch file beside the output (qtk_scratch_open in its directory: the same file
 * system, which has room for the output anyway) for a part built out of order, such as a packed
 * matrix whose windows are column bands; close it when done. Its descriptor, or a negative code
 * with err set. */
int qtk_writer_scratch(const qtk_writer *w, qtk_err *err);
/* Finalize: fsync and rename. Frees w. */
int qtk_writer_finish(qtk_writer *w);
/* Wait until the tee has seen every byte put so far; its failure, if any. */
int qtk_writer_drain(qtk_writer *w);
/* Deferred puts: qtk_writer_put_later hands over n bytes of a buffer from
 * qtk_writer_defer_buf (at least n bytes; NULL with err set when it cannot) and returns;
 * qtk_writer_put_pending does the put that waits, if any (and returns a failed put's code,
 * every time after), on whatever thread calls it: a job of the caller's next parallel loop
 * writes one window while the others encode the next. Meanwhile nothing else may call on the
 * writer. Every other call on the writer does the waiting put first, as does the next
 * qtk_writer_put_later; so the container and the tee see what qtk_writer_put would have
 * given them, in the same order. Two buffers alternate, so the one being filled is never the
 * one waiting; each stays the writer's. Callers that hand the tee's consumers anything of
 * their own (a digest sink) call qtk_writer_put_pending first. */
uint8_t *qtk_writer_defer_buf(qtk_writer *w, size_t n, qtk_err *err);
int qtk_writer_put_later(qtk_writer *w, const uint8_t *buf, size_t n);
int qtk_writer_put_pending(qtk_writer *w);
/* qtk_writer_put_pending, then the two buffers freed (kept after a failure, which the calls
 * after report): for a caller done with deferred puts for a while. */
int qtk_writer_defer_done(qtk_writer *w);
/* Remove temporaries. Frees w. Accepts NULL. */
void qtk_writer_abort(qtk_writer *w);
/* Output files actually written (valid after finish until the desc model is freed). */

/* ---- Model building (used by plugins and by qconvert) ------------------ */

qtk_model *qtk_model_new(void);
/* A tensor named `name` (copied), zeroed, with room for QTK_MAX_PARTS parts; NULL out of memory
 * or past the cap on tensors. _room: room for `room` parts (0..QTK_MAX_PARTS), for a reader that
 * knows how many its tensors have (0: none yet, qtk_model_tensor_room gives them later). */
qtk_tensor *qtk_model_add_tensor(qtk_model *m, const char *name);
qtk_tensor *qtk_model_add_tensor_room(qtk_model *m, const char *name, int room);
/* Room for n parts (0..QTK_MAX_PARTS, zeroed) in m, freed with it: t->parts, t->room for a tensor
 * of m built outside its table (a scheme's logical tensors before they replace their parts).
 * QTK_E_IO out of memory, QTK_E_INTERNAL for n out of range (t unchanged then). */
int qtk_model_tensor_room(qtk_model *m, qtk_tensor *t, int n);
/* Room for `more` tensors beyond those added, in one allocation (a container that knows its
 * count: the table's growth copies it each time it doubles), and for a part each in the next
 * chunk of parts; QTK_E_IO out of memory. The mappings are only touched as tensors are added. */
int qtk_model_reserve_tensors(qtk_model *m, size_t more);
qtk_kv *qtk_model_add_kv(qtk_model *m, const char *key);
int qtk_model_add_blob(qtk_model *m, const char *name, const void *data, size_t len);
int qtk_model_set_kv_str(qtk_model *m, const char *key, const char *s);
/* The same, taking s / data (qtk_malloc'd, data NUL-terminated after len bytes) instead of a
 * copy; on failure the caller keeps it. */
int qtk_model_take_blob(qtk_model *m, const char *name, uint8_t *data, size_t len);
int qtk_model_take_kv_str(qtk_model *m, const char *key, char *s);
int qtk_value_copy(qtk_value *dst, const qtk_value *src);
void qtk_value_free(qtk_value *v);
int qtk_kv_remove(qtk_model *m, const char *key);
/* Compute n_params and n_bytes from shape and parts. */
void qtk_tensor_finish(qtk_tensor *t);

/* ---- Allocation (tests can make the Nth allocation fail) ------------- */

void *qtk_malloc(size_t n);
void *qtk_calloc(size_t a, size_t b);
void *qtk_realloc(void *p, size_t n);
char *qtk_strdup(const char *s);
char *qtk_strndup(const char *s, size_t n);
void qtk_free(void *p);
/* Give the pages of freed memory back to the system (glibc: every arena's free pages, not only
 * the heap's top). For the end of a phase that freed tens of MiB in the middle of the heap, so
 * the next phase's peak does not stand on them. */
void qtk_mem_release(void);
/* A table that grows and is written front to back (a model's tensor descriptions). n bytes of
 * room, the first `used` bytes of p (from an earlier call, or NULL) kept; the room beyond is
 * not cleared. Free it with qtk_table_free only. */
void *qtk_table_realloc(void *p, size_t used, size_t n);
void qtk_table_free(void *p);
/* 0 disables; otherwise the Nth allocation from now fails. */
void qtk_test_fail_alloc_at(long n);
/* Test hook: the largest single allocation request (bytes) since the last reset; reset: return it
 * and start again from 0. */
size_t qtk_test_max_alloc(bool reset);
/* Test hook: false makes qtk_ofile_copy_from read and write instead of copying in the kernel. */
void qtk_test_copy_range(bool on);
/* 0 disables; otherwise reads return at most n bytes at a time. */
void qtk_test_max_read(size_t n);
/* Test hook: QPK chunks taken from the reader's read-ahead since the last reset (reset: return
 * the count and start again from 0). */
unsigned long qtk_test_qpk_ahead_used(bool reset);

/* Checked arithmetic. Return false on overflow. */
static inline bool qtk_add_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_add_overflow(a, b, r);
}
static inline bool qtk_mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}
/* Least common multiple of two small positive counts (row alignments); 0 when either is 0. */
static inline uint64_t qtk_lcm_u64(uint64_t a, uint64_t b)
{
	uint64_t x = a, y = b;
	while (y) {
		uint64_t t = x % y;
		x = y;
		y = t;
	}
	return x ? a / x * b : 0;
}

#endif
