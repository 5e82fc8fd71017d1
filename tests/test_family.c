/* test_family.c - the model-family layer (src/family/): the table and its lookups, name rules
 * in both directions, canonical names, the Q/K permutation and head counts; and qinspect
 * --diff pairing tensors exactly as qverify does (by qtk_canon_name). */
#include "t.h"
#include "../inspect/inspect.h"

#include "record/digest.h"
#include <unistd.h>

static void check_table(void)
{
	CHECK(qtk_family_count() >= 3, "families: %zu", qtk_family_count());
	const qtk_family *l = qtk_family_by_hf_arch("LlamaForCausalLM");
	CHECK(l && !strcmp(l->name, "llama") && !strcmp(l->gguf_arch, "llama") && l->permute_qk, "llama by HF arch");
	CHECK(qtk_family_by_hf_arch("LLaMAForCausalLM") == l, "old llama spelling");
	const qtk_family *m = qtk_family_by_hf_arch("MistralForCausalLM");
	CHECK(m && !strcmp(m->name, "mistral") && !strcmp(m->gguf_arch, "llama") && m->permute_qk,
	      "mistral is written as a llama GGUF");
	const qtk_family *q = qtk_family_by_hf_arch("Qwen2ForCausalLM");
	CHECK(q && !strcmp(q->gguf_arch, "qwen2") && !q->permute_qk && !strcmp(q->bpe_class, "Qwen2Tokenizer"), "qwen2");
	CHECK(qtk_family_by_gguf_arch("llama") == l, "a llama GGUF reads back as llama");
	CHECK(qtk_family_by_gguf_arch("qwen2") == q, "qwen2 by GGUF arch");
	CHECK(!qtk_family_by_hf_arch("GPT2LMHeadModel") && !qtk_family_by_gguf_arch("gpt2") &&
		      !qtk_family_by_hf_arch(NULL) && !qtk_family_by_gguf_arch(NULL),
	      "unknown architectures");
	CHECK(qtk_family_at(qtk_family_count()) == NULL, "past the table");
	/* every descriptor is complete, its HF architectures lead back to it, and every name rule
	 * maps both ways */
	for (size_t i = 0; i < qtk_family_count(); i++) {
		const qtk_family *f = qtk_family_at(i);
		CHECK(f->name && f->gguf_arch && f->hf_arch_out && f->hf_model_type && f->keys && f->suffixes &&
			      f->hf_archs && f->hf_archs[0] && f->bpe_class && f->spm_class,
		      "descriptor %zu complete", i);
		for (size_t k = 0; f->hf_archs && f->hf_archs[k]; k++)
			CHECK(qtk_family_by_hf_arch(f->hf_archs[k]) == f, "%s -> %s", f->hf_archs[k], f->name);
		CHECK(qtk_family_by_hf_arch(f->hf_arch_out) == f, "%s writes its own architecture", f->name);
		for (size_t r = 0; r < f->ntop + f->nblock; r++) {
			bool top = r < f->ntop;
			const qtk_name_rule *nr = top ? &f->top[r] : &f->block[r - f->ntop];
			char hf[256], gg[256], a[256], b[256];
			snprintf(hf, sizeof hf, "%s%s.weight", top ? "" : "model.layers.17.", nr->hf);
			snprintf(gg, sizeof gg, "%s%s.weight", top ? "" : "blk.17.", nr->gguf);
			int qa, qb;
			CHECK(qtk_family_map_name(f, hf, true, a, sizeof a, &qa) == 1 && !strcmp(a, gg) &&
				      qtk_family_map_name(f, gg, false, b, sizeof b, &qb) == 1 && !strcmp(b, hf) &&
				      qa == nr->qk && qb == nr->qk,
			      "%s: %s <-> %s", f->name, hf, gg);
		}
	}
	CHECK(qtk_family_dropped(l, "model.layers.0.self_attn.rotary_emb.inv_freq") &&
		      !qtk_family_dropped(l, "model.layers.0.self_attn.q_proj.weight"),
	      "llama.cpp's dropped tensors");
}

/* The one canonical name rule (qverify, qconvert, qinspect --diff). */
static void check_canon(void)
{
	static const char *const cases[][2] = {
		{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
		{"blk.10.attn_k.bias", "model.layers.10.self_attn.k_proj.bias"},
		{"token_embd.weight", "model.embed_tokens.weight"},
		{"output.weight", "lm_head.weight"},
		/* refused: leading zeros, other suffixes, packed parts, HF names */
		{"blk.01.attn_q.weight", "blk.01.attn_q.weight"},
		{"output.scales", "output.scales"},
		{"blk.0.attn_q.qweight", "blk.0.attn_q.qweight"},
		{"blk.0.attn_q", "blk.0.attn_q"},
		{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char b[256];
		int qk;
		int rc = qtk_canon_name(NULL, cases[i][0], b, sizeof b, &qk);
		CHECK(rc >= 0 && !strcmp(b, cases[i][1]) && rc == (strcmp(cases[i][0], cases[i][1]) != 0),
		      "%s -> %s (%d)", cases[i][0], b, rc);
	}
	char small[8];
	int qk;
	CHECK(qtk_canon_name(NULL, "token_embd.weight", small, sizeof small, &qk) == QTK_E_DATA, "small buffer");
}

static void check_permute(void)
{
	enum { R = 12, H = 3 };
	uint8_t src[R], dst[R], back[R];
	for (int i = 0; i < R; i++)
		src[i] = (uint8_t)i;
	qtk_family_permute_rows(src, dst, R, 1, H, false);
	/* head 0 of 4 rows: HF rows 0 1 | 2 3 -> GGUF 0 2 1 3 */
	CHECK(dst[0] == 0 && dst[1] == 2 && dst[2] == 1 && dst[3] == 3 && dst[4] == 4 && dst[5] == 6, "HF -> GGUF");
	qtk_family_permute_rows(dst, back, R, 1, H, true);
	CHECK(!memcmp(src, back, R), "inverse undoes it");
	qtk_family_permute_rows(src, dst, R, 1, 5, false);
	CHECK(!memcmp(src, dst, R), "rows not in even heads: copied");
}

static void check_models(const char *gguf, const char *hf)
{
	qtk_err e;
	qtk_model *g = qtk_open(gguf, &e), *h = qtk_open(hf, &e);
	CHECK(g && h, "open samples");
	if (!g || !h)
		goto out;
	CHECK(qtk_family_of_model(g) == qtk_family_by_hf_arch("LlamaForCausalLM"), "GGUF family from general.architecture");
	CHECK(qtk_family_of_model(h) == qtk_family_by_hf_arch("LlamaForCausalLM"), "HF family from config.json");
	qtk_hparams hp;
	CHECK(qtk_family_hparams(g, &hp) == 0 && hp.n_head == 4 && hp.n_head_kv == 2 && !strcmp(hp.source, "GGUF keys"),
	      "GGUF numbers");
	CHECK(qtk_family_hparams(h, &hp) == 0 && hp.n_layer == 2 && !strcmp(hp.source, "config.json"), "HF numbers");
	int heads = -1;
	const qtk_tensor *q = qtk_tensor_find(g, "blk.0.attn_q.weight"), *k = qtk_tensor_find(g, "blk.0.attn_k.weight");
	CHECK(q && !qtk_family_qk_heads(g, q, &heads, &e) && heads == 4, "Q heads %d", heads);
	CHECK(k && !qtk_family_qk_heads(g, k, &heads, &e) && heads == 2, "K heads %d", heads);
	const qtk_tensor *v = qtk_tensor_find(g, "blk.0.attn_v.weight");
	CHECK(v && !qtk_family_qk_heads(g, v, &heads, &e) && heads == 0, "V is not permuted");
	const qtk_tensor *hq = qtk_tensor_find(h, "model.layers.0.self_attn.q_proj.weight");
	CHECK(hq && !qtk_family_qk_heads(h, hq, &heads, &e) && heads == 0, "HF names are not permuted");
	qtk_model_set_kv_str(g, "general.architecture", "qwen2");
	CHECK(q && !qtk_family_qk_heads(g, q, &heads, &e) && heads == 0, "qwen2 does not permute Q/K");
out:
	qtk_close(g);
	qtk_close(h);
}

static void rename_tensor(qtk_model *m, const char *from, const char *to)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (!strcmp(m->tensors[i].name, from)) {
			qtk_free(m->tensors[i].name);
			m->tensors[i].name = qtk_strdup(to);
			return;
		}
	CHECK(0, "no tensor %s", from);
}

/* --diff pairs a tensor by name, else by canonical name: exactly the pairs qverify makes. Names
 * that qtk_canon_name refuses (leading zeros, packed parts, other suffixes) stay unpaired even
 * when a lenient reading would pair them. */
static void check_diff_pairing(const char *gguf, const char *hf)
{
	static const char *const ren[][4] = {
		{"blk.1.attn_q.weight", "blk.01.attn_q.weight", "model.layers.1.self_attn.q_proj.weight",
		 "model.layers.01.self_attn.q_proj.weight"},
		{"blk.0.attn_q.weight", "blk.0.attn_q.qweight", "model.layers.0.self_attn.q_proj.weight",
		 "model.layers.0.self_attn.q_proj.qweight"},
		{"output.weight", "output.scales", "lm_head.weight", "lm_head.scales"},
	};
	qtk_err e;
	qtk_model *g = qtk_open(gguf, &e), *h = qtk_open(hf, &e);
	CHECK(g && h, "open samples");
	if (!g || !h)
		goto out;
	for (size_t i = 0; i < sizeof ren / sizeof *ren; i++) {
		rename_tensor(g, ren[i][0], ren[i][1]);
		rename_tensor(h, ren[i][2], ren[i][3]);
	}
	/* qverify's pairing: equal canonical names */
	size_t pairs = 0;
	for (size_t i = 0; i < g->ntensors; i++)
		for (size_t j = 0; j < h->ntensors; j++) {
			char a[512], b[512];
			int qa, qb;
			qtk_canon_name(g, g->tensors[i].name, a, sizeof a, &qa);
			qtk_canon_name(h, h->tensors[j].name, b, sizeof b, &qb);
			pairs += !strcmp(a, b);
		}
	CHECK(pairs == 18, "qverify pairs %zu of 21", pairs);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	insp_opts o = {0};
	int rc = report_diff(h, g, f, &o);
	fclose(f);
	CHECK(rc == 0 && out && strstr(out, "matched 18 of 21 tensors (18 by GGUF<->HF name, 2 with Q/K rows un-permuted)"),
	      "--diff pairs as qverify: %s", out ? out : "");
	CHECK(out && strstr(out, "blk.01.attn_q.weight") && strstr(out, "output.scales") &&
		      strstr(out, "blk.0.attn_q.qweight"),
	      "refused names listed as unmatched");
	free(out);
out:
	qtk_close(g);
	qtk_close(h);
}

int main(void)
{
	check_table();
	check_canon();
	check_permute();
	char dir[] = "/tmp/qtk-family-XXXXXX", cmd[512], gguf[256], hf[256];
	if (t_samples(dir))
		return T_DONE();
	snprintf(gguf, sizeof gguf, "%s/tiny-llama-f32.gguf", dir);
	snprintf(hf, sizeof hf, "%s/tiny-llama", dir);
	check_models(gguf, hf);
	check_diff_pairing(gguf, hf);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		CHECK(0, "cleanup");
	return T_DONE();
}
