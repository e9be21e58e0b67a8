/*
 * stats.h - the stats thread: every stats_interval it takes a snapshot of the service (arenas,
 * allocation latency, sessions) and writes it to SQLite in one transaction, never on the
 * request path. Lifetime counters survive restarts; rows older than stats_retention go.
 *
 * Schema (version 1; meta.schema_version says which):
 *   meta(key TEXT PRIMARY KEY, value TEXT)
 *   snapshot(id INTEGER PRIMARY KEY, ts_ms, uptime_ms, clients, requests, shares,
 *            final)                          -- final = 1 for the one written at shutdown
 *   arena_snapshot(snapshot_id, arena, size, quantum, busy_bytes, free_bytes, lazy_bytes,
 *            pooled_bytes, busy_blocks, free_blocks, lazy_blocks, pooled_blocks, largest_free,
 *            fragmentation REAL,             -- 1 - largest_free / free_bytes
 *            allocs, frees, fails, drains, released_bytes, release_calls, pool_hits,
 *            punch_failures,
 *            interval_allocs, alloc_p50_ns, alloc_p90_ns, alloc_p99_ns, alloc_p999_ns)
 *                                            -- latency of alloc requests since the last row
 *   session_snapshot(snapshot_id, session_id, pid, uid, gid, name, held_bytes, held_ranges,
 *            allocs, frees, connected_ms)
 *   event(id INTEGER PRIMARY KEY, ts_ms, kind, detail)   -- start, stop, reload, ...
 *   lifetime(name TEXT PRIMARY KEY, allocs, frees, fails, drains, released_bytes, requests,
 *            starts, updated_ms)            -- one row per arena name, plus "vad" for requests
 *                                            -- and starts; summed over every run
 * Every counter is an INTEGER; times are milliseconds since the epoch unless named _ns.
 */
#ifndef VAD_STATS_H
#define VAD_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "service.h"

struct vad_stats_writer;

/* Open (or create) the database at path, record a start event and start the thread that
 * writes a snapshot every interval_ms and prunes rows older than retention_ms. Returns 0, or
 * -1 with a reason in err (the daemon then runs without stats). Events queued with
 * vad_service_event are written with each snapshot. */
int vad_stats_start(struct vad_service *svc, const char *path, uint64_t interval_ms,
		    uint64_t retention_ms, struct vad_stats_writer **out, char *err,
		    size_t err_len);

/* Write the final snapshot and a stop event, stop the thread, close the database. */
void vad_stats_stop(struct vad_stats_writer *w);

#endif
