/* test_json_print.c - qtk_json_num, qtk_json_fmt and qtk_json_refmt give cJSON_Print's bytes:
 * numbers (random bit patterns, integers around 10^15, signed zeros), random trees at several
 * depths, compact and spaced texts, and mutated texts (which either reformat to exactly what
 * cJSON parses and prints, or are handed back untouched). */
#include "t.h"
#include "json.h"
#include <math.h>
#include <stdint.h>

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static void check_num(double d, int *bad)
{
	cJSON *n = cJSON_CreateNumber(d);
	char *want = cJSON_PrintUnformatted(n);
	char got[32];
	size_t len = qtk_json_num(got, d);
	if (!want || strcmp(want, got) || len != strlen(got)) {
		if (*bad < 5)
			CHECK(0, "%.17g: cJSON %s, ours %s", d, want ? want : "(null)", got);
		(*bad)++;
	}
	cJSON_free(want);
	cJSON_Delete(n);
}

static void test_numbers(void)
{
	int bad = 0;
	static const double fixed[] = {0.0, -0.0, 1, -1, 8.5, 0.1, 1e15, -1e15, 1e15 - 1, -(1e15 - 1), 1e15 + 1,
				       999999999999999.5, 9007199254740992.0, 6.5625, -0.5, 1.0 / 1024, 3.0 / 2048,
				       99999999.9990234375, -99999999.5, 100000000.5, 12345678.0009765625, 2147483647, 2147483648.0, -2147483649.0,
				       1e300, -1e-300, 5e-324, INFINITY, -INFINITY, NAN, 123456789012345678.0};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		check_num(fixed[i], &bad);
	for (int i = 0; i < 300000; i++) {
		uint64_t u = rnd();
		double d;
		switch (i % 4) {
		case 0: memcpy(&d, &u, 8); break;
		case 1: d = (double)(int64_t)(u % 4000000000000000ull) - 2e15; break; /* around 10^15 */
		case 2: /* multiples of 2^-k around the 15-digit and 10^8 edges */
			d = ldexp((double)((int64_t)(u >> 16) % 400000000000000ll - 200000000000000ll) /
					  (double)(1ll << (u % 48)),
				  -(int)((u >> 8) % 14));
			break;
		default: d = (double)(int64_t)(u >> 20) / (double)(1 + (u & 1023)); break;
		}
		check_num(d, &bad);
	}
	CHECK(bad == 0, "%d numbers print differently from cJSON", bad);
}

/* ---- random trees -------------------------------------------------------- */

/* subset: only what qtk_json_refmt reformats itself (integers below 10^15, strings without
 * control bytes), so refmt must not hand it back */
static char *rnd_str(bool subset)
{
	size_t n = rnd() % 12;
	char *s = malloc(n + 1);
	static const char pick[] = "ab\"\\/\x7f\xc3\xa9 z";
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd();
		unsigned c = r % 3 ? (unsigned char)pick[(r >> 8) % (sizeof pick - 1)] : (unsigned)(1 + (r >> 8) % 255);
		if (subset && c < 0x20)
			c = 'q';
		s[i] = (char)c;
	}
	s[n] = 0;
	return s;
}

static cJSON *rnd_tree(int depth, bool subset)
{
	unsigned k = depth > 5 ? (unsigned)(rnd() % 5) : (unsigned)(rnd() % 7);
	switch (k) {
	case 0: return cJSON_CreateNull();
	case 1: return cJSON_CreateBool(rnd() & 1);
	case 2: {
		uint64_t u = rnd();
		double d = subset ? (double)(int64_t)(u % 2000000000000000ull) - 1e15 + 1 : 0;
		if (!subset)
			d = u & 1 ? (double)(int64_t)(u >> 12) / 1024.0 : (double)(int64_t)(u >> 1) * 1e-3;
		if (subset && d >= 1e15)
			d = 7;
		return cJSON_CreateNumber(u % 5 == 0 ? (double)(u % 100) : d);
	}
	case 3:
	case 4: {
		char *s = rnd_str(subset);
		cJSON *j = cJSON_CreateString(s);
		free(s);
		return j;
	}
	case 5: {
		cJSON *a = cJSON_CreateArray();
		for (int n = (int)(rnd() % 5); n > 0; n--)
			cJSON_AddItemToArray(a, rnd_tree(depth + 1, subset));
		return a;
	}
	default: {
		cJSON *o = cJSON_CreateObject();
		for (int n = (int)(rnd() % 5); n > 0; n--) {
			char *key = rnd_str(subset);
			cJSON_AddItemToObject(o, rnd() % 4 ? key : "dup", rnd_tree(depth + 1, subset));
			free(key);
		}
		return o;
	}
	}
}

/* the text of item j printed at `depth`: cJSON_Print of it wrapped in `depth` objects
 * {"k": ...}, cut out of the wrapping */
static char *want_at(const cJSON *j, int depth)
{
	cJSON *dup = cJSON_Duplicate(j, 1), *root = dup;
	for (int d = 0; d < depth; d++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "k", root);
		root = o;
	}
	char *txt = cJSON_Print(root);
	cJSON_Delete(root);
	if (!txt || !depth)
		return txt;
	char *p = txt;
	for (int d = 0; d < depth; d++)
		p = strstr(p, "\"k\":\t") + 5;
	size_t len = strlen(p);
	for (int d = 0; d < depth; d++) { /* "\n" depth-1-d tabs "}" at the end */
		len -= 2 + (size_t)d;
	}
	char *out = strndup(p, len);
	cJSON_free(txt);
	return out;
}

static int same(const char *want, const qtk_jtext *w)
{
	return want && w->p && strlen(want) == w->len && memcmp(want, w->p, w->len) == 0;
}

/* the text with spaces, tabs and line breaks put before and after its punctuation */
static char *spaced(const char *c)
{
	size_t n = strlen(c);
	char *s = malloc(3 * n + 4), *o = s;
	bool in = false;
	for (size_t i = 0; i < n; i++) {
		bool punct = !in && strchr("{}[],:\"", c[i]);
		if (punct && rnd() % 2)
			*o++ = " \t\r\n"[rnd() % 4];
		*o++ = c[i];
		if (in && c[i] == '\\')
			*o++ = c[++i];
		else if (c[i] == '"')
			in = !in;
		if (punct && c[i] != '"' && rnd() % 2)
			*o++ = " \t\r\n"[rnd() % 4];
	}
	*o++ = '\n';
	*o = 0;
	return s;
}

static void test_trees(void)
{
	int bad_fmt = 0, bad_refmt = 0, handed_back = 0, subset_back = 0, total = 0;
	for (int i = 0; i < 6000; i++) {
		bool subset = i % 2;
		cJSON *t = rnd_tree(0, subset);
		int depth = (int)(rnd() % 4);
		char *want = want_at(t, depth);
		qtk_jtext w = {0};
		if (qtk_json_fmt(&w, t, depth) || !same(want, &w)) {
			if (bad_fmt++ < 3)
				CHECK(0, "fmt at depth %d:\nwant %s\ngot  %s", depth, want, w.p ? w.p : "(null)");
		}
		qtk_jtext_free(&w);
		/* compact text, then the same with whitespace */
		char *compact = cJSON_PrintUnformatted(t);
		for (int v = 0; v < 2; v++) {
			char *txt = v ? spaced(compact) : strdup(compact);
			qtk_jtext r = {0};
			qtk_jtext_ok(&r);
			int rc = qtk_json_refmt(&r, txt, strlen(txt), depth);
			total++;
			if (rc == 1) {
				handed_back++;
				subset_back += subset;
				CHECK(r.len == 0, "handed back with nothing written");
			} else if (rc || !same(want, &r)) {
				if (bad_refmt++ < 3)
					CHECK(0, "refmt of %s at %d:\nwant %s\ngot  %s", txt, depth, want, r.p);
			}
			qtk_jtext_free(&r);
			free(txt);
		}
		cJSON_free(compact);
		free(want);
		cJSON_Delete(t);
	}
	CHECK(bad_fmt == 0, "%d trees print differently from cJSON_Print", bad_fmt);
	CHECK(bad_refmt == 0, "%d texts reformat differently from cJSON", bad_refmt);
	CHECK(subset_back == 0, "%d texts of the subset were handed back", subset_back);
	CHECK(handed_back > 0 && handed_back < total, "some texts outside the subset (%d of %d)", handed_back, total);
}

/* mutated texts: either handed back untouched or exactly cJSON's parse and print */
static void test_mutations(void)
{
	int bad = 0, done = 0, back = 0;
	for (int i = 0; i < 20000; i++) {
		cJSON *t = rnd_tree(0, true);
		char *txt = cJSON_PrintUnformatted(t);
		cJSON_Delete(t);
		size_t n = strlen(txt);
		for (int m = (int)(rnd() % 3) + 1; m > 0 && n; m--) {
			size_t at = rnd() % n;
			switch (rnd() % 4) {
			case 0: txt[at] = "{}[]\",:-0123456789 \\/tfnue.+"[rnd() % 29]; break;
			case 1: n = at; break; /* cut short */
			case 2: txt[at] = (char)(rnd() % 256); break;
			default: memmove(txt + at, txt + at + 1, n - at); n--; break;
			}
		}
		qtk_jtext r = {0};
		int rc = qtk_json_refmt(&r, txt, n, 1);
		if (rc == 1) {
			back++;
			if (r.len && bad++ < 3)
				CHECK(0, "handed back after writing %zu bytes", r.len);
		} else {
			done++;
			cJSON *p = cJSON_ParseWithLength(txt, n);
			char *want = p ? want_at(p, 1) : NULL;
			if ((rc || !same(want, &r)) && bad++ < 3)
				CHECK(0, "mutated %.*s: want %s got %s", (int)n, txt, want ? want : "(parse fails)", r.p);
			free(want);
			cJSON_Delete(p);
		}
		qtk_jtext_free(&r);
		cJSON_free(txt);
	}
	CHECK(bad == 0, "%d mutated texts went wrong", bad);
	CHECK(done > 1000 && back > 1000, "both outcomes seen (%d reformatted, %d handed back)", done, back);
}

/* Trees parsed into an arena (QTK_JSON_ARENA) are the trees parsed without one; they can be
 * edited and deleted with cJSON's own calls (which do not free the arena's memory) and are
 * released by qtk_json_tree_free; a failed parse leaves nothing behind (under ASan: no leak,
 * no bad free). */
static void test_arena(void)
{
	int bad = 0, same_n = 0;
	qtk_err err;
	for (int i = 0; i < 2000; i++) {
		cJSON *t = rnd_tree(0, true);
		char *txt = cJSON_PrintUnformatted(t);
		cJSON_Delete(t);
		qtk_json_doc a, b;
		qtk_err_clear(&err);
		int ra = qtk_json_parse(txt, strlen(txt), QTK_JSON_ARENA, "t", 0, &err, &a);
		int rb = qtk_json_parse(txt, strlen(txt), 0, "t", 0, &err, &b);
		if (ra != rb && bad++ < 3)
			CHECK(0, "arena parse %d, plain parse %d: %s", ra, rb, txt);
		if (!ra && !rb) {
			char *x = cJSON_PrintUnformatted(a.root), *y = cJSON_PrintUnformatted(b.root);
			if ((!x || !y || strcmp(x, y)) && bad++ < 3)
				CHECK(0, "arena tree differs: %s", txt);
			same_n++;
			cJSON_free(x);
			cJSON_free(y);
			/* edits: an added member (malloc'd), a replaced and a deleted one (the arena's) */
			cJSON *root = a.root;
			a.root = NULL;
			if (cJSON_IsObject(root)) {
				cJSON_AddStringToObject(root, "added", "value");
				if (root->child && root->child->string)
					cJSON_ReplaceItemInObjectCaseSensitive(root, root->child->string, cJSON_CreateNumber(1));
				cJSON_DeleteItemFromObjectCaseSensitive(root, "added");
			} else if (cJSON_IsArray(root)) {
				cJSON_AddItemToArray(root, cJSON_CreateString("x"));
				cJSON_DeleteItemFromArray(root, 0);
			}
			qtk_json_tree_free(root);
		}
		qtk_json_doc_free(&a);
		qtk_json_doc_free(&b);
		/* the same text cut short: both fail */
		size_t n = strlen(txt) / 2;
		if (n && !qtk_json_parse(txt, n, QTK_JSON_ARENA, "t", 0, &err, &a)) {
			if (qtk_json_parse(txt, n, 0, "t", 0, &err, &b) && bad++ < 3)
				CHECK(0, "a cut text parsed into an arena only: %.*s", (int)n, txt);
			qtk_json_doc_free(&b);
			qtk_json_doc_free(&a);
		}
		cJSON_free(txt);
	}
	CHECK(bad == 0, "%d arena parses went wrong", bad);
	CHECK(same_n > 1000, "arena trees compared: %d", same_n);
}

/* a member without a name (an item added to an object as to an array): cJSON prints "" */
static void test_nameless(void)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToArray(o, cJSON_CreateNumber(1));
	cJSON_AddNumberToObject(o, "b", 2);
	char *want = cJSON_Print(o);
	qtk_jtext w = {0};
	CHECK(qtk_json_fmt(&w, o, 0) == 0 && same(want, &w), "nameless member: %s", w.p ? w.p : "(failed)");
	qtk_jtext_free(&w);
	cJSON_free(want);
	cJSON_Delete(o);
}

/* qtk_json_each_member reads an object as qtk_json_parse does: the same members (key and
 * canonical value, in order), and the same verdicts, at the same offsets, on hostile texts. */
typedef struct memb {
	char txt[512];
	size_t n;
} memb;

static int memb_one(void *ctx, const char *key, const cJSON *val, int64_t off)
{
	memb *m = ctx;
	char *v = cJSON_PrintUnformatted(val);
	size_t have = strlen(m->txt);
	snprintf(m->txt + have, sizeof m->txt - have, "%s@%lld=%s;", key, (long long)off, v ? v : "?");
	cJSON_free(v);
	m->n++;
	return 0;
}

static void test_each_member(void)
{
	static const struct {
		const char *txt;
		unsigned flags;
	} cases[] = {
		{"{\"a\":1,\"b\":{\"c\":[1,2]},\"d\":\"x\\u00e9\"}", QTK_JSON_INTS},
		{"{}", 0},
		{" { \"a\" : [ ] , \"b\" : { } } \n", 0},
		{"{\"a\":1,\"a\":2}", 0},
		{"{\"a\":1,\"b\":2,\"a\":3}", 0},
		{"{\"a\":1,}", 0},
		{"{\"a\" 1}", 0},
		{"{\"a\":}", 0},
		{"{\"a\":1} x", 0},
		{"{\"a\":\"\xff\"}", 0},
		{"{\"a\":1e5}", QTK_JSON_INTS},
		{"{\"a\":1.5}", 0},
		{"{\"a\":[1,2}", 0},
		{"{\"a\":{\"b\":1,\"b\":2}}", 0},
		{"{\"a\":\"\\u0000\"}", 0},
		{"{\"a\":1", 0},
		{"{\"a\":tru}", 0},
		{" {\"a\":1}", QTK_JSON_BRACE_FIRST},
		{"{\"\\ud800\":1}", 0},
		{"{\"a\":1}{", 0},
		{"{\"w\":{\"shape\":[1.5]}}", QTK_JSON_INTS},
		{"{\"__metadata__\":{\"k\":1.5}}", QTK_JSON_INTS},
		{"{\"w\":{\"shape\":[1],\"shape\":[2]}}", QTK_JSON_INTS},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *t = cases[i].txt;
		qtk_err e1, e2;
		qtk_err_clear(&e1);
		qtk_err_clear(&e2);
		qtk_json_doc d;
		int r1 = qtk_json_parse(t, strlen(t), cases[i].flags, "f", 8, &e1, &d);
		memb want = {{0}, 0}, got = {{0}, 0};
		if (!r1) {
			size_t k = 0;
			for (const cJSON *c = d.root->child; c; c = c->next, k++)
				memb_one(&want, c->string, c, qtk_json_key_off(&d, k, 8));
			qtk_json_doc_free(&d);
		}
		int r2 = qtk_json_each_member(t, strlen(t), cases[i].flags, "f", 8, &e2, memb_one, &got);
		CHECK((r1 == 0) == (r2 == 0), "case %zu: parse %d (%s), each member %d (%s)", i, r1, e1.msg, r2, e2.msg);
		if (!r1 && !r2)
			CHECK(want.n == got.n && !strcmp(want.txt, got.txt), "case %zu: members '%s' / '%s'", i, want.txt, got.txt);
		/* the same subject (the member around the error) and, where both name an offset in the
		 * text, the same one (a text that ends inside the object: its last byte by cJSON, just
		 * past it here) */
		if (r1 && r2)
			CHECK(!strcmp(e1.subject, e2.subject), "case %zu: subjects '%s' / '%s'", i, e1.subject, e2.subject);
		if (r1 && r2 && e1.offset >= 0 && e2.offset >= 0 && strchr(t, '}'))
			CHECK(e1.offset == e2.offset, "case %zu: offsets %lld / %lld (%s / %s)", i, (long long)e1.offset,
			      (long long)e2.offset, e1.msg, e2.msg);
	}
}

/* The place of a root member's empty list in cJSON_Print's text: entries written there one at a
 * time give cJSON_Print's text of the whole; a nested member or a string that spells the key is
 * not the place; no such member, none. */
static void test_list_place(void)
{
	cJSON *whole = cJSON_Parse("{\"a\":{\"tensors\":[]},\"s\":\"\\n\\t\\\"tensors\\\":\\t[]\","
				   "\"tensors\":[{\"n\":1,\"x\":[1,2]},{\"n\":2}],\"z\":true}");
	cJSON *empty = cJSON_Duplicate(whole, true);
	cJSON_ReplaceItemInObjectCaseSensitive(empty, "tensors", cJSON_CreateArray());
	char *w = cJSON_Print(whole), *e = cJSON_Print(empty);
	const size_t at = qtk_json_list_place(e, "tensors");
	CHECK(e && at != SIZE_MAX && at < strlen(e) && e[at - 1] == '[' && e[at] == ']', "place found");
	qtk_jtext t = {0};
	bool first = true;
	if (e && at != SIZE_MAX) {
		qtk_jtext_raw(&t, e, at);
		for (const cJSON *c = cJSON_GetObjectItemCaseSensitive(whole, "tensors")->child; c; c = c->next) {
			if (!first)
				qtk_jtext_raw(&t, ", ", 2);
			first = false;
			qtk_json_fmt(&t, c, 2);
		}
		qtk_jtext_raw(&t, e + at, strlen(e + at));
	}
	CHECK(qtk_jtext_ok(&t) && w && !strcmp(t.p, w), "entries at the place give the whole:\n%s\n%s", t.p, w);
	CHECK(qtk_json_list_place(w, "tensors") == SIZE_MAX, "a list with entries is no place");
	CHECK(qtk_json_list_place(e, "x") == SIZE_MAX && qtk_json_list_place(NULL, "tensors") == SIZE_MAX, "no place");
	qtk_jtext_free(&t);
	cJSON_free(w);
	cJSON_free(e);
	cJSON_Delete(whole);
	cJSON_Delete(empty);
}

int main(void)
{
	test_each_member();
	test_nameless();
	test_numbers();
	test_trees();
	test_mutations();
	test_arena();
	test_list_place();
	return T_DONE();
}
