/* audit.c - executable content and chat-template audit (audit.h). */
#include "record/audit.h"
#include "record/prov.h"
#include "internal.h"
#include "text.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Escape s[0..n) to printable ASCII into out (cap bytes), "..." when cut. */
static void esc(char *out, size_t cap, const char *s, size_t n)
{
	size_t used = qtk_text_escape(out, cap, s, n, QTK_TEXT_ASCII);
	if (used < n && cap > 4) {
		size_t l = strlen(out);
		if (l + 4 > cap)
			l = cap - 4;
		memcpy(out + l, "...", 4);
	}
}

static int add(qtk_audit *a, const char *kind, bool code, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int add(qtk_audit *a, const char *kind, bool code, const char *where, const char *fmt, ...)
{
	if (code)
		a->ncode++;
	if (a->n >= QTK_AUDIT_MAX) {
		a->dropped++;
		return 0;
	}
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		qtk_audit_finding *f = qtk_realloc(a->f, nc * sizeof *f);
		if (!f)
			return QTK_E_IO;
		a->f = f;
		a->cap = nc;
	}
	qtk_audit_finding *f = &a->f[a->n++];
	memset(f, 0, sizeof *f);
	snprintf(f->kind, sizeof f->kind, "%s", kind);
	f->code = code;
	esc(f->where, sizeof f->where, where, strlen(where));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof f->detail, fmt, ap);
	va_end(ap);
	return 0;
}

/* ---- files ---------------------------------------------------------------------------- */

static bool ends_ci(const char *s, const char *suf)
{
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && strcasecmp(s + n - k, suf) == 0;
}

static bool ends_any(const char *s, const char *const *sufs)
{
	for (; *sufs; sufs++)
		if (ends_ci(s, *sufs))
			return true;
	return false;
}

static bool starts_ci(const char *s, const char *pre) { return strncasecmp(s, pre, strlen(pre)) == 0; }

static const char *const pickle_ext[] = {".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib", NULL};
static const char *const python_ext[] = {".py", ".pyc", ".pyo", ".pyw", NULL};
static const char *const exec_ext[] = {".so", ".dll", ".dylib", ".exe", ".sh", ".bash", ".bat", ".cmd", ".ps1",
				       ".ipynb", ".h5", ".hdf5", ".keras", ".jar", NULL};
/* inert data: what a model directory may carry without vouching for code */
static const char *const data_ext[] = {".safetensors", ".gguf", ".qpk", ".json", ".sig", ".jinja", ".txt", ".md", ".model",
				       ".tiktoken", ".msgpack", ".onnx", ".imatrix", ".png", ".jpg", ".jpeg", ".gif",
				       ".svg", ".webp", ".csv", ".tsv", ".yaml", ".yml", ".zst", NULL};
static const char *const data_prefix[] = {"LICENSE", "LICENCE", "NOTICE", "COPYING", "README", "USE_POLICY",
					  "tokenizer.", NULL};

int qtk_audit_file(qtk_audit *a, const char *rel)
{
	const char *base = strrchr(rel, '/');
	base = base ? base + 1 : rel;
	if (ends_any(base, pickle_ext))
		return add(a, "pickle", true, rel, "unpickling it runs code");
	if (ends_any(base, python_ext))
		return add(a, "python", true, rel, "Python module (auto_map / trust_remote_code)");
	if (ends_any(base, exec_ext))
		return add(a, "executable", true, rel, "native code, script or a format that embeds code");
	if (ends_any(base, data_ext) || !strcmp(base, ".gitattributes") || !strcmp(base, ".gitignore"))
		return 0;
	for (const char *const *p = data_prefix; *p; p++)
		if (starts_ci(base, *p))
			return 0;
	return add(a, "unlisted", true, rel, "not on the allowlist of inert model files");
}

typedef struct list_ctx {
	qtk_audit *a;
	const char *dir;    /* absolute or as given */
	const char *rel;    /* "" at the top */
	int depth;
	int rc;
	char **subdirs;
	size_t nsub;
} list_ctx;

static int list_one(void *arg, const char *name, bool is_dir)
{
	list_ctx *c = arg;
	qtk_audit *a = c->a;
	if (a->nentries >= QTK_AUDIT_MAX_ENTRIES) {
		a->truncated = true;
		return 0;
	}
	a->nentries++;
	size_t rl = strlen(c->rel), nl = strlen(name);
	char *rel = qtk_malloc(rl + nl + 2);
	if (!rel)
		return c->rc = QTK_E_IO;
	snprintf(rel, rl + nl + 2, "%s%s%s", c->rel, rl ? "/" : "", name);
	int rc = 0;
	if (is_dir) {
		/* .git, .cache (the hub's download cache) hold no model content */
		if (name[0] != '.' && c->depth < 3) {
			char **s = qtk_realloc(c->subdirs, (c->nsub + 1) * sizeof *s);
			if (!s) {
				qtk_free(rel);
				return c->rc = QTK_E_IO;
			}
			c->subdirs = s;
			c->subdirs[c->nsub++] = rel;
			return 0;
		}
	} else {
		rc = c->rc = qtk_audit_file(a, rel);
	}
	qtk_free(rel);
	return rc;
}

static int list_dir(qtk_audit *a, const char *root, const char *rel, int depth)
{
	char *path = *rel ? qtk_path_join(root, rel) : qtk_strdup(root);
	if (!path)
		return QTK_E_IO;
	list_ctx c = {a, path, rel, depth, 0, NULL, 0};
	qtk_err e;
	qtk_err_clear(&e);
	int lr = qtk_dir_list(path, list_one, &c, &e);
	int rc = c.rc; /* out of memory; a directory that cannot be read is skipped */
	if (!*rel && !lr)
		a->listed = true;
	for (size_t i = 0; i < c.nsub; i++) {
		if (!rc)
			rc = list_dir(a, root, c.subdirs[i], depth + 1);
		qtk_free(c.subdirs[i]);
	}
	qtk_free(c.subdirs);
	qtk_free(path);
	return rc;
}

/* ---- chat templates ------------------------------------------------------------------- */

#define PER_KIND 4 /* findings of one kind per template */

typedef struct tctx {
	qtk_audit *a;
	const char *where;
	const char *s;
	size_t n;
	unsigned count[16];
	int rc;
} tctx;

enum { K_URL, K_ENC, K_ESC, K_CTRL, K_INVIS, K_BIN, K_SIZE, K_TRIG };
static const char *const kname[] = {"template_url", "template_encoded", "template_escape", "template_control",
				    "template_invisible", "template_binary", "template_size", "template_trigger"};

static void flag(tctx *t, int k, size_t at, const char *what, const char *ex, size_t exn)
{
	if (t->rc || t->count[k]++ >= PER_KIND)
		return;
	char e[96] = "";
	if (ex)
		esc(e, sizeof e, ex, exn > 120 ? 120 : exn);
	t->rc = add(t->a, kname[k], false, t->where, "%s%s%s%s at byte %zu", what, ex ? " '" : "", e, ex ? "'" : "", at);
}

static bool is_b64(unsigned char c) { return isalnum(c) || c == '+' || c == '/' || c == '-' || c == '_'; }

static void scan_bytes(tctx *t)
{
	const char *s = t->s;
	size_t n = t->n;
	size_t b64_start = 0, b64_len = 0, hex_len = 0, escs = 0, esc_start = 0;
	bool hex_dig = false, hex_done = false;
	bool b64_dig = false, b64_up = false, b64_lo = false, b64_done = false;
	for (size_t i = 0; i < n && !t->rc;) {
		unsigned char c = (unsigned char)s[i];
		/* runs of encoded-looking characters */
		if (is_b64(c)) {
			if (!b64_len) {
				b64_start = i;
				b64_dig = b64_up = b64_lo = b64_done = false;
			}
			b64_len++;
			b64_dig |= isdigit(c) != 0;
			b64_up |= isupper(c) != 0;
			b64_lo |= islower(c) != 0;
			if (!isxdigit(c))
				hex_len = 0;
			else if (!hex_len++)
				hex_dig = hex_done = false;
			hex_dig |= isdigit(c) != 0;
			if (hex_len >= 40 && hex_dig && !hex_done) {
				hex_done = true;
				flag(t, K_ENC, i + 1 - hex_len, "hex run", s + i + 1 - hex_len, 40);
			}
			if (b64_len >= 64 && !b64_done && b64_dig && b64_up && b64_lo) {
				b64_done = true;
				flag(t, K_ENC, b64_start, "base64-like run", s + b64_start, 64);
			}
		} else {
			b64_len = 0;
			hex_len = 0;
		}
		/* \xHH \uHHHH \NNN escape runs, and textual ESC */
		if (c == '\\' && i + 1 < n) {
			char d = s[i + 1];
			size_t w = d == 'x' ? 4 : d == 'u' ? 6 : d >= '0' && d <= '7' ? 4 : 0;
			bool ok = w && i + w <= n;
			for (size_t k = d >= '0' && d <= '7' ? 1 : 2; ok && k < w; k++)
				ok = d >= '0' && d <= '7' ? (s[i + k] >= '0' && s[i + k] <= '7') : isxdigit((unsigned char)s[i + k]) != 0;
			if (ok) {
				if (!escs)
					esc_start = i;
				if (++escs == 8)
					flag(t, K_ENC, esc_start, "run of escaped bytes", s + esc_start, i + w - esc_start);
				const char *v = s + i + 1;
				size_t rem = n - i - 1;
				if ((rem >= 3 && !strncasecmp(v, "x1b", 3)) || (rem >= 5 && !strncasecmp(v, "u001b", 5)) ||
				    (rem >= 3 && !strncmp(v, "033", 3)))
					flag(t, K_ESC, i, "escaped ESC (terminal escape)", s + i, rem + 1 > 12 ? 12 : rem + 1);
				i += w;
				continue;
			}
			if (d == 'e' && i + 2 < n && s[i + 2] == '[')
				flag(t, K_ESC, i, "escaped ESC (terminal escape)", s + i, 3);
		}
		if (c != '\\')
			escs = 0;
		/* characters */
		if (c < 0x80) {
			if (c == 0)
				flag(t, K_BIN, i, "NUL byte", NULL, 0);
			else if (c == 0x1b)
				flag(t, K_ESC, i, "terminal escape", s + i, n - i > 8 ? 8 : n - i);
			else if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
				flag(t, K_CTRL, i, "control character", s + i, 1);
			i++;
			continue;
		}
		uint32_t cp;
		int l = qtk_utf8_decode(s + i, n - i, &cp);
		if (!l) {
			flag(t, K_BIN, i, "bytes that are not UTF-8", s + i, n - i > 8 ? 8 : n - i);
			i++;
			continue;
		}
		if (cp >= 0x80 && cp <= 0x9f)
			flag(t, K_CTRL, i, "C1 control character", s + i, (size_t)l);
		else if ((cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
			 (cp >= 0x2066 && cp <= 0x2069) || cp == 0x061c || (cp == 0xfeff && i) ||
			 (cp >= 0xe0000 && cp <= 0xe007f))
			flag(t, K_INVIS, i, "invisible or bidi character", s + i, (size_t)l);
		i += (size_t)l;
	}
}

static void scan_urls(tctx *t)
{
	static const char *const schemes[] = {"http://", "https://", "ftp://", "file://", "ws://", "wss://", NULL};
	const char *s = t->s;
	size_t n = t->n;
	for (size_t i = 0; i < n && !t->rc; i++) {
		char c = (char)tolower((unsigned char)s[i]);
		if (c != 'h' && c != 'f' && c != 'w' && c != 'd')
			continue;
		if (i && isalnum((unsigned char)s[i - 1]))
			continue;
		size_t ml = 0;
		for (const char *const *p = schemes; *p && !ml; p++) {
			size_t k = strlen(*p);
			if (n - i >= k && !strncasecmp(s + i, *p, k))
				ml = k;
		}
		if (!ml && n - i > 5 && !strncasecmp(s + i, "data:", 5)) {
			size_t j = i + 5;
			while (j < n && j < i + 40 && isalpha((unsigned char)s[j]))
				j++;
			if (j > i + 5 && j < n && s[j] == '/')
				ml = 5;
		}
		if (!ml && n - i > 5 && !strncasecmp(s + i, "www.", 4) && isalnum((unsigned char)s[i + 4]))
			ml = 4;
		if (!ml)
			continue;
		size_t j = i;
		while (j < n && j - i < 100 && s[j] > ' ' && s[j] != '\'' && s[j] != '"' && s[j] != '}' && s[j] < 0x7f)
			j++;
		flag(t, K_URL, i, "URL", s + i, j - i);
		i = j ? j - 1 : 0;
	}
}

/* -- Jinja conditionals ------------------------------------------------------------------ */

typedef enum { T_STR, T_ID, T_OP } ttype;
typedef struct tok {
	ttype type;
	size_t a, b;   /* span in the template (for T_STR: between the quotes) */
	char op;
} tok;

static bool id_is(const tctx *t, const tok *k, const char *w)
{
	return k->type == T_ID && k->b - k->a == strlen(w) && !memcmp(t->s + k->a, w, k->b - k->a);
}

static bool id_has(const tctx *t, const tok *k, const char *w)
{
	return (k->type == T_ID || k->type == T_STR) && memmem(t->s + k->a, k->b - k->a, w, strlen(w)) != NULL;
}

static bool lit_special(const char *s, size_t n)
{
	bool ws = true;
	for (size_t i = 0; i < n && ws; i++) {
		if (s[i] == '\\' && i + 1 < n && s[i + 1] && strchr("nrt", s[i + 1]))
			i++; /* a \n escape in the literal */
		else if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
			ws = false;
	}
	if (ws)
		return true; /* empty or whitespace only */
	if (n < 3 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return (s[0] == '<' && s[n - 1] == '>') || (s[0] == '[' && s[n - 1] == ']');
}

static bool lit_ident(const char *s, size_t n)
{
	if (!n || n > 48)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

static bool lit_known(const char *s, size_t n)
{
	static const char *const w[] = {"system", "user", "assistant", "tool", "tools", "ipython", "developer", "function",
					"model", "human", "bot", "text", "image", "image_url", "video", "video_url", "audio",
					"input_audio", "input_text", "output_text", "tool_call", "tool_calls", "tool_use",
					"tool_result", "tool_response", "thinking", "reasoning", "reasoning_content", "file",
					"document", "json", "json_object", "json_schema", "none",
					/* reasoning switches in the user's message (Qwen 3, Nemotron, GLM) */
					"/think", "/no_think", "/nothink", NULL};
	for (const char *const *p = w; *p; p++)
		if (strlen(*p) == n && !memcmp(*p, s, n))
			return true;
	return false;
}

/* Tokenize a tag body [a, b) into at most cap tokens; returns the count. */
static size_t tokenize(const tctx *t, size_t a, size_t b, tok *out, size_t cap)
{
	const char *s = t->s;
	size_t n = 0;
	for (size_t i = a; i < b && n < cap;) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\'' || c == '"') {
			size_t j = i + 1;
			while (j < b && s[j] != (char)c)
				j += s[j] == '\\' && j + 1 < b ? 2 : 1;
			out[n++] = (tok){T_STR, i + 1, j < b ? j : b, 0};
			i = j + 1;
		} else if (isalnum(c) || c == '_') {
			size_t j = i;
			while (j < b && (isalnum((unsigned char)s[j]) || s[j] == '_'))
				j++;
			out[n++] = (tok){T_ID, i, j, 0};
			i = j;
		} else if (c <= ' ') {
			i++;
		} else {
			out[n++] = (tok){T_OP, i, i + 1, (char)c};
			i++;
		}
	}
	return n;
}

static void check_clause(tctx *t, const tok *k, size_t lo, size_t hi)
{
	bool has_content = false, has_msg = false;
	for (size_t i = lo; i < hi; i++) {
		has_content |= id_has(t, &k[i], "content");
		has_msg |= id_has(t, &k[i], "message") || id_has(t, &k[i], "role");
	}
	for (size_t i = lo; i < hi && !t->rc; i++) {
		if (k[i].type != T_STR)
			continue;
		const char *l = t->s + k[i].a;
		size_t ln = k[i].b - k[i].a;
		/* a subscript key message['content'], or .get('key') */
		if (i > lo && k[i - 1].type == T_OP && k[i - 1].op == '[' && i + 1 < hi && k[i + 1].type == T_OP &&
		    k[i + 1].op == ']')
			continue;
		if (i >= lo + 2 && k[i - 1].type == T_OP && k[i - 1].op == '(' && id_is(t, &k[i - 2], "get"))
			continue;
		size_t j = i + 1;
		if (j < hi && id_is(t, &k[j], "not"))
			j++;
		bool ok;
		if (j < hi && id_is(t, &k[j], "in")) {
			bool tc = false, tm = false;
			for (size_t q = j + 1; q < hi; q++) {
				tc |= id_has(t, &k[q], "content");
				tm |= id_has(t, &k[q], "message");
			}
			if (tc) /* a substring of the content, or a part type ('image' in content) */
				ok = lit_special(l, ln) || lit_known(l, ln);
			else if (tm)
				ok = lit_ident(l, ln) || lit_special(l, ln);
			else
				ok = lit_ident(l, ln) || lit_special(l, ln) || lit_known(l, ln);
		} else if (has_content) {
			ok = lit_known(l, ln) || lit_special(l, ln);
		} else if (has_msg) {
			ok = lit_ident(l, ln) || lit_special(l, ln);
		} else {
			ok = true;
		}
		if (!ok)
			flag(t, K_TRIG, k[i].a - 1, "conditional tests message content against the unusual literal", l, ln);
	}
}

static void check_tag(tctx *t, size_t a, size_t b)
{
	tok k[256];
	size_t nk = tokenize(t, a, b, k, sizeof k / sizeof *k);
	size_t lo = 0;
	for (size_t i = 0; i <= nk && !t->rc; i++)
		if (i == nk || id_is(t, &k[i], "and") || id_is(t, &k[i], "or")) {
			check_clause(t, k, lo, i);
			lo = i + 1;
		}
}

static void scan_tags(tctx *t)
{
	const char *s = t->s;
	size_t n = t->n;
	for (size_t i = 0; i + 1 < n && !t->rc; i++) {
		if (s[i] != '{' || s[i + 1] != '%')
			continue;
		size_t j = i + 2;
		if (j < n && (s[j] == '-' || s[j] == '+'))
			j++;
		while (j < n && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r'))
			j++;
		size_t kw = 0;
		if (n - j >= 2 && !strncmp(s + j, "if", 2))
			kw = 2;
		else if (n - j >= 4 && !strncmp(s + j, "elif", 4))
			kw = 4;
		if (!kw || (j + kw < n && (isalnum((unsigned char)s[j + kw]) || s[j + kw] == '_')))
			continue;
		size_t a = j + kw, q = a;
		/* the end of the tag, quotes honoured; the scan goes on after it (linear) */
		while (q + 1 < n && !(s[q] == '%' && s[q + 1] == '}')) {
			if (s[q] == '\'' || s[q] == '"') {
				char c = s[q++];
				while (q < n && s[q] != c)
					q += s[q] == '\\' ? 2 : 1;
			}
			q++;
		}
		if (q + 1 >= n)
			return; /* unterminated: nothing more to find */
		size_t b = q;
		if (b > a && (s[b - 1] == '-' || s[b - 1] == '+'))
			b--;
		check_tag(t, a, b);
		i = q + 1;
	}
}

int qtk_audit_template(qtk_audit *a, const char *where, const char *text, size_t len)
{
	tctx t;
	memset(&t, 0, sizeof t);
	t.a = a;
	t.where = where;
	t.s = text;
	t.n = len;
	a->ntemplates++;
	if (len > QTK_AUDIT_TEMPLATE_BIG)
		flag(&t, K_SIZE, 0, "template of unusual size", NULL, 0);
	if (!t.rc)
		scan_bytes(&t);
	if (!t.rc)
		scan_urls(&t);
	if (!t.rc)
		scan_tags(&t);
	return t.rc;
}

/* ---- JSON side files ------------------------------------------------------------------ */

static int auto_map_entry(qtk_audit *a, const char *where, const cJSON *e)
{
	char key[200], val[160] = "";
	esc(key, sizeof key, e->string ? e->string : "", e->string ? strlen(e->string) : 0);
	char w[320];
	snprintf(w, sizeof w, "%s auto_map.%s", where, key);
	const cJSON *v = e;
	if (cJSON_IsArray(e))
		for (v = e->child; v && !cJSON_IsString(v); v = v->next)
			;
	if (v && cJSON_IsString(v))
		esc(val, sizeof val, v->valuestring, strlen(v->valuestring));
	bool remote = v && cJSON_IsString(v) && strstr(v->valuestring, "--");
	return add(a, "auto_map", true, w, "loads code '%s'%s", val, remote ? " from another repository" : "");
}

static int templates_in(qtk_audit *a, const char *name, const cJSON *ct)
{
	char w[256];
	if (cJSON_IsString(ct)) {
		snprintf(w, sizeof w, "%s chat_template", name);
		return qtk_audit_template(a, w, ct->valuestring, strlen(ct->valuestring));
	}
	if (!cJSON_IsArray(ct))
		return 0;
	int rc = 0, i = 0;
	for (const cJSON *e = ct->child; e && !rc; e = e->next, i++) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
		const cJSON *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
		if (!cJSON_IsString(tp))
			continue;
		char en[64];
		if (cJSON_IsString(nm))
			esc(en, sizeof en, nm->valuestring, strlen(nm->valuestring));
		else
			snprintf(en, sizeof en, "%d", i);
		snprintf(w, sizeof w, "%s chat_template[%s]", name, en);
		rc = qtk_audit_template(a, w, tp->valuestring, strlen(tp->valuestring));
	}
	return rc;
}

int qtk_audit_json_file(qtk_audit *a, const char *name, const char *text, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(text, len);
	if (!j)
		return 0;
	int rc = 0;
	if (cJSON_IsObject(j)) {
		const cJSON *am = cJSON_GetObjectItemCaseSensitive(j, "auto_map");
		if (am && cJSON_IsObject(am)) {
			for (const cJSON *e = am->child; e && !rc; e = e->next)
				rc = auto_map_entry(a, name, e);
		} else if (am) {
			rc = add(a, "auto_map", true, name, "auto_map present (not an object)");
		}
		const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "trust_remote_code");
		if (!rc && cJSON_IsTrue(tr))
			rc = add(a, "auto_map", true, name, "trust_remote_code set");
		if (!rc)
			rc = templates_in(a, name, cJSON_GetObjectItemCaseSensitive(j, "chat_template"));
	}
	cJSON_Delete(j);
	return rc;
}

/* ---- the model ------------------------------------------------------------------------ */

static int fcmp(const void *x, const void *y)
{
	const qtk_audit_finding *a = x, *b = y;
	int c = strcmp(a->where, b->where);
	if (!c)
		c = strcmp(a->kind, b->kind);
	return c ? c : strcmp(a->detail, b->detail);
}

void qtk_audit_sort(qtk_audit *a)
{
	if (a->n > 1)
		qsort(a->f, a->n, sizeof *a->f, fcmp);
}

int qtk_audit_model(const qtk_model *m, qtk_audit *a, qtk_err *err)
{
	memset(a, 0, sizeof *a);
	int rc = 0;
	const char *fmt = qtk_model_format(m);
	if (fmt && !strcmp(fmt, "hf") && m->path && qtk_is_dir(m->path))
		rc = list_dir(a, m->path, "", 0);
	for (size_t i = 0; i < m->nblobs && !rc; i++) {
		const qtk_blob *b = &m->blobs[i];
		/* qtk's provenance record is no loader's configuration (no auto_map or chat template is
		 * taken from it), and it is tens of MB for 100,000 tensors: a tree of it ~200 MB */
		if (!strcmp(b->name, QTK_PROV_FILE))
			continue;
		if (ends_ci(b->name, ".json"))
			rc = qtk_audit_json_file(a, b->name, (const char *)b->data, b->len);
		else if (ends_ci(b->name, ".jinja"))
			rc = qtk_audit_template(a, b->name, (const char *)b->data, b->len);
	}
	for (size_t i = 0; i < m->nkv && !rc; i++) {
		const qtk_kv *kv = &m->kv[i];
		if (kv->val.type != QTK_V_STR || strncmp(kv->key, "tokenizer.chat_template", 23) ||
		    (kv->key[23] && kv->key[23] != '.'))
			continue;
		char w[256];
		snprintf(w, sizeof w, "kv %s", kv->key);
		rc = qtk_audit_template(a, w, kv->val.v.str.s, (size_t)kv->val.v.str.len);
	}
	if (rc) {
		qtk_audit_free(a);
		return qtk_err_set(err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	}
	qtk_audit_sort(a);
	return 0;
}

cJSON *qtk_audit_json(const qtk_audit *a)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *fs = cJSON_CreateArray();
	if (!o || !fs) {
		cJSON_Delete(o);
		cJSON_Delete(fs);
		return NULL;
	}
	cJSON_AddStringToObject(o, "scheme", QTK_AUDIT_SCHEME);
	cJSON_AddNumberToObject(o, "templates", (double)a->ntemplates);
	cJSON_AddNumberToObject(o, "code", (double)a->ncode);
	size_t k = a->n < QTK_AUDIT_LIST ? a->n : QTK_AUDIT_LIST;
	for (size_t i = 0; i < k; i++) {
		cJSON *f = cJSON_CreateObject();
		cJSON_AddStringToObject(f, "kind", a->f[i].kind);
		cJSON_AddBoolToObject(f, "code", a->f[i].code);
		cJSON_AddStringToObject(f, "where", a->f[i].where);
		cJSON_AddStringToObject(f, "detail", a->f[i].detail);
		cJSON_AddItemToArray(fs, f);
	}
	cJSON_AddItemToObject(o, "findings", fs);
	if (a->n - k + a->dropped)
		cJSON_AddNumberToObject(o, "more", (double)(a->n - k + a->dropped));
	return o;
}

void qtk_audit_free(qtk_audit *a)
{
	qtk_free(a->f);
	memset(a, 0, sizeof *a);
}
