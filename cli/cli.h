/* cli.h - what the three programs share: diagnostics, progress, common flags. */
#ifndef QTK_CLI_H
#define QTK_CLI_H
#include "qtk_ext.h"
#include <stdio.h>

typedef struct cli {
	const char *prog;
	int verbose;  /* -1 quiet, 0 normal, 1+ verbose */
	int progress; /* -1 auto (stderr is a TTY), 0 off, 1 on */
	bool color;   /* NO_COLOR unset and stdout is a TTY */
} cli;

extern cli g_cli;

void cli_init(const char *prog);
/* Print "prog: file:0x..: error: subject: msg" to stderr; returns the exit status. */
int cli_fail(const qtk_err *e);
/* The messages of cli_usage_error, cli_warn and cli_verbose and the progress label go
 * through the sanitiser (text.h): names and paths from files may be passed as they are. */
/* Usage error: message to stderr, exit status 2. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A library error reported as a warning (same shape as cli_fail's line, "warning:"). */
void cli_warn_err(const qtk_err *e);
void cli_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* only -v */
/* Handle a common flag (-q -v --progress --no-progress). Returns true when handled. */
bool cli_common_flag(const char *arg);
/* s for printing: itself when it needs no escape, else its escaped form (text.h) in one of
 * eight rotating buffers (valid until eight more calls): for the arguments of one printf. */
const char *cli_safe(const char *s);
bool cli_progress_enabled(void);
/* Draw a progress line at most a few times a second (done of total units). */
void cli_progress(const char *label, uint64_t done, uint64_t total);
void cli_progress_end(void);
/* Install SIGINT/SIGTERM handlers that remove registered temporaries. */
void cli_install_signals(void);
#endif
