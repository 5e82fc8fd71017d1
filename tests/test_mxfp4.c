/* test_mxfp4.c - gpt-oss MXFP4 experts: the fixture's reference digests (hf/more/ref), the
 * byte shuffle into ggml's MXFP4 proven by decoding both sides, blocks synthesized in memory
 * (no fixtures needed) and hostile checkpoints (QTK_E_DATA). */
#include "internal.h"
#include "dequant.h"
#include "scheme/fold.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "quant.h"
#include "t.h"
#include <math.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

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
	char *b = malloc((size_t)l + 1);
	if (b && fread(b, 1, (size_t)l, f) != (size_t)l) {
		free(b);
		b = NULL;
	}
	if (b)
		b[l] = 0;
	fclose(f);
	return b;
}

/* Every row of ref/gptoss-mxfp4.digest.tsv against the decoded logical tensor. */
static void digests(const char *root)
{
	char dir[1024], tsv[1100];
	snprintf(dir, sizeof dir, "%s/hf/more/gptoss-mxfp4", root);
	snprintf(tsv, sizeof tsv, "%s/hf/more/ref/gptoss-mxfp4.digest.tsv", root);
	qtk_err err = {0};
	qtk_model *m = qtk_open(dir, &err);
	char *txt = slurp(tsv);
	CHECK(m && txt, "gptoss-mxfp4 opens: %s", err.msg);
	int rows = 0, good = 0;
	for (char *line = txt ? strtok(txt, "\n") : NULL; m && line; line = strtok(NULL, "\n")) {
		char name[300], hex[80];
		unsigned long long n;
		if (sscanf(line, "%250s %llu %70s", name, &n, hex) != 3 || !strcmp(name, "name"))
			continue;
		rows++;
		const qtk_tensor *t = qtk_tensor_find(m, name);
		if (!t || t->layout.kind != QTK_LAYOUT_MXFP4 || t->n_params != n || t->ndim != 3) {
			CHECK(0, "%s is a 3-D mxfp4 tensor of %llu", name, n);
			continue;
		}
		CHECK(t->n_bytes * 8 * 100 == t->n_params * 425, "%s: 4.25 bits per weight", name);
		float *y = malloc(n * sizeof *y);
		char got[65] = "";
		if (y && !qtk_decode_tensor(m, t, y))
			sha_hex(y, n * sizeof *y, got);
		free(y);
		good += !strcmp(got, hex);
		CHECK(!strcmp(got, hex), "%s digest %s", name, got);
	}
	CHECK(rows == 4 && good == rows, "%d/%d digests", good, rows);
	printf("gptoss-mxfp4: %d/%d reference digests\n", good, rows);
	/* the biases and the router stay plain */
	const qtk_tensor *b = m ? qtk_tensor_find(m, "model.layers.0.mlp.experts.gate_up_proj_bias") : NULL;
	CHECK(b && b->layout.kind == QTK_LAYOUT_PLAIN && b->layout.type == QTK_T_BF16, "bias stays plain");
	free(txt);
	qtk_close(m);
}

/* ---- blocks synthesized in memory ---------------------------------------------------- */

static const float e2m1_ref[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

/* Codes and scales of an [E, out, in] stack: code (e*7 + o*5 + i*3) % 16, scale 120 + (o+g) % 9
 * (255 and 0 once each). */
enum { E = 2, O = 3, I = 64, G = I / 32 };
static uint8_t code_of(int e, int o, int i) { return (uint8_t)((e * 7 + o * 5 + i * 3) % 16); }
static void synth(uint8_t blocks[E][O][G][16], uint8_t scales[E][O][G])
{
	memset(blocks, 0, (size_t)E * O * G * 16);
	for (int e = 0; e < E; e++)
		for (int o = 0; o < O; o++)
			for (int i = 0; i < I; i++) {
				blocks[e][o][i / 32][(i % 32) / 2] |= (uint8_t)(code_of(e, o, i) << (4 * (i % 2)));
				scales[e][o][i / 32] = (uint8_t)(120 + (o + i / 32) % 9);
			}
	scales[0][0][0] = 0;
	scales[1][2][1] = 255;
}

static float want_of(uint8_t scales[E][O][G], int e, int o, int i)
{
	uint8_t c = code_of(e, o, i);
	/* exact in double, one rounding to float (2^128 and more overflow) */
	float v = (float)((double)e2m1_ref[c & 7] * pow(2.0, (double)scales[e][o][i / 32] - 127.0));
	return c & 8 ? -v : v;
}

static void in_memory(void)
{
	static uint8_t blocks[E][O][G][16], scales[E][O][G];
	synth(blocks, scales);
	qtk_tensor t = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&t);
	t.ndim = 3;
	t.shape[0] = E, t.shape[1] = O, t.shape[2] = I;
	t.layout = (qtk_layout){.kind = QTK_LAYOUT_MXFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 32,
				.strategy = QTK_SCHEME_PER_GROUP};
	t.nparts = 2;
	snprintf(t.parts[0].role, sizeof t.parts[0].role, "blocks");
	t.parts[0].type = QTK_DT_U8, t.parts[0].ndim = 4, t.parts[0].nbytes = sizeof blocks;
	t.parts[0].shape[0] = E, t.parts[0].shape[1] = O, t.parts[0].shape[2] = G, t.parts[0].shape[3] = 16;
	snprintf(t.parts[1].role, sizeof t.parts[1].role, "scales");
	t.parts[1].type = QTK_DT_U8, t.parts[1].ndim = 3, t.parts[1].nbytes = sizeof scales;
	t.parts[1].shape[0] = E, t.parts[1].shape[1] = O, t.parts[1].shape[2] = G;
	qtk_tensor_finish(&t);
	char why[300];
	int bad;
	CHECK(!qtk_scheme_check(&t, &bad, why, sizeof why), "synthesized stack is valid: %s", why);
	CHECK(t.n_bytes * 8 * 100 == t.n_params * 425, "4.25 bits per weight");
	const void *pp[2] = {blocks, scales};
	float y[E * O * I], z[E * O * I];
	CHECK(!qtk_scheme_decode_rows(&t, pp, 0, E * O, y), "decode");
	int wrong = 0, negzero = 0;
	for (int e = 0; e < E; e++)
		for (int o = 0; o < O; o++)
			for (int i = 0; i < I; i++) {
				float w = want_of(scales, e, o, i), g = y[(e * O + o) * I + i];
				wrong += memcmp(&w, &g, 4) != 0;
				negzero += code_of(e, o, i) == 8 && g == 0.0f && signbit(g);
			}
	CHECK(!wrong, "%d decoded values differ from e2m1 * 2^(s-127)", wrong);
	CHECK(negzero > 0, "code 8 decodes to -0.0");
	int big = 0;
	for (int i = 32; i < 64; i++)
		big += isinf(y[(1 * O + 2) * I + i]) || fabsf(y[(1 * O + 2) * I + i]) == 0x1p127f;
	CHECK(big > 0, "scale 255 is 2^128: 0.5 gives 2^127, larger codes overflow");
	/* the byte shuffle: decode both sides, equal values (and equal bits but the sign of zero) */
	uint8_t gg[E * O * G * 17];
	CHECK(!qtk_scheme_to_ggml_rows(&t, pp, 0, E * O, QTK_T_MXFP4, gg), "shuffle to ggml MXFP4");
	CHECK(qtk_scheme_to_ggml_rows(&t, pp, 0, E * O, QTK_T_Q4_0, gg) != 0, "no shuffle to q4_0");
	CHECK(!qtk_dequant_ggml(QTK_T_MXFP4, gg, z, E * O * I), "ggml decode");
	int diff = 0, zero_sign = 0;
	for (int k = 0; k < E * O * I; k++) {
		if (memcmp(&y[k], &z[k], 4))
			(y[k] == 0.0f && z[k] == 0.0f) ? zero_sign++ : diff++;
	}
	CHECK(!diff && zero_sign == negzero, "shuffled: %d values differ, %d signs of zero (%d codes 8)", diff, zero_sign,
	      negzero);
	CHECK(gg[0] == scales[0][0][0] && gg[17] == scales[0][0][1], "the scale byte is kept (e = s)");
	/* rows from the middle of the stack, across experts */
	uint8_t part[4 * G * 17];
	CHECK(!qtk_scheme_to_ggml_rows(&t, pp, 2, 4, QTK_T_MXFP4, part) && !memcmp(part, gg + 2 * G * 17, sizeof part),
	      "rows 2..5 shuffle as in the whole");
	/* a stack whose parts disagree with it */
	qtk_tensor b = QTK_TENSOR_LOCAL;
	qtk_tensor_copy(&b, &t);
	b.parts[1].shape[0] = 1;
	CHECK(qtk_scheme_check(&b, &bad, why, sizeof why) == QTK_E_DATA, "scales of another stack refused");
	qtk_tensor_copy(&b, &t);
	b.shape[2] = 96;
	CHECK(qtk_scheme_check(&b, &bad, why, sizeof why) == QTK_E_DATA, "in != 32 * blocks refused");
}

/* ---- hostile checkpoints ---------------------------------------------------------------- */

typedef struct stt {
	const char *name, *dtype;
	int nd;
	uint64_t shape[4];
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
	for (size_t k = 0; k < off; k++)
		fputc((int)(k * 37 % 251), f);
	fclose(f);
	snprintf(path, sizeof path, "%s/config.json", dir);
	f = fopen(path, "w");
	fprintf(f, "{\"architectures\":[\"GptOssForCausalLM\"],\"model_type\":\"gpt_oss\",\"quantization_config\":%s}", qcfg);
	fclose(f);
}

#define BL "model.layers.0.mlp.experts.down_proj_blocks"
#define SC "model.layers.0.mlp.experts.down_proj_scales"
#define CFG "{\"quant_method\":\"mxfp4\",\"modules_to_not_convert\":[\"model.layers.*.self_attn\",\"lm_head\"]}"

static void hostile(void)
{
	char dir[] = "/tmp/qtk-mxfp4-XXXXXX";
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	static const struct {
		const char *what, *cfg, *needle;
		stt t[2];
		int nt;
	} cases[] = {
		{"good", CFG, NULL, {{BL, "U8", 4, {2, 8, 2, 16}, 512}, {SC, "U8", 3, {2, 8, 2}, 32}}, 2},
		{"scales of another shape", CFG, "does not match blocks",
		 {{BL, "U8", 4, {2, 8, 2, 16}, 512}, {SC, "U8", 3, {2, 8, 3}, 48}}, 2},
		{"blocks of 20 bytes (in not a multiple of 32)", CFG, "16 bytes",
		 {{BL, "U8", 4, {2, 8, 2, 20}, 640}, {SC, "U8", 3, {2, 8, 2}, 32}}, 2},
		{"scales of the wrong dtype", CFG, "must be U8",
		 {{BL, "U8", 4, {2, 8, 2, 16}, 512}, {SC, "BF16", 3, {2, 8, 2}, 64}}, 2},
		{"blocks without scales", CFG, "without", {{BL, "U8", 4, {2, 8, 2, 16}, 512}}, 1},
		{"scales without blocks", CFG, "without", {{SC, "U8", 3, {2, 8, 2}, 32}}, 1},
		{"excluded module stored quantized", "{\"quant_method\":\"mxfp4\",\"modules_to_not_convert\":[\"model.layers.*.mlp.experts\"]}",
		 "left unquantized", {{BL, "U8", 4, {2, 8, 2, 16}, 512}, {SC, "U8", 3, {2, 8, 2}, 32}}, 2},
		{"modules_to_not_convert not a list", "{\"quant_method\":\"mxfp4\",\"modules_to_not_convert\":7}", "array",
		 {{BL, "U8", 4, {2, 8, 2, 16}, 512}, {SC, "U8", 3, {2, 8, 2}, 32}}, 2},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		write_ckpt(dir, cases[c].cfg, cases[c].t, cases[c].nt);
		qtk_err err;
		memset(&err, 0, sizeof err);
		qtk_model *m = qtk_open(dir, &err);
		if (!cases[c].needle) {
			const qtk_tensor *t = m ? qtk_tensor_find(m, "model.layers.0.mlp.experts.down_proj") : NULL;
			CHECK(t && t->layout.kind == QTK_LAYOUT_MXFP4 && t->ndim == 3 && t->shape[2] == 64, "%s: folded (%s)",
			      cases[c].what, err.msg);
		} else {
			char all[900];
			snprintf(all, sizeof all, "%s %s", err.subject, err.msg);
			CHECK(!m && err.code == QTK_E_DATA && strstr(all, cases[c].needle), "%s: rc %d (%s)", cases[c].what, err.code,
			      all);
		}
		qtk_close(m);
	}
	char rm[1200];
	snprintf(rm, sizeof rm, "rm -rf %s", dir);
	CHECK(system(rm) == 0, "cleanup");
}

/* ---- with the fixtures: the shuffle on the checkpoint, the encoder against ggml's bytes -- */

static void shuffle_fixture(const char *root)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/hf/more/gptoss-mxfp4", root);
	qtk_err err = {0};
	qtk_model *m = qtk_open(dir, &err);
	const qtk_tensor *t = m ? qtk_tensor_find(m, "model.layers.1.mlp.experts.gate_up_proj") : NULL;
	CHECK(t, "gate_up_proj: %s", err.msg);
	if (!t) {
		qtk_close(m);
		return;
	}
	uint8_t *pp[2] = {NULL, NULL};
	uint64_t rows = qtk_tensor_rows(t), n = t->n_params, nb = n / 32 * 17;
	float *y = malloc(n * 4), *z = malloc(n * 4);
	uint8_t *g = malloc(nb);
	CHECK(!qtk_read_part_alloc(m, t, 0, &pp[0]) && !qtk_read_part_alloc(m, t, 1, &pp[1]), "parts read");
	CHECK(!qtk_decode_tensor(m, t, y), "decode");
	CHECK(!qtk_scheme_to_ggml_rows(t, (const void *const *)pp, 0, rows, QTK_T_MXFP4, g), "shuffle");
	CHECK(!qtk_dequant_ggml(QTK_T_MXFP4, g, z, n), "ggml decode");
	uint64_t diff = 0, zeros = 0;
	for (uint64_t k = 0; k < n; k++)
		if (memcmp(&y[k], &z[k], 4))
			(y[k] == 0.0f && z[k] == 0.0f) ? zeros++ : diff++;
	CHECK(!diff, "%llu values differ after the shuffle", (unsigned long long)diff);
	printf("gptoss-mxfp4 -> MXFP4: %llu values, 0 differ, %llu differ only in the sign of zero\n",
	       (unsigned long long)n, (unsigned long long)zeros);
	free(y), free(z), free(g);
	qtk_free(pp[0]), qtk_free(pp[1]);
	qtk_close(m);
}

static void encoder_fixture(const char *root)
{
	char a[1024], b[1024];
	snprintf(a, sizeof a, "%s/gguf/tiny-f32.gguf", root);
	snprintf(b, sizeof b, "%s/gguf/fp4/tiny-mxfp4.gguf", root);
	qtk_err e1 = {0}, e2 = {0};
	qtk_model *src = qtk_open(a, &e1), *ref = qtk_open(b, &e2);
	CHECK(src && ref, "fixtures open: %s %s", e1.msg, e2.msg);
	int n = 0, same = 0;
	for (size_t i = 0; src && ref && i < ref->ntensors; i++) {
		const qtk_tensor *r = &ref->tensors[i], *s = qtk_tensor_find(src, r->name);
		if (r->layout.type != QTK_T_MXFP4 || !s)
			continue;
		n++;
		float *x = malloc(s->n_params * 4);
		uint8_t *want = NULL, *got = malloc(r->parts[0].nbytes);
		if (!qtk_decode_tensor(src, s, x) && !qtk_read_part_alloc(ref, r, 0, &want) &&
		    !qtk_quant_ggml(QTK_T_MXFP4, x, got, qtk_tensor_rows(s), qtk_tensor_cols(s), NULL))
			same += !memcmp(want, got, (size_t)r->parts[0].nbytes);
		free(x), free(got);
		qtk_free(want);
	}
	CHECK(n > 0 && same == n, "MXFP4 encoder: %d/%d tensors byte-identical to ggml's", same, n);
	printf("MXFP4 encoder: %d/%d tensors byte-identical to ggml's quantize_mxfp4\n", same, n);
	qtk_close(src);
	qtk_close(ref);
}

int main(void)
{
	in_memory();
	hostile();
	const char *root = t_fixtures();
	if (root) {
		digests(root);
		shuffle_fixture(root);
		encoder_fixture(root);
	} else
		T_SKIP("fixtures (set QTK_FIXTURES)");
	return T_DONE();
}
