/* json.c - strict JSON: a raw lexical pass that rejects what cJSON would
 * let through, then cJSON for the tree, then a duplicate-key walk. */
#include "json.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_DEPTH 256
#define MAX_SAFE_INT 9007199254740992ull /* 2^53 */

/* ---- cJSON allocations through qtk_malloc ------------------------------ */

static _Thread_local int json_oom; /* set when a cJSON allocation failed */
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

/* Arenas: a tree parsed with QTK_JSON_ARENA takes its nodes and strings from one mapping, a
 * bump at a time (cJSON makes a separate allocation per node, key and string: malloc's
 * headers and rounding were a third of a record's tree). The parsing thread allocates from
 * its arena; a free of a pointer inside a live arena does nothing (the tree may be edited and
 * deleted with cJSON's own calls); qtk_json_tree_free releases the mapping. */
typedef struct jarena {
	uint8_t *base;
	size_t len, used;
	struct jarena *next;
} jarena;

static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static jarena *arenas;
static atomic_size_t narenas;
static _Thread_local jarena *cur_arena;

static void *hook_malloc(size_t n)
{
	jarena *a = cur_arena;
	if (a) {
		size_t k = (n + 7) & ~(size_t)7;
		if (k >= n && k <= a->len - a->used) {
			void *p = a->base + a->used;
			a->used += k;
			return p;
		}
	}
	void *p = qtk_malloc(n);
	if (!p)
		json_oom = 1;
	return p;
}

static bool in_arena(const void *p)
{
	const uint8_t *b = p;
	bool in = false;
	pthread_mutex_lock(&arena_mu);
	for (const jarena *a = arenas; a && !in; a = a->next)
		in = b >= a->base && b < a->base + a->len;
	pthread_mutex_unlock(&arena_mu);
	return in;
}

static void hook_free(void *p)
{
	if (p && atomic_load_explicit(&narenas, memory_order_acquire) && in_arena(p))
		return;
	qtk_free(p);
}

/* A mapping of len bytes (address space: only the pages used are memory), registered; NULL
 * when none can be made (the parse then allocates as usual). */
static jarena *arena_new(size_t len)
{
	jarena *a = qtk_calloc(1, sizeof *a);
	void *m = a ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
		    : MAP_FAILED;
	if (m == MAP_FAILED) {
		qtk_free(a);
		return NULL;
	}
	a->base = m;
	a->len = len;
	pthread_mutex_lock(&arena_mu);
	a->next = arenas;
	arenas = a;
	atomic_fetch_add_explicit(&narenas, 1, memory_order_release);
	pthread_mutex_unlock(&arena_mu);
	return a;
}

/* Unregister and unmap the arena holding p (or a itself when a is given); nothing when none. */
static void arena_release(jarena *a, const void *p)
{
	jarena *hit = NULL;
	pthread_mutex_lock(&arena_mu);
	for (jarena **pa = &arenas; *pa; pa = &(*pa)->next)
		if (a ? *pa == a : (const uint8_t *)p >= (*pa)->base && (const uint8_t *)p < (*pa)->base + (*pa)->len) {
			hit = *pa;
			*pa = hit->next;
			atomic_fetch_sub_explicit(&narenas, 1, memory_order_release);
			break;
		}
	pthread_mutex_unlock(&arena_mu);
	if (hit) {
		munmap(hit->base, hit->len);
		qtk_free(hit);
	}
}

void qtk_json_tree_free(cJSON *root)
{
	if (!root)
		return;
	cJSON_Delete(root); /* frees what was added to the tree after the parse */
	if (atomic_load_explicit(&narenas, memory_order_acquire))
		arena_release(NULL, root);
}

static void init_hooks(void)
{
	cJSON_Hooks h = {hook_malloc, hook_free};
	cJSON_InitHooks(&h);
}

void qtk_json_init(void) { pthread_once(&hooks_once, init_hooks); }

void qtk_json_hooks_push(void *(*alloc)(size_t), void (*release)(void *))
{
	qtk_json_init();
	cJSON_Hooks h = {alloc, release};
	cJSON_InitHooks(&h);
}

void qtk_json_hooks_pop(void) { init_hooks(); }

/* ---- the lexical pass --------------------------------------------------- */

typedef struct scan {
	const uint8_t *s;
	size_t n;
	unsigned flags;
	const char *file;
	int64_t base;
	qtk_err *err;
	uint64_t *keys; /* offsets of top-level keys */
	size_t nkeys, capkeys;
	size_t last_key; /* index into keys of the current top-level key + 1; 0 = none */
	const struct outer *outer; /* the text is this member's value (qtk_json_each_member) */
} scan;

/* The member whose value a text is: errors name it as the whole object's parse would. */
typedef struct outer {
	const char *raw;  /* its key as written */
	size_t raw_len;
	const char *key;  /* decoded */
	int64_t off;      /* file offset of the key */
} outer;

/* "tensor 'x'" / "key 'x'" for the top-level key around the error, from the
 * raw text (escapes shown as written). */
static void scan_subject(const scan *sc, char *buf, size_t cap)
{
	buf[0] = 0;
	const uint8_t *src = sc->s;
	size_t n = sc->n, at, e;
	if (sc->outer) {
		src = (const uint8_t *)sc->outer->raw;
		n = sc->outer->raw_len;
		at = 0;
	} else if (sc->last_key) {
		at = (size_t)sc->keys[sc->last_key - 1] + 1;
	} else {
		return;
	}
	for (e = at; e < n && src[e] != '"' && e - at < 200; e++)
		if (src[e] == '\\')
			e++;
	if (e > n)
		e = n;
	int len = (int)(e - at);
	bool meta = len == 12 && memcmp(src + at, "__metadata__", 12) == 0;
	const char *kind = (sc->flags & QTK_JSON_INTS) && !meta ? "tensor" : "key";
	snprintf(buf, cap, "%s '%.*s'", kind, len, (const char *)src + at);
}

static int scan_fail(scan *sc, size_t pos, const char *fmt, const char *arg)
{
	char subj[256];
	scan_subject(sc, subj, sizeof subj);
	return qtk_err_set(sc->err, QTK_E_DATA, sc->file, sc->base + (int64_t)pos, subj[0] ? subj : NULL,
			   fmt, arg);
}

/* Position of the first byte that breaks UTF-8, or n when the text is valid. */
static size_t utf8_bad(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		size_t k = (s[i] & 0xE0) == 0xC0 ? 2 : (s[i] & 0xF0) == 0xE0 ? 3 : (s[i] & 0xF8) == 0xF0 ? 4 : 0;
		if (!k || k > n - i || !qtk_utf8_valid((const char *)s + i, k))
			return i;
		i += k;
	}
	return n;
}

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static bool is_hex(uint8_t c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int scan_string(scan *sc, size_t *pi)
{
	size_t i = *pi + 1, start = *pi;
	for (;;) {
		if (i >= sc->n)
			return scan_fail(sc, start, "unterminated string%s", "");
		uint8_t c = sc->s[i];
		if (c == '"')
			break;
		if (c < 0x20)
			return scan_fail(sc, i, "control character in string%s", "");
		if (c == '\\') {
			if (i + 1 >= sc->n)
				return scan_fail(sc, start, "unterminated string%s", "");
			uint8_t e = sc->s[i + 1];
			if (e == 'u') {
				if (sc->n - i < 6 || !is_hex(sc->s[i + 2]) || !is_hex(sc->s[i + 3]) ||
				    !is_hex(sc->s[i + 4]) || !is_hex(sc->s[i + 5]))
					return scan_fail(sc, i, "bad \\u escape in string%s", "");
				if (memcmp(sc->s + i + 2, "0000", 4) == 0)
					return scan_fail(sc, i, "string contains \\u0000%s", "");
				i += 6;
				continue;
			}
			if (!strchr("\"\\/bfnrt", e) || !e)
				return scan_fail(sc, i, "bad escape in string%s", "");
			i += 2;
			continue;
		}
		i++;
	}
	*pi = i + 1;
	return 0;
}

static int scan_number(scan *sc, size_t *pi)
{
	size_t i = *pi, e = i;
	while (e < sc->n && (is_digit(sc->s[e]) || (sc->s[e] && strchr("+-.eE", sc->s[e]))))
		e++;
	const uint8_t *t = sc->s + i;
	size_t len = e - i;
	if (sc->flags & QTK_JSON_INTS) {
		if (t[0] == '-')
			return scan_fail(sc, i, "negative number%s", "");
		for (size_t k = 0; k < len; k++)
			if (!is_digit(t[k]))
				return scan_fail(sc, i, "non-integer number%s", "");
		if (len > 1 && t[0] == '0')
			return scan_fail(sc, i, "number with a leading zero%s", "");
		uint64_t v = 0;
		for (size_t k = 0; k < len && len <= 16; k++)
			v = v * 10 + (uint64_t)(t[k] - '0');
		if (len > 16 || v > MAX_SAFE_INT)
			return scan_fail(sc, i, "number too large (limit 2^53)%s", "");
	} else {
		size_t k = 0;
		if (k < len && t[k] == '-')
			k++;
		if (k >= len || !is_digit(t[k]))
			return scan_fail(sc, i, "malformed number%s", "");
		if (t[k] == '0')
			k++;
		else
			while (k < len && is_digit(t[k]))
				k++;
		if (k < len && t[k] == '.') {
			if (++k >= len || !is_digit(t[k]))
				return scan_fail(sc, i, "malformed number%s", "");
			while (k < len && is_digit(t[k]))
				k++;
		}
		if (k < len && (t[k] == 'e' || t[k] == 'E')) {
			k++;
			if (k < len && (t[k] == '+' || t[k] == '-'))
				k++;
			if (k >= len || !is_digit(t[k]))
				return scan_fail(sc, i, "malformed number%s", "");
			while (k < len && is_digit(t[k]))
				k++;
		}
		if (k != len)
			return scan_fail(sc, i, "malformed number%s", "");
	}
	*pi = e;
	return 0;
}

static int push_key(scan *sc, size_t off)
{
	if (sc->nkeys == sc->capkeys) {
		size_t nc = sc->capkeys ? sc->capkeys * 2 : 64;
		uint64_t *k = qtk_realloc(sc->keys, nc * sizeof *k);
		if (!k)
			return qtk_err_set(sc->err, QTK_E_IO, sc->file, -1, NULL, "out of memory");
		sc->keys = k;
		sc->capkeys = nc;
	}
	sc->keys[sc->nkeys++] = off;
	sc->last_key = sc->nkeys;
	return 0;
}

/* Walk the raw text once: strings, numbers, nesting, and top-level key offsets.
 * The grammar itself is left to cJSON. */
static int scan_text(scan *sc)
{
	char stack[MAX_DEPTH];
	int depth = 0;
	bool expect_key = false;
	size_t i = 0;
	while (i < sc->n) {
		uint8_t c = sc->s[i];
		int rc = 0;
		if (is_ws(c)) {
			i++;
		} else if (c == '"') {
			if (expect_key && depth == 1 && (rc = push_key(sc, i)))
				return rc;
			if ((rc = scan_string(sc, &i)))
				return rc;
			expect_key = false;
		} else if (c == '{' || c == '[') {
			if (depth >= MAX_DEPTH)
				return scan_fail(sc, i, "json nested too deeply (limit %s)", "256");
			stack[depth++] = (char)c;
			expect_key = c == '{';
			i++;
		} else if (c == '}' || c == ']') {
			if (depth > 0)
				depth--;
			expect_key = false;
			i++;
		} else if (c == ',') {
			expect_key = depth > 0 && stack[depth - 1] == '{';
			i++;
		} else if (c == ':') {
			expect_key = false;
			i++;
		} else if (c == '-' || is_digit(c)) {
			if ((rc = scan_number(sc, &i)))
				return rc;
		} else if (c >= 'a' && c <= 'z') {
			while (i < sc->n && sc->s[i] >= 'a' && sc->s[i] <= 'z')
				i++;
		} else {
			char ch[8];
			snprintf(ch, sizeof ch, c >= 0x20 && c < 0x7f ? "'%c'" : "0x%02x", c);
			return scan_fail(sc, i, "unexpected character %s in json", ch);
		}
	}
	return 0;
}

/* ---- duplicate keys ------------------------------------------------------ */

typedef struct keyref {
	const char *k;
	size_t i;
} keyref;

static int cmp_keyref(const void *a, const void *b)
{
	const keyref *x = a, *y = b;
	int c = strcmp(x->k, y->k);
	if (c)
		return c;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Reject duplicate keys in obj and below. `top` is the index of the top-level
 * key around obj (for the error offset), or SIZE_MAX at the root. */
static int check_dups(const cJSON *obj, size_t top, const qtk_json_doc *doc, const char *file,
		      int64_t base, qtk_err *err, int depth, const outer *o)
{
	size_t n = 0;
	for (const cJSON *c = obj->child; c; c = c->next)
		n++;
	if (depth > MAX_DEPTH)
		return qtk_err_set(err, QTK_E_DATA, file, base, NULL, "json nested too deeply");
	if (cJSON_IsObject(obj) && n > 1) {
		keyref *r = qtk_malloc(n * sizeof *r);
		if (!r)
			return qtk_err_set(err, QTK_E_IO, file, -1, NULL, "out of memory");
		size_t i = 0;
		for (const cJSON *c = obj->child; c; c = c->next, i++)
			r[i] = (keyref){c->string ? c->string : "", i};
		qsort(r, n, sizeof *r, cmp_keyref);
		for (i = 1; i < n; i++)
			if (strcmp(r[i - 1].k, r[i].k) == 0) {
				size_t at = top == SIZE_MAX ? r[i].i : top;
				char subj[256];
				const cJSON *tk = NULL;
				if (top != SIZE_MAX && doc->root)
					tk = cJSON_GetArrayItem(doc->root, (int)(top < INT32_MAX ? top : 0));
				if (o)
					snprintf(subj, sizeof subj, "key '%.100s.%.100s'", o->key, r[i].k);
				else if (tk && tk->string)
					snprintf(subj, sizeof subj, "key '%.100s.%.100s'", tk->string, r[i].k);
				else
					snprintf(subj, sizeof subj, "key '%.200s'", r[i].k);
				int rc = qtk_err_set(err, QTK_E_DATA, file, o ? o->off : qtk_json_key_off(doc, at, base), subj,
						     "duplicate key");
				qtk_free(r);
				return rc;
			}
		qtk_free(r);
	}
	size_t i = 0;
	for (const cJSON *c = obj->child; c; c = c->next, i++)
		if (c->child) {
			int rc = check_dups(c, top == SIZE_MAX ? i : top, doc, file, base, err, depth + 1, o);
			if (rc)
				return rc;
		}
	return 0;
}

/* ---- public ------------------------------------------------------------- */

int64_t qtk_json_key_off(const qtk_json_doc *doc, size_t i, int64_t base)
{
	if (!doc || i >= doc->nkeys)
		return base;
	return base + (int64_t)doc->key_off[i];
}

void qtk_json_doc_free(qtk_json_doc *doc)
{
	if (!doc)
		return;
	qtk_json_tree_free(doc->root);
	qtk_free(doc->key_off);
	memset(doc, 0, sizeof *doc);
}

/* What both readers refuse before any structure: bytes that are not UTF-8, a byte order mark,
 * and (QTK_JSON_BRACE_FIRST) a first byte other than '{'. */
static int text_ok(const uint8_t *s, size_t len, unsigned flags, const char *file, int64_t base, qtk_err *err)
{
	size_t bad = utf8_bad(s, len);
	if (bad < len)
		return qtk_err_set(err, QTK_E_DATA, file, base + (int64_t)bad, NULL, "json is not valid utf-8");
	if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
		return qtk_err_set(err, QTK_E_DATA, file, base, NULL, "json starts with a byte order mark");
	if ((flags & QTK_JSON_BRACE_FIRST) && (len == 0 || s[0] != '{'))
		return qtk_err_set(err, QTK_E_DATA, file, base, NULL, "json does not start with '{'");
	return 0;
}

static int parse_impl(const char *text, size_t len, unsigned flags, const char *file, int64_t base, qtk_err *err,
		      qtk_json_doc *doc, const outer *o);

int qtk_json_parse(const char *text, size_t len, unsigned flags, const char *file, int64_t base,
		   qtk_err *err, qtk_json_doc *doc)
{
	return parse_impl(text, len, flags, file, base, err, doc, NULL);
}

static int parse_impl(const char *text, size_t len, unsigned flags, const char *file, int64_t base, qtk_err *err,
		      qtk_json_doc *doc, const outer *o)
{
	memset(doc, 0, sizeof *doc);
	qtk_json_init();
	const uint8_t *s = (const uint8_t *)text;
	int rc0 = text_ok(s, len, flags, file, base, err);
	if (rc0)
		return rc0;
	scan sc = {.s = s, .n = len, .flags = flags, .file = file, .base = base, .err = err, .outer = o};
	int rc = scan_text(&sc);
	if (rc) {
		qtk_free(sc.keys);
		return rc;
	}
	doc->key_off = sc.keys;
	doc->nkeys = sc.nkeys;
	const char *end = NULL;
	json_oom = 0;
	/* an arena of 16 bytes of address space per byte of text (a record's tree takes ~4),
	 * at least 1 MiB; the root is its first allocation */
	jarena *ar = (flags & QTK_JSON_ARENA) && len < SIZE_MAX / 32 ? arena_new(16 * len + ((size_t)1 << 20)) : NULL;
	cur_arena = ar;
	doc->root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	cur_arena = NULL;
	if (ar && (!doc->root || !ar->used)) /* failed, or other hooks were in place */
		arena_release(ar, NULL);
	if (!doc->root) {
		int64_t at = end && end >= text && end <= text + len ? (int64_t)(end - text) : 0;
		rc = json_oom ? qtk_err_set(err, QTK_E_IO, file, -1, NULL, "out of memory")
			      : qtk_err_set(err, QTK_E_DATA, file, base + at, NULL, "invalid json");
		qtk_json_doc_free(doc);
		return rc;
	}
	size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
	for (; at < len; at++)
		if (!is_ws(s[at])) {
			qtk_json_doc_free(doc);
			return qtk_err_set(err, QTK_E_DATA, file, base + (int64_t)at, NULL,
					   "trailing characters after json");
		}
	size_t nchild = 0;
	for (const cJSON *c = doc->root->child; c && cJSON_IsObject(doc->root); c = c->next)
		nchild++;
	if (nchild != doc->nkeys) { /* cannot happen for valid JSON; drop the offsets */
		qtk_free(doc->key_off);
		doc->key_off = NULL;
		doc->nkeys = 0;
	}
	rc = check_dups(doc->root, SIZE_MAX, doc, file, base, err, 0, o);
	if (rc)
		qtk_json_doc_free(doc);
	return rc;
}

size_t qtk_json_skip_ws(const char *s, size_t n, size_t i)
{
	while (i < n && is_ws((uint8_t)s[i]))
		i++;
	return i;
}

size_t qtk_json_skip_str(const char *s, size_t n, size_t i)
{
	if (i >= n || s[i] != '"')
		return SIZE_MAX;
	for (i++; i < n; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == '"')
			return i + 1;
	}
	return SIZE_MAX;
}

size_t qtk_json_skip_value(const char *s, size_t n, size_t i)
{
	if (i >= n)
		return SIZE_MAX;
	if (s[i] == '"')
		return qtk_json_skip_str(s, n, i);
	if (s[i] != '{' && s[i] != '[') {
		while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws((uint8_t)s[i]))
			i++;
		return i;
	}
	size_t depth = 0;
	for (; i < n; i++) {
		if (s[i] == '"') {
			size_t e = qtk_json_skip_str(s, n, i);
			if (e == SIZE_MAX)
				return SIZE_MAX;
			i = e - 1;
		} else if (s[i] == '{' || s[i] == '[') {
			depth++;
		} else if (s[i] == '}' || s[i] == ']') {
			if (--depth == 0)
				return i + 1;
		}
	}
	return SIZE_MAX;
}

bool qtk_json_member_at(const char *s, size_t n, size_t i, size_t *kb, size_t *va, size_t *vb, size_t *bad)
{
	*kb = qtk_json_skip_str(s, n, i);
	size_t a = *kb == SIZE_MAX ? SIZE_MAX : qtk_json_skip_ws(s, n, *kb);
	if (a >= n || s[a] != ':') {
		*bad = a < n ? a : i;
		return false;
	}
	*va = qtk_json_skip_ws(s, n, a + 1);
	*vb = qtk_json_skip_value(s, n, *va);
	if (*vb == SIZE_MAX || *vb == *va) {
		*bad = *va;
		return false;
	}
	return true;
}

bool qtk_json_member_span(const char *s, size_t n, size_t obj, const char *key, size_t *va, size_t *vb)
{
	const size_t kl = strlen(key);
	size_t i = qtk_json_skip_ws(s, n, obj);
	if (i >= n || s[i] != '{')
		return false;
	i = qtk_json_skip_ws(s, n, i + 1);
	while (i < n && s[i] == '"') {
		size_t kb, a, b, bad;
		if (!qtk_json_member_at(s, n, i, &kb, &a, &b, &bad))
			return false;
		if (kb - i == kl + 2 && !memcmp(s + i + 1, key, kl)) {
			*va = a;
			*vb = b;
			return true;
		}
		i = qtk_json_skip_ws(s, n, b);
		if (i >= n || s[i] != ',')
			return false;
		i = qtk_json_skip_ws(s, n, i + 1);
	}
	return false;
}

typedef struct mkey {
	char *k;
	size_t i;
	int64_t off;
} mkey;

static int cmp_mkey(const void *a, const void *b)
{
	const mkey *x = a, *y = b;
	int c = strcmp(x->k, y->k);
	return c ? c : (x->i > y->i) - (x->i < y->i);
}

int qtk_json_each_member(const char *text, size_t len, unsigned flags, const char *file, int64_t base,
			 qtk_err *err, int (*fn)(void *ctx, const char *key, const cJSON *val, int64_t key_off),
			 void *ctx)
{
	qtk_json_init();
	int rc = text_ok((const uint8_t *)text, len, flags, file, base, err);
	if (rc)
		return rc;
	size_t i = qtk_json_skip_ws(text, len, 0);
	if (i >= len || text[i] != '{')
		return qtk_err_set(err, QTK_E_DATA, file, base + (int64_t)i, NULL, "json is not an object");
	const unsigned vflags = flags & QTK_JSON_INTS;
	mkey *keys = NULL;
	size_t nk = 0, capk = 0;
	i = qtk_json_skip_ws(text, len, i + 1);
	bool first = true;
	while (!rc) {
		if (i < len && text[i] == '}' && first)
			break;
		first = false;
		const size_t ka = i;
		size_t kb, va, vb, bad;
		if (!qtk_json_member_at(text, len, ka, &kb, &va, &vb, &bad)) {
			rc = qtk_err_set(err, QTK_E_DATA, file, base + (int64_t)bad, NULL, "invalid json");
			break;
		}
		qtk_json_doc dk, dv;
		if ((rc = qtk_json_parse(text + ka, kb - ka, 0, file, base + (int64_t)ka, err, &dk)))
			break;
		const outer o = {text + ka + 1, kb - ka - 1, dk.root->valuestring, base + (int64_t)ka};
		if ((rc = parse_impl(text + va, vb - va, vflags, file, base + (int64_t)va, err, &dv, &o))) {
			qtk_json_doc_free(&dk);
			break;
		}
		if (nk == capk) {
			const size_t nc = capk ? 2 * capk : 256;
			mkey *n = qtk_realloc(keys, nc * sizeof *n);
			if (n) {
				keys = n;
				capk = nc;
			}
		}
		if (nk < capk && (keys[nk].k = qtk_strdup(dk.root->valuestring))) {
			keys[nk].i = nk;
			keys[nk].off = base + (int64_t)ka;
			nk++;
			rc = fn(ctx, dk.root->valuestring, dv.root, base + (int64_t)ka);
		} else {
			rc = qtk_err_set(err, QTK_E_IO, file, -1, NULL, "out of memory");
		}
		qtk_json_doc_free(&dk);
		qtk_json_doc_free(&dv);
		if (rc)
			break;
		i = qtk_json_skip_ws(text, len, vb);
		if (i < len && text[i] == ',') {
			i = qtk_json_skip_ws(text, len, i + 1);
			continue;
		}
		if (i >= len || text[i] != '}')
			rc = qtk_err_set(err, QTK_E_DATA, file, base + (int64_t)(i < len ? i : len), NULL, "invalid json");
		break;
	}
	const size_t tail = rc ? len : qtk_json_skip_ws(text, len, i + 1);
	if (tail < len)
		rc = qtk_err_set(err, QTK_E_DATA, file, base + (int64_t)tail, NULL, "trailing characters after json");
	if (!rc && nk > 1) {
		qsort(keys, nk, sizeof *keys, cmp_mkey);
		for (size_t k = 1; k < nk && !rc; k++)
			if (!strcmp(keys[k - 1].k, keys[k].k)) {
				char subj[256];
				snprintf(subj, sizeof subj, "key '%.200s'", keys[k].k);
				rc = qtk_err_set(err, QTK_E_DATA, file, keys[k].off, subj, "duplicate key");
			}
	}
	for (size_t k = 0; k < nk; k++)
		qtk_free(keys[k].k);
	qtk_free(keys);
	return rc;
}

int qtk_json_load(const char *path, uint64_t cap, unsigned flags, qtk_err *err, qtk_json_doc *doc,
		  uint8_t **raw, size_t *rawlen)
{
	uint8_t *b = NULL;
	size_t n = 0;
	memset(doc, 0, sizeof *doc);
	int rc = qtk_slurp(path, cap, &b, &n, err);
	if (rc)
		return rc;
	rc = qtk_json_parse((const char *)b, n, flags, path, 0, err, doc);
	if (rc || !raw) {
		qtk_free(b);
		return rc;
	}
	*raw = b;
	if (rawlen)
		*rawlen = n;
	return 0;
}

bool qtk_json_u64(const cJSON *item, uint64_t *out)
{
	if (!cJSON_IsNumber(item))
		return false;
	double d = item->valuedouble;
	if (!(d >= 0.0 && d <= (double)MAX_SAFE_INT))
		return false;
	uint64_t v = (uint64_t)d;
	if ((double)v != d)
		return false;
	*out = v;
	return true;
}

bool qtk_json_i64(const cJSON *item, int64_t *out)
{
	if (!cJSON_IsNumber(item))
		return false;
	double d = item->valuedouble;
	if (!(d >= -(double)MAX_SAFE_INT && d <= (double)MAX_SAFE_INT))
		return false;
	int64_t v = (int64_t)d;
	if ((double)v != d)
		return false;
	*out = v;
	return true;
}

/* The letter of a control's two-character JSON escape (\n ...), 0 when it has none. */
static char short_escape(unsigned char c)
{
	switch (c) {
	case '\b': return 'b';
	case '\f': return 'f';
	case '\n': return 'n';
	case '\r': return 'r';
	case '\t': return 't';
	default: return 0;
	}
}

int qtk_json_put_str_as(qtk_buf *b, const char *s, size_t n, unsigned style)
{
	if (!(style & QTK_JSON_RAW) && (memchr(s, 0, n) || !qtk_utf8_valid(s, n)))
		return QTK_E_DATA;
	qtk_buf_putc(b, '"');
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\' && !(c == 0x7f && (style & QTK_JSON_ESC_DEL)))
			continue;
		qtk_buf_put(b, s + run, i - run);
		run = i + 1;
		char sh = style & QTK_JSON_ESC_SHORT ? short_escape(c) : 0;
		if (c == '"' || c == '\\') {
			qtk_buf_putc(b, '\\');
			qtk_buf_putc(b, (char)c);
		} else if (sh) {
			qtk_buf_putc(b, '\\');
			qtk_buf_putc(b, sh);
		} else {
			qtk_buf_printf(b, "\\u%04x", c);
		}
	}
	qtk_buf_put(b, s + run, n - run);
	qtk_buf_putc(b, '"');
	return b->failed ? QTK_E_IO : 0;
}

int qtk_json_put_str(qtk_buf *b, const char *s, size_t n) { return qtk_json_put_str_as(b, s, n, 0); }
