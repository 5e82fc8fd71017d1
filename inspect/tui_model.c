/* tui_model.c - the browser's state and what keys do to it (no curses). */
#include "tui.h"
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ---- Requests and the key table (tig-style: keys map to requests) ------- */

enum tm_req {
	RQ_NONE, RQ_UP, RQ_DOWN, RQ_PGUP, RQ_PGDN, RQ_TOP, RQ_BOTTOM, RQ_ENTER, RQ_BACK, RQ_LEFT, RQ_RIGHT,
	RQ_NEXT_PANE, RQ_PREV_PANE, RQ_SEARCH, RQ_NEXT, RQ_PREV, RQ_SORT, RQ_SORT_PREV, RQ_REVERSE, RQ_FILTER,
	RQ_HELP, RQ_QUIT, RQ_WHEEL_UP, RQ_WHEEL_DOWN, RQ_PANE /* + pane number */
};

static const struct {
	int key;
	enum tm_req rq;
} tm_keys[] = {
	{TK_UP, RQ_UP},       {'k', RQ_UP},          {TK_DOWN, RQ_DOWN},     {'j', RQ_DOWN},
	{TK_PGUP, RQ_PGUP},   {TK_PGDN, RQ_PGDN},    {' ', RQ_PGDN},         {'g', RQ_TOP},
	{TK_HOME, RQ_TOP},    {'G', RQ_BOTTOM},      {TK_END, RQ_BOTTOM},    {TK_ENTER, RQ_ENTER},
	{TK_ESC, RQ_BACK},    {TK_BS, RQ_BACK},      {TK_LEFT, RQ_LEFT},     {'h', RQ_LEFT},
	{TK_RIGHT, RQ_RIGHT}, {'l', RQ_RIGHT},       {TK_TAB, RQ_NEXT_PANE}, {TK_BTAB, RQ_PREV_PANE},
	{'/', RQ_SEARCH},     {'n', RQ_NEXT},        {'N', RQ_PREV},         {'s', RQ_SORT},
	{'f', RQ_FILTER},     {'?', RQ_HELP},        {'q', RQ_QUIT},         {'S', RQ_SORT_PREV},
	{'r', RQ_REVERSE},    {TK_WHEEL_UP, RQ_WHEEL_UP}, {TK_WHEEL_DOWN, RQ_WHEEL_DOWN},
	{'1', RQ_PANE + 0},   {'2', RQ_PANE + 1},    {'3', RQ_PANE + 2},     {'4', RQ_PANE + 3},
	{'5', RQ_PANE + 4},
};

/* Rows the mouse wheel moves. */
#define TM_WHEEL 3
/* Screen line of the first row of a list (title, tabs, types, header above it). */
#define TM_LIST_Y 4

/* ---- Sorting -------------------------------------------------------------- */

static const char *const tm_sort_names[] = {"file order", "name", "bytes", "params", "bits/weight", "layout"};
#define TM_NSORT 6

const char *tui_sort_name(const tui *t) { return tm_sort_names[t->sort]; }

static const tui *tm_sorting; /* qsort has no context argument */

static double tm_tensor_key(const tui *t, size_t i)
{
	const qtk_tensor *x = &t->m->tensors[i];
	switch (t->sort) {
	case 2: return (double)x->n_bytes;
	case 3: return (double)x->n_params;
	case 4: return x->n_params ? 8.0 * (double)x->n_bytes / (double)x->n_params : 0;
	default: return 0;
	}
}

static double tm_group_key(const tui *t, size_t g)
{
	const tui_group *x = &t->groups[g];
	switch (t->sort) {
	case 2: return (double)x->v_bytes;
	case 3: return (double)x->v_params;
	case 4: return x->v_params ? 8.0 * (double)x->v_bytes / (double)x->v_params : 0;
	default: return 0;
	}
}

static size_t tm_first(const tui *t, const tui_row *r) { return r->group_row ? t->groups[r->idx].first : r->idx; }

static int tm_cmp_fwd(const tui *t, const tui_row *a, const tui_row *b);

/* The sort order, reversed by r. */
static int tm_cmp(const void *pa, const void *pb)
{
	int c = tm_cmp_fwd(tm_sorting, pa, pb);
	return tm_sorting->reverse ? -c : c;
}

static int tm_cmp_fwd(const tui *t, const tui_row *a, const tui_row *b)
{
	size_t fa = tm_first(t, a), fb = tm_first(t, b);
	if (t->sort == 1 || t->sort == 5) {
		int c;
		if (t->sort == 5 && !a->group_row && !b->group_row) {
			char la[32], lb[32];
			qtk_layout_id(&t->m->tensors[a->idx].layout, la, sizeof la);
			qtk_layout_id(&t->m->tensors[b->idx].layout, lb, sizeof lb);
			if ((c = strcmp(la, lb)))
				return c;
		}
		if (a->group_row && b->group_row)
			return t->groups[a->idx].block - t->groups[b->idx].block;
		if ((c = strcmp(t->m->tensors[fa].name, t->m->tensors[fb].name)))
			return c;
	} else if (t->sort >= 2) {
		double ka = a->group_row ? tm_group_key(t, a->idx) : tm_tensor_key(t, a->idx);
		double kb = b->group_row ? tm_group_key(t, b->idx) : tm_tensor_key(t, b->idx);
		if (ka != kb)
			return ka > kb ? -1 : 1;
	}
	return fa < fb ? -1 : fa > fb;
}

/* ---- Rows ------------------------------------------------------------------ */

static bool tm_passes(const tui *t, size_t i)
{
	if (t->filter < 0)
		return true;
	return strcmp(qtk_layout_type_name(&t->m->tensors[i].layout), t->tt.types[t->filter].type) == 0;
}

/* Rebuild the visible rows, keeping the cursor on the same item when it is still there. */
static void tm_rebuild(tui *t)
{
	tui_row keep = {0, 0};
	bool had = t->cur < t->nrows;
	if (had)
		keep = t->rows[t->cur];
	size_t n = 0, ntop = 0;
	tui_row *top = qtk_calloc(t->ngroups + t->m->ntensors + 1, sizeof *top);
	if (!top)
		return;
	bool *seen = qtk_calloc(t->ngroups + 1, sizeof *seen);
	tui_row *members = qtk_calloc(t->m->ntensors + 1, sizeof *members);
	if (!seen || !members) { /* out of memory: keep the old rows */
		qtk_free(seen);
		qtk_free(members);
		qtk_free(top);
		return;
	}
	/* what the filter lets through: the group rows and the header show these sums */
	t->vtensors = 0;
	t->v_params = t->v_bytes = 0;
	for (size_t g = 0; g < t->ngroups; g++) {
		t->groups[g].vn = 0;
		t->groups[g].v_params = t->groups[g].v_bytes = 0;
	}
	for (size_t i = 0; i < t->m->ntensors; i++) {
		if (!tm_passes(t, i))
			continue;
		const qtk_tensor *x = &t->m->tensors[i];
		t->vtensors++;
		t->v_params += x->n_params;
		t->v_bytes += x->n_bytes;
		if (t->tgroup[i] >= 0) {
			tui_group *gr = &t->groups[t->tgroup[i]];
			gr->vn++;
			gr->v_params += x->n_params;
			gr->v_bytes += x->n_bytes;
		}
	}
	for (size_t i = 0; i < t->m->ntensors; i++) {
		int g = t->tgroup[i];
		if (g < 0) {
			if (tm_passes(t, i))
				top[ntop++] = (tui_row){0, (uint32_t)i};
		} else if (!seen[g] && tm_passes(t, i)) {
			seen[g] = true;
			top[ntop++] = (tui_row){1, (uint32_t)g};
		}
	}
	qtk_free(seen);
	tm_sorting = t;
	qsort(top, ntop, sizeof *top, tm_cmp);
	for (size_t k = 0; k < ntop; k++) {
		t->rows[n++] = top[k];
		if (!top[k].group_row || !t->groups[top[k].idx].open)
			continue;
		size_t nm = 0;
		for (size_t i = t->groups[top[k].idx].first; i < t->m->ntensors; i++)
			if (t->tgroup[i] == (int)top[k].idx && tm_passes(t, i))
				members[nm++] = (tui_row){0, (uint32_t)i};
		qsort(members, nm, sizeof *members, tm_cmp);
		memcpy(t->rows + n, members, nm * sizeof *members);
		n += nm;
	}
	qtk_free(members);
	qtk_free(top);
	t->nrows = n;
	t->cur = 0;
	for (size_t r = 0; had && r < n; r++)
		if (t->rows[r].group_row == keep.group_row && t->rows[r].idx == keep.idx)
			t->cur = r;
	if (had && !keep.group_row && t->cur == 0 && n && !(t->rows[0].group_row == 0 && t->rows[0].idx == keep.idx)) {
		/* the tensor went into a closed group: land on the group */
		int g = t->tgroup[keep.idx];
		for (size_t r = 0; g >= 0 && r < n; r++)
			if (t->rows[r].group_row && t->rows[r].idx == (uint32_t)g)
				t->cur = r;
	}
}

long tui_cur_tensor(const tui *t)
{
	if (t->cur >= t->nrows || t->rows[t->cur].group_row)
		return -1;
	return t->rows[t->cur].idx;
}

/* ---- Metadata rows -------------------------------------------------------- */

static bool tm_multiline(const char *s, uint64_t n) { return n > 0 && memchr(s, '\n', (size_t)n) != NULL; }

bool tui_kv_expandable(const qtk_kv *kv)
{
	if (kv->val.type == QTK_V_ARR)
		return kv->val.elem == QTK_V_STR || qtk_value_size(kv->val.elem) > 0;
	return (kv->val.type == QTK_V_STR && tm_multiline(kv->val.v.str.s, kv->val.v.str.len));
}

/* A value's size as GGUF stores it: strings as their bytes (in arrays each with a u64 length),
 * numbers as their width; nested arrays count 0 (they have no flat form). */
uint64_t tui_kv_bytes(const qtk_kv *kv)
{
	const qtk_value *v = &kv->val;
	if (v->type == QTK_V_STR)
		return v->v.str.len;
	if (v->type != QTK_V_ARR)
		return qtk_value_size(v->type);
	if (v->elem == QTK_V_STR) {
		const qtk_str *sv = v->arr;
		uint64_t n = 0;
		for (uint64_t e = 0; e < v->n; e++)
			n += 8 + sv[e].len;
		return n;
	}
	return v->n * qtk_value_size(v->elem);
}

bool tui_kv_large(const qtk_kv *kv) { return tui_kv_bytes(kv) > TUI_LARGE; }

/* Binary: a NUL byte or a byte sequence that is not UTF-8 in the first 64 KiB. */
bool tui_blob_binary(const qtk_blob *b)
{
	size_t n = b->len < TUI_LARGE ? b->len : (size_t)TUI_LARGE;
	const char *p = (const char *)b->data;
	if (n && memchr(p, 0, n))
		return true;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int k = qtk_utf8_decode(p + i, n - i, &cp);
		if (!k)
			return n - i >= 4 || n == b->len; /* a sequence cut by the 64 KiB window is not evidence */
		i += (size_t)k;
	}
	return false;
}

bool tui_blob_large(const qtk_blob *b) { return b->len > TUI_LARGE || tui_blob_binary(b); }

/* SHA-256 of a value's bytes as tui_kv_bytes counts them (each array string as a u64
 * little-endian length and its bytes, numbers little-endian as stored). 0 or -1. */
static int tm_sha_kv(const qtk_kv *kv, uint8_t out[32])
{
	qtk_sha256 *h = qtk_sha256_begin();
	const qtk_value *v = &kv->val;
	if (v->type == QTK_V_STR) {
		qtk_sha256_add(h, v->v.str.s, (size_t)v->v.str.len);
	} else if (v->type == QTK_V_ARR && v->elem == QTK_V_STR) {
		const qtk_str *sv = v->arr;
		for (uint64_t e = 0; e < v->n; e++) {
			uint8_t len[8];
			for (int k = 0; k < 8; k++)
				len[k] = (uint8_t)(sv[e].len >> (8 * k));
			qtk_sha256_add(h, len, 8);
			qtk_sha256_add(h, sv[e].s, (size_t)sv[e].len);
		}
	} else if (v->type == QTK_V_ARR) {
		qtk_sha256_add(h, v->arr, (size_t)tui_kv_bytes(kv));
	}
	return qtk_sha256_end(h, out) ? 0 : -1;
}

static int tm_sha_bytes(const void *p, size_t n, uint8_t out[32])
{
	qtk_sha256 *h = qtk_sha256_begin();
	qtk_sha256_add(h, p, n);
	return qtk_sha256_end(h, out) ? 0 : -1;
}

/* Append one row per line of text (offsets of line starts). */
static size_t tm_lines(tui_mrow *rows, size_t n, uint8_t kind, uint32_t idx, const char *s, uint64_t len)
{
	uint64_t off = 0;
	while (off < len) {
		rows[n++] = (tui_mrow){kind, idx, off};
		const char *nl = memchr(s + off, '\n', (size_t)(len - off));
		if (!nl)
			break;
		off = (uint64_t)(nl - s) + 1;
	}
	return n;
}

static uint64_t tm_count_lines(const char *s, uint64_t len)
{
	uint64_t n = 1;
	for (uint64_t i = 0; i + 1 < len; i++)
		n += s[i] == '\n';
	return n;
}

static void tm_meta_rebuild(tui *t)
{
	const qtk_model *m = t->m;
	uint64_t need = m->nkv + m->nblobs + 1;
	for (size_t i = 0; i < m->nkv; i++)
		if (t->kv_open[i])
			need += m->kv[i].val.type == QTK_V_ARR ? m->kv[i].val.n
								: tm_count_lines(m->kv[i].val.v.str.s, m->kv[i].val.v.str.len);
	for (size_t i = 0; i < m->nblobs; i++)
		if (t->blob_open[i])
			need += tm_count_lines((const char *)m->blobs[i].data, m->blobs[i].len);
	tui_mrow *rows = qtk_calloc((size_t)need, sizeof *rows);
	if (!rows)
		return;
	size_t n = 0;
	for (size_t i = 0; i < m->nkv; i++) {
		rows[n++] = (tui_mrow){0, (uint32_t)i, 0};
		if (!t->kv_open[i])
			continue;
		const qtk_value *v = &m->kv[i].val;
		if (v->type == QTK_V_ARR)
			for (uint64_t e = 0; e < v->n; e++)
				rows[n++] = (tui_mrow){2, (uint32_t)i, e};
		else
			n = tm_lines(rows, n, 3, (uint32_t)i, v->v.str.s, v->v.str.len);
	}
	for (size_t i = 0; i < m->nblobs; i++) {
		rows[n++] = (tui_mrow){1, (uint32_t)i, 0};
		if (t->blob_open[i])
			n = tm_lines(rows, n, 4, (uint32_t)i, (const char *)m->blobs[i].data, m->blobs[i].len);
	}
	qtk_free(t->mrows);
	t->mrows = rows;
	t->nmrows = n;
	if (t->mcur >= n)
		t->mcur = n ? n - 1 : 0;
}

/* ---- Provenance and memory text -------------------------------------------- */

static int tm_add_line(char ***lines, size_t *n, const char *s)
{
	char **p = qtk_realloc(*lines, (*n + 1) * sizeof *p);
	if (!p)
		return -1;
	*lines = p;
	p[*n] = qtk_text_dup(s, strlen(s), 0); /* record text, names, messages: shown inert */
	if (!p[*n])
		return -1;
	(*n)++;
	return 0;
}

/* Split text into lines as the panes show them (at line ends and every 1021 bytes, tabs as two
 * spaces): fn(ctx, line, its length) for each; stops at fn's non-zero return. */
static int tm_split(const char *s, int (*fn)(void *ctx, char *line, size_t n), void *ctx)
{
	char buf[1024];
	size_t k = 0;
	for (const char *p = s;; p++) {
		if (*p == '\n' || !*p || k >= sizeof buf - 3) {
			buf[k] = 0;
			if (fn(ctx, buf, k))
				return -1;
			k = 0;
			if (!*p)
				break;
			if (*p != '\n')
				buf[k++] = *p;
			continue;
		}
		if (*p == '\t') {
			buf[k++] = ' ';
			buf[k++] = ' ';
		} else {
			buf[k++] = *p;
		}
	}
	return 0;
}

typedef struct tlines {
	char ***lines;
	size_t *n;
} tlines;

static int tl_add(void *ctx, char *line, size_t n)
{
	(void)n;
	tlines *tl = ctx;
	return tm_add_line(tl->lines, tl->n, line);
}

/* Split text into lines (tabs become two spaces). */
static int tm_add_text(char ***lines, size_t *n, const char *s)
{
	tlines tl = {lines, n};
	return tm_split(s, tl_add, &tl);
}

/* The lines of one block: each shown inert, NUL-terminated, at off[i]. */
typedef struct tblock {
	qtk_buf blk;
	size_t *off, n, cap;
} tblock;

static int tb_add(void *ctx, char *line, size_t n)
{
	tblock *b = ctx;
	char *d = qtk_text_dup(line, n, 0); /* record text: shown inert */
	if (b->n == b->cap) {
		size_t nc = b->cap ? 2 * b->cap : 1024;
		size_t *no = qtk_realloc(b->off, nc * sizeof *no);
		if (no) {
			b->off = no;
			b->cap = nc;
		}
	}
	int rc = !d || b->n == b->cap ? -1 : 0;
	if (!rc)
		b->off[b->n++] = b->blk.len;
	rc = rc || qtk_buf_put(&b->blk, d, strlen(d) + 1) ? -1 : 0;
	qtk_free(d);
	return rc;
}

/* tm_add_text's lines for the record's text, written into one block that the pane's last
 * lines point into (a record of 100,000 tensors is a million lines: no allocation a line). */
static int tm_add_text_block(tui *t, const char *s)
{
	tblock b = {{0}, NULL, 0, 0};
	size_t room = 1, lines = 1;
	for (const char *p = s; *p; p++) { /* the block's size when the lines are shown as they are */
		room += *p == '\t' ? 2 : 1;
		lines += *p == '\n';
	}
	b.cap = lines + room / 1000 + 1;
	if (qtk_buf_reserve(&b.blk, room + lines) || !(b.off = qtk_malloc(b.cap * sizeof *b.off))) {
		qtk_buf_free(&b.blk);
		return -1;
	}
	int rc = tm_split(s, tb_add, &b);
	char **l = rc || b.blk.failed ? NULL : qtk_realloc(t->prov, (t->nprov + b.n + 1) * sizeof *l);
	if (!l) {
		qtk_buf_free(&b.blk);
		qtk_free(b.off);
		return -1;
	}
	for (size_t i = 0; i < b.n; i++)
		l[t->nprov + i] = (char *)b.blk.p + b.off[i];
	t->prov = l;
	t->nprov += b.n;
	t->prov_block = (char *)b.blk.p;
	t->nprov_block = b.n;
	qtk_free(b.off);
	return 0;
}

/* The laid-out record made into the pane's last lines where it lies: each line's tabs widened
 * to two spaces and its end made a NUL, from the end backwards, in its own block grown in place
 * (a chained record's text is over 100 MB: no second copy). Only when every line is shown as it
 * is and short of tm_split's cut: 1 when taken (w is left empty), 0 when the caller is to copy
 * the lines (tm_add_text_block), -1 out of memory. */
static int tm_take_text(tui *t, qtk_jtext *w)
{
	char line[1024];
	size_t tabs = 0, lines = 1, k = 0;
	for (size_t i = 0; i <= w->len; i++) {
		const char c = i < w->len ? w->p[i] : '\n';
		if (c == '\n') {
			if (!qtk_text_clean(line, k, 0))
				return 0;
			lines += i < w->len;
			k = 0;
		} else if (k + 2 > 1020 || !c) {
			return 0; /* a line tm_split would cut, or a NUL in the text */
		} else if (c == '\t') {
			line[k++] = ' ';
			line[k++] = ' ';
			tabs++;
		} else {
			line[k++] = c;
		}
	}
	char **l = qtk_realloc(t->prov, (t->nprov + lines + 1) * sizeof *l);
	if (!l)
		return -1;
	t->prov = l;
	if (!qtk_jtext_reserve(w, tabs + 1))
		return -1;
	char *p = w->p;
	size_t d = w->len + tabs;
	p[d] = 0;
	for (size_t i = w->len; i-- > 0;) {
		if (p[i] == '\t') {
			p[--d] = ' ';
			p[--d] = ' ';
		} else {
			p[--d] = p[i] == '\n' ? 0 : p[i];
		}
	}
	w->len += tabs;
	size_t n = 0;
	l[t->nprov + n++] = p;
	for (size_t i = 0; i < w->len; i++)
		if (!p[i])
			l[t->nprov + n++] = p + i + 1;
	t->nprov += n;
	t->nprov_block = n;
	t->prov_laid = *w;
	memset(w, 0, sizeof *w);
	return 1;
}

static void tm_free_prov(tui *t)
{
	for (size_t i = 0; i + t->nprov_block < t->nprov; i++)
		qtk_free(t->prov[i]);
	qtk_free(t->prov);
	qtk_jtext_free(&t->prov_laid);
	qtk_free(t->prov_block);
	t->prov = NULL;
	t->prov_block = NULL;
	t->nprov = t->nprov_block = 0;
}

static const char *tm_jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* A stored encoding id that holds quantized values (not a float type). */
static bool tm_enc_quant(const char *id) { return strcmp(id, "f32") && strcmp(id, "f16") && strcmp(id, "bf16") && strcmp(id, "f64"); }

/* The decoded digests of a record's tensor list by name (held as a tree or as text), made when
 * a tensor first needs them. */
typedef struct dmap {
	const cJSON *list;
	bool made;
	qtk_strmap ix;
	char **names;
	char (*dec)[65];
	size_t n, cap;
} dmap;

static int dmap_add(void *ctx, const cJSON *e)
{
	dmap *d = ctx;
	const char *nm = tm_jstr(e, "name"), *dec = tm_jstr(e, "decoded");
	if (!nm || !dec || strlen(dec) != 64)
		return 0;
	if (d->n == d->cap) {
		size_t nc = d->cap ? 2 * d->cap : 256;
		char **nn = qtk_realloc(d->names, nc * sizeof *nn);
		if (nn)
			d->names = nn;
		char(*nd)[65] = nn ? qtk_realloc(d->dec, nc * sizeof *nd) : NULL;
		if (!nd)
			return QTK_E_IO;
		d->dec = nd;
		d->cap = nc;
	}
	if (!(d->names[d->n] = qtk_strdup(nm)))
		return QTK_E_IO;
	memcpy(d->dec[d->n], dec, 65);
	if (qtk_strmap_put(&d->ix, d->names[d->n], d->n, NULL) < 0) {
		qtk_free(d->names[d->n]);
		return QTK_E_IO;
	}
	d->n++;
	return 0;
}

static const char *dmap_get(dmap *d, const char *name)
{
	if (!d->made) {
		d->made = true;
		if (d->list)
			qtk_prov_list_each(d->list, dmap_add, d); /* out of memory: what was read */
	}
	size_t k;
	return qtk_strmap_get(&d->ix, name, &k) ? d->dec[k] : NULL;
}

static void dmap_free(dmap *d)
{
	for (size_t i = 0; i < d->n; i++)
		qtk_free(d->names[i]);
	qtk_free(d->names);
	qtk_free(d->dec);
	qtk_strmap_free(&d->ix);
}

/* One tensor of the record's transform: 1 exact (kept as stored, widened to F32, decoded to F32,
 * or the same decoded digest as the source record's), 0 re-fitted (quantized or narrowed),
 * -1 not recorded (one quantized layout to another: a repack is exact, a re-fit is not). */
static int tm_prov_exact(const char *name, const char *from, const char *to, dmap *src, dmap *out)
{
	if (!strcmp(from, to))
		return 1;
	/* the source was written by qconvert too: its record has the decoded digest */
	const char *dsrc = dmap_get(src, name), *dout = dmap_get(out, name);
	if (dsrc && dout && !strchr(dout, '~'))
		return !strcmp(dsrc, dout);
	if (!strcmp(to, "f32") || (!strcmp(to, "f64") && !tm_enc_quant(from)))
		return 1;
	if (!tm_enc_quant(to))
		return 0; /* to F16/BF16: rounded unless it already was that width */
	return tm_enc_quant(from) ? -1 : 0;
}

typedef struct pcount {
	size_t cnt[3]; /* not recorded, re-fitted, exact */
	dmap src, out;
} pcount;

static int pcount_one(void *ctx, const char *key, const cJSON *val, int64_t off)
{
	(void)off;
	pcount *c = ctx;
	const char *f = tm_jstr(val, "from"), *to = tm_jstr(val, "to");
	if (f && to && key)
		c->cnt[tm_prov_exact(key, f, to, &c->src, &c->out) + 1]++;
	return 0;
}

/* The record in one line: "quantized by qtk 0.1.0 from NAME on DATE, N tensors exact, M re-fitted".
 * j is the record as a tree whose tensor lists and maps may be held as text (qtk_prov_parse). */
static void tm_prov_summary(const cJSON *j, char *out, size_t n)
{
	const cJSON *tool = cJSON_GetObjectItemCaseSensitive(j, "tool");
	const cJSON *src = cJSON_GetObjectItemCaseSensitive(j, "source");
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "transform");
	const char *kind = tm_jstr(tr, "kind");
	static const char *const verbs[][2] = {
		{"quantize", "quantized"}, {"repack", "repacked"}, {"convert", "converted"}, {"dequantize", "dequantized"}};
	const char *verb = tr ? "written" : "recorded";
	for (size_t k = 0; kind && k < sizeof verbs / sizeof *verbs; k++)
		if (!strcmp(kind, verbs[k][0]))
			verb = verbs[k][1];
	const char *from = tm_jstr(src, "name");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(src, "files");
	if (!from && cJSON_IsArray(files) && files->child)
		from = tm_jstr(files->child, "path");
	if (!from)
		from = tm_jstr(src, "container");
	const char *time = tm_jstr(j, "time");
	size_t at = (size_t)snprintf(out, n, "%s by %s %s", verb, tm_jstr(tool, "name") ? tm_jstr(tool, "name") : "?",
				     tm_jstr(tool, "version") ? tm_jstr(tool, "version") : "");
	if (from && at < n)
		at += (size_t)snprintf(out + at, n - at, " from %s", from);
	if (time && at < n)
		at += (size_t)snprintf(out + at, n - at, " on %.10s", time);
	const cJSON *tens = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tr, "params"), "tensors");
	const bool as_text = cJSON_IsRaw(tens) && tens->valuestring && tens->valuestring[0] == '{';
	if ((!cJSON_IsObject(tens) && !as_text) || at >= n)
		return;
	pcount c;
	memset(&c, 0, sizeof c);
	c.src.list = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(src, "record"), "output"), "tensors");
	c.out.list = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "output"), "tensors");
	if (as_text) {
		qtk_err e;
		qtk_err_clear(&e);
		qtk_json_each_member(tens->valuestring, strlen(tens->valuestring), QTK_JSON_INTS, NULL, 0, &e, pcount_one, &c);
	} else {
		for (const cJSON *m = tens->child; m; m = m->next)
			pcount_one(&c, m->string, m, 0);
	}
	dmap_free(&c.src);
	dmap_free(&c.out);
	at += (size_t)snprintf(out + at, n - at, ", %zu tensor%s exact, %zu re-fitted", c.cnt[2], c.cnt[2] == 1 ? "" : "s",
			       c.cnt[1]);
	if (c.cnt[0] && at < n)
		snprintf(out + at, n - at, ", %zu repacked (exactness not recorded)", c.cnt[0]);
}

static int tm_audit_line(void *arg, const char *line)
{
	tui *t = arg;
	return tm_add_line(&t->prov, &t->nprov, line);
}

/* The audit section of the provenance pane (after the record's summary lines, before its
 * text): executable content, chat templates. */
static int tm_audit_build(tui *t)
{
	if (audit_lines(t->m, tm_audit_line, t) < 0)
		return tm_add_line(&t->prov, &t->nprov, "audit: could not run (out of memory)");
	return tm_add_line(&t->prov, &t->nprov, "");
}

static int tm_prov_build(tui *t)
{
	const qtk_kv *kv = qtk_kv_find(t->m, "qtk.provenance");
	const qtk_blob *b = qtk_blob_find(t->m, "qtk-provenance.json");
	const char *txt = NULL, *where = NULL;
	size_t len = 0;
	if (kv && kv->val.type == QTK_V_STR) {
		txt = kv->val.v.str.s;
		len = (size_t)kv->val.v.str.len;
		where = "GGUF key qtk.provenance";
	} else if (b) {
		txt = (const char *)b->data;
		len = b->len;
		where = "qtk-provenance.json";
	}
	char line[256];
	if (!where) {
		tm_add_line(&t->prov, &t->nprov, "no provenance record");
		tm_add_line(&t->prov, &t->nprov, "");
		tm_add_line(&t->prov, &t->nprov, "Files written by qconvert carry one (GGUF key qtk.provenance,");
		tm_add_line(&t->prov, &t->nprov, "safetensors __metadata__, qtk-provenance.json in HF directories).");
		tm_add_line(&t->prov, &t->nprov, "");
		return tm_audit_build(t);
	}
	/* a valid record is read with its tensor lists as text (a tree of 100,000 entries is ~100
	 * MB); any other JSON as a tree */
	cJSON *j = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	const bool valid = !qtk_prov_parse(txt, len, NULL, &j, &e);
	if (!valid)
		j = cJSON_ParseWithLength(txt, len);
	char sum[512];
	if (j && cJSON_IsObject(j)) {
		tm_prov_summary(j, sum, sizeof sum);
		tm_add_line(&t->prov, &t->nprov, sum);
	}
	snprintf(line, sizeof line, "record from %s; Enter: check the tensors against it (reads them all)", where);
	tm_add_line(&t->prov, &t->nprov, line);
	tm_add_line(&t->prov, &t->nprov, "");
	int rc = tm_audit_build(t) ? -1 : 0;
	if (!rc && !j)
		rc = tm_add_line(&t->prov, &t->nprov, "the record is not valid JSON");
	const bool shown = j != NULL;
	if (valid) { /* the tree is not needed for the text (a chained record's is tens of MB) */
		qtk_json_tree_free(j);
		j = NULL;
	}
	if (!rc && shown) {
		/* the text as cJSON_Print lays it out, made from the text itself where it can be */
		qtk_jtext w = {0};
		int r = qtk_json_refmt(&w, txt, len, 0);
		char *p = NULL;
		if (r == 1) {
			cJSON *full = valid ? cJSON_ParseWithLength(txt, len) : NULL;
			p = cJSON_Print(valid ? full : j);
			cJSON_Delete(full);
		}
		int took = r == 0 && qtk_jtext_ok(&w) ? tm_take_text(t, &w) : 0;
		if (took < 0 || (!took && (r == 0 ? !qtk_jtext_ok(&w) || tm_add_text_block(t, w.p)
						  : !p || tm_add_text_block(t, p))))
			rc = -1;
		cJSON_free(p);
		qtk_jtext_free(&w);
	}
	cJSON_Delete(j);
	return rc;
}

static void tm_free_lines(char **l, size_t n);

/* The record's tensor list against the file's digests, an entry at a time. */
typedef struct vcount {
	const qtk_digests *d;
	size_t ok, bad, n;
	char ***out;
	size_t *nout;
} vcount;

static int vcount_one(void *ctx, const cJSON *c)
{
	vcount *v = ctx;
	v->n++;
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(c, "name");
	const cJSON *enc = cJSON_GetObjectItemCaseSensitive(c, "encoded");
	uint8_t want[32];
	const qtk_leaf *l = cJSON_IsString(nm) ? qtk_digests_find(v->d, nm->valuestring) : NULL;
	if (l && cJSON_IsString(enc) && qtk_prov_unhex(enc->valuestring, want) && l->has_enc && !memcmp(want, l->enc, 32)) {
		v->ok++;
		return 0;
	}
	if (v->bad++ < 20) {
		char line[320];
		snprintf(line, sizeof line, "  changed: %.200s", cJSON_IsString(nm) ? nm->valuestring : "?");
		tm_add_line(v->out, v->nout, line);
	}
	return 0;
}

/* Check every tensor of the file against the embedded record's encoded
 * digests; the result goes on top of the provenance pane. */
static int tm_prov_verify(tui *t)
{
	size_t len = 0;
	const char *where = NULL;
	const char *txt = qtk_prov_find(t->m, &len, &where);
	if (!txt)
		return 0;
	/* the pane is made again below: its text (a million lines for 100,000 tensors) goes now,
	 * before the record is read and the tensors hashed */
	tm_free_prov(t);
	qtk_err err;
	qtk_err_clear(&err);
	cJSON *rec = NULL;
	char line[320];
	char **out = NULL;
	size_t nout = 0;
	if (qtk_prov_parse(txt, len, t->m->path, &rec, &err)) {
		snprintf(line, sizeof line, "digests: the record is malformed: %.200s: %.80s", err.msg, err.subject);
		tm_add_line(&out, &nout, line);
	} else {
		const cJSON *ts = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rec, "output"), "tensors");
		qtk_digests d;
		memset(&d, 0, sizeof d);
		qtk_digest_opts o = {0};
		/* in the scheme the record names (an earlier record: version 1) */
		o.scheme = qtk_digest_scheme_of(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(rec, "output"), "tensor_root"),
			"scheme")));
		o.enc_only = true;
		o.keep_going = true;
		if (!cJSON_IsArray(ts) && !cJSON_IsRaw(ts)) {
			tm_add_line(&out, &nout, "digests: the record lists no tensors (roots only)");
		} else if (qtk_digest_model(t->m, &o, &d, &err)) {
			snprintf(line, sizeof line, "digests: cannot read the tensors: %.200s", err.msg);
			tm_add_line(&out, &nout, line);
		} else {
			/* the list an entry at a time (held as text) */
			vcount vc = {&d, 0, 0, 0, &out, &nout};
			qtk_prov_list_each(ts, vcount_one, &vc);
			size_t ok = vc.ok, bad = vc.bad, n = vc.n;
			if (bad)
				snprintf(line, sizeof line, "digests: FAILED: %zu of %zu tensors differ from the record", bad, n);
			else
				snprintf(line, sizeof line, "digests: ok: all %zu tensors match the record", ok);
			/* the summary first, then the changed tensors */
			char **head = NULL;
			size_t nh = 0;
			tm_add_line(&head, &nh, line);
			for (size_t i = 0; i < nout; i++)
				tm_add_line(&head, &nh, out[i]);
			tm_free_lines(out, nout);
			out = head;
			nout = nh;
		}
		qtk_digests_free(&d);
	}
	qtk_json_tree_free(rec);
	tm_add_line(&out, &nout, "");
	/* rebuild the pane: verification result, then the record */
	tm_free_prov(t);
	t->prov = out;
	t->nprov = nout;
	return tm_prov_build(t);
}

static int tm_mem_build(tui *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return -1;
	insp_opts o = {0};
	report_memory(t->m, f, &o);
	fclose(f);
	int rc = buf ? tm_add_text(&t->mem, &t->nmem, buf) : -1;
	free(buf);
	/* drop the first line (the file name: the title bar has it) and the blank after it */
	if (!rc && t->nmem > 2) {
		qtk_free(t->mem[0]);
		qtk_free(t->mem[1]);
		memmove(t->mem, t->mem + 2, (t->nmem - 2) * sizeof *t->mem);
		t->nmem -= 2;
	}
	while (t->nmem && !t->mem[t->nmem - 1][0])
		qtk_free(t->mem[--t->nmem]);
	return rc;
}

/* ---- Setup ------------------------------------------------------------------ */

int tui_init(tui *t, qtk_model *m, int w, int h, bool utf8, bool color)
{
	memset(t, 0, sizeof *t);
	t->m = m;
	t->w = w;
	t->h = h;
	t->utf8 = utf8;
	t->color = color;
	t->filter = -1;
	t->pending = -1;
	compute_totals(m, &t->tt);
	size_t nt = m->ntensors;
	t->groups = qtk_calloc(nt + 1, sizeof *t->groups);
	t->tgroup = qtk_calloc(nt + 1, sizeof *t->tgroup);
	t->rows = qtk_calloc(nt * 2 + 1, sizeof *t->rows);
	t->stats = qtk_calloc(nt + 1, sizeof *t->stats);
	t->kv_open = qtk_calloc(m->nkv + 1, sizeof *t->kv_open);
	t->blob_open = qtk_calloc(m->nblobs + 1, sizeof *t->blob_open);
	t->kv_sha = qtk_calloc(m->nkv + 1, sizeof *t->kv_sha);
	t->blob_sha = qtk_calloc(m->nblobs + 1, sizeof *t->blob_sha);
	if (!t->groups || !t->tgroup || !t->rows || !t->stats || !t->kv_open || !t->blob_open || !t->kv_sha ||
	    !t->blob_sha)
		return -1;
	/* large values show as a size and a digest: computed once */
	for (size_t i = 0; i < m->nkv; i++)
		if (tui_kv_large(&m->kv[i]) && tm_sha_kv(&m->kv[i], t->kv_sha[i]))
			return -1;
	for (size_t i = 0; i < m->nblobs; i++)
		if (tui_blob_large(&m->blobs[i]) && tm_sha_bytes(m->blobs[i].data, m->blobs[i].len, t->blob_sha[i]))
			return -1;
	for (size_t i = 0; i < nt; i++) {
		size_t pl;
		int b = block_of(m->tensors[i].name, &pl);
		t->tgroup[i] = -1;
		if (b < 0)
			continue;
		size_t g = 0;
		while (g < t->ngroups && (t->groups[g].block != b || t->groups[g].prefix_len != pl))
			g++;
		if (g == t->ngroups) {
			t->groups[g] = (tui_group){.block = b, .prefix_len = pl, .first = i};
			t->ngroups++;
		}
		t->tgroup[i] = (int)g;
		t->groups[g].n++;
		t->groups[g].n_params += m->tensors[i].n_params;
		t->groups[g].n_bytes += m->tensors[i].n_bytes;
	}
	/* small models open, large ones show their structure first */
	for (size_t g = 0; g < t->ngroups; g++)
		t->groups[g].open = nt <= 40;
	tm_rebuild(t);
	tm_meta_rebuild(t);
	if (tm_prov_build(t) || tm_mem_build(t))
		return -1;
	return 0;
}

static void tm_free_lines(char **l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		qtk_free(l[i]);
	qtk_free(l);
}

void tui_free(tui *t)
{
	if (t->stats)
		for (size_t i = 0; i < t->m->ntensors; i++)
			qtk_free(t->stats[i]);
	qtk_free(t->stats);
	qtk_free(t->groups);
	qtk_free(t->tgroup);
	qtk_free(t->rows);
	qtk_free(t->kv_open);
	qtk_free(t->blob_open);
	qtk_free(t->kv_sha);
	qtk_free(t->blob_sha);
	qtk_free(t->mrows);
	if (t->re_ok)
		regfree(&t->re);
	tm_free_prov(t);
	tm_free_lines(t->mem, t->nmem);
	memset(t, 0, sizeof *t);
}

/* Lines available to a pane's list (title, tabs, types, header, status). */
static size_t tm_page(const tui *t) { return t->h > 6 ? (size_t)(t->h - 5) : 1; }

static void tm_clamp_list(size_t *cur, size_t *top, size_t n, size_t page)
{
	if (n == 0) {
		*cur = *top = 0;
		return;
	}
	if (*cur >= n)
		*cur = n - 1;
	if (*cur < *top)
		*top = *cur;
	if (*cur >= *top + page)
		*top = *cur - page + 1;
	if (*top + page > n)
		*top = n > page ? n - page : 0;
}

void tui_resize(tui *t, int w, int h)
{
	t->w = w;
	t->h = h;
	tm_clamp_list(&t->cur, &t->top, t->nrows, tm_page(t));
	tm_clamp_list(&t->mcur, &t->mtop, t->nmrows, tm_page(t));
}

/* ---- Moving ------------------------------------------------------------------ */

static void tm_move(size_t *cur, size_t n, enum tm_req rq, size_t page)
{
	if (!n)
		return;
	switch (rq) {
	case RQ_UP: if (*cur) (*cur)--; break;
	case RQ_DOWN: if (*cur + 1 < n) (*cur)++; break;
	case RQ_PGUP: *cur = *cur > page ? *cur - page : 0; break;
	case RQ_PGDN: *cur = *cur + page < n ? *cur + page : n - 1; break;
	case RQ_TOP: *cur = 0; break;
	case RQ_BOTTOM: *cur = n - 1; break;
	default: break;
	}
}

static void tm_scroll(int *pos, int lines, enum tm_req rq, int page)
{
	switch (rq) {
	case RQ_UP: (*pos)--; break;
	case RQ_DOWN: (*pos)++; break;
	case RQ_PGUP: *pos -= page; break;
	case RQ_PGDN: *pos += page; break;
	case RQ_TOP: *pos = 0; break;
	case RQ_BOTTOM: *pos = lines > 0 ? lines : 1 << 20; break;
	default: break;
	}
	/* the view clamps the end (it knows the line count); here only the start */
	(void)lines;
	if (*pos < 0)
		*pos = 0;
}

/* ---- Search ---------------------------------------------------------------------- */

/* The query compiled as a POSIX extended regular expression, case-insensitive; an invalid
 * one leaves re_ok false and says why in re_err. */
static void tm_compile(tui *t)
{
	if (t->re_ok)
		regfree(&t->re);
	t->re_ok = false;
	t->re_err[0] = 0;
	if (!t->qlen)
		return;
	int rc = regcomp(&t->re, t->query, REG_EXTENDED | REG_ICASE | REG_NOSUB);
	if (rc) {
		regerror(rc, &t->re, t->re_err, sizeof t->re_err);
		return;
	}
	t->re_ok = true;
}

static bool tm_match(const tui *t, const char *hay) { return t->re_ok && regexec(&t->re, hay, 0, NULL, 0) == 0; }

/* Tensor indices in display order, every group open (what a search walks). *no receives
 * the count; NULL when out of memory. */
static size_t *tm_order(const tui *t, size_t *no)
{
	size_t nt = t->m->ntensors;
	size_t *order = qtk_calloc(nt + 1, sizeof *order);
	*no = 0;
	if (!order)
		return NULL;
	for (size_t r = 0; r < t->nrows; r++) {
		if (!t->rows[r].group_row) {
			order[(*no)++] = t->rows[r].idx;
			continue;
		}
		if (t->groups[t->rows[r].idx].open)
			continue;
		/* members of a closed group, in the order they take when it opens */
		size_t first = *no;
		for (size_t i = 0; i < nt; i++)
			if (t->tgroup[i] == (int)t->rows[r].idx && tm_passes(t, i))
				order[(*no)++] = i;
		tui_row *tmp = qtk_calloc(*no - first + 1, sizeof *tmp);
		if (tmp) {
			for (size_t k = first; k < *no; k++)
				tmp[k - first] = (tui_row){0, (uint32_t)order[k]};
			tm_sorting = t;
			qsort(tmp, *no - first, sizeof *tmp, tm_cmp);
			for (size_t k = first; k < *no; k++)
				order[k] = tmp[k - first].idx;
			qtk_free(tmp);
		}
	}
	return order;
}

static bool tm_meta_hit(const tui *t, const tui_mrow *r)
{
	if (r->kind == 0)
		return tm_match(t, t->m->kv[r->idx].key);
	return r->kind == 1 && tm_match(t, t->m->blobs[r->idx].name);
}

/* Count the matches of the query in the pane searched (t->nmatch); t->match_at is the
 * rank of the match under the cursor (1-based), 0 when the cursor is on none. */
static void tm_count(tui *t)
{
	t->nmatch = t->match_at = 0;
	if (!t->re_ok)
		return;
	if (t->pane == P_META) {
		for (size_t r = 0; r < t->nmrows; r++)
			if (tm_meta_hit(t, &t->mrows[r])) {
				t->nmatch++;
				if (r == t->mcur)
					t->match_at = t->nmatch;
			}
		return;
	}
	size_t no;
	size_t *order = tm_order(t, &no);
	long cur = tui_cur_tensor(t);
	for (size_t k = 0; order && k < no; k++)
		if (tm_match(t, t->m->tensors[order[k]].name)) {
			t->nmatch++;
			if ((long)order[k] == cur)
				t->match_at = t->nmatch;
		}
	qtk_free(order);
}

/* "match 2 of 5: QUERY" (or why there is none) into the status message. */
static void tm_match_msg(tui *t)
{
	tm_count(t);
	if (t->nmatch)
		snprintf(t->msg, sizeof t->msg, "match %zu of %zu: %.120s", t->match_at, t->nmatch, t->query);
	else
		snprintf(t->msg, sizeof t->msg, "not found: %.120s", t->query);
}

/* Find the next (dir 1) or previous (-1) match after the cursor; opens groups. */
static void tm_find(tui *t, int dir)
{
	if (!t->query[0]) {
		snprintf(t->msg, sizeof t->msg, "no search yet: press / to search");
		return;
	}
	if (!t->re_ok) {
		snprintf(t->msg, sizeof t->msg, "invalid regex: %.80s: %.90s", t->re_err, t->query);
		return;
	}
	if (t->pane == P_META) {
		size_t n = t->nmrows;
		for (size_t k = 1; k <= n; k++) {
			size_t r = dir > 0 ? (t->mcur + k) % n : (t->mcur + n - k % n) % n;
			if (tm_meta_hit(t, &t->mrows[r])) {
				t->mcur = r;
				tm_match_msg(t);
				return;
			}
		}
		snprintf(t->msg, sizeof t->msg, "not found: %.120s", t->query);
		return;
	}
	/* tensors, in display order with every group open */
	long cur = tui_cur_tensor(t);
	size_t start = cur >= 0 ? (size_t)cur : (t->cur < t->nrows ? t->groups[t->rows[t->cur].idx].first : 0);
	size_t no, pos = 0;
	size_t *order = tm_order(t, &no);
	if (!order)
		return;
	for (size_t k = 0; k < no; k++)
		if (order[k] == start)
			pos = k;
	long hit = -1;
	for (size_t k = 1; k <= no && hit < 0; k++) {
		size_t r = dir > 0 ? (pos + k) % no : (pos + no - k % no) % no;
		if (tm_match(t, t->m->tensors[order[r]].name))
			hit = (long)order[r];
	}
	qtk_free(order);
	if (hit < 0) {
		snprintf(t->msg, sizeof t->msg, "not found: %.120s", t->query);
		return;
	}
	int g = t->tgroup[hit];
	if (g >= 0 && !t->groups[g].open) {
		t->groups[g].open = true;
		tm_rebuild(t);
	}
	for (size_t r = 0; r < t->nrows; r++)
		if (!t->rows[r].group_row && t->rows[r].idx == (uint32_t)hit)
			t->cur = r;
	tm_match_msg(t);
}

/* Keys while the search prompt is open: the query compiles and counts as it is typed. */
static unsigned tm_search_key(tui *t, int key)
{
	if (key == TK_ESC) {
		t->searching = false;
		t->qlen = 0;
		t->query[0] = 0;
	} else if (key == TK_ENTER) {
		t->searching = false;
		tm_find(t, 1);
		return TUI_REDRAW;
	} else if (key == TK_BS) {
		if (t->qlen)
			t->query[--t->qlen] = 0;
	} else if (key >= 0x20 && key < 0x7f && t->qlen + 1 < sizeof t->query) {
		t->query[t->qlen++] = (char)key;
		t->query[t->qlen] = 0;
	}
	tm_compile(t);
	tm_count(t);
	return TUI_REDRAW;
}

/* ---- Keys ------------------------------------------------------------------------ */

static unsigned tm_enter_tensors(tui *t)
{
	if (t->cur >= t->nrows)
		return 0;
	tui_row r = t->rows[t->cur];
	if (r.group_row) {
		t->groups[r.idx].open = !t->groups[r.idx].open;
		tm_rebuild(t);
		return TUI_REDRAW;
	}
	t->pane = P_DETAIL;
	t->dscroll = 0;
	if (!t->stats[r.idx] && qtk_can_decode(&t->m->tensors[r.idx])) {
		t->pending = r.idx;
		t->progress = 0;
		return TUI_REDRAW | TUI_COMPUTE;
	}
	return TUI_REDRAW;
}

static unsigned tm_tensors_key(tui *t, enum tm_req rq)
{
	switch (rq) {
	case RQ_ENTER: return tm_enter_tensors(t);
	case RQ_LEFT:
		if (t->cur < t->nrows) {
			tui_row r = t->rows[t->cur];
			int g = r.group_row ? (int)r.idx : t->tgroup[r.idx];
			if (g >= 0 && t->groups[g].open) {
				t->groups[g].open = false;
				if (!r.group_row) /* land on the group row */
					t->rows[t->cur] = (tui_row){1, (uint32_t)g};
				tm_rebuild(t);
			}
		}
		return TUI_REDRAW;
	case RQ_RIGHT:
		if (t->cur < t->nrows && t->rows[t->cur].group_row && !t->groups[t->rows[t->cur].idx].open) {
			t->groups[t->rows[t->cur].idx].open = true;
			tm_rebuild(t);
		} else if (tui_cur_tensor(t) >= 0) {
			return tm_enter_tensors(t);
		}
		return TUI_REDRAW;
	case RQ_SORT: case RQ_SORT_PREV: case RQ_REVERSE:
		if (rq == RQ_REVERSE)
			t->reverse = !t->reverse;
		else
			t->sort = (t->sort + (rq == RQ_SORT ? 1 : TM_NSORT - 1)) % TM_NSORT;
		tm_rebuild(t);
		/* the status line then says how the table is sorted and filtered, with the filtered totals */
		if (!t->sort && !t->reverse && t->filter < 0)
			snprintf(t->msg, sizeof t->msg, "sorted by %s", tm_sort_names[t->sort]);
		return TUI_REDRAW;
	case RQ_WHEEL_UP: case RQ_WHEEL_DOWN:
		for (int k = 0; k < TM_WHEEL; k++)
			tm_move(&t->cur, t->nrows, rq == RQ_WHEEL_UP ? RQ_UP : RQ_DOWN, 1);
		return TUI_REDRAW;
	case RQ_FILTER:
		t->filter = t->filter + 1 >= (int)t->tt.ntypes ? -1 : t->filter + 1;
		tm_rebuild(t);
		if (t->filter < 0 && !t->sort && !t->reverse)
			snprintf(t->msg, sizeof t->msg, "showing all types");
		return TUI_REDRAW;
	default:
		tm_move(&t->cur, t->nrows, rq, tm_page(t) - 1);
		return TUI_REDRAW;
	}
}

static unsigned tm_meta_key(tui *t, enum tm_req rq)
{
	if (rq == RQ_ENTER || rq == RQ_RIGHT || rq == RQ_LEFT) {
		if (t->mcur >= t->nmrows)
			return 0;
		tui_mrow r = t->mrows[t->mcur];
		bool *open = r.kind == 1 || r.kind == 4 ? &t->blob_open[r.idx] : &t->kv_open[r.idx];
		bool blob = r.kind == 1 || r.kind == 4;
		bool can = blob ? !tui_blob_binary(&t->m->blobs[r.idx]) : tui_kv_expandable(&t->m->kv[r.idx]);
		if (!can) {
			if (blob && rq == RQ_ENTER) {
				snprintf(t->msg, sizeof t->msg, "binary file: shown as its size and SHA-256, not as text");
				return TUI_REDRAW;
			}
			return 0;
		}
		bool want = rq == RQ_ENTER ? !*open : rq == RQ_RIGHT;
		if (want == *open)
			return 0;
		*open = want;
		uint8_t head = r.kind == 1 || r.kind == 4 ? 1 : 0;
		tm_meta_rebuild(t);
		for (size_t k = 0; k < t->nmrows; k++)
			if (t->mrows[k].kind == head && t->mrows[k].idx == r.idx)
				t->mcur = k;
		return TUI_REDRAW;
	}
	for (int k = 0; k < (rq == RQ_WHEEL_UP || rq == RQ_WHEEL_DOWN ? TM_WHEEL : 1); k++)
		tm_move(&t->mcur, t->nmrows, rq == RQ_WHEEL_UP ? RQ_UP : rq == RQ_WHEEL_DOWN ? RQ_DOWN : rq, tm_page(t) - 1);
	return TUI_REDRAW;
}

unsigned tui_key(tui *t, int key)
{
	if (key == TK_RESIZE)
		return TUI_REDRAW;
	if (t->searching)
		return tm_search_key(t, key);
	enum tm_req rq = RQ_NONE;
	for (size_t i = 0; i < sizeof tm_keys / sizeof *tm_keys; i++)
		if (tm_keys[i].key == key)
			rq = tm_keys[i].rq;
	if (t->help) { /* any key closes the help; q still quits */
		t->help = false;
		return rq == RQ_QUIT ? TUI_QUIT : TUI_REDRAW;
	}
	t->msg[0] = 0;
	switch (rq) {
	case RQ_NONE: return 0;
	case RQ_QUIT: return TUI_QUIT;
	case RQ_HELP: t->help = true; return TUI_REDRAW;
	case RQ_NEXT_PANE: t->pane = (t->pane + 1) % P_COUNT; return TUI_REDRAW;
	case RQ_PREV_PANE: t->pane = (t->pane + P_COUNT - 1) % P_COUNT; return TUI_REDRAW;
	case RQ_SEARCH:
		if (t->pane != P_TENSORS && t->pane != P_META)
			t->pane = P_TENSORS;
		t->searching = true;
		t->qlen = 0;
		t->query[0] = 0;
		tm_compile(t);
		tm_count(t);
		return TUI_REDRAW;
	case RQ_NEXT: case RQ_PREV:
		if (t->pane != P_TENSORS && t->pane != P_META)
			t->pane = P_TENSORS;
		tm_find(t, rq == RQ_NEXT ? 1 : -1);
		return TUI_REDRAW;
	default:
		if (rq >= RQ_PANE && rq < RQ_PANE + P_COUNT) {
			t->pane = (int)(rq - RQ_PANE);
			return TUI_REDRAW;
		}
		break;
	}
	int page = (int)tm_page(t);
	if (rq == RQ_WHEEL_UP || rq == RQ_WHEEL_DOWN) { /* text panes scroll a few lines */
		int *pos = t->pane == P_DETAIL ? &t->dscroll : t->pane == P_PROV ? &t->pscroll : &t->mscroll;
		if (t->pane == P_DETAIL || t->pane == P_PROV || t->pane == P_MEMORY) {
			*pos += rq == RQ_WHEEL_UP ? -TM_WHEEL : TM_WHEEL;
			if (*pos < 0)
				*pos = 0;
			return TUI_REDRAW;
		}
	}
	switch (t->pane) {
	case P_TENSORS: return tm_tensors_key(t, rq);
	case P_META: return tm_meta_key(t, rq);
	case P_DETAIL:
		if (rq == RQ_BACK || rq == RQ_LEFT) {
			t->pane = P_TENSORS;
			return TUI_REDRAW;
		}
		if (rq == RQ_ENTER) {
			long ti = tui_cur_tensor(t);
			if (ti >= 0 && !t->stats[ti] && qtk_can_decode(&t->m->tensors[ti])) {
				t->pending = ti;
				return TUI_REDRAW | TUI_COMPUTE;
			}
			return 0;
		}
		tm_scroll(&t->dscroll, t->dlines, rq, page);
		return TUI_REDRAW;
	case P_PROV:
		if (rq == RQ_ENTER) {
			tm_prov_verify(t);
			t->pscroll = 0;
			return TUI_REDRAW;
		}
		tm_scroll(&t->pscroll, (int)t->nprov, rq, page);
		return TUI_REDRAW;
	case P_MEMORY: tm_scroll(&t->mscroll, (int)t->nmem, rq, page); return TUI_REDRAW;
	default: return 0;
	}
}

int tui_compute(tui *t, qtk_stats_progress cb, void *ctx)
{
	if (t->pending < 0)
		return 0;
	size_t i = (size_t)t->pending;
	qtk_tstats *s = qtk_malloc(sizeof *s);
	t->progress = 0;
	if (!s) {
		t->pending = -1;
		snprintf(t->msg, sizeof t->msg, "out of memory");
		return -1;
	}
	qtk_err_clear(&t->m->err);
	int rc = qtk_stats_compute(t->m, &t->m->tensors[i], s, cb, ctx);
	t->pending = -1;
	if (rc) {
		snprintf(t->msg, sizeof t->msg, "cannot compute: %.150s", t->m->err.msg);
		qtk_err_clear(&t->m->err);
		qtk_free(s);
		return -1;
	}
	t->stats[i] = s;
	return 0;
}


/* ---- Mouse ------------------------------------------------------------------------- */

const char *const tui_pane_names[P_COUNT] = {"Tensors", "Detail", "Metadata", "Provenance", "Memory"};

/* The tab line: " 1 Tensors " at x = 1, one blank between tabs (tv_title draws the same). */
int tui_tab_at(const tui *t, int x)
{
	(void)t;
	int at = 1;
	for (int p = 0; p < P_COUNT; p++) {
		int w = (int)strlen(tui_pane_names[p]) + 4;
		if (x >= at && x < at + w)
			return p;
		at += w + 1;
	}
	return -1;
}

unsigned tui_click(tui *t, int y, int x)
{
	if (t->help) {
		t->help = false;
		return TUI_REDRAW;
	}
	if (t->searching)
		return 0;
	t->msg[0] = 0;
	if (y == 1) {
		int p = tui_tab_at(t, x);
		if (p < 0)
			return 0;
		t->pane = p;
		return TUI_REDRAW;
	}
	if (y < TM_LIST_Y || y >= TM_LIST_Y + (int)tm_page(t))
		return 0;
	size_t row = (size_t)(y - TM_LIST_Y);
	if (t->pane == P_TENSORS && t->top + row < t->nrows) {
		/* a click on the selected row acts as Enter (opens a group, shows the detail) */
		if (t->top + row == t->cur)
			return tm_enter_tensors(t);
		t->cur = t->top + row;
		return TUI_REDRAW;
	}
	if (t->pane == P_META && t->mtop + row < t->nmrows) {
		if (t->mtop + row == t->mcur)
			return tm_meta_key(t, RQ_ENTER);
		t->mcur = t->mtop + row;
		return TUI_REDRAW;
	}
	return 0;
}
