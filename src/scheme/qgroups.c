/* qgroups.c - integer group quantization as codes, zeros and scales, and
 * the exact transcodes between AWQ, GPTQ v1/v2 and ggml's q4_0, q4_1,
 * q5_0 and q8_0.
 *
 * Every layout here decodes as (q - z) * s with an fp16 scale: AWQ and GPTQ
 * per group along the input dimension, q4_0 as (q - 8) * d, q5_0 as
 * (q - 16) * d, q8_0 as q * d and q4_1 as q * d + m per block of 32. A
 * transcode keeps q - z and s, so the decoded values stay bit-identical; the
 * converter still verifies that by decoding both sides.
 */
#include "qgroups.h"
#include "internal.h"
#include "dequant.h"
#include "packing.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void qg_free(qgroups *g)
{
	qtk_free(g->q);
	qtk_free(g->z);
	qtk_free(g->s);
	qtk_free(g->g_idx);
	qtk_free(g->m);
	memset(g, 0, sizeof *g);
}

int qg_alloc(qgroups *g, uint32_t out, uint32_t in, uint32_t group, uint32_t ngroups, unsigned bits)
{
	memset(g, 0, sizeof *g);
	g->out = out;
	g->in = in;
	g->group = group;
	g->ngroups = ngroups;
	g->bits = bits;
	g->q = qtk_malloc((size_t)out * in);
	g->z = qtk_malloc((size_t)out * ngroups * sizeof *g->z);
	g->s = qtk_malloc((size_t)out * ngroups * sizeof *g->s);
	if (!g->q || !g->z || !g->s) {
		qg_free(g);
		return -1;
	}
	return 0;
}

uint32_t qg_group_of(const qgroups *g, uint32_t i) { return g->g_idx ? (uint32_t)g->g_idx[i] : i / g->group; }

bool qg_act_order(const qgroups *g)
{
	if (!g->g_idx)
		return false;
	for (uint32_t i = 0; i < g->in; i++)
		if ((uint32_t)g->g_idx[i] != i / g->group)
			return true;
	return false;
}

int qg_from_awq(const uint32_t *qweight, const uint32_t *qzeros, const uint16_t *scales, uint32_t out, uint32_t in,
		uint32_t group, qgroups *g)
{
	if (!group || in % group || out % 8)
		return -1;
	uint32_t ng = in / group, words = out / 8;
	if (qg_alloc(g, out, in, group, ng, 4))
		return -1;
	for (uint32_t i = 0; i < in; i++)
		for (uint32_t c = 0; c < words; c++) {
			uint32_t w = qweight[(uint64_t)i * words + c];
			for (unsigned j = 0; j < 8; j++)
				g->q[(uint64_t)(8 * c + j) * in + i] = (uint8_t)((w >> qtk_awq_shift(j)) & 15);
		}
	for (uint32_t k = 0; k < ng; k++)
		for (uint32_t c = 0; c < words; c++) {
			uint32_t w = qzeros[(uint64_t)k * words + c];
			for (unsigned j = 0; j < 8; j++) {
				uint32_t o = 8 * c + j;
				g->z[(uint64_t)o * ng + k] = (int16_t)((w >> qtk_awq_shift(j)) & 15);
				g->s[(uint64_t)o * ng + k] = scales[(uint64_t)k * out + o];
			}
		}
	return 0;
}

int qg_to_awq(const qgroups *g, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales)
{
	if (g->bits != 4 || g->out % 8 || qg_act_order(g))
		return -1;
	uint32_t words = g->out / 8, ng = g->ngroups;
	for (uint64_t k = 0; k < (uint64_t)g->out * ng; k++)
		if (g->z[k] < 0 || g->z[k] > 15)
			return -1;
	memset(qweight, 0, (size_t)g->in * words * 4);
	memset(qzeros, 0, (size_t)ng * words * 4);
	for (uint32_t i = 0; i < g->in; i++)
		for (uint32_t o = 0; o < g->out; o++)
			qweight[(uint64_t)i * words + o / 8] |= (uint32_t)g->q[(uint64_t)o * g->in + i]
								<< qtk_awq_shift(o % 8);
	for (uint32_t k = 0; k < ng; k++)
		for (uint32_t o = 0; o < g->out; o++) {
			qzeros[(uint64_t)k * words + o / 8] |= (uint32_t)g->z[(uint64_t)o * ng + k] << qtk_awq_shift(o % 8);
			scales[(uint64_t)k * g->out + o] = g->s[(uint64_t)o * ng + k];
		}
	return 0;
}

int qg_from_gptq(const uint32_t *qweight, const uint32_t *qzeros, const uint16_t *scales, const int32_t *g_idx,
		 uint32_t out, uint32_t in, uint32_t group, uint32_t ngroups, unsigned bits, int version, qgroups *g)
{
	if (!ngroups || in % 32 || ((uint64_t)out * bits) % 32 || (bits != 2 && bits != 3 && bits != 4 && bits != 8))
		return -1;
	if (qg_alloc(g, out, in, group ? group : in, ngroups, bits))
		return -1;
	if (g_idx) {
		g->g_idx = qtk_malloc((size_t)in * sizeof *g->g_idx);
		if (!g->g_idx) {
			qg_free(g);
			return -1;
		}
		for (uint32_t i = 0; i < in; i++) {
			if (g_idx[i] < 0 || (uint32_t)g_idx[i] >= ngroups) {
				qg_free(g);
				return -1;
			}
			g->g_idx[i] = g_idx[i];
		}
	}
	/* qweight rows hold the input stream of each output column */
	uint64_t wrows = (uint64_t)in * bits / 32;
	uint32_t *col = qtk_malloc((size_t)(wrows + 1) * 4);
	if (!col) {
		qg_free(g);
		return -1;
	}
	for (uint32_t o = 0; o < out; o++) {
		for (uint64_t r = 0; r < wrows; r++)
			col[r] = qweight[r * out + o];
		col[wrows] = 0;
		for (uint32_t i = 0; i < in; i++)
			g->q[(uint64_t)o * in + i] = (uint8_t)qtk_bits_get(col, 1, (uint64_t)i * bits, bits);
	}
	qtk_free(col);
	uint64_t zwords = (uint64_t)out * bits / 32;
	int add = version == 1 ? 1 : 0; /* v1 stores zero - 1; engines add 1 back without wrapping */
	for (uint32_t k = 0; k < ngroups; k++) {
		const uint32_t *zr = qzeros + k * zwords;
		for (uint32_t o = 0; o < out; o++) {
			uint64_t pos = (uint64_t)o * bits;
			unsigned v = qtk_bits_get(zr, 1, pos, bits); /* a straddling field never passes the row's end */
			g->z[(uint64_t)o * ngroups + k] = (int16_t)((int)v + add);
			g->s[(uint64_t)o * ngroups + k] = scales[(uint64_t)k * out + o];
		}
	}
	return 0;
}

/* Can every zero be stored in this GPTQ version? */
bool qg_gptq_storable(const qgroups *g, int version)
{
	int lo = version == 1 ? 1 : 0, hi = (1 << g->bits) - 1 + lo;
	for (uint64_t k = 0; k < (uint64_t)g->out * g->ngroups; k++)
		if (g->z[k] < lo || g->z[k] > hi)
			return false;
	return true;
}

int qg_to_gptq(const qgroups *g, int version, bool wrap, uint32_t *qweight, uint32_t *qzeros, uint16_t *scales,
	       int32_t *g_idx)
{
	unsigned bits = g->bits;
	if (g->in % 32 || ((uint64_t)g->out * bits) % 32)
		return -1;
	if (!wrap && !qg_gptq_storable(g, version))
		return -1;
	uint64_t wrows = (uint64_t)g->in * bits / 32, zwords = (uint64_t)g->out * bits / 32;
	uint32_t *col = qtk_malloc((size_t)(wrows + 1) * 4);
	if (!col)
		return -1;
	for (uint32_t o = 0; o < g->out; o++) {
		memset(col, 0, (size_t)(wrows + 1) * 4);
		for (uint32_t i = 0; i < g->in; i++)
			qtk_bits_put(col, 1, (uint64_t)i * bits, bits, g->q[(uint64_t)o * g->in + i]);
		for (uint64_t r = 0; r < wrows; r++)
			qweight[r * g->out + o] = col[r];
	}
	qtk_free(col);
	unsigned mask = (1u << bits) - 1u;
	memset(qzeros, 0, (size_t)(g->ngroups * zwords * 4));
	uint32_t *zrow = qtk_calloc((size_t)zwords + 1, 4);
	if (!zrow)
		return -1;
	for (uint32_t k = 0; k < g->ngroups; k++) {
		memset(zrow, 0, (size_t)(zwords + 1) * 4);
		for (uint32_t o = 0; o < g->out; o++) {
			int z = g->z[(uint64_t)o * g->ngroups + k] - (version == 1 ? 1 : 0);
			qtk_bits_put(zrow, 1, (uint64_t)o * bits, bits, (unsigned)z & mask); /* a v1 zero of 0 wraps, as AutoGPTQ writes it */
			scales[(uint64_t)k * g->out + o] = g->s[(uint64_t)o * g->ngroups + k];
		}
		memcpy(qzeros + k * zwords, zrow, (size_t)zwords * 4);
	}
	qtk_free(zrow);
	for (uint32_t i = 0; i < g->in; i++)
		g_idx[i] = (int32_t)qg_group_of(g, i);
	return 0;
}

/* ---- ggml legacy blocks ------------------------------------------------- */

int qg_from_ggml(unsigned type, const uint8_t *src, uint32_t out, uint32_t in, qgroups *g)
{
	if (in % 32)
		return -1;
	unsigned bits;
	size_t bsz;
	switch (type) {
	case QTK_T_Q4_0: bits = 4; bsz = 18; break;
	case QTK_T_Q8_0: bits = 8; bsz = 34; break;
	case QTK_T_Q4_1: bits = 4; bsz = 20; break;
	default: return -1;
	}
	uint32_t ng = in / 32;
	if (qg_alloc(g, out, in, 32, ng, bits))
		return -1;
	for (uint32_t o = 0; o < out; o++)
		for (uint32_t b = 0; b < ng; b++) {
			const uint8_t *blk = src + ((uint64_t)o * ng + b) * bsz;
			uint16_t d = qtk_rd16(blk);
			uint8_t *q = g->q + (uint64_t)o * in + 32 * b;
			int z;
			if (type == QTK_T_Q8_0) {
				z = 128; /* int8 code c stored as c + 128 with zero 128 */
				for (int j = 0; j < 32; j++)
					q[j] = (uint8_t)((int8_t)blk[2 + j] + 128);
			} else {
				const uint8_t *qs = blk + (type == QTK_T_Q4_1 ? 4 : 2);
				for (int j = 0; j < 16; j++) {
					q[j] = qs[j] & 15;
					q[j + 16] = qs[j] >> 4;
				}
				z = 8;
				if (type == QTK_T_Q4_1) {
					/* q*d + m equals (q - z)*d only when m = -z*d for an integer z in 0..15 */
					float df = qtk_fp16_to_f32(d), mf = qtk_fp16_to_f32(qtk_rd16(blk + 2));
					z = -1;
					for (int k = 0; k <= 15 && z < 0; k++)
						if (-(float)k * df == mf)
							z = k;
					if (z < 0 || df == 0) {
						qg_free(g);
						return -1;
					}
				}
			}
			g->z[(uint64_t)o * ng + b] = (int16_t)z;
			g->s[(uint64_t)o * ng + b] = d;
		}
	return 0;
}

int qg_from_q4_1_bias(const uint8_t *src, uint32_t out, uint32_t in, qgroups *g)
{
	if (in % 32)
		return -1;
	uint32_t ng = in / 32;
	if (qg_alloc(g, out, in, 32, ng, 4))
		return -1;
	if (!(g->m = qtk_malloc((size_t)out * ng * sizeof *g->m))) {
		qg_free(g);
		return -1;
	}
	for (uint32_t o = 0; o < out; o++)
		for (uint32_t b = 0; b < ng; b++) {
			const uint8_t *blk = src + ((uint64_t)o * ng + b) * 20;
			uint8_t *q = g->q + (uint64_t)o * in + 32 * b;
			for (int j = 0; j < 16; j++) {
				q[j] = blk[4 + j] & 15;
				q[j + 16] = blk[4 + j] >> 4;
			}
			g->z[(uint64_t)o * ng + b] = 0;
			g->s[(uint64_t)o * ng + b] = qtk_rd16(blk);
			g->m[(uint64_t)o * ng + b] = qtk_rd16(blk + 2);
		}
	return 0;
}

/* The integer z with -z * s == m exactly (fp16 s and m; q8_0 and q4_0 hold (q - z) * s, not a
 * free bias), or -1. */
static int bias_zero(uint16_t s, uint16_t m)
{
	float sf = qtk_fp16_to_f32(s), mf = qtk_fp16_to_f32(m);
	if (sf == 0 || !isfinite(sf) || !isfinite(mf))
		return -1;
	float z = -mf / sf;
	if (!(z >= 0 && z <= 255) || z != (float)(int)z || -(float)(int)z * sf != mf)
		return -1;
	return (int)z;
}

/* Blocks of 32 along the input dimension; each block must sit in one group.
 * Rows [row0, row0 + nrows) go to dst. */
int qg_to_ggml(const qgroups *g, unsigned type, uint32_t row0, uint32_t nrows, uint8_t *dst)
{
	if (g->in % 32 || qg_act_order(g) || g->group % 32)
		return -1;
	size_t bsz = type == QTK_T_Q4_0 ? 18 : type == QTK_T_Q4_1 ? 20 : type == QTK_T_Q5_0 ? 22
		   : type == QTK_T_Q8_0 ? 34 : 0;
	if (!bsz)
		return -1;
	uint32_t nb = g->in / 32;
	if (row0 > g->out || nrows > g->out - row0)
		return -1;
	for (uint32_t o = row0; o < row0 + nrows; o++)
		for (uint32_t b = 0; b < nb; b++) {
			uint32_t k = qg_group_of(g, 32 * b);
			int z = g->z[(uint64_t)o * g->ngroups + k];
			uint16_t s = g->s[(uint64_t)o * g->ngroups + k];
			if (g->m && z != 0)
				return -1;
			if (g->m && type != QTK_T_Q4_1 && (z = bias_zero(s, g->m[(uint64_t)o * g->ngroups + k])) < 0)
				return -1;
			const uint8_t *q = g->q + (uint64_t)o * g->in + 32 * b;
			uint8_t *blk = dst + ((uint64_t)(o - row0) * nb + b) * bsz;
			memset(blk, 0, bsz);
			qtk_wr16(blk, s);
			int c[32];
			for (int j = 0; j < 32; j++)
				c[j] = q[j] - z;
			switch (type) {
			case QTK_T_Q4_0:
				for (int j = 0; j < 32; j++)
					if (c[j] < -8 || c[j] > 7)
						return -1;
				for (int j = 0; j < 16; j++)
					blk[2 + j] = (uint8_t)((c[j] + 8) | (c[j + 16] + 8) << 4);
				break;
			case QTK_T_Q5_0: {
				uint32_t qh = 0;
				for (int j = 0; j < 32; j++) {
					if (c[j] < -16 || c[j] > 15)
						return -1;
					c[j] += 16;
				}
				for (int j = 0; j < 16; j++) {
					blk[6 + j] = (uint8_t)((c[j] & 15) | (c[j + 16] & 15) << 4);
					qh |= (uint32_t)(c[j] >> 4) << j | (uint32_t)(c[j + 16] >> 4) << (j + 16);
				}
				qtk_wr32(blk + 2, qh);
				break;
			}
			case QTK_T_Q8_0:
				for (int j = 0; j < 32; j++) {
					if (c[j] < -128 || c[j] > 127)
						return -1;
					blk[2 + j] = (uint8_t)(int8_t)c[j];
				}
				break;
			case QTK_T_Q4_1: {
				/* m = -z*s must be an fp16 value */
				float sf = qtk_fp16_to_f32(s), m = -(float)z * sf;
				uint16_t mh = g->m ? g->m[(uint64_t)o * g->ngroups + k] : qtk_f32_to_fp16(m);
				if (!g->m && qtk_fp16_to_f32(mh) != m)
					return -1;
				qtk_wr16(blk + 2, mh);
				for (int j = 0; j < 32; j++)
					if (q[j] > 15)
						return -1;
				for (int j = 0; j < 16; j++)
					blk[4 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
				break;
			}
			}
		}
	return 0;
}

/* ---- 4-bit AWQ <-> GPTQ, bands of input rows ------------------------------------------------
 * Eight AWQ words (one per input row, eight outputs each) and eight GPTQ words (one per output,
 * eight inputs each) hold the same 8 x 8 codes: a nibble transpose, with AWQ's output order
 * inside a word. Bands of input rows are contiguous in both layouts, so a repack streams. */

/* A word's eight nibbles from AWQ's order (outputs 0 2 4 6 1 3 5 7, qtk_awq_shift) to the
 * natural one: two delta swaps (nibbles 2-3 with 4-5, then 1 with 2 and 5 with 6). Each swap is
 * its own inverse, so awq_zip applies them in the other order. */
static inline uint32_t awq_unzip(uint32_t x)
{
	uint32_t t = (x ^ (x >> 8)) & 0x0000FF00u;
	x ^= t ^ (t << 8);
	t = (x ^ (x >> 4)) & 0x00F000F0u;
	return x ^ t ^ (t << 4);
}

static inline uint32_t awq_zip(uint32_t x)
{
	uint32_t t = (x ^ (x >> 4)) & 0x00F000F0u;
	x ^= t ^ (t << 4);
	t = (x ^ (x >> 8)) & 0x0000FF00u;
	return x ^ t ^ (t << 8);
}

/* Transpose the 8 x 8 nibbles of x (nibble c of x[r] is element (r, c)): the off-diagonal
 * blocks of 4, then of 2, then of 1 swapped. */
static inline void nib_t8(uint32_t x[8])
{
	for (unsigned r = 0; r < 4; r++) {
		const uint32_t t = ((x[r] >> 16) ^ x[r + 4]) & 0x0000FFFFu;
		x[r] ^= t << 16;
		x[r + 4] ^= t;
	}
	for (unsigned r = 0; r < 8; r += r % 2 ? 3u : 1u) {
		const uint32_t t = ((x[r] >> 8) ^ x[r + 2]) & 0x00FF00FFu;
		x[r] ^= t << 8;
		x[r + 2] ^= t;
	}
	for (unsigned r = 0; r < 8; r += 2) {
		const uint32_t t = ((x[r] >> 4) ^ x[r + 1]) & 0x0F0F0F0Fu;
		x[r] ^= t << 4;
		x[r + 1] ^= t;
	}
}

void qg_awq_rows_to_gptq(const uint32_t *awq, uint64_t units, uint32_t out, uint32_t *gptq)
{
	const uint32_t words = out / 8;
	for (uint64_t u = 0; u < units; u++) {
		const uint32_t *a = awq + u * 8 * words;
		uint32_t *g = gptq + u * out;
		for (uint32_t c = 0; c < words; c++) {
			uint32_t x[8]; /* x[k]: input row k's codes of outputs 8c.., in output order */
			for (unsigned k = 0; k < 8; k++)
				x[k] = awq_unzip(a[(uint64_t)k * words + c]);
			nib_t8(x); /* x[j]: output 8c + j's codes of the eight input rows */
			memcpy(g + 8 * c, x, sizeof x);
		}
	}
}

void qg_gptq_rows_to_awq(const uint32_t *gptq, uint64_t units, uint32_t out, uint32_t *awq)
{
	const uint32_t words = out / 8;
	for (uint64_t u = 0; u < units; u++) {
		const uint32_t *g = gptq + u * out;
		uint32_t *a = awq + u * 8 * words;
		for (uint32_t c = 0; c < words; c++) {
			uint32_t x[8];
			memcpy(x, g + 8 * c, sizeof x);
			nib_t8(x);
			for (unsigned k = 0; k < 8; k++)
				a[(uint64_t)k * words + c] = awq_zip(x[k]);
		}
	}
}

/* Codes that differ between the two, each field read as the layouts' decoders read it
 * (GPTQ's nibble k for input 8u + k, placed where qtk_awq_shift puts output j in an AWQ word),
 * not through the transposes: for each input row and word of outputs, the AWQ word the GPTQ
 * fields make, against the stored one, nibble by nibble. */
/* How many of the eight nibbles of x and y differ: a flag per nibble, the flags summed into
 * the top nibble by a multiply. */
static inline uint32_t nib_diffs(uint32_t x, uint32_t y)
{
	uint32_t m = x ^ y;
	m = (m | m >> 1 | m >> 2 | m >> 3) & 0x11111111u;
	return (m * 0x11111111u) >> 28;
}

uint64_t qg_awq_gptq_rows_diff(const uint32_t *awq, const uint32_t *gptq, uint64_t units, uint32_t out)
{
	const uint32_t words = out / 8;
	uint64_t diff = 0;
	for (uint64_t u = 0; u < units; u++) {
		const uint32_t *a = awq + u * 8 * words, *g = gptq + u * out;
		uint32_t c = 0;
		/* eight words of outputs at a time, in lanes: w[j][i] is output 8(c + i) + j's word */
		for (; c + 8 <= words; c += 8) {
			uint32_t w[8][8];
			for (unsigned i = 0; i < 8; i++)
				for (unsigned j = 0; j < 8; j++)
					w[j][i] = g[8 * (c + i) + j];
			for (unsigned k = 0; k < 8; k++) { /* input row 8u + k */
				uint32_t y[8] = {0}, d[8];
				for (unsigned j = 0; j < 8; j++)
					for (unsigned i = 0; i < 8; i++)
						y[i] |= ((w[j][i] >> (4 * k)) & 15u) << qtk_awq_shift(j);
				for (unsigned i = 0; i < 8; i++)
					d[i] = nib_diffs(a[(uint64_t)k * words + c + i], y[i]);
				for (unsigned i = 0; i < 8; i++)
					diff += d[i];
			}
		}
		for (; c < words; c++)
			for (unsigned k = 0; k < 8; k++) {
				uint32_t y = 0;
				for (unsigned j = 0; j < 8; j++)
					y |= ((g[8 * c + j] >> (4 * k)) & 15u) << qtk_awq_shift(j);
				diff += nib_diffs(a[(uint64_t)k * words + c], y);
			}
	}
	return diff;
}

int qg_awq_zeros_to_gptq(const uint32_t *az, uint64_t nwords, int version, uint32_t *gz)
{
	const unsigned lo = version == 1 ? 1 : 0;
	for (uint64_t i = 0; i < nwords; i++) {
		uint32_t y = 0;
		for (unsigned j = 0; j < 8; j++) {
			const unsigned z = (az[i] >> qtk_awq_shift(j)) & 15u;
			if (z < lo)
				return -1;
			y |= (z - lo) << (4 * j);
		}
		gz[i] = y;
	}
	return 0;
}

int qg_gptq_zeros_to_awq(const uint32_t *gz, uint64_t nwords, int version, uint32_t *az)
{
	const unsigned lo = version == 1 ? 1 : 0;
	for (uint64_t i = 0; i < nwords; i++) {
		uint32_t y = 0;
		for (unsigned j = 0; j < 8; j++) {
			const unsigned z = ((gz[i] >> (4 * j)) & 15u) + lo;
			if (z > 15)
				return -1;
			y |= z << qtk_awq_shift(j);
		}
		az[i] = y;
	}
	return 0;
}

uint64_t qg_awq_gptq_zeros_diff(const uint32_t *az, const uint32_t *gz, uint64_t nwords, int version)
{
	const unsigned lo = version == 1 ? 1 : 0;
	uint64_t diff = 0;
	for (uint64_t o = 0; o < nwords * 8; o++)
		diff += ((az[o / 8] >> qtk_awq_shift(o % 8)) & 15u) != ((gz[o / 8] >> (4 * (o % 8))) & 15u) + lo;
	return diff;
}
