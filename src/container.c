/* container.c - the one table of containers (formats/): each row is a
 * qtk_format descriptor with both directions (probe/open/read/close and the
 * writer, output path forms, what it can store, an optional verify hook).
 * The reader registry, the output kind of a path, the writer dispatch, the
 * container names in records and the capability checks all derive from it.
 * Adding a container: its descriptor in formats/, one row here (and, when it
 * writes, one qtk_out_kind value in qtk.h). */
#include "internal.h"
#include <stdio.h>
#include <string.h>

/* Probe order: strongest magic first; HF directories are recognised by path. */
static const qtk_format *const containers[] = {
	&qtk_format_qpk,
	&qtk_format_gguf,
	&qtk_format_hf,
	&qtk_format_safetensors,
	&qtk_format_archive,
	&qtk_format_zst,
};

const qtk_format *const *qtk_formats(size_t *n)
{
	*n = sizeof containers / sizeof *containers;
	return containers;
}

const qtk_format *qtk_format_for_out(qtk_out_kind k)
{
	for (size_t i = 0; k != QTK_OUT_UNKNOWN && i < sizeof containers / sizeof *containers; i++)
		if (containers[i]->out == k && containers[i]->writer)
			return containers[i];
	return NULL;
}

bool qtk_ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && qtk_strcasecmp(s + a - b, suf) == 0;
}

qtk_out_kind qtk_out_kind_for_path(const char *path)
{
	size_t n = strlen(path), nc = sizeof containers / sizeof *containers;
	/* an existing directory is a directory output, whatever its name */
	if ((n && path[n - 1] == '/') || qtk_is_dir(path)) {
		for (size_t i = 0; i < nc; i++)
			if (containers[i]->writer && containers[i]->out_dir)
				return containers[i]->out;
		return QTK_OUT_UNKNOWN;
	}
	for (size_t i = 0; i < nc; i++)
		for (const char *const *e = containers[i]->out_ext; containers[i]->writer && e && *e; e++)
			if (qtk_ends_with(path, *e))
				return containers[i]->out;
	return QTK_OUT_UNKNOWN;
}

void qtk_out_path_forms(char *buf, size_t n)
{
	size_t k = 0;
	bool dir = false;
	if (n)
		buf[0] = 0;
	for (int kind = QTK_OUT_UNKNOWN + 1;; kind++) {
		const qtk_format *f = qtk_format_for_out((qtk_out_kind)kind);
		if (!f)
			break;
		dir |= f->out_dir;
		for (const char *const *e = f->out_ext; e && *e && k < n; e++)
			k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", *e);
	}
	if (dir && k < n)
		snprintf(buf + k, n - k, " or a directory/");
}

const char *qtk_out_kind_name(qtk_out_kind k)
{
	const qtk_format *f = qtk_format_for_out(k);
	return f ? f->name : "unknown";
}

int qtk_out_can_store(qtk_out_kind k, const qtk_tensor *t, bool with_name, const char *path, const char *subject,
		      qtk_err *err)
{
	const qtk_format *f = qtk_format_for_out(k);
	if (!f)
		return qtk_err_set(err, QTK_E_USAGE, path, -1, NULL, "output format not supported yet");
	return f->can_store ? f->can_store(t, with_name, path, subject, err) : 0;
}

bool qtk_model_can_verify(const qtk_model *m)
{
	return m && m->fmt && m->fmt->verify_tensor;
}

int qtk_model_verify_tensor(qtk_model *m, size_t i)
{
	if (!qtk_model_can_verify(m))
		return qtk_err_set(m ? &m->err : NULL, QTK_E_USAGE, m ? m->path : NULL, -1, NULL,
				   "the container has no per-tensor digests to verify");
	return m->fmt->verify_tensor(m, i);
}

void qtk_read_verify_async(qtk_model *m)
{
	const qtk_model *last = NULL;
	if (!m->fmt) /* a view: the models its tensors are read from */
		for (size_t i = 0; i < m->ntensors; i++)
			if (m->tensors[i].view && m->tensors[i].view->m && m->tensors[i].view->m != last) {
				last = m->tensors[i].view->m;
				qtk_read_verify_async(m->tensors[i].view->m);
			}
	if (m->fmt && m->fmt->verify_async)
		m->fmt->verify_async(m);
}

int qtk_read_settle(qtk_model *m)
{
	const qtk_model *last = NULL;
	int rc = 0;
	if (!m->fmt)
		for (size_t i = 0; i < m->ntensors && !rc; i++)
			if (m->tensors[i].view && m->tensors[i].view->m && m->tensors[i].view->m != last) {
				last = m->tensors[i].view->m;
				if ((rc = qtk_read_settle(m->tensors[i].view->m)))
					m->err = m->tensors[i].view->m->err;
			}
	return rc ? rc : m->fmt && m->fmt->settle ? m->fmt->settle(m) : 0;
}

bool qtk_model_streamed(const qtk_model *m)
{
	if (!m->fmt) /* a view: as streamed as the model its tensors come from */
		for (size_t i = 0; i < m->ntensors; i++)
			if (m->tensors[i].view && m->tensors[i].view->m)
				return qtk_model_streamed(m->tensors[i].view->m);
	return m->fmt && m->fmt->read;
}
