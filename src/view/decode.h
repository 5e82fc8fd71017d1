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
/* Decode a whole tensor (any layout) into dst (n_params floats). */
int qtk_decode_tensor(qtk_model *m, const qtk_tensor *t, float *dst);
#endif
