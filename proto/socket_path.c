/* socket_path.c - the default socket path rule; see socket_path.h. */
#include "socket_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void vad_socket_env_current(struct vad_socket_env *env)
{
	env->euid = geteuid();
	env->vad_socket = getenv("VAD_SOCKET");
	env->runtime_dir = getenv("XDG_RUNTIME_DIR");
}

const char *vad_socket_source_text(enum vad_socket_source source)
{
	switch (source) {
	case VAD_SOCKET_SRC_ENV:
		return "from $VAD_SOCKET";
	case VAD_SOCKET_SRC_SYSTEM_ROOT:
		return "the system socket, as root";
	case VAD_SOCKET_SRC_USER:
		return "the per-user socket in $XDG_RUNTIME_DIR";
	case VAD_SOCKET_SRC_SYSTEM_NO_XDG:
		return "the system socket: XDG_RUNTIME_DIR is not set";
	case VAD_SOCKET_SRC_SYSTEM_NO_USER:
		return "the system socket";
	}
	return "the default";
}

static int put(char *buf, const char *what, const char *a, const char *b, char *err, size_t err_len)
{
	int n = snprintf(buf, VAD_SOCKET_PATH_MAX, "%s%s", a, b);
	if (n < 0 || n >= VAD_SOCKET_PATH_MAX) {
		snprintf(err, err_len,
			 "the socket path %s%s (%s) is longer than %d bytes, the limit of a Unix "
			 "socket address",
			 a, b, what, VAD_SOCKET_PATH_MAX - 1);
		return -1;
	}
	return 0;
}

/* Is there a socket at path that belongs to euid? Says why not in why. */
static bool own_socket(const char *path, uid_t euid, char *why, size_t len)
{
	struct stat st;
	if (lstat(path, &st) != 0) {
		snprintf(why, len, errno == ENOENT ? "no socket there" : "%s", strerror(errno));
		return false;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(why, len, "not a socket");
		return false;
	}
	if (st.st_uid != euid) {
		snprintf(why, len, "owned by uid %u, not by you", (unsigned)st.st_uid);
		return false;
	}
	return true;
}

int vad_socket_default(enum vad_socket_side side, const struct vad_socket_env *env,
		       struct vad_socket_choice *out, char *err, size_t err_len)
{
	memset(out, 0, sizeof(*out));
	if (env->vad_socket && *env->vad_socket) {
		out->source = VAD_SOCKET_SRC_ENV;
		return put(out->path, "from $VAD_SOCKET", env->vad_socket, "", err, err_len);
	}
	if (env->euid == 0) {
		out->source = VAD_SOCKET_SRC_SYSTEM_ROOT;
		return put(out->path, "system", VAD_SYSTEM_SOCKET, "", err, err_len);
	}
	/* the XDG base directory spec: a relative XDG_RUNTIME_DIR is to be ignored */
	const char *xdg = env->runtime_dir;
	if (!xdg || xdg[0] != '/') {
		out->source = VAD_SOCKET_SRC_SYSTEM_NO_XDG;
		return put(out->path, "system", VAD_SYSTEM_SOCKET, "", err, err_len);
	}
	char user[VAD_SOCKET_PATH_MAX];
	size_t xlen = strlen(xdg);
	const char *sep = xdg[xlen - 1] == '/' ? "" : "/";
	char tail[sizeof("/" VAD_USER_SOCKET_NAME)];
	snprintf(tail, sizeof(tail), "%s%s", sep, VAD_USER_SOCKET_NAME);
	if (put(user, "in $XDG_RUNTIME_DIR", xdg, tail, err, err_len) != 0) {
		if (side == VAD_SOCKET_DAEMON)
			return -1;
		/* a client can still reach the system daemon; the too long path was not tried */
		out->source = VAD_SOCKET_SRC_SYSTEM_NO_USER;
		snprintf(out->skipped, sizeof(out->skipped), "$XDG_RUNTIME_DIR/%s",
			 VAD_USER_SOCKET_NAME);
		snprintf(out->skipped_why, sizeof(out->skipped_why), "the path is too long");
		return put(out->path, "system", VAD_SYSTEM_SOCKET, "", err, err_len);
	}
	if (side == VAD_SOCKET_DAEMON ||
	    own_socket(user, env->euid, out->skipped_why, sizeof(out->skipped_why))) {
		out->source = VAD_SOCKET_SRC_USER;
		out->skipped_why[0] = '\0';
		memcpy(out->path, user, sizeof(out->path));
		return 0;
	}
	out->source = VAD_SOCKET_SRC_SYSTEM_NO_USER;
	memcpy(out->skipped, user, sizeof(out->skipped));
	return put(out->path, "system", VAD_SYSTEM_SOCKET, "", err, err_len);
}

int vad_socket_stats_db(const char *socket_path, char *buf, size_t len)
{
	int n;
	if (!socket_path || !*socket_path || strcmp(socket_path, VAD_SYSTEM_SOCKET) == 0) {
		n = snprintf(buf, len, "%s", VAD_SYSTEM_STATS_DB);
	} else {
		const char *slash = strrchr(socket_path, '/');
		if (!slash)
			n = snprintf(buf, len, "vad-stats.db");
		else
			n = snprintf(buf, len, "%.*s/vad-stats.db", (int)(slash - socket_path),
				     socket_path);
	}
	return n < 0 || (size_t)n >= len ? -1 : 0;
}
