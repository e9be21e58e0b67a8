/*
 * test_run_dev.c - `make run` (scripts/run-dev) and the default socket path: a second
 * shell with no VAD_SOCKET finds the dev daemon with `build/vactl status` and with the
 * README's vad_connect(NULL, ...) example, as a normal user (XDG_RUNTIME_DIR) and as root
 * (/run/vad/vad.sock); two checkouts started at once do not collide (the second says how
 * to reach it, and that line works); a stale socket is replaced; a live daemon on the
 * default path is left alone; the config, stats database and socket are the user's.
 *
 * Each checkout is a copy of vad, vactl and run-dev in a temporary directory, so that the
 * user (nobody, when the test runs as root) can reach and write it wherever the real tree
 * lives. As root the test runs in a mount namespace of its own with a private tmpfs on
 * /run/vad, so neither the machine's vad nor another test run is touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "vtassert.h"

#define NOBODY 65534u

static bool private_run_vad; /* root: /run/vad is a tmpfs of this test's own */

struct sandbox {
	char root[256];
	char xdg[PATH_MAX];  /* the user's XDG_RUNTIME_DIR (0700) */
	char home[PATH_MAX]; /* the user's HOME */
	uid_t uid;	     /* who runs run-dev and the clients */
	bool drop;	     /* root running the user's side as nobody */
};

struct checkout {
	char dir[PATH_MAX];
	struct vt_proc proc;
	bool running;
	char try_line[PATH_MAX * 2]; /* what run-dev printed after "try:  " */
	char taken[PATH_MAX * 2];    /* its "the default socket ... is taken" line, if any */
};

/* What a failing test leaves behind, for the teardown: programs still running and the
 * sandbox directory. */
static struct vt_proc *running[4];
static char sandbox_root[256];

static void track(struct vt_proc *p, bool on)
{
	for (int i = 0; i < 4; i++)
		if (on ? !running[i] : running[i] == p) {
			running[i] = on ? p : NULL;
			return;
		}
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 4; i++) {
		if (!running[i])
			continue;
		kill(running[i]->pid, SIGKILL);
		struct vt_output o = {0};
		vt_proc_finish(running[i], 5000, &o);
		vt_output_print("left running by the failed test", &o);
		vt_output_free(&o);
		running[i] = NULL;
	}
	if (sandbox_root[0] && !getenv("VAD_TEST_KEEP")) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sandbox_root);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", sandbox_root);
	}
	sandbox_root[0] = '\0';
	return 0;
}

static const char *run_dev_source(void)
{
	static char path[PATH_MAX];
	const char *src = getenv("VAD_SOURCE_DIR");
	char build[PATH_MAX];
	snprintf(build, sizeof(build), "%s", vt_build_dir());
	const char *roots[] = {src ? src : "", dirname(build)};
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		if (!roots[i][0])
			continue;
		snprintf(path, sizeof(path), "%s/scripts/run-dev", roots[i]);
		if (access(path, R_OK) == 0)
			return path;
	}
	fail_msg("scripts/run-dev not found (set VAD_SOURCE_DIR)");
	return NULL;
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		fail_msg("open %s: %s", from, strerror(errno));
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0)
		fail_msg("create %s: %s", to, strerror(errno));
	char buf[1 << 16];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(n, write(out, buf, (size_t)n));
	assert_int_equal(0, n);
	close(in);
	assert_int_equal(0, fchmod(out, mode));
	close(out);
}

static void own(const struct sandbox *sb, const char *path)
{
	if (sb->drop)
		assert_int_equal(0, chown(path, sb->uid, sb->uid));
}

static void make_dir(const struct sandbox *sb, const char *path, mode_t mode)
{
	if (mkdir(path, mode) != 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	assert_int_equal(0, chmod(path, mode));
	own(sb, path);
}

/* as_root: run the user's side as root (the test must be root, /run/vad private). */
static void sandbox_init(struct sandbox *sb, bool as_root)
{
	memset(sb, 0, sizeof(*sb));
	assert_int_equal(0, vt_make_temp_dir(sb->root, sizeof(sb->root), "vad-test-run-dev"));
	snprintf(sandbox_root, sizeof(sandbox_root), "%s", sb->root);
	assert_int_equal(0, chmod(sb->root, 0755)); /* nobody must reach the checkouts */
	sb->drop = vt_is_root() && !as_root;
	sb->uid = sb->drop ? NOBODY : geteuid();
	snprintf(sb->xdg, sizeof(sb->xdg), "%s/xdg", sb->root);
	snprintf(sb->home, sizeof(sb->home), "%s/home", sb->root);
	make_dir(sb, sb->xdg, 0700);
	make_dir(sb, sb->home, 0755);
}

static void sandbox_destroy(struct sandbox *sb)
{
	if (getenv("VAD_TEST_KEEP"))
		printf("kept %s\n", sb->root);
	teardown(NULL);
}

/* A checkout: DIR/build/{vad,vactl} and DIR/scripts/run-dev, owned by the user. */
static void checkout_init(const struct sandbox *sb, struct checkout *co, const char *name)
{
	memset(co, 0, sizeof(*co));
	snprintf(co->dir, sizeof(co->dir), "%s/%s", sb->root, name);
	char p[PATH_MAX + 32], src[PATH_MAX + 32];
	make_dir(sb, co->dir, 0755);
	snprintf(p, sizeof(p), "%s/build", co->dir);
	make_dir(sb, p, 0755);
	snprintf(p, sizeof(p), "%s/scripts", co->dir);
	make_dir(sb, p, 0755);
	static const char *const bins[] = {"vad", "vactl"};
	for (int i = 0; i < 2; i++) {
		snprintf(src, sizeof(src), "%s/%s", vt_build_dir(), bins[i]);
		snprintf(p, sizeof(p), "%s/build/%s", co->dir, bins[i]);
		copy_file(src, p, 0755);
		own(sb, p);
	}
	snprintf(p, sizeof(p), "%s/scripts/run-dev", co->dir);
	copy_file(run_dev_source(), p, 0755);
	own(sb, p);
}

/* argv for running cmd (a shell command line) as the user in cwd, in an environment that
 * holds only HOME, XDG_RUNTIME_DIR (unless no_xdg), PATH and the sanitizer options: no
 * VAD_SOCKET. Strings live in store. */
struct user_cmd {
	char *argv[24];
	char store[8][PATH_MAX + 64];
};

static void user_argv(const struct sandbox *sb, const char *cwd, const char *cmd,
		      struct user_cmd *u)
{
	int n = 0, s = 0;
	if (sb->drop) {
		u->argv[n++] = "/usr/bin/setpriv";
		u->argv[n++] = "--reuid=65534";
		u->argv[n++] = "--regid=65534";
		u->argv[n++] = "--clear-groups";
	}
	u->argv[n++] = "/usr/bin/env";
	u->argv[n++] = "-i";
	u->argv[n++] = "-C";
	u->argv[n++] = (char *)cwd;
	snprintf(u->store[s], sizeof(u->store[s]), "HOME=%s", sb->home);
	u->argv[n++] = u->store[s++];
	snprintf(u->store[s], sizeof(u->store[s]), "XDG_RUNTIME_DIR=%s", sb->xdg);
	u->argv[n++] = u->store[s++];
	u->argv[n++] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	static const char *const san[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS",
					  "LSAN_OPTIONS"};
	for (size_t i = 0; i < sizeof(san) / sizeof(san[0]); i++) {
		const char *v = getenv(san[i]);
		if (v) {
			snprintf(u->store[s], sizeof(u->store[s]), "%s=%s", san[i], v);
			u->argv[n++] = u->store[s++];
		}
	}
	u->argv[n++] = "/bin/sh";
	u->argv[n++] = "-c";
	u->argv[n++] = (char *)cmd;
	u->argv[n] = NULL;
}

/* Run a shell command line as the user in cwd; its output in o. */
static void run_user(const struct sandbox *sb, const char *cwd, const char *cmd,
		     struct vt_output *o)
{
	struct user_cmd u;
	user_argv(sb, cwd, cmd, &u);
	assert_int_equal(0, vt_run(u.argv, NULL, vt_timeout_ms(30000), o));
}

/* Start `scripts/run-dev build` in the checkout and read what it prints before vad runs. */
static void start_run_dev(const struct sandbox *sb, struct checkout *co)
{
	struct user_cmd u;
	user_argv(sb, co->dir, "exec scripts/run-dev build", &u);
	assert_int_equal(0, vt_proc_start(u.argv, &co->proc));
	co->running = true;
	track(&co->proc, true);
}

static void read_run_dev_lines(struct checkout *co)
{
	char line[PATH_MAX * 2];
	for (;;) {
		if (vt_proc_read_line(&co->proc, line, sizeof(line), vt_timeout_ms(30000)) < 0)
			fail_msg("run-dev in %s printed no \"try:\" line (stdout so far: %s)",
				 co->dir, co->proc.out ? co->proc.out : "");
		if (strstr(line, "is taken"))
			snprintf(co->taken, sizeof(co->taken), "%s", line);
		if (strncmp(line, "try:  ", 6) == 0) {
			snprintf(co->try_line, sizeof(co->try_line), "%s", line + 6);
			return;
		}
	}
}

/* Poll `cmd` (a vactl status command line) as the user until it answers from a daemon at
 * want_path, within a generous deadline. */
static void wait_status(const struct sandbox *sb, const char *cwd, const char *cmd,
			const char *want_path)
{
	char want[PATH_MAX + 16];
	snprintf(want, sizeof(want), " at %s:", want_path);
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	struct vt_output o = {0};
	for (;;) {
		run_user(sb, cwd, cmd, &o);
		if (o.exit_code == 0 && vt_contains(o.out, want))
			break;
		if (vt_now_ns() > deadline) {
			vt_output_print(cmd, &o);
			fail_msg("'%s' in %s never answered from %s", cmd, cwd, want_path);
		}
		vt_output_free(&o);
		vt_sleep_ms(50);
	}
	vt_output_free(&o);
}

static void stop_run_dev(struct checkout *co)
{
	if (!co->running)
		return;
	co->running = false;
	track(&co->proc, false);
	kill(co->proc.pid, SIGTERM); /* run-dev exec'd vad: the same process */
	struct vt_output o = {0};
	int rc = vt_proc_finish(&co->proc, vt_timeout_ms(30000), &o);
	if (rc != 0 || vt_contains(o.err, "Sanitizer") || vt_contains(o.err, "runtime error")) {
		vt_output_print("run-dev", &o);
		vt_output_free(&o);
		fail_msg("the dev daemon in %s did not stop cleanly (exit %d)", co->dir, rc);
	}
	vt_output_free(&o);
}

/* The README's example, as the user, with no VAD_SOCKET: vad_connect(NULL, ...). */
static void readme_example(const struct sandbox *sb, const char *want_socket)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (sb->drop)
			VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot become nobody");
		unsetenv("VAD_SOCKET");
		setenv("HOME", sb->home, 1);
		setenv("XDG_RUNTIME_DIR", sb->xdg, 1);
		vad_client *c;
		void *buf;
		VT_CHILD_CHECK(vad_connect(NULL, "encoder", &c) == 0, "vad_connect(NULL): %s",
			       vad_last_error(NULL));
		struct vad_session info;
		VT_CHILD_CHECK(vad_session_info(c, &info) == 0 &&
				   strcmp(info.socket_path, want_socket) == 0,
			       "connected to %s, not %s", info.socket_path, want_socket);
		VT_CHILD_CHECK(vad_alloc(c, 64 << 20, 0, &buf) == 0, "alloc: %s",
			       vad_last_error(c));
		char token[VAD_TOKEN_LEN + 1];
		VT_CHILD_CHECK(vad_share(c, buf, token) == 0, "share: %s", vad_last_error(c));
		VT_CHILD_CHECK(vad_free(c, buf) == 0, "free: %s", vad_last_error(c));
		vad_close(c);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(30000)));
}

static void expect_mode(const char *path, uid_t uid, mode_t mode)
{
	struct stat st;
	if (stat(path, &st) != 0)
		fail_msg("stat %s: %s", path, strerror(errno));
	if (st.st_uid != uid || (st.st_mode & 07777) != mode)
		fail_msg("%s: owner %u mode %04o, want owner %u mode %04o", path,
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)uid,
			 (unsigned)mode);
}

/* Wait for a file the daemon creates (its stats database). */
static void wait_file(const char *path)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (access(path, F_OK) != 0) {
		if (vt_now_ns() > deadline)
			fail_msg("%s never appeared", path);
		vt_sleep_ms(20);
	}
}

/* One run-dev at the default path: status and the README example from a "second shell";
 * everything it made belongs to the user; the socket goes when it stops. */
static void default_path_case(struct sandbox *sb, const char *want_socket)
{
	struct checkout co;
	checkout_init(sb, &co, "co1");
	start_run_dev(sb, &co);
	read_run_dev_lines(&co);
	assert_string_equal(co.try_line, "build/vactl status");
	assert_string_equal(co.taken, "");
	wait_status(sb, co.dir, "build/vactl status", want_socket);
	/* from anywhere, not only the checkout: the path depends on nothing but the user */
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "%s/build/vactl status", co.dir);
	wait_status(sb, sb->home, cmd, want_socket);
	readme_example(sb, want_socket);

	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/build/run", co.dir);
	expect_mode(p, sb->uid, 0700);
	snprintf(p, sizeof(p), "%s/build/run/vad.conf", co.dir);
	expect_mode(p, sb->uid, 0600);
	snprintf(p, sizeof(p), "%s/build/run/vad-stats.db", co.dir);
	wait_file(p);
	expect_mode(p, sb->uid, 0600);
	expect_mode(want_socket, sb->uid, 0660);

	stop_run_dev(&co);
	if (access(want_socket, F_OK) == 0)
		fail_msg("%s is still there after the dev daemon stopped", want_socket);
}

static void test_user_default_path(void **state)
{
	(void)state;
	struct sandbox sb;
	sandbox_init(&sb, false);
	char want[PATH_MAX + 16];
	snprintf(want, sizeof(want), "%s/vad.sock", sb.xdg);
	default_path_case(&sb, want);
	sandbox_destroy(&sb);
}

static void test_root_default_path(void **state)
{
	(void)state;
	if (!vt_is_root() || !private_run_vad) {
		printf("not root or no private /run/vad: skipped\n");
		skip();
	}
	struct sandbox sb;
	sandbox_init(&sb, true);
	default_path_case(&sb, "/run/vad/vad.sock");
	sandbox_destroy(&sb);
}

/* Two checkouts started at the same moment: one gets the default path, the other its own
 * build/run/vad.sock, and the line it prints reaches it. */
static void test_two_checkouts_at_once(void **state)
{
	(void)state;
	struct sandbox sb;
	sandbox_init(&sb, false);
	struct checkout co[2];
	checkout_init(&sb, &co[0], "co1");
	checkout_init(&sb, &co[1], "co2");
	start_run_dev(&sb, &co[0]);
	start_run_dev(&sb, &co[1]);
	read_run_dev_lines(&co[0]);
	read_run_dev_lines(&co[1]);

	int first = strcmp(co[0].try_line, "build/vactl status") == 0 ? 0 : 1;
	struct checkout *got = &co[first], *other = &co[1 - first];
	assert_string_equal(got->try_line, "build/vactl status");
	char want_line[PATH_MAX * 2], own_sock[PATH_MAX + 32], dflt[PATH_MAX + 16];
	snprintf(own_sock, sizeof(own_sock), "%s/build/run/vad.sock", other->dir);
	snprintf(want_line, sizeof(want_line), "VAD_SOCKET=%s build/vactl status", own_sock);
	assert_string_equal(other->try_line, want_line);
	if (!vt_contains(other->taken, "another checkout's make run"))
		fail_msg("the second run-dev says \"%s\"", other->taken);
	snprintf(dflt, sizeof(dflt), "%s/vad.sock", sb.xdg);

	/* exactly what it printed, in another shell */
	wait_status(&sb, other->dir, other->try_line, own_sock);
	wait_status(&sb, got->dir, "build/vactl status", dflt);

	/* a second run in a checkout whose daemon runs says where that one is */
	struct vt_output o;
	run_user(&sb, got->dir, "scripts/run-dev build", &o);
	VT_ASSERT_EXIT(&o, 1, "a second run-dev in the same checkout");
	assert_true(vt_contains(o.err, "already runs, on"));
	assert_true(vt_contains(o.err, dflt));
	vt_output_free(&o);

	/* the daemon at the default path is the first one's: it goes away with it */
	stop_run_dev(got);
	struct vt_output s;
	char at_dflt[PATH_MAX + 32];
	snprintf(at_dflt, sizeof(at_dflt), " at %s:", dflt);
	run_user(&sb, other->dir, "build/vactl status", &s);
	if (vt_contains(s.out, at_dflt)) {
		vt_output_print("vactl status", &s);
		fail_msg("a daemon still answers on %s", dflt);
	}
	vt_output_free(&s);
	wait_status(&sb, other->dir, other->try_line, own_sock);
	stop_run_dev(other);
	sandbox_destroy(&sb);
}

/* A socket file nobody listens on at the default path: run-dev takes the path anyway and
 * the daemon replaces the file. */
static void test_stale_socket_replaced(void **state)
{
	(void)state;
	struct sandbox sb;
	sandbox_init(&sb, false);
	char dflt[PATH_MAX + 16];
	snprintf(dflt, sizeof(dflt), "%s/vad.sock", sb.xdg);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	assert_true(strlen(dflt) < sizeof(a.sun_path));
	memcpy(a.sun_path, dflt, strlen(dflt) + 1);
	assert_int_equal(0, bind(fd, (struct sockaddr *)&a, sizeof(a)));
	close(fd);
	own(&sb, dflt);

	struct checkout co;
	checkout_init(&sb, &co, "co1");
	start_run_dev(&sb, &co);
	read_run_dev_lines(&co);
	assert_string_equal(co.try_line, "build/vactl status");
	wait_status(&sb, co.dir, "build/vactl status", dflt);
	stop_run_dev(&co);
	sandbox_destroy(&sb);
}

/* A daemon that run-dev did not start answers on the default path: it is left alone. */
static void test_live_daemon_left_alone(void **state)
{
	(void)state;
	struct sandbox sb;
	sandbox_init(&sb, false);
	char dflt[PATH_MAX + 16];
	snprintf(dflt, sizeof(dflt), "%s/vad.sock", sb.xdg);
	struct checkout co;
	checkout_init(&sb, &co, "co1");

	struct vt_proc other;
	struct user_cmd u;
	user_argv(&sb, co.dir, "exec build/vad -c /dev/null --foreground", &u);
	assert_int_equal(0, vt_proc_start(u.argv, &other));
	track(&other, true);
	wait_status(&sb, co.dir, "build/vactl status", dflt);

	start_run_dev(&sb, &co);
	read_run_dev_lines(&co);
	if (!vt_contains(co.taken, "another vad answers there"))
		fail_msg("run-dev says \"%s\"", co.taken);
	char own_sock[PATH_MAX + 32];
	snprintf(own_sock, sizeof(own_sock), "%s/build/run/vad.sock", co.dir);
	wait_status(&sb, co.dir, co.try_line, own_sock);
	wait_status(&sb, co.dir, "build/vactl status", dflt); /* still the other one */
	stop_run_dev(&co);

	track(&other, false);
	kill(other.pid, SIGTERM);
	struct vt_output o = {0};
	int rc = vt_proc_finish(&other, vt_timeout_ms(30000), &o);
	if (rc != 0)
		vt_output_print("the other daemon", &o);
	vt_output_free(&o);
	assert_int_equal(0, rc);
	sandbox_destroy(&sb);
}

/* As root: a mount namespace of our own with a tmpfs on /run/vad. */
static void private_namespace(void)
{
	if (!vt_is_root())
		return;
	if (unshare(CLONE_NEWNS) != 0) {
		printf("unshare(CLONE_NEWNS): %s; the root case is skipped\n", strerror(errno));
		return;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		printf("making / private: %s; the root case is skipped\n", strerror(errno));
		return;
	}
	mkdir("/run/vad", 0755);
	if (mount("vad-test", "/run/vad", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
		printf("tmpfs on /run/vad: %s; the root case is skipped\n", strerror(errno));
		return;
	}
	private_run_vad = true;
}

int main(void)
{
	private_namespace();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_user_default_path, teardown),
	    cmocka_unit_test_teardown(test_root_default_path, teardown),
	    cmocka_unit_test_teardown(test_two_checkouts_at_once, teardown),
	    cmocka_unit_test_teardown(test_stale_socket_replaced, teardown),
	    cmocka_unit_test_teardown(test_live_daemon_left_alone, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
