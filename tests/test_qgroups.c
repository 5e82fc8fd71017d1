/* test_qgroups.c - exact transcodes between AWQ, GPTQ v1/v2 and ggml blocks. */
#include "scheme/qgroups.h"
#include "dequant.h"
#include "packing.h"
#include "view/decode.h"
#include "t.h"

static uint64_t rs = 12345;
static uint32_t rnd(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rs >> 33);
}

/* Random groups: codes, zeros in [zlo, zhi], fp16 scales. */
static void make_random(qgroups *g, uint32_t out, uint32_t in, uint32_t group, unsigned bits, int zlo, int zhi)
{
	qg_alloc(g, out, in, group, in / group, bits);
	for (uint64_t i = 0; i < (uint64_t)out * in; i++)
		g->q[i] = (uint8_t)(rnd() % (1u << bits));
	for (uint64_t k = 0; k < (uint64_t)out * g->ngroups; k++) {
		g->z[k] = (int16_t)(zlo + (int)(rnd() % (unsigned)(zhi - zlo + 1)));
		g->s[k] = qtk_f32_to_fp16(0.001f + (float)(rnd() % 1000) * 1e-4f);
	}
}

static void decode_qg(const qgroups *g, float *y)
{
	for (uint32_t o = 0; o < g->out; o++)
		for (uint32_t i = 0; i < g->in; i++) {
			uint32_t k = qg_group_of(g, i);
			y[(uint64_t)o * g->in + i] = (float)(g->q[(uint64_t)o * g->in + i] - g->z[(uint64_t)o * g->ngroups + k]) *
						     qtk_fp16_to_f32(g->s[(uint64_t)o * g->ngroups + k]);
		}
}

static void test_synthetic(void)
{
	uint32_t out = 64, in = 256;
	qgroups g, h;
	float *a = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out * in);
	/* AWQ pack/unpack and agreement with the reference decoder */
	make_random(&g, out, in, 128, 4, 0, 15);
	uint32_t *qw = calloc(in * out / 8, 4), *qz = calloc(2 * out / 8, 4);
	uint16_t *sc = calloc(2 * out, 2);
	CHECK(qg_to_awq(&g, qw, qz, sc) == 0, "to awq");
	CHECK(qg_from_awq(qw, qz, sc, out, in, 128, &h) == 0, "from awq");
	CHECK(!memcmp(g.q, h.q, out * in) && !memcmp(g.z, h.z, out * 2 * 2), "awq round trip");
	decode_qg(&g, a);
	qtk_dequant_awq((int32_t *)qw, (int32_t *)qz, sc, in, out, 128, b);
	CHECK(!memcmp(a, b, sizeof(float) * out * in), "awq decode agrees with the reference decoder");
	qg_free(&h);
	/* GPTQ, every width, both versions */
	unsigned widths[] = {2, 3, 4, 8};
	for (int v = 1; v <= 2; v++)
		for (int k = 0; k < 4; k++) {
			unsigned bits = widths[k];
			qgroups x;
			make_random(&x, out, in, 64, bits, v == 1 ? 1 : 0, (1 << bits) - 1);
			uint32_t *gw = calloc(in * bits / 32 * out, 4), *gz = calloc(4 * out * bits / 32 + 1, 4);
			uint16_t *gs = calloc(4 * out, 2);
			int32_t *gi = calloc(in, 4);
			CHECK(qg_to_gptq(&x, v, false, gw, gz, gs, gi) == 0, "to gptq %u v%d", bits, v);
			CHECK(qg_from_gptq(gw, gz, gs, gi, out, in, 64, 4, bits, v, &h) == 0, "from gptq");
			CHECK(!memcmp(x.q, h.q, out * in) && !memcmp(x.z, h.z, out * 4 * 2), "gptq %u v%d round trip", bits, v);
			decode_qg(&x, a);
			qtk_dequant_gptq((int32_t *)gw, (int32_t *)gz, gs, gi, in, out, 64, 4, bits, v, b);
			CHECK(!memcmp(a, b, sizeof(float) * out * in), "gptq %u v%d decode agrees", bits, v);
			qg_free(&x);
			qg_free(&h);
			free(gw); free(gz); free(gs); free(gi);
		}
	/* v1 cannot store a zero of 0 */
	g.z[5] = 0;
	CHECK(!qg_gptq_storable(&g, 1) && qg_gptq_storable(&g, 2), "v1 zero 0");
	/* to ggml: q5_0 and q8_0 always hold int4 asym; q4_0 needs z = 8 */
	static const unsigned types[] = {QTK_T_Q5_0, QTK_T_Q8_0};
	uint8_t *blk = malloc((size_t)out * in / 32 * 34);
	decode_qg(&g, a);
	for (int t = 0; t < 2; t++) {
		CHECK(qg_to_ggml(&g, types[t], 0, out, blk) == 0, "to ggml %u", types[t]);
		qtk_dequant_ggml(types[t], blk, b, (uint64_t)out * in);
		CHECK(!memcmp(a, b, sizeof(float) * out * in), "ggml %u decodes bit-identically", types[t]);
	}
	for (uint64_t k = 0; k < (uint64_t)out * 2; k++)
		g.z[k] = 8;
	decode_qg(&g, a);
	CHECK(qg_to_ggml(&g, QTK_T_Q4_0, 0, out, blk) == 0, "symmetric -> q4_0");
	qtk_dequant_ggml(QTK_T_Q4_0, blk, b, (uint64_t)out * in);
	CHECK(!memcmp(a, b, sizeof(float) * out * in), "q4_0 decodes bit-identically");
	CHECK(qg_from_ggml(QTK_T_Q4_0, blk, out, in, &h) == 0, "q4_0 unpacked");
	uint32_t *qw2 = calloc(in * out / 8, 4), *qz2 = calloc(in / 32 * out / 8, 4);
	uint16_t *sc2 = calloc(in / 32 * out, 2);
	CHECK(qg_to_awq(&h, qw2, qz2, sc2) == 0, "q4_0 -> awq g32");
	qtk_dequant_awq((int32_t *)qw2, (int32_t *)qz2, sc2, in, out, 32, b);
	CHECK(!memcmp(a, b, sizeof(float) * out * in), "q4_0 -> awq g32 decodes bit-identically");
	g.z[0] = 3;
	CHECK(qg_to_ggml(&g, QTK_T_Q4_0, 0, out, blk) == -1, "asymmetric group refused by q4_0");
	qg_free(&g);
	qg_free(&h);
	free(qw); free(qz); free(sc); free(qw2); free(qz2); free(sc2); free(blk); free(a); free(b);
}

static uint8_t *part(qtk_model *m, const char *name)
{
	const qtk_tensor *t = qtk_tensor_find(m, name);
	uint8_t *b = NULL;
	if (!t || qtk_read_part_alloc(m, t, 0, &b))
		return NULL;
	return b;
}

static void test_fixtures(const char *fx)
{
	char p[1024];
	qtk_err e;
	snprintf(p, sizeof p, "%s/hf/tiny-llama/awq-g128", fx);
	qtk_model *awq = qtk_open(p, &e);
	snprintf(p, sizeof p, "%s/hf/tiny-llama/ref/awq-g128-to-gptq.safetensors", fx);
	qtk_model *ref = qtk_open(p, &e);
	CHECK(awq && ref, "open: %s", e.msg);
	if (!awq || !ref)
		return;
	int layers = 0, same = 0, wrapped = 0;
	for (size_t i = 0; i < awq->ntensors; i++) {
		const qtk_tensor *t = &awq->tensors[i];
		if (t->layout.kind != QTK_LAYOUT_AWQ)
			continue;
		uint8_t *pp[3];
		for (int k = 0; k < 3; k++)
			qtk_read_part_alloc(awq, t, k, &pp[k]);
		uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1];
		qgroups g;
		CHECK(qg_from_awq((uint32_t *)pp[0], (uint32_t *)pp[1], (uint16_t *)pp[2], out, in, 128, &g) == 0, "unpack");
		/* AWQ -> AWQ is the identity */
		uint32_t *qw = calloc(in * out / 8, 4), *qz = calloc(in / 128 * out / 8, 4);
		uint16_t *sc = calloc(in / 128 * out, 2);
		qg_to_awq(&g, qw, qz, sc);
		CHECK(!memcmp(qw, pp[0], t->parts[0].nbytes) && !memcmp(qz, pp[1], t->parts[1].nbytes), "awq identity");
		/* AWQ -> GPTQ v1 as AutoAWQ's own converter writes it */
		uint32_t *gw = calloc(in / 8 * out, 4), *gz = calloc(in / 128 * out / 8, 4);
		uint16_t *gs = calloc(in / 128 * out, 2);
		int32_t *gi = calloc(in, 4);
		wrapped += !qg_gptq_storable(&g, 1);
		qg_to_gptq(&g, 1, true, gw, gz, gs, gi);
		char nm[512], base[400];
		snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - 7), t->name);
		snprintf(nm, sizeof nm, "%s.qweight", base);
		uint8_t *rw = part(ref, nm);
		snprintf(nm, sizeof nm, "%s.qzeros", base);
		uint8_t *rz = part(ref, nm);
		snprintf(nm, sizeof nm, "%s.scales", base);
		uint8_t *rsc = part(ref, nm);
		layers++;
		if (rw && rz && rsc && !memcmp(rw, gw, (size_t)in / 8 * out * 4) && !memcmp(rsc, gs, (size_t)in / 128 * out * 2)) {
			/* qzeros: identical, except words holding a zero of 0. AutoAWQ packs by addition, so
			 * its -1 borrows from the next field; we wrap the field alone, as AutoGPTQ does. */
			size_t nw = (size_t)in / 128 * out / 8, odd = 0;
			for (size_t w = 0; w < nw; w++) {
				uint32_t a = ((uint32_t *)rz)[w], b = gz[w];
				if (a == b)
					continue;
				uint32_t sum = 0;
				for (unsigned k = 0; k < 8; k++) {
					int zf = (int)((b >> (4 * k)) & 15) + 1; /* the true zero; 16 means 0 wrapped */
					sum += (uint32_t)(zf == 16 ? -1 : zf - 1) << (4 * k);
				}
				odd += sum != a;
			}
			same += odd == 0;
		}
		free(rw); free(rz); free(rsc);
		free(qw); free(qz); free(sc); free(gw); free(gz); free(gs); free(gi);
		for (int k = 0; k < 3; k++)
			free(pp[k]);
		qg_free(&g);
	}
	CHECK(layers == 14 && same == layers, "awq -> gptq v1 equals AutoAWQ's converter: %d of %d layers", same, layers);
	CHECK(wrapped == 1, "awq-g128 has one layer with a zero of 0, found %d", wrapped);
	printf("awq-g128: %d of %d layers have a zero of 0 (v1 cannot hold them exactly)\n", wrapped, layers);
	qtk_close(awq);
	qtk_close(ref);
	/* GPTQ -> GPTQ (same version) is the identity for every variant */
	static const char *const vars[] = {"gptq-4-128-0", "gptq-4-128-1", "gptq-8-128-0", "gptq-3-128-0",
					   "gptq-2-64-0", "gptq-4-32-1s"};
	for (int v = 0; v < 6; v++) {
		snprintf(p, sizeof p, "%s/hf/tiny-llama/%s", fx, vars[v]);
		qtk_model *m = qtk_open(p, &e);
		int ok = 0, n = 0;
		for (size_t i = 0; m && i < m->ntensors; i++) {
			const qtk_tensor *t = &m->tensors[i];
			if (t->layout.kind != QTK_LAYOUT_GPTQ)
				continue;
			n++;
			uint8_t *pp[4];
			for (int k = 0; k < 4; k++)
				qtk_read_part_alloc(m, t, k, &pp[k]);
			uint32_t out = (uint32_t)t->shape[0], in = (uint32_t)t->shape[1], ng = (uint32_t)t->parts[2].shape[0];
			unsigned bits = t->layout.bits;
			qgroups g;
			if (qg_from_gptq((uint32_t *)pp[0], (uint32_t *)pp[1], (uint16_t *)pp[2], (int32_t *)pp[3], out, in,
					 t->layout.group_size, ng, bits, 1, &g) == 0) {
				uint8_t *w[4];
				for (int k = 0; k < 4; k++)
					w[k] = calloc(1, (size_t)t->parts[k].nbytes + 8);
				qg_to_gptq(&g, 1, true, (uint32_t *)w[0], (uint32_t *)w[1], (uint16_t *)w[2], (int32_t *)w[3]);
				int same_parts = 0;
				for (int k = 0; k < 4; k++)
					same_parts += !memcmp(w[k], pp[k], (size_t)t->parts[k].nbytes);
				ok += same_parts == 4;
				for (int k = 0; k < 4; k++)
					free(w[k]);
				qg_free(&g);
			}
			for (int k = 0; k < 4; k++)
				free(pp[k]);
		}
		CHECK(m && n == 14 && ok == n, "%s: gptq repack identity %d/%d", vars[v], ok, n);
		qtk_close(m);
	}
}

/* The band transcodes (qg_awq_rows_to_gptq and back, the zeros) against the whole-matrix ones
 * through the codes array, and their checks finding changed codes or a changed zero: 48 outputs
 * (six words a row: the check's word-at-a-time tail only) and 136 (17: two groups of eight
 * words in lanes, then the tail). */
static void test_bands(uint32_t out)
{
	const uint32_t in = 256, group = 64, ng = in / group;
	for (int v = 1; v <= 2; v++) {
		qgroups g;
		make_random(&g, out, in, group, 4, v == 1 ? 1 : 0, 15);
		uint32_t *aw = calloc(in * out / 8, 4), *az = calloc(ng * out / 8, 4);
		uint16_t *as = calloc(ng * out, 2);
		uint32_t *gw = calloc(in / 8 * out, 4), *gz = calloc(ng * out / 8 + 1, 4);
		uint16_t *gs = calloc(ng * out, 2);
		int32_t *gi = calloc(in, 4);
		uint32_t *bw = calloc(in / 8 * out, 4), *bz = calloc(ng * out / 8, 4);
		uint32_t *cw = calloc(in * out / 8, 4), *cz = calloc(ng * out / 8, 4);
		CHECK(qg_to_awq(&g, aw, az, as) == 0 && qg_to_gptq(&g, v, false, gw, gz, gs, gi) == 0, "reference packs v%d", v);
		/* in two bands, as the converter streams them */
		qg_awq_rows_to_gptq(aw, 10, out, bw);
		qg_awq_rows_to_gptq(aw + 10 * 8 * out / 8, in / 8 - 10, out, bw + 10 * out);
		CHECK(!memcmp(bw, gw, (size_t)in / 8 * out * 4), "awq rows -> gptq rows v%d", v);
		CHECK(qg_awq_zeros_to_gptq(az, ng * out / 8, v, bz) == 0 && !memcmp(bz, gz, (size_t)ng * out / 8 * 4),
		      "awq zeros -> gptq v%d", v);
		CHECK(qg_awq_gptq_rows_diff(aw, bw, in / 8, out) == 0 && qg_awq_gptq_zeros_diff(az, bz, ng * out / 8, v) == 0,
		      "checks pass on equal bands v%d", v);
		qg_gptq_rows_to_awq(gw, in / 8, out, cw);
		CHECK(!memcmp(cw, aw, (size_t)in * out / 8 * 4), "gptq rows -> awq rows v%d", v);
		CHECK(qg_gptq_zeros_to_awq(gz, ng * out / 8, v, cz) == 0 && !memcmp(cz, az, (size_t)ng * out / 8 * 4),
		      "gptq zeros -> awq v%d", v);
		/* one code, one zero changed: counted; then three codes of one word (one of them in
		 * every bit), one in the last word of outputs, one in the eighth word and two in one AWQ
		 * word */
		bw[7 * out + 13] ^= 1u << 20;
		bz[3] ^= 1u << 4;
		CHECK(qg_awq_gptq_rows_diff(aw, bw, in / 8, out) == 1, "a changed code is found v%d, %u outputs", v, out);
		bw[20 * out + 2] ^= 0x0F00F010u;
		bw[31 * out + out - 1] ^= 8u << 28;
		bw[5 * out + (out > 64 ? 61 : 45)] ^= 1u << 8; /* 136 outputs: the eighth word of a lane group */
		bw[9 * out + 4] ^= 2u << 8; /* two codes of one AWQ word (input row 74, outputs 4 and 6) */
		bw[9 * out + 6] ^= 4u << 8;
		CHECK(qg_awq_gptq_rows_diff(aw, bw, in / 8, out) == 8, "eight changed codes counted v%d, %u outputs: %llu", v,
		      out, (unsigned long long)qg_awq_gptq_rows_diff(aw, bw, in / 8, out));
		CHECK(qg_awq_gptq_zeros_diff(az, bz, ng * out / 8, v) == 1, "a changed zero is found v%d", v);
		/* zeros a target cannot store: AWQ 0 in v1, GPTQ v1 stored 15 (16) in AWQ */
		az[2] &= ~(15u << qtk_awq_shift(3));
		CHECK((qg_awq_zeros_to_gptq(az, ng * out / 8, v, bz) != 0) == (v == 1), "awq zero 0 into v%d", v);
		gz[1] |= 15u << 8;
		CHECK((qg_gptq_zeros_to_awq(gz, ng * out / 8, v, cz) != 0) == (v == 1), "gptq v%d stored 15 into awq", v);
		qg_free(&g);
		free(aw); free(az); free(as); free(gw); free(gz); free(gs); free(gi);
		free(bw); free(bz); free(cw); free(cz);
	}
}

int main(void)
{
	test_synthetic();
	test_bands(48);
	test_bands(136);
	const char *fx = t_fixtures();
	if (fx)
		test_fixtures(fx);
	else
		T_SKIP("fixtures absent: AutoAWQ converter comparison, GPTQ repack identity");
	return T_DONE();
}
