/* imatrix.c - llama.cpp importance-matrix reader (legacy binary and GGUF); see imatrix.h. */
#include "imatrix.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include "lc.h"

#define CAP_ENTRIES QTK_CAP_TENSORS
#define CAP_DATASET (64u << 20)
#define CAP_NVAL (1ull << 32) /* values in one entry */

typedef struct ient {
	char *name;
	float *v;
	uint64_t nval;
	size_t order; /* position in the file (duplicates: the last wins) */
} ient;

struct qtk_imatrix {
	ient *e;
	size_t n, cap;
	int64_t chunks;
	char *dataset;
	bool legacy;
	uint8_t sha[32];
};

static void ient_free(ient *e)
{
	qtk_free(e->name);
	qtk_free(e->v);
}

void qtk_imatrix_free(qtk_imatrix *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		ient_free(&m->e[i]);
	qtk_free(m->e);
	qtk_free(m->dataset);
	qtk_free(m);
}

/* Takes ownership of name and v. */
static int add_entry(qtk_imatrix *m, char *name, float *v, uint64_t nval, qtk_err *err,
		     const char *path)
{
	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 64;
		ient *ne = qtk_realloc(m->e, nc * sizeof *ne);
		if (!ne) {
			qtk_free(name);
			qtk_free(v);
			return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		}
		m->e = ne;
		m->cap = nc;
	}
	m->e[m->n] = (ient){ name, v, nval, m->n };
	m->n++;
	return 0;
}

static int cmp_ent(const void *a, const void *b)
{
	const ient *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Sort by name; of equal names keep the last in file order. */
static void finish_entries(qtk_imatrix *m)
{
	if (m->n > 1)
		qsort(m->e, m->n, sizeof *m->e, cmp_ent);
	size_t k = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (i + 1 < m->n && strcmp(m->e[i].name, m->e[i + 1].name) == 0) {
			ient_free(&m->e[i]);
			continue;
		}
		m->e[k++] = m->e[i];
	}
	m->n = k;
}

static bool finite_nonneg(float f)
{
	return f >= 0.f && f <= 3.4028235e38f; /* false for NaN, Inf, negatives */
}

static int hash_file(int fd, const char *path, uint64_t size, uint8_t *out, qtk_err *err)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t *buf = qtk_malloc(1u << 16);
	int rc = 0;
	if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cannot start sha-256");
		goto done;
	}
	for (uint64_t off = 0; off < size && !rc;) {
		size_t n = size - off < (1u << 16) ? (size_t)(size - off) : (1u << 16);
		rc = qtk_pread_full(fd, path, buf, n, off, err);
		if (!rc && EVP_DigestUpdate(md, buf, n) != 1)
			rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "sha-256 failed");
		off += n;
	}
	unsigned int dl = 0;
	if (!rc && (EVP_DigestFinal_ex(md, out, &dl) != 1 || dl != 32))
		rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "sha-256 failed");
done:
	EVP_MD_CTX_free(md);
	qtk_free(buf);
	return rc;
}

/* ---------------------------------------------------------------- legacy */

static int rd_i32(qtk_cur *c, int32_t *v, const char *field)
{
	uint32_t u;
	int rc = qtk_cur_u32(c, &u, field);
	*v = (int32_t)u;
	return rc;
}

static int load_legacy(qtk_imatrix *m, qtk_cur *c, const char *path, qtk_err *err)
{
	int32_t n_entries;
	int rc = rd_i32(c, &n_entries, "n_entries");
	if (rc)
		return rc;
	if (n_entries < 1 || (uint32_t)n_entries > CAP_ENTRIES)
		return qtk_err_set(err, QTK_E_DATA, path, 0, NULL,
				   "n_entries %ld out of range [1, %u]", (long)n_entries, CAP_ENTRIES);
	for (int32_t i = 0; i < n_entries; i++) {
		const uint64_t at = c->pos;
		int32_t len, ncall, nval;
		if ((rc = rd_i32(c, &len, "entry name length")))
			return rc;
		if (len < 1 || (uint32_t)len > QTK_CAP_NAME)
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)at, NULL,
					   "entry %ld: name length %ld out of range [1, %u]", (long)i,
					   (long)len, QTK_CAP_NAME);
		char *name = qtk_malloc((size_t)len + 1);
		if (!name)
			return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		if ((rc = qtk_cur_bytes(c, name, (size_t)len, "entry name"))) {
			qtk_free(name);
			return rc;
		}
		name[len] = 0; /* like llama.cpp, the name ends at the first NUL */
		const uint64_t at_n = c->pos;
		if ((rc = rd_i32(c, &ncall, "ncall")) || (rc = rd_i32(c, &nval, "nval"))) {
			qtk_free(name);
			return rc;
		}
		if (nval < 1 || (uint64_t)nval * 4 > qtk_cur_remain(c)) {
			rc = qtk_err_set(err, QTK_E_DATA, path, (int64_t)at_n + 4, name,
					 nval < 1 ? "nval %ld must be >= 1"
						  : "nval %ld: values run past the end of the file",
					 (long)nval);
			qtk_free(name);
			return rc;
		}
		float *v = qtk_malloc((size_t)nval * sizeof *v);
		const uint64_t at_v = c->pos;
		if (!v) {
			qtk_free(name);
			return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		}
		if ((rc = qtk_cur_bytes(c, v, (size_t)nval * 4, "values"))) {
			qtk_free(name);
			qtk_free(v);
			return rc;
		}
		for (int32_t j = 0; j < nval; j++) {
			const float f = v[j]; /* stored little-endian, as the host */
			if (!finite_nonneg(f)) {
				rc = qtk_err_set(err, QTK_E_DATA, path, (int64_t)(at_v + 4 * (uint64_t)j),
						 name, "value %ld is negative or not finite", (long)j);
				qtk_free(name);
				qtk_free(v);
				return rc;
			}
			/* llama-quantize: e[j] /= ncall (float / int -> float) when ncall > 0 */
			v[j] = ncall > 0 ? f / (float)ncall : f;
		}
		if ((rc = add_entry(m, name, v, (uint64_t)nval, err, path)))
			return rc;
	}
	/* optional trailer: chunk count and dataset name; anything else is an error */
	if (qtk_cur_remain(c) == 0)
		return 0;
	int32_t last_call, dlen;
	if ((rc = rd_i32(c, &last_call, "chunk count")))
		return rc;
	m->chunks = last_call;
	if (qtk_cur_remain(c) == 0)
		return 0;
	const uint64_t at_d = c->pos;
	if ((rc = rd_i32(c, &dlen, "dataset name length")))
		return rc;
	if (dlen < 0 || (uint32_t)dlen > CAP_DATASET || (uint64_t)dlen > qtk_cur_remain(c))
		return qtk_err_set(err, QTK_E_DATA, path, (int64_t)at_d, NULL,
				   "dataset name length %ld out of range [0, %llu]", (long)dlen,
				   (unsigned long long)qtk_cur_remain(c));
	char *ds = qtk_malloc((size_t)dlen + 1);
	if (!ds)
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	if ((rc = qtk_cur_bytes(c, ds, (size_t)dlen, "dataset name"))) {
		qtk_free(ds);
		return rc;
	}
	ds[dlen] = 0;
	m->dataset = ds;
	if (qtk_cur_remain(c))
		return qtk_err_set(err, QTK_E_DATA, path, (int64_t)c->pos, NULL,
				   "%llu unexpected bytes after the dataset name",
				   (unsigned long long)qtk_cur_remain(c));
	return 0;
}

/* ---------------------------------------------------------------- GGUF */

static bool ends_with(const char *s, const char *suf, size_t *stem)
{
	size_t a = strlen(s), b = strlen(suf);
	if (a <= b || memcmp(s + a - b, suf, b) != 0)
		return false;
	*stem = a - b;
	return true;
}

static int read_f32_tensor(qtk_model *mm, const qtk_tensor *t, const char *path, float **out,
			   qtk_err *err)
{
	if (t->layout.kind != QTK_LAYOUT_PLAIN || t->layout.type != QTK_T_F32 || t->nparts != 1)
		return qtk_err_set(err, QTK_E_DATA, path, -1, t->name, "imatrix tensor must be F32");
	if (t->n_params == 0 || t->n_params > CAP_NVAL || t->parts[0].nbytes != t->n_params * 4)
		return qtk_err_set(err, QTK_E_DATA, path, (int64_t)t->parts[0].offset, t->name,
				   "bad imatrix tensor size");
	uint8_t *buf;
	int rc = qtk_read_part_alloc(mm, t, 0, &buf);
	if (rc) {
		if (mm->err.code)
			*err = mm->err;
		else
			qtk_err_set(err, rc, path, -1, t->name, "cannot read tensor");
		return rc;
	}
	*out = (float *)(void *)buf;
	return 0;
}

static int load_gguf(qtk_imatrix *m, const char *path, qtk_err *err)
{
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *mm = qtk_open(path, &e);
	if (!mm) {
		*err = e;
		return e.code ? e.code : QTK_E_DATA;
	}
	int rc = 0;
	const qtk_kv *kv = qtk_kv_find(mm, "imatrix.chunk_count");
	if (kv && (kv->val.type == QTK_V_U32 || kv->val.type == QTK_V_U64))
		m->chunks = kv->val.v.u > INT64_MAX ? INT64_MAX : (int64_t)kv->val.v.u;
	else if (kv && (kv->val.type == QTK_V_I32 || kv->val.type == QTK_V_I64))
		m->chunks = kv->val.v.i;
	kv = qtk_kv_find(mm, "imatrix.datasets");
	if (kv && kv->val.type == QTK_V_ARR && kv->val.elem == QTK_V_STR && kv->val.n > 0) {
		const qtk_str *s = kv->val.arr;
		m->dataset = qtk_strndup(s[0].s, (size_t)s[0].len);
		if (!m->dataset)
			rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
	}
	char nm[QTK_CAP_NAME + 16];
	for (size_t i = 0; i < mm->ntensors && !rc; i++) {
		const qtk_tensor *t = &mm->tensors[i];
		size_t stem;
		if (ends_with(t->name, ".counts", &stem)) {
			/* counts without sums: llama.cpp rejects the file */
			if (stem + 9 > sizeof nm)
				continue;
			memcpy(nm, t->name, stem);
			memcpy(nm + stem, ".in_sum2", 9);
			if (!qtk_tensor_find(mm, nm))
				rc = qtk_err_set(err, QTK_E_DATA, path, -1, t->name,
						 "counts without matching in_sum2");
			continue;
		}
		if (!ends_with(t->name, ".in_sum2", &stem))
			continue;
		if (stem + 8 > sizeof nm) {
			rc = qtk_err_set(err, QTK_E_DATA, path, -1, t->name, "name too long");
			break;
		}
		memcpy(nm, t->name, stem);
		memcpy(nm + stem, ".counts", 8);
		const qtk_tensor *tc = qtk_tensor_find(mm, nm);
		if (!tc) {
			rc = qtk_err_set(err, QTK_E_DATA, path, -1, t->name,
					 "in_sum2 without matching counts");
			break;
		}
		float *sums = NULL, *cnt = NULL;
		if ((rc = read_f32_tensor(mm, t, path, &sums, err)) ||
		    (rc = read_f32_tensor(mm, tc, path, &cnt, err))) {
			qtk_free(sums);
			break;
		}
		const uint64_t nval = t->n_params, ncounts = tc->n_params;
		if (nval % ncounts) {
			rc = qtk_err_set(err, QTK_E_DATA, path, (int64_t)tc->parts[0].offset, tc->name,
					 "%llu sums do not split into %llu matrices",
					 (unsigned long long)nval, (unsigned long long)ncounts);
		}
		const uint64_t ne0 = rc ? 0 : nval / ncounts;
		for (uint64_t j = 0; j < ncounts && !rc; j++) {
			const float cf = cnt[j];
			if (!finite_nonneg(cf) || cf > 9.0e15f) {
				rc = qtk_err_set(err, QTK_E_DATA, path,
						 (int64_t)(tc->parts[0].offset + 4 * j), tc->name,
						 "count %llu is negative, huge or not finite",
						 (unsigned long long)j);
				break;
			}
			/* llama.cpp: count = lround(counts[j]); weight = sum / (float)count, or 1 */
			const int64_t ci = (int64_t)((double)cf + 0.5);
			for (uint64_t k = 0; k < ne0; k++) {
				const uint64_t idx = j * ne0 + k;
				if (!finite_nonneg(sums[idx])) {
					rc = qtk_err_set(err, QTK_E_DATA, path,
							 (int64_t)(t->parts[0].offset + 4 * idx), t->name,
							 "sum %llu is negative or not finite",
							 (unsigned long long)idx);
					break;
				}
				sums[idx] = ci > 0 ? sums[idx] / (float)ci : 1.f;
			}
		}
		qtk_free(cnt);
		if (rc) {
			qtk_free(sums);
			break;
		}
		char *name = qtk_strndup(t->name, stem);
		if (!name) {
			qtk_free(sums);
			rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
			break;
		}
		rc = add_entry(m, name, sums, nval, err, path);
	}
	if (!rc && m->n == 0)
		rc = qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "no imatrix entries (in_sum2/counts)");
	qtk_close(mm);
	return rc;
}

/* ---------------------------------------------------------------- public */

qtk_imatrix *qtk_imatrix_load(const char *path, qtk_err *err)
{
	qtk_err_clear(err);
	uint64_t size = 0;
	int fd = qtk_file_open(path, &size, err);
	if (fd < 0)
		return NULL;
	qtk_imatrix *m = qtk_calloc(1, sizeof *m);
	qtk_cur *c = qtk_malloc(sizeof *c);
	int rc = 0;
	if (!m || !c) {
		rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		goto done;
	}
	m->chunks = -1;
	if ((rc = hash_file(fd, path, size, m->sha, err)))
		goto done;
	uint8_t magic[4] = { 0, 0, 0, 0 };
	if (size >= 4 && (rc = qtk_pread_full(fd, path, magic, 4, 0, err)))
		goto done;
	if (memcmp(magic, "GGUF", 4) == 0) {
		m->legacy = false;
		rc = load_gguf(m, path, err);
	} else {
		m->legacy = true;
		qtk_cur_init(c, fd, path, size, err);
		rc = load_legacy(m, c, path, err);
	}
	if (!rc)
		finish_entries(m);
done:
	close(fd);
	qtk_free(c);
	if (rc) {
		qtk_imatrix_free(m);
		return NULL;
	}
	return m;
}

static const ient *lookup(const qtk_imatrix *m, const char *name)
{
	if (!m || !name)
		return NULL;
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->e[mid].name, name);
		if (c == 0)
			return &m->e[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const float *qtk_imatrix_get(const qtk_imatrix *m, const char *tensor_name, uint64_t n_per_row)
{
	const ient *e = lookup(m, tensor_name);
	return e && e->nval == n_per_row ? e->v : NULL;
}

const float *qtk_imatrix_find(const qtk_imatrix *m, const char *tensor_name, uint64_t *nval)
{
	const ient *e = lookup(m, tensor_name);
	if (nval)
		*nval = e ? e->nval : 0;
	return e ? e->v : NULL;
}

const uint8_t *qtk_imatrix_sha256(const qtk_imatrix *m) { return m ? m->sha : NULL; }
size_t qtk_imatrix_count(const qtk_imatrix *m) { return m ? m->n : 0; }
const char *qtk_imatrix_name(const qtk_imatrix *m, size_t i)
{
	return m && i < m->n ? m->e[i].name : NULL;
}
int64_t qtk_imatrix_chunks(const qtk_imatrix *m) { return m ? m->chunks : -1; }
const char *qtk_imatrix_dataset(const qtk_imatrix *m) { return m ? m->dataset : NULL; }
bool qtk_imatrix_is_legacy(const qtk_imatrix *m) { return m && m->legacy; }
