/* decode.c - a tensor's values as F32 in logical order, whatever its layout. */
#include "view/decode.h"
#include "scheme/scheme.h"
#include "dequant.h"
#include <string.h>

bool qtk_can_decode(const qtk_tensor *t)
{
	if (t->layout.kind != QTK_LAYOUT_PLAIN)
		return true;
	return t->layout.type < QTK_GGML_MAX && qtk_dequant_ggml_supported(t->layout.type);
}

uint64_t qtk_tensor_rows(const qtk_tensor *t)
{
	if (t->ndim <= 1)
		return 1;
	uint64_t r = 1;
	for (int i = 0; i < t->ndim - 1; i++)
		r *= t->shape[i];
	return r;
}

uint64_t qtk_tensor_cols(const qtk_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

int qtk_decode_rows(qtk_model *m, const qtk_tensor *t, uint64_t row0, uint64_t nrows, float *dst, uint8_t *scratch)
{
	if (t->layout.kind != QTK_LAYOUT_PLAIN)
		return qtk_err_set(&m->err, QTK_E_INTERNAL, NULL, -1, t->name, "row decoding needs a plain layout");
	uint64_t cols = qtk_tensor_cols(t), row_bytes, n = nrows * cols;
	if (qtk_type_nbytes(t->layout.type, cols, &row_bytes))
		return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, t->name, "row size does not fit the type");
	int rc = qtk_read_part(m, t, 0, row0 * row_bytes, scratch, (size_t)(nrows * row_bytes));
	if (rc)
		return rc;
	if (qtk_dequant_ggml(t->layout.type, scratch, dst, n) != 0) {
		const qtk_type_info *ti = qtk_type(t->layout.type);
		return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, t->name, "cannot decode type %s",
				   ti ? ti->name : "unknown");
	}
	return 0;
}

int qtk_decode_tensor(qtk_model *m, const qtk_tensor *t, float *dst)
{
	if (t->layout.kind == QTK_LAYOUT_PLAIN) {
		uint8_t *buf;
		int rc = qtk_read_part_alloc(m, t, 0, &buf);
		if (rc)
			return rc;
		rc = qtk_dequant_ggml(t->layout.type, buf, dst, t->n_params);
		qtk_free(buf);
		if (rc)
			return qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, t->name, "cannot decode this type");
		return 0;
	}
	if (t->view && t->view->kind == QTK_VIEW_STACK) {
		/* stacked packed experts: each piece is a whole packed matrix of its own */
		const qtk_view *v = t->view;
		uint64_t at = 0;
		for (uint32_t e = 0; e < v->n; e++) {
			const qtk_tensor *pc = v->pieces[e];
			if (pc->n_params > t->n_params - at)
				return qtk_err_set(&m->err, QTK_E_INTERNAL, NULL, -1, t->name, "stack does not match its pieces");
			int rc = qtk_decode_tensor(v->m, pc, dst + at);
			if (rc) {
				if (m != v->m)
					m->err = v->m->err;
				return rc;
			}
			at += pc->n_params;
		}
		return 0;
	}
	uint8_t *p[QTK_MAX_PARTS] = {NULL};
	int rc = 0;
	for (int i = 0; i < t->nparts && !rc; i++)
		rc = qtk_read_part_alloc(m, t, i, &p[i]);
	if (!rc) {
		int r = qtk_scheme_decode_rows(t, (const void *const *)p, 0, qtk_tensor_rows(t), dst); /* 3-D: E * out */
		if (r)
			rc = qtk_err_set(&m->err, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
	}
	for (int i = 0; i < QTK_MAX_PARTS; i++)
		qtk_free(p[i]);
	return rc;
}

/* ---- windows of packed rows --------------------------------------------------------------- */

void qtk_pwin_init(qtk_pwin *w, qtk_model *m, const qtk_tensor *t, uint64_t want)
{
	memset(w, 0, sizeof *w);
	w->m = m;
	w->t = t;
	w->sub.parts = w->sub_parts;
	w->sub.room = QTK_MAX_PARTS;
	uint64_t in = qtk_tensor_cols(t);
	w->want = want ? want : ((uint64_t)8 << 20) / (in ? in : 1);
	const qtk_scheme *sc = qtk_scheme_of(t);
	uint64_t a = sc && sc->row_align ? sc->row_align : 1;
	w->want = w->want < a ? a : w->want / a * a;
}

void qtk_pwin_free(qtk_pwin *w)
{
	for (int i = 0; i < QTK_MAX_PARTS; i++)
		qtk_free(w->buf[i]);
	memset(w, 0, sizeof *w);
}

static int pw_grow(qtk_pwin *w, int p, uint64_t n)
{
	if (n > SIZE_MAX - 1)
		return qtk_err_set(&w->m->err, QTK_E_IO, NULL, -1, w->t->name, "tensor too large for memory");
	if (w->cap[p] >= n && w->buf[p])
		return 0;
	qtk_free(w->buf[p]);
	w->buf[p] = qtk_malloc((size_t)(n ? n : 1));
	w->cap[p] = w->buf[p] ? (size_t)n : 0;
	return w->buf[p] ? 0 : qtk_err_set(&w->m->err, QTK_E_IO, NULL, -1, w->t->name, "out of memory");
}

/* Every part whole, once (schemes whose parts do not split by rows). */
static int pw_whole(qtk_pwin *w)
{
	const qtk_tensor *t = w->t;
	if (w->whole)
		return 0;
	for (int p = 0; p < t->nparts; p++) {
		int rc = pw_grow(w, p, t->parts[p].nbytes);
		rc = rc ? rc : qtk_read_part(w->m, t, p, 0, w->buf[p], (size_t)t->parts[p].nbytes);
		if (rc)
			return rc;
	}
	w->whole = true;
	w->sub.parts = w->sub_parts;
	w->sub.room = QTK_MAX_PARTS;
	if (qtk_tensor_copy(&w->sub, t))
		return qtk_err_set(&w->m->err, QTK_E_INTERNAL, NULL, -1, t->name, "too many parts");
	w->w0 = 0;
	w->wn = qtk_tensor_rows(t);
	return 0;
}

int qtk_pwin_load(qtk_pwin *w, uint64_t o0, uint64_t n, uint64_t *got)
{
	const qtk_tensor *t = w->t;
	uint64_t rows = qtk_tensor_rows(t);
	if (!n || o0 > rows || n > rows - o0)
		return qtk_err_set(&w->m->err, QTK_E_INTERNAL, NULL, -1, t->name, "row window out of range");
	if (w->wn && o0 >= w->w0 && o0 - w->w0 < w->wn) { /* already loaded */
		uint64_t left = w->w0 + w->wn - o0;
		*got = n < left ? n : left;
		return 0;
	}
	if (w->whole)
		return qtk_err_set(&w->m->err, QTK_E_INTERNAL, NULL, -1, t->name, "row window out of range");
	uint64_t k = n > w->want ? n : w->want, end = rows;
	if (t->ndim == 3 && t->shape[1]) /* stop at the end of the expert */
		end = (o0 / t->shape[1] + 1) * t->shape[1];
	if (k > end - o0)
		k = end - o0;
	qtk_scheme_slice sl[QTK_MAX_PARTS];
	qtk_tensor sub = QTK_TENSOR_LOCAL;
	if (qtk_scheme_window(t, o0, k, &sub, sl)) {
		int rc = pw_whole(w);
		*got = n;
		return rc;
	}
	w->wn = 0;
	for (int p = 0; p < t->nparts; p++) {
		const qtk_scheme_slice *s = &sl[p];
		int rc = pw_grow(w, p, sub.parts[p].nbytes);
		if (rc)
			return rc;
		if (s->count == 1 || s->stride == s->len) {
			rc = qtk_read_part(w->m, t, p, s->off, w->buf[p], (size_t)(s->len * s->count));
		} else {
			for (uint64_t i = 0; i < s->count && !rc; i++)
				rc = qtk_read_part(w->m, t, p, s->off + i * s->stride, w->buf[p] + i * s->len, (size_t)s->len);
		}
		if (rc)
			return rc;
	}
	w->sub.parts = w->sub_parts;
	w->sub.room = QTK_MAX_PARTS;
	if (qtk_tensor_copy(&w->sub, &sub))
		return qtk_err_set(&w->m->err, QTK_E_INTERNAL, NULL, -1, t->name, "too many parts");
	w->w0 = o0;
	w->wn = k;
	*got = n < k ? n : k;
	return 0;
}

int qtk_pwin_decode(qtk_pwin *w, uint64_t o0, uint64_t n, float *dst)
{
	uint64_t in = qtk_tensor_cols(w->t);
	while (n) {
		uint64_t k;
		int rc = qtk_pwin_load(w, o0, n, &k);
		if (rc)
			return rc;
		if (qtk_scheme_decode_rows(&w->sub, (const void *const *)w->buf, o0 - w->w0, k, dst))
			return qtk_err_set(&w->m->err, QTK_E_DATA, NULL, -1, w->t->name, "inconsistent quantized components");
		o0 += k;
		n -= k;
		dst += k * in;
	}
	return 0;
}
