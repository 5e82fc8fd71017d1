/* tui.h - qinspect's browser: a pure-C model of the UI state (tui_model.c),
 * a view that draws it into a character grid (tui_view.c) and a curses
 * backend that feeds keys and copies the grid to the terminal (tui_curses.c).
 * Tests drive the model with key codes and compare grid dumps. */
#ifndef QTK_INSPECT_TUI_H
#define QTK_INSPECT_TUI_H
#include "inspect.h"
#include <regex.h>

/* ---- Screen: a grid of cells, one code point each ----------------------- */

enum tui_role {
	R_NORMAL, R_TITLE, R_TAB, R_TAB_ON, R_HEAD, R_SEL, R_GROUP, R_DIM, R_BAR, R_WARN, R_KEY, R_STATUS,
	R_LABEL, R_COUNT
};

typedef struct tui_cell {
	char ch[5];    /* UTF-8, NUL-terminated */
	uint8_t role;  /* enum tui_role */
} tui_cell;

typedef struct tui_screen {
	int w, h;
	tui_cell *cells; /* h * w */
	int cur_y, cur_x;/* where the terminal cursor belongs (selected row) */
} tui_screen;

int grid_init(tui_screen *s, int w, int h);
void grid_free(tui_screen *s);
void grid_clear(tui_screen *s);
/* Draw UTF-8 text at (y, x), at most `max` cells (clipped to the screen);
 * control characters show as '?'. Returns cells drawn. */
int grid_put(tui_screen *s, int y, int x, const char *text, int max, int role);
void grid_fill(tui_screen *s, int y, int x, int n, const char *ch, int role);
/* The grid as text lines (trailing blanks trimmed) into out. */
void grid_dump(const tui_screen *s, FILE *out);

/* ---- Keys ----------------------------------------------------------------- */

/* Printable keys are their character; special keys: */
enum {
	TK_UP = 0x110000, TK_DOWN, TK_LEFT, TK_RIGHT, TK_PGUP, TK_PGDN, TK_HOME, TK_END,
	TK_ENTER, TK_TAB, TK_BTAB, TK_ESC, TK_BS, TK_RESIZE, TK_WHEEL_UP, TK_WHEEL_DOWN,
	TK_MOUSE /* the curses side only: a mouse event to read */
};

/* What a key did (htop-style): the loop decides what to repaint. */
enum { TUI_REDRAW = 1, TUI_QUIT = 2, TUI_COMPUTE = 4 };

enum tui_pane { P_TENSORS, P_DETAIL, P_META, P_PROV, P_MEMORY, P_COUNT };

/* ---- Model ---------------------------------------------------------------- */

typedef struct tui_group {
	int block;            /* N of "blk.N." */
	size_t prefix_len;    /* length of "blk.N." in member names */
	bool open;
	size_t n, first;      /* members (all), index of the first in file order */
	uint64_t n_params, n_bytes;   /* all members */
	size_t vn;                    /* members that pass the filter, and their sums: */
	uint64_t v_params, v_bytes;   /* what the group row shows */
} tui_group;

typedef struct tui_row {
	uint8_t group_row;    /* 1: a group header */
	uint32_t idx;         /* group index or tensor index */
} tui_row;

typedef struct tui_mrow {
	uint8_t kind;         /* 0 kv, 1 blob, 2 array element, 3 text line of a kv, 4 text line of a blob */
	uint32_t idx;         /* kv or blob index */
	uint64_t sub;         /* element index or byte offset of the line */
} tui_mrow;

typedef struct tui {
	qtk_model *m;
	int w, h;
	bool utf8, color;
	int pane;
	bool help;
	totals tt;
	/* tensor table */
	size_t ngroups;
	tui_group *groups;
	int *tgroup;          /* group of each tensor, -1 none */
	size_t nrows;
	tui_row *rows;
	size_t cur, top;
	int sort;             /* index into the sort table */
	bool reverse;         /* the sort order reversed */
	int filter;           /* -1 all, else index into tt.types */
	size_t vtensors;      /* tensors that pass the filter, and their sums */
	uint64_t v_params, v_bytes;
	int list_y;           /* screen line of the first list row (set by the view) */
	/* search: a POSIX extended regular expression, case-insensitive */
	bool searching;
	char query[128];
	size_t qlen;
	regex_t re;           /* compiled query, valid when re_ok */
	bool re_ok;
	char re_err[96];      /* why the query being typed does not compile, "" when it does */
	size_t nmatch, match_at; /* matches of the query in the pane searched; the cursor's is match_at (1-based, 0 none) */
	char msg[200];        /* one-line status message, "" none */
	/* detail */
	qtk_tstats **stats;       /* per tensor, NULL until computed */
	long pending;         /* tensor to compute, -1 none */
	double progress;      /* 0..1 while computing */
	int dscroll, dlines;  /* scroll position and line count (set by the view) */
	/* metadata */
	bool *kv_open, *blob_open;
	uint8_t (*kv_sha)[32], (*blob_sha)[32]; /* SHA-256 of large values (tui_kv_large, tui_blob_large) */
	size_t nmrows, mcur, mtop;
	tui_mrow *mrows;
	/* provenance and memory: pre-rendered text lines */
	char **prov;
	size_t nprov;
	char *prov_block;     /* the record's lines, the last nprov_block of prov, in one block */
	qtk_jtext prov_laid;  /* ... or in the laid-out text itself (tm_take_text) */
	size_t nprov_block;
	int pscroll;
	char **mem;
	size_t nmem;
	int mscroll;
} tui;

/* Build the model of m for a w x h screen. 0 or -1 (out of memory). */
int tui_init(tui *t, qtk_model *m, int w, int h, bool utf8, bool color);
void tui_free(tui *t);
void tui_resize(tui *t, int w, int h);
/* Apply one key; returns TUI_* flags. */
unsigned tui_key(tui *t, int key);
/* Compute the pending tensor's statistics (progress through cb). */
int tui_compute(tui *t, qtk_stats_progress cb, void *ctx);
/* Tensor under the cursor, or -1 (a group row). */
long tui_cur_tensor(const tui *t);
const char *tui_sort_name(const tui *t);
/* Arrays and multi-line strings open with Enter in the metadata pane. */
bool tui_kv_expandable(const qtk_kv *kv);
/* Values over TUI_LARGE bytes (and binary blobs) show as their size and SHA-256, not their text. */
#define TUI_LARGE ((uint64_t)64 << 10)
uint64_t tui_kv_bytes(const qtk_kv *kv);
bool tui_kv_large(const qtk_kv *kv);
bool tui_blob_binary(const qtk_blob *b);
bool tui_blob_large(const qtk_blob *b);
/* A mouse click at screen cell (y, x) (button 1); returns TUI_* flags like tui_key.
 * The wheel arrives as the keys TK_WHEEL_UP / TK_WHEEL_DOWN. */
unsigned tui_click(tui *t, int y, int x);
extern const char *const tui_pane_names[P_COUNT];
/* The tab under column x of the tab line, or -1 (the view's layout). */
int tui_tab_at(const tui *t, int x);

/* ---- View ----------------------------------------------------------------- */

/* Draw the whole frame (also stores the detail pane's line count in t). */
void tui_draw(tui *t, tui_screen *s);
#endif
