/* test_stats.c - qinspect's value statistics against a straightforward
 * independent computation on the decoded values; chunked row decoding against
 * whole-tensor decoding; --diff's GGUF<->HF matching and Q/K un-permutation. */
#include "t.h"
#include <cJSON.h>
#include "../inspect/inspect.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static bool close_rel(double a, double b, double tol)
{
	return fabs(a - b) <= tol * (fabs(a) + fabs(b)) + 1e-300;
}

/* Two plain passes over the whole decoded tensor, compared with qtk_stats_compute. */
static void check_tensor(qtk_model *m, const qtk_tensor *t, const char *what)
{
	float *x = malloc((size_t)t->n_params * sizeof *x);
	if (!x || qtk_decode_tensor(m, t, x)) {
		CHECK(0, "%s %s: decode failed", what, t->name);
		free(x);
		return;
	}
	uint64_t n = t->n_params;
	double sum = 0, mn = x[0], mx = x[0], amax = 0;
	for (uint64_t i = 0; i < n; i++) {
		sum += x[i];
		mn = x[i] < mn ? x[i] : mn;
		mx = x[i] > mx ? x[i] : mx;
		amax = fabs(x[i]) > amax ? fabs(x[i]) : amax;
	}
	double mean = sum / (double)n, m2 = 0, m4 = 0;
	for (uint64_t i = 0; i < n; i++) {
		double d = x[i] - mean;
		m2 += d * d;
		m4 += d * d * d * d;
	}
	double sd = sqrt(m2 / (double)n), kurt = m2 > 0 ? (m4 / (double)n) / ((m2 / (double)n) * (m2 / (double)n)) : 0;
	uint64_t o3 = 0, o6 = 0, og = 0, ng = 0;
	for (uint64_t i = 0; i < n; i++) {
		o3 += fabs(x[i] - mean) > 3 * sd;
		o6 += fabs(x[i] - mean) > 6 * sd;
	}
	qtk_tstats s;
	int rc = qtk_stats_compute(m, t, &s, NULL, NULL);
	CHECK(rc == 0, "%s %s: qtk_stats_compute %d", what, t->name, rc);
	if (rc) {
		free(x);
		return;
	}
	uint64_t cols = qtk_tensor_cols(t), rows = qtk_tensor_rows(t), g = s.group;
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t c0 = 0; c0 < cols; c0 += g) {
			double sq = 0, gm = 0;
			uint64_t len = c0 + g < cols ? g : cols - c0;
			for (uint64_t c = c0; c < c0 + len; c++) {
				double v = x[r * cols + c];
				sq += v * v;
				gm = fabs(v) > gm ? fabs(v) : gm;
			}
			ng++;
			og += gm > 0 && gm > 4.0 * sqrt(sq / (double)len);
		}
	CHECK(s.n == n, "%s %s: n %llu", what, t->name, (unsigned long long)s.n);
	CHECK(s.min == mn && s.max == mx && s.absmax == amax, "%s %s: range", what, t->name);
	CHECK(close_rel(s.mean, mean, 1e-9) || fabs(s.mean - mean) < 1e-12, "%s %s: mean %.17g vs %.17g", what, t->name,
	      s.mean, mean);
	CHECK(close_rel(s.std, sd, 1e-9), "%s %s: std %.17g vs %.17g", what, t->name, s.std, sd);
	CHECK(close_rel(s.kurtosis, kurt, 1e-7), "%s %s: kurtosis %.17g vs %.17g", what, t->name, s.kurtosis, kurt);
	CHECK(s.out3 == o3 && s.out6 == o6, "%s %s: outliers %llu/%llu vs %llu/%llu", what, t->name,
	      (unsigned long long)s.out3, (unsigned long long)s.out6, (unsigned long long)o3, (unsigned long long)o6);
	CHECK(s.outlier_groups == og && s.n_groups == ng, "%s %s: outlier groups %llu/%llu vs %llu/%llu", what, t->name,
	      (unsigned long long)s.outlier_groups, (unsigned long long)s.n_groups, (unsigned long long)og,
	      (unsigned long long)ng);
	uint64_t hs = 0;
	for (int k = 0; k < QTK_ST_BINS; k++)
		hs += s.hist.counts[k];
	CHECK(hs == n, "%s %s: histogram sums to %llu", what, t->name, (unsigned long long)hs);
	/* channel absmax: the reported top channel really is the largest */
	if (t->ndim == 2 && s.n_top) {
		double best = 0;
		for (uint64_t i = 0; i < n; i++)
			best = fabs(x[i]) > best ? fabs(x[i]) : best;
		CHECK((double)s.top_val[0] == best, "%s %s: top channel absmax", what, t->name);
		double colmax = 0;
		for (uint64_t r = 0; r < rows; r++)
			colmax = fabs(x[r * cols + s.top_idx[0]]) > colmax ? fabs(x[r * cols + s.top_idx[0]]) : colmax;
		CHECK(colmax == best, "%s %s: top channel index", what, t->name);
	}
	if (s.code_bits) {
		uint64_t cs = 0;
		for (int k = 0; k < (1 << s.code_bits); k++)
			cs += s.codes[k];
		CHECK(cs == n, "%s %s: code counts sum to %llu", what, t->name, (unsigned long long)cs);
		CHECK(s.code_entropy > 0 && s.code_entropy <= s.code_bits + 1e-12, "%s %s: entropy %g", what, t->name,
		      s.code_entropy);
	}
	/* deterministic: the same numbers again */
	qtk_tstats s2;
	qtk_stats_compute(m, t, &s2, NULL, NULL);
	CHECK(memcmp(&s, &s2, sizeof s) == 0, "%s %s: second run differs", what, t->name);
	free(x);
}

/* Chunked decoding (small forced chunks) equals whole-tensor decoding. */
static void check_chunks(qtk_model *m, const qtk_tensor *t, const char *what)
{
	float *whole = malloc((size_t)t->n_params * sizeof *whole);
	if (!whole || qtk_decode_tensor(m, t, whole)) {
		CHECK(0, "%s %s: decode", what, t->name);
		free(whole);
		return;
	}
	uint64_t saved = qtk_stats_test_chunk(4096);
	qtk_test_max_alloc(true);
	qtk_trows r;
	int rc = qtk_trows_open(&r, m, t, 1);
	bool same = rc == 0;
	for (uint64_t r0 = 0; same && r0 < r.rows; r0 += r.step) {
		uint64_t n = r.rows - r0 < r.step ? r.rows - r0 : r.step;
		const float *x;
		same = qtk_trows_read(&r, r0, n, &x) == 0 && memcmp(x, whole + r0 * r.cols, (size_t)(n * r.cols) * 4) == 0;
	}
	CHECK(same && (r.step < r.rows || r.rows <= 32), "%s %s: chunked decode (step %llu) differs", what, t->name,
	      (unsigned long long)r.step);
	/* a packed tensor is read a window of rows at a time, never a whole part (issue 17) */
	uint64_t big = 0;
	for (int p = 0; p < t->nparts; p++)
		big = t->parts[p].nbytes > big ? t->parts[p].nbytes : big;
	/* (only where a part is well above a chunk of F32, so the two cannot be mistaken) */
	if (t->layout.kind != QTK_LAYOUT_PLAIN && big > 2 * r.step * r.cstep * sizeof(float)) {
		qtk_tstats st;
		qtk_stats_compute(m, t, &st, NULL, NULL);
		size_t peak = qtk_test_max_alloc(false);
		CHECK(peak < big, "%s %s: largest allocation %zu bytes, the largest part is %llu", what, t->name, peak,
		      (unsigned long long)big);
	}
	qtk_trows_close(&r);
	qtk_stats_test_chunk(saved);
	free(whole);
}

static void check_model(const char *path, const char *what, bool all)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	CHECK(m != NULL, "open %s", path);
	if (!m)
		return;
	for (size_t i = 0; i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		if (!qtk_can_decode(t))
			continue;
		if (all || i % 3 == 0 || t->layout.kind != QTK_LAYOUT_PLAIN)
			check_tensor(m, t, what);
		if (t->ndim == 2 && (all || t->layout.kind != QTK_LAYOUT_PLAIN))
			check_chunks(m, t, what);
	}
	qtk_close(m);
}

static void check_entropy(void)
{
	uint64_t a[4] = {1, 1, 1, 1}, b[3] = {2, 1, 1}, c[3] = {5, 0, 0}, d[16];
	CHECK(fabs(qtk_stats_entropy(a, 4) - 2.0) < 1e-15, "uniform over 4: %g", qtk_stats_entropy(a, 4));
	CHECK(fabs(qtk_stats_entropy(b, 3) - 1.5) < 1e-15, "2,1,1: %g", qtk_stats_entropy(b, 3));
	CHECK(qtk_stats_entropy(c, 3) == 0, "one code: %g", qtk_stats_entropy(c, 3));
	for (int i = 0; i < 16; i++)
		d[i] = 7;
	CHECK(fabs(qtk_stats_entropy(d, 16) - 4.0) < 1e-12, "uniform over 16");
}

/* --tensor and --memory output, into a string. */
static char *text_of(const char *path, int what, const insp_opts *o)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	char *buf = NULL;
	size_t len = 0;
	if (m) {
		FILE *f = open_memstream(&buf, &len);
		if (what == 0)
			report_tensor(m, "blk.0.attn_q.weight", f, o);
		else
			report_memory(m, f, o);
		fclose(f);
	}
	qtk_close(m);
	return buf;
}

static void check_text_modes(const char *gguf, const char *hf)
{
	insp_opts o = {0};
	char *s = text_of(gguf, 0, &o);
	CHECK(s && strstr(s, "tensor blk.0.attn_q.weight") && strstr(s, "outliers   beyond 3 sigma: 575") &&
		      strstr(s, "salient input channels") && strstr(s, "value histogram (64 bins"),
	      "--tensor text: %s", s ? s : "");
	free(s);
	o.ctx = 100000;
	o.kv_type = "q8_0";
	s = text_of(gguf, 1, &o);
	/* 2 * 2 layers * 2 KV heads * 64 * ctx * 34/32 bytes */
	CHECK(s && strstr(s, "= 544 B per token") && strstr(s, "100000*") && strstr(s, "<- --ctx") &&
		      strstr(s, "<- trained"),
	      "--memory text: %s", s ? s : "");
	free(s);
	o.json = true;
	s = text_of(hf, 1, &o);
	CHECK(s && strstr(s, "\"kv_bytes_per_token\":\t544") && strstr(s, "\"source\":\t\"config.json\""),
	      "--memory --json from config.json: %s", s ? s : "");
	free(s);
	uint64_t ctx[8];
	hparams hp = {.ctx_max = 4096};
	size_t n = memory_contexts(&hp, 3000, ctx, 8);
	CHECK(n == 6 && ctx[0] == 2048 && ctx[1] == 3000 && ctx[2] == 4096 && ctx[5] == 32768, "context sweep");
}

/* --json is written tensor by tensor; the document must be the one cJSON prints whole: parsing
 * it and printing it again with cJSON gives the same bytes (with and without --stats), and
 * every tensor is there. */
static void check_json_streamed(const char *path, const char *label, const char *record)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	if (!m) {
		CHECK(0, "%s: open", label);
		return;
	}
	if (record)
		CHECK(qtk_model_set_kv_str(m, "qtk.provenance", record) == 0, "%s: record set", label);
	for (int stats = 0; stats < 2; stats++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		insp_opts o = {0};
		o.stats = stats;
		int rc = f ? report_json(m, f, &o) : -1;
		if (f)
			fclose(f);
		cJSON *d = rc == 0 && buf ? cJSON_Parse(buf) : NULL;
		char *again = d ? cJSON_Print(d) : NULL;
		const cJSON *ts = d ? cJSON_GetObjectItemCaseSensitive(d, "tensors") : NULL;
		CHECK(again && len == strlen(again) + 1 && !memcmp(buf, again, len - 1) && buf[len - 1] == '\n',
		      "%s%s: the streamed document is cJSON's print of itself", label, stats ? " --stats" : "");
		CHECK(ts && (size_t)cJSON_GetArraySize(ts) == m->ntensors, "%s: every tensor", label);
		CHECK(!record || cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(d, "provenance")), "%s: the record", label);
		free(again);
		cJSON_Delete(d);
		free(buf);
	}
	/* the record's parse borrows cJSON's (global) hooks: qtk_malloc's are back afterwards, so an
	 * allocation failure still reaches cJSON */
	qtk_test_fail_alloc_at(1);
	cJSON *probe = cJSON_Parse("[1, 2, 3]");
	qtk_test_fail_alloc_at(0);
	CHECK(!probe, "%s: cJSON allocates through qtk_malloc after --json", label);
	cJSON_Delete(probe);
	qtk_close(m);
}

/* json_tensor_text writes what json_tensor's tree prints, for every tensor it takes; the
 * others (grouped layouts, invalid names) it leaves to the tree. Returns the tensors it took. */
static size_t check_tensor_text(const char *path, const char *label)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	if (!m) {
		CHECK(0, "%s: open", label);
		return 0;
	}
	size_t took = 0, bad = 0;
	for (size_t i = 0; i < m->ntensors; i++) {
		qtk_jtext a = {0}, b = {0};
		cJSON *j = json_tensor(&m->tensors[i]);
		int fast = json_tensor_text(&a, &m->tensors[i]);
		qtk_jtext_ok(&a);
		if (fast) {
			took++;
			if (qtk_json_fmt(&b, j, 2) || a.len != b.len || memcmp(a.p, b.p, a.len))
				bad++;
		} else if (a.len) {
			bad++;
		}
		cJSON_Delete(j);
		qtk_jtext_free(&a);
		qtk_jtext_free(&b);
	}
	CHECK(bad == 0, "%s: %zu tensors printed differently without the tree", label, bad);
	qtk_close(m);
	return took;
}

/* Names from files never reach a terminal raw. */
static void check_safe_names(const char *gguf)
{
	char buf[64];
	const char *plain = "blk.0.attn_q.weight";
	CHECK(insp_safe(plain, buf, sizeof buf) == plain, "plain names pass unchanged");
	CHECK(!strcmp(insp_safe("a\x1b[31mb", buf, sizeof buf), "a\\x1b[31mb"), "ESC escaped: %s", buf);
	CHECK(!strcmp(insp_safe("a\xc2\x9b" "b\x7f", buf, sizeof buf), "a\\u{9b}b\\x7f"), "C1 and DEL escaped: %s", buf);
	CHECK(!strcmp(insp_safe("caf\xc3\xa9", buf, sizeof buf), "caf\xc3\xa9"), "other UTF-8 kept");
	qtk_err e;
	qtk_model *m = qtk_open(gguf, &e);
	if (!m)
		return;
	qtk_free(m->tensors[0].name);
	m->tensors[0].name = qtk_strdup("evil\x1b]0;owned\x07.weight");
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	insp_opts o = {0};
	report_summary(m, f, &o);
	report_markdown(m, f, &o);
	report_tensor(m, "evil\x1b]0;owned\x07.weight", f, &o);
	fclose(f);
	CHECK(out && !strchr(out, '\x1b') && !strchr(out, '\x07') && strstr(out, "evil\\x1b]0;owned\\x07.weight"),
	      "hostile tensor name escaped in text reports");
	free(out);
	qtk_close(m);
}

/* --diff output on two files, into a string. */
static char *diff_text(const char *other, const char *file)
{
	qtk_err e;
	qtk_model *mo = qtk_open(other, &e), *mf = qtk_open(file, &e);
	char *buf = NULL;
	size_t len = 0;
	if (mo && mf) {
		FILE *f = open_memstream(&buf, &len);
		insp_opts o = {0};
		report_diff(mo, mf, f, &o);
		fclose(f);
	}
	qtk_close(mo);
	qtk_close(mf);
	return buf;
}

static void check_hparams_and_names(const char *gguf, const char *hf)
{
	char buf[256];
	int qk;
	CHECK(qtk_canon_name(NULL, "blk.12.attn_q.weight", buf, sizeof buf, &qk) == 1 &&
		      !strcmp(buf, "model.layers.12.self_attn.q_proj.weight") && qk == 'q',
	      "attn_q -> %s", buf);
	CHECK(qtk_canon_name(NULL, "blk.0.ffn_norm.weight", buf, sizeof buf, &qk) == 1 &&
		      !strcmp(buf, "model.layers.0.post_attention_layernorm.weight"),
	      "ffn_norm -> %s", buf);
	CHECK(qtk_canon_name(NULL, "output.weight", buf, sizeof buf, &qk) == 1 && !strcmp(buf, "lm_head.weight"),
	      "output -> %s", buf);
	CHECK(qtk_canon_name(NULL, "model.layers.0.mlp.up_proj.weight", buf, sizeof buf, &qk) == 0, "HF names are not mapped");
	qtk_err e;
	qtk_model *a = qtk_open(gguf, &e), *b = qtk_open(hf, &e);
	hparams ha, hb;
	CHECK(a && hparams_load(a, &ha) == 0 && ha.n_layer == 2 && ha.n_head == 4 && ha.n_head_kv == 2 && ha.head_dim == 64,
	      "GGUF hparams");
	CHECK(b && hparams_load(b, &hb) == 0 && hb.n_layer == 2 && hb.n_head_kv == 2 && hb.head_dim == 64,
	      "config.json hparams");
	CHECK(a && fabs(kv_cache_bytes(&ha, 4096, kv_type_bytes("f16")) - 2.0 * 2 * 2 * 64 * 4096 * 2) < 1e-6, "KV bytes");
	CHECK(fabs(kv_type_bytes("q8_0") - 34.0 / 32) < 1e-15 && fabs(kv_type_bytes("q4_0") - 18.0 / 32) < 1e-15,
	      "KV block types");
	qtk_close(a);
	qtk_close(b);
}

int main(void)
{
	char dir[] = "/tmp/qtk-stats-XXXXXX", cmd[512], gguf[256], hf[256];
	if (t_samples(dir))
		return T_DONE();
	snprintf(gguf, sizeof gguf, "%s/tiny-llama-f32.gguf", dir);
	snprintf(hf, sizeof hf, "%s/tiny-llama", dir);

	check_entropy();
	check_model(gguf, "sample gguf", true);
	check_model(hf, "sample hf", true);
	check_hparams_and_names(gguf, hf);
	check_text_modes(gguf, hf);
	check_safe_names(gguf);
	CHECK(check_tensor_text(gguf, "sample gguf") > 0, "plain tensors printed without the tree");
	check_tensor_text(hf, "sample hf");
	check_json_streamed(gguf, "sample gguf", NULL);
	check_json_streamed(hf, "sample hf", NULL);
	/* a record's tree comes from a block sized from its text; one of tiny nodes outgrows it */
	check_json_streamed(gguf, "sample gguf with a record",
			    "{\"record_version\":1,\"tool\":{\"name\":\"qtk\",\"v\":\"caf\\u00e9 \\\"q\\\"\"},"
			    "\"output\":{\"tensors\":[{\"name\":\"a\",\"shape\":[2,3],\"x\":1.5e-7},{}],\"e\":[]}}");
	{
		static char big[200000];
		size_t k = (size_t)snprintf(big, sizeof big, "{\"output\":{\"tensors\":[");
		while (k < sizeof big - 16)
			k += (size_t)snprintf(big + k, sizeof big - k, "0,");
		snprintf(big + k - 1, sizeof big - k + 1, "]}}");
		check_json_streamed(gguf, "sample gguf with a record of tiny nodes", big);
	}
	/* a record qconvert writes is in the subset reformatted without a tree, and the document
	 * with it is still cJSON's print of itself */
	{
		const char *b = getenv("QTK_BIN");
		char q8[300], conv[1024];
		snprintf(q8, sizeof q8, "%s/q8.gguf", dir);
		snprintf(conv, sizeof conv, "%s/qconvert -q %s %s --to q8_0", b && *b ? b : "bin", gguf, q8);
		CHECK(system(conv) == 0, "%s", conv);
		qtk_err e;
		qtk_model *m = qtk_open(q8, &e);
		const qtk_kv *kv = m ? qtk_kv_find(m, "qtk.provenance") : NULL;
		CHECK(kv && kv->val.type == QTK_V_STR, "q8_0 output has a record");
		if (kv && kv->val.type == QTK_V_STR) {
			qtk_jtext w = {0};
			CHECK(qtk_json_refmt(&w, kv->val.v.str.s, (size_t)kv->val.v.str.len, 1) == 0 && w.len > 1000,
			      "qconvert's record reformats without cJSON");
			qtk_jtext_free(&w);
		}
		qtk_close(m);
		check_json_streamed(q8, "q8_0 output with its record", NULL);
	}
	char *d = diff_text(hf, gguf);
	CHECK(d && strstr(d, "matched 21 of 21 tensors (21 by GGUF<->HF name, 4 with Q/K rows un-permuted)"),
	      "sample diff gguf vs hf: %s", d ? d : "(none)");
	free(d);
	d = diff_text(gguf, gguf);
	CHECK(d && strstr(d, "21 exact"), "diff against itself: all exact");
	free(d);

	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures absent (GGUF/AWQ/GPTQ statistics)");
	} else {
		static const char *const files[] = {
			"gguf/tiny-Q4_0.gguf", "gguf/tiny-Q8_0.gguf", "gguf/tiny-Q4_K_M.gguf", "gguf/tiny-Q5_1.gguf",
			"gguf/tiny-Q3_K_S.gguf", "gguf/tiny-IQ4_XS.gguf", "gguf/tiny-Q2_K.gguf",
			"hf/tiny-llama/awq-g128", "hf/tiny-llama/gptq-4-128-1", "hf/tiny-llama/gptq-3-128-0",
			"hf/tiny-llama/gptq-2-64-0", "hf/tiny-llama/gptq-8-128-0", "hf/tiny-llama/gptq-4-32-1s",
		};
		for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
			char p[1024];
			snprintf(p, sizeof p, "%s/%s", fx, files[i]);
			check_model(p, files[i], false);
			check_tensor_text(p, files[i]);
			if (i % 4 == 0 || strstr(files[i], "hf/"))
				check_json_streamed(p, files[i], NULL);
		}
		/* Q4_0: codes are the nibbles, 16 levels; AWQ: zero points and scales per group and column */
		char p[1024];
		snprintf(p, sizeof p, "%s/hf/tiny-llama/awq-g128", fx);
		qtk_err e;
		qtk_model *m = qtk_open(p, &e);
		const qtk_tensor *t = m ? qtk_tensor_find(m, "model.layers.0.self_attn.q_proj.weight") : NULL;
		qtk_tstats s;
		if (t && !qtk_stats_compute(m, t, &s, NULL, NULL)) {
			uint64_t zs = 0;
			for (int k = 0; k < s.zero_levels; k++)
				zs += s.zeros[k];
			CHECK(s.code_bits == 4 && s.zero_levels == 16 && zs == 2 * 256 && s.scales.n == 2 * 256,
			      "awq side data: bits %d levels %d zeros %llu scales %llu", s.code_bits, s.zero_levels,
			      (unsigned long long)zs, (unsigned long long)s.scales.n);
		} else {
			CHECK(0, "awq q_proj stats");
		}
		qtk_close(m);
		/* llama.cpp's own HF -> GGUF conversion: every tensor matches exactly after un-permuting Q/K */
		char a[1024], b[1024];
		snprintf(a, sizeof a, "%s/hf/tiny-llama/fp16", fx);
		snprintf(b, sizeof b, "%s/hf/tiny-llama/ref/llamacpp-from-hf-f16.gguf", fx);
		d = diff_text(a, b);
		CHECK(d && strstr(d, "4 with Q/K rows un-permuted), 21 exact"), "llama.cpp conversion diff: %s", d ? d : "");
		free(d);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("note: could not remove %s\n", dir);
	return T_DONE();
}
