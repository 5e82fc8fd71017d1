/* test_quant_awq.c - AWQ GEMM / GPTQ encoders and qtk_fit_group (src/quant_awq.c).
 *
 * Synthetic (always): every variant decodes (qtk_dequant_awq / qtk_dequant_gptq) bit-exactly to
 * the values qtk_fit_group reports for the same group; the packed words hold the codes where
 * AutoAWQ / AutoGPTQ put them (checked with an unpacker written here); error no worse than
 * plain min-max RTN; exact re-encoding (decoded AWQ -> AWQ, -> GPTQ v2; decoded GPTQ -> GPTQ of
 * the same kind); determinism; v1 never stores a zero of 0; NaN/Inf/huge inputs; all-zero
 * groups decode to +0.0; bad arguments.
 * Fixtures (../shared/fixtures or $QTK_FIXTURES): per linear layer of hf/tiny-llama, RMSE
 * against the fp16 weights of our encoding vs AutoAWQ's awq-g128 and vs each gptq-* variant;
 * the tables print mean and max ratios. Whether the GPTQ fixtures are plain RTN is reported
 * (share of weights equal to a min-max RTN reproduction). */
#include "t.h"
#include "view/decode.h"
#include "dequant.h"
#include "quant.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
	return (uint32_t)(t_xorshift(&rng) >> 32);
}
static float unif(void) { return (float)(rnd() >> 8) * (1.0f / 16777216.0f); }
static float gauss(void) { return (unif() + unif() + unif() + unif() - 2.0f) * 1.7320508f; }

static void synth(float *w, uint32_t out, uint32_t in)
{
	for (uint32_t o = 0; o < out; o++)
		for (uint32_t i = 0; i < in; i++) {
			float v = gauss() * 0.02f;
			if (i % 41 == 7)
				v *= 6.0f;
			if (rnd() % 499 == 0)
				v = (rnd() & 1 ? 1.f : -1.f) * 0.5f;
			if (o % 5 == 1 && i < 64)
				v = fabsf(v); /* groups with all-positive values (zero 0 for asym) */
			w[(uint64_t)o * in + i] = v;
		}
}

static double sse(const float *a, const float *b, uint64_t n)
{
	double s = 0;
	for (uint64_t i = 0; i < n; i++) {
		const double e = (double)a[i] - (double)b[i];
		s += e * e;
	}
	return s;
}

static int bits_eq(const float *a, const float *b, uint64_t n, uint64_t *first)
{
	for (uint64_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], 4) != 0) {
			if (first)
				*first = i;
			return 0;
		}
	return 1;
}

/* ---------------------------------------------------------------- a quantized tensor */

typedef struct qt {
	int awq; /* 1 AWQ, else GPTQ */
	uint32_t out, in, group, ngroups;
	unsigned bits;
	bool sym;
	int version;
	int32_t *qw, *qz, *gi;
	uint16_t *sc;
} qt;

static void qt_init(qt *t, int awq, uint32_t out, uint32_t in, uint32_t group, unsigned bits,
		    bool sym, int version)
{
	memset(t, 0, sizeof *t);
	t->awq = awq;
	t->out = out;
	t->in = in;
	t->group = group;
	t->ngroups = in / group;
	t->bits = awq ? 4 : bits;
	t->sym = sym;
	t->version = version;
	if (awq) {
		t->qw = calloc((size_t)in * out / 8, 4);
		t->qz = calloc((size_t)t->ngroups * out / 8, 4);
	} else {
		t->qw = calloc((size_t)in / 32 * bits * out, 4);
		t->qz = calloc((size_t)t->ngroups * out * bits / 32, 4);
		t->gi = calloc(in, 4);
	}
	t->sc = calloc((size_t)t->ngroups * out, 2);
}

static void qt_free(qt *t)
{
	free(t->qw);
	free(t->qz);
	free(t->gi);
	free(t->sc);
}

static int qt_enc(qt *t, const float *w)
{
	if (t->awq)
		return qtk_quant_awq(w, t->out, t->in, t->group, t->qw, t->qz, t->sc);
	return qtk_quant_gptq(w, t->out, t->in, t->group, t->bits, t->sym, t->version, t->qw, t->qz,
			      t->sc, t->gi);
}

static int qt_dec(const qt *t, float *y)
{
	if (t->awq)
		return qtk_dequant_awq(t->qw, t->qz, t->sc, t->in, t->out, t->group, y);
	return qtk_dequant_gptq(t->qw, t->qz, t->sc, t->gi, t->in, t->out, t->group, t->ngroups,
				t->bits, t->version, y);
}

static size_t qt_bytes_qw(const qt *t)
{
	return t->awq ? (size_t)t->in * t->out / 8 * 4 : (size_t)t->in / 32 * t->bits * t->out * 4;
}

/* independent unpackers (the bit layouts of src/packing.h, written again from the formulas) */
static const int k_order[8] = { 0, 2, 4, 6, 1, 3, 5, 7 };
static int code_at(const qt *t, uint32_t o, uint32_t i)
{
	if (t->awq) {
		const uint32_t w = (uint32_t)t->qw[(uint64_t)i * (t->out / 8) + o / 8];
		for (int f = 0; f < 8; f++)
			if ((uint32_t)k_order[f] == o % 8)
				return (int)((w >> (4 * f)) & 15u);
		return -1;
	}
	const uint64_t bit = (uint64_t)(i % 32) * t->bits, row = (uint64_t)(i / 32) * t->bits;
	uint64_t v = (uint32_t)t->qw[(row + bit / 32) * t->out + o];
	if (bit / 32 + 1 < t->bits)
		v |= (uint64_t)(uint32_t)t->qw[(row + bit / 32 + 1) * t->out + o] << 32;
	return (int)((v >> (bit % 32)) & ((1u << t->bits) - 1));
}

static int zero_at(const qt *t, uint32_t o, uint32_t g)
{
	if (t->awq) {
		const uint32_t w = (uint32_t)t->qz[(uint64_t)g * (t->out / 8) + o / 8];
		for (int f = 0; f < 8; f++)
			if ((uint32_t)k_order[f] == o % 8)
				return (int)((w >> (4 * f)) & 15u);
		return -1;
	}
	const uint64_t zw = (uint64_t)t->out * t->bits / 32, bit = (uint64_t)o * t->bits;
	uint64_t v = (uint32_t)t->qz[g * zw + bit / 32];
	if (bit / 32 + 1 < zw)
		v |= (uint64_t)(uint32_t)t->qz[g * zw + bit / 32 + 1] << 32;
	const int stored = (int)((v >> (bit % 32)) & ((1u << t->bits) - 1));
	return stored + (t->version == 1 ? 1 : 0);
}

/* plain min-max RTN of one group (AutoAWQ / GPTQ find_params in F32, fp16 scale) */
static void rtn_group(const float *x, uint32_t n, unsigned bits, bool sym, float *y)
{
	const int maxq = (1 << bits) - 1;
	float mn = x[0], mx = x[0];
	for (uint32_t j = 1; j < n; j++) {
		mn = x[j] < mn ? x[j] : mn;
		mx = x[j] > mx ? x[j] : mx;
	}
	float s;
	int z;
	if (sym) {
		float a = fabsf(mn) > fabsf(mx) ? fabsf(mn) : fabsf(mx);
		if (a == 0)
			a = 1;
		s = 2 * a / (float)maxq;
		z = (maxq + 1) / 2;
	} else {
		float r = mx - mn;
		if (r < 1e-5f)
			r = 1e-5f;
		s = r / (float)maxq;
		z = (int)-nearbyintf(mn / s);
		z = z < 0 ? 0 : z > maxq ? maxq : z;
	}
	s = qtk_fp16_to_f32(qtk_f32_to_fp16(s));
	for (uint32_t j = 0; j < n; j++) {
		int q = (int)nearbyintf(x[j] / s) + z;
		q = q < 0 ? 0 : q > maxq ? maxq : q;
		y[j] = (float)(q - z) * s;
	}
}

/* rtn_group over the groups of a g_idx (act-order: scattered input channels) of row w[in] */
static void rtn_row_gidx(const float *w, uint32_t in, const int32_t *gi, uint32_t ngroups,
			 unsigned bits, bool sym, float *y)
{
	float *x = malloc(in * sizeof *x), *r = malloc(in * sizeof *r);
	uint32_t *idx = malloc(in * sizeof *idx);
	for (uint32_t g = 0; g < ngroups; g++) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < in; i++)
			if ((uint32_t)gi[i] == g) {
				idx[n] = i;
				x[n++] = w[i];
			}
		if (!n)
			continue;
		rtn_group(x, n, bits, sym, r);
		for (uint32_t k = 0; k < n; k++)
			y[idx[k]] = r[k];
	}
	free(x);
	free(r);
	free(idx);
}

/* ---------------------------------------------------------------- synthetic */

static void test_variant(int awq, uint32_t group, unsigned bits, bool sym, int version)
{
	const uint32_t out = 64, in = 256;
	const uint64_t n = (uint64_t)out * in;
	char name[64];
	if (awq)
		snprintf(name, sizeof name, "awq g%u", group);
	else
		snprintf(name, sizeof name, "gptq %ub g%u %s v%d", bits, group, sym ? "sym" : "asym",
			 version);
	float *w = malloc(n * 4), *y = malloc(n * 4), *y2 = malloc(n * 4), *r = malloc(n * 4);
	synth(w, out, in);
	qt t, t2;
	qt_init(&t, awq, out, in, group, bits, sym, version);
	qt_init(&t2, awq, out, in, group, bits, sym, version);
	CHECK(qt_enc(&t, w) == 0 && qt_dec(&t, y) == 0, "%s encode/decode", name);

	/* decoded = what qtk_fit_group assumed; packed codes/zeros where the formats put them */
	int fit_ok = 1, pack_ok = 1, zero0 = 0;
	uint8_t codes[256];
	for (uint32_t o = 0; o < out && fit_ok; o++)
		for (uint32_t g = 0; g < in / group; g++) {
			const float *x = w + (uint64_t)o * in + g * group;
			float s;
			int z;
			if (qtk_fit_group(x, group, t.bits, sym, !awq && version == 1 ? 1 : 0, &s, &z,
					  codes)) {
				fit_ok = 0;
				break;
			}
			if (qtk_f32_to_fp16(s) != t.sc[(uint64_t)g * out + o] || zero_at(&t, o, g) != z)
				pack_ok = 0;
			if (z == 0)
				zero0++;
			for (uint32_t j = 0; j < group; j++) {
				const float v = (float)((int)codes[j] - z) * s;
				if (memcmp(&v, &y[(uint64_t)o * in + g * group + j], 4) != 0)
					fit_ok = 0;
				if (code_at(&t, o, g * group + j) != codes[j])
					pack_ok = 0;
			}
			if (sym && z != 1 << (t.bits - 1))
				pack_ok = 0;
		}
	CHECK(fit_ok, "%s decodes to qtk_fit_group's values", name);
	CHECK(pack_ok, "%s packing (codes, zeros, scales) as AutoAWQ/AutoGPTQ", name);
	if (!awq && version == 1)
		CHECK(zero0 == 0, "%s: v1 never uses zero 0 (%d groups)", name, zero0);
	if (!awq)
		for (uint32_t i = 0; i < in; i++)
			if (t.gi[i] != (int32_t)(i / group)) {
				CHECK(0, "%s g_idx[%u] = %d", name, i, t.gi[i]);
				break;
			}

	/* no worse than plain min-max RTN */
	for (uint64_t o = 0; o < out; o++)
		for (uint32_t g = 0; g < in / group; g++)
			rtn_group(w + o * in + g * group, group, t.bits, sym, r + o * in + g * group);
	const double e_q = sse(w, y, n), e_r = sse(w, r, n);
	printf("%-22s rmse %.6g  rtn %.6g  ratio %.4f\n", name, sqrt(e_q / (double)n),
	       sqrt(e_r / (double)n), sqrt(e_q / e_r));
	CHECK(e_q <= e_r, "%s no worse than min-max RTN: %g vs %g", name, e_q, e_r);

	/* determinism */
	CHECK(qt_enc(&t2, w) == 0 && memcmp(t.qw, t2.qw, qt_bytes_qw(&t)) == 0 &&
		      memcmp(t.sc, t2.sc, (size_t)t.ngroups * out * 2) == 0,
	      "%s deterministic", name);

	/* exact re-encoding of decoded values */
	uint64_t at = 0;
	CHECK(qt_enc(&t2, y) == 0 && qt_dec(&t2, y2) == 0 && bits_eq(y, y2, n, &at),
	      "%s re-encoding its own output is exact (first diff at %llu: %g vs %g)", name,
	      (unsigned long long)at, (double)y[at], (double)y2[at]);
	if (awq) {
		qt g2;
		qt_init(&g2, 0, out, in, group, 4, false, 2);
		CHECK(qt_enc(&g2, y) == 0 && qt_dec(&g2, y2) == 0 && bits_eq(y, y2, n, &at),
		      "%s -> GPTQ v2 re-encoding exact", name);
		qt_free(&g2);
	}

	/* all-zero -> +0.0 */
	memset(w, 0, n * 4);
	int zok = qt_enc(&t2, w) == 0 && qt_dec(&t2, y2) == 0;
	for (uint64_t i = 0; i < n && zok; i++) {
		uint32_t u;
		memcpy(&u, &y2[i], 4);
		zok = u == 0;
	}
	CHECK(zok, "%s all-zero decodes to +0.0", name);

	/* NaN / Inf / huge / tiny */
	synth(w, out, in);
	w[5] = NAN;
	w[77] = INFINITY;
	w[300] = -INFINITY;
	w[1000] = 3e38f;
	for (uint32_t i = 0; i < group; i++)
		w[2 * in + i] = NAN;
	for (uint32_t i = 0; i < in; i++)
		w[3 * in + i] = 1e-30f * gauss();
	int fin = qt_enc(&t2, w) == 0 && qt_dec(&t2, y2) == 0;
	for (uint64_t i = 0; i < n && fin; i++)
		fin = isfinite(y2[i]);
	CHECK(fin, "%s non-finite inputs give finite values", name);

	qt_free(&t);
	qt_free(&t2);
	free(w);
	free(y);
	free(y2);
	free(r);
}

static void test_args(void)
{
	float w[64 * 64] = { 0 };
	int32_t qw[64 * 64], qz[64 * 64], gi[64];
	uint16_t sc[64 * 64];
	CHECK(qtk_quant_awq(w, 64, 64, 32, qw, qz, sc) == 0, "awq 64x64 g32");
	CHECK(qtk_quant_awq(w, 60, 64, 32, qw, qz, sc) == -1, "awq out %% 8");
	CHECK(qtk_quant_awq(w, 64, 64, 48, qw, qz, sc) == -1, "awq in %% group");
	CHECK(qtk_quant_awq(w, 64, 64, 0, qw, qz, sc) == -1, "awq group 0");
	CHECK(qtk_quant_gptq(w, 64, 64, 32, 5, false, 1, qw, qz, sc, gi) == -1, "gptq 5 bits");
	CHECK(qtk_quant_gptq(w, 64, 64, 32, 4, false, 3, qw, qz, sc, gi) == -1, "gptq version 3");
	CHECK(qtk_quant_gptq(w, 64, 48, 16, 4, false, 1, qw, qz, sc, gi) == -1, "gptq in %% 32");
	CHECK(qtk_quant_gptq(w, 20, 64, 32, 3, false, 1, qw, qz, sc, gi) == -1, "gptq out*bits %% 32");
	float s;
	int z;
	uint8_t c[4];
	CHECK(qtk_fit_group(w, 0, 4, false, 0, &s, &z, c) == -1, "fit n 0");
	CHECK(qtk_fit_group(w, 4, 9, false, 0, &s, &z, c) == -1, "fit 9 bits");
	CHECK(qtk_fit_group(w, 4, 4, false, 16, &s, &z, c) == -1, "fit zmin 16");
	const float x[4] = { 0.5f, 0.5f, 0.5f, 0.5f };
	CHECK(qtk_fit_group(x, 4, 4, false, 0, &s, &z, c) == 0 && (float)(c[0] - z) * s == 0.5f,
	      "constant group exact: s %g z %d q %d", (double)s, z, c[0]);
	const float xs[4] = { -0.5f, 0.25f, 0.f, -0.25f };
	CHECK(qtk_fit_group(xs, 4, 2, true, 0, &s, &z, c) == 0 && z == 2 &&
		      (float)(c[0] - z) * s == -0.5f && (float)(c[1] - z) * s == 0.25f &&
		      (float)(c[3] - z) * s == -0.25f,
	      "sym exact grid: s %g z %d", (double)s, z);
}

/* thread safety: two threads encoding concurrently give the single-threaded bytes */
typedef struct job {
	const float *w;
	qt t;
	int rc;
} job;

static void *run_job(void *arg)
{
	job *j = arg;
	j->rc = qt_enc(&j->t, j->w);
	return NULL;
}

static void test_threads(void)
{
	const uint32_t out = 64, in = 256;
	float *w = malloc((size_t)out * in * 4);
	synth(w, out, in);
	qt ref;
	qt_init(&ref, 0, out, in, 64, 3, false, 2);
	CHECK(qt_enc(&ref, w) == 0, "threads: reference");
	job j[2];
	pthread_t th[2];
	for (int k = 0; k < 2; k++) {
		j[k].w = w;
		qt_init(&j[k].t, 0, out, in, 64, 3, false, 2);
		pthread_create(&th[k], NULL, run_job, &j[k]);
	}
	for (int k = 0; k < 2; k++) {
		pthread_join(th[k], NULL);
		CHECK(j[k].rc == 0 && memcmp(j[k].t.qw, ref.qw, qt_bytes_qw(&ref)) == 0 &&
			      memcmp(j[k].t.qz, ref.qz, (size_t)ref.ngroups * out * 3 / 32 * 4) == 0 &&
			      memcmp(j[k].t.sc, ref.sc, (size_t)ref.ngroups * out * 2) == 0,
		      "thread %d: same bytes", k);
		qt_free(&j[k].t);
	}
	qt_free(&ref);
	free(w);
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

static void test_fixture_variant(const char *fx, qtk_model *src, const char *dir, int awq,
				 unsigned bits, uint32_t group, bool sym, bool v2too)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/hf/tiny-llama/%s", fx, dir);
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *ref = qtk_open(p, &e);
	CHECK(ref != NULL, "open %s: %s", dir, e.msg);
	if (!ref)
		return;
	printf("\n%s: per-layer RMSE vs the fp16 weights. ref = the fixture as engines decode it;"
	       " rtn = plain min-max RTN over the fixture's groups (what the quantizer meant);"
	       " ours = %s\n", dir, awq ? "AWQ" : sym ? "GPTQ sym v1" : "GPTQ v1 (zero >= 1)");
	printf("%-26s %10s %10s %10s %8s %8s %8s %7s\n", "layer", "ref", "rtn", "ours", "ours/ref",
	       "ours/rtn", v2too ? "v2/rtn" : "", "ref=rtn");
	double s_ref = 0, m_ref = 0, s_rtn = 0, m_rtn = 0, s_v2 = 0, m_v2 = 0, tot = 0, same = 0;
	int nl = 0, nexact = 0;
	for (size_t i = 0; i < ref->ntensors; i++) {
		const qtk_tensor *rt = &ref->tensors[i];
		if (rt->layout.kind != (awq ? QTK_LAYOUT_AWQ : QTK_LAYOUT_GPTQ))
			continue;
		const qtk_tensor *st = qtk_tensor_find(src, rt->name);
		CHECK(st != NULL, "%s: source %s", dir, rt->name);
		if (!st)
			continue;
		const uint32_t out = (uint32_t)st->shape[0], in = (uint32_t)st->shape[1];
		const uint64_t n = (uint64_t)out * in;
		float *w = decode_alloc(src, st), *yr = decode_alloc(ref, rt), *y = malloc(n * 4),
		      *r = malloc(n * 4);
		uint8_t *gib = NULL;
		if (!awq && rt->nparts > 3)
			qtk_read_part_alloc(ref, rt, 3, &gib);
		qt t;
		qt_init(&t, awq, out, in, group, bits, sym, 1);
		if (w && yr && (awq || gib) && qt_enc(&t, w) == 0 && qt_dec(&t, y) == 0) {
			/* the reference quantizer's intended values: RTN over its groups */
			for (uint64_t o = 0; o < out; o++) {
				if (awq) {
					for (uint32_t g = 0; g < in / group; g++)
						rtn_group(w + o * in + g * group, group, bits, sym,
							  r + o * in + g * group);
				} else {
					rtn_row_gidx(w + o * in, in, (const int32_t *)(void *)gib,
						     in / group, bits, sym, r + o * in);
				}
			}
			uint64_t eqn = 0;
			for (uint64_t k = 0; k < n; k++)
				eqn += memcmp(&r[k], &yr[k], 4) == 0;
			same += (double)eqn;
			tot += (double)n;
			const double er = sse(w, yr, n), en = sse(w, r, n), eq = sse(w, y, n);
			const double rr = sqrt(eq / er), rn = sqrt(eq / en);
			double r2 = 0;
			if (v2too) {
				qt t2;
				qt_init(&t2, 0, out, in, group, bits, sym, 2);
				if (qt_enc(&t2, w) == 0 && qt_dec(&t2, y) == 0)
					r2 = sqrt(sse(w, y, n) / en);
				qt_free(&t2);
			}
			char nm[64];
			const char *sn = rt->name + (strncmp(rt->name, "model.layers.", 13) ? 0 : 13);
			snprintf(nm, sizeof nm, "%.*s", (int)(strlen(sn) > 7 ? strlen(sn) - 7 : strlen(sn)), sn);
			printf("%-26s %10.5g %10.5g %10.5g %8.4f %8.4f %8.4f %6.1f%%\n", nm,
			       sqrt(er / (double)n), sqrt(en / (double)n), sqrt(eq / (double)n), rr, rn, r2,
			       100.0 * (double)eqn / (double)n);
			s_ref += rr;
			m_ref = rr > m_ref ? rr : m_ref;
			s_rtn += rn;
			m_rtn = rn > m_rtn ? rn : m_rtn;
			s_v2 += r2;
			m_v2 = r2 > m_v2 ? r2 : m_v2;
			nl++;
			if (awq)
				CHECK(rr <= 1.0, "%s %s ratio %.5f", dir, rt->name, rr);
			/* the fixture's decoded values re-encoded (same bits/group; asym as v2, which
			 * can hold every zero) decode bit-exactly, unless the fixture has v1 zero
			 * overflow (zero 2^bits is not representable) */
			qt t3;
			qt_init(&t3, awq, out, in, group, bits, sym, 2);
			const bool overflow = eqn != n && !awq;
			const bool exact = qt_enc(&t3, yr) == 0 && qt_dec(&t3, y) == 0 && bits_eq(yr, y, n, NULL);
			nexact += exact;
			if (!overflow && (awq || rt->nparts < 4 || !memcmp(gib, t.gi, in * 4)))
				CHECK(exact, "%s %s: re-encoding the fixture's values is exact", dir, rt->name);
			qt_free(&t3);
			/* GPTQ: no worse than the reference quantizer's own RTN (for act-order files the
			 * reference groups are scattered channels; ours are contiguous) */
			CHECK(rn <= 1.0, "%s %s ours/rtn %.5f", dir, rt->name, rn);
		} else {
			CHECK(0, "%s %s: decode/encode failed", dir, rt->name);
		}
		qt_free(&t);
		free(gib);
		free(w);
		free(yr);
		free(y);
		free(r);
	}
	CHECK(nl > 0, "%s: layers found", dir);
	if (nl) {
		printf("SUMMARY %-13s %2d layers: ours/ref mean %.4f max %.4f; ours/rtn mean %.4f max %.4f",
		       dir, nl, s_ref / nl, m_ref, s_rtn / nl, m_rtn);
		if (v2too)
			printf("; v2/rtn mean %.4f max %.4f", s_v2 / nl, m_v2);
		printf("; fixture == RTN for %.2f%% of weights; re-encoded exactly: %d/%d layers\n",
		       100.0 * same / tot, nexact, nl);
	}
	qtk_close(ref);
}

int main(void)
{
	test_args();
	static const uint32_t awq_groups[3] = { 32, 64, 128 };
	for (int i = 0; i < 3; i++)
		test_variant(1, awq_groups[i], 4, false, 0);
	static const unsigned gbits[4] = { 2, 3, 4, 8 };
	for (int b = 0; b < 4; b++)
		for (int s = 0; s < 2; s++)
			for (int v = 1; v <= 2; v++)
				test_variant(0, gbits[b] == 2 ? 64 : 128, gbits[b], s == 1, v);
	test_variant(0, 32, 4, true, 1);
	test_threads();

	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures absent: RMSE against AutoAWQ / AutoGPTQ fixtures");
		return T_DONE();
	}
	char p[1024];
	snprintf(p, sizeof p, "%s/hf/tiny-llama/fp16", fx);
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model *src = qtk_open(p, &e);
	CHECK(src != NULL, "open fp16: %s", e.msg);
	if (src) {
		/* v2 (zero 0 allowed) is also reported where it can matter */
		test_fixture_variant(fx, src, "awq-g128", 1, 4, 128, false, false);
		test_fixture_variant(fx, src, "gptq-4-128-0", 0, 4, 128, false, true);
		test_fixture_variant(fx, src, "gptq-4-128-1", 0, 4, 128, false, false);
		test_fixture_variant(fx, src, "gptq-8-128-0", 0, 8, 128, false, false);
		test_fixture_variant(fx, src, "gptq-3-128-0", 0, 3, 128, false, true);
		test_fixture_variant(fx, src, "gptq-2-64-0", 0, 2, 64, false, true);
		test_fixture_variant(fx, src, "gptq-4-32-1s", 0, 4, 32, true, false);
		qtk_close(src);
	}
	return T_DONE();
}
