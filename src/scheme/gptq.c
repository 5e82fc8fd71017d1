/* gptq.c - AutoGPTQ packing, checkpoint formats v1 (a stored zero z means z + 1, without
 * wrap-around) and v2 (zeros as stored): b-bit codes (b = 2, 3, 4, 8) as LSB-first bit streams
 * cut into 32-bit words, along the inputs for qweight and along the outputs for qzeros; 3-bit
 * codes cross words. One fp16 scale and b-bit zero per output feature and group; g_idx (the
 * group of each input, optional) records act-order.
 *
 *   qweight  I32  [in * b / 32, out]
 *   qzeros   I32  [in / group, out * b / 32]
 *   scales   F16  [in / group, out]
 *   g_idx    I32  [in]                       (optional)
 */
#include "scheme.h"
#include "dequant.h"
#include "fold.h"
#include "internal.h"
#include "json.h"
#include "qgroups.h"
#include "quant.h"
#include "packing.h"
#include <string.h>

static void sh_qweight(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->in * d->bits / 32, s[1] = d->out; }
static void sh_qzeros(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->ngroups, s[1] = d->out * d->bits / 32; }
static void sh_scales(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->ngroups, s[1] = d->out; }
static void sh_g_idx(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->in, s[1] = 0; }

static const qtk_scheme_part parts[] = {
	{"qweight", QTK_T_I32, 2, false, false, sh_qweight},
	{"qzeros", QTK_T_I32, 2, false, true, sh_qzeros},
	{"scales", QTK_T_F16, 2, false, false, sh_scales},
	{"g_idx", QTK_T_I32, 1, true, true, sh_g_idx},
};

static int check_layout(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	uint64_t out = t->shape[0], in = t->shape[1], b = l->bits;
	if (l->gptq_version != 1 && l->gptq_version != 2) {
		snprintf(why, wn, "gptq_version %u is not 1 or 2", l->gptq_version);
		return QTK_E_DATA;
	}
	if (in % 32 || (out * b) % 32) {
		snprintf(why, wn, "shape [%llu, %llu] does not pack into 32-bit words at %llu bits",
			 (unsigned long long)out, (unsigned long long)in, (unsigned long long)b);
		return QTK_E_DATA;
	}
	return 0;
}

static int infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		 char *why, size_t wn)
{
	*bad = 0;
	if (p[0].type != QTK_T_I32 || p[0].ndim != 2) {
		snprintf(why, wn, "qweight must be a 2-D I32 tensor");
		return QTK_E_DATA;
	}
	*out = p[0].shape[1];
	if (present[3]) {
		*bad = 3;
		if (p[3].type != QTK_T_I32 || p[3].ndim != 1) {
			snprintf(why, wn, "g_idx must be a 1-D I32 tensor");
			return QTK_E_DATA;
		}
		*in = p[3].shape[0];
	} else if (p[0].shape[0] > (1ull << 40) || !bits) {
		snprintf(why, wn, "qweight has %llu rows", (unsigned long long)p[0].shape[0]);
		return QTK_E_DATA;
	} else {
		*in = p[0].shape[0] * 32 / bits;
	}
	return 0;
}

static int decode_rows(const qtk_tensor *t, const void *const *p, uint64_t o0, uint64_t n, float *dst)
{
	uint32_t in = (uint32_t)t->shape[1], g = t->layout.group_size;
	return qtk_dequant_gptq_rows((const int32_t *)p[0], (const int32_t *)p[1], (const uint16_t *)p[2],
				     t->nparts > 3 ? (const int32_t *)p[3] : NULL, in, (uint32_t)t->shape[0], g, in / g,
				     t->layout.bits, t->layout.gptq_version, (uint32_t)o0, (uint32_t)n, dst);
}

/* The slice's own packed arrays from qtk_quant_gptq, copied into the whole parts (g_idx with
 * the first slice, the values it does not hold already: a caller may put them there first and
 * then encode every slice at once). */
static int encode_rows(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *pp)
{
	uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1], group = t->layout.group_size;
	unsigned bits = t->layout.bits;
	uint64_t ng = in / group, qrows = (uint64_t)in * bits / 32, zcols = n * bits / 32;
	uint64_t full_z = (uint64_t)out * bits / 32, z0 = o0 * bits / 32;
	int32_t *qw = qtk_calloc((size_t)(qrows * n), 4), *qz = qtk_calloc((size_t)(ng * zcols) + 1, 4);
	uint16_t *sc = qtk_calloc((size_t)(ng * n), 2);
	int32_t *gi = qtk_calloc(in, 4);
	int rc = -1;
	if (qw && qz && sc && gi)
		rc = qtk_quant_gptq(x, (uint32_t)n, in, group, bits, t->layout.sym, t->layout.gptq_version, qw, qz, sc,
				    gi);
	if (!rc) {
		for (uint64_t r = 0; r < qrows; r++)
			memcpy((int32_t *)pp[0] + r * out + o0, qw + r * n, (size_t)n * 4);
		for (uint64_t r = 0; r < ng; r++) {
			memcpy((int32_t *)pp[1] + r * full_z + z0, qz + r * zcols, (size_t)zcols * 4);
			memcpy((uint16_t *)pp[2] + r * out + o0, sc + r * n, (size_t)n * 2);
		}
		if (o0 == 0 && t->nparts > 3) { /* only what differs (write_shared) */
			int32_t *g = pp[3];
			for (uint32_t i = 0; i < in; i++)
				if (g[i] != gi[i])
					g[i] = gi[i];
		}
	}
	qtk_free(qw);
	qtk_free(qz);
	qtk_free(sc);
	qtk_free(gi);
	return rc;
}

/* g_idx as qtk_quant_gptq writes it (consecutive groups: input i in group i / group_size) */
static void write_shared(const qtk_tensor *t, void *const *pp)
{
	const uint32_t in = (uint32_t)t->shape[1], group = t->layout.group_size;
	if (t->nparts <= 3 || !group)
		return;
	int32_t *g = pp[3];
	for (uint32_t i = 0; i < in; i++)
		g[i] = (int32_t)(i / group);
}

static int to_groups(const qtk_tensor *t, const void *const *p, qgroups *g)
{
	return qg_from_gptq((const uint32_t *)p[0], (const uint32_t *)p[1], (const uint16_t *)p[2],
			    t->nparts > 3 ? (const int32_t *)p[3] : NULL, (uint32_t)t->shape[0], (uint32_t)t->shape[1],
			    t->layout.group_size, (uint32_t)t->parts[2].shape[0], t->layout.bits, t->layout.gptq_version,
			    g);
}

static int from_groups(const qgroups *g, const qtk_tensor *o, bool wrap, void *const *p)
{
	return qg_to_gptq(g, o->layout.gptq_version, wrap, (uint32_t *)p[0], (uint32_t *)p[1], (uint16_t *)p[2],
			  (int32_t *)p[3]);
}

static bool get_bool(const cJSON *o, const char *k, bool def)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsBool(c) ? cJSON_IsTrue(c) : def;
}


/* scheme.h runs_rows, 4 bits: qweight [in/8][out] with 8 inputs a word, LSB first, qzeros
 * [ng][out/8] (v1: the stored zero plus 1, as the decoder reads it), F16 scales [ng][out]. */
static int runs_rows(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, uint8_t *w)
{
	qtk_int4_runs k4;
	const int st = qtk_int4_runs_begin(t, pp, o0, n, w, &k4);
	if (st <= 0)
		return st;
	const uint8_t *qw = k4.qw, *qz = k4.qz;
	const uint64_t out = k4.out, g = k4.g, ng = k4.ng, runs = k4.runs;
	const size_t rb = 4 + 32;
	const int zoff = t->layout.gptq_version == 1 ? 1 : 0;
	for (uint64_t r = 0; r < n; r++) {
		const uint64_t o = o0 + r;
		for (uint64_t gi = 0; gi < ng; gi++) {
			const int z = (int)((qtk_rd32(qz + 4 * (gi * (out / 8) + o / 8)) >> (4 * (o % 8))) & 15u) + zoff;
			for (uint64_t w8 = gi * g / 8; w8 < (gi + 1) * g / 8; w8++) {
				const uint32_t v = qtk_rd32(qw + 4 * (w8 * out + o));
				uint8_t *d = w + (r * runs + (8 * w8) / 32) * rb + 4 + (8 * w8) % 32;
				for (unsigned j = 0; j < 8; j++)
					d[j] = (uint8_t)((int)((v >> (4 * j)) & 15u) - z);
			}
		}
	}
	return 0;
}

/* AutoGPTQ / GPTQModel config: sym (default true), desc_act, checkpoint_format (or format)
 * "gptq" or "gptq_v2"; marlin is refused. */
static void config_read(const cJSON *o, qtk_qcfg *q)
{
	q->sym = get_bool(o, "sym", true);
	q->desc_act = get_bool(o, "desc_act", false);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "checkpoint_format");
	if (!f)
		f = cJSON_GetObjectItemCaseSensitive(o, "format");
	q->version = 1;
	if (get_bool(o, "is_marlin_format", false))
		snprintf(q->bad, sizeof q->bad, "unsupported gptq checkpoint format 'marlin'");
	else if (f && cJSON_IsString(f) && strcmp(f->valuestring, "gptq_v2") == 0)
		q->version = 2;
	else if (f && (!cJSON_IsString(f) || strcmp(f->valuestring, "gptq") != 0))
		snprintf(q->bad, sizeof q->bad, "unsupported gptq checkpoint format '%.40s'",
			 cJSON_IsString(f) ? f->valuestring : "?");
}

static bool config_write(const qtk_qcfg *q, cJSON *o)
{
	return cJSON_AddBoolToObject(o, "desc_act", q->desc_act) && cJSON_AddBoolToObject(o, "sym", q->sym) &&
	       cJSON_AddStringToObject(o, "checkpoint_format", q->version == 2 ? "gptq_v2" : "gptq");
}

const qtk_scheme qtk_scheme_gptq = {
	.name = "gptq",
	.title = "gptq",
	.quant_method = "gptq",
	.kind = QTK_LAYOUT_GPTQ,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_INT,
	.bits_mask = 1u << 2 | 1u << 3 | 1u << 4 | 1u << 8,
	.has_version = true,
	.row_align = 32,
	.write_shared = write_shared,
	.nparts = (int)(sizeof parts / sizeof *parts),
	.parts = parts,
	.check_layout = check_layout,
	.infer = infer,
	.decode_rows = decode_rows,
	.encode_rows = encode_rows,
	.runs_rows = runs_rows,
	.to_groups = to_groups,
	.from_groups = from_groups,
	.transcodes = qtk_scheme_int_transcodes,
	.ntranscodes = QTK_SCHEME_INT_NTRANSCODES,
	.config_read = config_read,
	.config_write = config_write,
	.config_hint = "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": B, \"group_size\": G, \"sym\": S, "
		       "\"desc_act\": D}",
};
