/* inspect.h - qinspect's reporters (pure functions of a model; stdout only). */
#ifndef QTK_INSPECT_H
#define QTK_INSPECT_H
#include "qtk_ext.h"
#include <stdio.h>

typedef struct insp_opts {
	bool stats;
	bool color;
	bool json;          /* --memory --json */
	uint64_t ctx;       /* --ctx N (0: none) */
	const char *kv_type;/* --kv-type (default f16) */
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
/* Block number of "blk.N." / "model.layers.N." names (prefix length in
 * *prefix_len), or -1. */
int block_of(const char *name, size_t *prefix_len);

/* ---- text.c / diff.c / tui_curses.c -------------------------------------- */
struct qtk_tstats;
void print_stats_text(FILE *out, const qtk_tensor *t, const struct qtk_tstats *s);
/* Context sweep: 2k..32k, the trained context and `extra`, ascending, unique. */
size_t memory_contexts(const hparams *hp, uint64_t extra, uint64_t *ctx, size_t cap);
int report_tensor(qtk_model *m, const char *name, FILE *out, const insp_opts *o);
int report_memory(qtk_model *m, FILE *out, const insp_opts *o);
int report_diff(qtk_model *other, qtk_model *m, FILE *out, const insp_opts *o);
/* The browser; returns an exit status. */
int tui_run(qtk_model *m, const insp_opts *o);
#endif
