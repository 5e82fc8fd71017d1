/* test_archive.c - models inside tar / tar.gz / tar.zst / zip archives and
 * .zst files, the hostile archive and zstd classes (docs/cli.md "Hostile input"),
 * and deployment bundles. */
#include "t.h"
#include "qtk_archive.h"
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

static char tmpdir[] = "/tmp/qtk-archive-XXXXXX";

static char *tpath(const char *name)
{
	static char buf[8][1024];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
	return buf[k];
}

/* ---- files ----------------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
	if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*n = (size_t)sz;
	return b;
}

static int spit(const char *path, const void *d, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(d, 1, n, f);
	return fclose(f) == 0 && w == n ? 0 : -1;
}

static bool same_file(const char *a, const char *b)
{
	size_t na, nb;
	uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
	bool same = x && y && na == nb && !memcmp(x, y, na);
	free(x);
	free(y);
	return same;
}

/* ---- models ----------------------------------------------------------------- */

/* Write m (any model; its tensors are read and streamed) to path. */
static int copy_model(qtk_model *m, const char *path, qtk_err *e)
{
	qtk_err_clear(e);
	qtk_writer *w = qtk_writer_open(path, qtk_out_kind_for_path(path), m, NULL, e);
	if (!w)
		return e->code;
	int rc = 0;
	for (size_t i = 0; i < m->ntensors && !rc; i++)
		for (int p = 0; p < m->tensors[i].nparts && !rc; p++) {
			uint8_t *b = NULL;
			rc = qtk_read_part_alloc(m, &m->tensors[i], p, &b);
			if (rc)
				*e = m->err;
			else
				rc = qtk_writer_put(w, b, (size_t)m->tensors[i].parts[p].nbytes);
			free(b);
		}
	if (rc) {
		qtk_writer_abort(w);
		return rc;
	}
	return qtk_writer_finish(w);
}

/* Same tensors (names, layouts, shapes, every byte of every part). */
static bool same_tensors(qtk_model *a, qtk_model *b, const char *what)
{
	if (!a || !b || a->ntensors != b->ntensors) {
		printf("  %s: tensor counts differ\n", what);
		return false;
	}
	for (size_t i = 0; i < a->ntensors; i++) {
		const qtk_tensor *x = &a->tensors[i], *y = qtk_tensor_find(b, x->name);
		if (!y || y->nparts != x->nparts || y->layout.kind != x->layout.kind || y->layout.type != x->layout.type ||
		    y->ndim != x->ndim || memcmp(x->shape, y->shape, sizeof x->shape)) {
			printf("  %s: tensor '%s' differs in its description\n", what, x->name);
			return false;
		}
		for (int p = 0; p < x->nparts; p++) {
			uint8_t *bx = NULL, *by = NULL;
			bool ok = x->parts[p].nbytes == y->parts[p].nbytes && !qtk_read_part_alloc(a, x, p, &bx) &&
				  !qtk_read_part_alloc(b, y, p, &by) && !memcmp(bx, by, (size_t)x->parts[p].nbytes);
			free(bx);
			free(by);
			if (!ok) {
				printf("  %s: tensor '%s' part %d bytes differ\n", what, x->name, p);
				return false;
			}
		}
	}
	return true;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (uint8_t)x;
	}
	/* keep F16/F32 values finite: clear the top exponent bit of every 16-bit word */
	for (size_t i = 1; i < n; i += 2)
		b[i] &= 0x3f;
}

/* A small model written with the library's own writers: GGUF-shaped (gguf)
 * or an HF directory (config.json, tokenizer.json). */
static int make_model(const char *path, bool gguf)
{
	qtk_model *d = qtk_model_new();
	static const struct {
		const char *gname, *hname;
		unsigned type;
		int nd;
		uint64_t s0, s1;
	} ts[] = {
		{"token_embd.weight", "model.embed_tokens.weight", QTK_T_F16, 2, 64, 32},
		{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", QTK_T_F32, 2, 32, 32},
		{"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight", QTK_T_F32, 1, 32, 0},
	};
	uint8_t *data[3] = {0};
	for (int i = 0; i < 3; i++) {
		qtk_tensor *t = qtk_model_add_tensor(d, gguf ? ts[i].gname : ts[i].hname);
		t->ndim = ts[i].nd;
		t->shape[0] = ts[i].s0;
		t->shape[1] = ts[i].s1;
		t->layout.kind = QTK_LAYOUT_PLAIN;
		t->layout.type = ts[i].type;
		t->nparts = 1;
		t->parts[0].type = ts[i].type;
		t->parts[0].ndim = t->ndim;
		memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
		uint64_t n = ts[i].s0 * (ts[i].nd == 2 ? ts[i].s1 : 1);
		qtk_type_nbytes(ts[i].type, n, &t->parts[0].nbytes);
		qtk_tensor_finish(t);
		data[i] = malloc((size_t)t->parts[0].nbytes);
		fill(data[i], (size_t)t->parts[0].nbytes, (uint32_t)i + (gguf ? 7u : 11u));
	}
	qtk_model_set_kv_str(d, "qtk.provenance", "{\"record_version\":1,\"tool\":{\"name\":\"test\"}}");
	if (gguf) {
		qtk_model_set_kv_str(d, "general.architecture", "llama");
		qtk_kv *kv = qtk_model_add_kv(d, "llama.block_count");
		kv->val.type = QTK_V_U32;
		kv->val.v.u = 1;
	} else {
		static const char cfg[] = "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\"}";
		static const char tok[] = "{\"version\":\"1.0\",\"model\":{\"type\":\"BPE\"}}";
		qtk_model_add_blob(d, "config.json", cfg, sizeof cfg - 1);
		qtk_model_add_blob(d, "tokenizer.json", tok, sizeof tok - 1);
	}
	qtk_err e;
	qtk_writer *w = qtk_writer_open(path, gguf ? QTK_OUT_GGUF : QTK_OUT_HF, d, NULL, &e);
	int rc = w ? 0 : e.code;
	for (int i = 0; i < 3 && !rc; i++)
		rc = qtk_writer_put(w, data[i], (size_t)d->tensors[i].parts[0].nbytes);
	if (w)
		rc = rc ? (qtk_writer_abort(w), rc) : qtk_writer_finish(w);
	if (rc)
		printf("  make_model %s: %s\n", path, e.msg);
	for (int i = 0; i < 3; i++)
		free(data[i]);
	qtk_close(d);
	return rc;
}

/* ---- building archives with libarchive --------------------------------------- */

enum { A_TAR, A_TGZ, A_TZST, A_ZIP, A_ZIP_DEFLATE };
static const char *const aname[] = {"tar", "tar.gz", "tar.zst", "zip", "zip"};

typedef struct ent {
	const char *name;
	const char *src;   /* file to copy; or: */
	const void *data;  /* bytes (NULL + len: len zero bytes) */
	uint64_t len;
	unsigned type;     /* 0 = regular file */
	const char *link;  /* symlink target / hardlink source */
	unsigned mode;     /* 0 = 0644 */
} ent;

static int build(const char *out, int kind, const ent *e, size_t n)
{
	struct archive *a = archive_write_new();
	int r = kind >= A_ZIP ? archive_write_set_format_zip(a) : archive_write_set_format_pax_restricted(a);
	if (kind == A_TGZ)
		r |= archive_write_add_filter_gzip(a);
	if (kind == A_TZST)
		r |= archive_write_add_filter_zstd(a);
	if (kind == A_ZIP)
		r |= archive_write_set_options(a, "zip:compression=store");
	if (kind < A_ZIP) /* names as raw bytes, whatever the locale */
		r |= archive_write_set_options(a, "hdrcharset=BINARY");
	r |= archive_write_open_filename(a, out);
	static uint8_t chunk[1 << 16];
	for (size_t i = 0; i < n && r == ARCHIVE_OK; i++) {
		struct archive_entry *x = archive_entry_new();
		archive_entry_set_pathname(x, e[i].name);
		unsigned type = e[i].type ? e[i].type : AE_IFREG;
		archive_entry_set_filetype(x, type);
		archive_entry_set_perm(x, e[i].mode ? e[i].mode : (type == AE_IFDIR ? 0755 : 0644));
		if (type == AE_IFLNK)
			archive_entry_set_symlink(x, e[i].link);
		else if (e[i].link)
			archive_entry_set_hardlink(x, e[i].link);
		uint8_t *src = NULL;
		size_t len = (size_t)e[i].len;
		if (e[i].src) {
			src = slurp(e[i].src, &len);
			if (!src)
				printf("  cannot read %s\n", e[i].src);
		}
		if (type == AE_IFREG && !e[i].link)
			archive_entry_set_size(x, (la_int64_t)len);
		r = archive_write_header(a, x);
		for (size_t off = 0; off < len && r == ARCHIVE_OK && type == AE_IFREG && !e[i].link;) {
			size_t k = len - off < sizeof chunk ? len - off : sizeof chunk;
			const void *p = src ? (const void *)(src + off)
				      : e[i].data ? (const void *)((const uint8_t *)e[i].data + off) : (const void *)chunk;
			if (archive_write_data(a, p, k) != (la_ssize_t)k)
				r = ARCHIVE_FATAL;
			off += k;
		}
		free(src);
		archive_entry_free(x);
	}
	if (r != ARCHIVE_OK)
		printf("  build %s: %s\n", out, archive_error_string(a));
	r |= archive_write_close(a);
	archive_write_free(a);
	return r;
}

/* The names in an archive, sorted as stored, joined with ','. */
static void list_names(const char *path, char *out, size_t n)
{
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	archive_read_support_format_zip(a);
	archive_read_support_filter_zstd(a);
	out[0] = 0;
	if (archive_read_open_filename(a, path, 1 << 16) == ARCHIVE_OK) {
		struct archive_entry *e;
		while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
			size_t l = strlen(out);
			snprintf(out + l, n - l, "%s%s", l ? "," : "", archive_entry_pathname(e));
		}
	}
	archive_read_free(a);
}

/* qtk_open must fail with QTK_E_DATA and a message containing want. */
static void expect_refused(const char *path, const char *want, const char *what)
{
	qtk_err e;
	qtk_model *m = qtk_open(path, &e);
	char msg[1400];
	qtk_err_format(&e, "test", msg, sizeof msg);
	CHECK(!m && e.code == QTK_E_DATA && strstr(msg, want), "%s: expected '%s', got: %s", what, want,
	      m ? "(opened)" : msg);
	qtk_close(m);
}

/* ---- reading --------------------------------------------------------------- */

static qtk_model *ref_gguf, *ref_hf;
static char gpath[1100]; /* the reference GGUF */

static void test_read_formats(void)
{
	const char *g = gpath;
	char hf[1024];
	snprintf(hf, sizeof hf, "%s/hf", tmpdir);
	for (int k = A_TAR; k <= A_ZIP_DEFLATE; k++) {
		char out[1100];
		/* a single GGUF at the root */
		snprintf(out, sizeof out, "%s/g%d.%s", tmpdir, k, aname[k]);
		ent ge[] = {{.name = "m.gguf", .src = g}};
		CHECK(build(out, k, ge, 1) == 0, "build %s", out);
		qtk_err e;
		qtk_model *m = qtk_open(out, &e);
		CHECK(m && !strcmp(qtk_model_format(m), "gguf"), "open gguf in %s: %s", aname[k], e.msg);
		CHECK(m && same_tensors(ref_gguf, m, out), "gguf tensors in %s", aname[k]);
		CHECK(m && qtk_kv_find(m, "llama.block_count"), "gguf metadata in %s", aname[k]);
		CHECK(m && !strcmp(m->path, out), "the model's path is the archive: %s", m ? m->path : "");
		qtk_close(m);
		/* an HF directory below a top directory, with a directory entry */
		snprintf(out, sizeof out, "%s/h%d.%s", tmpdir, k, aname[k]);
		char c[1100], s[1100], t[1100];
		snprintf(c, sizeof c, "%s/config.json", hf);
		snprintf(s, sizeof s, "%s/model.safetensors", hf);
		snprintf(t, sizeof t, "%s/tokenizer.json", hf);
		ent he[] = {{.name = "./", .type = AE_IFDIR},
			    {.name = "./tiny/", .type = AE_IFDIR},
			    {.name = "./tiny/config.json", .src = c},
			    {.name = "./tiny/model.safetensors", .src = s},
			    {.name = "./tiny/tokenizer.json", .src = t},
			    {.name = "./README.md", .data = "hello\n", .len = 6}};
		CHECK(build(out, k, he, 6) == 0, "build %s", out);
		m = qtk_open(out, &e);
		CHECK(m && !strcmp(qtk_model_format(m), "hf"), "open hf in %s: %s", aname[k], e.msg);
		CHECK(m && same_tensors(ref_hf, m, out), "hf tensors in %s", aname[k]);
		CHECK(m && qtk_blob_find(m, "config.json") && qtk_blob_find(m, "tokenizer.json"), "hf side files in %s",
		      aname[k]);
		qtk_close(m);
	}
	/* short reads through the windows */
	qtk_test_max_read(7);
	qtk_err e;
	qtk_model *m = qtk_open(tpath("h0.tar"), &e);
	CHECK(m && same_tensors(ref_hf, m, "short reads"), "tar with 7-byte reads: %s", e.msg);
	qtk_close(m);
	qtk_test_max_read(0);
	/* GNU tar's own output (ustar/gnu, "./" names) */
	char cmd[2400];
	snprintf(cmd, sizeof cmd, "cd '%s' && tar --format=gnu -cf gnu.tar hf 2>/dev/null && tar -cf - m.gguf | zstd -q -o gnu.tar.zst",
		 tmpdir);
	if (system(cmd) == 0) {
		m = qtk_open(tpath("gnu.tar"), &e);
		CHECK(m && same_tensors(ref_hf, m, "gnu tar"), "GNU tar archive: %s", e.msg);
		qtk_close(m);
		m = qtk_open(tpath("gnu.tar.zst"), &e);
		CHECK(m && same_tensors(ref_gguf, m, "gnu tar.zst"), "zstd CLI tar.zst: %s", e.msg);
		qtk_close(m);
	} else {
		T_SKIP("tar or zstd command missing: GNU tar interop");
	}
	/* sharded safetensors: with config.json an HF directory, without it the index */
	char sh[1100];
	snprintf(sh, sizeof sh, "%s/shards/", tmpdir);
	qtk_write_opts so = {.split_max_size = 4096};
	qtk_writer *w = qtk_writer_open(sh, QTK_OUT_HF, ref_hf, &so, &e);
	int rc = w ? 0 : -1;
	for (size_t i = 0; i < ref_hf->ntensors && !rc; i++) {
		uint8_t *b = NULL;
		rc = qtk_read_part_alloc(ref_hf, &ref_hf->tensors[i], 0, &b);
		if (!rc)
			rc = qtk_writer_put(w, b, (size_t)ref_hf->tensors[i].parts[0].nbytes);
		free(b);
	}
	CHECK(!rc && qtk_writer_finish(w) == 0, "write shards: %s", e.msg);
	snprintf(cmd, sizeof cmd,
		 "cd '%s/shards' && tar -cf ../sh-hf.tar * && tar -cf ../sh-ix.tar *.safetensors *.index.json && ls *-of-* | wc -l > ../nshards",
		 tmpdir);
	if (system(cmd) == 0) {
		size_t nn;
		uint8_t *cnt = slurp(tpath("nshards"), &nn);
		CHECK(cnt && strtol((char *)cnt, NULL, 10) >= 2, "several shards written");
		free(cnt);
		m = qtk_open(tpath("sh-hf.tar"), &e);
		CHECK(m && !strcmp(qtk_model_format(m), "hf") && m->nfiles >= 2 && same_tensors(ref_hf, m, "shards hf"),
		      "sharded HF directory in a tar: %s", e.msg);
		qtk_close(m);
		m = qtk_open(tpath("sh-ix.tar"), &e);
		CHECK(m && !strcmp(qtk_model_format(m), "safetensors") && same_tensors(ref_hf, m, "shards index"),
		      "safetensors index and shards in a tar: %s", e.msg);
		qtk_close(m);
	} else {
		T_SKIP("tar command missing: shards");
	}
	/* the model is found by content, not by extension */
	ent odd[] = {{.name = "weights.bin.data", .src = g}};
	CHECK(build(tpath("odd.zip"), A_ZIP, odd, 1) == 0, "build");
	rename(tpath("odd.zip"), tpath("odd.tar"));
	m = qtk_open(tpath("odd.tar"), &e);
	CHECK(m && same_tensors(ref_gguf, m, "odd names"), "zip named .tar holding a GGUF named .bin.data: %s", e.msg);
	qtk_close(m);
}

static void test_zst_file(void)
{
	size_t n;
	uint8_t *g = slurp(tpath("m.gguf"), &n);
	size_t cap = ZSTD_compressBound(n);
	uint8_t *z = malloc(cap + 64);
	/* one frame with content size and checksum */
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	size_t zn = ZSTD_compress2(c, z, cap, g, n);
	CHECK(!ZSTD_isError(zn), "compress");
	spit(tpath("m.gguf.zst"), z, zn);
	qtk_err e;
	qtk_model *m = qtk_open(tpath("m.gguf.zst"), &e);
	CHECK(m && !strcmp(qtk_model_format(m), "gguf") && same_tensors(ref_gguf, m, "zst"), ".zst gguf: %s", e.msg);
	qtk_close(m);
	/* streaming frame without content size */
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
	ZSTD_outBuffer o = {z, cap, 0};
	ZSTD_inBuffer in = {g, n, 0};
	ZSTD_compressStream2(c, &o, &in, ZSTD_e_continue);
	while (ZSTD_compressStream2(c, &o, &in, ZSTD_e_end))
		;
	spit(tpath("s.gguf.zst"), z, o.pos);
	m = qtk_open(tpath("s.gguf.zst"), &e);
	CHECK(m && same_tensors(ref_gguf, m, "zst stream"), ".zst without content size: %s", e.msg);
	qtk_close(m);
	/* safetensors inside */
	char st[1100];
	snprintf(st, sizeof st, "%s/hf/model.safetensors", tmpdir);
	size_t sn;
	uint8_t *s = slurp(st, &sn);
	uint8_t *sz = malloc(ZSTD_compressBound(sn));
	size_t szn = ZSTD_compress(sz, ZSTD_compressBound(sn), s, sn, 3);
	spit(tpath("m.safetensors.zst"), sz, szn);
	m = qtk_open(tpath("m.safetensors.zst"), &e);
	CHECK(m && !strcmp(qtk_model_format(m), "safetensors") && same_tensors(ref_hf, m, "st zst"),
	      ".zst safetensors: %s", e.msg);
	qtk_close(m);
	/* hostile: truncated, trailing garbage, two frames, skippable frame, bad checksum */
	spit(tpath("trunc.gguf.zst"), z, zn / 2);
	expect_refused(tpath("trunc.gguf.zst"), "truncated zstd stream", "truncated zstd");
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	zn = ZSTD_compress2(c, z, cap, g, n);
	memcpy(z + zn, "garbage!", 8);
	spit(tpath("trail.gguf.zst"), z, zn + 8);
	expect_refused(tpath("trail.gguf.zst"), "trailing data after the zstd frame", "trailing garbage");
	uint8_t *two = malloc(2 * zn);
	memcpy(two, z, zn);
	memcpy(two + zn, z, zn);
	spit(tpath("two.gguf.zst"), two, 2 * zn);
	expect_refused(tpath("two.gguf.zst"), "a second zstd frame", "two frames");
	uint8_t skip[12] = {0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4};
	memcpy(two, skip, 12);
	memcpy(two + 12, z, zn);
	spit(tpath("skip.gguf.zst"), two, zn + 12);
	expect_refused(tpath("skip.gguf.zst"), "skippable frame refused", "leading skippable frame");
	memcpy(two, z, zn);
	memcpy(two + zn, skip, 12);
	spit(tpath("skip2.gguf.zst"), two, zn + 12);
	expect_refused(tpath("skip2.gguf.zst"), "a skippable frame after", "trailing skippable frame");
	memcpy(two, z, zn);
	two[zn - 1] ^= 0x55; /* the checksum is the frame's last 4 bytes */
	spit(tpath("sum.gguf.zst"), two, zn);
	expect_refused(tpath("sum.gguf.zst"), "checksum mismatch", "bad checksum");
	/* hand-made frames: window 2^28, a dictionary; raw block "x" */
	static const uint8_t big[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x90, 0x09, 0x00, 0x00, 'x'};
	spit(tpath("win.zst"), big, sizeof big);
	expect_refused(tpath("win.zst"), "window, limit 2^27", "zstd window 2^28");
	static const uint8_t ok27[] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88, 0x09, 0x00, 0x00, 'x'};
	spit(tpath("win27.zst"), ok27, sizeof ok27);
	/* a window within the 2^27 cap is still refused when the file is far too small to need it
	 * (fuzzing found a 888-byte frame that made libzstd allocate 88 MiB) */
	expect_refused(tpath("win27.zst"), "more than a 10-byte file may use", "zstd window 2^27 for a 10-byte file");
	static const uint8_t dict[] = {0x28, 0xb5, 0x2f, 0xfd, 0x01, 0x50, 0x05, 0x09, 0x00, 0x00, 'x'};
	spit(tpath("dict.zst"), dict, sizeof dict);
	expect_refused(tpath("dict.zst"), "needs dictionary 5", "zstd dictionary");
	/* ratio bomb: 256 MiB of zeros, streamed */
	size_t bz = 256u << 20, chunk = 1u << 20;
	uint8_t *zeros = calloc(1, chunk), *ob = malloc(ZSTD_CStreamOutSize());
	FILE *f = fopen(tpath("bomb.gguf.zst"), "wb");
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setPledgedSrcSize(c, bz);
	for (size_t done = 0; done < bz; done += chunk) {
		ZSTD_inBuffer bi = {zeros, chunk, 0};
		ZSTD_EndDirective end = done + chunk == bz ? ZSTD_e_end : ZSTD_e_continue;
		size_t left;
		do {
			ZSTD_outBuffer bo = {ob, ZSTD_CStreamOutSize(), 0};
			left = ZSTD_compressStream2(c, &bo, &bi, end);
			fwrite(ob, 1, bo.pos, f);
		} while (end == ZSTD_e_end ? left != 0 : bi.pos < bi.size);
	}
	fclose(f);
	expect_refused(tpath("bomb.gguf.zst"), "ratio above 200:1", "zstd ratio bomb");
	/* declared size beyond the memory limit, checked before decoding */
	qtk_ar_limits l = *qtk_ar_limits_get();
	l.mem = 1u << 20;
	qtk_ar_limits_set(&l);
	expect_refused(tpath("bomb.gguf.zst"), "declares 268435456 bytes, more than the limit", "zstd declared size");
	l.mem = 4096;
	qtk_ar_limits_set(&l);
	expect_refused(tpath("s.gguf.zst"), "exceed the limit of 4096 bytes", "zstd unknown size over the memory cap");
	qtk_ar_limits_set(NULL);
	free(zeros);
	free(ob);
	free(two);
	free(s);
	free(sz);
	free(z);
	free(g);
	ZSTD_freeCCtx(c);
}

/* ---- hand-made zips ------------------------------------------------------- */

static size_t zput(uint8_t *p, size_t at, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
	return at + (size_t)n;
}

/* A stored local header (CRC 0) at p+at; returns the end. */
static size_t zlocal(uint8_t *p, size_t at, const char *name, uint32_t size)
{
	size_t nl = strlen(name);
	at = zput(p, at, 0x04034b50, 4);
	at = zput(p, at, 20, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 4); /* time, date */
	at = zput(p, at, 0, 4); /* crc */
	at = zput(p, at, size, 4);
	at = zput(p, at, size, 4);
	at = zput(p, at, nl, 2);
	at = zput(p, at, 0, 2);
	memcpy(p + at, name, nl);
	return at + nl;
}

static size_t zcentral(uint8_t *p, size_t at, const char *name, uint32_t size, uint32_t off)
{
	size_t nl = strlen(name);
	at = zput(p, at, 0x02014b50, 4);
	at = zput(p, at, 20, 2);
	at = zput(p, at, 20, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 4);
	at = zput(p, at, 0, 4);
	at = zput(p, at, size, 4);
	at = zput(p, at, size, 4);
	at = zput(p, at, nl, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 2);
	at = zput(p, at, 0, 4);
	at = zput(p, at, off, 4);
	memcpy(p + at, name, nl);
	return at + nl;
}

static size_t zend(uint8_t *p, size_t at, unsigned n, size_t cdoff)
{
	at = zput(p, at, 0x06054b50, 4);
	at = zput(p, at, 0, 4);
	at = zput(p, at, n, 2);
	at = zput(p, at, n, 2);
	at = zput(p, at, at - 12 - cdoff, 4);
	at = zput(p, at, cdoff, 4);
	return zput(p, at, 0, 2);
}

/* Zips whose central directory and local headers tell different stories. */
static void test_zip_structure(void)
{
	uint8_t b[512] = {0};
	/* member b's local header lies inside member a's data */
	size_t at = zlocal(b, 0, "a.txt", 40);
	at = zlocal(b, at, "b.txt", 5);
	memcpy(b + at, "hello", 5);
	at += 5;
	size_t cd = at;
	at = zcentral(b, at, "a.txt", 40, 0);
	at = zcentral(b, at, "b.txt", 5, 35);
	at = zend(b, at, 2, cd);
	spit(tpath("overlap.zip"), b, at);
	expect_refused(tpath("overlap.zip"), "members overlap", "zip overlapping members");
	/* the local header names another file than the central directory */
	memset(b, 0, sizeof b);
	at = zlocal(b, 0, "a.txt", 2);
	memcpy(b + at, "hi", 2);
	at += 2;
	cd = at;
	at = zcentral(b, at, "b.txt", 2, 0);
	at = zend(b, at, 1, cd);
	spit(tpath("lname.zip"), b, at);
	expect_refused(tpath("lname.zip"), "disagree on the name", "zip local/central name mismatch");
	/* sizes disagree */
	memset(b, 0, sizeof b);
	at = zlocal(b, 0, "a.txt", 3);
	memcpy(b + at, "hi!", 3);
	at += 3;
	cd = at;
	at = zcentral(b, at, "a.txt", 2, 0);
	at = zend(b, at, 1, cd);
	spit(tpath("lsize.zip"), b, at);
	expect_refused(tpath("lsize.zip"), "disagree on sizes", "zip local/central size mismatch");
	/* the central directory points past the data */
	memset(b, 0, sizeof b);
	at = zlocal(b, 0, "a.txt", 2);
	at += 2;
	cd = at;
	at = zcentral(b, at, "a.txt", 2, 400);
	at = zend(b, at, 1, cd);
	spit(tpath("loff.zip"), b, at);
	expect_refused(tpath("loff.zip"), "outside the member area", "zip local offset out of range");
	/* no end record */
	spit(tpath("noend.zip"), b, 30);
	expect_refused(tpath("noend.zip"), "no end of central directory", "zip without an end record");
}

static void test_hostile(void)
{
	const char *g = gpath;
	ent abs[] = {{.name = "/etc/m.gguf", .src = g}};
	ent dots[] = {{.name = "a/../../m.gguf", .src = g}};
	ent bs[] = {{.name = "a\\m.gguf", .src = g}};
	ent drive[] = {{.name = "C:m.gguf", .src = g}};
	ent ctl[] = {{.name = "m\x01.gguf", .src = g}};
	ent utf[] = {{.name = "m\xc3\xb6.gguf", .src = g}};
	ent win[] = {{.name = "aux.gguf", .src = g}};
	ent sym[] = {{.name = "m.gguf", .src = g}, {.name = "link.gguf", .type = AE_IFLNK, .link = "/etc/passwd"}};
	ent hard[] = {{.name = "m.gguf", .src = g}, {.name = "hard.gguf", .link = "m.gguf"}};
	ent dev[] = {{.name = "m.gguf", .src = g}, {.name = "null", .type = AE_IFCHR}};
	ent fifo[] = {{.name = "m.gguf", .src = g}, {.name = "pipe", .type = AE_IFIFO}};
	ent suid[] = {{.name = "m.gguf", .src = g, .mode = 04755}};
	ent dup[] = {{.name = "m.gguf", .src = g}, {.name = "m.gguf", .src = g}};
	ent cas[] = {{.name = "m.gguf", .src = g}, {.name = "M.GGUF", .data = "x", .len = 1}};
	ent fd[] = {{.name = "m.gguf", .src = g}, {.name = "m.gguf/x", .data = "x", .len = 1}};
	ent two[] = {{.name = "a.gguf", .src = g}, {.name = "b.gguf", .src = g}};
	ent none[] = {{.name = "README.md", .data = "hi\n", .len = 3}};
	char deep[200];
	for (int i = 0; i < 40; i++)
		memcpy(deep + 2 * i, "d/", 2);
	memcpy(deep + 80, "m.gguf", 7);
	ent dp[] = {{.name = deep, .src = g}};
	const struct {
		const char *file;
		ent *e;
		size_t n;
		const char *want;
	} cases[] = {
		{"abs.tar", abs, 1, "absolute path"},
		{"dots.tar", dots, 1, "path contains '..'"},
		{"bs.tar", bs, 1, "backslash"},
		{"drive.zip", drive, 1, "drive letter"},
		{"ctl.tar", ctl, 1, "control character"},
		{"utf.tar", utf, 1, "not ASCII"},
		{"win.tar", win, 1, "reserved device name"},
		{"sym.tar", sym, 2, "symbolic link refused"},
		{"sym.zip", sym, 2, "symbolic link refused"},
		{"hard.tar", hard, 2, "hard link refused"},
		{"dev.tar", dev, 2, "character device refused"},
		{"fifo.tar", fifo, 2, "FIFO refused"},
		{"suid.tar", suid, 1, "setuid"},
		{"dup.tar", dup, 2, "duplicate member name"},
		{"dup.zip", dup, 2, "duplicate member name"},
		{"case.tar", cas, 2, "collides with"},
		{"fd.tar", fd, 2, "both a file and a directory"},
		{"two.tar", two, 2, "more than one model"},
		{"none.tar", none, 1, "no model inside"},
		{"deep.tar", dp, 1, "deeper than 32"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *p = tpath(cases[i].file);
		int kind = strstr(p, ".zip") ? A_ZIP : A_TAR;
		CHECK(build(p, kind, cases[i].e, cases[i].n) == 0, "build %s", p);
		expect_refused(p, cases[i].want, cases[i].file);
	}
	/* the error names the archive and the member */
	expect_refused(tpath("dots.tar"), "dots.tar: error: member 'a/../../m.gguf'", "message names both");
	/* nested archives, pickles */
	ent nest[] = {{.name = "inner.tar.gz", .src = tpath("g1.tar.gz")}};
	CHECK(build(tpath("nest.tar"), A_TAR, nest, 1) == 0, "build");
	expect_refused(tpath("nest.tar"), "nested gzip", "nested tar.gz");
	ent nest2[] = {{.name = "m.gguf", .src = g}, {.name = "x.tar", .src = tpath("g0.tar")}};
	CHECK(build(tpath("nest2.zip"), A_ZIP, nest2, 2) == 0, "build");
	expect_refused(tpath("nest2.zip"), "nested tar", "nested tar in zip");
	static const uint8_t pk[] = {0x80, 0x02, ']', 'q', 0, '.'};
	ent pkl[] = {{.name = "archive/data.pkl", .data = pk, .len = sizeof pk},
		     {.name = "archive/version", .data = "3\n", .len = 2}};
	CHECK(build(tpath("torch.zip"), A_ZIP, pkl, 2) == 0, "build");
	expect_refused(tpath("torch.zip"), "pickle", "pytorch zip (data.pkl)");
	ent pbin[] = {{.name = "config.json", .data = "{}", .len = 2}, {.name = "pytorch_model.bin", .src = tpath("torch.zip")}};
	CHECK(build(tpath("pbin.tar"), A_TAR, pbin, 2) == 0, "build");
	expect_refused(tpath("pbin.tar"), "pickle-based checkpoint (PyTorch zip)", "pytorch_model.bin");
	ent praw[] = {{.name = "weights.dat", .data = pk, .len = sizeof pk}};
	CHECK(build(tpath("praw.tar"), A_TAR, praw, 1) == 0, "build");
	expect_refused(tpath("praw.tar"), "pickle data refused", "raw pickle");
	/* declared size beyond the end: a truncated tar */
	size_t n;
	uint8_t *b = slurp(tpath("g0.tar"), &n);
	spit(tpath("cut.tar"), b, 3000);
	expect_refused(tpath("cut.tar"), "but the archive ends", "truncated tar member");
	free(b);
	/* bombs: a zip member of 64 MiB zeros (deflate ~1000:1), a tar.zst of 256 MiB zeros */
	ent zb[] = {{.name = "m.gguf", .src = g}, {.name = "zeros", .len = 64u << 20}};
	CHECK(build(tpath("bomb.zip"), A_ZIP_DEFLATE, zb, 2) == 0, "build");
	expect_refused(tpath("bomb.zip"), "ratio above 200:1", "zip ratio bomb");
	ent tb[] = {{.name = "m.gguf", .src = g}, {.name = "zeros", .len = 256u << 20}};
	CHECK(build(tpath("bomb.tar.zst"), A_TZST, tb, 2) == 0, "build");
	expect_refused(tpath("bomb.tar.zst"), "ratio above 200:1", "tar.zst ratio bomb");
	tb[1].len = 64u << 20;
	CHECK(build(tpath("bomb.tar.gz"), A_TGZ, tb, 2) == 0, "build");
	expect_refused(tpath("bomb.tar.gz"), "ratio above 200:1", "tar.gz ratio bomb");
	/* caps: member size, memory, member count */
	static uint8_t rnd[3u << 20];
	fill(rnd, sizeof rnd, 99);
	ent big[] = {{.name = "m.gguf", .src = g}, {.name = "noise", .data = rnd, .len = sizeof rnd}};
	CHECK(build(tpath("big.zip"), A_ZIP, big, 2) == 0, "build");
	CHECK(build(tpath("big.tar.zst"), A_TZST, big, 2) == 0, "build");
	CHECK(build(tpath("big.tar"), A_TAR, big, 2) == 0, "build");
	qtk_ar_limits l = *qtk_ar_limits_get();
	l.entry = 2u << 20;
	qtk_ar_limits_set(&l);
	expect_refused(tpath("big.zip"), "exceeds the limit of 2097152 bytes", "oversized zip member");
	expect_refused(tpath("big.tar.zst"), "exceeds the limit of 2097152 bytes", "oversized tar.zst member");
	qtk_err e;
	qtk_model *m = qtk_open(tpath("big.tar"), &e);
	CHECK(m != NULL, "uncompressed tar members are not held in memory: %s", e.msg);
	qtk_close(m);
	l.entry = l.mem = 2u << 20;
	qtk_ar_limits_set(&l);
	expect_refused(tpath("big.tar.zst"), "held in memory", "tar.zst over the memory cap");
	/* what the members declare together is checked before anything is decompressed: each
	 * member fits the per-member cap, together they do not */
	CHECK(build(tpath("big.tar.gz"), A_TGZ, big, 2) == 0, "build");
	l.entry = 4u << 20;
	l.mem = 3u << 20;
	qtk_ar_limits_set(&l);
	expect_refused(tpath("big.zip"), "declare more than 3145728 bytes in all", "zip members' declared total");
	expect_refused(tpath("big.tar.gz"), "gzip trailer declares", "tar.gz trailer's declared size");
	l.mem = 4u << 20;
	qtk_ar_limits_set(&l);
	m = qtk_open(tpath("big.zip"), &e);
	CHECK(m != NULL, "zip within the declared-total cap opens: %s", e.msg);
	qtk_close(m);
	m = qtk_open(tpath("big.tar.gz"), &e);
	CHECK(m != NULL, "tar.gz within the cap opens: %s", e.msg);
	qtk_close(m);
	l = *qtk_ar_limits_get();
	l.mem = l.entry = 1u << 30;
	l.entries = 1;
	qtk_ar_limits_set(&l);
	expect_refused(tpath("big.tar"), "more than 1 members", "member count cap");
	qtk_ar_limits_set(NULL);
	/* unsupported formats: found by content, so "unknown format" */
	static const uint8_t sevenz[] = {'7', 'z', 0xbc, 0xaf, 0x27, 0x1c, 0, 4, 1, 2, 3, 4, 5, 6, 7, 8};
	spit(tpath("x.7z.tar"), sevenz, sizeof sevenz);
	expect_refused(tpath("x.7z.tar"), "unknown format", "7z named .tar");
	static const uint8_t rar[] = {'R', 'a', 'r', '!', 0x1a, 7, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8};
	spit(tpath("x.rar"), rar, sizeof rar);
	expect_refused(tpath("x.rar"), "unknown format", "rar");
	static const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x4b, 0x4c, 0x4a, 6, 0, 0xc2, 0x41, 0x24, 0x35,
				     3, 0, 0, 0};
	spit(tpath("abc.gz"), gz, sizeof gz);
	expect_refused(tpath("abc.gz"), "gzip data is not a tar archive", "plain .gz");
	/* a damaged tar: header checksum broken after the first member */
	b = slurp(tpath("h0.tar"), &n);
	size_t at = 0;
	for (size_t i = 512; i + 512 <= n; i += 512)
		if (!memcmp(b + i + 257, "ustar", 5) && i > 1024) {
			at = i;
			break;
		}
	if (at) {
		b[at + 148] ^= 1;
		spit(tpath("dmg.tar"), b, n);
		expect_refused(tpath("dmg.tar"), "damaged tar archive", "damaged tar header");
	}
	free(b);
}

/* ---- bundles -------------------------------------------------------------- */

static bool no_temporaries(void)
{
	DIR *d = opendir(tmpdir);
	bool ok = true;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strstr(e->d_name, ".qtk-")) {
			printf("  leftover %s\n", e->d_name);
			ok = false;
		}
	if (d)
		closedir(d);
	return ok;
}

static void test_bundles(void)
{
	static const char *const ext[] = {"tar", "tar.zst", "zip"};
	qtk_err e;
	for (int k = 0; k < 3; k++)
		for (int src = 0; src < 2; src++) {
			qtk_model *ref = src ? ref_hf : ref_gguf;
			char p1[1100], p2[1100], names[1000];
			snprintf(p1, sizeof p1, "%s/bundle-%d.%s", tmpdir, src, ext[k]);
			snprintf(p2, sizeof p2, "%s/again-%d.%s", tmpdir, src, ext[k]);
			int rc = copy_model(ref, p1, &e);
			CHECK(rc == 0, "write bundle %s: %s", p1, e.msg);
			CHECK(copy_model(ref, p2, &e) == 0 && same_file(p1, p2), "bundle bytes are deterministic: %s", p1);
			CHECK(no_temporaries(), "no temporaries after writing %s", p1);
			list_names(p1, names, sizeof names);
			const char *want = src ? "config.json,model.safetensors,qtk-provenance.json,tokenizer.json"
					       : "model.gguf,qtk-provenance.json";
			CHECK(!strcmp(names, want), "bundle %s holds %s, expected %s", p1, names, want);
			qtk_model *m = qtk_open(p1, &e);
			CHECK(m && !strcmp(qtk_model_format(m), src ? "hf" : "gguf"), "reopen %s: %s", p1, e.msg);
			CHECK(m && same_tensors(ref, m, p1), "bundle tensors equal the source: %s", p1);
			CHECK(m && (src ? qtk_blob_find(m, "qtk-provenance.json") != NULL
					: qtk_kv_find(m, "qtk.provenance") != NULL),
			      "provenance carried in %s", p1);
			qtk_close(m);
		}
	/* content decides: ggml block types with HF names and a config.json go to GGUF,
	 * and the side files come along */
	qtk_model *d = qtk_model_new();
	qtk_tensor *t = qtk_model_add_tensor(d, "model.layers.0.mlp.up_proj.weight");
	t->ndim = 2;
	t->shape[0] = t->shape[1] = 32;
	t->layout.kind = QTK_LAYOUT_PLAIN;
	t->layout.type = QTK_T_Q8_0;
	t->nparts = 1;
	t->parts[0].type = QTK_T_Q8_0;
	t->parts[0].ndim = 2;
	memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
	t->parts[0].nbytes = 32 * 34;
	qtk_tensor_finish(t);
	qtk_model_add_blob(d, "config.json", "{\"model_type\":\"llama\"}", 22);
	uint8_t q8[32 * 34];
	fill(q8, sizeof q8, 5);
	qtk_writer *qw = qtk_writer_open(tpath("q8.zip"), QTK_OUT_ARCHIVE, d, NULL, &e);
	CHECK(qw && qtk_writer_put(qw, q8, sizeof q8) == 0 && qtk_writer_finish(qw) == 0, "q8 bundle: %s", e.msg);
	char names[300];
	list_names(tpath("q8.zip"), names, sizeof names);
	CHECK(!strcmp(names, "config.json,model.gguf"), "q8 bundle holds %s", names);
	qtk_model *m8 = qtk_open(tpath("q8.zip"), &e);
	uint8_t *back = NULL;
	CHECK(m8 && !strcmp(qtk_model_format(m8), "gguf") && m8->ntensors == 1 &&
	      !qtk_read_part_alloc(m8, &m8->tensors[0], 0, &back) && !memcmp(back, q8, sizeof q8),
	      "q8 bundle reads back as GGUF: %s", e.msg);
	free(back);
	qtk_close(m8);
	qtk_close(d);
	/* outs: the archive is the one committed file */
	qtk_outlist outs = {0};
	qtk_write_opts o = {.outs = &outs};
	qtk_writer *w = qtk_writer_open(tpath("o.tar"), QTK_OUT_ARCHIVE, ref_gguf, &o, &e);
	int rc = w ? 0 : -1;
	for (size_t i = 0; i < ref_gguf->ntensors && !rc; i++) {
		uint8_t *b = NULL;
		rc = qtk_read_part_alloc(ref_gguf, &ref_gguf->tensors[i], 0, &b);
		if (!rc)
			rc = qtk_writer_put(w, b, (size_t)ref_gguf->tensors[i].parts[0].nbytes);
		free(b);
	}
	CHECK(!rc && qtk_writer_finish(w) == 0, "bundle with outs: %s", e.msg);
	CHECK(outs.n == 1 && strstr(outs.f[0].path, "o.tar"), "one output recorded (%zu)", outs.n);
	qtk_outlist_free(&outs);
	/* an aborted bundle leaves nothing behind */
	w = qtk_writer_open(tpath("ab.tar.zst"), QTK_OUT_ARCHIVE, ref_hf, NULL, &e);
	CHECK(w != NULL, "open bundle writer: %s", e.msg);
	qtk_writer_abort(w);
	CHECK(no_temporaries() && access(tpath("ab.tar.zst"), F_OK) != 0, "abort removes temporaries");
	/* SOURCE_DATE_EPOCH sets every mtime */
	setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
	CHECK(copy_model(ref_gguf, tpath("epoch.tar"), &e) == 0, "bundle with SOURCE_DATE_EPOCH: %s", e.msg);
	unsetenv("SOURCE_DATE_EPOCH");
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	struct archive_entry *x;
	bool ok = archive_read_open_filename(a, tpath("epoch.tar"), 10240) == ARCHIVE_OK &&
		  archive_read_next_header(a, &x) == ARCHIVE_OK && archive_entry_mtime(x) == 1700000000 &&
		  archive_entry_uid(x) == 0 && archive_entry_perm(x) == 0644;
	archive_read_free(a);
	CHECK(ok, "SOURCE_DATE_EPOCH mtime, uid 0, mode 0644");
	CHECK(same_file(tpath("bundle-0.tar"), tpath("again-0.tar")) && !same_file(tpath("bundle-0.tar"), tpath("epoch.tar")),
	      "mtime 0 by default");
}

/* Every allocation failing in turn: a clean error, never a crash or a leak. */
static void test_alloc_failures(void)
{
	static const char *const files[] = {"h0.tar", "h1.tar.gz", "h2.tar.zst", "h3.zip", "m.gguf.zst"};
	for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
		int ok = 0, failed = 0;
		for (long n = 1; n < 400; n++) {
			qtk_err e;
			qtk_test_fail_alloc_at(n);
			qtk_model *m = qtk_open(tpath(files[f]), &e);
			qtk_test_fail_alloc_at(0);
			if (m) {
				ok++;
				qtk_close(m);
				break;
			}
			failed += e.code != 0;
		}
		CHECK(ok == 1 && failed > 0, "%s with failing allocations: %d opened, %d failed cleanly", files[f], ok, failed);
	}
}

/* A GGUF split set inside a tar (fixtures, when present). */
static void test_split_fixture(void)
{
	const char *fx = t_fixtures();
	if (!fx) {
		T_SKIP("fixtures not found: GGUF split set in a tar");
		return;
	}
	char dir[1024], cmd[3000];
	snprintf(dir, sizeof dir, "%s/gguf/split-f32", fx);
	DIR *d = opendir(dir);
	if (!d) {
		T_SKIP("no gguf/split-f32 fixture");
		return;
	}
	closedir(d);
	snprintf(cmd, sizeof cmd, "cd '%s' && tar -cf '%s/split.tar' *.gguf", dir, tmpdir);
	if (system(cmd) != 0) {
		T_SKIP("tar failed: split set");
		return;
	}
	char first[1100];
	snprintf(cmd, sizeof cmd, "ls '%s' | grep -- '-00001-of-' | head -1 > '%s/first'", dir, tmpdir);
	size_t n = 0;
	uint8_t *b = system(cmd) == 0 ? slurp(tpath("first"), &n) : NULL;
	if (!b || n < 2) {
		free(b);
		T_SKIP("no first shard");
		return;
	}
	b[n - 1] = 0;
	snprintf(first, sizeof first, "%s/%s", dir, (char *)b);
	free(b);
	qtk_err e;
	qtk_model *ref = qtk_open(first, &e), *m = qtk_open(tpath("split.tar"), &e);
	CHECK(ref && m && ref->nfiles > 1 && m->nfiles == ref->nfiles && same_tensors(ref, m, "split"),
	      "GGUF split set in a tar: %s", e.msg);
	qtk_close(ref);
	qtk_close(m);
}

static void test_samples(void)
{
	const char *bld = getenv("QTK_BUILD");
	char gen[600], cmd[1400];
	snprintf(gen, sizeof gen, "%s/samples/gen", bld && *bld ? bld : "build");
	if (access(gen, X_OK) != 0) {
		T_SKIP("sample generator not built (make build/samples/gen)");
		return;
	}
	snprintf(cmd, sizeof cmd, "'%s' '%s/samples' >/dev/null", gen, tmpdir);
	CHECK(system(cmd) == 0, "sample generator failed");
	qtk_err e;
	qtk_model *hf = qtk_open(tpath("samples/tiny-llama"), &e), *gg = qtk_open(tpath("samples/tiny-llama-f32.gguf"), &e);
	CHECK(hf && gg, "open samples: %s", e.msg);
	if (!hf || !gg) {
		qtk_close(hf);
		qtk_close(gg);
		return;
	}
	DIR *d = opendir(tpath("samples/tiny-llama"));
	ent es[32];
	char names[32][300], srcs[32][1100];
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)) && n < 32)
		if (de->d_name[0] != '.') {
			snprintf(names[n], sizeof names[n], "tiny-llama/%s", de->d_name);
			snprintf(srcs[n], sizeof srcs[n], "%s/samples/tiny-llama/%s", tmpdir, de->d_name);
			es[n] = (ent){.name = names[n], .src = srcs[n]};
			n++;
		}
	if (d)
		closedir(d);
	ent eg[] = {{.name = "tiny-llama-f32.gguf", .src = tpath("samples/tiny-llama-f32.gguf")}};
	for (int k = A_TAR; k <= A_ZIP; k++) {
		char p[1100];
		snprintf(p, sizeof p, "%s/sample-hf.%s", tmpdir, aname[k]);
		CHECK(build(p, k, es, n) == 0, "build %s", p);
		qtk_model *m = qtk_open(p, &e);
		CHECK(m && same_tensors(hf, m, p), "sample HF directory in %s: %s", aname[k], e.msg);
		qtk_close(m);
		snprintf(p, sizeof p, "%s/sample-g.%s", tmpdir, aname[k]);
		CHECK(build(p, k, eg, 1) == 0, "build %s", p);
		m = qtk_open(p, &e);
		CHECK(m && same_tensors(gg, m, p), "sample GGUF in %s: %s", aname[k], e.msg);
		qtk_close(m);
	}
	/* bundles of the samples */
	CHECK(copy_model(hf, tpath("sample-bundle.tar.zst"), &e) == 0, "sample bundle: %s", e.msg);
	qtk_model *m = qtk_open(tpath("sample-bundle.tar.zst"), &e);
	CHECK(m && same_tensors(hf, m, "sample bundle"), "sample HF bundle reopens: %s", e.msg);
	qtk_close(m);
	qtk_close(hf);
	qtk_close(gg);
}

/* Every writer that carries side files refuses one that is neither known nor asked for
 * (code, pickles, unknown names), and writes it when asked for by name (opts.carry). */
static void test_side_files(void)
{
	static const char *const outs[] = {"sf.zip", "sf.tar", "sf.qpk", "sf-hf/"};
	static const char *const evil[] = {"modeling_evil.py", "pytorch_model.bin", "run.sh"};
	for (size_t k = 0; k < 3; k++)
		for (size_t i = 0; i < 4; i++) {
			for (int carry = 0; carry < 2; carry++) {
				bool hf = i == 3;
				qtk_model *d = qtk_model_new();
				qtk_tensor *t = qtk_model_add_tensor(d, "model.layers.0.mlp.up_proj.weight");
				t->ndim = 2;
				t->shape[0] = t->shape[1] = 32;
				t->layout.kind = QTK_LAYOUT_PLAIN;
				t->layout.type = hf ? QTK_T_F32 : QTK_T_Q8_0;
				t->nparts = 1;
				t->parts[0].type = t->layout.type;
				t->parts[0].ndim = 2;
				memcpy(t->parts[0].shape, t->shape, sizeof t->shape);
				t->parts[0].nbytes = hf ? 32 * 32 * 4 : 32 * 34;
				qtk_tensor_finish(t);
				qtk_model_add_blob(d, "config.json", "{\"model_type\":\"llama\"}", 22);
				qtk_model_add_blob(d, evil[k], "x", 1);
				uint8_t buf[32 * 32 * 4];
				fill(buf, sizeof buf, 7);
				qtk_write_opts o = {.carry = carry ? &evil[k] : NULL, .ncarry = carry ? 1 : 0};
				qtk_err e;
				qtk_err_clear(&e);
				char path[1100];
				snprintf(path, sizeof path, "%s/%d-%d-%s", tmpdir, carry, (int)k, outs[i]); /* a fresh output each */
				qtk_writer *w = qtk_writer_open(path, qtk_out_kind_for_path(path), d, &o, &e);
				int rc = w ? qtk_writer_put(w, buf, (size_t)t->parts[0].nbytes) : e.code;
				if (w && rc)
					qtk_writer_abort(w);
				else if (w)
					rc = qtk_writer_finish(w);
				if (carry)
					CHECK(rc == 0, "%s with %s asked for: %s", outs[i], evil[k], e.msg);
				else
					CHECK(rc == QTK_E_USAGE && strstr(e.msg, "not carried") && !strcmp(e.subject, evil[k]) &&
						      access(path, F_OK) != 0,
					      "%s carried %s: rc %d %s", outs[i], evil[k], rc, e.msg);
				qtk_close(d);
			}
		}
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	char hf[1100];
	snprintf(hf, sizeof hf, "%s/hf/", tmpdir);
	snprintf(gpath, sizeof gpath, "%s/m.gguf", tmpdir);
	CHECK(make_model(gpath, true) == 0, "make gguf");
	CHECK(make_model(hf, false) == 0, "make hf");
	qtk_err e;
	ref_gguf = qtk_open(tpath("m.gguf"), &e);
	ref_hf = qtk_open(hf, &e);
	CHECK(ref_gguf && ref_hf, "open the reference models: %s", e.msg);
	if (ref_gguf && ref_hf) {
		test_read_formats();
		test_zst_file();
		test_hostile();
		test_zip_structure();
		test_bundles();
		test_alloc_failures();
		test_split_fixture();
		test_samples();
		test_side_files();
	}
	qtk_close(ref_gguf);
	qtk_close(ref_hf);
	char cmd[256];
	snprintf(cmd, sizeof cmd, getenv("KEEP") ? "true %s" : "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("warning: could not remove %s\n", tmpdir);
	return T_DONE();
}
