/* listen.h - the daemon's listening Unix socket: systemd socket activation or a bound path. */
#ifndef VAD_LISTEN_H
#define VAD_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Open the listening socket, non-blocking and close-on-exec. If systemd passed exactly one
 * AF_UNIX stream socket, use it (*activated = true; path and mode are ignored). Otherwise
 * create path's parent directory if missing, refuse a path on which another daemon answers,
 * remove a stale socket, bind, chmod to mode and listen. Returns 0, or -1 with a reason. */
int vad_listen_open(const char *path, mode_t mode, int *out_fd, bool *activated, char *err,
		    size_t len);

/* The filesystem path a listening AF_UNIX socket is bound to ("" if unnamed or abstract). */
void vad_listen_socket_path(int fd, char *buf, size_t len);

#endif
