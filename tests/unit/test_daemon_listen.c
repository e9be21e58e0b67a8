/* test_daemon_listen.c - the listening socket: paths, modes, live and stale sockets,
 * systemd socket activation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "listen.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/vad-test-listen-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_bind_mode_flags_and_parent(void **state)
{
	(void)state;
	char path[108], err[256];
	snprintf(path, sizeof(path), "%s/sub/dir/vad.sock", dir);
	int fd;
	bool activated = true;
	if (vad_listen_open(path, 0640, &fd, &activated, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_false(activated);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	errno = 0;
	assert_int_equal(accept(fd, NULL, NULL), -1);
	assert_int_equal(errno, EAGAIN);

	char got[108];
	vad_listen_socket_path(fd, got, sizeof(got));
	assert_string_equal(got, path);

	/* a client can connect and be accepted */
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	assert_int_equal(connect(c, (struct sockaddr *)&addr, sizeof(addr)), 0);
	int s = accept(fd, NULL, NULL);
	assert_true(s >= 0);
	close(s);
	close(c);
	close(fd);
	unlink(path);
}

static void test_live_and_stale(void **state)
{
	(void)state;
	char path[108], err[256];
	snprintf(path, sizeof(path), "%s/vad.sock", dir);
	int fd, fd2;
	bool activated;
	assert_int_equal(vad_listen_open(path, 0660, &fd, &activated, err, sizeof(err)), 0);

	/* a live daemon is never displaced */
	assert_int_equal(vad_listen_open(path, 0660, &fd2, &activated, err, sizeof(err)), -1);
	assert_int_equal(fd2, -1);
	char want[200];
	snprintf(want, sizeof(want), "another vad is listening on %s", path);
	assert_string_equal(err, want);
	struct stat st;
	assert_int_equal(stat(path, &st), 0); /* and its socket is still there */

	/* it dies without cleaning up: the stale socket is replaced */
	close(fd);
	assert_int_equal(stat(path, &st), 0);
	if (vad_listen_open(path, 0600, &fd, &activated, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	close(fd);
	unlink(path);
}

static void test_refusals(void **state)
{
	(void)state;
	char path[256], err[256];
	int fd;
	bool activated;

	/* something that is not a socket is never removed */
	snprintf(path, sizeof(path), "%s/file", dir);
	int f = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(f >= 0);
	close(f);
	assert_int_equal(vad_listen_open(path, 0660, &fd, &activated, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a socket"));
	assert_int_equal(access(path, F_OK), 0);

	/* longer than sun_path */
	snprintf(path, sizeof(path), "%s/%0150d.sock", dir, 0);
	assert_int_equal(vad_listen_open(path, 0660, &fd, &activated, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too long"));

	assert_int_equal(vad_listen_open("", 0660, &fd, &activated, err, sizeof(err)), -1);

	/* the parent cannot be created (a file is in the way) */
	snprintf(path, sizeof(path), "%s/file/vad.sock", dir);
	assert_int_equal(vad_listen_open(path, 0660, &fd, &activated, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "cannot"));
}

/* Pretend to be systemd: put a socket at fd 3 and set LISTEN_PID/LISTEN_FDS. */
static void activate_with(int fd, const char *count)
{
	if (fd != 3) {
		assert_int_equal(dup2(fd, 3), 3);
		close(fd);
	}
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LISTEN_PID", pid, 1);
	setenv("LISTEN_FDS", count, 1);
}

static void test_socket_activation(void **state)
{
	(void)state;
	int saved3 = fcntl(3, F_GETFD) >= 0 ? dup(3) : -1;
	char path[108], err[256];
	snprintf(path, sizeof(path), "%s/activated.sock", dir);

	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	assert_int_equal(bind(l, (struct sockaddr *)&addr, sizeof(addr)), 0);
	assert_int_equal(listen(l, 8), 0);
	activate_with(l, "1");

	int fd;
	bool activated = false;
	if (vad_listen_open("/nonexistent/ignored.sock", 0600, &fd, &activated, err, sizeof(err)) !=
	    0)
		fail_msg("%s", err);
	assert_true(activated);
	assert_int_equal(fd, 3);
	assert_null(getenv("LISTEN_FDS")); /* consumed, not inherited by children */
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	char got[108];
	vad_listen_socket_path(fd, got, sizeof(got));
	assert_string_equal(got, path);
	close(3);

	/* a passed fd that is not a listening stream socket is refused */
	int p[2];
	assert_int_equal(pipe(p), 0);
	close(p[1]);
	activate_with(p[0], "1");
	assert_int_equal(vad_listen_open(path, 0600, &fd, &activated, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a listening AF_UNIX stream socket"));
	close(3);

	/* more than one socket is refused */
	int saved4 = fcntl(4, F_GETFD) >= 0 ? dup(4) : -1;
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	int s2 = socket(AF_UNIX, SOCK_STREAM, 0);
	if (s2 != 4) {
		assert_int_equal(dup2(s2, 4), 4);
		close(s2);
	}
	activate_with(s, "2");
	assert_int_equal(vad_listen_open(path, 0600, &fd, &activated, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "passed 2 sockets"));
	close(3);
	close(4);
	if (saved4 >= 0) {
		dup2(saved4, 4);
		close(saved4);
	}

	unlink(path);
	if (saved3 >= 0) {
		dup2(saved3, 3);
		close(saved3);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bind_mode_flags_and_parent),
	    cmocka_unit_test(test_live_and_stale),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_socket_activation),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
