/* awq_rule.h - the AWQ/GPTQ group search's rule written plainly, for test_awq_step.c (the
 * kernels against it) and test_awq_search.c (the whole search against it). */
#ifndef QTK_TEST_AWQ_RULE_H
#define QTK_TEST_AWQ_RULE_H
#include <stdint.h>

/* The code of x for (s, z): t = x * (1/s) clamped to +-(2^22 - 1), q = round-half-even(t) + z
 * clamped to [0, maxq], then the neighbour on the side of the residual x - (q - z) * s when its
 * decoded value is closer (squares compared in float). */
static inline int rule_code(float x, float s, int z, int maxq)
{
	const float inv = 1.f / s, zf = (float)z, mf = (float)maxq;
	float t = x * inv;
	if (t < -4194303.f)
		t = -4194303.f;
	if (t > 4194303.f)
		t = 4194303.f;
	float q = ((t + 12582912.f) - 12582912.f) + zf;
	if (q < 0.f)
		q = 0.f;
	if (q > mf)
		q = mf;
	const float e = x - (q - zf) * s;
	float dir = 0.f;
	if (e > 0.f && q < mf)
		dir = 1.f;
	else if (e < 0.f && q > 0.f)
		dir = -1.f;
	const float e2 = x - ((q + dir) - zf) * s;
	if (e2 * e2 < e * e)
		q += dir;
	return (int)q;
}

/* The squared error of codes for (s, z): (x - (q - z) * s)^2 in double, element j into lane
 * j mod 8, the lanes folded ((0+1)+(2+3))+((4+5)+(6+7)). */
static inline double rule_sum(const float *x, uint32_t n, float s, int z, const uint8_t *codes)
{
	double l[8] = { 0 };
	for (uint32_t j = 0; j < n; j++) {
		const float y = ((float)codes[j] - (float)z) * s;
		const double d = (double)x[j] - (double)y;
		l[j % 8] += d * d;
	}
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
#endif
