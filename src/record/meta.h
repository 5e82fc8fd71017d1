/* meta.h - digests of the metadata that changes what a model does ("qtk-meta-v1",
 * docs/provenance.md section 2.4): chat templates, tokenizer vocabulary and merges, special
 * token ids, rope and context keys. One digest per key, so a difference is named.
 *
 *   digest(key) = SHA-256("qtk-meta-v1" 0x00 || str(key) || value)
 *
 * value: a GGUF/QPK/safetensors metadata value as u8 type || u8 element type || u64 count ||
 * its elements (integers and floats as 8-byte little-endian: u64, i64 or the f64 bits; strings
 * as str(s)); a JSON value of a Hugging Face side file as its canonical text (sorted keys,
 * integers in decimal, other numbers as %.17g); a whole side file as its bytes.
 *
 * Keys are the container's: GGUF keys ("tokenizer.chat_template", "llama.rope.freq_base"),
 * safetensors __metadata__ keys, and for a Hugging Face directory "FILE" (a whole side file:
 * tokenizer.json, chat_template.jinja ...) or "FILE:KEY" (a top-level key of config.json,
 * tokenizer_config.json, generation_config.json).
 */
#ifndef QTK_META_H
#define QTK_META_H
#include "qtk_util.h"
#include <cJSON.h>

#define QTK_META_SCHEME "qtk-meta-v1"

typedef struct qtk_metad_item {
	char *key;
	uint8_t d[32];
	bool covered;   /* changes behaviour (templates, tokenizer, rope, context, special tokens) */
} qtk_metad_item;

typedef struct qtk_metad {
	size_t n;
	qtk_metad_item *it; /* sorted by key */
} qtk_metad;

/* The digests of m's metadata: every key (qtk.provenance and split.* left out), each marked
 * covered or not. hf: m is (or describes) a Hugging Face directory: its side files count and
 * its KVs do not, and only the covered side-file keys are listed (its writer regenerates
 * config.json's other fields). */
int qtk_meta_digests(const qtk_model *m, bool hf, qtk_metad *out, qtk_err *err);
void qtk_metad_free(qtk_metad *d);
/* Whether a key is one that changes behaviour (the scheme's list). */
bool qtk_meta_covered(const char *key);
/* The record's "metadata" object: {"scheme", "keys": {covered}, "other": {the rest}}. */
cJSON *qtk_meta_json(const qtk_metad *d);
/* Item by key, NULL when absent. */
const qtk_metad_item *qtk_metad_find(const qtk_metad *d, const char *key);
#endif
