/* run.c - qconvert's driver: plan, write, verify, report. */
#include "cli.h"
#include "convert.h"
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fmt_target(const qtk_tensor *t, char *buf, size_t n) { qtk_layout_id(&t->layout, buf, n); }

static void plan_line(FILE *f, size_t i, size_t n, const qtk_tensor *src, const qtk_tensor *dst, const char *note)
{
	char shape[64] = "[", a[48], b[48];
	size_t at = 1;
	for (int k = 0; k < src->ndim; k++)
		at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%llu", k ? ", " : "",
				       (unsigned long long)src->shape[k]);
	snprintf(shape + at, sizeof shape - at, "]");
	fmt_target(src, a, sizeof a);
	fmt_target(dst, b, sizeof b);
	const char *name = cli_safe(dst->name);
	double mi = (double)src->n_bytes / 1048576.0, mo = (double)dst->n_bytes / 1048576.0;
	int w = 1;
	for (size_t x = n; x >= 10; x /= 10)
		w++;
	fprintf(f, "[%*zu/%zu] %s  %s  %s -> %s  %.1f MiB -> %.1f MiB  %s\n", w, i + 1, n, name, shape, a, b, mi,
		mo, note);
}

static double bpw(uint64_t bytes, uint64_t params) { return params ? 8.0 * (double)bytes / (double)params : 0; }

static int write_report(const conv_opts *o, const conv_result *res, qtk_err *err)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddNumberToObject(root, "report_version", 1);
	cJSON_AddStringToObject(root, "input", o->input);
	cJSON_AddStringToObject(root, "output", o->output);
	cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
	for (size_t i = 0; i < res->n; i++) {
		const tensor_result *r = &res->t[i];
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "name", r->name);
		cJSON_AddStringToObject(j, "from", r->from);
		cJSON_AddStringToObject(j, "to", r->to);
		cJSON_AddBoolToObject(j, "exact", r->exact);
		cJSON_AddNumberToObject(j, "rmse", r->rmse);
		if (isfinite(r->max_abs_err))
			cJSON_AddNumberToObject(j, "max_abs_err", r->max_abs_err);
		else
			cJSON_AddNullToObject(j, "max_abs_err");
		if (isfinite(r->sqnr_db))
			cJSON_AddNumberToObject(j, "sqnr_db", r->sqnr_db);
		else
			cJSON_AddNullToObject(j, "sqnr_db"); /* exact: infinite */
		cJSON_AddNumberToObject(j, "cosine", r->cosine);
		cJSON_AddNumberToObject(j, "bias", r->bias);
		cJSON_AddNumberToObject(j, "bytes_in", (double)r->bytes_in);
		cJSON_AddNumberToObject(j, "bytes_out", (double)r->bytes_out);
		cJSON_AddItemToArray(ts, j);
	}
	cJSON *tot = cJSON_AddObjectToObject(root, "totals");
	cJSON_AddNumberToObject(tot, "n_tensors", (double)res->n);
	cJSON_AddNumberToObject(tot, "n_exact", (double)res->n_exact);
	cJSON_AddNumberToObject(tot, "n_requantized", (double)res->n_requant);
	cJSON_AddNumberToObject(tot, "bytes_in", (double)res->bytes_in);
	cJSON_AddNumberToObject(tot, "bytes_out", (double)res->bytes_out);
	cJSON_AddNumberToObject(tot, "bits_per_weight_in", bpw(res->bytes_in, res->params));
	cJSON_AddNumberToObject(tot, "bits_per_weight_out", bpw(res->bytes_out, res->params));
	if (res->worst_name) {
		cJSON *wj = cJSON_AddObjectToObject(root, "worst");
		cJSON_AddStringToObject(wj, "name", res->worst_name);
		cJSON_AddNumberToObject(wj, "sqnr_db", res->worst_sqnr);
	} else {
		cJSON_AddNullToObject(root, "worst");
	}
	char *txt = cJSON_Print(root);
	cJSON_Delete(root);
	if (!txt)
		return qtk_err_set(err, QTK_E_IO, o->report, -1, NULL, "out of memory");
	qtk_ofile f;
	int rc = qtk_ofile_open(&f, o->report, err);
	qtk_ofile_list(&f, NULL); /* no list takes its SHA-256 */
	if (!rc)
		rc = qtk_ofile_write(&f, txt, strlen(txt));
	if (!rc)
		rc = qtk_ofile_write(&f, "\n", 1);
	if (!rc)
		rc = qtk_ofile_commit(&f);
	if (rc)
		qtk_ofile_abort(&f);
	cJSON_free(txt);
	return rc;
}

static bool has_prefix_tensor(const qtk_model *m, const char *a, const char *b)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (!strncmp(m->tensors[i].name, a, strlen(a)) || !strncmp(m->tensors[i].name, b, strlen(b)))
			return true;
	return false;
}

/* Set up the HF <-> GGUF mapping the output needs (docs/cli.md, "Tensor names"):
 * an HF directory gets HF names, a GGUF file from an HF source GGUF names;
 * a single .safetensors keeps the source's names; --names overrides. */
static int setup_mapping(qtk_model *in, const conv_opts *o, qtk_hfmap **map, qtk_model **meta, qtk_err *err)
{
	int names = o->names;
	if (names == NAMES_DEFAULT)
		names = o->out_kind == QTK_OUT_HF ? NAMES_HF : o->out_kind == QTK_OUT_GGUF ? NAMES_GGUF : NAMES_KEEP;
	bool gguf_named = has_prefix_tensor(in, "blk.", "token_embd.");
	bool hf_named = has_prefix_tensor(in, "model.layers.", "model.embed_tokens.");
	int rc = 0;
	if (names == NAMES_GGUF && hf_named && !qtk_blob_find(in, "config.json")) {
		if (o->names == NAMES_GGUF)
			return qtk_err_set(err, QTK_E_DATA, in->path, -1, NULL,
					   "--names gguf needs the model's config.json (convert the Hugging Face directory)");
		cli_warn("%s: no config.json, so no GGUF names or metadata; keeping the tensor names", in->path);
		return 0;
	}
	if ((names == NAMES_GGUF && hf_named) || (names == NAMES_HF && gguf_named)) {
		*meta = qtk_model_new();
		if (!*meta)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		rc = names == NAMES_GGUF ? qtk_hfmap_hf_to_gguf(in, *meta, map, err) : qtk_hfmap_gguf_to_hf(in, *meta, map, err);
		if (!rc && names == NAMES_HF && qtk_model_set_kv_str(*meta, "format", "pt"))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		/* a family qtk cannot name (gpt-oss ...): the tensors can still go under their own names */
		if (rc == QTK_E_DATA && o->names == NAMES_DEFAULT && !strncmp(err->msg, "unsupported architecture", 24)) {
			size_t l = strlen(err->msg);
			snprintf(err->msg + l, sizeof err->msg - l, "; --names keep writes the tensors under their own names");
		}
		if (!rc && *map && qtk_hfmap_warning(*map))
			cli_warn("%s", qtk_hfmap_warning(*map));
	}
	return rc;
}

/* ---- the provenance record (docs/provenance.md §3: reserve, digest while writing, patch) ---- */

typedef struct prov_state {
	qtk_prov_builder b;
	char *ph, *fin;        /* the reserved (placeholder) record and the final one */
	size_t ph_len;         /* the reserved record's length (ph may be gone: prov_drop_reserved) */
	bool ph_lent;          /* ph belongs to the output's description (its record kv or file) */
	qtk_digest_sink *sink; /* output digests from the bytes handed to the writer: encoded tier */
	qtk_digest_sink *sink2; /* ... and the decoded tier, on a second tee thread */
	qtk_digests od;
	char params[4][48];
	const char *pp[4];
	qtk_err *err;
	qtk_err sink_err; /* the sink runs on the writer's tee thread: its own error */
	qtk_err sink2_err;
	bool *select;     /* source tensors hashed by the source's threads (the others: shared copies) */
	qtk_model *twin;  /* a QPK source opened again for the source's hashing thread */
} prov_state;

static int prov_tee(void *ctx, size_t tensor, const void *buf, size_t n)
{
	prov_state *p = ctx;
	return qtk_digest_sink_put(p->sink, tensor, buf, n);
}

static int prov_tee2(void *ctx, size_t tensor, const void *buf, size_t n)
{
	prov_state *p = ctx;
	return qtk_digest_sink_put(p->sink2, tensor, buf, n);
}

static int prov_patch(void *ctx, uint8_t *buf, size_t n)
{
	prov_state *p = ctx;
	return qtk_prov_patch((char *)buf, n, p->ph, p->fin, p->err);
}

/* A QPK file read through its reader, which prov_begin opens a second time for the source's
 * hashing thread. */
static bool qpk_twin_source(const qtk_model *in)
{
	return qtk_model_streamed(in) && in->fmt && !strcmp(qtk_model_format(in), "qpk") && in->path;
}

/* Fewer bytes than an output tensor adds to a record: its output.tensors entry alone, with
 * its two digests and the shortest values ({"bytes":0,"decoded":"<64>","decoded_kind":"raw",
 * "encoded":"<64>","encoding":"i8","name":"x","shape":[]}) is 224 bytes. */
#define PROV_MIN_ENTRY 200u

/* An explicit --set qtk.provenance=...: the user's record, and none of qconvert's. */
static bool prov_by_user(const conv_opts *o)
{
	for (int i = 0; i < o->nsets; i++)
		if (!strncmp(o->sets[i], QTK_PROV_KEY "=", sizeof QTK_PROV_KEY))
			return true;
	return false;
}

/* A record that cannot fit, refused before the work: the source's record is chained whole
 * (when it is valid) and each of the nout output tensors adds at least PROV_MIN_ENTRY bytes. */
static int prov_fits(qtk_model *source, size_t nout, qtk_err *err)
{
	size_t n = 0;
	const char *txt = qtk_prov_find(source, &n, NULL);
	cJSON *j = NULL;
	qtk_err pe;
	if (!txt || n + (uint64_t)nout * PROV_MIN_ENTRY <= QTK_PROV_CAP || qtk_prov_parse(txt, n, NULL, &j, &pe))
		return 0; /* fits, or not chained */
	qtk_json_tree_free(j);
	return qtk_err_set(err, QTK_E_DATA, NULL, -1, NULL,
			   "the provenance record of %zu tensors would take more than %u bytes (its limit): the "
			   "source's own record, chained into it, has %zu",
			   nout, QTK_PROV_CAP, n);
}

/* From this reserved length up (the source's record and PROV_MIN_ENTRY a tensor), the reserved
 * record is generated where the writer puts it instead of held (at 100,000 tensors: 31 to
 * 62 MB). */
#define PROV_GEN_MIN ((uint64_t)4 << 20)

/* qtk_write_opts.record_gen: the reserved record, made again where the writer puts it. */
static int prov_gen(void *ctx, int (*put)(void *pctx, const uint8_t *p, size_t n), void *pctx)
{
	prov_state *p = ctx;
	return qtk_prov_build_stream(&p->b, p->ph_len, put, pctx, p->err);
}

/* d's qtk-provenance.json emptied (a source directory's record file is replaced: its record is
 * chained), or added empty; nonzero when out of memory. */
static int prov_place_empty_file(qtk_model *d)
{
	uint8_t *none = qtk_calloc(1, 1);
	qtk_blob *bl = (qtk_blob *)qtk_blob_find(d, QTK_PROV_FILE);
	if (!none)
		return QTK_E_IO;
	if (!bl) {
		int rc = qtk_model_take_blob(d, QTK_PROV_FILE, none, 0);
		if (rc) /* not taken */
			qtk_free(none);
		return rc;
	}
	qtk_free(bl->data);
	bl->data = none;
	bl->len = 0;
	return 0;
}

/* Set the record aside in d (kv, or qtk-provenance.json for a directory) and start the sink. */
static int prov_begin(prov_state *p, qtk_model *in, qtk_model *d, const conv_opts *o, const qtk_imatrix *im,
		      int threads, qtk_write_opts *wo, qtk_err *err)
{
	qtk_prov_builder_init(&p->b);
	p->err = err;
	qtk_kv_remove(d, QTK_PROV_KEY); /* the source's record is chained (source.record), not copied */
	p->b.src = in;
	p->b.out = d;
	p->b.out_kind = o->out_kind;
	p->b.target = o->target_name;
	size_t np = 0;
	if (o->bits)
		snprintf(p->params[np++], sizeof p->params[0], "bits=%u", o->bits);
	if (o->group_size)
		snprintf(p->params[np++], sizeof p->params[0], "group_size=%u", o->group_size);
	if (o->sym)
		snprintf(p->params[np++], sizeof p->params[0], "sym=true");
	for (size_t i = 0; i < np; i++)
		p->pp[i] = p->params[i];
	p->b.params = p->pp;
	p->b.nparams = np;
	p->b.imatrix_sha256 = im ? qtk_imatrix_sha256(im) : NULL;
	p->b.imatrix_file = o->imatrix_path;
	p->b.threads = threads;
	p->b.src_select = p->select;
	/* a source read with pread is hashed beside the conversion (the record reserves its
	 * digests as placeholders), and so is a QPK file, through a second reader of its own (one
	 * reader's chunk cache and read-ahead, under its lock, would be pulled between two places
	 * in the file); one read through another format's reader (archives, standard input) is
	 * hashed first */
	if (qpk_twin_source(in)) {
		qtk_err te;
		qtk_err_clear(&te);
		p->twin = qtk_open(in->path, &te);
		if (p->twin && (p->twin->ntensors != in->ntensors || strcmp(qtk_model_format(p->twin), "qpk"))) {
			qtk_close(p->twin); /* not the file read (replaced meanwhile): hash the one read */
			p->twin = NULL;
		}
		p->b.src_hash = p->twin;
		if (!p->twin) { /* the source is hashed after the conversion, copies and all */
			qtk_free(p->select);
			p->select = NULL;
			p->b.src_select = NULL;
		}
	}
	int rc = qtk_model_streamed(in) && !p->twin ? 0 : qtk_prov_start_source(&p->b, err);
	/* a large record (many tensors, or a large chained one) is never held whole: its length is
	 * counted now and the writer generates it where it goes (a directory's record file is only
	 * ever written final, a piece at a time) */
	size_t parent_len = 0;
	qtk_prov_find(in, &parent_len, NULL);
	const bool gen = (o->out_kind == QTK_OUT_GGUF || o->out_kind == QTK_OUT_QPK ||
			  o->out_kind == QTK_OUT_SAFETENSORS || o->out_kind == QTK_OUT_HF) &&
			 (uint64_t)parent_len + (uint64_t)d->ntensors * PROV_MIN_ENTRY >= PROV_GEN_MIN;
	if (gen) {
		rc = rc ? rc : qtk_prov_build_count(&p->b, &p->ph_len, err);
	} else {
		rc = rc ? rc : qtk_prov_build(&p->b, &p->ph, err);
		p->ph_len = rc ? 0 : strlen(p->ph);
	}
	/* the reserved record has the final one's size: one over its cap is refused now, before
	 * the conversion's work rather than after it */
	if (!rc && p->ph_len > QTK_PROV_CAP)
		rc = qtk_err_set(err, QTK_E_DATA, NULL, -1, NULL,
				 "the provenance record of %zu tensors would take %zu bytes, over its limit of %u",
				 d->ntensors, p->ph_len, QTK_PROV_CAP);
	if (!rc && p->b.note[0])
		cli_warn("%s", p->b.note);
	/* d takes the reserved record (no copy); p->ph stays its name for the patch */
	if (!rc && gen) {
		/* the record's place (key, or a directory's side file) holds nothing: the writer
		 * generates what goes there */
		if (o->out_kind == QTK_OUT_HF ? prov_place_empty_file(d) : qtk_model_set_kv_str(d, QTK_PROV_KEY, ""))
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		wo->record_gen = prov_gen;
		wo->record_ctx = p;
		wo->record_len = p->ph_len;
	} else if (!rc && o->out_kind == QTK_OUT_HF) {
		qtk_blob *bl = (qtk_blob *)qtk_blob_find(d, QTK_PROV_FILE);
		if (bl) { /* a source directory's record file: replaced, its record is chained */
			qtk_free(bl->data);
			bl->len = p->ph_len;
			bl->data = (uint8_t *)p->ph;
			p->ph_lent = true;
		} else if (qtk_model_take_blob(d, QTK_PROV_FILE, (uint8_t *)p->ph, p->ph_len)) {
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		} else {
			p->ph_lent = true;
		}
	} else if (!rc && qtk_model_take_kv_str(d, QTK_PROV_KEY, p->ph)) {
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	} else if (!rc) {
		p->ph_lent = true;
	}
	/* two tee threads: the encoded tier on one, the decoded tier (decoding, twice the bytes
	 * for F16) on the other */
	if (!rc && (rc = qtk_digest_sink_new_mode(d, QTK_SINK_ENC, &p->sink, &p->sink_err)))
		*err = p->sink_err;
	if (!rc && (rc = qtk_digest_sink_new_mode(d, QTK_SINK_DEC, &p->sink2, &p->sink2_err)))
		*err = p->sink2_err;
	wo->tee = prov_tee;
	wo->tee_ctx = p;
	wo->tee_async = true; /* output digests overlap the conversion */
	wo->tee_err = &p->sink_err;
	wo->tee2 = prov_tee2;
	wo->tee2_ctx = p;
	wo->tee2_err = &p->sink2_err;
	wo->patch_pending = true; /* prov_end patches the header: hash the files once, after it */
	return rc;
}

/* Once the output's header is written: a writer that places the final record a piece at a
 * time has no use for the reserved one's text (tens of MB at 100,000 tensors), which goes. */
static void prov_drop_reserved(prov_state *p, qtk_model *d, const qtk_writer *w)
{
	if (!p->ph_lent || !qtk_writer_has_put_record(w) || qtk_kv_find(d, QTK_PROV_KEY) == NULL)
		return;
	qtk_kv_remove(d, QTK_PROV_KEY); /* frees ph, which d held */
	p->ph = NULL;
	p->ph_lent = false;
}

typedef struct rec_place {
	qtk_writer *w;
	uint64_t at;
} rec_place;

static int rec_piece(void *ctx, const uint8_t *buf, size_t n)
{
	rec_place *rp = ctx;
	int rc = qtk_writer_record_piece(rp->w, rp->at, buf, n);
	rp->at += n;
	return rc;
}

/* All data written: the final record replaces the reserved one. */
static int prov_end(prov_state *p, qtk_writer *w)
{
	int rc = qtk_writer_drain(w);
	rc = rc ? rc : qtk_prov_join_source(&p->b, p->err);
	if (rc)
		return rc;
	rc = qtk_digest_sink_finish_pair(p->sink, p->sink2, &p->b.src_cache, &p->od);
	p->sink = p->sink2 = NULL;
	if (rc) {
		*p->err = p->sink_err;
		return rc;
	}
	/* copied tensors: the source's leaves are the output's (hashed once, from the bytes copied) */
	rc = qtk_prov_take_shared(&p->b, &p->od, p->err);
	p->b.out_digests = &p->od;
	if (!rc && qtk_writer_has_put_record(w)) {
		/* the writer knows where the reserved record's bytes are (every container but
		 * archives): the final record goes there as it is made, never held whole, and the
		 * header is not read back */
		rec_place rp = {w, 0};
		rc = qtk_prov_build_stream(&p->b, p->ph_len, rec_piece, &rp, p->err);
		return rc ? rc : qtk_writer_record_end(w, p->ph_len);
	}
	/* archives: the reserved record found in the header and patched */
	rc = rc ? rc : qtk_prov_build_sized(&p->b, p->ph_len, &p->fin, p->err);
	return rc ? rc : qtk_writer_patch_header(w, prov_patch, p);
}

static void prov_free(prov_state *p)
{
	qtk_digest_sink_free(p->sink);
	qtk_digest_sink_free(p->sink2);
	qtk_digests_free(&p->od);
	qtk_prov_builder_free(&p->b); /* joins the source's hashing thread */
	qtk_close(p->twin);
	qtk_free(p->select);
	if (!p->ph_lent)
		qtk_free(p->ph);
	qtk_free(p->fin);
	memset(p, 0, sizeof *p);
}

/* The index of the source tensor that tensor t of in is, byte for byte: t itself when in is the
 * source, the stored tensor behind a whole-tensor view of it (a renamed tensor), else SIZE_MAX. */
static size_t stored_index(const qtk_model *source, const qtk_model *in, const qtk_tensor *t)
{
	const qtk_tensor *b = t;
	if (in != source) {
		const qtk_view *v = t->view;
		if (!v || v->kind != QTK_VIEW_SLICE || v->n != 1 || v->index != 0 || v->m != source || !v->pieces)
			return SIZE_MAX;
		b = v->pieces[0];
	}
	if (!b || b < source->tensors || b >= source->tensors + source->ntensors)
		return SIZE_MAX;
	return (size_t)(b - source->tensors);
}

/* Will the source's digests hold the decoded leaf of output tensor k, as the leaf of source
 * tensor st, under the same canonical name, shape and row order? Then an output proven to decode
 * to st's values may take it (qtk_digest_sink_decoded_source). */
static bool src_leaf_for(const prov_state *p, const qtk_model *source, const qtk_model *in, const qtk_tensor *st,
			 const qtk_model *d, size_t k)
{
	const size_t si = stored_index(source, in, st);
	if (si == SIZE_MAX || (p->select && !p->select[si]) || p->b.src_digests || (!p->b.src_pending && !p->b.cached))
		return false;
	const qtk_digests *src = &p->b.src_cache;
	qtk_leaf om;
	qtk_err e;
	qtk_err_clear(&e);
	memset(&om, 0, sizeof om);
	if (qtk_digest_leaf_meta(d, &d->tensors[k], &om, &e))
		return false;
	const qtk_leaf *sl = qtk_digests_find(src, om.name);
	const bool ok = sl && sl->stored && !strcmp(sl->stored, source->tensors[si].name) && sl->ndim == om.ndim &&
			!memcmp(sl->shape, om.shape, sizeof om.shape) && sl->qk_heads == om.qk_heads &&
			sl->dec_kind == om.dec_kind && om.dec_kind == QTK_DEC_VALUES;
	qtk_free(om.name);
	qtk_free(om.stored);
	return ok;
}

/* Layouts GGUF has no type for (FP8, NVFP4 with a per-tensor scale, bitsandbytes 4- and 8-bit;
 * q8_0 has one F16 scale per 32 codes, LLM.int8 an F32 SCB / 127 per row): say so
 * once per layout, with what the chosen target costs. */
static void note_no_ggml_type(const qtk_model *in, const qtk_model *d, const plan *plans, const size_t *order,
			      size_t nout)
{
	static const qtk_layout_kind kinds[] = {QTK_LAYOUT_FP8, QTK_LAYOUT_NVFP4, QTK_LAYOUT_BNB4, QTK_LAYOUT_BNB8};
	for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
		size_t n = 0;
		uint64_t bin = 0, bout = 0;
		char to[48] = "";
		bool mixed = false;
		for (size_t j = 0; j < nout; j++) {
			const qtk_tensor *t = &in->tensors[order[j]];
			if (t->layout.kind != kinds[k] || plans[order[j]].nv_scaled)
				continue; /* NVFP4 blocks with their .scale: exact or measured, not a re-fit */
			char id[48];
			qtk_layout_id(&d->tensors[j].layout, id, sizeof id);
			if (n && strcmp(id, to))
				mixed = true;
			snprintf(to, sizeof to, "%s", id);
			n++;
			bin += t->n_bytes;
			bout += d->tensors[j].n_bytes;
		}
		if (!n)
			continue;
		char lid[48];
		qtk_layout l = {.kind = kinds[k]};
		qtk_layout_id(&l, lid, sizeof lid);
		cli_warn("%zu %s tensor%s: GGUF has no type that holds %s values exactly; writing %s (%.2fx the "
			 "bytes: %llu -> %llu)%s",
			 n, lid, n == 1 ? "" : "s", lid, mixed ? "several types" : to, bin ? (double)bout / (double)bin : 0.0,
			 (unsigned long long)bin, (unsigned long long)bout,
			 kinds[k] == QTK_LAYOUT_NVFP4 ? "; --to nvfp4 keeps the blocks with their .scale (exact for ModelOpt)" : "");
	}
}

/* The .scale tensors added to the view for NVFP4 layers shuffled into ggml blocks. */
typedef struct nv_scales {
	size_t n0;          /* tensors of the view before the additions */
	bool *pick;         /* per tensor: shuffled (conv_nvfp4_scaled) */
	float *scale;       /* its multiplier */
	size_t *scale_of;   /* per tensor: the index of its added .scale, or SIZE_MAX */
	qtk_view *views;    /* the added tensors' in-memory views */
	uint8_t *bytes;     /* their F32 values */
} nv_scales;

static void nv_scales_free(nv_scales *nv)
{
	qtk_free(nv->pick);
	qtk_free(nv->scale);
	qtk_free(nv->scale_of);
	qtk_free(nv->views);
	qtk_free(nv->bytes);
	memset(nv, 0, sizeof *nv);
}

/* Decide which NVFP4 layers are shuffled (ro->nv_pick) and add `<name>.scale`, F32 [1], for each
 * whose multiplier is not exactly 1 (llama.cpp's converter omits scales within 1e-6 of 1; qtk
 * only the ones that change nothing). */
static int add_nvfp4_scales(qtk_model *in, conv_opts *ro, nv_scales *nv, qtk_err *err)
{
	size_t n0 = in->ntensors, nadd = 0;
	bool any = false;
	for (size_t i = 0; i < n0 && !any; i++)
		any = in->tensors[i].layout.kind == QTK_LAYOUT_NVFP4;
	if (!any)
		return 0;
	nv->n0 = n0;
	nv->pick = qtk_calloc(2 * n0 + 1, sizeof *nv->pick);
	nv->scale = qtk_calloc(2 * n0 + 1, sizeof *nv->scale);
	nv->scale_of = qtk_calloc(2 * n0 + 1, sizeof *nv->scale_of);
	nv->views = qtk_calloc(n0 + 1, sizeof *nv->views);
	nv->bytes = qtk_calloc(n0 + 1, 4);
	if (!nv->pick || !nv->scale || !nv->scale_of || !nv->views || !nv->bytes)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	for (size_t i = 0; i < 2 * n0 + 1; i++)
		nv->scale_of[i] = SIZE_MAX;
	for (size_t i = 0; i < n0; i++) {
		int r = conv_nvfp4_scaled(in, ro, &in->tensors[i], &nv->scale[i], err);
		if (r < 0 || r > 1)
			return r < 0 ? r : QTK_E_INTERNAL;
		nv->pick[i] = r == 1;
	}
	for (size_t i = 0; i < n0; i++) {
		if (!nv->pick[i] || nv->scale[i] == 1.0f)
			continue;
		const char *wn = in->tensors[i].name;
		char sn[QTK_CAP_NAME + 8];
		snprintf(sn, sizeof sn, "%.*s.scale", (int)(strlen(wn) - 7), wn); /* conv_nvfp4_scaled: ".weight" */
		qtk_tensor *t = qtk_model_add_tensor_room(in, sn, 1); /* may move in->tensors: wn is not used after */
		if (!t)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		uint32_t u;
		memcpy(&u, &nv->scale[i], 4);
		qtk_wr32(nv->bytes + 4 * nadd, u);
		qtk_view *v = &nv->views[nadd];
		v->kind = QTK_VIEW_MEM;
		v->mem = nv->bytes + 4 * nadd;
		char *name = t->name;
		qtk_tensor_clear(t);
		t->name = name;
		t->ndim = 1;
		t->shape[0] = 1;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = QTK_T_F32;
		t->layout.bits = (uint8_t)qtk_type(QTK_T_F32)->code_bits;
		t->nparts = 1;
		t->parts[0].type = QTK_T_F32;
		t->parts[0].ndim = 1;
		t->parts[0].shape[0] = 1;
		t->parts[0].nbytes = 4;
		t->view = v;
		qtk_tensor_finish(t);
		nv->scale_of[i] = n0 + nadd++;
	}
	ro->nv_pick = nv->pick;
	ro->nv_scales = nv->scale;
	return 0;
}

int conv_run(qtk_model *source, const conv_opts *o, conv_result *res)
{
	prov_state prov;
	memset(&prov, 0, sizeof prov);
	memset(res, 0, sizeof *res);
	res->worst_sqnr = INFINITY;
	qtk_err err;
	qtk_err_clear(&err);
	int status = 0, rc = 0;
	bool early = false;
	plan *plans = NULL;
	qtk_tensor *outs = NULL; /* the plans' output descriptions until d holds them */
	qtk_model *d = qtk_model_new();
	qtk_writer *w = NULL;
	qtk_imatrix *im = NULL;
	qtk_hfmap *map = NULL;
	qtk_model *mapmeta = NULL, *view = NULL;
	size_t *order = NULL, nout = 0;
	conv_opts ro;
	nv_scales nv;
	memset(&nv, 0, sizeof nv);
	/* in: the tensors as the output names them; with a name mapping, the mapping's view of the
	 * source (experts stacked or split, generated tensors), else the source itself */
	qtk_model *in = source;
	if (!d) {
		rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		goto done;
	}
	if (o->imatrix_path && !(im = qtk_imatrix_load(o->imatrix_path, &err))) {
		rc = err.code;
		goto done;
	}
	rc = setup_mapping(source, o, &map, &mapmeta, &err);
	if (!rc && map) {
		bool to_gguf = qtk_kv_find(mapmeta, "general.architecture") != NULL;
		rc = qtk_hfmap_view(map, source, to_gguf ? mapmeta : source, &view, &err);
		if (!rc)
			in = view;
	}
	if (rc)
		goto done;
	ro = *o;
	ro.nv_scale_ok = view != NULL; /* the view takes the added .scale tensors, never the source */
	if (o->out_kind == QTK_OUT_GGUF && (rc = add_nvfp4_scales(in, &ro, &nv, &err)))
		goto done;
	nout = in->ntensors;
	if (!o->dry_run && !prov_by_user(o) && (rc = prov_fits(source, nout, &err)))
		goto done;
	plans = qtk_calloc(nout ? nout : 1, sizeof *plans);
	outs = qtk_calloc(nout ? nout : 1, sizeof *outs);
	res->t = qtk_calloc(nout ? nout : 1, sizeof *res->t);
	order = qtk_calloc(nout ? nout : 1, sizeof *order);
	if (!plans || !outs || !res->t || !order || qtk_model_reserve_tensors(d, nout)) {
		rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		goto done;
	}
	/* each added .scale right after its weight, as llama.cpp's converter writes them */
	for (size_t i = 0, k = 0, nbase = nv.n0 ? nv.n0 : nout; i < nbase; i++) {
		order[k++] = i;
		if (nv.scale_of && nv.scale_of[i] != SIZE_MAX)
			order[k++] = nv.scale_of[i];
	}
	if (!rc)
		rc = conv_plan(in, &ro, im, map, plans, outs, d, &err);
	for (size_t k = 0; k < nout && !rc; k++) {
		size_t i = order[k];
		qtk_tensor *n = qtk_model_add_tensor_room(d, plans[i].out_name, 0);
		if (!n) {
			rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			break;
		}
		char *name = n->name;
		*n = *plans[i].out; /* its parts are in d already (conv_plan): d's tensor takes them */
		n->name = name;
		qtk_tensor_finish(n);
	}
	/* the plans take their outputs from d from here on (d's table no longer grows) */
	for (size_t k = 0; k < nout && !rc; k++)
		plans[order[k]].out = &d->tensors[k];
	qtk_free(outs);
	outs = NULL;
	if (!rc)
		rc = conv_build_meta(mapmeta ? mapmeta : source, o, d, &err);
	if (!rc && o->out_kind == QTK_OUT_HF)
		rc = conv_model_card(source, d, o, &err);
	if (rc)
		goto done;
	res->n = nout;
	for (size_t k = 0; k < nout; k++) {
		size_t i = order[k];
		tensor_result *r = &res->t[k];
		if (!(r->name = qtk_strdup(d->tensors[k].name))) {
			rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			goto done;
		}
		char id[48];
		qtk_layout_id(&in->tensors[i].layout, id, sizeof id);
		r->from = qtk_intern(id);
		qtk_layout_id(&d->tensors[k].layout, id, sizeof id);
		r->to = qtk_intern(id);
		if (!r->from || !r->to) {
			rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			goto done;
		}
		r->bytes_in = in->tensors[i].n_bytes;
		r->bytes_out = d->tensors[k].n_bytes;
		res->bytes_in += r->bytes_in;
		res->bytes_out += r->bytes_out;
		res->params += in->tensors[i].n_params;
	}
	if (o->out_kind == QTK_OUT_GGUF)
		note_no_ggml_type(in, d, plans, order, nout);
	/* --dry-run with --exact or --max-error: the tensors are converted and verified as a run would
	 * (the outcome decides the exit status), and nothing is written */
	bool measure = o->dry_run && (o->exact || o->has_max_error);
	if (o->dry_run && !measure) {
		for (size_t k = 0; k < nout; k++)
			plan_line(stdout, k, nout, &in->tensors[order[k]], &d->tensors[k], plans[order[k]].note);
		printf("plan: %zu tensors, %llu -> %llu bytes, %.4f -> %.4f bits per weight\n", in->ntensors,
		       (unsigned long long)res->bytes_in, (unsigned long long)res->bytes_out,
		       bpw(res->bytes_in, res->params), bpw(res->bytes_out, res->params));
		goto done;
	}
	qtk_write_opts wo = {0};
	/* the output files' SHA-256s are for the summary: none under --quiet (the files whose header
	 * takes the record are then not read back and hashed after the patch) */
	wo.outs = g_cli.verbose < 0 ? NULL : &res->outs;
	wo.split_max_size = o->split_max_size;
	wo.force = o->force;
	wo.carry = o->carry;
	wo.ncarry = o->ncarry;
	int threads = o->threads > 0 ? o->threads : qtk_cpu_count();
	wo.threads = threads;
	/* every output carries a record; an explicit --set qtk.provenance=... is the user's choice */
	bool with_prov = !measure && !prov_by_user(o);
	/* Byte-for-byte copies from a source hashed beside the conversion (read with pread, or a
	 * QPK file, hashed through a second reader): the bytes the copy reads are hashed once, as
	 * they are written, and give both the output's and the source's leaves
	 * (qtk_digest_same_stream: nothing else enters them differently), so the source's threads
	 * skip those tensors. The leaves then describe the bytes copied, by construction, rather
	 * than a second read of the source proven equal by a second hash. A QPK reader checks each
	 * part's SHA-256 as the copy reads it to its end. */
	if (with_prov && (!qtk_model_streamed(source) || qpk_twin_source(source)) && source->ntensors) {
		prov.select = qtk_malloc(source->ntensors * sizeof *prov.select);
		if (!prov.select) {
			rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			goto done;
		}
		for (size_t i = 0; i < source->ntensors; i++)
			prov.select[i] = true;
		for (size_t k = 0; k < nout; k++) {
			const plan *pl = &plans[order[k]];
			const qtk_tensor *st = &in->tensors[order[k]];
			const size_t si = stored_index(source, in, st);
			if (si != SIZE_MAX && pl->method == M_COPY && !pl->perm_heads && pl->src == st && prov.select[si] &&
			    qtk_digest_same_stream(source, &source->tensors[si], d, &d->tensors[k])) {
				prov.select[si] = false;
			}
		}
	}
	if (with_prov && (rc = prov_begin(&prov, source, d, o, im, threads, &wo, &err)))
		goto done;
	/* byte-for-byte copies: only their encoded leaves need hashing (checked against the source);
	 * not those of shared tensors, whose source leaves come from the output at the end */
	for (size_t k = 0; with_prov && k < nout; k++) {
		const qtk_tensor *st = &in->tensors[order[k]];
		char canon[QTK_CAP_NAME + 64];
		int qk;
		const qtk_hfmap_out *mo = map ? qtk_hfmap_view_out(map, order[k]) : NULL;
		const size_t si = stored_index(source, in, st);
		if (plans[order[k]].method != M_COPY || (map && (!mo || !mo->copy)) ||
		    (prov.select && si != SIZE_MAX && !prov.select[si]) ||
		    qtk_canon_name(in, st->name, canon, sizeof canon, &qk) < 0)
			continue;
		const qtk_leaf *sl = qtk_digests_find(&prov.b.src_cache, canon);
		for (int sn = 0; sn < 2; sn++) { /* both sinks: the decoded one skips proven copies */
			qtk_digest_sink *sk = sn ? prov.sink2 : prov.sink;
			if (prov.b.src_pending) /* described, its digests to come */
				qtk_digest_sink_expect_late(sk, k, sl);
			else
				qtk_digest_sink_expect(sk, k, sl);
		}
	}
	w = qtk_writer_open(o->output, o->out_kind, d, &wo, &err);
	if (!w) {
		rc = err.code ? err.code : QTK_E_INTERNAL;
		goto done;
	}
	/* the reserved record's building and the header's writing freed tens of MiB at 100,000
	 * tensors (and the reserved text goes when the final one is streamed): back to the system
	 * before the tensors' buffers come */
	if (with_prov) {
		prov_drop_reserved(&prov, d, w);
		qtk_mem_release();
	}
	/* a QPK source's part digests are checked on a thread beside the conversion (settled
	 * below, before anything is written beside the output or the output lands) when a core is
	 * free for it: on 2 cores the record's hashing keeps both busy, and the check's copies
	 * then only add work (QPK -> GGUF of the 300M bench model: 0.54-0.58 s against 0.75-0.78 s
	 * without the record; 1.11-1.17 s against 0.97-1.03 s with it) */
	if (threads > 1 && (!with_prov || threads > 2))
		qtk_read_verify_async(source);
	for (size_t k = 0; k < nout && !rc; k++) {
		size_t i = order[k];
		tensor_result *r = &res->t[k];
		cli_progress_item(in->tensors[i].name, k, nout, in->tensors[i].n_bytes, res->bytes_in);
		const conv_rec cr = {prov.sink2, d, k,
				     with_prov && plans[i].method == M_GROUPS && src_leaf_for(&prov, source, in, &in->tensors[i], d, k)};
		rc = conv_tensor(in, w, &plans[i], threads, with_prov && prov.sink2 ? &cr : NULL, r, &err);
		if (rc)
			break;
		if (r->exact)
			res->n_exact++;
		else
			res->n_requant++;
		if (!r->exact && r->sqnr_db < res->worst_sqnr) {
			res->worst_sqnr = r->sqnr_db;
			res->worst_name = r->name;
		}
		if (measure) {
			char note[64];
			if (r->exact)
				snprintf(note, sizeof note, "exact");
			else
				snprintf(note, sizeof note, "SQNR %.1f dB, bias %.4f", r->sqnr_db, r->bias);
			cli_progress_end();
			plan_line(stdout, k, nout, &in->tensors[i], &d->tensors[k], note);
		}
		/* a check the run cannot pass any more ends it here: nothing is written either way */
		if (!measure && ((o->exact && !r->exact) || (o->has_max_error && !r->exact && !(r->sqnr_db >= o->max_error_db)))) {
			res->n = k + 1;
			early = true;
			break;
		}
		if (g_cli.verbose > 0) {
			char note[64];
			if (r->exact)
				snprintf(note, sizeof note, "exact");
			else
				snprintf(note, sizeof note, "SQNR %.1f dB, bias %.4f", r->sqnr_db, r->bias);
			cli_progress_end();
			plan_line(stderr, k, nout, &in->tensors[i], &d->tensors[k], note);
		}
	}
	cli_progress_item(NULL, nout, nout, 0, res->bytes_in);
	cli_progress_end();
	if (!rc && (rc = qtk_read_settle(source)))
		err = source->err;
	if (rc)
		goto done;
	/* checks that decide whether the output may land */
	if (o->exact && res->n_requant) {
		for (size_t i = 0; i < res->n; i++)
			if (!res->t[i].exact)
				fprintf(stderr, "qconvert: not exact: %s (%s -> %s, SQNR %.1f dB)\n", cli_safe(res->t[i].name),
					res->t[i].from, res->t[i].to, res->t[i].sqnr_db);
		if (early)
			fprintf(stderr, "qconvert: --exact: stopped at tensor %zu of %zu, the first that does not convert "
				"exactly; nothing written\n", res->n, nout);
		else
			fprintf(stderr, "qconvert: --exact: %zu of %zu tensors do not convert exactly; nothing written\n",
				res->n_requant, res->n);
		status = 1;
	}
	if (o->has_max_error && res->n_requant) {
		for (size_t i = 0; i < res->n; i++)
			if (!res->t[i].exact && res->t[i].sqnr_db < o->max_error_db) {
				fprintf(stderr, "qconvert: %s: SQNR %.2f dB is below --max-error %.2f dB\n", cli_safe(res->t[i].name),
					res->t[i].sqnr_db, o->max_error_db);
				status = 1;
			}
		if (status)
			fprintf(stderr, "qconvert: --max-error exceeded%s; nothing written\n",
				early ? " (stopped at the first tensor below it)" : "");
	}
	if (status || measure) {
		/* the report says why the checks failed (or what the plan is) */
		if (o->report && (rc = write_report(o, res, &err)))
			goto done;
		qtk_writer_abort(w);
		w = NULL;
		if (measure)
			printf("plan: %zu tensors, %zu exact, %zu requantized%s; --dry-run: nothing written\n", res->n,
			       res->n_exact, res->n_requant, status ? "; the run would fail its checks" : "");
		goto done;
	}
	if (with_prov && (rc = prov_end(&prov, w)))
		goto done;
	if ((rc = qtk_read_settle(source))) { /* the record's own reads of the source, if any */
		err = source->err;
		goto done;
	}
	/* the report once nothing can fail but the output's own commit */
	if (o->report && (rc = write_report(o, res, &err)))
		goto done;
	rc = qtk_writer_finish(w);
	w = NULL;
done:
	qtk_writer_abort(w);
	prov_free(&prov);
	qtk_imatrix_free(im);
	qtk_close(view);
	nv_scales_free(&nv);
	qtk_hfmap_free(map);
	qtk_close(mapmeta);
	qtk_free(order);
	/* plan outputs borrow names from the input: give the copies back before closing */
	qtk_close(d);
	qtk_free(plans);
	qtk_free(outs);
	if (rc) {
		for (size_t i = 0; res->t && i < res->n; i++)
			qtk_free(res->t[i].name);
		res->n = 0;
		return cli_fail(&err);
	}
	return status;
}

void conv_print_summary(const conv_opts *o, const conv_result *res)
{
	if (o->dry_run || g_cli.verbose < 0 || !res->n)
		return;
	printf("%s -> %s: %zu tensors, %zu exact, %zu requantized\n", cli_safe(o->input), cli_safe(o->output), res->n,
	       res->n_exact, res->n_requant);
	printf("  bytes %llu -> %llu, bits per weight %.4f -> %.4f\n", (unsigned long long)res->bytes_in,
	       (unsigned long long)res->bytes_out, bpw(res->bytes_in, res->params), bpw(res->bytes_out, res->params));
	if (res->worst_name)
		printf("  worst SQNR %.2f dB (%s)\n", res->worst_sqnr, cli_safe(res->worst_name));
	/* shrinkage: the requantized tensor whose bias is farthest from 1 */
	const tensor_result *wb = NULL;
	for (size_t i = 0; i < res->n; i++)
		if (!res->t[i].exact && isfinite(res->t[i].bias) &&
		    (!wb || fabs(res->t[i].bias - 1.0) > fabs(wb->bias - 1.0)))
			wb = &res->t[i];
	if (wb)
		printf("  bias farthest from 1: %.4f (%s)\n", wb->bias, cli_safe(wb->name));
	printf("  elapsed %.2f s\n", res->elapsed);
	for (size_t i = 0; i < res->outs.n; i++) {
		char hex[65];
		qtk_hex(res->outs.f[i].sha256, 32, hex);
		printf("  %s  %llu bytes  sha256:%s\n", cli_safe(res->outs.f[i].path), (unsigned long long)res->outs.f[i].size,
		       hex);
	}
}

void conv_result_free(conv_result *res)
{
	for (size_t i = 0; res->t && i < res->n; i++)
		qtk_free(res->t[i].name);
	qtk_free(res->t);
	qtk_outlist_free(&res->outs);
	memset(res, 0, sizeof *res);
}
