/* test_imatrix.c - llama.cpp importance-matrix reader (src/imatrix.c).
 *
 * Synthetic (always): legacy files (values/ncall, ncall <= 0 keeps raw values, trailer,
 * duplicates keep the last entry, lookups by size), GGUF files (in_sum2/counts, count 0 -> 1,
 * expert tensors, datasets/chunk keys), SHA-256 of the file, and hostile inputs: every
 * truncation of a legacy file, oversized/negative counts and lengths, trailing bytes, NaN and
 * negative values, GGUF with missing or non-F32 parts.
 * Fixture (../shared/fixtures or $QTK_FIXTURES): gguf/tiny.imatrix, cross-checked against an
 * independent parse here. */
#include "t.h"
#include "imatrix.h"
#include "internal.h"

#include <math.h>
#include <unistd.h>

#include <openssl/evp.h>

static char tmpdir[] = "/tmp/qtk-imatrix-XXXXXX";

static void p32(qtk_buf *b, uint32_t v)
{
	uint8_t x[4];
	qtk_wr32(x, v);
	qtk_buf_put(b, x, 4);
}
static void p64(qtk_buf *b, uint64_t v)
{
	uint8_t x[8];
	qtk_wr64(x, v);
	qtk_buf_put(b, x, 8);
}
static void pf(qtk_buf *b, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	p32(b, u);
}

static char *write_file(const char *name, const void *d, size_t n)
{
	char *p = qtk_path_join(tmpdir, name);
	FILE *f = fopen(p, "wb");
	if (f) {
		if (n)
			fwrite(d, 1, n, f);
		fclose(f);
	}
	return p;
}

static void sha256(const void *d, size_t n, uint8_t *out)
{
	unsigned int l = 0;
	EVP_Digest(d, n, out, &l, EVP_sha256(), NULL);
}

/* legacy entry */
static void leg_entry(qtk_buf *b, const char *name, int32_t ncall, int32_t nval, const float *v)
{
	p32(b, (uint32_t)strlen(name));
	qtk_buf_puts(b, name);
	p32(b, (uint32_t)ncall);
	p32(b, (uint32_t)nval);
	for (int32_t i = 0; i < nval; i++)
		pf(b, v[i]);
}

static void legacy_valid(qtk_buf *b, bool trailer)
{
	memset(b, 0, sizeof *b);
	static const float a[4] = { 2.f, 4.f, 6.f, 1.f }, c[3] = { 1.f, 2.f, 3.f },
			   d[2] = { 9.f, 9.f }, e[2] = { 5.f, 7.f };
	p32(b, 5);
	leg_entry(b, "blk.0.attn_q.weight", 2, 4, a);
	leg_entry(b, "blk.0.ffn_down.weight", 0, 3, c);  /* ncall 0: raw */
	leg_entry(b, "dup.weight", 3, 2, d);
	leg_entry(b, "neg.weight", -4, 2, e);            /* ncall < 0: raw */
	leg_entry(b, "dup.weight", 1, 2, e);             /* the last one wins */
	if (trailer) {
		p32(b, 42);
		p32(b, 8);
		qtk_buf_puts(b, "wiki.txt");
	}
}

static qtk_imatrix *load_bytes(const char *name, const void *d, size_t n, qtk_err *e)
{
	char *p = write_file(name, d, n);
	qtk_err_clear(e);
	qtk_imatrix *m = qtk_imatrix_load(p, e);
	qtk_free(p);
	return m;
}

static void expect_bad(const char *what, const qtk_buf *b, const char *want)
{
	qtk_err e;
	qtk_imatrix *m = load_bytes("bad.imatrix", b->p, b->len, &e);
	CHECK(!m && e.code == QTK_E_DATA && (!want || strstr(e.msg, want)) && e.file[0],
	      "%s: code %d msg '%s' (want '%s')", what, e.code, e.msg, want ? want : "");
	qtk_imatrix_free(m);
}

static void test_legacy(void)
{
	qtk_buf b;
	legacy_valid(&b, true);
	qtk_err e;
	qtk_imatrix *m = load_bytes("ok.imatrix", b.p, b.len, &e);
	CHECK(m != NULL, "legacy load: %s", e.msg);
	if (m) {
		CHECK(qtk_imatrix_is_legacy(m), "legacy flag");
		CHECK(qtk_imatrix_count(m) == 4, "4 distinct entries: %zu", qtk_imatrix_count(m));
		const float *v = qtk_imatrix_get(m, "blk.0.attn_q.weight", 4);
		CHECK(v && v[0] == 1.f && v[1] == 2.f && v[2] == 3.f && v[3] == 0.5f, "values / ncall");
		CHECK(qtk_imatrix_get(m, "blk.0.attn_q.weight", 8) == NULL, "size mismatch -> NULL");
		CHECK(qtk_imatrix_get(m, "nope", 4) == NULL, "unknown -> NULL");
		v = qtk_imatrix_get(m, "blk.0.ffn_down.weight", 3);
		CHECK(v && v[0] == 1.f && v[2] == 3.f, "ncall 0 keeps values");
		v = qtk_imatrix_get(m, "neg.weight", 2);
		CHECK(v && v[0] == 5.f && v[1] == 7.f, "negative ncall keeps values");
		v = qtk_imatrix_get(m, "dup.weight", 2);
		CHECK(v && v[0] == 5.f && v[1] == 7.f, "duplicate: last entry wins");
		uint64_t nv = 0;
		CHECK(qtk_imatrix_find(m, "blk.0.attn_q.weight", &nv) && nv == 4, "find gives nval");
		CHECK(qtk_imatrix_chunks(m) == 42, "chunk count %lld", (long long)qtk_imatrix_chunks(m));
		CHECK(qtk_imatrix_dataset(m) && !strcmp(qtk_imatrix_dataset(m), "wiki.txt"), "dataset");
		CHECK(qtk_imatrix_name(m, 0) && !strcmp(qtk_imatrix_name(m, 0), "blk.0.attn_q.weight"),
		      "sorted names");
		uint8_t h[32];
		sha256(b.p, b.len, h);
		CHECK(!memcmp(qtk_imatrix_sha256(m), h, 32), "sha256 of the file");
	}
	qtk_imatrix_free(m);

	/* every truncation: an error naming the file, except at the two optional-trailer
	 * boundaries (no trailer; chunk count without dataset name) */
	const size_t full = b.len, no_trailer = full - 4 - 4 - 8, no_name = full - 4 - 8;
	int bad = 0;
	for (size_t n = 0; n < full; n++) {
		m = load_bytes("trunc.imatrix", b.p, n, &e);
		const bool ok_expected = n == no_trailer || n == no_name;
		if (ok_expected ? !m : (m || e.code != QTK_E_DATA || !e.file[0])) {
			if (!bad)
				printf("truncation at %zu: loaded %d code %d msg %s\n", n, m != NULL, e.code,
				       e.msg);
			bad++;
		}
		qtk_imatrix_free(m);
	}
	CHECK(bad == 0, "every truncation handled (%d bad)", bad);
	/* a short read of the count itself names the field and offset */
	m = load_bytes("t2.imatrix", b.p, 20, &e);
	CHECK(!m && strstr(e.msg, "entry name") && e.offset >= 0, "truncated name: %s @%lld", e.msg,
	      (long long)e.offset);
	qtk_imatrix_free(m);
	qtk_buf_free(&b);

	static const float one[1] = { 1.f };
	qtk_buf x;
	/* n_entries */
	memset(&x, 0, sizeof x);
	p32(&x, 0);
	expect_bad("n_entries 0", &x, "n_entries");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, (uint32_t)-3);
	expect_bad("n_entries negative", &x, "n_entries");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 0x7fffffff);
	leg_entry(&x, "a", 1, 1, one);
	expect_bad("n_entries huge", &x, "n_entries");
	qtk_buf_free(&x);
	/* name length */
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	p32(&x, (uint32_t)-5);
	expect_bad("negative name length", &x, "name length");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	p32(&x, 0x40000000);
	expect_bad("oversized name length", &x, "name length");
	qtk_buf_free(&x);
	/* nval */
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 0, one);
	expect_bad("nval 0", &x, "nval");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	p32(&x, 1);
	qtk_buf_puts(&x, "a");
	p32(&x, 1);
	p32(&x, (uint32_t)-7);
	expect_bad("negative nval", &x, "nval");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	p32(&x, 1);
	qtk_buf_puts(&x, "a");
	p32(&x, 1);
	p32(&x, 0x7fffffff);
	pf(&x, 1.f);
	expect_bad("nval past the end (no huge allocation)", &x, "past the end");
	qtk_buf_free(&x);
	/* values */
	static const float nanv[2] = { 1.f, NAN }, negv[2] = { -1.f, 1.f }, infv[1] = { INFINITY };
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 2, nanv);
	expect_bad("NaN value", &x, "not finite");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 2, negv);
	expect_bad("negative value", &x, "negative");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 1, infv);
	expect_bad("Inf value", &x, "not finite");
	qtk_buf_free(&x);
	/* trailer */
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 1, one);
	p32(&x, 3);
	p32(&x, (uint32_t)-1);
	expect_bad("negative dataset length", &x, "dataset");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 1, one);
	p32(&x, 3);
	p32(&x, 100);
	qtk_buf_puts(&x, "abc");
	expect_bad("oversized dataset length", &x, "dataset");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 1, one);
	p32(&x, 3);
	p32(&x, 1);
	qtk_buf_puts(&x, "abcd");
	expect_bad("trailing bytes", &x, "unexpected bytes");
	qtk_buf_free(&x);
	memset(&x, 0, sizeof x);
	p32(&x, 1);
	leg_entry(&x, "a", 1, 1, one);
	qtk_buf_puts(&x, "xy");
	expect_bad("partial trailer", &x, "truncated");
	qtk_buf_free(&x);
	/* empty file, missing file */
	memset(&x, 0, sizeof x);
	expect_bad("empty file", &x, "truncated");
	qtk_err_clear(&e);
	CHECK(!qtk_imatrix_load("/nonexistent/x.imatrix", &e) && e.code == QTK_E_IO, "missing file");
	qtk_err_clear(&e);
	CHECK(!qtk_imatrix_load("/dev/null", &e) && e.code != 0, "not a regular file");
}

/* ---------------------------------------------------------------- GGUF */

static void pstr(qtk_buf *b, const char *s)
{
	p64(b, strlen(s));
	qtk_buf_puts(b, s);
}

typedef struct gt {
	const char *name;
	uint32_t nd;
	uint64_t ne[2];
	uint32_t type;
	const float *v;
} gt;

static void gguf_build(qtk_buf *b, const gt *t, int nt, bool meta)
{
	memset(b, 0, sizeof *b);
	qtk_buf_put(b, "GGUF", 4);
	p32(b, 3);
	p64(b, (uint64_t)nt);
	p64(b, meta ? 3 : 1);
	pstr(b, "general.type");
	p32(b, QTK_V_STR);
	pstr(b, "imatrix");
	if (meta) {
		pstr(b, "imatrix.chunk_count");
		p32(b, QTK_V_U32);
		p32(b, 17);
		pstr(b, "imatrix.datasets");
		p32(b, QTK_V_ARR);
		p32(b, QTK_V_STR);
		p64(b, 1);
		pstr(b, "calib.txt");
	}
	uint64_t off = 0;
	for (int i = 0; i < nt; i++) {
		pstr(b, t[i].name);
		p32(b, t[i].nd);
		for (uint32_t k = 0; k < t[i].nd; k++)
			p64(b, t[i].ne[k]);
		p32(b, t[i].type);
		p64(b, off);
		uint64_t n = t[i].ne[0] * (t[i].nd > 1 ? t[i].ne[1] : 1);
		off += (t[i].type == QTK_T_F16 ? 2 : 4) * n;
		off = (off + 31) / 32 * 32;
	}
	while (b->len % 32)
		qtk_buf_putc(b, 0);
	for (int i = 0; i < nt; i++) {
		uint64_t n = t[i].ne[0] * (t[i].nd > 1 ? t[i].ne[1] : 1);
		for (uint64_t k = 0; k < n; k++) {
			if (t[i].type == QTK_T_F16) {
				uint8_t h[2] = { 0, 0x3c };
				qtk_buf_put(b, h, 2);
			} else {
				pf(b, t[i].v[k]);
			}
		}
		while (b->len % 32)
			qtk_buf_putc(b, 0);
	}
}

static void test_gguf(void)
{
	static const float s1[4] = { 3.f, 6.f, 9.f, 12.f }, c1[1] = { 3.f };
	/* expert tensor: 2 matrices of 3; counts 2 and 0 */
	static const float s2[6] = { 2.f, 4.f, 6.f, 5.f, 5.f, 5.f }, c2[2] = { 2.f, 0.f };
	static const float s3[2] = { 1.f, 1.f }, c3[1] = { 2.4f }; /* lround(2.4) = 2 */
	const gt ok[6] = {
		{ "blk.0.attn_q.weight.in_sum2", 2, { 4, 1 }, QTK_T_F32, s1 },
		{ "blk.0.attn_q.weight.counts", 2, { 1, 1 }, QTK_T_F32, c1 },
		{ "blk.1.ffn_down_exps.weight.in_sum2", 2, { 3, 2 }, QTK_T_F32, s2 },
		{ "blk.1.ffn_down_exps.weight.counts", 2, { 1, 2 }, QTK_T_F32, c2 },
		{ "x.weight.in_sum2", 1, { 2, 0 }, QTK_T_F32, s3 },
		{ "x.weight.counts", 1, { 1, 0 }, QTK_T_F32, c3 },
	};
	qtk_buf b;
	gguf_build(&b, ok, 6, true);
	qtk_err e;
	qtk_imatrix *m = load_bytes("ok.gguf", b.p, b.len, &e);
	CHECK(m != NULL, "gguf imatrix load: %s", e.msg);
	if (m) {
		CHECK(!qtk_imatrix_is_legacy(m) && qtk_imatrix_count(m) == 3, "gguf: 3 entries");
		const float *v = qtk_imatrix_get(m, "blk.0.attn_q.weight", 4);
		CHECK(v && v[0] == 1.f && v[3] == 4.f, "gguf: in_sum2 / counts");
		uint64_t nv = 0;
		v = qtk_imatrix_find(m, "blk.1.ffn_down_exps.weight", &nv);
		CHECK(v && nv == 6 && v[0] == 1.f && v[2] == 3.f && v[3] == 1.f && v[5] == 1.f,
		      "gguf experts: per-matrix counts, count 0 -> 1");
		CHECK(qtk_imatrix_get(m, "blk.1.ffn_down_exps.weight", 3) == NULL, "3-D via find only");
		v = qtk_imatrix_get(m, "x.weight", 2);
		CHECK(v && v[0] == 0.5f, "gguf: count rounded like lround");
		CHECK(qtk_imatrix_chunks(m) == 17, "gguf chunk_count");
		CHECK(qtk_imatrix_dataset(m) && !strcmp(qtk_imatrix_dataset(m), "calib.txt"),
		      "gguf dataset");
		uint8_t h[32];
		sha256(b.p, b.len, h);
		CHECK(!memcmp(qtk_imatrix_sha256(m), h, 32), "gguf sha256");
	}
	qtk_imatrix_free(m);
	qtk_buf_free(&b);

	const gt miss[1] = { { "a.weight.in_sum2", 1, { 4, 0 }, QTK_T_F32, s1 } };
	gguf_build(&b, miss, 1, false);
	expect_bad("gguf: in_sum2 without counts", &b, "without matching counts");
	qtk_buf_free(&b);
	const gt miss2[1] = { { "a.weight.counts", 1, { 1, 0 }, QTK_T_F32, c1 } };
	gguf_build(&b, miss2, 1, false);
	expect_bad("gguf: counts without in_sum2", &b, "without matching in_sum2");
	qtk_buf_free(&b);
	const gt f16[2] = { { "a.weight.in_sum2", 1, { 4, 0 }, QTK_T_F16, NULL },
			    { "a.weight.counts", 1, { 1, 0 }, QTK_T_F32, c1 } };
	gguf_build(&b, f16, 2, false);
	expect_bad("gguf: F16 sums", &b, "F32");
	qtk_buf_free(&b);
	static const float c3b[3] = { 1.f, 1.f, 1.f };
	const gt split[2] = { { "a.weight.in_sum2", 1, { 4, 0 }, QTK_T_F32, s1 },
			      { "a.weight.counts", 1, { 3, 0 }, QTK_T_F32, c3b } };
	gguf_build(&b, split, 2, false);
	expect_bad("gguf: sums do not split into matrices", &b, "do not split");
	qtk_buf_free(&b);
	static const float cneg[1] = { -2.f }, snan[4] = { 1.f, NAN, 1.f, 1.f };
	const gt neg[2] = { { "a.weight.in_sum2", 1, { 4, 0 }, QTK_T_F32, s1 },
			    { "a.weight.counts", 1, { 1, 0 }, QTK_T_F32, cneg } };
	gguf_build(&b, neg, 2, false);
	expect_bad("gguf: negative count", &b, "count");
	qtk_buf_free(&b);
	const gt nan[2] = { { "a.weight.in_sum2", 1, { 4, 0 }, QTK_T_F32, snan },
			    { "a.weight.counts", 1, { 1, 0 }, QTK_T_F32, c1 } };
	gguf_build(&b, nan, 2, false);
	expect_bad("gguf: NaN sum", &b, "not finite");
	qtk_buf_free(&b);
	const gt none[1] = { { "other.weight", 1, { 4, 0 }, QTK_T_F32, s1 } };
	gguf_build(&b, none, 1, false);
	expect_bad("gguf: no imatrix tensors", &b, "no imatrix entries");
	/* a truncated GGUF fails in the GGUF reader */
	qtk_imatrix *t = load_bytes("trunc.gguf", b.p, b.len - 5, &e);
	CHECK(!t && e.code == QTK_E_DATA, "gguf truncated: %d %s", e.code, e.msg);
	qtk_imatrix_free(t);
	qtk_buf_free(&b);
}

/* ---------------------------------------------------------------- fixture */

static void test_fixture(const char *fx)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/gguf/tiny.imatrix", fx);
	uint8_t *d = NULL;
	size_t n = 0;
	qtk_err e;
	qtk_err_clear(&e);
	CHECK(qtk_slurp(p, 1u << 24, &d, &n, &e) == 0, "read fixture: %s", e.msg);
	if (!d)
		return;
	qtk_imatrix *m = qtk_imatrix_load(p, &e);
	CHECK(m != NULL, "load tiny.imatrix: %s", e.msg);
	if (!m) {
		qtk_free(d);
		return;
	}
	/* independent parse of the legacy layout */
	CHECK(memcmp(d, "GGUF", 4) != 0 && qtk_imatrix_is_legacy(m), "tiny.imatrix is the legacy format");
	const uint32_t ne = qtk_rd32(d);
	size_t off = 4;
	int match = 1;
	uint32_t checked = 0;
	for (uint32_t i = 0; i < ne && off + 4 <= n; i++) {
		const uint32_t len = qtk_rd32(d + off);
		char name[256];
		snprintf(name, sizeof name, "%.*s", (int)len, (const char *)d + off + 4);
		off += 4 + len;
		const int32_t ncall = (int32_t)qtk_rd32(d + off), nval = (int32_t)qtk_rd32(d + off + 4);
		off += 8;
		const float *v = qtk_imatrix_get(m, name, (uint64_t)nval);
		if (!v) {
			match = 0;
			break;
		}
		for (int32_t k = 0; k < nval; k++) {
			uint32_t u = qtk_rd32(d + off + 4 * (size_t)k);
			float f;
			memcpy(&f, &u, 4);
			const float want = ncall > 0 ? f / (float)ncall : f;
			if (memcmp(&want, &v[k], 4) != 0)
				match = 0;
		}
		off += 4 * (size_t)nval;
		checked++;
		if (i == 0)
			printf("tiny.imatrix: %u entries, first '%s' ncall %d nval %d\n", ne, name, ncall,
			       nval);
	}
	CHECK(match && checked == ne && qtk_imatrix_count(m) == ne, "fixture values = sums/ncall (%u)",
	      checked);
	uint8_t h[32];
	sha256(d, n, h);
	CHECK(!memcmp(qtk_imatrix_sha256(m), h, 32), "fixture sha256");
	char hex[65];
	qtk_hex(qtk_imatrix_sha256(m), 32, hex);
	printf("tiny.imatrix: chunks %lld, dataset '%s', sha256 %s\n",
	       (long long)qtk_imatrix_chunks(m),
	       qtk_imatrix_dataset(m) ? qtk_imatrix_dataset(m) : "", hex);
	CHECK(qtk_imatrix_get(m, "blk.0.attn_q.weight", 256) != NULL, "attn_q weights present");
	qtk_imatrix_free(m);
	qtk_free(d);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	test_legacy();
	test_gguf();
	const char *fx = t_fixtures();
	if (fx)
		test_fixture(fx);
	else
		T_SKIP("fixtures absent: gguf/tiny.imatrix");
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", tmpdir);
	return T_DONE();
}
