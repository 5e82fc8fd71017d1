/* prov.h - provenance records (docs/provenance.md).
 *
 * A record is one JSON object, serialized canonically: no whitespace, object keys sorted
 * bytewise, integers only (0 ..= 2^53), strings as UTF-8 with the minimal escapes. The
 * canonical text is what is stored and what is hashed (qtk_prov_sha256).
 *
 * Where it lives: GGUF and QPK key "qtk.provenance" (a string), safetensors
 * __metadata__["qtk.provenance"], Hugging Face directory file qtk-provenance.json.
 */
#ifndef QTK_PROV_H
#define QTK_PROV_H
#include "record/digest.h"
#include "json.h"
#include <cJSON.h>
#include <pthread.h>

#define QTK_PROV_KEY "qtk.provenance"
#define QTK_PROV_FILE "qtk-provenance.json"
#define QTK_PROV_VERSION 1
/* Cap on a record's size (a record with every tensor's digests is ~300 bytes a tensor). */
#define QTK_PROV_CAP (64u << 20)

/* The record text stored in m, or NULL when none: a Hugging Face directory's
 * qtk-provenance.json, else the kv qtk.provenance. *len receives its length, *where
 * (optional) "file qtk-provenance.json" or "kv qtk.provenance". Valid while m is open. */
const char *qtk_prov_find(const qtk_model *m, size_t *len, const char **where);

/* Parse a record strictly: strict JSON (no duplicate keys at any depth, integers only),
 * record_version known, every known field of the right type, digests 64 lower-case hex,
 * the output's tensor list consistent with its roots. QTK_E_DATA naming the field
 * ("output.tensors[3].encoded") on any violation. *out owns the tree, whose nodes come from
 * one mapping: free it with qtk_json_tree_free (cJSON_Delete would leave the mapping). */
int qtk_prov_parse(const char *text, size_t len, const char *file, cJSON **out, qtk_err *err);
/* The same checks, with the same verdicts, keeping nothing: each list entry's canonical text
 * is compared with the text at its place instead of kept. *canonical: the text is its own
 * canonical form (a record qtk wrote), so it can be used as it is. */
int qtk_prov_check_canonical(const char *text, size_t len, const char *file, bool *canonical, qtk_err *err);
/* The tree holds each tensor list (output.tensors of the record and of the records chained or
 * embedded in it) as a raw item of its canonical text, about a quarter of the memory of its
 * tree: read them with qtk_prov_list_each. qtk_prov_canonical and qtk_prov_sha256 write them
 * as they are. qtk_prov_parse_tree checks the same and keeps every list a tree. */
int qtk_prov_parse_tree(const char *text, size_t len, const char *file, cJSON **out, qtk_err *err);
/* fn for each entry of a tensor list (an object), held as a tree or as text; stops at the first
 * non-zero return of fn and returns it (QTK_E_IO: out of memory). */
int qtk_prov_list_each(const cJSON *list, int (*fn)(void *ctx, const cJSON *entry), void *ctx);

/* Canonical serialization of a JSON tree (sorted keys, no whitespace). New string
 * (qtk_free), NULL when out of memory or the tree holds a non-integer number. */
char *qtk_prov_canonical(const cJSON *j);
/* SHA-256 of the canonical serialization. 0 or QTK_E_IO. */
int qtk_prov_sha256(const cJSON *j, uint8_t out[32]);

/* Size and SHA-256 of a model's files: its data files, and for a Hugging Face directory its
 * side files (config.json, tokenizer files, qtk-provenance.json ...). Paths are relative to the
 * model (base names), sorted. */
typedef struct qtk_fileinfo {
	char *path;
	uint64_t size;
	uint8_t sha256[32];
} qtk_fileinfo;
typedef struct qtk_filelist {
	size_t n;
	qtk_fileinfo *f;
} qtk_filelist;
int qtk_hash_model_files(qtk_model *m, qtk_filelist *out, qtk_err *err);
void qtk_filelist_free(qtk_filelist *l);

/* ---- building (qconvert) --------------------------------------------------------------- */

typedef struct qtk_prov_builder {
	/* source: the opened input; its files are hashed and its digests computed unless given */
	qtk_model *src;
	/* optional: another open handle of src's files, read by the thread that hashes the source
	 * (a reader such as QPK's keeps one chunk cache: two threads reading two places through it
	 * would take turns); NULL: src */
	qtk_model *src_hash;
	const qtk_digests *src_digests;    /* optional, precomputed */
	const qtk_filelist *src_files;     /* optional, precomputed */
	/* output: the description model handed to qtk_writer_open */
	const qtk_model *out;
	qtk_out_kind out_kind;
	const qtk_digests *out_digests;    /* NULL: placeholders (see qtk_prov_patch) */
	const qtk_outlist *out_files;      /* NULL: no "files" (a file cannot hold its own hash) */
	/* transform */
	const char *kind;       /* "repack" "quantize" "convert" "dequantize"; NULL: derived */
	const char *method;     /* "copy" "rtn" "kquant" "awq" "gptq" ...; NULL: derived */
	const char *target;     /* the --to value, NULL = "keep" */
	const char *const *params; /* further canonical parameters "key=value" (bits=4 ...) */
	size_t nparams;
	const uint8_t *imatrix_sha256; /* NULL: "none" */
	const char *imatrix_file;      /* its base name is recorded */
	int64_t time;           /* seconds since the epoch; set by qtk_prov_builder_init */
	int threads;            /* for computing source digests; 0 = all cores */
	/* optional, src->ntensors flags, set before the source is hashed: false = the tensor is
	 * not read for its digests; its leaf comes from the output (qtk_prov_take_shared) */
	const bool *src_select;
	char note[256];         /* out: set when something was left out (an invalid source record) */
	/* qtk_prov_start_source: the source is being hashed on threads of its own; until
	 * qtk_prov_join_source, builds render its digests and file hashes as placeholders */
	bool src_pending;
	/* the source's leaves: from qtk_prov_start_source its description (names, shapes,
	 * encodings; what qtk_digest_sink_expect_late may point at, the leaves never move), whose
	 * digests the hashing fills in, complete and with roots from qtk_prov_join_source; without
	 * it, made by the first build. Read only the description while src_pending. */
	qtk_digests src_cache;
	qtk_filelist files_cache;
	cJSON *audit_cache;     /* the source's audit (record/audit.h), taken by the first build */
	/* the source's own record, checked by the first build: its canonical text (src's stored
	 * text when that is canonical, else parent_own) and SHA-256; parent_state 0: not yet,
	 * 1: chained, -1: none or invalid */
	const char *parent_txt;
	char *parent_own;
	size_t parent_len;
	uint8_t parent_sha[32];
	int parent_state;
	bool cached;
	pthread_t src_th;
	bool src_th_live;
	int src_cancel;         /* set (atomically) to make the source hashing give up */
	int src_th_rc;
	qtk_err src_th_err;
} qtk_prov_builder;

/* Hash the source (files, both digest tiers) on threads of its own while the caller writes the
 * output; meanwhile builds render the source's digests as placeholders, so a record reserved
 * now has the final record's length. Only for sources read with pread (no format reader
 * state): the caller's reads may run beside it. src_cache holds the description. */
int qtk_prov_start_source(qtk_prov_builder *b, qtk_err *err);
/* Wait for qtk_prov_start_source's hashing; its failure, if any. */
int qtk_prov_join_source(qtk_prov_builder *b, qtk_err *err);

/* After qtk_prov_join_source: the source leaves left out by src_select take their digests from
 * the output leaf of the same canonical name (out: the output's digests, computed from the
 * bytes copied verbatim from those source tensors; qtk_digest_same_stream), and the source's
 * roots are recomputed. QTK_E_INTERNAL when such an output leaf is missing or incomplete. */
int qtk_prov_take_shared(qtk_prov_builder *b, const qtk_digests *out, qtk_err *err);

/* Zero b and set time from SOURCE_DATE_EPOCH (when a valid integer) or the clock. */
void qtk_prov_builder_init(qtk_prov_builder *b);
/* Free what builds cached (accepts a zeroed builder). */
void qtk_prov_builder_free(qtk_prov_builder *b);

/* Render the record: canonical JSON text (qtk_free). With out_digests NULL every output
 * digest is a placeholder of 64 '~' characters, and the text has exactly the length of the
 * final record from the same builder with digests filled in. The first call reads the source
 * (its files and tensors) unless src_files/src_digests are given; later calls reuse that. */
int qtk_prov_build(qtk_prov_builder *b, char **json, qtk_err *err);
/* The same, the text's length known beforehand (the final record has the reserved one's):
 * its buffer is allocated once at that size. */
int qtk_prov_build_sized(qtk_prov_builder *b, size_t reserve, char **json, qtk_err *err);
/* The same, handed to put a megabyte at a time as it is made, never held whole (a piece
 * larger than that, the chained parent's text, as it is): the text must be exactly len bytes
 * (QTK_E_INTERNAL otherwise); put returns 0 or an error code with err's message set (it is
 * returned as is). */
int qtk_prov_build_stream(qtk_prov_builder *b, size_t len, int (*put)(void *ctx, const uint8_t *p, size_t n),
			  void *ctx, qtk_err *err);
/* The record's length only, made and counted a megabyte at a time (nothing kept): the reserved
 * record's, for a writer that generates it where it goes (qtk_write_opts.record_gen). */
int qtk_prov_build_count(qtk_prov_builder *b, size_t *len, qtk_err *err);

/* Fill placeholders in place: buf (len bytes, e.g. the header of an output file) holds the
 * placeholder record `ph` once, verbatim (GGUF, QPK, a side file) or as a JSON string literal
 * (safetensors __metadata__); it is replaced by the final record `fin` (same length; in the
 * same form). QTK_E_INTERNAL when lengths differ or ph is not found exactly once. */
int qtk_prov_patch(char *buf, size_t len, const char *ph, const char *fin, qtk_err *err);

/* Deployment record of a model (qverify --emit-record): container, files, digests, roots
 * and the embedded record (parsed, or null). Canonical JSON text (qtk_free). */
int qtk_prov_emit(qtk_model *m, const qtk_digests *d, const qtk_filelist *files, const cJSON *embedded,
		  int64_t time, char **json, qtk_err *err);
/* The same text handed to put a megabyte at a time as it is made, never held whole (put as for
 * qtk_prov_build_stream). */
int qtk_prov_emit_stream(qtk_model *m, const qtk_digests *d, const qtk_filelist *files, const cJSON *embedded,
			 int64_t time, int (*put)(void *ctx, const uint8_t *p, size_t n), void *ctx, qtk_err *err);

/* Lower-case hex digest -> bytes; false unless exactly 64 hex digits. */
bool qtk_prov_unhex(const char *s, uint8_t out[32]);
/* SOURCE_DATE_EPOCH when it is a valid integer, else the clock (seconds since the epoch). */
int64_t qtk_prov_now(void);
/* UTC ISO-8601 "2026-11-30T08:00:00Z". */
void qtk_prov_time(int64_t t, char *buf, size_t n);
#endif
