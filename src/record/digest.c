/* digest.c - container-independent content digests of tensors (two tiers, see digest.h). */
#include "record/digest.h"
#include "internal.h"
#include "view/decode.h"
#include "dequant.h"
#include "scheme/scheme.h"
#include "scheme/mlx.h"
#include <openssl/evp.h>
#include "lc.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "digest.c hashes F32 values in host order: little-endian hosts only"
#endif

/* domain tags by scheme: [0] version 1 .. [3] version 4 */
static const char *const TAG_ENC[4] = {"qtk-tensor-v1/encoded", "qtk-tensor-v2/encoded", "qtk-tensor-v3/encoded",
				       "qtk-tensor-v4/encoded"};
static const char *const TAG_DEC[4] = {"qtk-tensor-v1/decoded", "qtk-tensor-v2/decoded", "qtk-tensor-v3/decoded",
				       "qtk-tensor-v4/decoded"};
static const char *const TAG_RAW[4] = {"qtk-tensor-v1/decoded-raw", "qtk-tensor-v2/decoded-raw",
				       "qtk-tensor-v3/decoded-raw", "qtk-tensor-v4/decoded-raw"};
static const char *const TAG_ROOT_ENC[4] = {"qtk-root-v1/encoded", "qtk-root-v2/encoded", "qtk-root-v3/encoded",
					    "qtk-root-v4/encoded"};
static const char *const TAG_ROOT_DEC[4] = {"qtk-root-v1/decoded", "qtk-root-v2/decoded", "qtk-root-v3/decoded",
					    "qtk-root-v4/decoded"};

#define CHUNK_VALUES (1u << 20)       /* values decoded at a time (4 MiB of F32) */
#define V2_CHUNK ((size_t)512 << 10)  /* version 2: encoded bytes per piece digest */
#define V2_PIECE ((uint64_t)1 << 18)  /* version 2: decoded values per piece digest */
enum { FORM_F16 = 1, FORM_BF16 = 2, FORM_F32 = 4, FORM_INT8 = 8, FORM_INT16 = 9, FORM_AFF32 = 10, FORM_AFF16 = 11 };
#define RUN 32u /* version 3, integer layouts: values per scale run */

/* A scheme as given (0: the current one) to the one computed. */
static int norm_scheme(int scheme)
{
	return scheme == QTK_DIGEST_V1 || scheme == QTK_DIGEST_V2 || scheme == QTK_DIGEST_V3 ? scheme : QTK_DIGEST_V4;
}

static int vidx(int scheme) { return norm_scheme(scheme) - 1; }
static bool shares_pieces(const qtk_tensor *t, int heads);

const char *qtk_digest_scheme_name(int scheme)
{
	static const char *const names[4] = {"qtk-digest-v1", "qtk-digest-v2", "qtk-digest-v3", "qtk-digest-v4"};
	return names[vidx(scheme)];
}

int qtk_digest_scheme_of(const char *name)
{
	if (name && !strcmp(name, "qtk-digest-v1"))
		return QTK_DIGEST_V1;
	if (name && !strcmp(name, "qtk-digest-v2"))
		return QTK_DIGEST_V2;
	if (name && !strcmp(name, "qtk-digest-v3"))
		return QTK_DIGEST_V3;
	if (name && !strcmp(name, "qtk-digest-v4"))
		return QTK_DIGEST_V4;
	return 0;
}
#define READ_BYTES (4u << 20)         /* bytes read at a time */
#define MAX_UNIT_VALUES (1ull << 28)  /* one head group of a permuted tensor */

/* ---- encoding ids --------------------------------------------------------------- */

void qtk_digest_enc_id(const qtk_layout *l, char *buf, size_t n)
{
	switch (l->kind) {
	case QTK_LAYOUT_AWQ:
		snprintf(buf, n, "awq:b%u:g%u:%s", l->bits, l->group_size, l->sym ? "sym" : "asym");
		return;
	case QTK_LAYOUT_GPTQ:
		snprintf(buf, n, "gptq-v%d:b%u:g%u:%s%s", l->gptq_version == 2 ? 2 : 1, l->bits, l->group_size,
			 l->sym ? "sym" : "asym", l->act_order ? ":act" : "");
		return;
	case QTK_LAYOUT_PLAIN:
		qtk_layout_id(l, buf, n);
		return;
	default: { /* the other packed kinds: id and the parameters a layout carries */
		char id[32];
		qtk_layout_id(l, id, sizeof id);
		snprintf(buf, n, "%s:t%u:b%u:g%u:%s%s", id, l->type, l->bits, l->group_size, l->sym ? "sym" : "asym",
			 l->act_order ? ":act" : "");
		return;
	}
	}
}

/* ---- streaming leaf hasher ------------------------------------------------------ */

struct qtk_thash {
	qtk_tensor t;           /* copy of the description (name not used) */
	qtk_part parts[QTK_MAX_PARTS]; /* t's */
	char *canon, *stored;
	char enc_id[64];
	int qk_heads;
	qtk_dec_kind dk;
	bool want_dec;          /* false: encoded tier only */
	bool no_enc;            /* true: decoded tier only (a sink of mode QTK_SINK_DEC) */
	qtk_err *err;
	EVP_MD_CTX *enc, *dec;
	int scheme;             /* QTK_DIGEST_V1, _V2 or _V3 */
	/* version 2, encoded tier: the piece being hashed, and the last one finished (its digest,
	 * part, offset and length: a decoded piece of the same bytes takes it) */
	EVP_MD_CTX *ech;
	uint64_t ech_len, ech_off;
	uint8_t elast[32];
	int elast_part;
	uint64_t elast_off, elast_len;
	/* version 2, decoded tier: an unfinished piece of values (its bytes), a piece decoded (raw16)
	 * or in f16/bf16 form */
	uint8_t *pend;
	uint64_t piece_len;
	float *piece;
	uint8_t *form;
	uint64_t vdone;         /* values taken by the decoded tier */
	bool shares;            /* F16/BF16 in stored order: pieces may serve both tiers */
	bool raw16;             /* F16/BF16 rows un-permuted as stored: perm and pend hold 16-bit values */
	uint64_t dbytes;        /* plain layouts: bytes taken by the decoded tier */
	int part;               /* current part */
	bool hdr_done;          /* its header has been hashed */
	uint64_t part_left;     /* bytes of it still expected */
	uint64_t total;
	/* plain values */
	uint32_t blck, bpb;     /* elements and bytes per block */
	uint64_t unit;          /* chunk alignment in elements */
	uint8_t *chunk;
	size_t chunk_cap, chunk_len;
	float *vals, *perm;
	/* AWQ/GPTQ: whole parts */
	uint8_t *pbuf[QTK_MAX_PARTS];
	/* version 3, integer layouts (qtk_digest_int_layout): the piece being gathered as runs
	 * (differences ik, the scales' F32 bits is, ilen values), its writing iw, a chunk's blocks
	 * with their scales set to 1 (itmp), a chunk's scales in Q/K order (iperm) */
	bool intf;
	bool irw;               /* ggml blocks: pieces gathered as written runs (dec_runw) */
	/* version 4, ggml affine layouts (qtk_digest_aff_sub): written like ggml's integer blocks, as
	 * sub-blocks (A, M, codes) */
	bool aff;
	uint32_t rv, rb;        /* written runs: values and bytes each (32 and 36 for integer runs) */
	uint8_t rform;          /* and their pieces' form */
	float *ik;
	uint32_t *is, *iperm;
	uint64_t ilen;
	uint8_t *iw, *itmp;
	qtk_int_scratch iscr;   /* packed layouts: scales of 1 for the decoder */
};

static int oom(qtk_err *err, const char *subject)
{
	return qtk_err_set(err, QTK_E_IO, NULL, -1, subject, "out of memory");
}

static int md_put(qtk_thash *h, EVP_MD_CTX *md, const void *p, size_t n)
{
	if (md == h->enc && h->no_enc)
		return 0;
	if (n && EVP_DigestUpdate(md, p, n) != 1)
		return qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "SHA-256 update failed");
	return 0;
}

static int md_u32(qtk_thash *h, EVP_MD_CTX *md, uint32_t v)
{
	uint8_t b[4];
	qtk_wr32(b, v);
	return md_put(h, md, b, 4);
}

static int md_u64(qtk_thash *h, EVP_MD_CTX *md, uint64_t v)
{
	uint8_t b[8];
	qtk_wr64(b, v);
	return md_put(h, md, b, 8);
}

static int md_str(qtk_thash *h, EVP_MD_CTX *md, const char *s)
{
	size_t n = strlen(s);
	int rc = md_u32(h, md, (uint32_t)n);
	return rc ? rc : md_put(h, md, s, n);
}

static int md_tag(qtk_thash *h, EVP_MD_CTX *md, const char *tag)
{
	return md_put(h, md, tag, strlen(tag) + 1); /* with its NUL */
}

static int md_shape(qtk_thash *h, EVP_MD_CTX *md)
{
	int rc = md_u32(h, md, (uint32_t)h->t.ndim);
	for (int i = 0; i < h->t.ndim && !rc; i++)
		rc = md_u64(h, md, h->t.shape[i]);
	return rc;
}

/* The decoded tier's leaf header: tag, canonical name, shape (h->t), value count. */
static int md_dec_header(qtk_thash *h, const char *canon, uint64_t count)
{
	int rc = md_tag(h, h->dec, TAG_DEC[vidx(h->scheme)]);
	rc = rc ? rc : md_str(h, h->dec, canon);
	rc = rc ? rc : md_shape(h, h->dec);
	return rc ? rc : md_u64(h, h->dec, count);
}

/* ---- version 2: pieces ------------------------------------------------------------ */

static int sha_fail(qtk_thash *h)
{
	return qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "SHA-256 failed");
}

/* Finish the encoded tier's current piece into the leaf. */
static int enc_piece_end(qtk_thash *h)
{
	if (!h->ech_len)
		return 0;
	unsigned len = 0;
	uint8_t d[32];
	if (EVP_DigestFinal_ex(h->ech, d, &len) != 1 || len != 32 || EVP_DigestInit_ex(h->ech, EVP_sha256(), NULL) != 1)
		return sha_fail(h);
	memcpy(h->elast, d, 32);
	h->elast_part = h->part;
	h->elast_off = h->ech_off;
	h->elast_len = h->ech_len;
	h->ech_off += h->ech_len;
	h->ech_len = 0;
	return md_put(h, h->enc, d, 32);
}

/* Bytes of the current part into the encoded tier. */
static int enc_data(qtk_thash *h, const uint8_t *p, size_t n)
{
	if (h->no_enc)
		return 0;
	if (h->scheme == QTK_DIGEST_V1)
		return md_put(h, h->enc, p, n);
	while (n) {
		size_t k = V2_CHUNK - (size_t)h->ech_len;
		if (k > n)
			k = n;
		if (EVP_DigestUpdate(h->ech, p, k) != 1)
			return sha_fail(h);
		h->ech_len += k;
		p += k;
		n -= k;
		if (h->ech_len == V2_CHUNK) {
			int rc = enc_piece_end(h);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Is the F32 value with bits b a non-NaN binary16 value? (The forms of version 2.) */
static inline uint32_t fits_f16(uint32_t b)
{
	const uint32_t a = b & 0x7fffffffu, e = a >> 23, sh = (126u - e) & 31u;
	const uint32_t special = (a == 0) | (a == 0x7f800000u);              /* zeros, infinities */
	const uint32_t normal = (e - 113u <= 29u) & ((a & 0x1fffu) == 0);      /* 2^-14 .. 2^15 */
	const uint32_t sub = (e - 103u <= 9u) & ((((a & 0x7fffffu) | 0x800000u) & ((1u << sh) - 1u)) == 0);
	return special | normal | sub;
}

/* b as binary16, when fits_f16(b). */
static inline uint16_t to_f16(uint32_t b)
{
	const uint32_t s = (b >> 16) & 0x8000u, a = b & 0x7fffffffu, e = a >> 23;
	if (a == 0)
		return (uint16_t)s;
	if (a == 0x7f800000u)
		return (uint16_t)(s | 0x7c00u);
	if (e >= 113)
		return (uint16_t)(s | ((e - 112u) << 10) | ((a >> 13) & 0x3ffu));
	return (uint16_t)(s | (((a & 0x7fffffu) | 0x800000u) >> (126u - e)));
}

static bool all_f16(const uint32_t *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i += 64) {
		const uint64_t e = n - i < 64 ? n - i : 64;
		uint32_t ok = 1;
		for (uint64_t k = 0; k < e; k++)
			ok &= fits_f16(b[i + k]);
		if (!ok)
			return false;
	}
	return true;
}

static bool all_bf16(const uint32_t *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i += 64) {
		const uint64_t e = n - i < 64 ? n - i : 64;
		uint32_t low = 0;
		for (uint64_t k = 0; k < e; k++)
			low |= b[i + k] & 0xffffu;
		if (low)
			return false;
	}
	return true;
}

static int dec_piece_put(qtk_thash *h, uint8_t form, const uint8_t d[32])
{
	int rc = md_put(h, h->dec, &form, 1);
	return rc ? rc : md_put(h, h->dec, d, 32);
}

static int dec_piece_digest(qtk_thash *h, uint8_t form, const void *src, size_t len)
{
	uint8_t d[32];
	unsigned l = 0;
	if (EVP_Digest(src, len, d, &l, EVP_sha256(), NULL) != 1 || l != 32)
		return sha_fail(h);
	return dec_piece_put(h, form, d);
}

/* One piece of values (V2_PIECE, or the tensor's last): its form and digest. */
static int dec_piece(qtk_thash *h, const float *v, uint64_t n)
{
	const uint32_t *b = (const uint32_t *)(const void *)v;
	const bool f16 = all_f16(b, n);
	if (!f16 && !all_bf16(b, n))
		return dec_piece_digest(h, FORM_F32, v, (size_t)n * 4);
	if (!h->form && !(h->form = qtk_malloc((size_t)V2_PIECE * 2)))
		return oom(h->err, h->stored);
	for (uint64_t i = 0; i < n; i++)
		qtk_wr16(h->form + 2 * i, f16 ? to_f16(b[i]) : (uint16_t)(b[i] >> 16));
	return dec_piece_digest(h, f16 ? FORM_F16 : FORM_BF16, h->form, (size_t)n * 2);
}

static int decode_fast(unsigned type, const uint8_t *src, float *dst, uint64_t n);
static uint8_t raw16_form(unsigned type, const uint8_t *src, uint64_t n);

/* A piece of n stored F16/BF16 values: hashed as they are when that is its form, else decoded
 * (dec_piece decides): the digest of the values either way. */
static int dec_piece16(qtk_thash *h, const uint8_t *b, uint64_t n)
{
	const uint8_t form = raw16_form(h->t.layout.type, b, n);
	if (form)
		return dec_piece_digest(h, form, b, (size_t)n * 2);
	if (!h->piece && !(h->piece = qtk_malloc((size_t)V2_PIECE * sizeof *h->piece)))
		return oom(h->err, h->stored);
	decode_fast(h->t.layout.type, b, h->piece, n);
	return dec_piece(h, h->piece, n);
}

/* One piece of n values at p: F32 values, or a raw16 tensor's stored 16-bit ones. */
static int dec_piece_any(qtk_thash *h, const uint8_t *p, uint64_t n)
{
	return h->raw16 ? dec_piece16(h, p, n) : dec_piece(h, (const float *)(const void *)p, n);
}

/* Values in canonical order into the decoded tier: F32 values, or (h->raw16) the stored F16/BF16
 * values. Whole pieces go straight from src; the rest is gathered in pend. */
static int dec_vals(qtk_thash *h, const void *src, uint64_t n)
{
	const size_t es = h->raw16 ? 2 : sizeof(float);
	const uint8_t *b = src;
	if (h->scheme == QTK_DIGEST_V1)
		return md_put(h, h->dec, b, (size_t)n * es);
	int rc = 0;
	h->vdone += n;
	while (n && !rc) {
		if (!h->piece_len && n >= V2_PIECE) { /* a whole piece: no copy */
			rc = dec_piece_any(h, b, V2_PIECE);
			b += es * V2_PIECE;
			n -= V2_PIECE;
			continue;
		}
		if (!h->pend && !(h->pend = qtk_malloc((size_t)V2_PIECE * es)))
			return oom(h->err, h->stored);
		uint64_t k = V2_PIECE - h->piece_len;
		if (k > n)
			k = n;
		memcpy(h->pend + es * h->piece_len, b, (size_t)k * es);
		h->piece_len += k;
		b += es * k;
		n -= k;
		if (h->piece_len == V2_PIECE) {
			h->piece_len = 0;
			rc = dec_piece_any(h, h->pend, V2_PIECE);
		}
	}
	return rc;
}

static int int_piece(qtk_thash *h);

/* The last, shorter piece. */
static int dec_end(qtk_thash *h)
{
	if (h->irw && h->ilen) { /* ggml blocks' runs, written already */
		const uint64_t n = h->ilen;
		h->ilen = 0;
		return dec_piece_digest(h, h->rform, h->iw, (size_t)(n / h->rv) * h->rb);
	}
	if (h->intf)
		return h->ilen ? int_piece(h) : 0;
	if (h->scheme == QTK_DIGEST_V1 || !h->piece_len)
		return 0;
	uint64_t n = h->piece_len;
	h->piece_len = 0;
	return dec_piece_any(h, h->pend, n);
}

/* ---- version 3: integer layouts as runs ------------------------------------------- */

/* Where a packed integer layout keeps its scales: part index, storage type, and the order of
 * its entries (AWQ/GPTQ [group][out]; compressed-tensors [out][group], or one for the tensor). */
typedef struct int_scales {
	int si;
	unsigned st;
	bool gmajor, one;
} int_scales;

static bool int_scales_of(const qtk_tensor *t, int_scales *o)
{
	const qtk_layout *l = &t->layout;
	const uint64_t in = t->ndim == 2 ? t->shape[1] : 0, g = l->group_size;
	if (l->act_order || t->ndim != 2 || !g || g % RUN || in % g)
		return false;
	if (l->kind == QTK_LAYOUT_AWQ || l->kind == QTK_LAYOUT_GPTQ) {
		o->si = qtk_tensor_part_index(t, "scales");
		o->st = QTK_T_F16;
		o->gmajor = true;
		o->one = false;
	} else if (l->kind == QTK_LAYOUT_CT_INT &&
		   (l->strategy == QTK_SCHEME_PER_GROUP || l->strategy == QTK_SCHEME_PER_TENSOR) &&
		   (l->scale_type == QTK_T_F16 || l->scale_type == QTK_T_BF16 || l->scale_type == QTK_T_F32)) {
		o->si = qtk_tensor_part_index(t, "scale");
		o->st = l->scale_type;
		o->gmajor = false;
		o->one = l->strategy == QTK_SCHEME_PER_TENSOR;
	} else {
		return false;
	}
	return o->si >= 0 && t->parts[o->si].type == o->st;
}

/* ggml's integer block types (a block is a run) */
static bool plain_int(unsigned type) { return type == QTK_T_Q4_0 || type == QTK_T_Q5_0 || type == QTK_T_Q8_0; }

bool qtk_digest_int_layout(const qtk_tensor *t)
{
	if (t->layout.kind == QTK_LAYOUT_PLAIN)
		return plain_int(t->layout.type);
	int_scales is;
	return int_scales_of(t, &is);
}

void qtk_int_scratch_free(qtk_int_scratch *s)
{
	qtk_free(s->ones);
	s->ones = NULL;
	s->n = 0;
	s->type = 0;
}

/* F16 -> F32 bits through a table built from the reference conversion (bit-exact by
 * construction); also the decoded tier's F16 values. */
static uint32_t f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_init(void)
{
	for (uint32_t i = 0; i < 65536; i++) {
		float f = qtk_fp16_to_f32((uint16_t)i);
		memcpy(&f16_table[i], &f, 4);
	}
}

int qtk_digest_int_rows(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, float *k,
			uint32_t *s, qtk_int_scratch *scr)
{
	int_scales is;
	if (t->layout.kind == QTK_LAYOUT_PLAIN || !int_scales_of(t, &is))
		return -1;
	const uint64_t out = t->shape[0], in = t->shape[1], g = t->layout.group_size, ng = in / g;
	const size_t es = is.st == QTK_T_F32 ? 4 : 2;
	const uint64_t ns = is.one ? 1 : ng * out; /* scales the part holds */
	if (o0 > out || n > out - o0 || (out && ng > UINT64_MAX / 4 / out) || t->parts[is.si].nbytes != ns * es ||
	    ns > SIZE_MAX / 4)
		return -1;
	if (scr->n < ns || scr->type != is.st) { /* scales of 1: the decoder then gives the differences */
		qtk_int_scratch_free(scr);
		if (!(scr->ones = qtk_malloc((size_t)ns * es + 4)))
			return -1;
		for (uint64_t i = 0; i < ns; i++) {
			if (es == 4)
				qtk_wr32((uint8_t *)scr->ones + 4 * i, 0x3F800000u);
			else
				qtk_wr16((uint8_t *)scr->ones + 2 * i, is.st == QTK_T_BF16 ? 0x3F80u : 0x3C00u);
		}
		scr->n = ns;
		scr->type = is.st;
	}
	const void *pp[QTK_MAX_PARTS];
	for (int i = 0; i < t->nparts && i < QTK_MAX_PARTS; i++)
		pp[i] = parts[i];
	pp[is.si] = scr->ones;
	if (qtk_scheme_decode_rows(t, pp, o0, n, k))
		return -1;
	pthread_once(&f16_once, f16_init);
	const uint8_t *sb = parts[is.si];
	const uint64_t runs = in / RUN, per = g / RUN;
	for (uint64_t o = 0; o < n; o++)
		for (uint64_t r = 0; r < runs; r++) {
			const uint64_t gi = r / per, x = is.one ? 0 : is.gmajor ? gi * out + o0 + o : (o0 + o) * ng + gi;
			s[o * runs + r] = es == 4 ? qtk_rd32(sb + 4 * x)
				       : is.st == QTK_T_BF16 ? (uint32_t)qtk_rd16(sb + 2 * x) << 16
							     : f16_table[qtk_rd16(sb + 2 * x)];
		}
	return 0;
}

/* Four lanes (GCC/Clang vector extensions: SSE2, NEON, plain C) for the runs' writing. */
typedef float ir_f4 __attribute__((vector_size(16)));
typedef int32_t ir_i4 __attribute__((vector_size(16)));
typedef int16_t ir_h4 __attribute__((vector_size(8)));
typedef int8_t ir_b4 __attribute__((vector_size(4)));

/* Whether n differences (n a multiple of 32; integers by construction: decoded with every scale
 * 1) lie in -limit-1 .. limit; a NaN is out. */
static bool runs_within(const float *k, uint64_t n, float limit)
{
	const ir_f4 lo = {-limit - 1, -limit - 1, -limit - 1, -limit - 1}, hi = {limit, limit, limit, limit};
	ir_i4 in = {-1, -1, -1, -1};
	for (uint64_t i = 0; i < n; i += 4) {
		ir_f4 v;
		memcpy(&v, k + i, sizeof v);
		in &= (v >= lo) & (v <= hi);
	}
	return (in[0] & in[1] & in[2] & in[3]) == -1;
}

/* Write the runs of n values (k the differences, s the scales' F32 bits) into w, differences
 * as i8 (wide: i16). Lanes outside -32768 .. 32767 (or NaN) are written clamped, and lanes
 * outside the narrow range saturated (such a writing is not used); *narrow gets whether every
 * difference lies in -128 .. 127. With SSE2, sixteen lanes are narrowed by saturating packs
 * (the same bytes for every difference in range). */
static size_t runs_write(uint8_t *w, const float *k, const uint32_t *s, uint64_t n, bool wide, bool *narrow)
{
	const ir_f4 lo = {-128.f, -128.f, -128.f, -128.f}, hi = {127.f, 127.f, 127.f, 127.f};
	const ir_f4 wlo = {-32768.f, -32768.f, -32768.f, -32768.f}, whi = {32767.f, 32767.f, 32767.f, 32767.f};
	ir_i4 in = {-1, -1, -1, -1};
	const size_t rb = 4 + RUN * (wide ? 2 : 1);
	for (uint64_t r = 0; r < n / RUN; r++, w += rb) {
		qtk_wr32(w, s[r]);
		const float *kk = k + r * RUN;
		ir_i4 q[RUN / 4];
		for (unsigned i = 0; i < RUN / 4; i++) {
			ir_f4 v;
			memcpy(&v, kk + 4 * i, sizeof v);
			in &= (v >= lo) & (v <= hi);
			const ir_i4 ok = (v >= wlo) & (v <= whi); /* NaN and beyond: 0 (an error later) */
			q[i] = __builtin_convertvector((ir_f4)(ok & (ir_i4)v), ir_i4);
		}
#if defined(__SSE2__) && !defined(QTK_QV_PLAIN)
		for (unsigned i = 0; i < RUN / 4; i += 4) {
			const __m128i a = _mm_packs_epi32((__m128i)q[i], (__m128i)q[i + 1]);
			const __m128i b = _mm_packs_epi32((__m128i)q[i + 2], (__m128i)q[i + 3]);
			if (wide) {
				_mm_storeu_si128((__m128i *)(void *)(w + 4 + 8 * i), a);
				_mm_storeu_si128((__m128i *)(void *)(w + 4 + 8 * i + 16), b);
			} else {
				_mm_storeu_si128((__m128i *)(void *)(w + 4 + 4 * i), _mm_packs_epi16(a, b));
			}
		}
#else
		for (unsigned i = 0; i < RUN / 4; i++) {
			if (!wide) {
				const ir_b4 b = __builtin_convertvector(q[i], ir_b4);
				memcpy(w + 4 + 4 * i, &b, sizeof b);
			} else {
				const ir_h4 hv = __builtin_convertvector(q[i], ir_h4); /* little-endian hosts */
				memcpy(w + 4 + 8 * i, &hv, sizeof hv);
			}
		}
#endif
	}
	*narrow = (in[0] & in[1] & in[2] & in[3]) == -1;
	return (size_t)(n / RUN) * rb;
}

/* A piece of n values as runs: its form (8 when every difference fits i8, else 9) and the digest
 * of its writing. */
static int int_piece_of(qtk_thash *h, const float *k, const uint32_t *s, uint64_t n)
{
	if (!h->iw && !(h->iw = qtk_malloc((size_t)(V2_PIECE / RUN) * (4 + RUN * 2))))
		return oom(h->err, h->stored);
	bool narrow;
	size_t len = runs_write(h->iw, k, s, n, false, &narrow);
	if (!narrow) { /* rare: 8-bit asymmetric groups */
		if (!runs_within(k, n, 32767.f))
			return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "integer difference out of range");
		len = runs_write(h->iw, k, s, n, true, &narrow);
	}
	return dec_piece_digest(h, narrow ? FORM_INT8 : FORM_INT16, h->iw, len);
}

/* The gathered piece (ilen values). */
static int int_piece(qtk_thash *h)
{
	const uint64_t n = h->ilen;
	h->ilen = 0;
	return int_piece_of(h, h->ik, h->is, n);
}

/* n values as runs (n a multiple of 32) into the decoded tier, in canonical order: whole pieces
 * straight from k and s, the rest gathered. */
static int dec_runs(qtk_thash *h, const float *k, const uint32_t *s, uint64_t n)
{
	if (n % RUN)
		return qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "values not in whole runs of %u", RUN);
	if (h->irw) /* a piece is gathered one way: written runs (dec_runw) or these */
		return qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "runs of one tensor given two ways");
	h->vdone += n;
	int rc = 0;
	while (n && !rc) {
		if (!h->ilen && n >= V2_PIECE) {
			rc = int_piece_of(h, k, s, V2_PIECE);
			k += V2_PIECE;
			s += V2_PIECE / RUN;
			n -= V2_PIECE;
			continue;
		}
		if (!h->ik && (!(h->ik = qtk_malloc((size_t)V2_PIECE * sizeof *h->ik)) ||
			       !(h->is = qtk_malloc((size_t)(V2_PIECE / RUN) * sizeof *h->is))))
			return oom(h->err, h->stored);
		uint64_t c = V2_PIECE - h->ilen;
		if (c > n)
			c = n;
		memcpy(h->ik + h->ilen, k, (size_t)c * sizeof *k);
		memcpy(h->is + h->ilen / RUN, s, (size_t)(c / RUN) * sizeof *s);
		h->ilen += c;
		k += c;
		s += c / RUN;
		n -= c;
		if (h->ilen == V2_PIECE)
			rc = int_piece(h);
	}
	return rc;
}

/* Version 2, a piece of an F16 or BF16 tensor given as its stored bytes: the form when it is
 * the bytes themselves (F16 without infinities or NaNs; BF16 with a value that is not binary16),
 * else 0 (decode it). */
static uint8_t raw16_form(unsigned type, const uint8_t *src, uint64_t n)
{
	if (type == QTK_T_F16) { /* four values a word: a lane whose exponent bits are all set */
		const uint64_t e = 0x7c007c007c007c00ull, one = 0x0001000100010001ull, top = 0x8000800080008000ull;
		uint64_t special = 0, i = 0;
		for (; i + 4 <= n; i += 4) {
			uint64_t w;
			memcpy(&w, src + 2 * i, 8);
			const uint64_t v = (w & e) ^ e; /* a lane is 0 where the exponent is 0x1f */
			special |= (v - one) & ~v & top;
		}
		for (; i < n; i++)
			special |= (qtk_rd16(src + 2 * i) & 0x7c00u) == 0x7c00u;
		return special ? 0 : FORM_F16;
	}
	for (uint64_t i = 0; i < n; i += 64) {
		const uint64_t e = n - i < 64 ? n - i : 64;
		uint32_t ok = 1;
		for (uint64_t k = 0; k < e; k++)
			ok &= fits_f16((uint32_t)qtk_rd16(src + 2 * (i + k)) << 16);
		if (!ok)
			return FORM_BF16;
	}
	return 0;
}

/* Whether the layout's values are hashed as F32 (exact decoding exists). */
static qtk_dec_kind dec_kind_of(const qtk_tensor *t)
{
	if (t->layout.kind != QTK_LAYOUT_PLAIN)
		return QTK_DEC_VALUES;
	unsigned ty = t->layout.type;
	if (ty >= QTK_GGML_MAX || !qtk_dequant_ggml_supported(ty))
		return QTK_DEC_RAW;
	if (ty == QTK_T_I8 || ty == QTK_T_I16 || ty == QTK_T_I32 || ty == QTK_T_I64 || ty == QTK_T_F64)
		return QTK_DEC_RAW;
	return QTK_DEC_VALUES;
}

int qtk_digest_leaf_meta(const qtk_model *m, const qtk_tensor *t, qtk_leaf *l, qtk_err *err)
{
	char canon[QTK_CAP_NAME + 64];
	int qk, heads = 0;
	memset(l, 0, sizeof *l);
	if (qtk_canon_name(m, t->name, canon, sizeof canon, &qk) < 0)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "name too long");
	int rc = qtk_family_qk_heads(m, t, &heads, err);
	if (rc)
		return rc;
	if (!(l->name = qtk_strdup(canon)) || !(l->stored = qtk_strdup(t->name)))
		return oom(err, t->name);
	char id[64];
	qtk_digest_enc_id(&t->layout, id, sizeof id);
	if (!(l->enc_id = qtk_intern(id)))
		return oom(err, t->name);
	l->ndim = t->ndim;
	memcpy(l->shape, t->shape, sizeof l->shape);
	l->n_bytes = t->n_bytes;
	l->dec_kind = dec_kind_of(t);
	l->qk_heads = l->dec_kind == QTK_DEC_VALUES ? heads : 0;
	return 0;
}

static bool same_layout(const qtk_layout *a, const qtk_layout *b)
{
	return a->kind == b->kind && a->type == b->type && a->bits == b->bits && a->gptq_version == b->gptq_version &&
	       a->sym == b->sym && a->act_order == b->act_order && a->group_size == b->group_size &&
	       a->strategy == b->strategy && a->scale_type == b->scale_type && a->code_kind == b->code_kind &&
	       a->meta_len == b->meta_len && a->nested_group == b->nested_group;
}

bool qtk_digest_same_stream(const qtk_model *sm, const qtk_tensor *st, const qtk_model *om, const qtk_tensor *ot)
{
	qtk_err e;
	qtk_leaf a, b;
	qtk_err_clear(&e);
	int ra = qtk_digest_leaf_meta(sm, st, &a, &e);
	int rb = ra ? -1 : qtk_digest_leaf_meta(om, ot, &b, &e);
	bool same = !ra && !rb && !strcmp(a.name, b.name) && !strcmp(a.enc_id, b.enc_id) && a.ndim == b.ndim &&
		    !memcmp(a.shape, b.shape, sizeof a.shape) && a.n_bytes == b.n_bytes && a.qk_heads == b.qk_heads &&
		    a.dec_kind == b.dec_kind && st->nparts == ot->nparts && st->n_params == ot->n_params &&
		    same_layout(&st->layout, &ot->layout);
	/* the part headers that enter the encoded leaf: role, storage type name, length */
	for (int i = 0; same && i < st->nparts; i++) {
		const qtk_part *p = &st->parts[i], *q = &ot->parts[i];
		const qtk_type_info *tp = qtk_type(p->type), *tq = qtk_type(q->type);
		same = p->nbytes == q->nbytes && !strcmp(p->role, q->role) &&
		       !strcmp(tp ? tp->name : "unknown", tq ? tq->name : "unknown");
	}
	if (!ra) {
		qtk_free(a.name);
		qtk_free(a.stored);
	}
	if (!ra && !rb) {
		qtk_free(b.name);
		qtk_free(b.stored);
	}
	return same;
}

void qtk_thash_free(qtk_thash *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->enc);
	EVP_MD_CTX_free(h->dec);
	EVP_MD_CTX_free(h->ech);
	qtk_free(h->pend);
	qtk_free(h->piece);
	qtk_free(h->form);
	qtk_free(h->canon);
	qtk_free(h->stored);
	qtk_free(h->chunk);
	qtk_free(h->vals);
	qtk_free(h->perm);
	for (int i = 0; i < QTK_MAX_PARTS; i++)
		qtk_free(h->pbuf[i]);
	qtk_free(h->ik);
	qtk_free(h->is);
	qtk_free(h->iperm);
	qtk_free(h->iw);
	qtk_free(h->itmp);
	qtk_int_scratch_free(&h->iscr);
	qtk_free(h);
}

/* Hash headers of parts until one expects bytes (or none is left). */
static int advance(qtk_thash *h)
{
	while (h->part < h->t.nparts) {
		if (!h->hdr_done) {
			const qtk_part *p = &h->t.parts[h->part];
			const qtk_type_info *ti = qtk_type(p->type);
			int rc = md_str(h, h->enc, p->role);
			rc = rc ? rc : md_str(h, h->enc, ti ? ti->name : "unknown");
			rc = rc ? rc : md_u64(h, h->enc, p->nbytes);
			if (rc)
				return rc;
			h->hdr_done = true;
			h->part_left = p->nbytes;
		}
		if (h->part_left)
			return 0;
		if (h->scheme != QTK_DIGEST_V1) { /* the part's last piece */
			int rc = enc_piece_end(h);
			if (rc)
				return rc;
			h->ech_off = 0;
		}
		h->part++;
		h->hdr_done = false;
	}
	return 0;
}

/* Plain tensors: block geometry and the chunk size (whole head groups when permuting). */
static int plain_setup(qtk_thash *h)
{
	const qtk_type_info *ti = qtk_type(h->t.layout.type);
	if (!ti || ti->subbyte || h->t.nparts != 1)
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "layout cannot be decoded");
	h->blck = ti->blck;
	h->bpb = ti->bytes;
	uint64_t np = h->t.n_params, unit = h->blck;
	if (np % h->blck)
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "%llu values are not whole blocks of %u",
				   (unsigned long long)np, h->blck);
	if (h->qk_heads > 0) {
		uint64_t rows = h->t.ndim >= 1 ? h->t.shape[0] : 0;
		if (!rows || rows % (2 * (uint64_t)h->qk_heads) || np % rows)
			return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "rows do not split into %d heads",
					   h->qk_heads);
		unit = rows / (uint64_t)h->qk_heads * (np / rows); /* one head: its rows, all columns */
		if (unit > MAX_UNIT_VALUES || unit % h->blck)
			return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored,
					   "head of %llu values cannot be un-permuted", (unsigned long long)unit);
	}
	h->unit = unit;
	/* version 2, rows in stored order: a chunk is a piece of the decoded tier */
	const uint64_t cv = h->scheme != QTK_DIGEST_V1 && h->qk_heads <= 0 ? V2_PIECE : CHUNK_VALUES;
	uint64_t vals = cv > unit ? cv / unit * unit : unit;
	if (vals > np)
		vals = np ? np : h->blck;
	h->chunk_cap = (size_t)(vals / h->blck * h->bpb);
	h->raw16 = h->scheme != QTK_DIGEST_V1 && h->qk_heads > 0 &&
		   (h->t.layout.type == QTK_T_F16 || h->t.layout.type == QTK_T_BF16);
	h->chunk = qtk_malloc(h->chunk_cap ? h->chunk_cap : 1);
	/* raw16: the rows move as 16-bit values in perm, never decoded whole; version 3 integer
	 * blocks: written straight to runs (itmp, iperm below) */
	const bool written = h->intf || h->aff; /* blocks written straight to their runs */
	const bool decodes = !h->raw16 && !written, moves = h->qk_heads > 0 && !written;
	if (decodes)
		h->vals = qtk_malloc((size_t)vals * sizeof(float));
	if (moves)
		h->perm = qtk_malloc((size_t)vals * sizeof(float));
	if (!h->chunk || (decodes && !h->vals) || (moves && !h->perm))
		return oom(h->err, h->stored);
	/* version 3 runs move with their rows: rows must hold whole runs (a 1-D "Q/K" tensor's
	 * rows are single values) */
	if (written && h->qk_heads > 0 && (np / (h->t.ndim >= 1 ? h->t.shape[0] : 1)) % h->rv)
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored,
				   "rows of %llu values do not hold whole runs of %u: cannot be un-permuted",
				   (unsigned long long)(np / (h->t.ndim >= 1 ? h->t.shape[0] : 1)), h->rv);
	/* versions 3 and 4: a chunk's runs written out (blck / rv runs of rb bytes a block), and in
	 * Q/K order */
	const size_t rw = (size_t)(h->chunk_cap / h->bpb + 1) * (h->blck / h->rv) * h->rb;
	if (written && (!(h->itmp = qtk_malloc(rw)) || (h->qk_heads > 0 && !(h->iperm = qtk_malloc(rw)))))
		return oom(h->err, h->stored);
	return 0;
}

/* The written runs' geometry: integer runs of 32 (form 8), or (s > 0) version 4's affine
 * sub-blocks of s values (forms 10 and 11). */
static void runs_geom(qtk_thash *h, unsigned s)
{
	h->aff = s != 0;
	h->rv = s ? s : RUN;
	h->rb = s ? 8 + s : 4 + RUN;
	h->rform = !s ? FORM_INT8 : s == 32 ? FORM_AFF32 : FORM_AFF16;
}

static int thash_new(const qtk_model *m, const qtk_tensor *t, int qk_heads, bool want_dec, int scheme,
		     qtk_thash **out, qtk_err *err)
{
	*out = NULL;
	qtk_thash *h = qtk_calloc(1, sizeof *h);
	char canon[QTK_CAP_NAME + 64];
	int qk;
	if (!h)
		return oom(err, t->name);
	h->err = err;
	h->t.parts = h->parts;
	h->t.room = QTK_MAX_PARTS;
	if (qtk_tensor_copy(&h->t, t)) {
		qtk_free(h);
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "too many parts");
	}
	h->t.name = NULL;
	h->qk_heads = qk_heads;
	if (qtk_canon_name(m, t->name, canon, sizeof canon, &qk) < 0) {
		qtk_thash_free(h);
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "name too long");
	}
	h->canon = qtk_strdup(canon);
	h->stored = qtk_strdup(t->name);
	h->enc = EVP_MD_CTX_new();
	h->dec = EVP_MD_CTX_new();
	h->scheme = norm_scheme(scheme);
	if (h->scheme != QTK_DIGEST_V1)
		h->ech = EVP_MD_CTX_new();
	int rc = 0;
	if (!h->canon || !h->stored || !h->enc || !h->dec || (h->scheme != QTK_DIGEST_V1 && !h->ech))
		rc = oom(err, t->name);
	if (!rc && (t->ndim < 0 || t->ndim > QTK_MAX_DIMS || t->nparts < 0 || t->nparts > QTK_MAX_PARTS))
		rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "bad tensor description");
	if (!rc && (EVP_DigestInit_ex(h->enc, EVP_sha256(), NULL) != 1 ||
		    EVP_DigestInit_ex(h->dec, EVP_sha256(), NULL) != 1 ||
		    (h->ech && EVP_DigestInit_ex(h->ech, EVP_sha256(), NULL) != 1)))
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot initialise SHA-256");
	qtk_digest_enc_id(&t->layout, h->enc_id, sizeof h->enc_id);
	h->dk = dec_kind_of(t);
	h->want_dec = want_dec;
	h->intf = h->scheme >= QTK_DIGEST_V3 && h->dk == QTK_DEC_VALUES && qtk_digest_int_layout(t);
	runs_geom(h, h->scheme >= QTK_DIGEST_V4 && h->dk == QTK_DEC_VALUES ? qtk_digest_aff_layout(t) : 0);
	h->shares = h->scheme != QTK_DIGEST_V1 && h->dk == QTK_DEC_VALUES && shares_pieces(t, qk_heads);
	if (!rc)
		rc = md_tag(h, h->enc, TAG_ENC[vidx(h->scheme)]);
	rc = rc ? rc : md_str(h, h->enc, h->canon);
	rc = rc ? rc : md_str(h, h->enc, h->enc_id);
	rc = rc ? rc : md_shape(h, h->enc);
	rc = rc ? rc : md_u32(h, h->enc, (uint32_t)t->nparts);
	rc = rc ? rc : advance(h);
	if (!rc && h->dk == QTK_DEC_VALUES && want_dec) {
		rc = md_dec_header(h, h->canon, t->n_params);
		if (!rc && t->layout.kind == QTK_LAYOUT_PLAIN) {
			rc = plain_setup(h);
		} else if (!rc) {
			/* a matrix, or a stack of them (gpt-oss MXFP4 experts): E * out rows */
			if (t->nparts < 2 || (t->ndim != 2 && !(t->ndim == 3 && qk_heads <= 0)) ||
			    qtk_tensor_rows(t) > UINT32_MAX || qtk_tensor_cols(t) > UINT32_MAX)
				rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "bad quantized layer description");
			for (int i = 0; i < t->nparts && !rc; i++)
				if (t->parts[i].nbytes > SIZE_MAX / 2 ||
				    !(h->pbuf[i] = qtk_malloc(t->parts[i].nbytes ? (size_t)t->parts[i].nbytes : 1)))
					rc = oom(err, t->name);
		}
	}
	if (rc) {
		qtk_thash_free(h);
		return rc;
	}
	*out = h;
	return 0;
}

int qtk_thash_new(const qtk_model *m, const qtk_tensor *t, int qk_heads, qtk_thash **out, qtk_err *err)
{
	return thash_new(m, t, qk_heads, true, 0, out, err);
}

int qtk_thash_new_scheme(const qtk_model *m, const qtk_tensor *t, int qk_heads, int scheme, qtk_thash **out,
			 qtk_err *err)
{
	return thash_new(m, t, qk_heads, true, scheme, out, err);
}

/* Un-permute whole heads (unit values each, rows of `row` values): GGUF -> HF row order. */
static void unpermute(const float *src, float *dst, uint64_t nvals, uint64_t unit, uint64_t row)
{
	qtk_family_permute_rows((const uint8_t *)src, (uint8_t *)dst, nvals / row, row * sizeof *dst,
				(int)(nvals / unit), true);
}

/* F16 -> F32 through f16_table, BF16 by its defining shift. */
/* 0 when handled here, -1 to fall back to qtk_dequant_ggml. */
static int decode_fast(unsigned type, const uint8_t *src, float *dst, uint64_t n)
{
	if (type != QTK_T_F16 && type != QTK_T_BF16)
		return -1;
	uint32_t *d = (uint32_t *)(void *)dst;
	if (type == QTK_T_F16) {
		pthread_once(&f16_once, f16_init);
		for (uint64_t i = 0; i < n; i++)
			d[i] = f16_table[qtk_rd16(src + 2 * i)];
	} else {
		for (uint64_t i = 0; i < n; i++)
			d[i] = (uint32_t)qtk_rd16(src + 2 * i) << 16;
	}
	return 0;
}

/* 16 codes at a time (portable vector lanes: the same bytes on every build) */
typedef uint8_t aff_v16 __attribute__((vector_size(16)));

static inline aff_v16 aff_ld(const uint8_t *p)
{
	aff_v16 v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void aff_store(uint8_t *p, aff_v16 v) { memcpy(p, &v, sizeof v); }

/* Version 3, a ggml q4_0/q5_0/q8_0 block (32 values, its fp16 scale first) as its run's
 * writing in form 8: the scale's F32 bits, then the 32 differences code - zero, each the integer
 * ggml's decoder multiplies by the scale (q8_0: its signed code; q4_0: q - 8; q5_0: q - 16 with
 * the fifth bit from qh). */
static void block_run(unsigned type, const uint8_t *x, uint8_t *w)
{
	qtk_wr32(w, f16_table[qtk_rd16(x)]);
	uint8_t *k = w + 4;
	if (type == QTK_T_Q8_0) {
		memcpy(k, x + 2, RUN);
		return;
	}
	if (type == QTK_T_Q4_0) {
		const uint8_t *qs = x + 2;
		for (int j = 0; j < 16; j++) {
			k[j] = (uint8_t)((qs[j] & 0x0F) - 8);
			k[j + 16] = (uint8_t)((qs[j] >> 4) - 8);
		}
		return;
	}
	const uint32_t qh = qtk_rd32(x + 2); /* Q5_0 */
	const uint8_t *qs = x + 6;
	for (int j = 0; j < 16; j++) {
		const uint32_t h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		k[j] = (uint8_t)((int)((qs[j] & 0x0Fu) | h0) - 16);
		k[j + 16] = (uint8_t)((int)((qs[j] >> 4) | h1) - 16);
	}
}

/* Versions 3 and 4, n runs already written (h->rb bytes for h->rv values each, in form
 * h->rform: ggml's blocks, 4-bit AWQ/GPTQ words) into the decoded tier, in canonical order; a
 * piece is hashed when it is whole. */
static int dec_runw(qtk_thash *h, const uint8_t *w, uint64_t n)
{
	const size_t rb = h->rb, rv = h->rv;
	if (h->ilen && !h->irw) /* a piece is gathered one way: these, or differences (dec_runs) */
		return qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "runs of one tensor given two ways");
	h->irw = true;
	/* the largest piece: runs of 32 in i16 (form 9, gathered elsewhere into the same buffer) */
	if (!h->iw && !(h->iw = qtk_malloc((size_t)(V2_PIECE / RUN) * (4 + RUN * 2))))
		return oom(h->err, h->stored);
	h->vdone += n * rv;
	while (n) {
		uint64_t c = (V2_PIECE - h->ilen) / rv;
		if (c > n)
			c = n;
		memcpy(h->iw + (h->ilen / rv) * rb, w, (size_t)c * rb);
		h->ilen += c * rv;
		w += c * rb;
		n -= c;
		if (h->ilen == V2_PIECE) {
			h->ilen = 0;
			int rc = dec_piece_digest(h, h->rform, h->iw, (size_t)(V2_PIECE / rv) * rb);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- version 4: ggml affine sub-blocks --------------------------------------------------- */

unsigned qtk_digest_aff_sub(unsigned type)
{
	switch (type) {
	case QTK_T_Q4_1:
	case QTK_T_Q5_1:
	case QTK_T_Q4_K:
	case QTK_T_Q5_K:
	case QTK_T_IQ4_NL:
	case QTK_T_IQ4_XS:
		return 32;
	case QTK_T_Q2_K:
	case QTK_T_Q3_K:
	case QTK_T_Q6_K:
		return 16;
	default:
		return 0;
	}
}

static inline float f16_at(const uint8_t *p)
{
	float f;
	memcpy(&f, &f16_table[qtk_rd16(p)], 4);
	return f;
}

/* A sub-block's head: the F32 bits of A and of M (value = A * c - M, each step rounded) */
static inline uint8_t *aff_head(uint8_t *w, float a, float m)
{
	uint32_t ab, mb;
	memcpy(&ab, &a, 4);
	memcpy(&mb, &m, 4);
	qtk_wr32(w, ab);
	qtk_wr32(w + 4, mb);
	return w + 8;
}

/* Version 4, a ggml block of an affine layout as its sub-blocks' writing, in value order: A and
 * M computed as ggml's decoder computes its factors (exact products of the fp16 scales and the
 * small integer sub-block scales), the codes c the integers it multiplies by A. q4_1/q5_1 add
 * their m, so M is -m. */
static void block_aff(unsigned type, const uint8_t *x, uint8_t *w)
{
	switch (type) {
	case QTK_T_Q4_1:
	case QTK_T_Q5_1: {
		const bool q5 = type == QTK_T_Q5_1;
		const uint32_t qh = q5 ? qtk_rd32(x + 4) : 0;
		const uint8_t *qs = x + (q5 ? 8 : 4);
		int8_t *c = (int8_t *)aff_head(w, f16_at(x), -f16_at(x + 2));
		for (int j = 0; j < 16; j++) {
			c[j] = (int8_t)((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
			c[j + 16] = (int8_t)((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
		}
		return;
	}
	case QTK_T_IQ4_NL: {
		int8_t *c = (int8_t *)aff_head(w, f16_at(x), 0.f);
		for (int j = 0; j < 16; j++) {
			c[j] = qtk_iq4nl_codebook[x[2 + j] & 0xf];
			c[j + 16] = qtk_iq4nl_codebook[x[2 + j] >> 4];
		}
		return;
	}
	case QTK_T_IQ4_XS: {
		const float d = f16_at(x);
		const unsigned sh = qtk_rd16(x + 2);
		for (int ib = 0; ib < 8; ib++, w += 40) {
			const int ls = (int)(((unsigned)x[4 + ib / 2] >> (4 * (ib % 2))) & 0xf) | (int)(((sh >> (2 * ib)) & 3) << 4);
			const uint8_t *qs = x + 8 + 16 * ib;
			int8_t *c = (int8_t *)aff_head(w, d * (float)(ls - 32), 0.f);
			for (int j = 0; j < 16; j++) {
				c[j] = qtk_iq4nl_codebook[qs[j] & 0xf];
				c[j + 16] = qtk_iq4nl_codebook[qs[j] >> 4];
			}
		}
		return;
	}
	case QTK_T_Q2_K: {
		const uint8_t *sc = x, *q = x + 16;
		const float d = f16_at(x + 80), dmin = f16_at(x + 82);
		int is = 0;
		for (int k = 0; k < 2; k++, q += 32)
			for (int shift = 0; shift < 8; shift += 2)
				for (int hh = 0; hh < 2; hh++, is++, w += 24) {
					aff_head(w, d * (float)(sc[is] & 0xF), dmin * (float)(sc[is] >> 4));
					aff_store(w + 8, (aff_ld(q + 16 * hh) >> shift) & 3);
				}
		return;
	}
	case QTK_T_Q3_K: {
		const uint8_t *hm = x, *q = x + 32, *b = x + 96;
		const float d = f16_at(x + 108);
		int sc[16];
		qtk_q3k_scales(b, sc);
		int is = 0, mb = 0;
		for (int k = 0; k < 2; k++, q += 32)
			for (int shift = 0; shift < 8; shift += 2, mb++)
				for (int hh = 0; hh < 2; hh++, is++, w += 24) {
					aff_head(w, d * (float)(sc[is] - 32), 0.f);
					/* the low bits, less 4 where the high bit is clear (mod 256: the i8) */
					const aff_v16 clear = ~(aff_ld(hm + 16 * hh) >> mb) & 1;
					aff_store(w + 8, ((aff_ld(q + 16 * hh) >> shift) & 3) - (clear << 2));
				}
		return;
	}
	case QTK_T_Q4_K:
	case QTK_T_Q5_K: {
		const bool q5 = type == QTK_T_Q5_K;
		const float d = f16_at(x), dmin = f16_at(x + 2);
		const uint8_t *scales = x + 4, *qh = x + 16, *q = x + (q5 ? 48 : 16);
		for (int j = 0; j < 8; j += 2, w += 80) { /* sub-blocks j and j+1: one 32 bytes' nibbles */
			int sc, m;
			qtk_k4_scale_min(j, scales, &sc, &m);
			aff_head(w, d * (float)sc, dmin * (float)m);
			qtk_k4_scale_min(j + 1, scales, &sc, &m);
			aff_head(w + 40, d * (float)sc, dmin * (float)m);
			for (int hf = 0; hf < 2; hf++) {
				const aff_v16 v = aff_ld(q + 16 * (j / 2) * 2 + 16 * hf);
				aff_v16 lo = v & 15, hi = v >> 4;
				if (q5) {
					const aff_v16 h = aff_ld(qh + 16 * hf);
					lo |= ((h >> j) & 1) << 4;
					hi |= ((h >> (j + 1)) & 1) << 4;
				}
				aff_store(w + 8 + 16 * hf, lo);
				aff_store(w + 48 + 16 * hf, hi);
			}
		}
		return;
	}
	case QTK_T_Q6_K: {
		const float d = f16_at(x + 208);
		for (int n = 0; n < 2; n++) {
			const uint8_t *ql = x + 64 * n, *qh = x + 128 + 32 * n;
			const int8_t *scb = (const int8_t *)(x + 192 + 8 * n);
			for (int k = 0; k < 8; k++, w += 24) { /* values 16k .. 16k+15 of this half */
				aff_head(w, d * (float)scb[k], 0.f);
				const int quarter = k / 2, l0 = 16 * (k % 2); /* 32 values: q1 .. q4 of ggml's loop */
				const aff_v16 lo = aff_ld(ql + l0 + (quarter % 2 ? 32 : 0));
				const aff_v16 nib = quarter < 2 ? lo & 15 : lo >> 4;
				aff_store(w + 8, (nib | ((aff_ld(qh + l0) >> (2 * quarter)) & 3) << 4) - 32);
			}
		}
		return;
	}
	default:
		return;
	}
}

/* Version 3, packed integer layouts whose scheme writes its rows as runs (4-bit AWQ and GPTQ
 * without act-order: scheme.h runs_rows): rows o0 .. o0+n-1 of t (whole parts, or a window's, as
 * t describes them) straight to their runs' writing in form 8. false when t is not such a layout
 * or the rows are not whole packed words (the caller decodes instead). */
static bool int_rows_direct(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, uint8_t *w)
{
	const qtk_scheme *sc = t->layout.kind == QTK_LAYOUT_PLAIN ? NULL : qtk_scheme_of(t);
	return sc && sc->runs_rows && qtk_digest_int_layout(t) && sc->runs_rows(t, parts, o0, n, w) == 0;
}

/* Version 4, MLX matrices whose groups are sub-blocks: 2-D, bits up to 6 (every code fits i8),
 * groups a multiple of 32 (a group of 64 or 128 is two or four sub-blocks with its scale and
 * bias), float scales and biases of one type. 8-bit MLX stays values. */
static bool mlx_aff(const qtk_tensor *t)
{
	const qtk_layout *l = &t->layout;
	if (l->kind != QTK_LAYOUT_MLX || t->ndim != 2 || t->nparts != 3 || l->bits < 2 || l->bits > 6 ||
	    !l->group_size || l->group_size % 32 || t->shape[1] % l->group_size)
		return false;
	const unsigned st = t->parts[1].type;
	return (st == QTK_T_F16 || st == QTK_T_BF16 || st == QTK_T_F32) && t->parts[2].type == st;
}

int qtk_digest_id_family(const char *id, int scheme)
{
	const int v = norm_scheme(scheme);
	if (v < QTK_DIGEST_V3 || !id)
		return 0;
	if (!strncmp(id, "ggml:", 5)) {
		const int ty = qtk_type_by_name(id + 5);
		return ty < 0 ? 0 : plain_int((unsigned)ty) ? 1 : v >= QTK_DIGEST_V4 && qtk_digest_aff_sub((unsigned)ty) ? 2 : 0;
	}
	static const char *const ints[] = {"awq:", "gptq-", "ct-int"};
	for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
		if (!strncmp(id, ints[i], strlen(ints[i])))
			return 1;
	unsigned bits; /* MLX of 2 to 6 bits: "mlx:t<type>:b<bits>:g<group>:..." */
	const char *b = strstr(id, ":b");
	return v >= QTK_DIGEST_V4 && !strncmp(id, "mlx:", 4) && b && sscanf(b, ":b%u", &bits) == 1 && bits >= 2 &&
			       bits <= 6
		       ? 2
		       : 0;
}

unsigned qtk_digest_aff_layout(const qtk_tensor *t)
{
	if (t->layout.kind == QTK_LAYOUT_PLAIN)
		return qtk_digest_aff_sub(t->layout.type);
	return mlx_aff(t) ? 32 : 0;
}

/* Version 4, rows o0 .. o0+n-1 of an MLX matrix (mlx_aff; whole parts, or a window's, as t
 * describes them) straight to their sub-blocks' writing in form 10 (qtk_mlx_subblocks: A the
 * group's scale, M its bias negated, the codes from the bit streams); rows in stored order. */
static bool mlx_rows_w(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, uint8_t *w)
{
	if (!mlx_aff(t))
		return false;
	const qtk_layout *l = &t->layout;
	const uint64_t out = t->shape[0], in = t->shape[1], ng = in / l->group_size;
	const uint64_t ss = t->parts[1].type == QTK_T_F32 ? 4 : 2;
	if (o0 > out || n > out - o0 || out > UINT32_MAX || in > UINT32_MAX || t->parts[0].nbytes != out * in * l->bits / 8 ||
	    t->parts[1].nbytes != out * ng * ss || t->parts[2].nbytes != out * ng * ss)
		return false;
	return !n || !qtk_mlx_subblocks((const uint32_t *)parts[0], parts[1], parts[2], t->parts[1].type, (uint32_t)out,
					(uint32_t)in, l->group_size, l->bits, (uint32_t)o0, (uint32_t)n, w);
}

bool qtk_digest_rows_w(const qtk_tensor *t, const void *const *parts, uint64_t o0, uint64_t n, uint8_t *w)
{
	return int_rows_direct(t, parts, o0, n, w) || mlx_rows_w(t, parts, o0, n, w);
}

/* Version 3, ggml q4_0/q5_0/q8_0 blocks (version 4: and the affine layouts' blocks): each
 * block's runs written straight from its bytes, rows moved whole (Q/K: a row's runs with their
 * scales) before they are hashed. */
static int int_chunk(qtk_thash *h, const uint8_t *src, size_t len)
{
	const uint64_t nb = len / h->bpb, nv = nb * h->blck;
	const size_t rb = h->rb, bw = (size_t)(h->blck / h->rv) * rb; /* bytes a block's runs take */
	pthread_once(&f16_once, f16_init);
	if (h->aff)
		for (uint64_t b = 0; b < nb; b++)
			block_aff(h->t.layout.type, src + b * h->bpb, h->itmp + b * bw);
	else
		for (uint64_t b = 0; b < nb; b++)
			block_run(h->t.layout.type, src + b * h->bpb, h->itmp + b * bw);
	const uint8_t *w = h->itmp;
	if (h->qk_heads > 0) { /* whole heads: a row is row / rv runs */
		const uint64_t rows = h->t.shape[0], row = h->t.n_params / rows, heads = nv / h->unit;
		qtk_family_permute_rows(h->itmp, (uint8_t *)h->iperm, nv / row, (size_t)(row / h->rv) * rb, (int)heads,
					true);
		w = (const uint8_t *)h->iperm;
	}
	return dec_runw(h, w, nv / h->rv);
}

/* Decode and hash len bytes of whole blocks at src (the chunk buffer, or the caller's bytes
 * when a whole chunk arrives at once). */
static int hash_chunk(qtk_thash *h, const uint8_t *src, size_t len)
{
	uint64_t nb = len / h->bpb, nv = nb * h->blck;
	if (len % h->bpb || nv % h->unit)
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "data ends inside a block");
	const uint64_t at = h->dbytes;
	h->dbytes += len;
	if (h->intf || h->aff)
		return int_chunk(h, src, len);
	if (h->t.layout.type == QTK_T_F32 && h->qk_heads <= 0) { /* the bytes are the values */
		if (h->scheme == QTK_DIGEST_V1)
			return md_put(h, h->dec, src, (size_t)nv * sizeof(float));
		if (!((uintptr_t)src % sizeof(float)))
			return dec_vals(h, (const float *)(const void *)src, nv);
	}
	/* version 2: a piece of F16/BF16 values that is its own bytes is hashed once for both tiers */
	if (h->shares && !h->piece_len && h->vdone % V2_PIECE == 0 && (nv == V2_PIECE || h->vdone + nv == h->t.n_params)) {
		const uint8_t form = raw16_form(h->t.layout.type, src, nv);
		if (form) {
			h->vdone += nv;
			if (!h->no_enc && h->elast_part == 0 && h->elast_off == at && h->elast_len == len)
				return dec_piece_put(h, form, h->elast);
			return dec_piece_digest(h, form, src, len);
		}
	}
	if (h->raw16) { /* whole heads: their rows moved as stored, no F32 round trip */
		uint64_t rows = h->t.shape[0], row = h->t.n_params / rows;
		qtk_family_permute_rows(src, (uint8_t *)h->perm, nv / row, row * 2, (int)(nv / h->unit), true);
		return dec_vals(h, h->perm, nv);
	}
	if (decode_fast(h->t.layout.type, src, h->vals, nv) &&
	    qtk_dequant_ggml(h->t.layout.type, src, h->vals, nv) != 0)
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "cannot decode this type");
	const float *v = h->vals;
	if (h->qk_heads > 0) {
		uint64_t rows = h->t.shape[0], row = h->t.n_params / rows;
		unpermute(h->vals, h->perm, nv, h->unit, row);
		v = h->perm;
	}
	return dec_vals(h, v, nv);
}

static int flush_chunk(qtk_thash *h)
{
	if (!h->chunk_len)
		return 0;
	size_t len = h->chunk_len;
	h->chunk_len = 0;
	return hash_chunk(h, h->chunk, len);
}

int qtk_thash_put(qtk_thash *h, const void *bytes, size_t n)
{
	const uint8_t *p = bytes;
	while (n) {
		if (h->part >= h->t.nparts)
			return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "more data than described");
		size_t k = n < h->part_left ? n : (size_t)h->part_left;
		/* version 2: the encoded tier's pieces are finished as the decoded tier reaches them */
		if (h->shares && h->want_dec && !h->no_enc && k > V2_CHUNK - h->ech_len)
			k = V2_CHUNK - (size_t)h->ech_len;
		int rc = enc_data(h, p, k);
		if (rc)
			return rc;
		if (!h->want_dec) {
		} else if (h->dk == QTK_DEC_VALUES && h->t.layout.kind == QTK_LAYOUT_PLAIN) {
			size_t done = 0;
			while (done < k && !rc) {
				if (!h->chunk_len && k - done >= h->chunk_cap) { /* a whole chunk: no copy */
					rc = hash_chunk(h, p + done, h->chunk_cap);
					done += h->chunk_cap;
					continue;
				}
				size_t c = h->chunk_cap - h->chunk_len;
				if (c > k - done)
					c = k - done;
				memcpy(h->chunk + h->chunk_len, p + done, c);
				h->chunk_len += c;
				done += c;
				if (h->chunk_len == h->chunk_cap)
					rc = flush_chunk(h);
			}
		} else if (h->dk == QTK_DEC_VALUES) {
			uint64_t at = h->t.parts[h->part].nbytes - h->part_left;
			memcpy(h->pbuf[h->part] + at, p, k);
		}
		if (rc)
			return rc;
		p += k;
		n -= k;
		h->part_left -= k;
		h->total += k;
		if (!h->part_left && (rc = advance(h)))
			return rc;
	}
	return 0;
}

/* AWQ/GPTQ values in slices of output features (rows of the decode, hashed in order), each slice
 * `align` rows (whole packed words, and whole heads when un-permuting: hd rows a head) or a
 * multiple: memory is a slice (two with heads), not the tensor as F32. */
static int quant_values_sliced(qtk_thash *h, uint32_t align, uint32_t hd)
{
	const qtk_tensor *t = &h->t;
	uint32_t out = (uint32_t)qtk_tensor_rows(t), in = (uint32_t)qtk_tensor_cols(t);
	uint64_t rows = ((uint64_t)4 << 20) / (in ? in : 1) / align * align; /* ~16 MiB of F32 */
	if (rows < align)
		rows = align;
	if (rows > out)
		rows = out;
	/* 4-bit AWQ/GPTQ (version 4: and MLX's sub-blocks): the runs written straight from the
	 * parts, rows moved whole */
	const uint64_t rruns = in / RUN; /* versions 3 and 4: runs per row (of 32 values) */
	const size_t rb = h->rb;
	if ((h->intf || h->aff) && qtk_digest_rows_w(t, (const void *const *)h->pbuf, 0, 0, NULL)) {
		uint8_t *wb = qtk_malloc((size_t)(rows * rruns) * rb), *wp = hd ? qtk_malloc((size_t)(rows * rruns) * rb) : NULL;
		int rc = wb && (!hd || wp) ? 0 : oom(h->err, h->stored);
		for (uint32_t o0 = 0; o0 < out && !rc; o0 += (uint32_t)rows) {
			uint32_t n = out - o0 < rows ? out - o0 : (uint32_t)rows;
			if (!qtk_digest_rows_w(t, (const void *const *)h->pbuf, o0, n, wb)) {
				rc = qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "inconsistent quantized components");
				break;
			}
			const uint8_t *wr = wb;
			if (hd) {
				qtk_family_permute_rows(wb, wp, n, rruns * rb, (int)(n / hd), true);
				wr = wp;
			}
			rc = dec_runw(h, wr, (uint64_t)n * rruns);
		}
		qtk_free(wb);
		qtk_free(wp);
		return rc;
	}
	if (h->aff) /* version 4's sub-blocks are only ever written from the parts */
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "inconsistent quantized components");
	if (!(h->vals = qtk_malloc((size_t)rows * in * sizeof(float))) ||
	    (hd && !(h->perm = qtk_malloc((size_t)rows * in * sizeof(float)))))
		return oom(h->err, h->stored);
	if (h->intf && !(h->iperm = qtk_malloc((size_t)(rows * rruns) * 2 * sizeof *h->iperm + 4)))
		return oom(h->err, h->stored);
	int rc = 0;
	for (uint32_t o0 = 0; o0 < out && !rc; o0 += (uint32_t)rows) {
		uint32_t n = out - o0 < rows ? out - o0 : (uint32_t)rows;
		uint32_t *sc = h->intf ? h->iperm + rows * rruns : NULL;
		int r = h->intf ? qtk_digest_int_rows(t, (const void *const *)h->pbuf, o0, n, h->vals, sc, &h->iscr)
				: qtk_scheme_decode_rows(t, (const void *const *)h->pbuf, o0, n, h->vals);
		if (r)
			return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "inconsistent quantized components");
		const float *v = h->vals;
		const uint32_t *s = sc;
		if (hd) { /* whole heads: un-permuted within the slice */
			unpermute(h->vals, h->perm, (uint64_t)n * in, (uint64_t)hd * in, in);
			v = h->perm;
			if (h->intf) {
				qtk_family_permute_rows((const uint8_t *)sc, (uint8_t *)h->iperm, n, rruns * sizeof *sc,
							(int)(n / hd), true);
				s = h->iperm;
			}
		}
		rc = h->intf ? dec_runs(h, v, s, (uint64_t)n * in) : dec_vals(h, v, (uint64_t)n * in);
	}
	return rc;
}

static int quant_values(qtk_thash *h)
{
	const qtk_tensor *t = &h->t;
	/* slices need whole packed words on both sides: out a multiple of 32 (8 for AWQ), and
	 * whole heads when un-permuting */
	const qtk_scheme *sc = qtk_scheme_of(t);
	if (!sc)
		return qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "not a packed tensor");
	const uint64_t out64 = qtk_tensor_rows(t);
	uint64_t hd = 0, align = sc->row_align ? (uint64_t)sc->row_align : 1;
	if (h->qk_heads > 0 && out64 % (uint64_t)h->qk_heads == 0) {
		hd = out64 / (uint64_t)h->qk_heads;
		align = qtk_lcm_u64(align, hd);
	}
	if ((h->qk_heads <= 0 || hd) && align <= out64 && out64 % align == 0)
		return quant_values_sliced(h, (uint32_t)align, (uint32_t)hd);
	if (h->intf || h->aff) /* one slice of every row */
		return out64 > UINT32_MAX || (h->qk_heads > 0 && !hd)
			       ? qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "rows do not split into %d heads", h->qk_heads)
			       : quant_values_sliced(h, (uint32_t)out64, (uint32_t)hd);
	if (t->n_params > SIZE_MAX / sizeof(float))
		return oom(h->err, h->stored);
	h->vals = qtk_malloc(t->n_params ? (size_t)t->n_params * sizeof(float) : 1);
	if (!h->vals)
		return oom(h->err, h->stored);
	uint32_t out = (uint32_t)qtk_tensor_rows(t), in = (uint32_t)qtk_tensor_cols(t);
	int r = qtk_scheme_decode_rows(t, (const void *const *)h->pbuf, 0, out, h->vals);
	if (r)
		return qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "inconsistent quantized components");
	const float *v = h->vals;
	if (h->qk_heads > 0) {
		uint64_t unit = (uint64_t)out / (uint64_t)h->qk_heads * in;
		if (!(h->perm = qtk_malloc((size_t)t->n_params * sizeof(float))))
			return oom(h->err, h->stored);
		unpermute(h->vals, h->perm, t->n_params, unit, in);
		v = h->perm;
	}
	return dec_vals(h, v, t->n_params);
}

int qtk_thash_end(qtk_thash *h, qtk_leaf *leaf)
{
	int rc = advance(h);
	if (!rc && h->part < h->t.nparts)
		rc = qtk_err_set(h->err, QTK_E_DATA, NULL, -1, h->stored, "tensor data missing: %llu bytes short",
				 (unsigned long long)h->part_left);
	if (!rc && h->dk == QTK_DEC_VALUES && h->want_dec)
		rc = h->t.layout.kind == QTK_LAYOUT_PLAIN ? flush_chunk(h) : quant_values(h);
	if (!rc && h->dk == QTK_DEC_VALUES && h->want_dec)
		rc = dec_end(h);
	unsigned len = 0;
	memset(leaf, 0, sizeof *leaf);
	if (!rc && (EVP_DigestFinal_ex(h->enc, leaf->enc, &len) != 1 || len != 32))
		rc = qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "SHA-256 failed");
	if (!rc && h->dk == QTK_DEC_RAW) {
		rc = md_tag(h, h->dec, TAG_RAW[vidx(h->scheme)]);
		rc = rc ? rc : md_put(h, h->dec, leaf->enc, 32);
	}
	if (!rc && (h->want_dec || h->dk == QTK_DEC_RAW) &&
	    (EVP_DigestFinal_ex(h->dec, leaf->dec, &len) != 1 || len != 32))
		rc = qtk_err_set(h->err, QTK_E_INTERNAL, NULL, -1, h->stored, "SHA-256 failed");
	if (!rc) {
		leaf->name = h->canon;
		leaf->stored = h->stored;
		h->canon = h->stored = NULL;
		if (!(leaf->enc_id = qtk_intern(h->enc_id)))
			rc = oom(h->err, NULL);
		leaf->ndim = h->t.ndim;
		memcpy(leaf->shape, h->t.shape, sizeof leaf->shape);
		leaf->n_bytes = h->total;
		leaf->has_enc = !h->no_enc;
		leaf->dec_kind = h->dk;
		leaf->has_dec = h->want_dec || h->dk == QTK_DEC_RAW;
		leaf->qk_heads = h->dk == QTK_DEC_VALUES ? h->qk_heads : 0;
	}
	qtk_thash_free(h);
	return rc;
}

/* ---- decoded leaf from values -------------------------------------------------------- */

struct qtk_vhash {
	qtk_thash h;     /* its dec digest and error fields, for md_* */
	uint64_t left;   /* values still expected */
	uint64_t cols;   /* values per row */
	uint64_t hrows;  /* rows per Q/K head when the rows are stored permuted, else 0 */
	float *perm;     /* a piece un-permuted */
	uint64_t pcap;
	uint32_t *sperm; /* version 3, integer layouts: its scales un-permuted */
	uint64_t scap;
};

void qtk_vhash_free(qtk_vhash *v)
{
	if (!v)
		return;
	EVP_MD_CTX_free(v->h.dec);
	qtk_free(v->h.piece);
	qtk_free(v->h.form);
	qtk_free(v->h.stored);
	qtk_free(v->h.pend);
	qtk_free(v->h.ik);
	qtk_free(v->h.is);
	qtk_free(v->h.iw);
	qtk_free(v->perm);
	qtk_free(v->sperm);
	qtk_free(v);
}

static int vhash_new(const qtk_model *m, const qtk_tensor *t, int scheme, qtk_vhash **out, qtk_err *err)
{
	*out = NULL;
	qtk_leaf meta;
	int rc = qtk_digest_leaf_meta(m, t, &meta, err);
	if (rc)
		return rc;
	const uint64_t rows = t->ndim >= 1 ? t->shape[0] : 0;
	/* version 4's ggml affine layouts hash their blocks' writings, never values: not for a vhash
	 * (MLX's sub-blocks come written: qtk_vhash_put_runw) */
	const bool v4 = norm_scheme(scheme) >= QTK_DIGEST_V4;
	const bool aff = v4 && t->layout.kind == QTK_LAYOUT_PLAIN && qtk_digest_aff_sub(t->layout.type);
	if (meta.dec_kind != QTK_DEC_VALUES || t->ndim < 0 || t->ndim > QTK_MAX_DIMS || aff ||
	    (meta.qk_heads > 0 && (t->ndim != 2 || !rows || rows % (2 * (uint64_t)meta.qk_heads))))
		rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "values are not hashed in stored order");
	qtk_vhash *v = rc ? NULL : qtk_calloc(1, sizeof *v);
	if (!rc && !v)
		rc = oom(err, t->name);
	if (!rc) {
		v->h.err = err;
		v->h.scheme = norm_scheme(scheme);
		v->h.intf = v->h.scheme >= QTK_DIGEST_V3 && qtk_digest_int_layout(t);
		runs_geom(&v->h, v4 && mlx_aff(t) ? 32 : 0);
		v->h.t.ndim = t->ndim;
		memcpy(v->h.t.shape, t->shape, sizeof t->shape);
		v->h.stored = meta.stored;
		meta.stored = NULL;
		v->left = t->n_params;
		v->cols = rows ? t->n_params / rows : 0;
		v->hrows = meta.qk_heads > 0 ? rows / (uint64_t)meta.qk_heads : 0;
		v->h.dec = EVP_MD_CTX_new();
		if (!v->h.dec || EVP_DigestInit_ex(v->h.dec, EVP_sha256(), NULL) != 1)
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot initialise SHA-256");
	}
	rc = rc ? rc : md_dec_header(&v->h, meta.name, t->n_params);
	qtk_free(meta.name);
	qtk_free(meta.stored);
	if (rc) {
		qtk_vhash_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

int qtk_vhash_new(const qtk_model *m, const qtk_tensor *t, qtk_vhash **out, qtk_err *err)
{
	return vhash_new(m, t, 0, out, err);
}

uint64_t qtk_vhash_head_rows(const qtk_vhash *v) { return v->hrows; }

bool qtk_vhash_int(const qtk_vhash *v) { return v->h.intf || v->h.aff; }

/* Make room for n values (and their runs' scales) un-permuted. */
static int vhash_room(qtk_vhash *v, uint64_t n)
{
	if (n > v->pcap) {
		qtk_free(v->perm);
		v->pcap = 0;
		if (n > SIZE_MAX / sizeof(float) || !(v->perm = qtk_malloc((size_t)n * sizeof(float))))
			return oom(v->h.err, v->h.stored);
		v->pcap = n;
	}
	if (v->h.intf && n / RUN > v->scap) {
		qtk_free(v->sperm);
		v->scap = 0;
		if (!(v->sperm = qtk_malloc((size_t)(n / RUN) * sizeof *v->sperm)))
			return oom(v->h.err, v->h.stored);
		v->scap = n / RUN;
	}
	return 0;
}

/* n values stored in GGUF's Q/K order come in whole heads (*unit values each): room to
 * un-permute them (perm: n floats, or their runs' writing, 36 bytes per 32; sperm: their scales). */
static int vhash_heads(qtk_vhash *v, uint64_t n, uint64_t *unit)
{
	*unit = v->hrows * v->cols;
	if (n % *unit)
		return qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "values not in whole heads");
	return vhash_room(v, n);
}

int qtk_vhash_put_runs(qtk_vhash *v, const float *k, const uint32_t *s, uint64_t n)
{
	if (!v->h.intf || n > v->left || n % RUN || (v->cols && v->cols % RUN))
		return qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "values are not runs of this tensor");
	uint64_t unit;
	if (v->hrows) { /* stored in GGUF's Q/K order: whole heads, un-permuted */
		int rc = vhash_heads(v, n, &unit);
		if (rc)
			return rc;
		unpermute(k, v->perm, n, unit, v->cols);
		qtk_family_permute_rows((const uint8_t *)s, (uint8_t *)v->sperm, n / v->cols, v->cols / RUN * sizeof *s,
					(int)(n / unit), true);
		k = v->perm;
		s = v->sperm;
	}
	v->left -= n;
	return dec_runs(&v->h, k, s, n);
}

/* Versions 3 and 4, runs already written (form 8, or version 4's MLX sub-blocks in form 10; rows
 * in stored order): nruns of them, whole heads as qtk_vhash_put_runs takes them. */
int qtk_vhash_put_runw(qtk_vhash *v, const uint8_t *w, uint64_t nruns)
{
	const uint64_t n = nruns * RUN, rb = v->h.rb;
	if (!(v->h.intf || v->h.aff) || n > v->left || (v->cols && v->cols % RUN))
		return qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "values are not runs of this tensor");
	uint64_t unit;
	if (v->hrows) { /* whole heads, un-permuted: a row is cols / 32 runs */
		int rc = vhash_heads(v, n, &unit);
		if (rc)
			return rc;
		qtk_family_permute_rows(w, (uint8_t *)v->perm, n / v->cols, (size_t)(v->cols / RUN * rb), (int)(n / unit), true);
		w = (const uint8_t *)v->perm;
	}
	v->left -= n;
	return dec_runw(&v->h, w, nruns);
}

int qtk_vhash_put(qtk_vhash *v, const float *x, uint64_t n)
{
	if (v->h.intf || v->h.aff)
		return qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "integer layout hashed as values");
	if (n > v->left)
		return qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "more values than the tensor holds");
	uint64_t unit;
	if (v->hrows) { /* stored in GGUF's Q/K order: whole heads, un-permuted */
		int rc = vhash_heads(v, n, &unit);
		if (rc)
			return rc;
		unpermute(x, v->perm, n, unit, v->cols);
		x = v->perm;
	}
	v->left -= n;
	return dec_vals(&v->h, x, n);
}

int qtk_vhash_end(qtk_vhash *v, uint8_t dec[32])
{
	unsigned len = 0;
	int rc = 0;
	if (v->left)
		rc = qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "%llu values missing",
				 (unsigned long long)v->left);
	rc = rc ? rc : dec_end(&v->h);
	if (!rc && (EVP_DigestFinal_ex(v->h.dec, dec, &len) != 1 || len != 32))
		rc = qtk_err_set(v->h.err, QTK_E_INTERNAL, NULL, -1, v->h.stored, "SHA-256 failed");
	qtk_vhash_free(v);
	return rc;
}

/* ---- leaves, roots ------------------------------------------------------------------ */

void qtk_digests_free(qtk_digests *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n && d->leaf; i++) {
		qtk_free(d->leaf[i].name);
		qtk_free(d->leaf[i].stored);
		qtk_free(d->leaf[i].bad_msg);
	}
	qtk_free(d->leaf);
	qtk_free(d->of_tensor);
	memset(d, 0, sizeof *d);
}

static int leaf_cmp(const void *a, const void *b)
{
	const qtk_leaf *x = a, *y = b;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static int root_of(const qtk_digests *d, const char *tag, bool dec, uint8_t out[32])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t cnt[8];
	unsigned len = 0;
	qtk_wr64(cnt, d->n);
	int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
		 EVP_DigestUpdate(md, tag, strlen(tag) + 1) == 1 && EVP_DigestUpdate(md, cnt, 8) == 1;
	for (size_t i = 0; i < d->n && ok; i++)
		ok = EVP_DigestUpdate(md, dec ? d->leaf[i].dec : d->leaf[i].enc, 32) == 1;
	ok = ok && EVP_DigestFinal_ex(md, out, &len) == 1 && len == 32;
	EVP_MD_CTX_free(md);
	return ok ? 0 : -1;
}

/* The collision message, one for every caller. */
static int canon_collision(qtk_err *err, const char *canon, const char *a, const char *b)
{
	return qtk_err_set(err, QTK_E_DATA, NULL, -1, canon, "two tensors have this canonical name ('%s' and '%s')", a,
			   b);
}

int qtk_canon_unique(const qtk_model *m, qtk_err *err)
{
	qtk_leaf *l = qtk_calloc(m->ntensors ? m->ntensors : 1, sizeof *l);
	if (!l)
		return oom(err, NULL);
	int rc = 0;
	for (size_t i = 0; i < m->ntensors && !rc; i++) {
		char canon[QTK_CAP_NAME + 64];
		int qk;
		if (qtk_canon_name(m, m->tensors[i].name, canon, sizeof canon, &qk) < 0)
			rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, m->tensors[i].name, "name too long");
		else if (!(l[i].name = qtk_strdup(canon)))
			rc = oom(err, NULL);
		l[i].stored = m->tensors[i].name; /* borrowed */
	}
	if (!rc && m->ntensors)
		qsort(l, m->ntensors, sizeof *l, leaf_cmp);
	for (size_t i = 1; i < m->ntensors && !rc; i++)
		if (!strcmp(l[i].name, l[i - 1].name))
			rc = canon_collision(err, l[i].name, l[i - 1].stored, l[i].stored);
	for (size_t i = 0; i < m->ntensors; i++)
		qtk_free(l[i].name);
	qtk_free(l);
	return rc;
}

static bool leaves_sorted(const qtk_digests *d)
{
	for (size_t i = 1; i < d->n; i++)
		if (leaf_cmp(&d->leaf[i - 1], &d->leaf[i]) >= 0)
			return false;
	return true;
}

int qtk_digests_finish(qtk_digests *d, qtk_err *err)
{
	/* sorted leaves stay where they are: a description's (qtk_digest_describe) are pointed at */
	if (d->n && !leaves_sorted(d))
		qsort(d->leaf, d->n, sizeof *d->leaf, leaf_cmp);
	d->bytes = 0;
	d->n_permuted = 0;
	d->complete = true;
	for (size_t i = 0; i < d->n; i++) {
		if (!d->leaf[i].name)
			return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "leaf %zu not computed", i);
		if (i && !strcmp(d->leaf[i].name, d->leaf[i - 1].name))
			return canon_collision(err, d->leaf[i].name, d->leaf[i - 1].stored, d->leaf[i].stored);
		d->bytes += d->leaf[i].n_bytes;
		d->complete = d->complete && d->leaf[i].has_enc && d->leaf[i].has_dec;
		d->n_permuted += d->leaf[i].qk_heads > 0;
	}
	if (root_of(d, TAG_ROOT_ENC[vidx(d->scheme)], false, d->enc_root) ||
	    root_of(d, TAG_ROOT_DEC[vidx(d->scheme)], true, d->dec_root))
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "SHA-256 failed");
	return 0;
}

const qtk_leaf *qtk_digests_find(const qtk_digests *d, const char *canon)
{
	size_t lo = 0, hi = d->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(d->leaf[mid].name, canon);
		if (!c)
			return &d->leaf[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- whole models ---------------------------------------------------------------------- */

typedef struct djob {
	qtk_model *m;
	const qtk_digest_opts *o;
	qtk_digests *d;
	bool into;               /* d is a description of m (qtk_digest_model_into) */
	size_t *order;           /* tensors, largest first */
	pthread_mutex_t mu;      /* reads, errors, progress */
	size_t fail_at;          /* lowest failing tensor index, SIZE_MAX when none */
	qtk_err err;
	uint64_t done, total;
	const bool *tapped;      /* NULL, or the tensors hashed from their file's read (ftap) */
} djob;

static void note_fail(djob *j, size_t i, const qtk_err *e)
{
	pthread_mutex_lock(&j->mu);
	if (i < j->fail_at) {
		j->fail_at = i;
		j->err = *e;
	}
	pthread_mutex_unlock(&j->mu);
}

static int read_chunk(djob *j, const qtk_tensor *t, int p, uint64_t off, uint8_t *buf, size_t k, qtk_err *e)
{
	pthread_mutex_lock(&j->mu);
	int rc = 0;
	if (j->o && j->o->cancel && __atomic_load_n(j->o->cancel, __ATOMIC_RELAXED))
		rc = qtk_err_set(e, QTK_E_IO, NULL, -1, t->name, "cancelled");
	/* errors into e: with a pread source the caller's own reads may go on beside these */
	if (!rc && j->m->fmt && j->m->fmt->read)
		qtk_err_clear(&j->m->err);
	rc = rc ? rc : qtk_read_part_to(j->m, t, p, off, buf, k, e);
	if (!rc) {
		j->done += k;
		if (j->o && j->o->progress_named)
			j->o->progress_named(j->o->progress_ctx, t->name, j->done, j->total);
		else if (j->o && j->o->progress)
			j->o->progress(j->o->progress_ctx, j->done, j->total);
	}
	pthread_mutex_unlock(&j->mu);
	return rc;
}

/* The decoded leaf of a packed matrix read in windows of rows (reads under the job's lock, as
 * read_chunk's), decoded and hashed in order: memory is a window, not the tensor's parts (two
 * digest threads on a 70B model's largest AWQ matrix held 2 x 112 MiB). 1 when the tensor is
 * not such a matrix (the caller hashes it whole), 0, or an error status into e. */
static int packed_dec(djob *j, const qtk_tensor *t, uint8_t dec[32], qtk_err *e)
{
	const qtk_scheme *sc = qtk_scheme_of(t);
	if (t->ndim != 2 || t->layout.kind == QTK_LAYOUT_PLAIN || !sc || !t->shape[0] || !t->shape[1] ||
	    t->shape[1] > (1u << 30))
		return 1;
	qtk_vhash *vh;
	qtk_err ve; /* a matrix vhash does not take is hashed whole: no error of the tensor's */
	qtk_err_clear(&ve);
	if (vhash_new(j->m, t, j->o ? j->o->scheme : 0, &vh, &ve))
		return 1;
	const uint64_t rows = t->shape[0], in = t->shape[1], hr = qtk_vhash_head_rows(vh);
	uint64_t align = qtk_lcm_u64(sc->row_align ? sc->row_align : 1, hr ? hr : 1);
	uint64_t want = CHUNK_VALUES * 4 / in / align * align;
	want = want < align ? align : want > rows ? rows : want;
	if (align > rows || rows % align || want * in > MAX_UNIT_VALUES) {
		qtk_vhash_free(vh);
		return 1;
	}
	/* version 3, integer layouts: the window as runs (the scales of 1 kept between windows) */
	const bool runs = qtk_vhash_int(vh);
	/* 4-bit AWQ/GPTQ (and version 4's MLX sub-blocks): the runs written straight from the
	 * window's parts */
	const bool direct = runs && qtk_digest_rows_w(t, NULL, 0, 0, NULL);
	if (runs && vh->h.aff && !direct) { /* never as values: hashed whole (and refused) instead */
		qtk_vhash_free(vh);
		return 1;
	}
	float *vals = qtk_malloc((size_t)(want * in) * sizeof *vals);
	uint8_t *rw = direct ? qtk_malloc((size_t)(want * (in / RUN)) * vh->h.rb) : NULL;
	uint32_t *rsc = runs ? qtk_malloc((size_t)(want * (in / RUN)) * sizeof *rsc + 4) : NULL;
	qtk_int_scratch scr = {NULL, 0, 0};
	/* the packed rows of several decoding windows are read at once, up to 16 MiB of them: a
	 * window of rows is a column band of AWQ's and GPTQ's qweight, one read per input row, so
	 * a taller band takes as many reads for more rows */
	const uint64_t rbytes = t->n_bytes / rows + 1;
	uint64_t k = ((uint64_t)16 << 20) / (want * rbytes);
	k = k < 1 ? 1 : k > 16 ? 16 : k;
	qtk_pwin pw;
	qtk_pwin_init(&pw, j->m, t, want * k);
	int rc = vals && (!runs || rsc) && (!direct || rw) ? 0 : oom(e, t->name);
	for (uint64_t o0 = 0, got = 0; o0 < rows && !rc; o0 += got) {
		const uint64_t n = rows - o0 < want ? rows - o0 : want;
		pthread_mutex_lock(&j->mu);
		if (j->o && j->o->cancel && __atomic_load_n(j->o->cancel, __ATOMIC_RELAXED))
			rc = qtk_err_set(e, QTK_E_IO, NULL, -1, t->name, "cancelled");
		/* qtk_pwin reports into the model's error, copied out under the lock; cleared first (the
		 * first error wins) where read_chunk clears it: a source read through its format, hashed
		 * before the conversion. A pread source's model error is left alone, as the converter's
		 * own reads may go on beside these. */
		if (!rc) {
			if (j->m->fmt && j->m->fmt->read)
				qtk_err_clear(&j->m->err);
			if ((rc = qtk_pwin_load(&pw, o0, n, &got)))
				*e = j->m->err;
		}
		pthread_mutex_unlock(&j->mu);
		if (!rc && (got != n || (hr && got % hr)))
			rc = qtk_err_set(e, QTK_E_INTERNAL, NULL, -1, t->name, "row window out of step");
		if (!rc && direct) {
			if (!qtk_digest_rows_w(&pw.sub, (const void *const *)pw.buf, o0 - pw.w0, got, rw))
				rc = qtk_err_set(e, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
			else if ((rc = qtk_vhash_put_runw(vh, rw, got * (in / RUN))))
				*e = ve;
			continue;
		}
		if (!rc && (runs ? qtk_digest_int_rows(&pw.sub, (const void *const *)pw.buf, o0 - pw.w0, got, vals, rsc, &scr)
				 : qtk_scheme_decode_rows(&pw.sub, (const void *const *)pw.buf, o0 - pw.w0, got, vals)))
			rc = qtk_err_set(e, QTK_E_DATA, NULL, -1, t->name, "inconsistent quantized components");
		if (!rc && (rc = runs ? qtk_vhash_put_runs(vh, vals, rsc, got * in) : qtk_vhash_put(vh, vals, got * in)))
			*e = ve;
	}
	qtk_pwin_free(&pw);
	qtk_int_scratch_free(&scr);
	qtk_free(rsc);
	qtk_free(rw);
	qtk_free(vals);
	if (rc) {
		qtk_vhash_free(vh);
		return rc;
	}
	if ((rc = qtk_vhash_end(vh, dec)))
		*e = ve;
	return rc;
}

/* Tensor i's leaf from its finished hash h (and pdec, when not NULL, its decoded tier made
 * apart): the whole leaf into its slot, or, into a description, only the digests, once the
 * hash is seen to be of the tensor described. */
static int leaf_end(djob *j, size_t i, qtk_thash *h, const uint8_t *pdec, qtk_err *e)
{
	qtk_leaf t, *l = j->into ? &j->d->leaf[j->d->of_tensor[i]] : &j->d->leaf[i];
	int rc = qtk_thash_end(h, j->into ? &t : l);
	if (rc || !j->into) {
		if (!rc && pdec) {
			memcpy(l->dec, pdec, 32);
			l->has_dec = true;
		}
		return rc;
	}
	if (strcmp(t.name, l->name) || strcmp(t.stored, l->stored) || t.enc_id != l->enc_id ||
	    t.n_bytes != l->n_bytes || t.ndim != l->ndim || memcmp(t.shape, l->shape, sizeof t.shape) ||
	    t.dec_kind != l->dec_kind || t.qk_heads != l->qk_heads) {
		rc = qtk_err_set(e, QTK_E_DATA, NULL, -1, t.stored,
				 "the tensor read is not the one described before (did the file change?)");
	} else {
		memcpy(l->enc, t.enc, 32);
		memcpy(l->dec, pdec ? pdec : t.dec, 32);
		l->has_enc = t.has_enc;
		l->has_dec = t.has_dec || pdec;
	}
	qtk_free(t.name);
	qtk_free(t.stored);
	return rc;
}

/* Tensor i's hashing ended with rc (e its error): a failure noted, or with keep_going a data
 * error turned into a leaf marked bad. */
static void leaf_done(djob *j, size_t i, int rc, qtk_err *e)
{
	const qtk_tensor *t = &j->m->tensors[i];
	if (rc == QTK_E_DATA && j->o && j->o->keep_going) {
		qtk_leaf *l = &j->d->leaf[i];
		qtk_err e2;
		qtk_err_clear(&e2);
		if (qtk_digest_leaf_meta(j->m, t, l, &e2)) {
			note_fail(j, i, &e2);
			return;
		}
		l->bad = true;
		l->bad_msg = qtk_strndup(e->msg, 180);
		return;
	}
	if (rc) {
		if (!e->subject[0])
			snprintf(e->subject, sizeof e->subject, "%s", t->name);
		if (!e->code)
			e->code = rc;
		note_fail(j, i, e);
	}
}

static void digest_one(void *ctx, size_t k)
{
	djob *j = ctx;
	size_t i = j->order[k];
	pthread_mutex_lock(&j->mu);
	bool skip = i > j->fail_at || (j->tapped && j->tapped[i]);
	pthread_mutex_unlock(&j->mu);
	if (skip)
		return;
	if (j->o && j->o->select && !j->o->select[i]) { /* described only (into: already) */
		qtk_err e0;
		qtk_err_clear(&e0);
		if (!j->into && qtk_digest_leaf_meta(j->m, &j->m->tensors[i], &j->d->leaf[i], &e0))
			note_fail(j, i, &e0);
		return;
	}
	qtk_err e;
	qtk_err_clear(&e);
	const qtk_tensor *t = &j->m->tensors[i];
	int heads = 0;
	qtk_thash *h = NULL;
	uint8_t *buf = NULL;
	int rc = qtk_family_qk_heads(j->m, t, &heads, &e);
	/* packed matrices: the encoded tier from the bytes, the decoded one window by window */
	uint8_t pdec[32];
	const int pk = rc || (j->o && j->o->enc_only) ? 1 : packed_dec(j, t, pdec, &e);
	if (pk < 0)
		rc = pk;
	rc = rc ? rc : thash_new(j->m, t, heads, pk == 1 && !(j->o && j->o->enc_only), j->o ? j->o->scheme : 0, &h, &e);
	if (!rc && !(buf = qtk_malloc(READ_BYTES)))
		rc = oom(&e, t->name);
	for (int p = 0; p < t->nparts && !rc; p++)
		for (uint64_t off = 0; off < t->parts[p].nbytes && !rc; off += READ_BYTES) {
			uint64_t left = t->parts[p].nbytes - off;
			size_t n = left < READ_BYTES ? (size_t)left : READ_BYTES;
			rc = read_chunk(j, t, p, off, buf, n, &e);
			rc = rc ? rc : qtk_thash_put(h, buf, n);
		}
	if (!rc) {
		rc = leaf_end(j, i, h, pk == 0 ? pdec : NULL, &e);
		h = NULL;
	}
	qtk_thash_free(h);
	qtk_free(buf);
	leaf_done(j, i, rc, &e);
}

/* ---- a file's SHA-256 and its tensors' leaves from one read ----
 * With qtk_digest_opts.file_sha, each file is read once, in order, for its SHA-256, and the
 * tensors stored as one plain byte range of it (no packed matrices read in windows, no format
 * reader, no views; not overlapping another such tensor) are hashed from the same buffers on
 * the tap's thread, one after another in file order: the same leaves as digest_one's (both feed
 * qtk_thash the tensor's bytes in order). The pool hashes the others beside it. */
typedef struct {
	size_t i;
	uint64_t start, end;
} ftensor;

typedef struct {
	djob *j;
	ftensor *t;
	uint64_t *cuts; /* where reads begin: the starts of the tensors of a piece or more */
	size_t ncuts;
	size_t n, cur;
	qtk_thash *h; /* the current tensor's, once its first bytes came */
	bool begun;
	int rc;       /* the current tensor's status */
	qtk_err e;
} ftap;

/* A tensor of the plan with its file: sorted by (file, start, index). */
typedef struct {
	uint32_t f;
	ftensor x;
} fplan;

static int by_file_start(const void *a, const void *b)
{
	const fplan *p = a, *q = b;
	if (p->f != q->f)
		return p->f < q->f ? -1 : 1;
	if (p->x.start != q->x.start)
		return p->x.start < q->x.start ? -1 : 1;
	return p->x.i < q->x.i ? -1 : p->x.i > q->x.i;
}

/* The tensors each file's read can hash (fts[f], sorted by offset; tapped[] marks them): one
 * pass over the tensors and one sort, whatever the number of files and their order. */
static int ftap_plan(djob *j, ftap *fts, bool *tapped, qtk_err *err)
{
	qtk_model *m = j->m;
	for (uint32_t f = 0; f < m->nfiles; f++) {
		memset(&fts[f], 0, sizeof fts[f]);
		fts[f].j = j;
	}
	if (m->fmt && m->fmt->read)
		return 0;
	fplan *pl = qtk_calloc(m->ntensors ? m->ntensors : 1, sizeof *pl);
	if (!pl)
		return oom(err, NULL);
	size_t k = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		const qtk_part *p = &t->parts[0];
		uint64_t end;
		if (t->nparts != 1 || t->view || p->file >= m->nfiles || !p->nbytes || (j->o->select && !j->o->select[i]) ||
		    (t->layout.kind != QTK_LAYOUT_PLAIN && qtk_scheme_of(t)) || !qtk_add_u64(p->offset, p->nbytes, &end) ||
		    end > m->file_sizes[p->file])
			continue;
		pl[k++] = (fplan){(uint32_t)p->file, {i, p->offset, end}};
	}
	if (k > 1)
		qsort(pl, k, sizeof *pl, by_file_start);
	/* tensors sharing bytes are left to the pool */
	size_t w = 0;
	for (size_t a = 0; a < k;) {
		size_t b = a + 1;
		uint64_t end = pl[a].x.end;
		while (b < k && pl[b].f == pl[a].f && pl[b].x.start < end) {
			end = pl[b].x.end > end ? pl[b].x.end : end;
			b++;
		}
		if (b == a + 1)
			pl[w++] = pl[a];
		a = b;
	}
	int rc = 0;
	for (size_t a = 0; a < w && !rc;) {
		size_t b = a;
		while (b < w && pl[b].f == pl[a].f)
			b++;
		ftap *ft = &fts[pl[a].f];
		if (!(ft->t = qtk_calloc(b - a, sizeof *ft->t)) || !(ft->cuts = qtk_calloc(b - a, sizeof *ft->cuts))) {
			rc = oom(err, NULL);
			break;
		}
		/* a read starts at each tensor of a piece or more (its pieces then lie whole in the
		 * buffers); smaller ones come from the reads around them, so a file of many small
		 * tensors is still read in large reads */
		for (size_t c = a; c < b; c++) {
			ft->t[ft->n++] = pl[c].x;
			tapped[pl[c].x.i] = true;
			if (pl[c].x.end - pl[c].x.start >= V2_CHUNK)
				ft->cuts[ft->ncuts++] = pl[c].x.start;
		}
		a = b;
	}
	qtk_free(pl);
	return rc;
}

static void ftap_end(ftap *ft)
{
	djob *j = ft->j;
	const size_t i = ft->t[ft->cur].i;
	if (!ft->rc) {
		ft->rc = leaf_end(j, i, ft->h, NULL, &ft->e);
		ft->h = NULL;
	}
	qtk_thash_free(ft->h);
	ft->h = NULL;
	leaf_done(j, i, ft->rc, &ft->e);
	ft->begun = false;
	ft->cur++;
}

static void ftap_feed(void *ctx, uint64_t at, const uint8_t *p, size_t n)
{
	ftap *ft = ctx;
	djob *j = ft->j;
	const uint64_t end = at + n;
	while (ft->cur < ft->n && ft->t[ft->cur].start < end) {
		const ftensor *x = &ft->t[ft->cur];
		const qtk_tensor *t = &j->m->tensors[x->i];
		const uint64_t a = x->start > at ? x->start : at, b = x->end < end ? x->end : end;
		if (!ft->begun) {
			ft->begun = true;
			ft->rc = 0;
			qtk_err_clear(&ft->e);
			int heads = 0;
			ft->rc = qtk_family_qk_heads(j->m, t, &heads, &ft->e);
			ft->rc = ft->rc ? ft->rc : thash_new(j->m, t, heads, !j->o->enc_only, j->o->scheme, &ft->h, &ft->e);
		}
		if (!ft->rc)
			ft->rc = qtk_thash_put(ft->h, p + (a - at), (size_t)(b - a));
		pthread_mutex_lock(&j->mu);
		j->done += b - a;
		if (j->o->progress_named)
			j->o->progress_named(j->o->progress_ctx, t->name, j->done, j->total);
		else if (j->o->progress)
			j->o->progress(j->o->progress_ctx, j->done, j->total);
		pthread_mutex_unlock(&j->mu);
		if (b < x->end)
			break; /* goes on in the next buffer */
		ftap_end(ft);
	}
}

typedef struct {
	djob *j;
	ftap *ft;   /* one per file */
	int rc;
	qtk_err err;
} ffiles;

static void *ffiles_main(void *arg)
{
	ffiles *w = arg;
	djob *j = w->j;
	qtk_model *m = j->m;
	for (uint32_t f = 0; f < m->nfiles && !w->rc; f++) {
		const ftap *ft = &w->ft[f];
		const qtk_fd_tap tap = {ftap_feed, &w->ft[f], ft->cuts, ft->ncuts};
		w->rc = qtk_sha256_file(m->fds[f], m->files[f], m->file_sizes[f], j->o->cancel, ft->n ? &tap : NULL,
					j->o->file_sha[f], &w->err);
		if (w->rc && w->rc != QTK_E_INTERNAL && ft->cur < ft->n &&
		    !(j->o->cancel && __atomic_load_n(j->o->cancel, __ATOMIC_RELAXED))) {
			/* a read that failed fails the tensor it was reading, or the next one, by name,
			 * as that tensor's own read would have */
			qtk_err e = w->err;
			snprintf(e.subject, sizeof e.subject, "%s", m->tensors[ft->t[ft->cur].i].name);
			note_fail(j, ft->t[ft->cur].i, &e);
		} else if (!w->rc && ft->cur != ft->n) { /* every byte was seen: every tensor ended */
			w->rc = qtk_err_set(&w->err, QTK_E_INTERNAL, m->files[f], -1, NULL, "a tensor's bytes were not all read");
		}
	}
	return NULL;
}

typedef struct sized {
	uint64_t bytes;
	size_t i;
} sized;

static int by_size_desc(const void *a, const void *b)
{
	const sized *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* qtk_digest_model, or with into qtk_digest_model_into. */
static int digest_run(qtk_model *m, const qtk_digest_opts *o, qtk_digests *out, bool into, qtk_err *err)
{
	size_t n = m->ntensors;
	if (into && (out->n != n || !out->of_tensor || out->scheme != norm_scheme(o ? o->scheme : 0)))
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "the digests are not a description of this model");
	if (into && o && o->keep_going) /* a leaf marked bad would be written beside its readers */
		return qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, NULL, "keep_going is not for a description");
	if (!into) {
		memset(out, 0, sizeof *out);
		if (!(out->leaf = qtk_calloc(n ? n : 1, sizeof *out->leaf)))
			return oom(err, NULL);
	}
	size_t *order = qtk_calloc(n ? n : 1, sizeof *order);
	sized *sz = qtk_calloc(n ? n : 1, sizeof *sz);
	if (!order || !sz) {
		if (!into) {
			qtk_free(out->leaf);
			out->leaf = NULL;
		}
		qtk_free(order);
		qtk_free(sz);
		return oom(err, NULL);
	}
	if (!into) {
		out->n = n;
		out->scheme = norm_scheme(o ? o->scheme : 0);
	}
	djob j;
	memset(&j, 0, sizeof j);
	j.m = m;
	j.o = o;
	j.d = out;
	j.into = into;
	j.order = order;
	j.fail_at = SIZE_MAX;
	pthread_mutex_init(&j.mu, NULL);
	for (size_t i = 0; i < n; i++) {
		sz[i].bytes = m->tensors[i].n_bytes;
		sz[i].i = i;
		if (!o || !o->select || o->select[i])
			j.total += m->tensors[i].n_bytes;
	}
	/* largest first: the pool hands out jobs in order, so this balances the threads */
	if (n)
		qsort(sz, n, sizeof *sz, by_size_desc);
	for (size_t i = 0; i < n; i++)
		order[i] = sz[i].i;
	qtk_free(sz);
	int threads = o && o->threads > 0 ? o->threads : qtk_cpu_count();
	/* the files' hashes, and the tensors their reads can hash, on a thread beside the pool */
	ffiles fw = {&j, NULL, 0, {0}};
	bool *tapped = NULL, flive = false;
	int rc = 0;
	if (o && o->file_sha) {
		fw.ft = qtk_calloc(m->nfiles ? m->nfiles : 1, sizeof *fw.ft);
		tapped = qtk_calloc(n ? n : 1, sizeof *tapped);
		rc = fw.ft && tapped ? 0 : oom(err, NULL);
		rc = rc ? rc : ftap_plan(&j, fw.ft, tapped, err);
		j.tapped = tapped;
	}
	pthread_t fth;
	if (!rc && fw.ft && !(flive = pthread_create(&fth, NULL, ffiles_main, &fw) == 0))
		ffiles_main(&fw); /* no thread: before the pool, on this one */
	/* one long loop, often beside a conversion's short ones: threads of its own */
	if (!rc)
		qtk_parallel_for_spawn(threads, n, digest_one, &j);
	if (flive)
		pthread_join(fth, NULL);
	size_t ntapped = 0;
	for (uint32_t f = 0; fw.ft && f < m->nfiles; f++) {
		ntapped += fw.ft[f].n;
		qtk_thash_free(fw.ft[f].h);
		qtk_free(fw.ft[f].t);
		qtk_free(fw.ft[f].cuts);
	}
	qtk_free(fw.ft);
	qtk_free(tapped);
	pthread_mutex_destroy(&j.mu);
	qtk_free(order);
	if (rc) {
		if (!into)
			qtk_digests_free(out);
		return rc;
	}
	if (j.fail_at == SIZE_MAX && fw.rc) { /* the tensors hashed; a file's read or hash failed */
		*err = fw.err;
		rc = fw.rc;
	}
	if (j.fail_at != SIZE_MAX) {
		*err = j.err;
		if (!err->file[0] && m->path)
			snprintf(err->file, sizeof err->file, "%s", m->path);
		rc = j.err.code ? j.err.code : QTK_E_INTERNAL;
	}
	if (!rc && !into)
		rc = qtk_digests_finish(out, err);
	if (rc && !into)
		qtk_digests_free(out);
	else if (!rc)
		out->n_with_files = ntapped;
	return rc;
}

int qtk_digest_model(qtk_model *m, const qtk_digest_opts *o, qtk_digests *out, qtk_err *err)
{
	return digest_run(m, o, out, false, err);
}

int qtk_digest_model_into(qtk_model *m, const qtk_digest_opts *o, qtk_digests *d, qtk_err *err)
{
	return digest_run(m, o, d, true, err);
}

typedef struct named {
	const char *name;
	size_t i;
} named;

static int by_name(const void *a, const void *b)
{
	return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

int qtk_digest_describe(const qtk_model *m, qtk_digests *out, qtk_err *err)
{
	memset(out, 0, sizeof *out);
	const size_t n = m->ntensors;
	qtk_leaf *l = qtk_calloc(n ? n : 1, sizeof *l);
	named *idx = qtk_calloc(n ? n : 1, sizeof *idx);
	out->leaf = qtk_calloc(n ? n : 1, sizeof *out->leaf);
	out->of_tensor = qtk_calloc(n ? n : 1, sizeof *out->of_tensor);
	int rc = l && idx && out->leaf && out->of_tensor ? 0 : oom(err, NULL);
	size_t made = 0;
	for (; made < n && !rc; made++) {
		rc = qtk_digest_leaf_meta(m, &m->tensors[made], &l[made], err);
		idx[made] = (named){l[made].name, made};
	}
	if (!rc && n) {
		/* the order qtk_digests_finish gives, and where each tensor's leaf went */
		qsort(idx, n, sizeof *idx, by_name);
		for (size_t k = 0; k < n; k++) {
			out->leaf[k] = l[idx[k].i];
			out->of_tensor[idx[k].i] = k;
		}
		out->n = n;
		made = 0;
	}
	out->scheme = norm_scheme(0);
	rc = rc ? rc : qtk_digests_finish(out, err);
	for (size_t i = 0; i < made && l; i++) {
		qtk_free(l[i].name);
		qtk_free(l[i].stored);
	}
	qtk_free(l);
	qtk_free(idx);
	if (rc)
		qtk_digests_free(out);
	return rc;
}

int qtk_tensor_values(qtk_model *m, const qtk_tensor *t, float **out, qtk_err *err)
{
	*out = NULL;
	int heads = 0;
	int rc = qtk_family_qk_heads(m, t, &heads, err);
	if (rc)
		return rc;
	if (dec_kind_of(t) != QTK_DEC_VALUES)
		return qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name, "layout has no exact F32 decoding");
	if (t->n_params > SIZE_MAX / sizeof(float) / 2)
		return oom(err, t->name);
	size_t n = (size_t)t->n_params;
	float *v = qtk_malloc(n ? n * sizeof *v : 1);
	if (!v)
		return oom(err, t->name);
	qtk_err_clear(&m->err);
	if (n && qtk_decode_tensor(m, t, v)) {
		*err = m->err;
		qtk_free(v);
		return err->code ? err->code : QTK_E_DATA;
	}
	if (heads > 0 && n) {
		float *p = qtk_malloc(n * sizeof *p);
		if (!p) {
			qtk_free(v);
			return oom(err, t->name);
		}
		uint64_t rows = t->shape[0], row = t->n_params / rows;
		unpermute(v, p, t->n_params, rows / (uint64_t)heads * row, row);
		qtk_free(v);
		v = p;
	}
	*out = v;
	return 0;
}

/* ---- output sink ------------------------------------------------------------------------- */

struct qtk_digest_sink {
	const qtk_model *desc;
	qtk_err *err;
	qtk_digests d;
	size_t cur;        /* tensor being hashed (desc->ntensors: none yet) */
	size_t next;       /* first tensor not yet started */
	qtk_thash *h;
	const qtk_leaf **expect; /* per tensor: the source leaf it copies, or NULL */
	bool *late;        /* per tensor: expect is the source's metadata; digests come at finish */
	bool *pending;     /* per tensor: hashed as a late copy, decoded leaf still to take */
	bool cur_expect;   /* the current tensor hashes the encoded tier only */
	qtk_sink_mode mode;
	bool cur_skip;     /* QTK_SINK_DEC: nothing to hash for the current tensor */
	uint8_t (*given)[32]; /* QTK_SINK_DEC, per tensor: its decoded leaf from the writer ... */
	bool *has_given;      /* ... when set (qtk_digest_sink_decoded) */
	uint8_t *defer;       /* QTK_SINK_DEC, per tensor: its decoded leaf comes at finish: DEFER_SRC the
			       * source's, DEFER_GIVEN given after its bytes (qtk_digest_sink_decoded) */
	uint8_t (*dec)[32];   /* QTK_SINK_DEC, per tensor: the decoded leaf hashed here ... */
	bool *has_dec;        /* ... when there is one (the sink keeps no other leaf field: d.leaf is NULL) */
};

/* Called by the thread that hands the bytes to the writer (qconvert's) while the sink's thread
 * hashes earlier tensors: it writes only tensor `tensor`'s entries, which the sink reads once
 * that tensor's first bytes have come through the writer's queue (its lock orders the two). */
void qtk_digest_sink_decoded(qtk_digest_sink *s, size_t tensor, const uint8_t dec[32])
{
	if (s->mode != QTK_SINK_DEC || !s->has_given || tensor >= s->desc->ntensors)
		return;
	memcpy(s->given[tensor], dec, 32);
	s->has_given[tensor] = true;
}

enum { DEFER_SRC = 1, DEFER_GIVEN = 2 };

void qtk_digest_sink_decoded_source(qtk_digest_sink *s, size_t tensor)
{
	if (s->mode == QTK_SINK_DEC && s->defer && tensor < s->desc->ntensors)
		s->defer[tensor] = DEFER_SRC;
}

void qtk_digest_sink_decoded_later(qtk_digest_sink *s, size_t tensor)
{
	if (s->mode == QTK_SINK_DEC && s->defer && tensor < s->desc->ntensors)
		s->defer[tensor] = DEFER_GIVEN;
}

void qtk_digest_sink_expect(qtk_digest_sink *s, size_t tensor, const qtk_leaf *src)
{
	if (tensor < s->desc->ntensors && tensor >= s->next) {
		s->expect[tensor] = src;
		s->late[tensor] = false;
	}
}

void qtk_digest_sink_expect_late(qtk_digest_sink *s, size_t tensor, const qtk_leaf *meta)
{
	if (tensor < s->desc->ntensors && tensor >= s->next) {
		s->expect[tensor] = meta;
		s->late[tensor] = true;
	}
}

/* Does src describe tensor t of the output (so equal encoded leaves mean equal values)? */
static bool same_meta(const qtk_leaf *src, const qtk_leaf *meta)
{
	return src && !strcmp(src->name, meta->name) && !strcmp(src->enc_id, meta->enc_id) && src->ndim == meta->ndim &&
	       !memcmp(src->shape, meta->shape, sizeof src->shape) && src->qk_heads == meta->qk_heads &&
	       src->dec_kind == meta->dec_kind;
}

static bool same_tensor(const qtk_leaf *src, const qtk_leaf *meta)
{
	return same_meta(src, meta) && src->has_dec;
}

/* End the current tensor; a copy takes its decoded leaf from the source. */
static int sink_end_cur(qtk_digest_sink *s)
{
	if (s->cur_skip) { /* QTK_SINK_DEC: the encoded sink's leaf has (or proves) the decoded one */
		s->cur_skip = false;
		return 0;
	}
	if (s->mode == QTK_SINK_DEC) { /* its decoded digest only: the encoded sink has the rest */
		qtk_leaf one;
		int rc = qtk_thash_end(s->h, &one);
		s->h = NULL;
		if (!rc && one.has_dec) {
			memcpy(s->dec[s->cur], one.dec, 32);
			s->has_dec[s->cur] = true;
		}
		if (!rc) {
			qtk_free(one.name);
			qtk_free(one.stored);
			qtk_free(one.bad_msg);
		}
		return rc;
	}
	qtk_leaf *l = &s->d.leaf[s->cur];
	int rc = qtk_thash_end(s->h, l);
	s->h = NULL;
	if (rc || !s->cur_expect)
		return rc;
	if (s->late[s->cur]) { /* the source's digests are not known yet: proven at finish */
		s->pending[s->cur] = true;
		return 0;
	}
	const qtk_leaf *src = s->expect[s->cur];
	if (memcmp(l->enc, src->enc, 32))
		return qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, l->stored,
				   "written bytes differ from the source tensor they copy");
	memcpy(l->dec, src->dec, 32);
	l->has_dec = true;
	return 0;
}

void qtk_digest_sink_free(qtk_digest_sink *s)
{
	if (!s)
		return;
	qtk_thash_free(s->h);
	qtk_digests_free(&s->d);
	qtk_free(s->expect);
	qtk_free(s->late);
	qtk_free(s->pending);
	qtk_free(s->given);
	qtk_free(s->has_given);
	qtk_free(s->defer);
	qtk_free(s->dec);
	qtk_free(s->has_dec);
	qtk_free(s);
}

int qtk_digest_sink_new(const qtk_model *desc, qtk_digest_sink **out, qtk_err *err)
{
	return qtk_digest_sink_new_mode(desc, QTK_SINK_BOTH, out, err);
}

int qtk_digest_sink_new_mode(const qtk_model *desc, qtk_sink_mode mode, qtk_digest_sink **out, qtk_err *err)
{
	*out = NULL;
	qtk_digest_sink *s = qtk_calloc(1, sizeof *s);
	if (!s)
		return oom(err, NULL);
	s->desc = desc;
	s->err = err;
	const size_t nt = desc->ntensors ? desc->ntensors : 1;
	if (mode == QTK_SINK_DEC) { /* decoded digests only (qtk_digest_sink_finish_pair takes them) */
		s->dec = qtk_calloc(nt, sizeof *s->dec);
		s->has_dec = qtk_calloc(nt, sizeof *s->has_dec);
	} else {
		s->d.leaf = qtk_calloc(nt, sizeof *s->d.leaf);
	}
	s->expect = qtk_calloc(desc->ntensors ? desc->ntensors : 1, sizeof *s->expect);
	s->late = qtk_calloc(desc->ntensors ? desc->ntensors : 1, sizeof *s->late);
	s->pending = qtk_calloc(desc->ntensors ? desc->ntensors : 1, sizeof *s->pending);
	if ((mode == QTK_SINK_DEC ? !s->dec || !s->has_dec : !s->d.leaf) || !s->expect || !s->late || !s->pending) {
		qtk_free(s->dec);
		qtk_free(s->has_dec);
		qtk_free(s->d.leaf);
		qtk_free(s->expect);
		qtk_free(s->late);
		qtk_free(s->pending);
		qtk_free(s);
		return oom(err, NULL);
	}
	s->d.n = desc->ntensors;
	s->d.scheme = norm_scheme(0);
	s->cur = SIZE_MAX;
	s->mode = mode;
	if (mode == QTK_SINK_DEC) { /* without them the sink decodes every tensor itself */
		s->given = qtk_calloc(desc->ntensors ? desc->ntensors : 1, sizeof *s->given);
		s->has_given = qtk_calloc(desc->ntensors ? desc->ntensors : 1, sizeof *s->has_given);
		s->defer = qtk_calloc(desc->ntensors ? desc->ntensors : 1, sizeof *s->defer);
		if (!s->given || !s->has_given || !s->defer) {
			qtk_free(s->given);
			qtk_free(s->has_given);
			qtk_free(s->defer);
			s->given = NULL;
			s->has_given = NULL;
			s->defer = NULL;
		}
	}
	*out = s;
	return 0;
}

/* Does a version 2 leaf of t hash its stored bytes as the pieces of both tiers (where they have no
 * infinities or NaNs)? */
static bool shares_pieces(const qtk_tensor *t, int heads)
{
	return t->layout.kind == QTK_LAYOUT_PLAIN && t->nparts == 1 && heads <= 0 &&
	       (t->layout.type == QTK_T_F16 || t->layout.type == QTK_T_BF16);
}

/* Finish the current tensor and start (and finish, when empty) tensors up to `upto`. */
static int sink_advance(qtk_digest_sink *s, size_t upto)
{
	int rc = s->h || s->cur_skip ? sink_end_cur(s) : 0;
	while (!rc && s->next <= upto && s->next < s->desc->ntensors) {
		const qtk_tensor *t = &s->desc->tensors[s->next];
		int heads = 0;
		qtk_leaf meta;
		rc = qtk_digest_leaf_meta(s->desc, t, &meta, s->err);
		heads = meta.qk_heads;
		meta.dec_kind = rc ? QTK_DEC_VALUES : meta.dec_kind;
		s->cur_expect = !rc && (s->late[s->next] ? same_meta(s->expect[s->next], &meta)
							 : same_tensor(s->expect[s->next], &meta));
		qtk_free(meta.name);
		qtk_free(meta.stored);
		/* version 2, F16/BF16 in stored order: the encoded tier's pieces serve the decoded tier,
		 * so the ENC sink hashes both */
		const bool both = !rc && !s->cur_expect && s->d.scheme != QTK_DIGEST_V1 && shares_pieces(t, heads);
		if (!rc && s->mode == QTK_SINK_DEC && (s->cur_expect || meta.dec_kind == QTK_DEC_RAW || both)) {
			s->cur_skip = true; /* copies, raw leaves, shared pieces: nothing to decode here */
		} else if (!rc && s->mode == QTK_SINK_DEC && s->defer && s->defer[s->next]) {
			s->cur_skip = true; /* the source's leaf or one given after the bytes, at finish (given
					     * and has_given are not read here: the writer sets them later) */
		} else if (!rc && s->mode == QTK_SINK_DEC && s->has_given && s->has_given[s->next]) {
			s->cur_skip = true; /* the writer hashed its values */
			memcpy(s->dec[s->next], s->given[s->next], 32);
			s->has_dec[s->next] = true;
		} else if (!rc) {
			rc = thash_new(s->desc, t, heads, (s->mode != QTK_SINK_ENC && !s->cur_expect) || both, s->d.scheme,
				       &s->h, s->err);
			if (!rc && s->mode == QTK_SINK_DEC)
				s->h->no_enc = true;
		}
		s->cur = s->next++;
		if (!rc && s->cur < upto) /* skipped over: no bytes, or bytes missing */
			rc = sink_end_cur(s);
	}
	return rc;
}

int qtk_digest_sink_put(qtk_digest_sink *s, size_t tensor, const void *buf, size_t n)
{
	if (tensor >= s->desc->ntensors || (s->cur != SIZE_MAX && tensor < s->cur))
		return qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, NULL, "digest sink: tensor %zu out of order", tensor);
	if (tensor != s->cur) {
		int rc = sink_advance(s, tensor);
		if (rc)
			return rc;
	}
	if (s->cur_skip)
		return 0;
	if (!s->h) /* the tensor was complete already */
		return qtk_err_set(s->err, QTK_E_DATA, NULL, -1, NULL, "more data than described");
	int rc = qtk_thash_put(s->h, buf, n);
	/* every byte of the tensor is in: finish it now, not when the next tensor's bytes come (a
	 * packed tensor's decoded tier holds its parts until then, while the converter builds the
	 * next one) */
	if (!rc && s->h->part >= s->h->t.nparts)
		rc = sink_end_cur(s);
	return rc;
}

int qtk_digest_sink_finish(qtk_digest_sink *s, qtk_digests *out)
{
	return qtk_digest_sink_finish_late(s, NULL, out);
}

int qtk_digest_sink_finish_late(qtk_digest_sink *s, const qtk_digests *src, qtk_digests *out)
{
	return qtk_digest_sink_finish_pair(s, NULL, src, out);
}

int qtk_digest_sink_finish_pair(qtk_digest_sink *s, qtk_digest_sink *dec, const qtk_digests *src, qtk_digests *out)
{
	int rc = 0;
	if (dec && dec->desc != s->desc)
		rc = qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, NULL, "digest sinks of different outputs");
	if (!rc && (s->mode == QTK_SINK_DEC || (dec && dec->mode != QTK_SINK_DEC)))
		rc = qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, NULL,
				 "a decoded-tier sink is finished as the second of a pair, beside an encoded one");
	if (!rc && dec && (rc = sink_advance(dec, dec->desc->ntensors)) && dec->err != s->err)
		*s->err = *dec->err;
	rc = rc ? rc : sink_advance(s, s->desc->ntensors);
	/* late copies: the encoded leaf must be the source's; the decoded leaf is then the source's */
	for (size_t i = 0; !rc && i < s->d.n; i++) {
		if (!s->pending[i])
			continue;
		qtk_leaf *l = &s->d.leaf[i];
		const qtk_leaf *sl = src ? qtk_digests_find(src, l->name) : NULL;
		if (!sl || !sl->has_dec) {
			rc = qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, l->stored,
					 "the source tensor this copies has no digests");
			break;
		}
		if (memcmp(l->enc, sl->enc, 32)) {
			rc = qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, l->stored,
					 "written bytes differ from the source tensor they copy");
			break;
		}
		memcpy(l->dec, sl->dec, 32);
		l->has_dec = true;
	}
	/* the decoded tier hashed beside (QTK_SINK_DEC), same tensor order */
	for (size_t i = 0; !rc && dec && i < s->d.n; i++)
		if (!s->d.leaf[i].has_dec && dec->has_dec[i]) {
			memcpy(s->d.leaf[i].dec, dec->dec[i], 32);
			s->d.leaf[i].has_dec = true;
		}
	/* outputs proven to decode to their source's values: the source's decoded leaf; outputs
	 * whose leaf the writer gave after their bytes: that one */
	for (size_t i = 0; !rc && dec && dec->defer && i < s->d.n; i++) {
		qtk_leaf *l = &s->d.leaf[i];
		if (dec->defer[i] == DEFER_GIVEN) {
			if (!dec->has_given[i]) {
				rc = qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, l->stored, "no decoded digest was given for this tensor");
				break;
			}
			memcpy(l->dec, dec->given[i], 32);
			l->has_dec = true;
			continue;
		}
		if (dec->defer[i] != DEFER_SRC)
			continue;
		const qtk_leaf *sl = src ? qtk_digests_find(src, l->name) : NULL;
		if (!sl || !sl->has_dec || sl->bad || norm_scheme(src->scheme) != s->d.scheme || sl->ndim != l->ndim ||
		    memcmp(sl->shape, l->shape, sizeof l->shape) || sl->qk_heads != l->qk_heads ||
		    sl->dec_kind != l->dec_kind || l->dec_kind != QTK_DEC_VALUES) {
			rc = qtk_err_set(s->err, QTK_E_INTERNAL, NULL, -1, l->stored,
					 "the source tensor this repacks has no decoded digest of the same values");
			break;
		}
		memcpy(l->dec, sl->dec, 32);
		l->has_dec = true;
	}
	rc = rc ? rc : qtk_digests_finish(&s->d, s->err);
	if (!rc) {
		*out = s->d;
		memset(&s->d, 0, sizeof s->d);
	} else {
		memset(out, 0, sizeof *out);
	}
	qtk_digest_sink_free(s);
	qtk_digest_sink_free(dec);
	return rc;
}

/* ---- value cursor ---------------------------------------------------------------------------- */

struct qtk_vcursor {
	qtk_model *m;
	const qtk_tensor *t;
	qtk_err *err;
	int heads;
	uint32_t blck, bpb;
	uint64_t unit, chunk;    /* values: alignment and values decoded at a time */
	uint64_t pos;            /* next value index to decode */
	uint64_t have, off;      /* decoded values in vals, and how many were handed out */
	uint8_t *raw;
	float *vals, *perm;
	bool whole;              /* a packed tensor whose windows did not divide: vals holds it all */
	bool packed;             /* packed: windows of rows (pw) */
	qtk_pwin pw;
};

void qtk_vcursor_close(qtk_vcursor *c)
{
	if (!c)
		return;
	qtk_free(c->raw);
	qtk_free(c->vals);
	qtk_free(c->perm);
	qtk_pwin_free(&c->pw);
	qtk_free(c);
}

int qtk_vcursor_open(qtk_model *m, const qtk_tensor *t, qtk_vcursor **out, qtk_err *err)
{
	*out = NULL;
	if (dec_kind_of(t) != QTK_DEC_VALUES)
		return qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name, "layout has no exact F32 decoding");
	qtk_vcursor *c = qtk_calloc(1, sizeof *c);
	if (!c)
		return oom(err, t->name);
	c->m = m;
	c->t = t;
	c->err = err;
	int rc = qtk_family_qk_heads(m, t, &c->heads, err);
	const qtk_scheme *sc = t->layout.kind != QTK_LAYOUT_PLAIN ? qtk_scheme_of(t) : NULL;
	uint64_t prows = qtk_tensor_rows(t), pin = qtk_tensor_cols(t);
	if (!rc && sc && prows && pin && (c->heads <= 0 || prows % (2 * (uint64_t)c->heads) == 0) &&
	    prows % sc->row_align == 0 && pin <= CHUNK_VALUES) {
		/* packed: windows of whole heads (un-permuted) and whole packed words */
		uint64_t a = qtk_lcm_u64(sc->row_align, c->heads > 0 ? prows / (uint64_t)c->heads : 1);
		uint64_t r = CHUNK_VALUES / pin;
		r = r < a ? a : r / a * a;
		c->packed = true;
		c->unit = c->heads > 0 ? prows / (uint64_t)c->heads * pin : pin;
		c->chunk = r * pin;
		if (c->unit > MAX_UNIT_VALUES || c->chunk > (uint64_t)SIZE_MAX / sizeof(float) / 2)
			rc = qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name, "heads cannot be un-permuted");
		qtk_pwin_init(&c->pw, m, t, 0);
		if (!rc) {
			c->vals = qtk_malloc((size_t)c->chunk * sizeof(float));
			c->perm = c->heads > 0 ? qtk_malloc((size_t)c->chunk * sizeof(float)) : NULL;
			if (!c->vals || (c->heads > 0 && !c->perm))
				rc = oom(err, t->name);
		}
	} else if (!rc && t->layout.kind != QTK_LAYOUT_PLAIN) {
		c->whole = true;
		rc = qtk_tensor_values(m, t, &c->vals, err);
		c->have = t->n_params;
		c->pos = t->n_params;
	} else if (!rc) {
		const qtk_type_info *ti = qtk_type(t->layout.type);
		c->blck = ti->blck;
		c->bpb = ti->bytes;
		c->unit = c->blck;
		if (c->heads > 0) {
			uint64_t rows = t->shape[0];
			if (!rows || rows % (2 * (uint64_t)c->heads) || t->n_params % rows)
				rc = qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name, "rows do not split into heads");
			else
				c->unit = rows / (uint64_t)c->heads * (t->n_params / rows);
			if (!rc && (c->unit > MAX_UNIT_VALUES || c->unit % c->blck))
				rc = qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name, "heads cannot be un-permuted");
		}
		if (t->n_params % c->blck)
			rc = rc ? rc : qtk_err_set(err, QTK_E_DATA, m->path, -1, t->name, "values are not whole blocks");
		c->chunk = CHUNK_VALUES > c->unit ? CHUNK_VALUES / c->unit * c->unit : c->unit;
		if (!rc) {
			c->raw = qtk_malloc((size_t)(c->chunk / c->blck * c->bpb));
			c->vals = qtk_malloc((size_t)c->chunk * sizeof(float));
			c->perm = c->heads > 0 ? qtk_malloc((size_t)c->chunk * sizeof(float)) : NULL;
			if (!c->raw || !c->vals || (c->heads > 0 && !c->perm))
				rc = oom(err, t->name);
		}
	}
	if (rc) {
		qtk_vcursor_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

static int vc_refill(qtk_vcursor *c)
{
	const qtk_tensor *t = c->t;
	uint64_t n = t->n_params - c->pos < c->chunk ? t->n_params - c->pos : c->chunk;
	if (c->packed) {
		uint64_t in = qtk_tensor_cols(t);
		qtk_err_clear(&c->m->err);
		if (qtk_pwin_decode(&c->pw, c->pos / in, n / in, c->vals)) {
			*c->err = c->m->err;
			return c->err->code ? c->err->code : QTK_E_DATA;
		}
	}
	uint64_t boff = c->packed ? 0 : c->pos / c->blck * c->bpb, nbytes = c->packed ? 0 : n / c->blck * c->bpb;
	qtk_err_clear(&c->m->err);
	if (!c->packed && qtk_read_part(c->m, t, 0, boff, c->raw, (size_t)nbytes)) {
		*c->err = c->m->err;
		return c->err->code ? c->err->code : QTK_E_IO;
	}
	if (!c->packed && decode_fast(t->layout.type, c->raw, c->vals, n) && qtk_dequant_ggml(t->layout.type, c->raw, c->vals, n))
		return qtk_err_set(c->err, QTK_E_DATA, c->m->path, -1, t->name, "cannot decode this type");
	if (c->heads > 0) {
		unpermute(c->vals, c->perm, n, c->unit, t->n_params / t->shape[0]);
		float *tmp = c->vals;
		c->vals = c->perm;
		c->perm = tmp;
	}
	c->pos += n;
	c->have = n;
	c->off = 0;
	return 0;
}

int qtk_vcursor_read(qtk_vcursor *c, float *dst, uint64_t n)
{
	while (n) {
		if (c->off == c->have) {
			if (c->whole || c->pos >= c->t->n_params)
				return qtk_err_set(c->err, QTK_E_INTERNAL, NULL, -1, c->t->name, "read past the last value");
			int rc = vc_refill(c);
			if (rc)
				return rc;
		}
		uint64_t k = c->have - c->off < n ? c->have - c->off : n;
		memcpy(dst, c->vals + c->off, (size_t)k * sizeof *dst);
		c->off += k;
		dst += k;
		n -= k;
	}
	return 0;
}
