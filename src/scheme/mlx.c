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
#include <stdlib.h>
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
	if (l->act_order || l->gptq_version || l->sym)
		return qtk_why(why, wn, "mlx layout with act_order, sym or gptq_version set");
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

int qtk_mlx_subblocks(const uint32_t *w, const void *scales, const void *biases, unsigned stype, uint32_t out,
		      uint32_t in, uint32_t group, unsigned bits, uint32_t o0, uint32_t n, uint8_t *dst)
{
	if (!w || !scales || !biases || !dst || !float_type(stype) || bits < 2 || bits > 6 || !qtk_mlx_group_ok(group) ||
	    group % 32 || in % group || o0 > out || n > out - o0)
		return -1;
	const uint64_t words = (uint64_t)in * bits / 32, ng = in / group;
	for (uint64_t r = 0; r < n; r++) {
		const uint64_t o = o0 + r;
		const uint32_t *row = w + o * words;
		uint8_t *d = dst + r * (in / 32) * 40;
		for (uint64_t k = 0; k < ng; k++) {
			const float s = rd_float(scales, stype, o * ng + k), b = rd_float(biases, stype, o * ng + k);
			uint32_t sb, bb;
			memcpy(&sb, &s, 4);
			memcpy(&bb, &b, 4);
			for (uint64_t u = 0; u < group / 32; u++, d += 40) {
				qtk_wr32(d, sb);
				qtk_wr32(d + 4, bb ^ 0x80000000u); /* M = -bias: MLX adds it */
				const uint64_t p0 = (k * group + u * 32) * bits;
				if (bits == 4) {
					for (unsigned j = 0; j < 4; j++)
						for (unsigned i = 0; i < 8; i++)
							d[8 + 8 * j + i] = (uint8_t)((row[p0 / 32 + j] >> (4 * i)) & 15u);
				} else {
					for (unsigned j = 0; j < 32; j++)
						d[8 + j] = (uint8_t)qtk_bits_get(row, 1, p0 + (uint64_t)j * bits, bits);
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

/* Integer groups into MLX parts: each MLX group must lie where the source has one scale and
 * one bias (contiguous groups; an MLX group may span several source groups that agree); the
 * scale is the source's fp16 scale, the bias its fp16 bias (g->m, z = 0) or -z * scale, which
 * must be an fp16 value (-8d for q4_0 and -128d for q8_0 always are). Codes must fit the
 * target's bits. -1 when any of that fails: the converter then re-fits. */
static int from_groups(const qgroups *g, const qtk_tensor *o, bool wrap, void *const *pp)
{
	(void)wrap;
	uint32_t out = (uint32_t)o->shape[0], in = (uint32_t)o->shape[1], group = o->layout.group_size;
	unsigned bits = o->layout.bits, st = o->parts[1].type;
	if (g->out != out || g->in != in || !group || in % group || !float_type(st) || o->nparts < 3)
		return -1;
	uint32_t ng = in / group, top = (1u << bits) - 1u;
	uint64_t words = (uint64_t)in * bits / 32;
	memset(pp[0], 0, (size_t)(out * words * 4));
	for (uint32_t r = 0; r < out; r++) {
		uint32_t *row = (uint32_t *)pp[0] + r * words;
		for (uint32_t k = 0; k < ng; k++) {
			uint32_t i0 = k * group, g0 = qg_group_of(g, i0);
			uint64_t a0 = (uint64_t)r * g->ngroups + g0;
			for (uint32_t i = i0; i < i0 + group; i++) {
				uint32_t gi = qg_group_of(g, i);
				uint64_t a = (uint64_t)r * g->ngroups + gi;
				if (gi >= g->ngroups || g->s[a] != g->s[a0] || g->z[a] != g->z[a0] ||
				    (g->m && g->m[a] != g->m[a0]))
					return -1;
				uint8_t q = g->q[(uint64_t)r * in + i];
				if (q > top)
					return -1;
				qtk_bits_put(row, 1, (uint64_t)i * bits, bits, q);
			}
			float s = qtk_fp16_to_f32(g->s[a0]), b;
			if (g->m) {
				if (g->z[a0] != 0)
					return -1;
				b = qtk_fp16_to_f32(g->m[a0]);
			} else {
				b = -(float)g->z[a0] * s;
				if (as_half(b) < 0)
					return -1;
			}
			wr_float(pp[1], st, (uint64_t)r * ng + k, s);
			wr_float(pp[2], st, (uint64_t)r * ng + k, b);
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
	.parts_by_row = true,
	.nparts = (int)(sizeof parts / sizeof *parts),
	.parts = parts,
	.part_type = part_type,
	.check_layout = check_layout,
	.infer = infer,
	.decode_rows = decode_rows,
	.encode_rows = encode_rows,
	.to_groups = to_groups,
	.from_groups = from_groups,
	.transcodes = transcodes,
	.ntranscodes = (int)(sizeof transcodes / sizeof *transcodes),
	.config_read = config_read,
	.config_write = config_write,
	.config_hint = "\"quantization\": {\"group_size\": G, \"bits\": B, \"mode\": \"affine\"}",
};

/* ---- config.json as mlx-lm writes it ------------------------------------------------------
 * mlx-lm loads the source config with Python's json, adds "quantization" and the same object as
 * "quantization_config", drops "_name_or_path", sorts the top-level keys and dumps with indent
 * 4: nested objects keep their order, strings are ASCII (\uXXXX escapes), numbers are Python's
 * (integers as written, floats in repr's shortest round-trip form: 10000.0, 1e-05). The source
 * text is walked directly (it has passed the strict parser) so integers and floats stay apart. */

typedef struct pyj {
	const char *s;
	size_t n, i;
	qtk_buf *b;
} pyj;

static void pj_ws(pyj *p)
{
	while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
		p->i++;
}

static void pj_indent(qtk_buf *b, int depth)
{
	qtk_buf_putc(b, '\n');
	for (int k = 0; k < depth * 4; k++)
		qtk_buf_putc(b, ' ');
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int pj_u4(pyj *p, uint32_t *u)
{
	if (p->i + 4 > p->n)
		return -1;
	*u = 0;
	for (int k = 0; k < 4; k++) {
		int h = hexval(p->s[p->i++]);
		if (h < 0)
			return -1;
		*u = *u << 4 | (uint32_t)h;
	}
	return 0;
}

static void put_u16(qtk_buf *b, uint32_t u) { qtk_buf_printf(b, "\\u%04x", (unsigned)u); }

static void put_cp(qtk_buf *b, uint32_t c)
{
	switch (c) {
	case '"': qtk_buf_puts(b, "\\\""); return;
	case '\\': qtk_buf_puts(b, "\\\\"); return;
	case '\n': qtk_buf_puts(b, "\\n"); return;
	case '\r': qtk_buf_puts(b, "\\r"); return;
	case '\t': qtk_buf_puts(b, "\\t"); return;
	case '\b': qtk_buf_puts(b, "\\b"); return;
	case '\f': qtk_buf_puts(b, "\\f"); return;
	default: break;
	}
	if (c >= 0x20 && c < 0x7f)
		qtk_buf_putc(b, (char)c);
	else if (c < 0x10000)
		put_u16(b, c);
	else {
		c -= 0x10000;
		put_u16(b, 0xd800 + (c >> 10));
		put_u16(b, 0xdc00 + (c & 0x3ff));
	}
}

/* A string token at p->i, decoded and re-escaped as Python's json.dumps (ensure_ascii). */
static int pj_string(pyj *p, qtk_buf *b)
{
	if (p->i >= p->n || p->s[p->i] != '"')
		return -1;
	p->i++;
	qtk_buf_putc(b, '"');
	while (p->i < p->n && p->s[p->i] != '"') {
		unsigned char c = (unsigned char)p->s[p->i];
		uint32_t cp;
		if (c == '\\') {
			if (++p->i >= p->n)
				return -1;
			char e = p->s[p->i++];
			switch (e) {
			case '"': cp = '"'; break;
			case '\\': cp = '\\'; break;
			case '/': cp = '/'; break;
			case 'b': cp = '\b'; break;
			case 'f': cp = '\f'; break;
			case 'n': cp = '\n'; break;
			case 'r': cp = '\r'; break;
			case 't': cp = '\t'; break;
			case 'u':
				if (pj_u4(p, &cp))
					return -1;
				if (cp >= 0xd800 && cp < 0xdc00 && p->i + 6 <= p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
					uint32_t lo;
					size_t save = p->i;
					p->i += 2;
					if (!pj_u4(p, &lo) && lo >= 0xdc00 && lo < 0xe000)
						cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					else
						p->i = save;
				}
				break;
			default: return -1;
			}
		} else if (c < 0x80) {
			cp = c;
			p->i++;
		} else { /* valid UTF-8 (the strict parser checked it) */
			int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
			if (p->i + (size_t)len > p->n)
				return -1;
			cp = c & (len == 4 ? 0x07u : len == 3 ? 0x0fu : 0x1fu);
			for (int k = 1; k < len; k++)
				cp = cp << 6 | ((unsigned char)p->s[p->i + (size_t)k] & 0x3fu);
			p->i += (size_t)len;
		}
		put_cp(b, cp);
	}
	if (p->i >= p->n)
		return -1;
	p->i++;
	qtk_buf_putc(b, '"');
	return 0;
}

/* Python's repr of a float: the shortest digits that read back, fixed notation for
 * -4 < decimal point position <= 16, else d.ddde+XX. */
static void py_float(qtk_buf *b, double v)
{
	char e[40];
	int prec = 1;
	for (; prec <= 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	char digits[24];
	size_t nd = 0;
	const char *c = e;
	if (*c == '-') {
		qtk_buf_putc(b, '-');
		c++;
	}
	for (; *c && *c != 'e'; c++)
		if (*c >= '0' && *c <= '9' && nd < sizeof digits - 1)
			digits[nd++] = *c;
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = 0;
	int exp10 = *c == 'e' ? atoi(c + 1) : 0, decpt = exp10 + 1;
	if (v == 0)
		decpt = 1;
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) {
			qtk_buf_puts(b, "0.");
			for (int k = 0; k < -decpt; k++)
				qtk_buf_putc(b, '0');
			qtk_buf_puts(b, digits);
		} else if ((size_t)decpt >= nd) {
			qtk_buf_puts(b, digits);
			for (size_t k = nd; k < (size_t)decpt; k++)
				qtk_buf_putc(b, '0');
			qtk_buf_puts(b, ".0");
		} else {
			qtk_buf_put(b, digits, (size_t)decpt);
			qtk_buf_putc(b, '.');
			qtk_buf_puts(b, digits + decpt);
		}
	} else {
		qtk_buf_putc(b, digits[0]);
		if (nd > 1) {
			qtk_buf_putc(b, '.');
			qtk_buf_puts(b, digits + 1);
		}
		qtk_buf_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
	}
}

static int pj_value(pyj *p, int depth);

static int pj_container(pyj *p, int depth, char open, char close)
{
	p->i++;
	pj_ws(p);
	qtk_buf_putc(p->b, open);
	if (p->i < p->n && p->s[p->i] == close) {
		p->i++;
		qtk_buf_putc(p->b, close);
		return 0;
	}
	for (;;) {
		pj_indent(p->b, depth + 1);
		pj_ws(p);
		if (open == '{') {
			if (pj_string(p, p->b))
				return -1;
			pj_ws(p);
			if (p->i >= p->n || p->s[p->i++] != ':')
				return -1;
			qtk_buf_puts(p->b, ": ");
		}
		if (pj_value(p, depth + 1))
			return -1;
		pj_ws(p);
		if (p->i < p->n && p->s[p->i] == ',') {
			p->i++;
			qtk_buf_putc(p->b, ',');
			continue;
		}
		if (p->i < p->n && p->s[p->i] == close) {
			p->i++;
			pj_indent(p->b, depth);
			qtk_buf_putc(p->b, close);
			return 0;
		}
		return -1;
	}
}

static int pj_value(pyj *p, int depth)
{
	pj_ws(p);
	if (p->i >= p->n || depth > 64)
		return -1;
	char c = p->s[p->i];
	if (c == '{')
		return pj_container(p, depth, '{', '}');
	if (c == '[')
		return pj_container(p, depth, '[', ']');
	if (c == '"')
		return pj_string(p, p->b);
	static const char *const words[] = {"true", "false", "null"};
	for (size_t k = 0; k < 3; k++) {
		size_t l = strlen(words[k]);
		if (p->n - p->i >= l && !memcmp(p->s + p->i, words[k], l)) {
			p->i += l;
			qtk_buf_puts(p->b, words[k]);
			return 0;
		}
	}
	size_t st = p->i;
	bool isfloat = false;
	while (p->i < p->n && strchr("+-0123456789.eE", p->s[p->i])) {
		isfloat |= p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E';
		p->i++;
	}
	size_t len = p->i - st;
	if (!len || len > 400)
		return -1;
	char num[401];
	memcpy(num, p->s + st, len);
	num[len] = 0;
	if (isfloat)
		py_float(p->b, strtod(num, NULL));
	else
		qtk_buf_puts(p->b, strcmp(num, "-0") == 0 ? "0" : num);
	return 0;
}

typedef struct pj_member {
	char *key;       /* the key as Python prints it, quotes included */
	size_t v0, v1;   /* the value's span in the source text */
} pj_member;

static int cmp_member(const void *a, const void *b)
{
	return strcmp(((const pj_member *)a)->key, ((const pj_member *)b)->key);
}

static void quant_object(qtk_buf *b, int depth, unsigned bits, uint32_t group)
{
	qtk_buf_putc(b, '{');
	pj_indent(b, depth + 1);
	qtk_buf_printf(b, "\"group_size\": %u,", group);
	pj_indent(b, depth + 1);
	qtk_buf_printf(b, "\"bits\": %u,", bits);
	pj_indent(b, depth + 1);
	qtk_buf_puts(b, "\"mode\": \"affine\"");
	pj_indent(b, depth);
	qtk_buf_putc(b, '}');
}

int qtk_mlx_config_text(const char *src, size_t n, unsigned bits, uint32_t group, char **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	qtk_buf b = {0}, keys = {0};
	pyj p = {src ? src : "{}", src ? n : 2, 0, &keys};
	pj_member *m = NULL;
	size_t nm = 0, cap = 0;
	int rc = -1;
	pj_ws(&p);
	if (p.i >= p.n || p.s[p.i++] != '{')
		goto out;
	pj_ws(&p);
	bool empty = p.i < p.n && p.s[p.i] == '}';
	while (!empty) {
		pj_ws(&p);
		keys.len = 0;
		keys.failed = false;
		if (pj_string(&p, &keys))
			goto out;
		pj_ws(&p);
		if (p.i >= p.n || p.s[p.i++] != ':')
			goto out;
		pj_ws(&p);
		size_t v0 = p.i;
		qtk_buf junk = {0};
		p.b = &junk;
		int vr = pj_value(&p, 1);
		qtk_buf_free(&junk);
		p.b = &keys;
		if (vr || keys.failed)
			goto out;
		if (nm + 2 >= cap) {
			size_t nc = cap ? cap * 2 : 32;
			pj_member *g = qtk_realloc(m, nc * sizeof *m);
			if (!g)
				goto out;
			m = g;
			cap = nc;
		}
		char *k = qtk_strndup((const char *)keys.p, keys.len);
		if (!k)
			goto out;
		if (!strcmp(k, "\"_name_or_path\"") || !strcmp(k, "\"quantization\"") || !strcmp(k, "\"quantization_config\""))
			qtk_free(k);
		else
			m[nm++] = (pj_member){k, v0, p.i};
		pj_ws(&p);
		if (p.i < p.n && p.s[p.i] == ',') {
			p.i++;
			continue;
		}
		if (p.i < p.n && p.s[p.i] == '}')
			break;
		goto out;
	}
	if (nm + 2 > cap) {
		pj_member *g = qtk_realloc(m, (nm + 2) * sizeof *m);
		if (!g)
			goto out;
		m = g;
	}
	m[nm].key = qtk_strdup("\"quantization\"");
	m[nm + 1].key = qtk_strdup("\"quantization_config\"");
	m[nm].v0 = m[nm].v1 = m[nm + 1].v0 = m[nm + 1].v1 = 0;
	nm += 2;
	if (!m[nm - 1].key || !m[nm - 2].key)
		goto out;
	qsort(m, nm, sizeof *m, cmp_member);
	qtk_buf_putc(&b, '{');
	for (size_t k = 0; k < nm; k++) {
		pj_indent(&b, 1);
		qtk_buf_puts(&b, m[k].key);
		qtk_buf_puts(&b, ": ");
		if (m[k].v1 == 0) {
			quant_object(&b, 1, bits, group);
		} else {
			pyj v = {p.s, m[k].v1, m[k].v0, &b};
			if (pj_value(&v, 1))
				goto out;
		}
		if (k + 1 < nm)
			qtk_buf_putc(&b, ',');
	}
	pj_indent(&b, 0);
	qtk_buf_putc(&b, '}');
	if (b.failed)
		goto out;
	*out = (char *)b.p;
	*outlen = b.len;
	b.p = NULL;
	rc = 0;
out:
	for (size_t k = 0; k < nm; k++)
		qtk_free(m[k].key);
	qtk_free(m);
	qtk_buf_free(&b);
	qtk_buf_free(&keys);
	return rc;
}
