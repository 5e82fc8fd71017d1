/* test_tui.c - the browser without a terminal: scripted keys against the
 * model, the view drawn into a fixed-size grid, dumps compared with
 * tests/tui/NAME.txt. QTK_UPDATE_SNAPSHOTS=1 rewrites the snapshots (look at
 * them before committing). Uses the project's own sample model. */
#include "t.h"
#include "../inspect/tui.h"

#include <stdlib.h>
#include <unistd.h>

static const struct {
	const char *name;
	int key;
} named_keys[] = {
	{"Enter", TK_ENTER}, {"Tab", TK_TAB}, {"BTab", TK_BTAB}, {"Esc", TK_ESC},   {"Up", TK_UP},
	{"Down", TK_DOWN},   {"Left", TK_LEFT}, {"Right", TK_RIGHT}, {"PgUp", TK_PGUP}, {"PgDn", TK_PGDN},
	{"BS", TK_BS},       {"Home", TK_HOME}, {"End", TK_END},
};

/* Feed a script: literal characters, or <Name> for special keys. Runs any
 * computation a key asks for (synchronously). Returns false on QUIT. */
static bool play(tui *t, const char *script)
{
	for (const char *p = script; *p; p++) {
		int key = (unsigned char)*p;
		if (*p == '<') {
			const char *e = strchr(p, '>');
			for (size_t k = 0; e && k < sizeof named_keys / sizeof *named_keys; k++)
				if (strlen(named_keys[k].name) == (size_t)(e - p - 1) && !strncmp(p + 1, named_keys[k].name, (size_t)(e - p - 1)))
					key = named_keys[k].key;
			if (e && key != '<')
				p = e;
		}
		unsigned r = tui_key(t, key);
		if (r & TUI_COMPUTE)
			tui_compute(t, NULL, NULL);
		if (r & TUI_QUIT)
			return false;
	}
	return true;
}

static char *render(tui *t, int w, int h)
{
	tui_screen s;
	if (grid_init(&s, w, h))
		return NULL;
	tui_resize(t, w, h);
	tui_draw(t, &s);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	grid_dump(&s, f);
	fclose(f);
	grid_free(&s);
	return buf;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int c;
	while ((c = fgetc(f)) != EOF) {
		if (len + 2 > cap) {
			cap = cap ? cap * 2 : 4096;
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		buf[len++] = (char)c;
	}
	fclose(f);
	if (buf)
		buf[len] = 0;
	return buf;
}

/* Compare a rendering with tests/tui/NAME.txt (or write it when updating). */
static void snapshot(const char *name, const char *got)
{
	char path[256];
	snprintf(path, sizeof path, "tests/tui/%s.txt", name);
	const char *upd = getenv("QTK_UPDATE_SNAPSHOTS");
	if (upd && *upd == '1') {
		FILE *f = fopen(path, "wb");
		CHECK(f && fputs(got, f) >= 0 && fclose(f) == 0, "write %s", path);
		return;
	}
	char *want = slurp(path);
	if (!want) {
		CHECK(0, "%s: missing snapshot (run with QTK_UPDATE_SNAPSHOTS=1)", path);
		return;
	}
	bool same = strcmp(want, got) == 0;
	if (!same) { /* show the first differing line */
		const char *a = want, *b = got;
		int line = 1;
		while (*a && *a == *b) {
			line += *a == '\n';
			a++;
			b++;
		}
		while (a > want && a[-1] != '\n') {
			a--;
			b--;
		}
		printf("  %s line %d\n  want: %.*s\n  got:  %.*s\n", path, line, (int)strcspn(a, "\n"), a,
		       (int)strcspn(b, "\n"), b);
	}
	CHECK(same, "%s differs", path);
	free(want);
}

typedef struct scene {
	const char *name;
	int w, h;
	bool utf8;
	const char *keys;
	const char *must;   /* text the screen must show */
} scene;

static const scene scenes[] = {
	{"tensors-80x24", 80, 24, true, "", "blk.0  (9)"},
	{"tensors-120x40", 120, 40, true, "", "params"},
	{"tensors-ascii-80x24", 80, 24, false, "", "- blk.0  (9)"},
	{"detail-attn_q-80x24", 80, 24, true, "jjj<Enter>", "outliers"},
	{"detail-attn_q-120x40", 120, 40, true, "jjj<Enter>", "salient:"},
	{"detail-scrolled-ascii-80x24", 80, 24, false, "jjj<Enter><PgDn>", "input-channel absmax"},
	{"detail-not-computed-80x24", 80, 24, true, "jjjj<Tab>", "Press Enter to compute"},
	{"collapsed-80x24", 80, 24, true, "j<Left>jjj<Left>", "blk.1  (9)"},
	{"sort-bytes-80x24", 80, 24, true, "ss", "sort: bytes"},
	{"search-80x24", 80, 24, true, "/ffn_d<Enter>n", "ffn_down.weight"},
	{"search-prompt-80x24", 80, 24, true, "/attn_o", "/attn_o_"},
	{"metadata-80x24", 80, 24, true, "<Tab><Tab>", "general.architecture"},
	{"metadata-array-80x24", 80, 24, true, "<Tab><Tab>/tokens<Enter><Enter>jj", "[1]  <s>"},
	{"provenance-80x24", 80, 24, true, "<Tab><Tab><Tab>", "no provenance record"},
	{"memory-80x24", 80, 24, true, "<BTab>", "KV q8_0"},
	{"memory-120x40", 120, 40, true, "<BTab>", "<- trained"},
	{"help-80x24", 80, 24, true, "?", "any key closes"},
	{"too-small-30x8", 30, 8, true, "", "terminal too small"},
};

static void run_scenes(qtk_model *m)
{
	for (size_t i = 0; i < sizeof scenes / sizeof *scenes; i++) {
		const scene *sc = &scenes[i];
		tui t;
		CHECK(tui_init(&t, m, sc->w, sc->h, sc->utf8, false) == 0, "%s: init", sc->name);
		play(&t, sc->keys);
		char *got = render(&t, sc->w, sc->h);
		CHECK(got && strstr(got, sc->must), "%s: screen lacks '%s'", sc->name, sc->must);
		if (got)
			snapshot(sc->name, got);
		free(got);
		tui_free(&t);
	}
}

/* Behaviour beyond pictures: keys, resize, quitting, laziness, determinism. */
static void run_checks(qtk_model *m)
{
	tui t;
	tui_init(&t, m, 80, 24, true, false);
	CHECK(t.nrows == 21 + 2, "rows: %zu (21 tensors + 2 groups)", t.nrows);
	CHECK(t.stats[0] == NULL && t.pending < 0, "nothing computed before Enter");
	play(&t, "jjj<Enter>");
	long ti = tui_cur_tensor(&t);
	CHECK(ti >= 0 && !strcmp(m->tensors[ti].name, "blk.0.attn_q.weight"), "cursor on attn_q");
	size_t computed = 0;
	for (size_t i = 0; i < m->ntensors; i++)
		computed += t.stats[i] != NULL;
	CHECK(computed == 1 && t.pane == P_DETAIL, "Enter computes one tensor only (%zu)", computed);
	play(&t, "<Esc>G");
	CHECK(t.pane == P_TENSORS && t.cur == t.nrows - 1, "Esc back, G last");
	play(&t, "g");
	CHECK(t.cur == 0, "g first");
	play(&t, "<PgDn>");
	CHECK(t.cur == 18, "PgDn moves a page (%zu)", t.cur);
	play(&t, "f");
	CHECK(t.filter == 0 && t.nrows == 23, "f filters by the only type");
	play(&t, "f");
	CHECK(t.filter == -1, "f cycles back to all");
	for (int k = 0; k < 6; k++)
		play(&t, "s");
	CHECK(t.sort == 0, "s cycles through all sort columns");
	play(&t, "/nothing-like-this<Enter>");
	CHECK(strstr(t.msg, "not found") != NULL, "search miss message: %s", t.msg);
	play(&t, "/output<Enter>");
	ti = tui_cur_tensor(&t);
	CHECK(ti >= 0 && strstr(m->tensors[ti].name, "output"), "search hit");
	play(&t, "n");
	long t2 = tui_cur_tensor(&t);
	CHECK(t2 >= 0 && t2 != ti && strstr(m->tensors[t2].name, "output"), "n: next match");
	play(&t, "N");
	CHECK(tui_cur_tensor(&t) == ti, "N: previous match");
	/* search opens a closed group */
	play(&t, "g/blk.1.attn_k<Enter>");
	play(&t, "<Left>");
	CHECK(tui_cur_tensor(&t) < 0, "Left closes the group and lands on it");
	play(&t, "g/blk.1.attn_k<Enter>");
	ti = tui_cur_tensor(&t);
	CHECK(ti >= 0 && !strcmp(m->tensors[ti].name, "blk.1.attn_k.weight"), "search reopens the group");
	/* resize keeps the cursor visible */
	tui_resize(&t, 80, 10);
	char *scr = render(&t, 80, 10);
	CHECK(scr && strstr(scr, "attn_k.weight"), "cursor row visible after resize");
	free(scr);
	CHECK(!play(&t, "q"), "q quits");
	tui_free(&t);

	/* determinism: the same script draws the same screen */
	tui a, b;
	tui_init(&a, m, 120, 40, true, false);
	tui_init(&b, m, 120, 40, true, false);
	play(&a, "jjjjjj<Enter>");
	play(&b, "jjjjjj<Enter>");
	char *sa = render(&a, 120, 40), *sb = render(&b, 120, 40);
	CHECK(sa && sb && !strcmp(sa, sb), "same keys, same screen");
	free(sa);
	free(sb);
	tui_free(&a);
	tui_free(&b);
}

/* Metadata safety: a chat template is shown escaped, never interpreted. */
static void run_template(const char *gguf)
{
	qtk_err e;
	qtk_model *m = qtk_open(gguf, &e);
	if (!m) {
		CHECK(0, "open");
		return;
	}
	qtk_model_set_kv_str(m, "tokenizer.chat_template", "{% for m in messages %}\x1b[31m{{ m }}\n{% endfor %}");
	tui t;
	tui_init(&t, m, 160, 30, true, false);
	play(&t, "<Tab><Tab>/chat_template<Enter>");
	char *s = render(&t, 160, 30);
	CHECK(s && strstr(s, "{% for m in messages %}\\x1b[31m{{ m }}\\n{% endfor %}"), "template escaped: %s", s ? s : "");
	CHECK(s && !strchr(s, '\x1b'), "no raw escape reaches the screen");
	free(s);
	play(&t, "<Enter>");
	s = render(&t, 160, 30);
	CHECK(s && strstr(s, "{% endfor %}") && strstr(s, "\\x1b[31m{{ m }}"), "expanded template lines");
	free(s);
	tui_free(&t);
	/* characters that could reorder, hide or widen text are escaped; overlong forms too */
	qtk_model_set_kv_str(m, "x.tricky", "a\xe2\x80\xae" "b\xc0\xbc" "c\xe4\xb8\xad" "d\xcc\x81" "e\xc3\xa9");
	tui_init(&t, m, 160, 30, true, false);
	play(&t, "<Tab><Tab>/x.tricky<Enter>");
	s = render(&t, 160, 30);
	CHECK(s && strstr(s, "a\\u{202e}b\\xc0\\xbcc\\u{4e2d}d\\u{301}e\xc3\xa9"), "tricky text escaped: %s", s ? s : "");
	CHECK(s && !strstr(s, "\xe2\x80\xae"), "no raw bidi override on screen");
	free(s);
	tui_free(&t);
	tui_init(&t, m, 160, 30, true, false);
	play(&t, "<Tab><Tab>/chat_template<Enter><Enter>");
	s = render(&t, 160, 30);
	CHECK(s && strstr(s, "{% endfor %}") && strstr(s, "\\x1b[31m{{ m }}"), "expanded template lines");
	free(s);
	tui_free(&t);
	/* a provenance record is pretty-printed in its pane */
	qtk_model_set_kv_str(m, "qtk.provenance", "{\"record_version\":1,\"tool\":{\"name\":\"qtk\"}}");
	tui_init(&t, m, 80, 24, true, false);
	play(&t, "<Tab><Tab><Tab>");
	s = render(&t, 80, 24);
	CHECK(s && strstr(s, "record from GGUF key qtk.provenance") && strstr(s, "\"record_version\":") &&
		      strstr(s, "\"name\":"),
	      "provenance pane: %s", s ? s : "");
	free(s);
	tui_free(&t);
	qtk_close(m);
}

/* The detail pane names how a compressed-tensors / NVFP4 layer shares its scales. */
static void run_schemes(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("scheme lines of the detail pane (no fixtures)");
		return;
	}
	static const struct { const char *dir, *must; } cases[] = {
		{"hf/ct/ct-fp8-block", "scales per block, symmetric"},
		{"hf/ct/ct-w4a16-g32-asym", "scales per group, with zero points"},
		{"hf/ct/ct-nvfp4", "global scale divides (compressed-tensors)"},
		{"hf/ct/modelopt-nvfp4", "global scale multiplies (ModelOpt)"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char path[1024];
		snprintf(path, sizeof path, "%s/%s", fx, cases[i].dir);
		qtk_err e;
		qtk_model *m = qtk_open(path, &e);
		CHECK(m != NULL, "open %s: %s", path, m ? "" : e.msg);
		if (!m)
			continue;
		tui t;
		tui_init(&t, m, 120, 40, true, false);
		play(&t, "/down_proj<Enter><Enter>");
		char *got = render(&t, 120, 40);
		CHECK(got && strstr(got, cases[i].must), "%s: detail lacks '%s'", cases[i].dir, cases[i].must);
		free(got);
		tui_free(&t);
		qtk_close(m);
	}
}

int main(void)
{
	char dir[] = "/tmp/qtk-tui-XXXXXX", cmd[512], gguf[256];
	run_schemes();
	if (t_samples(dir))
		return T_DONE();
	snprintf(gguf, sizeof gguf, "%s/tiny-llama-f32.gguf", dir);
	qtk_err e;
	qtk_model *m = qtk_open(gguf, &e);
	CHECK(m != NULL, "open sample");
	if (m) {
		run_scenes(m);
		run_checks(m);
		qtk_close(m);
		run_template(gguf);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("note: could not remove %s\n", dir);
	return T_DONE();
}
