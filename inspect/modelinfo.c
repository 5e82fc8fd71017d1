/* modelinfo.c - the memory estimate's arithmetic (KV cache) on the architecture numbers of
 * the family layer (qtk_family_hparams), and block numbers of tensor names. */
#include "inspect.h"
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
