/* spm.h - SentencePiece ModelProto (tokenizer.model) reader and writer.
 *
 * The reader treats its input as hostile: bounded varints, every length
 * checked against the remaining bytes, capped counts; malformed input gives
 * QTK_E_DATA with the byte offset. Fields other than the pieces are kept as
 * raw encoded bytes so that qtk_spm_parse(qtk_spm_write(x)) == x.
 */
#ifndef QTK_SPM_H
#define QTK_SPM_H

#include "qtk_util.h"

/* SentencePiece.Type */
enum { SPM_NORMAL = 1, SPM_UNKNOWN = 2, SPM_CONTROL = 3, SPM_USER_DEFINED = 4,
       SPM_UNUSED = 5, SPM_BYTE = 6 };

#define SPM_CAP_PIECES (1u << 24)   /* pieces in one model */
#define SPM_CAP_PIECE  (1u << 16)   /* bytes in one piece */

typedef struct qtk_spm_piece {
	char *piece;      /* NUL-terminated copy */
	uint32_t len;
	float score;      /* 0 when absent */
	int type;         /* SPM_*; SPM_NORMAL when absent */
	bool has_score, has_type;
	uint8_t *rest;    /* unknown fields of this piece, raw */
	size_t rest_len;
} qtk_spm_piece;

typedef struct qtk_spm_model {
	size_t n;
	qtk_spm_piece *pieces;
	uint8_t *rest;     /* every other top-level field (trainer_spec, normalizer_spec, ...), raw */
	size_t rest_len;
	/* decoded from trainer_spec / normalizer_spec (informational) */
	int model_type;    /* 1 UNIGRAM 2 BPE 3 WORD 4 CHAR; 1 when absent */
	bool byte_fallback;
	bool add_dummy_prefix; /* default true */
	bool remove_extra_whitespaces; /* default true */
} qtk_spm_model;

/* Parse a ModelProto. `file` names the input in errors. */
int qtk_spm_parse(const uint8_t *buf, size_t len, const char *file, qtk_spm_model *out, qtk_err *err);
/* Serialize (pieces first, then the kept fields). */
int qtk_spm_write(const qtk_spm_model *m, qtk_buf *out);
void qtk_spm_free(qtk_spm_model *m);
/* Structural equality (pieces with presence flags, kept fields byte for byte). */
bool qtk_spm_equal(const qtk_spm_model *a, const qtk_spm_model *b);

/* Options for building a model from a GGUF vocabulary. */
typedef struct qtk_spm_build_opts {
	int model_type;          /* 2 (BPE) for llama.cpp "llama" vocabularies */
	int64_t unk_id, bos_id, eos_id, pad_id; /* -1: none */
	bool add_dummy_prefix;
	bool remove_extra_whitespaces;
	const uint8_t *charsmap; /* precompiled_charsmap, may be NULL */
	size_t charsmap_len;
} qtk_spm_build_opts;

/* Build a ModelProto with a synthesized trainer_spec and normalizer_spec.
 * pieces[i] are copied; types are SPM_* values. */
int qtk_spm_build(qtk_spm_model *out, size_t n, const qtk_str *tokens, const float *scores,
	      const int32_t *types, const qtk_spm_build_opts *o, qtk_err *err);

#endif
