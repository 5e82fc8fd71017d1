/* family.c - the family table and what every family shares: lookups, tensor names by a
 * descriptor's rules, canonical names, llama.cpp's Q/K row permutation, head counts and the
 * architecture numbers of the memory estimate. */
#include "family/family.h"
#include "internal.h"
#include "json.h"
#include <math.h>
#include <string.h>

/* The descriptors (one file each) and the table, in lookup order: the first family writing a
 * GGUF architecture answers for it. */
extern const qtk_family qtk_family_llama, qtk_family_mistral, qtk_family_mixtral, qtk_family_qwen2; /* llama.c */
extern const qtk_family qtk_family_qwen2moe, qtk_family_qwen3, qtk_family_qwen3moe; /* qwen.c */
extern const qtk_family qtk_family_gemma2, qtk_family_gemma3; /* gemma.c */
extern const qtk_family qtk_family_phi3;    /* phi3.c */

static const qtk_family *const families[] = {
	&qtk_family_llama,
	&qtk_family_mistral,
	&qtk_family_mixtral,
	&qtk_family_qwen2,
	&qtk_family_qwen2moe,
	&qtk_family_qwen3,
	&qtk_family_qwen3moe,
	&qtk_family_gemma2,
	&qtk_family_gemma3,
	&qtk_family_phi3,
};

size_t qtk_family_count(void) { return sizeof families / sizeof *families; }

const qtk_family *qtk_family_at(size_t i) { return i < qtk_family_count() ? families[i] : NULL; }

const qtk_family *qtk_family_by_hf_arch(const char *arch)
{
	for (size_t i = 0; arch && i < qtk_family_count(); i++)
		for (size_t k = 0; families[i]->hf_archs && families[i]->hf_archs[k]; k++)
			if (!strcmp(families[i]->hf_archs[k], arch))
				return families[i];
	return NULL;
}

const qtk_family *qtk_family_by_gguf_arch(const char *arch)
{
	for (size_t i = 0; arch && i < qtk_family_count(); i++)
		if (families[i]->gguf_arch && !strcmp(families[i]->gguf_arch, arch))
			return families[i];
	return NULL;
}

/* config.json's architectures[0] into buf ("" when absent). */
static void config_arch(const qtk_model *m, char *buf, size_t n)
{
	buf[0] = 0;
	const qtk_blob *b = qtk_blob_find(m, "config.json");
	if (!b || b->len > QTK_CAP_JSON)
		return;
	qtk_err e = {0};
	qtk_json_doc d = {0};
	if (!qtk_json_parse((const char *)b->data, b->len, 0, "config.json", 0, &e, &d)) {
		const cJSON *ar = cJSON_GetObjectItemCaseSensitive(d.root, "architectures");
		const cJSON *a0 = cJSON_IsArray(ar) ? cJSON_GetArrayItem(ar, 0) : NULL;
		if (cJSON_IsString(a0))
			snprintf(buf, n, "%s", a0->valuestring);
	}
	qtk_json_doc_free(&d);
}

const qtk_family *qtk_family_of_model(const qtk_model *m)
{
	const qtk_kv *a = m ? qtk_kv_find(m, "general.architecture") : NULL;
	if (a && a->val.type == QTK_V_STR)
		return qtk_family_by_gguf_arch(a->val.v.str.s);
	char arch[128];
	if (m)
		config_arch(m, arch, sizeof arch);
	return m ? qtk_family_by_hf_arch(arch) : NULL;
}

/* ---- tensor names ----------------------------------------------------------------------- */

bool qtk_family_dropped(const qtk_family *f, const char *name)
{
	for (size_t i = 0; f && f->dropped && f->dropped[i]; i++)
		if (qtk_str_ends(name, f->dropped[i]))
			return true;
	return false;
}

/* A block number at s: decimal, at most 9 digits, no leading zero, followed by '.'; the
 * digits consumed or 0. */
static size_t block_digits(const char *s)
{
	size_t i = 0;
	while (s[i] >= '0' && s[i] <= '9' && i < 9)
		i++;
	if (i == 0 || s[i] != '.' || (i > 1 && s[0] == '0'))
		return 0;
	return i;
}

static int put(size_t n, int k) { return k < 0 || (size_t)k >= n ? QTK_E_DATA : 1; }

static int map_name(const qtk_family *f, const char *name, bool to_gguf, char *buf, size_t n, int *qk,
		    const qtk_name_rule **rule);

const qtk_name_rule *qtk_family_rule(const qtk_family *f, const char *name, bool to_gguf)
{
	char buf[QTK_CAP_NAME + 64];
	int qk;
	const qtk_name_rule *r = NULL;
	return map_name(f, name, to_gguf, buf, sizeof buf, &qk, &r) == 1 ? r : NULL;
}

int qtk_family_map_name(const qtk_family *f, const char *name, bool to_gguf, char *buf, size_t n, int *qk)
{
	const qtk_name_rule *r;
	return map_name(f, name, to_gguf, buf, n, qk, &r);
}

/* Split name into block prefix pre, block digits and the rest: *rest at the stem after
 * "pre N.", *nd the digits; false when name has no block prefix. */
static bool split_block(const char *name, const char *pre, size_t *nd, size_t *rest)
{
	size_t pl = pre ? strlen(pre) : 0;
	if (!pre || strncmp(name, pre, pl))
		return false;
	*nd = block_digits(name + pl);
	*rest = pl + *nd + 1;
	return *nd != 0;
}

int qtk_family_expert_to_gguf(const qtk_family *f, const char *name, char *buf, size_t n, uint32_t *expert)
{
	size_t nd, rest, len = strlen(name);
	if (!f->nexperts || !qtk_str_ends(name, ".weight") || !split_block(name, f->hf_block, &nd, &rest))
		return 0;
	size_t stem = len - strlen(".weight");
	if (rest > stem)
		return 0;
	const char *s = name + rest;
	size_t sl = stem - rest;
	for (size_t i = 0; i < f->nexperts; i++) {
		const char *pat = f->experts[i].hf, *pct = strchr(pat, '%');
		size_t a = (size_t)(pct - pat), b = strlen(pct + 1);
		if (sl <= a + b || strncmp(s, pat, a) || strncmp(s + sl - b, pct + 1, b))
			continue;
		/* the expert number: decimal, no leading zero, fits 16 bits */
		size_t dl = sl - a - b;
		uint32_t e = 0;
		bool ok = dl <= 5 && !(dl > 1 && s[a] == '0');
		for (size_t k = 0; ok && k < dl; k++) {
			ok = s[a + k] >= '0' && s[a + k] <= '9';
			e = e * 10 + (uint32_t)(s[a + k] - '0');
		}
		if (!ok || e > 65535)
			continue;
		*expert = e;
		return put(n, snprintf(buf, n, "%s%.*s.%s.weight", f->gguf_block, (int)nd, name + strlen(f->hf_block),
				       f->experts[i].gguf));
	}
	return 0;
}

int qtk_family_expert_to_hf(const qtk_family *f, const char *name, uint32_t e, char *buf, size_t n)
{
	size_t nd, rest, len = strlen(name);
	if (!f->nexperts || !qtk_str_ends(name, ".weight") || !split_block(name, f->gguf_block, &nd, &rest))
		return 0;
	size_t stem = len - strlen(".weight");
	if (rest > stem)
		return 0;
	for (size_t i = 0; i < f->nexperts; i++) {
		const char *g = f->experts[i].gguf;
		if (strlen(g) != stem - rest || strncmp(name + rest, g, stem - rest))
			continue;
		const char *pat = f->experts[i].hf, *pct = strchr(pat, '%');
		return put(n, snprintf(buf, n, "%s%.*s.%.*s%u%s.weight", f->hf_block, (int)nd,
				       name + strlen(f->gguf_block), (int)(pct - pat), pat, e, pct + 1));
	}
	return 0;
}

/* Single precision throughout, as the converter computes with float32 tensors. */
void qtk_family_llama3_rope(double theta, uint32_t dim, double factor, double low, double high, double orig_ctx,
			    float *out)
{
	const float base = (float)theta, fac = (float)factor, lo = (float)low, hi = (float)high, oc = (float)orig_ctx;
	const float low_wavelen = (float)(orig_ctx / low), high_wavelen = (float)(orig_ctx / high);
	const float two_pi = (float)(2.0 * 3.14159265358979323846);
	for (uint32_t i = 0; i < dim / 2; i++) {
		float expo = (float)(2 * i) / (float)dim;
		float freq = 1.0f / powf(base, expo);
		float wavelen = two_pi / freq;
		if (wavelen < high_wavelen)
			out[i] = 1.0f;
		else if (wavelen > low_wavelen)
			out[i] = fac;
		else {
			float smooth = (oc / wavelen - lo) / (hi - lo);
			out[i] = 1.0f / ((1.0f - smooth) / fac + smooth);
		}
	}
}

static int map_name(const qtk_family *f, const char *name, bool to_gguf, char *buf, size_t n, int *qk,
		    const qtk_name_rule **rule)
{
	*qk = 0;
	*rule = NULL;
	size_t len = strlen(name), stem = 0;
	const char *sfx = NULL;
	for (size_t i = 0; f->suffixes && f->suffixes[i] && !sfx; i++) {
		size_t l = strlen(f->suffixes[i]);
		if (len > l && !strcmp(name + len - l, f->suffixes[i])) {
			sfx = f->suffixes[i];
			stem = len - l;
		}
	}
	if (!sfx)
		return 0;
	for (size_t i = 0; i < f->ntop; i++) {
		const char *from = to_gguf ? f->top[i].hf : f->top[i].gguf, *to = to_gguf ? f->top[i].gguf : f->top[i].hf;
		if (strlen(from) == stem && !strncmp(name, from, stem)) {
			*qk = f->top[i].qk;
			*rule = &f->top[i];
			return put(n, snprintf(buf, n, "%s%s", to, sfx));
		}
	}
	const char *pre = to_gguf ? f->hf_block : f->gguf_block, *out_pre = to_gguf ? f->gguf_block : f->hf_block;
	size_t pl = pre ? strlen(pre) : 0;
	if (!pre || strncmp(name, pre, pl))
		return 0;
	size_t nd = block_digits(name + pl);
	if (!nd)
		return 0;
	size_t rest = pl + nd + 1;
	if (rest > stem)
		return 0;
	for (size_t i = 0; i < f->nblock; i++) {
		const char *from = to_gguf ? f->block[i].hf : f->block[i].gguf;
		const char *to = to_gguf ? f->block[i].gguf : f->block[i].hf;
		if (strlen(from) != stem - rest || strncmp(name + rest, from, stem - rest))
			continue;
		*qk = f->block[i].qk;
		*rule = &f->block[i];
		return put(n, snprintf(buf, n, "%s%.*s.%s%s", out_pre, (int)nd, name + pl, to, sfx));
	}
	return 0;
}

int qtk_canon_name(const qtk_model *m, const char *name, char *buf, size_t n, int *qk)
{
	*qk = 0;
	/* a quantized layer's activation scale (ModelOpt's input_scale; llama.cpp's converter keeps it
	 * beside the GGUF weight under the same suffix): its weight's canonical name, suffix swapped */
	size_t l = strlen(name);
	if (l > 12 && l < 400 && !strcmp(name + l - 12, ".input_scale")) {
		char wn[512];
		snprintf(wn, sizeof wn, "%.*s.weight", (int)(l - 12), name);
		int rc = qtk_canon_name(m, wn, buf, n, qk);
		*qk = 0;
		size_t bl = rc < 0 ? 0 : strlen(buf);
		if (rc < 0 || bl < 7 || strcmp(buf + bl - 7, ".weight") || bl + 6 >= n)
			return rc < 0 ? rc : put(n, snprintf(buf, n, "%s", name)) < 0 ? QTK_E_DATA : 0;
		memcpy(buf + bl - 7, ".input_scale", 13);
		return rc;
	}
	const qtk_kv *a = m ? qtk_kv_find(m, "general.architecture") : NULL;
	const qtk_family *own = a && a->val.type == QTK_V_STR ? qtk_family_by_gguf_arch(a->val.v.str.s) : NULL;
	if (own) {
		int rc = qtk_family_map_name(own, name, false, buf, n, qk);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < qtk_family_count(); i++) {
		int rc = qtk_family_map_name(families[i], name, false, buf, n, qk);
		if (rc)
			return rc;
	}
	return put(n, snprintf(buf, n, "%s", name)) < 0 ? QTK_E_DATA : 0;
}

/* ---- the permutation ---------------------------------------------------------------------- */

void qtk_family_permute_rows(const uint8_t *src, uint8_t *dst, uint64_t rows, uint64_t row_bytes, int heads,
			     bool inverse)
{
	if (heads <= 0 || rows % ((uint64_t)heads * 2) != 0) {
		memcpy(dst, src, (size_t)(rows * row_bytes));
		return;
	}
	uint64_t hd = rows / (uint64_t)heads, half = hd / 2;
	for (uint64_t h = 0; h < (uint64_t)heads; h++)
		for (uint64_t j = 0; j < 2; j++)
			for (uint64_t i = 0; i < half; i++) {
				/* HF row h*hd + j*half + i  <->  GGUF row h*hd + i*2 + j */
				uint64_t hf = h * hd + j * half + i, gg = h * hd + i * 2 + j;
				uint64_t from = inverse ? gg : hf, to = inverse ? hf : gg;
				memcpy(dst + to * row_bytes, src + from * row_bytes, (size_t)row_bytes);
			}
}

/* ---- head counts ------------------------------------------------------------------------- */

/* An integer metadata value, or a decimal string (safetensors __metadata__). */
static bool kv_int(const qtk_kv *kv, uint64_t *out)
{
	const qtk_value *v = &kv->val;
	if (v->type == QTK_V_STR)
		return v->v.str.len == strlen(v->v.str.s) && qtk_parse_u64(v->v.str.s, out);
	return qtk_value_as_u64(v, out);
}

int qtk_family_qk_heads(const qtk_model *m, const qtk_tensor *t, int *heads, qtk_err *err)
{
	*heads = 0;
	char canon[QTK_CAP_NAME + 64];
	int qk = 0;
	if (qtk_canon_name(m, t->name, canon, sizeof canon, &qk) < 0 || !qk)
		return 0;
	const qtk_kv *arch = qtk_kv_find(m, "general.architecture");
	const qtk_family *f = arch && arch->val.type == QTK_V_STR ? qtk_family_by_gguf_arch(arch->val.v.str.s) : NULL;
	if (!f || !f->permute_qk)
		return 0; /* llama.cpp permutes Q/K for these families only */
	char kq[128], kk[128];
	snprintf(kq, sizeof kq, "%s.%s", f->gguf_arch, f->keys->n_head.gguf);
	snprintf(kk, sizeof kk, "%s.%s", f->gguf_arch, f->keys->n_head_kv.gguf);
	const qtk_kv *hq = qtk_kv_find(m, kq), *hk = qtk_kv_find(m, kk);
	uint64_t nq = 0, nk = 0;
	if (!hq || !kv_int(hq, &nq) || nq < 1 || nq > 65536)
		return qtk_err_set(err, QTK_E_DATA, m->path, -1, kq,
				   "missing or not a head count: cannot undo the Q/K row permutation of '%s'", t->name);
	if (!hk)
		nk = nq;
	else if (!kv_int(hk, &nk) || nk < 1 || nk > 65536)
		return qtk_err_set(err, QTK_E_DATA, m->path, -1, kk,
				   "not a head count: cannot undo the Q/K row permutation of '%s'", t->name);
	uint64_t h = qk == 'q' ? nq : nk, rows = t->ndim >= 1 ? t->shape[0] : 0;
	if (!rows || rows % (2 * h))
		return qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name,
				   "%llu rows cannot be split into %llu heads of even size",
				   (unsigned long long)rows, (unsigned long long)h);
	*heads = (int)h;
	return 0;
}

/* ---- the memory estimate's numbers ------------------------------------------------------ */

/* Element k of an integer or bool metadata array; false for other element types and for a
 * negative value. */
static bool hp_arr_u64(const qtk_value *v, uint64_t k, uint64_t *out)
{
	size_t es = qtk_value_size(v->elem);
	if (v->type != QTK_V_ARR || k >= v->n || !es || es > 8 || v->elem == QTK_V_F32 || v->elem == QTK_V_F64)
		return false;
	const uint8_t *p = (const uint8_t *)v->arr + es * k;
	uint64_t raw = 0;
	for (size_t b = 0; b < es; b++)
		raw |= (uint64_t)p[b] << (8 * b);
	bool sgn = v->elem == QTK_V_I8 || v->elem == QTK_V_I16 || v->elem == QTK_V_I32 || v->elem == QTK_V_I64;
	if (sgn && (raw >> (8 * es - 1)) & 1)
		return false;
	*out = raw;
	return true;
}

static const qtk_kv *hp_kv(const qtk_model *m, const char *arch, const char *suffix)
{
	char key[256];
	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	return qtk_kv_find(m, key);
}

/* An integer metadata value (any integer type; per-layer arrays: the largest); false when
 * absent or not an integer. */
static bool hp_kv_uint(const qtk_model *m, const char *arch, const char *suffix, uint64_t *out)
{
	const qtk_kv *kv = hp_kv(m, arch, suffix);
	if (!kv)
		return false;
	const qtk_value *v = &kv->val;
	if (qtk_value_as_u64(v, out))
		return true;
	if (v->type != QTK_V_ARR || !v->n || v->elem == QTK_V_BOOL)
		return false;
	uint64_t mx = 0, x;
	bool any = false;
	for (uint64_t k = 0; k < v->n; k++)
		if (hp_arr_u64(v, k, &x)) {
			any = true;
			if (x > mx)
				mx = x;
		}
	*out = mx;
	return any;
}

/* Per-layer inputs gathered from either source: KV heads of every layer (when listed) and
 * the sliding layers (when listed). */
typedef struct hp_layers {
	bool heads_listed;
	uint32_t heads[QTK_HP_MAX_LAYERS];
} hp_layers;

#define HP_MAX_HEADS (1u << 20)

/* A per-layer list of n entries for hp's layers: false (and kv_unknown says why) when it
 * cannot be one. */
static bool hp_list_ok(qtk_hparams *hp, const char *what, uint64_t n)
{
	if (hp->kv_unknown[0])
		return false;
	if (n != hp->n_layer)
		snprintf(hp->kv_unknown, sizeof hp->kv_unknown, "the per-layer %s has %llu entries for %llu layers",
			 what, (unsigned long long)n, (unsigned long long)hp->n_layer);
	else if (n > QTK_HP_MAX_LAYERS)
		snprintf(hp->kv_unknown, sizeof hp->kv_unknown, "the per-layer %s has more than %u entries", what,
			 QTK_HP_MAX_LAYERS);
	return !hp->kv_unknown[0];
}

static void hp_head_at(qtk_hparams *hp, hp_layers *ly, uint64_t l, bool ok, uint64_t x, const char *what)
{
	if (!ok || x > HP_MAX_HEADS) {
		if (!hp->kv_unknown[0])
			snprintf(hp->kv_unknown, sizeof hp->kv_unknown, "the per-layer %s has a bad entry at layer %llu",
				 what, (unsigned long long)l);
		return;
	}
	ly->heads[l] = (uint32_t)x;
}

static void hp_set_swa(qtk_hparams *hp, uint64_t l)
{
	hp->swa_layers[l / 64] |= 1ull << (l % 64);
}

bool qtk_family_layer_swa(const qtk_hparams *hp, uint64_t l)
{
	if (!hp->swa_window || l >= hp->n_layer)
		return false;
	if (hp->swa_explicit)
		return l < QTK_HP_MAX_LAYERS && (hp->swa_layers[l / 64] >> (l % 64)) & 1;
	uint32_t p = hp->swa_period;
	return p == 0 || l % p < p - 1;
}

/* The sums over the layers (hp->n_head_kv on every layer unless ly lists them). */
static void hp_kv_sums(qtk_hparams *hp, const hp_layers *ly)
{
	hp->kv_heads_full = hp->kv_heads_swa = hp->n_layer_swa = 0;
	hp->n_head_kv_min = hp->n_head_kv;
	if (hp->kv_unknown[0]) {
		hp->n_head_kv_min = 0;
		return;
	}
	uint64_t L = hp->n_layer;
	if (ly->heads_listed || hp->swa_explicit) { /* both lists have exactly n_layer <= cap entries */
		uint64_t mn = UINT64_MAX;
		for (uint64_t l = 0; l < L; l++) {
			uint64_t h = ly->heads_listed ? ly->heads[l] : hp->n_head_kv;
			mn = h < mn ? h : mn;
			bool ok;
			if (qtk_family_layer_swa(hp, l)) {
				ok = qtk_add_u64(hp->kv_heads_swa, h, &hp->kv_heads_swa);
				hp->n_layer_swa++;
			} else {
				ok = qtk_add_u64(hp->kv_heads_full, h, &hp->kv_heads_full);
			}
			if (!ok) {
				hp->kv_heads_full = hp->kv_heads_swa = 0;
				snprintf(hp->kv_unknown, sizeof hp->kv_unknown, "the KV heads of %llu layers are too many",
					 (unsigned long long)L);
				return;
			}
		}
		hp->n_head_kv_min = L ? mn : 0;
		return;
	}
	uint64_t p = hp->swa_period, nswa = 0;
	if (hp->swa_window)
		nswa = p == 0 ? L : L / p * (p - 1) + (L % p < p - 1 ? L % p : p - 1);
	if (!qtk_mul_u64(hp->n_head_kv, L - nswa, &hp->kv_heads_full) ||
	    !qtk_mul_u64(hp->n_head_kv, nswa, &hp->kv_heads_swa)) {
		hp->kv_heads_full = hp->kv_heads_swa = 0;
		snprintf(hp->kv_unknown, sizeof hp->kv_unknown, "%llu layers of %llu KV heads are too many",
			 (unsigned long long)L, (unsigned long long)hp->n_head_kv);
		return;
	}
	hp->n_layer_swa = nswa;
}

/* A KV cache over QTK_HP_KV_TOKEN_MAX bytes a token (at 4 bytes an element) is no real model's:
 * it is reported as unknown rather than estimated, so every estimate (per token, times any
 * context up to 2^32 tokens) stays well inside the range the estimate's arithmetic holds. */
static void hp_kv_range(qtk_hparams *hp)
{
	if (hp->kv_unknown[0])
		return;
	uint64_t heads, dims, b;
	if (!qtk_add_u64(hp->kv_heads_full, hp->kv_heads_swa, &heads) ||
	    !qtk_add_u64(hp->head_dim, hp->head_dim_v, &dims) || !qtk_mul_u64(heads, dims, &b) ||
	    !qtk_mul_u64(b, 4, &b) || b > QTK_HP_KV_TOKEN_MAX) {
		snprintf(hp->kv_unknown, sizeof hp->kv_unknown,
			 "%llu KV heads x head size %llu + %llu is out of range (over %llu GiB a token)",
			 (unsigned long long)heads, (unsigned long long)hp->head_dim, (unsigned long long)hp->head_dim_v,
			 (unsigned long long)(QTK_HP_KV_TOKEN_MAX >> 30));
		hp->kv_heads_full = hp->kv_heads_swa = 0;
	}
}

/* llama.cpp's sliding-layer period for an architecture (GGUF general.architecture or
 * config.json model_type), or -1: layer l slides when l % period < period - 1. */
static int hp_swa_period_of(const char *arch, const char **note)
{
	static const struct {
		const char *arch;
		int period;
		const char *note;
	} rules[] = {{"gemma2", 2, "the even layers, llama.cpp's rule for gemma2"},
		     {"gemma3", 6, "all but every 6th layer, llama.cpp's rule for gemma3"},
		     {"gemma3_text", 6, "all but every 6th layer, llama.cpp's rule for gemma3"},
		     {"cohere2", 4, "all but every 4th layer, llama.cpp's rule for cohere2"}};
	for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
		if (!strcmp(arch, rules[i].arch)) {
			*note = rules[i].note;
			return rules[i].period;
		}
	return -1;
}

static const char hp_note_phi3[] = "not applied: llama.cpp disables Phi-3's sliding window and caches every token";
static const char hp_note_norule[] = "not applied: no sliding-layer rule is known for this architecture, every layer caches every token";
static const char hp_note_zero[] = "not applied: a window of 0 tokens";

/* A window with no explicit layer list: the architecture's rule, else a note why none slides. */
static void hp_swa_rule(qtk_hparams *hp, const char *arch)
{
	const char *note = NULL;
	int p = hp_swa_period_of(arch, &note);
	if (!hp->swa_window)
		hp->swa_note = hp_note_zero;
	else if (p >= 0) {
		hp->swa_period = (uint32_t)p;
		hp->swa_note = note;
	} else
		hp->swa_note = !strncmp(arch, "phi3", 4) ? hp_note_phi3 : hp_note_norule;
	if (!hp->swa_window || p < 0)
		hp->swa_period = 1;
}

static void hp_swa_gguf(const qtk_model *m, const char *arch, qtk_hparams *hp)
{
	uint64_t w = 0;
	bool has_w = hp_kv_uint(m, arch, "attention.sliding_window", &w);
	if (!has_w && strcmp(arch, "gemma2"))
		return;
	if (!has_w)
		w = 4096; /* llama.cpp's default window for gemma2 */
	hp->swa_window = w;
	const qtk_kv *pat = hp_kv(m, arch, "attention.sliding_window_pattern");
	uint64_t period;
	if (w && pat && pat->val.type == QTK_V_ARR) {
		if (!hp_list_ok(hp, "sliding_window_pattern", pat->val.n))
			return;
		hp->swa_explicit = true;
		for (uint64_t l = 0; l < pat->val.n; l++) {
			uint64_t x = 0;
			if (!hp_arr_u64(&pat->val, l, &x)) {
				snprintf(hp->kv_unknown, sizeof hp->kv_unknown,
					 "the per-layer sliding_window_pattern has a bad entry at layer %llu", (unsigned long long)l);
				return;
			}
			if (x)
				hp_set_swa(hp, l);
		}
		hp->swa_note = "the layers sliding_window_pattern marks";
	} else if (w && pat && qtk_value_as_u64(&pat->val, &period) && period <= UINT32_MAX) {
		hp->swa_period = (uint32_t)period;
		hp->swa_note = "layers l with l % sliding_window_pattern < sliding_window_pattern - 1";
	} else {
		hp_swa_rule(hp, arch);
	}
}

/* The first present config.json name of key k. */
static const cJSON *hp_json_find(const cJSON *o, const qtk_hparam_key *k)
{
	if (!k->find)
		return cJSON_GetObjectItemCaseSensitive(o, k->hf);
	for (size_t i = 0; k->find[i]; i++) {
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k->find[i]);
		if (j)
			return j;
	}
	return NULL;
}

static bool hp_json_num(const cJSON *j, uint64_t *out)
{
	if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 1e15)
		return false;
	*out = (uint64_t)j->valuedouble;
	return true;
}

/* A number, or the largest of a list of numbers (per-layer head counts). */
static bool hp_json_val(const cJSON *j, uint64_t *out)
{
	if (!cJSON_IsArray(j))
		return hp_json_num(j, out);
	uint64_t mx = 0, x;
	bool any = false;
	const cJSON *e;
	cJSON_ArrayForEach(e, j)
		if (hp_json_num(e, &x)) {
			any = true;
			mx = x > mx ? x : mx;
		}
	*out = mx;
	return any;
}

static bool hp_json_uint(const cJSON *o, const qtk_hparam_key *k, uint64_t *out)
{
	return hp_json_val(hp_json_find(o, k), out);
}

/* The first present of names (NULL-terminated). */
static bool hp_json_names(const cJSON *o, const char *const *names, uint64_t *out)
{
	for (size_t i = 0; names[i]; i++) {
		const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, names[i]);
		if (j)
			return hp_json_val(j, out);
	}
	return false;
}

static void hp_swa_config(const cJSON *o, qtk_hparams *hp)
{
	const cJSON *sw = cJSON_GetObjectItemCaseSensitive(o, "sliding_window");
	uint64_t w;
	if (!hp_json_num(sw, &w))
		return; /* absent or null: no sliding window */
	hp->swa_window = w;
	hp->swa_period = 1;
	const cJSON *use = cJSON_GetObjectItemCaseSensitive(o, "use_sliding_window");
	const cJSON *types = cJSON_GetObjectItemCaseSensitive(o, "layer_types");
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "sliding_window_pattern");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
	uint64_t period;
	if (cJSON_IsFalse(use)) {
		hp->swa_note = "not applied: use_sliding_window is false";
	} else if (!w) {
		hp->swa_note = hp_note_zero;
	} else if (cJSON_IsArray(types)) {
		if (!hp_list_ok(hp, "layer_types", (uint64_t)cJSON_GetArraySize(types)))
			return;
		hp->swa_explicit = true;
		uint64_t l = 0;
		const cJSON *e;
		cJSON_ArrayForEach(e, types) {
			if (cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention"))
				hp_set_swa(hp, l);
			l++;
		}
		hp->swa_note = "the layers layer_types calls sliding_attention";
	} else if (hp_json_num(pat, &period) && period <= UINT32_MAX) {
		hp->swa_period = (uint32_t)period;
		hp->swa_note = "layers l with l % sliding_window_pattern < sliding_window_pattern - 1";
	} else {
		hp_swa_rule(hp, cJSON_IsString(mt) ? mt->valuestring : "");
	}
}

/* config.json names beyond the family's keys: mixtures of experts, OpenELM's per-layer lists. */
static const char *const hp_cfg_expert[] = {"num_local_experts", "num_experts", "n_routed_experts", NULL};
static const char *const hp_cfg_used[] = {"num_experts_per_tok", "num_experts_per_token", "experts_per_token", NULL};
static const char *const hp_cfg_ffexp[] = {"moe_intermediate_size", NULL};
static const char *const hp_cfg_ffsh[] = {"shared_expert_intermediate_size", NULL};
static const char *const hp_cfg_layer[] = {"num_transformer_layers", NULL};
static const char *const hp_cfg_head[] = {"num_query_heads", NULL};
static const char *const hp_cfg_kv[] = {"num_kv_heads", NULL};

static const cJSON *hp_json_kv_heads(const cJSON *o, const qtk_hparam_key *k)
{
	const cJSON *j = hp_json_find(o, k);
	return j ? j : cJSON_GetObjectItemCaseSensitive(o, hp_cfg_kv[0]);
}

static int hp_from_config(const qtk_model *m, qtk_hparams *hp, hp_layers *ly)
{
	const qtk_blob *b = qtk_blob_find(m, "config.json");
	if (!b)
		return -1;
	cJSON *root = cJSON_ParseWithLength((const char *)b->data, b->len);
	if (!root)
		return -1;
	const cJSON *ar = cJSON_GetObjectItemCaseSensitive(root, "architectures");
	const cJSON *a0 = cJSON_IsArray(ar) ? cJSON_GetArrayItem(ar, 0) : NULL;
	const qtk_family *f = cJSON_IsString(a0) ? qtk_family_by_hf_arch(a0->valuestring) : NULL;
	const qtk_family_keys *k = f ? f->keys : &qtk_family_std_keys;
	const cJSON *o = root, *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
	if (cJSON_IsObject(tc) && !hp_json_find(root, &k->n_layer) && !hp_json_names(root, hp_cfg_layer, &(uint64_t){0}))
		o = tc;
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
	if (cJSON_IsString(mt))
		snprintf(hp->arch, sizeof hp->arch, "%s", mt->valuestring);
	int rc = -1;
	if ((hp_json_uint(o, &k->n_layer, &hp->n_layer) || hp_json_names(o, hp_cfg_layer, &hp->n_layer)) &&
	    (hp_json_uint(o, &k->n_head, &hp->n_head) || hp_json_names(o, hp_cfg_head, &hp->n_head)) && hp->n_head) {
		const cJSON *kvh = hp_json_kv_heads(o, &k->n_head_kv);
		if (!hp_json_val(kvh, &hp->n_head_kv))
			hp->n_head_kv = hp->n_head;
		if (cJSON_IsArray(kvh) && hp_list_ok(hp, "num_key_value_heads", (uint64_t)cJSON_GetArraySize(kvh))) {
			ly->heads_listed = hp->kv_per_layer = true;
			uint64_t l = 0, x = 0;
			const cJSON *e;
			cJSON_ArrayForEach(e, kvh) {
				bool ok = hp_json_num(e, &x);
				hp_head_at(hp, ly, l++, ok, x, "num_key_value_heads");
			}
		}
		hp_json_uint(o, &k->n_embd, &hp->n_embd);
		if (hp_json_uint(o, &k->head_dim, &hp->head_dim) && hp->head_dim)
			hp->head_dim_explicit = true;
		else
			hp->head_dim = hp->n_embd / hp->n_head;
		hp->head_dim_v = hp->head_dim;
		hp_json_uint(o, &k->n_ctx, &hp->ctx_max);
		hp_json_uint(o, &k->vocab, &hp->n_vocab);
		hp_json_names(o, hp_cfg_expert, &hp->n_expert);
		hp_json_names(o, hp_cfg_used, &hp->n_expert_used);
		hp_json_names(o, hp_cfg_ffexp, &hp->n_ff_expert);
		hp_json_names(o, hp_cfg_ffsh, &hp->n_ff_shared_expert);
		hp_swa_config(o, hp);
		hp->source = "config.json";
		rc = 0;
	}
	cJSON_Delete(root);
	return rc;
}

static int hp_from_gguf(const qtk_model *m, const char *arch, qtk_hparams *hp, hp_layers *ly)
{
	const qtk_family *f = qtk_family_by_gguf_arch(arch);
	const qtk_family_keys *k = f ? f->keys : &qtk_family_std_keys;
	snprintf(hp->arch, sizeof hp->arch, "%s", arch);
	if (!hp_kv_uint(m, arch, k->n_layer.gguf, &hp->n_layer) || !hp_kv_uint(m, arch, k->n_head.gguf, &hp->n_head) ||
	    !hp->n_head)
		return -1;
	if (!hp_kv_uint(m, arch, k->n_head_kv.gguf, &hp->n_head_kv))
		hp->n_head_kv = hp->n_head;
	const qtk_kv *kvh = hp_kv(m, arch, k->n_head_kv.gguf);
	if (kvh && kvh->val.type == QTK_V_ARR && hp_list_ok(hp, "head_count_kv", kvh->val.n)) {
		ly->heads_listed = hp->kv_per_layer = true;
		for (uint64_t l = 0; l < kvh->val.n; l++) {
			uint64_t x = 0;
			bool ok = hp_arr_u64(&kvh->val, l, &x) && kvh->val.elem != QTK_V_BOOL;
			hp_head_at(hp, ly, l, ok, x, "head_count_kv");
		}
	}
	hp_kv_uint(m, arch, k->n_embd.gguf, &hp->n_embd);
	if (hp_kv_uint(m, arch, k->head_dim.gguf, &hp->head_dim) && hp->head_dim)
		hp->head_dim_explicit = true;
	else
		hp->head_dim = hp->n_embd / hp->n_head;
	if (!k->value_length || !hp_kv_uint(m, arch, k->value_length, &hp->head_dim_v) || !hp->head_dim_v)
		hp->head_dim_v = hp->head_dim;
	hp_kv_uint(m, arch, k->n_ctx.gguf, &hp->ctx_max);
	hp_kv_uint(m, arch, k->vocab.gguf, &hp->n_vocab);
	hp_kv_uint(m, arch, k->n_expert.gguf, &hp->n_expert);
	hp_kv_uint(m, arch, k->n_expert_used.gguf, &hp->n_expert_used);
	hp_kv_uint(m, arch, "expert_feed_forward_length", &hp->n_ff_expert);
	hp_kv_uint(m, arch, "expert_shared_feed_forward_length", &hp->n_ff_shared_expert);
	hp_swa_gguf(m, arch, hp);
	hp->source = "GGUF keys";
	return 0;
}

int qtk_family_hparams(const qtk_model *m, qtk_hparams *hp)
{
	memset(hp, 0, sizeof *hp);
	hp->swa_period = 1;
	hp_layers *ly = qtk_calloc(1, sizeof *ly);
	if (!ly)
		return -1;
	const qtk_kv *a = qtk_kv_find(m, "general.architecture");
	int rc = -1;
	if (a && a->val.type == QTK_V_STR)
		rc = hp_from_gguf(m, a->val.v.str.s, hp, ly);
	if (rc) {
		memset(hp, 0, sizeof *hp);
		hp->swa_period = 1;
		memset(ly, 0, sizeof *ly);
		rc = hp_from_config(m, hp, ly);
	}
	if (!rc)
		hp_kv_sums(hp, ly);
	if (!rc)
		hp_kv_range(hp);
	qtk_free(ly);
	return rc;
}

/* ---- parameters read per token ------------------------------------------------------------ */

/* 0: not an expert tensor; 1: one expert's tensor (HF "...experts.N...", *idx = N); 2: the
 * tensor of every expert, experts outermost (GGUF "..._exps...", HF "...experts.NAME"). */
static int act_expert_kind(const char *name, uint64_t *idx)
{
	if (strstr(name, "_exps."))
		return 2;
	const char *p = strstr(name, ".experts.");
	if (!p)
		return 0;
	p += strlen(".experts.");
	uint64_t v = 0;
	size_t nd = 0;
	while (p[nd] >= '0' && p[nd] <= '9' && nd < 9)
		v = v * 10 + (uint64_t)(p[nd++] - '0');
	if (nd && p[nd] == '.') {
		*idx = v;
		return 1;
	}
	return 2;
}

/* floor(x * used / n) without overflow (used <= n <= 2^20). */
static uint64_t act_share(uint64_t x, uint64_t used, uint64_t n) { return x / n * used + x % n * used / n; }

#define ACT_MAX_EXPERTS (1u << 20)

void qtk_family_active(const qtk_model *m, const qtk_hparams *hp, qtk_active *a)
{
	memset(a, 0, sizeof *a);
	uint64_t ne = hp ? hp->n_expert : 0, nu = hp ? hp->n_expert_used : 0;
	uint64_t exp_p = 0, exp_b = 0, one_p = 0, one_b = 0, act_p = 0, act_b = 0;
	bool usable = ne && nu && nu <= ne && ne <= ACT_MAX_EXPERTS;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		a->params += t->n_params;
		a->bytes += t->n_bytes;
		uint64_t idx = 0;
		int kind = act_expert_kind(t->name, &idx);
		if (!kind)
			continue;
		a->n_expert_tensors++;
		exp_p += t->n_params;
		exp_b += t->n_bytes;
		if (!usable || a->unknown[0])
			continue;
		if (kind == 1 && idx >= ne)
			snprintf(a->unknown, sizeof a->unknown, "tensor '%.80s' is expert %llu of %llu", t->name,
				 (unsigned long long)idx, (unsigned long long)ne);
		else if (kind == 2 && (t->ndim < 2 || t->shape[0] != ne))
			snprintf(a->unknown, sizeof a->unknown, "tensor '%.80s' does not hold %llu experts", t->name,
				 (unsigned long long)ne);
		else if (kind == 1) {
			one_p += t->n_params;
			one_b += t->n_bytes;
		} else {
			act_p += act_share(t->n_params, nu, ne);
			act_b += act_share(t->n_bytes, nu, ne);
		}
	}
	a->params_active = a->params;
	a->bytes_active = a->bytes;
	if (!a->n_expert_tensors)
		return;
	if (!ne)
		snprintf(a->unknown, sizeof a->unknown, "the file has expert tensors but no expert count");
	else if (!nu)
		snprintf(a->unknown, sizeof a->unknown, "the file has no count of experts used per token");
	else if (nu > ne)
		snprintf(a->unknown, sizeof a->unknown, "%llu experts used per token of %llu",
			 (unsigned long long)nu, (unsigned long long)ne);
	else if (ne > ACT_MAX_EXPERTS)
		snprintf(a->unknown, sizeof a->unknown, "%llu experts are too many", (unsigned long long)ne);
	if (a->unknown[0])
		return;
	a->params_active = a->params - exp_p + act_p + act_share(one_p, nu, ne);
	a->bytes_active = a->bytes - exp_b + act_b + act_share(one_b, nu, ne);
}

/* ---- llama.cpp's keys ------------------------------------------------------------------------ */

static const char *const k_layer[] = {"n_layers", "num_hidden_layers", "n_layer", "num_layers", NULL};
static const char *const k_ctx[] = {"max_position_embeddings", "n_ctx", NULL};
static const char *const k_embd[] = {"hidden_size", "n_embd", NULL};
static const char *const k_ff[] = {"intermediate_size", "n_inner", NULL};
static const char *const k_head[] = {"num_attention_heads", "n_head", NULL};
static const char *const k_neps[] = {"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", NULL};

const qtk_family_keys qtk_family_std_keys = {
	.n_layer = {"block_count", "num_hidden_layers", k_layer},
	.n_ctx = {"context_length", "max_position_embeddings", k_ctx},
	.n_embd = {"embedding_length", "hidden_size", k_embd},
	.n_ff = {"feed_forward_length", "intermediate_size", k_ff},
	.n_head = {"attention.head_count", "num_attention_heads", k_head},
	.n_head_kv = {"attention.head_count_kv", "num_key_value_heads", NULL},
	.head_dim = {"attention.key_length", "head_dim", NULL},
	.vocab = {"vocab_size", "vocab_size", NULL},
	.rope_theta = {"rope.freq_base", "rope_theta", NULL},
	.rms_eps = {"attention.layer_norm_rms_epsilon", "rms_norm_eps", NULL},
	.norm_eps = {"attention.layer_norm_epsilon", "layer_norm_eps", k_neps},
	.n_expert = {"expert_count", "num_local_experts", NULL},
	.n_expert_used = {"expert_used_count", "num_experts_per_tok", NULL},
	.value_length = "attention.value_length",
	.rope_dim = "rope.dimension_count",
	.rope_type = "rope.scaling.type",
	.rope_factor = "rope.scaling.factor",
	.rope_orig_ctx = "rope.scaling.original_context_length",
};
