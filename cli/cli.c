/* cli.c - diagnostics, progress and signal handling for the programs. */
#include "cli.h"
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

cli g_cli;

void cli_init(const char *prog)
{
	g_cli.prog = prog;
	g_cli.verbose = 0;
	g_cli.progress = -1;
	const char *nc = getenv("NO_COLOR");
	g_cli.color = !(nc && *nc) && isatty(1);
}

int cli_fail(const qtk_err *e)
{
	char buf[2048];
	qtk_err_format(e, g_cli.prog, buf, sizeof buf);
	fprintf(stderr, "%s\n", buf);
	return qtk_err_exit(e->code ? e->code : QTK_E_INTERNAL);
}

void cli_warn_err(const qtk_err *e)
{
	char buf[2048], head[2048];
	qtk_err_format(e, g_cli.prog, buf, sizeof buf);
	/* where the label is: the same line without subject and message ends in it */
	qtk_err h = *e;
	h.subject[0] = h.msg[0] = 0;
	qtk_err_format(&h, g_cli.prog, head, sizeof head);
	const char *tail = "error: unknown error";
	size_t at = strlen(head) >= strlen(tail) ? strlen(head) - strlen(tail) : 0;
	if (at && !strncmp(buf + at, "error: ", 7))
		fprintf(stderr, "%.*swarning: %s\n", (int)at, buf, buf + at + 7);
	else
		fprintf(stderr, "%s\n", buf);
}

/* A formatted message with untrusted parts (names, paths) printed through the sanitiser. */
static void put_msg(FILE *f, const char *fmt, va_list ap)
{
	char *txt = NULL;
	if (vasprintf(&txt, fmt, ap) < 0)
		return;
	fputs(cli_safe(txt), f);
	free(txt);
}

int cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: error: ", g_cli.prog);
	va_start(ap, fmt);
	put_msg(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", g_cli.prog);
	return 2;
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: warning: ", g_cli.prog);
	va_start(ap, fmt);
	put_msg(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void cli_verbose(const char *fmt, ...)
{
	if (g_cli.verbose < 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	put_msg(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* cli_safe's results: a few at a time may be alive (the arguments of one printf). */
#define SAFE_SLOTS 8
static char *safe_buf[SAFE_SLOTS];
static size_t safe_cap[SAFE_SLOTS];
static unsigned safe_next;

const char *cli_safe(const char *s)
{
	if (!s)
		return "(null)";
	size_t n = strlen(s);
	if (qtk_text_clean(s, n, 0))
		return s;
	size_t len = qtk_text_len(s, n, 0);
	unsigned k = safe_next++ % SAFE_SLOTS;
	if (safe_cap[k] < len + 1) {
		char *p = realloc(safe_buf[k], len + 1);
		if (!p)
			return "(out of memory)";
		safe_buf[k] = p;
		safe_cap[k] = len + 1;
	}
	qtk_text_escape(safe_buf[k], len + 1, s, n, 0);
	return safe_buf[k];
}

bool cli_common_flag(const char *a)
{
	if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
		g_cli.verbose = -1;
	else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
		g_cli.verbose++;
	else if (!strcmp(a, "--progress"))
		g_cli.progress = 1;
	else if (!strcmp(a, "--no-progress"))
		g_cli.progress = 0;
	else if (!strcmp(a, "--no-color"))
		g_cli.color = false;
	else
		return false;
	return true;
}

bool cli_progress_enabled(void)
{
	if (g_cli.verbose < 0)
		return false;
	return g_cli.progress < 0 ? isatty(2) != 0 : g_cli.progress == 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double last_draw;
static bool drawn;

void cli_progress(const char *label, uint64_t done, uint64_t total)
{
	if (!cli_progress_enabled())
		return;
	double t = now_s();
	if (done < total && t - last_draw < 0.25)
		return;
	last_draw = t;
	int width = 30;
	double f = total ? (double)done / (double)total : 1.0;
	int fill = (int)(f * width);
	char bar[64];
	for (int i = 0; i < width; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[width] = 0;
	fprintf(stderr, "\r%-40.40s [%s] %5.1f%%", cli_safe(label), bar, 100.0 * f);
	fflush(stderr);
	drawn = true;
}

void cli_progress_end(void)
{
	if (drawn)
		fprintf(stderr, "\r%*s\r", 80, "");
	drawn = false;
}

static void on_signal(int sig)
{
	qtk_cleanup_run();
	signal(sig, SIG_DFL);
	raise(sig);
}

void cli_install_signals(void)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
}
