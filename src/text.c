/* text.c - the one sanitiser for untrusted text on human-readable outputs (text.h). */
#include "text.h"
#include "internal.h"
#include <stdio.h>
#include <string.h>

int qtk_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
	const uint8_t *p = (const uint8_t *)s;
	if (!n)
		return 0;
	uint8_t c = p[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	int k;
	uint32_t v;
	if ((c & 0xE0) == 0xC0) { k = 1; v = c & 0x1Fu; }
	else if ((c & 0xF0) == 0xE0) { k = 2; v = c & 0x0Fu; }
	else if ((c & 0xF8) == 0xF0) { k = 3; v = c & 0x07u; }
	else return 0;
	if (n <= (size_t)k)
		return 0;
	for (int i = 1; i <= k; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3Fu);
	}
	static const uint32_t minv[4] = {0, 0x80, 0x800, 0x10000};
	if (v < minv[k] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return k + 1;
}

bool qtk_text_cp_narrow(uint32_t c)
{
	static const uint32_t ok[][2] = {
		{0x20, 0x7E},     {0xA0, 0x2FF},    {0x370, 0x482},   {0x48A, 0x52F},   {0x2010, 0x2027},
		{0x2030, 0x205E}, {0x20A0, 0x20BF}, {0x2190, 0x22FF}, {0x2500, 0x25FC},
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
		if (c >= ok[i][0] && c <= ok[i][1])
			return true;
	return false;
}

/* C1 controls and the bidi controls: never shown as themselves. */
static bool cp_control(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9F) || c == 0x61C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
	       (c >= 0x2066 && c <= 0x2069);
}

/* One unit of input at s (n > 0 bytes left): its shown form in esc (or NULL when the
 * input bytes are shown as they are), the number of input bytes in *in; returns the
 * number of output bytes. */
static size_t unit(const char *s, size_t n, unsigned flags, char esc[16], size_t *in)
{
	unsigned char c = (unsigned char)s[0];
	*in = 1;
	if (c < 0x80) {
		switch (c) {
		case '\t': memcpy(esc, "\\t", 3); return 2;
		case '\n': memcpy(esc, "\\n", 3); return 2;
		case '\r': memcpy(esc, "\\r", 3); return 2;
		default: break;
		}
		if (c < 0x20 || c == 0x7f || (c == '`' && (flags & QTK_TEXT_MD_CODE)))
			return (size_t)snprintf(esc, 16, "\\x%02x", c);
		if ((c == '|' && (flags & (QTK_TEXT_MD_CELL | QTK_TEXT_MD))) ||
		    ((flags & QTK_TEXT_MD) && strchr("\\`*_[]()<>#!~&", c))) {
			esc[0] = '\\';
			esc[1] = (char)c;
			esc[2] = 0;
			return 2;
		}
		esc[0] = 0;
		return 0;
	}
	uint32_t cp;
	int k = qtk_utf8_decode(s, n, &cp);
	if (!k)
		return (size_t)snprintf(esc, 16, "\\x%02x", c);
	*in = (size_t)k;
	if (cp_control(cp) || (flags & QTK_TEXT_ASCII) || ((flags & QTK_TEXT_NARROW) && !qtk_text_cp_narrow(cp)))
		return (size_t)snprintf(esc, 16, "\\u{%x}", (unsigned)cp);
	esc[0] = 0;
	return 0;
}

size_t qtk_text_len(const char *s, size_t n, unsigned flags)
{
	size_t out = 0;
	for (size_t i = 0; i < n;) {
		char esc[16];
		size_t in, k = unit(s + i, n - i, flags, esc, &in);
		out += k ? k : in;
		i += in;
	}
	return out;
}

bool qtk_text_clean(const char *s, size_t n, unsigned flags)
{
	for (size_t i = 0; i < n;) {
		char esc[16];
		size_t in;
		if (unit(s + i, n - i, flags, esc, &in))
			return false;
		i += in;
	}
	return true;
}

size_t qtk_text_escape(char *out, size_t cap, const char *s, size_t n, unsigned flags)
{
	if (!cap)
		return 0;
	size_t i = 0, k = 0;
	while (i < n) {
		char esc[16];
		size_t in, e = unit(s + i, n - i, flags, esc, &in);
		const char *src = e ? esc : s + i;
		size_t len = e ? e : in;
		if (len >= cap - k)
			break;
		memcpy(out + k, src, len);
		k += len;
		i += in;
	}
	out[k] = 0;
	return i;
}

const char *qtk_text_safe(const char *s, unsigned flags, char *buf, size_t cap)
{
	size_t n = strlen(s);
	if (qtk_text_clean(s, n, flags))
		return s;
	if (!cap)
		return "";
	qtk_text_escape(buf, cap, s, n, flags);
	return buf;
}

char *qtk_text_dup(const char *s, size_t n, unsigned flags)
{
	size_t len = qtk_text_len(s, n, flags);
	if (len == SIZE_MAX)
		return NULL;
	char *p = qtk_malloc(len + 1);
	if (p)
		qtk_text_escape(p, len + 1, s, n, flags);
	return p;
}
