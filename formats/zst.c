/* zst.c - a model file compressed with zstd (model.gguf.zst,
 * model.safetensors.zst), and the zstd layer of .tar.zst archives.
 *
 * The frame is decompressed once, streaming, into a sealed memfd under the
 * archive limits (qtk_archive.h), then the inner file is opened by its own
 * reader (or, for a tar inside, by the archive plugin). The decoder follows
 * docs/cli.md ("Hostile input"): the window is
 * capped (ZSTD_d_windowLogMax), the content size must fit the limits whether
 * declared or not, the ratio is capped, checksums are verified (never
 * ignored), dictionaries, skippable frames, extra frames and trailing bytes
 * are refused, and a stream that ends inside a frame is "truncated".
 */
#include "qtk_archive.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader: the window and dictID before decoding */
#include <zstd.h>
#include <zstd_errors.h>

#define ZST_MAGIC 0xFD2FB528u
#define ZST_IN (1u << 20)

static int zerr(qtk_err *err, const char *path, int64_t off, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int zerr(qtk_err *err, const char *path, int64_t off, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return qtk_err_set(err, QTK_E_DATA, path, off, NULL, "%s", msg);
}

/* What starts at h (n bytes): a description of a frame that may not follow. */
static const char *frame_kind(const uint8_t *h, size_t n)
{
	if (n >= 4 && qtk_rd32(h) == ZST_MAGIC)
		return "a second zstd frame";
	if (n >= 4 && (qtk_rd32(h) & 0xFFFFFFF0u) == 0x184D2A50u)
		return "a skippable frame";
	return "trailing data";
}

/* Check the frame header (first bytes of the file) before decoding. */
static int check_header(const uint8_t *h, size_t n, uint64_t file_size, const char *path, const qtk_ar_limits *l,
			uint64_t *declared, qtk_err *err)
{
	if (n >= 4 && (qtk_rd32(h) & 0xFFFFFFF0u) == 0x184D2A50u)
		return zerr(err, path, 0, "zstd skippable frame refused");
	ZSTD_frameHeader fh;
	size_t r = ZSTD_getFrameHeader(&fh, h, n);
	if (ZSTD_isError(r))
		return zerr(err, path, 0, "bad zstd frame header: %s", ZSTD_getErrorName(r));
	if (r > 0)
		return zerr(err, path, 0, "truncated zstd frame header");
	if (fh.dictID)
		return zerr(err, path, 0, "zstd frame needs dictionary %u: refused", fh.dictID);
	if (fh.windowSize > (1ull << l->window_log))
		return zerr(err, path, 0, "zstd frame needs a %llu-byte window, limit 2^%u: refused",
			    (unsigned long long)fh.windowSize, l->window_log);
	/* The window is allocated before any output: it may not exceed what the
	 * compression-ratio cap would let this file produce (a tiny frame must not
	 * make us allocate a large window). */
	uint64_t allowed = (uint64_t)8 << 20; /* zstd's usual windows (level 19: 8 MiB) always pass */
	uint64_t by_ratio;
	if (qtk_mul_u64(file_size, l->ratio, &by_ratio) && by_ratio > allowed)
		allowed = by_ratio;
	if (fh.windowSize > allowed)
		return zerr(err, path, 0, "zstd frame asks for a %llu-byte window, more than a %llu-byte file may use: refused",
			    (unsigned long long)fh.windowSize, (unsigned long long)file_size);
	*declared = fh.frameContentSize;
	if (fh.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN && fh.frameContentSize > l->mem)
		return zerr(err, path, 0, "zstd frame declares %llu bytes, more than the limit of %llu held in memory",
			    (unsigned long long)fh.frameContentSize, (unsigned long long)l->mem);
	return 0;
}

int qtk_ar_unzstd(int fd, const char *path, uint64_t size, int *out_fd, uint64_t *out_size, qtk_err *err)
{
	const qtk_ar_limits *l = qtk_ar_limits_get();
	size_t olen = ZSTD_DStreamOutSize();
	uint8_t *in = qtk_malloc(ZST_IN), *ob = qtk_malloc(olen);
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	int rc = 0, mfd = -1;
	if (!in || !ob || !dc) {
		rc = qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		goto out;
	}
	size_t hn = size < 18 ? (size_t)size : 18;
	uint64_t declared = 0;
	if ((rc = qtk_pread_full(fd, path, in, hn, 0, err)) || (rc = check_header(in, hn, size, path, l, &declared, err)))
		goto out;
	if (ZSTD_isError(ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, (int)l->window_log))) {
		rc = qtk_err_set(err, QTK_E_INTERNAL, path, -1, NULL, "cannot set the zstd window limit");
		goto out;
	}
	if ((mfd = qtk_ar_memfd("qtk-zst", path, err)) < 0) {
		rc = mfd;
		goto out;
	}
	uint64_t pos = 0, out = 0;
	size_t last = 1; /* ZSTD_decompressStream's hint: 0 once the frame is complete */
	while (pos < size && last) {
		size_t k = size - pos < ZST_IN ? (size_t)(size - pos) : ZST_IN;
		if ((rc = qtk_pread_full(fd, path, in, k, pos, err)))
			goto out;
		ZSTD_inBuffer ib = {in, k, 0};
		while (ib.pos < ib.size && last) {
			ZSTD_outBuffer o = {ob, olen, 0};
			last = ZSTD_decompressStream(dc, &o, &ib);
			if (ZSTD_isError(last)) {
				ZSTD_ErrorCode ec = ZSTD_getErrorCode(last);
				rc = ec == ZSTD_error_checksum_wrong
					     ? zerr(err, path, -1, "zstd checksum mismatch: the data are corrupt")
				     : ec == ZSTD_error_frameParameter_windowTooLarge
					     ? zerr(err, path, -1, "zstd frame needs a window above 2^%u: refused", l->window_log)
					     : zerr(err, path, (int64_t)(pos + ib.pos), "corrupt zstd data: %s",
						    ZSTD_getErrorName(last));
				goto out;
			}
			out += o.pos;
			uint64_t consumed = pos + ib.pos;
			if (declared != ZSTD_CONTENTSIZE_UNKNOWN && out > declared) {
				rc = zerr(err, path, -1, "zstd frame holds more than the %llu bytes it declares",
					  (unsigned long long)declared);
				goto out;
			}
			if (out > l->ratio_slack && out / (consumed ? consumed : 1) >= l->ratio) {
				rc = zerr(err, path, (int64_t)consumed,
					  "decompression ratio above %u:1 (%llu bytes from %llu): refused as a bomb", l->ratio,
					  (unsigned long long)out, (unsigned long long)consumed);
				goto out;
			}
			if (out > l->mem) {
				rc = zerr(err, path, (int64_t)consumed,
					  "decompressed data exceed the limit of %llu bytes held in memory",
					  (unsigned long long)l->mem);
				goto out;
			}
			if (o.pos && (rc = qtk_ar_memfd_write(mfd, ob, o.pos, path, err)))
				goto out;
		}
		pos += ib.pos;
	}
	if (last) {
		rc = qtk_err_set(err, QTK_E_DATA, path, (int64_t)size, NULL,
				 "truncated zstd stream: the file ends inside a frame");
		goto out;
	}
	if (pos < size) {
		uint8_t t[4] = {0};
		size_t tn = size - pos < 4 ? (size_t)(size - pos) : 4;
		if ((rc = qtk_pread_full(fd, path, t, tn, pos, err)))
			goto out;
		rc = zerr(err, path, (int64_t)pos, "%s after the zstd frame (%llu bytes): refused", frame_kind(t, tn),
			  (unsigned long long)(size - pos));
		goto out;
	}
	if (declared != ZSTD_CONTENTSIZE_UNKNOWN && out != declared) {
		rc = zerr(err, path, -1, "zstd frame holds %llu bytes but declares %llu", (unsigned long long)out,
			  (unsigned long long)declared);
		goto out;
	}
	if ((rc = qtk_ar_memfd_seal(mfd, path, err)))
		goto out;
	*out_fd = mfd;
	*out_size = out;
	mfd = -1;
out:
	if (mfd >= 0)
		close(mfd);
	ZSTD_freeDCtx(dc);
	qtk_free(in);
	qtk_free(ob);
	return rc;
}

/* ---- the plugin ------------------------------------------------------------ */

static int zst_probe(const uint8_t *h, size_t n, uint64_t size)
{
	(void)size;
	if (n >= 4 && qtk_rd32(h) == ZST_MAGIC)
		return 90;
	if (n >= 4 && (qtk_rd32(h) & 0xFFFFFFF0u) == 0x184D2A50u)
		return 30; /* open explains that skippable frames are refused */
	return 0;
}

static int zst_open(qtk_model *m)
{
	uint64_t size, zs = 0;
	int fd = qtk_file_open(m->path, &size, &m->err), zfd = -1;
	if (fd < 0)
		return fd;
	int rc = qtk_ar_unzstd(fd, m->path, size, &zfd, &zs, &m->err);
	qtk_file_close(fd);
	if (rc)
		return rc;
	/* the inner file's name: the base name without ".zst" */
	const char *b = qtk_path_base(m->path);
	size_t n = strlen(b);
	if (n > 4 && qtk_strcasecmp(b + n - 4, ".zst") == 0)
		n -= 4;
	char *name = qtk_strndup(b, n);
	if (!name)
		rc = qtk_err_set(&m->err, QTK_E_IO, m->path, -1, NULL, "out of memory");
	else
		rc = qtk_ar_open_stream(m, zfd, zs, "tar.zst", name);
	qtk_free(name);
	close(zfd);
	return rc;
}

const qtk_format qtk_format_zst = {
	.name = "zst",
	.probe = zst_probe,
	.open = zst_open,
};
