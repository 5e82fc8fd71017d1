/* stats.c - value statistics of one tensor (see stats.h). */
#include "view/stats.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "dequant.h"
#include "text.h"
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Floats decoded at a time (a variable so tests can force small chunks). */
static uint64_t st_chunk_elems = 1u << 20;

uint64_t qtk_stats_test_chunk(uint64_t elems)
{
	uint64_t old = st_chunk_elems;
	st_chunk_elems = elems ? elems : 1u << 20;
	return old;
}

/* "tensor 'NAME'": the subject of an error about t (valid until the next call). */
const char *qtk_stats_subject(const qtk_tensor *t)
{
	static _Thread_local char buf[300];
	char sb[256];
	snprintf(buf, sizeof buf, "tensor '%s'", qtk_text_safe(t->name, 0, sb, sizeof sb));
	return buf;
}

/* ---- Row chunks -------------------------------------------------------- */

int qtk_trows_open(qtk_trows *r, qtk_model *m, const qtk_tensor *t, uint64_t align)
{
	return qtk_trows_open_cols(r, m, t, align, false);
}

int qtk_trows_open_cols(qtk_trows *r, qtk_model *m, const qtk_tensor *t, uint64_t align, bool col_chunks)
{
	memset(r, 0, sizeof *r);
	r->m = m;
	r->t = t;
	if (!qtk_can_decode(t))
		return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, qtk_stats_subject(t), "no decoder for this layout");
	r->rows = qtk_tensor_rows(t);
	r->cols = qtk_tensor_cols(t);
	r->cstep = r->cols;
	const qtk_scheme *sc = qtk_scheme_of(t);
	uint64_t base = sc ? sc->row_align : 1;
	align = qtk_lcm_u64(align ? align : 1, base);
	uint64_t step = r->cols ? st_chunk_elems / r->cols : 1;
	step = step < align ? align : step / align * align;
	if (step > r->rows)
		step = r->rows;
	if (step == 0)
		step = 1;
	r->step = step;
	if (col_chunks && t->layout.kind == QTK_LAYOUT_PLAIN && step == 1 && r->cols > st_chunk_elems) {
		/* one row is more than a chunk: columns in chunks of whole blocks */
		uint32_t be = 1, bb;
		if (qtk_ggml_block_info(t->layout.type, &be, &bb) || !be)
			be = 1;
		uint64_t g = t->layout.group_size ? t->layout.group_size : 128, al = qtk_lcm_u64(be, g);
		uint64_t c = st_chunk_elems < al ? al : st_chunk_elems / al * al;
		r->cstep = c < r->cols ? c : r->cols;
	}
	uint64_t nfl;
	if (!qtk_mul_u64(step, r->cstep, &nfl) || nfl > SIZE_MAX / sizeof(float))
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, qtk_stats_subject(t), "tensor rows too large for memory");
	r->buf = qtk_malloc((size_t)(nfl ? nfl : 1) * sizeof(float));
	if (!r->buf)
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, qtk_stats_subject(t), "out of memory");
	if (t->layout.kind == QTK_LAYOUT_PLAIN) {
		uint64_t rb, cb;
		if (qtk_type_nbytes(t->layout.type, r->cols, &rb) || qtk_type_nbytes(t->layout.type, r->cstep, &cb) ||
		    !qtk_mul_u64(cb, step, &nfl) || nfl > SIZE_MAX)
			return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, qtk_stats_subject(t), "row size does not fit the type");
		r->row_bytes = rb;
		r->raw = qtk_malloc((size_t)(nfl ? nfl : 1));
		if (!r->raw)
			return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, qtk_stats_subject(t), "out of memory");
		return 0;
	}
	qtk_pwin_init(&r->pw, m, t, r->cols ? st_chunk_elems * 8 / r->cols : 0);
	return 0;
}

int qtk_trows_read(qtk_trows *r, uint64_t row0, uint64_t n, const float **out)
{
	if (r->cstep != r->cols)
		return qtk_err_set(&r->m->err, QTK_E_INTERNAL, NULL, -1, qtk_stats_subject(r->t), "rows read in column chunks");
	return qtk_trows_read_cols(r, row0, n, 0, r->cols, out);
}

int qtk_trows_read_cols(qtk_trows *r, uint64_t row0, uint64_t n, uint64_t c0, uint64_t nc, const float **out)
{
	const qtk_tensor *t = r->t;
	qtk_model *m = r->m;
	if (n > r->step || row0 > r->rows || n > r->rows - row0 || nc > r->cstep || c0 % r->cstep || c0 > r->cols ||
	    nc > r->cols - c0 || (r->cstep != r->cols && n != 1))
		return qtk_err_set(&m->err, QTK_E_INTERNAL, NULL, -1, qtk_stats_subject(t), "row chunk out of range");
	*out = r->buf;
	if (t->layout.kind != QTK_LAYOUT_PLAIN)
		return qtk_pwin_decode(&r->pw, row0, n, r->buf);
	if (nc == r->cols)
		return qtk_decode_rows(m, t, row0, n, r->buf, r->raw);
	uint64_t boff, nb;
	if (qtk_type_nbytes(t->layout.type, c0, &boff) || qtk_type_nbytes(t->layout.type, nc, &nb))
		return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, qtk_stats_subject(t), "row size does not fit the type");
	int rc = qtk_read_part(m, t, 0, row0 * r->row_bytes + boff, r->raw, (size_t)nb);
	if (rc)
		return rc;
	if (qtk_dequant_ggml(t->layout.type, r->raw, r->buf, nc) != 0)
		return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, qtk_stats_subject(t), "cannot decode this type");
	return 0;
}

void qtk_trows_close(qtk_trows *r)
{
	qtk_free(r->buf);
	qtk_free(r->raw);
	qtk_pwin_free(&r->pw);
	memset(r, 0, sizeof *r);
}

/* ---- Histograms -------------------------------------------------------- */

static void st_hist_add(qtk_hist *h, double x)
{
	double w = h->hi - h->lo;
	long k = 0;
	if (w > 0) {
		double f = (x - h->lo) / w * QTK_ST_BINS;
		k = f < 0 ? 0 : f >= QTK_ST_BINS ? QTK_ST_BINS - 1 : (long)f;
	}
	h->counts[k]++;
	h->n++;
}

/* Running min/max of a side quantity (pass 1), then its histogram (pass 2). */
typedef struct st_side {
	double lo, hi;
	uint64_t n;
} st_side;

static void st_side_add(st_side *s, double x)
{
	if (!isfinite(x))
		return;
	if (!s->n || x < s->lo)
		s->lo = x;
	if (!s->n || x > s->hi)
		s->hi = x;
	s->n++;
}

double qtk_stats_entropy(const uint64_t *counts, size_t n)
{
	uint64_t tot = 0;
	for (size_t i = 0; i < n; i++)
		tot += counts[i];
	if (!tot)
		return 0;
	double h = 0;
	for (size_t i = 0; i < n; i++)
		if (counts[i]) {
			double p = (double)counts[i] / (double)tot;
			h -= p * log2(p);
		}
	return h;
}

/* ---- Codes and scales of ggml blocks ----------------------------------- */

static float st_half(const uint8_t *p) { return qtk_fp16_to_f32(qtk_rd16(p)); }

/* Count the codes of one block of `type` into c. */
static void st_codes_q4_0(const uint8_t *b, uint64_t *c, int off)
{
	for (int j = 0; j < 16; j++) {
		c[b[off + j] & 15]++;
		c[b[off + j] >> 4]++;
	}
}

static void st_codes_q5(const uint8_t *b, uint64_t *c, int qh_off, int qs_off)
{
	uint32_t qh = qtk_rd32(b + qh_off);
	for (int j = 0; j < 16; j++) {
		c[(b[qs_off + j] & 15) | (((qh >> j) & 1) << 4)]++;
		c[(b[qs_off + j] >> 4) | (((qh >> (j + 16)) & 1) << 4)]++;
	}
}

static void st_codes_block(unsigned type, const uint8_t *b, uint64_t *c)
{
	switch (type) {
	case QTK_T_Q4_0: case QTK_T_IQ4_NL: st_codes_q4_0(b, c, 2); break;
	case QTK_T_Q4_1: st_codes_q4_0(b, c, 4); break;
	case QTK_T_MXFP4: st_codes_q4_0(b, c, 1); break;
	case QTK_T_Q5_0: st_codes_q5(b, c, 2, 6); break;
	case QTK_T_Q5_1: st_codes_q5(b, c, 4, 8); break;
	case QTK_T_Q8_0:
		for (int j = 0; j < 32; j++)
			c[(uint8_t)(b[2 + j] ^ 0x80)]++; /* int8 -> 0..255 */
		break;
	case QTK_T_IQ4_XS:
		for (int j = 0; j < 128; j++) {
			c[b[8 + j] & 15]++;
			c[b[8 + j] >> 4]++;
		}
		break;
	case QTK_T_Q4_K:
		for (int j = 0; j < 128; j++) {
			c[b[16 + j] & 15]++;
			c[b[16 + j] >> 4]++;
		}
		break;
	case QTK_T_Q5_K:
		for (int j = 0; j < 4; j++)
			for (int l = 0; l < 32; l++) {
				uint8_t ql = b[48 + 32 * j + l], qh = b[16 + l];
				c[(ql & 15) | (((qh >> (2 * j)) & 1) << 4)]++;
				c[(ql >> 4) | (((qh >> (2 * j + 1)) & 1) << 4)]++;
			}
		break;
	case QTK_T_Q6_K:
		for (int n = 0; n < 2; n++) {
			const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
			for (int l = 0; l < 32; l++) {
				c[(ql[l] & 15) | ((qh[l] & 3) << 4)]++;
				c[(ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)]++;
				c[(ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)]++;
				c[(ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)]++;
			}
		}
		break;
	case QTK_T_Q2_K: case QTK_T_TQ2_0: {
		int off = type == QTK_T_Q2_K ? 16 : 0;
		for (int j = 0; j < 64; j++)
			for (int s = 0; s < 8; s += 2)
				c[(b[off + j] >> s) & 3]++;
		break;
	}
	case QTK_T_Q3_K: {
		const uint8_t *hm = b, *q = b + 32;
		unsigned mk = 1;
		for (int ch = 0; ch < 2; ch++, q += 32)
			for (int sh = 0; sh < 8; sh += 2, mk <<= 1)
				for (int h = 0; h < 2; h++)
					for (int l = 0; l < 16; l++)
						c[((q[16 * h + l] >> sh) & 3) | ((hm[16 * h + l] & mk) ? 4 : 0)]++;
		break;
	}
	default: break;
	}
}

/* Block header geometry: where the fp16 scale d (and min) sit; code bits. */
typedef struct st_blk {
	unsigned type;
	int d_off, m_off; /* -1: none */
	int code_bits;    /* 0: codes not read */
	const char *what;
} st_blk;

static const st_blk st_blks[] = {
	{QTK_T_Q4_0, 0, -1, 4, "block d"},       {QTK_T_Q4_1, 0, 2, 4, "block d"},
	{QTK_T_Q5_0, 0, -1, 5, "block d"},       {QTK_T_Q5_1, 0, 2, 5, "block d"},
	{QTK_T_Q8_0, 0, -1, 8, "block d"},       {QTK_T_IQ4_NL, 0, -1, 4, "block d"},
	{QTK_T_MXFP4, -1, -1, 4, NULL},          {QTK_T_Q2_K, 80, 82, 2, "super-block d"},
	{QTK_T_Q3_K, 108, -1, 3, "super-block d"}, {QTK_T_Q4_K, 0, 2, 4, "super-block d"},
	{QTK_T_Q5_K, 0, 2, 5, "super-block d"},  {QTK_T_Q6_K, 208, -1, 6, "super-block d"},
	{QTK_T_IQ4_XS, 0, -1, 4, "super-block d"}, {QTK_T_TQ2_0, 64, -1, 2, "block d"},
	{QTK_T_TQ1_0, 52, -1, 0, "block d"},     {QTK_T_IQ2_XXS, 0, -1, 0, "super-block d"},
	{QTK_T_IQ2_XS, 0, -1, 0, "super-block d"}, {QTK_T_IQ2_S, 0, -1, 0, "super-block d"},
	{QTK_T_IQ3_XXS, 0, -1, 0, "super-block d"}, {QTK_T_IQ3_S, 0, -1, 0, "super-block d"},
	{QTK_T_IQ1_S, 0, -1, 0, "super-block d"}, {QTK_T_Q1_0, 0, -1, 0, "block d"},
	{QTK_T_Q2_0, 0, -1, 0, "block d"},
};

static const st_blk *st_blk_find(unsigned type)
{
	for (size_t i = 0; i < sizeof st_blks / sizeof *st_blks; i++)
		if (st_blks[i].type == type)
			return &st_blks[i];
	return NULL;
}

/* Block scales (pass 1: range; pass 2: histogram) and codes (pass 1) of raw blocks. */
static void st_blocks(qtk_tstats *s, const st_blk *bk, const uint8_t *raw, uint64_t nbytes, int pass, st_side *sd,
		      st_side *sm)
{
	uint32_t be, bb;
	if (qtk_ggml_block_info(bk->type, &be, &bb) || !bb)
		return;
	uint64_t nb = nbytes / bb;
	for (uint64_t i = 0; i < nb; i++) {
		const uint8_t *b = raw + i * bb;
		if (bk->d_off >= 0) {
			double d = st_half(b + bk->d_off);
			if (pass == 1)
				st_side_add(sd, d);
			else if (isfinite(d))
				st_hist_add(&s->scales, d);
		}
		if (bk->m_off >= 0) {
			double mm = st_half(b + bk->m_off);
			if (pass == 1)
				st_side_add(sm, mm);
			else if (isfinite(mm))
				st_hist_add(&s->mins, mm);
		}
		if (pass == 1 && bk->code_bits)
			st_codes_block(bk->type, b, s->codes);
	}
}

/* AWQ/GPTQ side data from the parts of a window of rows (sub: those rows as a tensor of their
 * own): pass 1 the scale range, zero points and codes; pass 2 the scale histogram. */
static void st_packed(qtk_tstats *s, const qtk_tensor *t, const uint8_t *const *part, int pass, st_side *sd)
{
	unsigned bits = t->layout.bits;
	uint64_t nsc = t->parts[2].nbytes / 2;
	if (pass == 2) {
		for (uint64_t i = 0; i < nsc; i++) {
			double d = st_half(part[2] + 2 * i);
			if (isfinite(d))
				st_hist_add(&s->scales, d);
		}
		return;
	}
	for (uint64_t i = 0; i < nsc; i++)
		st_side_add(sd, st_half(part[2] + 2 * i));
	/* zeros: every bits-wide field of each qzeros row (a packed stream of `out` fields) */
	uint64_t out = t->shape[0], ng = t->parts[2].shape[0], zw = out * bits / 32;
	int zoff = t->layout.kind == QTK_LAYOUT_GPTQ && t->layout.gptq_version != 2 ? 1 : 0;
	s->zero_levels = (1 << bits) + zoff;
	const uint8_t *qz = part[1];
	for (uint64_t g = 0; g < ng; g++)
		for (uint64_t o = 0; o < out; o++) {
			uint64_t pos = o * bits, wi = pos / 32;
			uint64_t lo = qtk_rd32(qz + 4 * (g * zw + wi));
			uint64_t hi = wi + 1 < zw ? qtk_rd32(qz + 4 * (g * zw + wi + 1)) : 0;
			unsigned z = (unsigned)(((lo | hi << 32) >> (pos % 32)) & ((1u << bits) - 1u));
			s->zeros[z + (unsigned)zoff]++;
		}
	/* codes: every field of qweight; 3-bit fields run across the words of a 32-row chunk */
	s->code_bits = (int)bits;
	const uint8_t *qw = part[0];
	uint64_t nw = t->parts[0].nbytes / 4;
	if (bits != 3) {
		for (uint64_t i = 0; i < nw; i++) {
			uint32_t w = qtk_rd32(qw + 4 * i);
			for (unsigned k = 0; k < 32; k += bits)
				s->codes[(w >> k) & ((1u << bits) - 1u)]++;
		}
	} else {
		uint64_t cols = t->parts[0].shape[1], chunks = t->parts[0].shape[0] / 3;
		for (uint64_t c = 0; c < chunks; c++)
			for (uint64_t o = 0; o < cols; o++) {
				uint32_t w[4];
				for (int k = 0; k < 3; k++)
					w[k] = qtk_rd32(qw + 4 * ((c * 3 + (uint64_t)k) * cols + o));
				w[3] = 0;
				for (unsigned q = 0; q < 32; q++) {
					unsigned pos = 3 * q;
					uint64_t v = (uint64_t)w[pos / 32] | (uint64_t)w[pos / 32 + 1] << 32;
					s->codes[(v >> (pos % 32)) & 7]++;
				}
			}
	}
}

/* Both passes of st_packed over the tensor, a window of rows at a time. */
static int st_packed_all(qtk_tstats *s, qtk_trows *r)
{
	st_side sd = {0};
	for (int pass = 1; pass <= 2; pass++) {
		if (pass == 2) {
			s->has_scales = sd.n > 0;
			s->scale_what = "group scale";
			s->scales.lo = sd.lo;
			s->scales.hi = sd.hi;
		}
		for (uint64_t o0 = 0; o0 < r->rows;) {
			uint64_t got;
			uint64_t n = r->rows - o0 < r->pw.want ? r->rows - o0 : r->pw.want;
			int rc = qtk_pwin_load(&r->pw, o0, n, &got);
			if (rc)
				return rc;
			if (r->pw.whole) { /* the parts hold every row */
				st_packed(s, &r->pw.sub, (const uint8_t *const *)r->pw.buf, pass, &sd);
				break;
			}
			if (o0 == r->pw.w0 && got == r->pw.wn)
				st_packed(s, &r->pw.sub, (const uint8_t *const *)r->pw.buf, pass, &sd);
			else /* a window loaded for other rows: load these on their own */
				return qtk_err_set(&r->m->err, QTK_E_INTERNAL, NULL, -1, qtk_stats_subject(r->t), "window out of step");
			o0 += got;
		}
	}
	return 0;
}

/* ---- The two passes ----------------------------------------------------- */

typedef struct st_run {
	qtk_tstats *s;
	qtk_trows r;
	const st_blk *bk;
	float *colmax;      /* per input channel absmax */
	st_side sd, sm;     /* block scale and min ranges */
	double m2;          /* sum of squared deviations (pass 1), Chan's combination */
	double m4;          /* sum of 4th powers of deviations (pass 2) */
	uint64_t done, total;
	qtk_stats_progress cb;
	void *ctx;
} st_run;

/* Pass 1 over one chunk: range, mean and M2 (two-pass inside the chunk,
 * combined across chunks with Chan's formula), channel absmax, groups, codes. */
static void st_pass1(st_run *u, const float *x, uint64_t nrows, uint64_t col0, uint64_t cols)
{
	qtk_tstats *s = u->s;
	uint64_t g = s->group;
	double sum = 0;
	uint64_t n = 0;
	for (uint64_t i = 0; i < nrows; i++) {
		const float *row = x + i * cols;
		for (uint64_t c0 = 0; c0 < cols; c0 += g) {
			uint64_t c1 = c0 + g < cols ? c0 + g : cols;
			double sq = 0, gmax = 0;
			uint64_t gn = 0;
			for (uint64_t c = c0; c < c1; c++) {
				double v = row[c];
				if (!isfinite(v)) {
					s->n_nonfinite++;
					continue;
				}
				double a = fabs(v);
				if (!s->n && !n) {
					s->min = s->max = v;
				}
				if (v < s->min)
					s->min = v;
				if (v > s->max)
					s->max = v;
				if (a > s->absmax)
					s->absmax = a;
				if (u->colmax && (float)a > u->colmax[col0 + c])
					u->colmax[col0 + c] = (float)a;
				sum += v;
				n++;
				sq += v * v;
				gn++;
				if (a > gmax)
					gmax = a;
			}
			if (gn) {
				s->n_groups++;
				if (gmax > 0 && gmax > 4.0 * sqrt(sq / (double)gn))
					s->outlier_groups++;
			}
		}
	}
	if (!n)
		return;
	double mc = sum / (double)n, m2c = 0;
	for (uint64_t k = 0; k < nrows * cols; k++) {
		double v = x[k];
		if (isfinite(v))
			m2c += (v - mc) * (v - mc);
	}
	uint64_t na = s->n, nt = na + n;
	double delta = mc - s->mean;
	s->mean += delta * (double)n / (double)nt;
	u->m2 += m2c + delta * delta * (double)na * (double)n / (double)nt;
	s->n = nt;
}

/* Pass 2 over one chunk: 4th moment, outlier counts, value histogram. */
static void st_pass2(st_run *u, const float *x, uint64_t nvals)
{
	qtk_tstats *s = u->s;
	double m4 = 0, t3 = 3 * s->std, t6 = 6 * s->std;
	for (uint64_t k = 0; k < nvals; k++) {
		double v = x[k];
		if (!isfinite(v))
			continue;
		double d = v - s->mean, a = fabs(d);
		m4 += d * d * d * d;
		if (a > t3)
			s->out3++;
		if (a > t6)
			s->out6++;
		st_hist_add(&s->hist, v);
	}
	u->m4 += m4;
}

static int st_pass(st_run *u, int pass)
{
	const qtk_tensor *t = u->r.t;
	for (uint64_t r0 = 0; r0 < u->r.rows; r0 += u->r.step) {
		uint64_t n = u->r.rows - r0 < u->r.step ? u->r.rows - r0 : u->r.step;
		for (uint64_t c0 = 0; c0 < u->r.cols || (!c0 && !u->r.cols); c0 += u->r.cstep) {
			uint64_t nc = u->r.cols - c0 < u->r.cstep ? u->r.cols - c0 : u->r.cstep;
			const float *x;
			int rc = qtk_trows_read_cols(&u->r, r0, n, c0, nc, &x);
			if (rc)
				return rc;
			if (pass == 1)
				st_pass1(u, x, n, c0, nc);
			else
				st_pass2(u, x, n * nc);
			if (u->bk && t->layout.kind == QTK_LAYOUT_PLAIN) {
				uint64_t nb = n * u->r.row_bytes;
				if (nc != u->r.cols && qtk_type_nbytes(t->layout.type, nc, &nb))
					nb = 0;
				st_blocks(u->s, u->bk, u->r.raw, nb, pass, &u->sd, &u->sm);
			}
			if (!u->r.cstep)
				break;
		}
		u->done += n;
		if (u->cb)
			u->cb(u->ctx, u->done, u->total);
	}
	return 0;
}

static int st_cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

/* Profile buckets, median and the top-k channels from colmax. */
static int st_channels(qtk_tstats *s, float *colmax, uint64_t cols)
{
	s->n_channels = cols;
	uint64_t span = (cols + QTK_ST_PROFILE - 1) / QTK_ST_PROFILE;
	s->profile_span = (uint32_t)(span ? span : 1);
	s->n_profile = (uint32_t)((cols + s->profile_span - 1) / s->profile_span);
	for (uint32_t b = 0; b < s->n_profile; b++) {
		float mx = 0;
		for (uint64_t c = (uint64_t)b * s->profile_span; c < cols && c < (uint64_t)(b + 1) * s->profile_span; c++)
			if (colmax[c] > mx)
				mx = colmax[c];
		s->profile[b] = mx;
	}
	/* top-k: repeated selection, ties to the lower index */
	for (int k = 0; k < QTK_ST_TOPK && (uint64_t)k < cols; k++) {
		uint64_t best = UINT64_MAX;
		for (uint64_t c = 0; c < cols; c++) {
			bool taken = false;
			for (int j = 0; j < k; j++)
				taken |= s->top_idx[j] == c;
			if (!taken && (best == UINT64_MAX || colmax[c] > colmax[best]))
				best = c;
		}
		s->top_idx[k] = best;
		s->top_val[k] = colmax[best];
		s->n_top = k + 1;
	}
	float *tmp = qtk_malloc((size_t)cols * sizeof *tmp);
	if (!tmp)
		return -1;
	memcpy(tmp, colmax, (size_t)cols * sizeof *tmp);
	qsort(tmp, (size_t)cols, sizeof *tmp, st_cmp_float);
	s->channel_median = cols % 2 ? tmp[cols / 2] : 0.5 * ((double)tmp[cols / 2 - 1] + (double)tmp[cols / 2]);
	qtk_free(tmp);
	return 0;
}

int qtk_stats_compute(qtk_model *m, const qtk_tensor *t, qtk_tstats *s, qtk_stats_progress cb, void *ctx)
{
	memset(s, 0, sizeof *s);
	st_run u = {.s = s, .cb = cb, .ctx = ctx};
	int rc = qtk_trows_open_cols(&u.r, m, t, 1, true);
	if (rc)
		goto done;
	uint64_t cols = u.r.cols;
	s->group = t->layout.group_size ? t->layout.group_size : 128;
	if (s->group > cols)
		s->group = (uint32_t)(cols ? cols : 1);
	/* one row read in column chunks: no per-channel profile (a channel is a value there, and
	 * the profile would hold the row) */
	bool chan = u.r.cstep == cols;
	u.colmax = chan ? qtk_calloc((size_t)(cols ? cols : 1), sizeof *u.colmax) : NULL;
	if (chan && !u.colmax) {
		rc = qtk_err_set(&m->err, QTK_E_IO, NULL, -1, qtk_stats_subject(t), "out of memory");
		goto done;
	}
	if (t->layout.kind == QTK_LAYOUT_PLAIN)
		u.bk = st_blk_find(t->layout.type);
	u.total = 2 * u.r.rows;
	if ((rc = st_pass(&u, 1)))
		goto done;
	s->std = s->n ? sqrt(u.m2 / (double)s->n) : 0;
	s->hist.lo = s->n ? s->min : 0;
	s->hist.hi = s->n ? s->max : 0;
	if (u.bk) {
		s->has_scales = u.sd.n > 0;
		s->scale_what = u.bk->what;
		s->scales.lo = u.sd.lo;
		s->scales.hi = u.sd.hi;
		s->has_mins = u.sm.n > 0;
		s->mins.lo = u.sm.lo;
		s->mins.hi = u.sm.hi;
		s->code_bits = u.bk->code_bits;
	}
	if ((rc = st_pass(&u, 2)))
		goto done;
	double var = s->n ? u.m2 / (double)s->n : 0;
	s->kurtosis = var > 0 ? u.m4 / (double)s->n / (var * var) : 0;
	/* parts qweight, qzeros, scales: AWQ and GPTQ only (other schemes store other parts) */
	if ((t->layout.kind == QTK_LAYOUT_AWQ || t->layout.kind == QTK_LAYOUT_GPTQ) && (rc = st_packed_all(s, &u.r)))
		goto done;
	if (s->code_bits) {
		size_t nc = (size_t)1 << s->code_bits;
		for (size_t i = 0; i < nc; i++) {
			s->n_codes += s->codes[i];
			s->codes_used += s->codes[i] != 0;
		}
		s->code_entropy = qtk_stats_entropy(s->codes, nc);
	}
	if (chan && st_channels(s, u.colmax, cols))
		rc = qtk_err_set(&m->err, QTK_E_IO, NULL, -1, qtk_stats_subject(t), "out of memory");
done:
	qtk_free(u.colmax);
	qtk_trows_close(&u.r);
	return rc;
}

/* ---- JSON --------------------------------------------------------------- */

static cJSON *st_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *qtk_stats_json(const qtk_tstats *s)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "min", st_num(s->min));
	cJSON_AddItemToObject(o, "max", st_num(s->max));
	cJSON_AddItemToObject(o, "mean", st_num(s->mean));
	cJSON_AddItemToObject(o, "std", st_num(s->std));
	cJSON_AddItemToObject(o, "absmax", st_num(s->absmax));
	if (s->std > 0)
		cJSON_AddItemToObject(o, "kurtosis", st_num(s->kurtosis));
	else
		cJSON_AddNullToObject(o, "kurtosis");
	cJSON_AddNumberToObject(o, "outliers_3sigma", (double)s->out3);
	cJSON_AddNumberToObject(o, "outliers_6sigma", (double)s->out6);
	cJSON_AddNumberToObject(o, "outlier_groups", (double)s->outlier_groups);
	cJSON *h = cJSON_AddObjectToObject(o, "histogram");
	cJSON_AddItemToObject(h, "lo", st_num(s->hist.lo));
	cJSON_AddItemToObject(h, "hi", st_num(s->hist.hi));
	cJSON *c = cJSON_AddArrayToObject(h, "counts");
	for (int k = 0; k < QTK_ST_BINS; k++)
		cJSON_AddItemToArray(c, cJSON_CreateNumber((double)s->hist.counts[k]));
	if (s->code_bits)
		cJSON_AddItemToObject(o, "code_entropy_bits", st_num(s->code_entropy));
	else
		cJSON_AddNullToObject(o, "code_entropy_bits");
	return o;
}
