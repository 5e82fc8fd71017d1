/* exec.c - qconvert's execution: row chunks in parallel, whole-tensor group
 * transcodes, and the error of every output against the decoded source. */
#include "cli.h"
#include "convert.h"
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHUNK_BYTES ((size_t)8 << 20)

/* A part indexed by input feature (act-order's g_idx, [in]): moving output rows leaves it be. */
static bool input_indexed(const qtk_part *q) { return !strcmp(q->role, "g_idx"); }

bool conv_rows_movable(const qtk_tensor *t)
{
	const qtk_scheme *sc = t->layout.kind == QTK_LAYOUT_PLAIN ? NULL : qtk_scheme_of(t);
	if (t->ndim != 2 || !sc || !sc->parts_by_row)
		return false;
	for (int i = 0; i < t->nparts; i++) {
		const qtk_part *q = &t->parts[i];
		uint64_t elems = 1;
		bool ok = true;
		for (int d = 0; d < q->ndim && ok; d++)
			ok = qtk_mul_u64(elems, q->shape[d], &elems);
		if (!input_indexed(q) && !(q->ndim >= 1 && q->shape[0] == t->shape[0]) && !(ok && elems <= 2 && q->nbytes <= 16))
			return false;
	}
	return true;
}

/* Is environment variable k set to v? */
static bool getenv_is(const char *k, const char *v)
{
	const char *e = getenv(k);
	return e && !strcmp(e, v);
}

/* ---- encoding and error measurement ------------------------------------ */

static void encode_float(unsigned type, const float *x, uint64_t n, uint8_t *out)
{
	for (uint64_t i = 0; i < n; i++) {
		if (type == QTK_T_F32) {
			uint32_t u;
			memcpy(&u, &x[i], 4);
			qtk_wr32(out + 4 * i, u);
		} else {
			qtk_wr16(out + 2 * i, type == QTK_T_F16 ? qtk_f32_to_fp16(x[i]) : qtk_f32_to_bf16(x[i]));
		}
	}
}

/* One element, any value (NaN and infinities included). */
static void errstat_one(errstat *e, float rf, float of)
{
	uint32_t a, b;
	memcpy(&a, &rf, 4);
	memcpy(&b, &of, 4);
	e->n++;
	double r = rf, q = of;
	if (a == b) {
		if (isfinite(r)) {
			e->sum_sq_ref += r * r;
			e->sum_sq_out += r * r;
			e->dot += r * r;
		}
		return;
	}
	e->n_diff_bits++;
	if (!isfinite(r) || !isfinite(q)) {
		if (!(isnan(r) && isnan(q)))
			e->max_abs = INFINITY;
		return;
	}
	double d = q - r;
	e->sum_sq_err += d * d;
	e->sum_sq_ref += r * r;
	e->sum_sq_out += q * q;
	e->dot += r * q;
	if (fabs(d) > e->max_abs)
		e->max_abs = fabs(d);
}

/* The error sums of out against ref. Finite values go four at a time into four independent
 * partial sums (element i into lane i % 4), added together in lane order at the end: a fixed
 * order, so the figures do not depend on threads or machine, and four times the throughput of
 * one chain of double additions. Blocks holding a non-finite value take errstat_one. An
 * element whose bits are equal adds d = 0 and r*r to the reference, output and dot sums,
 * as errstat_one does. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ERRSTAT_AVX 1
/* errstat_add's five sums (error, reference, output, dot, largest |d|) in AVX registers: every
 * lane does the very same double operations in the same order (no FMA), so the sums are the
 * same bits as four scalar lanes'. */
typedef struct {
	__m256d err, sr, so, dt, mx;
} errlanes;

__attribute__((target("avx"))) static inline errlanes errlanes_load(const double *acc)
{
	return (errlanes){_mm256_loadu_pd(acc), _mm256_loadu_pd(acc + 4), _mm256_loadu_pd(acc + 8),
			  _mm256_loadu_pd(acc + 12), _mm256_loadu_pd(acc + 16)};
}

__attribute__((target("avx"))) static inline void errlanes_store(const errlanes *l, double *acc)
{
	_mm256_storeu_pd(acc, l->err);
	_mm256_storeu_pd(acc + 4, l->sr);
	_mm256_storeu_pd(acc + 8, l->so);
	_mm256_storeu_pd(acc + 12, l->dt);
	_mm256_storeu_pd(acc + 16, l->mx);
}

/* four reference values a and output values b into the sums */
__attribute__((target("avx"))) static inline void errlanes_add(errlanes *l, __m128 a, __m128 b)
{
	const __m256d r = _mm256_cvtps_pd(a), q = _mm256_cvtps_pd(b), d = _mm256_sub_pd(q, r);
	l->err = _mm256_add_pd(l->err, _mm256_mul_pd(d, d));
	l->sr = _mm256_add_pd(l->sr, _mm256_mul_pd(r, r));
	l->so = _mm256_add_pd(l->so, _mm256_mul_pd(q, q));
	l->dt = _mm256_add_pd(l->dt, _mm256_mul_pd(r, q));
	/* |d| > mx ? |d| : mx */
	l->mx = _mm256_max_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), d), l->mx);
}

/* errstat_add's main loop from group i: returns the index of the first group of four it did not
 * take (one holding a non-finite value, or the tail). */
__attribute__((target("avx"))) static uint64_t errstat_lanes_avx(const float *ref, const float *out,
								   uint64_t i, uint64_t n, double *acc,
								   uint64_t *diff)
{
	errlanes l = errlanes_load(acc);
	const __m128i expo = _mm_set1_epi32(0x7F800000);
	uint64_t nd = 0;
	for (; i + 4 <= n; i += 4) {
		const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(ref + i));
		const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(out + i));
		const __m128i inf = _mm_or_si128(_mm_cmpeq_epi32(_mm_and_si128(a, expo), expo),
						 _mm_cmpeq_epi32(_mm_and_si128(b, expo), expo));
		if (_mm_movemask_epi8(inf))
			break;
		nd += 4 - (uint64_t)__builtin_popcount((unsigned)_mm_movemask_ps(
				  _mm_castsi128_ps(_mm_cmpeq_epi32(a, b))));
		errlanes_add(&l, _mm_castsi128_ps(a), _mm_castsi128_ps(b));
	}
	errlanes_store(&l, acc);
	*diff += nd;
	return i;
}

/* errstat_lanes_avx over every whole group of four from 0, supposing every value finite: the
 * same operations on the sums without the per-group test, and instead of counting differing
 * values, whether any differs (*diff 1 or 0: only its being 0 is used). true when the
 * supposition held: a non-finite value makes r*r or q*q, and so the reference or output sum,
 * non-finite (finite floats' squares and their sums stay far inside double's range); then acc
 * and *diff are left as they were, for the careful loop to start over. */
__attribute__((target("avx"))) static bool errstat_lanes_fast(const float *ref, const float *out, uint64_t n,
								double *acc, uint64_t *diff)
{
	errlanes l = errlanes_load(acc);
	__m128 dif = _mm_setzero_ps();
	for (uint64_t i = 0; i + 4 <= n; i += 4) {
		const __m128 a = _mm_loadu_ps(ref + i), b = _mm_loadu_ps(out + i);
		dif = _mm_or_ps(dif, _mm_xor_ps(a, b));
		errlanes_add(&l, a, b);
	}
	/* x - x is 0 for finite x, NaN for an infinity or a NaN */
	const __m256d z = _mm256_add_pd(_mm256_sub_pd(l.sr, l.sr), _mm256_sub_pd(l.so, l.so));
	if (_mm256_movemask_pd(_mm256_cmp_pd(z, z, _CMP_UNORD_Q)))
		return false;
	errlanes_store(&l, acc);
	*diff = !_mm_testz_si128(_mm_castps_si128(dif), _mm_castps_si128(dif));
	return true;
}
#endif

static void errstat_add(errstat *e, const float *ref, const float *out, uint64_t n)
{
	double acc[20] = {0};
	double *err = acc, *sr = acc + 4, *so = acc + 8, *dt = acc + 12, *mxl = acc + 16;
	uint64_t diff = 0, i = 0;
	errstat tail;
	memset(&tail, 0, sizeof tail);
#ifdef ERRSTAT_AVX
	static int avx_state; /* 0 unknown, 1 no, 2 yes */
	int avx = __atomic_load_n(&avx_state, __ATOMIC_RELAXED);
	if (!avx) {
		const char *g = getenv("QTK_SIMD");
		avx = !(g && strcmp(g, "generic") == 0) && __builtin_cpu_supports("avx") ? 2 : 1;
		__atomic_store_n(&avx_state, avx, __ATOMIC_RELAXED);
	}
	/* every value finite (almost always): all whole groups at once */
	if (avx == 2 && errstat_lanes_fast(ref, out, n, acc, &diff))
		i = n / 4 * 4;
#endif
	for (; i + 4 <= n; i += 4) {
#ifdef ERRSTAT_AVX
		if (avx == 2) {
			i = errstat_lanes_avx(ref, out, i, n, acc, &diff);
			if (i + 4 > n)
				break;
		}
#endif
		bool fin = true;
		for (unsigned l = 0; l < 4; l++)
			fin &= isfinite(ref[i + l]) && isfinite(out[i + l]);
		if (!fin) {
			for (unsigned l = 0; l < 4; l++)
				errstat_one(&tail, ref[i + l], out[i + l]);
			continue;
		}
		for (unsigned l = 0; l < 4; l++) {
			uint32_t a, b;
			memcpy(&a, &ref[i + l], 4);
			memcpy(&b, &out[i + l], 4);
			diff += a != b;
			double r = ref[i + l], q = out[i + l], d = q - r;
			err[l] += d * d;
			sr[l] += r * r;
			so[l] += q * q;
			dt[l] += r * q;
			mxl[l] = fabs(d) > mxl[l] ? fabs(d) : mxl[l];
		}
	}
	for (; i < n; i++)
		errstat_one(&tail, ref[i], out[i]);
	e->sum_sq_err += ((err[0] + err[1]) + (err[2] + err[3])) + tail.sum_sq_err;
	e->sum_sq_ref += ((sr[0] + sr[1]) + (sr[2] + sr[3])) + tail.sum_sq_ref;
	e->sum_sq_out += ((so[0] + so[1]) + (so[2] + so[3])) + tail.sum_sq_out;
	e->dot += ((dt[0] + dt[1]) + (dt[2] + dt[3])) + tail.dot;
	for (unsigned l = 0; l < 4; l++)
		if (mxl[l] > e->max_abs)
			e->max_abs = mxl[l];
	if (tail.max_abs > e->max_abs)
		e->max_abs = tail.max_abs;
	e->n += n;
	e->n_diff_bits += diff + tail.n_diff_bits;
}

static void errstat_finish(const errstat *e, tensor_result *r)
{
	r->exact = e->n_diff_bits == 0;
	r->rmse = e->n ? sqrt(e->sum_sq_err / (double)e->n) : 0;
	r->max_abs_err = e->max_abs;
	r->sqnr_db = e->sum_sq_err > 0 ? 10.0 * log10(e->sum_sq_ref / e->sum_sq_err) : INFINITY;
	double den = sqrt(e->sum_sq_ref) * sqrt(e->sum_sq_out);
	r->cosine = den > 0 ? e->dot / den : 1.0;
	r->bias = e->sum_sq_ref > 0 ? e->dot / e->sum_sq_ref : 1.0;
}

/* Rows are converted in fixed chunks (independent of the thread count),
 * a window of chunks at a time in parallel, then written in order. */
#define CHUNK_ELEMS ((uint64_t)1 << 16)
#define WINDOW_ELEMS ((uint64_t)1 << 23)

typedef struct window {
	qtk_model *in;
	const qtk_tensor *t;
	unsigned out_type;
	const float *whole;       /* the window's rows of a decoded AWQ/GPTQ source, else NULL */
	const qgroups *qg;        /* the source as integer groups, for exact transcodes */
	uint64_t qg0;             /* the source row of qg's first row */
	const uint8_t *mem_src;   /* the encoded source in memory (row-permuted), else read from the file */
	bool rows_transcode;      /* source and target are ggml blocks qgroups can map */
	uint8_t *const *packed;   /* the parts of a packed source its scheme shuffles into out_type: */
	const qtk_tensor *pt;     /* the tensor they hold (t whole, or a window of its rows) */
	uint64_t p0;              /* the source row of pt's first row */
	bool scaled;              /* NVFP4 blocks whose values are times scale (the .scale beside them) */
	float scale;
	const float *imatrix;
	uint64_t imatrix_rows;    /* > 0: imatrix holds a vector per this many rows (experts) */
	unsigned qflags;          /* qtk_quant_ggml_ex's flags */
	uint64_t row0, rows_end, cols, chunk_rows;
	uint64_t in_row_bytes, out_row_bytes;
	uint8_t *out;             /* output bytes of the window */
	qtk_writer *w;            /* job 0 of each window's loop does the writer's deferred put: */
	int put_rc;               /* the previous window's (or tensor's) bytes */
	errstat *es;              /* per chunk */
	qtk_err *errs;            /* per chunk */
} window;

/* Encode n floats to type (a whole number of rows). */
static int encode_rows(unsigned type, const float *x, uint64_t nrows, uint64_t cols, uint8_t *out,
		       const float *imatrix, unsigned qflags)
{
	const qtk_type_info *ti = qtk_type(type);
	if (ti->is_float) {
		encode_float(type, x, nrows * cols, out);
		return 0;
	}
	return qtk_quant_ggml_ex(type, x, out, nrows, cols, imatrix, qflags);
}

/* Encode rows r0 .. r0+nr-1 of the window's tensor (values x) into dst, each row with its own
 * importance vector: a chunk may span experts of a 3-D tensor. */
static int encode_window_rows(const window *w, const float *x, uint64_t r0, uint64_t nr, uint8_t *dst)
{
	if (!w->imatrix || !w->imatrix_rows)
		return encode_rows(w->out_type, x, nr, w->cols, dst, w->imatrix, w->qflags);
	for (uint64_t r = 0; r < nr;) {
		uint64_t e = (r0 + r) / w->imatrix_rows, end = (e + 1) * w->imatrix_rows - r0;
		uint64_t n = (end < nr ? end : nr) - r;
		if (encode_rows(w->out_type, x + r * w->cols, n, w->cols, dst + r * w->out_row_bytes, w->imatrix + e * w->cols, w->qflags))
			return -1;
		r += n;
	}
	return 0;
}

static void chunk_job(void *ctx, size_t ji)
{
	window *w = ctx;
	if (ji == 0) { /* the write of what the last loop encoded, beside this one's encoding */
		w->put_rc = qtk_writer_put_pending(w->w);
		return;
	}
	const size_t i = ji - 1;
	const qtk_tensor *t = w->t;
	uint64_t r0 = w->row0 + i * w->chunk_rows;
	uint64_t nr = w->rows_end - r0 < w->chunk_rows ? w->rows_end - r0 : w->chunk_rows;
	uint64_t n = nr * w->cols;
	qtk_err *e = &w->errs[i];
	float *ref = NULL, *back = qtk_malloc((size_t)n * sizeof(float));
	uint8_t *raw = NULL;
	const float *x = NULL;
	if (!back)
		goto oom;
	if (w->whole) {
		x = w->whole + (r0 - w->row0) * w->cols;
	} else {
		ref = qtk_malloc((size_t)n * sizeof(float));
		raw = qtk_malloc((size_t)(nr * w->in_row_bytes));
		if (!ref || !raw)
			goto oom;
		if (w->mem_src) {
			memcpy(raw, w->mem_src + (r0 - w->row0) * w->in_row_bytes, (size_t)(nr * w->in_row_bytes));
		} else if (qtk_read_part_to(w->in, t, 0, r0 * w->in_row_bytes, raw, (size_t)(nr * w->in_row_bytes), e)) {
			goto out; /* pread (or a view of pread files): safe from every worker */
		}
		if (qtk_dequant_ggml(t->layout.type, raw, ref, n)) {
			qtk_err_set(e, QTK_E_DATA, NULL, -1, t->name, "cannot decode this type");
			goto out;
		}
		x = ref;
	}
	uint8_t *dst = w->out + (r0 - w->row0) * w->out_row_bytes;
	/* an exact transcode when the integers fit the target; else encode the values */
	bool done = false;
	if (w->packed)
		done = qtk_scheme_to_ggml_rows(w->pt, (const void *const *)w->packed, r0 - w->p0, nr, w->out_type, dst) == 0;
	else if (w->qg)
		done = qg_to_ggml(w->qg, w->out_type, (uint32_t)(r0 - w->qg0), (uint32_t)nr, dst) == 0;
	else if (w->rows_transcode && raw) {
		qgroups g;
		if (qg_from_ggml(t->layout.type, raw, (uint32_t)nr, (uint32_t)w->cols, &g) == 0) {
			done = qg_to_ggml(&g, w->out_type, 0, (uint32_t)nr, dst) == 0;
			qg_free(&g);
		}
	}
	if (!done && encode_window_rows(w, x, r0, nr, dst)) {
		qtk_err_set(e, QTK_E_INTERNAL, NULL, -1, t->name, "encoder failed");
		goto out;
	}
	if (qtk_dequant_ggml(w->out_type, dst, back, n)) {
		qtk_err_set(e, QTK_E_INTERNAL, NULL, -1, t->name, "cannot decode the output");
		goto out;
	}
	if (w->scaled) /* as llama.cpp applies <name>.scale: one F32 multiply */
		for (uint64_t k = 0; k < n; k++)
			back[k] *= w->scale;
	errstat_add(&w->es[i], x, back, n);
	goto out;
oom:
	qtk_err_set(e, QTK_E_IO, NULL, -1, t->name, "out of memory");
out:
	qtk_free(ref);
	qtk_free(back);
	qtk_free(raw);
}

static void errstat_merge(errstat *a, const errstat *b)
{
	a->sum_sq_err += b->sum_sq_err;
	a->sum_sq_ref += b->sum_sq_ref;
	a->sum_sq_out += b->sum_sq_out;
	a->dot += b->dot;
	if (b->max_abs > a->max_abs)
		a->max_abs = b->max_abs;
	a->n += b->n;
	a->n_diff_bits += b->n_diff_bits;
}

/* Row-permute (llama.cpp's Q/K order) a matrix of rows x row_bytes in place. */
static int permute_inplace(uint8_t *b, uint64_t rows, uint64_t row_bytes, int heads, bool inverse, const char *name,
			   qtk_err *err)
{
	if (rows % (2 * (uint64_t)heads))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, name, "%llu rows cannot be split into %d heads",
				   (unsigned long long)rows, heads);
	uint8_t *tmp = qtk_malloc((size_t)(rows * row_bytes));
	if (!tmp)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, name, "out of memory");
	qtk_family_permute_rows(b, tmp, rows, row_bytes, heads, inverse);
	memcpy(b, tmp, (size_t)(rows * row_bytes));
	qtk_free(tmp);
	return 0;
}

/* Rows r0 .. r0+n-1 of a plain tensor's part 0 (in the plan's Q/K order) into dst. */
/* Rows r0 .. r0+n-1 of a plain tensor's part 0 into dst, read in order (a QPK part's digest is
 * checked as it is read through); with Q/K permutation the rows are whole heads (r0 and n
 * multiples of rows/heads), read into tmp and permuted within the window. */
static int stage_part_rows(qtk_model *in, const plan *p, int k, uint8_t *dst, uint8_t *tmp, uint64_t r0, uint64_t n,
			   uint64_t rb, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	uint64_t hd = p->perm_heads ? qtk_tensor_rows(t) / (uint64_t)p->perm_heads : 1;
	if (p->perm_heads && (!hd || r0 % hd || n % hd || !tmp))
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "rows %llu..%llu are not whole heads",
				   (unsigned long long)r0, (unsigned long long)(r0 + n));
	int rc = qtk_read_part(in, t, k, r0 * rb, p->perm_heads ? tmp : dst, (size_t)(n * rb));
	if (rc)
		*err = in->err;
	else if (p->perm_heads)
		qtk_family_permute_rows(tmp, dst, n, rb, (int)(n / hd), p->perm_inverse);
	return rc;
}

static int stage_rows(qtk_model *in, const plan *p, uint8_t *dst, uint8_t *tmp, uint64_t r0, uint64_t n, uint64_t rb,
		      qtk_err *err)
{
	return stage_part_rows(in, p, 0, dst, tmp, r0, n, rb, err);
}

/* Part k of t as it is stored, through buf (CHUNK_BYTES); *done counts bytes for the progress
 * line. Bytes stored verbatim in a file go file to file when the writer can: never through buf,
 * or only read back from the output for the record's tee. */
static int copy_part(qtk_model *in, qtk_writer *w, const qtk_tensor *t, int k, uint8_t *buf, uint64_t *done,
		     qtk_err *err)
{
	int rc = 0;
	for (uint64_t off = 0; off < t->parts[k].nbytes && !rc; off += CHUNK_BYTES) {
		uint64_t left = t->parts[k].nbytes - off;
		size_t n = left < CHUNK_BYTES ? (size_t)left : CHUNK_BYTES;
		int fd;
		const char *path;
		uint64_t at;
		if (qtk_part_in_file(in, t, k, &fd, &path, &at) &&
		    (rc = qtk_writer_put_file(w, fd, path, at + off, n, buf)) != 1) {
			*done += n;
			cli_progress_within(*done, t->n_bytes);
			continue;
		}
		rc = qtk_read_part(in, t, k, off, buf, n);
		if (rc)
			*err = in->err;
		else
			rc = qtk_writer_put(w, buf, n);
		*done += n;
		cli_progress_within(*done, t->n_bytes);
	}
	return rc;
}

static int copy_parts(qtk_model *in, qtk_writer *w, const plan *p, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	uint8_t *buf = qtk_malloc(CHUNK_BYTES);
	if (!buf)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	int rc = 0;
	uint64_t done = 0;
	if (p->perm_heads && t->layout.kind != QTK_LAYOUT_PLAIN && !conv_rows_movable(t))
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "row permutation of a grouped layout");
	for (int k = 0; k < t->nparts && !rc; k++) {
		/* with Q/K rows moved: a plain tensor's rows, or each part's of a packed layout whose
		 * parts are all rows of output features, tensor-wide or per input (conv_rows_movable;
		 * the planner sends no other here), in the plan's order a buffer of them at a time */
		const uint64_t rows = qtk_tensor_rows(t);
		const bool per_row = p->perm_heads && (t->layout.kind == QTK_LAYOUT_PLAIN ||
						       (!input_indexed(&t->parts[k]) && t->parts[k].shape[0] == rows));
		if (!per_row) { /* as stored (tensor-wide parts, g_idx, every part without Q/K moves) */
			rc = copy_part(in, w, t, k, buf, &done, err);
			continue;
		}
		const uint64_t rb = rows ? t->parts[k].nbytes / rows : 0;
		if (!rows || rows % (2 * (uint64_t)p->perm_heads) || !rb || rb * rows != t->parts[k].nbytes) {
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%llu rows cannot be split into %d heads",
					 (unsigned long long)rows, p->perm_heads);
			break;
		}
		uint64_t hd = rows / (uint64_t)p->perm_heads, step = CHUNK_BYTES / rb / hd * hd;
		if (step < hd)
			step = hd;
		if (step > rows)
			step = rows;
		uint8_t *b = qtk_malloc((size_t)(step * rb)), *tmp = qtk_malloc((size_t)(step * rb));
		rc = b && tmp ? 0 : qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
		for (uint64_t r0 = 0; r0 < rows && !rc; r0 += step) {
			uint64_t n = rows - r0 < step ? rows - r0 : step;
			rc = stage_part_rows(in, p, k, b, tmp, r0, n, rb, err);
			rc = rc ? rc : qtk_writer_put(w, b, (size_t)(n * rb));
			cli_progress_within(r0 + n, rows);
		}
		qtk_free(b);
		qtk_free(tmp);
	}
	qtk_free(buf);
	return rc;
}

static bool ggml_int_type(unsigned t)
{
	return t == QTK_T_Q4_0 || t == QTK_T_Q4_1 || t == QTK_T_Q5_0 || t == QTK_T_Q8_0;
}

/* Read an AWQ/GPTQ tensor as integer groups. */
static int load_groups(qtk_model *in, const qtk_tensor *t, qgroups *g, qtk_err *err)
{
	uint8_t *pp[QTK_MAX_PARTS] = {NULL};
	int rc = 0;
	for (int k = 0; k < t->nparts && !rc; k++)
		if (qtk_read_part_alloc(in, t, k, &pp[k])) {
			*err = in->err;
			rc = err->code;
		}
	if (!rc) {
		if (qtk_scheme_to_groups(t, (const void *const *)pp, g))
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
	}
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(pp[k]);
	return rc;
}

/* Row-permute integer groups (rows are output features). */
static int permute_groups(qgroups *g, const plan *p, qtk_err *err)
{
	const char *n = p->src->name;
	if (permute_inplace(g->q, g->out, g->in, p->perm_heads, p->perm_inverse, n, err) ||
	    permute_inplace((uint8_t *)g->z, g->out, (uint64_t)g->ngroups * sizeof *g->z, p->perm_heads, p->perm_inverse, n, err) ||
	    permute_inplace((uint8_t *)g->s, g->out, (uint64_t)g->ngroups * sizeof *g->s, p->perm_heads, p->perm_inverse, n, err) ||
	    (g->m && permute_inplace((uint8_t *)g->m, g->out, (uint64_t)g->ngroups * sizeof *g->m, p->perm_heads,
				     p->perm_inverse, n, err)))
		return err->code;
	return 0;
}

/* The groups of a window of n rows, whole heads of hd rows each, into the plan's Q/K order. */
static int permute_window_groups(qgroups *g, const plan *p, uint64_t n, uint64_t hd, qtk_err *err)
{
	const char *nm = p->src->name;
	const int heads = hd ? (int)(n / hd) : 0;
	if (!heads || n % hd)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, nm, "a window of %llu rows is not whole heads", (unsigned long long)n);
	if (permute_inplace(g->q, g->out, g->in, heads, p->perm_inverse, nm, err) ||
	    permute_inplace((uint8_t *)g->z, g->out, (uint64_t)g->ngroups * sizeof *g->z, heads, p->perm_inverse, nm, err) ||
	    permute_inplace((uint8_t *)g->s, g->out, (uint64_t)g->ngroups * sizeof *g->s, heads, p->perm_inverse, nm, err) ||
	    (g->m && permute_inplace((uint8_t *)g->m, g->out, (uint64_t)g->ngroups * sizeof *g->m, heads, p->perm_inverse, nm,
				     err)))
		return err->code;
	return 0;
}

/* The integer groups of rows r0 .. r0+n-1 of a 2-D packed source, from only their bytes
 * (qtk_pwin), row-permuted within the window when Q/K rows are (n whole heads of hd rows). */
static int window_groups(qtk_pwin *pw, const plan *p, uint64_t r0, uint64_t n, uint64_t hd, qgroups *g, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	uint64_t got;
	if (qtk_pwin_load(pw, r0, n, &got)) {
		*err = pw->m->err;
		return err->code ? err->code : QTK_E_IO;
	}
	if (pw->whole && g->q)
		return 0;
	qg_free(g);
	if (got != n)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "row window out of step");
	if (!pw->whole && (r0 != pw->w0 || n != pw->wn))
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "row window out of step");
	/* the loaded window is these rows (or, whole, every row: their groups once) */
	int q = qtk_scheme_to_groups(&pw->sub, (const void *const *)pw->buf, g);
	if (q)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
	if (p->perm_heads && !pw->whole) {
		if (permute_window_groups(g, p, n, hd, err))
			return err->code;
	} else if (p->perm_heads && permute_groups(g, p, err)) {
		return err->code;
	}
	return 0;
}

/* Row-chunked conversion to a plain type. */
/* Rows r0 .. r0+n-1 of an AWQ/GPTQ tensor decoded from its packed parts (r0, n multiples of 32). */
static int decode_rows(const qtk_tensor *t, uint8_t *const *pp, uint64_t r0, uint64_t n, float *dst, qtk_err *err)
{
	int r = qtk_scheme_decode_rows(t, (const void *const *)pp, r0, n, dst);
	return r ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components") : 0;
}

static int run_rows(qtk_model *in, qtk_writer *w, const plan *p, int threads, tensor_result *r, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	const float *imatrix = p->imatrix;
	window win;
	memset(&win, 0, sizeof win);
	win.in = in;
	win.w = w;
	win.t = t;
	win.out_type = p->out->layout.type;
	win.imatrix = imatrix;
	win.imatrix_rows = p->imatrix_rows;
	win.qflags = p->imatrix_run ? QTK_QUANT_IMATRIX_RUN : 0;
	win.cols = qtk_tensor_cols(t);
	uint64_t rows = qtk_tensor_rows(t);
	win.chunk_rows = CHUNK_ELEMS / win.cols ? CHUNK_ELEMS / win.cols : 1;
	uint64_t win_rows = (WINDOW_ELEMS / win.cols / win.chunk_rows) * win.chunk_rows;
	if (win_rows < win.chunk_rows)
		win_rows = win.chunk_rows;
	if (qtk_type_nbytes(win.out_type, win.cols, &win.out_row_bytes) ||
	    (t->layout.kind == QTK_LAYOUT_PLAIN && qtk_type_nbytes(t->layout.type, win.cols, &win.in_row_bytes)))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "row size does not fit the type");
	float *whole = NULL;
	qgroups g;
	memset(&g, 0, sizeof g);
	win.rows_transcode = t->layout.kind == QTK_LAYOUT_PLAIN && ggml_int_type(t->layout.type) &&
			     ggml_int_type(win.out_type);
	/* Q/K-permuted rows, or a source read through its format (QPK chunks, archive members):
	 * each window's rows are read here, in order, before the workers encode them */
	uint8_t *mem = NULL, *stmp = NULL;
	const bool staged = t->layout.kind == QTK_LAYOUT_PLAIN && (p->perm_heads || qtk_model_streamed(in));
	if (staged && p->perm_heads && rows % (2 * (uint64_t)p->perm_heads))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%llu rows cannot be split into %d heads",
				   (unsigned long long)rows, p->perm_heads);
	if (staged && p->perm_heads) { /* windows of whole heads */
		uint64_t a = qtk_lcm_u64(win.chunk_rows, rows / (uint64_t)p->perm_heads);
		win_rows = a >= rows ? rows : (WINDOW_ELEMS / win.cols / a > 1 ? WINDOW_ELEMS / win.cols / a : 1) * a;
	}
	if (staged) {
		size_t wb = (size_t)((rows < win_rows ? rows : win_rows) * win.in_row_bytes);
		mem = qtk_malloc(wb);
		stmp = p->perm_heads ? qtk_malloc(wb) : NULL;
		if (!mem || (p->perm_heads && !stmp)) {
			qtk_free(mem);
			qtk_free(stmp);
			return qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
		}
		win.mem_src = mem;
	}
	const qtk_scheme *ss = qtk_scheme_of(t);
	/* packed sources whose rows are read a window at a time (qtk_pwin): 2-D sources decoded
	 * and encoded (no NVFP4 scale), and blocks shuffled into the target (wshuf); the others
	 * hold their parts */
	bool shuffle = ss && ss->to_ggml_rows && !p->perm_heads &&
		       qtk_scheme_exact_ggml(t->layout.kind, t->layout.bits, t->layout.sym, t->layout.group_size, win.cols) ==
			       win.out_type;
	/* scaled NVFP4 blocks into ggml's (the .scale beside them) shuffle too */
	const bool nvshuf = ss && p->nv_scaled && win.out_type == QTK_T_NVFP4;
	bool windowed = ss && t->ndim == 2 && !shuffle && !p->nv_scaled;
	/* blocks shuffled a window of rows at a time (pw); Q/K-permuted NVFP4 rows are permuted
	 * whole, below */
	const bool wshuf = (shuffle || nvshuf) && !p->perm_heads && !getenv_is("QTK_REPACK", "windows");
	bool wgroups = false;
	qtk_pwin pw;
	memset(&pw, 0, sizeof pw);
	/* integer groups of the source when it has them (compressed-tensors: F16 scales only) */
	if (ss && ss->to_groups && ggml_int_type(win.out_type) &&
	    (!ss->part_specs || t->layout.scale_type == QTK_T_F16) && windowed) {
		wgroups = true; /* a window's groups at a time */
	} else if (ss && ss->to_groups && ggml_int_type(win.out_type) &&
	    (!ss->part_specs || t->layout.scale_type == QTK_T_F16)) {
		if (load_groups(in, t, &g, err))
			return err->code;
		if (p->perm_heads && permute_groups(&g, p, err)) {
			qg_free(&g);
			return err->code;
		}
		win.qg = &g;
	}
	/* AWQ/GPTQ sources: the packed parts (about half a byte per weight) are held and each
	 * window's rows decoded from them, in whole heads when Q/K rows are permuted */
	uint8_t *packed[QTK_MAX_PARTS] = {NULL};
	float *tmp = NULL;
	uint64_t hd = p->perm_heads ? rows / (uint64_t)p->perm_heads : 1;
	if (t->layout.kind != QTK_LAYOUT_PLAIN) {
		if (p->perm_heads && (rows % (2 * (uint64_t)p->perm_heads) || !hd)) {
			qg_free(&g);
			qtk_free(mem);
			return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%llu rows cannot be split into %d heads",
					   (unsigned long long)rows, p->perm_heads);
		}
		uint64_t a = qtk_lcm_u64(qtk_lcm_u64(win.chunk_rows, 32), hd);
		win_rows = rows % 32 || a >= rows ? rows : (WINDOW_ELEMS / win.cols / a > 1 ? WINDOW_ELEMS / win.cols / a : 1) * a;
		if (win_rows > rows)
			win_rows = rows;
		int rc0 = 0;
		if (windowed || wshuf)
			qtk_pwin_init(&pw, in, t, win_rows);
		for (int k = 0; k < t->nparts && !rc0 && !windowed && !wshuf; k++)
			if ((rc0 = qtk_read_part_alloc(in, t, k, &packed[k])))
				*err = in->err;
		/* NVFP4 blocks shuffled with Q/K permutation: the rows of codes and block scales are
		 * permuted once, here (as llama.cpp's converter permutes both before packing) */
		bool preperm = !rc0 && p->nv_scaled && p->perm_heads;
		if (preperm && (permute_inplace(packed[0], rows, t->parts[0].nbytes / rows, p->perm_heads, p->perm_inverse,
						t->name, err) ||
				permute_inplace(packed[1], rows, t->parts[1].nbytes / rows, p->perm_heads, p->perm_inverse,
						t->name, err)))
			rc0 = err->code;
		whole = rc0 ? NULL : qtk_malloc((size_t)(win_rows * win.cols) * sizeof(float));
		tmp = !whole || !p->perm_heads || preperm ? NULL : qtk_malloc((size_t)(win_rows * win.cols) * sizeof(float));
		if (!rc0 && (!whole || (p->perm_heads && !preperm && !tmp)))
			rc0 = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
		if (rc0) {
			for (int k = 0; k < QTK_MAX_PARTS; k++)
				qtk_free(packed[k]);
			qtk_free(whole);
			qtk_free(tmp);
			qg_free(&g);
			return rc0;
		}
		win.whole = whole;
		/* blocks the target holds as they are (gpt-oss MXFP4 -> MXFP4): a byte shuffle */
		win.pt = t;
		if (shuffle)
			win.packed = wshuf ? pw.buf : packed;
		if (nvshuf) {
			win.packed = wshuf ? pw.buf : packed;
			win.scaled = true;
			win.scale = p->nv_scale;
		}
	}
	size_t max_chunks = (size_t)((win_rows + win.chunk_rows - 1) / win.chunk_rows);
	win.es = qtk_calloc(max_chunks, sizeof *win.es);
	win.errs = qtk_calloc(max_chunks, sizeof *win.errs);
	int rc = 0;
	if (!win.es || !win.errs)
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	errstat total;
	memset(&total, 0, sizeof total);
	for (uint64_t r0 = 0; r0 < rows && !rc; r0 = win.rows_end) {
		win.row0 = r0;
		win.rows_end = rows - r0 < win_rows ? rows : r0 + win_rows;
		if (wshuf) { /* the window's blocks (an expert's rows at most) */
			uint64_t got;
			if (qtk_pwin_load(&pw, r0, win.rows_end - r0, &got)) {
				*err = in->err;
				rc = err->code ? err->code : QTK_E_DATA;
				break;
			}
			win.rows_end = r0 + got;
			win.pt = &pw.sub;
			win.p0 = pw.w0;
		}
		if (staged && (rc = stage_rows(in, p, mem, stmp, r0, win.rows_end - r0, win.in_row_bytes, err)))
			break;
		if (wgroups) {
			if ((rc = window_groups(&pw, p, r0, win.rows_end - r0, hd, &g, err)))
				break;
			win.qg = &g;
			win.qg0 = pw.whole ? 0 : r0;
		}
		if (whole && (windowed || wshuf) && qtk_pwin_decode(&pw, r0, win.rows_end - r0, tmp ? tmp : whole)) {
			*err = in->err;
			rc = err->code ? err->code : QTK_E_DATA;
			break;
		}
		if (whole && !windowed && !wshuf && (rc = decode_rows(t, packed, r0, win.rows_end - r0, tmp ? tmp : whole, err)))
			break;
		if (tmp) /* the window holds whole heads: permute within it */
			qtk_family_permute_rows((const uint8_t *)tmp, (uint8_t *)whole, win.rows_end - r0, win.cols * 4,
					   (int)((win.rows_end - r0) / hd), p->perm_inverse);
		/* the window's output goes to a buffer of the writer's, written by a job of the next
		 * window's (or tensor's) loop while the others encode */
		const size_t obytes = (size_t)((win.rows_end - r0) * win.out_row_bytes);
		if (!(win.out = qtk_writer_defer_buf(w, obytes, err))) {
			rc = err->code;
			break;
		}
		size_t nch = (size_t)((win.rows_end - r0 + win.chunk_rows - 1) / win.chunk_rows);
		memset(win.es, 0, nch * sizeof *win.es);
		for (size_t k = 0; k < nch; k++)
			qtk_err_clear(&win.errs[k]);
		win.put_rc = 0;
		qtk_parallel_for(threads, nch + 1, chunk_job, &win);
		if (win.put_rc) { /* its message is in the writer's error: err */
			rc = win.put_rc;
			break;
		}
		for (size_t k = 0; k < nch && !rc; k++) {
			if (win.errs[k].code) {
				*err = win.errs[k];
				rc = err->code;
			}
			errstat_merge(&total, &win.es[k]);
		}
		if (!rc)
			rc = qtk_writer_put_later(w, win.out, obytes);
		cli_progress_within(win.rows_end, rows); /* a large tensor moves the bar window by window */
	}
	errstat_finish(&total, r);
	if (!rc && wshuf)
		cli_verbose("%s: %s blocks into ggml's a window of rows at a time", t->name,
			    t->layout.kind == QTK_LAYOUT_NVFP4 ? "NVFP4" : "MXFP4");
	qtk_free(win.es);
	qtk_free(win.errs);
	qtk_free(whole);
	qtk_free(tmp);
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(packed[k]);
	qtk_free(mem);
	qtk_free(stmp);
	qg_free(&g);
	qtk_pwin_free(&pw);
	return rc;
}


/* Re-fitting to AWQ/GPTQ runs in slices of output features on all threads.
 * Every output feature is fitted on its own, so the slicing never changes
 * the bytes; slices are multiples of 32 so packed words never straddle them. */
#define GROUP_SLICE 128u
/* Slices of wide matrices are narrower, so that a window of GROUP_SLICE rows (all a 28672-input
 * matrix gets) still spreads over the threads: GROUP_SLICE rows, halved down to 32 while a slice
 * holds more than 2^20 values. A function of the matrix alone, as the reported figures (summed
 * per slice) must not depend on the thread count. */
static uint32_t slice_rows(uint64_t in)
{
	uint32_t r = GROUP_SLICE;
	while (r > 32 && (uint64_t)r * in > ((uint64_t)1 << 20))
		r /= 2;
	return r;
}
/* values per window of output features: a quarter of the plain paths' window, since the packed
 * output of the whole tensor is held beside it (a 70B model's largest matrix: 112 MiB at 4 bits)
 * with three windows of F32: the source's values, the check's decoded values and the previous
 * window's, hashed for the record meanwhile (8 MiB each) */
#define GROUP_WINDOW_ELEMS ((uint64_t)1 << 21)

/* ---- AWQ/GPTQ targets, a window of output features at a time ----
 * A row source gives the values of output features o0 .. o0+n-1 in the plan's row order: plain
 * sources read and decode those rows (each from its Q/K-permuted position), AWQ/GPTQ sources
 * decode them from their packed parts (held: about half a byte per weight), in whole heads
 * when permuting. Memory is a window of F32 beside the packed output, whatever the tensor. */
typedef struct rowsrc {
	qtk_model *in;
	const plan *p;
	uint64_t rb;        /* plain: bytes per row */
	uint8_t *raw;       /* plain: a window of encoded rows */
	uint8_t *rawtmp;    /* plain with Q/K permutation: the rows before permuting */
	uint8_t *packed[QTK_MAX_PARTS]; /* AWQ/GPTQ: the source's parts */
	float *tmp;         /* AWQ/GPTQ with Q/K permutation: rows before permuting */
	uint64_t hd;        /* rows per head when permuting, else 1 */
	uint32_t win;       /* rows per window */
	uint32_t raw_o0, raw_n; /* plain: raw holds these rows already (raw_ok; stream_windows) */
	bool raw_ok;
	bool windowed;      /* packed 2-D source read a window at a time (pw), not held */
	qtk_pwin pw;
} rowsrc;

static void rowsrc_close(rowsrc *s)
{
	qtk_free(s->raw);
	qtk_free(s->rawtmp);
	qtk_free(s->tmp);
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(s->packed[k]);
	qtk_pwin_free(&s->pw);
	memset(s, 0, sizeof *s);
}

/* The source's parts whole (paths that need every row at once). */
static int rowsrc_whole(rowsrc *s, qtk_err *err)
{
	const qtk_tensor *t = s->p->src;
	int rc = 0;
	for (int k = 0; k < t->nparts && !rc; k++)
		if (!s->packed[k] && (rc = qtk_read_part_alloc(s->in, t, k, &s->packed[k])))
			*err = s->in->err;
	return rc;
}

/* Windows of whole fitting slices, of whole heads when permuting, and of multiples of
 * align_rows (0: any); where the window can hold several, a multiple of threads slices, so no
 * thread waits alone on a window's last slice (n_ff 2816: 5 slices of 128 rows on 2 threads
 * took 3 slices' time, 4 take 2). The bytes and figures do not depend on the windows. */
static int rowsrc_open(rowsrc *s, qtk_model *in, const plan *p, uint64_t align_rows, int threads, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	uint32_t out = (uint32_t)t->shape[0], inf = (uint32_t)t->shape[1];
	bool plain = t->layout.kind == QTK_LAYOUT_PLAIN;
	memset(s, 0, sizeof *s);
	s->in = in;
	s->p = p;
	s->hd = 1;
	if (!out || !inf)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "an empty matrix has no groups");
	if (p->perm_heads) {
		if (out % (2 * (uint32_t)p->perm_heads))
			return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%u rows cannot be split into %d heads", out,
					   p->perm_heads);
		s->hd = out / (uint32_t)p->perm_heads;
	}
	if (plain && qtk_type_nbytes(t->layout.type, inf, &s->rb))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "row size does not fit the type");
	/* windows of whole fitting slices, and of whole heads when rows are permuted */
	uint64_t a = qtk_lcm_u64(GROUP_SLICE, s->hd);
	if (align_rows > 1)
		a = qtk_lcm_u64(a, align_rows);
	uint64_t w = GROUP_WINDOW_ELEMS / inf / a * a;
	if (threads > 1 && w / GROUP_SLICE > (uint64_t)threads && w < out)
		for (uint64_t k = w / a; k > 1; k--)
			if (k * a / GROUP_SLICE % (uint64_t)threads == 0) {
				w = k * a;
				break;
			}
	s->win = (uint32_t)(w < a ? a : w);
	if (s->win > out)
		s->win = out;
	int rc = 0;
	if (plain) {
		s->raw = qtk_malloc((size_t)(s->win * s->rb));
		s->rawtmp = p->perm_heads ? qtk_malloc((size_t)(s->win * s->rb)) : NULL;
		if (!s->raw || (p->perm_heads && !s->rawtmp))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	} else {
		s->windowed = t->ndim == 2 && t->layout.kind != QTK_LAYOUT_NVFP4;
		if (s->windowed)
			qtk_pwin_init(&s->pw, in, t, s->win);
		for (int k = 0; k < t->nparts && !rc && !s->windowed; k++)
			if ((rc = qtk_read_part_alloc(in, t, k, &s->packed[k])))
				*err = in->err;
		if (!rc && p->perm_heads && !(s->tmp = qtk_malloc((size_t)s->win * inf * sizeof(float))))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	}
	if (rc)
		rowsrc_close(s);
	return rc;
}

static int rowsrc_get(rowsrc *s, uint32_t o0, uint32_t n, float *x, qtk_err *err)
{
	const qtk_tensor *t = s->p->src;
	uint64_t inf = t->shape[1];
	if (s->raw) {
		int rc = s->raw_ok && s->raw_o0 == o0 && s->raw_n == n ? 0 : stage_rows(s->in, s->p, s->raw, s->rawtmp, o0, n, s->rb, err);
		s->raw_ok = false;
		if (!rc && qtk_dequant_ggml(t->layout.type, s->raw, x, (uint64_t)n * inf))
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "cannot decode this type");
		return rc;
	}
	int rc;
	if (s->windowed) {
		rc = qtk_pwin_decode(&s->pw, o0, n, s->tmp ? s->tmp : x);
		if (rc)
			*err = s->in->err;
	} else {
		rc = decode_rows(t, s->packed, o0, n, s->tmp ? s->tmp : x, err);
	}
	if (!rc && s->tmp) /* the window holds whole heads: permute within it */
		qtk_family_permute_rows((const uint8_t *)s->tmp, (uint8_t *)x, n, inf * 4, (int)(n / s->hd), s->p->perm_inverse);
	return rc;
}

/* Output features base .. base+nrows-1 (values x), in slices of slice_rows() rows on the pool,
 * each slice on its own: fitted into the whole parts pp (refit; otherwise an exact repack has
 * put them there), then decoded from pp into y and compared with x. Each slice's sums go to its
 * own errstat and are added to *total in slice order, so the figures do not depend on the thread
 * count. Returns 0, or 1 when the encoder failed, 2 when the output cannot be decoded. */
typedef struct cslices {
	const float *x;
	float *y;
	const qtk_tensor *o;
	uint32_t in, base, nrows, slice;
	bool refit;
	uint8_t **pp;
	errstat *es; /* per slice */
	int *rc;     /* per slice */
} cslices;

static void cslice_job(void *ctx, size_t si)
{
	cslices *c = ctx;
	uint32_t w0 = (uint32_t)si * c->slice, n = c->nrows - w0 < c->slice ? c->nrows - w0 : c->slice;
	uint64_t at = (uint64_t)w0 * c->in;
	if (c->refit && qtk_scheme_encode_rows(c->o, c->x + at, c->base + w0, n, (void *const *)c->pp)) {
		c->rc[si] = 1;
		return;
	}
	if (qtk_scheme_decode_rows(c->o, (const void *const *)c->pp, c->base + w0, n, c->y + at)) {
		c->rc[si] = 2;
		return;
	}
	errstat_add(&c->es[si], c->x + at, c->y + at, (uint64_t)n * c->in);
}

static int fit_check_groups(const float *x, float *y, const qtk_tensor *o, uint32_t base, uint32_t nrows,
			    uint8_t **pp, bool refit, int threads, errstat *total)
{
	const uint32_t sr = slice_rows(o->shape[1]);
	size_t ns = (nrows + sr - 1) / sr;
	int *rc = qtk_calloc(ns, sizeof *rc);
	errstat *es = qtk_calloc(ns, sizeof *es);
	int r = rc && es ? 0 : -1;
	if (!r) {
		cslices c = {x, y, o, (uint32_t)o->shape[1], base, nrows, sr, refit, pp, es, rc};
		/* what the rows from 0 also write for every row's decoding (GPTQ's g_idx) is put in place
		 * first, so no slice's check reads it half written */
		const qtk_scheme *sc = qtk_scheme_of(o);
		if (refit && sc && sc->write_shared)
			sc->write_shared(o, (void *const *)pp);
		qtk_parallel_for(threads, ns, cslice_job, &c);
		for (size_t i = 0; i < ns; i++) {
			r = r ? r : rc[i];
			errstat_merge(total, &es[i]);
		}
	}
	qtk_free(rc);
	qtk_free(es);
	return r;
}

/* The record's decoded tier of a packed output, from the values its check decodes: a window's
 * values are hashed on a thread of their own while the next window is fitted (two buffers). */
typedef struct vjob {
	qtk_vhash *h;
	const float *v;
	uint64_t n;
	int rc;
	bool on;
	pthread_t th;
	const uint32_t *s; /* integer layouts (qtk_vhash_int): v the differences, s the runs' scales */
	const uint8_t *w;  /* ... or their runs written already (4-bit AWQ/GPTQ): n values */
} vjob;

static void *vjob_run(void *a)
{
	vjob *j = a;
	j->rc = j->w   ? qtk_vhash_put_runw(j->h, j->w, j->n / 32)
		: j->s ? qtk_vhash_put_runs(j->h, j->v, j->s, j->n)
		       : qtk_vhash_put(j->h, j->v, j->n);
	return NULL;
}

static int vjob_wait(vjob *j)
{
	if (j->on) {
		pthread_join(j->th, NULL);
		j->on = false;
	}
	return j->rc;
}

/* Start hashing n values v, or (s not NULL) n values as runs: v the differences, s the scales. */
static void vjob_any(vjob *j, const float *v, const uint32_t *s, const uint8_t *w, uint64_t n)
{
	j->v = v;
	j->n = n;
	j->s = s;
	j->w = w;
	if (pthread_create(&j->th, NULL, vjob_run, j))
		vjob_run(j); /* no thread: here */
	else
		j->on = true;
}

static void vjob_go(vjob *j, const float *v, const uint32_t *s, uint64_t n) { vjob_any(j, v, s, NULL, n); }

/* An integer layout's window of nr rows of output o (its whole parts pp, rows from o0) to hash as
 * runs, once the previous window's hash is done: written straight from the packed words where
 * the layout allows (into yw's bytes: 36 per 32 values), else as differences (yw) and scales
 * (sw) from the decoder. -1 when the rows' integers cannot be taken. */
static int vjob_runs(vjob *j, const qtk_tensor *o, uint8_t *const *pp, uint64_t o0, uint32_t nr, float *yw,
		     uint32_t *sw, qtk_int_scratch *scr)
{
	const uint64_t n = (uint64_t)nr * qtk_tensor_cols(o);
	if (qtk_digest_rows_w(o, (const void *const *)pp, o0, nr, (uint8_t *)yw)) {
		vjob_any(j, NULL, NULL, (const uint8_t *)yw, n);
		return 0;
	}
	if (qtk_digest_int_rows(o, (const void *const *)pp, o0, nr, yw, sw, scr))
		return -1;
	vjob_go(j, yw, sw, n);
	return 0;
}

/* A re-fit cannot give an act-order target its grouping (the fit makes groups of consecutive
 * inputs): said plainly rather than as a failing encoder. */
static int refit_act_order(const qtk_tensor *t, const qtk_tensor *o, qtk_err *err)
{
	char lid[48];
	qtk_layout_id(&o->layout, lid, sizeof lid);
	return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name,
			   "the source's act-order integers do not fit %s as they are (a zero point or scale it cannot "
			   "store), and a re-fit cannot keep act-order's grouping: convert to gptq-v1, which stores zero "
			   "points up to 2^bits, or re-quantize from floats",
			   lid);
}

static void vjob_start(vjob *j, const float *v, uint64_t n) { vjob_go(j, v, NULL, n); }

/* Hash a window's n values (v) after the previous window's hash is done. */
static int vjob_next(vjob *j, const float *v, uint64_t n, const char *name, qtk_err *err)
{
	if (vjob_wait(j))
		return qtk_err_set(err, QTK_E_IO, NULL, -1, name, "out of memory hashing the values");
	vjob_start(j, v, n);
	return 0;
}

/* The last window hashed: hand the tensor's decoded leaf to the record's sink (its bytes are
 * all written; qtk_digest_sink_decoded_later was called before the first). */
static int vjob_hand(vjob *j, const conv_rec *rec, const char *name, qtk_err *err)
{
	uint8_t dec[32];
	if (!j->h)
		return 0;
	int rc = vjob_wait(j) || qtk_vhash_end(j->h, dec)
			 ? qtk_err_set(err, QTK_E_IO, NULL, -1, name, "out of memory hashing the values")
			 : 0;
	if (!rc)
		qtk_digest_sink_decoded(rec->dec, rec->k, dec);
	else
		qtk_vhash_free(j->h);
	j->h = NULL;
	return rc;
}

/* vh (may be NULL) receives every output value in order; it is freed (NULL) when that fails, and
 * the record's sink then decodes the output itself. */
static int fit_groups(rowsrc *s, float *x, uint8_t **pp, bool refit, int threads, errstat *total, qtk_vhash **vh,
		      qtk_err *err)
{
	const qtk_tensor *t = s->p->src, *o = s->p->out;
	uint32_t out = (uint32_t)t->shape[0], inf = (uint32_t)t->shape[1];
	const size_t wb = (size_t)s->win * inf * sizeof(float);
	float *y[2] = {qtk_malloc(wb), *vh ? qtk_malloc(wb) : NULL};
	vjob vj = {.h = *vh};
	int rc = y[0] ? 0 : qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	/* integer layouts: each window's runs (differences into its y, scales into sb) */
	const bool runs = *vh && qtk_vhash_int(*vh);
	const size_t sbn = (size_t)s->win * (inf / 32) + 1;
	uint32_t *sb[2] = {runs ? qtk_malloc(sbn * sizeof(uint32_t)) : NULL, runs ? qtk_malloc(sbn * sizeof(uint32_t)) : NULL};
	qtk_int_scratch scr = {NULL, 0, 0};
	if (*vh && (!y[1] || (runs && (!sb[0] || !sb[1])))) { /* no room to hash beside: the sink does it */
		qtk_vhash_free(*vh);
		*vh = vj.h = NULL;
	}
	for (uint32_t o0 = 0, wi = 0; o0 < out && !rc; o0 += s->win, wi++) {
		uint32_t nr = out - o0 < s->win ? out - o0 : s->win;
		float *yw = y[vj.h ? wi & 1 : 0];
		if ((rc = rowsrc_get(s, o0, nr, x, err)))
			break;
		const int fc = fit_check_groups(x, yw, o, o0, nr, pp, refit, threads, total);
		if (fc == 1) {
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "the %s encoder failed",
					 qtk_scheme_of(o) ? qtk_scheme_of(o)->title : "packed");
			break;
		}
		if (fc) {
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot decode the output");
			break;
		}
		if (vj.h) { /* the previous window's hash is done before this one's starts */
			uint32_t *sw = runs ? sb[wi & 1] : NULL;
			if (vjob_wait(&vj) || (runs ? vjob_runs(&vj, o, pp, o0, nr, yw, sw, &scr) != 0
						    : (vjob_go(&vj, yw, NULL, (uint64_t)nr * inf), false))) {
				qtk_vhash_free(vj.h);
				*vh = vj.h = NULL;
			}
		}
		cli_progress_within(o0 + nr, out);
	}
	if (vjob_wait(&vj) || rc) {
		qtk_vhash_free(vj.h);
		*vh = NULL;
	}
	qtk_free(y[0]);
	qtk_free(y[1]);
	qtk_free(sb[0]);
	qtk_free(sb[1]);
	qtk_int_scratch_free(&scr);
	return rc;
}

/* ggml FP4 blocks into a layout that keeps the same codes and scales as two row-major parts
 * (gpt-oss's and compressed-tensors' MXFP4, ModelOpt's NVFP4 with its global scale of 1), a
 * window of rows at a time: each window is read (in the plan's Q/K order), shuffled, decoded by
 * the target's decoder and compared with the source's values, hashed for the record, and its
 * codes handed to the writer; the scales (a sixteenth or a thirty-second of the values) go to a
 * scratch file and follow the codes. Memory is a window whatever the tensor (a gpt-oss-120b
 * expert stack is 1.1 GiB of blocks). *done false: nothing written, the caller's path runs. */
static int stream_fp4(qtk_model *in, qtk_writer *w, const plan *p, const conv_rec *rec, tensor_result *r, bool *done,
		      qtk_err *err)
{
	const qtk_tensor *t = p->src, *o = p->out;
	*done = false;
	const bool nv = o->layout.kind == QTK_LAYOUT_NVFP4;
	const unsigned type = nv ? QTK_T_NVFP4 : QTK_T_MXFP4;
	const bool mx_target = o->layout.kind == QTK_LAYOUT_MXFP4 &&
			       (o->layout.scale_type == 0 || o->layout.scale_type == QTK_MXFP4_CT); /* gpt-oss, ct */
	if (!(mx_target || (nv && o->layout.scale_type == 1)) || t->layout.kind != QTK_LAYOUT_PLAIN ||
	    t->layout.type != type || (t->ndim != 2 && t->ndim != 3) || (t->ndim == 3 && p->perm_heads) ||
	    o->nparts != (nv ? 3 : 2) || getenv_is("QTK_REPACK", "windows"))
		return 0;
	const uint64_t inf = t->shape[t->ndim - 1], rows = qtk_tensor_rows(t), per = t->ndim == 3 ? t->shape[1] : rows;
	const uint64_t bs = nv ? 16 : 32; /* values per scale */
	uint64_t rb;
	if (!inf || inf % (nv ? 64 : 32) || !rows || !per || qtk_type_nbytes(type, inf, &rb) || o->parts[0].nbytes != rows * (inf / 2) ||
	    o->parts[1].nbytes != rows * (inf / bs) || (nv && o->parts[2].nbytes != 4))
		return 0;
	/* windows of whole heads (Q/K rows moved) and of the record's pieces of whole heads */
	qtk_vhash *vh = NULL;
	qtk_err ve;
	qtk_err_clear(&ve);
	uint64_t a = p->perm_heads ? rows / (uint64_t)p->perm_heads : 1;
	if (rec && rec->dec && rec->k < rec->desc->ntensors && !qtk_vhash_new(rec->desc, &rec->desc->tensors[rec->k], &vh, &ve))
		a = qtk_lcm_u64(a, qtk_vhash_head_rows(vh) ? qtk_vhash_head_rows(vh) : 1);
	uint64_t win = WINDOW_ELEMS / 4 / inf / a * a;
	win = win ? win : a;
	if (win > per)
		win = per;
	if (!a || per % a || win * inf > 4 * WINDOW_ELEMS) {
		qtk_vhash_free(vh);
		return 0;
	}
	const uint64_t c0 = inf / 2, c1 = inf / bs; /* bytes per row of codes, of scales */
	uint8_t *raw = qtk_malloc((size_t)(win * rb)), *tmp = p->perm_heads ? qtk_malloc((size_t)(win * rb)) : NULL;
	uint8_t *sp[3] = {qtk_malloc((size_t)(win * c0)), qtk_malloc((size_t)(win * c1)), qtk_calloc(1, 8)};
	float *x = qtk_malloc((size_t)(win * inf) * sizeof *x), *y[2] = {qtk_malloc((size_t)(win * inf) * sizeof(float)),
									  vh ? qtk_malloc((size_t)(win * inf) * sizeof(float)) : NULL};
	vjob vj = {.h = NULL};
	errstat e;
	memset(&e, 0, sizeof e);
	int rc = 0, fd = -1;
	uint8_t *held = NULL; /* the scales, when no scratch file can be made */
	char scr[200]; /* the scratch file, as messages name it */
	snprintf(scr, sizeof scr, "the scratch file of %s", t->name);
	if (!raw || (p->perm_heads && !tmp) || !sp[0] || !sp[1] || !sp[2] || !x || !y[0] || (vh && !y[1]))
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	if (!rc) {
		qtk_err se;
		qtk_err_clear(&se);
		if ((fd = qtk_writer_scratch(w, &se)) < 0 && !(held = qtk_malloc((size_t)o->parts[1].nbytes + 1)))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	}
	if (nv) {
		const float one = 1.0f; /* ggml's NVFP4 blocks carry no global scale */
		uint32_t bits;
		memcpy(&bits, &one, 4);
		qtk_wr32(sp[2], bits);
	}
	for (uint64_t r0 = 0, wi = 0; r0 < rows && !rc; wi++) {
		uint64_t n = per - r0 % per < win ? per - r0 % per : win; /* an expert's rows at most */
		n = rows - r0 < n ? rows - r0 : n;
		qtk_tensor osub = QTK_TENSOR_LOCAL;
		qtk_scheme_slice sl[QTK_MAX_PARTS];
		if (qtk_scheme_window(o, r0, n, &osub, sl)) {
			if (r0)
				rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "rows %llu.. do not split as the first did",
						 (unsigned long long)r0);
			break; /* at row 0: nothing written, the caller's path */
		}
		if (!r0) {
			*done = true;
			if (vh) {
				vj.h = vh;
				vh = NULL;
				qtk_digest_sink_decoded_later(rec->dec, rec->k);
			}
		}
		float *yw = y[vj.h ? wi & 1 : 0]; /* the other is being hashed (windows are not all win rows) */
		rc = stage_rows(in, p, raw, tmp, r0, n, rb, err);
		if (!rc && (qtk_dequant_ggml(type, raw, x, n * inf) ||
			    (nv ? qtk_nvfp4_from_ggml(raw, n, inf, sp[0], sp[1]) : qtk_mxfp4_from_ggml(raw, n, inf, sp[0], sp[1])) ||
			    qtk_scheme_decode_rows(&osub, (const void *const *)sp, 0, n, yw)))
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "%s blocks of rows %llu.. do not fit the target's layout",
					 nv ? "NVFP4" : "MXFP4", (unsigned long long)r0);
		if (!rc)
			errstat_add(&e, x, yw, n * inf);
		if (!rc && vj.h)
			rc = vjob_next(&vj, yw, n * inf, t->name, err);
		rc = rc ? rc : qtk_writer_put(w, sp[0], (size_t)(n * c0));
		if (!rc && fd >= 0 && qtk_pwrite_full(fd, scr, sp[1], (size_t)(n * c1), r0 * c1, err))
			rc = err->code;
		else if (!rc && held)
			memcpy(held + r0 * c1, sp[1], (size_t)(n * c1));
		r0 += n;
		cli_progress_within(r0, rows);
	}
	if (vjob_wait(&vj) && !rc)
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory hashing the values");
	if (*done && !rc) {
		errstat_finish(&e, r);
		/* the shuffle promises every value (MXFP4 up to the sign of zero: code 8) */
		if (nv ? !r->exact : r->max_abs_err != 0)
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "%s blocks in the target's layout decode differently",
					 nv ? "NVFP4" : "MXFP4");
		for (uint64_t off = 0; off < o->parts[1].nbytes && !rc; off += win * c0) { /* the scales */
			const uint64_t k = o->parts[1].nbytes - off < win * c0 ? o->parts[1].nbytes - off : win * c0;
			if (held)
				rc = qtk_writer_put(w, held + off, (size_t)k);
			else if (qtk_pread_full(fd, scr, sp[0], (size_t)k, off, err))
				rc = err->code;
			else
				rc = qtk_writer_put(w, sp[0], (size_t)k);
		}
		if (!rc && nv)
			rc = qtk_writer_put(w, sp[2], 4);
		rc = rc ? rc : vjob_hand(&vj, rec, t->name, err);
		if (!rc)
			cli_verbose("%s: %s blocks shuffled window by window, scales %s", t->name, nv ? "NVFP4" : "MXFP4",
				    held ? "held" : "through a scratch file");
	}
	qtk_vhash_free(vj.h);
	qtk_vhash_free(vh);
	if (fd >= 0)
		close(fd);
	qtk_free(held);
	qtk_free(raw);
	qtk_free(tmp);
	for (int k = 0; k < 3; k++)
		qtk_free(sp[k]);
	qtk_free(x);
	qtk_free(y[0]);
	qtk_free(y[1]);
	return rc;
}

/* ggml MXFP4 blocks (2-D or an expert stack) into gpt-oss's blocks and scales: one byte shuffle
 * over every row (plan_gptoss_mxfp4), then every row of the output decoded and compared with the
 * source's, window by window. */
static int run_mxfp4_gptoss(qtk_model *in, qtk_writer *w, const plan *p, tensor_result *r, qtk_err *err)
{
	const qtk_tensor *t = p->src, *o = p->out;
	uint64_t inf = t->shape[t->ndim - 1], rows = qtk_tensor_rows(t), rb = inf / 32 * 17;
	uint8_t *blk = NULL, *pp[2] = {NULL, NULL};
	float *x = NULL, *y = NULL;
	int rc = 0;
	if (qtk_read_part_alloc(in, t, 0, &blk)) {
		*err = in->err;
		return err->code;
	}
	uint64_t win = WINDOW_ELEMS / inf ? WINDOW_ELEMS / inf : 1;
	win = win > rows ? rows : win;
	pp[0] = qtk_malloc((size_t)o->parts[0].nbytes + 1);
	pp[1] = qtk_malloc((size_t)o->parts[1].nbytes + 1);
	x = qtk_malloc((size_t)(win * inf) * sizeof *x);
	y = qtk_malloc((size_t)(win * inf) * sizeof *y);
	if (!pp[0] || !pp[1] || !x || !y)
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	if (!rc && qtk_mxfp4_from_ggml(blk, rows, inf, pp[0], pp[1]))
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "MXFP4 blocks do not fit gpt-oss's layout");
	errstat e;
	memset(&e, 0, sizeof e);
	for (uint64_t r0 = 0; r0 < rows && !rc; r0 += win) {
		uint64_t n = rows - r0 < win ? rows - r0 : win;
		if (qtk_dequant_ggml(QTK_T_MXFP4, blk + r0 * rb, x, n * inf) ||
		    qtk_scheme_decode_rows(o, (const void *const *)pp, r0, n, y))
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot decode the output");
		else
			errstat_add(&e, x, y, n * inf);
		cli_progress_within(r0 + n, rows);
	}
	if (!rc)
		errstat_finish(&e, r);
	if (!rc && r->max_abs_err != 0) /* the shuffle promises every value (up to the sign of zero: code 8) */
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "MXFP4 blocks in gpt-oss's layout decode differently");
	for (int k = 0; k < 2 && !rc; k++)
		rc = qtk_writer_put(w, pp[k], (size_t)o->parts[k].nbytes);
	qtk_free(blk);
	qtk_free(pp[0]);
	qtk_free(pp[1]);
	qtk_free(x);
	qtk_free(y);
	return rc;
}

/* The integer groups of the n ggml rows in s->raw, when the target o can take them as they are
 * (MLX keeps any q4_1 minimum as its bias; others need ggml's bits and group of 32). */
static bool ggml_window_groups(const rowsrc *s, const qtk_tensor *o, uint32_t n, qgroups *g)
{
	const unsigned ty = s->p->src->layout.type;
	const uint32_t inf = (uint32_t)s->p->src->shape[1];
	const bool mlx = o->layout.kind == QTK_LAYOUT_MLX;
	qg_free(g);
	if (ty == QTK_T_Q4_1 && mlx)
		return qg_from_q4_1_bias(s->raw, n, inf, g) == 0;
	return qg_from_ggml(ty, s->raw, n, inf, g) == 0 &&
	       (mlx || (g->bits == o->layout.bits && g->group == o->layout.group_size));
}

/* Zeroed buffers for a window's parts (sub: qtk_scheme_window's), replacing the last window's. */
static int window_parts(uint8_t **sp, const qtk_tensor *sub, const char *name, qtk_err *err)
{
	for (int k = 0; k < sub->nparts; k++) {
		qtk_free(sp[k]);
		if (!(sp[k] = qtk_calloc(1, (size_t)sub->parts[k].nbytes + 8)))
			return qtk_err_set(err, QTK_E_IO, NULL, -1, name, "out of memory");
	}
	return 0;
}

/* An exact repack window by window of output features: each window's integer groups from only
 * its source bytes, packed into the output's parts for those rows (qtk_scheme_window) and
 * copied into the whole output parts pp. *handled false: the windows do not divide (the caller
 * takes the whole-tensor path); else *packed says whether the integers fit the target (false:
 * the caller re-fits). */
static int window_repack(rowsrc *s, const qtk_tensor *o, uint8_t **pp, bool *handled, bool *packed, qtk_err *err)
{
	const qtk_tensor *t = s->p->src;
	const qtk_scheme *ss = qtk_scheme_of(t);
	uint32_t out = (uint32_t)t->shape[0];
	uint8_t *sp[QTK_MAX_PARTS] = {NULL};
	qgroups g;
	memset(&g, 0, sizeof g);
	int rc = 0;
	*handled = *packed = false;
	if (!ss || !ss->to_groups)
		return 0;
	for (uint32_t o0 = 0; o0 < out && !rc; o0 += s->win) {
		uint32_t n = out - o0 < s->win ? out - o0 : s->win;
		uint64_t got;
		if (qtk_pwin_load(&s->pw, o0, n, &got)) {
			*err = s->in->err;
			rc = err->code ? err->code : QTK_E_IO;
			break;
		}
		if (s->pw.whole || got != n || s->pw.w0 != o0 || s->pw.wn != n)
			break; /* not handled */
		qg_free(&g);
		if (qtk_scheme_to_groups(&s->pw.sub, (const void *const *)s->pw.buf, &g)) {
			if (!o0 && ss->part_specs) { /* no integer groups (FP8, NVFP4, ...): re-fit */
				*handled = true;
				break;
			}
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
			break;
		}
		if (s->p->perm_heads && (rc = permute_window_groups(&g, s->p, n, s->hd, err))) /* whole heads */
			break;
		if (!o0 && !(o->layout.kind == QTK_LAYOUT_MLX ||
			     (g.bits == o->layout.bits && (g.group == o->layout.group_size || qg_act_order(&g))))) {
			*handled = true; /* the integers do not fit: re-fit */
			break;
		}
		qtk_tensor osub = QTK_TENSOR_LOCAL;
		qtk_scheme_slice sl[QTK_MAX_PARTS];
		if (qtk_scheme_window(o, o0, n, &osub, sl)) {
			if (o0)
				rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "output rows do not split");
			break;
		}
		if ((rc = window_parts(sp, &osub, t->name, err)))
			break;
		if (qtk_scheme_from_groups(&g, &osub, true, (void *const *)sp)) {
			if (!o0) { /* values the target cannot hold: re-fit */
				*handled = true;
				break;
			}
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "rows %u.. do not fit the target exactly", o0);
			break;
		}
		for (int k = 0; k < osub.nparts; k++)
			for (uint64_t i = 0; i < sl[k].count; i++)
				memcpy(pp[k] + sl[k].off + i * sl[k].stride, sp[k] + i * sl[k].len, (size_t)sl[k].len);
		if (o0 + n >= out) {
			*handled = *packed = true;
			qtk_scheme_window_finish(o, (void *const *)pp);
		}
	}
	qg_free(&g);
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(sp[k]);
	return rc;
}

/* A part built window by window whose windows are column bands of its rows (AWQ's qweight
 * [in][out/8]: a window of output features is a few bytes of every row) goes through a scratch
 * file beside the output: each window's bytes as they come (count runs of len bytes, one after
 * another), then read back a band of rows at a time, interleaved into the part's order and
 * handed to the writer. Memory is then a band and a window, not the part. */
typedef struct spill_win {
	uint64_t off; /* the window's offset in a row, */
	uint64_t len; /* its bytes per row, */
	uint64_t pos; /* and where its runs start in the scratch file */
} spill_win;

typedef struct spill {
	int fd;          /* the scratch file, -1 when none */
	uint64_t rows;   /* the part's rows (count of every window) */
	uint64_t stride; /* bytes per row */
	uint64_t at;     /* bytes written so far */
	size_t n, cap;   /* windows so far */
	spill_win *win;
} spill;

static void spill_close(spill *sp)
{
	if (sp->fd >= 0)
		close(sp->fd);
	qtk_free(sp->win);
	memset(sp, 0, sizeof *sp);
	sp->fd = -1;
}

/* One window's runs (sl: its slice of the part; b: count x len bytes). */
static int spill_put(spill *sp, const qtk_scheme_slice *sl, const uint8_t *b, const char *name, qtk_err *err)
{
	if (sl->count != sp->rows || sl->stride != sp->stride || sl->off > sp->stride || sl->len > sp->stride - sl->off)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, name, "a window's columns do not split as the first did");
	if (sp->n == sp->cap) {
		size_t c = sp->cap ? 2 * sp->cap : 64;
		spill_win *v = qtk_realloc(sp->win, c * sizeof *v);
		if (!v)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, name, "out of memory");
		sp->win = v;
		sp->cap = c;
	}
	const uint64_t nb = sl->count * sl->len;
	char scr[200];
	snprintf(scr, sizeof scr, "the scratch file of %s", name);
	if (qtk_pwrite_full(sp->fd, scr, b, (size_t)nb, sp->at, err))
		return err->code;
	sp->win[sp->n++] = (spill_win){sl->off, sl->len, sp->at};
	sp->at += nb;
	return 0;
}

/* The part in its order, a band of rows at a time, to the writer. */
static int spill_write(spill *sp, qtk_writer *w, const char *name, qtk_err *err)
{
	uint64_t band = ((uint64_t)8 << 20) / (sp->stride ? sp->stride : 1), maxlen = 0;
	band = band ? band : 1;
	band = band < sp->rows ? band : sp->rows;
	for (size_t i = 0; i < sp->n; i++)
		maxlen = sp->win[i].len > maxlen ? sp->win[i].len : maxlen;
	uint8_t *buf = qtk_calloc(1, (size_t)(band * sp->stride) + 1), *run = qtk_malloc((size_t)(band * maxlen) + 1);
	int rc = buf && run ? 0 : qtk_err_set(err, QTK_E_IO, NULL, -1, name, "out of memory");
	char scr[200];
	snprintf(scr, sizeof scr, "the scratch file of %s", name);
	for (uint64_t r0 = 0; r0 < sp->rows && !rc; r0 += band) {
		const uint64_t nr = sp->rows - r0 < band ? sp->rows - r0 : band;
		for (size_t i = 0; i < sp->n && !rc; i++) {
			const spill_win *v = &sp->win[i];
			if (qtk_pread_full(sp->fd, scr, run, (size_t)(nr * v->len), v->pos + r0 * v->len, err)) {
				rc = err->code;
				break;
			}
			for (uint64_t r = 0; r < nr; r++)
				memcpy(buf + r * sp->stride + v->off, run + r * v->len, (size_t)v->len);
		}
		rc = rc ? rc : qtk_writer_put(w, buf, (size_t)(nr * sp->stride));
	}
	qtk_free(buf);
	qtk_free(run);
	return rc;
}

/* Outputs whose first part splits by rows into contiguous runs and is the bulk of them
 * (compressed-tensors' weight_packed, MLX's weight: [out][...]), a window of output features at a
 * time: each window is repacked from its own source bytes when the source's integers fit the
 * target (qtk_scheme_window; an AWQ/GPTQ source read a window at a time), else fitted to the
 * source's values; then checked by decoding (the same slices and sums as fit_groups), hashed for
 * the record, and its part-0 bytes handed to the writer at once. The other parts (scales,
 * zeros: a few bits per group) are held and written after the last window, and the record's
 * decoded leaf is given after the bytes (qtk_digest_sink_decoded_later). Memory is then a few
 * windows whatever the matrix. *done false: nothing was written (the first window showed the
 * tensor cannot go this way) and the caller takes its own path; vh is then untouched. A part
 * whose windows are column bands (AWQ's and GPTQ's qweight) goes through a scratch file (spill).
 * ggml q4_0/q8_0/q4_1 rows give their integer groups a window at a time; a packed source's Q/K
 * rows are moved within each window of whole heads (permute_window_groups). Repack or re-fit is
 * one choice for the whole tensor (`decided`). */
static int stream_windows(rowsrc *s, qtk_writer *w, int threads, const conv_rec *rec, qtk_vhash **vh, errstat *total,
			  bool *done, qtk_err *err)
{
	const qtk_tensor *t = s->p->src, *o = s->p->out;
	const uint32_t out = (uint32_t)t->shape[0], inf = (uint32_t)t->shape[1];
	uint8_t *pp[QTK_MAX_PARTS] = {NULL}, *sp[QTK_MAX_PARTS] = {NULL};
	const size_t wb = (size_t)s->win * inf * sizeof(float);
	float *x = NULL, *y[2] = {NULL, NULL};
	vjob vj = {.h = NULL};
	uint32_t *sb[2] = {NULL, NULL}; /* integer layouts: the windows' scales (runs) */
	qtk_int_scratch scr = {NULL, 0, 0};
	qgroups g;
	memset(&g, 0, sizeof g);
	int rc = 0;
	unsigned nfit = 0; /* windows fitted rather than repacked */
	spill sf;
	memset(&sf, 0, sizeof sf);
	sf.fd = -1;
	*done = false;
	const bool plain = t->layout.kind == QTK_LAYOUT_PLAIN;
	const qtk_scheme *ss = plain ? NULL : qtk_scheme_of(t);
	const qtk_scheme *os = qtk_scheme_of(o);
	/* ggml q4_0/q8_0/q4_1 rows are integer groups too, read a window at a time like any plain rows */
	const unsigned ty = plain ? t->layout.type : 0;
	const bool gint = plain && (ty == QTK_T_Q4_0 || ty == QTK_T_Q8_0 || ty == QTK_T_Q4_1) && s->raw;
	const bool mlx = o->layout.kind == QTK_LAYOUT_MLX;
	if (o->ndim != 2 || o->nparts < 1 || !os || (!plain && !s->windowed))
		return 0;
	/* Repack or re-fit is decided for the whole tensor, as the whole-tensor paths decide it: by
	 * the first window, a later window that does not fit as it did being an error (as in
	 * window_repack); for ggml sources whose fit depends on every block (q4_1's minimums, MLX
	 * groups wider than ggml's), in a pass over the rows first (the whole path re-fits the
	 * tensor when any block does not fit). */
	int decided = -1; /* 1: every window repacked, 0: every window re-fitted */
	if (gint && (ty == QTK_T_Q4_1 || mlx)) {
		decided = 1;
		for (uint32_t o0 = 0; o0 < out && decided == 1 && !rc; o0 += s->win) {
			const uint32_t n = out - o0 < s->win ? out - o0 : s->win;
			qtk_tensor osub = QTK_TENSOR_LOCAL;
			qtk_scheme_slice sl[QTK_MAX_PARTS];
			if ((rc = stage_rows(s->in, s->p, s->raw, s->rawtmp, o0, n, s->rb, err)))
				break;
			decided = ggml_window_groups(s, o, n, &g) && !qtk_scheme_window(o, o0, n, &osub, sl);
			if (decided == 1)
				rc = window_parts(sp, &osub, t->name, err);
			if (decided == 1 && !rc)
				decided = qtk_scheme_from_groups(&g, &osub, true, (void *const *)sp) == 0;
		}
		qg_free(&g);
		if (rc) {
			for (int k = 0; k < QTK_MAX_PARTS; k++)
				qtk_free(sp[k]);
			return rc; /* nothing written */
		}
	}
	for (uint32_t o0 = 0; o0 < out && !rc; o0 += s->win) {
		const uint32_t n = out - o0 < s->win ? out - o0 : s->win;
		bool ints = false; /* the window's integer groups are in g */
		if (decided == 0) {
			/* re-fitted: the integers are not looked at */
		} else if (ss && ss->to_groups) {
			uint64_t got;
			if (qtk_pwin_load(&s->pw, o0, n, &got)) {
				*err = s->in->err;
				rc = err->code ? err->code : QTK_E_IO;
				break;
			}
			qg_free(&g);
			ints = !s->pw.whole && got == n && s->pw.w0 == o0 && s->pw.wn == n &&
			       !qtk_scheme_to_groups(&s->pw.sub, (const void *const *)s->pw.buf, &g) &&
			       (o->layout.kind == QTK_LAYOUT_MLX ||
				(g.bits == o->layout.bits && (g.group == o->layout.group_size || qg_act_order(&g))));
			if (ints && s->p->perm_heads && (rc = permute_window_groups(&g, s->p, n, s->hd, err))) /* whole heads */
				break;
		} else if (gint) { /* the rows (in the plan's order) stay for rowsrc_get below */
			if ((rc = stage_rows(s->in, s->p, s->raw, s->rawtmp, o0, n, s->rb, err)))
				break;
			s->raw_ok = true;
			s->raw_o0 = o0;
			s->raw_n = n;
			ints = ggml_window_groups(s, o, n, &g);
		}
		qtk_tensor osub = QTK_TENSOR_LOCAL;
		qtk_scheme_slice sl[QTK_MAX_PARTS];
		const bool win = !qtk_scheme_window(o, o0, n, &osub, sl);
		if (!o0 && (!win || 2 * o->parts[0].nbytes < o->n_bytes))
			break; /* not this path's: nothing is written until the first window says so */
		if (!o0 && !(sl[0].count == 1 || sl[0].stride == sl[0].len)) { /* column bands: a scratch file */
			if (!sl[0].stride || sl[0].count > UINT64_MAX / sl[0].stride ||
			    sl[0].count * sl[0].stride != o->parts[0].nbytes)
				break;
			qtk_err se;
			qtk_err_clear(&se);
			if ((sf.fd = qtk_writer_scratch(w, &se)) < 0) {
				cli_verbose("%s: %s", t->name, se.msg); /* the part is held whole instead */
				break;
			}
			sf.rows = sl[0].count;
			sf.stride = sl[0].stride;
		}
		if (!win) {
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "rows %u.. do not split as the first did", o0);
			break;
		}
		if ((rc = window_parts(sp, &osub, t->name, err)))
			break;
		/* the source's integers when the target holds them, else a fit of the values */
		bool refit = !ints || qtk_scheme_from_groups(&g, &osub, true, (void *const *)sp) != 0;
		if (decided < 0)
			decided = !refit;
		else if (decided == 1 && refit) { /* bytes of earlier windows are written already */
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "rows %u.. do not fit the target exactly as the rows before them do",
					 o0);
			break;
		}
		if (refit && o->layout.act_order) {
			rc = refit_act_order(t, o, err);
			break;
		}
		if (refit && ints)
			for (int k = 0; k < osub.nparts; k++)
				memset(sp[k], 0, (size_t)osub.parts[k].nbytes);
		if (!o0) { /* the tensor is this path's from here on */
			for (int k = 1; k < o->nparts && !rc; k++)
				if (!(pp[k] = qtk_calloc(1, (size_t)o->parts[k].nbytes + 8)))
					rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
			x = qtk_malloc(wb);
			y[0] = qtk_malloc(wb);
			y[1] = *vh ? qtk_malloc(wb) : NULL;
			if (*vh && qtk_vhash_int(*vh)) { /* integer layouts: the windows' runs */
				const size_t sbn = (size_t)s->win * (inf / 32) + 1;
				if (!(sb[0] = qtk_malloc(sbn * sizeof(uint32_t))) || !(sb[1] = qtk_malloc(sbn * sizeof(uint32_t))))
					rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
			}
			if (!rc && (!x || !y[0] || (*vh && !y[1])))
				rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
			if (rc)
				break; /* nothing written: the caller's path may still have the memory */
			*done = true;
			if (*vh) {
				vj.h = *vh;
				*vh = NULL;
				qtk_digest_sink_decoded_later(rec->dec, rec->k);
			}
		}
		nfit += refit;
		float *yw = y[vj.h ? (o0 / s->win) & 1 : 0];
		rc = rowsrc_get(s, o0, n, x, err);
		const int fc = rc ? 0 : fit_check_groups(x, yw, &osub, 0, n, sp, refit, threads, total);
		if (!rc && fc == 1)
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "the %s encoder failed",
					 qtk_scheme_of(o) ? qtk_scheme_of(o)->title : "packed");
		else if (!rc && fc)
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot decode the output");
		if (!rc && vj.h && sb[0]) { /* runs: made here from the window's parts, then hashed beside */
			uint32_t *sw = sb[(o0 / s->win) & 1];
			if (vjob_wait(&vj))
				rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory hashing the values");
			else if (vjob_runs(&vj, &osub, sp, 0, n, yw, sw, &scr))
				rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot take the integers of rows %u.. for the record", o0);
		} else if (!rc && vj.h) { /* the previous window's hash is done before this one's starts */
			rc = vjob_next(&vj, yw, (uint64_t)n * inf, t->name, err);
		}
		if (sf.fd >= 0)
			rc = rc ? rc : spill_put(&sf, &sl[0], sp[0], t->name, err);
		else
			rc = rc ? rc : qtk_writer_put(w, sp[0], (size_t)osub.parts[0].nbytes);
		for (int k = 1; k < osub.nparts && !rc; k++)
			for (uint64_t i = 0; i < sl[k].count; i++)
				memcpy(pp[k] + sl[k].off + i * sl[k].stride, sp[k] + i * sl[k].len, (size_t)sl[k].len);
		cli_progress_within(o0 + n, out);
	}
	if (vjob_wait(&vj) && !rc)
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory hashing the values");
	if (*done && !rc) {
		qtk_scheme_window_finish(o, (void *const *)pp);
		if (sf.fd >= 0)
			rc = spill_write(&sf, w, t->name, err);
		for (int k = 1; k < o->nparts && !rc; k++)
			rc = qtk_writer_put(w, pp[k], (size_t)o->parts[k].nbytes);
		rc = rc ? rc : vjob_hand(&vj, rec, t->name, err);
		if (!rc)
			cli_verbose("%s: %s window by window, %s %s", t->name, nfit ? "fitted" : "repacked",
				    o->parts[0].role, sf.fd >= 0 ? "through a scratch file" : "streamed");
	}
	spill_close(&sf);
	qtk_vhash_free(vj.h);
	qg_free(&g);
	for (int k = 0; k < QTK_MAX_PARTS; k++) {
		qtk_free(pp[k]);
		qtk_free(sp[k]);
	}
	qtk_free(x);
	qtk_free(y[0]);
	qtk_free(y[1]);
	qtk_free(sb[0]);
	qtk_free(sb[1]);
	qtk_int_scratch_free(&scr);
	return rc;
}

/* A packed output this large is written with put_release and the record's hashes finish it
 * before the next tensor is built (run_groups). */
#define BIG_PACKED ((uint64_t)32 << 20)

/* Write n bytes at p that are not read again, in pieces, returning each written piece's whole
 * pages to the system as it goes (p stays allocated; the caller frees it). The packed output of
 * a large matrix and the provenance record's copy of it (the decoded tier needs every part of a
 * tensor before it can decode a row) are then never both whole in memory. */
static int put_release(qtk_writer *w, uint8_t *p, size_t n)
{
	const size_t piece = (size_t)8 << 20;
	const long psz = sysconf(_SC_PAGESIZE);
	const uintptr_t pg = psz > 0 ? (uintptr_t)psz : 4096;
	uintptr_t done = ((uintptr_t)p + pg - 1) & ~(pg - 1); /* the first whole page */
	for (size_t off = 0; off < n;) {
		const size_t k = n - off < piece ? n - off : piece;
		const int rc = qtk_writer_put(w, p + off, k);
		if (rc)
			return rc;
		off += k;
		const uintptr_t end = ((uintptr_t)p + off) & ~(pg - 1);
		if (n >= 2 * piece && end > done) {
			(void)madvise((void *)done, end - done, MADV_DONTNEED); /* advice: failure is harmless */
			done = end;
		}
	}
	return 0;
}

/* A tensor to AWQ/GPTQ: repack the source's integers when they fit the target, else fit every
 * group to the decoded values. */
static int run_groups(qtk_model *in, qtk_writer *w, const plan *p, int threads, const conv_rec *rec, tensor_result *r,
		      qtk_err *err)
{
	const qtk_tensor *t = p->src, *o = p->out;
	bool streamed = false;
	/* ggml MXFP4 into gpt-oss's or compressed-tensors' layout, NVFP4 into ModelOpt's */
	int fr = stream_fp4(in, w, p, rec, r, &streamed, err);
	if (fr || streamed)
		return fr;
	if (o->layout.kind == QTK_LAYOUT_MXFP4 && o->layout.scale_type == 0 && t->layout.kind == QTK_LAYOUT_PLAIN &&
	    t->layout.type == QTK_T_MXFP4)
		return run_mxfp4_gptoss(in, w, p, r, err);
	int src = conv_stream_repack(in, w, p, threads, rec, r, &streamed, err);
	if (src || streamed)
		return src;
	uint32_t out = (uint32_t)t->shape[0], inf = (uint32_t)t->shape[1];
	uint8_t *pp[QTK_MAX_PARTS] = {NULL};
	float *x = NULL;
	qgroups g;
	memset(&g, 0, sizeof g);
	/* the record's decoded tier from the check's values (else its sink holds a copy of the parts
	 * to decode them); Q/K rows stored in GGUF's order need windows of whole heads */
	qtk_vhash *vh = NULL;
	qtk_err ve;
	qtk_err_clear(&ve);
	uint64_t hrows = 0;
	if (rec && rec->dec && rec->k < rec->desc->ntensors && !qtk_vhash_new(rec->desc, &rec->desc->tensors[rec->k], &vh, &ve))
		hrows = qtk_vhash_head_rows(vh);
	if (vh && hrows && qtk_lcm_u64(qtk_lcm_u64(GROUP_SLICE, hrows), p->perm_heads ? out / (uint32_t)p->perm_heads : 1) *
				   inf > 4 * GROUP_WINDOW_ELEMS) {
		qtk_vhash_free(vh); /* heads too large for a window: the sink decodes */
		vh = NULL;
		hrows = 0;
	}
	rowsrc s;
	int rc = rowsrc_open(&s, in, p, hrows, threads, err);
	if (rc) {
		qtk_vhash_free(vh);
		return rc;
	}
	/* an exact repack whose bulk streams window by window (stream_windows) */
	bool sdone = false;
	if (!(o->layout.kind == QTK_LAYOUT_NVFP4 || o->layout.kind == QTK_LAYOUT_MXFP4) && !getenv_is("QTK_REPACK", "windows")) {
		errstat se;
		memset(&se, 0, sizeof se);
		rc = stream_windows(&s, w, threads, rec, &vh, &se, &sdone, err);
		if (!rc && sdone)
			errstat_finish(&se, r);
		if (rc || sdone) {
			rowsrc_close(&s);
			qtk_vhash_free(vh);
			return rc;
		}
	}
	for (int k = 0; k < o->nparts && !rc; k++)
		if (!(pp[k] = qtk_calloc(1, (size_t)o->parts[k].nbytes + 8)))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	if (!rc && !(x = qtk_malloc((size_t)s.win * inf * sizeof *x)))
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	/* the source's own integers, when it has them */
	bool have = false, wdone = false, wpacked = false;
	if (!rc && s.windowed && !(o->layout.kind == QTK_LAYOUT_NVFP4 || o->layout.kind == QTK_LAYOUT_MXFP4))
		rc = window_repack(&s, o, pp, &wdone, &wpacked, err);
	if (!rc && s.windowed && !wdone && t->layout.kind != QTK_LAYOUT_PLAIN)
		rc = rowsrc_whole(&s, err);
	if (!rc && wdone) {
	} else if (!rc && t->layout.kind != QTK_LAYOUT_PLAIN) {
		const qtk_scheme *ss = qtk_scheme_of(t);
		int q = ss && ss->to_groups ? qtk_scheme_to_groups(t, (const void *const *)s.packed, &g) : -1;
		/* compressed-tensors layers without integer groups (FP8, NVFP4, non-F16 scales) re-fit */
		if (q && !(ss && ss->part_specs))
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
		have = !rc && !q;
	} else if (!rc && (t->layout.type == QTK_T_Q4_0 || t->layout.type == QTK_T_Q8_0 || t->layout.type == QTK_T_Q4_1)) {
		uint8_t *raw;
		bool mlx = o->layout.kind == QTK_LAYOUT_MLX;
		if (qtk_read_part_alloc(in, t, 0, &raw)) {
			*err = in->err;
			rc = err->code;
		} else {
			/* MLX keeps any q4_1 minimum as its bias */
			have = (mlx && t->layout.type == QTK_T_Q4_1 ? qg_from_q4_1_bias(raw, out, inf, &g)
								    : qg_from_ggml(t->layout.type, raw, out, inf, &g)) == 0;
			qtk_free(raw);
		}
	}
	if (!rc && have && p->perm_heads)
		rc = permute_groups(&g, p, err);
	/* ggml NVFP4 blocks (and their .scale) into ModelOpt's parts: a byte shuffle, rows permuted
	 * back as whole rows of codes and block scales (plan_modelopt) */
	bool nvs = o->layout.kind == QTK_LAYOUT_NVFP4 && o->layout.scale_type == 1 &&
		   ((t->layout.kind == QTK_LAYOUT_NVFP4 && t->layout.scale_type == 2) ||
		    (t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == QTK_T_NVFP4));
	if (!rc && nvs) {
		uint8_t *blk = s.packed[0], *own = NULL;
		float sc = 1.0f;
		if (!blk && qtk_read_part_alloc(in, t, 0, &own)) {
			*err = in->err;
			rc = err->code;
		}
		blk = blk ? blk : own;
		if (!rc && t->layout.kind == QTK_LAYOUT_NVFP4 && qtk_nvfp4_ggml_scale(t, (const void *const *)s.packed, &sc))
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
		if (!rc && qtk_nvfp4_from_ggml(blk, out, inf, pp[0], pp[1]))
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "NVFP4 blocks do not fit ModelOpt's layout");
		qtk_free(own);
		if (!rc) {
			uint32_t bits;
			memcpy(&bits, &sc, 4);
			qtk_wr32(pp[2], bits);
		}
		if (!rc && p->perm_heads &&
		    (permute_inplace(pp[0], out, inf / 2, p->perm_heads, p->perm_inverse, t->name, err) ||
		     permute_inplace(pp[1], out, inf / 16, p->perm_heads, p->perm_inverse, t->name, err)))
			rc = err->code;
	}
	/* ggml MXFP4 blocks into compressed-tensors' parts: a byte shuffle (plan_ct_mxfp4) */
	bool mxs = o->layout.kind == QTK_LAYOUT_MXFP4 && o->layout.scale_type == QTK_MXFP4_CT &&
		   t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == QTK_T_MXFP4;
	if (!rc && mxs) {
		uint8_t *blk = NULL;
		if (qtk_read_part_alloc(in, t, 0, &blk)) {
			*err = in->err;
			rc = err->code;
		}
		if (!rc && qtk_mxfp4_from_ggml(blk, out, inf, pp[0], pp[1]))
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "MXFP4 blocks do not fit compressed-tensors' layout");
		qtk_free(blk);
		if (!rc && p->perm_heads &&
		    (permute_inplace(pp[0], out, inf / 2, p->perm_heads, p->perm_inverse, t->name, err) ||
		     permute_inplace(pp[1], out, inf / 32, p->perm_heads, p->perm_inverse, t->name, err)))
			rc = err->code;
	}
	bool packed = nvs || mxs || wpacked;
	/* MLX takes the integers whenever its codes and groups hold them (its from_groups checks) */
	if (!rc && have && (o->layout.kind == QTK_LAYOUT_MLX ||
			    (g.bits == o->layout.bits && (g.group == o->layout.group_size || qg_act_order(&g)))))
		packed = qtk_scheme_from_groups(&g, o, true, (void *const *)pp) == 0;
	qg_free(&g);
	errstat e;
	memset(&e, 0, sizeof e);
	if (!rc && !packed)
		for (int k = 0; k < o->nparts; k++)
			memset(pp[k], 0, (size_t)o->parts[k].nbytes);
	if (!rc && !packed && o->layout.act_order)
		rc = refit_act_order(t, o, err);
	rc = rc ? rc : fit_groups(&s, x, pp, !packed, threads, &e, &vh, err);
	if (!rc)
		errstat_finish(&e, r);
	bool handed = false; /* the record's sink has this tensor's decoded leaf: it holds no copy */
	if (vh) {
		uint8_t dec[32];
		if (!rc && !qtk_vhash_end(vh, dec)) {
			qtk_digest_sink_decoded(rec->dec, rec->k, dec);
			handed = true;
		} else if (rc)
			qtk_vhash_free(vh);
		vh = NULL;
	}
	if (!rc && nvs && !r->exact) /* the shuffle promises every bit (plan_modelopt) */
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "NVFP4 blocks in ModelOpt's layout decode differently");
	if (!rc && mxs && r->max_abs_err != 0) /* likewise, up to the sign of zero (plan_ct_mxfp4) */
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name,
				 "MXFP4 blocks in compressed-tensors' layout decode differently");
	/* the windows are done with: release them before writing */
	rowsrc_close(&s);
	qtk_free(x);
	x = NULL;
	uint64_t total = 0;
	for (int k = 0; k < o->nparts && !rc; k++) {
		rc = put_release(w, pp[k], (size_t)o->parts[k].nbytes);
		total += o->parts[k].nbytes;
	}
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(pp[k]);
	/* a large packed output: let the record's hashes finish it (a decoded tier its sink computes
	 * holds a copy of the parts) before the next tensor's are built, so the two are never in
	 * memory together; not needed when the sink was handed the leaf */
	if (!rc && total >= BIG_PACKED && !handed)
		rc = qtk_writer_drain(w);
	return rc;
}

int conv_tensor(qtk_model *in, qtk_writer *w, const plan *p, int threads, const conv_rec *rec, tensor_result *r,
		qtk_err *err)
{
	/* run_rows leaves its last window's put waiting (qtk_writer_put_later) for the next
	 * tensor's first loop; the other methods also hand the record's sink values of their
	 * own, so they start with that put done, and without the window buffers (up to two
	 * windows of output: the packed paths bound their own memory) */
	if (p->method != M_ROWS) {
		const int rc = qtk_writer_defer_done(w); /* its message in the writer's error: err */
		if (rc)
			return rc;
	}
	switch (p->method) {
	case M_COPY:
		r->exact = true;
		r->sqnr_db = INFINITY;
		r->cosine = 1;
		r->bias = 1;
		return copy_parts(in, w, p, err);
	case M_ROWS:
		return run_rows(in, w, p, threads, r, err);
	case M_GROUPS:
		return run_groups(in, w, p, threads, rec, r, err);
	}
	return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, p->src->name, "unknown method");
}
