/* model.c - the tensor model, metadata values and detection through the container table. */
#include "internal.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

qtk_model *qtk_model_new(void)
{
	qtk_model *m = qtk_calloc(1, sizeof *m);
	if (m)
		qtk_err_clear(&m->err);
	return m;
}

/* The capacity for `need` elements (doubling from cap, at least 16, at most limit); 0 over limit. */
static size_t grown_cap(size_t cap, size_t need, size_t limit)
{
	if (need > limit)
		return 0;
	size_t nc = cap ? cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	return nc > limit ? limit : nc;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem, size_t limit)
{
	if (need <= *cap)
		return p;
	const size_t nc = grown_cap(*cap, need, limit);
	if (!nc)
		return NULL;
	void *q = qtk_realloc(p, nc * elem);
	if (!q)
		return NULL;
	*cap = nc; /* the reserve stays untouched (each adder clears its element): pages of a large
	            * reserve are never faulted in on a header-only run */
	return q;
}

/* ---- name indexes ------------------------------------------------------------------------------ */

static void index_drop(qtk_strmap **map, size_t *indexed)
{
	if (*map) {
		qtk_strmap_free(*map); /* never looks at the keys: they may be freed already */
		qtk_free(*map);
		*map = NULL;
	}
	*indexed = 0;
}

/* Index name `name` at position i; names[0..i) must be indexed already, else all of them are
 * indexed afresh (get(k) gives the k-th name). Out of memory leaves no index: lookups scan. */
static void index_put(qtk_strmap **map, size_t *indexed, size_t i, const char *(*get)(const qtk_model *, size_t),
		      const qtk_model *m)
{
	if (!*map || *indexed != i) {
		index_drop(map, indexed);
		if (!(*map = qtk_calloc(1, sizeof **map)))
			return;
		for (size_t k = 0; k < i; k++) {
			const char *n = get(m, k);
			if (n && qtk_strmap_put(*map, n, k, NULL) < 0) {
				index_drop(map, indexed);
				return;
			}
		}
	}
	const char *n = get(m, i);
	if (n && qtk_strmap_put(*map, n, i, NULL) < 0) {
		index_drop(map, indexed);
		return;
	}
	*indexed = i + 1;
}

static const char *tensor_name_at(const qtk_model *m, size_t i) { return m->tensors[i].name; }
static const char *kv_key_at(const qtk_model *m, size_t i) { return m->kv[i].key; }

void qtk_model_reindex(qtk_model *m)
{
	index_drop(&m->t_index, &m->t_indexed);
	index_drop(&m->kv_index, &m->kv_indexed);
	if (m->ntensors)
		index_put(&m->t_index, &m->t_indexed, m->ntensors - 1, tensor_name_at, m);
	if (m->nkv)
		index_put(&m->kv_index, &m->kv_indexed, m->nkv - 1, kv_key_at, m);
}

static void index_free(qtk_model *m)
{
	index_drop(&m->t_index, &m->t_indexed);
	index_drop(&m->kv_index, &m->kv_indexed);
}

int qtk_model_reserve_tensors(qtk_model *m, size_t more)
{
	if (more > QTK_CAP_TENSORS - m->ntensors || m->ntensors + more <= m->cap_tensors)
		return 0; /* past the cap, add_tensor refuses the tensor itself */
	/* at least doubled: the shards of a split set each reserve their own count */
	size_t nc = m->ntensors + more;
	if (nc < 2 * m->cap_tensors)
		nc = 2 * m->cap_tensors < QTK_CAP_TENSORS ? 2 * m->cap_tensors : QTK_CAP_TENSORS;
	qtk_tensor *nt = qtk_table_realloc(m->tensors, m->ntensors * sizeof *nt, nc * sizeof *nt);
	if (!nt)
		return QTK_E_IO;
	m->tensors = nt;
	m->cap_tensors = nc;
	if (more > m->parts_hint) /* a part each at least, in one chunk */
		m->parts_hint = more;
	/* the name index too, when it is complete (or not begun): index_put keeps a map whose
	 * names are all in; a failure here only leaves it to grow as it goes */
	if (!m->t_index && !m->ntensors)
		m->t_index = qtk_calloc(1, sizeof *m->t_index);
	if (m->t_index && m->t_indexed == m->ntensors)
		(void)qtk_strmap_reserve(m->t_index, nc);
	return 0;
}

/* The tensors' parts: chunks that never move (a tensor's parts pointer stays valid while the
 * table of tensors grows or is replaced), each through the table allocator, doubling from 64
 * parts up to PARTS_CHUNK_MAX (or the room a reader reserved, qtk_model_reserve_tensors). */
struct qtk_part_chunk {
	struct qtk_part_chunk *next;
	size_t cap, used;
	qtk_part p[];
};
#define PARTS_CHUNK_MIN 64
#define PARTS_CHUNK_MAX ((size_t)16 << 10)

/* n parts (1..QTK_MAX_PARTS), zeroed; NULL out of memory. */
static qtk_part *parts_alloc(qtk_model *m, int n)
{
	struct qtk_part_chunk *c = m->part_chunks;
	if (!c || c->cap - c->used < (size_t)n) {
		size_t cap = c ? (c->cap < PARTS_CHUNK_MAX / 2 ? 2 * c->cap : PARTS_CHUNK_MAX) : PARTS_CHUNK_MIN;
		if (m->parts_hint > cap)
			cap = m->parts_hint;
		m->parts_hint = 0;
		struct qtk_part_chunk *nc = qtk_table_realloc(NULL, 0, sizeof *nc + cap * sizeof(qtk_part));
		if (!nc)
			return NULL;
		nc->next = c;
		nc->cap = cap;
		nc->used = 0;
		m->part_chunks = c = nc;
	}
	qtk_part *p = c->p + c->used;
	c->used += (size_t)n;
	memset(p, 0, (size_t)n * sizeof *p);
	return p;
}

static void parts_free(qtk_model *m)
{
	for (struct qtk_part_chunk *c = m->part_chunks, *nx; c; c = nx) {
		nx = c->next;
		qtk_table_free(c);
	}
	m->part_chunks = NULL;
	m->parts_hint = 0;
}

int qtk_model_tensor_room(qtk_model *m, qtk_tensor *t, int n)
{
	if (n < 0 || n > QTK_MAX_PARTS)
		return QTK_E_INTERNAL;
	qtk_part *p = n ? parts_alloc(m, n) : NULL;
	if (n && !p)
		return QTK_E_IO;
	t->parts = p;
	t->room = n;
	return 0;
}

void qtk_tensor_clear(qtk_tensor *t)
{
	qtk_part *p = t->parts;
	int room = t->room;
	memset(t, 0, sizeof *t);
	if (p && room > 0)
		memset(p, 0, (size_t)room * sizeof *p);
	t->parts = p;
	t->room = room;
}

int qtk_tensor_copy(qtk_tensor *dst, const qtk_tensor *src)
{
	if (dst == src)
		return 0;
	if (src->nparts < 0 || src->nparts > dst->room)
		return QTK_E_INTERNAL;
	qtk_part *p = dst->parts;
	int room = dst->room;
	if (src->nparts)
		memmove(p, src->parts, (size_t)src->nparts * sizeof *p);
	*dst = *src;
	dst->parts = p;
	dst->room = room;
	return 0;
}

qtk_tensor *qtk_model_add_tensor(qtk_model *m, const char *name)
{
	return qtk_model_add_tensor_room(m, name, QTK_MAX_PARTS);
}

qtk_tensor *qtk_model_add_tensor_room(qtk_model *m, const char *name, int room)
{
	if (m->ntensors + 1 > m->cap_tensors) { /* as grow, through the table allocator */
		const size_t nc = grown_cap(m->cap_tensors, m->ntensors + 1, QTK_CAP_TENSORS);
		if (!nc)
			return NULL;
		qtk_tensor *nt = qtk_table_realloc(m->tensors, m->ntensors * sizeof *nt, nc * sizeof *nt);
		if (!nt)
			return NULL;
		m->tensors = nt;
		m->cap_tensors = nc;
	}
	qtk_tensor *t = &m->tensors[m->ntensors];
	memset(t, 0, sizeof *t);
	if (qtk_model_tensor_room(m, t, room))
		return NULL;
	t->name = qtk_strdup(name);
	if (!t->name)
		return NULL;
	index_put(&m->t_index, &m->t_indexed, m->ntensors, tensor_name_at, m);
	m->ntensors++;
	return t;
}

qtk_kv *qtk_model_add_kv(qtk_model *m, const char *key)
{
	qtk_kv *kv = grow(m->kv, &m->cap_kv, m->nkv + 1, sizeof *kv, QTK_CAP_KV);
	if (!kv)
		return NULL;
	m->kv = kv;
	kv = &m->kv[m->nkv];
	memset(kv, 0, sizeof *kv);
	kv->key = qtk_strdup(key);
	if (!kv->key)
		return NULL;
	index_put(&m->kv_index, &m->kv_indexed, m->nkv, kv_key_at, m);
	m->nkv++;
	return kv;
}

int qtk_model_take_kv_str(qtk_model *m, const char *key, char *s)
{
	qtk_kv *kv = (qtk_kv *)qtk_kv_find(m, key);
	if (kv)
		qtk_value_free(&kv->val);
	else
		kv = qtk_model_add_kv(m, key);
	if (!kv)
		return QTK_E_IO;
	kv->val.type = QTK_V_STR;
	kv->val.v.str.len = strlen(s);
	kv->val.v.str.s = s;
	return 0;
}

int qtk_model_set_kv_str(qtk_model *m, const char *key, const char *s)
{
	char *c = qtk_strdup(s);
	if (!c || qtk_model_take_kv_str(m, key, c)) {
		qtk_free(c);
		return QTK_E_IO;
	}
	return 0;
}

int qtk_kv_remove(qtk_model *m, const char *key)
{
	const qtk_kv *f = qtk_kv_find(m, key);
	for (size_t i = f ? (size_t)(f - m->kv) : m->nkv; i < m->nkv; i++)
		if (strcmp(m->kv[i].key, key) == 0) {
			qtk_free(m->kv[i].key);
			qtk_value_free(&m->kv[i].val);
			memmove(&m->kv[i], &m->kv[i + 1], (m->nkv - i - 1) * sizeof *m->kv);
			m->nkv--;
			index_drop(&m->kv_index, &m->kv_indexed);
			if (m->nkv)
				index_put(&m->kv_index, &m->kv_indexed, m->nkv - 1, kv_key_at, m);
			return 1;
		}
	return 0;
}

int qtk_model_take_blob(qtk_model *m, const char *name, uint8_t *data, size_t len)
{
	qtk_blob *b = grow(m->blobs, &m->cap_blobs, m->nblobs + 1, sizeof *b, 4096);
	if (!b)
		return QTK_E_IO;
	m->blobs = b;
	b = &m->blobs[m->nblobs];
	if (!(b->name = qtk_strdup(name)))
		return QTK_E_IO;
	b->data = data;
	b->len = len;
	m->nblobs++;
	return 0;
}

int qtk_model_add_blob(qtk_model *m, const char *name, const void *data, size_t len)
{
	uint8_t *c = qtk_malloc(len + 1);
	if (!c)
		return QTK_E_IO;
	memcpy(c, data, len);
	c[len] = 0;
	if (qtk_model_take_blob(m, name, c, len)) {
		qtk_free(c);
		return QTK_E_IO;
	}
	return 0;
}

int qtk_model_add_file(qtk_model *m, const char *path)
{
	if (m->nfiles >= QTK_CAP_FILES)
		return qtk_err_set(&m->err, QTK_E_DATA, path, -1, NULL, "too many files (limit %u)", QTK_CAP_FILES);
	uint32_t n = m->nfiles + 1;
	char **f = qtk_realloc(m->files, n * sizeof *f);
	if (f)
		m->files = f;
	uint64_t *s = qtk_realloc(m->file_sizes, n * sizeof *s);
	if (s)
		m->file_sizes = s;
	int *d = qtk_realloc(m->fds, n * sizeof *d);
	if (d)
		m->fds = d;
	if (!f || !s || !d)
		return qtk_err_set(&m->err, QTK_E_IO, path, -1, NULL, "out of memory");
	m->files[m->nfiles] = qtk_strdup(path);
	if (!m->files[m->nfiles])
		return qtk_err_set(&m->err, QTK_E_IO, path, -1, NULL, "out of memory");
	m->fds[m->nfiles] = -1;
	int fd = qtk_file_open(path, &m->file_sizes[m->nfiles], &m->err);
	if (fd < 0) {
		qtk_free(m->files[m->nfiles]);
		return fd;
	}
	m->fds[m->nfiles] = fd;
	return (int)m->nfiles++;
}

size_t qtk_value_size(unsigned t)
{
	static const uint8_t sz[QTK_V_MAX] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
	return t < QTK_V_MAX ? sz[t] : 0;
}

const char *qtk_value_type_name(unsigned t)
{
	static const char *const n[QTK_V_MAX] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
						  "bool", "string", "array", "u64", "i64", "f64"};
	return t < QTK_V_MAX ? n[t] : "unknown";
}

void qtk_value_from_le(qtk_value *v, unsigned type, const uint8_t *b)
{
	v->type = (uint8_t)type;
	switch (type) {
	case QTK_V_U8: case QTK_V_BOOL: v->v.u = b[0]; break;
	case QTK_V_I8: v->v.i = (int8_t)b[0]; break;
	case QTK_V_U16: v->v.u = qtk_rd16(b); break;
	case QTK_V_I16: v->v.i = (int16_t)qtk_rd16(b); break;
	case QTK_V_U32: v->v.u = qtk_rd32(b); break;
	case QTK_V_I32: v->v.i = (int32_t)qtk_rd32(b); break;
	case QTK_V_U64: v->v.u = qtk_rd64(b); break;
	case QTK_V_I64: v->v.i = (int64_t)qtk_rd64(b); break;
	case QTK_V_F32: {
		uint32_t u = qtk_rd32(b);
		float f;
		memcpy(&f, &u, 4);
		v->v.f = f;
		break;
	}
	case QTK_V_F64: {
		uint64_t u = qtk_rd64(b);
		memcpy(&v->v.f, &u, 8);
		break;
	}
	default: break;
	}
}

void qtk_value_free(qtk_value *v)
{
	if (v->type == QTK_V_STR)
		qtk_free(v->v.str.s);
	if (v->type == QTK_V_ARR && v->arr) {
		if (v->elem == QTK_V_STR) {
			qtk_str *s = v->arr;
			for (uint64_t i = 0; i < v->n; i++)
				qtk_free(s[i].s);
		}
		qtk_free(v->arr);
	}
	memset(v, 0, sizeof *v);
}

int qtk_value_copy(qtk_value *d, const qtk_value *s)
{
	*d = *s;
	d->arr = NULL;
	if (s->type == QTK_V_STR) {
		d->v.str.s = qtk_strndup(s->v.str.s, (size_t)s->v.str.len);
		return d->v.str.s ? 0 : QTK_E_IO;
	}
	if (s->type != QTK_V_ARR)
		return 0;
	if (s->elem == QTK_V_STR) {
		qtk_str *src = s->arr, *dst = qtk_calloc((size_t)s->n, sizeof *dst);
		if (!dst)
			return QTK_E_IO;
		d->arr = dst;
		for (uint64_t i = 0; i < s->n; i++) {
			dst[i].len = src[i].len;
			dst[i].s = qtk_strndup(src[i].s, (size_t)src[i].len);
			if (!dst[i].s) {
				d->n = i;
				qtk_value_free(d);
				return QTK_E_IO;
			}
		}
		return 0;
	}
	size_t bytes = (size_t)s->n * qtk_value_size(s->elem);
	d->arr = qtk_malloc(bytes);
	if (!d->arr)
		return QTK_E_IO;
	memcpy(d->arr, s->arr, bytes);
	return 0;
}

void qtk_tensor_finish(qtk_tensor *t)
{
	uint64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		if (!qtk_mul_u64(n, t->shape[i], &n))
			n = UINT64_MAX;
	t->n_params = n;
	uint64_t b = 0;
	for (int p = 0; p < t->nparts; p++)
		if (!qtk_add_u64(b, t->parts[p].nbytes, &b))
			b = UINT64_MAX;
	t->n_bytes = b;
}

void qtk_fmt_reset_model(qtk_model *m)
{
	index_free(m);
	for (size_t i = 0; i < m->ntensors; i++)
		qtk_free(m->tensors[i].name);
	m->ntensors = 0;
	parts_free(m);
	for (size_t i = 0; i < m->nkv; i++) {
		qtk_free(m->kv[i].key);
		qtk_value_free(&m->kv[i].val);
	}
	m->nkv = 0;
	for (uint32_t i = 0; i < m->nfiles; i++) {
		if (m->fds[i] >= 0)
			qtk_file_close(m->fds[i]);
		qtk_free(m->files[i]);
	}
	m->nfiles = 0;
}

static void model_free(qtk_model *m)
{
	index_free(m);
	for (size_t i = 0; i < m->ntensors; i++)
		qtk_free(m->tensors[i].name);
	qtk_table_free(m->tensors);
	parts_free(m);
	for (size_t i = 0; i < m->nkv; i++) {
		qtk_free(m->kv[i].key);
		qtk_value_free(&m->kv[i].val);
	}
	qtk_free(m->kv);
	for (size_t i = 0; i < m->nblobs; i++) {
		qtk_free(m->blobs[i].name);
		qtk_free(m->blobs[i].data);
	}
	qtk_free(m->blobs);
	for (uint32_t i = 0; i < m->nfiles; i++) {
		if (m->fds[i] >= 0)
			qtk_file_close(m->fds[i]);
		qtk_free(m->files[i]);
	}
	qtk_free(m->files);
	qtk_free(m->fds);
	qtk_free(m->file_sizes);
	qtk_free(m->path);
	qtk_free(m);
}

void qtk_close(qtk_model *m)
{
	if (!m)
		return;
	if (m->fmt && m->fmt->close)
		m->fmt->close(m);
	model_free(m);
}

/* Pick the plugin: path probes first (directories, index files), then
 * content probes on the first bytes. */
static const qtk_format *detect(const char *path, qtk_err *err)
{
	const qtk_format *best = NULL;
	int score = 0;
	size_t nformats;
	const qtk_format *const *formats = qtk_formats(&nformats);
	for (size_t i = 0; i < nformats; i++)
		if (formats[i]->probe_path) {
			int s = formats[i]->probe_path(path);
			if (s > score) {
				score = s;
				best = formats[i];
			}
		}
	if (best)
		return best;
	if (qtk_is_dir(path)) {
		qtk_err_set(err, QTK_E_DATA, path, -1, NULL,
			    "unknown format: directory has no config.json with safetensors weights");
		return NULL;
	}
	uint64_t size;
	int fd = qtk_file_open(path, &size, err);
	if (fd < 0)
		return NULL;
	uint8_t head[4096];
	size_t n = size < sizeof head ? (size_t)size : sizeof head;
	int rc = qtk_pread_full(fd, path, head, n, 0, err);
	qtk_file_close(fd);
	if (rc)
		return NULL;
	for (size_t i = 0; i < nformats; i++)
		if (formats[i]->probe) {
			int s = formats[i]->probe(head, n, size);
			if (s > score) {
				score = s;
				best = formats[i];
			}
		}
	if (!best)
		qtk_err_set(err, QTK_E_DATA, path, 0, NULL, "unknown format: not GGUF, safetensors or a Hugging Face directory");
	return best;
}

qtk_model *qtk_open(const char *path, qtk_err *err)
{
	qtk_err_clear(err);
	const qtk_format *f = detect(path, err);
	if (!f)
		return NULL;
	qtk_model *m = qtk_model_new();
	if (!m || !(m->path = qtk_strdup(path))) {
		qtk_free(m);
		qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		return NULL;
	}
	m->fmt = f;
	int rc = f->open(m);
	/* the typing convention of string-only containers; m->fmt: an archive's inner format */
	if (!rc && m->fmt->meta_strings)
		rc = qtk_meta_restore(m, &m->err);
	if (rc) {
		if (!m->err.code)
			qtk_err_set(&m->err, rc, path, -1, NULL, "cannot open");
		*err = m->err;
		qtk_close(m);
		return NULL;
	}
	return m;
}

const char *qtk_model_format(const qtk_model *m) { return m->fmt ? m->fmt->name : "unknown"; }

const char *qtk_tensor_stored_name(const qtk_tensor *t)
{
	const qtk_view *v = t->view;
	if (v && (v->kind == QTK_VIEW_JOIN || (v->kind == QTK_VIEW_SLICE && v->n == 1)) && v->pieces && v->pieces[0])
		return qtk_tensor_stored_name(v->pieces[0]); /* JOIN: the weight's */
	return t->name;
}

/* Part p of a view tensor, bytes [off, off + n) (in range). */
static int view_read(const qtk_tensor *t, int p, uint64_t off, uint8_t *dst, size_t n, qtk_err *err)
{
	const qtk_view *v = t->view;
	const qtk_part *pt = &t->parts[p];
	if (v->kind == QTK_VIEW_MEM) {
		if (!v->mem)
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "no bytes for a generated tensor");
		memcpy(dst, v->mem + pt->offset + off, n);
		return 0;
	}
	if (!v->m || !v->pieces || !v->n || (v->kind == QTK_VIEW_SLICE && v->index >= v->n))
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "malformed tensor view");
	if (v->kind == QTK_VIEW_JOIN) {
		const qtk_tensor *src = (uint32_t)p < v->n ? v->pieces[p] : NULL;
		if (!src || src->nparts < 1 || src->parts[0].nbytes != pt->nbytes)
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "join does not match its tensors");
		return qtk_read_part_to(v->m, src, 0, off, dst, n, err);
	}
	if (v->kind == QTK_VIEW_SLICE) {
		const qtk_tensor *src = v->pieces[0];
		if (p >= src->nparts || src->parts[p].nbytes % v->n || src->parts[p].nbytes / v->n != pt->nbytes)
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "slice does not match its tensor");
		return qtk_read_part_to(v->m, src, p, (uint64_t)v->index * pt->nbytes + off, dst, n, err);
	}
	if (pt->nbytes % v->n)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "stack does not match its pieces");
	uint64_t each = pt->nbytes / v->n;
	while (n) {
		uint64_t e = off / each, at = off % each, k = each - at < n ? each - at : n;
		const qtk_tensor *src = v->pieces[e];
		if (p >= src->nparts || src->parts[p].nbytes != each)
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "stack does not match its pieces");
		int rc = qtk_read_part_to(v->m, src, p, at, dst, (size_t)k, err);
		if (rc)
			return rc;
		dst += k;
		off += k;
		n -= (size_t)k;
	}
	return 0;
}

int qtk_read_part_to(qtk_model *m, const qtk_tensor *t, int p, uint64_t off, void *dst, size_t n, qtk_err *err)
{
	if (p < 0 || p >= t->nparts)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "no part %d", p);
	const qtk_part *pt = &t->parts[p];
	uint64_t end;
	if (!qtk_add_u64(off, n, &end) || end > pt->nbytes)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "read outside the tensor");
	if (t->view)
		return view_read(t, p, off, dst, n, err);
	if (m->fmt && m->fmt->read) { /* the format's reader reports into the model */
		int rc = m->fmt->read(m, t, p, off, dst, n);
		if (rc && err != &m->err)
			*err = m->err;
		return rc;
	}
	if (pt->file >= m->nfiles)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "bad file index");
	return qtk_pread_full(m->fds[pt->file], m->files[pt->file], dst, n, pt->offset + off, err);
}

bool qtk_part_in_file(const qtk_model *m, const qtk_tensor *t, int p, int *fd, const char **path, uint64_t *off)
{
	/* a whole stored tensor seen under another name (a one-slice view): its part p is the
	 * stored tensor's part p */
	while (t->view && t->view->kind == QTK_VIEW_SLICE && t->view->n == 1 && t->view->index == 0 && t->view->m &&
	       t->view->pieces && t->view->pieces[0] && t->view->pieces[0]->nparts == t->nparts &&
	       p >= 0 && p < t->nparts && t->view->pieces[0]->parts[p].nbytes == t->parts[p].nbytes) {
		m = t->view->m;
		t = t->view->pieces[0];
	}
	if (p < 0 || p >= t->nparts || t->view || (m->fmt && m->fmt->read) || t->parts[p].file >= m->nfiles)
		return false;
	*fd = m->fds[t->parts[p].file];
	*path = m->files[t->parts[p].file];
	*off = t->parts[p].offset;
	return *fd >= 0;
}

int qtk_read_part(qtk_model *m, const qtk_tensor *t, int p, uint64_t off, void *dst, size_t n)
{
	return qtk_read_part_to(m, t, p, off, dst, n, &m->err);
}

int qtk_read_part_alloc(qtk_model *m, const qtk_tensor *t, int p, uint8_t **out)
{
	if (p < 0 || p >= t->nparts)
		return qtk_err_set(&m->err, QTK_E_INTERNAL, NULL, -1, t->name, "no part %d", p);
	uint64_t n = t->parts[p].nbytes;
	if (n > SIZE_MAX - 1)
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, t->name, "tensor too large for memory");
	uint8_t *b = qtk_malloc((size_t)n);
	if (!b)
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	int rc = qtk_read_part(m, t, p, 0, b, (size_t)n);
	if (rc) {
		qtk_free(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* Through the index when it covers every entry, else a scan. */
const qtk_kv *qtk_kv_find(const qtk_model *m, const char *key)
{
	if (m->kv_index && m->kv_indexed == m->nkv) {
		size_t i;
		if (!qtk_strmap_get(m->kv_index, key, &i))
			return NULL;
		if (i < m->nkv && m->kv[i].key && strcmp(m->kv[i].key, key) == 0)
			return &m->kv[i];
	}
	for (size_t i = 0; i < m->nkv; i++) {
		atomic_fetch_add_explicit(&qtk_lookup_steps, 1, memory_order_relaxed);
		if (strcmp(m->kv[i].key, key) == 0)
			return &m->kv[i];
	}
	return NULL;
}

const qtk_blob *qtk_blob_find(const qtk_model *m, const char *name)
{
	for (size_t i = 0; i < m->nblobs; i++)
		if (strcmp(m->blobs[i].name, name) == 0)
			return &m->blobs[i];
	return NULL;
}

const qtk_tensor *qtk_tensor_find(const qtk_model *m, const char *name)
{
	if (m->t_index && m->t_indexed == m->ntensors) {
		size_t i;
		if (!qtk_strmap_get(m->t_index, name, &i))
			return NULL;
		if (i < m->ntensors && m->tensors[i].name && strcmp(m->tensors[i].name, name) == 0)
			return &m->tensors[i];
	}
	for (size_t i = 0; i < m->ntensors; i++) {
		atomic_fetch_add_explicit(&qtk_lookup_steps, 1, memory_order_relaxed);
		if (m->tensors[i].name && strcmp(m->tensors[i].name, name) == 0)
			return &m->tensors[i];
	}
	return NULL;
}
