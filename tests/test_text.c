/* test_text.c - the one sanitiser for untrusted text (src/text.c) and its use in
 * qtk_err_format: C0, DEL, C1 (raw and UTF-8), bidi controls and invalid UTF-8 become
 * visible escapes; benign text comes out byte for byte. */
#include "internal.h"
#include "t.h"
#include "text.h"

static const char *esc(const char *s, unsigned flags)
{
	static char buf[1024];
	qtk_text_escape(buf, sizeof buf, s, strlen(s), flags);
	return buf;
}

/* No byte of s is a C0 control, DEL or a raw C1 byte, and it holds no UTF-8 C1 or bidi control. */
static bool inert(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; p[i]; i++) {
		if (p[i] < 0x20 || p[i] == 0x7f)
			return false;
		if (p[i] == 0xC2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9F)
			return false;
		if (p[i] == 0xE2 && p[i + 1] == 0x80 && (p[i + 2] == 0x8E || p[i + 2] == 0x8F || (p[i + 2] >= 0xAA && p[i + 2] <= 0xAE)))
			return false;
		if (p[i] == 0xE2 && p[i + 1] == 0x81 && p[i + 2] >= 0xA6 && p[i + 2] <= 0xA9)
			return false;
	}
	return qtk_utf8_valid(s, strlen(s));
}

static void test_benign(void)
{
	static const char *const ok[] = {
		"", "blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", "path/with spaces/and\\backslash",
		"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", "{% for m in messages %}{{ m }}{% endfor %}",
		"a|b `c` *d* _e_ [f](g) <h>",
	};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		char buf[256];
		CHECK(qtk_text_clean(ok[i], strlen(ok[i]), 0), "clean: %s", ok[i]);
		CHECK(qtk_text_safe(ok[i], 0, buf, sizeof buf) == ok[i], "returned as is: %s", ok[i]);
		CHECK(!strcmp(esc(ok[i], 0), ok[i]), "unchanged: %s", ok[i]);
		CHECK(qtk_text_len(ok[i], strlen(ok[i]), 0) == strlen(ok[i]), "length: %s", ok[i]);
	}
}

static void test_controls(void)
{
	/* C0, with tab, newline and carriage return by name */
	CHECK(!strcmp(esc("\x1b[31mRED", 0), "\\x1b[31mRED"), "ESC: %s", esc("\x1b[31mRED", 0));
	CHECK(!strcmp(esc("x\r\x1b[2Kspoof: ok", 0), "x\\r\\x1b[2Kspoof: ok"), "CR: %s", esc("x\r\x1b[2Kspoof: ok", 0));
	CHECK(!strcmp(esc("a\tb\nc\x01\x07", 0), "a\\tb\\nc\\x01\\x07"), "C0: %s", esc("a\tb\nc\x01\x07", 0));
	CHECK(!strcmp(esc("\x1b]0;owned\x07", 0), "\\x1b]0;owned\\x07"), "OSC: %s", esc("\x1b]0;owned\x07", 0));
	/* DEL */
	CHECK(!strcmp(esc("a\x7f", 0), "a\\x7f"), "DEL: %s", esc("a\x7f", 0));
	/* C1 as raw bytes (8-bit CSI) and as UTF-8 */
	CHECK(!strcmp(esc("a\x9b" "31m", 0), "a\\x9b31m"), "raw C1: %s", esc("a\x9b" "31m", 0));
	CHECK(!strcmp(esc("a\x85z\x80", 0), "a\\x85z\\x80"), "raw C1: %s", esc("a\x85z\x80", 0));
	CHECK(!strcmp(esc("a\xc2\x9b" "b\xc2\x80\xc2\x9f", 0), "a\\u{9b}b\\u{80}\\u{9f}"), "UTF-8 C1: %s",
	      esc("a\xc2\x9b" "b\xc2\x80\xc2\x9f", 0));
	CHECK(!strcmp(esc("\xc2\xa0", 0), "\xc2\xa0"), "U+00A0 is not C1");
	/* bidi controls */
	CHECK(!strcmp(esc("a\xe2\x80\xae" "b", 0), "a\\u{202e}b"), "RLO: %s", esc("a\xe2\x80\xae" "b", 0));
	CHECK(!strcmp(esc("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad", 0), "\\u{202a}\\u{202b}\\u{202c}\\u{202d}"),
	      "LRE..LRO: %s", esc("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad", 0));
	CHECK(!strcmp(esc("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", 0), "\\u{2066}\\u{2067}\\u{2068}\\u{2069}"),
	      "isolates: %s", esc("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", 0));
	CHECK(!strcmp(esc("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", 0), "\\u{200e}\\u{200f}\\u{61c}"), "marks: %s",
	      esc("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", 0));
	CHECK(!strcmp(esc("\xe2\x80\x90", 0), "\xe2\x80\x90"), "U+2010 shown");
	/* invalid UTF-8: overlong, surrogate, cut, stray continuation, beyond U+10FFFF */
	CHECK(!strcmp(esc("\xc0\xbc", 0), "\\xc0\\xbc"), "overlong: %s", esc("\xc0\xbc", 0));
	CHECK(!strcmp(esc("\xed\xa0\x80", 0), "\\xed\\xa0\\x80"), "surrogate: %s", esc("\xed\xa0\x80", 0));
	CHECK(!strcmp(esc("a\xe4\xb8", 0), "a\\xe4\\xb8"), "cut: %s", esc("a\xe4\xb8", 0));
	CHECK(!strcmp(esc("\xbf", 0), "\\xbf"), "continuation: %s", esc("\xbf", 0));
	CHECK(!strcmp(esc("\xf4\x90\x80\x80", 0), "\\xf4\\x90\\x80\\x80"), "> U+10FFFF: %s", esc("\xf4\x90\x80\x80", 0));
	CHECK(!strcmp(esc("\xff\xfe", 0), "\\xff\\xfe"), "0xff: %s", esc("\xff\xfe", 0));
	/* a NUL inside counted text */
	char out[32];
	qtk_text_escape(out, sizeof out, "a\0b", 3, 0);
	CHECK(!strcmp(out, "a\\x00b"), "NUL: %s", out);
	/* every byte value, alone and after a lead byte, comes out inert */
	for (int c = 1; c < 256; c++) {
		char s[3] = {(char)c, 0, 0}, t[4] = {(char)0xC2, (char)c, 0, 0};
		char b1[64], b2[64];
		CHECK(inert(qtk_text_safe(s, 0, b1, sizeof b1)), "byte 0x%02x: %s", c, b1);
		CHECK(inert(qtk_text_safe(t, 0, b2, sizeof b2)), "0xc2 0x%02x: %s", c, b2);
	}
}

static void test_flags(void)
{
	CHECK(!strcmp(esc("caf\xc3\xa9", QTK_TEXT_ASCII), "caf\\u{e9}"), "ASCII: %s", esc("caf\xc3\xa9", QTK_TEXT_ASCII));
	CHECK(!strcmp(esc("a\xe4\xb8\xad" "d\xcc\x81" "e\xc3\xa9", QTK_TEXT_NARROW), "a\\u{4e2d}d\\u{301}e\xc3\xa9"),
	      "NARROW: %s", esc("a\xe4\xb8\xad" "d\xcc\x81" "e\xc3\xa9", QTK_TEXT_NARROW));
	/* markdown: a name cannot end a code span, split a table cell, or make a link or HTML */
	CHECK(!strcmp(esc("a`b|c_d", QTK_TEXT_MD_CODE | QTK_TEXT_MD_CELL), "a\\x60b\\|c_d"), "code cell: %s",
	      esc("a`b|c_d", QTK_TEXT_MD_CODE | QTK_TEXT_MD_CELL));
	CHECK(!strcmp(esc("blk.0.attn_q.weight", QTK_TEXT_MD_CODE | QTK_TEXT_MD_CELL), "blk.0.attn_q.weight"),
	      "benign name in a code cell");
	CHECK(!strcmp(esc("[x](http://e) <img src=x> *b* _i_ \\ # ! ~ &amp;", QTK_TEXT_MD),
		      "\\[x\\]\\(http://e\\) \\<img src=x\\> \\*b\\* \\_i\\_ \\\\ \\# \\! \\~ \\&amp;"),
	      "markdown text: %s", esc("[x](http://e) <img src=x> *b* _i_ \\ # ! ~ &amp;", QTK_TEXT_MD));
	CHECK(!strcmp(esc("a|b", QTK_TEXT_MD), "a\\|b"), "markdown pipe");
	CHECK(!strcmp(esc("\x1b`", QTK_TEXT_MD_CODE), "\\x1b\\x60"), "controls too");
}

static void test_cut(void)
{
	/* a small buffer: whole escapes and whole characters only */
	char out[8];
	size_t used = qtk_text_escape(out, sizeof out, "ab\x1b\x1b", 4, 0);
	CHECK(!strcmp(out, "ab\\x1b") && used == 3, "cut at an escape: %s (%zu)", out, used);
	used = qtk_text_escape(out, 5, "abc\xe4\xb8\xad", 6, 0);
	CHECK(!strcmp(out, "abc") && used == 3, "cut at a character: %s (%zu)", out, used);
	CHECK(qtk_text_escape(out, 0, "a", 1, 0) == 0, "no room");
	char big[4 * 16 + 1];
	const char *worst = "\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b\x1b";
	CHECK(qtk_text_escape(big, sizeof big, worst, 16, 0) == 16, "4 * n + 1 always fits");
	CHECK(qtk_text_len(worst, 16, 0) == 64, "length of escapes");
	char *d = qtk_text_dup("x\x1b", 2, 0);
	CHECK(d && !strcmp(d, "x\\x1b"), "dup: %s", d ? d : "(null)");
	qtk_free(d);
}

static void test_utf8(void)
{
	uint32_t cp = 0;
	CHECK(qtk_utf8_decode("\xe2\x80\xae", 3, &cp) == 3 && cp == 0x202E, "decode U+202E");
	CHECK(qtk_utf8_decode("\xf0\x9f\x98\x80", 4, &cp) == 4 && cp == 0x1F600, "decode U+1F600");
	CHECK(qtk_utf8_decode("\xf0\x9f\x98", 3, &cp) == 0, "cut sequence");
	CHECK(qtk_utf8_decode("\xe0\x80\x80", 3, &cp) == 0, "overlong");
	CHECK(qtk_utf8_valid("caf\xc3\xa9", 5) && !qtk_utf8_valid("\xc3", 1), "qtk_utf8_valid");
	CHECK(qtk_text_cp_narrow('a') && !qtk_text_cp_narrow(0x4E2D) && !qtk_text_cp_narrow(0x202E), "narrow list");
}

/* qtk_err_format: a subject, file or message with controls is shown escaped; benign as is. */
static void test_err_format(void)
{
	qtk_err e;
	char buf[2048];
	qtk_err_clear(&e);
	qtk_err_set(&e, QTK_E_DATA, "m.safetensors", 9, "tensor '\x1b[31mRED'", "data_offsets run past the end");
	qtk_err_format(&e, "qinspect", buf, sizeof buf);
	CHECK(!strcmp(buf, "qinspect: m.safetensors:0x9: error: tensor '\\x1b[31mRED': data_offsets run past the end"),
	      "subject escaped: %s", buf);
	qtk_err_clear(&e);
	qtk_err_set(&e, QTK_E_DATA, "x\r\x1b[2Kspoof.gguf", -1, NULL, "unsupported architecture a\xe2\x80\xae" "b\x9b");
	qtk_err_format(&e, "q", buf, sizeof buf);
	CHECK(inert(buf) && strstr(buf, "x\\r\\x1b[2Kspoof.gguf: ") && strstr(buf, "a\\u{202e}b\\x9b"),
	      "file and message escaped: %s", buf);
	qtk_err_clear(&e);
	qtk_err_set(&e, QTK_E_IO, "dir/caf\xc3\xa9.gguf", 16, "key", "cannot read: %s", "No such file");
	qtk_err_format(&e, "q", buf, sizeof buf);
	CHECK(!strcmp(buf, "q: dir/caf\xc3\xa9.gguf:0x10: error: key: cannot read: No such file"), "benign: %s", buf);
	/* a long benign subject is cut exactly where it was cut before (299 bytes with ": ") */
	char subj[256];
	memset(subj, 'k', sizeof subj - 1);
	subj[255] = 0;
	qtk_err_clear(&e);
	qtk_err_set(&e, QTK_E_DATA, NULL, -1, subj, "m");
	qtk_err_format(&e, "q", buf, sizeof buf);
	CHECK(strlen(buf) == strlen("q: error: ") + 255 + 2 + 1, "long subject: %zu", strlen(buf));
}

int main(void)
{
	test_benign();
	test_controls();
	test_flags();
	test_cut();
	test_utf8();
	test_err_format();
	return T_DONE();
}
