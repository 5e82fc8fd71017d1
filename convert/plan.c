/* plan.c - qconvert's plan: what each tensor becomes, and the output's metadata. */
#include "cli.h"
#include "convert.h"
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Target layouts, by llama-quantize's table of names (case does not matter, as there):
 * a name of that table is its mix (Q4_K_M; the aliases Q3_K, Q4_K, Q5_K mean the _M mixes;
 * COPY means keep), and --pure makes it the mix's base type for every matrix
 * (conv_apply_pure). ggml type names the table lacks (mxfp4) are that type for every
 * matrix. The names llama-quantize has and qtk cannot write yet answer CONV_TARGET_READ_ONLY. */
static const char *const read_only_names[] = {
	"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M",
	"TQ1_0", "TQ2_0", "Q2_K_S", "MXFP4_MOE",
};

static const struct { const char *name; target_kind kind; int version; } named_targets[] = {
	{"keep", TGT_KEEP, 0}, {"copy", TGT_KEEP, 0}, {"awq", TGT_AWQ, 0}, {"gptq", TGT_GPTQ, 0},
	{"gptq-v1", TGT_GPTQ, 1}, {"gptq-v2", TGT_GPTQ, 2}, {"auto-exact", TGT_AUTO_EXACT, 0},
	{"mlx", TGT_MLX, 0}, {"ct-int", TGT_CT, 0}, {"ct-fp8", TGT_CT_FP8, 0},
};

static const struct { const char *alias, *mix; } mix_aliases[] = {
	{"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"},
};

/* ggml types written as one type for every matrix when no mix has the name */
static const unsigned single_types[] = {QTK_T_F32, QTK_T_F16, QTK_T_BF16, QTK_T_MXFP4, QTK_T_NVFP4};

int conv_parse_target(const char *s, conv_target *t)
{
	t->ftype = -1;
	t->gptq_version = 0;
	for (size_t i = 0; i < sizeof named_targets / sizeof *named_targets; i++)
		if (!qtk_strcasecmp(s, named_targets[i].name)) {
			t->kind = named_targets[i].kind;
			t->gptq_version = named_targets[i].version;
			return 0;
		}
	char up[32];
	size_t n = strlen(s);
	if (n >= sizeof up)
		return CONV_TARGET_UNKNOWN;
	for (size_t i = 0; i <= n; i++)
		up[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
	for (size_t i = 0; i < sizeof mix_aliases / sizeof *mix_aliases; i++)
		if (!strcmp(up, mix_aliases[i].alias))
			memcpy(up, mix_aliases[i].mix, strlen(mix_aliases[i].mix) + 1);
	if (!qtk_mix_lookup(up, &t->type, &t->ftype)) {
		t->kind = TGT_MIX;
		return 0;
	}
	for (size_t i = 0; i < sizeof single_types / sizeof *single_types; i++) {
		const qtk_type_info *ti = qtk_type(single_types[i]);
		if (!qtk_strcasecmp(s, ti->name)) {
			t->kind = TGT_TYPE;
			t->type = single_types[i];
			t->ftype = qtk_mix_ftype_for_type(single_types[i]);
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof read_only_names / sizeof *read_only_names; i++)
		if (!strcmp(up, read_only_names[i]))
			return CONV_TARGET_READ_ONLY;
	return CONV_TARGET_UNKNOWN;
}

/* --pure: a mix becomes its base type for every matrix (general.file_type stays the mix's). */
int conv_apply_pure(conv_target *t)
{
	if (t->kind == TGT_TYPE)
		return 0;
	if (t->kind != TGT_MIX)
		return -1;
	t->kind = TGT_TYPE;
	return 0;
}

/* Every name --to accepts, for the usage message and "did you mean". */
size_t conv_target_names(const char **names, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < sizeof named_targets / sizeof *named_targets && n < cap; i++)
		names[n++] = named_targets[i].name;
	for (size_t i = 0; i < sizeof single_types / sizeof *single_types && n < cap; i++)
		names[n++] = qtk_type(single_types[i])->name;
	for (size_t i = 0; n < cap; i++) {
		const char *m = qtk_mix_name(i);
		if (!m)
			break;
		names[n++] = m;
	}
	for (size_t i = 0; i < sizeof mix_aliases / sizeof *mix_aliases && n < cap; i++)
		names[n++] = mix_aliases[i].alias;
	return n;
}

static bool is_int_dtype(unsigned type)
{
	switch (type) {
	case QTK_T_I8: case QTK_T_I16: case QTK_T_I32: case QTK_T_I64:
	case QTK_DT_BOOL: case QTK_DT_U8: case QTK_DT_U16: case QTK_DT_U32: case QTK_DT_U64:
		return true;
	default:
		return false;
	}
}

/* Apply --set KEY=VALUE: keeps the key's numeric type when it has one. */
static int apply_set(qtk_model *d, const char *kv, qtk_err *err)
{
	const char *eq = strchr(kv, '=');
	char *key = qtk_strndup(kv, (size_t)(eq - kv));
	if (!key)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	const char *val = eq + 1;
	qtk_kv *cur = (qtk_kv *)qtk_kv_find(d, key);
	int rc = 0;
	if (cur && cur->val.type != QTK_V_STR && cur->val.type != QTK_V_ARR) {
		qtk_value *v = &cur->val;
		char *end = NULL;
		if (v->type == QTK_V_BOOL) {
			if (strcmp(val, "true") && strcmp(val, "false") && strcmp(val, "1") && strcmp(val, "0"))
				rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: expected true or false");
			else
				v->v.u = !strcmp(val, "true") || !strcmp(val, "1");
		} else if (v->type == QTK_V_F32 || v->type == QTK_V_F64) {
			double x = strtod(val, &end);
			if (end == val || *end)
				rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: expected a number, not '%s'", val);
			else
				v->v.f = v->type == QTK_V_F32 ? (double)(float)x : x;
		} else {
			bool neg = val[0] == '-';
			uint64_t u;
			if (!qtk_parse_u64(val + neg, &u) || (neg && u > (uint64_t)INT64_MAX))
				rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: expected an integer, not '%s'", val);
			else if (v->type == QTK_V_U8 || v->type == QTK_V_U16 || v->type == QTK_V_U32 ||
				 v->type == QTK_V_U64) {
				uint64_t max = v->type == QTK_V_U8 ? 0xff : v->type == QTK_V_U16 ? 0xffff
					     : v->type == QTK_V_U32 ? 0xffffffffu : UINT64_MAX;
				if (neg || u > max)
					rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: %s out of range", val);
				else
					v->v.u = u;
			} else {
				v->v.i = neg ? -(int64_t)u : (int64_t)u;
			}
		}
	} else {
		rc = qtk_model_set_kv_str(d, key, val);
		if (rc)
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	qtk_free(key);
	return rc;
}

/* The module file an auto_map entry names ("modeling_x.XModel" -> "modeling_x.py"), or NULL
 * when it names code of another repository ("org/repo--modeling_x.XModel"), or no module. */
static char *auto_map_file(const char *v)
{
	const char *dot = strrchr(v, '.');
	if (!dot || dot == v || strstr(v, "--") || strchr(v, '/'))
		return NULL;
	size_t n = (size_t)(dot - v);
	char *f = qtk_malloc(n + 4);
	if (f) {
		memcpy(f, v, n);
		memcpy(f + n, ".py", 4);
	}
	return f;
}

/* Is every module file config.json's auto_map names carried (a side file of the input that
 * wo allows)? Sets *why to the first that is not (caller frees). */
static bool auto_map_carried(const qtk_model *in, const qtk_write_opts *wo, const cJSON *am, char **why)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, am)
	{
		const cJSON *v = e;
		const cJSON *items = cJSON_IsArray(e) ? e : NULL;
		for (int k = 0; items ? k < cJSON_GetArraySize(items) : k < 1; k++) {
			if (items)
				v = cJSON_GetArrayItem(items, k);
			if (cJSON_IsNull(v))
				continue;
			char *f = cJSON_IsString(v) ? auto_map_file(v->valuestring) : NULL;
			if (!f || !qtk_blob_find(in, f) || !qtk_side_file_allowed(f, wo)) {
				*why = f ? f : qtk_strdup(cJSON_IsString(v) ? v->valuestring : e->string ? e->string : "?");
				return false;
			}
			qtk_free(f);
		}
	}
	return true;
}

/* config.json for the output: its auto_map (code run by trust_remote_code) is kept only when the
 * module files it names are carried too; else dropped, with a warning. */
static int carry_config(const qtk_model *in, const qtk_write_opts *wo, qtk_model *d, const qtk_blob *b, qtk_err *err)
{
	cJSON *cfg = cJSON_ParseWithLength((const char *)b->data, b->len);
	cJSON *am = cJSON_IsObject(cfg) ? cJSON_GetObjectItemCaseSensitive(cfg, "auto_map") : NULL;
	char *why = NULL;
	int rc = 0;
	if (!am || auto_map_carried(in, wo, am, &why)) {
		if (am)
			cli_note("config.json: auto_map kept: the code it names is carried (--carry)");
		rc = qtk_model_add_blob(d, b->name, b->data, b->len);
	} else {
		cli_warn("%s: config.json: auto_map dropped: it names %s, which is not carried (trust_remote_code would run "
			 "it; --carry NAME.py carries a module file)", in->path, why ? why : "code");
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, "auto_map");
		char *txt = cJSON_Print(cfg);
		rc = txt ? qtk_model_add_blob(d, b->name, txt, strlen(txt)) : QTK_E_IO;
		cJSON_free(txt);
	}
	qtk_free(why);
	cJSON_Delete(cfg);
	return rc ? qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory") : 0;
}

/* The side files carried: the known ones and those asked for with --carry (reported); the
 * others (code, pickles, any unknown name) are left out with a warning. */
static int carry_side_files(const qtk_model *in, const conv_opts *o, qtk_model *d, qtk_err *err)
{
	qtk_write_opts wo = {0};
	wo.carry = o->carry;
	wo.ncarry = o->ncarry;
	for (size_t i = 0; i < in->nblobs; i++) {
		const qtk_blob *b = &in->blobs[i];
		bool cfg = !strcmp(b->name, "config.json");
		/* the source's record describes the source: the output gets its own (which names the
		 * source's roots), or none with --set qtk.provenance=none; never the stale file */
		if (!strcmp(b->name, QTK_PROV_FILE))
			continue;
		if (!qtk_side_file_allowed(b->name, &wo)) {
			cli_warn("%s: side file '%s' not carried: %s (--carry %s carries it)", in->path, b->name,
				 qtk_side_file_executable(b->name) ? "code or a pickle, which runs when a model is loaded"
								   : "not a known side file",
				 b->name);
			continue;
		}
		if (!qtk_side_file_known(b->name))
			cli_note("carrying side file '%s' (asked for with --carry)%s", b->name,
				 qtk_side_file_executable(b->name) ? ": code or a pickle, which runs when a model is loaded"
								   : "");
		int rc = cfg ? carry_config(in, &wo, d, b, err) : qtk_model_add_blob(d, b->name, b->data, b->len);
		if (rc)
			return cfg ? rc : qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	return 0;
}

/* The output's metadata: the source's, fitted to the output container. */
int conv_build_meta(qtk_model *in, const conv_opts *o, qtk_model *d, qtk_err *err)
{
	/* every key goes along; safetensors writes typed values as exact text with
	 * their types listed (qtk.metadata_types), so a GGUF made from it gets them back */
	bool strings_only = false;
	size_t dropped = 0;
	for (size_t i = 0; i < in->nkv; i++) {
		const qtk_kv *kv = &in->kv[i];
		if (!strncmp(kv->key, "split.", 6))
			continue;
		if (strings_only && kv->val.type != QTK_V_STR) {
			dropped++;
			continue;
		}
		qtk_kv *n = qtk_model_add_kv(d, kv->key);
		if (!n || qtk_value_copy(&n->val, &kv->val))
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	if (dropped)
		cli_verbose("%s: %zu typed metadata values (numbers, arrays) have no place in %s and are left out", in->path,
			    dropped, o->output);
	if ((o->out_kind == QTK_OUT_HF || o->out_kind == QTK_OUT_ARCHIVE || o->out_kind == QTK_OUT_QPK) &&
	    carry_side_files(in, o, d, err))
		return err->code;
	if (o->target.kind == TGT_MLX && qtk_model_set_kv_str(d, "format", "mlx")) /* as mlx-lm's files say */
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	if (o->out_kind == QTK_OUT_GGUF && o->target.kind != TGT_KEEP && o->target.ftype >= 0) {
		/* llama_ftype (llama.h), as llama-quantize writes it */
		uint64_t ft = (uint64_t)o->target.ftype;
		qtk_kv *kv = (qtk_kv *)qtk_kv_find(d, "general.file_type");
		if (!kv && (kv = qtk_model_add_kv(d, "general.file_type")) == NULL)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		qtk_value_free(&kv->val);
		kv->val.type = QTK_V_U32;
		kv->val.v.u = ft;
		if (!qtk_type(o->target.type)->is_float) {
			kv = (qtk_kv *)qtk_kv_find(d, "general.quantization_version");
			if (!kv && (kv = qtk_model_add_kv(d, "general.quantization_version")) == NULL)
				return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			qtk_value_free(&kv->val);
			kv->val.type = QTK_V_U32;
			kv->val.v.u = 2; /* GGML_QNT_VERSION */
		}
	}
	for (int i = 0; i < o->nsets; i++) {
		int rc = apply_set(d, o->sets[i], err);
		if (rc)
			return rc;
	}
	/* a GGUF qtk would refuse to read is never written: a --set key that breaks the reader's
	 * rules is a usage error (the writer checks the same again for everything else) */
	if (o->nsets && o->out_kind == QTK_OUT_GGUF && qtk_gguf_check_meta(d, o->output, err)) {
		for (int i = 0; i < o->nsets; i++) {
			size_t kl = (size_t)(strchr(o->sets[i], '=') - o->sets[i]);
			if (strlen(err->subject) == kl && !strncmp(err->subject, o->sets[i], kl)) {
				err->code = QTK_E_USAGE;
				char msg[sizeof err->msg + 8];
				snprintf(msg, sizeof msg, "--set: %s", err->msg);
				snprintf(err->msg, sizeof err->msg, "%.*s", (int)sizeof err->msg - 1, msg);
				break;
			}
		}
		return err->code;
	}
	return 0;
}


/* ---- output descriptions -------------------------------------------------- */

static int out_plain(qtk_tensor *o, const qtk_tensor *t, unsigned type)
{
	const qtk_type_info *ti = qtk_type(type);
	qtk_tensor_clear(o);
	o->name = t->name;
	o->ndim = t->ndim;
	memcpy(o->shape, t->shape, sizeof o->shape);
	o->layout.kind = QTK_LAYOUT_PLAIN;
	o->layout.type = type;
	o->layout.bits = ti->code_bits;
	o->layout.group_size = ti->group;
	o->nparts = 1;
	qtk_part *q = &o->parts[0];
	q->type = type;
	q->ndim = t->ndim;
	memcpy(q->shape, t->shape, sizeof q->shape);
	if (qtk_type_nbytes(type, t->n_params, &q->nbytes))
		return -1;
	qtk_tensor_finish(o);
	return 0;
}

/* The packed scheme's parts for t's shape (scheme/scheme.h). */
static int out_packed(qtk_tensor *o, const qtk_tensor *t, const qtk_layout *l, qtk_err *err)
{
	char why[300];
	qtk_tensor_clear(o);
	o->name = t->name;
	if (qtk_scheme_describe(o, l, t->shape[0], t->shape[1], true, why, sizeof why))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%s", why);
	return 0;
}

static int out_awq(qtk_tensor *o, const qtk_tensor *t, uint32_t group, qtk_err *err)
{
	qtk_layout l = {.kind = QTK_LAYOUT_AWQ, .bits = 4, .group_size = group};
	return out_packed(o, t, &l, err);
}

/* compressed-tensors pack-quantized, per group (F16 scales) */
static int out_ct(qtk_tensor *o, const qtk_tensor *t, uint32_t group, unsigned bits, bool sym, bool act_order,
		  qtk_err *err)
{
	qtk_layout l = {.kind = QTK_LAYOUT_CT_INT, .type = QTK_T_I32, .bits = (uint8_t)bits, .group_size = group,
			.sym = sym, .act_order = act_order, .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_T_F16};
	return out_packed(o, t, &l, err);
}

static int fail_dims(qtk_err *err, const qtk_tensor *t, const char *what, uint64_t v, uint64_t m, const char *why);

/* compressed-tensors float-quantized FP8 (llm-compressor's FP8_DYNAMIC per channel, FP8_BLOCK
 * in 128 x 128 blocks): scales in the source's float type (the model dtype llm-compressor
 * computes in), F16 for quantized sources. The same FP8 layout is copied. */
static int plan_fp8(const conv_opts *o, const qtk_tensor *t, plan *p, qtk_err *err)
{
	const qtk_layout *sl = &t->layout;
	uint64_t in = t->shape[1];
	if (o->fp8_block && in % 128)
		return fail_dims(err, t, "input features", in, 128, "FP8 blocks are 128 x 128");
	unsigned st = sl->kind == QTK_LAYOUT_PLAIN && (sl->type == QTK_T_BF16 || sl->type == QTK_T_F32) ? sl->type : QTK_T_F16;
	if (sl->kind == QTK_LAYOUT_FP8)
		st = sl->scale_type;
	qtk_layout l = {.kind = QTK_LAYOUT_FP8, .type = QTK_DT_F8_E4M3, .bits = 8, .sym = true,
			.strategy = o->fp8_block ? QTK_SCHEME_PER_BLOCK : QTK_SCHEME_PER_GROUP,
			.group_size = o->fp8_block ? 128 : (uint32_t)in, .scale_type = (uint16_t)st};
	if (in > UINT32_MAX)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "input features %llu: more than a layout holds",
				   (unsigned long long)in);
	if (sl->kind == QTK_LAYOUT_FP8 && sl->strategy == l.strategy && sl->group_size == l.group_size &&
	    !p->perm_heads)
		return 0; /* copied */
	if (out_packed(p->out, t, &l, err))
		return err->code;
	p->method = M_GROUPS;
	p->note = "requantize";
	return 0;
}

static int out_gptq(qtk_tensor *o, const qtk_tensor *t, uint32_t group, unsigned bits, int version, bool sym,
		    bool act_order, qtk_err *err)
{
	qtk_layout l = {.kind = QTK_LAYOUT_GPTQ, .bits = (uint8_t)bits, .group_size = group,
			.gptq_version = (uint8_t)version, .sym = sym, .act_order = act_order};
	return out_packed(o, t, &l, err);
}

/* ---- what the source holds as integer groups ----------------------------- */

typedef struct src_groups {
	bool ok;           /* the source is group-quantized integers */
	unsigned bits;
	uint32_t group, ngroups;
	bool sym, act_order;
	bool zero0;        /* some zero is 0: GPTQ v1 cannot store it */
	bool zero_top;     /* some zero is 2^bits (a wrapped v1 zero): only v1 stores it */
} src_groups;

/* Scan a packed zero tensor (LSB-first fields of `bits`) for 0 and for the top value. */
static void scan_zeros(const uint8_t *z, uint64_t nfields, unsigned bits, int add, src_groups *sg)
{
	for (uint64_t f = 0; f < nfields; f++) {
		uint64_t pos = f * bits;
		uint64_t v = 0;
		if (8 % bits == 0) /* 1, 2, 4 or 8 bits: a field never straddles a byte */
			v = (uint64_t)(z[pos / 8] >> (pos % 8)) & ((1u << bits) - 1u);
		else
			for (unsigned b = 0; b < bits; b++)
				v |= (uint64_t)((z[(pos + b) / 8] >> ((pos + b) % 8)) & 1) << b;
		int zz = (int)v + add;
		if (zz == 0)
			sg->zero0 = true;
		if (zz == 1 << bits)
			sg->zero_top = true;
	}
}

static int probe_groups(qtk_model *in, const qtk_tensor *t, src_groups *sg)
{
	memset(sg, 0, sizeof *sg);
	const qtk_layout *l = &t->layout;
	if (l->kind == QTK_LAYOUT_AWQ || l->kind == QTK_LAYOUT_GPTQ) {
		sg->ok = true;
		sg->bits = l->bits;
		sg->group = l->group_size;
		sg->ngroups = (uint32_t)t->parts[2].shape[0];
		sg->sym = l->sym;
		sg->act_order = l->act_order;
		uint8_t *z;
		if (qtk_read_part_alloc(in, t, 1, &z))
			return -1;
		uint64_t fields = t->parts[1].nbytes * 8 / l->bits;
		scan_zeros(z, fields, l->bits, l->kind == QTK_LAYOUT_GPTQ && l->gptq_version == 1 ? 1 : 0, sg);
		qtk_free(z);
		if (l->kind == QTK_LAYOUT_AWQ) { /* AWQ's nibble order does not matter for a scan */
			sg->group = l->group_size;
		}
		return 0;
	}
	const qtk_scheme *s = qtk_scheme_of(t);
	if (s && s->to_groups && t->ndim == 2) { /* other integer schemes (compressed-tensors): their groups */
		uint8_t *pp[QTK_MAX_PARTS] = {NULL};
		qgroups g;
		int rc = 0, ok = -1;
		for (int k = 0; k < t->nparts && !rc; k++)
			rc = qtk_read_part_alloc(in, t, k, &pp[k]);
		if (!rc && !(ok = qtk_scheme_to_groups(t, (const void *const *)pp, &g))) {
			sg->ok = true;
			sg->bits = g.bits;
			sg->group = g.group;
			sg->ngroups = g.ngroups;
			sg->sym = l->sym;
			sg->act_order = qg_act_order(&g);
			for (uint64_t i = 0; i < (uint64_t)g.out * g.ngroups; i++) {
				sg->zero0 |= g.z[i] == 0;
				sg->zero_top |= g.z[i] == 1 << g.bits;
			}
			qg_free(&g);
		}
		for (int k = 0; k < QTK_MAX_PARTS; k++)
			qtk_free(pp[k]);
		return rc ? -1 : 0; /* not representable (BF16 scales): no integer groups, a re-fit */
	}
	if (l->kind == QTK_LAYOUT_PLAIN && t->ndim == 2 && (l->type == QTK_T_Q4_0 || l->type == QTK_T_Q8_0)) {
		sg->ok = true;
		sg->bits = l->type == QTK_T_Q4_0 ? 4 : 8;
		sg->group = 32;
		sg->ngroups = (uint32_t)(t->shape[1] / 32);
		sg->sym = true;
	}
	return 0;
}

/* Linear layers inside the transformer blocks: what AWQ/GPTQ quantize. */
static bool is_block_linear(const qtk_tensor *t)
{
	/* MoE routers and the shared expert's one-output gate stay float, as AutoAWQ and AutoGPTQ
	 * leave them */
	return t->ndim == 2 && qtk_mix_quantizable(t) && (strstr(t->name, "blk.") || strstr(t->name, "layers.")) &&
	       !strstr(t->name, "shared_expert_gate.") && !strstr(t->name, "ffn_gate_inp");
}

/* A shape rule that failed, named: what (value v) is not a multiple of m, and why it must be. */
static int fail_dims(qtk_err *err, const qtk_tensor *t, const char *what, uint64_t v, uint64_t m, const char *why)
{
	return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%s %llu is not a multiple of %llu (%s)", what,
			   (unsigned long long)v, (unsigned long long)m, why);
}

/* AWQ/GPTQ targets. */
static int plan_groups(qtk_model *in, const conv_opts *o, const qtk_tensor *t, plan *p, qtk_err *err)
{
	src_groups sg;
	if (probe_groups(in, t, &sg)) {
		*err = in->err;
		return err->code;
	}
	bool awq = o->target.kind == TGT_AWQ, ct = o->target.kind == TGT_CT;
	unsigned bits = awq ? 4 : o->bits ? o->bits : sg.ok ? sg.bits : 4;
	if (ct && bits != 2 && bits != 4 && bits != 8)
		return qtk_err_set(err, QTK_E_USAGE, NULL, -1, t->name, "ct-int packs 2, 4 or 8 bits, not %u", bits);
	uint32_t group = o->group_size;
	if (!group)
		group = sg.ok && (!sg.act_order || !awq) ? sg.group
		      : t->layout.kind == QTK_LAYOUT_PLAIN && qtk_type(t->layout.type) && qtk_type(t->layout.type)->is_quant ? 32
											: 128;
	uint64_t out = t->shape[0], inf = t->shape[1];
	if (inf % group)
		return fail_dims(err, t, "input features", inf, group, "the group size");
	if (awq && out % 8)
		return fail_dims(err, t, "output features", out, 8, "AWQ packs 8 output features in a 32-bit word");
	if (!awq && inf % 32)
		return fail_dims(err, t, "input features", inf, 32, "the weights pack input features in 32-bit words");
	if (!awq && (out * bits) % 32) {
		char why[96];
		snprintf(why, sizeof why, "output features x %u bits: the zero points pack in 32-bit words", bits);
		return fail_dims(err, t, "output features x bits", out * bits, 32, why);
	}
	bool transcode = sg.ok && sg.bits == bits && (sg.group == group || sg.act_order) && !(awq && sg.act_order) &&
			 (!o->sym || sg.sym);
	p->method = M_GROUPS;
	if (awq) {
		if (out_awq(p->out, t, group, err))
			return err->code;
		p->note = transcode ? "repack" : "requantize";
		return 0;
	}
	if (ct) {
		bool act = transcode && sg.act_order;
		if (out_ct(p->out, t, act ? sg.group : group, bits, transcode ? sg.sym : o->sym, act, err))
			return err->code;
		p->note = !transcode ? "requantize" : sg.zero_top ? "repack (zero out of range: inexact)" : "repack";
		return 0;
	}
	int version = o->target.gptq_version; /* resolved for the whole model by conv_plan */
	bool act = transcode && sg.act_order;
	if (out_gptq(p->out, t, act ? sg.group : group, bits, version, transcode ? sg.sym : o->sym, act, err))
		return err->code;
	p->note = !transcode ? "requantize" : (version == 1 && sg.zero0) || (version == 2 && sg.zero_top) ? "repack (zero out of range: inexact)" : "repack";
	return 0;
}

/* Is this float tensor exactly representable in F16? (reads it) */
/* Do t's values survive F32 -> `to` (F16 or BF16) unchanged? */
static int fits_half(qtk_model *in, const qtk_tensor *t, unsigned to, bool *fits)
{
	*fits = false;
	if (!qtk_can_decode(t) || t->n_params > ((uint64_t)1 << 28))
		return 0;
	float *x = qtk_malloc((size_t)t->n_params * sizeof *x);
	if (!x)
		return QTK_E_IO;
	int rc = qtk_decode_tensor(in, t, x);
	if (!rc) {
		*fits = true;
		for (uint64_t i = 0; i < t->n_params && *fits; i++) {
			float b = to == QTK_T_BF16 ? qtk_bf16_to_f32(qtk_f32_to_bf16(x[i]))
						   : qtk_fp16_to_f32(qtk_f32_to_fp16(x[i]));
			*fits = memcmp(&b, &x[i], 4) == 0;
		}
	}
	qtk_free(x);
	return rc;
}

/* Can the output container store source tensor t as it is? The container's own
 * capability (the writer asks the same); only GGUF output is checked this early, the
 * other containers refuse when they are written. err NULL: a question only. */
static int can_store(const conv_opts *o, const qtk_model *in, const qtk_tensor *t, qtk_err *err)
{
	if (o->out_kind != QTK_OUT_GGUF)
		return 0;
	return qtk_out_can_store(o->out_kind, t, false, in->path, qtk_tensor_stored_name(t), err);
}

/* An MLX matrix: the smallest ggml type its transcodes hold exactly (the conditions are per
 * block: the biases decide), or 0. */
static unsigned mlx_exact_type(qtk_model *in, const qtk_tensor *t)
{
	static const unsigned cand[] = {QTK_T_Q4_1, QTK_T_Q8_0};
	uint8_t *pp[QTK_MAX_PARTS] = {NULL};
	qgroups g;
	memset(&g, 0, sizeof g);
	unsigned found = 0;
	bool ok = t->ndim == 2 && t->shape[1] % 32 == 0 && t->layout.group_size % 32 == 0;
	for (int k = 0; k < t->nparts && ok; k++)
		ok = !qtk_read_part_alloc(in, t, k, &pp[k]);
	ok = ok && !qtk_scheme_to_groups(t, (const void *const *)pp, &g);
	for (size_t c = 0; ok && !found && c < sizeof cand / sizeof *cand; c++) {
		if (qtk_scheme_exact_ggml(t->layout.kind, t->layout.bits, false, t->layout.group_size, t->shape[1]) == 0)
			break;
		uint64_t nb = 0;
		if (qtk_type_nbytes(cand[c], t->shape[0] * t->shape[1], &nb))
			continue;
		uint8_t *dst = qtk_malloc((size_t)nb);
		if (dst && !qg_to_ggml(&g, cand[c], 0, g.out, dst))
			found = cand[c];
		qtk_free(dst);
	}
	qg_free(&g);
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(pp[k]);
	return found;
}

/* A packed source whose blocks a ggml type holds as they are (gpt-oss MXFP4 -> MXFP4): that
 * type, or 0. */
static unsigned shuffle_type(const qtk_tensor *t)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	const qtk_layout *l = &t->layout;
	return s && s->to_ggml_rows ? qtk_scheme_exact_ggml(l->kind, l->bits, l->sym, l->group_size, qtk_tensor_cols(t)) : 0;
}

/* NVFP4 layers into a GGUF (docs/exactness.md): llama.cpp's converter keeps the blocks (a byte
 * shuffle, to_ggml_rows) and puts the per-tensor multiplier beside them as `<name>.scale`, F32 [1].
 * For ModelOpt (scale_type 1) blocks x scale is the checkpoint's value bit for bit, so auto-exact
 * takes it; compressed-tensors' division by its global scale is not (blocks x fl(1/gs)), so only an
 * explicit --to nvfp4 takes it there (its error is measured and reported). A scale of exactly 1
 * needs no tensor; any other needs the run to be able to add one (a name mapping's view, a
 * `.weight` name whose `.scale` name is free). */
int conv_nvfp4_scaled(qtk_model *in, const conv_opts *o, const qtk_tensor *t, float *scale, qtk_err *err)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	*scale = 1.0f;
	if (o->out_kind != QTK_OUT_GGUF || t->layout.kind != QTK_LAYOUT_NVFP4 || t->ndim != 2 || t->shape[1] % 64 ||
	    t->nparts != 3 || !s || !s->to_ggml_rows || t->parts[2].nbytes != 4)
		return 0;
	bool chosen = o->target.kind == TGT_TYPE && o->target.type == QTK_T_NVFP4;
	if (!chosen && !(o->target.kind == TGT_AUTO_EXACT && t->layout.scale_type == 1))
		return 0;
	uint8_t *p2 = NULL;
	if (qtk_read_part_alloc(in, t, 2, &p2)) {
		*err = in->err;
		return err->code ? err->code : QTK_E_IO;
	}
	const void *pp[3] = {NULL, NULL, p2};
	int r = qtk_nvfp4_ggml_scale(t, pp, scale);
	qtk_free(p2);
	if (r || !isfinite(*scale))
		return 0; /* decoded as any layer (the values say what a non-finite scale makes) */
	if (*scale == 1.0f)
		return 1;
	if (!o->nv_scale_ok || !qtk_str_ends(t->name, ".weight") || strlen(t->name) > QTK_CAP_NAME)
		return 0;
	char sn[QTK_CAP_NAME + 8];
	snprintf(sn, sizeof sn, "%.*s.scale", (int)(strlen(t->name) - 7), t->name);
	for (size_t i = 0; i < in->ntensors; i++)
		if (!strcmp(in->tensors[i].name, sn))
			return 0; /* the name is taken: no second tensor under it */
	return 1;
}

/* ---- MLX targets ----------------------------------------------------------------------- */

/* What mlx-lm's quantize_model quantizes: every linear and embedding matrix (norms, routers and
 * other vectors stay float) whose inputs are whole groups. */
static bool is_mlx_module(const qtk_tensor *t, uint32_t group)
{
	return t->ndim == 2 && qtk_mix_quantizable(t) && qtk_str_ends(t->name, ".weight") && group &&
	       t->shape[1] % group == 0;
}

/* The bits and group of a source that has integer groups an MLX tensor may keep: ggml's q4_0,
 * q4_1 and q8_0 (groups of 32), MLX itself, AWQ/GPTQ without act-order. */
static bool mlx_src_groups(const qtk_tensor *t, unsigned *bits, uint32_t *group)
{
	const qtk_layout *l = &t->layout;
	if (t->ndim != 2)
		return false;
	if (l->kind == QTK_LAYOUT_PLAIN && (l->type == QTK_T_Q4_0 || l->type == QTK_T_Q4_1 || l->type == QTK_T_Q8_0)) {
		*bits = l->type == QTK_T_Q8_0 ? 8 : 4;
		*group = 32;
		return true;
	}
	if ((l->kind == QTK_LAYOUT_MLX || l->kind == QTK_LAYOUT_AWQ || l->kind == QTK_LAYOUT_GPTQ) && !l->act_order &&
	    (l->group_size == 32 || l->group_size == 64 || l->group_size == 128)) {
		*bits = l->bits;
		*group = l->group_size;
		return true;
	}
	return false;
}

/* One config describes an MLX model: --bits and --group-size, else the bits and group most of
 * the source's integer matrices have (so their codes can be kept), else mlx-lm's 4 and 64. */
static int resolve_mlx(const qtk_model *in, conv_opts *o, qtk_err *err)
{
	size_t nb[9] = {0}, ng[3] = {0};
	for (size_t i = 0; i < in->ntensors; i++) {
		unsigned b;
		uint32_t g;
		const qtk_tensor *t = &in->tensors[i];
		if (!is_mlx_module(t, 32) || !mlx_src_groups(t, &b, &g) || b > 8)
			continue;
		nb[b]++;
		ng[g == 32 ? 0 : g == 64 ? 1 : 2]++;
	}
	if (!o->bits) {
		o->bits = 4;
		for (unsigned b = 2; b <= 8; b++)
			if (nb[b] > nb[o->bits])
				o->bits = b;
	}
	if (!o->group_size) {
		o->group_size = ng[0] + ng[1] + ng[2] ? 32 : 64;
		if (ng[1] > ng[0] && ng[1] >= ng[2])
			o->group_size = 64;
		else if (ng[2] > ng[0] && ng[2] > ng[1])
			o->group_size = 128;
	}
	if (o->bits == 7 || o->bits < 2 || o->bits > 8)
		return qtk_err_set(err, QTK_E_USAGE, NULL, -1, NULL, "mlx takes 2, 3, 4, 5, 6 or 8 bits, not %u", o->bits);
	return 0;
}

static int plan_mlx(const conv_opts *o, const qtk_tensor *t, plan *p, qtk_err *err)
{
	const qtk_layout *l = &t->layout;
	unsigned sb = 0;
	uint32_t sg = 0;
	bool groups = mlx_src_groups(t, &sb, &sg);
	if (l->kind == QTK_LAYOUT_MLX && l->bits == o->bits && l->group_size == o->group_size)
		return 0; /* copied */
	qtk_layout ml = {.kind = QTK_LAYOUT_MLX, .type = QTK_DT_U32, .bits = (uint8_t)o->bits, .group_size = o->group_size};
	if (out_packed(p->out, t, &ml, err))
		return err->code;
	/* scales and biases in the model's float type, as mlx-lm keeps them; fp16 for quantized sources */
	unsigned st = l->kind == QTK_LAYOUT_PLAIN && qtk_type(l->type)->is_float ? l->type : QTK_T_F16;
	if (l->kind == QTK_LAYOUT_MLX)
		st = t->parts[1].type;
	for (int k = 1; k < 3; k++) {
		p->out->parts[k].type = st;
		p->out->parts[k].nbytes = p->out->shape[0] * (p->out->shape[1] / o->group_size) * (st == QTK_T_F32 ? 4 : 2);
	}
	qtk_tensor_finish(p->out);
	p->method = M_GROUPS;
	p->note = groups && sb <= o->bits && (sg % o->group_size == 0 || o->group_size % sg == 0) ? "repack" : "requantize";
	return 0;
}

/* auto-exact: per tensor the smallest layout of the output container that holds the values exactly. */
static int plan_auto_exact(qtk_model *in, const conv_opts *o, const qtk_tensor *t, plan *p, qtk_err *err)
{
	bool to_gguf = o->out_kind == QTK_OUT_GGUF;
	p->note = "exact";
	if (to_gguf && t->ndim <= 1 && t->layout.kind == QTK_LAYOUT_PLAIN && qtk_type(t->layout.type)->is_float &&
	    t->layout.type != QTK_T_F32) {
		p->method = M_ROWS; /* norms and biases are F32 in GGUF: a widening, always exact */
		return out_plain(p->out, t, QTK_T_F32) ? QTK_E_DATA : 0;
	}
	const qtk_scheme *ts = qtk_scheme_of(t);
	bool writable = !ts || ts->config_write; /* layouts qtk writes a quantization config for */
	if (writable && ts && o->out_kind == QTK_OUT_QPK) /* and the container holds (QPK: no FP8) */
		writable = qtk_out_can_store(o->out_kind, t, false, in->path, qtk_tensor_stored_name(t), NULL) == 0;
	if (to_gguf ? !can_store(o, in, t, NULL)
		    : writable && (t->layout.kind != QTK_LAYOUT_PLAIN || !qtk_type(t->layout.type)->is_quant)) {
		p->method = M_COPY; /* the source layout itself is the smallest exact one */
		if (qtk_tensor_copy(p->out, t))
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "parts do not fit the output's room");
		return 0;
	}
	unsigned mty = to_gguf && t->layout.kind == QTK_LAYOUT_MLX ? mlx_exact_type(in, t) : 0;
	if (to_gguf && !mty)
		mty = shuffle_type(t);
	if (mty) {
		p->method = M_ROWS;
		return out_plain(p->out, t, mty) ? QTK_E_DATA : 0;
	}
	src_groups sg;
	if (probe_groups(in, t, &sg)) {
		*err = in->err;
		return err->code;
	}
	if (sg.ok && !sg.act_order) {
		if (to_gguf) {
			/* q4_0 holds q - z in [-8, 7]: symmetric 4-bit and any 2- or 3-bit; q5_0 any 4-bit;
			 * q8_0 symmetric 8-bit */
			unsigned ty = sg.bits < 4 || (sg.bits == 4 && sg.sym) ? QTK_T_Q4_0
				    : sg.bits == 4 ? QTK_T_Q5_0 : sg.bits == 8 && sg.sym ? QTK_T_Q8_0 : 0;
			if (ty && sg.group % 32 == 0 && t->shape[1] % 32 == 0) {
				p->method = M_ROWS;
				return out_plain(p->out, t, ty) ? QTK_E_DATA : 0;
			}
		} else if (t->shape[1] % 32 == 0) {
			p->method = M_GROUPS;
			if (sg.bits == 4 && t->shape[0] % 8 == 0)
				return out_awq(p->out, t, sg.group, err);
			return out_gptq(p->out, t, sg.group, sg.bits, 2, sg.sym, false, err);
		}
	}
	bool f16 = false;
	int rc = fits_half(in, t, QTK_T_F16, &f16);
	if (rc)
		return qtk_err_set(err, rc, in->path, -1, t->name, "cannot read the tensor");
	p->method = M_ROWS;
	return out_plain(p->out, t, f16 ? QTK_T_F16 : QTK_T_F32) ? QTK_E_DATA : 0;
}

/* Keep the layout, except the float type changes a HF <-> GGUF mapping
 * makes (norms F32 in GGUF; back to the model dtype in HF when exact). */
static int plan_keep(qtk_model *in, const conv_opts *o, const qtk_hfmap *map, const qtk_tensor *t, plan *p, qtk_err *err)
{
	unsigned mapped = p->map_otype;
	bool plain = t->layout.kind == QTK_LAYOUT_PLAIN;
	if (!plain && o->out_kind == QTK_OUT_GGUF) {
		char lid[48];
		qtk_layout_id(&t->layout, lid, sizeof lid);
		return qtk_err_set(err, QTK_E_USAGE, o->output, -1, qtk_tensor_stored_name(t),
				   "GGUF has no layout for %s layers: choose one with --to (auto-exact: ggml types that "
				   "hold the values exactly where they exist; Q4_K_M, q8_0, f16 ...), or keep them in a "
				   "directory or .qpk",
				   lid);
	}
	int rc = can_store(o, in, t, err);
	if (rc)
		return rc;
	if (!plain && p->perm_heads) {
		/* Q/K rows moved between GGUF's and Hugging Face's order: rows of every part where the
		 * parts are rows of output features; AWQ and GPTQ pack output features across a word
		 * (fp16 scales: their integer groups always hold them), so their groups are moved with
		 * the rows and packed again (run_groups: exact, checked) */
		if (conv_rows_movable(t))
			return 0; /* rows of every part moved as they are (copy_parts) */
		const qtk_scheme *sc = qtk_scheme_of(t);
		if (t->ndim == 2 && (t->layout.kind == QTK_LAYOUT_AWQ || t->layout.kind == QTK_LAYOUT_GPTQ) && sc &&
		    sc->to_groups && sc->from_groups) {
			p->method = M_GROUPS;
			p->note = "exact";
			return 0;
		}
		char lid[48];
		qtk_layout_id(&t->layout, lid, sizeof lid);
		return qtk_err_set(err, QTK_E_USAGE, o->output, -1, qtk_tensor_stored_name(t),
				   "the Q/K rows of %s layers cannot be moved to %s order as they are: keep the names "
				   "(--names keep) or choose a layout with --to",
				   lid, p->perm_inverse ? "Hugging Face's" : "GGUF's");
	}
	if (!map || !plain || !qtk_type(t->layout.type)->is_float)
		return 0;
	unsigned ty = mapped;
	if (ty == t->layout.type || ty >= QTK_T_MAX)
		return 0;
	if (!qtk_type(ty)->is_float || qtk_type(ty)->bytes < qtk_type(t->layout.type)->bytes) {
		bool fits = false;
		if (ty != QTK_T_F16 && ty != QTK_T_BF16)
			return 0;
		rc = fits_half(in, t, ty, &fits); /* narrowing only when nothing is lost */
		if (rc)
			return qtk_err_set(err, rc, in->path, -1, t->name, "cannot read the tensor");
		if (!fits)
			return 0;
	}
	p->method = M_ROWS;
	return out_plain(p->out, t, ty) ? QTK_E_DATA : 0;
}

/* The importance of t's columns: one vector for a matrix; for a stack of matrices (the experts
 * of a 3-D tensor, [n_expert, out, in]) one vector per matrix, as llama.cpp's imatrix holds them
 * (n_expert * in values) and llama-quantize applies them. No entry, or one of another size: none. */
static void plan_imatrix(const qtk_imatrix *im, const qtk_tensor *t, plan *p)
{
	uint64_t cols = qtk_tensor_cols(t), rows = qtk_tensor_rows(t), nval = 0;
	if (t->ndim < 3) {
		p->imatrix = qtk_imatrix_get(im, p->out_name, cols);
		return;
	}
	uint64_t per = t->shape[t->ndim - 2], nmat = per ? rows / per : 0, want;
	const float *w = qtk_imatrix_find(im, p->out_name, &nval);
	if (w && nmat && qtk_mul_u64(nmat, cols, &want) && nval == want) {
		p->imatrix = w;
		p->imatrix_rows = per;
	}
}

/* A packed output layout l that the executor fills by a byte shuffle of the source's blocks
 * (run_groups: exact by construction, and checked by decoding). */
static int plan_shuffle(const qtk_tensor *t, plan *p, const qtk_layout *l, qtk_err *err)
{
	if (out_packed(p->out, t, l, err))
		return err->code;
	p->method = M_GROUPS;
	p->note = "exact";
	return 0;
}

/* ggml NVFP4 blocks (with their .scale, or without: times 1) into a directory keep ModelOpt's
 * NVFP4 layout for linear layers (weight, weight_scale, weight_scale_2 = the .scale): a byte
 * shuffle, exact whenever every block scale byte has an E4M3 form (qtk_nvfp4_from_ggml; checked
 * here, as the layout must be known before anything is written). 0: planned; 1: the values stay
 * F32 (or auto-exact's choice). */
static int plan_modelopt(qtk_model *in, const qtk_tensor *t, plan *p, qtk_err *err)
{
	if (t->ndim != 2 || t->shape[1] % 64 || strstr(t->name, "embed"))
		return 1; /* ModelOpt quantizes Linear modules: an NVFP4 embedding table stays F32 */
	/* the blocks checked 8 MiB of rows at a time (a tensor of any size) */
	const uint64_t rows = t->shape[0], rb = rows ? t->parts[0].nbytes / rows : 0;
	if (!rb || rb * rows != t->parts[0].nbytes)
		return 1;
	const uint64_t step = ((uint64_t)8 << 20) / rb ? ((uint64_t)8 << 20) / rb : 1;
	uint8_t *blk = qtk_malloc((size_t)((step < rows ? step : rows) * rb));
	if (!blk)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	bool fits = true;
	for (uint64_t r0 = 0; r0 < rows && fits; r0 += step) {
		const uint64_t n = rows - r0 < step ? rows - r0 : step;
		if (qtk_read_part(in, t, 0, r0 * rb, blk, (size_t)(n * rb))) {
			qtk_free(blk);
			*err = in->err;
			return err->code;
		}
		fits = qtk_nvfp4_from_ggml(blk, n, t->shape[1], NULL, NULL) == 0;
	}
	qtk_free(blk);
	if (!fits)
		return 1;
	qtk_layout l = {.kind = QTK_LAYOUT_NVFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 16,
			.scale_type = 1};
	return plan_shuffle(t, p, &l, err);
}

/* ggml MXFP4 blocks into a directory keep compressed-tensors' mxfp4-pack-quantized layout for
 * linear layers (weight_packed, weight_scale): a byte shuffle that every block survives
 * (qtk_mxfp4_from_ggml). Embedding tables and lm_head are no Linear module llm-compressor
 * quantizes (vLLM would not load them packed): they stay F32. 0: planned; 1: F32. */
static int plan_ct_mxfp4(const qtk_tensor *t, plan *p, qtk_err *err)
{
	const char *nm = p->out_name ? p->out_name : t->name;
	if (t->ndim != 2 || t->shape[1] % 32 || strstr(nm, "embed") || strstr(nm, "lm_head") || !strcmp(nm, "output.weight"))
		return 1;
	qtk_layout l = {.kind = QTK_LAYOUT_MXFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 32,
			.strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_MXFP4_CT};
	return plan_shuffle(t, p, &l, err);
}

/* ggml MXFP4 blocks of a tensor named as gpt-oss names its experts (no `.weight`: a GGUF made
 * from gpt-oss with --names keep) go into a directory as gpt-oss's <prefix>_blocks and
 * <prefix>_scales again, [E, out, in/32, 16] and [E, out, in/32] for a stack (run_mxfp4_gptoss):
 * the same byte shuffle. 0: planned; 1: not such a tensor. */
static int plan_gptoss_mxfp4(const qtk_tensor *t, plan *p, qtk_err *err)
{
	const char *nm = p->out_name ? p->out_name : t->name;
	size_t n = strlen(nm);
	if ((t->ndim != 2 && t->ndim != 3) || t->shape[t->ndim - 1] % 32 || (n > 7 && !strcmp(nm + n - 7, ".weight")) ||
	    p->perm_heads)
		return 1;
	uint64_t out = t->shape[t->ndim - 2], in = t->shape[t->ndim - 1], e = t->ndim == 3 ? t->shape[0] : 1;
	qtk_layout l = {.kind = QTK_LAYOUT_MXFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 32,
			.strategy = QTK_SCHEME_PER_GROUP};
	char why[300];
	qtk_tensor_clear(p->out);
	p->out->name = t->name;
	if (qtk_scheme_describe(p->out, &l, out, in, true, why, sizeof why))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "%s", why);
	if (t->ndim == 3) { /* every part gets the leading expert dimension */
		p->out->ndim = 3;
		p->out->shape[0] = e, p->out->shape[1] = out, p->out->shape[2] = in;
		for (int k = 0; k < p->out->nparts; k++) {
			qtk_part *pt = &p->out->parts[k];
			memmove(pt->shape + 1, pt->shape, (size_t)pt->ndim * sizeof *pt->shape);
			pt->shape[0] = e;
			pt->ndim++;
			if (!qtk_mul_u64(pt->nbytes, e, &pt->nbytes))
				return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows");
		}
	}
	p->method = M_GROUPS;
	p->note = "exact";
	return 0;
}

/* A Hugging Face directory or a .safetensors file: no ggml block types. */
static bool hf_out(const conv_opts *o)
{
	return o->out_kind == QTK_OUT_SAFETENSORS || o->out_kind == QTK_OUT_HF;
}

static int plan_tensor(qtk_model *in, const conv_opts *o, qtk_mix_state *ms, const qtk_imatrix *im, const qtk_hfmap *map,
		       const qtk_tensor *t, plan *p, qtk_err *err)
{
	const char *oname = p->out_name;
	int heads = p->perm_heads;
	bool inv = p->perm_inverse, f32 = p->force_f32;
	unsigned mapped = p->map_otype;
	bool nv = p->nv_scaled;
	float nvs = p->nv_scale;
	qtk_tensor *out = p->out;
	memset(p, 0, sizeof *p);
	p->out = out;
	p->nv_scaled = nv;
	p->nv_scale = nvs;
	p->src = t;
	p->out_name = oname ? oname : t->name;
	p->perm_heads = heads;
	p->perm_inverse = inv;
	p->force_f32 = f32;
	p->map_otype = mapped;
	p->method = M_COPY;
	if (qtk_tensor_copy(p->out, t))
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "parts do not fit the output's room");
	p->out->view = NULL;
	p->note = "exact";
	bool to_gguf = o->out_kind == QTK_OUT_GGUF;
	bool plain = t->layout.kind == QTK_LAYOUT_PLAIN;
	if (to_gguf && p->force_f32 && plain && qtk_type(t->layout.type)->is_float && t->layout.type != QTK_T_F32) {
		p->method = M_ROWS; /* MoE routers: F32 whatever the target, as llama.cpp writes them */
		return out_plain(p->out, t, QTK_T_F32) ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows") : 0;
	}
	bool gguf_pair = t->layout.kind == QTK_LAYOUT_NVFP4 && t->layout.scale_type == 2; /* GGUF NVFP4 + .scale */
	if ((gguf_pair || (plain && t->layout.type == QTK_T_NVFP4)) && o->out_kind == QTK_OUT_HF &&
	    (o->target.kind == TGT_KEEP || o->target.kind == TGT_AUTO_EXACT)) {
		int r = plan_modelopt(in, t, p, err);
		if (r <= 0)
			return r; /* 1: F32 below (keep) or auto-exact's choice */
	}
	if (plain && t->layout.type == QTK_T_MXFP4 && o->out_kind == QTK_OUT_HF &&
	    (o->target.kind == TGT_KEEP || o->target.kind == TGT_AUTO_EXACT)) {
		int r = plan_gptoss_mxfp4(t, p, err);
		if (r == 1)
			r = plan_ct_mxfp4(t, p, err);
		if (r <= 0)
			return r; /* 1: F32 below (keep) or auto-exact's choice */
	}
	if (o->target.kind == TGT_KEEP && hf_out(o) && ((plain && !qtk_type(t->layout.type)->st_name) || gguf_pair)) {
		/* ggml blocks have no safetensors dtype: dequantized to F32, as transformers loads a GGUF
		 * (every decoded value is an F32, so this is exact; conv_plan says so in one line) */
		p->method = M_ROWS;
		p->note = "dequantized";
		return out_plain(p->out, t, QTK_T_F32) ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows") : 0;
	}
	if (p->nv_scaled) { /* conv_plan: blocks shuffled, the multiplier beside them */
		p->method = M_ROWS;
		p->note = t->layout.scale_type == 1 ? "exact" : "shuffle";
		return out_plain(p->out, t, QTK_T_NVFP4) ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows") : 0;
	}
	if (o->target.kind == TGT_KEEP || (plain && is_int_dtype(t->layout.type)))
		return plan_keep(in, o, map, t, p, err);
	if (o->target.kind == TGT_AUTO_EXACT)
		return plan_auto_exact(in, o, t, p, err);
	if (o->target.kind == TGT_MLX) {
		if (to_gguf)
			return qtk_err_set(err, QTK_E_USAGE, o->output, -1, NULL,
					   "GGUF cannot hold MLX layers; write a directory (or .safetensors, .qpk)");
		if (is_mlx_module(t, o->group_size))
			return plan_mlx(o, t, p, err);
		if (plain && qtk_type(t->layout.type)->is_float)
			return plan_keep(in, o, map, t, p, err);
		p->method = M_ROWS; /* a quantized matrix MLX cannot group: F16 */
		p->note = "lossy";
		return out_plain(p->out, t, QTK_T_F16) ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows") : 0;
	}
	if (o->target.kind == TGT_AWQ || o->target.kind == TGT_GPTQ || o->target.kind == TGT_CT ||
	    o->target.kind == TGT_CT_FP8) {
		if (to_gguf)
			return qtk_err_set(err, QTK_E_USAGE, o->output, -1, NULL,
					   "GGUF cannot hold AWQ, GPTQ or compressed-tensors layers; write a .safetensors file or a directory");
		if (is_block_linear(t))
			return o->target.kind == TGT_CT_FP8 ? plan_fp8(o, t, p, err) : plan_groups(in, o, t, p, err);
		/* everything else stays float; quantized embeddings become F16 */
		if (plain && qtk_type(t->layout.type)->is_float)
			return 0;
		p->method = M_ROWS;
		p->note = "lossy";
		return out_plain(p->out, t, QTK_T_F16) ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows") : 0;
	}
	unsigned ty = o->target.type;
	const qtk_type_info *ti = qtk_type(ty);
	if (!ti->is_float) {
		if (shuffle_type(t) == ty) {
			/* blocks the target holds as they are (gpt-oss MXFP4 experts): kept, whatever the name */
		} else if (!qtk_mix_quantizable(t)) {
			/* norms, biases and the like stay float: F32 in GGUF */
			if (!to_gguf || (plain && t->layout.type == QTK_T_F32))
				return to_gguf && !plain ? can_store(o, in, t, err) : 0;
			ty = QTK_T_F32;
		} else if (o->target.kind == TGT_MIX) {
			ty = qtk_mix_type(ms, t, ty, im != NULL);
		} else {
			ty = qtk_mix_fallback(t, ty);
		}
		if (!o->dry_run && !qtk_type(ty)->is_float && !qtk_quant_supported(ty) && shuffle_type(t) != ty)
			return qtk_err_set(err, QTK_E_USAGE, in->path, -1, t->name, "no encoder for %s", qtk_type(ty)->name);
	} else if (to_gguf && t->ndim <= 1 && ty != QTK_T_F32) {
		ty = QTK_T_F32; /* norms and biases stay F32 in GGUF, as llama.cpp keeps them */
	}
	if (to_gguf && p->force_f32 && plain && qtk_type(t->layout.type)->is_float)
		ty = QTK_T_F32; /* MoE routers: F32 whatever the target, as llama.cpp writes them */
	if (plain && t->layout.type == ty)
		return 0;
	if (!qtk_can_decode(t)) {
		char lid[48];
		qtk_layout_id(&t->layout, lid, sizeof lid);
		return qtk_err_set(err, QTK_E_DATA, in->path, -1, t->name, "cannot decode layout %s", lid);
	}
	if (qtk_tensor_cols(t) % qtk_type(ty)->blck)
		return qtk_err_set(err, QTK_E_DATA, in->path, -1, t->name, "row length %llu is not a multiple of the %s block",
				   (unsigned long long)qtk_tensor_cols(t), qtk_type(ty)->name);
	p->method = M_ROWS;
	p->note = ty == QTK_T_F32 ? "exact" : "lossy";
	if (im && !qtk_type(ty)->is_float) {
		p->imatrix_run = true;
		plan_imatrix(im, t, p);
	}
	return out_plain(p->out, t, ty) ? qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows") : 0;
}

/* One quantization_config describes a whole HF model, so the GPTQ version
 * is chosen for all layers at once: v1 (what most engines load) unless a
 * repacked layer has a zero of 0, which only v2 can store. */
static int resolve_gptq_version(qtk_model *in, conv_opts *o, qtk_err *err)
{
	bool zero0 = false, zero_top = false;
	const char *who = NULL;
	for (size_t i = 0; i < in->ntensors; i++) {
		const qtk_tensor *t = &in->tensors[i];
		src_groups sg;
		if (!is_block_linear(t))
			continue;
		if (probe_groups(in, t, &sg)) {
			*err = in->err;
			return err->code;
		}
		if (!sg.ok || (o->bits && sg.bits != o->bits))
			continue;
		if (sg.zero0 && !who)
			who = t->name;
		zero0 |= sg.zero0;
		zero_top |= sg.zero_top;
	}
	o->target.gptq_version = zero0 && !zero_top ? 2 : 1;
	if (o->target.gptq_version == 2)
		cli_warn("%s: a zero point is 0, which GPTQ v1 cannot store; writing GPTQ v2 (checkpoint_format gptq_v2)",
			 who);
	return 0;
}

int conv_plan(qtk_model *in, const conv_opts *opts, const void *imatrix, const qtk_hfmap *map, plan *plans,
	      qtk_tensor *outs, qtk_model *room, qtk_err *err)
{
	for (size_t i = 0; i < in->ntensors; i++)
		plans[i].out = &outs[i];
	conv_opts o_resolved = *opts, *o = &o_resolved;
	if (o->target.kind == TGT_GPTQ && !o->target.gptq_version) {
		int rc = resolve_gptq_version(in, o, err);
		if (rc)
			return rc;
	}
	if (o->target.kind == TGT_MLX) {
		int rc = resolve_mlx(in, o, err);
		if (rc)
			return rc;
	} else if (o->bits == 5 || o->bits == 6) {
		return qtk_err_set(err, QTK_E_USAGE, NULL, -1, NULL, "--bits %u is for mlx targets (gptq takes 2, 3, 4 or 8)",
				   o->bits);
	}
	if ((o->target.kind == TGT_TYPE || o->target.kind == TGT_MIX) && hf_out(o) &&
	    !qtk_type(o->target.type)->st_name)
		return qtk_err_set(err, QTK_E_USAGE, o->output, -1, NULL,
				   "%s cannot hold ggml's %s blocks: write a .gguf or .qpk for that, or choose a layout "
				   "safetensors holds: --to f16|bf16|f32, or a packed checkpoint transformers and vLLM load "
				   "(--to awq|gptq|ct-int|mlx)",
				   o->out_kind == QTK_OUT_HF ? "a Hugging Face directory" : "safetensors",
				   qtk_type(o->target.type)->upper);
	qtk_mix_state ms;
	qtk_mix_init(&ms, in, o->target.ftype);
	size_t unmapped = 0;
	const char *first_unmapped = NULL;
	for (size_t i = 0; i < in->ntensors; i++) {
		plans[i].out_name = NULL;
		plans[i].perm_heads = 0;
		plans[i].perm_inverse = false;
		plans[i].force_f32 = false;
		plans[i].map_otype = QTK_T_MAX;
		plans[i].nv_scaled = o->nv_pick && o->nv_pick[i];
		plans[i].nv_scale = plans[i].nv_scaled ? o->nv_scales[i] : 1.0f;
		if (map) { /* in is the mapping's view: tensors carry their output names */
			const qtk_hfmap_out *mo = qtk_hfmap_view_out(map, i);
			if (mo) {
				plans[i].perm_heads = mo->heads;
				plans[i].perm_inverse = mo->inverse;
				plans[i].force_f32 = mo->force_f32;
				plans[i].map_otype = mo->otype;
				if (mo->unmapped && !unmapped++)
					first_unmapped = in->tensors[i].name;
			}
			plans[i].out_name = in->tensors[i].name;
		}
		/* planned into room for any layout's parts, then kept with exactly its own */
		qtk_tensor scratch = QTK_TENSOR_LOCAL;
		plans[i].out = &scratch;
		int rc = plan_tensor(in, o, &ms, imatrix, map, &in->tensors[i], &plans[i], err);
		plans[i].out = &outs[i];
		if (!rc && qtk_model_tensor_room(room, &outs[i], scratch.nparts))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		if (!rc && qtk_tensor_copy(&outs[i], &scratch))
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, in->tensors[i].name, "parts do not fit the output's room");
		if (rc)
			return rc;
	}
	size_t ndeq = 0;
	char deq_types[96] = "";
	for (size_t i = 0; i < in->ntensors; i++) {
		if (strcmp(plans[i].note, "dequantized"))
			continue;
		const char *tn = in->tensors[i].layout.kind == QTK_LAYOUT_PLAIN ? qtk_type(in->tensors[i].layout.type)->upper
										 : "NVFP4 x .scale";
		if (!strstr(deq_types, tn) && strlen(deq_types) + strlen(tn) + 3 < sizeof deq_types)
			snprintf(deq_types + strlen(deq_types), sizeof deq_types - strlen(deq_types), "%s%s",
				 deq_types[0] ? ", " : "", tn);
		ndeq++;
	}
	if (ndeq)
		cli_note("%zu %s tensor%s (%s) dequantized to F32, exactly, as transformers loads a GGUF; for a "
			 "smaller checkpoint use --to f16|bf16 (rounded) or --to awq|gptq|ct-int|mlx (packed), or keep "
			 "the blocks in a .gguf or .qpk",
			 ndeq, "ggml", ndeq == 1 ? "" : "s", deq_types);
	/* one line for all of them (compressed-tensors' activation scales come per layer) */
	if (unmapped == 1)
		cli_warn("%s: no %s name for this tensor; keeping its name", first_unmapped,
			 o->out_kind == QTK_OUT_GGUF ? "GGUF" : "Hugging Face");
	else if (unmapped > 1)
		cli_warn("%zu tensors have no %s name (the first: %s); keeping their names", unmapped,
			 o->out_kind == QTK_OUT_GGUF ? "GGUF" : "Hugging Face", first_unmapped);
	return 0;
}
