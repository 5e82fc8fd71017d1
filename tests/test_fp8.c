/* test_fp8.c - FP8 checkpoints: writing compressed-tensors float-quantized (qconvert --to
 * ct-fp8) byte for byte as llm-compressor does (fixtures hf/ct/ct-fp8-*), the encoder on every
 * E4M3 code and its ties, and the FP8 readers' hostile inputs (exit QTK_E_DATA) on checkpoints
 * written here. */
#include "internal.h"
#include "dequant.h"
#include "view/decode.h"
#include "json.h"
#include "scheme/scheme.h"
#include "t.h"
#include <math.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *qconvert(void)
{
	static char p[300];
	const char *b = getenv("QTK_BUILD");
	snprintf(p, sizeof p, "%s/../bin/qconvert", b && *b ? b : "build");
	return p;
}

static void sha_hex(const void *p, size_t n, char hex[65])
{
	unsigned char md[32];
	unsigned int len = 0;
	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long l = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = l >= 0 ? malloc((size_t)l + 1) : NULL;
	if (b && fread(b, 1, (size_t)l, f) != (size_t)l) {
		free(b);
		b = NULL;
	}
	if (b)
		b[l] = 0;
	fclose(f);
	return b;
}

static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The E4M3 value of a code (no NaN codes asked). */
static float e4m3_val(uint8_t c)
{
	int ex = (c >> 3) & 15, man = c & 7;
	float v = ex ? ldexpf(1.0f + (float)man / 8.0f, ex - 7) : ldexpf((float)man, -9);
	return c & 0x80 ? -v : v;
}

/* ---- the encoder, in memory --------------------------------------------------------------- */

static void encoder(void)
{
	enum { O = 2, I = 256 };
	qtk_layout l = {.kind = QTK_LAYOUT_FP8, .type = QTK_DT_F8_E4M3, .bits = 8, .sym = true,
			.strategy = QTK_SCHEME_PER_GROUP, .group_size = I, .scale_type = QTK_T_F32};
	qtk_tensor t = QTK_TENSOR_LOCAL;
	char why[300];
	qtk_tensor_clear(&t);
	CHECK(!qtk_scheme_describe(&t, &l, O, I, true, why, sizeof why), "describe fp8 channel: %s", why);
	uint8_t w[O * I], sc[O * 4];
	void *pp[2] = {w, sc};
	float x[O * I], y[O * I];
	/* row 0: every finite code (amax 448: scale 1); row 1: halfway between neighbours */
	for (int c = 0; c < 256; c++)
		x[c] = (c & 0x7F) == 0x7F ? 0.0f : e4m3_val((uint8_t)c);
	for (int c = 0; c < 128; c++) {
		uint8_t a = (uint8_t)(c < 0x7E ? c : 0x7D);
		x[I + 2 * c] = (e4m3_val(a) + e4m3_val((uint8_t)(a + 1))) / 2.0f; /* a tie */
		x[I + 2 * c + 1] = -x[I + 2 * c];
	}
	x[I + 255] = 448.0f; /* scale 1 for row 1 too */
	CHECK(!qtk_scheme_encode_rows(&t, x, 0, O, pp), "encode");
	int bad = 0;
	for (int c = 0; c < 256; c++) {
		uint8_t want = (c & 0x7F) == 0x7F || c == 0x80 ? 0 : (uint8_t)c; /* -0 gains the zero point's +0 */
		bad += w[c] != want;
	}
	CHECK(!bad, "every E4M3 code encodes to itself (%d differ)", bad);
	bad = 0;
	for (int c = 0; c < 127; c++) {
		uint8_t a = (uint8_t)(c < 0x7E ? c : 0x7D), even = (a & 1) ? (uint8_t)(a + 1) : a;
		bad += w[I + 2 * c] != even || w[I + 2 * c + 1] != (even | 0x80);
	}
	CHECK(!bad, "ties go to the even code (%d differ)", bad);
	CHECK(!qtk_scheme_decode_rows(&t, (const void *const *)pp, 0, 1, y) && !memcmp(x + 1, y + 1, 126 * 4),
	      "codes decode to the values written");
	/* out of range clamps to 448; non-finite values are refused */
	x[5] = 1e6f;
	CHECK(!qtk_scheme_encode_rows(&t, x, 0, 1, pp) && w[5] == 0x7E, "clamped to 448: code %02x", w[5]);
	x[5] = NAN;
	CHECK(qtk_scheme_encode_rows(&t, x, 0, 1, pp) != 0, "NaN refused");
	/* block layout: only whole blocks of rows */
	qtk_layout lb = l;
	lb.strategy = QTK_SCHEME_PER_BLOCK;
	lb.group_size = 128;
	qtk_tensor tb = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&tb);
	CHECK(!qtk_scheme_describe(&tb, &lb, 256, I, true, why, sizeof why) && tb.parts[1].shape[0] == 2 &&
		      tb.parts[1].shape[1] == 2,
	      "describe fp8 block: %s", why);
	float *bx = calloc(256 * I, sizeof *bx);
	uint8_t *bw = malloc(256 * I), bs[16];
	void *bp[2] = {bw, bs};
	CHECK(qtk_scheme_encode_rows(&tb, bx, 64, 64, bp) != 0, "a block split across slices is refused");
	CHECK(!qtk_scheme_encode_rows(&tb, bx, 0, 256, bp), "whole blocks encode");
	float s;
	memcpy(&s, bs, 4);
	CHECK(s == 0x1p-23f, "an all-zero block gets F32's epsilon as its scale: %g", (double)s);
	free(bx);
	free(bw);
}

/* ---- readers: ModelOpt FP8 and per-tensor "fp8" checkpoints made here ------------------ */

typedef struct stt {
	const char *name, *dtype;
	int nd;
	uint64_t shape[4];
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

#define RO 128
#define RI 256
#define MOD "model.layers.0.mlp.down_proj."

/* Open dir: 0 and the module decoded into y (when y) with its strategy, else the error code. */
static int try_open(const char *dir, float *y, int *strategy, qtk_err *err)
{
	memset(err, 0, sizeof *err);
	qtk_model *m = qtk_open(dir, err);
	if (!m)
		return err->code ? err->code : -1;
	const qtk_tensor *t = qtk_tensor_find(m, MOD "weight");
	int rc = t && t->layout.kind == QTK_LAYOUT_FP8 && t->shape[0] == RO && t->shape[1] == RI ? 0 : -2;
	if (!rc && strategy)
		*strategy = t->layout.strategy;
	if (!rc && y)
		rc = qtk_decode_tensor(m, t, y);
	/* activation and kv cache scales stay plain tensors */
	if (!rc && (!qtk_tensor_find(m, MOD "input_scale") || !qtk_tensor_find(m, "model.layers.0.self_attn.k_proj.k_scale")))
		rc = -4;
	qtk_close(m);
	return rc;
}

static void readers(void)
{
	char dir[] = "/tmp/qtk-fp8r-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	static uint8_t w[RO * RI];
	static float y[RO * RI], chan[RO + 1], blk4[2], one = 0.5f, in_s = 0.02f, kv = 1.0f, bad1;
	for (int i = 0; i < RO * RI; i++)
		w[i] = (uint8_t)((i * 37) % 0x7E | (i & 0x80)); /* no NaN codes */
	for (int o = 0; o < RO + 1; o++)
		chan[o] = 0.001f * (float)(o + 1);
	blk4[0] = 0.25f, blk4[1] = 0.75f;
	stt base[4] = {{MOD "weight", "F8_E4M3", 2, {RO, RI}, w, sizeof w},
		       {MOD "weight_scale", "F32", 0, {0}, &one, 4},
		       {MOD "input_scale", "F32", 0, {0}, &in_s, 4},
		       {"model.layers.0.self_attn.k_proj.k_scale", "F32", 0, {0}, &kv, 4}};
	static const struct {
		const char *what, *cfg;
		int scale; /* 0 scalar, 1 per channel [out], 2 per channel [out, 1], 3 block [1, 1, 2, 1], 4 block [1, 2] */
		int strategy;
	} good[] = {
		{"modelopt FP8 per tensor", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8\",\"kv_cache_scheme\":{\"num_bits\":8,\"type\":\"float\"},\"ignore\":[\"lm_head\"]}", 0, QTK_SCHEME_PER_TENSOR},
		{"modelopt FP8 per channel [out]", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8_PER_CHANNEL_PER_TOKEN\"}", 1, QTK_SCHEME_PER_GROUP},
		{"modelopt FP8 per channel [out, 1]", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8_PER_CHANNEL_PER_TOKEN\"}", 2, QTK_SCHEME_PER_GROUP},
		{"modelopt FP8_PB_WO 4-D scale", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"fp8_pb_wo\"}", 3, QTK_SCHEME_PER_BLOCK},
		{"modelopt FP8_PB_WO 2-D scale", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8_PB_WO\"}", 4, QTK_SCHEME_PER_BLOCK},
		{"fp8 per tensor, static activations", "{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\"}", 0, QTK_SCHEME_PER_TENSOR},
	};
	for (size_t g = 0; g < sizeof good / sizeof *good; g++) {
		stt ts[4];
		memcpy(ts, base, sizeof ts);
		if (good[g].scale == 1 || good[g].scale == 2)
			ts[1] = (stt){MOD "weight_scale", "F32", good[g].scale, {RO, 1}, chan, RO * 4};
		if (good[g].scale == 3)
			ts[1] = (stt){MOD "weight_scale", "F32", 4, {1, 1, 2, 1}, blk4, 8};
		if (good[g].scale == 4)
			ts[1] = (stt){MOD "weight_scale", "F32", 2, {1, 2}, blk4, 8};
		write_ckpt(dir, good[g].cfg, ts, 4);
		qtk_err err;
		int st = -1, bad = 0;
		int rc = try_open(dir, y, &st, &err);
		for (int o = 0; !rc && o < RO; o++)
			for (int i = 0; i < RI; i++) {
				float s = good[g].scale == 0 ? one : good[g].scale <= 2 ? chan[o] : blk4[i / 128];
				bad += y[o * RI + i] != e4m3_val(w[o * RI + i]) * s;
			}
		CHECK(rc == 0 && st == good[g].strategy && !bad, "%s decodes: rc %d strategy %d, %d values differ (%s)",
		      good[g].what, rc, st, bad, err.msg);
	}
	/* kept into a directory (compressed-tensors float-quantized, per tensor) and read back */
	{
		write_ckpt(dir, good[0].cfg, base, 4);
		char out[1200], cmd[3000];
		snprintf(out, sizeof out, "%s/kept/", dir);
		snprintf(cmd, sizeof cmd, "%s %s %s --exact -q", qconvert(), dir, out);
		qtk_err err;
		static float y2[RO * RI];
		int rc = run(cmd) == 0 ? try_open(out, y2, NULL, &err) : -9;
		CHECK(rc == 0 && !memcmp(y, y2, 0) && !try_open(dir, y, NULL, &err) && !memcmp(y, y2, sizeof y),
		      "modelopt FP8 kept as compressed-tensors reads back the same values: %d", rc);
		snprintf(cmd, sizeof cmd, "%s %s %s/fp8.safetensors --to ct-fp8 -q", qconvert(), dir, dir);
		CHECK(run(cmd) == 0, "modelopt FP8 -> ct-fp8 per channel");
	}
	/* hostile: each refused as bad data, the message naming the problem */
	float nanv = NAN, infv = INFINITY, neg = -0.5f;
	static const char *const mo = "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8\"}";
	static const char *const pc = "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8_PER_CHANNEL_PER_TOKEN\"}";
	static const char *const pb = "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8_PB_WO\"}";
	struct {
		const char *what, *cfg, *needle;
		int patch; /* 1 F16 scale, 2 scale [2], 3 [out+1], 4 NaN, 5 inf, 6 negative, 7 block [1,1,1,1], 8 no scale,
			    * 9 scale [out, 4] under a per-tensor config, 10 scale_inv instead of scale */
	} bad[] = {
		{"scale of the wrong dtype", mo, "expected F32", 1},
		{"per-tensor scale of two values", mo, "not one value", 2},
		{"per-channel scale one too long", pc, "one value per output feature", 3},
		{"NaN scale", mo, "finite", 4},
		{"infinite scale", mo, "finite", 5},
		{"negative scale", mo, "not negative", 6},
		{"block scale of too few blocks", pb, "weight_scale", 7},
		{"codes without a scale", mo, "codes without", 8},
		{"config says per tensor, scale is per block", mo, "not one value", 9},
		{"modelopt module excluded but quantized", "{\"quant_method\":\"modelopt\",\"quant_algo\":\"FP8\",\"ignore\":[\"*down_proj\"]}", "excluded", 0},
		{"fp8 block size zero", "{\"quant_method\":\"fp8\",\"weight_block_size\":[0,0]}", "weight_block_size", 10},
		{"fp8 block size not dividing", "{\"quant_method\":\"fp8\",\"weight_block_size\":[96,96]}", "multiple of the block", 10},
		{"fp8 block size not square", "{\"quant_method\":\"fp8\",\"weight_block_size\":[128,64]}", "square", 10},
		{"fp8 unknown activation scheme", "{\"quant_method\":\"fp8\",\"activation_scheme\":\"smooth\"}", "activation_scheme", 0},
		{"fp8 per-tensor config on scale_inv", "{\"quant_method\":\"fp8\"}", "codes without", 10},
		{"fp8 per-tensor scale NaN", "{\"quant_method\":\"fp8\"}", "finite", 4},
	};
	uint16_t h = 0x3800;
	for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
		stt ts[4];
		memcpy(ts, base, sizeof ts);
		int p = bad[b].patch;
		if (p == 1)
			ts[1].dtype = "F16", ts[1].data = &h, ts[1].n = 2;
		if (p == 2)
			ts[1] = (stt){MOD "weight_scale", "F32", 1, {2}, blk4, 8};
		if (p == 3)
			ts[1] = (stt){MOD "weight_scale", "F32", 1, {RO + 1}, chan, (RO + 1) * 4};
		if (p == 4)
			ts[1].data = &nanv;
		if (p == 5)
			ts[1].data = &infv;
		if (p == 6)
			ts[1].data = &neg;
		if (p == 7)
			ts[1] = (stt){MOD "weight_scale", "F32", 4, {1, 1, 1, 1}, blk4, 4};
		if (p == 8)
			ts[1] = (stt){MOD "weight_zz", "F32", 0, {0}, &one, 4};
		if (p == 9)
			ts[1] = (stt){MOD "weight_scale", "F32", 2, {1, 2}, blk4, 8};
		if (p == 10)
			ts[1] = (stt){MOD "weight_scale_inv", "F32", 2, {1, 2}, blk4, 8};
		(void)bad1;
		write_ckpt(dir, bad[b].cfg, ts, 4);
		qtk_err err;
		int rc = try_open(dir, NULL, NULL, &err);
		char all[1200];
		snprintf(all, sizeof all, "%s %s", err.subject, err.msg);
		CHECK(rc == QTK_E_DATA && strstr(all, bad[b].needle), "%s: rc %d (%s)", bad[b].what, rc, all);
	}
	/* the CLI: exit 3 on the last one (a NaN scale), nothing written */
	char out[1200], cmd[3000];
	snprintf(out, sizeof out, "%s/out/", dir);
	snprintf(cmd, sizeof cmd, "%s %s %s --to ct-fp8 2>/dev/null", qconvert(), dir, out);
	CHECK(run(cmd) == 3 && access(out, F_OK) != 0, "qconvert exits 3 on a NaN scale, nothing written");
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "cleanup");
}

/* ---- writing, against the fixtures ------------------------------------------------------ */

/* Every tensor of fixture dir b is in a with the same layout and the same bytes in every part
 * (the FP8 layers folded: weight and weight_scale; plain tensors too when floats_too). */
static int same_tensors(const char *a, const char *b, const char *what, bool floats_too)
{
	qtk_err e1 = {0}, e2 = {0};
	qtk_model *ma = qtk_open(a, &e1), *mb = qtk_open(b, &e2);
	CHECK(ma && mb, "%s: both open: %s %s", what, e1.msg, e2.msg);
	int n = 0, bad = 0;
	for (size_t i = 0; ma && mb && i < mb->ntensors; i++) {
		const qtk_tensor *u = &mb->tensors[i], *t = qtk_tensor_find(ma, u->name);
		if (!floats_too && u->layout.kind == QTK_LAYOUT_PLAIN)
			continue;
		n++;
		bool same = t && t->nparts == u->nparts && t->layout.kind == u->layout.kind;
		for (int k = 0; same && k < u->nparts; k++) {
			uint8_t *x = NULL, *y = NULL;
			same = t->parts[k].type == u->parts[k].type && t->parts[k].nbytes == u->parts[k].nbytes &&
			       !qtk_read_part_alloc(ma, t, k, &x) && !qtk_read_part_alloc(mb, u, k, &y) &&
			       !memcmp(x, y, (size_t)u->parts[k].nbytes);
			qtk_free(x);
			qtk_free(y);
		}
		bad += !same;
		CHECK(same, "%s: %s the same bytes", what, u->name);
	}
	CHECK(n > 0 && !bad, "%s: %d tensors byte-identical, %d differ", what, n - bad, bad);
	printf("%s: %d/%d tensors byte-identical\n", what, n - bad, n);
	qtk_close(ma);
	qtk_close(mb);
	return n - bad;
}

/* config.json's quantization_config of a and b are the same JSON value. */
static void same_qcfg(const char *a, const char *b, const char *what)
{
	char pa[1200], pb[1200];
	snprintf(pa, sizeof pa, "%s/config.json", a);
	snprintf(pb, sizeof pb, "%s/config.json", b);
	char *ta = slurp(pa), *tb = slurp(pb);
	cJSON *ja = ta ? cJSON_Parse(ta) : NULL, *jb = tb ? cJSON_Parse(tb) : NULL;
	const cJSON *qa = cJSON_GetObjectItemCaseSensitive(ja, "quantization_config"),
		    *qb = cJSON_GetObjectItemCaseSensitive(jb, "quantization_config");
	CHECK(qa && qb && cJSON_Compare(qa, qb, true), "%s: quantization_config identical", what);
	/* and in the same key order (compressed-tensors sorts them) */
	char *sa = qa ? cJSON_PrintUnformatted(qa) : NULL, *sb = qb ? cJSON_PrintUnformatted(qb) : NULL;
	CHECK(sa && sb && !strcmp(sa, sb), "%s: quantization_config in the same order", what);
	cJSON_free(sa), cJSON_free(sb);
	cJSON_Delete(ja), cJSON_Delete(jb);
	free(ta), free(tb);
}

/* The folded FP8 tensors of dir against ref/<v>.digest.tsv (decoded values, SHA-256). */
static void digests(const char *dir, const char *root, const char *v)
{
	char tsv[1200];
	snprintf(tsv, sizeof tsv, "%s/hf/ct/ref/%s.digest.tsv", root, v);
	qtk_err err = {0};
	qtk_model *m = qtk_open(dir, &err);
	char *txt = slurp(tsv);
	CHECK(m && txt, "%s opens: %s", dir, err.msg);
	int rows = 0, good = 0;
	char *save = NULL;
	for (char *line = txt ? strtok_r(txt, "\n", &save) : NULL; m && line; line = strtok_r(NULL, "\n", &save)) {
		char name[300] = "", hex[80] = "";
		char *tab = strchr(line, '\t');
		if (!tab || !strncmp(line, "name", 4) || (size_t)(tab - line) > 250)
			continue;
		snprintf(name, sizeof name, "%.*s.weight", (int)(tab - line), line);
		char *last = strrchr(line, '\t');
		/* columns: name, n, sha, sum, sumsq, maxabs: the sha is the third */
		char *c2 = strchr(tab + 1, '\t');
		if (!c2 || !last)
			continue;
		snprintf(hex, sizeof hex, "%.64s", c2 + 1);
		rows++;
		const qtk_tensor *t = qtk_tensor_find(m, name);
		char got[65] = "";
		if (t && t->layout.kind == QTK_LAYOUT_FP8) {
			float *y = malloc((size_t)t->n_params * sizeof *y);
			if (y && !qtk_decode_tensor(m, t, y))
				sha_hex(y, (size_t)t->n_params * sizeof *y, got);
			free(y);
		}
		good += !strcmp(got, hex);
	}
	CHECK(rows > 0 && good == rows, "%s read back: %d/%d reference digests", v, good, rows);
	printf("%s read back: %d/%d reference digests\n", v, good, rows);
	free(txt);
	qtk_close(m);
}

static void writing(const char *root)
{
	char tmp[] = "/tmp/qtk-fp8w-XXXXXX";
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp");
		return;
	}
	char cmd[8192], fx[1024], out[1200], gg[1200];
	static const struct {
		const char *v, *opts;
	} req[] = {{"ct-fp8-channel", ""}, {"ct-fp8-block", "--strategy block"}};
	snprintf(gg, sizeof gg, "%s/f16.gguf", tmp);
	snprintf(cmd, sizeof cmd, "%s %s/hf/tiny-llama/fp16 %s --to f16 -q", qconvert(), root, gg);
	CHECK(run(cmd) == 0, "%s", cmd);
	for (size_t i = 0; i < sizeof req / sizeof *req; i++) {
		snprintf(fx, sizeof fx, "%s/hf/ct/%s", root, req[i].v);
		/* from the F16 checkpoint: every tensor as llm-compressor wrote it, the same config */
		snprintf(out, sizeof out, "%s/%s/", tmp, req[i].v);
		snprintf(cmd, sizeof cmd, "%s %s/hf/tiny-llama/fp16 %s --to ct-fp8 %s -q --threads 2", qconvert(), root, out,
			 req[i].opts);
		CHECK(run(cmd) == 0, "%s", cmd);
		same_tensors(out, fx, req[i].v, true);
		same_qcfg(out, fx, req[i].v);
		digests(out, root, req[i].v);
		/* from a GGUF (llama.cpp's Q/K row order undone): the same FP8 tensors (norms stay F32) */
		snprintf(out, sizeof out, "%s/%s-gguf/", tmp, req[i].v);
		snprintf(cmd, sizeof cmd, "%s %s %s --to ct-fp8 %s -q --threads 1", qconvert(), gg, out, req[i].opts);
		CHECK(run(cmd) == 0, "%s", cmd);
		char what[200];
		snprintf(what, sizeof what, "%s from GGUF", req[i].v);
		same_tensors(out, fx, what, false);
		same_qcfg(out, fx, what);
	}
	/* the fixture itself to ct-fp8 with its own strategy: a copy */
	snprintf(out, sizeof out, "%s/copy/", tmp);
	snprintf(cmd, sizeof cmd, "%s %s/hf/ct/ct-fp8-block %s --to ct-fp8 --strategy block --exact -q", qconvert(), root,
		 out);
	CHECK(run(cmd) == 0, "%s", cmd);
	snprintf(fx, sizeof fx, "%s/hf/ct/ct-fp8-block", root);
	same_tensors(out, fx, "ct-fp8-block copied", true);
	/* auto-exact keeps the FP8 layers in a directory (the same bytes); QPK, which has no FP8
	 * layout, gets floats instead */
	snprintf(out, sizeof out, "%s/ae/", tmp);
	snprintf(cmd, sizeof cmd, "%s %s/hf/ct/ct-fp8-channel %s --to auto-exact --exact -q", qconvert(), root, out);
	CHECK(run(cmd) == 0, "%s", cmd);
	snprintf(fx, sizeof fx, "%s/hf/ct/ct-fp8-channel", root);
	same_tensors(out, fx, "ct-fp8-channel auto-exact", true);
	snprintf(out, sizeof out, "%s/ae.qpk", tmp);
	snprintf(cmd, sizeof cmd, "%s %s/hf/ct/ct-fp8-channel %s --to auto-exact --exact -q", qconvert(), root, out);
	CHECK(run(cmd) == 0, "%s", cmd);
	/* GGUF has no FP8 type: refused before anything is written */
	snprintf(out, sizeof out, "%s/x.gguf", tmp);
	snprintf(cmd, sizeof cmd, "%s %s/hf/tiny-llama/fp16 %s --to ct-fp8 2>/dev/null", qconvert(), root, out);
	CHECK(run(cmd) == 2 && access(out, F_OK) != 0, "ct-fp8 into GGUF: usage error, nothing written");
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	CHECK(system(cmd) == 0, "cleanup");
}

int main(void)
{
	encoder();
	readers();
	const char *root = t_fixtures();
	if (root)
		writing(root);
	else
		T_SKIP("fixtures (set QTK_FIXTURES)");
	return T_DONE();
}
