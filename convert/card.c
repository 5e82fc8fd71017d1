/* card.c - the model card (README.md) of a Hugging Face directory output (docs/cli.md, "Model
 * card"): YAML front matter naming the source (base_model, base_model_relation: quantized) so
 * the hub's model tree links the output to it, and a short body. It goes to the writer as a
 * side file like config.json; the source's own README.md describes the source and is not
 * carried. */
#include "convert.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *kv_str(const qtk_model *m, const char *key)
{
	const qtk_kv *kv = qtk_kv_find(m, key);
	return kv && kv->val.type == QTK_V_STR ? kv->val.v.str.s : NULL;
}

/* A hub repository id: owner/name, each [A-Za-z0-9][A-Za-z0-9._-]{0,95}, no "--" or "..". */
bool conv_repo_id_ok(const char *s)
{
	if (!s)
		return false;
	const char *slash = strchr(s, '/');
	if (!slash || strchr(slash + 1, '/') || strstr(s, "--") || strstr(s, ".."))
		return false;
	for (int part = 0; part < 2; part++) {
		const char *a = part ? slash + 1 : s, *b = part ? s + strlen(s) : slash;
		if (b - a < 1 || b - a > 96 || !isalnum((unsigned char)*a))
			return false;
		for (const char *p = a; p < b; p++)
			if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
				return false;
	}
	return true;
}

/* The source's hub id: GGUF general.source.huggingface.repository, a huggingface.co URL in
 * general.source.url / general.base_model.0.repo_url, or config.json's _name_or_path. */
static bool source_repo(const qtk_model *in, char *out, size_t n)
{
	static const char *const direct[] = {"general.source.huggingface.repository", NULL};
	static const char *const urls[] = {"general.source.url", "general.source.repo_url", "general.base_model.0.repo_url",
					   NULL};
	for (const char *const *k = direct; *k; k++) {
		const char *v = kv_str(in, *k);
		if (conv_repo_id_ok(v)) {
			snprintf(out, n, "%s", v);
			return true;
		}
	}
	for (const char *const *k = urls; *k; k++) {
		const char *v = kv_str(in, *k);
		static const char pre[] = "https://huggingface.co/";
		if (v && !strncmp(v, pre, sizeof pre - 1) && conv_repo_id_ok(v + sizeof pre - 1)) {
			snprintf(out, n, "%s", v + sizeof pre - 1);
			return true;
		}
	}
	const qtk_blob *cfg = qtk_blob_find(in, "config.json");
	cJSON *j = cfg ? cJSON_ParseWithLength((const char *)cfg->data, cfg->len) : NULL;
	const cJSON *np = cJSON_GetObjectItemCaseSensitive(j, "_name_or_path");
	bool ok = cJSON_IsString(np) && conv_repo_id_ok(np->valuestring);
	if (ok)
		snprintf(out, n, "%s", np->valuestring);
	cJSON_Delete(j);
	return ok;
}

/* The license of the source's card (a plain SPDX-like id in its front matter), or "". */
static void source_license(const qtk_model *in, char *out, size_t n)
{
	out[0] = 0;
	const qtk_blob *b = qtk_blob_find(in, "README.md");
	if (!b || b->len < 8 || memcmp(b->data, "---\n", 4))
		return;
	const char *s = (const char *)b->data, *end = s + b->len;
	const char *fm_end = memmem(s + 3, b->len - 3, "\n---", 4);
	if (!fm_end)
		return;
	for (const char *p = s + 3; p && p < fm_end; p = memchr(p + 1, '\n', (size_t)(end - p - 1))) {
		if (strncmp(p, "\nlicense:", 9))
			continue;
		const char *v = p + 9;
		while (v < fm_end && *v == ' ')
			v++;
		size_t k = 0;
		while (v + k < fm_end && (isalnum((unsigned char)v[k]) || v[k] == '.' || v[k] == '-' || v[k] == '+'))
			k++;
		if (k && k < n && k <= 64 && (v + k == fm_end || v[k] == '\n' || v[k] == '\r'))
			snprintf(out, n, "%.*s", (int)k, v);
		return;
	}
}

static bool is_float_target(const char *t)
{
	static const char *const f[] = {"f32", "f16", "bf16", "keep", "float", "fp16", "fp32", NULL};
	for (const char *const *p = f; *p; p++)
		if (!strcasecmp(t, *p))
			return true;
	return false;
}

int conv_model_card(const qtk_model *in, qtk_model *d, const conv_opts *o, qtk_err *err)
{
	char repo[200] = "", lic[80], tgt[64] = "";
	bool have_repo = source_repo(in, repo, sizeof repo);
	source_license(in, lic, sizeof lic);
	const char *t = o->target_name;
	if (t) { /* shown only when plain */
		size_t k = 0;
		while (t[k] && k < sizeof tgt - 1 && (isalnum((unsigned char)t[k]) || strchr("._-", t[k])))
			k++;
		if (!t[k])
			snprintf(tgt, sizeof tgt, "%s", t);
	}
	bool quantized = tgt[0] && !is_float_target(tgt);
	qtk_buf b = {0};
	qtk_buf_printf(&b, "---\n");
	if (have_repo) {
		qtk_buf_printf(&b, "base_model: %s\n", repo);
		if (quantized)
			qtk_buf_printf(&b, "base_model_relation: quantized\n");
	}
	if (lic[0])
		qtk_buf_printf(&b, "license: %s\n", lic);
	qtk_buf_printf(&b, "tags:\n- qtk\n");
	if (quantized) {
		char low[64];
		size_t k = 0;
		for (; tgt[k]; k++)
			low[k] = (char)tolower((unsigned char)tgt[k]);
		low[k] = 0;
		qtk_buf_printf(&b, "- %s\n", low);
	}
	qtk_buf_printf(&b, "---\n\n");
	if (have_repo)
		qtk_buf_printf(&b, "# %s%s%s\n\n%s [%s](https://huggingface.co/%s) with qtk's `qconvert`%s%s%s.\n\n", repo,
			       tgt[0] ? " " : "", tgt, quantized ? "Quantized from" : "Converted from", repo, repo,
			       tgt[0] ? " (`--to " : "", tgt, tgt[0] ? "`)" : "");
	else
		qtk_buf_printf(&b, "# Model%s%s\n\n%s with qtk's `qconvert`%s%s%s; the source's hub id was not in its "
			       "metadata.\n\n", tgt[0] ? " " : "", tgt, quantized ? "Quantized" : "Converted",
			       tgt[0] ? " (`--to " : "", tgt, tgt[0] ? "`)" : "");
	qtk_buf_printf(&b, "`qtk-provenance.json` records the source's files and content digests and the conversion;\n"
			   "`qverify` checks the tensors against it, `qverify --emit-bom cyclonedx` writes an AI-BOM.\n");
	if (b.failed || !b.p) {
		qtk_buf_free(&b);
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	int rc = 0;
	qtk_blob *old = (qtk_blob *)qtk_blob_find(d, "README.md");
	if (old) { /* the source's card describes the source */
		qtk_free(old->data);
		old->data = b.p;
		old->len = b.len;
		b.p = NULL;
	} else if (qtk_model_add_blob(d, "README.md", b.p, b.len)) {
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	qtk_buf_free(&b);
	return rc;
}
