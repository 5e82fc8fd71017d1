/* bom.c - qverify --emit-bom: an AI-BOM of FILE (docs/provenance.md, "AI-BOM").
 *
 * CycloneDX 1.6: the model is metadata.component (type machine-learning-model) with its files'
 * SHA-256 (nested file components when there are several), the quantization and content
 * digests as properties, the source model of its provenance record as pedigree.ancestors and
 * the conversion as a formulation workflow. SPDX 3.0.1: the same as JSON-LD, an ai_AIPackage
 * with software_File elements, a source ai_AIPackage it is descendantOf, and a build_Build.
 * Strings taken from the model are shown through the sanitiser (text.h) so the output is
 * valid UTF-8 whatever the file holds. */
#include "verify.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct bomctx {
	vstate *s;
	char name[512];        /* the model's name */
	char arch[128];        /* its architecture, "" when unknown */
	char quant[128];       /* the quantization: the record's target, else the most common encoding */
	char time[32];
	char uuid[40];         /* derived from the file hashes and roots: the same model, the same BOM */
	char enc_root[65], dec_root[65];
	const cJSON *src;      /* embedded record's source, or NULL */
	const cJSON *tr;       /* embedded record's transform, or NULL */
	char src_name[512], src_url[1024], src_rev[256];
} bomctx;

static char *safe(const char *s)
{
	return qtk_text_dup(s, strlen(s), 0);
}

/* cJSON string item from untrusted text. */
static cJSON *sstr(const char *s)
{
	char *t = safe(s ? s : "");
	cJSON *j = cJSON_CreateString(t ? t : "");
	qtk_free(t);
	return j;
}

static void scopy(char *dst, size_t cap, const char *s)
{
	char *t = safe(s);
	snprintf(dst, cap, "%s", t ? t : "");
	qtk_free(t);
}

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(j) ? j->valuestring : NULL;
}

static const char *kv_str(const qtk_model *m, const char *key)
{
	const qtk_kv *kv = qtk_kv_find(m, key);
	return kv && kv->val.type == QTK_V_STR ? kv->val.v.str.s : NULL;
}

static void prop(cJSON *arr, const char *name, const char *value)
{
	cJSON *p = cJSON_CreateObject();
	cJSON_AddStringToObject(p, "name", name);
	cJSON_AddItemToObject(p, "value", sstr(value));
	cJSON_AddItemToArray(arr, p);
}

static int gather(bomctx *c)
{
	vstate *s = c->s;
	qtk_model *m = s->m;
	const char *nm = kv_str(m, "general.name");
	scopy(c->name, sizeof c->name, nm && *nm ? nm : qtk_path_base(s->o->file));
	const char *ar = kv_str(m, "general.architecture");
	const qtk_blob *cfg = qtk_blob_find(m, "config.json");
	cJSON *cj = NULL;
	if (!ar && cfg && (cj = cJSON_ParseWithLength((const char *)cfg->data, cfg->len)))
		ar = jstr(cj, "model_type");
	scopy(c->arch, sizeof c->arch, ar ? ar : "");
	cJSON_Delete(cj);
	if (s->embedded) {
		c->src = cJSON_GetObjectItemCaseSensitive(s->embedded, "source");
		c->tr = cJSON_GetObjectItemCaseSensitive(s->embedded, "transform");
	}
	const char *target = c->tr ? jstr(cJSON_GetObjectItemCaseSensitive(c->tr, "params"), "target") : NULL;
	if (target && strcmp(target, "keep"))
		scopy(c->quant, sizeof c->quant, target);
	else {
		/* the encoding of the most bytes (the first of those in leaf order on a tie), summed
		 * per encoding by a map from its id to its first leaf (linear in the leaves) */
		qtk_strmap ids = {0};
		uint64_t *sum = qtk_calloc(s->d.n ? s->d.n : 1, sizeof *sum), best = 0;
		for (size_t i = 0; sum && i < s->d.n; i++) {
			size_t first = i;
			if (qtk_strmap_put(&ids, s->d.leaf[i].enc_id, i, &first) < 0) {
				qtk_free(sum);
				sum = NULL; /* out of memory: the BOM names no quantization */
				break;
			}
			sum[first] += s->d.leaf[i].n_bytes;
		}
		for (size_t i = 0; sum && i < s->d.n; i++)
			if (sum[i] > best) {
				best = sum[i];
				snprintf(c->quant, sizeof c->quant, "%s", s->d.leaf[i].enc_id);
			}
		qtk_free(sum);
		qtk_strmap_free(&ids);
	}
	if (c->src) {
		const char *v;
		scopy(c->src_name, sizeof c->src_name, (v = jstr(c->src, "name")) ? v : "source model");
		if ((v = jstr(c->src, "url")) && (!strncmp(v, "https://", 8) || !strncmp(v, "http://", 7)) &&
		    !strpbrk(v, " \"<>\\^`{|}") && qtk_text_clean(v, strlen(v), QTK_TEXT_ASCII))
			snprintf(c->src_url, sizeof c->src_url, "%s", v);
		scopy(c->src_rev, sizeof c->src_rev, (v = jstr(c->src, "revision")) ? v : "");
	}
	qtk_hex(s->d.enc_root, 32, c->enc_root);
	qtk_hex(s->d.dec_root, 32, c->dec_root);
	qtk_prov_time(qtk_prov_now(), c->time, sizeof c->time);
	/* serial number: SHA-256 of the file hashes and the roots, as an RFC 9562 version-8 UUID */
	qtk_sha256 *h = qtk_sha256_begin();
	uint8_t d[32];
	qtk_sha256_add(h, "qtk-bom-v1", 10);
	qtk_sha256_add(h, s->d.enc_root, 32);
	qtk_sha256_add(h, s->d.dec_root, 32);
	for (size_t i = 0; i < s->files.n; i++) {
		qtk_sha256_add(h, s->files.f[i].path, strlen(s->files.f[i].path) + 1);
		qtk_sha256_add(h, s->files.f[i].sha256, 32);
	}
	if (!qtk_sha256_end(h, d))
		return qtk_err_set(&s->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	d[6] = (uint8_t)((d[6] & 0x0f) | 0x80);
	d[8] = (uint8_t)((d[8] & 0x3f) | 0x80);
	char x[33];
	qtk_hex(d, 16, x);
	snprintf(c->uuid, sizeof c->uuid, "%.8s-%.4s-%.4s-%.4s-%.12s", x, x + 8, x + 12, x + 16, x + 20);
	return 0;
}

/* Properties shared by both formats: name/value pairs of the model. */
typedef void (*kvfn)(void *arg, const char *name, const char *value);

static void model_facts(bomctx *c, kvfn fn, void *arg)
{
	vstate *s = c->s;
	char b[256];
	fn(arg, "qtk:container", qtk_model_format(s->m));
	if (c->quant[0])
		fn(arg, "qtk:quantization", c->quant);
	/* tensors per encoding, in the order of first appearance (leaves are sorted by name) */
	for (size_t i = 0; i < s->d.n; i++) {
		bool seen = false;
		for (size_t k = 0; k < i && !seen; k++)
			seen = !strcmp(s->d.leaf[k].enc_id, s->d.leaf[i].enc_id);
		if (seen)
			continue;
		size_t cnt = 0;
		for (size_t k = i; k < s->d.n; k++)
			cnt += !strcmp(s->d.leaf[k].enc_id, s->d.leaf[i].enc_id);
		snprintf(b, sizeof b, "%s=%zu", s->d.leaf[i].enc_id, cnt);
		fn(arg, "qtk:encoding", b);
	}
	snprintf(b, sizeof b, "%zu", s->d.n);
	fn(arg, "qtk:tensor_count", b);
	fn(arg, "qtk:tensor_root:scheme", qtk_digest_scheme_name(s->d.scheme));
	fn(arg, "qtk:tensor_root:encoded", c->enc_root);
	fn(arg, "qtk:tensor_root:decoded", c->dec_root);
	if (s->embedded) {
		uint8_t h[32];
		char hx[65];
		if (!qtk_prov_sha256(s->embedded, h)) {
			qtk_hex(h, 32, hx);
			fn(arg, "qtk:provenance:record_sha256", hx);
		}
	}
	const qtk_audit *a = &s->audit;
	snprintf(b, sizeof b, "%zu", a->ncode);
	fn(arg, "qtk:audit:code", b);
	snprintf(b, sizeof b, "%zu", a->ntemplates);
	fn(arg, "qtk:audit:templates", b);
	for (size_t i = 0; i < a->n && i < QTK_AUDIT_LIST; i++) {
		char f[640];
		snprintf(f, sizeof f, "%s %s: %s", a->f[i].kind, a->f[i].where, a->f[i].detail);
		fn(arg, "qtk:audit:finding", f);
	}
}

static void transform_facts(bomctx *c, kvfn fn, void *arg)
{
	const char *v;
	if (!c->tr)
		return;
	if ((v = jstr(c->tr, "kind")))
		fn(arg, "qtk:transform:kind", v);
	if ((v = jstr(c->tr, "method")))
		fn(arg, "qtk:transform:method", v);
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(c->tr, "params");
	for (const cJSON *e = p ? p->child : NULL; e; e = e->next)
		if (cJSON_IsString(e)) {
			char k[300];
			snprintf(k, sizeof k, "qtk:param:%s", e->string);
			fn(arg, k, e->valuestring);
		}
	const cJSON *tool = cJSON_GetObjectItemCaseSensitive(c->s->embedded, "tool");
	if (tool && (v = jstr(tool, "version")))
		fn(arg, "qtk:tool:version", v);
	if ((v = jstr(c->s->embedded, "time")))
		fn(arg, "qtk:time", v);
}

static void cdx_prop(void *arg, const char *name, const char *value)
{
	char *n = safe(name);
	prop(arg, n ? n : "", value);
	qtk_free(n);
}

static cJSON *cdx_hash(const uint8_t *sha)
{
	char hx[65];
	qtk_hex(sha, 32, hx);
	cJSON *hs = cJSON_CreateArray(), *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "alg", "SHA-256");
	cJSON_AddStringToObject(h, "content", hx);
	cJSON_AddItemToArray(hs, h);
	return hs;
}

/* The source's files (sha256 hex from the record) as hashes or nested components. */
static void cdx_source_files(cJSON *comp, const cJSON *files, const char *prefix)
{
	int n = cJSON_GetArraySize(files);
	uint8_t sha[32];
	if (n == 1 && qtk_prov_unhex(jstr(files->child, "sha256"), sha)) {
		cJSON_AddItemToObject(comp, "hashes", cdx_hash(sha));
		return;
	}
	cJSON *sub = NULL;
	int i = 0;
	for (const cJSON *f = files ? files->child : NULL; f; f = f->next, i++) {
		if (!jstr(f, "path") || !qtk_prov_unhex(jstr(f, "sha256"), sha))
			continue;
		if (!sub)
			sub = cJSON_AddArrayToObject(comp, "components");
		cJSON *fc = cJSON_CreateObject();
		char ref[64];
		snprintf(ref, sizeof ref, "%s-file-%d", prefix, i);
		cJSON_AddStringToObject(fc, "type", "file");
		cJSON_AddStringToObject(fc, "bom-ref", ref);
		cJSON_AddItemToObject(fc, "name", sstr(jstr(f, "path")));
		cJSON_AddItemToObject(fc, "hashes", cdx_hash(sha));
		cJSON_AddItemToArray(sub, fc);
	}
}

static cJSON *cyclonedx(bomctx *c)
{
	vstate *s = c->s;
	cJSON *r = cJSON_CreateObject();
	char urn[64];
	snprintf(urn, sizeof urn, "urn:uuid:%s", c->uuid);
	cJSON_AddStringToObject(r, "bomFormat", "CycloneDX");
	cJSON_AddStringToObject(r, "specVersion", "1.6");
	cJSON_AddStringToObject(r, "serialNumber", urn);
	cJSON_AddNumberToObject(r, "version", 1);
	cJSON *md = cJSON_AddObjectToObject(r, "metadata");
	cJSON_AddStringToObject(md, "timestamp", c->time);
	cJSON *tools = cJSON_AddArrayToObject(cJSON_AddObjectToObject(md, "tools"), "components");
	cJSON *tool = cJSON_CreateObject();
	cJSON_AddStringToObject(tool, "type", "application");
	cJSON_AddStringToObject(tool, "name", "qtk");
	cJSON_AddStringToObject(tool, "version", QTK_VERSION);
	cJSON_AddItemToArray(tools, tool);
	/* the model */
	cJSON *mc = cJSON_AddObjectToObject(md, "component");
	cJSON_AddStringToObject(mc, "type", "machine-learning-model");
	cJSON_AddStringToObject(mc, "bom-ref", "model");
	cJSON_AddStringToObject(mc, "name", c->name);
	if (s->files.n == 1) {
		cJSON_AddItemToObject(mc, "hashes", cdx_hash(s->files.f[0].sha256));
	} else {
		cJSON *sub = cJSON_AddArrayToObject(mc, "components");
		for (size_t i = 0; i < s->files.n; i++) {
			cJSON *fc = cJSON_CreateObject();
			char ref[64];
			snprintf(ref, sizeof ref, "model-file-%zu", i);
			cJSON_AddStringToObject(fc, "type", "file");
			cJSON_AddStringToObject(fc, "bom-ref", ref);
			cJSON_AddItemToObject(fc, "name", sstr(s->files.f[i].path));
			cJSON_AddItemToObject(fc, "hashes", cdx_hash(s->files.f[i].sha256));
			cJSON_AddItemToArray(sub, fc);
		}
	}
	cJSON *props = cJSON_AddArrayToObject(mc, "properties");
	model_facts(c, cdx_prop, props);
	cJSON *card = cJSON_AddObjectToObject(mc, "modelCard");
	cJSON *mp = cJSON_AddObjectToObject(card, "modelParameters");
	cJSON_AddStringToObject(mp, "task", "text-generation");
	if (c->arch[0])
		cJSON_AddStringToObject(mp, "architectureFamily", c->arch);
	cJSON *cprops = cJSON_AddArrayToObject(card, "properties");
	if (c->quant[0])
		prop(cprops, "quantization", c->quant);
	if (c->src) {
		cJSON *anc = cJSON_AddArrayToObject(cJSON_AddObjectToObject(mc, "pedigree"), "ancestors");
		cJSON *sc = cJSON_CreateObject();
		cJSON_AddStringToObject(sc, "type", "machine-learning-model");
		cJSON_AddStringToObject(sc, "bom-ref", "source-model");
		cJSON_AddStringToObject(sc, "name", c->src_name);
		if (c->src_rev[0])
			cJSON_AddStringToObject(sc, "version", c->src_rev);
		cdx_source_files(sc, cJSON_GetObjectItemCaseSensitive(c->src, "files"), "source");
		if (c->src_url[0]) {
			cJSON *er = cJSON_CreateObject();
			cJSON_AddStringToObject(er, "type", "distribution");
			cJSON_AddStringToObject(er, "url", c->src_url);
			cJSON_AddItemToArray(cJSON_AddArrayToObject(sc, "externalReferences"), er);
		}
		cJSON *sp = cJSON_AddArrayToObject(sc, "properties");
		const char *v;
		if ((v = jstr(c->src, "container")))
			cdx_prop(sp, "qtk:container", v);
		const cJSON *rt = cJSON_GetObjectItemCaseSensitive(c->src, "tensor_root");
		if ((v = jstr(rt, "scheme")))
			cdx_prop(sp, "qtk:tensor_root:scheme", v);
		if ((v = jstr(rt, "encoded")))
			cdx_prop(sp, "qtk:tensor_root:encoded", v);
		if ((v = jstr(rt, "decoded")))
			cdx_prop(sp, "qtk:tensor_root:decoded", v);
		cJSON_AddItemToArray(anc, sc);
		/* the conversion */
		cJSON *fm = cJSON_CreateObject();
		cJSON_AddStringToObject(fm, "bom-ref", "formula-conversion");
		cJSON *wf = cJSON_CreateObject();
		char uid[80];
		snprintf(uid, sizeof uid, "qtk-conversion-%.16s", c->enc_root);
		cJSON_AddStringToObject(wf, "bom-ref", "conversion");
		cJSON_AddStringToObject(wf, "uid", uid);
		cJSON_AddStringToObject(wf, "name", "qconvert");
		cJSON_AddStringToObject(wf, "description", "conversion by qtk's qconvert, from its provenance record");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(wf, "taskTypes"), cJSON_CreateString("build"));
		cJSON *in = cJSON_CreateObject(), *out = cJSON_CreateObject();
		cJSON_AddStringToObject(cJSON_AddObjectToObject(in, "resource"), "ref", "source-model");
		cJSON_AddStringToObject(cJSON_AddObjectToObject(out, "resource"), "ref", "model");
		cJSON_AddItemToArray(cJSON_AddArrayToObject(wf, "inputs"), in);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(wf, "outputs"), out);
		transform_facts(c, cdx_prop, cJSON_AddArrayToObject(wf, "properties"));
		cJSON_AddItemToArray(cJSON_AddArrayToObject(fm, "workflows"), wf);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "formulation"), fm);
	}
	return r;
}

/* ---- SPDX 3.0.1 ------------------------------------------------------------------------ */

typedef struct spdx {
	cJSON *graph, *elements;
	char ns[80];
} spdx;

static cJSON *sp_elem(spdx *x, const char *type, const char *id)
{
	char full[200];
	snprintf(full, sizeof full, "%s%s", x->ns, id);
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "type", type);
	cJSON_AddStringToObject(e, "spdxId", full);
	cJSON_AddStringToObject(e, "creationInfo", "_:creationinfo");
	cJSON_AddItemToArray(x->graph, e);
	cJSON_AddItemToArray(x->elements, cJSON_CreateString(full));
	return e;
}

static cJSON *sp_ref(const spdx *x, const char *id)
{
	char full[200];
	snprintf(full, sizeof full, "%s%s", x->ns, id);
	return cJSON_CreateString(full);
}

static cJSON *sp_hash(const char *hex)
{
	cJSON *hs = cJSON_CreateArray(), *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "type", "Hash");
	cJSON_AddStringToObject(h, "algorithm", "sha256");
	cJSON_AddStringToObject(h, "hashValue", hex);
	cJSON_AddItemToArray(hs, h);
	return hs;
}

static void sp_dict(void *arg, const char *name, const char *value)
{
	cJSON *d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, "type", "DictionaryEntry");
	cJSON_AddItemToObject(d, "key", sstr(name));
	cJSON_AddItemToObject(d, "value", sstr(value));
	cJSON_AddItemToArray(arg, d);
}

static void sp_rel(spdx *x, const char *id, const char *from, const char *type, cJSON *to)
{
	cJSON *r = sp_elem(x, "Relationship", id);
	cJSON_AddItemToObject(r, "from", sp_ref(x, from));
	cJSON_AddStringToObject(r, "relationshipType", type);
	cJSON_AddItemToObject(r, "to", to);
}

static cJSON *spdx3(bomctx *c)
{
	vstate *s = c->s;
	cJSON *r = cJSON_CreateObject();
	cJSON_AddStringToObject(r, "@context", "https://spdx.org/rdf/3.0.1/spdx-context.jsonld");
	spdx x;
	x.graph = cJSON_AddArrayToObject(r, "@graph");
	x.elements = cJSON_CreateArray();
	snprintf(x.ns, sizeof x.ns, "urn:uuid:%s#", c->uuid);
	cJSON *ci = cJSON_CreateObject();
	cJSON_AddStringToObject(ci, "type", "CreationInfo");
	cJSON_AddStringToObject(ci, "@id", "_:creationinfo");
	cJSON_AddStringToObject(ci, "specVersion", "3.0.1");
	cJSON_AddStringToObject(ci, "created", c->time);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(ci, "createdBy"), sp_ref(&x, "agent-qtk"));
	cJSON_AddItemToArray(cJSON_AddArrayToObject(ci, "createdUsing"), sp_ref(&x, "tool-qtk"));
	cJSON_AddItemToArray(x.graph, ci);
	cJSON_AddStringToObject(sp_elem(&x, "SoftwareAgent", "agent-qtk"), "name", "qtk");
	char tn[64];
	snprintf(tn, sizeof tn, "qtk %s", QTK_VERSION);
	cJSON_AddStringToObject(sp_elem(&x, "Tool", "tool-qtk"), "name", tn);
	/* the model */
	cJSON *m = sp_elem(&x, "ai_AIPackage", "model");
	cJSON_AddStringToObject(m, "name", c->name);
	cJSON_AddStringToObject(m, "software_primaryPurpose", "model");
	if (s->files.n == 1) {
		char hx[65];
		qtk_hex(s->files.f[0].sha256, 32, hx);
		cJSON_AddItemToObject(m, "verifiedUsing", sp_hash(hx));
	}
	cJSON *hp = cJSON_AddArrayToObject(m, "ai_hyperparameter");
	model_facts(c, sp_dict, hp);
	if (c->arch[0]) {
		char d[200];
		snprintf(d, sizeof d, "architecture: %s", c->arch);
		cJSON_AddStringToObject(m, "description", d);
	}
	cJSON *files = cJSON_CreateArray();
	for (size_t i = 0; i < s->files.n; i++) {
		char id[64], hx[65];
		snprintf(id, sizeof id, "model-file-%zu", i);
		cJSON *f = sp_elem(&x, "software_File", id);
		cJSON_AddItemToObject(f, "name", sstr(s->files.f[i].path));
		qtk_hex(s->files.f[i].sha256, 32, hx);
		cJSON_AddItemToObject(f, "verifiedUsing", sp_hash(hx));
		cJSON_AddItemToArray(files, sp_ref(&x, id));
	}
	sp_rel(&x, "rel-contains", "model", "contains", files);
	if (c->src) {
		cJSON *sm = sp_elem(&x, "ai_AIPackage", "source-model");
		cJSON_AddStringToObject(sm, "name", c->src_name);
		cJSON_AddStringToObject(sm, "software_primaryPurpose", "model");
		if (c->src_rev[0])
			cJSON_AddStringToObject(sm, "software_packageVersion", c->src_rev);
		if (c->src_url[0])
			cJSON_AddStringToObject(sm, "software_downloadLocation", c->src_url);
		const cJSON *sf = cJSON_GetObjectItemCaseSensitive(c->src, "files");
		uint8_t sha[32];
		if (cJSON_GetArraySize(sf) == 1 && qtk_prov_unhex(jstr(sf->child, "sha256"), sha))
			cJSON_AddItemToObject(sm, "verifiedUsing", sp_hash(jstr(sf->child, "sha256")));
		const cJSON *rt = cJSON_GetObjectItemCaseSensitive(c->src, "tensor_root");
		cJSON *shp = cJSON_AddArrayToObject(sm, "ai_hyperparameter");
		const char *v;
		if ((v = jstr(c->src, "container")))
			sp_dict(shp, "qtk:container", v);
		if ((v = jstr(rt, "scheme")))
			sp_dict(shp, "qtk:tensor_root:scheme", v);
		if ((v = jstr(rt, "encoded")))
			sp_dict(shp, "qtk:tensor_root:encoded", v);
		if ((v = jstr(rt, "decoded")))
			sp_dict(shp, "qtk:tensor_root:decoded", v);
		cJSON *to = cJSON_CreateArray();
		cJSON_AddItemToArray(to, sp_ref(&x, "source-model"));
		sp_rel(&x, "rel-descendant", "model", "descendantOf", to);
		cJSON *b = sp_elem(&x, "build_Build", "conversion");
		cJSON_AddStringToObject(b, "build_buildType", "urn:qtk:qconvert");
		transform_facts(c, sp_dict, cJSON_AddArrayToObject(b, "build_parameter"));
		to = cJSON_CreateArray();
		cJSON_AddItemToArray(to, sp_ref(&x, "source-model"));
		sp_rel(&x, "rel-input", "conversion", "hasInput", to);
		to = cJSON_CreateArray();
		cJSON_AddItemToArray(to, sp_ref(&x, "model"));
		sp_rel(&x, "rel-output", "conversion", "hasOutput", to);
	}
	cJSON *doc = sp_elem(&x, "SpdxDocument", "document");
	cJSON_AddStringToObject(doc, "name", c->name);
	cJSON *pc = cJSON_AddArrayToObject(doc, "profileConformance");
	static const char *const profiles[] = {"core", "software", "ai", "build"};
	for (size_t i = 0; i < (c->src ? 4u : 3u); i++)
		cJSON_AddItemToArray(pc, cJSON_CreateString(profiles[i]));
	cJSON_AddItemToArray(cJSON_AddArrayToObject(doc, "rootElement"), sp_ref(&x, "model"));
	/* every element but the document itself */
	cJSON_DeleteItemFromArray(x.elements, cJSON_GetArraySize(x.elements) - 1);
	cJSON_AddItemToObject(doc, "element", x.elements);
	return r;
}

int qv_emit_bom(vstate *s)
{
	bomctx c;
	memset(&c, 0, sizeof c);
	c.s = s;
	int rc = gather(&c);
	if (rc)
		return rc;
	cJSON *r = !strcmp(s->o->bom, "spdx") ? spdx3(&c) : cyclonedx(&c);
	char *txt = r ? cJSON_Print(r) : NULL;
	cJSON_Delete(r);
	if (!txt)
		return qtk_err_set(&s->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	const bool ok = printf("%s\n", txt) >= 0 && fflush(stdout) == 0;
	cJSON_free(txt);
	return ok ? 0 : qtk_err_set(&s->err, QTK_E_IO, "<stdout>", -1, NULL, "cannot write the AI-BOM: %s", strerror(errno));
}
