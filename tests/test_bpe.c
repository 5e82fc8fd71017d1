/* test_bpe.c - tokenizer.ggml.pre named from tokenizer.json's own pre_tokenizer
 * (qtk_bpe_identify_pre): the recognised shapes, near misses and hostile
 * definitions, all in memory; and the HF -> GGUF path with only a tokenizer.json. */
#include "t.h"
#include "family/hfmap.h"
#include "json.h"
#include <stdarg.h>

/* The Split patterns as a tokenizer.json carries them (after JSON unescaping). */
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
				"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
			       "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char BL_SPLIT[] =
	"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}";
static const char BL_QWEN[] =
	"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}";
static const char BL_GPT2[] =
	"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}";

/* A JSON string literal of s. */
static char *jq(const char *s)
{
	qtk_buf b = {0};
	qtk_json_put_str(&b, s, strlen(s));
	qtk_buf_putc(&b, 0);
	return (char *)b.p;
}

/* {"type": "Split", "pattern": {"Regex": re}, "behavior": beh, "invert": false} */
static char *split(const char *re, const char *beh)
{
	char *q = jq(re);
	qtk_buf b = {0};
	qtk_buf_printf(&b, "{\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"%s\", \"invert\": false}",
		       q, beh);
	qtk_buf_putc(&b, 0);
	free(q);
	return (char *)b.p;
}

/* Sequence of the steps given (NULL-terminated). */
static char *seq(const char *first, ...)
{
	qtk_buf b = {0};
	va_list ap;
	va_start(ap, first);
	qtk_buf_puts(&b, "{\"type\": \"Sequence\", \"pretokenizers\": [");
	for (const char *s = first; s; s = va_arg(ap, const char *))
		qtk_buf_printf(&b, "%s%s", s == first ? "" : ", ", s);
	va_end(ap);
	qtk_buf_puts(&b, "]}");
	qtk_buf_putc(&b, 0);
	return (char *)b.p;
}

/* A whole tokenizer.json: normalizer (NULL: no key), pre_tokenizer (NULL: no key; freed
 * here), model extras. */
static char *tokjson(const char *norm, char *pre, const char *model_extra)
{
	qtk_buf b = {0};
	qtk_buf_puts(&b, "{\"version\": \"1.0\"");
	if (norm)
		qtk_buf_printf(&b, ", \"normalizer\": %s", norm);
	if (pre)
		qtk_buf_printf(&b, ", \"pre_tokenizer\": %s", pre);
	qtk_buf_printf(&b, ", \"model\": {\"type\": \"BPE\", \"byte_fallback\": false%s, \"vocab\": {\"a\": 0}}}",
		       model_extra ? model_extra : "");
	qtk_buf_putc(&b, 0);
	free(pre);
	return (char *)b.p;
}

/* Parse text strictly (as bpe.c does) and identify; *name and e filled. */
static int ident(const char *text, const char **name, qtk_err *e)
{
	qtk_json_doc d = {0};
	qtk_err_clear(e);
	*name = "unset";
	int rc = qtk_json_parse(text, strlen(text), 0, "tokenizer.json", 0, e, &d);
	if (!rc)
		rc = qtk_bpe_identify_pre(d.root, name, e);
	else
		*name = NULL;
	qtk_json_doc_free(&d);
	return rc;
}

static void want_name(const char *what, char *text, const char *want)
{
	const char *name;
	qtk_err e;
	int rc = ident(text, &name, &e);
	CHECK(rc == 0 && name && !strcmp(name, want), "%s: rc %d name %s, want %s (%s)", what, rc, name ? name : "NULL",
	      want, e.msg);
	free(text);
}

/* Refused with QTK_E_DATA, naming tokenizer.json (as the file, so in the message the
 * programs show); `has` must appear in the message when not NULL. */
static void want_refused(const char *what, char *text, const char *has)
{
	const char *name;
	qtk_err e;
	int rc = ident(text, &name, &e);
	CHECK(rc == QTK_E_DATA && name == NULL, "%s: rc %d name %s", what, rc, name ? name : "NULL");
	char shown[4096];
	qtk_err_format(&e, "qconvert", shown, sizeof shown);
	CHECK(!strcmp(e.file, "tokenizer.json") && strstr(shown, "tokenizer.json"), "%s: message names tokenizer.json: %s",
	      what, shown);
	CHECK(!has || strstr(e.msg, has), "%s: message has '%s': %s", what, has, e.msg);
	free(text);
}

static const char IGN[] = ", \"ignore_merges\": true";

static void test_recognised(void)
{
	char *s = split(RE_LLAMA3, "Isolated");
	want_name("llama 3", tokjson("null", seq(s, BL_SPLIT, NULL), IGN), "llama-bpe");
	want_name("llama 3, no normalizer key", tokjson(NULL, seq(s, BL_SPLIT, NULL), IGN), "llama-bpe");
	/* trim_offsets changes offsets only */
	want_name("llama 3, trim_offsets false", tokjson("null", seq(s, BL_QWEN, NULL), IGN), "llama-bpe");
	free(s);
	s = split(RE_QWEN2, "Isolated");
	want_name("qwen2", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), ", \"ignore_merges\": false"), "qwen2");
	want_name("qwen2, no ignore_merges key", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), NULL), "qwen2");
	free(s);
	want_name("gpt-2", tokjson("null", strdup(BL_GPT2), NULL), "gpt-2");
	want_name("gpt-2, use_regex by default",
		  tokjson(NULL, strdup("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true}"),
			  NULL),
		  "gpt-2");
}

static void test_near_misses(void)
{
	/* the Llama 3 regex one character off: {1,2} for {1,3} */
	char re[sizeof RE_LLAMA3];
	memcpy(re, RE_LLAMA3, sizeof re);
	char *p = strstr(re, "{1,3}");
	p[3] = '2';
	char *s = split(re, "Isolated");
	want_refused("llama 3 regex {1,2}", tokjson("null", seq(s, BL_SPLIT, NULL), IGN), "regex");
	free(s);
	/* the Qwen2 regex with \p{N}+ */
	qtk_buf b = {0};
	const char *q = strstr(RE_QWEN2, "|\\p{N}|");
	qtk_buf_put(&b, RE_QWEN2, (size_t)(q - RE_QWEN2));
	qtk_buf_printf(&b, "|\\p{N}+|%s", q + 7);
	qtk_buf_putc(&b, 0);
	s = split((char *)b.p, "Isolated");
	want_refused("qwen2 regex \\p{N}+", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), NULL), "regex");
	free(s);
	qtk_buf_free(&b);
	/* a trailing space */
	char re2[sizeof RE_QWEN2 + 1];
	snprintf(re2, sizeof re2, "%s ", RE_QWEN2);
	s = split(re2, "Isolated");
	want_refused("qwen2 regex + space", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), NULL), "regex");
	free(s);
	/* a substring of the real one is not the real one */
	char re3[sizeof RE_LLAMA3];
	snprintf(re3, sizeof re3, "%.*s", (int)(sizeof RE_LLAMA3 - 5), RE_LLAMA3);
	s = split(re3, "Isolated");
	want_refused("llama 3 regex cut short", tokjson("null", seq(s, BL_SPLIT, NULL), IGN), "regex");
	free(s);

	s = split(RE_LLAMA3, "Isolated");
	want_refused("llama 3 without ignore_merges", tokjson("null", seq(s, BL_SPLIT, NULL), NULL), "Llama 3");
	want_refused("llama 3 with NFC", tokjson("{\"type\": \"NFC\"}", seq(s, BL_SPLIT, NULL), IGN), "NFC");
	want_refused("extra step", tokjson("null", seq(s, BL_SPLIT, "{\"type\": \"Digits\", \"individual_digits\": true}", NULL), IGN),
		     "Sequence[Split, ByteLevel, Digits]");
	want_refused("missing ByteLevel", tokjson("null", seq(s, NULL), IGN), "Sequence[Split]");
	want_refused("steps reversed", tokjson("null", seq(BL_SPLIT, s, NULL), IGN), "Split then ByteLevel");
	want_refused("ByteLevel with its regex too", tokjson("null", seq(s, BL_GPT2, NULL), IGN), "regex");
	want_refused("prefix space",
		     tokjson("null",
			     seq(s, "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": false}", NULL), IGN),
		     "prefix space");
	want_refused("ByteLevel flag missing", tokjson("null", seq(s, "{\"type\": \"ByteLevel\", \"use_regex\": false}", NULL), IGN),
		     "ByteLevel");
	want_refused("ByteLevel unknown field",
		     tokjson("null",
			     seq(s, "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false, \"x\": 1}",
				 NULL),
			     IGN),
		     "fields");
	char *inner = seq(s, BL_SPLIT, NULL);
	want_refused("nested sequence", tokjson("null", seq(inner, NULL), IGN), "Sequence[Sequence]");
	free(inner);
	want_refused("normalizer NFKC", tokjson("{\"type\": \"NFKC\"}", seq(s, BL_SPLIT, NULL), IGN), "normalizer");
	want_refused("normalizer Sequence[NFC]",
		     tokjson("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}]}", seq(s, BL_SPLIT, NULL), IGN),
		     "normalizer");
	free(s);
	s = split(RE_QWEN2, "Isolated");
	want_refused("qwen2 without NFC", tokjson("null", seq(s, BL_QWEN, NULL), NULL), "Qwen2");
	want_refused("qwen2 with ignore_merges", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), IGN), "ignore_merges");
	free(s);
	s = split(RE_QWEN2, "Removed");
	want_refused("split behavior Removed", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), NULL), "Isolated");
	free(s);
	char *q2 = jq(RE_QWEN2);
	char inv[1024], str[1024], unk[1024];
	snprintf(inv, sizeof inv, "{\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"Isolated\", \"invert\": true}", q2);
	snprintf(str, sizeof str, "{\"type\": \"Split\", \"pattern\": {\"String\": %s}, \"behavior\": \"Isolated\", \"invert\": false}", q2);
	snprintf(unk, sizeof unk, "{\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"Isolated\", \"x\": 0}", q2);
	free(q2);
	want_refused("split inverted", tokjson("{\"type\": \"NFC\"}", seq(inv, BL_QWEN, NULL), NULL), "invert");
	want_refused("string pattern", tokjson("{\"type\": \"NFC\"}", seq(str, BL_QWEN, NULL), NULL), "Regex");
	want_refused("split unknown field", tokjson("{\"type\": \"NFC\"}", seq(unk, BL_QWEN, NULL), NULL), "fields");

	want_refused("gpt-2 with prefix space",
		     tokjson("null", strdup("{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": true}"), NULL),
		     "prefix space");
	want_refused("lone ByteLevel without regex", tokjson("null", strdup(BL_SPLIT), NULL), "splits nothing");
	want_refused("gpt-2 with ignore_merges", tokjson("null", strdup(BL_GPT2), IGN), "GPT-2");
	want_refused("starcoder-like",
		     tokjson("null", seq("{\"type\": \"Digits\", \"individual_digits\": true}", BL_GPT2, NULL), NULL),
		     "Sequence[Digits, ByteLevel]");
	want_refused("metaspace",
		     tokjson("null", strdup("{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"always\"}"),
			     NULL),
		     "Metaspace");
	/* the message lists what is recognised */
	want_refused("whitespace", tokjson("null", strdup("{\"type\": \"Whitespace\"}"), NULL), "llama-bpe (Llama 3)");
}

static void test_hostile(void)
{
	want_refused("no pre_tokenizer", tokjson("null", NULL, NULL), "no pre_tokenizer");
	want_refused("null pre_tokenizer", tokjson("null", strdup("null"), NULL), "no pre_tokenizer");
	want_refused("pre_tokenizer a string", tokjson("null", strdup("\"ByteLevel\""), NULL), "not an object");
	want_refused("pre_tokenizer an array", tokjson("null", strdup("[{\"type\": \"ByteLevel\"}]"), NULL), "not an object");
	want_refused("pre_tokenizer a number", tokjson("null", strdup("7"), NULL), "not an object");
	want_refused("pretokenizers an object",
		     tokjson("null", strdup("{\"type\": \"Sequence\", \"pretokenizers\": {\"a\": 1}}"), NULL), "not an array");
	want_refused("pretokenizers null", tokjson("null", strdup("{\"type\": \"Sequence\", \"pretokenizers\": null}"), NULL),
		     "not an array");
	want_refused("pretokenizers absent", tokjson("null", strdup("{\"type\": \"Sequence\"}"), NULL), "not an array");
	want_refused("type not a string", tokjson("null", strdup("{\"type\": 3}"), NULL), "for ?:");
	want_refused("no type", tokjson("null", strdup("{}"), NULL), NULL);
	want_refused("regex a number",
		     tokjson("{\"type\": \"NFC\"}",
			     seq("{\"type\": \"Split\", \"pattern\": {\"Regex\": 5}, \"behavior\": \"Isolated\", \"invert\": false}",
				 BL_QWEN, NULL),
			     NULL),
		     "Regex");
	want_refused("regex null",
		     tokjson("{\"type\": \"NFC\"}",
			     seq("{\"type\": \"Split\", \"pattern\": {\"Regex\": null}, \"behavior\": \"Isolated\"}", BL_QWEN, NULL),
			     NULL),
		     "Regex");
	want_refused("pattern a string",
		     tokjson("{\"type\": \"NFC\"}",
			     seq("{\"type\": \"Split\", \"pattern\": \"x\", \"behavior\": \"Isolated\"}", BL_QWEN, NULL), NULL),
		     "Regex");
	want_refused("steps not objects", tokjson("null", seq("1", "\"ByteLevel\"", NULL), NULL), "Sequence[?, ?]");
	want_refused("ignore_merges a string", tokjson("null", strdup(BL_GPT2), ", \"ignore_merges\": \"yes\""),
		     "ignore_merges");
	want_refused("use_regex a string",
		     tokjson("null", strdup("{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": \"no\"}"), NULL),
		     "boolean");
	want_refused("root an array", strdup("[1, 2]"), "not an object");
	want_refused("duplicate pre_tokenizer key",
		     strdup("{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"pre_tokenizer\": {\"type\": \"Whitespace\"}}"), NULL);

	/* deep nesting: within the parser's limit refused by shape, beyond it by the parser */
	for (int depth = 100; depth <= 400; depth += 300) {
		qtk_buf b = {0};
		for (int i = 0; i < depth; i++)
			qtk_buf_puts(&b, "{\"type\": \"Sequence\", \"pretokenizers\": [");
		qtk_buf_puts(&b, BL_GPT2);
		for (int i = 0; i < depth; i++)
			qtk_buf_puts(&b, "]}");
		qtk_buf_putc(&b, 0);
		want_refused(depth == 100 ? "nested 100 deep" : "nested 400 deep", tokjson("null", (char *)b.p, NULL), NULL);
	}
	/* many steps: the description is cut */
	{
		qtk_buf b = {0};
		qtk_buf_puts(&b, "{\"type\": \"Sequence\", \"pretokenizers\": [");
		for (int i = 0; i < 5000; i++)
			qtk_buf_printf(&b, "%s%s", i ? ", " : "", BL_GPT2);
		qtk_buf_puts(&b, "]}");
		qtk_buf_putc(&b, 0);
		want_refused("5000 steps", tokjson("null", (char *)b.p, NULL), ", ...]");
	}
	/* a huge regex and a huge type name: refused, message bounded */
	{
		size_t n = 1u << 20;
		char *big = malloc(n + 1);
		memset(big, 'x', n);
		big[n] = 0;
		char *s = split(big, "Isolated");
		want_refused("1 MiB regex", tokjson("{\"type\": \"NFC\"}", seq(s, BL_QWEN, NULL), NULL), "regex");
		free(s);
		char *q = jq(big);
		qtk_buf b = {0};
		qtk_buf_printf(&b, "{\"type\": %s}", q);
		qtk_buf_putc(&b, 0);
		free(q);
		want_refused("1 MiB type name", tokjson("null", (char *)b.p, NULL), "xxxx");
		free(big);
	}
	/* control characters and bidi in a type name are carried (the sanitiser shows them) */
	want_refused("control chars in type", tokjson("null", strdup("{\"type\": \"A\\u001b[31m\\u202eB\"}"), NULL), NULL);
}

/* ---- HF -> GGUF with only a tokenizer.json (Llama 3 style) ------------------ */

static const char l3_cfg[] =
	"{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 64,"
	" \"intermediate_size\": 128, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
	" \"num_key_value_heads\": 2, \"vocab_size\": 8, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0,"
	" \"max_position_embeddings\": 256, \"bos_token_id\": 5, \"eos_token_id\": [6, 7]}";
static const char l3_tc[] =
	"{\"bos_token\": \"<|begin_of_text|>\", \"eos_token\": \"<|eot_id|>\", \"clean_up_tokenization_spaces\": true,"
	" \"chat_template\": \"{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}{% endfor %}\","
	" \"tokenizer_class\": \"PreTrainedTokenizerFast\"}";

static char *l3_tokjson(const char *pre)
{
	qtk_buf b = {0};
	qtk_buf_printf(&b,
		       "{\"version\": \"1.0\", \"added_tokens\": ["
		       "{\"id\": 5, \"content\": \"<|begin_of_text|>\", \"special\": true},"
		       "{\"id\": 6, \"content\": \"<|end_of_text|>\", \"special\": true},"
		       "{\"id\": 7, \"content\": \"<|eot_id|>\", \"special\": true}],"
		       " \"normalizer\": null, \"pre_tokenizer\": %s,"
		       " \"model\": {\"type\": \"BPE\", \"byte_fallback\": false, \"ignore_merges\": true,"
		       " \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3, \"\\u0120a\": 4},"
		       " \"merges\": [\"a b\", \"\\u0120 a\"]}}",
		       pre);
	qtk_buf_putc(&b, 0);
	return (char *)b.p;
}

static qtk_model *l3_model(const char *tok, const char *tc)
{
	qtk_model *hf = qtk_model_new();
	qtk_model_add_blob(hf, "config.json", l3_cfg, strlen(l3_cfg));
	qtk_model_add_blob(hf, "tokenizer.json", tok, strlen(tok));
	if (tc)
		qtk_model_add_blob(hf, "tokenizer_config.json", tc, strlen(tc));
	return hf;
}

static const char *kv_s(const qtk_model *m, const char *k)
{
	const qtk_kv *kv = qtk_kv_find(m, k);
	return kv && kv->val.type == QTK_V_STR ? kv->val.v.str.s : NULL;
}

static void test_hf_llama3(void)
{
	char *s = split(RE_LLAMA3, "Isolated");
	char *pre = seq(s, BL_SPLIT, NULL);
	char *tok = l3_tokjson(pre);
	qtk_model *hf = l3_model(tok, l3_tc);
	qtk_model *meta = qtk_model_new();
	qtk_hfmap *m = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	int rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
	CHECK(rc == 0 && m, "llama 3 with only tokenizer.json converts: %s", e.msg);
	if (!rc) {
		const char *tm = kv_s(meta, "tokenizer.ggml.model"), *tp = kv_s(meta, "tokenizer.ggml.pre");
		CHECK(tm && !strcmp(tm, "gpt2") && tp && !strcmp(tp, "llama-bpe"), "gpt2 / llama-bpe: %s / %s",
		      tm ? tm : "-", tp ? tp : "-");
		const qtk_kv *bos = qtk_kv_find(meta, "tokenizer.ggml.bos_token_id");
		const qtk_kv *eos = qtk_kv_find(meta, "tokenizer.ggml.eos_token_id");
		CHECK(bos && bos->val.v.u == 5, "bos from tokenizer_config.json's bos_token");
		CHECK(eos && eos->val.v.u == 7, "eos from tokenizer_config.json's eos_token (<|eot_id|>)");
		const char *ct = kv_s(meta, "tokenizer.chat_template");
		CHECK(ct && !strncmp(ct, "{{ bos_token }}", 15), "chat template copied");
		CHECK(!qtk_kv_find(meta, "tokenizer.ggml.add_bos_token"), "no add_bos_token when tokenizer_config has none");
		const qtk_kv *tk = qtk_kv_find(meta, "tokenizer.ggml.tokens"), *mg = qtk_kv_find(meta, "tokenizer.ggml.merges");
		CHECK(tk && tk->val.n == 8 && mg && mg->val.n == 2, "8 tokens, 2 merges");
		CHECK(qtk_hfmap_warning(m) == NULL, "no warning: %s", qtk_hfmap_warning(m));
		/* keys in llama.cpp's order: model, pre, tokens, token_type, merges, specials, template */
		size_t ip = meta->nkv, it = meta->nkv, ict = meta->nkv;
		for (size_t i = 0; i < meta->nkv; i++) {
			if (!strcmp(meta->kv[i].key, "tokenizer.ggml.pre"))
				ip = i;
			if (!strcmp(meta->kv[i].key, "tokenizer.ggml.tokens"))
				it = i;
			if (!strcmp(meta->kv[i].key, "tokenizer.chat_template"))
				ict = i;
		}
		CHECK(ip + 1 == it && it < ict && ict < meta->nkv, "key order");
	}
	qtk_hfmap_free(m);
	qtk_close(meta);
	qtk_close(hf);

	/* add_bos_token given: written */
	static const char tc_bos[] = "{\"bos_token\": \"<|begin_of_text|>\", \"add_bos_token\": true}";
	hf = l3_model(tok, tc_bos);
	meta = qtk_model_new();
	m = NULL;
	qtk_err_clear(&e);
	rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
	const qtk_kv *ab = qtk_kv_find(meta, "tokenizer.ggml.add_bos_token");
	CHECK(rc == 0 && ab && ab->val.type == QTK_V_BOOL && ab->val.v.u, "add_bos_token true written: %s", e.msg);
	qtk_hfmap_free(m);
	qtk_close(meta);
	qtk_close(hf);
	free(tok);
	free(pre);

	/* GGUF -> HF -> GGUF: the written tokenizer.json names the same pre-tokenizer */
	hf = l3_model((tok = l3_tokjson((pre = seq(s, BL_SPLIT, NULL)))), l3_tc);
	meta = qtk_model_new();
	m = NULL;
	qtk_err_clear(&e);
	rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
	qtk_model *back = qtk_model_new();
	qtk_hfmap *r = NULL;
	if (!rc) {
		qtk_model *g = qtk_model_new();
		for (size_t k = 0; k < meta->nkv; k++) {
			qtk_kv *kv = qtk_model_add_kv(g, meta->kv[k].key);
			qtk_value_copy(&kv->val, &meta->kv[k].val);
		}
		qtk_err_clear(&e);
		rc = qtk_hfmap_gguf_to_hf(g, back, &r, &e);
		CHECK(rc == 0, "gguf_to_hf: %s", e.msg);
		const qtk_blob *tb = qtk_blob_find(back, "tokenizer.json");
		const char *name = NULL;
		if (tb) {
			char *txt = strndup((const char *)tb->data, tb->len);
			rc = ident(txt, &name, &e);
			free(txt);
		}
		CHECK(tb && rc == 0 && name && !strcmp(name, "llama-bpe"), "written tokenizer.json reads back as llama-bpe: %s",
		      e.msg);
		qtk_close(g);
	}
	qtk_hfmap_free(r);
	qtk_close(back);
	qtk_hfmap_free(m);
	qtk_close(meta);
	qtk_close(hf);
	free(tok);
	free(pre);
	free(s);

	/* an unrecognised pre-tokenizer: refused, nothing half-made */
	tok = l3_tokjson("{\"type\": \"Whitespace\"}");
	hf = l3_model(tok, l3_tc);
	meta = qtk_model_new();
	m = NULL;
	qtk_err_clear(&e);
	rc = qtk_hfmap_hf_to_gguf(hf, meta, &m, &e);
	CHECK(rc == QTK_E_DATA && m == NULL && !strcmp(e.file, "tokenizer.json") && strstr(e.msg, "Whitespace") &&
		      strstr(e.msg, "recognised"),
	      "unknown pre refused: rc %d %s", rc, e.msg);
	qtk_close(meta);
	qtk_close(hf);
	free(tok);
}

int main(void)
{
	qtk_json_init();
	test_recognised();
	test_near_misses();
	test_hostile();
	test_hf_llama3();
	return T_DONE();
}
