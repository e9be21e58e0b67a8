/*
 * metrics.h - the daemon's figures as Prometheus text (exposition format 0.0.4): what
 * /metrics serves (metrics_http.c) and what `vactl metrics` prints (the metrics operation).
 * One module owns the names, units and help of every family; it reads the same sources as
 * the stats operation (va_get_stats, op_stats, the registry), so the two agree.
 */
#ifndef VAD_METRICS_H
#define VAD_METRICS_H

#include <stdbool.h>
#include <stddef.h>

struct vad_arena;
struct vad_service;

/* Arenas one text shows at most; the rest are counted in vad_metrics_arenas_omitted (tenant
 * arenas could otherwise make a scrape of 65536 label sets). */
#define VAD_METRICS_ARENAS_MAX 256

/* The latency histogram's bounds: powers of two nanoseconds from 2^LOW to 2^HIGH (1.024 us to
 * 1.07 s), each the exact upper bound of a bucket of latency.h, so the counts are exact. */
#define VAD_METRICS_LE_LOW  10
#define VAD_METRICS_LE_HIGH 30

/* Whether arena a is shown (ctx is the caller's); NULL shows every arena. */
typedef bool (*vad_metrics_visible_fn)(void *ctx, const struct vad_arena *a);

/* The metrics text of svc (malloc'd, NUL-terminated, its length in *len), showing the arenas
 * visible accepts; NULL when out of memory. */
char *vad_metrics_render(struct vad_service *svc, vad_metrics_visible_fn visible, void *ctx,
			 size_t *len);

/* Escape a label value for the text format (backslash, double quote, newline) into buf; buf
 * is returned, cut short (never mid-escape) if cap is too small. */
const char *vad_metrics_escape(const char *s, char *buf, size_t cap);

#endif
