/* writer.c - output kind selection and the streaming writer front end. */
#include "internal.h"
#include <string.h>

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && qtk_strcasecmp(s + a - b, suf) == 0;
}

qtk_out_kind qtk_out_kind_for_path(const char *path)
{
	size_t n = strlen(path);
	if ((n && path[n - 1] == '/') || qtk_is_dir(path))
		return QTK_OUT_HF; /* an existing directory is a Hugging Face directory, whatever its name */
	if (ends_with(path, ".gguf"))
		return QTK_OUT_GGUF;
	if (ends_with(path, ".safetensors"))
		return QTK_OUT_SAFETENSORS;
	if (ends_with(path, ".qpk") || ends_with(path, ".awq") || ends_with(path, ".gptq"))
		return QTK_OUT_QPK;
	if (ends_with(path, ".tar") || ends_with(path, ".tar.zst") || ends_with(path, ".zip"))
		return QTK_OUT_ARCHIVE;
	return QTK_OUT_UNKNOWN;
}

/* Move to the next part that has bytes; false when none are left. */
static bool seek_part(qtk_writer *w)
{
	const qtk_model *d = w->desc;
	while (w->cur_tensor < d->ntensors) {
		const qtk_tensor *t = &d->tensors[w->cur_tensor];
		if (w->cur_part < t->nparts) {
			w->cur_left = t->parts[w->cur_part].nbytes;
			return true;
		}
		w->cur_tensor++;
		w->cur_part = 0;
	}
	return false;
}

static int start_part(qtk_writer *w)
{
	while (seek_part(w)) {
		int rc = w->ops->part_begin ? w->ops->part_begin(w) : 0;
		if (rc || w->cur_left)
			return rc;
		w->cur_part++; /* empty part: nothing to wait for */
	}
	return 0;
}

qtk_writer *qtk_writer_open(const char *path, qtk_out_kind kind, const qtk_model *desc,
			    const qtk_write_opts *o, qtk_err *err)
{
	const qtk_writer_ops *ops = NULL;
	qtk_err_clear(err);
	switch (kind) {
	case QTK_OUT_GGUF: ops = &qtk_gguf_writer; break;
	case QTK_OUT_SAFETENSORS: ops = &qtk_safetensors_writer; break;
	case QTK_OUT_HF: ops = &qtk_hf_writer; break;
	case QTK_OUT_QPK: ops = &qtk_qpk_writer; break;
	case QTK_OUT_ARCHIVE: ops = &qtk_archive_writer; break;
	default:
		qtk_err_set(err, QTK_E_USAGE, path, -1, NULL, "output format not supported yet");
		return NULL;
	}
	qtk_writer *w = qtk_calloc(1, sizeof *w);
	if (!w || !(w->path = qtk_strdup(path))) {
		qtk_free(w);
		qtk_err_set(err, QTK_E_IO, path, -1, NULL, "out of memory");
		return NULL;
	}
	w->ops = ops;
	w->desc = desc;
	if (o)
		w->opts = *o;
	w->err = err;
	if (ops->begin(w) || start_part(w)) {
		qtk_writer_abort(w);
		return NULL;
	}
	return w;
}

int qtk_writer_put(qtk_writer *w, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		if (w->cur_tensor >= w->desc->ntensors)
			return qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, NULL, "more data than described");
		size_t k = n < w->cur_left ? n : (size_t)w->cur_left;
		if (k) {
			int rc = w->ops->put(w, p, k);
			if (!rc && w->opts.tee)
				rc = w->opts.tee(w->opts.tee_ctx, w->cur_tensor, p, k);
			if (rc)
				return rc;
		}
		p += k;
		n -= k;
		w->cur_left -= k;
		if (!w->cur_left) {
			w->cur_part++;
			int rc = start_part(w);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int qtk_writer_patch_header(qtk_writer *w, int (*fn)(void *ctx, uint8_t *buf, size_t n), void *ctx)
{
	if (!w->ops->patch_header)
		return qtk_err_set(w->err, QTK_E_USAGE, w->path, -1, NULL, "this output kind cannot rewrite its header");
	return w->ops->patch_header(w, fn, ctx);
}

int qtk_writer_finish(qtk_writer *w)
{
	int rc;
	if (w->cur_tensor < w->desc->ntensors)
		rc = qtk_err_set(w->err, QTK_E_INTERNAL, w->path, -1, w->desc->tensors[w->cur_tensor].name,
				 "tensor data missing");
	else
		rc = w->ops->finish(w);
	if (rc) {
		qtk_writer_abort(w);
		return rc;
	}
	qtk_free(w->path);
	qtk_free(w);
	return 0;
}

void qtk_writer_abort(qtk_writer *w)
{
	if (!w)
		return;
	if (w->ops && w->ops->abort)
		w->ops->abort(w);
	qtk_free(w->path);
	qtk_free(w);
}
