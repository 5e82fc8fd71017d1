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

int report_tensor(qtk_model *m, const char *name, FILE *out, const insp_opts *o)
{
	(void)o;
	const qtk_tensor *t = qtk_tensor_find(m, name);
	if (!t)
	{
		char subj[300];
		snprintf(subj, sizeof subj, "tensor '%.280s'", name);
		return qtk_err_set(&m->err, QTK_E_USAGE, m->path, -1, subj, "no such tensor");
	}
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

/* The contexts of the sweep: powers of two 2k..32k, the model's maximum and
 * --ctx, ascending and unique. Returns the count. */
size_t memory_contexts(const hparams *hp, uint64_t extra, uint64_t *ctx, size_t cap)
{
	uint64_t c[8] = {2048, 4096, 8192, 16384, 32768, hp->ctx_max, extra};
	size_t n = 0;
	for (size_t i = 0; i < 7; i++) {
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

/* Range checked before the conversion: a value past 2^64 (or not a number) cannot be one. */
static void tx_fmt_size(double b, char *buf, size_t n)
{
	if (!(b >= 0) || b + 0.5 >= 18446744073709551616.0)
		snprintf(buf, n, "out of range");
	else
		fmt_bytes((uint64_t)(b + 0.5), buf, n);
}

static const char *const tx_kv_names[] = {"f16", "q8_0", "q4_0"};

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

static int tx_memory_json(qtk_model *m, FILE *out, const totals *tt, const hparams *hp, bool have,
			  const qtk_active *act, const char *kvt, double eb, const uint64_t *ctx, size_t nc)
{
	cJSON *r = cJSON_CreateObject();
	cJSON_AddNumberToObject(r, "schema_version", 1);
	cJSON_AddStringToObject(r, "file", m->path);
	cJSON_AddNumberToObject(r, "weights_bytes", (double)tt->n_bytes);
	cJSON_AddStringToObject(r, "kv_type", kvt);
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
		if (hp->kv_unknown[0]) {
			cJSON_AddStringToObject(r, "kv_unknown", hp->kv_unknown);
		} else {
			cJSON_AddNumberToObject(r, "kv_bytes_per_token", kv_cache_bytes(hp, 1, eb));
			if (hp->n_layer_swa)
				cJSON_AddNumberToObject(r, "kv_bytes_per_token_beyond_window",
							(double)hp->kv_heads_full * (double)(hp->head_dim + hp->head_dim_v) * eb);
			cJSON *arr = cJSON_AddArrayToObject(r, "contexts");
			for (size_t i = 0; i < nc; i++) {
				cJSON *e = cJSON_CreateObject();
				double kv = kv_cache_bytes(hp, ctx[i], eb);
				cJSON_AddNumberToObject(e, "ctx", (double)ctx[i]);
				cJSON_AddNumberToObject(e, "kv_bytes", kv);
				cJSON_AddNumberToObject(e, "total_bytes", kv + (double)tt->n_bytes);
				cJSON_AddItemToArray(arr, e);
			}
		}
	} else {
		cJSON_AddNullToObject(r, "architecture");
	}
	char *txt = cJSON_Print(r);
	cJSON_Delete(r);
	if (!txt)
		return qtk_err_set(&m->err, QTK_E_IO, NULL, -1, NULL, "out of memory");
	fprintf(out, "%s\n", txt);
	cJSON_free(txt);
	return 0;
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
static void tx_memory_kv(FILE *out, const hparams *hp, const char *kvt, double eb)
{
	char kb[32], kb2[32], sb[512];
	tx_fmt_size(kv_cache_bytes(hp, 1, eb), kb, sizeof kb);
	if (kv_uniform(hp)) {
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
		tx_fmt_size((double)hp->kv_heads_full * (double)(hp->head_dim + hp->head_dim_v) * eb, kb2, sizeof kb2);
		fprintf(out, "            = %s per token up to %llu tokens, %s per token beyond\n\n", kb,
			(unsigned long long)hp->swa_window, kb2);
		return;
	}
	tx_swa_unused(out, hp);
	fprintf(out, "            = %s per token\n\n", kb);
}

int report_memory(qtk_model *m, FILE *out, const insp_opts *o)
{
	totals tt;
	compute_totals(m, &tt);
	hparams hp;
	bool have = hparams_load(m, &hp) == 0;
	qtk_active act;
	qtk_family_active(m, have ? &hp : NULL, &act);
	const char *kvt = o->kv_type ? o->kv_type : "f16";
	double eb = kv_type_bytes(kvt);
	uint64_t ctx[8];
	size_t nc = have ? memory_contexts(&hp, o->ctx, ctx, 8) : 0;
	if (o->json)
		return tx_memory_json(m, out, &tt, &hp, have, &act, kvt, eb, ctx, nc);
	char w[32];
	fmt_bytes(tt.n_bytes, w, sizeof w);
	char sb[2048];
	fprintf(out, "%s: memory estimate\n\n", insp_safe(m->path, sb, sizeof sb));
	fprintf(out, "weights     %s (%llu bytes as stored, %.4f bits/weight)\n", w, (unsigned long long)tt.n_bytes,
		tx_bpw(tt.n_bytes, tt.n_params));
	if (!have) {
		tx_memory_experts(out, &tt, &hp, have, &act);
		fprintf(out, "KV cache    unknown: the file has no architecture keys or config.json\n");
		return 0;
	}
	tx_memory_experts(out, &tt, &hp, have, &act);
	fprintf(out, "model       %s (%s): %llu layers, %llu heads, %llu KV heads\n",
		hp.arch[0] ? insp_safe(hp.arch, sb, sizeof sb) : "?",
		hp.source, (unsigned long long)hp.n_layer, (unsigned long long)hp.n_head, (unsigned long long)hp.n_head_kv);
	fprintf(out, "            head_dim %llu%s", (unsigned long long)hp.head_dim,
		hp.head_dim_explicit ? "" : " (embedding / heads)");
	if (hp.ctx_max)
		fprintf(out, ", trained context %llu", (unsigned long long)hp.ctx_max);
	if (hp.kv_unknown[0]) {
		fprintf(out, "\nKV cache    unknown: %s\n", insp_safe(hp.kv_unknown, sb, sizeof sb));
		return 0;
	}
	tx_memory_kv(out, &hp, kvt, eb);
	fprintf(out, "%9s  %11s  %11s  %11s  %13s\n", "context", "KV f16", "KV q8_0", "KV q4_0", "total");
	bool beyond = false;
	for (size_t i = 0; i < nc; i++) {
		char cells[3][32], tot[32];
		for (int k = 0; k < 3; k++)
			tx_fmt_size(kv_cache_bytes(&hp, ctx[i], kv_type_bytes(tx_kv_names[k])), cells[k], sizeof cells[k]);
		tx_fmt_size(kv_cache_bytes(&hp, ctx[i], eb) + (double)tt.n_bytes, tot, sizeof tot);
		bool b = hp.ctx_max && ctx[i] > hp.ctx_max;
		beyond |= b;
		fprintf(out, "%8llu%c  %11s  %11s  %11s  %13s%s\n", (unsigned long long)ctx[i], b ? '*' : ' ', cells[0],
			cells[1], cells[2], tot, ctx[i] == o->ctx ? "  <- --ctx" : ctx[i] == hp.ctx_max ? "  <- trained" : "");
	}
	fprintf(out, "\ntotal = weights + KV cache (%s); compute buffers and runtime\noverhead are not included.\n", kvt);
	if (beyond)
		fprintf(out, "* beyond the model's trained context\n");
	return 0;
}
