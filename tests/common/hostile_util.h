/*
 * hostile_util.h - what the hostile-client, fault and soak tests share on top of the harness:
 * the daemon's resource picture (busy bytes, open fds, RSS) taken before an attack and
 * compared after it, and a bystander probe: a well-behaved client in a thread doing
 * alloc/free round trips and recording their latencies while something else misbehaves.
 *
 * Like the harness, functions print what went wrong and return -1, so forked children may
 * call them too.
 */
#ifndef VAD_TEST_HOSTILE_UTIL_H
#define VAD_TEST_HOSTILE_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "rawclient.h"

/* Resident set size of pid in KiB (VmRSS of /proc/PID/status), or -1. */
long vt_rss_kb(pid_t pid);

/* What the daemon holds when nobody misbehaves. */
struct vt_baseline {
	uint64_t busy;	  /* busy bytes of every arena, summed */
	uint32_t clients; /* sessions connected besides the probing one */
	int fds;	  /* lowest open-fd count over a short quiet period */
	long rss_kb;	  /* resident set size */
};

/* Purge, then read busy bytes, clients, the fd count (the lowest over ~300 ms, since the
 * harness's own probe connections close asynchronously) and RSS. */
int vt_baseline_take(const struct vt_daemon *d, struct vt_baseline *b);

/* After an attack: the daemon is alive, its invariant check passes, and (after a purge)
 * busy bytes and clients are back to exactly the baseline and the fd count back to it or
 * below, each waited for up to timeout_ms. Prints the differences and returns -1 if not. */
int vt_baseline_check(const struct vt_daemon *d, const struct vt_baseline *b, int timeout_ms);

/* Make d start the daemon the way a packaged one runs: through a wrapper script in d->dir
 * that lowers RLIMIT_NOFILE to nofile (the soft limit only, or with hard_too the hard one
 * as well, so the daemon cannot raise it) and, when the test is root, drops to nobody
 * (setpriv) before exec'ing vad (the harness's pid stays the daemon's). Call after
 * vt_daemon_init, before vt_daemon_start. Needs /usr/bin/setpriv when root. */
int vt_daemon_wrap_unprivileged(struct vt_daemon *d, int nofile, bool hard_too);

/* Latencies of bystander round trips. */
struct vt_latency {
	unsigned n;	 /* round trips completed */
	unsigned failed; /* round trips that got an error, no answer in time, or a closed
			    connection */
	uint64_t median_ns, p99_ns, max_ns;
};

/* A bystander: its own raw connection, alloc + write-free round trips in a thread. */
struct vt_probe {
	struct vt_raw raw;
	pthread_t thread;
	bool running;
	int stop;	  /* atomic */
	int timeout_ms;	  /* for each reply */
	uint64_t *lat_ns; /* completed round trips, up to cap */
	unsigned n, cap, failed;
	unsigned done; /* atomic: round trips completed so far, for vt_probe_wait */
	int gave_up;   /* atomic: the thread stopped on a failure */
	char first_error[256];
};

/* Connect a probe as name and say hello (does not start the thread). */
int vt_probe_open(struct vt_probe *p, const struct vt_daemon *d, const char *name, int timeout_ms);

/* Do n round trips now, in the calling thread, into *out (reset first). */
int vt_probe_measure(struct vt_probe *p, unsigned n, struct vt_latency *out);

/* Start round trips in a background thread until vt_probe_stop (results reset). */
int vt_probe_start(struct vt_probe *p);

/* Wait until the started probe has completed n round trips since vt_probe_start: 0, or -1
 * (with a message) if it failed or timeout_ms passed first. */
int vt_probe_wait(struct vt_probe *p, unsigned n, int timeout_ms);

/* Stop the thread and summarise what it measured. */
void vt_probe_stop(struct vt_probe *p, struct vt_latency *out);

/* Close the connection and free the buffers. */
void vt_probe_close(struct vt_probe *p);

/* Print "label: n round trips, median X us, p99 Y us, max Z us, F failed". */
void vt_latency_print(const char *label, const struct vt_latency *l);

#endif
