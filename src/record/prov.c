/* prov.c - provenance records: canonical JSON, strict validation, building, patching. */
#include "record/prov.h"
#include "record/meta.h"
#include "json.h"
#include "record/audit.h"
#include <openssl/evp.h>
#include "lc.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PH_CHAR '~'
#define HEXLEN 64

static int oom(qtk_err *err) { return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

/* ---- finding ---------------------------------------------------------------------- */

const char *qtk_prov_find(const qtk_model *m, size_t *len, const char **where)
{
	/* a directory's own record file first: its shards' metadata may carry an older one */
	const qtk_blob *b = qtk_blob_find(m, QTK_PROV_FILE);
	if (b) {
		*len = b->len;
		if (where)
			*where = "file " QTK_PROV_FILE;
		return (const char *)b->data;
	}
	const qtk_kv *kv = qtk_kv_find(m, QTK_PROV_KEY);
	if (kv && kv->val.type == QTK_V_STR) {
		*len = (size_t)kv->val.v.str.len;
		if (where)
			*where = "kv " QTK_PROV_KEY;
		return kv->val.v.str.s;
	}
	*len = 0;
	return NULL;
}

/* ---- hex, time --------------------------------------------------------------------- */

bool qtk_prov_unhex(const char *s, uint8_t out[32])
{
	if (!s || strlen(s) != HEXLEN)
		return false;
	for (size_t i = 0; i < 32; i++) {
		int v = 0;
		for (size_t k = 0; k < 2; k++) {
			char c = s[2 * i + k];
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0)
				return false;
			v = v * 16 + d;
		}
		out[i] = (uint8_t)v;
	}
	return true;
}

void qtk_prov_time(int64_t t, char *buf, size_t n)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm)) {
		snprintf(buf, n, "1970-01-01T00:00:00Z");
		return;
	}
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int64_t qtk_prov_now(void)
{
	const char *e = getenv("SOURCE_DATE_EPOCH");
	uint64_t v;
	if (e && qtk_parse_u64(e, &v) && v <= (uint64_t)INT32_MAX * 64)
		return (int64_t)v;
	return (int64_t)time(NULL);
}

void qtk_prov_builder_init(qtk_prov_builder *b)
{
	memset(b, 0, sizeof *b);
	b->time = qtk_prov_now();
}

void qtk_prov_builder_free(qtk_prov_builder *b)
{
	if (!b)
		return;
	if (b->src_th_live) { /* a run that failed: stop hashing the source, do not wait for it */
		__atomic_store_n(&b->src_cancel, 1, __ATOMIC_RELAXED);
		pthread_join(b->src_th, NULL);
		b->src_th_live = false;
	}
	qtk_digests_free(&b->src_cache);
	qtk_filelist_free(&b->files_cache);
	cJSON_Delete(b->audit_cache);
	b->audit_cache = NULL;
	qtk_free(b->parent_own);
	b->parent_own = NULL;
	b->parent_txt = NULL;
	b->parent_state = 0;
	b->cached = false;
}

/* ---- canonical serialization ---------------------------------------------------------- */

static int key_cmp(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	return strcmp(x->string, y->string);
}

/* A part of a record written by a function rather than held as a tree: the tree has a raw
 * item in its place (cJSON_CreateRaw("")) and the hook at that item writes the canonical text
 * (a record's per-tensor lists, tens of megabytes as trees, go straight into the text). */
typedef struct canon_hook {
	const cJSON *at;
	int (*put)(qtk_buf *b, const void *ctx);
	const void *ctx;
} canon_hook;

typedef struct canon_hooks {
	canon_hook h[4];
	size_t n;
} canon_hooks;

static cJSON *hook_at(canon_hooks *hs, int (*put)(qtk_buf *b, const void *ctx), const void *ctx)
{
	cJSON *r = hs->n < sizeof hs->h / sizeof *hs->h ? cJSON_CreateRaw("") : NULL;
	if (r)
		hs->h[hs->n++] = (canon_hook){r, put, ctx};
	return r;
}

static int canon_put(qtk_buf *b, const cJSON *j, int depth, const canon_hooks *hs)
{
	if (depth > 64)
		return QTK_E_DATA;
	if (cJSON_IsRaw(j)) { /* a hook's place */
		for (size_t i = 0; hs && i < hs->n; i++)
			if (hs->h[i].at == j)
				return hs->h[i].put(b, hs->h[i].ctx);
		/* a tensor list kept as its canonical text (qtk_prov_parse) */
		if (j->valuestring && (j->valuestring[0] == '[' || j->valuestring[0] == '{'))
			return qtk_buf_puts(b, j->valuestring);
		return QTK_E_DATA;
	}
	if (cJSON_IsNull(j))
		return qtk_buf_puts(b, "null");
	if (cJSON_IsTrue(j))
		return qtk_buf_puts(b, "true");
	if (cJSON_IsFalse(j))
		return qtk_buf_puts(b, "false");
	if (cJSON_IsNumber(j)) {
		uint64_t v;
		if (!qtk_json_u64(j, &v))
			return QTK_E_DATA;
		return qtk_buf_printf(b, "%llu", (unsigned long long)v);
	}
	if (cJSON_IsString(j))
		return qtk_json_put_str(b, j->valuestring, strlen(j->valuestring));
	if (cJSON_IsArray(j)) {
		int rc = qtk_buf_putc(b, '[');
		size_t i = 0;
		for (const cJSON *c = j->child; c && !rc; c = c->next, i++) {
			if (i)
				rc = qtk_buf_putc(b, ',');
			rc = rc ? rc : canon_put(b, c, depth + 1, hs);
		}
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
		qsort(v, n, sizeof *v, key_cmp);
		int rc = qtk_buf_putc(b, '{');
		for (size_t i = 0; i < n && !rc; i++) {
			if (i)
				rc = qtk_buf_putc(b, ',');
			rc = rc ? rc : qtk_json_put_str(b, v[i]->string, strlen(v[i]->string));
			rc = rc ? rc : qtk_buf_putc(b, ':');
			rc = rc ? rc : canon_put(b, v[i], depth + 1, hs);
		}
		qtk_free(v);
		return rc ? rc : qtk_buf_putc(b, '}');
	}
	return QTK_E_DATA;
}

char *qtk_prov_canonical(const cJSON *j)
{
	qtk_buf b = {0};
	if (canon_put(&b, j, 0, NULL) || b.failed || !b.p) {
		qtk_buf_free(&b);
		return NULL;
	}
	return (char *)b.p;
}

static int sha_put(void *ctx, const uint8_t *p, size_t n)
{
	qtk_sha256_add(ctx, p, n);
	return 0;
}

int qtk_prov_sha256(const cJSON *j, uint8_t out[32])
{
	/* the canonical text hashed a megabyte at a time as it is made (a record's tens of MB are
	 * never held whole) */
	qtk_sha256 *h = qtk_sha256_begin();
	qtk_buf b = {0};
	b.flush = sha_put;
	b.flush_ctx = h;
	int rc = h ? 0 : QTK_E_IO;
	if (!rc && qtk_buf_reserve(&b, (size_t)1 << 20))
		rc = QTK_E_IO;
	rc = rc ? rc : canon_put(&b, j, 0, NULL);
	rc = rc || b.failed || qtk_buf_flush(&b) ? QTK_E_IO : 0;
	qtk_buf_free(&b);
	const bool ok = h && qtk_sha256_end(h, out); /* frees h */
	return !rc && ok ? 0 : QTK_E_IO;
}

/* ---- strict validation: a table of fields per object ------------------------------------- */

typedef enum { F_STR, F_UINT, F_BOOL, F_OBJ, F_ARR, F_HEX, F_ANY, F_STR_OR_OBJ, F_OBJ_OR_NULL } ftype;

/* One entry of a record's tensor list as the list's checks need it. */
typedef struct tent {
	const char *name; /* decoded */
	uint8_t enc[32], dec[32];
} tent;

/* A tensor list kept as its canonical text (qtk_prov_parse): the raw item it became, and its
 * entries, sorted by name, for the output's root check. */
typedef struct tlist {
	const cJSON *at;
	tent *e;
	size_t n;
	char *names; /* the entries' names, one after another */
} tlist;

typedef struct vctx {
	const char *file;
	qtk_err *err;
	int depth;
	tlist *lists; /* the lists kept as text, checked entry by entry when they were read */
	size_t nlists;
} vctx;

typedef int (*vfn)(vctx *v, const cJSON *j, const char *path);

typedef struct field {
	const char *name;
	ftype type;
	bool required;
	vfn check; /* further checks of the value, or NULL */
} field;

static int bad(vctx *v, const char *path, const char *what)
{
	return qtk_err_set(v->err, QTK_E_DATA, v->file, -1, path, "provenance record: %s", what);
}

static bool type_ok(const cJSON *j, ftype t)
{
	uint64_t u;
	uint8_t h[32];
	switch (t) {
	case F_STR: return cJSON_IsString(j);
	case F_UINT: return qtk_json_u64(j, &u);
	case F_BOOL: return cJSON_IsBool(j);
	case F_OBJ: return cJSON_IsObject(j);
	case F_ARR: return cJSON_IsArray(j) || (cJSON_IsRaw(j) && j->valuestring && j->valuestring[0] == '[');
	case F_HEX: return cJSON_IsString(j) && qtk_prov_unhex(j->valuestring, h);
	case F_ANY: return true;
	case F_STR_OR_OBJ: return cJSON_IsString(j) || cJSON_IsObject(j);
	case F_OBJ_OR_NULL: return cJSON_IsObject(j) || cJSON_IsNull(j);
	}
	return false;
}

static const char *type_name(ftype t)
{
	static const char *const n[] = {"a string", "a non-negative integer", "a boolean", "an object", "an array",
					"64 lower-case hex digits", "a value", "a string or an object",
					"an object or null"};
	return n[t];
}

/* Check j (an object) against fields[]: unknown keys, types, required fields, sub-checks. */
static int check_obj(vctx *v, const cJSON *j, const char *path, const field *fs, size_t nf, bool open)
{
	char sub[256];
	if (!cJSON_IsObject(j))
		return bad(v, path, "must be an object");
	for (const cJSON *c = j->child; c; c = c->next) {
		size_t k = 0;
		while (k < nf && strcmp(fs[k].name, c->string))
			k++;
		snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", c->string);
		if (k == nf) {
			if (open)
				continue;
			return bad(v, sub, "unknown field");
		}
		if (!type_ok(c, fs[k].type)) {
			char m[96];
			snprintf(m, sizeof m, "must be %s", type_name(fs[k].type));
			return bad(v, sub, m);
		}
		if (fs[k].check) {
			int rc = fs[k].check(v, c, sub);
			if (rc)
				return rc;
		}
	}
	for (size_t k = 0; k < nf; k++)
		if (fs[k].required && !cJSON_GetObjectItemCaseSensitive(j, fs[k].name)) {
			snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", fs[k].name);
			return bad(v, sub, "missing");
		}
	return 0;
}

static int check_file(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"path", F_STR, true, NULL}, {"size", F_UINT, true, NULL}, {"sha256", F_HEX, true, NULL},
	};
	int rc = check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "path");
	if (!rc && (!p->valuestring[0] || p->valuestring[0] == '/' || strstr(p->valuestring, "..")))
		rc = bad(v, path, "file path must be relative and stay inside the model");
	return rc;
}

static int check_files(vctx *v, const cJSON *j, const char *path)
{
	char sub[256];
	size_t i = 0;
	for (const cJSON *c = j->child; c; c = c->next, i++) {
		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		int rc = check_file(v, c, sub);
		if (rc)
			return rc;
		for (const cJSON *d = j->child; d != c; d = d->next)
			if (!strcmp(cJSON_GetObjectItemCaseSensitive(d, "path")->valuestring,
				    cJSON_GetObjectItemCaseSensitive(c, "path")->valuestring))
				return bad(v, sub, "file listed twice");
	}
	return 0;
}

static int check_scheme(vctx *v, const cJSON *j, const char *path)
{
	return qtk_digest_scheme_of(j->valuestring) ? 0 : bad(v, path, "unknown digest scheme");
}

static int check_root(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"scheme", F_STR, true, check_scheme}, {"count", F_UINT, true, NULL},
		{"encoded", F_HEX, true, NULL}, {"decoded", F_HEX, true, NULL},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_shape(vctx *v, const cJSON *j, const char *path)
{
	int n = 0;
	uint64_t u;
	for (const cJSON *c = j->child; c; c = c->next, n++)
		if (!qtk_json_u64(c, &u))
			return bad(v, path, "shape entries must be non-negative integers");
	return n > QTK_MAX_DIMS ? bad(v, path, "too many dimensions") : 0;
}

static int check_dkind(vctx *v, const cJSON *j, const char *path)
{
	return strcmp(j->valuestring, "f32") && strcmp(j->valuestring, "raw") ? bad(v, path, "must be \"f32\" or \"raw\"")
									      : 0;
}

static int check_tensor(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"name", F_STR, true, NULL},        {"stored", F_STR, false, NULL},
		{"encoding", F_STR, true, NULL},    {"shape", F_ARR, true, check_shape},
		{"encoded", F_HEX, true, NULL},     {"decoded", F_HEX, true, NULL},
		{"decoded_kind", F_STR, false, check_dkind}, {"permute_qk", F_UINT, false, NULL},
		{"bytes", F_UINT, false, NULL},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int tent_cmp(const void *a, const void *b)
{
	return strcmp(((const tent *)a)->name, ((const tent *)b)->name);
}

/* An entry that check_tensor accepted, as the list's checks need it. */
static void tent_of(const cJSON *c, tent *t)
{
	t->name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
	qtk_prov_unhex(cJSON_GetObjectItemCaseSensitive(c, "encoded")->valuestring, t->enc);
	qtk_prov_unhex(cJSON_GetObjectItemCaseSensitive(c, "decoded")->valuestring, t->dec);
}

/* The entries sorted by name: a tensor listed twice fails (path names the list). */
static int tents_sort(vctx *v, tent *e, size_t n, const char *path)
{
	if (n > 1)
		qsort(e, n, sizeof *e, tent_cmp);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(e[i - 1].name, e[i].name)) {
			char sub[256];
			snprintf(sub, sizeof sub, "%s: '%.160s'", path, e[i].name);
			return bad(v, sub, "tensor listed twice");
		}
	return 0;
}

/* Root over the record's own leaves (C.2 row 56: a record must be self-consistent); e sorted
 * by name. */
static void leaves_root(const tent *e, size_t n, bool dec, const char *tag, uint8_t out[32])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t cnt[8];
	unsigned len = 0;
	qtk_wr64(cnt, n);
	memset(out, 0, 32);
	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return;
	}
	EVP_DigestUpdate(md, tag, strlen(tag) + 1);
	EVP_DigestUpdate(md, cnt, 8);
	for (size_t i = 0; i < n; i++)
		EVP_DigestUpdate(md, dec ? e[i].dec : e[i].enc, 32);
	EVP_DigestFinal_ex(md, out, &len);
	EVP_MD_CTX_free(md);
}

/* A list held as a tree; one kept as text was checked entry by entry when it was read. */
static int check_tensors(vctx *v, const cJSON *j, const char *path)
{
	if (cJSON_IsRaw(j))
		return 0;
	char sub[256];
	size_t n = 0;
	for (const cJSON *c = j->child; c; c = c->next, n++) {
		snprintf(sub, sizeof sub, "%s[%zu]", path, n);
		int rc = check_tensor(v, c, sub);
		if (rc)
			return rc;
	}
	tent *e = qtk_calloc(n ? n : 1, sizeof *e);
	if (!e)
		return oom(v->err);
	n = 0;
	for (const cJSON *c = j->child; c; c = c->next)
		tent_of(c, &e[n++]);
	int rc = tents_sort(v, e, n, path);
	qtk_free(e);
	return rc;
}

static int check_record_rec(vctx *v, const cJSON *j, const char *path);

static int check_parent(vctx *v, const cJSON *j, const char *path)
{
	if (cJSON_IsNull(j))
		return 0;
	if (v->depth >= 16)
		return bad(v, path, "record chain deeper than 16");
	v->depth++;
	int rc = check_record_rec(v, j, path);
	v->depth--;
	return rc;
}

static int check_source(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"container", F_STR, true, NULL},   {"files", F_ARR, false, check_files},
		{"tensor_root", F_OBJ, false, check_root}, {"name", F_STR, false, NULL},
		{"revision", F_STR, false, NULL},   {"url", F_STR, false, NULL},
		{"record", F_OBJ_OR_NULL, false, check_parent}, {"record_sha256", F_HEX, false, NULL},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_kind(vctx *v, const cJSON *j, const char *path)
{
	static const char *const k[] = {"repack", "quantize", "convert", "dequantize"};
	for (size_t i = 0; i < 4; i++)
		if (!strcmp(j->valuestring, k[i]))
			return 0;
	return bad(v, path, "must be repack, quantize, convert or dequantize");
}

static int check_ops(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {{"op", F_STR, true, NULL}};
	char sub[256];
	size_t i = 0;
	for (const cJSON *c = j->child; c; c = c->next, i++) {
		snprintf(sub, sizeof sub, "%s[%zu]", path, i);
		int rc = check_obj(v, c, sub, fs, 1, true);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_transform(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"kind", F_STR, true, check_kind}, {"method", F_STR, true, NULL},
		{"params", F_OBJ, false, NULL},    {"name_map", F_STR_OR_OBJ, false, NULL},
		{"layout_ops", F_ARR, false, check_ops},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_none_or_digest(vctx *v, const cJSON *j, const char *path)
{
	if (cJSON_IsString(j))
		return strcmp(j->valuestring, "none") ? bad(v, path, "must be \"none\" or an object") : 0;
	static const field fs[] = {{"sha256", F_HEX, true, NULL}};
	return check_obj(v, j, path, fs, 1, true);
}

static int check_tool(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"name", F_STR, true, NULL}, {"version", F_STR, true, NULL}, {"build", F_OBJ, false, NULL},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_finding(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"kind", F_STR, true, NULL}, {"code", F_BOOL, true, NULL},
		{"where", F_STR, true, NULL}, {"detail", F_STR, true, NULL},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_findings(vctx *v, const cJSON *j, const char *path)
{
	char sub[256];
	int i = 0;
	for (const cJSON *c = j->child; c; c = c->next, i++) {
		snprintf(sub, sizeof sub, "%s[%d]", path, i);
		int rc = check_finding(v, c, sub);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_audit_scheme(vctx *v, const cJSON *j, const char *path)
{
	return strcmp(j->valuestring, QTK_AUDIT_SCHEME) ? bad(v, path, "unknown audit scheme") : 0;
}

static int check_audit(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"scheme", F_STR, true, check_audit_scheme}, {"templates", F_UINT, true, NULL},
		{"code", F_UINT, true, NULL}, {"findings", F_ARR, true, check_findings},
		{"more", F_UINT, false, NULL},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_version(vctx *v, const cJSON *j, const char *path)
{
	uint64_t u = 0;
	qtk_json_u64(j, &u);
	return u != QTK_PROV_VERSION ? bad(v, path, "unknown record_version (this qtk reads version 1)") : 0;
}

/* "metadata": {"scheme": "qtk-meta-v1", "keys": {key: digest}, "other": {key: digest}} */
static int check_meta_map(vctx *v, const cJSON *j, const char *path)
{
	char sub[256];
	size_t n = 0;
	for (const cJSON *c = j->child; c; c = c->next, n++) {
		snprintf(sub, sizeof sub, "%s.%.160s", path, c->string);
		if (!type_ok(c, F_HEX))
			return bad(v, sub, "must be 64 lower-case hex digits");
	}
	return n > 100000 ? bad(v, path, "more than 100000 keys") : 0;
}

static int check_meta_scheme(vctx *v, const cJSON *j, const char *path)
{
	return strcmp(j->valuestring, QTK_META_SCHEME) ? bad(v, path, "unknown metadata scheme (this qtk reads "
							 QTK_META_SCHEME ")") : 0;
}

static int check_meta(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"scheme", F_STR, true, check_meta_scheme},
		{"keys", F_OBJ, true, check_meta_map},
		{"other", F_OBJ, false, check_meta_map},
	};
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

static int check_output(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"container", F_STR, true, NULL},  {"files", F_ARR, false, check_files},
		{"tensor_root", F_OBJ, false, check_root}, {"tensors", F_ARR, false, check_tensors},
		{"metadata", F_OBJ, false, check_meta},
	};
	int rc = check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "tensors");
	const cJSON *root = cJSON_GetObjectItemCaseSensitive(j, "tensor_root");
	char sub[256];
	if (rc || !ts)
		return rc;
	snprintf(sub, sizeof sub, "%s.tensor_root", path);
	if (!root)
		return bad(v, sub, "missing (the record lists tensors)");
	/* the entries sorted by name: kept from the list's read when it is text, else gathered */
	const tlist *tl = NULL;
	for (size_t i = 0; i < v->nlists && !tl; i++)
		if (v->lists[i].at == ts)
			tl = &v->lists[i];
	size_t n = 0;
	tent *own = NULL;
	if (!tl) {
		for (const cJSON *c = ts->child; c; c = c->next)
			n++;
		if (!(own = qtk_calloc(n ? n : 1, sizeof *own)))
			return oom(v->err);
		n = 0;
		for (const cJSON *c = ts->child; c; c = c->next)
			tent_of(c, &own[n++]);
		qsort(own, n, sizeof *own, tent_cmp);
	}
	const tent *e = tl ? tl->e : own;
	n = tl ? tl->n : n;
	uint64_t cnt;
	qtk_json_u64(cJSON_GetObjectItemCaseSensitive(root, "count"), &cnt);
	if (cnt != n) {
		qtk_free(own);
		return bad(v, sub, "count differs from the number of tensors listed");
	}
	const int ver = qtk_digest_scheme_of(cJSON_GetObjectItemCaseSensitive(root, "scheme")->valuestring);
	char rtag[2][32];
	snprintf(rtag[0], sizeof rtag[0], "qtk-root-v%d/encoded", ver);
	snprintf(rtag[1], sizeof rtag[1], "qtk-root-v%d/decoded", ver);
	static const char *const tiers[2] = {"encoded", "decoded"};
	for (int t = 0; t < 2 && !rc; t++) {
		uint8_t want[32], got[32];
		leaves_root(e, n, t == 1, rtag[t], got);
		qtk_prov_unhex(cJSON_GetObjectItemCaseSensitive(root, tiers[t])->valuestring, want);
		if (memcmp(want, got, 32)) {
			snprintf(sub, sizeof sub, "%s.tensor_root.%s", path, tiers[t]);
			rc = bad(v, sub, "inconsistent: differs from the root of the record's own tensor list");
		}
	}
	qtk_free(own);
	return rc;
}

static int check_record_rec(vctx *v, const cJSON *j, const char *path)
{
	static const field fs[] = {
		{"record_version", F_UINT, true, check_version},
		{"output", F_OBJ, true, check_output},
		{"source", F_OBJ, false, check_source},
		{"transform", F_OBJ, false, check_transform},
		{"calibration", F_STR_OR_OBJ, false, check_none_or_digest},
		{"imatrix", F_STR_OR_OBJ, false, check_none_or_digest},
		{"tool", F_OBJ, true, check_tool},
		{"determinism", F_OBJ, false, NULL},
		{"audit", F_OBJ, false, check_audit},
		{"time", F_STR, false, NULL},
		{"embedded", F_OBJ_OR_NULL, false, check_parent},
	};
	/* record_version first: an unknown version is reported as such, not as unknown fields */
	const cJSON *rv = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "record_version") : NULL;
	char sub[256];
	snprintf(sub, sizeof sub, "%s%srecord_version", path, *path ? "." : "");
	if (rv && !type_ok(rv, F_UINT))
		return bad(v, sub, "must be a non-negative integer");
	if (rv && check_version(v, rv, sub))
		return v->err->code;
	return check_obj(v, j, path, fs, sizeof fs / sizeof *fs, false);
}

/* ---- reading: the tensor lists as text ------------------------------------------------- */

/* A record's tensor lists (output.tensors, its own and its chained records') are most of it: a
 * cJSON tree of one takes ~1 KB an entry (ten nodes and their strings) against ~300 bytes of
 * text. qtk_prov_parse finds them in the text first, parses the rest as a tree with an empty
 * list in each place, reads each list one entry at a time (the strict parse and check_tensor
 * on each entry's own text, its name and digests kept for the list's checks) and puts in each
 * place a raw item holding the list's canonical text. Whatever the finder does not recognize
 * (an escaped key, a chain deeper than the checks allow) stays a tree and is checked as one. */

#define LIST_MAX 40 /* the record and its chained and embedded records: 17 deep at most */

typedef struct lspan {
	size_t off, len;  /* the list in the text, brackets included */
	bool map;         /* transform.params.tensors: an object by tensor name */
	char path[512];   /* "source.record.output.tensors" */
} lspan;

typedef struct lfind {
	const char *s;
	size_t n;
	lspan sp[LIST_MAX];
	size_t nsp;
} lfind;

static bool l_key(const char *s, size_t a, size_t b, const char *k)
{
	const size_t kl = strlen(k);
	return b - a == kl + 2 && !memcmp(s + a + 1, k, kl);
}

/* The members of the object at i: fn(key start, key end, value start, value end) for each.
 * false when the text is not an object there (the strict parse will say what it is). */
static bool l_members(lfind *f, size_t i, bool (*fn)(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, void *c),
		      void *c)
{
	const char *s = f->s;
	size_t n = f->n;
	if (i >= n || s[i] != '{')
		return false;
	i = qtk_json_skip_ws(s, n, i + 1);
	if (i < n && s[i] == '}')
		return true;
	for (;;) {
		size_t kb, va, vb, bad;
		if (!qtk_json_member_at(s, n, i, &kb, &va, &vb, &bad) || !fn(f, i, kb, va, vb, c))
			return false;
		i = qtk_json_skip_ws(s, n, vb);
		if (i < n && s[i] == '}')
			return true;
		if (i >= n || s[i] != ',')
			return false;
		i = qtk_json_skip_ws(s, n, i + 1);
	}
}

typedef struct lctx {
	char prefix[448];
	int depth;
} lctx;

static bool l_record(lfind *f, size_t at, const char *prefix, int depth);

/* A member "tensors" whose value opens with `open` ('[' a list, '{' a map): noted. */
static bool l_tensors(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, const lctx *x, char open)
{
	if (l_key(f->s, ka, kb, "tensors") && f->s[va] == open && f->nsp < LIST_MAX) {
		lspan *sp = &f->sp[f->nsp++];
		sp->off = va;
		sp->len = vb - va;
		sp->map = open == '{';
		snprintf(sp->path, sizeof sp->path, "%.440stensors", x->prefix);
	}
	return true;
}

static bool l_in_output(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, void *c)
{
	return l_tensors(f, ka, kb, va, vb, c, '[');
}

/* transform.params.tensors: {"name": {"from": ..., "to": ...}, ...}, no checks of its own */
static bool l_in_params(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, void *c)
{
	return l_tensors(f, ka, kb, va, vb, c, '{');
}

static bool l_in_transform(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, void *c)
{
	(void)vb;
	const lctx *x = c;
	if (l_key(f->s, ka, kb, "params") && f->s[va] == '{') {
		lctx sub = {.depth = x->depth};
		snprintf(sub.prefix, sizeof sub.prefix, "%.400sparams.", x->prefix);
		return l_members(f, va, l_in_params, &sub);
	}
	return true;
}

static bool l_in_source(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, void *c)
{
	(void)vb;
	const lctx *x = c;
	if (l_key(f->s, ka, kb, "record") && f->s[va] == '{') {
		char p[448];
		snprintf(p, sizeof p, "%.400srecord.", x->prefix);
		return l_record(f, va, p, x->depth + 1);
	}
	return true;
}

static bool l_in_record(lfind *f, size_t ka, size_t kb, size_t va, size_t vb, void *c)
{
	(void)vb;
	const lctx *x = c;
	lctx sub = {.depth = x->depth};
	if (f->s[va] != '{')
		return true;
	if (l_key(f->s, ka, kb, "output")) {
		snprintf(sub.prefix, sizeof sub.prefix, "%.400soutput.", x->prefix);
		return l_members(f, va, l_in_output, &sub);
	}
	if (l_key(f->s, ka, kb, "source")) {
		snprintf(sub.prefix, sizeof sub.prefix, "%.400ssource.", x->prefix);
		return l_members(f, va, l_in_source, &sub);
	}
	if (l_key(f->s, ka, kb, "transform")) {
		snprintf(sub.prefix, sizeof sub.prefix, "%.400stransform.", x->prefix);
		return l_members(f, va, l_in_transform, &sub);
	}
	if (l_key(f->s, ka, kb, "embedded")) {
		snprintf(sub.prefix, sizeof sub.prefix, "%.400sembedded.", x->prefix);
		return l_record(f, va, sub.prefix, x->depth + 1);
	}
	return true;
}

static bool l_record(lfind *f, size_t at, const char *prefix, int depth)
{
	if (depth > 16 || strlen(prefix) > 380)
		return true; /* left as a tree: check_parent refuses the chain */
	lctx x = {.depth = depth};
	snprintf(x.prefix, sizeof x.prefix, "%s", prefix);
	return l_members(f, at, l_in_record, &x);
}

/* The item at a dotted path of object keys, or NULL. */
static cJSON *l_item(cJSON *root, const char *path, cJSON **parent)
{
	char key[32];
	cJSON *j = root;
	*parent = NULL;
	while (j && *path) {
		size_t k = strcspn(path, ".");
		snprintf(key, sizeof key, "%.*s", (int)k, path);
		*parent = j;
		j = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, key) : NULL;
		path += k + (path[k] == '.');
	}
	return j;
}

/* After an item of a list or map that closes at end, the item ending at e: *p is the next
 * item's first byte, or end when none follows. A comma before the close, or anything but a
 * comma, is invalid JSON. */
static int next_item(vctx *v, const char *text, size_t end, size_t e, size_t *p)
{
	size_t i = qtk_json_skip_ws(text, end, e);
	if (i < end && text[i] == ',') {
		i = qtk_json_skip_ws(text, end, i + 1);
		if (i >= end)
			return qtk_err_set(v->err, QTK_E_DATA, v->file, (int64_t)i, NULL, "invalid json");
	} else if (i < end) {
		return qtk_err_set(v->err, QTK_E_DATA, v->file, (int64_t)i, NULL, "invalid json");
	}
	*p = i;
	return 0;
}

/* With `same`: the canonical text in b compared with text from *q on (then dropped), *same
 * cleared at the first difference. Without: b keeps it. */
static void cmp_flush(qtk_buf *b, const char *text, size_t stop, size_t *q, bool *same)
{
	if (!same)
		return;
	if (*same && (b->len > stop - *q || memcmp(text + *q, b->p, b->len)))
		*same = false;
	*q += b->len;
	b->len = 0;
}

/* Read the list sp of text entry by entry: each entry parsed strictly and checked, its name
 * and digests kept in tl (sorted by name, names unique), and written canonically: to *canon,
 * or, with `same`, only compared with the list's own text (*same: they are equal). */
static int lift_list(vctx *v, const char *text, const lspan *sp, tlist *tl, char **canon, bool *same)
{
	const size_t end = sp->off + sp->len - 1; /* the closing bracket */
	if (sp->len < 2 || text[end] != ']')
		return qtk_err_set(v->err, QTK_E_DATA, v->file, (int64_t)end, NULL, "invalid json");
	qtk_buf b = {0}, names = {0};
	size_t cap = 0, i = 0, q = sp->off;
	if (qtk_buf_reserve(&b, same ? 4096 : sp->len)) /* canonical text is never longer */
		return oom(v->err);
	size_t p = qtk_json_skip_ws(text, end, sp->off + 1);
	int rc = qtk_buf_putc(&b, '[');
	while (!rc && p < end) {
		size_t e = qtk_json_skip_value(text, end, p);
		if (e == SIZE_MAX) {
			rc = qtk_err_set(v->err, QTK_E_DATA, v->file, (int64_t)p, NULL, "invalid json");
			break;
		}
		qtk_json_doc d;
		if ((rc = qtk_json_parse(text + p, e - p, QTK_JSON_INTS, v->file, (int64_t)p, v->err, &d)))
			break;
		char sub[256];
		snprintf(sub, sizeof sub, "%s[%zu]", sp->path, i);
		rc = check_tensor(v, d.root, sub);
		if (!rc && i == cap) {
			cap = cap ? 2 * cap : 1024;
			tent *ne = qtk_realloc(tl->e, cap * sizeof *ne);
			if (ne)
				tl->e = ne;
			else
				rc = oom(v->err);
		}
		if (!rc) {
			tent_of(d.root, &tl->e[i]);
			/* the name's offset for now: names grows */
			tl->e[i].name = (const char *)(uintptr_t)names.len;
			rc = qtk_buf_put(&names, cJSON_GetObjectItemCaseSensitive(d.root, "name")->valuestring,
					 strlen(cJSON_GetObjectItemCaseSensitive(d.root, "name")->valuestring) + 1);
			rc = rc ? rc : (i ? qtk_buf_putc(&b, ',') : 0);
			rc = rc ? rc : canon_put(&b, d.root, 3, NULL);
			rc = rc == QTK_E_IO || (rc && b.failed) ? oom(v->err) : rc;
			if (!rc)
				cmp_flush(&b, text, sp->off + sp->len, &q, same);
			i++;
		}
		qtk_json_doc_free(&d);
		if (rc)
			break;
		rc = next_item(v, text, end, e, &p);
	}
	rc = rc ? rc : qtk_buf_putc(&b, ']');
	if (!rc && b.failed)
		rc = oom(v->err);
	if (!rc && same) {
		cmp_flush(&b, text, sp->off + sp->len, &q, same);
		*same = *same && q == sp->off + sp->len;
		qtk_buf_free(&b);
	}
	tl->n = i;
	tl->names = (char *)names.p;
	for (size_t k = 0; k < i && tl->names; k++)
		tl->e[k].name = tl->names + (uintptr_t)tl->e[k].name;
	if (!rc && i && !tl->names)
		rc = oom(v->err);
	rc = rc ? rc : tents_sort(v, tl->e, i, sp->path);
	if (rc) {
		qtk_buf_free(&b);
		return rc;
	}
	*canon = same ? NULL : (char *)b.p;
	return 0;
}

typedef struct mem_ent {
	const char *key; /* decoded (an offset into the pieces while they grow) */
	size_t val, vlen; /* the canonical value in the pieces */
} mem_ent;

typedef struct map_walk {
	qtk_buf pc; /* each key (NUL-terminated) and canonical value, one after another */
	mem_ent *e;
	size_t n, cap;
	qtk_err *err;
} map_walk;

static int map_member(void *ctx, const char *key, const cJSON *val, int64_t off)
{
	(void)off;
	map_walk *w = ctx;
	if (w->n == w->cap) {
		const size_t nc = w->cap ? 2 * w->cap : 1024;
		mem_ent *ne = qtk_realloc(w->e, nc * sizeof *ne);
		if (!ne)
			return oom(w->err);
		w->e = ne;
		w->cap = nc;
	}
	mem_ent *m = &w->e[w->n++];
	m->key = (const char *)(uintptr_t)w->pc.len;
	int rc = qtk_buf_put(&w->pc, key, strlen(key) + 1);
	m->val = w->pc.len;
	rc = rc ? rc : canon_put(&w->pc, val, 4, NULL);
	m->vlen = w->pc.len - m->val;
	return rc == QTK_E_IO || (rc && w->pc.failed) ? oom(w->err) : rc;
}

static int mem_cmp(const void *a, const void *b)
{
	return strcmp(((const mem_ent *)a)->key, ((const mem_ent *)b)->key);
}

/* Read the object sp of text a member at a time (transform.params.tensors: a member a tensor;
 * qtk_json_each_member's rules, repeated keys refused), written canonically (keys sorted
 * bytewise) to *canon, or, with `same`, compared with the object's own text. */
static int lift_map(vctx *v, const char *text, const lspan *sp, char **canon, bool *same)
{
	map_walk w = {.err = v->err};
	int rc = qtk_json_each_member(text + sp->off, sp->len, QTK_JSON_INTS, v->file, (int64_t)sp->off, v->err,
				      map_member, &w);
	for (size_t i = 0; !rc && i < w.n; i++)
		w.e[i].key = (const char *)w.pc.p + (uintptr_t)w.e[i].key;
	if (!rc && w.n > 1)
		qsort(w.e, w.n, sizeof *w.e, mem_cmp);
	qtk_buf b = {0};
	rc = rc ? rc : qtk_buf_reserve(&b, w.pc.len + 3 * w.n + 2) ? oom(v->err) : 0;
	rc = rc ? rc : qtk_buf_putc(&b, '{');
	for (size_t i = 0; i < w.n && !rc; i++) {
		rc = i ? qtk_buf_putc(&b, ',') : 0;
		rc = rc ? rc : qtk_json_put_str(&b, w.e[i].key, strlen(w.e[i].key));
		rc = rc ? rc : qtk_buf_putc(&b, ':');
		rc = rc ? rc : qtk_buf_put(&b, w.pc.p + w.e[i].val, w.e[i].vlen);
	}
	rc = rc ? rc : qtk_buf_putc(&b, '}');
	if (rc && !v->err->code)
		rc = oom(v->err);
	qtk_free(w.e);
	qtk_buf_free(&w.pc);
	if (rc) {
		qtk_buf_free(&b);
		return rc;
	}
	if (same) {
		size_t q = sp->off;
		cmp_flush(&b, text, sp->off + sp->len, &q, same);
		*same = *same && q == sp->off + sp->len;
		qtk_buf_free(&b);
	}
	*canon = same ? NULL : (char *)b.p;
	return 0;
}

/* The record's tree with its lists as text (lists_as_text) or as trees. With in_place (and
 * lists_as_text): each list only compared with its canonical form and left "[]" ("{}") in the
 * tree, and *in_place says whether the whole text is canonical (the tree's canonical text,
 * lists empty, equals the text with its lists emptied, and every list equals its own). */
static int prov_parse(const char *text, size_t len, const char *file, bool lists_as_text, bool *in_place, cJSON **out,
		      qtk_err *err)
{
	*out = NULL;
	if (len > QTK_PROV_CAP)
		return qtk_err_set(err, QTK_E_DATA, file, -1, NULL, "provenance record larger than %u bytes",
				   QTK_PROV_CAP);
	qtk_json_init();
	lfind f = {.s = text, .n = len};
	if (lists_as_text && !l_record(&f, qtk_json_skip_ws(text, len, 0), "", 0))
		f.nsp = 0; /* not a well-formed object: the strict parse says what is wrong */
	/* the text with each list emptied: "[]" in its place */
	size_t cut = 0;
	for (size_t i = 0; i < f.nsp; i++)
		cut += f.sp[i].len - 2;
	char *skel = NULL;
	const char *pt = text;
	size_t plen = len;
	if (f.nsp) {
		if (!(skel = qtk_malloc(len - cut + 1)))
			return oom(err);
		size_t at = 0, o = 0;
		for (size_t i = 0; i < f.nsp; i++) {
			memcpy(skel + o, text + at, f.sp[i].off - at);
			o += f.sp[i].off - at;
			memcpy(skel + o, f.sp[i].map ? "{}" : "[]", 2);
			o += 2;
			at = f.sp[i].off + f.sp[i].len;
		}
		memcpy(skel + o, text + at, len - at);
		pt = skel;
		plen = len - cut;
	}
	qtk_json_doc doc;
	memset(&doc, 0, sizeof doc);
	int rc = qtk_json_parse(pt, plen, QTK_JSON_INTS | QTK_JSON_ARENA, file, 0, err, &doc);
	if (!in_place) {
		qtk_free(skel);
		skel = NULL;
	}
	if (rc && err->offset >= 0) { /* an offset in the emptied text: in the record's */
		int64_t o = err->offset, add = 0;
		for (size_t i = 0; i < f.nsp && (int64_t)(f.sp[i].off - (size_t)add) < o; i++)
			add += (int64_t)(f.sp[i].len - 2);
		err->offset = o + add;
	}
	if (rc) {
		qtk_free(skel);
		return rc;
	}
	tlist ls[LIST_MAX];
	memset(ls, 0, sizeof ls);
	vctx v = {file, err, 0, ls, 0};
	bool same = true;
	for (size_t i = 0; i < f.nsp && !rc; i++) {
		cJSON *parent, *at = l_item(doc.root, f.sp[i].path, &parent);
		char *canon = NULL;
		if (!at || !parent || !(f.sp[i].map ? cJSON_IsObject(at) : cJSON_IsArray(at)) || at->child) {
			rc = qtk_err_set(err, QTK_E_INTERNAL, file, -1, f.sp[i].path, "the list is not where it was found");
			break;
		}
		bool *sm = in_place ? &same : NULL;
		rc = f.sp[i].map ? lift_map(&v, text, &f.sp[i], &canon, sm)
				 : lift_list(&v, text, &f.sp[i], &ls[v.nlists], &canon, sm);
		cJSON *raw = rc ? NULL : cJSON_CreateRaw(in_place ? (f.sp[i].map ? "{}" : "[]") : "");
		if (!rc && !raw)
			rc = oom(err);
		if (rc) {
			qtk_free(ls[v.nlists].e);
			qtk_free(ls[v.nlists].names);
			qtk_free(canon);
			break;
		}
		if (!in_place) {
			cJSON_free(raw->valuestring);
			raw->valuestring = canon;
		}
		if (!cJSON_ReplaceItemInObjectCaseSensitive(parent, "tensors", raw)) {
			cJSON_Delete(raw);
			rc = oom(err);
			break;
		}
		if (!f.sp[i].map)
			ls[v.nlists++].at = raw;
	}
	rc = rc ? rc : check_record_rec(&v, doc.root, "");
	for (size_t i = 0; i < v.nlists; i++) {
		qtk_free(ls[i].e);
		qtk_free(ls[i].names);
	}
	if (!rc && in_place) {
		char *c = same ? qtk_prov_canonical(doc.root) : NULL;
		if (same && !c)
			rc = oom(err);
		*in_place = c && strlen(c) == plen && !memcmp(c, pt, plen);
		qtk_free(c);
	}
	qtk_free(skel);
	if (rc) {
		qtk_json_doc_free(&doc);
		return rc;
	}
	*out = doc.root;
	doc.root = NULL;
	qtk_json_doc_free(&doc);
	return 0;
}

int qtk_prov_parse(const char *text, size_t len, const char *file, cJSON **out, qtk_err *err)
{
	return prov_parse(text, len, file, true, NULL, out, err);
}

int qtk_prov_check_canonical(const char *text, size_t len, const char *file, bool *canonical, qtk_err *err)
{
	cJSON *t = NULL;
	*canonical = false;
	int rc = prov_parse(text, len, file, true, canonical, &t, err);
	qtk_json_tree_free(t);
	if (rc)
		*canonical = false;
	return rc;
}

int qtk_prov_parse_tree(const char *text, size_t len, const char *file, cJSON **out, qtk_err *err)
{
	return prov_parse(text, len, file, false, NULL, out, err);
}

int qtk_prov_list_each(const cJSON *list, int (*fn)(void *ctx, const cJSON *entry), void *ctx)
{
	if (cJSON_IsArray(list)) {
		for (const cJSON *c = list->child; c; c = c->next) {
			int rc = fn(ctx, c);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (!cJSON_IsRaw(list) || !list->valuestring || list->valuestring[0] != '[')
		return 0;
	const char *p = list->valuestring + 1, *stop = p + strlen(p);
	while (p < stop && *p != ']') {
		const char *end = NULL;
		cJSON *e = cJSON_ParseWithLengthOpts(p, (size_t)(stop - p), &end, 0);
		if (!e)
			return QTK_E_IO; /* the text was checked: out of memory */
		int rc = fn(ctx, e);
		cJSON_Delete(e);
		if (rc)
			return rc;
		p = end + (end < stop && *end == ',');
	}
	return 0;
}

/* ---- file hashes ---------------------------------------------------------------------- */

void qtk_filelist_free(qtk_filelist *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		qtk_free(l->f[i].path);
	qtk_free(l->f);
	memset(l, 0, sizeof *l);
}

static int file_cmp(const void *a, const void *b)
{
	return strcmp(((const qtk_fileinfo *)a)->path, ((const qtk_fileinfo *)b)->path);
}

/* The source's files (and an HF directory's side files), sorted by name, hashed or not; pre,
 * when not NULL, holds the files' hashes already taken (m->nfiles of them). */
static int list_files(qtk_model *m, qtk_filelist *out, bool hash, const uint8_t (*pre)[32], const int *cancel,
		      qtk_err *err)
{
	memset(out, 0, sizeof *out);
	bool hf = !strcmp(qtk_model_format(m), "hf");
	size_t n = m->nfiles + (hf ? m->nblobs : 0);
	out->f = qtk_calloc(n ? n : 1, sizeof *out->f);
	if (!out->f)
		return oom(err);
	int rc = 0;
	for (uint32_t i = 0; i < m->nfiles && !rc; i++) {
		qtk_fileinfo *f = &out->f[out->n];
		if (!(f->path = qtk_strdup(qtk_path_base(m->files[i])))) {
			rc = oom(err);
			break;
		}
		out->n++;
		f->size = m->file_sizes[i];
		if (hash && pre)
			memcpy(f->sha256, pre[i], 32);
		else
			rc = hash ? qtk_sha256_file(m->fds[i], m->files[i], f->size, cancel, NULL, f->sha256, err) : 0;
	}
	for (size_t i = 0; hf && i < m->nblobs && !rc; i++) {
		const qtk_blob *b = &m->blobs[i];
		qtk_fileinfo *f = &out->f[out->n];
		if (!(f->path = qtk_strdup(b->name))) {
			rc = oom(err);
			break;
		}
		out->n++;
		f->size = b->len;
		unsigned len = 0;
		if (hash && EVP_Digest(b->data, b->len, f->sha256, &len, EVP_sha256(), NULL) != 1)
			rc = qtk_err_set(err, QTK_E_INTERNAL, b->name, -1, NULL, "SHA-256 failed");
	}
	if (rc)
		qtk_filelist_free(out);
	else if (out->n)
		qsort(out->f, out->n, sizeof *out->f, file_cmp);
	return rc;
}

int qtk_hash_model_files(qtk_model *m, qtk_filelist *out, qtk_err *err)
{
	return list_files(m, out, true, NULL, NULL, err);
}

/* ---- building --------------------------------------------------------------------------- */

typedef struct {
	qtk_model *m;
	qtk_filelist *out;
	const int *cancel;
	qtk_err err;
	int rc;
} files_job;

static void *files_main(void *arg)
{
	files_job *j = arg;
	j->rc = list_files(j->m, j->out, true, NULL, j->cancel, &j->err);
	return NULL;
}

static cJSON *hexstr(const uint8_t *d)
{
	char h[65];
	if (!d) {
		memset(h, PH_CHAR, HEXLEN);
		h[HEXLEN] = 0;
	} else {
		qtk_hex(d, 32, h);
	}
	return cJSON_CreateString(h);
}

static cJSON *file_json(const char *path, uint64_t size, const uint8_t *sha)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", path);
	cJSON_AddNumberToObject(o, "size", (double)size);
	cJSON_AddItemToObject(o, "sha256", hexstr(sha));
	return o;
}

static cJSON *files_json(const qtk_fileinfo *f, size_t n, bool placeholder)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, file_json(f[i].path, f[i].size, placeholder ? NULL : f[i].sha256));
	return a;
}

/* Files a writer committed, by base name. */
static cJSON *outfiles_json(const qtk_outlist *l)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < l->n; i++)
		cJSON_AddItemToArray(a, file_json(qtk_path_base(l->f[i].path), l->f[i].size, l->f[i].sha256));
	return a;
}

static cJSON *root_json(int scheme, size_t n, const uint8_t *enc, const uint8_t *dec)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "scheme", qtk_digest_scheme_name(scheme));
	cJSON_AddNumberToObject(o, "count", (double)n);
	cJSON_AddItemToObject(o, "encoded", hexstr(enc));
	cJSON_AddItemToObject(o, "decoded", hexstr(dec));
	return o;
}

/* a tree the caller keeps (the embedded record qverify parsed), written where the hook is */
static int put_tree(qtk_buf *b, const void *ctx) { return canon_put(b, ctx, 1, NULL); }

/* ---- the per-tensor lists, written as canonical text (keys in bytewise order) ---- */

#define SAFE_INT ((uint64_t)1 << 53) /* a record's integers are at most 2^53 */

static int put_u64(qtk_buf *b, uint64_t v)
{
	return v > SAFE_INT ? QTK_E_DATA : qtk_buf_printf(b, "%llu", (unsigned long long)v);
}

static int put_hex(qtk_buf *b, const uint8_t *d)
{
	char h[HEXLEN + 3];
	h[0] = '"';
	if (d)
		qtk_hex(d, 32, h + 1);
	else
		memset(h + 1, PH_CHAR, HEXLEN);
	h[HEXLEN + 1] = '"';
	h[HEXLEN + 2] = 0;
	return qtk_buf_put(b, h, HEXLEN + 2);
}

static int put_str(qtk_buf *b, const char *s) { return qtk_json_put_str(b, s, strlen(s)); }

/* One output tensor: l describes it, dg (NULL: placeholders) holds its digests. Keys: bytes
 * decoded decoded_kind encoded encoding name permute_qk shape stored. */
static int put_leaf(qtk_buf *b, const qtk_leaf *l, const qtk_leaf *dg)
{
	int rc = qtk_buf_puts(b, "{\"bytes\":");
	rc = rc ? rc : put_u64(b, l->n_bytes);
	rc = rc ? rc : qtk_buf_puts(b, ",\"decoded\":");
	rc = rc ? rc : put_hex(b, dg ? dg->dec : NULL);
	rc = rc ? rc : qtk_buf_puts(b, l->dec_kind == QTK_DEC_RAW ? ",\"decoded_kind\":\"raw\"" : ",\"decoded_kind\":\"f32\"");
	rc = rc ? rc : qtk_buf_puts(b, ",\"encoded\":");
	rc = rc ? rc : put_hex(b, dg ? dg->enc : NULL);
	rc = rc ? rc : qtk_buf_puts(b, ",\"encoding\":");
	rc = rc ? rc : put_str(b, l->enc_id);
	rc = rc ? rc : qtk_buf_puts(b, ",\"name\":");
	rc = rc ? rc : put_str(b, l->name);
	if (l->qk_heads > 0) {
		rc = rc ? rc : qtk_buf_puts(b, ",\"permute_qk\":");
		rc = rc ? rc : put_u64(b, (uint64_t)l->qk_heads);
	}
	rc = rc ? rc : qtk_buf_puts(b, ",\"shape\":[");
	for (int i = 0; i < l->ndim && !rc; i++) {
		rc = i ? qtk_buf_putc(b, ',') : 0;
		rc = rc ? rc : put_u64(b, l->shape[i]);
	}
	rc = rc ? rc : qtk_buf_putc(b, ']');
	if (strcmp(l->name, l->stored)) {
		rc = rc ? rc : qtk_buf_puts(b, ",\"stored\":");
		rc = rc ? rc : put_str(b, l->stored);
	}
	return rc ? rc : qtk_buf_putc(b, '}');
}

/* The output's tensors as a record lists them, sorted by canonical name, without a leaf
 * table: what a leaf holds beyond its tensor's description (~40 bytes a tensor against
 * ~250 and two names). */
typedef struct oleaf {
	const char *name;   /* canonical: in the pool, or the tensor's own name */
	size_t t;           /* the tensor in the description */
	size_t noff;        /* while the pool grows: 1 + the name's offset in it, 0: the tensor's name */
	const char *enc_id; /* shared (qtk_digest_leaf_meta) */
	int qk_heads;
	qtk_dec_kind dec_kind;
} oleaf;

typedef struct olist {
	const qtk_model *m;
	oleaf *e;
	size_t n;
	char *pool; /* the canonical names that differ from the stored ones */
} olist;

static void olist_free(olist *ol)
{
	qtk_free(ol->e);
	qtk_free(ol->pool);
	memset(ol, 0, sizeof *ol);
}

static int oleaf_cmp(const void *a, const void *b)
{
	return strcmp(((const oleaf *)a)->name, ((const oleaf *)b)->name);
}

/* The description's tensors as leaves without data, sorted by canonical name (two tensors with
 * one canonical name fail). */
static int out_list(const qtk_model *d, olist *ol, qtk_err *err)
{
	memset(ol, 0, sizeof *ol);
	ol->m = d;
	if (!(ol->e = qtk_calloc(d->ntensors ? d->ntensors : 1, sizeof *ol->e)))
		return oom(err);
	ol->n = d->ntensors;
	qtk_buf pool = {0};
	int rc = 0;
	for (size_t i = 0; i < d->ntensors && !rc; i++) {
		qtk_leaf l;
		if ((rc = qtk_digest_leaf_meta(d, &d->tensors[i], &l, err)))
			break;
		oleaf *o = &ol->e[i];
		*o = (oleaf){.t = i, .enc_id = l.enc_id, .qk_heads = l.qk_heads, .dec_kind = l.dec_kind};
		if (strcmp(l.name, d->tensors[i].name)) {
			o->noff = pool.len + 1;
			if (qtk_buf_put(&pool, l.name, strlen(l.name) + 1))
				rc = oom(err);
		}
		qtk_free(l.name);
		qtk_free(l.stored);
	}
	ol->pool = (char *)pool.p;
	for (size_t i = 0; i < ol->n && !rc; i++)
		ol->e[i].name = ol->e[i].noff ? ol->pool + ol->e[i].noff - 1 : d->tensors[i].name;
	if (!rc && ol->n > 1)
		qsort(ol->e, ol->n, sizeof *ol->e, oleaf_cmp);
	for (size_t i = 1; i < ol->n && !rc; i++)
		if (!strcmp(ol->e[i].name, ol->e[i - 1].name))
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, ol->e[i].name,
					 "two tensors have this canonical name ('%s' and '%s')",
					 d->tensors[ol->e[i - 1].t].name, d->tensors[ol->e[i].t].name);
	if (rc)
		olist_free(ol);
	return rc;
}

typedef struct leaves_ctx {
	const qtk_digests *meta; /* the tensors sorted by canonical name, or NULL: ol */
	const olist *ol;
	const qtk_digests *real; /* their digests by name, or NULL: placeholders */
	const qtk_digests *src;  /* transform: the source's leaves by name */
} leaves_ctx;

static size_t leaves_n(const leaves_ctx *c) { return c->meta ? c->meta->n : c->ol->n; }

/* Leaf i of the list: the table's, or *v filled (its names borrowed, never freed). */
static const qtk_leaf *leaf_at(const leaves_ctx *c, size_t i, qtk_leaf *v)
{
	if (c->meta)
		return &c->meta->leaf[i];
	const oleaf *o = &c->ol->e[i];
	const qtk_tensor *t = &c->ol->m->tensors[o->t];
	memset(v, 0, sizeof *v);
	v->name = (char *)(uintptr_t)o->name;
	v->stored = t->name;
	v->enc_id = o->enc_id;
	v->ndim = t->ndim;
	memcpy(v->shape, t->shape, sizeof v->shape);
	v->n_bytes = t->n_bytes;
	v->dec_kind = o->dec_kind;
	v->qk_heads = o->qk_heads;
	return v;
}

/* output.tensors: an array sorted by canonical name */
static int put_out_tensors(qtk_buf *b, const void *ctx)
{
	const leaves_ctx *c = ctx;
	int rc = qtk_buf_putc(b, '[');
	for (size_t i = 0; i < leaves_n(c) && !rc; i++) {
		qtk_leaf v;
		const qtk_leaf *l = leaf_at(c, i, &v);
		rc = i ? qtk_buf_putc(b, ',') : 0;
		rc = rc ? rc : put_leaf(b, l, c->real ? qtk_digests_find(c->real, l->name) : NULL);
	}
	return rc ? rc : qtk_buf_putc(b, ']');
}

/* transform.params.tensors: an object by canonical name (meta is sorted by it), each
 * {"from": source encoding (when the source has the tensor), "to": output encoding} */
static int put_trans_tensors(qtk_buf *b, const void *ctx)
{
	const leaves_ctx *c = ctx;
	int rc = qtk_buf_putc(b, '{');
	for (size_t i = 0; i < leaves_n(c) && !rc; i++) {
		qtk_leaf v;
		const qtk_leaf *ol = leaf_at(c, i, &v), *sl = qtk_digests_find(c->src, ol->name);
		rc = i ? qtk_buf_putc(b, ',') : 0;
		rc = rc ? rc : put_str(b, ol->name);
		if (sl) {
			rc = rc ? rc : qtk_buf_puts(b, ":{\"from\":");
			rc = rc ? rc : put_str(b, sl->enc_id);
			rc = rc ? rc : qtk_buf_puts(b, ",\"to\":");
		} else {
			rc = rc ? rc : qtk_buf_puts(b, ":{\"to\":");
		}
		rc = rc ? rc : put_str(b, ol->enc_id);
		rc = rc ? rc : qtk_buf_putc(b, '}');
	}
	return rc ? rc : qtk_buf_putc(b, '}');
}

static const char *kv_str(const qtk_model *m, const char *key)
{
	const qtk_kv *kv = qtk_kv_find(m, key);
	return kv && kv->val.type == QTK_V_STR && kv->val.v.str.len == strlen(kv->val.v.str.s) &&
			       qtk_utf8_valid(kv->val.v.str.s, (size_t)kv->val.v.str.len)
		       ? kv->val.v.str.s
		       : NULL;
}

static void add_str_from(cJSON *o, const char *field_name, const qtk_model *m, const char *const *keys)
{
	for (size_t i = 0; keys[i]; i++) {
		const char *s = kv_str(m, keys[i]);
		if (s && *s) {
			cJSON_AddStringToObject(o, field_name, s);
			return;
		}
	}
}

/* The source's own record, checked once for every build: kept as its canonical text, which
 * is the stored text itself when that is canonical (a record qtk wrote: checked while it is
 * read, a list entry at a time, with no copy of it), so the chain costs no tree of the
 * parent's tensors. QTK_E_IO when out of memory; an invalid record is left out (with a
 * note). */
static int load_parent(qtk_prov_builder *b, qtk_err *err)
{
	if (b->parent_state)
		return 0;
	size_t len;
	const char *txt = qtk_prov_find(b->src, &len, NULL);
	cJSON *parent = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	b->parent_state = -1;
	if (!txt)
		return 0;
	bool in_place = false;
	int rc = qtk_prov_check_canonical(txt, len, NULL, &in_place, &e);
	if (!rc && !in_place) /* valid but not canonical: read again, its lists kept as text */
		rc = qtk_prov_parse(txt, len, NULL, &parent, &e);
	if (rc) {
		if (e.code == QTK_E_IO)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "%s", e.msg);
		snprintf(b->note, sizeof b->note, "the source's provenance record is invalid and was not chained: %.60s%s%.120s",
			 e.subject, e.subject[0] ? ": " : "", e.msg);
		return 0;
	}
	size_t n = len;
	if (in_place) {
		b->parent_txt = txt;
	} else {
		char *c = qtk_prov_canonical(parent);
		qtk_json_tree_free(parent);
		if (!c)
			return oom(err);
		n = strlen(c);
		b->parent_txt = b->parent_own = c;
	}
	b->parent_len = n;
	unsigned hl = 0;
	if (EVP_Digest(b->parent_txt, n, b->parent_sha, &hl, EVP_sha256(), NULL) != 1 || hl != 32)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "SHA-256 failed");
	b->parent_state = 1;
	return 0;
}

static int put_parent(qtk_buf *buf, const void *ctx)
{
	const qtk_prov_builder *b = ctx;
	return qtk_buf_put(buf, b->parent_txt, b->parent_len);
}

static cJSON *source_json(qtk_prov_builder *b, const qtk_filelist *files, const qtk_digests *sd, bool pending,
			  canon_hooks *hs)
{
	static const char *const k_name[] = {"general.name", NULL};
	static const char *const k_url[] = {"general.source.url", "general.source.repo_url", "general.url", NULL};
	static const char *const k_rev[] = {"general.source.revision", "general.version", NULL};
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "container", qtk_model_format(b->src));
	cJSON_AddItemToObject(o, "files", files_json(files->f, files->n, pending));
	cJSON_AddItemToObject(o, "tensor_root", root_json(sd->scheme, sd->n, pending ? NULL : sd->enc_root, pending ? NULL : sd->dec_root));
	add_str_from(o, "name", b->src, k_name);
	add_str_from(o, "revision", b->src, k_rev);
	const char *repo = kv_str(b->src, "general.source.huggingface.repository");
	if (repo && *repo && !cJSON_GetObjectItemCaseSensitive(o, "url")) {
		char url[1024];
		snprintf(url, sizeof url, "https://huggingface.co/%s", repo);
		cJSON_AddStringToObject(o, "url", url);
	} else {
		add_str_from(o, "url", b->src, k_url);
	}
	/* the chain: the source's own record, when it has a valid one (load_parent) */
	if (b->parent_state > 0) {
		cJSON_AddItemToObject(o, "record_sha256", hexstr(b->parent_sha));
		cJSON_AddItemToObject(o, "record", hook_at(hs, put_parent, b));
	} else {
		cJSON_AddNullToObject(o, "record");
	}
	return o;
}

static bool is_quant_layout(const char *id)
{
	/* ggml block types, and every packed layout (AWQ, GPTQ, compressed-tensors, FP8, NVFP4,
	 * MXFP4, MLX, bitsandbytes): whatever is not a plain float or integer type */
	return !strncmp(id, "ggml:", 5) || qtk_type_by_name(id) < 0;
}

/* The quantizer family of an encoding id: what "method" says when the caller gives none. */
static const char *family_of(const char *id)
{
	size_t n = strlen(id);
	if (!strncmp(id, "awq", 3))
		return "awq-rtn";
	if (!strncmp(id, "gptq", 4))
		return "gptq-rtn";
	if (!strncmp(id, "ct-", 3) || !strncmp(id, "fp8", 3))
		return "compressed-tensors-minmax";
	if (!strncmp(id, "mlx", 3))
		return "mlx-affine";
	if (!strncmp(id, "nvfp4", 5) || !strncmp(id, "mxfp4", 5) || !strcmp(id, "ggml:nvfp4") || !strcmp(id, "ggml:mxfp4"))
		return "fp4";
	if (!strncmp(id, "bnb", 3))
		return "bitsandbytes";
	if (!strncmp(id, "ggml:iq", 7))
		return "ggml-iquant";
	if (!strncmp(id, "ggml:", 5) && n > 2 && id[n - 2] == '_' && id[n - 1] == 'k')
		return "ggml-kquant";
	return "ggml-legacy";
}

/* transform: kind, method, per-tensor layouts, name map, layout operations */
static cJSON *transform_json(qtk_prov_builder *b, const qtk_digests *sd, const olist *od, canon_hooks *hs,
			     leaves_ctx *tc)
{
	*tc = (leaves_ctx){NULL, od, NULL, sd};
	cJSON *o = cJSON_CreateObject(), *params = cJSON_CreateObject(), *tens = hook_at(hs, put_trans_tensors, tc);
	size_t f2q = 0, q2q = 0, q2f = 0, renamed = 0;
	const char *family = "rtn";
	cJSON *perm = cJSON_CreateArray();
	int heads_q = 0, heads_kv = 0, dir = 0;
	for (size_t i = 0; i < od->n; i++) {
		qtk_leaf v;
		const qtk_leaf *ol = leaf_at(tc, i, &v), *sl = qtk_digests_find(sd, ol->name);
		if (!sl)
			continue;
		bool qs = is_quant_layout(sl->enc_id), qo = is_quant_layout(ol->enc_id);
		if (!qs && qo && !f2q++)
			family = family_of(ol->enc_id);
		else if (qs && qo && strcmp(sl->enc_id, ol->enc_id))
			q2q++;
		else if (qs && !qo)
			q2f++;
		renamed += strcmp(sl->stored, ol->stored) != 0;
		if ((sl->qk_heads > 0) != (ol->qk_heads > 0)) {
			int h = sl->qk_heads > 0 ? sl->qk_heads : ol->qk_heads;
			dir = sl->qk_heads > 0 ? -1 : 1;
			if (strstr(ol->name, "q_proj"))
				heads_q = h;
			else
				heads_kv = h;
			cJSON_AddItemToArray(perm, cJSON_CreateString(ol->name));
		}
	}
	const char *kind = b->kind ? b->kind : f2q ? "quantize" : q2q ? "repack" : q2f ? "dequantize" : "convert";
	const char *method = b->method ? b->method
			     : !strcmp(kind, "quantize") ? family
			     : !strcmp(kind, "repack") ? "repack"
			     : !strcmp(kind, "dequantize") ? "decode" : "copy";
	cJSON_AddStringToObject(o, "kind", kind);
	cJSON_AddStringToObject(o, "method", method);
	cJSON_AddStringToObject(params, "target", b->target ? b->target : "keep");
	for (size_t i = 0; i < b->nparams; i++) {
		const char *eq = strchr(b->params[i], '=');
		if (!eq)
			continue;
		char key[128];
		snprintf(key, sizeof key, "%.*s", (int)(eq - b->params[i]), b->params[i]);
		if (!cJSON_GetObjectItemCaseSensitive(params, key))
			cJSON_AddStringToObject(params, key, eq + 1);
	}
	cJSON_AddItemToObject(params, "tensors", tens);
	cJSON_AddItemToObject(o, "params", params);
	if (renamed) {
		cJSON *nm = cJSON_CreateObject();
		cJSON_AddStringToObject(nm, "scheme", "qtk-llama-names-v1");
		cJSON_AddNumberToObject(nm, "renamed", (double)renamed);
		cJSON_AddItemToObject(o, "name_map", nm);
	} else {
		cJSON_AddStringToObject(o, "name_map", "identity");
	}
	cJSON *ops = cJSON_CreateArray();
	bool sg = !strcmp(qtk_model_format(b->src), "gguf"), og = b->out_kind == QTK_OUT_GGUF;
	if (sg != og) {
		cJSON *op = cJSON_CreateObject();
		cJSON_AddStringToObject(op, "op", "reverse_dims");
		cJSON_AddItemToArray(ops, op);
	}
	if (cJSON_GetArraySize(perm)) {
		cJSON *op = cJSON_CreateObject();
		cJSON_AddStringToObject(op, "op", "permute_qk");
		cJSON_AddStringToObject(op, "direction", dir > 0 ? "hf_to_gguf" : "gguf_to_hf");
		if (heads_q)
			cJSON_AddNumberToObject(op, "n_head", heads_q);
		if (heads_kv)
			cJSON_AddNumberToObject(op, "n_head_kv", heads_kv);
		cJSON_AddItemToObject(op, "tensors", perm);
		cJSON_AddItemToArray(ops, op);
	} else {
		cJSON_Delete(perm);
	}
	cJSON_AddItemToObject(o, "layout_ops", ops);
	return o;
}

static cJSON *tool_json(void)
{
	cJSON *o = cJSON_CreateObject(), *bd = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", "qtk");
	cJSON_AddStringToObject(o, "version", QTK_VERSION);
#if defined(__clang__)
	cJSON_AddStringToObject(bd, "compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
	cJSON_AddStringToObject(bd, "compiler", "gcc " __VERSION__);
#else
	cJSON_AddStringToObject(bd, "compiler", "unknown");
#endif
#ifdef QTK_BUILD_FLAGS /* the build may pass its CFLAGS: -DQTK_BUILD_FLAGS='"..."' */
	cJSON_AddStringToObject(bd, "flags", QTK_BUILD_FLAGS);
	cJSON_AddStringToObject(bd, "fp_contract", strstr(QTK_BUILD_FLAGS, "-ffp-contract=off") ? "off" : "unknown");
#else
	cJSON_AddStringToObject(bd, "fp_contract", "off"); /* the Makefile always passes -ffp-contract=off */
#endif
#if defined(__x86_64__)
	cJSON_AddStringToObject(bd, "arch", "x86_64");
#elif defined(__aarch64__)
	cJSON_AddStringToObject(bd, "arch", "aarch64");
#else
	cJSON_AddStringToObject(bd, "arch", "other");
#endif
#if defined(__OPTIMIZE__)
	cJSON_AddBoolToObject(bd, "optimized", 1);
#else
	cJSON_AddBoolToObject(bd, "optimized", 0);
#endif
	cJSON_AddItemToObject(o, "build", bd);
	return o;
}

/* output: container, files (when given: a file cannot hold its own hash), roots, tensors */
/* meta or ol: the tensors sorted by canonical name */
static cJSON *output_json(const char *container, const qtk_digests *meta, const olist *ol, const qtk_digests *real,
			  cJSON *files, canon_hooks *hs, leaves_ctx *oc)
{
	*oc = (leaves_ctx){meta, ol, real, NULL};
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "container", container);
	if (files)
		cJSON_AddItemToObject(o, "files", files);
	cJSON_AddItemToObject(o, "tensor_root", root_json(real ? real->scheme : meta ? meta->scheme : 0, leaves_n(oc),
							  real ? real->enc_root : NULL,
							  real ? real->dec_root : NULL));
	cJSON_AddItemToObject(o, "tensors", hook_at(hs, put_out_tensors, oc));
	return o;
}

/* Where a record streamed as it is made goes (qtk_prov_build_stream). */
typedef struct rec_stream {
	int (*put)(void *ctx, const uint8_t *p, size_t n); /* 0, or an error code (its message set) */
	void *ctx;
	int rc; /* put's failure */
} rec_stream;

static int stream_put(void *c, const uint8_t *p, size_t n)
{
	rec_stream *st = c;
	return st->rc = st->put(st->ctx, p, n);
}

#define STREAM_BUF ((size_t)1 << 20)

static int finish_err(int rc, qtk_err *err)
{
	if (rc == QTK_E_DATA)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, QTK_PROV_KEY,
				   "a name or metadata value is not valid UTF-8 or holds a NUL");
	return oom(err);
}

/* The canonical text of root (freed), hooks writing their parts, into *out; reserve: its
 * length, when known (the final record has the reserved one's), else 0. st: handed to st->put
 * a megabyte at a time instead, *out left NULL; the text must then be exactly reserve bytes
 * (SIZE_MAX: any length). */
static int finish_json(cJSON *root, const canon_hooks *hs, size_t reserve, rec_stream *st, char **out, qtk_err *err)
{
	qtk_buf b = {0};
	*out = NULL;
	if (st) {
		b.flush = stream_put;
		b.flush_ctx = st;
		st->rc = 0;
		qtk_buf_reserve(&b, STREAM_BUF);
	} else if (reserve) {
		qtk_buf_reserve(&b, reserve);
	}
	const int rc = root ? canon_put(&b, root, 0, hs) : QTK_E_IO;
	cJSON_Delete(root);
	if (st) {
		const bool failed = rc || b.failed || qtk_buf_flush(&b);
		const uint64_t total = b.flushed;
		qtk_buf_free(&b);
		if (st->rc) /* the stream's own error, its message set */
			return st->rc;
		if (failed)
			return finish_err(rc, err);
		return total == reserve || reserve == SIZE_MAX
			       ? 0
			       : qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, QTK_PROV_KEY,
					     "final record length differs from the reserved one");
	}
	if (rc || b.failed || !b.p) {
		qtk_buf_free(&b);
		return finish_err(rc, err);
	}
	if (b.cap > b.len + 1) { /* the doubling's spare room back: the record stays for the run */
		uint8_t *t = qtk_realloc(b.p, b.len + 1);
		if (t)
			b.p = t;
	}
	*out = (char *)b.p;
	return 0;
}

/* The source's content digests (all threads) and, beside them, its files' SHA-256. */
static int hash_source(qtk_prov_builder *b, qtk_err *err)
{
	qtk_digest_opts o = {.threads = b->threads, .cancel = &b->src_cancel, .select = b->src_select};
	qtk_model *hm = b->src_hash ? b->src_hash : b->src;
	files_job fj = {hm, &b->files_cache, &b->src_cancel, {0}, 0};
	pthread_t th;
	int rc = 0;
	/* both: each file read once, for its hash and the tensors stored in it */
	uint8_t (*sha)[32] = !b->src_files && !b->src_digests ? qtk_calloc(hm->nfiles ? hm->nfiles : 1, 32) : NULL;
	o.file_sha = sha;
	bool threaded = !sha && !b->src_files && !b->src_digests && pthread_create(&th, NULL, files_main, &fj) == 0;
	if (!b->src_digests && b->src_cache.of_tensor) /* described (qtk_prov_start_source) */
		rc = qtk_digest_model_into(hm, &o, &b->src_cache, err);
	else if (!b->src_digests)
		rc = qtk_digest_model(hm, &o, &b->src_cache, err);
	if (threaded)
		pthread_join(th, NULL);
	else if (!rc && !b->src_files)
		fj.rc = list_files(hm, &b->files_cache, true, (const uint8_t (*)[32])sha, &b->src_cancel, &fj.err);
	qtk_free(sha);
	if (!rc && fj.rc) {
		*err = fj.err;
		rc = fj.rc;
	}
	return rc; /* the caller finishes (hash_done) on its own thread */
}

/* The source hashed: its leaves' roots (a description filled in has none yet), b->cached. */
static int hash_done(qtk_prov_builder *b, qtk_err *err)
{
	int rc = !b->src_digests && b->src_cache.of_tensor ? qtk_digests_finish(&b->src_cache, err) : 0;
	b->cached = !rc;
	return rc;
}

static void *source_main(void *arg)
{
	qtk_prov_builder *b = arg;
	qtk_err_clear(&b->src_th_err);
	b->src_th_rc = hash_source(b, &b->src_th_err);
	return NULL;
}

int qtk_prov_start_source(qtk_prov_builder *b, qtk_err *err)
{
	if (b->cached || b->src_pending || b->src_digests || b->src_files || !b->src)
		return 0;
	int rc = qtk_digest_describe(b->src, &b->src_cache, err);
	if (rc)
		return rc;
	b->src_pending = true;
	if (pthread_create(&b->src_th, NULL, source_main, b) != 0) {
		b->src_pending = false; /* hash now instead */
		rc = hash_source(b, err);
		return rc ? rc : hash_done(b, err);
	}
	b->src_th_live = true;
	return 0;
}

int qtk_prov_join_source(qtk_prov_builder *b, qtk_err *err)
{
	if (!b->src_th_live)
		return 0;
	pthread_join(b->src_th, NULL);
	b->src_th_live = false;
	b->src_pending = false;
	if (b->src_th_rc) {
		*err = b->src_th_err;
		return b->src_th_rc;
	}
	return hash_done(b, err);
}

int qtk_prov_take_shared(qtk_prov_builder *b, const qtk_digests *out, qtk_err *err)
{
	if (!b->src_select || !b->cached || b->src_digests)
		return 0;
	bool any = false;
	for (size_t i = 0; i < b->src_cache.n; i++) {
		qtk_leaf *l = &b->src_cache.leaf[i];
		if (l->has_enc)
			continue;
		const qtk_leaf *o = out ? qtk_digests_find(out, l->name) : NULL;
		if (!o || !o->has_enc || !o->has_dec || strcmp(o->enc_id, l->enc_id) || o->n_bytes != l->n_bytes)
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, l->stored,
					   "the output tensor copied from this one has no digests");
		memcpy(l->enc, o->enc, 32);
		memcpy(l->dec, o->dec, 32);
		l->has_enc = l->has_dec = true;
		any = true;
	}
	return any ? qtk_digests_finish(&b->src_cache, err) : 0;
}

static int build(qtk_prov_builder *b, size_t reserve, rec_stream *st, char **json, qtk_err *err)
{
	*json = NULL;
	qtk_json_init();
	olist od_meta;
	memset(&od_meta, 0, sizeof od_meta);
	int rc = 0;
	if (!b->src || !b->out)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "provenance builder needs source and output");
	if (!b->cached && !b->src_pending) {
		rc = hash_source(b, err);
		if (rc || (rc = hash_done(b, err)))
			return rc;
	}
	const bool pending = b->src_pending;
	qtk_filelist meta_files;
	memset(&meta_files, 0, sizeof meta_files);
	if (pending && (rc = list_files(b->src, &meta_files, false, NULL, NULL, err)))
		return rc;
	const qtk_digests *sd = b->src_digests ? b->src_digests : &b->src_cache;
	const qtk_filelist *sf = pending ? &meta_files : b->src_files ? b->src_files : &b->files_cache;
	/* the chained parent first: its reading's tens of MiB, freed, go back to the system */
	const bool first = !b->parent_state;
	rc = rc ? rc : load_parent(b, err);
	if (!rc && first && b->parent_state > 0)
		qtk_mem_release();
	rc = rc ? rc : out_list(b->out, &od_meta, err);
	if (!rc && b->out_digests)
		for (size_t i = 0; i < od_meta.n && !rc; i++)
			if (!qtk_digests_find(b->out_digests, od_meta.e[i].name))
				rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, od_meta.e[i].name, "output digest missing");
	if (!rc) {
		canon_hooks hs = {0};
		leaves_ctx oc, tc;
		cJSON *r = cJSON_CreateObject();
		cJSON_AddNumberToObject(r, "record_version", QTK_PROV_VERSION);
		cJSON *oj = output_json(qtk_out_kind_name(b->out_kind), NULL, &od_meta, b->out_digests,
					b->out_files ? outfiles_json(b->out_files) : NULL, &hs, &oc);
		qtk_metad md;
		if (!(rc = qtk_meta_digests(b->out, b->out_kind == QTK_OUT_HF, &md, err))) {
			cJSON_AddItemToObject(oj, "metadata", qtk_meta_json(&md));
			qtk_metad_free(&md);
		}
		cJSON_AddItemToObject(r, "output", oj);
		cJSON_AddItemToObject(r, "source", source_json(b, sf, sd, pending, &hs));
		cJSON_AddItemToObject(r, "transform", transform_json(b, sd, &od_meta, &hs, &tc));
		cJSON_AddStringToObject(r, "calibration", "none");
		if (b->imatrix_sha256) {
			cJSON *im = cJSON_CreateObject();
			cJSON_AddItemToObject(im, "sha256", hexstr(b->imatrix_sha256));
			if (b->imatrix_file)
				cJSON_AddStringToObject(im, "file", qtk_path_base(b->imatrix_file));
			cJSON_AddItemToObject(r, "imatrix", im);
		} else {
			cJSON_AddStringToObject(r, "imatrix", "none");
		}
		cJSON_AddItemToObject(r, "tool", tool_json());
		cJSON *det = cJSON_CreateObject();
		cJSON_AddBoolToObject(det, "threads_invariant", 1);
		cJSON_AddStringToObject(det, "decode", "bit-exact with the reference dequantizers");
		cJSON_AddItemToObject(r, "determinism", det);
		/* what the source carried that can run code or looks like a template backdoor: taken
		 * once, by the first build, so the final record keeps the reserved length even when the
		 * output is written into the source's directory */
		if (!b->audit_cache) {
			qtk_audit au;
			rc = qtk_audit_model(b->src, &au, err);
			b->audit_cache = rc ? NULL : qtk_audit_json(&au);
			qtk_audit_free(&au);
		}
		cJSON *aj = b->audit_cache ? cJSON_Duplicate(b->audit_cache, 1) : NULL;
		if (aj)
			cJSON_AddItemToObject(r, "audit", aj);
		else if (!rc)
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		char tm[32];
		qtk_prov_time(b->time, tm, sizeof tm);
		cJSON_AddStringToObject(r, "time", tm);
		if (rc) {
			cJSON_Delete(r);
		} else {
			rc = finish_json(r, &hs, reserve, st, json, err);
		}
	}
	olist_free(&od_meta);
	qtk_filelist_free(&meta_files);
	return rc;
}

int qtk_prov_build(qtk_prov_builder *b, char **json, qtk_err *err)
{
	return build(b, 0, NULL, json, err);
}

int qtk_prov_build_sized(qtk_prov_builder *b, size_t reserve, char **json, qtk_err *err)
{
	return build(b, reserve, NULL, json, err);
}

int qtk_prov_build_stream(qtk_prov_builder *b, size_t len, int (*put)(void *ctx, const uint8_t *p, size_t n),
			  void *ctx, qtk_err *err)
{
	char *json = NULL;
	rec_stream st = {put, ctx, 0};
	return len == SIZE_MAX ? qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "record length unknown")
			       : build(b, len, &st, &json, err);
}

static int count_put(void *ctx, const uint8_t *p, size_t n)
{
	(void)p;
	*(uint64_t *)ctx += n;
	return 0;
}

int qtk_prov_build_count(qtk_prov_builder *b, size_t *len, qtk_err *err)
{
	char *json = NULL;
	uint64_t n = 0;
	rec_stream st = {count_put, &n, 0};
	int rc = build(b, SIZE_MAX, &st, &json, err);
	*len = rc ? 0 : (size_t)n;
	return rc;
}

/* Replace the one occurrence of `from` in buf by `to` (same length); 1 when replaced. */
static int replace_once(char *buf, size_t len, const char *from, const char *to, size_t n)
{
	char *at = n ? memmem(buf, len, from, n) : NULL;
	if (!at)
		return 0;
	if (memmem(at + 1, len - (size_t)(at + 1 - buf), from, n))
		return -1; /* ambiguous */
	memcpy(at, to, n);
	return 1;
}

int qtk_prov_patch(char *buf, size_t len, const char *ph, const char *fin, qtk_err *err)
{
	size_t n = strlen(ph);
	if (strlen(fin) != n)
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, QTK_PROV_KEY,
				   "final record length differs from the reserved one");
	int r = replace_once(buf, len, ph, fin, n);
	if (!r) { /* inside a JSON document (safetensors header): the escaped string literal */
		qtk_buf a = {0}, b = {0};
		if (qtk_json_put_str(&a, ph, n) || qtk_json_put_str(&b, fin, n) || a.len != b.len)
			r = -2;
		else
			r = replace_once(buf, len, (const char *)a.p, (const char *)b.p, a.len);
		qtk_buf_free(&a);
		qtk_buf_free(&b);
	}
	if (r == 1)
		return 0;
	return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, QTK_PROV_KEY, "%s",
			   r == 0 ? "the reserved record is not in the header" : r == -1 ? "the reserved record appears twice"
										: "the record cannot be escaped");
}

static int emit(qtk_model *m, const qtk_digests *d, const qtk_filelist *files, const cJSON *embedded, int64_t time_s,
		rec_stream *st, char **json, qtk_err *err)
{
	*json = NULL;
	qtk_json_init();
	qtk_digests meta;
	memset(&meta, 0, sizeof meta);
	meta.n = d->n;
	meta.leaf = d->leaf; /* borrowed: output_json only reads */
	canon_hooks hs = {0};
	leaves_ctx oc;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "record_version", QTK_PROV_VERSION);
	cJSON *oj = output_json(qtk_model_format(m), &meta, NULL, d, files_json(files->f, files->n, false), &hs, &oc);
	qtk_metad md;
	int rc = qtk_meta_digests(m, !strcmp(qtk_model_format(m), "hf"), &md, err);
	if (rc) {
		cJSON_Delete(oj);
		cJSON_Delete(r);
		return rc;
	}
	cJSON_AddItemToObject(oj, "metadata", qtk_meta_json(&md));
	qtk_metad_free(&md);
	cJSON_AddItemToObject(r, "output", oj);
	cJSON_AddItemToObject(r, "embedded", embedded ? hook_at(&hs, put_tree, embedded) : cJSON_CreateNull());
	cJSON_AddItemToObject(r, "tool", tool_json());
	char tm[32];
	qtk_prov_time(time_s, tm, sizeof tm);
	cJSON_AddStringToObject(r, "time", tm);
	return finish_json(r, &hs, st ? SIZE_MAX : 0, st, json, err);
}

int qtk_prov_emit(qtk_model *m, const qtk_digests *d, const qtk_filelist *files, const cJSON *embedded,
		  int64_t time_s, char **json, qtk_err *err)
{
	return emit(m, d, files, embedded, time_s, NULL, json, err);
}

int qtk_prov_emit_stream(qtk_model *m, const qtk_digests *d, const qtk_filelist *files, const cJSON *embedded,
			 int64_t time_s, int (*put)(void *ctx, const uint8_t *p, size_t n), void *ctx, qtk_err *err)
{
	char *json = NULL;
	rec_stream st = {put, ctx, 0};
	return emit(m, d, files, embedded, time_s, &st, &json, err);
}
