/* stats.h - value statistics of one tensor, from its decoded values.
 *
 * Everything is computed from the F32 values qtk decodes (any layout), in row
 * chunks, so memory stays bounded by one chunk plus the tensor's packed
 * components. Summation order is fixed (chunk by chunk, double accumulators):
 * the same file gives the same numbers on every run. */
#ifndef QTK_STATS_H
#define QTK_STATS_H
#include "qtk_util.h"
#include "view/decode.h"
#include <cJSON.h>

#define QTK_ST_BINS 64     /* value histogram bins */
#define QTK_ST_TOPK 8      /* salient input channels kept */
#define QTK_ST_PROFILE 512 /* per-input-channel absmax profile buckets */

typedef struct qtk_hist {
	double lo, hi;            /* bin k covers [lo + k*w, lo + (k+1)*w), w = (hi-lo)/QTK_ST_BINS; last bin closed */
	uint64_t counts[QTK_ST_BINS];
	uint64_t n;               /* values counted */
} qtk_hist;

typedef struct qtk_tstats {
	uint64_t n;               /* finite values */
	uint64_t n_nonfinite;     /* NaN/Inf values (left out of everything else) */
	double min, max, mean, std, absmax;
	double kurtosis;          /* Pearson: m4 / m2^2 (3 for a normal distribution); 0 when std is 0 */
	uint64_t out3, out6;      /* |x - mean| > 3 std, > 6 std */
	uint32_t group;           /* group length along the input dimension */
	uint64_t n_groups, outlier_groups; /* groups with max|x| > 4 * group RMS */
	qtk_hist hist;             /* values, lo = min, hi = max */
	/* per input channel (last logical dimension) absmax over all rows */
	uint64_t n_channels;
	uint32_t n_profile;       /* buckets in profile (<= QTK_ST_PROFILE) */
	uint32_t profile_span;    /* channels per bucket */
	float profile[QTK_ST_PROFILE];/* max channel absmax in each bucket */
	double channel_median;    /* median channel absmax */
	int n_top;
	uint64_t top_idx[QTK_ST_TOPK];/* channels with the largest absmax, largest first */
	float top_val[QTK_ST_TOPK];
	/* quantization side data ("where cheap") */
	bool has_scales;
	const char *scale_what;   /* "group scale", "block d", "super-block d" */
	qtk_hist scales;
	bool has_mins;            /* ggml *_1 mins, k-quant dmin */
	qtk_hist mins;
	int zero_levels;          /* AWQ/GPTQ: integer zero points 0..zero_levels-1; 0 none */
	uint64_t zeros[257];
	int code_bits;            /* 0 when codes are not read for this layout */
	uint64_t codes[256];
	uint64_t n_codes;
	int codes_used;
	double code_entropy;      /* bits */
} qtk_tstats;

/* Progress callback: done of total units; may be NULL. */
typedef void (*qtk_stats_progress)(void *ctx, uint64_t done, uint64_t total);

/* Compute statistics of t (needs qtk_can_decode). 0 or an error in m->err. */
int qtk_stats_compute(qtk_model *m, const qtk_tensor *t, qtk_tstats *s, qtk_stats_progress cb, void *ctx);

/* Tests: decode at most `elems` values per chunk (0 restores the default); returns the
 * previous setting. */
uint64_t qtk_stats_test_chunk(uint64_t elems);

/* Shannon entropy in bits of counts[0..n). */
double qtk_stats_entropy(const uint64_t *counts, size_t n);

/* "tensor 'NAME'", the subject of an error about t (static buffer, valid
 * until the next call). */
const char *qtk_stats_subject(const qtk_tensor *t);

/* The "stats" object of qinspect --json (docs/json.md, "stats"). */
cJSON *qtk_stats_json(const qtk_tstats *s);

/* ---- Decoding logical rows in chunks (shared with --diff) -------------- */

typedef struct qtk_trows {
	qtk_model *m;
	const qtk_tensor *t;
	uint64_t rows, cols;     /* logical rows (all but the last dimension) and row length */
	uint64_t step;           /* rows per chunk */
	uint64_t cstep;          /* columns per chunk: cols, or less when one row is more than a
				  * chunk (plain tensors only; then step is 1) */
	uint64_t row_bytes;      /* plain: encoded bytes per row */
	uint8_t *raw;            /* plain: encoded bytes of the last chunk read */
	qtk_pwin pw;             /* packed: windows of rows */
	float *buf;              /* step * cstep floats */
} qtk_trows;

/* Prepare to read t in chunks of a multiple of `align` rows (0 or 1: any); when
 * `col_chunks`, a plain tensor whose rows are longer than a chunk is read in column chunks
 * (cstep < cols, whole encoded blocks). Returns 0 or an error code (details in m->err). */
int qtk_trows_open(qtk_trows *r, qtk_model *m, const qtk_tensor *t, uint64_t align);
int qtk_trows_open_cols(qtk_trows *r, qtk_model *m, const qtk_tensor *t, uint64_t align, bool col_chunks);
/* Decode rows [row0, row0 + n), n <= r->step; *out is valid until the next call. */
int qtk_trows_read(qtk_trows *r, uint64_t row0, uint64_t n, const float **out);
/* Decode columns [c0, c0 + nc) of rows [row0, row0 + n) (nc <= r->cstep, c0 a multiple of
 * cstep), [n][nc] into *out. */
int qtk_trows_read_cols(qtk_trows *r, uint64_t row0, uint64_t n, uint64_t c0, uint64_t nc, const float **out);
void qtk_trows_close(qtk_trows *r);
#endif
