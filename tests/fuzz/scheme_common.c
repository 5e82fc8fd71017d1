/* scheme_common.c - the input builder and the deep read path of the quantized-checkpoint
 * targets (fuzz_ct.c, fuzz_mlx.c, fuzz_bnb.c, fuzz_mxfp4.c; fuzz.h, "Scheme targets").
 *
 * The safetensors file is built here from a structured input, so that mutations of dtypes,
 * shapes, names and values reach the folding code instead of breaking the header length or
 * the data offsets. */
#include "fuzz.h"
#include "dequant.h"
#include "json.h"
#include "view/decode.h"
#include "view/stats.h"
#include "record/digest.h"
#include "scheme/scheme.h"
#include "scheme/qgroups.h"
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SC_BODY_MAX (1u << 20)      /* bytes of tensor data built */
#define SC_FILE_MAX (4u << 20)      /* a section read back */
#define SC_DEEP_PARAMS (1u << 16)   /* tensors this small get the deep checks */
#define SC_DIGEST_BYTES (256u << 10)/* the two-thread digest when the model is this small */

static volatile uint64_t sc_sink;

/* The bytes of file `name` in the input directory, removed afterwards; NULL when absent. */
static uint8_t *take_file(const char *name, size_t *len)
{
	char p[800];
	snprintf(p, sizeof p, "%s/%s", fz_indir(), name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	uint8_t *b = NULL;
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size <= SC_FILE_MAX) {
		size_t n = (size_t)st.st_size, got = 0;
		b = malloc(n + 1);
		if (!b)
			abort();
		while (got < n) {
			ssize_t r = read(fd, b + got, n - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		b[got] = 0;
		*len = got;
	}
	close(fd);
	unlink(p);
	return b;
}

/* Element bytes of a storage type for "fz" values (sub-byte types: one byte each). */
static unsigned elem_bytes(int type)
{
	const qtk_type_info *ti = type >= 0 ? qtk_type((unsigned)type) : NULL;
	if (!ti || !ti->blck || ti->subbyte || ti->blck != 1)
		return 1;
	return ti->bytes;
}

/* Value v in storage type `type` at p (little-endian). */
static void put_value(uint8_t *p, int type, double v)
{
	unsigned eb = elem_bytes(type);
	int64_t iv = !(v == v) ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
	switch (type) {
	case QTK_T_F32: {
		float f = (float)v;
		uint32_t u;
		memcpy(&u, &f, 4);
		qtk_wr32(p, u);
		return;
	}
	case QTK_T_F64: {
		uint64_t u;
		memcpy(&u, &v, 8);
		qtk_wr64(p, u);
		return;
	}
	case QTK_T_F16: qtk_wr16(p, qtk_f32_to_fp16((float)v)); return;
	case QTK_T_BF16: qtk_wr16(p, qtk_f32_to_bf16((float)v)); return;
	default: break;
	}
	for (unsigned k = 0; k < eb && k < 8; k++)
		p[k] = (uint8_t)((uint64_t)iv >> (8 * k));
}

/* Fill n bytes at dst of type `type` from an "fz" item: a string's bytes, or an array of
 * numbers in the type, repeated. */
static void fill_fz(uint8_t *dst, uint64_t n, int type, const cJSON *fz)
{
	if (cJSON_IsString(fz)) {
		size_t l = strlen(fz->valuestring);
		for (uint64_t i = 0; l && i < n; i++)
			dst[i] = (uint8_t)fz->valuestring[i % l];
		return;
	}
	int cnt = cJSON_GetArraySize(fz);
	unsigned eb = elem_bytes(type);
	if (cnt <= 0)
		return;
	uint8_t tmp[8];
	const cJSON *e = fz->child;
	for (uint64_t i = 0; i + eb <= n; i += eb) {
		put_value(tmp, type, cJSON_IsNumber(e) ? e->valuedouble : 0);
		memcpy(dst + i, tmp, eb);
		e = e->next ? e->next : fz->child;
	}
}

typedef struct {
	uint64_t off, n;
	int type;
	cJSON *fz; /* detached, owned */
} fillspec;

/* model.safetensors from the header text and data bytes (fz.h, "Scheme targets"). */
static void build_safetensors(const uint8_t *hdr, size_t hn, const uint8_t *data, size_t dn)
{
	char p[800];
	snprintf(p, sizeof p, "%s/model.safetensors", fz_indir());
	FILE *f = fopen(p, "wb");
	if (!f)
		abort();
	cJSON *root = cJSON_ParseWithLength((const char *)hdr, hn);
	if (!cJSON_IsObject(root)) { /* as given: the length, the text, the data */
		uint8_t le[8];
		qtk_wr64(le, hn);
		fwrite(le, 1, 8, f);
		fwrite(hdr, 1, hn, f);
		fwrite(data, 1, dn, f);
		fclose(f);
		cJSON_Delete(root);
		return;
	}
	size_t nt = 0, cap = 16;
	fillspec *fs = calloc(cap, sizeof *fs);
	uint64_t pos = 0, end = 0;
	for (cJSON *e = root->child; e && fs; e = e->next) {
		if (!cJSON_IsObject(e) || (e->string && !strcmp(e->string, "__metadata__")))
			continue;
		cJSON *fz = cJSON_DetachItemFromObjectCaseSensitive(e, "fz");
		if (fz && !cJSON_IsString(fz) && !cJSON_IsArray(fz)) {
			cJSON_Delete(fz);
			fz = NULL;
		}
		cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
		if (!dt && fz)
			dt = cJSON_AddStringToObject(e, "dtype", "U8");
		int type = cJSON_IsString(dt) ? qtk_type_by_st_name(dt->valuestring) : -1;
		if (!sh && fz) {
			size_t len = cJSON_IsString(fz) ? strlen(fz->valuestring) / elem_bytes(type) : (size_t)cJSON_GetArraySize(fz);
			sh = cJSON_AddArrayToObject(e, "shape");
			if (sh)
				cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)len));
		}
		cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
		uint64_t nb = 0, at = pos;
		if (off) { /* as given: the reader judges them */
			uint64_t a, b;
			if (qtk_json_u64(cJSON_GetArrayItem(off, 0), &a) && qtk_json_u64(cJSON_GetArrayItem(off, 1), &b) &&
			    b >= a && b <= SC_BODY_MAX)
				at = a, nb = b - a;
		} else {
			uint64_t elems = 1, v;
			bool ok = type >= 0 && cJSON_IsArray(sh);
			for (cJSON *d = ok ? sh->child : NULL; d && ok; d = d->next)
				ok = qtk_json_u64(d, &v) && qtk_mul_u64(elems, v, &elems);
			if (!ok || qtk_type_nbytes((unsigned)type, elems, &nb) || nb > SC_BODY_MAX - pos)
				nb = 0;
			cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
			if (o) {
				cJSON_AddItemToArray(o, cJSON_CreateNumber((double)pos));
				cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(pos + nb)));
			}
			pos += nb;
		}
		if (at + nb > end)
			end = at + nb;
		if (nt == cap) {
			cap *= 2;
			fillspec *g = realloc(fs, cap * sizeof *fs);
			if (!g)
				abort();
			fs = g;
		}
		fs[nt++] = (fillspec){at, nb, type, fz};
	}
	if (!fs)
		abort();
	char *txt = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!txt)
		abort();
	size_t tl = strlen(txt);
	uint8_t *body = calloc(1, end + 1);
	if (!body)
		abort();
	for (uint64_t i = 0; dn && i < end; i++)
		body[i] = data[i % dn];
	for (size_t i = 0; i < nt; i++) {
		if (fs[i].fz)
			fill_fz(body + fs[i].off, fs[i].n, fs[i].type, fs[i].fz);
		cJSON_Delete(fs[i].fz);
	}
	uint8_t le[8];
	qtk_wr64(le, tl);
	fwrite(le, 1, 8, f);
	fwrite(txt, 1, tl, f);
	fwrite(body, 1, (size_t)end, f);
	fclose(f);
	cJSON_free(txt);
	free(body);
	free(fs);
}

static bool same_floats(const float *a, const float *b, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (!(a[i] == b[i] || (isnan(a[i]) && isnan(b[i]))) || signbit(a[i]) != signbit(b[i]))
			return false;
	return true;
}

static void fail(const qtk_tensor *t, const char *what)
{
	fprintf(stderr, "fuzz: tensor '%s': %s\n", t->name, what);
	abort();
}

/* What qinspect --json says of a tensor: layout, scheme, parts, bits per weight. */
static void describe(const qtk_tensor *t)
{
	char id[128], enc[64];
	qtk_layout_id(&t->layout, id, sizeof id);
	qtk_digest_enc_id(&t->layout, enc, sizeof enc);
	sc_sink += strlen(id) + strlen(enc) + strlen(qtk_layout_type_name(&t->layout));
	const qtk_scheme *s = qtk_scheme_of(t);
	if (t->layout.kind != QTK_LAYOUT_PLAIN && !s)
		fail(t, "a packed layout without a scheme");
	for (int p = 0; p < t->nparts; p++) {
		const qtk_type_info *ti = qtk_type(t->parts[p].type);
		sc_sink += strlen(t->parts[p].role) + (ti ? strlen(ti->name) : 0);
		if (s)
			sc_sink += strlen(qtk_scheme_part_suffix(t, p));
	}
	if (t->n_params)
		sc_sink += (uint64_t)(8.0 * (double)t->n_bytes / (double)t->n_params);
	if (s) { /* every folded tensor passes the scheme's one validation */
		char why[300];
		int bad = -1;
		if (qtk_scheme_check(t, &bad, why, sizeof why)) {
			fprintf(stderr, "fuzz: folded tensor fails qtk_scheme_check (part %d): %s\n", bad, why);
			fail(t, "invalid folded tensor");
		}
	}
}

/* The exact-transcode paths qconvert takes for a packed tensor: integer groups (and their
 * ggml form), MXFP4 blocks, and chunked row decoding against the whole decode. */
static void transcodes(qtk_model *m, const qtk_tensor *t, const float *whole)
{
	const qtk_scheme *s = qtk_scheme_of(t);
	uint8_t *pp[QTK_MAX_PARTS] = {NULL};
	int rc = 0;
	for (int k = 0; k < t->nparts && !rc; k++) {
		rc = qtk_read_part_alloc(m, t, k, &pp[k]);
		fz_check_rc(rc, &m->err, "qtk_read_part_alloc");
	}
	uint64_t rows = qtk_tensor_rows(t), cols = qtk_tensor_cols(t);
	if (!rc && s->to_groups) {
		qgroups g;
		if (!qtk_scheme_to_groups(t, (const void *const *)pp, &g)) {
			unsigned gt = qtk_scheme_exact_ggml(t->layout.kind, t->layout.bits, t->layout.sym, t->layout.group_size,
							    cols);
			uint64_t rb;
			if (gt && !g.g_idx && !qtk_type_nbytes(gt, g.in, &rb)) {
				uint8_t *dst = malloc((size_t)(rb * g.out) + 1);
				if (!dst)
					abort();
				if (!qg_to_ggml(&g, gt, 0, g.out, dst))
					sc_sink += dst[0];
				free(dst);
			}
			qg_free(&g);
		}
	}
	uint64_t rb;
	if (!rc && s->to_ggml_rows && !qtk_type_nbytes(QTK_T_MXFP4, cols, &rb)) {
		uint8_t *dst = malloc((size_t)(rb * rows) + 1);
		if (!dst)
			abort();
		if (!qtk_scheme_to_ggml_rows(t, (const void *const *)pp, 0, rows, QTK_T_MXFP4, dst)) {
			/* the blocks decode to the same values */
			float *v = malloc((size_t)(rows * cols) * sizeof *v + 1);
			if (!v)
				abort();
			if (whole && !qtk_dequant_ggml(QTK_T_MXFP4, dst, v, rows * cols)) {
				for (uint64_t i = 0; i < rows * cols; i++)
					if (!(v[i] == whole[i] || (isnan(v[i]) && isnan(whole[i]))))
						fail(t, "MXFP4 blocks decode to other values than the tensor");
			}
			free(v);
		}
		free(dst);
	}
	/* rows in chunks of the scheme's alignment give the whole decode */
	if (!rc && whole && rows) {
		uint64_t step = s->row_align ? s->row_align : 1;
		float *v = malloc((size_t)(step * cols) * sizeof *v + 1);
		if (!v)
			abort();
		for (uint64_t r = 0; r < rows; r += step) {
			uint64_t n = rows - r < step ? rows - r : step;
			if (qtk_scheme_decode_rows(t, (const void *const *)pp, r, n, v))
				fail(t, "a chunk of rows does not decode although the tensor does");
			if (!same_floats(v, whole + r * cols, n * cols))
				fail(t, "rows decoded in chunks differ from the whole decode");
		}
		free(v);
	}
	for (int k = 0; k < QTK_MAX_PARTS; k++)
		qtk_free(pp[k]);
}

/* qinspect --json --stats, qverify's value cursor, qconvert's transcodes, on one tensor. */
static void deep_tensor(qtk_model *m, const qtk_tensor *t)
{
	describe(t);
	if (!qtk_can_decode(t) || !t->n_params || t->n_params > SC_DEEP_PARAMS || t->n_bytes > SC_BODY_MAX)
		return;
	qtk_tstats st;
	int rc = qtk_stats_compute(m, t, &st, NULL, NULL);
	fz_check_rc(rc, &m->err, "qtk_stats_compute");
	if (!rc) {
		cJSON *j = qtk_stats_json(&st);
		char *s = j ? cJSON_PrintUnformatted(j) : NULL;
		if (s)
			sc_sink += strlen(s);
		cJSON_free(s);
		cJSON_Delete(j);
	}
	float *whole = malloc((size_t)t->n_params * sizeof *whole);
	float *cur = malloc((size_t)t->n_params * sizeof *cur);
	if (!whole || !cur)
		abort();
	int drc = qtk_decode_tensor(m, t, whole);
	fz_check_rc(drc, &m->err, "qtk_decode_tensor");
	qtk_err e;
	qtk_err_clear(&e);
	qtk_vcursor *c = NULL;
	rc = qtk_vcursor_open(m, t, &c, &e);
	fz_check_rc(rc, &e, "qtk_vcursor_open");
	uint64_t got = 0;
	while (!rc && got < t->n_params) {
		uint64_t k = t->n_params - got < 1000 ? t->n_params - got : 1000;
		rc = qtk_vcursor_read(c, cur + got, k);
		fz_check_rc(rc, NULL, "qtk_vcursor_read");
		got += k;
	}
	qtk_vcursor_close(c);
	if (!rc && !drc && !same_floats(whole, cur, t->n_params))
		fail(t, "qverify's value cursor and qtk_decode_tensor disagree");
	if (qtk_scheme_of(t))
		transcodes(m, t, drc ? NULL : whole);
	free(whole);
	free(cur);
}

static void digest_threads(qtk_model *m)
{
	uint64_t total = 0;
	for (size_t i = 0; i < m->ntensors; i++)
		total += m->tensors[i].n_bytes;
	if (total > SC_DIGEST_BYTES)
		return;
	qtk_digests d[2];
	int rc[2];
	for (int k = 0; k < 2; k++) {
		qtk_digest_opts o = {0};
		qtk_err e;
		qtk_err_clear(&e);
		o.threads = k + 1;
		o.keep_going = true;
		rc[k] = qtk_digest_model(m, &o, &d[k], &e);
		fz_check_rc(rc[k], &e, "qtk_digest_model");
	}
	if (!rc[0] && !rc[1] && (memcmp(d[0].enc_root, d[1].enc_root, 32) || memcmp(d[0].dec_root, d[1].dec_root, 32))) {
		fprintf(stderr, "fuzz: content digests differ between 1 and 2 threads\n");
		abort();
	}
	for (int k = 0; k < 2; k++)
		if (!rc[k])
			qtk_digests_free(&d[k]);
}

void fz_scheme_run(const uint8_t *data, size_t size)
{
	const char *first;
	fz_materialize(data, size, "config.json", &first);
	size_t hn = 0, dn = 0;
	uint8_t *hdr = take_file("header", &hn), *body = take_file("data", &dn);
	if (hdr)
		build_safetensors(hdr, hn, body ? body : (const uint8_t *)"", body ? dn : 0);
	free(hdr);
	free(body);
	qtk_err e;
	qtk_model *m = qtk_open(fz_indir(), &e);
	if (getenv("QTK_FUZZ_DEBUG")) {
		if (m)
			fprintf(stderr, "fuzz: open: %s, %zu tensors\n", qtk_model_format(m), m->ntensors);
		else
			fprintf(stderr, "fuzz: open: error %d: %s: %s\n", e.code, e.subject, e.msg);
	}
	if (!m) {
		if (e.code >= 0 || !e.msg[0]) {
			fprintf(stderr, "fuzz: qtk_open failed without an error (code %d)\n", e.code);
			abort();
		}
		fz_check_rc(e.code, &e, "qtk_open");
		fz_clear();
		return;
	}
	if (getenv("QTK_FUZZ_DEBUG"))
		for (size_t i = 0; i < m->ntensors; i++) {
			char id[128];
			qtk_layout_id(&m->tensors[i].layout, id, sizeof id);
			fprintf(stderr, "fuzz:   %s %s\n", m->tensors[i].name, id);
		}
	fz_exercise(m);
	for (size_t i = 0; i < m->ntensors; i++)
		deep_tensor(m, &m->tensors[i]);
	digest_threads(m);
	qtk_close(m);
	fz_clear();
}
