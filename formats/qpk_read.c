/* qpk_read.c - QPK, qtk's packed-group container: the reader (the writer is
 * qpk_write.c; what they share is in qpk_int.h).
 *
 * The byte layout, the digests and every validation rule are specified in
 * formats/qpk.md; section numbers (§n) below refer to it. In short:
 *
 *   Header (128 bytes) | Metadata section | pad | Data section | Index section | Trailer (128 bytes)
 *
 * The index comes after the data so that a file is written in one pass
 * through an append-only qtk_ofile; the fixed-size trailer at the end says
 * where the index is. A part is stored as chunks of 2^Chunk_Log raw bytes,
 * each either raw or one zstd frame, so that memory stays bounded while
 * writing and reads have random access. Every section is SHA-256-checked;
 * every part carries the SHA-256 of its raw bytes, verified whenever a part
 * is read from its first byte to its last and by qtk_qpk_verify_tensor.
 */
#include "qpk_int.h"
#include "scheme/bnb.h"
#include "scheme/scheme.h"
#include <math.h>
#include <openssl/evp.h>
#include "lc.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* ---- helpers shared by reader and writer --------------------------------- */

int qtk_qpk_sha256(const void *a, size_t an, const void *b, size_t bn, uint8_t out[32])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	unsigned len = 0;
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 && EVP_DigestUpdate(c, a, an) == 1 &&
		 (!bn || EVP_DigestUpdate(c, b, bn) == 1) && EVP_DigestFinal_ex(c, out, &len) == 1 && len == 32;
	EVP_MD_CTX_free(c);
	return ok ? 0 : QTK_E_IO;
}

static bool valid_codec(unsigned c) { return c == CODEC_RAW || c == CODEC_ZSTD; }

/* Bytes of `n` elements of `type`; false on misfit or overflow. */
static bool part_bytes(unsigned type, int ndim, const uint64_t *shape, uint64_t *out)
{
	uint64_t n = 1;
	for (int d = 0; d < ndim; d++)
		if (!qtk_mul_u64(n, shape[d], &n))
			return false;
	return qtk_type_nbytes(type, n, out) == 0;
}

/* Part p of t must have role, type and shape (ndim dims in s). */
static int want_part(const qtk_tensor *t, int p, const char *role, unsigned type, int nd, const uint64_t *s,
		     char *why, size_t wn)
{
	const qtk_part *q = &t->parts[p];
	if (strcmp(q->role, role) != 0) {
		snprintf(why, wn, "part %d role '%.8s', expected '%s'", p, q->role, role);
		return QTK_E_DATA;
	}
	if (q->type != type) {
		snprintf(why, wn, "part '%s' type %s, expected %s", role,
			 qtk_type(q->type) ? qtk_type(q->type)->upper : "?", qtk_type(type)->upper);
		return QTK_E_DATA;
	}
	bool same = q->ndim == nd;
	for (int d = 0; same && d < nd; d++)
		same = q->shape[d] == s[d];
	if (!same) {
		char got[100], exp[100];
		qtk_shape_text(got, sizeof got, q->ndim, q->shape);
		qtk_shape_text(exp, sizeof exp, nd, s);
		snprintf(why, wn, "part '%.8s' shape %.99s does not match the layout: expected %.99s", role, got, exp);
		return QTK_E_DATA;
	}
	return 0;
}

/* AWQ / GPTQ / MLX rules (§8.3, §8.4, §8.6, C.2 rows 39 and 40) and those of the kinds with
 * Layout_Params (§8.7-§8.12): the packed scheme's one validation. */
static int check_packed(const qtk_tensor *t, char *why, size_t wn)
{
	int part;
	return qtk_scheme_check(t, &part, why, wn);
}

static bool float_scale(unsigned t) { return t == QTK_T_F32 || t == QTK_T_F16 || t == QTK_T_BF16; }
static bool pow2_in(uint64_t v, uint64_t lo, uint64_t hi) { return v >= lo && v <= hi && !(v & (v - 1)); }

/* The Layout_Params of a kind that has them (§7.2, the tables of §8.7-§8.12): every field has
 * the values the kind gives it a meaning for, and 0 where it gives none. Before the scheme's
 * own check, so that a field no scheme looks at cannot carry anything. */
static int check_params(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	unsigned st = l->scale_type;
	switch (l->kind) {
	case QTK_LAYOUT_CT_INT:
		if (l->strategy != QTK_SCHEME_PER_TENSOR && l->strategy != QTK_SCHEME_PER_GROUP)
			return qtk_why(why, wn, "ct-int strategy %u is not 0 (tensor) or 2 (group)", l->strategy);
		if (!float_scale(st))
			return qtk_why(why, wn, "ct-int scale type %u is not F32, F16 or BF16", st);
		break;
	case QTK_LAYOUT_FP8:
		if (l->strategy != QTK_SCHEME_PER_TENSOR && l->strategy != QTK_SCHEME_PER_GROUP &&
		    l->strategy != QTK_SCHEME_PER_BLOCK)
			return qtk_why(why, wn, "fp8 strategy %u is not 0 (tensor), 2 (group) or 3 (block)", l->strategy);
		if (!float_scale(st))
			return qtk_why(why, wn, "fp8 scale type %u is not F32, F16 or BF16", st);
		break;
	case QTK_LAYOUT_NVFP4:
		if (l->strategy != QTK_SCHEME_PER_TENSOR && l->strategy != QTK_SCHEME_PER_GROUP)
			return qtk_why(why, wn, "nvfp4 strategy %u is not 0 or 2", l->strategy);
		if (st > 1)
			return qtk_why(why, wn, "nvfp4 scale type %u is not 0 (global scale divides) or 1 (multiplies)", st);
		break;
	case QTK_LAYOUT_MXFP4:
		if (l->strategy != QTK_SCHEME_PER_GROUP || st > 1)
			return qtk_why(why, wn, "mxfp4 strategy %u / scale type %u: must be 2 and 0 (gpt-oss) or 1 "
					  "(compressed-tensors)", l->strategy, st);
		break;
	case QTK_LAYOUT_BNB4:
		if (l->strategy != QTK_SCHEME_PER_GROUP)
			return qtk_why(why, wn, "bnb4 strategy %u is not 2 (group)", l->strategy);
		if (!float_scale(st))
			return qtk_why(why, wn, "bnb4 scale type %u is not F32, F16 or BF16", st);
		if (l->code_kind > 1)
			return qtk_why(why, wn, "bnb4 code kind %u is not 0 (nf4) or 1 (fp4)", l->code_kind);
		if (l->meta_len < 2 || l->meta_len > QPK_WHOLE_MAX)
			return qtk_why(why, wn, "bnb4 quant_state length %u is not in 2..%u", l->meta_len, QPK_WHOLE_MAX);
		if (l->nested_group && !pow2_in(l->nested_group, 32, 4096))
			return qtk_why(why, wn, "bnb4 nested group %u is not 0 or a power of two in 32..4096", l->nested_group);
		if (t->ndim != 2)
			return qtk_why(why, wn, "shape: a bnb4 tensor has 2 dimensions, not %d", t->ndim);
		return 0;
	case QTK_LAYOUT_BNB8:
		if (l->strategy != QTK_SCHEME_PER_CHANNEL || st != QTK_T_F32)
			return qtk_why(why, wn, "bnb8 strategy %u / scale type %u: must be 1 (channel) and F32 (0)",
				       l->strategy, st);
		break;
	default:
		return 0;
	}
	if (l->code_kind || l->meta_len || l->nested_group)
		return qtk_why(why, wn, "code kind %u, meta length %u, nested group %u: must be 0 for this layout",
			       l->code_kind, l->meta_len, l->nested_group);
	if (t->ndim != 2 && !(t->ndim == 3 && l->kind == QTK_LAYOUT_MXFP4))
		return qtk_why(why, wn, "shape: this layout has 2 dimensions%s, not %d",
			       l->kind == QTK_LAYOUT_MXFP4 ? " (3 for a stack of experts)" : "", t->ndim);
	return 0;
}

/* Every structural rule on a tensor description (§7.2, §8): ranks, types, part
 * sizes against shapes, and the layout's parameters. 0 or QTK_E_DATA with
 * the problem (naming the field) in why. */
int qtk_qpk_check_tensor(const qtk_tensor *t, char *why, size_t wn)
{
	const qtk_layout *l = &t->layout;
	if (t->ndim < 0 || t->ndim > QTK_MAX_DIMS)
		return qtk_why(why, wn, "ndim %d out of range (0..%d)", t->ndim, QTK_MAX_DIMS);
	uint64_t n = 1;
	for (int d = 0; d < t->ndim; d++)
		if (t->shape[d] >= (1ull << 63) || !qtk_mul_u64(n, t->shape[d], &n))
			return qtk_why(why, wn, "shape: element count overflows");
	if (!qtk_type(l->type))
		return qtk_why(why, wn, "storage type %u is unknown", l->type);
	if (t->nparts < 1 || t->nparts > QTK_MAX_PARTS)
		return qtk_why(why, wn, "nparts %d out of range (1..%d)", t->nparts, QTK_MAX_PARTS);
	for (int p = 0; p < t->nparts; p++) {
		const qtk_part *q = &t->parts[p];
		uint64_t want;
		if (q->ndim < 0 || q->ndim > QTK_MAX_DIMS)
			return qtk_why(why, wn, "part %d ndim %d out of range (0..%d)", p, q->ndim, QTK_MAX_DIMS);
		if (!memchr(q->role, 0, sizeof q->role))
			return qtk_why(why, wn, "part %d role is not NUL-terminated", p);
		if (!qtk_type(q->type))
			return qtk_why(why, wn, "part %d storage type %u is unknown", p, q->type);
		for (int d = 0; d < q->ndim; d++)
			if (q->shape[d] >= (1ull << 63))
				return qtk_why(why, wn, "part %d dimension %d is %llu", p, d, (unsigned long long)q->shape[d]);
		if (!part_bytes(q->type, q->ndim, q->shape, &want))
			return qtk_why(why, wn, "part %d: element count does not fit whole %s blocks or overflows", p,
				       qtk_type(q->type)->name);
		if (want != q->nbytes)
			return qtk_why(why, wn, "part %d ('%s') size %llu does not match its shape and type (%llu bytes)", p,
				       q->role, (unsigned long long)q->nbytes, (unsigned long long)want);
	}
	switch (l->kind) {
	case QTK_LAYOUT_PLAIN: {
		if (t->nparts != 1)
			return qtk_why(why, wn, "nparts %d, a plain tensor has 1", t->nparts);
		const qtk_type_info *ti = qtk_type(l->type);
		if (t->ndim >= 1 && ti->blck > 1 && t->shape[t->ndim - 1] % ti->blck)
			return qtk_why(why, wn, "shape: row length %llu is not a multiple of the %s block size %u",
				       (unsigned long long)t->shape[t->ndim - 1], ti->name, ti->blck);
		return want_part(t, 0, "", l->type, t->ndim, t->shape, why, wn);
	}
	case QTK_LAYOUT_AWQ:
	case QTK_LAYOUT_GPTQ:
	case QTK_LAYOUT_MLX: /* §8.6, minor version 1 */
		return check_packed(t, why, wn);
	case QTK_LAYOUT_CT_INT: /* §8.7-§8.12, minor version 2 */
	case QTK_LAYOUT_FP8:
	case QTK_LAYOUT_NVFP4:
	case QTK_LAYOUT_MXFP4:
	case QTK_LAYOUT_BNB4:
	case QTK_LAYOUT_BNB8: {
		int rc = check_params(t, why, wn);
		return rc ? rc : check_packed(t, why, wn);
	}
	default: /* kinds this version of QPK does not describe (formats/qpk.md §8) */
		break;
	}
	return qtk_why(why, wn, "layout kind %u is unknown", (unsigned)l->kind);
}


int qtk_qpk_gchk_feed(gchk *g, const uint8_t *b, size_t n, char *why, size_t wn)
{
	for (size_t k = 0; k + 4 <= n; k += 4, g->i++) {
		int32_t v = (int32_t)qtk_rd32(b + k);
		if (v < 0 || (uint64_t)v >= g->ngroups)
			return qtk_why(why, wn, "g_idx[%llu] = %d is outside [0, %llu)", (unsigned long long)g->i, v,
				       (unsigned long long)g->ngroups);
		if (!g->act && (uint64_t)v != g->i / g->group)
			return qtk_why(why, wn, "g_idx[%llu] = %d but act_order is not set (expected %llu)",
				       (unsigned long long)g->i, v, (unsigned long long)(g->i / g->group));
		if (g->act && ++g->cnt[v] > g->group)
			return qtk_why(why, wn, "g_idx is not a group map: group %d has more than %u members", v,
				       g->group);
	}
	return 0;
}

/* ---- content rules (§8.5, §8.13) ------------------------------------------------ */

static bool role_is(const qtk_part *q, const char *role) { return !strncmp(q->role, role, sizeof q->role); }

qpk_cc qtk_qpk_content_kind(const qtk_tensor *t, int p)
{
	const qtk_part *q = &t->parts[p];
	switch (t->layout.kind) {
	case QTK_LAYOUT_GPTQ:
		return role_is(q, "g_idx") ? QPK_CC_GIDX : QPK_CC_NONE;
	case QTK_LAYOUT_CT_INT:
		return role_is(q, "g_idx") ? QPK_CC_GIDX : role_is(q, "shape") ? QPK_CC_WHOLE : QPK_CC_NONE;
	case QTK_LAYOUT_BNB4:
		if (role_is(q, "qs_nf4") || role_is(q, "qs_fp4") || role_is(q, "qmap") || role_is(q, "nqmap"))
			return QPK_CC_WHOLE;
		return role_is(q, "nabsmax") ? QPK_CC_VALUES : QPK_CC_NONE;
	default:
		return QPK_CC_NONE;
	}
}

static float f32_le(const uint8_t *b)
{
	uint32_t u = qtk_rd32(b);
	float f;
	memcpy(&f, &u, 4);
	return f;
}

int qtk_qpk_check_whole(const qtk_tensor *t, int p, const uint8_t *b, size_t n, char *why, size_t wn)
{
	const qtk_part *q = &t->parts[p];
	const qtk_layout *l = &t->layout;
	if (n != q->nbytes || n > QPK_WHOLE_MAX)
		return qtk_why(why, wn, "part '%.8s' is %zu bytes, expected %llu", q->role, n, (unsigned long long)q->nbytes);
	if (role_is(q, "shape")) { /* ct-int weight_shape: I64 [out, in] */
		int64_t a = (int64_t)qtk_rd64(b), c = (int64_t)qtk_rd64(b + 8);
		if (n != 16 || a < 0 || c < 0 || (uint64_t)a != t->shape[0] || (uint64_t)c != t->shape[1])
			return qtk_why(why, wn, "part 'shape' holds [%lld, %lld], not the tensor's shape [%llu, %llu]",
				       (long long)a, (long long)c, (unsigned long long)t->shape[0],
				       (unsigned long long)t->shape[1]);
		return 0;
	}
	if (role_is(q, "qmap")) { /* bitsandbytes' code table of the code kind */
		const uint32_t *tab = qtk_bnb_code_table(l->code_kind == 1);
		for (int k = 0; k < 16 && n == 64; k++) {
			uint32_t v = qtk_rd32(b + 4 * k);
			if (v != tab[k] && !(l->code_kind == 1 && k == 8 && v == 0x80000000u))
				return qtk_why(why, wn, "part 'qmap': value %d is not bitsandbytes' %s code", k,
					       l->code_kind == 1 ? "fp4" : "nf4");
		}
		return 0;
	}
	if (role_is(q, "nqmap")) { /* the nested (signed dynamic) map: values in [-1, 1] */
		for (size_t k = 0; k + 4 <= n; k += 4) {
			float v = f32_le(b + k);
			if (!(v >= -1.0f && v <= 1.0f))
				return qtk_why(why, wn, "part 'nqmap': value %zu is not in [-1, 1]", k / 4);
		}
		return 0;
	}
	/* qs_nf4 / qs_fp4: the quant_state JSON, which must say what the layout says */
	qtk_bnb_state st;
	char w2[240];
	if (qtk_bnb_parse_state((const char *)b, n, &st, w2, sizeof w2))
		return qtk_why(why, wn, "part '%.8s': %s", q->role, w2);
	if (st.fp4 != (l->code_kind == 1) || st.blocksize != l->group_size || st.dtype != l->scale_type ||
	    st.out != t->shape[0] || st.in != t->shape[1] || st.nested_blocksize != l->nested_group)
		return qtk_why(why, wn, "part '%.8s': quant_state (%s, blocksize %u, %s, shape [%llu, %llu], nested blocksize "
			       "%u) differs from the layout", q->role, st.fp4 ? "fp4" : "nf4", st.blocksize,
			       qtk_type(st.dtype)->upper, (unsigned long long)st.out, (unsigned long long)st.in,
			       st.nested_blocksize);
	return 0;
}

int qtk_qpk_check_values(const qtk_tensor *t, int p, uint64_t off, const uint8_t *b, size_t n, char *why, size_t wn)
{
	(void)t, (void)p;
	for (size_t k = 0; k + 4 <= n; k += 4) { /* bnb4 nabsmax: finite, not negative */
		float v = f32_le(b + k);
		if (!isfinite(v) || v < 0)
			return qtk_why(why, wn, "part 'nabsmax': value %llu is not a finite non-negative number",
				       (unsigned long long)((off + k) / 4));
	}
	return 0;
}

int qtk_qpk_gchk_init(gchk *g, const qtk_tensor *t)
{
	memset(g, 0, sizeof *g);
	g->group = t->layout.group_size;
	g->ngroups = t->shape[1] / g->group;
	g->act = t->layout.act_order;
	if (g->act && !(g->cnt = qtk_calloc((size_t)g->ngroups, sizeof *g->cnt)))
		return QTK_E_IO;
	return 0;
}

/* ---- reader: a bounded cursor over a section held in memory --------------- */

typedef struct rd {
	qtk_model *m;
	const char *path;
	uint64_t size;
	uint64_t meta_bytes; /* metadata bytes held (QTK_CAP_META_TOTAL) */
} rd;

/* A section is read through a window: the whole section when stored raw (its bytes are the
 * file's), else the bytes decoded so far, decoded as the parser asks for them (zstd streaming),
 * so memory follows what the parser takes and a section declaring more than it holds, or a
 * field over its limit, is refused before the rest is decoded. */
#define MC_CHUNK ((size_t)1 << 20)

typedef struct mc {
	rd *r;
	const uint8_t *p; /* the window: section bytes [wpos, wpos + wlen) */
	uint64_t n, pos;
	uint64_t base;    /* file offset of the section */
	bool z;           /* decompressed: positions are not file offsets */
	const char *sect; /* "metadata", "index" */
	uint64_t wpos, wlen;
	uint64_t keep;    /* the window keeps bytes from here on (UINT64_MAX: from pos on) */
	uint8_t *wbuf;    /* zstd: the window's buffer */
	size_t wcap;
	ZSTD_DCtx *dc;
	ZSTD_inBuffer in;
	bool zend;        /* the frame's end was reached */
	uint8_t *own;     /* the stored bytes (raw: the window; zstd: the decoder's input) */
} mc;

static int cerr(mc *c, uint64_t pos, const char *subject, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int cerr(mc *c, uint64_t pos, const char *subject, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->z)
		return qtk_err_set(&c->r->m->err, QTK_E_DATA, c->r->path, (int64_t)c->base, subject,
				   "%s (at 0x%llx in the decompressed %s section)", msg, (unsigned long long)pos, c->sect);
	return qtk_err_set(&c->r->m->err, QTK_E_DATA, c->r->path, (int64_t)(c->base + pos), subject, "%s", msg);
}

static int oom(rd *r) { return qtk_err_set(&r->m->err, QTK_E_IO, r->path, -1, NULL, "out of memory"); }

static uint64_t mc_left(const mc *c) { return c->n - c->pos; }

/* Decode until the window holds section bytes up to `end` (<= n). */
static int mc_fill(mc *c, uint64_t end, const char *subject)
{
	if (end <= c->wpos + c->wlen)
		return 0;
	if (!c->dc)
		return cerr(c, c->pos, subject, "internal: section window");
	uint64_t lo = c->keep < c->pos ? c->keep : c->pos;
	if (lo > c->wpos) { /* drop what the parser is done with */
		uint64_t drop = lo - c->wpos < c->wlen ? lo - c->wpos : c->wlen;
		memmove(c->wbuf, c->wbuf + drop, (size_t)(c->wlen - drop));
		c->wpos += drop;
		c->wlen -= drop;
	}
	uint64_t need = end - c->wpos, room = c->n - c->wpos;
	if (need > c->wcap || (c->wcap < MC_CHUNK && room > c->wcap)) {
		uint64_t nc = need > MC_CHUNK ? need : MC_CHUNK;
		if (nc > room)
			nc = room;
		if (nc > SIZE_MAX)
			return oom(c->r);
		uint8_t *b = qtk_realloc(c->wbuf, (size_t)nc ? (size_t)nc : 1);
		if (!b)
			return oom(c->r);
		c->wbuf = b;
		c->wcap = (size_t)nc;
	}
	c->p = c->wbuf;
	size_t lim = (size_t)(room < c->wcap ? room : c->wcap);
	ZSTD_outBuffer out = {c->wbuf, lim, (size_t)c->wlen};
	while (c->wpos + out.pos < end) {
		if (c->zend)
			return cerr(c, c->wpos + out.pos, subject, "zstd frame decodes to %llu bytes, the %s section declares %llu",
				    (unsigned long long)(c->wpos + out.pos), c->sect, (unsigned long long)c->n);
		size_t in0 = c->in.pos, out0 = out.pos;
		size_t ret = ZSTD_decompressStream(c->dc, &out, &c->in);
		if (ZSTD_isError(ret))
			return cerr(c, c->wpos + out.pos, subject, "zstd: %s", ZSTD_getErrorName(ret));
		if (ret == 0)
			c->zend = true;
		else if (c->in.pos == in0 && out.pos == out0)
			return cerr(c, c->wpos + out.pos, subject, "zstd frame is truncated or larger than declared");
	}
	c->wlen = out.pos;
	return 0;
}

/* All of the section taken: the frame must end there, its checksum right. */
static int mc_finish(mc *c)
{
	if (!c->dc)
		return 0;
	int rc = mc_fill(c, c->n, NULL);
	if (rc)
		return rc;
	uint8_t extra;
	while (!c->zend) {
		ZSTD_outBuffer out = {&extra, 1, 0};
		size_t in0 = c->in.pos;
		size_t ret = ZSTD_decompressStream(c->dc, &out, &c->in);
		if (ZSTD_isError(ret))
			return cerr(c, c->n, NULL, "zstd: %s", ZSTD_getErrorName(ret));
		if (out.pos)
			return cerr(c, c->n, NULL, "zstd frame decodes to more than the %llu bytes the %s section declares",
				    (unsigned long long)c->n, c->sect);
		if (ret == 0)
			c->zend = true;
		else if (c->in.pos == in0)
			return cerr(c, c->n, NULL, "zstd frame is truncated");
	}
	if (c->in.pos != c->in.size)
		return cerr(c, c->n, NULL, "%zu bytes of trailing garbage after the zstd frame", c->in.size - c->in.pos);
	return 0;
}

static void mc_free(mc *c)
{
	qtk_free(c->wbuf);
	qtk_free(c->own);
	c->wbuf = c->own = NULL;
	c->p = NULL;
}

static const uint8_t *mc_take(mc *c, uint64_t n, const char *field, const char *subject)
{
	if (n > mc_left(c)) {
		cerr(c, c->pos, subject, "truncated: need %llu bytes for %s, the %s section ends %llu bytes later",
		     (unsigned long long)n, field, c->sect, (unsigned long long)mc_left(c));
		return NULL;
	}
	if (mc_fill(c, c->pos + n, subject))
		return NULL;
	const uint8_t *p = c->p + (c->pos - c->wpos);
	c->pos += n;
	return p;
}

static int mc_u8(mc *c, uint8_t *v, const char *f, const char *s)
{
	const uint8_t *p = mc_take(c, 1, f, s);
	if (p)
		*v = p[0];
	return p ? 0 : QTK_E_DATA;
}
static int mc_u32(mc *c, uint32_t *v, const char *f, const char *s)
{
	const uint8_t *p = mc_take(c, 4, f, s);
	if (p)
		*v = qtk_rd32(p);
	return p ? 0 : QTK_E_DATA;
}
static int mc_u64(mc *c, uint64_t *v, const char *f, const char *s)
{
	const uint8_t *p = mc_take(c, 8, f, s);
	if (p)
		*v = qtk_rd64(p);
	return p ? 0 : QTK_E_DATA;
}

/* A length-prefixed byte string (§2): checks the length against cap and
 * the bytes left; *s points into the section (not NUL-terminated). */
static int mc_str(mc *c, uint64_t cap, const char *field, const char *subject, const uint8_t **s, uint64_t *len)
{
	uint64_t at = c->pos;
	int rc = mc_u64(c, len, field, subject);
	if (rc)
		return rc;
	if (*len > cap)
		return cerr(c, at, subject, "%s length %llu exceeds the limit of %llu", field, (unsigned long long)*len,
			    (unsigned long long)cap);
	if (*len > mc_left(c))
		return cerr(c, at, subject, "%s length %llu exceeds the %llu bytes left in the %s section", field,
			    (unsigned long long)*len, (unsigned long long)mc_left(c), c->sect);
	*s = mc_take(c, *len, field, subject);
	return *s ? 0 : QTK_E_DATA;
}

static int hold(mc *c, uint64_t at, uint64_t n, const char *subject)
{
	if (!qtk_add_u64(c->r->meta_bytes, n, &c->r->meta_bytes) || c->r->meta_bytes > QTK_CAP_META_TOTAL)
		return cerr(c, at, subject, "metadata exceeds the limit of %llu bytes",
			    (unsigned long long)QTK_CAP_META_TOTAL);
	return 0;
}

static int mc_qstr(mc *c, uint64_t cap, const char *field, const char *subject, qtk_str *out)
{
	const uint8_t *s = NULL;
	uint64_t len, at = c->pos;
	int rc = mc_str(c, cap, field, subject, &s, &len);
	if (rc || (rc = hold(c, at, len, subject)))
		return rc;
	out->s = qtk_strndup((const char *)s, (size_t)len);
	out->len = len;
	return out->s ? 0 : oom(c->r);
}

/* ---- reader: metadata section (§6) --------------------------------------- */

static int read_scalar(mc *c, unsigned type, qtk_value *v, const char *key)
{
	uint64_t at = c->pos;
	const uint8_t *b = mc_take(c, qtk_value_size(type), "value", key);
	if (!b)
		return QTK_E_DATA;
	if (type == QTK_V_BOOL && b[0] > 1)
		return cerr(c, at, key, "bool value is %u, not 0 or 1", b[0]);
	qtk_value_from_le(v, type, b);
	return 0;
}

static int read_array(mc *c, qtk_value *v, const char *key)
{
	uint64_t at = c->pos, n;
	uint32_t et;
	int rc;
	if ((rc = mc_u32(c, &et, "array element type", key)) || (rc = mc_u64(c, &n, "array length", key)))
		return rc;
	if (et >= QTK_V_MAX)
		return cerr(c, at, key, "unknown array element type %u", et);
	if (et == QTK_V_ARR)
		return cerr(c, at, key, "nested arrays are not supported");
	uint64_t esz = et == QTK_V_STR ? 8 : qtk_value_size(et), need;
	if (n > QTK_CAP_ARRAY || !qtk_mul_u64(n, esz, &need) || need > mc_left(c))
		return cerr(c, at + 4, key, "array length %llu exceeds the %llu bytes left in the %s section",
			    (unsigned long long)n, (unsigned long long)mc_left(c), c->sect);
	v->type = QTK_V_ARR;
	v->elem = (uint8_t)et;
	if (et == QTK_V_STR) {
		qtk_str *s = qtk_calloc((size_t)n ? (size_t)n : 1, sizeof *s);
		if (!s)
			return oom(c->r);
		v->arr = s;
		for (uint64_t i = 0; i < n; i++) {
			if ((rc = mc_qstr(c, QTK_CAP_STR, "array string", key, &s[i])))
				return rc;
			v->n = i + 1; /* qtk_value_free frees what was read */
		}
		return 0;
	}
	if ((rc = hold(c, at, need, key)))
		return rc;
	if (!(v->arr = qtk_malloc((size_t)need ? (size_t)need : 1)))
		return oom(c->r);
	v->n = n;
	uint64_t data_at = c->pos;
	const uint8_t *data = mc_take(c, need, "array data", key);
	if (!data)
		return QTK_E_DATA;
	memcpy(v->arr, data, (size_t)need);
	if (et == QTK_V_BOOL)
		for (uint64_t i = 0; i < n; i++)
			if (((uint8_t *)v->arr)[i] > 1)
				return cerr(c, data_at + i, key, "bool array element %llu is %u, not 0 or 1",
					    (unsigned long long)i, ((uint8_t *)v->arr)[i]);
	return 0;
}

static int read_value(mc *c, qtk_value *v, const char *key)
{
	uint64_t at = c->pos;
	uint32_t type;
	int rc = mc_u32(c, &type, "value type", key);
	if (rc)
		return rc;
	if (type >= QTK_V_MAX)
		return cerr(c, at, key, "unknown value type %u", type);
	if (type == QTK_V_STR) {
		v->type = QTK_V_STR;
		return mc_qstr(c, QTK_CAP_STR, "string", key, &v->v.str);
	}
	return type == QTK_V_ARR ? read_array(c, v, key) : read_scalar(c, type, v, key);
}

/* Names (keys, tensor and blob names): 1..cap bytes of UTF-8 without NUL. */
static bool name_ok(const uint8_t *s, uint64_t len)
{
	return len > 0 && !memchr(s, 0, (size_t)len) && qtk_utf8_valid((const char *)s, (size_t)len);
}

/* Blob names are plain file names (§6.4): no '/', '\\', leading '.'. */
bool qtk_qpk_blob_name_ok(const char *s, size_t len)
{
	return len > 0 && len <= QPK_CAP_BLOB_NAME && s[0] != '.' && !memchr(s, '/', len) &&
	       !memchr(s, '\\', len) && !memchr(s, 0, len) && qtk_utf8_valid(s, len);
}

static int parse_kvs(mc *c)
{
	rd *r = c->r;
	uint64_t at = c->pos, n;
	int rc = mc_u64(c, &n, "kv count", NULL);
	if (rc)
		return rc;
	if (n > QTK_CAP_KV || n > mc_left(c) / MIN_KV)
		return cerr(c, at, NULL, "kv count %llu is impossible for the %llu bytes that follow",
			    (unsigned long long)n, (unsigned long long)mc_left(c));
	qtk_strset seen = {0};
	for (uint64_t i = 0; i < n && !rc; i++) {
		const uint8_t *k = NULL;
		uint64_t klen;
		at = c->pos;
		if ((rc = mc_str(c, QTK_CAP_KEY, "key", NULL, &k, &klen)))
			break;
		if (!name_ok(k, klen)) {
			rc = cerr(c, at, NULL, "key is empty, contains NUL or is not UTF-8");
			break;
		}
		char *key = qtk_strndup((const char *)k, (size_t)klen);
		qtk_kv *kv = key ? qtk_model_add_kv(r->m, key) : NULL;
		qtk_free(key);
		if (!kv) {
			rc = oom(r);
			break;
		}
		if ((rc = read_value(c, &kv->val, kv->key)))
			break;
		int added = qtk_strset_add(&seen, kv->key);
		if (added < 0)
			rc = oom(r);
		else if (added == 0)
			rc = cerr(c, at, kv->key, "duplicate key");
	}
	qtk_strset_free(&seen);
	return rc;
}

static int parse_blobs(mc *c)
{
	rd *r = c->r;
	uint64_t at = c->pos, n;
	int rc = mc_u64(c, &n, "blob count", NULL);
	if (rc)
		return rc;
	if (n > QPK_CAP_BLOBS || n > mc_left(c) / MIN_BLOB)
		return cerr(c, at, NULL, "blob count %llu is impossible for the %llu bytes that follow (limit %u)",
			    (unsigned long long)n, (unsigned long long)mc_left(c), QPK_CAP_BLOBS);
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *nm = NULL, *data = NULL;
		uint64_t nlen, dlen;
		at = c->pos;
		if ((rc = mc_str(c, QPK_CAP_BLOB_NAME, "blob name", NULL, &nm, &nlen)))
			return rc;
		char name[QPK_CAP_BLOB_NAME + 1];
		memcpy(name, nm, (size_t)nlen);
		name[nlen] = 0;
		if (!qtk_qpk_blob_name_ok((const char *)nm, (size_t)nlen))
			return cerr(c, at, NULL, "blob name is not a plain file name");
		if (qtk_blob_find(r->m, name))
			return cerr(c, at, name, "duplicate blob name");
		if ((rc = mc_str(c, QTK_CAP_BLOB, "blob data", name, &data, &dlen)))
			return rc;
		if (qtk_model_add_blob(r->m, name, data, (size_t)dlen))
			return oom(r);
	}
	return 0;
}

static int parse_meta(mc *c)
{
	uint32_t src_align, reserved;
	int rc;
	if ((rc = mc_u32(c, &src_align, "source alignment", NULL)) || (rc = mc_u32(c, &reserved, "reserved", NULL)))
		return rc;
	if (reserved)
		return cerr(c, 4, NULL, "reserved field is %u, not 0", reserved);
	c->r->m->alignment = src_align;
	if ((rc = parse_kvs(c)) || (rc = parse_blobs(c)))
		return rc;
	if (mc_left(c))
		return cerr(c, c->pos, NULL, "%llu bytes of trailing garbage in the metadata section",
			    (unsigned long long)mc_left(c));
	return 0;
}

/* ---- reader: zstd frames (§5) --------------------------------------------- */

/* Decode one zstd frame of exactly `raw` bytes from src[0..n) into dst.
 * Enforces: one frame, declared content size == raw, content checksum on,
 * no dictionary, window <= 2^27, no trailing bytes. why gets the problem. */
/* The frame rules that need no decoding (one frame of n bytes declaring raw). */
static int zframe_check(const uint8_t *src, size_t n, uint64_t raw, char *why, size_t wn)
{
	if (n < 6 || qtk_rd32(src) != QPK_ZSTD_MAGIC)
		return qtk_why(why, wn, "not a zstd frame (bad frame magic)");
	uint8_t fhd = src[4];
	if (fhd & 3)
		return qtk_why(why, wn, "zstd frame needs a dictionary");
	if (!(fhd & 4))
		return qtk_why(why, wn, "zstd frame has no content checksum");
	unsigned long long cs = ZSTD_getFrameContentSize(src, n);
	if (cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR)
		return qtk_why(why, wn, "zstd frame does not declare its content size");
	if (cs != raw)
		return qtk_why(why, wn, "zstd frame declares %llu bytes, the index says %llu", cs, (unsigned long long)raw);
	size_t fs = ZSTD_findFrameCompressedSize(src, n);
	if (ZSTD_isError(fs))
		return qtk_why(why, wn, "bad zstd frame: %s", ZSTD_getErrorName(fs));
	if (fs != n)
		return qtk_why(why, wn, "%zu bytes of trailing garbage after the zstd frame", n - fs);
	return 0;
}

static int unzstd(ZSTD_DCtx *dc, const uint8_t *src, size_t n, uint8_t *dst, size_t raw, char *why, size_t wn)
{
	if (zframe_check(src, n, raw, why, wn))
		return QTK_E_DATA;
	ZSTD_DCtx_reset(dc, ZSTD_reset_session_only);
	ZSTD_inBuffer in = {src, n, 0};
	ZSTD_outBuffer out = {dst, raw, 0};
	for (;;) {
		size_t in0 = in.pos, out0 = out.pos;
		size_t ret = ZSTD_decompressStream(dc, &out, &in);
		if (ZSTD_isError(ret))
			return qtk_why(why, wn, "zstd: %s", ZSTD_getErrorName(ret));
		if (ret == 0)
			break;
		if (in.pos == in0 && out.pos == out0)
			return qtk_why(why, wn, "zstd frame is truncated or larger than declared");
	}
	if (out.pos != raw || in.pos != n)
		return qtk_why(why, wn, "zstd frame decodes to %zu bytes, expected %zu", out.pos, raw);
	return 0;
}

static ZSTD_DCtx *new_dctx(void)
{
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	if (dc && ZSTD_isError(ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, QPK_WINDOW_LOG_MAX))) {
		ZSTD_freeDCtx(dc);
		dc = NULL;
	}
	return dc;
}

/* ---- reader: state --------------------------------------------------------- */

typedef struct qchunk {
	uint64_t off, stored, raw;
	uint8_t codec;
} qchunk;

/* The next zstd chunk, read and decompressed on a thread of its own while the caller uses the
 * current one (sequential reads: a copy, a check). Its failures are not reported: the chunk is
 * then loaded again in the caller's thread, which reports them. */
typedef struct qahead {
	struct qtk_model *m;
	size_t ci;          /* the chunk; SIZE_MAX when none */
	uint8_t *zin, *dbuf;
	ZSTD_DCtx *dc;
	int rc;
	bool on;            /* the thread is running */
	pthread_t th;
} qahead;

/* Part digests checked on a thread of their own (qtk_read_verify_async): the checked reads'
 * bytes are copied into a FIFO (at most QPK_VQ_CAP bytes queued, in jobs of at most
 * QPK_VQ_JOB), which the thread hashes in order, comparing at each part's end. */
#define QPK_VQ_CAP (8u << 20)
#define QPK_VQ_JOB (1u << 20)
enum { VJ_START, VJ_DATA, VJ_END };
typedef struct vjob {
	struct vjob *next;
	size_t key;
	int op;
	size_t n;
	uint8_t data[];
} vjob;

typedef struct qverq {
	struct qtk_model *m;
	pthread_mutex_t mu;
	pthread_cond_t cv;  /* a job queued, room made, the queue idle: broadcast */
	vjob *head, *tail;
	size_t bytes;       /* data bytes queued */
	bool busy;          /* the thread holds a job */
	bool stop;
	pthread_t th;
	EVP_MD_CTX *md;
	size_t key;         /* the part being hashed, SIZE_MAX when none */
	int rc;             /* the first mismatch, reported by the next read or qtk_read_settle */
	qtk_err err;
} qverq;

typedef struct qloc {
	uint64_t chunk0;   /* first chunk in priv->chunks */
	uint8_t sha[32];   /* SHA-256 of the part's raw bytes */
} qloc;

typedef struct qpk_priv {
	uint32_t chunk_log, align;
	uint64_t data_off, index_off;
	qloc *loc;          /* ntensors * QTK_MAX_PARTS */
	qchunk *chunks;
	size_t nchunks, cap_chunks;
	uint64_t cmax;      /* largest raw chunk of a zstd part */
	uint8_t (*tsha)[32]; /* tensor digests */
	size_t *by_off;     /* part keys (t * 4 + p) of non-empty parts sorted by offset */
	size_t nby_off;
	pthread_mutex_t mu;
	bool mu_ok;
	ZSTD_DCtx *dc;
	uint8_t *zin;       /* compressed chunk staging */
	size_t zin_cap;
	uint8_t *dbuf;      /* last decompressed chunk */
	size_t dcap;
	size_t dchunk;      /* its index, SIZE_MAX when none */
	size_t lastci;      /* the chunk loaded before it (reads moving forward read ahead) */
	qahead ahead;
	/* sequential-read digest check */
	qverq *vq;          /* on its own thread (qtk_read_verify_async); NULL: in the reading thread */
	EVP_MD_CTX *md;
	size_t vkey;        /* part key being hashed, SIZE_MAX when none */
	uint64_t vpos;
} qpk_priv;

/* ---- reader: index section (§7) -------------------------------------------- */

static int parse_part_desc(mc *c, qtk_tensor *t, int p, qloc *loc, const char *subj)
{
	qtk_part *q = &t->parts[p];
	const uint8_t *role = mc_take(c, 8, "part role", subj);
	uint32_t type, nd;
	uint64_t at = c->pos - 8;
	int rc;
	if (!role)
		return QTK_E_DATA;
	const uint8_t *nul = memchr(role, 0, 8);
	if (!nul)
		return cerr(c, at, subj, "part %d role is not NUL-terminated", p);
	for (const uint8_t *z = nul; z < role + 8; z++)
		if (*z)
			return cerr(c, at, subj, "part %d role has bytes after its NUL", p);
	memcpy(q->role, role, 8);
	at = c->pos;
	if ((rc = mc_u32(c, &type, "part type", subj)) || (rc = mc_u32(c, &nd, "part ndim", subj)))
		return rc;
	if (!qtk_type(type))
		return cerr(c, at, subj, "part %d storage type %u is unknown", p, type);
	if (nd > QTK_MAX_DIMS)
		return cerr(c, at + 4, subj, "part %d ndim %u out of range (0..%d)", p, nd, QTK_MAX_DIMS);
	q->type = type;
	q->ndim = (int)nd;
	for (uint32_t d = 0; d < nd; d++)
		if ((rc = mc_u64(c, &q->shape[d], "part dimension", subj)))
			return rc;
	if ((rc = mc_u64(c, &q->nbytes, "part raw size", subj)))
		return rc;
	const uint8_t *sha = mc_take(c, 32, "part digest", subj);
	if (!sha)
		return QTK_E_DATA;
	memcpy(loc->sha, sha, 32);
	q->file = 0;
	return 0;
}

/* Part location (§9.1): offset and chunk table; appends to pv->chunks. */
static int parse_part_loc(mc *c, qpk_priv *pv, qtk_part *q, qloc *loc, const char *subj, uint32_t align)
{
	uint64_t at = c->pos, off, csz = 1ull << pv->chunk_log;
	int rc = mc_u64(c, &off, "part offset", subj);
	if (rc)
		return rc;
	if (off % align)
		return cerr(c, at, subj, "part '%s' offset 0x%llx is not a multiple of the alignment %u", q->role,
			    (unsigned long long)off, align);
	if (off < pv->data_off || off > pv->index_off)
		return cerr(c, at, subj, "part '%s' offset 0x%llx is outside the data section 0x%llx..0x%llx "
			    "(offset beyond end of data)", q->role, (unsigned long long)off,
			    (unsigned long long)pv->data_off, (unsigned long long)pv->index_off);
	uint64_t nch = q->nbytes / csz + (q->nbytes % csz != 0);
	if (nch > mc_left(c) / 16)
		return cerr(c, c->pos, subj, "part '%s' needs %llu chunk entries, the index has %llu bytes left",
			    q->role, (unsigned long long)nch, (unsigned long long)mc_left(c));
	if (pv->nchunks + nch > pv->cap_chunks) {
		size_t nc = pv->cap_chunks ? pv->cap_chunks : 64;
		while (nc < pv->nchunks + nch)
			nc *= 2;
		qchunk *grown = qtk_realloc(pv->chunks, nc * sizeof *grown);
		if (!grown)
			return oom(c->r);
		pv->chunks = grown;
		pv->cap_chunks = nc;
	}
	qchunk *ch = pv->chunks;
	loc->chunk0 = pv->nchunks;
	q->offset = off;
	uint64_t pos = off;
	for (uint64_t i = 0; i < nch; i++) {
		uint64_t raw = i + 1 < nch ? csz : q->nbytes - i * csz, stored;
		at = c->pos;
		const uint8_t *e = mc_take(c, 16, "chunk entry", subj);
		if (!e)
			return QTK_E_DATA;
		stored = qtk_rd64(e);
		uint8_t codec = e[8];
		for (int k = 9; k < 16; k++)
			if (e[k])
				return cerr(c, at + 9, subj, "part '%s' chunk %llu: reserved bytes are not zero", q->role,
					    (unsigned long long)i);
		if (!valid_codec(codec))
			return cerr(c, at + 8, subj, "part '%s' chunk %llu: unknown codec %u", q->role,
				    (unsigned long long)i, codec);
		if (codec == CODEC_RAW ? stored != raw : (stored == 0 || stored >= raw))
			return cerr(c, at, subj, "part '%s' chunk %llu: stored size %llu is impossible for %llu raw bytes "
				    "(codec %s)", q->role, (unsigned long long)i, (unsigned long long)stored,
				    (unsigned long long)raw, codec ? "zstd" : "raw");
		ch[pv->nchunks].off = pos;
		ch[pv->nchunks].stored = stored;
		ch[pv->nchunks].codec = codec;
		ch[pv->nchunks].raw = raw;
		pv->nchunks++;
		if (codec == CODEC_ZSTD && raw > pv->cmax)
			pv->cmax = raw;
		if (!qtk_add_u64(pos, stored, &pos) || pos > pv->index_off)
			return cerr(c, at, subj, "part '%s' offset beyond end of data: chunk %llu ends past the data "
				    "section end 0x%llx", q->role, (unsigned long long)i,
				    (unsigned long long)pv->index_off);
	}
	return 0;
}

static int parse_tensor(mc *c, qpk_priv *pv, qtk_strset *names, uint32_t align)
{
	rd *r = c->r;
	uint64_t rec = c->pos, at = c->pos, nlen;
	const uint8_t *nm = NULL;
	c->keep = rec; /* the description is hashed whole below */
	int rc = mc_str(c, QTK_CAP_NAME, "tensor name", NULL, &nm, &nlen);
	if (rc)
		return rc;
	if (!name_ok(nm, nlen))
		return cerr(c, at, NULL, "tensor name is empty, contains NUL or is not UTF-8");
	char *name = qtk_strndup((const char *)nm, (size_t)nlen);
	qtk_tensor *t = name ? qtk_model_add_tensor_room(r->m, name, 0) : NULL; /* parts below */
	qtk_free(name);
	if (!t)
		return oom(r);
	size_t ti = r->m->ntensors - 1;
	char subj[96];
	snprintf(subj, sizeof subj, "tensor '%.80s'", t->name);
	int added = qtk_strset_add(names, t->name);
	if (added < 0)
		return oom(r);
	if (added == 0)
		return cerr(c, at, subj, "duplicate tensor name");
	uint8_t kind, bits, gv, flags;
	uint32_t type, group, nd, np;
	at = c->pos;
	if ((rc = mc_u8(c, &kind, "layout kind", subj)) || (rc = mc_u8(c, &bits, "bits", subj)) ||
	    (rc = mc_u8(c, &gv, "gptq version", subj)) || (rc = mc_u8(c, &flags, "flags", subj)) ||
	    (rc = mc_u32(c, &type, "storage type", subj)) || (rc = mc_u32(c, &group, "group size", subj)) ||
	    (rc = mc_u32(c, &nd, "ndim", subj)) || (rc = mc_u32(c, &np, "nparts", subj)))
		return rc;
	if (kind >= QTK_LAYOUT_KINDS)
		return cerr(c, at, subj, "layout kind %u is unknown", kind);
	if (flags & ~(TF_SYM | TF_ACT_ORDER))
		return cerr(c, at + 3, subj, "flags 0x%02x has unknown bits", flags);
	if (nd > QTK_MAX_DIMS)
		return cerr(c, at + 12, subj, "ndim %u out of range (0..%d)", nd, QTK_MAX_DIMS);
	if (np < 1 || np > QTK_MAX_PARTS)
		return cerr(c, at + 16, subj, "nparts %u out of range (1..%d)", np, QTK_MAX_PARTS);
	t->layout.kind = (qtk_layout_kind)kind;
	t->layout.bits = bits;
	t->layout.gptq_version = gv;
	t->layout.sym = flags & TF_SYM;
	t->layout.act_order = (flags & TF_ACT_ORDER) != 0;
	t->layout.type = type;
	t->layout.group_size = group;
	t->ndim = (int)nd;
	if (qtk_model_tensor_room(r->m, t, (int)np))
		return oom(r);
	t->nparts = (int)np;
	if (qpk_has_params(kind)) { /* Layout_Params (§7.2), minor version 2 */
		uint64_t pat = c->pos;
		const uint8_t *lp = mc_take(c, QPK_PARAMS_SIZE, "layout parameters", subj);
		if (!lp)
			return QTK_E_DATA;
		if (qtk_rd16(lp + 6))
			return cerr(c, pat + 6, subj, "reserved layout parameter bytes are not zero");
		t->layout.strategy = lp[0];
		t->layout.code_kind = lp[1];
		t->layout.scale_type = qtk_rd16(lp + 2);
		t->layout.meta_len = qtk_rd16(lp + 4);
		t->layout.nested_group = qtk_rd32(lp + 8);
	}
	for (uint32_t d = 0; d < nd; d++)
		if ((rc = mc_u64(c, &t->shape[d], "dimension", subj)))
			return rc;
	qloc *loc = &pv->loc[ti * QTK_MAX_PARTS];
	for (int p = 0; p < t->nparts; p++)
		if ((rc = parse_part_desc(c, t, p, &loc[p], subj)))
			return rc;
	uint64_t desc_end = c->pos;
	char why[300];
	if (qtk_qpk_check_tensor(t, why, sizeof why))
		return cerr(c, at, subj, "%s", why);
	qtk_tensor_finish(t);
	const uint8_t *tsha = mc_take(c, 32, "tensor digest", subj);
	if (!tsha)
		return QTK_E_DATA;
	uint8_t calc[32];
	if (qtk_qpk_sha256(tensor_tag, sizeof tensor_tag, c->p + (rec - c->wpos), (size_t)(desc_end - rec), calc))
		return oom(r);
	c->keep = UINT64_MAX;
	if (memcmp(calc, tsha, 32) != 0)
		return cerr(c, desc_end, subj, "tensor digest does not match the tensor's description");
	memcpy(pv->tsha[ti], tsha, 32);
	static const uint8_t empty_sha[32] = {
		0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
		0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};
	for (int p = 0; p < t->nparts; p++) {
		if (!t->parts[p].nbytes && memcmp(loc[p].sha, empty_sha, 32) != 0)
			return cerr(c, rec, subj, "part %d digest mismatch: the part is empty", p);
		if ((rc = parse_part_loc(c, pv, &t->parts[p], &loc[p], subj, align)))
			return rc;
	}
	return 0;
}

typedef struct ext {
	uint64_t off, end;
	size_t key;
} ext;

static int cmp_ext(const void *a, const void *b)
{
	const ext *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Part extents (§9.2) must not overlap and are packed: the gaps before each
 * extent and before the index are alignment padding only. Builds pv->by_off. */
static int check_extents(rd *r, qpk_priv *pv)
{
	qtk_model *m = r->m;
	ext *e = qtk_calloc(m->ntensors * QTK_MAX_PARTS + 1, sizeof *e);
	if (!e)
		return oom(r);
	size_t n = 0;
	for (size_t i = 0; i < m->ntensors; i++)
		for (int p = 0; p < m->tensors[i].nparts; p++) {
			const qtk_part *q = &m->tensors[i].parts[p];
			if (!q->nbytes)
				continue;
			const qloc *l = &pv->loc[i * QTK_MAX_PARTS + (size_t)p];
			uint64_t nch = q->nbytes / (1ull << pv->chunk_log) + (q->nbytes % (1ull << pv->chunk_log) != 0);
			e[n].off = q->offset;
			e[n].end = pv->chunks[l->chunk0 + nch - 1].off + pv->chunks[l->chunk0 + nch - 1].stored;
			e[n].key = i * QTK_MAX_PARTS + (size_t)p;
			n++;
		}
	qsort(e, n, sizeof *e, cmp_ext);
	int rc = 0;
	for (size_t i = 1; i < n && !rc; i++)
		if (e[i].off < e[i - 1].end) {
			const qtk_tensor *a = &m->tensors[e[i].key / QTK_MAX_PARTS];
			const qtk_tensor *b = &m->tensors[e[i - 1].key / QTK_MAX_PARTS];
			rc = qtk_err_set(&m->err, QTK_E_DATA, r->path, (int64_t)e[i].off, a->name,
					 "part '%s' data 0x%llx..0x%llx overlaps part '%s' of tensor '%.200s'",
					 a->parts[e[i].key % QTK_MAX_PARTS].role, (unsigned long long)e[i].off,
					 (unsigned long long)e[i].end, b->parts[e[i - 1].key % QTK_MAX_PARTS].role, b->name);
		}
	for (size_t i = 0; i <= n && !rc; i++) { /* parts are packed: gaps are alignment padding only */
		uint64_t prev = i ? e[i - 1].end : pv->data_off, next = i < n ? e[i].off : pv->index_off;
		const char *who = i < n ? m->tensors[e[i].key / QTK_MAX_PARTS].name : NULL;
		if (next >= prev && next - prev >= pv->align)
			rc = qtk_err_set(&m->err, QTK_E_DATA, r->path, (int64_t)prev, who,
					 "gap of %llu bytes before %s at 0x%llx: parts must be packed with only "
					 "alignment padding", (unsigned long long)(next - prev),
					 i < n ? "part data" : "the index", (unsigned long long)next);
	}
	if (!rc && !(pv->by_off = qtk_calloc(n + 1, sizeof *pv->by_off)))
		rc = oom(r);
	for (size_t i = 0; i < n && !rc; i++)
		pv->by_off[i] = e[i].key;
	pv->nby_off = n;
	qtk_free(e);
	return rc;
}

static int parse_index(mc *c, qpk_priv *pv, uint32_t align)
{
	rd *r = c->r;
	uint64_t n;
	int rc = mc_u64(c, &n, "tensor count", NULL);
	if (rc)
		return rc;
	if (n > QTK_CAP_TENSORS || n > mc_left(c) / MIN_TENSOR)
		return cerr(c, 0, NULL, "tensor count %llu is impossible for the %llu bytes that follow",
			    (unsigned long long)n, (unsigned long long)mc_left(c));
	pv->loc = qtk_calloc((size_t)n * QTK_MAX_PARTS + 1, sizeof *pv->loc);
	pv->tsha = qtk_calloc((size_t)n + 1, sizeof *pv->tsha);
	if (!pv->loc || !pv->tsha)
		return oom(r);
	qtk_strset names = {0};
	for (uint64_t i = 0; i < n && !rc; i++)
		rc = parse_tensor(c, pv, &names, align);
	qtk_strset_free(&names);
	if (!rc && mc_left(c))
		rc = cerr(c, c->pos, NULL, "%llu bytes of trailing garbage in the index section",
			  (unsigned long long)mc_left(c));
	return rc;
}

/* ---- reader: open ------------------------------------------------------------ */

static int qpk_probe(const uint8_t *h, size_t n, uint64_t size)
{
	(void)size;
	if (n < 12 || memcmp(h, qpk_magic, 8) != 0)
		return 0;
	return qtk_rd16(h + 8) == QPK_MAJOR ? 100 : 90; /* open() reports the bad version */
}

static int ferr(rd *r, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int ferr(rd *r, uint64_t off, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return qtk_err_set(&r->m->err, QTK_E_DATA, r->path, (int64_t)off, NULL, "%s", msg);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Load a section (§4): check its digest over the stored bytes and set c to read it (a zstd
 * section is decoded as it is read: mc_fill, mc_finish). */
static int load_section(rd *r, qpk_priv *pv, const char *name, uint64_t off, uint64_t stored, uint64_t raw,
			unsigned codec, const uint8_t sha[32], mc *c)
{
	memset(c, 0, sizeof *c);
	c->r = r;
	c->n = raw;
	c->base = off;
	c->z = codec == CODEC_ZSTD;
	c->sect = name;
	c->keep = UINT64_MAX;
	uint8_t *s = qtk_malloc((size_t)stored ? (size_t)stored : 1), calc[32];
	if (!s)
		return oom(r);
	int rc = qtk_pread_full(r->m->fds[0], r->path, s, (size_t)stored, off, &r->m->err);
	if (!rc && qtk_qpk_sha256(s, (size_t)stored, NULL, 0, calc))
		rc = oom(r);
	if (!rc && memcmp(calc, sha, 32) != 0)
		rc = ferr(r, off, "%s digest mismatch: the stored bytes do not hash to the SHA-256 the %s records", name,
			  strcmp(name, "index") == 0 ? "trailer" : "header");
	if (rc) {
		qtk_free(s);
		return rc;
	}
	c->own = s;
	if (codec == CODEC_RAW) {
		c->p = s;
		c->wlen = raw;
		return 0;
	}
	char why[300];
	if (!pv->dc && !(pv->dc = new_dctx()))
		return oom(r);
	if (zframe_check(s, (size_t)stored, raw, why, sizeof why))
		return ferr(r, off, "%s section: %s", name, why);
	ZSTD_DCtx_reset(pv->dc, ZSTD_reset_session_only);
	c->dc = pv->dc;
	c->in = (ZSTD_inBuffer){s, (size_t)stored, 0};
	return 0;
}

/* Section size rules shared by metadata and index (§4, §12 items 6 and 8). */
static int check_section(rd *r, const char *name, uint64_t at, uint64_t stored, uint64_t raw, unsigned codec,
			 uint64_t cap)
{
	if (!valid_codec(codec))
		return ferr(r, at, "%s codec %u is unknown", name, codec);
	if (raw > cap)
		return ferr(r, at, "%s raw size %llu exceeds the limit of %llu", name, (unsigned long long)raw,
			    (unsigned long long)cap);
	if (codec == CODEC_RAW && stored != raw)
		return ferr(r, at, "%s stored size %llu differs from its raw size %llu (codec raw)", name,
			    (unsigned long long)stored, (unsigned long long)raw);
	if (codec == CODEC_ZSTD && (stored == 0 || raw / QPK_RATIO > stored + QPK_RATIO_SLACK / QPK_RATIO))
		return ferr(r, at, "%s raw size %llu is impossible for %llu compressed bytes (ratio limit %u)", name,
			    (unsigned long long)raw, (unsigned long long)stored, QPK_RATIO);
	return 0;
}

/* The content rules of every tensor (§8.5, §8.13; C.2 row 41): g_idx group maps, small parts
 * checked whole, values checked one by one; read through the reader (which also verifies the
 * part digests). */
static int qpk_read(qtk_model *m, const qtk_tensor *t, int part, uint64_t off, void *dst, size_t n);

static int check_contents(rd *r)
{
	qtk_model *m = r->m;
	uint8_t *buf = NULL;
	int rc = 0;
	for (size_t i = 0; i < m->ntensors && !rc; i++) {
		const qtk_tensor *t = &m->tensors[i];
		for (int p = 0; p < t->nparts && !rc; p++) {
			qpk_cc cc = qtk_qpk_content_kind(t, p);
			if (cc == QPK_CC_NONE)
				continue;
			if (!buf && !(buf = qtk_malloc(1u << 16)))
				return oom(r);
			gchk g = {0};
			if (cc == QPK_CC_GIDX && qtk_qpk_gchk_init(&g, t)) {
				rc = oom(r);
				break;
			}
			char why[400] = "";
			uint64_t n = t->parts[p].nbytes;
			if (cc == QPK_CC_WHOLE) { /* at most QPK_WHOLE_MAX bytes (§8.13) */
				if (n > QPK_WHOLE_MAX)
					rc = qtk_err_set(&m->err, QTK_E_INTERNAL, r->path, -1, t->name, "part too large");
				else if (!(rc = qpk_read(m, t, p, 0, buf, (size_t)n)) &&
					 qtk_qpk_check_whole(t, p, buf, (size_t)n, why, sizeof why))
					rc = QTK_E_DATA;
			}
			for (uint64_t off = 0; cc != QPK_CC_WHOLE && off < n && !rc; off += 1u << 16) {
				size_t k = n - off < (1u << 16) ? (size_t)(n - off) : (1u << 16);
				if ((rc = qpk_read(m, t, p, off, buf, k)))
					break;
				if (cc == QPK_CC_GIDX ? qtk_qpk_gchk_feed(&g, buf, k, why, sizeof why)
						      : qtk_qpk_check_values(t, p, off, buf, k, why, sizeof why))
					rc = QTK_E_DATA;
			}
			if (rc == QTK_E_DATA && why[0])
				rc = qtk_err_set(&m->err, QTK_E_DATA, r->path, (int64_t)t->parts[p].offset, t->name, "%s", why);
			qtk_free(g.cnt);
		}
	}
	qtk_free(buf);
	return rc;
}

/* Where the sections are, from the header and trailer. */
typedef struct geom {
	uint32_t align;
	unsigned meta_codec, index_codec;
	uint64_t meta_stored, meta_raw, meta_end, data_off;
	uint64_t index_off, index_stored, index_raw, trailer_off;
} geom;

/* Header and trailer fields, section placement and the header digest
 * (§3, §10; §12 items 2-9). h and tr receive the 128-byte records. */
static int read_frame(rd *r, qpk_priv *pv, uint8_t h[QPK_HEADER_SIZE], uint8_t tr[QPK_TRAILER_SIZE], geom *g)
{
	qtk_model *m = r->m;
	uint8_t calc[32];
	int rc = qtk_pread_full(m->fds[0], r->path, h, QPK_HEADER_SIZE, 0, &m->err);
	if (rc)
		return rc;
	if (memcmp(h, qpk_magic, 8) != 0)
		return ferr(r, 0, "bad magic: not a QPK file");
	unsigned major = qtk_rd16(h + 8), minor = qtk_rd16(h + 10);
	if (major != QPK_MAJOR)
		return ferr(r, 8, "unsupported QPK major version %u (this reader knows %u)", major, QPK_MAJOR);
	if (qtk_rd32(h + 12) != QPK_HEADER_SIZE)
		return ferr(r, 12, "header size %u, expected %u", qtk_rd32(h + 12), QPK_HEADER_SIZE);
	g->align = qtk_rd32(h + 16);
	if (g->align < 8 || g->align > QTK_CAP_ALIGN || (g->align & (g->align - 1)))
		return ferr(r, 16, "alignment %u is not a power of two between 8 and %u", g->align, QTK_CAP_ALIGN);
	pv->chunk_log = h[20];
	if (pv->chunk_log < QPK_MIN_CHUNK_LOG || pv->chunk_log > QPK_MAX_CHUNK_LOG)
		return ferr(r, 20, "chunk log %u out of range (%u..%u)", pv->chunk_log, QPK_MIN_CHUNK_LOG,
			    QPK_MAX_CHUNK_LOG);
	if (qtk_rd16(h + 22) || !all_zero(h + 72, 56))
		return ferr(r, 22, "reserved header bytes are not zero");
	g->meta_codec = h[21];
	g->meta_stored = qtk_rd64(h + 24);
	g->meta_raw = qtk_rd64(h + 32);
	g->trailer_off = r->size - QPK_TRAILER_SIZE;
	uint64_t toff = g->trailer_off;
	if ((rc = qtk_pread_full(m->fds[0], r->path, tr, QPK_TRAILER_SIZE, toff, &m->err)))
		return rc;
	if (memcmp(tr + 120, qpk_end_magic, 8) != 0)
		return ferr(r, toff + 120, "bad trailer magic: the file is truncated or not a complete QPK file");
	if (qtk_rd16(tr + 104) != major || qtk_rd16(tr + 106) != minor || qtk_rd32(tr + 108) != QPK_TRAILER_SIZE)
		return ferr(r, toff + 104, "trailer version or size differs from the header's");
	if (tr[25] || !all_zero(tr + 26, 6) || !all_zero(tr + 112, 8))
		return ferr(r, toff + 25, "reserved trailer bytes are not zero");
	g->index_off = qtk_rd64(tr);
	g->index_stored = qtk_rd64(tr + 8);
	g->index_raw = qtk_rd64(tr + 16);
	g->index_codec = tr[24];
	g->data_off = qtk_rd64(tr + 32);
	if (!qtk_add_u64(QPK_HEADER_SIZE, g->meta_stored, &g->meta_end) || g->meta_end > toff)
		return ferr(r, 24, "metadata stored size %llu exceeds the %llu bytes before the trailer",
			    (unsigned long long)g->meta_stored, (unsigned long long)(toff - QPK_HEADER_SIZE));
	if ((rc = check_section(r, "metadata", 24, g->meta_stored, g->meta_raw, g->meta_codec, QPK_CAP_META)))
		return rc;
	uint64_t want = qpk_align_up(g->meta_end, g->align), iend;
	if (g->data_off != want || g->data_off > toff)
		return ferr(r, toff + 32, "data offset 0x%llx is not the aligned end of the metadata section (0x%llx)",
			    (unsigned long long)g->data_off, (unsigned long long)want);
	if (g->index_off < g->data_off || !qtk_add_u64(g->index_off, g->index_stored, &iend) || iend != toff)
		return ferr(r, toff, "index offset beyond end of file or misplaced: index 0x%llx+%llu must end at the "
			    "trailer 0x%llx and start after the data offset 0x%llx", (unsigned long long)g->index_off,
			    (unsigned long long)g->index_stored, (unsigned long long)toff, (unsigned long long)g->data_off);
	if ((rc = check_section(r, "index", toff + 8, g->index_stored, g->index_raw, g->index_codec, QPK_CAP_INDEX)))
		return rc;
	if (qtk_qpk_sha256(h, QPK_HEADER_SIZE, NULL, 0, calc))
		return oom(r);
	if (memcmp(calc, tr + 72, 32) != 0)
		return ferr(r, toff + 72, "header digest mismatch: the header does not hash to the trailer's SHA-256");
	uint8_t pad[4096];
	for (uint64_t at = g->meta_end; at < g->data_off; at += sizeof pad) {
		size_t k = g->data_off - at < sizeof pad ? (size_t)(g->data_off - at) : sizeof pad;
		if ((rc = qtk_pread_full(m->fds[0], r->path, pad, k, at, &m->err)))
			return rc;
		if (!all_zero(pad, k))
			return ferr(r, at, "padding before the data section is not zero");
	}
	m->format_version = (int)major;
	return 0;
}

static int qpk_open(qtk_model *m)
{
	rd r = {m, m->path, 0, 0};
	uint8_t h[QPK_HEADER_SIZE], tr[QPK_TRAILER_SIZE];
	mc c, ci;
	memset(&c, 0, sizeof c);
	memset(&ci, 0, sizeof ci);
	qpk_priv *pv = qtk_calloc(1, sizeof *pv);
	if (!pv)
		return oom(&r);
	m->priv = pv;
	pv->dchunk = pv->vkey = pv->lastci = pv->ahead.ci = SIZE_MAX;
	pv->mu_ok = pthread_mutex_init(&pv->mu, NULL) == 0;
	if (!pv->mu_ok)
		return oom(&r);
	int fi = qtk_model_add_file(m, m->path);
	if (fi < 0)
		return fi;
	r.path = m->files[0];
	r.size = m->file_sizes[0];
	if (r.size < QPK_HEADER_SIZE + QPK_TRAILER_SIZE)
		return ferr(&r, 0, "truncated: file has %llu bytes, a QPK file needs at least %u",
			    (unsigned long long)r.size, QPK_HEADER_SIZE + QPK_TRAILER_SIZE);
	geom g = {0};
	int rc = read_frame(&r, pv, h, tr, &g);
	if (rc)
		return rc;
	pv->data_off = g.data_off;
	pv->index_off = g.index_off;
	pv->align = g.align;
	/* metadata (§6) */
	rc = load_section(&r, pv, "metadata", QPK_HEADER_SIZE, g.meta_stored, g.meta_raw, g.meta_codec, h + 40, &c);
	if (rc || (rc = parse_meta(&c)) || (rc = mc_finish(&c)))
		goto out;
	mc_free(&c);
	/* index (§7) */
	rc = load_section(&r, pv, "index", g.index_off, g.index_stored, g.index_raw, g.index_codec, tr + 40, &ci);
	if (rc || (rc = parse_index(&ci, pv, g.align)) || (rc = mc_finish(&ci)) || (rc = check_extents(&r, pv)))
		goto out;
	mc_free(&ci);
	rc = check_contents(&r);
out:
	mc_free(&c);
	mc_free(&ci);
	return rc;
}

static void ahead_wait(qpk_priv *pv)
{
	if (pv->ahead.on) {
		pthread_join(pv->ahead.th, NULL);
		pv->ahead.on = false;
	}
}

static void vq_free_jobs(vjob *j)
{
	while (j) {
		vjob *n = j->next;
		qtk_free(j);
		j = n;
	}
}

/* Stop the checking thread (the jobs still queued are dropped) and free it. */
static void vq_end(qpk_priv *pv)
{
	qverq *q = pv->vq;
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	vq_free_jobs(q->head);
	EVP_MD_CTX_free(q->md);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	qtk_free(q);
	pv->vq = NULL;
}

static void qpk_close(qtk_model *m)
{
	qpk_priv *pv = m->priv;
	if (!pv)
		return;
	ahead_wait(pv); /* it reads the chunk table */
	vq_end(pv);
	qtk_free(pv->loc);
	qtk_free(pv->chunks);
	qtk_free(pv->tsha);
	qtk_free(pv->by_off);
	qtk_free(pv->ahead.zin);
	qtk_free(pv->ahead.dbuf);
	ZSTD_freeDCtx(pv->ahead.dc);
	qtk_free(pv->zin);
	qtk_free(pv->dbuf);
	ZSTD_freeDCtx(pv->dc);
	EVP_MD_CTX_free(pv->md);
	if (pv->mu_ok)
		pthread_mutex_destroy(&pv->mu);
	qtk_free(pv);
	m->priv = NULL;
}

/* ---- reader: data ------------------------------------------------------------ */

/* The key (tensor * 4 + part) of t's part p in m: by pointer when t is one of
 * m's tensors, else by the part's file offset (a copied description). */
static int part_key(qtk_model *m, const qtk_tensor *t, int p, size_t *key)
{
	qpk_priv *pv = m->priv;
	if (t >= m->tensors && t < m->tensors + m->ntensors) {
		*key = (size_t)(t - m->tensors) * QTK_MAX_PARTS + (size_t)p;
		return 0;
	}
	size_t lo = 0, hi = pv->nby_off;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const qtk_part *q = &m->tensors[pv->by_off[mid] / QTK_MAX_PARTS].parts[pv->by_off[mid] % QTK_MAX_PARTS];
		if (q->offset < t->parts[p].offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < pv->nby_off) {
		size_t k = pv->by_off[lo];
		const qtk_part *q = &m->tensors[k / QTK_MAX_PARTS].parts[k % QTK_MAX_PARTS];
		if (q->offset == t->parts[p].offset && q->nbytes == t->parts[p].nbytes) {
			*key = k;
			return 0;
		}
	}
	return qtk_err_set(&m->err, QTK_E_INTERNAL, m->path, -1, t->name, "tensor part is not in this file");
}

static void *ahead_run(void *a)
{
	qahead *h = a;
	qpk_priv *pv = h->m->priv;
	const qchunk *ch = &pv->chunks[h->ci];
	char why[300];
	qtk_err e = {0};
	h->rc = qtk_pread_full(h->m->fds[0], h->m->files[0], h->zin, (size_t)ch->stored, ch->off, &e);
	if (!h->rc)
		h->rc = unzstd(h->dc, h->zin, (size_t)ch->stored, h->dbuf, (size_t)ch->raw, why, sizeof why);
	return NULL;
}

/* The first zstd chunk of the few after ci; SIZE_MAX when there is none. */
static size_t next_zstd(const qpk_priv *pv, size_t ci)
{
	for (size_t n = ci + 1; n < pv->nchunks && n <= ci + 16; n++)
		if (pv->chunks[n].codec == CODEC_ZSTD)
			return n;
	return SIZE_MAX;
}

static atomic_ulong ahead_used;

unsigned long qtk_test_qpk_ahead_used(bool reset)
{
	return reset ? atomic_exchange(&ahead_used, 0) : atomic_load(&ahead_used);
}

/* Start reading ahead the zstd chunk after ci: only with chunks of at most the default size (a
 * reader then holds 4 chunk buffers of <= 4 MiB; other writers may use 64 MiB chunks). */
static void ahead_start(qtk_model *m, size_t ci)
{
	qpk_priv *pv = m->priv;
	qahead *h = &pv->ahead;
	size_t n = next_zstd(pv, ci);
	if (n == SIZE_MAX || pv->cmax > ((uint64_t)1 << QPK_DEFAULT_CHUNK_LOG))
		return;
	size_t csz = (size_t)pv->cmax;
	if ((!h->zin && !(h->zin = qtk_malloc(csz))) || (!h->dbuf && !(h->dbuf = qtk_malloc(csz))) ||
	    (!h->dc && !(h->dc = new_dctx())))
		return; /* no room: no reading ahead */
	h->m = m;
	h->ci = n;
	h->on = pthread_create(&h->th, NULL, ahead_run, h) == 0;
	if (!h->on)
		h->ci = SIZE_MAX;
}

/* Make chunk ci (global index) the decompressed one. */
static int load_chunk(qtk_model *m, size_t ci, const char *subject)
{
	qpk_priv *pv = m->priv;
	if (pv->dchunk == ci)
		return 0;
	ahead_wait(pv);
	/* reads in the file's order (not threads taking turns at other tensors) read ahead */
	const bool forward = pv->lastci != SIZE_MAX && ci == next_zstd(pv, pv->lastci);
	pv->lastci = ci;
	if (pv->ahead.ci == ci && !pv->ahead.rc) { /* read ahead: take its buffers */
		uint8_t *z = pv->zin, *d = pv->dbuf;
		ZSTD_DCtx *dc = pv->dc;
		pv->zin = pv->ahead.zin;
		pv->dbuf = pv->ahead.dbuf;
		pv->dc = pv->ahead.dc;
		pv->ahead.zin = z;
		pv->ahead.dbuf = d;
		pv->ahead.dc = dc;
		pv->ahead.ci = SIZE_MAX;
		pv->dchunk = ci;
		atomic_fetch_add_explicit(&ahead_used, 1, memory_order_relaxed);
		ahead_start(m, ci);
		return 0;
	}
	pv->ahead.ci = SIZE_MAX;
	const qchunk *ch = &pv->chunks[ci];
	size_t csz = (size_t)pv->cmax; /* stored < raw <= cmax */
	if (!pv->zin && !(pv->zin = qtk_malloc(csz)))
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, subject, "out of memory");
	if (!pv->dbuf && !(pv->dbuf = qtk_malloc(csz)))
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, subject, "out of memory");
	if (!pv->dc && !(pv->dc = new_dctx()))
		return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, subject, "out of memory");
	pv->dchunk = SIZE_MAX;
	int rc = qtk_pread_full(m->fds[0], m->files[0], pv->zin, (size_t)ch->stored, ch->off, &m->err);
	if (rc)
		return rc;
	char why[300];
	if (unzstd(pv->dc, pv->zin, (size_t)ch->stored, pv->dbuf, (size_t)ch->raw, why, sizeof why))
		return qtk_err_set(&m->err, QTK_E_DATA, m->files[0], (int64_t)ch->off, subject, "%s", why);
	pv->dchunk = ci;
	if (forward)
		ahead_start(m, ci);
	return 0;
}

/* Copy raw bytes [off, off+n) of the part with `key` into dst. */
static int read_range(qtk_model *m, size_t key, uint64_t off, uint8_t *dst, size_t n)
{
	qpk_priv *pv = m->priv;
	const qtk_tensor *t = &m->tensors[key / QTK_MAX_PARTS];
	const qtk_part *q = &t->parts[key % QTK_MAX_PARTS];
	const qloc *l = &pv->loc[key];
	uint64_t csz = 1ull << pv->chunk_log;
	while (n) {
		uint64_t ci = off >> pv->chunk_log, in = off - ci * csz;
		uint64_t raw = q->nbytes - ci * csz < csz ? q->nbytes - ci * csz : csz;
		size_t k = raw - in < n ? (size_t)(raw - in) : n;
		const qchunk *ch = &pv->chunks[l->chunk0 + ci];
		int rc;
		if (ch->codec == CODEC_RAW)
			rc = qtk_pread_full(m->fds[0], m->files[0], dst, k, ch->off + in, &m->err);
		else if (!(rc = load_chunk(m, (size_t)(l->chunk0 + ci), t->name)))
			memcpy(dst, pv->dbuf + in, k);
		if (rc)
			return rc;
		dst += k;
		off += k;
		n -= k;
	}
	return 0;
}

/* Part `key`'s digest mismatch, into e (m->err, or the checking thread's own error). */
static int mismatch_to(qtk_err *e, const qtk_model *m, size_t key)
{
	const qtk_tensor *t = &m->tensors[key / QTK_MAX_PARTS];
	const qtk_part *q = &t->parts[key % QTK_MAX_PARTS];
	return qtk_err_set(e, QTK_E_DATA, m->files[0], (int64_t)q->offset, t->name,
			   "part %d%s%s%s digest mismatch: the data does not hash to the SHA-256 in the index",
			   (int)(key % QTK_MAX_PARTS), q->role[0] ? " ('" : "", q->role, q->role[0] ? "')" : "");
}

static int digest_mismatch(qtk_model *m, size_t key) { return mismatch_to(&m->err, m, key); }

static void *vq_main(void *a)
{
	qverq *q = a;
	qpk_priv *pv = q->m->priv;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->stop && !q->head)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->stop)
			break;
		vjob *j = q->head;
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		q->busy = true;
		pthread_mutex_unlock(&q->mu);
		bool bad = false, failed = false;
		if (j->op == VJ_START) {
			failed = EVP_DigestInit_ex(q->md, EVP_sha256(), NULL) != 1;
			q->key = failed ? SIZE_MAX : j->key;
		} else if (q->key == j->key && j->op == VJ_DATA) {
			if ((failed = EVP_DigestUpdate(q->md, j->data, j->n) != 1))
				q->key = SIZE_MAX;
		} else if (q->key == j->key) {
			uint8_t calc[32];
			unsigned len = 0;
			failed = EVP_DigestFinal_ex(q->md, calc, &len) != 1;
			bad = !failed && memcmp(calc, pv->loc[j->key].sha, 32) != 0;
			q->key = SIZE_MAX;
		}
		pthread_mutex_lock(&q->mu);
		if (failed && !q->rc) { /* a check that cannot be made is an error here: copies rely on it */
			const qtk_tensor *t = &q->m->tensors[j->key / QTK_MAX_PARTS];
			q->rc = qtk_err_set(&q->err, QTK_E_IO, q->m->files[0], -1, t->name, "SHA-256 of a part failed");
		}
		if (bad && !q->rc)
			q->rc = mismatch_to(&q->err, q->m, j->key);
		q->bytes -= j->op == VJ_DATA ? j->n : 0;
		q->busy = false;
		pthread_cond_broadcast(&q->cv);
		qtk_free(j);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Queue a job for the checking thread (a copy of d, for VJ_DATA), waiting for room. false: out
 * of memory. */
static bool vq_push(qverq *q, int op, size_t key, const uint8_t *d, size_t n)
{
	vjob *j = qtk_malloc(sizeof *j + (op == VJ_DATA ? n : 0));
	if (!j)
		return false;
	j->next = NULL;
	j->key = key;
	j->op = op;
	j->n = op == VJ_DATA ? n : 0;
	if (op == VJ_DATA)
		memcpy(j->data, d, n);
	pthread_mutex_lock(&q->mu);
	while (op == VJ_DATA && q->bytes && q->bytes + n > QPK_VQ_CAP)
		pthread_cond_wait(&q->cv, &q->mu);
	q->bytes += j->n;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return true;
}

/* The checking thread's first mismatch into m->err (0 when none); wait: after every job queued
 * so far is done. */
static int vq_result(qtk_model *m, qverq *q, bool wait)
{
	pthread_mutex_lock(&q->mu);
	while (wait && (q->head || q->busy))
		pthread_cond_wait(&q->cv, &q->mu);
	int rc = q->rc;
	if (rc)
		m->err = q->err;
	pthread_mutex_unlock(&q->mu);
	return rc;
}

/* A job for the checking thread that could not be queued: the read fails (a copy's leaves rely
 * on its part being checked). */
static int vq_oom(qtk_model *m, size_t key)
{
	return qtk_err_set(&m->err, QTK_E_IO, m->path, -1, m->tensors[key / QTK_MAX_PARTS].name, "out of memory");
}

/* Follow sequential reads of one part; at its last byte compare the digest (or, with the
 * checking thread, queue the bytes and the comparison). */
static int track(qtk_model *m, size_t key, uint64_t off, const uint8_t *d, size_t n)
{
	qpk_priv *pv = m->priv;
	const qtk_part *q = &m->tensors[key / QTK_MAX_PARTS].parts[key % QTK_MAX_PARTS];
	qverq *vq = pv->vq;
	if (off == 0 && (pv->vkey != key || pv->vpos != 0)) {
		if (vq) {
			if (!vq_push(vq, VJ_START, key, NULL, 0))
				return vq_oom(m, key);
		} else {
			if (!pv->md && !(pv->md = EVP_MD_CTX_new()))
				return 0;
			if (EVP_DigestInit_ex(pv->md, EVP_sha256(), NULL) != 1)
				return 0;
		}
		pv->vkey = key;
		pv->vpos = 0;
	}
	if (pv->vkey != key || pv->vpos != off) {
		pv->vkey = SIZE_MAX;
		return 0;
	}
	for (size_t at = 0; vq && at < n; at += QPK_VQ_JOB)
		if (!vq_push(vq, VJ_DATA, key, d + at, n - at < QPK_VQ_JOB ? n - at : QPK_VQ_JOB)) {
			pv->vkey = SIZE_MAX;
			return vq_oom(m, key);
		}
	if (!vq && EVP_DigestUpdate(pv->md, d, n) != 1) {
		pv->vkey = SIZE_MAX;
		return 0;
	}
	pv->vpos += n;
	if (pv->vpos < q->nbytes)
		return 0;
	pv->vkey = SIZE_MAX;
	if (vq)
		return vq_push(vq, VJ_END, key, NULL, 0) ? 0 : vq_oom(m, key);
	uint8_t calc[32];
	unsigned len = 0;
	if (EVP_DigestFinal_ex(pv->md, calc, &len) != 1)
		return 0;
	return memcmp(calc, pv->loc[key].sha, 32) ? digest_mismatch(m, key) : 0;
}

/* Whether bytes [off, off+n) (n > 0) of the part with `key` lie in raw
 * chunks only. */
static bool all_raw(const qpk_priv *pv, size_t key, uint64_t off, size_t n)
{
	uint64_t first = off >> pv->chunk_log, last = (off + n - 1) >> pv->chunk_log;
	for (uint64_t c = first; c <= last; c++)
		if (pv->chunks[pv->loc[key].chunk0 + c].codec != CODEC_RAW)
			return false;
	return true;
}

/* The plugin's read hook. Thread-safe: raw chunks are read with pread and
 * no lock; decoding (one cached chunk) and digest tracking take a mutex. */
static int qpk_read(qtk_model *m, const qtk_tensor *t, int part, uint64_t off, void *dst, size_t n)
{
	qpk_priv *pv = m->priv;
	size_t key = 0;
	if (!n)
		return 0;
	int rc = part_key(m, t, part, &key);
	if (rc || (pv->vq && (rc = vq_result(m, pv->vq, false))))
		return rc;
	/* raw chunks need no shared state: read them without the lock */
	bool raw = all_raw(pv, key, off, n);
	if (raw)
		rc = read_range(m, key, off, dst, n);
	pthread_mutex_lock(&pv->mu);
	if (!raw)
		rc = read_range(m, key, off, dst, n);
	if (!rc)
		rc = track(m, key, off, dst, n);
	pthread_mutex_unlock(&pv->mu);
	return rc;
}

/* Verify every part digest of tensor i (reads all its data, bounded memory):
 * 0, QTK_E_DATA on a mismatch (C.2 row 42), or another error. */
int qtk_qpk_verify_tensor(qtk_model *m, size_t i)
{
	if (!m || m->fmt != &qtk_format_qpk || !m->priv || i >= m->ntensors)
		return qtk_err_set(m ? &m->err : NULL, QTK_E_USAGE, NULL, -1, NULL, "not a tensor of a QPK file");
	qpk_priv *pv = m->priv;
	const qtk_tensor *t = &m->tensors[i];
	size_t bsz = 1u << 20;
	uint8_t *buf = qtk_malloc(bsz);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int rc = buf && md ? 0 : qtk_err_set(&m->err, QTK_E_IO, m->path, -1, t->name, "out of memory");
	for (int p = 0; p < t->nparts && !rc; p++) {
		size_t key = i * QTK_MAX_PARTS + (size_t)p;
		uint64_t n = t->parts[p].nbytes;
		if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
			rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, t->name, "SHA-256 failed");
		for (uint64_t off = 0; off < n && !rc; off += bsz) {
			size_t k = n - off < bsz ? (size_t)(n - off) : bsz;
			pthread_mutex_lock(&pv->mu);
			rc = read_range(m, key, off, buf, k);
			pthread_mutex_unlock(&pv->mu);
			if (!rc && EVP_DigestUpdate(md, buf, k) != 1)
				rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, t->name, "SHA-256 failed");
		}
		uint8_t calc[32];
		unsigned len = 0;
		if (!rc && EVP_DigestFinal_ex(md, calc, &len) != 1)
			rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, t->name, "SHA-256 failed");
		if (!rc && memcmp(calc, pv->loc[key].sha, 32) != 0)
			rc = digest_mismatch(m, key);
	}
	EVP_MD_CTX_free(md);
	qtk_free(buf);
	return rc;
}

/* qtk_read_verify_async: start the checking thread (once; it stays until the file is closed).
 * Without a thread (none could start) the checks stay in the reading thread. */
static void qpk_verify_async(qtk_model *m)
{
	qpk_priv *pv = m->priv;
	if (!pv || pv->vq)
		return;
	qverq *q = qtk_calloc(1, sizeof *q);
	if (!q)
		return;
	q->m = m;
	q->key = SIZE_MAX;
	q->md = EVP_MD_CTX_new();
	const bool mu = q->md && !pthread_mutex_init(&q->mu, NULL);
	const bool cv = mu && !pthread_cond_init(&q->cv, NULL);
	if (!cv || pthread_create(&q->th, NULL, vq_main, q)) {
		if (cv)
			pthread_cond_destroy(&q->cv);
		if (mu)
			pthread_mutex_destroy(&q->mu);
		EVP_MD_CTX_free(q->md);
		qtk_free(q);
		return;
	}
	pthread_mutex_lock(&pv->mu); /* between reads: a part being followed is not checked */
	pv->vkey = SIZE_MAX;
	pv->vq = q;
	pthread_mutex_unlock(&pv->mu);
}

/* qtk_read_settle: every check of the reads made so far done; the first mismatch. */
static int qpk_settle(qtk_model *m)
{
	qpk_priv *pv = m->priv;
	return pv && pv->vq ? vq_result(m, pv->vq, true) : 0;
}

static const char *const qpk_ext[] = {".qpk", ".awq", ".gptq", NULL};

const qtk_format qtk_format_qpk = {
	.name = "qpk",
	.probe = qpk_probe,
	.open = qpk_open,
	.close = qpk_close,
	.read = qpk_read,
	.verify_tensor = qtk_qpk_verify_tensor,
	.verify_async = qpk_verify_async,
	.settle = qpk_settle,
	.out = QTK_OUT_QPK,
	.writer = &qtk_qpk_writer_ops,
	.out_ext = qpk_ext,
	.can_store = qtk_qpk_can_store,
};
