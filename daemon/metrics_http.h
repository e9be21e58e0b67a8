/*
 * metrics_http.h - the HTTP listener of metrics_listen: GET or HEAD /metrics answers the text
 * of metrics.h; any other path 404, any other method 405. It runs on a thread and event base
 * of its own, so a scraper (or anyone who can reach the address) never holds up a worker, and
 * bounds what one peer can take: METRICS_HTTP_MAX_CONNS connections (a new one pushes out the
 * oldest that has not sent its request yet), an 8 KiB request head, 2 s to send it, 10 s to
 * read the reply, and at most one rendering of the text per second (later requests get it).
 * Connection: close after every reply.
 */
#ifndef VAD_METRICS_HTTP_H
#define VAD_METRICS_HTTP_H

#include <stddef.h>

struct vad_service;
struct vad_metrics_http;

#define METRICS_HTTP_MAX_CONNS	     16
#define METRICS_HTTP_MAX_HEAD	     8192
#define METRICS_HTTP_HEAD_MS	     2000
#define METRICS_HTTP_REPLY_MS	     10000
#define METRICS_HTTP_RENDER_EVERY    1000 /* ms a rendered text is served again */
#define METRICS_HTTP_ACCEPT_PAUSE_MS 100  /* after a failed accept (out of fds) */

/* Bind addr ("127.0.0.1:9477", "[::1]:9477") and serve /metrics of svc on a thread of its own;
 * NULL with a sentence in err when it cannot (the daemon then serves on without it). */
struct vad_metrics_http *vad_metrics_http_start(struct vad_service *svc, const char *addr,
						char *err, size_t err_len);

/* Stop the thread, close every connection and the listening socket; NULL is fine. */
void vad_metrics_http_stop(struct vad_metrics_http *h);

#endif
