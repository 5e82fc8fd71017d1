/* test_gguf.c - GGUF reader/writer: fixtures, round trips, hostile input. */
#include "internal.h"
#include "t.h"
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/qtk-gguf-XXXXXX";

/* ---- a tiny GGUF builder ---- */
typedef struct gb {
	qtk_buf b;
} gb;
static void p32(gb *g, uint32_t v) { uint8_t x[4]; qtk_wr32(x, v); qtk_buf_put(&g->b, x, 4); }
static void p64(gb *g, uint64_t v) { uint8_t x[8]; qtk_wr64(x, v); qtk_buf_put(&g->b, x, 8); }
static void pstr(gb *g, const char *s) { p64(g, strlen(s)); qtk_buf_puts(&g->b, s); }
static void kv_u32(gb *g, const char *k, uint32_t v) { pstr(g, k); p32(g, QTK_V_U32); p32(g, v); }
static void kv_str(gb *g, const char *k, const char *v) { pstr(g, k); p32(g, QTK_V_STR); pstr(g, v); }
static void tinfo(gb *g, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
	pstr(g, name);
	p32(g, nd);
	for (uint32_t i = 0; i < nd; i++)
		p64(g, ne[i]);
	p32(g, type);
	p64(g, off);
}
static void pad(gb *g, uint32_t a)
{
	while (g->b.len % a)
		qtk_buf_putc(&g->b, 0);
}
static void hdr(gb *g, uint64_t nt, uint64_t nkv)
{
	qtk_buf_put(&g->b, "GGUF", 4);
	p32(g, 3);
	p64(g, nt);
	p64(g, nkv);
}

static char *write_file(const char *name, const void *d, size_t n)
{
	char *p = qtk_path_join(tmpdir, name);
	FILE *f = fopen(p, "wb");
	fwrite(d, 1, n, f);
	fclose(f);
	return p;
}

/* A valid model: 2 KVs, an F32 [4] tensor and a Q8_0 [2 x 32] tensor. */
static void valid_model(gb *g)
{
	memset(g, 0, sizeof *g);
	hdr(g, 2, 2);
	kv_str(g, "general.architecture", "llama");
	kv_u32(g, "llama.block_count", 1);
	uint64_t ne1[1] = {4}, ne2[2] = {32, 2};
	tinfo(g, "norm.weight", 1, ne1, QTK_T_F32, 0);
	tinfo(g, "blk.0.w", 2, ne2, QTK_T_Q8_0, 32);
	pad(g, 32);
	for (int i = 0; i < 16; i++)
		qtk_buf_putc(&g->b, (char)i);
	while (g->b.len % 32)
		qtk_buf_putc(&g->b, 0);
	for (int i = 0; i < 68; i++)
		qtk_buf_putc(&g->b, (char)(i * 7));
}

/* Open bytes; expect failure with QTK_E_DATA and a message containing `want`. */
static void expect_bad(const char *what, const void *d, size_t n, const char *want)
{
	char *p = write_file("bad.gguf", d, n);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(!m, "%s: opened", what);
	CHECK(e.code == QTK_E_DATA, "%s: code %d (%s)", what, e.code, e.msg);
	char full[2048];
	qtk_err_format(&e, "t", full, sizeof full);
	CHECK(strstr(full, want) != NULL, "%s: message '%s' lacks '%s'", what, full, want);
	CHECK(strstr(full, p) != NULL, "%s: message lacks the file name: %s", what, full);
	qtk_close(m);
	free(p);
}

static void test_valid(void)
{
	gb g;
	valid_model(&g);
	char *p = write_file("ok.gguf", g.b.p, g.b.len);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	CHECK(m != NULL, "open: %s", e.msg);
	if (m) {
		CHECK(m->ntensors == 2 && m->nkv == 2, "counts %zu %zu", m->ntensors, m->nkv);
		CHECK(m->tensors[1].shape[0] == 2 && m->tensors[1].shape[1] == 32, "shape reversed");
		CHECK(m->tensors[1].n_bytes == 68, "q8_0 bytes %llu", (unsigned long long)m->tensors[1].n_bytes);
		uint8_t b[68];
		CHECK(qtk_read_part(m, &m->tensors[1], 0, 0, b, 68) == 0, "read");
		CHECK(b[1] == 7 && b[67] == (uint8_t)(67 * 7), "data");
	}
	qtk_close(m);
	/* the same under 1/7/31-byte reads */
	size_t chunks[] = {1, 7, 31};
	for (int k = 0; k < 3; k++) {
		qtk_test_max_read(chunks[k]);
		m = qtk_open(p, &e);
		CHECK(m && m->ntensors == 2 && m->tensors[1].parts[0].offset == (uint64_t)(g.b.len - 68),
		      "short reads of %zu", chunks[k]);
		qtk_close(m);
	}
	qtk_test_max_read(0);
	/* allocation failure sweep: clean error or success, never a crash */
	int ok = 0, failed_clean = 0;
	for (long n = 1; n < 200; n++) {
		qtk_test_fail_alloc_at(n);
		m = qtk_open(p, &e);
		qtk_test_fail_alloc_at(0);
		if (m) {
			ok = 1;
			qtk_close(m);
			break;
		}
		if (e.code == QTK_E_IO)
			failed_clean++;
	}
	CHECK(ok && failed_clean > 3, "alloc sweep: ok %d, clean failures %d", ok, failed_clean);
	free(p);
	qtk_buf_free(&g.b);
}

static void test_hostile(void)
{
	gb g;
	valid_model(&g);
	/* 1: truncated header */
	expect_bad("short file", g.b.p, 10, "truncated header");
	/* 22: magic, version, endianness */
	uint8_t *c = malloc(g.b.len);
	memcpy(c, g.b.p, g.b.len); c[0] = 'X';
	expect_bad("magic", c, g.b.len, "unknown format");
	memcpy(c, g.b.p, g.b.len); qtk_wr32(c + 4, 1);
	expect_bad("version 1", c, g.b.len, "unsupported GGUF version 1");
	memcpy(c, g.b.p, g.b.len); qtk_wr32(c + 4, 4);
	expect_bad("version 4", c, g.b.len, "unsupported GGUF version 4");
	memcpy(c, g.b.p, g.b.len); qtk_wr32(c + 4, 0x03000000);
	expect_bad("big endian", c, g.b.len, "big-endian");
	/* 23: counts */
	memcpy(c, g.b.p, g.b.len); qtk_wr64(c + 8, 1ull << 40);
	expect_bad("tensor count", c, g.b.len, "tensor count");
	memcpy(c, g.b.p, g.b.len); qtk_wr64(c + 16, UINT64_MAX);
	expect_bad("kv count", c, g.b.len, "kv count");
	/* 24: string length beyond the file */
	memcpy(c, g.b.p, g.b.len); qtk_wr64(c + 24, 1ull << 20);
	expect_bad("key length", c, g.b.len, "exceeds");
	memcpy(c, g.b.p, g.b.len); qtk_wr64(c + 24, UINT64_MAX);
	expect_bad("key length huge", c, g.b.len, "exceeds the limit");
	free(c);
	gb h;
	/* 25: empty key, duplicate key */
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); kv_u32(&h, "", 1);
	expect_bad("empty key", h.b.p, h.b.len, "key is empty");
	qtk_buf_free(&h.b);
	memset(&h, 0, sizeof h); hdr(&h, 0, 2); kv_u32(&h, "a.b", 1); kv_u32(&h, "a.b", 2);
	expect_bad("dup key", h.b.p, h.b.len, "duplicate key");
	qtk_buf_free(&h.b);
	/* 26: value type, nested array, array length */
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); pstr(&h, "a.b"); p32(&h, 13); p32(&h, 0);
	expect_bad("value type", h.b.p, h.b.len, "unknown value type 13");
	qtk_buf_free(&h.b);
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); pstr(&h, "a.b"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_ARR); p64(&h, 1);
	p32(&h, 0); p32(&h, 0);
	expect_bad("nested array", h.b.p, h.b.len, "nested arrays");
	qtk_buf_free(&h.b);
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); pstr(&h, "a.b"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_U64);
	p64(&h, 1ull << 60); p64(&h, 0);
	expect_bad("array length", h.b.p, h.b.len, "array length");
	qtk_buf_free(&h.b);
	/* 27: bool */
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); pstr(&h, "a.b"); p32(&h, QTK_V_BOOL); qtk_buf_putc(&h.b, 2);
	qtk_buf_put(&h.b, "pad-pad-pad", 11);
	expect_bad("bool", h.b.p, h.b.len, "not 0 or 1");
	qtk_buf_free(&h.b);
	/* 28: alignment */
	uint32_t aligns[] = {0, 3, 4, 1u << 21};
	for (int i = 0; i < 4; i++) {
		memset(&h, 0, sizeof h); hdr(&h, 0, 1); kv_u32(&h, "general.alignment", aligns[i]);
		qtk_buf_put(&h.b, "pad-pad-pad-pad", 15);
		expect_bad("alignment", h.b.p, h.b.len, "alignment");
		qtk_buf_free(&h.b);
	}
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); pstr(&h, "general.alignment"); p32(&h, QTK_V_U64); p64(&h, 32);
	expect_bad("alignment type", h.b.p, h.b.len, "wrong type u64");
	qtk_buf_free(&h.b);
	/* 29: well-known key type */
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); kv_str(&h, "llama.block_count", "12");
	expect_bad("block_count type", h.b.p, h.b.len, "expected an integer");
	qtk_buf_free(&h.b);
	/* 30: ranges */
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); kv_u32(&h, "llama.block_count", 100000);
	qtk_buf_put(&h.b, "pad-pad-pad-pad", 15);
	expect_bad("block_count range", h.b.p, h.b.len, "out of range");
	qtk_buf_free(&h.b);
	/* 31: vocab */
	memset(&h, 0, sizeof h); hdr(&h, 0, 2);
	pstr(&h, "tokenizer.ggml.tokens"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_STR); p64(&h, 2); pstr(&h, "a"); pstr(&h, "<0xZZ>");
	pstr(&h, "tokenizer.ggml.token_type"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_I32); p64(&h, 2); p32(&h, 1); p32(&h, 6);
	expect_bad("byte token", h.b.p, h.b.len, "malformed byte token");
	qtk_buf_free(&h.b);
	memset(&h, 0, sizeof h); hdr(&h, 0, 2);
	pstr(&h, "tokenizer.ggml.tokens"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_STR); p64(&h, 2); pstr(&h, "a"); pstr(&h, "b");
	pstr(&h, "tokenizer.ggml.scores"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_F32); p64(&h, 1); p32(&h, 0);
	expect_bad("vocab lengths", h.b.p, h.b.len, "has 1 entries");
	qtk_buf_free(&h.b);
	memset(&h, 0, sizeof h); hdr(&h, 0, 2);
	pstr(&h, "tokenizer.ggml.tokens"); p32(&h, QTK_V_ARR); p32(&h, QTK_V_STR); p64(&h, 2); pstr(&h, "a"); pstr(&h, "b");
	kv_u32(&h, "tokenizer.ggml.bos_token_id", 5);
	expect_bad("token id", h.b.p, h.b.len, "token id 5 out of range");
	qtk_buf_free(&h.b);
	/* 33: tensor names */
	uint64_t ne[4] = {32, 1, 1, 1};
	char longname[80];
	memset(longname, 'x', 70); longname[70] = 0;
	const char *names[] = {"", longname};
	for (int i = 0; i < 2; i++) {
		memset(&h, 0, sizeof h); hdr(&h, 1, 0); tinfo(&h, names[i], 1, ne, 0, 0); pad(&h, 32);
		qtk_buf_put(&h.b, longname, 70); qtk_buf_put(&h.b, longname, 70);
		expect_bad("tensor name", h.b.p, h.b.len, "tensor name");
		qtk_buf_free(&h.b);
	}
	memset(&h, 0, sizeof h); hdr(&h, 2, 0); tinfo(&h, "a", 1, ne, 0, 0); tinfo(&h, "a", 1, ne, 0, 128); pad(&h, 32);
	for (int i = 0; i < 4; i++) qtk_buf_put(&h.b, longname, 70);
	expect_bad("dup tensor", h.b.p, h.b.len, "duplicate tensor name");
	qtk_buf_free(&h.b);
	/* 34: dims */
	uint64_t bad_ne[][4] = {{0, 1, 1, 1}, {1ull << 63, 1, 1, 1}, {1ull << 40, 1ull << 40, 1, 1}};
	const char *want[] = {"dimension 0 is 0", "dimension 0 is", "element count overflows"};
	for (int i = 0; i < 3; i++) {
		memset(&h, 0, sizeof h); hdr(&h, 1, 0); tinfo(&h, "t", i == 2 ? 2 : 1, bad_ne[i], 0, 0); pad(&h, 32);
		qtk_buf_put(&h.b, longname, 64);
		expect_bad("dims", h.b.p, h.b.len, want[i]);
		qtk_buf_free(&h.b);
	}
	uint32_t nds[] = {0, 5};
	uint64_t ne8[8] = {32, 1, 1, 1, 1, 1, 1, 1};
	for (int i = 0; i < 2; i++) {
		memset(&h, 0, sizeof h); hdr(&h, 1, 0); tinfo(&h, "t", nds[i], ne8, 0, 0); pad(&h, 32);
		qtk_buf_put(&h.b, longname, 64); qtk_buf_put(&h.b, longname, 64);
		expect_bad("n_dims", h.b.p, h.b.len, "n_dims");
		qtk_buf_free(&h.b);
	}
	/* 35: type id, block size */
	uint32_t bad_types[] = {4, 31, 43, 156};
	for (int i = 0; i < 4; i++) {
		memset(&h, 0, sizeof h); hdr(&h, 1, 0); tinfo(&h, "t", 1, ne, bad_types[i], 0); pad(&h, 32);
		qtk_buf_put(&h.b, longname, 64);
		expect_bad("type", h.b.p, h.b.len, "unknown or removed ggml type");
		qtk_buf_free(&h.b);
	}
	uint64_t ne17[1] = {17};
	memset(&h, 0, sizeof h); hdr(&h, 1, 0); tinfo(&h, "t", 1, ne17, QTK_T_Q4_0, 0); pad(&h, 32);
	qtk_buf_put(&h.b, longname, 64);
	expect_bad("block size", h.b.p, h.b.len, "not a multiple of the q4_0 block size");
	qtk_buf_free(&h.b);
	/* 36: offsets */
	uint64_t offs[][2] = {{0, 16}, {0, 0}, {0, 4096}};
	const char *ow[] = {"not a multiple of the alignment", "overlaps", "offset beyond end of file"};
	for (int i = 0; i < 3; i++) {
		memset(&h, 0, sizeof h); hdr(&h, 2, 0); tinfo(&h, "a", 1, ne, 0, offs[i][0]); tinfo(&h, "b", 1, ne, 0, offs[i][1]);
		pad(&h, 32);
		qtk_buf_put(&h.b, longname, 64); qtk_buf_put(&h.b, longname, 64); qtk_buf_put(&h.b, longname, 64);
		expect_bad("offsets", h.b.p, h.b.len, ow[i]);
		qtk_buf_free(&h.b);
	}
	/* 37: data start beyond the file (alignment padding past EOF) */
	memset(&h, 0, sizeof h); hdr(&h, 1, 1); kv_u32(&h, "general.alignment", 1u << 20); tinfo(&h, "t", 1, ne, 0, 0);
	expect_bad("data start", h.b.p, h.b.len, "data section start");
	qtk_buf_free(&h.b);
	/* 4: truncated inside a field */
	memset(&h, 0, sizeof h); hdr(&h, 0, 1); kv_u32(&h, "a.b", 1);
	expect_bad("truncated field", h.b.p, h.b.len - 2, "truncated: need 4 bytes for value");
	qtk_buf_free(&h.b);
	qtk_buf_free(&g.b);
	/* 5: not a regular file */
	qtk_err e;
	CHECK(!qtk_open("/dev/null", &e) && e.code == QTK_E_DATA && strstr(e.msg, "not a regular file"),
	      "device: %s", e.msg);
	CHECK(!qtk_open("/nonexistent/x.gguf", &e) && e.code == QTK_E_IO, "missing file: %d", e.code);
}

/* Write m to path through the writer, copying every part. */
static int copy_model(qtk_model *m, const char *path)
{
	qtk_err e;
	qtk_err_clear(&e);
	qtk_writer *w = qtk_writer_open(path, qtk_out_kind_for_path(path), m, NULL, &e);
	if (!w)
		return e.code;
	for (size_t i = 0; i < m->ntensors; i++)
		for (int p = 0; p < m->tensors[i].nparts; p++) {
			uint8_t *b;
			if (qtk_read_part_alloc(m, &m->tensors[i], p, &b)) {
				qtk_writer_abort(w);
				return -3;
			}
			int rc = qtk_writer_put(w, b, (size_t)m->tensors[i].parts[p].nbytes);
			free(b);
			if (rc) {
				qtk_writer_abort(w);
				return rc;
			}
		}
	return qtk_writer_finish(w);
}

static int same_value(const qtk_value *a, const qtk_value *b)
{
	if (a->type != b->type || a->elem != b->elem || a->n != b->n)
		return 0;
	if (a->type == QTK_V_STR)
		return a->v.str.len == b->v.str.len && !memcmp(a->v.str.s, b->v.str.s, (size_t)a->v.str.len);
	if (a->type != QTK_V_ARR)
		return a->v.u == b->v.u;
	if (a->elem == QTK_V_STR) {
		const qtk_str *x = a->arr, *y = b->arr;
		for (uint64_t i = 0; i < a->n; i++)
			if (x[i].len != y[i].len || memcmp(x[i].s, y[i].s, (size_t)x[i].len))
				return 0;
		return 1;
	}
	return !memcmp(a->arr, b->arr, (size_t)(a->n * qtk_value_size(a->elem)));
}

/* Every tensor's bytes and every KV equal. */
static void check_same(qtk_model *a, qtk_model *b, const char *what)
{
	CHECK(a->ntensors == b->ntensors && a->nkv == b->nkv, "%s: counts", what);
	if (a->ntensors != b->ntensors || a->nkv != b->nkv)
		return;
	int bad = 0;
	for (size_t i = 0; i < a->nkv; i++)
		if (strcmp(a->kv[i].key, b->kv[i].key) || !same_value(&a->kv[i].val, &b->kv[i].val))
			bad++;
	CHECK(!bad, "%s: %d kvs differ", what, bad);
	bad = 0;
	for (size_t i = 0; i < a->ntensors; i++) {
		const qtk_tensor *x = &a->tensors[i], *y = &b->tensors[i];
		if (strcmp(x->name, y->name) || x->n_bytes != y->n_bytes || x->layout.type != y->layout.type) {
			bad++;
			continue;
		}
		uint8_t *p, *q;
		if (qtk_read_part_alloc(a, x, 0, &p) || qtk_read_part_alloc(b, y, 0, &q)) {
			bad++;
			continue;
		}
		if (memcmp(p, q, (size_t)x->n_bytes))
			bad++;
		free(p);
		free(q);
	}
	CHECK(!bad, "%s: %d tensors differ", what, bad);
}

static void test_roundtrip_file(const char *src, const char *label)
{
	qtk_err e;
	qtk_model *a = qtk_open(src, &e);
	CHECK(a != NULL, "%s: open: %s", label, e.msg);
	if (!a)
		return;
	char *out = qtk_path_join(tmpdir, "rt.gguf");
	int rc = copy_model(a, out);
	CHECK(rc == 0, "%s: write rc %d", label, rc);
	qtk_model *b = qtk_open(out, &e);
	CHECK(b != NULL, "%s: reopen: %s", label, e.msg);
	if (b)
		check_same(a, b, label);
	qtk_close(a);
	qtk_close(b);
	unlink(out);
	free(out);
}

/* Compare against the fixture digest listing: name, type, dims, bytes. */
static void test_fixture_listing(const char *fx)
{
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/gguf", fx);
	DIR *d = opendir(dir);
	int files = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (n < 6 || strcmp(de->d_name + n - 5, ".gguf"))
			continue;
		char path[2048], tsv[2048];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		snprintf(tsv, sizeof tsv, "%s/%.*s.digest.tsv", dir, (int)(n - 5), de->d_name);
		qtk_err e;
		qtk_model *m = qtk_open(path, &e);
		CHECK(m != NULL, "%s: %s", de->d_name, e.msg);
		FILE *f = fopen(tsv, "r");
		if (!m || !f) {
			if (f)
				fclose(f);
			qtk_close(m);
			continue;
		}
		files++;
		char line[4096];
		int lines = 0, bad = 0;
		while (fgets(line, sizeof line, f)) {
			char *fld[5];
			char *s = line;
			int k = 0;
			for (; k < 5; k++) {
				fld[k] = s;
				char *tab = strchr(s, '\t');
				if (!tab)
					break;
				*tab = 0;
				s = tab + 1;
			}
			if (k < 4)
				continue;
			lines++;
			const qtk_tensor *t = qtk_tensor_find(m, fld[0]);
			if (!t) {
				bad++;
				continue;
			}
			char dims[128] = "";
			size_t at = 0;
			for (int i = t->ndim - 1; i >= 0; i--)
				at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%llu", i == t->ndim - 1 ? "" : "x",
						       (unsigned long long)t->shape[i]);
			const qtk_type_info *ti = qtk_type(t->layout.type);
			uint64_t bytes = 0;
			qtk_parse_u64(fld[3], &bytes);
			if (strcmp(ti->name, fld[1]) || strcmp(dims, fld[2]) || bytes != t->n_bytes) {
				printf("mismatch %s: %s %s %s vs %s %s %llu\n", de->d_name, fld[0], fld[1], fld[2], ti->name,
				       dims, (unsigned long long)t->n_bytes);
				bad++;
			}
		}
		fclose(f);
		CHECK(lines == (int)m->ntensors && bad == 0, "%s: %d lines, %zu tensors, %d mismatches", de->d_name,
		      lines, m->ntensors, bad);
		if (strstr(de->d_name, "Q4_K_M") || strstr(de->d_name, "f32") || strstr(de->d_name, "IQ2_XXS"))
			test_roundtrip_file(path, de->d_name);
		qtk_close(m);
	}
	if (d)
		closedir(d);
	CHECK(files >= 23, "fixture files checked: %d", files);
	/* split sets: open through any shard, same tensors as the whole file */
	static const char *const sets[][2] = {{"split-f32/tiny-f32", "tiny-f32.gguf"},
					      {"split-q4km/tiny-Q4_K_M", "tiny-Q4_K_M.gguf"}};
	for (int s = 0; s < 2; s++) {
		char whole[2048];
		snprintf(whole, sizeof whole, "%s/gguf/%s", fx, sets[s][1]);
		qtk_err e;
		qtk_model *w = qtk_open(whole, &e);
		for (int k = 1; k <= 3; k++) {
			char p[2048];
			snprintf(p, sizeof p, "%s/gguf/%s-%05d-of-00003.gguf", fx, sets[s][0], k);
			qtk_model *m = qtk_open(p, &e);
			CHECK(m && m->nfiles == 3 && w && m->ntensors == w->ntensors, "split %s shard %d: %s", sets[s][0], k,
			      m ? "" : e.msg);
			if (m && w && k == 2) {
				int bad = 0;
				for (size_t i = 0; i < w->ntensors; i++) {
					const qtk_tensor *x = &w->tensors[i], *y = qtk_tensor_find(m, x->name);
					uint8_t *p1, *p2;
					if (!y || qtk_read_part_alloc(w, x, 0, &p1)) {
						bad++;
						continue;
					}
					if (qtk_read_part_alloc(m, y, 0, &p2)) {
						free(p1);
						bad++;
						continue;
					}
					bad += memcmp(p1, p2, (size_t)x->n_bytes) != 0;
					free(p1);
					free(p2);
				}
				CHECK(!bad, "split %s: %d tensors differ from the whole file", sets[s][0], bad);
				CHECK(!qtk_kv_find(m, "split.count"), "split keys hidden");
			}
			qtk_close(m);
		}
		qtk_close(w);
	}
	/* vocab files: big string arrays */
	snprintf(dir, sizeof dir, "%s/vocab", fx);
	d = opendir(dir);
	int vocab = 0;
	while (d && (de = readdir(d))) {
		if (!strstr(de->d_name, ".gguf"))
			continue;
		char path[2048];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		qtk_err e;
		qtk_model *m = qtk_open(path, &e);
		CHECK(m && qtk_kv_find(m, "tokenizer.ggml.tokens"), "%s: %s", de->d_name, m ? "no tokens" : e.msg);
		vocab++;
		if (m)
			test_roundtrip_file(path, de->d_name);
		qtk_close(m);
	}
	if (d)
		closedir(d);
	CHECK(vocab >= 3, "vocab files: %d", vocab);
}

static void test_writer_atomic(void)
{
	/* a failing write leaves nothing behind */
	gb g;
	valid_model(&g);
	char *p = write_file("src.gguf", g.b.p, g.b.len);
	qtk_err e;
	qtk_model *m = qtk_open(p, &e);
	char *out = qtk_path_join(tmpdir, "atomic.gguf");
	qtk_writer *w = qtk_writer_open(out, QTK_OUT_GGUF, m, NULL, &e);
	CHECK(w != NULL, "writer open");
	if (w) {
		uint8_t b[16] = {0};
		qtk_writer_put(w, b, 16);
		qtk_writer_abort(w);
	}
	CHECK(!qtk_path_exists(out), "aborted output exists");
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int tmps = 0;
	while (d && (de = readdir(d)))
		tmps += strstr(de->d_name, ".qtk-") != NULL;
	closedir(d);
	CHECK(tmps == 0, "temporaries left: %d", tmps);
	qtk_close(m);
	free(out);
	free(p);
	qtk_buf_free(&g.b);
}

/* Deferred puts (qtk_writer_put_later / qtk_writer_put_pending, as qconvert's windows use them):
 * the same file and the same bytes seen by a tee, in the same order, as plain puts, whether the
 * waiting put is done by another thread, by the next deferred put or by the next plain call;
 * a deferred put that fails is reported by the next call on the writer and nothing is left. */
typedef struct {
	uint64_t h;      /* FNV-1a over (tensor, bytes) in the order seen */
	uint64_t n;
} tee_log;

static int log_tee(void *ctx, size_t tensor, const void *buf, size_t n)
{
	tee_log *l = ctx;
	const uint8_t *b = buf;
	l->h = (l->h ^ (uint64_t)tensor) * 0x100000001b3ull;
	for (size_t i = 0; i < n; i++)
		l->h = (l->h ^ b[i]) * 0x100000001b3ull;
	l->n += n;
	return 0;
}

static void *pending_thread(void *a)
{
	static int rc;
	rc = qtk_writer_put_pending(a);
	return &rc;
}

static qtk_model *deferred_desc(void)
{
	qtk_model *d = qtk_model_new();
	for (unsigned i = 0; i < 7; i++) {
		char name[32];
		snprintf(name, sizeof name, "t%u", i);
		qtk_tensor *t = qtk_model_add_tensor(d, name);
		const uint64_t n = 1000u + 777u * i;
		t->ndim = 1;
		t->shape[0] = n;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = t->parts[0].type = QTK_T_F32;
		t->nparts = 1;
		t->parts[0].ndim = 1;
		t->parts[0].shape[0] = n;
		t->parts[0].nbytes = 4 * n;
		qtk_tensor_finish(t);
	}
	return d;
}

/* way 0: plain puts; 1: deferred, the waiting put done by another thread; 2: deferred, done by
 * the next deferred put or the closing calls. Pieces of 1000 bytes across tensor boundaries. */
static int write_deferred(const char *p, int way, tee_log *l)
{
	qtk_model *d = deferred_desc();
	uint64_t total = 0;
	for (size_t i = 0; i < d->ntensors; i++)
		total += d->tensors[i].parts[0].nbytes;
	qtk_write_opts o = {.tee = log_tee, .tee_ctx = l};
	qtk_err e;
	qtk_err_clear(&e);
	qtk_writer *w = qtk_writer_open(p, QTK_OUT_GGUF, d, &o, &e);
	int rc = w ? 0 : e.code;
	for (uint64_t off = 0, k = 0; !rc && off < total; off += 1000, k++) {
		const size_t n = (size_t)(total - off < 1000 ? total - off : 1000);
		uint8_t *b = way ? qtk_writer_defer_buf(w, n, &e) : qtk_malloc(n);
		if (!b) {
			rc = QTK_E_IO;
			break;
		}
		for (size_t j = 0; j < n; j++)
			b[j] = (uint8_t)((off + j) * 131u >> 3);
		if (way == 0) {
			rc = qtk_writer_put(w, b, n);
			qtk_free(b);
		} else {
			rc = qtk_writer_put_later(w, b, n);
			if (!rc && way == 1 && k % 3 == 0) {
				pthread_t th;
				void *r = NULL;
				if (pthread_create(&th, NULL, pending_thread, w) == 0) {
					pthread_join(th, &r);
					rc = *(int *)r;
				}
			}
		}
	}
	if (rc)
		qtk_writer_abort(w);
	else
		rc = qtk_writer_finish(w); /* frees w, also when it fails */
	qtk_close(d);
	return rc;
}

static void test_writer_deferred(void)
{
	char *p[3];
	tee_log l[3];
	memset(l, 0, sizeof l);
	uint8_t *f[3] = {NULL, NULL, NULL};
	size_t fl[3] = {0, 0, 0};
	for (int way = 0; way < 3; way++) {
		char name[32];
		snprintf(name, sizeof name, "deferred%d.gguf", way);
		p[way] = qtk_path_join(tmpdir, name);
		l[way].h = 0xcbf29ce484222325ull;
		const int rc = write_deferred(p[way], way, &l[way]);
		CHECK(rc == 0, "way %d: rc %d", way, rc);
		qtk_err e;
		CHECK(qtk_slurp(p[way], 1 << 26, &f[way], &fl[way], &e) == 0, "way %d read back: %s", way, e.msg);
	}
	for (int way = 1; way < 3; way++) {
		CHECK(f[way] && f[0] && fl[way] == fl[0] && fl[0] && !memcmp(f[way], f[0], fl[0]), "way %d: file differs", way);
		CHECK(l[way].n == l[0].n && l[way].h == l[0].h, "way %d: the tee saw other bytes (%llu against %llu)", way,
		      (unsigned long long)l[way].n, (unsigned long long)l[0].n);
	}
	for (int way = 0; way < 3; way++) {
		qtk_free(f[way]);
		free(p[way]);
	}
	/* a deferred put past the described data fails at the next call; nothing is left */
	qtk_model *d = deferred_desc();
	char *q = qtk_path_join(tmpdir, "deferred-bad.gguf");
	qtk_err e;
	qtk_writer *w = qtk_writer_open(q, QTK_OUT_GGUF, d, NULL, &e);
	CHECK(w != NULL, "open: %s", e.msg);
	if (w) {
		uint64_t total = 0;
		for (size_t i = 0; i < d->ntensors; i++)
			total += d->tensors[i].parts[0].nbytes;
		uint8_t *b = qtk_writer_defer_buf(w, (size_t)total + 8, &e);
		CHECK(b != NULL, "buffer: %s", e.msg);
		int rc = b ? qtk_writer_put_later(w, memset(b, 0, (size_t)total + 8), (size_t)total + 8) : -1;
		CHECK(rc == 0, "the deferred put is only queued: %d", rc);
		rc = qtk_writer_put_pending(w);
		CHECK(rc == QTK_E_INTERNAL && strstr(e.msg, "more data than described"), "pending: rc %d: %s", rc, e.msg);
		rc = qtk_writer_finish(w);
		CHECK(rc == QTK_E_INTERNAL, "finish after a failed deferred put: %d", rc);
	}
	CHECK(!qtk_path_exists(q), "a failed output exists");
	free(q);
	qtk_close(d);
}

/* The writer checks what it is about to write with the reader's rules: no GGUF it writes is
 * one the reader refuses (and nothing is written when it would be). */
static void test_writer_validates(void)
{
	struct {
		const char *key;
		int type; /* QTK_V_STR with text, else an integer type with num */
		const char *text;
		uint64_t num;
		const char *why;
	} cases[] = {
		{"general.alignment", QTK_V_STR, "64", 0, "wrong type"},
		{"general.alignment", QTK_V_U32, NULL, 48, "power of two"},
		{"split.count", QTK_V_U16, NULL, 5, "split.*"},
		{"tokenizer.ggml.bos_token_id", QTK_V_U32, NULL, 999999, "out of range"},
		{"llama.block_count", QTK_V_U32, NULL, 100000, "block count"},
		{"tokenizer.ggml.tokens", QTK_V_STR, "abc", 0, "wrong type"},
		{"ev\x1b[1mil", QTK_V_STR, "x", 0, "printable ASCII"},
		{"general.name", QTK_V_STR, "fine", 0, NULL},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		qtk_model *d = qtk_model_new();
		qtk_tensor *t = qtk_model_add_tensor(d, "w");
		t->ndim = 1;
		t->shape[0] = 4;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = t->parts[0].type = QTK_T_F32;
		t->nparts = 1;
		t->parts[0].ndim = 1;
		t->parts[0].shape[0] = 4;
		t->parts[0].nbytes = 16;
		qtk_tensor_finish(t);
		qtk_model_set_kv_str(d, "general.architecture", "llama");
		qtk_kv *tok = qtk_model_add_kv(d, "tokenizer.ggml.tokens");
		static qtk_str toks[2] = {{1, (char *)"a"}, {1, (char *)"b"}};
		qtk_value tv = {.type = QTK_V_ARR, .elem = QTK_V_STR, .n = 2, .arr = toks};
		qtk_value_copy(&tok->val, &tv);
		if (cases[c].type == QTK_V_STR) {
			qtk_model_set_kv_str(d, cases[c].key, cases[c].text);
		} else {
			qtk_kv *kv = qtk_model_add_kv(d, cases[c].key);
			kv->val.type = (uint8_t)cases[c].type;
			kv->val.v.u = cases[c].num;
		}
		char out[64];
		snprintf(out, sizeof out, "valid-%zu.gguf", c);
		char *p = qtk_path_join(tmpdir, out);
		qtk_err e;
		qtk_err_clear(&e);
		qtk_writer *w = qtk_writer_open(p, QTK_OUT_GGUF, d, NULL, &e);
		float x[4] = {1, 2, 3, 4};
		int rc = w ? qtk_writer_put(w, x, 16) : e.code;
		if (w && !rc)
			rc = qtk_writer_finish(w);
		else if (w)
			qtk_writer_abort(w);
		if (cases[c].why) {
			CHECK(rc == QTK_E_DATA && strstr(e.msg, cases[c].why) && !qtk_path_exists(p), "%s: rc %d: %s", cases[c].key,
			      rc, e.msg);
		} else {
			qtk_model *m = rc ? NULL : qtk_open(p, &e);
			CHECK(m != NULL, "%s: written and read back: %s", cases[c].key, e.msg);
			qtk_close(m);
		}
		free(p);
		qtk_close(d);
	}
	/* more shards than a reader accepts: refused before anything is written */
	qtk_model *d = qtk_model_new();
	char name[32];
	for (unsigned i = 0; i < QTK_CAP_FILES + 2; i++) {
		snprintf(name, sizeof name, "t%u", i);
		qtk_tensor *t = qtk_model_add_tensor(d, name);
		t->ndim = 1;
		t->shape[0] = 8;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = t->parts[0].type = QTK_T_F32;
		t->nparts = 1;
		t->parts[0].ndim = 1;
		t->parts[0].shape[0] = 8;
		t->parts[0].nbytes = 32;
		qtk_tensor_finish(t);
	}
	char *p = qtk_path_join(tmpdir, "many.gguf");
	qtk_write_opts o = {.split_max_size = 1};
	qtk_err e;
	qtk_err_clear(&e);
	qtk_writer *w = qtk_writer_open(p, QTK_OUT_GGUF, d, &o, &e);
	CHECK(!w && e.code == QTK_E_USAGE && strstr(e.msg, "at most 4096"), "4098 shards: %s", e.msg);
	qtk_writer_abort(w);
	DIR *dd = opendir(tmpdir);
	struct dirent *de;
	int left = 0;
	while (dd && (de = readdir(dd)))
		left += strstr(de->d_name, "many") != NULL;
	closedir(dd);
	CHECK(left == 0, "%d shards or temporaries left", left);
	free(p);
	qtk_close(d);
}

/* The tensor table's allocator: growing keeps the used bytes across the change from malloc to a
 * mapping of its own and between mappings; a failed growth leaves the table as it was; a model
 * with thousands of tensors finds each by name. */
static void test_table(void)
{
	uint8_t *p = NULL;
	size_t used = 0;
	bool ok = true;
	for (size_t n = 1000; n <= ((size_t)20 << 20) && ok; n = n * 3) {
		uint8_t *q = qtk_table_realloc(p, used, n);
		if (!q) {
			ok = false;
			break;
		}
		for (size_t i = 0; i < used; i++)
			ok &= q[i] == (uint8_t)(i * 7 + i / 4099);
		for (size_t i = used; i < n / 2; i++)
			q[i] = (uint8_t)(i * 7 + i / 4099);
		p = q;
		used = n / 2;
	}
	CHECK(ok && used > ((size_t)2 << 20), "table grows from malloc to mappings, bytes kept (%zu)", used);
	qtk_test_fail_alloc_at(1);
	CHECK(!qtk_table_realloc(p, used, used * 2), "injected failure");
	bool same = true;
	for (size_t i = 0; i < used; i++)
		same &= p[i] == (uint8_t)(i * 7 + i / 4099);
	CHECK(same, "a failed growth leaves the table as it was");
	qtk_table_free(p);
	qtk_table_free(NULL);

	qtk_model *m = qtk_model_new();
	const size_t nt = 5000; /* ~4.8 MB of descriptions: three mappings on the way */
	bool added = m != NULL;
	for (size_t i = 0; i < nt && added; i++) {
		char name[64];
		snprintf(name, sizeof name, "blk.%zu.w", i);
		qtk_tensor *t = qtk_model_add_tensor(m, name);
		added = t != NULL;
		if (t) {
			t->ndim = 1;
			t->shape[0] = i + 1;
		}
	}
	bool found = added;
	for (size_t i = 0; i < nt && found; i += 37) {
		char name[64];
		snprintf(name, sizeof name, "blk.%zu.w", i);
		const qtk_tensor *t = qtk_tensor_find(m, name);
		found = t && t->shape[0] == i + 1 && t->nparts == 0;
	}
	CHECK(added && found && m->ntensors == nt, "5000 tensors added and found");
	qtk_close(m);
}

/* A tensor's parts: room in the model that never moves, copies into the destination's room. */
static void test_parts(void)
{
	qtk_model *m = qtk_model_new();
	const size_t nt = 40000; /* past several chunks of parts and several table growths */
	qtk_part *first[3] = {NULL, NULL, NULL};
	bool ok = m != NULL;
	for (size_t i = 0; i < nt && ok; i++) {
		char name[64];
		snprintf(name, sizeof name, "blk.%zu.w", i);
		int room = (int)(i % 3); /* 0, 1, 2 */
		qtk_tensor *t = qtk_model_add_tensor_room(m, name, room);
		ok = t && t->room == room && (room ? t->parts != NULL : t->parts == NULL);
		for (int p = 0; ok && p < room; p++) {
			ok = t->parts[p].nbytes == 0 && t->parts[p].type == 0;
			t->parts[p].nbytes = i * 8 + (uint64_t)p;
		}
		if (ok)
			t->nparts = room;
		if (ok && i < 3)
			first[i] = t->parts;
	}
	CHECK(ok, "tensors added with room for 0, 1 and 2 parts, zeroed");
	bool kept = ok && m->tensors[0].parts == first[0] && m->tensors[1].parts == first[1] &&
		    m->tensors[2].parts == first[2];
	for (size_t i = 0; i < nt && kept; i++)
		for (int p = 0; p < m->tensors[i].nparts && kept; p++)
			kept = m->tensors[i].parts[p].nbytes == i * 8 + (uint64_t)p;
	CHECK(kept, "parts stay where they were while the table grows, each tensor's its own");
	qtk_tensor *t = qtk_model_add_tensor(m, "full");
	CHECK(t && t->room == QTK_MAX_PARTS, "qtk_model_add_tensor gives room for %d parts", QTK_MAX_PARTS);
	CHECK(!qtk_model_add_tensor_room(m, "too", QTK_MAX_PARTS + 1) && !qtk_model_add_tensor_room(m, "neg", -1),
	      "room out of 0..%d refused", QTK_MAX_PARTS);

	/* a copy into one part of room: two parts do not fit, the destination stays as it was */
	qtk_tensor two = QTK_TENSOR_LOCAL;
	two.name = (char *)"two";
	two.nparts = 2;
	two.parts[0].nbytes = 5;
	two.parts[1].nbytes = 7;
	two.ndim = 1;
	two.shape[0] = 12;
	qtk_tensor *one = &m->tensors[1]; /* room 1, one part of 8 bytes */
	qtk_part *at = one->parts;
	CHECK(qtk_tensor_copy(one, &two) == QTK_E_INTERNAL && one->nparts == 1 && one->parts == at &&
		      one->parts[0].nbytes == 8 && one->room == 1 && strcmp(one->name, "blk.1.w") == 0,
	      "a copy that does not fit the room is refused, nothing changed");
	two.nparts = 1;
	char *nm = one->name;
	CHECK(qtk_tensor_copy(one, &two) == 0 && one->parts == at && one->room == 1 && one->parts[0].nbytes == 5 &&
		      one->shape[0] == 12 && one->name == two.name,
	      "a copy that fits lands in the destination's own room");
	one->name = nm;
	one->parts[0].nbytes = 99;
	CHECK(two.parts[0].nbytes == 5, "the copy's parts are its own");
	CHECK(qtk_tensor_copy(one, one) == 0 && one->parts[0].nbytes == 99, "a copy onto itself changes nothing");

	qtk_tensor_clear(&two);
	bool zero = two.parts != NULL && two.room == QTK_MAX_PARTS && two.nparts == 0 && !two.name && two.ndim == 0;
	for (int p = 0; p < QTK_MAX_PARTS && zero; p++)
		zero = two.parts[p].nbytes == 0;
	CHECK(zero, "a cleared tensor keeps its room, zeroed");

	qtk_tensor loose;
	memset(&loose, 0, sizeof loose);
	CHECK(qtk_model_tensor_room(m, &loose, 3) == 0 && loose.room == 3 && loose.parts &&
		      qtk_model_tensor_room(m, &loose, QTK_MAX_PARTS + 1) == QTK_E_INTERNAL && loose.room == 3,
	      "room for a tensor built outside the table");
	qtk_close(m);

	qtk_test_fail_alloc_at(0);
	m = qtk_model_new();
	bool failed = false;
	for (long k = 1; k < 4 && m; k++) { /* the table, the part chunk, the name */
		qtk_test_fail_alloc_at(k);
		failed |= qtk_model_add_tensor(m, "x") == NULL;
		qtk_test_fail_alloc_at(0);
	}
	CHECK(failed && m && m->ntensors < 3, "an allocation that fails leaves no half-added tensor (%zu)",
	      m ? m->ntensors : 0);
	qtk_close(m);
}

int main(void)
{
	test_table();
	test_parts();
	if (!mkdtemp(tmpdir))
		return 1;
	test_writer_validates();
	test_valid();
	test_hostile();
	test_writer_atomic();
	test_writer_deferred();
	const char *fx = t_fixtures();
	if (fx)
		test_fixture_listing(fx);
	else
		T_SKIP("fixtures absent: GGUF fixture listing, split sets, vocab round trips");
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", tmpdir);
	return T_DONE();
}
