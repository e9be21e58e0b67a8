/* listen.c - the listening socket; see listen.h. */
#include "listen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* mkdir that accepts an existing directory, and only a directory. */
static int make_dir(const char *dir, char *err, size_t len)
{
	struct stat st;
	/* chmod: the daemon's umask (077) would leave clients unable to reach the socket */
	if (mkdir(dir, 0755) == 0 && chmod(dir, 0755) == 0)
		return 0;
	if (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	if (errno == EEXIST)
		snprintf(err, len, "cannot create directory %s: it exists and is not a directory",
			 dir);
	else
		snprintf(err, len, "cannot create directory %s: %s", dir, strerror(errno));
	return -1;
}

/* mkdir -p for the directories above path (0755: the socket's own mode guards access). */
static int make_parent_dirs(const char *path, char *err, size_t len)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (make_dir(dir, err, len))
			return -1;
		*p = '/';
	}
	return make_dir(dir, err, len);
}

/* Is a daemon answering on addr? 1 yes, 0 no (nothing there or a stale socket), -1 error. */
static int someone_listening(const struct sockaddr_un *addr, const char *path, char *err,
			     size_t len)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, len, "%s exists and is not a socket; refusing to replace it", path);
		return -1;
	}
	/* non-blocking: a live daemon with a full backlog answers EAGAIN instead of stalling us */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, len, "socket: %s", strerror(errno));
		return -1;
	}
	int rc = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
	int e = errno;
	close(fd);
	if (rc == 0 || e == EAGAIN) /* EAGAIN: alive, its backlog is merely full */
		return 1;
	if (e == ECONNREFUSED || e == ENOENT)
		return 0;
	snprintf(err, len, "cannot probe %s: %s", path, strerror(e));
	return -1;
}

static int use_activated_socket(int *out_fd, char *err, size_t len)
{
	int fd = SD_LISTEN_FDS_START;
	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		snprintf(err, len,
			 "the socket systemd passed is not a listening AF_UNIX stream "
			 "socket (check ListenStream= in vad.socket)");
		return -1;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		snprintf(err, len, "activated socket: fcntl: %s", strerror(errno));
		return -1;
	}
	*out_fd = fd;
	return 0;
}

int vad_listen_open(const char *path, mode_t mode, int *out_fd, bool *activated, char *err,
		    size_t len)
{
	*out_fd = -1;
	*activated = false;

	int n = sd_listen_fds(1);
	if (n < 0) {
		snprintf(err, len, "sd_listen_fds: %s", strerror(-n));
		return -1;
	}
	if (n > 1) {
		snprintf(err, len, "systemd passed %d sockets; vad listens on exactly one", n);
		return -1;
	}
	if (n == 1) {
		if (use_activated_socket(out_fd, err, len))
			return -1;
		*activated = true;
		return 0;
	}

	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (!path || !*path) {
		snprintf(err, len, "no socket path given");
		return -1;
	}
	if (strlen(path) >= sizeof(addr.sun_path)) {
		snprintf(err, len, "socket path %s is too long (at most %zu characters)", path,
			 sizeof(addr.sun_path) - 1);
		return -1;
	}
	strcpy(addr.sun_path, path);
	if (make_parent_dirs(path, err, len))
		return -1;
	int live = someone_listening(&addr, path, err, len);
	if (live < 0)
		return -1;
	if (live > 0) {
		snprintf(err, len, "another vad is listening on %s", path);
		return -1;
	}
	if (unlink(path) != 0 && errno != ENOENT) {
		snprintf(err, len, "cannot remove the stale socket %s: %s", path, strerror(errno));
		return -1;
	}

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, len, "socket: %s", strerror(errno));
		return -1;
	}
	/* bind creates the file with umask-filtered permissions: keep it private until chmod */
	mode_t old_mask = umask(0177);
	int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
	int bind_errno = errno;
	umask(old_mask);
	if (rc != 0) {
		snprintf(err, len, "cannot bind %s: %s", path, strerror(bind_errno));
		close(fd);
		return -1;
	}
	if (chmod(path, mode) != 0) {
		snprintf(err, len, "cannot chmod %s to %04o: %s", path, (unsigned)mode,
			 strerror(errno));
		goto fail_bound;
	}
	if (listen(fd, SOMAXCONN) != 0) {
		snprintf(err, len, "cannot listen on %s: %s", path, strerror(errno));
		goto fail_bound;
	}
	*out_fd = fd;
	return 0;

fail_bound:
	unlink(path);
	close(fd);
	return -1;
}

void vad_listen_socket_path(int fd, char *buf, size_t len)
{
	struct sockaddr_un addr;
	socklen_t alen = sizeof(addr);
	if (len)
		buf[0] = '\0';
	memset(&addr, 0, sizeof(addr));
	if (getsockname(fd, (struct sockaddr *)&addr, &alen) != 0 || addr.sun_family != AF_UNIX)
		return;
	if (alen <= offsetof(struct sockaddr_un, sun_path) || addr.sun_path[0] == '\0')
		return;
	size_t plen = alen - offsetof(struct sockaddr_un, sun_path);
	if (plen >= sizeof(addr.sun_path))
		plen = sizeof(addr.sun_path) - 1;
	addr.sun_path[plen] = '\0';
	snprintf(buf, len, "%s", addr.sun_path);
}
