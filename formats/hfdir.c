/* hfdir.c - Hugging Face model directories (config.json + safetensors + side
 * files). Their packed AWQ / GPTQ parts are folded into logical tensors by the
 * packed-scheme layer (src/scheme/fold.h) from the directory's quantization
 * config; the writer describes the tensors it writes in config.json the same way.
 */
#include "st_json.h"
#include "scheme/mlx.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int oom(qtk_model *m) { return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory"); }

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
	return qtk_str_ends(n, ".bin") || qtk_str_ends(n, ".pt") || qtk_str_ends(n, ".pth") || qtk_str_ends(n, ".ckpt") ||
	       qtk_str_ends(n, ".pkl") || qtk_str_ends(n, ".pickle");
}

/* The allow-list governs every path that carries side files: this reader reads only these, and
 * every writer (HF directory, QPK, bundle) writes only these and the names its caller asked for. */
bool qtk_side_file_known(const char *name)
{
	for (size_t i = 0; i < sizeof side_files / sizeof *side_files; i++)
		if (!strcmp(name, side_files[i]))
			return true;
	return false;
}

bool qtk_side_file_executable(const char *name) { return qtk_str_ends(name, ".py") || is_pickle_name(name); }

bool qtk_side_file_allowed(const char *name, const qtk_write_opts *o)
{
	if (qtk_side_file_known(name))
		return true;
	for (size_t i = 0; o && i < o->ncarry; i++)
		if (!strcmp(o->carry[i], name))
			return true;
	return false;
}

int qtk_hf_load_side_file(qtk_model *m, const char *name, qtk_err *err)
{
	if (!name[0] || name[0] == '.' || strchr(name, '/') || strchr(name, '\\') || qtk_str_ends(name, ".safetensors"))
		return qtk_err_set(err, QTK_E_USAGE, NULL, -1, name, "not a side file name");
	if (strcmp(qtk_model_format(m), "hf") || !qtk_is_dir(m->path))
		return qtk_err_set(err, QTK_E_USAGE, m->path, -1, name, "no such side file in the input");
	char *p = qtk_path_join(m->path, name);
	if (!p)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	int rc = 0;
	if (!qtk_path_exists(p) || qtk_is_dir(p)) {
		rc = qtk_err_set(err, QTK_E_USAGE, m->path, -1, name, "no such side file in the input");
	} else {
		uint8_t *b = NULL;
		size_t n = 0;
		rc = qtk_slurp(p, QTK_CAP_BLOB, &b, &n, err);
		if (!rc && qtk_model_add_blob(m, name, b, n))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		qtk_free(b);
	}
	qtk_free(p);
	return rc;
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
	else if (qtk_str_ends(n, ".safetensors")) {
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
	if (n[0] != '.' && (qtk_str_ends(n, ".safetensors") || strcmp(n, "model.safetensors.index.json") == 0))
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
		rc = qtk_scheme_fold_dir(m, dir, cfg.root);
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
	bool mlx;     /* MLX tensors: config.json and the index as mlx-lm writes them */
} hf_w;

static int werr(qtk_writer *w, int code, const char *fmt, const char *a)
{
	return qtk_err_set(w->err, code, w->path, -1, NULL, fmt, a);
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
	qtk_qcfg want_q;
	int rc = qtk_qcfg_from_desc(w->desc, w->path, w->err, &want_q);
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
	qtk_qcfg have = {0};
	const cJSON *qc = cJSON_GetObjectItemCaseSensitive(cfg.root, "quantization_config");
	if (cJSON_IsObject(qc))
		qtk_qcfg_read(qc, NULL, &have);
	bool patch = !cb || (want_q.kind == QTK_LAYOUT_PLAIN ? have.kind != QTK_LAYOUT_PLAIN : !qtk_qcfg_same(&have, &want_q));
	cJSON *newq = NULL;
	if (want_q.kind != QTK_LAYOUT_PLAIN && !(newq = qtk_qcfg_json(&want_q))) {
		qtk_json_doc_free(&cfg);
		return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	h->mlx = want_q.kind == QTK_LAYOUT_MLX;
	if (h->mlx) { /* mlx-lm's config.json: its own layout, "quantization" and "quantization_config" */
		char *txt = NULL, *copy = NULL;
		size_t tl = 0;
		patch = true;
		rc = qtk_mlx_config_text(cb ? (const char *)cb->data : NULL, cb ? cb->len : 0, (unsigned)want_q.bits,
					 (uint32_t)want_q.group, &txt, &tl) || !(copy = cJSON_malloc(tl + 1)) ? QTK_E_IO : 0;
		if (!rc) {
			memcpy(copy, txt, tl);
			copy[tl] = 0;
			rc = add_out_blob(h, "config.json", NULL, 0, copy);
		}
		qtk_free(txt);
	} else if (patch) {
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
		if (strcmp(b->name, "config.json") == 0 || qtk_str_ends(b->name, ".safetensors") ||
		    strcmp(b->name, "model.safetensors.index.json") == 0)
			continue;
		if (!plain_file_name(b->name)) {
			rc = qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "side file name '%.200s' is not a plain file name",
					 b->name);
			break;
		}
		if (!qtk_side_file_allowed(b->name, &w->opts)) {
			rc = qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, b->name,
					 "not a known side file and not asked for: not carried");
			break;
		}
		bool qfile = strcmp(b->name, "quantize_config.json") == 0 || strcmp(b->name, "quant_config.json") == 0 ||
			     strcmp(b->name, "hf_quant_config.json") == 0; /* ModelOpt's */
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
	/* mlx-lm: indent 4, the parameter count too, no final newline */
	const char *ind = h->mlx ? "    " : "  ";
	if (!rc) {
		qsort(e, k, sizeof *e, cmp_name_file);
		qtk_buf_printf(&b, "{\n%s\"metadata\": {\n%s%s\"total_size\": %llu", ind, ind, ind, (unsigned long long)total);
		if (h->mlx) {
			uint64_t params = 0;
			for (size_t i = 0; i < d->ntensors; i++)
				params += d->tensors[i].n_params;
			qtk_buf_printf(&b, ",\n%s%s\"total_parameters\": %llu", ind, ind, (unsigned long long)params);
		}
		qtk_buf_printf(&b, "\n%s},\n%s\"weight_map\": {\n", ind, ind);
		for (size_t i = 0; i < k; i++) {
			qtk_buf_puts(&b, ind);
			qtk_buf_puts(&b, ind);
			qtk_json_put_str(&b, e[i], strlen(e[i]));
			qtk_buf_puts(&b, ": ");
			const char *f = e[i] + strlen(e[i]) + 1;
			qtk_json_put_str(&b, f, strlen(f));
			qtk_buf_puts(&b, i + 1 < k ? ",\n" : "\n");
		}
		qtk_buf_printf(&b, "%s}\n}%s", ind, h->mlx ? "" : "\n");
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
	if (!rc && (h->nouts > 1 || h->mlx)) /* mlx-lm writes the index even for one file */
		rc = write_index(w, h);
	if (!rc && (h->nouts > 1 || !h->mlx)) /* a stale single file or index from an earlier run would shadow or contradict this one */
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
	.can_store = qtk_st_can_store,	.meta_strings = true,
};
