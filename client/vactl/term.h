/*
 * term.h - the terminal of vactl's live views (term.c): keys without Enter, the size, and the
 * terminal given back as it was on every way out (q, Ctrl-C, SIGTERM, an error, the --timeout
 * deadline, Ctrl-Z and fg). Depends on nothing else of vactl.
 */
#ifndef VACTL_TERM_H
#define VACTL_TERM_H

#include <signal.h>
#include <stdbool.h>

/* Take the terminal on stdin for single keys (no echo, no line editing; Ctrl-C still
 * interrupts) and, with hide_cursor, hide the cursor on stdout when it is a terminal. false
 * when stdin is not a terminal (then there are no keys to read; the view still runs). */
bool vactl_term_enter(bool hide_cursor);

/* Give the terminal back as vactl_term_enter found it, show the cursor and end the open
 * frame's last line (so what is printed next starts on a line of its own); safe to call
 * twice, and from a signal handler (async-signal-safe). stdout must be flushed before. */
void vactl_term_leave(void);

/* Say that stdout's cursor stands at the end of a drawn frame's last row (no newline). */
void vactl_term_frame_open(bool open);

/* Catch SIGINT, SIGTERM and SIGHUP into vactl_term_stop, SIGWINCH into vactl_term_resized,
 * and SIGTSTP (the terminal is restored while stopped and taken again on fg). */
void vactl_term_signals(void);

/* Set by the signals above; the view loop reads and clears them. */
extern volatile sig_atomic_t vactl_term_stop, vactl_term_resized;

/* Columns of the terminal on fd (TIOCGWINSZ), else 0. */
int vactl_term_cols(int fd);

/* Rows of the terminal on fd, else 0. */
int vactl_term_rows(int fd);

/* Wait at most timeout_ms for a key on stdin: the key (a byte), 0 on timeout, a signal or
 * when keys is false (then it only sleeps), -1 at the end of stdin. */
int vactl_term_key(bool keys, int timeout_ms);

#endif
