/*
 * test_vactl_top.c - vactl's live views against a daemon under load from a few clients:
 * vactl top in a real terminal (a private tmux server at 80x24, its pane captured) shows the
 * arenas, clients and latency panes without a wrapped line, quits on q and on Ctrl-C with the
 * terminal given back (stty after it); into a pipe it prints plain snapshots as wide as
 * $COLUMNS; vactl latency prints one line per operation per interval; --count 0 and negative
 * counts are usage errors of one sentence. Everything polls for what it needs.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "vtassert.h"

#define PAGE	4096u
#define WAIT_MS vt_timeout_ms(20000)
#define TMUX	"/usr/bin/tmux"

static const char *const arenas_conf = "[arena default]\n"
				       "size = 256M\n"
				       "\n"
				       "[arena a-rather-long-arena-name]\n"
				       "size = 16M\n";

/* The shared daemon and the clients loading it. */
struct fixture {
	struct vt_daemon d; /* first: see VT_GROUP_FIXTURE_SETUP */
	pthread_t busy[2];
	vad_client *hold;
	int stop; /* atomic */
	int ops;  /* atomic: alloc/free pairs done by the busy clients */
};

struct busy_arg {
	struct fixture *f;
	const char *name;
};

/* A client that allocates and frees one page at a time until told to stop. */
static void *busy_run(void *arg)
{
	struct busy_arg *a = arg;
	vad_client *c;
	if (vad_connect(a->f->d.socket_path, a->name, &c) != 0)
		return NULL;
	while (!__atomic_load_n(&a->f->stop, __ATOMIC_ACQUIRE)) {
		void *p;
		if (vad_alloc(c, PAGE, 0, &p) != 0 || vad_free(c, p) != 0)
			break;
		__atomic_add_fetch(&a->f->ops, 1, __ATOMIC_RELAXED);
	}
	vad_close(c);
	return NULL;
}

static struct busy_arg busy_args[2] = {{NULL, "loader-busy-1"}, {NULL, "loader-busy-2"}};

static int setup(void **state)
{
	if (VT_GROUP_FIXTURE_SETUP(state, struct fixture, NULL, arenas_conf))
		return -1;
	struct fixture *f = *state;
	/* one client holds 3 ranges of 16 KiB and does nothing else */
	if (vt_connect(&f->d, "loader-hold", &f->hold))
		return -1;
	for (int i = 0; i < 3; i++) {
		void *p;
		if (vad_alloc(f->hold, 4 * PAGE, 0, &p) != 0)
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		busy_args[i].f = f;
		if (pthread_create(&f->busy[i], NULL, busy_run, &busy_args[i]))
			return -1;
	}
	/* wait until both busy clients have done some work */
	for (uint64_t end = vt_now_ns() + (uint64_t)WAIT_MS * 1000000;
	     __atomic_load_n(&f->ops, __ATOMIC_RELAXED) < 100;) {
		if (vt_now_ns() > end) {
			fprintf(stderr, "the busy clients did no work\n");
			return -1;
		}
		vt_sleep_ms(10);
	}
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	if (f && f->hold) {
		__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < 2; i++)
			pthread_join(f->busy[i], NULL);
		vad_close(f->hold);
	}
	return vt_group_daemon_stop(state);
}

/* ---- a private tmux server -------------------------------------------------------- */

struct tmux {
	char sock[PATH_MAX], conf[PATH_MAX], exit_file[PATH_MAX], stty_file[PATH_MAX];
};

/* Run tmux -S SOCK -f CONF ARGS...; its output in *o (exit code checked by the caller). */
static void tmux_run(const struct tmux *t, struct vt_output *o, char **args)
{
	char *argv[32] = {TMUX, "-S", (char *)t->sock, "-f", (char *)t->conf};
	int n = 5;
	for (int i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(10000), o));
}

#define TMUX_RUN(t, o, ...) tmux_run((t), (o), (char *[]){__VA_ARGS__, NULL})

static bool file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* Start `vactl top` alone in an 80x24 pane; a shell around it writes its exit code and, after
 * it, `stty -a` (is the terminal back in line mode with echo?) to files. The shell traps
 * SIGINT so that Ctrl-C, sent to the pane's whole process group, ends vactl only. */
static void tmux_start_top(struct tmux *t, const struct vt_daemon *d)
{
	if (access(TMUX, X_OK) != 0)
		fail_msg("%s is missing (scripts/install-deps installs tmux)", TMUX);
	static int runs; /* a server of its own each time: one being killed may linger */
	snprintf(t->sock, sizeof(t->sock), "%s/tmux-%d.sock", d->dir, ++runs);
	snprintf(t->conf, sizeof(t->conf), "%s/tmux.conf", d->dir);
	snprintf(t->exit_file, sizeof(t->exit_file), "%s/top.exit", d->dir);
	snprintf(t->stty_file, sizeof(t->stty_file), "%s/top.stty", d->dir);
	unlink(t->exit_file);
	unlink(t->stty_file);
	FILE *f = fopen(t->conf, "w");
	assert_non_null(f);
	fputs("set -g default-terminal screen\nset -g status off\n", f);
	fclose(f);
	char vactl[PATH_MAX + 8], cmd[8 * PATH_MAX];
	snprintf(vactl, sizeof(vactl), "%s/vactl", vt_build_dir());
	snprintf(
	    cmd, sizeof(cmd),
	    "trap : INT; '%s' --socket '%s' top --interval 200ms; echo \"exit=$?\" > '%s.tmp'; "
	    "stty -a > '%s'; mv '%s.tmp' '%s'; sleep 60",
	    vactl, d->socket_path, t->exit_file, t->stty_file, t->exit_file, t->exit_file);
	struct vt_output o;
	TMUX_RUN(t, &o, "new-session", "-d", "-x", "80", "-y", "24", "-s", "top", "sh", "-c", cmd);
	VT_ASSERT_EXIT(&o, 0, "tmux new-session");
	vt_output_free(&o);
}

/* The pane as tmux shows it, wrapped rows joined (-J) so a line that wrapped shows whole. */
static char *tmux_capture(const struct tmux *t)
{
	struct vt_output o;
	TMUX_RUN(t, &o, "capture-pane", "-p", "-J", "-t", "top");
	VT_ASSERT_EXIT(&o, 0, "tmux capture-pane");
	free(o.err);
	return o.out;
}

static void tmux_stop(const struct tmux *t)
{
	struct vt_output o;
	TMUX_RUN(t, &o, "kill-server");
	vt_output_free(&o);
}

/* Wait for vactl in the pane to exit; require exit 0 and a terminal back in line mode. */
static void tmux_wait_exit(const struct tmux *t, const char *after)
{
	uint64_t end = vt_now_ns() + (uint64_t)WAIT_MS * 1000000;
	while (!file_exists(t->exit_file)) {
		if (vt_now_ns() > end) {
			char *pane = tmux_capture(t);
			tmux_stop(t);
			fail_msg("vactl top still runs %d ms after %s; the pane:\n%s", WAIT_MS,
				 after, pane);
		}
		vt_sleep_ms(50);
	}
	char buf[4096] = "";
	FILE *f = fopen(t->exit_file, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	if (strcmp(buf, "exit=0\n") != 0)
		fail_msg("vactl top after %s: %s", after, buf);
	f = fopen(t->stty_file, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	/* stty -a says "-icanon" and "-echo" while a program keeps the terminal in cbreak mode */
	if (strstr(buf, "-icanon") || strstr(buf, "-echo ") || !strstr(buf, "icanon") ||
	    !strstr(buf, " echo "))
		fail_msg("the terminal was not given back after %s: %s", after, buf);
}

/* Does pane have a line that starts with prefix? Its first such line in line (cap bytes). */
static bool find_line(const char *pane, const char *prefix, char *line, size_t cap)
{
	for (const char *p = pane; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (strncmp(p, prefix, strlen(prefix)) == 0) {
			snprintf(line, cap, "%.*s", (int)len, p);
			return true;
		}
		p = nl ? nl + 1 : NULL;
	}
	return false;
}

/* The last space-separated word of line, as a number. */
static double last_number(const char *line)
{
	const char *sp = strrchr(line, ' ');
	return atof(sp ? sp + 1 : line);
}

/* The frame is complete when every pane shows, the busy clients show a rate, and the latency
 * pane has alloc and free rows. */
static bool frame_complete(const char *pane)
{
	char line[256];
	if (!find_line(pane, "vad ", line, sizeof(line)) || !strstr(pane, "\nARENA ") ||
	    !find_line(pane, "default ", line, sizeof(line)) ||
	    !find_line(pane, "a-rather-long", line, sizeof(line)) || !strchr(line, '~') ||
	    !strstr(pane, "\nCLIENT ") || !find_line(pane, "loader-hold ", line, sizeof(line)))
		return false;
	for (int i = 0; i < 2; i++)
		if (!find_line(pane, busy_args[i].name, line, sizeof(line)) ||
		    last_number(line) <= 0)
			return false;
	return strstr(pane, "\nLATENCY ") && find_line(pane, "alloc ", line, sizeof(line)) &&
	       find_line(pane, "free ", line, sizeof(line));
}

static void check_fits(const char *pane, int cols, int rows)
{
	int n = 0;
	for (const char *p = pane; *p; n++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > (size_t)cols)
			fail_msg("line %d is %zu columns (wider than %d):\n%s", n + 1, len, cols,
				 pane);
		if (memchr(p, '\033', len))
			fail_msg("line %d holds an escape character:\n%s", n + 1, pane);
		if (!nl)
			break;
		p = nl + 1;
	}
	if (rows && n > rows)
		fail_msg("%d lines in a %d-row pane:\n%s", n, rows, pane);
}

static void test_top_tmux_q(void **state)
{
	struct fixture *f = *state;
	struct tmux t;
	tmux_start_top(&t, &f->d);
	char *pane = NULL;
	uint64_t end = vt_now_ns() + (uint64_t)WAIT_MS * 1000000;
	for (;;) {
		free(pane);
		pane = tmux_capture(&t);
		if (frame_complete(pane))
			break;
		if (vt_now_ns() > end || file_exists(t.exit_file)) {
			tmux_stop(&t);
			fail_msg("the pane never showed every pane with the load:\n%s", pane);
		}
		vt_sleep_ms(100);
	}
	check_fits(pane, 80, 24);
	/* the holder's row: 3 ranges, 48 KiB */
	char line[256];
	assert_true(find_line(pane, "loader-hold ", line, sizeof(line)));
	if (!strstr(line, " 3 ") || !strstr(line, "48 KiB"))
		fail_msg("loader-hold's row does not say 3 ranges, 48 KiB: %s\n%s", line, pane);
	free(pane);

	struct vt_output o;
	TMUX_RUN(&t, &o, "send-keys", "-t", "top", "q");
	VT_ASSERT_EXIT(&o, 0, "tmux send-keys q");
	vt_output_free(&o);
	tmux_wait_exit(&t, "q");
	tmux_stop(&t);
}

static void test_top_tmux_ctrl_c(void **state)
{
	struct fixture *f = *state;
	struct tmux t;
	tmux_start_top(&t, &f->d);
	char *pane = NULL;
	uint64_t end = vt_now_ns() + (uint64_t)WAIT_MS * 1000000;
	for (;;) {
		free(pane);
		pane = tmux_capture(&t);
		if (strstr(pane, "\nCLIENT "))
			break;
		if (vt_now_ns() > end) {
			tmux_stop(&t);
			fail_msg("vactl top never drew its clients pane:\n%s", pane);
		}
		vt_sleep_ms(100);
	}
	free(pane);
	struct vt_output o;
	TMUX_RUN(&t, &o, "send-keys", "-t", "top", "C-c");
	VT_ASSERT_EXIT(&o, 0, "tmux send-keys C-c");
	vt_output_free(&o);
	tmux_wait_exit(&t, "Ctrl-C");
	tmux_stop(&t);
}

/* Into a pipe: plain snapshots, no escape codes; with $COLUMNS set, no line wider. */
static void test_top_pipe(void **state)
{
	struct fixture *f = *state;
	struct vt_output o;
	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "top", "--interval", "200ms",
				     "--count", "2", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl top --count 2");
	check_fits(o.out, 1 << 20, 0);
	const char *second = strstr(o.out, "\n\nvad ");
	if (!second || strstr(second + 2, "\n\nvad ") || !strstr(second, "\nARENA ") ||
	    !strstr(second, "\nloader-hold ") || !strstr(second, "LARGEST FREE")) {
		vt_output_print("vactl top --count 2", &o);
		fail_msg("not two whole snapshots, all columns");
	}
	vt_output_free(&o);

	setenv("COLUMNS", "60", 1);
	int rc = vt_vactl(f->d.socket_path, NULL, &o, "top", "--count", "1", NULL);
	unsetenv("COLUMNS");
	assert_int_equal(0, rc);
	VT_ASSERT_EXIT(&o, 0, "COLUMNS=60 vactl top --count 1");
	check_fits(o.out, 60, 0);
	if (!strstr(o.out, "\nARENA ") || !strstr(o.out, "\nCLIENT ") ||
	    !strstr(o.out, "\na-rather-") || !strstr(o.out, "~ ")) {
		vt_output_print("COLUMNS=60 vactl top --count 1", &o);
		fail_msg("the panes are not all there at 60 columns");
	}
	vt_output_free(&o);
}

/* vactl --json top: the sessions (not vactl's own) with what they hold and their rates, and
 * the latency of the main operations over the samples, p50 <= p99 <= max. */
static void test_top_json(void **state)
{
	struct fixture *f = *state;
	struct vt_output o;
	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "--json", "top", "--interval",
				     "200ms", "--count", "2", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json top --count 2");
	struct json_object *js[4];
	int n = vt_json_lines(o.out, js, 4);
	if (n != 2)
		fail_msg("%d JSON lines for 2 samples: %s", n, o.out);
	struct json_object *sessions = vt_json_path(js[1], "sessions");
	assert_non_null(sessions);
	int busy = 0;
	bool hold = false;
	for (size_t i = 0; i < json_object_array_length(sessions); i++) {
		struct json_object *e = json_object_array_get_idx(sessions, i);
		const char *name = json_object_get_string(vt_json_path(e, "name"));
		double rate = json_object_get_double(vt_json_path(e, "requests_per_s"));
		uint64_t ranges = 0, bytes = 0;
		assert_int_equal(0, vt_json_u64(e, "held_ranges", &ranges));
		assert_int_equal(0, vt_json_u64(e, "held_bytes", &bytes));
		if (!strcmp(name, "vactl"))
			fail_msg("vactl lists its own session: %s", o.out);
		if (!strcmp(name, "loader-hold")) {
			hold = true;
			assert_int_equal(3, ranges);
			assert_int_equal(12 * PAGE, bytes);
		}
		busy += !strncmp(name, "loader-busy-", 12) && rate > 0;
	}
	if (!hold || busy != 2)
		fail_msg("not the holder and two busy sessions with rates: %s", o.out);
	uint64_t window = 0;
	assert_int_equal(0, vt_json_u64(js[1], "latency_window_ms", &window));
	assert_true(window > 0);
	struct json_object *lat = vt_json_path(js[1], "latency");
	assert_non_null(lat);
	bool alloc = false;
	for (size_t i = 0; i < json_object_array_length(lat); i++) {
		struct json_object *e = json_object_array_get_idx(lat, i);
		uint64_t c = 0, a = 0, b = 0, m = 0;
		assert_int_equal(0, vt_json_u64(e, "count", &c));
		assert_int_equal(0, vt_json_u64(e, "p50_ns", &a));
		assert_int_equal(0, vt_json_u64(e, "p99_ns", &b));
		assert_int_equal(0, vt_json_u64(e, "max_ns", &m));
		if (c && (!a || a > b || b > m))
			fail_msg("p50 %llu, p99 %llu, max %llu", (unsigned long long)a,
				 (unsigned long long)b, (unsigned long long)m);
		alloc |= c > 0 && !strcmp(json_object_get_string(vt_json_path(e, "op")), "alloc");
	}
	if (!alloc)
		fail_msg("no alloc requests in the latency window: %s", o.out);
	for (int i = 0; i < n; i++)
		json_object_put(js[i]);
	vt_output_free(&o);
}

/* A latency figure as vactl prints it: a number and a unit. */
static bool is_latency(const char *w)
{
	char *end;
	double v = strtod(w, &end);
	return v > 0 && (!strcmp(end, "ns") || !strcmp(end, "us") || !strcmp(end, "ms") ||
			 !strcmp(end, "s"));
}

/* vactl latency --count 2: a heading, then lines of TIME OP COUNT P50 P99 MAX ERRORS; the
 * busy clients' alloc and free show with requests and latencies; with --op one line per
 * interval; JSON: one line per interval with p50 <= p99 <= max. */
static void test_latency(void **state)
{
	struct fixture *f = *state;
	struct vt_output o;
	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "latency", "--interval", "200ms",
				     "--count", "2", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl latency --count 2");
	char *save, *line = strtok_r(o.out, "\n", &save);
	assert_non_null(line);
	char time_[16], op[32], count[32], p50[32], p99[32], max[32], errs[32], extra[8];
	if (sscanf(line, "%15s %31s %31s %31s %31s %31s %31s %7s", time_, op, count, p50, p99, max,
		   errs, extra) != 7 ||
	    strcmp(time_, "TIME") || strcmp(op, "OP") || strcmp(count, "COUNT") ||
	    strcmp(p50, "P50") || strcmp(p99, "P99") || strcmp(max, "MAX"))
		fail_msg("not the heading: %s", line);
	int allocs = 0, frees = 0;
	while ((line = strtok_r(NULL, "\n", &save))) {
		if (sscanf(line, "%15s %31s %31s %31s %31s %31s %31s %7s", time_, op, count, p50,
			   p99, max, errs, extra) != 7 ||
		    strlen(time_) != 8 || time_[2] != ':' || time_[5] != ':')
			fail_msg("not TIME OP COUNT P50 P99 MAX ERRORS: %s", line);
		bool ran = atoll(count) > 0;
		if (ran && (!is_latency(p50) || !is_latency(p99) || !is_latency(max)))
			fail_msg("latencies are not figures with units: %s", line);
		allocs += ran && !strcmp(op, "alloc");
		frees += ran && !strcmp(op, "free");
	}
	if (allocs != 2 || frees != 2)
		fail_msg("%d alloc and %d free lines with requests in 2 intervals", allocs, frees);
	vt_output_free(&o);

	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "latency", "--op", "share",
				     "--interval", "100ms", "--count", "2", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl latency --op share --count 2");
	int lines = 0;
	for (line = strtok_r(o.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (lines++ && (sscanf(line, "%15s %31s %31s", time_, op, count) != 3 ||
				strcmp(op, "share") || strcmp(count, "0")))
			fail_msg("not an idle share line: %s", line);
	assert_int_equal(3, lines);
	vt_output_free(&o);

	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "--json", "latency", "--interval",
				     "200ms", "--count", "2", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json latency --count 2");
	struct json_object *js[4];
	int n = vt_json_lines(o.out, js, 4);
	if (n != 2)
		fail_msg("%d JSON lines for 2 intervals: %s", n, o.out);
	for (int i = 0; i < n; i++) {
		struct json_object *ops = vt_json_path(js[i], "ops");
		assert_non_null(ops);
		bool alloc = false;
		for (size_t k = 0; k < json_object_array_length(ops); k++) {
			struct json_object *e = json_object_array_get_idx(ops, k);
			uint64_t c = 0, a = 0, b = 0, m = 0;
			assert_int_equal(0, vt_json_u64(e, "count", &c));
			assert_int_equal(0, vt_json_u64(e, "p50_ns", &a));
			assert_int_equal(0, vt_json_u64(e, "p99_ns", &b));
			assert_int_equal(0, vt_json_u64(e, "max_ns", &m));
			if (c && (!a || a > b || b > m))
				fail_msg("p50 %llu, p99 %llu, max %llu", (unsigned long long)a,
					 (unsigned long long)b, (unsigned long long)m);
			alloc |= c > 0 &&
				 !strcmp(json_object_get_string(vt_json_path(e, "op")), "alloc");
		}
		if (!alloc)
			fail_msg("interval %d has no alloc requests: %s", i + 1, o.out);
		json_object_put(js[i]);
	}
	vt_output_free(&o);

	assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, "latency", "--op", "nosuch",
				     "--count", "1", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl latency --op nosuch");
	if (!vt_contains(o.err, "unknown operation 'nosuch'") || !vt_contains(o.err, "alloc"))
		fail_msg("no sentence naming the daemon's operations: %s", o.err);
	vt_output_free(&o);
}

/* --count 0, negative or junk: exit 2, one sentence and the usage line, nothing on stdout. */
static void test_count_refused(void **state)
{
	struct fixture *f = *state;
	static const char *const cmds[] = {"top", "latency"};
	static const char *const counts[] = {"0", "-1", "-5", "x", "", "3x"};
	for (size_t c = 0; c < 2; c++)
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			struct vt_output o;
			assert_int_equal(0, vt_vactl(f->d.socket_path, NULL, &o, cmds[c], "--count",
						     counts[i], NULL));
			char what[64];
			snprintf(what, sizeof(what), "vactl %s --count '%s'", cmds[c], counts[i]);
			VT_ASSERT_EXIT(&o, 2, what);
			char want[64];
			snprintf(want, sizeof(want), "vactl: bad count '%s': ", counts[i]);
			if (strncmp(o.err, want, strlen(want)) != 0 || o.out[0] ||
			    !strstr(o.err, "\nUsage: vactl "))
				fail_msg("%s: stderr \"%s\", stdout \"%s\"", what, o.err, o.out);
			vt_output_free(&o);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_top_tmux_q), cmocka_unit_test(test_top_tmux_ctrl_c),
	    cmocka_unit_test(test_top_pipe),   cmocka_unit_test(test_top_json),
	    cmocka_unit_test(test_latency),    cmocka_unit_test(test_count_refused),
	};
	return cmocka_run_group_tests_name("vactl top and latency", tests, setup, teardown);
}
