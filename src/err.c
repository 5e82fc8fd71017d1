/* err.c - the error object: first error wins, formatted git-style. */
#include "qtk.h"
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

void qtk_err_format(const qtk_err *e, const char *prog, char *buf, size_t n)
{
	char where[640] = "";
	if (e->file[0] && e->offset >= 0)
		snprintf(where, sizeof where, "%s:0x%llx: ", e->file, (unsigned long long)e->offset);
	else if (e->file[0])
		snprintf(where, sizeof where, "%s: ", e->file);
	char subj[300] = "";
	if (e->subject[0])
		snprintf(subj, sizeof subj, "%s: ", e->subject);
	snprintf(buf, n, "%s: %serror: %s%s", prog, where, subj, e->msg[0] ? e->msg : "unknown error");
}

int qtk_err_exit(int code)
{
	if (code >= 0)
		return 0;
	if (code < QTK_E_INTERNAL)
		return 5;
	return -code;
}
