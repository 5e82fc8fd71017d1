/* report.c - qinspect --json, --summary and --markdown (headers only). */
#include "inspect.h"
#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void summary_header(const qtk_model *m, FILE *out);
static int width_of(const insp_opts *o);
static const char *path_name(const char *path, char *buf, size_t n);

/* A packed tensor's scheme parameters beyond bits and group: how scales are shared (the
 * schemes that vary it) and every stored part (role, storage type, shape, bytes). */
static void json_scheme(cJSON *j, const qtk_tensor *t)
{
	static const char *const strategies[] = {"tensor", "channel", "group", "block"};
	qtk_layout_kind k = t->layout.kind;
	if ((k == QTK_LAYOUT_CT_INT || k == QTK_LAYOUT_FP8) && t->layout.strategy < 4)
		cJSON_AddStringToObject(j, "strategy",
					t->layout.strategy == 2 && t->layout.group_size && t->ndim >= 2 &&
							t->layout.group_size == t->shape[t->ndim - 1]
						? "channel"
						: strategies[t->layout.strategy]);
	if (k == QTK_LAYOUT_NVFP4)
		cJSON_AddStringToObject(j, "global_scale", t->layout.scale_type ? "multiplies (ModelOpt weight_scale_2)"
									       : "divides (compressed-tensors weight_global_scale)");
	cJSON *parts = cJSON_AddArrayToObject(j, "parts");
	for (int p = 0; parts && p < t->nparts; p++) {
		const qtk_part *q = &t->parts[p];
		cJSON *o = cJSON_CreateObject();
		const qtk_type_info *ti = qtk_type(q->type);
		cJSON_AddStringToObject(o, "role", q->role);
		cJSON_AddStringToObject(o, "type", ti ? ti->name : "unknown");
		cJSON *sh = cJSON_AddArrayToObject(o, "shape");
		for (int d = 0; d < q->ndim; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)q->shape[d]));
		cJSON_AddNumberToObject(o, "n_bytes", (double)q->nbytes);
		cJSON_AddItemToArray(parts, o);
	}
}

void compute_totals(const qtk_model *m, totals *t)
{
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *x = &m->tensors[i];
		const char *ty = qtk_layout_type_name(&x->layout);
		t->n_params += x->n_params;
		t->n_bytes += x->n_bytes;
		size_t k = 0;
		while (k < t->ntypes && strcmp(t->types[k].type, ty) != 0)
			k++;
		if (k == t->ntypes) {
			if (t->ntypes == sizeof t->types / sizeof *t->types)
				continue;
			t->types[t->ntypes++].type = ty;
		}
		t->types[k].n_tensors++;
		t->types[k].n_params += x->n_params;
		t->types[k].n_bytes += x->n_bytes;
	}
}

void fmt_shape(const qtk_tensor *t, char *buf, size_t n) { qtk_shape_text(buf, n, t->ndim, t->shape); }

void fmt_bytes(uint64_t b, char *buf, size_t n)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int k = 0;
	while (v >= 1024 && k < 4) {
		v /= 1024;
		k++;
	}
	if (k == 0)
		snprintf(buf, n, "%llu B", (unsigned long long)b);
	else
		snprintf(buf, n, "%.1f %s", v, u[k]);
}

const char *insp_safe(const char *s, char *buf, size_t n) { return qtk_text_safe(s, 0, buf, n); }

static double bpw(uint64_t bytes, uint64_t params) { return params ? 8.0 * (double)bytes / (double)params : 0; }

/* A JSON string that is always valid UTF-8 (invalid bytes become U+FFFD). */
static cJSON *json_str(const char *s, uint64_t len)
{
	if (qtk_utf8_valid(s, (size_t)len) && !memchr(s, 0, (size_t)len))
		return cJSON_CreateString(s);
	qtk_buf b = {0};
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		int k = s[i] ? qtk_utf8_decode(s + i, (size_t)(len - i), &cp) : 0;
		if (k)
			qtk_buf_put(&b, s + i, (size_t)k);
		else
			qtk_buf_puts(&b, "\xEF\xBF\xBD");
		i += k ? (size_t)k : 1;
	}
	cJSON *r = cJSON_CreateString(b.p ? (char *)b.p : "");
	qtk_buf_free(&b);
	return r;
}

static cJSON *json_scalar(unsigned type, const void *raw, const qtk_value *v)
{
	/* raw: LE element bytes for array elements; v: a scalar value */
	qtk_value x = {0};
	if (raw) {
		qtk_value_from_le(&x, type, raw);
		v = &x;
	}
	uint64_t u = v->v.u;
	int64_t i = v->v.i;
	double f = v->v.f;
	switch (type) {
	case QTK_V_BOOL: return cJSON_CreateBool(u != 0);
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64: return cJSON_CreateNumber((double)i);
	case QTK_V_F32: case QTK_V_F64: return cJSON_CreateNumber(f);
	default: return cJSON_CreateNumber((double)u);
	}
}

#define ARRAY_INLINE_MAX 256

static cJSON *json_value(const qtk_value *v)
{
	if (v->type == QTK_V_STR)
		return json_str(v->v.str.s, v->v.str.len);
	if (v->type != QTK_V_ARR)
		return json_scalar(v->type, NULL, v);
	if (v->n > ARRAY_INLINE_MAX) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "type", "array");
		cJSON_AddStringToObject(o, "elem_type", qtk_value_type_name(v->elem));
		cJSON_AddNumberToObject(o, "count", (double)v->n);
		return o;
	}
	cJSON *a = cJSON_CreateArray();
	size_t es = qtk_value_size(v->elem);
	for (uint64_t k = 0; k < v->n; k++) {
		cJSON *e;
		if (v->elem == QTK_V_STR) {
			const qtk_str *s = v->arr;
			e = json_str(s[k].s, s[k].len);
		} else {
			e = json_scalar(v->elem, (const uint8_t *)v->arr + k * es, NULL);
		}
		cJSON_AddItemToArray(a, e);
	}
	return a;
}

static cJSON *json_metadata(const qtk_model *m)
{
	cJSON *md = cJSON_CreateObject();
	for (size_t i = 0; i < m->nkv; i++) {
		if (strcmp(m->kv[i].key, "qtk.provenance") == 0)
			continue;
		cJSON_AddItemToObject(md, m->kv[i].key, json_value(&m->kv[i].val));
	}
	for (size_t i = 0; i < m->nblobs; i++) {
		const qtk_blob *b = &m->blobs[i];
		size_t n = strlen(b->name);
		if (n < 5 || strcmp(b->name + n - 5, ".json") != 0 || strncmp(b->name, "tokenizer", 9) == 0 ||
		    strcmp(b->name, "vocab.json") == 0)
			continue;
		cJSON *j = cJSON_ParseWithLength((const char *)b->data, b->len);
		if (j)
			cJSON_AddItemToObject(md, b->name, j);
	}
	return md;
}

/* "audit": executable content and chat-template findings (docs/json.md); null when the audit
 * could not run (out of memory). */
static cJSON *json_audit(const qtk_model *m)
{
	qtk_audit a;
	qtk_err e;
	qtk_err_clear(&e);
	if (qtk_audit_model(m, &a, &e))
		return cJSON_CreateNull();
	cJSON *j = qtk_audit_json(&a);
	qtk_audit_free(&a);
	return j ? j : cJSON_CreateNull();
}

int audit_lines(const qtk_model *m, audit_line_fn fn, void *arg)
{
	qtk_audit a;
	qtk_err e;
	qtk_err_clear(&e);
	if (qtk_audit_model(m, &a, &e))
		return -1;
	char line[640];
	size_t ntpl = a.n + a.dropped - (a.ncode > a.n + a.dropped ? a.n + a.dropped : a.ncode);
	if (!a.ncode && !ntpl)
		snprintf(line, sizeof line, "audit: no executable content%s; %zu chat template%s without findings",
			 a.listed ? " in the directory" : "", a.ntemplates, a.ntemplates == 1 ? "" : "s");
	else
		snprintf(line, sizeof line,
			 "audit: %zu finding%s that can run code (qverify refuses them), %zu chat-template finding%s "
			 "(%zu template%s examined)",
			 a.ncode, a.ncode == 1 ? "" : "s", ntpl, ntpl == 1 ? "" : "s", a.ntemplates,
			 a.ntemplates == 1 ? "" : "s");
	int rc = fn(arg, line);
	for (size_t i = 0; i < a.n && !rc; i++) {
		snprintf(line, sizeof line, "  %-8s %s: %s: %s", a.f[i].code ? "code" : "template", a.f[i].where,
			 a.f[i].kind, a.f[i].detail);
		rc = fn(arg, line);
	}
	if (!rc && a.dropped) {
		snprintf(line, sizeof line, "  ... and %zu more", a.dropped);
		rc = fn(arg, line);
	}
	qtk_audit_free(&a);
	return rc;
}

static int audit_print(void *arg, const char *line)
{
	char b[2600];
	fprintf(arg, "%s\n", insp_safe(line, b, sizeof b));
	return 0;
}

/* When the record is outside qtk_json_refmt's subset it is parsed with cJSON. Its tree
 * (thousands of small nodes and strings for a model's tensors) is built and freed at once, so
 * its nodes come from one block: a mapping with huge pages advised (qtk_table_realloc), which
 * costs a page fault per 2 MiB rather than per 4 KiB. Nodes that do not fit come from
 * qtk_malloc; the block's are never freed one by one (pv_free), the block goes as a whole
 * (pv_delete). cJSON's hooks are global: report_json runs on one thread, and no other thread
 * uses cJSON meanwhile. */
static struct {
	uint8_t *base;
	size_t len, used;
} pv_arena;

static void *pv_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (pv_arena.base && n <= pv_arena.len - pv_arena.used) {
		void *p = pv_arena.base + pv_arena.used;
		pv_arena.used += n;
		return p;
	}
	return qtk_malloc(n);
}

static void pv_free(void *p)
{
	const uint8_t *b = p;
	if (!(pv_arena.base && b >= pv_arena.base && b < pv_arena.base + pv_arena.len))
		qtk_free(p);
}

static void pv_delete(cJSON *j)
{
	qtk_json_hooks_push(qtk_malloc, pv_free);
	cJSON_Delete(j);
	qtk_json_hooks_pop();
	qtk_table_free(pv_arena.base);
	memset(&pv_arena, 0, sizeof pv_arena);
}

/* The record as the document prints it (inside the root object): what cJSON parsing and
 * printing it gives, "null" when it does not parse or there is none. Straight from the text
 * when it is in qtk_json_refmt's subset (every record qtk writes), else through cJSON. */
static int json_provenance(const qtk_model *m, qtk_jtext *pv)
{
	const qtk_kv *kv = qtk_kv_find(m, "qtk.provenance");
	const qtk_blob *b = qtk_blob_find(m, "qtk-provenance.json");
	const char *txt = NULL;
	size_t len = 0;
	if (kv && kv->val.type == QTK_V_STR)
		txt = kv->val.v.str.s, len = (size_t)kv->val.v.str.len;
	else if (b)
		txt = (const char *)b->data, len = b->len;
	/* the formatted record is under twice the compact one (a tab or two and a line break a
	 * member; deeper nesting grows it further, and then the text grows as it goes) */
	if (txt && len < SIZE_MAX / 4)
		qtk_jtext_reserve(pv, 2 * len + 4096);
	int rc = txt ? qtk_json_refmt(pv, txt, len, 1) : 1;
	if (rc != 1)
		return rc;
	cJSON *j = NULL;
	if (txt) {
		/* about five bytes of tree per byte of compact record */
		if (len < SIZE_MAX / 8 && (pv_arena.base = qtk_table_realloc(NULL, 0, 6 * len + 4096)))
			pv_arena.len = 6 * len + 4096;
		qtk_json_hooks_push(pv_alloc, pv_free);
		j = cJSON_ParseWithLength(txt, len);
		qtk_json_hooks_pop();
	}
	if (j)
		rc = qtk_json_fmt(pv, j, 1);
	else
		rc = qtk_json_fmt(pv, &(cJSON){.type = cJSON_NULL}, 1);
	pv_delete(j);
	return rc;
}

/* "stats" for --json --stats: null when the layout cannot be decoded. */
static int json_stats(qtk_model *m, const qtk_tensor *t, cJSON *j, const insp_opts *o, size_t i)
{
	if (!qtk_can_decode(t)) {
		cJSON_AddNullToObject(j, "stats");
		return 0;
	}
	qtk_tstats s;
	int rc = qtk_stats_compute(m, t, &s, NULL, NULL);
	if (rc)
		return rc;
	cJSON_AddItemToObject(j, "stats", qtk_stats_json(&s));
	if (o->progress)
		o->progress("computing statistics", i + 1, m->ntensors);
	return 0;
}

cJSON *json_tensor(const qtk_tensor *t)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddItemToObject(j, "name", json_str(t->name, strlen(t->name)));
	cJSON *sh = cJSON_AddArrayToObject(j, "shape");
	for (int d = 0; d < t->ndim; d++)
		cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
	char lid[64];
	qtk_layout_id(&t->layout, lid, sizeof lid);
	cJSON_AddStringToObject(j, "layout", lid);
	cJSON_AddStringToObject(j, "type", qtk_layout_type_name(&t->layout));
	cJSON_AddNumberToObject(j, "bits", t->layout.bits);
	if (t->layout.group_size)
		cJSON_AddNumberToObject(j, "group_size", t->layout.group_size);
	else
		cJSON_AddNullToObject(j, "group_size");
	if (t->layout.kind != QTK_LAYOUT_PLAIN) {
		cJSON_AddBoolToObject(j, "sym", t->layout.sym);
		cJSON_AddBoolToObject(j, "act_order", t->layout.act_order);
		json_scheme(j, t);
	}
	cJSON_AddNumberToObject(j, "n_params", (double)t->n_params);
	cJSON_AddNumberToObject(j, "n_bytes", (double)t->n_bytes);
	cJSON_AddNumberToObject(j, "bits_per_weight", bpw(t->n_bytes, t->n_params));
	return j;
}

cJSON *json_str_n(const char *s, uint64_t len) { return json_str(s, len); }

/* a member of the tensor's object: three tabs in, its name and a tab */
static void tt_key(qtk_jtext *w, const char *k, bool first)
{
	if (!first)
		qtk_jtext_raw(w, ",\n", 2);
	qtk_jtext_tabs(w, 3);
	qtk_jtext_str(w, k, strlen(k));
	qtk_jtext_raw(w, ":\t", 2);
}

int json_tensor_text(qtk_jtext *w, const qtk_tensor *t)
{
	const size_t nl = strlen(t->name);
	if (t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_utf8_valid(t->name, nl))
		return 0;
	char lid[64];
	qtk_layout_id(&t->layout, lid, sizeof lid);
	const char *type = qtk_layout_type_name(&t->layout);
	qtk_jtext_raw(w, "{\n", 2);
	tt_key(w, "name", true);
	qtk_jtext_str(w, t->name, nl);
	tt_key(w, "shape", false);
	qtk_jtext_raw(w, "[", 1);
	for (int d = 0; d < t->ndim; d++) {
		if (d)
			qtk_jtext_raw(w, ", ", 2);
		qtk_jtext_num(w, (double)t->shape[d]);
	}
	qtk_jtext_raw(w, "]", 1);
	tt_key(w, "layout", false);
	qtk_jtext_str(w, lid, strlen(lid));
	tt_key(w, "type", false);
	qtk_jtext_str(w, type, strlen(type));
	tt_key(w, "bits", false);
	qtk_jtext_num(w, t->layout.bits);
	tt_key(w, "group_size", false);
	if (t->layout.group_size)
		qtk_jtext_num(w, t->layout.group_size);
	else
		qtk_jtext_raw(w, "null", 4);
	tt_key(w, "n_params", false);
	qtk_jtext_num(w, (double)t->n_params);
	tt_key(w, "n_bytes", false);
	qtk_jtext_num(w, (double)t->n_bytes);
	tt_key(w, "bits_per_weight", false);
	qtk_jtext_num(w, bpw(t->n_bytes, t->n_params));
	qtk_jtext_raw(w, "\n", 1);
	qtk_jtext_tabs(w, 2);
	qtk_jtext_raw(w, "}", 1);
	return 1;
}

int json_emit(qtk_model *m, cJSON *doc, FILE *out)
{
	char *txt = cJSON_Print(doc);
	cJSON_Delete(doc);
	if (!txt)
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	fputs(txt, out);
	fputc('\n', out);
	cJSON_free(txt);
	return 0;
}

/* The document is printed as cJSON_Print would print it whole, but each tensor's object is
 * built, printed and freed in turn: the tree of a thousand tensors (and the text of all of
 * them in one buffer) is never held, which is most of what a header-only run touches. The
 * rest of the document is built and printed first, so nothing is written before the parts
 * that read the file have succeeded (a tensor's object can then fail only for want of memory,
 * which cuts the document short, exit status 4); with --stats, which can fail on any tensor,
 * the tensors are written to memory and the whole document goes out at the end. */
/* What was written to the temporary file f, from its start, to out. */
static int aside_copy(qtk_model *m, FILE *f, FILE *out)
{
	char buf[1 << 16];
	size_t k;
	if (fflush(f) || fseek(f, 0, SEEK_SET))
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "the report's temporary file: %s", strerror(errno));
	while ((k = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, k, out);
	return ferror(f) ? qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "the report's temporary file: read failed") : 0;
}

int json_aside_open(json_aside *a)
{
	memset(a, 0, sizeof *a);
	if ((a->f = tmpfile()))
		return 0;
	a->f = open_memstream(&a->mem, &a->memlen);
	return a->f ? 0 : QTK_E_IO;
}

int json_aside_add(json_aside *a, cJSON *j)
{
	a->tj.len = 0;
	int rc = !j || !a->f || qtk_json_fmt(&a->tj, j, 2) ? QTK_E_IO : 0;
	cJSON_Delete(j);
	if (!rc && ((a->n && fputs(", ", a->f) == EOF) || fwrite(a->tj.p, 1, a->tj.len, a->f) != a->tj.len))
		rc = QTK_E_IO;
	a->n += !rc;
	return rc;
}

void json_aside_close(json_aside *a)
{
	if (a->f)
		fclose(a->f);
	free(a->mem);
	qtk_jtext_free(&a->tj);
	memset(a, 0, sizeof *a);
}

int json_aside_emit(qtk_model *m, json_aside *a, cJSON *doc, FILE *out)
{
	qtk_jtext d = {0};
	int rc = !doc || qtk_json_fmt(&d, doc, 0) ? qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory") : 0;
	cJSON_Delete(doc);
	const size_t head = rc ? SIZE_MAX : qtk_json_list_place(d.p, "tensors");
	if (!rc && head == SIZE_MAX)
		rc = qtk_err_set(&m->err, QTK_E_INTERNAL, NULL, -1, NULL, "the document has no tensor list");
	if (!rc && a->mem) { /* in memory: the stream's text is readable once it is closed */
		fclose(a->f);
		a->f = NULL;
	}
	if (!rc) {
		fwrite(d.p, 1, head, out);
		if (a->mem)
			fwrite(a->mem, 1, a->memlen, out);
		else
			rc = aside_copy(m, a->f, out);
		fwrite(d.p + head, 1, d.len - head, out);
		fputc('\n', out);
	}
	qtk_jtext_free(&d);
	json_aside_close(a);
	return rc;
}

int report_json(qtk_model *m, FILE *out, const insp_opts *o)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "schema_version", 1);
	cJSON_AddItemToObject(root, "file", json_str(m->path, strlen(m->path)));
	cJSON_AddStringToObject(root, "format", qtk_model_format(m));
	if (m->format_version)
		cJSON_AddNumberToObject(root, "format_version", m->format_version);
	else
		cJSON_AddNullToObject(root, "format_version");
	cJSON_AddArrayToObject(root, "tensors"); /* printed "[]": the tensors go in its place */
	totals tt;
	compute_totals(m, &tt);
	cJSON *s = cJSON_AddObjectToObject(root, "summary");
	cJSON_AddNumberToObject(s, "n_tensors", (double)m->ntensors);
	cJSON_AddNumberToObject(s, "n_params", (double)tt.n_params);
	cJSON_AddNumberToObject(s, "n_bytes", (double)tt.n_bytes);
	cJSON_AddNumberToObject(s, "bits_per_weight", bpw(tt.n_bytes, tt.n_params));
	cJSON *bt = cJSON_AddObjectToObject(s, "by_type");
	for (size_t k = 0; k < tt.ntypes; k++) {
		cJSON *e = cJSON_AddObjectToObject(bt, tt.types[k].type);
		cJSON_AddNumberToObject(e, "n_tensors", (double)tt.types[k].n_tensors);
		cJSON_AddNumberToObject(e, "n_params", (double)tt.types[k].n_params);
		cJSON_AddNumberToObject(e, "n_bytes", (double)tt.types[k].n_bytes);
	}
	cJSON_AddItemToObject(root, "metadata", json_metadata(m));
	qtk_jtext pv = {0}, doc = {0}, tj = {0};
	int rc = json_provenance(m, &pv);
	/* the record's place is marked with a raw \x01 (printed strings never hold one: their
	 * control bytes are escaped), and its text is written there from pv, not copied */
	cJSON *raw = rc ? NULL : cJSON_CreateNull();
	if (raw) {
		raw->type = cJSON_Raw | cJSON_IsReference;
		raw->valuestring = (char *)"\x01";
		if (!cJSON_AddItemToObject(root, "provenance", raw)) {
			cJSON_Delete(raw); /* no mark in the text: reported as out of memory below */
			raw = NULL;
		}
	}
	cJSON_AddItemToObject(root, "audit", json_audit(m));
	rc = rc || !raw ? QTK_E_IO : qtk_json_fmt(&doc, root, 0);
	cJSON_Delete(root);
	const size_t head = rc ? SIZE_MAX : qtk_json_list_place(doc.p, "tensors");
	const char *pvat = head != SIZE_MAX ? memchr(doc.p + head, 1, doc.len - head) : NULL;
	/* with --stats the document is written aside first (a tensor that fails to decode leaves
	 * nothing printed): an unnamed temporary file, whose pages are not the process's memory
	 * (~2.5 KB a tensor: 250 MB for 100,000 tensors), else memory */
	char *mem = NULL;
	size_t memlen = 0;
	FILE *to = !pvat ? NULL : !o->stats ? out : tmpfile();
	bool in_mem = pvat && o->stats && !to;
	if (in_mem)
		to = open_memstream(&mem, &memlen);
	if (!to) {
		qtk_jtext_free(&doc);
		qtk_jtext_free(&pv);
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	fwrite(doc.p, 1, head, to);
	for (size_t i = 0; i < m->ntensors && !rc; i++) {
		const qtk_tensor *t = &m->tensors[i];
		tj.len = 0;
		if (!o->stats && json_tensor_text(&tj, t)) { /* no tree for a plain tensor */
			if (!qtk_jtext_ok(&tj))
				rc = qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		} else {
			cJSON *j = json_tensor(t);
			if (!j)
				rc = qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			else if (o->stats && json_stats(m, t, j, o, i))
				rc = -1;
			if (!rc && qtk_json_fmt(&tj, j, 2)) /* inside the root object and its array */
				rc = qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			cJSON_Delete(j);
		}
		if (!rc) {
			if (i)
				fputs(", ", to);
			fwrite(tj.p, 1, tj.len, to);
		}
	}
	qtk_jtext_free(&tj);
	if (o->stats && o->progress_end)
		o->progress_end();
	if (!rc) {
		const size_t k = (size_t)(pvat - doc.p);
		fwrite(doc.p + head, 1, k - head, to);
		fwrite(pv.p, 1, pv.len, to);
		fwrite(pvat + 1, 1, doc.len - k - 1, to);
		fputc('\n', to);
	}
	qtk_jtext_free(&doc);
	qtk_jtext_free(&pv);
	if (o->stats && in_mem) {
		if (fclose(to) && !rc)
			rc = qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		if (!rc)
			fwrite(mem, 1, memlen, out);
		free(mem);
	} else if (o->stats) {
		rc = rc ? rc : aside_copy(m, to, out);
		fclose(to);
	}
	return rc;
}

static const char *kv_str(const qtk_model *m, const char *key)
{
	const qtk_kv *kv = qtk_kv_find(m, key);
	return kv && kv->val.type == QTK_V_STR ? kv->val.v.str.s : NULL;
}

int report_summary(qtk_model *m, FILE *out, const insp_opts *o)
{
	totals tt;
	compute_totals(m, &tt);
	size_t w = 4, wmax = width_of(o) > 96 ? (size_t)width_of(o) - 80 : 16;
	for (size_t i = 0; i < m->ntensors; i++) {
		size_t n = qtk_text_len(m->tensors[i].name, strlen(m->tensors[i].name), 0); /* as shown */
		if (n > w)
			w = n;
	}
	if (w > wmax)
		w = wmax;
	const char *arch = kv_str(m, "general.architecture");
	char sb[512], pb[2048], ab[512];
	fprintf(out, "%s: %s%s%s%s%s\n", insp_safe(m->path, pb, sizeof pb), qtk_model_format(m),
		m->format_version ? " v" : "", m->format_version ? (m->format_version == 3 ? "3" : "2") : "",
		arch ? ", " : "", arch ? insp_safe(arch, ab, sizeof ab) : "");
	summary_header(m, out);
	fprintf(out, "\n%-*s  %-14s %-12s %4s %5s %12s %11s %6s %6s\n", (int)w, "tensor", "shape", "layout",
		"bits", "group", "params", "bytes", "bpw", "share");
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		char sh[64], lid[32], by[24], grp[16];
		fmt_shape(t, sh, sizeof sh);
		qtk_layout_id(&t->layout, lid, sizeof lid);
		fmt_bytes(t->n_bytes, by, sizeof by);
		if (t->layout.group_size)
			snprintf(grp, sizeof grp, "%u", t->layout.group_size);
		else
			snprintf(grp, sizeof grp, "-");
		fprintf(out, "%-*.*s  %-14s %-12s %4u %5s %12llu %11s %6.3f %5.1f%%\n", (int)w, (int)w,
			insp_safe(t->name, sb, sizeof sb), sh,
			lid, t->layout.bits, grp, (unsigned long long)t->n_params, by, bpw(t->n_bytes, t->n_params),
			tt.n_bytes ? 100.0 * (double)t->n_bytes / (double)tt.n_bytes : 0.0);
	}
	char by[24];
	fmt_bytes(tt.n_bytes, by, sizeof by);
	fprintf(out, "\ntotal: %zu tensors, %llu params, %s (%llu bytes), %.4f bits per weight\n", m->ntensors,
		(unsigned long long)tt.n_params, by, (unsigned long long)tt.n_bytes, bpw(tt.n_bytes, tt.n_params));
	fprintf(out, "\n%-10s %8s %14s %14s %8s\n", "type", "tensors", "params", "bytes", "bpw");
	for (size_t k = 0; k < tt.ntypes; k++) {
		const type_total *x = &tt.types[k];
		fprintf(out, "%-10s %8llu %14llu %14llu %8.4f\n", x->type, (unsigned long long)x->n_tensors,
			(unsigned long long)x->n_params, (unsigned long long)x->n_bytes, bpw(x->n_bytes, x->n_params));
	}
	fputc('\n', out);
	audit_lines(m, audit_print, out);
	return 0;
}

int report_markdown(qtk_model *m, FILE *out, const insp_opts *o)
{
	(void)o;
	totals tt;
	compute_totals(m, &tt);
	char by[24];
	fmt_bytes(tt.n_bytes, by, sizeof by);
	char pb[2048], nb[1024];
	fprintf(out, "## Model file: `%s`\n\n",
		qtk_text_safe(path_name(m->path, nb, sizeof nb), QTK_TEXT_MD_CODE, pb, sizeof pb));
	fprintf(out, "- Format: %s%s\n", qtk_model_format(m),
		m->format_version == 3 ? " v3" : m->format_version == 2 ? " v2" : "");
	fprintf(out, "- Tensors: %zu\n- Parameters: %llu\n- Size: %s (%llu bytes)\n- Bits per weight: %.4f\n\n",
		m->ntensors, (unsigned long long)tt.n_params, by, (unsigned long long)tt.n_bytes,
		bpw(tt.n_bytes, tt.n_params));
	fprintf(out, "| Type | Tensors | Parameters | Bytes | Bits per weight |\n|---|---:|---:|---:|---:|\n");
	for (size_t k = 0; k < tt.ntypes; k++) {
		const type_total *x = &tt.types[k];
		fprintf(out, "| %s | %llu | %llu | %llu | %.4f |\n", x->type, (unsigned long long)x->n_tensors,
			(unsigned long long)x->n_params, (unsigned long long)x->n_bytes, bpw(x->n_bytes, x->n_params));
	}
	fprintf(out, "\n| Tensor | Shape | Layout | Bits | Group | Params | Bytes | Bits per weight |\n"
		     "|---|---|---|---:|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		char sh[64], lid[32];
		fmt_shape(t, sh, sizeof sh);
		qtk_layout_id(&t->layout, lid, sizeof lid);
		char sb[512];
		fprintf(out, "| `%s` | %s | %s | %u | ", qtk_text_safe(t->name, QTK_TEXT_MD_CODE | QTK_TEXT_MD_CELL, sb, sizeof sb),
			sh, lid, t->layout.bits);
		if (t->layout.group_size)
			fprintf(out, "%u", t->layout.group_size);
		else
			fprintf(out, "-");
		fprintf(out, " | %llu | %llu | %.4f |\n", (unsigned long long)t->n_params,
			(unsigned long long)t->n_bytes, bpw(t->n_bytes, t->n_params));
	}
	return 0;
}

/* ---- names, widths, headers ------------------------------------------------------------- */

int insp_term_width(int fd)
{
	if (!isatty(fd))
		return INSP_WIDTH_DEFAULT;
	int w = 0;
	const char *c = getenv("COLUMNS");
	uint64_t v;
	if (c && qtk_parse_u64(c, &v) && v > 0 && v < 100000)
		w = (int)v;
	struct winsize ws;
	if (!w && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		w = ws.ws_col;
	if (!w)
		w = 80;
	return w < 40 ? 40 : w > 1000 ? 1000 : w;
}

static int width_of(const insp_opts *o) { return o && o->width ? o->width : INSP_WIDTH_DEFAULT; }

/* The last component of a path, trailing slashes ignored ("a/b/" -> "b"). */
static const char *path_name(const char *path, char *buf, size_t n)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	size_t b = len;
	while (b > 0 && path[b - 1] != '/')
		b--;
	size_t k = len - b < n - 1 ? len - b : n - 1;
	memcpy(buf, path + b, k);
	buf[k] = 0;
	return buf;
}

const char *insp_model_name(const qtk_model *m, char *buf, size_t n)
{
	const qtk_kv *kv = qtk_kv_find(m, "general.name");
	if (kv && kv->val.type == QTK_V_STR && kv->val.v.str.len) {
		snprintf(buf, n, "%s", kv->val.v.str.s);
		return buf;
	}
	return path_name(m->path, buf, n);
}

/* The first `cells` characters of s (UTF-8, already escaped); "..." marks a cut. */
static void cut_cells(char *s, size_t cells)
{
	size_t c = 0, i = 0;
	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xC0) == 0x80)
			continue;
		if (c == cells) {
			break;
		}
		c++;
	}
	if (!s[i])
		return;
	/* step back 3 characters for the mark */
	size_t back = 0;
	while (i > 0 && back < 3) {
		i--;
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			back++;
	}
	memcpy(s + i, "...", 4);
}

/* The architecture and the quantization a Hugging Face config.json declares. */
static void hf_header(const qtk_model *m, FILE *out)
{
	const qtk_blob *b = qtk_blob_find(m, "config.json");
	if (!b)
		return;
	cJSON *root = cJSON_ParseWithLength((const char *)b->data, b->len);
	if (!root)
		return;
	char sb[512], sb2[512];
	const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "architectures");
	const cJSON *a0 = cJSON_IsArray(ar) ? cJSON_GetArrayItem(ar, 0) : NULL;
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
	if (cJSON_IsString(a0) || cJSON_IsString(mt))
		fprintf(out, "architecture: %s%s%s%s\n", cJSON_IsString(a0) ? insp_safe(a0->valuestring, sb, sizeof sb) : "",
			cJSON_IsString(a0) && cJSON_IsString(mt) ? " (" : "",
			cJSON_IsString(mt) ? insp_safe(mt->valuestring, sb2, sizeof sb2) : "",
			cJSON_IsString(a0) && cJSON_IsString(mt) ? ")" : "");
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
	if (!cJSON_IsObject(q))
		q = cJSON_GetObjectItemCaseSensitive(root, "compression_config");
	const cJSON *mlx = cJSON_GetObjectItemCaseSensitive(root, "quantization");
	const char *method = NULL;
	if (cJSON_IsObject(q)) {
		const cJSON *qm = cJSON_GetObjectItemCaseSensitive(q, "quant_method");
		method = cJSON_IsString(qm) ? qm->valuestring : cJSON_IsObject(mlx) ? "mlx" : "unnamed";
	} else if (cJSON_IsObject(mlx)) {
		q = mlx;
		method = "mlx";
	}
	if (!method) {
		fprintf(out, "quantization: none declared in config.json\n");
		cJSON_Delete(root);
		return;
	}
	fprintf(out, "quantization: %s", insp_safe(method, sb, sizeof sb));
	/* the details the schemes name differently; for compressed-tensors the first group's weights */
	const cJSON *w = q, *cg = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
	if (cJSON_IsObject(cg) && cg->child && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(cg->child, "weights")))
		w = cJSON_GetObjectItemCaseSensitive(cg->child, "weights");
	static const char *const strs[] = {"format", "quant_algo", "bnb_4bit_quant_type", "strategy", "type", "fmt"};
	for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(i < 3 ? q : w, strs[i]);
		if (cJSON_IsString(x))
			fprintf(out, ", %s %s", strs[i], insp_safe(x->valuestring, sb, sizeof sb));
	}
	static const char *const bits[] = {"bits", "w_bit", "num_bits"}, *const grp[] = {"group_size", "q_group_size"};
	for (size_t i = 0; i < 3; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(w, bits[i]);
		if (cJSON_IsNumber(x)) {
			fprintf(out, ", %g-bit", x->valuedouble);
			break;
		}
	}
	for (size_t i = 0; i < 2; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(w, grp[i]);
		if (cJSON_IsNumber(x)) {
			fprintf(out, ", group %g", x->valuedouble);
			break;
		}
	}
	const cJSON *l4 = cJSON_GetObjectItemCaseSensitive(q, "load_in_4bit"), *l8 = cJSON_GetObjectItemCaseSensitive(q, "load_in_8bit");
	if (cJSON_IsTrue(l4))
		fprintf(out, ", 4-bit");
	else if (cJSON_IsTrue(l8))
		fprintf(out, ", 8-bit");
	fputc('\n', out);
	cJSON_Delete(root);
}

/* The header lines of --summary: name, file type (GGUF) or architecture and quantization
 * (a config.json). */
static void summary_header(const qtk_model *m, FILE *out)
{
	char nb[512], sb[1024], fb[64];
	fprintf(out, "name: %s\n", insp_safe(insp_model_name(m, nb, sizeof nb), sb, sizeof sb));
	const qtk_kv *ft = qtk_kv_find(m, "general.file_type");
	uint64_t v;
	if (ft && qtk_value_as_u64(&ft->val, &v)) {
		const char *fn = ftype_name(v, fb, sizeof fb);
		fprintf(out, "file type: %s (general.file_type %llu)\n", fn ? fn : "unknown to llama.cpp", (unsigned long long)v);
	}
	hf_header(m, out);
}

/* ---- --metadata ------------------------------------------------------------------------- */

/* A value as one line of text: scalars as they are, arrays as their first items. */
static void md_value(const qtk_value *v, qtk_buf *b)
{
	char tmp[64], sb[1024];
	if (v->type == QTK_V_STR) {
		qtk_buf_puts(b, qtk_text_safe(v->v.str.s, QTK_TEXT_NARROW, sb, sizeof sb));
		return;
	}
	if (v->type != QTK_V_ARR) {
		qtk_value x = *v;
		if (x.type == QTK_V_BOOL)
			snprintf(tmp, sizeof tmp, "%s", x.v.u ? "true" : "false");
		else if (x.type == QTK_V_F32 || x.type == QTK_V_F64)
			snprintf(tmp, sizeof tmp, "%.9g", x.v.f);
		else if (x.type == QTK_V_I8 || x.type == QTK_V_I16 || x.type == QTK_V_I32 || x.type == QTK_V_I64)
			snprintf(tmp, sizeof tmp, "%lld", (long long)x.v.i);
		else
			snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)x.v.u);
		qtk_buf_puts(b, tmp);
		return;
	}
	qtk_buf_puts(b, "[");
	size_t es = qtk_value_size(v->elem);
	for (uint64_t k = 0; k < v->n && k < 8 && b->len < 1024; k++) {
		if (k)
			qtk_buf_puts(b, ", ");
		if (v->elem == QTK_V_STR) {
			const qtk_str *s = v->arr;
			qtk_buf_puts(b, "\"");
			qtk_buf_puts(b, qtk_text_safe(s[k].s, QTK_TEXT_NARROW, sb, 256));
			qtk_buf_puts(b, "\"");
		} else if (v->elem == QTK_V_ARR) {
			qtk_buf_puts(b, "[...]");
		} else {
			qtk_value x = {0};
			qtk_value_from_le(&x, v->elem, (const uint8_t *)v->arr + k * es);
			md_value(&x, b);
		}
	}
	if (v->n > 8 || (v->n && b->len >= 1024))
		qtk_buf_puts(b, ", ...");
	qtk_buf_puts(b, "]");
}

static void md_type(const qtk_value *v, char *buf, size_t n)
{
	if (v->type == QTK_V_ARR)
		snprintf(buf, n, "%s[%llu]", qtk_value_type_name(v->elem), (unsigned long long)v->n);
	else
		snprintf(buf, n, "%s", qtk_value_type_name(v->type));
}

static const char *json_type(const cJSON *j, char *buf, size_t n)
{
	if (cJSON_IsArray(j))
		snprintf(buf, n, "array[%d]", cJSON_GetArraySize(j));
	else if (cJSON_IsObject(j))
		snprintf(buf, n, "object{%d}", cJSON_GetArraySize(j));
	else
		snprintf(buf, n, "%s", cJSON_IsString(j) ? "string" : cJSON_IsNumber(j) ? "number" : cJSON_IsBool(j) ? "bool" : "null");
	return buf;
}

/* One listing line: index, key, type, value cut to the width. */
static void md_line(FILE *out, size_t idx, const char *key, int kw, const char *type, int tw, char *val, int width)
{
	char kb[1024];
	int room = width - 6 - kw - 2 - tw - 2;
	if (room < 16)
		room = 16;
	cut_cells(val, (size_t)room);
	const char *k = qtk_text_safe(key, QTK_TEXT_NARROW, kb, sizeof kb);
	fprintf(out, "%4zu  %-*s  %-*s  %s\n", idx, kw, k, tw, type, val);
}

static bool md_side_file(const qtk_blob *b)
{
	size_t n = strlen(b->name);
	return n >= 5 && !strcmp(b->name + n - 5, ".json") && strncmp(b->name, "tokenizer", 9) && strcmp(b->name, "vocab.json");
}

static int metadata_json(qtk_model *m, FILE *out)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "schema_version", 1);
	cJSON_AddItemToObject(r, "file", json_str(m->path, strlen(m->path)));
	cJSON_AddStringToObject(r, "format", qtk_model_format(m));
	cJSON *keys = cJSON_AddArrayToObject(r, "keys");
	for (size_t i = 0; i < m->nkv; i++) {
		const qtk_kv *kv = &m->kv[i];
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToObject(e, "key", json_str(kv->key, strlen(kv->key)));
		cJSON_AddStringToObject(e, "type", qtk_value_type_name(kv->val.type));
		if (kv->val.type == QTK_V_ARR) {
			cJSON_AddStringToObject(e, "elem_type", qtk_value_type_name(kv->val.elem));
			cJSON_AddNumberToObject(e, "count", (double)kv->val.n);
		}
		cJSON_AddItemToObject(e, "value", json_value(&kv->val));
		uint64_t v;
		char fb[64];
		if (!strcmp(kv->key, "general.file_type") && qtk_value_as_u64(&kv->val, &v) && ftype_name(v, fb, sizeof fb))
			cJSON_AddStringToObject(e, "file_type_name", fb);
		cJSON_AddItemToArray(keys, e);
	}
	cJSON *files = cJSON_AddObjectToObject(r, "files");
	for (size_t i = 0; i < m->nblobs; i++) {
		const qtk_blob *b = &m->blobs[i];
		if (!md_side_file(b))
			continue;
		cJSON *j = cJSON_ParseWithLength((const char *)b->data, b->len);
		if (j)
			cJSON_AddItemToObject(files, b->name, j);
	}
	return json_emit(m, r, out);
}

int report_metadata(qtk_model *m, FILE *out, const insp_opts *o)
{
	if (o->json)
		return metadata_json(m, out);
	int width = width_of(o);
	char pb[2048], tb[64], fb[64];
	int kw = 3, tw = 4;
	for (size_t i = 0; i < m->nkv; i++) {
		int n = (int)qtk_text_len(m->kv[i].key, strlen(m->kv[i].key), QTK_TEXT_NARROW);
		kw = n > kw ? n : kw;
		md_type(&m->kv[i].val, tb, sizeof tb);
		tw = (int)strlen(tb) > tw ? (int)strlen(tb) : tw;
	}
	if (kw > width / 3)
		kw = width / 3;
	fprintf(out, "%s: %s, %zu metadata keys\n\n", insp_safe(m->path, pb, sizeof pb), qtk_model_format(m), m->nkv);
	fprintf(out, "%4s  %-*s  %-*s  %s\n", "#", kw, "key", tw, "type", "value");
	for (size_t i = 0; i < m->nkv; i++) {
		const qtk_kv *kv = &m->kv[i];
		qtk_buf b = {0};
		md_value(&kv->val, &b);
		uint64_t v;
		if (!strcmp(kv->key, "general.file_type") && qtk_value_as_u64(&kv->val, &v) && ftype_name(v, fb, sizeof fb)) {
			qtk_buf_puts(&b, " (");
			qtk_buf_puts(&b, fb);
			qtk_buf_puts(&b, ")");
		}
		md_type(&kv->val, tb, sizeof tb);
		char *val = b.p ? (char *)b.p : NULL;
		if (!val) {
			qtk_buf_puts(&b, "");
			val = b.p ? (char *)b.p : "";
		}
		if (b.p)
			md_line(out, i + 1, kv->key, kw, tb, tw, val, width);
		qtk_buf_free(&b);
	}
	/* the JSON side files of a Hugging Face directory: their top-level keys */
	for (size_t i = 0; i < m->nblobs; i++) {
		const qtk_blob *bl = &m->blobs[i];
		if (!md_side_file(bl))
			continue;
		cJSON *j = cJSON_ParseWithLength((const char *)bl->data, bl->len);
		if (!cJSON_IsObject(j)) {
			cJSON_Delete(j);
			continue;
		}
		fprintf(out, "\n%s (%d keys)\n", insp_safe(bl->name, pb, sizeof pb), cJSON_GetArraySize(j));
		int jkw = 3, jtw = 4;
		const cJSON *e;
		cJSON_ArrayForEach(e, j) {
			int n = (int)qtk_text_len(e->string, strlen(e->string), QTK_TEXT_NARROW);
			jkw = n > jkw ? n : jkw;
			jtw = (int)strlen(json_type(e, tb, sizeof tb)) > jtw ? (int)strlen(tb) : jtw;
		}
		if (jkw > width / 3)
			jkw = width / 3;
		size_t k = 0;
		cJSON_ArrayForEach(e, j) {
			char *txt = cJSON_PrintUnformatted(e);
			char *safe = txt ? qtk_text_dup(txt, strlen(txt), QTK_TEXT_NARROW) : NULL;
			if (safe)
				md_line(out, ++k, e->string, jkw, json_type(e, tb, sizeof tb), jtw, safe, width);
			qtk_free(safe);
			cJSON_free(txt);
		}
		cJSON_Delete(j);
	}
	return 0;
}
