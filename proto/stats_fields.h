/*
 * stats_fields.h - the columns of the stats database, one table row each, shared by the daemon
 * that writes them (daemon/stats.c) and vactl that reads them (client/vactl/cmd_history.c).
 * Macros only: no code, no dependency.
 *
 * A row is X(name, type, since, source):
 *   name    the column;
 *   type    its SQL type, INTEGER or REAL (every INTEGER goes in as SQLite's signed 64 bits and
 *           is read back as unsigned);
 *   since   the schema version that added it: the columns of version 1 make the first CREATE
 *           TABLE and each later version's migration adds its own, so columns are only ever
 *           appended, and a reader of an older file reads NULL for a newer column;
 *   source  where the daemon takes the value from, a call of a macro daemon/stats.c defines
 *           (VA_STATS(f): the arena's va_stats field f; readers ignore it).
 * The key columns (arena_snapshot's snapshot_id and arena, session_snapshot's snapshot_id and
 * session_id, lifetime's name and updated_ms) are not rows: they are written by hand.
 *
 * A new column: a row in a new version's list, that version's migration in daemon/stats.c
 * (which adds the list's columns), and VAD_STATS_SCHEMA_VERSION one higher. Every column of
 * session_snapshot and lifetime is version 1's; a new one gets a version list as arena's did.
 */
#ifndef VAD_STATS_FIELDS_H
#define VAD_STATS_FIELDS_H

/* The schema the daemon writes and the newest vactl reads (PRAGMA user_version). */
#define VAD_STATS_SCHEMA_VERSION 4

/* arena_snapshot, one row per arena per snapshot: version 1's columns. */
#define VAD_STATS_ARENA_COLUMNS_V1(X)                                                              \
	X(size, INTEGER, 1, VA_STATS(size))                                                        \
	X(quantum, INTEGER, 1, VA_STATS(quantum))                                                  \
	X(busy_bytes, INTEGER, 1, VA_STATS(busy_bytes))                                            \
	X(free_bytes, INTEGER, 1, VA_STATS(free_bytes))                                            \
	X(lazy_bytes, INTEGER, 1, VA_STATS(lazy_bytes))                                            \
	X(pooled_bytes, INTEGER, 1, VA_STATS(pooled_bytes))                                        \
	X(busy_blocks, INTEGER, 1, VA_STATS(busy_blocks))                                          \
	X(free_blocks, INTEGER, 1, VA_STATS(free_blocks))                                          \
	X(lazy_blocks, INTEGER, 1, VA_STATS(lazy_blocks))                                          \
	X(pooled_blocks, INTEGER, 1, VA_STATS(pooled_blocks))                                      \
	X(largest_free, INTEGER, 1, VA_STATS(largest_free))                                        \
	X(fragmentation, REAL, 1, FRAGMENTATION()) /* 1 - largest_free / free_bytes */             \
	X(allocs, INTEGER, 1, VA_STATS(allocs))                                                    \
	X(frees, INTEGER, 1, VA_STATS(frees))                                                      \
	X(fails, INTEGER, 1, VA_STATS(fails))                                                      \
	X(drains, INTEGER, 1, VA_STATS(drains))                                                    \
	X(released_bytes, INTEGER, 1, VA_STATS(released_bytes))                                    \
	X(release_calls, INTEGER, 1, VA_STATS(release_calls))                                      \
	X(pool_hits, INTEGER, 1, VA_STATS(pool_hits))                                              \
	X(punch_failures, INTEGER, 1, PUNCH_FAILURES())                                            \
	X(interval_allocs, INTEGER, 1, LATENCY_COUNT()) /* alloc requests since the last row */    \
	X(alloc_p50_ns, INTEGER, 1, LATENCY_QUANTILE(0.50))                                        \
	X(alloc_p90_ns, INTEGER, 1, LATENCY_QUANTILE(0.90))                                        \
	X(alloc_p99_ns, INTEGER, 1, LATENCY_QUANTILE(0.99))                                        \
	X(alloc_p999_ns, INTEGER, 1, LATENCY_QUANTILE(0.999))

/* Version 2 added the latency maximum. */
#define VAD_STATS_ARENA_COLUMNS_V2(X) X(alloc_max_ns, INTEGER, 2, LATENCY_QUANTILE(1.0))

/* Version 3 added the arena file's allocated blocks x 512, which busy, free, lazy and pooled do
 * not show: pages a client wrote into free space. */
#define VAD_STATS_ARENA_COLUMNS_V3(X) X(resident_bytes, INTEGER, 3, RESIDENT_BYTES())

/* Version 4 added what a commit = reserve arena committed for its live ranges (resident bytes
 * count whatever any client wrote), and its alloc requests refused for want of memory. */
#define VAD_STATS_ARENA_COLUMNS_V4(X)                                                              \
	X(committed_bytes, INTEGER, 4, COMMITTED_BYTES())                                          \
	X(commit_failures, INTEGER, 4, COMMIT_FAILURES())

/* Every arena_snapshot column after (snapshot_id, arena), in table order. */
#define VAD_STATS_ARENA_COLUMNS(X)                                                                 \
	VAD_STATS_ARENA_COLUMNS_V1(X)                                                              \
	VAD_STATS_ARENA_COLUMNS_V2(X) VAD_STATS_ARENA_COLUMNS_V3(X) VAD_STATS_ARENA_COLUMNS_V4(X)

/* session_snapshot, one row per session per snapshot, after (snapshot_id, session_id); the
 * name is TEXT, the rest INTEGER. */
#define VAD_STATS_SESSION_COLUMNS(X)                                                               \
	X(pid, INTEGER, 1, PEER(pid))                                                              \
	X(uid, INTEGER, 1, PEER(uid))                                                              \
	X(gid, INTEGER, 1, PEER(gid))                                                              \
	X(name, TEXT, 1, SESSION_NAME())                                                           \
	X(held_bytes, INTEGER, 1, HOLDER(held_bytes))                                              \
	X(held_ranges, INTEGER, 1, HOLDER(held_refs))                                              \
	X(allocs, INTEGER, 1, SESSION_COUNTER(allocs))                                             \
	X(frees, INTEGER, 1, SESSION_COUNTER(frees))                                               \
	X(connected_ms, INTEGER, 1, SESSION_FIELD(connected_ms))

/* lifetime, one row per arena name plus "vad", after name and before updated_ms: counters
 * summed over every run, each taken from an arena's va_stats (ARENA) or from the daemon's
 * counts (DAEMON: requests handled, and 1 start per run); 0 in the rows of the other kind. */
#define VAD_STATS_LIFETIME_COLUMNS(X)                                                              \
	X(allocs, INTEGER, 1, ARENA(allocs))                                                       \
	X(frees, INTEGER, 1, ARENA(frees))                                                         \
	X(fails, INTEGER, 1, ARENA(fails))                                                         \
	X(drains, INTEGER, 1, ARENA(drains))                                                       \
	X(released_bytes, INTEGER, 1, ARENA(released_bytes))                                       \
	X(requests, INTEGER, 1, DAEMON(requests))                                                  \
	X(starts, INTEGER, 1, DAEMON(starts))

/* Pieces of SQL made from a table row: ", name" and ", :name" (a named parameter). */
#define VAD_STATS_SQL_COLUMN(name, ...) ", " #name
#define VAD_STATS_SQL_PARAM(name, ...)	", :" #name

#endif
