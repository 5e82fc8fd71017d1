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
/* "prog: note: ..." on stderr unless -q: what the run chose for the user. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A library error reported as a warning (same shape as cli_fail's line, "warning:"). */
void cli_warn_err(const qtk_err *e);
void cli_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* only -v */
/* Handle a common flag (-q -v --progress --no-progress). Returns true when handled. */
bool cli_common_flag(const char *arg);
/* s for printing: itself when it needs no escape, else its escaped form (text.h) in one of
 * eight rotating buffers (valid until eight more calls): for the arguments of one printf. */
const char *cli_safe(const char *s);
/* The candidate nearest to s by edit distance (case-insensitive), or NULL when none is close
 * (distance above a third of the longer name, at least 2): for "did you mean". */
const char *cli_nearest(const char *s, const char *const *cands, size_t n);
bool cli_progress_enabled(void);
/* Progress on stderr (only when cli_progress_enabled), redrawn at most four times a second
 * (QTK_PROGRESS_INTERVAL=SECONDS changes that; 0 draws every update, for tests):
 *   [##########....................]  34.2%  5/21  63.1 MB/s  ETA 0:07  blk.3.ffn_up.weight 40%
 * Rates and the ETA are measured from the first update after cli_progress_end.
 * cli_progress: done of total items (items/s). */
void cli_progress(const char *label, uint64_t done, uint64_t total);
/* Bytes done of total (MB/s), `item` the tensor being read (NULL: none). */
void cli_progress_bytes(const char *item, uint64_t done, uint64_t total);
/* A run of items measured in bytes (qconvert): cli_progress_item starts item k of n, which
 * holds `bytes` of the total; cli_progress_within reports done of total units inside it
 * (rows, groups or bytes: any unit, the fraction counts). Main thread only. */
void cli_progress_item(const char *name, uint64_t k, uint64_t n, uint64_t bytes, uint64_t total_bytes);
void cli_progress_within(uint64_t done, uint64_t total);
void cli_progress_end(void);
/* Install SIGINT/SIGTERM/SIGHUP handlers: remove registered temporaries, print
 * "PROG: interrupted: WHAT, nothing written" and exit 128 + the signal (130 for SIGINT). */
void cli_install_signals(void);
/* What the program is doing, for that line ("converting a.gguf to b.gguf"); names escaped. */
void cli_set_activity(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
