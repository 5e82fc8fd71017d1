/* bnb.c - bitsandbytes 4-bit (NF4, FP4) as transformers saves a model loaded with
 * BitsAndBytesConfig(load_in_4bit=True): per quantized module <m>
 *
 *   <m>.weight                          U8  [out*in/2, 1]  two codes per byte, first one high
 *   <m>.weight.absmax                   F32 [out*in/B]     (double quant: U8 codes of absmax - offset)
 *   <m>.weight.quant_map                F32 [16]           the NF4 or FP4 code values
 *   <m>.weight.nested_absmax            F32 [ceil(out*in/B/NB)]  double quant only
 *   <m>.weight.nested_quant_map         F32 [256]          double quant only (signed dynamic map)
 *   <m>.weight.quant_state.bitsandbytes__nf4 (or __fp4)  U8 [len]: UTF-8 JSON {quant_type,
 *       blocksize, dtype, shape, and with double quant nested_blocksize, nested_dtype,
 *       nested_offset}
 *
 * folded into one logical tensor <m>.weight [out, in] of layout bnb4 whose parts carry short
 * roles (weight, absmax, qmap, nabsmax, nqmap, qs_nf4 / qs_fp4; bnb_suffix maps them back).
 * Blocks run over the flattened matrix; qtk requires in % B == 0 so they never straddle rows.
 * The nested offset lives in the quant_state JSON part and is read from it when decoding.
 *
 * A value is f32(quant_map[code] * absmax) rounded to the quant-state dtype, where with double
 * quant absmax = f32(nested_quant_map[c] * nested_absmax[block / NB]) + offset (bitsandbytes'
 * dequantize_4bit on its CPU / torch path). Read only: qtk never writes this scheme. */
#include "scheme.h"
#include "bnb.h"
#include "dequant.h"
#include "fold.h"
#include "internal.h"
#include "json.h"
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define QS_MAX 4096 /* bytes of a quant_state JSON */

/* bitsandbytes' code tables (functional.py get_4bit_type), as float32 bits. */
static const uint32_t nf4_bits[16] = {0xbf800000, 0xbf3239b1, 0xbf066b30, 0xbeca32a0, 0xbe91a24d, 0xbe3d353f,
				      0xbdba7871, 0x00000000, 0x3da2faff, 0x3e24cae3, 0x3e7c04dd, 0x3ead033a,
				      0x3ee1a4b8, 0x3f1007ab, 0x3f3913b3, 0x3f800000};
static const uint32_t fp4_bits[16] = {0x00000000, 0x3baaaaab, 0x3f2aaaab, 0x3f800000, 0x3eaaaaab, 0x3f000000,
				      0x3e2aaaab, 0x3e800000, 0x00000000, 0xbbaaaaab, 0xbf2aaaab, 0xbf800000,
				      0xbeaaaaab, 0xbf000000, 0xbe2aaaab, 0xbe800000};

const uint32_t *qtk_bnb_code_table(int fp4) { return fp4 ? fp4_bits : nf4_bits; }

static float f32_at(const void *p, uint64_t i)
{
	float f;
	memcpy(&f, (const uint8_t *)p + 4 * i, 4);
	return f;
}

static bool pow2_in(uint64_t v, uint64_t lo, uint64_t hi) { return v >= lo && v <= hi && !(v & (v - 1)); }

static bool dq(const qtk_layout *l) { return l->nested_group != 0; }

static void set_part(qtk_part *p, const char *role, unsigned type, int ndim, uint64_t a, uint64_t b)
{
	memset(p, 0, sizeof *p);
	snprintf(p->role, sizeof p->role, "%s", role);
	p->type = type;
	p->ndim = ndim;
	p->shape[0] = a;
	p->shape[1] = ndim > 1 ? b : 0;
}

static int bnb_specs(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS], bool opt[QTK_MAX_PARTS])
{
	(void)opt;
	int n = 0;
	uint64_t nblk = d->out * d->ngroups;
	set_part(&p[n++], "weight", QTK_DT_U8, 2, d->out * d->in / 2, 1);
	set_part(&p[n++], "absmax", dq(l) ? QTK_DT_U8 : QTK_T_F32, 1, nblk, 0);
	set_part(&p[n++], "qmap", QTK_T_F32, 1, 16, 0);
	if (dq(l)) {
		set_part(&p[n++], "nabsmax", QTK_T_F32, 1, (nblk + l->nested_group - 1) / l->nested_group, 0);
		set_part(&p[n++], "nqmap", QTK_T_F32, 1, 256, 0);
	}
	set_part(&p[n++], l->code_kind ? "qs_fp4" : "qs_nf4", QTK_DT_U8, 1, l->meta_len, 0);
	return n;
}

static int bnb_check(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->gptq_version || l->act_order || !l->sym || l->type != QTK_DT_U8)
		return qtk_why(why, wn, "bnb4 layout must be symmetric U8 codes without act-order");
	if (l->scale_type != QTK_T_F16 && l->scale_type != QTK_T_BF16 && l->scale_type != QTK_T_F32)
		return qtk_why(why, wn, "bnb4 dtype must be float16, bfloat16 or float32");
	if (!pow2_in(l->group_size, 32, 4096))
		return qtk_why(why, wn, "bnb4 blocksize %u is not a power of two in 32..4096", l->group_size);
	if (l->nested_group && !pow2_in(l->nested_group, 32, 4096))
		return qtk_why(why, wn, "bnb4 nested blocksize %u is not a power of two in 32..4096", l->nested_group);
	if (l->code_kind > 1 || l->meta_len < 2 || l->meta_len > QS_MAX)
		return qtk_why(why, wn, "bnb4 quant type %u or quant_state length %u out of range", l->code_kind,
			       l->meta_len);
	return 0;
}

static int no_infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		    char *why, size_t wn)
{
	(void)p, (void)present, (void)bits, (void)out, (void)in;
	*bad = 0;
	return qtk_why(why, wn, "bitsandbytes layers are read through their quant_state (bnb.c)");
}

/* ---- the quant_state JSON ------------------------------------------------------------------ */

static const char *const dtypes[3] = {"float16", "bfloat16", "float32"};
static const unsigned dtype_t[3] = {QTK_T_F16, QTK_T_BF16, QTK_T_F32};

static int qs_why(char *why, size_t wn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int qs_why(char *why, size_t wn, const char *fmt, ...)
{
	if (why && wn) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, wn, fmt, ap);
		va_end(ap);
	}
	return QTK_E_DATA;
}

int qtk_bnb_parse_state(const char *text, size_t len, qtk_bnb_state *s, char *why, size_t wn)
{
	memset(s, 0, sizeof *s);
	if (len < 2 || len > QS_MAX)
		return qs_why(why, wn, "quant_state is %zu bytes (2..%d)", len, QS_MAX);
	qtk_err e = {0};
	qtk_json_doc d = {0};
	if (qtk_json_parse(text, len, QTK_JSON_BRACE_FIRST, "quant_state", 0, &e, &d))
		return qs_why(why, wn, "quant_state is not strict JSON: %.200s", e.msg);
	int rc = 0;
	const cJSON *r = d.root, *it;
	bool have[7] = {false};
	static const char *const keys[7] = {"quant_type",       "blocksize",    "dtype",        "shape",
					    "nested_blocksize", "nested_dtype", "nested_offset"};
	if (!cJSON_IsObject(r)) {
		rc = qs_why(why, wn, "quant_state is not a JSON object");
		goto out;
	}
	cJSON_ArrayForEach(it, r)
	{
		int k = 0;
		while (k < 7 && strcmp(it->string, keys[k]))
			k++;
		if (k == 7) {
			rc = qs_why(why, wn, "quant_state has an unknown key '%.40s'", it->string);
			goto out;
		}
		have[k] = true;
	}
	for (int k = 0; k < 4; k++)
		if (!have[k]) {
			rc = qs_why(why, wn, "quant_state has no '%s'", keys[k]);
			goto out;
		}
	it = cJSON_GetObjectItemCaseSensitive(r, "quant_type");
	if (!cJSON_IsString(it) || (strcmp(it->valuestring, "nf4") && strcmp(it->valuestring, "fp4"))) {
		rc = qs_why(why, wn, "quant_state quant_type is not \"nf4\" or \"fp4\"");
		goto out;
	}
	s->fp4 = !strcmp(it->valuestring, "fp4");
	uint64_t v;
	if (!qtk_json_u64(cJSON_GetObjectItemCaseSensitive(r, "blocksize"), &v) || !pow2_in(v, 32, 4096)) {
		rc = qs_why(why, wn, "quant_state blocksize is not a power of two in 32..4096");
		goto out;
	}
	s->blocksize = (uint32_t)v;
	it = cJSON_GetObjectItemCaseSensitive(r, "dtype");
	int dt = -1;
	for (int k = 0; k < 3 && cJSON_IsString(it); k++)
		if (!strcmp(it->valuestring, dtypes[k]))
			dt = k;
	if (dt < 0) {
		rc = qs_why(why, wn, "quant_state dtype is not float16, bfloat16 or float32");
		goto out;
	}
	s->dtype = dtype_t[dt];
	it = cJSON_GetObjectItemCaseSensitive(r, "shape");
	uint64_t a = 0, b = 0;
	if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !qtk_json_u64(cJSON_GetArrayItem(it, 0), &a) ||
	    !qtk_json_u64(cJSON_GetArrayItem(it, 1), &b) || !a || !b || a > (1ull << 32) || b > (1ull << 32)) {
		rc = qs_why(why, wn, "quant_state shape is not [out, in] with both in 1..2^32");
		goto out;
	}
	s->out = a;
	s->in = b;
	bool nested = have[4] || have[5] || have[6];
	if (nested && !(have[4] && have[5] && have[6])) {
		rc = qs_why(why, wn, "quant_state has some but not all of nested_blocksize, nested_dtype, nested_offset");
		goto out;
	}
	if (nested) {
		if (!qtk_json_u64(cJSON_GetObjectItemCaseSensitive(r, "nested_blocksize"), &v) || !pow2_in(v, 32, 4096)) {
			rc = qs_why(why, wn, "quant_state nested_blocksize is not a power of two in 32..4096");
			goto out;
		}
		s->nested_blocksize = (uint32_t)v;
		it = cJSON_GetObjectItemCaseSensitive(r, "nested_dtype");
		if (!cJSON_IsString(it) || strcmp(it->valuestring, "float32")) {
			rc = qs_why(why, wn, "quant_state nested_dtype is not float32");
			goto out;
		}
		it = cJSON_GetObjectItemCaseSensitive(r, "nested_offset");
		if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > 1e30) {
			rc = qs_why(why, wn, "quant_state nested_offset is not a finite number");
			goto out;
		}
		s->nested_offset = (float)it->valuedouble; /* torch.tensor(offset): float32 */
	}
out:
	qtk_json_doc_free(&d);
	return rc;
}

/* ---- decoding ------------------------------------------------------------------------------ */

static float to_dtype(float v, unsigned dtype)
{
	if (dtype == QTK_T_BF16)
		return qtk_bf16_to_f32(qtk_f32_to_bf16(v));
	if (dtype == QTK_T_F16)
		return qtk_fp16_to_f32(qtk_f32_to_fp16(v));
	return v;
}

int qtk_bnb_decode(const qtk_tensor *t, const void *const *pp, bool cast, uint64_t o0, uint64_t n, float *dst)
{
	const qtk_layout *l = &t->layout;
	uint64_t out = t->shape[0], in = t->shape[1], bs = l->group_size;
	if (!pp || !dst || t->nparts < 4 || !bs || in % bs || o0 > out || n > out - o0)
		return -1;
	const uint8_t *w = pp[0], *qs = pp[t->nparts - 1];
	const void *absmax = pp[1], *qmap = pp[2];
	float offset = 0;
	uint32_t nbs = l->nested_group;
	if (nbs) {
		qtk_bnb_state s;
		if (t->nparts != 6 || qtk_bnb_parse_state((const char *)qs, l->meta_len, &s, NULL, 0) || !s.nested_blocksize)
			return -1;
		offset = s.nested_offset;
	}
	float map[16];
	for (int k = 0; k < 16; k++)
		map[k] = f32_at(qmap, (uint64_t)k);
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t g = 0; g < in / bs; g++) {
			uint64_t blk = o * (in / bs) + g;
			float am;
			if (nbs)
				am = f32_at(pp[4], ((const uint8_t *)absmax)[blk]) * f32_at(pp[3], blk / nbs) + offset;
			else
				am = f32_at(absmax, blk);
			if (!isfinite(am))
				return -1;
			for (uint64_t j = 0; j < bs; j++) {
				uint64_t e = o * in + g * bs + j;
				uint8_t c = w[e / 2];
				c = e % 2 ? c & 15 : c >> 4;
				float v = map[c] * am;
				dst[r * in + g * bs + j] = cast ? to_dtype(v, l->scale_type) : v;
			}
		}
	}
	return 0;
}

static int bnb_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	return qtk_bnb_decode(t, pp, true, o0, n, dst);
}

static const char *bnb_suffix(const char *role)
{
	static const char *const map[][2] = {{"absmax", "weight.absmax"},
					     {"qmap", "weight.quant_map"},
					     {"nabsmax", "weight.nested_absmax"},
					     {"nqmap", "weight.nested_quant_map"},
					     {"qs_nf4", "weight.quant_state.bitsandbytes__nf4"},
					     {"qs_fp4", "weight.quant_state.bitsandbytes__fp4"}};
	for (size_t i = 0; i < sizeof map / sizeof *map; i++)
		if (!strcmp(role, map[i][0]))
			return map[i][1];
	return role;
}

static void bnb_config_read(const cJSON *o, qtk_qcfg *q)
{
	(void)o;
	snprintf(q->bad, sizeof q->bad, "bitsandbytes configs are read per module");
}

const qtk_scheme qtk_scheme_bnb4 = {
	.name = "bnb4",
	.title = "bitsandbytes 4-bit",
	.quant_method = "bitsandbytes",
	.kind = QTK_LAYOUT_BNB4,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_FLOAT,
	.bits_mask = 1u << 4,
	.row_align = 1,
	.nparts = 0,
	.check_layout = bnb_check,
	.infer = no_infer,
	.decode_rows = bnb_decode,
	.suffix = bnb_suffix,
	.config_read = bnb_config_read,
	.part_specs = bnb_specs,
	.forms = (const qtk_scheme_form[]){{{"weight", "absmax", "qmap", NULL}, QTK_DT_U8}},
	.nforms = 1,
	.config_hint = "\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true, "
		       "\"bnb_4bit_quant_type\": T}",
};

/* ---- folding ------------------------------------------------------------------------------- */

typedef struct bfold {
	qtk_model *m;
	const char *cfgfile;
	int want_fp4; /* the config's bnb_4bit_quant_type: -1 not given */
	qtk_fold_name *by;
} bfold;

static const char *const sfx[5] = {"weight", "weight.absmax", "weight.quant_map", "weight.nested_absmax",
				   "weight.nested_quant_map"};

/* The module <mod> (plen bytes) whose quant_state tensor is qi: its tensors into c[0..5]. */
static int bnb_module(bfold *f, const char *mod, size_t plen, long qi, bool fp4, long c[6], qtk_tensor *out)
{
	qtk_model *m = f->m;
	const qtk_tensor *qt = &m->tensors[qi];
	int pl = (int)(plen > 200 ? 200 : plen);
	if (qt->nparts != 1 || qt->layout.kind != QTK_LAYOUT_PLAIN || qt->layout.type != QTK_DT_U8 || qt->ndim != 1)
		return qtk_fold_terr(f->m, qt->name, "quant_state must be a 1-D U8 tensor");
	if (qt->parts[0].nbytes < 2 || qt->parts[0].nbytes > QS_MAX)
		return qtk_fold_terr(f->m, qt->name, "quant_state is %llu bytes (2..%d)", (unsigned long long)qt->parts[0].nbytes, QS_MAX);
	char text[QS_MAX], why[300];
	size_t len = (size_t)qt->parts[0].nbytes;
	int rc = qtk_fold_read_small(f->m, qt, (uint8_t *)text, len);
	if (rc)
		return rc;
	qtk_bnb_state s;
	if (qtk_bnb_parse_state(text, len, &s, why, sizeof why))
		return qtk_fold_terr(f->m, qt->name, "%s", why);
	if (s.fp4 != fp4)
		return qtk_fold_terr(f->m, qt->name, "quant_state says quant_type %s but the tensor is named for %s",
			     s.fp4 ? "fp4" : "nf4", fp4 ? "fp4" : "nf4");
	if (f->want_fp4 >= 0 && s.fp4 != (f->want_fp4 == 1))
		return qtk_fold_terr(f->m, qt->name, "quant_type %s differs from the config's bnb_4bit_quant_type (%s)",
			     s.fp4 ? "fp4" : "nf4", f->cfgfile);
	bool nested = s.nested_blocksize != 0;
	for (int k = 0; k < 5; k++) {
		c[k] = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, sfx[k]);
		if (c[k] < 0 && (k < 3 || nested))
			return qtk_fold_terr(f->m, qt->name, "no '%.*s.%s' beside it", pl, mod, sfx[k]);
		if (c[k] >= 0 && k >= 3 && !nested)
			return qtk_fold_terr(f->m, m->tensors[c[k]].name, "nested tensor without nested fields in the quant_state");
		if (c[k] >= 0) {
			const qtk_tensor *pt = &m->tensors[c[k]];
			if (pt->nparts != 1 || pt->layout.kind != QTK_LAYOUT_PLAIN)
				return qtk_fold_terr(f->m, pt->name, "not a stored tensor");
		}
	}
	c[5] = qi;
	if (s.in % s.blocksize)
		return qtk_fold_terr(f->m, qt->name, "in_features %llu is not a multiple of the blocksize %u (blocks across rows are "
			     "not supported)", (unsigned long long)s.in, s.blocksize);
	if (qtk_fold_new_tensor(f->m, out, QTK_MAX_PARTS))
		return QTK_E_IO;
	out->ndim = 2;
	out->shape[0] = s.out;
	out->shape[1] = s.in;
	out->layout = (qtk_layout){.kind = QTK_LAYOUT_BNB4, .type = QTK_DT_U8, .bits = 4, .sym = true,
				   .group_size = s.blocksize, .strategy = QTK_SCHEME_PER_GROUP,
				   .scale_type = (uint16_t)s.dtype, .code_kind = s.fp4, .meta_len = (uint16_t)len,
				   .nested_group = s.nested_blocksize};
	static const char *const roles[6] = {"weight", "absmax", "qmap", "nabsmax", "nqmap", "qs"};
	for (int k = 0; k < 6; k++) {
		if (c[k] < 0)
			continue;
		qtk_part *p = &out->parts[out->nparts++];
		*p = m->tensors[c[k]].parts[0];
		snprintf(p->role, sizeof p->role, "%s", k == 5 ? (fp4 ? "qs_fp4" : "qs_nf4") : roles[k]);
	}
	qtk_tensor_finish(out);
	int bad = -1;
	if (qtk_scheme_check(out, &bad, why, sizeof why)) {
		int ci = 0, j = 0;
		for (int k = 0; k < 6; k++)
			if (c[k] >= 0 && j++ == bad)
				ci = k;
		return qtk_fold_terr(f->m, m->tensors[c[bad >= 0 ? ci : 5]].name, "%s (quant_state shape [%llu, %llu], blocksize %u)",
			     why, (unsigned long long)s.out, (unsigned long long)s.in, s.blocksize);
	}
	/* the small parts: the code map must be bitsandbytes' table for the quant type (its CUDA
	 * kernels use their own copy, the CPU path the stored one), the nested ones finite */
	uint8_t qm[64];
	if ((rc = qtk_fold_read_small(f->m, &m->tensors[c[2]], qm, sizeof qm)))
		return rc;
	const uint32_t *tab = qtk_bnb_code_table(fp4);
	for (int k = 0; k < 16; k++) {
		uint32_t b = qtk_rd32(qm + 4 * k);
		if (b != tab[k] && !(fp4 && k == 8 && b == 0x80000000u))
			return qtk_fold_terr(f->m, m->tensors[c[2]].name, "quant_map[%d] is not bitsandbytes' %s value", k,
				     fp4 ? "fp4" : "nf4");
	}
	if (nested) {
		uint8_t *nb = qtk_malloc((size_t)m->tensors[c[3]].parts[0].nbytes + 1024);
		if (!nb)
			return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
		size_t nn = (size_t)m->tensors[c[3]].parts[0].nbytes;
		rc = qtk_fold_read_small(f->m, &m->tensors[c[4]], nb, 1024);
		for (int k = 0; k < 256 && !rc; k++) {
			float v = f32_at(nb, (uint64_t)k);
			if (!(v >= -1.0f && v <= 1.0f))
				rc = qtk_fold_terr(f->m, m->tensors[c[4]].name, "nested_quant_map[%d] is not in [-1, 1]", k);
		}
		if (!rc)
			rc = qtk_fold_read_small(f->m, &m->tensors[c[3]], nb, nn);
		for (size_t k = 0; k < nn / 4 && !rc; k++) {
			float v = f32_at(nb, k);
			if (!isfinite(v) || v < 0)
				rc = qtk_fold_terr(f->m, m->tensors[c[3]].name, "nested_absmax[%zu] is not a finite non-negative number", k);
		}
		qtk_free(nb);
		if (rc)
			return rc;
	}
	char *name = qtk_malloc(plen + 8);
	if (!name)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	memcpy(name, mod, plen);
	memcpy(name + plen, ".weight", 8);
	out->name = name;
	return 0;
}

/* Does name end in ".weight.<tail>" for one of the bnb part suffixes or a quant_state? */
static bool bnb_component(const char *nm)
{
	const char *w = strstr(nm, ".weight.");
	while (w) {
		const char *tail = w + 8;
		if (!strcmp(tail, "absmax") || !strcmp(tail, "quant_map") || !strcmp(tail, "nested_absmax") ||
		    !strcmp(tail, "nested_quant_map") || !strncmp(tail, "quant_state.", 12))
			return true;
		w = strstr(w + 1, ".weight.");
	}
	return false;
}

static int bnb_run(bfold *f)
{
	qtk_model *m = f->m;
	size_t n = m->ntensors, nmod = 0;
	long *gid = qtk_malloc(n * sizeof *gid);
	qtk_tensor *mods = qtk_calloc(n + 1, sizeof *mods);
	int rc = gid && mods ? 0 : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	for (size_t i = 0; i < n && !rc; i++)
		gid[i] = -1;
	static const char *const marks[2] = {".weight.quant_state.bitsandbytes__nf4",
					     ".weight.quant_state.bitsandbytes__fp4"};
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t len = strlen(nm), plen = 0;
		int fp4 = -1;
		for (int x = 0; x < 2; x++) {
			size_t ml = strlen(marks[x]);
			if (len > ml && !strcmp(nm + len - ml, marks[x])) {
				fp4 = x;
				plen = len - ml;
			}
		}
		if (fp4 < 0)
			continue;
		if (plen > QTK_CAP_NAME) {
			rc = qtk_fold_terr(f->m, nm, "name too long");
			break;
		}
		long c[6] = {-1, -1, -1, -1, -1, -1};
		if ((rc = bnb_module(f, nm, plen, (long)i, fp4 == 1, c, &mods[nmod])))
			break;
		for (int x = 0; x < 6; x++)
			if (c[x] >= 0)
				gid[c[x]] = (long)nmod;
		nmod++;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		size_t len = strlen(m->tensors[i].name);
		if (len > 4 && !strcmp(m->tensors[i].name + len - 4, ".SCB"))
			rc = qtk_fold_terr(f->m, m->tensors[i].name, "an LLM.int8 SCB in a checkpoint whose config is not load_in_8bit");
	}
	for (size_t i = 0; i < n && !rc; i++)
		if (gid[i] < 0 && bnb_component(m->tensors[i].name))
			rc = qtk_fold_terr(f->m, m->tensors[i].name,
				   "bitsandbytes component without its module's quant_state.bitsandbytes__nf4 or __fp4");
	if (!rc)
		rc = qtk_fold_replace(m, gid, NULL, mods, &nmod);
	for (size_t i = 0; i < nmod; i++)
		qtk_free(mods[i].name);
	qtk_free(gid);
	qtk_free(mods);
	return rc;
}

int qtk_bnb_fold(qtk_model *m, const cJSON *qc, const char *cfgfile)
{
	bfold f = {.m = m, .cfgfile = cfgfile, .want_fp4 = -1};
	const cJSON *l8 = cJSON_GetObjectItemCaseSensitive(qc, "load_in_8bit");
	const cJSON *l4 = cJSON_GetObjectItemCaseSensitive(qc, "load_in_4bit");
	const cJSON *qt = cJSON_GetObjectItemCaseSensitive(qc, "bnb_4bit_quant_type");
	if (l4 && !cJSON_IsBool(l4))
		return qtk_fold_cerr(f.m, f.cfgfile, "load_in_4bit", "must be true or false");
	if (l8 && !cJSON_IsBool(l8))
		return qtk_fold_cerr(f.m, f.cfgfile, "load_in_8bit", "must be true or false");
	if (cJSON_IsTrue(l8) && cJSON_IsTrue(l4))
		return qtk_fold_cerr(f.m, f.cfgfile, "load_in_8bit", "load_in_8bit and load_in_4bit are both true");
	if (cJSON_IsTrue(l8))
		return qtk_bnb8_fold(m, cfgfile); /* bnb8.c */
	if (qt && (!cJSON_IsString(qt) || (strcmp(qt->valuestring, "nf4") && strcmp(qt->valuestring, "fp4"))))
		return qtk_fold_cerr(f.m, f.cfgfile, "bnb_4bit_quant_type", "must be \"nf4\" or \"fp4\"");
	if (qt)
		f.want_fp4 = !strcmp(qt->valuestring, "fp4");
	if (!m->ntensors)
		return 0;
	f.by = qtk_fold_index(m);
	if (!f.by)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	int rc = bnb_run(&f);
	qtk_free(f.by);
	return rc;
}
