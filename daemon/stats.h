/*
 * stats.h - the stats thread: every stats_interval it takes a snapshot of the service (arenas,
 * allocation latency, sessions) and writes it to SQLite in one transaction, never on the
 * request path. Lifetime counters survive restarts; rows older than stats_retention go.
 *
 * Schema version 3 (PRAGMA user_version; meta.schema_version says the same; version 1 had only
 * meta.schema_version = '1' and lacked alloc_max_ns and the session table; version 2 lacked
 * resident_bytes). A file of an older version is migrated at start, one step per transaction;
 * a newer one is refused, untouched:
 *   meta(key TEXT PRIMARY KEY, value TEXT)
 *   snapshot(id INTEGER PRIMARY KEY, ts_ms, uptime_ms, clients, requests, shares,
 *            final)                          -- final = 1 for the one written at shutdown
 *   arena_snapshot(snapshot_id, arena, ...)   -- one row per arena per snapshot
 *   session_snapshot(snapshot_id, session_id, ...) -- one row per session per snapshot
 *            (the columns after the keys, their types and the version that added each: the
 *            tables of proto/stats_fields.h; resident_bytes is NULL in rows from version 2
 *            and older, alloc_max_ns in rows from version 1)
 *   session(session_id, connect_ms, pid, uid, gid, name, disconnect_ms, end_state, allocs,
 *            frees, peak_bytes, last_seen_ms) -- one row per client session, kept up to date at
 *            each snapshot: end_state is connected, closed (gone at a snapshot; disconnect_ms is
 *            when that snapshot noticed), daemon-stop (still there at the final snapshot), lost
 *            (vad ended without one; disconnect_ms = last seen) or unrecorded (from version 1).
 *            peak_bytes is the most held at any snapshot. A session that comes and goes
 *            between two snapshots is not seen.
 *   event(id INTEGER PRIMARY KEY, ts_ms, kind, detail)   -- start, stop, reload, ...
 *   lifetime(name TEXT PRIMARY KEY, ..., updated_ms) -- one row per arena name, plus "vad"
 *            for requests and starts; summed over every run (VAD_STATS_LIFETIME_COLUMNS)
 * Every counter is an INTEGER; times are milliseconds since the epoch unless named _ns.
 * Lifetime sums stop at 2^64 - 1 rather than wrap; every integer goes in as SQLite's signed
 * 64 bits and is read back as unsigned.
 */
#ifndef VAD_STATS_H
#define VAD_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "service.h"

struct vad_stats_writer;

/* Open (or create) the database at path, record a start event and start the thread that
 * writes a snapshot every interval_ms and prunes rows older than retention_ms. Returns 0;
 * 1 when the database cannot be opened now (the reason is in err and logged once; the
 * thread retries every interval, clamped to 1-30 s, and says when it succeeds); or -1 with
 * a reason in err when the thread cannot start (the daemon then runs without stats).
 * Events queued with vad_service_event are written with each snapshot. */
int vad_stats_start(struct vad_service *svc, const char *path, uint64_t interval_ms,
		    uint64_t retention_ms, struct vad_stats_writer **out, char *err,
		    size_t err_len);

/* Write the final snapshot and a stop event, stop the thread, close the database. */
void vad_stats_stop(struct vad_stats_writer *w);

#endif
