/* mix.c - llama.cpp's named mixes: which tensors are quantized, and to what.
 *
 * The rules follow llama.cpp's llama_tensor_get_type:
 * a base type per mix, bumped per tensor by role (output, token_embd,
 * attn_v, ffn_down, attn_output, ...), layer position (use_more_bits) and
 * the model's grouped-query factor.
 *
 * Mixture-of-experts models (more than one expert): the experts of a block
 * are one 3-D tensor (blk.N.ffn_{gate,up,down}_exps, quantized as n_expert *
 * out rows), a block may also hold shared-expert tensors (*_shexp). Every
 * ffn_down of such a model (experts and shared expert alike) takes its layer
 * position from its block number out of the model's block count, not from a
 * running count of ffn_down tensors. The router (ffn_gate_inp) is never
 * quantized; the shared expert's gate (ffn_gate_inp_shexp) is an ordinary
 * matrix.
 */
#include "family/mix.h"
#include "internal.h"
#include <string.h>

typedef struct mix_info {
	const char *name;
	int ftype;      /* llama_ftype, written to general.file_type */
	unsigned base;  /* base ggml type */
} mix_info;

enum { F_Q4_0 = 2, F_Q4_1 = 3, F_Q8_0 = 7, F_Q5_0 = 8, F_Q5_1 = 9, F_Q2_K = 10, F_Q3_K_S = 11, F_Q3_K_M = 12,
       F_Q3_K_L = 13, F_Q4_K_S = 14, F_Q4_K_M = 15, F_Q5_K_S = 16, F_Q5_K_M = 17, F_Q6_K = 18, F_IQ4_NL = 25,
       F_IQ4_XS = 30, F_MXFP4_MOE = 38, F_NVFP4 = 39 };

static const mix_info mixes[] = {
	{"Q4_0", F_Q4_0, QTK_T_Q4_0},       {"Q4_1", F_Q4_1, QTK_T_Q4_1},
	{"Q5_0", F_Q5_0, QTK_T_Q5_0},       {"Q5_1", F_Q5_1, QTK_T_Q5_1},
	{"Q8_0", F_Q8_0, QTK_T_Q8_0},       {"Q2_K", F_Q2_K, QTK_T_Q2_K},
	{"Q3_K_S", F_Q3_K_S, QTK_T_Q3_K},   {"Q3_K_M", F_Q3_K_M, QTK_T_Q3_K},
	{"Q3_K_L", F_Q3_K_L, QTK_T_Q3_K},   {"Q4_K_S", F_Q4_K_S, QTK_T_Q4_K},
	{"Q4_K_M", F_Q4_K_M, QTK_T_Q4_K},   {"Q5_K_S", F_Q5_K_S, QTK_T_Q5_K},
	{"Q5_K_M", F_Q5_K_M, QTK_T_Q5_K},   {"Q6_K", F_Q6_K, QTK_T_Q6_K},
	{"IQ4_NL", F_IQ4_NL, QTK_T_IQ4_NL}, {"IQ4_XS", F_IQ4_XS, QTK_T_IQ4_XS},
};

int qtk_mix_lookup(const char *name, unsigned *base, int *ftype)
{
	for (size_t i = 0; i < sizeof mixes / sizeof *mixes; i++)
		if (!strcmp(mixes[i].name, name)) { /* case matters: Q4_K_M is a mix, q4_k a type */
			*base = mixes[i].base;
			*ftype = mixes[i].ftype;
			return 0;
		}
	return -1;
}

const char *qtk_mix_name(size_t i)
{
	return i < sizeof mixes / sizeof *mixes ? mixes[i].name : NULL;
}

/* general.file_type for a single-type target (llama-quantize --pure); -1 when none. */
int qtk_mix_ftype_for_type(unsigned type)
{
	static const struct { unsigned type; int ftype; } pure[] = {
		{QTK_T_F32, 0}, {QTK_T_F16, 1}, {QTK_T_BF16, 32}, {QTK_T_Q4_0, F_Q4_0}, {QTK_T_Q4_1, F_Q4_1},
		{QTK_T_Q5_0, F_Q5_0}, {QTK_T_Q5_1, F_Q5_1}, {QTK_T_Q8_0, F_Q8_0}, {QTK_T_Q2_K, F_Q2_K},
		{QTK_T_Q3_K, F_Q3_K_M}, {QTK_T_Q4_K, F_Q4_K_M}, {QTK_T_Q5_K, F_Q5_K_M}, {QTK_T_Q6_K, F_Q6_K},
		{QTK_T_IQ4_NL, F_IQ4_NL}, {QTK_T_IQ4_XS, F_IQ4_XS}, {QTK_T_MXFP4, F_MXFP4_MOE}, {QTK_T_NVFP4, F_NVFP4},
	};
	for (size_t i = 0; i < sizeof pure / sizeof *pure; i++)
		if (pure[i].type == type)
			return pure[i].ftype;
	return -1;
}

/* llama.cpp's tensor_allows_quantization, for the llama family and the
 * names its converter writes: 2-D+ weights that are not norms, routers or
 * position embeddings. Works on GGUF and HF names. */
bool qtk_mix_quantizable(const qtk_tensor *t)
{
	const char *n = t->name;
	if (t->ndim < 2 || !qtk_str_ends(n, "weight"))
		return false;
	static const char *const skip[] = {"_norm.weight", "norm.weight", "ffn_gate_inp.weight", "pos_embd",
					   "token_types", "ssm_conv1d", "attn_rel_b", "layernorm.weight",
					   "mlp.gate.weight", "block_sparse_moe.gate.weight", "mlp.router.weight"};
	for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
		if (strstr(n, skip[i]))
			return false;
	return true;
}

static bool has(const char *name, const char *gguf, const char *hf)
{
	return strstr(name, gguf) || (hf && strstr(name, hf));
}

/* llama.cpp visits tensors ordered by block number, then name (its
 * weight_name_comparer); the per-role counters follow that order. */
static long block_of(const char *n)
{
	const char *p = strstr(n, "blk.");
	if (p != n) {
		p = strstr(n, "layers.");
		if (!p)
			return -1;
		p += 7;
	} else {
		p += 4;
	}
	long v = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9' && v < 1000000; p++)
		v = v * 10 + (*p - '0');
	return v;
}

static int cmp_llama_order(const char *a, const char *b)
{
	long la = block_of(a), lb = block_of(b);
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a, b);
}

/* Index of t among the tensors of the same role in llama.cpp's order. */
static int role_index(const qtk_model *m, const qtk_tensor *t, bool (*role)(const char *))
{
	int k = 0;
	for (size_t i = 0; i < m->ntensors; i++)
		if (role(m->tensors[i].name) && cmp_llama_order(m->tensors[i].name, t->name) < 0)
			k++;
	return k;
}

static bool is_attn_v(const char *n) { return has(n, "attn_v.weight", "self_attn.v_proj.weight"); }

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The down projections: dense, stacked experts (ffn_down_exps), shared expert (ffn_down_shexp);
 * HF: mlp.down_proj, mlp.experts.E.down_proj, mlp.shared_expert.down_proj, Mixtral's experts.E.w2. */
static bool is_ffn_down(const char *n)
{
	return strstr(n, "ffn_down") || strstr(n, "down_proj") || (strstr(n, "experts.") && strstr(n, ".w2."));
}

/* A tensor holding the routed experts of a block. */
static bool is_experts(const char *n)
{
	return strstr(n, "_exps.") || strstr(n, ".experts.");
}

void qtk_mix_init(qtk_mix_state *s, const qtk_model *m, int ftype)
{
	memset(s, 0, sizeof *s);
	s->ftype = ftype;
	s->m = m;
	int max_block = 0;
	uint64_t experts = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		const char *n = m->tensors[i].name;
		if (has(n, "attn_v.weight", "self_attn.v_proj.weight") || has(n, "attn_qkv.weight", NULL))
			s->n_attn_v++;
		if (is_ffn_down(n))
			s->n_ffn_down++;
		if (!strcmp(n, "output.weight") || !strcmp(n, "lm_head.weight"))
			s->has_output = true;
		long b = block_of(n);
		if (b >= 0 && b < 1000000 && b + 1 > max_block)
			max_block = (int)b + 1;
		if (!experts && m->tensors[i].ndim == 3 && is_experts(n))
			experts = m->tensors[i].shape[0];
	}
	s->n_head = s->n_head_kv = 1;
	s->n_layer = 0;
	const qtk_kv *arch = qtk_kv_find(m, "general.architecture");
	if (arch && arch->val.type == QTK_V_STR) {
		char key[160];
		const qtk_kv *kv;
		snprintf(key, sizeof key, "%s.attention.head_count", arch->val.v.str.s);
		if ((kv = qtk_kv_find(m, key)) && kv->val.type != QTK_V_ARR)
			s->n_head = (int)kv->val.v.u;
		snprintf(key, sizeof key, "%s.attention.head_count_kv", arch->val.v.str.s);
		if ((kv = qtk_kv_find(m, key)) && kv->val.type != QTK_V_ARR)
			s->n_head_kv = (int)kv->val.v.u;
		else
			s->n_head_kv = s->n_head;
		snprintf(key, sizeof key, "%s.expert_count", arch->val.v.str.s);
		if ((kv = qtk_kv_find(m, key)) && kv->val.type != QTK_V_ARR)
			s->n_expert = (int)kv->val.v.u;
		snprintf(key, sizeof key, "%s.block_count", arch->val.v.str.s);
		if ((kv = qtk_kv_find(m, key)) && kv->val.type != QTK_V_ARR)
			s->n_layer = (int)kv->val.v.u;
		const qtk_family *f = qtk_family_by_gguf_arch(arch->val.v.str.s);
		s->is_70b = f && f->mix_70b_layers && s->n_layer == f->mix_70b_layers;
	}
	if (s->n_head_kv <= 0)
		s->n_head_kv = 1;
	if (s->n_expert <= 0 && experts > 1)
		s->n_expert = experts > 1000000 ? 1000000 : (int)experts;
	if (s->n_layer <= 0)
		s->n_layer = max_block;
}

/* The type llama.cpp would give tensor t in mix s (tensors in file order). */
unsigned qtk_mix_type(qtk_mix_state *s, const qtk_tensor *t, unsigned base, bool has_imatrix)
{
	const char *n = t->name;
	int f = s->ftype;
	int gqa = s->n_head / s->n_head_kv;
	unsigned ty = base;
	bool embd = has(n, "token_embd.weight", "embed_tokens.weight");
	/* a model without an output head uses the embedding for it: it gets the head's type */
	if ((has(n, "output.weight", "lm_head.weight") && !strstr(n, "attn_output")) || (embd && !s->has_output)) {
		uint64_t ne0 = t->shape[t->ndim - 1];
		if (ne0 % 256)
			ty = QTK_T_Q8_0;
		else if (ty != QTK_T_Q8_0)
			ty = QTK_T_Q6_K;
	} else if (embd) {
		/* the base type for every mix qtk writes */
	} else if (has(n, "attn_v.weight", "self_attn.v_proj.weight")) {
		int iv = s->n_attn_v <= 4096 ? role_index(s->m, t, is_attn_v) : s->i_attn_v;
		if (f == F_Q2_K)
			ty = gqa >= 4 ? QTK_T_Q4_K : QTK_T_Q3_K;
		else if (f == F_Q3_K_M)
			ty = iv < 2 ? QTK_T_Q5_K : QTK_T_Q4_K;
		else if (f == F_Q3_K_L)
			ty = QTK_T_Q5_K;
		else if ((f == F_IQ4_NL || f == F_IQ4_XS) && gqa >= 4)
			ty = QTK_T_Q5_K;
		else if ((f == F_Q4_K_M || f == F_Q5_K_M) && use_more_bits(iv, s->n_attn_v))
			ty = QTK_T_Q6_K;
		else if (f == F_Q4_K_S && iv < 4)
			ty = QTK_T_Q5_K;
		if (s->is_70b && (ty == QTK_T_Q3_K || ty == QTK_T_Q4_K))
			ty = QTK_T_Q5_K;
		if (s->n_expert == 8)
			ty = QTK_T_Q8_0;
		s->i_attn_v++;
	} else if (has(n, "attn_k.weight", "self_attn.k_proj.weight")) {
		if (s->n_expert == 8)
			ty = QTK_T_Q8_0;
	} else if (is_ffn_down(n)) {
		int i, nl;
		if (s->n_expert > 1) { /* experts: the block's position among the model's blocks */
			long b = block_of(n);
			nl = s->n_layer > 0 ? s->n_layer : s->n_ffn_down;
			i = b >= 0 && b < nl ? (int)b : 0;
		} else {
			i = s->n_ffn_down <= 4096 ? role_index(s->m, t, is_ffn_down) : s->i_ffn_down;
			nl = s->n_ffn_down;
		}
		if (f == F_Q2_K)
			ty = QTK_T_Q3_K;
		else if (f == F_Q3_K_M)
			ty = i < nl / 16 ? QTK_T_Q5_K : QTK_T_Q4_K;
		else if (f == F_Q3_K_L)
			ty = QTK_T_Q5_K;
		else if (f == F_Q4_K_M) {
			if (use_more_bits(i, nl))
				ty = QTK_T_Q6_K;
		} else if (i < nl / 8 && (f == F_IQ4_NL || f == F_IQ4_XS) && !has_imatrix)
			ty = QTK_T_Q5_K;
		else if (f == F_Q5_K_M && use_more_bits(i, nl))
			ty = QTK_T_Q6_K;
		else if (f == F_Q4_K_S && i < nl / 8)
			ty = QTK_T_Q5_K;
		else if ((f == F_Q4_0 || f == F_Q5_0) && has_imatrix && i < nl / 8)
			ty = f == F_Q4_0 ? QTK_T_Q4_1 : QTK_T_Q5_1;
		s->i_ffn_down++;
	} else if (has(n, "attn_output.weight", "self_attn.o_proj.weight")) {
		if (s->n_expert == 8) {
			if (f == F_Q2_K || f == F_Q3_K_S || f == F_Q3_K_M || f == F_IQ4_NL || f == F_Q4_K_S ||
			    f == F_Q4_K_M || f == F_IQ4_XS)
				ty = QTK_T_Q5_K;
		} else if (f == F_Q2_K)
			ty = QTK_T_Q3_K;
		else if (f == F_Q3_K_M)
			ty = QTK_T_Q4_K;
		else if (f == F_Q3_K_L)
			ty = QTK_T_Q5_K;
	} else if (has(n, "attn_qkv.weight", NULL)) {
		if (f == F_Q3_K_M || f == F_Q3_K_L)
			ty = QTK_T_Q4_K;
		else if (f == F_Q4_K_M)
			ty = QTK_T_Q5_K;
		else if (f == F_Q5_K_M)
			ty = QTK_T_Q6_K;
	}
	return qtk_mix_fallback(t, ty);
}

/* llama.cpp's fallback when the row length does not divide the block. */
unsigned qtk_mix_fallback(const qtk_tensor *t, unsigned ty)
{
	uint64_t ne0 = t->shape[t->ndim - 1];
	const qtk_type_info *ti = qtk_type(ty);
	if (!ti || ne0 % ti->blck == 0)
		return ty;
	switch (ty) {
	case QTK_T_Q2_K: case QTK_T_Q3_K: case QTK_T_IQ4_XS: ty = QTK_T_IQ4_NL; break;
	case QTK_T_Q4_K: ty = QTK_T_Q5_0; break;
	case QTK_T_Q5_K: ty = QTK_T_Q5_1; break;
	case QTK_T_Q6_K: ty = QTK_T_Q8_0; break;
	default: break;
	}
	ti = qtk_type(ty);
	return ne0 % ti->blck == 0 ? ty : QTK_T_F16;
}
