/* test_bnb.c - bitsandbytes 4-bit (NF4 / FP4, with and without double quantization): the
 * fixtures' reference digests (the values cast to the quant-state dtype, and the float32
 * products), tensors made here that decode to known values, and hostile quant_state / absmax /
 * shape inputs, each refused with QTK_E_DATA naming the tensor. */
#include "internal.h"
#include "dequant.h"
#include "qpk_int.h"
#include "scheme/bnb.h"
#include "scheme/scheme.h"
#include "view/decode.h"
#include "t.h"
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static char *slurp(const char *path)
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
	return b;
}

static void hex_of(const float *y, uint64_t n, char hex[65])
{
	uint8_t d[32];
	hex[0] = 0;
	if (!qtk_qpk_sha256(y, (size_t)n * 4, NULL, 0, d))
		qtk_hex(d, 32, hex);
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static void check_variant(const char *root, const char *variant, bool cast)
{
	char dir[1024], tsv[1100];
	snprintf(dir, sizeof dir, "%s/hf/more/%s", root, variant);
	snprintf(tsv, sizeof tsv, "%s/hf/more/ref/%s%s.digest.tsv", root, variant, cast ? "" : ".f32");
	char *txt = slurp(tsv);
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
		if (!t || t->layout.kind != QTK_LAYOUT_BNB4 || t->n_params != n) {
			printf("  %s: %s missing or not bnb4\n", variant, name);
			continue;
		}
		float *y = malloc((size_t)n * 4);
		int rc = -1;
		if (cast) {
			rc = y ? qtk_decode_tensor(m, t, y) : -1;
		} else {
			uint8_t *p[QTK_MAX_PARTS] = {NULL};
			rc = 0;
			for (int k = 0; k < t->nparts && !rc; k++)
				rc = qtk_read_part_alloc(m, t, k, &p[k]);
			if (!rc && y)
				rc = qtk_bnb_decode(t, (const void *const *)p, false, 0, t->shape[0], y);
			for (int k = 0; k < QTK_MAX_PARTS; k++)
				qtk_free(p[k]);
		}
		char hex[65] = "";
		if (!rc)
			hex_of(y, n, hex);
		if (!strcmp(hex, want))
			good++;
		else
			printf("  %s%s: %s sha256 %s, want %s\n", variant, cast ? "" : " (f32)", name, hex, want);
		free(y);
	}
	CHECK(rows > 0 && good == rows, "%s%s: %u/%u reference digests", variant, cast ? "" : " (f32)", good, rows);
	printf("  %s%s: %u/%u reference digests match\n", variant, cast ? "" : " (f32 products)", good, rows);
	qtk_close(m);
	free(txt);
}

static void test_fixtures(void)
{
	const char *root = t_fixtures();
	char probe[1024];
	struct stat sb;
	if (root)
		snprintf(probe, sizeof probe, "%s/hf/more/bnb-fp4", root);
	if (!root || stat(probe, &sb)) {
		T_SKIP("fixtures hf/more/bnb-* absent");
		return;
	}
	static const char *const v[] = {"bnb-nf4-dq", "bnb-fp4"};
	for (size_t i = 0; i < 2; i++) {
		check_variant(root, v[i], true);
		check_variant(root, v[i], false);
	}
}

/* ---- tensors made here ------------------------------------------------------------------------ */

typedef struct stens {
	const char *suffix; /* after "l." */
	const char *dtype;
	char shape[32];
	const void *data;
	size_t n;
} stens;

static int write_dir(char *dir, const char *config, const stens *ts, int nt)
{
	strcpy(dir, "/tmp/qtk-bnb-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char p[256], hdr[4096];
	size_t at = 0, off = 0;
	at += (size_t)snprintf(hdr + at, sizeof hdr - at, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < nt; i++) {
		at += (size_t)snprintf(hdr + at, sizeof hdr - at, ",\"l.%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
				       ts[i].suffix, ts[i].dtype, ts[i].shape, off, off + ts[i].n);
		off += ts[i].n;
	}
	at += (size_t)snprintf(hdr + at, sizeof hdr - at, "}");
	snprintf(p, sizeof p, "%s/config.json", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fputs(config, f);
	fclose(f);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	f = fopen(p, "wb");
	if (!f)
		return -1;
	uint64_t n = at;
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(n >> (8 * i));
	fwrite(le, 1, 8, f);
	fwrite(hdr, 1, (size_t)n, f);
	for (int i = 0; i < nt; i++)
		fwrite(ts[i].data, 1, ts[i].n, f);
	fclose(f);
	return 0;
}

static void rm_dir(const char *dir)
{
	char p[256];
	snprintf(p, sizeof p, "%s/config.json", dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/model.safetensors", dir);
	unlink(p);
	rmdir(dir);
}

#define CFG4(qt) "{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"load_in_4bit\":true,\"bnb_4bit_quant_type\":\"" qt "\"}}"

/* One module l: [2, 128] in blocks of 64 (4 blocks), codes c(e) = (e * 7 + 3) % 16. */
#define OUT 2
#define IN 128
#define NE (OUT * IN)
#define NB (NE / 64)

typedef struct synth {
	uint8_t w[NE / 2];
	float absmax[NB];
	uint8_t absq[NB];
	float qmap[16];
	float nabs[1];
	float nqmap[256];
	char qs[600];
	bool fp4, dq;
} synth;

static uint8_t code_of(unsigned e) { return (uint8_t)((e * 7u + 3u) % 16u); }

static void synth_init(synth *s, bool fp4, bool dq, const char *dtype)
{
	memset(s, 0, sizeof *s);
	s->fp4 = fp4;
	s->dq = dq;
	for (unsigned e = 0; e < NE; e += 2)
		s->w[e / 2] = (uint8_t)(code_of(e) << 4 | code_of(e + 1));
	for (int b = 0; b < NB; b++) {
		s->absmax[b] = 0.25f * (float)(b + 1);
		s->absq[b] = (uint8_t)(200 + b);
	}
	memcpy(s->qmap, qtk_bnb_code_table(fp4), 64);
	s->nabs[0] = 2.0f;
	for (int k = 0; k < 256; k++)
		s->nqmap[k] = (float)(k - 128) / 128.0f;
	if (dq)
		snprintf(s->qs, sizeof s->qs,
			 "{\"quant_type\": \"%s\", \"blocksize\": 64, \"dtype\": \"%s\", \"shape\": [%d, %d], "
			 "\"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": 0.125}",
			 fp4 ? "fp4" : "nf4", dtype, OUT, IN);
	else
		snprintf(s->qs, sizeof s->qs, "{\"quant_type\": \"%s\", \"blocksize\": 64, \"dtype\": \"%s\", \"shape\": [%d, %d]}",
			 fp4 ? "fp4" : "nf4", dtype, OUT, IN);
}

/* The tensors of s; returns their count. */
static int synth_tensors(const synth *s, stens *ts)
{
	int n = 0;
	ts[n++] = (stens){"weight", "U8", "", s->w, sizeof s->w};
	snprintf(ts[n - 1].shape, sizeof ts[0].shape, "[%d,1]", NE / 2);
	if (s->dq)
		ts[n++] = (stens){"weight.absmax", "U8", "[4]", s->absq, sizeof s->absq};
	else
		ts[n++] = (stens){"weight.absmax", "F32", "[4]", s->absmax, sizeof s->absmax};
	ts[n++] = (stens){"weight.quant_map", "F32", "[16]", s->qmap, sizeof s->qmap};
	if (s->dq) {
		ts[n++] = (stens){"weight.nested_absmax", "F32", "[1]", s->nabs, sizeof s->nabs};
		ts[n++] = (stens){"weight.nested_quant_map", "F32", "[256]", s->nqmap, sizeof s->nqmap};
	}
	ts[n] = (stens){s->fp4 ? "weight.quant_state.bitsandbytes__fp4" : "weight.quant_state.bitsandbytes__nf4", "U8", "",
			s->qs, strlen(s->qs)};
	snprintf(ts[n].shape, sizeof ts[0].shape, "[%zu]", strlen(s->qs));
	return n + 1;
}

/* The value of element e as bitsandbytes computes it. */
static float expect(const synth *s, unsigned e, unsigned dtype)
{
	unsigned b = e / 64;
	float am = s->dq ? s->nqmap[s->absq[b]] * s->nabs[0] + 0.125f : s->absmax[b];
	float v = s->qmap[code_of(e)] * am;
	if (dtype == QTK_T_BF16)
		return qtk_bf16_to_f32(qtk_f32_to_bf16(v));
	if (dtype == QTK_T_F16)
		return qtk_fp16_to_f32(qtk_f32_to_fp16(v));
	return v;
}

static int open_synth(const synth *s, const char *cfg, const stens *ts, int nt, qtk_model **out, qtk_err *e)
{
	char dir[64];
	(void)s;
	if (write_dir(dir, cfg, ts, nt))
		return -1;
	qtk_err_clear(e);
	*out = qtk_open(dir, e);
	rm_dir(dir); /* the open model keeps its descriptors */
	return *out ? 0 : e->code;
}

static void test_known(void)
{
	static const struct {
		bool fp4, dq;
		const char *dtype;
		unsigned t;
	} v[] = {{false, false, "float16", QTK_T_F16},
		 {true, false, "bfloat16", QTK_T_BF16},
		 {false, true, "bfloat16", QTK_T_BF16},
		 {true, true, "float32", QTK_T_F32}};
	for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
		synth s;
		stens ts[8];
		synth_init(&s, v[i].fp4, v[i].dq, v[i].dtype);
		int nt = synth_tensors(&s, ts);
		qtk_model *m = NULL;
		qtk_err e;
		int rc = open_synth(&s, v[i].fp4 ? CFG4("fp4") : CFG4("nf4"), ts, nt, &m, &e);
		CHECK(rc == 0, "known %zu: open (%s)", i, e.msg);
		const qtk_tensor *t = m ? qtk_tensor_find(m, "l.weight") : NULL;
		CHECK(t && t->layout.kind == QTK_LAYOUT_BNB4 && t->shape[0] == OUT && t->shape[1] == IN &&
			      t->nparts == (v[i].dq ? 6 : 4) && m->ntensors == 1,
		      "known %zu: folded into one bnb4 tensor", i);
		if (t) {
			uint64_t bytes = NE / 2 + (v[i].dq ? NB + 64u + 4u + 1024u : 4u * NB + 64u) + strlen(s.qs);
			CHECK(t->n_bytes == bytes, "known %zu: %llu bytes, want %llu (absmax, maps and the JSON counted)", i,
			      (unsigned long long)t->n_bytes, (unsigned long long)bytes);
			float y[NE];
			CHECK(qtk_decode_tensor(m, t, y) == 0, "known %zu: decode", i);
			unsigned bad = 0;
			for (unsigned k = 0; k < NE; k++) {
				float w = expect(&s, k, v[i].t);
				if (memcmp(&w, &y[k], 4))
					bad++;
			}
			CHECK(bad == 0, "known %zu: %u of %d values differ", i, bad, NE);
			/* spot values by hand: element 0 has code 3, element 1 code 10 */
			if (!v[i].dq && !v[i].fp4)
				CHECK(y[0] == qtk_fp16_to_f32(qtk_f32_to_fp16(-0.39491748809814453f * 0.25f)) &&
					      y[64] == qtk_fp16_to_f32(qtk_f32_to_fp16(0.5f * 0.0f + s.qmap[code_of(64)] * 0.5f)),
				      "known %zu: nf4 spot values", i);
			if (!v[i].dq && v[i].fp4)
				CHECK(y[0] == 0.25f && y[1] == qtk_bf16_to_f32(qtk_f32_to_bf16(-0.6666666865348816f * 0.25f)),
				      "known %zu: fp4 spot values (%g %g)", i, (double)y[0], (double)y[1]);
			if (v[i].dq && v[i].fp4) /* code 3 is 1.0: absmax (200-128)/128*2 + 0.125 */
				CHECK(y[0] == 72.0f / 128.0f * 2.0f + 0.125f, "known %zu: double-quant absmax %g", i, (double)y[0]);
		}
		qtk_close(m);
	}
}

/* ---- hostile --------------------------------------------------------------------------------- */

typedef void (*mutate)(synth *s, stens *ts, int *nt);

static void m_none(synth *s, stens *ts, int *nt) { (void)s, (void)ts, (void)nt; }
static void m_json_garbage(synth *s, stens *ts, int *nt)
{
	(void)nt;
	strcpy(s->qs, "{\"quant_type\": \"nf4\", \"blocksize\": 64,,}");
	ts[*nt - 1].n = strlen(s->qs);
	snprintf(ts[*nt - 1].shape, sizeof ts[0].shape, "[%zu]", strlen(s->qs));
}
static void set_qs(synth *s, stens *ts, int nt, const char *txt)
{
	snprintf(s->qs, sizeof s->qs, "%s", txt);
	ts[nt - 1].n = strlen(s->qs);
	snprintf(ts[nt - 1].shape, sizeof ts[0].shape, "[%zu]", strlen(s->qs));
}
static void m_dup_key(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128]}");
}
static void m_unknown_key(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128], \"x\": 1}");
}
static void m_shape_lie(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [4, 128]}");
}
static void m_shape_3d(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 2, 64]}");
}
static void m_shape_zero(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [0, 128]}");
}
static void m_blocksize_lie(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 128, \"dtype\": \"float16\", \"shape\": [2, 128]}");
}
static void m_blocksize_odd(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 48, \"dtype\": \"float16\", \"shape\": [2, 128]}");
}
static void m_blocksize_neg(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": -64, \"dtype\": \"float16\", \"shape\": [2, 128]}");
}
static void m_dtype(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float8\", \"shape\": [2, 128]}");
}
static void m_qtype(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"fp4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128]}");
}
static void m_missing(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"shape\": [2, 128]}");
}
static void m_half_nested(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt, "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128], \"nested_blocksize\": 256}");
}
static void m_not_object(synth *s, stens *ts, int *nt) { set_qs(s, ts, *nt, "[1, 2]"); }
static void m_absmax_short(synth *s, stens *ts, int *nt)
{
	(void)s, (void)nt;
	strcpy(ts[1].shape, "[3]");
	ts[1].n = 12;
}
static void m_absmax_type(synth *s, stens *ts, int *nt)
{
	(void)s, (void)nt;
	ts[1].dtype = "F16";
	ts[1].n = 8;
}
static void m_absmax_nan(synth *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->absmax[2] = NAN;
}
static void m_qmap_wrong(synth *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->qmap[5] = 0.5f;
}
static void m_weight_short(synth *s, stens *ts, int *nt)
{
	(void)s, (void)nt;
	strcpy(ts[0].shape, "[127,1]");
	ts[0].n = 127;
}
static void m_no_absmax(synth *s, stens *ts, int *nt)
{
	(void)s;
	for (int k = 1; k < *nt - 1; k++)
		ts[k] = ts[k + 1];
	(*nt)--;
}
static void m_orphan(synth *s, stens *ts, int *nt)
{
	(void)s;
	ts[*nt - 1].suffix = "weight.quant_state.bitsandbytes__xx4";
}
static void m_nested_absmax_len(synth *s, stens *ts, int *nt)
{
	(void)s, (void)nt;
	strcpy(ts[3].shape, "[2]"); /* dq: weight, absmax, quant_map, nested_absmax */
	ts[3].n = 8;
	ts[3].data = s->nqmap;
}
static void m_nested_qmap_big(synth *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->nqmap[7] = 3.0f;
}
static void m_nested_absmax_neg(synth *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->nabs[0] = -1.0f;
}
static void m_nested_offset(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt,
	       "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128], \"nested_blocksize\": "
	       "256, \"nested_dtype\": \"float32\", \"nested_offset\": \"0.1\"}");
}
static void m_nested_dtype(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt,
	       "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128], \"nested_blocksize\": "
	       "256, \"nested_dtype\": \"float16\", \"nested_offset\": 0.1}");
}
static void m_nested_missing_tensor(synth *s, stens *ts, int *nt)
{
	(void)s;
	ts[4] = ts[5]; /* drop nested_quant_map */
	(*nt)--;
}
static void m_nested_fields_plain(synth *s, stens *ts, int *nt)
{
	set_qs(s, ts, *nt,
	       "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"float16\", \"shape\": [2, 128], \"nested_blocksize\": "
	       "256, \"nested_dtype\": \"float32\", \"nested_offset\": 0.1}");
}

static void hostile(const char *what, bool dq, const char *cfg, mutate fn, int want, bool at_decode)
{
	synth s;
	stens ts[8];
	synth_init(&s, false, dq, "float16");
	int nt = synth_tensors(&s, ts);
	fn(&s, ts, &nt);
	qtk_model *m = NULL;
	qtk_err e;
	int rc = open_synth(&s, cfg, ts, nt, &m, &e);
	if (at_decode && m) {
		const qtk_tensor *t = qtk_tensor_find(m, "l.weight");
		float y[NE];
		rc = t ? qtk_decode_tensor(m, t, y) : -1;
		e = m->err;
	}
	CHECK(rc == want, "%s: code %d, want %d (%s)", what, rc, want, e.msg);
	if (want)
		CHECK(strstr(e.subject, "l.") || strstr(e.subject, "key '"), "%s: names the tensor or key (%s)", what,
		      e.subject);
	qtk_close(m);
}

static void test_hostile(void)
{
	const char *c = CFG4("nf4");
	hostile("valid", false, c, m_none, 0, false);
	hostile("valid double quant", true, c, m_none, 0, false);
	hostile("valid, decoded", true, c, m_none, 0, true);
	hostile("quant_state not JSON", false, c, m_json_garbage, QTK_E_DATA, false);
	hostile("quant_state duplicate key", false, c, m_dup_key, QTK_E_DATA, false);
	hostile("quant_state unknown key", false, c, m_unknown_key, QTK_E_DATA, false);
	hostile("quant_state not an object", false, c, m_not_object, QTK_E_DATA, false);
	hostile("quant_state shape lies", false, c, m_shape_lie, QTK_E_DATA, false);
	hostile("quant_state shape 3-D", false, c, m_shape_3d, QTK_E_DATA, false);
	hostile("quant_state shape zero", false, c, m_shape_zero, QTK_E_DATA, false);
	hostile("quant_state blocksize lies", false, c, m_blocksize_lie, QTK_E_DATA, false);
	hostile("quant_state blocksize 48", false, c, m_blocksize_odd, QTK_E_DATA, false);
	hostile("quant_state blocksize negative", false, c, m_blocksize_neg, QTK_E_DATA, false);
	hostile("quant_state dtype float8", false, c, m_dtype, QTK_E_DATA, false);
	hostile("quant_state says fp4 under __nf4", false, c, m_qtype, QTK_E_DATA, false);
	hostile("quant_state without dtype", false, c, m_missing, QTK_E_DATA, false);
	hostile("quant_state with part of the nested fields", false, c, m_half_nested, QTK_E_DATA, false);
	hostile("nested fields without nested tensors", false, c, m_nested_fields_plain, QTK_E_DATA, false);
	hostile("absmax too short", false, c, m_absmax_short, QTK_E_DATA, false);
	hostile("absmax F16", false, c, m_absmax_type, QTK_E_DATA, false);
	hostile("absmax NaN (at decode)", false, c, m_absmax_nan, QTK_E_DATA, true);
	hostile("quant_map not nf4's", false, c, m_qmap_wrong, QTK_E_DATA, false);
	hostile("weight too short", false, c, m_weight_short, QTK_E_DATA, false);
	hostile("no absmax", false, c, m_no_absmax, QTK_E_DATA, false);
	hostile("parts without a quant_state", false, c, m_orphan, QTK_E_DATA, false);
	hostile("config says fp4", false, CFG4("fp4"), m_none, QTK_E_DATA, false);
	hostile("load_in_8bit with 4-bit parts", false,
		"{\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"load_in_8bit\":true}}", m_none, QTK_E_DATA,
		false);
	hostile("nested_absmax wrong length", true, c, m_nested_absmax_len, QTK_E_DATA, false);
	hostile("nested_quant_map out of [-1, 1]", true, c, m_nested_qmap_big, QTK_E_DATA, false);
	hostile("nested_absmax negative", true, c, m_nested_absmax_neg, QTK_E_DATA, false);
	hostile("nested_offset a string", true, c, m_nested_offset, QTK_E_DATA, false);
	hostile("nested_dtype float16", true, c, m_nested_dtype, QTK_E_DATA, false);
	hostile("nested_quant_map missing", true, c, m_nested_missing_tensor, QTK_E_DATA, false);
}

/* ---- LLM.int8 (bnb8) ------------------------------------------------------------------------ */

#define CFG8 "{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"load_in_8bit\":true," \
	     "\"llm_int8_threshold\":6.0,\"llm_int8_skip_modules\":null,\"llm_int8_has_fp16_weight\":false}}"
#define O8 3
#define I8N 40

typedef struct synth8 {
	int8_t w[O8 * I8N];
	float scb[O8 + 1];
	float bias[O8];
	uint8_t fmt[2];
} synth8;

static void synth8_init(synth8 *s)
{
	memset(s, 0, sizeof *s);
	for (int k = 0; k < O8 * I8N; k++)
		s->w[k] = (int8_t)((k * 37 + 11) % 255 - 127); /* -127 .. 127 */
	s->w[0] = 127;
	s->scb[0] = 2.0f;
	s->scb[1] = 0.0123456789f;
	s->scb[2] = 3.14159265f;
	for (int k = 0; k < O8; k++)
		s->bias[k] = (float)k;
}

/* weight, SCB, bias and (with_fmt) a 0-D weight_format; returns the count */
static int synth8_tensors(synth8 *s, stens *ts, bool with_fmt)
{
	int n = 0;
	ts[n++] = (stens){"weight", "I8", "", s->w, sizeof s->w};
	snprintf(ts[n - 1].shape, sizeof ts[0].shape, "[%d,%d]", O8, I8N);
	ts[n++] = (stens){"SCB", "F32", "[3]", s->scb, 4 * O8};
	ts[n++] = (stens){"bias", "F32", "[3]", s->bias, sizeof s->bias};
	if (with_fmt)
		ts[n++] = (stens){"weight_format", "U8", "[]", s->fmt, 1};
	return n;
}

/* bitsandbytes' int8_vectorwise_dequant: A * stats * 7.874015718698502e-3 in float32 */
static float expect8(int8_t w, float scb)
{
	float p = (float)w * scb;
	return p * 7.874015718698502e-3f;
}

static void test_int8_known(void)
{
	float inv = (float)(1.0 / 127.0);
	uint32_t ib;
	memcpy(&ib, &inv, 4);
	CHECK(inv == 7.874015718698502e-3f && (double)inv == 7.874015718698502e-3 && ib == 0x3c010204u,
	      "1/127 in float32 is bitsandbytes' constant (0x%08x)", ib);
	for (int with_fmt = 0; with_fmt < 2; with_fmt++) {
		synth8 s;
		stens ts[8];
		synth8_init(&s);
		int nt = synth8_tensors(&s, ts, with_fmt);
		qtk_model *m = NULL;
		qtk_err e;
		int rc = open_synth(NULL, CFG8, ts, nt, &m, &e);
		CHECK(rc == 0, "int8 %d: open (%s)", with_fmt, e.msg);
		const qtk_tensor *t = m ? qtk_tensor_find(m, "l.weight") : NULL;
		CHECK(t && t->layout.kind == QTK_LAYOUT_BNB8 && t->shape[0] == O8 && t->shape[1] == I8N && t->nparts == 2 &&
			      m->ntensors == 2 && qtk_tensor_find(m, "l.bias") && !qtk_tensor_find(m, "l.SCB") &&
			      !qtk_tensor_find(m, "l.weight_format"),
		      "int8 %d: weight and SCB folded into one bnb8 tensor, bias plain, weight_format dropped", with_fmt);
		if (!t) {
			qtk_close(m);
			continue;
		}
		char id[48];
		qtk_layout_id(&t->layout, id, sizeof id);
		CHECK(!strcmp(id, "bnb8"), "int8 %d: layout id %s", with_fmt, id);
		/* bits per weight: 8 for the code plus 32 / in for the row's SCB */
		CHECK(t->n_bytes == O8 * I8N + 4u * O8, "int8 %d: %llu bytes (codes and SCB counted)", with_fmt,
		      (unsigned long long)t->n_bytes);
		float y[O8 * I8N];
		CHECK(qtk_decode_tensor(m, t, y) == 0, "int8 %d: decode", with_fmt);
		unsigned bad = 0, differ = 0;
		for (int k = 0; k < O8 * I8N; k++) {
			float want = expect8(s.w[k], s.scb[k / I8N]), div = (float)s.w[k] * s.scb[k / I8N] / 127.0f;
			bad += memcmp(&want, &y[k], 4) != 0;
			differ += memcmp(&want, &div, 4) != 0;
		}
		CHECK(bad == 0, "int8 %d: %u of %d values differ from bitsandbytes' arithmetic", with_fmt, bad, O8 * I8N);
		if (!with_fmt)
			printf("  int8: %u of %d values of w * SCB / 127 differ from w * SCB * f32(1/127)\n", differ, O8 * I8N);
		CHECK(y[0] == 2.0f && y[I8N] == expect8(s.w[I8N], 0.0123456789f), "int8 %d: spot values %g", with_fmt,
		      (double)y[0]);
		const qtk_scheme *sc = qtk_scheme_of(t);
		CHECK(sc && !strcmp(sc->name, "bnb8") && sc->decode_rows, "int8: scheme bnb8");
		qtk_close(m);
	}
}

typedef void (*mutate8)(synth8 *s, stens *ts, int *nt);

static void n8_none(synth8 *s, stens *ts, int *nt) { (void)s, (void)ts, (void)nt; }
static void n8_scb_long(synth8 *s, stens *ts, int *nt)
{
	(void)nt;
	ts[1] = (stens){"SCB", "F32", "[4]", s->scb, 16};
}
static void n8_scb_short(synth8 *s, stens *ts, int *nt)
{
	(void)nt;
	ts[1] = (stens){"SCB", "F32", "[2]", s->scb, 8};
}
static void n8_scb_f16(synth8 *s, stens *ts, int *nt)
{
	(void)nt;
	ts[1] = (stens){"SCB", "F16", "[6]", s->scb, 12};
}
static void n8_scb_2d(synth8 *s, stens *ts, int *nt)
{
	(void)nt;
	ts[1] = (stens){"SCB", "F32", "[3,1]", s->scb, 12};
}
static void n8_weight_u8(synth8 *s, stens *ts, int *nt)
{
	(void)s, (void)nt;
	ts[0].dtype = "U8";
}
static void n8_weight_1d(synth8 *s, stens *ts, int *nt)
{
	(void)s, (void)nt;
	snprintf(ts[0].shape, sizeof ts[0].shape, "[%d]", O8 * I8N);
}
static void n8_no_weight(synth8 *s, stens *ts, int *nt)
{
	(void)s;
	ts[0] = ts[--*nt];
}
static void n8_scb_nan(synth8 *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->scb[1] = NAN;
}
static void n8_scb_neg(synth8 *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->scb[2] = -1.0f;
}
static void n8_fmt_tiled(synth8 *s, stens *ts, int *nt)
{
	(void)ts, (void)nt;
	s->fmt[0] = 2;
}
static void n8_fmt_two(synth8 *s, stens *ts, int *nt)
{
	(void)s;
	ts[*nt - 1].n = 2;
	snprintf(ts[*nt - 1].shape, sizeof ts[0].shape, "[2]");
}
static void n8_fmt_orphan(synth8 *s, stens *ts, int *nt)
{
	(void)s;
	ts[1] = ts[--*nt]; /* weight_format instead of SCB */
}
static void n8_4bit_part(synth8 *s, stens *ts, int *nt)
{
	(void)s;
	ts[(*nt)++] = (stens){"weight.absmax", "F32", "[1]", s->bias, 4};
}

static void hostile8(const char *what, const char *cfg, mutate8 fn, int want, bool at_decode)
{
	synth8 s;
	stens ts[8];
	synth8_init(&s);
	int nt = synth8_tensors(&s, ts, true);
	fn(&s, ts, &nt);
	qtk_model *m = NULL;
	qtk_err e;
	int rc = open_synth(NULL, cfg, ts, nt, &m, &e);
	if (at_decode && m) {
		const qtk_tensor *t = qtk_tensor_find(m, "l.weight");
		float y[O8 * I8N];
		rc = t ? qtk_decode_tensor(m, t, y) : -1;
		e = m->err;
	}
	CHECK(rc == want, "int8 %s: code %d, want %d (%s)", what, rc, want, e.msg);
	if (want)
		CHECK(strstr(e.subject, "l.") || strstr(e.subject, "key '"), "int8 %s: names the tensor or key (%s)", what,
		      e.subject);
	qtk_close(m);
}

static void test_int8_hostile(void)
{
	hostile8("valid", CFG8, n8_none, 0, false);
	hostile8("valid, decoded", CFG8, n8_none, 0, true);
	hostile8("SCB too long", CFG8, n8_scb_long, QTK_E_DATA, false);
	hostile8("SCB too short", CFG8, n8_scb_short, QTK_E_DATA, false);
	hostile8("SCB F16", CFG8, n8_scb_f16, QTK_E_DATA, false);
	hostile8("SCB 2-D", CFG8, n8_scb_2d, QTK_E_DATA, false);
	hostile8("weight U8", CFG8, n8_weight_u8, QTK_E_DATA, false);
	hostile8("weight 1-D", CFG8, n8_weight_1d, QTK_E_DATA, false);
	hostile8("no weight", CFG8, n8_no_weight, QTK_E_DATA, false);
	hostile8("SCB NaN (at decode)", CFG8, n8_scb_nan, QTK_E_DATA, true);
	hostile8("SCB negative (at decode)", CFG8, n8_scb_neg, QTK_E_DATA, true);
	hostile8("weight_format tiled", CFG8, n8_fmt_tiled, QTK_E_DATA, false);
	hostile8("weight_format two bytes", CFG8, n8_fmt_two, QTK_E_DATA, false);
	hostile8("weight_format without SCB", CFG8, n8_fmt_orphan, QTK_E_DATA, false);
	hostile8("4-bit part in an 8-bit checkpoint", CFG8, n8_4bit_part, QTK_E_DATA, false);
	hostile8("SCB under load_in_4bit", CFG4("nf4"), n8_none, QTK_E_DATA, false);
	hostile8("load_in_8bit and load_in_4bit",
		 "{\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"load_in_8bit\":true,\"load_in_4bit\":true}}",
		 n8_none, QTK_E_DATA, false);
	hostile8("load_in_8bit a string",
		 "{\"quantization_config\":{\"quant_method\":\"bitsandbytes\",\"load_in_8bit\":\"yes\"}}", n8_none,
		 QTK_E_DATA, false);
}

static void test_parse(void)
{
	qtk_bnb_state s;
	char why[200];
	const char *ok = "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": [256, 256], "
			 "\"nested_blocksize\": 256, \"nested_dtype\": \"float32\", \"nested_offset\": 0.09090232849121094}";
	CHECK(qtk_bnb_parse_state(ok, strlen(ok), &s, why, sizeof why) == 0 && !s.fp4 && s.blocksize == 64 &&
		      s.dtype == QTK_T_BF16 && s.out == 256 && s.in == 256 && s.nested_blocksize == 256 &&
		      s.nested_offset == 0.09090232849121094f,
	      "parse the fixture's quant_state (%s)", why);
	CHECK(qtk_bnb_parse_state(ok, 1, &s, why, sizeof why) == QTK_E_DATA, "one byte");
	CHECK(qtk_bnb_parse_state(ok, strlen(ok) - 1, &s, why, sizeof why) == QTK_E_DATA, "truncated");
	const char *nul = "{\"quant_type\": \"nf\\u00004\"}";
	CHECK(qtk_bnb_parse_state(nul, strlen(nul), &s, why, sizeof why) == QTK_E_DATA, "escaped NUL");
}

int main(void)
{
	test_parse();
	test_known();
	test_hostile();
	test_int8_known();
	test_int8_hostile();
	test_fixtures();
	return T_DONE();
}
