/* tui_curses.c - the browser's terminal side: keys in, the view's grid out.
 * All drawing decisions live in tui_view.c; this file maps curses keys to
 * tui key codes, roles to attributes, and copies the grid to the screen. */
#include "tui.h"
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <string.h>
#include <time.h>

/* Colour roles (htop-style names, not colours); the mono theme uses only
 * A_BOLD / A_REVERSE / A_UNDERLINE so monochrome is a design, not an accident. */
static const struct {
	short fg, bg;
	attr_t color_attr, mono_attr;
} tc_roles[R_COUNT] = {
	[R_NORMAL] = {-1, -1, A_NORMAL, A_NORMAL},
	[R_TITLE] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
	[R_TAB] = {-1, -1, A_NORMAL, A_NORMAL},
	[R_TAB_ON] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, A_REVERSE | A_BOLD},
	[R_HEAD] = {-1, -1, A_BOLD | A_UNDERLINE, A_BOLD | A_UNDERLINE},
	[R_SEL] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
	[R_GROUP] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
	[R_DIM] = {-1, -1, A_DIM, A_NORMAL},
	[R_BAR] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
	[R_WARN] = {COLOR_RED, -1, A_BOLD, A_BOLD},
	[R_KEY] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
	[R_STATUS] = {COLOR_BLACK, COLOR_WHITE, A_NORMAL, A_REVERSE},
	[R_LABEL] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
};

static attr_t tc_attr[R_COUNT];

static void tc_colors(bool color)
{
	if (color && has_colors()) {
		start_color();
		use_default_colors();
		for (int r = 0; r < R_COUNT; r++) {
			init_pair((short)(r + 1), tc_roles[r].fg, tc_roles[r].bg);
			tc_attr[r] = tc_roles[r].color_attr | (attr_t)COLOR_PAIR(r + 1);
		}
	} else {
		for (int r = 0; r < R_COUNT; r++)
			tc_attr[r] = tc_roles[r].mono_attr;
	}
}

/* Copy the grid to the terminal: runs of one role in one call. */
static void tc_blit(const tui_screen *s)
{
	char run[4096];
	for (int y = 0; y < s->h; y++) {
		int x = 0;
		while (x < s->w) {
			int role = s->cells[y * s->w + x].role, x0 = x;
			size_t k = 0;
			while (x < s->w && s->cells[y * s->w + x].role == role && k + 5 < sizeof run) {
				size_t l = strlen(s->cells[y * s->w + x].ch);
				memcpy(run + k, s->cells[y * s->w + x].ch, l);
				k += l;
				x++;
			}
			run[k] = 0;
			attrset((int)tc_attr[role]);
			mvaddstr(y, x0, run);
		}
	}
	attrset(A_NORMAL);
	move(s->cur_y, s->cur_x);
	refresh();
}

static int tc_key(int ch)
{
	switch (ch) {
	case KEY_UP: return TK_UP;
	case KEY_DOWN: return TK_DOWN;
	case KEY_LEFT: return TK_LEFT;
	case KEY_RIGHT: return TK_RIGHT;
	case KEY_PPAGE: return TK_PGUP;
	case KEY_NPAGE: return TK_PGDN;
	case KEY_HOME: return TK_HOME;
	case KEY_END: return TK_END;
	case KEY_ENTER: case '\n': case '\r': return TK_ENTER;
	case '\t': return TK_TAB;
	case KEY_BTAB: return TK_BTAB;
	case 27: return TK_ESC;
	case KEY_BACKSPACE: case 127: case 8: return TK_BS;
	case KEY_RESIZE: return TK_RESIZE;
	case KEY_MOUSE: return TK_MOUSE;
	default: return ch >= 0x20 && ch < 0x7f ? ch : -1;
	}
}

typedef struct tc_prog {
	tui *t;
	tui_screen *s;
	double last;
} tc_prog;

static double tc_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Progress of a statistics computation: redraw a few times a second. */
static void tc_progress(void *ctx, uint64_t done, uint64_t total)
{
	tc_prog *p = ctx;
	p->t->progress = total ? (double)done / (double)total : 1;
	double now = tc_now();
	if (now - p->last < 0.1 && done < total)
		return;
	p->last = now;
	tui_draw(p->t, p->s);
	tc_blit(p->s);
}

int tui_run(qtk_model *m, const insp_opts *o)
{
	setlocale(LC_ALL, "");
	const char *cs = nl_langinfo(CODESET);
	bool utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
	if (!initscr()) {
		fprintf(stderr, "qinspect: error: cannot initialize the terminal\n");
		return 4;
	}
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	/* clicks select, the wheel scrolls (buttons 4 and 5); no drag reports */
	mousemask(BUTTON1_CLICKED | BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
	mouseinterval(0);
	set_escdelay(25);
	curs_set(0);
	tc_colors(o->color);
	int h, w;
	getmaxyx(stdscr, h, w);
	tui t;
	tui_screen s;
	int status = 0;
	if (tui_init(&t, m, w, h, utf8, o->color) || grid_init(&s, w, h)) {
		endwin();
		tui_free(&t);
		fprintf(stderr, "qinspect: error: out of memory\n");
		return 4;
	}
	for (;;) {
		tui_draw(&t, &s);
		tc_blit(&s);
		int key = tc_key(getch());
		if (key < 0)
			continue;
		if (key == TK_RESIZE) {
			getmaxyx(stdscr, h, w);
			grid_free(&s);
			if (grid_init(&s, w, h)) {
				status = 4;
				break;
			}
			tui_resize(&t, w, h);
			clear();
		}
		unsigned r;
		if (key == TK_MOUSE) {
			MEVENT ev;
			if (getmouse(&ev) != OK)
				continue;
			if (ev.bstate & BUTTON4_PRESSED)
				r = tui_key(&t, TK_WHEEL_UP);
			else if (ev.bstate & BUTTON5_PRESSED)
				r = tui_key(&t, TK_WHEEL_DOWN);
			else if (ev.bstate & (BUTTON1_CLICKED | BUTTON1_PRESSED))
				r = tui_click(&t, ev.y, ev.x);
			else
				continue;
		} else {
			r = tui_key(&t, key);
		}
		if (r & TUI_QUIT)
			break;
		if (r & TUI_COMPUTE) {
			tc_prog p = {&t, &s, 0};
			tc_progress(&p, 0, 1);
			tui_compute(&t, tc_progress, &p);
		}
	}
	endwin();
	grid_free(&s);
	tui_free(&t);
	return status;
}
