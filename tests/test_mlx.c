/* test_mlx.c - MLX affine quantization: the fixtures' reference digests (qtk's F32 decoder and
 * MLX's own F16 arithmetic), the quantizer against the fixtures' packed bytes, write -> read
 * round trips, and hostile inputs (without fixtures: tensors made in memory). */
#include "internal.h"
#include "dequant.h"
#include "json.h"
#include "qpk_int.h"
#include "scheme/fold.h"
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

int main(void)
{
	test_fixtures();
	return T_DONE();
}
