/* repack.c - exact 4-bit AWQ <-> GPTQ repacks streamed by bands of input rows.
 *
 * Both layouts keep a band of input rows contiguous (AWQ's qweight is [in][out/8], GPTQ's
 * [in/8][out]), their scales are the same [in/group][out] fp16 array and their zeros the same
 * values in another nibble order (GPTQ v1 stores z - 1). So the codes go through a band at a
 * time, written as they are made, and only the zeros and scales (about 5 bits per group and
 * output) are held: memory does not grow with the matrix.
 *
 * The check reads every code, zero and scale of the output as its decoder reads them and
 * compares them with the source's; both decoders compute (q - z) * s from exactly those, so
 * equal fields are equal values and the tensor is exact (the report's figures are a copy's).
 * The record's decoded leaf of such a tensor is then the source's (hashed by the source's
 * threads from the source's own decoding), taken when the record is finished. */
#include "cli.h"
#include "convert.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* packed bytes of qweight per band: a read and a write of this size at a time */
#define BAND_BYTES ((uint64_t)4 << 20)
/* zeros and scales (and a GPTQ source's g_idx) are held whole up to this size; larger
 * (implausible) shapes take the windowed path */
#define SIDE_CAP ((uint64_t)64 << 20)

typedef struct band_job {
	const uint32_t *src;
	uint32_t *dst;
	uint64_t units; /* groups of 8 input rows in the band */
	uint64_t per;   /* units per job */
	uint32_t out;
	bool to_gptq;
	uint64_t *diff; /* per job */
} band_job;

static void band_run(void *ctx, size_t ji)
{
	band_job *b = ctx;
	const uint64_t u0 = (uint64_t)ji * b->per, n = b->units - u0 < b->per ? b->units - u0 : b->per;
	const uint64_t off = u0 * b->out; /* words: a unit is `out` words in both layouts */
	if (b->to_gptq) {
		qg_awq_rows_to_gptq(b->src + off, n, b->out, b->dst + off);
		b->diff[ji] = qg_awq_gptq_rows_diff(b->src + off, b->dst + off, n, b->out);
	} else {
		qg_gptq_rows_to_awq(b->src + off, n, b->out, b->dst + off);
		b->diff[ji] = qg_awq_gptq_rows_diff(b->dst + off, b->src + off, n, b->out);
	}
}

/* Is this tensor an exact 4-bit AWQ <-> GPTQ repack the bands can do? */
static bool streamable(const plan *p)
{
	const qtk_tensor *t = p->src, *o = p->out;
	const qtk_layout *a = &t->layout, *b = &o->layout;
	if (t->ndim != 2 || t->view || p->perm_heads || a->bits != 4 || b->bits != 4 || !a->group_size ||
	    a->group_size != b->group_size || o->ndim != 2 || o->shape[0] != t->shape[0] || o->shape[1] != t->shape[1])
		return false;
	const uint64_t out = t->shape[0], in = t->shape[1];
	if (!out || !in || out % 8 || in % 32 || in % a->group_size || out > UINT32_MAX || in > UINT32_MAX ||
	    out * in > ((uint64_t)1 << 56))
		return false;
	const bool fwd = a->kind == QTK_LAYOUT_AWQ && b->kind == QTK_LAYOUT_GPTQ;
	const bool back = a->kind == QTK_LAYOUT_GPTQ && b->kind == QTK_LAYOUT_AWQ;
	if (!(fwd || back) || (back && a->act_order) || (fwd && b->act_order))
		return false;
	const qtk_tensor *g = fwd ? o : t, *w = fwd ? t : o; /* the GPTQ side, the AWQ side */
	const uint64_t ng = in / a->group_size, qb = in / 8 * out * 4, zb = ng * out / 8 * 4, sb = ng * out * 2;
	if (w->nparts != 3 || g->nparts < 3 || g->nparts > 4 || (g->nparts == 4 && g->parts[3].nbytes != in * 4))
		return false;
	for (int k = 0; k < 2; k++) {
		const qtk_tensor *x = k ? g : w;
		if (x->parts[0].nbytes != qb || x->parts[1].nbytes != zb || x->parts[2].nbytes != sb)
			return false;
	}
	return zb + sb + in * 4 <= SIDE_CAP;
}

/* A GPTQ source's g_idx, when it has one, must be i / group (act-order is not a plain repack). */
static int trivial_g_idx(qtk_model *in, const qtk_tensor *t, bool *ok, qtk_err *err)
{
	*ok = true;
	if (t->nparts < 4)
		return 0;
	uint8_t *gi;
	if (qtk_read_part_alloc(in, t, 3, &gi)) {
		*err = in->err;
		return err->code ? err->code : QTK_E_IO;
	}
	const uint64_t n = t->shape[1], group = t->layout.group_size;
	for (uint64_t i = 0; i < n && *ok; i++)
		*ok = qtk_rd32(gi + 4 * i) == (uint32_t)(i / group);
	qtk_free(gi);
	return 0;
}

int conv_stream_repack(qtk_model *in, qtk_writer *w, const plan *p, int threads, const conv_rec *rec,
		       tensor_result *r, bool *done, qtk_err *err)
{
	*done = false;
	/* with a record, the decoded leaf must be one the source's digests will hold;
	 * QTK_REPACK=windows takes the windowed path (the tests compare the two) */
	const char *env = getenv("QTK_REPACK");
	if (!streamable(p) || (rec && rec->dec && !rec->src_leaf) || (env && !strcmp(env, "windows")))
		return 0;
	const qtk_tensor *t = p->src, *o = p->out;
	const bool fwd = t->layout.kind == QTK_LAYOUT_AWQ;
	const int version = fwd ? o->layout.gptq_version : t->layout.gptq_version;
	const uint32_t out = (uint32_t)t->shape[0], inf = (uint32_t)t->shape[1];
	const uint64_t zbytes = t->parts[1].nbytes, sbytes = t->parts[2].nbytes, nzw = zbytes / 4;
	uint8_t *zsrc = NULL, *scales = NULL;
	uint32_t *zdst = NULL, *bsrc = NULL, *bdst = NULL;
	uint64_t *diff = NULL;
	int rc = 0;
	bool ok = true;
	if (!fwd && (rc = trivial_g_idx(in, t, &ok, err)))
		return rc;
	if (!ok)
		return 0;
	/* the zeros first: one the target cannot store sends the tensor the windowed way (before
	 * any byte is written) */
	if (qtk_read_part_alloc(in, t, 1, &zsrc)) {
		*err = in->err;
		return err->code ? err->code : QTK_E_IO;
	}
	if (!(zdst = qtk_malloc((size_t)zbytes + 4))) {
		qtk_free(zsrc);
		return qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	}
	/* the parts are little-endian int32; the host is little-endian (packing.h) */
	const int conv = fwd ? qg_awq_zeros_to_gptq((const uint32_t *)zsrc, nzw, version, zdst)
			     : qg_gptq_zeros_to_awq((const uint32_t *)zsrc, nzw, version, zdst);
	if (conv) {
		qtk_free(zsrc);
		qtk_free(zdst);
		return 0;
	}
	const uint64_t zdiff = fwd ? qg_awq_gptq_zeros_diff((const uint32_t *)zsrc, zdst, nzw, version)
				   : qg_awq_gptq_zeros_diff(zdst, (const uint32_t *)zsrc, nzw, version);
	qtk_free(zsrc);
	zsrc = NULL;
	if (zdiff) {
		rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "%llu repacked zeros differ from the source's",
				 (unsigned long long)zdiff);
		goto out;
	}
	*done = true; /* from here on the tensor is this path's: bytes go to the writer */
	if (rec && rec->dec) /* before the tensor's first byte reaches the sink */
		qtk_digest_sink_decoded_source(rec->dec, rec->k);
	if (qtk_read_part_alloc(in, t, 2, &scales)) {
		*err = in->err;
		rc = err->code ? err->code : QTK_E_IO;
		goto out;
	}
	/* bands of whole units (8 input rows: `out` words in both layouts) */
	const uint64_t unit_bytes = (uint64_t)out * 4, units = inf / 8;
	uint64_t bu = BAND_BYTES / unit_bytes;
	bu = bu ? bu : 1;
	bu = bu < units ? bu : units;
	const int nt = threads > 0 ? threads : 1;
	const uint64_t per = (bu + (uint64_t)nt * 2 - 1) / ((uint64_t)nt * 2); /* two jobs per thread */
	const size_t njobs = (size_t)((bu + per - 1) / per);
	bsrc = qtk_malloc((size_t)(bu * unit_bytes));
	bdst = qtk_malloc((size_t)(bu * unit_bytes));
	diff = qtk_calloc(njobs, sizeof *diff);
	if (!bsrc || !bdst || !diff) {
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
		goto out;
	}
	for (uint64_t u0 = 0; u0 < units && !rc; u0 += bu) {
		const uint64_t n = units - u0 < bu ? units - u0 : bu;
		if (qtk_read_part(in, t, 0, u0 * unit_bytes, bsrc, (size_t)(n * unit_bytes))) {
			*err = in->err;
			rc = err->code ? err->code : QTK_E_IO;
			break;
		}
		const uint64_t per_n = (n + (uint64_t)nt * 2 - 1) / ((uint64_t)nt * 2);
		band_job b = {bsrc, bdst, n, per_n, out, fwd, diff};
		const size_t nj = (size_t)((n + per_n - 1) / per_n);
		qtk_parallel_for(nt, nj, band_run, &b);
		uint64_t d = 0;
		for (size_t j = 0; j < nj; j++)
			d += diff[j];
		if (d) {
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name,
					 "%llu repacked codes of input rows %llu.. differ from the source's",
					 (unsigned long long)d, (unsigned long long)(u0 * 8));
			break;
		}
		rc = qtk_writer_put(w, bdst, (size_t)(n * unit_bytes));
		cli_progress_within(u0 + n, units);
	}
	/* zeros, scales (the same array in both layouts), and GPTQ's g_idx */
	rc = rc ? rc : qtk_writer_put(w, zdst, (size_t)zbytes);
	rc = rc ? rc : qtk_writer_put(w, scales, (size_t)sbytes);
	if (!rc && fwd && o->nparts == 4) {
		const uint32_t group = o->layout.group_size;
		uint8_t gb[1024];
		for (uint32_t i0 = 0; i0 < inf && !rc; i0 += 256) {
			const uint32_t n = inf - i0 < 256 ? inf - i0 : 256;
			for (uint32_t i = 0; i < n; i++)
				qtk_wr32(gb + 4 * i, (i0 + i) / group);
			rc = qtk_writer_put(w, gb, (size_t)n * 4);
		}
	}
	if (!rc) {
		r->exact = true;
		r->rmse = 0;
		r->max_abs_err = 0;
		r->sqnr_db = INFINITY;
		r->cosine = 1;
		r->bias = 1;
		cli_verbose("%s: repacked %s -> %s in bands of %llu input rows", t->name, fwd ? "awq" : "gptq",
			    fwd ? "gptq" : "awq", (unsigned long long)(bu * 8));
	}
out:
	qtk_free(zsrc);
	qtk_free(zdst);
	qtk_free(scales);
	qtk_free(bsrc);
	qtk_free(bdst);
	qtk_free(diff);
	return rc;
}
