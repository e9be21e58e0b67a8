/*
 * screen.h - one frame of a live view (screen.c): lines cut to the terminal's width and rows,
 * then drawn over the last frame on a terminal or printed plainly into a pipe, and tables
 * whose columns are dropped (least wanted first) and whose first column is shortened until
 * they fit that width. Depends on nothing else of vactl.
 */
#ifndef VACTL_SCREEN_H
#define VACTL_SCREEN_H

#include <stdbool.h>
#include <stddef.h>

struct vactl_screen {
	int cols, rows; /* the frame's size; 0: no limit (a pipe) */
	char **lines;
	size_t n, cap;
};

/* An empty frame of cols x rows (0: unlimited). */
void vactl_screen_init(struct vactl_screen *s, int cols, int rows);

/* Add one line, printf-formatted; bytes a terminal would act on (control characters,
 * anything not ASCII) show as '?', and it is cut at the width. Ignored once the frame is full. */
void vactl_screen_line(struct vactl_screen *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Rows still free (a large number when unlimited). */
int vactl_screen_left(const struct vactl_screen *s);

/* Draw the frame (tty: over the last one, with no newline after the last row so a full
 * screen does not scroll; else plain lines) and empty it. */
void vactl_screen_show(struct vactl_screen *s, bool tty);

/* Free the frame's lines without drawing them. */
void vactl_screen_free(struct vactl_screen *s);

/* One column of a fitted table: its heading, and how much it is wanted: when the table is
 * too wide, the column with the lowest keep goes first; keep 0 is never dropped. */
struct vactl_fit_col {
	const char *head;
	int keep;
};

struct vactl_fit;

/* A table of ncols columns (cols[0] is the name column: left-aligned, shortened with '~'
 * down to min_name characters before any column is dropped, further only when nothing else
 * can go); the others right-aligned. NULL when out of memory (the calls below accept it). */
struct vactl_fit *vactl_fit_new(size_t ncols, const struct vactl_fit_col *cols, int min_name);

/* Add a row of ncols cells (NULL shows as "-"). */
void vactl_fit_row(struct vactl_fit *t, const char *const *cells);

/* Add the heading and rows to s in at most max_rows lines (heading included; negative: no
 * limit); when rows do not fit, the last line says how many more there are ("... 3 more
 * what"). Frees t. */
void vactl_fit_emit(struct vactl_fit *t, struct vactl_screen *s, int max_rows, const char *what);

/* Free a table without showing it. */
void vactl_fit_free(struct vactl_fit *t);

/* Rows the table wants (heading included). */
int vactl_fit_rows(const struct vactl_fit *t);

#endif
