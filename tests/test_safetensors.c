/* test_safetensors.c - the safetensors reader against hostile inputs
 * (docs/cli.md, "Hostile input"), AWQ/GPTQ folding, short
 * reads, allocation failures, writer round trips and the real fixtures. */
#include "qtk.h"
#include "internal.h"
#include "st_json.h"
#include "t.h"
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256];

/* A path under the temp root (static rotating buffers). */
static const char *tp(const char *fmt, ...)
{
	static char bufs[8][512];
	static int k;
	char rel[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof rel, fmt, ap);
	va_end(ap);
	char *b = bufs[k++ % 8];
	snprintf(b, 512, "%s/%s", root, rel);
	return b;
}

static void mkdir_p(const char *p) { mkdir(p, 0755); }

static void put_file(const char *path, const void *d, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		printf("cannot write %s\n", path);
		exit(2);
	}
	if (n)
		fwrite(d, 1, n, f);
	fclose(f);
}

static void put_text(const char *path, const char *s) { put_file(path, s, strlen(s)); }

/* A safetensors file: length, header text, then `dlen` bytes of data. */
static void st_raw(const char *path, uint64_t n, const char *hdr, size_t hlen, const uint8_t *data, size_t dlen)
{
	uint8_t *b = malloc(8 + hlen + dlen + 1);
	qtk_wr64(b, n);
	memcpy(b + 8, hdr, hlen);
	for (size_t i = 0; i < dlen; i++)
		b[8 + hlen + i] = data ? data[i] : (uint8_t)(i * 7 + 1);
	put_file(path, b, 8 + hlen + dlen);
	free(b);
}

static void st_json(const char *path, const char *hdr, size_t dlen)
{
	st_raw(path, strlen(hdr), hdr, strlen(hdr), NULL, dlen);
}

/* Builder for valid files. */
typedef struct stb {
	char json[16384];
	size_t jl;
	uint8_t data[1 << 17];
	size_t dl;
	int n;
} stb;

static void stb_init(stb *b, const char *meta)
{
	b->jl = (size_t)snprintf(b->json, sizeof b->json, "{%s", meta ? meta : "");
	b->dl = 0;
	b->n = meta ? 1 : 0;
}

static void stb_add(stb *b, const char *name, const char *dtype, const char *shape, size_t nbytes,
		    const void *data)
{
	b->jl += (size_t)snprintf(b->json + b->jl, sizeof b->json - b->jl,
				  "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
				  b->n++ ? "," : "", name, dtype, shape, b->dl, b->dl + nbytes);
	for (size_t i = 0; i < nbytes; i++)
		b->data[b->dl + i] = data ? ((const uint8_t *)data)[i] : (uint8_t)((b->dl + i) * 13 + 5);
	b->dl += nbytes;
}

static void stb_write(stb *b, const char *path)
{
	b->json[b->jl++] = '}';
	while (b->jl % 8)
		b->json[b->jl++] = ' ';
	st_raw(path, b->jl, b->json, b->jl, b->data, b->dl);
}

/* qtk_open must fail with QTK_E_DATA, mention `needle` in msg or subject,
 * and (when want_off) give an offset; the same under 1/7/31-byte reads. */
static void expect_fail_code(int line, const char *path, int code, const char *needle, bool want_off)
{
	static const size_t reads[] = {0, 1, 7, 31};
	char first[1024] = "";
	for (size_t r = 0; r < sizeof reads / sizeof *reads; r++) {
		qtk_err e;
		qtk_test_max_read(reads[r]);
		qtk_model *m = qtk_open(path, &e);
		qtk_test_max_read(0);
		CHECK(!m, "line %d: %s opened", line, path);
		if (m) {
			qtk_close(m);
			return;
		}
		char full[1024];
		qtk_err_format(&e, "t", full, sizeof full);
		if (r == 0) {
			snprintf(first, sizeof first, "%s", full);
			CHECK(e.code == code, "line %d: code %d, want %d: %s", line, e.code, code, full);
			CHECK(!needle || strstr(e.msg, needle) || strstr(e.subject, needle),
			      "line %d: '%s' not in: %s", line, needle, full);
			CHECK(!want_off || e.offset >= 0, "line %d: no offset: %s", line, full);
			CHECK(e.file[0], "line %d: no file: %s", line, full);
		} else {
			CHECK(strcmp(first, full) == 0, "line %d: max_read %zu changed the error: %s vs %s", line,
			      reads[r], full, first);
		}
	}
}
#define FAIL_AT(path, needle, off) expect_fail_code(__LINE__, path, QTK_E_DATA, needle, off)

/* ---- hostile single files ------------------------------------------------ */

static const char T1[] = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";

static void test_header_bounds(void)
{
	put_file(tp("short"), "\x05\0\0\0", 4); /* row 1: shorter than the length field */
	FAIL_AT(tp("short"), NULL, true);
	/* row 8: N too large; N+8 beyond the file */
	st_raw(tp("huge"), 200000000ull, "{\"a\":1}", 7, NULL, 0);
	FAIL_AT(tp("huge"), "exceeds the limit", true);
	st_raw(tp("past"), 1000, "{\"a\":{}}", 8, NULL, 0);
	FAIL_AT(tp("past"), "runs past the end", true);
	st_raw(tp("ovf"), UINT64_MAX - 3, "{\"a\":{}}", 8, NULL, 0);
	FAIL_AT(tp("ovf"), "header length", true);
	/* row 9: not '{', not UTF-8, not JSON, trailing text */
	st_json(tp("lead"), " {\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("lead"), NULL, true);
	st_json(tp("utf8"), "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("utf8"), "utf-8", true);
	st_json(tp("badjson"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8);
	FAIL_AT(tp("badjson"), "json", true);
	st_json(tp("trail"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}xyz", 8);
	FAIL_AT(tp("trail"), "trailing characters", true);
	st_json(tp("nul"), "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("nul"), "\\u0000", true);
	st_json(tp("ctl"), "{\"a\tb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("ctl"), "control character", true);
	char deep[1200];
	size_t k = (size_t)snprintf(deep, sizeof deep, "{\"a\":");
	for (int i = 0; i < 300; i++)
		deep[k++] = '[';
	for (int i = 0; i < 300; i++)
		deep[k++] = ']';
	snprintf(deep + k, sizeof deep - k, "}");
	st_json(tp("deep"), deep, 0);
	FAIL_AT(tp("deep"), "nested too deeply", true);
	st_json(tp("arr"), "{\"a\":[1,2]}", 0);
	FAIL_AT(tp("arr"), "tensor 'a'", true);
}

static void test_keys(void)
{
	char h[512];
	/* row 10: duplicate tensor names, duplicate metadata keys */
	snprintf(h, sizeof h, "{%s,%s}", T1, T1);
	st_json(tp("dup"), h, 8);
	FAIL_AT(tp("dup"), "duplicate key", true);
	snprintf(h, sizeof h, "{\"__metadata__\":{\"x\":\"1\",\"x\":\"2\"},%s}", T1);
	st_json(tp("dupmeta"), h, 8);
	FAIL_AT(tp("dupmeta"), "duplicate key", true);
	snprintf(h, sizeof h, "{%s,\"__metadata__\":{},\"__metadata__\":{}}", T1);
	st_json(tp("dupmeta2"), h, 8);
	FAIL_AT(tp("dupmeta2"), "__metadata__", true);
	/* row 11: metadata not string->string; a tensor named __metadata__ */
	snprintf(h, sizeof h, "{\"__metadata__\":{\"x\":1},%s}", T1);
	st_json(tp("metanum"), h, 8);
	FAIL_AT(tp("metanum"), "__metadata__.x", true);
	snprintf(h, sizeof h, "{\"__metadata__\":[\"x\"],%s}", T1);
	st_json(tp("metaarr"), h, 8);
	FAIL_AT(tp("metaarr"), "__metadata__", true);
	st_json(tp("reserved"), "{\"__metadata__\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("reserved"), "__metadata__", true);
	st_json(tp("empty"), "{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("empty"), "empty tensor name", true);
}

static void test_fields(void)
{
	/* row 12: dtype, missing and extra fields */
	st_json(tp("dtype"), "{\"a\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("dtype"), "unknown dtype 'F17'", true);
	st_json(tp("c64"), "{\"a\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("c64"), "unknown dtype", true);
	st_json(tp("dtnum"), "{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("dtnum"), "dtype", true);
	st_json(tp("missing"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
	FAIL_AT(tp("missing"), "data_offsets", true);
	st_json(tp("extra"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"foo\":1}}", 8);
	FAIL_AT(tp("extra"), "unknown field 'foo'", true);
	st_json(tp("offs3"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", 8);
	FAIL_AT(tp("offs3"), "data_offsets", true);
	/* row 13: numbers */
	static const char *const bad[][2] = {
		{"[-2]", "negative"}, {"[2.0]", "non-integer"}, {"[2e0]", "non-integer"},
		{"[99999999999999999]", "too large"}, {"[9007199254740993]", "too large"},
		{"[02]", "leading zero"}, {"[\"2\"]", "shape"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char h[256];
		snprintf(h, sizeof h, "{\"a\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[0,8]}}", bad[i][0]);
		st_json(tp("num%zu", i), h, 8);
		FAIL_AT(tp("num%zu", i), bad[i][1], true);
		qtk_err e;
		qtk_model *m = qtk_open(tp("num%zu", i), &e);
		CHECK(!m && strstr(e.subject, "tensor 'a'"), "number error names the tensor: %s", e.subject);
		qtk_close(m);
	}
	st_json(tp("negoff"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-0,8]}}", 8);
	FAIL_AT(tp("negoff"), "negative", true);
	/* row 20: rank */
	st_json(tp("rank"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("rank"), "rank", true);
}

static void test_offsets(void)
{
	/* row 14: begin > end, not at 0, gap, overlap, tied */
	st_json(tp("rev"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8);
	FAIL_AT(tp("rev"), "begin is greater than end", true);
	st_json(tp("notzero"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
	FAIL_AT(tp("notzero"), "offset 0", true);
	st_json(tp("gap"),
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
	FAIL_AT(tp("gap"), "gap", true);
	st_json(tp("overlap"),
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
	FAIL_AT(tp("overlap"), "overlaps", true);
	st_json(tp("tied"), /* row 17 */
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("tied"), "overlaps", true);
	/* row 15: size mismatch, overflow, sub-byte */
	st_json(tp("size"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
	FAIL_AT(tp("size"), "shape and dtype need 8", true);
	st_json(tp("prodovf"),
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("prodovf"), "overflows", true);
	st_json(tp("byteovf"),
		"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,536870912],\"data_offsets\":[0,8]}}", 8);
	FAIL_AT(tp("byteovf"), "overflows", true);
	st_json(tp("f4odd"), "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2);
	FAIL_AT(tp("f4odd"), "multiple of 8", true);
	/* row 16: trailing bytes, short data */
	st_json(tp("trailing"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12);
	FAIL_AT(tp("trailing"), "trailing bytes", true);
	st_json(tp("shortdata"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 6);
	FAIL_AT(tp("shortdata"), "past the end", true);
	st_json(tp("notensors"), "{}", 4);
	FAIL_AT(tp("notensors"), "trailing bytes", true);
}

/* ---- sharded sets ---------------------------------------------------------- */

static void make_shards(const char *dir)
{
	mkdir_p(dir);
	stb b;
	stb_init(&b, "\"__metadata__\":{\"format\":\"pt\"}");
	stb_add(&b, "a", "F32", "[2]", 8, NULL);
	stb_add(&b, "b", "F16", "[3]", 6, NULL);
	char p[512];
	snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
	stb_write(&b, p);
	stb_init(&b, NULL);
	stb_add(&b, "c", "BF16", "[2,2]", 8, NULL);
	snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
	stb_write(&b, p);
}

static void index_case(const char *name, const char *json, const char *needle, int code)
{
	char d[512];
	snprintf(d, sizeof d, "%s/%s", root, name);
	make_shards(d);
	char p[600];
	snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
	put_text(p, json);
	expect_fail_code(__LINE__, p, code, needle, false);
}

#define S1 "\"model-00001-of-00002.safetensors\""
#define S2 "\"model-00002-of-00002.safetensors\""

static void test_index(void)
{
	/* a good set first */
	make_shards(tp("idx_ok"));
	put_text(tp("idx_ok/model.safetensors.index.json"),
		 "{\"metadata\":{\"total_size\":22},\"weight_map\":{\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 "}}");
	qtk_err e;
	qtk_model *m = qtk_open(tp("idx_ok/model.safetensors.index.json"), &e);
	CHECK(m, "index opens: %s", e.msg);
	if (m) {
		CHECK(m->ntensors == 3 && m->nfiles == 2, "3 tensors in 2 files");
		CHECK(strcmp(qtk_model_format(m), "safetensors") == 0, "format safetensors");
		const qtk_tensor *c = qtk_tensor_find(m, "c");
		CHECK(c && c->parts[0].file == 1 && c->parts[0].nbytes == 8, "c in file 1");
		const qtk_kv *kv = qtk_kv_find(m, "format");
		CHECK(kv && kv->val.type == QTK_V_STR && strcmp(kv->val.v.str.s, "pt") == 0, "metadata kept");
		qtk_close(m);
	}
	/* row 21 */
	index_case("idx_trav", "{\"weight_map\":{\"a\":\"../model-00001-of-00002.safetensors\"}}", "plain", QTK_E_DATA);
	index_case("idx_abs", "{\"weight_map\":{\"a\":\"/etc/passwd.safetensors\"}}", "plain", QTK_E_DATA);
	index_case("idx_bs", "{\"weight_map\":{\"a\":\"x\\\\y.safetensors\"}}", "plain", QTK_E_DATA);
	index_case("idx_ext", "{\"weight_map\":{\"a\":\"passwd\"}}", "plain", QTK_E_DATA);
	index_case("idx_missing",
		   "{\"weight_map\":{\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 ",\"d\":" S2 "}}", "missing from shard",
		   QTK_E_DATA);
	index_case("idx_unlisted", "{\"weight_map\":{\"a\":" S1 ",\"c\":" S2 "}}", "not listed", QTK_E_DATA);
	index_case("idx_wrong", "{\"weight_map\":{\"a\":" S2 ",\"b\":" S1 ",\"c\":" S2 "}}", "index lists",
		   QTK_E_DATA);
	index_case("idx_total",
		   "{\"metadata\":{\"total_size\":23},\"weight_map\":{\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 "}}",
		   "total_size", QTK_E_DATA);
	index_case("idx_total_f",
		   "{\"metadata\":{\"total_size\":22.5},\"weight_map\":{\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 "}}",
		   "total_size", QTK_E_DATA);
	index_case("idx_dup", "{\"weight_map\":{\"a\":" S1 ",\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 "}}",
		   "duplicate key", QTK_E_DATA);
	index_case("idx_nomap", "{\"metadata\":{}}", "weight_map", QTK_E_DATA);
	index_case("idx_absent",
		   "{\"weight_map\":{\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 ",\"d\":\"model-00003-of-00003.safetensors\"}}",
		   NULL, QTK_E_IO);
	/* the same tensor in two shards */
	make_shards(tp("idx_two"));
	stb b;
	stb_init(&b, NULL);
	stb_add(&b, "a", "F32", "[2]", 8, NULL);
	stb_write(&b, tp("idx_two/model-00002-of-00002.safetensors"));
	put_text(tp("idx_two/model.safetensors.index.json"),
		 "{\"weight_map\":{\"a\":" S1 ",\"b\":" S1 ",\"c\":" S2 "}}");
	FAIL_AT(tp("idx_two/model.safetensors.index.json"), "two shards", false);
}

/* ---- AWQ / GPTQ ---------------------------------------------------------- */

#define GIN 64
#define GOUT 32

/* A GPTQ 4-bit layer in=64 out=32 (group `g`, g_idx given or trivial) plus a norm. */
static void gptq_dir(const char *dir, const char *cfg, int g, const int32_t *gidx, bool with_gidx,
		     const char *skip, const char *scales_shape)
{
	mkdir_p(dir);
	char p[600];
	snprintf(p, sizeof p, "%s/config.json", dir);
	put_text(p, cfg);
	int ng = (GIN + g - 1) / g;
	int32_t triv[GIN];
	for (int i = 0; i < GIN; i++)
		triv[i] = i / g;
	char sh[64];
	stb *b = malloc(sizeof *b);
	stb_init(b, "\"__metadata__\":{\"format\":\"pt\"}");
	stb_add(b, "model.norm.weight", "F16", "[32]", 64, NULL);
	if (!skip || strcmp(skip, "qweight"))
		stb_add(b, "l.qweight", "I32", "[8,32]", 8 * 32 * 4, NULL);
	snprintf(sh, sizeof sh, "[%d,4]", ng);
	if (!skip || strcmp(skip, "qzeros"))
		stb_add(b, "l.qzeros", "I32", sh, (size_t)ng * 16, NULL);
	snprintf(sh, sizeof sh, "[%d,32]", ng);
	if (!skip || strcmp(skip, "scales"))
		stb_add(b, "l.scales", "F16", scales_shape ? scales_shape : sh,
			scales_shape ? 2 * 32 * 3 : (size_t)ng * 64, NULL);
	if (with_gidx)
		stb_add(b, "l.g_idx", "I32", "[64]", GIN * 4, gidx ? gidx : triv);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	stb_write(b, p);
	free(b);
}

static const char GPTQ_CFG[] = "{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"gptq\","
			       "\"bits\":4,\"group_size\":32,\"sym\":true,\"desc_act\":false}}";

static void test_quant(void)
{
	qtk_err e;
	int32_t perm[GIN];
	for (int i = 0; i < GIN; i++)
		perm[i] = (i * 37 % GIN) / 32;
	gptq_dir(tp("q_ok"), GPTQ_CFG, 32, NULL, true, NULL, NULL);
	gptq_dir(tp("q_act"), GPTQ_CFG, 32, perm, true, NULL, NULL);
	for (int k = 0; k < 2; k++) {
		qtk_model *m = qtk_open(tp(k ? "q_act" : "q_ok"), &e);
		CHECK(m, "gptq dir opens: %s", e.msg);
		if (!m)
			continue;
		CHECK(strcmp(qtk_model_format(m), "hf") == 0 && m->ntensors == 2, "2 logical tensors");
		const qtk_tensor *t = qtk_tensor_find(m, "l.weight");
		CHECK(t && t->layout.kind == QTK_LAYOUT_GPTQ, "l.weight is gptq");
		if (t) {
			CHECK(t->ndim == 2 && t->shape[0] == GOUT && t->shape[1] == GIN, "logical [out, in]");
			CHECK(t->layout.bits == 4 && t->layout.group_size == 32 && t->layout.sym &&
				      t->layout.gptq_version == 1,
			      "bits/group/sym/version");
			CHECK(t->layout.act_order == (k == 1), "act_order %d for case %d", t->layout.act_order, k);
			CHECK(t->nparts == 4 && strcmp(t->parts[0].role, "qweight") == 0 &&
				      strcmp(t->parts[1].role, "qzeros") == 0 && strcmp(t->parts[2].role, "scales") == 0 &&
				      strcmp(t->parts[3].role, "g_idx") == 0,
			      "parts in order");
			CHECK(t->n_bytes == 1024 + 32 + 128 + 256, "n_bytes = sum of parts: %llu",
			      (unsigned long long)t->n_bytes);
			CHECK(t->n_params == GIN * GOUT, "n_params");
		}
		qtk_close(m);
	}
	/* group -1 and v2, no g_idx */
	gptq_dir(tp("q_g1"),
		 "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":-1,"
		 "\"checkpoint_format\":\"gptq_v2\",\"sym\":false}}", GIN, NULL, false, NULL, NULL);
	qtk_model *m = qtk_open(tp("q_g1"), &e);
	CHECK(m, "group -1 opens: %s", e.msg);
	if (m) {
		const qtk_tensor *t = qtk_tensor_find(m, "l.weight");
		CHECK(t && t->layout.group_size == GIN && t->layout.gptq_version == 2 && !t->layout.sym &&
			      t->nparts == 3 && !t->layout.act_order,
		      "group -1 = in, v2, 3 parts");
		qtk_close(m);
	}
	/* quantize_config.json instead of config.json's quantization_config */
	gptq_dir(tp("q_side"), "{\"model_type\":\"llama\"}", 32, NULL, true, NULL, NULL);
	put_text(tp("q_side/quantize_config.json"), "{\"bits\":4,\"group_size\":32,\"desc_act\":false}");
	m = qtk_open(tp("q_side"), &e);
	CHECK(m && qtk_tensor_find(m, "l.weight") && qtk_tensor_find(m, "l.weight")->layout.kind == QTK_LAYOUT_GPTQ,
	      "quantize_config.json honoured: %s", e.msg);
	qtk_close(m);
	/* the bare file next to a config is folded too; a bare file alone stays plain */
	m = qtk_open(tp("q_ok/model.safetensors"), &e);
	CHECK(m && m->ntensors == 2, "bare file beside config.json folds");
	qtk_close(m);
	gptq_dir(tp("q_bare"), GPTQ_CFG, 32, NULL, true, NULL, NULL);
	unlink(tp("q_bare/config.json"));
	m = qtk_open(tp("q_bare/model.safetensors"), &e);
	CHECK(m && m->ntensors == 5 && qtk_tensor_find(m, "l.qweight"), "bare file alone stays plain");
	qtk_close(m);

	/* hostile quantized layers */
	int32_t oor[GIN];
	memcpy(oor, perm, sizeof oor);
	oor[17] = 2;
	gptq_dir(tp("q_oor"), GPTQ_CFG, 32, oor, true, NULL, NULL);
	FAIL_AT(tp("q_oor"), "g_idx[17] = 2", false);
	oor[17] = -1;
	gptq_dir(tp("q_neg"), GPTQ_CFG, 32, oor, true, NULL, NULL);
	FAIL_AT(tp("q_neg"), "l.g_idx", false);
	gptq_dir(tp("q_noz"), GPTQ_CFG, 32, NULL, true, "qzeros", NULL);
	FAIL_AT(tp("q_noz"), "l.qzeros", false);
	gptq_dir(tp("q_nos"), GPTQ_CFG, 32, NULL, true, "scales", NULL);
	FAIL_AT(tp("q_nos"), "l.scales", false);
	gptq_dir(tp("q_noqw"), GPTQ_CFG, 32, NULL, true, "qweight", NULL);
	FAIL_AT(tp("q_noqw"), ".qweight", false);
	gptq_dir(tp("q_shape"), GPTQ_CFG, 32, NULL, true, NULL, "[3,32]");
	FAIL_AT(tp("q_shape"), "l.scales", false);
	gptq_dir(tp("q_bits5"),
		 "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":5,\"group_size\":32}}", 32, NULL, true,
		 NULL, NULL);
	FAIL_AT(tp("q_bits5"), "bits 5", false);
	gptq_dir(tp("q_bits8"), /* bits 8 does not match the 4-bit shapes */
		 "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":8,\"group_size\":32}}", 32, NULL, true,
		 NULL, NULL);
	FAIL_AT(tp("q_bits8"), "tensor 'l.", false);
	gptq_dir(tp("q_fmt"),
		 "{\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":32,"
		 "\"checkpoint_format\":\"marlin\"}}", 32, NULL, true, NULL, NULL);
	FAIL_AT(tp("q_fmt"), "marlin", false);
	gptq_dir(tp("q_awqgemv"),
		 "{\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":32,\"version\":\"gemv\"}}",
		 32, NULL, false, NULL, NULL);
	FAIL_AT(tp("q_awqgemv"), "gemv", false);
	gptq_dir(tp("q_awqshape"), /* gptq-shaped tensors under an awq config */
		 "{\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":32,\"version\":\"gemm\"}}",
		 32, NULL, false, NULL, NULL);
	FAIL_AT(tp("q_awqshape"), "tensor 'l.", false);
	gptq_dir(tp("q_cfgdup"), "{\"a\":1,\"a\":2}", 32, NULL, true, NULL, NULL);
	FAIL_AT(tp("q_cfgdup"), "duplicate key", true);
	gptq_dir(tp("q_cfgbad"), "{\"a\":1,}", 32, NULL, true, NULL, NULL);
	FAIL_AT(tp("q_cfgbad"), "json", true);

	/* a valid AWQ layer in=64 out=16 g=32 */
	mkdir_p(tp("awq_ok"));
	put_text(tp("awq_ok/config.json"),
		 "{\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":32,\"zero_point\":true,"
		 "\"version\":\"gemm\"}}");
	stb *b = malloc(sizeof *b);
	stb_init(b, NULL);
	stb_add(b, "x.qweight", "I32", "[64,2]", 512, NULL);
	stb_add(b, "x.qzeros", "I32", "[2,2]", 16, NULL);
	stb_add(b, "x.scales", "F16", "[2,16]", 64, NULL);
	stb_add(b, "x.bias", "F16", "[16]", 32, NULL);
	stb_write(b, tp("awq_ok/model.safetensors"));
	m = qtk_open(tp("awq_ok"), &e);
	CHECK(m, "awq opens: %s", e.msg);
	if (m) {
		const qtk_tensor *t = qtk_tensor_find(m, "x.weight");
		CHECK(t && t->layout.kind == QTK_LAYOUT_AWQ && t->shape[0] == 16 && t->shape[1] == 64 &&
			      t->layout.group_size == 32 && !t->layout.sym && t->nparts == 3 && t->n_bytes == 592,
		      "awq logical tensor");
		CHECK(m->ntensors == 2 && qtk_tensor_find(m, "x.bias"), "bias stays plain");
		qtk_close(m);
	}
	/* an AWQ layer with a plain .weight beside it, and an orphan g_idx */
	stb_init(b, NULL);
	stb_add(b, "x.qweight", "I32", "[64,2]", 512, NULL);
	stb_add(b, "x.qzeros", "I32", "[2,2]", 16, NULL);
	stb_add(b, "x.scales", "F16", "[2,16]", 64, NULL);
	stb_add(b, "x.weight", "F16", "[16]", 32, NULL);
	stb_write(b, tp("awq_ok/model.safetensors"));
	FAIL_AT(tp("awq_ok"), "x.weight", false);
	stb_init(b, NULL);
	stb_add(b, "y.g_idx", "I32", "[4]", 16, NULL);
	stb_write(b, tp("awq_ok/model.safetensors"));
	FAIL_AT(tp("awq_ok"), "y.g_idx", false);
	free(b);
}

static void test_hf_dir(void)
{
	mkdir_p(tp("pickle"));
	put_text(tp("pickle/config.json"), "{}");
	put_text(tp("pickle/pytorch_model.bin"), "PK\003\004");
	FAIL_AT(tp("pickle"), "pickle weights refused", false);
	mkdir_p(tp("noweights"));
	put_text(tp("noweights/config.json"), "{}");
	FAIL_AT(tp("noweights"), "no safetensors", false);
	mkdir_p(tp("nocfg"));
	stb b;
	stb_init(&b, NULL);
	stb_add(&b, "a", "F32", "[2]", 8, NULL);
	stb_write(&b, tp("nocfg/model.safetensors"));
	FAIL_AT(tp("nocfg"), "config.json", false);
	mkdir_p(tp("fifo"));
	put_text(tp("fifo/config.json"), "{}");
	stb_write(&b, tp("fifo/model.safetensors"));
	mkfifo(tp("fifo/tokenizer.json"), 0644);
	FAIL_AT(tp("fifo"), "regular", false);
}

/* ---- equality helpers ------------------------------------------------------ */

static bool same_tensor_meta(const qtk_tensor *a, const qtk_tensor *b)
{
	if (strcmp(a->name, b->name) || a->ndim != b->ndim || a->nparts != b->nparts || a->n_bytes != b->n_bytes ||
	    memcmp(&a->layout, &b->layout, sizeof a->layout))
		return false;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return false;
	for (int p = 0; p < a->nparts; p++)
		if (strcmp(a->parts[p].role, b->parts[p].role) || a->parts[p].type != b->parts[p].type ||
		    a->parts[p].nbytes != b->parts[p].nbytes || a->parts[p].ndim != b->parts[p].ndim)
			return false;
	return true;
}

static bool same_models(qtk_model *a, qtk_model *b, bool offsets)
{
	if (a->ntensors != b->ntensors || a->nkv != b->nkv || a->nblobs != b->nblobs)
		return false;
	for (size_t i = 0; i < a->ntensors; i++) {
		if (!same_tensor_meta(&a->tensors[i], &b->tensors[i]))
			return false;
		for (int p = 0; offsets && p < a->tensors[i].nparts; p++)
			if (a->tensors[i].parts[p].offset != b->tensors[i].parts[p].offset ||
			    a->tensors[i].parts[p].file != b->tensors[i].parts[p].file)
				return false;
	}
	for (size_t i = 0; i < a->nkv; i++)
		if (strcmp(a->kv[i].key, b->kv[i].key) || a->kv[i].val.type != b->kv[i].val.type ||
		    (a->kv[i].val.type == QTK_V_STR && strcmp(a->kv[i].val.v.str.s, b->kv[i].val.v.str.s)))
			return false;
	for (size_t i = 0; i < a->nblobs; i++)
		if (strcmp(a->blobs[i].name, b->blobs[i].name) || a->blobs[i].len != b->blobs[i].len ||
		    memcmp(a->blobs[i].data, b->blobs[i].data, a->blobs[i].len))
			return false;
	return true;
}

/* Every part's bytes equal (tensors matched by safetensors entry name). */
static bool same_data(qtk_model *a, qtk_model *b)
{
	for (size_t i = 0; i < a->ntensors; i++) {
		const qtk_tensor *ta = &a->tensors[i];
		const qtk_tensor *tb = qtk_tensor_find(b, ta->name);
		if (!tb || tb->nparts != ta->nparts)
			return false;
		for (int p = 0; p < ta->nparts; p++) {
			uint8_t *x = NULL, *y = NULL;
			bool ok = !qtk_read_part_alloc(a, ta, p, &x) && !qtk_read_part_alloc(b, tb, p, &y) &&
				  ta->parts[p].nbytes == tb->parts[p].nbytes &&
				  memcmp(x, y, (size_t)ta->parts[p].nbytes) == 0;
			free(x);
			free(y);
			if (!ok)
				return false;
		}
	}
	return true;
}

/* Stream m through a writer to `out`. */
static int write_model(qtk_model *m, const char *out, qtk_out_kind kind, uint64_t split, qtk_err *e)
{
	qtk_write_opts o = {.split_max_size = split};
	qtk_err_clear(e);
	qtk_writer *w = qtk_writer_open(out, kind, m, &o, e);
	if (!w)
		return e->code;
	for (size_t i = 0; i < m->ntensors; i++)
		for (int p = 0; p < m->tensors[i].nparts; p++) {
			uint8_t *d = NULL;
			int rc = qtk_read_part_alloc(m, &m->tensors[i], p, &d);
			/* feed in odd-sized pieces */
			for (uint64_t off = 0; !rc && off < m->tensors[i].parts[p].nbytes; off += 1000) {
				uint64_t k = m->tensors[i].parts[p].nbytes - off;
				rc = qtk_writer_put(w, d + off, k < 1000 ? (size_t)k : 1000);
			}
			free(d);
			if (rc) {
				*e = m->err.code ? m->err : *e;
				qtk_writer_abort(w);
				return rc;
			}
		}
	return qtk_writer_finish(w);
}

/* ---- valid files: short reads, allocation failures, round trips ---------- */

static void make_valid(const char *path)
{
	stb b;
	stb_init(&b, "\"__metadata__\":{\"format\":\"pt\",\"q\\\"uote\":\"a\\\\b\\n\\u00e9\\ud83d\\ude00\",\"z\":\"\"}");
	stb_add(&b, "w", "F32", "[4,8]", 128, NULL);
	stb_add(&b, "h", "F16", "[3]", 6, NULL);
	stb_add(&b, "bf", "BF16", "[2,1,3]", 12, NULL);
	stb_add(&b, "u", "U8", "[5]", 5, NULL);
	stb_add(&b, "scalar", "I64", "[]", 8, NULL);
	stb_add(&b, "empty", "F32", "[0,4]", 0, NULL);
	stb_add(&b, "fp4", "F4", "[6]", 3, NULL);
	stb_add(&b, "f8", "F8_E4M3", "[7]", 7, NULL);
	stb_add(&b, "caf\\u00e9", "BOOL", "[1]", 1, NULL);
	stb_write(&b, path);
}

static void test_short_reads(const char *const *paths, size_t n)
{
	static const size_t reads[] = {1, 7, 31};
	for (size_t i = 0; i < n; i++) {
		qtk_err e;
		qtk_model *ref = qtk_open(paths[i], &e);
		CHECK(ref, "%s opens: %s", paths[i], e.msg);
		if (!ref)
			continue;
		for (size_t r = 0; r < 3; r++) {
			qtk_test_max_read(reads[r]);
			qtk_model *m = qtk_open(paths[i], &e);
			CHECK(m && same_models(ref, m, true), "%s same under %zu-byte reads", paths[i], reads[r]);
			if (m)
				CHECK(same_data(ref, m), "%s same data under %zu-byte reads", paths[i], reads[r]);
			qtk_test_max_read(0);
			qtk_close(m);
		}
		qtk_close(ref);
	}
}

static void test_alloc_sweep(const char *path)
{
	qtk_err e;
	long n;
	int bad = 0;
	for (n = 1; n < 100000; n++) {
		qtk_test_fail_alloc_at(n);
		qtk_model *m = qtk_open(path, &e);
		qtk_test_fail_alloc_at(0);
		if (m) {
			qtk_close(m);
			break;
		}
		if (e.code != QTK_E_IO || !strstr(e.msg, "out of memory")) {
			if (!bad++)
				printf("alloc %ld: code %d %s\n", n, e.code, e.msg);
		}
	}
	CHECK(!bad, "%s: %d allocation failures gave another error", path, bad);
	CHECK(n > 1 && n < 100000, "%s: sweep ended after %ld allocations", path, n);
}

static void test_round_trip(void)
{
	qtk_err e;
	make_valid(tp("valid.safetensors"));
	qtk_model *m = qtk_open(tp("valid.safetensors"), &e);
	CHECK(m, "valid file opens: %s", e.msg);
	if (!m)
		return;
	CHECK(m->ntensors == 9 && m->nkv == 3, "9 tensors, 3 kvs (%zu, %zu)", m->ntensors, m->nkv);
	CHECK(strcmp(m->tensors[0].name, "w") == 0 && strcmp(m->tensors[8].name, "caf\xc3\xa9") == 0,
	      "header order kept, escapes decoded");
	const qtk_kv *q = qtk_kv_find(m, "q\"uote");
	CHECK(q && strcmp(q->val.v.str.s, "a\\b\n\xc3\xa9\xf0\x9f\x98\x80") == 0, "metadata value decoded");
	int rc = write_model(m, tp("rt.safetensors"), QTK_OUT_SAFETENSORS, 0, &e);
	CHECK(!rc, "write: %s", e.msg);
	qtk_model *r = rc ? NULL : qtk_open(tp("rt.safetensors"), &e);
	CHECK(r && same_models(m, r, false) && same_data(m, r), "safetensors round trip identical");
	if (r) {
		uint8_t h[8];
		FILE *f = fopen(tp("rt.safetensors"), "rb");
		CHECK(f && fread(h, 1, 8, f) == 8 && qtk_rd64(h) % 8 == 0, "header padded to 8");
		if (f)
			fclose(f);
	}
	qtk_close(r);
	/* writer refusals: a ggml type, a duplicate entry name, a reserved name */
	qtk_model *d = qtk_model_new();
	qtk_tensor *t = qtk_model_add_tensor(d, "k");
	t->ndim = 1;
	t->shape[0] = 256;
	t->layout.type = QTK_T_Q4_K;
	t->nparts = 1;
	t->parts[0].type = QTK_T_Q4_K;
	t->parts[0].ndim = 1;
	t->parts[0].shape[0] = 256;
	t->parts[0].nbytes = 144;
	qtk_tensor_finish(t);
	qtk_writer *w = qtk_writer_open(tp("bad.safetensors"), QTK_OUT_SAFETENSORS, d, NULL, &e);
	CHECK(!w && e.code == QTK_E_DATA && strstr(e.msg, "Q4_K"), "ggml type refused: %s", e.msg);
	qtk_writer_abort(w);
	t->parts[0].type = t->layout.type = QTK_T_F32;
	t->parts[0].nbytes = 1024;
	qtk_tensor *t2 = qtk_model_add_tensor(d, "k");
	char *keep = t2->name;
	qtk_tensor_copy(t2, &d->tensors[0]);
	t2->name = keep;
	qtk_err_clear(&e); /* qtk_writer_open keeps a previous error (first wins) */
	w = qtk_writer_open(tp("bad.safetensors"), QTK_OUT_SAFETENSORS, d, NULL, &e);
	CHECK(!w && e.code == QTK_E_DATA && strstr(e.msg, "duplicate"), "duplicate refused: %s", e.msg);
	qtk_writer_abort(w);
	free(d->tensors[1].name);
	d->tensors[1].name = strdup("__metadata__");
	qtk_err_clear(&e); /* qtk_writer_open keeps a previous error (first wins) */
	w = qtk_writer_open(tp("bad.safetensors"), QTK_OUT_SAFETENSORS, d, NULL, &e);
	CHECK(!w && e.code == QTK_E_DATA, "reserved name refused: %s", e.msg);
	qtk_writer_abort(w);
	CHECK(access(tp("bad.safetensors"), F_OK) != 0, "no output left behind");
	qtk_close(d);
	/* an aborted write leaves nothing */
	qtk_err_clear(&e);
	w = qtk_writer_open(tp("aborted.safetensors"), QTK_OUT_SAFETENSORS, m, NULL, &e);
	CHECK(w, "writer opens");
	if (w)
		qtk_writer_put(w, "abc", 3);
	qtk_writer_abort(w);
	CHECK(access(tp("aborted.safetensors"), F_OK) != 0, "abort leaves no file");
	qtk_close(m);
}

/* count files in dir whose name starts with '.' and holds ".qtk-" (temporaries) */
static int temporaries(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "find '%s' -name '.*.qtk-*' | grep -q .", dir);
	return system(cmd) == 0;
}

/* What a writer would write but the reader refuses is not written: the safetensors writer and
 * the directory writer replay the reader's rules on what they are about to write (exit 3,
 * nothing left behind). Each case passes the writers' own earlier checks. */
static void test_write_replay(void)
{
	qtk_err e;
	make_valid(tp("rp.safetensors"));
	qtk_model *m = qtk_open(tp("rp.safetensors"), &e);
	CHECK(m, "valid file opens: %s", e.msg);
	if (!m)
		return;
	mkdir_p(tp("rp"));
	/* a __metadata__ key longer than the reader's key cap */
	size_t kl = QTK_CAP_KEY + 1;
	char *key = malloc(kl + 1);
	memset(key, 'k', kl);
	key[kl] = 0;
	CHECK(qtk_model_set_kv_str(m, key, "v") == 0, "long key set");
	int rc = write_model(m, tp("rp/long.safetensors"), QTK_OUT_SAFETENSORS, 0, &e);
	CHECK(rc == QTK_E_DATA && strstr(e.msg, "would refuse to read") && strstr(e.msg, "key too long"),
	      "over-long metadata key refused: %d %s", rc, e.msg);
	CHECK(access(tp("rp/long.safetensors"), F_OK) != 0 && !temporaries(tp("rp")), "nothing written");
	rc = write_model(m, tp("rp/long_hf"), QTK_OUT_HF, 0, &e);
	CHECK(rc == QTK_E_DATA && strstr(e.msg, "key too long"), "... in a directory too: %d %s", rc, e.msg);
	CHECK(access(tp("rp/long_hf"), F_OK) != 0 && !temporaries(tp("rp")), "no directory written");
	qtk_kv_remove(m, key);
	free(key);
	/* one metadata entry too many once the writer adds its own types key: CAP_KV - 3 strings
	 * plus a typed value read back as CAP_KV + 1 entries */
	char k[32];
	for (size_t i = m->nkv; i + 1 < QTK_CAP_KV; i++) {
		snprintf(k, sizeof k, "m%zu", i);
		if (qtk_model_set_kv_str(m, k, ""))
			break;
	}
	qtk_kv *u = qtk_model_add_kv(m, "typed");
	CHECK(u && m->nkv == QTK_CAP_KV, "%zu metadata entries", m->nkv);
	if (u) {
		u->val.type = QTK_V_U32;
		u->val.v.u = 7;
	}
	rc = write_model(m, tp("rp/many.safetensors"), QTK_OUT_SAFETENSORS, 0, &e);
	CHECK(rc == QTK_E_DATA && strstr(e.msg, "too many __metadata__ entries"), "too many entries refused: %d %s", rc,
	      e.msg);
	CHECK(access(tp("rp/many.safetensors"), F_OK) != 0 && !temporaries(tp("rp")), "nothing written");
	qtk_close(m);
	/* a directory's config.json the directory reader refuses: too large, not an object */
	m = qtk_open(tp("rp.safetensors"), &e);
	if (!m)
		return;
	size_t cl = QTK_CAP_JSON + 16;
	char *cfg = malloc(cl + 1);
	memset(cfg, ' ', cl);
	memcpy(cfg, "{\"a\":\"", 6);
	memset(cfg + 6, 'x', cl - 8);
	memcpy(cfg + cl - 2, "\"}", 2);
	cfg[cl] = 0;
	CHECK(qtk_model_add_blob(m, "config.json", cfg, cl) == 0, "config.json added");
	rc = write_model(m, tp("rp/bigcfg"), QTK_OUT_HF, 0, &e);
	CHECK(rc == QTK_E_DATA && strstr(e.msg, "would refuse to read") && !strcmp(e.subject, "config.json"),
	      "config.json over the cap refused: %d %s %s", rc, e.subject, e.msg);
	CHECK(access(tp("rp/bigcfg"), F_OK) != 0 && !temporaries(tp("rp")), "no directory written");
	free(cfg);
	qtk_close(m);
}

/* Allocation failures while writing: a clean QTK_E_IO, no temporaries left. */
static void test_write_alloc_sweep(const char *src, qtk_out_kind kind, const char *out, uint64_t split)
{
	qtk_err e;
	qtk_model *m = qtk_open(src, &e);
	CHECK(m, "%s opens", src);
	if (!m)
		return;
	long n;
	int bad = 0;
	for (n = 1; n < 100000; n++) {
		qtk_err_clear(&m->err);
		qtk_test_fail_alloc_at(n);
		int rc = write_model(m, out, kind, split, &e);
		qtk_test_fail_alloc_at(0);
		if (!rc)
			break;
		if (e.code != QTK_E_IO && !bad++)
			printf("write alloc %ld: code %d %s\n", n, e.code, e.msg);
	}
	CHECK(!bad && n > 1 && n < 100000, "%s: write sweep clean (%d bad, %ld steps)", out, bad, n);
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "find '%s' -name '*.qtk-*' | grep -q .", root);
	CHECK(system(cmd) != 0, "no temporaries left in %s", root);
	qtk_close(m);
}

/* ---- fixtures -------------------------------------------------------------- */

static void test_fixtures(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures absent");
		return;
	}
	static const struct {
		const char *v;
		int kind, bits, group, sym, act;
	} vs[] = {
		{"fp16", QTK_LAYOUT_PLAIN, 16, 0, 0, 0},
		{"awq-g128", QTK_LAYOUT_AWQ, 4, 128, 0, 0},
		{"gptq-2-64-0", QTK_LAYOUT_GPTQ, 2, 64, 0, 0},
		{"gptq-3-128-0", QTK_LAYOUT_GPTQ, 3, 128, 0, 0},
		{"gptq-4-128-0", QTK_LAYOUT_GPTQ, 4, 128, 0, 0},
		{"gptq-4-128-1", QTK_LAYOUT_GPTQ, 4, 128, 0, 1},
		{"gptq-4-32-1s", QTK_LAYOUT_GPTQ, 4, 32, 1, 1},
		{"gptq-8-128-0", QTK_LAYOUT_GPTQ, 8, 128, 0, 0},
	};
	char p[1024];
	for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) {
		snprintf(p, sizeof p, "%s/hf/tiny-llama/%s", fx, vs[i].v);
		qtk_err e;
		qtk_model *m = qtk_open(p, &e);
		CHECK(m, "%s opens: %s", vs[i].v, e.msg);
		if (!m)
			continue;
		/* 2 blocks x 7 linears + embed + lm_head + 2x2 block norms + final norm */
		CHECK(m->ntensors == 21, "%s: %zu logical tensors", vs[i].v, m->ntensors);
		CHECK(strcmp(qtk_model_format(m), "hf") == 0 && m->format_version == 0, "%s: format hf", vs[i].v);
		CHECK(qtk_blob_find(m, "config.json") && qtk_blob_find(m, "tokenizer.model") &&
			      qtk_blob_find(m, "tokenizer_config.json"),
		      "%s: side files kept", vs[i].v);
		int nq = 0, ok = 0;
		for (size_t k = 0; k < m->ntensors; k++) {
			const qtk_tensor *t = &m->tensors[k];
			if (t->layout.kind == QTK_LAYOUT_PLAIN)
				continue;
			nq++;
			uint64_t sum = 0;
			for (int pp = 0; pp < t->nparts; pp++)
				sum += t->parts[pp].nbytes;
			ok += (int)t->layout.kind == vs[i].kind && t->layout.bits == vs[i].bits &&
			      (int)t->layout.group_size == vs[i].group && t->layout.sym == vs[i].sym &&
			      t->layout.act_order == vs[i].act && t->n_bytes == sum &&
			      t->nparts == (vs[i].kind == QTK_LAYOUT_GPTQ ? 4 : 3) && t->ndim == 2 &&
			      t->n_params == t->shape[0] * t->shape[1];
		}
		CHECK(nq == (vs[i].kind == QTK_LAYOUT_PLAIN ? 0 : 14) && ok == nq, "%s: %d quantized, %d as expected",
		      vs[i].v, nq, ok);
		const qtk_tensor *q = qtk_tensor_find(m, "model.layers.0.self_attn.q_proj.weight");
		CHECK(q && q->shape[0] == 256 && q->shape[1] == 256, "%s: q_proj [256, 256]", vs[i].v);
		const qtk_tensor *dn = qtk_tensor_find(m, "model.layers.1.mlp.down_proj.weight");
		CHECK(dn && dn->shape[0] == 256 && dn->shape[1] == 768, "%s: down_proj [256, 768]", vs[i].v);
		if (vs[i].kind == QTK_LAYOUT_AWQ && q)
			CHECK(q->n_bytes == 256 * 256 / 2 + 2 * 32 * 4 + 2 * 256 * 2, "awq q_proj bytes %llu",
			      (unsigned long long)q->n_bytes);
		qtk_close(m);
	}
	/* HF round trips: single file, and sharded */
	static const char *const rt[] = {"awq-g128", "gptq-4-32-1s", "fp16"};
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "%s/hf/tiny-llama/%s", fx, rt[i]);
		qtk_err e;
		qtk_model *m = qtk_open(p, &e);
		if (!m)
			continue;
		for (int split = 0; split < 2; split++) {
			const char *out = tp("hf_%s_%d/", rt[i], split);
			int rc = write_model(m, out, QTK_OUT_HF, split ? 400000 : 0, &e);
			CHECK(!rc, "hf write %s: %s", rt[i], e.msg);
			qtk_model *r = rc ? NULL : qtk_open(out, &e);
			CHECK(r, "hf reopen %s: %s", out, e.msg);
			if (r) {
				CHECK(same_models(m, r, !split) && same_data(m, r), "%s split %d: hf round trip", rt[i],
				      split);
				CHECK(split ? r->nfiles > 2 : r->nfiles == 1, "%s: %u data files", rt[i], r->nfiles);
			}
			qtk_close(r);
		}
		/* a bare safetensors file: parts as separate entries, the quantization
		 * config embedded, so it reads back as the same logical tensors */
		const char *out = tp("st_%s.safetensors", rt[i]);
		int rc = write_model(m, out, QTK_OUT_SAFETENSORS, 0, &e);
		CHECK(!rc, "st write %s: %s", rt[i], e.msg);
		qtk_model *r = rc ? NULL : qtk_open(out, &e);
		CHECK(r, "st reopen %s: %s", rt[i], e.msg);
		if (r) {
			int same = 0;
			for (size_t k = 0; k < m->ntensors && k < r->ntensors; k++)
				same += same_tensor_meta(&m->tensors[k], &r->tensors[k]);
			CHECK(r->ntensors == m->ntensors && same == (int)m->ntensors && same_data(m, r),
			      "%s: %d of %zu tensors identical after a bare file", rt[i], same, m->ntensors);
			const qtk_kv *kv = qtk_kv_find(r, "format");
			CHECK(kv && strcmp(kv->val.v.str.s, "pt") == 0, "%s: __metadata__ kept", rt[i]);
			CHECK(!qtk_kv_find(r, QTK_ST_QCFG_KEY) == (i == 2), "%s: embedded config iff quantized", rt[i]);
		}
		/* the entries are the parts, named <prefix>.<role> */
		FILE *f = fopen(out, "rb");
		uint8_t hb[8];
		char *hdr = NULL;
		if (f && fread(hb, 1, 8, f) == 8 && (hdr = calloc(1, qtk_rd64(hb) + 1)) &&
		    fread(hdr, 1, qtk_rd64(hb), f) == qtk_rd64(hb))
			CHECK(i == 2 ? !strstr(hdr, ".qweight") : !!strstr(hdr, "\"model.layers.1.mlp.down_proj.qweight\""),
			      "%s: parts stored as their own entries", rt[i]);
		free(hdr);
		if (f)
			fclose(f);
		qtk_close(r);
		qtk_close(m);
	}
	/* config repair: quantized tensors without a config.json; plain tensors with a stale one */
	snprintf(p, sizeof p, "%s/hf/tiny-llama/awq-g128", fx);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	if (m) {
		/* a known side file that is not config.json (an unknown name is not carried at all) */
		free(m->blobs[0].name);
		m->blobs[0].name = strdup("README.md");
		int rc = write_model(m, tp("hf_nocfg/"), QTK_OUT_HF, 0, &e);
		qtk_model *r = rc ? NULL : qtk_open(tp("hf_nocfg"), &e);
		CHECK(r && qtk_tensor_find(r, "model.layers.0.self_attn.q_proj.weight") &&
			      qtk_tensor_find(r, "model.layers.0.self_attn.q_proj.weight")->layout.kind == QTK_LAYOUT_AWQ,
		      "config.json made for awq tensors: %s", e.msg);
		qtk_close(r);
		qtk_close(m);
	}
	snprintf(p, sizeof p, "%s/hf/tiny-llama/fp16", fx);
	m = qtk_open(p, &e);
	if (m) {
		const char *stale = "{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,"
				    "\"group_size\":128}}";
		qtk_blob *cb = (qtk_blob *)qtk_blob_find(m, "config.json");
		free(cb->data);
		cb->data = (uint8_t *)strdup(stale);
		cb->len = strlen(stale);
		qtk_model_add_blob(m, "quantize_config.json", "{\"bits\":4,\"group_size\":128}", 28);
		int rc = write_model(m, tp("hf_stale/"), QTK_OUT_HF, 0, &e);
		CHECK(!rc, "write hf_stale: %s", e.msg);
		CHECK(access(tp("hf_stale/quantize_config.json"), F_OK) != 0, "stale quantize_config.json dropped");
		qtk_model *r = rc ? NULL : qtk_open(tp("hf_stale"), &e);
		const qtk_blob *nb = r ? qtk_blob_find(r, "config.json") : NULL;
		CHECK(nb && !strstr((const char *)nb->data, "quantization_config") && strstr((const char *)nb->data, "llama"),
		      "stale quantization_config removed");
		qtk_close(r);
		qtk_close(m);
	}
	/* short reads and allocation failures on the real directories */
	char a[1024], b[1024], c[1024];
	snprintf(a, sizeof a, "%s/hf/tiny-llama/gptq-4-128-1", fx);
	snprintf(b, sizeof b, "%s/hf/tiny-llama/awq-g128", fx);
	snprintf(c, sizeof c, "%s/hf/tiny-llama/ref/awq-g128-to-gptq.safetensors", fx);
	const char *paths[] = {a, b, c};
	test_short_reads(paths, 3);
	test_alloc_sweep(a);
}

int main(void)
{
	snprintf(root, sizeof root, "/tmp/qtk-st-XXXXXX");
	if (!mkdtemp(root)) {
		printf("mkdtemp failed\n");
		return 2;
	}
	test_header_bounds();
	test_keys();
	test_fields();
	test_offsets();
	test_index();
	test_quant();
	test_hf_dir();
	test_round_trip();
	test_write_replay();
	make_valid(tp("v2.safetensors"));
	const char *paths[] = {tp("v2.safetensors"), tp("idx_ok/model.safetensors.index.json"), tp("q_act"),
			       tp("awq_ok")};
	stb *b = malloc(sizeof *b); /* awq_ok was overwritten by hostile cases: restore it */
	stb_init(b, NULL);
	stb_add(b, "x.qweight", "I32", "[64,2]", 512, NULL);
	stb_add(b, "x.qzeros", "I32", "[2,2]", 16, NULL);
	stb_add(b, "x.scales", "F16", "[2,16]", 64, NULL);
	stb_write(b, tp("awq_ok/model.safetensors"));
	free(b);
	test_short_reads(paths, 4);
	for (size_t i = 0; i < 4; i++)
		test_alloc_sweep(paths[i]);
	test_write_alloc_sweep(tp("v2.safetensors"), QTK_OUT_SAFETENSORS, tp("sweep.safetensors"), 0);
	test_write_alloc_sweep(tp("q_act"), QTK_OUT_HF, tp("sweep_hf/"), 300);
	test_fixtures();
	if (!getenv("QTK_KEEP_TMP")) {
		char cmd[400];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
		if (system(cmd) != 0)
			printf("cleanup of %s failed\n", root);
	}
	return T_DONE();
}
