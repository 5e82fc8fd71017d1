/* test_awq_step.c - the AWQ/GPTQ group search's kernels (src/quant_awq_ev.h: qtk_awq_ev_sum,
 * _codes, _refine3, generic and AVX2) against a scalar statement of the search's rule
 * (awq_rule.h): t = x * (1/s) clamped to +-(2^22 - 1), q = round-half-even(t) + z clamped to
 * [0, maxq], then the neighbour on the side of the residual x - (q - z) * s when its decoded value
 * is closer (squares compared in float); the error sums (x - (q - z) * s)^2 in double, element j
 * into lane j mod 8, the lanes folded ((0+1)+(2+3))+((4+5)+(6+7)).
 *
 * The kernels round in a cheaper order and skip the neighbour test for lanes far from a
 * midpoint, the error sum stops early on a cheaper fold, and a refinement round makes its three
 * zeros' sums in one pass; each must give the rule's codes and sums exactly. The inputs aim at
 * the edges of those shortcuts: values at and a few ulps around the midpoints (k + 1/2) s and around (k + 1/2 +- 2^-8) s, on the grid, beyond both ends of the
 * range, subnormal and zero (both signs), +-1e8, with fp16 scales from 2^-24 to 65504, zeros
 * 0, 1, the middle and maxq, and 1 to 8 bits. */
#include "t.h"
#include "quant.h"
#include "dequant.h"
#include "awq_rule.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
	return (uint32_t)(t_xorshift(&rng) >> 32);
}
static float unif(void) { return (float)(rnd() >> 8) * (1.0f / 16777216.0f); }


enum { N = 64 };

typedef struct kern {
	const char *name;
	double (*sum)(const float *, const double *, uint32_t, float, float, float, double);
	void (*codes)(const float *, const double *, uint32_t, float, float, float, uint8_t *);
	void (*refine3)(const float *, const double *, uint32_t, float, float, float, double, double *,
			double *, double *);
} kern;

static uint64_t n_cases, n_neigh, n_bad_codes, n_bad_sum, n_bad_early, n_bad_refine, n_early;

/* a refinement round's sums by the rule: for zero zz, sum k x in element order, sum k^2 */
static void ref_ls(const float *x, float s, int zz, int maxq, double *sxq, double *sqq)
{
	*sxq = 0;
	*sqq = 0;
	for (int j = 0; j < N; j++) {
		const int k = rule_code(x[j], s, zz, maxq) - zz;
		*sxq += (double)k * (double)x[j];
		*sqq += (double)(k * k);
	}
}

/* one case: the kernels against the rule */
static void run_case(const kern *k, const float *x, float s, int z, int maxq)
{
	double xd[N];
	uint8_t ref[N], c1[N];
	for (int j = 0; j < N; j++) {
		xd[j] = (double)x[j];
		ref[j] = (uint8_t)rule_code(x[j], s, z, maxq);
	}
	const double want = rule_sum(x, N, s, z, ref);
	const float zf = (float)z, mf = (float)maxq;
	k->codes(x, xd, N, s, zf, mf, c1);
	n_cases++;
	if (memcmp(c1, ref, N) != 0) {
		if (n_bad_codes++ < 5)
			for (int j = 0; j < N; j++)
				if (c1[j] != ref[j])
					printf("  %s: x %a s %a z %d maxq %d: code %d, rule %d\n", k->name,
					       (double)x[j], (double)s, z, maxq, c1[j], ref[j]);
	}
	const double full = k->sum(x, xd, N, s, zf, mf, INFINITY);
	const double above = k->sum(x, xd, N, s, zf, mf, nextafter(want, INFINITY));
	if (memcmp(&full, &want, sizeof full) != 0 || memcmp(&above, &want, sizeof above) != 0) {
		if (n_bad_sum++ < 5)
			printf("  %s: s %a z %d maxq %d: sums %a %a, rule %a\n", k->name, (double)s, z,
			       maxq, full, above, want);
	}
	/* the refinement round's pass around z: the sums for each zero within [0, maxq] */
	double sxq[3], sqq[3], e2[2], asum = 0;
	for (int j = 0; j < N; j++)
		asum += fabs(xd[j]);
	/* the sums in lanes where the bound allows it, and in element order (no bound) */
	for (int pass = 0; pass < 2; pass++) {
	k->refine3(x, xd, N, s, zf, mf, pass ? INFINITY : asum * (1 + 0x1p-20), sxq, sqq, e2);
	for (int d = 0; d < 3; d++) {
		const int zz = z + d - 1;
		if (zz < 0 || zz > maxq)
			continue;
		double rx, rq;
		ref_ls(x, s, zz, maxq, &rx, &rq);
		bool ok = memcmp(&rx, &sxq[d], sizeof rx) == 0 && rq == sqq[d];
		if (d != 1) {
			uint8_t cz[N];
			for (int j = 0; j < N; j++)
				cz[j] = (uint8_t)rule_code(x[j], s, zz, maxq);
			const double ez = rule_sum(x, N, s, zz, cz);
			ok = ok && memcmp(&ez, &e2[d / 2], sizeof ez) == 0;
		}
		if (!ok && n_bad_refine++ < 5)
			printf("  %s: s %a z %d maxq %d: refine3 zero %d: %a %a, rule %a %a\n", k->name,
			       (double)s, z, maxq, zz, sxq[d], sqq[d], rx, rq);
	}
	}
	/* a limit the error reaches: any value >= limit; over the values four times (the early test
	 * comes after every 64 values, not after the last) */
	float x4[4 * N];
	double xd4[4 * N];
	uint8_t ref4[4 * N];
	for (int j = 0; j < 4 * N; j++) {
		x4[j] = x[j % N];
		xd4[j] = xd[j % N];
		ref4[j] = ref[j % N];
	}
	const double want4 = rule_sum(x4, 4 * N, s, z, ref4);
	const double full4 = k->sum(x4, xd4, 4 * N, s, zf, mf, INFINITY);
	if (memcmp(&full4, &want4, sizeof full4) != 0 && n_bad_sum++ < 5)
		printf("  %s: s %a z %d maxq %d: sum of 4N %a, rule %a\n", k->name, (double)s, z, maxq,
		       full4, want4);
	/* the last N values 0 (they add +0): the test after 3N values sees the whole sum, folded
	 * its cheaper way, against a limit just above it */
	for (int j = 3 * N; j < 4 * N; j++) {
		x4[j] = 0.f;
		xd4[j] = 0.0;
		ref4[j] = (uint8_t)rule_code(0.f, s, z, maxq);
	}
	const double want3 = rule_sum(x4, 4 * N, s, z, ref4);
	const double above3 = k->sum(x4, xd4, 4 * N, s, zf, mf, nextafter(want3, INFINITY));
	if (memcmp(&above3, &want3, sizeof above3) != 0 && n_bad_sum++ < 5)
		printf("  %s: s %a z %d maxq %d: sum of 3N and N zeros %a, rule %a\n", k->name,
		       (double)s, z, maxq, above3, want3);
	for (int j = 3 * N; j < 4 * N; j++) {
		x4[j] = x[j % N];
		xd4[j] = xd[j % N];
		ref4[j] = ref[j % N];
	}
	const double lims[] = { want4, want4 * 0.5, want4 * 0.999999, want4 * 0.1, 0.0 };
	for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
		const double r = k->sum(x4, xd4, 4 * N, s, zf, mf, lims[i]);
		if (!(r >= lims[i]) && n_bad_early++ < 5)
			printf("  %s: s %a z %d: limit %a gave %a\n", k->name, (double)s, z, lims[i], r);
		if (memcmp(&r, &want4, sizeof r) != 0)
			n_early++;
	}
}

/* x[0..N) around the midpoints and the fast path's edges for (s, z, maxq) */
static void fill(float *x, float s, int z, int maxq, unsigned kind)
{
	for (int j = 0; j < N; j++) {
		const int k = (int)(rnd() % (unsigned)(maxq + 3)) - z - 1; /* includes one beyond each end */
		float v;
		switch (kind % 6) {
		case 0: /* midpoint, +- a few ulps */
			v = ((float)k + 0.5f) * s;
			for (int u = (int)(rnd() % 7) - 3; u; u += u > 0 ? -1 : 1)
				v = nextafterf(v, u > 0 ? INFINITY : -INFINITY);
			break;
		case 1: /* around the fast path's threshold */
			v = ((float)k + ((rnd() & 1) ? 0.5f - 0x1p-8f : -0.5f + 0x1p-8f)) * s;
			for (int u = (int)(rnd() % 9) - 4; u; u += u > 0 ? -1 : 1)
				v = nextafterf(v, u > 0 ? INFINITY : -INFINITY);
			break;
		case 2: /* on the grid, and the float next to it */
			v = (float)k * s;
			if (rnd() & 1)
				v = nextafterf(v, (rnd() & 1) ? INFINITY : -INFINITY);
			break;
		case 3: /* plain */
			v = ((float)k + unif() - 0.5f) * s;
			break;
		case 4: { /* extremes */
			static const float e[] = { 0.f, -0.f, 0x1p-149f, -0x1p-149f, 0x1p-126f, 1e8f, -1e8f,
				                   1e-30f, -1e-30f, 3e7f };
			v = e[rnd() % (sizeof e / sizeof e[0])];
			break;
		}
		default: /* beyond the ends by a little and a lot */
			v = ((rnd() & 1) ? (float)(maxq - z) + 0.5f + unif() * 4.f
			                 : -(float)z - 0.5f - unif() * 4.f) * s * ((rnd() % 4) ? 1.f : 1000.f);
			break;
		}
		if (!(v >= -1e8f && v <= 1e8f))
			v = v > 0 ? 1e8f : -1e8f;
		x[j] = v;
	}
}

static void run_kernel(const kern *k)
{
	static const uint16_t hs[] = { 0x0001, 0x0003, 0x03ff, 0x0400, 0x1000, 0x2a3c, 0x3c00,
		                       0x3c01, 0x4b00, 0x5640, 0x7bff };
	n_cases = n_bad_codes = n_bad_sum = n_bad_early = n_neigh = n_bad_refine = n_early = 0;
	float x[N];
	for (unsigned bits = 1; bits <= 8; bits++) {
		const int maxq = (1 << bits) - 1;
		const int zs[] = { 0, 1 < maxq ? 1 : 0, (maxq + 1) / 2, maxq };
		for (size_t hi = 0; hi < sizeof hs / sizeof hs[0] + 6; hi++) {
			uint16_t h = hi < sizeof hs / sizeof hs[0] ? hs[hi] : (uint16_t)(0x0400 + rnd() % 0x7000);
			const float s = qtk_fp16_to_f32(h);
			for (size_t zi = 0; zi < 4; zi++)
				for (unsigned kind = 0; kind < 24; kind++) {
					fill(x, s, zs[zi], maxq, kind);
					for (int j = 0; j < N; j++) {
						/* does the neighbour rule move this value? (the inputs reach it) */
						const float t = x[j] * (1.f / s);
						const float q = ((t + 12582912.f) - 12582912.f) + (float)zs[zi];
						if (q >= 0.f && q <= (float)maxq && rule_code(x[j], s, zs[zi], maxq) != (int)q)
							n_neigh++;
					}
					run_case(k, x, s, zs[zi], maxq);
				}
		}
	}
	CHECK(n_bad_codes == 0, "%s: codes differ from the rule in %llu of %llu cases", k->name,
	      (unsigned long long)n_bad_codes, (unsigned long long)n_cases);
	CHECK(n_bad_sum == 0, "%s: sums differ from the rule in %llu of %llu cases", k->name,
	      (unsigned long long)n_bad_sum, (unsigned long long)n_cases);
	CHECK(n_bad_refine == 0, "%s: refinement sums differ from the rule in %llu cases", k->name,
	      (unsigned long long)n_bad_refine);
	CHECK(n_bad_early == 0, "%s: an early sum below its limit in %llu cases", k->name,
	      (unsigned long long)n_bad_early);
	CHECK(n_early > 1000, "%s: the sums stop early (%llu times)", k->name,
	      (unsigned long long)n_early);
	CHECK(n_neigh > 100, "%s: the inputs reach the neighbour rule (%llu values)", k->name,
	      (unsigned long long)n_neigh);
	printf("%s: %llu cases, %llu values moved by the neighbour rule, %llu early sums\n", k->name,
	       (unsigned long long)n_cases, (unsigned long long)n_neigh, (unsigned long long)n_early);
}

int main(void)
{
	const kern c = { "generic", qtk_awq_ev_sum_c, qtk_awq_ev_codes_c, qtk_awq_ev_refine3_c };
	run_kernel(&c);
	if (qtk_awq_have_avx2() && qtk_simd_avx2()) {
		const kern a = { "avx2", qtk_awq_ev_sum_avx2, qtk_awq_ev_codes_avx2,
			         qtk_awq_ev_refine3_avx2 };
		rng = 0x9E3779B97F4A7C15ull;
		run_kernel(&a);
	} else {
		T_SKIP("AVX2 kernels: not built or not this CPU");
	}
	if (qtk_awq_have_avx512() && qtk_simd_avx512()) {
		const kern a = { "avx512", qtk_awq_ev_sum_avx512, qtk_awq_ev_codes_avx512,
			         qtk_awq_ev_refine3_avx512 };
		rng = 0x9E3779B97F4A7C15ull;
		run_kernel(&a);
	} else {
		T_SKIP("AVX-512 kernels: not built or not this CPU");
	}
	return T_DONE();
}
