/*
 * harness.h - the integration test harness: a real vad daemon on a temporary socket,
 * driven through libvad, vactl and raw sockets.
 *
 * Every function returns 0 (or a documented value) on success and -1 on failure after
 * printing what went wrong to stderr, so it is safe to call from forked children where
 * cmocka's assertions must not be used (see VT_CHILD_CHECK).
 *
 * Running: tests/run-tests BUILD MODE runs every BUILD/tests/test_*; one program alone:
 *   make build/vad build/vactl build/tests/test_service_sharing
 *   VAD_BUILD_DIR=build build/tests/test_service_sharing
 * $VAD_TEST_MODE (normal|asan|tsan) scales counts and timeouts; $VAD_TEST_KEEP keeps each
 * daemon's temporary directory (config, socket, log, stats database) for a post-mortem.
 *
 * Files: env.c (build dir, modes, patterns), daemon.c (config, start, stop, log checks,
 * /proc probes, fixtures), vadutil.c (libvad conveniences), spawn.c (starting a program
 * with pipes), run.c and proc.c (running vactl and vad, in the foreground or the background),
 * json.c (vactl --json), children.c (forked helpers), rawclient.c/.h (the wire protocol without
 * libvad) and wire.c/.h (the requests it sends), vtassert.h (cmocka assertions that print
 * libvad's sentences).
 */
#ifndef VAD_TEST_HARNESS_H
#define VAD_TEST_HARNESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "vad.h"

/* ---- environment ------------------------------------------------------------------- */

enum vt_mode { VT_MODE_NORMAL, VT_MODE_ASAN, VT_MODE_TSAN };

/* The build directory holding vad and vactl: $VAD_BUILD_DIR or "build", made absolute. */
const char *vt_build_dir(void);

/* path itself when uid nobody can execute it, else a copy of it in a
 * directory nobody can reach, made once per test process and removed at exit. */
const char *vt_nobody_path(const char *path);

/* $VAD_TEST_MODE as an enum (unset or unknown: normal). */
enum vt_mode vt_mode(void);

/* n scaled down for slow sanitizer builds (asan n/5, tsan n/10), never below 1. */
int vt_scale(int n);

/* A timeout of ms in the normal build, stretched for sanitizer builds (x5, x10). */
int vt_timeout_ms(int ms);

/* Monotonic clock in nanoseconds. */
uint64_t vt_now_ns(void);

/* Sleep for ms milliseconds. */
void vt_sleep_ms(int ms);

/* Are we root (needed for the uid-switching tests)? */
bool vt_is_root(void);

/* Make a fresh directory $TMPDIR/prefix.XXXXXX ($TMPDIR unset: /tmp) and put its path in
 * buf; 0, or -1 with the reason printed. */
int vt_make_temp_dir(char *buf, size_t cap, const char *prefix);

/* ---- the daemon -------------------------------------------------------------------- */

struct vt_daemon {
	char dir[256];		    /* temporary directory holding everything below */
	char conf_path[PATH_MAX];   /* DIR/vad.conf */
	char socket_path[PATH_MAX]; /* DIR/vad.sock */
	char log_path[PATH_MAX];    /* DIR/vad.log: the daemon's stdout and stderr */
	char stats_db[PATH_MAX];    /* DIR/stats.db */
	char vad_bin[PATH_MAX];	    /* BUILD/vad */
	pid_t pid;		    /* 0 when not running */
	int exit_status;	    /* waitpid status of the last stop */
};

/* Make a temporary directory (mode 0755 so dropped-privilege children can reach the
 * socket) and fill in the paths of d. Does not write a config or start anything. */
int vt_daemon_init(struct vt_daemon *d);

/* Write d->conf_path: a [vad] section with the test defaults (socket, socket_mode 0666,
 * workers 2, stats_db, stats_interval, log_level) where vad_extra ("key = value" lines,
 * may be NULL) overrides any default key it names, followed by arena_sections (full
 * "[arena NAME]" sections; NULL: one 256M arena "default"). */
int vt_daemon_write_config(struct vt_daemon *d, const char *vad_extra, const char *arena_sections);

/* Start `vad -c CONF --foreground` and wait until the socket accepts connections. On
 * failure prints the daemon's log. */
int vt_daemon_start(struct vt_daemon *d);

/* How to start the daemon beyond the defaults of vt_daemon_start. */
struct vt_start_opts {
	const char *const *env; /* extra "NAME=VALUE" entries, NULL-terminated; may be NULL */
	int listen_fd;		/* >= 0: pass it as fd 3 with LISTEN_FDS=1 (socket activation) */
	bool as_nobody;		/* run the daemon as uid/gid 65534 (needs root; the caller makes
				   d->dir writable for it) */
	unsigned nofile;	/* > 0: the daemon's RLIMIT_NOFILE (soft and hard) */
};

/* vt_daemon_start with extra environment and/or an inherited listening socket (which
 * the harness keeps open; close it after the daemon started). */
int vt_daemon_start_opts(struct vt_daemon *d, const struct vt_start_opts *opts);

/* vt_daemon_init + vt_daemon_write_config + vt_daemon_start. */
int vt_daemon_setup(struct vt_daemon *d, const char *vad_extra, const char *arena_sections);

/* SIGTERM the daemon and wait; 0 only if it exited with status 0 and its log holds no
 * sanitizer report. Prints the log otherwise. */
int vt_daemon_stop(struct vt_daemon *d);

/* Send sig to the running daemon. */
int vt_daemon_signal(struct vt_daemon *d, int sig);

/* Is the daemon process still alive (not exited, not a zombie)? */
bool vt_daemon_alive(struct vt_daemon *d);

/* Kill the daemon if it still runs (printing its log, since the test did not stop it)
 * and remove the temporary directory unless $VAD_TEST_KEEP is set. */
void vt_daemon_destroy(struct vt_daemon *d);

/* Print the last max_lines lines of the daemon's log to stderr. */
void vt_daemon_print_log(const struct vt_daemon *d, int max_lines);

/* Lines of d's log that contain needle; -1 when the log cannot be read. */
int vt_daemon_log_count(const struct vt_daemon *d, const char *needle);

/* Does the daemon's log contain needle? */
bool vt_daemon_log_contains(const struct vt_daemon *d, const char *needle);

/* Called for each memfd of a process: its fd number there, its link
 * ("/memfd:vad:NAME (deleted)") and its /proc path (stat or open it through that); nonzero stops.
 */
typedef int (*vt_memfd_fn)(void *ctx, int fd, const char *link, const char *path);

/* Call fn for each memfd pid holds; -1 if its fds cannot be listed, else the value that stopped
 * the walk (0 if none did). */
int vt_for_each_memfd(pid_t pid, vt_memfd_fn fn, void *ctx);

/* The fd number pid holds the memfd called name by ("vad:default"), or -1. */
int vt_memfd_named(pid_t pid, const char *name);

/* Number of open file descriptors of pid (from /proc/PID/fd), or -1. */
int vt_fd_count(pid_t pid);

/* Bytes of memory actually allocated (st_blocks) behind the daemon's memfd arenas, found
 * through /proc/PID/fd; -1 if none can be read. Shows whether freed memory went back. */
int64_t vt_arena_resident_bytes(const struct vt_daemon *d);

/* cmocka test fixtures. vt_fixture_daemon_setup: *state becomes a started vt_daemon
 * with the default config. vt_fixture_blank_setup: *state becomes a zeroed vt_daemon
 * the test sets up itself (its own config). The teardown destroys either. */
int vt_fixture_daemon_setup(void **state);
int vt_fixture_blank_setup(void **state);
int vt_fixture_daemon_teardown(void **state);

/* Group setup for a file whose tests share one daemon: *state becomes a zeroed fixture of
 * size bytes whose first member is a struct vt_daemon, set up with vad_extra and
 * arena_sections (either may be NULL). A failed start leaves *state set to the fixture with
 * the daemon destroyed, so a teardown (vt_group_daemon_stop, vt_fixture_daemon_teardown; cmocka
 * runs a group's after a failed group setup) only frees it. Called through VT_GROUP_FIXTURE_SETUP,
 * which checks that the daemon comes first. */
int vt_group_fixture_setup(void **state, size_t size, const char *vad_extra,
			   const char *arena_sections);

/* vt_group_fixture_setup for a struct type whose member d (a struct vt_daemon) is its first:
 * a type where it is not does not compile. */
#define VT_GROUP_FIXTURE_SETUP(state, type, vad_extra, arena_sections)                             \
	vt_group_fixture_setup((state),                                                            \
			       sizeof(type) + 0 * sizeof(char[offsetof(type, d) == 0 ? 1 : -1]),   \
			       (vad_extra), (arena_sections))

/* vt_group_fixture_setup of a bare struct vt_daemon. */
int vt_group_daemon_setup(void **state, const char *vad_extra, const char *arena_sections);

/* Define `static int name(void **state)`: the setup of a cmocka group (or of each test) whose
 * state is one daemon started with vad_extra and arena_sections ("key = value" lines for
 * [vad] and "[arena NAME]" sections, as for vt_daemon_write_config; NULL: the defaults).
 * Pair it with vt_group_daemon_stop (vt_group_daemon_stop_if_running when a test stops the
 * daemon itself). */
#define VT_DAEMON_GROUP(name, vad_extra, arena_sections)                                           \
	static int name(void **state)                                                              \
	{                                                                                          \
		return vt_group_daemon_setup(state, (vad_extra), (arena_sections));                \
	}

/* Group teardown that requires a clean exit: vt_daemon_stop (nonzero unless the daemon
 * exited with status 0 and no sanitizer report), then destroy and free. For a bare
 * vt_daemon or any fixture of vt_group_fixture_setup. */
int vt_group_daemon_stop(void **state);

/* vt_group_daemon_stop when the daemon still runs; only destroy and free when a test
 * already stopped it (or it never started). */
int vt_group_daemon_stop_if_running(void **state);

/* ---- libvad helpers ---------------------------------------------------------------- */

/* Connect to d with libvad as name; prints the error on failure. */
int vt_connect(const struct vt_daemon *d, const char *name, vad_client **out);

/* Read stats through a fresh libvad connection (so the numbers are the daemon's view,
 * not coloured by the caller's own session). */
int vt_stats(const struct vt_daemon *d, struct vad_stats *out);

/* Purge every arena through a fresh (admin) libvad connection. */
int vt_purge(const struct vt_daemon *d);

/* Run the daemon's allocator invariant checker (vad_check) through a fresh admin
 * connection; 0 if every arena is sound, -1 (with the daemon's report printed) if not. */
int vt_check_invariants(const struct vt_daemon *d);

/* Poll vt_stats until busy_bytes == busy (and clients == clients unless clients is
 * UINT32_MAX, counting the polling connection itself) or timeout_ms passes. Returns 0
 * when reached; -1 otherwise with *last holding the final reading (may be NULL). */
int vt_wait_busy(const struct vt_daemon *d, uint64_t busy, uint32_t clients, int timeout_ms,
		 struct vad_stats *last);

/* Poll vt_fd_count(d->pid) until it is <= fds or timeout_ms passes; returns the last count. */
int vt_wait_fds(const struct vt_daemon *d, int fds, int timeout_ms);

/* Fill buf[0..len) with a pattern derived from seed; vt_check_pattern verifies it and
 * returns the index of the first wrong byte or -1 if all are right. */
void vt_fill_pattern(void *buf, size_t len, uint64_t seed);
ssize_t vt_check_pattern(const void *buf, size_t len, uint64_t seed);

/* Index of the first non-zero byte of buf[0..len), or -1 if all are zero. */
ssize_t vt_first_nonzero(const void *buf, size_t len);

/* Case-insensitive substring test; a NULL haystack never matches. */
bool vt_contains(const char *haystack, const char *needle);

/* ---- running programs -------------------------------------------------------------- */

struct vt_output {
	int exit_code; /* exit status, or 128+signal, or -1 if it could not run/timed out */
	char *out;     /* everything written to stdout (NUL-terminated, malloc'd) */
	char *err;     /* everything written to stderr */
};

/* Fork and exec argv[0] (a path) with pipes on its stdin, stdout and stderr, whose other ends
 * (close-on-exec) go to fds[0] (write), fds[1] and fds[2] (read); $VAD_SOCKET unset; as uid/gid
 * nobody when as_nobody (needs root). The one way the harness starts vactl and friends (the
 * daemon has its own, with a log file instead of pipes). Returns the pid, or -1. */
pid_t vt_spawn(char *const argv[], bool as_nobody, int fds[3]);

/* Append src[0..n) to the NUL-terminated malloc'd *buf of *len bytes in *cap (growing it);
 * 0, or -1 when out of memory. */
int vt_buf_append(char **buf, size_t *len, size_t *cap, const char *src, size_t n);

/* Run argv[0] (a path) with argv, feeding stdin_text (NULL: /dev/null), capturing
 * stdout/stderr, killing it after timeout_ms. Returns 0 if it ran (whatever its exit
 * code), -1 if it could not be started or timed out. */
int vt_run(char *const argv[], const char *stdin_text, int timeout_ms, struct vt_output *o);

/* vt_run, but the child drops to uid/gid nobody (65534) before exec (needs root). */
int vt_run_as_nobody(char *const argv[], const char *stdin_text, int timeout_ms,
		     struct vt_output *o);

/* Run BUILD/vactl --socket SOCKET ARGS... (socket NULL: no --socket option). */
int vt_vactl(const char *socket, const char *stdin_text, struct vt_output *o, ...)
    __attribute__((sentinel));

/* Run BUILD/vactl with exactly the given arguments (NULL-terminated argv without argv[0]). */
int vt_vactl_argv(char *const args[], const char *stdin_text, struct vt_output *o);

/* Free what vt_run captured. */
void vt_output_free(struct vt_output *o);

/* Print a run's exit code, stdout and stderr (for a failing assertion's context). */
void vt_output_print(const char *what, const struct vt_output *o);

/* A program running in the background whose stdin the test writes and whose stdout it
 * reads while it runs (vactl session, vactl alloc --hold). */
struct vt_proc {
	pid_t pid;
	int in_fd, out_fd, err_fd;
	char *out; /* stdout read so far and not yet consumed by vt_proc_read_* */
	size_t out_len, out_cap;
	char *err; /* all of stderr read so far */
	size_t err_len, err_cap;
};

/* Start argv (argv[0] a path) in the background with pipes on stdin/stdout/stderr. */
int vt_proc_start(char *const argv[], struct vt_proc *p);

/* Start BUILD/vactl ARGS... (NULL-terminated) in the background. */
int vt_proc_vactl(struct vt_proc *p, ...) __attribute__((sentinel));

/* Write text to the program's stdin. */
int vt_proc_write(struct vt_proc *p, const char *text);

/* Read one stdout line (newline stripped) within timeout_ms; its length or -1. */
int vt_proc_read_line(struct vt_proc *p, char *buf, size_t len, int timeout_ms);

/* Read stdout until it holds one whole JSON value (possibly over several lines) and
 * return it (consumed), or NULL on timeout/EOF/garbage. */
struct json_object *vt_proc_read_json(struct vt_proc *p, int timeout_ms);

/* Close stdin, wait up to timeout_ms for the exit (then SIGKILL), and return the exit
 * code as vt_run would (o: the rest of stdout and all of stderr; may be NULL). */
int vt_proc_finish(struct vt_proc *p, int timeout_ms, struct vt_output *o);

/* ---- JSON (vactl --json) ----------------------------------------------------------- */

struct json_object;

/* Parse text as one JSON value; NULL (and the text printed) if it is not. */
struct json_object *vt_json_parse(const char *text);

/* The value at a dotted path ("arenas.0.busy_bytes": object keys and array indexes), or
 * NULL. */
struct json_object *vt_json_path(struct json_object *o, const char *path);

/* Depth-first search for the first member named key anywhere inside o, or NULL. */
struct json_object *vt_json_find(struct json_object *o, const char *key);

/* Read an unsigned integer at a dotted path; -1 if missing or not a number. */
int vt_json_u64(struct json_object *o, const char *path, uint64_t *out);

/* Parse text as JSON lines (one value per non-empty line). Returns the number of values
 * put in out[0..max) or -1 if a line does not parse. Release each with json_object_put. */
int vt_json_lines(const char *text, struct json_object **out, int max);

/* ---- children and pipes ------------------------------------------------------------ */

/* In a forked child: on failure print the message and _exit(1) (cmocka asserts must not
 * run in a child, they would continue the parent's test run there). */
#define VT_CHILD_CHECK(cond, ...)                                                                  \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "child %d: %s:%d: check failed: %s: ", (int)getpid(),      \
				__FILE__, __LINE__, #cond);                                        \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

/* Wait for child pid for up to timeout_ms (then SIGKILL it). Returns its exit code,
 * 128+signal if it was killed, or -1 on timeout/error. */
int vt_wait_child(pid_t pid, int timeout_ms);

/* Write a whole NUL-terminated line (adds '\n') to fd. */
int vt_pipe_send(int fd, const char *line);

/* Read one '\n'-terminated line from fd into buf (newline stripped), waiting at most
 * timeout_ms. Returns the length, or -1 on timeout, EOF or error. */
int vt_pipe_recv(int fd, char *buf, size_t len, int timeout_ms);

/* In a child running as root: drop to nobody (uid/gid 65534, no supplementary groups). */
int vt_become_nobody(void);

#endif
