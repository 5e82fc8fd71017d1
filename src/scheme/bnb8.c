/* bnb8.c - bitsandbytes LLM.int8 as transformers saves a model loaded with
 * BitsAndBytesConfig(load_in_8bit=True): per quantized linear module <m>
 *
 *   <m>.weight         I8  [out, in]  the row-wise codes CB
 *   <m>.SCB            F32 [out]      each row's absmax (row_stats)
 *   <m>.weight_format  U8  []         optional; Linear8bitLt writes 0 (row-major). Older
 *                                     bitsandbytes could write tiled GPU layouts (col32,
 *                                     col_turing, col_ampere): refused.
 *
 * folded into one logical tensor <m>.weight [out, in] of layout bnb8 (parts weight, SCB; the
 * one-byte weight_format is checked and dropped, it carries no value).
 *
 * A value is bitsandbytes' int8_vectorwise_dequant in float32, evaluated left to right:
 * f32(f32((float)w * SCB[row]) * c) with c = (float)(1/127) = 7.874015718698502e-3 (0x3c010204)
 * — torch multiplies the int8 codes by the float32 row stats, then by the python scalar, which
 * it rounds to float32. Not w * SCB / 127: the two differ in the last bit for some values.
 * A non-finite or negative SCB is refused when decoding (QTK_E_DATA). Read only. */
#include "scheme.h"
#include "bnb.h"
#include "fold.h"
#include "internal.h"
#include "json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The parts: weight I8 [out, in], SCB F32 [out] (a scheme with part_specs: the generic row
 * checks take two parts). */
static int bnb8_specs(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS], bool opt[QTK_MAX_PARTS])
{
	(void)l, (void)opt;
	memset(p, 0, 2 * sizeof *p);
	snprintf(p[0].role, sizeof p[0].role, "weight");
	p[0].type = QTK_T_I8;
	p[0].ndim = 2;
	p[0].shape[0] = d->out;
	p[0].shape[1] = d->in;
	snprintf(p[1].role, sizeof p[1].role, "SCB");
	p[1].type = QTK_T_F32;
	p[1].ndim = 1;
	p[1].shape[0] = d->out;
	return 2;
}

static int bnb8_check(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->gptq_version || l->act_order || !l->sym || l->type != QTK_T_I8 || l->nested_group || l->code_kind ||
	    l->meta_len || l->scale_type != QTK_T_F32)
		return qtk_why(why, wn, "bnb8 layout must be symmetric I8 codes with F32 row scales");
	if (l->group_size != t->shape[1])
		return qtk_why(why, wn, "bnb8 scales are per row: group %u is not in_features %llu", l->group_size,
			       (unsigned long long)t->shape[1]);
	return 0;
}

static int bnb8_infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		      char *why, size_t wn)
{
	(void)bits;
	*bad = 0;
	if (!present[0] || p[0].ndim != 2)
		return qtk_why(why, wn, "bnb8 weight must be 2-D [out, in]");
	*out = p[0].shape[0];
	*in = p[0].shape[1];
	return 0;
}

/* 1/127 as torch uses it: the python float 7.874015718698502e-3 rounded to float32. */
static float inv127(void) { return (float)(1.0 / 127.0); }

int qtk_bnb8_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	uint64_t out = t->shape[0], in = t->shape[1];
	if (!pp || !pp[0] || !pp[1] || !dst || t->nparts != 2 || t->ndim != 2 || o0 > out || n > out - o0)
		return -1;
	const int8_t *w = pp[0];
	const float c = inv127();
	for (uint64_t r = 0; r < n; r++) {
		float scb;
		memcpy(&scb, (const uint8_t *)pp[1] + 4 * (o0 + r), 4);
		if (!isfinite(scb) || scb < 0)
			return -1;
		const int8_t *row = w + (o0 + r) * in;
		for (uint64_t j = 0; j < in; j++) {
			float p = (float)row[j] * scb; /* float32, rounded before the second product (C11 5.2.4.2.2) */
			dst[r * in + j] = p * c;
		}
	}
	return 0;
}

static int bnb8_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	return qtk_bnb8_decode(t, pp, o0, n, dst);
}

static void bnb8_config_read(const cJSON *o, qtk_qcfg *q)
{
	(void)o;
	snprintf(q->bad, sizeof q->bad, "bitsandbytes configs are read per module");
}

const qtk_scheme qtk_scheme_bnb8 = {
	.name = "bnb8",
	.title = "bitsandbytes LLM.int8",
	.quant_method = "bitsandbytes", /* after bnb4 in scheme.c: by_method finds bnb4; bnb.c dispatches */
	.kind = QTK_LAYOUT_BNB8,
	.strategy = QTK_SCHEME_PER_CHANNEL,
	.codes = QTK_SCHEME_CODES_INT, /* signed: value = w * SCB / 127, no zero point */
	.bits_mask = 1u << 8,
	.row_align = 1,
	.nparts = 0,
	.check_layout = bnb8_check,
	.infer = bnb8_infer,
	.decode_rows = bnb8_decode,
	.config_read = bnb8_config_read,
	.part_specs = bnb8_specs,
	.forms = (const qtk_scheme_form[]){{{"weight", "SCB", NULL}, QTK_T_I8}},
	.nforms = 1,
	.config_hint = "\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_8bit\": true}",
};

/* ---- folding ------------------------------------------------------------------------------- */

typedef struct b8fold {
	qtk_model *m;
	const char *cfgfile;
	qtk_fold_name *by;
} b8fold;

static bool plain1(const qtk_tensor *t) { return t->nparts == 1 && t->layout.kind == QTK_LAYOUT_PLAIN; }

/* Does name end in one of the 4-bit part suffixes? */
static bool four_bit_part(const char *nm)
{
	static const char *const tails[] = {".weight.absmax", ".weight.quant_map", ".weight.nested_absmax",
					    ".weight.nested_quant_map"};
	size_t len = strlen(nm);
	for (size_t k = 0; k < sizeof tails / sizeof *tails; k++) {
		size_t tl = strlen(tails[k]);
		if (len > tl && !strcmp(nm + len - tl, tails[k]))
			return true;
	}
	return strstr(nm, ".weight.quant_state.") != NULL;
}

static bool ends_with(const char *nm, const char *tail, size_t *plen)
{
	size_t len = strlen(nm), tl = strlen(tail);
	if (len <= tl || strcmp(nm + len - tl, tail))
		return false;
	*plen = len - tl;
	return true;
}

/* The module <mod> (plen bytes) whose SCB tensor is si: weight, SCB and weight_format (or -1)
 * into c[0..2], the folded tensor into out. */
static int b8_module(b8fold *f, const char *mod, size_t plen, long si, long c[3], qtk_tensor *out)
{
	qtk_model *m = f->m;
	const qtk_tensor *st = &m->tensors[si];
	int pl = (int)(plen > 200 ? 200 : plen);
	c[0] = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight");
	c[1] = si;
	c[2] = qtk_fold_lookup(f->by, f->m->ntensors, mod, plen, "weight_format");
	if (c[0] < 0)
		return qtk_fold_terr(f->m, st->name, "no '%.*s.weight' beside it", pl, mod);
	const qtk_tensor *wt = &m->tensors[c[0]];
	if (!plain1(wt) || wt->layout.type != QTK_T_I8 || wt->ndim != 2)
		return qtk_fold_terr(f->m, wt->name, "an LLM.int8 weight must be a 2-D I8 tensor [out, in]");
	if (!plain1(st) || st->layout.type != QTK_T_F32 || st->ndim != 1 || st->shape[0] != wt->shape[0])
		return qtk_fold_terr(f->m, st->name, "SCB must be F32 [%llu] (one absmax per output row of the weight)",
			      (unsigned long long)wt->shape[0]);
	if (c[2] >= 0) {
		const qtk_tensor *ft = &m->tensors[c[2]];
		uint8_t v = 0xff;
		if (!plain1(ft) || ft->layout.type != QTK_DT_U8 || ft->n_params != 1 || ft->parts[0].nbytes != 1)
			return qtk_fold_terr(f->m, ft->name, "weight_format must be one U8 value");
		int rc = qtk_pread_full(m->fds[ft->parts[0].file], m->files[ft->parts[0].file], &v, 1, ft->parts[0].offset,
					&m->err);
		if (rc)
			return rc;
		if (v != 0)
			return qtk_fold_terr(f->m, ft->name, "weight_format %u is a tiled GPU layout; only 0 (row-major) is supported", v);
	}
	if (qtk_fold_new_tensor(f->m, out, QTK_MAX_PARTS))
		return QTK_E_IO;
	out->ndim = 2;
	out->shape[0] = wt->shape[0];
	out->shape[1] = wt->shape[1];
	out->layout = (qtk_layout){.kind = QTK_LAYOUT_BNB8, .type = QTK_T_I8, .bits = 8, .sym = true,
				   .group_size = (uint32_t)wt->shape[1], .strategy = QTK_SCHEME_PER_CHANNEL,
				   .scale_type = QTK_T_F32};
	if (wt->shape[1] == 0 || wt->shape[1] > UINT32_MAX)
		return qtk_fold_terr(f->m, wt->name, "in_features %llu out of range", (unsigned long long)wt->shape[1]);
	static const char *const roles[2] = {"weight", "SCB"};
	for (int k = 0; k < 2; k++) {
		qtk_part *p = &out->parts[out->nparts++];
		*p = m->tensors[c[k]].parts[0];
		snprintf(p->role, sizeof p->role, "%s", roles[k]);
	}
	qtk_tensor_finish(out);
	int bad = -1;
	char why[300];
	if (qtk_scheme_check(out, &bad, why, sizeof why))
		return qtk_fold_terr(f->m, m->tensors[c[bad == 1 ? 1 : 0]].name, "%s", why);
	char *name = qtk_malloc(plen + 8);
	if (!name)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	memcpy(name, mod, plen);
	memcpy(name + plen, ".weight", 8);
	out->name = name;
	return 0;
}

static int b8_run(b8fold *f)
{
	qtk_model *m = f->m;
	size_t n = m->ntensors, nmod = 0;
	long *gid = qtk_malloc(n * sizeof *gid);
	qtk_tensor *mods = qtk_calloc(n + 1, sizeof *mods);
	bool *drop = qtk_calloc(n + 1, 1);
	int rc = gid && mods && drop ? 0 : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	for (size_t i = 0; i < n && !rc; i++)
		gid[i] = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t plen = 0;
		if (four_bit_part(nm)) {
			rc = qtk_fold_terr(f->m, nm, "a bitsandbytes 4-bit part in a load_in_8bit checkpoint (%s)", f->cfgfile);
			break;
		}
		if (!ends_with(nm, ".SCB", &plen))
			continue;
		if (plen > QTK_CAP_NAME) {
			rc = qtk_fold_terr(f->m, nm, "name too long");
			break;
		}
		long c[3] = {-1, -1, -1};
		if ((rc = b8_module(f, nm, plen, (long)i, c, &mods[nmod])))
			break;
		for (int x = 0; x < 2; x++) {
			if (gid[c[x]] >= 0) {
				rc = qtk_fold_terr(f->m, m->tensors[c[x]].name, "belongs to two LLM.int8 modules");
				break;
			}
			gid[c[x]] = (long)nmod;
		}
		if (c[2] >= 0)
			drop[c[2]] = true;
		nmod++;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		size_t plen = 0;
		if (!drop[i] && ends_with(m->tensors[i].name, ".weight_format", &plen))
			rc = qtk_fold_terr(f->m, m->tensors[i].name, "weight_format without its module's SCB");
	}
	if (!rc)
		rc = qtk_fold_replace(m, gid, drop, mods, &nmod);
	for (size_t i = 0; i < nmod; i++)
		qtk_free(mods[i].name);
	qtk_free(gid);
	qtk_free(mods);
	qtk_free(drop);
	return rc;
}

int qtk_bnb8_fold(qtk_model *m, const char *cfgfile)
{
	b8fold f = {.m = m, .cfgfile = cfgfile};
	if (!m->ntensors)
		return 0;
	if (!(f.by = qtk_fold_index(m)))
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	int rc = b8_run(&f);
	qtk_free(f.by);
	return rc;
}
