/* checks.c - qverify's checks: one function each, run in table order for the chosen mode. */
#include "verify.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------ */

void qv_result(vstate *s, const char *check, const char *status, const char *fmt, ...)
{
	if (s->nr >= sizeof s->r / sizeof *s->r)
		return;
	vresult *r = &s->r[s->nr++];
	r->check = check;
	r->status = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof r->detail, fmt, ap);
	va_end(ap);
	if (!strcmp(status, "failed"))
		s->status = 1;
}

void qv_detail(vtensor *t, const char *fmt, ...)
{
	char b[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, sizeof b, fmt, ap);
	va_end(ap);
	qtk_free(t->detail);
	t->detail = qtk_strdup(b);
}

vtensor *qv_tensor(vstate *s, const char *name, const char *stored, const char *status, bool failed)
{
	if (s->nt == s->capt) {
		size_t nc = s->capt ? s->capt * 2 : 64;
		vtensor *n = qtk_realloc(s->t, nc * sizeof *n);
		if (!n)
			return NULL;
		s->t = n;
		s->capt = nc;
	}
	vtensor *t = &s->t[s->nt];
	memset(t, 0, sizeof *t);
	t->name = qtk_strdup(name);
	t->stored = stored ? qtk_strdup(stored) : NULL;
	if (!t->name || (stored && !t->stored)) {
		qtk_free(t->name);
		qtk_free(t->stored);
		return NULL;
	}
	t->status = status;
	t->failed = failed;
	t->sqnr_db = NAN;
	t->rmse = NAN;
	t->bias = NAN;
	s->nt++;
	if (failed)
		s->status = 1;
	return t;
}

static int oom(vstate *s) { return qtk_err_set(&s->err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

/* Digest progress: bytes read of the total, with the tensor being read. */
static void progress(void *ctx, const char *tensor, uint64_t done, uint64_t total)
{
	(void)ctx;
	cli_progress_bytes(tensor, done, total);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void short_hex(const uint8_t *d, char *out)
{
	qtk_hex(d, 8, out); /* the first 16 hex digits */
}

/* ---- checks ------------------------------------------------------------------------------- */

/* Open FILE (and SOURCE): every header, size and offset is validated by the reader. */
static int chk_structure(vstate *s)
{
	s->m = qtk_open(s->o->file, &s->err);
	if (!s->m)
		return s->err.code ? s->err.code : QTK_E_INTERNAL;
	uint64_t bytes = 0;
	for (size_t i = 0; i < s->m->ntensors; i++)
		bytes += s->m->tensors[i].n_bytes;
	qv_result(s, "structure", "ok", "%s, %zu tensors, %llu bytes of tensor data, %u file%s",
		  qtk_model_format(s->m), s->m->ntensors, (unsigned long long)bytes, s->m->nfiles,
		  s->m->nfiles == 1 ? "" : "s");
	if (s->o->mode == MODE_AGAINST) {
		s->src = qtk_open(s->o->source, &s->err);
		if (!s->src)
			return s->err.code ? s->err.code : QTK_E_INTERNAL;
		/* the source's own record (tens of MB at 100,000 tensors) takes no part in --against */
		qtk_kv_remove(s->src, QTK_PROV_KEY);
	}
	return 0;
}

/* Containers that digest their own parts (QPK, C.2 row 42): every part's SHA-256, every tensor named. */
static int chk_container_digests(vstate *s)
{
	if (!qtk_model_can_verify(s->m))
		return 0;
	size_t bad = 0;
	for (size_t i = 0; i < s->m->ntensors; i++) {
		qtk_err_clear(&s->m->err);
		int rc = qtk_model_verify_tensor(s->m, i);
		if (rc == QTK_E_DATA) {
			char canon[QTK_CAP_NAME + 64];
			int qk;
			qtk_canon_name(s->m, s->m->tensors[i].name, canon, sizeof canon, &qk);
			vtensor *t = qv_tensor(s, canon, s->m->tensors[i].name, "changed", true);
			if (!t)
				return oom(s);
			qv_detail(t, "stored part digest: %.200s", s->m->err.msg);
			bad++;
		} else if (rc) {
			s->err = s->m->err;
			return rc;
		}
		cli_progress("part digests", i + 1, s->m->ntensors);
	}
	cli_progress_end();
	if (bad)
		qv_result(s, "part_digests", "failed", "%zu of %zu tensors do not match the part SHA-256 stored in the file",
			  bad, s->m->ntensors);
	else
		qv_result(s, "part_digests", "ok", "every part of %zu tensors matches its stored SHA-256", s->m->ntensors);
	return 0;
}

/* FILE's own record (GGUF/QPK key, safetensors __metadata__, qtk-provenance.json): strict parse. */
static int chk_embedded(vstate *s)
{
	size_t len;
	const char *txt = qtk_prov_find(s->m, &len, &s->embedded_where);
	if (!txt) {
		if (s->o->mode == MODE_EMBEDDED)
			qv_result(s, "provenance", "note", "no embedded provenance record");
		return 0;
	}
	int rc = qtk_prov_parse(txt, len, s->o->file, &s->embedded, &s->err);
	if (rc) {
		char sub[256];
		snprintf(sub, sizeof sub, "embedded record (%s)%s%.200s", s->embedded_where, s->err.subject[0] ? ": " : "",
			 s->err.subject);
		snprintf(s->err.subject, sizeof s->err.subject, "%s", sub);
		return rc;
	}
	if (s->o->mode == MODE_EMBEDDED) {
		s->rec = s->embedded;
		s->rec_name = "the embedded record";
		const cJSON *src = cJSON_GetObjectItemCaseSensitive(s->embedded, "source");
		const cJSON *tr = cJSON_GetObjectItemCaseSensitive(s->embedded, "transform");
		const cJSON *parent = src ? cJSON_GetObjectItemCaseSensitive(src, "record") : NULL;
		qv_result(s, "provenance", "ok", "record in %s: %s%s%s from %s%s%s%s", s->embedded_where,
			  tr ? jstr(tr, "kind") : "unknown", tr ? " by " : "", tr ? jstr(tr, "method") : "",
			  src ? jstr(src, "container") : "unknown source", src && jstr(src, "name") ? " '" : "",
			  src && jstr(src, "name") ? jstr(src, "name") : "", src && jstr(src, "name") ? "'" : "");
		if (cJSON_IsObject(parent))
			qv_result(s, "chain", "note", "the source carried its own record (embedded as source.record)");
		const char *rc_cont = jstr(cJSON_GetObjectItemCaseSensitive(s->embedded, "output"), "container");
		if (rc_cont && strcmp(rc_cont, qtk_model_format(s->m)))
			qv_result(s, "container", "note", "the record describes a %s container; this is %s (re-containered)",
				  rc_cont, qtk_model_format(s->m));
	}
	return 0;
}

/* --record REC.json: read and validate strictly (exit 3 naming the field when malformed). */
static int chk_record(vstate *s)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = qtk_slurp(s->o->record, QTK_PROV_CAP, &buf, &len, &s->err);
	if (rc)
		return rc;
	rc = qtk_prov_parse((const char *)buf, len, s->o->record, &s->rec, &s->err);
	qtk_free(buf);
	if (rc)
		return rc;
	s->rec_name = s->o->record;
	qv_result(s, "record", "ok", "%s is a valid record (version %d)", s->o->record, QTK_PROV_VERSION);
	return 0;
}

static void *hash_files(void *arg)
{
	vstate *s = arg;
	s->frc = qtk_hash_model_files(s->m, &s->files, &s->ferr);
	return NULL;
}

/* The digest scheme of a record's root (its "tensor_root" object): the record's own; a
 * deployment record made now, or a root without a known scheme: the current one. */
static int root_scheme(const cJSON *root)
{
	const int v = qtk_digest_scheme_of(jstr(root, "scheme"));
	return v ? v : QTK_DIGEST_V4;
}

static int rec_scheme(const vstate *s)
{
	const cJSON *out = s->rec ? cJSON_GetObjectItemCaseSensitive(s->rec, "output") : NULL;
	return root_scheme(out ? cJSON_GetObjectItemCaseSensitive(out, "tensor_root") : NULL);
}

/* Content digests of FILE: both tiers of every tensor and both roots. The file-level
 * SHA-256 (--record, --emit-record) is computed at the same time on another thread. */
static int chk_digests(vstate *s)
{
	if ((s->o->mode & (MODE_EMBEDDED | MODE_SIGVERIFY)) && !s->rec)
		return 0;
	if (s->o->mode & (MODE_RECORD | MODE_EMIT | MODE_SIGN)) {
		qtk_err_clear(&s->ferr);
		s->fthread_on = pthread_create(&s->fthread, NULL, hash_files, s) == 0;
	}
	/* checks need the decoded tier only where the encoded one differs (chk_tensors) */
	/* the file hashing thread takes one of the cores */
	int threads = s->o->threads > 0 ? s->o->threads : qtk_cpu_count();
	if (s->fthread_on && threads > 1)
		threads--;
	bool full = s->o->mode & (MODE_EMIT | MODE_SIGN); /* a record is written: both tiers, every tensor */
	qtk_digest_opts o = {.scheme = rec_scheme(s), .threads = threads, .enc_only = !full, .keep_going = !full,
			     .progress_named = cli_progress_enabled() ? progress : NULL, .progress_ctx = (void *)"digests"};
	int rc = qtk_digest_model(s->m, &o, &s->d, &s->err);
	cli_progress_end();
	if (rc)
		return rc;
	s->have_digests = true;
	return 0;
}

typedef struct need_ctx {
	vstate *s;
	bool *sel;
	const size_t *tensor_of;
	bool *done;
	size_t need;
} need_ctx;

/* One tensor of the record: its file tensor needs the decoded tier when the encoded differs. */
static int need_one(void *ctx, const cJSON *c)
{
	need_ctx *x = ctx;
	const char *name = jstr(c, "name");
	uint8_t enc[32];
	const qtk_leaf *l = name ? qtk_digests_find(&x->s->d, name) : NULL;
	if (!l || x->done[l - x->s->d.leaf] || !x->tensor_of[l - x->s->d.leaf] || !qtk_prov_unhex(jstr(c, "encoded"), enc))
		return 0;
	x->done[l - x->s->d.leaf] = true;
	size_t i = x->tensor_of[l - x->s->d.leaf] - 1;
	if (!l->bad && memcmp(enc, l->enc, 32) && !l->has_dec && !x->sel[i]) {
		x->sel[i] = true;
		x->need++;
	}
	return 0;
}

/* Add the decoded tier to the leaves whose encoded digest differs from the record's. */
static int decoded_where_needed(vstate *s, const cJSON *ts)
{
	size_t n = s->m->ntensors, need = 0;
	bool *sel = qtk_calloc(n ? n : 1, sizeof *sel);
	/* leaf -> its tensor (+1, 0: none) and whether the record named it already: one pass over
	 * the tensors and one over the record, each name found by binary search */
	size_t *tensor_of = qtk_calloc(s->d.n ? s->d.n : 1, sizeof *tensor_of);
	bool *done = qtk_calloc(s->d.n ? s->d.n : 1, sizeof *done);
	if (!sel || !tensor_of || !done) {
		qtk_free(sel);
		qtk_free(tensor_of);
		qtk_free(done);
		return oom(s);
	}
	for (size_t i = 0; i < n; i++) {
		char b[QTK_CAP_NAME + 64];
		int qk;
		qtk_canon_name(s->m, s->m->tensors[i].name, b, sizeof b, &qk);
		const qtk_leaf *l = qtk_digests_find(&s->d, b);
		if (l && !tensor_of[l - s->d.leaf])
			tensor_of[l - s->d.leaf] = i + 1;
	}
	need_ctx nc = {s, sel, tensor_of, done, 0};
	int rc = qtk_prov_list_each(ts, need_one, &nc);
	need = nc.need;
	qtk_free(tensor_of);
	qtk_free(done);
	if (rc)
		need = 0, rc = oom(s);
	if (need) {
		qtk_digests d2;
		qtk_digest_opts o = {.scheme = s->d.scheme, .threads = s->o->threads, .select = sel,
				     .progress_named = cli_progress_enabled() ? progress : NULL,
				     .progress_ctx = (void *)"decoded digests"};
		rc = qtk_digest_model(s->m, &o, &d2, &s->err);
		cli_progress_end();
		for (size_t i = 0; !rc && i < d2.n; i++) {
			qtk_leaf *dst = (qtk_leaf *)qtk_digests_find(&s->d, d2.leaf[i].name);
			if (dst && d2.leaf[i].has_dec) {
				memcpy(dst->dec, d2.leaf[i].dec, 32);
				dst->has_dec = true;
			}
		}
		if (!rc)
			qtk_digests_free(&d2);
	}
	qtk_free(sel);
	return rc;
}

typedef struct tens_ctx {
	vstate *s;
	bool *seen;
	size_t n_ok, n_re, n_bad;
} tens_ctx;

/* One tensor of the record against FILE's leaf of that name. */
static int tens_one(void *ctx, const cJSON *c)
{
	tens_ctx *x = ctx;
	vstate *s = x->s;
	const char *name = jstr(c, "name");
	uint8_t enc[32], dec[32];
	qtk_prov_unhex(jstr(c, "encoded"), enc);
	qtk_prov_unhex(jstr(c, "decoded"), dec);
	const qtk_leaf *l = qtk_digests_find(&s->d, name);
	vtensor *t;
	if (!l) {
		t = qv_tensor(s, name, NULL, "missing", true);
		if (t)
			qv_detail(t, "in the record, not in the file");
		x->n_bad++;
	} else if (x->seen[l - s->d.leaf] = true, l->bad) {
		t = qv_tensor(s, name, l->stored, "changed", true);
		if (t)
			qv_detail(t, "unreadable: %.200s", l->bad_msg ? l->bad_msg : "out of memory");
		x->n_bad++;
	} else if (!memcmp(l->enc, enc, 32)) {
		t = qv_tensor(s, name, l->stored, "ok", false);
		x->n_ok++;
	} else if (l->has_dec && !memcmp(l->dec, dec, 32)) {
		t = qv_tensor(s, name, l->stored, "re-encoded", false);
		const cJSON *pq = cJSON_GetObjectItemCaseSensitive(c, "permute_qk");
		if (t && (pq != NULL) != (l->qk_heads > 0))
			qv_detail(t, "same values, Q/K rows in %s order (permute_qk), %s -> %s",
				 l->qk_heads > 0 ? "llama.cpp" : "Hugging Face", jstr(c, "encoding"), l->enc_id);
		else if (t)
			qv_detail(t, "same values, different bytes: %s -> %s",
				 jstr(c, "encoding"), l->enc_id);
		x->n_re++;
	} else {
		char a[17], b[17];
		short_hex(enc, a);
		short_hex(l->enc, b);
		t = qv_tensor(s, name, l->stored, "changed", true);
		const char *re = jstr(c, "encoding");
		if (t && s->d.scheme >= QTK_DIGEST_V3 && re && strcmp(re, l->enc_id) &&
		    qtk_digest_id_family(re, s->d.scheme) != qtk_digest_id_family(l->enc_id, s->d.scheme))
			qv_detail(t,
				 "content differs: record %s... (%.32s), file %s... (%.32s); digest v%d keeps %s "
				 "apart, qverify --against compares values",
				 a, re, b, l->enc_id, s->d.scheme,
				 s->d.scheme >= QTK_DIGEST_V4 ? "integer and affine (k-quant) layouts" : "integer layouts");
		else if (t)
			qv_detail(t, "content differs: record %s..., file %s... (%s)", a, b,
				 l->enc_id);
		x->n_bad++;
	}
	return t ? 0 : QTK_E_IO;
}

/* Every tensor of the record against FILE: encoded digest equal, or decoded equal (re-encoded). */
static int chk_tensors(vstate *s)
{
	if (!s->rec)
		return 0;
	const cJSON *out = cJSON_GetObjectItemCaseSensitive(s->rec, "output");
	const cJSON *ts = cJSON_GetObjectItemCaseSensitive(out, "tensors");
	if (!ts) {
		qv_result(s, "tensors", "skipped", "%s lists no tensors (roots only)", s->rec_name);
		return 0;
	}
	size_t n_ok = 0, n_re = 0, n_bad = 0;
	bool *seen = qtk_calloc(s->d.n ? s->d.n : 1, sizeof *seen);
	if (!seen)
		return oom(s);
	int rc = decoded_where_needed(s, ts);
	if (rc) {
		qtk_free(seen);
		return rc;
	}
	tens_ctx tc = {s, seen, 0, 0, 0};
	rc = qtk_prov_list_each(ts, tens_one, &tc);
	n_ok = tc.n_ok, n_re = tc.n_re, n_bad = tc.n_bad;
	if (rc) {
		qtk_free(seen);
		return oom(s);
	}
	for (size_t i = 0; i < s->d.n; i++)
		if (!seen[i]) {
			vtensor *t = qv_tensor(s, s->d.leaf[i].name, s->d.leaf[i].stored, "extra", true);
			if (!t) {
				qtk_free(seen);
				return oom(s);
			}
			qv_detail(t, "in the file, not in the record");
			n_bad++;
		}
	qtk_free(seen);
	if (n_bad)
		qv_result(s, "tensors", "failed", "%zu of %zu tensors differ from %s", n_bad, n_ok + n_re + n_bad,
			  s->rec_name);
	else if (n_re)
		qv_result(s, "tensors", "ok", "%zu tensors match %s (%zu re-encoded with the same values)", n_ok + n_re,
			  s->rec_name, n_re);
	else
		qv_result(s, "tensors", "ok", "%zu tensors match %s", n_ok, s->rec_name);
	return 0;
}

/* Recompute FILE's digests with both tiers (a record that gives roots only). */
static int full_decoded(vstate *s)
{
	qtk_digests d2;
	qtk_digest_opts o = {.scheme = s->d.scheme, .threads = s->o->threads,
			     .progress_named = cli_progress_enabled() ? progress : NULL,
			     .progress_ctx = (void *)"decoded digests"};
	int rc = qtk_digest_model(s->m, &o, &d2, &s->err);
	cli_progress_end();
	if (rc)
		return rc;
	qtk_digests_free(&s->d);
	s->d = d2;
	return 0;
}

/* The roots: equal roots prove equal content even for records that list no tensors. */
static int chk_roots(vstate *s)
{
	if (!s->rec)
		return 0;
	const cJSON *root = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s->rec, "output"),
							       "tensor_root");
	if (!root) {
		qv_result(s, "tensor_root", "skipped", "%s has no tensor_root", s->rec_name);
		return 0;
	}
	uint8_t enc[32], dec[32];
	int rc_full = 0;
	qtk_prov_unhex(jstr(root, "encoded"), enc);
	qtk_prov_unhex(jstr(root, "decoded"), dec);
	char h[65];
	bool listed = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s->rec, "output"), "tensors");
	if (!memcmp(enc, s->d.enc_root, 32)) {
		qtk_hex(enc, 32, h);
		qv_result(s, "tensor_root", "ok", "encoded root %s", h);
	} else if (listed) {
		/* the per-tensor check decided; the roots agree per tier only when no tensor changed encoding */
		qv_result(s, "tensor_root", s->status ? "failed" : "note", "%s", s->status ? "the file's content differs from the record's"
			  : "the encoded root differs (tensors were re-encoded); content verified tensor by tensor");
	} else if (!s->d.complete && (rc_full = full_decoded(s)) != 0) {
		return rc_full;
	} else if (!memcmp(dec, s->d.dec_root, 32)) {
		qtk_hex(dec, 32, h);
		qv_result(s, "tensor_root", "ok", "decoded root %s (the encoding changed)", h);
	} else {
		qtk_hex(s->d.enc_root, 32, h);
		qv_result(s, "tensor_root", "failed", "the file's roots differ from %s (file: encoded %s)", s->rec_name,
			  h);
	}
	return 0;
}

/* File-level SHA-256: a mismatch alone means "container changed"; --files makes it a failure. */
static int chk_files(vstate *s)
{
	int rc;
	if (s->fthread_on) {
		pthread_join(s->fthread, NULL);
		s->fthread_on = false;
		if ((rc = s->frc))
			s->err = s->ferr;
	} else {
		rc = qtk_hash_model_files(s->m, &s->files, &s->err);
	}
	if (rc)
		return rc;
	s->have_files = true;
	if (s->o->mode != MODE_RECORD)
		return 0;
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s->rec, "output"), "files");
	const char *fail = s->o->files ? "failed" : "note";
	if (!fs) {
		qv_result(s, "files", fail, "%s lists no file hashes%s", s->rec_name,
			  s->o->files ? " (--files needs them)" : "");
		return 0;
	}
	size_t nrec = (size_t)cJSON_GetArraySize(fs), same = 0;
	char first[512] = "";
	for (const cJSON *c = fs->child; c; c = c->next) {
		const char *p = jstr(c, "path");
		uint8_t sha[32];
		uint64_t size = 0;
		qtk_prov_unhex(jstr(c, "sha256"), sha);
		qtk_json_u64(cJSON_GetObjectItemCaseSensitive(c, "size"), &size);
		const qtk_fileinfo *f = NULL;
		for (size_t i = 0; i < s->files.n && !f; i++)
			if (!strcmp(s->files.f[i].path, p))
				f = &s->files.f[i];
		for (size_t i = 0; i < s->files.n && !f; i++) /* renamed, same bytes */
			if (s->files.f[i].size == size && !memcmp(s->files.f[i].sha256, sha, 32))
				f = &s->files.f[i];
		if (f && f->size == size && !memcmp(f->sha256, sha, 32))
			same++;
		else if (!first[0])
			snprintf(first, sizeof first, "%s: %s", p, !f ? "absent" : f->size != size ? "size differs" : "SHA-256 differs");
	}
	if (same == nrec && nrec == s->files.n)
		qv_result(s, "files", "ok", "%zu file%s match byte for byte", nrec, nrec == 1 ? "" : "s");
	else if (!first[0])
		qv_result(s, "files", fail, "container changed: the file set differs (%zu in the record, %zu here)", nrec,
			  s->files.n);
	else
		qv_result(s, "files", fail, "container changed: %s", first);
	return 0;
}

typedef struct emit_out {
	qtk_err *err;
	uint64_t n; /* bytes printed */
} emit_out;

static int stdout_put(void *ctx, const uint8_t *p, size_t n)
{
	emit_out *eo = ctx;
	if (fwrite(p, 1, n, stdout) != n)
		return qtk_err_set(eo->err, QTK_E_IO, "<stdout>", -1, NULL, "cannot write the record: %s", strerror(errno));
	eo->n += n;
	return 0;
}

/* --emit-record: the deployment record of FILE, printed as it is made (every check before it
 * passed: the loop stops at a failure; tens of MB at 100,000 tensors are never held whole);
 * --sign makes it in the statement it signs; --emit-bom prints no record. */
static int chk_emit(vstate *s)
{
	if (s->o->bom || s->o->mode == MODE_SIGN) /* --sign writes the record into its statement */
		return 0;
	emit_out eo = {&s->err, 0};
	int rc = qtk_prov_emit_stream(s->m, &s->d, &s->files, s->embedded, qtk_prov_now(), stdout_put, &eo, &s->err);
	if (!rc && (putchar('\n') == EOF || fflush(stdout)))
		rc = qtk_err_set(&s->err, QTK_E_IO, "<stdout>", -1, NULL, "cannot write the record: %s", strerror(errno));
	/* it embeds the file's own record: a large chained one can take it over the reader's cap */
	if (!rc && eo.n > QTK_PROV_CAP)
		cli_warn("the deployment record is %llu bytes, over the %u that --record and --sign read",
			 (unsigned long long)eo.n, QTK_PROV_CAP);
	return rc;
}

/* ---- --against ------------------------------------------------------------------------------- */

typedef struct cref {
	char *canon;
	size_t i;
} cref;

static int cref_cmp(const void *a, const void *b) { return strcmp(((const cref *)a)->canon, ((const cref *)b)->canon); }

static void cref_free(cref *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		qtk_free(v[i].canon);
	qtk_free(v);
}

static cref *canon_index(const qtk_model *m)
{
	cref *v = qtk_calloc(m->ntensors ? m->ntensors : 1, sizeof *v);
	for (size_t i = 0; v && i < m->ntensors; i++) {
		char b[QTK_CAP_NAME + 64];
		int qk;
		qtk_canon_name(m, m->tensors[i].name, b, sizeof b, &qk);
		v[i].i = i;
		if (!(v[i].canon = qtk_strdup(b))) {
			cref_free(v, i);
			return NULL;
		}
	}
	if (v && m->ntensors)
		qsort(v, m->ntensors, sizeof *v, cref_cmp);
	return v;
}

/* A tensor's leaf (both tiers), reading it in chunks. */
static int leaf_of(qtk_model *m, const qtk_tensor *t, qtk_leaf *l, qtk_err *e)
{
	enum { BS = 4 << 20 };
	int heads = 0;
	qtk_thash *h = NULL;
	uint8_t *buf = qtk_malloc(BS);
	int rc = buf ? 0 : qtk_err_set(e, QTK_E_IO, NULL, -1, t->name, "out of memory");
	rc = rc ? rc : qtk_family_qk_heads(m, t, &heads, e);
	rc = rc ? rc : qtk_thash_new(m, t, heads, &h, e);
	for (int p = 0; p < t->nparts && !rc; p++)
		for (uint64_t off = 0; off < t->parts[p].nbytes && !rc; off += BS) {
			size_t k = t->parts[p].nbytes - off < BS ? (size_t)(t->parts[p].nbytes - off) : BS;
			qtk_err_clear(&m->err);
			if ((rc = qtk_read_part(m, t, p, off, buf, k)))
				*e = m->err;
			rc = rc ? rc : qtk_thash_put(h, buf, k);
		}
	if (!rc) {
		rc = qtk_thash_end(h, l);
		h = NULL;
	}
	qtk_thash_free(h);
	qtk_free(buf);
	return rc;
}

static void leaf_clear(qtk_leaf *l)
{
	qtk_free(l->name);
	qtk_free(l->stored);
	memset(l, 0, sizeof *l);
}

static void fail_tensor(vstate *s, vtensor *t, const char *status, const char *detail)
{
	t->status = status;
	t->failed = true;
	s->status = 1;
	qv_detail(t, "%s", detail);
}

/* Compare values that have no F32 decoding (integers, F64, F8 ...) through their stored bytes. */
static int against_raw(vstate *s, const qtk_tensor *ft, const qtk_tensor *st, vtensor *t)
{
	qtk_leaf a, b;
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	int rc = leaf_of(s->m, ft, &a, &s->err);
	rc = rc ? rc : leaf_of(s->src, st, &b, &s->err);
	if (!rc && memcmp(a.enc, b.enc, 32))
		fail_tensor(s, t, "changed", "no F32 decoding and the stored values differ");
	leaf_clear(&a);
	leaf_clear(&b);
	return rc;
}

/* One tensor pair: exact (F32 bitwise) or SQNR. */
static int against_one(vstate *s, const qtk_tensor *ft, const qtk_tensor *st, vtensor *t)
{
	if (ft->ndim != st->ndim || memcmp(ft->shape, st->shape, sizeof ft->shape)) {
		fail_tensor(s, t, "changed", "shape differs from the source");
		return 0;
	}
	qtk_leaf la, lb;
	int rc = qtk_digest_leaf_meta(s->m, ft, &la, &s->err);
	rc = rc ? rc : qtk_digest_leaf_meta(s->src, st, &lb, &s->err);
	bool raw = !rc && (la.dec_kind == QTK_DEC_RAW || lb.dec_kind == QTK_DEC_RAW);
	leaf_clear(&la);
	leaf_clear(&lb);
	if (rc || raw)
		return rc ? rc : against_raw(s, ft, st, t);
	enum { N = 1 << 18 };
	qtk_vcursor *ca = NULL, *cb = NULL;
	float *a = qtk_malloc(N * sizeof *a), *b = qtk_malloc(N * sizeof *b);
	rc = a && b ? 0 : oom(s);
	rc = rc ? rc : qtk_vcursor_open(s->m, ft, &ca, &s->err);
	rc = rc ? rc : qtk_vcursor_open(s->src, st, &cb, &s->err);
	double sig = 0, noise = 0, mx = 0, dot = 0;
	uint64_t nval = 0;
	bool same = true;
	for (uint64_t done = 0; done < ft->n_params && !rc; done += N) {
		uint64_t k = ft->n_params - done < N ? ft->n_params - done : N;
		rc = qtk_vcursor_read(ca, a, k);
		rc = rc ? rc : qtk_vcursor_read(cb, b, k);
		if (!rc)
			nval += k;
		if (rc || !memcmp(a, b, (size_t)k * sizeof *a)) {
			for (uint64_t x = 0; x < k && !rc; x++) {
				sig += (double)b[x] * (double)b[x];
				dot += (double)b[x] * (double)b[x];
			}
			continue;
		}
		same = false;
		for (uint64_t x = 0; x < k; x++) {
			double r = b[x], d = (double)a[x] - r;
			sig += r * r;
			noise += d * d;
			dot += (double)a[x] * r;
			if (fabs(d) > mx)
				mx = fabs(d);
		}
	}
	qtk_vcursor_close(ca);
	qtk_vcursor_close(cb);
	qtk_free(a);
	qtk_free(b);
	if (rc || same) {
		t->status = "exact";
		t->rmse = 0;
		t->bias = 1;
		return rc;
	}
	double q = noise > 0 && sig > 0 && isfinite(noise) && isfinite(sig) ? 10.0 * log10(sig / noise)
		   : noise == 0 ? INFINITY : -INFINITY;
	t->sqnr_db = q;
	t->rmse = nval ? sqrt(noise / (double)nval) : NAN;
	t->bias = sig > 0 && isfinite(sig) && isfinite(dot) ? dot / sig : NAN;
	t->status = "lossy";
	qv_detail(t, "SQNR %.2f dB, RMSE %.6g, bias %.4f, max abs error %.6g", q, t->rmse, t->bias, mx);
	if (s->o->has_max_error && !(q >= s->o->max_error_db)) {
		char d[160];
		snprintf(d, sizeof d, "SQNR %.2f dB is below --max-error %.2f dB", q, s->o->max_error_db);
		fail_tensor(s, t, "below", d);
	} else if (!s->o->has_max_error) {
		double bpw = ft->n_params ? (double)ft->n_bytes * 8.0 / (double)ft->n_params : 0.0;
		double bar = qv_default_bar_db(bpw);
		if (!(q >= bar)) {
			char d[200];
			snprintf(d, sizeof d, "SQNR %.2f dB is below the default bar %.2f dB for %.2f bits per weight "
				 "(--max-error sets another)", q, bar, bpw);
			fail_tensor(s, t, "below", d);
		}
	}
	return 0;
}

/* The bar a lossy tensor must clear when --max-error is not given: what a working quantizer
 * reaches with b bits per weight, less a wide margin. Uniform quantization of well-scaled weights
 * gives about 6.02 dB per bit; real k-quants land within a few dB of it (Q4_K about 20 dB at
 * 4.5 bpw, Q8_0 about 40 dB). The bar is 6.02 b - 15 dB, at least 1 dB (a zeroed, transposed, shuffled
 * or sign-flipped tensor has noise as large as its signal or larger: 0 dB or less) and at most
 * 30 dB (float narrowing such as F32 -> F16 is far above it). */
double qv_default_bar_db(double bpw)
{
	double bar = 6.02 * bpw - 15.0;
	return bar < 1.0 ? 1.0 : bar > 30.0 ? 30.0 : bar;
}

static int chk_against_names(vstate *s);

/* --against SOURCE: match tensors by canonical name (GGUF <-> HF, Q/K un-permuted) and compare
 * values; a GGUF with stacked experts or generated tensors against an HF checkpoint is seen
 * through its family's view first. */
static int chk_against(vstate *s)
{
	qtk_model *fm = s->m, *sm = s->src, *view = NULL;
	qtk_hfmap *map = NULL;
	bool f_gguf = qtk_hfmap_restructured(fm) && !qtk_kv_find(sm, "general.architecture");
	bool s_gguf = qtk_hfmap_restructured(sm) && !qtk_kv_find(fm, "general.architecture");
	qtk_err e;
	qtk_err_clear(&e);
	if (f_gguf || s_gguf) {
		view = qtk_hfmap_hf_shaped(f_gguf ? fm : sm, &map, &e);
		if (!view && e.code)
			cli_verbose("%s: compared as stored (%s)", f_gguf ? fm->path : sm->path, e.msg);
		if (view && f_gguf)
			s->m = view;
		else if (view)
			s->src = view;
	}
	int rc = chk_against_names(s);
	s->m = fm;
	s->src = sm;
	qtk_close(view);
	qtk_hfmap_free(map);
	return rc;
}

static int chk_against_names(vstate *s)
{
	cref *fi = canon_index(s->m), *si = canon_index(s->src);
	int rc = fi && si ? 0 : oom(s);
	size_t nf = s->m->ntensors, ns = s->src->ntensors, a = 0, b = 0, n_exact = 0, n_lossy = 0, n_bad = 0;
	double worst = INFINITY;
	const char *worst_name = NULL;
	while (!rc && (a < nf || b < ns)) {
		int c = a == nf ? 1 : b == ns ? -1 : strcmp(fi[a].canon, si[b].canon);
		vtensor *t;
		if (c < 0) {
			t = qv_tensor(s, fi[a].canon, s->m->tensors[fi[a].i].name, "extra", true);
			if (t)
				qv_detail(t, "not in the source");
			a++;
			n_bad++;
		} else if (c > 0) {
			t = qv_tensor(s, si[b].canon, NULL, "missing", true);
			if (t)
				qv_detail(t, "in the source, not in the file");
			b++;
			n_bad++;
		} else {
			const qtk_tensor *ft = &s->m->tensors[fi[a].i];
			t = qv_tensor(s, fi[a].canon, ft->name, "exact", false);
			if (t) {
				rc = against_one(s, ft, &s->src->tensors[si[b].i], t);
				if (t->failed)
					n_bad++;
				else if (!strcmp(t->status, "exact"))
					n_exact++;
				else
					n_lossy++;
				if (!isnan(t->sqnr_db) && t->sqnr_db < worst) {
					worst = t->sqnr_db;
					worst_name = t->name;
				}
				if (g_cli.verbose > 0)
					cli_verbose("%s: %s %s", t->name, t->status, t->detail ? t->detail : "");
			}
			a++;
			b++;
		}
		if (!t && !rc)
			rc = oom(s);
	}
	cref_free(fi, nf);
	cref_free(si, ns);
	if (rc)
		return rc;
	char w[300] = "";
	if (worst_name)
		snprintf(w, sizeof w, ", worst SQNR %.2f dB (%s)", worst, worst_name);
	char bar[96];
	if (s->o->has_max_error)
		snprintf(bar, sizeof bar, "; bar: SQNR >= %.2f dB (--max-error)", s->o->max_error_db);
	else
		snprintf(bar, sizeof bar, "; bar: SQNR >= 6.02 dB per bit per weight - 15 dB, 1 to 30 dB");
	qv_result(s, "against", n_bad ? "failed" : "ok", "%zu exact, %zu lossy, %zu failing of %zu tensors%s%s", n_exact,
		  n_lossy, n_bad, n_exact + n_lossy + n_bad, w, n_lossy || n_bad ? bar : "");
	return 0;
}

/* --against: when FILE's embedded record names its source's roots, does SOURCE have them? */
static int chk_source_link(vstate *s)
{
	size_t len;
	const char *txt = qtk_prov_find(s->m, &len, &s->embedded_where);
	if (!txt)
		return 0;
	cJSON *rec = NULL;
	int rc = qtk_prov_parse(txt, len, s->o->file, &rec, &s->err);
	if (rc)
		return rc;
	/* only the source's roots are needed from the record: its tree (tens of MB with a chained
	 * record) goes before the source is hashed and the tensors compared */
	const cJSON *root = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rec, "source"), "tensor_root");
	uint8_t enc[32], dec[32];
	const bool named = root != NULL;
	const int scheme = named ? root_scheme(root) : 0;
	if (named) {
		qtk_prov_unhex(jstr(root, "encoded"), enc);
		qtk_prov_unhex(jstr(root, "decoded"), dec);
	}
	qtk_json_tree_free(rec);
	qtk_kv_remove(s->m, QTK_PROV_KEY); /* read: nothing after this needs its text */
	if (!named)
		return 0;
	qtk_digests sd;
	qtk_digest_opts o = {.scheme = scheme, .threads = s->o->threads,
			     .progress_named = cli_progress_enabled() ? progress : NULL,
			     .progress_ctx = (void *)"source digests"};
	rc = qtk_digest_model(s->src, &o, &sd, &s->err);
	cli_progress_end();
	if (rc)
		return rc;
	if (!memcmp(enc, sd.enc_root, 32))
		qv_result(s, "source_link", "ok", "the embedded record names this source (encoded root)");
	else if (!memcmp(dec, sd.dec_root, 32))
		qv_result(s, "source_link", "ok", "the embedded record names this source's values (decoded root; re-encoded since)");
	else
		qv_result(s, "source_link", "failed", "the embedded record names a different source (its roots differ from %s's)",
			  s->o->source);
	qtk_digests_free(&sd);
	return 0;
}

/* ---- weight files beside the model ------------------------------------------------------- */

/* File name suffixes of model weights, and whether a loader of the directory may take the file
 * for part of the model: many (vLLM's among them) load every *.safetensors of a directory that
 * has no index; the other forms are only read when there are no safetensors weights. */
static const struct {
	const char *suf;
	bool loaded;
} weight_sufs[] = {
	{".safetensors", true}, {".gguf", false}, {".bin", false}, {".pt", false}, {".pth", false},
	{".ckpt", false}, {".pkl", false}, {".pickle", false}, {".npz", false}, {".h5", false},
	{".msgpack", false}, {".onnx", false}, {".qpk", false},
};

static int weight_kind(const char *n)
{
	size_t l = strlen(n);
	for (size_t i = 0; i < sizeof weight_sufs / sizeof *weight_sufs; i++) {
		size_t k = strlen(weight_sufs[i].suf);
		if (l > k && !qtk_strcasecmp(n + l - k, weight_sufs[i].suf))
			return weight_sufs[i].loaded ? 2 : 1;
	}
	return 0;
}

/* A Hugging Face directory (FILE, or the directory of FILE when it is an index) must hold one
 * model: a weight file that is not one the model was read from (not the single model file, not
 * named by the index) fails the check when a loader could take it for part of the model (a
 * *.safetensors file where there is no index), and is a note otherwise. */
static int chk_stray(vstate *s)
{
	const char *f = s->o->file;
	bool via_index = qtk_str_ends(f, ".safetensors.index.json");
	char *dir = qtk_is_dir(f) ? qtk_strdup(f) : via_index ? qtk_path_dir(f) : NULL;
	if (!dir)
		return qtk_is_dir(f) || via_index ? oom(s) : 0;
	DIR *d = opendir(dir);
	if (!d) {
		qtk_free(dir);
		return 0; /* an archive member or a directory that went away: the reader has spoken */
	}
	size_t nbad = 0, nnote = 0;
	char bad[200] = "", note[200] = "";
	bool index = via_index, single = false;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strcmp(e->d_name, "model.safetensors.index.json"))
			index = true;
		else if (!strcmp(e->d_name, "model.safetensors"))
			single = true;
	if (single && !via_index)
		index = false; /* the reader takes model.safetensors before an index */
	rewinddir(d);
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		int k = n[0] == '.' ? 0 : weight_kind(n);
		if (!k)
			continue;
		bool used = false;
		for (uint32_t i = 0; i < s->m->nfiles && !used; i++)
			used = !strcmp(qtk_path_base(s->m->files[i]), n);
		if (used)
			continue;
		bool fails = k == 2 && !index;
		size_t *cnt = fails ? &nbad : &nnote;
		char *list = fails ? bad : note;
		size_t len = strlen(list);
		if (*cnt < 3 && len + strlen(n) + 3 < sizeof bad)
			snprintf(list + len, sizeof bad - len, "%s%s", len ? ", " : "", n);
		else if (*cnt == 3)
			snprintf(list + len, sizeof bad - len, ", ...");
		(*cnt)++;
	}
	closedir(d);
	if (nbad)
		qv_result(s, "stray_files", "failed",
			  "%zu weight file%s beside the model that %s not part of it (%s): a loader that takes every "
			  "*.safetensors of a directory without an index would mix %s in",
			  nbad, nbad == 1 ? "" : "s", nbad == 1 ? "is" : "are", bad, nbad == 1 ? "it" : "them");
	if (nnote) {
		qv_result(s, "stray_files", "note", "%zu weight file%s beside the model that %s not part of it (%s)", nnote,
			  nnote == 1 ? "" : "s", nnote == 1 ? "is" : "are", note);
		cli_warn("%s: %zu weight file%s not part of the model (%s)", dir, nnote, nnote == 1 ? "" : "s", note);
	}
	qtk_free(dir);
	return 0;
}

/* ---- the table -------------------------------------------------------------------------------- */

#define M_ALL (MODE_EMBEDDED | MODE_EMIT | MODE_RECORD | MODE_AGAINST | MODE_SIGN | MODE_SIGVERIFY)
#define M_SIG (MODE_SIGN | MODE_SIGVERIFY)

const vcheck qv_checks[] = {
	{"signature", MODE_SIGVERIFY, qv_chk_sigverify},
	{"structure", M_ALL, chk_structure},
	{"stray_files", MODE_EMBEDDED | MODE_RECORD, chk_stray},
	{"audit", M_ALL, qv_chk_audit},
	{"part_digests", MODE_EMBEDDED | MODE_EMIT | MODE_RECORD | M_SIG, chk_container_digests},
	{"provenance", MODE_EMBEDDED | MODE_EMIT | MODE_RECORD | M_SIG, chk_embedded},
	{"record", MODE_RECORD, chk_record},
	{"digests", MODE_EMBEDDED | MODE_EMIT | MODE_RECORD | M_SIG, chk_digests},
	{"tensors", MODE_EMBEDDED | MODE_RECORD | MODE_SIGVERIFY, chk_tensors},
	{"tensor_root", MODE_EMBEDDED | MODE_RECORD | MODE_SIGVERIFY, chk_roots},
	{"metadata", MODE_EMBEDDED | MODE_RECORD | MODE_SIGVERIFY, qv_chk_metadata},
	{"signed_record", MODE_SIGVERIFY, qv_chk_sigrecord},
	{"files", MODE_EMIT | MODE_RECORD | MODE_SIGN, chk_files},
	{"emit", MODE_EMIT | MODE_SIGN, chk_emit},
	{"sign", MODE_SIGN, qv_chk_sign},
	{"source_link", MODE_AGAINST, chk_source_link},
	{"against", MODE_AGAINST, chk_against},
	{"against_metadata", MODE_AGAINST, qv_chk_against_metadata},
};
const size_t qv_nchecks = sizeof qv_checks / sizeof *qv_checks;
