/* diff.c - qinspect --diff OTHER FILE: per-tensor error of FILE against OTHER.
 *
 * Tensors are matched by name, else by canonical name (qtk_canon_name: the
 * pairing of qverify and qconvert); GGUF attn_q/attn_k rows are un-permuted
 * (qtk_family_permute_rows) when one side has GGUF names and the other HF names
 * and the GGUF side's family permutes them. Both tensors are decoded in the
 * same row chunks, so memory stays bounded. */
#include "inspect.h"
#include <math.h>
#include <cJSON.h>
#include <string.h>

typedef struct df_acc {
	uint64_t n;
	double d2, r2, x2, xr, maxabs;
} df_acc;

/* GGUF row order -> HF row order for whole heads of `hd` rows. */
static void df_unpermute(float *dst, const float *src, uint64_t nrows, uint64_t cols, uint64_t hd)
{
	qtk_family_permute_rows((const uint8_t *)src, (uint8_t *)dst, nrows, cols * sizeof *dst, (int)(nrows / hd),
				true);
}

/* Compare x (FILE) against r (OTHER). perm_side: 0 none, 1 un-permute FILE's
 * rows, 2 un-permute OTHER's rows; hd: rows per head. */
static int df_tensor(qtk_model *mo, const qtk_tensor *to, qtk_model *mf, const qtk_tensor *tf, int perm_side,
		     uint64_t hd, df_acc *a)
{
	qtk_trows ro, rf;
	uint64_t align = 32;
	if (perm_side) {
		uint64_t x = hd, y = 32;
		while (y) {
			uint64_t t = x % y;
			x = y;
			y = t;
		}
		align = hd / x * 32;
	}
	memset(a, 0, sizeof *a);
	int rc = qtk_trows_open(&ro, mo, to, align);
	if (rc) {
		qtk_trows_close(&ro);
		return rc;
	}
	rc = qtk_trows_open(&rf, mf, tf, align);
	float *tmp = NULL;
	if (!rc && perm_side) {
		tmp = qtk_malloc((size_t)(ro.step * ro.cols) * sizeof *tmp);
		if (!tmp)
			rc = qtk_err_set(&mf->err, QTK_E_IO, NULL, -1, qtk_stats_subject(tf), "out of memory");
	}
	for (uint64_t r0 = 0; !rc && r0 < ro.rows; r0 += ro.step) {
		uint64_t n = ro.rows - r0 < ro.step ? ro.rows - r0 : ro.step;
		const float *x, *r;
		if ((rc = qtk_trows_read(&ro, r0, n, &r)) || (rc = qtk_trows_read(&rf, r0, n, &x)))
			break;
		if (perm_side == 1) {
			df_unpermute(tmp, x, n, rf.cols, hd);
			x = tmp;
		} else if (perm_side == 2) {
			df_unpermute(tmp, r, n, ro.cols, hd);
			r = tmp;
		}
		double d2 = 0, r2 = 0, x2 = 0, xr = 0;
		for (uint64_t k = 0; k < n * ro.cols; k++) {
			double xv = x[k], rv = r[k];
			if (!isfinite(xv) || !isfinite(rv))
				continue;
			double d = xv - rv;
			d2 += d * d;
			r2 += rv * rv;
			x2 += xv * xv;
			xr += xv * rv;
			if (fabs(d) > a->maxabs)
				a->maxabs = fabs(d);
			a->n++;
		}
		a->d2 += d2;
		a->r2 += r2;
		a->x2 += x2;
		a->xr += xr;
	}
	qtk_free(tmp);
	qtk_trows_close(&ro);
	qtk_trows_close(&rf);
	return rc;
}

static bool df_same_shape(const qtk_tensor *a, const qtk_tensor *b)
{
	if (a->ndim != b->ndim)
		return false;
	for (int i = 0; i < a->ndim; i++)
		if (a->shape[i] != b->shape[i])
			return false;
	return true;
}

/* Canonical name of every tensor of m (qtk_canon_name). gguf_named[i]: 0 when the name is
 * kept, 1 / 2 for a GGUF Q / K name, 3 for another GGUF name. */
static char **df_canon(const qtk_model *m, int *gguf_named)
{
	char **c = qtk_calloc(m->ntensors ? m->ntensors : 1, sizeof *c);
	if (!c)
		return NULL;
	for (size_t i = 0; i < m->ntensors; i++) {
		char buf[QTK_CAP_NAME + 64];
		int qk;
		int mapped = qtk_canon_name(m, m->tensors[i].name, buf, sizeof buf, &qk) == 1;
		if (!(c[i] = qtk_strdup(mapped ? buf : m->tensors[i].name))) {
			while (i > 0)
				qtk_free(c[--i]);
			qtk_free(c);
			return NULL;
		}
		gguf_named[i] = mapped ? (qk == 'q' ? 1 : qk == 'k' ? 2 : 3) : 0;
	}
	return c;
}

static void df_free(char **c, size_t n)
{
	if (!c)
		return;
	for (size_t i = 0; i < n; i++)
		qtk_free(c[i]);
	qtk_free(c);
}

static int report_diff_pair(qtk_model *mo, qtk_model *mf, FILE *out, const insp_opts *o);

/* Text lines of --diff; nothing with --json. */
#define TXT(...) ((void)(txt ? fprintf(txt, __VA_ARGS__) : 0))

/* A GGUF with stacked experts or generated tensors against an HF checkpoint: compared as its
 * family splits it (each expert against its HF tensor). */
int report_diff(qtk_model *mo, qtk_model *mf, FILE *out, const insp_opts *o)
{
	bool o_gguf = qtk_hfmap_restructured(mo) && !qtk_kv_find(mf, "general.architecture");
	bool f_gguf = qtk_hfmap_restructured(mf) && !qtk_kv_find(mo, "general.architecture");
	if (!o_gguf && !f_gguf)
		return report_diff_pair(mo, mf, out, o);
	qtk_hfmap *map = NULL;
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *v = qtk_hfmap_hf_shaped(o_gguf ? mo : mf, &map, &e);
	int rc = v ? report_diff_pair(o_gguf ? v : mo, o_gguf ? mf : v, out, o) : report_diff_pair(mo, mf, out, o);
	if (v && rc) /* the view's error is the file's */
		(o_gguf ? mo : mf)->err = v->err;
	qtk_close(v);
	qtk_hfmap_free(map);
	return rc;
}

/* --diff --json: the rows, one object per compared tensor, each written aside (json_aside) once
 * the next begins or the list ends. */
typedef struct drows {
	bool on;
	json_aside a;
	cJSON *cur; /* the row being filled */
	int rc;     /* QTK_E_IO once writing one failed */
} drows;

static void rows_flush(drows *r)
{
	if (!r->cur)
		return;
	if (r->rc)
		cJSON_Delete(r->cur);
	else
		r->rc = json_aside_add(&r->a, r->cur);
	r->cur = NULL;
}

static cJSON *df_row(drows *r, const qtk_tensor *tf, const qtk_tensor *to, const char *lf, const char *lo,
		     const char *status)
{
	if (!r->on)
		return NULL;
	rows_flush(r);
	cJSON *e = r->cur = cJSON_CreateObject();
	cJSON_AddItemToObject(e, "name", json_str_n(tf->name, strlen(tf->name)));
	cJSON_AddItemToObject(e, "reference_name", json_str_n(to->name, strlen(to->name)));
	cJSON_AddStringToObject(e, "layout", lf);
	cJSON_AddStringToObject(e, "reference_layout", lo);
	cJSON_AddStringToObject(e, "status", status);
	return e;
}

static cJSON *df_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static int report_diff_pair(qtk_model *mo, qtk_model *mf, FILE *out, const insp_opts *o)
{
	int rc = 0;
	cJSON *doc = NULL;
	drows jrows = {0};
	FILE *txt = out;
	if (o->json) {
		doc = cJSON_CreateObject();
		cJSON_AddNumberToObject(doc, "schema_version", 1);
		cJSON_AddItemToObject(doc, "file", json_str_n(mf->path, strlen(mf->path)));
		cJSON_AddItemToObject(doc, "reference", json_str_n(mo->path, strlen(mo->path)));
		cJSON_AddArrayToObject(doc, "tensors"); /* empty: the rows go in its place (json_aside) */
		txt = NULL;
		if (json_aside_open(&jrows.a)) {
			cJSON_Delete(doc);
			return qtk_err_set(&mf->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		}
		jrows.on = true;
	}
	char sb[512];
	int *go = qtk_calloc(mo->ntensors + 1, sizeof *go), *gf = qtk_calloc(mf->ntensors + 1, sizeof *gf);
	bool *used = qtk_calloc(mo->ntensors + 1, sizeof *used), *got = qtk_calloc(mf->ntensors + 1, sizeof *got);
	char **co = go ? df_canon(mo, go) : NULL, **cf = gf ? df_canon(mf, gf) : NULL;
	qtk_strmap name_ix = {0}, canon_ix = {0};
	if (!co || !cf || !used || !got) {
		rc = qtk_err_set(&mf->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
		goto done;
	}
	/* pairing by canonical name needs the names unique, as qverify and qconvert require */
	if ((rc = qtk_canon_unique(mo, &mo->err)) || (rc = qtk_canon_unique(mf, &mf->err))) {
		if (mo->err.code && !mo->err.file[0] && mo->path)
			snprintf(mo->err.file, sizeof mo->err.file, "%s", mo->path);
		if (mf->err.code && !mf->err.file[0] && mf->path)
			snprintf(mf->err.file, sizeof mf->err.file, "%s", mf->path);
		if (mo->err.code && !mf->err.code)
			mf->err = mo->err;
		goto done;
	}
	for (size_t j = 0; j < mo->ntensors; j++) /* first of each name: the earlier scan's choice */
		if (qtk_strmap_put(&name_ix, mo->tensors[j].name, j, NULL) < 0 ||
		    qtk_strmap_put(&canon_ix, co[j], j, NULL) < 0) {
			rc = qtk_err_set(&mf->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
			goto done;
		}
	hparams hf, ho;
	bool have_f = hparams_load(mf, &hf) == 0, have_o = hparams_load(mo, &ho) == 0;
	/* the family of each side: does its GGUF naming come with permuted Q/K rows? */
	const qtk_family *fam_f = qtk_family_of_model(mf), *fam_o = qtk_family_of_model(mo);
	size_t w = 24, wmax = o->width > 96 ? (size_t)o->width - 80 : o->width ? 16 : 48;
	for (size_t i = 0; i < mf->ntensors; i++)
		if (qtk_text_len(mf->tensors[i].name, strlen(mf->tensors[i].name), 0) > w) /* as shown */
			w = qtk_text_len(mf->tensors[i].name, strlen(mf->tensors[i].name), 0);
	if (w > wmax)
		w = wmax;
	char pf[2048], po[2048];
	TXT( "%s against %s (the reference)\n\n", insp_safe(mf->path, pf, sizeof pf), insp_safe(mo->path, po, sizeof po));
	TXT( "%-*s  %-12s %-12s %11s %11s %9s %10s\n", (int)w, "tensor", "layout", "reference", "rmse", "max_abs",
		"sqnr_db", "cosine");
	size_t matched = 0, by_name = 0, permuted = 0, unmatched_f = 0, exact = 0;
	double worst = INFINITY;
	const char *worst_name = NULL;
	for (size_t i = 0; i < mf->ntensors; i++) {
		const qtk_tensor *tf = &mf->tensors[i];
		long k = -1;
		size_t j;
		if (qtk_strmap_get(&name_ix, tf->name, &j) && !used[j])
			k = (long)j;
		bool via_canon = false;
		if (k < 0 && qtk_strmap_get(&canon_ix, cf[i], &j) && !used[j]) {
			k = (long)j;
			via_canon = true;
		}
		if (k < 0) {
			unmatched_f++;
			continue;
		}
		const qtk_tensor *to = &mo->tensors[k];
		used[k] = true;
		got[i] = true;
		matched++;
		by_name += via_canon;
		char lf[32], lo[32];
		qtk_layout_id(&tf->layout, lf, sizeof lf);
		qtk_layout_id(&to->layout, lo, sizeof lo);
		TXT( "%-*.*s  %-12s %-12s ", (int)w, (int)w, insp_safe(tf->name, sb, sizeof sb), lf, lo);
		if (!df_same_shape(tf, to)) {
			TXT( "shape differs\n");
			df_row(&jrows, tf, to, lf, lo, "shape differs");
			continue;
		}
		if (!qtk_can_decode(tf) || !qtk_can_decode(to)) {
			TXT( "no decoder for this layout\n");
			df_row(&jrows, tf, to, lf, lo, "no decoder");
			continue;
		}
		/* Q/K: un-permute the GGUF-named side when the other has HF names */
		int qk = gf[i] == 1 || gf[i] == 2 ? gf[i] : go[k] == 1 || go[k] == 2 ? go[k] : 0;
		int perm_side = 0;
		uint64_t hd = 0;
		const qtk_family *gfam = gf[i] ? fam_f : fam_o;
		if (qk && via_canon && (gf[i] != 0) != (go[k] != 0) && (!gfam || gfam->permute_qk)) {
			perm_side = gf[i] ? 1 : 2;
			const hparams *hp = perm_side == 1 ? (have_f ? &hf : have_o ? &ho : NULL) : (have_o ? &ho : have_f ? &hf : NULL);
			uint64_t nh = hp ? (qk == 1 ? hp->n_head : hp->n_head_kv) : 0;
			if (!nh || tf->ndim != 2 || tf->shape[0] % nh || (tf->shape[0] / nh) % 2) {
				TXT( "head count unknown: cannot un-permute Q/K rows\n");
				df_row(&jrows, tf, to, lf, lo, "head count unknown");
				continue;
			}
			hd = tf->shape[0] / nh;
			permuted++;
		}
		df_acc a;
		if ((rc = df_tensor(mo, to, mf, tf, perm_side, hd, &a))) {
			if (mo->err.code)
				mf->err = mo->err;
			goto done;
		}
		double rmse = a.n ? sqrt(a.d2 / (double)a.n) : 0;
		double cosv = a.x2 > 0 && a.r2 > 0 ? a.xr / sqrt(a.x2 * a.r2) : (a.x2 == a.r2 ? 1.0 : 0.0);
		cJSON *jr = df_row(&jrows, tf, to, lf, lo, a.d2 == 0 ? "exact" : "lossy");
		if (jr) {
			cJSON_AddBoolToObject(jr, "by_canonical_name", via_canon);
			cJSON_AddBoolToObject(jr, "qk_unpermuted", perm_side != 0);
			cJSON_AddNumberToObject(jr, "n_values", (double)a.n);
			cJSON_AddItemToObject(jr, "rmse", df_num(a.d2 == 0 ? 0.0 : rmse));
			cJSON_AddItemToObject(jr, "max_abs", df_num(a.d2 == 0 ? 0.0 : a.maxabs));
			cJSON_AddItemToObject(jr, "cosine", df_num(cosv));
		}
		if (a.d2 == 0) {
			exact++;
			TXT( "%11.4g %11.4g %9s %10.7f\n", 0.0, 0.0, "exact", cosv);
			if (jr)
				cJSON_AddNullToObject(jr, "sqnr_db");
			continue;
		}
		double sq = a.r2 > 0 ? 10.0 * log10(a.r2 / a.d2) : -INFINITY;
		TXT( "%11.4g %11.4g %9.2f %10.7f\n", rmse, a.maxabs, sq, cosv);
		if (jr)
			cJSON_AddItemToObject(jr, "sqnr_db", df_num(sq));
		if (sq < worst) {
			worst = sq;
			worst_name = tf->name;
		}
	}
	rows_flush(&jrows);
	if (jrows.rc) {
		rc = qtk_err_set(&mf->err, QTK_E_IO, NULL, -1, NULL, "the report's rows could not be written aside");
		goto done;
	}
	TXT( "\nmatched %zu of %zu tensors (%zu by GGUF<->HF name, %zu with Q/K rows un-permuted), %zu exact\n",
		matched, mf->ntensors, by_name, permuted, exact);
	if (worst_name)
		TXT( "worst: %s at %.2f dB SQNR\n", insp_safe(worst_name, sb, sizeof sb), worst);
	if (unmatched_f) {
		TXT( "only in %s:", insp_safe(mf->path, pf, sizeof pf));
		for (size_t i = 0, shown = 0; i < mf->ntensors; i++)
			if (!got[i] && shown++ < 50)
				TXT( " %s", insp_safe(mf->tensors[i].name, sb, sizeof sb));
		TXT("\n");
	}
	if (doc) {
		cJSON *sm = cJSON_AddObjectToObject(doc, "summary");
		cJSON_AddNumberToObject(sm, "n_tensors", (double)mf->ntensors);
		cJSON_AddNumberToObject(sm, "matched", (double)matched);
		cJSON_AddNumberToObject(sm, "by_canonical_name", (double)by_name);
		cJSON_AddNumberToObject(sm, "qk_unpermuted", (double)permuted);
		cJSON_AddNumberToObject(sm, "exact", (double)exact);
		if (worst_name) {
			cJSON *wj = cJSON_AddObjectToObject(sm, "worst");
			cJSON_AddItemToObject(wj, "name", json_str_n(worst_name, strlen(worst_name)));
			cJSON_AddItemToObject(wj, "sqnr_db", df_num(worst));
		} else {
			cJSON_AddNullToObject(sm, "worst");
		}
		cJSON *of = cJSON_AddArrayToObject(doc, "only_in_file"), *oo = cJSON_AddArrayToObject(doc, "only_in_reference");
		for (size_t i = 0; i < mf->ntensors; i++)
			if (!got[i])
				cJSON_AddItemToArray(of, json_str_n(mf->tensors[i].name, strlen(mf->tensors[i].name)));
		for (size_t j = 0; j < mo->ntensors; j++)
			if (!used[j])
				cJSON_AddItemToArray(oo, json_str_n(mo->tensors[j].name, strlen(mo->tensors[j].name)));
	}
	size_t only_o = 0;
	for (size_t j = 0; j < mo->ntensors; j++)
		only_o += !used[j];
	if (only_o) {
		TXT( "only in %s:", insp_safe(mo->path, po, sizeof po));
		for (size_t j = 0, shown = 0; j < mo->ntensors; j++)
			if (!used[j] && shown++ < 50)
				TXT( " %s", insp_safe(mo->tensors[j].name, sb, sizeof sb));
		TXT("\n");
	}
	if (doc) {
		rc = json_aside_emit(mf, &jrows.a, doc, out);
		doc = NULL;
	}
done:
	cJSON_Delete(doc);
	cJSON_Delete(jrows.cur);
	json_aside_close(&jrows.a);
	qtk_strmap_free(&name_ix);
	qtk_strmap_free(&canon_ix);
	df_free(co, mo->ntensors);
	df_free(cf, mf->ntensors);
	qtk_free(go);
	qtk_free(gf);
	qtk_free(used);
	qtk_free(got);
	return rc;
}
