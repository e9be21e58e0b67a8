/* test_proto_socket_path.c - the default socket path rule (proto/socket_path.h) for the
 * daemon and for clients: root, a user with and without XDG_RUNTIME_DIR, $VAD_SOCKET,
 * a per-user socket that is missing, planted by someone else or not a socket, paths that
 * are too long; and the stats database beside a socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "socket_path.h"

#define USER_UID  4242u /* the "user" when the test runs as root */
#define OTHER_UID 4343u

static char dir[64];	   /* plays $XDG_RUNTIME_DIR */
static char user_sock[96]; /* dir/vad.sock */

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/vad-test-sockpath-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(user_sock, sizeof(user_sock), "%s/vad.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(user_sock);
	return rmdir(dir);
}

/* A socket file at user_sock (bound, not listening: the rule only looks at the file),
 * owned by owner when we are root. Returns the uid that owns it. */
static uid_t make_user_socket(uid_t owner)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", user_sock);
	unlink(user_sock);
	assert_int_equal(0, bind(fd, (struct sockaddr *)&a, sizeof(a)));
	close(fd);
	if (geteuid() == 0)
		assert_int_equal(0, chown(user_sock, owner, (gid_t)-1));
	struct stat st;
	assert_int_equal(0, lstat(user_sock, &st));
	return st.st_uid;
}

static void expect(enum vad_socket_side side, uid_t euid, const char *vad_socket, const char *xdg,
		   const char *want_path, enum vad_socket_source want_src, const char *want_skipped)
{
	struct vad_socket_env env = {.euid = euid, .vad_socket = vad_socket, .runtime_dir = xdg};
	struct vad_socket_choice c;
	char err[256] = "";
	if (vad_socket_default(side, &env, &c, err, sizeof(err)) != 0)
		fail_msg("side %d uid %u VAD_SOCKET %s XDG %s: %s", side, (unsigned)euid,
			 vad_socket ? vad_socket : "-", xdg ? xdg : "-", err);
	if (strcmp(c.path, want_path) != 0 || c.source != want_src)
		fail_msg("side %d uid %u VAD_SOCKET %s XDG %s: got %s (source %d), want %s (%d)",
			 side, (unsigned)euid, vad_socket ? vad_socket : "-", xdg ? xdg : "-",
			 c.path, c.source, want_path, want_src);
	assert_string_equal(c.skipped, want_skipped ? want_skipped : "");
	if (want_skipped)
		assert_true(c.skipped_why[0] != '\0');
}

static void test_vad_socket_wins(void **state)
{
	(void)state;
	const char *p = "/srv/elsewhere/vad.sock";
	for (int side = VAD_SOCKET_DAEMON; side <= VAD_SOCKET_CLIENT; side++) {
		expect(side, 0, p, dir, p, VAD_SOCKET_SRC_ENV, NULL);
		expect(side, 1000, p, dir, p, VAD_SOCKET_SRC_ENV, NULL);
		expect(side, 1000, p, NULL, p, VAD_SOCKET_SRC_ENV, NULL);
	}
	/* an empty $VAD_SOCKET counts as unset */
	expect(VAD_SOCKET_DAEMON, 0, "", NULL, VAD_SYSTEM_SOCKET, VAD_SOCKET_SRC_SYSTEM_ROOT, NULL);
}

static void test_root_uses_system_socket(void **state)
{
	(void)state;
	/* even with a runtime directory and a socket in it: root's daemon is the system one */
	make_user_socket(0);
	for (int side = VAD_SOCKET_DAEMON; side <= VAD_SOCKET_CLIENT; side++) {
		expect(side, 0, NULL, dir, VAD_SYSTEM_SOCKET, VAD_SOCKET_SRC_SYSTEM_ROOT, NULL);
		expect(side, 0, NULL, NULL, VAD_SYSTEM_SOCKET, VAD_SOCKET_SRC_SYSTEM_ROOT, NULL);
	}
}

static void test_user_with_runtime_dir(void **state)
{
	(void)state;
	/* no socket there yet: the daemon listens there, a client goes to the system daemon
	 * and says it looked at the per-user path first */
	expect(VAD_SOCKET_DAEMON, 1000, NULL, dir, user_sock, VAD_SOCKET_SRC_USER, NULL);
	expect(VAD_SOCKET_CLIENT, 1000, NULL, dir, VAD_SYSTEM_SOCKET, VAD_SOCKET_SRC_SYSTEM_NO_USER,
	       user_sock);

	/* once the user's daemon made its socket, the client finds it */
	uid_t owner = make_user_socket(USER_UID);
	expect(VAD_SOCKET_CLIENT, owner, NULL, dir, user_sock, VAD_SOCKET_SRC_USER, NULL);
	expect(VAD_SOCKET_DAEMON, owner, NULL, dir, user_sock, VAD_SOCKET_SRC_USER, NULL);

	/* a trailing slash in XDG_RUNTIME_DIR makes the same path */
	char slash[80];
	snprintf(slash, sizeof(slash), "%s/", dir);
	expect(VAD_SOCKET_CLIENT, owner, NULL, slash, user_sock, VAD_SOCKET_SRC_USER, NULL);
}

static void test_planted_socket_ignored(void **state)
{
	(void)state;
	/* a socket someone else put there (XDG_RUNTIME_DIR pointing at a shared directory) */
	uid_t owner = make_user_socket(OTHER_UID);
	uid_t me = owner + 1;
	struct vad_socket_env env = {.euid = me, .runtime_dir = dir};
	struct vad_socket_choice c;
	char err[256];
	assert_int_equal(0, vad_socket_default(VAD_SOCKET_CLIENT, &env, &c, err, sizeof(err)));
	assert_string_equal(c.path, VAD_SYSTEM_SOCKET);
	assert_string_equal(c.skipped, user_sock);
	char want[64];
	snprintf(want, sizeof(want), "owned by uid %u", (unsigned)owner);
	if (!strstr(c.skipped_why, want))
		fail_msg("skipped_why \"%s\" does not say \"%s\"", c.skipped_why, want);

	/* a file that is not a socket */
	unlink(user_sock);
	int fd = open(user_sock, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	env.euid = geteuid() == 0 ? 0 : geteuid();
	if (env.euid == 0) {
		assert_int_equal(0, chown(user_sock, USER_UID, (gid_t)-1));
		env.euid = USER_UID;
	}
	assert_int_equal(0, vad_socket_default(VAD_SOCKET_CLIENT, &env, &c, err, sizeof(err)));
	assert_string_equal(c.path, VAD_SYSTEM_SOCKET);
	assert_string_equal(c.skipped_why, "not a socket");
}

static void test_user_without_runtime_dir(void **state)
{
	(void)state;
	for (int side = VAD_SOCKET_DAEMON; side <= VAD_SOCKET_CLIENT; side++) {
		expect(side, 1000, NULL, NULL, VAD_SYSTEM_SOCKET, VAD_SOCKET_SRC_SYSTEM_NO_XDG,
		       NULL);
		expect(side, 1000, NULL, "", VAD_SYSTEM_SOCKET, VAD_SOCKET_SRC_SYSTEM_NO_XDG, NULL);
		/* the XDG spec: a relative path is to be ignored */
		expect(side, 1000, NULL, "run/user/1000", VAD_SYSTEM_SOCKET,
		       VAD_SOCKET_SRC_SYSTEM_NO_XDG, NULL);
	}
}

static void test_too_long(void **state)
{
	(void)state;
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	struct vad_socket_env env = {.euid = 1000, .vad_socket = longp};
	struct vad_socket_choice c;
	char err[512];
	assert_int_equal(-1, vad_socket_default(VAD_SOCKET_CLIENT, &env, &c, err, sizeof(err)));
	assert_non_null(strstr(err, "longer than 107 bytes"));
	assert_non_null(strstr(err, "$VAD_SOCKET"));

	/* a runtime directory too long for a socket address: the daemon cannot listen there,
	 * a client can still reach the system daemon */
	longp[150] = '\0';
	env = (struct vad_socket_env){.euid = 1000, .runtime_dir = longp};
	assert_int_equal(-1, vad_socket_default(VAD_SOCKET_DAEMON, &env, &c, err, sizeof(err)));
	assert_non_null(strstr(err, "XDG_RUNTIME_DIR"));
	assert_int_equal(0, vad_socket_default(VAD_SOCKET_CLIENT, &env, &c, err, sizeof(err)));
	assert_string_equal(c.path, VAD_SYSTEM_SOCKET);
	assert_string_equal(c.skipped, "$XDG_RUNTIME_DIR/vad.sock");
}

static void test_env_current(void **state)
{
	(void)state;
	char *saved_sock = getenv("VAD_SOCKET") ? strdup(getenv("VAD_SOCKET")) : NULL;
	char *saved_xdg = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;
	setenv("VAD_SOCKET", "/x/vad.sock", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
	struct vad_socket_env env;
	vad_socket_env_current(&env);
	assert_int_equal(env.euid, geteuid());
	assert_string_equal(env.vad_socket, "/x/vad.sock");
	assert_string_equal(env.runtime_dir, "/run/user/77");
	unsetenv("VAD_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	vad_socket_env_current(&env);
	assert_null(env.vad_socket);
	assert_null(env.runtime_dir);
	if (saved_sock)
		setenv("VAD_SOCKET", saved_sock, 1);
	if (saved_xdg)
		setenv("XDG_RUNTIME_DIR", saved_xdg, 1);
	free(saved_sock);
	free(saved_xdg);
}

static void test_stats_db_beside_socket(void **state)
{
	(void)state;
	char buf[128];
	assert_int_equal(0, vad_socket_stats_db(VAD_SYSTEM_SOCKET, buf, sizeof(buf)));
	assert_string_equal(buf, VAD_SYSTEM_STATS_DB);
	assert_int_equal(0, vad_socket_stats_db("", buf, sizeof(buf)));
	assert_string_equal(buf, VAD_SYSTEM_STATS_DB);
	assert_int_equal(0, vad_socket_stats_db("/run/user/1000/vad.sock", buf, sizeof(buf)));
	assert_string_equal(buf, "/run/user/1000/vad-stats.db");
	assert_int_equal(0, vad_socket_stats_db("/vad.sock", buf, sizeof(buf)));
	assert_string_equal(buf, "/vad-stats.db");
	assert_int_equal(-1, vad_socket_stats_db("/run/user/1000/vad.sock", buf, 10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_vad_socket_wins, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_root_uses_system_socket, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_user_with_runtime_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_planted_socket_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_user_without_runtime_dir, setup, teardown),
	    cmocka_unit_test(test_too_long),
	    cmocka_unit_test(test_env_current),
	    cmocka_unit_test(test_stats_db_beside_socket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
