/* cli.c - diagnostics, progress and signal handling for the programs. */
#include "cli.h"
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <unistd.h>

cli g_cli;

void cli_init(const char *prog)
{
	/* The conversion windows (tens of MiB each, allocated per tensor and freed after it) would
	 * otherwise be fresh mmaps every time, each page faulted in again: the heap keeps and
	 * reuses them instead (a 100M-parameter q8_0 run: 0.9 s of system time to 0.16 s, 25% less
	 * user time; the same peak RSS). Free memory beyond 32 MiB at the top of a heap goes back to
	 * the system: threads that freed large buffers (the source's digests) do not keep them
	 * resident (an AWQ re-fit of a 70B-shaped block: 257 MiB with this, 271-294 MiB keeping up
	 * to 512 MiB; q8_0 of the 100M model as fast). */
	mallopt(M_MMAP_THRESHOLD, 256 << 20);
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
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

void cli_note(const char *fmt, ...)
{
	if (g_cli.verbose < 0)
		return;
	va_list ap;
	fprintf(stderr, "%s: note: ", g_cli.prog);
	va_start(ap, fmt);
	put_msg(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
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

/* ---- progress ------------------------------------------------------------------------- */

static struct {
	double start, last, interval;   /* clock of the first update, of the last draw */
	uint64_t done0;                 /* units done at the first update */
	bool started, drawn;
	int width;                      /* cells of the last line drawn */
	/* cli_progress_item's run */
	char item[128];
	uint64_t k, n, base, bytes, total;
} pg = {.interval = -1};

static double pg_interval(void)
{
	if (pg.interval < 0) {
		const char *e = getenv("QTK_PROGRESS_INTERVAL");
		char *end = NULL;
		double v = e && *e ? strtod(e, &end) : 0.25;
		pg.interval = e && *e && end && !*end && v >= 0 && v < 3600 ? v : 0.25;
	}
	return pg.interval;
}

static int term_width(void)
{
	struct winsize ws;
	if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
		return ws.ws_col < 300 ? ws.ws_col : 300;
	return 80;
}

static void fmt_eta(double s, char *buf, size_t n)
{
	if (!(s >= 0) || s > 99 * 3600.0) {
		snprintf(buf, n, "--:--");
		return;
	}
	unsigned long v = (unsigned long)(s + 0.5);
	if (v >= 3600)
		snprintf(buf, n, "%lu:%02lu:%02lu", v / 3600, v / 60 % 60, v % 60);
	else
		snprintf(buf, n, "%lu:%02lu", v / 60, v % 60);
}

/* Draw one line: bar, percent, count (k/n), rate, ETA, then the item and its own percent. */
static void pg_draw(uint64_t done, uint64_t total, bool bytes, const char *count, const char *item, double within)
{
	if (!cli_progress_enabled())
		return;
	double t = now_s();
	if (!pg.started) {
		pg.started = true;
		pg.start = t;
		pg.done0 = done;
		pg.last = -1e9;
	}
	if (done < total && t - pg.last < pg_interval())
		return;
	pg.last = t;
	char line[512], bar[64], rate[32] = "", eta[32] = "";
	int w = term_width() - 1, bw = w >= 119 ? 30 : 16;
	double f = total ? (double)done / (double)total : 1.0;
	f = f > 1 ? 1 : f;
	int fill = (int)(f * bw);
	for (int i = 0; i < bw; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[bw] = 0;
	/* the rate and ETA once half a second has passed, or two update intervals when updates are
	 * asked for more often (QTK_PROGRESS_INTERVAL): a fast run still shows them */
	double el = t - pg.start, warm = pg_interval() < 0.25 ? 2 * pg_interval() : 0.5;
	if (el > 0 && el >= warm && done > pg.done0) {
		double r = (double)(done - pg.done0) / el;
		if (bytes)
			snprintf(rate, sizeof rate, "  %.1f MB/s", r / 1e6);
		else
			snprintf(rate, sizeof rate, "  %.1f/s", r);
		char e[24];
		fmt_eta((double)(total - done) / r, e, sizeof e);
		snprintf(eta, sizeof eta, "  ETA %s", e);
	}
	int k = snprintf(line, sizeof line, "[%s] %5.1f%%%s%s%s%s", bar, 100.0 * f, count ? "  " : "", count ? count : "",
			 rate, eta);
	k = k < 0 ? 0 : (size_t)k < sizeof line ? k : (int)sizeof line - 1;
	/* then the item and its own percent; a name too long for the terminal keeps its end */
	if (item && *item) {
		const char *nm = cli_safe(item);
		char tail[16] = "";
		if (within >= 0)
			snprintf(tail, sizeof tail, " %.0f%%", 100.0 * within);
		int room = w - k - 2 - (int)strlen(tail), nl = (int)strlen(nm);
		if (room >= 8) {
			if (nl > room)
				k += snprintf(line + k, sizeof line - (size_t)k, "  ~%s%s", nm + nl - (room - 1), tail);
			else
				k += snprintf(line + k, sizeof line - (size_t)k, "  %s%s", nm, tail);
		}
	}
	/* fit the terminal; blank what a longer previous line left */
	int len = k < 0 ? 0 : (size_t)k < sizeof line ? k : (int)sizeof line - 1;
	if (len > w)
		len = w;
	fprintf(stderr, "\r%.*s%*s", len, line, pg.width > len ? pg.width - len : 0, "");
	fflush(stderr);
	pg.width = len;
	pg.drawn = true;
}

void cli_progress(const char *label, uint64_t done, uint64_t total)
{
	char count[48];
	snprintf(count, sizeof count, "%llu/%llu", (unsigned long long)done, (unsigned long long)total);
	pg_draw(done, total, false, count, label, -1);
}

void cli_progress_bytes(const char *item, uint64_t done, uint64_t total)
{
	pg_draw(done, total, true, NULL, item, -1);
}

void cli_progress_item(const char *name, uint64_t k, uint64_t n, uint64_t bytes, uint64_t total_bytes)
{
	if (k == 0 || k < pg.k)
		pg.base = 0;
	else if (k > pg.k)
		pg.base += pg.bytes;
	snprintf(pg.item, sizeof pg.item, "%s", name ? name : "");
	pg.k = k;
	pg.n = n;
	pg.bytes = k < n ? bytes : 0;
	pg.total = total_bytes;
	cli_progress_within(0, 1);
}

void cli_progress_within(uint64_t done, uint64_t total)
{
	double f = total ? (double)done / (double)total : 1.0;
	f = f > 1 ? 1 : f;
	uint64_t at = pg.base + (uint64_t)((double)pg.bytes * f);
	if (pg.k >= pg.n)
		at = pg.total;
	char count[48];
	snprintf(count, sizeof count, "%llu/%llu", (unsigned long long)(pg.k < pg.n ? pg.k + 1 : pg.n),
		 (unsigned long long)pg.n);
	pg_draw(at, pg.total, true, count, pg.k < pg.n ? pg.item : NULL, pg.k < pg.n ? f : -1);
}

void cli_progress_end(void)
{
	if (pg.drawn)
		fprintf(stderr, "\r%*s\r", pg.width, "");
	pg.drawn = false;
	pg.started = false;
	pg.width = 0;
}

/* ---- signals ---------------------------------------------------------------------------- */

static char sig_what[512];
static volatile sig_atomic_t sig_progress; /* a progress line may be on screen */

void cli_set_activity(const char *fmt, ...)
{
	char *txt = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&txt, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	/* formatted now: the handler may only write(2) */
	snprintf(sig_what, sizeof sig_what, "%s", cli_safe(txt));
	free(txt);
}

static void put_raw(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Async-signal-safe: unlink the temporaries, one line, _exit. */
static void on_signal(int sig)
{
	qtk_cleanup_run();
	sig_progress = pg.drawn;
	if (sig_progress)
		put_raw("\r\n");
	put_raw(g_cli.prog ? g_cli.prog : "qtk");
	put_raw(sig == SIGINT ? ": interrupted: " : ": terminated: ");
	put_raw(sig_what[0] ? sig_what : "stopped");
	put_raw(", nothing written\n");
	_exit(128 + sig);
}

void cli_install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigfillset(&sa.sa_mask); /* one handler at a time */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static char lower_ascii(char c)
{
	return (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
}

/* Levenshtein distance of two short strings (at most 63 bytes each; longer: SIZE_MAX). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 63 || lb > 63)
		return SIZE_MAX;
	size_t row[64];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = lower_ascii(a[i - 1]) == lower_ascii(b[j - 1]) ? 0 : 1;
			size_t best = diag + cost;
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

const char *cli_nearest(const char *s, const char *const *cands, size_t n)
{
	const char *best = NULL;
	size_t bd = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		size_t d = edit_distance(s, cands[i]);
		size_t la = strlen(s), lb = strlen(cands[i]);
		size_t lim = (la > lb ? la : lb) / 3;
		if (lim < 2)
			lim = 2;
		if (d <= lim && d < bd) {
			bd = d;
			best = cands[i];
		}
	}
	return best;
}
