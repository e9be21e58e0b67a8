/* connect_hint.h - which socket vad_connect tries, and a sentence that fits when it fails. */
#ifndef LIBVAD_CONNECT_HINT_H
#define LIBVAD_CONNECT_HINT_H

#include "socket_path.h"

/* The socket a connect goes to and how it was chosen. */
struct libvad_target {
	char path[VAD_SOCKET_PATH_MAX];
	bool given;			 /* the caller named it (vad_connect's argument) */
	struct vad_socket_choice choice; /* when not given: the default rule's answer */
};

/* Fill t from arg (NULL or "": the default rule of socket_path.h). Returns VAD_OK, or
 * VAD_ECONNECT with the reason recorded as the connect error. */
int libvad_target_resolve(const char *arg, struct libvad_target *t);

/* Record the connect error for connect(2)'s errno e on t and return VAD_ECONNECT: no
 * socket file, permission denied (naming the group to join), a stale socket, or else. */
int libvad_connect_failed(const struct libvad_target *t, int e);

#endif
