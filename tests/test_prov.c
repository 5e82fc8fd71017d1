/* test_prov.c - content digests and provenance records: canonical names, container
 * independence, the Q/K permutation, streaming, record round trips, hostile record JSON. */
#include "t.h"
#include "dequant.h"
#include "quant.h"
#include "scheme/scheme.h"
#include "record/digest.h"
#include "record/prov.h"
#include <math.h>
#include <openssl/evp.h>
#include "record/sign.h"
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { E = 64, HEADS = 4, HEADS_KV = 2, KV = E / HEADS * HEADS_KV, FF = 96 };

static char g_dir[256];

typedef struct spec {
	const char *gguf, *hf;
	int rows, cols; /* rows 0: 1-D */
	int heads;      /* Q/K: heads for the permutation */
} spec;

static const spec specs[] = {
	{"token_embd.weight", "model.embed_tokens.weight", 32, E, 0},
	{"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight", 0, E, 0},
	{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", E, E, HEADS},
	{"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", KV, E, HEADS_KV},
	{"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", KV, E, 0},
	{"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", E, FF, 0},
	{"output.weight", "lm_head.weight", 32, E, 0},
};
#define NSPEC (sizeof specs / sizeof *specs)

static float *g_vals[NSPEC];

static size_t nvals(const spec *s) { return (size_t)(s->rows ? s->rows : 1) * (size_t)s->cols; }

/* Values exactly representable in F16, so F16 and F32 files hold the same values. */
static void make_values(void)
{
	uint64_t st = 12345;
	for (size_t i = 0; i < NSPEC; i++) {
		size_t n = nvals(&specs[i]);
		g_vals[i] = malloc(n * sizeof(float));
		for (size_t k = 0; k < n; k++) {
			st = st * 6364136223846793005ull + 1442695040888963407ull;
			float x = (float)((int)(st >> 52) - 2048) / 1024.0f;
			g_vals[i][k] = qtk_fp16_to_f32(qtk_f32_to_fp16(x));
		}
	}
}

/* llama.cpp's permutation: HF row (h, j, i) -> GGUF row (h, 2i + j). */
static void permute(const float *src, float *dst, int rows, int cols, int heads)
{
	int hd = rows / heads, half = hd / 2;
	for (int h = 0; h < heads; h++)
		for (int j = 0; j < 2; j++)
			for (int i = 0; i < half; i++)
				memcpy(dst + (size_t)(h * hd + 2 * i + j) * (size_t)cols,
				       src + (size_t)(h * hd + j * half + i) * (size_t)cols, (size_t)cols * sizeof *dst);
}

static void set_u32(qtk_model *m, const char *k, uint32_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

/* Write a model: gguf names+permuted rows (F32) or HF names (F32 or F16) to path. */
static int write_model(const char *path, qtk_out_kind kind, bool gguf_names, unsigned type, const char *record,
		       bool with_heads)
{
	qtk_model *d = qtk_model_new();
	if (gguf_names) {
		qtk_model_set_kv_str(d, "general.architecture", "llama");
		qtk_model_set_kv_str(d, "general.name", "test model");
		if (with_heads) {
			set_u32(d, "llama.attention.head_count", HEADS);
			set_u32(d, "llama.attention.head_count_kv", HEADS_KV);
		}
	}
	if (record)
		qtk_model_set_kv_str(d, QTK_PROV_KEY, record);
	for (size_t i = 0; i < NSPEC; i++) {
		const spec *s = &specs[i];
		qtk_tensor *t = qtk_model_add_tensor(d, gguf_names ? s->gguf : s->hf);
		t->ndim = s->rows ? 2 : 1;
		t->shape[0] = (uint64_t)(s->rows ? s->rows : s->cols);
		t->shape[1] = (uint64_t)s->cols;
		t->layout.type = type;
		t->nparts = 1;
		t->parts[0].type = type;
		t->parts[0].ndim = t->ndim;
		memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
		t->parts[0].nbytes = nvals(s) * (type == QTK_T_F32 ? 4 : 2);
		qtk_tensor_finish(t);
	}
	qtk_err err;
	qtk_writer *w = qtk_writer_open(path, kind, d, NULL, &err);
	int rc = w ? 0 : -1;
	for (size_t i = 0; i < NSPEC && !rc; i++) {
		const spec *s = &specs[i];
		size_t n = nvals(s);
		float *v = g_vals[i], *tmp = NULL;
		if (gguf_names && s->heads) {
			tmp = malloc(n * sizeof *tmp);
			permute(v, tmp, s->rows, s->cols, s->heads);
			v = tmp;
		}
		uint8_t *b = malloc(n * 4);
		for (size_t k = 0; k < n; k++) {
			if (type == QTK_T_F32) {
				uint32_t u;
				memcpy(&u, &v[k], 4);
				qtk_wr32(b + 4 * k, u);
			} else {
				qtk_wr16(b + 2 * k, qtk_f32_to_fp16(v[k]));
			}
		}
		rc = qtk_writer_put(w, b, n * (type == QTK_T_F32 ? 4 : 2));
		free(b);
		free(tmp);
	}
	if (w)
		rc = rc ? (qtk_writer_abort(w), rc) : qtk_writer_finish(w);
	if (rc)
		printf("write %s: %s %s\n", path, err.subject, err.msg);
	qtk_close(d);
	return rc;
}

static char *path_in(const char *name)
{
	static char b[4][512];
	static int k;
	k = (k + 1) % 4;
	snprintf(b[k], sizeof b[k], "%s/%s", g_dir, name);
	return b[k];
}

static int digest_file(const char *path, int threads, qtk_digests *d)
{
	qtk_err err;
	qtk_model *m = qtk_open(path, &err);
	if (!m) {
		printf("open %s: %s\n", path, err.msg);
		return -1;
	}
	qtk_digest_opts o = {.threads = threads};
	int rc = qtk_digest_model(m, &o, d, &err);
	if (rc)
		printf("digest %s: %s: %s\n", path, err.subject, err.msg);
	qtk_close(m);
	return rc;
}

static void test_names(void)
{
	static const char *const cases[][3] = {
		{"token_embd.weight", "model.embed_tokens.weight", ""},
		{"blk.12.attn_q.weight", "model.layers.12.self_attn.q_proj.weight", "q"},
		{"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", "k"},
		{"blk.0.attn_k.bias", "model.layers.0.self_attn.k_proj.bias", "k"},
		{"blk.3.attn_v.weight", "model.layers.3.self_attn.v_proj.weight", ""},
		{"blk.3.attn_output.weight", "model.layers.3.self_attn.o_proj.weight", ""},
		{"blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight", ""},
		{"blk.3.ffn_up.weight", "model.layers.3.mlp.up_proj.weight", ""},
		{"blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight", ""},
		{"blk.3.attn_norm.weight", "model.layers.3.input_layernorm.weight", ""},
		{"blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight", ""},
		{"output_norm.weight", "model.norm.weight", ""},
		{"output.weight", "lm_head.weight", ""},
		{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight", ""},
		{"blk.01.attn_q.weight", "blk.01.attn_q.weight", ""},
		{"blk.x.attn_q.weight", "blk.x.attn_q.weight", ""},
		{"blk.0.attn_q", "blk.0.attn_q", ""},
		{"blk.0.attn_qq.weight", "blk.0.attn_qq.weight", ""},
		{"rope_freqs.weight", "rope_freqs.weight", ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char b[256];
		int qk = -1;
		int rc = qtk_canon_name(NULL, cases[i][0], b, sizeof b, &qk);
		CHECK(rc >= 0 && !strcmp(b, cases[i][1]), "%s -> %s (want %s)", cases[i][0], b, cases[i][1]);
		CHECK(qk == (cases[i][2][0] ? cases[i][2][0] : 0), "%s: qk %d", cases[i][0], qk);
	}
	char small[8];
	int qk;
	CHECK(qtk_canon_name(NULL, "token_embd.weight", small, sizeof small, &qk) == QTK_E_DATA, "small buffer");
}

static void test_container_independence(void)
{
	const char *gg = path_in("a.gguf"), *st = path_in("a.safetensors"), *st16 = path_in("a16.safetensors");
	CHECK(!write_model(gg, QTK_OUT_GGUF, true, QTK_T_F32, NULL, true), "write gguf");
	CHECK(!write_model(st, QTK_OUT_SAFETENSORS, false, QTK_T_F32, NULL, true), "write safetensors");
	CHECK(!write_model(st16, QTK_OUT_SAFETENSORS, false, QTK_T_F16, NULL, true), "write f16 safetensors");
	qtk_digests a, a2, b, c;
	if (digest_file(gg, 1, &a) || digest_file(gg, 2, &a2) || digest_file(st, 0, &b) || digest_file(st16, 1, &c)) {
		CHECK(0, "digests computed");
		return;
	}
	CHECK(!memcmp(a.enc_root, a2.enc_root, 32) && !memcmp(a.dec_root, a2.dec_root, 32), "threads invariant");
	CHECK(a.complete && b.complete, "both tiers");
	CHECK(!memcmp(a.dec_root, b.dec_root, 32), "decoded root: GGUF (permuted Q/K) == safetensors (HF order)");
	CHECK(!memcmp(a.dec_root, c.dec_root, 32), "decoded root: F32 == F16 when the values are the same");
	CHECK(memcmp(a.enc_root, b.enc_root, 32) != 0, "encoded roots differ (Q/K rows stored permuted)");
	CHECK(memcmp(b.enc_root, c.enc_root, 32) != 0, "encoded roots differ (F32 vs F16 bytes)");
	CHECK(a.n_permuted == 2 && b.n_permuted == 0, "permuted leaves %d %d", a.n_permuted, b.n_permuted);
	for (size_t i = 0; i < a.n && i < b.n; i++) {
		const qtk_leaf *x = &a.leaf[i], *y = &b.leaf[i];
		CHECK(!strcmp(x->name, y->name), "same canonical names %s %s", x->name, y->name);
		bool qk = strstr(x->name, "q_proj") || strstr(x->name, "k_proj");
		CHECK(!memcmp(x->dec, y->dec, 32), "%s: decoded leaf", x->name);
		CHECK(qk == (memcmp(x->enc, y->enc, 32) != 0), "%s: encoded leaf equal unless Q/K", x->name);
		CHECK(qk == (x->qk_heads > 0), "%s: qk heads %d", x->name, x->qk_heads);
	}
	const qtk_leaf *q = qtk_digests_find(&a, "model.layers.0.self_attn.q_proj.weight");
	CHECK(q && !strcmp(q->stored, "blk.0.attn_q.weight") && q->qk_heads == HEADS, "find by canonical name");
	CHECK(!qtk_digests_find(&a, "blk.0.attn_q.weight"), "stored names are not keys");
	qtk_digests_free(&a);
	qtk_digests_free(&a2);
	qtk_digests_free(&b);
	qtk_digests_free(&c);

	/* a llama GGUF without head counts cannot be un-permuted: an error naming the key */
	const char *nh = path_in("noheads.gguf");
	CHECK(!write_model(nh, QTK_OUT_GGUF, true, QTK_T_F32, NULL, false), "write gguf without heads");
	qtk_err err;
	qtk_model *m = qtk_open(nh, &err);
	qtk_digests d;
	int rc = m ? qtk_digest_model(m, NULL, &d, &err) : -1;
	CHECK(rc == QTK_E_DATA && strstr(err.subject, "head_count"), "missing head count: %d %s", rc, err.subject);
	qtk_close(m);
}

static void plain2d(qtk_tensor *t, const char *name, unsigned type, uint64_t out, uint64_t in, uint64_t nbytes);
static int buf_collect(void *ctx, const uint8_t *p, size_t n) { return qtk_buf_put(ctx, p, n); }

static int put_refuses(void *ctx, const uint8_t *p, size_t n)
{
	(void)p;
	(void)n;
	return qtk_err_set(ctx, QTK_E_IO, "<out>", -1, NULL, "no room");
}

/* text with the first `from` replaced by `to` (malloc'd) */
static char *replaced(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	if (!at)
		return NULL;
	size_t a = (size_t)(at - text), fl = strlen(from), tl = strlen(to), n = strlen(text);
	char *r = malloc(n - fl + tl + 1);
	if (!r)
		return NULL;
	memcpy(r, text, a);
	memcpy(r + a, to, tl);
	memcpy(r + a + tl, at + fl, n - a - fl + 1);
	return r;
}

/* parse statement text t; 0 and the record's canonical text in *rec, or the error code */
static int stmt_rec(const char *t, char **rec, qtk_err *e)
{
	qtk_sig_manifest m;
	qtk_err_clear(e);
	*rec = NULL;
	int rc = qtk_sig_statement_parse((const uint8_t *)t, strlen(t), "stmt", &m, e);
	if (!rc) {
		*rec = m.qtk_record ? qtk_prov_canonical(m.qtk_record) : NULL;
		qtk_sig_manifest_free(&m);
	}
	return rc;
}

/* A signed statement holding a deployment record: made from the record's text (a raw item, no
 * tree) it equals the one made from the record's tree; read back, the record is read apart from
 * the statement's tree and gives the same record, also spaced out, while a key written with an
 * escape goes the whole tree's way to the same result; a record listed twice, one with a
 * repeated key and a null one are refused. The message made in place equals the copied one and
 * the bundle written in pieces reads back. */
static void test_sig_statement(void)
{
	const char *gg = path_in("di.gguf");
	qtk_err err;
	qtk_err_clear(&err);
	qtk_model *mod = qtk_open(gg, &err);
	qtk_digests d;
	qtk_filelist files;
	memset(&files, 0, sizeof files);
	char *rtext = NULL;
	if (!mod || qtk_digest_model(mod, NULL, &d, &err) || qtk_hash_model_files(mod, &files, &err) ||
	    qtk_prov_emit(mod, &d, &files, NULL, 7, &rtext, &err)) {
		CHECK(0, "a deployment record of %s: %s", gg, err.msg);
		qtk_close(mod);
		return;
	}
	qtk_filelist_free(&files);
	qtk_digests_free(&d);
	qtk_close(mod);
	cJSON *tree = NULL;
	CHECK(!qtk_prov_parse(rtext, strlen(rtext), "rec", &tree, &err), "record parses: %s", err.msg);
	qtk_sig_manifest m;
	memset(&m, 0, sizeof m);
	m.model_name = qtk_strdup("di");
	m.it = qtk_calloc(1, sizeof *m.it);
	m.it[0].name = qtk_strdup("di.gguf");
	m.it[0].alg = qtk_strdup("sha256");
	memset(m.it[0].digest, 7, 32);
	m.n = 1;
	char *t1 = NULL, *t2 = NULL;
	cJSON *raw = cJSON_CreateNull();
	raw->type = cJSON_Raw | cJSON_IsReference;
	raw->valuestring = rtext;
	CHECK(!qtk_sig_statement(&m, tree, &t1, &err) && !qtk_sig_statement(&m, raw, &t2, &err) && t1 && t2 &&
		      !strcmp(t1, t2),
	      "statement from the record's text == from its tree");
	cJSON_Delete(raw);
	qtk_json_tree_free(tree);
	char *back = NULL;
	CHECK(t1 && !stmt_rec(t1, &back, &err) && back && !strcmp(back, rtext), "record read back apart: %s", err.msg);
	free(back);
	/* spaced out around the record, and the key written with an escape (the tree's way) */
	char *sp = t1 ? replaced(t1, "\"qtk_record\":{", "\"qtk_record\" :\n {") : NULL;
	char *esc = t1 ? replaced(t1, "\"qtk_record\":", "\"qtk\\u005frecord\":") : NULL;
	CHECK(sp && !stmt_rec(sp, &back, &err) && back && !strcmp(back, rtext), "spaced statement: %s", err.msg);
	free(back);
	CHECK(esc && !stmt_rec(esc, &back, &err) && back && !strcmp(back, rtext), "escaped key: %s", err.msg);
	free(back);
	/* refused: the record twice (the second hidden from the structure walk by nothing), a
	 * repeated key inside it, a null record */
	char *twice = t1 ? replaced(t1, "\"qtk_record\":", "\"qtk_record\":null,\"qtk_record\":") : NULL;
	char *dup = t1 ? replaced(t1, "\"record_version\":1", "\"record_version\":1,\"record_version\":1") : NULL;
	char *nul = NULL;
	if (t1) {
		const char *a = strstr(t1, "\"qtk_record\":") + strlen("\"qtk_record\":");
		size_t ra = (size_t)(a - t1), rb = ra + strlen(rtext);
		nul = malloc(strlen(t1) + 8);
		if (nul)
			snprintf(nul, strlen(t1) + 8, "%.*snull%s", (int)ra, t1, t1 + rb);
	}
	int r1 = twice ? stmt_rec(twice, &back, &err) : -1;
	free(back);
	CHECK(r1 == QTK_E_DATA, "the record twice refused: %d %s", r1, err.msg);
	int r2 = dup ? stmt_rec(dup, &back, &err) : -1;
	free(back);
	CHECK(r2 == QTK_E_DATA && !strncmp(err.subject, "predicate.qtk_record", 20), "a repeated key in it: %d %s %s", r2,
	      err.subject, err.msg);
	int r3 = nul ? stmt_rec(nul, &back, &err) : -1;
	free(back);
	CHECK(r3 == QTK_E_DATA, "a null record refused: %d %s", r3, err.msg);
	free(sp);
	free(esc);
	free(twice);
	free(dup);
	free(nul);
	/* the message in place == copied; the bundle in pieces reads back */
	uint8_t *pa = NULL, *pb = NULL;
	size_t na = 0, nb = 0, n1 = t1 ? strlen(t1) : 0;
	/* in place: the payload behind room for the header, the header right before it */
	uint8_t *blk = t2 ? malloc(QTK_SIG_PAE_HEAD + n1) : NULL;
	if (blk) {
		char head[QTK_SIG_PAE_HEAD];
		const int h = qtk_sig_pae_head(n1, head);
		memcpy(blk + QTK_SIG_PAE_HEAD, t2, n1);
		memcpy(blk + QTK_SIG_PAE_HEAD - h, head, (size_t)h);
		pb = blk + QTK_SIG_PAE_HEAD - h;
		nb = (size_t)h + n1;
	}
	CHECK(t1 && blk && !qtk_sig_pae((const uint8_t *)t1, n1, &pa, &na) && na == nb && !memcmp(pa, pb, na),
	      "message made in place == copied");
	qtk_free(t2);
	t2 = NULL;
	qtk_buf bb = {0};
	uint8_t fake_sig[64];
	memset(fake_sig, 0xa5, sizeof fake_sig);
	char hint[65];
	memset(hint, 'a', 64);
	hint[64] = 0;
	qtk_err_clear(&err);
	CHECK(pb && !qtk_sig_bundle_write(pb + (nb - n1), n1, fake_sig, sizeof fake_sig, hint, buf_collect, &bb, &err),
	      "bundle written");
	qtk_sig_bundle sb;
	CHECK(bb.p && !qtk_sig_bundle_parse(bb.p, bb.len, "b.sig", &sb, &err) && sb.npayload == n1 &&
		      !memcmp(sb.payload, t1, n1) && sb.nsig == sizeof fake_sig && !memcmp(sb.sig, fake_sig, sb.nsig),
	      "bundle read back: %s", err.msg);
	CHECK(bb.p && !strcmp(sb.hint, hint), "the hint read back");
	if (bb.p)
		qtk_sig_bundle_free(&sb);
	qtk_buf_free(&bb);
	free(pa);
	free(blk);
	qtk_free(t1);
	qtk_sig_manifest_free(&m);
	qtk_free(rtext);
}

/* qverify's deployment record printed as it is made equals the one made whole, and a record's
 * SHA-256 hashed as its canonical text is made equals the hash of that text. */
static void test_emit_stream(void)
{
	const char *gg = path_in("di.gguf");
	qtk_err err;
	qtk_err_clear(&err);
	qtk_model *m = qtk_open(gg, &err);
	qtk_digests d;
	qtk_filelist files;
	memset(&files, 0, sizeof files);
	if (!m || qtk_digest_model(m, NULL, &d, &err) || qtk_hash_model_files(m, &files, &err)) {
		CHECK(0, "open, digest and hash %s: %s", gg, err.msg);
		qtk_close(m);
		return;
	}
	cJSON *emb = cJSON_CreateObject();
	cJSON_AddStringToObject(emb, "z", "last");
	cJSON_AddNumberToObject(emb, "a", 1);
	for (int with = 0; with < 2; with++) {
		char *whole = NULL;
		qtk_buf b = {0};
		int r1 = qtk_prov_emit(m, &d, &files, with ? emb : NULL, 7, &whole, &err);
		int r2 = qtk_prov_emit_stream(m, &d, &files, with ? emb : NULL, 7, buf_collect, &b, &err);
		CHECK(!r1 && !r2 && whole && b.len == strlen(whole) && !memcmp(b.p, whole, b.len),
		      "emitted as made == emitted whole (%s embedded record): %d %d", with ? "an" : "no", r1, r2);
		qtk_err e2;
		qtk_err_clear(&e2);
		int r3 = qtk_prov_emit_stream(m, &d, &files, NULL, 7, put_refuses, &e2, &e2);
		CHECK(r3 == QTK_E_IO && !strcmp(e2.msg, "no room"), "a failing put's error returned: %d %s", r3, e2.msg);
		qtk_free(whole);
		qtk_buf_free(&b);
	}
	cJSON_Delete(emb);
	/* a canonical text of several megabytes: hashed a megabyte at a time */
	cJSON *big = cJSON_CreateArray();
	char v[64];
	for (int i = 0; i < 60000; i++) {
		snprintf(v, sizeof v, "model.layers.%d.mlp.experts.%d.w.weight", i / 64, i % 64);
		cJSON_AddItemToArray(big, cJSON_CreateString(v));
	}
	char *c = qtk_prov_canonical(big);
	uint8_t h1[32], h2[32];
	unsigned hl = 0;
	CHECK(c && strlen(c) > (2u << 20) && EVP_Digest(c, strlen(c), h1, &hl, EVP_sha256(), NULL) == 1 &&
		      !qtk_prov_sha256(big, h2) && !memcmp(h1, h2, 32),
	      "qtk_prov_sha256 of %zu bytes of canonical text", c ? strlen(c) : 0);
	cJSON *bad = cJSON_CreateString("\xff");
	CHECK(qtk_prov_sha256(bad, h2) == QTK_E_IO, "a text that cannot be canonical has no hash");
	cJSON_Delete(bad);
	qtk_free(c);
	cJSON_Delete(big);
	qtk_filelist_free(&files);
	qtk_digests_free(&d);
	qtk_close(m);
}


static bool same_leaf(const qtk_leaf *x, const qtk_leaf *y)
{
	return !strcmp(x->name, y->name) && !strcmp(x->stored, y->stored) && x->enc_id == y->enc_id &&
	       x->ndim == y->ndim && !memcmp(x->shape, y->shape, sizeof x->shape) && x->n_bytes == y->n_bytes &&
	       !memcmp(x->enc, y->enc, 32) && !memcmp(x->dec, y->dec, 32) && x->dec_kind == y->dec_kind &&
	       x->has_enc == y->has_enc && x->has_dec == y->has_dec && x->qk_heads == y->qk_heads && x->bad == y->bad;
}

/* A model's description (qtk_digest_describe) filled in by qtk_digest_model_into: the leaves
 * qtk_digest_model makes, where they were described; a model other than the one described is
 * refused and the description kept. */
static void test_describe_into(void)
{
	const char *gg = path_in("di.gguf"), *st = path_in("di.safetensors"), *st16 = path_in("di16.safetensors");
	CHECK(!write_model(gg, QTK_OUT_GGUF, true, QTK_T_F32, NULL, true), "write gguf");
	CHECK(!write_model(st, QTK_OUT_SAFETENSORS, false, QTK_T_F32, NULL, true), "write safetensors");
	CHECK(!write_model(st16, QTK_OUT_SAFETENSORS, false, QTK_T_F16, NULL, true), "write f16 safetensors");
	const char *paths[] = {gg, st};
	for (int pi = 0; pi < 2; pi++) {
		for (int threads = 1; threads <= 2; threads++) {
			qtk_err err;
			qtk_model *m = qtk_open(paths[pi], &err);
			if (!m) {
				CHECK(0, "open %s: %s", paths[pi], err.msg);
				continue;
			}
			qtk_digests whole, d;
			/* two threads: the files read once for their SHA-256 and the leaves (ftap) */
			uint8_t (*fsha)[32] = threads == 2 ? calloc(m->nfiles ? m->nfiles : 1, 32) : NULL;
			qtk_digest_opts o = {.threads = threads, .file_sha = fsha};
			CHECK(!qtk_digest_model(m, &o, &whole, &err), "whole: %s", err.msg);
			CHECK(threads == 1 || whole.n_with_files > 0, "tensors hashed from the files' read");
			CHECK(!qtk_digest_describe(m, &d, &err), "describe: %s", err.msg);
			CHECK(d.n == m->ntensors && d.of_tensor && !d.complete, "described %zu of %zu", d.n, m->ntensors);
			bool sorted = true, mapped = true, bare = true;
			for (size_t i = 0; i < d.n; i++) {
				sorted = sorted && (!i || strcmp(d.leaf[i - 1].name, d.leaf[i].name) < 0);
				mapped = mapped && d.of_tensor[i] < d.n && !strcmp(d.leaf[d.of_tensor[i]].stored, m->tensors[i].name);
				bare = bare && !d.leaf[i].has_enc && !d.leaf[i].has_dec;
			}
			CHECK(sorted && mapped && bare, "sorted %d, tensor i's leaf %d, no digests %d", sorted, mapped, bare);
			const qtk_leaf *first = d.n ? &d.leaf[0] : NULL;
			const char *first_name = first ? first->name : NULL;
			CHECK(!qtk_digest_model_into(m, &o, &d, &err), "into: %s", err.msg);
			CHECK(!qtk_digests_finish(&d, &err), "finish: %s", err.msg);
			CHECK(d.n_with_files == whole.n_with_files, "as many from the files' read: %zu %zu", d.n_with_files,
			      whole.n_with_files);
			CHECK(d.n && &d.leaf[0] == first && d.leaf[0].name == first_name, "leaves not moved");
			CHECK(d.complete && !memcmp(d.enc_root, whole.enc_root, 32) && !memcmp(d.dec_root, whole.dec_root, 32),
			      "%s, %d threads: roots of qtk_digest_model", paths[pi], threads);
			bool same = d.n == whole.n;
			for (size_t i = 0; same && i < d.n; i++)
				same = same_leaf(&d.leaf[i], &whole.leaf[i]);
			CHECK(same, "%s, %d threads: every leaf that of qtk_digest_model", paths[pi], threads);
			qtk_digests_free(&d);

			/* only the selected tensors are read: the others keep their description */
			bool *sel = calloc(m->ntensors ? m->ntensors : 1, 1);
			for (size_t i = 0; sel && i < m->ntensors; i += 2)
				sel[i] = true;
			qtk_digest_opts os = {.threads = threads, .select = sel};
			CHECK(sel && !qtk_digest_describe(m, &d, &err) && !qtk_digest_model_into(m, &os, &d, &err),
			      "selected: %s", err.msg);
			bool sel_ok = true;
			for (size_t i = 0; i < m->ntensors && d.of_tensor; i++) {
				const qtk_leaf *l = &d.leaf[d.of_tensor[i]];
				const qtk_leaf *w = qtk_digests_find(&whole, l->name);
				sel_ok = sel_ok && w && (sel[i] ? same_leaf(l, w) : !l->has_enc && !l->has_dec);
			}
			CHECK(sel_ok, "selected leaves hashed, the others bare");
			qtk_digests_free(&d);
			free(sel);

			/* a scheme other than the description's, and digests that are no description */
			qtk_digest_opts v1 = {.threads = threads, .scheme = QTK_DIGEST_V1};
			CHECK(!qtk_digest_describe(m, &d, &err), "describe again");
			CHECK(qtk_digest_model_into(m, &v1, &d, &err) == QTK_E_INTERNAL, "another scheme refused");
			qtk_digest_opts kg = {.threads = threads, .keep_going = true};
			CHECK(qtk_digest_model_into(m, &kg, &d, &err) == QTK_E_INTERNAL && !d.leaf[0].has_enc,
			      "keep_going refused, the description kept");
			qtk_digests_free(&d);
			CHECK(qtk_digest_model_into(m, &o, &whole, &err) == QTK_E_INTERNAL, "not a description: refused");
			qtk_digests_free(&whole);
			free(fsha);
			qtk_close(m);
		}
	}
	/* the F16 file into the F32 file's description (same names, another encoding): refused,
	 * naming the tensor, and the description left as it was */
	qtk_err err;
	qtk_model *a = qtk_open(st, &err), *b = qtk_open(st16, &err);
	qtk_digests d;
	if (a && b && !qtk_digest_describe(a, &d, &err)) {
		const char *enc0 = d.leaf[0].enc_id;
		qtk_digest_opts o = {.threads = 2};
		qtk_err_clear(&err);
		int rc = qtk_digest_model_into(b, &o, &d, &err);
		CHECK(rc == QTK_E_DATA && strstr(err.msg, "not the one described") && err.subject[0],
		      "another file refused: %d %s: %s", rc, err.subject, err.msg);
		CHECK(d.n == a->ntensors && d.leaf[0].enc_id == enc0 && !d.leaf[0].has_enc, "description kept");
		qtk_digests_free(&d);
	} else {
		CHECK(0, "open and describe: %s", err.msg);
	}
	qtk_close(a);
	qtk_close(b);

	/* two tensors with one canonical name: refused as qtk_digests_finish refuses them */
	qtk_model *c = qtk_model_new();
	const char *names[] = {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight"};
	for (int i = 0; c && i < 2; i++) {
		qtk_tensor *t = qtk_model_add_tensor(c, names[i]);
		if (t) {
			char *nm = t->name;
			plain2d(t, nm, QTK_T_F32, 2, 4, 32);
		}
	}
	CHECK(c && c->ntensors == 2, "collision model");
	qtk_err_clear(&err);
	int rc = c ? qtk_digest_describe(c, &d, &err) : -1;
	CHECK(rc == QTK_E_DATA && strstr(err.msg, "canonical name") && d.n == 0 && !d.leaf && !d.of_tensor,
	      "canonical collision refused, nothing kept: %d %s", rc, err.msg);
	qtk_close(c);
}

/* A plain 2-D tensor [out][in] of one part of type `type` and nbytes bytes, named name. */
static void plain2d(qtk_tensor *t, const char *name, unsigned type, uint64_t out, uint64_t in, uint64_t nbytes)
{
	qtk_tensor_clear(t);
	t->name = (char *)name;
	t->ndim = 2;
	t->shape[0] = out;
	t->shape[1] = in;
	t->layout.type = type;
	t->nparts = 1;
	t->parts[0].type = type;
	t->parts[0].ndim = 2;
	memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
	t->parts[0].nbytes = nbytes;
	qtk_tensor_finish(t);
}

/* A plain 1-D tensor's leaf in a scheme, its bytes put in odd pieces (step > 0) or whole. */
/* The leaf of a plain tensor of nv values (rows of them when heads > 0: Q/K rows stored in
 * llama.cpp's order, un-permuted by the decoded tier), its bytes put in steps of `step`. */
static int plain_leaf_rows(unsigned type, const void *bytes, uint64_t nv, uint64_t rows, int heads, int scheme,
			   size_t step, qtk_leaf *l)
{
	qtk_tensor t = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&t);
	t.name = (char *)"x.weight";
	t.ndim = heads > 0 ? 2 : 1;
	t.shape[0] = heads > 0 ? rows : nv;
	t.shape[1] = heads > 0 ? nv / rows : 0;
	t.layout.type = type;
	t.nparts = 1;
	t.parts[0].type = type;
	t.parts[0].ndim = t.ndim;
	memcpy(t.parts[0].shape, t.shape, sizeof t.shape);
	t.parts[0].nbytes = nv * (type == QTK_T_F32 ? 4 : 2);
	qtk_tensor_finish(&t);
	qtk_err err;
	qtk_thash *h;
	int rc = qtk_thash_new_scheme(NULL, &t, heads, scheme, &h, &err);
	const uint8_t *b = bytes;
	size_t n = (size_t)t.parts[0].nbytes;
	for (size_t i = 0, k = step ? step : n; i < n && !rc; i += k, k = step ? k % 997 + step : n)
		rc = qtk_thash_put(h, b + i, i + k > n ? n - i : k);
	rc = rc ? rc : qtk_thash_end(h, l);
	if (!rc) {
		qtk_free(l->name);
		qtk_free(l->stored);
	}
	return rc;
}

static int plain_leaf(unsigned type, const void *bytes, uint64_t nv, int scheme, size_t step, qtk_leaf *l)
{
	return plain_leaf_rows(type, bytes, nv, 0, 0, scheme, step, l);
}

/* Every binary16 pattern in turn from k0 in h16 (none with an all-ones exponent before index
 * `finite`), bfloat16 patterns in b16, and the same values as F32 bits in f and g. */
static void fill16(uint16_t *h16, uint16_t *b16, uint32_t *f, uint32_t *g, uint64_t nv, uint32_t k0,
		   uint64_t finite)
{
	uint32_t k = k0;
	for (uint64_t i = 0; i < nv; i++, k = (k + 40503u) & 0xffffu) {
		uint16_t x = (uint16_t)k;
		if (i < finite && (x & 0x7c00u) == 0x7c00u)
			x &= 0xbfffu;
		h16[i] = x;
		b16[i] = (uint16_t)(k * 7u + 1u);
		float v = qtk_fp16_to_f32(x);
		memcpy(&f[i], &v, 4);
		g[i] = (uint32_t)b16[i] << 16;
	}
}

/* Q/K rows stored permuted in F16 or BF16 are un-permuted as their 16-bit values and hashed in
 * their own form when a piece allows it (else decoded): the decoded leaf is that of the same
 * values stored as F32, whole pieces, a short one, infinities and NaNs in the later heads. */
static void test_v2_heads16(void)
{
	const uint64_t rows = 512, cols = 1040, nv = rows * cols; /* two whole pieces and a short one */
	const int heads = 4;
	uint16_t *h16 = malloc(nv * 2), *b16 = malloc(nv * 2);
	uint32_t *f = malloc(nv * 4), *g = malloc(nv * 4);
	fill16(h16, b16, f, g, nv, 7, nv / 2); /* infinities and NaNs in the last two heads */
	qtk_leaf a, b, c, a0;
	CHECK(!plain_leaf_rows(QTK_T_F16, h16, nv, rows, heads, QTK_DIGEST_V2, 0, &a) &&
	      !plain_leaf_rows(QTK_T_F32, f, nv, rows, heads, QTK_DIGEST_V2, 0, &b) &&
	      !plain_leaf_rows(QTK_T_F16, h16, nv, rows, heads, QTK_DIGEST_V2, 4099, &c) &&
	      !plain_leaf(QTK_T_F16, h16, nv, QTK_DIGEST_V2, 0, &a0),
	      "f16 leaves with heads");
	CHECK(!memcmp(a.dec, b.dec, 32) && !memcmp(a.dec, c.dec, 32), "permuted f16 = f32 values");
	CHECK(memcmp(a.dec, a0.dec, 32), "un-permuted: another order of the values");
	CHECK(!plain_leaf_rows(QTK_T_BF16, b16, nv, rows, heads, QTK_DIGEST_V2, 0, &a) &&
	      !plain_leaf_rows(QTK_T_F32, g, nv, rows, heads, QTK_DIGEST_V2, 0, &b) &&
	      !plain_leaf_rows(QTK_T_BF16, b16, nv, rows, heads, QTK_DIGEST_V2, 777, &c),
	      "bf16 leaves with heads");
	CHECK(!memcmp(a.dec, b.dec, 32) && !memcmp(a.dec, c.dec, 32), "permuted bf16 = f32 values");
	free(h16);
	free(b16);
	free(f);
	free(g);
}

/* qtk-digest-v2's decoded pieces: an F16 or BF16 tensor whose pieces are hashed as its own bytes
 * (both tiers from one SHA-256) has the decoded leaf of the same values stored as F32 (hashed
 * through the form tests), for every binary16 and bfloat16 pattern, infinities and NaNs included;
 * a value one F32 ulp away from a binary16 value is never taken for one; version 1 differs. */
static void test_v2_forms(void)
{
	const uint64_t nv = (1u << 18) * 2 + 4321; /* two whole pieces and a short one */
	uint16_t *h16 = malloc(nv * 2), *b16 = malloc(nv * 2);
	uint32_t *f = malloc(nv * 4), *g = malloc(nv * 4);
	fill16(h16, b16, f, g, nv, 0, 1u << 18); /* the first piece: no inf/NaN (shared) */
	qtk_leaf a, b, c, d, e1;
	CHECK(!plain_leaf(QTK_T_F16, h16, nv, QTK_DIGEST_V2, 0, &a) && !plain_leaf(QTK_T_F32, f, nv, QTK_DIGEST_V2, 0, &b) &&
	      !plain_leaf(QTK_T_F16, h16, nv, QTK_DIGEST_V2, 4099, &c),
	      "f16 leaves");
	CHECK(!memcmp(a.dec, b.dec, 32) && !memcmp(a.dec, c.dec, 32) && !memcmp(a.enc, c.enc, 32), "f16 = f32 values");
	CHECK(memcmp(a.enc, b.enc, 32), "encodings differ");
	CHECK(!plain_leaf(QTK_T_F16, h16, nv, QTK_DIGEST_V1, 0, &d) && memcmp(a.dec, d.dec, 32) && memcmp(a.enc, d.enc, 32),
	      "v1 differs");
	CHECK(!plain_leaf(QTK_T_F32, f, nv, QTK_DIGEST_V1, 0, &e1) && !memcmp(d.dec, e1.dec, 32), "v1 f16 = f32 values");
	CHECK(!plain_leaf(QTK_T_BF16, b16, nv, QTK_DIGEST_V2, 0, &a) && !plain_leaf(QTK_T_F32, g, nv, QTK_DIGEST_V2, 0, &b) &&
	      !plain_leaf(QTK_T_BF16, b16, nv, QTK_DIGEST_V2, 777, &c),
	      "bf16 leaves");
	CHECK(!memcmp(a.dec, b.dec, 32) && !memcmp(a.dec, c.dec, 32), "bf16 = f32 values");
	/* bfloat16 values that are all binary16 values: one leaf for the three encodings */
	for (uint64_t i = 0; i < nv; i++) {
		b16[i] = (uint16_t)(0x3f80u + (i * 13u) % 0x0380u); /* 1.0 .. 2^7, 8-bit significands */
		g[i] = (uint32_t)b16[i] << 16;
		float v;
		memcpy(&v, &g[i], 4);
		h16[i] = qtk_f32_to_fp16(v);
	}
	CHECK(!plain_leaf(QTK_T_BF16, b16, nv, QTK_DIGEST_V2, 0, &a) && !plain_leaf(QTK_T_F32, g, nv, QTK_DIGEST_V2, 0, &b) &&
	      !plain_leaf(QTK_T_F16, h16, nv, QTK_DIGEST_V2, 0, &c),
	      "bf16 in f16 leaves");
	CHECK(!memcmp(a.dec, b.dec, 32) && !memcmp(a.dec, c.dec, 32), "bf16 = f32 = f16 values");
	/* a value just off a binary16 value (below its precision, at every exponent) is not narrowed:
	 * both leaves are exact, so they differ; narrowing it would drop the extra bit and make them equal */
	const uint64_t m = 4096;
	int bad = 0;
	for (uint32_t e = 103; e <= 143; e++) {
		const uint32_t fit = e == 143 ? 0x477fe000u : e << 23, sh = e >= 113 ? 13 : 126 - e;
		const uint32_t off[3] = {1u, 1u << (sh - 1), e == 143 ? 0x2000u : 1u << (sh - 1)};
		for (int i = 0; i < 3; i++) {
			for (uint64_t j = 0; j < m; j++)
				f[j] = 0x3c000000u + (uint32_t)(j << 13); /* binary16 values */
			f[m / 2] = fit;
			qtk_leaf x, y;
			int rc = plain_leaf(QTK_T_F32, f, m, QTK_DIGEST_V2, 0, &x);
			f[m / 2] = fit + off[i];
			rc = rc ? rc : plain_leaf(QTK_T_F32, f, m, QTK_DIGEST_V2, 0, &y);
			if (rc || !memcmp(x.dec, y.dec, 32))
				bad++;
		}
	}
	CHECK(!bad, "%d values off binary16 taken for binary16", bad);
	free(h16);
	free(b16);
	free(f);
	free(g);
}

/* Streaming in odd pieces gives the same leaf as whole puts, for a quantized type too. */
static void test_streaming(void)
{
	qtk_tensor t = QTK_TENSOR_LOCAL;
	plain2d(&t, "blk.0.ffn_up.weight", QTK_T_Q8_0, 96, 256, 96 * 256 / 32 * 34);
	size_t n = (size_t)t.parts[0].nbytes;
	uint8_t *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < n; i += 34)
		qtk_wr16(b + i, qtk_f32_to_fp16(0.01f * (float)(i % 97)));
	qtk_leaf l1, l2;
	qtk_err err;
	qtk_thash *h;
	CHECK(!qtk_thash_new(NULL, &t, 0, &h, &err) && !qtk_thash_put(h, b, n) && !qtk_thash_end(h, &l1), "whole");
	CHECK(!qtk_thash_new(NULL, &t, 0, &h, &err), "new");
	int rc = 0;
	for (size_t i = 0, k = 1; i < n && !rc; i += k, k = k % 31 + 6)
		rc = qtk_thash_put(h, b + i, i + k > n ? n - i : k);
	CHECK(!rc && !qtk_thash_end(h, &l2), "pieces");
	CHECK(!memcmp(l1.enc, l2.enc, 32) && !memcmp(l1.dec, l2.dec, 32), "same leaves");
	CHECK(!strcmp(l1.enc_id, "ggml:q8_0") && !strcmp(l1.name, "model.layers.0.mlp.up_proj.weight"), "%s %s",
	      l1.enc_id, l1.name);
	qtk_free(l1.name);
	qtk_free(l1.stored);
	qtk_free(l2.name);
	qtk_free(l2.stored);
	/* too little or too much data */
	CHECK(!qtk_thash_new(NULL, &t, 0, &h, &err), "new");
	CHECK(!qtk_thash_put(h, b, n - 1) && qtk_thash_end(h, &l2) == QTK_E_DATA, "short data rejected");
	CHECK(!qtk_thash_new(NULL, &t, 0, &h, &err), "new");
	CHECK(qtk_thash_put(h, b, n) == 0 && qtk_thash_put(h, b, 1) == QTK_E_DATA, "extra data rejected");
	qtk_thash_free(h);
	free(b);
}

/* sha256 of n bytes */
static void sha(const void *p, size_t n, uint8_t d[32])
{
	unsigned l = 0;
	EVP_Digest(p, n, d, &l, EVP_sha256(), NULL);
}

static void put_u32(uint8_t **w, uint32_t v)
{
	qtk_wr32(*w, v);
	*w += 4;
}

/* The leaves of tensor t from its parts, fed in pieces of at most `piece` bytes (0: each part
 * whole), in digest scheme `scheme` (0: the current one), Q/K rows with `heads`; 0 or the error. */
static int leaf_of(const qtk_tensor *t, const void *const *parts, int heads, int scheme, size_t piece, qtk_leaf *out)
{
	qtk_err err;
	qtk_thash *h;
	int rc = qtk_thash_new_scheme(NULL, t, heads, scheme, &h, &err);
	for (int p = 0; p < t->nparts && !rc; p++)
		for (size_t off = 0, n = (size_t)t->parts[p].nbytes, c = piece ? piece : n; off < n && !rc; off += c)
			rc = qtk_thash_put(h, (const uint8_t *)parts[p] + off, n - off < c ? n - off : c);
	if (rc) {
		qtk_thash_free(h);
		return rc;
	}
	return qtk_thash_end(h, out);
}

/* The decoded leaf's header in digest version ver (3, 4) of a tensor [rows][cols] */
static uint8_t *dec_head(uint8_t *h, int ver, const char *canon, uint32_t rows, uint32_t cols)
{
	char tag[32];
	snprintf(tag, sizeof tag, "qtk-tensor-v%d/decoded", ver);
	memcpy(h, tag, strlen(tag) + 1); /* with its NUL */
	h += strlen(tag) + 1;
	put_u32(&h, (uint32_t)strlen(canon));
	memcpy(h, canon, strlen(canon));
	h += strlen(canon);
	put_u32(&h, 2);
	qtk_wr64(h, rows);
	qtk_wr64(h + 8, cols);
	qtk_wr64(h + 16, (uint64_t)rows * cols);
	return h + 24;
}

/* The decoded leaf (versions 3 and 4, the current one) of a tensor [rows][cols] of integer runs
 * (k [rows][cols], the scales' F32 bits s [rows][cols/32]) in canonical row order, written out as
 * docs/provenance.md specifies it: the test's own rendering of the spec. */
static void runs_leaf_v(int ver, const char *canon, uint32_t rows, uint32_t cols, const int16_t *k,
			const uint32_t *s, uint8_t leaf[32])
{
	const size_t nv = (size_t)rows * cols, piece = (size_t)1 << 18;
	size_t hn = 64 + strlen(canon) + (nv / piece + 1) * 33;
	uint8_t *hb = malloc(hn), *h = hb, *wb = malloc(piece / 32 * (4 + 64));
	h = dec_head(h, ver, canon, rows, cols);
	for (size_t p0 = 0; p0 < nv; p0 += piece) {
		const size_t n = nv - p0 < piece ? nv - p0 : piece;
		bool narrow = true;
		for (size_t i = 0; i < n; i++)
			narrow &= k[p0 + i] >= -128 && k[p0 + i] <= 127;
		uint8_t *w = wb;
		for (size_t r = 0; r < n / 32; r++) {
			put_u32(&w, s[(p0 / 32) + r]);
			for (size_t i = 0; i < 32; i++) {
				const int16_t v = k[p0 + 32 * r + i];
				if (narrow) {
					*w++ = (uint8_t)(int8_t)v;
				} else {
					qtk_wr16(w, (uint16_t)v);
					w += 2;
				}
			}
		}
		*h++ = narrow ? 8 : 9;
		sha(wb, (size_t)(w - wb), h);
		h += 32;
	}
	sha(hb, (size_t)(h - hb), leaf);
	free(hb);
	free(wb);
}

/* ... in the current version (4: version 3's runs under its own tags) */
static void runs_leaf(const char *canon, uint32_t rows, uint32_t cols, const int16_t *k, const uint32_t *s,
		      uint8_t leaf[32])
{
	runs_leaf_v(QTK_DIGEST_V4, canon, rows, cols, k, s, leaf);
}

/* ---- version 4: ggml's affine layouts as sub-blocks (A, M, codes) ---------------------------- */

typedef struct aff_type {
	unsigned type;
	const char *name;
	uint32_t blck, bpb, sub;
	int f16[2]; /* byte offsets of the block's fp16 scales (-1: none) */
} aff_type;

static const aff_type AFF[] = {
	{QTK_T_Q4_1, "q4_1", 32, 20, 32, {0, 2}},      {QTK_T_Q5_1, "q5_1", 32, 24, 32, {0, 2}},
	{QTK_T_IQ4_NL, "iq4_nl", 32, 18, 32, {0, -1}}, {QTK_T_IQ4_XS, "iq4_xs", 256, 136, 32, {0, -1}},
	{QTK_T_Q2_K, "q2_k", 256, 84, 16, {80, 82}},   {QTK_T_Q3_K, "q3_k", 256, 110, 16, {108, -1}},
	{QTK_T_Q4_K, "q4_k", 256, 144, 32, {0, 2}},    {QTK_T_Q5_K, "q5_k", 256, 176, 32, {0, 2}},
	{QTK_T_Q6_K, "q6_k", 256, 210, 16, {208, -1}},
};

static float h16(const uint8_t *p) { return qtk_fp16_to_f32(qtk_rd16(p)); }

/* The test's own reading of ggml's block layouts, value by value: value v of block x is
 * A * c - M with sub-block v / sub's A and M and value v's code c. */
static void aff_value(const aff_type *T, const uint8_t *x, uint32_t v, float *A, float *M, int *c)
{
	static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
	const uint32_t j = v % 32;
	*M = 0.f;
	switch (T->type) {
	case QTK_T_Q4_1:
	case QTK_T_Q5_1: {
		const uint8_t *qs = x + (T->type == QTK_T_Q5_1 ? 8 : 4);
		const uint32_t qh = T->type == QTK_T_Q5_1 ? qtk_rd32(x + 4) : 0;
		*A = h16(x);
		*M = -h16(x + 2);
		*c = (j < 16 ? qs[j] & 15 : qs[j - 16] >> 4) | (int)(((qh >> j) & 1) << 4);
		return;
	}
	case QTK_T_IQ4_NL:
		*A = h16(x);
		*c = kv[j < 16 ? x[2 + j] & 15 : x[2 + j - 16] >> 4];
		return;
	case QTK_T_IQ4_XS: {
		const uint32_t ib = v / 32;
		const int ls = ((x[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((qtk_rd16(x + 2) >> (2 * ib)) & 3) << 4);
		const uint8_t *qs = x + 8 + 16 * ib;
		*A = h16(x) * (float)(ls - 32);
		*c = kv[j < 16 ? qs[j] & 15 : qs[j - 16] >> 4];
		return;
	}
	case QTK_T_Q2_K:
	case QTK_T_Q3_K: {
		const uint32_t half = v / 128, w = v % 128, shift = 2 * (w / 32), hh = (w % 32) / 16, l = w % 16, is = v / 16;
		const uint8_t *q = x + (T->type == QTK_T_Q2_K ? 16 : 32) + 32 * half;
		const int low = (q[16 * hh + l] >> shift) & 3;
		if (T->type == QTK_T_Q2_K) {
			*A = h16(x + 80) * (float)(x[is] & 15);
			*M = h16(x + 82) * (float)(x[is] >> 4);
			*c = low;
		} else {
			const uint8_t *b = x + 96;
			/* scale is: low 4 bits from byte is % 8 (low nibble for is < 8), high 2 from byte 8 + is % 4 */
			const int lo4 = is < 8 ? b[is] & 15 : b[is - 8] >> 4, hi2 = (b[8 + is % 4] >> (2 * (is / 4))) & 3;
			*A = h16(x + 108) * (float)((lo4 | hi2 << 4) - 32);
			*c = low - ((x[16 * hh + l] >> (v / 32)) & 1 ? 0 : 4);
		}
		return;
	}
	case QTK_T_Q4_K:
	case QTK_T_Q5_K: {
		const uint32_t sb = v / 32;
		const uint8_t *sc = x + 4;
		int scale, min;
		if (sb < 4) {
			scale = sc[sb] & 63;
			min = sc[sb + 4] & 63;
		} else {
			scale = (sc[sb + 4] & 15) | ((sc[sb - 4] >> 6) << 4);
			min = (sc[sb + 4] >> 4) | ((sc[sb] >> 6) << 4);
		}
		*A = h16(x) * (float)scale;
		*M = h16(x + 2) * (float)min;
		const uint8_t *q = x + (T->type == QTK_T_Q5_K ? 48 : 16) + 32 * (sb / 2);
		*c = (sb % 2 ? q[j] >> 4 : q[j] & 15) + (T->type == QTK_T_Q5_K ? ((x[16 + j] >> sb) & 1) << 4 : 0);
		return;
	}
	case QTK_T_Q6_K: {
		const uint32_t n = v / 128, w = v % 128, quarter = w / 32, l = w % 32;
		const uint8_t *ql = x + 64 * n, *qh = x + 128 + 32 * n;
		const int low4 = quarter & 1 ? ql[l + 32] : ql[l];
		*A = h16(x + 208) * (float)(int8_t)x[192 + 8 * n + w / 16];
		*c = ((quarter < 2 ? low4 & 15 : low4 >> 4) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
		return;
	}
	default:
		*A = 0.f;
		*c = 0;
	}
}

/* Every affine type as a Q/K matrix (4 heads, 1.25 pieces): each value is A * c - M rounded
 * twice, bit for bit the decoder's; the version 4 leaf is the spec's writing (rows in Hugging Face
 * order, forms 10 and 11), whole and fed in odd pieces; a one-bit change of a code changes it;
 * version 3 still hashes the F32 values. */
static void test_aff(void)
{
	const uint32_t out = 1280, in = 256, heads = 4, hd = out / heads;
	for (size_t ti = 0; ti < sizeof AFF / sizeof *AFF; ti++) {
		const aff_type *T = &AFF[ti];
		const uint64_t nv = (uint64_t)out * in, nb = nv / T->blck;
		const size_t nbytes = (size_t)nb * T->bpb;
		uint8_t *blk = malloc(nbytes);
		uint32_t r = 777u + (uint32_t)ti;
		for (size_t i = 0; i < nbytes; i++) {
			r = r * 1664525u + 1013904223u;
			blk[i] = (uint8_t)(r >> 24);
		}
		for (uint64_t b = 0; b < nb; b++) /* finite scales; the second (min, or q4_1's m) of either sign */
			for (int f = 0; f < 2; f++)
				if (T->f16[f] >= 0)
					qtk_wr16(blk + b * T->bpb + (size_t)T->f16[f],
						 (uint16_t)((f && b % 3 == 1 ? 0x8000u : 0u) | (0x1800u + (b * 37u + (unsigned)f * 101u) % 0x2000u)));
		float *y = malloc(nv * sizeof *y);
		CHECK(!qtk_dequant_ggml(T->type, blk, y, nv), "%s: decode", T->name);
		/* the writing, rows in Hugging Face order */
		const size_t rb = 8 + T->sub, row_w = (size_t)(in / T->sub) * rb;
		uint8_t *wr = malloc((size_t)out * row_w);
		uint64_t bad = 0;
		for (uint32_t o = 0; o < out; o++) {
			const uint32_t hh = o / hd, rr = o % hd, hf = hh * hd + (rr % 2) * (hd / 2) + rr / 2;
			for (uint32_t i = 0; i < in; i++) {
				const uint64_t vi = (uint64_t)o * in + i;
				const uint8_t *x = blk + (vi / T->blck) * T->bpb;
				float A, M;
				int c;
				aff_value(T, x, (uint32_t)(vi % T->blck), &A, &M, &c);
				const float p = A * (float)c, val = p - M;
				uint32_t vb, yb;
				memcpy(&vb, &val, 4);
				memcpy(&yb, &y[vi], 4);
				bad += vb != yb;
				uint8_t *w = wr + (size_t)hf * row_w + (i / T->sub) * rb;
				if (i % T->sub == 0) {
					uint32_t ab, mb;
					memcpy(&ab, &A, 4);
					memcpy(&mb, &M, 4);
					qtk_wr32(w, ab);
					qtk_wr32(w + 4, mb);
				}
				w[8 + i % T->sub] = (uint8_t)(int8_t)c;
			}
		}
		CHECK(!bad, "%s: %llu values are not A * c - M as the decoder computes them", T->name, (unsigned long long)bad);
		/* the leaf as the spec writes it: per 2^18 values, the form and the SHA-256 of its sub-blocks */
		const char *canon = "model.layers.0.self_attn.q_proj.weight";
		const uint64_t piece = (uint64_t)1 << 18;
		uint8_t *hb = malloc(256 + (nv / piece + 1) * 33), *h = dec_head(hb, QTK_DIGEST_V4, canon, out, in);
		for (uint64_t p0 = 0; p0 < nv; p0 += piece) {
			const uint64_t n = nv - p0 < piece ? nv - p0 : piece;
			*h++ = T->sub == 32 ? 10 : 11;
			sha(wr + (p0 / T->sub) * rb, (size_t)(n / T->sub) * rb, h);
			h += 32;
		}
		uint8_t want[32];
		sha(hb, (size_t)(h - hb), want);
		qtk_tensor t = QTK_TENSOR_LOCAL;
		plain2d(&t, "blk.0.attn_q.weight", T->type, out, in, nbytes);
		const void *pb[1] = {blk};
		uint8_t dec[2][32];
		for (int odd = 0; odd < 2; odd++) {
			qtk_leaf l;
			CHECK(!leaf_of(&t, pb, (int)heads, 0, odd ? 4099 : 0, &l), "%s: leaf", T->name);
			CHECK(!memcmp(l.dec, want, 32), "%s with 4 heads%s, v4: the sub-blocks' leaf as the spec writes it",
			      T->name, odd ? " in odd pieces" : "");
			memcpy(dec[odd], l.dec, 32);
			qtk_free(l.name);
			qtk_free(l.stored);
		}
		/* version 3: the F32 values (form 4), rows in Hugging Face order */
		{
			float *yv = malloc(nv * sizeof *yv);
			for (uint32_t o = 0; o < out; o++) {
				const uint32_t hh = o / hd, rr = o % hd, hf = hh * hd + (rr % 2) * (hd / 2) + rr / 2;
				memcpy(yv + (size_t)hf * in, y + (size_t)o * in, in * sizeof *yv);
			}
			h = dec_head(hb, QTK_DIGEST_V3, canon, out, in);
			for (uint64_t p0 = 0; p0 < nv; p0 += piece) {
				const uint64_t n = nv - p0 < piece ? nv - p0 : piece;
				*h++ = 4;
				sha(yv + p0, (size_t)n * 4, h);
				h += 32;
			}
			uint8_t want3[32];
			sha(hb, (size_t)(h - hb), want3);
			qtk_leaf l;
			CHECK(!leaf_of(&t, pb, (int)heads, QTK_DIGEST_V3, 0, &l), "%s: v3 leaf", T->name);
			CHECK(!memcmp(l.dec, want3, 32), "%s, v3: the F32 values' leaf", T->name);
			qtk_free(l.name);
			qtk_free(l.stored);
			free(yv);
		}
		/* one bit of one code of the last block: the leaf changes (even where A is 0) */
		const size_t qbyte = T->type == QTK_T_Q2_K ? 79 : T->type == QTK_T_Q3_K ? 95 : T->type == QTK_T_Q6_K ? 127
												       : T->bpb - 1;
		blk[nbytes - T->bpb + qbyte] ^= 0x10;
		{
			qtk_leaf l;
			CHECK(!leaf_of(&t, pb, (int)heads, 0, 0, &l), "%s: leaf", T->name);
			CHECK(memcmp(l.dec, dec[0], 32), "%s: a changed code changes the leaf", T->name);
			qtk_free(l.name);
			qtk_free(l.stored);
		}
		free(hb);
		free(wr);
		free(y);
		free(blk);
	}
}

/* An MLX matrix [out][in] of `bits` (2..8) with groups of `group`, F16 scales and biases, its parts
 * in w (in * bits / 32 words a row), sc and bi. */
static void mlx_tensor(qtk_tensor *t, uint32_t out, uint32_t in, unsigned bits, uint32_t group)
{
	qtk_tensor_clear(t);
	t->name = (char *)"model.layers.0.mlp.up_proj.weight";
	t->ndim = 2;
	t->shape[0] = out;
	t->shape[1] = in;
	t->layout.kind = QTK_LAYOUT_MLX;
	t->layout.bits = (uint8_t)bits;
	t->layout.group_size = group;
	t->nparts = 3;
	const char *roles[3] = {"weight", "scales", "biases"};
	for (int p = 0; p < 3; p++) {
		snprintf(t->parts[p].role, sizeof t->parts[p].role, "%s", roles[p]);
		t->parts[p].type = p ? QTK_T_F16 : QTK_DT_U32;
		t->parts[p].ndim = 2;
		t->parts[p].shape[0] = out;
		t->parts[p].shape[1] = p ? in / group : in * bits / 32;
		t->parts[p].nbytes = p ? (uint64_t)out * (in / group) * 2 : (uint64_t)out * in * bits / 8;
	}
	qtk_tensor_finish(t);
}

/* Version 4, MLX: 2- to 6-bit matrices are written as sub-blocks of 32 (A the group's scale, M its
 * bias negated, the codes), as the spec writes them, each value f32(q * scale) + bias as qtk's
 * decoder computes it; a 4-bit one with groups of 32 (and of 64) has the leaf of the q4_1 matrix
 * of the same scales, biases and codes (MLX <-> q4_1 transcodes keep it); 8-bit MLX stays values. */
static void test_aff_mlx(void)
{
	const uint32_t out = 64, in = 256;
	const char *canon = "model.layers.0.mlp.up_proj.weight";
	const unsigned bitss[5] = {4, 4, 3, 6, 8};
	const uint32_t groups[5] = {32, 64, 128, 32, 32};
	for (int ci = 0; ci < 5; ci++) {
		const unsigned bits = bitss[ci];
		const uint32_t group = groups[ci], ng = in / group;
		qtk_tensor t = QTK_TENSOR_LOCAL;
		mlx_tensor(&t, out, in, bits, group);
		uint32_t *w = calloc((size_t)out * in * bits / 32, 4);
		uint8_t *sc = malloc((size_t)out * ng * 2), *bi = malloc((size_t)out * ng * 2);
		uint8_t *q = malloc((size_t)out * in);
		uint32_t r = 31u + (uint32_t)ci;
		for (size_t i = 0; i < (size_t)out * in; i++) {
			r = r * 1664525u + 1013904223u;
			q[i] = (uint8_t)((r >> 20) & ((1u << bits) - 1u));
			const uint64_t pos = (uint64_t)(i % in) * bits, wi = (i / in) * (in * bits / 32) + pos / 32;
			w[wi] |= (uint32_t)((uint64_t)q[i] << (pos % 32));
			if (pos % 32 + bits > 32)
				w[wi + 1] |= (uint32_t)(q[i] >> (32 - pos % 32));
		}
		for (size_t g = 0; g < (size_t)out * ng; g++) {
			qtk_wr16(sc + 2 * g, (uint16_t)(0x1c00u + (g * 53u) % 0x1000u));
			qtk_wr16(bi + 2 * g, (uint16_t)((g % 2 ? 0x8000u : 0u) | (0x2000u + (g * 29u) % 0x1400u)));
		}
		const void *pb[3] = {w, sc, bi};
		float *y = malloc((size_t)out * in * sizeof *y);
		CHECK(!qtk_scheme_decode_rows(&t, pb, 0, out, y), "mlx %u-bit: decode", bits);
		/* the spec's writing, and the values it stands for */
		uint8_t *wr = malloc((size_t)out * in / 32 * 40);
		uint64_t bad = 0;
		for (uint32_t o = 0; o < out; o++)
			for (uint32_t i = 0; i < in; i++) {
				const size_t gi = (size_t)o * ng + i / group;
				const float A = qtk_fp16_to_f32(qtk_rd16(sc + 2 * gi)), M = -qtk_fp16_to_f32(qtk_rd16(bi + 2 * gi));
				const float p = A * (float)q[(size_t)o * in + i], v = p - M;
				bad += memcmp(&v, &y[(size_t)o * in + i], 4) != 0;
				uint8_t *d = wr + ((size_t)o * in + i) / 32 * 40;
				if (i % 32 == 0) {
					uint32_t ab, mb;
					memcpy(&ab, &A, 4);
					memcpy(&mb, &M, 4);
					qtk_wr32(d, ab);
					qtk_wr32(d + 4, mb);
				}
				d[8 + i % 32] = q[(size_t)o * in + i];
			}
		CHECK(!bad, "mlx %u-bit: %llu values are not A * c - M", bits, (unsigned long long)bad);
		uint8_t hb[256], *h = dec_head(hb, QTK_DIGEST_V4, canon, out, in), want[32];
		*h++ = 10;
		sha(wr, (size_t)out * in / 32 * 40, h);
		h += 32;
		sha(hb, (size_t)(h - hb), want);
		qtk_leaf l;
		CHECK(!leaf_of(&t, pb, 0, 0, 0, &l), "mlx %u-bit: leaf", bits);
		if (bits <= 6)
			CHECK(!memcmp(l.dec, want, 32), "mlx %u-bit, groups of %u: the sub-blocks' leaf as the spec writes it", bits, group);
		else
			CHECK(memcmp(l.dec, want, 32), "mlx 8-bit: values, not sub-blocks");
		/* the q4_1 matrix of the same scales, biases and codes: the same leaf */
		if (bits == 4) {
			uint8_t *blk = malloc((size_t)out * in / 32 * 20);
			for (size_t b = 0; b < (size_t)out * in / 32; b++) {
				const size_t o = b / (in / 32), gi = o * ng + (b % (in / 32)) * 32 / group;
				uint8_t *x = blk + 20 * b;
				qtk_wr16(x, qtk_rd16(sc + 2 * gi));
				qtk_wr16(x + 2, qtk_rd16(bi + 2 * gi));
				for (int j = 0; j < 16; j++)
					x[4 + j] = (uint8_t)(q[32 * b + (size_t)j] | q[32 * b + (size_t)j + 16] << 4);
			}
			qtk_tensor t1 = QTK_TENSOR_LOCAL;
			plain2d(&t1, canon, QTK_T_Q4_1, out, in, (uint64_t)out * in / 32 * 20);
			qtk_leaf l1;
			const void *p1[1] = {blk};
			CHECK(!leaf_of(&t1, p1, 0, 0, 0, &l1), "q4_1: leaf");
			CHECK(!memcmp(l1.dec, l.dec, 32), "mlx 4-bit, groups of %u, and q4_1 of the same values: one leaf", group);
			qtk_free(l1.name);
			qtk_free(l1.stored);
			free(blk);
		}
		qtk_free(l.name);
		qtk_free(l.stored);
		free(w);
		free(sc);
		free(bi);
		free(q);
		free(y);
		free(wr);
	}
}

/* Version 3, form 9: an 8-bit asymmetric GPTQ matrix whose groups are all positive has zero
 * points near 0 and differences up to 255, written as i16; its leaf is the spec's, in whole
 * parts and fed in odd pieces, and a one-code change changes it. */
static void test_int_wide(void)
{
	const uint32_t out = 64, in = 256, g = 128, ng = in / g;
	const size_t nv = (size_t)out * in;
	float *w = malloc(nv * sizeof *w), *y = malloc(nv * sizeof *y);
	int32_t *qw = calloc((size_t)in / 32 * 8 * out, 4), *qz = calloc((size_t)ng * out * 8 / 32, 4);
	uint16_t *sc = malloc((size_t)ng * out * 2);
	int32_t *gi = malloc((size_t)in * 4);
	uint32_t r = 777;
	for (size_t i = 0; i < nv; i++) {
		r = r * 1664525u + 1013904223u;
		w[i] = (float)(r >> 8) / 16777216.f + 0.01f; /* positive */
	}
	CHECK(!qtk_quant_gptq(w, out, in, g, 8, false, 2, qw, qz, sc, gi) &&
		      !qtk_dequant_gptq(qw, qz, sc, gi, in, out, g, ng, 8, 2, y),
	      "gptq 8-bit encode/decode");
	qtk_tensor t = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&t);
	const qtk_layout l = {QTK_LAYOUT_GPTQ, QTK_T_I32, 8, 2, false, false, g, 0, 0, 0, 0, 0};
	char why[300] = "";
	CHECK(!qtk_scheme_describe(&t, &l, out, in, true, why, sizeof why), "describe: %s", why);
	t.name = (char *)"model.layers.0.mlp.up_proj.weight";
	CHECK(qtk_digest_int_layout(&t), "8-bit GPTQ, groups of 128: an integer layout");
	int16_t *k = malloc(nv * sizeof *k);
	uint32_t *sb = malloc(nv / 32 * 4);
	int wide = 0;
	for (uint32_t o = 0; o < out; o++)
		for (uint32_t u = 0; u < in / 32; u++) {
			const float sv = qtk_fp16_to_f32(sc[(size_t)(u * 32 / g) * out + o]);
			memcpy(&sb[(size_t)o * (in / 32) + u], &sv, 4);
			for (uint32_t i = 0; i < 32; i++) {
				const float d = y[(size_t)o * in + u * 32 + i] / sv;
				k[(size_t)o * in + u * 32 + i] = (int16_t)d;
				wide += d > 127.f;
			}
		}
	CHECK(wide > 100, "differences beyond i8 (%d)", wide);
	uint8_t want[32];
	runs_leaf("model.layers.0.mlp.up_proj.weight", out, in, k, sb, want);
	const void *pa[4] = {qw, qz, sc, gi};
	qtk_leaf a, b, c;
	qtk_err err;
	qtk_thash *h;
	CHECK(!leaf_of(&t, pa, 0, 0, 0, &a), "leaf");
	CHECK(!memcmp(a.dec, want, 32), "8-bit GPTQ, v3: the runs' leaf (form 9) as the spec writes it");
	CHECK(!leaf_of(&t, pa, 0, 0, 77, &b), "leaf in pieces");
	CHECK(!memcmp(a.dec, b.dec, 32) && !memcmp(a.enc, b.enc, 32), "the same leaves fed in pieces");
	((uint8_t *)qw)[5] ^= 1; /* one code of one input */
	CHECK(!leaf_of(&t, pa, 0, 0, 0, &c), "leaf, one code changed");
	CHECK(memcmp(a.dec, c.dec, 32) != 0, "one code changes the decoded leaf");
	/* hostile: a 1-D q4_0 tensor under a Q/K name, whose rows (single values) cannot carry runs:
	 * an error, not a leaf of whatever memory the scales' rows were not copied into (review) */
	qtk_tensor t1 = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&t1);
	t1.name = (char *)"blk.0.attn_q.weight";
	t1.ndim = 1;
	t1.shape[0] = 64;
	t1.layout.type = QTK_T_Q4_0;
	t1.nparts = 1;
	t1.parts[0].type = QTK_T_Q4_0;
	t1.parts[0].ndim = 1;
	t1.parts[0].shape[0] = 64;
	t1.parts[0].nbytes = 2 * 18;
	qtk_tensor_finish(&t1);
	qtk_err_clear(&err);
	h = NULL;
	CHECK(qtk_thash_new(NULL, &t1, 1, &h, &err) == QTK_E_DATA && !h && strstr(err.msg, "whole runs"),
	      "1-D q4_0 Q/K tensor: refused (%s)", err.msg);
	qtk_leaf *ls[] = {&a, &b, &c};
	for (size_t i = 0; i < 3; i++) {
		qtk_free(ls[i]->name);
		qtk_free(ls[i]->stored);
	}
	free(w);
	free(y);
	free(qw);
	free(qz);
	free(sc);
	free(gi);
	free(k);
	free(sb);
}

/* Version 3, 4-bit GPTQ v1 and v2 and AWQ, asymmetric, groups of 64 (the runs written straight
 * from the packed words): the spec's leaf from the decoded values, whole and in odd pieces. */
static void test_int_gptq4(void)
{
	const uint32_t out = 64, in = 256, g = 64, ng = in / g;
	const size_t nv = (size_t)out * in;
	for (int kind = 0; kind < 3; kind++) { /* GPTQ v1, GPTQ v2, AWQ */
		float *w = malloc(nv * sizeof *w), *y = malloc(nv * sizeof *y);
		int32_t *qw = calloc(nv / 8, 4), *qz = calloc((size_t)ng * out / 8, 4);
		uint16_t *sc = malloc((size_t)ng * out * 2);
		int32_t *gi = malloc((size_t)in * 4);
		uint32_t r = 31337u + (uint32_t)kind;
		for (size_t i = 0; i < nv; i++) {
			r = r * 1664525u + 1013904223u;
			w[i] = (float)(r >> 8) / 16777216.f - 0.3f;
		}
		const int ver = kind == 0 ? 1 : 2;
		if (kind < 2)
			CHECK(!qtk_quant_gptq(w, out, in, g, 4, false, ver, qw, qz, sc, gi) &&
				      !qtk_dequant_gptq(qw, qz, sc, gi, in, out, g, ng, 4, ver, y),
			      "gptq encode/decode");
		else
			CHECK(!qtk_quant_awq(w, out, in, g, qw, qz, sc) && !qtk_dequant_awq(qw, qz, sc, in, out, g, y),
			      "awq encode/decode");
		qtk_tensor t = QTK_TENSOR_LOCAL;
		qtk_tensor_clear(&t);
		const qtk_layout l = {kind < 2 ? QTK_LAYOUT_GPTQ : QTK_LAYOUT_AWQ, QTK_T_I32, 4, (uint8_t)(kind < 2 ? ver : 0),
				      false, false, g, 0, 0, 0, 0, 0};
		char why[300] = "";
		CHECK(!qtk_scheme_describe(&t, &l, out, in, kind < 2, why, sizeof why), "describe: %s", why);
		t.name = (char *)"model.layers.0.mlp.up_proj.weight";
		int16_t *k = malloc(nv * sizeof *k);
		uint32_t *sb = malloc(nv / 32 * 4);
		for (uint32_t o = 0; o < out; o++)
			for (uint32_t u = 0; u < in / 32; u++) {
				const float sv = qtk_fp16_to_f32(sc[(size_t)(u * 32 / g) * out + o]);
				memcpy(&sb[(size_t)o * (in / 32) + u], &sv, 4);
				for (uint32_t i = 0; i < 32; i++)
					k[(size_t)o * in + u * 32 + i] = (int16_t)(y[(size_t)o * in + u * 32 + i] / sv);
			}
		uint8_t want[32];
		runs_leaf("model.layers.0.mlp.up_proj.weight", out, in, k, sb, want);
		const void *pa[4] = {qw, qz, sc, gi};
		for (int odd = 0; odd < 2; odd++) {
			qtk_leaf a;
			CHECK(!leaf_of(&t, pa, 0, 0, odd ? 101 : 0, &a), "leaf");
			CHECK(!memcmp(a.dec, want, 32), "%s 4-bit, v3: the runs' leaf as the spec writes it%s",
			      kind == 0 ? "GPTQ v1" : kind == 1 ? "GPTQ v2" : "AWQ", odd ? " (odd pieces)" : "");
			qtk_free(a.name);
			qtk_free(a.stored);
		}
		free(w);
		free(y);
		free(qw);
		free(qz);
		free(sc);
		free(gi);
		free(k);
		free(sb);
	}
}

/* Version 3, ggml q4_0 and q5_0 blocks with random codes under a Q name (4 heads): the runs
 * written straight from the blocks give the spec's leaf, the differences taken from ggml's own
 * decoder (value / scale) and the rows un-permuted by hand; fed whole and in odd pieces. */
static void test_int_ggml(void)
{
	const uint32_t out = 64, in = 256, heads = 4, hd = out / heads, runs = in / 32;
	const unsigned types[2] = {QTK_T_Q4_0, QTK_T_Q5_0};
	const size_t bpb[2] = {18, 22};
	for (int ti = 0; ti < 2; ti++) {
		const size_t nbytes = (size_t)out * runs * bpb[ti];
		uint8_t *blk = malloc(nbytes);
		uint32_t r = 4242u + (uint32_t)ti;
		for (size_t i = 0; i < nbytes; i++) {
			r = r * 1664525u + 1013904223u;
			blk[i] = (uint8_t)(r >> 24);
		}
		for (size_t b = 0; b < (size_t)out * runs; b++) /* finite, non-zero scales */
			qtk_wr16(blk + b * bpb[ti], (uint16_t)(0x2000u + (b * 37u) % 0x1800u));
		float *y = malloc((size_t)out * in * sizeof *y);
		CHECK(!qtk_dequant_ggml(types[ti], blk, y, (uint64_t)out * in), "decode");
		int16_t *k = malloc((size_t)out * in * sizeof *k);
		uint32_t *sb = malloc((size_t)out * runs * 4);
		for (uint32_t o = 0; o < out; o++) {
			const uint32_t hh = o / hd, rr = o % hd, hf = hh * hd + (rr % 2) * (hd / 2) + rr / 2;
			for (uint32_t u = 0; u < runs; u++) {
				const float sv = qtk_fp16_to_f32(qtk_rd16(blk + ((size_t)o * runs + u) * bpb[ti]));
				memcpy(&sb[(size_t)hf * runs + u], &sv, 4);
				for (uint32_t i = 0; i < 32; i++)
					k[(size_t)hf * in + u * 32 + i] = (int16_t)(y[(size_t)o * in + u * 32 + i] / sv);
			}
		}
		uint8_t want[32];
		runs_leaf("model.layers.0.self_attn.q_proj.weight", out, in, k, sb, want);
		qtk_tensor t = QTK_TENSOR_LOCAL;
		plain2d(&t, "blk.0.attn_q.weight", types[ti], out, in, nbytes);
		uint8_t want3[32];
		runs_leaf_v(QTK_DIGEST_V3, "model.layers.0.self_attn.q_proj.weight", out, in, k, sb, want3);
		for (int odd = 0; odd < 4; odd++) {
			qtk_leaf l;
			const void *pb[1] = {blk};
			CHECK(!leaf_of(&t, pb, (int)heads, odd / 2 ? QTK_DIGEST_V3 : 0, odd % 2 ? 333 : 0, &l), "leaf");
			CHECK(!memcmp(l.dec, odd / 2 ? want3 : want, 32), "%s with 4 heads%s, v%d: the runs' leaf as the spec writes it",
			      ti ? "q5_0" : "q4_0", odd % 2 ? " in odd pieces" : "", odd / 2 ? 3 : 4);
			qtk_free(l.name);
			qtk_free(l.stored);
		}
		free(blk);
		free(y);
		free(k);
		free(sb);
	}
}

/* Version 3, compressed-tensors integers with F32 (and BF16) scales per group of 32: codes are
 * stored offset by 8, the runs carry the scales' own bits, and the leaf is the spec's; each value
 * is the once-rounded product of its difference and its scale. */
static void test_int_ct(void)
{
	const uint32_t out = 16, in = 128, g = 32, ng = in / g;
	for (int bf = 0; bf < 2; bf++) {
		const unsigned st = bf ? QTK_T_BF16 : QTK_T_F32;
		qtk_tensor t = QTK_TENSOR_LOCAL;
		qtk_tensor_clear(&t);
		qtk_layout l = {QTK_LAYOUT_CT_INT, QTK_T_I32, 4, 0, true, false, g, 2, (uint16_t)st, 0, 0, 0};
		char why[300] = "";
		CHECK(!qtk_scheme_describe(&t, &l, out, in, true, why, sizeof why), "describe: %s", why);
		t.name = (char *)"model.layers.0.mlp.up_proj.weight";
		CHECK(qtk_digest_int_layout(&t), "ct-int, groups of 32: an integer layout");
		uint32_t *packed = calloc((size_t)out * in / 8, 4);
		uint8_t *sc = calloc((size_t)out * ng, 4);
		int64_t shape[2] = {out, in};
		int16_t *k = malloc((size_t)out * in * sizeof *k);
		uint32_t *sb = malloc((size_t)out * in / 32 * 4);
		uint32_t r = 99;
		for (uint32_t o = 0; o < out; o++) {
			for (uint32_t gg = 0; gg < ng; gg++) {
				r = r * 1664525u + 1013904223u;
				const float sv = (float)(r >> 8) / 16777216.f * 0.01f + 0.001f;
				uint32_t bits;
				memcpy(&bits, &sv, 4);
				if (bf)
					bits &= 0xffff0000u; /* a bf16 value */
				if (bf)
					qtk_wr16(sc + 2 * ((size_t)o * ng + gg), (uint16_t)(bits >> 16));
				else
					qtk_wr32(sc + 4 * ((size_t)o * ng + gg), bits);
				sb[(size_t)o * ng + gg] = bits; /* g = 32: one run per group */
			}
			for (uint32_t i = 0; i < in; i++) {
				r = r * 1664525u + 1013904223u;
				const uint32_t q = r >> 28; /* stored code 0..15, value q - 8 */
				packed[(size_t)o * (in / 8) + i / 8] |= q << (4 * (i % 8));
				k[(size_t)o * in + i] = (int16_t)((int)q - 8);
			}
		}
		uint8_t want[32];
		runs_leaf("model.layers.0.mlp.up_proj.weight", out, in, k, sb, want);
		const void *pa[3] = {packed, sc, shape};
		qtk_leaf a;
		CHECK(!leaf_of(&t, pa, 0, 0, 0, &a), "ct-int leaf (%s)", bf ? "bf16" : "f32");
		CHECK(!memcmp(a.dec, want, 32), "ct-int with %s scales, v3: the runs' leaf as the spec writes it",
		      bf ? "BF16" : "F32");
		qtk_free(a.name);
		qtk_free(a.stored);
		free(packed);
		free(sc);
		free(k);
		free(sb);
	}
}

/* A packed Q projection in GGUF row order (Q/K heads) is hashed in slices of whole heads and whole
 * packed words: in version 2 its decoded leaf equals that of the same values as a plain F32 tensor
 * (hashed by the plain path, in its own chunks), with several slices (8M values), and differs
 * when the heads differ. In version 3 it is the runs' leaf (checked against the spec written out
 * here, rows un-permuted by hand), equal to a q8_0 tensor's with the same scales and differences
 * (an exact transcode), and no longer the F32 values'. */
static void test_packed_heads_sliced(void)
{
	const uint32_t out = 2048, in = 4096, g = 128;
	const size_t nv = (size_t)out * in;
	float *w = malloc(nv * sizeof *w), *y = malloc(nv * sizeof *y);
	int32_t *qw = malloc(nv / 8 * 4), *qz = malloc((size_t)in / g * out / 8 * 4);
	uint16_t *sc = malloc((size_t)in / g * out * 2);
	uint32_t r = 12345;
	for (size_t i = 0; i < nv; i++) {
		r = r * 1664525u + 1013904223u;
		w[i] = ((float)(r >> 8) / 16777216.f - 0.5f) * (i % 4096 < 64 ? 0.2f : 0.02f);
	}
	CHECK(!qtk_quant_awq(w, out, in, g, qw, qz, sc) && !qtk_dequant_awq(qw, qz, sc, in, out, g, y),
	      "awq encode/decode");
	qtk_tensor ta = QTK_TENSOR_LOCAL, tf = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&ta);
	qtk_tensor_clear(&tf);
	const qtk_layout l = {QTK_LAYOUT_AWQ, QTK_T_I32, 4, 0, false, false, g, 0, 0, 0, 0, 0};
	char why[300] = "";
	CHECK(!qtk_scheme_describe(&ta, &l, out, in, true, why, sizeof why), "describe: %s", why);
	ta.name = (char *)"blk.0.attn_q.weight";
	tf.name = ta.name;
	tf.ndim = 2;
	tf.shape[0] = out;
	tf.shape[1] = in;
	tf.layout.type = QTK_T_F32;
	tf.nparts = 1;
	tf.parts[0].type = QTK_T_F32;
	tf.parts[0].ndim = 2;
	memcpy(tf.parts[0].shape, tf.shape, sizeof tf.shape);
	tf.parts[0].nbytes = nv * 4;
	qtk_tensor_finish(&tf);
	const void *pa[3] = {qw, qz, sc};
	qtk_leaf la, lf, l8, l3, lq, lf3;
	qtk_err err;
	qtk_thash *h;
	CHECK(!leaf_of(&ta, pa, 16, QTK_DIGEST_V2, 0, &la), "awq leaf");
	CHECK(!qtk_thash_new_scheme(NULL, &tf, 16, QTK_DIGEST_V2, &h, &err) && !qtk_thash_put(h, y, nv * 4) &&
		      !qtk_thash_end(h, &lf),
	      "f32 leaf");
	CHECK(!memcmp(la.dec, lf.dec, 32), "AWQ with 16 heads in slices: decoded leaf equals the F32 one (v2)");
	CHECK(!leaf_of(&ta, pa, 8, QTK_DIGEST_V2, 0, &l8), "awq leaf, 8 heads");
	CHECK(memcmp(la.dec, l8.dec, 32) != 0, "the heads change the decoded leaf");
	/* version 3: the runs, by hand. Each difference is the decoded value over its fp16 scale
	 * (the product is exact); GGUF row (h, 2i + j) is Hugging Face row (h, j, i). */
	const uint32_t runs = in / 32, hd = out / 16;
	int16_t *k = malloc(nv * sizeof *k);
	uint32_t *sb = malloc((size_t)out * runs * 4);
	uint8_t *q8 = malloc((size_t)out * runs * 34);
	bool exact = true;
	for (uint32_t o = 0; o < out; o++) {
		const uint32_t hh = o / hd, rr = o % hd, hf = hh * hd + (rr % 2) * (hd / 2) + rr / 2;
		for (uint32_t u = 0; u < runs; u++) {
			const uint16_t s16 = sc[(size_t)(u * 32 / g) * out + o];
			const float sv = qtk_fp16_to_f32(s16);
			memcpy(&sb[(size_t)hf * runs + u], &sv, 4);
			uint8_t *blk = q8 + ((size_t)o * runs + u) * 34;
			qtk_wr16(blk, s16);
			for (uint32_t i = 0; i < 32; i++) {
				const float d = y[(size_t)o * in + u * 32 + i] / sv;
				exact &= d == (float)(int)d;
				k[(size_t)hf * in + u * 32 + i] = (int16_t)d;
				blk[2 + i] = (uint8_t)(int8_t)d;
			}
		}
	}
	CHECK(exact, "every value is its difference times its scale");
	uint8_t want[32];
	runs_leaf("model.layers.0.self_attn.q_proj.weight", out, in, k, sb, want);
	CHECK(!leaf_of(&ta, pa, 16, 0, 0, &l3), "awq leaf, v3");
	CHECK(!memcmp(l3.dec, want, 32), "AWQ with 16 heads, v3: the runs' leaf as the spec writes it");
	qtk_tensor tq = QTK_TENSOR_LOCAL;
	qtk_tensor_copy(&tq, &tf);
	tq.layout.type = QTK_T_Q8_0;
	tq.parts[0].type = QTK_T_Q8_0;
	tq.parts[0].nbytes = (uint64_t)out * runs * 34;
	qtk_tensor_finish(&tq);
	const void *pq[1] = {q8};
	CHECK(!leaf_of(&tq, pq, 16, 0, 1000, &lq), "q8_0 leaf, v3"); /* odd pieces */
	CHECK(!memcmp(lq.dec, want, 32), "q8_0 with the same scales and differences: the same v3 leaf");
	CHECK(!qtk_thash_new(NULL, &tf, 16, &h, &err) && !qtk_thash_put(h, y, nv * 4) && !qtk_thash_end(h, &lf3),
	      "f32 leaf, v3");
	CHECK(memcmp(lf3.dec, want, 32) != 0, "v3: the F32 values' leaf is another");
	qtk_leaf *ls[] = {&la, &lf, &l8, &l3, &lq, &lf3};
	for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) {
		qtk_free(ls[i]->name);
		qtk_free(ls[i]->stored);
	}
	free(k);
	free(sb);
	free(q8);
	free(w);
	free(y);
	free(qw);
	free(qz);
	free(sc);
}

static char *json_escape(const char *s)
{
	size_t n = strlen(s);
	char *o = malloc(2 * n + 3), *p = o;
	*p++ = '"';
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			*p++ = '\\';
		*p++ = s[i];
	}
	*p++ = '"';
	*p = 0;
	return o;
}

/* rec with its first output.tensors list edited: the text at `at` (an offset into that list,
 * from its opening bracket) replaced by n bytes of `with` for `drop` bytes. */
static char *edit_list(const char *rec, size_t at, size_t drop, const char *with)
{
	const char *l = strstr(rec, "\"tensors\":[");
	if (!l)
		return NULL;
	size_t o = (size_t)(l - rec) + 10 + at, n = strlen(rec), w = strlen(with);
	char *r = malloc(n - drop + w + 1);
	memcpy(r, rec, o);
	memcpy(r + o, with, w);
	memcpy(r + o + w, rec + o + drop, n - o - drop + 1);
	return r;
}

typedef struct ents {
	char *txt; /* every entry's canonical text, one per line */
	size_t n;
} ents;

static int ent_one(void *ctx, const cJSON *e)
{
	ents *x = ctx;
	char *c = qtk_prov_canonical(e);
	size_t have = x->txt ? strlen(x->txt) : 0;
	char *nt = c ? realloc(x->txt, have + strlen(c) + 2) : NULL;
	if (!nt) {
		qtk_free(c);
		return QTK_E_IO;
	}
	x->txt = nt;
	sprintf(x->txt + have, "%s\n", c);
	qtk_free(c);
	x->n++;
	return 0;
}

/* Both ways of reading rec agree: accepted or refused alike, naming `want` (subject or message)
 * when refused, at the same offset (same_off; a duplicate key inside a list's entry is placed
 * exactly when the list is read as text, at its top-level key in the tree). */
static void both_ways(const char *rec, int want_rc, const char *want, bool same_off, const char *what)
{
	qtk_err e1, e2;
	qtk_err_clear(&e1);
	qtk_err_clear(&e2);
	cJSON *a = NULL, *b = NULL;
	int r1 = qtk_prov_parse(rec, strlen(rec), "rec", &a, &e1), r2 = qtk_prov_parse_tree(rec, strlen(rec), "rec", &b, &e2);
	CHECK(r1 == want_rc && r2 == want_rc, "%s: rc %d and %d (%s / %s)", what, r1, r2, e1.msg, e2.msg);
	/* the check that keeps nothing (a chained parent's) gives the text reader's verdict */
	qtk_err e3;
	qtk_err_clear(&e3);
	bool canon = true;
	int r3 = qtk_prov_check_canonical(rec, strlen(rec), "rec", &canon, &e3);
	CHECK(r3 == r1 && e3.offset == e1.offset && !strcmp(e3.subject, e1.subject) && !strcmp(e3.msg, e1.msg) &&
		      (!r3 || !canon),
	      "%s: the check in place: rc %d at %lld '%s' (the reader: %d at %lld '%s')", what, r3, (long long)e3.offset,
	      e3.msg, r1, (long long)e1.offset, e1.msg);
	if (want_rc && want)
		CHECK((strstr(e1.subject, want) || strstr(e1.msg, want)) && (strstr(e2.subject, want) || strstr(e2.msg, want)),
		      "%s: names '%s': '%s' '%s' / '%s' '%s'", what, want, e1.subject, e1.msg, e2.subject, e2.msg);
	if (want_rc && same_off)
		CHECK(e1.offset == e2.offset, "%s: offsets %lld and %lld", what, (long long)e1.offset, (long long)e2.offset);
	qtk_json_tree_free(a);
	qtk_json_tree_free(b);
}

/* qtk_prov_parse keeps each tensor list (the record's and its chained record's) as its canonical
 * text: the same canonical record, the same entries through qtk_prov_list_each, the same
 * verdicts and offsets as the tree on lists that are spaced, reordered or hostile. */
static void lists_as_text(const char *rec, bool chained)
{
	qtk_err err;
	cJSON *a = NULL, *b = NULL;
	CHECK(!qtk_prov_parse(rec, strlen(rec), "rec", &a, &err), "as text: %s: %s", err.subject, err.msg);
	CHECK(!qtk_prov_parse_tree(rec, strlen(rec), "rec", &b, &err), "as a tree: %s: %s", err.subject, err.msg);
	if (!a || !b) {
		qtk_json_tree_free(a);
		qtk_json_tree_free(b);
		return;
	}
	const cJSON *la = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "output"), "tensors");
	const cJSON *lb = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "output"), "tensors");
	CHECK(cJSON_IsRaw(la) && cJSON_IsArray(lb), "the list as text, and as a tree");
	const cJSON *ma = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "transform"), "params"), "tensors");
	CHECK(cJSON_IsRaw(ma) && ma->valuestring[0] == '{', "transform.params.tensors as text");
	if (chained) {
		const cJSON *pa = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a, "source"), "record"), "output");
		CHECK(cJSON_IsRaw(cJSON_GetObjectItemCaseSensitive(pa, "tensors")), "the chained record's list as text");
	}
	char *ca = qtk_prov_canonical(a), *cb = qtk_prov_canonical(b);
	CHECK(ca && cb && !strcmp(ca, rec) && !strcmp(cb, rec), "both canonical texts are the record");
	bool canon = false;
	CHECK(!qtk_prov_check_canonical(rec, strlen(rec), "rec", &canon, &err) && canon,
	      "checked in place: the record is its canonical text");
	qtk_free(ca);
	qtk_free(cb);
	ents ea = {0}, eb = {0};
	CHECK(!qtk_prov_list_each(la, ent_one, &ea) && !qtk_prov_list_each(lb, ent_one, &eb), "entries read");
	CHECK(ea.n > 1 && ea.n == eb.n && ea.txt && eb.txt && !strcmp(ea.txt, eb.txt), "the same %zu entries", ea.n);
	/* the record spaced and printed by cJSON (lists included): canonical again */
	char *pretty = cJSON_Print(b);
	cJSON *c = NULL;
	CHECK(pretty && !qtk_prov_parse(pretty, strlen(pretty), "pretty", &c, &err), "spaced: %s", err.msg);
	canon = true;
	CHECK(pretty && !qtk_prov_check_canonical(pretty, strlen(pretty), "pretty", &canon, &err) && !canon,
	      "checked in place: a spaced record is valid, not canonical");
	char *cc = c ? qtk_prov_canonical(c) : NULL;
	CHECK(cc && !strcmp(cc, rec), "a spaced record's lists are read into their canonical text");
	qtk_free(cc);
	qtk_json_tree_free(c);
	/* an error after a list: its offset in the record, not in the text without its lists */
	size_t n = strlen(rec);
	char *tail = malloc(n + 3);
	memcpy(tail, rec, n);
	memcpy(tail + n, " x", 3);
	both_ways(tail, QTK_E_DATA, "trailing", true, "trailing characters");
	qtk_err_clear(&err);
	c = NULL;
	CHECK(qtk_prov_parse(tail, strlen(tail), "rec", &c, &err) && err.offset == (int64_t)n + 1,
	      "trailing characters at %lld (want %zu)", (long long)err.offset, n + 1);
	free(tail);
	/* hostile lists: both ways refuse them alike */
	const char *l0 = strstr(rec, "\"tensors\":[") + 10;
	const char *e0 = strstr(l0, "\"encoded\":\"") + 11;
	const size_t at_enc = (size_t)(e0 - l0), end = (size_t)(strstr(l0, "}]") - l0);
	const char *first_end = strstr(l0, "},{");
	struct {
		size_t at, drop;
		const char *with, *want;
		int rc;
	} cases[] = {
		{at_enc, 1, "G", "output.tensors[0].encoded", QTK_E_DATA},      /* not hex */
		{1, 9, "{\"bytes\":1,\"bytes\":", "duplicate", QTK_E_DATA},       /* a key twice in an entry */
		{end + 1, 0, ",", "", QTK_E_DATA},                                /* a trailing comma */
		{end + 1, 0, " , ", "", QTK_E_DATA},
		{1, 0, "x", "", QTK_E_DATA},                                       /* garbage before an entry */
		{end + 1, 0, "  \n\t ", NULL, 0},                                  /* whitespace: fine */
		{1, 0, " ", NULL, 0},
		{at_enc, 0, "\xff", "", QTK_E_DATA},                               /* not UTF-8 */
		{1, 0, "7,", "output.tensors[0]", QTK_E_DATA},                     /* an entry not an object */
		{end + 1, 1, "", "", QTK_E_DATA},                                  /* the list not closed */
		{1, 1, "{\"shape\":[1.5],", "", QTK_E_DATA},                       /* not an integer */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *r = edit_list(rec, cases[i].at, cases[i].drop, cases[i].with);
		char what[64];
		snprintf(what, sizeof what, "list case %zu", i);
		if (r)
			both_ways(r, cases[i].rc, cases[i].want, cases[i].at != 1 || cases[i].drop != 9, what);
		free(r);
	}
	/* transform.params.tensors: a member twice, a member whose value is not JSON, spaced */
	const char *m0 = strstr(rec, "\"tensors\":{");
	const char *m1 = m0 ? strstr(m0, "},\"") : NULL; /* the end of the first member */
	if (m0 && m1) {
		const size_t o = (size_t)(m0 - rec) + 11, k = (size_t)(m1 - rec) + 1;
		char *r = malloc(strlen(rec) + (k - o) + 8);
		memcpy(r, rec, k);
		r[k] = ',';
		memcpy(r + k + 1, rec + o, k - o);
		strcpy(r + k + 1 + (k - o), rec + k);
		both_ways(r, QTK_E_DATA, "duplicate", false, "a tensor twice in transform.params.tensors");
		strcpy(r + o, "\"a\":1.5,");
		strcat(r, rec + o);
		both_ways(r, QTK_E_DATA, "", true, "a number that is not an integer in transform.params.tensors");
		strcpy(r + o, " \n");
		strcat(r, rec + o);
		both_ways(r, 0, NULL, true, "transform.params.tensors spaced");
		free(r);
	}
	/* the first entry twice */
	if (first_end) {
		size_t k = (size_t)(first_end - l0) + 1; /* just past the first entry */
		char *dup = malloc(k + 2);
		dup[0] = ',';
		memcpy(dup + 1, l0 + 1, k - 1);
		dup[k] = 0;
		char *r = edit_list(rec, k, 0, dup);
		if (r)
			both_ways(r, QTK_E_DATA, "listed twice", true, "a tensor listed twice");
		free(r);
		free(dup);
	}
	free(ea.txt);
	free(eb.txt);
	cJSON_free(pretty);
	qtk_json_tree_free(a);
	qtk_json_tree_free(b);
}

/* A stream's receiver: the pieces appended; fail: that code (and a message) instead. */
typedef struct pieces_got {
	qtk_buf b;
	int fail;
	size_t calls;
} pieces_got;

static qtk_err *pieces_err;

static int pieces_put(void *ctx, const uint8_t *p, size_t n)
{
	pieces_got *g = ctx;
	g->calls++;
	if (g->fail)
		return qtk_err_set(pieces_err, g->fail, "out", -1, NULL, "disk full");
	return qtk_buf_put(&g->b, p, n);
}

/* A buffer with a flush hook hands its bytes on in order whenever a put would grow it: small
 * puts, one larger than its room, and a failing flush that sticks. */
static void test_buf_flush(void)
{
	qtk_err e;
	pieces_err = &e;
	pieces_got g = {{0}, 0, 0};
	qtk_buf b = {0};
	b.flush = pieces_put;
	b.flush_ctx = &g;
	CHECK(!qtk_buf_reserve(&b, 16), "room for 16");
	char want[200];
	size_t wn = 0;
	for (int i = 0; i < 20; i++) {
		char piece[64];
		int k = snprintf(piece, sizeof piece, "%d:", i);
		if (i == 9) { /* longer than the buffer's room */
			memset(piece, 'x', 40);
			k = 40;
		}
		CHECK(!qtk_buf_put(&b, piece, (size_t)k), "put %d", i);
		memcpy(want + wn, piece, (size_t)k);
		wn += (size_t)k;
	}
	CHECK(!qtk_buf_flush(&b) && b.len == 0 && b.flushed == wn && g.b.len == wn && !memcmp(g.b.p, want, wn),
	      "flushed in order: %zu of %zu bytes", (size_t)g.b.len, wn);
	CHECK(g.calls > 2, "handed on as it grew (%zu flushes)", g.calls);
	CHECK(b.cap == 17, "a put larger than the buffer handed on, the buffer not grown (%zu)", b.cap);
	g.fail = QTK_E_IO;
	CHECK(qtk_buf_put(&b, want, 10) == 0 && qtk_buf_flush(&b) == QTK_E_IO && b.failed, "a failing flush");
	CHECK(qtk_buf_put(&b, "x", 1) == QTK_E_IO, "sticks");
	qtk_buf_free(&b);
	qtk_buf_free(&g.b);
}

static void test_records(void)
{
	qtk_err err;
	qtk_model *src = qtk_open(path_in("a.safetensors"), &err);
	qtk_model *out = qtk_open(path_in("a.gguf"), &err);
	if (!src || !out) {
		CHECK(0, "open models: %s", err.msg);
		return;
	}
	qtk_digests od;
	CHECK(!qtk_digest_model(out, NULL, &od, &err), "output digests");
	qtk_prov_builder b;
	qtk_prov_builder_init(&b);
	b.src = src;
	b.out = out;
	b.out_kind = QTK_OUT_GGUF;
	b.time = 1700000000;
	static const char *const params[] = {"bits=4", "group_size=128"};
	b.params = params;
	b.nparams = 2;
	char *ph = NULL, *fin = NULL;
	CHECK(!qtk_prov_build(&b, &ph, &err), "placeholder record: %s", err.msg);
	b.out_digests = &od;
	CHECK(!qtk_prov_build(&b, &fin, &err), "final record: %s", err.msg);
	if (!ph || !fin)
		return;
	CHECK(strlen(ph) == strlen(fin), "same length %zu %zu", strlen(ph), strlen(fin));
	CHECK(strstr(ph, "~~~~~~~~") && !strstr(fin, "~~~~~~~~"), "placeholders");
	/* streamed (qtk_prov_build_stream): the same text a piece at a time; another length is
	 * refused, and the stream's own failure is the build's */
	pieces_got pg = {{0}, 0, 0};
	pieces_err = &err;
	CHECK(!qtk_prov_build_stream(&b, strlen(ph), pieces_put, &pg, &err) && pg.b.len == strlen(fin) &&
		      !memcmp(pg.b.p, fin, pg.b.len),
	      "streamed: %s", err.msg);
	qtk_buf_free(&pg.b);
	qtk_err_clear(&err);
	CHECK(qtk_prov_build_stream(&b, strlen(ph) + 1, pieces_put, &pg, &err) == QTK_E_INTERNAL,
	      "streamed: a longer length refused");
	qtk_buf_free(&pg.b);
	qtk_err_clear(&err);
	CHECK(qtk_prov_build_stream(&b, strlen(ph) - 1, pieces_put, &pg, &err) == QTK_E_INTERNAL,
	      "streamed: a shorter length refused");
	qtk_buf_free(&pg.b);
	pg.fail = QTK_E_IO;
	qtk_err_clear(&err);
	CHECK(qtk_prov_build_stream(&b, strlen(ph), pieces_put, &pg, &err) == QTK_E_IO && strstr(err.msg, "disk full"),
	      "streamed: the stream's failure returned: %s", err.msg);
	qtk_buf_free(&pg.b);
	/* patching: plain and JSON-escaped (as inside a safetensors header) */
	char *buf = qtk_strdup(ph);
	CHECK(!qtk_prov_patch(buf, strlen(buf), ph, fin, &err) && !strcmp(buf, fin), "patched == final");
	char *eph = json_escape(ph), *efin = json_escape(fin);
	CHECK(!qtk_prov_patch(eph, strlen(eph), ph, fin, &err) && !strcmp(eph, efin), "escaped patch");
	free(eph);
	free(efin);
	qtk_free(buf);
	/* round trip: parse strictly, canonical text is the stored text */
	cJSON *j = NULL;
	CHECK(!qtk_prov_parse(fin, strlen(fin), "rec", &j, &err), "parse: %s: %s", err.subject, err.msg);
	char *again = j ? qtk_prov_canonical(j) : NULL;
	CHECK(again && !strcmp(again, fin), "canonical round trip");
	qtk_free(again);
	lists_as_text(fin, false);
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "transform");
	const cJSON *ops = cJSON_GetObjectItemCaseSensitive(tr, "layout_ops");
	char *ops_txt = ops ? qtk_prov_canonical(ops) : NULL;
	CHECK(ops_txt && strstr(ops_txt, "permute_qk") && strstr(ops_txt, "hf_to_gguf") && strstr(ops_txt, "reverse_dims"),
	      "layout ops: %s", ops_txt ? ops_txt : "none");
	qtk_free(ops_txt);
	CHECK(strstr(fin, "\"kind\":\"convert\"") && strstr(fin, "\"imatrix\":\"none\"") &&
		      strstr(fin, "\"time\":\"2023-11-14T22:13:20Z\"") && strstr(fin, "\"group_size\":\"128\""),
	      "fields");
	qtk_json_tree_free(j);
	/* the chain: a source with a record gets it embedded as source.record */
	const char *chained = path_in("chained.gguf");
	CHECK(!write_model(chained, QTK_OUT_GGUF, true, QTK_T_F32, fin, true), "write with record");
	qtk_model *cm = qtk_open(chained, &err);
	size_t len = 0;
	const char *where = NULL;
	const char *txt = cm ? qtk_prov_find(cm, &len, &where) : NULL;
	CHECK(txt && len == strlen(fin) && !memcmp(txt, fin, len) && !strcmp(where, "kv qtk.provenance"), "find");
	if (cm) {
		qtk_prov_builder b2;
		qtk_prov_builder_init(&b2);
		b2.src = cm;
		b2.out = out;
		b2.out_kind = QTK_OUT_SAFETENSORS;
		b2.out_digests = &od;
		char *r2 = NULL;
		CHECK(!qtk_prov_build(&b2, &r2, &err), "chained record");
		CHECK(r2 && strstr(r2, "\"record\":{") && strstr(r2, "\"record_sha256\":"), "parent embedded");
		/* a canonical parent goes in verbatim, and record_sha256 is its text's SHA-256 */
		uint8_t h[32];
		char hex[65], want[100];
		sha(fin, strlen(fin), h);
		qtk_hex(h, 32, hex);
		snprintf(want, sizeof want, "\"record_sha256\":\"%s\"", hex);
		CHECK(r2 && strstr(r2, fin) && strstr(r2, want), "parent verbatim, its digest");
		cJSON *j2 = NULL;
		CHECK(r2 && !qtk_prov_parse(r2, strlen(r2), "r2", &j2, &err), "chained parses: %s", err.msg);
		qtk_json_tree_free(j2);
		if (r2)
			lists_as_text(r2, true);
		qtk_prov_builder_free(&b2);
		/* a parent stored with whitespace (valid, not canonical) is chained as its canonical
		 * text, under the same digest */
		cJSON *pj = NULL;
		char *pretty = !qtk_prov_parse_tree(fin, strlen(fin), "fin", &pj, &err) ? cJSON_Print(pj) : NULL;
		qtk_json_tree_free(pj);
		const char *spaced = path_in("chained-spaced.gguf");
		CHECK(pretty && strcmp(pretty, fin) && !write_model(spaced, QTK_OUT_GGUF, true, QTK_T_F32, pretty, true),
		      "write with a spaced record");
		cJSON_free(pretty);
		qtk_model *sm = qtk_open(spaced, &err);
		char *r3 = NULL;
		if (sm) {
			qtk_prov_builder_init(&b2);
			b2.src = sm;
			b2.out = out;
			b2.out_kind = QTK_OUT_SAFETENSORS;
			b2.out_digests = &od;
			CHECK(!qtk_prov_build(&b2, &r3, &err), "spaced parent: %s", err.msg);
			qtk_prov_builder_free(&b2);
		}
		CHECK(r3 && strstr(r3, fin) && strstr(r3, want) && !b2.note[0], "spaced parent chained canonical");
		qtk_free(r3);
		qtk_close(sm);
		remove(spaced);
		/* one space in one place: in the output's list, in the parameters' map, outside the
		 * lists. The parent is read once, its lists compared with their canonical form in
		 * place; any difference and it is chained as its canonical text, the same digest */
		static const char *const after[] = {"\"tensors\":[", "\"tensors\":{", "{"};
		for (size_t k = 0; k < sizeof after / sizeof *after; k++) {
			const char *at = strstr(fin, after[k]);
			CHECK(at != NULL, "the record has %s", after[k]);
			if (!at)
				continue;
			const size_t pre = (size_t)(at - fin) + strlen(after[k]);
			char *one = qtk_malloc(strlen(fin) + 2);
			memcpy(one, fin, pre);
			one[pre] = ' ';
			strcpy(one + pre + 1, fin + pre);
			CHECK(!write_model(spaced, QTK_OUT_GGUF, true, QTK_T_F32, one, true), "write with a space after %s",
			      after[k]);
			qtk_free(one);
			qtk_model *om = qtk_open(spaced, &err);
			char *r4 = NULL;
			qtk_prov_builder_init(&b2);
			b2.src = om;
			b2.out = out;
			b2.out_kind = QTK_OUT_SAFETENSORS;
			b2.out_digests = &od;
			CHECK(om && !qtk_prov_build(&b2, &r4, &err), "one space after %s: %s", after[k], err.msg);
			CHECK(r4 && strstr(r4, fin) && strstr(r4, want) && !b2.note[0] && b2.parent_own,
			      "one space after %s: chained canonical", after[k]);
			qtk_prov_builder_free(&b2);
			qtk_free(r4);
			qtk_close(om);
			remove(spaced);
		}
		/* the canonical parent itself: chained from the source's own text, no copy */
		qtk_prov_builder_init(&b2);
		b2.src = cm;
		b2.out = out;
		b2.out_kind = QTK_OUT_SAFETENSORS;
		b2.out_digests = &od;
		char *r5 = NULL;
		CHECK(!qtk_prov_build(&b2, &r5, &err) && !b2.parent_own && b2.parent_txt == txt, "canonical parent not copied");
		qtk_prov_builder_free(&b2);
		qtk_free(r5);
		qtk_free(r2);
	}
	qtk_close(cm);
	qtk_prov_builder_free(&b);
	qtk_free(ph);
	qtk_free(fin);
	qtk_digests_free(&od);
	qtk_close(src);
	qtk_close(out);
}

/* The output sink (bytes as handed to a writer) gives what reading the written file gives. */
static void test_sink(void)
{
	qtk_err err;
	qtk_model *m = qtk_open(path_in("a.gguf"), &err);
	if (!m) {
		CHECK(0, "open: %s", err.msg);
		return;
	}
	qtk_digest_sink *sk = NULL;
	CHECK(!qtk_digest_sink_new(m, &sk, &err), "sink");
	uint8_t buf[1000];
	int rc = 0;
	for (size_t i = 0; i < m->ntensors && !rc; i++)
		for (int p = 0; p < m->tensors[i].nparts && !rc; p++)
			for (uint64_t off = 0; off < m->tensors[i].parts[p].nbytes && !rc; off += sizeof buf) {
				uint64_t left = m->tensors[i].parts[p].nbytes - off;
				size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
				rc = qtk_read_part(m, &m->tensors[i], p, off, buf, k);
				rc = rc ? rc : qtk_digest_sink_put(sk, i, buf, k);
			}
	qtk_digests a, b;
	CHECK(!rc && !qtk_digest_sink_finish(sk, &a), "sink finish: %s", err.msg);
	CHECK(!qtk_digest_model(m, NULL, &b, &err), "model digests");
	CHECK(!memcmp(a.enc_root, b.enc_root, 32) && !memcmp(a.dec_root, b.dec_root, 32) && a.n_permuted == 2,
	      "sink == reading the file");
	/* copies: the decoded leaf comes from the source once the encoded leaves agree */
	for (int tamper = 0; tamper < 2; tamper++) {
		qtk_digests c;
		qtk_leaf fake;
		CHECK(!qtk_digest_sink_new(m, &sk, &err), "sink");
		for (size_t i = 0; i < m->ntensors; i++) {
			char canon[256];
			int qk;
			qtk_canon_name(m, m->tensors[i].name, canon, sizeof canon, &qk);
			const qtk_leaf *l = qtk_digests_find(&b, canon);
			if (tamper && i == 4 && l) {
				fake = *l;
				fake.enc[0] ^= 1;
				l = &fake;
			}
			qtk_digest_sink_expect(sk, i, l);
		}
		rc = 0;
		for (size_t i = 0; i < m->ntensors && !rc; i++) {
			uint8_t *whole = NULL;
			rc = qtk_read_part_alloc(m, &m->tensors[i], 0, &whole);
			rc = rc ? rc : qtk_digest_sink_put(sk, i, whole, (size_t)m->tensors[i].parts[0].nbytes);
			qtk_free(whole);
		}
		if (!rc)
			rc = qtk_digest_sink_finish(sk, &c);
		else
			qtk_digest_sink_free(sk);
		if (!tamper) {
			CHECK(!rc && !memcmp(c.dec_root, b.dec_root, 32) && !memcmp(c.enc_root, b.enc_root, 32),
			      "expected copies give the same digests: %d %s", rc, err.msg);
			if (!rc)
				qtk_digests_free(&c);
		} else {
			CHECK(rc == QTK_E_INTERNAL && strstr(err.msg, "differ from the source"), "a wrong copy is caught: %d %s",
			      rc, err.msg);
		}
	}
	/* late copies (the source hashed while the output is written): metadata now, proof at finish */
	for (int tamper = 0; tamper < 2; tamper++) {
		qtk_digests c, meta;
		memset(&meta, 0, sizeof meta);
		meta.leaf = calloc(m->ntensors, sizeof *meta.leaf);
		meta.n = m->ntensors;
		for (size_t i = 0; i < m->ntensors; i++)
			qtk_digest_leaf_meta(m, &m->tensors[i], &meta.leaf[i], &err);
		CHECK(!qtk_digests_finish(&meta, &err), "source metadata leaves");
		CHECK(!qtk_digest_sink_new(m, &sk, &err), "sink");
		for (size_t i = 0; i < m->ntensors; i++) {
			char canon[256];
			int qk;
			qtk_canon_name(m, m->tensors[i].name, canon, sizeof canon, &qk);
			qtk_digest_sink_expect_late(sk, i, qtk_digests_find(&meta, canon));
		}
		rc = 0;
		for (size_t i = 0; i < m->ntensors && !rc; i++) {
			uint8_t *whole = NULL;
			rc = qtk_read_part_alloc(m, &m->tensors[i], 0, &whole);
			if (!rc && tamper && i == 3)
				whole[0] ^= 1; /* the bytes written are not the source's */
			rc = rc ? rc : qtk_digest_sink_put(sk, i, whole, (size_t)m->tensors[i].parts[0].nbytes);
			qtk_free(whole);
		}
		rc = rc ? (qtk_digest_sink_free(sk), rc) : qtk_digest_sink_finish_late(sk, &b, &c);
		if (!tamper) {
			CHECK(!rc && !memcmp(c.dec_root, b.dec_root, 32) && !memcmp(c.enc_root, b.enc_root, 32),
			      "late copies give the same digests: %d %s", rc, err.msg);
			if (!rc)
				qtk_digests_free(&c);
		} else {
			CHECK(rc == QTK_E_INTERNAL && strstr(err.msg, "differ from the source"),
			      "a wrong late copy is caught at finish: %d %s", rc, err.msg);
		}
		qtk_digests_free(&meta);
	}
	qtk_digests_free(&a);
	qtk_digests_free(&b);
	/* a tensor left without bytes is an error, not a silent digest */
	CHECK(!qtk_digest_sink_new(m, &sk, &err), "sink");
	rc = qtk_digest_sink_put(sk, 1, buf, 4);
	if (rc) {
		CHECK(rc == QTK_E_DATA, "missing bytes detected: %d", rc);
		qtk_digest_sink_free(sk);
	} else {
		CHECK(qtk_digest_sink_finish(sk, &a) == QTK_E_DATA, "missing bytes detected at finish");
	}
	qtk_close(m);
}

/* The writer's asynchronous tee (qconvert's output digests): the sink on its own thread sees
 * the very bytes a synchronous tee sees; a deferred file hash (patch_pending) equals the SHA-256
 * of the file on disk; a tee failure surfaces from put, drain or finish with the tee's message,
 * and leaves no output. */
typedef struct {
	qtk_digest_sink *sk;
	qtk_err *err;
	size_t calls, fail_at;
} async_ctx;

static int async_tee(void *ctx, size_t tensor, const void *buf, size_t n)
{
	async_ctx *a = ctx;
	if (a->fail_at && ++a->calls >= a->fail_at)
		return qtk_err_set(a->err, QTK_E_INTERNAL, NULL, -1, "tee", "injected tee failure");
	return a->sk ? qtk_digest_sink_put(a->sk, tensor, buf, n) : 0;
}

static void test_async_tee(void)
{
	qtk_err err, terr;
	qtk_model *m = qtk_open(path_in("a.gguf"), &err);
	if (!m) {
		CHECK(0, "open: %s", err.msg);
		return;
	}
	for (int fail = 0; fail < 2; fail++) {
		qtk_outlist outs = {0};
		async_ctx a = {NULL, &terr, 0, fail ? 3 : 0};
		qtk_err_clear(&terr);
		CHECK(!qtk_digest_sink_new(m, &a.sk, &terr), "sink");
		qtk_write_opts o = {0};
		o.outs = &outs;
		o.tee = async_tee;
		o.tee_ctx = &a;
		o.tee_async = true;
		o.tee_err = &terr;
		o.patch_pending = true;
		const char *path = path_in(fail ? "async-fail.gguf" : "async.gguf");
		qtk_writer *w = qtk_writer_open(path, QTK_OUT_GGUF, m, &o, &err);
		int rc = w ? 0 : -1;
		for (size_t i = 0; i < m->ntensors && !rc; i++) {
			uint8_t *whole = NULL;
			rc = qtk_read_part_alloc(m, &m->tensors[i], 0, &whole);
			/* in pieces, so the queue holds several items */
			for (size_t off = 0; !rc && off < m->tensors[i].parts[0].nbytes; off += 700) {
				size_t k = (size_t)m->tensors[i].parts[0].nbytes - off;
				rc = qtk_writer_put(w, whole + off, k < 700 ? k : 700);
			}
			qtk_free(whole);
		}
		rc = rc ? rc : qtk_writer_drain(w);
		if (!fail) {
			qtk_digests got, want;
			CHECK(rc == 0, "async tee: %s", err.msg);
			rc = rc ? rc : qtk_writer_finish(w);
			CHECK(rc == 0 && !qtk_digest_sink_finish(a.sk, &got), "finish: %s", err.msg);
			CHECK(!qtk_digest_model(m, NULL, &want, &err), "model digests");
			CHECK(!memcmp(got.enc_root, want.enc_root, 32) && !memcmp(got.dec_root, want.dec_root, 32),
			      "asynchronous sink == reading the file");
			qtk_digests_free(&got);
			qtk_digests_free(&want);
			/* the file hash, taken once at sync, is the file's */
			FILE *f = fopen(path, "rb");
			uint8_t md[32], *data = NULL;
			long len = 0;
			if (f && !fseek(f, 0, SEEK_END) && (len = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
			    (data = malloc((size_t)len)) && fread(data, 1, (size_t)len, f) == (size_t)len)
				SHA256(data, (size_t)len, md);
			CHECK(data && outs.n == 1 && !memcmp(outs.f[0].sha256, md, 32),
			      "deferred SHA-256 of %s is the file's", path);
			free(data);
			if (f)
				fclose(f);
		} else {
			if (!rc)
				rc = qtk_writer_finish(w);
			else
				qtk_writer_abort(w);
			qtk_digest_sink_free(a.sk);
			CHECK(rc == QTK_E_INTERNAL && strstr(err.msg, "injected tee failure"),
			      "a failing asynchronous tee fails the write with its message: %d %s", rc, err.msg);
			CHECK(access(path, F_OK) != 0, "no output after a tee failure");
		}
		qtk_outlist_free(&outs);
	}
	qtk_close(m);
}

/* Two tees on two threads (qconvert: the encoded tier on one, the decoded tier on the other)
 * see the same bytes: the pair of sinks gives the leaves one sink of both tiers gives, with
 * copies proven by the encoded sink; a failing second tee fails the write with its message. */
typedef struct {
	qtk_digest_sink *sk;
	qtk_err *err;
	size_t calls, fail_at;
} pair_ctx;

static int pair_tee(void *ctx, size_t tensor, const void *buf, size_t n)
{
	pair_ctx *a = ctx;
	if (a->fail_at && ++a->calls >= a->fail_at)
		return qtk_err_set(a->err, QTK_E_INTERNAL, NULL, -1, "tee2", "injected second tee failure");
	return qtk_digest_sink_put(a->sk, tensor, buf, n);
}

static void test_tee_pair(void)
{
	qtk_err err, e1, e2;
	qtk_model *m = qtk_open(path_in("a.gguf"), &err);
	if (!m) {
		CHECK(0, "open: %s", err.msg);
		return;
	}
	qtk_digests want;
	CHECK(!qtk_digest_model(m, NULL, &want, &err), "model digests: %s", err.msg);
	for (int fail = 0; fail < 2; fail++)
		for (int expect = 0; expect < 2 && !(fail && expect); expect++) {
			pair_ctx a = {NULL, &e1, 0, 0}, b = {NULL, &e2, 0, fail ? 4 : 0};
			qtk_err_clear(&e1);
			qtk_err_clear(&e2);
			CHECK(!qtk_digest_sink_new_mode(m, QTK_SINK_ENC, &a.sk, &e1), "enc sink");
			CHECK(!qtk_digest_sink_new_mode(m, QTK_SINK_DEC, &b.sk, &e2), "dec sink");
			/* every other tensor a copy whose leaves are known (the decoded sink skips it) */
			for (size_t i = 0; expect && i < m->ntensors; i += 2) {
				char canon[QTK_CAP_NAME + 64];
				int qk;
				if (qtk_canon_name(m, m->tensors[i].name, canon, sizeof canon, &qk) >= 0) {
					qtk_digest_sink_expect(a.sk, i, qtk_digests_find(&want, canon));
					qtk_digest_sink_expect(b.sk, i, qtk_digests_find(&want, canon));
				}
			}
			qtk_write_opts o = {0};
			o.tee = pair_tee;
			o.tee_ctx = &a;
			o.tee_err = &e1;
			o.tee2 = pair_tee;
			o.tee2_ctx = &b;
			o.tee2_err = &e2;
			o.tee_async = true;
			const char *path = path_in(fail ? "pair-fail.gguf" : "pair.gguf");
			qtk_writer *w = qtk_writer_open(path, QTK_OUT_GGUF, m, &o, &err);
			int rc = w ? 0 : -1;
			for (size_t i = 0; i < m->ntensors && !rc; i++) {
				uint8_t *whole = NULL;
				rc = qtk_read_part_alloc(m, &m->tensors[i], 0, &whole);
				for (size_t off = 0; !rc && off < m->tensors[i].parts[0].nbytes; off += 500) {
					size_t k = (size_t)m->tensors[i].parts[0].nbytes - off;
					rc = qtk_writer_put(w, whole + off, k < 500 ? k : 500);
				}
				qtk_free(whole);
			}
			rc = rc ? rc : qtk_writer_drain(w);
			if (!fail) {
				qtk_digests got;
				CHECK(rc == 0, "tee pair: %s", err.msg);
				rc = rc ? rc : qtk_writer_finish(w);
				CHECK(rc == 0 && !qtk_digest_sink_finish_pair(a.sk, b.sk, NULL, &got), "finish pair: %s",
				      e1.msg);
				CHECK(got.complete && got.n == want.n && !memcmp(got.enc_root, want.enc_root, 32) &&
					      !memcmp(got.dec_root, want.dec_root, 32),
				      "encoded and decoded sinks on two threads == reading the file (copies %d)", expect);
				qtk_digests_free(&got);
			} else {
				if (!rc)
					rc = qtk_writer_finish(w);
				else
					qtk_writer_abort(w);
				qtk_digest_sink_free(a.sk);
				qtk_digest_sink_free(b.sk);
				CHECK(rc == QTK_E_INTERNAL && strstr(err.msg, "injected second tee failure"),
				      "a failing second tee fails the write with its message: %d %s", rc, err.msg);
				CHECK(access(path, F_OK) != 0, "no output after a second tee failure");
			}
		}
	/* a decoded-tier sink keeps decoded digests only: it is finished as the second of a pair */
	qtk_digest_sink *x = NULL, *y = NULL;
	qtk_digests got;
	qtk_err_clear(&e1);
	CHECK(!qtk_digest_sink_new_mode(m, QTK_SINK_DEC, &x, &e1) && qtk_digest_sink_finish(x, &got) == QTK_E_INTERNAL &&
		      got.n == 0 && strstr(e1.msg, "decoded-tier"),
	      "a decoded-tier sink finished alone is refused: %s", e1.msg);
	qtk_err_clear(&e1);
	CHECK(!qtk_digest_sink_new_mode(m, QTK_SINK_ENC, &x, &e1) && !qtk_digest_sink_new_mode(m, QTK_SINK_ENC, &y, &e1) &&
		      qtk_digest_sink_finish_pair(x, y, NULL, &got) == QTK_E_INTERNAL && got.n == 0,
	      "two encoded sinks are no pair: %s", e1.msg);
	qtk_digests_free(&want);
	qtk_close(m);
}

static int flip16(void *ctx, uint8_t *buf, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n && i < 16; i++)
		buf[i] ^= 0x5a;
	return 0;
}

/* An output file's SHA-256 (hashed on its own thread while writing, or once after a patch)
 * is the SHA-256 of the bytes on disk, for sizes around the 1 MiB buffers. */
/* qtk_sha256_fd_range: the plain SHA-256 of the range for sizes around its 2 MiB reads, and a
 * range past the end of the file is a read error, not a digest. */
typedef struct {
	uint8_t *got;
	uint64_t base, next; /* the range's start; the next byte expected */
	int bad, calls;
	uint64_t starts[64]; /* where the first 64 buffers began */
} tapped;

static void tap_collect(void *ctx, uint64_t at, const uint8_t *p, size_t n)
{
	tapped *t = ctx;
	t->calls++;
	if (at != t->next) {
		t->bad++;
		return;
	}
	memcpy(t->got + (at - t->base), p, n);
	if (t->calls <= 64)
		t->starts[t->calls - 1] = at;
	t->next += n;
}

/* Does a buffer of t begin at every cut strictly inside [lo, hi)? */
static bool cuts_begin(const tapped *t, const uint64_t *cuts, size_t ncuts, uint64_t lo, uint64_t hi)
{
	for (size_t c = 0; c < ncuts; c++) {
		bool found = cuts[c] <= lo || cuts[c] >= hi;
		for (int k = 0; k < t->calls && k < 64 && !found; k++)
			found = t->starts[k] == cuts[c];
		if (!found)
			return false;
	}
	return true;
}

static void test_sha256_range(void)
{
	const size_t rb = (size_t)2 << 20, total = 6 * rb + 777;
	uint8_t *d = malloc(total);
	uint32_t x = 88172645u;
	for (size_t i = 0; i < total; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		d[i] = (uint8_t)x;
	}
	const char *path = path_in("range.bin");
	FILE *fp = fopen(path, "wb");
	CHECK(fp && fwrite(d, 1, total, fp) == total && fclose(fp) == 0, "write %s", path);
	qtk_err err;
	uint64_t size = 0;
	int fd = qtk_file_open(path, &size, &err);
	const size_t cases[][2] = {{0, 0}, {0, 1}, {5, rb - 1}, {0, rb}, {3, rb + 1}, {0, 2 * rb}, {7, 3 * rb - 7}, {1, total - 1}, {0, total}};
	int bad = 0;
	for (size_t c = 0; c < sizeof cases / sizeof *cases && fd >= 0; c++) {
		uint8_t want[32], got[32];
		unsigned l = 0;
		EVP_Digest(d + cases[c][0], cases[c][1], want, &l, EVP_sha256(), NULL);
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		int rc = qtk_sha256_fd_range(fd, path, md, cases[c][0], cases[c][1], NULL, &err);
		EVP_DigestFinal_ex(md, got, &l);
		EVP_MD_CTX_free(md);
		if (rc || memcmp(want, got, 32))
			bad++;
	}
	CHECK(!bad, "%d ranges hashed wrongly", bad);
	/* the same ranges with a tap: it sees every byte once, in order, from the read that hashes */
	bad = 0;
	for (size_t c = 0; c < sizeof cases / sizeof *cases && fd >= 0; c++) {
		uint8_t want[32], got[32];
		unsigned l = 0;
		EVP_Digest(d + cases[c][0], cases[c][1], want, &l, EVP_sha256(), NULL);
		tapped tp = {malloc(cases[c][1] + 1), cases[c][0], cases[c][0], 0, 0, {0}};
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		/* reads cut at a few offsets, some outside the range */
		const uint64_t cuts[] = {1, 6, rb + 3, rb + 4, 2 * rb, 5 * rb + 1};
		const qtk_fd_tap tap = {tap_collect, &tp, c % 2 ? cuts : NULL, c % 2 ? 6 : 0};
		int rc = qtk_sha256_fd_tap(fd, path, md, cases[c][0], cases[c][1], NULL, &tap, &err);
		EVP_DigestFinal_ex(md, got, &l);
		EVP_MD_CTX_free(md);
		if (rc || memcmp(want, got, 32) || tp.bad || tp.next != cases[c][0] + cases[c][1] ||
		    memcmp(tp.got, d + cases[c][0], cases[c][1]) || (cases[c][1] && !tp.calls) ||
		    (tap.cuts && !cuts_begin(&tp, cuts, 6, cases[c][0], cases[c][0] + cases[c][1])))
			bad++;
		free(tp.got);
	}
	CHECK(!bad, "%d ranges tapped wrongly", bad);
	if (fd >= 0) { /* a read past the end: an error, and the tap saw a prefix of the bytes only */
		tapped tp = {malloc(total + 8), 0, 0, 0, 0, {0}};
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		qtk_err_clear(&err);
		const qtk_fd_tap tap = {tap_collect, &tp, NULL, 0};
		int rc = qtk_sha256_fd_tap(fd, path, md, 0, total + 5, NULL, &tap, &err);
		EVP_MD_CTX_free(md);
		CHECK(rc == 1 && err.code == QTK_E_DATA && !tp.bad && tp.next < total && !memcmp(tp.got, d, tp.next),
		      "tap, read past the end: rc %d, %llu bytes tapped", rc, (unsigned long long)tp.next);
		free(tp.got);
	}
	for (int k = 0; k < 2 && fd >= 0; k++) { /* past the end: within the first read, or a later one */
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		qtk_err_clear(&err);
		int rc = qtk_sha256_fd_range(fd, path, md, k ? 0 : total - 10, k ? total + 5 : 20, NULL, &err);
		EVP_MD_CTX_free(md);
		CHECK(rc == 1 && err.code == QTK_E_DATA && strstr(err.msg, "truncated") && strstr(err.file, "range.bin"),
		      "read past the end (%d): rc %d code %d %s", k, rc, err.code, err.msg);
	}
	if (fd >= 0) { /* cancelled before it starts: an error, not a digest */
		const int stop = 1;
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		qtk_err_clear(&err);
		int rc = qtk_sha256_fd_range(fd, path, md, 0, total, &stop, &err);
		EVP_MD_CTX_free(md);
		CHECK(rc == 1 && strstr(err.msg, "cancelled"), "cancelled: rc %d %s", rc, err.msg);
		/* a range of one read is the caller's: cancelled there too */
		qtk_err_clear(&err);
		md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		rc = qtk_sha256_fd_range(fd, path, md, 0, 100, &stop, &err);
		EVP_MD_CTX_free(md);
		CHECK(rc == 1 && strstr(err.msg, "cancelled"), "cancelled, one read: rc %d %s", rc, err.msg);
		/* cancelled, and the range runs past the end: still an error, never a digest */
		md = EVP_MD_CTX_new();
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
		qtk_err_clear(&err);
		rc = qtk_sha256_fd_range(fd, path, md, total - 5, 3 * rb, &stop, &err);
		CHECK(rc == 1 && err.code, "cancelled past the end: rc %d code %d", rc, err.code);
		/* a range whose end is past 2^64: refused, not a hang */
		qtk_err_clear(&err);
		rc = qtk_sha256_fd_range(fd, path, md, 10, UINT64_MAX - 5, NULL, &err);
		EVP_MD_CTX_free(md);
		CHECK(rc == 1 && err.code, "range past 2^64: rc %d code %d", rc, err.code);
	}
	if (fd >= 0)
		qtk_file_close(fd);
	free(d);
}

static void test_ofile_hash(void)
{
	const size_t sizes[] = {0, 1, (1u << 20) - 1, 1u << 20, (1u << 20) + 1, (5u << 20) + 12345, 9u << 20};
	for (int patch = 0; patch < 2; patch++)
		for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
			size_t n = sizes[si];
			uint8_t *d = malloc(n ? n : 1), md[32];
			uint32_t x = 2463534242u + (uint32_t)si;
			for (size_t i = 0; i < n; i++) {
				x ^= x << 13;
				x ^= x >> 17;
				x ^= x << 5;
				d[i] = (uint8_t)x;
			}
			qtk_err err;
			qtk_outlist outs = {0};
			qtk_ofile f;
			const char *path = path_in("ofile.bin");
			int rc = qtk_ofile_open(&f, path, &err);
			f.outs = &outs;
			/* pieces of odd sizes, so buffers fill mid-piece */
			for (size_t off = 0, k = 1; !rc && off < n; off += k, k = k * 3 + 7)
				rc = qtk_ofile_write(&f, d + off, n - off < k ? n - off : k);
			if (!rc && patch && n >= 16) {
				for (int i = 0; i < 16; i++)
					d[i] ^= 0x5a;
				rc = qtk_ofile_patch(&f, 0, 16, flip16, NULL);
			}
			rc = rc ? rc : qtk_ofile_commit(&f);
			if (rc)
				qtk_ofile_abort(&f);
			SHA256(d, n, md);
			CHECK(!rc && outs.n == 1 && outs.f[0].size == n && !memcmp(outs.f[0].sha256, md, 32),
			      "SHA-256 of a %zu-byte output%s: %s", n, patch ? " (patched)" : "", rc ? err.msg : "");
			qtk_outlist_free(&outs);
			free(d);
		}
}

/* The design qconvert follows (docs/provenance.md §3): the record is reserved with placeholders
 * in the header, the output digests come from the bytes as they are written, and the
 * reserved bytes are patched before commit. Done here by hand for GGUF and safetensors. */
/* One F32 tensor of four values, "w.weight", the writers' tests' description. */
static void add_four_floats(qtk_model *d)
{
	qtk_tensor *t = qtk_model_add_tensor(d, "w.weight");
	t->ndim = 1;
	t->shape[0] = 4;
	t->layout.type = QTK_T_F32;
	t->nparts = 1;
	t->parts[0].type = QTK_T_F32;
	t->parts[0].ndim = 1;
	t->parts[0].shape[0] = 4;
	t->parts[0].nbytes = 16;
	qtk_tensor_finish(t);
}

/* A reserved and a final record of one length, with quotes and a two-byte character. */
static void two_records(char ph[400], char fin[400])
{
	snprintf(ph, 400, "{\"a\":\"%0300d\u00e9\"}", 0);
	snprintf(fin, 400, "{\"a\":\"%0300d\u00e9\"}", 7);
}

/* A writer puts the final record where it put the reserved one (qtk_writer_put_record): a
 * record of another length is refused and leaves the file as it was; the right one reads back
 * (for QPK through the header's digest of its metadata section, which the reader checks);
 * archives cannot. The records hold quotes and a multi-byte character: safetensors escapes
 * them into its JSON header as it did the reserved one. A directory's record is its side file,
 * or with in_kv (a bundle's inner directory) every shard's metadata. */
static void test_put_record(qtk_out_kind kind, const char *name, bool in_kv)
{
	char ph[400], fin[400];
	two_records(ph, fin);
	qtk_model *d = qtk_model_new();
	qtk_model_set_kv_str(d, "general.architecture", "llama");
	if (kind == QTK_OUT_HF && !in_kv)
		qtk_model_add_blob(d, QTK_PROV_FILE, ph, strlen(ph));
	else
		qtk_model_set_kv_str(d, QTK_PROV_KEY, ph);
	add_four_floats(d);
	qtk_err err;
	const char *path = path_in(name);
	qtk_writer *w = qtk_writer_open(path, kind, d, NULL, &err);
	CHECK(w, "%s: open: %s", name, err.msg);
	if (!w) {
		qtk_close(d);
		return;
	}
	const uint8_t zero[16] = {0};
	int rc = qtk_writer_put(w, zero, sizeof zero);
	if (kind == QTK_OUT_ARCHIVE) {
		CHECK(!qtk_writer_has_put_record(w) && qtk_writer_put_record(w, fin, strlen(fin)) == QTK_E_USAGE &&
			      qtk_writer_record_piece(w, 0, fin, 7) == QTK_E_USAGE,
		      "%s: an archive cannot place its record", name);
		qtk_writer_abort(w);
		qtk_close(d);
		return;
	}
	CHECK(qtk_writer_has_put_record(w), "%s: the writer knows the record's place", name);
	CHECK(qtk_writer_put_record(w, fin, strlen(fin) - 1) == QTK_E_INTERNAL, "%s: a shorter record refused", name);
	/* seven bytes at a time; a piece past the reserved length and an end short of it are
	 * refused */
	const size_t n = strlen(fin);
	CHECK(qtk_writer_record_piece(w, n - 3, fin, 7) == QTK_E_INTERNAL, "%s: a piece past the end refused", name);
	for (size_t at = 0; at < n && !rc; at += 7)
		rc = qtk_writer_record_piece(w, at, fin + at, n - at < 7 ? n - at : 7);
	CHECK(!rc && qtk_writer_record_end(w, n - 1) == QTK_E_INTERNAL, "%s: an end short of the length refused", name);
	rc = rc ? rc : qtk_writer_record_end(w, n);
	rc = rc ? (qtk_writer_abort(w), rc) : qtk_writer_finish(w);
	CHECK(!rc, "%s: written: %s", name, err.msg);
	qtk_model *m = rc ? NULL : qtk_open(path, &err);
	size_t len = 0;
	const char *got = m ? qtk_prov_find(m, &len, NULL) : NULL;
	CHECK(got && len == strlen(fin) && !memcmp(got, fin, len), "%s: the final record reads back: %s", name,
	      m ? "" : err.msg);
	qtk_close(m);
	qtk_close(d);
}

/* A record generated where the writer puts it (qtk_write_opts.record_gen, three bytes a
 * piece): it reads back (QPK: under the header's digest of its metadata section, taken as the
 * section was written), the final one placed over it reads back; a generator of another length
 * fails the open, and writers that cannot take one refuse it. */
typedef struct gen_src {
	const char *text;
	size_t extra; /* bytes written beyond the text (a generator of another length) */
} gen_src;

static int gen_three(void *ctx, int (*put)(void *pctx, const uint8_t *p, size_t n), void *pctx)
{
	const gen_src *g = ctx;
	const size_t n = strlen(g->text);
	int rc = 0;
	for (size_t at = 0; at < n && !rc; at += 3)
		rc = put(pctx, (const uint8_t *)g->text + at, n - at < 3 ? n - at : 3);
	for (size_t i = 0; i < g->extra && !rc; i++)
		rc = put(pctx, (const uint8_t *)"~", 1);
	return rc;
}

/* A directory without the side file qtk-provenance.json refuses a generated record (its
 * shards' headers would each run the generator). */
static void test_gen_needs_file(void)
{
	qtk_model *d = qtk_model_new();
	qtk_model_set_kv_str(d, "general.architecture", "llama");
	add_four_floats(d);
	gen_src g = {"{}", 0};
	qtk_write_opts wo = {0};
	wo.record_gen = gen_three;
	wo.record_ctx = &g;
	wo.record_len = 2;
	qtk_err err;
	qtk_writer *w = qtk_writer_open(path_in("gen-nofile"), QTK_OUT_HF, d, &wo, &err);
	CHECK(!w && err.code == QTK_E_USAGE && strstr(err.msg, "side file"), "a directory without its record file: %s",
	      err.msg);
	qtk_writer_abort(w);
	qtk_close(d);
}

static void test_gen_record(qtk_out_kind kind, const char *name, bool place, size_t extra)
{
	char ph[400], fin[400];
	two_records(ph, fin);
	qtk_model *d = qtk_model_new();
	qtk_model_set_kv_str(d, "general.architecture", "llama");
	if (kind == QTK_OUT_HF) /* a directory's record is its side file */
		qtk_model_take_blob(d, QTK_PROV_FILE, qtk_calloc(1, 1), 0);
	else
		qtk_model_set_kv_str(d, QTK_PROV_KEY, "");
	qtk_model_set_kv_str(d, "general.name", "after the record");
	add_four_floats(d);
	gen_src g = {ph, extra};
	qtk_write_opts wo = {0};
	wo.record_gen = gen_three;
	wo.record_ctx = &g;
	wo.record_len = strlen(ph);
	qtk_err err;
	const char *path = path_in(name);
	qtk_writer *w = qtk_writer_open(path, kind, d, &wo, &err);
	if (kind == QTK_OUT_ARCHIVE) {
		CHECK(!w && err.code == QTK_E_USAGE, "%s: a generated record refused: %s", name, err.msg);
		qtk_writer_abort(w);
		qtk_close(d);
		return;
	}
	if (extra && kind == QTK_OUT_HF) { /* no header: the side file is generated at finish */
		const uint8_t z[16] = {0};
		CHECK(w && !qtk_writer_put(w, z, sizeof z) && qtk_writer_finish(w) == QTK_E_INTERNAL,
		      "%s: a generator of another length fails at finish: %s", name, err.msg);
		qtk_close(d);
		return;
	}
	if (extra) {
		CHECK(!w && err.code == QTK_E_INTERNAL, "%s: a generator of another length fails: %s", name, err.msg);
		qtk_writer_abort(w);
		qtk_close(d);
		return;
	}
	CHECK(w, "%s: open with a generated record: %s", name, err.msg);
	if (!w) {
		qtk_close(d);
		return;
	}
	const uint8_t zero[16] = {0};
	int rc = qtk_writer_put(w, zero, sizeof zero);
	if (place) {
		CHECK(qtk_writer_has_put_record(w), "%s: the generated record's place is known", name);
		rc = rc ? rc : qtk_writer_put_record(w, fin, strlen(fin));
	}
	rc = rc ? (qtk_writer_abort(w), rc) : qtk_writer_finish(w);
	CHECK(!rc, "%s: written: %s", name, err.msg);
	qtk_model *m = rc ? NULL : qtk_open(path, &err);
	size_t len = 0;
	const char *got = m ? qtk_prov_find(m, &len, NULL) : NULL;
	const char *want = place ? fin : ph;
	CHECK(got && len == strlen(want) && !memcmp(got, want, len), "%s: the %s record reads back: %s", name,
	      place ? "final" : "generated", m ? "" : err.msg);
	const qtk_kv *after = m ? qtk_kv_find(m, "general.name") : NULL;
	CHECK(kind == QTK_OUT_HF || (after && after->val.type == QTK_V_STR && !strcmp(after->val.v.str.s, "after the record")),
	      "%s: the key after the record reads back", name);
	qtk_close(m);
	qtk_close(d);
}

static void reserve_and_patch(qtk_out_kind kind, const char *name)
{
	qtk_err err;
	qtk_model *src = qtk_open(path_in("a.safetensors"), &err);
	qtk_model *d = src ? qtk_open(path_in("a.gguf"), &err) : NULL; /* stands in for the description */
	if (!src || !d) {
		CHECK(0, "open: %s", err.msg);
		qtk_close(src);
		return;
	}
	qtk_prov_builder b;
	qtk_prov_builder_init(&b);
	b.src = src;
	b.out = d;
	b.out_kind = kind;
	char *ph = NULL, *fin = NULL;
	CHECK(!qtk_prov_build(&b, &ph, &err), "placeholder");
	qtk_model *desc = qtk_model_new();
	for (size_t i = 0; i < d->nkv; i++) {
		/* safetensors metadata holds strings only (as qconvert writes it) */
		if (kind == QTK_OUT_SAFETENSORS && d->kv[i].val.type == QTK_V_U32) {
			char v[32];
			snprintf(v, sizeof v, "%llu", (unsigned long long)d->kv[i].val.v.u);
			qtk_model_set_kv_str(desc, d->kv[i].key, v);
			continue;
		}
		qtk_kv *kv = qtk_model_add_kv(desc, d->kv[i].key);
		qtk_value_copy(&kv->val, &d->kv[i].val);
	}
	qtk_model_set_kv_str(desc, QTK_PROV_KEY, ph);
	for (size_t i = 0; i < d->ntensors; i++) {
		qtk_tensor *t = qtk_model_add_tensor(desc, d->tensors[i].name);
		char *nm = t->name;
		qtk_tensor_copy(t, &d->tensors[i]);
		t->name = nm;
	}
	const char *path = path_in(name);
	qtk_writer *w = qtk_writer_open(path, kind, desc, NULL, &err);
	qtk_digest_sink *sk = NULL;
	int rc = w ? qtk_digest_sink_new(desc, &sk, &err) : -1;
	uint8_t buf[4096];
	for (size_t i = 0; i < d->ntensors && !rc; i++)
		for (uint64_t off = 0; off < d->tensors[i].parts[0].nbytes && !rc; off += sizeof buf) {
			uint64_t left = d->tensors[i].parts[0].nbytes - off;
			size_t k = left < sizeof buf ? (size_t)left : sizeof buf;
			rc = qtk_read_part(d, &d->tensors[i], 0, off, buf, k);
			rc = rc ? rc : qtk_writer_put(w, buf, k);
			rc = rc ? rc : qtk_digest_sink_put(sk, i, buf, k);
		}
	qtk_digests od;
	memset(&od, 0, sizeof od);
	rc = rc ? rc : qtk_digest_sink_finish(sk, &od);
	b.out_digests = &od;
	rc = rc ? rc : qtk_prov_build(&b, &fin, &err);
	rc = rc ? rc : qtk_writer_finish(w);
	CHECK(!rc, "written: %s", err.msg);
	/* the writer's job at finish, done after the fact here: patch the header in place */
	FILE *f = fopen(path, "r+b");
	size_t cap = 1 << 24, n = 0;
	uint8_t *whole = malloc(cap);
	if (f && whole)
		n = fread(whole, 1, cap, f);
	CHECK(n > 0 && !qtk_prov_patch((char *)whole, n, ph, fin, &err) && !fseek(f, 0, SEEK_SET) &&
		      fwrite(whole, 1, n, f) == n,
	      "patched: %s", err.msg);
	free(whole);
	if (f)
		fclose(f);
	qtk_model *m = qtk_open(path, &err);
	size_t len = 0;
	const char *txt = m ? qtk_prov_find(m, &len, NULL) : NULL;
	CHECK(txt && len == strlen(fin) && !memcmp(txt, fin, len), "%s: the record reads back as built", name);
	qtk_digests got;
	CHECK(m && !qtk_digest_model(m, NULL, &got, &err) && !memcmp(got.enc_root, od.enc_root, 32) &&
		      !memcmp(got.dec_root, od.dec_root, 32),
	      "%s: the written file's digests are the record's", name);
	if (m)
		qtk_digests_free(&got);
	qtk_close(m);
	qtk_digests_free(&od);
	qtk_prov_builder_free(&b);
	qtk_free(ph);
	qtk_free(fin);
	for (size_t i = 0; i < desc->ntensors; i++)
		desc->tensors[i].parts[0].nbytes = d->tensors[i].parts[0].nbytes;
	qtk_close(desc);
	qtk_close(d);
	qtk_close(src);
}

static const char HEX0[] = "0000000000000000000000000000000000000000000000000000000000000000";

/* A minimal valid record with `extra` spliced into the top level. */
static int parse_with(const char *body, qtk_err *err)
{
	cJSON *j = NULL;
	int rc = qtk_prov_parse(body, strlen(body), "rec.json", &j, err);
	qtk_json_tree_free(j);
	return rc;
}

static void test_hostile(void)
{
	char ok[512];
	snprintf(ok, sizeof ok,
		 "{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"qtk\",\"version\":\"0\"}}");
	qtk_err err;
	CHECK(parse_with(ok, &err) == 0, "minimal record: %s %s", err.subject, err.msg);
	static const struct {
		const char *json, *want; /* want: substring of subject or message */
	} bad[] = {
		{"{\"record_version\":1,\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "duplicate"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"container\":\"x\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "duplicate"},
		{"{\"record_version\":\"1\",\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "record_version"},
		{"{\"record_version\":2,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "record_version"},
		{"{\"record_version\":1,\"output\":{\"container\":7},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "output.container"},
		{"{\"record_version\":1,\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "output"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"},\"x\":1}", "x"},
		{"{\"record_version\":1e400,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"files\":[{\"path\":\"a\",\"size\":9007199254740993,\"sha256\":\"00\"}]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"files\":[{\"path\":\"a\",\"size\":-1,\"sha256\":\"00\"}]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"files\":[{\"path\":\"a\",\"size\":1.5,\"sha256\":\"00\"}]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"files\":[{\"path\":\"a\",\"size\":1,\"sha256\":\"00\"}]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "output.files[0].sha256"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"files\":[{\"path\":\"../a\",\"size\":1,\"sha256\":\"%s\"}]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "output.files[0]"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"tensor_root\":{\"scheme\":\"qtk-digest-v1\",\"count\":0,\"encoded\":\"%s\",\"decoded\":\"%s\"},\"tensors\":[]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "output.tensor_root.encoded"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\",\"tensor_root\":{\"scheme\":\"qtk-digest-v1\",\"count\":1,\"encoded\":\"%s\",\"decoded\":\"%s\"},\"tensors\":[]},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", "count"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"},\"transform\":{\"kind\":\"steal\",\"method\":\"x\"}}", "transform.kind"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"},\"imatrix\":\"c4\"}", "imatrix"},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}} x", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"g\\u0000uf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"\xff\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"}}", ""},
		{"[1]", ""},
		{"", ""},
		{"{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"},\"source\":{\"container\":\"x\",\"record\":{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"},\"time\":3}}}", "source.record.time"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char buf[2048];
		snprintf(buf, sizeof buf, bad[i].json, HEX0, HEX0);
		qtk_err_clear(&err);
		int rc = parse_with(buf, &err);
		CHECK(rc == QTK_E_DATA, "case %zu rejected (rc %d)", i, rc);
		CHECK(!bad[i].want[0] || strstr(err.subject, bad[i].want) || strstr(err.msg, bad[i].want),
		      "case %zu names '%s': subject '%s' msg '%s'", i, bad[i].want, err.subject, err.msg);
	}
	/* deep nesting is bounded, not a stack overflow */
	size_t depth = 100000;
	char *deep = malloc(2 * depth + 64);
	size_t k = 0;
	for (size_t i = 0; i < depth; i++)
		deep[k++] = '[';
	for (size_t i = 0; i < depth; i++)
		deep[k++] = ']';
	deep[k] = 0;
	CHECK(parse_with(deep, &err) == QTK_E_DATA, "deep nesting rejected");
	free(deep);
	/* a record chain deeper than 16 is rejected */
	char *chain = malloc(64 * 1024);
	k = 0;
	const char *open = "{\"record_version\":1,\"output\":{\"container\":\"gguf\"},\"tool\":{\"name\":\"q\",\"version\":\"0\"},\"source\":{\"container\":\"x\",\"record\":";
	for (int i = 0; i < 20; i++)
		k += (size_t)snprintf(chain + k, 64 * 1024 - k, "%s", open);
	k += (size_t)snprintf(chain + k, 64 * 1024 - k, "%s", ok);
	for (int i = 0; i < 20; i++)
		k += (size_t)snprintf(chain + k, 64 * 1024 - k, "}}");
	CHECK(parse_with(chain, &err) == QTK_E_DATA, "chain depth bounded: %s", err.msg);
	free(chain);
}

/* qtk_digest_opts.file_sha: each file's SHA-256 and the leaves of the tensors stored in it from
 * one read give the same leaves as the tensors read one by one (any threads), and the files'
 * plain SHA-256: the samples' F32 GGUF (Q/K rows un-permuted, tensors across the reads'
 * buffers), k-quant GGUF, F16 safetensors, and AWQ directory (packed matrices left to the
 * pool beside the read). */
static void test_file_tap(void)
{
	const char *b = getenv("QTK_BUILD");
	static const char *const names[] = {"tiny-llama-f32.gguf", "tiny-llama-Q4_K_M.gguf", "tiny-llama",
					    "tiny-llama-awq"};
	for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
		char path[600];
		snprintf(path, sizeof path, "%s/samples/%s", b && *b ? b : "build", names[k]);
		qtk_err err;
		qtk_model *m = access(path, F_OK) ? NULL : qtk_open(path, &err);
		if (!m) {
			printf("skipped: sample %s absent (make samples)\n", names[k]);
			continue;
		}
		qtk_digests want, got;
		qtk_digest_opts o = {.threads = 1};
		int rc = qtk_digest_model(m, &o, &want, &err);
		CHECK(!rc, "%s: digests: %s", names[k], err.msg);
		for (int th = 1; th <= 2 && !rc; th++) {
			uint8_t(*sha)[32] = calloc(m->nfiles ? m->nfiles : 1, 32);
			qtk_digest_opts ot = {.threads = th, .file_sha = sha};
			int r = qtk_digest_model(m, &ot, &got, &err);
			CHECK(!r, "%s: digests with the files' hashes: %s", names[k], err.msg);
			if (r) {
				free(sha);
				continue;
			}
			int same = got.n == want.n && !memcmp(got.enc_root, want.enc_root, 32) &&
				   !memcmp(got.dec_root, want.dec_root, 32);
			for (size_t i = 0; same && i < got.n; i++)
				same = !memcmp(got.leaf[i].enc, want.leaf[i].enc, 32) && !memcmp(got.leaf[i].dec, want.leaf[i].dec, 32);
			CHECK(same, "%s, %d threads: leaves and roots as without the files' read", names[k], th);
			/* plain tensors from the read; AWQ's packed matrices from the pool */
			size_t plain = 0;
			for (size_t i = 0; i < m->ntensors; i++)
				plain += m->tensors[i].layout.kind == QTK_LAYOUT_PLAIN;
			CHECK(got.n_with_files == plain && plain > 0, "%s: %zu of %zu plain tensors from the files' read",
			      names[k], got.n_with_files, plain);
			int files_ok = 1;
			for (uint32_t f = 0; f < m->nfiles; f++) {
				FILE *fp = fopen(m->files[f], "rb");
				EVP_MD_CTX *md = EVP_MD_CTX_new();
				EVP_DigestInit_ex(md, EVP_sha256(), NULL);
				uint8_t buf[65536], h[32];
				size_t n;
				while (fp && (n = fread(buf, 1, sizeof buf, fp)) > 0)
					EVP_DigestUpdate(md, buf, n);
				unsigned l = 0;
				EVP_DigestFinal_ex(md, h, &l);
				EVP_MD_CTX_free(md);
				files_ok &= fp && !memcmp(h, sha[f], 32);
				if (fp)
					fclose(fp);
			}
			CHECK(files_ok && m->nfiles, "%s, %d threads: the %u files' SHA-256", names[k], th, m->nfiles);
			qtk_digests_free(&got);
			free(sha);
		}
		if (!rc) { /* cancelled: an error, never digests */
			const int stop = 1;
			uint8_t(*sha)[32] = calloc(m->nfiles ? m->nfiles : 1, 32);
			qtk_digest_opts oc = {.threads = 2, .file_sha = sha, .cancel = &stop};
			qtk_err_clear(&err);
			int r = qtk_digest_model(m, &oc, &got, &err);
			CHECK(r && strstr(err.msg, "cancelled"), "%s: cancelled: rc %d %s", names[k], r, err.msg);
			if (!r)
				qtk_digests_free(&got);
			free(sha);
			qtk_digests_free(&want);
		}
		qtk_close(m);
	}
}

/* A GGUF of many small F16 tensors stored in the reverse of their order, and one of two pieces
 * among them: the files' read hashes them all (the small ones from the reads around them, in
 * file order) with the leaves of the one-by-one read. */
static void test_file_tap_order(void)
{
	const char *path = path_in("many.gguf");
	const uint32_t n = 3000, big = 1234; /* tensor `big` holds 2^19 + 16 F16 values */
	const uint64_t bigb = ((uint64_t)1 << 20) + 32;
	qtk_buf h = {0};
	uint8_t b8[8];
	const char *arch = "general.architecture", *llama = "llama";
#define PUT_U32(x) (qtk_wr32(b8, (uint32_t)(x)), qtk_buf_put(&h, b8, 4))
#define PUT_U64(x) (qtk_wr64(b8, (uint64_t)(x)), qtk_buf_put(&h, b8, 8))
#define PUT_STR(x) (PUT_U64(strlen(x)), qtk_buf_put(&h, x, strlen(x)))
	qtk_buf_put(&h, "GGUF", 4);
	PUT_U32(3);
	PUT_U64(n);
	PUT_U64(1);
	PUT_STR(arch);
	PUT_U32(8);
	PUT_STR(llama);
	uint64_t *off = calloc(n, sizeof *off), at = 0;
	for (uint32_t i = n; i-- > 0;) { /* offsets: the last tensor first */
		off[i] = at;
		at += i == big ? bigb : 32;
	}
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "t%05u.weight", i);
		PUT_STR(name);
		PUT_U32(2);
		PUT_U64(i == big ? 16 : 8);
		PUT_U64(i == big ? 32769 : 2);
		PUT_U32(QTK_T_F16);
		PUT_U64(off[i]);
	}
#undef PUT_U32
#undef PUT_U64
#undef PUT_STR
	while (h.len % 32)
		qtk_buf_put(&h, "", 1);
	const size_t h_len = h.len;
	uint8_t *data = malloc(at);
	for (uint64_t k = 0; k < at / 2; k++)
		qtk_wr16(data + 2 * k, (uint16_t)(0x3c00u + (k * 2654435761u >> 20) % 1024u));
	FILE *fp = fopen(path, "wb");
	CHECK(fp && fwrite(h.p, 1, h.len, fp) == h.len && fwrite(data, 1, at, fp) == at && fclose(fp) == 0, "write %s", path);
	qtk_buf_free(&h);
	free(data);
	free(off);
	qtk_err err;
	qtk_model *m = qtk_open(path, &err);
	CHECK(m != NULL, "open %s: %s", path, m ? "" : err.msg);
	if (!m)
		return;
	qtk_digests want, got;
	qtk_digest_opts o = {.threads = 2};
	uint8_t sha[1][32];
	qtk_digest_opts ot = {.threads = 2, .file_sha = sha};
	int rc = qtk_digest_model(m, &o, &want, &err), r2 = rc ? -1 : qtk_digest_model(m, &ot, &got, &err);
	CHECK(!rc && !r2, "digests: %s", err.msg);
	if (!rc && !r2) {
		int same = got.n == want.n && got.n == n && !memcmp(got.enc_root, want.enc_root, 32) &&
			   !memcmp(got.dec_root, want.dec_root, 32);
		for (size_t i = 0; same && i < got.n; i++)
			same = !memcmp(got.leaf[i].enc, want.leaf[i].enc, 32) && !memcmp(got.leaf[i].dec, want.leaf[i].dec, 32);
		CHECK(same, "%u tensors in reverse file order: the leaves of the one-by-one read", n);
		CHECK(got.n_with_files == n && want.n_with_files == 0, "all %u hashed from the file's read (%zu)", n,
		      got.n_with_files);
		qtk_digests_free(&got);
	}
	if (!rc)
		qtk_digests_free(&want);
	/* the file shrinks under the open model: an error naming a tensor, as the one-by-one read
	 * gives (the first tensor past the new end) */
	CHECK(truncate(path, (off_t)(h_len + 40000)) == 0, "truncate %s", path);
	qtk_err_clear(&err);
	int r3 = qtk_digest_model(m, &ot, &got, &err);
	CHECK(r3 && !strncmp(err.subject, "t0", 2) && strstr(err.msg, "truncated"),
	      "a shrunk file: rc %d, subject '%s': %s", r3, err.subject, err.msg);
	if (!r3)
		qtk_digests_free(&got);
	qtk_close(m);
	unlink(path);
}

static void cleanup(void)
{
	static const char *const f[] = {"a.gguf", "a.safetensors", "a16.safetensors", "noheads.gguf", "chained.gguf",
					 "patched.gguf", "patched.safetensors"};
	for (size_t i = 0; i < sizeof f / sizeof *f; i++)
		unlink(path_in(f[i]));
	rmdir(g_dir);
}

/* qtk_sha256_* (the programs' SHA-256, libcrypto loaded on first use): FIPS 180-2's "abc" and
 * its two-block message, fed in pieces, and the libcrypto the test links agreeing. */
static void test_sha256_pieces(void)
{
	static const char *const want[2] = {
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
	};
	static const char *const msg[2] = {"abc", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"};
	for (int k = 0; k < 2; k++) {
		qtk_sha256 *h = qtk_sha256_begin();
		size_t n = strlen(msg[k]);
		for (size_t i = 0; i < n; i += 5)
			qtk_sha256_add(h, msg[k] + i, n - i < 5 ? n - i : 5);
		uint8_t d[32], r[32];
		char x[65];
		bool ok = qtk_sha256_end(h, d);
		qtk_hex(d, 32, x);
		SHA256((const unsigned char *)msg[k], n, r);
		CHECK(ok && !strcmp(x, want[k]) && !memcmp(d, r, 32), "sha256 in pieces: %s", x);
	}
	CHECK(!qtk_sha256_end(NULL, (uint8_t[32]){0}), "no hash: false");
}

/* Packed matrices a model's digests hash in windows of rows (digest_one's packed_dec) give the
 * leaves of the whole-tensor stream hash (qtk_thash over every part's bytes): AWQ, GPTQ with
 * act-order, 3-bit, and groups of 32 (the fixtures' checkpoints). */
static void test_packed_windows(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures absent: packed matrices hashed in windows");
		return;
	}
	static const char *const dirs[] = {"hf/tiny-llama/awq-g128", "hf/tiny-llama/gptq-4-128-1",
					   "hf/tiny-llama/gptq-3-128-0", "hf/tiny-llama/gptq-4-32-1s"};
	for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", fx, dirs[k]);
		qtk_err err;
		qtk_model *m = qtk_open(path, &err);
		qtk_digests d;
		qtk_digest_opts o = {.threads = 2};
		if (!m || qtk_digest_model(m, &o, &d, &err)) {
			CHECK(0, "%s: open and digest", dirs[k]);
			qtk_close(m);
			continue;
		}
		size_t packed = 0, same = 0;
		for (size_t i = 0; i < m->ntensors; i++) {
			const qtk_tensor *t = &m->tensors[i];
			if (t->layout.kind == QTK_LAYOUT_PLAIN)
				continue;
			packed++;
			int heads = 0;
			qtk_thash *h = NULL;
			qtk_leaf l;
			int rc = qtk_family_qk_heads(m, t, &heads, &err);
			rc = rc ? rc : qtk_thash_new(m, t, heads, &h, &err);
			for (int p = 0; p < t->nparts && !rc; p++) {
				uint8_t *b = NULL;
				rc = qtk_read_part_alloc(m, t, p, &b);
				rc = rc ? rc : qtk_thash_put(h, b, (size_t)t->parts[p].nbytes);
				qtk_free(b);
			}
			if (rc) {
				qtk_thash_free(h);
				continue;
			}
			if (qtk_thash_end(h, &l))
				continue;
			const qtk_leaf *w = qtk_digests_find(&d, l.name);
			same += w && w->has_dec && !memcmp(w->dec, l.dec, 32) && !memcmp(w->enc, l.enc, 32);
			qtk_free(l.name);
			qtk_free(l.stored);
		}
		CHECK(packed > 0 && same == packed, "%s: %zu of %zu packed leaves as the whole-tensor hash", dirs[k], same,
		      packed);
		qtk_digests_free(&d);
		qtk_close(m);
	}
}

int main(void)
{
	test_sha256_pieces();
	test_packed_windows();
	snprintf(g_dir, sizeof g_dir, "/tmp/qtk-test-prov-XXXXXX");
	if (!mkdtemp(g_dir)) {
		perror("mkdtemp");
		return 1;
	}
	make_values();
	test_names();
	test_container_independence();
	test_describe_into();
	test_emit_stream();
	test_sig_statement();
	test_streaming();
	test_v2_forms();
	test_v2_heads16();
	test_packed_heads_sliced();
	test_int_wide();
	test_int_ct();
	test_int_ggml();
	test_int_gptq4();
	test_aff();
	test_aff_mlx();
	test_buf_flush();
	test_records();
	test_sink();
	test_async_tee();
	test_tee_pair();
	test_sha256_range();
	test_file_tap();
	test_file_tap_order();
	test_ofile_hash();
	reserve_and_patch(QTK_OUT_GGUF, "patched.gguf");
	reserve_and_patch(QTK_OUT_SAFETENSORS, "patched.safetensors");
	test_put_record(QTK_OUT_GGUF, "placed.gguf", true);
	test_put_record(QTK_OUT_SAFETENSORS, "placed.safetensors", true);
	test_put_record(QTK_OUT_QPK, "placed.qpk", true);
	test_put_record(QTK_OUT_HF, "placed-hf", false);
	test_put_record(QTK_OUT_HF, "placed-hf-shards", true); /* no side file: every shard's metadata */
	test_put_record(QTK_OUT_ARCHIVE, "placed.tar", true);
	test_gen_record(QTK_OUT_GGUF, "gen.gguf", false, 0);
	test_gen_record(QTK_OUT_GGUF, "gen-placed.gguf", true, 0);
	test_gen_record(QTK_OUT_GGUF, "gen-long.gguf", false, 2);
	test_gen_record(QTK_OUT_QPK, "gen.qpk", false, 0);
	test_gen_record(QTK_OUT_QPK, "gen-placed.qpk", true, 0);
	test_gen_record(QTK_OUT_QPK, "gen-long.qpk", false, 1);
	test_gen_record(QTK_OUT_SAFETENSORS, "gen.safetensors", false, 0);
	test_gen_record(QTK_OUT_SAFETENSORS, "gen-placed.safetensors", true, 0);
	test_gen_record(QTK_OUT_SAFETENSORS, "gen-long.safetensors", false, 3);
	test_gen_record(QTK_OUT_HF, "gen-hf", false, 0);
	test_gen_record(QTK_OUT_HF, "gen-hf-placed", true, 0);
	test_gen_record(QTK_OUT_HF, "gen-hf-long", false, 2);
	test_gen_record(QTK_OUT_ARCHIVE, "gen.tar", false, 0);
	test_gen_needs_file();
	test_hostile();
	cleanup();
	for (size_t i = 0; i < NSPEC; i++)
		free(g_vals[i]);
	return T_DONE();
}
