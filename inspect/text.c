/* text.c - qinspect --tensor NAME and --memory (text and JSON). */
#include "inspect.h"
#include <cJSON.h>
#include <math.h>
#include <string.h>

static double tx_bpw(uint64_t bytes, uint64_t params) { return params ? 8.0 * (double)bytes / (double)params : 0; }

/* One "#" bar, log-scaled: width w for count == max. */
static void tx_bar(FILE *out, uint64_t count, uint64_t max, int w)
{
	int k = 0;
	if (count && max)
		k = 1 + (int)((w - 1) * (log1p((double)count) - log1p(1)) / (log1p((double)max) - log1p(1) + 1e-300));
	if (count && max == 1)
		k = 1;
	if (k > w)
		k = w;
	for (int i = 0; i < k; i++)
		fputc('#', out);
	fprintf(out, "%*s", w - k, "");
}

static uint64_t tx_max(const uint64_t *c, size_t n)
{
	uint64_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (c[i] > m)
			m = c[i];
	return m;
}

/* A value histogram as one text line per bin (log counts). */
static void tx_hist(FILE *out, const qtk_hist *h, const char *indent)
{
	uint64_t mx = tx_max(h->counts, QTK_ST_BINS);
	double w = (h->hi - h->lo) / QTK_ST_BINS;
	for (int k = 0; k < QTK_ST_BINS; k++) {
		fprintf(out, "%s%12.5g  ", indent, h->lo + w * k);
		tx_bar(out, h->counts[k], mx, 40);
		fprintf(out, " %llu\n", (unsigned long long)h->counts[k]);
	}
}

/* Integer counts (codes, zero points), bins merged so at most 32 lines. */
static void tx_levels(FILE *out, const uint64_t *c, int n, const char *indent)
{
	int per = n > 32 ? (n + 31) / 32 : 1;
	uint64_t merged[64] = {0};
	int nm = (n + per - 1) / per;
	for (int i = 0; i < n; i++)
		merged[i / per] += c[i];
	uint64_t mx = tx_max(merged, (size_t)nm);
	for (int b = 0; b < nm; b++) {
		if (per == 1)
			fprintf(out, "%s%7d  ", indent, b);
		else
			fprintf(out, "%s%3d-%3d  ", indent, b * per, b * per + per - 1);
		tx_bar(out, merged[b], mx, 40);
		fprintf(out, " %llu\n", (unsigned long long)merged[b]);
	}
}

static void tx_pct(char *buf, size_t n, uint64_t a, uint64_t b)
{
	snprintf(buf, n, "%.3g%%", b ? 100.0 * (double)a / (double)b : 0.0);
}

/* Header lines shared with the TUI's detail pane wording. */
static void tx_header(FILE *out, const qtk_model *m, const qtk_tensor *t)
{
	char sh[128], lid[64], by[32];
	fmt_shape(t, sh, sizeof sh);
	qtk_layout_id(&t->layout, lid, sizeof lid);
	fmt_bytes(t->n_bytes, by, sizeof by);
	totals tt;
	compute_totals(m, &tt);
	char sb[512];
	fprintf(out, "tensor %s\n", insp_safe(t->name, sb, sizeof sb));
	fprintf(out, "  shape      %s (logical, outermost first)\n", sh);
	const qtk_type_info *ti = qtk_type(t->layout.type);
	bool fl = t->layout.kind == QTK_LAYOUT_PLAIN && ti && ti->is_float;
	fprintf(out, "  layout     %s (%s), %u-bit %s", lid, qtk_layout_type_name(&t->layout), t->layout.bits,
		fl ? "floats" : "codes");
	if (t->layout.group_size)
		fprintf(out, ", group %u", t->layout.group_size);
	if (t->layout.kind != QTK_LAYOUT_PLAIN)
		fprintf(out, ", %s%s", t->layout.sym ? "symmetric" : "asymmetric", t->layout.act_order ? ", act-order" : "");
	fprintf(out, "\n  size       %llu params, %s (%llu bytes), %.4f bits per weight, %.2f%% of the file\n",
		(unsigned long long)t->n_params, by, (unsigned long long)t->n_bytes, tx_bpw(t->n_bytes, t->n_params),
		tt.n_bytes ? 100.0 * (double)t->n_bytes / (double)tt.n_bytes : 0.0);
	for (int p = 0; p < t->nparts; p++) {
		const qtk_part *pt = &t->parts[p];
		const qtk_type_info *pti = qtk_type(pt->type);
		char psh[128] = "[";
		size_t at = 1;
		for (int d = 0; d < pt->ndim && at < sizeof psh; d++)
			at += (size_t)snprintf(psh + at, sizeof psh - at, "%s%llu", d ? ", " : "", (unsigned long long)pt->shape[d]);
		if (at < sizeof psh)
			snprintf(psh + at, sizeof psh - at, "]");
		fprintf(out, "  part       %-8s %-6s %-16s %llu bytes at 0x%llx\n", pt->role[0] ? pt->role : "data",
			pti ? pti->upper : "?", psh, (unsigned long long)pt->nbytes, (unsigned long long)pt->offset);
	}
}

void print_stats_text(FILE *out, const qtk_tensor *t, const qtk_tstats *s)
{
	char a[32], b[32];
	fprintf(out, "\nvalues (%llu", (unsigned long long)s->n);
	if (s->n_nonfinite)
		fprintf(out, ", and %llu NaN/Inf left out", (unsigned long long)s->n_nonfinite);
	fprintf(out, ")\n  min %.6g   max %.6g   mean %.6g   std %.6g   absmax %.6g\n", s->min, s->max, s->mean, s->std,
		s->absmax);
	if (s->std > 0)
		fprintf(out, "  kurtosis %.4g (a normal distribution: 3)\n", s->kurtosis);
	tx_pct(a, sizeof a, s->out3, s->n);
	tx_pct(b, sizeof b, s->out6, s->n);
	fprintf(out, "  outliers   beyond 3 sigma: %llu (%s; normal: 0.27%%)   beyond 6 sigma: %llu (%s)\n",
		(unsigned long long)s->out3, a, (unsigned long long)s->out6, b);
	tx_pct(a, sizeof a, s->outlier_groups, s->n_groups);
	fprintf(out, "  outlier-dominated groups: %llu of %llu (%s): max|x| > 4 x group RMS, groups of %u along the input\n",
		(unsigned long long)s->outlier_groups, (unsigned long long)s->n_groups, a, s->group);
	fprintf(out, "\nvalue histogram (%d bins, log-scaled bars, bin start and count)\n", QTK_ST_BINS);
	tx_hist(out, &s->hist, "  ");
	if (t->ndim >= 2 && s->n_top) {
		fprintf(out, "\nsalient input channels (absmax over %llu rows; median channel absmax %.4g)\n",
			(unsigned long long)qtk_tensor_rows(t), s->channel_median);
		for (int k = 0; k < s->n_top; k++)
			fprintf(out, "  channel %6llu   absmax %-10.4g %6.1fx median\n", (unsigned long long)s->top_idx[k],
				(double)s->top_val[k],
				s->channel_median > 0 ? (double)s->top_val[k] / s->channel_median : 0.0);
	}
	if (s->has_scales) {
		fprintf(out, "\nscales (%s, %llu values, %.4g .. %.4g)\n", s->scale_what, (unsigned long long)s->scales.n,
			s->scales.lo, s->scales.hi);
		tx_hist(out, &s->scales, "  ");
	}
	if (s->has_mins) {
		fprintf(out, "\nmins (%llu values, %.4g .. %.4g)\n", (unsigned long long)s->mins.n, s->mins.lo, s->mins.hi);
		tx_hist(out, &s->mins, "  ");
	}
	if (s->zero_levels) {
		fprintf(out, "\nzero points (as the engine uses them)\n");
		tx_levels(out, s->zeros, s->zero_levels, "  ");
	}
	if (s->code_bits) {
		fprintf(out, "\ncodes: %d of %d levels used, entropy %.4f bits (of %d)\n", s->codes_used, 1 << s->code_bits,
			s->code_entropy, s->code_bits);
		tx_levels(out, s->codes, 1 << s->code_bits, "  ");
	} else {
		fprintf(out, "\ncodes: not read for this layout\n");
	}
}

/* ---- --tensor: "did you mean", JSON ------------------------------------------------------ */

/* Edit distance (insertions, deletions, substitutions) of a[0..na) and b[0..nb), stopping
 * at `cap` (returned when the distance is at least cap): only the band of cells within cap
 * of the diagonal is computed, so a file of many long names costs names x length x 2 cap.
 * Names are at most 512 bytes. */
static size_t tx_edit(const char *a, size_t na, const char *b, size_t nb, size_t cap)
{
	size_t row[513];
	if (na > 512 || nb > 512)
		return cap;
	if ((na > nb ? na - nb : nb - na) >= cap)
		return cap;
	for (size_t j = 0; j <= nb; j++)
		row[j] = j < cap ? j : cap;
	for (size_t i = 1; i <= na; i++) {
		size_t lo = i > cap ? i - cap : 1, hi = i + cap < nb ? i + cap : nb;
		size_t diag = row[lo - 1], best = cap;
		row[lo - 1] = lo == 1 && i < cap ? i : cap;
		for (size_t j = lo; j <= hi; j++) {
			size_t up = row[j];
			size_t v = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < v)
				v = up + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			row[j] = v < cap ? v : cap;
			diag = up;
			best = row[j] < best ? row[j] : best;
		}
		if (hi < nb)
			row[hi + 1] = cap;
		if (best >= cap)
			return cap;
	}
	return row[nb] < cap ? row[nb] : cap;
}

/* The error for a tensor name that is not in m, with up to three names it may have meant:
 * the same tensor under the other naming (GGUF <-> Hugging Face), else the nearest names by
 * edit distance (at most a third of the name's length, and 3 at least). */
static int tx_no_tensor(qtk_model *m, const char *name)
{
	enum { K = 3 };
	size_t best[K], nb = 0, idx[K];
	size_t nl = strlen(name), cap = nl / 3 > 3 ? (nl / 3 < 16 ? nl / 3 + 1 : 17) : 4;
	char cin[QTK_CAP_NAME + 64], ct[QTK_CAP_NAME + 64];
	int qk;
	bool in_mapped = nl < 512 && qtk_canon_name(m, name, cin, sizeof cin, &qk) == 1;
	for (size_t i = 0; i < m->ntensors; i++) {
		const char *tn = m->tensors[i].name;
		size_t d;
		bool t_mapped = qtk_canon_name(m, tn, ct, sizeof ct, &qk) == 1;
		if ((t_mapped && !strcmp(ct, name)) || (in_mapped && !strcmp(cin, tn)))
			d = 0; /* the same tensor, named the other way */
		else
			d = tx_edit(name, nl, tn, strlen(tn), cap);
		if (d >= cap)
			continue;
		size_t k = nb < K ? nb++ : K;
		if (k == K) {
			if (d >= best[K - 1])
				continue;
			k = K - 1;
		}
		while (k > 0 && best[k - 1] > d) {
			best[k] = best[k - 1];
			idx[k] = idx[k - 1];
			k--;
		}
		best[k] = d;
		idx[k] = i;
	}
	char subj[300], msg[480], sb[512];
	snprintf(subj, sizeof subj, "tensor '%.280s'", insp_safe(name, sb, sizeof sb));
	size_t at = (size_t)snprintf(msg, sizeof msg, "no such tensor");
	for (size_t k = 0; k < nb && at < sizeof msg; k++)
		at += (size_t)snprintf(msg + at, sizeof msg - at, "%s'%.120s'%s", k == 0 ? "; did you mean " : k + 1 == nb ? " or " : ", ",
				       insp_safe(m->tensors[idx[k]].name, sb, sizeof sb), k + 1 == nb ? "?" : "");
	return qtk_err_set(&m->err, QTK_E_USAGE, m->path, -1, subj, "%s", msg);
}

static cJSON *tx_num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

static cJSON *tx_hist_json(const qtk_hist *h)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "n", (double)h->n);
	cJSON_AddItemToObject(o, "lo", tx_num(h->lo));
	cJSON_AddItemToObject(o, "hi", tx_num(h->hi));
	cJSON *c = cJSON_AddArrayToObject(o, "counts");
	for (int k = 0; k < QTK_ST_BINS; k++)
		cJSON_AddItemToArray(c, cJSON_CreateNumber((double)h->counts[k]));
	return o;
}

static cJSON *tx_counts(const uint64_t *c, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)c[i]));
	return a;
}

/* --tensor NAME --json: the tensor as --json lists it, its parts, and its statistics with
 * what the text shows beyond --json --stats. */
static int tx_tensor_json(qtk_model *m, const qtk_tensor *t, FILE *out)
{
	totals tt;
	compute_totals(m, &tt);
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "schema_version", 1);
	cJSON_AddItemToObject(r, "file", json_str_n(m->path, strlen(m->path)));
	cJSON *j = json_tensor(t);
	cJSON_AddItemToObject(r, "tensor", j);
	cJSON_AddNumberToObject(j, "share_of_file", tt.n_bytes ? (double)t->n_bytes / (double)tt.n_bytes : 0.0);
	if (!cJSON_GetObjectItemCaseSensitive(j, "parts")) {
		cJSON *parts = cJSON_AddArrayToObject(j, "parts");
		for (int p = 0; p < t->nparts; p++) {
			const qtk_part *q = &t->parts[p];
			const qtk_type_info *ti = qtk_type(q->type);
			cJSON *o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "role", q->role[0] ? q->role : "data");
			cJSON_AddStringToObject(o, "type", ti ? ti->name : "unknown");
			cJSON *sh = cJSON_AddArrayToObject(o, "shape");
			for (int d = 0; d < q->ndim; d++)
				cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)q->shape[d]));
			cJSON_AddNumberToObject(o, "n_bytes", (double)q->nbytes);
			cJSON_AddItemToArray(parts, o);
		}
	}
	if (!qtk_can_decode(t)) {
		cJSON_AddNullToObject(j, "stats");
		return json_emit(m, r, out);
	}
	qtk_tstats s;
	int rc = qtk_stats_compute(m, t, &s, NULL, NULL);
	if (rc) {
		cJSON_Delete(r);
		return rc;
	}
	cJSON *st = qtk_stats_json(&s);
	cJSON_AddItemToObject(j, "stats", st);
	cJSON_AddNumberToObject(st, "n", (double)s.n);
	cJSON_AddNumberToObject(st, "n_nonfinite", (double)s.n_nonfinite);
	cJSON_AddNumberToObject(st, "group", s.group);
	cJSON_AddNumberToObject(st, "n_groups", (double)s.n_groups);
	if (t->ndim >= 2 && s.n_top) {
		cJSON_AddItemToObject(st, "channel_median_absmax", tx_num(s.channel_median));
		cJSON *sal = cJSON_AddArrayToObject(st, "salient_channels");
		for (int k = 0; k < s.n_top; k++) {
			cJSON *e = cJSON_CreateObject();
			cJSON_AddNumberToObject(e, "channel", (double)s.top_idx[k]);
			cJSON_AddItemToObject(e, "absmax", tx_num((double)s.top_val[k]));
			cJSON_AddItemToArray(sal, e);
		}
	} else {
		cJSON_AddNullToObject(st, "channel_median_absmax");
		cJSON_AddNullToObject(st, "salient_channels");
	}
	if (s.has_scales) {
		cJSON *h = tx_hist_json(&s.scales);
		cJSON_AddStringToObject(h, "what", s.scale_what ? s.scale_what : "scale");
		cJSON_AddItemToObject(st, "scales", h);
	} else {
		cJSON_AddNullToObject(st, "scales");
	}
	if (s.has_mins)
		cJSON_AddItemToObject(st, "mins", tx_hist_json(&s.mins));
	else
		cJSON_AddNullToObject(st, "mins");
	if (s.zero_levels)
		cJSON_AddItemToObject(st, "zero_points", tx_counts(s.zeros, s.zero_levels));
	else
		cJSON_AddNullToObject(st, "zero_points");
	if (s.code_bits) {
		cJSON *c = cJSON_AddObjectToObject(st, "codes");
		cJSON_AddNumberToObject(c, "bits", s.code_bits);
		cJSON_AddNumberToObject(c, "used", s.codes_used);
		cJSON_AddItemToObject(c, "counts", tx_counts(s.codes, 1 << s.code_bits));
	} else {
		cJSON_AddNullToObject(st, "codes");
	}
	return json_emit(m, r, out);
}

int report_tensor(qtk_model *m, const char *name, FILE *out, const insp_opts *o)
{
	const qtk_tensor *t = qtk_tensor_find(m, name);
	if (!t)
		return tx_no_tensor(m, name);
	if (o->json)
		return tx_tensor_json(m, t, out);
	tx_header(out, m, t);
	if (!qtk_can_decode(t)) {
		fprintf(out, "\nvalues: no decoder for this layout\n");
		return 0;
	}
	qtk_tstats s;
	int rc = qtk_stats_compute(m, t, &s, NULL, NULL);
	if (rc)
		return rc;
	print_stats_text(out, t, &s);
	return 0;
}

/* ---- --memory ------------------------------------------------------------ */

/* The contexts of the sweep: powers of two 2k..32k, the model's maximum and the
 * contexts asked for, ascending and unique. Returns the count. */
size_t memory_contexts_list(const hparams *hp, const uint64_t *more, size_t nmore, uint64_t *ctx, size_t cap)
{
	uint64_t c[6 + INSP_MAX_CTX + 1] = {2048, 4096, 8192, 16384, 32768, hp->ctx_max};
	size_t nc = 6;
	for (size_t i = 0; i < nmore && nc < sizeof c / sizeof *c; i++)
		c[nc++] = more[i];
	size_t n = 0;
	for (size_t i = 0; i < nc; i++) {
		if (!c[i])
			continue;
		size_t k = 0;
		while (k < n && ctx[k] < c[i])
			k++;
		if (k < n && ctx[k] == c[i])
			continue;
		if (n == cap)
			break;
		memmove(ctx + k + 1, ctx + k, (n - k) * sizeof *ctx);
		ctx[k] = c[i];
		n++;
	}
	return n;
}

size_t memory_contexts(const hparams *hp, uint64_t extra, uint64_t *ctx, size_t cap)
{
	return memory_contexts_list(hp, &extra, 1, ctx, cap);
}

bool parse_ctx(const char *s, uint64_t *v)
{
	char num[24];
	size_t n = strlen(s);
	uint64_t mul = 1;
	if (n && (s[n - 1] == 'k' || s[n - 1] == 'K')) {
		mul = 1024;
		n--;
	}
	if (n == 0 || n >= sizeof num)
		return false;
	memcpy(num, s, n);
	num[n] = 0;
	uint64_t x;
	if (!qtk_parse_u64(num, &x) || x == 0 || x > (1ull << 32) / mul)
		return false;
	*v = x * mul;
	return true;
}

/* Range checked before the conversion: a value past 2^64 (or not a number) cannot be one. */
static void tx_fmt_size(double b, char *buf, size_t n)
{
	if (!(b >= 0) || b + 0.5 >= 18446744073709551616.0)
		snprintf(buf, n, "out of range");
	else
		fmt_bytes((uint64_t)(b + 0.5), buf, n);
}

static const char *const tx_kv_names[] = {"f16", "q8_0", "q4_0"};

/* Everything --memory works out once: the KV types, the compute dimensions and the split of
 * the weights and the KV cache between RAM and VRAM (--gpu-layers). */
typedef struct tx_mem {
	const char *kt, *vt;  /* K and V cache types */
	double ek, ev;        /* their bytes per element */
	bool fa;              /* flash attention assumed */
	compute_in cd;
	/* --gpu-layers */
	bool split;
	uint64_t n_off;       /* repeating layers offloaded: the last n_off */
	bool out_off;         /* the output layer too (N > n_layer) */
	double w_ram, w_vram, w_dup; /* weights; w_dup: token embeddings copied as the output */
	bool kv_split_known;
	uint64_t heads[QTK_HP_MAX_LAYERS];
} tx_mem;

static void tx_mem_init(tx_mem *x, qtk_model *m, const hparams *hp, bool have, const insp_opts *o)
{
	memset(x, 0, sizeof *x);
	const char *kvt = o->kv_type ? o->kv_type : "f16";
	x->kt = o->kv_type_k ? o->kv_type_k : kvt;
	x->vt = o->kv_type_v ? o->kv_type_v : kvt;
	x->ek = kv_type_bytes(x->kt);
	x->ev = kv_type_bytes(x->vt);
	/* llama.cpp needs flash attention for a quantized V cache */
	x->fa = o->flash_attn || kv_type_quantized(x->vt);
	if (have)
		compute_dims(m, hp, &x->cd);
	if (!o->gpu_split)
		return;
	x->split = true;
	uint64_t L = have ? hp->n_layer : 0;
	x->n_off = o->gpu_layers < L ? o->gpu_layers : L;
	x->out_off = have && o->gpu_layers > L;
	uint64_t start = L - x->n_off;
	bool has_out = false;
	double embd = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		int blk;
		int pl = tensor_place(t->name, &blk);
		bool gpu = have && ((pl == 'b' && (uint64_t)blk >= start) || (pl == 'o' && x->out_off));
		if (gpu)
			x->w_vram += (double)t->n_bytes;
		else
			x->w_ram += (double)t->n_bytes;
		if (!strcmp(t->name, "output.weight") || !strcmp(t->name, "lm_head.weight"))
			has_out = true;
		if (!strcmp(t->name, "token_embd.weight") || !strcmp(t->name, "model.embed_tokens.weight"))
			embd = (double)t->n_bytes;
	}
	/* tied embeddings: llama.cpp loads the token embeddings a second time as the output */
	if (x->out_off && !has_out)
		x->w_dup = embd;
	x->kv_split_known = have && !hp->kv_unknown[0] && kv_layer_heads(m, hp, x->heads) == 0;
}

/* KV bytes on the GPU at context ctx (the offloaded layers'). */
static double tx_kv_vram(const tx_mem *x, const hparams *hp, uint64_t ctx)
{
	double v = 0;
	for (uint64_t l = hp->n_layer - x->n_off; l < hp->n_layer; l++)
		v += kv_layer_bytes(hp, l, x->heads[l], ctx, x->ek, x->ev);
	return v;
}

/* One row of the sweep. */
typedef struct tx_row {
	double kv, compute, total, ram, vram; /* ram, vram < 0: unknown */
} tx_row;

static tx_row tx_row_at(const tx_mem *x, const hparams *hp, const totals *tt, uint64_t ctx)
{
	tx_row r;
	r.kv = kv_cache_bytes_kv(hp, ctx, x->ek, x->ev);
	r.compute = compute_buffer_bytes(&x->cd, ctx, x->fa);
	r.total = (double)tt->n_bytes + x->w_dup + r.kv + r.compute;
	r.ram = r.vram = -1;
	if (x->split && x->kv_split_known) {
		double kg = tx_kv_vram(x, hp, ctx);
		bool gpu_any = x->n_off || x->out_off, cpu_any = x->n_off < hp->n_layer || !x->out_off;
		r.vram = x->w_vram + x->w_dup + kg + (gpu_any ? r.compute : 0);
		r.ram = x->w_ram + (r.kv - kg) + (cpu_any ? r.compute : 0);
	}
	return r;
}

/* The sliding layers as a JSON array of layer numbers (only for n_layer <= the per-layer cap). */
static void tx_json_swa(cJSON *a, const hparams *hp)
{
	if (!hp->swa_window && !hp->swa_note) {
		cJSON_AddNullToObject(a, "sliding_window");
		return;
	}
	cJSON *sw = cJSON_AddObjectToObject(a, "sliding_window");
	cJSON_AddNumberToObject(sw, "window", (double)hp->swa_window);
	cJSON_AddNumberToObject(sw, "n_layer_sliding", (double)hp->n_layer_swa);
	if (hp->n_layer <= QTK_HP_MAX_LAYERS) {
		cJSON *ls = cJSON_AddArrayToObject(sw, "layers");
		for (uint64_t l = 0; l < hp->n_layer && !hp->kv_unknown[0]; l++)
			if (qtk_family_layer_swa(hp, l))
				cJSON_AddItemToArray(ls, cJSON_CreateNumber((double)l));
	} else {
		cJSON_AddNullToObject(sw, "layers");
	}
	if (hp->swa_note)
		cJSON_AddStringToObject(sw, "note", hp->swa_note);
	else
		cJSON_AddNullToObject(sw, "note");
}

static void tx_json_experts(cJSON *r, const hparams *hp, bool have, const qtk_active *act)
{
	if (!act->n_expert_tensors && !(have && hp->n_expert)) {
		cJSON_AddNullToObject(r, "experts");
		return;
	}
	cJSON *e = cJSON_AddObjectToObject(r, "experts");
	cJSON_AddNumberToObject(e, "n_expert", have ? (double)hp->n_expert : 0);
	cJSON_AddNumberToObject(e, "n_expert_used", have ? (double)hp->n_expert_used : 0);
	cJSON_AddNumberToObject(e, "expert_feed_forward_length", have ? (double)hp->n_ff_expert : 0);
	cJSON_AddNumberToObject(e, "shared_expert_feed_forward_length", have ? (double)hp->n_ff_shared_expert : 0);
	cJSON_AddNumberToObject(e, "n_tensors", (double)act->n_expert_tensors);
	if (act->unknown[0])
		cJSON_AddStringToObject(e, "unknown", act->unknown);
	else
		cJSON_AddNullToObject(e, "unknown");
}

static void tx_json_gpu(cJSON *r, const tx_mem *x, const insp_opts *o)
{
	if (!x->split) {
		cJSON_AddNullToObject(r, "gpu");
		return;
	}
	cJSON *g = cJSON_AddObjectToObject(r, "gpu");
	cJSON_AddNumberToObject(g, "gpu_layers", (double)o->gpu_layers);
	cJSON_AddNumberToObject(g, "layers_offloaded", (double)x->n_off);
	cJSON_AddBoolToObject(g, "output_offloaded", x->out_off);
	cJSON_AddNumberToObject(g, "weights_ram_bytes", x->w_ram);
	cJSON_AddNumberToObject(g, "weights_vram_bytes", x->w_vram + x->w_dup);
	cJSON_AddNumberToObject(g, "output_copy_bytes", x->w_dup);
	cJSON_AddBoolToObject(g, "kv_split_known", x->kv_split_known);
}

static int tx_memory_json(qtk_model *m, FILE *out, const totals *tt, const hparams *hp, bool have,
			  const qtk_active *act, const tx_mem *x, const insp_opts *o, const uint64_t *ctx, size_t nc)
{
	double eb = x->ek;
	char kvt[40];
	snprintf(kvt, sizeof kvt, "%s%s%s", x->kt, strcmp(x->kt, x->vt) ? "/" : "", strcmp(x->kt, x->vt) ? x->vt : "");
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "schema_version", 1);
	cJSON_AddItemToObject(r, "file", json_str_n(m->path, strlen(m->path)));
	cJSON_AddNumberToObject(r, "weights_bytes", (double)tt->n_bytes);
	cJSON_AddStringToObject(r, "kv_type", kvt);
	cJSON_AddStringToObject(r, "kv_type_k", x->kt);
	cJSON_AddStringToObject(r, "kv_type_v", x->vt);
	cJSON_AddNumberToObject(r, "params_total", (double)tt->n_params);
	if (act->unknown[0]) {
		cJSON_AddNullToObject(r, "params_active");
		cJSON_AddNullToObject(r, "weights_bytes_active");
	} else {
		cJSON_AddNumberToObject(r, "params_active", (double)act->params_active);
		cJSON_AddNumberToObject(r, "weights_bytes_active", (double)act->bytes_active);
	}
	tx_json_experts(r, hp, have, act);
	if (have) {
		cJSON *a = cJSON_AddObjectToObject(r, "architecture");
		cJSON_AddStringToObject(a, "name", hp->arch);
		cJSON_AddStringToObject(a, "source", hp->source);
		cJSON_AddNumberToObject(a, "n_layer", (double)hp->n_layer);
		cJSON_AddNumberToObject(a, "n_head", (double)hp->n_head);
		cJSON_AddNumberToObject(a, "n_head_kv", (double)hp->n_head_kv);
		cJSON_AddNumberToObject(a, "head_dim", (double)hp->head_dim);
		cJSON_AddNumberToObject(a, "context_length", (double)hp->ctx_max);
		cJSON_AddNumberToObject(a, "head_dim_v", (double)hp->head_dim_v);
		cJSON_AddBoolToObject(a, "kv_per_layer", hp->kv_per_layer);
		cJSON_AddNumberToObject(a, "n_head_kv_min", (double)hp->n_head_kv_min);
		cJSON_AddNumberToObject(a, "kv_heads_total", (double)(hp->kv_heads_full + hp->kv_heads_swa));
		tx_json_swa(a, hp);
		cJSON *c = cJSON_AddObjectToObject(r, "compute");
		cJSON_AddNumberToObject(c, "ubatch", COMPUTE_UBATCH);
		cJSON_AddBoolToObject(c, "flash_attn", x->fa);
		cJSON_AddNumberToObject(c, "n_embd", (double)x->cd.n_embd);
		cJSON_AddNumberToObject(c, "n_head", (double)x->cd.n_head);
		cJSON_AddNumberToObject(c, "head_dim", (double)x->cd.head_dim);
		cJSON_AddNumberToObject(c, "n_ff", (double)x->cd.n_ff);
		cJSON_AddNumberToObject(c, "n_vocab", (double)x->cd.n_vocab);
		tx_json_gpu(r, x, o);
		if (hp->kv_unknown[0]) {
			cJSON_AddStringToObject(r, "kv_unknown", hp->kv_unknown);
		} else {
			cJSON_AddNumberToObject(r, "kv_bytes_per_token", kv_cache_bytes_kv(hp, 1, x->ek, x->ev));
			if (hp->n_layer_swa)
				cJSON_AddNumberToObject(r, "kv_bytes_per_token_beyond_window",
							(double)hp->kv_heads_full *
								((double)hp->head_dim * x->ek + (double)hp->head_dim_v * x->ev));
			cJSON *arr = cJSON_AddArrayToObject(r, "contexts");
			for (size_t i = 0; i < nc; i++) {
				cJSON *e = cJSON_CreateObject();
				tx_row row = tx_row_at(x, hp, tt, ctx[i]);
				cJSON_AddNumberToObject(e, "ctx", (double)ctx[i]);
				cJSON_AddNumberToObject(e, "kv_bytes", row.kv);
				cJSON_AddNumberToObject(e, "total_bytes", row.kv + (double)tt->n_bytes);
				cJSON_AddNumberToObject(e, "compute_bytes", row.compute);
				cJSON_AddNumberToObject(e, "estimate_bytes", row.total);
				if (x->split && row.ram >= 0) {
					cJSON_AddNumberToObject(e, "ram_bytes", row.ram);
					cJSON_AddNumberToObject(e, "vram_bytes", row.vram);
				} else if (x->split) {
					cJSON_AddNullToObject(e, "ram_bytes");
					cJSON_AddNullToObject(e, "vram_bytes");
				}
				cJSON_AddItemToArray(arr, e);
			}
		}
	} else {
		cJSON_AddNullToObject(r, "architecture");
		cJSON_AddNullToObject(r, "compute");
		tx_json_gpu(r, x, o);
	}
	(void)eb;
	return json_emit(m, r, out);
}

/* Weights read per token and the experts, for a mixture of experts. */
static void tx_memory_experts(FILE *out, const totals *tt, const hparams *hp, bool have, const qtk_active *act)
{
	char sb[512], ab[32];
	if (act->n_expert_tensors) {
		if (act->unknown[0]) {
			fprintf(out, "            per token: unknown (%s)\n", insp_safe(act->unknown, sb, sizeof sb));
		} else {
			fmt_bytes(act->bytes_active, ab, sizeof ab);
			fprintf(out, "            read per token %s (%llu bytes): %llu of %llu parameters active\n", ab,
				(unsigned long long)act->bytes_active, (unsigned long long)act->params_active,
				(unsigned long long)tt->n_params);
		}
	}
	if (!have || (!hp->n_expert && !act->n_expert_tensors))
		return;
	fprintf(out, "experts     %llu, %llu used per token", (unsigned long long)hp->n_expert,
		(unsigned long long)hp->n_expert_used);
	if (hp->n_ff_expert)
		fprintf(out, ", expert FFN %llu", (unsigned long long)hp->n_ff_expert);
	if (hp->n_ff_shared_expert)
		fprintf(out, ", shared expert FFN %llu", (unsigned long long)hp->n_ff_shared_expert);
	fprintf(out, "\n            %llu expert tensors count %llu/%llu of their size, every other tensor fully\n",
		(unsigned long long)act->n_expert_tensors, (unsigned long long)hp->n_expert_used,
		(unsigned long long)hp->n_expert);
}

/* A declared window no layer uses, and why. */
static void tx_swa_unused(FILE *out, const hparams *hp)
{
	char sb[512];
	const char *note = hp->swa_note ? hp->swa_note : "";
	if (!hp->swa_window && !hp->swa_note)
		return;
	if (!strncmp(note, "not applied", 11))
		fprintf(out, "            sliding window %llu %s\n", (unsigned long long)hp->swa_window,
			insp_safe(note, sb, sizeof sb));
	else
		fprintf(out, "            sliding window %llu on no layer (%s)\n", (unsigned long long)hp->swa_window,
			insp_safe(note, sb, sizeof sb));
}

/* The KV cache lines: the plain product for a uniform model, else what each layer holds. */
static void tx_memory_kv(FILE *out, const hparams *hp, const tx_mem *x)
{
	char kb[32], kb2[32], sb[512], kvt[40];
	double eb = x->ek;
	snprintf(kvt, sizeof kvt, "%s%s%s", x->kt, strcmp(x->kt, x->vt) ? " K, " : "", strcmp(x->kt, x->vt) ? x->vt : "");
	if (strcmp(x->kt, x->vt))
		snprintf(kvt, sizeof kvt, "K %s, V %.8s: %.4g B", x->kt, x->vt, x->ev);
	tx_fmt_size(kv_cache_bytes_kv(hp, 1, x->ek, x->ev), kb, sizeof kb);
	if (kv_uniform(hp) && !strcmp(x->kt, x->vt)) {
		fprintf(out, "\nKV cache    2 x %llu layers x %llu KV heads x %llu x context x %.4g B (%s)\n",
			(unsigned long long)hp->n_layer, (unsigned long long)hp->n_head_kv, (unsigned long long)hp->head_dim,
			eb, kvt);
		tx_swa_unused(out, hp);
		fprintf(out, "            = %s per token\n\n", kb);
		return;
	}
	fprintf(out, "\nKV cache    per layer and token: KV heads x (K %llu + V %llu) x %.4g B (%s)\n",
		(unsigned long long)hp->head_dim, (unsigned long long)hp->head_dim_v, eb, kvt);
	if (hp->kv_per_layer)
		fprintf(out, "            KV heads per layer %llu to %llu (listed per layer), %llu over all layers\n",
			(unsigned long long)hp->n_head_kv_min, (unsigned long long)hp->n_head_kv,
			(unsigned long long)(hp->kv_heads_full + hp->kv_heads_swa));
	else
		fprintf(out, "            %llu KV heads on each of %llu layers\n", (unsigned long long)hp->n_head_kv,
			(unsigned long long)hp->n_layer);
	if (hp->n_layer_swa) {
		fprintf(out, "            sliding window %llu on %llu of %llu layers (%s):\n", (unsigned long long)hp->swa_window,
			(unsigned long long)hp->n_layer_swa, (unsigned long long)hp->n_layer,
			hp->swa_note ? insp_safe(hp->swa_note, sb, sizeof sb) : "");
		fprintf(out, "            they hold min(context, %llu) tokens, as llama.cpp's SWA cache does\n",
			(unsigned long long)hp->swa_window);
		tx_fmt_size((double)hp->kv_heads_full * ((double)hp->head_dim * x->ek + (double)hp->head_dim_v * x->ev), kb2,
			    sizeof kb2);
		fprintf(out, "            = %s per token up to %llu tokens, %s per token beyond\n\n", kb,
			(unsigned long long)hp->swa_window, kb2);
		return;
	}
	tx_swa_unused(out, hp);
	fprintf(out, "            = %s per token\n\n", kb);
}

/* How the compute buffer and the offload were worked out. */
static void tx_memory_notes(FILE *out, const hparams *hp, const tx_mem *x)
{
	const compute_in *c = &x->cd;
	fprintf(out, "compute     estimated for a micro-batch of %d tokens: inputs + the largest of\n", COMPUTE_UBATCH);
	if (x->fa)
		fprintf(out, "            attention (flash%s), FFN %llu wide, logits %llu x %d x 4 B\n",
			kv_type_quantized(x->vt) ? ": a quantized V cache needs it" : "", (unsigned long long)c->n_ff,
			(unsigned long long)c->n_vocab, COMPUTE_UBATCH);
	else
		fprintf(out, "            attention (KQ scores context x %d x %llu heads x 4 B), FFN %llu wide,\n"
			     "            logits %llu x %d x 4 B\n",
			COMPUTE_UBATCH, (unsigned long long)c->n_head, (unsigned long long)c->n_ff,
			(unsigned long long)c->n_vocab, COMPUTE_UBATCH);
	if (!x->split)
		return;
	char wr[32], wv[32], wd[32];
	fmt_bytes((uint64_t)x->w_ram, wr, sizeof wr);
	fmt_bytes((uint64_t)(x->w_vram + x->w_dup), wv, sizeof wv);
	fprintf(out, "GPU layers  %llu of %llu repeating layers offloaded", (unsigned long long)x->n_off,
		(unsigned long long)hp->n_layer);
	if (x->n_off == 1)
		fprintf(out, " (layer %llu, weights and KV cache)", (unsigned long long)(hp->n_layer - 1));
	else if (x->n_off)
		fprintf(out, " (layers %llu-%llu, weights and KV cache)", (unsigned long long)(hp->n_layer - x->n_off),
			(unsigned long long)(hp->n_layer - 1));
	fprintf(out, ",\n            output layer %s; token embeddings stay in RAM\n",
		x->out_off ? "offloaded (--gpu-layers above the layer count)" : "in RAM");
	fprintf(out, "            weights: RAM %s, VRAM %s", wr, wv);
	if (x->w_dup) {
		fmt_bytes((uint64_t)x->w_dup, wd, sizeof wd);
		fprintf(out, " (with a %s copy of the tied token embeddings as the output)", wd);
	}
	fputc('\n', out);
	if (!x->kv_split_known)
		fprintf(out, "            the per-layer KV split is unknown (the per-layer head counts cannot be read)\n");
}

int report_memory(qtk_model *m, FILE *out, const insp_opts *o)
{
	totals tt;
	compute_totals(m, &tt);
	hparams hp;
	bool have = hparams_load(m, &hp) == 0;
	qtk_active act;
	qtk_family_active(m, have ? &hp : NULL, &act);
	tx_mem *x = qtk_malloc(sizeof *x);
	if (!x)
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	tx_mem_init(x, m, &hp, have, o);
	uint64_t ctx[32], more[INSP_MAX_CTX + 1];
	size_t nmore = 0;
	if (o->ctx)
		more[nmore++] = o->ctx;
	for (size_t i = 0; i < o->nctx && nmore < INSP_MAX_CTX + 1; i++)
		more[nmore++] = o->ctxs[i];
	size_t nc = have ? memory_contexts_list(&hp, more, nmore, ctx, 32) : 0;
	int rc = 0;
	if (o->json) {
		rc = tx_memory_json(m, out, &tt, &hp, have, &act, x, o, ctx, nc);
		qtk_free(x);
		return rc;
	}
	char w[32];
	fmt_bytes(tt.n_bytes, w, sizeof w);
	char sb[2048];
	fprintf(out, "%s: memory estimate\n\n", insp_safe(m->path, sb, sizeof sb));
	fprintf(out, "weights     %s (%llu bytes as stored, %.4f bits/weight)\n", w, (unsigned long long)tt.n_bytes,
		tx_bpw(tt.n_bytes, tt.n_params));
	tx_memory_experts(out, &tt, &hp, have, &act);
	if (!have) {
		fprintf(out, "KV cache    unknown: the file has no architecture keys or config.json\n");
		qtk_free(x);
		return 0;
	}
	fprintf(out, "model       %s (%s): %llu layers, %llu heads, %llu KV heads\n",
		hp.arch[0] ? insp_safe(hp.arch, sb, sizeof sb) : "?",
		hp.source, (unsigned long long)hp.n_layer, (unsigned long long)hp.n_head, (unsigned long long)hp.n_head_kv);
	fprintf(out, "            head_dim %llu%s", (unsigned long long)hp.head_dim,
		hp.head_dim_explicit ? "" : " (embedding / heads)");
	if (hp.ctx_max)
		fprintf(out, ", trained context %llu", (unsigned long long)hp.ctx_max);
	if (hp.kv_unknown[0]) {
		fprintf(out, "\nKV cache    unknown: %s\n", insp_safe(hp.kv_unknown, sb, sizeof sb));
		qtk_free(x);
		return 0;
	}
	tx_memory_kv(out, &hp, x);
	tx_memory_notes(out, &hp, x);
	/* the chosen type as a column of its own unless it is one of the three compared */
	bool own = strcmp(x->kt, x->vt) != 0;
	bool listed = false;
	for (int k = 0; k < 3; k++)
		listed |= !strcmp(x->kt, tx_kv_names[k]);
	own |= !listed;
	char own_h[40];
	if (strcmp(x->kt, x->vt))
		snprintf(own_h, sizeof own_h, "KV %s/%s", x->kt, x->vt);
	else
		snprintf(own_h, sizeof own_h, "KV %s", x->kt);
	fprintf(out, "\n%9s  %11s  %11s  %11s", "context", "KV f16", "KV q8_0", "KV q4_0");
	if (own)
		fprintf(out, "  %13s", own_h);
	fprintf(out, "  %11s  %13s", "compute", "total");
	if (x->split)
		fprintf(out, "  %11s  %11s", "RAM", "VRAM");
	fputc('\n', out);
	bool beyond = false;
	for (size_t i = 0; i < nc; i++) {
		char cells[3][32], cell[32], tot[32], cp[32], ram[32], vram[32];
		for (int k = 0; k < 3; k++)
			tx_fmt_size(kv_cache_bytes(&hp, ctx[i], kv_type_bytes(tx_kv_names[k])), cells[k], sizeof cells[k]);
		tx_row r = tx_row_at(x, &hp, &tt, ctx[i]);
		tx_fmt_size(r.kv, cell, sizeof cell);
		tx_fmt_size(r.compute, cp, sizeof cp);
		tx_fmt_size(r.total, tot, sizeof tot);
		bool b = hp.ctx_max && ctx[i] > hp.ctx_max;
		beyond |= b;
		bool asked = ctx[i] == o->ctx;
		for (size_t k = 0; k < o->nctx; k++)
			asked |= ctx[i] == o->ctxs[k];
		fprintf(out, "%8llu%c  %11s  %11s  %11s", (unsigned long long)ctx[i], b ? '*' : ' ', cells[0], cells[1], cells[2]);
		if (own)
			fprintf(out, "  %13s", cell);
		fprintf(out, "  %11s  %13s", cp, tot);
		if (x->split) {
			if (r.ram >= 0) {
				tx_fmt_size(r.ram, ram, sizeof ram);
				tx_fmt_size(r.vram, vram, sizeof vram);
			} else {
				snprintf(ram, sizeof ram, "?");
				snprintf(vram, sizeof vram, "?");
			}
			fprintf(out, "  %11s  %11s", ram, vram);
		}
		fprintf(out, "%s\n", asked ? "  <- --ctx" : ctx[i] == hp.ctx_max ? "  <- trained" : "");
	}
	fprintf(out, "\ntotal = weights + KV cache (%s) + compute buffer, an estimate:\n"
		     "runtime overhead, the output buffer and padding are not included.\n",
		own ? own_h + 3 : x->kt);
	if (x->split)
		fprintf(out, "RAM, VRAM: what llama.cpp puts where with --gpu-layers %llu; a partial offload keeps\n"
			     "a compute buffer on each side.\n",
			(unsigned long long)o->gpu_layers);
	if (beyond)
		fprintf(out, "* beyond the model's trained context\n");
	qtk_free(x);
	return rc;
}
