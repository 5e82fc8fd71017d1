/* modelinfo.c - the memory estimate's arithmetic (KV cache) on the architecture numbers of
 * the family layer (qtk_family_hparams), and block numbers of tensor names. */
#include "inspect.h"
#include <cJSON.h>
#include <string.h>

int hparams_load(const qtk_model *m, hparams *hp) { return qtk_family_hparams(m, hp); }

/* Bytes per KV element (ggml block types: block bytes / block elements). */
static const struct {
	const char *name;
	double bytes;
} mi_kv_types[] = {{"f32", 4.0}, {"f16", 2.0}, {"bf16", 2.0}, {"q8_0", 34.0 / 32}, {"q5_1", 24.0 / 32},
		   {"q5_0", 22.0 / 32}, {"q4_1", 20.0 / 32}, {"q4_0", 18.0 / 32}, {"iq4_nl", 18.0 / 32}};

double kv_type_bytes(const char *name)
{
	for (size_t i = 0; i < sizeof mi_kv_types / sizeof *mi_kv_types; i++)
		if (qtk_strcasecmp(name, mi_kv_types[i].name) == 0)
			return mi_kv_types[i].bytes;
	return 0;
}

double kv_cache_bytes(const hparams *hp, uint64_t ctx, double elem_bytes)
{
	if (hp->kv_unknown[0])
		return 0;
	uint64_t swa_ctx = hp->swa_window && hp->swa_window < ctx ? hp->swa_window : ctx;
	double heads_tokens = (double)hp->kv_heads_full * (double)ctx + (double)hp->kv_heads_swa * (double)swa_ctx;
	return heads_tokens * (double)(hp->head_dim + hp->head_dim_v) * elem_bytes;
}

bool kv_uniform(const hparams *hp)
{
	return !hp->kv_per_layer && !hp->n_layer_swa && hp->head_dim == hp->head_dim_v;
}

int block_of(const char *name, size_t *prefix_len)
{
	static const char *const pre[] = {"blk.", "model.layers.", "layers.", "transformer.h."};
	for (size_t k = 0; k < sizeof pre / sizeof *pre; k++) {
		size_t pl = strlen(pre[k]);
		if (strncmp(name, pre[k], pl) != 0)
			continue;
		const char *p = name + pl;
		int v = 0, nd = 0;
		while (*p >= '0' && *p <= '9' && nd < 7) {
			v = v * 10 + (*p - '0');
			p++;
			nd++;
		}
		if (nd && *p == '.') {
			*prefix_len = (size_t)(p + 1 - name);
			return v;
		}
	}
	*prefix_len = 0;
	return -1;
}

/* ---- KV types, file types --------------------------------------------------------------- */

const char *kv_type_list(void) { return "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1"; }

const char *kv_type_canon(const char *name)
{
	for (size_t i = 0; i < sizeof mi_kv_types / sizeof *mi_kv_types; i++)
		if (qtk_strcasecmp(name, mi_kv_types[i].name) == 0)
			return mi_kv_types[i].name;
	return NULL;
}

bool kv_type_quantized(const char *name)
{
	const char *c = kv_type_canon(name);
	return c && c[0] != 'f' && c[0] != 'b';
}

/* llama.cpp's llama_ftype values (general.file_type) and the names llama-quantize gives them. */
static const struct {
	unsigned v;
	const char *name;
} mi_ftypes[] = {
	{0, "F32"},       {1, "F16"},       {2, "Q4_0"},      {3, "Q4_1"},    {4, "Q4_1_SOME_F16"},
	{7, "Q8_0"},      {8, "Q5_0"},      {9, "Q5_1"},      {10, "Q2_K"},   {11, "Q3_K_S"},
	{12, "Q3_K_M"},   {13, "Q3_K_L"},   {14, "Q4_K_S"},   {15, "Q4_K_M"}, {16, "Q5_K_S"},
	{17, "Q5_K_M"},   {18, "Q6_K"},     {19, "IQ2_XXS"},  {20, "IQ2_XS"}, {21, "Q2_K_S"},
	{22, "IQ3_XS"},   {23, "IQ3_XXS"},  {24, "IQ1_S"},    {25, "IQ4_NL"}, {26, "IQ3_S"},
	{27, "IQ3_M"},    {28, "IQ2_S"},    {29, "IQ2_M"},    {30, "IQ4_XS"}, {31, "IQ1_M"},
	{32, "BF16"},     {33, "Q4_0_4_4"}, {34, "Q4_0_4_8"}, {35, "Q4_0_8_8"}, {36, "TQ1_0"},
	{37, "TQ2_0"},    {38, "MXFP4_MOE"}, {39, "NVFP4"},   {40, "Q1_0"},
};

const char *ftype_name(uint64_t v, char *buf, size_t n)
{
	bool guessed = v >= 1024 && v < 2048; /* LLAMA_FTYPE_GUESSED */
	uint64_t b = guessed ? v - 1024 : v;
	for (size_t i = 0; i < sizeof mi_ftypes / sizeof *mi_ftypes; i++)
		if (mi_ftypes[i].v == b) {
			snprintf(buf, n, "%s%s", mi_ftypes[i].name, guessed ? " (guessed)" : "");
			return buf;
		}
	return NULL;
}

/* ---- per-layer KV heads ----------------------------------------------------------------- */

static bool mi_json_u64(const cJSON *e, uint64_t *x)
{
	if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e15 || e->valuedouble != (double)(uint64_t)e->valuedouble)
		return false;
	*x = (uint64_t)e->valuedouble;
	return true;
}

int kv_layer_heads(const qtk_model *m, const hparams *hp, uint64_t *heads)
{
	uint64_t L = hp->n_layer;
	if (hp->kv_unknown[0] || L == 0 || L > QTK_HP_MAX_LAYERS)
		return -1;
	if (!hp->kv_per_layer) {
		for (uint64_t l = 0; l < L; l++)
			heads[l] = hp->n_head_kv;
		return 0;
	}
	int rc = -1;
	if (!strcmp(hp->source, "GGUF keys")) {
		const qtk_family *f = qtk_family_by_gguf_arch(hp->arch);
		const qtk_family_keys *k = f ? f->keys : &qtk_family_std_keys;
		char key[256];
		snprintf(key, sizeof key, "%s.%s", hp->arch, k->n_head_kv.gguf);
		const qtk_kv *kv = qtk_kv_find(m, key);
		if (kv && kv->val.type == QTK_V_ARR && kv->val.n == L && kv->val.elem != QTK_V_BOOL &&
		    kv->val.elem != QTK_V_STR && kv->val.elem != QTK_V_ARR) {
			size_t es = qtk_value_size(kv->val.elem);
			rc = 0;
			for (uint64_t l = 0; l < L && !rc; l++) {
				qtk_value x;
				qtk_value_from_le(&x, kv->val.elem, (const uint8_t *)kv->val.arr + l * es);
				if (!qtk_value_as_u64(&x, &heads[l]))
					rc = -1;
			}
		}
	} else {
		const qtk_blob *b = qtk_blob_find(m, "config.json");
		cJSON *root = b ? cJSON_ParseWithLength((const char *)b->data, b->len) : NULL;
		const cJSON *o = root, *tc = root ? cJSON_GetObjectItemCaseSensitive(root, "text_config") : NULL;
		static const char *const names[] = {"num_key_value_heads", "num_kv_heads"};
		const cJSON *a = NULL;
		for (int pass = 0; pass < 2 && !a; pass++, o = tc)
			for (size_t i = 0; o && cJSON_IsObject(o) && i < 2 && !a; i++) {
				const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, names[i]);
				if (cJSON_IsArray(x))
					a = x;
			}
		if (a && (uint64_t)cJSON_GetArraySize(a) == L) {
			uint64_t l = 0;
			const cJSON *e;
			rc = 0;
			cJSON_ArrayForEach(e, a) if (!mi_json_u64(e, &heads[l++])) rc = -1;
		}
		cJSON_Delete(root);
	}
	if (rc)
		return -1;
	/* the same numbers the family layer summed, or nothing */
	uint64_t full = 0, swa = 0;
	for (uint64_t l = 0; l < L; l++) {
		if (heads[l] > (1ull << 32))
			return -1;
		if (qtk_family_layer_swa(hp, l))
			swa += heads[l];
		else
			full += heads[l];
	}
	return full == hp->kv_heads_full && swa == hp->kv_heads_swa ? 0 : -1;
}

double kv_layer_bytes(const hparams *hp, uint64_t l, uint64_t heads, uint64_t ctx, double ek, double ev)
{
	uint64_t tok = qtk_family_layer_swa(hp, l) && hp->swa_window < ctx ? hp->swa_window : ctx;
	return (double)heads * (double)tok * ((double)hp->head_dim * ek + (double)hp->head_dim_v * ev);
}

double kv_cache_bytes_kv(const hparams *hp, uint64_t ctx, double ek, double ev)
{
	if (hp->kv_unknown[0])
		return 0;
	uint64_t swa_ctx = hp->swa_window && hp->swa_window < ctx ? hp->swa_window : ctx;
	double heads_tokens = (double)hp->kv_heads_full * (double)ctx + (double)hp->kv_heads_swa * (double)swa_ctx;
	return heads_tokens * ((double)hp->head_dim * ek + (double)hp->head_dim_v * ev);
}

/* ---- the compute buffer ----------------------------------------------------------------- */

/* The tensor's role for offloading: 'o' output layer (output, output norm), 'i' input layer
 * (token embeddings and everything else outside the blocks), 'b' a block (*blk set). */
int tensor_place(const char *name, int *blk)
{
	size_t pl;
	*blk = block_of(name, &pl);
	if (*blk >= 0)
		return 'b';
	static const char *const out[] = {"output.weight", "output_norm.weight", "output_norm.bias", "output.bias",
					  "lm_head.weight", "lm_head.bias", "model.norm.weight", "model.norm.bias",
					  "norm.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"};
	for (size_t i = 0; i < sizeof out / sizeof *out; i++)
		if (!strcmp(name, out[i]))
			return 'o';
	return 'i';
}

static bool mi_is_expert(const char *name) { return strstr(name, "exps") || strstr(name, "experts"); }

void compute_dims(const qtk_model *m, const hparams *hp, compute_in *c)
{
	memset(c, 0, sizeof *c);
	c->n_embd = hp->n_embd;
	c->n_head = hp->n_head;
	c->head_dim = hp->head_dim;
	c->n_vocab = hp->n_vocab;
	c->n_expert = hp->n_expert;
	c->n_expert_used = hp->n_expert_used;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		const char *n = t->name;
		if (t->ndim != 2)
			continue;
		if (!mi_is_expert(n) && (strstr(n, "ffn_up") || strstr(n, "ffn_gate") || strstr(n, "up_proj") ||
					 strstr(n, "gate_proj")) && !strstr(n, "shexp") && !strstr(n, "shared"))
			c->n_ff = t->shape[0] > c->n_ff ? t->shape[0] : c->n_ff;
		if (!c->n_vocab && (!strcmp(n, "token_embd.weight") || !strcmp(n, "model.embed_tokens.weight")))
			c->n_vocab = t->shape[0];
		if (!c->n_embd && (!strcmp(n, "token_embd.weight") || !strcmp(n, "model.embed_tokens.weight")))
			c->n_embd = t->shape[1];
	}
	if (!c->n_ff && hp->n_ff_expert)
		c->n_ff = hp->n_ff_expert;
}

double compute_buffer_bytes(const compute_in *c, uint64_t ctx, bool flash_attn)
{
	double T = (double)(ctx < COMPUTE_UBATCH ? ctx : COMPUTE_UBATCH), C = (double)ctx;
	double E = (double)c->n_embd, H = (double)c->n_head, D = (double)c->head_dim;
	/* inputs: token ids, positions, output ids (I32), embeddings (F32 n_embd x T),
	 * the KQ mask (F32 ctx x T) */
	double input = 4.0 * T * (3.0 + E) + 4.0 * C * T;
	/* one layer's attention: Q twice, the output, and the KQ scores (F32 ctx x T per head);
	 * flash attention keeps no scores, only an F16 copy of the mask */
	double attn = flash_attn ? 4.0 * T * 3.0 * H * D + 2.0 * C * T : 4.0 * T * 2.0 * H * D + 4.0 * C * T * H;
	/* one layer's feed-forward: norm, input, gate and up activations; a mixture of experts
	 * adds the router logits and the chosen experts' outputs */
	double ffn = 4.0 * T * (2.0 * E + 2.0 * (double)c->n_ff);
	if (c->n_expert)
		ffn += 4.0 * ((double)c->n_expert * E + (double)c->n_expert * T + E * (double)c->n_expert_used * T);
	/* the output layer: the final norm and the logits (F32 n_vocab x T) */
	double out = 4.0 * T * (E + (double)c->n_vocab);
	double mx = attn > ffn ? attn : ffn;
	mx = out > mx ? out : mx;
	return input + mx;
}
