/* awq.c - AutoAWQ GEMM: 4-bit codes, eight per int32 word in the order 0, 2, 4, 6, 1, 3, 5, 7
 * along the output features; one fp16 scale and 4-bit zero per output feature and group.
 *
 *   qweight  I32  [in, out / 8]
 *   qzeros   I32  [in / group, out / 8]
 *   scales   F16  [in / group, out]
 */
#include "scheme.h"
#include "dequant.h"
#include "internal.h"
#include "json.h"
#include "fold.h"
#include "qgroups.h"
#include "quant.h"
#include "packing.h"
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static void sh_qweight(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->in, s[1] = d->out / 8; }
static void sh_qzeros(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->ngroups, s[1] = d->out / 8; }
static void sh_scales(const qtk_scheme_dims *d, uint64_t s[2]) { s[0] = d->ngroups, s[1] = d->out; }

static const qtk_scheme_part parts[] = {
	{"qweight", QTK_T_I32, 2, false, false, sh_qweight},
	{"qzeros", QTK_T_I32, 2, false, true, sh_qzeros},
	{"scales", QTK_T_F16, 2, false, false, sh_scales},
};

static int check_layout(const qtk_tensor *t, char *why, size_t wn)
{
	if (t->layout.act_order || t->layout.gptq_version) {
		snprintf(why, wn, "awq layout with act_order or gptq_version set");
		return QTK_E_DATA;
	}
	if (t->shape[0] % 8) {
		snprintf(why, wn, "shape: out_features %llu is not a multiple of 8", (unsigned long long)t->shape[0]);
		return QTK_E_DATA;
	}
	return 0;
}

static int infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		 char *why, size_t wn)
{
	(void)present;
	(void)bits;
	*bad = 0;
	if (p[0].type != QTK_T_I32 || p[0].ndim != 2) {
		snprintf(why, wn, "qweight must be a 2-D I32 tensor");
		return QTK_E_DATA;
	}
	if (p[0].shape[1] > (1ull << 40)) {
		snprintf(why, wn, "qweight has %llu columns", (unsigned long long)p[0].shape[1]);
		return QTK_E_DATA;
	}
	*in = p[0].shape[0];
	*out = p[0].shape[1] * 8;
	return 0;
}

static int decode_rows(const qtk_tensor *t, const void *const *p, uint64_t o0, uint64_t n, float *dst)
{
	return qtk_dequant_awq_rows((const int32_t *)p[0], (const int32_t *)p[1], (const uint16_t *)p[2],
				    (uint32_t)t->shape[1], (uint32_t)t->shape[0], t->layout.group_size, (uint32_t)o0,
				    (uint32_t)n, dst);
}

/* The slice's own packed arrays from qtk_quant_awq, copied into the whole parts. */
static int encode_rows(const qtk_tensor *t, const float *x, uint64_t o0, uint64_t n, void *const *pp)
{
	uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1], group = t->layout.group_size;
	uint64_t ng = in / group, cols = n / 8, full = out / 8, c0 = o0 / 8;
	int32_t *qw = qtk_calloc((size_t)(in * cols), 4), *qz = qtk_calloc((size_t)(ng * cols) + 1, 4);
	uint16_t *sc = qtk_calloc((size_t)(ng * n), 2);
	int rc = -1;
	if (qw && qz && sc)
		rc = qtk_quant_awq(x, (uint32_t)n, in, group, qw, qz, sc);
	if (!rc) {
		for (uint64_t r = 0; r < in; r++)
			memcpy((int32_t *)pp[0] + r * full + c0, qw + r * cols, (size_t)cols * 4);
		for (uint64_t r = 0; r < ng; r++) {
			memcpy((int32_t *)pp[1] + r * full + c0, qz + r * cols, (size_t)cols * 4);
			memcpy((uint16_t *)pp[2] + r * out + o0, sc + r * n, (size_t)n * 2);
		}
	}
	qtk_free(qw);
	qtk_free(qz);
	qtk_free(sc);
	return rc;
}

static int to_groups(const qtk_tensor *t, const void *const *p, qgroups *g)
{
	return qg_from_awq((const uint32_t *)p[0], (const uint32_t *)p[1], (const uint16_t *)p[2], (uint32_t)t->shape[0],
			   (uint32_t)t->shape[1], t->layout.group_size, g);
}

static int from_groups(const qgroups *g, const qtk_tensor *o, bool wrap, void *const *p)
{
	(void)o;
	(void)wrap;
	return qg_to_awq(g, (uint32_t *)p[0], (uint32_t *)p[1], (uint16_t *)p[2]);
}


/* scheme.h runs_rows, 4 bits: qweight [in][out/8] with 8 outputs a word in AWQ's nibble order,
 * qzeros [ng][out/8], F16 scales [ng][out]. 16 inputs at a time (their rows of qweight stay in
 * cache across the columns): their words in lanes, each output's nibbles taken out and less its
 * zero (mod 256: the byte) into 16 bytes of its run. */
static int runs_rows(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, uint8_t *w)
{
	qtk_int4_runs k4;
	const int st = qtk_int4_runs_begin(t, pp, o0, n, w, &k4);
	if (st <= 0)
		return st;
	const uint8_t *qw = k4.qw, *qz = k4.qz;
	const uint64_t out = k4.out, g = k4.g, ng = k4.ng, runs = k4.runs;
	const size_t rb = 4 + 32;
	for (uint64_t gi = 0; gi < ng; gi++)
		for (uint64_t i0 = gi * g; i0 < (gi + 1) * g; i0 += 16)
			for (uint64_t c = o0 / 8; c < (o0 + n) / 8; c++) {
				const uint32_t zw = qtk_rd32(qz + 4 * (gi * (out / 8) + c));
				uint32_t v[16];
				for (unsigned k = 0; k < 16; k++)
					v[k] = qtk_rd32(qw + 4 * ((i0 + k) * (out / 8) + c));
				uint8_t *d = w + ((8 * c - o0) * runs + i0 / 32) * rb + 4 + i0 % 32;
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
				__m128i q4[4];
				memcpy(q4, v, sizeof q4);
				const __m128i m15 = _mm_set1_epi32(15);
				for (unsigned j = 0; j < 8; j++) {
					const unsigned sh = qtk_awq_shift(j);
					const __m128i cnt = _mm_cvtsi32_si128((int)sh);
					__m128i a[4];
					for (unsigned k = 0; k < 4; k++)
						a[k] = _mm_and_si128(_mm_srl_epi32(q4[k], cnt), m15);
					const __m128i b8 = _mm_packus_epi16(_mm_packs_epi32(a[0], a[1]), _mm_packs_epi32(a[2], a[3]));
					const __m128i zz = _mm_set1_epi8((char)((zw >> sh) & 15u));
					_mm_storeu_si128((__m128i *)(void *)(d + j * runs * rb), _mm_sub_epi8(b8, zz));
				}
#else
				for (unsigned j = 0; j < 8; j++) {
					const unsigned sh = qtk_awq_shift(j);
					for (unsigned k = 0; k < 16; k++)
						d[j * runs * rb + k] = (uint8_t)(((v[k] >> sh) & 15u) - ((zw >> sh) & 15u));
				}
#endif
			}
	return 0;
}

/* AutoAWQ's config: zero_point (default true) = asymmetric; version must be gemm. */
static void config_read(const cJSON *o, qtk_qcfg *q)
{
	const cJSON *zp = cJSON_GetObjectItemCaseSensitive(o, "zero_point");
	q->sym = cJSON_IsBool(zp) ? !cJSON_IsTrue(zp) : false;
	const cJSON *ver = cJSON_GetObjectItemCaseSensitive(o, "version");
	if (ver && (!cJSON_IsString(ver) || qtk_strcasecmp(ver->valuestring, "gemm") != 0))
		snprintf(q->bad, sizeof q->bad, "unsupported awq version '%.40s' (only gemm)",
			 cJSON_IsString(ver) ? ver->valuestring : "?");
}

static bool config_write(const qtk_qcfg *q, cJSON *o)
{
	return cJSON_AddBoolToObject(o, "zero_point", !q->sym) && cJSON_AddStringToObject(o, "version", "gemm");
}

const qtk_scheme qtk_scheme_awq = {
	.name = "awq-gemm",
	.title = "awq (gemm)",
	.quant_method = "awq",
	.kind = QTK_LAYOUT_AWQ,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_INT,
	.bits_mask = 1u << 4,
	.has_version = false,
	.row_align = 8,
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
	.config_hint = "\"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": G, \"version\": \"gemm\"}",
};
