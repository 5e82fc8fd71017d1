/* test_memory.c - qinspect --memory on the architectures people deploy: mixtures of experts
 * (parameters and bytes read per token), per-layer KV heads, sliding-window layers, from GGUF
 * keys and from config.json. Models built in memory (hand-checked numbers), hostile numbers,
 * then llama.cpp's conversions and the HF originals of the arch fixtures when present. */
#include "t.h"
#include "../inspect/inspect.h"

#include <math.h>

/* ---- building models in memory ---------------------------------------------------------- */

static qtk_model *mk(const char *arch)
{
	qtk_model *m = qtk_model_new();
	m->path = qtk_strdup("mem.gguf");
	if (arch)
		qtk_model_set_kv_str(m, "general.architecture", arch);
	return m;
}

static void kv_u32(qtk_model *m, const char *key, uint64_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, key);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

/* An array of n elements of type elem (1, 4 bytes wide) with values v. */
static void kv_arr(qtk_model *m, const char *key, uint8_t elem, const int64_t *v, size_t n)
{
	qtk_kv *kv = qtk_model_add_kv(m, key);
	size_t es = qtk_value_size(elem);
	kv->val.type = QTK_V_ARR;
	kv->val.elem = elem;
	kv->val.n = n;
	uint8_t *p = qtk_calloc(n ? n : 1, es);
	for (size_t i = 0; i < n; i++)
		for (size_t b = 0; b < es; b++)
			p[i * es + b] = (uint8_t)((uint64_t)v[i] >> (8 * b));
	kv->val.arr = p;
}

/* A plain tensor of the given shape (outermost first) and storage type. */
static void tensor(qtk_model *m, const char *name, unsigned type, int ndim, uint64_t d0, uint64_t d1, uint64_t d2)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	uint64_t d[3] = {d0, d1, d2}, n = 1;
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++) {
		t->shape[i] = d[i];
		n *= d[i];
	}
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = type;
	t->nparts = 1;
	t->parts[0].type = type;
	t->parts[0].ndim = ndim;
	memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
	t->parts[0].nbytes = n * (type == QTK_T_F32 ? 4 : 2);
	qtk_tensor_finish(t);
}

static char *memory_text(qtk_model *m, bool json, uint64_t ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	insp_opts o = {.json = json, .ctx = ctx};
	report_memory(m, f, &o);
	fclose(f);
	return buf;
}

#define HAS(s, sub) ((s) && strstr((s), (sub)))

/* ---- a mixture of experts ---------------------------------------------------------------- */

/* llama-style MoE, 2 layers, 4 experts of which 2 are used per token:
 *   token_embd      [100, 64] F16            6400 params   12800 bytes
 *   per layer:
 *     ffn_gate_exps [4, 32, 64] F16          8192 params   16384 bytes  (expert tensor)
 *     ffn_gate_inp  [4, 64] F32 (router)      256 params    1024 bytes
 *     attn_q        [64, 64] F16             4096 params    8192 bytes
 *   total   6400 + 2 x 12544 = 31488 params, 12800 + 2 x 25600 = 64000 bytes
 *   experts 2 x 8192 = 16384 params (32768 bytes), 2 of 4 read per token: 8192 (16384)
 *   active  31488 - 16384 + 8192 = 23296 params, 64000 - 32768 + 16384 = 47616 bytes
 * KV: 2 layers x 2 KV heads x (16 + 16) x 2 B (f16) = 256 B per token. */
static qtk_model *moe_model(uint64_t n_expert, uint64_t n_used, uint64_t exps_dim0)
{
	qtk_model *m = mk("llama");
	kv_u32(m, "llama.block_count", 2);
	kv_u32(m, "llama.attention.head_count", 4);
	kv_u32(m, "llama.attention.head_count_kv", 2);
	kv_u32(m, "llama.embedding_length", 64);
	kv_u32(m, "llama.attention.key_length", 16);
	kv_u32(m, "llama.context_length", 4096);
	kv_u32(m, "llama.expert_count", n_expert);
	kv_u32(m, "llama.expert_used_count", n_used);
	kv_u32(m, "llama.expert_feed_forward_length", 32);
	tensor(m, "token_embd.weight", QTK_T_F16, 2, 100, 64, 0);
	for (int l = 0; l < 2; l++) {
		char n[64];
		snprintf(n, sizeof n, "blk.%d.ffn_gate_exps.weight", l);
		tensor(m, n, QTK_T_F16, 3, exps_dim0, 32, 64);
		snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", l);
		tensor(m, n, QTK_T_F32, 2, 4, 64, 0);
		snprintf(n, sizeof n, "blk.%d.attn_q.weight", l);
		tensor(m, n, QTK_T_F16, 2, 64, 64, 0);
	}
	return m;
}

static void check_moe(void)
{
	qtk_model *m = moe_model(4, 2, 4);
	qtk_hparams hp;
	qtk_active a;
	CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_expert == 4 && hp.n_expert_used == 2 && hp.n_ff_expert == 32,
	      "MoE hparams: %llu %llu", (unsigned long long)hp.n_expert, (unsigned long long)hp.n_expert_used);
	qtk_family_active(m, &hp, &a);
	CHECK(a.params == 31488 && a.bytes == 64000 && a.n_expert_tensors == 2 && !a.unknown[0], "MoE totals");
	CHECK(a.params_active == 23296 && a.bytes_active == 47616, "MoE active: %llu params, %llu bytes",
	      (unsigned long long)a.params_active, (unsigned long long)a.bytes_active);
	char *s = memory_text(m, false, 0);
	CHECK(HAS(s, "read per token 46.5 KiB (47616 bytes): 23296 of 31488 parameters active") &&
		      HAS(s, "experts     4, 2 used per token, expert FFN 32") && HAS(s, "= 256 B per token"),
	      "MoE text: %s", s ? s : "");
	free(s);
	s = memory_text(m, true, 0);
	CHECK(HAS(s, "\"params_total\":\t31488") && HAS(s, "\"params_active\":\t23296") &&
		      HAS(s, "\"weights_bytes_active\":\t47616") && HAS(s, "\"n_expert_used\":\t2") &&
		      HAS(s, "\"kv_bytes_per_token\":\t256") && HAS(s, "\"weights_bytes\":\t64000"),
	      "MoE JSON: %s", s ? s : "");
	free(s);
	qtk_close(m);

	/* hostile: more experts used than there are, no experts, a tensor of the wrong count */
	static const struct {
		uint64_t ne, nu, d0;
		const char *why;
	} bad[] = {{4, 5, 4, "5 experts used per token of 4"},
		   {0, 2, 4, "expert tensors but no expert count"},
		   {4, 0, 4, "no count of experts used per token"},
		   {4, 2, 3, "'blk.0.ffn_gate_exps.weight' does not hold 4 experts"},
		   {1u << 30, 2, 4, "too many"}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		m = moe_model(bad[i].ne, bad[i].nu, bad[i].d0);
		qtk_family_hparams(m, &hp);
		qtk_family_active(m, &hp, &a);
		CHECK(strstr(a.unknown, bad[i].why) && a.params_active == a.params, "hostile MoE %zu: '%s'", i, a.unknown);
		s = memory_text(m, false, 0);
		CHECK(HAS(s, "per token: unknown (") && HAS(s, bad[i].why), "hostile MoE text %zu: %s", i, s ? s : "");
		free(s);
		s = memory_text(m, true, 0);
		CHECK(HAS(s, "\"params_active\":\tnull") && HAS(s, "\"unknown\":\t\""), "hostile MoE JSON %zu", i);
		free(s);
		qtk_close(m);
	}

	/* a dense model: active = total, no experts object */
	m = mk("llama");
	kv_u32(m, "llama.block_count", 1);
	kv_u32(m, "llama.attention.head_count", 1);
	kv_u32(m, "llama.embedding_length", 8);
	tensor(m, "blk.0.attn_q.weight", QTK_T_F16, 2, 8, 8, 0);
	qtk_family_hparams(m, &hp);
	qtk_family_active(m, &hp, &a);
	CHECK(a.params_active == 64 && a.bytes_active == 128 && !a.n_expert_tensors, "dense: active = total");
	s = memory_text(m, true, 0);
	CHECK(HAS(s, "\"params_active\":\t64") && HAS(s, "\"experts\":\tnull") && HAS(s, "\"sliding_window\":\tnull"),
	      "dense JSON: %s", s ? s : "");
	free(s);
	qtk_close(m);
}

/* HF per-expert tensors: 4 experts of [8, 16] F16 (128 params, 256 bytes each), a shared
 * expert [8, 16] and a router [4, 16]: total 4 x 128 + 128 + 64 = 704 params, 1408 bytes;
 * 2 of 4 experts per token: 704 - 512 + 256 = 448 params, 1408 - 1024 + 512 = 896 bytes. */
static void check_hf_experts(void)
{
	static const char cfg[] = "{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"model_type\": \"qwen2_moe\","
				  " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,"
				  " \"hidden_size\": 16, \"num_experts\": 4, \"num_experts_per_tok\": 2,"
				  " \"moe_intermediate_size\": 8, \"shared_expert_intermediate_size\": 8,"
				  " \"sliding_window\": 4096, \"use_sliding_window\": false}";
	for (int bad = 0; bad < 2; bad++) {
		qtk_model *m = mk(NULL);
		qtk_model_add_blob(m, "config.json", cfg, strlen(cfg));
		for (int e = 0; e < 4; e++) {
			char n[96];
			snprintf(n, sizeof n, "model.layers.0.mlp.experts.%d.gate_proj.weight", bad && e == 3 ? 7 : e);
			tensor(m, n, QTK_T_F16, 2, 8, 16, 0);
		}
		tensor(m, "model.layers.0.mlp.shared_expert.gate_proj.weight", QTK_T_F16, 2, 8, 16, 0);
		tensor(m, "model.layers.0.mlp.gate.weight", QTK_T_F16, 2, 4, 16, 0);
		qtk_hparams hp;
		qtk_active a;
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_expert == 4 && hp.n_expert_used == 2 && hp.n_ff_expert == 8 &&
			      hp.n_ff_shared_expert == 8 && !strcmp(hp.source, "config.json"),
		      "HF MoE hparams");
		CHECK(hp.swa_window == 4096 && hp.n_layer_swa == 0 && hp.swa_note && strstr(hp.swa_note, "use_sliding_window"),
		      "use_sliding_window false: no sliding layer");
		qtk_family_active(m, &hp, &a);
		if (!bad)
			CHECK(a.params == 704 && a.bytes == 1408 && a.params_active == 448 && a.bytes_active == 896 &&
				      a.n_expert_tensors == 4,
			      "HF experts: %llu/%llu params, %llu/%llu bytes", (unsigned long long)a.params_active,
			      (unsigned long long)a.params, (unsigned long long)a.bytes_active, (unsigned long long)a.bytes);
		else
			CHECK(strstr(a.unknown, "is expert 7 of 4"), "HF expert index beyond the count: %s", a.unknown);
		qtk_close(m);
	}
}

/* ---- per-layer KV heads ----------------------------------------------------------------- */

/* OpenELM-style: 3 layers with 1, 2 and 4 KV heads, K and V of 8 elements:
 * (1 + 2 + 4) x (8 + 8) x 2 B = 224 B per token; 224000 B at 1000 tokens. */
static void check_per_layer_kv(void)
{
	static const int64_t heads[] = {4, 4, 8}, kvh[] = {1, 2, 4}, short_kvh[] = {1, 2}, neg_kvh[] = {1, -2, 4};
	for (int v = 0; v < 4; v++) {
		qtk_model *m = mk("openelm");
		kv_u32(m, "openelm.block_count", 3);
		kv_arr(m, "openelm.attention.head_count", QTK_V_I32, heads, 3);
		if (v == 0)
			kv_arr(m, "openelm.attention.head_count_kv", QTK_V_I32, kvh, 3);
		else if (v == 1)
			kv_arr(m, "openelm.attention.head_count_kv", QTK_V_U32, short_kvh, 2);
		else if (v == 2)
			kv_arr(m, "openelm.attention.head_count_kv", QTK_V_I32, neg_kvh, 3);
		else
			kv_arr(m, "openelm.attention.head_count_kv", QTK_V_U8, kvh, 3);
		kv_u32(m, "openelm.attention.key_length", 8);
		kv_u32(m, "openelm.attention.value_length", 8);
		tensor(m, "token_embd.weight", QTK_T_F16, 2, 10, 32, 0);
		qtk_hparams hp;
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_head == 8, "per-layer heads %d: found", v);
		char *s = memory_text(m, false, 1000), *j = memory_text(m, true, 1000);
		if (v == 0 || v == 3) {
			CHECK(hp.kv_per_layer && hp.n_head_kv == 4 && hp.n_head_kv_min == 1 && hp.kv_heads_full == 7 &&
				      !hp.kv_unknown[0],
			      "per-layer KV heads %d: sum %llu", v, (unsigned long long)hp.kv_heads_full);
			CHECK(fabs(kv_cache_bytes(&hp, 1000, 2.0) - 224000.0) < 1e-6, "per-layer KV bytes");
			CHECK(HAS(s, "KV heads per layer 1 to 4 (listed per layer), 7 over all layers") &&
				      HAS(s, "= 224 B per token"),
			      "per-layer text: %s", s ? s : "");
			CHECK(HAS(j, "\"kv_bytes_per_token\":\t224") && HAS(j, "\"kv_per_layer\":\ttrue") &&
				      HAS(j, "\"kv_bytes\":\t224000"),
			      "per-layer JSON: %s", j ? j : "");
		} else {
			const char *why = v == 1 ? "has 2 entries for 3 layers" : "bad entry at layer 1";
			CHECK(strstr(hp.kv_unknown, why) && kv_cache_bytes(&hp, 1000, 2.0) == 0, "bad per-layer list %d: %s", v,
			      hp.kv_unknown);
			CHECK(HAS(s, "KV cache    unknown: ") && HAS(s, why) && !HAS(s, "context "), "bad list text: %s",
			      s ? s : "");
			CHECK(HAS(j, "\"kv_unknown\":") && !HAS(j, "\"contexts\"") && !HAS(j, "kv_bytes_per_token"),
			      "bad list JSON: %s", j ? j : "");
		}
		free(s);
		free(j);
		qtk_close(m);
	}
}

/* ---- sliding windows ----------------------------------------------------------------------- */

static qtk_model *swa_model(const char *arch, uint64_t layers, int64_t window /* -1: no key */)
{
	qtk_model *m = mk(arch);
	char k[128];
	snprintf(k, sizeof k, "%s.block_count", arch);
	kv_u32(m, k, layers);
	snprintf(k, sizeof k, "%s.attention.head_count", arch);
	kv_u32(m, k, 8);
	snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
	kv_u32(m, k, 4);
	snprintf(k, sizeof k, "%s.attention.key_length", arch);
	kv_u32(m, k, 256);
	snprintf(k, sizeof k, "%s.attention.value_length", arch);
	kv_u32(m, k, 256);
	snprintf(k, sizeof k, "%s.context_length", arch);
	kv_u32(m, k, 8192);
	if (window >= 0) {
		snprintf(k, sizeof k, "%s.attention.sliding_window", arch);
		kv_u32(m, k, (uint64_t)window);
	}
	tensor(m, "token_embd.weight", QTK_T_F16, 2, 10, 32, 0);
	return m;
}

static void check_swa(void)
{
	/* Gemma 2 (2B: 26 layers, 4 KV heads of 256): the even layers slide, window 4096.
	 * Per token up to 4096: 26 x 4 x 512 x 2 B = 106496 B; beyond: 13 x 4 x 512 x 2 = 53248 B.
	 * At 8192: (13 x 4 x 8192 + 13 x 4 x 4096) x 512 x 2 = 654311424 B (624 MiB). */
	for (int keyed = 0; keyed < 2; keyed++) {
		qtk_model *m = swa_model("gemma2", 26, keyed ? 4096 : -1);
		qtk_hparams hp;
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.swa_window == 4096 && hp.n_layer_swa == 13 &&
			      hp.kv_heads_full == 52 && hp.kv_heads_swa == 52,
		      "gemma2 sliding layers (key %d): %llu", keyed, (unsigned long long)hp.n_layer_swa);
		CHECK(qtk_family_layer_swa(&hp, 0) && !qtk_family_layer_swa(&hp, 1) && qtk_family_layer_swa(&hp, 24) &&
			      !qtk_family_layer_swa(&hp, 25) && !qtk_family_layer_swa(&hp, 26),
		      "gemma2: even layers slide");
		CHECK(fabs(kv_cache_bytes(&hp, 8192, 2.0) - 654311424.0) < 1e-3 &&
			      fabs(kv_cache_bytes(&hp, 1, 2.0) - 106496.0) < 1e-6 &&
			      fabs(kv_cache_bytes(&hp, 2048, 2.0) - 106496.0 * 2048) < 1e-3,
		      "gemma2 KV bytes");
		char *s = memory_text(m, false, 0), *j = memory_text(m, true, 0);
		CHECK(HAS(s, "sliding window 4096 on 13 of 26 layers (the even layers") &&
			      HAS(s, "= 104.0 KiB per token up to 4096 tokens, 52.0 KiB per token beyond") &&
			      HAS(s, "624.0 MiB"),
		      "gemma2 text: %s", s ? s : "");
		CHECK(HAS(j, "\"window\":\t4096") && HAS(j, "\"n_layer_sliding\":\t13") &&
			      HAS(j, "\"kv_bytes_per_token_beyond_window\":\t53248") && HAS(j, "\"kv_bytes\":\t654311424"),
		      "gemma2 JSON: %s", j ? j : "");
		free(s);
		free(j);
		qtk_close(m);
	}
	/* Gemma 3: every 6th layer global; 26 layers: 4 x 5 + min(2, 5) = 22 slide (5, 11, 17, 23 global) */
	qtk_model *m = swa_model("gemma3", 26, 512);
	qtk_hparams hp;
	CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_layer_swa == 22 && hp.kv_heads_swa == 88 && hp.kv_heads_full == 16,
	      "gemma3: %llu sliding", (unsigned long long)hp.n_layer_swa);
	CHECK(qtk_family_layer_swa(&hp, 4) && !qtk_family_layer_swa(&hp, 5) && qtk_family_layer_swa(&hp, 6) &&
		      !qtk_family_layer_swa(&hp, 23) && qtk_family_layer_swa(&hp, 25),
	      "gemma3 pattern");
	qtk_close(m);
	/* window 0 and a window without a known rule: every layer caches every token */
	static const struct {
		const char *arch;
		int64_t w;
		const char *note;
	} none[] = {{"gemma2", 0, "a window of 0 tokens"},
		    {"phi3", 2047, "llama.cpp disables Phi-3's sliding window"},
		    {"mistral", 4096, "no sliding-layer rule"}};
	for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
		m = swa_model(none[i].arch, 4, none[i].w);
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_layer_swa == 0 && hp.kv_heads_full == 16 && hp.swa_note &&
			      strstr(hp.swa_note, none[i].note),
		      "%s window %lld: not applied", none[i].arch, (long long)none[i].w);
		char *s = memory_text(m, false, 0);
		CHECK(HAS(s, "not applied: ") && HAS(s, none[i].note), "%s text: %s", none[i].arch, s ? s : "");
		free(s);
		qtk_close(m);
	}
	/* GGUF per-layer pattern (bools), right and wrong length; a period */
	static const int64_t pat[] = {1, 0, 1, 1};
	for (int v = 0; v < 3; v++) {
		m = swa_model("newarch", 4, 128);
		if (v < 2)
			kv_arr(m, "newarch.attention.sliding_window_pattern", QTK_V_BOOL, pat, v ? 3 : 4);
		else
			kv_u32(m, "newarch.attention.sliding_window_pattern", 2);
		qtk_family_hparams(m, &hp);
		if (v == 0)
			CHECK(hp.swa_explicit && hp.n_layer_swa == 3 && !qtk_family_layer_swa(&hp, 1) &&
				      qtk_family_layer_swa(&hp, 3),
			      "bool pattern");
		else if (v == 1)
			CHECK(strstr(hp.kv_unknown, "has 3 entries for 4 layers"), "short pattern: %s", hp.kv_unknown);
		else
			CHECK(hp.n_layer_swa == 2 && qtk_family_layer_swa(&hp, 2) && !qtk_family_layer_swa(&hp, 3),
			      "period pattern");
		qtk_close(m);
	}
	/* hostile: a period pattern over 10^15 layers is counted, not walked */
	m = swa_model("gemma3", 1000000000000000ull, 512);
	CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_layer_swa == 1000000000000000ull / 6 * 5 + 4,
	      "huge layer count: %llu", (unsigned long long)hp.n_layer_swa);
	char *s = memory_text(m, true, 0);
	CHECK(HAS(s, "\"layers\":\tnull"), "huge layer count: no layer list");
	free(s);
	qtk_close(m);
}

/* config.json: a multimodal wrapper (text_config) with Gemma 3's sliding_window_pattern,
 * layer_types, per-layer num_key_value_heads. */
static void check_config_swa(void)
{
	static const char *const cfgs[] = {
		/* 12 layers, period 6: 2 x 5 = 10 slide */
		"{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"text_config\": {\"model_type\": \"gemma3_text\","
		" \"num_hidden_layers\": 12, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 64,"
		" \"hidden_size\": 256, \"sliding_window\": 512, \"sliding_window_pattern\": 6}}",
		/* layer_types: 2 of 3 slide; KV heads 1, 2, 2: full 2, sliding 3 */
		"{\"architectures\": [\"X\"], \"model_type\": \"x\", \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
		" \"num_key_value_heads\": [1, 2, 2], \"head_dim\": 8, \"sliding_window\": 16, \"layer_types\":"
		" [\"sliding_attention\", \"full_attention\", \"sliding_attention\"]}",
		/* layer_types of the wrong length */
		"{\"architectures\": [\"X\"], \"model_type\": \"x\", \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
		" \"head_dim\": 8, \"sliding_window\": 16, \"layer_types\": [\"sliding_attention\"]}",
		/* sliding_window null */
		"{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": \"mixtral\", \"num_hidden_layers\": 3,"
		" \"num_attention_heads\": 4, \"hidden_size\": 32, \"sliding_window\": null}",
	};
	for (int v = 0; v < 4; v++) {
		qtk_model *m = mk(NULL);
		qtk_model_add_blob(m, "config.json", cfgs[v], strlen(cfgs[v]));
		qtk_hparams hp;
		int rc = qtk_family_hparams(m, &hp);
		CHECK(rc == 0, "config %d found", v);
		if (v == 0)
			CHECK(!strcmp(hp.arch, "gemma3_text") && hp.n_layer == 12 && hp.n_layer_swa == 10 &&
				      !qtk_family_layer_swa(&hp, 5) && !qtk_family_layer_swa(&hp, 11) &&
				      qtk_family_layer_swa(&hp, 10),
			      "gemma3 text_config: %llu sliding", (unsigned long long)hp.n_layer_swa);
		else if (v == 1)
			CHECK(hp.kv_per_layer && hp.n_layer_swa == 2 && hp.kv_heads_swa == 3 && hp.kv_heads_full == 2 &&
				      qtk_family_layer_swa(&hp, 0) && !qtk_family_layer_swa(&hp, 1),
			      "layer_types with per-layer heads");
		else if (v == 2)
			CHECK(strstr(hp.kv_unknown, "layer_types has 1 entries for 3 layers"), "short layer_types: %s",
			      hp.kv_unknown);
		else
			CHECK(hp.swa_window == 0 && hp.n_layer_swa == 0 && hp.kv_heads_full == 12, "null window");
		qtk_close(m);
	}
}

/* ---- the arch fixtures: llama.cpp's conversions and the HF originals ----------------------- */

static qtk_model *fx_open(const char *fx, const char *rel)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/hf/arch/%s", fx, rel);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(m != NULL, "open %s", p);
	return m;
}

static void check_fixtures(void)
{
	const char *fx = t_fixtures();
	char probe[1024];
	snprintf(probe, sizeof probe, "%s/hf/arch/ref/mixtral-llamacpp-f16.gguf", fx ? fx : ".");
	FILE *f = fx ? fopen(probe, "rb") : NULL;
	if (!f) {
		T_SKIP("fixtures absent (hf/arch: mixtral, qwen2moe, gemma2, phi3, llama3)");
		return;
	}
	fclose(f);
	/* total and active, from the tensor listings (qinspect --json):
	 * mixtral: 2 layers x 3 expert tensors; GGUF [4, 256, 128] F16 = 131072 params each, HF
	 *   per-expert [256, 128] BF16 = 32768 each: 786432 expert params of 1017472, half read per
	 *   token: 1017472 - 393216 = 624256. Bytes: GGUF 2038272 - 786432 = 1251840; HF 2034944 -
	 *   786432 = 1248512.
	 * qwen2moe: experts 2 x 3 x 32768 = 196608 of 526720 params -> 428416; bytes GGUF 1057792 -
	 *   196608 = 861184, HF 1053440 - 196608 = 856832. */
	static const struct {
		const char *rel;
		uint64_t params, active, bytes_active, n_ff_exp;
	} moe[] = {{"ref/mixtral-llamacpp-f16.gguf", 1017472, 624256, 1251840, 0},
		   {"mixtral", 1017472, 624256, 1248512, 0},
		   {"ref/qwen2moe-llamacpp-f16.gguf", 526720, 428416, 861184, 64},
		   {"qwen2moe", 526720, 428416, 856832, 64}};
	for (size_t i = 0; i < sizeof moe / sizeof *moe; i++) {
		qtk_model *m = fx_open(fx, moe[i].rel);
		if (!m)
			continue;
		qtk_hparams hp;
		qtk_active a;
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_expert == 4 && hp.n_expert_used == 2 &&
			      hp.n_ff_expert == moe[i].n_ff_exp,
		      "%s: experts", moe[i].rel);
		qtk_family_active(m, &hp, &a);
		CHECK(a.params == moe[i].params && a.params_active == moe[i].active && a.bytes_active == moe[i].bytes_active,
		      "%s: %llu of %llu params, %llu bytes per token", moe[i].rel, (unsigned long long)a.params_active,
		      (unsigned long long)a.params, (unsigned long long)a.bytes_active);
		if (moe[i].n_ff_exp)
			CHECK(hp.n_ff_shared_expert == 128, "%s: shared expert FFN", moe[i].rel);
		qtk_close(m);
	}
	/* gemma2: 2 layers, 2 KV heads of 64, window 4096 on layer 0:
	 * 8192 tokens: (2 x 8192 + 2 x 4096) x 128 x 2 B = 6291456 B. */
	static const char *const g2[] = {"ref/gemma2-llamacpp-f16.gguf", "gemma2"};
	for (int i = 0; i < 2; i++) {
		qtk_model *m = fx_open(fx, g2[i]);
		qtk_hparams hp;
		if (!m)
			continue;
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.swa_window == 4096 && hp.n_layer_swa == 1 &&
			      qtk_family_layer_swa(&hp, 0) && !qtk_family_layer_swa(&hp, 1) &&
			      kv_cache_bytes(&hp, 8192, 2.0) == 6291456.0,
		      "%s: sliding layer 0", g2[i]);
		qtk_close(m);
	}
	/* phi3 declares a window of 2047, which llama.cpp does not apply; llama3 and the dense ones:
	 * active = total */
	static const char *const dense[] = {"ref/phi3-llamacpp-f16.gguf", "phi3", "ref/llama3-llamacpp-f16.gguf",
					    "llama3"};
	for (int i = 0; i < 4; i++) {
		qtk_model *m = fx_open(fx, dense[i]);
		qtk_hparams hp;
		qtk_active a;
		if (!m)
			continue;
		CHECK(qtk_family_hparams(m, &hp) == 0 && hp.n_layer_swa == 0 && hp.kv_heads_full == 4 &&
			      (i >= 2 || (hp.swa_window == 2047 && strstr(hp.swa_note, "Phi-3"))),
		      "%s: full cache", dense[i]);
		qtk_family_active(m, &hp, &a);
		CHECK(a.params_active == a.params && a.bytes_active == a.bytes && !a.n_expert_tensors, "%s: dense", dense[i]);
		qtk_close(m);
	}
}

/* ---- --gpu-layers --------------------------------------------------------------------- */

static char *memory_gpu(qtk_model *m, uint64_t ngl)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	insp_opts o = {.json = true, .ctx = 1000, .gpu_split = true, .gpu_layers = ngl};
	report_memory(m, f, &o);
	fclose(f);
	return buf;
}

/* The KV split follows the per-layer head counts (OpenELM-style 1, 2, 4 heads of K 8 + V 8):
 * one layer offloaded is the last, 4 x 16 x 2 B x 1000 = 128000 B of VRAM, 96000 B of RAM.
 * Tied embeddings: with the output layer offloaded llama.cpp loads the token embeddings again
 * as the output (10 x 32 F16 = 640 B). */
static void check_gpu_split(void)
{
	static const int64_t heads[] = {4, 4, 8}, kvh[] = {1, 2, 4};
	qtk_model *m = mk("openelm");
	kv_u32(m, "openelm.block_count", 3);
	kv_arr(m, "openelm.attention.head_count", QTK_V_I32, heads, 3);
	kv_arr(m, "openelm.attention.head_count_kv", QTK_V_I32, kvh, 3);
	kv_u32(m, "openelm.attention.key_length", 8);
	kv_u32(m, "openelm.attention.value_length", 8);
	tensor(m, "token_embd.weight", QTK_T_F16, 2, 10, 32, 0);
	tensor(m, "blk.2.attn_k.weight", QTK_T_F16, 2, 32, 32, 0);
	char *j = memory_gpu(m, 1);
	hparams hp;
	uint64_t h[3] = {0};
	CHECK(hparams_load(m, &hp) == 0 && kv_layer_heads(m, &hp, h) == 0 && h[0] == 1 && h[1] == 2 && h[2] == 4,
	      "per-layer heads read again");
	CHECK(fabs(kv_layer_bytes(&hp, 2, 4, 1000, 2.0, 2.0) - 128000.0) < 1e-6, "layer 2 KV bytes");
	CHECK(HAS(j, "\"kv_split_known\":\ttrue") && HAS(j, "\"weights_vram_bytes\":\t2048") &&
		      HAS(j, "\"output_copy_bytes\":\t0"),
	      "gpu split JSON: %s", j ? j : "");
	/* ram = 640 weights + 96000 KV + compute; vram = 2048 + 128000 + compute */
	const char *c = j ? strstr(j, "\"ctx\":\t1000") : NULL;
	double comp = c && strstr(c, "\"compute_bytes\":\t") ? atof(strstr(c, "\"compute_bytes\":\t") + 17) : -1;
	double ram = c && strstr(c, "\"ram_bytes\":\t") ? atof(strstr(c, "\"ram_bytes\":\t") + 13) : -1;
	double vram = c && strstr(c, "\"vram_bytes\":\t") ? atof(strstr(c, "\"vram_bytes\":\t") + 14) : -1;
	CHECK(comp > 0 && ram == 640 + 96000 + comp && vram == 2048 + 128000 + comp, "gpu split at 1000: %g %g %g", comp,
	      ram, vram);
	free(j);
	j = memory_gpu(m, 4);
	CHECK(HAS(j, "\"output_offloaded\":\ttrue") && HAS(j, "\"output_copy_bytes\":\t640") &&
		      HAS(j, "\"weights_vram_bytes\":\t2688"),
	      "tied output copied: %s", j ? j : "");
	free(j);
	qtk_close(m);
}

int main(void)
{
	check_gpu_split();
	check_moe();
	check_hf_experts();
	check_per_layer_kv();
	check_swa();
	check_config_swa();
	check_fixtures();
	return T_DONE();
}
