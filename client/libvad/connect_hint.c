/*
 * connect_hint.c - the socket path a client uses (the shared rule of proto/socket_path.h)
 * and connect errors that say what to do: start a daemon, join a group, or restart the
 * daemon that left a stale socket behind.
 */
#include "connect_hint.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

int libvad_target_resolve(const char *arg, struct libvad_target *t)
{
	memset(t, 0, sizeof(*t));
	if (arg && *arg) {
		t->given = true;
		if (strlen(arg) >= sizeof(t->path))
			return libvad_failf(NULL, VAD_ECONNECT,
					    "cannot connect to %s: the path is longer than %zu "
					    "bytes, the limit of a Unix socket address",
					    arg, sizeof(t->path) - 1);
		snprintf(t->path, sizeof(t->path), "%s", arg);
		return VAD_OK;
	}
	struct vad_socket_env env;
	vad_socket_env_current(&env);
	char err[256];
	if (vad_socket_default(VAD_SOCKET_CLIENT, &env, &t->choice, err, sizeof(err)) != 0)
		return libvad_failf(NULL, VAD_ECONNECT, "cannot connect: %s", err);
	memcpy(t->path, t->choice.path, sizeof(t->path));
	return VAD_OK;
}

/* " (from $VAD_SOCKET)", " (the system socket, ...; also tried X: no socket there)", or
 * "" for a path the caller gave. */
static void describe_origin(const struct libvad_target *t, char *buf, size_t len)
{
	buf[0] = '\0';
	if (t->given)
		return;
	if (t->choice.skipped[0])
		snprintf(buf, len, " (%s; tried %s first: %s)",
			 vad_socket_source_text(t->choice.source), t->choice.skipped,
			 t->choice.skipped_why);
	else
		snprintf(buf, len, " (%s)", vad_socket_source_text(t->choice.source));
}

static void group_name(gid_t gid, char *buf, size_t len)
{
	struct group gr, *res = NULL;
	char tmp[4096];
	if (getgrgid_r(gid, &gr, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s", gr.gr_name);
	else
		snprintf(buf, len, "%u", (unsigned)gid);
}

static void user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[4096];
	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s", pw.pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
}

/* Permission denied: the first directory on the way that this process may not enter, or
 * else the socket file itself; name its owner, group and mode, and what to join. */
static int denied(const struct libvad_target *t, const char *origin)
{
	char what[VAD_SOCKET_PATH_MAX];
	const char *kind = "socket";
	int need = S_IWGRP; /* connecting needs write permission on the socket */
	snprintf(what, sizeof(what), "%s", t->path);
	for (char *p = what + 1; *p; p++) { /* each directory above the socket, top down */
		if (*p != '/')
			continue;
		*p = '\0';
		bool closed = faccessat(AT_FDCWD, what, X_OK, AT_EACCESS) != 0;
		if (closed) {
			kind = "directory";
			need = S_IXGRP;
			break;
		}
		*p = '/';
	}
	struct stat st;
	if (strcmp(kind, "socket") == 0 && faccessat(AT_FDCWD, what, W_OK, AT_EACCESS) == 0)
		return libvad_failf(NULL, VAD_ECONNECT,
				    "permission denied on %s%s, although its mode lets you in (a "
				    "security module's policy?)",
				    t->path, origin);
	if (stat(what, &st) != 0)
		return libvad_failf(
		    NULL, VAD_ECONNECT,
		    "permission denied on %s%s (cannot look at %s: %s): ask whoever "
		    "runs vad for access",
		    t->path, origin, what, strerror(errno));
	char group[64], owner[64];
	group_name(st.st_gid, group, sizeof(group));
	user_name(st.st_uid, owner, sizeof(owner));
	char on[VAD_SOCKET_PATH_MAX + 32] = "";
	if (strcmp(kind, "directory") == 0)
		snprintf(on, sizeof(on), " (its directory %s)", what);
	if (st.st_mode & need)
		return libvad_failf(NULL, VAD_ECONNECT,
				    "permission denied on %s%s%s: the %s belongs to %s:%s, mode "
				    "%04o; members of group %s may connect: join it ('sudo usermod "
				    "-a -G %s $USER', then log in again)",
				    t->path, origin, on, kind, owner, group,
				    (unsigned)(st.st_mode & 07777), group, group);
	return libvad_failf(NULL, VAD_ECONNECT,
			    "permission denied on %s%s%s: the %s belongs to %s:%s, mode %04o, "
			    "which lets no group in; only %s (and root) may connect",
			    t->path, origin, on, kind, owner, group, (unsigned)(st.st_mode & 07777),
			    owner);
}

int libvad_connect_failed(const struct libvad_target *t, int e)
{
	char origin[2 * VAD_SOCKET_PATH_MAX + 128];
	describe_origin(t, origin, sizeof(origin));
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return libvad_failf(NULL, VAD_ECONNECT,
				    "no vad socket at %s%s: is vad running? start it with 'make "
				    "run' (development) or 'systemctl start vad.socket'",
				    t->path, origin);
	case EACCES:
		return denied(t, origin);
	case ECONNREFUSED: {
		struct stat st;
		if (lstat(t->path, &st) == 0 && !S_ISSOCK(st.st_mode))
			return libvad_failf(NULL, VAD_ECONNECT,
					    "cannot connect to %s%s: it is not a socket (check "
					    "--socket, $VAD_SOCKET or the argument of vad_connect)",
					    t->path, origin);
		return libvad_failf(NULL, VAD_ECONNECT,
				    "stale socket %s%s: no daemon listens (the vad that made it "
				    "is gone); start vad again ('make run' or 'systemctl start "
				    "vad.socket'), it replaces the file",
				    t->path, origin);
	}
	default:
		return libvad_failf(NULL, VAD_ECONNECT, "cannot connect to %s%s: %s", t->path,
				    origin, strerror(e));
	}
}
