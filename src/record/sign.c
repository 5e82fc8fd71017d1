/* sign.c - OpenSSF model signing bundles: strict reading, rendering, PAE, keys, file manifests. */
#include "record/sign.h"
#include "record/prov.h"
#include "json.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include "lc.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct qtk_sig_key {
	EVP_PKEY *pk;
	const EVP_MD *md; /* NULL for Ed25519 */
	const char *kind;
};

static int oom(qtk_err *err) { return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

/* ---- base64 (RFC 4648, padded; strict) ---------------------------------------------------- */

static const char b64c[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const uint8_t *p, size_t n)
{
	size_t o = 0, m = (n + 2) / 3 * 4 + 1;
	char *s = qtk_malloc(m);
	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
		s[o++] = b64c[v >> 18 & 63];
		s[o++] = b64c[v >> 12 & 63];
		s[o++] = i + 1 < n ? b64c[v >> 6 & 63] : '=';
		s[o++] = i + 2 < n ? b64c[v & 63] : '=';
	}
	s[o] = 0;
	return s;
}

static int b64v(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
		: c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decode padded base64; false on any other character, a bad length or bad padding. */
static bool b64_decode(const char *s, size_t n, uint8_t **out, size_t *outn)
{
	*out = NULL;
	*outn = 0;
	if (n % 4)
		return false;
	size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
	uint8_t *d = qtk_malloc(n / 4 * 3 + 1);
	if (!d)
		return false;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		bool last = i + 4 == n;
		int v[4];
		for (size_t k = 0; k < 4; k++) {
			v[k] = b64v(s[i + k]);
			if (v[k] < 0 && !(last && s[i + k] == '=' && k + pad >= 4)) {
				qtk_free(d);
				return false;
			}
		}
		uint32_t w = (uint32_t)(v[0] << 18 | v[1] << 12 | (v[2] < 0 ? 0 : v[2]) << 6 | (v[3] < 0 ? 0 : v[3]));
		d[o++] = (uint8_t)(w >> 16);
		if (!(last && pad == 2))
			d[o++] = (uint8_t)(w >> 8);
		if (!(last && pad >= 1))
			d[o++] = (uint8_t)w;
	}
	*out = d;
	*outn = o;
	return true;
}

/* ---- small helpers ------------------------------------------------------------------------ */

static int bad(qtk_err *err, const char *file, const char *field, const char *fmt, const char *arg)
{
	char m[256];
	snprintf(m, sizeof m, fmt, arg ? arg : "");
	return qtk_err_set(err, QTK_E_DATA, file, -1, field, "%s", m);
}

static bool hex_ok(const char *s, size_t len)
{
	if (strlen(s) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Reject members of o that are not in names[] (NULL-terminated). */
static int only_fields(const cJSON *o, const char *const *names, const char *file, const char *path, qtk_err *err)
{
	for (const cJSON *c = o->child; c; c = c->next) {
		size_t k = 0;
		while (names[k] && strcmp(names[k], c->string))
			k++;
		if (!names[k]) {
			char f[200];
			snprintf(f, sizeof f, "%s%s%.120s", path, *path ? "." : "", c->string);
			return bad(err, file, f, "signature: unknown field", NULL);
		}
	}
	return 0;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* ---- bundle ------------------------------------------------------------------------------- */

void qtk_sig_bundle_free(qtk_sig_bundle *b)
{
	if (!b)
		return;
	qtk_free(b->payload);
	qtk_free(b->sig);
	memset(b, 0, sizeof *b);
}

int qtk_sig_bundle_parse(const uint8_t *buf, size_t n, const char *file, qtk_sig_bundle *out, qtk_err *err)
{
	memset(out, 0, sizeof *out);
	if (n > QTK_SIG_CAP)
		return qtk_err_set(err, QTK_E_DATA, file, -1, NULL, "signature larger than %u bytes", QTK_SIG_CAP);
	qtk_json_init();
	qtk_json_doc doc;
	memset(&doc, 0, sizeof doc);
	int rc = qtk_json_parse((const char *)buf, n, QTK_JSON_INTS, file, 0, err, &doc);
	if (rc)
		return rc;
	const cJSON *r = doc.root, *mt, *vm, *pk, *env, *j;
	static const char *const top[] = {"mediaType", "verificationMaterial", "dsseEnvelope", NULL};
	static const char *const vmf[] = {"publicKey", "tlogEntries", "timestampVerificationData", NULL};
	static const char *const pkf[] = {"hint", "rawBytes", "keyDetails", NULL};
	static const char *const envf[] = {"payload", "payloadType", "signatures", NULL};
	static const char *const sigf[] = {"sig", "keyid", NULL};
	if (!cJSON_IsObject(r)) {
		rc = bad(err, file, NULL, "signature: not a Sigstore bundle (a JSON object)", NULL);
		goto done;
	}
	if (get(r, "messageSignature")) {
		rc = bad(err, file, "messageSignature", "signature: message signatures are not supported (a DSSE envelope is)", NULL);
		goto done;
	}
	if ((rc = only_fields(r, top, file, "", err)))
		goto done;
	mt = get(r, "mediaType");
	if (!cJSON_IsString(mt)) {
		rc = bad(err, file, "mediaType", "signature: missing or not a string (a Sigstore bundle has one)", NULL);
		goto done;
	}
	if (strcmp(mt->valuestring, QTK_SIG_BUNDLE_MEDIA)) {
		rc = bad(err, file, "mediaType", "signature: unsupported media type '%.100s' (expected "
			 QTK_SIG_BUNDLE_MEDIA ")", mt->valuestring);
		goto done;
	}
	vm = get(r, "verificationMaterial");
	if (!cJSON_IsObject(vm)) {
		rc = bad(err, file, "verificationMaterial", "signature: missing or not an object", NULL);
		goto done;
	}
	if (get(vm, "certificate") || get(vm, "x509CertificateChain")) {
		rc = bad(err, file, "verificationMaterial", "signature: certificate verification material is not supported "
			 "(only public keys)", NULL);
		goto done;
	}
	if ((rc = only_fields(vm, vmf, file, "verificationMaterial", err)))
		goto done;
	pk = get(vm, "publicKey");
	if (!cJSON_IsObject(pk)) {
		rc = bad(err, file, "verificationMaterial.publicKey", "signature: missing or not an object", NULL);
		goto done;
	}
	if ((rc = only_fields(pk, pkf, file, "verificationMaterial.publicKey", err)))
		goto done;
	j = get(pk, "hint");
	if (j && !cJSON_IsNull(j)) {
		if (!cJSON_IsString(j) || !hex_ok(j->valuestring, 64)) {
			rc = bad(err, file, "verificationMaterial.publicKey.hint", "signature: must be 64 lower-case hex digits", NULL);
			goto done;
		}
		memcpy(out->hint, j->valuestring, 65);
	}
	j = get(vm, "tlogEntries");
	if (j && !cJSON_IsArray(j)) {
		rc = bad(err, file, "verificationMaterial.tlogEntries", "signature: must be an array", NULL);
		goto done;
	}
	env = get(r, "dsseEnvelope");
	if (!cJSON_IsObject(env)) {
		rc = bad(err, file, "dsseEnvelope", "signature: missing or not an object", NULL);
		goto done;
	}
	if ((rc = only_fields(env, envf, file, "dsseEnvelope", err)))
		goto done;
	j = get(env, "payloadType");
	if (!cJSON_IsString(j) || strcmp(j->valuestring, QTK_SIG_PAYLOAD_TYPE)) {
		rc = bad(err, file, "dsseEnvelope.payloadType", "signature: must be " QTK_SIG_PAYLOAD_TYPE "%s",
			 cJSON_IsString(j) ? "" : " (missing or not a string)");
		goto done;
	}
	j = get(env, "payload");
	if (!cJSON_IsString(j) || !b64_decode(j->valuestring, strlen(j->valuestring), &out->payload, &out->npayload)) {
		rc = bad(err, file, "dsseEnvelope.payload", "signature: must be a base64 string", NULL);
		goto done;
	}
	j = get(env, "signatures");
	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 1) {
		rc = bad(err, file, "dsseEnvelope.signatures", "signature: must be an array of exactly one signature", NULL);
		goto done;
	}
	j = j->child;
	if (!cJSON_IsObject(j) || (rc = only_fields(j, sigf, file, "dsseEnvelope.signatures[0]", err))) {
		rc = rc ? rc : bad(err, file, "dsseEnvelope.signatures[0]", "signature: must be an object", NULL);
		goto done;
	}
	if (get(j, "keyid") && !cJSON_IsString(get(j, "keyid"))) {
		rc = bad(err, file, "dsseEnvelope.signatures[0].keyid", "signature: must be a string", NULL);
		goto done;
	}
	j = get(j, "sig");
	if (!cJSON_IsString(j) || strlen(j->valuestring) > QTK_SIG_MAX_SIG * 2 ||
	    !b64_decode(j->valuestring, strlen(j->valuestring), &out->sig, &out->nsig) || !out->nsig ||
	    out->nsig > QTK_SIG_MAX_SIG) {
		rc = bad(err, file, "dsseEnvelope.signatures[0].sig", "signature: must be a base64 string of 1 to 1024 bytes",
			 NULL);
		goto done;
	}
done:
	qtk_json_doc_free(&doc);
	if (rc)
		qtk_sig_bundle_free(out);
	return rc;
}

int qtk_sig_bundle_write(const uint8_t *payload, size_t n, const uint8_t *sig, size_t nsig, const char *hint,
			 int (*put)(void *ctx, const uint8_t *p, size_t n), void *ctx, qtk_err *err)
{
	/* field order as model_signing writes it */
	static const char h0[] = "{\"mediaType\":\"" QTK_SIG_BUNDLE_MEDIA "\",\"verificationMaterial\":{\"publicKey\":{\"hint\":\"",
			  h1[] = "\"},\"tlogEntries\":[]},\"dsseEnvelope\":{\"payload\":\"",
			  h2[] = "\",\"payloadType\":\"" QTK_SIG_PAYLOAD_TYPE "\",\"signatures\":[{\"sig\":\"",
			  h3[] = "\",\"keyid\":\"\"}]}}";
	char *s64 = b64_encode(sig, nsig);
	if (!s64)
		return oom(err);
#define PUTS(t) put(ctx, (const uint8_t *)(t), strlen(t))
	int rc = PUTS(h0);
	rc = rc ? rc : PUTS(hint);
	rc = rc ? rc : PUTS(h1);
	/* the payload's base64, most of the bundle (tens of MB with a large record), a piece at a time */
	for (size_t i = 0; i < n && !rc; i += 3 * 4096) {
		char *piece = b64_encode(payload + i, n - i < 3 * 4096 ? n - i : 3 * 4096);
		rc = piece ? PUTS(piece) : oom(err);
		qtk_free(piece);
	}
	rc = rc ? rc : PUTS(h2);
	rc = rc ? rc : PUTS(s64);
	rc = rc ? rc : PUTS(h3);
#undef PUTS
	qtk_free(s64);
	return rc;
}

int qtk_sig_pae_head(size_t n, char head[QTK_SIG_PAE_HEAD])
{
	return snprintf(head, QTK_SIG_PAE_HEAD, "DSSEv1 %zu %s %zu ", strlen(QTK_SIG_PAYLOAD_TYPE), QTK_SIG_PAYLOAD_TYPE, n);
}

int qtk_sig_pae(const uint8_t *payload, size_t n, uint8_t **out, size_t *outn)
{
	char head[QTK_SIG_PAE_HEAD];
	int h = qtk_sig_pae_head(n, head);
	uint8_t *d = qtk_malloc((size_t)h + n + 1);
	if (!d)
		return QTK_E_IO;
	memcpy(d, head, (size_t)h);
	if (n)
		memcpy(d + h, payload, n);
	*out = d;
	*outn = (size_t)h + n;
	return 0;
}

/* ---- statement ---------------------------------------------------------------------------- */

void qtk_sig_manifest_free(qtk_sig_manifest *m)
{
	if (!m)
		return;
	qtk_free(m->model_name);
	for (size_t i = 0; i < m->nignore; i++)
		qtk_free(m->ignore[i]);
	qtk_free(m->ignore);
	for (size_t i = 0; i < m->n; i++) {
		qtk_free(m->it[i].name);
		qtk_free(m->it[i].alg);
	}
	qtk_free(m->it);
	qtk_json_tree_free(m->qtk_record);
	memset(m, 0, sizeof *m);
}

/* Compare paths component by component (Python's PurePosixPath order). */
static int path_cmp(const char *a, size_t la, const char *b, size_t lb)
{
	size_t i = 0, j = 0;
	for (;;) {
		size_t ea = i, eb = j;
		while (ea < la && a[ea] != '/')
			ea++;
		while (eb < lb && b[eb] != '/')
			eb++;
		size_t na = ea - i, nb = eb - j, k = na < nb ? na : nb;
		int c = memcmp(a + i, b + j, k);
		if (c)
			return c;
		if (na != nb)
			return na < nb ? -1 : 1;
		bool enda = ea >= la, endb = eb >= lb;
		if (enda || endb)
			return enda && endb ? 0 : enda ? -1 : 1;
		i = ea + 1;
		j = eb + 1;
	}
}

static int item_cmp(const void *x, const void *y)
{
	const char *a = ((const qtk_sig_item *)x)->name, *b = ((const qtk_sig_item *)y)->name;
	/* shards: "path:start:end"; files have no ':' suffix of two integers here */
	const char *ca = strrchr(a, ':'), *cb = strrchr(b, ':');
	size_t la = strlen(a), lb = strlen(b);
	unsigned long long ea = 0, eb = 0, sa = 0, sb = 0;
	if (ca && cb) {
		const char *pa = ca, *pb = cb;
		while (pa > a && pa[-1] != ':')
			pa--;
		while (pb > b && pb[-1] != ':')
			pb--;
		if (pa > a && pb > b) {
			sa = strtoull(pa, NULL, 10);
			sb = strtoull(pb, NULL, 10);
			ea = strtoull(ca + 1, NULL, 10);
			eb = strtoull(cb + 1, NULL, 10);
			la = (size_t)(pa - 1 - a);
			lb = (size_t)(pb - 1 - b);
		}
	}
	int c = path_cmp(a, la, b, lb);
	if (c)
		return c;
	return sa != sb ? (sa < sb ? -1 : 1) : ea != eb ? (ea < eb ? -1 : 1) : 0;
}

void qtk_sig_sort(qtk_sig_manifest *m)
{
	if (m->n > 1)
		qsort(m->it, m->n, sizeof *m->it, item_cmp);
}

static void items_root(const qtk_sig_manifest *m, uint8_t out[32])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned len = 0;
	memset(out, 0, 32);
	if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return;
	}
	for (size_t i = 0; i < m->n; i++)
		EVP_DigestUpdate(md, m->it[i].digest, 32);
	EVP_DigestFinal_ex(md, out, &len);
	EVP_MD_CTX_free(md);
}

static char *dupn(const char *s) { return qtk_strdup(s ? s : ""); }

int qtk_sig_statement_parse(const uint8_t *p, size_t n, const char *file, qtk_sig_manifest *m, qtk_err *err)
{
	memset(m, 0, sizeof *m);
	qtk_json_init();
	qtk_json_doc doc;
	memset(&doc, 0, sizeof doc);
	/* the record is most of a statement (tens of MB for 100,000 tensors; a tree of it several
	 * times that): found by the text's structure, it is read apart (its lists an entry at a time,
	 * qtk_prov_parse) and the rest is parsed with null in its place */
	const char *txt = (const char *)p;
	size_t pa, pb, ra = 0, rb = 0;
	const bool apart = qtk_json_member_span(txt, n, 0, "predicate", &pa, &pb) &&
			   qtk_json_member_span(txt, pb, pa, "qtk_record", &ra, &rb);
	char *rest = apart ? qtk_malloc(n - (rb - ra) + 4) : NULL;
	if (apart && !rest)
		return oom(err);
	if (rest) {
		memcpy(rest, txt, ra);
		memcpy(rest + ra, "null", 4);
		memcpy(rest + ra + 4, txt + rb, n - rb);
	}
	int rc = qtk_json_parse(rest ? rest : txt, rest ? n - (rb - ra) + 4 : n, QTK_JSON_INTS, file, 0, err, &doc);
	qtk_free(rest);
	if (rc) {
		snprintf(err->subject, sizeof err->subject, "signed statement");
		return rc;
	}
	const cJSON *r = doc.root, *j, *sub, *pred, *ser, *res;
	char f[96];
	uint8_t want[32];
	if (!cJSON_IsObject(r) || !cJSON_IsString(j = get(r, "_type")) || strcmp(j->valuestring, QTK_SIG_STATEMENT)) {
		rc = bad(err, file, "statement._type", "signature: the payload is not an in-toto " QTK_SIG_STATEMENT, NULL);
		goto done;
	}
	if (!cJSON_IsString(j = get(r, "predicateType")) || strcmp(j->valuestring, QTK_SIG_PREDICATE)) {
		rc = bad(err, file, "statement.predicateType", "signature: unsupported predicate type '%.100s' (expected "
			 QTK_SIG_PREDICATE ")", cJSON_IsString(j) ? j->valuestring : "");
		goto done;
	}
	sub = get(r, "subject");
	if (!cJSON_IsArray(sub) || cJSON_GetArraySize(sub) != 1 || !cJSON_IsObject(sub->child) ||
	    !cJSON_IsString(get(sub->child, "name")) || !cJSON_IsObject(get(sub->child, "digest")) ||
	    !cJSON_IsString(j = get(get(sub->child, "digest"), "sha256")) || !qtk_prov_unhex(j->valuestring, want)) {
		rc = bad(err, file, "statement.subject", "signature: must be one subject with a name and a sha256 digest", NULL);
		goto done;
	}
	if (!(m->model_name = dupn(get(sub->child, "name")->valuestring))) {
		rc = oom(err);
		goto done;
	}
	pred = get(r, "predicate");
	ser = get(pred, "serialization");
	res = get(pred, "resources");
	if (!cJSON_IsObject(pred) || !cJSON_IsObject(ser) || !cJSON_IsArray(res)) {
		rc = bad(err, file, "statement.predicate", "signature: needs a serialization object and a resources array", NULL);
		goto done;
	}
	j = get(ser, "method");
	if (!cJSON_IsString(j) || (strcmp(j->valuestring, "files") && strcmp(j->valuestring, "shards"))) {
		rc = bad(err, file, "predicate.serialization.method", "signature: unsupported serialization method '%.60s'",
			 cJSON_IsString(j) ? j->valuestring : "");
		goto done;
	}
	m->shards = !strcmp(j->valuestring, "shards");
	j = get(ser, "hash_type");
	if (!cJSON_IsString(j) || strcmp(j->valuestring, "sha256")) {
		rc = bad(err, file, "predicate.serialization.hash_type", "signature: unsupported hash type '%.60s' (qtk checks sha256)",
			 cJSON_IsString(j) ? j->valuestring : "");
		goto done;
	}
	j = get(ser, "allow_symlinks");
	if (!cJSON_IsBool(j)) {
		rc = bad(err, file, "predicate.serialization.allow_symlinks", "signature: must be a boolean", NULL);
		goto done;
	}
	m->allow_symlinks = cJSON_IsTrue(j);
	if (m->shards && (!qtk_json_u64(get(ser, "shard_size"), &m->shard_size) || !m->shard_size)) {
		rc = bad(err, file, "predicate.serialization.shard_size", "signature: must be a positive integer", NULL);
		goto done;
	}
	if ((j = get(ser, "ignore_paths"))) {
		int k = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : -1;
		if (k < 0 || k > 4096 || !(m->ignore = qtk_calloc((size_t)k + 1, sizeof *m->ignore))) {
			rc = k < 0 || k > 4096 ? bad(err, file, "predicate.serialization.ignore_paths",
						     "signature: must be an array of at most 4096 strings", NULL)
					       : oom(err);
			goto done;
		}
		for (const cJSON *c = j->child; c; c = c->next) {
			if (!cJSON_IsString(c)) {
				rc = bad(err, file, "predicate.serialization.ignore_paths", "signature: must hold strings", NULL);
				goto done;
			}
			if (!(m->ignore[m->nignore++] = dupn(c->valuestring))) {
				rc = oom(err);
				goto done;
			}
		}
	}
	char alg[64];
	if (m->shards)
		snprintf(alg, sizeof alg, "sha256-sharded-%llu", (unsigned long long)m->shard_size);
	else
		snprintf(alg, sizeof alg, "sha256");
	size_t nres = (size_t)cJSON_GetArraySize(res);
	if (!(m->it = qtk_calloc(nres ? nres : 1, sizeof *m->it))) {
		rc = oom(err);
		goto done;
	}
	for (const cJSON *c = res->child; c; c = c->next) {
		snprintf(f, sizeof f, "predicate.resources[%zu]", m->n);
		const cJSON *nm = get(c, "name"), *al = get(c, "algorithm"), *dg = get(c, "digest");
		if (!cJSON_IsObject(c) || !cJSON_IsString(nm) || !nm->valuestring[0] || !cJSON_IsString(al) ||
		    !cJSON_IsString(dg)) {
			rc = bad(err, file, f, "signature: a resource needs a name, an algorithm and a digest", NULL);
			goto done;
		}
		if (strcmp(al->valuestring, alg)) {
			rc = bad(err, file, f, "signature: unsupported digest algorithm '%.60s'", al->valuestring);
			goto done;
		}
		qtk_sig_item *it = &m->it[m->n];
		if (!qtk_prov_unhex(dg->valuestring, it->digest)) {
			rc = bad(err, file, f, "signature: digest must be 64 lower-case hex digits", NULL);
			goto done;
		}
		if (!(it->name = dupn(nm->valuestring)) || !(it->alg = dupn(alg))) {
			m->n++;
			rc = oom(err);
			goto done;
		}
		m->n++;
	}
	/* the subject digest covers the resources in the order listed (model_signing) */
	items_root(m, m->root);
	if (memcmp(m->root, want, 32)) {
		rc = bad(err, file, "statement.subject", "signature: inconsistent: the subject digest is not the digest over "
			 "the resources", NULL);
		goto done;
	}
	qtk_sig_sort(m);
	for (size_t i = 1; i < m->n; i++)
		if (!item_cmp(&m->it[i - 1], &m->it[i])) {
			rc = bad(err, file, "predicate.resources", "signature: resource '%.120s' listed twice", m->it[i].name);
			goto done;
		}
	if ((j = get(pred, "qtk_record"))) {
		char *t = apart ? NULL : qtk_prov_canonical(j);
		if (!apart && !t) {
			rc = bad(err, file, "predicate.qtk_record", "signature: not a provenance record", NULL);
			goto done;
		}
		rc = apart ? qtk_prov_parse(txt + ra, rb - ra, file, &m->qtk_record, err)
			   : qtk_prov_parse(t, strlen(t), file, &m->qtk_record, err);
		qtk_free(t);
		if (rc) {
			char s[256];
			snprintf(s, sizeof s, "predicate.qtk_record.%.200s", err->subject);
			snprintf(err->subject, sizeof err->subject, "%s", s);
			goto done;
		}
	}
done:
	qtk_json_doc_free(&doc);
	if (rc)
		qtk_sig_manifest_free(m);
	return rc;
}

int qtk_sig_statement(qtk_sig_manifest *m, const cJSON *qtk_record, char **json, qtk_err *err)
{
	*json = NULL;
	qtk_sig_sort(m);
	items_root(m, m->root);
	char h[65];
	cJSON *r = cJSON_CreateObject(), *sub = cJSON_AddArrayToObject(r, "subject"), *s0 = cJSON_CreateObject();
	cJSON_AddItemToArray(sub, s0);
	cJSON_AddStringToObject(s0, "name", m->model_name ? m->model_name : "");
	qtk_hex(m->root, 32, h);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(s0, "digest"), "sha256", h);
	cJSON_AddStringToObject(r, "_type", QTK_SIG_STATEMENT);
	cJSON_AddStringToObject(r, "predicateType", QTK_SIG_PREDICATE);
	cJSON *pred = cJSON_AddObjectToObject(r, "predicate"), *ser = cJSON_AddObjectToObject(pred, "serialization");
	cJSON_AddStringToObject(ser, "method", m->shards ? "shards" : "files");
	cJSON_AddStringToObject(ser, "hash_type", "sha256");
	cJSON_AddBoolToObject(ser, "allow_symlinks", m->allow_symlinks);
	if (m->shards)
		cJSON_AddNumberToObject(ser, "shard_size", (double)m->shard_size);
	if (m->nignore) {
		cJSON *ig = cJSON_AddArrayToObject(ser, "ignore_paths");
		for (size_t i = 0; i < m->nignore; i++)
			cJSON_AddItemToArray(ig, cJSON_CreateString(m->ignore[i]));
	}
	cJSON *res = cJSON_AddArrayToObject(pred, "resources");
	for (size_t i = 0; i < m->n; i++) {
		cJSON *c = cJSON_CreateObject();
		cJSON_AddStringToObject(c, "name", m->it[i].name);
		cJSON_AddStringToObject(c, "algorithm", m->it[i].alg);
		qtk_hex(m->it[i].digest, 32, h);
		cJSON_AddStringToObject(c, "digest", h);
		cJSON_AddItemToArray(res, c);
	}
	if (qtk_record) /* referred to, not copied (a record's text can be tens of MB) */
		cJSON_AddItemReferenceToObject(pred, "qtk_record", (cJSON *)qtk_record);
	char *t = qtk_prov_canonical(r);
	cJSON_Delete(r);
	if (!t)
		return oom(err);
	*json = t;
	return 0;
}

/* ---- keys --------------------------------------------------------------------------------- */

static int pass_cb(char *buf, int size, int rw, void *u)
{
	(void)buf, (void)size, (void)rw, (void)u;
	return -1; /* encrypted keys are not supported: no prompt */
}

void qtk_sig_key_free(qtk_sig_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pk);
	qtk_free(k);
}

const char *qtk_sig_key_kind(const qtk_sig_key *k) { return k->kind; }

int qtk_sig_key_load(const char *path, bool private_key, qtk_sig_key **out, qtk_err *err)
{
	*out = NULL;
	uint8_t *buf = NULL;
	size_t n = 0;
	int rc = qtk_slurp(path, QTK_SIG_KEY_CAP, &buf, &n, err);
	if (rc)
		return rc;
	BIO *bio = BIO_new_mem_buf(buf, (int)n);
	EVP_PKEY *pk = NULL;
	if (bio && !private_key)
		pk = PEM_read_bio_PUBKEY(bio, NULL, pass_cb, NULL);
	if (bio && !pk) {
		BIO_free(bio);
		bio = BIO_new_mem_buf(buf, (int)n);
		pk = bio ? PEM_read_bio_PrivateKey(bio, NULL, pass_cb, NULL) : NULL;
	}
	BIO_free(bio);
	qtk_free(buf);
	if (!pk)
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "cannot read a %s key in PEM (encrypted keys are not "
				   "supported)", private_key ? "private" : "public");
	qtk_sig_key *k = qtk_calloc(1, sizeof *k);
	if (!k) {
		EVP_PKEY_free(pk);
		return oom(err);
	}
	k->pk = pk;
	int id = EVP_PKEY_get_base_id(pk);
	if (id == EVP_PKEY_ED25519) {
		k->kind = "Ed25519";
	} else if (id == EVP_PKEY_EC) {
		char g[64] = "";
		size_t gl = 0;
		EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, g, sizeof g, &gl);
		if (!strcmp(g, "prime256v1") || !strcmp(g, "P-256")) {
			k->kind = "ECDSA P-256";
			k->md = EVP_sha256();
		} else if (!strcmp(g, "secp384r1") || !strcmp(g, "P-384")) {
			k->kind = "ECDSA P-384";
			k->md = EVP_sha384();
		} else if (!strcmp(g, "secp521r1") || !strcmp(g, "P-521")) {
			k->kind = "ECDSA P-521";
			k->md = EVP_sha512();
		} else {
			qtk_sig_key_free(k);
			return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "unsupported elliptic curve '%.40s' (P-256, "
					   "P-384, P-521 or Ed25519 keys)", g[0] ? g : "unnamed");
		}
	} else {
		const char *t = EVP_PKEY_get0_type_name(pk);
		qtk_sig_key_free(k);
		return qtk_err_set(err, QTK_E_DATA, path, -1, NULL, "unsupported key type '%.40s' (Ed25519 or ECDSA P-256, "
				   "P-384, P-521 keys)", t ? t : "unknown");
	}
	*out = k;
	return 0;
}

int qtk_sig_key_hint(const qtk_sig_key *k, char hex[65])
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p = NULL;
	long n;
	if (!b || PEM_write_bio_PUBKEY(b, k->pk) != 1 || (n = BIO_get_mem_data(b, &p)) <= 0) {
		BIO_free(b);
		return QTK_E_IO;
	}
	uint8_t d[32];
	unsigned dl = 0;
	int ok = EVP_Digest(p, (size_t)n, d, &dl, EVP_sha256(), NULL) == 1;
	BIO_free(b);
	if (!ok)
		return QTK_E_IO;
	qtk_hex(d, 32, hex);
	return 0;
}

int qtk_sig_sign(const qtk_sig_key *k, const uint8_t *msg, size_t n, uint8_t **sig, size_t *nsig, qtk_err *err)
{
	*sig = NULL;
	*nsig = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	size_t len = 0;
	uint8_t *s = NULL;
	int ok = c && EVP_DigestSignInit(c, NULL, k->md, NULL, k->pk) == 1 &&
		 EVP_DigestSign(c, NULL, &len, msg, n) == 1 && len && (s = qtk_malloc(len)) &&
		 EVP_DigestSign(c, s, &len, msg, n) == 1;
	EVP_MD_CTX_free(c);
	if (!ok) {
		qtk_free(s);
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "signing failed (libcrypto)");
	}
	*sig = s;
	*nsig = len;
	return 0;
}

int qtk_sig_verify(const qtk_sig_key *k, const uint8_t *msg, size_t n, const uint8_t *sig, size_t nsig)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestVerifyInit(c, NULL, k->md, NULL, k->pk) == 1 &&
		 EVP_DigestVerify(c, sig, nsig, msg, n) == 1;
	EVP_MD_CTX_free(c);
	return ok ? 0 : 1;
}

/* ---- hashing a model's files -------------------------------------------------------------- */

typedef struct walk {
	const qtk_sig_manifest *m;
	char **rel;
	size_t n, cap;
	bool symlinks;
	qtk_err *err;
} walk;

static bool ignored(const qtk_sig_manifest *m, const char *rel)
{
	for (size_t i = 0; i < m->nignore; i++) {
		size_t l = strlen(m->ignore[i]);
		while (l && m->ignore[i][l - 1] == '/')
			l--;
		if (l && !strncmp(rel, m->ignore[i], l) && (rel[l] == 0 || rel[l] == '/'))
			return true;
	}
	return false;
}

static int walk_add(walk *w, const char *rel)
{
	if (w->n == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		if (nc > (1u << 20))
			return qtk_err_set(w->err, QTK_E_DATA, NULL, -1, NULL, "more than a million files in the model");
		char **v = qtk_realloc(w->rel, nc * sizeof *v);
		if (!v)
			return oom(w->err);
		w->rel = v;
		w->cap = nc;
	}
	if (!(w->rel[w->n] = qtk_strdup(rel)))
		return oom(w->err);
	w->n++;
	return 0;
}

static int walk_dir(walk *w, const char *root, const char *sub, int depth)
{
	if (depth > 32)
		return qtk_err_set(w->err, QTK_E_DATA, root, -1, sub, "directories nested deeper than 32");
	char dir[4096];
	if ((size_t)snprintf(dir, sizeof dir, "%s%s%s", root, *sub ? "/" : "", sub) >= sizeof dir)
		return qtk_err_set(w->err, QTK_E_DATA, root, -1, sub, "path too long");
	DIR *d = opendir(dir);
	if (!d)
		return qtk_err_set(w->err, QTK_E_IO, dir, -1, NULL, "cannot read directory: %s", strerror(errno));
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char rel[4096], full[4096];
		if ((size_t)snprintf(rel, sizeof rel, "%s%s%s", sub, *sub ? "/" : "", e->d_name) >= sizeof rel ||
		    (size_t)snprintf(full, sizeof full, "%s/%s", root, rel) >= sizeof full) {
			rc = qtk_err_set(w->err, QTK_E_DATA, root, -1, NULL, "path too long");
			break;
		}
		if (ignored(w->m, rel))
			continue;
		struct stat l, s;
		if (lstat(full, &l) || stat(full, &s)) {
			rc = qtk_err_set(w->err, QTK_E_IO, full, -1, NULL, "cannot stat: %s", strerror(errno));
			break;
		}
		if (S_ISLNK(l.st_mode))
			w->symlinks = true;
		if (S_ISDIR(s.st_mode)) {
			if (S_ISLNK(l.st_mode))
				rc = qtk_err_set(w->err, QTK_E_DATA, full, -1, NULL, "a symbolic link to a directory is not supported");
			else
				rc = walk_dir(w, root, rel, depth + 1);
		} else if (S_ISREG(s.st_mode)) {
			rc = walk_add(w, rel);
		} else {
			rc = qtk_err_set(w->err, QTK_E_DATA, full, -1, NULL, "neither a file nor a directory");
		}
	}
	closedir(d);
	return rc;
}

/* SHA-256 of bytes [start, end) of path (end = UINT64_MAX: to the end); *size receives the file size. */
static int hash_range(const char *path, uint64_t start, uint64_t end, uint8_t out[32], uint64_t *size, qtk_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cannot open: %s", strerror(errno));
	struct stat st;
	if (fstat(fd, &st)) {
		close(fd);
		return qtk_err_set(err, QTK_E_IO, path, -1, NULL, "cannot stat: %s", strerror(errno));
	}
	*size = (uint64_t)st.st_size;
	if (end > *size)
		end = *size;
	enum { BS = 4 << 20 };
	uint8_t *buf = qtk_malloc(BS);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int rc = buf && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : oom(err);
	for (uint64_t off = start; !rc && off < end;) {
		size_t k = end - off < BS ? (size_t)(end - off) : BS;
		ssize_t r = pread(fd, buf, k, (off_t)off);
		if (r <= 0) {
			rc = qtk_err_set(err, QTK_E_IO, path, (int64_t)off, NULL, "read failed: %s",
					 r < 0 ? strerror(errno) : "file shrank");
			break;
		}
		EVP_DigestUpdate(md, buf, (size_t)r);
		off += (uint64_t)r;
	}
	unsigned l = 0;
	if (!rc)
		EVP_DigestFinal_ex(md, out, &l);
	EVP_MD_CTX_free(md);
	qtk_free(buf);
	close(fd);
	return rc;
}

static int add_item(qtk_sig_manifest *m, size_t *cap, const char *name, const char *alg, const uint8_t d[32],
		    qtk_err *err)
{
	if (m->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		qtk_sig_item *v = qtk_realloc(m->it, nc * sizeof *v);
		if (!v)
			return oom(err);
		m->it = v;
		*cap = nc;
	}
	qtk_sig_item *it = &m->it[m->n];
	it->name = qtk_strdup(name);
	it->alg = qtk_strdup(alg);
	memcpy(it->digest, d, 32);
	m->n++;
	return it->name && it->alg ? 0 : oom(err);
}

int qtk_sig_hash(const char *root, const char *const *rel, size_t nrel, qtk_sig_manifest *m, qtk_err *err)
{
	walk w = {.m = m, .err = err};
	int rc = 0;
	char base[4096];
	if (!rel) {
		rc = walk_dir(&w, root, "", 0);
		snprintf(base, sizeof base, "%s", root);
	} else {
		/* names relative to root's directory (root itself for ".") */
		const char *sl = strrchr(root, '/');
		if (sl)
			snprintf(base, sizeof base, "%.*s", (int)(sl - root), root);
		else
			snprintf(base, sizeof base, ".");
		if (sl == root)
			snprintf(base, sizeof base, "/");
		for (size_t i = 0; i < nrel && !rc; i++) {
			struct stat l;
			char full[8200];
			snprintf(full, sizeof full, "%s/%s", base, rel[i]);
			if (!strcmp(rel[i], "."))
				snprintf(full, sizeof full, "%s", root);
			if (!lstat(full, &l) && S_ISLNK(l.st_mode))
				w.symlinks = true;
			rc = walk_add(&w, rel[i]);
		}
	}
	char alg[64];
	if (m->shards)
		snprintf(alg, sizeof alg, "sha256-sharded-%llu", (unsigned long long)m->shard_size);
	else
		snprintf(alg, sizeof alg, "sha256");
	size_t cap = m->n;
	for (size_t i = 0; i < w.n && !rc; i++) {
		char full[8200];
		if (!strcmp(w.rel[i], "."))
			snprintf(full, sizeof full, "%s", root);
		else
			snprintf(full, sizeof full, "%s/%s", base, w.rel[i]);
		uint8_t d[32];
		uint64_t size = 0;
		if (!m->shards) {
			rc = hash_range(full, 0, UINT64_MAX, d, &size, err);
			rc = rc ? rc : add_item(m, &cap, w.rel[i], alg, d, err);
			continue;
		}
		struct stat st;
		if (stat(full, &st)) {
			rc = qtk_err_set(err, QTK_E_IO, full, -1, NULL, "cannot stat: %s", strerror(errno));
			break;
		}
		/* shards [0, s), [s, 2s), ... up to the size; an empty file has none */
		for (uint64_t a = 0; !rc && a < (uint64_t)st.st_size; a += m->shard_size) {
			uint64_t b = (uint64_t)st.st_size - a < m->shard_size ? (uint64_t)st.st_size : a + m->shard_size;
			char nm[4200];
			snprintf(nm, sizeof nm, "%s:%llu:%llu", w.rel[i], (unsigned long long)a, (unsigned long long)b);
			rc = hash_range(full, a, b, d, &size, err);
			rc = rc ? rc : add_item(m, &cap, nm, alg, d, err);
		}
	}
	if (w.symlinks)
		m->allow_symlinks = true;
	for (size_t i = 0; i < w.n; i++)
		qtk_free(w.rel[i]);
	qtk_free(w.rel);
	if (!rc) {
		qtk_sig_sort(m);
		items_root(m, m->root);
	}
	return rc;
}
