/*
 * socket_path.h - the one rule for the default socket path, shared by the daemon, libvad
 * and vactl (documented in vad(8), libvad(3), vactl(8) and the README).
 *
 * The rule, when no path is given (vad: --socket or the config's socket; clients: the
 * vad_connect argument or vactl --socket):
 *   1. $VAD_SOCKET, if set and not empty;
 *   2. as root (effective uid 0): /run/vad/vad.sock, the system daemon's socket;
 *   3. as any other user, $XDG_RUNTIME_DIR/vad.sock (an absolute XDG_RUNTIME_DIR only):
 *      the daemon listens there; a client uses it only if a socket exists there and
 *      belongs to that user (anybody could plant one in a directory that is not private),
 *      and otherwise /run/vad/vad.sock, the system daemon;
 *   4. without XDG_RUNTIME_DIR: /run/vad/vad.sock for both.
 * Pure apart from one lstat (the client's check in 3): no I/O beyond that, no allocation.
 */
#ifndef VAD_SOCKET_PATH_H
#define VAD_SOCKET_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define VAD_SYSTEM_SOCKET    "/run/vad/vad.sock"
#define VAD_SYSTEM_STATS_DB  "/var/lib/vad/stats.db"
#define VAD_USER_SOCKET_NAME "vad.sock" /* inside $XDG_RUNTIME_DIR */
#define VAD_SOCKET_PATH_MAX  108	/* sizeof(sockaddr_un.sun_path), NUL included */

/* Which end asks: the daemon picks where to listen, a client where to connect. */
enum vad_socket_side { VAD_SOCKET_DAEMON, VAD_SOCKET_CLIENT };

/* Where a default path came from (for messages). */
enum vad_socket_source {
	VAD_SOCKET_SRC_ENV,	       /* $VAD_SOCKET */
	VAD_SOCKET_SRC_SYSTEM_ROOT,    /* root: the system socket */
	VAD_SOCKET_SRC_USER,	       /* $XDG_RUNTIME_DIR/vad.sock */
	VAD_SOCKET_SRC_SYSTEM_NO_XDG,  /* not root, no usable XDG_RUNTIME_DIR: the system socket */
	VAD_SOCKET_SRC_SYSTEM_NO_USER, /* client, not root, no socket of its own in
					  $XDG_RUNTIME_DIR: the system socket */
};

/* What the rule looks at: the effective uid and the two environment variables. */
struct vad_socket_env {
	uid_t euid;
	const char *vad_socket;	 /* $VAD_SOCKET or NULL */
	const char *runtime_dir; /* $XDG_RUNTIME_DIR or NULL */
};

/* The rule's answer. */
struct vad_socket_choice {
	char path[VAD_SOCKET_PATH_MAX];
	enum vad_socket_source source;
	/* a candidate the client looked at and passed over ("" if none): the missing (or not
	 * the user's) $XDG_RUNTIME_DIR/vad.sock, named in connect errors as a path tried */
	char skipped[VAD_SOCKET_PATH_MAX];
	char skipped_why[64]; /* "no socket there", "owned by uid 1234", ... */
};

/* This process's euid, $VAD_SOCKET and $XDG_RUNTIME_DIR (pointers into environ). */
void vad_socket_env_current(struct vad_socket_env *env);

/* Apply the rule above for side and env; 0, or -1 with a sentence in err when the
 * resulting path does not fit a Unix socket address. */
int vad_socket_default(enum vad_socket_side side, const struct vad_socket_env *env,
		       struct vad_socket_choice *out, char *err, size_t err_len);

/* Short words for where a path came from: "from $VAD_SOCKET", "the system socket", ... */
const char *vad_socket_source_text(enum vad_socket_source source);

/* The stats database a daemon on socket_path writes when stats_db is unset: the system
 * one for the system socket, else vad-stats.db beside the socket. 0, or -1 if too long. */
int vad_socket_stats_db(const char *socket_path, char *buf, size_t len);

#endif
