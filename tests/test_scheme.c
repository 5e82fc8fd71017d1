/* test_scheme.c - the packed-scheme layer: descriptor lookups, the one validation (each
 * refusal class), part shapes and bytes, exact transcodes, row decode/encode hooks, and that
 * the HF reader and QPK apply the same rules (GPTQ 5-bit refused, a partial last group refused
 * with the same message). */
#include "internal.h"
#include "dequant.h"
#include "json.h"
#include "scheme/fold.h"
#include "scheme/qgroups.h"
#include "scheme/scheme.h"
#include "t.h"
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/qtk-scheme-XXXXXX";

static char *tp(const char *name)
{
	static char buf[8][512];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
	return buf[k];
}

static qtk_layout lay(qtk_layout_kind kind, unsigned bits, uint32_t group, int version)
{
	return (qtk_layout){.kind = kind, .type = QTK_T_I32, .bits = (uint8_t)bits, .gptq_version = (uint8_t)version,
			    .sym = true, .group_size = group};
}

/* qtk_scheme_check must refuse t with `want` in the message and part `part`. */
static void expect_refused(int line, const qtk_tensor *t, const char *want, int part)
{
	char why[300] = "";
	int bad = -7;
	int rc = qtk_scheme_check(t, &bad, why, sizeof why);
	CHECK(rc == QTK_E_DATA && strstr(why, want) && bad == part, "line %d: rc %d part %d '%s' (want '%s', part %d)",
	      line, rc, bad, why, want, part);
}
#define REFUSED(t, want, part) expect_refused(__LINE__, t, want, part)

static void test_lookup(void)
{
	const qtk_scheme *a = qtk_scheme_by_kind(QTK_LAYOUT_AWQ), *g = qtk_scheme_by_kind(QTK_LAYOUT_GPTQ);
	CHECK(a && g && a != g, "both schemes are in the table");
	CHECK(!qtk_scheme_by_kind(QTK_LAYOUT_PLAIN), "plain is no packed scheme");
	CHECK(qtk_scheme_count() >= 2 && qtk_scheme_at(0) && !qtk_scheme_at(qtk_scheme_count()), "table size");
	CHECK(qtk_scheme_by_name("awq-gemm") == a && qtk_scheme_by_name("gptq") == g && !qtk_scheme_by_name("x"),
	      "by name");
	CHECK(qtk_scheme_by_method("AWQ") == a && qtk_scheme_by_method("gptq") == g && !qtk_scheme_by_method("bnb"),
	      "by quant_method");
	CHECK(qtk_scheme_part_index(g, "g_idx") == 3 && qtk_scheme_part_index(a, "g_idx") == -1 &&
		      qtk_scheme_part_index(a, "scales") == 2,
	      "part roles");
	char b[64];
	qtk_scheme_bits_text(g, b, sizeof b);
	CHECK(!strcmp(b, "2, 3, 4 or 8"), "gptq bits '%s'", b);
	qtk_scheme_bits_text(a, b, sizeof b);
	CHECK(!strcmp(b, "4"), "awq bits '%s'", b);
	CHECK(g->row_align == 32 && a->row_align == 8 && g->parts[3].optional && !g->parts[2].optional, "fields");
}

static void test_describe_bytes(void)
{
	qtk_tensor t = QTK_TENSOR_LOCAL;
	char why[300];
	qtk_layout l = lay(QTK_LAYOUT_AWQ, 4, 32, 0);
	qtk_tensor_clear(&t);
	CHECK(qtk_scheme_describe(&t, &l, 16, 64, true, why, sizeof why) == 0, "awq describe: %s", why);
	CHECK(t.nparts == 3 && t.parts[0].shape[0] == 64 && t.parts[0].shape[1] == 2 && t.parts[1].shape[0] == 2 &&
		      t.parts[2].shape[1] == 16 && t.n_bytes == 592 && t.n_params == 1024,
	      "awq parts, %llu bytes", (unsigned long long)t.n_bytes);
	uint64_t bytes[QTK_MAX_PARTS], total = 0;
	qtk_layout g = lay(QTK_LAYOUT_GPTQ, 4, 32, 1);
	CHECK(qtk_scheme_bytes(&g, 32, 64, true, bytes, &total) == 0 && total == 1024 + 32 + 128 + 256 &&
		      bytes[0] == 1024 && bytes[1] == 32 && bytes[2] == 128 && bytes[3] == 256,
	      "gptq bytes %llu", (unsigned long long)total);
	CHECK(qtk_scheme_bytes(&g, 32, 64, false, bytes, &total) == 0 && total == 1184 && bytes[3] == 0,
	      "without g_idx");
	g.bits = 3;
	CHECK(qtk_scheme_bytes(&g, 32, 64, true, NULL, &total) == 0 && total == 6 * 32 * 4 + 2 * 3 * 4 + 128 + 256,
	      "3-bit bytes %llu", (unsigned long long)total);
	g.bits = 5;
	CHECK(qtk_scheme_bytes(&g, 32, 64, true, NULL, &total) == QTK_E_DATA, "5-bit has no byte count");
	g = lay(QTK_LAYOUT_GPTQ, 4, 48, 1);
	CHECK(qtk_scheme_describe(&t, &g, 32, 64, true, why, sizeof why) == QTK_E_DATA &&
		      strstr(why, "group_size 48 does not divide in_features 64"),
	      "partial last group: %s", why);
}

static void test_refusals(void)
{
	qtk_tensor a = QTK_TENSOR_LOCAL, g = QTK_TENSOR_LOCAL, t = QTK_TENSOR_LOCAL;
	char why[300];
	qtk_layout la = lay(QTK_LAYOUT_AWQ, 4, 32, 0), lg = lay(QTK_LAYOUT_GPTQ, 4, 32, 2);
	qtk_tensor_clear(&a);
	qtk_tensor_clear(&g);
	CHECK(!qtk_scheme_describe(&a, &la, 16, 64, true, why, sizeof why) &&
		      !qtk_scheme_describe(&g, &lg, 32, 64, true, why, sizeof why),
	      "valid descriptions");
	int bad;
	CHECK(qtk_scheme_check(&a, &bad, why, sizeof why) == 0 && qtk_scheme_check(&g, &bad, why, sizeof why) == 0,
	      "valid tensors pass");
	qtk_tensor_copy(&t, &g);
	t.nparts = 3;
	CHECK(qtk_scheme_check(&t, &bad, why, sizeof why) == 0, "g_idx is optional");
	/* wrong dtype */
	qtk_tensor_copy(&t, &g);
	t.parts[2].type = QTK_T_F32;
	REFUSED(&t, "part 'scales' type F32, expected F16", 2);
	qtk_tensor_copy(&t, &a);
	t.parts[0].type = QTK_T_F16;
	REFUSED(&t, "part 'qweight' type F16, expected I32", 0);
	/* wrong shape */
	qtk_tensor_copy(&t, &g);
	t.parts[1].shape[0] = 3;
	REFUSED(&t, "part 'qzeros' shape [3, 4] does not match the layout: expected [2, 4]", 1);
	qtk_tensor_copy(&t, &g);
	t.parts[3].ndim = 2;
	REFUSED(&t, "part 'g_idx' shape", 3);
	qtk_tensor_copy(&t, &a);
	t.parts[2].shape[1] = 8;
	REFUSED(&t, "part 'scales' shape [2, 8]", 2);
	/* wrong role, part count */
	qtk_tensor_copy(&t, &g);
	snprintf(t.parts[1].role, sizeof t.parts[1].role, "zeros");
	REFUSED(&t, "part 1 role 'zeros', expected 'qzeros'", 1);
	qtk_tensor_copy(&t, &a);
	t.nparts = 4;
	REFUSED(&t, "nparts 4, awq has 3 (qweight, qzeros, scales)", -1);
	qtk_tensor_copy(&t, &g);
	t.nparts = 2;
	REFUSED(&t, "nparts 2, gptq has 3 or 4 (qweight, qzeros, scales[, g_idx])", -1);
	/* bits no codec decodes */
	for (unsigned b = 5; b <= 7; b++) {
		qtk_tensor_copy(&t, &g);
		t.layout.bits = (uint8_t)b;
		char w[40];
		snprintf(w, sizeof w, "bits %u is not one of 2, 3, 4, 8", b);
		REFUSED(&t, w, -1);
	}
	qtk_tensor_copy(&t, &a);
	t.layout.bits = 8;
	REFUSED(&t, "bits 8: awq (gemm) packing holds 4-bit codes only", -1);
	/* groups: zero, partial last group */
	qtk_tensor_copy(&t, &g);
	t.layout.group_size = 0;
	REFUSED(&t, "group_size 0 does not divide in_features 64", -1);
	qtk_tensor_copy(&t, &g);
	t.layout.group_size = 48;
	REFUSED(&t, "group_size 48 does not divide in_features 64", -1);
	qtk_tensor_copy(&t, &a);
	t.layout.group_size = 48;
	REFUSED(&t, "group_size 48 does not divide in_features 64", -1);
	/* scheme rules */
	qtk_tensor_copy(&t, &g);
	t.layout.gptq_version = 3;
	REFUSED(&t, "gptq_version 3 is not 1 or 2", -1);
	qtk_tensor_copy(&t, &g);
	t.nparts = 3;
	t.layout.act_order = true;
	REFUSED(&t, "act_order set but the tensor has no g_idx part", -1);
	qtk_tensor_copy(&t, &a);
	t.layout.act_order = true;
	REFUSED(&t, "awq layout with act_order or gptq_version set", -1);
	qtk_tensor_copy(&t, &a);
	t.shape[0] = 12;
	REFUSED(&t, "out_features 12 is not a multiple of 8", -1);
	qtk_tensor_copy(&t, &g);
	t.shape[0] = 31;
	REFUSED(&t, "does not pack into 32-bit words", -1);
	qtk_tensor_copy(&t, &g);
	t.ndim = 3;
	REFUSED(&t, "gptq layout needs 2 dimensions", -1);
	qtk_tensor_copy(&t, &g);
	t.shape[0] = 1ull << 41;
	REFUSED(&t, "out of range", -1);
	qtk_tensor_copy(&t, &g);
	t.layout.kind = QTK_LAYOUT_PLAIN;
	REFUSED(&t, "not a packed scheme", -1);
}

static void test_transcodes(void)
{
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_GPTQ, 4, true, 128, 256) == QTK_T_Q4_0, "sym 4-bit -> q4_0");
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_AWQ, 4, false, 128, 256) == QTK_T_Q5_0, "asym 4-bit -> q5_0");
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_GPTQ, 3, false, 64, 256) == QTK_T_Q4_0, "3-bit -> q4_0");
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_GPTQ, 8, true, 32, 256) == QTK_T_Q8_0, "sym 8-bit -> q8_0");
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_GPTQ, 8, false, 32, 256) == 0, "asym 8-bit: none");
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_GPTQ, 4, true, 48, 96) == 0, "groups straddle blocks: none");
	CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_PLAIN, 8, true, 32, 64) == QTK_T_Q8_0, "q8_0 source");
	CHECK(qtk_scheme_exact_to(QTK_LAYOUT_AWQ, QTK_LAYOUT_GPTQ, 4) && qtk_scheme_exact_to(QTK_LAYOUT_GPTQ, QTK_LAYOUT_AWQ, 4) &&
		      !qtk_scheme_exact_to(QTK_LAYOUT_GPTQ, QTK_LAYOUT_AWQ, 3),
	      "between schemes");
}

/* encode_rows in slices then decode_rows give the codec's whole decode. */
static void test_codec_hooks(void)
{
	static const struct { qtk_layout_kind k; unsigned bits; uint32_t slice; } cases[] = {
		{QTK_LAYOUT_AWQ, 4, 8}, {QTK_LAYOUT_GPTQ, 3, 32}, {QTK_LAYOUT_GPTQ, 8, 32}};
	const uint32_t out = 64, in = 128;
	float *x = malloc(sizeof(float) * out * in), *y = malloc(sizeof(float) * out * in),
	      *z = malloc(sizeof(float) * out * in);
	for (uint32_t i = 0; i < out * in; i++)
		x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		qtk_tensor t = QTK_TENSOR_LOCAL;
		char why[200];
		qtk_tensor_clear(&t);
		qtk_layout l = lay(cases[c].k, cases[c].bits, 32, cases[c].k == QTK_LAYOUT_GPTQ ? 2 : 0);
		l.sym = false;
		CHECK(!qtk_scheme_describe(&t, &l, out, in, true, why, sizeof why), "describe %zu: %s", c, why);
		void *pp[QTK_MAX_PARTS] = {NULL};
		for (int k = 0; k < t.nparts; k++)
			pp[k] = calloc(1, (size_t)t.parts[k].nbytes);
		int rc = 0;
		for (uint32_t o0 = 0; o0 < out && !rc; o0 += cases[c].slice)
			rc = qtk_scheme_encode_rows(&t, x + (uint64_t)o0 * in, o0, cases[c].slice, pp);
		CHECK(!rc, "encode %zu", c);
		CHECK(qtk_scheme_decode_rows(&t, (const void *const *)pp, 0, out, y) == 0, "decode %zu", c);
		int r = cases[c].k == QTK_LAYOUT_AWQ
				? qtk_dequant_awq(pp[0], pp[1], pp[2], in, out, 32, z)
				: qtk_dequant_gptq(pp[0], pp[1], pp[2], pp[3], in, out, 32, in / 32, cases[c].bits, 2, z);
		CHECK(r == 0 && !memcmp(y, z, sizeof(float) * out * in), "rows == whole decode %zu", c);
		CHECK(qtk_scheme_decode_rows(&t, (const void *const *)pp, 4, 8, y) == -1, "unaligned rows refused");
		{ /* write_shared puts in place exactly what the rows from 0 write for every row */
			const qtk_scheme *sc = qtk_scheme_of(&t);
			if (cases[c].k == QTK_LAYOUT_AWQ) {
				CHECK(sc && !sc->write_shared, "awq has no shared values");
			} else {
				CHECK(sc && sc->write_shared && t.nparts == 4, "gptq write_shared %zu", c);
			}
			if (cases[c].k == QTK_LAYOUT_GPTQ && sc && sc->write_shared && t.nparts == 4) {
				void *pw[QTK_MAX_PARTS] = {NULL};
				for (int k = 0; k < t.nparts; k++)
					pw[k] = calloc(1, (size_t)t.parts[k].nbytes);
				sc->write_shared(&t, pw);
				CHECK(!memcmp(pw[3], pp[3], (size_t)t.parts[3].nbytes), "write_shared == encoded g_idx %zu", c);
				for (int k = 0; k < 3; k++) {
					bool zero = true;
					for (uint64_t i = 0; i < t.parts[k].nbytes; i++)
						zero = zero && ((uint8_t *)pw[k])[i] == 0;
					CHECK(zero, "write_shared leaves part %d alone", k);
				}
				for (int k = 0; k < t.nparts; k++)
					free(pw[k]);
			}
		}
		if (cases[c].k == QTK_LAYOUT_AWQ) { /* exact repack AWQ -> GPTQ v2 through integer groups */
			qgroups q;
			qtk_tensor o = QTK_TENSOR_LOCAL;
			qtk_tensor_clear(&o);
			qtk_layout lo = lay(QTK_LAYOUT_GPTQ, 4, 32, 2);
			void *po[QTK_MAX_PARTS] = {NULL};
			CHECK(!qtk_scheme_to_groups(&t, (const void *const *)pp, &q), "awq to groups");
			CHECK(!qtk_scheme_describe(&o, &lo, out, in, true, why, sizeof why), "gptq describe");
			for (int k = 0; k < o.nparts; k++)
				po[k] = calloc(1, (size_t)o.parts[k].nbytes);
			CHECK(!qtk_scheme_from_groups(&q, &o, false, po), "groups to gptq v2");
			CHECK(!qtk_scheme_decode_rows(&o, (const void *const *)po, 0, out, z) &&
				      !memcmp(y, z, sizeof(float) * out * in),
			      "repacked values identical");
			qg_free(&q);
			for (int k = 0; k < o.nparts; k++)
				free(po[k]);
		}
		float err = 0;
		for (uint32_t i = 0; i < out * in; i++)
			err = fabsf(y[i] - x[i]) > err ? fabsf(y[i] - x[i]) : err;
		CHECK(err < (cases[c].bits == 3 ? 0.5f : cases[c].bits == 4 ? 0.3f : 0.05f), "fit error %g", (double)err);
		for (int k = 0; k < t.nparts; k++)
			free(pp[k]);
	}
	free(x);
	free(y);
	free(z);
}

static void test_qcfg(void)
{
	static const char *const cfg[] = {
		"{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128,\"desc_act\":true,\"sym\":false,"
		"\"checkpoint_format\":\"gptq_v2\"}",
		"{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":64,\"zero_point\":true,\"version\":\"gemm\"}",
	};
	for (int i = 0; i < 2; i++) {
		qtk_json_doc d;
		qtk_err e;
		qtk_err_clear(&e);
		CHECK(!qtk_json_parse(cfg[i], strlen(cfg[i]), 0, "cfg", 0, &e, &d), "parse %d", i);
		qtk_qcfg q;
		qtk_qcfg_read(d.root, NULL, &q);
		CHECK(q.scheme && !q.bad[0], "read %d: %s", i, q.bad);
		cJSON *o = q.scheme ? qtk_qcfg_json(&q) : NULL;
		char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
		CHECK(txt && !strcmp(txt, cfg[i]), "written back %d: %s", i, txt ? txt : "(null)");
		cJSON_free(txt);
		cJSON_Delete(o);
		qtk_json_doc_free(&d);
	}
	static const struct { const char *cfg, *bad; } bad[] = {
		{"{\"quant_method\":\"gptq\",\"bits\":5,\"group_size\":32}", "unsupported gptq bits 5 (2, 3, 4 or 8)"},
		{"{\"quant_method\":\"awq\",\"bits\":3,\"group_size\":32}", "unsupported awq bits 3 (only 4)"},
		{"{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":32,\"version\":\"gemv\"}", "gemv"},
		{"{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":0}", "no valid 'group_size'"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		qtk_json_doc d;
		qtk_err e;
		qtk_err_clear(&e);
		if (qtk_json_parse(bad[i].cfg, strlen(bad[i].cfg), 0, "cfg", 0, &e, &d))
			continue;
		qtk_qcfg q;
		qtk_qcfg_read(d.root, NULL, &q);
		CHECK(strstr(q.bad, bad[i].bad), "config %zu: '%s'", i, q.bad);
		qtk_json_doc_free(&d);
	}
}

/* ---- the same rules in the HF reader and in QPK ---- */

static void put(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(p, 1, n, f);
		fclose(f);
	}
}

/* A safetensors file with one GPTQ layer "l" (no g_idx): out 32, the given qweight rows,
 * ngroups and bits. */
static void gptq_file(const char *path, uint64_t qrows, uint64_t ngroups, unsigned bits)
{
	char json[1024];
	uint64_t out = 32, zc = out * bits / 32, b0 = qrows * out * 4, b1 = ngroups * zc * 4, b2 = ngroups * out * 2;
	int n = snprintf(json, sizeof json,
			 "{\"l.qweight\":{\"dtype\":\"I32\",\"shape\":[%llu,%llu],\"data_offsets\":[0,%llu]},"
			 "\"l.qzeros\":{\"dtype\":\"I32\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]},"
			 "\"l.scales\":{\"dtype\":\"F16\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}}",
			 (unsigned long long)qrows, (unsigned long long)out, (unsigned long long)b0,
			 (unsigned long long)ngroups, (unsigned long long)zc, (unsigned long long)b0,
			 (unsigned long long)(b0 + b1), (unsigned long long)ngroups, (unsigned long long)out,
			 (unsigned long long)(b0 + b1), (unsigned long long)(b0 + b1 + b2));
	while (n % 8)
		json[n++] = ' ';
	size_t total = 8 + (size_t)n + (size_t)(b0 + b1 + b2);
	uint8_t *f = calloc(1, total);
	qtk_wr64(f, (uint64_t)n);
	memcpy(f + 8, json, (size_t)n);
	put(path, f, total);
	free(f);
}

static void gptq_dir(const char *dir, int bits, int group, uint64_t qrows, uint64_t ngroups, unsigned file_bits)
{
	char cfg[256], p[600];
	mkdir(dir, 0755);
	int n = snprintf(cfg, sizeof cfg,
			 "{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":%d,"
			 "\"group_size\":%d,\"sym\":true}}",
			 bits, group);
	snprintf(p, sizeof p, "%s/config.json", dir);
	put(p, cfg, (size_t)n);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	gptq_file(p, qrows, ngroups, file_bits);
}

/* A one-tensor model for the QPK writer. */
static qtk_model *gptq_model(unsigned bits, uint32_t group, uint64_t in, uint64_t ngroups)
{
	qtk_model *m = qtk_model_new();
	qtk_tensor *t = qtk_model_add_tensor(m, "l.weight");
	uint64_t out = 32;
	t->ndim = 2;
	t->shape[0] = out;
	t->shape[1] = in;
	t->layout = lay(QTK_LAYOUT_GPTQ, bits, group, 1);
	static const char *const roles[] = {"qweight", "qzeros", "scales"};
	uint64_t sh[3][2] = {{in * bits / 32, out}, {ngroups, out * bits / 32}, {ngroups, out}};
	for (int k = 0; k < 3; k++) {
		qtk_part *p = &t->parts[k];
		snprintf(p->role, sizeof p->role, "%s", roles[k]);
		p->type = k == 2 ? QTK_T_F16 : QTK_T_I32;
		p->ndim = 2;
		p->shape[0] = sh[k][0];
		p->shape[1] = sh[k][1];
		qtk_type_nbytes(p->type, sh[k][0] * sh[k][1], &p->nbytes);
	}
	t->nparts = 3;
	qtk_tensor_finish(t);
	return m;
}

static void qpk_refuses(int line, qtk_model *m, const char *want)
{
	qtk_err e;
	qtk_err_clear(&e);
	qtk_writer *w = qtk_writer_open(tp("out.qpk"), QTK_OUT_QPK, m, NULL, &e);
	CHECK(!w && e.code == QTK_E_DATA && strstr(e.msg, want), "line %d: qpk writer: %d '%s' (want '%s')", line,
	      e.code, e.msg, want);
	qtk_writer_abort(w);
	qtk_close(m);
}

static void hf_refuses(int line, const char *dir, const char *want, const char *subject)
{
	qtk_err e;
	qtk_model *m = qtk_open(dir, &e);
	CHECK(!m && e.code == QTK_E_DATA && strstr(e.msg, want) && (!subject || strstr(e.subject, subject)),
	      "line %d: hf reader: %d '%s' '%s' (want '%s')", line, e.code, e.msg, e.subject, want);
	qtk_close(m);
}

static void test_readers_agree(void)
{
	/* GPTQ 5-bit: no codec decodes it; QPK used to accept it */
	qpk_refuses(__LINE__, gptq_model(5, 32, 64, 2), "bits 5 is not one of 2, 3, 4, 8");
	qpk_refuses(__LINE__, gptq_model(6, 32, 64, 2), "bits 6 is not one of 2, 3, 4, 8");
	gptq_dir(tp("b5"), 5, 32, 10, 2, 5);
	hf_refuses(__LINE__, tp("b5"), "unsupported gptq bits 5", NULL);
	/* a partial last group (in 64, group 48, ceil -> 2 groups): the HF reader used to accept it */
	const char *want = "group_size 48 does not divide in_features 64";
	qpk_refuses(__LINE__, gptq_model(4, 48, 64, 2), want);
	gptq_dir(tp("partial"), 4, 48, 8, 2, 4);
	hf_refuses(__LINE__, tp("partial"), want, "l.qweight");
	/* the same layer with whole groups opens, and QPK takes it */
	gptq_dir(tp("whole"), 4, 32, 8, 2, 4);
	qtk_err e;
	qtk_model *m = qtk_open(tp("whole"), &e);
	const qtk_tensor *t = m ? qtk_tensor_find(m, "l.weight") : NULL;
	CHECK(t && t->layout.kind == QTK_LAYOUT_GPTQ && t->shape[1] == 64 && t->nparts == 3, "whole groups fold: %s",
	      m ? "" : e.msg);
	if (m) {
		qtk_writer *w = qtk_writer_open(tp("whole.qpk"), QTK_OUT_QPK, m, NULL, &e);
		CHECK(w != NULL, "qpk writer takes the folded tensor: %s", e.msg);
		qtk_writer_abort(w);
	}
	qtk_close(m);
	/* a bare file beside the config folds through the same layer */
	m = qtk_open(tp("whole/model.safetensors"), &e);
	CHECK(m && m->ntensors == 1 && qtk_tensor_find(m, "l.weight"), "bare file folds: %s", m ? "" : e.msg);
	qtk_close(m);
	/* wrong dtype and shape name the part's tensor */
	gptq_dir(tp("shape"), 4, 32, 8, 3, 4);
	hf_refuses(__LINE__, tp("shape"), "part 'qzeros' shape [3, 4] does not match the layout: expected [2, 4]",
		   "l.qzeros");
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	test_lookup();
	test_describe_bytes();
	test_refusals();
	test_transcodes();
	test_codec_hooks();
	test_qcfg();
	test_readers_agree();
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd))
		printf("cannot remove %s\n", tmpdir);
	return T_DONE();
}
