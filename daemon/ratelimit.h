/*
 * ratelimit.h - token buckets for what one client session can make the daemon write: log
 * lines and rows of the stats database's event table. A session starts with a burst of
 * VAD_RATE_BURST tokens and gains one every VAD_RATE_PERIOD_MS, up to the burst; whatever
 * finds the bucket empty is counted as suppressed, and the count is reported (one summary
 * line and one event row) when the bucket lets something through again or the session ends.
 * A session's bucket belongs to it, and one worker thread serves it at a time: no lock. The
 * daemon-wide bucket for log lines (service.h) has its own lock.
 */
#ifndef VAD_RATELIMIT_H
#define VAD_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

/* Log lines (or events) a session may cause at once: enough for a short run of genuine
 * refusals to show in full. */
#define VAD_RATE_BURST 10u

/* Then one more per this many milliseconds: one per second. */
#define VAD_RATE_PERIOD_MS 1000u

/* Daemon-level events the queue keeps between two snapshots (then the oldest go). */
#define VAD_EVENTS_DAEMON_MAX 1024

/* Client-caused events the queue keeps between two snapshots; more are dropped and counted
 * (one "events-dropped" row says how many), so clients never push out daemon events. */
#define VAD_EVENTS_CLIENT_MAX 256

/* Log lines all client sessions together may cause at once, then one per
 * VAD_RATE_ALL_PERIOD_MS (ten per second): a client that reconnects for a fresh burst each
 * time meets this bound, which vad_service_client_log applies. */
#define VAD_RATE_ALL_BURST     100u
#define VAD_RATE_ALL_PERIOD_MS 100u

struct vad_rate {
	unsigned burst;	     /* 0: VAD_RATE_BURST */
	unsigned period_ms;  /* 0: VAD_RATE_PERIOD_MS */
	uint64_t refill_ms;  /* when tokens was last brought up to date (0: never used) */
	unsigned tokens;     /* left of the burst */
	uint64_t suppressed; /* refused since the last report */
	uint64_t first_ms;   /* when the first of those was refused */
};

/* Take one token at now_ms (monotonic): true if the caller may write, false if it must not
 * (counted as suppressed). */
bool vad_rate_take(struct vad_rate *b, uint64_t now_ms);

/* The suppressed count since the last collect (0: nothing to report), resetting it; *span_ms
 * gets the time from the first suppressed item to now_ms. */
uint64_t vad_rate_collect(struct vad_rate *b, uint64_t now_ms, uint64_t *span_ms);

/* Milliseconds of CLOCK_MONOTONIC, the clock the buckets count in. */
uint64_t vad_rate_now_ms(void);

#endif
