/* cmd_top.c - vactl top: arenas, clients and latency, refreshed every interval until q. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "live.h"
#include "term.h"
#include "top.h"

static int on_top_opt(int opt, const char *arg, void *ctx)
{
	return vactl_live_opt(&vactl_cmd_top, ctx, opt, arg);
}

/* The frame's size: the terminal's; into a pipe no limit, or $COLUMNS wide (watch sets it). */
static void frame_size(bool tty, int *cols, int *rows)
{
	*cols = *rows = 0;
	if (tty) {
		*cols = vactl_term_cols(STDOUT_FILENO);
		*rows = vactl_term_rows(STDOUT_FILENO);
		*cols = *cols > 0 ? *cols : 80;
		*rows = *rows > 0 ? *rows : 24;
		return;
	}
	const char *c = getenv("COLUMNS");
	if (c && atoi(c) > 0)
		*cols = atoi(c);
}

static void draw(const struct vad_session *sess, const struct top_samples *s, bool tty, bool keys)
{
	struct vactl_screen scr;
	int cols, rows;
	frame_size(tty, &cols, &rows);
	vactl_screen_init(&scr, cols, rows);
	top_view(&scr, sess, s, keys);
	vactl_screen_show(&scr, tty);
	vactl_term_frame_open(tty);
}

/* Wait until ms have passed, redrawing on a resize. false when the view should end: q, the
 * stop signals. */
static bool wait_refresh(const struct vad_session *sess, const struct top_samples *s, uint64_t ms,
			 bool tty, bool *keys)
{
	uint64_t until = top_samples_last(s)->at_ms + ms;
	for (;;) {
		if (vactl_term_stop)
			return false;
		if (vactl_term_resized) {
			vactl_term_resized = 0;
			if (tty)
				draw(sess, s, tty, *keys);
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		if (now >= until)
			return true;
		int k = vactl_term_key(*keys, (int)(until - now));
		if (k == 'q' || k == 'Q')
			return false;
		if (k < 0)
			*keys = false; /* stdin ended: only a signal or --count ends the view now */
	}
}

static int run_top(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {VACTL_LIVE_OPTIONS, {0}};
	struct vactl_live a = {.interval_ms = 1000};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_top, o, argc, argv, NULL, opts, on_top_opt, &a, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	if ((rc = vactl_check_operands(&vactl_cmd_top, argc, argv, first, 0)))
		return rc;
	vad_client *c;
	if ((rc = vactl_connect(o, &c)))
		return rc;
	struct vad_session sess;
	vad_session_info(c, &sess);
	bool tty = !o->json && isatty(STDOUT_FILENO);
	vactl_term_signals();
	bool keys = vactl_term_enter(tty);
	struct top_samples s = {0};
	for (uint64_t sample = 1;; sample++) {
		int err = top_samples_take(&s, c);
		if (err) {
			vactl_term_leave(); /* the message goes below the last frame */
			rc = vactl_report(o, c, err);
			break;
		}
		if (o->json)
			top_json(&sess, &s, sample);
		else
			draw(&sess, &s, tty, keys);
		if (a.count && sample >= a.count)
			break;
		vactl_deadline(o, false);
		bool more = wait_refresh(&sess, &s, a.interval_ms, tty, &keys);
		vactl_deadline(o, true);
		if (!more)
			break;
	}
	vactl_term_leave(); /* the prompt goes below the last frame */
	top_samples_free(&s);
	vad_close(c);
	return rc;
}

const struct vactl_cmd vactl_cmd_top = {
    .name = "top",
    .args = "[--interval D] [--count N]",
    .summary = "live arenas, clients and latency; q quits",
    .help = "Samples the daemon every interval (default 1s) and shows three panes: each arena's\n"
	    "occupancy, lazy and resident bytes, largest free block, fragmentation and alloc/free\n"
	    "rates; each client session's name, uid, ranges and bytes held and requests per\n"
	    "second (busiest first; the list needs an admin); and per operation the requests,\n"
	    "p50 and p99 latency of the last 5 seconds. It runs until q, Ctrl-C or N refreshes\n"
	    "(--count N, N >= 1).\n"
	    "On a terminal the screen is redrawn and fits its size: the columns least needed\n"
	    "are dropped and long names end in '~' before anything wraps, and a pane with more\n"
	    "rows than fit ends with '... N more'. Into a pipe it prints plain snapshots\n"
	    "separated by blank lines, without escape codes, as wide as $COLUMNS if set.\n"
	    "JSON: one line per sample: {sample, uptime_ms, clients, requests, interval_ms,\n"
	    "requests_per_s, arenas: [{the stats fields, allocs_per_s, frees_per_s}], sessions:\n"
	    "[{session_id, name, pid, uid, held_ranges, held_bytes, requests_per_s}] (null for a\n"
	    "non-admin)}; rates are 0 in the first sample.\n",
    .run = run_top,
};
