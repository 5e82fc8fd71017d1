/* util.c - small helpers: capped growable buffers, UTF-8, parsing. */
#include "internal.h"
#include "text.h"
#include <stdarg.h>
#include <string.h>

#define BUF_CAP ((size_t)1 << 34)

static int buf_reserve(qtk_buf *b, size_t more)
{
	if (b->failed)
		return QTK_E_IO;
	if (more > BUF_CAP - b->len) {
		b->failed = 1;
		return QTK_E_IO;
	}
	size_t need = b->len + more + 1;
	if (need <= b->cap)
		return 0;
	size_t nc = b->cap ? b->cap : 256;
	while (nc < need)
		nc *= 2;
	uint8_t *p = qtk_realloc(b->p, nc);
	if (!p) {
		b->failed = 1;
		return QTK_E_IO;
	}
	b->p = p;
	b->cap = nc;
	return 0;
}

int qtk_buf_put(qtk_buf *b, const void *d, size_t n)
{
	if (buf_reserve(b, n))
		return QTK_E_IO;
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

int qtk_buf_putc(qtk_buf *b, char c) { return qtk_buf_put(b, &c, 1); }
int qtk_buf_puts(qtk_buf *b, const char *s) { return qtk_buf_put(b, s, strlen(s)); }

int qtk_buf_printf(qtk_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n))
		return QTK_E_IO;
	va_start(ap, fmt);
	vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void qtk_buf_free(qtk_buf *b)
{
	qtk_free(b->p);
	memset(b, 0, sizeof *b);
}

bool qtk_utf8_valid(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		uint32_t cp;
		int k = qtk_utf8_decode(s + i, n - i, &cp);
		if (!k)
			return false;
		i += (size_t)k;
	}
	return true;
}

int qtk_strcasecmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		int x = (unsigned char)*a, y = (unsigned char)*b;
		if (x >= 'A' && x <= 'Z') x += 32;
		if (y >= 'A' && y <= 'Z') y += 32;
		if (x != y || !x)
			return x - y;
	}
}

bool qtk_parse_u64(const char *s, uint64_t *out)
{
	if (!*s)
		return false;
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (!qtk_mul_u64(v, 10, &v) || !qtk_add_u64(v, (uint64_t)(*s - '0'), &v))
			return false;
	}
	*out = v;
	return true;
}

/* ---- string set (duplicate detection) ---------------------------------- */

static uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

int qtk_strset_add(qtk_strset *set, const char *s)
{
	if ((set->n + 1) * 2 > set->cap) {
		size_t nc = set->cap ? set->cap * 2 : 64;
		const char **ns = qtk_calloc(nc, sizeof *ns);
		if (!ns)
			return QTK_E_IO;
		for (size_t i = 0; i < set->cap; i++) {
			if (!set->slots[i])
				continue;
			size_t j = (size_t)str_hash(set->slots[i], strlen(set->slots[i])) & (nc - 1);
			while (ns[j])
				j = (j + 1) & (nc - 1);
			ns[j] = set->slots[i];
		}
		qtk_free(set->slots);
		set->slots = ns;
		set->cap = nc;
	}
	size_t j = (size_t)str_hash(s, strlen(s)) & (set->cap - 1);
	while (set->slots[j]) {
		if (strcmp(set->slots[j], s) == 0)
			return 0;
		j = (j + 1) & (set->cap - 1);
	}
	set->slots[j] = s;
	set->n++;
	return 1;
}

void qtk_strset_free(qtk_strset *set)
{
	qtk_free(set->slots);
	memset(set, 0, sizeof *set);
}

void qtk_shape_text(char *b, size_t n, int nd, const uint64_t *shape)
{
	if (!n)
		return;
	size_t k = (size_t)snprintf(b, n, "[");
	for (int d = 0; d < nd && k < n; d++)
		k += (size_t)snprintf(b + k, n - k, "%s%llu", d ? ", " : "", (unsigned long long)shape[d]);
	if (k < n)
		snprintf(b + k, n - k, "]");
}

int qtk_why(char *why, size_t wn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, wn, fmt, ap);
	va_end(ap);
	return QTK_E_DATA;
}

bool qtk_str_ends(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && memcmp(s + a - b, suf, b) == 0;
}
