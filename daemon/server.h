/* server.h - the running service: listener, worker threads, sessions, requests, signals. */
#ifndef VAD_SERVER_H
#define VAD_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "config.h"

struct vad_server;
struct vad_service;

/* Build the server over an already listening socket and opened arenas. Takes ownership
 * of listen_fd and of the arenas array (and each arena). cfg is copied. Returns -1 with
 * a reason in err. */
int vad_server_create(const struct vad_config *cfg, struct vad_arena **arenas, size_t n_arenas,
		      int listen_fd, struct vad_server **out, char *err, size_t err_len);

/* Run the listener loop in the calling thread until SIGTERM/SIGINT (or vad_server_stop).
 * SIGHUP re-reads cfg->path and applies its reloadable limits. Returns 0 on a clean stop. */
int vad_server_run(struct vad_server *s);

/* Did SIGUSR2 (or vactl restart) stop it, to re-execute in place? */
bool vad_server_restart_requested(struct vad_server *s);

/* The service the server runs (its arenas, registry, limits). */
struct vad_service *vad_server_service(struct vad_server *s);

/* Ask a running server to stop (thread-safe). */
void vad_server_stop(struct vad_server *s);

/* Stop workers, drop every session, close arenas and the listening socket, free s. */
void vad_server_destroy(struct vad_server *s);

#endif
