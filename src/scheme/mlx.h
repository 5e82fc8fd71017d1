/* mlx.h - MLX affine quantization (mlx.c): the arithmetic beyond the scheme descriptor. */
#ifndef QTK_SCHEME_MLX_H
#define QTK_SCHEME_MLX_H

#include "qtk.h"

/* Group sizes MLX's kernels accept. */
bool qtk_mlx_group_ok(uint64_t group);

/* Rows o0 .. o0+n-1 of an MLX tensor of [out, in] from its parts (weight bit streams, scales
 * and biases of type stype: QTK_T_F16, QTK_T_BF16 or QTK_T_F32) into dst [n][in].
 * half_math: the values MLX itself returns for F16 scales, each product and sum rounded to
 * F16 (fp16(fp16(q*s) + b)); otherwise f32(f32(q*s) + b), the decoder qtk uses.
 * 0, or -1 on bad arguments. */
int qtk_mlx_decode(const uint32_t *w, const void *scales, const void *biases, unsigned stype, uint32_t out,
		   uint32_t in, uint32_t group, unsigned bits, bool half_math, uint32_t o0, uint32_t n, float *dst);

/* Rows o0 .. o0+n-1 as the affine sub-blocks of 32 values of content digest version 4
 * (docs/provenance.md 1.2; group a multiple of 32, bits up to 6): per sub-block the F32 bits of
 * its group's scale and of its bias negated (little-endian u32 each), then its 32 codes as bytes;
 * in / 32 sub-blocks of 40 bytes a row into dst. 0, or -1 on bad arguments. */
int qtk_mlx_subblocks(const uint32_t *w, const void *scales, const void *biases, unsigned stype, uint32_t out,
		      uint32_t in, uint32_t group, unsigned bits, uint32_t o0, uint32_t n, uint8_t *dst);

/* MLX's affine quantizer on rows x [n][in]: codes into w (n rows of in*bits/32 words, zeroed
 * here), scales and biases of type stype ([n][in/group]). 0, or -1 on bad arguments. */
int qtk_mlx_quantize(const float *x, uint32_t n, uint32_t in, uint32_t group, unsigned bits, unsigned stype,
		     uint32_t *w, void *scales, void *biases);

/* config.json as mlx-lm's convert writes it: the source config text (src, n bytes; NULL: none)
 * with "quantization" and "quantization_config" set to {group_size, bits, mode "affine"},
 * "_name_or_path" dropped, top-level keys sorted, Python's json.dumps(indent=4) formatting and
 * no final newline. A new string (qtk_free) in *out; -1 when src is no JSON object or out of
 * memory. */
int qtk_mlx_config_text(const char *src, size_t n, unsigned bits, uint32_t group, char **out, size_t *outlen);

#endif
