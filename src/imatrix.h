/* imatrix.h - llama.cpp importance-matrix files (llama-imatrix output), read as llama-quantize
 * reads them.
 *
 * Two formats, told apart by content:
 *   legacy binary: int32 n_entries; per entry int32 name_len, name bytes, int32 ncall,
 *     int32 nval, float[nval]; optionally int32 chunk count, int32 dataset_len, dataset bytes.
 *     Weights: value/ncall (float division) when ncall > 0, else the value as stored.
 *   GGUF (llama.cpp since 2025-07): F32 tensors "<name>.in_sum2" [n_mat][ne0] and
 *     "<name>.counts" [n_mat] (optional "<name>.in_sum" is ignored); keys imatrix.datasets,
 *     imatrix.chunk_count. Weights: in_sum2/count per matrix (count = lround(counts) as float),
 *     1 where the count is 0.
 * The file is treated as hostile: bounded reads, caps, checked sizes; non-finite or negative
 * sums and counts are rejected. Errors are QTK_E_DATA (QTK_E_IO for I/O) naming the file, the
 * offset and the field. A name that occurs twice keeps its last entry (as llama.cpp does). */
#ifndef QTK_IMATRIX_H
#define QTK_IMATRIX_H

#include "qtk.h"

typedef struct qtk_imatrix qtk_imatrix;

/* Load a legacy or GGUF imatrix file; NULL with *err set on failure. */
qtk_imatrix *qtk_imatrix_load(const char *path, qtk_err *err);
/* The per-column weights llama-quantize uses for tensor `tensor_name` (GGUF tensor name, e.g.
 * "blk.0.attn_q.weight") when the entry has exactly n_per_row values; NULL otherwise (no entry,
 * or a different size, e.g. a 3-D expert tensor: use qtk_imatrix_find). Valid until free. */
const float *qtk_imatrix_get(const qtk_imatrix *m, const char *tensor_name, uint64_t n_per_row);
/* All weights of an entry (n_mat * ne0 values for expert tensors) and their count; NULL when
 * absent. */
const float *qtk_imatrix_find(const qtk_imatrix *m, const char *tensor_name, uint64_t *nval);
/* SHA-256 of the file's bytes (32 bytes), for provenance records. */
const uint8_t *qtk_imatrix_sha256(const qtk_imatrix *m);
/* Number of entries, and entry i's name (sorted by name); NULL when out of range. */
size_t qtk_imatrix_count(const qtk_imatrix *m);
const char *qtk_imatrix_name(const qtk_imatrix *m, size_t i);
/* Chunk count (legacy trailer or imatrix.chunk_count; -1 when absent), dataset name (first of
 * imatrix.datasets; NULL when absent) and whether the file was the legacy format. */
int64_t qtk_imatrix_chunks(const qtk_imatrix *m);
const char *qtk_imatrix_dataset(const qtk_imatrix *m);
bool qtk_imatrix_is_legacy(const qtk_imatrix *m);
void qtk_imatrix_free(qtk_imatrix *m);

#endif /* QTK_IMATRIX_H */
