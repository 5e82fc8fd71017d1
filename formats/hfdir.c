/* hfdir.c - Hugging Face model directories (config.json + safetensors + side
 * files) and the AWQ / GPTQ interpretation of their packed tensors.
 *
 * A quantized linear layer is stored as <prefix>.qweight, .qzeros, .scales and
 * (GPTQ) .g_idx; with an awq or gptq quantization config these become one
 * logical tensor <prefix>.weight [out, in] whose parts are the components, in
 * that order (reference/awq_gptq.md §1.1, §2.1).
 */
#include "st_json.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int oom(qtk_model *m) { return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory"); }

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ---- quantization config ------------------------------------------------ */

typedef struct qcfg {
	qtk_layout_kind kind; /* PLAIN: no awq/gptq config */
	int bits;
	int64_t group;        /* -1: one group per input row */
	bool sym;
	bool desc_act;
	bool one_group;       /* every layer is a single group (group -1 fits) */
	int version;          /* GPTQ checkpoint format 1 or 2 */
	char bad[160];        /* why this awq/gptq config cannot be used ("" when it can) */
} qcfg;

static const cJSON *get(const cJSON *o, const char *a, const char *b)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, a);
	if (!c && b)
		c = cJSON_GetObjectItemCaseSensitive(o, b);
	return c;
}

static bool get_bool(const cJSON *o, const char *k, bool def)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsBool(c) ? cJSON_IsTrue(c) : def;
}

/* Interpret a quantization config object. `def_method` is used when it names
 * no quant_method (quantize_config.json: gptq; quant_config.json: awq). */
static void qcfg_read(const cJSON *o, const char *def_method, qcfg *q)
{
	memset(q, 0, sizeof *q);
	const cJSON *mth = get(o, "quant_method", "method");
	const char *meth = cJSON_IsString(mth) ? mth->valuestring : def_method;
	if (!meth)
		return;
	if (qtk_strcasecmp(meth, "awq") == 0)
		q->kind = QTK_LAYOUT_AWQ;
	else if (qtk_strcasecmp(meth, "gptq") == 0)
		q->kind = QTK_LAYOUT_GPTQ;
	else
		return; /* another method: tensors stay plain */
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
	if (q->kind == QTK_LAYOUT_AWQ) {
		q->sym = !get_bool(o, "zero_point", true);
		const cJSON *ver = get(o, "version", NULL);
		if (ver && (!cJSON_IsString(ver) || qtk_strcasecmp(ver->valuestring, "gemm") != 0))
			snprintf(q->bad, sizeof q->bad, "unsupported awq version '%.40s' (only gemm)",
				 cJSON_IsString(ver) ? ver->valuestring : "?");
		else if (q->bits != 4)
			snprintf(q->bad, sizeof q->bad, "unsupported awq bits %d (only 4)", q->bits);
		return;
	}
	q->sym = get_bool(o, "sym", true);
	q->desc_act = get_bool(o, "desc_act", false);
	const cJSON *f = get(o, "checkpoint_format", "format");
	q->version = 1;
	if (get_bool(o, "is_marlin_format", false))
		snprintf(q->bad, sizeof q->bad, "unsupported gptq checkpoint format 'marlin'");
	else if (f && cJSON_IsString(f) && strcmp(f->valuestring, "gptq_v2") == 0)
		q->version = 2;
	else if (f && (!cJSON_IsString(f) || strcmp(f->valuestring, "gptq") != 0))
		snprintf(q->bad, sizeof q->bad, "unsupported gptq checkpoint format '%.40s'",
			 cJSON_IsString(f) ? f->valuestring : "?");
	if (!q->bad[0] && q->bits != 2 && q->bits != 3 && q->bits != 4 && q->bits != 8)
		snprintf(q->bad, sizeof q->bad, "unsupported gptq bits %d (2, 3, 4 or 8)", q->bits);
}

/* ---- folding components into logical tensors --------------------------- */

struct byname {
	const char *name;
	size_t i;
};

typedef struct fold {
	qtk_model *m;
	const qcfg *q;
	const char *cfgfile;
	struct byname *byname; /* tensors sorted by name */
} fold;

static int qfail(fold *f, const char *tensor, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int qfail(fold *f, const char *tensor, const char *fmt, ...)
{
	char msg[400], subj[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(subj, sizeof subj, "tensor '%.200s'", tensor);
	const qtk_tensor *t = qtk_tensor_find(f->m, tensor);
	const char *file = t && t->nparts && t->parts[0].file < f->m->nfiles ? f->m->files[t->parts[0].file] : f->m->path;
	return qtk_err_set(&f->m->err, QTK_E_DATA, file, -1, subj, "%s", msg);
}

static int cmp_by_name(const void *a, const void *b)
{
	return strcmp(((const struct byname *)a)->name, ((const struct byname *)b)->name);
}

/* Index of the tensor named prefix+suffix, or -1. */
static long find(const fold *f, const char *prefix, size_t plen, const char *suffix)
{
	size_t lo = 0, hi = f->m->ntensors, slen = strlen(suffix);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *n = f->byname[mid].name;
		int c = strncmp(n, prefix, plen);
		if (!c)
			c = strcmp(n + plen, suffix);
		if (!c && strlen(n) != plen + slen)
			c = 1;
		if (!c)
			return (long)f->byname[mid].i;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* A component must be a 2-D (or 1-D for g_idx) tensor of the given dtype. */
static int want(fold *f, const qtk_tensor *t, unsigned type, int ndim, uint64_t d0, uint64_t d1)
{
	const qtk_part *p = &t->parts[0];
	if (p->type != type)
		return qfail(f, t->name, "dtype %s, expected %s", qtk_type(p->type)->upper, qtk_type(type)->upper);
	if (p->ndim != ndim || p->shape[0] != d0 || (ndim == 2 && p->shape[1] != d1)) {
		char got[64], exp[64];
		if (p->ndim == 2)
			snprintf(got, sizeof got, "[%llu, %llu]", (unsigned long long)p->shape[0],
				 (unsigned long long)p->shape[1]);
		else if (p->ndim == 1)
			snprintf(got, sizeof got, "[%llu]", (unsigned long long)p->shape[0]);
		else
			snprintf(got, sizeof got, "rank %d", p->ndim);
		if (ndim == 2)
			snprintf(exp, sizeof exp, "[%llu, %llu]", (unsigned long long)d0, (unsigned long long)d1);
		else
			snprintf(exp, sizeof exp, "[%llu]", (unsigned long long)d0);
		return qfail(f, t->name, "shape %s does not match the layer: expected %s", got, exp);
	}
	return 0;
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
			rc = qfail(f, gt->name, "g_idx[%llu] = %d is outside [0, %llu)", (unsigned long long)i, g,
				   (unsigned long long)ngroups);
		else if ((uint64_t)g != i / group)
			*act_order = true;
	}
	qtk_free(b);
	return rc;
}

/* Build the logical tensor for the component set c[0..3] (qweight, qzeros,
 * scales, g_idx; g_idx may be -1). */
static int make_logical(fold *f, const char *prefix, size_t plen, const long c[4], qtk_tensor *out)
{
	const qcfg *q = f->q;
	qtk_model *m = f->m;
	const qtk_tensor *qw = &m->tensors[c[0]], *qz = &m->tensors[c[1]], *sc = &m->tensors[c[2]];
	const qtk_tensor *gi = c[3] >= 0 ? &m->tensors[c[3]] : NULL;
	const qtk_part *p = &qw->parts[0];
	uint64_t in, out_, group, ngroups, bits = (uint64_t)q->bits;
	if (p->type != QTK_T_I32 || p->ndim != 2)
		return qfail(f, qw->name, "qweight must be a 2-D I32 tensor");
	int rc;
	memset(out, 0, sizeof *out);
	if (q->kind == QTK_LAYOUT_AWQ) {
		if (gi)
			return qfail(f, gi->name, "awq layers have no g_idx");
		in = p->shape[0];
		out_ = p->shape[1] * 8;
		group = q->group < 0 ? in : (uint64_t)q->group;
		if (!in || !out_ || in % group)
			return qfail(f, qw->name, "input size %llu is not a multiple of the group size %llu",
				     (unsigned long long)in, (unsigned long long)group);
		ngroups = in / group;
		if ((rc = want(f, qz, QTK_T_I32, 2, ngroups, out_ / 8)) || (rc = want(f, sc, QTK_T_F16, 2, ngroups, out_)))
			return rc;
	} else {
		out_ = p->shape[1];
		if (gi) {
			if (gi->parts[0].type != QTK_T_I32 || gi->parts[0].ndim != 1)
				return qfail(f, gi->name, "g_idx must be a 1-D I32 tensor");
			in = gi->parts[0].shape[0];
		} else {
			in = p->shape[0] * 32 / bits;
		}
		if (!in || !out_ || in % 32 || p->shape[0] > (1ull << 40) || p->shape[0] * 32 != in * bits)
			return qfail(f, qw->name, "qweight rows %llu do not hold %llu inputs of %llu bits in whole 32-row blocks",
				     (unsigned long long)p->shape[0], (unsigned long long)in, (unsigned long long)bits);
		if (out_ > (1ull << 40) || out_ * bits % 32)
			return qfail(f, qw->name, "output size %llu times %llu bits is not a multiple of 32",
				     (unsigned long long)out_, (unsigned long long)bits);
		group = q->group < 0 ? in : (uint64_t)q->group;
		ngroups = (in + group - 1) / group;
		if ((rc = want(f, qz, QTK_T_I32, 2, ngroups, out_ * bits / 32)) ||
		    (rc = want(f, sc, QTK_T_F16, 2, ngroups, out_)))
			return rc;
	}
	bool act = false;
	if (gi && (rc = check_g_idx(f, gi, in, group, ngroups, &act)))
		return rc;
	if (group > UINT32_MAX)
		return qfail(f, qw->name, "group size too large");
	char *name = qtk_malloc(plen + 8);
	if (!name)
		return oom(m);
	memcpy(name, prefix, plen);
	memcpy(name + plen, ".weight", 8);
	out->name = name;
	out->ndim = 2;
	out->shape[0] = out_;
	out->shape[1] = in;
	out->layout.kind = q->kind;
	out->layout.type = QTK_T_I32;
	out->layout.bits = (uint8_t)q->bits;
	out->layout.gptq_version = (uint8_t)(q->kind == QTK_LAYOUT_GPTQ ? q->version : 0);
	out->layout.sym = q->sym;
	out->layout.act_order = act;
	out->layout.group_size = (uint32_t)group;
	static const char *const roles[4] = {"qweight", "qzeros", "scales", "g_idx"};
	for (int k = 0; k < 4; k++) {
		if (c[k] < 0)
			continue;
		out->parts[out->nparts] = m->tensors[c[k]].parts[0];
		snprintf(out->parts[out->nparts].role, sizeof out->parts[0].role, "%s", roles[k]);
		out->nparts++;
	}
	qtk_tensor_finish(out);
	return 0;
}

typedef struct group_ent {
	qtk_tensor t;   /* the logical tensor */
	bool emitted;
} group_ent;

static int fold_run(fold *f)
{
	qtk_model *m = f->m;
	size_t n = m->ntensors;
	long *gid = qtk_malloc(n * sizeof *gid);
	group_ent *g = qtk_calloc(n, sizeof *g);
	qtk_tensor *nt = qtk_calloc(n, sizeof *nt);
	size_t ng = 0, k = 0;
	int rc = 0;
	if (!gid || !g || !nt) {
		rc = oom(m);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		gid[i] = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		if (!ends_with(nm, ".qweight"))
			continue;
		size_t plen = strlen(nm) - 8;
		if (f->q->bad[0]) {
			rc = qfail(f, nm, "%s (%s)", f->q->bad, f->cfgfile);
			break;
		}
		long c[4] = {(long)i, find(f, nm, plen, ".qzeros"), find(f, nm, plen, ".scales"),
			     find(f, nm, plen, ".g_idx")};
		if (c[1] < 0 || c[2] < 0) {
			rc = qfail(f, nm, "quantized layer has no '%.*s%s'", (int)(plen > 200 ? 200 : plen), nm,
				   c[1] < 0 ? ".qzeros" : ".scales");
			break;
		}
		if (find(f, nm, plen, ".weight") >= 0) {
			rc = qfail(f, nm, "quantized layer also has a plain '%.*s.weight'", (int)(plen > 200 ? 200 : plen), nm);
			break;
		}
		if ((rc = make_logical(f, nm, plen, c, &g[ng].t)))
			break;
		for (int j = 0; j < 4; j++)
			if (c[j] >= 0)
				gid[c[j]] = (long)ng;
		ng++;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		const char *nm = m->tensors[i].name;
		if (gid[i] < 0 && (ends_with(nm, ".qzeros") || ends_with(nm, ".g_idx")))
			rc = qfail(f, nm, "no matching '.qweight' for this quantization component");
	}
	if (rc)
		goto out;
	/* new order: a logical tensor takes the place of its first component */
	for (size_t i = 0; i < n; i++) {
		if (gid[i] < 0) {
			nt[k++] = m->tensors[i];
			continue;
		}
		group_ent *e = &g[gid[i]];
		if (!e->emitted) {
			nt[k++] = e->t;
			e->emitted = true;
		}
		qtk_free(m->tensors[i].name);
	}
	qtk_free(m->tensors);
	m->tensors = nt;
	m->ntensors = k;
	m->cap_tensors = n;
	nt = NULL;
	ng = 0;
out:
	for (size_t i = 0; i < ng; i++)
		qtk_free(g[i].t.name);
	qtk_free(gid);
	qtk_free(g);
	qtk_free(nt);
	return rc;
}

/* Fold the AWQ/GPTQ component sets of m described by the config object qc. */
static int apply_quant(qtk_model *m, const cJSON *qc, const char *def_method, const char *cfgfile)
{
	qcfg q;
	qcfg_read(qc, def_method, &q);
	if (q.kind == QTK_LAYOUT_PLAIN || !m->ntensors)
		return 0;
	fold f = {.m = m, .q = &q, .cfgfile = cfgfile};
	f.byname = qtk_malloc(m->ntensors * sizeof *f.byname);
	if (!f.byname)
		return oom(m);
	for (size_t i = 0; i < m->ntensors; i++)
		f.byname[i] = (struct byname){m->tensors[i].name, i};
	qsort(f.byname, m->ntensors, sizeof *f.byname, cmp_by_name);
	int rc = fold_run(&f);
	qtk_free(f.byname);
	return rc;
}

/* The quantization config of a directory: config.json's quantization_config,
 * else quantize_config.json, else quant_config.json. `cfg` is config.json's
 * parsed root when the caller has it. Absent everywhere: nothing to do. */
static int apply_quant_from(qtk_model *m, const char *dir, const cJSON *cfg)
{
	static const struct {
		const char *name, *def;
	} side[] = {{"quantize_config.json", "gptq"}, {"quant_config.json", "awq"}};
	const cJSON *qc = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config") : NULL;
	if (cJSON_IsObject(qc)) {
		char *p = qtk_path_join(dir, "config.json");
		if (!p)
			return oom(m);
		int rc = apply_quant(m, qc, NULL, p);
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
					rc = apply_quant(m, d.root, side[i].def, p);
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

int qtk_hf_apply_quant_dir(qtk_model *m, const char *dir)
{
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
		rc = apply_quant_from(m, dir, d.root);
	qtk_json_doc_free(&d);
	qtk_free(p);
	return rc;
}

/* ---- the directory reader ------------------------------------------------ */

/* Side files carried along as blobs. */
static const char *const side_files[] = {
	"config.json", "generation_config.json", "quantize_config.json", "quant_config.json",
	"tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
	"added_tokens.json", "vocab.json", "vocab.txt", "merges.txt", "spiece.model",
	"preprocessor_config.json", "chat_template.json", "chat_template.jinja", "qtk-provenance.json",
	"README.md", "LICENSE",
};

static bool is_pickle_name(const char *n)
{
	return ends_with(n, ".bin") || ends_with(n, ".pt") || ends_with(n, ".pth") || ends_with(n, ".ckpt") ||
	       ends_with(n, ".pkl") || ends_with(n, ".pickle");
}

typedef struct dir_scan {
	bool single, index, pickle;
	size_t nst;      /* other *.safetensors files */
	char *other;     /* the first of them */
} dir_scan;

/* The weight-file chooser of an HF directory (on disk or in an archive, through the
 * vfs listing): model.safetensors, else the index, else the one other .safetensors. */
typedef struct scan_ctx {
	qtk_model *m;
	dir_scan *s;
} scan_ctx;

static int scan_one(void *arg, const char *n, bool is_dir)
{
	scan_ctx *c = arg;
	dir_scan *s = c->s;
	(void)is_dir;
	if (n[0] == '.')
		return 0;
	if (strcmp(n, "model.safetensors") == 0)
		s->single = true;
	else if (strcmp(n, "model.safetensors.index.json") == 0)
		s->index = true;
	else if (ends_with(n, ".safetensors")) {
		if (!s->nst++ || strcmp(n, s->other) < 0) {
			qtk_free(s->other);
			if (!(s->other = qtk_strdup(n)))
				return oom(c->m);
		}
	} else if (is_pickle_name(n))
		s->pickle = true;
	return 0;
}

static int scan_dir(qtk_model *m, const char *dir, dir_scan *s)
{
	memset(s, 0, sizeof *s);
	scan_ctx c = {m, s};
	return qtk_dir_list(dir, scan_one, &c, &m->err);
}

static int probe_one(void *arg, const char *n, bool is_dir)
{
	(void)is_dir;
	if (n[0] != '.' && (ends_with(n, ".safetensors") || strcmp(n, "model.safetensors.index.json") == 0))
		*(int *)arg = 100;
	return 0;
}

static int hf_probe_path(const char *path)
{
	if (!qtk_is_dir(path))
		return 0;
	char c[4096]; /* no allocation: a probe cannot report running out of memory */
	if ((size_t)snprintf(c, sizeof c, "%s/config.json", path) >= sizeof c || !qtk_path_exists(c))
		return 0;
	int score = 60; /* open explains what is missing (e.g. pickle weights) */
	qtk_dir_list(path, probe_one, &score, NULL);
	return score;
}

/* Read the side files of HF directory `dir` into m's blobs (those present). */
int qtk_hf_load_side_files(qtk_model *m, const char *dir)
{
	for (size_t i = 0; i < sizeof side_files / sizeof *side_files; i++) {
		char *p = qtk_path_join(dir, side_files[i]);
		if (!p)
			return oom(m);
		int rc = 0;
		if (qtk_path_exists(p)) {
			uint8_t *b = NULL;
			size_t n = 0;
			rc = qtk_slurp(p, QTK_CAP_BLOB, &b, &n, &m->err);
			if (!rc && qtk_model_add_blob(m, side_files[i], b, n))
				rc = oom(m);
			qtk_free(b);
		}
		qtk_free(p);
		if (rc)
			return rc;
	}
	return 0;
}

static int hf_open(qtk_model *m)
{
	const char *dir = m->path;
	m->format_version = 0;
	dir_scan s;
	qtk_json_doc cfg = {0};
	char *cfgpath = qtk_path_join(dir, "config.json"), *wp = NULL;
	int rc = cfgpath ? scan_dir(m, dir, &s) : oom(m);
	if (rc) {
		qtk_free(cfgpath);
		return rc;
	}
	if ((rc = qtk_hf_load_side_files(m, dir)))
		goto out;
	const qtk_blob *cb = qtk_blob_find(m, "config.json");
	if (!cb) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, dir, -1, NULL, "directory has no config.json");
		goto out;
	}
	if (cb->len > QTK_CAP_JSON) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, cfgpath, 0, NULL, "config.json too large");
		goto out;
	}
	if ((rc = qtk_json_parse((const char *)cb->data, cb->len, 0, cfgpath, 0, &m->err, &cfg)))
		goto out;
	if (!cJSON_IsObject(cfg.root)) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, cfgpath, 0, NULL, "config.json is not a json object");
		goto out;
	}
	if (s.single || (!s.index && s.nst == 1)) {
		wp = qtk_path_join(dir, s.single ? "model.safetensors" : s.other);
		rc = wp ? qtk_st_load(m, wp) : oom(m);
	} else if (s.index) {
		wp = qtk_path_join(dir, "model.safetensors.index.json");
		rc = wp ? qtk_st_load_index(m, wp) : oom(m);
	} else if (s.nst > 1) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, dir, -1, NULL,
				 "%zu safetensors files but no model.safetensors.index.json", s.nst);
	} else if (s.pickle) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, dir, -1, NULL,
				 "pickle weights refused: the directory has only .bin/.pt weights, convert them to safetensors");
	} else {
		rc = qtk_err_set(&m->err, QTK_E_DATA, dir, -1, NULL, "directory has no safetensors weights");
	}
	if (!rc)
		rc = apply_quant_from(m, dir, cfg.root);
out:
	qtk_json_doc_free(&cfg);
	qtk_free(s.other);
	qtk_free(cfgpath);
	qtk_free(wp);
	return rc;
}

/* ---- the directory writer ------------------------------------------------ */

typedef struct hf_out_blob {
	char *name;
	const uint8_t *data;
	size_t len;
	char *owned; /* printed JSON we made (cJSON allocation) */
} hf_out_blob;

typedef struct hf_w {
	qtk_st_out *outs;
	size_t nouts, cur;
	hf_out_blob *blobs;
	size_t nblobs;
	char *dir;
	bool created; /* we made the directory: removed again on failure */
} hf_w;

static int werr(qtk_writer *w, int code, const char *fmt, const char *a)
{
	return qtk_err_set(w->err, code, w->path, -1, NULL, fmt, a);
}

/* The quantization the desc's tensors share (kind PLAIN when none); group
 * -1 when the layers differ only in being one group each. */
static int desc_quant(const qtk_model *d, const char *path, qtk_err *err, qcfg *q)
{
	memset(q, 0, sizeof *q);
	bool first = true, all_one_group = true, same_group = true;
	uint32_t g0 = 0;
	for (size_t i = 0; i < d->ntensors; i++) {
		const qtk_tensor *t = &d->tensors[i];
		const qtk_layout *l = &t->layout;
		if (l->kind == QTK_LAYOUT_PLAIN)
			continue;
		if (first) {
			q->kind = l->kind;
			q->bits = l->bits;
			q->sym = l->sym;
			q->version = l->kind == QTK_LAYOUT_GPTQ ? (l->gptq_version == 2 ? 2 : 1) : 0;
			g0 = l->group_size;
			first = false;
		} else if (l->kind != q->kind || l->bits != q->bits || l->sym != q->sym ||
			   (l->kind == QTK_LAYOUT_GPTQ && (l->gptq_version == 2 ? 2 : 1) != q->version)) {
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

static bool qcfg_same(const qcfg *a, const qcfg *b)
{
	return a->kind == b->kind && !a->bad[0] && a->bits == b->bits &&
	       (a->group == b->group || (a->group == -1 && b->one_group)) &&
	       a->sym == b->sym && (a->kind != QTK_LAYOUT_GPTQ || a->version == b->version);
}

static cJSON *qcfg_json(const qcfg *q)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	bool ok;
	if (q->kind == QTK_LAYOUT_AWQ) {
		ok = cJSON_AddStringToObject(o, "quant_method", "awq") && cJSON_AddNumberToObject(o, "bits", q->bits) &&
		     cJSON_AddNumberToObject(o, "group_size", (double)q->group) &&
		     cJSON_AddBoolToObject(o, "zero_point", !q->sym) && cJSON_AddStringToObject(o, "version", "gemm");
	} else {
		ok = cJSON_AddStringToObject(o, "quant_method", "gptq") &&
		     cJSON_AddNumberToObject(o, "bits", q->bits) &&
		     cJSON_AddNumberToObject(o, "group_size", (double)q->group) &&
		     cJSON_AddBoolToObject(o, "desc_act", q->desc_act) && cJSON_AddBoolToObject(o, "sym", q->sym) &&
		     cJSON_AddStringToObject(o, "checkpoint_format", q->version == 2 ? "gptq_v2" : "gptq");
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int qtk_hf_quant_json(const qtk_model *d, const char *path, qtk_err *err, char **out)
{
	*out = NULL;
	qcfg q;
	int rc = desc_quant(d, path, err, &q);
	if (rc || q.kind == QTK_LAYOUT_PLAIN)
		return rc;
	cJSON *o = qcfg_json(&q);
	char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (txt)
		*out = qtk_strdup(txt);
	cJSON_free(txt);
	return *out ? 0 : qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
}

int qtk_hf_apply_quant_embedded(qtk_model *m)
{
	const qtk_kv *kv = qtk_kv_find(m, QTK_ST_QCFG_KEY);
	if (!kv || kv->val.type != QTK_V_STR)
		return 1;
	qtk_json_doc d;
	int rc = qtk_json_parse(kv->val.v.str.s, (size_t)kv->val.v.str.len, 0, m->path, 8, &m->err, &d);
	if (rc)
		return rc;
	if (cJSON_IsObject(d.root))
		rc = apply_quant(m, d.root, NULL, m->path);
	else
		rc = qtk_err_set(&m->err, QTK_E_DATA, m->path, 8, "key '" QTK_ST_QCFG_KEY "'",
				 "embedded quantization config is not a json object");
	qtk_json_doc_free(&d);
	return rc;
}

static bool plain_file_name(const char *s)
{
	return s[0] && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\') && strlen(s) < 256;
}

static int add_out_blob(hf_w *h, const char *name, const uint8_t *data, size_t len, char *owned)
{
	hf_out_blob *b = &h->blobs[h->nblobs];
	b->name = qtk_strdup(name);
	if (!b->name) {
		cJSON_free(owned);
		return QTK_E_IO;
	}
	b->data = owned ? (const uint8_t *)owned : data;
	b->len = owned ? strlen(owned) : len;
	b->owned = owned;
	h->nblobs++;
	return 0;
}

/* The side files to write: desc's blobs, with config.json (and
 * quantize_config.json) made to describe the tensors actually written. */
static int prepare_blobs(qtk_writer *w, hf_w *h)
{
	const qtk_model *d = w->desc;
	qcfg want_q;
	int rc = desc_quant(w->desc, w->path, w->err, &want_q);
	if (rc)
		return rc;
	h->blobs = qtk_calloc(d->nblobs + 2, sizeof *h->blobs);
	if (!h->blobs)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	const qtk_blob *cb = qtk_blob_find(d, "config.json");
	qtk_json_doc cfg = {0};
	if (cb && (rc = qtk_json_parse((const char *)cb->data, cb->len, 0, "config.json", 0, w->err, &cfg)))
		return rc;
	if (!cb || !cJSON_IsObject(cfg.root)) {
		qtk_json_doc_free(&cfg);
		if (!(cfg.root = cJSON_CreateObject()))
			return werr(w, QTK_E_IO, "out of memory%s", "");
		cb = NULL;
	}
	qcfg have = {0};
	const cJSON *qc = cJSON_GetObjectItemCaseSensitive(cfg.root, "quantization_config");
	if (cJSON_IsObject(qc))
		qcfg_read(qc, NULL, &have);
	bool patch = !cb || (want_q.kind == QTK_LAYOUT_PLAIN ? have.kind != QTK_LAYOUT_PLAIN : !qcfg_same(&have, &want_q));
	cJSON *newq = NULL;
	if (want_q.kind != QTK_LAYOUT_PLAIN && !(newq = qcfg_json(&want_q))) {
		qtk_json_doc_free(&cfg);
		return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	if (patch) {
		cJSON_DeleteItemFromObjectCaseSensitive(cfg.root, "quantization_config");
		cJSON *copy = newq ? cJSON_Duplicate(newq, 1) : NULL;
		char *txt = NULL;
		if ((!newq || (copy && cJSON_AddItemToObject(cfg.root, "quantization_config", copy))) &&
		    (txt = cJSON_Print(cfg.root)))
			rc = add_out_blob(h, "config.json", NULL, 0, txt);
		else {
			if (copy && !cJSON_GetObjectItemCaseSensitive(cfg.root, "quantization_config"))
				cJSON_Delete(copy);
			rc = QTK_E_IO;
		}
	} else {
		rc = add_out_blob(h, "config.json", cb->data, cb->len, NULL);
	}
	for (size_t i = 0; i < d->nblobs && !rc; i++) {
		const qtk_blob *b = &d->blobs[i];
		if (strcmp(b->name, "config.json") == 0 || ends_with(b->name, ".safetensors") ||
		    strcmp(b->name, "model.safetensors.index.json") == 0)
			continue;
		if (!plain_file_name(b->name)) {
			rc = qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "side file name '%.200s' is not a plain file name",
					 b->name);
			break;
		}
		bool qfile = strcmp(b->name, "quantize_config.json") == 0 || strcmp(b->name, "quant_config.json") == 0;
		if (qfile && (patch || want_q.kind == QTK_LAYOUT_PLAIN)) {
			/* stale: rewrite quantize_config.json for gptq, drop otherwise */
			if (want_q.kind == QTK_LAYOUT_GPTQ && strcmp(b->name, "quantize_config.json") == 0) {
				char *txt = cJSON_Print(newq);
				rc = txt ? add_out_blob(h, b->name, NULL, 0, txt) : QTK_E_IO;
			}
			continue;
		}
		rc = add_out_blob(h, b->name, b->data, b->len, NULL);
	}
	cJSON_Delete(newq);
	qtk_json_doc_free(&cfg);
	if (rc == QTK_E_IO)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	return rc;
}

/* Split the tensors into shards of at most split_max_size data bytes (a
 * larger tensor gets a shard of its own). */
static int plan_shards(qtk_writer *w, hf_w *h)
{
	const qtk_model *d = w->desc;
	uint64_t max = w->opts.split_max_size, cur = 0;
	size_t n = 1;
	for (size_t i = 0; i < d->ntensors; i++) {
		uint64_t b = d->tensors[i].n_bytes;
		if (max && cur && cur + b > max) {
			n++;
			cur = 0;
		}
		cur += b;
	}
	if (n > QTK_CAP_FILES || n > 99999)
		return werr(w, QTK_E_USAGE, "--split-max-size gives too many shards%s", "");
	h->outs = qtk_calloc(n, sizeof *h->outs);
	if (!h->outs)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	h->nouts = n;
	size_t s = 0;
	cur = 0;
	for (size_t i = 0; i < d->ntensors; i++) {
		uint64_t b = d->tensors[i].n_bytes;
		if (max && cur && cur + b > max) {
			h->outs[s].t1 = i;
			h->outs[++s].t0 = i;
			cur = 0;
		}
		cur += b;
	}
	h->outs[s].t1 = d->ntensors;
	for (s = 0; s < n; s++) {
		char name[64];
		if (n == 1)
			snprintf(name, sizeof name, "model.safetensors");
		else
			snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, n);
		h->outs[s].of.fd = -1;
		if (!(h->outs[s].path = qtk_path_join(h->dir, name)))
			return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	return 0;
}

static int hfw_begin(qtk_writer *w)
{
	hf_w *h = qtk_calloc(1, sizeof *h);
	if (!h)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	w->priv = h;
	size_t n = strlen(w->path);
	while (n > 1 && w->path[n - 1] == '/')
		n--;
	if (!(h->dir = qtk_strndup(w->path, n)))
		return werr(w, QTK_E_IO, "out of memory%s", "");
	int rc = qtk_st_check_desc(w->desc, w->path, w->err);
	if (!rc)
		rc = prepare_blobs(w, h);
	if (rc)
		return rc;
	if (mkdir(h->dir, 0755) == 0) {
		h->created = true;
		qtk_cleanup_register(h->dir); /* an interrupted run leaves no empty directory */
	} else if (errno != EEXIST) {
		return qtk_err_sys(w->err, h->dir, "cannot create directory");
	}
	if (!qtk_is_dir(h->dir))
		return qtk_err_set(w->err, QTK_E_IO, h->dir, -1, NULL, "output exists and is not a directory");
	if ((rc = plan_shards(w, h)))
		return rc;
	for (size_t s = 0; s < h->nouts && !rc; s++) {
		rc = qtk_st_out_open(&h->outs[s], w->desc, w->err);
		h->outs[s].of.outs = w->opts.outs;
	}
	return rc;
}

/* The provenance record of a directory is the side file qtk-provenance.json, written at finish. */
static int hfw_patch(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	hf_w *h = w->priv;
	for (size_t i = 0; i < h->nblobs; i++) {
		hf_out_blob *b = &h->blobs[i];
		if (strcmp(b->name, "qtk-provenance.json"))
			continue;
		char *copy = cJSON_malloc(b->len + 1);
		if (!copy)
			return werr(w, QTK_E_IO, "out of memory%s", "");
		memcpy(copy, b->data, b->len);
		copy[b->len] = 0;
		int rc = fn(ctx, (uint8_t *)copy, b->len);
		if (rc) {
			cJSON_free(copy);
			return rc;
		}
		cJSON_free(b->owned);
		b->owned = copy;
		b->data = (const uint8_t *)copy;
		return 0;
	}
	/* no side file (a bundle's inner directory): the record is a __metadata__ entry of every shard */
	const qtk_kv *kv = qtk_kv_find(w->desc, "qtk.provenance");
	if (!kv || kv->val.type != QTK_V_STR || !h->nouts)
		return werr(w, QTK_E_USAGE, "no qtk-provenance.json to patch%s", "");
	int rc = 0;
	for (size_t s = 0; s < h->nouts && !rc; s++)
		rc = qtk_ofile_patch(&h->outs[s].of, 8, h->outs[s].head_len, fn, ctx);
	return rc;
}

static int hfw_part_begin(qtk_writer *w)
{
	hf_w *h = w->priv;
	while (h->cur + 1 < h->nouts && w->cur_tensor >= h->outs[h->cur].t1)
		h->cur++;
	return 0;
}

static int hfw_put(qtk_writer *w, const void *buf, size_t n)
{
	hf_w *h = w->priv;
	return qtk_ofile_write(&h->outs[h->cur].of, buf, n);
}

static int cmp_name_file(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* model.safetensors.index.json: sorted weight_map, as transformers writes it. */
static int write_index(qtk_writer *w, hf_w *h)
{
	const qtk_model *d = w->desc;
	size_t np = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < d->ntensors; i++)
		np += (size_t)d->tensors[i].nparts;
	for (size_t s = 0; s < h->nouts; s++)
		total += h->outs[s].data_bytes;
	/* entries: "name\0file" strings, sorted by name */
	char **e = qtk_calloc(np ? np : 1, sizeof *e);
	qtk_buf b = {0};
	int rc = e ? 0 : QTK_E_IO;
	size_t k = 0, s = 0;
	for (size_t i = 0; i < d->ntensors && !rc; i++) {
		while (s + 1 < h->nouts && i >= h->outs[s].t1)
			s++;
		const char *file = qtk_path_base(h->outs[s].path);
		for (int p = 0; p < d->tensors[i].nparts && !rc; p++) {
			char *nm = qtk_st_part_name(&d->tensors[i], p);
			size_t a = nm ? strlen(nm) : 0, f = strlen(file);
			if (nm && (e[k] = qtk_malloc(a + f + 2))) {
				memcpy(e[k], nm, a + 1);
				memcpy(e[k] + a + 1, file, f + 1);
				k++;
			} else
				rc = QTK_E_IO;
			qtk_free(nm);
		}
	}
	if (!rc) {
		qsort(e, k, sizeof *e, cmp_name_file);
		qtk_buf_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
			       (unsigned long long)total);
		for (size_t i = 0; i < k; i++) {
			qtk_buf_puts(&b, "    ");
			qtk_json_put_str(&b, e[i], strlen(e[i]));
			qtk_buf_puts(&b, ": ");
			const char *f = e[i] + strlen(e[i]) + 1;
			qtk_json_put_str(&b, f, strlen(f));
			qtk_buf_puts(&b, i + 1 < k ? ",\n" : "\n");
		}
		qtk_buf_puts(&b, "  }\n}\n");
		if (b.failed)
			rc = QTK_E_IO;
	}
	for (size_t i = 0; i < k; i++)
		qtk_free(e[i]);
	qtk_free(e);
	if (rc) {
		qtk_buf_free(&b);
		return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	char *p = qtk_path_join(h->dir, "model.safetensors.index.json");
	qtk_ofile of;
	rc = p ? qtk_ofile_open(&of, p, w->err) : werr(w, QTK_E_IO, "out of memory%s", "");
	if (!rc) {
		rc = qtk_ofile_write(&of, b.p, b.len);
		if (!rc)
			rc = qtk_ofile_commit(&of);
		if (rc)
			qtk_ofile_abort(&of);
	}
	qtk_free(p);
	qtk_buf_free(&b);
	return rc;
}

static int write_blob(qtk_writer *w, hf_w *h, const hf_out_blob *b)
{
	char *p = qtk_path_join(h->dir, b->name);
	if (!p)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	qtk_ofile of;
	int rc = qtk_ofile_open(&of, p, w->err);
	if (!rc) {
		of.outs = w->opts.outs;
		rc = qtk_ofile_write(&of, b->data, b->len);
		if (!rc)
			rc = qtk_ofile_commit(&of);
		if (rc)
			qtk_ofile_abort(&of);
	}
	qtk_free(p);
	return rc;
}

static int remove_stale(qtk_writer *w, hf_w *h, const char *name)
{
	char *p = qtk_path_join(h->dir, name);
	if (!p)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	int rc = 0;
	if (unlink(p) != 0 && errno != ENOENT)
		rc = qtk_err_sys(w->err, p, "cannot remove stale file");
	qtk_free(p);
	return rc;
}

/* Commit the data files, then the index, then the side files, config.json
 * last: a directory is only recognised once config.json is in place. */
static int hfw_finish(qtk_writer *w)
{
	hf_w *h = w->priv;
	int rc = 0;
	for (size_t s = 0; s < h->nouts && !rc; s++) {
		rc = qtk_ofile_commit(&h->outs[s].of);
		if (!rc)
			h->outs[s].opened = false;
	}
	if (!rc && h->nouts > 1)
		rc = write_index(w, h);
	if (!rc) /* a stale single file or index from an earlier run would shadow or contradict this one */
		rc = remove_stale(w, h, h->nouts > 1 ? "model.safetensors" : "model.safetensors.index.json");
	for (size_t i = 1; i < h->nblobs && !rc; i++)
		rc = write_blob(w, h, &h->blobs[i]);
	if (!rc && h->nblobs)
		rc = write_blob(w, h, &h->blobs[0]);
	return rc;
}

static void hfw_abort(qtk_writer *w)
{
	hf_w *h = w->priv;
	if (!h)
		return;
	for (size_t s = 0; s < h->nouts; s++) {
		if (h->outs[s].opened)
			qtk_ofile_abort(&h->outs[s].of);
		qtk_free(h->outs[s].path);
	}
	qtk_free(h->outs);
	for (size_t i = 0; i < h->nblobs; i++) {
		qtk_free(h->blobs[i].name);
		cJSON_free(h->blobs[i].owned);
	}
	qtk_free(h->blobs);
	if (h->created) {
		qtk_cleanup_unregister(h->dir);
		(void)rmdir(h->dir); /* only succeeds when nothing was committed into it */
	}
	qtk_free(h->dir);
	qtk_free(h);
	w->priv = NULL;
}

static int hfw_finish_free(qtk_writer *w)
{
	int rc = hfw_finish(w);
	hf_w *h = w->priv;
	if (!rc && h && h->created) { /* the directory is the output now */
		qtk_cleanup_unregister(h->dir);
		h->created = false;
	}
	if (!rc)
		hfw_abort(w); /* everything is committed: this only frees */
	return rc;
}

static const qtk_writer_ops hf_writer = {
	.begin = hfw_begin,
	.part_begin = hfw_part_begin,
	.put = hfw_put,
	.finish = hfw_finish_free,
	.abort = hfw_abort,
	.patch_header = hfw_patch,
};

const qtk_format qtk_format_hf = {
	.name = "hf",
	.probe_path = hf_probe_path,
	.open = hf_open,
	.out = QTK_OUT_HF,
	.writer = &hf_writer,
	.out_dir = true,
	.can_store = qtk_st_can_store,
};
