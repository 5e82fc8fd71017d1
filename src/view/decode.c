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
