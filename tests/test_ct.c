/* test_ct.c - compressed-tensors: the fixtures' reference digests (hf/ct/ref), the exact
 * transcodes proven by decoding both sides, hostile checkpoints (exit QTK_E_DATA) written by the
 * test, and small CT tensors synthesized in memory (no fixtures needed). */
#include "internal.h"
#include "dequant.h"
#include "json.h"
#include "scheme/fold.h"
#include "scheme/qgroups.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "view/stats.h"
#include "t.h"
#include <math.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void sha_hex(const void *p, size_t n, char hex[65])
{
	unsigned char md[32];
	unsigned int len = 0;
	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long l = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)l + 1);
	if (b && fread(b, 1, (size_t)l, f) != (size_t)l) {
		free(b);
		b = NULL;
	}
	if (b)
		b[l] = 0;
	fclose(f);
	if (n)
		*n = (size_t)l;
	return b;
}

/* Every row of ref/<v>.digest.tsv against the decoded logical tensor; returns rows matched. */
static int check_in(const char *dir, const char *root, const char *v, qtk_layout_kind kind)
{
	char tsv[1024];
	snprintf(tsv, sizeof tsv, "%s/hf/ct/ref/%s.digest.tsv", root, v);
	qtk_err err = {0};
	qtk_model *m = qtk_open(dir, &err);
	char *txt = slurp(tsv, NULL);
	CHECK(m && txt, "%s opens: %s", v, err.msg);
	int rows = 0, good = 0;
	for (char *line = txt ? strtok(txt, "\n") : NULL; m && line; line = strtok(NULL, "\n")) {
		char name[300], hex[80];
		unsigned long long n;
		if (sscanf(line, "%250s %llu %70s", name, &n, hex) != 3 || !strcmp(name, "name"))
			continue;
		rows++;
		strcat(name, ".weight");
		const qtk_tensor *t = qtk_tensor_find(m, name);
		if (!t || t->layout.kind != kind || t->n_params != n) {
			CHECK(0, "%s: %s is a %u tensor of %llu", v, name, (unsigned)kind, n);
			continue;
		}
		float *y = malloc(n * sizeof *y);
		char got[65] = "";
		if (y && !qtk_decode_tensor(m, t, y))
			sha_hex(y, n * sizeof *y, got);
		free(y);
		good += !strcmp(got, hex);
		CHECK(!strcmp(got, hex), "%s %s digest %s", v, name, got);
	}
	CHECK(rows > 0 && good == rows, "%s: %d/%d digests", v, good, rows);
	printf("%s: %d/%d reference digests\n", v, good, rows);
	free(txt);
	qtk_close(m);
	return good;
}

static int check_variant(const char *root, const char *v, qtk_layout_kind kind)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/hf/ct/%s", root, v);
	return check_in(dir, root, v, kind);
}

/* A directory qtk wrote, against the reference digests of variant v. */
static void check_variant_dir(const char *dir, const char *root, const char *v)
{
	check_in(dir, root, v, QTK_LAYOUT_CT_INT);
}

static void fixtures(const char *root)
{
	static const struct {
		const char *v;
		qtk_layout_kind k;
	} vs[] = {
		{"ct-w4a16-g128-sym", QTK_LAYOUT_CT_INT}, {"ct-w4a16-g32-asym", QTK_LAYOUT_CT_INT},
		{"ct-w4a16-g128-actorder", QTK_LAYOUT_CT_INT}, {"ct-w8a8-int8-channel", QTK_LAYOUT_CT_INT},
		{"ct-fp8-channel", QTK_LAYOUT_FP8}, {"ct-fp8-block", QTK_LAYOUT_FP8}, {"ct-nvfp4", QTK_LAYOUT_NVFP4},
		{"ds-fp8-block", QTK_LAYOUT_FP8}, {"modelopt-nvfp4", QTK_LAYOUT_NVFP4},
	};
	for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
		check_variant(root, vs[i].v, vs[i].k);
}

/* ---- exact transcodes proven by decoding both sides ------------------------------------ */

static bool same_bits(const float *a, const float *b, uint64_t n) { return !memcmp(a, b, n * sizeof *a); }

static void exact_paths(const char *root)
{
	static const char *const vs[] = {"ct-w4a16-g128-sym", "ct-w4a16-g32-asym", "ct-w4a16-g128-actorder",
					 "ct-w8a8-int8-channel"};
	for (size_t v = 0; v < sizeof vs / sizeof *vs; v++) {
		char dir[1024];
		snprintf(dir, sizeof dir, "%s/hf/ct/%s", root, vs[v]);
		qtk_err err = {0};
		qtk_model *m = qtk_open(dir, &err);
		CHECK(m, "%s: %s", vs[v], err.msg);
		const qtk_tensor *t = m ? qtk_tensor_find(m, "model.layers.1.mlp.down_proj.weight") : NULL;
		if (!t)
			continue;
		uint64_t n = t->n_params;
		uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1];
		float *ref = malloc(n * 4), *y = malloc(n * 4);
		uint8_t *pp[QTK_MAX_PARTS] = {NULL};
		for (int k = 0; k < t->nparts; k++)
			CHECK(!qtk_read_part_alloc(m, t, k, &pp[k]), "read part %d", k);
		CHECK(!qtk_decode_tensor(m, t, ref), "decode");
		qgroups g;
		CHECK(!qtk_scheme_to_groups(t, (const void *const *)pp, &g), "%s: integer groups", vs[v]);
		unsigned ggml = qtk_scheme_exact_ggml(t->layout.kind, t->layout.bits, t->layout.sym, t->layout.group_size, in);
		if (!t->layout.act_order) { /* -> ggml block type */
			unsigned want = t->layout.bits == 8 ? QTK_T_Q8_0 : t->layout.sym ? QTK_T_Q4_0 : QTK_T_Q5_0;
			CHECK(ggml == want, "%s: exact ggml type %u, want %u", vs[v], ggml, want);
			uint64_t nb = 0;
			qtk_type_nbytes(ggml, n, &nb);
			uint8_t *blk = malloc(nb);
			CHECK(!qg_to_ggml(&g, ggml, 0, out, blk) && !qtk_dequant_ggml(ggml, blk, y, n) && same_bits(ref, y, n),
			      "%s -> %s bit-exact", vs[v], qtk_type(ggml)->name);
			free(blk);
		}
		if (t->layout.bits == 4 && !t->layout.act_order) { /* -> AWQ */
			uint32_t *qw = calloc((size_t)in * out / 8, 4), *qz = calloc((size_t)g.ngroups * out / 8, 4);
			uint16_t *sc = calloc((size_t)g.ngroups * out, 2);
			CHECK(!qg_to_awq(&g, qw, qz, sc) &&
				      !qtk_dequant_awq((int32_t *)qw, (int32_t *)qz, sc, in, out, g.group, y) && same_bits(ref, y, n),
			      "%s -> awq bit-exact", vs[v]);
			free(qw), free(qz), free(sc);
		}
		{ /* -> GPTQ v2 (act-order through g_idx) */
			uint32_t *qw = calloc((size_t)in * g.bits / 32 * out, 4), *qz = calloc((size_t)g.ngroups * out * g.bits / 32, 4);
			uint16_t *sc = calloc((size_t)g.ngroups * out, 2);
			int32_t *gi = calloc(in, 4);
			CHECK(!qg_to_gptq(&g, 2, false, qw, qz, sc, gi) &&
				      !qtk_dequant_gptq((int32_t *)qw, (int32_t *)qz, sc, gi, in, out, g.group, g.ngroups, g.bits, 2, y) &&
				      same_bits(ref, y, n),
			      "%s -> gptq-v2 bit-exact", vs[v]);
			free(qw), free(qz), free(sc), free(gi);
		}
		qg_free(&g);
		for (int k = 0; k < QTK_MAX_PARTS; k++)
			qtk_free(pp[k]);
		free(ref), free(y);
		qtk_close(m);
	}
}

/* ---- writing pack-quantized ------------------------------------------------------------- */

static const char *qconvert(void)
{
	static char p[300];
	const char *b = getenv("QTK_BUILD");
	snprintf(p, sizeof p, "%s/../bin/qconvert", b && *b ? b : "build");
	return p;
}

/* Every packed tensor of a (written) has b's parts byte for byte; returns the tensors compared. */
static int same_parts(const char *a, const char *b, const char *what)
{
	qtk_err e1 = {0}, e2 = {0};
	qtk_model *ma = qtk_open(a, &e1), *mb = qtk_open(b, &e2);
	CHECK(ma && mb, "%s: both open: %s %s", what, e1.msg, e2.msg);
	int n = 0, bad = 0;
	for (size_t i = 0; ma && mb && i < ma->ntensors; i++) {
		const qtk_tensor *t = &ma->tensors[i], *u = qtk_tensor_find(mb, t->name);
		if (t->layout.kind == QTK_LAYOUT_PLAIN)
			continue;
		n++;
		if (!u || u->nparts != t->nparts || u->layout.kind != t->layout.kind) {
			bad++;
			continue;
		}
		for (int k = 0; k < t->nparts; k++) {
			uint8_t *x = NULL, *y = NULL;
			if (qtk_read_part_alloc(ma, t, k, &x) || qtk_read_part_alloc(mb, u, k, &y) ||
			    t->parts[k].nbytes != u->parts[k].nbytes || memcmp(x, y, (size_t)t->parts[k].nbytes))
				bad++;
			qtk_free(x);
			qtk_free(y);
		}
	}
	CHECK(n > 0 && !bad, "%s: %d packed tensors, %d differ", what, n, bad);
	qtk_close(ma);
	qtk_close(mb);
	return n - bad;
}

static void writing(const char *root)
{
	char tmp[] = "/tmp/qtk-ctw-XXXXXX";
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp");
		return;
	}
	char cmd[8192], fx[1024], out[1200], out2[1200];
	/* from F16: the same bytes as llm-compressor (its min-max observer, F16 arithmetic) */
	static const struct {
		const char *v, *opts;
	} req[] = {{"ct-w4a16-g128-sym", "--sym --group-size 128"}, {"ct-w4a16-g32-asym", "--group-size 32"}};
	for (size_t i = 0; i < sizeof req / sizeof *req; i++) {
		snprintf(out, sizeof out, "%s/%s/", tmp, req[i].v);
		snprintf(cmd, sizeof cmd, "%s %s/hf/tiny-llama/fp16 %s --to ct-int %s >/dev/null 2>&1", qconvert(), root, out,
			 req[i].opts);
		CHECK(system(cmd) == 0, "%s", cmd);
		snprintf(fx, sizeof fx, "%s/hf/ct/%s", root, req[i].v);
		same_parts(out, fx, req[i].v);
		check_variant_dir(out, root, req[i].v);
	}
	/* AutoAWQ <-> compressed-tensors and GPTQ (act-order) <-> compressed-tensors, --exact */
	static const struct {
		const char *v, *mid;
	} rt[] = {{"ct-w4a16-g32-asym", "awq"}, {"ct-w4a16-g32-asym", "gptq-v2"}, {"ct-w4a16-g128-actorder", "gptq"}};
	for (size_t i = 0; i < sizeof rt / sizeof *rt; i++) {
		snprintf(fx, sizeof fx, "%s/hf/ct/%s", root, rt[i].v);
		snprintf(out, sizeof out, "%s/rt%zu-%s/", tmp, i, rt[i].mid);
		snprintf(out2, sizeof out2, "%s/rt%zu-back/", tmp, i);
		snprintf(cmd, sizeof cmd, "%s %s %s --to %s --exact >/dev/null 2>&1 && %s %s %s --to ct-int --exact >/dev/null 2>&1",
			 qconvert(), fx, out, rt[i].mid, qconvert(), out, out2);
		CHECK(system(cmd) == 0, "%s", cmd);
		char what[200];
		snprintf(what, sizeof what, "%s -> %s -> ct-int", rt[i].v, rt[i].mid);
		same_parts(out2, fx, what);
	}
	/* ct-int into GGUF with auto-exact: q4_0 / q5_0 / q8_0, --exact holds */
	static const char *const gg[] = {"ct-w4a16-g128-sym", "ct-w4a16-g32-asym", "ct-w8a8-int8-channel"};
	for (size_t i = 0; i < sizeof gg / sizeof *gg; i++) {
		snprintf(cmd, sizeof cmd, "%s %s/hf/ct/%s %s/%s.gguf --to auto-exact --exact >/dev/null 2>&1", qconvert(),
			 root, gg[i], tmp, gg[i]);
		CHECK(system(cmd) == 0, "%s", cmd);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	CHECK(system(cmd) == 0, "cleanup");
}

/* ---- synthesized checkpoints: decode and hostile inputs ---------------------------------- */

typedef struct stt {
	const char *name, *dtype;
	int nd;
	uint64_t shape[2];
	const void *data;
	size_t n;
} stt;

static void write_ckpt(const char *dir, const char *qcfg, const stt *ts, int nt)
{
	char path[1200], hdr[8192];
	size_t at = 0, off = 0;
	at += (size_t)snprintf(hdr + at, sizeof hdr - at, "{");
	for (int i = 0; i < nt; i++) {
		at += (size_t)snprintf(hdr + at, sizeof hdr - at, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
				       ts[i].name, ts[i].dtype);
		for (int d = 0; d < ts[i].nd; d++)
			at += (size_t)snprintf(hdr + at, sizeof hdr - at, "%s%llu", d ? "," : "", (unsigned long long)ts[i].shape[d]);
		at += (size_t)snprintf(hdr + at, sizeof hdr - at, "],\"data_offsets\":[%zu,%zu]}", off, off + ts[i].n);
		off += ts[i].n;
	}
	at += (size_t)snprintf(hdr + at, sizeof hdr - at, "}");
	while (at % 8)
		hdr[at++] = ' ';
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	FILE *f = fopen(path, "wb");
	uint64_t hl = at;
	fwrite(&hl, 8, 1, f);
	fwrite(hdr, 1, at, f);
	for (int i = 0; i < nt; i++)
		fwrite(ts[i].data, 1, ts[i].n, f);
	fclose(f);
	snprintf(path, sizeof path, "%s/config.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"quantization_config\":%s}", qcfg);
	fclose(f);
}

#define OUT 16
#define IN 64
static const char *cfg_fmt =
	"{\"quant_method\":\"compressed-tensors\",\"format\":\"%s\",\"ignore\":[%s],\"config_groups\":{\"group_0\":"
	"{\"targets\":[\"re:.*mlp\\\\.down_proj$\"],\"weights\":{\"num_bits\":%s,\"type\":\"int\",\"symmetric\":%s,"
	"\"strategy\":\"group\",\"group_size\":32,\"actorder\":%s}}}}";

typedef struct synth {
	int32_t packed[OUT][IN / 8];
	uint16_t scale[OUT][IN / 32];
	int32_t zero[OUT / 8][IN / 32];
	int64_t shape[2];
	int32_t gidx[IN];
	uint16_t norm[IN];
	float want[OUT][IN];
} synth;

static void synth_fill(synth *s)
{
	memset(s, 0, sizeof *s);
	for (int o = 0; o < OUT; o++)
		for (int gr = 0; gr < IN / 32; gr++) {
			s->scale[o][gr] = qtk_f32_to_fp16(0.01f * (float)(o + 1) + 0.5f * (float)gr);
			int zp = (o * 3 + gr) % 16 - 8;
			s->zero[o / 8][gr] |= (int32_t)((uint32_t)(zp + 8) << (4 * (o % 8)));
		}
	for (int o = 0; o < OUT; o++)
		for (int i = 0; i < IN; i++) {
			int q = (o * 7 + i * 5) % 16 - 8, gr = i / 32;
			s->packed[o][i / 8] |= (int32_t)((uint32_t)(q + 8) << (4 * (i % 8)));
			int zp = (int)(((uint32_t)s->zero[o / 8][gr] >> (4 * (o % 8))) & 15) - 8;
			s->want[o][i] = (float)(q - zp) * qtk_fp16_to_f32(s->scale[o][gr]);
		}
	s->shape[0] = OUT, s->shape[1] = IN;
	for (int i = 0; i < IN; i++)
		s->gidx[i] = i / 32, s->norm[i] = 0x3c00;
}

/* Open dir; 0 when it opens (the down_proj decoded into y when y), else the error code. */
static int try_open(const char *dir, float *y, qtk_err *err)
{
	memset(err, 0, sizeof *err);
	qtk_model *m = qtk_open(dir, err);
	if (!m)
		return err->code ? err->code : -1;
	const qtk_tensor *t = qtk_tensor_find(m, "model.layers.0.mlp.down_proj.weight");
	int rc = t && t->layout.kind == QTK_LAYOUT_CT_INT ? 0 : -2;
	if (!rc && y)
		rc = qtk_decode_tensor(m, t, y);
	qtk_close(m);
	return rc;
}

/* Encode, decode and integer-group round trips of a ct-int layout built in memory. */
static void codec_in_memory(void)
{
	for (int sym = 0; sym < 2; sym++)
		for (unsigned bits = 2; bits <= 8; bits *= 2) {
			enum { O = 48, I = 64 };
			qtk_layout l = {.kind = QTK_LAYOUT_CT_INT, .type = QTK_T_I32, .bits = (uint8_t)bits, .group_size = 32,
					.sym = sym, .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_T_F16};
			qtk_tensor t = QTK_TENSOR_LOCAL;
			char why[300];
			qtk_tensor_clear(&t);
			CHECK(!qtk_scheme_describe(&t, &l, O, I, true, why, sizeof why), "describe: %s", why);
			CHECK(t.nparts == (sym ? 3 : 4), "parts: %d", t.nparts);
			void *pp[QTK_MAX_PARTS] = {NULL}, *p2[QTK_MAX_PARTS] = {NULL};
			for (int k = 0; k < t.nparts; k++)
				pp[k] = calloc(1, (size_t)t.parts[k].nbytes), p2[k] = calloc(1, (size_t)t.parts[k].nbytes);
			float *x = malloc(O * I * sizeof *x), *y = malloc(O * I * sizeof *y);
			for (int i = 0; i < O * I; i++)
				x[i] = qtk_fp16_to_f32(qtk_f32_to_fp16((float)((i * 7919) % 1001 - 400) / 1000.0f));
			CHECK(!qtk_scheme_encode_rows(&t, x, 0, 16, pp) && !qtk_scheme_encode_rows(&t, x + 16 * I, 16, 32, pp),
			      "encode in two slices");
			CHECK(!qtk_scheme_decode_rows(&t, (const void *const *)pp, 0, O, y), "decode");
			double worst = 0;
			for (int i = 0; i < O * I; i++)
				worst = fabs(y[i] - x[i]) > worst ? fabs(y[i] - x[i]) : worst;
			double step = (sym ? 0.601 * 2 : 1.0) / ((1u << bits) - 1u);
			CHECK(worst <= step * 0.51 + 1e-3, "%u-bit %s: max error %g (step %g)", bits, sym ? "sym" : "asym", worst, step);
			qgroups g;
			CHECK(!qtk_scheme_to_groups(&t, (const void *const *)pp, &g) && !qtk_scheme_from_groups(&g, &t, false, p2),
			      "integer groups round trip");
			for (int k = 0; k < t.nparts; k++)
				CHECK(!memcmp(pp[k], p2[k], (size_t)t.parts[k].nbytes), "%u-bit part %d the same", bits, k);
			qg_free(&g);
			for (int k = 0; k < t.nparts; k++)
				free(pp[k]), free(p2[k]);
			free(x), free(y);
		}
}

static void synthesized(void)
{
	char dir[] = "/tmp/qtk-ct-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	synth *s = malloc(sizeof *s);
	synth_fill(s);
	const char *P = "model.layers.0.mlp.down_proj.";
	char nm[6][100];
	const char *sfx[] = {"weight_packed", "weight_scale", "weight_zero_point", "weight_shape", "weight_g_idx"};
	for (int i = 0; i < 5; i++)
		snprintf(nm[i], sizeof nm[i], "%s%s", P, sfx[i]);
	snprintf(nm[5], sizeof nm[5], "model.norm.weight");
	stt base[6] = {
		{nm[0], "I32", 2, {OUT, IN / 8}, s->packed, sizeof s->packed},
		{nm[1], "F16", 2, {OUT, IN / 32}, s->scale, sizeof s->scale},
		{nm[2], "I32", 2, {OUT / 8, IN / 32}, s->zero, sizeof s->zero},
		{nm[3], "I64", 1, {2, 0}, s->shape, sizeof s->shape},
		{nm[5], "F16", 1, {IN, 0}, s->norm, sizeof s->norm},
		{nm[4], "I32", 1, {IN, 0}, s->gidx, sizeof s->gidx},
	};
	char cfg[2048];
	float y[OUT * IN];
	qtk_err err;
	/* the good one: asymmetric int4 group 32 decodes as (q - zp) * s */
	snprintf(cfg, sizeof cfg, cfg_fmt, "pack-quantized", "\"lm_head\"", "4", "false", "null");
	write_ckpt(dir, cfg, base, 5);
	CHECK(try_open(dir, y, &err) == 0 && !memcmp(y, s->want, sizeof y), "synthesized ct-int4 decodes: %s", err.msg);
	/* act-order group with an identity g_idx */
	snprintf(cfg, sizeof cfg, cfg_fmt, "pack-quantized", "", "4", "false", "\"group\"");
	write_ckpt(dir, cfg, base, 6);
	CHECK(try_open(dir, y, &err) == 0 && !memcmp(y, s->want, sizeof y), "with weight_g_idx: %s", err.msg);

	/* hostile: each must be refused as bad data, naming the key or tensor */
	struct {
		const char *what, *fmt, *ignore, *bits, *sym, *actorder, *needle;
		int nt, patch; /* patch: 1 shape lies, 2 packed columns, 3 scale dtype, 4 zero shape, 5 g_idx range */
	} bad[] = {
		{"weight_shape lies", "pack-quantized", "", "4", "false", "null", "weight_shape", 5, 1},
		{"packed size does not divide", "pack-quantized", "", "4", "false", "null", "weight_shape", 5, 2},
		{"scale of the wrong dtype", "pack-quantized", "", "4", "false", "null", "weight_scale dtype", 5, 3},
		{"zero point shape", "pack-quantized", "", "4", "false", "null", "zero", 5, 4},
		{"g_idx out of range", "pack-quantized", "", "4", "false", "\"group\"", "outside", 6, 5},
		{"g_idx too short", "pack-quantized", "", "4", "false", "\"group\"", "weight_g_idx must be", 6, 6},
		{"symmetric config with zero points", "pack-quantized", "", "4", "true", "null", "zero point", 5, 0},
		{"g_idx without actorder", "pack-quantized", "", "4", "false", "null", "actorder", 6, 0},
		{"actorder without g_idx", "pack-quantized", "", "4", "false", "\"group\"", "g_idx", 5, 0},
		{"num_bits not a number", "pack-quantized", "", "\"four\"", "false", "null", "num_bits", 5, 0},
		{"3-bit pack", "pack-quantized", "", "3", "false", "null", "num_bits", 5, 0},
		{"unknown format", "marlin-24", "", "4", "false", "null", "format", 5, 0},
		{"ignored module stored quantized", "pack-quantized", "\"re:.*down_proj\"", "4", "false", "null", "ignore", 5, 0},
		{"int-quantized config on packed weights", "int-quantized", "", "8", "true", "null", "weight", 5, 0},
	};
	for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
		stt ts[6];
		memcpy(ts, base, sizeof ts);
		int64_t lie[2] = {OUT, IN + 8};
		if (bad[b].patch == 1)
			ts[3].data = lie;
		if (bad[b].patch == 2)
			ts[0].shape[1] = IN / 8 - 1, ts[0].n = (size_t)OUT * (IN / 8 - 1) * 4;
		if (bad[b].patch == 3)
			ts[1].dtype = "I16";
		if (bad[b].patch == 4)
			ts[2].shape[0] = 1, ts[2].n /= 2;
		int32_t g2[IN];
		memcpy(g2, s->gidx, sizeof g2);
		g2[7] = 5;
		if (bad[b].patch == 5)
			ts[5].data = g2;
		if (bad[b].patch == 6)
			ts[5].shape[0] = 8, ts[5].n = 32;
		snprintf(cfg, sizeof cfg, cfg_fmt, bad[b].fmt, bad[b].ignore, bad[b].bits, bad[b].sym, bad[b].actorder);
		write_ckpt(dir, cfg, ts, bad[b].nt);
		int rc = try_open(dir, NULL, &err);
		char all[1200];
		snprintf(all, sizeof all, "%s %s", err.subject, err.msg);
		CHECK(rc == QTK_E_DATA && strstr(all, bad[b].needle), "%s: rc %d (%s)", bad[b].what, rc, all);
	}
	/* the CLI: exit 3 on a hostile checkpoint, nothing written */
	char cmd[2400], out[1100];
	snprintf(out, sizeof out, "%s/out.gguf", dir);
	snprintf(cmd, sizeof cmd, "%s %s %s --to auto-exact >/dev/null 2>&1", qconvert(), dir, out);
	int st = system(cmd);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3 && access(out, F_OK) != 0, "qconvert exits 3: %d", st);
	char rm[1200];
	snprintf(rm, sizeof rm, "rm -rf %s", dir);
	CHECK(system(rm) == 0, "cleanup");
	free(s);
}

/* DeepSeek FP8 and ModelOpt NVFP4 checkpoints made here: one good, the hostile ones exit 3. */
static void side_formats(void)
{
	char dir[] = "/tmp/qtk-ct2-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	static uint8_t w8[OUT * IN], u8[OUT * IN / 2], s8[OUT * IN / 16];
	static float sinv[1 * 1], s2 = 0.5f, sbad[2 * 1];
	for (int i = 0; i < OUT * IN; i++)
		w8[i] = (uint8_t)((i * 37) % 0x7E); /* no NaN codes */
	for (int i = 0; i < OUT * IN / 2; i++)
		u8[i] = (uint8_t)(i * 11);
	for (int i = 0; i < OUT * IN / 16; i++)
		s8[i] = 0x38; /* 1.0 */
	sinv[0] = 0.25f;
	const char *ds = "{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"weight_block_size\":[64,64]}";
	stt fp8[3] = {{"model.layers.0.mlp.down_proj.weight", "F8_E4M3", 2, {OUT, IN}, w8, sizeof w8},
		      {"model.layers.0.mlp.down_proj.weight_scale_inv", "F32", 2, {1, 1}, sinv, sizeof sinv}};
	float y[OUT * IN];
	qtk_err err;
	write_ckpt(dir, ds, fp8, 2);
	qtk_model *m = qtk_open(dir, &err);
	const qtk_tensor *t = m ? qtk_tensor_find(m, "model.layers.0.mlp.down_proj.weight") : NULL;
	CHECK(t && t->layout.kind == QTK_LAYOUT_FP8 && !qtk_decode_tensor(m, t, y) && y[1] == 0.25f * 0.203125f, /* code 0x25: 1.625 * 2^-3 */
	      "ds fp8 decodes: %s", err.msg);
	qtk_close(m);
	/* statistics (qinspect --stats) read AWQ/GPTQ side data only from AWQ/GPTQ parts: an FP8
	 * or NVFP4 tensor's parts are not qweight, qzeros, scales (found by fuzzing: reads past
	 * the scale part) */
	qtk_tstats st;
	m = qtk_open(dir, &err);
	t = m ? qtk_tensor_find(m, "model.layers.0.mlp.down_proj.weight") : NULL;
	CHECK(t && !qtk_stats_compute(m, t, &st, NULL, NULL) && st.n == OUT * IN && !st.has_scales && !st.zero_levels &&
		      !st.code_bits,
	      "fp8 stats without AWQ/GPTQ side data");
	qtk_close(m);
	const char *mo = "{\"quant_method\":\"modelopt\",\"quant_algo\":\"NVFP4\",\"ignore\":[\"lm_head\"]}";
	stt nv[3] = {{"model.layers.0.mlp.down_proj.weight", "U8", 2, {OUT, IN / 2}, u8, sizeof u8},
		     {"model.layers.0.mlp.down_proj.weight_scale", "F8_E4M3", 2, {OUT, IN / 16}, s8, sizeof s8},
		     {"model.layers.0.mlp.down_proj.weight_scale_2", "F32", 0, {0, 0}, &s2, 4}};
	write_ckpt(dir, mo, nv, 3);
	m = qtk_open(dir, &err);
	t = m ? qtk_tensor_find(m, "model.layers.0.mlp.down_proj.weight") : NULL;
	/* byte 1 = 11: element 2 code 11 (-1.5), element 3 code 0 */
	CHECK(t && t->layout.kind == QTK_LAYOUT_NVFP4 && !qtk_decode_tensor(m, t, y) && y[2] == -0.75f && y[3] == 0.0f,
	      "modelopt nvfp4 decodes: %s", err.msg);
	CHECK(t && !qtk_stats_compute(m, t, &st, NULL, NULL) && st.n == OUT * IN && !st.zero_levels && !st.code_bits,
	      "nvfp4 stats without AWQ/GPTQ side data");
	qtk_close(m);
	struct {
		const char *what, *cfg, *needle;
		int which; /* 0 fp8, 1 nvfp4 */
		int patch;  /* 1 scale shape, 2 drop the scale, 3 scale dtype */
	} bad[] = {
		{"fp8 scale_inv shape", "{\"quant_method\":\"fp8\",\"weight_block_size\":[64,64]}", "shape", 0, 1},
		{"fp8 without scale_inv", "{\"quant_method\":\"fp8\",\"weight_block_size\":[64,64]}", "weight_scale_inv", 0, 2},
		/* per tensor (no weight_block_size) is weight_scale, not weight_scale_inv */
		{"fp8 per-tensor config on block scales", "{\"quant_method\":\"fp8\"}", "codes without '.weight_scale'", 0, 0},
		{"fp8 e5m2", "{\"quant_method\":\"fp8\",\"fmt\":\"e5m2\",\"weight_block_size\":[64,64]}", "fmt", 0, 0},
		{"modelopt FP8 config on NVFP4 tensors", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8\"}", "expected F32", 1, 0},
		{"modelopt unknown algorithm", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"W4A8_AWQ\"}", "quant_algo", 1, 0},
		{"modelopt excluded module", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"NVFP4\",\"ignore\":[\"*down_proj\"]}",
		 "excluded", 1, 0},
		{"modelopt scale dtype", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"NVFP4\"}", "type", 1, 3},
	};
	for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
		stt ts[3];
		memcpy(ts, bad[b].which ? nv : fp8, sizeof ts);
		int nt = bad[b].which ? 3 : 2;
		if (bad[b].patch == 1)
			ts[1].shape[0] = 2, ts[1].data = sbad, ts[1].n = sizeof sbad;
		if (bad[b].patch == 2)
			nt = 1;
		if (bad[b].patch == 3)
			ts[1].dtype = "U8";
		write_ckpt(dir, bad[b].cfg, ts, nt);
		int rc = try_open(dir, NULL, &err);
		char all[1200];
		snprintf(all, sizeof all, "%s %s", err.subject, err.msg);
		CHECK(rc == QTK_E_DATA && strstr(all, bad[b].needle), "%s: rc %d (%s)", bad[b].what, rc, all);
	}
	/* compressed-tensors mxfp4-pack-quantized: weight_packed U8 [out, in/2], weight_scale U8
	 * (E8M0) [out, in/32], no global scale */
	static uint8_t e8[OUT * IN / 32], e8bad[OUT * IN / 16];
	for (int i = 0; i < OUT * IN / 32; i++)
		e8[i] = (uint8_t)(125 + i % 4); /* 2^-2 .. 2^1 */
	char mxcfg[600];
	snprintf(mxcfg, sizeof mxcfg,
		 "{\"quant_method\":\"compressed-tensors\",\"format\":\"mxfp4-pack-quantized\",\"config_groups\":"
		 "{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":{\"num_bits\":4,\"type\":\"float\","
		 "\"symmetric\":true,\"strategy\":\"group\",\"group_size\":%d}}}}", 32);
	stt mx[2] = {{"model.layers.0.mlp.down_proj.weight_packed", "U8", 2, {OUT, IN / 2}, u8, sizeof u8},
		     {"model.layers.0.mlp.down_proj.weight_scale", "U8", 2, {OUT, IN / 32}, e8, sizeof e8}};
	write_ckpt(dir, mxcfg, mx, 2);
	m = qtk_open(dir, &err);
	t = m ? qtk_tensor_find(m, "model.layers.0.mlp.down_proj.weight") : NULL;
	/* byte 1 = 11: element 2 code 11 (-1.5), element 3 code 0; group 0 of row 0 has 2^(125-127);
	 * byte 4 = 44 = 0x2C: element 8 code 12 (-2), element 9 code 2 (1.0); byte 17 = 0xBB:
	 * element 34 code 11 in group 1 (2^-1) */
	CHECK(t && t->layout.kind == QTK_LAYOUT_MXFP4 && t->layout.scale_type == QTK_MXFP4_CT && t->nparts == 2 &&
		      !qtk_decode_tensor(m, t, y) && y[2] == -0.375f && y[3] == 0.0f && y[8] == -0.5f && y[9] == 0.25f &&
		      y[32] == 0.0f && y[34] == -0.75f,
	      "ct mxfp4 decodes: %s (%g %g %g %g %g)", err.msg, y[2], y[3], y[8], y[9], y[34]);
	qtk_close(m);
	struct {
		const char *what, *needle;
		int patch; /* 1 scale shape, 2 scale dtype, 3 packed shape, 4 group 16, 5 int type, 6 no scale */
	} mbad[] = {
		{"mxfp4 scale shape", "shape", 1}, {"mxfp4 scale dtype", "U8", 2}, {"mxfp4 packed shape", "shape", 3},
		{"mxfp4 group 16", "not a layout", 4}, {"mxfp4 int codes", "not a layout", 5},
		{"mxfp4 packed without scale", "scale", 6},
	};
	for (size_t b = 0; b < sizeof mbad / sizeof *mbad; b++) {
		stt ts[2];
		memcpy(ts, mx, sizeof ts);
		char cfg[600];
		snprintf(cfg, sizeof cfg, "%s", mxcfg);
		int nt = 2;
		if (mbad[b].patch == 1)
			ts[1].shape[1] = IN / 16, ts[1].data = e8bad, ts[1].n = sizeof e8bad;
		if (mbad[b].patch == 2)
			ts[1].dtype = "F8_E4M3";
		if (mbad[b].patch == 3)
			ts[0].shape[0] = OUT / 2, ts[0].shape[1] = IN;
		if (mbad[b].patch == 4)
			*strstr(cfg, "32}") = '1', *(strstr(cfg, "12}") + 1) = '6';
		if (mbad[b].patch == 5)
			memcpy(strstr(cfg, "\"float\""), "\"int\"  ", 7);
		if (mbad[b].patch == 6) {
			/* a packed part without its scale: the module is not folded and the parts are
			 * refused as packed without their config (qtk_scheme_unexplained) */
			nt = 1;
		}
		write_ckpt(dir, cfg, ts, nt);
		int rc = try_open(dir, NULL, &err);
		char all[1200];
		snprintf(all, sizeof all, "%s %s", err.subject, err.msg);
		CHECK(rc == QTK_E_DATA && strstr(all, mbad[b].needle), "%s: rc %d (%s)", mbad[b].what, rc, all);
	}
	char rm[1200];
	snprintf(rm, sizeof rm, "rm -rf %s", dir);
	CHECK(system(rm) == 0, "cleanup");
}

int main(void)
{
	side_formats();
	codec_in_memory();
	synthesized();
	const char *root = t_fixtures();
	if (root) {
		fixtures(root);
		exact_paths(root);
		writing(root);
	}
	else
		T_SKIP("fixtures (set QTK_FIXTURES)");
	return T_DONE();
}
