/* test_qpk.c - QPK reader/writer: round trips (memory, GGUF, HF, fixtures),
 * hostile input (docs/cli.md, "Hostile input"),
 * short reads and allocation failures. */
#include "internal.h"
#include "dequant.h"
#include "scheme/bnb.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "t.h"
#include <dirent.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <fcntl.h>

/* Not in a header yet: qverify's per-tensor digest check (formats/qpk_read.c). */
int qtk_qpk_verify_tensor(qtk_model *m, size_t i);

static char tmpdir[] = "/tmp/qtk-qpk-XXXXXX";

static void sha(const void *a, size_t an, const void *c, size_t cn, uint8_t out[32]);

static char *tpath(const char *name) { return qtk_path_join(tmpdir, name); }

static uint64_t rng = 0x51504b2d74657374ull;
static uint8_t rnd8(void)
{
	return (uint8_t)(t_xorshift(&rng) >> 24);
}

static uint8_t *slurp(const char *p, size_t *n)
{
	FILE *f = fopen(p, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)len + 1);
	*n = fread(b, 1, (size_t)len, f);
	fclose(f);
	return b;
}

/* Write a file (a new inode: truncating one costs milliseconds on ext4). */
static void spit(const char *p, const void *d, size_t n)
{
	unlink(p);
	FILE *f = fopen(p, "wb");
	fwrite(d, 1, n, f);
	fclose(f);
}

static bool same_file(const char *a, const char *b)
{
	size_t na = 0, nb = 0;
	uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
	bool same = x && y && na == nb && !memcmp(x, y, na);
	free(x);
	free(y);
	return same;
}

/* ---- copying and comparing models ---- */

/* Write m to path (output kind from the path) reading parts in odd pieces. */
static int copy_model(qtk_model *m, const char *path, qtk_err *e)
{
	qtk_err_clear(e);
	qtk_writer *w = qtk_writer_open(path, qtk_out_kind_for_path(path), m, NULL, e);
	if (!w)
		return e->code;
	size_t piece = 777777;
	uint8_t *b = malloc(piece);
	int rc = 0;
	for (size_t i = 0; i < m->ntensors && !rc; i++)
		for (int p = 0; p < m->tensors[i].nparts && !rc; p++)
			for (uint64_t off = 0; off < m->tensors[i].parts[p].nbytes && !rc; off += piece) {
				uint64_t left = m->tensors[i].parts[p].nbytes - off;
				size_t k = left < piece ? (size_t)left : piece;
				rc = qtk_read_part(m, &m->tensors[i], p, off, b, k);
				if (rc)
					*e = m->err;
				else
					rc = qtk_writer_put(w, b, k);
			}
	free(b);
	if (rc) {
		qtk_writer_abort(w);
		return rc;
	}
	return qtk_writer_finish(w);
}

static int same_value(const qtk_value *a, const qtk_value *b)
{
	if (a->type != b->type || a->elem != b->elem || a->n != b->n)
		return 0;
	if (a->type == QTK_V_STR)
		return a->v.str.len == b->v.str.len && !memcmp(a->v.str.s, b->v.str.s, (size_t)a->v.str.len);
	if (a->type == QTK_V_F32 || a->type == QTK_V_F64)
		return !memcmp(&a->v.f, &b->v.f, sizeof a->v.f);
	if (a->type != QTK_V_ARR)
		return a->v.u == b->v.u;
	if (a->elem == QTK_V_STR) {
		const qtk_str *x = a->arr, *y = b->arr;
		for (uint64_t i = 0; i < a->n; i++)
			if (x[i].len != y[i].len || memcmp(x[i].s, y[i].s, (size_t)x[i].len))
				return 0;
		return 1;
	}
	return !memcmp(a->arr, b->arr, (size_t)(a->n * qtk_value_size(a->elem)));
}

static bool same_desc(const qtk_tensor *x, const qtk_tensor *y)
{
	const qtk_layout *a = &x->layout, *b = &y->layout;
	if (strcmp(x->name, y->name) || x->ndim != y->ndim || x->nparts != y->nparts || a->kind != b->kind ||
	    a->type != b->type || a->bits != b->bits || a->gptq_version != b->gptq_version || a->sym != b->sym ||
	    a->act_order != b->act_order || a->group_size != b->group_size || a->strategy != b->strategy ||
	    a->scale_type != b->scale_type || a->code_kind != b->code_kind || a->meta_len != b->meta_len ||
	    a->nested_group != b->nested_group || x->n_params != y->n_params ||
	    x->n_bytes != y->n_bytes || memcmp(x->shape, y->shape, sizeof(uint64_t) * (size_t)x->ndim))
		return false;
	for (int p = 0; p < x->nparts; p++) {
		const qtk_part *c = &x->parts[p], *d = &y->parts[p];
		if (strcmp(c->role, d->role) || c->type != d->type || c->ndim != d->ndim || c->nbytes != d->nbytes ||
		    memcmp(c->shape, d->shape, sizeof(uint64_t) * (size_t)c->ndim))
			return false;
	}
	return true;
}

enum { CMP_KV = 1, CMP_BLOBS = 2, CMP_LAYOUT = 4, CMP_ALL = 7, CMP_NODATA = 8 };

/* Tensors (bytes of every part, and the description with CMP_LAYOUT), kvs
 * and blobs (values, types and order) of a and b are equal. */
static void check_same(qtk_model *a, qtk_model *b, const char *what, int how)
{
	CHECK(a->ntensors == b->ntensors, "%s: %zu vs %zu tensors", what, a->ntensors, b->ntensors);
	if (how & CMP_KV) {
		CHECK(a->nkv == b->nkv, "%s: %zu vs %zu kvs", what, a->nkv, b->nkv);
		int bad = 0;
		for (size_t i = 0; i < a->nkv && i < b->nkv; i++)
			if (strcmp(a->kv[i].key, b->kv[i].key) || !same_value(&a->kv[i].val, &b->kv[i].val))
				bad++;
		CHECK(!bad, "%s: %d kvs differ", what, bad);
	}
	if (how & CMP_BLOBS) {
		CHECK(a->nblobs == b->nblobs, "%s: %zu vs %zu blobs", what, a->nblobs, b->nblobs);
		int bad = 0;
		for (size_t i = 0; i < a->nblobs && i < b->nblobs; i++)
			if (strcmp(a->blobs[i].name, b->blobs[i].name) || a->blobs[i].len != b->blobs[i].len ||
			    memcmp(a->blobs[i].data, b->blobs[i].data, a->blobs[i].len))
				bad++;
		CHECK(!bad, "%s: %d blobs differ", what, bad);
	}
	if (a->ntensors != b->ntensors || (how & CMP_NODATA))
		return;
	int bad = 0, baddesc = 0;
	for (size_t i = 0; i < a->ntensors; i++) {
		const qtk_tensor *x = &a->tensors[i], *y = &b->tensors[i];
		if ((how & CMP_LAYOUT) && !same_desc(x, y)) {
			if (!baddesc++)
				printf("  first differing description: %s / %s\n", x->name, y->name);
		}
		if (x->nparts != y->nparts) {
			bad++;
			continue;
		}
		for (int p = 0; p < x->nparts; p++) {
			uint8_t *u = NULL, *v = NULL;
			if (x->parts[p].nbytes != y->parts[p].nbytes || qtk_read_part_alloc(a, x, p, &u) ||
			    qtk_read_part_alloc(b, y, p, &v) || memcmp(u, v, (size_t)x->parts[p].nbytes)) {
				if (!bad)
					printf("  first differing data: %s part %d (%s / %s)\n", x->name, p, a->err.msg,
					       b->err.msg);
				bad++;
			}
			free(u);
			free(v);
		}
	}
	CHECK(!baddesc, "%s: %d tensor descriptions differ", what, baddesc);
	CHECK(!bad, "%s: %d tensor parts differ", what, bad);
}

/* ---- an in-memory model with every kind of content ---- */

typedef struct mem {
	qtk_model *m;
	uint8_t *data[64][QTK_MAX_PARTS];
} mem;

static void set_part(qtk_tensor *t, int p, const char *role, unsigned type, int nd, uint64_t d0, uint64_t d1)
{
	qtk_part *q = &t->parts[p];
	snprintf(q->role, sizeof q->role, "%s", role);
	q->type = type;
	q->ndim = nd;
	q->shape[0] = d0;
	q->shape[1] = d1;
	uint64_t n = nd == 0 ? 1 : nd == 1 ? d0 : d0 * d1;
	qtk_type_nbytes(type, n, &q->nbytes);
	if (p + 1 > t->nparts)
		t->nparts = p + 1;
}

static qtk_tensor *plain(qtk_model *m, const char *name, unsigned type, int nd, uint64_t d0, uint64_t d1)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	t->ndim = nd;
	t->shape[0] = d0;
	t->shape[1] = d1;
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = type;
	t->layout.bits = qtk_type(type)->code_bits;
	t->layout.group_size = qtk_type(type)->group;
	set_part(t, 0, "", type, nd, d0, d1);
	qtk_tensor_finish(t);
	return t;
}

/* An AWQ [out, in] group g tensor (4 bits). */
static qtk_tensor *awq(qtk_model *m, const char *name, uint64_t out, uint64_t in, uint32_t g)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	t->ndim = 2;
	t->shape[0] = out;
	t->shape[1] = in;
	t->layout = (qtk_layout){QTK_LAYOUT_AWQ, QTK_T_I32, 4, 0, false, false, g, 0, 0, 0, 0, 0};
	set_part(t, 0, "qweight", QTK_T_I32, 2, in, out / 8);
	set_part(t, 1, "qzeros", QTK_T_I32, 2, in / g, out / 8);
	set_part(t, 2, "scales", QTK_T_F16, 2, in / g, out);
	qtk_tensor_finish(t);
	return t;
}

static qtk_tensor *gptq(qtk_model *m, const char *name, uint64_t out, uint64_t in, uint32_t g, uint8_t bits,
			uint8_t ver, bool act, bool gidx)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	t->ndim = 2;
	t->shape[0] = out;
	t->shape[1] = in;
	t->layout = (qtk_layout){QTK_LAYOUT_GPTQ, QTK_T_I32, bits, ver, !act, act, g, 0, 0, 0, 0, 0};
	set_part(t, 0, "qweight", QTK_T_I32, 2, in * bits / 32, out);
	set_part(t, 1, "qzeros", QTK_T_I32, 2, in / g, out * bits / 32);
	set_part(t, 2, "scales", QTK_T_F16, 2, in / g, out);
	if (gidx)
		set_part(t, 3, "g_idx", QTK_T_I32, 1, in, 0);
	qtk_tensor_finish(t);
	return t;
}

/* g_idx data: a group map; permuted (act-order) when act. */
static void fill_gidx(uint8_t *b, uint64_t in, uint32_t g, bool act)
{
	for (uint64_t i = 0; i < in; i++) {
		uint64_t j = act ? (i * 37 + 11) % in : i; /* 37 is prime to every in used here */
		qtk_wr32(b + 4 * i, (uint32_t)(j / g));
	}
}

static void add_kvs(qtk_model *m)
{
	static const uint8_t ty[] = {QTK_V_U8, QTK_V_I8, QTK_V_U16, QTK_V_I16, QTK_V_U32, QTK_V_I32,
				     QTK_V_F32, QTK_V_BOOL, QTK_V_U64, QTK_V_I64, QTK_V_F64};
	char key[64];
	qtk_model_set_kv_str(m, "general.architecture", "llama");
	for (size_t i = 0; i < sizeof ty; i++) {
		snprintf(key, sizeof key, "test.scalar.%s", qtk_value_type_name(ty[i]));
		qtk_kv *kv = qtk_model_add_kv(m, key);
		kv->val.type = ty[i];
		if (ty[i] == QTK_V_F32)
			kv->val.v.f = (double)-1.25f;
		else if (ty[i] == QTK_V_F64)
			kv->val.v.f = 3.141592653589793;
		else if (ty[i] == QTK_V_BOOL)
			kv->val.v.u = 1;
		else if (ty[i] == QTK_V_I8 || ty[i] == QTK_V_I16 || ty[i] == QTK_V_I32 || ty[i] == QTK_V_I64)
			kv->val.v.i = -7 - (int64_t)i;
		else
			kv->val.v.u = 200 + i;
		snprintf(key, sizeof key, "test.array.%s", qtk_value_type_name(ty[i]));
		kv = qtk_model_add_kv(m, key);
		kv->val.type = QTK_V_ARR;
		kv->val.elem = ty[i];
		kv->val.n = 5;
		size_t sz = qtk_value_size(ty[i]);
		kv->val.arr = qtk_malloc(5 * sz);
		for (size_t k = 0; k < 5 * sz; k++)
			((uint8_t *)kv->val.arr)[k] = ty[i] == QTK_V_BOOL ? (uint8_t)(k & 1) : (uint8_t)(k * 29 + i);
	}
	qtk_kv *kv = qtk_model_add_kv(m, "tokenizer.ggml.tokens");
	kv->val.type = QTK_V_ARR;
	kv->val.elem = QTK_V_STR;
	kv->val.n = 1000;
	qtk_str *s = qtk_calloc(1000, sizeof *s);
	kv->val.arr = s;
	for (int i = 0; i < 1000; i++) {
		char t[32];
		int n = snprintf(t, sizeof t, "tok%d", i);
		if (i == 7) /* an interior NUL survives */
			t[1] = 0;
		s[i].len = i == 999 ? 0 : (uint64_t)n;
		s[i].s = qtk_strndup(t, (size_t)s[i].len);
	}
	kv = qtk_model_add_kv(m, "test.array.empty");
	kv->val.type = QTK_V_ARR;
	kv->val.elem = QTK_V_I32;
	kv->val.arr = qtk_malloc(1);
	qtk_model_set_kv_str(m, "test.utf8", "caf\xc3\xa9 \xe2\x9c\x93");
	qtk_model_set_kv_str(m, "qtk.provenance", "{\"record_version\":\"0.1\",\"transform\":{\"kind\":\"repack\"}}");
}

/* The model: plain tensors of several types (a 9 MiB one spanning three
 * chunks, an empty one, a scalar), AWQ, GPTQ with and without act-order. */
static void build_mem(mem *mm)
{
	memset(mm, 0, sizeof *mm);
	qtk_model *m = mm->m = qtk_model_new();
	m->alignment = 32;
	add_kvs(m);
	static const char cfg[] = "{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 64\n}\n";
	qtk_model_add_blob(m, "config.json", cfg, sizeof cfg - 1);
	char tok[20000];
	for (size_t i = 0; i < sizeof tok; i++)
		tok[i] = "{\"vocab\": [\"a\", \"b\"]}\n"[i % 23];
	qtk_model_add_blob(m, "tokenizer.json", tok, sizeof tok);
	qtk_model_add_blob(m, "LICENSE", "", 0);
	plain(m, "token_embd.weight", QTK_T_F16, 2, 64, 64);
	plain(m, "norm.weight", QTK_T_F32, 1, 64, 0);
	plain(m, "blk.0.attn_q.weight", QTK_T_Q4_0, 2, 8, 64);
	plain(m, "blk.0.ffn.weight", QTK_T_Q6_K, 2, 2, 256);
	plain(m, "big.bytes", QTK_DT_U8, 1, 9u << 20, 0);
	plain(m, "empty", QTK_T_F32, 1, 0, 0);
	plain(m, "scalar", QTK_T_F32, 0, 0, 0);
	awq(m, "model.layers.0.mlp.up_proj.weight", 64, 128, 64);
	gptq(m, "model.layers.0.self_attn.q_proj.weight", 32, 64, 32, 4, 1, true, true);
	gptq(m, "model.layers.0.self_attn.k_proj.weight", 32, 64, 32, 3, 2, false, true);
	gptq(m, "model.layers.0.self_attn.v_proj.weight", 32, 64, 16, 8, 1, false, false);
	for (size_t i = 0; i < m->ntensors; i++) {
		qtk_tensor *t = &m->tensors[i];
		for (int p = 0; p < t->nparts; p++) {
			uint64_t n = t->parts[p].nbytes;
			uint8_t *b = mm->data[i][p] = malloc(n ? (size_t)n : 1);
			if (!strcmp(t->parts[p].role, "g_idx")) {
				fill_gidx(b, t->shape[1], t->layout.group_size, t->layout.act_order);
				continue;
			}
			for (uint64_t k = 0; k < n; k++) /* compressible, random, then text-like */
				b[k] = k < (4u << 20)	? (uint8_t)((k / 4096) & 3)
				       : k < (8u << 20) ? rnd8()
							: (uint8_t)('a' + k % 7);
		}
	}
}

static void free_mem(mem *mm)
{
	for (size_t i = 0; i < mm->m->ntensors; i++)
		for (int p = 0; p < QTK_MAX_PARTS; p++)
			free(mm->data[i][p]);
	qtk_close(mm->m);
}

/* The writer's threads (qtk_write_opts.threads) for write_mem_outs. */
static int wthreads;

/* Write mm's model to path, putting bytes in pieces of `piece`; committed
 * files are recorded in outs when it is not NULL. */
static int write_mem_outs(const mem *mm, const char *path, size_t piece, qtk_err *e, qtk_outlist *outs)
{
	qtk_err_clear(e);
	qtk_write_opts o = {0};
	o.outs = outs;
	o.threads = wthreads;
	qtk_writer *w = qtk_writer_open(path, QTK_OUT_QPK, mm->m, &o, e);
	if (!w)
		return e->code;
	for (size_t i = 0; i < mm->m->ntensors; i++)
		for (int p = 0; p < mm->m->tensors[i].nparts; p++) {
			uint64_t n = mm->m->tensors[i].parts[p].nbytes;
			for (uint64_t off = 0; off < n; off += piece) {
				size_t k = n - off < piece ? (size_t)(n - off) : piece;
				int rc = qtk_writer_put(w, mm->data[i][p] + off, k);
				if (rc) {
					qtk_writer_abort(w);
					return rc;
				}
			}
		}
	return qtk_writer_finish(w);
}

static int write_mem(const mem *mm, const char *path, size_t piece, qtk_err *e)
{
	return write_mem_outs(mm, path, piece, e, NULL);
}

/* The opened model holds mm's data at random offsets too. */
static void check_mem_data(const mem *mm, qtk_model *m, const char *what)
{
	int bad = 0;
	uint8_t *b = malloc(10u << 20);
	for (size_t i = 0; i < mm->m->ntensors && i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		for (int p = 0; p < t->nparts; p++) {
			uint64_t n = t->parts[p].nbytes;
			if (n && (qtk_read_part(m, t, p, 0, b, (size_t)n) || memcmp(b, mm->data[i][p], (size_t)n)))
				bad++;
			/* random access, across chunk boundaries, backwards */
			for (int r = 0; r < 6 && n > 2; r++) {
				uint64_t off = ((n / 7) * (uint64_t)(6 - r) + (uint64_t)r) % n;
				uint64_t len = n - off < 5000000 ? n - off : 5000000;
				if (qtk_read_part(m, t, p, off, b, (size_t)len) || memcmp(b, mm->data[i][p] + off, (size_t)len))
					bad++;
			}
		}
		if (qtk_qpk_verify_tensor(m, i))
			bad++;
	}
	free(b);
	CHECK(!bad, "%s: %d data mismatches (%s)", what, bad, m->err.msg);
}

typedef struct rdjob {
	const mem *mm;
	qtk_model *m;
	int seed, bad;
} rdjob;

/* Read every part in 100000-byte pieces, in a thread-specific order. */
static void *reader(void *arg)
{
	rdjob *j = arg;
	uint8_t *b = malloc(100000);
	size_t nt = j->m->ntensors;
	for (size_t k = 0; k < nt; k++) {
		size_t i = (k * 7 + (size_t)j->seed * 3) % nt;
		const qtk_tensor *t = &j->m->tensors[i];
		for (int p = 0; p < t->nparts; p++)
			for (uint64_t off = 0; off < t->parts[p].nbytes; off += 100000) {
				uint64_t left = t->parts[p].nbytes - off;
				size_t n = left < 100000 ? (size_t)left : 100000;
				if (qtk_read_part(j->m, t, p, off, b, n) || memcmp(b, j->mm->data[i][p] + off, n))
					j->bad++;
			}
	}
	free(b);
	return NULL;
}

/* Concurrent readers of one model get the right bytes (run under TSan too). */
static void check_threads(const mem *mm, qtk_model *m)
{
	pthread_t th[4];
	rdjob j[4];
	for (int k = 0; k < 4; k++) {
		j[k] = (rdjob){mm, m, k, 0};
		pthread_create(&th[k], NULL, reader, &j[k]);
	}
	int bad = 0;
	for (int k = 0; k < 4; k++) {
		pthread_join(th[k], NULL);
		bad += j[k].bad;
	}
	CHECK(!bad, "threaded reads: %d mismatches", bad);
}

/* A tee that compares the bytes it sees, in order, with the expected stream. */
typedef struct teecmp {
	const uint8_t *want;
	size_t n, pos;
	int bad;
} teecmp;

static int tee_cmp(void *ctx, size_t tensor, const void *buf, size_t n)
{
	(void)tensor;
	teecmp *c = ctx;
	if (n > c->n - c->pos || memcmp(buf, c->want + c->pos, n))
		c->bad++;
	c->pos += n <= c->n - c->pos ? n : 0;
	return 0;
}

static void test_memory_roundtrip(void)
{
	mem mm;
	build_mem(&mm);
	char *p1 = tpath("mem.qpk"), *p2 = tpath("mem2.qpk");
	qtk_err e;
	int rc = write_mem(&mm, p1, 12345, &e);
	CHECK(rc == 0, "write: %s", e.msg);
	qtk_model *m = qtk_open(p1, &e);
	CHECK(m != NULL, "open: %s", e.msg);
	if (m) {
		CHECK(!strcmp(qtk_model_format(m), "qpk"), "format %s", qtk_model_format(m));
		CHECK(m->format_version == 1 && m->alignment == 32, "version %d alignment %u", m->format_version,
		      m->alignment);
		check_same(mm.m, m, "memory -> qpk", CMP_KV | CMP_BLOBS | CMP_NODATA);
		int baddesc = 0;
		for (size_t i = 0; i < m->ntensors; i++)
			baddesc += !same_desc(&mm.m->tensors[i], &m->tensors[i]);
		CHECK(!baddesc, "%d descriptions differ", baddesc);
		check_mem_data(&mm, m, "memory -> qpk");
		check_threads(&mm, m);
		const qtk_kv *pv = qtk_kv_find(m, "qtk.provenance");
		CHECK(pv && pv->val.type == QTK_V_STR && strstr(pv->val.v.str.s, "repack"), "provenance kv");
		const qtk_tensor *g = qtk_tensor_find(m, "model.layers.0.self_attn.q_proj.weight");
		CHECK(g && g->layout.act_order && g->nparts == 4 && g->layout.gptq_version == 1, "act-order gptq");
		/* a copied tensor description (renamed) reads through its offsets */
		qtk_tensor copy = QTK_TENSOR_LOCAL;
		qtk_tensor_copy(&copy, g);
		copy.name = "renamed";
		uint8_t b[256];
		CHECK(qtk_read_part(m, &copy, 3, 0, b, 256) == 0 && !memcmp(b, mm.data[8][3], 256), "copied desc read");
		struct stat st;
		stat(p1, &st);
		uint64_t raw = 0;
		for (size_t i = 0; i < m->ntensors; i++)
			raw += m->tensors[i].n_bytes;
		CHECK((uint64_t)st.st_size < raw - (3u << 20), "compression: file %lld bytes for %llu raw",
		      (long long)st.st_size, (unsigned long long)raw);
	}
	/* deterministic: the same bytes for another put pattern; outs names the file */
	qtk_outlist outs = {0};
	rc = write_mem_outs(&mm, p2, 1 << 20, &e, &outs);
	CHECK(rc == 0 && same_file(p1, p2), "deterministic output");
	size_t fn = 0;
	uint8_t *fb = slurp(p2, &fn), fs[32];
	if (fb)
		sha(fb, fn, NULL, 0, fs);
	CHECK(outs.n == 1 && fb && !strcmp(outs.f[0].path, p2) && outs.f[0].size == fn && !memcmp(outs.f[0].sha256, fs, 32),
	      "outs: %zu files", outs.n);
	free(fb);
	qtk_outlist_free(&outs);
	/* the same bytes when chunks are compressed on workers (empty and one-chunk parts between
	 * three-chunk ones: each part's offset waits for the chunks before it) */
	int wt[] = {2, 3, 4, 9};
	for (int k = 0; k < 4; k++) {
		wthreads = wt[k];
		rc = write_mem(&mm, p2, k & 1 ? 4096 : 3u << 20, &e);
		CHECK(rc == 0 && same_file(p1, p2), "%d writer threads: same bytes (%s)", wt[k], e.msg);
	}
	wthreads = 0;
	/* the same bytes when the data comes from a file (qtk_writer_put_file: read straight into
	 * the writer's chunk), without and with a tee (which is given the bytes), in pieces across
	 * chunks, with no workers and with 3 */
	{
		char *flat = tpath("flat.bin");
		FILE *ff = fopen(flat, "wb");
		uint64_t at[64][QTK_MAX_PARTS], pos = 0;
		for (size_t i = 0; ff && i < mm.m->ntensors; i++)
			for (int p = 0; p < mm.m->tensors[i].nparts; p++) {
				uint64_t n = mm.m->tensors[i].parts[p].nbytes;
				at[i][p] = pos;
				if (n)
					fwrite(mm.data[i][p], 1, (size_t)n, ff);
				pos += n;
			}
		if (ff)
			fclose(ff);
		size_t flen = 0;
		uint8_t *fbytes = slurp(flat, &flen);
		int fd = open(flat, O_RDONLY);
		uint8_t *back = malloc(1u << 20);
		for (int k = 0; k < 4 && fd >= 0 && back && fbytes; k++) {
			qtk_write_opts o = {0};
			o.threads = k < 2 ? 0 : 3;
			teecmp tc = {fbytes, flen, 0, 0};
			if (k & 1) {
				o.tee = tee_cmp;
				o.tee_ctx = &tc;
			}
			qtk_writer *w = qtk_writer_open(p2, QTK_OUT_QPK, mm.m, &o, &e);
			rc = w ? 0 : e.code;
			for (size_t i = 0; !rc && i < mm.m->ntensors; i++)
				for (int p = 0; !rc && p < mm.m->tensors[i].nparts; p++) {
					uint64_t n = mm.m->tensors[i].parts[p].nbytes;
					for (uint64_t off = 0; !rc && off < n; off += 1000000) {
						size_t q = n - off < 1000000 ? (size_t)(n - off) : 1000000;
						rc = qtk_writer_put_file(w, fd, flat, at[i][p] + off, q, back);
					}
				}
			if (w && rc)
				qtk_writer_abort(w);
			else if (w)
				rc = qtk_writer_finish(w);
			CHECK(rc == 0 && same_file(p1, p2) && !tc.bad && tc.pos == (k & 1 ? flen : 0),
			      "put_file (tee %d, threads %d): %d, same bytes, tee saw %zu of %zu, %d wrong (%s)", k & 1,
			      o.threads, rc, tc.pos, flen, tc.bad, e.msg);
		}
		free(back);
		free(fbytes);
		if (fd >= 0)
			close(fd);
		unlink(flat);
		free(flat);
	}
	/* QPK -> QPK through the reader is a fixpoint */
	if (m) {
		rc = copy_model(m, p2, &e);
		CHECK(rc == 0 && same_file(p1, p2), "qpk -> qpk fixpoint: %s", e.msg);
	}
	qtk_close(m);
	/* short reads */
	size_t chunks[] = {1, 7, 31};
	for (int k = 0; k < 3; k++) {
		qtk_test_max_read(chunks[k]);
		m = qtk_open(p1, &e);
		CHECK(m != NULL, "short reads of %zu: %s", chunks[k], e.msg);
		if (m && k == 2) /* reading 10 MiB one byte at a time is slow */
			check_mem_data(&mm, m, "short reads");
		qtk_close(m);
	}
	qtk_test_max_read(0);
	unlink(p1);
	unlink(p2);
	free(p1);
	free(p2);
	free_mem(&mm);
}

/* A tensor chunk larger than 256 KiB is compressed only when a trial frame of four 16 KiB
 * slices of it saves at least 1/8: bytes that compress like F16 weights (each one of 160
 * values: a level-1 frame saves about 8.5%, over the 1/16 a frame must save to be kept) are stored raw in chunks of 4 MiB but compressed in a chunk of 256 KiB, which is
 * compressed whole as before; zeros are compressed. The stored bytes are measured against what
 * zstd makes of the same bytes. */
/* An empty model for mm, aligned to 32. */
static qtk_model *mem_new(mem *mm)
{
	memset(mm, 0, sizeof *mm);
	mm->m = qtk_model_new();
	mm->m->alignment = 32;
	return mm->m;
}

static void test_trial(void)
{
	mem mm;
	qtk_model *m = mem_new(&mm);
	plain(m, "f16like", QTK_DT_U8, 1, 8u << 20, 0);
	plain(m, "small", QTK_DT_U8, 1, 256u << 10, 0);
	plain(m, "zeros", QTK_DT_U8, 1, 4u << 20, 0);
	size_t sz[3] = {8u << 20, 256u << 10, 4u << 20}, zn[3];
	for (int i = 0; i < 3; i++) {
		uint8_t *b = mm.data[i][0] = calloc(sz[i], 1);
		for (size_t k = 0; i < 2 && k < sz[i]; k++)
			b[k] = (uint8_t)(rnd8() % 160);
		size_t cap = ZSTD_compressBound(sz[i]);
		uint8_t *z = malloc(cap);
		zn[i] = ZSTD_compress(z, cap, b, sz[i], 1);
		free(z);
	}
	CHECK(zn[0] < sz[0] - sz[0] / 16 && zn[0] > sz[0] - sz[0] / 8 && zn[1] < sz[1] - sz[1] / 16,
	      "the F16-like bytes save between 1/16 and 1/8: %zu of %zu", zn[0], sz[0]);
	char *p = tpath("trial.qpk");
	qtk_err e;
	for (int th = 1; th <= 3; th += 2) {
		wthreads = th;
		int rc = write_mem(&mm, p, 1u << 20, &e);
		CHECK(rc == 0, "write: %s", e.msg);
		struct stat st;
		stat(p, &st);
		uint64_t lo = sz[0] + zn[1], hi = lo + zn[2] + (16u << 10);
		CHECK((uint64_t)st.st_size >= lo && (uint64_t)st.st_size <= hi,
		      "%d threads: %lld bytes stored, not %llu-%llu (raw 4 MiB chunks, zstd for 256 KiB and zeros)",
		      th, (long long)st.st_size, (unsigned long long)lo, (unsigned long long)hi);
		qtk_model *r = qtk_open(p, &e);
		CHECK(r != NULL, "open: %s", e.msg);
		if (r)
			check_mem_data(&mm, r, "trial");
		qtk_close(r);
	}
	wthreads = 0;
	unlink(p);
	free(p);
	free_mem(&mm);
}

/* Reads with their part checks on a thread of their own (qtk_read_verify_async): a good file
 * reads back the same and settles with 0; a flipped byte in a raw chunk makes the reads that
 * end the part succeed, qtk_read_settle report the mismatch naming the tensor, and every read
 * after it fail the same way. Without the thread the read that ends the part fails. */
static void test_verify_async(void)
{
	mem mm;
	qtk_model *m = mem_new(&mm);
	plain(m, "first", QTK_DT_U8, 1, 6u << 20, 0);
	plain(m, "second", QTK_DT_U8, 1, 3u << 20, 0);
	size_t sz[2] = {6u << 20, 3u << 20};
	for (int i = 0; i < 2; i++) {
		mm.data[i][0] = malloc(sz[i]);
		for (size_t k = 0; k < sz[i]; k++)
			mm.data[i][0][k] = rnd8();
	}
	char *p = tpath("async.qpk");
	qtk_err e;
	CHECK(write_mem(&mm, p, 1u << 20, &e) == 0, "write: %s", e.msg);
	uint8_t *b = malloc(sz[0]);
	for (int flip = 0; flip < 2; flip++) {
		if (flip) { /* a byte 5 MiB into the first part, in its second (raw) chunk */
			qtk_model *r = qtk_open(p, &e);
			uint64_t at = r ? r->tensors[0].parts[0].offset + (5u << 20) : 0;
			qtk_close(r);
			size_t n = 0;
			uint8_t *f = slurp(p, &n);
			if (f && at < n) {
				f[at] ^= 0x20;
				spit(p, f, n);
			}
			free(f);
		}
		for (int async = 0; async < 2; async++) {
			qtk_model *r = qtk_open(p, &e);
			CHECK(r != NULL, "open: %s", e.msg);
			if (!r)
				continue;
			if (async)
				qtk_read_verify_async(r);
			int rc = 0;
			for (uint64_t off = 0; off < sz[0] && !rc; off += 1u << 20)
				rc = qtk_read_part(r, &r->tensors[0], 0, off, b + off, 1u << 20);
			if (!flip || async)
				CHECK(rc == 0 && (flip || !memcmp(b, mm.data[0][0], sz[0])), "flip %d async %d: reads %d (%s)",
				      flip, async, rc, r->err.msg);
			else
				CHECK(rc == QTK_E_DATA && strstr(r->err.msg, "digest mismatch"), "in-thread check: %d %s", rc,
				      r->err.msg);
			int st = qtk_read_settle(r);
			if (!flip || !async) {
				CHECK(st == 0, "flip %d async %d: settle %d (%s)", flip, async, st, r->err.msg);
			} else {
				CHECK(st == QTK_E_DATA && strstr(r->err.msg, "digest mismatch") && !strcmp(r->err.subject, "first"),
				      "settle: %d %s", st, r->err.msg);
				rc = qtk_read_part(r, &r->tensors[1], 0, 0, b, 4096);
				CHECK(rc == QTK_E_DATA && !strcmp(r->err.subject, "first"), "a read after the mismatch: %d %s", rc,
				      r->err.msg);
			}
			qtk_close(r);
		}
	}
	free(b);
	unlink(p);
	free(p);
	free_mem(&mm);
}

/* Sequential reads decompress the next zstd chunk ahead, on a thread of their own: a file of
 * many compressed chunks reads back the same, and a damaged chunk that was read ahead is
 * reported by the read that reaches it, naming its tensor, with every part before it intact. */
static void test_read_ahead(void)
{
	qtk_model *src = qtk_model_new();
	enum { NT = 6 };
	uint8_t *data[NT];
	for (int i = 0; i < NT; i++) {
		char name[32];
		snprintf(name, sizeof name, "t%d", i);
		plain(src, name, QTK_DT_U8, 1, (5u << 20) + (uint64_t)i * 1000, 0); /* 2 chunks each */
		size_t n = (size_t)src->tensors[i].parts[0].nbytes;
		data[i] = malloc(n);
		for (size_t k = 0; k < n; k++)
			data[i][k] = (uint8_t)((k / 512 + (size_t)i) % 5 * 51 + (k % 3)); /* compressible */
	}
	char *p = tpath("ahead.qpk");
	qtk_err e;
	qtk_writer *w = qtk_writer_open(p, QTK_OUT_QPK, src, NULL, &e);
	int rc = w ? 0 : 1;
	for (int i = 0; i < NT && !rc; i++)
		rc = qtk_writer_put(w, data[i], (size_t)src->tensors[i].parts[0].nbytes);
	rc = rc ? rc : qtk_writer_finish(w);
	CHECK(!rc, "read-ahead model written: %s", e.msg);
	uint8_t *b = malloc(1u << 20);
	for (int pass = 0; pass < 2 && !rc; pass++) {
		size_t fn = 0;
		uint8_t *fb = slurp(p, &fn);
		qtk_model *m = NULL;
		if (pass == 1 && fb) { /* damage the frame of t4's second chunk: after its magic and header */
			qtk_model *m0 = qtk_open(p, &e);
			const qtk_tensor *t4 = m0 ? qtk_tensor_find(m0, "t4") : NULL;
			uint64_t at = t4 ? t4->parts[0].offset : 0;
			qtk_close(m0);
			/* the first chunk's frame is smaller than 4 MiB: find the second frame's magic */
			for (uint64_t k = at + 4; t4 && k + 64 < fn; k++)
				if (qtk_rd32(fb + k) == 0xFD2FB528u) {
					for (int j = 16; j < 48; j++)
						fb[k + (uint64_t)j] ^= 0x5a;
					break;
				}
			spit(p, fb, fn);
		}
		free(fb);
		m = qtk_open(p, &e);
		CHECK(m != NULL, "read-ahead open, pass %d: %s", pass, e.msg);
		qtk_test_qpk_ahead_used(true);
		int bad = 0, failed_at = -1;
		for (int i = 0; m && i < NT && failed_at < 0; i++) {
			const qtk_tensor *t = &m->tensors[i];
			uint64_t n = t->parts[0].nbytes;
			for (uint64_t off = 0; off < n; off += 1u << 20) {
				size_t k = n - off < (1u << 20) ? (size_t)(n - off) : 1u << 20;
				int r = qtk_read_part(m, t, 0, off, b, k);
				if (r) {
					failed_at = i;
					CHECK(r == QTK_E_DATA && !strcmp(m->err.subject, "t4") && m->err.offset > 0, "damaged chunk: %d %s: %s", r,
				      m->err.subject, m->err.msg);
					break;
				}
				bad += memcmp(b, data[i] + off, k) != 0;
			}
		}
		CHECK(!bad, "read-ahead pass %d: %d pieces differ", pass, bad);
		CHECK(failed_at == (pass ? 4 : -1), "read-ahead pass %d: failed at tensor %d", pass, failed_at);
		/* 12 chunks: the first two are loaded in turn, every later one was read ahead; with the
		 * damage, the 7 before the damaged one (the 10th) */
		unsigned long used = qtk_test_qpk_ahead_used(false);
		CHECK(used == (pass ? 7u : 2u * NT - 2), "read-ahead pass %d: %lu chunks read ahead", pass, used);
		qtk_close(m);
	}
	free(b);
	unlink(p);
	free(p);
	for (int i = 0; i < NT; i++)
		free(data[i]);
	qtk_close(src);
}

/* The writer refuses descriptions the reader would reject. */
static void test_writer_rejects(void)
{
	qtk_err e;
	char *p = tpath("rej.qpk");
	struct {
		const char *what, *want;
	} cases[] = {
		{"bits", "bits 7"}, {"group", "group_size 48 does not divide"}, {"part shape", "part 'scales' shape"},
		{"dup tensor", "duplicate tensor name"}, {"dup key", "duplicate key"}, {"blob name", "plain file name"},
		{"awq bits", "awq (gemm) packing holds 4-bit"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		qtk_model *m = qtk_model_new();
		qtk_tensor *t = gptq(m, "w", 32, 64, 32, 4, 1, false, true);
		switch (c) {
		case 0: t->layout.bits = 7; break;
		case 1: t->layout.group_size = 48; break;
		case 2: t->parts[2].shape[1] = 16; t->parts[2].nbytes = 64; break;
		case 3: gptq(m, "w", 32, 64, 32, 4, 1, false, true); break;
		case 4: qtk_model_add_kv(m, "a")->val.type = QTK_V_U8; qtk_model_add_kv(m, "a")->val.type = QTK_V_U8; break;
		case 5: qtk_model_add_blob(m, "../etc/passwd", "x", 1); break;
		case 6: awq(m, "a", 64, 128, 64)->layout.bits = 8; break;
		}
		qtk_err_clear(&e);
		qtk_writer *w = qtk_writer_open(p, QTK_OUT_QPK, m, NULL, &e);
		CHECK(!w && e.code == QTK_E_DATA && strstr(e.msg, cases[c].want), "writer %s: %d %s", cases[c].what,
		      e.code, e.msg);
		qtk_writer_abort(w);
		qtk_close(m);
	}
	/* g_idx content is checked while streaming */
	qtk_model *m = qtk_model_new();
	gptq(m, "w", 32, 64, 32, 4, 1, false, true);
	qtk_err_clear(&e);
	qtk_writer *w = qtk_writer_open(p, QTK_OUT_QPK, m, NULL, &e);
	uint8_t z[1024] = {0}, gi[256];
	fill_gidx(gi, 64, 32, true); /* permuted, but act_order is not set */
	int rc = w ? 0 : -1;
	for (int k = 0; k < 3 && !rc; k++)
		rc = qtk_writer_put(w, z, (size_t)m->tensors[0].parts[k].nbytes);
	if (!rc)
		rc = qtk_writer_put(w, gi, sizeof gi);
	if (!rc)
		rc = qtk_writer_finish(w);
	else
		qtk_writer_abort(w);
	CHECK(rc == QTK_E_DATA && strstr(e.msg, "act_order is not set"), "writer g_idx: %d %s", rc, e.msg);
	CHECK(!qtk_path_exists(p), "no output left behind");
	qtk_close(m);
	free(p);
}

/* ---- an independent builder of QPK files (formats/qpk.md) for hostile cases ---- */

typedef struct tpart {
	char role[8];
	unsigned type;
	int ndim;
	uint64_t shape[4];
	uint8_t data[4096];
	uint64_t n;        /* raw bytes */
	uint64_t raw_field;/* Raw_Size written (defaults to n) */
	int codec;         /* 0 raw; 1 zstd; 2 zstd without checksum; 3 zstd + garbage; 4 zstd, size lies */
	bool off_set;
	uint64_t off;      /* forced Offset */
	bool bad_sha;
	size_t pad_before; /* extra zero bytes before the part (a gap) */
} tpart;

typedef struct ttensor {
	const char *name;
	uint8_t kind, bits, gv, flags;
	unsigned type;
	uint32_t group;
	int ndim;
	uint64_t shape[3];
	int nparts;
	tpart p[8];
	bool bad_tsha;
	bool params;      /* Layout_Params written (kinds 3-6, 8, 9) */
	uint8_t lp[12];   /* their bytes */
} ttensor;

typedef struct tfile {
	ttensor t[3];
	int nt;
	uint64_t count; /* Tensor_Count written (defaults to nt) */
	qtk_buf meta;   /* raw metadata section */
	uint16_t major;
	uint32_t align;
	uint8_t chunk_log;
	bool index_garbage;
	bool index_gap;  /* 128 zero bytes between the data and the index */
	bool meta_zstd;  /* the metadata section stored as one zstd frame */
} tfile;

static void b64(qtk_buf *b, uint64_t v) { uint8_t x[8]; qtk_wr64(x, v); qtk_buf_put(b, x, 8); }
static void b32(qtk_buf *b, uint32_t v) { uint8_t x[4]; qtk_wr32(x, v); qtk_buf_put(b, x, 4); }
static void bstr(qtk_buf *b, const char *s) { b64(b, strlen(s)); qtk_buf_puts(b, s); }

static void sha(const void *a, size_t an, const void *c, size_t cn, uint8_t out[32])
{
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	unsigned len;
	EVP_DigestInit_ex(x, EVP_sha256(), NULL);
	EVP_DigestUpdate(x, a, an);
	if (cn)
		EVP_DigestUpdate(x, c, cn);
	EVP_DigestFinal_ex(x, out, &len);
	EVP_MD_CTX_free(x);
}

static void tpart_set(tpart *p, const char *role, unsigned type, int nd, uint64_t d0, uint64_t d1)
{
	memset(p, 0, sizeof *p);
	snprintf(p->role, sizeof p->role, "%s", role);
	p->type = type;
	p->ndim = nd;
	p->shape[0] = d0;
	p->shape[1] = d1;
	qtk_type_nbytes(type, nd == 1 ? d0 : d0 * d1, &p->n);
	p->raw_field = p->n;
	for (uint64_t i = 0; i < p->n; i++)
		p->data[i] = (uint8_t)(i * 13 + 5);
}

/* Default: an act-order GPTQ [32, 64] g32 4-bit tensor and a plain F32 [64];
 * metadata with two kvs and a blob. */
static void tf_default(tfile *f)
{
	memset(f, 0, sizeof *f);
	f->major = 1;
	f->align = 64;
	f->chunk_log = 16;
	f->nt = 2;
	f->count = 2;
	ttensor *t = &f->t[0];
	*t = (ttensor){.name = "blk.0.attn_q.weight", .kind = QTK_LAYOUT_GPTQ, .bits = 4, .gv = 1, .flags = 2,
		       .type = QTK_T_I32, .group = 32, .ndim = 2, .shape = {32, 64}, .nparts = 4};
	tpart_set(&t->p[0], "qweight", QTK_T_I32, 2, 8, 32);
	tpart_set(&t->p[1], "qzeros", QTK_T_I32, 2, 2, 4);
	tpart_set(&t->p[2], "scales", QTK_T_F16, 2, 2, 32);
	tpart_set(&t->p[3], "g_idx", QTK_T_I32, 1, 64, 0);
	fill_gidx(t->p[3].data, 64, 32, true);
	t = &f->t[1];
	*t = (ttensor){.name = "norm.weight", .kind = QTK_LAYOUT_PLAIN, .bits = 32, .type = QTK_T_F32,
		       .ndim = 1, .shape = {64}, .nparts = 1};
	tpart_set(&t->p[0], "", QTK_T_F32, 1, 64, 0);
	qtk_buf *m = &f->meta;
	b32(m, 32);
	b32(m, 0);
	b64(m, 2);
	bstr(m, "general.architecture");
	b32(m, QTK_V_STR);
	bstr(m, "llama");
	bstr(m, "llama.block_count");
	b32(m, QTK_V_U32);
	b32(m, 1);
	b64(m, 1);
	bstr(m, "config.json");
	bstr(m, "{}");
}

/* Stored form of a part: the raw bytes or one zstd frame. */
static size_t stored_form(const tpart *p, uint8_t *out)
{
	if (p->codec == 0) {
		memcpy(out, p->data, (size_t)p->n);
		return (size_t)p->n;
	}
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, p->codec != 2);
	size_t n = ZSTD_compress2(c, out, 4096, p->data, (size_t)(p->codec == 4 ? p->n - 4 : p->n));
	ZSTD_freeCCtx(c);
	if (p->codec == 3)
		out[n++] = 0;
	return n;
}

static size_t tf_build(tfile *f, uint8_t **outp)
{
	qtk_buf file = {0}, idx = {0};
	uint8_t h[128] = {0}, tr[128] = {0};
	const uint8_t *ms = f->meta.p;
	size_t mlen = f->meta.len;
	uint8_t *mz = NULL;
	if (f->meta_zstd) {
		ZSTD_CCtx *c = ZSTD_createCCtx();
		ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
		ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
		size_t cap = ZSTD_compressBound(f->meta.len);
		mz = malloc(cap);
		mlen = ZSTD_compress2(c, mz, cap, f->meta.p, f->meta.len);
		ZSTD_freeCCtx(c);
		ms = mz;
		h[21] = 1;
	}
	uint64_t meta_end = 128 + mlen, data_off = (meta_end + f->align - 1) / f->align * f->align;
	/* data */
	qtk_buf data = {0};
	uint64_t offs[3][8];
	size_t sizes[3][8];
	static uint8_t st[3][8][4096];
	for (int i = 0; i < f->nt; i++)
		for (int p = 0; p < f->t[i].nparts; p++) {
			for (size_t z = 0; z < f->t[i].p[p].pad_before; z++)
				qtk_buf_putc(&data, 0);
			while ((data_off + data.len) % f->align)
				qtk_buf_putc(&data, 0);
			offs[i][p] = data_off + data.len;
			sizes[i][p] = stored_form(&f->t[i].p[p], st[i][p]);
			qtk_buf_put(&data, st[i][p], sizes[i][p]);
			if (f->t[i].p[p].off_set)
				offs[i][p] = f->t[i].p[p].off;
		}
	/* index */
	b64(&idx, f->count);
	for (int i = 0; i < f->nt; i++) {
		ttensor *t = &f->t[i];
		size_t rec = idx.len;
		bstr(&idx, t->name);
		uint8_t x[4] = {t->kind, t->bits, t->gv, t->flags};
		qtk_buf_put(&idx, x, 4);
		b32(&idx, t->type);
		b32(&idx, t->group);
		b32(&idx, (uint32_t)t->ndim);
		b32(&idx, (uint32_t)t->nparts);
		if (t->params)
			qtk_buf_put(&idx, t->lp, sizeof t->lp);
		for (int d = 0; d < t->ndim; d++)
			b64(&idx, t->shape[d]);
		for (int p = 0; p < t->nparts; p++) {
			tpart *q = &t->p[p];
			qtk_buf_put(&idx, q->role, 8);
			b32(&idx, q->type);
			b32(&idx, (uint32_t)q->ndim);
			for (int d = 0; d < q->ndim; d++)
				b64(&idx, q->shape[d]);
			b64(&idx, q->raw_field);
			uint8_t s[32];
			sha(q->data, (size_t)q->n, NULL, 0, s);
			s[0] ^= q->bad_sha;
			qtk_buf_put(&idx, s, 32);
		}
		uint8_t ts[32];
		sha("qpk/v1/tensor", 14, idx.p + rec, idx.len - rec, ts);
		ts[5] ^= t->bad_tsha;
		qtk_buf_put(&idx, ts, 32);
		for (int p = 0; p < t->nparts; p++) {
			b64(&idx, offs[i][p]);
			if (t->p[p].raw_field) {
				uint8_t e[16] = {0};
				qtk_wr64(e, sizes[i][p]);
				e[8] = t->p[p].codec ? 1 : 0;
				qtk_buf_put(&idx, e, 16);
			}
		}
	}
	if (f->index_garbage)
		qtk_buf_put(&idx, "junk", 4);
	/* header */
	memcpy(h, "\x89QPK\r\n\x1a\n", 8);
	qtk_wr16(h + 8, f->major);
	qtk_wr32(h + 12, 128);
	qtk_wr32(h + 16, f->align);
	h[20] = f->chunk_log;
	qtk_wr64(h + 24, mlen);
	qtk_wr64(h + 32, f->meta.len);
	sha(ms, mlen, NULL, 0, h + 40);
	/* file */
	qtk_buf_put(&file, h, 128);
	qtk_buf_put(&file, ms, mlen);
	free(mz);
	while (file.len < data_off)
		qtk_buf_putc(&file, 0);
	qtk_buf_put(&file, data.p, data.len);
	if (f->index_gap)
		for (int z = 0; z < 128; z++)
			qtk_buf_putc(&file, 0);
	uint64_t ioff = file.len;
	qtk_buf_put(&file, idx.p, idx.len);
	qtk_wr64(tr, ioff);
	qtk_wr64(tr + 8, idx.len);
	qtk_wr64(tr + 16, idx.len);
	qtk_wr64(tr + 32, data_off);
	sha(idx.p, idx.len, NULL, 0, tr + 40);
	sha(h, 128, NULL, 0, tr + 72);
	qtk_wr16(tr + 104, f->major);
	qtk_wr32(tr + 108, 128);
	memcpy(tr + 120, "QPK_END\n", 8);
	qtk_buf_put(&file, tr, 128);
	qtk_buf_free(&idx);
	qtk_buf_free(&data);
	*outp = file.p;
	return file.len;
}

/* Open bytes; expect QTK_E_DATA with `want` in the formatted message. */
static void expect_bad(const char *what, const void *d, size_t n, const char *want)
{
	char *p = tpath("bad.qpk");
	spit(p, d, n);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(!m, "%s: opened", what);
	char full[2048];
	qtk_err_format(&e, "t", full, sizeof full);
	CHECK(e.code == QTK_E_DATA && strstr(full, want) && strstr(full, p), "%s: code %d, message '%s' lacks '%s'",
	      what, e.code, full, want);
	qtk_close(m);
	free(p);
}

static void expect_bad_tf(const char *what, tfile *f, const char *want)
{
	uint8_t *b;
	size_t n = tf_build(f, &b);
	expect_bad(what, b, n, want);
	free(b);
	qtk_buf_free(&f->meta);
}

/* A zstd metadata section declaring far more than the parser takes before it refuses a field:
 * decoded as read, so the reader never holds the declared size (it allocated all of it). */
static void test_meta_stream(void)
{
	tfile f;
	tf_default(&f);
	f.meta_zstd = true;
	uint8_t *b;
	size_t n = tf_build(&f, &b); /* valid: a zstd metadata section reads back */
	char *p = tpath("zmeta.qpk");
	spit(p, b, n);
	free(b);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	const qtk_kv *kv = m ? qtk_kv_find(m, "general.architecture") : NULL;
	CHECK(m && kv && !strcmp(kv->val.v.str.s, "llama") && qtk_blob_find(m, "config.json"),
	      "zstd metadata reads back: %s", m ? "" : e.msg);
	qtk_close(m);
	/* a string longer than the limit, then 192 MiB of zeros and 256 KiB of noise (the ratio
	 * limit passes) */
	f.meta.len = 8;
	b64(&f.meta, 1);
	bstr(&f.meta, "k");
	b32(&f.meta, QTK_V_STR);
	b64(&f.meta, QTK_CAP_STR + 1);
	size_t zeros = (size_t)192 << 20, noise = (size_t)256 << 10;
	uint8_t *z = calloc(1, zeros);
	qtk_buf_put(&f.meta, z, zeros);
	free(z);
	for (size_t i = 0; i < noise; i++)
		qtk_buf_putc(&f.meta, (char)rnd8());
	n = tf_build(&f, &b);
	CHECK(n < (size_t)2 << 20, "hostile file is small: %zu bytes", n);
	qtk_test_max_alloc(true);
	expect_bad("declared metadata", b, n, "exceeds the limit");
	size_t peak = qtk_test_max_alloc(false);
	CHECK(peak < (size_t)16 << 20, "largest allocation %zu bytes for a refused 192 MiB section", peak);
	free(b);
	qtk_buf_free(&f.meta);
	free(p);
}

static void test_builder_valid(void)
{
	tfile f;
	tf_default(&f);
	f.t[0].p[0].codec = 1; /* one zstd chunk too */
	memset(f.t[0].p[0].data, 0x11, 1024);
	uint8_t *b;
	size_t n = tf_build(&f, &b);
	char *p = tpath("ok.qpk");
	spit(p, b, n);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(m != NULL, "builder file opens: %s", e.msg);
	if (m) {
		CHECK(m->ntensors == 2 && m->nkv == 2 && m->nblobs == 1, "counts");
		uint8_t *d = NULL;
		CHECK(qtk_read_part_alloc(m, &m->tensors[0], 0, &d) == 0 && d && !memcmp(d, f.t[0].p[0].data, 1024),
		      "zstd part reads back");
		free(d);
		CHECK(qtk_qpk_verify_tensor(m, 0) == 0 && qtk_qpk_verify_tensor(m, 1) == 0, "verify: %s", m->err.msg);
	}
	qtk_close(m);
	/* 1/7/31-byte reads */
	size_t chunks[] = {1, 7, 31};
	for (int k = 0; k < 3; k++) {
		qtk_test_max_read(chunks[k]);
		m = qtk_open(p, &e);
		uint8_t *d = NULL;
		CHECK(m && !qtk_read_part_alloc(m, &m->tensors[1], 0, &d) && !memcmp(d, f.t[1].p[0].data, 256),
		      "short reads of %zu: %s", chunks[k], e.msg);
		free(d);
		qtk_close(m);
	}
	qtk_test_max_read(0);
	/* allocation failure sweep: a clean error or success, never a crash or leak */
	int ok = 0, clean = 0, unclean = 0;
	for (long k = 1; k < 400 && !ok; k++) {
		qtk_test_fail_alloc_at(k);
		m = qtk_open(p, &e);
		uint8_t *d = NULL;
		int rc = m ? qtk_read_part_alloc(m, &m->tensors[0], 0, &d) : e.code;
		qtk_test_fail_alloc_at(0);
		if (m && !rc)
			ok = 1;
		else if (rc == QTK_E_IO)
			clean++;
		else
			unclean++;
		free(d);
		qtk_close(m);
	}
	CHECK(ok && clean > 10 && !unclean, "open alloc sweep: ok %d, clean %d, unclean %d", ok, clean, unclean);
	free(b);
	unlink(p);
	free(p);
	qtk_buf_free(&f.meta);
}

static void test_hostile(void)
{
	tfile f;
	uint8_t *b;
	size_t n;
	/* row 1: truncated files */
	tf_default(&f);
	n = tf_build(&f, &b);
	expect_bad("truncated header", b, 100, "truncated: file has 100 bytes");
	expect_bad("truncated end", b, n - 1, "bad trailer magic");
	expect_bad("truncated half", b, n / 2, "bad trailer magic");
	/* bad magic: not detected at all, and named by the plugin itself */
	b[1] = 'X';
	expect_bad("magic", b, n, "unknown format");
	char *p = tpath("magic.qpk");
	spit(p, b, n);
	qtk_model *m = qtk_model_new();
	m->path = qtk_strdup(p);
	m->fmt = &qtk_format_qpk;
	int rc = qtk_format_qpk.open(m);
	CHECK(rc == QTK_E_DATA && strstr(m->err.msg, "bad magic"), "plugin: bad magic: %s", m->err.msg);
	qtk_close(m);
	unlink(p);
	free(p);
	b[1] = 'Q';
	/* header and trailer fields */
	uint8_t *c = malloc(n);
	memcpy(c, b, n); c[n - 128 + 41] ^= 1; /* index digest */
	expect_bad("index digest field", c, n, "index digest mismatch");
	memcpy(c, b, n); c[n - 129] ^= 0x40; /* last index byte */
	expect_bad("index byte", c, n, "index digest mismatch");
	memcpy(c, b, n); c[130] ^= 1; /* metadata byte */
	expect_bad("metadata byte", c, n, "metadata digest mismatch");
	memcpy(c, b, n); c[16] = 48; /* alignment */
	expect_bad("alignment", c, n, "alignment 48");
	memcpy(c, b, n); c[50] ^= 1; /* header byte covered only by the trailer's digest */
	expect_bad("header digest", c, n, "header digest mismatch");
	memcpy(c, b, n); c[128 + 131 + 2] = 1; /* padding after the 131-byte metadata */
	expect_bad("padding", c, n, "padding before the data section is not zero");
	memcpy(c, b, n); c[n - 8] = 'X';
	expect_bad("end magic", c, n, "bad trailer magic");
	memcpy(c, b, n); qtk_wr64(c + n - 128, n - 200); /* index offset */
	expect_bad("index offset", c, n, "index offset");
	memcpy(c, b, n); qtk_wr64(c + n - 128 + 32, 128); /* data offset */
	expect_bad("data offset", c, n, "data offset");
	memcpy(c, b, n); qtk_wr64(c + 24, 1ull << 40); /* metadata stored size */
	expect_bad("metadata size", c, n, "metadata stored size");
	memcpy(c, b, n); c[21] = 7;
	expect_bad("metadata codec", c, n, "metadata codec 7");
	memcpy(c, b, n); c[n - 128 + 24] = 1; qtk_wr64(c + n - 128 + 16, 1ull << 40); /* ratio */
	expect_bad("index cap", c, n, "index raw size 1099511627776 exceeds the limit");
	memcpy(c, b, n); c[n - 128 + 24] = 1; qtk_wr64(c + n - 128 + 16, 100u << 20);
	expect_bad("index ratio", c, n, "impossible for");
	free(c);
	free(b);
	qtk_buf_free(&f.meta);
	/* unknown major version */
	tf_default(&f); f.major = 2;
	expect_bad_tf("major", &f, "unsupported QPK major version 2");
	tf_default(&f); f.chunk_log = 40;
	expect_bad_tf("chunk log", &f, "chunk log 40");
	/* row 2: offsets beyond the file, overlaps */
	tf_default(&f); f.t[1].p[0].off_set = true; f.t[1].p[0].off = 1ull << 40;
	expect_bad_tf("offset beyond EOF", &f, "offset beyond end");
	tf_default(&f); f.t[1].p[0].off_set = true; f.t[1].p[0].off = 1ull << 62;
	expect_bad_tf("offset huge", &f, "outside the data section");
	tf_default(&f);
	f.t[1].p[0].off_set = true;
	f.t[1].p[0].off = (128 + f.meta.len + 63) / 64 * 64; /* = tensor 0 part 0 */
	expect_bad_tf("overlap", &f, "overlaps part");
	tf_default(&f); f.t[1].p[0].pad_before = 64;
	expect_bad_tf("gap", &f, "gap of 64 bytes before part data");
	tf_default(&f); f.t[0].p[0].pad_before = 1;
	expect_bad_tf("gap at start", &f, "gap of 64 bytes before part data");
	tf_default(&f); f.index_gap = true;
	expect_bad_tf("gap before index", &f, "gap of 128 bytes before the index");
	tf_default(&f); f.t[1].p[0].off_set = true; f.t[1].p[0].off = (128 + f.meta.len + 63) / 64 * 64 + 8;
	expect_bad_tf("misaligned", &f, "not a multiple of the alignment 64");
	/* row 23: counts */
	tf_default(&f); f.count = 1ull << 40;
	expect_bad_tf("tensor count", &f, "tensor count");
	tf_default(&f); qtk_wr64(f.meta.p + 8, UINT64_MAX);
	expect_bad_tf("kv count", &f, "kv count");
	tf_default(&f); f.t[1].shape[0] = f.t[1].p[0].shape[0] = 1ull << 48; f.t[1].p[0].raw_field = 1ull << 50;
	expect_bad_tf("chunk count", &f, "needs 17179869184 chunk entries");
	/* row 24: string lengths */
	tf_default(&f); qtk_wr64(f.meta.p + 16, 1ull << 20);
	expect_bad_tf("key length", &f, "key length 1048576 exceeds the limit of 65535");
	tf_default(&f); qtk_wr64(f.meta.p + 16, UINT64_MAX);
	expect_bad_tf("key length huge", &f, "key length 18446744073709551615 exceeds the limit");
	tf_default(&f); qtk_wr64(f.meta.p + 16 + 8 + 20 + 4, 100); /* string value */
	expect_bad_tf("string length", &f, "string length 100 exceeds");
	/* metadata values and names */
	tf_default(&f); qtk_wr32(f.meta.p + 16 + 8 + 20, 13);
	expect_bad_tf("value type", &f, "unknown value type 13");
	tf_default(&f);
	f.meta.len = 8;
	b64(&f.meta, 2);
	for (int k = 0; k < 2; k++) {
		bstr(&f.meta, "a.b");
		b32(&f.meta, QTK_V_U8);
		qtk_buf_putc(&f.meta, 1);
	}
	b64(&f.meta, 0);
	expect_bad_tf("duplicate key", &f, "duplicate key");
	tf_default(&f); memcpy(f.meta.p + f.meta.len - 2 - 8 - 11, "../fig.json", 11);
	expect_bad_tf("blob path", &f, "not a plain file name");
	tf_default(&f); qtk_buf_put(&f.meta, "zz", 2);
	expect_bad_tf("metadata garbage", &f, "trailing garbage in the metadata section");
	tf_default(&f); f.index_garbage = true;
	expect_bad_tf("index garbage", &f, "trailing garbage in the index section");
	/* tensor records */
	tf_default(&f); f.t[1].name = f.t[0].name;
	expect_bad_tf("duplicate tensor", &f, "duplicate tensor name");
	tf_default(&f); f.t[0].flags = 0x80;
	expect_bad_tf("flags", &f, "flags 0x80");
	tf_default(&f); f.t[0].kind = 10;
	expect_bad_tf("kind", &f, "layout kind 10 is unknown");
	tf_default(&f); f.t[0].bad_tsha = true;
	expect_bad_tf("tensor digest", &f, "tensor digest does not match");
	tf_default(&f); f.t[1].p[0].role[0] = 'x';
	expect_bad_tf("plain role", &f, "role 'x'");
	/* row 39: bits and group */
	tf_default(&f); f.t[0].bits = 7;
	expect_bad_tf("bits", &f, "bits 7 is not one of");
	tf_default(&f); f.t[0].group = 0;
	expect_bad_tf("group 0", &f, "group_size 0 does not divide");
	tf_default(&f); f.t[0].group = 48;
	expect_bad_tf("group 48", &f, "group_size 48 does not divide in_features 64");
	tf_default(&f); f.t[0].gv = 3;
	expect_bad_tf("gptq version", &f, "gptq_version 3");
	/* row 40: part sizes and shapes */
	tf_default(&f); f.t[0].p[2].shape[1] = 16; f.t[0].p[2].n = 64; f.t[0].p[2].raw_field = 64;
	expect_bad_tf("scales shape", &f, "part 'scales' shape [2, 16] does not match the layout: expected [2, 32]");
	tf_default(&f); f.t[0].p[1].raw_field = 31;
	expect_bad_tf("raw size", &f, "part 1 ('qzeros') size 31 does not match its shape and type (32 bytes)");
	tf_default(&f); f.t[0].p[0].type = QTK_T_F16;
	expect_bad_tf("part type", &f, "part 0 ('qweight') size 1024 does not match");
	tf_default(&f); f.t[1].shape[0] = 65;
	expect_bad_tf("plain shape", &f, "shape [64] does not match the layout: expected [65]");
	tf_default(&f); f.t[0].nparts = 3; f.t[0].flags = 2;
	expect_bad_tf("act without g_idx", &f, "act_order set but the tensor has no g_idx");
	/* row 41: g_idx */
	tf_default(&f); qtk_wr32(f.t[0].p[3].data + 20, 9);
	expect_bad_tf("g_idx range", &f, "g_idx[5] = 9 is outside [0, 2)");
	tf_default(&f); qtk_wr32(f.t[0].p[3].data + 20, (uint32_t)-1);
	expect_bad_tf("g_idx negative", &f, "g_idx[5] = -1 is outside");
	tf_default(&f);
	for (int i = 0; i < 64; i++) /* 40 members in group 0, 24 in group 1 */
		qtk_wr32(f.t[0].p[3].data + 4 * i, i < 40 ? 0 : 1);
	expect_bad_tf("g_idx group map", &f, "g_idx is not a group map");
	tf_default(&f); f.t[0].flags = 1;
	expect_bad_tf("g_idx without act-order", &f, "act_order is not set");
	/* row 42: per-part digests */
	tf_default(&f); f.t[0].p[3].bad_sha = true; /* g_idx is read (and verified) at open */
	expect_bad_tf("g_idx digest", &f, "part 3 ('g_idx') digest mismatch");
	tf_default(&f);
	n = tf_build(&f, &b);
	p = tpath("flip.qpk");
	b[(128 + f.meta.len + 63) / 64 * 64 + 100] ^= 1; /* one byte of qweight */
	spit(p, b, n);
	qtk_err e;
	m = qtk_open(p, &e);
	CHECK(m != NULL, "flipped data byte: open is header-only: %s", e.msg);
	if (m) {
		uint8_t *d = NULL;
		rc = qtk_read_part_alloc(m, &m->tensors[0], 0, &d);
		CHECK(rc == QTK_E_DATA && strstr(m->err.msg, "part 0 ('qweight') digest mismatch"), "read: %d %s", rc,
		      m->err.msg);
		free(d);
		qtk_err_clear(&m->err);
		rc = qtk_qpk_verify_tensor(m, 0);
		CHECK(rc == QTK_E_DATA && strstr(m->err.msg, "digest mismatch"), "verify: %d %s", rc, m->err.msg);
		qtk_err_clear(&m->err);
		CHECK(qtk_qpk_verify_tensor(m, 1) == 0, "other tensor verifies");
	}
	qtk_close(m);
	free(b);
	qtk_buf_free(&f.meta);
	/* zstd chunks (rows 52-54 applied to QPK) */
	static const struct {
		int codec;
		const char *want;
	} zc[] = {{2, "no content checksum"}, {3, "trailing garbage after the zstd frame"}, {4, "declares 1020 bytes"}};
	for (int k = 0; k < 3; k++) {
		tf_default(&f);
		memset(f.t[0].p[0].data, 0x22, 1024);
		f.t[0].p[0].codec = zc[k].codec;
		n = tf_build(&f, &b);
		spit(p, b, n);
		m = qtk_open(p, &e);
		uint8_t *d = NULL;
		rc = m ? qtk_read_part_alloc(m, &m->tensors[0], 0, &d) : e.code;
		CHECK(rc == QTK_E_DATA && m && strstr(m->err.msg, zc[k].want), "zstd %d: %d %s", k, rc,
		      m ? m->err.msg : e.msg);
		free(d);
		qtk_close(m);
		free(b);
		qtk_buf_free(&f.meta);
	}
	/* a flipped byte inside a zstd frame */
	tf_default(&f);
	memset(f.t[0].p[0].data, 0x22, 1024);
	f.t[0].p[0].codec = 1;
	n = tf_build(&f, &b);
	b[(128 + f.meta.len + 63) / 64 * 64 + 10] ^= 0x55;
	spit(p, b, n);
	m = qtk_open(p, &e);
	uint8_t *d = NULL;
	rc = m ? qtk_read_part_alloc(m, &m->tensors[0], 0, &d) : e.code;
	CHECK(rc == QTK_E_DATA, "corrupt zstd frame: %d %s", rc, m ? m->err.msg : e.msg);
	free(d);
	qtk_close(m);
	free(b);
	qtk_buf_free(&f.meta);
	unlink(p);
	free(p);
}

/* Recompute the digests of a file whose sections are raw, so that a
 * mutation inside them reaches the parsers instead of the digest checks. */
static void reseal(uint8_t *b, size_t n)
{
	uint8_t *tr = b + n - 128;
	uint64_t ms = qtk_rd64(b + 24), io = qtk_rd64(tr), is = qtk_rd64(tr + 8);
	if (b[21] == 0 && 128 + ms <= n - 128)
		sha(b + 128, (size_t)ms, NULL, 0, b + 40);
	sha(b, 128, NULL, 0, tr + 72);
	if (tr[24] == 0 && io <= n - 128 && is == n - 128 - io)
		sha(b + io, (size_t)is, NULL, 0, tr + 40);
}

/* Open a mutated file and read everything: success or QTK_E_DATA only. */
static int try_file(const char *p, const uint8_t *d, size_t n)
{
	spit(p, d, n);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	if (!m)
		return e.code;
	int rc = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		for (int k = 0; k < m->tensors[i].nparts; k++) {
			uint8_t *x = NULL;
			int r = qtk_read_part_alloc(m, &m->tensors[i], k, &x);
			free(x);
			if (r && !rc)
				rc = r;
		}
		int r = qtk_qpk_verify_tensor(m, i);
		if (r && !rc)
			rc = r;
	}
	qtk_close(m);
	return rc;
}

/* Random bit flips, byte stores, u64 stores and truncations, with and
 * without re-sealed digests: never a crash, a leak or an unexpected code. */
static void test_mutations(void)
{
	tfile f;
	tf_default(&f);
	f.t[0].p[0].codec = 1;
	memset(f.t[0].p[0].data, 0x33, 512);
	uint8_t *base, *c;
	size_t n = tf_build(&f, &base);
	qtk_buf_free(&f.meta);
	char *p = tpath("mut.qpk");
	c = malloc(n);
	int counts[4] = {0}, other = 0;
	for (int it = 0; it < 4000; it++) {
		memcpy(c, base, n);
		/* one call per statement: the order of calls is then fixed */
		size_t r1 = rnd8(), r2 = rnd8(), r3 = rnd8(), r4 = rnd8();
		size_t len = n, at = 128 + (r1 | r2 << 8) % (n - 128);
		switch (it % 4) {
		case 0: c[at] ^= (uint8_t)(1u << (r3 & 7)); break;
		case 1: c[at] = (uint8_t)r3; break;
		case 2: /* a plausible-looking u64: small, huge or near a boundary */
			if (at + 8 <= n)
				qtk_wr64(c + at, (uint64_t)r3 << (r4 % 64));
			break;
		case 3: len = (r3 | r4 << 8) % n; break;
		}
		if (it % 2 == 0 && len == n)
			reseal(c, n);
		int rc = try_file(p, c, len);
		if (rc == 0)
			counts[0]++;
		else if (rc == QTK_E_DATA)
			counts[1]++;
		else
			other++;
	}
	CHECK(!other && counts[1] > 2000, "mutations: %d ok, %d rejected, %d other codes", counts[0], counts[1], other);
	printf("mutations: %d read fine, %d rejected\n", counts[0], counts[1]);
	unlink(p);
	free(p);
	free(c);
	free(base);
}

/* ---- round trips through other containers ---- */

/* src -> a.qpk -> b.<ext>; a equals src, b equals src; and with `fix`:
 * b -> c.qpk -> d.<ext> gives byte-identical a/c and b/d. */
static void roundtrip(const char *src, const char *ext, const char *label, bool fix, int how_back)
{
	qtk_err e;
	qtk_model *s = qtk_open(src, &e), *a = NULL, *b = NULL;
	CHECK(s != NULL, "%s: open: %s", label, e.msg);
	if (!s)
		return;
	char *pa = tpath("rt-a.qpk"), *pc = tpath("rt-c.qpk"), nb[64], nd[64];
	snprintf(nb, sizeof nb, "rt-b%s", ext);
	snprintf(nd, sizeof nd, "rt-d%s", ext);
	char *pb = tpath(nb), *pd = tpath(nd);
	int rc = copy_model(s, pa, &e);
	CHECK(rc == 0, "%s: write qpk: %s", label, e.msg);
	if (!rc && (a = qtk_open(pa, &e)) != NULL) {
		check_same(s, a, label, CMP_ALL);
		rc = copy_model(a, pb, &e);
		CHECK(rc == 0, "%s: write %s: %s", label, ext, e.msg);
		if (!rc && (b = qtk_open(pb, &e)) != NULL)
			check_same(s, b, label, how_back);
		else
			CHECK(0, "%s: reopen %s: %s", label, ext, e.msg);
	} else if (!rc)
		CHECK(0, "%s: reopen qpk: %s", label, e.msg);
	if (fix && b) {
		qtk_model *c = NULL;
		rc = copy_model(b, pc, &e);
		CHECK(rc == 0 && same_file(pa, pc), "%s: qpk bytes differ after a round trip", label);
		if (!rc && (c = qtk_open(pc, &e)) != NULL) {
			rc = copy_model(c, pd, &e);
			CHECK(rc == 0 && same_file(pb, pd), "%s: %s bytes differ after a round trip", label, ext);
		}
		qtk_close(c);
	}
	qtk_close(s);
	qtk_close(a);
	qtk_close(b);
	unlink(pa);
	unlink(pc);
	if (!strcmp(ext, "/")) {
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", pb, pd);
		CHECK(system(cmd) == 0, "cleanup");
	} else {
		unlink(pb);
		unlink(pd);
	}
	free(pa);
	free(pb);
	free(pc);
	free(pd);
}

static void test_samples(void)
{
	const char *bld = getenv("QTK_BUILD");
	char gen[600], cmd[1400], path[1200];
	snprintf(gen, sizeof gen, "%s/samples/gen", bld && *bld ? bld : "build");
	if (access(gen, X_OK) != 0) {
		T_SKIP("sample generator not built (make build/samples/gen)");
		return;
	}
	snprintf(cmd, sizeof cmd, "'%s' '%s/samples' >/dev/null", gen, tmpdir);
	CHECK(system(cmd) == 0, "sample generator failed");
	snprintf(path, sizeof path, "%s/samples/tiny-llama-f32.gguf", tmpdir);
	roundtrip(path, ".gguf", "sample gguf", true, CMP_ALL);
	snprintf(path, sizeof path, "%s/samples/tiny-llama", tmpdir);
	roundtrip(path, "/", "sample hf", false, CMP_ALL);
	snprintf(cmd, sizeof cmd, "rm -rf '%s/samples'", tmpdir);
	CHECK(system(cmd) == 0, "cleanup");
}

static void test_fixtures(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures not found (../shared/fixtures)");
		return;
	}
	static const char *const dirs[] = {"gguf", "vocab", "gguf/split-f32", "gguf/split-q4km"};
	int nfiles = 0;
	for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++) {
		char dir[1024];
		snprintf(dir, sizeof dir, "%s/%s", fx, dirs[k]);
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			size_t n = strlen(de->d_name);
			if (n < 6 || strcmp(de->d_name + n - 5, ".gguf") ||
			    (k >= 2 && !strstr(de->d_name, "-00001-of-")))
				continue;
			char path[2048];
			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			roundtrip(path, ".gguf", de->d_name, false, CMP_KV | CMP_LAYOUT);
			nfiles++;
		}
		if (d)
			closedir(d);
	}
	static const char *const hf[] = {"fp16", "awq-g128", "gptq-2-64-0", "gptq-3-128-0", "gptq-4-128-0",
					 "gptq-4-128-1", "gptq-4-32-1s", "gptq-8-128-0"};
	for (size_t k = 0; k < sizeof hf / sizeof *hf; k++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/hf/tiny-llama/%s", fx, hf[k]);
		roundtrip(path, "/", hf[k], false, CMP_LAYOUT | CMP_KV);
		nfiles++;
	}
	printf("fixtures: %d models round-tripped through QPK\n", nfiles);
}

/* ---- the layouts with Layout_Params: compressed-tensors int, FP8, NVFP4, MXFP4, bitsandbytes
 * 4- and 8-bit (formats/qpk.md §8.7-§8.13); made in memory, no fixtures needed ---- */

static const char *json_of(bool fp4, uint32_t bs, const char *dtype, uint64_t out, uint64_t in, uint32_t nested, char *buf,
			   size_t n)
{
	int k = snprintf(buf, n, "{\"quant_type\": \"%s\", \"blocksize\": %u, \"dtype\": \"%s\", \"shape\": [%llu, %llu]",
			 fp4 ? "fp4" : "nf4", bs, dtype, (unsigned long long)out, (unsigned long long)in);
	if (nested)
		k += snprintf(buf + k, n - (size_t)k, ", \"nested_blocksize\": %u, \"nested_dtype\": \"float32\", "
			      "\"nested_offset\": 0.125", nested);
	snprintf(buf + k, n - (size_t)k, "}");
	return buf;
}

static qtk_tensor *described(qtk_model *m, const char *name, qtk_layout l, uint64_t out, uint64_t in)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	char *nm = t->name, why[300] = "";
	int rc = qtk_scheme_describe(t, &l, out, in, true, why, sizeof why);
	t->name = nm;
	CHECK(rc == 0, "%s: describe: %s", name, why);
	return t;
}

/* Bytes of part p of t that the content rules accept and the decoders turn into finite values. */
static void fill_new_part(const qtk_tensor *t, int p, uint8_t *b, const char *qs)
{
	const qtk_part *q = &t->parts[p];
	uint64_t n = q->nbytes;
	const char *r = q->role;
	if (!strcmp(r, "g_idx")) {
		fill_gidx(b, t->shape[1], t->layout.group_size, t->layout.act_order);
	} else if (!strcmp(r, "shape")) {
		qtk_wr64(b, t->shape[0]);
		qtk_wr64(b + 8, t->shape[1]);
	} else if (!strcmp(r, "qmap")) {
		for (int k = 0; k < 16; k++)
			qtk_wr32(b + 4 * k, qtk_bnb_code_table(t->layout.code_kind)[k]);
	} else if (!strncmp(r, "qs_", 3)) {
		memcpy(b, qs, (size_t)n);
	} else if (q->type == QTK_T_F32 || q->type == QTK_T_F16 || q->type == QTK_T_BF16) {
		size_t es = q->type == QTK_T_F32 ? 4 : 2;
		for (uint64_t k = 0; k < n / es; k++) {
			float v = !strcmp(r, "nqmap") ? (float)((int)k - 128) / 128.0f
				  : !strcmp(r, "gscale") || !strcmp(r, "scale2") ? 2.0f
										 : 0.25f + (float)(k % 7) * 0.125f;
			uint32_t u;
			memcpy(&u, &v, 4);
			if (es == 4)
				qtk_wr32(b + 4 * k, u);
			else
				qtk_wr16(b + 2 * k, q->type == QTK_T_F16 ? qtk_f32_to_fp16(v) : qtk_f32_to_bf16(v));
		}
	} else if (q->type == QTK_DT_F8_E4M3 && strcmp(r, "weight")) {
		for (uint64_t k = 0; k < n; k++) /* e4m3 scales: 0.5 .. 0.9 */
			b[k] = (uint8_t)(0x30 + k % 8);
	} else {
		for (uint64_t k = 0; k < n; k++)
			b[k] = rnd8();
	}
}

enum { NK_CT_ACT, NK_CT_I8, NK_CT_TENSOR, NK_FP8_BLOCK, NK_FP8_TENSOR, NK_NV_CT, NK_NV_MO, NK_MX, NK_MX3,
       NK_BNB_NF4, NK_BNB_DQ, NK_BNB8, NK_COUNT };

/* One tensor of every new layout (and its variants), each with valid content. */
static void build_new(mem *mm)
{
	memset(mm, 0, sizeof *mm);
	qtk_model *m = mm->m = qtk_model_new();
	static char qs[2][300];
	json_of(false, 64, "float16", 8, 64, 0, qs[0], sizeof qs[0]);
	json_of(true, 32, "bfloat16", 8, 64, 32, qs[1], sizeof qs[1]);
	const qtk_layout ct = {.kind = QTK_LAYOUT_CT_INT, .type = QTK_T_I32, .bits = 4, .group_size = 32, .act_order = true,
			       .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_T_F16};
	described(m, "ct.asym_act.weight", ct, 16, 64);
	described(m, "ct.int8_channel.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_CT_INT, .type = QTK_T_I8, .bits = 8, .sym = true, .group_size = 64,
			       .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_T_BF16}, 8, 64);
	described(m, "ct.tensor.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_CT_INT, .type = QTK_T_I32, .bits = 2, .sym = true, .group_size = 64,
			       .strategy = QTK_SCHEME_PER_TENSOR, .scale_type = QTK_T_F32}, 8, 64);
	described(m, "fp8.block.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_FP8, .type = QTK_DT_F8_E4M3, .bits = 8, .sym = true, .group_size = 32,
			       .strategy = QTK_SCHEME_PER_BLOCK, .scale_type = QTK_T_F32}, 48, 64);
	described(m, "fp8.tensor.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_FP8, .type = QTK_DT_F8_E4M3, .bits = 8, .sym = true, .group_size = 64,
			       .strategy = QTK_SCHEME_PER_TENSOR, .scale_type = QTK_T_F16}, 8, 64);
	described(m, "nvfp4.ct.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_NVFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 16,
			       .strategy = QTK_SCHEME_PER_GROUP, .scale_type = 0}, 8, 64);
	described(m, "nvfp4.modelopt.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_NVFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 16,
			       .strategy = QTK_SCHEME_PER_TENSOR, .scale_type = 1}, 8, 64);
	const qtk_layout mx = {.kind = QTK_LAYOUT_MXFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 32,
			       .strategy = QTK_SCHEME_PER_GROUP};
	described(m, "mxfp4.down_proj", mx, 8, 64);
	qtk_tensor *t = described(m, "mxfp4.experts.gate_up_proj", mx, 8, 64); /* a stack of 3 experts */
	memmove(t->shape + 1, t->shape, 2 * sizeof *t->shape);
	t->shape[0] = 3;
	t->ndim = 3;
	for (int p = 0; p < t->nparts; p++) {
		qtk_part *q = &t->parts[p];
		memmove(q->shape + 1, q->shape, (size_t)q->ndim * sizeof *q->shape);
		q->shape[0] = 3;
		q->ndim++;
		q->nbytes *= 3;
	}
	qtk_tensor_finish(t);
	described(m, "bnb.nf4.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_BNB4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 64,
			       .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_T_F16, .code_kind = 0,
			       .meta_len = (uint16_t)strlen(qs[0])}, 8, 64);
	described(m, "bnb.fp4_dq.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_BNB4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 32,
			       .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_T_BF16, .code_kind = 1,
			       .meta_len = (uint16_t)strlen(qs[1]), .nested_group = 32}, 8, 64);
	described(m, "bnb8.weight",
		  (qtk_layout){.kind = QTK_LAYOUT_BNB8, .type = QTK_T_I8, .bits = 8, .sym = true, .group_size = 32,
			       .strategy = QTK_SCHEME_PER_CHANNEL, .scale_type = QTK_T_F32}, 4, 32);
	CHECK(m->ntensors == NK_COUNT, "%zu new-kind tensors", m->ntensors);
	for (size_t i = 0; i < m->ntensors; i++) {
		t = &m->tensors[i];
		for (int p = 0; p < t->nparts; p++) {
			mm->data[i][p] = calloc(1, (size_t)t->parts[p].nbytes + 1);
			fill_new_part(t, p, mm->data[i][p], qs[i == NK_BNB_DQ]);
		}
	}
}

/* The decoded values of tensor t of m against those of its description d over data. */
static bool same_decode(qtk_model *m, const qtk_tensor *t, const qtk_tensor *d, uint8_t *const *data)
{
	uint64_t n = t->n_params, in = t->shape[t->ndim - 1];
	float *x = malloc((size_t)n * 4 + 4), *y = malloc((size_t)n * 4 + 4);
	bool ok = x && y && !qtk_decode_tensor(m, t, x) &&
		  !qtk_scheme_decode_rows(d, (const void *const *)data, 0, n / in, y) && !memcmp(x, y, (size_t)n * 4);
	free(x);
	free(y);
	return ok;
}

static unsigned minor_of(const char *path)
{
	size_t n = 0;
	uint8_t *b = slurp(path, &n);
	unsigned v = b && n > 12 ? qtk_rd16(b + 10) : 99;
	free(b);
	return v;
}

static void test_new_kinds(void)
{
	mem mm;
	build_new(&mm);
	char *p1 = tpath("new.qpk"), *p2 = tpath("new2.qpk");
	qtk_err e;
	int rc = write_mem(&mm, p1, 333, &e);
	CHECK(rc == 0, "new kinds: write: %s", e.msg);
	CHECK(minor_of(p1) == 2, "new kinds: the file says version 1.%u, not 1.2", minor_of(p1));
	qtk_model *m = rc ? NULL : qtk_open(p1, &e);
	CHECK(m != NULL, "new kinds: open: %s", e.msg);
	int bad = 0;
	for (size_t i = 0; m && i < m->ntensors && i < mm.m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i], *d = &mm.m->tensors[i];
		char a[64], b[64];
		qtk_layout_id(&t->layout, a, sizeof a);
		qtk_layout_id(&d->layout, b, sizeof b);
		if (!same_desc(t, d) || strcmp(a, b) || memcmp(&t->layout, &d->layout, sizeof t->layout)) {
			printf("  %s: description differs (%s / %s)\n", d->name, a, b);
			bad++;
		} else if (!same_decode(m, t, d, mm.data[i])) {
			printf("  %s: decoded values differ (%s)\n", d->name, m->err.msg);
			bad++;
		}
	}
	CHECK(m && !bad && m->ntensors == NK_COUNT, "new kinds: %d of %d tensors differ", bad, NK_COUNT);
	if (m)
		check_mem_data(&mm, m, "new kinds");
	/* QPK -> QPK is byte-identical */
	rc = m ? copy_model(m, p2, &e) : -1;
	CHECK(rc == 0 && same_file(p1, p2), "new kinds: qpk -> qpk differs: %s", e.msg);
	qtk_close(m);
	/* a file with only MLX and older kinds stays 1.1 / 1.0; one bnb8 tensor makes it 1.2 */
	for (int k = 0; k < 2; k++) {
		mem one;
		memset(&one, 0, sizeof one);
		one.m = qtk_model_new();
		size_t src = k ? NK_BNB8 : 0;
		if (k) {
			qtk_tensor *t = qtk_model_add_tensor(one.m, "bnb8.weight");
			char *nm = t->name;
			qtk_tensor_copy(t, &mm.m->tensors[src]);
			t->name = nm;
			for (int p = 0; p < t->nparts; p++) {
				one.data[0][p] = malloc((size_t)t->parts[p].nbytes);
				memcpy(one.data[0][p], mm.data[src][p], (size_t)t->parts[p].nbytes);
			}
		} else {
			plain(one.m, "w", QTK_T_F32, 1, 4, 0);
			one.data[0][0] = calloc(1, 16);
		}
		rc = write_mem(&one, p2, 1 << 20, &e);
		CHECK(rc == 0 && minor_of(p2) == (k ? 2u : 0u), "minor version of a %s file: %u (%s)", k ? "bnb8" : "plain",
		      minor_of(p2), e.msg);
		free_mem(&one);
	}
	unlink(p1);
	unlink(p2);
	free(p1);
	free(p2);
	free_mem(&mm);
}

/* The writer refuses what the reader would refuse: layout parameters when the description is
 * opened, part contents while they stream. Nothing is left behind. */
static void test_new_writer_rejects(void)
{
	char *p = tpath("rejnew.qpk");
	static const struct {
		int t;
		const char *what, *want;
	} cases[] = {
		{NK_CT_ACT, "ct strategy", "ct-int strategy 3"},
		{NK_FP8_BLOCK, "fp8 scale type", "fp8 scale type 2"},
		{NK_BNB_NF4, "bnb4 nested", "nested group 48"},
		{NK_MX, "mxfp4 code kind", "must be 0 for this layout"},
		{NK_CT_ACT, "ct 3-D", "this layout has 2 dimensions"},
		{NK_BNB_DQ, "quant_state", "differs from the layout"},
		{NK_BNB_DQ, "nabsmax", "part 'nabsmax': value 0"},
		{NK_CT_ACT, "weight_shape", "part 'shape' holds [16, 65]"},
		{NK_CT_ACT, "g_idx", "g_idx is not a group map"},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		mem mm;
		build_new(&mm);
		qtk_tensor *t = &mm.m->tensors[cases[c].t];
		int nt = cases[c].t;
		switch (c) {
		case 0: t->layout.strategy = 3; break;
		case 1: t->layout.scale_type = 2; break;
		case 2: t->layout.nested_group = 48; break;
		case 3: t->layout.code_kind = 1; break;
		case 4: t->ndim = 3; t->shape[2] = 1; break;
		case 5: memcpy(mm.data[nt][5] + strlen("{\"quant_type\": \"fp4\", \"blocksize\": "), "64", 2); break;
		case 6: qtk_wr32(mm.data[nt][3], 0xbf800000u); break; /* -1.0 */
		case 7: qtk_wr64(mm.data[nt][4] + 8, 65); break;
		case 8: qtk_wr32(mm.data[nt][3], 1); break; /* group 1 gets 33 members */
		}
		qtk_err e;
		int rc = write_mem(&mm, p, 4096, &e);
		CHECK(rc == QTK_E_DATA && strstr(e.msg, cases[c].want), "writer %s: %d %s", cases[c].what, rc, e.msg);
		CHECK(!qtk_path_exists(p), "writer %s: no output left behind", cases[c].what);
		unlink(p);
		free_mem(&mm);
	}
	free(p);
}

/* A tfile whose tensor 0 is new-kind tensor k of build_new (with its valid content). */
static void tf_new(tfile *f, int k)
{
	tf_default(f);
	mem mm;
	build_new(&mm);
	const qtk_tensor *t = &mm.m->tensors[k];
	ttensor *tt = &f->t[0];
	static char names[NK_COUNT][64];
	snprintf(names[k], sizeof names[k], "%s", t->name);
	const qtk_layout *l = &t->layout;
	*tt = (ttensor){.name = names[k], .kind = (uint8_t)l->kind, .bits = l->bits, .gv = l->gptq_version,
			.flags = (uint8_t)((l->sym ? 1 : 0) | (l->act_order ? 2 : 0)), .type = l->type,
			.group = l->group_size, .ndim = t->ndim, .nparts = t->nparts, .params = true};
	memcpy(tt->shape, t->shape, sizeof tt->shape);
	tt->lp[0] = l->strategy;
	tt->lp[1] = l->code_kind;
	qtk_wr16(tt->lp + 2, l->scale_type);
	qtk_wr16(tt->lp + 4, l->meta_len);
	qtk_wr32(tt->lp + 8, l->nested_group);
	for (int p = 0; p < t->nparts; p++) {
		tpart *q = &tt->p[p];
		memset(q, 0, sizeof *q);
		memcpy(q->role, t->parts[p].role, 8);
		q->type = t->parts[p].type;
		q->ndim = t->parts[p].ndim;
		memcpy(q->shape, t->parts[p].shape, sizeof q->shape);
		q->n = q->raw_field = t->parts[p].nbytes;
		CHECK(q->n <= sizeof q->data, "tf_new: part %s fits the builder", q->role);
		memcpy(q->data, mm.data[k][p], (size_t)(q->n < sizeof q->data ? q->n : sizeof q->data));
	}
	free_mem(&mm);
}

/* Every rule of §8.7-§8.13 broken once in a file built from the spec: exit 3 with its message. */
static void test_new_hostile(void)
{
	tfile f;
	for (int k = 0; k < NK_COUNT; k++) { /* the unbroken files open, verify and decode */
		if (k == NK_MX3)
			continue;
		tf_new(&f, k);
		uint8_t *b;
		size_t n = tf_build(&f, &b);
		char *p = tpath("newok.qpk");
		spit(p, b, n);
		qtk_err e;
		qtk_model *m = qtk_open(p, &e);
		float *y = m ? malloc((size_t)m->tensors[0].n_params * 4) : NULL;
		CHECK(m && !qtk_qpk_verify_tensor(m, 0) && y && !qtk_decode_tensor(m, &m->tensors[0], y), "builder %d: %s", k,
		      m ? m->err.msg : e.msg);
		free(y);
		qtk_close(m);
		unlink(p);
		free(p);
		free(b);
		qtk_buf_free(&f.meta);
	}
	/* layout parameters */
	tf_new(&f, NK_CT_ACT); qtk_wr16(f.t[0].lp + 6, 1);
	expect_bad_tf("params reserved", &f, "reserved layout parameter bytes are not zero");
	tf_new(&f, NK_CT_ACT); f.t[0].params = false; /* the record is 12 bytes short of its parameters */
	expect_bad_tf("params missing", &f, "tensor 'ct.asym_act.weight'");
	tf_new(&f, NK_CT_ACT); f.t[0].lp[0] = 1;
	expect_bad_tf("ct strategy", &f, "ct-int strategy 1 is not 0 (tensor) or 2 (group)");
	tf_new(&f, NK_CT_ACT); f.t[0].lp[0] = 200;
	expect_bad_tf("ct strategy unknown", &f, "ct-int strategy 200");
	tf_new(&f, NK_CT_I8); qtk_wr16(f.t[0].lp + 2, QTK_T_Q4_0);
	expect_bad_tf("ct scale type", &f, "ct-int scale type 2 is not F32, F16 or BF16");
	tf_new(&f, NK_CT_ACT); f.t[0].lp[1] = 1;
	expect_bad_tf("ct code kind", &f, "code kind 1, meta length 0, nested group 0: must be 0");
	tf_new(&f, NK_CT_TENSOR); qtk_wr32(f.t[0].lp + 8, 32);
	expect_bad_tf("ct nested group", &f, "nested group 32: must be 0");
	tf_new(&f, NK_FP8_BLOCK); f.t[0].lp[0] = 1;
	expect_bad_tf("fp8 strategy", &f, "fp8 strategy 1 is not 0 (tensor), 2 (group) or 3 (block)");
	tf_new(&f, NK_FP8_TENSOR); qtk_wr16(f.t[0].lp + 2, QTK_DT_F8_E4M3);
	expect_bad_tf("fp8 scale type", &f, "fp8 scale type 69");
	tf_new(&f, NK_NV_CT); qtk_wr16(f.t[0].lp + 2, 2);
	expect_bad_tf("nvfp4 scale type", &f, "nvfp4 scale type 2 is not 0");
	tf_new(&f, NK_NV_MO); f.t[0].lp[0] = 3;
	expect_bad_tf("nvfp4 strategy", &f, "nvfp4 strategy 3");
	tf_new(&f, NK_MX); f.t[0].lp[0] = 0;
	expect_bad_tf("mxfp4 strategy", &f, "mxfp4 strategy 0 / scale type 0: must be 2 and 0");
	tf_new(&f, NK_BNB_NF4); f.t[0].lp[0] = 1;
	expect_bad_tf("bnb4 strategy", &f, "bnb4 strategy 1");
	tf_new(&f, NK_BNB_NF4); qtk_wr16(f.t[0].lp + 2, QTK_T_I8);
	expect_bad_tf("bnb4 scale type", &f, "bnb4 scale type 24");
	tf_new(&f, NK_BNB_NF4); f.t[0].lp[1] = 2;
	expect_bad_tf("bnb4 code kind", &f, "bnb4 code kind 2");
	tf_new(&f, NK_BNB_NF4); qtk_wr16(f.t[0].lp + 4, 5000);
	expect_bad_tf("bnb4 meta_len cap", &f, "bnb4 quant_state length 5000");
	tf_new(&f, NK_BNB_NF4); qtk_wr16(f.t[0].lp + 4, (uint16_t)(f.t[0].p[3].n + 10)); /* meta_len lies */
	expect_bad_tf("bnb4 meta_len lie", &f, "part 'qs_nf4' shape");
	tf_new(&f, NK_BNB_DQ); qtk_wr32(f.t[0].lp + 8, 48);
	expect_bad_tf("bnb4 nested group", &f, "bnb4 nested group 48");
	tf_new(&f, NK_BNB8); f.t[0].lp[0] = 2;
	expect_bad_tf("bnb8 strategy", &f, "bnb8 strategy 2 / scale type 0");
	tf_new(&f, NK_BNB8); qtk_wr16(f.t[0].lp + 4, 7);
	expect_bad_tf("bnb8 meta length", &f, "meta length 7");
	/* the record's own fields against the kind */
	tf_new(&f, NK_CT_ACT); f.t[0].group = 48;
	expect_bad_tf("ct group", &f, "group_size 48 does not divide in_features 64");
	tf_new(&f, NK_CT_ACT); f.t[0].bits = 3;
	expect_bad_tf("ct bits", &f, "bits 3 is not one of 2, 4, 8");
	tf_new(&f, NK_CT_ACT); f.t[0].gv = 1;
	expect_bad_tf("ct gptq version", &f, "gptq_version set");
	tf_new(&f, NK_FP8_TENSOR); f.t[0].flags = 0;
	expect_bad_tf("fp8 asym", &f, "fp8 layout must be symmetric");
	tf_new(&f, NK_MX); f.t[0].type = QTK_DT_U16;
	expect_bad_tf("mxfp4 storage type", &f, "mxfp4 layout must be symmetric blocks of 32 in U8 bytes");
	tf_new(&f, NK_NV_CT); f.t[0].ndim = 3; f.t[0].shape[2] = 1;
	expect_bad_tf("nvfp4 3-D", &f, "this layout has 2 dimensions, not 3");
	/* parts: count, roles, types, shapes */
	tf_new(&f, NK_CT_ACT); f.t[0].nparts = 4;
	expect_bad_tf("ct part count", &f, "needs a part 'shape'");
	tf_new(&f, NK_CT_ACT); f.t[0].flags = 0; /* asymmetric without act-order: g_idx is one part too many */
	expect_bad_tf("ct extra part", &f, "needs a part 'shape' here");
	tf_new(&f, NK_BNB_NF4); memcpy(f.t[0].p[1].role, "absmin\0", 8);
	expect_bad_tf("bnb4 role", &f, "needs a part 'absmax' here");
	tf_new(&f, NK_CT_I8); f.t[0].p[1].type = QTK_T_F16;
	expect_bad_tf("ct scale dtype", &f, "part 'scale' type F16, expected BF16");
	tf_new(&f, NK_MX); f.t[0].p[1].shape[1] = 1; f.t[0].p[1].n = f.t[0].p[1].raw_field = 8;
	expect_bad_tf("mxfp4 scales shape", &f, "part 'scales' shape [8, 1] does not match the layout: expected [8, 2]");
	tf_new(&f, NK_BNB8); f.t[0].p[1].type = QTK_T_F16; f.t[0].p[1].n = f.t[0].p[1].raw_field = 8;
	expect_bad_tf("bnb8 SCB dtype", &f, "part 'SCB' type F16, expected F32");
	/* content (§8.13) */
	tf_new(&f, NK_CT_ACT); qtk_wr64(f.t[0].p[4].data, 17);
	expect_bad_tf("ct weight_shape", &f, "part 'shape' holds [17, 64], not the tensor's shape [16, 64]");
	tf_new(&f, NK_CT_ACT); qtk_wr32(f.t[0].p[3].data, 7);
	expect_bad_tf("ct g_idx range", &f, "g_idx[0] = 7 is outside [0, 2)");
	tf_new(&f, NK_CT_ACT);
	for (int i = 0; i < 64; i++)
		qtk_wr32(f.t[0].p[3].data + 4 * i, i < 40 ? 0 : 1);
	expect_bad_tf("ct g_idx group map", &f, "g_idx is not a group map");
	tf_new(&f, NK_BNB_NF4); f.t[0].p[3].data[0] = '[';
	expect_bad_tf("bnb4 quant_state JSON", &f, "part 'qs_nf4': quant_state");
	tf_new(&f, NK_BNB_NF4); memcpy(strstr((char *)f.t[0].p[3].data, "[8, 64]"), "[4, 64]", 7);
	expect_bad_tf("bnb4 quant_state shape", &f, "shape [4, 64], nested blocksize 0) differs from the layout");
	tf_new(&f, NK_BNB_NF4); memcpy(strstr((char *)f.t[0].p[3].data, "nf4"), "fp4", 3);
	expect_bad_tf("bnb4 quant_state type", &f, "quant_state (fp4, blocksize 64");
	tf_new(&f, NK_BNB_DQ); memcpy(strstr((char *)f.t[0].p[5].data, "\"bfloat16\""), "\"float16\" ", 10);
	expect_bad_tf("bnb4 quant_state dtype", &f, "quant_state (fp4, blocksize 32, F16");
	tf_new(&f, NK_BNB_NF4); qtk_wr32(f.t[0].p[2].data + 4, 0x3f000000u);
	expect_bad_tf("bnb4 quant_map", &f, "part 'qmap': value 1 is not bitsandbytes' nf4 code");
	tf_new(&f, NK_BNB_DQ); qtk_wr32(f.t[0].p[4].data + 40, 0x40000000u); /* 2.0 */
	expect_bad_tf("bnb4 nested map", &f, "part 'nqmap': value 10 is not in [-1, 1]");
	tf_new(&f, NK_BNB_DQ); qtk_wr32(f.t[0].p[3].data, 0x7fc00000u); /* NaN */
	expect_bad_tf("bnb4 nested absmax", &f, "part 'nabsmax': value 0 is not a finite non-negative number");
	tf_new(&f, NK_BNB_DQ); f.t[0].p[5].bad_sha = true; /* content parts are read (and verified) at open */
	expect_bad_tf("bnb4 quant_state digest", &f, "part 5 ('qs_fp4') digest mismatch");
}

/* Fixture checkpoints of every new layout (and MLX): HF -> QPK keeps every part, layout and
 * decoded value (the reference digests), qverify's check passes, and where qtk writes the
 * layout to a Hugging Face directory, QPK -> HF gives the same tensors again. */
static int ref_digests(qtk_model *m, const char *tsv, const char *label)
{
	size_t len = 0;
	char *txt = (char *)slurp(tsv, &len), *save = NULL;
	if (txt)
		txt[len] = 0; /* slurp leaves room for it */
	int rows = 0, good = 0;
	for (char *line = txt ? strtok_r(txt, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
		char name[300], hex[80];
		unsigned long long n;
		if (sscanf(line, "%250s %llu %70s", name, &n, hex) != 3 || !strcmp(name, "name"))
			continue;
		rows++;
		const qtk_tensor *t = qtk_tensor_find(m, name);
		if (!t) {
			strcat(name, ".weight");
			t = qtk_tensor_find(m, name);
		}
		float *y = t && t->n_params == n ? malloc((size_t)n * 4) : NULL;
		uint8_t d[32];
		char got[65] = "";
		if (y && !qtk_decode_tensor(m, t, y) && (sha(y, (size_t)n * 4, NULL, 0, d), true))
			qtk_hex(d, 32, got);
		free(y);
		if (!strcmp(got, hex))
			good++;
		else
			printf("  %s: %s digest %s, want %s\n", label, name, got, hex);
	}
	free(txt);
	CHECK(rows > 0 && good == rows, "%s: %d/%d reference digests", label, good, rows);
	return good;
}

static void test_new_fixtures(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures not found: new-layout QPK round trips");
		return;
	}
	static const struct {
		const char *dir, *ref; /* under hf/; the reference digests qtk's decoder matches */
		bool hf_back;          /* qtk writes the layout to a Hugging Face directory */
	} fxs[] = {
		{"ct/ct-fp8-block", "ct/ref/ct-fp8-block", false},
		{"ct/ct-fp8-channel", "ct/ref/ct-fp8-channel", false},
		{"ct/ct-nvfp4", "ct/ref/ct-nvfp4", false},
		{"ct/ct-w4a16-g128-actorder", "ct/ref/ct-w4a16-g128-actorder", true},
		{"ct/ct-w4a16-g128-sym", "ct/ref/ct-w4a16-g128-sym", true},
		{"ct/ct-w4a16-g32-asym", "ct/ref/ct-w4a16-g32-asym", true},
		{"ct/ct-w8a8-int8-channel", "ct/ref/ct-w8a8-int8-channel", false}, /* see the report: int-quantized */
		{"ct/ds-fp8-block", "ct/ref/ds-fp8-block", false},
		{"ct/modelopt-nvfp4", "ct/ref/modelopt-nvfp4", false},
		{"more/bnb-fp4", "more/ref/bnb-fp4", false},
		{"more/bnb-nf4-dq", "more/ref/bnb-nf4-dq", false},
		{"more/gptoss-mxfp4", "more/ref/gptoss-mxfp4", false},
		{"more/mlx-3bit-g32", "more/ref/mlx-3bit-g32.f32", true},
		{"more/mlx-4bit-g32", "more/ref/mlx-4bit-g32.f32", true},
		{"more/mlx-4bit-g64", "more/ref/mlx-4bit-g64.f32", true},
		{"more/mlx-8bit-g64", "more/ref/mlx-8bit-g64.f32", true},
	};
	int nmod = 0, ndig = 0, nback = 0;
	for (size_t k = 0; k < sizeof fxs / sizeof *fxs; k++) {
		char dir[1024], tsv[1100], *pa = tpath("fx.qpk"), *pb = tpath("fx-hf/");
		snprintf(dir, sizeof dir, "%s/hf/%s", fx, fxs[k].dir);
		snprintf(tsv, sizeof tsv, "%s/hf/%s.digest.tsv", fx, fxs[k].ref);
		const char *label = strrchr(fxs[k].dir, '/') + 1;
		qtk_err e;
		qtk_model *s = qtk_open(dir, &e), *a = NULL, *b = NULL;
		CHECK(s != NULL, "%s: open: %s", label, e.msg);
		int rc = s ? copy_model(s, pa, &e) : -1;
		CHECK(rc == 0, "%s: write qpk: %s", label, e.msg);
		if (!rc && !(a = qtk_open(pa, &e)))
			CHECK(0, "%s: reopen qpk: %s", label, e.msg);
		if (a) {
			check_same(s, a, label, CMP_ALL);
			int vbad = 0;
			for (size_t i = 0; i < a->ntensors; i++)
				vbad += qtk_qpk_verify_tensor(a, i) != 0;
			CHECK(!vbad, "%s: %d tensors fail verification", label, vbad);
			ndig += ref_digests(a, tsv, label);
			nmod++;
		}
		if (a && fxs[k].hf_back) {
			rc = copy_model(a, pb, &e);
			CHECK(rc == 0, "%s: qpk -> hf: %s", label, e.msg);
			if (!rc && !(b = qtk_open(pb, &e)))
				CHECK(0, "%s: reopen hf: %s", label, e.msg);
			if (b) {
				check_same(s, b, label, CMP_LAYOUT);
				ref_digests(b, tsv, label);
				nback++;
			}
		}
		qtk_close(s);
		qtk_close(a);
		qtk_close(b);
		char cmd[1200];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", pa, pb);
		CHECK(system(cmd) == 0, "cleanup");
		free(pa);
		free(pb);
	}
	printf("new layouts: %d fixture models through QPK (%d reference digests), %d back to HF\n", nmod, ndig, nback);
}

/* Writer under allocation failure: a clean error, no temporary left. */
static void test_writer_alloc(void)
{
	mem mm;
	build_mem(&mm);
	char *p = tpath("alloc.qpk");
	for (wthreads = 0; wthreads <= 3; wthreads += 3) { /* 3: with compressing workers */
		int ok = 0, clean = 0, unclean = 0;
		for (long k = 1; k < 200 && !ok; k++) {
			qtk_err e;
			qtk_test_fail_alloc_at(k);
			int rc = write_mem(&mm, p, 1 << 20, &e);
			qtk_test_fail_alloc_at(0);
			if (!rc)
				ok = 1;
			else if (rc == QTK_E_IO)
				clean++;
			else
				unclean++;
		}
		CHECK(ok && clean > 5 && !unclean, "writer alloc sweep, %d threads: ok %d, clean %d, unclean %d", wthreads,
		      ok, clean, unclean);
	}
	/* abandoned while chunks are being compressed */
	qtk_err e;
	qtk_write_opts o = {0};
	o.threads = 3;
	qtk_writer *w = qtk_writer_open(p, QTK_OUT_QPK, mm.m, &o, &e);
	int rc = w ? 0 : 1;
	for (size_t i = 0; w && i < 5 && !rc; i++)
		for (int q = 0; q < mm.m->tensors[i].nparts && !rc; q++)
			rc = qtk_writer_put(w, mm.data[i][q], (size_t)mm.m->tensors[i].parts[q].nbytes);
	CHECK(!rc, "abandoned write: %s", e.msg);
	if (w)
		qtk_writer_abort(w);
	wthreads = 0;
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int tmps = 0;
	while (d && (de = readdir(d)))
		tmps += strstr(de->d_name, ".qtk-") != NULL;
	if (d)
		closedir(d);
	CHECK(!tmps, "%d temporaries left behind", tmps);
	unlink(p);
	free(p);
	free_mem(&mm);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_memory_roundtrip();
	test_trial();
	test_verify_async();
	test_writer_rejects();
	test_builder_valid();
	test_meta_stream();
	test_hostile();
	test_mutations();
	test_writer_alloc();
	test_read_ahead();
	test_new_kinds();
	test_new_writer_rejects();
	test_new_hostile();
	test_samples();
	test_fixtures();
	test_new_fixtures();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		printf("cannot remove %s\n", tmpdir);
	return T_DONE();
}
