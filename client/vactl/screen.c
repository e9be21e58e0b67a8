/* screen.c - a live view's frame: lines fitted to the terminal, tables that fit its width. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "screen.h"

void vactl_screen_init(struct vactl_screen *s, int cols, int rows)
{
	memset(s, 0, sizeof(*s));
	s->cols = cols > 0 ? cols : 0;
	s->rows = rows > 0 ? rows : 0;
}

int vactl_screen_left(const struct vactl_screen *s)
{
	if (!s->rows)
		return INT_MAX / 2;
	return s->rows > (int)s->n ? s->rows - (int)s->n : 0;
}

void vactl_screen_line(struct vactl_screen *s, const char *fmt, ...)
{
	if (vactl_screen_left(s) <= 0)
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 32;
		char **l = realloc(s->lines, cap * sizeof(*l));
		if (!l)
			return;
		s->lines = l;
		s->cap = cap;
	}
	char *line;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?'; /* a session's name must not drive the operator's terminal */
	if (s->cols && n > s->cols)
		line[s->cols] = '\0';
	s->lines[s->n++] = line;
}

void vactl_screen_free(struct vactl_screen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->lines[i]);
	free(s->lines);
	s->lines = NULL;
	s->n = s->cap = 0;
}

void vactl_screen_show(struct vactl_screen *s, bool tty)
{
	if (tty)
		fputs("\033[H\033[J", stdout); /* home, clear: then no line keeps an old tail */
	for (size_t i = 0; i < s->n; i++) {
		fputs(s->lines[i], stdout);
		if (!tty || i + 1 < s->n)
			putchar('\n');
	}
	if (!tty)
		putchar('\n'); /* a blank line between snapshots */
	fflush(stdout);
	vactl_screen_free(s);
}

/* ---- fitted tables ---------------------------------------------------------------- */

struct vactl_fit {
	size_t ncols, nrows, cap;
	const struct vactl_fit_col *cols;
	int min_name;
	char **cells; /* row-major, nrows rows of data (headings come from cols) */
};

struct vactl_fit *vactl_fit_new(size_t ncols, const struct vactl_fit_col *cols, int min_name)
{
	struct vactl_fit *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->cols = cols;
	t->min_name = min_name > 1 ? min_name : 2;
	return t;
}

void vactl_fit_row(struct vactl_fit *t, const char *const *cells)
{
	if (!t)
		return;
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char **c = realloc(t->cells, cap * t->ncols * sizeof(*c));
		if (!c)
			return;
		t->cells = c;
		t->cap = cap;
	}
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = strdup(cells[i] ? cells[i] : "-");
	t->nrows++;
}

int vactl_fit_rows(const struct vactl_fit *t)
{
	return t ? (int)t->nrows + 1 : 0;
}

static const char *cell(const struct vactl_fit *t, size_t r, size_t i)
{
	if (r == 0)
		return t->cols[i].head;
	const char *s = t->cells[(r - 1) * t->ncols + i];
	return s ? s : "?";
}

/* Width of the shown columns: each column's widest cell plus two spaces before it. */
static int total_width(const struct vactl_fit *t, const int *w, const bool *shown)
{
	int sum = 0;
	for (size_t i = 0; i < t->ncols; i++)
		if (shown[i])
			sum += w[i] + (i ? 2 : 0);
	return sum;
}

/* Drop and shorten columns until the table fits cols (0: no limit). */
static void fit_width(const struct vactl_fit *t, int cols, int *w, bool *shown)
{
	if (!cols)
		return;
	int excess = total_width(t, w, shown) - cols;
	if (excess > 0 && w[0] > t->min_name) {
		int cut = w[0] - t->min_name < excess ? w[0] - t->min_name : excess;
		w[0] -= cut;
		excess -= cut;
	}
	while (excess > 0) {
		size_t drop = 0;
		for (size_t i = 1; i < t->ncols; i++)
			if (shown[i] && t->cols[i].keep > 0 &&
			    (!drop || t->cols[i].keep < t->cols[drop].keep))
				drop = i;
		if (!drop)
			break;
		shown[drop] = false;
		excess -= w[drop] + 2;
	}
	if (excess > 0 && w[0] > 2)
		w[0] = w[0] - excess > 2 ? w[0] - excess : 2;
	/* dropping a wide column may leave room to show more of the names again */
	if (excess < 0) {
		int widest = 0;
		for (size_t r = 0; r <= t->nrows; r++) {
			int l = (int)strlen(cell(t, r, 0));
			widest = l > widest ? l : widest;
		}
		int room = widest - w[0] < -excess ? widest - w[0] : -excess;
		if (room > 0)
			w[0] += room;
	}
}

void vactl_fit_emit(struct vactl_fit *t, struct vactl_screen *s, int max_rows, const char *what)
{
	if (!t)
		return;
	int *w = calloc(t->ncols, sizeof(*w));
	bool *shown = calloc(t->ncols, sizeof(*shown));
	char *line = NULL;
	size_t cap = 0;
	if (!w || !shown)
		goto out;
	for (size_t i = 0; i < t->ncols; i++) {
		shown[i] = true;
		for (size_t r = 0; r <= t->nrows; r++) {
			int l = (int)strlen(cell(t, r, i));
			w[i] = l > w[i] ? l : w[i];
		}
	}
	fit_width(t, s->cols, w, shown);
	for (size_t i = 0; i < t->ncols; i++)
		if (shown[i])
			cap += (size_t)w[i] + 2;
	if (!(line = malloc(cap + 1)))
		goto out;
	size_t rows = t->nrows + 1;
	bool more = max_rows >= 0 && rows > (size_t)max_rows;
	if (more)
		rows = max_rows > 1 ? (size_t)max_rows - 1 : 0;
	for (size_t r = 0; r < rows; r++) {
		size_t len = 0;
		for (size_t i = 0; i < t->ncols; i++) {
			if (!shown[i])
				continue;
			const char *c = cell(t, r, i);
			int l = (int)strlen(c);
			if (i == 0) {
				if (l > w[0]) /* shortened: its last shown character says so */
					len += (size_t)sprintf(line + len, "%.*s~", w[0] - 1, c);
				else
					len += (size_t)sprintf(line + len, "%-*s", w[0], c);
			} else {
				len += (size_t)sprintf(line + len, "  %*s", w[i], c);
			}
		}
		vactl_screen_line(s, "%s", line);
	}
	if (more && max_rows > 0)
		vactl_screen_line(s, "... %zu more %s", t->nrows - (rows ? rows - 1 : 0), what);
out:
	vactl_fit_free(t);
	free(w);
	free(shown);
	free(line);
}

void vactl_fit_free(struct vactl_fit *t)
{
	if (!t)
		return;
	for (size_t k = 0; k < t->nrows * t->ncols; k++)
		free(t->cells[k]);
	free(t->cells);
	free(t);
}
