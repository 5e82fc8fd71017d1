/* test_mlx.c - MLX affine quantization: the fixtures' reference digests (qtk's F32 decoder and
 * MLX's own F16 arithmetic), the quantizer against the fixtures' packed bytes, write -> read
 * round trips, and hostile inputs (without fixtures: tensors made in memory). */
#include "internal.h"
#include "dequant.h"
#include "quant.h"
#include "json.h"
#include "qpk_int.h"
#include "scheme/fold.h"
#include "scheme/qgroups.h"
#include "scheme/mlx.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "t.h"
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)len + 1);
	if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	if (b)
		b[len] = 0;
	fclose(f);
	if (n)
		*n = (size_t)len;
	return b;
}

static void hex_of(const float *y, uint64_t n, char hex[65])
{
	uint8_t d[32];
	hex[0] = 0;
	if (!qtk_qpk_sha256(y, (size_t)n * 4, NULL, 0, d))
		qtk_hex(d, 32, hex);
}

/* Every row of ref/<variant>[.f32].digest.tsv against the decoded tensor <name>.weight:
 * half_math selects MLX's F16 arithmetic (read through qtk_mlx_decode), else qtk's decoder. */
static void check_variant(const char *root, const char *variant, bool half_math)
{
	char dir[1024], tsv[1100];
	snprintf(dir, sizeof dir, "%s/hf/more/%s", root, variant);
	snprintf(tsv, sizeof tsv, "%s/hf/more/ref/%s%s.digest.tsv", root, variant, half_math ? "" : ".f32");
	char *txt = slurp(tsv, NULL);
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *m = qtk_open(dir, &e);
	CHECK(txt && m, "%s: open (%s)", variant, e.msg);
	unsigned rows = 0, good = 0;
	for (char *line = txt ? strtok(txt, "\n") : NULL; m && line; line = strtok(NULL, "\n")) {
		char name[256], want[65];
		unsigned long long n;
		if (sscanf(line, "%200s %llu %64s", name, &n, want) != 3 || !strcmp(name, "name"))
			continue;
		rows++;
		strcat(name, ".weight");
		const qtk_tensor *t = qtk_tensor_find(m, name);
		if (!t || t->layout.kind != QTK_LAYOUT_MLX || t->n_params != n) {
			printf("  %s: %s missing or not mlx\n", variant, name);
			continue;
		}
		float *y = malloc((size_t)n * 4);
		int rc = -1;
		if (!half_math) {
			rc = y ? qtk_decode_tensor(m, t, y) : -1;
		} else {
			uint8_t *p[3] = {NULL, NULL, NULL};
			rc = 0;
			for (int k = 0; k < 3 && !rc; k++)
				rc = qtk_read_part_alloc(m, t, k, &p[k]);
			if (!rc && y)
				rc = qtk_mlx_decode((const uint32_t *)p[0], p[1], p[2], t->parts[1].type, (uint32_t)t->shape[0],
						    (uint32_t)t->shape[1], t->layout.group_size, t->layout.bits, true, 0,
						    (uint32_t)t->shape[0], y);
			for (int k = 0; k < 3; k++)
				qtk_free(p[k]);
		}
		char hex[65] = "";
		if (!rc)
			hex_of(y, n, hex);
		if (!strcmp(hex, want))
			good++;
		else
			printf("  %s%s: %s sha256 %s, want %s\n", variant, half_math ? "" : " (f32)", name, hex, want);
		free(y);
	}
	CHECK(rows > 0 && good == rows, "%s%s: %u/%u reference digests", variant, half_math ? "" : " (f32)", good, rows);
	printf("  %s%s: %u/%u reference digests match\n", variant, half_math ? " (F16 arithmetic)" : " (F32)", good,
	       rows);
	qtk_close(m);
	free(txt);
}

/* The quantizer on the source F16 weights gives the fixture's packed bytes. */
static void check_quantizer(const char *root, const char *variant)
{
	char dir[1024], src[1024];
	snprintf(dir, sizeof dir, "%s/hf/more/%s", root, variant);
	snprintf(src, sizeof src, "%s/hf/tiny-llama/fp16", root);
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *m = qtk_open(dir, &e), *s = qtk_open(src, &e);
	if (!s) {
		T_SKIP("hf/tiny-llama/fp16 absent: quantizer not compared");
		qtk_close(m);
		return;
	}
	unsigned n = 0, same = 0;
	for (size_t i = 0; m && i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		const qtk_tensor *st = qtk_tensor_find(s, t->name);
		if (t->layout.kind != QTK_LAYOUT_MLX || !st || st->n_params != t->n_params)
			continue;
		n++;
		float *x = malloc((size_t)st->n_params * 4);
		uint8_t *p[3] = {NULL, NULL, NULL}, *q[3] = {NULL, NULL, NULL};
		bool ok = x && !qtk_decode_tensor(s, st, x);
		for (int k = 0; k < 3 && ok; k++)
			ok = !qtk_read_part_alloc(m, t, k, &p[k]) && (q[k] = calloc(1, (size_t)t->parts[k].nbytes)) != NULL;
		ok = ok && !qtk_scheme_encode_rows(t, x, 0, t->shape[0], (void *const *)q);
		for (int k = 0; k < 3 && ok; k++)
			ok = !memcmp(p[k], q[k], (size_t)t->parts[k].nbytes);
		same += ok;
		for (int k = 0; k < 3; k++) {
			qtk_free(p[k]);
			free(q[k]);
		}
		free(x);
	}
	CHECK(n > 0 && same == n, "%s: quantizer reproduces %u/%u packed tensors byte for byte", variant, same, n);
	printf("  %s: quantizer reproduces %u/%u packed tensors\n", variant, same, n);
	qtk_close(m);
	qtk_close(s);
}

static void test_fixture_paths(const char *root);

static void test_fixtures(void)
{
	const char *root = t_fixtures();
	char probe[1024];
	struct stat sb;
	if (root)
		snprintf(probe, sizeof probe, "%s/hf/more/ref", root);
	if (!root || stat(probe, &sb)) {
		T_SKIP("fixtures hf/more absent");
		return;
	}
	static const char *const v[] = {"mlx-4bit-g64", "mlx-8bit-g64", "mlx-3bit-g32", "mlx-4bit-g32"};
	for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
		check_variant(root, v[i], false);
		check_variant(root, v[i], true);
		check_quantizer(root, v[i]);
	}
	test_fixture_paths(root);
}

/* ---- without fixtures ------------------------------------------------------------------ */

static uint32_t rng = 12345;
static float frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return ((float)(rng >> 8) / 16777216.0f - 0.5f) * 0.2f;
}

/* A described MLX tensor of [out, in] with its parts quantized from random values. */
static int make_mlx(qtk_tensor *t, uint8_t *p[3], uint32_t out, uint32_t in, unsigned bits, uint32_t group)
{
	char why[200];
	qtk_tensor_clear(t);
	qtk_layout l = {.kind = QTK_LAYOUT_MLX, .type = QTK_DT_U32, .bits = (uint8_t)bits, .group_size = group};
	if (qtk_scheme_describe(t, &l, out, in, false, why, sizeof why))
		return -1;
	float *x = malloc((size_t)out * in * 4);
	rng = 777;
	for (uint64_t i = 0; x && i < (uint64_t)out * in; i++)
		x[i] = frand();
	for (int k = 0; k < 3; k++)
		p[k] = calloc(1, (size_t)t->parts[k].nbytes + 4);
	int rc = x && p[0] && p[1] && p[2] ? qtk_scheme_encode_rows(t, x, 0, out, (void *const *)p) : -1;
	free(x);
	return rc;
}

/* Encode -> decode -> encode gives the same bytes (the decoded values are fixed points), for
 * every width; and row slices decode like the whole. */
static void test_roundtrip(void)
{
	static const unsigned bits[] = {2, 3, 4, 5, 6, 8};
	static const uint32_t groups[] = {32, 64, 128};
	for (size_t b = 0; b < 6; b++)
		for (size_t gi = 0; gi < 3; gi++) {
			qtk_tensor t = QTK_TENSOR_LOCAL;
			uint8_t *p[3] = {NULL, NULL, NULL}, *q[3] = {NULL, NULL, NULL};
			uint32_t out = 12, in = 256;
			int rc = make_mlx(&t, p, out, in, bits[b], groups[gi]);
			float *y = malloc((size_t)out * in * 4), *y2 = malloc((size_t)out * in * 4);
			rc = rc || !y || !y2 ? -1 : qtk_scheme_decode_rows(&t, (const void *const *)p, 0, out, y);
			for (uint32_t o = 0; !rc && o < out; o += 5)
				rc = qtk_scheme_decode_rows(&t, (const void *const *)p, o, out - o < 5 ? out - o : 5,
							    y2 + (uint64_t)o * in);
			CHECK(!rc && !memcmp(y, y2, (size_t)out * in * 4), "%u-bit g%u: slices decode like the whole", bits[b],
			      groups[gi]);
			/* every value within one step of 0.2 / (2^bits - 1) (|x| < 0.1; the edge snap widens steps) */
			rng = 777;
			float worst = 0, step = 0.2f / (float)((1u << bits[b]) - 1u);
			for (uint64_t i = 0; !rc && i < (uint64_t)out * in; i++) {
				float d = fabsf(y[i] - frand());
				worst = d > worst ? d : worst;
			}
			CHECK(!rc && worst <= step, "%u-bit g%u: decode error %g within one step %g", bits[b],
			      groups[gi], (double)worst, (double)step);
			for (int k = 0; k < 3; k++) {
				free(p[k]);
				free(q[k]);
			}
			free(y);
			free(y2);
		}
}

/* MLX 4-bit (group 64) -> q4_1 and 3-bit -> q4_1 decode bit-identically; 8-bit -> q8_0 is
 * refused unless the biases are -z * scale, and then exact. */
static void test_transcodes(void)
{
	static const unsigned bits[] = {2, 3, 4};
	for (size_t b = 0; b < 3; b++) {
		qtk_tensor t = QTK_TENSOR_LOCAL;
		uint8_t *p[3] = {NULL, NULL, NULL};
		uint32_t out = 8, in = 128;
		int rc = make_mlx(&t, p, out, in, bits[b], 64);
		qgroups g;
		memset(&g, 0, sizeof g);
		uint8_t *blk = malloc((size_t)out * in / 32 * 34);
		float *a = malloc((size_t)out * in * 4), *c = malloc((size_t)out * in * 4);
		rc = rc ? rc : qtk_scheme_to_groups(&t, (const void *const *)p, &g);
		rc = rc ? rc : qg_to_ggml(&g, QTK_T_Q4_1, 0, out, blk);
		rc = rc ? rc : qtk_scheme_decode_rows(&t, (const void *const *)p, 0, out, a);
		rc = rc ? rc : qtk_dequant_ggml(QTK_T_Q4_1, blk, c, (uint64_t)out * in);
		CHECK(!rc && !memcmp(a, c, (size_t)out * in * 4), "mlx %u-bit g64 -> q4_1 bit-identical", bits[b]);
		CHECK(qtk_scheme_exact_ggml(QTK_LAYOUT_MLX, bits[b], false, 64, in) == QTK_T_Q4_1, "q4_1 listed");
		CHECK(qg_to_ggml(&g, QTK_T_Q8_0, 0, out, blk) == -1 || bits[b] < 8, "free biases refuse q8_0");
		qg_free(&g);
		free(blk);
		free(a);
		free(c);
		for (int k = 0; k < 3; k++)
			free(p[k]);
	}
	/* 8-bit whose biases are -128 * scale (what a q8_0 source gives): q8_0 exact */
	qtk_tensor t = QTK_TENSOR_LOCAL;
	uint8_t *p[3] = {NULL, NULL, NULL};
	uint32_t out = 4, in = 64;
	int rc = make_mlx(&t, p, out, in, 8, 32);
	for (uint64_t k = 0; k < (uint64_t)out * in / 32; k++) {
		float s = qtk_fp16_to_f32(qtk_rd16(p[1] + 2 * k));
		qtk_wr16(p[2] + 2 * k, qtk_f32_to_fp16(-128.0f * s));
	}
	qgroups g;
	memset(&g, 0, sizeof g);
	uint8_t *blk = malloc((size_t)out * in / 32 * 34);
	float *a = malloc((size_t)out * in * 4), *c = malloc((size_t)out * in * 4);
	rc = rc ? rc : qtk_scheme_to_groups(&t, (const void *const *)p, &g);
	rc = rc ? rc : qg_to_ggml(&g, QTK_T_Q8_0, 0, out, blk);
	rc = rc ? rc : qtk_scheme_decode_rows(&t, (const void *const *)p, 0, out, a);
	rc = rc ? rc : qtk_dequant_ggml(QTK_T_Q8_0, blk, c, (uint64_t)out * in);
	uint64_t diff = 0;
	for (uint64_t i = 0; !rc && i < (uint64_t)out * in; i++)
		diff += a[i] != c[i]; /* value equality: q = 128 gives +0 in MLX, -0 in q8_0 for d < 0 */
	CHECK(!rc && diff == 0, "mlx 8-bit with bias -128 s -> q8_0 (rc %d, %llu differ)", rc, (unsigned long long)diff);
	qg_free(&g);
	free(blk);
	free(a);
	free(c);
	for (int k = 0; k < 3; k++)
		free(p[k]);
}

/* A one-layer MLX directory written by the test: config + safetensors with the given header
 * (data zero-filled to its end offset). */
static int write_dir(char *dir, const char *config, const char *hdr, size_t data)
{
	strcpy(dir, "/tmp/qtk-mlx-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char p[256];
	snprintf(p, sizeof p, "%s/config.json", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs(config, f);
	fclose(f);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	f = fopen(p, "wb");
	if (!f)
		return -1;
	uint64_t n = strlen(hdr);
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(n >> (8 * i));
	fwrite(le, 1, 8, f);
	fwrite(hdr, 1, (size_t)n, f);
	for (size_t i = 0; i < data; i++)
		fputc(0, f);
	fclose(f);
	return 0;
}

static void rm_dir(const char *dir)
{
	char p[256];
	snprintf(p, sizeof p, "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	unlink(p);
	rmdir(dir);
}

#define CFG(b, g) "{\"model_type\":\"llama\",\"quantization\":{\"group_size\":" #g ",\"bits\":" #b "}}"
/* l.weight U32 [4, W], l.scales ST [4, S], l.biases ST [4, B] */
static void hostile(const char *what, const char *cfg, const char *wt, unsigned w, const char *st, unsigned s,
		    const char *bt, unsigned bcols, int want)
{
	char hdr[600], dir[64];
	size_t wb = 4ull * 4 * w, sb = 4ull * 2 * s, bb = 4ull * 2 * bcols;
	snprintf(hdr, sizeof hdr,
		 "{\"l.biases\":{\"dtype\":\"%s\",\"shape\":[4,%u],\"data_offsets\":[0,%zu]},"
		 "\"l.scales\":{\"dtype\":\"%s\",\"shape\":[4,%u],\"data_offsets\":[%zu,%zu]},"
		 "\"l.weight\":{\"dtype\":\"%s\",\"shape\":[4,%u],\"data_offsets\":[%zu,%zu]}}",
		 bt, bcols, bb, st, s, bb, bb + sb, wt, w, bb + sb, bb + sb + wb);
	if (write_dir(dir, cfg, hdr, bb + sb + wb)) {
		CHECK(0, "temporary directory");
		return;
	}
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *m = qtk_open(dir, &e);
	int code = m ? 0 : e.code;
	CHECK(code == want, "%s: code %d, want %d (%s)", what, code, want, e.msg);
	if (m && !want) {
		const qtk_tensor *t = qtk_tensor_find(m, "l.weight");
		CHECK(t && t->layout.kind == QTK_LAYOUT_MLX && t->n_params == 4ull * w * 32 / t->layout.bits, "%s: folded",
		      what);
	}
	qtk_close(m);
	rm_dir(dir);
}

static void test_hostile(void)
{
	/* 4-bit g32, in 64: weight [4, 8], scales/biases [4, 2] */
	hostile("valid", CFG(4, 32), "U32", 8, "F16", 2, "F16", 2, 0);
	hostile("bf16 scales", CFG(4, 32), "U32", 8, "BF16", 2, "BF16", 2, 0);
	hostile("scales do not match the weight", CFG(4, 32), "U32", 8, "F16", 3, "F16", 3, QTK_E_DATA);
	hostile("biases another shape", CFG(4, 32), "U32", 8, "F16", 2, "F16", 1, QTK_E_DATA);
	hostile("scales of an integer dtype", CFG(4, 32), "U32", 8, "I32", 1, "I32", 1, QTK_E_DATA);
	hostile("biases another dtype than scales", CFG(4, 32), "U32", 8, "F16", 2, "F32", 1, QTK_E_DATA);
	hostile("weight not U32", CFG(4, 32), "I32", 8, "F16", 2, "F16", 2, QTK_E_DATA);
	hostile("3-bit words that do not divide", CFG(3, 32), "U32", 7, "F16", 2, "F16", 2, QTK_E_DATA);
	hostile("group 48", CFG(4, 48), "U32", 6, "F16", 1, "F16", 1, QTK_E_DATA);
	hostile("7 bits", CFG(7, 32), "U32", 7, "F16", 1, "F16", 1, QTK_E_DATA);
	hostile("mode mxfp4", "{\"quantization\":{\"group_size\":32,\"bits\":4,\"mode\":\"mxfp4\"}}", "U32", 8,
		"F16", 2, "F16", 2, QTK_E_DATA);
	hostile("override bits 8 for l",
		"{\"quantization\":{\"group_size\":32,\"bits\":4,\"l\":{\"group_size\":32,\"bits\":8}}}", "U32", 8,
		"F16", 1, "F16", 1, 0); /* 8-bit: weight [4, 8] is in 32, one group */
	hostile("override group 64 that does not fit", "{\"quantization\":{\"group_size\":32,\"bits\":4,\"l\":{\"group_size\":64}}}",
		"U32", 8, "F16", 2, "F16", 2, QTK_E_DATA);
	hostile("override bits 9", "{\"quantization\":{\"group_size\":32,\"bits\":4,\"l\":{\"bits\":9}}}", "U32", 8,
		"F16", 2, "F16", 2, QTK_E_DATA);
}

/* ---- writing MLX (qconvert --to mlx) --------------------------------------------------- */

static int run(const char *cmd)
{
	int rc = system(cmd);
	return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* An F16 llama-like directory made here: embed [32, 128], q_proj [64, 128], down_proj [128, 192]
 * (192 inputs: groups of 32 and 64, not 128), a norm [128], lm_head [32, 128]. */
static const struct {
	const char *name;
	uint32_t out, in; /* in 0: a vector of `out` */
} synth[] = {
	{"lm_head.weight", 32, 128},
	{"model.embed_tokens.weight", 32, 128},
	{"model.layers.0.input_layernorm.weight", 128, 0},
	{"model.layers.0.mlp.down_proj.weight", 128, 192},
	{"model.layers.0.self_attn.q_proj.weight", 64, 128},
};
#define NSYNTH (sizeof synth / sizeof *synth)

static int make_f16_dir(const char *dir)
{
	char hdr[2048], p[512];
	size_t at = 0, off = 0;
	at += (size_t)snprintf(hdr + at, sizeof hdr - at, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (size_t i = 0; i < NSYNTH; i++) {
		size_t n = (size_t)synth[i].out * (synth[i].in ? synth[i].in : 1);
		if (synth[i].in)
			at += (size_t)snprintf(hdr + at, sizeof hdr - at,
					       ",\"%s\":{\"dtype\":\"F16\",\"shape\":[%u,%u],\"data_offsets\":[%zu,%zu]}",
					       synth[i].name, synth[i].out, synth[i].in, off, off + 2 * n);
		else
			at += (size_t)snprintf(hdr + at, sizeof hdr - at,
					       ",\"%s\":{\"dtype\":\"F16\",\"shape\":[%u],\"data_offsets\":[%zu,%zu]}",
					       synth[i].name, synth[i].out, off, off + 2 * n);
		off += 2 * n;
	}
	at += (size_t)snprintf(hdr + at, sizeof hdr - at, "}");
	if (mkdir(dir, 0755))
		return -1;
	snprintf(p, sizeof p, "%s/config.json", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs("{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"_name_or_path\": \"x\",\n"
	      "  \"rms_norm_eps\": 1e-06,\n  \"rope_theta\": 500000.0,\n  \"torch_dtype\": \"float16\",\n"
	      "  \"note\": \"caf\\u00e9 \\ud83d\\ude00\"\n}\n", f);
	fclose(f);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	if (!(f = fopen(p, "wb")))
		return -1;
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)at >> (8 * i));
	fwrite(le, 1, 8, f);
	fwrite(hdr, 1, at, f);
	rng = 4242;
	for (size_t i = 0; i < off / 2; i++) {
		uint16_t h = qtk_f32_to_fp16(frand() * 3.0f);
		fputc(h & 255, f);
		fputc(h >> 8, f);
	}
	fclose(f);
	return 0;
}

/* Each quantized tensor of the written directory holds exactly what MLX's quantizer makes of the
 * source's values (the parts byte for byte), decodes within one step of them, and reads back
 * the same through QPK; vectors and matrices whose inputs are no whole groups stay F16. */
static void check_written(const char *src, const char *out, unsigned bits, uint32_t group)
{
	qtk_err e;
	qtk_model *a = qtk_open(src, &e), *b = qtk_open(out, &e);
	CHECK(a && b, "%s: open (%s)", out, e.msg);
	unsigned quant = 0, same = 0, plain = 0;
	for (size_t i = 0; a && b && i < NSYNTH; i++) {
		const qtk_tensor *s = qtk_tensor_find(a, synth[i].name), *t = qtk_tensor_find(b, synth[i].name);
		if (!s || !t) {
			CHECK(0, "%s missing", synth[i].name);
			continue;
		}
		bool want = synth[i].in && synth[i].in % group == 0 && !strstr(synth[i].name, "norm");
		if (!want) {
			plain += t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == QTK_T_F16;
			continue;
		}
		if (t->layout.kind != QTK_LAYOUT_MLX || t->layout.bits != bits || t->layout.group_size != group) {
			CHECK(0, "%s: not mlx %u-bit g%u", synth[i].name, bits, group);
			continue;
		}
		quant++;
		uint32_t o = synth[i].out, in = synth[i].in;
		float *x = malloc((size_t)o * in * 4), *y = malloc((size_t)o * in * 4);
		uint8_t *p[3] = {NULL, NULL, NULL};
		uint32_t *w = calloc((size_t)o * in * bits / 32 + 1, 4);
		uint16_t *sc = calloc((size_t)o * in / group, 2), *bi = calloc((size_t)o * in / group, 2);
		int rc = x && y && w && sc && bi ? qtk_decode_tensor(a, s, x) : -1;
		rc = rc ? rc : qtk_mlx_quantize(x, o, in, group, bits, QTK_T_F16, w, sc, bi);
		for (int k = 0; k < 3 && !rc; k++)
			rc = qtk_read_part_alloc(b, t, k, &p[k]);
		if (!rc && !memcmp(p[0], w, (size_t)o * in * bits / 8) && !memcmp(p[1], sc, (size_t)o * in / group * 2) &&
		    !memcmp(p[2], bi, (size_t)o * in / group * 2))
			same++;
		float worst = 0, range = 0;
		rc = rc ? rc : qtk_decode_tensor(b, t, y);
		for (uint64_t k = 0; !rc && k < (uint64_t)o * in; k++) {
			worst = fmaxf(worst, fabsf(y[k] - x[k]));
			range = fmaxf(range, fabsf(x[k]));
		}
		CHECK(!rc && worst <= 2.0f * range / (float)((1u << bits) - 1u) * 1.01f, "%s %u-bit: error %g", synth[i].name,
		      bits, (double)worst);
		for (int k = 0; k < 3; k++)
			qtk_free(p[k]);
		free(x);
		free(y);
		free(w);
		free(sc);
		free(bi);
	}
	unsigned nq = group == 128 ? 3 : 4;
	CHECK(quant == nq && same == nq && plain == NSYNTH - nq, "%u-bit g%u: %u quantized (%u as MLX's quantizer), %u F16",
	      bits, group, quant, same, plain);
	qtk_close(a);
	qtk_close(b);
}

/* Every tensor of two models: the same layout and the same bytes in every part. */
static bool same_tensors(const char *p1, const char *p2)
{
	qtk_err e;
	qtk_model *a = qtk_open(p1, &e), *b = qtk_open(p2, &e);
	bool ok = a && b && a->ntensors == b->ntensors;
	for (size_t i = 0; ok && i < a->ntensors; i++) {
		const qtk_tensor *s = &a->tensors[i], *t = qtk_tensor_find(b, s->name);
		ok = t && t->layout.kind == s->layout.kind && t->nparts == s->nparts;
		for (int k = 0; ok && k < s->nparts; k++) {
			uint8_t *x = NULL, *y = NULL;
			ok = s->parts[k].nbytes == t->parts[k].nbytes && !qtk_read_part_alloc(a, s, k, &x) &&
			     !qtk_read_part_alloc(b, t, k, &y) && !memcmp(x, y, (size_t)s->parts[k].nbytes);
			qtk_free(x);
			qtk_free(y);
		}
	}
	qtk_close(a);
	qtk_close(b);
	return ok;
}

static void test_write(void)
{
	char tmp[] = "/tmp/qtk-mlxw-XXXXXX", src[128], out[128], cmd[2048], q[512], back[128];
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(src, sizeof src, "%s/src", tmp);
	CHECK(!make_f16_dir(src), "source directory");
	static const unsigned bits[] = {2, 3, 4, 5, 6, 8};
	for (size_t b = 0; b < 6; b++)
		for (uint32_t g = 32; g <= 128; g *= 2) {
			snprintf(out, sizeof out, "%s/o%u-%u/", tmp, bits[b], g);
			snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s --to mlx --bits %u --group-size %u", src, out, bits[b], g);
			CHECK(run(cmd) == 0, "%s", cmd);
			check_written(src, out, bits[b], g);
		}
	/* defaults: 4 bits, group 64 */
	snprintf(out, sizeof out, "%s/def/", tmp);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s --to mlx", src, out);
	CHECK(run(cmd) == 0, "%s", cmd);
	check_written(src, out, 4, 64);
	/* config.json: sorted keys, indent 4, Python's number and string forms, both objects */
	snprintf(q, sizeof q, "%s/config.json", out);
	char *cfg = slurp(q, NULL);
	CHECK(cfg && !strcmp(cfg, "{\n    \"architectures\": [\n        \"LlamaForCausalLM\"\n    ],\n"
				  "    \"model_type\": \"llama\",\n    \"note\": \"caf\\u00e9 \\ud83d\\ude00\",\n"
				  "    \"quantization\": {\n        \"group_size\": 64,\n        \"bits\": 4,\n"
				  "        \"mode\": \"affine\"\n    },\n    \"quantization_config\": {\n"
				  "        \"group_size\": 64,\n        \"bits\": 4,\n        \"mode\": \"affine\"\n    },\n"
				  "    \"rms_norm_eps\": 1e-06,\n    \"rope_theta\": 500000.0,\n"
				  "    \"torch_dtype\": \"float16\"\n}"),
	      "config.json as mlx-lm writes it:\n%s", cfg ? cfg : "(none)");
	free(cfg);
	snprintf(q, sizeof q, "%s/model.safetensors.index.json", out);
	char *idx = slurp(q, NULL);
	CHECK(idx && strstr(idx, "\"total_parameters\": 41088") && strstr(idx, "        \"lm_head.biases\": \"model.safetensors\""),
	      "index with the parameter count (%s)", idx ? idx : "none");
	free(idx);
	qtk_err e;
	snprintf(q, sizeof q, "%s/model.safetensors", out);
	qtk_model *m = qtk_open(q, &e);
	const qtk_kv *kv = m ? qtk_kv_find(m, "format") : NULL;
	CHECK(kv && kv->val.type == QTK_V_STR && !strncmp(kv->val.v.str.s, "mlx", 3), "metadata format mlx");
	qtk_close(m);
	/* a QPK in between changes nothing; the file says 1.1, one without MLX 1.0 */
	snprintf(q, sizeof q, "%s/m.qpk", tmp);
	snprintf(back, sizeof back, "%s/back/", tmp);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s && bin/qconvert -q %s %s", out, q, q, back);
	CHECK(run(cmd) == 0, "%s", cmd);
	CHECK(same_tensors(out, back) && same_tensors(out, q), "mlx dir -> qpk -> mlx dir: identical tensors");
	size_t n = 0;
	char *qb = slurp(q, &n);
	CHECK(qb && n > 12 && qb[8] == 1 && qb[10] == 1, "QPK with MLX tensors is version 1.1");
	free(qb);
	snprintf(q, sizeof q, "%s/f.qpk", tmp);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s", src, q);
	CHECK(run(cmd) == 0, "%s", cmd);
	qb = slurp(q, &n);
	CHECK(qb && n > 12 && qb[8] == 1 && qb[10] == 0, "QPK without MLX tensors stays 1.0");
	free(qb);
	/* usage: 7 bits do not exist */
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s/x/ --to mlx --bits 7 2>/dev/null", src, tmp);
	CHECK(run(cmd) == 2, "--bits 7 refused");
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	CHECK(run(cmd) == 0, "cleanup");
}

/* ---- ggml blocks -> MLX, in the library ------------------------------------------------- */

/* q4_1 (d, m) and q8_0 (d, -128 d) into MLX give bit-identical values; q4_0 (d, -8 d) equal
 * values, the sign of zero aside (q = 8 with d < 0: -0 in q4_0, +0 in MLX). */
static void test_reverse(void)
{
	static const unsigned types[] = {QTK_T_Q4_1, QTK_T_Q8_0, QTK_T_Q4_0};
	uint32_t out = 16, in = 128;
	for (size_t ti = 0; ti < 3; ti++) {
		unsigned ty = types[ti], bits = ty == QTK_T_Q8_0 ? 8 : 4;
		uint64_t nb = 0;
		qtk_type_nbytes(ty, (uint64_t)out * in, &nb);
		float *x = malloc((size_t)out * in * 4), *a = malloc((size_t)out * in * 4), *c = malloc((size_t)out * in * 4);
		uint8_t *blk = malloc((size_t)nb), *p[3] = {NULL, NULL, NULL};
		rng = 99;
		for (uint64_t i = 0; x && i < (uint64_t)out * in; i++)
			x[i] = frand();
		qgroups g;
		memset(&g, 0, sizeof g);
		qtk_tensor t = QTK_TENSOR_LOCAL;
		char why[200];
		qtk_tensor_clear(&t);
		qtk_layout l = {.kind = QTK_LAYOUT_MLX, .type = QTK_DT_U32, .bits = (uint8_t)bits, .group_size = 32};
		int rc = x && a && c && blk ? qtk_quant_ggml(ty, x, blk, out, in, NULL) : -1;
		rc = rc ? rc : ty == QTK_T_Q4_1 ? qg_from_q4_1_bias(blk, out, in, &g) : qg_from_ggml(ty, blk, out, in, &g);
		rc = rc ? rc : qtk_scheme_describe(&t, &l, out, in, false, why, sizeof why);
		for (int k = 0; k < 3 && !rc; k++)
			rc = (p[k] = calloc(1, (size_t)t.parts[k].nbytes)) ? 0 : -1;
		rc = rc ? rc : qtk_scheme_from_groups(&g, &t, false, (void *const *)p);
		rc = rc ? rc : qtk_scheme_decode_rows(&t, (const void *const *)p, 0, out, a);
		rc = rc ? rc : qtk_dequant_ggml(ty, blk, c, (uint64_t)out * in);
		/* a bit pattern may differ only as a zero whose sign differs, in a block of negative scale */
		uint64_t bitdiff = 0, other = 0, neg = 0;
		for (uint64_t i = 0; !rc && i < (uint64_t)out * in; i++) {
			bool d = memcmp(&a[i], &c[i], 4) != 0;
			bitdiff += d;
			other += d && !(a[i] == 0 && c[i] == 0 && qtk_fp16_to_f32(g.s[i / 32]) < 0);
		}
		for (uint64_t k = 0; !rc && k < (uint64_t)out * in / 32; k++)
			neg += qtk_fp16_to_f32(g.s[k]) < 0;
		if (ty != QTK_T_Q4_1)
			CHECK(!rc && other == 0, "%s -> mlx %u-bit g32: equal values, %llu zeros differ in sign (%llu negative scales)",
			      qtk_type(ty)->name, bits, (unsigned long long)bitdiff, (unsigned long long)neg);
		else
			CHECK(!rc && bitdiff == 0, "%s -> mlx %u-bit g32 bit-identical (rc %d, %llu differ)", qtk_type(ty)->name, bits,
			      rc, (unsigned long long)bitdiff);
		/* 4-bit codes also sit in an 8-bit MLX tensor; a group of 64 needs two equal blocks */
		if (ty == QTK_T_Q4_1) {
			qtk_layout l64 = {.kind = QTK_LAYOUT_MLX, .type = QTK_DT_U32, .bits = 4, .group_size = 64};
			qtk_tensor t64 = QTK_TENSOR_LOCAL;
			qtk_tensor_clear(&t64);
			uint8_t *p64[3] = {NULL, NULL, NULL};
			int r2 = qtk_scheme_describe(&t64, &l64, out, in, false, why, sizeof why);
			for (int k = 0; k < 3 && !r2; k++)
				r2 = (p64[k] = calloc(1, (size_t)t64.parts[k].nbytes)) ? 0 : -1;
			CHECK(!r2 && qtk_scheme_from_groups(&g, &t64, false, (void *const *)p64) == -1,
			      "q4_1 blocks with their own scales refuse MLX groups of 64");
			for (int k = 0; k < 3; k++)
				free(p64[k]);
		}
		qg_free(&g);
		for (int k = 0; k < 3; k++)
			free(p[k]);
		free(x);
		free(a);
		free(c);
		free(blk);
	}
}

/* ---- with fixtures: writing reproduces mlx-lm, and the exact paths end to end ---------- */

static void test_fixture_paths(const char *root)
{
	char tmp[] = "/tmp/qtk-mlxf-XXXXXX", cmd[4096], out[512], a[1024], b[1500];
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp");
		return;
	}
	static const struct { unsigned bits, group; } v[] = {{4, 64}, {8, 64}, {3, 32}, {4, 32}};
	for (size_t i = 0; i < 4; i++) {
		char fx[1024];
		snprintf(fx, sizeof fx, "%s/hf/more/mlx-%ubit-g%u", root, v[i].bits, v[i].group);
		snprintf(out, sizeof out, "%s/w%zu", tmp, i);
		snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/hf/tiny-llama/fp16/ %s/ --to mlx --bits %u --group-size %u", root,
			 out, v[i].bits, v[i].group);
		CHECK(run(cmd) == 0, "%s", cmd);
		CHECK(same_tensors(out, fx), "%s: every tensor byte for byte as mlx-lm wrote it", fx);
		static const char *const files[] = {"config.json", "model.safetensors.index.json", "tokenizer.model"};
		for (size_t f = 0; f < 3; f++) {
			size_t n1 = 0, n2 = 0;
			snprintf(a, sizeof a, "%s/%s", out, files[f]);
			snprintf(b, sizeof b, "%s/%s", fx, files[f]);
			char *x = slurp(a, &n1), *y = slurp(b, &n2);
			CHECK(x && y && n1 == n2 && !memcmp(x, y, n1), "%s: %s identical", fx, files[f]);
			free(x);
			free(y);
		}
		/* MLX -> q4_1 (2-, 3-, 4-bit) exact, proven by qconvert's decoding of both sides */
		if (v[i].bits <= 4) {
			snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/ %s/q41-%zu.gguf --to q4_1 --pure --exact", fx, tmp, i);
			CHECK(run(cmd) == 0, "%s", cmd);
			snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/ %s/ae-%zu.gguf --to auto-exact --exact", fx, tmp, i);
			CHECK(run(cmd) == 0, "%s", cmd);
		}
	}
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/hf/tiny-llama/fp16/ %s/x.gguf --to mlx 2>/dev/null", root, tmp);
	CHECK(run(cmd) == 2, "GGUF output refused (usage)");
	/* ggml -> MLX: q4_1 and q8_0 exact (the defaults follow the source: 4 or 8 bits, group 32);
	 * q4_0 only numerically (signs of zero), so --exact refuses it; each output read back
	 * decodes to the source's values (qverify --against) */
	static const char *const g[] = {"Q4_1", "Q8_0", "Q4_0"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(out, sizeof out, "%s/g%zu", tmp, i);
		snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/gguf/tiny-%s.gguf %s/ --to mlx --report %s.json", root, g[i], out,
			 out);
		CHECK(run(cmd) == 0, "%s", cmd);
		snprintf(a, sizeof a, "%s.json", out);
		char *rep = slurp(a, NULL);
		qtk_err e;
		qtk_json_doc d = {0};
		bool ok = rep && !qtk_json_parse(rep, strlen(rep), 0, "report", 0, &e, &d);
		unsigned n = 0, exact = 0, inf = 0;
		const cJSON *ts = ok ? cJSON_GetObjectItemCaseSensitive(d.root, "tensors") : NULL, *it;
		cJSON_ArrayForEach(it, ts)
		{
			const cJSON *to = cJSON_GetObjectItemCaseSensitive(it, "to"), *from = cJSON_GetObjectItemCaseSensitive(it, "from");
			if (!cJSON_IsString(to) || strncmp(to->valuestring, "mlx", 3) || !cJSON_IsString(from) ||
			    !strstr(from->valuestring, i == 0 ? "q4_1" : i == 1 ? "q8_0" : "q4_0"))
				continue;
			n++;
			exact += (unsigned)cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "exact"));
			inf += (unsigned)cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(it, "sqnr_db"));
		}
		if (i < 2)
			CHECK(n >= 14 && exact == n, "%s -> mlx: %u of %u exact", g[i], exact, n);
		else
			CHECK(n >= 14 && inf == n, "q4_0 -> mlx: %u of %u lossless (infinite SQNR), %u bit-exact", inf, n, exact);
		qtk_json_doc_free(&d);
		free(rep);
		snprintf(cmd, sizeof cmd, "bin/qverify -q --against %s/gguf/tiny-%s.gguf %s/ >/dev/null 2>&1", root, g[i], out);
		CHECK(run(cmd) == 0, "%s", cmd);
		snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/gguf/tiny-%s.gguf %s/x%zu/ --to mlx --exact 2>/dev/null", root, g[i],
			 tmp, i);
		/* tiny-Q4_1's and tiny-Q4_0's lm_head is q6_k; q4_0 also loses signs of zero; tiny-Q8_0 is
		 * q8_0 throughout with llama.cpp's positive scales: exact */
		CHECK(run(cmd) == (i == 1 ? 0 : 1), "%s", cmd);
	}
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	CHECK(run(cmd) == 0, "cleanup");
}

/* ---- QPK descriptions of MLX tensors --------------------------------------------------- */

static void test_qpk_hostile(void)
{
	char why[300];
	qtk_tensor t = QTK_TENSOR_LOCAL;
	qtk_layout l = {.kind = QTK_LAYOUT_MLX, .type = QTK_DT_U32, .bits = 3, .group_size = 32};
	CHECK(!qtk_scheme_describe(&t, &l, 8, 64, false, why, sizeof why) && !qtk_qpk_check_tensor(&t, why, sizeof why),
	      "valid 3-bit mlx description (%s)", why);
#define BAD(what, mutate)                                                                            \
	do {                                                                                         \
		qtk_tensor u = QTK_TENSOR_LOCAL; \
		qtk_tensor_copy(&u, &t); \
		mutate;                                                                              \
		CHECK(qtk_qpk_check_tensor(&u, why, sizeof why) == QTK_E_DATA, "qpk refuses %s", what); \
	} while (0)
	BAD("scales of type I32", (u.parts[1].type = QTK_T_I32, u.parts[1].nbytes = 8 * 2 * 4));
	BAD("biases F32 beside F16 scales", (u.parts[2].type = QTK_T_F32, u.parts[2].nbytes = 8 * 2 * 4));
	BAD("weight I32", (u.parts[0].type = QTK_T_I32));
	BAD("weight one word short", (u.parts[0].shape[1] = 5, u.parts[0].nbytes = 8 * 5 * 4));
	BAD("scales [8, 3]", (u.parts[1].shape[1] = 3, u.parts[1].nbytes = 8 * 3 * 2));
	BAD("7 bits", (u.layout.bits = 7));
	BAD("group 48", (u.layout.group_size = 48));
	BAD("group 0", (u.layout.group_size = 0));
	BAD("sym", (u.layout.sym = true));
	BAD("act_order", (u.layout.act_order = true));
	BAD("gptq version 1", (u.layout.gptq_version = 1));
	BAD("two parts", (u.nparts = 2));
	BAD("role 'qweight'", (snprintf(u.parts[0].role, sizeof u.parts[0].role, "qweight")));
	BAD("three dimensions", (u.ndim = 3, u.shape[2] = 1));
	BAD("a size that does not match the shape", (u.parts[2].nbytes += 2));
#undef BAD
}

int main(void)
{
	test_roundtrip();
	test_transcodes();
	test_hostile();
	test_reverse();
	test_qpk_hostile();
	test_write();
	test_fixtures();
	return T_DONE();
}
