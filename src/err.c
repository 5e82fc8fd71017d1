/* err.c - the error object: first error wins, formatted git-style. */
#include "qtk.h"
#include "text.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void qtk_err_clear(qtk_err *e)
{
	memset(e, 0, sizeof *e);
	e->offset = -1;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= cap)
		n = cap - 1;
	if (n)
		memcpy(dst, src, n);
	dst[n] = 0;
}

int qtk_err_set(qtk_err *e, int code, const char *file, int64_t offset,
		const char *subject, const char *fmt, ...)
{
	if (!e || e->code)
		return code;
	e->code = code;
	e->offset = offset;
	copy_str(e->file, sizeof e->file, file);
	copy_str(e->subject, sizeof e->subject, subject);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return code;
}

int qtk_err_sys(qtk_err *e, const char *file, const char *what)
{
	int en = errno;
	int r = qtk_err_set(e, QTK_E_IO, file, -1, NULL, "%s: %s", what, strerror(en));
	if (e && e->code == QTK_E_IO && !e->errnum)
		e->errnum = en;
	return r;
}

/* Append s to dst (cap bytes, NUL-terminated), cutting what does not fit (as snprintf does). */
static void cat(char *dst, size_t cap, size_t *k, const char *s)
{
	size_t n = strlen(s);
	if (n > cap - 1 - *k)
		n = cap - 1 - *k;
	memcpy(dst + *k, s, n);
	*k += n;
	dst[*k] = 0;
}

void qtk_err_format(const qtk_err *e, const char *prog, char *buf, size_t n)
{
	/* file, subject and message may quote untrusted bytes: shown through the sanitiser
	 * (room for the longest escaped form; then cut where the unescaped text was cut) */
	char file[4 * sizeof e->file], subject[4 * sizeof e->subject], msg[4 * sizeof e->msg];
	qtk_text_escape(file, sizeof file, e->file, strnlen(e->file, sizeof e->file), 0);
	qtk_text_escape(subject, sizeof subject, e->subject, strnlen(e->subject, sizeof e->subject), 0);
	qtk_text_escape(msg, sizeof msg, e->msg, strnlen(e->msg, sizeof e->msg), 0);
	char where[640] = "", off[32];
	size_t kw = 0, ks = 0;
	if (file[0]) {
		cat(where, sizeof where, &kw, file);
		if (e->offset >= 0) {
			snprintf(off, sizeof off, ":0x%llx", (unsigned long long)e->offset);
			cat(where, sizeof where, &kw, off);
		}
		cat(where, sizeof where, &kw, ": ");
	}
	char subj[300] = "";
	if (subject[0]) {
		cat(subj, sizeof subj, &ks, subject);
		cat(subj, sizeof subj, &ks, ": ");
	}
	snprintf(buf, n, "%s: %serror: %s%s", prog, where, subj, msg[0] ? msg : "unknown error");
}

int qtk_err_exit(int code)
{
	if (code >= 0)
		return 0;
	if (code < QTK_E_INTERNAL)
		return 5;
	return -code;
}
