/* test_awq_search.c - the AWQ/GPTQ group search (qtk_fit_group, src/quant_awq.c) against the
 * same search written plainly here: every candidate in the documented order evaluated in full
 * by the scalar rule (awq_rule.h, as test_awq_step.c holds the kernels to it), the incumbent replaced only
 * by a strictly lower error, no memo, no bounds, no early stops, no merged passes. The library
 * skips work it can prove cannot change the winner (pairs already tried, early stops, lower
 * bounds, one pass for a refinement round's sums); whatever it skips, its scale, zero and codes
 * must be this search's, bit for bit, on the dispatched kernels and (in a child process) on
 * QTK_SIMD=generic.
 *
 * Groups: Gaussian, uniform, with outliers, on an AWQ grid (which must come back exactly), on
 * a q4_k-like grid a*q - b with a an fp16 times a 6-bit integer (the k-quant re-fit), constant,
 * all zero, tiny, with NaN and infinities; 1 to 8 bits, symmetric and asymmetric, zmin 0 and 1,
 * n from 1 to 200. */
#include "t.h"
#include "quant.h"
#include "fp16.h"
#include "awq_rule.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng = 0xD1B54A32D192ED03ull;
static uint32_t rnd(void) { return (uint32_t)(t_xorshift(&rng) >> 32); }
static float unif(void) { return (float)(rnd() >> 8) * (1.0f / 16777216.0f); }
static float gauss(void) { return (unif() + unif() + unif() + unif() - 2.0f) * 1.7320508f; }

/* ---- the rule (awq_rule.h) ---- */

static int rint_i(float f)
{
	if (!(f >= -4194303.f))
		f = -4194303.f;
	if (f > 4194303.f)
		f = 4194303.f;
	return (int)((f + 12582912.f) - 12582912.f);
}


/* the squared error of (s, z), element j into lane j mod 8, lanes folded in the fixed order */
static double ref_err(const float *x, uint32_t n, float s, int z, int maxq)
{
	double l[8] = { 0 };
	if (s == 0.f) {
		double e = 0;
		for (uint32_t j = 0; j < n; j++)
			e += (double)x[j] * (double)x[j];
		return e;
	}
	for (uint32_t j = 0; j < n; j++) {
		const float y = ((float)rule_code(x[j], s, z, maxq) - (float)z) * s;
		const double d = (double)x[j] - (double)y;
		l[j % 8] += d * d;
	}
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* ---- the search, plainly ---- */

typedef struct rs {
	const float *x;
	uint32_t n;
	int maxq, zlo, zhi;
	float xmin, xmax;
	double err;
	uint16_t h;
	int z;
} rs;

static int clampz(const rs *r, int z) { return z < r->zlo ? r->zlo : z > r->zhi ? r->zhi : z; }

static uint16_t scale_bits(float s)
{
	if (!(s > 0.f))
		return 0;
	uint16_t h = qtk_f2h(s);
	if ((h & 0x7fffu) > 0x7bffu)
		h = 0x7bff;
	return h;
}

static void try_hz(rs *r, uint16_t h, int z)
{
	if (h == 0 || h > 0x7bff)
		return;
	z = clampz(r, z);
	const double e = ref_err(r->x, r->n, qtk_h2f(h), z, r->maxq);
	if (e < r->err) {
		r->err = e;
		r->h = h;
		r->z = z;
	}
}

static void try_scale(rs *r, float s, float lo, float hi, bool both)
{
	const uint16_t h = scale_bits(s);
	if (!h)
		return;
	const float sh = qtk_h2f(h);
	if (r->zlo == r->zhi) {
		try_hz(r, h, r->zlo);
		return;
	}
	const int z1 = clampz(r, rint_i(-lo / s)), z2 = clampz(r, rint_i(-lo / sh));
	try_hz(r, h, z1);
	if (z2 != z1)
		try_hz(r, h, z2);
	if (both) {
		const int z3 = clampz(r, rint_i((float)r->maxq - hi / sh));
		if (z3 != z1 && z3 != z2)
			try_hz(r, h, z3);
	}
}

static float fp16r(float f) { return qtk_h2f(qtk_f2h(f)); }

/* the first min(n, 8) values lie within 1e-3 of a step of s from lo */
static bool on_grid(const rs *r, float s, float lo)
{
	for (uint32_t j = 0; j < r->n && j < 8; j++) {
		const float t = (r->x[j] - lo) / s;
		const float d = t - (float)rint_i(t);
		if (d > 1e-3f || d < -1e-3f)
			return false;
	}
	return true;
}

static void refine_round(rs *r)
{
	const uint16_t h = r->h;
	const int z = r->z;
	const float s = qtk_h2f(h);
	for (int d = 0; d < 3; d++) {
		const int zz = z + d - 1;
		if (zz < r->zlo || zz > r->zhi)
			continue;
		double sxq = 0, sqq = 0;
		for (uint32_t j = 0; j < r->n; j++) {
			const int k = rule_code(r->x[j], s, zz, r->maxq) - zz;
			sxq += (double)k * (double)r->x[j];
			sqq += (double)k * (double)k;
		}
		if (sqq > 0 && sxq > 0)
			try_hz(r, scale_bits((float)(sxq / sqq)), zz);
		if (d != 1)
			try_hz(r, h, zz);
	}
	for (int k = -1; k <= 1; k += 2) {
		const int hb = (int)h + k;
		if (hb > 0 && hb <= 0x7bff)
			try_hz(r, (uint16_t)hb, z);
	}
}

static void ref_fit(const float *in, uint32_t n, unsigned bits, bool sym, int zmin, float *x,
		    uint16_t *h_out, int *z_out)
{
	rs r;
	r.maxq = (1 << bits) - 1;
	for (uint32_t j = 0; j < n; j++) {
		const float v = in[j] != in[j] ? 0.f : in[j];
		x[j] = v > 1e8f ? 1e8f : v < -1e8f ? -1e8f : v;
	}
	r.x = x;
	r.n = n;
	r.xmin = r.xmax = x[0];
	for (uint32_t j = 0; j < n; j++) {
		r.xmin = x[j] < r.xmin ? x[j] : r.xmin;
		r.xmax = x[j] > r.xmax ? x[j] : r.xmax;
	}
	r.zlo = sym ? 1 << (bits - 1) : zmin;
	r.zhi = sym ? 1 << (bits - 1) : r.maxq;
	r.h = 0;
	r.z = clampz(&r, 1 << (bits - 1));
	r.err = ref_err(x, n, 0.f, 0, r.maxq);
	const int maxq = r.maxq;
	if (r.err != 0) {
		/* one allowed zero (also asymmetric 1 bit with zmin 1): the symmetric candidates */
		const bool one = r.zlo == r.zhi;
		const float lo0 = r.xmin < 0.f ? r.xmin : 0.f, hi0 = r.xmax > 0.f ? r.xmax : 0.f;
		if (one) {
			const int neg = r.zlo, pos = maxq - r.zlo;
			const float amax = -lo0 > hi0 ? -lo0 : hi0;
			for (int i = 0; i <= 8; i++) {
				const float p = 1.f - 0.05f * (float)i;
				try_scale(&r, p * 2.f * amax / (float)maxq, 0.f, 0.f, false);
				try_scale(&r, p * amax / (float)neg, 0.f, 0.f, false);
			}
			for (int k = 1; k < neg; k++)
				if (lo0 < 0.f && on_grid(&r, -lo0 / (float)k, 0.f))
					try_scale(&r, -lo0 / (float)k, 0.f, 0.f, false);
			for (int k = 1; k < pos; k++)
				if (hi0 > 0.f && on_grid(&r, hi0 / (float)k, 0.f))
					try_scale(&r, hi0 / (float)k, 0.f, 0.f, false);
			if (hi0 > 0.f && pos > 0)
				try_scale(&r, hi0 / (float)pos, 0.f, 0.f, false);
		} else {
			const float lo1 = r.xmin, hi1 = r.xmax;
			const bool two = lo0 != lo1 || hi0 != hi1;
			for (int i = 0; i <= 8; i++) {
				const float p = 1.f - 0.05f * (float)i;
				if (hi1 > lo1)
					try_scale(&r, (p * hi1 - p * lo1) / (float)maxq, p * lo1, p * hi1, false);
				if (two && i == 0)
					try_scale(&r, (p * hi0 - p * lo0) / (float)maxq, p * lo0, p * hi0, false);
			}
			/* AutoAWQ's pseudo_quantize_tensor in fp16 arithmetic */
			float rg = fp16r(r.xmax - r.xmin);
			const float eps = fp16r(1e-5f);
			if (rg < eps)
				rg = eps;
			const uint16_t ha = scale_bits(fp16r(rg / (float)maxq));
			if (ha)
				try_hz(&r, ha, -rint_i(fp16r(r.xmin / qtk_h2f(ha))));
			for (int k = 1; k < maxq; k++) {
				if (hi1 > lo1 && on_grid(&r, (hi1 - lo1) / (float)k, lo1))
					try_scale(&r, (hi1 - lo1) / (float)k, lo1, hi1, true);
				if (two && on_grid(&r, (hi0 - lo0) / (float)k, lo0))
					try_scale(&r, (hi0 - lo0) / (float)k, lo0, hi0, true);
			}
			if (hi1 > lo1)
				try_scale(&r, (hi1 - lo1) / (float)maxq, lo1, hi1, true);
		}
		for (int it = 0; it < 4 && r.h; it++) {
			const double before = r.err;
			refine_round(&r);
			if (!(r.err < before))
				break;
		}
	}
	*h_out = r.h;
	*z_out = r.z;
}

/* ---- groups ---- */

enum { NMAX = 200 };

static uint32_t fill(float *x, unsigned kind, unsigned bits)
{
	static const uint32_t sizes[] = { 32, 32, 128, 64, 16, 8 };
	uint32_t n = kind % 3 == 2 ? 1 + rnd() % NMAX : sizes[rnd() % 6];
	const int maxq = (1 << bits) - 1;
	const float scale = ldexpf(1.f, (int)(rnd() % 40) - 30);
	switch (kind % 9) {
	case 0: /* Gaussian */
		for (uint32_t j = 0; j < n; j++)
			x[j] = gauss() * scale;
		break;
	case 1: /* uniform, shifted */
		for (uint32_t j = 0; j < n; j++)
			x[j] = (unif() * 2.f - 0.5f) * scale;
		break;
	case 2: /* outliers */
		for (uint32_t j = 0; j < n; j++)
			x[j] = gauss() * scale * (rnd() % 16 == 0 ? 40.f : 1.f);
		break;
	case 3: { /* an AWQ grid: (q - z) * s, s an fp16 */
		const float s = qtk_h2f((uint16_t)(0x0400 + rnd() % 0x7000));
		const int z = (int)(rnd() % (uint32_t)(maxq + 1));
		for (uint32_t j = 0; j < n; j++)
			x[j] = (float)((int)(rnd() % (uint32_t)(maxq + 1)) - z) * s;
		break;
	}
	case 4:
	case 5: { /* q4_k-like: a * q - b, a = d * sc, b = dmin * m (F32 products of fp16s) */
		const float d = qtk_h2f(qtk_f2h(unif() * scale * 0.05f + 1e-6f));
		const float dm = qtk_h2f(qtk_f2h(unif() * scale * 0.05f));
		const float a = d * (float)(1 + rnd() % 63), b = dm * (float)(rnd() % 64);
		for (uint32_t j = 0; j < n; j++)
			x[j] = a * (float)(rnd() % 16) - b;
		break;
	}
	case 6: /* constant, or all zero */
		for (uint32_t j = 0; j < n; j++)
			x[j] = rnd() % 2 ? 0.f : scale * 0.3f;
		if (rnd() % 2)
			for (uint32_t j = 0; j < n; j++)
				x[j] = x[0];
		break;
	case 7: /* tiny: subnormal floats, fp16 underflow */
		for (uint32_t j = 0; j < n; j++)
			x[j] = gauss() * ldexpf(1.f, -(int)(rnd() % 40) - 100);
		break;
	default: /* NaN, infinities, huge */
		for (uint32_t j = 0; j < n; j++) {
			const uint32_t c = rnd() % 12;
			x[j] = c == 0 ? NAN : c == 1 ? INFINITY : c == 2 ? -INFINITY : c == 3 ? 3e9f
									  : gauss() * scale;
		}
		break;
	}
	return n;
}

/* number of mismatches over the groups (0: every group gave the plain search's result) */
static unsigned run(const char *mode, unsigned groups)
{
	unsigned bad = 0, exact_bad = 0;
	float x[NMAX], xs[NMAX];
	uint8_t codes[NMAX];
	for (unsigned g = 0; g < groups; g++) {
		const unsigned bits = g % 4 == 0 ? 1 + rnd() % 8 : 4;
		const bool sym = rnd() % 4 == 0;
		const int zmin = (int)(rnd() % 2);
		const unsigned kind = rnd() % 9;
		const uint32_t n = fill(x, kind, bits);
		uint16_t h;
		int z;
		ref_fit(x, n, bits, sym, zmin, xs, &h, &z);
		float s;
		int zo;
		if (qtk_fit_group(x, n, bits, sym, zmin, &s, &zo, codes) != 0) {
			bad++;
			continue;
		}
		const float sr = qtk_h2f(h);
		bool ok = memcmp(&s, &sr, sizeof s) == 0 && zo == z;
		for (uint32_t j = 0; ok && j < n; j++)
			ok = h ? codes[j] == rule_code(xs[j], sr, z, (1 << bits) - 1) : codes[j] == z;
		if (!ok && bad++ < 5)
			printf("FAIL %s: group %u (kind %u, %u bits, %s, zmin %d, n %u): scale %a zero %d, "
			       "the plain search %a %d\n",
			       mode, g, kind, bits, sym ? "sym" : "asym", zmin, n, (double)s, zo, (double)sr,
			       z);
		/* an asymmetric AWQ grid comes back exactly */
		if (kind == 3 && !sym && zmin == 0 && bits == 4 && ok && ref_err(xs, n, sr, z, 15) != 0)
			exact_bad++;
	}
	if (exact_bad)
		printf("FAIL %s: %u groups on an AWQ grid did not come back exactly\n", mode, exact_bad);
	return bad + exact_bad;
}

enum { GROUPS = 30000 };

int main(void)
{
	/* the generic kernels in a child (the dispatch is decided once per process) */
	fflush(stdout);
	const pid_t pid = fork();
	if (pid == 0) {
		setenv("QTK_SIMD", "generic", 1);
		const unsigned bad = run("generic", GROUPS);
		fflush(stdout);
		_exit(bad ? 1 : 0);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "QTK_SIMD=generic: the search differs from the plain one (above)");
	rng = 0xD1B54A32D192ED03ull;
	CHECK(run(qtk_simd_avx2() ? "dispatched (avx2)" : "dispatched", GROUPS) == 0,
	      "the search differs from the plain one (above)");
	return T_DONE();
}
