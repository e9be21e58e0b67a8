/*
 * test_service_flood.c - one client cannot flood the daemon's log or its event history: a
 * session that sends tens of thousands of refused admin operations and thousands of failing
 * allocations leaves a bounded number of log lines and event rows, the suppressed counts
 * appear (and add up to exactly what was suppressed), and daemon events (start, reload,
 * stop) are still recorded, however many sessions cause events at once.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "ratelimit.h"
#include "rawclient.h"
#include "vtassert.h"

#define PAGE	      4096u
#define SMALL_SIZE    (1024u * 1024u)
#define REPLY_TIMEOUT vt_timeout_ms(10000)
#define CHUNK	      256 /* requests in flight at once: replies stay under the watermark */

/* A 256M default arena and a 1M "small" one that a single range fills. */
static const char *const flood_arenas = "[arena default]\n"
					"size = 256M\n"
					"\n"
					"[arena small]\n"
					"size = 1M\n";

/* No periodic snapshot: every event stays queued until the final one, so whatever the
 * queue drops is missing from the database. */
static const char *const flood_vad_extra = "stats_interval = 1h\n";

/* ---- the flood ----------------------------------------------------------------------- */

/* Send n requests made by make(i), CHUNK at a time, and check each reply has code want. */
static int pipeline(struct vt_raw *r, int n, Vad__Request *(*make)(int i, struct vt_req *q),
		    int want)
{
	struct vt_req q;
	for (int done = 0; done < n;) {
		int k = n - done < CHUNK ? n - done : CHUNK;
		for (int i = 0; i < k; i++) {
			if (!vt_raw_send_request(r, make(done + i, &q)))
				return -1;
		}
		for (int i = 0; i < k; i++) {
			Vad__Response *resp = NULL;
			if (vt_raw_recv(r, &resp, REPLY_TIMEOUT) != VT_RAW_RESPONSE) {
				fprintf(stderr, "no reply to request %d\n", done + i);
				return -1;
			}
			int code = resp->error;
			vt_raw_response_free(resp);
			if (code != want) {
				fprintf(stderr, "request %d: %s, expected %s\n", done + i,
					vt_error_name(code), vt_error_name(want));
				return -1;
			}
		}
		done += k;
	}
	return 0;
}

/* Admin operations in turn: each is refused (and would log a line) for a non-admin. */
static Vad__Request *make_admin_op(int i, struct vt_req *q)
{
	switch (i % 3) {
	case 0:
		return vt_req_purge(q, NULL);
	case 1:
		return vt_req_reload(q);
	default:
		return vt_req_check(q);
	}
}

/* A page in the full "small" arena: ENOSPC, an alloc-failed event each. */
static Vad__Request *make_failing_alloc(int i, struct vt_req *q)
{
	return vt_req_alloc(q, "small", PAGE, 0, 0);
}

/* Connect, say hello as name and fill the "small" arena if fill. */
static int flood_open(struct vt_raw *r, const struct vt_daemon *d, const char *name, bool fill)
{
	if (vt_raw_connect(r, d->socket_path) < 0 || vt_raw_hello(r, name) < 0)
		return -1;
	if (!fill)
		return 0;
	struct vt_req q;
	Vad__Response *resp =
	    vt_raw_call(r, vt_req_alloc(&q, "small", SMALL_SIZE, 0, 0), REPLY_TIMEOUT);
	int code = resp ? (int)resp->error : -1;
	vt_raw_response_free(resp);
	return code == 0 ? 0 : -1;
}

/* ---- what the daemon left behind -------------------------------------------------------- */

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *b = realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = b;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[len] = '\0';
	return buf;
}

/* The number in "... N <what> ..." of a rate-limit summary; 0 if the text has none. */
static uint64_t summary_count(const char *text, const char *what)
{
	const char *p = strstr(text, what);
	if (!p)
		return 0;
	const char *q = p;
	while (q > text && q[-1] == ' ')
		q--;
	while (q > text && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return strtoull(q, NULL, 10);
}

struct log_counts {
	unsigned lines;	     /* lines about the session (refusals and summaries) */
	unsigned refusals;   /* "refused admin operation" lines */
	unsigned summaries;  /* "suppressed" lines */
	uint64_t suppressed; /* sum of the suppressed log lines they report */
};

/* Count the daemon's log lines that name the session called name. */
static void count_log(const struct vt_daemon *d, const char *name, struct log_counts *c)
{
	memset(c, 0, sizeof(*c));
	char *log = read_file(d->log_path);
	assert_non_null(log);
	char needle[64];
	snprintf(needle, sizeof(needle), "'%s'", name);
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strstr(line, needle))
			continue;
		c->lines++;
		if (strstr(line, "refused admin operation"))
			c->refusals++;
		if (strstr(line, "suppressed")) {
			c->summaries++;
			c->suppressed += summary_count(line, "similar log lines");
		}
	}
	free(log);
}

struct event_counts {
	unsigned rows;	     /* rows the session caused (alloc-failed and rate-limited) */
	unsigned failed;     /* alloc-failed rows */
	uint64_t suppressed; /* sum of the suppressed events the rate-limited rows report */
	unsigned reloads, starts, stops, dropped_rows;
	uint64_t dropped; /* sum of the events-dropped counts */
};

/* Read the event table of the stopped daemon's database. */
static void count_events(const struct vt_daemon *d, const char *name, struct event_counts *c)
{
	memset(c, 0, sizeof(*c));
	sqlite3 *db = NULL;
	assert_int_equal(SQLITE_OK, sqlite3_open_v2(d->stats_db, &db, SQLITE_OPEN_READONLY, NULL));
	sqlite3_stmt *st = NULL;
	assert_int_equal(SQLITE_OK,
			 sqlite3_prepare_v2(db, "SELECT kind, detail FROM event", -1, &st, NULL));
	char needle[64];
	snprintf(needle, sizeof(needle), "'%s'", name);
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(st, 0);
		const char *detail = (const char *)sqlite3_column_text(st, 1);
		if (!detail)
			detail = "";
		if (strcmp(kind, "reload") == 0)
			c->reloads++;
		else if (strcmp(kind, "start") == 0)
			c->starts++;
		else if (strcmp(kind, "stop") == 0)
			c->stops++;
		else if (strcmp(kind, "events-dropped") == 0) {
			c->dropped_rows++;
			c->dropped += strtoull(detail, NULL, 10);
		} else if (strcmp(kind, "alloc-failed") == 0 && strstr(detail, "'small'")) {
			c->rows++;
			c->failed++;
		} else if (strcmp(kind, "rate-limited") == 0 && strstr(detail, needle)) {
			c->rows++;
			c->suppressed += summary_count(detail, "events");
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* What one session may write in seconds: each token lets one item and one summary through,
 * and the session's end adds one summary. */
static unsigned rate_bound(double seconds)
{
	unsigned tokens = VAD_RATE_BURST + (unsigned)(seconds * 1000.0 / VAD_RATE_PERIOD_MS) + 1;
	return 2 * tokens + 1;
}

/* ---- one session floods ------------------------------------------------------------------ */

#define ADMIN_OPS 50000
#define FAILS	  4000

/* The flooding child (uid nobody): half the flood, "half" on the pipe, wait for "go", the
 * other half. */
static void flood_child(const struct vt_daemon *d, int to_parent, int from_parent, int ops,
			int fails)
{
	VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot drop privileges");
	struct vt_raw r;
	VT_CHILD_CHECK(flood_open(&r, d, "flood", true) == 0, "cannot connect and fill 'small'");
	for (int half = 0; half < 2; half++) {
		VT_CHILD_CHECK(pipeline(&r, ops / 2, make_admin_op, VAD__ERROR__EPERM) == 0,
			       "admin flood");
		VT_CHILD_CHECK(pipeline(&r, fails / 2, make_failing_alloc, VAD__ERROR__ENOSPC) == 0,
			       "alloc flood");
		if (half == 0) {
			char line[16];
			VT_CHILD_CHECK(vt_pipe_send(to_parent, "half") == 0, "pipe");
			VT_CHILD_CHECK(
			    vt_pipe_recv(from_parent, line, sizeof(line), REPLY_TIMEOUT) > 0,
			    "no go from the parent");
		}
	}
	vt_raw_close(&r);
	_exit(0);
}

static void test_one_session_flood(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: an unprivileged client needs root to switch to nobody\n");
		skip();
	}
	assert_int_equal(0, vt_daemon_setup(d, flood_vad_extra, flood_arenas));
	int ops = vt_scale(ADMIN_OPS) & ~1, fails = vt_scale(FAILS) & ~1;
	int up[2], down[2];
	assert_int_equal(0, pipe(up));
	assert_int_equal(0, pipe(down));
	uint64_t t0 = vt_now_ns();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		flood_child(d, up[1], down[0], ops, fails);
	}
	close(up[1]);
	close(down[0]);
	char line[16];
	assert_true(vt_pipe_recv(up[0], line, sizeof(line), vt_timeout_ms(120000)) > 0);
	/* An admin reloads in the middle of the flood: that event must survive it. */
	vad_client *admin;
	assert_int_equal(0, vt_connect(d, "admin", &admin));
	VT_ASSERT_OK(admin, vad_reload(admin));
	vad_close(admin);
	assert_int_equal(0, vt_pipe_send(down[1], "go"));
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(120000)));
	close(up[0]);
	close(down[1]);
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(5000), &s)); /* session gone */
	double seconds = (double)(vt_now_ns() - t0) / 1e9;
	assert_int_equal(0, vt_daemon_stop(d));

	struct log_counts lc;
	count_log(d, "flood", &lc);
	struct event_counts ec;
	count_events(d, "flood", &ec);
	print_message("%d refused admin operations and %d failed allocations in %.1f s: %u log "
		      "lines (%u summaries, %llu lines suppressed), %u event rows (%llu events "
		      "suppressed), bound %u each\n",
		      ops, fails, seconds, lc.lines, lc.summaries,
		      (unsigned long long)lc.suppressed, ec.rows, (unsigned long long)ec.suppressed,
		      rate_bound(seconds));
	if (lc.lines > rate_bound(seconds))
		fail_msg("%u log lines about the flooding session in %.1f s, more than %u",
			 lc.lines, seconds, rate_bound(seconds));
	if (ec.rows > rate_bound(seconds))
		fail_msg("%u event rows about the flooding session in %.1f s, more than %u",
			 ec.rows, seconds, rate_bound(seconds));
	/* Nothing is lost without a trace: shown + suppressed = what the client caused. */
	assert_true(lc.summaries >= 1);
	assert_int_equal(ops, lc.refusals + lc.suppressed);
	assert_int_equal(fails, ec.failed + ec.suppressed);
	assert_int_equal(1, ec.reloads);
	assert_int_equal(1, ec.starts);
	assert_int_equal(1, ec.stops);
}

/* ---- a flood of three seconds, the stats thread writing every 100 ms ----------------------- */

#define FLOOD_MS 3000

/* The flooding child (uid nobody): refused admin operations and failing allocations, two
 * chunks to one, for FLOOD_MS; then the counts sent on the pipe as "OPS FAILS". */
static void timed_flood_child(const struct vt_daemon *d, int to_parent)
{
	VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot drop privileges");
	struct vt_raw r;
	VT_CHILD_CHECK(flood_open(&r, d, "timed", true) == 0, "cannot connect and fill 'small'");
	uint64_t end = vt_now_ns() + (uint64_t)FLOOD_MS * 1000000u;
	long ops = 0, fails = 0;
	while (vt_now_ns() < end) {
		VT_CHILD_CHECK(pipeline(&r, 2 * CHUNK, make_admin_op, VAD__ERROR__EPERM) == 0,
			       "admin flood");
		VT_CHILD_CHECK(pipeline(&r, CHUNK, make_failing_alloc, VAD__ERROR__ENOSPC) == 0,
			       "alloc flood");
		ops += 2 * CHUNK;
		fails += CHUNK;
	}
	vt_raw_close(&r);
	char line[64];
	snprintf(line, sizeof(line), "%ld %ld", ops, fails);
	VT_CHILD_CHECK(vt_pipe_send(to_parent, line) == 0, "pipe");
	_exit(0);
}

static void test_three_second_flood(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: an unprivileged client needs root to switch to nobody\n");
		skip();
	}
	/* $VAD_FLOOD_STATS_INTERVAL (default 100ms) measures the figure at other intervals. */
	const char *interval = getenv("VAD_FLOOD_STATS_INTERVAL");
	char extra[64];
	snprintf(extra, sizeof(extra), "stats_interval = %s\n",
		 interval && *interval ? interval : "100ms");
	assert_int_equal(0, vt_daemon_setup(d, extra, flood_arenas));
	int up[2];
	assert_int_equal(0, pipe(up));
	uint64_t t0 = vt_now_ns();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(up[0]);
		timed_flood_child(d, up[1]);
	}
	close(up[1]);
	char line[64];
	assert_true(vt_pipe_recv(up[0], line, sizeof(line), vt_timeout_ms(60000)) > 0);
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(10000)));
	close(up[0]);
	long ops = 0, fails = 0;
	assert_int_equal(2, sscanf(line, "%ld %ld", &ops, &fails));
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(5000), &s)); /* session gone */
	double seconds = (double)(vt_now_ns() - t0) / 1e9;
	assert_int_equal(0, vt_daemon_stop(d));

	struct log_counts lc;
	count_log(d, "timed", &lc);
	struct event_counts ec;
	count_events(d, "timed", &ec);
	/* From the fork to the session's end: the flood and its last summaries. */
	unsigned bound = rate_bound(seconds);
	print_message(
	    "%ld refused admin operations and %ld failed allocations in %d ms (session of "
	    "%.1f s): %u log lines, %u event rows (bound %u)\n",
	    ops, fails, FLOOD_MS, seconds, lc.lines, ec.rows, bound);
	if (lc.lines > bound || ec.rows > bound)
		fail_msg("%u log lines and %u event rows in %d ms; at most %u each", lc.lines,
			 ec.rows, FLOOD_MS, bound);
	assert_int_equal(ops, lc.refusals + lc.suppressed);
	assert_int_equal(fails, ec.failed + ec.suppressed);
}

/* ---- a client that reconnects for a fresh burst each time ------------------------------- */

#define RECONNECTS	300
#define OPS_PER_SESSION 20

static void reconnect_child(const struct vt_daemon *d, int sessions)
{
	VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot drop privileges");
	for (int i = 0; i < sessions; i++) {
		struct vt_raw r;
		VT_CHILD_CHECK(flood_open(&r, d, "again", false) == 0, "connect %d", i);
		VT_CHILD_CHECK(pipeline(&r, OPS_PER_SESSION, make_admin_op, VAD__ERROR__EPERM) == 0,
			       "admin flood %d", i);
		vt_raw_close(&r);
	}
	_exit(0);
}

static void test_reconnecting_flood(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: an unprivileged client needs root to switch to nobody\n");
		skip();
	}
	assert_int_equal(0, vt_daemon_setup(d, flood_vad_extra, flood_arenas));
	int sessions = vt_scale(RECONNECTS);
	uint64_t t0 = vt_now_ns();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		reconnect_child(d, sessions);
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(120000)));
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(5000), &s)); /* all gone */
	double seconds = (double)(vt_now_ns() - t0) / 1e9;
	assert_int_equal(0, vt_daemon_stop(d));

	struct log_counts lc;
	count_log(d, "again", &lc);
	char *log = read_file(d->log_path);
	assert_non_null(log);
	unsigned wide = 0;
	for (const char *p = log; (p = strstr(p, "suppressed daemon-wide")); p++)
		wide++;
	free(log);
	/* All sessions together get the daemon-wide burst and rate, and its summaries. */
	unsigned tokens =
	    VAD_RATE_ALL_BURST + (unsigned)(seconds * 1000.0 / VAD_RATE_ALL_PERIOD_MS) + 1;
	unsigned bound = 2 * tokens + 1;
	print_message("%d sessions of %d refused admin operations in %.1f s: %u log lines about "
		      "them, %u daemon-wide summaries (bound %u)\n",
		      sessions, OPS_PER_SESSION, seconds, lc.lines, wide, bound);
	if (lc.lines + wide > bound)
		fail_msg("%u log lines in %.1f s from sessions that reconnect, more than %u",
			 lc.lines + wide, seconds, bound);
	if ((unsigned)sessions * OPS_PER_SESSION > bound)
		assert_true(wide >= 1); /* what was cut is counted */
}

/* ---- many sessions cause events at once -------------------------------------------------- */

#define SESSIONS	  40
#define FAILS_PER_SESSION 30

static void test_client_events_keep_daemon_events(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, flood_vad_extra, flood_arenas));
	/* The daemon event comes first: a queue that drops its oldest would lose it. */
	vad_client *admin;
	assert_int_equal(0, vt_connect(d, "admin", &admin));
	VT_ASSERT_OK(admin, vad_reload(admin));
	vad_close(admin);

	struct vt_raw *conns = calloc(SESSIONS, sizeof(*conns));
	assert_non_null(conns);
	for (int i = 0; i < SESSIONS; i++)
		assert_int_equal(0, flood_open(&conns[i], d, "many", i == 0));
	for (int i = 0; i < SESSIONS; i++)
		assert_int_equal(0, pipeline(&conns[i], FAILS_PER_SESSION, make_failing_alloc,
					     VAD__ERROR__ENOSPC));
	for (int i = 0; i < SESSIONS; i++)
		vt_raw_close(&conns[i]);
	free(conns);
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(5000), &s));
	assert_int_equal(0, vt_daemon_stop(d));

	struct event_counts ec;
	count_events(d, "many", &ec);
	print_message("%d sessions x %d failed allocations: %u alloc-failed rows, %u "
		      "rate-limited, %llu events dropped (%u rows)\n",
		      SESSIONS, FAILS_PER_SESSION, ec.failed, ec.rows - ec.failed,
		      (unsigned long long)ec.dropped, ec.dropped_rows);
	assert_int_equal(1, ec.reloads);
	assert_int_equal(1, ec.starts);
	assert_int_equal(1, ec.stops);
	assert_true(ec.rows <= VAD_EVENTS_CLIENT_MAX);
	/* What the queue could not keep is counted, and with the rate limits it all adds up. */
	assert_int_equal(1, ec.dropped_rows);
	assert_true(ec.dropped > 0);
	assert_true(ec.failed + ec.suppressed <= (uint64_t)SESSIONS * FAILS_PER_SESSION);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    VT_OWN_DAEMON_TEST(test_one_session_flood),
	    VT_OWN_DAEMON_TEST(test_three_second_flood),
	    VT_OWN_DAEMON_TEST(test_reconnecting_flood),
	    VT_OWN_DAEMON_TEST(test_client_events_keep_daemon_events),
	};
	return cmocka_run_group_tests_name("flood", tests, NULL, NULL);
}
