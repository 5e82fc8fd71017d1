/* layout.c - the layout table: every storage type qtk knows. */
#include "internal.h"
#include <stdio.h>
#include <string.h>

/* name, upper, safetensors dtype, block elements, bytes per block, code bits,
 * float, quant, sub-byte, scale group. Block sizes follow ggml-common.h. */
static const qtk_type_info types[QTK_T_MAX] = {
	[QTK_T_F32]     = {"f32", "F32", "F32", 1, 4, 32, 1, 0, 0, 0},
	[QTK_T_F16]     = {"f16", "F16", "F16", 1, 2, 16, 1, 0, 0, 0},
	[QTK_T_Q4_0]    = {"q4_0", "Q4_0", NULL, 32, 18, 4, 0, 1, 0, 32},
	[QTK_T_Q4_1]    = {"q4_1", "Q4_1", NULL, 32, 20, 4, 0, 1, 0, 32},
	[QTK_T_Q5_0]    = {"q5_0", "Q5_0", NULL, 32, 22, 5, 0, 1, 0, 32},
	[QTK_T_Q5_1]    = {"q5_1", "Q5_1", NULL, 32, 24, 5, 0, 1, 0, 32},
	[QTK_T_Q8_0]    = {"q8_0", "Q8_0", NULL, 32, 34, 8, 0, 1, 0, 32},
	[QTK_T_Q8_1]    = {"q8_1", "Q8_1", NULL, 32, 36, 8, 0, 1, 0, 32},
	[QTK_T_Q2_K]    = {"q2_K", "Q2_K", NULL, 256, 84, 2, 0, 1, 0, 16},
	[QTK_T_Q3_K]    = {"q3_K", "Q3_K", NULL, 256, 110, 3, 0, 1, 0, 16},
	[QTK_T_Q4_K]    = {"q4_K", "Q4_K", NULL, 256, 144, 4, 0, 1, 0, 32},
	[QTK_T_Q5_K]    = {"q5_K", "Q5_K", NULL, 256, 176, 5, 0, 1, 0, 32},
	[QTK_T_Q6_K]    = {"q6_K", "Q6_K", NULL, 256, 210, 6, 0, 1, 0, 16},
	[QTK_T_Q8_K]    = {"q8_K", "Q8_K", NULL, 256, 292, 8, 0, 1, 0, 256},
	[QTK_T_IQ2_XXS] = {"iq2_xxs", "IQ2_XXS", NULL, 256, 66, 2, 0, 1, 0, 32},
	[QTK_T_IQ2_XS]  = {"iq2_xs", "IQ2_XS", NULL, 256, 74, 2, 0, 1, 0, 16},
	[QTK_T_IQ3_XXS] = {"iq3_xxs", "IQ3_XXS", NULL, 256, 98, 3, 0, 1, 0, 32},
	[QTK_T_IQ1_S]   = {"iq1_s", "IQ1_S", NULL, 256, 50, 1, 0, 1, 0, 32},
	[QTK_T_IQ4_NL]  = {"iq4_nl", "IQ4_NL", NULL, 32, 18, 4, 0, 1, 0, 32},
	[QTK_T_IQ3_S]   = {"iq3_s", "IQ3_S", NULL, 256, 110, 3, 0, 1, 0, 32},
	[QTK_T_IQ2_S]   = {"iq2_s", "IQ2_S", NULL, 256, 82, 2, 0, 1, 0, 16},
	[QTK_T_IQ4_XS]  = {"iq4_xs", "IQ4_XS", NULL, 256, 136, 4, 0, 1, 0, 32},
	[QTK_T_I8]      = {"i8", "I8", "I8", 1, 1, 8, 0, 0, 0, 0},
	[QTK_T_I16]     = {"i16", "I16", "I16", 1, 2, 16, 0, 0, 0, 0},
	[QTK_T_I32]     = {"i32", "I32", "I32", 1, 4, 32, 0, 0, 0, 0},
	[QTK_T_I64]     = {"i64", "I64", "I64", 1, 8, 64, 0, 0, 0, 0},
	[QTK_T_F64]     = {"f64", "F64", "F64", 1, 8, 64, 1, 0, 0, 0},
	[QTK_T_IQ1_M]   = {"iq1_m", "IQ1_M", NULL, 256, 56, 1, 0, 1, 0, 16},
	[QTK_T_BF16]    = {"bf16", "BF16", "BF16", 1, 2, 16, 1, 0, 0, 0},
	[QTK_T_TQ1_0]   = {"tq1_0", "TQ1_0", NULL, 256, 54, 2, 0, 1, 0, 256},
	[QTK_T_TQ2_0]   = {"tq2_0", "TQ2_0", NULL, 256, 66, 2, 0, 1, 0, 256},
	[QTK_T_MXFP4]   = {"mxfp4", "MXFP4", NULL, 32, 17, 4, 0, 1, 0, 32},
	[QTK_T_NVFP4]   = {"nvfp4", "NVFP4", NULL, 64, 36, 4, 0, 1, 0, 16},
	[QTK_T_Q1_0]    = {"q1_0", "Q1_0", NULL, 128, 18, 1, 0, 1, 0, 128},
	[QTK_T_Q2_0]    = {"q2_0", "Q2_0", NULL, 64, 18, 2, 0, 1, 0, 64},
	[QTK_DT_BOOL]   = {"bool", "BOOL", "BOOL", 1, 1, 8, 0, 0, 0, 0},
	[QTK_DT_U8]     = {"u8", "U8", "U8", 1, 1, 8, 0, 0, 0, 0},
	[QTK_DT_U16]    = {"u16", "U16", "U16", 1, 2, 16, 0, 0, 0, 0},
	[QTK_DT_U32]    = {"u32", "U32", "U32", 1, 4, 32, 0, 0, 0, 0},
	[QTK_DT_U64]    = {"u64", "U64", "U64", 1, 8, 64, 0, 0, 0, 0},
	[QTK_DT_F8_E4M3] = {"f8_e4m3", "F8_E4M3", "F8_E4M3", 1, 1, 8, 1, 0, 0, 0},
	[QTK_DT_F8_E5M2] = {"f8_e5m2", "F8_E5M2", "F8_E5M2", 1, 1, 8, 1, 0, 0, 0},
	[QTK_DT_F8_E8M0] = {"f8_e8m0", "F8_E8M0", "F8_E8M0", 1, 1, 8, 1, 0, 0, 0},
	[QTK_DT_F6_E2M3] = {"f6_e2m3", "F6_E2M3", "F6_E2M3", 1, 6, 6, 1, 0, 1, 0},
	[QTK_DT_F6_E3M2] = {"f6_e3m2", "F6_E3M2", "F6_E3M2", 1, 6, 6, 1, 0, 1, 0},
	[QTK_DT_F4]     = {"f4", "F4", "F4", 1, 4, 4, 1, 0, 1, 0},
};

const qtk_type_info *qtk_type(unsigned t)
{
	if (t >= QTK_T_MAX || !types[t].name || !types[t].blck)
		return NULL;
	return &types[t];
}

int qtk_type_by_st_name(const char *s)
{
	for (unsigned t = 0; t < QTK_T_MAX; t++)
		if (types[t].st_name && strcmp(types[t].st_name, s) == 0)
			return (int)t;
	return -1;
}

int qtk_type_by_name(const char *s)
{
	for (unsigned t = 0; t < QTK_T_MAX; t++)
		if (types[t].name && qtk_strcasecmp(types[t].name, s) == 0)
			return (int)t;
	return -1;
}

int qtk_type_nbytes(unsigned t, uint64_t n, uint64_t *out)
{
	const qtk_type_info *ti = qtk_type(t);
	if (!ti)
		return QTK_E_DATA;
	if (ti->subbyte) {
		uint64_t bits;
		if (!qtk_mul_u64(n, ti->bytes, &bits) || bits % 8)
			return QTK_E_DATA;
		*out = bits / 8;
		return 0;
	}
	if (n % ti->blck)
		return QTK_E_DATA;
	if (!qtk_mul_u64(n / ti->blck, ti->bytes, out))
		return QTK_E_DATA;
	return 0;
}

/* The packed layout kinds: id (in JSON, plans and digests) and upper-case name. */
static const struct {
	const char *id, *upper;
} packed_kinds[QTK_LAYOUT_KINDS] = {
	[QTK_LAYOUT_AWQ] = {"awq", "AWQ"},
	[QTK_LAYOUT_GPTQ] = {"gptq", "GPTQ"},
	[QTK_LAYOUT_CT_INT] = {"ct-int", "CT-INT"},
	[QTK_LAYOUT_FP8] = {"fp8", "FP8"},
	[QTK_LAYOUT_NVFP4] = {"nvfp4", "NVFP4"},
	[QTK_LAYOUT_MXFP4] = {"mxfp4", "MXFP4"},
	[QTK_LAYOUT_MLX] = {"mlx", "MLX"},
	[QTK_LAYOUT_BNB4] = {"bnb4", "BNB4"},
	[QTK_LAYOUT_BNB8] = {"bnb8", "BNB8"},
};

void qtk_layout_id(const qtk_layout *l, char *buf, size_t n)
{
	if (l->kind == QTK_LAYOUT_GPTQ) {
		snprintf(buf, n, "gptq-v%d", l->gptq_version == 2 ? 2 : 1);
		return;
	}
	if (l->kind != QTK_LAYOUT_PLAIN) {
		unsigned k = (unsigned)l->kind;
		snprintf(buf, n, "%s", k < QTK_LAYOUT_KINDS && packed_kinds[k].id ? packed_kinds[k].id : "unknown");
		return;
	}
	const qtk_type_info *ti = qtk_type(l->type);
	if (!ti) {
		snprintf(buf, n, "ggml:type%u", l->type);
		return;
	}
	if (ti->is_quant) {
		char low[16];
		size_t i = 0;
		for (; ti->name[i] && i < sizeof low - 1; i++)
			low[i] = (char)(ti->name[i] >= 'A' && ti->name[i] <= 'Z' ? ti->name[i] + 32 : ti->name[i]);
		low[i] = 0;
		snprintf(buf, n, "ggml:%s", low);
	} else {
		snprintf(buf, n, "%s", ti->name);
	}
}

const char *qtk_layout_type_name(const qtk_layout *l)
{
	if (l->kind != QTK_LAYOUT_PLAIN) {
		unsigned k = (unsigned)l->kind;
		return k < QTK_LAYOUT_KINDS && packed_kinds[k].upper ? packed_kinds[k].upper : "UNKNOWN";
	}
	const qtk_type_info *ti = qtk_type(l->type);
	return ti ? ti->upper : "UNKNOWN";
}
