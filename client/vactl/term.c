/* term.c - the terminal of vactl's live views: single keys, size, restored on every exit. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "term.h"

volatile sig_atomic_t vactl_term_stop, vactl_term_resized;

static struct termios saved;
static volatile sig_atomic_t taken;	    /* saved holds stdin's settings, ours are on */
static volatile sig_atomic_t cursor_hidden; /* stdout is a terminal and its cursor is hidden */

static bool want_cursor_hidden;
static volatile sig_atomic_t frame_open; /* the cursor is at the end of a frame's last row */
static const char hide_cursor[] = "\033[?25l", show_cursor[] = "\033[?25h";

static bool have_saved; /* stdin is a terminal: saved holds its settings */

/* Put stdin in cbreak mode and hide the cursor, as vactl_term_enter asked. */
static void take(void)
{
	struct termios t = saved;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (have_saved && tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
		taken = 1;
	if (want_cursor_hidden && isatty(STDOUT_FILENO) &&
	    write(STDOUT_FILENO, hide_cursor, sizeof(hide_cursor) - 1) > 0)
		cursor_hidden = 1;
}

bool vactl_term_enter(bool hide)
{
	want_cursor_hidden = hide;
	have_saved = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
	take();
	return taken;
}

void vactl_term_leave(void)
{
	int e = errno; /* a signal handler must not change it */
	if (taken) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
		taken = 0;
	}
	if (cursor_hidden) {
		(void)!write(STDOUT_FILENO, show_cursor, sizeof(show_cursor) - 1);
		cursor_hidden = 0;
	}
	if (frame_open) {
		(void)!write(STDOUT_FILENO, "\n", 1);
		frame_open = 0;
	}
	errno = e;
}

void vactl_term_frame_open(bool open)
{
	frame_open = open;
}

static void on_stop(int sig)
{
	(void)sig;
	vactl_term_stop = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	vactl_term_resized = 1;
}

/* Ctrl-Z: give the terminal back while stopped, take it again (and redraw) on fg. */
static void on_tstp(int sig)
{
	int e = errno;
	bool had = taken || cursor_hidden;
	vactl_term_leave();
	signal(SIGTSTP, SIG_DFL);
	sigset_t m;
	sigemptyset(&m);
	sigaddset(&m, SIGTSTP);
	sigprocmask(SIG_UNBLOCK, &m, NULL); /* blocked while its handler runs */
	raise(sig);			    /* stops here until SIGCONT */
	struct sigaction sa = {.sa_handler = on_tstp};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTSTP, &sa, NULL);
	if (had)
		take();
	vactl_term_resized = 1;
	errno = e;
}

void vactl_term_signals(void)
{
	/* No SA_RESTART: a signal cuts the wait for a key short, so the loop sees it at once. */
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	sa.sa_handler = on_tstp;
	sigaction(SIGTSTP, &sa, NULL);
}

int vactl_term_cols(int fd)
{
	struct winsize w;
	return ioctl(fd, TIOCGWINSZ, &w) == 0 ? w.ws_col : 0;
}

int vactl_term_rows(int fd)
{
	struct winsize w;
	return ioctl(fd, TIOCGWINSZ, &w) == 0 ? w.ws_row : 0;
}

int vactl_term_key(bool keys, int timeout_ms)
{
	if (timeout_ms < 0)
		timeout_ms = 0;
	if (!keys) {
		struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL); /* a signal cuts it short */
		return 0;
	}
	struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
	int n = poll(&p, 1, timeout_ms);
	if (n <= 0)
		return 0; /* timeout, or a signal (EINTR) */
	unsigned char c;
	ssize_t r = read(STDIN_FILENO, &c, 1);
	if (r == 1)
		return c ? c : ' ';
	return r == 0 ? -1 : 0;
}
