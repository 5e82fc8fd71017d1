/* mxfp4.c - MXFP4 layers (QTK_LAYOUT_MXFP4) in their two checkpoint forms: gpt-oss experts
 * (quant_method "mxfp4", layout.scale_type 0) and compressed-tensors' mxfp4-pack-quantized
 * (layout.scale_type 1, folded by ct.c).
 *
 * gpt-oss: a linear (in gpt-oss: a stack of expert matrices) is stored as two tensors beside each other,
 * joined to their prefix by an underscore, not a dot:
 *   <prefix>_blocks  U8 [E, out, in/32, 16]  FP4 E2M1 codes, 32 per block: byte j of a block
 *                    holds element 2j in its low nibble and 2j+1 in its high nibble (bit 3 is
 *                    the sign: code 8 is -0.0)
 *   <prefix>_scales  U8 [E, out, in/32]      E8M0: the block's factor is 2^(s - 127)
 * folded into one logical tensor <prefix> [E, out, in] (a 2-D [out, in] without E); the
 * value of an element is e2m1(code) * 2^(s - 127), as transformers' convert_moe_packed_tensors
 * computes it (exact in F32: every product has two significant bits). <prefix>_bias stays a
 * plain tensor.
 *
 * ggml's MXFP4 block (17 bytes: E8M0 e, 16 bytes) holds the same 32 codes with element j in
 * the low nibble of byte j and element j+16 in the high one; it decodes kvalues[code] *
 * 2^(e - 128) with kvalues the doubled E2M1 table, so e = s and the codes carry over: a byte
 * shuffle. Code 8 is +0.0 there.
 *
 * compressed-tensors (llm-compressor's MXFP4 preset: float, 4 bits, strategy group, group 32,
 * scale_dtype uint8): <module>.weight_packed U8 [out, in/2] and <module>.weight_scale U8
 * [out, in/32] -- the same bytes as gpt-oss's blocks and scales of one matrix, only shaped
 * differently, so one decoder serves both (code 8 is -0.0 there too). */
#include "fold.h"
#include "internal.h"
#include "json.h"
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MX_BLOCK 32u
#define MX_BYTES 16u /* code bytes per block */

static const float e2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
			       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

static void set_part(qtk_part *p, const char *role, int ndim, uint64_t a, uint64_t b, uint64_t c)
{
	memset(p, 0, sizeof *p);
	snprintf(p->role, sizeof p->role, "%s", role);
	p->type = QTK_DT_U8;
	p->ndim = ndim;
	p->shape[0] = a;
	p->shape[1] = b;
	p->shape[2] = ndim > 2 ? c : 0;
}

static int mx_specs(const qtk_layout *l, const qtk_scheme_dims *d, qtk_part p[QTK_MAX_PARTS], bool opt[QTK_MAX_PARTS])
{
	(void)opt;
	if (l->scale_type == QTK_MXFP4_CT) {
		set_part(&p[0], "packed", 2, d->out, d->in / 2, 0);
		set_part(&p[1], "scale", 2, d->out, d->ngroups, 0);
		return 2;
	}
	set_part(&p[0], "blocks", 3, d->out, d->ngroups, MX_BYTES);
	set_part(&p[1], "scales", 2, d->out, d->ngroups, 0);
	return 2;
}

static int mx_check(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (l->gptq_version || l->act_order || !l->sym || l->group_size != MX_BLOCK || l->type != QTK_DT_U8 ||
	    l->scale_type > QTK_MXFP4_CT || l->strategy != QTK_SCHEME_PER_GROUP)
		return qtk_why(why, wn, "mxfp4 layout must be symmetric blocks of 32 in U8 bytes");
	if (l->scale_type == QTK_MXFP4_CT && t->ndim != 2)
		return qtk_why(why, wn, "compressed-tensors mxfp4 layers are 2-D, not %d-D", t->ndim);
	return 0;
}

static int mx_infer(const qtk_part *p, const bool *present, unsigned bits, uint64_t *out, uint64_t *in, int *bad,
		    char *why, size_t wn)
{
	(void)p, (void)present, (void)bits, (void)out, (void)in;
	*bad = 0;
	return qtk_why(why, wn, "mxfp4 layers are read through their config (mxfp4.c)");
}

/* The code of element i of row o (gpt-oss order). */
static unsigned code_at(const uint8_t *blocks, uint64_t in, uint64_t o, uint64_t i)
{
	uint8_t b = blocks[o * (in / 2) + i / 2];
	return i % 2 ? b >> 4 : b & 15u;
}

static int mx_decode(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, float *dst)
{
	uint64_t in = t->shape[1], ng = in / MX_BLOCK;
	const uint8_t *w = pp[0], *sc = pp[1];
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t g = 0; g < ng; g++) {
			int e = (int)sc[o * ng + g] - 127;
			for (uint64_t j = 0; j < MX_BLOCK; j++) {
				uint64_t i = g * MX_BLOCK + j;
				dst[r * in + i] = ldexpf(e2m1[code_at(w, in, o, i)], e);
			}
		}
	}
	return 0;
}

/* Rows o0 .. o0+n-1 as ggml MXFP4 blocks: the scale byte as it is, the nibbles reordered. */
static int mx_to_ggml(const qtk_tensor *t, const void *const *pp, uint64_t o0, uint64_t n, unsigned type, void *dst)
{
	if (type != QTK_T_MXFP4)
		return -1;
	uint64_t in = t->shape[1], ng = in / MX_BLOCK;
	const uint8_t *w = pp[0], *sc = pp[1];
	uint8_t *d = dst;
	for (uint64_t r = 0; r < n; r++) {
		uint64_t o = o0 + r;
		for (uint64_t g = 0; g < ng; g++, d += 1 + MX_BYTES) {
			d[0] = sc[o * ng + g];
			for (unsigned j = 0; j < MX_BYTES; j++)
				d[1 + j] = (uint8_t)(code_at(w, in, o, g * MX_BLOCK + j) |
						     code_at(w, in, o, g * MX_BLOCK + j + 16) << 4);
		}
	}
	return 0;
}

static const char *mx_suffix(const char *role)
{
	return !strcmp(role, "blocks")	 ? "_blocks"
	       : !strcmp(role, "scales") ? "_scales"
	       : !strcmp(role, "packed") ? "weight_packed"
	       : !strcmp(role, "scale")	 ? "weight_scale"
					 : role;
}

/* ggml MXFP4 blocks (rows of in / 32 blocks of 17 bytes) into compressed-tensors' parts, which
 * are gpt-oss's blocks too: codes [rows, in/2] with the even input in the low nibble, and the
 * E8M0 scales [rows, in/32] as they are (ggml's 2^(e-128) times its doubled table is 2^(e-127)
 * times E2M1). Every code is kept, so a checkpoint shuffled into a GGUF comes back byte for byte;
 * code 8 is +0.0 in ggml and -0.0 in both checkpoint forms (ggml's quantizer never writes it).
 * NULL codes or scales: that part is not written. */
int qtk_mxfp4_from_ggml(const uint8_t *blocks, uint64_t rows, uint64_t in, uint8_t *codes, uint8_t *scales)
{
	if (!in || in % MX_BLOCK)
		return -1;
	uint64_t ng = in / MX_BLOCK;
	for (uint64_t r = 0; r < rows; r++) {
		const uint8_t *b = blocks + r * ng * (1 + MX_BYTES);
		for (uint64_t g = 0; g < ng; g++, b += 1 + MX_BYTES) {
			if (scales)
				scales[r * ng + g] = b[0];
			if (!codes)
				continue;
			uint8_t *d = codes + r * (in / 2) + g * MX_BYTES;
			for (unsigned e = 0; e < MX_BLOCK; e += 2) {
				unsigned c0 = e < 16 ? b[1 + e] & 15u : b[1 + e - 16] >> 4;
				unsigned c1 = e + 1 < 16 ? b[2 + e] & 15u : b[2 + e - 16] >> 4;
				d[e / 2] = (uint8_t)(c0 | c1 << 4);
			}
		}
	}
	return 0;
}

static void mx_config_read(const cJSON *o, qtk_qcfg *q)
{
	(void)o;
	snprintf(q->bad, sizeof q->bad, "mxfp4 configs are read per tensor (mxfp4.c)");
}

static const qtk_scheme_transcode mx_transcodes[] = {
	{QTK_LAYOUT_PLAIN, QTK_T_MXFP4, 1u << 4, true, MX_BLOCK},
};

const qtk_scheme qtk_scheme_mxfp4 = {
	.name = "mxfp4",
	.title = "mxfp4",
	.quant_method = "mxfp4",
	.kind = QTK_LAYOUT_MXFP4,
	.strategy = QTK_SCHEME_PER_GROUP,
	.codes = QTK_SCHEME_CODES_FLOAT,
	.bits_mask = 1u << 4,
	.row_align = 1,
	.parts_by_row = true,
	.nparts = 0,
	.check_layout = mx_check,
	.infer = mx_infer,
	.decode_rows = mx_decode,
	.to_ggml_rows = mx_to_ggml,
	.transcodes = mx_transcodes,
	.ntranscodes = (int)(sizeof mx_transcodes / sizeof *mx_transcodes),
	.suffix = mx_suffix,
	.config_read = mx_config_read,
	.part_specs = mx_specs,
	/* gpt-oss; compressed-tensors' mxfp4-pack-quantized */
	.forms = (const qtk_scheme_form[]){{{"blocks", "scales", NULL}, QTK_DT_U8}, {{"packed", "scale", NULL}, QTK_DT_U8}},
	.nforms = 2,
	.config_hint = "\"quantization_config\": {\"quant_method\": \"mxfp4\"} (gpt-oss) or llm-compressor's "
		       "(format mxfp4-pack-quantized)",
};

/* ---- folding: <prefix>_blocks + <prefix>_scales -> <prefix> ---------------------------- */

static int cfgfail(qtk_model *m, const char *cfgfile, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfgfail(qtk_model *m, const char *cfgfile, const char *fmt, ...)
{
	char msg[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return qtk_err_set(&m->err, QTK_E_DATA, cfgfile, -1, "key 'modules_to_not_convert'", "%s", msg);
}

/* The length of name's prefix when it ends with suf. */
static bool has_suffix(const char *name, const char *suf, size_t *plen)
{
	size_t n = strlen(name), k = strlen(suf);
	if (n <= k || strcmp(name + n - k, suf))
		return false;
	*plen = n - k;
	return true;
}

static long find_named(const qtk_model *m, const char *prefix, size_t plen, const char *suf)
{
	size_t k = strlen(suf);
	for (size_t i = 0; i < m->ntensors; i++) {
		const char *nm = m->tensors[i].name;
		if (!strncmp(nm, prefix, plen) && !strcmp(nm + plen, suf) && strlen(nm) == plen + k)
			return (long)i;
	}
	return -1;
}

/* Is module `mod` (or a module it lies in) one of the config's float modules? */
static const char *excluded(const cJSON *skip, const char *mod)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, skip)
	{
		if (!cJSON_IsString(e))
			continue;
		char pat[512];
		if (fnmatch(e->valuestring, mod, 0) == 0)
			return e->valuestring;
		if ((size_t)snprintf(pat, sizeof pat, "%s.*", e->valuestring) < sizeof pat && fnmatch(pat, mod, 0) == 0)
			return e->valuestring;
	}
	return NULL;
}

/* One logical tensor from blocks tensor b and scales tensor s. */
static int make_one(qtk_model *m, const qtk_tensor *b, const qtk_tensor *s, size_t plen, qtk_tensor *out)
{
	if (b->nparts != 1 || b->layout.kind != QTK_LAYOUT_PLAIN || s->nparts != 1 || s->layout.kind != QTK_LAYOUT_PLAIN)
		return qtk_fold_terr(m, b->name, "not a stored tensor");
	if (b->layout.type != QTK_DT_U8)
		return qtk_fold_terr(m, b->name, "mxfp4 blocks must be U8, not %s", qtk_type(b->layout.type)->upper);
	if (s->layout.type != QTK_DT_U8)
		return qtk_fold_terr(m, s->name, "mxfp4 scales must be U8 (E8M0 exponents), not %s", qtk_type(s->layout.type)->upper);
	if (b->ndim != 3 && b->ndim != 4)
		return qtk_fold_terr(m, b->name, "mxfp4 blocks must be [out, in/32, 16] or [experts, out, in/32, 16], not %d-D",
			     b->ndim);
	if (b->shape[b->ndim - 1] != MX_BYTES)
		return qtk_fold_terr(m, b->name, "mxfp4 blocks must have 16 bytes (32 codes) in the last dimension, not %llu",
			     (unsigned long long)b->shape[b->ndim - 1]);
	bool same = s->ndim == b->ndim - 1;
	for (int d = 0; same && d < s->ndim; d++)
		same = s->shape[d] == b->shape[d];
	if (!same) {
		char bs[100], ss[100];
		qtk_shape_text(bs, sizeof bs, b->ndim, b->shape);
		qtk_shape_text(ss, sizeof ss, s->ndim, s->shape);
		return qtk_fold_terr(m, s->name, "scales shape %s does not match blocks %s (one scale per block of 32)", ss, bs);
	}
	if (qtk_fold_new_tensor(m, out, QTK_MAX_PARTS))
		return QTK_E_IO;
	out->ndim = b->ndim - 1;
	for (int d = 0; d < out->ndim - 1; d++)
		out->shape[d] = b->shape[d];
	if (!qtk_mul_u64(b->shape[b->ndim - 2], MX_BLOCK, &out->shape[out->ndim - 1]) || !out->shape[out->ndim - 1])
		return qtk_fold_terr(m, b->name, "mxfp4 blocks have no inputs");
	out->layout = (qtk_layout){.kind = QTK_LAYOUT_MXFP4, .type = QTK_DT_U8, .bits = 4, .sym = true,
				   .group_size = MX_BLOCK, .strategy = QTK_SCHEME_PER_GROUP};
	out->parts[0] = b->parts[0];
	out->parts[1] = s->parts[0];
	snprintf(out->parts[0].role, sizeof out->parts[0].role, "blocks");
	snprintf(out->parts[1].role, sizeof out->parts[1].role, "scales");
	out->nparts = 2;
	qtk_tensor_finish(out);
	char why[300];
	int bad = -1;
	if (qtk_scheme_check(out, &bad, why, sizeof why))
		return qtk_fold_terr(m, bad == 1 ? s->name : b->name, "%s", why);
	out->name = qtk_malloc(plen + 1);
	if (!out->name)
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	memcpy(out->name, b->name, plen);
	out->name[plen] = 0;
	if (find_named(m, out->name, plen, "") >= 0) {
		qtk_free(out->name);
		out->name = NULL;
		return qtk_fold_terr(m, b->name, "a tensor '%.*s' is stored beside it", (int)(plen > 200 ? 200 : plen), b->name);
	}
	return 0;
}

int qtk_mxfp4_fold(qtk_model *m, const cJSON *qc, const char *cfgfile)
{
	const cJSON *skip = cJSON_GetObjectItemCaseSensitive(qc, "modules_to_not_convert");
	if (skip && !cJSON_IsNull(skip) && !cJSON_IsArray(skip))
		return cfgfail(m, cfgfile, "must be an array of module names");
	const cJSON *e, *list = cJSON_IsArray(skip) ? skip : NULL;
	cJSON_ArrayForEach(e, list)
	{
		if (!cJSON_IsString(e))
			return cfgfail(m, cfgfile, "must be an array of module names");
	}
	size_t n = m->ntensors;
	if (!n)
		return 0;
	long *claim = qtk_malloc(n * sizeof *claim); /* -1 plain; else the folded index */
	qtk_tensor *mods = qtk_calloc(n, sizeof *mods);
	size_t nmod = 0;
	int rc = claim && mods ? 0 : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	for (size_t i = 0; i < n && !rc; i++)
		claim[i] = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t plen;
		if (!has_suffix(nm, "_blocks", &plen))
			continue;
		if (plen > QTK_CAP_NAME) {
			rc = qtk_fold_terr(m, nm, "name too long");
			break;
		}
		long s = find_named(m, nm, plen, "_scales");
		if (s < 0) {
			rc = qtk_fold_terr(m, nm, "mxfp4 blocks without '%.*s_scales' beside them", (int)(plen > 200 ? 200 : plen), nm);
			break;
		}
		char mod[QTK_CAP_NAME + 1];
		snprintf(mod, sizeof mod, "%.*s", (int)plen, nm);
		const char *pat = cJSON_IsArray(skip) ? excluded(skip, mod) : NULL;
		if (pat) {
			rc = qtk_fold_terr(m, nm, "module '%.200s' is left unquantized by the config ('%.60s') but stored as mxfp4",
				   mod, pat);
			break;
		}
		if ((rc = make_one(m, &m->tensors[i], &m->tensors[s], plen, &mods[nmod])))
			break;
		claim[i] = claim[s] = (long)nmod++;
	}
	/* E8M0 scales that no blocks tensor claimed */
	for (size_t i = 0; i < n && !rc; i++) {
		size_t plen;
		if (claim[i] < 0 && has_suffix(m->tensors[i].name, "_scales", &plen) &&
		    m->tensors[i].layout.kind == QTK_LAYOUT_PLAIN && m->tensors[i].layout.type == QTK_DT_U8)
			rc = qtk_fold_terr(m, m->tensors[i].name, "mxfp4 scales without '%.*s_blocks' beside them",
				   (int)(plen > 200 ? 200 : plen), m->tensors[i].name);
	}
	if (!rc)
		rc = qtk_fold_replace(m, claim, NULL, mods, &nmod);
	for (size_t i = 0; i < nmod; i++)
		qtk_free(mods[i].name);
	qtk_free(claim);
	qtk_free(mods);
	return rc;
}
