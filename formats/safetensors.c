/* safetensors.c - the safetensors container: single files and sharded sets
 * (model.safetensors.index.json), reader and writer.
 *
 * Layout: u64 LE header length N, N bytes of JSON, then the tensor data.
 * Validation follows huggingface/safetensors tensor.rs and is stricter where
 * docs/cli.md ("Hostile input") asks: the header must
 * start with '{', numbers are exact integers, duplicate keys are refused, every
 * data byte is owned by exactly one tensor and nothing trails the data.
 */
#include "st_json.h"
#include <stdlib.h>
#include <string.h>

/* One header entry. */
typedef struct st_ent {
	char *name;
	unsigned type;
	int ndim;
	uint64_t shape[QTK_MAX_DIMS];
	uint64_t begin, end;
	int64_t off; /* file offset of the entry's key */
} st_ent;

typedef struct st_hdr {
	st_ent *e;
	size_t n;
	uint64_t data_start; /* 8 + N */
} st_hdr;

static void hdr_free(st_hdr *h)
{
	for (size_t i = 0; i < h->n; i++)
		qtk_free(h->e[i].name);
	qtk_free(h->e);
	memset(h, 0, sizeof *h);
}

static int oom(qtk_model *m) { return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory"); }

bool qtk_st_is_index_name(const char *path)
{
	const char *b = qtk_path_base(path);
	size_t n = strlen(b), k = strlen(".safetensors.index.json");
	return n > k && strcmp(b + n - k, ".safetensors.index.json") == 0;
}

/* ---- probe ----------------------------------------------------------- */

/* No magic: JSON's '{"' (or '{}') right after the length, and a plausible
 * length. A bad length still scores a little, so that open can say what is
 * wrong instead of "unknown format". */
static int st_probe(const uint8_t *head, size_t n, uint64_t size)
{
	if (n < 10 || head[8] != '{')
		return 0;
	size_t i = 9;
	while (i < n && head[i] == ' ')
		i++;
	if (i < n && head[i] != '"' && head[i] != '}')
		return 0;
	uint64_t hl = qtk_rd64(head);
	if (hl < 2 || hl > QTK_CAP_ST_HEADER || hl > size - 8)
		return 10;
	return 40;
}

static int st_probe_path(const char *path)
{
	if (!qtk_st_is_index_name(path) || qtk_is_dir(path) || !qtk_path_exists(path))
		return 0;
	return 100;
}

/* ---- header parsing ---------------------------------------------------- */

static int ent_fail(qtk_model *m, const char *file, const st_ent *e, const char *fmt, const char *a)
{
	char subj[256];
	snprintf(subj, sizeof subj, "tensor '%.200s'", e->name);
	return qtk_err_set(&m->err, QTK_E_DATA, file, e->off, subj, fmt, a);
}

/* dtype / shape / data_offsets of one entry; exactly these three fields. */
static int parse_entry(qtk_model *m, const char *file, const cJSON *obj, st_ent *e, uint64_t data_size)
{
	if (!cJSON_IsObject(obj))
		return ent_fail(m, file, e, "tensor entry is not an object%s", "");
	const cJSON *dt = NULL, *sh = NULL, *of = NULL;
	for (const cJSON *c = obj->child; c; c = c->next) {
		if (strcmp(c->string, "dtype") == 0)
			dt = c;
		else if (strcmp(c->string, "shape") == 0)
			sh = c;
		else if (strcmp(c->string, "data_offsets") == 0)
			of = c;
		else
			return ent_fail(m, file, e, "unknown field '%.100s' in tensor entry", c->string);
	}
	if (!dt || !sh || !of)
		return ent_fail(m, file, e, "missing field '%s'", !dt ? "dtype" : !sh ? "shape" : "data_offsets");
	if (!cJSON_IsString(dt))
		return ent_fail(m, file, e, "field 'dtype' is not a string%s", "");
	int ty = qtk_type_by_st_name(dt->valuestring);
	if (ty < 0)
		return ent_fail(m, file, e, "unknown dtype '%.40s'", dt->valuestring);
	e->type = (unsigned)ty;
	if (!cJSON_IsArray(sh))
		return ent_fail(m, file, e, "field 'shape' is not an array%s", "");
	int nd = cJSON_GetArraySize(sh);
	if (nd > QTK_MAX_DIMS)
		return ent_fail(m, file, e, "rank exceeds the limit of %s dimensions", "8");
	e->ndim = nd;
	uint64_t n = 1;
	int d = 0;
	for (const cJSON *c = sh->child; c; c = c->next, d++) {
		if (!qtk_json_u64(c, &e->shape[d]))
			return ent_fail(m, file, e, "field 'shape' holds a value that is not a non-negative integer%s", "");
		if (!qtk_mul_u64(n, e->shape[d], &n))
			return ent_fail(m, file, e, "element count overflows%s", "");
	}
	if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || !qtk_json_u64(of->child, &e->begin) ||
	    !qtk_json_u64(of->child->next, &e->end))
		return ent_fail(m, file, e, "field 'data_offsets' is not a pair of integers%s", "");
	if (e->begin > e->end)
		return ent_fail(m, file, e, "data_offsets begin is greater than end%s", "");
	if (e->end > data_size)
		return ent_fail(m, file, e, "data_offsets run past the end of the file%s", "");
	uint64_t nb;
	if (qtk_type_nbytes(e->type, n, &nb))
		return ent_fail(m, file, e, qtk_type(e->type)->subbyte ? "bit count of dtype %s is not a multiple of 8"
								       : "byte size of dtype %s overflows",
				dt->valuestring);
	if (nb != e->end - e->begin) {
		char msg[96];
		snprintf(msg, sizeof msg, "%llu bytes but shape and dtype need %llu",
			 (unsigned long long)(e->end - e->begin), (unsigned long long)nb);
		return ent_fail(m, file, e, "data_offsets span %s", msg);
	}
	return 0;
}

/* __metadata__: checked, and kept in m as string kvs, or (keep false: the writer's replay of
 * its own header) checked alone, with no copy of the values (a provenance record of tens of
 * megabytes among them). */
static int meta_entry(qtk_model *m, const char *file, const cJSON *obj, int64_t off, bool keep)
{
	if (!cJSON_IsObject(obj))
		return qtk_err_set(&m->err, QTK_E_DATA, file, off, "key '__metadata__'", "__metadata__ is not an object");
	size_t n = m->nkv; /* keys the model would hold (the strict parse allows no duplicates) */
	for (const cJSON *c = obj->child; c; c = c->next) {
		char subj[256];
		snprintf(subj, sizeof subj, "key '__metadata__.%.180s'", c->string);
		if (!cJSON_IsString(c))
			return qtk_err_set(&m->err, QTK_E_DATA, file, off, subj, "__metadata__ value is not a string");
		if (keep && qtk_kv_find(m, c->string))
			continue;
		if ((keep ? m->nkv : n++) >= QTK_CAP_KV)
			return qtk_err_set(&m->err, QTK_E_DATA, file, off, NULL, "too many __metadata__ entries (limit %u)",
					   QTK_CAP_KV);
		if (strlen(c->string) > QTK_CAP_KEY)
			return qtk_err_set(&m->err, QTK_E_DATA, file, off, NULL, "__metadata__ key too long");
		if (keep && qtk_model_set_kv_str(m, c->string, c->valuestring))
			return oom(m);
	}
	return 0;
}

static int cmp_ent_ptr(const void *a, const void *b)
{
	const st_ent *x = *(const st_ent *const *)a, *y = *(const st_ent *const *)b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return 0;
}

/* Every data byte owned by exactly one tensor, and nothing after the data. */
static int check_coverage(qtk_model *m, const char *file, st_hdr *h, uint64_t data_size)
{
	if (!h->n) {
		if (data_size)
			return qtk_err_set(&m->err, QTK_E_DATA, file, (int64_t)h->data_start, NULL,
					   "%llu trailing bytes after the header of a file without tensors",
					   (unsigned long long)data_size);
		return 0;
	}
	st_ent **s = qtk_malloc(h->n * sizeof *s);
	if (!s)
		return oom(m);
	for (size_t i = 0; i < h->n; i++)
		s[i] = &h->e[i];
	qsort(s, h->n, sizeof *s, cmp_ent_ptr);
	int rc = 0;
	uint64_t pos = 0;
	for (size_t i = 0; i < h->n && !rc; i++) {
		if (s[i]->begin > pos)
			rc = ent_fail(m, file, s[i], i ? "gap before tensor data (after tensor '%.200s')"
						       : "tensor data does not start at offset 0%s",
				      i ? s[i - 1]->name : "");
		else if (s[i]->begin < pos)
			rc = ent_fail(m, file, s[i], "tensor data overlaps tensor '%.200s'", s[i - 1]->name);
		pos = s[i]->end;
	}
	qtk_free(s);
	if (!rc && pos != data_size)
		rc = qtk_err_set(&m->err, QTK_E_DATA, file, (int64_t)(h->data_start + pos), NULL,
				 "%llu trailing bytes after the tensor data", (unsigned long long)(data_size - pos));
	return rc;
}

typedef struct hdr_walk {
	qtk_model *m;
	const char *file;
	st_hdr *h;
	size_t cap, members;
	uint64_t data_size;
	bool keep_meta;
} hdr_walk;

/* One member of the header: __metadata__, or a tensor's entry. */
static int hdr_member(void *ctx, const char *key, const cJSON *val, int64_t off)
{
	hdr_walk *w = ctx;
	qtk_model *m = w->m;
	if (++w->members > QTK_CAP_TENSORS)
		return qtk_err_set(&m->err, QTK_E_DATA, w->file, 8, NULL, "too many tensors (limit %u)", QTK_CAP_TENSORS);
	if (strcmp(key, "__metadata__") == 0)
		return meta_entry(m, w->file, val, off, w->keep_meta);
	size_t nl = strlen(key);
	if (!nl || nl > QTK_CAP_NAME)
		return qtk_err_set(&m->err, QTK_E_DATA, w->file, off, NULL, nl ? "tensor name too long" : "empty tensor name");
	st_hdr *h = w->h;
	if (h->n == w->cap) {
		const size_t nc = w->cap ? 2 * w->cap : 64;
		st_ent *ne = qtk_realloc(h->e, nc * sizeof *ne);
		if (!ne)
			return oom(m);
		h->e = ne;
		w->cap = nc;
	}
	st_ent *e = &h->e[h->n];
	memset(e, 0, sizeof *e);
	e->off = off;
	if (!(e->name = qtk_strndup(key, nl)))
		return oom(m);
	h->n++;
	return parse_entry(m, w->file, val, e, w->data_size);
}

/* Validate header JSON buf[0..n) of `file`, whose tensor data (data_size bytes) starts at
 * file offset 8 + n. The reader's rules, used by the writer too (replay_header). Read a member
 * at a time: one entry's tree is held, not the header's (a header of many tensors takes their
 * entries, not their tree). */
static int parse_header_text(qtk_model *m, const char *file, const char *buf, size_t n, uint64_t data_size, st_hdr *h,
			     bool keep_meta)
{
	memset(h, 0, sizeof *h);
	h->data_start = 8 + (uint64_t)n;
	hdr_walk w = {.m = m, .file = file, .h = h, .data_size = data_size, .keep_meta = keep_meta};
	int rc = qtk_json_each_member(buf, n, QTK_JSON_INTS | QTK_JSON_BRACE_FIRST, file, 8, &m->err, hdr_member, &w);
	if (!rc)
		rc = check_coverage(m, file, h, data_size);
	if (rc)
		hdr_free(h);
	return rc;
}

/* Read and validate the header of data file `fi` of m. */
static int parse_header(qtk_model *m, uint32_t fi, st_hdr *h, bool keep_meta)
{
	const char *file = m->files[fi];
	uint64_t size = m->file_sizes[fi];
	uint8_t lb[8];
	memset(h, 0, sizeof *h);
	if (size < 8)
		return qtk_err_set(&m->err, QTK_E_DATA, file, 0, NULL,
				   "truncated header: file has %llu bytes, the header length needs 8",
				   (unsigned long long)size);
	int rc = qtk_pread_full(m->fds[fi], file, lb, 8, 0, &m->err);
	if (rc)
		return rc;
	uint64_t n = qtk_rd64(lb);
	if (n > QTK_CAP_ST_HEADER)
		return qtk_err_set(&m->err, QTK_E_DATA, file, 0, NULL, "header length %llu exceeds the limit of %llu",
				   (unsigned long long)n, (unsigned long long)QTK_CAP_ST_HEADER);
	if (n > size - 8)
		return qtk_err_set(&m->err, QTK_E_DATA, file, 0, NULL,
				   "header length %llu runs past the end of the file (%llu bytes)",
				   (unsigned long long)n, (unsigned long long)size);
	char *buf = qtk_malloc((size_t)n + 1);
	if (!buf)
		return oom(m);
	rc = qtk_pread_full(m->fds[fi], file, buf, (size_t)n, 8, &m->err);
	if (!rc)
		rc = parse_header_text(m, file, buf, (size_t)n, size - 8 - n, h, keep_meta);
	qtk_free(buf);
	return rc;
}

/* The reader's rules on a header the writer is about to write (n bytes, then data_size bytes
 * of tensor data), before the file is created: a file qtk would refuse to read is never
 * written. The checks before this one give the common refusals their own words; this one
 * is the net that keeps writer and reader from drifting apart. */
static int replay_header(const char *buf, size_t n, uint64_t data_size, const char *path, qtk_err *err)
{
	if (n > QTK_CAP_ST_HEADER)
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "header of %zu bytes exceeds the safetensors limit", n);
	qtk_model *m = qtk_model_new();
	if (!m)
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	st_hdr h;
	int rc = parse_header_text(m, path, buf, n, data_size, &h, false);
	if (!rc)
		hdr_free(&h);
	else if (rc == QTK_E_IO)
		rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	else
		rc = qtk_err_set(err, QTK_E_DATA, path, -1, m->err.subject[0] ? m->err.subject : NULL,
				 "not written, as qtk would refuse to read it: %s", m->err.msg);
	qtk_close(m);
	return rc;
}

/* Add the entries of header h (file fi) to m as plain tensors. */
static int add_tensors(qtk_model *m, uint32_t fi, const st_hdr *h)
{
	if (qtk_model_reserve_tensors(m, h->n))
		return oom(m);
	for (size_t i = 0; i < h->n; i++) {
		const st_ent *e = &h->e[i];
		qtk_tensor *t = qtk_model_add_tensor_room(m, e->name, 1);
		if (!t)
			return m->ntensors >= QTK_CAP_TENSORS
				       ? qtk_err_set(&m->err, QTK_E_DATA, m->files[fi], e->off, NULL, "too many tensors")
				       : oom(m);
		const qtk_type_info *ti = qtk_type(e->type);
		t->ndim = e->ndim;
		memcpy(t->shape, e->shape, sizeof t->shape);
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = e->type;
		t->layout.bits = ti->code_bits;
		t->nparts = 1;
		qtk_part *p = &t->parts[0];
		p->type = e->type;
		p->ndim = e->ndim;
		memcpy(p->shape, e->shape, sizeof p->shape);
		p->file = fi;
		p->offset = h->data_start + e->begin;
		p->nbytes = e->end - e->begin;
		qtk_tensor_finish(t);
	}
	return 0;
}

int qtk_st_load(qtk_model *m, const char *path)
{
	int fi = qtk_model_add_file(m, path);
	if (fi < 0)
		return fi;
	st_hdr h;
	int rc = parse_header(m, (uint32_t)fi, &h, true);
	if (rc)
		return rc;
	rc = add_tensors(m, (uint32_t)fi, &h);
	hdr_free(&h);
	return rc;
}

/* ---- sharded sets ------------------------------------------------------- */

typedef struct wm_ent {
	const char *tensor;
	const char *shard;
	int found; /* shard index + 1 where it was found */
} wm_ent;

static int cmp_wm(const void *a, const void *b)
{
	return strcmp(((const wm_ent *)a)->tensor, ((const wm_ent *)b)->tensor);
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A shard name must be a bare file name inside the index's directory. */
static bool plain_shard_name(const char *s)
{
	size_t n = strlen(s), k = strlen(".safetensors");
	if (n <= k || strcmp(s + n - k, ".safetensors") != 0 || s[0] == '.')
		return false;
	return !strchr(s, '/') && !strchr(s, '\\') && !strchr(s, ':') && !strstr(s, "..");
}

static int index_fail(qtk_model *m, const char *file, const char *tensor, const char *fmt, const char *a,
		      const char *b)
{
	char subj[256];
	snprintf(subj, sizeof subj, "tensor '%.200s'", tensor);
	return qtk_err_set(&m->err, QTK_E_DATA, file, -1, subj, fmt, a, b);
}

/* Check the tensors of shard `si` against the weight map and add them. */
static int load_shard(qtk_model *m, const char *ipath, const char *dir, const char *shard, int si,
		      wm_ent *wm, size_t nwm, uint64_t *total)
{
	char *p = qtk_path_join(dir, shard);
	if (!p)
		return oom(m);
	int fi = qtk_model_add_file(m, p);
	qtk_free(p);
	if (fi < 0)
		return fi;
	st_hdr h;
	int rc = parse_header(m, (uint32_t)fi, &h, true);
	if (rc)
		return rc;
	for (size_t i = 0; i < h.n && !rc; i++) {
		wm_ent key = {.tensor = h.e[i].name};
		wm_ent *w = bsearch(&key, wm, nwm, sizeof *wm, cmp_wm);
		if (!w)
			rc = index_fail(m, ipath, h.e[i].name, "present in shard '%.200s' but not listed in the index%s",
					shard, "");
		else if (w->found)
			rc = index_fail(m, ipath, h.e[i].name, "present in two shards ('%.200s' and '%.200s')",
					w->shard, shard);
		else if (strcmp(w->shard, shard) != 0)
			rc = index_fail(m, ipath, h.e[i].name, "found in shard '%.200s' but the index lists '%.200s'",
					shard, w->shard);
		else {
			w->found = si + 1;
			*total += h.e[i].end - h.e[i].begin;
		}
	}
	if (!rc)
		rc = add_tensors(m, (uint32_t)fi, &h);
	hdr_free(&h);
	return rc;
}

int qtk_st_load_index(qtk_model *m, const char *ipath)
{
	qtk_json_doc doc;
	int rc = qtk_json_load(ipath, QTK_CAP_JSON, 0, &m->err, &doc, NULL, NULL);
	if (rc)
		return rc;
	wm_ent *wm = NULL;
	const char **shards = NULL;
	char *dir = NULL;
	size_t nwm = 0, nsh = 0;
	const cJSON *map = cJSON_IsObject(doc.root) ? cJSON_GetObjectItemCaseSensitive(doc.root, "weight_map") : NULL;
	if (!cJSON_IsObject(map)) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, ipath, -1, "key 'weight_map'", "index has no weight_map object");
		goto out;
	}
	for (const cJSON *c = map->child; c; c = c->next)
		nwm++;
	if (nwm > QTK_CAP_TENSORS) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, ipath, -1, NULL, "too many tensors in the index");
		goto out;
	}
	wm = qtk_calloc(nwm ? nwm : 1, sizeof *wm);
	shards = qtk_calloc(nwm ? nwm : 1, sizeof *shards);
	dir = qtk_path_dir(ipath);
	if (!wm || !shards || !dir) {
		rc = oom(m);
		goto out;
	}
	size_t i = 0;
	for (const cJSON *c = map->child; c; c = c->next, i++) {
		if (!cJSON_IsString(c)) {
			rc = index_fail(m, ipath, c->string, "weight_map value is not a string%s%s", "", "");
			goto out;
		}
		if (!plain_shard_name(c->valuestring)) {
			rc = index_fail(m, ipath, c->string, "shard '%.200s' is not a plain .safetensors file name%s",
					c->valuestring, "");
			goto out;
		}
		wm[i] = (wm_ent){c->string, c->valuestring, 0};
		shards[i] = c->valuestring;
	}
	qsort(wm, nwm, sizeof *wm, cmp_wm);
	qsort(shards, nwm, sizeof *shards, cmp_str_ptr);
	for (i = 0; i < nwm; i++)
		if (!nsh || strcmp(shards[nsh - 1], shards[i]) != 0)
			shards[nsh++] = shards[i];
	if (!nsh) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, ipath, -1, "key 'weight_map'", "index lists no tensors");
		goto out;
	}
	uint64_t total = 0;
	for (i = 0; i < nsh && !rc; i++)
		rc = load_shard(m, ipath, dir, shards[i], (int)i, wm, nwm, &total);
	for (i = 0; i < nwm && !rc; i++)
		if (!wm[i].found)
			rc = index_fail(m, ipath, wm[i].tensor, "listed in the index but missing from shard '%.200s'%s",
					wm[i].shard, "");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc.root, "metadata");
	const cJSON *ts = cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "total_size") : NULL;
	if (!rc && ts) {
		uint64_t v;
		if (!qtk_json_u64(ts, &v))
			rc = qtk_err_set(&m->err, QTK_E_DATA, ipath, -1, "key 'metadata.total_size'",
					 "total_size is not a non-negative integer");
		else if (v != total)
			rc = qtk_err_set(&m->err, QTK_E_DATA, ipath, -1, "key 'metadata.total_size'",
					 "total_size %llu does not match the %llu bytes of tensor data",
					 (unsigned long long)v, (unsigned long long)total);
	}
out:
	qtk_free(wm);
	qtk_free(shards);
	qtk_free(dir);
	qtk_json_doc_free(&doc);
	return rc;
}

/* ---- plugin ------------------------------------------------------------ */

static int st_open(qtk_model *m)
{
	m->format_version = 0;
	int rc = qtk_st_is_index_name(m->path) ? qtk_st_load_index(m, m->path) : qtk_st_load(m, m->path);
	if (rc)
		return rc;
	rc = qtk_scheme_fold_embedded(m);
	if (rc <= 0)
		return rc;
	char *dir = qtk_path_dir(m->path);
	if (!dir)
		return oom(m);
	rc = qtk_scheme_fold_dir(m, dir, NULL);
	qtk_free(dir);
	return rc;
}

/* ---- writing ----------------------------------------------------------- */

char *qtk_st_part_name(const qtk_tensor *t, int p)
{
	if (t->layout.kind == QTK_LAYOUT_PLAIN || !t->parts[p].role[0])
		return qtk_strdup(t->name);
	size_t n = strlen(t->name);
	if (n > 7 && strcmp(t->name + n - 7, ".weight") == 0)
		n -= 7;
	const char *suf = qtk_scheme_part_suffix(t, p);
	size_t r = strlen(suf), dot = suf[0] != '_'; /* gpt-oss's <prefix>_blocks join without a dot */
	char *s = qtk_malloc(n + r + 2);
	if (!s)
		return NULL;
	memcpy(s, t->name, n);
	s[n] = '.';
	memcpy(s + n + dot, suf, r + 1);
	return s;
}

typedef struct name_ref {
	char *name;
	size_t t;
} name_ref;

static int cmp_name_ref(const void *a, const void *b)
{
	return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

static int check_part(const qtk_tensor *t, int p, const char *path, const char *subj, qtk_err *err)
{
	const qtk_part *pt = &t->parts[p];
	const qtk_type_info *ti = qtk_type(pt->type);
	if (!ti || !ti->st_name)
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "type %s cannot be stored in safetensors",
				   ti ? ti->upper : "unknown");
	if (pt->ndim < 0 || pt->ndim > QTK_MAX_DIMS)
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "rank %d exceeds the limit of 8", pt->ndim);
	uint64_t n = 1, nb;
	for (int d = 0; d < pt->ndim; d++)
		if (pt->shape[d] > (1ull << 53) || !qtk_mul_u64(n, pt->shape[d], &n))
			return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "element count overflows");
	if (qtk_type_nbytes(pt->type, n, &nb) || nb != pt->nbytes)
		return qtk_err_set(err, QTK_E_INTERNAL, path, -1, subj, "part size does not match its shape");
	return 0;
}

int qtk_st_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err)
{
	char subj[256];
	if (!subject) {
		snprintf(subj, sizeof subj, "tensor '%.200s'", t->name);
		subject = subj;
	}
	int rc = 0;
	for (int p = 0; p < t->nparts && !rc; p++) {
		if ((rc = check_part(t, p, path, subject, err)) || !with_name)
			continue;
		char *name = qtk_st_part_name(t, p);
		if (!name)
			rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		else if (!name[0] || strcmp(name, "__metadata__") == 0 || strlen(name) > QTK_CAP_NAME)
			rc = qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "tensor name '%.200s' cannot be used in safetensors",
					 name);
		qtk_free(name);
	}
	return rc;
}

int qtk_st_check_desc(const qtk_model *d, const char *path, qtk_err *err)
{
	size_t total = 0;
	for (size_t i = 0; i < d->ntensors; i++)
		total += (size_t)d->tensors[i].nparts;
	name_ref *r = qtk_calloc(total ? total : 1, sizeof *r);
	if (!r)
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	size_t k = 0;
	int rc = 0;
	for (size_t i = 0; i < d->ntensors && !rc; i++) {
		if ((rc = qtk_st_can_store(&d->tensors[i], true, path, NULL, err)))
			break;
		for (int p = 0; p < d->tensors[i].nparts && !rc; p++) {
			r[k].t = i;
			if (!(r[k++].name = qtk_st_part_name(&d->tensors[i], p)))
				rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		}
	}
	if (!rc) {
		qsort(r, k, sizeof *r, cmp_name_ref);
		for (size_t i = 1; i < k && !rc; i++)
			if (strcmp(r[i - 1].name, r[i].name) == 0)
				rc = qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "duplicate tensor name '%.200s'",
						 r[i].name);
	}
	for (size_t i = 0; i < k; i++)
		qtk_free(r[i].name);
	qtk_free(r);
	return rc;
}

/* The JSON string escape of s[0..n) without its quotes, a piece of about 1 MiB at a time (each
 * cut before a byte that starts a character, so the pieces escape as the whole does) handed to
 * fn; style as qtk_json_put_str_as. QTK_E_DATA when s is not valid UTF-8 or holds a NUL (style
 * 0), QTK_E_IO out of memory, else fn's status. */
static int escape_pieces(const char *s, size_t n, unsigned style, int (*fn)(void *ctx, const uint8_t *p, size_t k),
			 void *ctx)
{
	qtk_buf e = {0};
	int rc = 0;
	for (size_t i = 0; i < n && !rc;) {
		size_t k = n - i < ((size_t)1 << 20) ? n - i : (size_t)1 << 20;
		while (i + k < n && k > 1 && ((unsigned char)s[i + k] & 0xc0) == 0x80)
			k--;
		e.len = 0;
		rc = qtk_json_put_str_as(&e, s + i, k, style);
		if (!rc && (e.failed || e.len < 2))
			rc = QTK_E_IO;
		rc = rc ? rc : fn(ctx, e.p + 1, e.len - 2);
		i += k;
	}
	qtk_buf_free(&e);
	return rc;
}

static int count_piece(void *ctx, const uint8_t *p, size_t k)
{
	(void)p;
	*(uint64_t *)ctx += k;
	return 0;
}

/* A generated record's pieces escaped (as raw bytes: the record writer's text is valid UTF-8,
 * and a piece may end inside a character) and handed on. */
typedef struct esc_put {
	int (*fn)(void *ctx, const uint8_t *p, size_t k);
	void *ctx;
} esc_put;

static int esc_piece(void *c, const uint8_t *p, size_t n)
{
	const esc_put *e = c;
	return escape_pieces((const char *)p, n, QTK_JSON_RAW, e->fn, e->ctx);
}

/* The record's escaped text through fn: the description's string, or generated (gen_w). */
static int record_escaped(qtk_writer *gen_w, const qtk_kv *kv, int (*fn)(void *ctx, const uint8_t *p, size_t k),
			  void *ctx)
{
	if (!gen_w)
		return escape_pieces(kv->val.v.str.s, (size_t)kv->val.v.str.len, 0, fn, ctx);
	esc_put e = {fn, ctx};
	return qtk_writer_gen_record(gen_w, esc_piece, &e);
}

/* Header JSON for desc tensors [t0, t1), padded with spaces to a multiple of 8. The record's
 * value (qtk.provenance) is not in b: an empty string stands in its place, rec[0] is where its
 * escaped text goes (after the opening quote), rec[1] that text's length (counted: the header's
 * length and padding include it), rec[2] the record's; the caller writes it there. */
static int build_header(const qtk_model *d, size_t t0, size_t t1, const char *qjson, qtk_writer *gen_w, qtk_buf *b,
			uint64_t *data_bytes, uint64_t rec[3], const char *path, qtk_err *err)
{
	qtk_buf_putc(b, '{');
	bool any = false;
	qtk_buf types = {0};
	size_t ntypes = 0;
	for (size_t i = 0; i <= d->nkv; i++) {
		qtk_kv q = {.key = (char *)QTK_ST_QCFG_KEY, .val = {.type = QTK_V_STR}};
		const qtk_kv *kv = &q;
		if (i < d->nkv)
			kv = &d->kv[i];
		else if (qjson)
			q.val.v.str = (qtk_str){strlen(qjson), (char *)qjson};
		else
			break;
		if (i < d->nkv && (strcmp(kv->key, QTK_ST_QCFG_KEY) == 0 || strcmp(kv->key, QTK_META_TYPES_KEY) == 0))
			continue; /* made afresh: the quantization config from the tensors, the types below */
		qtk_buf_puts(b, any ? "," : "\"__metadata__\":{");
		any = true;
		int rc = qtk_json_put_str(b, kv->key, strlen(kv->key));
		qtk_buf_putc(b, ':');
		if (!rc && kv->val.type == QTK_V_STR && i < d->nkv && !strcmp(kv->key, "qtk.provenance")) {
			uint64_t elen = 0;
			rc = record_escaped(gen_w, kv, count_piece, &elen);
			if (rc == QTK_E_IO && !err->code) {
				qtk_buf_free(&types);
				return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
			}
			if (rc && err->code) { /* the generator's own failure */
				qtk_buf_free(&types);
				return rc;
			}
			rec[0] = b->len + 1; /* after the opening quote */
			rec[1] = elen;
			rec[2] = gen_w ? gen_w->opts.record_len : (uint64_t)kv->val.v.str.len;
			qtk_buf_puts(b, "\"\"");
		} else if (!rc && kv->val.type == QTK_V_STR) {
			rc = qtk_json_put_str(b, kv->val.v.str.s, (size_t)kv->val.v.str.len);
		} else if (!rc) {
			/* typed metadata (GGUF keys) as exact text, its type listed in QTK_META_TYPES_KEY */
			char *text = qtk_value_to_text(&kv->val), tag[24];
			if (!text) {
				qtk_buf_free(&types);
				return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
			}
			rc = qtk_json_put_str(b, text, strlen(text));
			qtk_free(text);
			qtk_value_type_tag(&kv->val, tag, sizeof tag);
			qtk_buf_puts(&types, ntypes++ ? "," : "{");
			if (!rc)
				rc = qtk_json_put_str(&types, kv->key, strlen(kv->key));
			qtk_buf_printf(&types, ":\"%s\"", tag);
		}
		if (rc == QTK_E_DATA) {
			qtk_buf_free(&types);
			return qtk_err_set(err, QTK_E_DATA, path, -1, NULL,
					   "metadata key '%.200s' is not valid utf-8 or holds a NUL", kv->key);
		}
	}
	if (ntypes) {
		qtk_buf_putc(&types, '}');
		qtk_buf_putc(b, ',');
		int rc = qtk_json_put_str(b, QTK_META_TYPES_KEY, strlen(QTK_META_TYPES_KEY));
		qtk_buf_putc(b, ':');
		if (!rc)
			rc = qtk_json_put_str(b, types.failed ? "" : (const char *)types.p, types.len);
		qtk_buf_free(&types);
		if (rc)
			return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "metadata types cannot be written");
	}
	if (any)
		qtk_buf_putc(b, '}');
	uint64_t off = 0;
	for (size_t i = t0; i < t1; i++) {
		const qtk_tensor *t = &d->tensors[i];
		for (int p = 0; p < t->nparts; p++) {
			const qtk_part *pt = &t->parts[p];
			char *name = qtk_st_part_name(t, p);
			if (!name)
				return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
			if (any)
				qtk_buf_putc(b, ',');
			any = true;
			int rc = qtk_json_put_str(b, name, strlen(name));
			qtk_free(name);
			if (rc == QTK_E_DATA)
				return qtk_err_set(err, QTK_E_DATA, path, -1, NULL,
						   "tensor name '%.200s' is not valid utf-8", t->name);
			qtk_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", qtk_type(pt->type)->st_name);
			for (int k = 0; k < pt->ndim; k++)
				qtk_buf_printf(b, "%s%llu", k ? "," : "", (unsigned long long)pt->shape[k]);
			uint64_t end;
			if (!qtk_add_u64(off, pt->nbytes, &end))
				return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "output size overflows");
			qtk_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
				       (unsigned long long)end);
			off = end;
		}
	}
	qtk_buf_putc(b, '}');
	while (!b->failed && (b->len + rec[1]) % 8)
		qtk_buf_putc(b, ' ');
	if (b->failed)
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	if (rec[1] > QTK_CAP_ST_HEADER || b->len > QTK_CAP_ST_HEADER - rec[1])
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL,
				   "header of %llu bytes exceeds the safetensors limit", (unsigned long long)(b->len + rec[1]));
	*data_bytes = off;
	return 0;
}

int qtk_st_out_open(qtk_st_out *o, const qtk_model *d, qtk_err *err)
{
	qtk_buf b = {0};
	char *qjson = NULL;
	int rc = o->embed_qcfg ? qtk_scheme_quant_json(d, o->path, err, &qjson) : 0;
	uint64_t rec[3] = {0, 0, 0};
	if (!rc)
		rc = build_header(d, o->t0, o->t1, qjson, o->gen_w, &b, &o->data_bytes, rec, o->path, err);
	if (!rc && rec[1]) {
		o->rec_off = 8 + rec[0];
		o->rec_elen = rec[1];
		o->rec_len = rec[2];
	}
	qtk_free(qjson);
	/* the reader's rules on the header as built: the record's value (the largest part of it,
	 * escaped by the writer's own string writer as it goes into the file) an empty string */
	if (!rc)
		rc = replay_header((const char *)b.p, b.len, o->data_bytes, o->path, err);
	if (!rc)
		rc = qtk_ofile_open(&o->of, o->path, err);
	if (!rc) { /* before the first byte: a header of a MiB or more is flushed at once */
		qtk_ofile_list(&o->of, o->outs);
		o->of.defer_hash = o->defer_hash;
		o->opened = true;
		uint8_t lb[8];
		const size_t at = rec[1] ? (size_t)rec[0] : b.len;
		qtk_wr64(lb, b.len + rec[1]);
		o->head_len = b.len + rec[1];
		rc = qtk_ofile_write(&o->of, lb, 8);
		if (!rc)
			rc = qtk_ofile_write(&o->of, b.p, at);
		if (!rc && rec[1]) { /* the record, escaped into the file a piece at a time */
			const qtk_kv *kv = qtk_kv_find(d, "qtk.provenance"); /* build_header's: d is unchanged */
			const uint64_t before = o->of.written;
			rc = record_escaped(o->gen_w, kv, qtk_ofile_put, &o->of);
			if (rc == QTK_E_IO && !err->code)
				rc = qtk_err_set(err, QTK_E_IO, o->path, -1, NULL, "out of memory");
			else if ((!rc && o->of.written - before != rec[1]) || (rc && !err->code))
				rc = qtk_err_set(err, QTK_E_INTERNAL, o->path, -1, "qtk.provenance",
						 "the record escapes to another length than counted");
		}
		if (!rc)
			rc = qtk_ofile_write(&o->of, b.p + at, b.len - at);
	}
	qtk_buf_free(&b);
	return rc;
}

typedef struct place_ctx {
	qtk_st_out *o;
	uint64_t at, end;
} place_ctx;

static int place_piece(void *ctx, const uint8_t *p, size_t k)
{
	place_ctx *c = ctx;
	if (k > c->end - c->at)
		return QTK_E_INTERNAL;
	int rc = qtk_ofile_write_at(&c->o->of, c->at, p, k);
	c->at += k;
	return rc;
}

static int escaped_other(const qtk_st_out *o, qtk_err *err)
{
	return qtk_err_set(err, QTK_E_INTERNAL, o->path, -1, "qtk.provenance",
			   "the record escapes to another length than the reserved one");
}

int qtk_st_out_record_piece(qtk_st_out *o, uint64_t at, const char *p, size_t n, qtk_err *err)
{
	if (!o->rec_off || at > o->rec_len || n > o->rec_len - at)
		return qtk_err_set(err, QTK_E_INTERNAL, o->path, -1, "qtk.provenance",
				   "the record to place is longer than the reserved one");
	if (!at)
		o->rec_at = o->rec_off;
	/* escaped a piece at a time over the reserved one's bytes */
	place_ctx pc = {o, o->rec_at, o->rec_off + o->rec_elen};
	int rc = escape_pieces(p, n, QTK_JSON_RAW, place_piece, &pc);
	o->rec_at = pc.at;
	if (rc == QTK_E_IO && !err->code)
		qtk_err_set(err, QTK_E_IO, o->path, -1, NULL, "out of memory");
	return rc == QTK_E_INTERNAL ? escaped_other(o, err) : rc;
}

int qtk_st_out_record_end(qtk_st_out *o, qtk_err *err)
{
	return o->rec_at == o->rec_off + o->rec_elen ? 0 : escaped_other(o, err);
}

/* The single-file writer: one qtk_st_out for all tensors. */
static int stw_begin(qtk_writer *w)
{
	int rc = qtk_st_check_desc(w->desc, w->path, w->err);
	if (rc)
		return rc;
	qtk_st_out *o = qtk_calloc(1, sizeof *o);
	if (!o)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
	o->of.fd = -1;
	o->path = w->path;
	o->t1 = w->desc->ntensors;
	o->embed_qcfg = true;
	w->priv = o;
	o->outs = w->opts.outs;
	o->defer_hash = w->opts.patch_pending;
	o->gen_w = w->opts.record_gen ? w : NULL;
	rc = qtk_st_out_open(o, w->desc, w->err);
	w->record_len = !rc && o->rec_off ? (size_t)o->rec_len : 0;
	return rc;
}

static int stw_record_piece(qtk_writer *w, uint64_t at, const void *p, size_t n)
{
	return qtk_st_out_record_piece(w->priv, at, p, n, w->err);
}

static int stw_record_end(qtk_writer *w) { return qtk_st_out_record_end(w->priv, w->err); }

static int stw_patch(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	qtk_st_out *o = w->priv;
	return qtk_ofile_patch(&o->of, 8, o->head_len, fn, ctx);
}

static int stw_put(qtk_writer *w, const void *buf, size_t n)
{
	qtk_st_out *o = w->priv;
	return qtk_ofile_write(&o->of, buf, n);
}

static int stw_put_file(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back)
{
	qtk_st_out *o = w->priv;
	return qtk_ofile_copy_from(&o->of, fd, path, off, n, back);
}

static int stw_finish(qtk_writer *w)
{
	qtk_st_out *o = w->priv;
	int rc = qtk_ofile_commit(&o->of);
	if (!rc) {
		o->opened = false;
		qtk_free(o);
		w->priv = NULL;
	}
	return rc;
}

static void stw_abort(qtk_writer *w)
{
	qtk_st_out *o = w->priv;
	if (!o)
		return;
	if (o->opened)
		qtk_ofile_abort(&o->of);
	qtk_free(o);
	w->priv = NULL;
}

static const qtk_writer_ops st_writer = {
	.begin = stw_begin,
	.put = stw_put,
	.put_file = stw_put_file,
	.finish = stw_finish,
	.abort = stw_abort,
	.patch_header = stw_patch,
	.record_piece = stw_record_piece,
	.record_end = stw_record_end,
	.record_gen = true,
};

static const char *const st_ext[] = {".safetensors", NULL};

const qtk_format qtk_format_safetensors = {
	.name = "safetensors",
	.probe = st_probe,
	.probe_path = st_probe_path,
	.open = st_open,
	.out = QTK_OUT_SAFETENSORS,
	.writer = &st_writer,
	.out_ext = st_ext,
	.can_store = qtk_st_can_store,	.meta_strings = true,
};
