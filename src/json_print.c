/* json_print.c - cJSON_Print's layout, written without cJSON's per-number printf.
 *
 * cJSON formats every number with "%1.15g", reads it back with sscanf and, when the value
 * does not come back within a relative DBL_EPSILON, prints "%1.17g": two printf calls and a
 * scanf per number, most of a header-only `qinspect --json`. Here integers below 10^15 are
 * written digit by digit (exactly what "%1.15g" gives them, and they read back exactly),
 * other numbers the way cJSON does. The layout is cJSON_Print's (tabs, "key":<TAB>value, ", "
 * between array elements), so documents keep their bytes; tests compare the two on random
 * trees and on every record.
 *
 * qtk_json_refmt goes from a compact JSON text straight to that layout without a tree, for the
 * common subset (see there); anything outside it is left to cJSON_Parse and qtk_json_fmt. */
#include "json.h"
#include "qtk.h"
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- output text -------------------------------------------------------- */

static bool jt_grow(qtk_jtext *w, size_t more) __attribute__((noinline));
static bool jt_grow(qtk_jtext *w, size_t more)
{
	if (w->failed)
		return false;
	if (more <= w->cap - w->len)
		return true;
	size_t need = w->len + more;
	if (need < w->len || need > SIZE_MAX / 2) {
		w->failed = 1;
		return false;
	}
	size_t cap = w->cap ? w->cap : 4096;
	while (cap < need + 1)
		cap *= 2;
	char *p = qtk_table_realloc(w->p, w->len, cap);
	if (!p) {
		w->failed = 1;
		return false;
	}
	w->p = p;
	w->cap = cap - 1; /* room for the terminating NUL */
	return true;
}

static inline void jt_put(qtk_jtext *w, const void *s, size_t n)
{
	if (n && (n <= w->cap - w->len || jt_grow(w, n))) {
		char *d = w->p + w->len;
		const char *c = s;
		w->len += n;
		if (n <= 16 && w->cap - (size_t)(d - w->p) >= 16) { /* short: no call */
			for (size_t k = 0; k < n; k++)
				d[k] = c[k];
			return;
		}
		memcpy(d, c, n);
	}
}

static inline void jt_c(qtk_jtext *w, char c)
{
	if (w->len < w->cap || jt_grow(w, 1))
		w->p[w->len++] = c;
}

static inline void jt_tabs(qtk_jtext *w, int n)
{
	if (n > 0 && ((size_t)n <= w->cap - w->len || jt_grow(w, (size_t)n))) {
		memset(w->p + w->len, '\t', (size_t)n);
		w->len += (size_t)n;
	}
}

bool qtk_jtext_reserve(qtk_jtext *w, size_t n)
{
	const int was = w->failed;
	if (jt_grow(w, n))
		return true;
	w->failed = was; /* only a wish: growing step by step may still succeed */
	return false;
}

bool qtk_jtext_ok(qtk_jtext *w)
{
	if (!w->failed && !w->p)
		jt_grow(w, 1);
	if (w->failed)
		return false;
	w->p[w->len] = 0;
	return true;
}

void qtk_jtext_free(qtk_jtext *w)
{
	qtk_table_free(w->p);
	memset(w, 0, sizeof *w);
}

/* ---- numbers ------------------------------------------------------------ */

size_t qtk_json_num(char out[32], double d)
{
	if (isnan(d) || isinf(d)) {
		memcpy(out, "null", 5);
		return 4;
	}
	if (d > -1e15 && d < 1e15 && d == (double)(int64_t)d) {
		/* "%1.15g" of an integer below 10^15: its digits, "-0" for negative zero */
		int64_t v = (int64_t)d;
		uint64_t u = v < 0 ? (uint64_t)(-v) : (uint64_t)v;
		char tmp[24];
		size_t k = 0, n = 0;
		do
			tmp[k++] = (char)('0' + u % 10);
		while (u /= 10);
		if (v < 0 || signbit(d))
			out[n++] = '-';
		while (k)
			out[n++] = tmp[--k];
		out[n] = 0;
		return n;
	}
	if (d > -1e8 && d < 1e8 && d * 1024 == (double)(int64_t)(d * 1024)) {
		/* a multiple of 2^-10 (bits per weight: 8.5, 6.5625): its exact decimal has at most
		 * ten decimals and 8 + 10 digits; when at most 15 are significant, "%1.15g" prints
		 * exactly them, which read back exactly (and |d| >= 2^-10 needs no exponent) */
		int64_t m = (int64_t)(d * 1024);
		uint64_t u = m < 0 ? (uint64_t)(-m) : (uint64_t)m;
		uint64_t ip = u >> 10, frac = (u & 1023) * 9765625; /* frac / 10^10 */
		char fd[10];
		int nf = 10;
		for (int k = 9; k >= 0; k--, frac /= 10)
			fd[k] = (char)('0' + frac % 10);
		while (nf && fd[nf - 1] == '0')
			nf--;
		int id = 0; /* significant digits of the integer part */
		for (uint64_t t = ip; t; t /= 10)
			id++;
		int lead = 0; /* zeros after the point before the first significant digit */
		while (!ip && lead < nf && fd[lead] == '0')
			lead++;
		if (id + nf - lead <= 15) {
			size_t n = 0;
			if (m < 0)
				out[n++] = '-';
			char tmp[24];
			int k = 0;
			do
				tmp[k++] = (char)('0' + ip % 10);
			while (ip /= 10);
			while (k)
				out[n++] = tmp[--k];
			out[n++] = '.';
			memcpy(out + n, fd, (size_t)nf);
			n += (size_t)nf;
			out[n] = 0;
			return n;
		}
	}
	double back = 0;
	int n = snprintf(out, 32, "%1.15g", d); /* in the C library's locale, as cJSON */
	if (sscanf(out, "%lg", &back) != 1 || !(fabs(back - d) <= fmax(fabs(back), fabs(d)) * DBL_EPSILON))
		n = snprintf(out, 32, "%1.17g", d);
	/* cJSON writes the locale's decimal point as '.' */
	const char pt = localeconv()->decimal_point[0];
	for (int i = 0; pt && pt != '.' && i < n && i < 32; i++)
		if (out[i] == pt)
			out[i] = '.';
	return n > 0 ? (size_t)n : 0;
}

/* ---- strings ------------------------------------------------------------ */

/* The first position from i on (n when none) of a quote, a backslash or a byte below 0x20. */
static size_t plain_run(const char *s, size_t i, size_t n)
{
#ifdef __SSE2__
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), lo = _mm_set1_epi8(0x1f);
	for (; i + 16 <= n; i += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)),
					   _mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo)); /* x <= 0x1f */
		int m = _mm_movemask_epi8(hit);
		if (m)
			return i + (size_t)__builtin_ctz((unsigned)m);
	}
#endif
	for (; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\' || c < 0x20)
			return i;
	}
	return n;
}


/* cJSON's escaping: the two-character escapes for " \ \b \f \n \r \t, \u00xx (lower case) for
 * the other bytes below 0x20, every other byte as it is. */
static void put_str(qtk_jtext *w, const char *s, size_t n)
{
	jt_c(w, '"');
	size_t run = 0;
	for (size_t i = plain_run(s, 0, n); i < n; i = plain_run(s, i + 1, n)) {
		unsigned char c = (unsigned char)s[i];
		jt_put(w, s + run, i - run);
		run = i + 1;
		char e[8] = {'\\', 0};
		switch (c) {
		case '"': e[1] = '"'; break;
		case '\\': e[1] = '\\'; break;
		case '\b': e[1] = 'b'; break;
		case '\f': e[1] = 'f'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\t': e[1] = 't'; break;
		default: snprintf(e + 1, sizeof e - 1, "u%04x", c);
		}
		jt_put(w, e, strlen(e));
	}
	jt_put(w, s + run, n - run);
	jt_c(w, '"');
}

/* ---- pieces, for callers that print a known shape without a tree ---------- */

void qtk_jtext_raw(qtk_jtext *w, const char *s, size_t n) { jt_put(w, s, n); }
void qtk_jtext_str(qtk_jtext *w, const char *s, size_t n) { put_str(w, s, n); }
void qtk_jtext_tabs(qtk_jtext *w, int n) { jt_tabs(w, n); }
void qtk_jtext_num(qtk_jtext *w, double d)
{
	char num[32];
	jt_put(w, num, qtk_json_num(num, d));
}

/* ---- a tree ------------------------------------------------------------- */

/* depth: cJSON's print depth when the item is reached (0 for a whole document) */
static int fmt_item(qtk_jtext *w, const cJSON *j, int depth)
{
	char num[32];
	switch (j->type & 0xff) {
	case cJSON_False: jt_put(w, "false", 5); return 0;
	case cJSON_True: jt_put(w, "true", 4); return 0;
	case cJSON_NULL: jt_put(w, "null", 4); return 0;
	case cJSON_Number: jt_put(w, num, qtk_json_num(num, j->valuedouble)); return 0;
	case cJSON_String:
		if (j->valuestring)
			put_str(w, j->valuestring, strlen(j->valuestring));
		else
			jt_put(w, "\"\"", 2);
		return 0;
	case cJSON_Raw:
		if (!j->valuestring)
			return -1;
		jt_put(w, j->valuestring, strlen(j->valuestring));
		return 0;
	case cJSON_Array:
		jt_c(w, '[');
		for (const cJSON *c = j->child; c; c = c->next) {
			if (fmt_item(w, c, depth + 1))
				return -1;
			if (c->next)
				jt_put(w, ", ", 2);
		}
		jt_c(w, ']');
		return 0;
	case cJSON_Object:
		jt_put(w, "{\n", 2);
		for (const cJSON *c = j->child; c; c = c->next) {
			jt_tabs(w, depth + 1);
			if (c->string) /* cJSON_Print writes a member without a name as "" */
				put_str(w, c->string, strlen(c->string));
			else
				jt_put(w, "\"\"", 2);
			jt_put(w, ":\t", 2);
			if (fmt_item(w, c, depth + 1))
				return -1;
			jt_put(w, c->next ? ",\n" : "\n", c->next ? 2 : 1);
		}
		jt_tabs(w, depth);
		jt_c(w, '}');
		return 0;
	default: return -1; /* cJSON_Invalid: cJSON_Print fails too */
	}
}

int qtk_json_fmt(qtk_jtext *w, const cJSON *j, int depth)
{
	if (!j || fmt_item(w, j, depth))
		return QTK_E_DATA;
	return qtk_jtext_ok(w) ? 0 : QTK_E_IO;
}

/* ---- a text, without a tree ---------------------------------------------- */

#define REFMT_DEPTH 200 /* deeper texts go to cJSON (its own limit is 1000) */

typedef struct refmt {
	const char *s;
	size_t n, i;
	qtk_jtext *w;
} refmt;

static void skip_ws(refmt *r)
{
	while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
		r->i++;
}

/* A string with no \u escape and no raw byte below 0x20 (cJSON decodes the others, and
 * printing gives back the same escapes but for "\/", which prints as "/"). */
static bool rf_str(refmt *r)
{
	if (r->i >= r->n || r->s[r->i] != '"')
		return false;
	qtk_jtext *w = r->w;
	size_t i = ++r->i, run = i;
	jt_c(w, '"');
	for (; i < r->n; i++) {
		i = plain_run(r->s, i, r->n);
		if (i >= r->n)
			break;
		unsigned char c = (unsigned char)r->s[i];
		if (c == '"') {
			jt_put(w, r->s + run, i - run);
			jt_c(w, '"');
			r->i = i + 1;
			return true;
		}
		if (c < 0x20)
			return false;
		if (c != '\\')
			continue;
		if (i + 1 >= r->n)
			return false;
		char e = r->s[i + 1];
		if (e == 'u' || !strchr("\"\\/bfnrt", e) || !e)
			return false;
		jt_put(w, r->s + run, i - run);
		if (e == '/')
			jt_c(w, '/');
		else
			jt_put(w, r->s + i, 2);
		run = ++i + 1;
	}
	return false;
}

/* An integer -?(0|[1-9][0-9]{0,14}) not followed by another of cJSON's number characters:
 * cJSON prints it as it is written. */
static bool rf_num(refmt *r)
{
	size_t i = r->i;
	if (i < r->n && r->s[i] == '-')
		i++;
	size_t d0 = i;
	while (i < r->n && r->s[i] >= '0' && r->s[i] <= '9')
		i++;
	size_t nd = i - d0;
	if (!nd || nd > 15 || (nd > 1 && r->s[d0] == '0'))
		return false;
	if (i < r->n && strchr("+-eE.", r->s[i]) && r->s[i])
		return false;
	jt_put(r->w, r->s + r->i, i - r->i);
	r->i = i;
	return true;
}

static bool rf_lit(refmt *r, const char *lit)
{
	size_t k = strlen(lit);
	if (r->n - r->i < k || memcmp(r->s + r->i, lit, k))
		return false;
	jt_put(r->w, lit, k);
	r->i += k;
	return true;
}

static bool rf_value(refmt *r, int depth)
{
	skip_ws(r);
	if (r->i >= r->n || depth > REFMT_DEPTH)
		return false;
	qtk_jtext *w = r->w;
	switch (r->s[r->i]) {
	case '"': return rf_str(r);
	case 't': return rf_lit(r, "true");
	case 'f': return rf_lit(r, "false");
	case 'n': return rf_lit(r, "null");
	case '[':
		r->i++;
		jt_c(w, '[');
		skip_ws(r);
		if (r->i < r->n && r->s[r->i] == ']') {
			r->i++;
			jt_c(w, ']');
			return true;
		}
		for (;;) {
			if (!rf_value(r, depth + 1))
				return false;
			skip_ws(r);
			if (r->i >= r->n)
				return false;
			char c = r->s[r->i++];
			if (c == ']') {
				jt_c(w, ']');
				return true;
			}
			if (c != ',')
				return false;
			jt_put(w, ", ", 2);
		}
	case '{':
		r->i++;
		jt_put(w, "{\n", 2);
		skip_ws(r);
		if (r->i < r->n && r->s[r->i] == '}') {
			r->i++;
			jt_tabs(w, depth);
			jt_c(w, '}');
			return true;
		}
		for (;;) {
			skip_ws(r);
			jt_tabs(w, depth + 1);
			if (!rf_str(r))
				return false;
			skip_ws(r);
			if (r->i >= r->n || r->s[r->i++] != ':')
				return false;
			jt_put(w, ":\t", 2);
			if (!rf_value(r, depth + 1))
				return false;
			skip_ws(r);
			if (r->i >= r->n)
				return false;
			char c = r->s[r->i++];
			if (c == '}') {
				jt_c(w, '\n');
				jt_tabs(w, depth);
				jt_c(w, '}');
				return true;
			}
			if (c != ',')
				return false;
			jt_put(w, ",\n", 2);
		}
	default: return rf_num(r);
	}
}

int qtk_json_refmt(qtk_jtext *w, const char *txt, size_t len, int depth)
{
	const size_t at = w->len;
	refmt r = {txt, len, 0, w};
	bool ok = rf_value(&r, depth);
	skip_ws(&r);
	if (ok && r.i == len)
		return qtk_jtext_ok(w) ? 0 : QTK_E_IO;
	if (w->failed)
		return QTK_E_IO;
	w->len = at; /* outside the subset: nothing written */
	return 1;
}

size_t qtk_json_list_place(const char *text, const char *key)
{
	/* the root's own member: one tab deep, after a line break (strings escape their tabs and
	 * line breaks, a nested member is deeper, a root key appears once) */
	char mark[160];
	int n = snprintf(mark, sizeof mark, "\n\t\"%s\":\t[]", key);
	const char *at = text && n > 0 && (size_t)n < sizeof mark ? strstr(text, mark) : NULL;
	return at ? (size_t)(at - text) + (size_t)n - 1 : SIZE_MAX;
}
