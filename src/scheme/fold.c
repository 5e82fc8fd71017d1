/* fold.c - quantization configs, and folding a checkpoint's packed parts
 * (<prefix>.qweight, .qzeros, .scales, .g_idx ...) into one logical tensor <prefix>.weight
 * [out, in] per layer, driven by the scheme descriptors. Operates on a qtk_model whatever
 * container it came from (a bare .safetensors, an HF directory, an archive member). */
#include "fold.h"
#include "internal.h"
#include "json.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static int oom(qtk_model *m) { return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory"); }

/* ---- quantization config ------------------------------------------------ */

static const cJSON *get(const cJSON *o, const char *a, const char *b)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, a);
	if (!c && b)
		c = cJSON_GetObjectItemCaseSensitive(o, b);
	return c;
}

void qtk_qcfg_read(const cJSON *o, const char *def_method, qtk_qcfg *q)
{
	memset(q, 0, sizeof *q);
	const cJSON *mth = get(o, "quant_method", "method");
	const char *meth = cJSON_IsString(mth) ? mth->valuestring : def_method;
	const qtk_scheme *s = meth ? qtk_scheme_by_method(meth) : NULL;
	if (!s && meth && (!qtk_strcasecmp(meth, "fp8") || !qtk_strcasecmp(meth, "modelopt")))
		s = qtk_scheme_by_kind(qtk_strcasecmp(meth, "fp8") ? QTK_LAYOUT_NVFP4 : QTK_LAYOUT_FP8); /* read per module */
	if (!s)
		return; /* no method, or another one: tensors stay plain */
	q->kind = s->kind;
	q->scheme = s;
	int64_t v;
	const cJSON *b = get(o, "bits", "w_bit"), *g = get(o, "group_size", "q_group_size");
	if (!qtk_json_i64(b, &v) || v < 0 || v > 64) {
		snprintf(q->bad, sizeof q->bad, "quantization config has no valid 'bits'");
		return;
	}
	q->bits = (int)v;
	if (!qtk_json_i64(g, &q->group) || (q->group < 1 && q->group != -1)) {
		snprintf(q->bad, sizeof q->bad, "quantization config has no valid 'group_size'");
		return;
	}
	s->config_read(o, q);
	if (!q->bad[0] && (q->bits >= 32 || !((s->bits_mask >> q->bits) & 1u))) {
		char list[64];
		qtk_scheme_bits_text(s, list, sizeof list);
		snprintf(q->bad, sizeof q->bad, "unsupported %s bits %d (%s%s)", s->quant_method, q->bits,
			 s->bits_mask & (s->bits_mask - 1u) ? "" : "only ", list);
	}
}

int qtk_qcfg_from_desc(const qtk_model *d, const char *path, qtk_err *err, qtk_qcfg *q)
{
	memset(q, 0, sizeof *q);
	bool first = true, all_one_group = true, same_group = true;
	uint32_t g0 = 0;
	for (size_t i = 0; i < d->ntensors; i++) {
		const qtk_tensor *t = &d->tensors[i];
		const qtk_layout *l = &t->layout;
		const qtk_scheme *s = qtk_scheme_of(t);
		if (!s)
			continue;
		int version = s->has_version ? (l->gptq_version == 2 ? 2 : 1) : 0;
		/* NVFP4: ModelOpt's layout only (its config is qtk_modelopt_config_json); MXFP4:
		 * compressed-tensors' form (qtk_ct_config_json) or gpt-oss's (qtk_qcfg_json) */
		if (l->kind == QTK_LAYOUT_NVFP4 ? l->scale_type != 1 : l->kind != QTK_LAYOUT_MXFP4 && !s->config_write) {
			char subj[256];
			snprintf(subj, sizeof subj, "tensor '%.200s'", t->name);
			return qtk_err_set(err, QTK_E_DATA, path, -1, subj,
					   "qtk cannot write %s layers; convert them (--to auto-exact, ct-int, awq, gptq or a "
					   "ggml type)",
					   s->title);
		}
		if (first) {
			q->kind = l->kind;
			q->scheme = s;
			q->bits = l->bits;
			q->sym = l->sym;
			q->version = version;
			q->strategy = l->strategy;
			q->unpacked = l->kind == QTK_LAYOUT_CT_INT && l->type == QTK_T_I8;
			q->form = l->kind == QTK_LAYOUT_MXFP4 ? l->scale_type : 0;
			g0 = l->group_size;
			first = false;
		} else if (l->kind != q->kind || l->bits != q->bits || l->sym != q->sym || version != q->version ||
			   (l->kind == QTK_LAYOUT_FP8 && l->strategy != q->strategy) ||
			   (l->kind == QTK_LAYOUT_MXFP4 && l->scale_type != q->form) ||
			   (l->kind == QTK_LAYOUT_CT_INT && (l->type == QTK_T_I8) != q->unpacked)) {
			char subj[256];
			snprintf(subj, sizeof subj, "tensor '%.200s'", t->name);
			return qtk_err_set(err, QTK_E_DATA, path, -1, subj,
					   "quantization differs from the other tensors; one quantization config "
					   "cannot describe both");
		}
		q->desc_act |= l->act_order;
		if (l->group_size != g0)
			same_group = false;
		if (t->ndim != 2 || l->group_size != t->shape[1])
			all_one_group = false;
	}
	if (first)
		return 0;
	q->desc = d;
	q->one_group = all_one_group;
	if (same_group)
		q->group = g0;
	else if (all_one_group)
		q->group = -1;
	else
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL,
				   "tensors use different group sizes; one quantization config cannot describe them");
	return 0;
}

bool qtk_qcfg_same(const qtk_qcfg *a, const qtk_qcfg *b)
{
	return a->kind == b->kind && !a->bad[0] && a->bits == b->bits &&
	       (a->group == b->group || (a->group == -1 && b->one_group)) && a->sym == b->sym &&
	       (!a->scheme || !a->scheme->has_version || a->version == b->version);
}

/* gpt-oss's quantization_config: {"modules_to_not_convert": [...], "quant_method": "mxfp4"},
 * the modules every 2-D float weight belongs to (attention, routers, embeddings, lm_head). */
static cJSON *gptoss_config_json(const qtk_qcfg *q)
{
	cJSON *o = cJSON_CreateObject(), *skip = o ? cJSON_AddArrayToObject(o, "modules_to_not_convert") : NULL;
	bool ok = skip != NULL;
	for (size_t i = 0; ok && q->desc && i < q->desc->ntensors; i++) {
		const qtk_tensor *t = &q->desc->tensors[i];
		size_t l = strlen(t->name), w = strlen(".weight");
		if (t->ndim != 2 || t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_type(t->layout.type)->is_float || l <= w ||
		    strcmp(t->name + l - w, ".weight"))
			continue;
		char mod[QTK_CAP_NAME + 1];
		snprintf(mod, sizeof mod, "%.*s", (int)(l - w), t->name);
		ok = cJSON_AddItemToArray(skip, cJSON_CreateString(mod));
	}
	if (!ok || !cJSON_AddStringToObject(o, "quant_method", "mxfp4")) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

cJSON *qtk_qcfg_json(const qtk_qcfg *q)
{
	const qtk_scheme *s = q->scheme ? q->scheme : qtk_scheme_by_kind(q->kind);
	if (s && (s->kind == QTK_LAYOUT_CT_INT || s->kind == QTK_LAYOUT_FP8 ||
		  (s->kind == QTK_LAYOUT_MXFP4 && q->form == QTK_MXFP4_CT)))
		return qtk_ct_config_json(q);
	if (s && s->kind == QTK_LAYOUT_MXFP4)
		return gptoss_config_json(q);
	if (s && s->kind == QTK_LAYOUT_NVFP4)
		return qtk_modelopt_config_json(q);
	cJSON *o = s ? cJSON_CreateObject() : NULL;
	if (!o)
		return NULL;
	if (!cJSON_AddStringToObject(o, "quant_method", s->quant_method) || !cJSON_AddNumberToObject(o, "bits", q->bits) ||
	    !cJSON_AddNumberToObject(o, "group_size", (double)q->group) || !s->config_write(q, o)) {
		cJSON_Delete(o);
		return NULL;
	}
	/* block matrices left in float (MoE routers, a shared expert's gate): the loaders replace
	 * every linear layer whose module name does not contain one of these */
	cJSON *skip = NULL;
	for (size_t i = 0; q->desc && i < q->desc->ntensors; i++) {
		const qtk_tensor *t = &q->desc->tensors[i];
		size_t l = strlen(t->name), w = strlen(".weight");
		if (t->ndim != 2 || t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_type(t->layout.type)->is_float ||
		    !strstr(t->name, "layers.") || l <= w || strcmp(t->name + l - w, ".weight"))
			continue;
		char mod[QTK_CAP_NAME + 1];
		snprintf(mod, sizeof mod, "%.*s", (int)(l - w), t->name);
		if ((!skip && !(skip = cJSON_AddArrayToObject(o, "modules_to_not_convert"))) ||
		    !cJSON_AddItemToArray(skip, cJSON_CreateString(mod))) {
			cJSON_Delete(o);
			return NULL;
		}
	}
	return o;
}

/* ---- folding parts into logical tensors --------------------------------- */

static int cmp_by_name(const void *a, const void *b)
{
	return strcmp(((const qtk_fold_name *)a)->name, ((const qtk_fold_name *)b)->name);
}

qtk_fold_name *qtk_fold_index(const qtk_model *m)
{
	qtk_fold_name *ix = qtk_malloc((m->ntensors ? m->ntensors : 1) * sizeof *ix);
	if (!ix)
		return NULL;
	for (size_t i = 0; i < m->ntensors; i++)
		ix[i] = (qtk_fold_name){m->tensors[i].name, i};
	qsort(ix, m->ntensors, sizeof *ix, cmp_by_name);
	return ix;
}

long qtk_fold_lookup(const qtk_fold_name *ix, size_t n, const char *prefix, size_t plen, const char *suffix)
{
	size_t lo = 0, hi = n, rlen = strlen(suffix);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *nm = ix[mid].name;
		int c = strncmp(nm, prefix, plen);
		if (!c)
			c = (unsigned char)nm[plen] - (unsigned char)'.';
		if (!c)
			c = strcmp(nm + plen + 1, suffix);
		if (!c && strlen(nm) != plen + 1 + rlen)
			c = 1;
		if (!c)
			return (long)ix[mid].i;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int qtk_fold_new_tensor(qtk_model *m, qtk_tensor *out, int n)
{
	memset(out, 0, sizeof *out);
	return qtk_model_tensor_room(m, out, n) ? oom(m) : 0;
}

int qtk_fold_terr(qtk_model *m, const char *tensor, const char *fmt, ...)
{
	char msg[400], subj[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(subj, sizeof subj, "tensor '%.200s'", tensor);
	const qtk_tensor *t = qtk_tensor_find(m, tensor);
	const char *file = t && t->nparts && t->parts[0].file < m->nfiles ? m->files[t->parts[0].file] : m->path;
	return qtk_err_set(&m->err, QTK_E_DATA, file, -1, subj, "%s", msg);
}

int qtk_fold_cerr(qtk_model *m, const char *cfgfile, const char *key, const char *fmt, ...)
{
	char msg[300], subj[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(subj, sizeof subj, "key '%.180s'", key);
	return qtk_err_set(&m->err, QTK_E_DATA, cfgfile, -1, subj, "%s", msg);
}

int qtk_fold_read_small(qtk_model *m, const qtk_tensor *t, uint8_t *buf, size_t n)
{
	const qtk_part *p = &t->parts[0];
	if (p->nbytes != n)
		return qtk_fold_terr(m, t->name, "%llu bytes, expected %zu", (unsigned long long)p->nbytes, n);
	return qtk_pread_full(m->fds[p->file], m->files[p->file], buf, n, p->offset, &m->err);
}

typedef struct fold {
	qtk_model *m;
	const qtk_qcfg *q;
	const cJSON *qc;       /* the config object (per-module overrides) */
	const char *cfgfile;
	qtk_fold_name *byname; /* tensors sorted by name */
} fold;

/* Does any scheme have a marking part with this role? */
static bool marking_role(const char *role)
{
	for (size_t i = 0; i < qtk_scheme_count(); i++) {
		const qtk_scheme *s = qtk_scheme_at(i);
		for (int k = 0; k < s->nparts; k++)
			if (s->parts[k].marks && !strcmp(s->parts[k].role, role))
				return true;
	}
	return false;
}

/* Read g_idx and check every entry is a group index; sets act_order. */
static int check_g_idx(fold *f, const qtk_tensor *gt, uint64_t in, uint64_t group, uint64_t ngroups,
		       bool *act_order)
{
	const qtk_part *p = &gt->parts[0];
	uint8_t *b = qtk_malloc((size_t)p->nbytes ? (size_t)p->nbytes : 1);
	if (!b)
		return oom(f->m);
	int rc = qtk_pread_full(f->m->fds[p->file], f->m->files[p->file], b, (size_t)p->nbytes, p->offset,
				&f->m->err);
	*act_order = false;
	for (uint64_t i = 0; i < in && !rc; i++) {
		int32_t g = (int32_t)qtk_rd32(b + 4 * i);
		if (g < 0 || (uint64_t)g >= ngroups)
			rc = qtk_fold_terr(f->m, gt->name, "g_idx[%llu] = %d is outside [0, %llu)", (unsigned long long)i, g,
				   (unsigned long long)ngroups);
		else if ((uint64_t)g != i / group)
			*act_order = true;
	}
	qtk_free(b);
	return rc;
}

/* Build the logical tensor of the parts c[k] (tensor index of the scheme's part k, -1 when
 * absent) and check it with the scheme's one validation. */
static int make_logical(fold *f, const char *prefix, size_t plen, const long *c, qtk_tensor *out)
{
	const qtk_qcfg *q = f->q;
	const qtk_scheme *s = q->scheme;
	qtk_model *m = f->m;
	qtk_part parts[QTK_MAX_PARTS];
	bool present[QTK_MAX_PARTS] = {false};
	memset(parts, 0, sizeof parts);
	for (int k = 0; k < s->nparts; k++)
		if (c[k] >= 0) {
			parts[k] = m->tensors[c[k]].parts[0];
			present[k] = true;
		}
	uint64_t out_ = 0, in = 0;
	int bad = 0;
	char why[300];
	if (qtk_fold_new_tensor(f->m, out, s->nparts))
		return QTK_E_IO;
	if (s->infer(parts, present, (unsigned)q->bits, &out_, &in, &bad, why, sizeof why))
		return qtk_fold_terr(f->m, m->tensors[c[bad]].name, "%s", why);
	uint64_t group = q->group < 0 ? in : (uint64_t)q->group;
	if (group > UINT32_MAX)
		return qtk_fold_terr(f->m, m->tensors[c[0]].name, "group size too large");
	char *name = qtk_malloc(plen + 8);
	if (!name)
		return oom(m);
	memcpy(name, prefix, plen);
	memcpy(name + plen, ".weight", 8);
	out->name = name;
	out->ndim = 2;
	out->shape[0] = out_;
	out->shape[1] = in;
	out->layout.kind = s->kind;
	out->layout.type = s->parts[0].type;
	out->layout.bits = (uint8_t)q->bits;
	out->layout.gptq_version = (uint8_t)(s->has_version ? q->version : 0);
	out->layout.sym = q->sym;
	out->layout.group_size = (uint32_t)group;
	for (int k = 0; k < s->nparts; k++) {
		if (c[k] < 0)
			continue;
		out->parts[out->nparts] = parts[k];
		snprintf(out->parts[out->nparts].role, sizeof out->parts[0].role, "%s", s->parts[k].role);
		out->nparts++;
	}
	qtk_tensor_finish(out);
	int rc = qtk_scheme_check(out, &bad, why, sizeof why);
	if (!rc) {
		int gk = qtk_scheme_part_index(s, "g_idx");
		bool act = false;
		if (gk >= 0 && c[gk] >= 0)
			rc = check_g_idx(f, &m->tensors[c[gk]], in, group, in / group, &act);
		out->layout.act_order = act;
	} else {
		rc = qtk_fold_terr(f->m, m->tensors[c[bad >= 0 ? bad : 0]].name, "%s", why);
	}
	if (rc) {
		qtk_free(out->name);
		out->name = NULL;
	}
	return rc;
}

/* mlx-lm writes per-module settings into its quantization object, keyed by the module path:
 * {"group_size": G, "bits": B}. local->scheme stays NULL when the module has none. */
static int module_override(fold *f, const char *prefix, size_t plen, qtk_qcfg *local)
{
	local->scheme = NULL;
	if (!f->qc || plen > QTK_CAP_NAME)
		return 0;
	char key[QTK_CAP_NAME + 1];
	snprintf(key, sizeof key, "%.*s", (int)plen, prefix);
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(f->qc, key);
	if (!o)
		return 0;
	if (!cJSON_IsObject(o))
		return qtk_fold_terr(f->m, key, "quantization setting for this module is not an object (%s)", f->cfgfile);
	*local = *f->q;
	local->bad[0] = 0;
	int64_t v;
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "bits"), *g = cJSON_GetObjectItemCaseSensitive(o, "group_size");
	if (b && (!qtk_json_i64(b, &v) || v < 1 || v >= 32 || !((f->q->scheme->bits_mask >> v) & 1u)))
		return qtk_fold_terr(f->m, key, "module override has invalid 'bits' (%s)", f->cfgfile);
	if (b)
		local->bits = (int)v;
	if (g && (!qtk_json_i64(g, &v) || v < 1 || v > UINT32_MAX))
		return qtk_fold_terr(f->m, key, "module override has invalid 'group_size' (%s)", f->cfgfile);
	if (g)
		local->group = v;
	f->q->scheme->config_read(o, local);
	if (local->bad[0])
		return qtk_fold_terr(f->m, key, "%s (%s)", local->bad, f->cfgfile);
	return 0;
}

int qtk_fold_replace(qtk_model *m, const long *gid, const bool *drop, qtk_tensor *mods, size_t *nmods)
{
	size_t n = m->ntensors, k = 0;
	qtk_tensor *nt = qtk_table_realloc(NULL, 0, (n + 1) * sizeof *nt);
	bool *emitted = qtk_calloc(*nmods + 1, 1);
	if (!nt || !emitted) {
		qtk_table_free(nt);
		qtk_free(emitted);
		return oom(m);
	}
	for (size_t i = 0; i < n; i++) {
		if (drop && drop[i]) {
			qtk_free(m->tensors[i].name);
			continue;
		}
		if (gid[i] < 0) {
			nt[k++] = m->tensors[i];
			continue;
		}
		if (!emitted[gid[i]]) { /* a logical tensor takes the place of its first component */
			nt[k++] = mods[gid[i]];
			emitted[gid[i]] = true;
		}
		qtk_free(m->tensors[i].name);
	}
	qtk_free(emitted);
	qtk_table_free(m->tensors);
	m->tensors = nt;
	m->ntensors = k;
	m->cap_tensors = n + 1;
	*nmods = 0;
	qtk_model_reindex(m);
	return 0;
}

static int fold_run(fold *f)
{
	qtk_model *m = f->m;
	const qtk_scheme *s = f->q->scheme;
	const char *first = s->parts[0].role;
	size_t n = m->ntensors, flen = strlen(first);
	long *gid = qtk_malloc(n * sizeof *gid);
	qtk_tensor *g = qtk_calloc(n, sizeof *g); /* the logical tensors */
	size_t ng = 0;
	int rc = 0;
	if (!gid || !g) {
		rc = oom(m);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		gid[i] = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		size_t len = strlen(nm);
		if (len < flen + 1 || nm[len - flen - 1] != '.' || strcmp(nm + len - flen, first))
			continue;
		size_t plen = len - flen - 1;
		int pl = (int)(plen > 200 ? 200 : plen);
		if (f->q->bad[0]) {
			rc = qtk_fold_terr(f->m, nm, "%s (%s)", f->q->bad, f->cfgfile);
			break;
		}
		long c[QTK_MAX_PARTS];
		for (int p = 0; p < QTK_MAX_PARTS; p++)
			c[p] = p >= s->nparts ? -1 : p ? qtk_fold_lookup(f->byname, f->m->ntensors, nm, plen, s->parts[p].role) : (long)i;
		/* a scheme whose codes are "<m>.weight" (mlx): a weight without scales is plain */
		bool codes_weight = !strcmp(first, "weight");
		if (codes_weight && c[1] < 0)
			continue;
		for (int p = 0; p < s->nparts && !rc; p++)
			if (c[p] < 0 && !s->parts[p].optional)
				rc = qtk_fold_terr(f->m, nm, "quantized layer has no '%.*s.%s'", pl, nm, s->parts[p].role);
		if (rc)
			break;
		if (!codes_weight && qtk_fold_lookup(f->byname, f->m->ntensors, nm, plen, "weight") >= 0) {
			rc = qtk_fold_terr(f->m, nm, "quantized layer also has a plain '%.*s.weight'", pl, nm);
			break;
		}
		/* parts of another scheme beside this layer */
		for (size_t si = 0; si < qtk_scheme_count() && !rc; si++) {
			const qtk_scheme *o = qtk_scheme_at(si);
			for (int p = 0; p < o->nparts && !rc; p++) {
				long x;
				if (o->parts[p].marks && qtk_scheme_part_index(s, o->parts[p].role) < 0 &&
				    (x = qtk_fold_lookup(f->byname, f->m->ntensors, nm, plen, o->parts[p].role)) >= 0)
					rc = qtk_fold_terr(f->m, m->tensors[x].name, "%s layers have no %s", s->quant_method,
						   o->parts[p].role);
			}
		}
		qtk_qcfg local;
		const qtk_qcfg *shared = f->q;
		if (!rc && (rc = module_override(f, nm, plen, &local)) == 0 && local.scheme)
			f->q = &local;
		if (rc || (rc = make_logical(f, nm, plen, c, &g[ng]))) {
			f->q = shared;
			break;
		}
		f->q = shared;
		for (int p = 0; p < s->nparts; p++)
			if (c[p] >= 0)
				gid[c[p]] = (long)ng;
		ng++;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		const char *dot = strrchr(nm, '.');
		if (gid[i] < 0 && dot && marking_role(dot + 1))
			rc = qtk_fold_terr(f->m, nm, "no matching '.%s' for this quantization component", first);
	}
	if (rc)
		goto out;
	rc = qtk_fold_replace(m, gid, NULL, g, &ng);
out:
	for (size_t i = 0; i < ng; i++)
		qtk_free(g[i].name);
	qtk_free(gid);
	qtk_free(g);
	return rc;
}

int qtk_scheme_fold(qtk_model *m, const cJSON *qc, const char *def_method, const char *cfgfile)
{
	const cJSON *mth = get(qc, "quant_method", NULL);
	if (cJSON_IsString(mth) && !qtk_strcasecmp(mth->valuestring, "compressed-tensors"))
		return qtk_ct_fold(m, qc, cfgfile);
	if (cJSON_IsString(mth) && !qtk_strcasecmp(mth->valuestring, "fp8"))
		return qtk_fp8_fold(m, qc, cfgfile);
	if (cJSON_IsString(mth) && !qtk_strcasecmp(mth->valuestring, "modelopt"))
		return qtk_modelopt_fold(m, qc, cfgfile);
	if (cJSON_IsString(mth) && !qtk_strcasecmp(mth->valuestring, "bitsandbytes"))
		return qtk_bnb_fold(m, qc, cfgfile);
	if (cJSON_IsString(mth) && !qtk_strcasecmp(mth->valuestring, "mxfp4"))
		return qtk_mxfp4_fold(m, qc, cfgfile);
	qtk_qcfg q;
	qtk_qcfg_read(qc, def_method, &q);
	if (!q.scheme || !m->ntensors)
		return 0;
	fold f = {.m = m, .q = &q, .qc = qc, .cfgfile = cfgfile};
	if (!(f.byname = qtk_fold_index(m)))
		return oom(m);
	int rc = fold_run(&f);
	qtk_free(f.byname);
	return rc;
}

/* config.json's quantization_config (cfg: its root), else quantize_config.json, else
 * quant_config.json. */
static int fold_from(qtk_model *m, const char *dir, const cJSON *cfg)
{
	static const struct {
		const char *name, *def;
	} side[] = {{"quantize_config.json", "gptq"}, {"quant_config.json", "awq"}};
	const cJSON *qc = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config") : NULL;
	/* mlx-lm: "quantization" (with any per-module settings), and a copy as
	 * quantization_config without a quant_method */
	const cJSON *mlx = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "quantization") : NULL;
	const char *def = NULL;
	if (cJSON_IsObject(mlx) && (!cJSON_IsObject(qc) || !get(qc, "quant_method", "method"))) {
		qc = mlx;
		def = "mlx";
	}
	if (cJSON_IsObject(qc)) {
		char *p = qtk_path_join(dir, "config.json");
		if (!p)
			return oom(m);
		int rc = qtk_scheme_fold(m, qc, def, p);
		qtk_free(p);
		return rc;
	}
	for (size_t i = 0; i < sizeof side / sizeof *side; i++) {
		char *p = qtk_path_join(dir, side[i].name);
		if (!p)
			return oom(m);
		int rc = 0;
		if (qtk_path_exists(p)) {
			qtk_json_doc d;
			rc = qtk_json_load(p, QTK_CAP_JSON, 0, &m->err, &d, NULL, NULL);
			if (!rc) {
				if (cJSON_IsObject(d.root))
					rc = qtk_scheme_fold(m, d.root, side[i].def, p);
				else
					rc = qtk_err_set(&m->err, QTK_E_DATA, p, 0, NULL, "not a json object");
				qtk_json_doc_free(&d);
			}
			qtk_free(p);
			return rc;
		}
		qtk_free(p);
	}
	return 0;
}

int qtk_scheme_fold_dir(qtk_model *m, const char *dir, const cJSON *cfg)
{
	if (cfg)
		return fold_from(m, dir, cfg);
	char *p = qtk_path_join(dir, "config.json");
	if (!p)
		return oom(m);
	int rc = 0;
	qtk_json_doc d = {0};
	if (qtk_path_exists(p)) {
		rc = qtk_json_load(p, QTK_CAP_JSON, 0, &m->err, &d, NULL, NULL);
		if (!rc && !cJSON_IsObject(d.root))
			rc = qtk_err_set(&m->err, QTK_E_DATA, p, 0, NULL, "config.json is not a json object");
	}
	if (!rc)
		rc = fold_from(m, dir, d.root);
	qtk_json_doc_free(&d);
	qtk_free(p);
	return rc;
}

int qtk_scheme_fold_embedded(qtk_model *m)
{
	const qtk_kv *kv = qtk_kv_find(m, QTK_ST_QCFG_KEY);
	if (!kv || kv->val.type != QTK_V_STR)
		return 1;
	qtk_json_doc d;
	int rc = qtk_json_parse(kv->val.v.str.s, (size_t)kv->val.v.str.len, 0, m->path, 8, &m->err, &d);
	if (rc)
		return rc;
	if (cJSON_IsObject(d.root))
		rc = qtk_scheme_fold(m, d.root, NULL, m->path);
	else
		rc = qtk_err_set(&m->err, QTK_E_DATA, m->path, 8, "key '" QTK_ST_QCFG_KEY "'",
				 "embedded quantization config is not a json object");
	qtk_json_doc_free(&d);
	return rc;
}

int qtk_scheme_quant_json(const qtk_model *d, const char *path, qtk_err *err, char **out)
{
	*out = NULL;
	qtk_qcfg q;
	int rc = qtk_qcfg_from_desc(d, path, err, &q);
	if (rc || !q.scheme)
		return rc;
	cJSON *o = qtk_qcfg_json(&q);
	char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (txt)
		*out = qtk_strdup(txt);
	cJSON_free(txt);
	return *out ? 0 : qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
}
