/*
 * test_vactl.c - the admin CLI against a real daemon: status/arenas/stats/clients with
 * --json, exit codes (0 ok, 1 refused, 2 usage, 3 unreachable), counts agreeing with their
 * nouns, scripted sessions and one at a terminal (prompt, help),
 * ranges handed between vactl and libvad, purge/check/reload as root and as nobody.
 */
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "vtassert.h"

#define PAGE	     4096u
#define READ_TIMEOUT vt_timeout_ms(10000)

static const char *const arenas_conf = "[arena default]\n"
				       "size = 256M\n"
				       "\n"
				       "[arena small]\n"
				       "size = 16M\n"
				       "quantum = 64K\n";

VT_DAEMON_GROUP(group_setup, NULL, arenas_conf)

/* Run vactl --socket S --json ARGS..., require exit 0 and return the parsed document. */
#define VACTL_JSON(d, ...) vactl_json_ok((d), (char *[]){__VA_ARGS__, NULL})

static struct json_object *vactl_json_ok(const struct vt_daemon *d, char **args)
{
	char *argv[40];
	int n = 0;
	argv[n++] = "--socket";
	argv[n++] = (char *)d->socket_path;
	argv[n++] = "--json";
	for (int i = 0; args[i] && n < 39; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	struct vt_output o;
	assert_int_equal(0, vt_vactl_argv(argv, NULL, &o));
	char what[128];
	snprintf(what, sizeof(what), "vactl --json %s", args[0]);
	VT_ASSERT_EXIT(&o, 0, what);
	struct json_object *j = vt_json_parse(o.out);
	if (!j) {
		vt_output_print(what, &o);
		fail_msg("%s: stdout is not one JSON document", what);
	}
	vt_output_free(&o);
	return j;
}

/* The arena object named name in j's "arenas" array, or NULL. */
static struct json_object *arena_named(struct json_object *j, const char *name)
{
	struct json_object *arr = vt_json_path(j, "arenas");
	if (!arr || !json_object_is_type(arr, json_type_array))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *a = json_object_array_get_idx(arr, i);
		struct json_object *n = vt_json_path(a, "name");
		if (n && strcmp(json_object_get_string(n), name) == 0)
			return a;
	}
	return NULL;
}

static uint64_t ju64(struct json_object *j, const char *path)
{
	uint64_t v = 0;
	if (vt_json_u64(j, path, &v) != 0)
		fail_msg("no unsigned number at \"%s\" in %s", path, json_object_to_json_string(j));
	return v;
}

static bool jbool(struct json_object *j, const char *path)
{
	struct json_object *v = vt_json_path(j, path);
	if (!v || !json_object_is_type(v, json_type_boolean))
		fail_msg("no boolean at \"%s\" in %s", path, json_object_to_json_string(j));
	return json_object_get_boolean(v);
}

static const char *jstr(struct json_object *j, const char *path)
{
	struct json_object *v = vt_json_path(j, path);
	if (!v || !json_object_is_type(v, json_type_string))
		fail_msg("no string at \"%s\" in %s", path, json_object_to_json_string(j));
	return json_object_get_string(v);
}

/* ---- read-only commands -------------------------------------------------------- */

static void test_status(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "status", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl status");
	assert_true(vt_contains(o.out, "default"));
	assert_true(vt_contains(o.out, "small"));
	vt_output_free(&o);

	struct json_object *j = VACTL_JSON(d, "status");
	assert_true(vt_contains(jstr(j, "server"), "vad"));
	assert_true(vt_contains(jstr(j, "server"), VAD_VERSION_STRING));
	assert_string_equal("default", jstr(j, "default_arena"));
	assert_true(jbool(j, "admin")); /* root */
	assert_true(ju64(j, "clients") >= 1);
	struct json_object *a = arena_named(j, "default");
	assert_non_null(a);
	assert_int_equal(256u << 20, ju64(a, "size"));
	assert_non_null(arena_named(j, "small"));
	json_object_put(j);
}

static void test_arenas(void **state)
{
	struct vt_daemon *d = *state;
	struct json_object *j = VACTL_JSON(d, "arenas");
	struct json_object *a = arena_named(j, "small");
	assert_non_null(a);
	assert_int_equal(16u << 20, ju64(a, "size"));
	assert_int_equal(64u << 10, ju64(a, "quantum"));
	assert_true(jbool(a, "allowed"));
	assert_string_equal("memfd", jstr(a, "backing"));
	a = arena_named(j, "default");
	assert_non_null(a);
	assert_int_equal(PAGE, ju64(a, "quantum"));
	json_object_put(j);
}

static void test_stats_and_clients(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "vactl-test-peer", &c));
	void *p1, *p2;
	VT_ASSERT_OK(c, vad_alloc(c, 3 * PAGE, 0, &p1));
	VT_ASSERT_OK(c, vad_alloc_in(c, "small", 1, 0, &p2)); /* one 64K quantum */

	struct json_object *j = VACTL_JSON(d, "stats");
	assert_int_equal(3 * PAGE, ju64(arena_named(j, "default"), "busy_bytes"));
	assert_int_equal(64 * 1024, ju64(arena_named(j, "small"), "busy_bytes"));
	assert_int_equal(3 * PAGE + 64 * 1024, ju64(j, "totals.busy_bytes"));
	assert_true(ju64(arena_named(j, "default"), "allocs") >= 1);
	assert_true(ju64(j, "clients") >= 2); /* the peer and vactl */
	json_object_put(j);

	/* stats ARENA narrows it to one arena */
	j = VACTL_JSON(d, "stats", "small");
	assert_non_null(arena_named(j, "small"));
	assert_null(arena_named(j, "default"));
	json_object_put(j);

	j = VACTL_JSON(d, "clients");
	struct json_object *arr = vt_json_path(j, "clients");
	assert_non_null(arr);
	int peers = 0, selves = 0;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *ci = json_object_array_get_idx(arr, i);
		if (jbool(ci, "self"))
			selves++;
		if (strcmp(jstr(ci, "name"), "vactl-test-peer") != 0)
			continue;
		peers++;
		assert_int_equal(getpid(), ju64(ci, "pid"));
		assert_int_equal(getuid(), ju64(ci, "uid"));
		assert_int_equal(2, ju64(ci, "held_ranges"));
		assert_int_equal(3 * PAGE + 64 * 1024, ju64(ci, "held_bytes"));
	}
	assert_int_equal(1, peers);
	assert_int_equal(1, selves);
	json_object_put(j);

	VT_ASSERT_OK(c, vad_free(c, p1));
	VT_ASSERT_OK(c, vad_free(c, p2));
	vad_close(c);
}

/* Resident bytes: pages a client wrote show in stats (text and JSON, totals too) and top,
 * beside busy; pages only allocated do not. */
static void test_resident_bytes(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "resident", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "small", 8 * 64 * 1024, 0, &p));
	struct json_object *j = VACTL_JSON(d, "stats", "small");
	uint64_t before = ju64(arena_named(j, "small"), "resident_bytes");
	json_object_put(j);
	memset(p, 0x5a, 3 * 64 * 1024); /* 3 of the 8 quanta */
	j = VACTL_JSON(d, "stats");
	uint64_t after = ju64(arena_named(j, "small"), "resident_bytes");
	if (after < before + 3 * 64 * 1024)
		fail_msg("resident %llu after writing 192 KiB, %llu before",
			 (unsigned long long)after, (unsigned long long)before);
	assert_true(ju64(j, "totals.resident_bytes") >= after);
	json_object_put(j);

	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "stats", "small", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl stats small");
	char want[64];
	snprintf(want, sizeof(want), "  %llu (memory behind the file", (unsigned long long)after);
	if (!vt_contains(o.out, "  resident  ") || !vt_contains(o.out, want)) {
		vt_output_print("vactl stats small", &o);
		fail_msg("no resident line with %llu bytes", (unsigned long long)after);
	}
	vt_output_free(&o);

	assert_int_equal(0,
			 vt_vactl(d->socket_path, NULL, &o, "--json", "top", "--count", "1", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json top --count 1");
	j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_true(ju64(arena_named(j, "small"), "resident_bytes") >= 3 * 64 * 1024);
	json_object_put(j);
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "top", "--count", "1", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl top --count 1");
	assert_true(vt_contains(o.out, "RESIDENT"));
	vt_output_free(&o);

	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

/* ---- exit codes --------------------------------------------------------------- */

static void test_unreachable_socket(void **state)
{
	struct vt_output o;
	assert_int_equal(0, vt_vactl("/nonexistent/vad.sock", NULL, &o, "status", NULL));
	VT_ASSERT_EXIT(&o, 3, "vactl --socket /nonexistent/vad.sock status");
	/* A clear message: it names the socket it tried. */
	if (!vt_contains(o.err, "/nonexistent/vad.sock"))
		fail_msg("message does not name the socket: \"%s\"", o.err);
	vt_output_free(&o);

	assert_int_equal(0, vt_vactl("/nonexistent/vad.sock", NULL, &o, "--json", "stats", NULL));
	VT_ASSERT_EXIT(&o, 3, "vactl --json stats on a missing socket");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_string_equal("ECONNECT", jstr(j, "error"));
	assert_true(jstr(j, "message")[0] != '\0');
	json_object_put(j);
	vt_output_free(&o);
}

static void test_usage_errors(void **state)
{
	struct vt_daemon *d = *state;
	static const char *const bad[][3] = {
	    {"frobnicate", NULL, NULL},
	    {"alloc", NULL, NULL},
	    {"alloc", "banana", NULL},
	    {"stats", "a", "b"},
	    {"status", "--no-such-option", NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[8] = {"--socket", d->socket_path};
		int n = 2;
		for (int k = 0; k < 3 && bad[i][k]; k++)
			argv[n++] = (char *)bad[i][k];
		argv[n] = NULL;
		struct vt_output o;
		assert_int_equal(0, vt_vactl_argv(argv, NULL, &o));
		char what[128];
		snprintf(what, sizeof(what), "vactl %s %s", bad[i][0], bad[i][1] ? bad[i][1] : "");
		VT_ASSERT_EXIT(&o, 2, what);
		assert_true(o.err[0] != '\0');
		vt_output_free(&o);
	}
	/* Values no request could carry are usage errors too (2), each with its sentence,
	 * and never reach the daemon. */
	static const struct {
		const char *args[4];
		const char *says;
	} values[] = {
	    {{"alloc", "0"}, "vactl: size 0: a size must be positive"},
	    {{"alloc", "--", "-5"}, "vactl: size -5: a size must be positive"},
	    {{"alloc", "-5"}, "vactl: -5: must be positive"},
	    {{"alloc", "4K", "-5"}, "vactl: -5: must be positive"},
	    {{"alloc", "--align", "3", "4K"}, "vactl: --align 3: an alignment is a power of two"},
	    {{"alloc", "--align", "0", "4K"}, "vactl: --align 0: an alignment is a power of two"},
	};
	struct vt_output o;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char *argv[8] = {"--socket", d->socket_path};
		int n = 2;
		for (int k = 0; k < 4 && values[i].args[k]; k++)
			argv[n++] = (char *)values[i].args[k];
		argv[n] = NULL;
		assert_int_equal(0, vt_vactl_argv(argv, NULL, &o));
		VT_ASSERT_EXIT(&o, 2, values[i].says);
		if (strncmp(o.err, values[i].says, strlen(values[i].says)) != 0 ||
		    !vt_contains(o.err, "\nUsage: vactl alloc ") || o.out[0])
			fail_msg("expected \"%s\" and the usage line, got stderr \"%s\", stdout "
				 "\"%s\"",
				 values[i].says, o.err, o.out);
		vt_output_free(&o);
	}
	/* An alignment the arena cannot grant is the daemon's refusal (1). */
	assert_int_equal(0,
			 vt_vactl(d->socket_path, NULL, &o, "alloc", "--align", "1T", "4K", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl alloc --align 1T 4K");
	vt_output_free(&o);

	/* Refusals are 1: an arena that does not exist. */
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "stats", "nosuch", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl stats nosuch");
	assert_true(vt_contains(o.err, "nosuch"));
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--version", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --version");
	assert_true(vt_contains(o.out, VAD_VERSION_STRING));
	vt_output_free(&o);
}

/* Counts agree with their nouns: "in 1 block", "in 0 blocks", "1 client", never "1 blocks". */
static void test_plurals(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "plurals", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "small", 64 * 1024, 0, &p)); /* one busy block */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "stats", "small", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl stats small");
	int checked = 0;
	bool singular = vt_contains(o.out, " in 1 block");
	char *save = NULL;
	for (char *line = strtok_r(o.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *in = strstr(line, " in ");
		unsigned long long n;
		char noun[16], second[16] = "";
		if (!in || sscanf(in, " in %llu %15[a-z] %15[a-z]", &n, noun, second) < 2)
			continue;
		checked++;
		/* "in 1 block", "in 3 blocks", "in 1 release call", "in 0 release calls" */
		const char *word = strcmp(noun, "release") == 0 ? second : noun;
		bool plural = word[0] && word[strlen(word) - 1] == 's';
		if (plural != (n != 1))
			fail_msg("a count and its noun disagree: \"%s\"", line);
	}
	VT_ASSERT_OK(c, vad_free(c, p));
	/* busy, free, lazy, pooled, release calls; the one busy block is singular */
	if (checked < 5 || !singular)
		fail_msg("%d counted lines, singular %d", checked, singular);
	vt_output_free(&o);
	vad_close(c);
}

/* ---- alloc and session ---------------------------------------------------------- */

static void test_alloc_command(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	struct json_object *j = VACTL_JSON(d, "alloc", "4K", "10000", "1M");
	struct json_object *ranges = vt_json_path(j, "ranges");
	assert_non_null(ranges);
	assert_int_equal(3, json_object_array_length(ranges));
	assert_int_equal(4096, ju64(j, "ranges.0.size"));
	assert_int_equal(12288, ju64(j, "ranges.1.size"));
	assert_int_equal(10000, ju64(j, "ranges.1.requested"));
	assert_int_equal(1u << 20, ju64(j, "ranges.2.size"));
	assert_string_equal("default", jstr(j, "ranges.0.arena"));
	json_object_put(j);
	/* vactl freed them on exit */
	assert_int_equal(0,
			 vt_wait_busy(d, base.busy_bytes, UINT32_MAX, vt_timeout_ms(1000), NULL));
}

static void test_session_script(void **state)
{
	struct vt_daemon *d = *state;
	const char *script = "# a comment, then a blank line\n"
			     "\n"
			     "alloc 64K\n"
			     "write #1 hello from vactl\n"
			     "read #1 16\n"
			     "share #1\n"
			     "alloc 4K 64K\n"
			     "read #2 64\n"
			     "stats\n"
			     "free #1\n"
			     "free #2\n"
			     "stats\n"
			     "quit\n"
			     "alloc 4K\n"; /* after quit: never run */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, script, &o, "--json", "session", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json session");
	struct json_object *lines[16];
	int n = vt_json_lines(o.out, lines, 16);
	if (n != 11) {
		vt_output_print("vactl --json session", &o);
		fail_msg("%d result lines, expected 11 (quit has one too)", n);
	}
	for (int i = 0; i < n; i++)
		if (!jbool(lines[i], "ok"))
			fail_msg("line %d failed: %s", i, json_object_to_json_string(lines[i]));
	assert_string_equal("alloc", jstr(lines[0], "cmd"));
	assert_int_equal(1, ju64(lines[0], "index"));
	assert_int_equal(64 * 1024, ju64(lines[0], "size"));
	assert_int_equal(16, ju64(lines[1], "bytes"));
	assert_string_equal("hello from vactl", jstr(lines[2], "text"));
	assert_false(jbool(lines[2], "zero"));
	assert_int_equal(VAD_TOKEN_LEN, strlen(jstr(lines[3], "token")));
	assert_int_equal(2, ju64(lines[4], "index"));
	assert_int_equal(PAGE, ju64(lines[4], "size"));
	/* a fresh range reads as zeros */
	assert_true(jbool(lines[5], "zero"));
	assert_int_equal(64 * 1024 + PAGE, ju64(lines[6], "held_bytes"));
	assert_string_equal("free", jstr(lines[7], "cmd"));
	assert_int_equal(0, ju64(lines[9], "held_bytes"));
	assert_string_equal("quit", jstr(lines[10], "cmd"));
	for (int i = 0; i < n; i++)
		json_object_put(lines[i]);
	/* piped input: no prompt, no greeting, so scripts read only result lines */
	assert_string_equal(o.err, "");
	vt_output_free(&o);

	/* help lists every command, as text and as JSON */
	assert_int_equal(0, vt_vactl(d->socket_path, "help\n", &o, "session", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl session: help");
	static const char *const cmds[] = {"alloc SIZE",   "free OFFSET", "share ",  "unshare ",
					   "attach TOKEN", "write #N",	  "read #N", "stats",
					   "sleep ",	   "help",	  "quit"};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!vt_contains(o.out, cmds[i]))
			fail_msg("help does not list \"%s\":\n%s", cmds[i], o.out);
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, "help\n", &o, "--json", "session", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json session: help");
	struct json_object *h = NULL;
	assert_int_equal(1, vt_json_lines(o.out, &h, 1));
	assert_true(jbool(h, "ok"));
	assert_int_equal(sizeof(cmds) / sizeof(cmds[0]),
			 json_object_array_length(vt_json_path(h, "commands")));
	json_object_put(h);
	vt_output_free(&o);
}

/* At a terminal (a pseudo-terminal here) the session greets, prompts before each command
 * on stderr, and its help answers. */
static void test_session_prompt_on_terminal(void **state)
{
	struct vt_daemon *d = *state;
	int master, slave;
	assert_int_equal(0, openpty(&master, &slave, NULL, NULL, NULL));
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setsid();
		dup2(slave, STDIN_FILENO);
		dup2(slave, STDOUT_FILENO);
		dup2(slave, STDERR_FILENO);
		close(master);
		close(slave);
		execl(bin, "vactl", "--socket", d->socket_path, "session", (char *)NULL);
		_exit(127);
	}
	close(slave);
	static const char input[] = "help\nalloc 4K\nquit\n";
	assert_int_equal((ssize_t)strlen(input), write(master, input, strlen(input)));
	char out[16384];
	size_t len = 0;
	for (;;) { /* until vactl exits and the pty reports EIO (bounded by the harness) */
		struct pollfd pfd = {.fd = master, .events = POLLIN};
		if (poll(&pfd, 1, READ_TIMEOUT) <= 0)
			break;
		ssize_t n = read(master, out + len, sizeof(out) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(master);
	int status;
	assert_int_equal(pid, waitpid(pid, &status, 0));
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("vactl session on a terminal: status %d:\n%s", status, out);
	/* three prompts were answered: help, alloc and quit */
	int prompts = 0;
	for (const char *p = out; (p = strstr(p, "vad> ")); p++)
		prompts++;
	if (prompts < 3 || !vt_contains(out, "'help' lists them") ||
	    !vt_contains(out, "alloc SIZE [ALIGN]") || !vt_contains(out, "#1 arena=default"))
		fail_msg("%d prompts; the terminal shows:\n%s", prompts, out);
}

static void test_session_errors_continue(void **state)
{
	struct vt_daemon *d = *state;
	const char *script = "free 12345\n"	 /* never held: refused */
			     "attach nonsense\n" /* bad token: refused */
			     "alloc 4K\n"	 /* still works */
			     "free #1\n";
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, script, &o, "--json", "session", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl --json session with refused commands");
	struct json_object *lines[8];
	int n = vt_json_lines(o.out, lines, 8);
	assert_int_equal(4, n);
	assert_false(jbool(lines[0], "ok"));
	assert_string_equal("ENOTHELD", jstr(lines[0], "error"));
	assert_false(jbool(lines[1], "ok"));
	assert_string_equal("ETOKEN", jstr(lines[1], "error"));
	assert_true(jbool(lines[2], "ok"));
	assert_true(jbool(lines[3], "ok"));
	for (int i = 0; i < n; i++)
		json_object_put(lines[i]);
	vt_output_free(&o);

	/* Malformed commands are usage errors (2), and outrank refusals. */
	assert_int_equal(
	    0, vt_vactl(d->socket_path, "free 12345\nfrobnicate\nalloc\n", &o, "session", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl session with malformed commands");
	vt_output_free(&o);
}

/* libvad writes and shares; a vactl session attaches and reads the same bytes. */
static void test_session_attaches_libvad_range(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "sharer", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	strcpy(p, "written by libvad");
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));
	char script[256];
	snprintf(script, sizeof(script), "attach %s\nread #1 17\nwrite #1 VACTL\nfree #1\n", token);
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, script, &o, "--json", "session", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl session attach");
	struct json_object *lines[8];
	assert_int_equal(4, vt_json_lines(o.out, lines, 8));
	assert_int_equal(PAGE, ju64(lines[0], "size"));
	assert_string_equal("written by libvad", jstr(lines[1], "text"));
	for (int i = 0; i < 4; i++)
		json_object_put(lines[i]);
	vt_output_free(&o);
	/* vactl's write (text plus a terminating NUL) landed in the same memory */
	assert_string_equal("VACTL", (char *)p);
	assert_string_equal("by libvad", (char *)p + 8);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

/* vactl allocates, shares and holds; libvad attaches while vactl runs. */
static void test_libvad_attaches_vactl_range(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_proc proc;
	assert_int_equal(
	    0, vt_proc_vactl(&proc, "--socket", d->socket_path, "--json", "session", NULL));
	assert_int_equal(0, vt_proc_write(&proc, "alloc 8K\nwrite #1 from a vactl session\n"
						 "share #1\n"));
	struct json_object *alloc = vt_proc_read_json(&proc, READ_TIMEOUT);
	struct json_object *wrote = vt_proc_read_json(&proc, READ_TIMEOUT);
	struct json_object *share = vt_proc_read_json(&proc, READ_TIMEOUT);
	assert_non_null(alloc);
	assert_non_null(wrote);
	assert_non_null(share);
	char token[VAD_TOKEN_LEN + 1];
	snprintf(token, sizeof(token), "%s", jstr(share, "token"));
	uint64_t offset = ju64(alloc, "offset");

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "attacher", &c));
	void *q;
	size_t size;
	VT_ASSERT_OK(c, vad_attach(c, token, &q, &size));
	assert_int_equal(8192, size);
	assert_string_equal("from a vactl session", (char *)q);
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, q, &r));
	assert_int_equal(offset, r.offset);

	/* vactl ends its session: the range stays, since libvad holds it now. */
	assert_int_equal(0, vt_proc_finish(&proc, READ_TIMEOUT, NULL));
	assert_string_equal("from a vactl session", (char *)q);
	assert_int_equal(8192, vad_size(c, q));
	VT_ASSERT_OK(c, vad_free(c, q));
	vad_close(c);
	json_object_put(alloc);
	json_object_put(wrote);
	json_object_put(share);
}

/* vactl alloc --share --hold: another process attaches while vactl holds; SIGTERM ends
 * the hold cleanly and the attacher keeps the range. */
static void test_alloc_share_hold(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_proc proc;
	assert_int_equal(0, vt_proc_vactl(&proc, "--socket", d->socket_path, "--json", "alloc",
					  "8K", "--share", "--hold", "forever", NULL));
	struct json_object *j = vt_proc_read_json(&proc, READ_TIMEOUT);
	if (!j) {
		vt_proc_finish(&proc, READ_TIMEOUT, NULL);
		fail_msg("vactl alloc --share --hold printed no JSON");
	}
	char token[VAD_TOKEN_LEN + 1];
	snprintf(token, sizeof(token), "%s", jstr(j, "ranges.0.token"));
	uint64_t offset = ju64(j, "ranges.0.offset");
	json_object_put(j);
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "attacher", &c));
	void *q;
	size_t size;
	VT_ASSERT_OK(c, vad_attach(c, token, &q, &size));
	assert_int_equal(8192, size);
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, q, &r));
	assert_int_equal(offset, r.offset);
	assert_int_equal(0, kill(proc.pid, SIGTERM));
	int code = vt_proc_finish(&proc, READ_TIMEOUT, NULL);
	assert_int_equal(0, code);
	/* vactl let go; the attacher still holds it */
	assert_int_equal(8192, vad_size(c, q));
	struct vad_stats st;
	assert_int_equal(0, vt_wait_busy(d, 8192, UINT32_MAX, vt_timeout_ms(2000), &st));
	VT_ASSERT_OK(c, vad_free(c, q));
	vad_close(c);
}

/* ---- admin commands ------------------------------------------------------------- */

static void test_admin_as_root(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	static const char *const cmds[][2] = {
	    {"purge", NULL},  {"purge", "small"}, {"check", NULL},
	    {"reload", NULL}, {"clients", NULL},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *argv[6] = {"--socket", d->socket_path, (char *)cmds[i][0], (char *)cmds[i][1],
				 NULL};
		assert_int_equal(0, vt_vactl_argv(argv, NULL, &o));
		VT_ASSERT_EXIT(&o, 0, cmds[i][0]);
		/* What a person reads: the daemon's own sentence once ("reloaded ...", not
		 * "reloaded: reloaded ..."), and a count agreeing with its noun. */
		if (strcmp(cmds[i][0], "reload") == 0 &&
		    (strncmp(o.out, "reloaded ", 9) != 0 || vt_contains(o.out, "reloaded: ")))
			fail_msg("vactl reload says \"%s\"", o.out);
		const char *counts = strstr(o.out, " (");
		unsigned n_sessions;
		char noun[16];
		if (strcmp(cmds[i][0], "check") == 0 &&
		    (!counts || sscanf(counts, " (%u %15[a-z]", &n_sessions, noun) != 2 ||
		     strcmp(noun, n_sessions == 1 ? "session" : "sessions") != 0))
			fail_msg("vactl check says \"%s\": a count and its noun disagree", o.out);
		vt_output_free(&o);
	}
	struct json_object *j = VACTL_JSON(d, "check");
	assert_true(jbool(j, "ok"));
	json_object_put(j);
	j = VACTL_JSON(d, "purge");
	ju64(j, "released_bytes");
	json_object_put(j);
	j = VACTL_JSON(d, "reload");
	assert_true(jbool(j, "reloaded"));
	json_object_put(j);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "purge", "nosuch", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl purge nosuch");
	vt_output_free(&o);
}

static void test_admin_as_nobody(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: switching to uid nobody needs root\n");
		skip();
	}
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
	static const char *const admin[] = {"purge", "reload", "check", "clients", "map"};
	for (size_t i = 0; i < sizeof(admin) / sizeof(admin[0]); i++) {
		char *argv[] = {bin, "--socket", d->socket_path, "--json", (char *)admin[i], NULL};
		struct vt_output o;
		assert_int_equal(0, vt_run_as_nobody(argv, NULL, vt_timeout_ms(20000), &o));
		VT_ASSERT_EXIT(&o, 1, admin[i]);
		struct json_object *j = vt_json_parse(o.out);
		assert_non_null(j);
		assert_string_equal("EPERM", jstr(j, "error"));
		json_object_put(j);
		vt_output_free(&o);
	}
	/* Read-only commands work for anyone who can reach the socket. */
	char *argv[] = {bin, "--socket", d->socket_path, "--json", "status", NULL};
	struct vt_output o;
	assert_int_equal(0, vt_run_as_nobody(argv, NULL, vt_timeout_ms(20000), &o));
	VT_ASSERT_EXIT(&o, 0, "status as nobody");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_false(jbool(j, "admin"));
	json_object_put(j);
	vt_output_free(&o);
}

/* ---- top, history, timeouts ----------------------------------------------------- */

struct churner {
	const char *socket_path;
	int stop; /* atomic */
	int ops;
};

static void *churner_run(void *arg)
{
	struct churner *ch = arg;
	vad_client *c;
	if (vad_connect(ch->socket_path, "top-churner", &c) != 0)
		return NULL;
	while (!__atomic_load_n(&ch->stop, __ATOMIC_ACQUIRE)) {
		void *p;
		if (vad_alloc(c, PAGE, 0, &p) != 0 || vad_free(c, p) != 0)
			break;
		ch->ops++;
	}
	vad_close(c);
	return NULL;
}

static void test_top(void **state)
{
	struct vt_daemon *d = *state;
	struct churner ch = {.socket_path = d->socket_path};
	pthread_t t;
	assert_int_equal(0, pthread_create(&t, NULL, churner_run, &ch));
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "top", "--interval",
				     "200ms", "--count", "3", NULL));
	__atomic_store_n(&ch.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	VT_ASSERT_EXIT(&o, 0, "vactl --json top --count 3");
	struct json_object *lines[8];
	int n = vt_json_lines(o.out, lines, 8);
	if (n != 3) {
		vt_output_print("vactl --json top", &o);
		fail_msg("%d samples, expected 3", n);
	}
	uint64_t rate = 0;
	for (int i = 0; i < n; i++) {
		struct json_object *a = arena_named(lines[i], "default");
		assert_non_null(a);
		if (i > 0)
			rate += ju64(a, "allocs_per_s");
		ju64(lines[i], "interval_ms");
	}
	/* a client allocated the whole time, so the later samples show a rate */
	assert_true(ch.ops > 0);
	assert_true(rate > 0);
	for (int i = 0; i < n; i++)
		json_object_put(lines[i]);
	vt_output_free(&o);
}

/* A socket that accepts connections and never answers. */
static void test_timeout_on_silent_daemon(void **state)
{
	struct vt_daemon *d = *state;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/silent.sock", d->dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_int_equal(0, bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	assert_int_equal(0, listen(fd, 8));
	struct vt_output o;
	assert_int_equal(0, vt_vactl(path, NULL, &o, "--timeout", "300ms", "status", NULL));
	VT_ASSERT_EXIT(&o, 3, "vactl --timeout 300ms status on a silent socket");
	assert_true(o.err[0] != '\0');
	vt_output_free(&o);
	close(fd);
	unlink(path);
}

/* The kinds of the events vactl history lists (newest first, or oldest first), joined by
 * spaces; the detail of the first event of kind want_detail into detail (if not NULL). */
static void history_events(const struct vt_daemon *d, bool oldest_first, char *out, size_t len,
			   const char *want_detail, char *detail, size_t detail_len)
{
	struct vt_output o;
	assert_int_equal(0,
			 vt_vactl(NULL, NULL, &o, "--json", "history", "--db", d->stats_db,
				  "--since", "all", oldest_first ? "--oldest-first" : NULL, NULL));
	out[0] = '\0';
	if (detail)
		detail[0] = '\0';
	struct json_object *j = o.exit_code == 0 ? vt_json_parse(o.out) : NULL;
	struct json_object *events = j ? vt_json_path(j, "events") : NULL;
	for (size_t i = 0; events && i < json_object_array_length(events); i++) {
		struct json_object *e = json_object_array_get_idx(events, i);
		const char *kind = jstr(e, "kind");
		size_t used = strlen(out);
		snprintf(out + used, len - used, "%s%s", used ? " " : "", kind);
		if (detail && !detail[0] && want_detail && strcmp(kind, want_detail) == 0)
			snprintf(detail, detail_len, "%s", jstr(e, "detail"));
	}
	if (j)
		json_object_put(j);
	vt_output_free(&o);
}

/* Whether vactl history on d's database has a snapshot whose default arena shows
 * busy and resident bytes of at least want each. */
static bool history_has_snapshot(const struct vt_daemon *d, uint64_t want)
{
	struct vt_output o;
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "--json", "history", "--db", d->stats_db,
				     "--since", "all", NULL));
	struct json_object *j = o.exit_code == 0 ? vt_json_parse(o.out) : NULL;
	struct json_object *snaps = j ? vt_json_path(j, "snapshots") : NULL;
	bool seen = false;
	for (size_t i = 0; snaps && i < json_object_array_length(snaps) && !seen; i++) {
		struct json_object *a = arena_named(json_object_array_get_idx(snaps, i), "default");
		seen = a && ju64(a, "busy_bytes") >= want && ju64(a, "resident_bytes") >= want;
	}
	if (j)
		json_object_put(j);
	vt_output_free(&o);
	return seen;
}

static void history_kinds(const struct vt_daemon *d, char *out, size_t len)
{
	history_events(d, false, out, len, NULL, NULL, 0);
}

/* A vad killed with SIGKILL never writes its stop: the next start says it ended uncleanly,
 * so the history does not read "start, start". */
static void test_history_unclean_stop(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "stats_interval = 100ms\n", NULL));
	char kinds[512];
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	/* Its start and a first snapshot are on disk (the snapshot follows the start event: an
	 * unclean stop is dated at the last snapshot, and none is recorded without one). */
	do {
		history_kinds(d, kinds, sizeof(kinds));
		if (vt_contains(kinds, "start") && history_has_snapshot(d, 0))
			break;
		vt_sleep_ms(20);
	} while (vt_now_ns() < deadline);
	assert_string_equal("start", kinds);
	assert_true(history_has_snapshot(d, 0));
	pid_t killed = d->pid;
	assert_int_equal(0, vt_daemon_signal(d, SIGKILL));
	while (vt_daemon_alive(d))
		assert_true(vt_now_ns() < deadline);
	assert_int_equal(0, vt_daemon_start(d));
	do {
		history_kinds(d, kinds, sizeof(kinds));
		if (!vt_contains(kinds, "unclean-stop"))
			vt_sleep_ms(20);
	} while (!vt_contains(kinds, "unclean-stop") && vt_now_ns() < deadline);
	assert_int_equal(0, vt_daemon_stop(d));
	history_kinds(d, kinds, sizeof(kinds));
	assert_string_equal("stop start unclean-stop start", kinds);
	/* the unclean stop names the killed pid and says what it means; the stop its signal */
	char detail[512], want[64];
	history_events(d, true, kinds, sizeof(kinds), "unclean-stop", detail, sizeof(detail));
	assert_string_equal("start unclean-stop start stop", kinds);
	snprintf(want, sizeof(want), "pid %ld;", (long)killed);
	if (!vt_contains(detail, "no stop recorded: the daemon was killed or crashed") ||
	    !vt_contains(detail, want) || !vt_contains(detail, "last snapshot 2"))
		fail_msg("the unclean-stop event says \"%s\"", detail);
	history_events(d, false, kinds, sizeof(kinds), "stop", detail, sizeof(detail));
	if (!vt_contains(detail, "SIGTERM"))
		fail_msg("the stop event says \"%s\", not SIGTERM", detail);
}

static void test_history(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "stats_interval = 200ms\n", NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "history", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 5 * PAGE, 0, &p));
	memset(p, 1, 5 * PAGE); /* resident while held */
	/* Held until a periodic snapshot has recorded it. */
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (!history_has_snapshot(d, 5 * PAGE)) {
		if (vt_now_ns() > deadline)
			fail_msg("no snapshot of the 5 held pages in %s", d->stats_db);
		vt_sleep_ms(50);
	}
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));

	/* The daemon is gone; history reads the file. */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "--json", "history", "--db", d->stats_db,
				     "--since", "all", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json history");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	struct json_object *snaps = vt_json_path(j, "snapshots");
	assert_non_null(snaps);
	size_t n = json_object_array_length(snaps);
	assert_true(n >= 2);
	uint64_t max_busy = 0, max_resident = 0;
	bool final = false;
	for (size_t i = 0; i < n; i++) {
		struct json_object *snap = json_object_array_get_idx(snaps, i);
		struct json_object *a = arena_named(snap, "default");
		assert_non_null(a);
		uint64_t b = ju64(a, "busy_bytes");
		if (b > max_busy)
			max_busy = b;
		uint64_t r = ju64(a, "resident_bytes");
		if (r > max_resident)
			max_resident = r;
		final |= jbool(snap, "final");
	}
	assert_int_equal(5 * PAGE, max_busy);
	assert_int_equal(5 * PAGE, max_resident);
	assert_true(final);
	struct json_object *events = vt_json_path(j, "events");
	assert_non_null(events);
	bool start = false, stop = false;
	for (size_t i = 0; i < json_object_array_length(events); i++) {
		const char *kind = jstr(json_object_array_get_idx(events, i), "kind");
		start |= strcmp(kind, "start") == 0;
		stop |= strcmp(kind, "stop") == 0;
	}
	assert_true(start && stop);
	/* newest first, and the stop says why */
	for (size_t i = 1; i < json_object_array_length(events); i++)
		assert_true(ju64(json_object_array_get_idx(events, i - 1), "ts_ms") >=
			    ju64(json_object_array_get_idx(events, i), "ts_ms"));
	for (size_t i = 0; i < json_object_array_length(events); i++) {
		struct json_object *e = json_object_array_get_idx(events, i);
		if (strcmp(jstr(e, "kind"), "stop") == 0 &&
		    !vt_contains(jstr(e, "detail"), "SIGTERM (systemctl stop, or kill) after"))
			fail_msg("the stop event says \"%s\", not why", jstr(e, "detail"));
	}
	struct json_object *lifetime = vt_json_path(j, "lifetime");
	assert_non_null(lifetime);
	bool seen = false;
	for (size_t i = 0; i < json_object_array_length(lifetime); i++) {
		struct json_object *l = json_object_array_get_idx(lifetime, i);
		if (strcmp(jstr(l, "name"), "default") == 0) {
			seen = true;
			assert_true(ju64(l, "allocs") >= 1);
		}
	}
	assert_true(seen);
	/* snapshots newest first too; --oldest-first turns both lists around */
	for (size_t i = 1; i < n; i++)
		assert_true(ju64(json_object_array_get_idx(snaps, i - 1), "ts_ms") >=
			    ju64(json_object_array_get_idx(snaps, i), "ts_ms"));
	json_object_put(j);
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "--json", "history", "--db", d->stats_db,
				     "--since", "all", "--oldest-first", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json history --oldest-first");
	j = vt_json_parse(o.out);
	assert_non_null(j);
	snaps = vt_json_path(j, "snapshots");
	events = vt_json_path(j, "events");
	assert_true(json_object_array_length(snaps) >= 2 && json_object_array_length(events) >= 2);
	for (size_t i = 1; i < json_object_array_length(snaps); i++)
		assert_true(ju64(json_object_array_get_idx(snaps, i - 1), "ts_ms") <=
			    ju64(json_object_array_get_idx(snaps, i), "ts_ms"));
	assert_string_equal("start", jstr(json_object_array_get_idx(events, 0), "kind"));
	assert_string_equal(
	    "stop",
	    jstr(json_object_array_get_idx(events, json_object_array_length(events) - 1), "kind"));
	json_object_put(j);
	vt_output_free(&o);

	/* the text table has the column, and latencies in people's units: never 4+ digits of ns */
	assert_int_equal(
	    0, vt_vactl(NULL, NULL, &o, "history", "--db", d->stats_db, "--since", "all", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl history");
	for (const char *at = strstr(o.out, "ns"); at; at = strstr(at + 1, "ns"))
		if (at - o.out >= 4 && strspn(at - 4, "0123456789") >= 4)
			fail_msg("vactl history printed raw nanoseconds:\n%s", o.out);
	assert_true(vt_contains(o.out, "us") || vt_contains(o.out, "ms"));
	assert_true(vt_contains(o.out, "events (newest first)"));
	vt_output_free(&o);

	/* the text table has the column */
	assert_int_equal(
	    0, vt_vactl(NULL, NULL, &o, "history", "--db", d->stats_db, "--since", "all", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl history");
	assert_true(vt_contains(o.out, "RESIDENT"));
	assert_true(vt_contains(o.out, "20 KiB"));
	vt_output_free(&o);

	/* a database that is not there: exit 1 */
	assert_int_equal(
	    0, vt_vactl(NULL, NULL, &o, "history", "--db", "/nonexistent/stats.db", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl history --db /nonexistent/stats.db");
	vt_output_free(&o);
}

/* vactl map: the walk shows exactly the ranges a client holds, in address order,
 * covering the arena; the SVG is written; the terminal picture shows busy cells. */
static void test_map(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "mapped", &c));
	assert_int_equal(0, vt_purge(d));
	static const size_t sizes[] = {64u << 10, 256u << 10, 1u << 20};
	void *p[3];
	uint64_t offsets[3];
	for (int i = 0; i < 3; i++) {
		VT_ASSERT_OK(c, vad_alloc_in(c, "small", sizes[i], 0, &p[i]));
		struct vad_range r;
		VT_ASSERT_OK(c, vad_range_info(c, p[i], &r));
		offsets[i] = r.offset;
	}
	char svg[PATH_MAX];
	snprintf(svg, sizeof(svg), "%s/map.svg", d->dir);
	struct json_object *j = VACTL_JSON(d, "map", "small", "--blocks", "--svg", svg);
	assert_string_equal("small", jstr(j, "arena"));
	assert_int_equal(16u << 20, ju64(j, "size"));
	assert_int_equal((64u << 10) + (256u << 10) + (1u << 20), ju64(j, "busy_bytes"));
	assert_int_equal(3, ju64(j, "busy_blocks"));
	assert_false(jbool(j, "truncated"));
	struct json_object *blocks = vt_json_path(j, "blocks");
	assert_non_null(blocks);
	size_t n = json_object_array_length(blocks);
	assert_int_equal(ju64(j, "n_blocks"), n);
	uint64_t next = 0;
	int busy_seen = 0;
	for (size_t i = 0; i < n; i++) {
		struct json_object *b = json_object_array_get_idx(blocks, i);
		uint64_t off = ju64(b, "offset"), size = ju64(b, "size");
		/* address order, no gaps, no overlap */
		if (off != next)
			fail_msg("block %zu at %llu, expected %llu", i, (unsigned long long)off,
				 (unsigned long long)next);
		next = off + size;
		if (strcmp(jstr(b, "kind"), "busy") == 0) {
			int k;
			for (k = 0; k < 3; k++)
				if (offsets[k] == off && sizes[k] == size)
					break;
			if (k == 3)
				fail_msg("busy block at %llu (%llu bytes) is not one of ours",
					 (unsigned long long)off, (unsigned long long)size);
			busy_seen++;
		}
	}
	assert_int_equal(16u << 20, next);
	assert_int_equal(3, busy_seen);
	json_object_put(j);
	FILE *f = fopen(svg, "r");
	if (!f)
		fail_msg("vactl map --svg did not write %s", svg);
	char head[256] = "";
	size_t got = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[got] = '\0';
	assert_true(vt_contains(head, "<svg"));

	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "map", "small", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl map small");
	assert_true(strchr(o.out, '#') != NULL);
	vt_output_free(&o);
	for (int i = 0; i < 3; i++)
		VT_ASSERT_OK(c, vad_free(c, p[i]));
	vad_close(c);
}

static void test_shared_daemon_stops(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- the daemon dies under a session ------------------------------------------- */

static void test_daemon_dies_mid_session(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	struct vt_proc proc;
	assert_int_equal(0, vt_proc_vactl(&proc, "--socket", d->socket_path, "session", NULL));
	assert_int_equal(0, vt_proc_write(&proc, "alloc 4K\n"));
	char line[512];
	assert_true(vt_proc_read_line(&proc, line, sizeof(line), READ_TIMEOUT) > 0);
	assert_true(vt_contains(line, "#1"));
	/* kill -9: no goodbye, the connection just breaks */
	assert_int_equal(0, vt_daemon_signal(d, SIGKILL));
	assert_int_equal(0, waitpid(d->pid, NULL, 0) == d->pid ? 0 : -1);
	d->pid = 0;
	assert_int_equal(0, vt_proc_write(&proc, "alloc 4K\nalloc 4K\n"));
	struct vt_output o;
	int code = vt_proc_finish(&proc, READ_TIMEOUT, &o);
	if (code != 3) {
		vt_output_print("vactl session after the daemon died", &o);
		fail_msg("vactl session exited %d after the daemon died, expected 3", code);
	}
	vt_output_free(&o);
	/* and a new vactl says the daemon is unreachable */
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "status", NULL));
	VT_ASSERT_EXIT(&o, 3, "vactl status with the daemon dead");
	vt_output_free(&o);
}

int main(void)
{
	const struct CMUnitTest shared[] = {
	    cmocka_unit_test(test_status),
	    cmocka_unit_test(test_arenas),
	    cmocka_unit_test(test_stats_and_clients),
	    cmocka_unit_test(test_resident_bytes),
	    cmocka_unit_test(test_unreachable_socket),
	    cmocka_unit_test(test_usage_errors),
	    cmocka_unit_test(test_alloc_command),
	    cmocka_unit_test(test_plurals),
	    cmocka_unit_test(test_session_script),
	    cmocka_unit_test(test_session_prompt_on_terminal),
	    cmocka_unit_test(test_session_errors_continue),
	    cmocka_unit_test(test_session_attaches_libvad_range),
	    cmocka_unit_test(test_libvad_attaches_vactl_range),
	    cmocka_unit_test(test_alloc_share_hold),
	    cmocka_unit_test(test_admin_as_root),
	    cmocka_unit_test(test_admin_as_nobody),
	    cmocka_unit_test(test_top),
	    cmocka_unit_test(test_map),
	    cmocka_unit_test(test_timeout_on_silent_daemon),
	    cmocka_unit_test(test_shared_daemon_stops),
	};
	const struct CMUnitTest own[] = {
	    VT_OWN_DAEMON_TEST(test_daemon_dies_mid_session),
	    VT_OWN_DAEMON_TEST(test_history),
	    VT_OWN_DAEMON_TEST(test_history_unclean_stop),
	};
	int failed = cmocka_run_group_tests_name("vactl", shared, group_setup,
						 vt_group_daemon_stop_if_running);
	failed += cmocka_run_group_tests_name("vactl, daemon killed", own, NULL, NULL);
	return failed ? 1 : 0;
}
