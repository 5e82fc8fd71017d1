/* inspect.h - qinspect's reporters (pure functions of a model; stdout only). */
#ifndef QTK_INSPECT_H
#define QTK_INSPECT_H
#include "qtk_ext.h"
#include <stdio.h>

#define INSP_MAX_CTX 16
typedef struct insp_opts {
	bool stats;
	bool color;
	bool json;          /* --json with a mode: the mode's JSON document */
	uint64_t ctx;       /* one context added to the --memory sweep (0: none) */
	uint64_t ctxs[INSP_MAX_CTX]; /* --ctx LIST: contexts added to the sweep */
	size_t nctx;
	const char *kv_type;/* --kv-type: K and V cache type (default f16) */
	const char *kv_type_k, *kv_type_v; /* --cache-type-k / -v: one of them (NULL: kv_type) */
	bool flash_attn;    /* --flash-attn: the compute estimate without the KQ scores */
	bool gpu_split;     /* --gpu-layers given */
	uint64_t gpu_layers;/* --gpu-layers N */
	int width;          /* text width in columns (0: INSP_WIDTH_DEFAULT) */
	/* progress on stderr (may be NULL): label, done of total */
	void (*progress)(const char *label, uint64_t done, uint64_t total);
	void (*progress_end)(void);
} insp_opts;

int report_json(qtk_model *m, FILE *out, const insp_opts *o);
int report_summary(qtk_model *m, FILE *out, const insp_opts *o);
int report_markdown(qtk_model *m, FILE *out, const insp_opts *o);

/* Per-type totals in order of first appearance. */
typedef struct type_total {
	const char *type;
	uint64_t n_tensors, n_params, n_bytes;
} type_total;
typedef struct totals {
	uint64_t n_params, n_bytes;
	size_t ntypes;
	type_total types[64];
} totals;
void compute_totals(const qtk_model *m, totals *t);
void fmt_shape(const qtk_tensor *t, char *buf, size_t n);
void fmt_bytes(uint64_t b, char *buf, size_t n);
/* qtk_text_safe(s, 0, buf, n) (text.h): names and metadata from files never reach a
 * terminal raw. */
const char *insp_safe(const char *s, char *buf, size_t n);
/* The text width when stdout is not a terminal: the widest summary line (a 48-column name). */
#define INSP_WIDTH_DEFAULT 128
/* The width of terminal fd: COLUMNS when set to a number, else the terminal's size
 * (TIOCGWINSZ), else 80; INSP_WIDTH_DEFAULT when fd is not a terminal. Between 40 and 1000. */
int insp_term_width(int fd);
/* The model's name for headers: general.name, else the last path component of its file or
 * directory (trailing slashes ignored). */
const char *insp_model_name(const qtk_model *m, char *buf, size_t n);
/* qinspect --metadata: every key with its type and value (arrays as type[count] and their
 * first items); --json: the document of docs/json.md. */
int report_metadata(qtk_model *m, FILE *out, const insp_opts *o);
struct cJSON;
/* One tensor as --json lists it (name, shape, layout, ..., bits_per_weight). */
struct cJSON *json_tensor(const qtk_tensor *t);
/* json_tensor(t) as the --json document prints it (inside the root object's tensors array),
 * written without a tree for a plain tensor with a valid name: 1 when done, 0 (nothing
 * written) for any other tensor, which goes through json_tensor. */
int json_tensor_text(struct qtk_jtext *w, const qtk_tensor *t);
/* A string from a file as JSON (valid UTF-8, U+FFFD for invalid bytes). */
struct cJSON *json_str_n(const char *s, uint64_t len);
/* Print a cJSON document and free it; 0, or an error in m->err. */
int json_emit(qtk_model *m, struct cJSON *doc, FILE *out);
/* A document's "tensors" list written aside an entry at a time while the document is made (a
 * tree of 100,000 entries is ~1.5 KB an entry): to an unnamed temporary file, whose pages are
 * not the process's memory, else to memory. */
typedef struct json_aside {
	FILE *f;
	char *mem;      /* the memory stream's text, when no temporary file could be made */
	size_t memlen;
	size_t n;       /* entries written */
	struct qtk_jtext tj;
} json_aside;
/* QTK_E_IO when neither can be opened. */
int json_aside_open(json_aside *a);
/* Entry j (freed) as cJSON_Print prints it in the root object's list; QTK_E_IO on failure. */
int json_aside_add(json_aside *a, struct cJSON *j);
/* Print doc (freed), whose root holds an empty "tensors" list, with the entries in it, as
 * cJSON_Print would print the whole; closes a. 0, or an error in m->err. */
int json_aside_emit(qtk_model *m, json_aside *a, struct cJSON *doc, FILE *out);
void json_aside_close(json_aside *a);

/* The audit of m (src/record/audit.h) as text lines: a verdict line, then one line per finding
 * (escaped ASCII). fn's nonzero return stops; -1 when the audit could not run. */
typedef int (*audit_line_fn)(void *arg, const char *line);
int audit_lines(const qtk_model *m, audit_line_fn fn, void *arg);

/* ---- modelinfo.c --------------------------------------------------------- */

/* Architecture numbers needed for memory estimates and Q/K permutation (the family layer's). */
typedef qtk_hparams hparams;
/* qtk_family_hparams: 0 when the numbers were found, -1 when the file does not say. */
int hparams_load(const qtk_model *m, hparams *hp);
/* Bytes per cached element for a KV type name (f16, q8_0, q4_0, ...); 0 when unknown. */
double kv_type_bytes(const char *name);
/* KV cache bytes at context ctx: every layer l caches n_head_kv(l) x (head_dim + head_dim_v)
 * elements per token, sliding layers at most swa_window tokens; for a uniform model
 * 2 * n_layer * n_head_kv * head_dim * ctx * elem_bytes. 0 when hp->kv_unknown. */
double kv_cache_bytes(const hparams *hp, uint64_t ctx, double elem_bytes);
/* True when every layer caches the same (no per-layer heads, no sliding layers, K and V of
 * one head size): the KV cache is the plain product. */
bool kv_uniform(const hparams *hp);
/* The KV types llama.cpp accepts for -ctk/-ctv, as a list for messages; the canonical
 * (lower-case) name of one, or NULL; true for the block-quantized ones. */
const char *kv_type_list(void);
const char *kv_type_canon(const char *name);
bool kv_type_quantized(const char *name);
/* The KV cache with K and V of different types (ek, ev bytes per element). */
double kv_cache_bytes_kv(const hparams *hp, uint64_t ctx, double ek, double ev);
/* KV heads of every layer (heads[n_layer]): the single count, or the file's per-layer list
 * read again; -1 when it cannot be (unknown KV, more than QTK_HP_MAX_LAYERS layers, a list
 * that does not give the family layer's sums). */
int kv_layer_heads(const qtk_model *m, const hparams *hp, uint64_t *heads);
/* The KV cache of layer l holding `heads` KV heads at context ctx. */
double kv_layer_bytes(const hparams *hp, uint64_t l, uint64_t heads, uint64_t ctx, double ek, double ev);
/* llama.cpp's name of a general.file_type value (Q4_K_M, ...) in buf; NULL when unknown. */
const char *ftype_name(uint64_t v, char *buf, size_t n);
/* Where llama.cpp puts tensor `name` when offloading: 'b' a repeating block (*blk its number),
 * 'o' the output layer (output, output norm, lm_head), 'i' the input layer (the rest). */
int tensor_place(const char *name, int *blk);
/* The numbers of the compute-buffer estimate (docs/cli.md, the memory estimate). */
#define COMPUTE_UBATCH 512 /* llama.cpp's default micro-batch (-ub) */
typedef struct compute_in {
	uint64_t n_embd, n_head, head_dim, n_ff, n_vocab, n_expert, n_expert_used;
} compute_in;
void compute_dims(const qtk_model *m, const hparams *hp, compute_in *c);
/* An estimate of llama.cpp's compute buffer at context ctx (bytes). */
double compute_buffer_bytes(const compute_in *c, uint64_t ctx, bool flash_attn);
/* Block number of "blk.N." / "model.layers.N." names (prefix length in
 * *prefix_len), or -1. */
int block_of(const char *name, size_t *prefix_len);

/* ---- text.c / diff.c / tui_curses.c -------------------------------------- */
struct qtk_tstats;
void print_stats_text(FILE *out, const qtk_tensor *t, const struct qtk_tstats *s);
/* Context sweep: 2k..32k, the trained context and `extra`, ascending, unique. */
size_t memory_contexts(const hparams *hp, uint64_t extra, uint64_t *ctx, size_t cap);
/* The same with n further contexts `more` (--ctx LIST). */
size_t memory_contexts_list(const hparams *hp, const uint64_t *more, size_t n, uint64_t *ctx, size_t cap);
/* A context size: digits with an optional k or K (x 1024): 32k, 128K, 131072. False when
 * it is no such number, 0 or above 2^32. */
bool parse_ctx(const char *s, uint64_t *v);
int report_tensor(qtk_model *m, const char *name, FILE *out, const insp_opts *o);
int report_memory(qtk_model *m, FILE *out, const insp_opts *o);
int report_diff(qtk_model *other, qtk_model *m, FILE *out, const insp_opts *o);
/* The browser; returns an exit status. */
int tui_run(qtk_model *m, const insp_opts *o);
#endif
