/* decode.h - decoding whole tensors or row ranges to F32 (logical order). */
#ifndef QTK_DECODE_H
#define QTK_DECODE_H
#include "qtk_util.h"

bool qtk_can_decode(const qtk_tensor *t);
/* Rows = product of all but the last logical dimension; cols = the last. */
uint64_t qtk_tensor_rows(const qtk_tensor *t);
uint64_t qtk_tensor_cols(const qtk_tensor *t);
/* Decode rows [row0, row0+nrows) of a plain tensor. scratch holds the
 * encoded rows (nrows * row bytes). */
int qtk_decode_rows(qtk_model *m, const qtk_tensor *t, uint64_t row0, uint64_t nrows, float *dst,
		    uint8_t *scratch);
/* Windows of rows of a packed tensor, read from its parts a window at a time: only the bytes
 * of the window's rows (qtk_scheme_window), or, when the scheme's parts do not split by rows,
 * every part whole once (the only case that holds a tensor's packed bytes). */
typedef struct qtk_pwin {
	qtk_model *m;
	const qtk_tensor *t;
	uint64_t want;                   /* rows to load at a time (at least what is asked) */
	uint64_t w0, wn;                 /* rows of t loaded (wn 0: none) */
	bool whole;                      /* fallback: the parts are t's, whole */
	qtk_tensor sub;                  /* the loaded rows as a tensor of their own (whole: *t) */
	qtk_part sub_parts[QTK_MAX_PARTS]; /* sub's (a qtk_pwin is not moved once loaded) */
	uint8_t *buf[QTK_MAX_PARTS];     /* its parts */
	size_t cap[QTK_MAX_PARTS];
} qtk_pwin;

/* Load `want` rows at a time (0: 8M values' worth). */
void qtk_pwin_init(qtk_pwin *w, qtk_model *m, const qtk_tensor *t, uint64_t want);
/* Load rows [o0, o0 + n) (o0 aligned as for qtk_scheme_decode_rows) or more: w->sub and
 * w->buf then hold rows w->w0 .. w->w0 + w->wn - 1 (whole: all of t, w0 0). A window never
 * crosses an expert of a 3-D stack, so n may come back smaller: *got rows starting at o0. */
int qtk_pwin_load(qtk_pwin *w, uint64_t o0, uint64_t n, uint64_t *got);
/* Decode rows [o0, o0 + n) into dst ([n][in]), loading windows as needed. */
int qtk_pwin_decode(qtk_pwin *w, uint64_t o0, uint64_t n, float *dst);
void qtk_pwin_free(qtk_pwin *w);

/* Decode a whole tensor (any layout) into dst (n_params floats). */
int qtk_decode_tensor(qtk_model *m, const qtk_tensor *t, float *dst);
#endif
