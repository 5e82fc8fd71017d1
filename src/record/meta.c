/* meta.c - per-key digests of behaviour-relevant metadata ("qtk-meta-v1", meta.h). */
#include "record/meta.h"
#include "record/prov.h"
#include "json.h"
#include <math.h>
#include <openssl/evp.h>
#include "lc.h"
#include <stdlib.h>
#include <string.h>

static int oom(qtk_err *err) { return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

static bool ends_with(const char *s, const char *t)
{
	size_t a = strlen(s), b = strlen(t);
	return a >= b && !strcmp(s + a - b, t);
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

bool qtk_meta_covered(const char *k)
{
	static const char *const files[] = {"chat_template.jinja", "chat_template.json", "tokenizer.json",
					    "tokenizer.model", "vocab.json", "merges.txt", "special_tokens_map.json",
					    "added_tokens.json"};
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		if (!strcmp(k, files[i]))
			return true;
	if (starts(k, "tokenizer_config.json:")) {
		const char *f = k + strlen("tokenizer_config.json:");
		return !strcmp(f, "chat_template") || ends_with(f, "_token") || !strcmp(f, "added_tokens_decoder") ||
		       !strcmp(f, "add_bos_token") || !strcmp(f, "add_eos_token") || !strcmp(f, "model_max_length");
	}
	if (starts(k, "config.json:")) {
		const char *f = k + strlen("config.json:");
		return strstr(f, "rope") || !strcmp(f, "max_position_embeddings") ||
		       !strcmp(f, "original_max_position_embeddings") || ends_with(f, "_token_id");
	}
	if (starts(k, "generation_config.json:"))
		return ends_with(k, "_token_id");
	/* GGUF keys (also as safetensors __metadata__ or QPK KVs) */
	return starts(k, "tokenizer.ggml.") || !strcmp(k, "tokenizer.chat_template") ||
	       starts(k, "tokenizer.chat_template.") || strstr(k, ".rope.") || starts(k, "rope.") ||
	       ends_with(k, ".context_length");
}

/* ---- value encodings ------------------------------------------------------------------------ */

static void put_u64(EVP_MD_CTX *md, uint64_t v)
{
	uint8_t b[8];
	qtk_wr64(b, v);
	EVP_DigestUpdate(md, b, 8);
}

static void put_str(EVP_MD_CTX *md, const char *s, size_t n)
{
	uint8_t b[4];
	qtk_wr32(b, (uint32_t)n);
	EVP_DigestUpdate(md, b, 4);
	EVP_DigestUpdate(md, s, n);
}

static void put_scalar(EVP_MD_CTX *md, unsigned t, const uint8_t *p)
{
	uint64_t u = 0;
	int64_t i = 0;
	double f = 0;
	switch (t) {
	case QTK_V_U8: case QTK_V_BOOL: u = p[0]; break;
	case QTK_V_U16: u = qtk_rd16(p); break;
	case QTK_V_U32: u = qtk_rd32(p); break;
	case QTK_V_U64: u = qtk_rd64(p); break;
	case QTK_V_I8: i = (int8_t)p[0]; u = (uint64_t)i; break;
	case QTK_V_I16: i = (int16_t)qtk_rd16(p); u = (uint64_t)i; break;
	case QTK_V_I32: i = (int32_t)qtk_rd32(p); u = (uint64_t)i; break;
	case QTK_V_I64: u = qtk_rd64(p); break;
	case QTK_V_F32: { uint32_t w = qtk_rd32(p); float x; memcpy(&x, &w, 4); f = x; memcpy(&u, &f, 8); break; }
	case QTK_V_F64: u = qtk_rd64(p); break;
	default: break;
	}
	put_u64(md, u);
}

static void put_value(EVP_MD_CTX *md, const qtk_value *v)
{
	uint8_t h[2] = {v->type, v->type == QTK_V_ARR ? v->elem : 0};
	EVP_DigestUpdate(md, h, 2);
	if (v->type == QTK_V_STR) {
		put_u64(md, 1);
		put_str(md, v->v.str.s, (size_t)v->v.str.len);
	} else if (v->type == QTK_V_ARR) {
		put_u64(md, v->n);
		if (v->elem == QTK_V_STR) {
			const qtk_str *s = v->arr;
			for (uint64_t i = 0; s && i < v->n; i++)
				put_str(md, s[i].s, (size_t)s[i].len);
		} else {
			size_t es = qtk_value_size(v->elem);
			const uint8_t *p = v->arr;
			for (uint64_t i = 0; p && es && i < v->n; i++)
				put_scalar(md, v->elem, p + i * es);
		}
	} else {
		uint8_t b[8];
		put_u64(md, 1);
		switch (v->type) {
		case QTK_V_F32: case QTK_V_F64: { double f = v->v.f; uint64_t u; memcpy(&u, &f, 8); put_u64(md, u); break; }
		case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64: put_u64(md, (uint64_t)v->v.i); break;
		default: put_u64(md, v->v.u); break;
		}
		(void)b;
	}
}

/* Canonical JSON text of a value: sorted keys, no whitespace, numbers exact. */
static int cj_put(qtk_buf *b, const cJSON *j, int depth)
{
	if (depth > 64)
		return QTK_E_DATA;
	if (cJSON_IsNumber(j)) {
		double d = j->valuedouble;
		if (isfinite(d) && d == floor(d) && fabs(d) < 9007199254740992.0)
			return qtk_buf_printf(b, "%lld", (long long)d);
		return qtk_buf_printf(b, "%.17g", d);
	}
	if (cJSON_IsString(j))
		return qtk_json_put_str(b, j->valuestring, strlen(j->valuestring));
	if (cJSON_IsNull(j))
		return qtk_buf_puts(b, "null");
	if (cJSON_IsBool(j))
		return qtk_buf_puts(b, cJSON_IsTrue(j) ? "true" : "false");
	if (cJSON_IsArray(j)) {
		int rc = qtk_buf_putc(b, '[');
		for (const cJSON *c = j->child; c && !rc; c = c->next)
			rc = (c != j->child ? qtk_buf_putc(b, ',') : 0) || cj_put(b, c, depth + 1);
		return rc ? rc : qtk_buf_putc(b, ']');
	}
	if (cJSON_IsObject(j)) {
		size_t n = 0;
		for (const cJSON *c = j->child; c; c = c->next)
			n++;
		const cJSON **v = qtk_calloc(n ? n : 1, sizeof *v);
		if (!v)
			return QTK_E_IO;
		n = 0;
		for (const cJSON *c = j->child; c; c = c->next)
			v[n++] = c;
		for (size_t i = 1; i < n; i++) /* insertion sort by key: objects are small */
			for (size_t k = i; k > 0 && strcmp(v[k - 1]->string, v[k]->string) > 0; k--) {
				const cJSON *t = v[k];
				v[k] = v[k - 1];
				v[k - 1] = t;
			}
		int rc = qtk_buf_putc(b, '{');
		for (size_t i = 0; i < n && !rc; i++) {
			rc = i ? qtk_buf_putc(b, ',') : 0;
			rc = rc ? rc : qtk_json_put_str(b, v[i]->string, strlen(v[i]->string));
			rc = rc ? rc : qtk_buf_putc(b, ':');
			rc = rc ? rc : cj_put(b, v[i], depth + 1);
		}
		qtk_free(v);
		return rc ? rc : qtk_buf_putc(b, '}');
	}
	return QTK_E_DATA;
}

/* ---- the list -------------------------------------------------------------------------------- */

typedef struct acc {
	qtk_metad *d;
	size_t cap;
	qtk_err *err;
} acc;

static EVP_MD_CTX *begin(const char *key)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return NULL;
	}
	EVP_DigestUpdate(md, QTK_META_SCHEME, sizeof QTK_META_SCHEME); /* with its NUL */
	put_str(md, key, strlen(key));
	return md;
}

static int finish(acc *a, const char *key, EVP_MD_CTX *md)
{
	if (!md)
		return oom(a->err);
	if (a->d->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 32;
		qtk_metad_item *v = qtk_realloc(a->d->it, nc * sizeof *v);
		if (!v) {
			EVP_MD_CTX_free(md);
			return oom(a->err);
		}
		a->d->it = v;
		a->cap = nc;
	}
	qtk_metad_item *it = &a->d->it[a->d->n];
	unsigned l = 0;
	EVP_DigestFinal_ex(md, it->d, &l);
	EVP_MD_CTX_free(md);
	if (!(it->key = qtk_strdup(key)))
		return oom(a->err);
	it->covered = qtk_meta_covered(key);
	a->d->n++;
	return 0;
}

static int item_cmp(const void *x, const void *y)
{
	return strcmp(((const qtk_metad_item *)x)->key, ((const qtk_metad_item *)y)->key);
}

/* Top-level keys of a side file (JSON), covered ones only. */
static int json_file_keys(acc *a, const qtk_model *m, const char *file)
{
	const qtk_blob *b = qtk_blob_find(m, file);
	if (!b)
		return 0;
	qtk_json_doc doc;
	memset(&doc, 0, sizeof doc);
	qtk_err e;
	qtk_err_clear(&e);
	if (qtk_json_parse((const char *)b->data, b->len, 0, file, 0, &e, &doc) || !cJSON_IsObject(doc.root)) {
		qtk_json_doc_free(&doc);
		return 0; /* the reader decides whether a malformed side file is an error */
	}
	int rc = 0;
	for (const cJSON *c = doc.root->child; c && !rc; c = c->next) {
		char key[512];
		if ((size_t)snprintf(key, sizeof key, "%s:%s", file, c->string) >= sizeof key || !qtk_meta_covered(key))
			continue;
		qtk_buf t = {0};
		if (cj_put(&t, c, 0) || t.failed) {
			qtk_buf_free(&t);
			continue;
		}
		EVP_MD_CTX *md = begin(key);
		if (md)
			EVP_DigestUpdate(md, t.p, t.len);
		qtk_buf_free(&t);
		rc = finish(a, key, md);
	}
	qtk_json_doc_free(&doc);
	return rc;
}

int qtk_meta_digests(const qtk_model *m, bool hf, qtk_metad *out, qtk_err *err)
{
	memset(out, 0, sizeof *out);
	acc a = {out, 0, err};
	int rc = 0;
	for (size_t i = 0; i < m->nkv && !rc && !hf; i++) {
		const char *k = m->kv[i].key;
		if (!strcmp(k, QTK_PROV_KEY) || starts(k, "split."))
			continue;
		EVP_MD_CTX *md = begin(k);
		if (md)
			put_value(md, &m->kv[i].val);
		rc = finish(&a, k, md);
	}
	if (hf) {
		/* whole side files, then covered keys of the JSON ones */
		for (size_t i = 0; i < m->nblobs && !rc; i++) {
			const qtk_blob *b = &m->blobs[i];
			if (!qtk_meta_covered(b->name))
				continue;
			EVP_MD_CTX *md = begin(b->name);
			if (md)
				EVP_DigestUpdate(md, b->data, b->len);
			rc = finish(&a, b->name, md);
		}
		static const char *const jf[] = {"config.json", "tokenizer_config.json", "generation_config.json"};
		for (size_t i = 0; i < 3 && !rc; i++)
			rc = json_file_keys(&a, m, jf[i]);
		/* an HF directory's writer regenerates its own metadata: only the covered keys count */
		size_t k = 0;
		for (size_t i = 0; i < out->n; i++) {
			if (out->it[i].covered)
				out->it[k++] = out->it[i];
			else
				qtk_free(out->it[i].key);
		}
		out->n = k;
	}
	if (rc) {
		qtk_metad_free(out);
		return rc;
	}
	if (out->n > 1)
		qsort(out->it, out->n, sizeof *out->it, item_cmp);
	/* duplicate keys (a safetensors __metadata__ and a blob of one name) keep the first */
	size_t k = 0;
	for (size_t i = 0; i < out->n; i++) {
		if (k && !strcmp(out->it[k - 1].key, out->it[i].key)) {
			qtk_free(out->it[i].key);
			continue;
		}
		out->it[k++] = out->it[i];
	}
	out->n = k;
	return 0;
}

void qtk_metad_free(qtk_metad *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		qtk_free(d->it[i].key);
	qtk_free(d->it);
	memset(d, 0, sizeof *d);
}

const qtk_metad_item *qtk_metad_find(const qtk_metad *d, const char *key)
{
	size_t lo = 0, hi = d->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(d->it[mid].key, key);
		if (!c)
			return &d->it[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

cJSON *qtk_meta_json(const qtk_metad *d)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "scheme", QTK_META_SCHEME);
	cJSON *keys = cJSON_AddObjectToObject(o, "keys"), *other = NULL;
	for (size_t i = 0; i < d->n; i++) {
		char h[65];
		qtk_hex(d->it[i].d, 32, h);
		if (!d->it[i].covered && !other)
			other = cJSON_AddObjectToObject(o, "other");
		cJSON_AddStringToObject(d->it[i].covered ? keys : other, d->it[i].key, h);
	}
	return o;
}
