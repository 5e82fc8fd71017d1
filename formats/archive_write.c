/* archive_write.c - deployment bundles: OUTPUT.tar, OUTPUT.tar.zst, OUTPUT.zip
 * (the archive reader is archive_read.c).
 *
 * The model as model.gguf or as a Hugging Face directory (config.json,
 * model.safetensors or shards, tokenizer files), decided by content
 * (use_gguf), plus the provenance record as qtk-provenance.json (a GGUF
 * bundle also keeps the description's side files, e.g. config.json and
 * tokenizer files). The inner files are written by their own writers into a temporary directory next to OUTPUT (a tar header
 * needs each size up front), then streamed into the archive, which is itself
 * written atomically (temporary + rename). Bytes are deterministic: entries
 * sorted by name, mode 0644, uid/gid 0, no owner names, mtime
 * SOURCE_DATE_EPOCH or 0; tar.zst is one zstd frame (level 3, checksum). */

#include "qtk_archive.h"
#include "st_json.h"
#include "la.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

enum { BK_TAR, BK_TAR_ZST, BK_ZIP };

typedef struct bw_file {
	char *name; /* entry name */
	char *path; /* the temporary holding it; NULL: data below */
	const char *data;
	size_t len;
} bw_file;

typedef struct bw {
	int kind;
	bool gguf;
	char *tmpdir;
	qtk_writer *inner;
	bw_file *files;
	size_t nfiles, cap;
	qtk_ofile f;
	bool fopen;
	ZSTD_CCtx *zc;
	uint8_t *zbuf;
	size_t zcap;
	int cb_rc;          /* first error inside a libarchive callback */
	qtk_writer *w;
	char *prov;         /* the final provenance record, once patched */
} bw;

static int bw_oom(qtk_writer *w) { return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "out of memory"); }

/* Every tensor of d can be stored in output kind k. */
static bool all_storable(const qtk_model *d, qtk_out_kind k)
{
	for (size_t i = 0; i < d->ntensors; i++)
		if (qtk_out_can_store(k, &d->tensors[i], true, NULL, NULL, NULL))
			return false;
	return true;
}

/* The inner container, decided by content: GGUF when only GGUF can hold the
 * tensors (ggml block types), an HF directory when only safetensors can
 * (AWQ/GPTQ, safetensors-only dtypes); when both can, GGUF for a GGUF-shaped
 * description (general.architecture, no config.json), else HF. */
static bool use_gguf(const qtk_model *d)
{
	if (!all_storable(d, QTK_OUT_GGUF))
		return false;
	qtk_err e;
	qtk_err_clear(&e);
	if (qtk_st_check_desc(d, "", &e))
		return true;
	return !qtk_blob_find(d, "config.json") && qtk_kv_find(d, "general.architecture");
}

/* Remove the temporary directory and what is in it. */
static void bw_rmtmp(bw *b)
{
	if (!b->tmpdir)
		return;
	DIR *d = opendir(b->tmpdir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				char *p = qtk_path_join(b->tmpdir, e->d_name);
				if (p)
					unlink(p);
				qtk_free(p);
			}
		closedir(d);
	}
	rmdir(b->tmpdir);
	qtk_cleanup_unregister(b->tmpdir);
	qtk_free(b->tmpdir);
	b->tmpdir = NULL;
}

static void bw_free(bw *b)
{
	if (!b)
		return;
	qtk_writer_abort(b->inner);
	if (b->fopen)
		qtk_ofile_abort(&b->f);
	for (size_t i = 0; i < b->nfiles; i++) {
		if (b->files[i].path)
			qtk_cleanup_unregister(b->files[i].path);
		qtk_free(b->files[i].name);
		qtk_free(b->files[i].path);
	}
	qtk_free(b->files);
	bw_rmtmp(b);
	ZSTD_freeCCtx(b->zc);
	qtk_free(b->zbuf);
	qtk_free(b->prov);
	qtk_free(b);
}

static int bw_begin(qtk_writer *w)
{
	bw *b = qtk_calloc(1, sizeof *b);
	if (!b)
		return bw_oom(w);
	w->priv = b;
	b->w = w;
	b->f.fd = -1;
	size_t pl = strlen(w->path);
	b->kind = pl > 8 && !qtk_strcasecmp(w->path + pl - 8, ".tar.zst") ? BK_TAR_ZST
		  : pl > 4 && !qtk_strcasecmp(w->path + pl - 4, ".zip")    ? BK_ZIP
									    : BK_TAR;
	b->gguf = use_gguf(w->desc);
	char *dir = qtk_path_dir(w->path);
	const char *base = qtk_path_base(w->path);
	size_t n = (dir ? strlen(dir) : 0) + strlen(base) + 32;
	if (!dir || !(b->tmpdir = qtk_malloc(n))) {
		qtk_free(dir);
		return bw_oom(w);
	}
	snprintf(b->tmpdir, n, "%s/.%s.qtk-XXXXXX", dir, base);
	qtk_free(dir);
	if (!mkdtemp(b->tmpdir)) {
		int rc = qtk_err_sys(w->err, w->path, "cannot create a temporary directory");
		qtk_free(b->tmpdir);
		b->tmpdir = NULL;
		return rc;
	}
	qtk_cleanup_register_dir(b->tmpdir); /* a signal removes it with what the inner writer left */
	char *ip = qtk_path_join(b->tmpdir, b->gguf ? "model.gguf" : "");
	if (!ip)
		return bw_oom(w);
	qtk_write_opts o = w->opts;
	o.outs = NULL;
	o.tee = NULL; /* the outer writer already tees every byte */
	o.tee_ctx = NULL;
	qtk_err *err = w->err;
	b->inner = qtk_writer_open(ip, b->gguf ? QTK_OUT_GGUF : QTK_OUT_HF, w->desc, &o, err);
	qtk_free(ip);
	return b->inner ? 0 : (err->code ? err->code : QTK_E_INTERNAL);
}

static int bw_put(qtk_writer *w, const void *buf, size_t n)
{
	bw *b = w->priv;
	return qtk_writer_put(b->inner, buf, n);
}

static int cmp_bw_file(const void *x, const void *y)
{
	return strcmp(((const bw_file *)x)->name, ((const bw_file *)y)->name);
}

static int bw_grow(qtk_writer *w, bw *b)
{
	if (b->nfiles < b->cap)
		return 0;
	size_t nc = b->cap ? b->cap * 2 : 16;
	bw_file *f = qtk_realloc(b->files, nc * sizeof *f);
	if (!f)
		return bw_oom(w);
	b->files = f;
	b->cap = nc;
	return 0;
}

/* An entry whose bytes are held in memory (valid while the writer lives). */
static int bw_add_data(qtk_writer *w, bw *b, const char *name, const char *data, size_t len)
{
	for (size_t i = 0; i < b->nfiles; i++)
		if (!strcmp(b->files[i].name, name))
			return 0;
	int rc = bw_grow(w, b);
	if (rc)
		return rc;
	bw_file *f = &b->files[b->nfiles];
	memset(f, 0, sizeof *f);
	if (!(f->name = qtk_strdup(name)))
		return bw_oom(w);
	f->data = data;
	f->len = len;
	b->nfiles++;
	return 0;
}

/* The files to pack, sorted: everything the inner writer left in the
 * temporary directory, the side files of a GGUF bundle, and
 * qtk-provenance.json from the kv when none was written. */
static int bw_list(qtk_writer *w, bw *b)
{
	DIR *dir = opendir(b->tmpdir);
	if (!dir)
		return qtk_err_sys(w->err, b->tmpdir, "cannot read temporary directory");
	struct dirent *e;
	int rc = 0;
	bool prov = false;
	while ((e = readdir(dir)) && !rc) {
		if (e->d_name[0] == '.')
			continue;
		if ((rc = bw_grow(w, b)))
			break;
		bw_file *f = &b->files[b->nfiles];
		memset(f, 0, sizeof *f);
		f->name = qtk_strdup(e->d_name);
		f->path = qtk_path_join(b->tmpdir, e->d_name);
		if (!f->name || !f->path) {
			qtk_free(f->name);
			qtk_free(f->path);
			rc = bw_oom(w);
			break;
		}
		qtk_cleanup_register(f->path);
		b->nfiles++;
		prov |= !strcmp(e->d_name, "qtk-provenance.json");
	}
	closedir(dir);
	if (rc)
		return rc;
	/* a GGUF bundle keeps the side files (config.json, tokenizer files) next to model.gguf */
	const qtk_model *d = w->desc;
	for (size_t i = 0; b->gguf && i < d->nblobs && !rc; i++) {
		const char *nm = d->blobs[i].name;
		if (nm[0] == '.' || strchr(nm, '/') || strchr(nm, '\\') || !strcmp(nm, "model.gguf"))
			continue;
		if (!qtk_side_file_allowed(nm, &w->opts)) {
			rc = qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, nm, "not a known side file and not asked for: not carried");
			break;
		}
		rc = bw_add_data(w, b, nm, (const char *)d->blobs[i].data, d->blobs[i].len);
		prov |= !strcmp(nm, "qtk-provenance.json");
	}
	const qtk_kv *kv = qtk_kv_find(d, "qtk.provenance");
	if (!rc && !prov && b->prov)
		rc = bw_add_data(w, b, "qtk-provenance.json", b->prov, strlen(b->prov));
	else if (!rc && !prov && kv && kv->val.type == QTK_V_STR)
		rc = bw_add_data(w, b, "qtk-provenance.json", kv->val.v.str.s, (size_t)kv->val.v.str.len);
	if (!rc)
		qsort(b->files, b->nfiles, sizeof *b->files, cmp_bw_file);
	return rc;
}

/* Bytes from libarchive: through zstd for .tar.zst, into the output file. */
static int bw_emit(bw *b, const void *buf, size_t n, ZSTD_EndDirective end)
{
	if (b->kind != BK_TAR_ZST)
		return qtk_ofile_write(&b->f, buf, n);
	ZSTD_inBuffer in = {buf, n, 0};
	for (;;) {
		ZSTD_outBuffer o = {b->zbuf, b->zcap, 0};
		size_t left = ZSTD_compressStream2(b->zc, &o, &in, end);
		if (ZSTD_isError(left))
			return qtk_err_set(b->w->err, QTK_E_INTERNAL, b->w->path, -1, NULL, "zstd: %s",
					   ZSTD_getErrorName(left));
		int rc = o.pos ? qtk_ofile_write(&b->f, b->zbuf, o.pos) : 0;
		if (rc)
			return rc;
		if (end == ZSTD_e_continue ? in.pos == in.size : left == 0)
			return 0;
	}
}

static la_ssize_t bw_write_cb(struct archive *x, void *ctx, const void *buf, size_t n)
{
	(void)x;
	bw *b = ctx;
	if (b->cb_rc)
		return -1;
	int rc = bw_emit(b, buf, n, ZSTD_e_continue);
	if (rc) {
		b->cb_rc = rc;
		return -1;
	}
	return (la_ssize_t)n;
}

static int la_fail(qtk_writer *w, bw *b, struct archive *x, const char *what)
{
	if (b->cb_rc)
		return b->cb_rc;
	const char *s = archive_error_string(x);
	return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "%s: %s", what, s ? s : "libarchive error");
}

/* One entry: header, then the bytes of the temporary (or the held data). */
static int bw_entry(qtk_writer *w, bw *b, struct archive *x, const bw_file *f, int64_t mtime, uint8_t *buf,
		    size_t bufsz)
{
	uint64_t size = f->len;
	int fd = -1, rc = 0;
	if (f->path && (fd = qtk_file_open(f->path, &size, w->err)) < 0)
		return fd;
	struct archive_entry *e = archive_entry_new();
	if (!e) {
		qtk_file_close(fd);
		return bw_oom(w);
	}
	archive_entry_set_pathname(e, f->name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_mtime(e, (time_t)mtime, 0);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	if (b->kind == BK_ZIP) {
		bool weights = qtk_ends_with(f->name, ".gguf") || qtk_ends_with(f->name, ".safetensors");
		if ((weights ? archive_write_zip_set_compression_store(x) : archive_write_zip_set_compression_deflate(x)) !=
		    ARCHIVE_OK)
			rc = la_fail(w, b, x, "zip compression");
	}
	if (!rc && archive_write_header(x, e) != ARCHIVE_OK)
		rc = la_fail(w, b, x, "cannot write archive header");
	archive_entry_free(e);
	for (uint64_t off = 0; off < size && !rc;) {
		size_t k = size - off < bufsz ? (size_t)(size - off) : bufsz;
		const void *src = f->data + off;
		if (f->path) {
			if ((rc = qtk_pread_full(fd, f->path, buf, k, off, w->err)))
				break;
			src = buf;
		}
		if (archive_write_data(x, src, k) != (la_ssize_t)k)
			rc = la_fail(w, b, x, "cannot write archive data");
		off += k;
	}
	qtk_file_close(fd);
	return rc;
}

/* mtime for every entry: SOURCE_DATE_EPOCH when set, else 0. */
static int64_t bw_mtime(void)
{
	const char *e = getenv("SOURCE_DATE_EPOCH");
	uint64_t v;
	return e && qtk_parse_u64(e, &v) && v <= INT32_MAX ? (int64_t)v : 0;
}

static int bw_pack(qtk_writer *w, bw *b)
{
	int rc = qtk_ofile_open(&b->f, w->path, w->err);
	if (rc)
		return rc;
	b->fopen = true;
	qtk_ofile_list(&b->f, w->opts.outs);
	if (b->kind == BK_TAR_ZST) {
		b->zcap = ZSTD_CStreamOutSize();
		b->zc = ZSTD_createCCtx();
		b->zbuf = qtk_malloc(b->zcap);
		if (!b->zc || !b->zbuf)
			return bw_oom(w);
		if (ZSTD_isError(ZSTD_CCtx_setParameter(b->zc, ZSTD_c_compressionLevel, 3)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(b->zc, ZSTD_c_checksumFlag, 1)))
			return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, NULL, "cannot set up zstd");
	}
	if (qtk_la_load() != 0)
		return qtk_err_set(w->err, QTK_E_IO, w->path, -1, NULL, "%s", qtk_la_error());
	struct archive *x = archive_write_new();
	uint8_t *buf = qtk_malloc(1 << 20);
	if (!x || !buf) {
		qtk_free(buf);
		archive_write_free(x);
		return bw_oom(w);
	}
	int r = b->kind == BK_ZIP ? archive_write_set_format_zip(x) : archive_write_set_format_pax_restricted(x);
	if (r != ARCHIVE_OK || (b->kind == BK_ZIP && archive_write_set_bytes_in_last_block(x, 1) != ARCHIVE_OK) ||
	    archive_write_open(x, b, NULL, bw_write_cb, NULL) != ARCHIVE_OK)
		rc = la_fail(w, b, x, "cannot start the archive");
	int64_t mtime = bw_mtime();
	for (size_t i = 0; i < b->nfiles && !rc; i++)
		rc = bw_entry(w, b, x, &b->files[i], mtime, buf, 1 << 20);
	if (!rc && archive_write_close(x) != ARCHIVE_OK)
		rc = la_fail(w, b, x, "cannot finish the archive");
	archive_write_free(x);
	qtk_free(buf);
	if (!rc && b->kind == BK_TAR_ZST)
		rc = bw_emit(b, NULL, 0, ZSTD_e_end);
	if (!rc)
		rc = qtk_ofile_commit(&b->f);
	if (!rc)
		b->fopen = false;
	return rc;
}

static int bw_finish(qtk_writer *w)
{
	bw *b = w->priv;
	qtk_writer *in = b->inner;
	b->inner = NULL;
	int rc = qtk_writer_finish(in);
	if (!rc)
		rc = bw_list(w, b);
	if (!rc)
		rc = bw_pack(w, b);
	if (!rc) {
		bw_free(b);
		w->priv = NULL;
	}
	return rc;
}

static void bw_abort(qtk_writer *w)
{
	bw_free(w->priv);
	w->priv = NULL;
}

/* The provenance record is patched in the inner file, before it is packed. */
static int bw_patch(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	bw *b = w->priv;
	int rc = qtk_writer_patch_header(b->inner, fn, ctx);
	const qtk_kv *kv = qtk_kv_find(w->desc, "qtk.provenance");
	if (rc || !kv || kv->val.type != QTK_V_STR)
		return rc;
	/* the bundle's own qtk-provenance.json gets the same final record */
	qtk_free(b->prov);
	if (!(b->prov = qtk_strndup(kv->val.v.str.s, (size_t)kv->val.v.str.len)))
		return bw_oom(w);
	return fn(ctx, (uint8_t *)b->prov, strlen(b->prov));
}

const qtk_writer_ops qtk_archive_writer_ops = {
	.begin = bw_begin,
	.patch_header = bw_patch,
	.put = bw_put,
	.finish = bw_finish,
	.abort = bw_abort,
};

/* A bundle holds a tensor that GGUF or an HF directory can hold (the refusal is the HF
 * directory's, the inner container of everything GGUF cannot take). */
int qtk_ar_can_store(const qtk_tensor *t, bool with_name, const char *path, const char *subject, qtk_err *err)
{
	if (!qtk_out_can_store(QTK_OUT_GGUF, t, with_name, NULL, NULL, NULL))
		return 0;
	return qtk_out_can_store(QTK_OUT_HF, t, with_name, path, subject, err);
}
