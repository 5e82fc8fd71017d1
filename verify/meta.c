/* meta.c - qverify's metadata checks: the record's per-key metadata digests against FILE's
 * (chat templates, tokenizer, special tokens, rope and context: a change fails and is named;
 * other keys are notes), and --against: FILE's behaviour-relevant metadata against SOURCE's. */
#include "verify.h"
#include <string.h>

static int oom(vstate *s) { return qtk_err_set(&s->err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

/* Append "'key' what" to a list of at most 4 names. */
static void name_key(char *list, size_t cap, size_t *n, const char *key, const char *what)
{
	if (*n < 4)
		snprintf(list + strlen(list), cap - strlen(list), "%s'%.100s' %s", *n ? ", " : "", key, what);
	else if (*n == 4)
		snprintf(list + strlen(list), cap - strlen(list), ", ...");
	(*n)++;
}

/* Compare the record's map (covered or other) with FILE's items of that kind. */
static void diff_map(const cJSON *map, const qtk_metad *d, bool covered, char *list, size_t cap, size_t *n)
{
	for (const cJSON *c = map ? map->child : NULL; c; c = c->next) {
		uint8_t want[32];
		qtk_prov_unhex(c->valuestring, want);
		const qtk_metad_item *it = qtk_metad_find(d, c->string);
		if (!it)
			name_key(list, cap, n, c->string, "removed");
		else if (memcmp(it->d, want, 32))
			name_key(list, cap, n, c->string, "differs");
	}
	for (size_t i = 0; i < d->n; i++)
		if (d->it[i].covered == covered && !cJSON_GetObjectItemCaseSensitive(map, d->it[i].key))
			name_key(list, cap, n, d->it[i].key, "added");
}

/* The record's output.metadata against FILE's metadata. */
int qv_chk_metadata(vstate *s)
{
	const cJSON *out = cJSON_GetObjectItemCaseSensitive(s->rec, "output");
	const cJSON *md = cJSON_GetObjectItemCaseSensitive(out, "metadata");
	if (!s->rec || !md)
		return 0;
	const cJSON *cont = cJSON_GetObjectItemCaseSensitive(out, "container");
	if (cJSON_IsString(cont) && strcmp(cont->valuestring, qtk_model_format(s->m))) {
		qv_result(s, "metadata", "note", "not compared: %s records %s metadata keys, this is %s (re-containered)",
			  s->rec_name, cont->valuestring, qtk_model_format(s->m));
		return 0;
	}
	qtk_metad d;
	int rc = qtk_meta_digests(s->m, !strcmp(qtk_model_format(s->m), "hf"), &d, &s->err);
	if (rc)
		return rc;
	char bad[400] = "", cos[400] = "";
	size_t nb = 0, nc = 0;
	diff_map(cJSON_GetObjectItemCaseSensitive(md, "keys"), &d, true, bad, sizeof bad, &nb);
	if (strcmp(qtk_model_format(s->m), "hf"))
		diff_map(cJSON_GetObjectItemCaseSensitive(md, "other"), &d, false, cos, sizeof cos, &nc);
	size_t ncov = 0;
	for (size_t i = 0; i < d.n; i++)
		ncov += d.it[i].covered;
	qtk_metad_free(&d);
	if (nb)
		qv_result(s, "metadata", "failed", "%zu behaviour-relevant key%s changed since %s: %s", nb, nb == 1 ? "" : "s",
			  s->rec_name, bad);
	else
		qv_result(s, "metadata", "ok", "%zu behaviour-relevant keys (chat template, tokenizer, special tokens, "
			  "rope, context) match %s", ncov, s->rec_name);
	if (nc)
		qv_result(s, "metadata_other", "note", "%zu other key%s changed (not behaviour-relevant): %s", nc,
			  nc == 1 ? "" : "s", cos);
	return 0;
}

/* The model's behaviour-relevant metadata in GGUF key space: its own for GGUF/QPK/safetensors,
 * an HF directory mapped the way llama.cpp's converter maps it (*mapped set: a new model). */
static int gguf_space(qtk_model *m, qtk_model **mapped, qtk_metad *d, qtk_err *err)
{
	*mapped = NULL;
	if (strcmp(qtk_model_format(m), "hf"))
		return qtk_meta_digests(m, false, d, err);
	qtk_model *meta = qtk_model_new();
	qtk_hfmap *map = NULL;
	if (!meta)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	int rc = qtk_hfmap_hf_to_gguf(m, meta, &map, err);
	qtk_hfmap_free(map);
	if (rc) {
		qtk_close(meta);
		return rc;
	}
	*mapped = meta;
	return qtk_meta_digests(meta, false, d, err);
}

/* --against: FILE's behaviour-relevant metadata against SOURCE's, key by key. */
int qv_chk_against_metadata(vstate *s)
{
	bool fh = !strcmp(qtk_model_format(s->m), "hf"), sh = !strcmp(qtk_model_format(s->src), "hf");
	qtk_metad a, b;
	qtk_model *ma = NULL, *mb = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	int rc;
	if (fh == sh) {
		rc = qtk_meta_digests(s->m, fh, &a, &s->err);
		rc = rc ? rc : qtk_meta_digests(s->src, sh, &b, &s->err);
		if (rc) {
			qtk_metad_free(&a);
			return rc;
		}
	} else if ((rc = gguf_space(s->m, &ma, &a, &e)) || (rc = gguf_space(s->src, &mb, &b, &e))) {
		/* an HF family qtk cannot map: the comparison cannot be made across containers */
		qtk_metad_free(&a);
		qtk_close(ma);
		qtk_close(mb);
		if (rc == QTK_E_IO)
			return oom(s);
		qv_result(s, "metadata", "note", "not compared across containers: %.300s", e.msg);
		return 0;
	}
	char diff[400] = "", only[400] = "";
	size_t nd = 0, no = 0, same = 0;
	for (size_t i = 0; i < a.n; i++) {
		if (!a.it[i].covered)
			continue;
		const qtk_metad_item *o = qtk_metad_find(&b, a.it[i].key);
		if (!o)
			name_key(only, sizeof only, &no, a.it[i].key, "only in FILE");
		else if (memcmp(o->d, a.it[i].d, 32))
			name_key(diff, sizeof diff, &nd, a.it[i].key, "differs");
		else
			same++;
	}
	for (size_t i = 0; i < b.n; i++)
		if (b.it[i].covered && !qtk_metad_find(&a, b.it[i].key))
			name_key(only, sizeof only, &no, b.it[i].key, "only in SOURCE");
	qtk_metad_free(&a);
	qtk_metad_free(&b);
	qtk_close(ma);
	qtk_close(mb);
	if (nd)
		qv_result(s, "metadata", "failed", "%zu behaviour-relevant key%s differ%s from the source: %s", nd,
			  nd == 1 ? "" : "s", nd == 1 ? "s" : "", diff);
	else
		qv_result(s, "metadata", "ok", "%zu behaviour-relevant keys (chat template, tokenizer, special tokens, rope, "
			  "context) equal the source's%s", same, fh != sh ? " (the HF side as llama.cpp's converter maps it)" : "");
	if (no)
		qv_result(s, "metadata_keys", "note", "%zu key%s on one side only: %s", no, no == 1 ? "" : "s", only);
	return 0;
}
