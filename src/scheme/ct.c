/* ct.c - compressed-tensors (llm-compressor's checkpoints, quant_method "compressed-tensors"):
 * three packed schemes and the config that says which module uses which.
 *
 * ct-int (QTK_LAYOUT_CT_INT), integer codes, value (q - zp) * f32(scale):
 *   pack-quantized (layout.type I32): b-bit codes (b = 2, 4, 8) stored as q + 2^(b-1), 32/b per
 *     int32 along the inputs, element i at bits b*(i % (32/b)) of word i / (32/b);
 *       packed  I32 [out, in*b/32]      <prefix>.weight_packed
 *       scale   F16|BF16|F32 [out, in/g] (per group; a channel is one group) or [1] (per tensor)
 *       zero    I32 [ceil(out/(32/b)), in/g]  asymmetric only, zp + 2^(b-1) packed along the
 *               outputs (row r at bits b*(r % (32/b)) of word r / (32/b))
 *       g_idx   I32 [in]  optional (actorder "group"): the group of every input
 *       shape   I64 [2] = [out, in]   <prefix>.weight_shape
 *   int-quantized / naive-quantized (layout.type I8): weight I8 [out, in] and the scale, 8-bit
 *     symmetric.
 * fp8 (QTK_LAYOUT_FP8): weight F8_E4M3 [out, in] times f32(scale), scale [1], [out, 1] or per
 *   group [out, in/g], or per block [ceil(out/g), in/g] (square g x g tiles).
 * nvfp4 (QTK_LAYOUT_NVFP4), nvfp4-pack-quantized: packed U8 [out, in/2], two E2M1 codes per
 *   byte (even element in the low nibble, bit 3 the sign, code 8 is -0), scale F8_E4M3
 *   [out, in/16], gscale F32 [1] (weight_global_scale); value e2m1 * fl32(f32(scale) / gscale).
 *
 * Activation quantization (input_scale, input_global_scale ...) is metadata: those tensors stay
 * plain. */
#include "scheme.h"
#include "dequant.h"
#include "fold.h"
#include "internal.h"
#include "json.h"
#include "qgroups.h"
#include <math.h>
#include <fnmatch.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ---- element decoders ------------------------------------------------------------------ */

/* FP8 E4M3 (fn: no infinities, S.1111.111 is NaN), exactly. */
static float e4m3(uint8_t x)
{
	int ex = (x >> 3) & 0xF, man = x & 7;
	float v;
	if (ex == 0xF && man == 7)
		v = __builtin_nanf("");
	else if (ex == 0)
		v = (float)man * 0x1p-9f;
	else
		v = (1.0f + (float)man * 0.125f) * (float)(1u << ex) * 0x1p-7f;
	return x & 0x80 ? -v : v;
}

static const float e2m1_val[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
				   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static float f32_at(const uint8_t *p)
{
	uint32_t u = qtk_rd32(p);
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Scale k of a scale part of storage type `type`. */
static float scale_at(const void *part, unsigned type, uint64_t k)
{
	const uint8_t *b = part;
	switch (type) {
	case QTK_T_BF16: return qtk_bf16_to_f32(qtk_rd16(b + 2 * k));
	case QTK_T_F32: return f32_at(b + 4 * k);
	case QTK_DT_F8_E4M3: return e4m3(b[k]);
	default: return qtk_fp16_to_f32(qtk_rd16(b + 2 * k));
	}
}

static unsigned scale_type(const qtk_layout *l) { return l->scale_type; }

static bool scale_type_ok(unsigned t) { return t == QTK_T_F16 || t == QTK_T_BF16 || t == QTK_T_F32; }

static void set_part(qtk_part *p, const char *role, unsigned type, int ndim, uint64_t a, uint64_t b)
{
	memset(p, 0, sizeof *p);
	snprintf(p->role, sizeof p->role, "%s", role);
	p->type = type;
	p->ndim = ndim;
	p->shape[0] = a;
	p->shape[1] = ndim > 1 ? b : 0;
}

/* The scale part of a layout with per-tensor, per-group or per-block scales. */
static void scale_part(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part *p)
{
	unsigned st = scale_type(l);
	if (l->strategy == QTK_SCHEME_PER_TENSOR)
		set_part(p, "scale", st, 1, 1, 0);
	else if (l->strategy == QTK_SCHEME_PER_BLOCK)
		set_part(p, "scale", st, 2, (d->out + d->group - 1) / d->group, d->ngroups);
	else
		set_part(p, "scale", st, 2, d->out, d->ngroups);
}

/* Index of the scale of output o and group g. */
static uint64_t scale_index(const qtk_tensor *t, uint64_t o, uint64_t g)
{
	const qtk_layout *l = &t->layout;
	uint64_t ng = t->shape[1] / l->group_size;
	if (l->strategy == QTK_SCHEME_PER_TENSOR)
		return 0;
	if (l->strategy == QTK_SCHEME_PER_BLOCK)
		return o / l->group_size * ng + g;
	return o * ng + g;
}

static int part_of(const qtk_tensor *t, const char *role)
{
	for (int k = 0; k < t->nparts; k++)
		if (!strncmp(t->parts[k].role, role, sizeof t->parts[k].role))
			return k;
	return -1;
}

/* ---- ct-int ------------------------------------------------------------------------------ */

static bool ct_packed(const qtk_layout *l) { return l->type == QTK_T_I32; }

static int ct_int_specs(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS],
			bool opt[QTK_MAX_PARTS])
{
	(void)opt;
	int n = 0;
	uint64_t pf = d->bits ? 32 / d->bits : 1;
	if (ct_packed(l))
		set_part(&p[n++], "packed", QTK_T_I32, 2, d->out, d->in * d->bits / 32);
	else
		set_part(&p[n++], "weight", QTK_T_I8, 2, d->out, d->in);
	scale_part(l, d, &p[n++]);
	if (!l->sym)
		set_part(&p[n++], "zero", QTK_T_I32, 2, (d->out + pf - 1) / pf, d->ngroups);
	if (l->act_order) /* an identity weight_g_idx is not kept (the reader checks it) */
		set_part(&p[n++], "g_idx", QTK_T_I32, 1, d->in, 0);
	if (ct_packed(l))
		set_part(&p[n++], "shape", QTK_T_I64, 1, 2, 0);
	return n;
}

static int ct_int_check(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->gptq_version)
		return qtk_why(why, wn, "ct-int layout with gptq_version set");
	if (l->type != QTK_T_I32 && l->type != QTK_T_I8)
		return qtk_why(why, wn, "ct-int storage type %u is neither I32 (pack-quantized) nor I8", l->type);
	if (!scale_type_ok(scale_type(l)))
		return qtk_why(why, wn, "ct-int scales must be F16, BF16 or F32");
	if (l->strategy != QTK_SCHEME_PER_TENSOR && l->strategy != QTK_SCHEME_PER_GROUP)
		return qtk_why(why, wn, "ct-int strategy %u is not tensor, channel or group", l->strategy);
	if (l->strategy == QTK_SCHEME_PER_TENSOR && (l->group_size != t->shape[1] || !l->sym || l->act_order))
		return qtk_why(why, wn, "per-tensor ct-int layout must be one symmetric group");
	if (!ct_packed(l) && (l->bits != 8 || !l->sym))
		return qtk_why(why, wn, "int-quantized weights are 8-bit symmetric");
	if (ct_packed(l) && (t->shape[1] * l->bits) % 32)
		return qtk_why(why, wn, "in_features %llu do not pack into 32-bit words at %u bits",
			       (unsigned long long)t->shape[1], l->bits);
	return 0;
}

static int no_infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		    char *why, size_t wn)
{
	(void)p, (void)present, (void)bits, (void)out, (void)in;
	*bad = 0;
	return qtk_why(why, wn, "compressed-tensors layers are read through their config (ct.c)");
}

/* Integer code and zero point of element (o, i) through q - zp. */
static int ct_int_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	const qtk_layout *l = &t->layout;
	uint64_t in = t->shape[1], ng = in / l->group_size, bits = l->bits, pf = 32 / bits, wpr = in / pf;
	uint32_t mask = (1u << bits) - 1u;
	int half = 1 << (bits - 1);
	int kz = part_of(t, "zero"), kg = part_of(t, "g_idx");
	const uint8_t *codes = pp[0], *zero = kz >= 0 ? pp[kz] : NULL, *gi = kg >= 0 ? pp[kg] : NULL;
	unsigned st = scale_type(l);
	if (!l->sym && !zero)
		return -1;
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t i = 0; i < in; i++) {
			uint64_t g = i / l->group_size;
			if (gi) {
				int32_t v = (int32_t)qtk_rd32(gi + 4 * i);
				if (v < 0 || (uint64_t)v >= ng)
					return -1;
				g = (uint64_t)v;
			}
			int q, zp = 0;
			if (ct_packed(l))
				q = (int)((qtk_rd32(codes + 4 * (o * wpr + i / pf)) >> (bits * (i % pf))) & mask) - half;
			else
				q = (int8_t)codes[o * in + i];
			if (zero)
				zp = (int)((qtk_rd32(zero + 4 * (o / pf * ng + g)) >> (bits * (o % pf))) & mask) - half;
			dst[r * in + i] = (float)(q - zp) * scale_at(pp[1], st, scale_index(t, o, g));
		}
	}
	return 0;
}

/* Integer groups: q the stored unsigned code (q + 2^(b-1)), z the stored zero (2^(b-1) when
 * symmetric): (q - z) * s unchanged. F16 scales only (qgroups holds fp16). */
static int ct_int_to_groups(const qtk_tensor *t, const void *const *pp, qgroups *g)
{
	const qtk_layout *l = &t->layout;
	memset(g, 0, sizeof *g);
	if (scale_type(l) != QTK_T_F16)
		return -1;
	uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1], group = l->group_size, ng = in / group;
	uint32_t bits = l->bits, pf = 32 / bits, wpr = in / pf, mask = (1u << bits) - 1u, half = 1u << (bits - 1);
	int kz = part_of(t, "zero"), kg = part_of(t, "g_idx");
	const uint8_t *codes = pp[0], *zero = kz >= 0 ? pp[kz] : NULL, *gi = kg >= 0 ? pp[kg] : NULL;
	if (qg_alloc(g, out, in, group, ng, bits))
		return -1;
	if (gi) {
		g->g_idx = qtk_malloc((size_t)in * sizeof *g->g_idx);
		if (!g->g_idx) {
			qg_free(g);
			return -1;
		}
		for (uint32_t i = 0; i < in; i++) {
			g->g_idx[i] = (int32_t)qtk_rd32(gi + 4 * (uint64_t)i);
			if (g->g_idx[i] < 0 || (uint32_t)g->g_idx[i] >= ng) {
				qg_free(g);
				return -1;
			}
		}
	}
	for (uint64_t o = 0; o < out; o++) {
		for (uint64_t i = 0; i < in; i++)
			g->q[o * in + i] = ct_packed(l)
						   ? (uint8_t)((qtk_rd32(codes + 4 * (o * wpr + i / pf)) >> (bits * (i % pf))) & mask)
						   : (uint8_t)((int)(int8_t)codes[o * in + i] + 128);
		for (uint64_t k = 0; k < ng; k++) {
			g->z[o * ng + k] = (int16_t)(zero ? (qtk_rd32(zero + 4 * (o / pf * ng + k)) >> (bits * (o % pf))) & mask
							  : half);
			g->s[o * ng + k] = qtk_rd16((const uint8_t *)pp[1] + 2 * scale_index(t, o, k));
		}
	}
	return 0;
}

/* Integer groups into pack-quantized parts: codes and zeros as stored (zeros must fit b bits;
 * a symmetric target needs every zero at 2^(b-1)), fp16 scales, g_idx when act-order. */
static int ct_int_from_groups(const qgroups *g, const qtk_tensor *o, bool wrap, void *const *pp)
{
	(void)wrap;
	const qtk_layout *l = &o->layout;
	if (!ct_packed(l) || g->bits != l->bits || g->out != o->shape[0] || g->in != o->shape[1] ||
	    scale_type(l) != QTK_T_F16 || l->strategy != QTK_SCHEME_PER_GROUP || qg_act_order(g) != l->act_order ||
	    g->ngroups != g->in / l->group_size)
		return -1;
	uint64_t out = g->out, in = g->in, ng = g->ngroups, bits = g->bits, pf = 32 / bits, wpr = in / pf;
	int half = 1 << (bits - 1), kz = part_of(o, "zero"), kg = part_of(o, "g_idx"), ks = part_of(o, "shape");
	for (uint64_t k = 0; k < out * ng; k++)
		if (g->z[k] < 0 || g->z[k] >= 1 << bits || (l->sym && g->z[k] != half))
			return -1;
	uint8_t *pk = pp[0], *sc = pp[1], *zr = kz >= 0 ? pp[kz] : NULL;
	memset(pk, 0, (size_t)(out * wpr * 4));
	if (zr)
		memset(zr, 0, (size_t)((out + pf - 1) / pf * ng * 4));
	for (uint64_t r = 0; r < out; r++) {
		for (uint64_t w = 0; w < wpr; w++) {
			uint32_t word = 0;
			for (uint64_t j = 0; j < pf; j++)
				word |= (uint32_t)g->q[r * in + w * pf + j] << (bits * j);
			qtk_wr32(pk + 4 * (r * wpr + w), word);
		}
		for (uint64_t k = 0; k < ng; k++) {
			qtk_wr16(sc + 2 * (r * ng + k), g->s[r * ng + k]);
			if (zr) {
				uint8_t *zw = zr + 4 * (r / pf * ng + k);
				qtk_wr32(zw, qtk_rd32(zw) | (uint32_t)g->z[r * ng + k] << (bits * (r % pf)));
			}
		}
	}
	if (kg >= 0)
		for (uint64_t i = 0; i < in; i++)
			qtk_wr32((uint8_t *)pp[kg] + 4 * i, (uint32_t)qg_group_of(g, (uint32_t)i));
	if (ks >= 0) {
		qtk_wr64(pp[ks], out);
		qtk_wr64((uint8_t *)pp[ks] + 8, in);
	}
	return 0;
}

/* Round half to even, as torch.round. */
static float rne(float x) { return nearbyintf(x); }

/* F16 rounding of an F32 result: with F16 operands, the correctly rounded F16 operation. */
static float h16(float x) { return qtk_fp16_to_f32(qtk_f32_to_fp16(x)); }

/* compressed-tensors' min-max quantization of rows o0 .. o0+n-1 into pack-quantized parts, in
 * the F16 arithmetic it runs in for an F16 model (every operation rounded to F16): min <= 0 <=
 * max per group; symmetric s = max(|min|, max) / ((2^b - 1) / 2), asymmetric s = (max - min) /
 * (2^b - 1) and zp = clamp(round(-2^(b-1) - min / s)); s at least F16's epsilon;
 * q = clamp(round(w / s + zp)). */
static int ct_int_encode(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *pp)
{
	const qtk_layout *l = &t->layout;
	if (!ct_packed(l) || l->act_order || l->strategy != QTK_SCHEME_PER_GROUP || scale_type(l) != QTK_T_F16)
		return -1;
	uint64_t out = t->shape[0], in = t->shape[1], G = l->group_size, ng = in / G, bits = l->bits, pf = 32 / bits,
		 wpr = in / pf;
	int half = 1 << (bits - 1), qmin = -half, qmax = half - 1;
	float range = (float)((1u << bits) - 1u);
	int kz = part_of(t, "zero"), ks = part_of(t, "shape");
	uint8_t *pk = pp[0], *sc = pp[1], *zr = kz >= 0 ? pp[kz] : NULL;
	if (zr) /* whole zero words: o0 is a multiple of row_align >= 32 / b */
		memset(zr + 4 * (o0 / pf * ng), 0, (size_t)(((o0 + n + pf - 1) / pf - o0 / pf) * ng * 4));
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		const float *row = x + r * in;
		for (uint64_t w = o * wpr; w < (o + 1) * wpr; w++)
			qtk_wr32(pk + 4 * w, 0);
		for (uint64_t k = 0; k < ng; k++) {
			float mn = 0, mx = 0;
			for (uint64_t i = k * G; i < (k + 1) * G; i++) {
				float v = h16(row[i]);
				mn = v < mn ? v : mn;
				mx = v > mx ? v : mx;
			}
			float sf = l->sym ? h16((-mn > mx ? -mn : mx) / (range / 2)) : h16(h16(mx - mn) / range);
			if (sf < 0x1p-10f)
				sf = 0x1p-10f;
			int zp = 0;
			if (!l->sym) {
				float zf = rne(h16((float)qmin - h16(mn / sf)));
				zp = zf < (float)qmin ? qmin : zf > (float)qmax ? qmax : (int)zf;
				uint8_t *zw = zr + 4 * (o / pf * ng + k);
				qtk_wr32(zw, qtk_rd32(zw) | (uint32_t)(zp + half) << (bits * (o % pf)));
			}
			qtk_wr16(sc + 2 * (o * ng + k), qtk_f32_to_fp16(sf));
			for (uint64_t i = k * G; i < (k + 1) * G; i++) {
				float v = h16(h16(row[i]) / sf);
				if (!l->sym)
					v = h16(v + (float)zp);
				v = rne(v);
				int q = v < (float)qmin ? qmin : v > (float)qmax ? qmax : (int)v;
				uint8_t *pw = pk + 4 * (o * wpr + i / pf);
				qtk_wr32(pw, qtk_rd32(pw) | (uint32_t)(q + half) << (bits * (i % pf)));
			}
		}
	}
	if (ks >= 0 && o0 == 0) { /* by the rows from 0 only (one writer; decoding does not read it) */
		qtk_wr64(pp[ks], out);
		qtk_wr64((uint8_t *)pp[ks] + 8, in);
	}
	return 0;
}

/* Checkpoint suffixes of the roles. */
static const char *ct_suffix(const char *role)
{
	static const char *const map[][2] = {{"packed", "weight_packed"}, {"scale", "weight_scale"},
					     {"zero", "weight_zero_point"}, {"g_idx", "weight_g_idx"},
					     {"shape", "weight_shape"}, {"gscale", "weight_global_scale"},
					     {"scale2", "weight_scale_2"}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(role, map[i][0]))
			return map[i][1];
	return role;
}

/* Written configs are made whole by qtk_ct_config_json. */
static bool ct_config_write(const qtk_qcfg *q, cJSON *o)
{
	(void)q, (void)o;
	return true;
}

/* The scheme's quantization config is compressed-tensors' own: read by qtk_ct_fold. */
static void ct_config_read(const cJSON *o, qtk_qcfg *q)
{
	(void)o;
	snprintf(q->bad, sizeof q->bad, "compressed-tensors configs are read per module");
}

const qtk_scheme qtk_scheme_ct_int = {
	.name = "ct-int",
	.title = "compressed-tensors int",
	.quant_method = "compressed-tensors",
	.kind = QTK_LAYOUT_CT_INT,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_INT,
	.bits_mask = 1u << 2 | 1u << 4 | 1u << 8,
	.row_align = 16, /* whole zero-point words */
	/* weight_shape is written by the rows from 0 only, and decoding never reads it: no
	 * write_shared */
	.parts_by_row = true,
	.nparts = 0, /* parts from part_specs */
	.check_layout = ct_int_check,
	.infer = no_infer,
	.decode_rows = ct_int_decode,
	.encode_rows = ct_int_encode,
	.to_groups = ct_int_to_groups,
	.from_groups = ct_int_from_groups,
	.config_write = ct_config_write,
	.suffix = ct_suffix,
	.transcodes = qtk_scheme_int_transcodes,
	.ntranscodes = QTK_SCHEME_INT_NTRANSCODES,
	.config_read = ct_config_read,
	.part_specs = ct_int_specs,
	/* pack-quantized; int-quantized (8-bit, unpacked) */
	.forms = (const qtk_scheme_form[]){{{"packed", "scale", NULL}, QTK_T_I32}, {{"weight", "scale", NULL}, QTK_T_I8}},
	.nforms = 2,
	.config_hint = "llm-compressor's \"quantization_config\" (\"quant_method\": \"compressed-tensors\", "
		       "\"config_groups\")",
};

/* ---- fp8 --------------------------------------------------------------------------------- */

static int fp8_specs(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS], bool opt[QTK_MAX_PARTS])
{
	(void)opt;
	set_part(&p[0], "weight", QTK_DT_F8_E4M3, 2, d->out, d->in);
	scale_part(l, d, &p[1]);
	return 2;
}

static int fp8_check(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->gptq_version || l->act_order || !l->sym || l->type != QTK_DT_F8_E4M3)
		return qtk_why(why, wn, "fp8 layout must be symmetric F8_E4M3 codes without act-order");
	if (!scale_type_ok(scale_type(l)))
		return qtk_why(why, wn, "fp8 scales must be F16, BF16 or F32");
	if (l->strategy == QTK_SCHEME_PER_CHANNEL || l->strategy > QTK_SCHEME_PER_BLOCK)
		return qtk_why(why, wn, "fp8 strategy %u is not tensor, group or block", l->strategy);
	if (l->strategy == QTK_SCHEME_PER_TENSOR && l->group_size != t->shape[1])
		return qtk_why(why, wn, "per-tensor fp8 layout must be one group");
	return 0;
}

static int fp8_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	const qtk_layout *l = &t->layout;
	uint64_t in = t->shape[1];
	const uint8_t *w = pp[0];
	unsigned st = scale_type(l);
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t i = 0; i < in; i++) {
			float s = scale_at(pp[1], st, scale_index(t, o, i / l->group_size));
			if (!(s >= 0) || isinf(s)) /* NaN, infinite or negative scales are refused */
				return -1;
			dst[r * in + i] = e4m3(w[o * in + i]) * s;
		}
	}
	return 0;
}

/* A result rounded to the scale type: llm-compressor computes in the model dtype, every
 * operation rounded to it (F16, BF16), or F32. */
static float round_to(unsigned st, float x)
{
	if (st == QTK_T_F16)
		return qtk_fp16_to_f32(qtk_f32_to_fp16(x));
	if (st == QTK_T_BF16)
		return qtk_bf16_to_f32(qtk_f32_to_bf16(x));
	return x;
}

static void scale_put(void *part, unsigned st, uint64_t k, float v)
{
	uint8_t *b = part;
	if (st == QTK_T_F32) {
		uint32_t u;
		memcpy(&u, &v, 4);
		qtk_wr32(b + 4 * k, u);
	} else {
		qtk_wr16(b + 2 * k, st == QTK_T_BF16 ? qtk_f32_to_bf16(v) : qtk_f32_to_fp16(v));
	}
}

/* The nearest E4M3 code of a finite x with |x| <= 448, ties to even (c10's
 * fp8e4m3fn_from_fp32_value); the sign of zero is kept. */
static uint8_t e4m3_enc(float x)
{
	uint8_t s = signbit(x) ? 0x80 : 0;
	float a = fabsf(x);
	if (a < 0x1p-6f) /* subnormal steps of 2^-9; 8 steps is the smallest normal, code 0x08 */
		return (uint8_t)(s | (uint8_t)rne(a * 0x1p9f));
	int e;
	float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
	int man = (int)rne((2.0f * m - 1.0f) * 8.0f), ex = e - 1 + 7;
	if (man == 8)
		man = 0, ex++;
	return (uint8_t)(s | (uint8_t)(ex << 3) | (uint8_t)man);
}

/* compressed-tensors' FP8 weight quantization (float-quantized, symmetric, memoryless min-max)
 * of rows o0 .. o0+n-1, in the arithmetic of the scale type (the model dtype): per channel
 * (one group of `in`) or per block of group x group (o0 a multiple of the block, n whole
 * blocks unless the rows reach the end). s = amax / 448 (amax of the values rounded to the
 * dtype, at least F32's epsilon as calculate_qparams clamps), q = e4m3(clamp(x / s + 0, +-448))
 * (the zero point 0 is added: -0 becomes +0). Non-finite values: -1. */
static int fp8_encode(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *pp)
{
	const qtk_layout *l = &t->layout;
	unsigned st = scale_type(l);
	uint64_t out = t->shape[0], in = t->shape[1], G = l->group_size, ng = in / G;
	bool block = l->strategy == QTK_SCHEME_PER_BLOCK;
	if (l->strategy == QTK_SCHEME_PER_TENSOR || !scale_type_ok(st) || !G || in % G ||
	    (block && (o0 % G || ((o0 + n) % G && o0 + n != out))))
		return -1;
	uint8_t *w = pp[0];
	uint64_t rows = block ? G : 1; /* rows sharing one scale */
	for (uint64_t r0 = 0; r0 < n; r0 += rows) {
		uint64_t nr = n - r0 < rows ? n - r0 : rows, o = o0 + r0;
		for (uint64_t k = 0; k < ng; k++) {
			float amax = 0;
			for (uint64_t r = r0; r < r0 + nr; r++)
				for (uint64_t i = k * G; i < (k + 1) * G; i++) {
					float v = round_to(st, x[r * in + i]);
					if (!isfinite(v))
						return -1;
					amax = fabsf(v) > amax ? fabsf(v) : amax;
				}
			float s = round_to(st, amax / 448.0f);
			if (s < 0x1p-23f)
				s = 0x1p-23f;
			scale_put(pp[1], st, block ? o / G * ng + k : o * ng + k, s);
			for (uint64_t r = r0; r < r0 + nr; r++)
				for (uint64_t i = k * G; i < (k + 1) * G; i++) {
					float q = round_to(st, round_to(st, x[r * in + i]) / s) + 0.0f;
					q = q < -448.0f ? -448.0f : q > 448.0f ? 448.0f : q;
					w[(o0 + r) * in + i] = e4m3_enc(q);
				}
		}
	}
	return 0;
}

const qtk_scheme qtk_scheme_fp8 = {
	.name = "fp8",
	.title = "fp8 e4m3",
	.quant_method = "compressed-tensors",
	.kind = QTK_LAYOUT_FP8,
	.strategy = QTK_SCHEME_PER_CHANNEL,
	.codes = QTK_SCHEME_CODES_FLOAT,
	.bits_mask = 1u << 8,
	.row_align = 1,
	.parts_by_row = true,
	.nparts = 0,
	.check_layout = fp8_check,
	.infer = no_infer,
	.decode_rows = fp8_decode,
	.encode_rows = fp8_encode,
	.config_write = ct_config_write,
	.suffix = ct_suffix,
	.config_read = ct_config_read,
	.part_specs = fp8_specs,
	/* compressed-tensors' weight_scale; DeepSeek's weight_scale_inv */
	.forms = (const qtk_scheme_form[]){{{"weight", "scale", NULL}, QTK_DT_F8_E4M3},
					   {{"weight", "weight_scale_inv", NULL}, QTK_DT_F8_E4M3}},
	.nforms = 2,
	.config_hint = "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
		       "\"weight_block_size\": [B, B]} (weight_scale_inv) or llm-compressor's (weight_scale)",
};

/* ---- nvfp4 ------------------------------------------------------------------------------- */

/* NVFP4 layouts: scale_type 0 is compressed-tensors' (weight_global_scale F32 [1] divides the
 * block scales), 1 ModelOpt's (weight_scale_2 F32 [] multiplies the products), 2 the pair
 * llama.cpp's converter writes into a GGUF (ggml NVFP4 blocks `X.weight` and the F32 [1]
 * multiplier `X.scale`, joined by the family layer's view: qtk_hfmap). */
#define NV_MODELOPT 1
#define NV_GGUF 2
static bool nv_modelopt(const qtk_layout *l) { return l->scale_type == NV_MODELOPT; }

static int nvfp4_specs(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS],
		       bool opt[QTK_MAX_PARTS])
{
	(void)opt;
	if (l->scale_type == NV_GGUF) {
		set_part(&p[0], "weight", QTK_T_NVFP4, 2, d->out, d->in);
		set_part(&p[1], "scale", QTK_T_F32, 1, 1, 0);
		return 2;
	}
	bool mo = nv_modelopt(l);
	set_part(&p[0], mo ? "weight" : "packed", QTK_DT_U8, 2, d->out, d->in / 2);
	set_part(&p[1], "scale", QTK_DT_F8_E4M3, 2, d->out, d->ngroups);
	if (mo)
		set_part(&p[2], "scale2", QTK_T_F32, 0, 0, 0);
	else
		set_part(&p[2], "gscale", QTK_T_F32, 1, 1, 0);
	return 3;
}

static int nvfp4_check(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->gptq_version || l->act_order || !l->sym || l->group_size != 16 || l->type != QTK_DT_U8)
		return qtk_why(why, wn, "nvfp4 layout must be symmetric groups of 16 in U8 bytes");
	if (l->scale_type > NV_GGUF)
		return qtk_why(why, wn, "nvfp4 scale convention %u is not 0, 1 or 2", l->scale_type);
	return 0;
}

/* ModelOpt as llama.cpp reads it: ggml's NVFP4 product e2m1 * ue4m3 (code 8 is +0, the scale's
 * sign bit ignored, 0x7F is 0), exact in F32, then times weight_scale_2: one rounding. */
static int nvfp4_decode_mo(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	uint64_t in = t->shape[1], ng = in / 16;
	const uint8_t *w = pp[0], *sc = pp[1];
	float s2 = f32_at(pp[2]);
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t g = 0; g < ng; g++) {
			uint8_t b = sc[o * ng + g] & 0x7F;
			float s = b == 0x7F ? 0.0f : e4m3(b);
			for (uint64_t j = 0; j < 16; j++) {
				uint64_t i = g * 16 + j;
				uint8_t c = w[o * (in / 2) + i / 2];
				c = i % 2 ? c >> 4 : c & 15;
				dst[r * in + i] = (c == 8 ? 0.0f : e2m1_val[c]) * s * s2;
			}
		}
	}
	return 0;
}

/* The GGUF pair as llama.cpp computes it: ggml's dequantize_row_nvfp4 (exact), then one F32
 * multiply by the scale (ggml_mul on the product; the same rounding on the weights). */
static int nvfp4_decode_gguf(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	uint64_t in = t->shape[1], rb = in / 64 * 36;
	float s = f32_at(pp[1]);
	if (in % 64 || qtk_dequant_ggml(QTK_T_NVFP4, (const uint8_t *)pp[0] + o0 * rb, dst, n * in))
		return -1;
	for (uint64_t i = 0; i < n * in; i++)
		dst[i] *= s;
	return 0;
}

static int nvfp4_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	if (t->layout.scale_type == NV_GGUF)
		return nvfp4_decode_gguf(t, pp, o0, n, dst);
	if (nv_modelopt(&t->layout))
		return nvfp4_decode_mo(t, pp, o0, n, dst);
	uint64_t in = t->shape[1], ng = in / 16;
	const uint8_t *w = pp[0], *sc = pp[1];
	float gs = f32_at(pp[2]);
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t g = 0; g < ng; g++) {
			float s = e4m3(sc[o * ng + g]) / gs;
			for (uint64_t j = 0; j < 16; j++) {
				uint64_t i = g * 16 + j;
				uint8_t b = w[o * (in / 2) + i / 2];
				dst[r * in + i] = e2m1_val[i % 2 ? b >> 4 : b & 15] * s;
			}
		}
	}
	return 0;
}

/* Rows as ggml NVFP4 blocks (the layout llama.cpp's converter writes for ModelOpt, _nvfp4_pack):
 * per 64 inputs, the four scale bytes with the sign bit cleared (ggml reads them as UE4M3), then
 * 32 bytes where sub-block s puts input 16s+j (j < 8) in the low nibble of byte 8s+j and input
 * 16s+8+j in its high nibble. The per-tensor scale is not part of the blocks: the caller keeps it
 * (ModelOpt's weight_scale_2; for compressed-tensors, 1/weight_global_scale). A byte shuffle;
 * whether the values survive is the caller's check (qtk_nvfp4_ggml_scale). */
static int nvfp4_to_ggml(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, unsigned type, void *dst)
{
	uint64_t in = t->shape[1], ng = in / 16;
	if (type != QTK_T_NVFP4 || in % 64)
		return -1;
	if (t->layout.scale_type == NV_GGUF) { /* already ggml blocks */
		memcpy(dst, (const uint8_t *)pp[0] + o0 * (in / 64 * 36), (size_t)(n * (in / 64 * 36)));
		return 0;
	}
	const uint8_t *w = pp[0], *sc = pp[1];
	uint8_t *d = dst;
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		const uint8_t *wr = w + o * (in / 2), *sr = sc + o * ng;
		for (uint64_t b = 0; b < in / 64; b++, d += 36) {
			for (unsigned s = 0; s < 4; s++) {
				d[s] = sr[4 * b + s] & 0x7F;
				/* inputs 16(4b+s) .. +15 are bytes 8(4b+s) .. +7 of the row, two per byte */
				const uint8_t *src = wr + 8 * (4 * b + s);
				for (unsigned j = 0; j < 8; j++) {
					unsigned lo = j % 2 ? src[j / 2] >> 4 : src[j / 2] & 15;
					unsigned k = 8 + j, hi = k % 2 ? src[k / 2] >> 4 : src[k / 2] & 15;
					d[4 + 8 * s + j] = (uint8_t)(lo | hi << 4);
				}
			}
		}
	}
	return 0;
}

/* The F32 per-tensor multiplier that goes beside the ggml blocks as `<name>.scale`. */
int qtk_nvfp4_ggml_scale(const qtk_tensor *t, const void *const *parts, float *scale)
{
	if (t->layout.kind == QTK_LAYOUT_NVFP4 && t->layout.scale_type == NV_GGUF && t->nparts == 2 && parts[1]) {
		*scale = f32_at(parts[1]);
		return 0;
	}
	if (t->layout.kind != QTK_LAYOUT_NVFP4 || t->nparts < 3 || !parts[2])
		return -1;
	float v = f32_at(parts[2]);
	*scale = nv_modelopt(&t->layout) ? v : 1.0f / v;
	return 0;
}

/* ggml NVFP4 blocks (rows of in / 64 blocks) back into ModelOpt's parts: codes [rows, in/2], two
 * per byte with the even input in the low nibble, and the block scales [rows, in/16] as E4M3 bytes;
 * the inverse of nvfp4_to_ggml. ggml reads a scale byte without its sign bit except that 0x7F
 * gives 0 (ggml_ue4m3_to_fp32), so the byte written is x & 0x7F, and 0 for 0x7F (E4M3's NaN,
 * which torch would read as one); every value decodes as ggml's then. 0xFF alone has no such
 * byte (ggml reads it as 480, past E4M3's 448): -1, the layer stays F32. */
int qtk_nvfp4_from_ggml(const uint8_t *blocks, uint64_t rows, uint64_t in, uint8_t *codes, uint8_t *scales)
{
	if (!in || in % 64)
		return -1;
	for (uint64_t r = 0; r < rows; r++) {
		const uint8_t *b = blocks + r * (in / 64 * 36);
		uint8_t *cr = codes ? codes + r * (in / 2) : NULL, *sr = scales ? scales + r * (in / 16) : NULL;
		for (uint64_t k = 0; k < in / 64; k++, b += 36) {
			for (unsigned s = 0; s < 4; s++) {
				uint8_t x = b[s];
				if (x == 0xFF)
					return -1;
				if (sr)
					sr[4 * k + s] = x == 0x7F ? 0 : x & 0x7F;
				if (!cr)
					continue;
				/* inputs 16(4k+s) + j: j < 8 low nibble of byte 4+8s+j, else high nibble of j-8 */
				uint8_t *dst = cr + 8 * (4 * k + s);
				const uint8_t *q = b + 4 + 8 * s;
				for (unsigned e = 0; e < 16; e += 2) {
					unsigned c0 = e < 8 ? q[e] & 15 : q[e - 8] >> 4;
					unsigned c1 = e + 1 < 8 ? q[e + 1] & 15 : q[e + 1 - 8] >> 4;
					dst[e / 2] = (uint8_t)(c0 | c1 << 4);
				}
			}
		}
	}
	return 0;
}

const qtk_scheme qtk_scheme_nvfp4 = {
	.name = "nvfp4",
	.title = "nvfp4",
	.quant_method = "compressed-tensors",
	.kind = QTK_LAYOUT_NVFP4,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_FLOAT,
	.bits_mask = 1u << 4,
	.row_align = 1,
	.parts_by_row = true,
	.nparts = 0,
	.check_layout = nvfp4_check,
	.infer = no_infer,
	.decode_rows = nvfp4_decode,
	.to_ggml_rows = nvfp4_to_ggml,
	.suffix = ct_suffix,
	.config_read = ct_config_read,
	.part_specs = nvfp4_specs,
	/* compressed-tensors' nvfp4-pack-quantized; ModelOpt's */
	.forms = (const qtk_scheme_form[]){{{"packed", "scale", "gscale", NULL}, QTK_DT_U8},
					   {{"weight", "scale", "scale2", NULL}, QTK_DT_U8}},
	.nforms = 2,
	.config_hint = "\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"} "
		       "(weight_scale_2) or llm-compressor's (weight_global_scale)",
};

/* ---- the quantization config and folding ------------------------------------------------- */

#define CT_MAX_GROUPS 64
#define CT_MAX_PATS 256

typedef struct ct_group {
	char name[64];
	const cJSON *targets;
	qtk_layout l;        /* kind, type, bits, sym, strategy; group_size 0: the layer's in */
	bool gidx;           /* actorder "group": weight_g_idx stored */
	const char *format;
} ct_group;

typedef struct ct_fold {
	qtk_model *m;
	const char *cfgfile;
	ct_group g[CT_MAX_GROUPS];
	size_t ng;
	const cJSON *ignore;
	struct {
		const char *src;
		regex_t re;
	} pat[CT_MAX_PATS];
	size_t npat;
	qtk_fold_name *by;
} ct_fold;

/* Python re.match (anchored at the start) through POSIX extended syntax: \d \w \s become
 * classes; constructs POSIX lacks ((?...), lazy quantifiers) are refused. */
static int compile_pat(ct_fold *f, const char *key, const char *pat, regex_t **out)
{
	for (size_t i = 0; i < f->npat; i++)
		if (!strcmp(f->pat[i].src, pat)) {
			*out = &f->pat[i].re;
			return 0;
		}
	if (f->npat == CT_MAX_PATS)
		return qtk_fold_cerr(f->m, f->cfgfile, key, "more than %d distinct patterns", CT_MAX_PATS);
	size_t n = strlen(pat);
	if (n > 1000)
		return qtk_fold_cerr(f->m, f->cfgfile, key, "pattern of %zu characters", n);
	char buf[8192];
	size_t at = 0;
	buf[at++] = '^';
	for (size_t i = 0; i < n; i++) {
		const char *rep = NULL;
		char one[3] = {pat[i], 0, 0};
		if (pat[i] == '\\' && i + 1 < n) {
			char c = pat[++i];
			rep = c == 'd' ? "[0-9]" : c == 'w' ? "[A-Za-z0-9_]" : c == 's' ? "[[:space:]]" : NULL;
			if (!rep) {
				one[0] = '\\', one[1] = c;
				rep = one;
			}
		} else if ((pat[i] == '(' && i + 1 < n && pat[i + 1] == '?') ||
			   ((pat[i] == '*' || pat[i] == '+' || pat[i] == '?' || pat[i] == '}') && i + 1 < n && pat[i + 1] == '?')) {
			return qtk_fold_cerr(f->m, f->cfgfile, key, "pattern '%.100s' uses Python-only syntax", pat);
		} else {
			rep = one;
		}
		size_t r = strlen(rep);
		if (at + r + 1 >= sizeof buf)
			return qtk_fold_cerr(f->m, f->cfgfile, key, "pattern too long");
		memcpy(buf + at, rep, r);
		at += r;
	}
	buf[at] = 0;
	if (regcomp(&f->pat[f->npat].re, buf, REG_EXTENDED | REG_NOSUB))
		return qtk_fold_cerr(f->m, f->cfgfile, key, "pattern '%.100s' does not compile", pat);
	f->pat[f->npat].src = pat;
	*out = &f->pat[f->npat++].re;
	return 0;
}

/* Does one target (compressed-tensors: "re:<regex>", a module name, or a class name; every
 * module with a weight_scale is a Linear) match module `mod`? */
static int target_match(ct_fold *f, const char *key, const cJSON *tg, const char *mod, bool *hit)
{
	*hit = false;
	if (!cJSON_IsString(tg))
		return qtk_fold_cerr(f->m, f->cfgfile, key, "targets must be strings");
	const char *s = tg->valuestring;
	if (!strncmp(s, "re:", 3)) {
		regex_t *re;
		int rc = compile_pat(f, key, s + 3, &re);
		if (rc)
			return rc;
		*hit = regexec(re, mod, 0, NULL, 0) == 0;
		return 0;
	}
	*hit = !strcmp(s, "Linear") || !strcmp(s, mod);
	return 0;
}

static int list_match(ct_fold *f, const char *key, const cJSON *list, const char *mod, bool *hit)
{
	*hit = false;
	if (!list || cJSON_IsNull(list))
		return 0;
	if (!cJSON_IsArray(list))
		return qtk_fold_cerr(f->m, f->cfgfile, key, "must be an array of strings");
	const cJSON *e;
	cJSON_ArrayForEach(e, list)
	{
		int rc = target_match(f, key, e, mod, hit);
		if (rc || *hit)
			return rc;
	}
	return 0;
}

static const cJSON *item(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* One config group's weights arguments and format into g->l. */
static int parse_weights(ct_fold *f, ct_group *g, const cJSON *w, const char *gfmt)
{
	char key[160];
#define KEY(k) (snprintf(key, sizeof key, "config_groups.%.60s.weights.%s", g->name, k), key)
	const cJSON *nb = item(w, "num_bits"), *ty = item(w, "type"), *sy = item(w, "symmetric"),
		    *st = item(w, "strategy"), *gs = item(w, "group_size"), *bs = item(w, "block_structure"),
		    *ao = item(w, "actorder"), *dy = item(w, "dynamic");
	int64_t bits, group = 0;
	if (!qtk_json_i64(nb, &bits) || bits < 1 || bits > 8)
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("num_bits"), "must be an integer from 1 to 8");
	if (!cJSON_IsString(ty) || (strcmp(ty->valuestring, "int") && strcmp(ty->valuestring, "float")))
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("type"), "must be \"int\" or \"float\"");
	bool isfloat = !strcmp(ty->valuestring, "float");
	if (sy && !cJSON_IsBool(sy))
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("symmetric"), "must be true or false");
	g->l.sym = !sy || cJSON_IsTrue(sy);
	if (dy && !cJSON_IsFalse(dy) && !cJSON_IsNull(dy))
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("dynamic"), "dynamic weight quantization has no stored weights");
	if (!cJSON_IsString(st))
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("strategy"), "must be a string");
	const char *s = st->valuestring;
	if (gs && !cJSON_IsNull(gs) && (!qtk_json_i64(gs, &group) || group < 1 || group > (1 << 24)))
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("group_size"), "must be a positive integer");
	if (!strcmp(s, "tensor")) {
		g->l.strategy = QTK_SCHEME_PER_TENSOR;
	} else if (!strcmp(s, "channel")) {
		g->l.strategy = QTK_SCHEME_PER_GROUP;
		group = 0;
	} else if (!strcmp(s, "group") || !strcmp(s, "tensor_group")) {
		g->l.strategy = QTK_SCHEME_PER_GROUP;
		if (!group)
			return qtk_fold_cerr(f->m, f->cfgfile, KEY("group_size"), "strategy '%s' needs a group_size", s);
	} else if (!strcmp(s, "block")) {
		g->l.strategy = QTK_SCHEME_PER_BLOCK;
		const cJSON *r = cJSON_GetArrayItem(bs, 0), *c = cJSON_GetArrayItem(bs, 1);
		int64_t br, bc;
		if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 || !qtk_json_i64(r, &br) || !qtk_json_i64(c, &bc) ||
		    br < 1 || bc < 1 || br > (1 << 20))
			return qtk_fold_cerr(f->m, f->cfgfile, KEY("block_structure"), "must be [rows, columns]");
		if (br != bc)
			return qtk_fold_cerr(f->m, f->cfgfile, KEY("block_structure"), "only square blocks are supported");
		group = br;
	} else {
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("strategy"), "unknown strategy '%.40s'", s);
	}
	g->l.group_size = (uint32_t)group;
	g->gidx = false;
	if (ao && !cJSON_IsNull(ao) && !cJSON_IsFalse(ao)) {
		const char *a = cJSON_IsString(ao) ? ao->valuestring : cJSON_IsTrue(ao) ? "group" : "?";
		if (!strcmp(a, "group") || !strcmp(a, "dynamic"))
			g->gidx = true;
		else if (strcmp(a, "weight") && strcmp(a, "static"))
			return qtk_fold_cerr(f->m, f->cfgfile, KEY("actorder"), "unknown actorder '%.40s'", a);
		if (g->gidx && strcmp(s, "group"))
			return qtk_fold_cerr(f->m, f->cfgfile, KEY("actorder"), "actorder \"group\" needs strategy \"group\"");
	}
	const char *fmt = g->format = gfmt;
	g->l.bits = (uint8_t)bits;
	if (!fmt)
		return qtk_fold_cerr(f->m, f->cfgfile, "format", "no format for config group '%.60s'", g->name);
	bool ok;
	if (!strcmp(fmt, "pack-quantized")) {
		g->l.kind = QTK_LAYOUT_CT_INT;
		g->l.type = QTK_T_I32;
		ok = !isfloat && (bits == 2 || bits == 4 || bits == 8) && g->l.strategy != QTK_SCHEME_PER_BLOCK &&
		     strcmp(s, "tensor_group") && (g->l.sym || g->l.strategy == QTK_SCHEME_PER_GROUP);
	} else if (!strcmp(fmt, "int-quantized") || (!strcmp(fmt, "naive-quantized") && !isfloat)) {
		g->l.kind = QTK_LAYOUT_CT_INT;
		g->l.type = QTK_T_I8;
		ok = !isfloat && bits == 8 && g->l.sym && !g->gidx && g->l.strategy != QTK_SCHEME_PER_BLOCK &&
		     strcmp(s, "tensor_group");
	} else if (!strcmp(fmt, "float-quantized") || !strcmp(fmt, "naive-quantized")) {
		g->l.kind = QTK_LAYOUT_FP8;
		g->l.type = QTK_DT_F8_E4M3;
		ok = isfloat && bits == 8 && g->l.sym && !g->gidx && strcmp(s, "tensor_group");
	} else if (!strcmp(fmt, "nvfp4-pack-quantized")) {
		g->l.kind = QTK_LAYOUT_NVFP4;
		g->l.type = QTK_DT_U8;
		ok = isfloat && bits == 4 && g->l.sym && !strcmp(s, "tensor_group") && group == 16 && !g->gidx;
	} else if (!strcmp(fmt, "mxfp4-pack-quantized")) {
		g->l.kind = QTK_LAYOUT_MXFP4;
		g->l.type = QTK_DT_U8;
		g->l.scale_type = QTK_MXFP4_CT;
		ok = isfloat && bits == 4 && g->l.sym && !strcmp(s, "group") && group == 32 && !g->gidx;
	} else {
		return qtk_fold_cerr(f->m, f->cfgfile, "format", "unsupported compressed-tensors format '%.60s'", fmt);
	}
	if (!ok)
		return qtk_fold_cerr(f->m, f->cfgfile, KEY("num_bits"), "%s %s %d-bit %s weights with strategy '%s' are not a layout of format %s",
			     g->l.sym ? "symmetric" : "asymmetric", isfloat ? "float" : "int", (int)bits,
			     g->gidx ? "act-order" : "", s, fmt);
	return 0;
#undef KEY
}

static int parse_config(ct_fold *f, const cJSON *qc)
{
	const cJSON *fmt = item(qc, "format"), *st = item(qc, "quantization_status"), *sp = item(qc, "sparsity_config"),
		    *tr = item(qc, "transform_config"), *cg = item(qc, "config_groups");
	if (fmt && !cJSON_IsNull(fmt) && !cJSON_IsString(fmt))
		return qtk_fold_cerr(f->m, f->cfgfile, "format", "must be a string");
	if (st && !cJSON_IsNull(st) && (!cJSON_IsString(st) || strcmp(st->valuestring, "compressed")))
		return qtk_fold_cerr(f->m, f->cfgfile, "quantization_status", "only compressed checkpoints are stored quantized");
	if (sp && !cJSON_IsNull(sp) && (!cJSON_IsObject(sp) || sp->child))
		return qtk_fold_cerr(f->m, f->cfgfile, "sparsity_config", "sparse compression is not supported");
	if (tr && !cJSON_IsNull(tr) && (!cJSON_IsObject(tr) || tr->child))
		return qtk_fold_cerr(f->m, f->cfgfile, "transform_config", "transforms are not supported");
	f->ignore = item(qc, "ignore");
	if (f->ignore && !cJSON_IsNull(f->ignore) && !cJSON_IsArray(f->ignore))
		return qtk_fold_cerr(f->m, f->cfgfile, "ignore", "must be an array of strings");
	if (!cJSON_IsObject(cg))
		return qtk_fold_cerr(f->m, f->cfgfile, "config_groups", "must be an object");
	const cJSON *e;
	cJSON_ArrayForEach(e, cg)
	{
		if (f->ng == CT_MAX_GROUPS)
			return qtk_fold_cerr(f->m, f->cfgfile, "config_groups", "more than %d groups", CT_MAX_GROUPS);
		ct_group *g = &f->g[f->ng];
		memset(g, 0, sizeof *g);
		snprintf(g->name, sizeof g->name, "%s", e->string ? e->string : "?");
		char key[160];
		if (!cJSON_IsObject(e))
			return qtk_fold_cerr(f->m, f->cfgfile, "config_groups", "group '%.60s' is not an object", g->name);
		g->targets = item(e, "targets");
		snprintf(key, sizeof key, "config_groups.%.60s.targets", g->name);
		if (!cJSON_IsArray(g->targets))
			return qtk_fold_cerr(f->m, f->cfgfile, key, "must be an array of strings");
		const cJSON *w = item(e, "weights"), *gf = item(e, "format");
		if (!w || cJSON_IsNull(w))
			continue; /* activations only: the weights stay as they are */
		snprintf(key, sizeof key, "config_groups.%.60s.weights", g->name);
		if (!cJSON_IsObject(w))
			return qtk_fold_cerr(f->m, f->cfgfile, key, "must be an object");
		if (gf && !cJSON_IsNull(gf) && !cJSON_IsString(gf)) {
			snprintf(key, sizeof key, "config_groups.%.60s.format", g->name);
			return qtk_fold_cerr(f->m, f->cfgfile, key, "must be a string");
		}
		const char *fs = cJSON_IsString(gf) ? gf->valuestring : cJSON_IsString(fmt) ? fmt->valuestring : NULL;
		int rc = parse_weights(f, g, w, fs);
		if (rc)
			return rc;
		f->ng++;
	}
	return 0;
}

/* g_idx: every entry a group, every group exactly `group` members; act-order when not i/group. */
static int check_gidx(ct_fold *f, const qtk_tensor *gt, uint64_t in, uint64_t group, bool *act)
{
	uint64_t ng = in / group;
	const qtk_part *p = &gt->parts[0];
	if (gt->nparts != 1 || p->type != QTK_T_I32 || p->ndim != 1 || p->shape[0] != in || p->nbytes != in * 4)
		return qtk_fold_terr(f->m, gt->name, "weight_g_idx must be I32 [%llu]", (unsigned long long)in);
	uint8_t *b = qtk_malloc((size_t)p->nbytes + 1);
	uint32_t *cnt = qtk_calloc((size_t)ng + 1, sizeof *cnt);
	int rc = b && cnt ? 0 : qtk_err_set(&f->m->err, QTK_E_IO, f->m->path, -1, NULL, "out of memory");
	if (!rc)
		rc = qtk_pread_full(f->m->fds[p->file], f->m->files[p->file], b, (size_t)p->nbytes, p->offset, &f->m->err);
	*act = false;
	for (uint64_t i = 0; i < in && !rc; i++) {
		int32_t g = (int32_t)qtk_rd32(b + 4 * i);
		if (g < 0 || (uint64_t)g >= ng)
			rc = qtk_fold_terr(f->m, gt->name, "weight_g_idx[%llu] = %d is outside [0, %llu)", (unsigned long long)i, g,
				   (unsigned long long)ng);
		else if (++cnt[g] > group)
			rc = qtk_fold_terr(f->m, gt->name, "group %d has more than %llu members", g, (unsigned long long)group);
		else if ((uint64_t)g != i / group)
			*act = true;
	}
	qtk_free(b);
	qtk_free(cnt);
	return rc;
}

/* The module `mod` (its weight_scale is tensor si) under config group g: its logical tensor. */
static int make_module(ct_fold *f, const ct_group *g, const char *mod, size_t plen, long *c, qtk_tensor *out)
{
	qtk_model *m = f->m;
	const qtk_layout *gl = &g->l;
	bool packed = gl->kind == QTK_LAYOUT_CT_INT && gl->type == QTK_T_I32, nv = gl->kind == QTK_LAYOUT_NVFP4;
	bool mx = gl->kind == QTK_LAYOUT_MXFP4, fp4 = nv || mx; /* weight_packed: two E2M1 codes per byte */
	int pl = (int)(plen > 200 ? 200 : plen);
	long w = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, packed || fp4 ? "weight_packed" : "weight"), s = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight_scale");
	long z = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight_zero_point"), gi = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight_g_idx");
	long sh = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight_shape"), gs = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight_global_scale");
	long other = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, packed || fp4 ? "weight" : "weight_packed");
	const char *sname = m->tensors[s].name;
	if (w < 0)
		return qtk_fold_terr(f->m, sname, "format %s: no '%.*s.%s'", g->format, pl, mod, packed || fp4 ? "weight_packed" : "weight");
	if (other >= 0)
		return qtk_fold_terr(f->m, m->tensors[other].name, "format %s has no such tensor beside '%s'", g->format,
			     m->tensors[w].name);
	if (z >= 0 && (gl->sym || gl->kind != QTK_LAYOUT_CT_INT))
		return qtk_fold_terr(f->m, m->tensors[z].name, "zero point of symmetric weights (config group %.60s)", g->name);
	if (z < 0 && !gl->sym)
		return qtk_fold_terr(f->m, sname, "asymmetric weights without '%.*s.weight_zero_point'", pl, mod);
	if (gi >= 0 && !g->gidx)
		return qtk_fold_terr(f->m, m->tensors[gi].name, "config group %.60s has no actorder \"group\"", g->name);
	if (gi < 0 && g->gidx)
		return qtk_fold_terr(f->m, sname, "actorder \"group\" without '%.*s.weight_g_idx'", pl, mod);
	if (packed != (sh >= 0))
		return qtk_fold_terr(f->m, sh >= 0 ? m->tensors[sh].name : sname, packed ? "pack-quantized weights without weight_shape"
									   : "weight_shape belongs to pack-quantized weights");
	if (nv != (gs >= 0))
		return qtk_fold_terr(f->m, gs >= 0 ? m->tensors[gs].name : sname,
			     nv ? "nvfp4 weights without weight_global_scale" : "weight_global_scale belongs to nvfp4 weights");
	const qtk_tensor *wt = &m->tensors[w];
	if (wt->nparts != 1 || wt->ndim != 2)
		return qtk_fold_terr(f->m, wt->name, "must be a 2-D tensor");
	uint64_t o_ = wt->shape[0], in = fp4 ? wt->shape[1] * 2 : wt->shape[1];
	if (packed) {
		const qtk_tensor *st = &m->tensors[sh];
		uint8_t b[16];
		if (st->layout.type != QTK_T_I64 || st->ndim != 1 || st->shape[0] != 2)
			return qtk_fold_terr(f->m, st->name, "weight_shape must be I64 [2]");
		int rc = qtk_fold_read_small(f->m, st, b, 16);
		if (rc)
			return rc;
		o_ = qtk_rd64(b);
		in = qtk_rd64(b + 8);
		if (o_ != wt->shape[0])
			return qtk_fold_terr(f->m, st->name, "weight_shape [%lld, %lld] does not match weight_packed rows %llu",
				     (long long)o_, (long long)in, (unsigned long long)wt->shape[0]);
		if (!in || in > (1ull << 40) || in * gl->bits != wt->shape[1] * 32)
			return qtk_fold_terr(f->m, st->name, "weight_shape [%lld, %lld] does not match weight_packed columns %llu at %u bits",
				     (long long)o_, (long long)in, (unsigned long long)wt->shape[1], gl->bits);
	}
	if (qtk_fold_new_tensor(f->m, out, QTK_MAX_PARTS))
		return QTK_E_IO;
	out->ndim = 2;
	out->shape[0] = o_;
	out->shape[1] = in;
	out->layout = *gl;
	if (!gl->group_size || gl->strategy == QTK_SCHEME_PER_TENSOR)
		out->layout.group_size = in > UINT32_MAX ? 0 : (uint32_t)in;
	out->layout.scale_type = nv ? 0 : mx ? QTK_MXFP4_CT : (uint16_t)m->tensors[s].layout.type;
	if (mx && m->tensors[s].layout.type != QTK_DT_U8)
		return qtk_fold_terr(f->m, sname, "mxfp4 weight_scale must be U8 (E8M0 exponents), not %s",
			     qtk_type(m->tensors[s].layout.type) ? qtk_type(m->tensors[s].layout.type)->upper : "?");
	if (!nv && !mx && !scale_type_ok(out->layout.scale_type))
		return qtk_fold_terr(f->m, sname, "weight_scale dtype %s, expected F16, BF16 or F32",
			     qtk_type(out->layout.scale_type) ? qtk_type(out->layout.scale_type)->upper : "?");
	long parts[QTK_MAX_PARTS];
	int np = 0;
	parts[np++] = w;
	parts[np++] = s;
	if (z >= 0)
		parts[np++] = z;
	bool act = false;
	int rc = 0;
	if (gi >= 0 && gl->group_size && in % gl->group_size == 0 &&
	    (rc = check_gidx(f, &m->tensors[gi], in, gl->group_size, &act)))
		return rc;
	if (gi >= 0 && !act) /* the identity map: consumed, not kept */
		c[QTK_MAX_PARTS + 1] = gi;
	if (gi >= 0 && act)
		parts[np++] = gi;
	if (sh >= 0)
		parts[np++] = sh;
	if (gs >= 0)
		parts[np++] = gs;
	static const char *const roles_int[] = {"packed", "scale", "zero", "g_idx", "shape"};
	for (int k = 0; k < np; k++) {
		const qtk_tensor *pt = &m->tensors[parts[k]];
		if (pt->nparts != 1 || pt->layout.kind != QTK_LAYOUT_PLAIN)
			return qtk_fold_terr(f->m, pt->name, "not a stored tensor");
		out->parts[k] = pt->parts[0];
		const char *role = parts[k] == z	? "zero"
				   : parts[k] == gi ? "g_idx"
				   : parts[k] == gs ? "gscale"
				   : parts[k] == sh ? "shape"
						    : roles_int[k];
		if (k == 0 && !packed && !fp4)
			role = "weight";
		snprintf(out->parts[k].role, sizeof out->parts[k].role, "%s", role);
		c[k] = parts[k];
	}
	out->nparts = np;
	char why[300];
	int bad = -1;
	out->layout.act_order = act;
	qtk_tensor_finish(out);
	if (qtk_scheme_check(out, &bad, why, sizeof why))
		return qtk_fold_terr(f->m, m->tensors[parts[bad >= 0 && bad < np ? bad : 0]].name, "%s", why);
	char *name = qtk_malloc(plen + 8);
	if (!name)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	memcpy(name, mod, plen);
	memcpy(name + plen, ".weight", 8);
	out->name = name;
	return 0;
}

static bool ends_with(const char *s, size_t len, const char *suf, size_t *plen)
{
	size_t n = strlen(suf);
	if (len <= n + 1 || s[len - n - 1] != '.' || strcmp(s + len - n, suf))
		return false;
	*plen = len - n - 1;
	return true;
}

static int fold_modules(ct_fold *f)
{
	qtk_model *m = f->m;
	size_t n = m->ntensors, nmod = 0;
	long *gid = qtk_malloc(n * sizeof *gid);
	qtk_tensor *mods = qtk_calloc(n + 1, sizeof *mods);
	int rc = gid && mods ? 0 : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	for (size_t i = 0; i < n && !rc; i++)
		gid[i] = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t plen;
		if (!ends_with(nm, strlen(nm), "weight_scale", &plen))
			continue;
		if (plen > QTK_CAP_NAME) {
			rc = qtk_fold_terr(f->m, nm, "name too long");
			break;
		}
		char mod[QTK_CAP_NAME + 1];
		snprintf(mod, sizeof mod, "%.*s", (int)plen, nm);
		bool hit;
		if ((rc = list_match(f, "ignore", f->ignore, mod, &hit)))
			break;
		if (hit) {
			rc = qtk_fold_terr(f->m, nm, "module '%.200s' is in the config's ignore list but is stored quantized", mod);
			break;
		}
		const ct_group *g = NULL;
		for (size_t j = 0; j < f->ng && !rc; j++) {
			char key[120];
			snprintf(key, sizeof key, "config_groups.%.60s.targets", f->g[j].name);
			if ((rc = list_match(f, key, f->g[j].targets, mod, &hit)) || !hit)
				continue;
			if (!g)
				g = &f->g[j];
			else if (memcmp(&g->l, &f->g[j].l, sizeof g->l) || g->gidx != f->g[j].gidx)
				rc = qtk_fold_terr(f->m, nm, "config groups %.60s and %.60s both target module '%.200s' differently", g->name,
					   f->g[j].name, mod);
		}
		if (rc)
			break;
		if (!g) {
			rc = qtk_fold_terr(f->m, nm, "no config group with weights targets module '%.200s'", mod);
			break;
		}
		long c[QTK_MAX_PARTS + 2];
		for (size_t x = 0; x < QTK_MAX_PARTS + 2; x++)
			c[x] = -1;
		if ((rc = make_module(f, g, mod, plen, c, &mods[nmod])))
			break;
		for (int x = 0; x < QTK_MAX_PARTS + 2; x++)
			if (c[x] >= 0)
				gid[c[x]] = (long)nmod;
		nmod++;
	}
	/* quantization parts that no weight_scale claimed */
	static const char *const marks[] = {"weight_packed", "weight_zero_point", "weight_g_idx", "weight_shape",
					    "weight_global_scale"};
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t plen;
		for (size_t j = 0; j < sizeof marks / sizeof *marks && !rc; j++)
			if (gid[i] < 0 && ends_with(nm, strlen(nm), marks[j], &plen))
				rc = qtk_fold_terr(f->m, nm, "no matching '.weight_scale' for this quantization component");
	}
	if (!rc)
		rc = qtk_fold_replace(m, gid, NULL, mods, &nmod);
	for (size_t i = 0; i < nmod; i++)
		qtk_free(mods[i].name);
	qtk_free(gid);
	qtk_free(mods);
	return rc;
}

int qtk_ct_fold(qtk_model *m, const cJSON *qc, const char *cfgfile)
{
	ct_fold *f = qtk_calloc(1, sizeof *f);
	if (!f)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	f->m = m;
	f->cfgfile = cfgfile;
	int rc = parse_config(f, qc);
	if (!rc && m->ntensors) {
		f->by = qtk_fold_index(m);
		rc = f->by ? fold_modules(f) : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	}
	for (size_t i = 0; i < f->npat; i++)
		regfree(&f->pat[i].re);
	qtk_free(f->by);
	qtk_free(f);
	return rc;
}

/* ---- writing the config ----------------------------------------------------------------- */

static bool add_null(cJSON *o, const char *k) { return cJSON_AddNullToObject(o, k) != NULL; }

/* One QuantizationArgs object as compressed-tensors serializes it (keys sorted): `strategy`,
 * `group` (< 0: null), `block` (0: null), `observer` (NULL: null); symmetric unless asym. */
static cJSON *qargs(cJSON *parent, const char *key, const char *type, int bits, const char *strategy, int64_t group,
		    int block, bool dynamic, const char *observer, bool act_order, bool asym, const char *u8dtype)
{
	cJSON *w = cJSON_AddObjectToObject(parent, key), *bs = NULL;
	bool ok = w && (act_order ? cJSON_AddStringToObject(w, "actorder", "group") != NULL : add_null(w, "actorder")) &&
		  (block ? (bs = cJSON_AddArrayToObject(w, "block_structure")) != NULL &&
				   cJSON_AddItemToArray(bs, cJSON_CreateNumber(block)) &&
				   cJSON_AddItemToArray(bs, cJSON_CreateNumber(block))
			 : add_null(w, "block_structure")) &&
		  cJSON_AddBoolToObject(w, "dynamic", dynamic) &&
		  (group < 0 ? add_null(w, "group_size") : cJSON_AddNumberToObject(w, "group_size", (double)group) != NULL) &&
		  cJSON_AddNumberToObject(w, "num_bits", bits) &&
		  (observer ? cJSON_AddStringToObject(w, "observer", observer) != NULL : add_null(w, "observer")) &&
		  cJSON_AddObjectToObject(w, "observer_kwargs") &&
		  (u8dtype ? cJSON_AddStringToObject(w, "scale_dtype", u8dtype) != NULL : add_null(w, "scale_dtype")) &&
		  cJSON_AddStringToObject(w, "strategy", strategy) && cJSON_AddBoolToObject(w, "symmetric", !asym) &&
		  cJSON_AddStringToObject(w, "type", type) &&
		  (asym	     ? cJSON_AddStringToObject(w, "zp_dtype", "torch.int8") != NULL
		   : u8dtype ? cJSON_AddStringToObject(w, "zp_dtype", u8dtype) != NULL
			     : add_null(w, "zp_dtype"));
	return ok ? w : NULL;
}

/* llm-compressor's quantization_config (keys in its sorted order), one group targeting Linear,
 * every other 2-D float linear weight in `ignore`: pack-quantized ct-int layers (weights only,
 * per channel or group), or float-quantized FP8 as its presets FP8_DYNAMIC (per channel,
 * dynamic per-token activations) and FP8_BLOCK (128 x 128 blocks, dynamic activations in
 * groups of 128). */
static bool ct_config_tail(const qtk_qcfg *q, cJSON *o, cJSON *ign);
static cJSON *mxfp4_config_json(const qtk_qcfg *q);

cJSON *qtk_ct_config_json(const qtk_qcfg *q)
{
	if (q->kind == QTK_LAYOUT_MXFP4)
		return mxfp4_config_json(q);
	bool fp8 = q->kind == QTK_LAYOUT_FP8, block = fp8 && q->strategy == QTK_SCHEME_PER_BLOCK;
	bool tensor = fp8 && q->strategy == QTK_SCHEME_PER_TENSOR, channel = !block && !tensor && q->group < 0;
	/* int8 kept unpacked (I8 weights) is llm-compressor's int-quantized W8A8: dynamic per-token
	 * int8 activations */
	bool w8a8 = !fp8 && q->unpacked;
	const char *fmt = fp8 ? "float-quantized" : w8a8 ? "int-quantized" : "pack-quantized";
	const char *wst = block ? "block" : tensor ? "tensor" : channel ? "channel" : "group";
	cJSON *o = cJSON_CreateObject(), *cg = NULL, *g0 = NULL, *tg = NULL, *ign = NULL;
	/* activations: FP8_DYNAMIC's per token, FP8_BLOCK's groups of 128; weight-only otherwise */
	bool ok = o && (cg = cJSON_AddObjectToObject(o, "config_groups")) && (g0 = cJSON_AddObjectToObject(cg, "group_0")) &&
		  cJSON_AddStringToObject(g0, "format", fmt) &&
		  (fp8 && (block || channel) ? qargs(g0, "input_activations", "float", 8, block ? "group" : "token",
						     block ? 128 : -1, 0, true, NULL, false, false, NULL) != NULL
		   : w8a8 ? qargs(g0, "input_activations", "int", 8, "token", -1, 0, true, NULL, false, false, NULL) != NULL
			  : add_null(g0, "input_activations")) &&
		  add_null(g0, "output_activations") && (tg = cJSON_AddArrayToObject(g0, "targets")) &&
		  cJSON_AddItemToArray(tg, cJSON_CreateString("Linear"));
	ok = ok && qargs(g0, "weights", fp8 ? "float" : "int", fp8 ? 8 : q->bits, wst, block || tensor || channel ? -1 : q->group,
			 block ? (int)q->group : 0, false, "memoryless_minmax", q->desc_act, !q->sym, NULL) != NULL;
	ok = ok && cJSON_AddStringToObject(o, "format", fmt) && add_null(o, "global_compression_ratio") &&
	     (ign = cJSON_AddArrayToObject(o, "ignore"));
	ok = ok && ct_config_tail(q, o, ign);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The `ignore` list (every 2-D float `.weight` but embeddings: the linear layers left unquantized)
 * and the keys after it, shared by the writers above and below. */
static bool ct_config_tail(const qtk_qcfg *q, cJSON *o, cJSON *ign)
{
	bool ok = true;
	for (size_t i = 0; ok && q->desc && i < q->desc->ntensors; i++) {
		const qtk_tensor *t = &q->desc->tensors[i];
		size_t len = strlen(t->name), wl = strlen(".weight");
		if (t->ndim != 2 || t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_type(t->layout.type) ||
		    !qtk_type(t->layout.type)->is_float || len <= wl || strcmp(t->name + len - wl, ".weight") ||
		    strstr(t->name, "embed"))
			continue;
		char mod[QTK_CAP_NAME + 1];
		snprintf(mod, sizeof mod, "%.*s", (int)(len - wl), t->name);
		ok = cJSON_AddItemToArray(ign, cJSON_CreateString(mod));
	}
	ok = ok && add_null(o, "kv_cache_scheme") && cJSON_AddStringToObject(o, "quant_method", "compressed-tensors") &&
	     cJSON_AddStringToObject(o, "quantization_status", "compressed") &&
	     cJSON_AddObjectToObject(o, "sparsity_config") && cJSON_AddObjectToObject(o, "transform_config") &&
	     cJSON_AddStringToObject(o, "version", "0.18.0");
	return ok;
}

/* compressed-tensors' MXFP4A16 preset (weights only): float 4-bit, strategy group, groups of 32,
 * E8M0 scales as uint8, format mxfp4-pack-quantized, one group targeting Linear. */
static cJSON *mxfp4_config_json(const qtk_qcfg *q)
{
	cJSON *o = cJSON_CreateObject(), *cg = NULL, *g0 = NULL, *tg = NULL, *ign = NULL;
	const char *fmt = "mxfp4-pack-quantized";
	bool ok = o && (cg = cJSON_AddObjectToObject(o, "config_groups")) && (g0 = cJSON_AddObjectToObject(cg, "group_0")) &&
		  cJSON_AddStringToObject(g0, "format", fmt) && add_null(g0, "input_activations") &&
		  add_null(g0, "output_activations") && (tg = cJSON_AddArrayToObject(g0, "targets")) &&
		  cJSON_AddItemToArray(tg, cJSON_CreateString("Linear")) &&
		  qargs(g0, "weights", "float", 4, "group", 32, 0, false, "memoryless_minmax", false, false, "torch.uint8") &&
		  cJSON_AddStringToObject(o, "format", fmt) && add_null(o, "global_compression_ratio") &&
		  (ign = cJSON_AddArrayToObject(o, "ignore")) && ct_config_tail(q, o, ign);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- ModelOpt NVFP4 configs, as ModelOpt's export writes them ------------------------------- */

/* Module i of desc that ModelOpt lists as excluded: a 2-D float linear weight left plain (the
 * embeddings are not Linear modules and are not listed); its module name into mod. */
static bool modelopt_excluded(const qtk_model *d, size_t i, char *mod, size_t n)
{
	const qtk_tensor *t = &d->tensors[i];
	size_t len = strlen(t->name), wl = strlen(".weight");
	if (t->ndim != 2 || t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_type(t->layout.type) ||
	    !qtk_type(t->layout.type)->is_float || len <= wl || strcmp(t->name + len - wl, ".weight") ||
	    strstr(t->name, "embed"))
		return false;
	snprintf(mod, n, "%.*s", (int)(len - wl), t->name);
	return true;
}

static cJSON *nv_args(cJSON *g, const char *key, int64_t group)
{
	cJSON *a = cJSON_AddObjectToObject(g, key);
	bool ok = a && cJSON_AddBoolToObject(a, "dynamic", 0) && cJSON_AddNumberToObject(a, "num_bits", 4) &&
		  cJSON_AddStringToObject(a, "type", "float") && cJSON_AddNumberToObject(a, "group_size", (double)group);
	return ok ? a : NULL;
}

/* config.json's quantization_config of ModelOpt's NVFP4 export (convert_hf_quant_config_format):
 * config_groups.group_0 {input_activations, weights: 4-bit float in groups, targets [Linear]},
 * ignore (the excluded modules), quant_algo, producer, quant_method "modelopt", in that order.
 * The producer is qtk: which ModelOpt version made the weights is not known here. */
cJSON *qtk_modelopt_config_json(const qtk_qcfg *q)
{
	cJSON *o = cJSON_CreateObject(), *cg = NULL, *g0 = NULL, *tg = NULL, *ign = NULL, *pr = NULL;
	bool ok = o && (cg = cJSON_AddObjectToObject(o, "config_groups")) && (g0 = cJSON_AddObjectToObject(cg, "group_0")) &&
		  nv_args(g0, "input_activations", q->group) && nv_args(g0, "weights", q->group) &&
		  (tg = cJSON_AddArrayToObject(g0, "targets")) && cJSON_AddItemToArray(tg, cJSON_CreateString("Linear")) &&
		  (ign = cJSON_AddArrayToObject(o, "ignore"));
	for (size_t i = 0; ok && q->desc && i < q->desc->ntensors; i++) {
		char mod[QTK_CAP_NAME + 1];
		if (modelopt_excluded(q->desc, i, mod, sizeof mod))
			ok = cJSON_AddItemToArray(ign, cJSON_CreateString(mod));
	}
	ok = ok && cJSON_AddStringToObject(o, "quant_algo", "NVFP4") && (pr = cJSON_AddObjectToObject(o, "producer")) &&
	     cJSON_AddStringToObject(pr, "name", "qtk") && cJSON_AddStringToObject(pr, "version", QTK_VERSION) &&
	     cJSON_AddStringToObject(o, "quant_method", "modelopt");
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* hf_quant_config.json as ModelOpt writes it (Python's json.dump, indent 4, no newline at the
 * end): producer, then quantization {quant_algo, kv_cache_quant_algo null (qtk writes no KV
 * cache scales), group_size, exclude_modules}. A new string (qtk_free), NULL when out of memory. */
char *qtk_modelopt_hf_quant_text(const qtk_qcfg *q)
{
	qtk_buf b = {0};
	qtk_buf_puts(&b, "{\n    \"producer\": {\n        \"name\": \"qtk\",\n        \"version\": \"" QTK_VERSION
			 "\"\n    },\n    \"quantization\": {\n        \"quant_algo\": \"NVFP4\",\n"
			 "        \"kv_cache_quant_algo\": null,\n");
	qtk_buf_printf(&b, "        \"group_size\": %lld,\n        \"exclude_modules\": [", (long long)q->group);
	size_t n = 0;
	for (size_t i = 0; q->desc && i < q->desc->ntensors; i++) {
		char mod[QTK_CAP_NAME + 1];
		if (!modelopt_excluded(q->desc, i, mod, sizeof mod))
			continue;
		qtk_buf_puts(&b, n++ ? ",\n            " : "\n            ");
		if (qtk_json_put_str(&b, mod, strlen(mod)))
			b.failed = 1;
	}
	qtk_buf_puts(&b, n ? "\n        ]\n    }\n}" : "]\n    }\n}");
	qtk_buf_putc(&b, 0);
	if (b.failed) {
		qtk_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

/* ---- DeepSeek-style FP8 (quant_method "fp8") and ModelOpt NVFP4 (quant_method "modelopt") ---- */

/* Each quantized module is found by its marking tensor <prefix>.<mark>; parts[k] are its tensors
 * <prefix>.<suffix[k]>, the logical tensor takes the first one's place. */
typedef struct side_fold {
	const char *mark;
	const char *suffix[3];
	const char *role[3];
	qtk_layout l;
	const cJSON *skip; /* ModelOpt's ignore / exclude_modules (fnmatch patterns) */
} side_fold;

/* The scale of an FP8 module as the layout describes it, from the shapes the checkpoint families
 * store: a per-tensor scale [] or [1] (ModelOpt FP8, per-tensor "fp8") becomes [1]; a
 * per-channel [out] or [out, 1] (ModelOpt FP8_PER_CHANNEL_PER_TOKEN) [out, 1]; ModelOpt
 * FP8_PB_WO's [out/b, 1, in/b, 1] [out/b, in/b]. Any other shape is left for the scheme
 * check to refuse. Only F32 scales: these families store no other. */
static int fp8_scale_shape(ct_fold *f, const char *sname, const qtk_tensor *t, qtk_part *p)
{
	uint64_t n = 1;
	for (int i = 0; i < p->ndim; i++)
		n = p->shape[i] && n <= UINT64_MAX / p->shape[i] ? n * p->shape[i] : 0;
	if (p->type != QTK_T_F32)
		return qtk_fold_terr(f->m, sname, "scale dtype %s, expected F32", qtk_type(p->type) ? qtk_type(p->type)->upper : "?");
	uint8_t st = t->layout.strategy;
	if (st == QTK_SCHEME_PER_TENSOR && n == 1 && p->ndim <= 1) {
		p->ndim = 1, p->shape[0] = 1;
	} else if (st == QTK_SCHEME_PER_GROUP && n == t->shape[0] && p->shape[0] == n && p->ndim >= 1 && p->ndim <= 2) {
		p->ndim = 2, p->shape[1] = 1;
	} else if (st == QTK_SCHEME_PER_BLOCK && p->ndim == 4 && p->shape[1] == 1 && p->shape[3] == 1) {
		p->ndim = 2, p->shape[1] = p->shape[2];
		p->shape[2] = p->shape[3] = 0;
	} else if (st != QTK_SCHEME_PER_BLOCK || p->ndim != 2) {
		char dims[96] = "";
		for (int i = 0, at = 0; i < p->ndim && i < 4 && at < 80; i++)
			at += snprintf(dims + at, sizeof dims - (size_t)at, "%s%llu", i ? ", " : "", (unsigned long long)p->shape[i]);
		return qtk_fold_terr(f->m, sname, "scale of shape [%s] is not %s", dims,
			     st == QTK_SCHEME_PER_TENSOR ? "one value"
			     : st == QTK_SCHEME_PER_GROUP ? "one value per output feature" : "one value per block");
	}
	return 0;
}

/* Every F32 scale of an FP8 module finite and not negative (a multiplier; 0 only zeroes). */
static int fp8_scale_values(ct_fold *f, const char *sname, const qtk_part *p)
{
	if (p->nbytes > ((uint64_t)1 << 28) || p->nbytes % 4)
		return qtk_fold_terr(f->m, sname, "scale of %llu bytes", (unsigned long long)p->nbytes);
	uint8_t *b = qtk_malloc((size_t)p->nbytes + 1);
	int rc = b ? 0 : qtk_err_set(&f->m->err, QTK_E_IO, f->m->path, -1, NULL, "out of memory");
	if (!rc)
		rc = qtk_pread_full(f->m->fds[p->file], f->m->files[p->file], b, (size_t)p->nbytes, p->offset, &f->m->err);
	for (uint64_t k = 0; !rc && k < p->nbytes / 4; k++) {
		float v = f32_at(b + 4 * k);
		if (!isfinite(v) || v < 0)
			rc = qtk_fold_terr(f->m, sname, "scale %llu is %g (scales must be finite and not negative)", (unsigned long long)k,
				   (double)v);
	}
	qtk_free(b);
	return rc;
}

static int side_module(ct_fold *f, const side_fold *sf, const char *mod, size_t plen, long *c, qtk_tensor *out)
{
	qtk_model *m = f->m;
	int pl = (int)(plen > 200 ? 200 : plen);
	for (int k = 0; k < 3 && sf->suffix[k]; k++) {
		c[k] = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, sf->suffix[k]);
		if (c[k] < 0)
			return qtk_fold_terr(f->m, m->tensors[qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, sf->mark)].name, "no '%.*s.%s' beside it", pl, mod,
				     sf->suffix[k]);
		const qtk_tensor *pt = &m->tensors[c[k]];
		if (pt->nparts != 1 || pt->layout.kind != QTK_LAYOUT_PLAIN)
			return qtk_fold_terr(f->m, pt->name, "not a stored tensor");
	}
	const qtk_tensor *w = &m->tensors[c[0]];
	if (w->ndim != 2)
		return qtk_fold_terr(f->m, w->name, "must be a 2-D tensor");
	if (qtk_fold_new_tensor(f->m, out, QTK_MAX_PARTS))
		return QTK_E_IO;
	out->ndim = 2;
	out->shape[0] = w->shape[0];
	out->shape[1] = sf->l.kind == QTK_LAYOUT_NVFP4 ? w->shape[1] * 2 : w->shape[1];
	out->layout = sf->l;
	for (int k = 0; k < 3 && sf->suffix[k]; k++) {
		out->parts[k] = m->tensors[c[k]].parts[0];
		snprintf(out->parts[k].role, sizeof out->parts[k].role, "%s", sf->role[k]);
		out->nparts = k + 1;
	}
	if (sf->l.kind == QTK_LAYOUT_FP8) {
		int rc = fp8_scale_shape(f, m->tensors[c[1]].name, out, &out->parts[1]);
		if (!rc)
			rc = fp8_scale_values(f, m->tensors[c[1]].name, &out->parts[1]);
		if (rc)
			return rc;
	}
	qtk_tensor_finish(out);
	char why[300];
	int bad = -1;
	if (!out->layout.group_size)
		out->layout.group_size = out->shape[1] > UINT32_MAX ? 0 : (uint32_t)out->shape[1];
	if (!out->layout.group_size)
		return qtk_fold_terr(f->m, w->name, "in_features %llu is too large", (unsigned long long)out->shape[1]);
	if (out->shape[1] % out->layout.group_size)
		return qtk_fold_terr(f->m, w->name, "in_features %llu is not a multiple of the block %u (partial blocks are refused)",
			     (unsigned long long)out->shape[1], out->layout.group_size);
	if (qtk_scheme_check(out, &bad, why, sizeof why))
		return qtk_fold_terr(f->m, m->tensors[c[bad >= 0 && bad < out->nparts ? bad : 0]].name, "%s", why);
	char *name = qtk_malloc(plen + 8);
	if (!name)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	memcpy(name, mod, plen);
	memcpy(name + plen, ".weight", 8);
	out->name = name;
	return 0;
}

static int side_run(ct_fold *f, const side_fold *sf)
{
	qtk_model *m = f->m;
	size_t n = m->ntensors, nmod = 0;
	long *gid = qtk_malloc(n * sizeof *gid);
	qtk_tensor *mods = qtk_calloc(n + 1, sizeof *mods);
	int rc = gid && mods ? 0 : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	for (size_t i = 0; i < n && !rc; i++)
		gid[i] = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t plen;
		if (!ends_with(nm, strlen(nm), sf->mark, &plen))
			continue;
		if (plen > QTK_CAP_NAME) {
			rc = qtk_fold_terr(f->m, nm, "name too long");
			break;
		}
		char mod[QTK_CAP_NAME + 1];
		snprintf(mod, sizeof mod, "%.*s", (int)plen, nm);
		const cJSON *e;
		cJSON_ArrayForEach(e, sf->skip)
		{
			if (cJSON_IsString(e) && fnmatch(e->valuestring, mod, 0) == 0) {
				rc = qtk_fold_terr(f->m, nm, "module '%.200s' is excluded by the config ('%.60s') but stored quantized", mod,
					   e->valuestring);
				break;
			}
		}
		long c[3] = {-1, -1, -1};
		if (rc || (rc = side_module(f, sf, mod, plen, c, &mods[nmod])))
			break;
		for (int x = 0; x < 3; x++)
			if (c[x] >= 0)
				gid[c[x]] = (long)nmod;
		nmod++;
	}
	/* codes of the scheme's dtype that no module claimed */
	for (size_t i = 0; i < n && !rc; i++) {
		const qtk_tensor *t = &m->tensors[i];
		size_t plen;
		if (gid[i] < 0 && t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == sf->l.type && t->ndim == 2 &&
		    ends_with(t->name, strlen(t->name), sf->suffix[0], &plen))
			rc = qtk_fold_terr(f->m, t->name, "%s codes without '.%s'", qtk_type(t->layout.type)->upper, sf->mark);
	}
	if (!rc)
		rc = qtk_fold_replace(m, gid, NULL, mods, &nmod);
	for (size_t i = 0; i < nmod; i++)
		qtk_free(mods[i].name);
	qtk_free(gid);
	qtk_free(mods);
	return rc;
}

static int side_fold_run(qtk_model *m, const char *cfgfile, side_fold *sf, const cJSON *qc, bool modelopt)
{
	ct_fold *f = qtk_calloc(1, sizeof *f);
	if (!f)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	f->m = m;
	f->cfgfile = cfgfile;
	int rc = 0;
	if (modelopt) {
		/* the algorithm was matched to the layout by qtk_modelopt_fold */
	} else {
		const cJSON *bs = item(qc, "weight_block_size"), *fmt = item(qc, "fmt"), *as = item(qc, "activation_scheme");
		int64_t br = 0, bc = 0;
		if (fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "e4m3")))
			rc = qtk_fold_cerr(f->m, f->cfgfile, "fmt", "only e4m3 weights are supported");
		else if (as && !cJSON_IsNull(as) &&
			 (!cJSON_IsString(as) || (strcmp(as->valuestring, "dynamic") && strcmp(as->valuestring, "static"))))
			rc = qtk_fold_cerr(f->m, f->cfgfile, "activation_scheme", "must be \"dynamic\" or \"static\"");
		else if (!bs || cJSON_IsNull(bs)) { /* per tensor: weight_scale F32 [] (input_scale stays plain) */
			sf->mark = "weight_scale";
			sf->suffix[1] = "weight_scale";
			sf->l.strategy = QTK_SCHEME_PER_TENSOR;
			sf->l.group_size = 0;
		} else if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 ||
			   !qtk_json_i64(cJSON_GetArrayItem(bs, 0), &br) || !qtk_json_i64(cJSON_GetArrayItem(bs, 1), &bc) ||
			   br < 1 || bc < 1 || br > (1 << 20) || bc > (1 << 20))
			rc = qtk_fold_cerr(f->m, f->cfgfile, "weight_block_size", "must be [rows, columns] of positive sizes");
		else if (br != bc)
			rc = qtk_fold_cerr(f->m, f->cfgfile, "weight_block_size", "only square blocks are supported");
		else
			sf->l.group_size = (uint32_t)br;
	}
	const cJSON *skip = sf->skip;
	if (!rc && skip && !cJSON_IsNull(skip) && !cJSON_IsArray(skip))
		rc = qtk_fold_cerr(f->m, f->cfgfile, "ignore", "must be an array of strings");
	if (!rc && m->ntensors) {
		f->by = qtk_fold_index(m);
		rc = f->by ? side_run(f, sf) : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	}
	qtk_free(f->by);
	qtk_free(f);
	return rc;
}

int qtk_fp8_fold(qtk_model *m, const cJSON *qc, const char *cfgfile)
{
	side_fold sf = {.mark = "weight_scale_inv",
			.suffix = {"weight", "weight_scale_inv"},
			.role = {"weight", "scale"},
			.l = {.kind = QTK_LAYOUT_FP8, .type = QTK_DT_F8_E4M3, .bits = 8, .sym = true,
			      .strategy = QTK_SCHEME_PER_BLOCK, .scale_type = QTK_T_F32}};
	return side_fold_run(m, cfgfile, &sf, qc, false);
}

/* ModelOpt (quant_method "modelopt"): quant_algo NVFP4, or FP8 in its three forms (weight
 * F8_E4M3, weight_scale F32): FP8 one scale [] per tensor, FP8_PER_CHANNEL_PER_TOKEN one per
 * output feature [out], FP8_PB_WO one per 128 x 128 block [out/128, 1, in/128, 1].
 * input_scale and the kv cache's k_scale / v_scale stay plain tensors. */
int qtk_modelopt_fold(qtk_model *m, const cJSON *qc, const char *cfgfile)
{
	side_fold sf = {.mark = "weight_scale_2",
			.suffix = {"weight", "weight_scale", "weight_scale_2"},
			.role = {"weight", "scale", "scale2"},
			.l = {.kind = QTK_LAYOUT_NVFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 16,
			      .scale_type = NV_MODELOPT},
			.skip = item(qc, "ignore")};
	static const struct {
		const char *algo;
		uint8_t strategy;
		uint32_t block;
	} fp8[] = {{"FP8", QTK_SCHEME_PER_TENSOR, 0},
		   {"FP8_PER_CHANNEL_PER_TOKEN", QTK_SCHEME_PER_GROUP, 0},
		   {"FP8_PB_WO", QTK_SCHEME_PER_BLOCK, 128}};
	const cJSON *alg = item(qc, "quant_algo");
	const char *a = cJSON_IsString(alg) ? alg->valuestring : NULL;
	bool found = a && !strcmp(a, "NVFP4");
	for (size_t i = 0; a && !found && i < sizeof fp8 / sizeof *fp8; i++)
		if (!qtk_strcasecmp(a, fp8[i].algo)) {
			sf = (side_fold){.mark = "weight_scale",
					 .suffix = {"weight", "weight_scale"},
					 .role = {"weight", "scale"},
					 .l = {.kind = QTK_LAYOUT_FP8, .type = QTK_DT_F8_E4M3, .bits = 8, .sym = true,
					       .strategy = fp8[i].strategy, .group_size = fp8[i].block,
					       .scale_type = QTK_T_F32},
					 .skip = item(qc, "ignore")};
			found = true;
		}
	if (!found) {
		char subj[64];
		snprintf(subj, sizeof subj, "key 'quant_algo'");
		return qtk_err_set(&m->err, QTK_E_DATA, cfgfile, -1, subj,
				   "unsupported ModelOpt algorithm '%.40s' (NVFP4, FP8, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO)",
				   a ? a : "?");
	}
	return side_fold_run(m, cfgfile, &sf, qc, true);
}
