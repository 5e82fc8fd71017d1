/* run.c - qconvert's plan (what each tensor becomes), execution and report. */
#include "cli.h"
#include "convert.h"
#include "decode.h"
#include "dequant.h"
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES ((size_t)8 << 20)

int conv_parse_target(const char *s, conv_target *t)
{
	if (!qtk_strcasecmp(s, "keep")) {
		t->kind = TGT_KEEP;
		return 0;
	}
	static const unsigned floats[] = {QTK_T_F32, QTK_T_F16, QTK_T_BF16};
	for (size_t i = 0; i < sizeof floats / sizeof *floats; i++)
		if (!qtk_strcasecmp(s, qtk_type(floats[i])->name)) {
			t->kind = TGT_TYPE;
			t->type = floats[i];
			return 0;
		}
	return -1;
}

static bool is_int_dtype(unsigned type)
{
	switch (type) {
	case QTK_T_I8: case QTK_T_I16: case QTK_T_I32: case QTK_T_I64:
	case QTK_DT_BOOL: case QTK_DT_U8: case QTK_DT_U16: case QTK_DT_U32: case QTK_DT_U64:
		return true;
	default:
		return false;
	}
}

/* One tensor's plan. */
typedef struct plan {
	const qtk_tensor *src;
	bool copy;          /* parts copied byte for byte */
	unsigned out_type;  /* when not copy: plain output type */
} plan;

static int plan_tensor(qtk_model *in, const conv_opts *o, const qtk_tensor *t, plan *p)
{
	p->src = t;
	p->copy = true;
	bool to_gguf = o->out_kind == QTK_OUT_GGUF;
	if (o->target.kind == TGT_KEEP || (t->layout.kind == QTK_LAYOUT_PLAIN && is_int_dtype(t->layout.type))) {
		if (to_gguf && (t->layout.kind != QTK_LAYOUT_PLAIN || t->layout.type >= QTK_GGML_MAX)) {
			char lid[48];
			qtk_layout_id(&t->layout, lid, sizeof lid);
			return qtk_err_set(&in->err, QTK_E_DATA, in->path, -1, t->name,
					   "layout %s cannot be stored in GGUF; choose a layout with --to", lid);
		}
		return 0;
	}
	unsigned ty = o->target.type;
	if (to_gguf && t->ndim <= 1 && ty != QTK_T_F32)
		ty = QTK_T_F32; /* norms and biases stay F32 in GGUF, as llama.cpp keeps them */
	if (t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == ty)
		return 0;
	if (!qtk_can_decode(t)) {
		char lid[48];
		qtk_layout_id(&t->layout, lid, sizeof lid);
		return qtk_err_set(&in->err, QTK_E_DATA, in->path, -1, t->name, "cannot decode layout %s", lid);
	}
	p->copy = false;
	p->out_type = ty;
	return 0;
}

static int value_to_string(const qtk_value *v, char *buf, size_t n)
{
	switch (v->type) {
	case QTK_V_U8: case QTK_V_U16: case QTK_V_U32: case QTK_V_U64:
		snprintf(buf, n, "%llu", (unsigned long long)v->v.u);
		return 0;
	case QTK_V_I8: case QTK_V_I16: case QTK_V_I32: case QTK_V_I64:
		snprintf(buf, n, "%lld", (long long)v->v.i);
		return 0;
	case QTK_V_BOOL:
		snprintf(buf, n, "%s", v->v.u ? "true" : "false");
		return 0;
	case QTK_V_F32: case QTK_V_F64:
		snprintf(buf, n, "%.17g", v->v.f);
		return 0;
	default:
		return -1;
	}
}

/* Apply --set KEY=VALUE: keeps the key's numeric type when it has one. */
static int apply_set(qtk_model *d, const char *kv, qtk_err *err)
{
	const char *eq = strchr(kv, '=');
	char *key = qtk_strndup(kv, (size_t)(eq - kv));
	if (!key)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	const char *val = eq + 1;
	qtk_kv *cur = (qtk_kv *)qtk_kv_find(d, key);
	int rc = 0;
	if (cur && cur->val.type != QTK_V_STR && cur->val.type != QTK_V_ARR) {
		qtk_value *v = &cur->val;
		char *end = NULL;
		if (v->type == QTK_V_BOOL) {
			if (strcmp(val, "true") && strcmp(val, "false") && strcmp(val, "1") && strcmp(val, "0"))
				rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: expected true or false");
			else
				v->v.u = !strcmp(val, "true") || !strcmp(val, "1");
		} else if (v->type == QTK_V_F32 || v->type == QTK_V_F64) {
			double x = strtod(val, &end);
			if (end == val || *end)
				rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: expected a number, not '%s'", val);
			else
				v->v.f = v->type == QTK_V_F32 ? (double)(float)x : x;
		} else {
			bool neg = val[0] == '-';
			uint64_t u;
			if (!qtk_parse_u64(val + neg, &u) || (neg && u > (uint64_t)INT64_MAX))
				rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: expected an integer, not '%s'", val);
			else if (v->type == QTK_V_U8 || v->type == QTK_V_U16 || v->type == QTK_V_U32 ||
				 v->type == QTK_V_U64) {
				uint64_t max = v->type == QTK_V_U8 ? 0xff : v->type == QTK_V_U16 ? 0xffff
					     : v->type == QTK_V_U32 ? 0xffffffffu : UINT64_MAX;
				if (neg || u > max)
					rc = qtk_err_set(err, QTK_E_USAGE, NULL, -1, key, "--set: %s out of range", val);
				else
					v->v.u = u;
			} else {
				v->v.i = neg ? -(int64_t)u : (int64_t)u;
			}
		}
	} else {
		rc = qtk_model_set_kv_str(d, key, val);
		if (rc)
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	qtk_free(key);
	return rc;
}

/* The output's metadata: the source's, fitted to the output container. */
static int build_meta(qtk_model *in, const conv_opts *o, qtk_model *d, qtk_err *err)
{
	bool strings_only = o->out_kind != QTK_OUT_GGUF;
	for (size_t i = 0; i < in->nkv; i++) {
		const qtk_kv *kv = &in->kv[i];
		if (!strncmp(kv->key, "split.", 6))
			continue;
		if (strings_only && kv->val.type != QTK_V_STR) {
			char buf[64];
			if (value_to_string(&kv->val, buf, sizeof buf)) {
				cli_verbose("%s: metadata '%s' (%s) has no place in %s output; dropped", in->path, kv->key,
					    qtk_value_type_name(kv->val.type), o->output);
				continue;
			}
			if (qtk_model_set_kv_str(d, kv->key, buf))
				return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			continue;
		}
		qtk_kv *n = qtk_model_add_kv(d, kv->key);
		if (!n || qtk_value_copy(&n->val, &kv->val))
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	}
	if (o->out_kind == QTK_OUT_HF)
		for (size_t i = 0; i < in->nblobs; i++)
			if (qtk_model_add_blob(d, in->blobs[i].name, in->blobs[i].data, in->blobs[i].len))
				return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	if (o->out_kind == QTK_OUT_GGUF && o->target.kind == TGT_TYPE) {
		/* llama_ftype of an all-float file (llama.h: ALL_F32 0, MOSTLY_F16 1, MOSTLY_BF16 32) */
		uint64_t ft = o->target.type == QTK_T_F32 ? 0 : o->target.type == QTK_T_F16 ? 1 : 32;
		qtk_kv *kv = (qtk_kv *)qtk_kv_find(d, "general.file_type");
		if (!kv && (kv = qtk_model_add_kv(d, "general.file_type")) == NULL)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		qtk_value_free(&kv->val);
		kv->val.type = QTK_V_U32;
		kv->val.v.u = ft;
	}
	for (int i = 0; i < o->nsets; i++) {
		int rc = apply_set(d, o->sets[i], err);
		if (rc)
			return rc;
	}
	return 0;
}

static int add_out_tensor(qtk_model *d, const plan *p, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	qtk_tensor *n = qtk_model_add_tensor(d, t->name);
	if (!n)
		return qtk_err_set(err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	n->ndim = t->ndim;
	memcpy(n->shape, t->shape, sizeof n->shape);
	if (p->copy) {
		n->layout = t->layout;
		n->nparts = t->nparts;
		memcpy(n->parts, t->parts, sizeof n->parts);
	} else {
		const qtk_type_info *ti = qtk_type(p->out_type);
		n->layout.kind = QTK_LAYOUT_PLAIN;
		n->layout.type = p->out_type;
		n->layout.bits = ti->code_bits;
		n->layout.group_size = ti->group;
		n->nparts = 1;
		qtk_part *q = &n->parts[0];
		memset(q, 0, sizeof *q);
		q->type = p->out_type;
		q->ndim = t->ndim;
		memcpy(q->shape, t->shape, sizeof q->shape);
		if (qtk_type_nbytes(p->out_type, t->n_params, &q->nbytes))
			return qtk_err_set(err, QTK_E_DATA, NULL, -1, t->name, "size overflows");
	}
	qtk_tensor_finish(n);
	return 0;
}

/* ---- encoding and error measurement ------------------------------------ */

static void encode_float(unsigned type, const float *x, uint64_t n, uint8_t *out)
{
	for (uint64_t i = 0; i < n; i++) {
		if (type == QTK_T_F32) {
			uint32_t u;
			memcpy(&u, &x[i], 4);
			qtk_wr32(out + 4 * i, u);
		} else {
			qtk_wr16(out + 2 * i, type == QTK_T_F16 ? qtk_f32_to_fp16(x[i]) : qtk_f32_to_bf16(x[i]));
		}
	}
}

static void errstat_add(errstat *e, const float *ref, const float *out, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint32_t a, b;
		memcpy(&a, &ref[i], 4);
		memcpy(&b, &out[i], 4);
		e->n++;
		if (a == b)
		{
			double r = ref[i];
			if (isfinite(r)) {
				e->sum_sq_ref += r * r;
				e->sum_sq_out += r * r;
				e->dot += r * r;
			}
			continue;
		}
		e->n_diff_bits++;
		double r = ref[i], q = out[i];
		if (!isfinite(r) || !isfinite(q)) {
			if (!(isnan(r) && isnan(q)))
				e->max_abs = INFINITY;
			continue;
		}
		double d = q - r;
		e->sum_sq_err += d * d;
		e->sum_sq_ref += r * r;
		e->sum_sq_out += q * q;
		e->dot += r * q;
		if (fabs(d) > e->max_abs)
			e->max_abs = fabs(d);
	}
}

static void errstat_finish(const errstat *e, tensor_result *r)
{
	r->exact = e->n_diff_bits == 0;
	r->rmse = e->n ? sqrt(e->sum_sq_err / (double)e->n) : 0;
	r->max_abs_err = e->max_abs;
	r->sqnr_db = e->sum_sq_err > 0 ? 10.0 * log10(e->sum_sq_ref / e->sum_sq_err) : INFINITY;
	double den = sqrt(e->sum_sq_ref) * sqrt(e->sum_sq_out);
	r->cosine = den > 0 ? e->dot / den : 1.0;
}

/* Convert one tensor into the writer, measuring the error. */
static int run_tensor(qtk_model *in, qtk_writer *w, const plan *p, tensor_result *r, qtk_err *err)
{
	const qtk_tensor *t = p->src;
	if (p->copy) {
		uint8_t *buf = qtk_malloc(CHUNK_BYTES);
		if (!buf)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
		int rc = 0;
		for (int k = 0; k < t->nparts && !rc; k++)
			for (uint64_t off = 0; off < t->parts[k].nbytes && !rc; off += CHUNK_BYTES) {
				size_t n = (size_t)(t->parts[k].nbytes - off < CHUNK_BYTES ? t->parts[k].nbytes - off
											     : CHUNK_BYTES);
				rc = qtk_read_part(in, t, k, off, buf, n);
				if (rc)
					*err = in->err;
				else
					rc = qtk_writer_put(w, buf, n);
			}
		qtk_free(buf);
		r->exact = true;
		r->sqnr_db = INFINITY;
		r->cosine = 1;
		return rc;
	}
	errstat e;
	memset(&e, 0, sizeof e);
	const qtk_type_info *oti = qtk_type(p->out_type);
	int rc = 0;
	float *whole = NULL, *ref = NULL, *back = NULL;
	uint8_t *scratch = NULL, *enc = NULL;
	uint64_t cols = qtk_tensor_cols(t), rows = qtk_tensor_rows(t);
	uint64_t chunk_rows = CHUNK_BYTES / 4 / (cols ? cols : 1);
	if (chunk_rows < 1)
		chunk_rows = 1;
	if (chunk_rows > rows)
		chunk_rows = rows;
	size_t cn = (size_t)(chunk_rows * cols);
	if (t->layout.kind != QTK_LAYOUT_PLAIN) {
		whole = qtk_malloc((size_t)t->n_params * sizeof(float));
		if (!whole)
			return qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
		if ((rc = qtk_decode_tensor(in, t, whole))) {
			*err = in->err;
			qtk_free(whole);
			return rc;
		}
	} else {
		uint64_t rb;
		qtk_type_nbytes(t->layout.type, cols, &rb);
		ref = qtk_malloc(cn * sizeof(float));
		scratch = qtk_malloc((size_t)(chunk_rows * rb));
		if (!ref || !scratch)
			rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	}
	back = qtk_malloc(cn * sizeof(float));
	enc = qtk_malloc(cn * oti->bytes);
	if (!back || !enc)
		rc = qtk_err_set(err, QTK_E_IO, NULL, -1, t->name, "out of memory");
	for (uint64_t r0 = 0; r0 < rows && !rc; r0 += chunk_rows) {
		uint64_t nr = rows - r0 < chunk_rows ? rows - r0 : chunk_rows;
		uint64_t n = nr * cols;
		const float *x;
		if (whole) {
			x = whole + r0 * cols;
		} else {
			rc = qtk_decode_rows(in, t, r0, nr, ref, scratch);
			if (rc) {
				*err = in->err;
				break;
			}
			x = ref;
		}
		encode_float(p->out_type, x, n, enc);
		if (qtk_dequant_ggml(p->out_type, enc, back, n))
			rc = qtk_err_set(err, QTK_E_INTERNAL, NULL, -1, t->name, "cannot decode the output");
		else
			errstat_add(&e, x, back, n);
		if (!rc)
			rc = qtk_writer_put(w, enc, (size_t)(n * oti->bytes));
	}
	errstat_finish(&e, r);
	qtk_free(whole);
	qtk_free(ref);
	qtk_free(back);
	qtk_free(scratch);
	qtk_free(enc);
	return rc;
}

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
	double mi = (double)src->n_bytes / 1048576.0, mo = (double)dst->n_bytes / 1048576.0;
	int w = 1;
	for (size_t x = n; x >= 10; x /= 10)
		w++;
	fprintf(f, "[%*zu/%zu] %s  %s  %s -> %s  %.1f MiB -> %.1f MiB  %s\n", w, i + 1, n, src->name, shape, a, b, mi,
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

int conv_run(qtk_model *in, const conv_opts *o, conv_result *res)
{
	memset(res, 0, sizeof *res);
	res->worst_sqnr = INFINITY;
	qtk_err err;
	qtk_err_clear(&err);
	int status = 0, rc = 0;
	plan *plans = qtk_calloc(in->ntensors ? in->ntensors : 1, sizeof *plans);
	qtk_model *d = qtk_model_new();
	res->t = qtk_calloc(in->ntensors ? in->ntensors : 1, sizeof *res->t);
	qtk_writer *w = NULL;
	if (!plans || !d || !res->t) {
		rc = qtk_err_set(&err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < in->ntensors && !rc; i++) {
		rc = plan_tensor(in, o, &in->tensors[i], &plans[i]);
		if (rc)
			err = in->err;
		else
			rc = add_out_tensor(d, &plans[i], &err);
	}
	if (!rc)
		rc = build_meta(in, o, d, &err);
	if (rc)
		goto done;
	res->n = in->ntensors;
	for (size_t i = 0; i < in->ntensors; i++) {
		tensor_result *r = &res->t[i];
		r->name = in->tensors[i].name;
		qtk_layout_id(&in->tensors[i].layout, r->from, sizeof r->from);
		qtk_layout_id(&d->tensors[i].layout, r->to, sizeof r->to);
		r->bytes_in = in->tensors[i].n_bytes;
		r->bytes_out = d->tensors[i].n_bytes;
		res->bytes_in += r->bytes_in;
		res->bytes_out += r->bytes_out;
		res->params += in->tensors[i].n_params;
	}
	if (o->dry_run) {
		for (size_t i = 0; i < in->ntensors; i++) {
			bool widen = plans[i].copy || plans[i].out_type == QTK_T_F32;
			plan_line(stdout, i, in->ntensors, &in->tensors[i], &d->tensors[i], widen ? "exact" : "lossy");
		}
		printf("plan: %zu tensors, %llu -> %llu bytes, %.4f -> %.4f bits per weight\n", in->ntensors,
		       (unsigned long long)res->bytes_in, (unsigned long long)res->bytes_out,
		       bpw(res->bytes_in, res->params), bpw(res->bytes_out, res->params));
		goto done;
	}
	qtk_write_opts wo = {0};
	wo.outs = &res->outs;
	w = qtk_writer_open(o->output, o->out_kind, d, &wo, &err);
	if (!w) {
		rc = err.code ? err.code : QTK_E_INTERNAL;
		goto done;
	}
	for (size_t i = 0; i < in->ntensors && !rc; i++) {
		tensor_result *r = &res->t[i];
		cli_progress(in->tensors[i].name, i, in->ntensors);
		rc = run_tensor(in, w, &plans[i], r, &err);
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
		if (g_cli.verbose > 0) {
			char note[64];
			if (r->exact)
				snprintf(note, sizeof note, "exact");
			else
				snprintf(note, sizeof note, "SQNR %.1f dB", r->sqnr_db);
			cli_progress_end();
			plan_line(stderr, i, in->ntensors, &in->tensors[i], &d->tensors[i], note);
		}
	}
	cli_progress(o->output, in->ntensors, in->ntensors);
	cli_progress_end();
	if (rc)
		goto done;
	/* checks that decide whether the output may land */
	if (o->exact && res->n_requant) {
		for (size_t i = 0; i < res->n; i++)
			if (!res->t[i].exact)
				fprintf(stderr, "qconvert: not exact: %s (%s -> %s, SQNR %.1f dB)\n", res->t[i].name,
					res->t[i].from, res->t[i].to, res->t[i].sqnr_db);
		fprintf(stderr, "qconvert: --exact: %zu of %zu tensors do not convert exactly; nothing written\n",
			res->n_requant, res->n);
		status = 1;
	}
	if (o->has_max_error && res->n_requant) {
		for (size_t i = 0; i < res->n; i++)
			if (!res->t[i].exact && res->t[i].sqnr_db < o->max_error_db) {
				fprintf(stderr, "qconvert: %s: SQNR %.2f dB is below --max-error %.2f dB\n", res->t[i].name,
					res->t[i].sqnr_db, o->max_error_db);
				status = 1;
			}
		if (status)
			fprintf(stderr, "qconvert: --max-error exceeded; nothing written\n");
	}
	if (o->report) {
		rc = write_report(o, res, &err);
		if (rc)
			goto done;
	}
	if (status) {
		qtk_writer_abort(w);
		w = NULL;
		goto done;
	}
	rc = qtk_writer_finish(w);
	w = NULL;
done:
	qtk_writer_abort(w);
	qtk_close(d);
	qtk_free(plans);
	if (rc) {
		res->n = 0;
		return cli_fail(&err);
	}
	return status;
}

void conv_print_summary(const conv_opts *o, const conv_result *res)
{
	if (o->dry_run || g_cli.verbose < 0 || !res->n)
		return;
	printf("%s -> %s: %zu tensors, %zu exact, %zu requantized\n", o->input, o->output, res->n, res->n_exact,
	       res->n_requant);
	printf("  bytes %llu -> %llu, bits per weight %.4f -> %.4f\n", (unsigned long long)res->bytes_in,
	       (unsigned long long)res->bytes_out, bpw(res->bytes_in, res->params), bpw(res->bytes_out, res->params));
	if (res->worst_name)
		printf("  worst SQNR %.2f dB (%s)\n", res->worst_sqnr, res->worst_name);
	printf("  elapsed %.2f s\n", res->elapsed);
	for (size_t i = 0; i < res->outs.n; i++) {
		char hex[65];
		qtk_hex(res->outs.f[i].sha256, 32, hex);
		printf("  %s  %llu bytes  sha256:%s\n", res->outs.f[i].path, (unsigned long long)res->outs.f[i].size, hex);
	}
}

void conv_result_free(conv_result *res)
{
	qtk_free(res->t);
	qtk_outlist_free(&res->outs);
	memset(res, 0, sizeof *res);
}
