/* modelinfo.c - architecture numbers (GGUF keys or config.json), KV-cache
 * arithmetic and GGUF <-> Hugging Face tensor names for the llama family. */
#include "inspect.h"
#include <cJSON.h>
#include <string.h>

/* An integer metadata value (any integer type); false when absent or not an integer. */
static bool mi_kv_uint(const qtk_model *m, const char *key, uint64_t *out)
{
	const qtk_kv *kv = qtk_kv_find(m, key);
	if (!kv)
		return false;
	const qtk_value *v = &kv->val;
	if (qtk_value_as_u64(v, out))
		return true;
	switch (v->type) {
	case QTK_V_ARR: /* per-layer arrays (head_count_kv): take the largest */
		if (v->n && (v->elem == QTK_V_U32 || v->elem == QTK_V_I32)) {
			uint64_t mx = 0;
			for (uint64_t k = 0; k < v->n; k++) {
				uint64_t x = qtk_rd32((const uint8_t *)v->arr + 4 * k);
				if (x > mx && !(v->elem == QTK_V_I32 && (x >> 31)))
					mx = x;
			}
			*out = mx;
			return true;
		}
		return false;
	default: return false;
	}
}

static bool mi_arch_uint(const qtk_model *m, const char *arch, const char *suffix, uint64_t *out)
{
	char key[256];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	return mi_kv_uint(m, key, out);
}

static bool mi_json_uint(const cJSON *o, const char *key, uint64_t *out)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 1e15)
		return false;
	*out = (uint64_t)j->valuedouble;
	return true;
}

static int mi_from_config(const qtk_model *m, hparams *hp)
{
	const qtk_blob *b = qtk_blob_find(m, "config.json");
	if (!b)
		return -1;
	cJSON *root = cJSON_ParseWithLength((const char *)b->data, b->len);
	if (!root)
		return -1;
	const cJSON *o = root, *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
	if (cJSON_IsObject(tc) && !cJSON_GetObjectItemCaseSensitive(root, "num_hidden_layers"))
		o = tc;
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
	if (cJSON_IsString(mt))
		snprintf(hp->arch, sizeof hp->arch, "%s", mt->valuestring);
	int rc = -1;
	if (mi_json_uint(o, "num_hidden_layers", &hp->n_layer) && mi_json_uint(o, "num_attention_heads", &hp->n_head) &&
	    hp->n_head) {
		if (!mi_json_uint(o, "num_key_value_heads", &hp->n_head_kv))
			hp->n_head_kv = hp->n_head;
		mi_json_uint(o, "hidden_size", &hp->n_embd);
		if (mi_json_uint(o, "head_dim", &hp->head_dim) && hp->head_dim)
			hp->head_dim_explicit = true;
		else
			hp->head_dim = hp->n_embd / hp->n_head;
		mi_json_uint(o, "max_position_embeddings", &hp->ctx_max);
		mi_json_uint(o, "vocab_size", &hp->n_vocab);
		hp->source = "config.json";
		rc = 0;
	}
	cJSON_Delete(root);
	return rc;
}

int hparams_load(const qtk_model *m, hparams *hp)
{
	memset(hp, 0, sizeof *hp);
	const qtk_kv *a = qtk_kv_find(m, "general.architecture");
	if (a && a->val.type == QTK_V_STR) {
		const char *arch = a->val.v.str.s;
		snprintf(hp->arch, sizeof hp->arch, "%s", arch);
		if (mi_arch_uint(m, arch, "block_count", &hp->n_layer) &&
		    mi_arch_uint(m, arch, "attention.head_count", &hp->n_head) && hp->n_head) {
			if (!mi_arch_uint(m, arch, "attention.head_count_kv", &hp->n_head_kv))
				hp->n_head_kv = hp->n_head;
			mi_arch_uint(m, arch, "embedding_length", &hp->n_embd);
			if (mi_arch_uint(m, arch, "attention.key_length", &hp->head_dim) && hp->head_dim)
				hp->head_dim_explicit = true;
			else
				hp->head_dim = hp->n_embd / hp->n_head;
			mi_arch_uint(m, arch, "context_length", &hp->ctx_max);
			mi_arch_uint(m, arch, "vocab_size", &hp->n_vocab);
			hp->source = "GGUF keys";
			return 0;
		}
	}
	return mi_from_config(m, hp);
}

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
	return 2.0 * (double)hp->n_layer * (double)hp->n_head_kv * (double)hp->head_dim * (double)ctx * elem_bytes;
}

/* ---- Names ---------------------------------------------------------------- */

static const struct {
	const char *gguf, *hf;
} mi_blk_names[] = {
	{"attn_q", "self_attn.q_proj"},   {"attn_k", "self_attn.k_proj"},
	{"attn_v", "self_attn.v_proj"},   {"attn_output", "self_attn.o_proj"},
	{"ffn_gate", "mlp.gate_proj"},    {"ffn_up", "mlp.up_proj"},
	{"ffn_down", "mlp.down_proj"},    {"attn_norm", "input_layernorm"},
	{"ffn_norm", "post_attention_layernorm"},
};

static const struct {
	const char *gguf, *hf;
} mi_top_names[] = {
	{"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"},
};

int canon_hf_name(const char *name, char *buf, size_t n, int *qk)
{
	*qk = 0;
	const char *dot = strrchr(name, '.');
	if (!dot)
		return 0;
	size_t stem = (size_t)(dot - name);
	for (size_t i = 0; i < sizeof mi_top_names / sizeof *mi_top_names; i++)
		if (strlen(mi_top_names[i].gguf) == stem && !strncmp(name, mi_top_names[i].gguf, stem)) {
			snprintf(buf, n, "%s%s", mi_top_names[i].hf, dot);
			return 1;
		}
	if (strncmp(name, "blk.", 4) != 0)
		return 0;
	const char *p = name + 4, *q = p;
	while (*q >= '0' && *q <= '9')
		q++;
	if (q == p || *q != '.' || q - p > 9)
		return 0;
	const char *mod = q + 1;
	size_t ml = (size_t)(dot - mod);
	for (size_t i = 0; i < sizeof mi_blk_names / sizeof *mi_blk_names; i++)
		if (strlen(mi_blk_names[i].gguf) == ml && !strncmp(mod, mi_blk_names[i].gguf, ml)) {
			snprintf(buf, n, "model.layers.%.*s.%s%s", (int)(q - p), p, mi_blk_names[i].hf, dot);
			if (i == 0)
				*qk = 1;
			else if (i == 1)
				*qk = 2;
			return 1;
		}
	return 0;
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
