/* mlx.c - MLX affine quantization as mlx-lm saves it: per module <m>.weight U32 holds each
 * row's b-bit codes as one little-endian bit stream (element i at bits [i*b, (i+1)*b); 3-, 5-
 * and 6-bit codes cross word boundaries), <m>.scales and <m>.biases one value per row and
 * group of `group` inputs, in the model's float type. A value is q * scale + bias.
 *
 *   weight  U32          [out, in * bits / 32]
 *   scales  F16/BF16/F32 [out, in / group]
 *   biases  as scales    [out, in / group]
 *
 * Bits 2, 3, 4, 5, 6, 8; groups of 32, 64 or 128 (MLX's kernels refuse others). */
#include "scheme.h"
#include "mlx.h"
#include "dequant.h"
#include "fold.h"
#include "internal.h"
#include "json.h"
#include "packing.h"
#include "qgroups.h"
#include <math.h>
#include <string.h>

static void sh_weight(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->out, s[1] = d->in * d->bits / 32; }
static void sh_scales(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->out, s[1] = d->ngroups; }

static const qtk_scheme_part parts[] = {
	{"weight", QTK_DT_U32, 2, false, false, sh_weight},
	{"scales", QTK_T_F16, 2, false, false, sh_scales},
	{"biases", QTK_T_F16, 2, false, false, sh_scales},
};

bool qtk_mlx_group_ok(uint64_t group) { return group == 32 || group == 64 || group == 128; }

static bool float_type(unsigned t) { return t == QTK_T_F16 || t == QTK_T_BF16 || t == QTK_T_F32; }

/* scales may be any of MLX's float types, biases the same as scales */
static unsigned part_type(const qtk_tensor *t, int k)
{
	if (k == 0)
		return QTK_DT_U32;
	unsigned st = t->nparts > 1 ? t->parts[1].type : QTK_T_F16;
	return float_type(st) ? st : QTK_T_F16;
}

static int check_layout(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->act_order || l->gptq_version)
		return qtk_why(why, wn, "mlx layout with act_order or gptq_version set");
	if (!qtk_mlx_group_ok(l->group_size))
		return qtk_why(why, wn, "group_size %u: mlx groups are 32, 64 or 128", l->group_size);
	return 0;
}

static int infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		 char *why, size_t wn)
{
	(void)present;
	*bad = 0;
	if (p[0].type != QTK_DT_U32 || p[0].ndim != 2)
		return qtk_why(why, wn, "packed mlx weight must be a 2-D U32 tensor");
	if (!bits || p[0].shape[1] > (1ull << 35) || (p[0].shape[1] * 32) % bits)
		return qtk_why(why, wn, "weight has %llu words per row, not a whole number of %u-bit codes",
			       (unsigned long long)p[0].shape[1], bits);
	*out = p[0].shape[0];
	*in = p[0].shape[1] * 32 / bits;
	return 0;
}

static float rd_float(const void *p, unsigned type, uint64_t i)
{
	const uint8_t *b = (const uint8_t *)p;
	if (type == QTK_T_F32) {
		float f;
		memcpy(&f, b + 4 * i, 4);
		return f;
	}
	uint16_t h = qtk_rd16(b + 2 * i);
	return type == QTK_T_BF16 ? qtk_bf16_to_f32(h) : qtk_fp16_to_f32(h);
}

static void wr_float(void *p, unsigned type, uint64_t i, float f)
{
	uint8_t *b = (uint8_t *)p;
	if (type == QTK_T_F32)
		memcpy(b + 4 * i, &f, 4);
	else
		qtk_wr16(b + 2 * i, type == QTK_T_BF16 ? qtk_f32_to_bf16(f) : qtk_f32_to_fp16(f));
}

static float round_half(float f) { return qtk_fp16_to_f32(qtk_f32_to_fp16(f)); }

int qtk_mlx_decode(const uint32_t *w, const void *scales, const void *biases, unsigned stype, uint32_t out,
		   uint32_t in, uint32_t group, unsigned bits, bool half_math, uint32_t o0, uint32_t n, float *dst)
{
	if (!w || !scales || !biases || !dst || !float_type(stype) || bits < 2 || bits > 8 || bits == 7 ||
	    !qtk_mlx_group_ok(group) || in % group || o0 > out || n > out - o0)
		return -1;
	uint64_t words = (uint64_t)in * bits / 32, ng = in / group;
	half_math = half_math && stype == QTK_T_F16;
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		const uint32_t *row = w + o * words;
		float *y = dst + r * in;
		for (uint64_t k = 0; k < ng; k++) {
			float s = rd_float(scales, stype, o * ng + k), b = rd_float(biases, stype, o * ng + k);
			for (uint64_t j = k * group; j < (k + 1) * group; j++) {
				float q = (float)qtk_bits_get(row, 1, j * bits, bits);
				if (half_math) {
					float p = round_half(q * s);
					y[j] = round_half(p + b);
				} else {
					float p = q * s; /* two roundings, no fused multiply-add */
					y[j] = p + b;
				}
			}
		}
	}
	return 0;
}

/* MLX's CPU quantizer, per group in float32: the step spans min..max, the edge of larger
 * magnitude is made an exact multiple of the step (so it decodes to itself) and becomes the
 * bias; codes are rounded to nearest even and clipped; scale and bias are rounded to the
 * storage type afterwards. */
int qtk_mlx_quantize(const float *x, uint32_t n, uint32_t in, uint32_t group, unsigned bits, unsigned stype,
		     uint32_t *w, void *scales, void *biases)
{
	if (!x || !w || !scales || !biases || !float_type(stype) || bits < 2 || bits > 8 || bits == 7 ||
	    !qtk_mlx_group_ok(group) || in % group)
		return -1;
	uint64_t words = (uint64_t)in * bits / 32, ng = in / group;
	float nbins = (float)((1u << bits) - 1u), eps = 1e-7f;
	memset(w, 0, (size_t)(n * words * 4));
	for (uint64_t r = 0; r < n; r++) {
		const float *xr = x + r * in;
		uint32_t *row = w + r * words;
		for (uint64_t k = 0; k < ng; k++) {
			const float *g = xr + k * group;
			float lo = INFINITY, hi = -INFINITY;
			for (uint32_t j = 0; j < group; j++) {
				hi = fmaxf(hi, g[j]);
				lo = fminf(lo, g[j]);
			}
			bool neg = fabsf(lo) > fabsf(hi);
			float scale = fmaxf((hi - lo) / nbins, eps);
			scale = neg ? scale : -scale;
			float edge = neg ? lo : hi, q0 = rintf(edge / scale), bias = 0;
			if (q0 != 0) {
				scale = edge / q0;
				bias = edge;
			}
			for (uint32_t j = 0; j < group; j++) {
				float q = rintf((g[j] - bias) / scale);
				q = fminf(fmaxf(q, 0.0f), nbins);
				qtk_bits_put(row, 1, (k * group + j) * bits, bits, (unsigned)q);
			}
			wr_float(scales, stype, r * ng + k, scale);
			wr_float(biases, stype, r * ng + k, bias);
		}
	}
	return 0;
}

static int decode_rows(const qtk_tensor *t, const void *const *p, uint64_t o0, uint64_t n, float *dst)
{
	return qtk_mlx_decode((const uint32_t *)p[0], p[1], p[2], t->parts[1].type, (uint32_t)t->shape[0],
			      (uint32_t)t->shape[1], t->layout.group_size, t->layout.bits, false, (uint32_t)o0,
			      (uint32_t)n, dst);
}

static int encode_rows(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *pp)
{
	uint64_t in = t->shape[1], words = in * t->layout.bits / 32, ng = in / t->layout.group_size;
	size_t ssz = t->parts[1].type == QTK_T_F32 ? 4 : 2;
	return qtk_mlx_quantize(x, (uint32_t)n, (uint32_t)in, t->layout.group_size, t->layout.bits, t->parts[1].type,
				(uint32_t *)pp[0] + o0 * words, (uint8_t *)pp[1] + o0 * ng * ssz,
				(uint8_t *)pp[2] + o0 * ng * ssz);
}

/* fp16 bits of v when it is exactly an fp16 value, else -1. */
static int32_t as_half(float v)
{
	uint16_t h = qtk_f32_to_fp16(v);
	float b = qtk_fp16_to_f32(h);
	return b == v && signbit(b) == signbit(v) ? (int32_t)h : -1;
}

/* The codes as integer groups with z = 0 and the bias in g->m: q4_1 holds them as they are
 * (d = scale, m = bias) and decodes f32(q * d) + m, the same arithmetic as decode_rows. A group
 * whose scale or bias is no fp16 value (BF16 or F32 scales) gets z = 1, which no transcode
 * accepts. */
static int to_groups(const qtk_tensor *t, const void *const *p, qgroups *g)
{
	uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1], group = t->layout.group_size;
	unsigned bits = t->layout.bits, st = t->parts[1].type;
	uint32_t ng = in / group;
	uint64_t words = (uint64_t)in * bits / 32;
	if (qg_alloc(g, out, in, group, ng, bits))
		return -1;
	g->m = qtk_malloc((size_t)out * ng * sizeof *g->m);
	if (!g->m) {
		qg_free(g);
		return -1;
	}
	for (uint32_t o = 0; o < out; o++) {
		const uint32_t *row = (const uint32_t *)p[0] + o * words;
		for (uint32_t i = 0; i < in; i++)
			g->q[(uint64_t)o * in + i] = (uint8_t)qtk_bits_get(row, 1, (uint64_t)i * bits, bits);
		for (uint32_t k = 0; k < ng; k++) {
			uint64_t at = (uint64_t)o * ng + k;
			int32_t sh = as_half(rd_float(p[1], st, at)), bh = as_half(rd_float(p[2], st, at));
			g->z[at] = (int16_t)(sh < 0 || bh < 0 ? 1 : 0);
			g->s[at] = (uint16_t)(sh < 0 ? 0 : sh);
			g->m[at] = (uint16_t)(bh < 0 ? 0 : bh);
		}
	}
	return 0;
}

/* MLX 2-, 3- and 4-bit codes fit q4_1's nibbles; 8-bit codes fit q8_0 where every bias is
 * -z * scale for an integer z (checked per block by the transcode). */
static const qtk_scheme_transcode transcodes[] = {
	{QTK_LAYOUT_PLAIN, QTK_T_Q4_1, 1u << 2 | 1u << 3 | 1u << 4, false, 32},
	{QTK_LAYOUT_PLAIN, QTK_T_Q8_0, 1u << 5 | 1u << 6 | 1u << 8, false, 32},
};

/* mlx-lm's "quantization" object: group_size, bits, mode (affine only). */
static void config_read(const cJSON *o, qtk_qcfg *q)
{
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");
	q->sym = false;
	if (mode && (!cJSON_IsString(mode) || strcmp(mode->valuestring, "affine") != 0))
		snprintf(q->bad, sizeof q->bad, "unsupported mlx quantization mode '%.40s' (only affine)",
			 cJSON_IsString(mode) ? mode->valuestring : "?");
	else if (q->group != -1 && !qtk_mlx_group_ok((uint64_t)q->group))
		snprintf(q->bad, sizeof q->bad, "mlx group_size %lld is not 32, 64 or 128", (long long)q->group);
}

static bool config_write(const qtk_qcfg *q, cJSON *o)
{
	(void)q;
	return cJSON_AddStringToObject(o, "mode", "affine") != NULL;
}

const qtk_scheme qtk_scheme_mlx = {
	.name = "mlx",
	.title = "mlx affine",
	.quant_method = "mlx",
	.kind = QTK_LAYOUT_MLX,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_INT,
	.bits_mask = 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 6 | 1u << 8,
	.has_version = false,
	.row_align = 1,
	.nparts = (int)(sizeof parts / sizeof *parts),
	.parts = parts,
	.part_type = part_type,
	.check_layout = check_layout,
	.infer = infer,
	.decode_rows = decode_rows,
	.encode_rows = encode_rows,
	.to_groups = to_groups,
	.from_groups = NULL,
	.transcodes = transcodes,
	.ntranscodes = (int)(sizeof transcodes / sizeof *transcodes),
	.config_read = config_read,
	.config_write = config_write,
};
