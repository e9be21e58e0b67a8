/*
 * test_libvad_connect.c - a failed vad_connect says what fits, through libvad and vactl:
 * no socket file (start vad; with the paths tried), permission denied on the socket or on
 * its directory (the group to join, tried by a child running as nobody), a stale socket
 * (bound, nobody listening), and a file that is not a socket.
 *
 * As root the test runs in a mount namespace of its own with an empty tmpfs on /run/vad, so
 * the default path's fallback to the system socket finds nothing whatever runs on the
 * machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "vtassert.h"

static bool private_run_vad;
static char dir[256];	     /* the test's temporary directory (0755) */
static char vactl[PATH_MAX]; /* a copy of vactl that nobody can run */
static char group0[64];	     /* the name of gid 0 */

static int setup(void **state)
{
	(void)state;
	vactl[0] = '\0'; /* the build's vactl until a test copies one */
	if (vt_make_temp_dir(dir, sizeof(dir), "vad-test-connect") != 0 || chmod(dir, 0755) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path_in(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);
	assert_true(n > 0 && (size_t)n < len &&
		    (size_t)n < sizeof(((struct sockaddr_un *)0)->sun_path));
}

/* A socket file at path: listening (listen) or bound and closed (a stale one). Returns the
 * listening fd or -1. */
static int make_socket(const char *path, bool listening)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, path, strlen(path) + 1);
	assert_int_equal(0, bind(fd, (struct sockaddr *)&a, sizeof(a)));
	if (!listening) {
		close(fd);
		return -1;
	}
	assert_int_equal(0, listen(fd, 8));
	return fd;
}

static void copy_vactl(void)
{
	snprintf(vactl, sizeof(vactl), "%s/vactl", dir);
	char src[PATH_MAX + 8];
	snprintf(src, sizeof(src), "%s/vactl", vt_build_dir());
	int in = open(src, O_RDONLY | O_CLOEXEC);
	int out = open(vactl, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	assert_true(in >= 0 && out >= 0);
	char buf[1 << 16];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(n, write(out, buf, (size_t)n));
	close(in);
	assert_int_equal(0, fchmod(out, 0755));
	close(out);
}

/* vad_connect(path) in this process must fail with VAD_ECONNECT and a sentence holding
 * every one of the needles. */
static void expect_libvad(const char *path, const char *const *needles)
{
	vad_client *c = NULL;
	int err = vad_connect(path, "hint-test", &c);
	assert_null(c);
	assert_int_equal(VAD_ECONNECT, err);
	const char *msg = vad_last_error(NULL);
	for (; *needles; needles++)
		if (!vt_contains(msg, *needles))
			fail_msg("vad_connect(%s) says \"%s\": no \"%s\" in it",
				 path ? path : "NULL", msg, *needles);
}

/* vactl --socket path status (as nobody when asked) exits 3 with the needles on stderr. */
static void expect_vactl(const char *path, bool as_nobody, const char *const *needles)
{
	char *argv[] = {vactl[0] ? vactl : NULL, "--socket", (char *)path, "status", NULL};
	char bin[PATH_MAX + 8];
	if (!argv[0]) {
		snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
		argv[0] = bin;
	}
	struct vt_output o;
	if (as_nobody)
		assert_int_equal(0, vt_run_as_nobody(argv, NULL, vt_timeout_ms(10000), &o));
	else
		assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(10000), &o));
	VT_ASSERT_EXIT(&o, 3, "vactl status");
	for (; *needles; needles++)
		if (!vt_contains(o.err, *needles)) {
			vt_output_print("vactl status", &o);
			fail_msg("vactl's message has no \"%s\"", *needles);
		}
	assert_false(vt_contains(o.err, "try 'make run'")); /* the old blanket hint */
	vt_output_free(&o);
}

static void test_no_socket_file(void **state)
{
	(void)state;
	char path[128];
	path_in(path, sizeof(path), "nosuch.sock");
	const char *const needles[] = {
	    "no vad socket at ",	  path, "is vad running?", "make run",
	    "systemctl start vad.socket", NULL};
	expect_libvad(path, needles);
	expect_vactl(path, false, needles);

	/* a missing directory on the way says the same */
	path_in(path, sizeof(path), "nodir/vad.sock");
	expect_libvad(path, needles);

	/* from $VAD_SOCKET: the message says so */
	path_in(path, sizeof(path), "fromenv.sock");
	setenv("VAD_SOCKET", path, 1);
	const char *const env_needles[] = {"no vad socket at ", path, "from $VAD_SOCKET", NULL};
	expect_libvad(NULL, env_needles);
	unsetenv("VAD_SOCKET");
}

/* The default path for a user: the per-user socket is looked for first, then the system
 * one; the message names both. */
static void test_no_socket_paths_tried(void **state)
{
	(void)state;
	if (!vt_is_root() || !private_run_vad) {
		printf("needs root and a private /run/vad: skipped\n");
		skip();
	}
	char xdg[128];
	path_in(xdg, sizeof(xdg), "xdg");
	assert_int_equal(0, mkdir(xdg, 0700));
	assert_int_equal(0, chown(xdg, 65534, 65534));
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot become nobody");
		unsetenv("VAD_SOCKET");
		setenv("XDG_RUNTIME_DIR", xdg, 1);
		vad_client *c;
		VT_CHILD_CHECK(vad_connect(NULL, "hint-test", &c) == VAD_ECONNECT, "connected?");
		const char *msg = vad_last_error(NULL);
		char tried[200];
		snprintf(tried, sizeof(tried), "tried %s/vad.sock first: no socket there", xdg);
		VT_CHILD_CHECK(vt_contains(msg, "no vad socket at /run/vad/vad.sock"), "%s", msg);
		VT_CHILD_CHECK(vt_contains(msg, tried), "%s", msg);
		VT_CHILD_CHECK(vt_contains(msg, "make run"), "%s", msg);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(10000)));
}

/* In a child running as nobody: vad_connect(path) fails with the needles. */
static void expect_libvad_as_nobody(const char *path, const char *const *needles)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot become nobody");
		vad_client *c = NULL;
		int err = vad_connect(path, "hint-test", &c);
		VT_CHILD_CHECK(err == VAD_ECONNECT, "vad_connect returned %d", err);
		const char *msg = vad_last_error(NULL);
		for (; *needles; needles++)
			VT_CHILD_CHECK(vt_contains(msg, *needles), "\"%s\" has no \"%s\"", msg,
				       *needles);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(10000)));
}

static void test_permission_denied_socket(void **state)
{
	(void)state;
	if (!vt_is_root()) {
		printf("not root: cannot run a client as nobody; skipped\n");
		skip();
	}
	copy_vactl();
	char path[128];
	path_in(path, sizeof(path), "group.sock");
	int fd = make_socket(path, true); /* a live socket: only the permission is wrong */
	assert_int_equal(0, chown(path, 0, 0));
	assert_int_equal(0, chmod(path, 0660));
	char group_words[128], join[128];
	snprintf(group_words, sizeof(group_words), "members of group %s may connect", group0);
	snprintf(join, sizeof(join), "usermod -a -G %s", group0);
	const char *const needles[] = {"permission denied on ", path, group_words, join, NULL};
	expect_libvad_as_nobody(path, needles);
	expect_vactl(path, true, needles);

	/* owner only: no group to join */
	assert_int_equal(0, chmod(path, 0600));
	const char *const owner_needles[] = {"permission denied on ", path, "mode 0600",
					     "lets no group in", NULL};
	expect_libvad_as_nobody(path, owner_needles);
	close(fd);
}

static void test_permission_denied_directory(void **state)
{
	(void)state;
	if (!vt_is_root()) {
		printf("not root: cannot run a client as nobody; skipped\n");
		skip();
	}
	char sub[128], path[160];
	path_in(sub, sizeof(sub), "closed");
	assert_int_equal(0, mkdir(sub, 0750));
	assert_int_equal(0, chown(sub, 0, 0));
	snprintf(path, sizeof(path), "%s/vad.sock", sub);
	int fd = make_socket(path, true);
	assert_int_equal(0, chmod(path, 0666));
	char dir_words[200], group_words[128];
	snprintf(dir_words, sizeof(dir_words), "its directory %s", sub);
	snprintf(group_words, sizeof(group_words), "members of group %s may connect", group0);
	const char *const needles[] = {"permission denied on ", path, dir_words, group_words, NULL};
	expect_libvad_as_nobody(path, needles);
	close(fd);
}

static void test_stale_socket(void **state)
{
	(void)state;
	char path[128];
	path_in(path, sizeof(path), "stale.sock");
	make_socket(path, false);
	const char *const needles[] = {"stale socket ", path, "no daemon listens",
				       "it replaces the file", NULL};
	expect_libvad(path, needles);
	expect_vactl(path, false, needles);
}

static void test_not_a_socket(void **state)
{
	(void)state;
	char path[128];
	path_in(path, sizeof(path), "plain-file");
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	const char *const needles[] = {path, "it is not a socket", NULL};
	expect_libvad(path, needles);
	expect_vactl(path, false, needles);
}

/* As root: a mount namespace of our own with an empty tmpfs on /run/vad. */
static void private_namespace(void)
{
	if (!vt_is_root() || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return;
	mkdir("/run/vad", 0755);
	private_run_vad =
	    mount("vad-test", "/run/vad", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0;
}

int main(void)
{
	private_namespace();
	struct group *g = getgrgid(0);
	snprintf(group0, sizeof(group0), "%s", g ? g->gr_name : "0");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_no_socket_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_socket_paths_tried, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_permission_denied_socket, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_permission_denied_directory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stale_socket, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_a_socket, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
