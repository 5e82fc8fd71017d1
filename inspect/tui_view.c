/* tui_view.c - draws the browser's model into a character grid (ncdu-style:
 * the whole frame each time). No curses here: the grid is what tests compare
 * and what tui_curses.c copies to the terminal. */
#include "tui.h"
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---- The grid ----------------------------------------------------------------- */

int grid_init(tui_screen *s, int w, int h)
{
	memset(s, 0, sizeof *s);
	if (w < 1 || h < 1)
		return -1;
	s->cells = qtk_calloc((size_t)w * (size_t)h, sizeof *s->cells);
	if (!s->cells)
		return -1;
	s->w = w;
	s->h = h;
	grid_clear(s);
	return 0;
}

void grid_free(tui_screen *s)
{
	qtk_free(s->cells);
	memset(s, 0, sizeof *s);
}

void grid_clear(tui_screen *s)
{
	for (int i = 0; i < s->w * s->h; i++) {
		s->cells[i].ch[0] = ' ';
		s->cells[i].ch[1] = 0;
		s->cells[i].role = R_NORMAL;
	}
	s->cur_y = s->cur_x = 0;
}

int grid_put(tui_screen *s, int y, int x, const char *text, int max, int role)
{
	if (y < 0 || y >= s->h)
		return 0;
	int n = 0;
	const char *p = text;
	size_t left = strlen(text);
	while (left && n < max && x + n < s->w) {
		/* one cell per code point: what is not known to take one cell shows as '?' */
		uint32_t cp = 0;
		int k = qtk_utf8_decode(p, left, &cp);
		if (x + n >= 0) {
			tui_cell *c = &s->cells[y * s->w + x + n];
			if (!k || !qtk_text_cp_narrow(cp)) {
				c->ch[0] = '?';
				c->ch[1] = 0;
			} else {
				memcpy(c->ch, p, (size_t)k);
				c->ch[k] = 0;
			}
			c->role = (uint8_t)role;
		}
		k = k ? k : 1;
		p += k;
		left -= (size_t)k;
		n++;
	}
	return n;
}

void grid_fill(tui_screen *s, int y, int x, int n, const char *ch, int role)
{
	for (int i = 0; i < n; i++)
		grid_put(s, y, x + i, ch, 1, role);
}

void grid_dump(const tui_screen *s, FILE *out)
{
	for (int y = 0; y < s->h; y++) {
		int end = s->w;
		bool sel = false;
		for (int x = 0; x < s->w; x++)
			sel |= s->cells[y * s->w + x].role == R_SEL;
		while (end > 0 && !strcmp(s->cells[y * s->w + end - 1].ch, " ") && s->cells[y * s->w + end - 1].role != R_SEL)
			end--;
		while (end > 0 && !strcmp(s->cells[y * s->w + end - 1].ch, " "))
			end--;
		fputc(sel ? '>' : ' ', out); /* the selected row (reverse video on a terminal) */
		for (int x = 0; x < end; x++)
			fputs(s->cells[y * s->w + x].ch, out);
		fputc('\n', out);
	}
}

/* ---- Glyphs (UTF-8 or ASCII) ----------------------------------------------- */

typedef struct tv_glyphs {
	const char *vbar[9];  /* 0..8 eighths */
	const char *hfull, *vline, *open, *closed, *ell, *sigma, *times, *dot;
	const char *stack[4]; /* stacked type bar fills */
} tv_glyphs;

static const tv_glyphs tv_utf8 = {
	{" ", "\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83", "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
	 "\xe2\x96\x87", "\xe2\x96\x88"},
	"\xe2\x96\x88", "\xe2\x94\x82", "\xe2\x96\xbe", "\xe2\x96\xb8", "\xe2\x80\xa6", "\xcf\x83", "\xc3\x97",
	"\xc2\xb7",
	{"\xe2\x96\x88", "\xe2\x96\x93", "\xe2\x96\x92", "\xe2\x96\x91"},
};

static const tv_glyphs tv_ascii = {
	{" ", ".", ".", ".", ":", ":", ":", "#", "#"}, "#", "|", "-", "+", "~", "sigma", "x", "-", {"#", "=", "-", "."},
};

static const tv_glyphs *tv_g(const tui *t) { return t->utf8 ? &tv_utf8 : &tv_ascii; }

/* ---- Formatting helpers ---------------------------------------------------- */

static void tv_count(uint64_t v, char *buf, size_t n)
{
	if (v < 10000)
		snprintf(buf, n, "%llu", (unsigned long long)v);
	else if (v < 1000000ull)
		snprintf(buf, n, "%.1fK", (double)v / 1e3);
	else if (v < 1000000000ull)
		snprintf(buf, n, "%.2fM", (double)v / 1e6);
	else
		snprintf(buf, n, "%.2fB", (double)v / 1e9);
}

static double tv_bpw(uint64_t bytes, uint64_t params) { return params ? 8.0 * (double)bytes / (double)params : 0; }

/* Text right-aligned in a field of w cells. */
static void tv_right(tui_screen *s, int y, int x, int w, const char *text, int role)
{
	int n = (int)strlen(text);
	if (n > w)
		n = w;
	grid_put(s, y, x + w - n, text, w, role);
}

/* Text in at most w cells, ending in an ellipsis when cut. */
static void tv_put_cut(const tui *t, tui_screen *s, int y, int x, const char *text, int w, int role)
{
	int cells = 0;
	for (const unsigned char *q = (const unsigned char *)text; *q; q++)
		cells += (*q & 0xC0) != 0x80;
	if (cells <= w) {
		grid_put(s, y, x, text, w, role);
		return;
	}
	grid_put(s, y, x, text, w - 1, role);
	grid_put(s, y, x + w - 1, t->utf8 ? "\xe2\x80\xa6" : "~", 1, role);
}

/* Print into a buffer and draw it; returns cells drawn. */
static int tv_printf(tui_screen *s, int y, int x, int max, int role, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static int tv_printf(tui_screen *s, int y, int x, int max, int role, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return grid_put(s, y, x, buf, max, role);
}

/* Untrusted text shown inert (text.h): escapes for controls, bidi and invalid bytes, and for
 * what does not take one cell (everything non-ASCII on an ASCII terminal). Stops at a
 * newline when `line`. */
static void tv_escape(const tui *t, const char *p, uint64_t len, bool line, char *out, size_t n)
{
	const char *nl = line ? memchr(p, '\n', (size_t)len) : NULL;
	qtk_text_escape(out, n, p, nl ? (size_t)(nl - p) : (size_t)len, t->utf8 ? QTK_TEXT_NARROW : QTK_TEXT_ASCII);
}

/* A name or key from the file: itself, or escaped into buf when it holds controls. */
static const char *tv_name(const char *s, char *buf, size_t n) { return qtk_text_safe(s, 0, buf, n); }

/* ---- Frame: title, tabs, type bar, status ------------------------------------ */

static void tv_title(tui *t, tui_screen *s)
{
	const tv_glyphs *g = tv_g(t);
	const qtk_model *m = t->m;
	char par[32], by[32], ver[8] = "";
	tv_count(t->tt.n_params, par, sizeof par);
	fmt_bytes(t->tt.n_bytes, by, sizeof by);
	if (m->format_version)
		snprintf(ver, sizeof ver, " v%d", m->format_version);
	const qtk_kv *a = qtk_kv_find(m, "general.architecture");
	char ab[256], pb[512];
	const char *arch = a && a->val.type == QTK_V_STR ? tv_name(a->val.v.str.s, ab, sizeof ab) : NULL;
	/* "dir/" and "dir//" are titled "dir", not "" */
	char trimmed[512];
	snprintf(trimmed, sizeof trimmed, "%s", m->path ? m->path : "");
	for (size_t tl = strlen(trimmed); tl > 1 && trimmed[tl - 1] == '/'; tl--)
		trimmed[tl - 1] = 0;
	const char *base = tv_name(qtk_path_base(trimmed), pb, sizeof pb);
	grid_fill(s, 0, 0, s->w, " ", R_TITLE);
	/* the fullest title that fits: drop params, then the tensor count, then the program name */
	char fmtv[48], tens[32], pp[48], bpws[32], line[512];
	snprintf(fmtv, sizeof fmtv, "%s%s", qtk_model_format(m), ver);
	snprintf(tens, sizeof tens, "%zu tensors", m->ntensors);
	snprintf(pp, sizeof pp, "%s params", par);
	snprintf(bpws, sizeof bpws, "%.2f bpw", tv_bpw(t->tt.n_bytes, t->tt.n_params));
	for (int v = 0; v < 4; v++) {
		const char *parts[8];
		int np = 0;
		parts[np++] = fmtv;
		if (arch)
			parts[np++] = arch;
		if (v < 2)
			parts[np++] = tens;
		if (v < 1)
			parts[np++] = pp;
		parts[np++] = by;
		parts[np++] = bpws;
		size_t at = (size_t)snprintf(line, sizeof line, "%s%s ", v < 3 ? "qinspect  " : "", base);
		for (int k = 0; k < np && at < sizeof line; k++)
			at += (size_t)snprintf(line + at, sizeof line - at, "%s%s", k ? " \x01 " : " ", parts[k]);
		int cells = 0;
		for (const unsigned char *q = (const unsigned char *)line; *q; q++)
			cells += (*q & 0xC0) != 0x80;
		if (cells <= s->w - 2 || v == 3)
			break;
	}
	/* draw, replacing the \x01 separators with the dot glyph */
	int tx = 1;
	for (char *p = line, *e; *p && tx < s->w - 1; p = e) {
		e = strchr(p, '\x01');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char seg[512];
		snprintf(seg, sizeof seg, "%.*s", (int)n, p);
		tx += grid_put(s, 0, tx, seg, s->w - 1 - tx, R_TITLE);
		if (!e)
			break;
		tx += grid_put(s, 0, tx, g->dot, 1, R_TITLE);
		e++;
	}

	/* tabs, numbered by the key that selects them (tui_tab_at maps a click back) */
	int x = 1;
	for (int p = 0; p < P_COUNT; p++) {
		char lab[32];
		snprintf(lab, sizeof lab, " %d %s ", p + 1, tui_pane_names[p]);
		x += grid_put(s, 1, x, lab, s->w - x, p == t->pane ? R_TAB_ON : R_TAB);
		x += 1;
	}
	if (x + 16 < s->w)
		tv_right(s, 1, 0, s->w - 1, "? help  q quit", R_DIM);
	/* type histogram: stacked bar of bytes by type plus a legend */
	int bw = s->w >= 100 ? 24 : 12;
	x = grid_put(s, 2, 1, "types ", 6, R_LABEL) + 1;
	int used = 0;
	for (size_t k = 0; k < t->tt.ntypes; k++) {
		double f = t->tt.n_bytes ? (double)t->tt.types[k].n_bytes / (double)t->tt.n_bytes : 0;
		int cells = k + 1 == t->tt.ntypes ? bw - used : (int)lround(f * bw);
		if (cells > bw - used)
			cells = bw - used;
		grid_fill(s, 2, x + used, cells, g->stack[k % 4], R_BAR);
		used += cells;
	}
	x += bw + 2;
	for (size_t k = 0; k < t->tt.ntypes && x < s->w - 8; k++) {
		const type_total *ty = &t->tt.types[k];
		x += grid_put(s, 2, x, g->stack[k % 4], 1, R_BAR) + 1;
		double pct = t->tt.n_bytes ? 100.0 * (double)ty->n_bytes / (double)t->tt.n_bytes : 0.0;
		char ps[16];
		if (pct > 0 && pct < 0.5)
			snprintf(ps, sizeof ps, "<1%%");
		else
			snprintf(ps, sizeof ps, "%.0f%%", pct);
		x += tv_printf(s, 2, x, s->w - x, R_NORMAL, "%s %s (%llu)", ty->type, ps, (unsigned long long)ty->n_tensors) + 2;
	}
}

static void tv_status_hint(tui *t, tui_screen *s, const char *pos, const char *hint);
static void tv_status(tui *t, tui_screen *s, const char *pos) { tv_status_hint(t, s, pos, NULL); }

/* The status line: the search prompt, a message, or the pane's hint (or `hint`), and pos. */
static void tv_status_hint(tui *t, tui_screen *s, const char *pos, const char *hint)
{
	int y = s->h - 1;
	grid_fill(s, y, 0, s->w, " ", R_STATUS);
	if (t->searching) { /* the query as typed, and what it finds so far */
		int n = tv_printf(s, y, 1, s->w - 2, R_STATUS, "/%s_", t->query);
		if (t->re_err[0])
			tv_printf(s, y, 3 + n, s->w - 4 - n, R_STATUS, "(invalid regex: %s)", t->re_err);
		else if (t->qlen)
			tv_printf(s, y, 3 + n, s->w - 4 - n, R_STATUS, "(%zu match%s)", t->nmatch, t->nmatch == 1 ? "" : "es");
		return;
	}
	if (t->msg[0]) {
		grid_put(s, y, 1, t->msg, s->w - 2, R_STATUS);
	} else {
		static const char *const hints[P_COUNT] = {
			"Enter detail  1-5 pane  / search  s/r sort  f filter",
			"j/k scroll  Enter compute  Esc back  Tab pane",
			"Enter expand  / search  Tab pane",
			"j/k scroll  Tab pane",
			"j/k scroll  Tab pane",
		};
		grid_put(s, y, 1, hint ? hint : hints[t->pane], s->w - 2, R_STATUS);
	}
	if (pos)
		tv_right(s, y, 0, s->w - 1, pos, R_STATUS);
}

/* ---- Tensors pane ------------------------------------------------------------- */

typedef struct tv_col {
	const char *name;
	int w, prio;   /* prio: higher survives narrower screens */
	bool right;
} tv_col;

enum { C_SHAPE, C_LAYOUT, C_BITS, C_GROUP, C_PARAMS, C_BYTES, C_BPW, C_SHARE, C_BAR, C_N };

static const tv_col tv_cols[C_N] = {
	[C_SHAPE] = {"shape", 13, 5, false}, [C_LAYOUT] = {"layout", 12, 9, false}, [C_BITS] = {"bits", 4, 3, true},
	[C_GROUP] = {"group", 5, 2, true},   [C_PARAMS] = {"params", 7, 4, true},   [C_BYTES] = {"bytes", 9, 8, true},
	[C_BPW] = {"bpw", 6, 7, true},       [C_SHARE] = {"share", 6, 6, true},     [C_BAR] = {"", 10, 1, false},
};

/* Which columns fit next to a name column of at least 24 cells. */
static void tv_layout_cols(int w, bool *on, int *name_w)
{
	int used = 2;
	for (int c = 0; c < C_N; c++) {
		on[c] = true;
		used += tv_cols[c].w + 1;
	}
	for (int prio = 1; used + 24 > w && prio < 10; prio++)
		for (int c = 0; c < C_N; c++)
			if (on[c] && tv_cols[c].prio == prio) {
				on[c] = false;
				used -= tv_cols[c].w + 1;
			}
	*name_w = w - used;
}

static void tv_hbar(const tui *t, tui_screen *s, int y, int x, int w, double f, int role)
{
	const tv_glyphs *g = tv_g(t);
	int eighths = (int)lround(f * w * 8);
	if (f > 0 && eighths == 0)
		eighths = 1;
	static const char *const part[8] = {"", "\xe2\x96\x8f", "\xe2\x96\x8e", "\xe2\x96\x8d",
					    "\xe2\x96\x8c", "\xe2\x96\x8b", "\xe2\x96\x8a", "\xe2\x96\x89"};
	int full = eighths / 8, rem = eighths % 8;
	grid_fill(s, y, x, full < w ? full : w, g->hfull, role);
	if (full < w && rem)
		grid_put(s, y, x + full, t->utf8 ? part[rem] : (rem >= 4 ? "#" : ""), 1, role);
}

static void tv_tensor_row(tui *t, tui_screen *s, int y, const tui_row *r, const bool *on, int name_w, bool sel,
			  uint64_t bar_max)
{
	const tv_glyphs *g = tv_g(t);
	int role = sel ? R_SEL : R_NORMAL;
	if (sel)
		grid_fill(s, y, 0, s->w, " ", R_SEL);
	char buf[64];
	uint64_t bytes, params;
	int x = 1;
	if (r->group_row) {
		const tui_group *gr = &t->groups[r->idx];
		int rr = sel ? R_SEL : R_GROUP;
		grid_put(s, y, x, gr->open ? g->open : g->closed, 1, rr);
		char nm[96];
		const char *first = t->m->tensors[gr->first].name;
		/* members and sums of what the filter shows: "(3 of 9)" when it hides some */
		if (gr->vn == gr->n)
			snprintf(nm, sizeof nm, "%.*s  (%zu)", (int)(gr->prefix_len ? gr->prefix_len - 1 : 0), first, gr->n);
		else
			snprintf(nm, sizeof nm, "%.*s  (%zu of %zu)", (int)(gr->prefix_len ? gr->prefix_len - 1 : 0), first,
				 gr->vn, gr->n);
		grid_put(s, y, x + 2, nm, name_w - 2, rr);
		bytes = gr->v_bytes;
		params = gr->v_params;
		role = rr;
	} else {
		const qtk_tensor *q = &t->m->tensors[r->idx];
		int gi = t->tgroup[r->idx];
		char nb[512];
		const char *nm = q->name;
		int indent = 2;
		if (gi >= 0 && t->groups[gi].open) {
			nm += t->groups[gi].prefix_len;
			indent = 4;
		}
		nm = tv_name(nm, nb, sizeof nb);
		int len = (int)strlen(nm);
		if (len > name_w - indent) { /* keep the end of long names */
			grid_put(s, y, x + indent, g->ell, 1, role);
			grid_put(s, y, x + indent + 1, nm + len - (name_w - indent - 1), name_w - indent - 1, role);
		} else {
			grid_put(s, y, x + indent, nm, name_w - indent, role);
		}
		bytes = q->n_bytes;
		params = q->n_params;
	}
	x = 1 + name_w + 1;
	for (int c = 0; c < C_N; c++) {
		if (!on[c])
			continue;
		const tv_col *col = &tv_cols[c];
		buf[0] = 0;
		const qtk_tensor *q = r->group_row ? NULL : &t->m->tensors[r->idx];
		switch (c) {
		case C_SHAPE: if (q) fmt_shape(q, buf, sizeof buf); break;
		case C_LAYOUT: if (q) qtk_layout_id(&q->layout, buf, sizeof buf); break;
		case C_BITS: if (q) snprintf(buf, sizeof buf, "%u", q->layout.bits); break;
		case C_GROUP:
			if (q && q->layout.group_size)
				snprintf(buf, sizeof buf, "%u", q->layout.group_size);
			else if (q)
				snprintf(buf, sizeof buf, "-");
			break;
		case C_PARAMS: tv_count(params, buf, sizeof buf); break;
		case C_BYTES: fmt_bytes(bytes, buf, sizeof buf); break;
		case C_BPW: snprintf(buf, sizeof buf, "%.3f", tv_bpw(bytes, params)); break;
		case C_SHARE:
			snprintf(buf, sizeof buf, "%.1f%%", t->tt.n_bytes ? 100.0 * (double)bytes / (double)t->tt.n_bytes : 0.0);
			break;
		case C_BAR:
			tv_hbar(t, s, y, x, col->w, bar_max ? (double)bytes / (double)bar_max : 0, sel ? R_SEL : R_BAR);
			break;
		}
		if (c != C_BAR) {
			if (col->right)
				tv_right(s, y, x, col->w, buf, role);
			else
				grid_put(s, y, x, buf, col->w, role);
		}
		x += col->w + 1;
	}
}

static void tv_tensors(tui *t, tui_screen *s)
{
	bool on[C_N];
	int name_w;
	tv_layout_cols(s->w, on, &name_w);
	int y0 = 3, page = s->h - 5;
	grid_fill(s, y0, 0, s->w, " ", R_HEAD);
	grid_put(s, y0, 3, "tensor", name_w, R_HEAD);
	int x = 1 + name_w + 1;
	for (int c = 0; c < C_N; c++) {
		if (!on[c])
			continue;
		if (tv_cols[c].right)
			tv_right(s, y0, x, tv_cols[c].w, tv_cols[c].name, R_HEAD);
		else
			grid_put(s, y0, x, tv_cols[c].name, tv_cols[c].w, R_HEAD);
		x += tv_cols[c].w + 1;
	}
	/* sort and filter: in short on the header, in full (with the filtered totals) on the status line */
	char full[200] = "";
	if (t->sort || t->reverse || t->filter >= 0) {
		char info[96], fb[32];
		snprintf(info, sizeof info, "[%s%s%s%s%s]", t->sort || t->reverse ? "sort: " : "",
			 t->sort || t->reverse ? tui_sort_name(t) : "", t->reverse ? " rev" : "",
			 (t->sort || t->reverse) && t->filter >= 0 ? ", " : "", t->filter >= 0 ? t->tt.types[t->filter].type : "");
		tv_put_cut(t, s, y0, 11, info, name_w - 11, R_HEAD);
		size_t k = 0;
		if (t->sort || t->reverse)
			k = (size_t)snprintf(full, sizeof full, "sorted by %s%s; ", tui_sort_name(t), t->reverse ? ", reversed" : "");
		if (t->filter >= 0 && k < sizeof full) {
			fmt_bytes(t->v_bytes, fb, sizeof fb);
			snprintf(full + k, sizeof full - k, "only %s: %zu tensors, %s, %.3f bpw", t->tt.types[t->filter].type,
				 t->vtensors, fb, tv_bpw(t->v_bytes, t->v_params));
		} else if (k >= 2 && k < sizeof full) {
			full[k - 2] = 0; /* no "; " after the sort alone */
		}
	}
	uint64_t bar_max = 0; /* one scale for every row: the largest item shown */
	for (size_t r = 0; r < t->nrows; r++) {
		uint64_t b = t->rows[r].group_row ? t->groups[t->rows[r].idx].v_bytes : t->m->tensors[t->rows[r].idx].n_bytes;
		bar_max = b > bar_max ? b : bar_max;
	}
	size_t page_n = page > 0 ? (size_t)page : 1;
	if (t->cur >= t->nrows && t->nrows)
		t->cur = t->nrows - 1;
	if (t->cur < t->top)
		t->top = t->cur;
	if (t->cur >= t->top + page_n)
		t->top = t->cur - page_n + 1;
	for (int i = 0; i < page && t->top + (size_t)i < t->nrows; i++) {
		size_t r = t->top + (size_t)i;
		tv_tensor_row(t, s, y0 + 1 + i, &t->rows[r], on, name_w, r == t->cur, bar_max);
		if (r == t->cur) {
			s->cur_y = y0 + 1 + i;
			s->cur_x = 0;
		}
	}
	if (!t->nrows)
		grid_put(s, y0 + 2, 3, t->m->ntensors ? "no tensors match the filter (press f)" : "this file has no tensors",
			 s->w - 4, R_DIM);
	char pos[48];
	snprintf(pos, sizeof pos, "%zu/%zu", t->nrows ? t->cur + 1 : 0, t->nrows);
	tv_status_hint(t, s, pos, full[0] ? full : NULL);
}

/* ---- Detail pane: built as lines, then scrolled ----------------------------- */

typedef struct tv_lines {
	tui_screen *s;  /* a tall off-screen grid */
	int n;          /* lines used */
} tv_lines;

/* Vertical bars of `n` values in `rows` rows (log heights when `logc`). */
static void tv_vbars(const tui *t, tv_lines *L, const double *v, int n, int rows, int x0, int role)
{
	const tv_glyphs *g = tv_g(t);
	double mx = 0;
	for (int i = 0; i < n; i++)
		mx = v[i] > mx ? v[i] : mx;
	for (int i = 0; i < n; i++) {
		int e = mx > 0 ? (int)lround(v[i] / mx * rows * 8) : 0;
		if (v[i] > 0 && e == 0)
			e = 1;
		for (int r = 0; r < rows; r++) {
			int have = e - (rows - 1 - r) * 8;
			if (have <= 0)
				continue;
			grid_put(L->s, L->n + r, x0 + i, g->vbar[have >= 8 ? 8 : have], 1, role);
		}
	}
	L->n += rows;
}

/* Counts resampled to `w` columns (sum per column), log-scaled. */
static int tv_resample_log(const uint64_t *c, int n, int w, double *out)
{
	int per = (n + w - 1) / w, k = 0;
	if (per < 1)
		per = 1;
	for (int i = 0; i < n; i += per, k++) {
		uint64_t sum = 0;
		for (int j = i; j < i + per && j < n; j++)
			sum += c[j];
		out[k] = log1p((double)sum);
	}
	return k;
}

static void tv_axis(tv_lines *L, int x0, int w, double lo, double hi)
{
	char a[32], b[32];
	snprintf(a, sizeof a, "%.4g", lo);
	snprintf(b, sizeof b, "%.4g", hi);
	grid_put(L->s, L->n, x0, a, w, R_DIM);
	tv_right(L->s, L->n, x0, w, b, R_DIM);
	if (lo < 0 && hi > 0 && w > 20) {
		int z = (int)((0 - lo) / (hi - lo) * w);
		if (z > (int)strlen(a) + 1 && z < w - (int)strlen(b) - 1)
			grid_put(L->s, L->n, x0 + z, "0", 1, R_DIM);
	}
	L->n++;
}

static void tv_hist_block(const tui *t, tv_lines *L, const qtk_hist *h, int rows, int w)
{
	double v[QTK_ST_BINS];
	int n = tv_resample_log(h->counts, QTK_ST_BINS, w < QTK_ST_BINS ? w : QTK_ST_BINS, v);
	tv_vbars(t, L, v, n, rows, 2, R_BAR);
	tv_axis(L, 2, n, h->lo, h->hi);
}

static void tv_detail_stats(const tui *t, tv_lines *L, const qtk_tensor *q, const qtk_tstats *st)
{
	const tv_glyphs *g = tv_g(t);
	tui_screen *s = L->s;
	int w = s->w - 4;
	char a[32], b[32];
	tv_printf(s, L->n++, 1, w, R_NORMAL, "min %.4g  max %.4g  mean %.4g  std %.4g  absmax %.4g", st->min, st->max,
		  st->mean, st->std, st->absmax);
	if (st->std > 0)
		tv_printf(s, L->n++, 1, w, R_NORMAL, "kurtosis %.3g (normal: 3)%s", st->kurtosis,
			  st->n_nonfinite ? "  + NaN/Inf values left out" : "");
	snprintf(a, sizeof a, "%.2g%%", st->n ? 100.0 * (double)st->out3 / (double)st->n : 0.0);
	snprintf(b, sizeof b, "%.2g%%", st->n ? 100.0 * (double)st->out6 / (double)st->n : 0.0);
	int x = 1 + tv_printf(s, L->n, 1, w, R_NORMAL, "outliers  >3%s %llu (%s; normal 0.27%%)  >6%s ", g->sigma,
			      (unsigned long long)st->out3, a, g->sigma);
	tv_printf(s, L->n++, x, w, st->out6 ? R_WARN : R_NORMAL, "%llu (%s)", (unsigned long long)st->out6, b);
	x = 1 + tv_printf(s, L->n, 1, w, R_NORMAL, "outlier-dominated groups ");
	tv_printf(s, L->n++, x, w - x, st->outlier_groups ? R_WARN : R_NORMAL, "%llu of %llu (%.1f%%, g%u, max > 4%s RMS)",
		  (unsigned long long)st->outlier_groups, (unsigned long long)st->n_groups,
		  st->n_groups ? 100.0 * (double)st->outlier_groups / (double)st->n_groups : 0.0, st->group, g->times);
	L->n++;
	tv_printf(s, L->n++, 1, w, R_LABEL, "value histogram (%d bins, log counts)", QTK_ST_BINS);
	tv_hist_block(t, L, &st->hist, 6, w);
	if (q->ndim >= 2 && st->n_top) {
		L->n++;
		x = 1 + tv_printf(s, L->n, 1, w, R_LABEL, "input-channel absmax (%llu channels, median %.3g)",
				  (unsigned long long)st->n_channels, st->channel_median);
		L->n++;
		x = 1 + grid_put(s, L->n, 1, "salient:", w, R_NORMAL);
		for (int k = 0; k < st->n_top && x < s->w - 12; k++)
			x += tv_printf(s, L->n, x + 1, s->w - x - 2, R_NORMAL, "%llu %s%.1f",
				       (unsigned long long)st->top_idx[k], g->times,
				       st->channel_median > 0 ? (double)st->top_val[k] / st->channel_median : 0.0) + 2;
		L->n++;
		double v[QTK_ST_PROFILE];
		int cols = w < (int)st->n_profile ? w : (int)st->n_profile, per = ((int)st->n_profile + cols - 1) / cols;
		int nv = 0;
		for (int i = 0; i < (int)st->n_profile; i += per, nv++) {
			double mx = 0;
			for (int j = i; j < i + per && j < (int)st->n_profile; j++)
				mx = st->profile[j] > mx ? st->profile[j] : mx;
			v[nv] = mx;
		}
		tv_vbars(t, L, v, nv, 4, 2, R_BAR);
		char lo[24], hi[24];
		snprintf(lo, sizeof lo, "0");
		snprintf(hi, sizeof hi, "%llu", (unsigned long long)(st->n_channels - 1));
		grid_put(s, L->n, 2, lo, nv, R_DIM);
		tv_right(s, L->n, 2, nv, hi, R_DIM);
		L->n++;
	}
	if (st->has_scales) {
		L->n++;
		tv_printf(s, L->n++, 1, w, R_LABEL, "scales (%s, %llu)", st->scale_what, (unsigned long long)st->scales.n);
		tv_hist_block(t, L, &st->scales, 3, w);
	}
	if (st->has_mins) {
		L->n++;
		tv_printf(s, L->n++, 1, w, R_LABEL, "mins (%llu)", (unsigned long long)st->mins.n);
		tv_hist_block(t, L, &st->mins, 3, w);
	}
	if (st->zero_levels) {
		L->n++;
		tv_printf(s, L->n++, 1, w, R_LABEL, "zero points (0..%d)", st->zero_levels - 1);
		double v[257];
		int n = tv_resample_log(st->zeros, st->zero_levels, w, v);
		tv_vbars(t, L, v, n, 3, 2, R_BAR);
		tv_axis(L, 2, n, 0, st->zero_levels - 1);
	}
	L->n++;
	if (st->code_bits) {
		tv_printf(s, L->n++, 1, w, R_LABEL, "codes: %d of %d used, entropy %.3f of %d bits", st->codes_used,
			  1 << st->code_bits, st->code_entropy, st->code_bits);
		double v[256];
		int n = tv_resample_log(st->codes, 1 << st->code_bits, w, v);
		tv_vbars(t, L, v, n, 3, 2, R_BAR);
		tv_axis(L, 2, n, 0, (1 << st->code_bits) - 1);
	} else {
		grid_put(s, L->n++, 1, "codes: not read for this layout", w, R_DIM);
	}
}

static void tv_detail_build(tui *t, tv_lines *L, long ti)
{
	tui_screen *s = L->s;
	int w = s->w - 2;
	if (ti < 0) {
		grid_put(s, L->n++, 1, "Select a tensor in the Tensors pane (Tab) and press Enter.", w, R_DIM);
		return;
	}
	const qtk_tensor *q = &t->m->tensors[ti];
	char sh[96], lid[48], by[32];
	fmt_shape(q, sh, sizeof sh);
	qtk_layout_id(&q->layout, lid, sizeof lid);
	fmt_bytes(q->n_bytes, by, sizeof by);
	char nb[512];
	grid_put(s, L->n++, 1, tv_name(q->name, nb, sizeof nb), w, R_GROUP);
	char grp[16] = "-";
	if (q->layout.group_size)
		snprintf(grp, sizeof grp, "%u", q->layout.group_size);
	const qtk_type_info *tinfo = qtk_type(q->layout.type);
	bool fl = q->layout.kind == QTK_LAYOUT_PLAIN && tinfo && tinfo->is_float;
	tv_printf(s, L->n++, 1, w, R_NORMAL, "%s  %s (%s)  %u-bit %s  group %s", sh, lid, qtk_layout_type_name(&q->layout),
		  q->layout.bits, fl ? "floats" : "codes", grp);
	tv_printf(s, L->n++, 1, w, R_NORMAL, "%llu params  %s  %.4f bits/weight  %.2f%% of file",
		  (unsigned long long)q->n_params, by, tv_bpw(q->n_bytes, q->n_params),
		  t->tt.n_bytes ? 100.0 * (double)q->n_bytes / (double)t->tt.n_bytes : 0.0);
	qtk_layout_kind lk = q->layout.kind;
	if ((lk == QTK_LAYOUT_CT_INT || lk == QTK_LAYOUT_FP8) && q->layout.strategy < 4) {
		static const char *const strat[] = {"tensor", "channel", "group", "block"};
		bool chan = q->layout.strategy == 2 && q->ndim >= 2 && q->layout.group_size == q->shape[q->ndim - 1];
		const qtk_type_info *sti = qtk_type(q->layout.scale_type);
		char blk[48] = "";
		if (q->layout.strategy == 3)
			snprintf(blk, sizeof blk, " of %u x %u", q->layout.group_size, q->layout.group_size);
		tv_printf(s, L->n++, 1, w, R_NORMAL, "scales per %s, %s; %s scales%s", chan ? "channel" : strat[q->layout.strategy],
			  q->layout.sym ? "symmetric" : "with zero points", sti ? sti->upper : "?", blk);
	} else if (lk == QTK_LAYOUT_NVFP4) {
		tv_printf(s, L->n++, 1, w, R_NORMAL, "E4M3 scale per 16, global scale %s",
			  q->layout.scale_type ? "multiplies (ModelOpt)" : "divides (compressed-tensors)");
	}
	for (int p = 0; p < q->nparts && q->nparts > 1; p++) {
		const qtk_type_info *ti2 = qtk_type(q->parts[p].type);
		char pb[32];
		fmt_bytes(q->parts[p].nbytes, pb, sizeof pb);
		char psh[96];
		qtk_shape_text(psh, sizeof psh, q->parts[p].ndim, q->parts[p].shape);
		tv_printf(s, L->n++, 3, w - 2, R_DIM, "%-8s %-4s %-14s %10s", q->parts[p].role, ti2 ? ti2->upper : "?", psh, pb);
	}
	L->n++;
	const qtk_tstats *st = t->stats[ti];
	if (st) {
		tv_detail_stats(t, L, q, st);
	} else if (t->pending == ti) {
		tv_printf(s, L->n++, 1, w, R_WARN, "computing%s %3.0f%%", tv_g(t)->ell, 100.0 * t->progress);
	} else if (!qtk_can_decode(q)) {
		grid_put(s, L->n++, 1, "no decoder for this layout: statistics unavailable", w, R_DIM);
	} else {
		tv_printf(s, L->n++, 1, w, R_DIM, "Press Enter to compute statistics (reads %s of tensor data).", by);
	}
}

static void tv_scrolled(tui_screen *s, const tui_screen *src, int nlines, int *scroll)
{
	int y0 = 3, page = s->h - 4;
	if (*scroll > nlines - page)
		*scroll = nlines - page;
	if (*scroll < 0)
		*scroll = 0;
	for (int i = 0; i < page && *scroll + i < nlines; i++)
		memcpy(&s->cells[(y0 + i) * s->w], &src->cells[(*scroll + i) * src->w], (size_t)s->w * sizeof *s->cells);
}

static void tv_detail(tui *t, tui_screen *s)
{
	tui_screen off;
	if (grid_init(&off, s->w, 400))
		return;
	tv_lines L = {&off, 0};
	long ti = tui_cur_tensor(t);
	tv_detail_build(t, &L, ti);
	t->dlines = L.n;
	tv_scrolled(s, &off, L.n, &t->dscroll);
	grid_free(&off);
	char pos[48];
	snprintf(pos, sizeof pos, "%d/%d lines", t->dlines ? t->dscroll + 1 : 0, t->dlines);
	tv_status(t, s, t->dlines > s->h - 4 ? pos : NULL);
}

/* ---- Metadata pane ---------------------------------------------------------------- */

static void tv_value(const tui *t, const qtk_value *v, char *out, size_t n)
{
	switch (v->type) {
	case QTK_V_STR: tv_escape(t, v->v.str.s, v->v.str.len, false, out, n); break;
	case QTK_V_F32: case QTK_V_F64: snprintf(out, n, "%.7g", v->v.f); break;
	case QTK_V_BOOL: snprintf(out, n, "%s", v->v.u ? "true" : "false"); break;
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64: snprintf(out, n, "%lld", (long long)v->v.i); break;
	case QTK_V_ARR: {
		size_t es = qtk_value_size(v->elem);
		if (!es && v->elem != QTK_V_STR) {
			snprintf(out, n, "(%llu nested values)", (unsigned long long)v->n);
			break;
		}
		size_t k = (size_t)snprintf(out, n, "[");
		for (uint64_t e = 0; e < v->n && k + 16 < n && e < 32; e++) {
			char one[256];
			if (v->elem == QTK_V_STR) {
				const qtk_str *sv = v->arr;
				tv_escape(t, sv[e].s, sv[e].len, false, one, sizeof one);
			} else {
				qtk_value x = {.type = v->elem};
				const uint8_t *p = (const uint8_t *)v->arr + e * es;
				uint64_t u = es == 1 ? p[0] : es == 2 ? qtk_rd16(p) : es == 4 ? qtk_rd32(p) : qtk_rd64(p);
				x.v.u = u;
				if (v->elem == QTK_V_I8) x.v.i = (int8_t)u;
				if (v->elem == QTK_V_I16) x.v.i = (int16_t)u;
				if (v->elem == QTK_V_I32) x.v.i = (int32_t)u;
				if (v->elem == QTK_V_F32) { float f; uint32_t b = (uint32_t)u; memcpy(&f, &b, 4); x.v.f = f; }
				if (v->elem == QTK_V_F64) memcpy(&x.v.f, &u, 8);
				tv_value(t, &x, one, sizeof one);
			}
			k += (size_t)snprintf(out + k, n - k, "%s%s", e ? ", " : "", one);
		}
		if (k < n)
			snprintf(out + k, n - k, "%s]", v->n > 32 ? ", ..." : "");
		break;
	}
	default: snprintf(out, n, "%llu", (unsigned long long)v->v.u); break;
	}
}

/* A large value in one cell run: its size and SHA-256 ("2.1 MiB  sha256:1a2b..."). */
static void tv_digest(uint64_t bytes, const uint8_t sha[32], char *out, size_t n)
{
	char by[32], hex[65];
	fmt_bytes(bytes, by, sizeof by);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", sha[i]);
	snprintf(out, n, "%s  sha256:%s", by, hex);
}

static void tv_meta_row(tui *t, tui_screen *s, int y, const tui_mrow *r, int kw, bool sel)
{
	const tv_glyphs *g = tv_g(t);
	int role = sel ? R_SEL : R_NORMAL;
	if (sel)
		grid_fill(s, y, 0, s->w, " ", R_SEL);
	char val[2048], ty[32];
	const qtk_model *m = t->m;
	int vx = 3 + kw + 1 + 14 + 1;
	switch (r->kind) {
	case 0: {
		const qtk_kv *kv = &m->kv[r->idx];
		const qtk_value *v = &kv->val;
		if (tui_kv_expandable(kv))
			grid_put(s, y, 1, t->kv_open[r->idx] ? g->open : g->closed, 1, sel ? R_SEL : R_GROUP);
		tv_put_cut(t, s, y, 3, tv_name(kv->key, val, sizeof val), kw, role);
		if (v->type == QTK_V_ARR)
			snprintf(ty, sizeof ty, "%s[%llu]", qtk_value_type_name(v->elem), (unsigned long long)v->n);
		else
			snprintf(ty, sizeof ty, "%s", qtk_value_type_name(v->type));
		grid_put(s, y, 3 + kw + 1, ty, 14, sel ? R_SEL : R_DIM);
		if (tui_kv_large(kv))
			tv_digest(tui_kv_bytes(kv), t->kv_sha[r->idx], val, sizeof val);
		else
			tv_value(t, v, val, sizeof val);
		tv_put_cut(t, s, y, vx, val, s->w - vx - 1, role);
		break;
	}
	case 1: {
		const qtk_blob *b = &m->blobs[r->idx];
		bool bin = tui_blob_binary(b);
		if (!bin)
			grid_put(s, y, 1, t->blob_open[r->idx] ? g->open : g->closed, 1, sel ? R_SEL : R_GROUP);
		tv_put_cut(t, s, y, 3, tv_name(b->name, val, sizeof val), kw, role);
		grid_put(s, y, 3 + kw + 1, bin ? "binary file" : "file", 14, sel ? R_SEL : R_DIM);
		if (tui_blob_large(b))
			tv_digest(b->len, t->blob_sha[r->idx], val, sizeof val);
		else
			fmt_bytes(b->len, val, sizeof val);
		tv_put_cut(t, s, y, vx, val, s->w - vx - 1, role);
		break;
	}
	case 2: {
		const qtk_value *v = &m->kv[r->idx].val;
		char one[1024];
		if (v->elem == QTK_V_STR) {
			const qtk_str *sv = v->arr;
			tv_escape(t, sv[r->sub].s, sv[r->sub].len, false, one, sizeof one);
		} else {
			qtk_value tmp = *v;
			tmp.arr = (uint8_t *)v->arr + r->sub * qtk_value_size(v->elem);
			tmp.n = 1;
			tv_value(t, &tmp, val, sizeof val);
			/* strip the brackets of the one-element array */
			size_t l = strlen(val);
			snprintf(one, sizeof one, "%.*s", (int)(l > 2 ? l - 2 : 0), val + 1);
		}
		tv_printf(s, y, 5, s->w - 6, role, "[%llu]  %s", (unsigned long long)r->sub, one);
		break;
	}
	default: {
		const char *p;
		uint64_t len;
		if (r->kind == 3) {
			p = m->kv[r->idx].val.v.str.s;
			len = m->kv[r->idx].val.v.str.len;
		} else {
			p = (const char *)m->blobs[r->idx].data;
			len = m->blobs[r->idx].len;
		}
		tv_escape(t, p + r->sub, len - r->sub, true, val, sizeof val);
		grid_put(s, y, 5, g->vline, 1, sel ? R_SEL : R_DIM);
		grid_put(s, y, 7, val, s->w - 8, role);
		break;
	}
	}
}

static void tv_meta(tui *t, tui_screen *s)
{
	int kw = 8;
	for (size_t i = 0; i < t->m->nkv; i++)
		if ((int)strlen(t->m->kv[i].key) > kw)
			kw = (int)strlen(t->m->kv[i].key);
	for (size_t i = 0; i < t->m->nblobs; i++)
		if ((int)strlen(t->m->blobs[i].name) > kw)
			kw = (int)strlen(t->m->blobs[i].name);
	if (kw > s->w / 2 - 8)
		kw = s->w / 2 - 8;
	int y0 = 3, page = s->h - 5;
	grid_fill(s, y0, 0, s->w, " ", R_HEAD);
	grid_put(s, y0, 3, "key", kw, R_HEAD);
	grid_put(s, y0, 3 + kw + 1, "type", 14, R_HEAD);
	grid_put(s, y0, 3 + kw + 1 + 14 + 1, "value", s->w, R_HEAD);
	size_t pg = page > 0 ? (size_t)page : 1;
	if (t->mcur < t->mtop)
		t->mtop = t->mcur;
	if (t->mcur >= t->mtop + pg)
		t->mtop = t->mcur - pg + 1;
	for (int i = 0; i < page && t->mtop + (size_t)i < t->nmrows; i++) {
		size_t r = t->mtop + (size_t)i;
		tv_meta_row(t, s, y0 + 1 + i, &t->mrows[r], kw, r == t->mcur);
		if (r == t->mcur)
			s->cur_y = y0 + 1 + i;
	}
	if (!t->nmrows)
		grid_put(s, y0 + 2, 3, "no metadata", s->w, R_DIM);
	char pos[48], hint[128] = "";
	snprintf(pos, sizeof pos, "%zu/%zu", t->nmrows ? t->mcur + 1 : 0, t->nmrows);
	/* a large value under the cursor: its whole digest on the status line */
	const tui_mrow *cr = t->mcur < t->nmrows ? &t->mrows[t->mcur] : NULL;
	if (cr && cr->kind == 0 && tui_kv_large(&t->m->kv[cr->idx]))
		tv_digest(tui_kv_bytes(&t->m->kv[cr->idx]), t->kv_sha[cr->idx], hint, sizeof hint);
	else if (cr && cr->kind == 1 && tui_blob_large(&t->m->blobs[cr->idx]))
		tv_digest(t->m->blobs[cr->idx].len, t->blob_sha[cr->idx], hint, sizeof hint);
	tv_status_hint(t, s, pos, hint[0] ? hint : NULL);
}

/* ---- Text panes (provenance, memory) ---------------------------------------------- */

static void tv_text(tui *t, tui_screen *s, char **lines, size_t n0, int *scroll, int first_role)
{
	int y0 = 3, page = s->h - 4;
	/* the first line (a summary) wraps at a blank instead of being cut */
	char w1[1024] = "", w2[1024] = "";
	size_t n = n0, extra = 0;
	if (n0 && (int)strlen(lines[0]) > s->w - 2 && s->w > 12) {
		size_t cut = (size_t)(s->w - 2);
		while (cut > 0 && lines[0][cut] != ' ')
			cut--;
		if (cut > 0) {
			snprintf(w1, sizeof w1, "%.*s", (int)cut, lines[0]);
			snprintf(w2, sizeof w2, "  %s", lines[0] + cut + 1);
			extra = 1;
			n++;
		}
	}
	if (*scroll > (int)n - page)
		*scroll = (int)n - page;
	if (*scroll < 0)
		*scroll = 0;
	for (int i = 0; i < page && (size_t)(*scroll + i) < n; i++) {
		size_t k = (size_t)(*scroll + i);
		int role = k <= extra ? first_role : R_NORMAL;
		const char *txt = extra && k == 0 ? w1 : extra && k == 1 ? w2 : lines[k - extra];
		grid_put(s, y0 + i, 1, txt, s->w - 2, role);
	}
	char pos[48];
	snprintf(pos, sizeof pos, "%d/%zu lines", n ? *scroll + 1 : 0, n);
	tv_status(t, s, (int)n > page ? pos : NULL);
}

/* ---- Help ------------------------------------------------------------------------- */

static const char *const tv_help[][2] = {
	{"Up/Down j/k", "move (scroll in Detail, Provenance, Memory)"},
	{"PgUp/PgDn", "page up / down"},
	{"g / G", "first / last"},
	{"Enter", "detail + statistics / open a group / expand"},
	{"Left/Right h/l", "close / open a block group"},
	{"Esc", "back to the table"},
	{"Tab / S-Tab", "next / previous pane"},
	{"1 .. 5", "Tensors Detail Metadata Provenance Memory"},
	{"/  n  N", "search by regex (any case), next, previous"},
	{"s / S", "sort by file/name/bytes/params/bpw/layout"},
	{"r", "reverse the sort order"},
	{"f", "cycle filter by type (group sums follow it)"},
	{"mouse", "click selects (again: open), wheel scrolls"},
	{"?", "this help"},
	{"q", "quit"},
};

static void tv_help_box(tui *t, tui_screen *s)
{
	const tv_glyphs *g = tv_g(t);
	int n = (int)(sizeof tv_help / sizeof *tv_help);
	int bw = s->w < 66 ? s->w - 2 : 64, bh = n + 4;
	int x0 = (s->w - bw) / 2, y0 = (s->h - bh) / 2;
	if (y0 < 0)
		y0 = 0;
	for (int y = 0; y < bh; y++) {
		grid_fill(s, y0 + y, x0, bw, " ", R_NORMAL);
		grid_put(s, y0 + y, x0, g->vline, 1, R_DIM);
		grid_put(s, y0 + y, x0 + bw - 1, g->vline, 1, R_DIM);
	}
	const char *hl = t->utf8 ? "\xe2\x94\x80" : "-";
	grid_fill(s, y0, x0, bw, hl, R_DIM);
	grid_fill(s, y0 + bh - 1, x0, bw, hl, R_DIM);
	grid_put(s, y0, x0, t->utf8 ? "\xe2\x94\x8c" : "+", 1, R_DIM);
	grid_put(s, y0, x0 + bw - 1, t->utf8 ? "\xe2\x94\x90" : "+", 1, R_DIM);
	grid_put(s, y0 + bh - 1, x0, t->utf8 ? "\xe2\x94\x94" : "+", 1, R_DIM);
	grid_put(s, y0 + bh - 1, x0 + bw - 1, t->utf8 ? "\xe2\x94\x98" : "+", 1, R_DIM);
	grid_put(s, y0, x0 + 2, " keys ", 6, R_LABEL);
	for (int i = 0; i < n; i++) {
		grid_put(s, y0 + 2 + i, x0 + 2, tv_help[i][0], 16, R_KEY);
		grid_put(s, y0 + 2 + i, x0 + 19, tv_help[i][1], bw - 21, R_NORMAL);
	}
	tv_right(s, y0 + bh - 1, x0, bw - 2, " any key closes ", R_DIM);
}

void tui_draw(tui *t, tui_screen *s)
{
	grid_clear(s);
	if (s->w < 40 || s->h < 10) {
		grid_put(s, 0, 0, "terminal too small", s->w, R_WARN);
		tv_printf(s, 1, 0, s->w, R_NORMAL, "need 40x10, have %dx%d", s->w, s->h);
		return;
	}
	tv_title(t, s);
	switch (t->pane) {
	case P_TENSORS: tv_tensors(t, s); break;
	case P_DETAIL: tv_detail(t, s); break;
	case P_META: tv_meta(t, s); break;
	case P_PROV: tv_text(t, s, t->prov, t->nprov, &t->pscroll, t->nprov > 1 ? R_LABEL : R_DIM); break;
	default: tv_text(t, s, t->mem, t->nmem, &t->mscroll, R_NORMAL); break;
	}
	if (t->help)
		tv_help_box(t, s);
}
