/* text.h - showing untrusted text to a person: the one sanitiser.
 *
 * Tensor names, metadata keys and values, file names from a model or an
 * archive are attacker-chosen bytes. Every human-readable output (stderr,
 * text and markdown reports, the browser) shows them through this module so
 * that they cannot move the cursor, clear or retitle the terminal, reorder the
 * line (bidi controls) or break a markdown table. JSON output escapes through
 * the JSON writer instead (json.h).
 *
 * Escapes are visible and unambiguous: a raw byte as \xHH (C0 controls, DEL,
 * bytes that are not UTF-8, raw C1 bytes 0x80-0x9f among them), a code point
 * as \u{H..} (C1 controls U+0080-U+009F, bidi controls U+061C, U+200E, U+200F,
 * U+202A-U+202E, U+2066-U+2069), and tab, newline and carriage return as \t,
 * \n and \r. Other text, including a backslash, is shown as is, so text that
 * needs no escape comes out byte for byte.
 */
#ifndef QTK_TEXT_H
#define QTK_TEXT_H
#include "qtk.h"

/* Also escape every non-ASCII code point (a terminal that is not UTF-8). */
#define QTK_TEXT_ASCII 1u
/* Also escape code points not known to take exactly one terminal cell (wide,
 * combining, zero-width): for grids that count cells. */
#define QTK_TEXT_NARROW 2u
/* Markdown text: a backslash before the punctuation markdown interprets
 * (\ ` * _ [ ] ( ) < > | # ! ~ &), so text cannot make links, HTML or emphasis. */
#define QTK_TEXT_MD 4u
/* Inside a markdown code span, where a backslash escapes nothing: '`' as \x60. */
#define QTK_TEXT_MD_CODE 8u
/* Inside a markdown table cell: '|' as \| (tables split cells before code spans). */
#define QTK_TEXT_MD_CELL 16u

/* Bytes of the escaped form of s[0..n) (without a terminating NUL). */
size_t qtk_text_len(const char *s, size_t n, unsigned flags);
/* True when s[0..n) is shown unchanged. */
bool qtk_text_clean(const char *s, size_t n, unsigned flags);
/* The escaped form of s[0..n) into out (cap bytes, NUL-terminated when cap > 0): as many
 * whole characters and escapes as fit. Returns the number of input bytes consumed (n when
 * everything fit). */
size_t qtk_text_escape(char *out, size_t cap, const char *s, size_t n, unsigned flags);
/* The NUL-terminated s itself when it is shown unchanged, else its escaped form in buf
 * (cap bytes; cut at a character when too small: 4 * strlen(s) + 1 always fits). */
const char *qtk_text_safe(const char *s, unsigned flags, char *buf, size_t cap);
/* The escaped form of s[0..n) as a new string (qtk_free it); NULL when out of memory. */
char *qtk_text_dup(const char *s, size_t n, unsigned flags);

/* Length (1-4) of the well-formed UTF-8 sequence at s (n bytes available), its code point
 * in *cp; 0 when the bytes there are not UTF-8 (overlong, surrogate, cut, > U+10FFFF). */
int qtk_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* True for code points a terminal draws in exactly one cell and that cannot reorder or
 * hide text (a conservative list: Latin, Greek, Cyrillic, punctuation, arrows, boxes). */
bool qtk_text_cp_narrow(uint32_t cp);

#endif
