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
	{"search-regex-prompt-80x24", 80, 24, true, "/attn_(q|k)", "(4 matches)"},
	{"search-invalid-prompt-80x24", 80, 24, true, "/attn_(q", "(invalid regex: "},
	{"pane-keys-80x24", 80, 24, true, "4", "no provenance record"},
	{"sort-reverse-80x24", 80, 24, true, "sr", "[sort: name rev]"},
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

/* Item by item, what a user coming from llama.cpp's tools expects of the browser. */
static void run_browse(qtk_model *m)
{
	tui t;
	tui_init(&t, m, 80, 24, true, false);
	/* number keys select the panes in the order the tabs show them */
	static const int panes[] = {P_META, P_MEMORY, P_DETAIL, P_PROV, P_TENSORS};
	for (int k = 0; k < 5; k++) {
		char key[2] = {(char)('1' + panes[k]), 0};
		play(&t, key);
		CHECK(t.pane == panes[k], "key %s: pane %d (want %d)", key, t.pane, panes[k]);
	}
	/* reverse sort: the last row first; S steps back through the sort columns */
	size_t last_top = t.rows[t.nrows - 1].idx;
	play(&t, "r");
	CHECK(t.reverse && !t.rows[0].group_row && t.rows[0].idx == last_top && !t.msg[0],
	      "r reverses file order (first row %u)", t.rows[0].idx);
	play(&t, "rS");
	CHECK(!t.reverse && t.sort == 5, "S steps back (sort %d)", t.sort);
	play(&t, "s");
	/* search: an extended regex, any case, with a count */
	play(&t, "/ATTN_(Q|K)\\.<Enter>");
	CHECK(strstr(t.msg, "match 1 of 4"), "regex search count: %s", t.msg);
	play(&t, "n");
	CHECK(strstr(t.msg, "match 2 of 4"), "n advances the count: %s", t.msg);
	play(&t, "N");
	CHECK(strstr(t.msg, "match 1 of 4"), "N goes back: %s", t.msg);
	long ti = tui_cur_tensor(&t);
	CHECK(ti >= 0 && !strcmp(m->tensors[ti].name, "blk.0.attn_q.weight"), "first match");
	/* an invalid regex says so and the browser goes on */
	CHECK(play(&t, "/attn_(q<Enter>"), "invalid regex does not quit");
	CHECK(!t.searching && strstr(t.msg, "invalid regex"), "invalid regex message: %s", t.msg);
	CHECK(tui_cur_tensor(&t) == ti, "cursor stays on an invalid regex");
	play(&t, "/^output<Enter>");
	ti = tui_cur_tensor(&t);
	CHECK(ti >= 0 && !strncmp(m->tensors[ti].name, "output", 6) && strstr(t.msg, "of 2"), "anchored regex: %s", t.msg);
	/* mouse: a click on a tab, on a row, on the selected row; the wheel */
	play(&t, "g");
	int x3 = -1;
	for (int x = 0; x < 80 && x3 < 0; x++)
		if (tui_tab_at(&t, x) == P_META)
			x3 = x;
	char *scr = render(&t, 80, 24);
	const char *line2 = scr ? strchr(scr, '\n') + 1 : NULL;
	CHECK(x3 > 0 && line2 && !strncmp(line2 + 1 + x3, " 3 Metadata", 11), "tab 3 drawn where a click finds it");
	free(scr);
	CHECK(tui_click(&t, 1, x3 + 3) && t.pane == P_META, "click on a tab");
	tui_click(&t, 1, 2);
	CHECK(t.pane == P_TENSORS, "click on tab 1");
	tui_click(&t, 4 + 3, 10);
	CHECK(t.cur == 3, "click selects the row (cur %zu)", t.cur);
	unsigned r = tui_click(&t, 4 + 3, 10);
	CHECK((r & TUI_COMPUTE) && t.pane == P_DETAIL, "click on the selected row opens it");
	if (r & TUI_COMPUTE)
		tui_compute(&t, NULL, NULL);
	play(&t, "1");
	tui_key(&t, TK_WHEEL_DOWN);
	CHECK(t.cur == 6, "wheel down moves three rows (%zu)", t.cur);
	tui_key(&t, TK_WHEEL_UP);
	tui_key(&t, TK_WHEEL_UP);
	CHECK(t.cur == 0, "wheel up (%zu)", t.cur);
	play(&t, "4");
	tui_key(&t, TK_WHEEL_DOWN);
	CHECK(t.pscroll == 3, "wheel scrolls a text pane (%d)", t.pscroll);
	tui_free(&t);
}

/* A mixed-type conversion of the sample: filtered group sums and the provenance summary. */
/* The provenance pane's record text: its last lines are cJSON_Print's layout of the record, split
 * at line ends and every 1021 bytes, tabs as two spaces, each shown inert (made here the way
 * the pane made them before it wrote them into one block). */
static void check_record_lines(const tui *t, const qtk_model *m)
{
	size_t len = 0;
	const char *txt = qtk_prov_find(m, &len, NULL);
	cJSON *j = txt ? cJSON_ParseWithLength(txt, len) : NULL;
	char *p = j ? cJSON_Print(j) : NULL;
	cJSON_Delete(j);
	size_t n = 0, bad = 0, k = 0;
	char buf[1024];
	for (const char *c = p; c; c++) {
		if (*c == '\n' || !*c || k >= sizeof buf - 3) {
			char *d = qtk_text_dup(buf, k, 0);
			n++;
			const size_t at = t->nprov - t->nprov_block + n - 1;
			bad += !d || at >= t->nprov || strcmp(d, t->prov[at]);
			qtk_free(d);
			k = 0;
			if (!*c)
				break;
			if (*c != '\n')
				buf[k++] = *c;
		} else if (*c == '\t') {
			buf[k++] = ' ';
			buf[k++] = ' ';
		} else {
			buf[k++] = *c;
		}
	}
	CHECK(p && n == t->nprov_block && !bad, "record text: %zu lines, %zu in the pane, %zu differ", n, t->nprov_block, bad);
	cJSON_free(p);
}

static void run_converted(const char *dir)
{
	char cmd[1024], out[512];
	snprintf(out, sizeof out, "%s/q4km.gguf", dir);
	snprintf(cmd, sizeof cmd, "SOURCE_DATE_EPOCH=1700000000 bin/qconvert -q %s/tiny-llama-f32.gguf %s --to Q4_K_M", dir,
		 out);
	if (system(cmd) != 0) {
		T_SKIP("filtered group sums (bin/qconvert not built)");
		return;
	}
	qtk_err e;
	qtk_model *m = qtk_open(out, &e);
	CHECK(m != NULL, "open %s", out);
	if (!m)
		return;
	tui t;
	tui_init(&t, m, 80, 24, true, false);
	int want = -1;
	for (size_t k = 0; k < t.tt.ntypes; k++)
		if (!strcmp(t.tt.types[k].type, "Q4_K"))
			want = (int)k;
	while (t.filter != want && t.filter + 1 < (int)t.tt.ntypes)
		play(&t, "f");
	CHECK(want >= 0 && t.filter == want, "filter on Q4_K");
	/* every group row shows the sums of its members the filter lets through */
	bool ok = true;
	for (size_t g = 0; g < t.ngroups; g++) {
		uint64_t by = 0, pa = 0;
		size_t n = 0;
		for (size_t i = 0; i < m->ntensors; i++)
			if (t.tgroup[i] == (int)g && !strcmp(qtk_layout_type_name(&m->tensors[i].layout), "Q4_K")) {
				by += m->tensors[i].n_bytes;
				pa += m->tensors[i].n_params;
				n++;
			}
		ok &= t.groups[g].vn == n && t.groups[g].v_bytes == by && t.groups[g].v_params == pa && n < t.groups[g].n;
	}
	CHECK(ok && t.ngroups == 2, "group sums follow the filter");
	char *scr = render(&t, 80, 24);
	CHECK(scr && strstr(scr, "blk.0  (7 of 9)"), "group row counts the filtered members");
	if (scr)
		snapshot("filter-q4k-80x24", scr);
	free(scr);
	/* the provenance pane opens on a one-line summary of the record */
	play(&t, "4");
	scr = render(&t, 80, 24);
	CHECK(scr && strstr(scr, "quantized by qtk 0.1.0 from qtk sample tiny-llama on 2023-11-14,") &&
			  strstr(scr, "5 tensors\n") && strstr(scr, "exact, 16 re-fitted"),
	      "provenance summary: %s", scr ? scr : "");
	if (scr)
		snapshot("provenance-summary-80x24", scr);
	free(scr);
	check_record_lines(&t, m);
	play(&t, "<Enter>"); /* check the tensors against the record: the result above the same text */
	CHECK(t.nprov && strstr(t.prov[0], "digests: ok: all 21 tensors match the record"), "digests checked: %s",
	      t.nprov ? t.prov[0] : "");
	check_record_lines(&t, m);
	tui_free(&t);
	qtk_close(m);
}

/* Large values show as a size and a SHA-256; binary files are not dumped as text. */
static void run_large(const char *gguf)
{
	qtk_err e;
	qtk_model *m = qtk_open(gguf, &e);
	if (!m) {
		CHECK(0, "open");
		return;
	}
	char *big = malloc(70001);
	if (!big) {
		qtk_close(m);
		return;
	}
	memset(big, 'a', 70000);
	big[70000] = 0;
	qtk_model_set_kv_str(m, "x.big", big);
	free(big);
	uint8_t blob[102400];
	for (size_t i = 0; i < sizeof blob; i++)
		blob[i] = (uint8_t)i;
	qtk_model_add_blob(m, "tokenizer.model", blob, sizeof blob);
	tui t;
	tui_init(&t, m, 160, 30, true, false);
	play(&t, "3/x\\.big<Enter>");
	char *s = render(&t, 160, 30);
	static const char want_a[] = "68.4 KiB  sha256:66915c0872933db504e7578828dd85b7e74a4e0a061f9756793b89c4151bd4b5";
	CHECK(s && strstr(s, want_a) && !strstr(s, "aaaaaaaa"), "large string as size and digest: %s", s ? s : "");
	free(s);
	play(&t, "/tokenizer\\.model<Enter>");
	s = render(&t, 160, 30);
	static const char want_b[] = "100.0 KiB  sha256:27783e87963a4efb6829b531c9ba57b44f45797f6770bd637fbf0d807cbdbae0";
	CHECK(s && strstr(s, "binary file") && strstr(s, want_b), "binary blob as size and digest: %s", s ? s : "");
	free(s);
	size_t before = t.nmrows;
	play(&t, "<Enter>");
	CHECK(t.nmrows == before && strstr(t.msg, "binary"), "Enter does not dump a binary file");
	tui_free(&t);
	qtk_close(m);
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

/* Records whose lines cannot be taken where they lie (a line long enough to be cut, a control
 * character, JSON outside the tree-less layout's subset, a record that is no valid record): the
 * pane's lines are still cJSON_Print's layout split as before. */
static void run_record_forms(void)
{
	char longs[3000];
	memset(longs, 'x', sizeof longs - 1);
	longs[sizeof longs - 1] = 0;
	char *texts[4];
	size_t nt = 0;
	size_t cap = sizeof longs + 64;
	texts[nt] = malloc(cap);
	snprintf(texts[nt++], cap, "{\"a\":{\"b\":[1,2,{\"c\":\"%s\"}]},\"t\":\"\\ttab\"}", longs);
	texts[nt++] = strdup("{\"ctl\":\"a\\u0001b\",\"ok\":true,\"n\":[1.5,-2,3e2]}");
	texts[nt++] = strdup("{\"record_version\":1,\"output\":{\"tensors\":[]},\"bidi\":\"\xe2\x80\xae" "evil\"}");
	texts[nt++] = strdup("[1,2,3]");
	for (size_t i = 0; i < nt; i++) {
		qtk_model *m = qtk_model_new();
		if (m)
			m->path = qtk_strdup("record-form.gguf"); /* the panes name the file */
		if (!m || !m->path || !texts[i] || qtk_model_set_kv_str(m, "qtk.provenance", texts[i])) {
			CHECK(0, "record form %zu: model", i);
			qtk_close(m);
			continue;
		}
		tui t;
		CHECK(tui_init(&t, m, 120, 40, true, false) == 0, "record form %zu: init", i);
		check_record_lines(&t, m);
		tui_free(&t);
		qtk_close(m);
	}
	for (size_t i = 0; i < nt; i++)
		free(texts[i]);
}

/* A directory given as "dir/" is titled by its name, not by the empty string after the slash. */
static void run_dir_title(const char *dir)
{
	char path[512];
	snprintf(path, sizeof path, "%s/tiny-llama//", dir);
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	CHECK(m != NULL, "open %s", path);
	if (!m)
		return;
	tui t;
	CHECK(tui_init(&t, m, 100, 24, true, false) == 0, "dir title: init");
	char *got = render(&t, 100, 24);
	size_t first = got ? strcspn(got, "\n") : 0;
	if (got && !(strstr(got, "tiny-llama") && (size_t)(strstr(got, "tiny-llama") - got) < first))
		printf("  first line: %.*s\n", (int)first, got);
	CHECK(got && strstr(got, "tiny-llama") && (size_t)(strstr(got, "tiny-llama") - got) < first,
	      "dir title: the first line names tiny-llama");
	free(got);
	tui_free(&t);
	qtk_close(m);
}

int main(void)
{
	char dir[] = "/tmp/qtk-tui-XXXXXX", cmd[512], gguf[256];
	run_schemes();
	run_record_forms();
	if (t_samples(dir))
		return T_DONE();
	snprintf(gguf, sizeof gguf, "%s/tiny-llama-f32.gguf", dir);
	qtk_err e;
	qtk_model *m = qtk_open(gguf, &e);
	CHECK(m != NULL, "open sample");
	if (m) {
		run_scenes(m);
		run_checks(m);
		run_browse(m);
		qtk_close(m);
		run_template(gguf);
		run_large(gguf);
		run_converted(dir);
		run_dir_title(dir);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("note: could not remove %s\n", dir);
	return T_DONE();
}
