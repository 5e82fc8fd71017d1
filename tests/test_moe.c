/* test_moe.c - mixture-of-experts models: 3-D expert tensors (blk.N.ffn_*_exps, logical shape
 * [n_expert, out, in]), shared experts (*_shexp) and routers (ffn_gate_inp) through the mix
 * rules, the writer and readers, the programs (inspect, convert, QPK and safetensors round
 * trips, records), importance matrices per expert, and llama.cpp's own files when the fixtures
 * are there. */
#include "t.h"
#include "qtk_ext.h"
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- building models in memory ------------------------------------------------------- */

static void set_u(qtk_model *m, const char *k, uint32_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

/* A plain tensor of type ty with logical shape d[0..nd-1] (outermost first). */
static qtk_tensor *add_t(qtk_model *m, const char *name, unsigned ty, int nd, const uint64_t *d)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	t->ndim = nd;
	for (int i = 0; i < nd; i++)
		t->shape[i] = d[i];
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = ty;
	t->nparts = 1;
	t->parts[0].type = ty;
	t->parts[0].ndim = nd;
	for (int i = 0; i < nd; i++)
		t->parts[0].shape[i] = d[i];
	uint64_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= d[i];
	qtk_type_nbytes(ty, n, &t->parts[0].nbytes);
	qtk_tensor_finish(t);
	return t;
}

static void add2(qtk_model *m, const char *name, unsigned ty, uint64_t r, uint64_t c)
{
	uint64_t d[2] = {r, c};
	add_t(m, name, ty, 2, d);
}

static void add3(qtk_model *m, const char *name, unsigned ty, uint64_t e, uint64_t r, uint64_t c)
{
	uint64_t d[3] = {e, r, c};
	add_t(m, name, ty, 3, d);
}

static void add1(qtk_model *m, const char *name, uint64_t c)
{
	uint64_t d[1] = {c};
	add_t(m, name, QTK_T_F32, 1, d);
}

/* A header-only MoE model in llama.cpp's naming: nl blocks, ne experts, with or without shared
 * experts, with or without an output head, with or without the expert_count key. */
static qtk_model *moe_desc(const char *arch, int nl, int ne, bool shexp, bool head, bool key)
{
	enum { E = 256, F = 256, V = 512 };
	char k[128], n[96];
	qtk_model *m = qtk_model_new();
	qtk_model_set_kv_str(m, "general.architecture", arch);
	snprintf(k, sizeof k, "%s.block_count", arch);
	set_u(m, k, (uint32_t)nl);
	snprintf(k, sizeof k, "%s.attention.head_count", arch);
	set_u(m, k, 8);
	snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
	set_u(m, k, 4);
	if (key) {
		snprintf(k, sizeof k, "%s.expert_count", arch);
		set_u(m, k, (uint32_t)ne);
	}
	if (head)
		add2(m, "output.weight", QTK_T_F16, V, E);
	add2(m, "token_embd.weight", QTK_T_F16, V, E);
	for (int l = 0; l < nl; l++) {
#define T(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
		add3(m, T("ffn_gate_exps.weight"), QTK_T_F16, (uint64_t)ne, F, E);
		add3(m, T("ffn_down_exps.weight"), QTK_T_F16, (uint64_t)ne, E, F);
		add3(m, T("ffn_up_exps.weight"), QTK_T_F16, (uint64_t)ne, F, E);
		add2(m, T("ffn_gate_inp.weight"), QTK_T_F32, (uint64_t)ne, E);
		if (shexp) {
			add2(m, T("ffn_down_shexp.weight"), QTK_T_F16, E, F);
			add2(m, T("ffn_gate_shexp.weight"), QTK_T_F16, F, E);
			add2(m, T("ffn_up_shexp.weight"), QTK_T_F16, F, E);
			add2(m, T("ffn_gate_inp_shexp.weight"), QTK_T_F16, 1, E);
		}
		add1(m, T("attn_norm.weight"), E);
		add1(m, T("ffn_norm.weight"), E);
		add2(m, T("attn_k.weight"), QTK_T_F16, E / 2, E);
		add2(m, T("attn_output.weight"), QTK_T_F16, E, E);
		add2(m, T("attn_q.weight"), QTK_T_F16, E, E);
		add2(m, T("attn_v.weight"), QTK_T_F16, E / 2, E);
#undef T
	}
	add1(m, "output_norm.weight", E);
	return m;
}

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The type of every tensor in mix `mix` (in file order, as qconvert asks). */
static unsigned *mix_types(const qtk_model *m, const char *mix)
{
	unsigned base;
	int ftype;
	if (qtk_mix_lookup(mix, &base, &ftype))
		return NULL;
	qtk_mix_state s;
	qtk_mix_init(&s, m, ftype);
	unsigned *ty = calloc(m->ntensors, sizeof *ty);
	for (size_t i = 0; i < m->ntensors; i++)
		ty[i] = qtk_mix_quantizable(&m->tensors[i]) ? qtk_mix_type(&s, &m->tensors[i], base, false)
							    : m->tensors[i].layout.type;
	return ty;
}

static unsigned type_of(const qtk_model *m, const unsigned *ty, const char *name)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return ty[i];
	return 999;
}

static unsigned blk_type(const qtk_model *m, const unsigned *ty, int l, const char *stem)
{
	char n[96];
	snprintf(n, sizeof n, "blk.%d.%s.weight", l, stem);
	return type_of(m, ty, n);
}

static const char *tn(unsigned t) { return t < QTK_T_MAX && qtk_type(t) ? qtk_type(t)->name : "?"; }

/* llama.cpp's mix rules on MoE models: ffn_down (experts and shared expert) by block number out
 * of the block count, routers never quantized, the shared expert's gate quantized, the
 * 8-expert bumps, the tied-embedding rule. */
static void test_mix_rules(void)
{
	enum { NL = 16 };
	qtk_model *m = moe_desc("qwen2moe", NL, 4, true, true, true);
	unsigned *q4 = mix_types(m, "Q4_K_M"), *q3 = mix_types(m, "Q3_K_M"), *x4 = mix_types(m, "IQ4_XS");
	CHECK(q4 && q3 && x4, "mix lookup");
	int bad = 0;
	for (int l = 0; q4 && q3 && x4 && l < NL; l++) {
		unsigned want = more_bits(l, NL) ? QTK_T_Q6_K : QTK_T_Q4_K;
		unsigned e = blk_type(m, q4, l, "ffn_down_exps"), s = blk_type(m, q4, l, "ffn_down_shexp");
		if (e != want || s != want) {
			bad++;
			printf("  Q4_K_M blk.%d ffn_down_exps %s, _shexp %s, want %s\n", l, tn(e), tn(s), tn(want));
		}
		want = l < NL / 16 ? QTK_T_Q5_K : QTK_T_Q4_K;
		if (blk_type(m, q3, l, "ffn_down_exps") != want || blk_type(m, q3, l, "ffn_down_shexp") != want)
			bad++;
		want = l < NL / 8 ? QTK_T_Q5_K : QTK_T_IQ4_XS;
		if (blk_type(m, x4, l, "ffn_down_exps") != want || blk_type(m, x4, l, "ffn_down_shexp") != want)
			bad++;
		if (blk_type(m, q4, l, "ffn_gate_inp") != QTK_T_F32)
			bad++;
		if (blk_type(m, q4, l, "ffn_gate_inp_shexp") != QTK_T_Q4_K || blk_type(m, q4, l, "ffn_gate_exps") != QTK_T_Q4_K ||
		    blk_type(m, q4, l, "ffn_up_shexp") != QTK_T_Q4_K)
			bad++;
		/* attn_v counts its own tensors (one per block) */
		want = more_bits(l, NL) ? QTK_T_Q6_K : QTK_T_Q4_K;
		if (blk_type(m, q4, l, "attn_v") != want)
			bad++;
	}
	CHECK(bad == 0, "MoE ffn_down / router / shared-expert types: %d wrong", bad);
	CHECK(q4 && type_of(m, q4, "output.weight") == QTK_T_Q6_K && type_of(m, q4, "token_embd.weight") == QTK_T_Q4_K,
	      "head Q6_K, embedding the base type");
	for (size_t i = 0; i < m->ntensors; i++)
		if (strstr(m->tensors[i].name, "ffn_gate_inp.weight"))
			CHECK(!qtk_mix_quantizable(&m->tensors[i]), "%s is a router", m->tensors[i].name);
	free(q4);
	free(q3);
	free(x4);
	qtk_close(m);

	/* without the expert_count key: the count comes from the 3-D expert tensors */
	m = moe_desc("llama", NL, 4, true, true, false);
	q4 = mix_types(m, "Q4_K_M");
	CHECK(q4 && blk_type(m, q4, 3, "ffn_down_shexp") == QTK_T_Q4_K && blk_type(m, q4, 3, "ffn_down_exps") == QTK_T_Q4_K &&
		      blk_type(m, q4, 2, "ffn_down_shexp") == QTK_T_Q4_K &&
		      blk_type(m, q4, 4, "ffn_down_shexp") == QTK_T_Q6_K,
	      "expert count from the tensors: blk.3 %s", q4 ? tn(blk_type(m, q4, 3, "ffn_down_shexp")) : "-");
	free(q4);
	qtk_close(m);

	/* eight experts: attn_v and attn_k Q8_0, attn_output Q5_K (Q4_K_M, IQ4_XS), not for Q3_K_L */
	m = moe_desc("llama", 4, 8, false, true, true);
	q4 = mix_types(m, "Q4_K_M");
	x4 = mix_types(m, "IQ4_XS");
	q3 = mix_types(m, "Q3_K_L");
	CHECK(q4 && blk_type(m, q4, 0, "attn_v") == QTK_T_Q8_0 && blk_type(m, q4, 1, "attn_k") == QTK_T_Q8_0 &&
		      blk_type(m, q4, 2, "attn_output") == QTK_T_Q5_K,
	      "8 experts, Q4_K_M");
	CHECK(x4 && blk_type(m, x4, 0, "attn_output") == QTK_T_Q5_K && q3 && blk_type(m, q3, 0, "attn_output") == QTK_T_Q3_K,
	      "8 experts, attn_output: IQ4_XS %s, Q3_K_L %s", x4 ? tn(blk_type(m, x4, 0, "attn_output")) : "-",
	      q3 ? tn(blk_type(m, q3, 0, "attn_output")) : "-");
	free(q4);
	free(x4);
	free(q3);
	qtk_close(m);

	/* no output head: the embedding is quantized as the head */
	m = moe_desc("llama", 2, 4, false, false, true);
	q4 = mix_types(m, "Q4_K_M");
	unsigned *q8 = mix_types(m, "Q8_0");
	CHECK(q4 && type_of(m, q4, "token_embd.weight") == QTK_T_Q6_K && q8 && type_of(m, q8, "token_embd.weight") == QTK_T_Q8_0,
	      "tied embedding takes the head's type: %s", q4 ? tn(type_of(m, q4, "token_embd.weight")) : "-");
	free(q4);
	free(q8);
	qtk_close(m);
}

int main(void)
{
	test_mix_rules();
	return T_DONE();
}
