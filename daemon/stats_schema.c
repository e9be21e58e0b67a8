/* stats_schema.c - the stats database's schema: the first layout and each migration, generated
 * from the column tables of proto/stats_fields.h, and the step-by-step upgrade of an older file. */
#include "stats_schema.h"

#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "stats_fields.h"

/* The schema this vad writes; PRAGMA user_version and meta.schema_version both say it. */
#define SCHEMA_VERSION VAD_STATS_SCHEMA_VERSION

/* ", name TYPE" for a CREATE TABLE, and an ALTER TABLE that adds an arena_snapshot column. */
#define SQL_COLUMN_DEF(name, type, ...) ", " #name " " #type
#define SQL_ADD_ARENA_COLUMN(name, type, ...)                                                      \
	"ALTER TABLE arena_snapshot ADD COLUMN " #name " " #type ";"

/* clang-format off */
/* Version 1, the first layout: meta.schema_version = '1', user_version left at 0. A new
 * database is created as version 1 and then migrated like any other. */
static const char schema_v1_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS snapshot(id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL,"
    " uptime_ms INTEGER, clients INTEGER, requests INTEGER, shares INTEGER,"
    " final INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS snapshot_ts ON snapshot(ts_ms);"
    "CREATE TABLE IF NOT EXISTS arena_snapshot(snapshot_id INTEGER NOT NULL, arena TEXT NOT NULL"
    VAD_STATS_ARENA_COLUMNS_V1(SQL_COLUMN_DEF)
    ", PRIMARY KEY(snapshot_id, arena));"
    "CREATE TABLE IF NOT EXISTS session_snapshot(snapshot_id INTEGER NOT NULL,"
    " session_id INTEGER NOT NULL"
    VAD_STATS_SESSION_COLUMNS(SQL_COLUMN_DEF)
    ", PRIMARY KEY(snapshot_id, session_id));"
    "CREATE TABLE IF NOT EXISTS event(id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL,"
    " kind TEXT NOT NULL, detail TEXT);"
    "CREATE INDEX IF NOT EXISTS event_ts ON event(ts_ms);"
    "CREATE TABLE IF NOT EXISTS lifetime(name TEXT PRIMARY KEY"
    VAD_STATS_LIFETIME_COLUMNS(SQL_COLUMN_DEF)
    ", updated_ms INTEGER);"
    "INSERT OR IGNORE INTO meta VALUES('schema_version', '1');";

/* Version 1 -> 2: the latency maximum per arena, and one row per client session. Sessions of a
 * version-1 database are rebuilt from their snapshots; version 1 did not record how they ended,
 * except those still there at a final (shutdown) snapshot. */
static const char migrate_v2_sql[] =
    VAD_STATS_ARENA_COLUMNS_V2(SQL_ADD_ARENA_COLUMN)
    "CREATE TABLE session(session_id INTEGER NOT NULL, connect_ms INTEGER NOT NULL,"
    " pid INTEGER, uid INTEGER, gid INTEGER, name TEXT, disconnect_ms INTEGER,"
    " end_state TEXT NOT NULL, allocs INTEGER, frees INTEGER, peak_bytes INTEGER,"
    " last_seen_ms INTEGER, PRIMARY KEY(session_id, connect_ms));"
    "CREATE INDEX session_connect ON session(connect_ms);"
    "INSERT INTO session SELECT ss.session_id, ss.connected_ms, MAX(ss.pid), MAX(ss.uid),"
    " MAX(ss.gid), MAX(ss.name), MAX(s.ts_ms),"
    " CASE WHEN MAX(s.final) = 1 THEN 'daemon-stop' ELSE 'unrecorded' END,"
    " MAX(ss.allocs), MAX(ss.frees), MAX(ss.held_bytes), MAX(s.ts_ms)"
    " FROM session_snapshot ss JOIN snapshot s ON s.id = ss.snapshot_id"
    " GROUP BY ss.session_id, ss.connected_ms;";

/* Version 2 -> 3: each arena's resident bytes. Older rows have NULL. */
static const char migrate_v3_sql[] = VAD_STATS_ARENA_COLUMNS_V3(SQL_ADD_ARENA_COLUMN);

/* Version 3 -> 4: each arena's committed bytes and commit failures. Older rows have NULL. */
static const char migrate_v4_sql[] = VAD_STATS_ARENA_COLUMNS_V4(SQL_ADD_ARENA_COLUMN);
/* clang-format on */

/* Each step takes a database from version to - 1 to version to, in one transaction. */
static const struct migration {
	int to;
	const char *sql;
} migrations[] = {
    {1, schema_v1_sql},
    {2, migrate_v2_sql},
    {3, migrate_v3_sql},
    {4, migrate_v4_sql},
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == SCHEMA_VERSION,
	       "one migration per schema version");

/* One step's SQL; -1 (logged with the file's path) when SQLite refuses it. */
static int exec_step(sqlite3 *db, const char *path, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		log_warn("stats: %s: %s", path, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* One integer from a query's first row, or -1 with err set. */
static int64_t query_int(sqlite3 *db, const char *path, const char *sql, char *err, size_t err_len)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	else
		snprintf(err, err_len, "cannot read the stats database %s: %s", path,
			 sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return v;
}

/* The schema version of the file: PRAGMA user_version from version 2 on; before that a
 * meta.schema_version row (version 1); 0 for an empty file. -1 with err set when it is not a
 * stats database or cannot be read. */
static int read_schema_version(sqlite3 *db, const char *path, char *err, size_t err_len)
{
	int64_t user = query_int(db, path, "PRAGMA user_version", err, err_len);
	if (user != 0)
		return user < 0 ? -1 : (int)user;
	int64_t tables = query_int(db, path, "SELECT COUNT(*) FROM sqlite_master", err, err_len);
	if (tables <= 0)
		return (int)tables;
	int64_t meta = query_int(db, path,
				 "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
				 " AND name = 'meta'",
				 err, err_len);
	if (meta < 0)
		return -1;
	int64_t v = meta ? query_int(db, path,
				     "SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM meta"
				     " WHERE key = 'schema_version'",
				     err, err_len)
			 : 0;
	if (v < 0)
		return -1;
	if (v == 0) {
		snprintf(err, err_len,
			 "%s has tables but no stats schema version: not a vad stats database, "
			 "leaving it alone",
			 path);
		return -1;
	}
	return v > INT32_MAX ? INT32_MAX : (int)v;
}

/* Bring the file to SCHEMA_VERSION one step at a time, each step in one transaction, or
 * refuse a file written by a newer vad (it is left untouched). */
int vad_stats_migrate(sqlite3 *db, const char *path, char *err, size_t err_len)
{
	int version = read_schema_version(db, path, err, err_len);
	if (version < 0)
		return -1;
	if (version > SCHEMA_VERSION) {
		snprintf(err, err_len,
			 "%s has stats schema version %d, newer than version %d that this vad "
			 "writes; not writing to it (upgrade vad or move the file away)",
			 path, version, SCHEMA_VERSION);
		return -1;
	}
	for (size_t i = 0; i < sizeof(migrations) / sizeof(migrations[0]); i++) {
		const struct migration *m = &migrations[i];
		if (m->to <= version)
			continue;
		char bump[160];
		snprintf(bump, sizeof(bump),
			 "PRAGMA user_version = %d;"
			 "UPDATE meta SET value = '%d' WHERE key = 'schema_version';",
			 m->to, m->to);
		if (exec_step(db, path, "BEGIN IMMEDIATE") < 0 || exec_step(db, path, m->sql) < 0 ||
		    exec_step(db, path, bump) < 0 || exec_step(db, path, "COMMIT") < 0) {
			snprintf(err, err_len,
				 "cannot migrate the stats database %s to version %d: %s", path,
				 m->to, sqlite3_errmsg(db));
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
		if (version > 0)
			log_notice("stats: %s migrated from schema version %d to %d", path,
				   m->to - 1, m->to);
	}
	return 0;
}
