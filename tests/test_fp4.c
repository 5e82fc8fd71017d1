/* test_fp4.c - the GGUF FP4 paths: ggml's NVFP4 encoder (synthetic blocks and byte identity with
 * ggml's quantize_nvfp4 on the fixture), ModelOpt NVFP4 -> GGUF -> directory (ModelOpt's layout
 * again, by byte shuffles). */
#include "scheme/fold.h"
#include "json.h"
#include "internal.h"
#include "dequant.h"
#include "family/family.h"
#include "quant.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "t.h"
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* E2M1 values (ggml's doubled table halved) */
static const float e2m1[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };

static void nvfp4_encoder(void)
{
	/* a block of 64 values each an E2M1 value times a power of two per 16: amax/6 is the scale
	 * exactly, so the block decodes to its input bit for bit */
	float x[128], y[128];
	uint8_t q[72];
	for (int i = 0; i < 128; i++) {
		const int s = i / 16;
		float v = e2m1[(i * 5 + 3) % 8] * ldexpf(1.0f, s - 4);
		if (i % 16 == 0)
			v = 6.0f * ldexpf(1.0f, s - 4);
		x[i] = (i % 3) ? v : -v;
	}
	CHECK(!qtk_quant_ggml(QTK_T_NVFP4, x, q, 2, 64, NULL), "encode 2 rows");
	CHECK(!qtk_dequant_ggml(QTK_T_NVFP4, q, y, 128), "decode");
	int same = 0;
	for (int i = 0; i < 128; i++)
		same += x[i] == y[i];
	CHECK(same == 128, "E2M1 x 2^k round-trips: %d/128", same);
	/* sub-block 0 of row 0: amax 6 * 2^-4 = 0.375, /6 = 2^-4 -> UE4M3 exp 3, man 0 */
	CHECK(q[0] == (3 << 3), "scale byte %#x", q[0]);
	/* nibble order: qs[8s+j] low = element 16s+j, high = 16s+8+j */
	CHECK((q[4] & 0x0F) == 0x8 + 7 && (q[4] >> 4) == 3, "qs[0] = %#x (elements 0 and 8)", q[4]);

	/* zeros, a large value (scale clamped to 448 -> 0x7E), NaN (ignored by amax, code 0), and a
	 * tiny block (subnormal scale, then 0) */
	float z[64] = { 0 };
	z[16] = 5000.0f;
	z[17] = -5000.0f;
	z[32] = NAN;
	z[33] = 1.0f;
	z[48] = 1e-6f;
	CHECK(!qtk_quant_ggml(QTK_T_NVFP4, z, q, 1, 64, NULL), "encode edge block");
	CHECK(q[0] == 0 && q[1] == 0x7E && q[3] == 0, "scales %#x %#x %#x", q[0], q[1], q[3]);
	CHECK(q[4] == 0 && (q[12] & 0x0F) == 7 && (q[13] & 0x0F) == 15, "clamped codes %#x %#x", q[12], q[13]);
	CHECK((q[20] & 0x0F) == 0 && (q[21] & 0x0F) == 7, "NaN code 0, 1.0 the block's maximum");
	/* 1/6 = 0.1667 -> UE4M3 exp 4 man 3 (round half up on the 4th mantissa bit: 1.333 -> 1.375) */
	CHECK(q[2] == (4 << 3 | 3), "scale of amax 1: %#x", q[2]);
	/* subnormal: 1e-6/6 * 512 + 0.5 < 1 -> scale 0 */
	CHECK(q[3] == 0, "tiny scale");
	CHECK(qtk_quant_ggml(QTK_T_NVFP4, z, q, 1, 32, NULL) != 0, "row of 32 refused (block of 64)");
	CHECK(qtk_quant_supported(QTK_T_NVFP4), "nvfp4 encoder listed");
}

/* Every NVFP4 tensor of gguf/fp4/tiny-nvfp4.gguf is what the encoder makes of tiny-f32's values. */
static void nvfp4_fixture(const char *root)
{
	char a[1024], b[1024];
	snprintf(a, sizeof a, "%s/gguf/tiny-f32.gguf", root);
	snprintf(b, sizeof b, "%s/gguf/fp4/tiny-nvfp4.gguf", root);
	qtk_err e1 = { 0 }, e2 = { 0 };
	qtk_model *src = qtk_open(a, &e1), *ref = qtk_open(b, &e2);
	CHECK(src && ref, "fixtures open: %s %s", e1.msg, e2.msg);
	int n = 0, same = 0;
	for (size_t i = 0; src && ref && i < ref->ntensors; i++) {
		const qtk_tensor *r = &ref->tensors[i], *s = qtk_tensor_find(src, r->name);
		if (r->layout.type != QTK_T_NVFP4 || !s)
			continue;
		n++;
		float *x = malloc(s->n_params * 4);
		uint8_t *want = NULL, *got = malloc(r->parts[0].nbytes);
		if (!qtk_decode_tensor(src, s, x) && !qtk_read_part_alloc(ref, r, 0, &want) &&
		    !qtk_quant_ggml(QTK_T_NVFP4, x, got, qtk_tensor_rows(s), qtk_tensor_cols(s), NULL))
			same += !memcmp(want, got, (size_t)r->parts[0].nbytes);
		free(x), free(got);
		qtk_free(want);
	}
	CHECK(n == 16 && same == n, "NVFP4 encoder: %d/%d tensors byte-identical to ggml's", same, n);
	printf("NVFP4 encoder: %d/%d tensors byte-identical to ggml's quantize_nvfp4\n", same, n);
	qtk_close(src);
	qtk_close(ref);
}

/* Every NVFP4 layer of an HF fixture shuffled into ggml NVFP4 blocks: decoded by ggml's NVFP4
 * and multiplied by the `.scale` value, against the checkpoint's own decode. Counts the tensors
 * that are bit-exact, differ only in the sign of zero, or differ in value. */
static void shuffle_fixture(const char *root, const char *variant, int want_exact, int want_zero)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/hf/ct/%s", root, variant);
	qtk_err e = { 0 };
	qtk_model *m = qtk_open(dir, &e);
	CHECK(m != NULL, "%s opens: %s", variant, e.msg);
	int n = 0, exact = 0, zero = 0, differ = 0;
	for (size_t i = 0; m && i < m->ntensors; i++) {
		const qtk_tensor *t = &m->tensors[i];
		if (t->layout.kind != QTK_LAYOUT_NVFP4)
			continue;
		n++;
		uint8_t *pp[QTK_MAX_PARTS] = { 0 };
		int ok = 1;
		for (int k = 0; k < t->nparts; k++)
			ok &= !qtk_read_part_alloc(m, t, k, &pp[k]);
		const uint64_t rows = t->shape[0], nb = t->n_params / 64 * 36;
		float *y = malloc(t->n_params * 4), *z = malloc(t->n_params * 4), s2 = 0;
		uint8_t *g = malloc(nb);
		ok = ok && y && z && g && !qtk_decode_tensor(m, t, y) &&
		     !qtk_scheme_to_ggml_rows(t, (const void *const *)pp, 0, rows, QTK_T_NVFP4, g) &&
		     !qtk_nvfp4_ggml_scale(t, (const void *const *)pp, &s2) && !qtk_dequant_ggml(QTK_T_NVFP4, g, z, t->n_params);
		CHECK(ok, "%s: %s shuffled and decoded", variant, t->name);
		uint64_t d = 0, zs = 0;
		for (uint64_t k = 0; ok && k < t->n_params; k++) {
			float v = z[k] * s2;
			if (memcmp(&v, &y[k], 4))
				(v == 0.0f && y[k] == 0.0f) ? zs++ : d++;
		}
		exact += ok && !d && !zs;
		zero += ok && !d && zs;
		differ += !ok || d;
		free(y), free(z), free(g);
		for (int k = 0; k < QTK_MAX_PARTS; k++)
			qtk_free(pp[k]);
	}
	printf("%s -> ggml NVFP4 x .scale: %d layers, %d bit-exact, %d only the sign of zero, %d differ\n", variant, n,
	       exact, zero, differ);
	CHECK(n > 0 && exact == want_exact && zero == want_zero, "%s: %d exact, %d sign of zero", variant, exact, zero);
	qtk_close(m);
}

/* ggml NVFP4 blocks -> ModelOpt's parts (qtk_nvfp4_from_ggml): every scale byte but 0xFF, random
 * codes; the ModelOpt layout decodes to ggml's values times weight_scale_2 bit for bit, scale
 * bytes are written without the sign bit (0x7F as 0), and 0xFF (ggml: 480) has no E4M3 form. */
static void nvfp4_from_ggml_synth(void)
{
	enum { ROWS = 64, IN = 64 };
	static uint8_t blk[ROWS * 36], codes[ROWS * IN / 2], sc[ROWS * IN / 16];
	static float ref[ROWS * IN], got[ROWS * IN];
	uint32_t x = 12345;
	for (int r = 0; r < ROWS; r++)
		for (int b = 0; b < 36; b++) {
			x = x * 1103515245u + 12345u;
			blk[r * 36 + b] = b < 4 ? (uint8_t)((r * 4 + b) % 255) : (uint8_t)(x >> 16);
		}
	blk[36 * 3 + 1] = 0x7F, blk[36 * 5 + 2] = 0x80, blk[36 * 7] = 0xFE, blk[36 * 9 + 3] = 0xC1;
	CHECK(qtk_nvfp4_from_ggml(blk, ROWS, IN, codes, sc) == 0, "shuffle");
	CHECK(sc[3 * 4 + 1] == 0 && sc[5 * 4 + 2] == 0 && sc[7 * 4] == 0x7E && sc[9 * 4 + 3] == 0x41, "scale bytes");
	qtk_tensor t = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&t);
	t.name = (char *)"synthetic";
	qtk_layout l = { .kind = QTK_LAYOUT_NVFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 16,
			 .scale_type = 1 };
	char why[200] = "";
	CHECK(qtk_scheme_describe(&t, &l, ROWS, IN, true, why, sizeof why) == 0, "describe: %s", why);
	static const float s2v[] = { 1.0f, 0.3711f, -2.5f };
	int good = 0;
	for (size_t k = 0; k < sizeof s2v / sizeof *s2v; k++) {
		uint8_t s2[4];
		memcpy(s2, &s2v[k], 4);
		const void *parts[3] = { codes, sc, s2 };
		CHECK(qtk_dequant_ggml(QTK_T_NVFP4, blk, ref, ROWS * IN) == 0, "ggml decode");
		for (int i = 0; i < ROWS * IN; i++)
			ref[i] *= s2v[k];
		CHECK(qtk_scheme_decode_rows(&t, parts, 0, ROWS, got) == 0, "ModelOpt decode");
		good += memcmp(ref, got, sizeof ref) == 0;
	}
	CHECK(good == 3, "ModelOpt layout decodes as ggml x scale: %d/3", good);
	blk[36 * 11 + 2] = 0xFF;
	CHECK(qtk_nvfp4_from_ggml(blk, ROWS, IN, NULL, NULL) == -1, "0xFF has no E4M3 form");
	CHECK(qtk_nvfp4_from_ggml(blk, ROWS, 32, NULL, NULL) == -1, "in %% 64");
	printf("ggml NVFP4 -> ModelOpt: %d/3 multipliers bit-exact over 255 scale bytes\n", good);
}

/* ggml MXFP4 blocks -> compressed-tensors' parts (qtk_mxfp4_from_ggml): every scale byte 0..255,
 * random codes (code 8 among them); the compressed-tensors layout decodes to ggml's values bit
 * for bit but for code 8 (ggml's +0.0, compressed-tensors' -0.0), and goes back to the same
 * blocks byte for byte. */
static int same_part(qtk_model *a, qtk_model *b, const char *name, int k);

static void mxfp4_from_ggml_synth(void)
{
	enum { ROWS = 32, IN = 256, NB = IN / 32 };
	static uint8_t blk[ROWS * NB * 17], codes[ROWS * IN / 2], sc[ROWS * NB];
	static float ref[ROWS * IN], got[ROWS * IN];
	uint32_t x = 777;
	int eights = 0;
	for (int r = 0; r < ROWS; r++)
		for (int b = 0; b < NB * 17; b++) {
			x = x * 1103515245u + 12345u;
			uint8_t v = (uint8_t)(x >> 16);
			blk[r * NB * 17 + b] = b % 17 == 0 ? (uint8_t)((r * NB + b / 17) % 256) : v;
			eights += b % 17 ? ((v & 15) == 8) + (v >> 4 == 8) : 0;
		}
	CHECK(qtk_mxfp4_from_ggml(blk, ROWS, IN, codes, sc) == 0, "shuffle");
	int e8 = 0;
	for (size_t i = 0; i < sizeof codes; i++)
		e8 += ((codes[i] & 15) == 8) + (codes[i] >> 4 == 8);
	qtk_tensor t = QTK_TENSOR_LOCAL;
	qtk_tensor_clear(&t);
	t.name = (char *)"synthetic";
	qtk_layout l = { .kind = QTK_LAYOUT_MXFP4, .type = QTK_DT_U8, .bits = 4, .sym = true, .group_size = 32,
			 .strategy = QTK_SCHEME_PER_GROUP, .scale_type = QTK_MXFP4_CT };
	char why[200] = "";
	CHECK(qtk_scheme_describe(&t, &l, ROWS, IN, true, why, sizeof why) == 0, "describe: %s", why);
	const void *parts[2] = { codes, sc };
	CHECK(qtk_dequant_ggml(QTK_T_MXFP4, blk, ref, ROWS * IN) == 0, "ggml decode");
	CHECK(qtk_scheme_decode_rows(&t, parts, 0, ROWS, got) == 0, "compressed-tensors decode");
	int same = 0, signz = 0;
	for (int i = 0; i < ROWS * IN; i++) {
		same += !memcmp(&ref[i], &got[i], 4);
		signz += memcmp(&ref[i], &got[i], 4) && ref[i] == 0.0f && got[i] == 0.0f && signbit(got[i]);
	}
	CHECK(same + signz == ROWS * IN, "compressed-tensors layout decodes as ggml: %d same, %d -0.0", same, signz);
	CHECK(eights > 0 && e8 == eights && signz > 0, "code 8 kept: %d of %d", e8, eights);
	/* and back: the compressed-tensors parts as ggml blocks are the same blocks */
	static uint8_t back[ROWS * NB * 17];
	CHECK(qtk_scheme_to_ggml_rows(&t, parts, 0, ROWS, QTK_T_MXFP4, back) == 0, "to ggml");
	CHECK(!memcmp(blk, back, sizeof blk), "round trip byte for byte");
	CHECK(qtk_mxfp4_from_ggml(blk, ROWS, 48, NULL, NULL) == -1, "in %% 32");
	printf("ggml MXFP4 -> compressed-tensors: %d rows over 256 scale bytes: %d values bit-exact, %d code-8 "
	       "nibbles -0.0 (+0.0 in ggml), back byte for byte\n", ROWS, same, signz);
}

/* tiny-mxfp4.gguf -> HF directory (keep): every linear layer is compressed-tensors MXFP4 with the
 * config llm-compressor writes, embeddings and lm_head F32; qverify --against says exact; back to
 * GGUF with --to mxfp4 --pure every tensor has the fixture's bytes. */
static void mxfp4_ct_back(const char *root)
{
	char tmp[] = "/tmp/qtk-mx-XXXXXX", dir[600], back[600], cmd[2048], src[700];
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(src, sizeof src, "%s/gguf/fp4/tiny-mxfp4.gguf", root);
	snprintf(dir, sizeof dir, "%s/hf", tmp);
	snprintf(back, sizeof back, "%s/back.gguf", tmp);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s/ --exact", src, dir);
	CHECK(system(cmd) == 0, "%s", cmd);
	qtk_err e = { 0 };
	qtk_model *h = qtk_open(dir, &e);
	int mx = 0, f32 = 0;
	for (size_t i = 0; h && i < h->ntensors; i++) {
		const qtk_tensor *t = &h->tensors[i];
		mx += t->layout.kind == QTK_LAYOUT_MXFP4 && t->layout.scale_type == QTK_MXFP4_CT;
		f32 += t->ndim == 2 && t->layout.kind == QTK_LAYOUT_PLAIN && t->layout.type == QTK_T_F32;
	}
	CHECK(h && mx == 14 && f32 == 2, "HF: %d mxfp4 layers, %d F32 matrices: %s", mx, f32, e.msg);
	qtk_close(h);
	char p[800];
	snprintf(p, sizeof p, "%s/config.json", dir);
	qtk_json_doc c = { 0 };
	const cJSON *q = !qtk_json_load(p, 1 << 20, 0, &e, &c, NULL, NULL)
				 ? cJSON_GetObjectItemCaseSensitive(c.root, "quantization_config")
				 : NULL;
	const cJSON *fm = q ? cJSON_GetObjectItemCaseSensitive(q, "format") : NULL;
	const cJSON *qm = q ? cJSON_GetObjectItemCaseSensitive(q, "quant_method") : NULL;
	CHECK(cJSON_IsString(fm) && !strcmp(fm->valuestring, "mxfp4-pack-quantized") && cJSON_IsString(qm) &&
		      !strcmp(qm->valuestring, "compressed-tensors"),
	      "quantization_config");
	qtk_json_doc_free(&c);
	snprintf(cmd, sizeof cmd, "bin/qverify %s --against %s 2>&1 | grep -q 'against: ok: 21 exact, 0 lossy'", dir, src);
	CHECK(system(cmd) == 0, "qverify --against: exact");
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s --to mxfp4 --pure --exact", dir, back);
	CHECK(system(cmd) == 0, "%s", cmd);
	qtk_model *a = qtk_open(src, &e), *b = qtk_open(back, &e);
	int same = 0, n = 0;
	for (size_t i = 0; a && b && i < a->ntensors; i++, n++)
		same += same_part(a, b, a->tensors[i].name, 0);
	printf("GGUF MXFP4 -> compressed-tensors -> GGUF: %d/%d tensors byte-identical\n", same, n);
	CHECK(n == 21 && same == n, "%d/%d tensors byte-identical", same, n);
	qtk_close(a);
	qtk_close(b);
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	CHECK(system(cmd) == 0, "rm");
}

static void sha_hex(const void *p, size_t n, char hex[65])
{
	unsigned char md[32];
	unsigned len = 0;
	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* gguf/fp4/<stem>.digest.tsv: every stored tensor (the `.scale` tensors of the scaled file have
 * their own rows; the NVFP4 rows are before the multiply) decodes to its digest. */
static void gguf_digests(const char *root, const char *stem)
{
	char path[1024], tsv[1024], line[1024];
	snprintf(path, sizeof path, "%s/gguf/fp4/%s.gguf", root, stem);
	snprintf(tsv, sizeof tsv, "%s/gguf/fp4/%s.digest.tsv", root, stem);
	qtk_err e = { 0 };
	qtk_model *m = qtk_open(path, &e);
	FILE *f = fopen(tsv, "r");
	CHECK(m && f, "%s opens: %s", stem, e.msg);
	int rows = 0, good = 0;
	while (m && f && fgets(line, sizeof line, f)) {
		char name[256], type[32], dims[64], digest[65];
		if (sscanf(line, "%255s %31s %63s %*s %64s", name, type, dims, digest) != 4)
			continue;
		rows++;
		const qtk_tensor *t = qtk_tensor_find(m, name);
		float *y = t ? malloc(t->n_params * 4 + 4) : NULL;
		char hex[65] = "";
		if (y && !qtk_decode_tensor(m, t, y))
			sha_hex(y, t->n_params * 4, hex);
		good += !strcmp(hex, digest);
		free(y);
	}
	CHECK(rows > 0 && good == rows, "%s: %d/%d digests", stem, good, rows);
	printf("%s: %d/%d reference digests\n", stem, good, rows);
	if (f)
		fclose(f);
	qtk_close(m);
}

/* Part k of tensor `name` in a and b: the same bytes? */
static int same_part(qtk_model *a, qtk_model *b, const char *name, int k)
{
	const qtk_tensor *ta = qtk_tensor_find(a, name), *tb = qtk_tensor_find(b, name);
	uint8_t *pa = NULL, *pb = NULL;
	int same = ta && tb && k < ta->nparts && k < tb->nparts && ta->parts[k].nbytes == tb->parts[k].nbytes &&
		   ta->parts[k].type == tb->parts[k].type && !qtk_read_part_alloc(a, ta, k, &pa) &&
		   !qtk_read_part_alloc(b, tb, k, &pb) && !memcmp(pa, pb, (size_t)ta->parts[k].nbytes);
	qtk_free(pa);
	qtk_free(pb);
	return same;
}

/* ModelOpt -> GGUF (gguf) -> directory under keep: every NVFP4 layer is ModelOpt's layout again
 * with the checkpoint's weight, weight_scale and weight_scale_2 bytes (Q/K rows put back), its
 * input_scale too; qverify --against the checkpoint says exact; config.json's
 * quantization_config is ModelOpt's but for the producer, and hf_quant_config.json ModelOpt's
 * text with producer qtk. */
static void modelopt_back(const char *root, const char *gguf, const char *tmp)
{
	char dir[700], cmd[2048], src[700];
	snprintf(dir, sizeof dir, "%s/back", tmp);
	snprintf(src, sizeof src, "%s/hf/ct/modelopt-nvfp4", root);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s/ --exact", gguf, dir);
	CHECK(system(cmd) == 0, "%s", cmd);
	qtk_err e = { 0 };
	qtk_model *a = qtk_open(src, &e), *b = qtk_open(dir, &e);
	CHECK(a && b, "open: %s", e.msg);
	int layers = 0, same = 0, inscale = 0;
	for (size_t i = 0; a && b && i < a->ntensors; i++) {
		const qtk_tensor *t = &a->tensors[i];
		if (t->layout.kind == QTK_LAYOUT_NVFP4) {
			const qtk_tensor *u = qtk_tensor_find(b, t->name);
			layers++;
			same += u && u->layout.kind == QTK_LAYOUT_NVFP4 && u->layout.scale_type == 1 && u->nparts == 3 &&
				same_part(a, b, t->name, 0) && same_part(a, b, t->name, 1) && same_part(a, b, t->name, 2);
		} else if (strstr(t->name, ".input_scale")) {
			inscale += same_part(a, b, t->name, 0) && qtk_tensor_find(b, t->name)->ndim == 0;
		}
	}
	printf("ModelOpt -> GGUF -> directory: %d/%d NVFP4 layers byte-identical, %d input_scale\n", same, layers,
	       inscale);
	CHECK(layers == 14 && same == layers && inscale == 14, "%d/%d layers, %d input_scale", same, layers, inscale);
	qtk_close(a);
	qtk_close(b);
	snprintf(cmd, sizeof cmd, "bin/qverify %s --against %s 2>&1 | grep -q 'against: ok: 35 exact, 0 lossy'", dir, src);
	CHECK(system(cmd) == 0, "qverify --against: exact");
	/* configs: ModelOpt's quantization_config but the producer; hf_quant_config.json's text */
	char p1[800], p2[800];
	snprintf(p1, sizeof p1, "%s/config.json", src);
	snprintf(p2, sizeof p2, "%s/config.json", dir);
	qtk_json_doc c1 = { 0 }, c2 = { 0 };
	int ok = !qtk_json_load(p1, 1 << 20, 0, &e, &c1, NULL, NULL) && !qtk_json_load(p2, 1 << 20, 0, &e, &c2, NULL, NULL);
	cJSON *q1 = ok ? cJSON_GetObjectItemCaseSensitive(c1.root, "quantization_config") : NULL;
	cJSON *q2 = ok ? cJSON_GetObjectItemCaseSensitive(c2.root, "quantization_config") : NULL;
	cJSON *pr = q2 ? cJSON_GetObjectItemCaseSensitive(q2, "producer") : NULL;
	cJSON *nm = pr ? cJSON_GetObjectItemCaseSensitive(pr, "name") : NULL;
	CHECK(cJSON_IsString(nm) && !strcmp(nm->valuestring, "qtk"), "producer qtk");
	if (q1 && q2 && pr)
		cJSON_ReplaceItemInObjectCaseSensitive(q2, "producer",
						       cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(q1, "producer"), 1));
	char *t1 = q1 ? cJSON_PrintUnformatted(q1) : NULL, *t2 = q2 ? cJSON_PrintUnformatted(q2) : NULL;
	CHECK(t1 && t2 && !strcmp(t1, t2), "quantization_config (keys in order):\n%s\n%s", t1 ? t1 : "", t2 ? t2 : "");
	cJSON_free(t1);
	cJSON_free(t2);
	qtk_json_doc_free(&c1);
	qtk_json_doc_free(&c2);
	snprintf(p1, sizeof p1, "%s/hf_quant_config.json", dir);
	static const char want[] = "{\n    \"producer\": {\n        \"name\": \"qtk\",\n        \"version\": \"" QTK_VERSION
				   "\"\n    },\n    \"quantization\": {\n        \"quant_algo\": \"NVFP4\",\n        "
				   "\"kv_cache_quant_algo\": null,\n        \"group_size\": 16,\n        "
				   "\"exclude_modules\": [\n            \"lm_head\"\n        ]\n    }\n}";
	char got[1024] = "";
	FILE *f = fopen(p1, "rb");
	size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
	got[n] = 0;
	if (f)
		fclose(f);
	CHECK(!strcmp(got, want), "hf_quant_config.json:\n%s", got);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "rm");
}

/* qconvert ModelOpt NVFP4 -> GGUF: every layer is NVFP4 blocks plus `<name>.scale`, and read the
 * way llama.cpp reads it (ggml's dequantize_row_nvfp4, times the .scale in F32, Q/K rows put back
 * in HF order) it hashes to the ModelOpt reference digest (hf/ct/ref). */
static void modelopt_gguf(const char *root)
{
	char tmp[] = "/tmp/qtk-fp4-XXXXXX", out[600], cmd[2048], tsv[1024], line[1024];
	if (!mkdtemp(tmp)) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(out, sizeof out, "%s/mo.gguf", tmp);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s/hf/ct/modelopt-nvfp4 %s --to auto-exact --exact", root, out);
	CHECK(system(cmd) == 0, "%s", cmd);
	snprintf(tsv, sizeof tsv, "%s/hf/ct/ref/modelopt-nvfp4.digest.tsv", root);
	qtk_err e = { 0 };
	qtk_model *m = qtk_open(out, &e);
	FILE *f = fopen(tsv, "r");
	CHECK(m && f, "mo.gguf and the reference open: %s", e.msg);
	const qtk_kv *hk = m ? qtk_kv_find(m, "llama.attention.head_count") : NULL;
	const qtk_kv *kk = m ? qtk_kv_find(m, "llama.attention.head_count_kv") : NULL;
	uint64_t h64 = 0, kv64 = 0;
	if (hk)
		qtk_value_as_u64(&hk->val, &h64);
	if (kk)
		qtk_value_as_u64(&kk->val, &kv64);
	int nh = (int)h64, nkv = kk ? (int)kv64 : nh;
	static const char *const map[][2] = { { "self_attn.q_proj", "attn_q" }, { "self_attn.k_proj", "attn_k" },
					      { "self_attn.v_proj", "attn_v" }, { "self_attn.o_proj", "attn_output" },
					      { "mlp.gate_proj", "ffn_gate" },  { "mlp.up_proj", "ffn_up" },
					      { "mlp.down_proj", "ffn_down" } };
	int rows = 0, good = 0, scales = 0;
	while (m && f && fgets(line, sizeof line, f)) {
		char name[256], digest[65], stem[64] = "", wn[128], sn[128];
		int blk = -1;
		if (sscanf(line, "%255s %*s %64s", name, digest) != 2 || sscanf(name, "model.layers.%d.", &blk) != 1)
			continue;
		const char *rest = strchr(name + 13, '.');
		for (size_t k = 0; rest && k < sizeof map / sizeof *map; k++)
			if (!strcmp(rest + 1, map[k][0]))
				snprintf(stem, sizeof stem, "%s", map[k][1]);
		rows++;
		snprintf(wn, sizeof wn, "blk.%d.%s.weight", blk, stem);
		snprintf(sn, sizeof sn, "blk.%d.%s.scale", blk, stem);
		const qtk_tensor *w = qtk_tensor_find(m, wn), *st = qtk_tensor_find(m, sn);
		if (!w || w->layout.type != QTK_T_NVFP4 || !st || st->layout.type != QTK_T_F32 || st->n_params != 1)
			continue;
		scales++;
		float s = 0, *y = malloc(w->n_params * 4), *z = malloc(w->n_params * 4);
		char hex[65] = "";
		if (y && z && !qtk_decode_tensor(m, w, y) && !qtk_decode_tensor(m, st, &s)) {
			for (uint64_t i = 0; i < w->n_params; i++)
				y[i] *= s;
			int heads = !strcmp(stem, "attn_q") ? nh : !strcmp(stem, "attn_k") ? nkv : 0;
			if (heads)
				qtk_family_permute_rows((const uint8_t *)y, (uint8_t *)z, w->shape[0], w->shape[1] * 4, heads, true);
			sha_hex(heads ? z : y, w->n_params * 4, hex);
		}
		good += !strcmp(hex, digest);
		free(y), free(z);
	}
	printf("ModelOpt -> GGUF NVFP4 + .scale: %d/%d layers with a .scale, %d/%d reference digests\n", scales, rows,
	       good, rows);
	CHECK(rows == 14 && scales == rows && good == rows, "%d/%d digests", good, rows);
	/* hostile: a non-finite .scale makes the pair unreadable as one layer (exit 3, nothing
	 * written); the stored tensors still list and decode as they are */
	const qtk_tensor *st = m ? qtk_tensor_find(m, "blk.0.attn_q.scale") : NULL;
	uint64_t off = st ? st->parts[0].offset : 0;
	char bad[700], hfo[700];
	snprintf(bad, sizeof bad, "%s/nan.gguf", tmp);
	snprintf(hfo, sizeof hfo, "%s/hf", tmp);
	snprintf(cmd, sizeof cmd, "cp %s %s", out, bad);
	CHECK(st && system(cmd) == 0, "copy");
	FILE *bf = fopen(bad, "r+b");
	static const unsigned char nan_le[4] = { 0, 0, 0xc0, 0x7f };
	CHECK(bf && fseek(bf, (long)off, SEEK_SET) == 0 && fwrite(nan_le, 1, 4, bf) == 4, "patch");
	if (bf)
		fclose(bf);
	snprintf(cmd, sizeof cmd, "bin/qconvert -q %s %s/ 2>/dev/null", bad, hfo);
	int r = system(cmd);
	CHECK(WIFEXITED(r) && WEXITSTATUS(r) == 3 && access(hfo, F_OK) != 0, "NaN .scale: exit %d", WEXITSTATUS(r));
	snprintf(cmd, sizeof cmd, "bin/qinspect %s >/dev/null 2>&1", bad);
	CHECK(system(cmd) == 0, "NaN .scale: qinspect lists the stored tensors");
	unlink(bad);
	if (f)
		fclose(f);
	qtk_close(m);
	modelopt_back(root, out, tmp);
	unlink(out);
	rmdir(tmp);
}

int main(void)
{
	nvfp4_encoder();
	nvfp4_from_ggml_synth();
	mxfp4_from_ggml_synth();
	const char *root = t_fixtures();
	if (root) {
		nvfp4_fixture(root);
		shuffle_fixture(root, "modelopt-nvfp4", 14, 0);
		shuffle_fixture(root, "ct-nvfp4", 0, 3);
		gguf_digests(root, "tiny-nvfp4");
		gguf_digests(root, "tiny-mxfp4");
		gguf_digests(root, "tiny-nvfp4-scaled");
		modelopt_gguf(root);
		mxfp4_ct_back(root);
	}
	else
		T_SKIP("fixtures (set QTK_FIXTURES)");
	return T_DONE();
}
