/* gguf.c - GGUF v2/v3 reader (single files and split sets) and writer.
 *
 * Every header field is read through the bounded cursor; every count,
 * length and size is checked against the remaining bytes and our caps
 * before anything is allocated (docs/cli.md, "Hostile input").
 */
#include "internal.h"
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGN 32u
#define GGUF_MAX_NAME 63u    /* llama.cpp: name length < GGML_MAX_NAME (64) */
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_BLOCKS 512u /* well-known *.block_count range */

typedef struct gguf_priv {
	uint32_t split_count;
} gguf_priv;

static int gguf_probe(const uint8_t *h, size_t n, uint64_t size)
{
	(void)size;
	if (n < 8 || memcmp(h, GGUF_MAGIC, 4) != 0)
		return 0;
	uint32_t v = qtk_rd32(h + 4);
	return (v == 2 || v == 3) ? 100 : 80; /* open() reports the bad version */
}

/* Parser state for one file. */
typedef struct gp {
	qtk_model *m;
	qtk_cur c;
	const char *path;
	uint64_t meta_bytes; /* metadata bytes held so far (cap) */
	uint32_t alignment;
	int64_t split_no, split_count, split_tensors; /* -1 when absent */
} gp;

static int bad(gp *g, uint64_t off, const char *subject, const char *fmt, const char *detail)
{
	return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)off, subject, fmt, detail);
}

/* Read a GGUF string (u64 length + bytes) into a new NUL-terminated buffer. */
static int read_str(gp *g, qtk_str *out, uint64_t cap, const char *field, const char *subject)
{
	uint64_t at = g->c.pos, len;
	int rc = qtk_cur_u64(&g->c, &len, field);
	if (rc)
		return rc;
	if (len > cap)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, subject,
				   "%s length %llu exceeds the limit of %llu", field,
				   (unsigned long long)len, (unsigned long long)cap);
	if (len > qtk_cur_remain(&g->c))
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, subject,
				   "%s length %llu exceeds the %llu bytes left in the file", field,
				   (unsigned long long)len, (unsigned long long)qtk_cur_remain(&g->c));
	if (!qtk_add_u64(g->meta_bytes, len, &g->meta_bytes) || g->meta_bytes > QTK_CAP_META_TOTAL)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, subject,
				   "metadata exceeds the limit of %llu bytes", (unsigned long long)QTK_CAP_META_TOTAL);
	char *s = qtk_malloc((size_t)len + 1);
	if (!s)
		return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, subject, "out of memory");
	rc = qtk_cur_bytes(&g->c, s, (size_t)len, field);
	if (rc) {
		qtk_free(s);
		return rc;
	}
	s[len] = 0;
	out->s = s;
	out->len = len;
	return 0;
}

static int read_scalar(gp *g, unsigned type, qtk_value *v, const char *key)
{
	uint8_t b[8];
	size_t sz = qtk_value_size(type);
	uint64_t at = g->c.pos;
	int rc = qtk_cur_bytes(&g->c, b, sz, "value");
	if (rc)
		return rc;
	if (type >= QTK_V_MAX || type == QTK_V_STR || type == QTK_V_ARR)
		return qtk_err_set(g->c.err, QTK_E_INTERNAL, g->path, (int64_t)at, key, "bad scalar type");
	if (type == QTK_V_BOOL && b[0] > 1)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, key, "bool value is %u, not 0 or 1", b[0]);
	qtk_value_from_le(v, type, b);
	return 0;
}

static int read_value(gp *g, qtk_value *v, const char *key)
{
	uint64_t at = g->c.pos;
	uint32_t type;
	int rc = qtk_cur_u32(&g->c, &type, "value type");
	if (rc)
		return rc;
	if (type >= QTK_V_MAX)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, key,
				   "unknown value type %u", type);
	if (type == QTK_V_STR) {
		v->type = QTK_V_STR;
		return read_str(g, &v->v.str, QTK_CAP_STR, "string", key);
	}
	if (type != QTK_V_ARR)
		return read_scalar(g, type, v, key);

	uint32_t et;
	uint64_t n;
	at = g->c.pos;
	if ((rc = qtk_cur_u32(&g->c, &et, "array type")) || (rc = qtk_cur_u64(&g->c, &n, "array length")))
		return rc;
	if (et >= QTK_V_MAX)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, key,
				   "unknown array element type %u", et);
	if (et == QTK_V_ARR)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, key,
				   "nested arrays are not supported");
	size_t esz = et == QTK_V_STR ? 8 : qtk_value_size(et);
	uint64_t need;
	if (n > QTK_CAP_ARRAY || !qtk_mul_u64(n, esz, &need) || need > qtk_cur_remain(&g->c))
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, key,
				   "array length %llu exceeds the %llu bytes left in the file",
				   (unsigned long long)n, (unsigned long long)qtk_cur_remain(&g->c));
	v->type = QTK_V_ARR;
	v->elem = (uint8_t)et;
	if (et == QTK_V_STR) {
		qtk_str *s = qtk_calloc((size_t)n ? (size_t)n : 1, sizeof *s);
		if (!s)
			return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, key, "out of memory");
		v->arr = s;
		for (uint64_t i = 0; i < n; i++) {
			rc = read_str(g, &s[i], QTK_CAP_STR, "array string", key);
			if (rc)
				return rc;
			v->n = i + 1; /* so qtk_value_free frees what was read */
		}
		v->n = n;
		return 0;
	}
	if (!qtk_add_u64(g->meta_bytes, need, &g->meta_bytes) || g->meta_bytes > QTK_CAP_META_TOTAL)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, key, "metadata exceeds the limit");
	v->arr = qtk_malloc((size_t)need ? (size_t)need : 1);
	if (!v->arr)
		return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, key, "out of memory");
	v->n = n;
	uint64_t data_at = g->c.pos;
	rc = qtk_cur_bytes(&g->c, v->arr, (size_t)need, "array data");
	if (rc)
		return rc;
	if (et == QTK_V_BOOL) {
		const uint8_t *b = v->arr;
		for (uint64_t i = 0; i < n; i++)
			if (b[i] > 1)
				return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)(data_at + i), key,
						   "bool array element %llu is %u, not 0 or 1",
						   (unsigned long long)i, b[i]);
	}
	return 0;
}

/* Keys: printable ASCII without spaces, 1..65535 bytes. */
static bool key_ok(const qtk_str *k)
{
	if (k->len == 0)
		return false;
	for (uint64_t i = 0; i < k->len; i++)
		if ((uint8_t)k->s[i] <= 0x20 || (uint8_t)k->s[i] >= 0x7f)
			return false;
	return true;
}

static bool is_int_type(unsigned t)
{
	return t <= QTK_V_I32 || t == QTK_V_U64 || t == QTK_V_I64;
}

/* Well-known keys whose type engines rely on (C.2 row 29). */
typedef struct key_rule {
	const char *key;   /* exact key, or suffix when it starts with '.' */
	int type;          /* required type; -1 = any integer */
	int elem;          /* for arrays: required element type */
} key_rule;

static const key_rule key_rules[] = {
	{"general.alignment", QTK_V_U32, 0},
	{"general.architecture", QTK_V_STR, 0},
	{"general.name", QTK_V_STR, 0},
	{"general.file_type", -1, 0},
	{"general.quantization_version", -1, 0},
	{"split.no", QTK_V_U16, 0},
	{"split.count", QTK_V_U16, 0},
	{"split.tensors.count", QTK_V_I32, 0},
	{".block_count", -1, 0},
	{".context_length", -1, 0},
	{".embedding_length", -1, 0},
	{"tokenizer.ggml.model", QTK_V_STR, 0},
	{"tokenizer.ggml.tokens", QTK_V_ARR, QTK_V_STR},
	{"tokenizer.ggml.scores", QTK_V_ARR, QTK_V_F32},
	{"tokenizer.ggml.token_type", QTK_V_ARR, QTK_V_I32},
	{"tokenizer.ggml.merges", QTK_V_ARR, QTK_V_STR},
	{"tokenizer.ggml.bos_token_id", -1, 0},
	{"tokenizer.ggml.eos_token_id", -1, 0},
	{"tokenizer.ggml.unknown_token_id", -1, 0},
	{"tokenizer.ggml.padding_token_id", -1, 0},
	{"tokenizer.ggml.seperator_token_id", -1, 0},
	{"tokenizer.chat_template", QTK_V_STR, 0},
};

static int check_key_type(qtk_err *err, const char *path, uint64_t at, const char *key, const qtk_value *v)
{
	for (size_t i = 0; i < sizeof key_rules / sizeof *key_rules; i++) {
		const key_rule *r = &key_rules[i];
		bool hit = r->key[0] == '.' ? qtk_str_ends(key, r->key) : strcmp(key, r->key) == 0;
		if (!hit)
			continue;
		bool ok = r->type < 0 ? is_int_type(v->type) : v->type == r->type;
		if (ok && r->type == QTK_V_ARR)
			ok = v->elem == r->elem;
		if (!ok) {
			char want[32];
			if (r->type < 0)
				snprintf(want, sizeof want, "an integer");
			else if (r->type == QTK_V_ARR)
				snprintf(want, sizeof want, "an array of %s", qtk_value_type_name((unsigned)r->elem));
			else
				snprintf(want, sizeof want, "%s", qtk_value_type_name((unsigned)r->type));
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)at, key,
					   "wrong type %s%s%s, expected %s", qtk_value_type_name(v->type),
					   v->type == QTK_V_ARR ? " of " : "",
					   v->type == QTK_V_ARR ? qtk_value_type_name(v->elem) : "", want);
		}
		return 0;
	}
	return 0;
}

/* A metadata value as an integer for GGUF's own range checks: integers, and bools as 0/1 (a
 * bool where a count or a token id belongs still gets its range checked). */
static bool gguf_int(const qtk_value *v, int64_t *x)
{
	if (v->type == QTK_V_BOOL) {
		*x = v->v.u ? 1 : 0;
		return true;
	}
	return qtk_value_as_i64(v, x);
}

/* Cross-key checks after all KVs are read (C.2 rows 28, 30, 31). */
static int check_kvs(const qtk_model *m, qtk_err *err, const char *path, uint64_t kv_start)
{
	for (size_t i = 0; i < m->nkv; i++) {
		const qtk_kv *kv = &m->kv[i];
		int64_t x;
		if (qtk_str_ends(kv->key, ".block_count") && gguf_int(&kv->val, &x) &&
		    (x < 0 || x > GGUF_MAX_BLOCKS))
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)kv_start, kv->key,
					   "block count %lld out of range (0..%u)", (long long)x, GGUF_MAX_BLOCKS);
	}
	const qtk_kv *tok = qtk_kv_find(m, "tokenizer.ggml.tokens");
	uint64_t nvocab = tok ? tok->val.n : 0;
	static const char *const parallel[] = {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"};
	for (size_t i = 0; i < 2; i++) {
		const qtk_kv *p = qtk_kv_find(m, parallel[i]);
		if (p && (!tok || p->val.n != nvocab))
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)kv_start, parallel[i],
					   "has %llu entries but tokenizer.ggml.tokens has %llu",
					   (unsigned long long)p->val.n, (unsigned long long)nvocab);
	}
	static const char *const ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
					  "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
					  "tokenizer.ggml.seperator_token_id"};
	for (size_t i = 0; tok && i < sizeof ids / sizeof *ids; i++) {
		const qtk_kv *p = qtk_kv_find(m, ids[i]);
		int64_t x;
		if (p && gguf_int(&p->val, &x) && (x < -1 || (x >= 0 && (uint64_t)x >= nvocab)))
			return qtk_err_set(err, QTK_E_DATA, path, (int64_t)kv_start, ids[i],
					   "token id %lld out of range (vocab has %llu tokens)", (long long)x,
					   (unsigned long long)nvocab);
	}
	/* byte tokens (type 6) must be exactly <0xHH> */
	const qtk_kv *tt = qtk_kv_find(m, "tokenizer.ggml.token_type");
	if (tok && tt) {
		const qtk_str *s = tok->val.arr;
		const uint8_t *types = tt->val.arr;
		for (uint64_t i = 0; i < nvocab; i++) {
			int32_t ty = (int32_t)qtk_rd32(types + 4 * i);
			if (ty != 6)
				continue;
			const char *t = s[i].s;
			bool ok = s[i].len == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && t[5] == '>';
			for (int k = 3; ok && k < 5; k++)
				ok = (t[k] >= '0' && t[k] <= '9') || (t[k] >= 'A' && t[k] <= 'F') ||
				     (t[k] >= 'a' && t[k] <= 'f');
			if (!ok) {
				char subj[64];
				snprintf(subj, sizeof subj, "tokenizer.ggml.tokens[%llu]", (unsigned long long)i);
				return qtk_err_set(err, QTK_E_DATA, path, (int64_t)kv_start, subj,
						   "malformed byte token (expected <0xHH>)");
			}
		}
	}
	return 0;
}

static int check_alignment(qtk_err *err, const char *path, uint64_t at, const qtk_value *v)
{
	uint64_t a = v->v.u;
	if (a < 8 || a > QTK_CAP_ALIGN || (a & (a - 1)))
		return qtk_err_set(err, QTK_E_DATA, path, (int64_t)at, "general.alignment",
				   "alignment %llu is not a power of two between 8 and %u", (unsigned long long)a,
				   QTK_CAP_ALIGN);
	return 0;
}

/* Read all KVs of one file. keep: add them to the model (shard 0). */
static int read_kvs(gp *g, uint64_t n_kv, bool keep, qtk_strset *seen)
{
	uint64_t kv_start = g->c.pos;
	for (uint64_t i = 0; i < n_kv; i++) {
		uint64_t at = g->c.pos;
		qtk_str key = {0, NULL};
		int rc = read_str(g, &key, QTK_CAP_KEY, "key", NULL);
		if (rc)
			return rc;
		if (!key_ok(&key)) {
			qtk_free(key.s);
			return bad(g, at, NULL, "%s", "key is empty or has characters outside printable ASCII");
		}
		qtk_value v;
		memset(&v, 0, sizeof v);
		rc = read_value(g, &v, key.s);
		if (!rc)
			rc = check_key_type(g->c.err, g->path, at, key.s, &v);
		if (rc) {
			qtk_value_free(&v);
			qtk_free(key.s);
			return rc;
		}
		int64_t x;
		if (strcmp(key.s, "split.no") == 0 && gguf_int(&v, &x))
			g->split_no = x;
		else if (strcmp(key.s, "split.count") == 0 && gguf_int(&v, &x))
			g->split_count = x;
		else if (strcmp(key.s, "split.tensors.count") == 0 && gguf_int(&v, &x))
			g->split_tensors = x;
		if (strcmp(key.s, "general.alignment") == 0) {
			if ((rc = check_alignment(g->c.err, g->path, at, &v))) {
				qtk_value_free(&v);
				qtk_free(key.s);
				return rc;
			}
			g->alignment = (uint32_t)v.v.u;
		}
		bool is_split = strncmp(key.s, "split.", 6) == 0;
		if (!keep || is_split) {
			qtk_value_free(&v);
			qtk_free(key.s);
			continue;
		}
		qtk_kv *kv = qtk_model_add_kv(g->m, key.s);
		qtk_free(key.s);
		if (!kv) {
			qtk_value_free(&v);
			return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, NULL, "out of memory");
		}
		kv->val = v;
		rc = qtk_strset_add(seen, kv->key);
		if (rc < 0)
			return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, NULL, "out of memory");
		if (rc == 0)
			return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, kv->key, "duplicate key");
	}
	return keep ? check_kvs(g->m, g->c.err, g->path, kv_start) : 0;
}

typedef struct tinfo {
	uint64_t offset, nbytes, at;
	size_t idx;
} tinfo;

static int cmp_tinfo(const void *a, const void *b)
{
	const tinfo *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int read_tensor_info(gp *g, uint32_t file, qtk_strset *names, tinfo *ti)
{
	uint64_t at = g->c.pos;
	qtk_str name = {0, NULL};
	int rc = read_str(g, &name, QTK_CAP_NAME, "tensor name", NULL);
	if (rc)
		return rc;
	if (name.len == 0 || name.len > GGUF_MAX_NAME || memchr(name.s, 0, (size_t)name.len) ||
	    !qtk_utf8_valid(name.s, (size_t)name.len)) {
		rc = qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, NULL,
				 "tensor name is empty, longer than %u bytes or not UTF-8", GGUF_MAX_NAME);
		qtk_free(name.s);
		return rc;
	}
	qtk_tensor *t = qtk_model_add_tensor_room(g->m, name.s, 1);
	qtk_free(name.s);
	if (!t)
		return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, NULL, "out of memory");
	rc = qtk_strset_add(names, t->name);
	if (rc < 0)
		return qtk_err_set(g->c.err, QTK_E_IO, g->path, (int64_t)at, NULL, "out of memory");
	if (rc == 0)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)at, t->name, "duplicate tensor name");
	char subj[96];
	snprintf(subj, sizeof subj, "tensor '%s'", t->name);
	uint32_t nd;
	uint64_t dat = g->c.pos;
	if ((rc = qtk_cur_u32(&g->c, &nd, "n_dims")))
		return rc;
	if (nd == 0 || nd > GGUF_MAX_DIMS)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)dat, subj,
				   "n_dims %u out of range (1..%d)", nd, GGUF_MAX_DIMS);
	uint64_t ne[GGUF_MAX_DIMS], n = 1;
	for (uint32_t d = 0; d < nd; d++) {
		dat = g->c.pos;
		if ((rc = qtk_cur_u64(&g->c, &ne[d], "dimension")))
			return rc;
		if (ne[d] == 0 || ne[d] >= (1ull << 63))
			return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)dat, subj,
					   "dimension %u is %llu", d, (unsigned long long)ne[d]);
		if (!qtk_mul_u64(n, ne[d], &n) || n >= (1ull << 63))
			return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)dat, subj,
					   "element count overflows");
	}
	uint32_t type;
	dat = g->c.pos;
	if ((rc = qtk_cur_u32(&g->c, &type, "ggml type")))
		return rc;
	const qtk_type_info *tinf = type < QTK_GGML_MAX ? qtk_type(type) : NULL;
	if (!tinf)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)dat, subj,
				   "unknown or removed ggml type %u", type);
	if (ne[0] % tinf->blck)
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)dat, subj,
				   "row length %llu is not a multiple of the %s block size %u",
				   (unsigned long long)ne[0], tinf->name, tinf->blck);
	uint64_t nbytes;
	if (qtk_type_nbytes(type, n, &nbytes))
		return qtk_err_set(g->c.err, QTK_E_DATA, g->path, (int64_t)dat, subj, "byte size overflows");
	uint64_t off;
	dat = g->c.pos;
	if ((rc = qtk_cur_u64(&g->c, &off, "tensor offset")))
		return rc;
	t->ndim = (int)nd;
	for (uint32_t d = 0; d < nd; d++)
		t->shape[d] = ne[nd - 1 - d];
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = type;
	t->layout.bits = tinf->code_bits;
	t->layout.group_size = tinf->group;
	t->nparts = 1;
	qtk_part *p = &t->parts[0];
	p->type = type;
	p->ndim = t->ndim;
	memcpy(p->shape, t->shape, sizeof p->shape);
	p->file = file;
	p->offset = off; /* relative; made absolute once the data start is known */
	p->nbytes = nbytes;
	qtk_tensor_finish(t);
	ti->offset = off;
	ti->nbytes = nbytes;
	ti->at = dat;
	return 0;
}

/* Parse one GGUF file into g->m: tensors are appended; KVs kept when keep. */
static int parse_file(gp *g, const char *path, bool keep, qtk_strset *keys, qtk_strset *names)
{
	qtk_model *m = g->m;
	int fi = qtk_model_add_file(m, path);
	if (fi < 0)
		return fi;
	g->path = m->files[fi];
	qtk_cur_init(&g->c, m->fds[fi], g->path, m->file_sizes[fi], &m->err);
	g->alignment = GGUF_DEFAULT_ALIGN;
	g->split_no = g->split_count = g->split_tensors = -1;
	uint8_t magic[4];
	uint32_t version;
	uint64_t nt, nkv;
	int rc;
	if (m->file_sizes[fi] < 24)
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 0, NULL,
				   "truncated header: file has %llu bytes, a GGUF header needs 24",
				   (unsigned long long)m->file_sizes[fi]);
	if ((rc = qtk_cur_bytes(&g->c, magic, 4, "magic")))
		return rc;
	if (memcmp(magic, GGUF_MAGIC, 4) != 0)
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 0, NULL, "bad magic: not a GGUF file");
	if ((rc = qtk_cur_u32(&g->c, &version, "version")))
		return rc;
	if (version != 0 && (version & 0xFFFF) == 0)
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 4, NULL,
				   "big-endian GGUF (version 0x%08x) is not supported", version);
	if (version < 2 || version > 3)
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 4, NULL,
				   "unsupported GGUF version %u (2 and 3 are supported)", version);
	if (keep)
		m->format_version = (int)version;
	if ((rc = qtk_cur_u64(&g->c, &nt, "tensor count")) || (rc = qtk_cur_u64(&g->c, &nkv, "kv count")))
		return rc;
	/* smallest KV: 8 (key len) + 1 (key) + 4 (type) + 1 (u8); smallest tensor info: 8+1+4+8+4+8 */
	uint64_t rem = qtk_cur_remain(&g->c);
	if (nkv > QTK_CAP_KV || nkv > rem / 14)
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 16, NULL,
				   "kv count %llu is impossible for the %llu bytes that follow",
				   (unsigned long long)nkv, (unsigned long long)rem);
	if (nt > QTK_CAP_TENSORS || nt > rem / 33)
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 8, NULL,
				   "tensor count %llu is impossible for the %llu bytes that follow",
				   (unsigned long long)nt, (unsigned long long)rem);
	if ((rc = read_kvs(g, nkv, keep, keys)))
		return rc;
	if (g->split_count >= 0 && (g->split_no < 0 || g->split_no >= g->split_count))
		return qtk_err_set(&m->err, QTK_E_DATA, g->path, 24, "split.no",
				   "split.no %lld out of range for split.count %lld",
				   (long long)g->split_no, (long long)g->split_count);
	if (qtk_model_reserve_tensors(m, (size_t)nt))
		return qtk_err_set(&m->err, QTK_E_IO, g->path, -1, NULL, "out of memory");
	size_t first = m->ntensors;
	tinfo *ti = qtk_calloc((size_t)nt ? (size_t)nt : 1, sizeof *ti);
	if (!ti)
		return qtk_err_set(&m->err, QTK_E_IO, g->path, -1, NULL, "out of memory");
	for (uint64_t i = 0; i < nt && !rc; i++) {
		rc = read_tensor_info(g, (uint32_t)fi, names, &ti[i]);
		ti[i].idx = first + i;
	}
	uint64_t data_start = 0;
	if (!rc) {
		uint64_t pos = g->c.pos;
		/* like gguf.cpp, a file without tensors needs no padding */
		uint64_t pad = nt ? (g->alignment - pos % g->alignment) % g->alignment : 0;
		if (!qtk_add_u64(pos, pad, &data_start) || data_start > m->file_sizes[fi])
			rc = qtk_err_set(&m->err, QTK_E_DATA, g->path, (int64_t)pos, NULL,
					 "data section start 0x%llx is beyond the end of the file (0x%llx)",
					 (unsigned long long)data_start, (unsigned long long)m->file_sizes[fi]);
	}
	if (!rc) {
		uint64_t data_size = m->file_sizes[fi] - data_start;
		qsort(ti, (size_t)nt, sizeof *ti, cmp_tinfo);
		uint64_t prev_end = 0;
		for (uint64_t i = 0; i < nt && !rc; i++) {
			qtk_tensor *t = &m->tensors[ti[i].idx];
			char subj[96];
			snprintf(subj, sizeof subj, "tensor '%s'", t->name);
			uint64_t end;
			if (ti[i].offset % g->alignment)
				rc = qtk_err_set(&m->err, QTK_E_DATA, g->path, (int64_t)ti[i].at, subj,
						 "offset 0x%llx is not a multiple of the alignment %u",
						 (unsigned long long)ti[i].offset, g->alignment);
			else if (!qtk_add_u64(ti[i].offset, ti[i].nbytes, &end) || end > data_size)
				rc = qtk_err_set(&m->err, QTK_E_DATA, g->path, (int64_t)ti[i].at, subj,
						 "offset beyond end of file: data 0x%llx..0x%llx, file data section has 0x%llx bytes",
						 (unsigned long long)ti[i].offset, (unsigned long long)(ti[i].offset + ti[i].nbytes),
						 (unsigned long long)data_size);
			else if (i > 0 && ti[i].offset < prev_end)
				rc = qtk_err_set(&m->err, QTK_E_DATA, g->path, (int64_t)ti[i].at, subj,
						 "data overlaps the previous tensor");
			else {
				prev_end = end;
				t->parts[0].offset = data_start + ti[i].offset;
			}
		}
	}
	qtk_free(ti);
	return rc;
}

/* "<prefix>-00002-of-00003.gguf" -> prefix length, or 0 when not a split name. */
static size_t split_prefix(const char *path)
{
	size_t n = strlen(path);
	static const char pat[] = "-#####-of-#####.gguf";
	size_t k = sizeof pat - 1;
	if (n <= k)
		return 0;
	const char *s = path + n - k;
	for (size_t i = 0; i < k; i++) {
		if (pat[i] == '#' ? (s[i] < '0' || s[i] > '9') : s[i] != pat[i])
			return 0;
	}
	return n - k;
}

/* The path of shard i (from 0) of count, given a shard's path whose prefix is pl bytes
 * (split_prefix); NULL when out of memory. */
static char *shard_path(const char *path, size_t pl, int64_t i, int64_t count)
{
	char *p = qtk_malloc(pl + 48);
	if (p) {
		memcpy(p, path, pl);
		snprintf(p + pl, 48, "-%05u-of-%05u.gguf", (unsigned)(i + 1), (unsigned)count);
	}
	return p;
}

static int gguf_open(qtk_model *m)
{
	gp g; /* not zeroed whole: its cursor's 64 KiB buffer would be 16 page faults */
	memset(&g, 0, offsetof(gp, c));
	memset((char *)&g + offsetof(gp, path), 0, sizeof g - offsetof(gp, path));
	qtk_cur_init(&g.c, -1, NULL, 0, &m->err);
	g.m = m;
	qtk_strset keys = {0}, names = {0};
	int rc = parse_file(&g, m->path, true, &keys, &names);
	if (rc || g.split_count <= 1)
		goto out;
	/* A split set: parse every shard in order, from shard 1 (reparsed unless it is the one
	 * opened). */
	size_t pl = split_prefix(m->path);
	if (!pl) {
		rc = qtk_err_set(&m->err, QTK_E_DATA, m->path, -1, "split.count",
				 "file is part of a %lld-way split set but its name does not end in -NNNNN-of-NNNNN.gguf",
				 (long long)g.split_count);
		goto out;
	}
	int64_t count = g.split_count, i0 = 0, total = -1;
	char *p = shard_path(m->path, pl, 0, count);
	if (!p) {
		rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
		goto out;
	}
	if (g.split_no == 0 && strcmp(p, m->path) == 0) {
		i0 = 1; /* opened at shard 1, which is parsed as the reparse would parse it */
		total = g.split_tensors;
	} else {
		qtk_fmt_reset_model(m);
		qtk_strset_free(&keys);
		qtk_strset_free(&names);
	}
	qtk_free(p);
	for (int64_t i = i0; i < count && !rc; i++) {
		if (!(p = shard_path(m->path, pl, i, count))) {
			rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
			break;
		}
		rc = parse_file(&g, p, i == 0, &keys, &names);
		if (!rc && g.split_no != i)
			rc = qtk_err_set(&m->err, QTK_E_DATA, p, -1, "split.no",
					 "shard %lld says split.no %lld", (long long)(i + 1), (long long)g.split_no);
		if (!rc && g.split_count != count)
			rc = qtk_err_set(&m->err, QTK_E_DATA, p, -1, "split.count",
					 "inconsistent split.count %lld (shard 1 says %lld)", (long long)g.split_count,
					 (long long)count);
		if (!rc && i == 0)
			total = g.split_tensors;
		qtk_free(p);
	}
	if (!rc && total >= 0 && (uint64_t)total != m->ntensors)
		rc = qtk_err_set(&m->err, QTK_E_DATA, m->path, -1, "split.tensors.count",
				 "split set holds %zu tensors, split.tensors.count says %lld", m->ntensors,
				 (long long)total);
	if (!rc) {
		gguf_priv *pv = qtk_calloc(1, sizeof *pv);
		if (!pv)
			rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
		else {
			pv->split_count = (uint32_t)count;
			m->priv = pv;
		}
	}
out:
	if (!rc)
		m->alignment = g.alignment;
	qtk_strset_free(&keys);
	qtk_strset_free(&names);
	return rc;
}

static void gguf_close(qtk_model *m)
{
	qtk_free(m->priv);
	m->priv = NULL;
}

/* ---- writer -------------------------------------------------------------- */

typedef struct gw {
	qtk_ofile *f;        /* one per shard */
	uint32_t nshards, cur;
	size_t *first;       /* first tensor of each shard; first[nshards] = ntensors */
	uint32_t align;
	uint64_t pad_after;  /* zero bytes owed after the current tensor */
	uint64_t head_len;   /* KVs and tensor infos of the first shard */
	uint64_t rec_off;    /* where the "qtk.provenance" string's bytes are in the first shard
			      * (0: no such string; its length is w->record_len) */
} gw;

static int w_str(qtk_ofile *f, const char *s, uint64_t len)
{
	uint8_t b[8];
	qtk_wr64(b, len);
	int rc = qtk_ofile_write(f, b, 8);
	return rc ? rc : qtk_ofile_write(f, s, (size_t)len);
}

static int w_u32(qtk_ofile *f, uint32_t v)
{
	uint8_t b[4];
	qtk_wr32(b, v);
	return qtk_ofile_write(f, b, 4);
}

static int w_u64(qtk_ofile *f, uint64_t v)
{
	uint8_t b[8];
	qtk_wr64(b, v);
	return qtk_ofile_write(f, b, 8);
}

static int w_scalar(qtk_ofile *f, const qtk_value *v)
{
	uint8_t b[8];
	size_t sz = qtk_value_size(v->type);
	switch (v->type) {
	case QTK_V_F32: {
		float x = (float)v->v.f;
		uint32_t u;
		memcpy(&u, &x, 4);
		qtk_wr32(b, u);
		break;
	}
	case QTK_V_F64: {
		uint64_t u;
		memcpy(&u, &v->v.f, 8);
		qtk_wr64(b, u);
		break;
	}
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64:
		qtk_wr64(b, (uint64_t)v->v.i);
		break;
	default:
		qtk_wr64(b, v->v.u);
	}
	return qtk_ofile_write(f, b, sz);
}

static int w_value(qtk_ofile *f, const qtk_value *v)
{
	int rc = w_u32(f, v->type);
	if (rc)
		return rc;
	if (v->type == QTK_V_STR)
		return w_str(f, v->v.str.s, v->v.str.len);
	if (v->type != QTK_V_ARR)
		return w_scalar(f, v);
	if ((rc = w_u32(f, v->elem)) || (rc = w_u64(f, v->n)))
		return rc;
	if (v->elem == QTK_V_STR) {
		const qtk_str *s = v->arr;
		for (uint64_t i = 0; i < v->n && !rc; i++)
			rc = w_str(f, s[i].s, s[i].len);
		return rc;
	}
	return qtk_ofile_write(f, v->arr, (size_t)(v->n * qtk_value_size(v->elem)));
}

static uint64_t pad_to(uint64_t x, uint32_t a) { return (a - x % a) % a; }

/* Write one shard's header: magic, counts, KVs (all of them in the first
 * shard, then the split keys), tensor infos of [t0, t1), padding. */
static int write_header(qtk_writer *w, gw *s, uint32_t k)
{
	const qtk_model *d = w->desc;
	qtk_ofile *f = &s->f[k];
	size_t t0 = s->first[k], t1 = s->first[k + 1];
	bool split = s->nshards > 1;
	uint64_t nkv = (k == 0 ? d->nkv : 0) + (split ? 3 : 0);
	int rc;
	if ((rc = qtk_ofile_write(f, GGUF_MAGIC, 4)) || (rc = w_u32(f, 3)) || (rc = w_u64(f, t1 - t0)) ||
	    (rc = w_u64(f, nkv)))
		return rc;
	for (size_t i = 0; k == 0 && i < d->nkv && !rc; i++) {
		rc = w_str(f, d->kv[i].key, strlen(d->kv[i].key));
		const bool rec = !rc && d->kv[i].val.type == QTK_V_STR && !strcmp(d->kv[i].key, "qtk.provenance");
		if (rec) {
			s->rec_off = f->written + 12; /* after the value's type (u32) and length (u64) */
			w->record_len = w->opts.record_gen ? w->opts.record_len : (size_t)d->kv[i].val.v.str.len;
		}
		if (rec && w->opts.record_gen) { /* generated into the file as it is made */
			rc = w_u32(f, QTK_V_STR);
			rc = rc ? rc : w_u64(f, w->record_len);
			rc = rc ? rc : qtk_writer_gen_record(w, qtk_ofile_put, f);
		} else if (!rc) {
			rc = w_value(f, &d->kv[i].val);
		}
	}
	if (split && !rc) {
		/* llama.cpp's split keys: split.no u16, split.count u16, split.tensors.count i32 */
		qtk_value v = {0};
		v.type = QTK_V_U16;
		v.v.u = k;
		if (!(rc = w_str(f, "split.no", 8)) && !(rc = w_value(f, &v))) {
			v.v.u = s->nshards;
			if (!(rc = w_str(f, "split.count", 11)) && !(rc = w_value(f, &v))) {
				v.type = QTK_V_I32;
				v.v.i = (int64_t)d->ntensors;
				if (!(rc = w_str(f, "split.tensors.count", 19)))
					rc = w_value(f, &v);
			}
		}
	}
	uint64_t off = 0;
	for (size_t i = t0; i < t1 && !rc; i++) {
		const qtk_tensor *t = &d->tensors[i];
		rc = w_str(f, t->name, strlen(t->name));
		if (!rc)
			rc = w_u32(f, (uint32_t)t->ndim);
		for (int j = t->ndim - 1; j >= 0 && !rc; j--)
			rc = w_u64(f, t->shape[j]);
		if (!rc)
			rc = w_u32(f, t->parts[0].type);
		if (!rc)
			rc = w_u64(f, off);
		off += t->parts[0].nbytes + pad_to(t->parts[0].nbytes, s->align);
	}
	if (k == 0)
		s->head_len = f->written;
	if (!rc)
		rc = qtk_ofile_pad(f, pad_to(f->written, s->align));
	return rc;
}

/* The first shard's KVs and tensor infos (the provenance record is a KV). */
static int gguf_w_patch(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	gw *s = w->priv;
	return qtk_ofile_patch(&s->f[0], 0, s->head_len, fn, ctx);
}

/* A piece of the record's string where write_header put it (qtk_writer_record_piece checked
 * its bounds): rewritten in place, no read back. */
static int gguf_w_record_piece(qtk_writer *w, uint64_t at, const void *p, size_t n)
{
	gw *s = w->priv;
	return qtk_ofile_write_at(&s->f[0], s->rec_off + at, p, n);
}

/* What the writer is about to write, checked with the reader's own rules (keys, the types of
 * well-known keys, alignment, block counts, token ids and vocabulary arrays, counts), so that
 * no GGUF qtk writes is one qtk refuses to read. split.* keys are the writer's own. */
int qtk_gguf_check_meta(const qtk_model *d, const char *path, qtk_err *err)
{
	if (d->nkv + 3 > QTK_CAP_KV)
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "%zu metadata keys: readers accept at most %u", d->nkv,
				   (unsigned)QTK_CAP_KV - 3);
	if (d->ntensors > QTK_CAP_TENSORS)
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "%zu tensors: readers accept at most %llu", d->ntensors,
				   (unsigned long long)QTK_CAP_TENSORS);
	for (size_t i = 0; i < d->nkv; i++) {
		const qtk_kv *kv = &d->kv[i];
		qtk_str k = {strlen(kv->key), kv->key};
		int rc;
		if (!key_ok(&k) || k.len > QTK_CAP_KEY)
			return qtk_err_set(err, QTK_E_DATA, path, -1, kv->key,
					   "a GGUF key is printable ASCII without spaces, 1 to %u bytes", (unsigned)QTK_CAP_KEY);
		if (!strncmp(kv->key, "split.", 6))
			return qtk_err_set(err, QTK_E_DATA, path, -1, kv->key,
					   "split.* keys are written by the writer for a split set (--split-max-size)");
		if ((rc = check_key_type(err, path, (uint64_t)-1, kv->key, &kv->val)))
			return rc;
		if (!strcmp(kv->key, "general.alignment") && (rc = check_alignment(err, path, (uint64_t)-1, &kv->val)))
			return rc;
	}
	return check_kvs(d, err, path, (uint64_t)-1);
}

/* Cut the tensors into shards of at most max bytes of data (at least one tensor each). */
static int plan_shards(qtk_writer *w, gw *s)
{
	const qtk_model *d = w->desc;
	uint64_t max = w->opts.split_max_size;
	s->first = qtk_calloc(d->ntensors + 2, sizeof *s->first);
	if (!s->first)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
	uint32_t n = 0;
	uint64_t used = 0;
	s->first[0] = 0;
	for (size_t i = 0; i < d->ntensors; i++) {
		uint64_t sz = d->tensors[i].parts[0].nbytes + pad_to(d->tensors[i].parts[0].nbytes, s->align);
		if (max && used > 0 && used + sz > max) {
			s->first[++n] = i;
			used = 0;
		}
		used += sz;
	}
	s->nshards = n + 1;
	s->first[s->nshards] = d->ntensors;
	if (s->nshards > QTK_CAP_FILES)
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL,
				   "--split-max-size gives %u shards: readers accept at most %u (a larger size gives fewer)",
				   s->nshards, QTK_CAP_FILES);
	return 0;
}

static int gguf_w_begin(qtk_writer *w)
{
	const qtk_model *d = w->desc;
	gw *s = qtk_calloc(1, sizeof *s);
	if (!s)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
	w->priv = s;
	s->align = w->opts.alignment ? w->opts.alignment : GGUF_DEFAULT_ALIGN;
	const qtk_kv *al = qtk_kv_find(d, "general.alignment");
	if (al && al->val.type == QTK_V_U32)
		s->align = (uint32_t)al->val.v.u;
	int rc = qtk_gguf_check_meta(d, w->path, w->err);
	if (!rc)
		rc = plan_shards(w, s); /* what GGUF cannot store was refused by gguf_can_store */
	if (rc)
		return rc;
	s->f = qtk_calloc(s->nshards, sizeof *s->f);
	if (!s->f)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
	for (uint32_t k = 0; k < s->nshards; k++)
		s->f[k].fd = -1;
	for (uint32_t k = 0; k < s->nshards && !rc; k++) {
		char *p = NULL;
		if (s->nshards > 1) {
			/* <prefix>-00001-of-0000N.gguf, 1-based, as llama.cpp names shards */
			size_t n = strlen(w->path);
			size_t pl = n >= 5 && !qtk_strcasecmp(w->path + n - 5, ".gguf") ? n - 5 : n;
			p = qtk_malloc(pl + 32);
			if (!p)
				return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory");
			memcpy(p, w->path, pl);
			snprintf(p + pl, 32, "-%05u-of-%05u.gguf", k + 1, s->nshards);
		}
		rc = qtk_ofile_open(&s->f[k], p ? p : w->path, w->err);
		qtk_free(p);
		qtk_ofile_list(&s->f[k], w->opts.outs);
		s->f[k].defer_hash = k == 0 && w->opts.patch_pending; /* gguf_w_patch: shard 0 */
	}
	if (!rc)
		rc = write_header(w, s, 0);
	return rc;
}

static int gguf_w_part_begin(qtk_writer *w)
{
	gw *s = w->priv;
	int rc = qtk_ofile_pad(&s->f[s->cur], s->pad_after);
	s->pad_after = 0;
	if (!rc && w->cur_tensor == s->first[s->cur + 1] && s->cur + 1 < s->nshards) {
		/* the previous shard is complete: sync it now, rename at the end (the first shard
		 * waits: its header may still be patched) */
		if (s->cur > 0)
			rc = qtk_ofile_sync(&s->f[s->cur]);
		s->cur++;
		if (!rc)
			rc = write_header(w, s, s->cur);
	}
	const qtk_tensor *t = &w->desc->tensors[w->cur_tensor];
	s->pad_after = pad_to(t->parts[0].nbytes, s->align);
	return rc;
}

static int gguf_w_put(qtk_writer *w, const void *buf, size_t n)
{
	gw *s = w->priv;
	return qtk_ofile_write(&s->f[s->cur], buf, n);
}

static int gguf_w_put_file(qtk_writer *w, int fd, const char *path, uint64_t off, uint64_t n, void *back)
{
	gw *s = w->priv;
	return qtk_ofile_copy_from(&s->f[s->cur], fd, path, off, n, back);
}

static void gw_free(gw *s)
{
	for (uint32_t k = 0; s->f && k < s->nshards; k++)
		qtk_ofile_abort(&s->f[k]);
	qtk_free(s->f);
	qtk_free(s->first);
	qtk_free(s);
}

static int gguf_w_finish(qtk_writer *w)
{
	gw *s = w->priv;
	int rc = qtk_ofile_pad(&s->f[s->cur], s->pad_after);
	/* shards with no tensors left (cannot happen with at least one tensor per shard) */
	for (uint32_t k = s->cur + 1; k < s->nshards && !rc; k++)
		rc = write_header(w, s, k);
	/* everything durable first, then the renames */
	for (uint32_t k = 0; k < s->nshards && !rc; k++)
		rc = qtk_ofile_sync(&s->f[k]);
	for (uint32_t k = 0; k < s->nshards && !rc; k++)
		rc = qtk_ofile_commit(&s->f[k]);
	if (!rc) {
		gw_free(s);
		w->priv = NULL;
	}
	return rc;
}

static void gguf_w_abort(qtk_writer *w)
{
	gw *s = w->priv;
	if (!s)
		return;
	gw_free(s);
	w->priv = NULL;
}

static const qtk_writer_ops gguf_writer = {
	.begin = gguf_w_begin,
	.part_begin = gguf_w_part_begin,
	.put = gguf_w_put,
	.put_file = gguf_w_put_file,
	.finish = gguf_w_finish,
	.abort = gguf_w_abort,
	.patch_header = gguf_w_patch,
	.record_piece = gguf_w_record_piece,
	.record_gen = true,
};

/* What GGUF can store: plain ggml-typed tensors of 1 to 4 dimensions, names
 * of at most 63 bytes (llama.cpp's limit). */
static int gguf_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err)
{
	const char *subj = subject ? subject : t->name;
	if (t->layout.kind != QTK_LAYOUT_PLAIN || t->nparts != 1 || t->parts[0].type >= QTK_GGML_MAX ||
	    !qtk_type(t->parts[0].type)) {
		char lid[48];
		qtk_layout_id(&t->layout, lid, sizeof lid);
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj,
				   "layout %s cannot be stored in GGUF; choose a layout with --to", lid);
	}
	if (with_name && strlen(t->name) > GGUF_MAX_NAME)
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "tensor name longer than %u bytes", GGUF_MAX_NAME);
	if (t->ndim < 1 || t->ndim > GGUF_MAX_DIMS)
		return qtk_err_set(err, QTK_E_DATA, path, -1, subj, "%d dimensions; GGUF holds 1 to 4", t->ndim);
	return 0;
}

static const char *const gguf_ext[] = {".gguf", NULL};

const qtk_format qtk_format_gguf = {
	.name = "gguf",
	.probe = gguf_probe,
	.open = gguf_open,
	.close = gguf_close,
	.out = QTK_OUT_GGUF,
	.writer = &gguf_writer,
	.out_ext = gguf_ext,
	.can_store = gguf_can_store,
};
