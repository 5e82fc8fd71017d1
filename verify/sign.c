/* sign.c - qverify --sign / --verify-signature: OpenSSF model signing bundles with qtk's content
 * digests in the predicate (docs/provenance.md, section 5). The file-level part is what
 * model_signing's own verifier checks; the tensor-level part runs through the record checks
 * (checks.c) with the signed deployment record as the record. */
#include "verify.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int oom(vstate *s) { return qtk_err_set(&s->err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

static bool is_dir(const char *p)
{
	struct stat st;
	return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* The signature's path: --signature, else DIR/model.sig or FILE.sig. New string. */
char *qv_sig_path(const vopts *o)
{
	if (o->signature)
		return qtk_strdup(o->signature);
	size_t n = strlen(o->file);
	while (n > 1 && o->file[n - 1] == '/')
		n--;
	char *p = qtk_malloc(n + sizeof "/" QTK_SIG_FILE);
	if (p)
		snprintf(p, n + sizeof "/" QTK_SIG_FILE, "%.*s%s", (int)n, o->file, is_dir(o->file) ? "/" QTK_SIG_FILE : ".sig");
	return p;
}

/* The model's name: the last component of its path (model_signing's subject name). */
static char *model_name(const char *path)
{
	char *c = qtk_strdup(path);
	if (!c)
		return NULL;
	size_t n = strlen(c);
	while (n > 1 && c[n - 1] == '/')
		c[--n] = 0;
	const char *b = strrchr(c, '/');
	char *r = qtk_strdup(b && b[1] ? b + 1 : c);
	qtk_free(c);
	return r;
}

/* A directory model: the default ignore list of model_signing (git files) and the signature
 * itself when it lies inside. */
static int set_ignores(qtk_sig_manifest *m, const char *dir, const char *sig)
{
	static const char *const git[] = {".git", ".gitattributes", ".github", ".gitignore"};
	m->ignore = qtk_calloc(6, sizeof *m->ignore);
	if (!m->ignore)
		return QTK_E_IO;
	size_t dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	if (!strncmp(sig, dir, dl) && sig[dl] == '/' && sig[dl + 1])
		m->ignore[m->nignore++] = qtk_strdup(sig + dl + 1);
	else if (!strchr(sig, '/') && !strcmp(dir, "."))
		m->ignore[m->nignore++] = qtk_strdup(sig);
	for (size_t i = 0; i < 4; i++)
		m->ignore[m->nignore++] = qtk_strdup(git[i]);
	for (size_t i = 0; i < m->nignore; i++)
		if (!m->ignore[i])
			return QTK_E_IO;
	return 0;
}

/* The model's resources: a directory walked; one file as "."; a split set as its files' base
 * names (all beside the first). */
static int local_manifest(vstate *s, const qtk_sig_manifest *like, const char *sig, qtk_sig_manifest *out)
{
	memset(out, 0, sizeof *out);
	const char *path = s->o->file;
	int rc;
	if (like) {
		out->shards = like->shards;
		out->shard_size = like->shard_size;
	} else if (s->o->shard_size) {
		out->shards = true;
		out->shard_size = s->o->shard_size;
	}
	if (!(out->model_name = model_name(path)))
		return oom(s);
	if (is_dir(path)) {
		if (like) {
			/* the signature's ignore_paths, the git files (model_signing's verifier always leaves
			 * them out) and the signature file itself when it lies inside */
			static const char *const git[] = {".git", ".gitattributes", ".github", ".gitignore"};
			out->ignore = qtk_calloc(like->nignore + 6, sizeof *out->ignore);
			if (!out->ignore)
				return oom(s);
			for (size_t i = 0; i < like->nignore; i++)
				if (!(out->ignore[out->nignore++] = qtk_strdup(like->ignore[i])))
					return oom(s);
			for (size_t i = 0; i < 4; i++)
				if (!(out->ignore[out->nignore++] = qtk_strdup(git[i])))
					return oom(s);
			size_t dl = strlen(path);
			while (dl > 1 && path[dl - 1] == '/')
				dl--;
			if (!strncmp(sig, path, dl) && sig[dl] == '/' && sig[dl + 1] &&
			    !(out->ignore[out->nignore++] = qtk_strdup(sig + dl + 1)))
				return oom(s);
		} else if (set_ignores(out, path, sig)) {
			return oom(s);
		}
		return qtk_sig_hash(path, NULL, 0, out, &s->err);
	}
	const char *one = ".";
	if (like && !(like->n && !strncmp(like->it[0].name, ".", 1) && (!like->it[0].name[1] || like->it[0].name[1] == ':'))) {
		/* a split set: the files the signature names, beside FILE */
		char **rel = qtk_calloc(like->n ? like->n : 1, sizeof *rel);
		const char **have = qtk_calloc(like->n ? like->n : 1, sizeof *have);
		size_t nr = 0, nh = 0;
		rc = rel && have ? 0 : oom(s);
		for (size_t i = 0; !rc && i < like->n; i++) {
			const char *nm = like->it[i].name, *c = like->shards ? strchr(nm, ':') : NULL;
			size_t l = c ? (size_t)(c - nm) : strlen(nm);
			if (nr && strlen(rel[nr - 1]) == l && !strncmp(rel[nr - 1], nm, l))
				continue;
			if (memchr(nm, '/', l) || (l == 2 && !strncmp(nm, "..", 2)))
				rc = qtk_err_set(&s->err, QTK_E_DATA, sig, -1, "predicate.resources",
						 "signature: resource '%.100s' is not a file beside the model", nm);
			else if (!(rel[nr++] = qtk_strndup(nm, l)))
				rc = oom(s);
		}
		/* missing files are reported by the comparison, not as errors */
		char base[4096];
		const char *sl = strrchr(path, '/');
		snprintf(base, sizeof base, "%.*s", sl ? (int)(sl - path) : 1, sl ? path : ".");
		for (size_t i = 0; !rc && i < nr; i++) {
			char full[8200];
			snprintf(full, sizeof full, "%s/%s", base, rel[i]);
			if (!access(full, R_OK))
				have[nh++] = rel[i];
		}
		rc = rc ? rc : qtk_sig_hash(path, have, nh, out, &s->err);
		for (size_t i = 0; rel && i < nr; i++)
			qtk_free(rel[i]);
		qtk_free(have);
		qtk_free(rel);
		return rc;
	}
	if (!like && s->m && s->m->nfiles > 1) {
		const char **rel = qtk_calloc(s->m->nfiles, sizeof *rel);
		if (!rel)
			return oom(s);
		for (uint32_t i = 0; i < s->m->nfiles; i++) {
			const char *b = strrchr(s->m->files[i], '/');
			rel[i] = b ? b + 1 : s->m->files[i];
		}
		rc = qtk_sig_hash(path, rel, s->m->nfiles, out, &s->err);
		qtk_free(rel);
		return rc;
	}
	return qtk_sig_hash(path, &one, 1, out, &s->err);
}

/* Where the deployment record is written into the statement (signed_message). */
typedef struct rec_place {
	uint8_t *at;
	size_t room, n;
	qtk_err *err;
} rec_place;

static int count_put(void *ctx, const uint8_t *p, size_t n)
{
	(void)p;
	((rec_place *)ctx)->n += n;
	return 0;
}

static int place_put(void *ctx, const uint8_t *p, size_t n)
{
	rec_place *rp = ctx;
	if (n > rp->room - rp->n)
		return qtk_err_set(rp->err, QTK_E_INTERNAL, NULL, -1, NULL, "the deployment record grew as it was made again");
	memcpy(rp->at + rp->n, p, n);
	rp->n += n;
	return 0;
}

/* The signed message, PAE(statement), made where it is signed and written from: the statement's
 * text is made around a placeholder for qtk_record, and the deployment record (counted first,
 * then made a second time at the same time stamp) is written straight into its place and
 * checked there by the record reader's rules: the record is never held apart from the message
 * (57 MB each for 100,000 tensors). *msg is the block (qtk_free), the message starts at *pae. */
static int signed_message(vstate *s, qtk_sig_manifest *m, uint8_t **msg, const uint8_t **pae, size_t *npae,
			  size_t *nstmt)
{
	*msg = NULL;
	const int64_t now = qtk_prov_now();
	rec_place cnt = {NULL, 0, 0, &s->err};
	int rc = qtk_prov_emit_stream(s->m, &s->d, &s->files, s->embedded, now, count_put, &cnt, &s->err);
	if (!rc && cnt.n > QTK_PROV_CAP)
		rc = qtk_err_set(&s->err, QTK_E_DATA, s->o->file, -1, NULL,
				 "provenance record larger than %u bytes (the deployment record of this model: %zu)",
				 QTK_PROV_CAP, cnt.n);
	cJSON *mark = rc ? NULL : cJSON_CreateNull();
	char *t = NULL;
	if (!rc && !mark)
		rc = oom(s);
	if (!rc) {
		mark->type = cJSON_Raw | cJSON_IsReference;
		mark->valuestring = (char *)"{}";
	}
	rc = rc ? rc : qtk_sig_statement(m, mark, &t, &s->err);
	cJSON_Delete(mark);
	/* qtk_record is the predicate's first key and the predicate the statement's first object:
	 * the first place of this text is the record's (a string that holds it is escaped) */
	static const char key[] = "\"qtk_record\":{}";
	const char *at = t ? strstr(t, key) : NULL;
	if (!rc && !at)
		rc = qtk_err_set(&s->err, QTK_E_INTERNAL, NULL, -1, NULL, "the statement has no place for the record");
	const size_t pre = at ? (size_t)(at - t) + sizeof key - 3 : 0, tl = t ? strlen(t) : 0;
	const size_t n = rc ? 0 : tl - 2 + cnt.n;
	uint8_t *b = rc ? NULL : qtk_malloc(QTK_SIG_PAE_HEAD + n + 1);
	if (!rc && !b)
		rc = oom(s);
	rec_place rp = {b ? b + QTK_SIG_PAE_HEAD + pre : NULL, cnt.n, 0, &s->err};
	if (!rc) {
		memcpy(b + QTK_SIG_PAE_HEAD, t, pre);
		rc = qtk_prov_emit_stream(s->m, &s->d, &s->files, s->embedded, now, place_put, &rp, &s->err);
	}
	if (!rc && rp.n != cnt.n)
		rc = qtk_err_set(&s->err, QTK_E_INTERNAL, NULL, -1, NULL, "the deployment record changed as it was made again");
	bool canonical = false;
	rc = rc ? rc : qtk_prov_check_canonical((const char *)rp.at, rp.n, s->o->file, &canonical, &s->err);
	if (!rc && !canonical)
		rc = qtk_err_set(&s->err, QTK_E_INTERNAL, NULL, -1, NULL, "the deployment record is not canonical");
	if (!rc) {
		memcpy(rp.at + rp.n, t + pre + 2, tl - pre - 2);
		b[QTK_SIG_PAE_HEAD + n] = 0;
		char head[QTK_SIG_PAE_HEAD];
		const int h = qtk_sig_pae_head(n, head);
		memcpy(b + QTK_SIG_PAE_HEAD - h, head, (size_t)h);
		*pae = b + QTK_SIG_PAE_HEAD - h;
		*npae = (size_t)h + n;
		*nstmt = n;
		*msg = b;
	} else {
		qtk_free(b);
	}
	qtk_free(t);
	return rc;
}

/* --sign: after the digests and file hashes. */
int qv_chk_sign(vstate *s)
{
	char *sig = qv_sig_path(s->o);
	qtk_sig_key *k = NULL;
	qtk_sig_manifest m;
	uint8_t *msg = NULL, *sv = NULL;
	const uint8_t *pae = NULL;
	size_t npae = 0, nsv = 0, nstmt = 0;
	char hint[65];
	memset(&m, 0, sizeof m);
	int rc = sig ? 0 : oom(s);
	rc = rc ? rc : qtk_sig_key_load(s->o->sign_key, true, &k, &s->err);
	rc = rc ? rc : local_manifest(s, NULL, sig, &m);
	rc = rc ? rc : signed_message(s, &m, &msg, &pae, &npae, &nstmt);
	rc = rc ? rc : qtk_sig_sign(k, pae, npae, &sv, &nsv, &s->err);
	rc = rc ? rc : qtk_sig_key_hint(k, hint) ? oom(s) : 0;
	if (!rc && qtk_sig_verify(k, pae, npae, sv, nsv))
		rc = qtk_err_set(&s->err, QTK_E_INTERNAL, NULL, -1, NULL, "the new signature does not verify");
	/* the bundle straight into its file, written atomically (its payload's base64 is a third
	 * larger than the record) */
	qtk_ofile of;
	const bool opened = !rc && !(rc = qtk_ofile_open(&of, sig, &s->err));
	if (opened)
		qtk_ofile_list(&of, NULL); /* nothing takes its SHA-256 */
	rc = rc ? rc : qtk_sig_bundle_write(pae + (npae - nstmt), nstmt, sv, nsv, hint, qtk_ofile_put, &of, &s->err);
	rc = rc ? rc : qtk_ofile_write(&of, "\n", 1);
	rc = rc ? rc : qtk_ofile_commit(&of);
	if (rc && opened)
		qtk_ofile_abort(&of);
	if (!rc) {
		char root[65];
		qtk_hex(m.root, 32, root);
		qv_result(s, "signature", "ok", "wrote %s: %s key %.16s..., %zu %s, %zu tensors, subject digest %s", sig,
			  qtk_sig_key_kind(k), hint, m.n, m.shards ? "shards" : m.n == 1 ? "file" : "files", s->d.n, root);
	}
	qtk_sig_key_free(k);
	qtk_sig_manifest_free(&m);
	qtk_free(sig);
	qtk_free(msg);
	qtk_free(sv);
	return rc;
}

/* Compare the signed resources with the model's: each difference named. */
static void compare_files(vstate *s, const qtk_sig_manifest *want, const qtk_sig_manifest *have)
{
	char list[512] = "";
	size_t nl = 0, nbad = 0;
	const char *fail = s->o->sig_content ? "note" : "failed";
	for (size_t i = 0; i < want->n; i++) {
		const qtk_sig_item *w = &want->it[i], *h = NULL;
		for (size_t j = 0; j < have->n && !h; j++)
			if (!strcmp(have->it[j].name, w->name))
				h = &have->it[j];
		if (h && !memcmp(h->digest, w->digest, 32))
			continue;
		char one[300];
		if (!h) {
			snprintf(one, sizeof one, "'%.120s' missing", w->name);
		} else {
			const qtk_sig_item *o = NULL;
			for (size_t j = 0; j < want->n && !o; j++)
				if (j != i && !memcmp(want->it[j].digest, h->digest, 32))
					o = &want->it[j];
			if (o)
				snprintf(one, sizeof one, "'%.120s' holds the content signed for '%.120s' (reordered)", w->name,
					 o->name);
			else
				snprintf(one, sizeof one, "'%.120s' content differs from the signed digest", w->name);
		}
		nbad++;
		if (nl < 3)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", nl ? "; " : "", one);
		nl++;
	}
	for (size_t j = 0; j < have->n; j++) {
		bool found = false;
		for (size_t i = 0; i < want->n && !found; i++)
			found = !strcmp(have->it[j].name, want->it[i].name);
		if (found)
			continue;
		nbad++;
		if (nl < 3)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%.120s' not in the signature", nl ? "; " : "",
				 have->it[j].name);
		nl++;
	}
	if (nbad)
		qv_result(s, "signed_files", fail, "%zu of %zu signed %s differ: %s%s", nbad, want->n,
			  want->shards ? "shards" : "files", list, nl > 3 ? "; ..." : "");
	else
		qv_result(s, "signed_files", "ok", "%zu %s the signed SHA-256 digests", want->n,
			  want->shards ? "shards match" : want->n == 1 ? "file matches" : "files match");
}

/* --verify-signature: the bundle, the key, the signature over PAE(payload), the statement, the
 * files; then the signed deployment record becomes the record the tensor checks use. */
int qv_chk_sigverify(vstate *s)
{
	char *sig = qv_sig_path(s->o);
	qtk_sig_key *k = NULL;
	qtk_sig_bundle b;
	qtk_sig_manifest want, have;
	uint8_t *buf = NULL, *pae = NULL;
	size_t n = 0, npae = 0;
	char hint[65];
	memset(&b, 0, sizeof b);
	memset(&want, 0, sizeof want);
	memset(&have, 0, sizeof have);
	int rc = sig ? 0 : oom(s);
	rc = rc ? rc : qtk_sig_key_load(s->o->verify_key, false, &k, &s->err);
	rc = rc ? rc : qtk_slurp(sig, QTK_SIG_CAP, &buf, &n, &s->err);
	rc = rc ? rc : qtk_sig_bundle_parse(buf, n, sig, &b, &s->err);
	rc = rc ? rc : qtk_sig_key_hint(k, hint) ? oom(s) : 0;
	qtk_free(buf); /* the bundle's text (tens of MB for a large record) is not needed again */
	buf = NULL;
	if (rc)
		goto done;
	if (b.hint[0] && strcmp(b.hint, hint)) {
		qv_result(s, "signature", "failed", "key mismatch: %s was made with the key %.16s..., %s is %.16s...", sig,
			  b.hint, s->o->verify_key, hint);
		s->stop = true;
		goto done;
	}
	if ((rc = qtk_sig_pae(b.payload, b.npayload, &pae, &npae) ? oom(s) : 0))
		goto done;
	const bool verified = !qtk_sig_verify(k, pae, npae, b.sig, b.nsig);
	qtk_free(pae); /* the payload again with its header */
	pae = NULL;
	if (!verified) {
		qv_result(s, "signature", "failed", "%s does not verify with %s (%s): the signed statement was altered%s", sig,
			  s->o->verify_key, qtk_sig_key_kind(k), b.hint[0] ? "" : " or the key is not the signer's");
		s->stop = true;
		goto done;
	}
	if ((rc = qtk_sig_statement_parse(b.payload, b.npayload, sig, &want, &s->err)))
		goto done;
	qv_result(s, "signature", "ok", "%s: %s signature by key %.16s... over '%s' (%zu %s%s)", sig, qtk_sig_key_kind(k),
		  hint, want.model_name, want.n, want.shards ? "shards" : want.n == 1 ? "file" : "files",
		  want.qtk_record ? ", with qtk content digests" : "");
	if ((rc = local_manifest(s, &want, sig, &have)))
		goto done;
	compare_files(s, &want, &have);
	if (want.qtk_record) {
		s->rec = want.qtk_record;
		want.qtk_record = NULL;
		s->rec_name = "the signature";
	} else {
		/* signed by another tool: its verdict is the file level, as model_signing's own */
		qv_result(s, "signed_content", "note", "the signature carries no qtk content digests (signed by another "
			  "tool): checked file by file");
		s->stop = true;
	}
done:
	qtk_sig_key_free(k);
	qtk_sig_bundle_free(&b);
	qtk_sig_manifest_free(&want);
	qtk_sig_manifest_free(&have);
	qtk_free(buf);
	qtk_free(pae);
	qtk_free(sig);
	return rc;
}

/* After the tensor checks: the embedded provenance record as signed. */
int qv_chk_sigrecord(vstate *s)
{
	if (!s->rec || s->rec == s->embedded)
		return 0;
	const cJSON *se = cJSON_GetObjectItemCaseSensitive(s->rec, "embedded");
	uint8_t a[32], b[32];
	bool signed_has = cJSON_IsObject(se), has = s->embedded != NULL;
	if (!signed_has && !has)
		return 0;
	if (signed_has != has) {
		qv_result(s, "signed_record", s->o->sig_content ? "note" : "failed", "%s",
			  has ? "the model carries a provenance record; the signed model had none"
			      : "the signed model carried a provenance record; this one has none");
		return 0;
	}
	if (qtk_prov_sha256(se, a) || qtk_prov_sha256(s->embedded, b))
		return oom(s);
	if (memcmp(a, b, 32))
		qv_result(s, "signed_record", s->o->sig_content ? "note" : "failed",
			  "the embedded provenance record (%s) differs from the one signed", s->embedded_where);
	else
		qv_result(s, "signed_record", "ok", "the embedded provenance record is the one signed");
	return 0;
}
