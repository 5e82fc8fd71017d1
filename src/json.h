/* json.h - strict JSON on top of cJSON, and the JSON string writer.
 *
 * cJSON is lenient where a model-file parser must not be: it keeps the last of
 * duplicate keys (so two readers can see two different files: TOB-SFTN-7), it
 * reads every number as a double, it truncates strings at an escaped NUL and it
 * accepts "+1", "1." and trailing garbage. qtk_json_parse scans the raw text
 * first and rejects all of these, then lets cJSON build the tree.
 */
#ifndef QTK_JSON_H
#define QTK_JSON_H

#include "qtk_util.h"
#include <cJSON.h>

/* Numbers must be plain non-negative integers <= 2^53 (safetensors headers). */
#define QTK_JSON_INTS 1u
/* The text must start with '{' (no leading whitespace). */
#define QTK_JSON_BRACE_FIRST 2u
/* The tree's nodes and strings come from one mapping (no per-allocation overhead: about a
 * third less memory for large trees); free the tree with qtk_json_tree_free (or
 * qtk_json_doc_free), which releases the mapping. cJSON's own calls may edit and delete the
 * tree meanwhile (its frees of the mapping's memory do nothing). */
#define QTK_JSON_ARENA 8u

typedef struct qtk_json_doc {
	cJSON *root;
	uint64_t *key_off; /* text offset of each top-level object key, in order */
	size_t nkeys;
} qtk_json_doc;

/* Parse `len` bytes of `text` strictly: valid UTF-8, one JSON value followed
 * only by whitespace, no duplicate keys at any depth, no \u0000, no raw control
 * characters in strings, strict number grammar (see QTK_JSON_INTS), nesting at
 * most 256 deep. On error sets err (QTK_E_DATA, or QTK_E_IO for out of memory)
 * naming `file` and the offset `base` + position, and returns it. On success
 * doc owns the tree; free with qtk_json_doc_free. */
int qtk_json_parse(const char *text, size_t len, unsigned flags, const char *file,
		   int64_t base, qtk_err *err, qtk_json_doc *doc);
void qtk_json_doc_free(qtk_json_doc *doc);
/* cJSON_Delete, and for a tree parsed with QTK_JSON_ARENA the release of its mapping. */
void qtk_json_tree_free(cJSON *root);
/* Slurp a JSON file (<= cap bytes) and parse it strictly. When raw is not
 * NULL, the file's bytes are kept there (caller frees with qtk_free). */
int qtk_json_load(const char *path, uint64_t cap, unsigned flags, qtk_err *err,
		  qtk_json_doc *doc, uint8_t **raw, size_t *rawlen);
/* The structure of JSON text without a tree, for callers that read a large value a piece at a
 * time: the index past whitespace from i; the end of the string at i (past its closing quote);
 * the end of the value at i (strings skipped, brackets and braces counted, a scalar up to the
 * next delimiter). SIZE_MAX when the text ends first. Structure only: a strict parse of each
 * piece judges it. */
size_t qtk_json_skip_ws(const char *s, size_t n, size_t i);
size_t qtk_json_skip_str(const char *s, size_t n, size_t i);
size_t qtk_json_skip_value(const char *s, size_t n, size_t i);
/* The member of an object whose key starts at i (its opening quote): *kb the end of the key,
 * [*va, *vb) its value. false when there is no key, ':' and non-empty value there (structure
 * only); *bad is then the offset of what is wrong. */
bool qtk_json_member_at(const char *s, size_t n, size_t i, size_t *kb, size_t *va, size_t *vb, size_t *bad);
/* The value [*va, *vb) of the first member named key (written without escapes) of the object
 * whose '{' is at obj (leading whitespace skipped): structure only, for finding one large value
 * to read apart. false when there is no such member or the object cannot be walked (a strict
 * parse then judges the text). */
bool qtk_json_member_span(const char *s, size_t n, size_t obj, const char *key, size_t *va, size_t *vb);
/* The object that is the whole text, a member at a time: the same rules as qtk_json_parse
 * (flags as there; QTK_JSON_ARENA is ignored), each key and value parsed strictly on its own,
 * fn given the decoded key, the value's tree (freed when fn returns) and the file offset of the
 * key (base added). Only one member's tree is held. A key repeated at the top level fails once
 * every member was seen ("duplicate key", at the repeat); fn's non-zero return stops the walk
 * and is returned. */
int qtk_json_each_member(const char *text, size_t len, unsigned flags, const char *file, int64_t base,
			 qtk_err *err, int (*fn)(void *ctx, const char *key, const cJSON *val, int64_t key_off),
			 void *ctx);
/* Byte offset of the i-th top-level key (base added), or base when unknown. */
int64_t qtk_json_key_off(const qtk_json_doc *doc, size_t i, int64_t base);
/* An exact non-negative integer value (<= 2^53); false otherwise. */
bool qtk_json_u64(const cJSON *item, uint64_t *out);
/* An exact integer value in [-2^53, 2^53]; false otherwise. */
bool qtk_json_i64(const cJSON *item, int64_t *out);
/* Make cJSON allocate through qtk_malloc (idempotent, thread-safe). */
void qtk_json_init(void);
/* cJSON's allocations through alloc/release until qtk_json_hooks_pop puts qtk_malloc's back.
 * cJSON's hooks are global: only while no other thread uses cJSON. */
void qtk_json_hooks_push(void *(*alloc)(size_t), void (*release)(void *));
void qtk_json_hooks_pop(void);

/* JSON string literal of s (n bytes) appended to b; QTK_E_DATA when s is not
 * valid UTF-8 or holds a NUL, QTK_E_IO when out of memory. */
int qtk_json_put_str(qtk_buf *b, const char *s, size_t n);
/* The same with a style: */
#define QTK_JSON_ESC_SHORT 1u /* \b \f \n \r \t by name, not as \u00XX */
#define QTK_JSON_ESC_DEL 2u   /* DEL as \u007f too */
#define QTK_JSON_RAW 4u       /* no UTF-8 or NUL check: other bytes are written as they are */
int qtk_json_put_str_as(qtk_buf *b, const char *s, size_t n, unsigned style);

/* ---- cJSON_Print's layout (json_print.c) ---- */

/* Text in a growing block (qtk_table_realloc: huge pages once it is large); failed is sticky. */
typedef struct qtk_jtext {
	char *p;
	size_t len, cap;
	int failed;
} qtk_jtext;
/* Room for n more bytes (one allocation instead of doublings); false when it failed. */
bool qtk_jtext_reserve(qtk_jtext *w, size_t n);
/* NUL-terminate; false when an allocation failed. */
bool qtk_jtext_ok(qtk_jtext *w);
void qtk_jtext_free(qtk_jtext *w);
/* A number as cJSON prints it ("%1.15g", "%1.17g" when that does not read back within a
 * relative DBL_EPSILON, "null" for NaN and infinities); returns its length. */
size_t qtk_json_num(char out[32], double d);
/* Pieces of that layout: text as it is, a string with cJSON's escapes (any bytes: the caller
 * has checked them), tabs, a number as qtk_json_num writes it. */
void qtk_jtext_raw(qtk_jtext *w, const char *s, size_t n);
void qtk_jtext_str(qtk_jtext *w, const char *s, size_t n);
void qtk_jtext_tabs(qtk_jtext *w, int n);
void qtk_jtext_num(qtk_jtext *w, double d);
/* Append j as cJSON_Print would print it at nesting depth `depth` (0: a whole document; a
 * value inside the root object is at depth 1). QTK_E_DATA where cJSON_Print fails (an
 * invalid item, a raw item without text), QTK_E_IO out of memory. */
int qtk_json_fmt(qtk_jtext *w, const cJSON *j, int depth);
/* In text, cJSON_Print's layout of a document whose root object has the member key holding an
 * empty list: the offset just past that list's '[', where its entries go when they are written
 * one at a time (qtk_json_fmt at depth 2, ", " between them); SIZE_MAX when there is none. */
size_t qtk_json_list_place(const char *text, const char *key);
/* Append what cJSON_ParseWithLength(txt, len) printed at `depth` would give, without a tree,
 * when the text is in the subset handled here: whitespace of space, tab, CR and LF; strings
 * without \u escapes or raw control bytes; integers of at most 15 digits; nesting at most
 * 200. Returns 1, having appended nothing, for any other text (parse it with cJSON instead),
 * 0 when done, QTK_E_IO out of memory. */
int qtk_json_refmt(qtk_jtext *w, const char *txt, size_t len, int depth);

#endif
