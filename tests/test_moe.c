/* test_moe.c - mixture-of-experts models: 3-D expert tensors (blk.N.ffn_*_exps, logical shape
 * [n_expert, out, in]), shared experts (*_shexp) and routers (ffn_gate_inp) through the mix
 * rules, the writer and readers, the programs (inspect, convert, QPK and safetensors round
 * trips, records), importance matrices per expert, and llama.cpp's own files when the fixtures
 * are there. */
#include "t.h"
#include "qtk_ext.h"
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- building models in memory ------------------------------------------------------- */

static void set_u(qtk_model *m, const char *k, uint32_t v)
{
	qtk_kv *kv = qtk_model_add_kv(m, k);
	kv->val.type = QTK_V_U32;
	kv->val.v.u = v;
}

/* A plain tensor of type ty with logical shape d[0..nd-1] (outermost first). */
static qtk_tensor *add_t(qtk_model *m, const char *name, unsigned ty, int nd, const uint64_t *d)
{
	qtk_tensor *t = qtk_model_add_tensor(m, name);
	t->ndim = nd;
	for (int i = 0; i < nd; i++)
		t->shape[i] = d[i];
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = ty;
	t->nparts = 1;
	t->parts[0].type = ty;
	t->parts[0].ndim = nd;
	for (int i = 0; i < nd; i++)
		t->parts[0].shape[i] = d[i];
	uint64_t n = 1;
	for (int i = 0; i < nd; i++)
		n *= d[i];
	qtk_type_nbytes(ty, n, &t->parts[0].nbytes);
	qtk_tensor_finish(t);
	return t;
}

static void add2(qtk_model *m, const char *name, unsigned ty, uint64_t r, uint64_t c)
{
	uint64_t d[2] = {r, c};
	add_t(m, name, ty, 2, d);
}

static void add3(qtk_model *m, const char *name, unsigned ty, uint64_t e, uint64_t r, uint64_t c)
{
	uint64_t d[3] = {e, r, c};
	add_t(m, name, ty, 3, d);
}

static void add1(qtk_model *m, const char *name, uint64_t c)
{
	uint64_t d[1] = {c};
	add_t(m, name, QTK_T_F32, 1, d);
}

/* A header-only MoE model in llama.cpp's naming: nl blocks, ne experts, with or without shared
 * experts, with or without an output head, with or without the expert_count key. */
static qtk_model *moe_desc(const char *arch, int nl, int ne, bool shexp, bool head, bool key)
{
	enum { E = 256, F = 256, V = 512 };
	char k[128], n[96];
	qtk_model *m = qtk_model_new();
	qtk_model_set_kv_str(m, "general.architecture", arch);
	snprintf(k, sizeof k, "%s.block_count", arch);
	set_u(m, k, (uint32_t)nl);
	snprintf(k, sizeof k, "%s.attention.head_count", arch);
	set_u(m, k, 8);
	snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
	set_u(m, k, 4);
	if (key) {
		snprintf(k, sizeof k, "%s.expert_count", arch);
		set_u(m, k, (uint32_t)ne);
	}
	if (head)
		add2(m, "output.weight", QTK_T_F16, V, E);
	add2(m, "token_embd.weight", QTK_T_F16, V, E);
	for (int l = 0; l < nl; l++) {
#define T(s) (snprintf(n, sizeof n, "blk.%d." s, l), n)
		add3(m, T("ffn_gate_exps.weight"), QTK_T_F16, (uint64_t)ne, F, E);
		add3(m, T("ffn_down_exps.weight"), QTK_T_F16, (uint64_t)ne, E, F);
		add3(m, T("ffn_up_exps.weight"), QTK_T_F16, (uint64_t)ne, F, E);
		add2(m, T("ffn_gate_inp.weight"), QTK_T_F32, (uint64_t)ne, E);
		if (shexp) {
			add2(m, T("ffn_down_shexp.weight"), QTK_T_F16, E, F);
			add2(m, T("ffn_gate_shexp.weight"), QTK_T_F16, F, E);
			add2(m, T("ffn_up_shexp.weight"), QTK_T_F16, F, E);
			add2(m, T("ffn_gate_inp_shexp.weight"), QTK_T_F16, 1, E);
		}
		add1(m, T("attn_norm.weight"), E);
		add1(m, T("ffn_norm.weight"), E);
		add2(m, T("attn_k.weight"), QTK_T_F16, E / 2, E);
		add2(m, T("attn_output.weight"), QTK_T_F16, E, E);
		add2(m, T("attn_q.weight"), QTK_T_F16, E, E);
		add2(m, T("attn_v.weight"), QTK_T_F16, E / 2, E);
#undef T
	}
	add1(m, "output_norm.weight", E);
	return m;
}

static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The type of every tensor in mix `mix` (in file order, as qconvert asks). */
static unsigned *mix_types(const qtk_model *m, const char *mix)
{
	unsigned base;
	int ftype;
	if (qtk_mix_lookup(mix, &base, &ftype))
		return NULL;
	qtk_mix_state s;
	qtk_mix_init(&s, m, ftype);
	unsigned *ty = calloc(m->ntensors, sizeof *ty);
	for (size_t i = 0; i < m->ntensors; i++)
		ty[i] = qtk_mix_quantizable(&m->tensors[i]) ? qtk_mix_type(&s, &m->tensors[i], base, false)
							    : m->tensors[i].layout.type;
	return ty;
}

static unsigned type_of(const qtk_model *m, const unsigned *ty, const char *name)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return ty[i];
	return 999;
}

static unsigned blk_type(const qtk_model *m, const unsigned *ty, int l, const char *stem)
{
	char n[96];
	snprintf(n, sizeof n, "blk.%d.%s.weight", l, stem);
	return type_of(m, ty, n);
}

static const char *tn(unsigned t) { return t < QTK_T_MAX && qtk_type(t) ? qtk_type(t)->name : "?"; }

/* llama.cpp's mix rules on MoE models: ffn_down (experts and shared expert) by block number out
 * of the block count, routers never quantized, the shared expert's gate quantized, the
 * 8-expert bumps, the tied-embedding rule. */
static void test_mix_rules(void)
{
	enum { NL = 16 };
	qtk_model *m = moe_desc("qwen2moe", NL, 4, true, true, true);
	unsigned *q4 = mix_types(m, "Q4_K_M"), *q3 = mix_types(m, "Q3_K_M"), *x4 = mix_types(m, "IQ4_XS");
	CHECK(q4 && q3 && x4, "mix lookup");
	int bad = 0;
	for (int l = 0; q4 && q3 && x4 && l < NL; l++) {
		unsigned want = more_bits(l, NL) ? QTK_T_Q6_K : QTK_T_Q4_K;
		unsigned e = blk_type(m, q4, l, "ffn_down_exps"), s = blk_type(m, q4, l, "ffn_down_shexp");
		if (e != want || s != want) {
			bad++;
			printf("  Q4_K_M blk.%d ffn_down_exps %s, _shexp %s, want %s\n", l, tn(e), tn(s), tn(want));
		}
		want = l < NL / 16 ? QTK_T_Q5_K : QTK_T_Q4_K;
		if (blk_type(m, q3, l, "ffn_down_exps") != want || blk_type(m, q3, l, "ffn_down_shexp") != want)
			bad++;
		want = l < NL / 8 ? QTK_T_Q5_K : QTK_T_IQ4_XS;
		if (blk_type(m, x4, l, "ffn_down_exps") != want || blk_type(m, x4, l, "ffn_down_shexp") != want)
			bad++;
		if (blk_type(m, q4, l, "ffn_gate_inp") != QTK_T_F32)
			bad++;
		if (blk_type(m, q4, l, "ffn_gate_inp_shexp") != QTK_T_Q4_K || blk_type(m, q4, l, "ffn_gate_exps") != QTK_T_Q4_K ||
		    blk_type(m, q4, l, "ffn_up_shexp") != QTK_T_Q4_K)
			bad++;
		/* attn_v counts its own tensors (one per block) */
		want = more_bits(l, NL) ? QTK_T_Q6_K : QTK_T_Q4_K;
		if (blk_type(m, q4, l, "attn_v") != want)
			bad++;
	}
	CHECK(bad == 0, "MoE ffn_down / router / shared-expert types: %d wrong", bad);
	CHECK(q4 && type_of(m, q4, "output.weight") == QTK_T_Q6_K && type_of(m, q4, "token_embd.weight") == QTK_T_Q4_K,
	      "head Q6_K, embedding the base type");
	for (size_t i = 0; i < m->ntensors; i++)
		if (strstr(m->tensors[i].name, "ffn_gate_inp.weight"))
			CHECK(!qtk_mix_quantizable(&m->tensors[i]), "%s is a router", m->tensors[i].name);
	free(q4);
	free(q3);
	free(x4);
	qtk_close(m);

	/* without the expert_count key: the count comes from the 3-D expert tensors */
	m = moe_desc("llama", NL, 4, true, true, false);
	q4 = mix_types(m, "Q4_K_M");
	CHECK(q4 && blk_type(m, q4, 3, "ffn_down_shexp") == QTK_T_Q4_K && blk_type(m, q4, 3, "ffn_down_exps") == QTK_T_Q4_K &&
		      blk_type(m, q4, 2, "ffn_down_shexp") == QTK_T_Q4_K &&
		      blk_type(m, q4, 4, "ffn_down_shexp") == QTK_T_Q6_K,
	      "expert count from the tensors: blk.3 %s", q4 ? tn(blk_type(m, q4, 3, "ffn_down_shexp")) : "-");
	free(q4);
	qtk_close(m);

	/* eight experts: attn_v and attn_k Q8_0, attn_output Q5_K (Q4_K_M, IQ4_XS), not for Q3_K_L */
	m = moe_desc("llama", 4, 8, false, true, true);
	q4 = mix_types(m, "Q4_K_M");
	x4 = mix_types(m, "IQ4_XS");
	q3 = mix_types(m, "Q3_K_L");
	CHECK(q4 && blk_type(m, q4, 0, "attn_v") == QTK_T_Q8_0 && blk_type(m, q4, 1, "attn_k") == QTK_T_Q8_0 &&
		      blk_type(m, q4, 2, "attn_output") == QTK_T_Q5_K,
	      "8 experts, Q4_K_M");
	CHECK(x4 && blk_type(m, x4, 0, "attn_output") == QTK_T_Q5_K && q3 && blk_type(m, q3, 0, "attn_output") == QTK_T_Q3_K,
	      "8 experts, attn_output: IQ4_XS %s, Q3_K_L %s", x4 ? tn(blk_type(m, x4, 0, "attn_output")) : "-",
	      q3 ? tn(blk_type(m, q3, 0, "attn_output")) : "-");
	free(q4);
	free(x4);
	free(q3);
	qtk_close(m);

	/* no output head: the embedding is quantized as the head */
	m = moe_desc("llama", 2, 4, false, false, true);
	q4 = mix_types(m, "Q4_K_M");
	unsigned *q8 = mix_types(m, "Q8_0");
	CHECK(q4 && type_of(m, q4, "token_embd.weight") == QTK_T_Q6_K && q8 && type_of(m, q8, "token_embd.weight") == QTK_T_Q8_0,
	      "tied embedding takes the head's type: %s", q4 ? tn(type_of(m, q4, "token_embd.weight")) : "-");
	free(q4);
	free(q8);
	qtk_close(m);
}

/* ---- a small MoE GGUF written through the library ---------------------------------- */

static char tmpdir[] = "/tmp/qtk-moe-XXXXXX";
static const char *bin;

static char *tpath(const char *name)
{
	static char b[256][512]; /* enough for every path one run names */
	static int k;
	char *p = b[k++ % 256];
	snprintf(p, 512, "%s/%s", tmpdir, name);
	return p;
}

/* Run a program of bin/ with the arguments (a shell fragment), stdout to out (or /dev/null). */
static int prog(const char *out, const char *fmt, ...)
{
	char args[2048], cmd[3072];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof args, fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof cmd, "%s/%s >%s 2>%s/stderr", bin, args, out ? out : "/dev/null", tmpdir);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	if (b) {
		b[n] = 0;
		if (len)
			*len = (size_t)n;
	}
	return b;
}

static bool file_has(const char *path, const char *needle)
{
	char *b = slurp(path, NULL);
	bool r = b && strstr(b, needle);
	free(b);
	return r;
}

static uint32_t rng = 12345;
static float frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)((rng >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* Values of element i of t: expert e (3-D) has its own scale, so experts differ. */
static float value(const qtk_tensor *t, uint64_t i)
{
	float v = frand() + frand() + frand();
	if (t->ndim == 1)
		return 1.0f + 0.1f * v;
	uint64_t per = t->n_params / (t->ndim == 3 ? t->shape[0] : 1);
	return v * 0.05f * (float)(1 + i / per);
}

/* Write the header-only model m to path with generated values. */
static int write_model(qtk_model *m, const char *path)
{
	qtk_err e;
	qtk_err_clear(&e);
	qtk_model_set_kv_str(m, "general.name", "moe-test");
	qtk_writer *w = qtk_writer_open(path, QTK_OUT_GGUF, m, NULL, &e);
	if (!w) {
		printf("writer: %s\n", e.msg);
		return -1;
	}
	for (size_t k = 0; k < m->ntensors; k++) {
		const qtk_tensor *t = &m->tensors[k];
		uint8_t *b = malloc((size_t)t->parts[0].nbytes);
		for (uint64_t i = 0; b && i < t->n_params; i++) {
			float v = value(t, i);
			if (t->layout.type == QTK_T_F16) {
				qtk_wr16(b + 2 * i, qtk_f32_to_fp16(v));
			} else {
				uint32_t u;
				memcpy(&u, &v, 4);
				qtk_wr32(b + 4 * i, u);
			}
		}
		int rc = b ? qtk_writer_put(w, b, (size_t)t->parts[0].nbytes) : -1;
		free(b);
		if (rc) {
			qtk_writer_abort(w);
			return -1;
		}
	}
	return qtk_writer_finish(w);
}

/* Every tensor of a and b: same names in the same order, shapes, types and bytes. */
static int same_tensors(const char *pa, const char *pb)
{
	qtk_err e;
	qtk_model *a = qtk_open(pa, &e), *b = a ? qtk_open(pb, &e) : NULL;
	int diff = a && b && a->ntensors == b->ntensors ? 0 : -1;
	for (size_t i = 0; !diff && i < a->ntensors; i++) {
		const qtk_tensor *x = &a->tensors[i], *y = qtk_tensor_find(b, x->name);
		uint8_t *bx = NULL, *by = NULL;
		if (!y || x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof x->shape) || x->layout.type != y->layout.type ||
		    x->parts[0].nbytes != y->parts[0].nbytes || qtk_read_part_alloc(a, x, 0, &bx) || qtk_read_part_alloc(b, y, 0, &by) ||
		    memcmp(bx, by, (size_t)x->parts[0].nbytes)) {
			printf("  %s differs between %s and %s\n", x->name, pa, pb);
			diff++;
		}
		qtk_free(bx);
		qtk_free(by);
	}
	qtk_close(a);
	qtk_close(b);
	return diff;
}

static const qtk_tensor *find3(const qtk_model *m, const char *name, uint64_t e, uint64_t r, uint64_t c)
{
	const qtk_tensor *t = m ? qtk_tensor_find(m, name) : NULL;
	return t && t->ndim == 3 && t->shape[0] == e && t->shape[1] == r && t->shape[2] == c ? t : NULL;
}

/* The shape of tensor `name` in a qinspect --json document. */
static bool json_shape(const char *path, const char *name, const char *want)
{
	char *doc = slurp(path, NULL);
	cJSON *j = doc ? cJSON_Parse(doc) : NULL, *t, *ts = j ? cJSON_GetObjectItem(j, "tensors") : NULL;
	bool ok = false;
	cJSON_ArrayForEach(t, ts) {
		cJSON *n = cJSON_GetObjectItem(t, "name");
		if (!cJSON_IsString(n) || strcmp(n->valuestring, name))
			continue;
		char *sh = cJSON_PrintUnformatted(cJSON_GetObjectItem(t, "shape"));
		ok = sh && !strcmp(sh, want);
		if (!ok)
			printf("  %s: shape %s, want %s\n", name, sh ? sh : "-", want);
		free(sh);
		cJSON *st = cJSON_GetObjectItem(t, "stats");
		if (st && !cJSON_IsObject(cJSON_GetObjectItem(st, "histogram")))
			ok = false;
	}
	cJSON_Delete(j);
	free(doc);
	return ok;
}

/* inspect, convert, verify, records, QPK and safetensors round trips on a 3-D MoE GGUF. */
static void test_small_file(void)
{
	const char *src = tpath("moe.gguf");
	qtk_model *d = moe_desc("llama", 2, 4, true, true, true);
	CHECK(write_model(d, src) == 0, "write the MoE GGUF");
	qtk_close(d);
	qtk_err e;
	qtk_model *m = qtk_open(src, &e);
	CHECK(find3(m, "blk.1.ffn_down_exps.weight", 4, 256, 256) && qtk_tensor_rows(qtk_tensor_find(m, "blk.1.ffn_down_exps.weight")) == 1024,
	      "read back 3-D: [4, 256, 256], 1024 rows");
	qtk_close(m);

	/* qinspect: listing, JSON (with statistics), one tensor, the diff */
	CHECK(prog(tpath("sum.txt"), "qinspect --summary %s", src) == 0 && file_has(tpath("sum.txt"), "[4, 256, 256]"), "summary shape");
	CHECK(prog(tpath("j.json"), "qinspect --json --stats %s", src) == 0 &&
		      json_shape(tpath("j.json"), "blk.0.ffn_up_exps.weight", "[4,256,256]"),
	      "json shape and stats");
	CHECK(prog(tpath("t.txt"), "qinspect --tensor blk.0.ffn_gate_exps.weight %s", src) == 0 &&
		      file_has(tpath("t.txt"), "[4, 256, 256]") && file_has(tpath("t.txt"), "values (262144)"),
	      "qinspect --tensor of a 3-D tensor");

	/* the mix on 3-D tensors, then every check qverify has */
	const char *q = tpath("q4km.gguf");
	CHECK(prog(NULL, "qconvert -q %s %s --to Q4_K_M", src, q) == 0, "qconvert --to Q4_K_M");
	m = qtk_open(q, &e);
	const qtk_tensor *d0 = find3(m, "blk.0.ffn_down_exps.weight", 4, 256, 256), *d1 = find3(m, "blk.1.ffn_down_exps.weight", 4, 256, 256);
	const qtk_tensor *g0 = find3(m, "blk.0.ffn_gate_exps.weight", 4, 256, 256), *r0 = m ? qtk_tensor_find(m, "blk.0.ffn_gate_inp.weight") : NULL;
	CHECK(d0 && d1 && g0 && r0 && d0->layout.type == QTK_T_Q4_K && d1->layout.type == QTK_T_Q6_K &&
		      g0->layout.type == QTK_T_Q4_K && r0->layout.type == QTK_T_F32 && d0->n_bytes == 4 * 256 * 144,
	      "Q4_K_M: 3-D k-quants over n_expert * out rows, router F32");
	qtk_close(m);
	CHECK(prog(NULL, "qverify %s", q) == 0, "qverify on the converted file");
	CHECK(prog(tpath("against.txt"), "qverify --against %s %s", src, q) == 0 && file_has(tpath("against.txt"), "against: ok: 7 exact, 24 lossy, 0 failing of 31"),
	      "qverify --against pairs every tensor");
	CHECK(prog(tpath("diff.txt"), "qinspect --diff %s %s", src, q) == 0 && file_has(tpath("diff.txt"), "blk.1.ffn_down_exps.weight") &&
		      file_has(tpath("diff.txt"), "matched 31 of 31"),
	      "qinspect --diff pairs the 3-D tensors");
	CHECK(prog(tpath("rec.json"), "qverify --emit-record %s", q) == 0, "emit a record");
	CHECK(prog(NULL, "qverify --record %s %s", tpath("rec.json"), q) == 0, "the record matches");
	/* change one byte in the last expert of a 3-D tensor: the record and the embedded record see it */
	const char *bad = tpath("bad.gguf");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "cp %s %s", q, bad);
	CHECK(system(cmd) == 0, "copy");
	m = qtk_open(q, &e);
	const qtk_tensor *t = m ? qtk_tensor_find(m, "blk.1.ffn_up_exps.weight") : NULL;
	uint64_t off = t ? t->parts[0].offset + t->parts[0].nbytes - 100 : 0;
	qtk_close(m);
	FILE *f = fopen(bad, "r+b");
	int c = EOF;
	if (f && off && fseek(f, (long)off, SEEK_SET) == 0 && (c = fgetc(f)) != EOF && fseek(f, (long)off, SEEK_SET) == 0)
		fputc(c ^ 0x5a, f);
	if (f)
		fclose(f);
	CHECK(c != EOF, "tamper");
	CHECK(prog(tpath("bad.txt"), "qverify --record %s %s", tpath("rec.json"), bad) == 1 &&
		      file_has(tpath("bad.txt"), "blk.1.ffn_up_exps.weight"),
	      "a changed expert fails the record");
	CHECK(prog(NULL, "qverify %s", bad) == 1, "a changed expert fails the embedded record");

	/* QPK and back: the same bytes */
	const char *qpk = tpath("q.qpk"), *back = tpath("back.gguf");
	CHECK(prog(NULL, "qconvert -q %s %s", q, qpk) == 0 && prog(NULL, "qverify %s", qpk) == 0, "GGUF -> QPK, verified");
	CHECK(prog(tpath("qj.json"), "qinspect --json %s", qpk) == 0 && json_shape(tpath("qj.json"), "blk.1.ffn_down_exps.weight", "[4,256,256]"),
	      "qinspect of the QPK");
	CHECK(prog(NULL, "qconvert -q %s %s", qpk, back) == 0 && same_tensors(q, back) == 0, "QPK -> GGUF: identical tensors");

	/* safetensors with the GGUF names, and back */
	const char *st = tpath("moe.safetensors"), *stb = tpath("st-back.gguf");
	CHECK(prog(NULL, "qconvert -q %s %s --names keep", src, st) == 0, "GGUF -> safetensors");
	m = qtk_open(st, &e);
	CHECK(find3(m, "blk.0.ffn_down_exps.weight", 4, 256, 256) != NULL, "safetensors holds [4, 256, 256]");
	qtk_close(m);
	CHECK(prog(NULL, "qconvert -q %s %s --names keep", st, stb) == 0 && same_tensors(src, stb) == 0, "safetensors -> GGUF: identical tensors");

	/* content digests of a 3-D tensor: the decoded tier is the values, whatever the container */
	const char *f32 = tpath("f32.safetensors");
	CHECK(prog(NULL, "qconvert -q %s %s --to f32", src, f32) == 0, "--to f32");
	qtk_model *a = qtk_open(src, &e), *b = qtk_open(f32, &e), *k = qtk_open(q, &e);
	qtk_digests da, db, dk;
	memset(&da, 0, sizeof da);
	memset(&db, 0, sizeof db);
	memset(&dk, 0, sizeof dk);
	qtk_digest_opts o = {.threads = 2};
	bool got = a && b && k && !qtk_digest_model(a, &o, &da, &e) && !qtk_digest_model(b, &o, &db, &e) && !qtk_digest_model(k, &o, &dk, &e);
	CHECK(got, "digests: %s", e.msg);
	const qtk_leaf *la = got ? qtk_digests_find(&da, "blk.1.ffn_down_exps.weight") : NULL;
	const qtk_leaf *lb = got ? qtk_digests_find(&db, "blk.1.ffn_down_exps.weight") : NULL;
	const qtk_leaf *lk = got ? qtk_digests_find(&dk, "blk.1.ffn_down_exps.weight") : NULL;
	CHECK(la && lb && lk && la->ndim == 3 && la->shape[0] == 4 && !memcmp(la->dec, lb->dec, 32) && memcmp(la->enc, lb->enc, 32) &&
		      memcmp(la->dec, lk->dec, 32),
	      "3-D digests: decoded equal across F16 and F32, encoded differ, quantized values differ");
	qtk_digests_free(&da);
	qtk_digests_free(&db);
	qtk_digests_free(&dk);
	qtk_close(a);
	qtk_close(b);
	qtk_close(k);
}

/* llama-quantize applies an expert tensor's importance matrix (n_expert * in values) expert by
 * expert: qconvert --imatrix must give the bytes of encoding each expert with its own slice. */
static void test_imatrix_experts(void)
{
	const char *src = tpath("moe.gguf"), *imf = tpath("im.dat"), *out = tpath("im.gguf");
	static const char *const name = "blk.0.ffn_down_exps.weight";
	enum { NE = 4, IN = 256, OUT = 256 };
	float *w = malloc(NE * IN * sizeof *w);
	for (int i = 0; i < NE * IN; i++) /* very uneven importance, different per expert */
		w[i] = (float)(((i * 7919) % 97) * ((i / IN) + 1)) * ((i % IN) % (5 + i / IN) == 0 ? 1000.0f : 0.01f) + 0.001f;
	FILE *f = fopen(imf, "wb");
	int32_t v[4] = {1, (int32_t)strlen(name), 1, NE * IN};
	bool wr = f && fwrite(&v[0], 4, 2, f) == 2 && fwrite(name, 1, strlen(name), f) == strlen(name) &&
		  fwrite(&v[2], 4, 2, f) == 2 && fwrite(w, sizeof *w, NE * IN, f) == NE * IN;
	if (f)
		fclose(f);
	CHECK(wr, "write the imatrix");
	CHECK(prog(NULL, "qconvert -q %s %s --to q4_k --pure --imatrix %s", src, out, imf) == 0, "qconvert --imatrix");
	qtk_err e;
	qtk_model *sm = qtk_open(src, &e), *om = qtk_open(out, &e);
	const qtk_tensor *st = sm ? qtk_tensor_find(sm, name) : NULL, *ot = om ? qtk_tensor_find(om, name) : NULL;
	float *x = malloc((size_t)NE * OUT * IN * sizeof *x);
	uint8_t *want = malloc((size_t)NE * OUT * IN), *plainq = malloc((size_t)NE * OUT * IN), *got = NULL;
	bool ok = st && ot && ot->layout.type == QTK_T_Q4_K && !qtk_decode_tensor(sm, st, x) && !qtk_read_part_alloc(om, ot, 0, &got);
	uint64_t rb = IN / 256 * 144;
	for (int ex = 0; ok && ex < NE; ex++)
		ok = !qtk_quant_ggml(QTK_T_Q4_K, x + (size_t)ex * OUT * IN, want + (uint64_t)ex * OUT * rb, OUT, IN, w + ex * IN);
	ok = ok && !qtk_quant_ggml(QTK_T_Q4_K, x, plainq, NE * OUT, IN, NULL);
	CHECK(ok && !memcmp(got, want, (size_t)(NE * OUT * rb)), "every expert encoded with its own importance");
	CHECK(ok && memcmp(want, plainq, (size_t)(NE * OUT * rb)), "the importance matters (test is meaningful)");
	qtk_free(got);
	free(want);
	free(plainq);
	free(x);
	free(w);
	qtk_close(sm);
	qtk_close(om);
}

/* ---- llama.cpp's own files ----------------------------------------------------------- */

static void test_fixtures(const char *fx)
{
	char f16[1024], ref[1024], qw[1024];
	snprintf(f16, sizeof f16, "%s/hf/arch/ref/mixtral-llamacpp-f16.gguf", fx);
	snprintf(ref, sizeof ref, "%s/hf/arch/ref/mixtral-Q4_K_M.gguf", fx);
	snprintf(qw, sizeof qw, "%s/hf/arch/ref/qwen2moe-llamacpp-f16.gguf", fx);
	if (access(f16, R_OK) || access(ref, R_OK) || access(qw, R_OK)) {
		T_SKIP("no hf/arch MoE fixtures");
		return;
	}
	/* the types llama-quantize chose, tensor for tensor */
	const char *out = tpath("mixtral-q4km.gguf");
	CHECK(prog(NULL, "qconvert -q %s %s --to Q4_K_M", f16, out) == 0, "mixtral F16 -> Q4_K_M");
	qtk_err e;
	qtk_model *a = qtk_open(out, &e), *b = qtk_open(ref, &e);
	size_t same = 0, n = b ? b->ntensors : 0;
	for (size_t i = 0; a && i < n; i++) {
		const qtk_tensor *x = &b->tensors[i], *y = qtk_tensor_find(a, x->name);
		if (y && y->layout.type == x->layout.type && y->ndim == x->ndim && !memcmp(y->shape, x->shape, sizeof x->shape))
			same++;
		else
			printf("  %s: %s, llama-quantize %s\n", x->name, y ? tn(y->layout.type) : "missing", tn(x->layout.type));
	}
	CHECK(n == 23 && same == n && a && a->ntensors == n, "mixtral Q4_K_M types: %zu of %zu as llama-quantize", same, n);
	qtk_close(a);
	qtk_close(b);
	/* qwen2moe: shared experts and the shared-expert gate as llama.cpp's rules make them */
	out = tpath("qwen2moe-q4km.gguf");
	CHECK(prog(NULL, "qconvert -q %s %s --to Q4_K_M", qw, out) == 0, "qwen2moe F16 -> Q4_K_M");
	a = qtk_open(out, &e);
	static const struct { const char *n; unsigned t; } want[] = {
		{"blk.0.ffn_down_exps.weight", QTK_T_Q5_0}, {"blk.1.ffn_down_exps.weight", QTK_T_Q8_0},
		{"blk.0.ffn_down_shexp.weight", QTK_T_Q5_0}, {"blk.1.ffn_down_shexp.weight", QTK_T_Q8_0},
		{"blk.1.ffn_gate_exps.weight", QTK_T_Q5_0}, {"blk.1.ffn_up_shexp.weight", QTK_T_Q5_0},
		{"blk.0.ffn_gate_inp.weight", QTK_T_F32}, {"blk.1.ffn_gate_inp_shexp.weight", QTK_T_Q5_0},
		{"blk.1.attn_v.weight", QTK_T_Q8_0}, {"output.weight", QTK_T_Q8_0}, {"token_embd.weight", QTK_T_Q5_0},
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		const qtk_tensor *t = a ? qtk_tensor_find(a, want[i].n) : NULL;
		CHECK(t && t->layout.type == want[i].t, "qwen2moe %s: %s, want %s", want[i].n, t ? tn(t->layout.type) : "missing",
		      tn(want[i].t));
	}
	qtk_close(a);
	/* the F16 and the Q4_K_M paired by --diff, 3-D included */
	CHECK(prog(tpath("fxdiff.txt"), "qinspect --diff %s %s", ref, f16) == 0 && file_has(tpath("fxdiff.txt"), "matched 23 of 23"),
	      "qinspect --diff mixtral F16 / Q4_K_M");
}

int main(void)
{
	test_mix_rules();
	const char *b = getenv("QTK_BIN");
	bin = b && *b ? b : "bin";
	if (!mkdtemp(tmpdir))
		return 1;
	test_small_file();
	test_imatrix_experts();
	const char *fx = t_fixtures();
	if (fx)
		test_fixtures(fx);
	else
		T_SKIP("no fixtures: llama-quantize's MoE mix and the hf/arch MoE files");
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", tmpdir);
	return T_DONE();
}
