/* bpe.c - BPE tokenizer.json <-> tokenizer.ggml.* (GPT-2-style byte-level
 * vocabularies: Qwen2, Llama 3).
 *
 * HF -> GGUF follows llama.cpp's get_vocab_base/_set_vocab_gpt2: ids
 * 0..vocab_size-1, missing ids become "[PAD<i>]" (UNUSED), added tokens are
 * CONTROL when special (or looking special) else USER_DEFINED with U+2581
 * turned into spaces, everything else NORMAL; merges from model.merges (the
 * pair form joined with a space, spaces inside a part written as U+0120).
 * Not reproduced: llama.cpp's encode/decode normalization of added tokens
 * marked normalized=false.
 *
 * tokenizer.ggml.pre: llama.cpp's converter names the pre-tokenizer by
 * hashing the token ids HF's tokenizers library produces for a test text;
 * qtk has no such library, so qtk_bpe_identify_pre reads tokenizer.json's own
 * definition (pre_tokenizer, normalizer, model.ignore_merges) and names it
 * only when it is exactly one qtk knows (the table pre_rules), else refuses.
 * The patterns are the ones the models' tokenizer.json files carry, as quoted
 * beside llama.cpp's adapted versions in its llama-vocab.cpp.
 */
#include "family/hfmap.h"
#include "json.h"
#include <inttypes.h>
#include <string.h>

#define BPE_CAP_VOCAB (1u << 24)

static int bpe_oom(qtk_err *err) { return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory"); }

static int bpe_bad(qtk_err *err, const char *what)
{
	return qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, NULL, "tokenizer.json: %s", what);
}

static bool bpe_looks_special(const char *t)
{
	size_t n = strlen(t);
	if (!strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") || !strcmp(t, "[@BOS@]"))
		return true;
	if (n >= 4 && !strncmp(t, "<|", 2) && !strcmp(t + n - 2, "|>"))
		return true;
	if (n >= 8 && !strncmp(t, "<\xEF\xBD\x9C", 4) && !strcmp(t + n - 4, "\xEF\xBD\x9C>"))
		return true;
	if (n >= 8 && !strncmp(t, "<unused", 7) && t[n - 1] == '>')
		return true;
	return false;
}

typedef struct bpe_ent {
	const char *tok;  /* into the JSON tree */
	bool added, special;
} bpe_ent;

static void free_strs(qtk_str *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		qtk_free(s[i].s);
	qtk_free(s);
}

/* "a b" for a merge given as a pair; spaces inside a part become U+0120. */
static char *join_pair(const char *a, const char *b)
{
	size_t n = 0;
	for (const char *p = a; *p; p++)
		n += *p == ' ' ? 2 : 1;
	for (const char *p = b; *p; p++)
		n += *p == ' ' ? 2 : 1;
	char *o = qtk_malloc(n + 2), *w = o;
	if (!o)
		return NULL;
	for (int k = 0; k < 2; k++) {
		for (const char *p = k ? b : a; *p; p++)
			if (*p == ' ') {
				*w++ = '\xC4';
				*w++ = '\xA0';
			} else
				*w++ = *p;
		if (!k)
			*w++ = ' ';
	}
	*w = 0;
	return o;
}

/* ---- tokenizer.json pre_tokenizer -> tokenizer.ggml.pre -------------------- */

/* Split patterns as tokenizer.json carries them (after JSON unescaping). */
static const char qwen2_re[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	"\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char llama3_re[] =
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
	"\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* One recognised tokenizer.json shape. The pre-tokenizer is either
 * Sequence[Split(Regex = split_re, Isolated, not inverted), ByteLevel(no prefix
 * space, use_regex false)] (split_re set) or a lone ByteLevel(no prefix space,
 * use_regex true), whose built-in pattern is GPT-2's (split_re NULL). */
typedef struct pre_rule {
	const char *name;   /* tokenizer.ggml.pre */
	const char *models; /* for messages */
	const char *split_re;
	bool nfc;           /* normalizer NFC (else none) */
	bool ignore_merges; /* model.ignore_merges (llama.cpp's name implies it) */
} pre_rule;

static const pre_rule pre_rules[] = {
	{"llama-bpe", "Llama 3", llama3_re, false, true},
	{"qwen2", "Qwen2, Qwen2.5, Qwen3", qwen2_re, true, false},
	{"gpt-2", "GPT-2", NULL, false, false},
};
#define NPRE_RULES (sizeof pre_rules / sizeof *pre_rules)

/* What a tokenizer.json says, reduced to what the rules compare. */
typedef struct pre_shape {
	const char *split_re; /* the Split pattern (shape with a Split), else NULL */
	bool has_split;
	bool nfc;
	bool ignore_merges;
	char found[160];      /* the pre_tokenizer's step types, for messages */
	const char *why;      /* why no rule can match (static text), or NULL */
} pre_shape;

static void shape_cat(pre_shape *s, const char *t)
{
	size_t k = strlen(s->found);
	if (k + 1 < sizeof s->found)
		snprintf(s->found + k, sizeof s->found - k, "%s", t);
}

static void shape_type(pre_shape *s, const cJSON *step)
{
	const cJSON *t = cJSON_IsObject(step) ? cJSON_GetObjectItemCaseSensitive(step, "type") : NULL;
	char b[48];
	snprintf(b, sizeof b, "%.40s", cJSON_IsString(t) ? t->valuestring : "?");
	shape_cat(s, b);
}

/* Only these keys in an object (NULL-terminated list). */
static bool only_keys(const cJSON *o, const char *const *keys)
{
	const cJSON *it;
	cJSON_ArrayForEach(it, o)
	{
		size_t i = 0;
		while (keys[i] && strcmp(keys[i], it->string) != 0)
			i++;
		if (!keys[i])
			return false;
	}
	return true;
}

static bool is_type(const cJSON *o, const char *type)
{
	const cJSON *t = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "type") : NULL;
	return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* Optional bool member: absent -> def; *ok false when present and not a bool. */
static bool opt_bool(const cJSON *o, const char *key, bool def, bool *ok)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return def;
	if (!cJSON_IsBool(v))
		*ok = false;
	return cJSON_IsTrue(v);
}

/* A ByteLevel step: no prefix space; *use_regex its use_regex (default true). */
static const char *byte_level(const cJSON *o, bool *use_regex)
{
	static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex", NULL};
	bool ok = true;
	if (!only_keys(o, keys))
		return "its ByteLevel step has fields qtk does not know";
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(o, "add_prefix_space");
	bool prefix = opt_bool(o, "add_prefix_space", false, &ok);
	(void)opt_bool(o, "trim_offsets", true, &ok); /* offsets only: no effect on the ids */
	*use_regex = opt_bool(o, "use_regex", true, &ok);
	if (!ok || !ap)
		return "its ByteLevel step's flags are missing or not booleans";
	if (prefix)
		return "its ByteLevel step adds a prefix space (llama.cpp does not)";
	return NULL;
}

/* A Split step: Regex pattern, Isolated, not inverted; *re the pattern. */
static const char *split_step(const cJSON *o, const char **re)
{
	static const char *const keys[] = {"type", "pattern", "behavior", "invert", NULL};
	static const char *const pkeys[] = {"Regex", NULL};
	bool ok = true;
	if (!only_keys(o, keys))
		return "its Split step has fields qtk does not know";
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
	const cJSON *r = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "Regex") : NULL;
	if (!r || !only_keys(p, pkeys) || !cJSON_IsString(r))
		return "its Split pattern is not one Regex string";
	const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "behavior");
	if (!cJSON_IsString(b) || strcmp(b->valuestring, "Isolated") != 0)
		return "its Split behavior is not Isolated";
	if (opt_bool(o, "invert", false, &ok) || !ok)
		return "its Split is inverted or its invert flag is not a boolean";
	*re = r->valuestring;
	return NULL;
}

/* Reduce root to a pre_shape. Errors that make the file unusable (wrong JSON
 * types where tokenizer.json has fixed ones) return QTK_E_DATA; shapes qtk
 * cannot name set s->why. */
static int pre_reduce(const cJSON *root, pre_shape *s, qtk_err *err)
{
	memset(s, 0, sizeof *s);
	if (!cJSON_IsObject(root))
		return bpe_bad(err, "the top level is not an object");
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
	if (!pt || cJSON_IsNull(pt))
		return qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, "pre_tokenizer",
				   "no pre_tokenizer: qtk cannot name tokenizer.ggml.pre without one");
	if (!cJSON_IsObject(pt))
		return qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, "pre_tokenizer",
				   "pre_tokenizer is not an object");
	shape_type(s, pt);
	if (is_type(pt, "ByteLevel")) {
		bool use_regex = false;
		s->why = byte_level(pt, &use_regex);
		if (!s->why && !use_regex)
			s->why = "a lone ByteLevel without its regex splits nothing";
	} else if (is_type(pt, "Sequence")) {
		static const char *const keys[] = {"type", "pretokenizers", NULL};
		const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
		if (!cJSON_IsArray(list))
			return qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, "pre_tokenizer",
					   "pre_tokenizer.pretokenizers is not an array");
		const cJSON *st;
		int n = 0;
		shape_cat(s, "[");
		cJSON_ArrayForEach(st, list)
		{
			if (n == 6) {
				shape_cat(s, ", ...");
				break;
			}
			shape_cat(s, n++ ? ", " : "");
			shape_type(s, st);
		}
		shape_cat(s, "]");
		const cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
		bool use_regex = true;
		if (!only_keys(pt, keys))
			s->why = "its Sequence has fields qtk does not know";
		else if (cJSON_GetArraySize(list) != 2 || !is_type(a, "Split") || !is_type(b, "ByteLevel"))
			s->why = "qtk knows only the steps Split then ByteLevel";
		else if (!(s->why = split_step(a, &s->split_re)) && !(s->why = byte_level(b, &use_regex)) && use_regex)
			s->why = "its ByteLevel step applies its own regex after the Split";
		s->has_split = true;
	} else
		s->why = "qtk knows only ByteLevel and Sequence[Split, ByteLevel] pre-tokenizers";
	/* the normalizer: none or NFC */
	const cJSON *no = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
	static const char *const nkeys[] = {"type", NULL};
	if (no && !cJSON_IsNull(no)) {
		if (is_type(no, "NFC") && only_keys(no, nkeys))
			s->nfc = true;
		else if (!s->why)
			s->why = "its normalizer is neither absent nor NFC";
	}
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
	bool ok = true;
	if (cJSON_IsObject(model))
		s->ignore_merges = opt_bool(model, "ignore_merges", false, &ok);
	if (!ok)
		return qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, "model.ignore_merges",
				   "model.ignore_merges is not a boolean");
	return 0;
}

int qtk_bpe_identify_pre(const cJSON *root, const char **name, qtk_err *err)
{
	*name = NULL;
	pre_shape s;
	int rc = pre_reduce(root, &s, err);
	if (rc)
		return rc;
	const pre_rule *near = NULL;
	for (size_t i = 0; !s.why && i < NPRE_RULES; i++) {
		const pre_rule *r = &pre_rules[i];
		if (s.has_split != (r->split_re != NULL) || (r->split_re && strcmp(r->split_re, s.split_re) != 0))
			continue;
		if (r->nfc == s.nfc && r->ignore_merges == s.ignore_merges) {
			*name = r->name;
			return 0;
		}
		near = r;
	}
	char why[160];
	if (s.why)
		snprintf(why, sizeof why, "%s", s.why);
	else if (near)
		snprintf(why, sizeof why, "the %s pre-tokenizer, but %s", near->models,
			 near->nfc != s.nfc ? (s.nfc ? "with an NFC normalizer" : "without the NFC normalizer")
					    : (s.ignore_merges ? "with model.ignore_merges" : "without model.ignore_merges"));
	else
		snprintf(why, sizeof why, "its Split regex is none of the known ones");
	char known[192] = "";
	for (size_t i = 0; i < NPRE_RULES; i++) {
		size_t k = strlen(known);
		snprintf(known + k, sizeof known - k, "%s%s (%s)", i ? ", " : "", pre_rules[i].name, pre_rules[i].models);
	}
	return qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, "pre_tokenizer",
			   "cannot name tokenizer.ggml.pre for %s: %s; recognised: %s",
			   s.found, why, known);
}

int qtk_bpe_hf_vocab(const qtk_model *hf, const char *pre, uint64_t n_vocab, qtk_model *meta,
		 qtk_str **merges, size_t *nmerges, qtk_err *err)
{
	*merges = NULL;
	*nmerges = 0;
	const qtk_blob *b = qtk_blob_find(hf, "tokenizer.json");
	if (!b)
		return bpe_bad(err, "missing");
	if (b->len > QTK_CAP_JSON)
		return bpe_bad(err, "too large");
	qtk_json_doc d = {0};
	int rc = qtk_json_parse((const char *)b->data, b->len, 0, "tokenizer.json", 0, err, &d);
	if (rc)
		return rc;
	bpe_ent *ents = NULL;
	qtk_str *toks = NULL;
	uint8_t *types = NULL;
	size_t n = 0;
	const cJSON *model = cJSON_IsObject(d.root) ? cJSON_GetObjectItemCaseSensitive(d.root, "model") : NULL;
	const cJSON *mt = model ? cJSON_GetObjectItemCaseSensitive(model, "type") : NULL;
	const cJSON *vocab_j = model ? cJSON_GetObjectItemCaseSensitive(model, "vocab") : NULL;
	const cJSON *bf = model ? cJSON_GetObjectItemCaseSensitive(model, "byte_fallback") : NULL;
	const cJSON *added = cJSON_IsObject(d.root) ? cJSON_GetObjectItemCaseSensitive(d.root, "added_tokens") : NULL;
	if (!cJSON_IsObject(model) || !cJSON_IsString(mt) || strcmp(mt->valuestring, "BPE") != 0) {
		rc = bpe_bad(err, "model is not a BPE model");
		goto out;
	}
	if (cJSON_IsTrue(bf)) {
		rc = bpe_bad(err, "a SentencePiece-style BPE (byte_fallback) without tokenizer.model is not supported");
		goto out;
	}
	if (!cJSON_IsObject(vocab_j)) {
		rc = bpe_bad(err, "model.vocab is not an object");
		goto out;
	}
	if (added && !cJSON_IsArray(added)) {
		rc = bpe_bad(err, "added_tokens is not an array");
		goto out;
	}
	/* the size: config.json's vocab_size, else the number of entries */
	uint64_t maxid = 0, count = 0;
	const cJSON *it;
	for (int pass = 0; pass < 2; pass++) {
		const cJSON *list = pass ? added : vocab_j;
		cJSON_ArrayForEach(it, list)
		{
			uint64_t id;
			const cJSON *idj = pass ? cJSON_GetObjectItemCaseSensitive(it, "id") : it;
			const cJSON *c = pass ? cJSON_GetObjectItemCaseSensitive(it, "content") : NULL;
			if (!idj || !qtk_json_u64(idj, &id) || id >= BPE_CAP_VOCAB || (pass && !cJSON_IsString(c))) {
				rc = bpe_bad(err, pass ? "an added token has a bad id or no content"
						       : "a vocabulary id is not an integer in 0..2^24");
				goto out;
			}
			maxid = id > maxid ? id : maxid;
			count++;
		}
	}
	n = n_vocab ? (size_t)n_vocab : count ? (size_t)maxid + 1 : 0;
	if (count && maxid >= n) {
		rc = qtk_err_set(err, QTK_E_DATA, "tokenizer.json", -1, "vocab_size",
				 "tokenizer.json has id %" PRIu64 " but the vocabulary size is %zu", maxid, n);
		goto out;
	}
	ents = qtk_calloc(n ? n : 1, sizeof *ents);
	toks = qtk_calloc(n ? n : 1, sizeof *toks);
	types = qtk_calloc(n ? n : 1, 4);
	if (!ents || !toks || !types) {
		rc = bpe_oom(err);
		goto out;
	}
	cJSON_ArrayForEach(it, vocab_j)
	{
		uint64_t id;
		qtk_json_u64(it, &id);
		if (ents[id].tok) {
			rc = bpe_bad(err, "two tokens share an id");
			goto out;
		}
		ents[id].tok = it->string;
	}
	cJSON_ArrayForEach(it, added)
	{
		uint64_t id;
		qtk_json_u64(cJSON_GetObjectItemCaseSensitive(it, "id"), &id);
		const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
		if (ents[id].tok && strcmp(ents[id].tok, c) != 0) {
			rc = bpe_bad(err, "an added token's id belongs to another token");
			goto out;
		}
		ents[id].tok = c;
		ents[id].added = true;
		ents[id].special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special"));
	}
	for (size_t i = 0; i < n; i++) {
		char pad[32];
		const char *t = ents[i].tok;
		int ty = 1;
		char *own = NULL;
		if (!t) {
			snprintf(pad, sizeof pad, "[PAD%zu]", i);
			t = pad;
			ty = 5;
		} else if (ents[i].added) {
			if (ents[i].special || bpe_looks_special(t))
				ty = 3;
			else {
				ty = 4;
				size_t l = strlen(t);
				own = qtk_malloc(l + 1);
				if (!own) {
					rc = bpe_oom(err);
					goto out;
				}
				char *w = own;
				for (size_t k = 0; k < l;) {
					if (k + 3 <= l && !memcmp(t + k, "\xE2\x96\x81", 3)) {
						*w++ = ' ';
						k += 3;
					} else
						*w++ = t[k++];
				}
				*w = 0;
				t = own;
			}
		}
		toks[i].s = own ? own : qtk_strdup(t);
		if (!toks[i].s) {
			rc = bpe_oom(err);
			goto out;
		}
		toks[i].len = strlen(toks[i].s);
		qtk_wr32(types + 4 * i, (uint32_t)ty);
	}
	/* merges */
	const cJSON *mg = cJSON_GetObjectItemCaseSensitive(model, "merges");
	size_t nm = cJSON_IsArray(mg) ? (size_t)cJSON_GetArraySize(mg) : 0;
	if (nm) {
		*merges = qtk_calloc(nm, sizeof **merges);
		if (!*merges) {
			rc = bpe_oom(err);
			goto out;
		}
		size_t k = 0;
		cJSON_ArrayForEach(it, mg)
		{
			char *s = NULL;
			if (cJSON_IsString(it))
				s = qtk_strdup(it->valuestring);
			else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 &&
				 cJSON_IsString(cJSON_GetArrayItem(it, 0)) && cJSON_IsString(cJSON_GetArrayItem(it, 1)))
				s = join_pair(cJSON_GetArrayItem(it, 0)->valuestring, cJSON_GetArrayItem(it, 1)->valuestring);
			else {
				*nmerges = k;
				rc = bpe_bad(err, "unknown merges format");
				goto out;
			}
			if (!s) {
				*nmerges = k;
				rc = bpe_oom(err);
				goto out;
			}
			(*merges)[k].s = s;
			(*merges)[k].len = strlen(s);
			k++;
		}
		*nmerges = k;
	}
	/* the vocabulary is checked first: its errors are the more basic ones */
	if (!pre && (rc = qtk_bpe_identify_pre(d.root, &pre, err)))
		goto out;
	qtk_model_set_kv_str(meta, "tokenizer.ggml.model", "gpt2");
	if (qtk_model_set_kv_str(meta, "tokenizer.ggml.pre", pre)) {
		rc = bpe_oom(err);
		goto out;
	}
	qtk_kv *kt = qtk_model_add_kv(meta, "tokenizer.ggml.tokens");
	if (!kt) {
		rc = bpe_oom(err);
		goto out;
	}
	kt->val.type = QTK_V_ARR;
	kt->val.elem = QTK_V_STR;
	kt->val.n = n;
	kt->val.arr = toks;
	toks = NULL;
	qtk_kv *ky = qtk_model_add_kv(meta, "tokenizer.ggml.token_type");
	if (!ky) {
		rc = bpe_oom(err);
		goto out;
	}
	ky->val.type = QTK_V_ARR;
	ky->val.elem = QTK_V_I32;
	ky->val.n = n;
	ky->val.arr = types;
	types = NULL;
out:
	if (rc) {
		free_strs(*merges, *nmerges);
		*merges = NULL;
		*nmerges = 0;
	}
	free_strs(toks, n);
	qtk_free(types);
	qtk_free(ents);
	qtk_json_doc_free(&d);
	return rc;
}

/* ---- GGUF -> tokenizer.json ------------------------------------------------ */

static void bpe_jstr(qtk_buf *b, const char *s, size_t n)
{
	qtk_json_put_str_as(b, s, n, QTK_JSON_RAW | QTK_JSON_ESC_DEL);
}

int qtk_bpe_gguf_tokenizer_json(const qtk_model *g, qtk_buf *b, qtk_err *err)
{
	const qtk_kv *tk = qtk_kv_find(g, "tokenizer.ggml.tokens");
	const qtk_kv *ty = qtk_kv_find(g, "tokenizer.ggml.token_type");
	const qtk_kv *mk = qtk_kv_find(g, "tokenizer.ggml.merges");
	const qtk_kv *pk = qtk_kv_find(g, "tokenizer.ggml.pre");
	if (!tk || tk->val.type != QTK_V_ARR || tk->val.elem != QTK_V_STR)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.tokens", "GGUF key 'tokenizer.ggml.tokens' is missing or not a string array");
	size_t n = (size_t)tk->val.n;
	if (ty && (ty->val.type != QTK_V_ARR || ty->val.elem != QTK_V_I32 || ty->val.n != n))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.token_type",
				   "GGUF key 'tokenizer.ggml.token_type' must be an i32 array as long as the tokens");
	if (mk && (mk->val.type != QTK_V_ARR || mk->val.elem != QTK_V_STR))
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.merges",
				   "GGUF key 'tokenizer.ggml.merges' must be a string array");
	const qtk_str *t = tk->val.arr;
	const char *pre = pk && pk->val.type == QTK_V_STR ? pk->val.v.str.s : "";
	qtk_buf_puts(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		int32_t k = ty ? (int32_t)qtk_rd32((const uint8_t *)ty->val.arr + 4 * i) : 1;
		if (k != 3 && k != 4)
			continue;
		qtk_buf_printf(b, "%s\n    {\"id\": %zu, \"content\": ", first ? "" : ",", i);
		bpe_jstr(b, t[i].s, (size_t)t[i].len);
		qtk_buf_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
				  "\"normalized\": %s, \"special\": %s}", k == 3 ? "false" : "true", k == 3 ? "true" : "false");
		first = false;
	}
	qtk_buf_puts(b, first ? "],\n" : "\n  ],\n");
	/* the shape qtk_bpe_identify_pre names pre by (names it does not know: GPT-2's) */
	const pre_rule *rule = NULL;
	for (size_t i = 0; i < NPRE_RULES && !rule; i++)
		if (!strcmp(pre, pre_rules[i].name))
			rule = &pre_rules[i];
	const char *re = rule ? rule->split_re : NULL;
	qtk_buf_puts(b, "  \"normalizer\": ");
	qtk_buf_puts(b, rule && rule->nfc ? "{\"type\": \"NFC\"},\n" : "null,\n");
	if (re) {
		qtk_buf_puts(b, "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
				"\"pattern\": {\"Regex\": ");
		bpe_jstr(b, re, strlen(re));
		qtk_buf_puts(b, "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
				"\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}]},\n");
	} else
		qtk_buf_puts(b, "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
				"\"trim_offsets\": true, \"use_regex\": true},\n");
	qtk_buf_puts(b, "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
			"\"trim_offsets\": false, \"use_regex\": false},\n"
			"  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, "
			"\"use_regex\": false},\n"
			"  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
			"\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": false, "
			"\"byte_fallback\": false, \"ignore_merges\": ");
	qtk_buf_puts(b, rule && rule->ignore_merges ? "true" : "false");
	qtk_buf_puts(b, ",\n    \"vocab\": {");
	first = true;
	qtk_strset seen = {0};
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		int32_t k = ty ? (int32_t)qtk_rd32((const uint8_t *)ty->val.arr + 4 * i) : 1;
		if (k == 3 || k == 4)
			continue;
		char pad[32];
		snprintf(pad, sizeof pad, "[PAD%zu]", i);
		if (k == 5 && !strcmp(t[i].s, pad))
			continue;
		int a = qtk_strset_add(&seen, t[i].s);
		if (a < 0)
			rc = bpe_oom(err);
		else if (a == 0)
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.tokens",
					 "token %zu appears twice in the vocabulary", i);
		else {
			qtk_buf_puts(b, first ? "\n      " : ",\n      ");
			bpe_jstr(b, t[i].s, (size_t)t[i].len);
			qtk_buf_printf(b, ": %zu", i);
			first = false;
		}
	}
	qtk_strset_free(&seen);
	if (rc)
		return rc;
	qtk_buf_puts(b, "\n    },\n    \"merges\": [");
	first = true;
	const qtk_str *m = mk ? mk->val.arr : NULL;
	for (size_t i = 0; mk && i < (size_t)mk->val.n; i++) {
		qtk_buf_puts(b, first ? "\n      " : ",\n      ");
		bpe_jstr(b, m[i].s, (size_t)m[i].len);
		first = false;
	}
	qtk_buf_puts(b, "\n    ]\n  }\n}\n");
	return b->failed ? bpe_oom(err) : 0;
}
