/* test_mlx.c - MLX affine quantization: the fixtures' reference digests (qtk's F32 decoder and
 * MLX's own F16 arithmetic), the quantizer against the fixtures' packed bytes, write -> read
 * round trips, and hostile inputs (without fixtures: tensors made in memory). */
#include "internal.h"
#include "dequant.h"
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
	memset(t, 0, sizeof *t);
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
			qtk_tensor t;
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
		qtk_tensor t;
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
	qtk_tensor t;
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

int main(void)
{
	test_roundtrip();
	test_transcodes();
	test_hostile();
	test_fixtures();
	return T_DONE();
}
