/* st_json.h - the pieces the safetensors, Hugging Face directory and archive
 * plugins share (the strict JSON parser itself is src/json.h). */
#ifndef QTK_ST_JSON_H
#define QTK_ST_JSON_H

#include "internal.h"
#include "json.h"
#include "scheme/fold.h"

/* ---- safetensors, shared with the HF directory plugin ------------------ */

/* Load one .safetensors file or a model.safetensors.index.json (with its
 * shards) into m: files, plain tensors in header order (one part each) and
 * __metadata__ as string kvs. */
int qtk_st_load(qtk_model *m, const char *path);
int qtk_st_load_index(qtk_model *m, const char *index_path);
bool qtk_st_is_index_name(const char *path);

/* ---- packed AWQ / GPTQ parts: the packed-scheme layer (scheme/fold.h) ---- */

/* ---- writing ---------------------------------------------------------- */

/* Name of part p of tensor t as a safetensors entry: the tensor's name for a
 * plain tensor, "<prefix>.<role>" for AWQ/GPTQ (prefix = name without
 * ".weight"). Returns a new string or NULL when out of memory. */
char *qtk_st_part_name(const qtk_tensor *t, int p);

/* Can safetensors (a file or an HF directory) store t: every part a dtype with a
 * safetensors name, nbytes matching its shape, rank <= 8; with_name: entry names
 * non-empty and not "__metadata__". The capability of both descriptors. */
int qtk_st_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err);

/* Check that every part of desc can be stored in safetensors (a dtype with a
 * safetensors name, nbytes matching its shape, rank <= 8) and that the entry
 * names are unique, non-empty and not "__metadata__". */
int qtk_st_check_desc(const qtk_model *desc, const char *path, qtk_err *err);

/* One safetensors output file holding desc tensors [t0, t1). */
typedef struct qtk_st_out {
	qtk_ofile of;
	bool opened;
	char *path;
	size_t t0, t1;
	uint64_t data_bytes;
	uint64_t head_len;   /* JSON header bytes (after the 8-byte length) */
	bool embed_qcfg; /* write QTK_ST_QCFG_KEY (bare files; HF dirs have config.json) */
	qtk_outlist *outs; /* set before qtk_st_out_open: the file's entry in the written list
			    * (NULL: none, and no SHA-256 is taken) */
	bool defer_hash;   /* set before qtk_st_out_open: the header will be patched */
	/* the "qtk.provenance" value in the header: file offset of its first escaped byte (0:
	 * none), escaped and raw lengths */
	uint64_t rec_off, rec_elen, rec_len;
	uint64_t rec_at; /* placing the final record a piece at a time: the next escaped byte's offset */
	/* set before qtk_st_out_open: the record is generated where it goes
	 * (qtk_writer_gen_record of this writer: its key in the description holds "") */
	struct qtk_writer *gen_w;
} qtk_st_out;

/* Overwrite the header's "qtk.provenance" value with the final record a piece at a time:
 * its bytes from `at` (pieces in order from 0; the escape of a byte does not depend on its
 * neighbours), escaped as the reserved one was; then the end, which checks the escaped length
 * (QTK_E_INTERNAL when it differs). */
int qtk_st_out_record_piece(qtk_st_out *o, uint64_t at, const char *p, size_t n, qtk_err *err);
int qtk_st_out_record_end(qtk_st_out *o, qtk_err *err);

/* Lay out the header (__metadata__ from desc's string kvs, entries in desc
 * order), open the temporary output and write the header. */
int qtk_st_out_open(qtk_st_out *o, const qtk_model *desc, qtk_err *err);

#endif
