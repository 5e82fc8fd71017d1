/* digest.h - container-independent content digests of tensors ("qtk-digest-v4"; "qtk-digest-v1"
 * .. "-v3" are still computed for records that name them).
 *
 * One leaf per logical tensor, in two tiers (docs/provenance.md). Version 2 (versions 3 and 4,
 * version 4 being what new digests use, are below):
 *
 *   encoded = SHA-256("qtk-tensor-v2/encoded\0" || str(canonical name) || str(encoding id)
 *                     || u32 ndim || u64 shape[ndim] || u32 nparts
 *                     || per part: str(role) || str(storage type) || u64 nbytes
 *                                  || SHA-256 of each 512 KiB piece of its bytes (the last shorter))
 *   decoded = SHA-256("qtk-tensor-v2/decoded\0" || str(canonical name) || u32 ndim
 *                     || u64 shape[ndim] || u64 count
 *                     || per 2^18 values (the last fewer): u8 form || SHA-256(the values in form))
 *             form 1: every value is a non-NaN binary16 value, written as binary16; else form 2:
 *             every value's low 16 bits are zero, written as bfloat16 (its high 16 bits); else
 *             form 4: F32. The values are in logical row-major order with GGUF Q/K rows of a
 *             llama model un-permuted back to Hugging Face order ("permute_qk").
 *             Other layouts (integers, F64, F8 ...): SHA-256("qtk-tensor-v2/decoded-raw\0"
 *             || encoded leaf).
 *   root    = SHA-256("qtk-root-v2/<tier>\0" || u64 count || leaves sorted by canonical name)
 *
 * Version 1 hashes the same fields with "-v1" tags, each part's bytes and all values as F32
 * directly (no pieces). In version 2 the pieces of an F16 or BF16 tensor stored as its own
 * values are the same bytes in both tiers, so one SHA-256 serves both, and the pieces of one
 * tensor can be hashed independently.
 *
 * Version 3 is version 2 with "-v3" tags, and one more kind of piece for the integer layouts
 * (ggml q4_0, q5_0, q8_0; AWQ, GPTQ and compressed-tensors integers without act-order, groups a
 * multiple of 32, one scale per group or tensor: qtk_digest_int_layout), whose values are
 * (code - zero) * scale: each of their pieces is
 * written as runs of 32 values, a run being the F32 bits of its scale (u32) and the 32
 * differences code - zero, as i8 (form 8) when every difference of the piece fits, else as i16
 * (form 9). An exact transcode between those layouts keeps every scale and difference, so the
 * leaf survives it, and a piece is a ninth of its F32 values' bytes at 4 bits.
 *
 * Version 4 is version 3 with "-v4" tags, and one more kind of piece for the ggml layouts whose
 * values are A * c - M per sub-block (q4_1, q5_1, q2_k .. q6_k, iq4_nl, iq4_xs; MLX of 2 to 6
 * bits, groups a multiple of 32, as sub-blocks of 32 with their group's A and M): each of their
 * pieces is written as its sub-blocks, a sub-block being the F32 bits of A and of M (u32 each)
 * and its S codes c as i8 (form 10: S = 32; form 11: S = 16), value = (A * c) - M, each step
 * rounded to F32. A piece is then a third (S = 32) of its F32 values' bytes.
 *
 * str(s) is u32 length || bytes; all integers little-endian. Canonical names are the Hugging
 * Face names (llama-family GGUF names are mapped, others kept). The encoded bytes are the
 * stored bytes, so a GGUF Q/K tensor's encoded leaf covers its permuted rows.
 */
#ifndef QTK_DIGEST_H
#define QTK_DIGEST_H
#include "qtk_util.h"
#include "family/family.h" /* canonical names, Q/K heads */

#define QTK_DIGEST_SCHEME "qtk-digest-v4" /* what new digests use */
enum { QTK_DIGEST_V1 = 1, QTK_DIGEST_V2 = 2, QTK_DIGEST_V3 = 3, QTK_DIGEST_V4 = 4 }; /* 0 below: QTK_DIGEST_V4 */
/* "qtk-digest-v1" .. "qtk-digest-v4" for 1 .. 4 (0: v4); the version of a name, 0 when unknown. */
const char *qtk_digest_scheme_name(int scheme);
int qtk_digest_scheme_of(const char *name);

typedef enum { QTK_DEC_VALUES = 0, QTK_DEC_RAW = 1 } qtk_dec_kind;

typedef struct qtk_leaf {
	char *name;          /* canonical (HF) name, owned */
	char *stored;        /* name as stored in the file, owned */
	const char *enc_id;  /* encoding id: "f16", "ggml:q4_k", "awq:b4:g128:asym" ...: one copy of each
			      * for the whole process (never freed), shared by the leaves */
	int ndim;
	uint64_t shape[QTK_MAX_DIMS]; /* logical, outermost first */
	uint64_t n_bytes;    /* encoded bytes hashed */
	uint8_t enc[32];     /* encoded tier */
	uint8_t dec[32];     /* decoded tier */
	qtk_dec_kind dec_kind;
	bool has_enc, has_dec; /* which digests were computed */
	bool bad;            /* keep_going: the tensor could not be read or decoded (bad_msg says why) */
	char *bad_msg;       /* owned: why, when bad (NULL when even that could not be kept) */
	int qk_heads;        /* > 0: rows were un-permuted (GGUF Q/K) with this many heads */
} qtk_leaf;

typedef struct qtk_digests {
	size_t n;
	qtk_leaf *leaf;      /* sorted by canonical name (bytewise) after qtk_digests_finish */
	uint8_t enc_root[32], dec_root[32];
	uint64_t bytes;      /* encoded bytes hashed in total */
	int n_permuted;      /* leaves whose rows were un-permuted */
	size_t n_with_files; /* qtk_digest_model with file_sha: tensors hashed from the files' read */
	bool complete;       /* every leaf has both tiers: the roots are meaningful */
	int scheme;          /* QTK_DIGEST_V1 .. _V4 (0: V4) */
	size_t *of_tensor;   /* qtk_digest_describe: tensor i's leaf is leaf[of_tensor[i]]; else NULL */
} qtk_digests;

typedef struct qtk_digest_opts {
	int scheme;  /* QTK_DIGEST_V1 .. _V4; 0: V4 */
	int threads; /* worker threads (tensors in parallel); 0 = all cores. Results do not depend on it */
	bool enc_only;       /* skip the decoded tier (except for raw leaves, which derive from the encoded) */
	const bool *select;  /* NULL, or m->ntensors flags: only these tensors are read */
	bool keep_going;     /* a tensor that fails with QTK_E_DATA becomes a leaf marked bad, no error */
	/* Optional progress (bytes done of total), called with an internal lock held. */
	void (*progress)(void *ctx, uint64_t done, uint64_t total);
	/* Optional, instead of progress: the same, naming the tensor the bytes just read belong to
	 * (tensors are read in parallel: the one whose chunk came last). Called per read (4 MiB),
	 * under the same lock, so a large tensor reports progress inside itself. */
	void (*progress_named)(void *ctx, const char *tensor, uint64_t done, uint64_t total);
	void *progress_ctx;
	/* Optional: when *cancel becomes nonzero (read atomically) the remaining reads fail with
	 * QTK_E_IO "cancelled" (a caller giving up on a background digest). */
	const int *cancel;
	/* Optional, m->nfiles entries: also each file's SHA-256 (of its file_sizes[f] bytes), from a
	 * read that feeds the digests of the tensors stored as plain byte ranges of it (each file
	 * read once for both, on threads beside the tensors' own). */
	uint8_t (*file_sha)[32];
} qtk_digest_opts;

/* Both tiers of every tensor of m, and both roots. Reads each tensor once, in chunks of a few
 * MiB (AWQ/GPTQ tensors whole: their decoder needs every part), tensors in parallel.
 * Returns 0 or a QTK_E_* code with *err set (naming the tensor); out is then empty.
 * Free with qtk_digests_free. */
int qtk_digest_model(qtk_model *m, const qtk_digest_opts *o, qtk_digests *out, qtk_err *err);
/* The leaves of m without digests (what qtk_digest_leaf_meta gives each), sorted and checked as
 * qtk_digests_finish does, with of_tensor: the description qtk_digest_model_into fills. */
int qtk_digest_describe(const qtk_model *m, qtk_digests *out, qtk_err *err);
/* qtk_digest_model into d, a description of m (qtk_digest_describe, in the default scheme; o's
 * scheme must be 0, keep_going false): each tensor's digests go into its leaf and nothing else of d is written,
 * so other threads may read the leaves' names, shapes and encodings meanwhile (never their
 * digests). The roots are not computed: once nothing else reads d, qtk_digests_finish. A tensor
 * whose hashing finds it other than described (the file changed) fails with QTK_E_DATA. On
 * failure d keeps its description (the caller frees it). */
int qtk_digest_model_into(qtk_model *m, const qtk_digest_opts *o, qtk_digests *d, qtk_err *err);
void qtk_digests_free(qtk_digests *d);
/* Sort the leaves by canonical name (leaves already sorted are not moved), reject duplicates
 * (QTK_E_DATA) and compute both roots (in d->scheme).
 * For callers that fill leaves themselves (qconvert's output, via qtk_thash). */
int qtk_digests_finish(qtk_digests *d, qtk_err *err);
/* Refuse (QTK_E_DATA) a model two of whose tensors have one canonical name (a GGUF name and
 * the HF name it maps to, say): the rule qverify's and qconvert's digests apply, for callers
 * that pair tensors by canonical name without digests (qinspect --diff). */
int qtk_canon_unique(const qtk_model *m, qtk_err *err);
/* Leaf by canonical name (after finish); NULL when absent. */
const qtk_leaf *qtk_digests_find(const qtk_digests *d, const char *canon);

/* Canonical names: qtk_canon_name; heads for un-permuting: qtk_family_qk_heads (family.h). */

/* Everything of t's leaf but the digests (names, encoding id, shape, bytes, decoded kind,
 * Q/K heads from m's metadata). Owned strings go into leaf. */
int qtk_digest_leaf_meta(const qtk_model *m, const qtk_tensor *t, qtk_leaf *leaf, qtk_err *err);

/* Would tensor st of sm and tensor ot of om, holding the same bytes, hash into the same leaves?
 * True when everything else that enters both tiers is equal: canonical name, encoding id,
 * layout, shape, Q/K heads, decoded kind, and every part's role, storage type and length. A
 * writer that copies st's bytes verbatim into ot may then hash them once and use the leaf
 * for both (qconvert: the source's leaf of a copied tensor comes from the bytes it wrote). */
bool qtk_digest_same_stream(const qtk_model *sm, const qtk_tensor *st, const qtk_model *om, const qtk_tensor *ot);

/* Streaming leaf computation for one tensor described by t (layout, shape, parts with nbytes;
 * offsets ignored): feed every part's bytes in order, in pieces of any size. qk_heads from
 * qtk_family_qk_heads (0: none). Memory: a chunk of a few MiB for plain layouts; the whole
 * tensor for AWQ/GPTQ. */
typedef struct qtk_thash qtk_thash;
int qtk_thash_new(const qtk_model *m, const qtk_tensor *t, int qk_heads, qtk_thash **out, qtk_err *err);
/* The same in a given scheme (QTK_DIGEST_V1 .. _V4). */
int qtk_thash_new_scheme(const qtk_model *m, const qtk_tensor *t, int qk_heads, int scheme, qtk_thash **out,
			 qtk_err *err);
int qtk_thash_put(qtk_thash *h, const void *bytes, size_t n);
/* Finish into *leaf (name and stored are set from t's name). Frees h, also on error. */
int qtk_thash_end(qtk_thash *h, qtk_leaf *leaf);
/* Free an unfinished hasher; accepts NULL. */
void qtk_thash_free(qtk_thash *h);

/* The decoded leaf of tensor t of m from its F32 values, fed in canonical order (logical
 * row-major) in stored row order: for a writer that has the values anyway (qconvert's check of
 * a packed output) and need not keep the encoded parts for a sink to decode. Q/K rows stored in
 * GGUF's order come in pieces of whole heads (qtk_vhash_head_rows rows each, 0: pieces of any
 * size) and are un-permuted here. QTK_E_DATA when t's decoded leaf is not such a stream (raw
 * leaves, heads that do not divide the rows). */
typedef struct qtk_vhash qtk_vhash;
int qtk_vhash_new(const qtk_model *m, const qtk_tensor *t, qtk_vhash **out, qtk_err *err);
uint64_t qtk_vhash_head_rows(const qtk_vhash *h);
int qtk_vhash_put(qtk_vhash *h, const float *v, uint64_t n);
/* Version 3, integer layouts (qtk_vhash_int): the values as runs instead, n values (whole runs of
 * 32, whole heads as above): k their differences code - zero (integers, as floats), s the F32
 * bits of each run's scale; qtk_vhash_put is then an error. Version 4's MLX sub-blocks are
 * qtk_vhash_int too, and only ever come written (qtk_vhash_put_runw). */
bool qtk_vhash_int(const qtk_vhash *h);
int qtk_vhash_put_runs(qtk_vhash *h, const float *k, const uint32_t *s, uint64_t n);
/* The same, the runs already written (form 8: the F32 bits of the scale, then 32 differences as
 * i8; rows in stored order), nruns of them (qtk_digest_rows_w makes them). */
int qtk_vhash_put_runw(qtk_vhash *h, const uint8_t *w, uint64_t nruns);
/* Whether tensor t's decoded leaf is made of runs in versions 3 and 4 (a property of its layout). */
bool qtk_digest_int_layout(const qtk_tensor *t);
/* Version 4: the values of a sub-block (S) of ggml type `type` whose decoded pieces are its affine
 * sub-blocks (q4_1, q5_1, iq4_nl, iq4_xs, q4_k, q5_k: 32; q2_k, q3_k, q6_k: 16), else 0. */
unsigned qtk_digest_aff_sub(unsigned type);
/* The same for a tensor: a ggml affine type, or an MLX matrix of 2-6 bits whose groups are a
 * multiple of 32 (sub-blocks of 32 with its group's scale and negated bias); else 0. */
unsigned qtk_digest_aff_layout(const qtk_tensor *t);
/* The family whose writing of decoded pieces an encoding id (qtk_digest_enc_id) names in a
 * scheme: 1 the integer runs (versions 3 and 4), 2 the affine sub-blocks (version 4), 0 values.
 * By family from the id alone (a packed layout's act-order or group is not checked): for a
 * message that explains a "changed" tensor. */
int qtk_digest_id_family(const char *id, int scheme);
/* Rows o0 .. o0+n-1 of a packed tensor t with qtk_digest_int_layout, from its parts (whole,
 * or a window's, as t describes them), as runs: k [n][in] the differences (decoded with every
 * scale 1, so exactly the integers), s [n][in/32] the scales' F32 bits. 0, -1 (bad layout or
 * parts, out of memory). scr: zeroed first, kept between calls, freed by the caller. */
typedef struct qtk_int_scratch {
	void *ones;    /* 1.0 in the scales' storage type, in place of the scales */
	uint64_t n;    /* entries */
	unsigned type; /* their storage type */
} qtk_int_scratch;
int qtk_digest_int_rows(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, float *k,
			uint32_t *s, qtk_int_scratch *scr);
/* The same rows written straight to their runs (form 8, 36 bytes each, n * in / 32 of them into
 * w, rows in stored order) from the packed words, for the layouts whose scheme writes them
 * (scheme.h runs_rows: 4-bit AWQ and GPTQ v1/v2, rows o0 and n whole packed words; version 4:
 * MLX's sub-blocks, qtk_mlx_subblocks, form 10, 40 bytes
 * each): true when written (n 0: when t allows it), false when the caller must take
 * qtk_digest_int_rows instead (an MLX matrix: none; its values are not runs). */
bool qtk_digest_rows_w(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, uint8_t *w);
void qtk_int_scratch_free(qtk_int_scratch *s);
/* The digest, when exactly t's count of values came; frees h, also on error. */
int qtk_vhash_end(qtk_vhash *h, uint8_t dec[32]);
void qtk_vhash_free(qtk_vhash *h);

/* A tensor's values as F32 in canonical order (logical row-major, GGUF Q/K rows of a llama
 * model un-permuted): a new array of t->n_params floats (qtk_free). QTK_E_DATA when the layout
 * has no exact F32 decoding (integers, F64, F8 ...). Memory: the whole tensor. */
int qtk_tensor_values(qtk_model *m, const qtk_tensor *t, float **out, qtk_err *err);

/* Digests of an output as it is written (qconvert): feed every byte handed to the writer,
 * tensors in the description's order, parts in order. One tensor is hashed at a time. */
typedef struct qtk_digest_sink qtk_digest_sink;
int qtk_digest_sink_new(const qtk_model *desc, qtk_digest_sink **out, qtk_err *err);
/* A sink may hash one tier only, so that two sinks fed the same bytes on two threads (the
 * writer's tee and tee2) share the work: QTK_SINK_ENC hashes the encoded tier (and proves
 * copies, as a BOTH sink does), QTK_SINK_DEC the decoded tier of the tensors that need one
 * (not copies, not raw leaves). qtk_digest_sink_finish_pair joins them. */
typedef enum { QTK_SINK_BOTH = 0, QTK_SINK_ENC = 1, QTK_SINK_DEC = 2 } qtk_sink_mode;
int qtk_digest_sink_new_mode(const qtk_model *desc, qtk_sink_mode mode, qtk_digest_sink **out, qtk_err *err);
/* Bytes of tensor `tensor` (index into desc->tensors; never decreasing). */
int qtk_digest_sink_put(qtk_digest_sink *s, size_t tensor, const void *buf, size_t n);
/* Optional, before tensor `tensor`'s first byte: its bytes are meant to be those of the source
 * tensor whose leaf is src (a copy: same canonical name, encoding, shape and row order). Then
 * only the encoded tier is hashed and the decoded leaf is taken from src once the encoded
 * leaves prove equal; if they differ, the tensor fails with QTK_E_INTERNAL. A src that does
 * not describe the same tensor is ignored. src must stay valid until finish. */
void qtk_digest_sink_expect(qtk_digest_sink *s, size_t tensor, const qtk_leaf *src);
/* The same when the source's digests are not known yet (they are computed while the output
 * is written): meta is the source leaf's metadata (qtk_digest_leaf_meta); the copy is proven
 * by qtk_digest_sink_finish_late against the source's digests. */
void qtk_digest_sink_expect_late(qtk_digest_sink *s, size_t tensor, const qtk_leaf *meta);
/* Optional, before tensor `tensor`'s first byte: its decoded leaf is dec (qtk_vhash of the
 * values the writer encoded, checked by decoding them). A QTK_SINK_DEC sink then takes that
 * and neither holds nor decodes the tensor's bytes; other sinks ignore it. */
void qtk_digest_sink_decoded(qtk_digest_sink *s, size_t tensor, const uint8_t dec[32]);
/* QTK_SINK_DEC: tensor `tensor`'s values are, as the writer proved, the source tensor's of the
 * same canonical name: its decoded leaf is that one's, taken at qtk_digest_sink_finish_pair
 * from the source's digests (an error there when they have no such leaf of the same name,
 * shape, row order and kind). */
void qtk_digest_sink_decoded_source(qtk_digest_sink *s, size_t tensor);
/* QTK_SINK_DEC, before tensor `tensor`'s first byte: its leaf is given with
 * qtk_digest_sink_decoded after its bytes (a writer that streams the tensor while hashing its
 * values), before qtk_digest_sink_finish_pair, which fails when it was not. */
void qtk_digest_sink_decoded_later(qtk_digest_sink *s, size_t tensor);
/* Every tensor complete: leaves and roots into *out (qtk_digests_free). Frees s, also on error. */
int qtk_digest_sink_finish(qtk_digest_sink *s, qtk_digests *out);
/* The same, proving late copies against src (the source's digests). */
int qtk_digest_sink_finish_late(qtk_digest_sink *s, const qtk_digests *src, qtk_digests *out);
/* Finish an ENC sink s and a DEC sink dec fed the same bytes (dec may be NULL): s's leaves take
 * dec's decoded leaves. Errors go to s's qtk_err. Frees both, also on error. */
int qtk_digest_sink_finish_pair(qtk_digest_sink *s, qtk_digest_sink *dec, const qtk_digests *src, qtk_digests *out);
void qtk_digest_sink_free(qtk_digest_sink *s);

/* A tensor's F32 values in canonical order, read in pieces: plain layouts a chunk of about a
 * million values at a time (whole heads when un-permuting), AWQ/GPTQ decoded whole. */
typedef struct qtk_vcursor qtk_vcursor;
int qtk_vcursor_open(qtk_model *m, const qtk_tensor *t, qtk_vcursor **out, qtk_err *err);
/* Copy the next n values into dst; QTK_E_INTERNAL when fewer than n are left. */
int qtk_vcursor_read(qtk_vcursor *c, float *dst, uint64_t n);
void qtk_vcursor_close(qtk_vcursor *c);

/* Canonical encoding id of a layout ("awq:b4:g128:asym", "gptq-v2:b4:g128:sym:act",
 * "ggml:q4_k", "f16"). */
void qtk_digest_enc_id(const qtk_layout *l, char *buf, size_t n);
#endif
