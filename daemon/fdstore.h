/*
 * fdstore.h - the service manager's file descriptor store, spoken as systemd speaks it:
 * FDSTORE=1 / FDSTOREREMOVE=1 with FDNAME= on $NOTIFY_SOCKET (the fd by SCM_RIGHTS), and the
 * stored fds handed back at the next start as LISTEN_FDS / LISTEN_FDNAMES / LISTEN_PID.
 * vad's names: "arena.NAME" for an arena's file, "arena.NAME@ID" for a tenant arena's,
 * "state.N" for its state file (generation N).
 * systemd refuses ':' in a name (LISTEN_FDNAMES is ':'-separated), hence the dots.
 */
#ifndef VAD_FDSTORE_H
#define VAD_FDSTORE_H

#include <stdbool.h>
#include <stddef.h>

#define VAD_FDNAME_MAX 255

/* One fd handed back at start, taken out of LISTEN_FDS. */
struct vad_stored_fd {
	char name[VAD_FDNAME_MAX + 1];
	int fd; /* -1 once claimed by vad_fdstore_claim */
};

struct vad_stored {
	struct vad_stored_fd *fds;
	size_t n;
};

/* Take the passed fds whose names are vad's (arena.*, state.*) out of LISTEN_FDS, marked
 * close-on-exec; the rest (a socket of socket activation, passed first) stay in LISTEN_FDS and
 * LISTEN_FDNAMES for listen.c. 0, or -1 with a sentence in err. */
int vad_fdstore_take(struct vad_stored *out, char *err, size_t err_len);

/* The fd stored under name (-1: none), now the caller's. */
int vad_fdstore_claim(struct vad_stored *s, const char *name);

/* Close every fd not claimed and free the list. */
void vad_fdstore_free(struct vad_stored *s);

/* Is there a service manager to store fds with ($NOTIFY_SOCKET)? */
bool vad_fdstore_available(void);

/* Store fd under name (FDSTORE=1). 0, or -1 with a sentence in err. */
int vad_fdstore_put(int fd, const char *name, char *err, size_t err_len);

/* Ask the service manager to close and forget every fd stored under name (FDSTOREREMOVE=1). */
void vad_fdstore_remove(const char *name);

#endif
