/* spm.c - SentencePiece ModelProto (tokenizer.model) reader and writer.
 *
 * ModelProto: 1 repeated SentencePiece pieces {1 piece string, 2 score float,
 * 3 type enum}, 2 TrainerSpec, 3 NormalizerSpec, 4 SelfTestData, 5 denormalizer.
 * Only the pieces are decoded into structures; everything else is kept raw.
 */
#include "family/spm.h"
#include <string.h>

/* ---- bounded protobuf reading -------------------------------------------- */

typedef struct pb {
	const uint8_t *p, *end;
	const uint8_t *base;  /* start of the whole file (for offsets) */
	const char *file;
	qtk_err *err;
} pb;

static int64_t pb_off(const pb *r, const uint8_t *at) { return (int64_t)(at - r->base); }

static int pb_fail(const pb *r, const uint8_t *at, const char *msg)
{
	return qtk_err_set(r->err, QTK_E_DATA, r->file, pb_off(r, at), NULL, "%s", msg);
}

static int pb_varint(pb *r, uint64_t *v)
{
	const uint8_t *start = r->p;
	uint64_t x = 0;
	for (int i = 0; i < 10; i++) {
		if (r->p >= r->end)
			return pb_fail(r, start, "truncated varint");
		uint8_t c = *r->p++;
		if (i == 9 && c > 1)
			return pb_fail(r, start, "varint overflows 64 bits");
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return pb_fail(r, start, "varint longer than 10 bytes");
}

/* Read a field key; *field > 0. */
static int pb_key(pb *r, uint32_t *field, unsigned *wire)
{
	const uint8_t *start = r->p;
	uint64_t k;
	int rc = pb_varint(r, &k);
	if (rc)
		return rc;
	if ((k >> 3) == 0 || (k >> 3) > 0x1fffffffu)
		return pb_fail(r, start, "bad field number");
	*field = (uint32_t)(k >> 3);
	*wire = (unsigned)(k & 7);
	return 0;
}

/* Skip a field's payload (after its key). Groups (3, 4) and unknown wire types
 * are rejected. For length-delimited fields, data and n receive the payload. */
static int pb_skip(pb *r, unsigned wire, const uint8_t **data, size_t *n)
{
	const uint8_t *start = r->p;
	uint64_t v;
	switch (wire) {
	case 0:
		return pb_varint(r, &v);
	case 1:
		if ((size_t)(r->end - r->p) < 8)
			return pb_fail(r, start, "truncated fixed64");
		r->p += 8;
		return 0;
	case 5:
		if ((size_t)(r->end - r->p) < 4)
			return pb_fail(r, start, "truncated fixed32");
		r->p += 4;
		return 0;
	case 2: {
		int rc = pb_varint(r, &v);
		if (rc)
			return rc;
		if (v > (uint64_t)(r->end - r->p))
			return pb_fail(r, start, "length runs past the end of the data");
		if (data)
			*data = r->p;
		if (n)
			*n = (size_t)v;
		r->p += v;
		return 0;
	}
	default:
		return pb_fail(r, start, "unsupported wire type");
	}
}

static int buf_append(uint8_t **p, size_t *len, const uint8_t *d, size_t n)
{
	if (!n)
		return 0;
	uint8_t *q = qtk_realloc(*p, *len + n);
	if (!q)
		return QTK_E_IO;
	memcpy(q + *len, d, n);
	*p = q;
	*len += n;
	return 0;
}

static int parse_piece(pb *outer, const uint8_t *d, size_t n, qtk_spm_piece *pc)
{
	pb r = *outer;
	r.p = d;
	r.end = d + n;
	bool seen[4] = {false, false, false, false};
	memset(pc, 0, sizeof *pc);
	pc->type = SPM_NORMAL;
	int rc = 0;
	while (r.p < r.end && !rc) {
		const uint8_t *fstart = r.p;
		uint32_t f = 0;
		unsigned w = 0;
		if ((rc = pb_key(&r, &f, &w)))
			break;
		if (f <= 3) {
			if (seen[f])
				return pb_fail(&r, fstart, "piece field repeated");
			seen[f] = true;
		}
		if (f == 1) {
			if (w != 2)
				return pb_fail(&r, fstart, "piece: field 1 is not a string");
			const uint8_t *s = NULL;
			size_t len = 0;
			if ((rc = pb_skip(&r, w, &s, &len)))
				break;
			if (len > SPM_CAP_PIECE)
				return pb_fail(&r, fstart, "piece longer than 65536 bytes");
			if (!qtk_utf8_valid((const char *)s, len))
				return pb_fail(&r, fstart, "piece is not valid UTF-8");
			pc->piece = qtk_strndup((const char *)s, len);
			if (!pc->piece)
				return qtk_err_set(r.err, QTK_E_IO, r.file, -1, NULL, "out of memory");
			pc->len = (uint32_t)len;
		} else if (f == 2) {
			if (w != 5)
				return pb_fail(&r, fstart, "piece: score is not a float");
			if ((size_t)(r.end - r.p) < 4)
				return pb_fail(&r, fstart, "truncated score");
			uint32_t u = qtk_rd32(r.p);
			memcpy(&pc->score, &u, 4);
			pc->has_score = true;
			r.p += 4;
		} else if (f == 3) {
			if (w != 0)
				return pb_fail(&r, fstart, "piece: type is not a varint");
			uint64_t v;
			if ((rc = pb_varint(&r, &v)))
				break;
			if (v < SPM_NORMAL || v > SPM_BYTE)
				return pb_fail(&r, fstart, "piece: type out of range 1..6");
			pc->type = (int)v;
			pc->has_type = true;
		} else {
			if ((rc = pb_skip(&r, w, NULL, NULL)))
				break;
			if (buf_append(&pc->rest, &pc->rest_len, fstart, (size_t)(r.p - fstart)))
				return qtk_err_set(r.err, QTK_E_IO, r.file, -1, NULL, "out of memory");
		}
	}
	if (rc)
		return rc;
	if (!pc->piece)
		return pb_fail(&r, d, "piece without text");
	return 0;
}

/* Scan a sub-message for a few informational fields; also validates it. */
static int scan_spec(pb *outer, const uint8_t *d, size_t n, int which, qtk_spm_model *m)
{
	pb r = *outer;
	r.p = d;
	r.end = d + n;
	while (r.p < r.end) {
		uint32_t f = 0;
		unsigned w = 0;
		uint64_t v = 0;
		int rc = pb_key(&r, &f, &w);
		if (rc)
			return rc;
		if (w == 0) {
			if ((rc = pb_varint(&r, &v)))
				return rc;
			if (which == 2 && f == 3)
				m->model_type = (int)(v & 0xff);
			else if (which == 2 && f == 35)
				m->byte_fallback = v != 0;
			else if (which == 3 && f == 3)
				m->add_dummy_prefix = v != 0;
			else if (which == 3 && f == 4)
				m->remove_extra_whitespaces = v != 0;
		} else if ((rc = pb_skip(&r, w, NULL, NULL)))
			return rc;
	}
	return 0;
}

void qtk_spm_free(qtk_spm_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		qtk_free(m->pieces[i].piece);
		qtk_free(m->pieces[i].rest);
	}
	qtk_free(m->pieces);
	qtk_free(m->rest);
	memset(m, 0, sizeof *m);
}

static void spm_defaults(qtk_spm_model *m)
{
	memset(m, 0, sizeof *m);
	m->model_type = 1;
	m->add_dummy_prefix = true;
	m->remove_extra_whitespaces = true;
}

int qtk_spm_parse(const uint8_t *buf, size_t len, const char *file, qtk_spm_model *out, qtk_err *err)
{
	spm_defaults(out);
	pb r = {buf, buf + len, buf, file ? file : "tokenizer.model", err};
	size_t cap = 0;
	int rc = 0;
	if (len == 0)
		return pb_fail(&r, buf, "empty file");
	if (len > QTK_CAP_BLOB)
		return pb_fail(&r, buf, "file too large");
	while (r.p < r.end && !rc) {
		const uint8_t *fstart = r.p;
		uint32_t f = 0;
		unsigned w = 0;
		const uint8_t *d = NULL;
		size_t n = 0;
		if ((rc = pb_key(&r, &f, &w)))
			break;
		if (f == 1) {
			if (w != 2) {
				rc = pb_fail(&r, fstart, "field 1 (pieces) is not a message");
				break;
			}
			if ((rc = pb_skip(&r, w, &d, &n)))
				break;
			if (out->n >= SPM_CAP_PIECES) {
				rc = pb_fail(&r, fstart, "more than 16777216 pieces");
				break;
			}
			if (out->n == cap) {
				size_t nc = cap ? cap * 2 : 256;
				qtk_spm_piece *np = qtk_realloc(out->pieces, nc * sizeof *np);
				if (!np) {
					rc = qtk_err_set(err, QTK_E_IO, r.file, -1, NULL, "out of memory");
					break;
				}
				out->pieces = np;
				cap = nc;
			}
			rc = parse_piece(&r, d, n, &out->pieces[out->n]);
			if (rc) {
				qtk_free(out->pieces[out->n].piece);
				qtk_free(out->pieces[out->n].rest);
				break;
			}
			out->n++;
		} else {
			if ((rc = pb_skip(&r, w, &d, &n)))
				break;
			if ((f == 2 || f == 3) && w != 2) {
				rc = pb_fail(&r, fstart, f == 2 ? "trainer_spec is not a message"
							      : "normalizer_spec is not a message");
				break;
			}
			if ((f == 2 || f == 3) && (rc = scan_spec(&r, d, n, (int)f, out)))
				break;
			if (buf_append(&out->rest, &out->rest_len, fstart, (size_t)(r.p - fstart)))
				rc = qtk_err_set(err, QTK_E_IO, r.file, -1, NULL, "out of memory");
		}
	}
	if (!rc && out->n == 0)
		rc = pb_fail(&r, buf, "no pieces");
	if (rc)
		qtk_spm_free(out);
	return rc;
}

/* ---- writing -------------------------------------------------------------- */

static int put_varint(qtk_buf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;
	do {
		uint8_t c = (uint8_t)(v & 0x7f);
		v >>= 7;
		t[n++] = (uint8_t)(c | (v ? 0x80 : 0));
	} while (v);
	return qtk_buf_put(b, t, n);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static int put_key(qtk_buf *b, uint32_t field, unsigned wire)
{
	return put_varint(b, (uint64_t)field << 3 | wire);
}

static int put_bytes(qtk_buf *b, uint32_t field, const void *d, size_t n)
{
	int rc = put_key(b, field, 2);
	rc = rc ? rc : put_varint(b, n);
	return rc ? rc : qtk_buf_put(b, d, n);
}

static int put_vfield(qtk_buf *b, uint32_t field, uint64_t v)
{
	int rc = put_key(b, field, 0);
	return rc ? rc : put_varint(b, v);
}

static size_t piece_len(const qtk_spm_piece *p)
{
	size_t n = 1 + varint_len(p->len) + p->len;
	if (p->has_score)
		n += 5;
	if (p->has_type)
		n += 1 + varint_len((uint64_t)p->type);
	return n + p->rest_len;
}

int qtk_spm_write(const qtk_spm_model *m, qtk_buf *out)
{
	int rc = 0;
	for (size_t i = 0; i < m->n && !rc; i++) {
		const qtk_spm_piece *p = &m->pieces[i];
		rc = put_key(out, 1, 2);
		rc = rc ? rc : put_varint(out, piece_len(p));
		rc = rc ? rc : put_bytes(out, 1, p->piece, p->len);
		if (!rc && p->has_score) {
			uint8_t f[4];
			uint32_t u;
			memcpy(&u, &p->score, 4);
			qtk_wr32(f, u);
			rc = put_key(out, 2, 5);
			rc = rc ? rc : qtk_buf_put(out, f, 4);
		}
		if (!rc && p->has_type)
			rc = put_vfield(out, 3, (uint64_t)p->type);
		if (!rc && p->rest_len)
			rc = qtk_buf_put(out, p->rest, p->rest_len);
	}
	if (!rc && m->rest_len)
		rc = qtk_buf_put(out, m->rest, m->rest_len);
	return rc ? QTK_E_IO : 0;
}

bool qtk_spm_equal(const qtk_spm_model *a, const qtk_spm_model *b)
{
	if (a->n != b->n || a->rest_len != b->rest_len ||
	    (a->rest_len && memcmp(a->rest, b->rest, a->rest_len)))
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const qtk_spm_piece *x = &a->pieces[i], *y = &b->pieces[i];
		if (x->len != y->len || memcmp(x->piece, y->piece, x->len) || x->type != y->type ||
		    x->has_score != y->has_score || x->has_type != y->has_type ||
		    memcmp(&x->score, &y->score, 4) || x->rest_len != y->rest_len ||
		    (x->rest_len && memcmp(x->rest, y->rest, x->rest_len)))
			return false;
	}
	return true;
}

/* ---- building from a GGUF vocabulary ------------------------------------ */

static int put_id(qtk_buf *b, uint32_t field, int64_t id)
{
	/* int32 fields: negative values are sign-extended to 64 bits */
	return put_vfield(b, field, (uint64_t)id);
}

static int put_special_piece(qtk_buf *b, uint32_t field, int64_t id, size_t n, const qtk_str *tokens,
			     const char *def)
{
	if (id < 0 || (uint64_t)id >= n)
		return 0;
	const qtk_str *t = &tokens[id];
	if (t->len == strlen(def) && memcmp(t->s, def, t->len) == 0)
		return 0;
	return put_bytes(b, field, t->s, (size_t)t->len);
}

int qtk_spm_build(qtk_spm_model *out, size_t n, const qtk_str *tokens, const float *scores,
	      const int32_t *types, const qtk_spm_build_opts *o, qtk_err *err)
{
	spm_defaults(out);
	if (n == 0 || n > SPM_CAP_PIECES)
		return qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.tokens",
				   "vocabulary of %zu tokens cannot be a SentencePiece model", n);
	out->pieces = qtk_calloc(n, sizeof *out->pieces);
	if (!out->pieces)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	bool has_byte = false;
	for (size_t i = 0; i < n; i++) {
		qtk_spm_piece *p = &out->pieces[i];
		if (tokens[i].len > SPM_CAP_PIECE || !qtk_utf8_valid(tokens[i].s, (size_t)tokens[i].len)) {
			qtk_spm_free(out);
			return qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.tokens",
					   "token %zu is too long or not valid UTF-8", i);
		}
		int ty = types ? types[i] : SPM_NORMAL;
		if (ty < SPM_NORMAL || ty > SPM_BYTE) {
			qtk_spm_free(out);
			return qtk_err_set(err, QTK_E_DATA, NULL, -1, "tokenizer.ggml.token_type",
					   "token %zu has type %d (expected 1..6)", i, ty);
		}
		p->piece = qtk_strndup(tokens[i].s, (size_t)tokens[i].len);
		if (!p->piece) {
			out->n = i;
			qtk_spm_free(out);
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		}
		out->n = i + 1;
		p->len = (uint32_t)tokens[i].len;
		p->score = scores ? scores[i] : 0.0f;
		p->has_score = true;
		p->type = ty;
		p->has_type = ty != SPM_NORMAL;
		has_byte |= ty == SPM_BYTE;
	}
	qtk_buf ts = {0}, ns = {0}, all = {0};
	int rc = put_vfield(&ts, 3, (uint64_t)(o->model_type ? o->model_type : 2));
	rc = rc ? rc : put_vfield(&ts, 4, (uint64_t)n);
	if (!rc && has_byte)
		rc = put_vfield(&ts, 35, 1);
	rc = rc ? rc : put_id(&ts, 40, o->unk_id);
	rc = rc ? rc : put_id(&ts, 41, o->bos_id);
	rc = rc ? rc : put_id(&ts, 42, o->eos_id);
	rc = rc ? rc : put_id(&ts, 43, o->pad_id);
	rc = rc ? rc : put_special_piece(&ts, 45, o->unk_id, n, tokens, "<unk>");
	rc = rc ? rc : put_special_piece(&ts, 46, o->bos_id, n, tokens, "<s>");
	rc = rc ? rc : put_special_piece(&ts, 47, o->eos_id, n, tokens, "</s>");
	rc = rc ? rc : put_special_piece(&ts, 48, o->pad_id, n, tokens, "<pad>");
	if (o->charsmap && o->charsmap_len) {
		rc = rc ? rc : put_bytes(&ns, 1, "nmt_nfkc", 8);
		rc = rc ? rc : put_bytes(&ns, 2, o->charsmap, o->charsmap_len);
	} else {
		rc = rc ? rc : put_bytes(&ns, 1, "identity", 8);
	}
	rc = rc ? rc : put_vfield(&ns, 3, o->add_dummy_prefix);
	rc = rc ? rc : put_vfield(&ns, 4, o->remove_extra_whitespaces);
	rc = rc ? rc : put_bytes(&all, 2, ts.p, ts.len);
	rc = rc ? rc : put_bytes(&all, 3, ns.p, ns.len);
	qtk_buf_free(&ts);
	qtk_buf_free(&ns);
	if (rc) {
		qtk_buf_free(&all);
		qtk_spm_free(out);
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	out->rest = all.p;
	out->rest_len = all.len;
	out->model_type = o->model_type ? o->model_type : 2;
	out->byte_fallback = has_byte;
	out->add_dummy_prefix = o->add_dummy_prefix;
	out->remove_extra_whitespaces = o->remove_extra_whitespaces;
	return 0;
}
