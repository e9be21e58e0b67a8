/*
 * fdstore_standin.h - a stand-in for systemd's fd store for the restart benchmark, speaking the
 * real protocol (as tests/integration/fdstore_manager.py does for the tests): a datagram
 * socket is the daemon's $NOTIFY_SOCKET; FDSTORE=1 with FDNAME= stores the fds that came with
 * the message (SCM_RIGHTS), FDSTOREREMOVE=1 with FDNAME= closes and forgets them, READY=1 is
 * noted with the time it arrived. The daemon is started the way systemd starts a service: the
 * stored fds at 3, 4, ... with LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID (its own pid).
 */
#ifndef VAD_BENCH_FDSTORE_STANDIN_H
#define VAD_BENCH_FDSTORE_STANDIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define STUB_FDS_MAX  64
#define STUB_NAME_MAX 255

struct standin_fd {
	char name[STUB_NAME_MAX + 1];
	int fd;
};

struct fdstore_standin {
	int sock;
	char path[108];
	struct standin_fd stored[STUB_FDS_MAX];
	unsigned n;
	bool ready;
	uint64_t ready_ns; /* vt_now_ns when READY=1 arrived */
	pid_t pid;	   /* the daemon, 0 when none runs */
	int status;	   /* its waitpid status once it exited */
	double cpu_ms;	   /* its CPU time (user + system, every thread) once it exited */
	bool hold_start;   /* standin_start stops the child before its exec (standin_resume) */
};

/* Bind the notify socket at path. 0, or -1 (printed). */
int standin_open(struct fdstore_standin *m, const char *path);

/* Close the socket and every stored fd. */
void standin_close(struct fdstore_standin *m);

/* Handle the messages that arrive within timeout_ms (at least one poll). */
void standin_pump(struct fdstore_standin *m, int timeout_ms);

/* Start argv (argv[0] a path) with the stored fds, stdout and stderr appended to log_path.
 * 0, or -1 (printed). */
int standin_start(struct fdstore_standin *m, char *const argv[], const char *log_path);

/* With hold_start: wait until the child stopped itself before its exec (so a profiler can
 * attach to its pid), and let it go on once go() returned. 0, or -1 (printed). */
int standin_resume(struct fdstore_standin *m, void (*go)(void *ctx, pid_t pid), void *ctx);

/* Wait for READY=1; 0, or -1 when the daemon exited or timeout_ms passed. */
int standin_wait_ready(struct fdstore_standin *m, int timeout_ms);

/* Wait for the daemon to exit, pumping messages meanwhile; 0, or -1 on a timeout. */
int standin_wait_exit(struct fdstore_standin *m, int timeout_ms);

/* The stored fd named name, or -1. */
int standin_fd_of(const struct fdstore_standin *m, const char *name);

/* The stored fd whose name starts with prefix, the last one stored; or -1. */
int standin_fd_prefixed(const struct fdstore_standin *m, const char *prefix);

#endif
