/*
 * top.h - the pieces of vactl top: the samples it keeps (top_samples.c), the frame it draws
 * from them (top_view.c) and its JSON lines (top_json.c); cmd_top.c runs the loop.
 */
#ifndef VACTL_TOP_H
#define VACTL_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lathist.h"
#include "screen.h"
#include "vactl.h"

/* How far back the latency pane looks. */
#define TOP_LATENCY_WINDOW_MS 5000

/* One refresh: the daemon's statistics and its sessions. */
struct top_sample {
	uint64_t at_ms; /* monotonic clock when it was taken */
	struct vad_daemon_stats *stats;
	struct vad_client_info *clients; /* NULL when clients_err */
	size_t n_clients;
	int clients_err; /* VAD_EPERM: the daemon lists sessions to admins only */
};

/* The samples of the last TOP_LATENCY_WINDOW_MS (at least the last two), oldest first. */
struct top_samples {
	struct top_sample *v;
	size_t n, cap;
};

/* Take a sample from the daemon into *s (appended, older ones beyond the window dropped);
 * VAD_OK or the error of the statistics call (a refused session list is not an error). */
int top_samples_take(struct top_samples *s, vad_client *c);

/* The newest sample, the one before it (NULL if none) and the oldest kept. */
const struct top_sample *top_samples_last(const struct top_samples *s);
const struct top_sample *top_samples_prev(const struct top_samples *s);
const struct top_sample *top_samples_first(const struct top_samples *s);

/* Free every sample. */
void top_samples_free(struct top_samples *s);

/* Per-second rate of a counter between two readings ms apart (0 when it went back). */
double top_rate(uint64_t now, uint64_t before, uint64_t ms);

/* A session's requests per second (allocs plus frees) since the previous sample. */
double top_client_rate(const struct vad_client_info *ci, const struct top_sample *prev,
		       uint64_t ms);

/* Draw the frame of the newest sample into scr. self: this session's id (not listed);
 * keys: q works (the header says so). */
void top_view(struct vactl_screen *scr, const struct vad_session *sess, const struct top_samples *s,
	      bool keys);

/* One operation's requests over the samples kept (top_latency.c). */
struct top_lat_row {
	const char *op;
	uint64_t count, errors;
	struct vactl_lat lat;
};

/* The main operations' rows over the samples kept, at most cap; *window_ms the time they
 * span, 0 when they count since the daemon started (one sample so far). */
size_t top_latency_rows(const struct top_samples *s, struct top_lat_row *out, size_t cap,
			uint64_t *window_ms);

/* The latency pane: *t a table of the main operations' requests and
 * quantiles over the samples kept, or NULL and a line of text in note. */
void top_latency_pane(struct vactl_fit **t, char *note, size_t len, const struct top_samples *s);

/* Print the newest sample as one JSON line. */
void top_json(const struct vad_session *sess, const struct top_samples *s, uint64_t sample);

#endif
