/* test_quant_iq4.c - IQ4_NL / IQ4_XS encoders (src/quant_iq4.c).
 *
 * Synthetic (always): round trip through qtk_dequant_ggml with a sane error bound, determinism,
 * all-zero blocks decode to +0.0, NaN/Inf/huge inputs give finite blocks, bad arguments,
 * importance weights lower the weighted error of the weighted columns.
 * Fixtures (../shared/fixtures or $QTK_FIXTURES): every IQ4_NL / IQ4_XS tensor of
 * gguf/tiny-IQ4_NL.gguf / tiny-IQ4_XS.gguf (llama-quantize, no imatrix) against our encoding of
 * the same tensor of tiny-f32.gguf: RMSE ratio ours/llama must be <= 1 for every tensor (IQ4_XS:
 * the same decoded values, llama's choice being ours without an imatrix); a table
 * is printed. With tiny.imatrix: the imatrix-weighted error must not be above the unweighted
 * encoding's. */
#include "t.h"
#include "view/decode.h"
#include "dequant.h"
#include "imatrix.h"
#include "quant.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
	return (uint32_t)(t_xorshift(&rng) >> 32);
}
static float unif(void) { return (float)(rnd() >> 8) * (1.0f / 16777216.0f); }
/* roughly normal: Irwin-Hall of 4 */
static float gauss(void) { return (unif() + unif() + unif() + unif() - 2.0f) * 1.7320508f; }

/* weights like the fixtures: salient columns and rare spikes */
static void synth(float *x, uint64_t rows, uint64_t cols)
{
	for (uint64_t r = 0; r < rows; r++)
		for (uint64_t c = 0; c < cols; c++) {
			float v = gauss() * 0.02f;
			if (c % 37 == 5)
				v *= 8.0f;
			if (rnd() % 997 == 0)
				v = (rnd() & 1 ? 1.f : -1.f) * 0.6f;
			x[r * cols + c] = v;
		}
}

static double sse(const float *a, const float *b, uint64_t n, const float *w, uint64_t cols)
{
	double s = 0;
	for (uint64_t i = 0; i < n; i++) {
		const double e = (double)a[i] - (double)b[i];
		s += (w ? (double)w[i % cols] : 1.0) * e * e;
	}
	return s;
}

/* llama.cpp's imatrix-weighted error: per block of blk values w = im[col]*sqrt(sigma2 + x^2),
 * sigma2 = 2*mean(x^2) over the block (what the encoders minimise with an imatrix) */
static double wsse(const float *x, const float *y, uint64_t n, const float *im, uint64_t cols,
		   uint32_t blk)
{
	double s = 0;
	for (uint64_t b = 0; b < n; b += blk) {
		float sigma2 = 0;
		for (uint32_t j = 0; j < blk; j++)
			sigma2 += x[b + j] * x[b + j];
		sigma2 *= 2.f / (float)blk;
		for (uint32_t j = 0; j < blk; j++) {
			const double w = (double)im[(b + j) % cols] * sqrt((double)(sigma2 + x[b + j] * x[b + j]));
			const double e = (double)x[b + j] - (double)y[b + j];
			s += w * e * e;
		}
	}
	return s;
}

typedef int (*enc_fn)(const float *, void *, uint64_t, uint64_t, const float *);

static int enc_dec(unsigned type, enc_fn f, const float *x, uint64_t rows, uint64_t cols,
		   const float *im, uint8_t *q, float *y)
{
	if (f(x, q, rows, cols, im))
		return -1;
	return qtk_dequant_ggml(type, q, y, rows * cols);
}

static void test_synthetic(unsigned type, const char *name, enc_fn f, uint32_t blk, uint32_t bb)
{
	const uint64_t rows = 16, cols = 512, n = rows * cols;
	const uint64_t nbytes = n / blk * bb;
	float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *im = malloc(cols * sizeof *im);
	uint8_t *q = malloc(nbytes), *q2 = malloc(nbytes);
	synth(x, rows, cols);

	CHECK(enc_dec(type, f, x, rows, cols, NULL, q, y) == 0, "%s encode", name);
	const double e = sse(x, y, n, NULL, cols);
	double sx = 0;
	for (uint64_t i = 0; i < n; i++)
		sx += (double)x[i] * x[i];
	const double rel = sqrt(e / sx);
	printf("%s synthetic: relative RMSE %.4f\n", name, rel);
	CHECK(rel < 0.15, "%s relative rmse %.4f", name, rel);

	/* determinism */
	CHECK(f(x, q2, rows, cols, NULL) == 0 && memcmp(q, q2, nbytes) == 0, "%s deterministic", name);
	/* row by row gives the same bytes as the whole tensor (rows are independent) */
	int same = 1;
	for (uint64_t r = 0; r < rows; r++) {
		if (f(x + r * cols, q2 + r * (nbytes / rows), 1, cols, NULL))
			same = 0;
	}
	CHECK(same && memcmp(q, q2, nbytes) == 0, "%s row split independent", name);

	/* importance: heavy weight on some columns lowers their weighted error */
	for (uint64_t c = 0; c < cols; c++)
		im[c] = c % 3 == 0 ? 50.f : 0.5f;
	float *y2 = malloc(n * sizeof *y2);
	CHECK(enc_dec(type, f, x, rows, cols, im, q2, y2) == 0, "%s encode with imatrix", name);
	const double ew_plain = wsse(x, y, n, im, cols, blk), ew_imat = wsse(x, y2, n, im, cols, blk);
	printf("%s synthetic: imatrix-weighted SSE plain %.6g, with imatrix %.6g\n", name, ew_plain,
	       ew_imat);
	CHECK(ew_imat < ew_plain, "%s imatrix helps: %g vs %g", name, ew_imat, ew_plain);
	/* an all-zero imatrix behaves like none */
	for (uint64_t c = 0; c < cols; c++)
		im[c] = 0.f;
	CHECK(f(x, q2, rows, cols, im) == 0 && memcmp(q, q2, nbytes) == 0, "%s zero imatrix = none",
	      name);

	/* all zero -> +0.0 exactly */
	memset(x, 0, n * sizeof *x);
	CHECK(enc_dec(type, f, x, rows, cols, NULL, q, y) == 0, "%s zeros", name);
	int zok = 1;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &y[i], 4);
		if (u != 0)
			zok = 0;
	}
	CHECK(zok, "%s all-zero input decodes to +0.0", name);

	/* NaN / Inf / huge: no crash, finite decoded values */
	synth(x, rows, cols);
	x[3] = NAN;
	x[40] = INFINITY;
	x[300] = -INFINITY;
	x[1000] = 3e38f;
	for (uint64_t i = 2048; i < 2048 + 256; i++)
		x[i] = NAN;
	for (uint64_t i = 4096; i < 4096 + 256; i++)
		x[i] = i % 2 ? INFINITY : -INFINITY;
	CHECK(enc_dec(type, f, x, rows, cols, NULL, q, y) == 0, "%s non-finite input", name);
	int fin = 1;
	for (uint64_t i = 0; i < n; i++)
		if (!isfinite(y[i]))
			fin = 0;
	CHECK(fin, "%s non-finite input gives finite values", name);
	for (uint64_t c = 0; c < cols; c++)
		im[c] = c % 2 ? NAN : -1.f;
	CHECK(f(x, q2, rows, cols, im) == 0, "%s hostile imatrix", name);
	/* tiny values (subnormal scales) */
	for (uint64_t i = 0; i < n; i++)
		x[i] = gauss() * 1e-9f;
	CHECK(enc_dec(type, f, x, rows, cols, NULL, q, y) == 0, "%s tiny values", name);

	/* bad arguments */
	CHECK(f(x, q, 1, blk / 2, NULL) == -1, "%s rejects partial block", name);
	CHECK(f(NULL, q, 1, blk, NULL) == -1, "%s rejects NULL", name);
	free(x);
	free(y);
	free(y2);
	free(im);
	free(q);
	free(q2);
}

/* ---------------------------------------------------------------- fixtures */

static float *decode_alloc(qtk_model *m, const qtk_tensor *t)
{
	float *v = malloc(t->n_params * sizeof *v);
	if (v && qtk_decode_tensor(m, t, v)) {
		free(v);
		return NULL;
	}
	return v;
}

static void test_fixture(const char *fx, unsigned type, const char *tname, enc_fn f,
			 uint32_t blk, uint32_t bb, qtk_imatrix *imx)
{
	char p1[1024], p2[1024];
	snprintf(p1, sizeof p1, "%s/gguf/tiny-f32.gguf", fx);
	snprintf(p2, sizeof p2, "%s/gguf/tiny-%s.gguf", fx, tname);
	qtk_err e1, e2;
	qtk_err_clear(&e1);
	qtk_err_clear(&e2);
	qtk_model *src = qtk_open(p1, &e1), *ref = qtk_open(p2, &e2);
	CHECK(src && ref, "open fixtures: %s %s", e1.msg, e2.msg);
	if (!src || !ref) {
		qtk_close(src);
		qtk_close(ref);
		return;
	}
	printf("\n%s vs llama-quantize (no imatrix): per-tensor RMSE\n", tname);
	printf("%-28s %10s %12s %12s %8s\n", "tensor", "shape", "llama", "qtk", "ratio");
	double sum_ratio = 0, max_ratio = 0;
	int ntens = 0, nworse = 0;
	double wsum_plain = 0, wsum_imat = 0;
	for (size_t i = 0; i < ref->ntensors; i++) {
		const qtk_tensor *rt = &ref->tensors[i];
		if (rt->layout.kind != QTK_LAYOUT_PLAIN || rt->layout.type != type)
			continue;
		const qtk_tensor *st = qtk_tensor_find(src, rt->name);
		CHECK(st != NULL, "source tensor %s", rt->name);
		if (!st)
			continue;
		const uint64_t n = st->n_params, cols = qtk_tensor_cols(st), rows = n / cols;
		float *x = decode_alloc(src, st), *yl = decode_alloc(ref, rt);
		float *y = malloc(n * sizeof *y);
		uint8_t *q = malloc(n / blk * bb);
		CHECK(x && yl && y && q, "decode %s", rt->name);
		if (x && yl && y && q && enc_dec(type, f, x, rows, cols, NULL, q, y) == 0) {
			const double rl = sqrt(sse(x, yl, n, NULL, 1) / (double)n);
			const double rq = sqrt(sse(x, y, n, NULL, 1) / (double)n);
			const double ratio = rl > 0 ? rq / rl : (rq > 0 ? INFINITY : 1.0);
			char shape[32];
			snprintf(shape, sizeof shape, "%llux%llu", (unsigned long long)cols,
				 (unsigned long long)rows);
			printf("%-28s %10s %12.6g %12.6g %8.4f\n", rt->name, shape, rl, rq, ratio);
			sum_ratio += ratio;
			if (ratio > max_ratio)
				max_ratio = ratio;
			ntens++;
			if (ratio > 1.0)
				nworse++;
			CHECK(ratio <= 1.0, "%s %s ratio %.6f", tname, rt->name, ratio);
			/* IQ4_XS without an importance matrix is llama.cpp's choice: the same values */
			if (type == QTK_T_IQ4_XS)
				CHECK(memcmp(y, yl, n * sizeof *y) == 0, "%s %s: not llama's values", tname,
				      rt->name);
			/* imatrix: weighted error with our imatrix encoding vs our plain one */
			const float *im = imx ? qtk_imatrix_get(imx, rt->name, cols) : NULL;
			if (im) {
				float *y2 = malloc(n * sizeof *y2);
				if (y2 && enc_dec(type, f, x, rows, cols, im, q, y2) == 0) {
					wsum_plain += wsse(x, y, n, im, cols, blk);
					wsum_imat += wsse(x, y2, n, im, cols, blk);
				}
				free(y2);
			}
		}
		free(x);
		free(yl);
		free(y);
		free(q);
	}
	CHECK(ntens > 0, "%s: some %s tensors", tname, tname);
	if (ntens)
		printf("%s: %d tensors, mean ratio %.4f, max ratio %.4f, worse than llama: %d\n", tname,
		       ntens, sum_ratio / ntens, max_ratio, nworse);
	if (imx) {
		printf("%s with tiny.imatrix: imatrix-weighted SSE plain %.6g, with imatrix %.6g (%.4f)\n",
		       tname, wsum_plain, wsum_imat, wsum_plain > 0 ? wsum_imat / wsum_plain : 0.0);
		CHECK(wsum_imat <= wsum_plain, "%s imatrix lowers the weighted error", tname);
	}
	qtk_close(src);
	qtk_close(ref);
}

int main(void)
{
	uint64_t bad = qtk_quant_iq4_index_check();
	CHECK(bad == 0, "codebook lookup by table differs from ggml's binary search on %llu inputs",
	      (unsigned long long)bad);
	test_synthetic(QTK_T_IQ4_NL, "IQ4_NL", qtk_quant_iq4_nl, 32, 18);
	test_synthetic(QTK_T_IQ4_XS, "IQ4_XS", qtk_quant_iq4_xs, 256, 136);
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures absent: RMSE against llama-quantize's IQ4_NL / IQ4_XS");
		return T_DONE();
	}
	char ip[1024];
	snprintf(ip, sizeof ip, "%s/gguf/tiny.imatrix", fx);
	qtk_err e;
	qtk_err_clear(&e);
	qtk_imatrix *imx = qtk_imatrix_load(ip, &e);
	CHECK(imx != NULL, "load tiny.imatrix: %s", e.msg);
	test_fixture(fx, QTK_T_IQ4_NL, "IQ4_NL", qtk_quant_iq4_nl, 32, 18, imx);
	test_fixture(fx, QTK_T_IQ4_XS, "IQ4_XS", qtk_quant_iq4_xs, 256, 136, imx);
	qtk_imatrix_free(imx);
	return T_DONE();
}
