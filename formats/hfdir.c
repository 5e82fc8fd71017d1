/* hfdir.c - Hugging Face model directories (config.json + safetensors + side
 * files). Their packed AWQ / GPTQ parts are folded into logical tensors by the
 * packed-scheme layer (src/scheme/fold.h) from the directory's quantization
 * config; the writer describes the tensors it writes in config.json the same way.
 */
#include "st_json.h"
#include "scheme/mlx.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int oom(qtk_model *m) { return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory"); }

/* ---- the directory reader ------------------------------------------------ */

/* Side files carried along as blobs. */
static const char *const side_files[] = {
	"config.json", "generation_config.json", "quantize_config.json", "quant_config.json", "hf_quant_config.json",
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

#define HF_REC_FILE "qtk-provenance.json" /* the directory's provenance record */

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
	char *dir;      /* OUTPUT as given, without the trailing '/' (for messages and the file list) */
	char *real;     /* the directory to replace: OUTPUT resolved when it exists */
	char *tmp;      /* the sibling temporary directory every file is written into */
	char **done;    /* files committed into tmp (removed on an interrupt) */
	size_t ndone, outs0; /* outs0: the output list's length before this writer */
	bool existed;   /* OUTPUT existed (empty, or a directory qtk wrote, or --force) */
	bool inplace;   /* OUTPUT is a mount point: tmp is inside it, its files are moved in one by one */
	bool mlx;       /* MLX tensors: config.json and the index as mlx-lm writes them */
	qtk_buf index;  /* model.safetensors.index.json's text (empty: one file, no index) */
	/* qtk-provenance.json placed a piece at a time (qtk_writer_record_piece): written into
	 * its file as the pieces come, committed at finish in the side file's turn */
	qtk_ofile rec_of;
	bool rec_open, rec_done;
	uint64_t rec_at;
} hf_w;

static int werr(qtk_writer *w, int code, const char *fmt, const char *a)
{
	return qtk_err_set(w->err, code, w->path, -1, NULL, fmt, a);
}

static bool plain_file_name(const char *s)
{
	return s[0] && s[0] != '.' && !strchr(s, '/') && !strchr(s, '\\') && strlen(s) < 256;
}

/* The side file qtk-provenance.json among the files to write, or NULL. */
static hf_out_blob *rec_blob(hf_w *h)
{
	for (size_t i = 0; i < h->nblobs; i++)
		if (!strcmp(h->blobs[i].name, HF_REC_FILE))
			return &h->blobs[i];
	return NULL;
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
	h->blobs = qtk_calloc(d->nblobs + 3, sizeof *h->blobs);
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
	/* ModelOpt NVFP4 kept from a ModelOpt checkpoint: its config.json and hf_quant_config.json
	 * as they are (their producer is the one that made the weights) */
	bool nv = want_q.kind == QTK_LAYOUT_NVFP4;
	if (nv && cb && qtk_blob_find(d, "hf_quant_config.json")) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(qc, "quant_method"), *a = cJSON_GetObjectItemCaseSensitive(qc, "quant_algo");
		patch = !(cJSON_IsString(m) && !strcmp(m->valuestring, "modelopt") && cJSON_IsString(a) &&
			  !strcmp(a->valuestring, "NVFP4"));
	}
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
	if (!rc && nv && patch) { /* ModelOpt's own description beside config.json */
		char *txt = qtk_modelopt_hf_quant_text(&want_q), *copy = txt ? cJSON_malloc(strlen(txt) + 1) : NULL;
		if (copy)
			memcpy(copy, txt, strlen(txt) + 1);
		rc = copy ? add_out_blob(h, "hf_quant_config.json", NULL, 0, copy) : QTK_E_IO;
		qtk_free(txt);
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
		if (w->opts.record_gen && !strcmp(b->name, HF_REC_FILE)) /* generated: no bytes here */
			rc = add_out_blob(h, b->name, NULL, w->opts.record_len, NULL);
		else
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
		if (!(h->outs[s].path = qtk_path_join(h->tmp, name)))
			return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	return 0;
}

/* ---- replacing a directory as a whole ----------------------------------
 * The files are written into a sibling temporary directory .NAME.qtk-XXXXXX
 * and swapped with OUTPUT by one rename at the very end: the new model's
 * files appear together, the old ones go, and a failed run leaves OUTPUT as
 * it was. An existing OUTPUT must be empty or hold only what qtk writes into
 * a directory (below), unless the caller forces it (qconvert --force). */

/* model-00001-of-00003.safetensors: qtk's shard names, five digits each, 1 <= k <= n. */
static bool shard_name(const char *n)
{
	if (strlen(n) != 32 || strncmp(n, "model-", 6) || strncmp(n + 11, "-of-", 4) || strcmp(n + 20, ".safetensors"))
		return false;
	unsigned k = 0, t = 0;
	for (int i = 0; i < 5; i++) {
		char c = n[6 + i], d = n[15 + i];
		if (c < '0' || c > '9' || d < '0' || d > '9')
			return false;
		k = k * 10 + (unsigned)(c - '0');
		t = t * 10 + (unsigned)(d - '0');
	}
	return k >= 1 && k <= t;
}

/* What qtk writes into a directory: its weights, its index and the side files it carries. */
static bool qtk_file_name(const char *n)
{
	for (size_t i = 0; i < sizeof side_files / sizeof *side_files; i++)
		if (!strcmp(n, side_files[i]))
			return true;
	if (!strcmp(n, "model.safetensors") || !strcmp(n, "model.safetensors.index.json") ||
	    !strcmp(n, "hf_quant_config.json"))
		return true;
	if (shard_name(n))
		return true;
	/* a temporary of an interrupted qtk run: .NAME.qtk-XXXXXX */
	size_t l = strlen(n);
	return n[0] == '.' && l > 12 && !memcmp(n + l - 11, ".qtk-", 5);
}

typedef struct own_scan {
	size_t n;           /* entries */
	bool prov;          /* qtk-provenance.json is one of them */
	size_t foreign;     /* entries qtk did not write */
	char first[128];    /* the first of them (in listing order) */
} own_scan;

static int own_one(void *arg, const char *n, bool is_dir)
{
	own_scan *o = arg;
	o->n++;
	if (!is_dir && !strcmp(n, "qtk-provenance.json"))
		o->prov = true;
	if ((is_dir || !qtk_file_name(n)) && !o->foreign++)
		snprintf(o->first, sizeof o->first, "%s%s", n, is_dir ? "/" : "");
	return 0;
}

/* May OUTPUT (an existing directory) be replaced? When it is empty, or holds qtk's own
 * output: a qtk-provenance.json and nothing but the names qtk writes. */
static int check_replace(qtk_writer *w, hf_w *h)
{
	own_scan o = {0};
	int rc = qtk_dir_list(h->real, own_one, &o, w->err);
	if (rc || w->opts.force || !o.n)
		return rc;
	if (o.foreign)
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL,
				   "output directory holds %zu file%s qtk did not write ('%s'%s); --force replaces the "
				   "directory and everything in it",
				   o.foreign, o.foreign == 1 ? "" : "s", o.first, o.foreign > 1 ? ", ..." : "");
	if (!o.prov) /* the names qtk writes, but no record: another tool's model */
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL,
				   "output directory holds a model qtk did not write (no qtk-provenance.json); --force "
				   "replaces the directory and everything in it");
	return 0;
}

/* Remove directory `name` under dfd and everything in it, never following a symbolic link.
 * Best effort: what cannot be removed stays. */
static void rm_tree_at(int dfd, const char *name, int depth)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(fd, e->d_name, 0) != 0 && (errno == EISDIR || errno == EPERM) && depth < 64)
			rm_tree_at(fd, e->d_name, depth + 1);
	}
	closedir(d);
	(void)unlinkat(dfd, name, AT_REMOVEDIR);
}

static void rm_tree(const char *path)
{
	rm_tree_at(AT_FDCWD, path, 0);
}

static void fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* The sibling temporary directory, and what to replace. */
static int prepare_dir(qtk_writer *w, hf_w *h)
{
	struct stat st;
	if (stat(h->dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return qtk_err_set(w->err, QTK_E_IO, h->dir, -1, NULL, "output exists and is not a directory");
		char *r = realpath(h->dir, NULL);
		if (!r)
			return qtk_err_sys(w->err, h->dir, "cannot resolve the output directory");
		h->real = qtk_strdup(r);
		free(r);
		if (!h->real)
			return werr(w, QTK_E_IO, "out of memory%s", "");
		h->existed = true;
		char cwd[PATH_MAX];
		size_t rl = strlen(h->real);
		if (!strcmp(h->real, "/"))
			return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "cannot replace the root directory");
		if (getcwd(cwd, sizeof cwd) && !strncmp(cwd, h->real, rl) && (cwd[rl] == 0 || cwd[rl] == '/'))
			return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL,
					   "output directory is the current directory or holds it; it is replaced as a "
					   "whole: run from outside it");
		int rc = check_replace(w, h);
		if (rc)
			return rc;
	} else if (errno != ENOENT) {
		return qtk_err_sys(w->err, h->dir, "cannot create directory");
	} else if (!(h->real = qtk_strdup(h->dir))) {
		return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	char *parent = qtk_path_dir(h->real);
	const char *base = qtk_path_base(h->real);
	size_t n = strlen(h->real) + strlen(base) + 32;
	if (!parent || !(h->tmp = qtk_malloc(n))) {
		qtk_free(parent);
		return werr(w, QTK_E_IO, "out of memory%s", "");
	}
	/* a mount point (a container's volume) cannot be renamed: write inside it instead */
	struct stat ps;
	h->inplace = h->existed && stat(parent, &ps) == 0 && ps.st_dev != st.st_dev;
	snprintf(h->tmp, n, "%s/.%s.qtk-XXXXXX", h->inplace ? h->real : parent, base);
	qtk_free(parent);
	if (!mkdtemp(h->tmp)) {
		int rc = qtk_err_sys(w->err, h->dir, "cannot create directory");
		qtk_free(h->tmp);
		h->tmp = NULL;
		return rc;
	}
	if (chmod(h->tmp, 0755) != 0) { /* mkdtemp makes it 0700; the output is an ordinary directory */
		int rc = qtk_err_sys(w->err, h->dir, "cannot create directory");
		rmdir(h->tmp);
		qtk_free(h->tmp);
		h->tmp = NULL;
		return rc;
	}
	qtk_cleanup_register(h->tmp); /* an interrupted run removes it (after its files) */
	return 0;
}

/* A file committed into the temporary directory: removed again if the run is interrupted. */
static int note_done(qtk_writer *w, hf_w *h, const char *path)
{
	char **d = qtk_realloc(h->done, (h->ndone + 1) * sizeof *d);
	if (!d)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	h->done = d;
	if (!(d[h->ndone] = qtk_strdup(path)))
		return werr(w, QTK_E_IO, "out of memory%s", "");
	qtk_cleanup_register(d[h->ndone++]);
	return 0;
}

static void forget_done(hf_w *h)
{
	for (size_t i = 0; i < h->ndone; i++) {
		qtk_cleanup_unregister(h->done[i]);
		qtk_free(h->done[i]);
	}
	qtk_free(h->done);
	h->done = NULL;
	h->ndone = 0;
}

/* A mount point: its old entries go, then the new files are moved in one by one (not atomic:
 * an interrupt here can leave a mixture, which qverify reports). */
static int move_in(qtk_writer *w, hf_w *h)
{
	const char *tb = qtk_path_base(h->tmp);
	int dfd = open(h->real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return qtk_err_sys(w->err, h->dir, "cannot read directory");
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, tb) &&
		    unlinkat(dfd, e->d_name, 0) != 0 && (errno == EISDIR || errno == EPERM))
			rm_tree_at(dfd, e->d_name, 1);
	int tfd = openat(dfd, tb, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *t = tfd >= 0 ? fdopendir(tfd) : NULL;
	int rc = t ? 0 : qtk_err_sys(w->err, h->dir, "cannot read directory");
	while (t && !rc && (e = readdir(t)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && renameat(tfd, e->d_name, dfd, e->d_name) != 0)
			rc = qtk_err_sys(w->err, h->dir, "cannot move a file into place");
	if (t)
		closedir(t);
	else if (tfd >= 0)
		close(tfd);
	if (!rc)
		(void)unlinkat(dfd, tb, AT_REMOVEDIR);
	(void)fsync(dfd);
	closedir(d);
	return rc;
}

/* Put the finished temporary directory in OUTPUT's place: one exchange when OUTPUT exists
 * (its old contents then go), one rename when it does not. */
static int swap_in(qtk_writer *w, hf_w *h)
{
	fsync_dir(h->tmp);
	forget_done(h); /* from here on the files are the output's, not temporaries */
	qtk_cleanup_unregister(h->tmp);
	if (h->inplace) {
		int rc = move_in(w, h);
		if (!rc) {
			qtk_free(h->tmp);
			h->tmp = NULL;
			h->existed = false; /* nothing left to remove */
		}
		if (rc)
			return rc;
	} else if (!h->existed) {
		if (rename(h->tmp, h->real) != 0)
			return qtk_err_sys(w->err, h->dir, "cannot rename the new directory into place");
	} else if (renameat2(AT_FDCWD, h->tmp, AT_FDCWD, h->real, RENAME_EXCHANGE) != 0) {
		if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
			return qtk_err_sys(w->err, h->dir, "cannot swap the new directory into place");
		/* no atomic exchange on this file system: move the old one aside first */
		char *old = qtk_strdup(h->tmp);
		if (!old)
			return werr(w, QTK_E_IO, "out of memory%s", "");
		memcpy(old + strlen(old) - 6, "XXXXXX", 6);
		if (!mkdtemp(old) || rename(h->real, old) != 0) {
			int rc = qtk_err_sys(w->err, h->dir, "cannot move the old directory aside");
			rmdir(old);
			qtk_free(old);
			return rc;
		}
		if (rename(h->tmp, h->real) != 0) {
			int rc = qtk_err_sys(w->err, h->dir, "cannot rename the new directory into place");
			(void)rename(old, h->real);
			qtk_free(old);
			return rc;
		}
		qtk_free(h->tmp);
		h->tmp = old;
	}
	char *parent = qtk_path_dir(h->real);
	if (parent)
		fsync_dir(parent);
	qtk_free(parent);
	if (h->existed && h->tmp)
		rm_tree(h->tmp); /* the old directory, now under the temporary name */
	qtk_free(h->tmp);
	h->tmp = NULL;
	/* the committed files' names in OUTPUT as given */
	qtk_outlist *ol = w->opts.outs;
	for (size_t i = h->outs0; ol && i < ol->n; i++) {
		char *p = qtk_path_join(h->dir, qtk_path_base(ol->f[i].path));
		if (p) {
			qtk_free(ol->f[i].path);
			ol->f[i].path = p;
		}
	}
	return 0;
}

static int check_blobs(qtk_writer *w, hf_w *h);
static int build_index(qtk_writer *w, hf_w *h);

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
	h->outs0 = w->opts.outs ? w->opts.outs->n : 0;
	int rc = qtk_st_check_desc(w->desc, w->path, w->err);
	if (!rc)
		rc = prepare_blobs(w, h);
	/* a generated record goes into the side file only (shards' headers would run it each) */
	if (!rc && w->opts.record_gen && !rec_blob(h))
		rc = werr(w, QTK_E_USAGE, "a generated record needs the side file %s", HF_REC_FILE);
	if (!rc)
		rc = check_blobs(w, h);
	if (!rc)
		rc = prepare_dir(w, h);
	if (!rc)
		rc = plan_shards(w, h);
	for (size_t s = 0; s < h->nouts && !rc; s++) {
		h->outs[s].outs = w->opts.outs;
		rc = qtk_st_out_open(&h->outs[s], w->desc, w->err);
		if (rc == QTK_E_DATA) /* name the file in OUTPUT, not in the temporary directory */
			snprintf(w->err->file, sizeof w->err->file, "%s/%s", h->dir, qtk_path_base(h->outs[s].path));
	}
	if (!rc && (h->nouts > 1 || h->mlx)) /* mlx-lm writes the index even for one file */
		rc = build_index(w, h);
	/* where the record is: the side file, else (a bundle's inner directory) every shard's
	 * __metadata__ */
	const hf_out_blob *rb = rec_blob(h);
	bool shards = h->nouts > 0;
	for (size_t s = 0; s < h->nouts; s++)
		shards = shards && h->outs[s].rec_off;
	w->record_len = rc ? 0 : rb ? rb->len : shards ? (size_t)h->outs[0].rec_len : 0;
	return rc;
}

/* The record file opened afresh in the temporary directory (a placing started again: anew). */
static int rec_open(qtk_writer *w, hf_w *h)
{
	if (h->rec_open)
		qtk_ofile_abort(&h->rec_of);
	h->rec_open = h->rec_done = false;
	h->rec_at = 0;
	char *p = qtk_path_join(h->tmp, HF_REC_FILE);
	if (!p)
		return werr(w, QTK_E_IO, "out of memory%s", "");
	int rc = qtk_ofile_open(&h->rec_of, p, w->err);
	qtk_free(p);
	if (!rc) {
		qtk_ofile_list(&h->rec_of, w->opts.outs);
		h->rec_open = true;
	}
	return rc;
}

/* The final record in place of the reserved one, a piece at a time: into the side file
 * qtk-provenance.json as it comes (committed at finish), else (a bundle's inner directory,
 * no side file) every shard's __metadata__ value. */
static int hfw_record_piece(qtk_writer *w, uint64_t at, const void *p, size_t n)
{
	hf_w *h = w->priv;
	if (!rec_blob(h)) {
		int rc = 0;
		for (size_t s = 0; s < h->nouts && !rc; s++)
			rc = qtk_st_out_record_piece(&h->outs[s], at, p, n, w->err);
		return rc;
	}
	int rc = at ? 0 : rec_open(w, h);
	if (!rc && (!h->rec_open || at != h->rec_at))
		rc = qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, HF_REC_FILE, "record pieces out of order");
	rc = rc ? rc : qtk_ofile_write(&h->rec_of, p, n);
	h->rec_at += rc ? 0 : n;
	return rc;
}

static int hfw_record_end(qtk_writer *w)
{
	hf_w *h = w->priv;
	if (!rec_blob(h)) {
		int rc = 0;
		for (size_t s = 0; s < h->nouts && !rc; s++)
			rc = qtk_st_out_record_end(&h->outs[s], w->err);
		return rc;
	}
	h->rec_done = h->rec_open && h->rec_at == w->record_len;
	return h->rec_done ? 0 : qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, HF_REC_FILE, "record not whole");
}

/* The provenance record of a directory is the side file qtk-provenance.json, written at finish. */
static int hfw_patch(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	hf_w *h = w->priv;
	hf_out_blob *b = rec_blob(h);
	if (b && !b->data)
		return werr(w, QTK_E_USAGE, "a generated qtk-provenance.json cannot be patched%s", "");
	if (b) {
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
	int rc = 0;
	while (h->cur + 1 < h->nouts && w->cur_tensor >= h->outs[h->cur].t1) {
		rc = rc ? rc : qtk_ofile_idle(&h->outs[h->cur].of); /* one hashing thread at a time */
		h->cur++;
	}
	return rc;
}

static int hfw_put(qtk_writer *w, const void *buf, size_t n)
{
	hf_w *h = w->priv;
	return qtk_ofile_write(&h->outs[h->cur].of, buf, n);
}

static int hfw_put_file(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back)
{
	hf_w *h = w->priv;
	return qtk_ofile_copy_from(&h->outs[h->cur].of, fd, path, off, n, back);
}

static int cmp_name_file(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* model.safetensors.index.json: sorted weight_map, as transformers writes it; made at begin
 * (the shard plan and the data sizes are known then) so that it is checked before anything is
 * written, and written at finish. */
static int build_index(qtk_writer *w, hf_w *h)
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
	h->index = b;
	/* the reader's rules: a side JSON file's size cap, JSON, at most so many tensors */
	char msg[160];
	if (b.len > QTK_CAP_JSON) {
		snprintf(msg, sizeof msg, "model.safetensors.index.json would be %zu bytes: readers accept at most %llu",
			 b.len, (unsigned long long)QTK_CAP_JSON);
		return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL, "not written, as qtk would refuse to read it: %s",
				   msg);
	}
	if (k > QTK_CAP_TENSORS)
		return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, NULL,
				   "not written, as qtk would refuse to read it: %zu tensors in the index, readers accept "
				   "at most %u",
				   k, QTK_CAP_TENSORS);
	qtk_json_doc doc = {0};
	rc = qtk_json_parse((const char *)b.p, b.len, 0, "model.safetensors.index.json", 0, w->err, &doc);
	qtk_json_doc_free(&doc);
	return rc;
}

/* A written side file committed into the temporary directory and noted (p: its path there);
 * aborted when the commit fails. */
static int commit_side(qtk_writer *w, hf_w *h, qtk_ofile *of, const char *p)
{
	int rc = qtk_ofile_commit(of);
	if (rc) {
		qtk_ofile_abort(of);
		return rc;
	}
	return note_done(w, h, p);
}

/* A side file of these bytes, written and committed into the temporary directory. */
static int write_side(qtk_writer *w, hf_w *h, const char *name, const void *data, size_t len)
{
	char *p = qtk_path_join(h->tmp, name);
	qtk_ofile of;
	int rc = p ? qtk_ofile_open(&of, p, w->err) : werr(w, QTK_E_IO, "out of memory%s", "");
	if (!rc) {
		qtk_ofile_list(&of, w->opts.outs); /* listed in the order written */
		rc = qtk_ofile_write(&of, data, len);
		if (rc)
			qtk_ofile_abort(&of);
		else
			rc = commit_side(w, h, &of, p);
	}
	qtk_free(p);
	return rc;
}

static int write_index(qtk_writer *w, hf_w *h)
{
	return write_side(w, h, "model.safetensors.index.json", h->index.p, h->index.len);
}

/* The side files as the directory reader reads them: each at most QTK_CAP_BLOB bytes,
 * config.json a JSON object of at most QTK_CAP_JSON bytes. */
static int check_blobs(qtk_writer *w, hf_w *h)
{
	for (size_t i = 0; i < h->nblobs; i++) {
		const hf_out_blob *b = &h->blobs[i];
		bool cfg = !strcmp(b->name, "config.json");
		uint64_t cap = cfg ? QTK_CAP_JSON : QTK_CAP_BLOB;
		if (b->len > cap)
			return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, b->name,
					   "not written, as qtk would refuse to read it: %zu bytes, readers accept at most %llu",
					   b->len, (unsigned long long)cap);
		if (!cfg)
			continue;
		qtk_json_doc doc = {0};
		qtk_err e;
		qtk_err_clear(&e);
		int rc = qtk_json_parse((const char *)b->data, b->len, 0, "config.json", 0, &e, &doc);
		bool obj = !rc && cJSON_IsObject(doc.root);
		qtk_json_doc_free(&doc);
		if (rc == QTK_E_IO)
			return werr(w, QTK_E_IO, "out of memory%s", "");
		if (!obj)
			return qtk_err_set(w->err, QTK_E_DATA, w->path, -1, b->name,
					   "not written, as qtk would refuse to read it: %s", rc ? e.msg : "not a JSON object");
	}
	return 0;
}

static int write_blob(qtk_writer *w, hf_w *h, const hf_out_blob *b)
{
	return write_side(w, h, b->name, b->data, b->len);
}

/* qtk-provenance.json at finish: the placed record's file committed, else the reserved one
 * written (generated, when the writer was given a generator). */
static int write_record(qtk_writer *w, hf_w *h, const hf_out_blob *b)
{
	if (!h->rec_done && b->data) { /* the reserved record, as the description holds it */
		if (h->rec_open)
			qtk_ofile_abort(&h->rec_of);
		h->rec_open = false;
		return write_blob(w, h, b);
	}
	int rc = h->rec_done ? 0 : rec_open(w, h);
	if (!rc && !h->rec_done)
		rc = qtk_writer_gen_record(w, qtk_ofile_put, &h->rec_of);
	char *p = rc ? NULL : qtk_path_join(h->tmp, HF_REC_FILE);
	if (!rc && !p)
		rc = werr(w, QTK_E_IO, "out of memory%s", "");
	if (rc)
		qtk_ofile_abort(&h->rec_of);
	else
		rc = commit_side(w, h, &h->rec_of, p);
	h->rec_open = false;
	qtk_free(p);
	return rc;
}

/* Commit the data files, then the index, then the side files, config.json last, into the
 * temporary directory; then swap it into OUTPUT's place. */
static int hfw_finish(qtk_writer *w)
{
	hf_w *h = w->priv;
	int rc = 0;
	for (size_t s = 0; s < h->nouts && !rc; s++) {
		rc = qtk_ofile_commit(&h->outs[s].of);
		if (!rc) {
			h->outs[s].opened = false;
			rc = note_done(w, h, h->outs[s].path);
		}
	}
	if (!rc && h->index.len)
		rc = write_index(w, h);
	for (size_t i = 1; i < h->nblobs && !rc; i++)
		rc = !strcmp(h->blobs[i].name, HF_REC_FILE) ? write_record(w, h, &h->blobs[i]) : write_blob(w, h, &h->blobs[i]);
	if (!rc && h->nblobs)
		rc = write_blob(w, h, &h->blobs[0]);
	if (!rc)
		rc = swap_in(w, h);
	return rc;
}

/* Free everything; a temporary directory still there (a failed run) goes with what is in it. */
static void hfw_abort(qtk_writer *w)
{
	hf_w *h = w->priv;
	if (!h)
		return;
	if (h->rec_open)
		qtk_ofile_abort(&h->rec_of);
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
	qtk_buf_free(&h->index);
	if (h->tmp) {
		for (size_t i = 0; i < h->ndone; i++)
			(void)unlink(h->done[i]);
		rm_tree(h->tmp);
		qtk_cleanup_unregister(h->tmp);
		qtk_free(h->tmp);
	}
	forget_done(h);
	qtk_free(h->real);
	qtk_free(h->dir);
	qtk_free(h);
	w->priv = NULL;
}

static int hfw_finish_free(qtk_writer *w)
{
	int rc = hfw_finish(w);
	if (!rc)
		hfw_abort(w); /* everything is in place: this only frees */
	return rc;
}

static const qtk_writer_ops hf_writer = {
	.begin = hfw_begin,
	.part_begin = hfw_part_begin,
	.put = hfw_put,
	.put_file = hfw_put_file,
	.finish = hfw_finish_free,
	.abort = hfw_abort,
	.patch_header = hfw_patch,
	.record_piece = hfw_record_piece,
	.record_end = hfw_record_end,
	.record_gen = true,
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
