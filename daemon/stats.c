/* stats.c - SQLite snapshots of the running service on their own thread; see stats.h. */
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "latency.h"
#include "log.h"
#include "registry.h"
#include "saturate.h"
#include "session.h"

/* The schema this vad writes; PRAGMA user_version and meta.schema_version both say it. */
#define SCHEMA_VERSION 3

/* Version 1, the first layout: meta.schema_version = '1', user_version left at 0. A new
 * database is created as version 1 and then migrated like any other. */
static const char schema_v1_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS snapshot(id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL,"
    " uptime_ms INTEGER, clients INTEGER, requests INTEGER, shares INTEGER,"
    " final INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS snapshot_ts ON snapshot(ts_ms);"
    "CREATE TABLE IF NOT EXISTS arena_snapshot(snapshot_id INTEGER NOT NULL,"
    " arena TEXT NOT NULL, size INTEGER, quantum INTEGER, busy_bytes INTEGER,"
    " free_bytes INTEGER, lazy_bytes INTEGER, pooled_bytes INTEGER, busy_blocks INTEGER,"
    " free_blocks INTEGER, lazy_blocks INTEGER, pooled_blocks INTEGER, largest_free INTEGER,"
    " fragmentation REAL, allocs INTEGER, frees INTEGER, fails INTEGER, drains INTEGER,"
    " released_bytes INTEGER, release_calls INTEGER, pool_hits INTEGER,"
    " punch_failures INTEGER, interval_allocs INTEGER, alloc_p50_ns INTEGER,"
    " alloc_p90_ns INTEGER, alloc_p99_ns INTEGER, alloc_p999_ns INTEGER,"
    " PRIMARY KEY(snapshot_id, arena));"
    "CREATE TABLE IF NOT EXISTS session_snapshot(snapshot_id INTEGER NOT NULL,"
    " session_id INTEGER NOT NULL, pid INTEGER, uid INTEGER, gid INTEGER, name TEXT,"
    " held_bytes INTEGER, held_ranges INTEGER, allocs INTEGER, frees INTEGER,"
    " connected_ms INTEGER, PRIMARY KEY(snapshot_id, session_id));"
    "CREATE TABLE IF NOT EXISTS event(id INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL,"
    " kind TEXT NOT NULL, detail TEXT);"
    "CREATE INDEX IF NOT EXISTS event_ts ON event(ts_ms);"
    "CREATE TABLE IF NOT EXISTS lifetime(name TEXT PRIMARY KEY, allocs INTEGER,"
    " frees INTEGER, fails INTEGER, drains INTEGER, released_bytes INTEGER,"
    " requests INTEGER, starts INTEGER, updated_ms INTEGER);"
    "INSERT OR IGNORE INTO meta VALUES('schema_version', '1');";

/* Version 1 -> 2: the latency maximum the issue asks for per arena, and one row per client
 * session. Sessions of a version-1 database are rebuilt from their snapshots; version 1 did not
 * record how they ended, except those still there at a final (shutdown) snapshot. */
static const char migrate_v2_sql[] =
    "ALTER TABLE arena_snapshot ADD COLUMN alloc_max_ns INTEGER;"
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

/* Version 2 -> 3: each arena's resident bytes (its file's allocated blocks), which busy, free,
 * lazy and pooled do not show: pages a client wrote into free space. Older rows have NULL. */
static const char migrate_v3_sql[] =
    "ALTER TABLE arena_snapshot ADD COLUMN resident_bytes INTEGER;";

/* Each step takes a database from version to - 1 to version to, in one transaction. */
static const struct migration {
	int to;
	const char *sql;
} migrations[] = {
    {1, schema_v1_sql},
    {2, migrate_v2_sql},
    {3, migrate_v3_sql},
};

/* Counters of earlier runs, added to this run's. */
struct lifetime_base {
	uint64_t allocs, frees, fails, drains, released_bytes, requests, starts;
};

struct session_row {
	uint64_t session_id, held_bytes, held_ranges, allocs, frees, connected_ms;
	uint32_t pid, uid, gid;
	char name[VAD_NAME_MAX + 1];
};

struct vad_stats_writer {
	struct vad_service *svc;
	sqlite3 *db;
	char path[PATH_MAX];
	uint64_t interval_ms, retention_ms;
	struct lifetime_base *arena_base; /* per arena */
	struct lifetime_base vad_base;
	struct vad_latency_sum *prev_latency; /* per arena, at the last snapshot */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock; /* stopping */
	pthread_cond_t wake;
	bool stopping;
	bool failing; /* the last write failed (log once per streak) */
};

/* ---- small SQLite helpers --------------------------------------------------------------- */

static int exec(struct vad_stats_writer *w, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(w->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		log_warn("stats: %s: %s", w->path, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static void bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* Bind a list of integers from 1, run the statement and reset it. */
static int run(struct vad_stats_writer *w, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		if (!w->failing)
			log_warn("stats: writing %s failed: %s", w->path, sqlite3_errmsg(w->db));
		return -1;
	}
	return 0;
}

static sqlite3_stmt *prepare(struct vad_stats_writer *w, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(w->db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_warn("stats: %s: %s", w->path, sqlite3_errmsg(w->db));
		return NULL;
	}
	return st;
}

/* ---- snapshot ---------------------------------------------------------------------------- */

struct session_list {
	struct session_row *rows;
	size_t n, cap;
};

/* Called with holders_lock held: copy, write later. */
static void collect_session(void *arg, struct vad_holder *h)
{
	struct session_list *l = arg;
	struct vad_session *s = h->owner;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		struct session_row *rows = realloc(l->rows, cap * sizeof(*rows));
		if (!rows)
			return; /* a snapshot without some sessions beats none */
		l->rows = rows;
		l->cap = cap;
	}
	struct session_row *r = &l->rows[l->n++];
	r->session_id = s->id;
	r->pid = (uint32_t)s->peer.pid;
	r->uid = (uint32_t)s->peer.uid;
	r->gid = (uint32_t)s->peer.gid;
	memcpy(r->name, s->name, sizeof(r->name));
	r->held_bytes = __atomic_load_n(&h->held_bytes, __ATOMIC_RELAXED);
	r->held_ranges = __atomic_load_n(&h->held_refs, __ATOMIC_RELAXED);
	r->allocs = __atomic_load_n(&s->allocs, __ATOMIC_RELAXED);
	r->frees = __atomic_load_n(&s->frees, __ATOMIC_RELAXED);
	r->connected_ms = s->connected_ms;
}

static int write_arena(struct vad_stats_writer *w, sqlite3_stmt *st, sqlite3_stmt *life,
		       int64_t snap, size_t i, uint64_t now_ms)
{
	struct vad_arena *a = w->svc->arenas[i];
	struct va_stats vs;
	va_get_stats(a->vs, &vs);
	struct vad_latency_sum lat;
	vad_latency_sum(&w->svc->alloc_latency[i], &lat);
	uint64_t n_allocs;
	uint64_t p50 = vad_latency_quantile(&lat, &w->prev_latency[i], 0.50, &n_allocs);
	uint64_t p90 = vad_latency_quantile(&lat, &w->prev_latency[i], 0.90, NULL);
	uint64_t p99 = vad_latency_quantile(&lat, &w->prev_latency[i], 0.99, NULL);
	uint64_t p999 = vad_latency_quantile(&lat, &w->prev_latency[i], 0.999, NULL);
	uint64_t max = vad_latency_quantile(&lat, &w->prev_latency[i], 1.0, NULL);
	w->prev_latency[i] = lat;
	double frag = vs.free_bytes ? 1.0 - (double)vs.largest_free / (double)vs.free_bytes : 0.0;

	int k = 1;
	sqlite3_bind_int64(st, k++, snap);
	sqlite3_bind_text(st, k++, a->conf.name, -1, SQLITE_STATIC);
	const uint64_t v[] = {vs.size,	      vs.quantum,	vs.busy_bytes,	vs.free_bytes,
			      vs.lazy_bytes,  vs.pooled_bytes,	vs.busy_blocks, vs.free_blocks,
			      vs.lazy_blocks, vs.pooled_blocks, vs.largest_free};
	for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++)
		bind_u64(st, k++, v[j]);
	sqlite3_bind_double(st, k++, frag);
	const uint64_t c[] = {vs.allocs,
			      vs.frees,
			      vs.fails,
			      vs.drains,
			      vs.released_bytes,
			      vs.release_calls,
			      vs.pool_hits,
			      __atomic_load_n(&a->punch_failures, __ATOMIC_RELAXED),
			      n_allocs,
			      p50,
			      p90,
			      p99,
			      p999,
			      max,
			      vad_arena_resident_bytes(a)};
	for (size_t j = 0; j < sizeof(c) / sizeof(c[0]); j++)
		bind_u64(st, k++, c[j]);
	if (run(w, st) < 0)
		return -1;

	const struct lifetime_base *b = &w->arena_base[i];
	k = 1;
	sqlite3_bind_text(life, k++, a->conf.name, -1, SQLITE_STATIC);
	bind_u64(life, k++, vad_sat_add(b->allocs, vs.allocs));
	bind_u64(life, k++, vad_sat_add(b->frees, vs.frees));
	bind_u64(life, k++, vad_sat_add(b->fails, vs.fails));
	bind_u64(life, k++, vad_sat_add(b->drains, vs.drains));
	bind_u64(life, k++, vad_sat_add(b->released_bytes, vs.released_bytes));
	bind_u64(life, k++, 0);
	bind_u64(life, k++, 0);
	bind_u64(life, k++, now_ms);
	return run(w, life);
}

static int write_snapshot(struct vad_stats_writer *w, bool final)
{
	struct vad_service *svc = w->svc;
	struct session_list sessions = {0};
	vad_registry_for_each_holder(svc->reg, collect_session, &sessions);
	struct vad_event *events = vad_service_take_events(svc);
	uint64_t now = vad_realtime_ms();
	uint64_t requests = __atomic_load_n(&svc->requests, __ATOMIC_RELAXED);
	int rc = -1;

	sqlite3_stmt *snap = prepare(w, "INSERT INTO snapshot(ts_ms, uptime_ms, clients, requests,"
					" shares, final) VALUES(?,?,?,?,?,?)");
	sqlite3_stmt *arena =
	    prepare(w, "INSERT INTO arena_snapshot VALUES(?,?,?,?,?,?,?,?,?,?,?,?,"
		       "?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
	sqlite3_stmt *sess =
	    prepare(w, "INSERT INTO session_snapshot VALUES(?,?,?,?,?,?,?,?,?,?,?)");
	/* A session seen now is connected (or ended by the stop, in the final snapshot); one that
	 * was connected at the last snapshot and is gone now has closed since. Its peak is the
	 * most it held at any snapshot. */
	sqlite3_stmt *seen = prepare(
	    w,
	    "INSERT INTO session(session_id, connect_ms, pid, uid, gid, name, disconnect_ms,"
	    " end_state, allocs, frees, peak_bytes, last_seen_ms) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"
	    " ON CONFLICT(session_id, connect_ms) DO UPDATE SET name = excluded.name,"
	    " disconnect_ms = excluded.disconnect_ms, end_state = excluded.end_state,"
	    " allocs = excluded.allocs, frees = excluded.frees,"
	    " peak_bytes = MAX(peak_bytes, excluded.peak_bytes),"
	    " last_seen_ms = excluded.last_seen_ms");
	sqlite3_stmt *gone = prepare(w, "UPDATE session SET end_state = 'closed', disconnect_ms = ?"
					" WHERE end_state = 'connected' AND last_seen_ms < ?");
	sqlite3_stmt *ev = prepare(w, "INSERT INTO event(ts_ms, kind, detail) VALUES(?,?,?)");
	sqlite3_stmt *life =
	    prepare(w, "INSERT OR REPLACE INTO lifetime VALUES(?,?,?,?,?,?,?,?,?)");
	sqlite3_stmt *prune[5] = {
	    prepare(w, "DELETE FROM arena_snapshot WHERE snapshot_id IN"
		       " (SELECT id FROM snapshot WHERE ts_ms < ?)"),
	    prepare(w, "DELETE FROM session_snapshot WHERE snapshot_id IN"
		       " (SELECT id FROM snapshot WHERE ts_ms < ?)"),
	    prepare(w, "DELETE FROM snapshot WHERE ts_ms < ?"),
	    prepare(w, "DELETE FROM event WHERE ts_ms < ?"),
	    prepare(w, "DELETE FROM session WHERE end_state != 'connected' AND disconnect_ms < ?"),
	};
	if (!snap || !arena || !sess || !seen || !gone || !ev || !life || !prune[0] || !prune[1] ||
	    !prune[2] || !prune[3] || !prune[4])
		goto out;
	if (exec(w, "BEGIN IMMEDIATE") < 0)
		goto out;

	bind_u64(snap, 1, now);
	bind_u64(snap, 2, vad_service_uptime_ms(svc));
	bind_u64(snap, 3, __atomic_load_n(&svc->reg->n_holders, __ATOMIC_RELAXED));
	bind_u64(snap, 4, requests);
	bind_u64(snap, 5, vad_registry_tokens(svc->reg));
	sqlite3_bind_int(snap, 6, final ? 1 : 0);
	if (run(w, snap) < 0)
		goto rollback;
	int64_t id = sqlite3_last_insert_rowid(w->db);

	for (size_t i = 0; i < svc->n_arenas; i++)
		if (write_arena(w, arena, life, id, i, now) < 0)
			goto rollback;
	for (size_t i = 0; i < sessions.n; i++) {
		const struct session_row *r = &sessions.rows[i];
		sqlite3_bind_int64(sess, 1, id);
		bind_u64(sess, 2, r->session_id);
		bind_u64(sess, 3, r->pid);
		bind_u64(sess, 4, r->uid);
		bind_u64(sess, 5, r->gid);
		sqlite3_bind_text(sess, 6, r->name, -1, SQLITE_STATIC);
		bind_u64(sess, 7, r->held_bytes);
		bind_u64(sess, 8, r->held_ranges);
		bind_u64(sess, 9, r->allocs);
		bind_u64(sess, 10, r->frees);
		bind_u64(sess, 11, r->connected_ms);
		if (run(w, sess) < 0)
			goto rollback;
		bind_u64(seen, 1, r->session_id);
		bind_u64(seen, 2, r->connected_ms);
		bind_u64(seen, 3, r->pid);
		bind_u64(seen, 4, r->uid);
		bind_u64(seen, 5, r->gid);
		sqlite3_bind_text(seen, 6, r->name, -1, SQLITE_STATIC);
		if (final)
			bind_u64(seen, 7, now);
		sqlite3_bind_text(seen, 8, final ? "daemon-stop" : "connected", -1, SQLITE_STATIC);
		bind_u64(seen, 9, r->allocs);
		bind_u64(seen, 10, r->frees);
		bind_u64(seen, 11, r->held_bytes);
		bind_u64(seen, 12, now);
		if (run(w, seen) < 0)
			goto rollback;
	}
	bind_u64(gone, 1, now);
	bind_u64(gone, 2, now);
	if (run(w, gone) < 0)
		goto rollback;
	for (struct vad_event *e = events; e; e = e->next) {
		bind_u64(ev, 1, e->ts_ms);
		sqlite3_bind_text(ev, 2, e->kind, -1, SQLITE_STATIC);
		if (e->detail)
			sqlite3_bind_text(ev, 3, e->detail, -1, SQLITE_STATIC);
		if (run(w, ev) < 0)
			goto rollback;
	}
	sqlite3_bind_text(life, 1, "vad", -1, SQLITE_STATIC);
	for (int k = 2; k <= 6; k++)
		bind_u64(life, k, 0);
	bind_u64(life, 7, vad_sat_add(w->vad_base.requests, requests));
	bind_u64(life, 8, vad_sat_add(w->vad_base.starts, 1));
	bind_u64(life, 9, now);
	if (run(w, life) < 0)
		goto rollback;
	if (w->retention_ms && now > w->retention_ms) {
		for (int k = 0; k < 5; k++) {
			bind_u64(prune[k], 1, now - w->retention_ms);
			if (run(w, prune[k]) < 0)
				goto rollback;
		}
	}
	if (exec(w, "COMMIT") < 0)
		goto rollback;
	rc = 0;
	goto out;
rollback:
	sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
out:
	sqlite3_finalize(snap);
	sqlite3_finalize(arena);
	sqlite3_finalize(sess);
	sqlite3_finalize(seen);
	sqlite3_finalize(gone);
	sqlite3_finalize(ev);
	sqlite3_finalize(life);
	for (int k = 0; k < 5; k++)
		sqlite3_finalize(prune[k]);
	free(sessions.rows);
	vad_events_free(events);
	if (rc == 0 && w->failing)
		log_notice("stats: writing %s works again", w->path);
	w->failing = rc != 0;
	return rc;
}

/* ---- thread ------------------------------------------------------------------------------ */

static int migrate(struct vad_stats_writer *w, char *err, size_t err_len);
static void load_lifetime(struct vad_stats_writer *w);

/* How long to wait between attempts to open a database that could not be opened. */
static uint64_t retry_ms(const struct vad_stats_writer *w)
{
	if (w->interval_ms < 1000)
		return 1000;
	return w->interval_ms > 30000 ? 30000 : w->interval_ms;
}

static void close_database(struct vad_stats_writer *w)
{
	if (w->db)
		sqlite3_close(w->db);
	w->db = NULL;
}

/* Open (or create) the database, migrate it, record the start and write a first
 * snapshot. On failure the writer is left without a database, to be retried. */
static int open_database(struct vad_stats_writer *w, char *err, size_t err_len)
{
	int rc = sqlite3_open_v2(w->path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_len, "cannot open the stats database %s: %s", w->path,
			 w->db ? sqlite3_errmsg(w->db) : sqlite3_errstr(rc));
		close_database(w);
		return -1;
	}
	sqlite3_busy_timeout(w->db, 2000); /* a reader such as vactl history may hold it */
	if (migrate(w, err, err_len) < 0) {
		close_database(w);
		return -1;
	}
	if (exec(w, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;") < 0) {
		snprintf(err, err_len, "cannot set up the stats database %s: %s", w->path,
			 sqlite3_errmsg(w->db));
		close_database(w);
		return -1;
	}
	/* Sessions still connected when the last vad ended without a final snapshot: they
	 * ended with it, some time after they were last seen. */
	if (exec(w, "UPDATE session SET end_state = 'lost', disconnect_ms = last_seen_ms"
		    " WHERE end_state = 'connected'") < 0) {
		snprintf(err, err_len, "cannot write the stats database %s: %s", w->path,
			 sqlite3_errmsg(w->db));
		close_database(w);
		return -1;
	}
	load_lifetime(w);
	for (size_t i = 0; i < w->svc->n_arenas; i++)
		vad_latency_sum(&w->svc->alloc_latency[i], &w->prev_latency[i]);
	char detail[64];
	snprintf(detail, sizeof(detail), "vad %s, start %llu", VAD_DAEMON_VERSION,
		 (unsigned long long)vad_sat_add(w->vad_base.starts, 1));
	vad_service_event(w->svc, "start", detail);
	write_snapshot(w, false); /* the start is on disk at once */

	return 0;
}

static void *stats_main(void *arg)
{
	struct vad_stats_writer *w = arg;
	pthread_setname_np(pthread_self(), "vad-stats");
	pthread_mutex_lock(&w->lock);
	while (!w->stopping) {
		struct timespec deadline;
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		uint64_t wait_ms = w->db ? w->interval_ms : retry_ms(w);
		deadline.tv_sec += (time_t)(wait_ms / 1000);
		deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		int rc = 0;
		while (!w->stopping && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&w->wake, &w->lock, &deadline);
		if (w->stopping)
			break;
		pthread_mutex_unlock(&w->lock);
		if (w->db) {
			write_snapshot(w, false);
		} else {
			char err[PATH_MAX + 256];
			if (open_database(w, err, sizeof(err)) == 0)
				log_notice("stats: %s is open now; snapshots resume", w->path);
		}
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* ---- open / close ------------------------------------------------------------------------ */

/* One integer from a query's first row, or -1 with err set. */
static int64_t query_int(struct vad_stats_writer *w, const char *sql, char *err, size_t err_len)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(w->db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	else
		snprintf(err, err_len, "cannot read the stats database %s: %s", w->path,
			 sqlite3_errmsg(w->db));
	sqlite3_finalize(st);
	return v;
}

/* The schema version of the file: PRAGMA user_version from version 2 on; before that a
 * meta.schema_version row (version 1); 0 for an empty file. -1 with err set when it is not a
 * stats database or cannot be read. */
static int read_schema_version(struct vad_stats_writer *w, char *err, size_t err_len)
{
	int64_t user = query_int(w, "PRAGMA user_version", err, err_len);
	if (user != 0)
		return user < 0 ? -1 : (int)user;
	int64_t tables = query_int(w, "SELECT COUNT(*) FROM sqlite_master", err, err_len);
	if (tables <= 0)
		return (int)tables;
	int64_t meta = query_int(w,
				 "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
				 " AND name = 'meta'",
				 err, err_len);
	if (meta < 0)
		return -1;
	int64_t v = meta ? query_int(w,
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
			 w->path);
		return -1;
	}
	return v > INT32_MAX ? INT32_MAX : (int)v;
}

/* Bring the file to SCHEMA_VERSION one step at a time, each step in one transaction, or
 * refuse a file written by a newer vad (it is left untouched). */
static int migrate(struct vad_stats_writer *w, char *err, size_t err_len)
{
	int version = read_schema_version(w, err, err_len);
	if (version < 0)
		return -1;
	if (version > SCHEMA_VERSION) {
		snprintf(err, err_len,
			 "%s has stats schema version %d, newer than version %d that this vad "
			 "writes; not writing to it (upgrade vad or move the file away)",
			 w->path, version, SCHEMA_VERSION);
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
		if (exec(w, "BEGIN IMMEDIATE") < 0 || exec(w, m->sql) < 0 || exec(w, bump) < 0 ||
		    exec(w, "COMMIT") < 0) {
			snprintf(err, err_len,
				 "cannot migrate the stats database %s to version %d: %s", w->path,
				 m->to, sqlite3_errmsg(w->db));
			sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
			return -1;
		}
		if (version > 0)
			log_notice("stats: %s migrated from schema version %d to %d", w->path,
				   m->to - 1, m->to);
	}
	return 0;
}

static void load_lifetime(struct vad_stats_writer *w)
{
	sqlite3_stmt *st = prepare(w, "SELECT name, allocs, frees, fails, drains, released_bytes,"
				      " requests, starts FROM lifetime");
	if (!st)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		struct lifetime_base *b = NULL;
		if (name && strcmp(name, "vad") == 0)
			b = &w->vad_base;
		for (size_t i = 0; !b && name && i < w->svc->n_arenas; i++)
			if (strcmp(name, w->svc->arenas[i]->conf.name) == 0)
				b = &w->arena_base[i];
		if (!b)
			continue; /* an arena that is no longer configured */
		b->allocs = (uint64_t)sqlite3_column_int64(st, 1);
		b->frees = (uint64_t)sqlite3_column_int64(st, 2);
		b->fails = (uint64_t)sqlite3_column_int64(st, 3);
		b->drains = (uint64_t)sqlite3_column_int64(st, 4);
		b->released_bytes = (uint64_t)sqlite3_column_int64(st, 5);
		b->requests = (uint64_t)sqlite3_column_int64(st, 6);
		b->starts = (uint64_t)sqlite3_column_int64(st, 7);
	}
	sqlite3_finalize(st);
}

static void free_writer(struct vad_stats_writer *w)
{
	if (w->db)
		sqlite3_close(w->db);
	free(w->arena_base);
	free(w->prev_latency);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->wake);
	free(w);
}

int vad_stats_start(struct vad_service *svc, const char *path, uint64_t interval_ms,
		    uint64_t retention_ms, struct vad_stats_writer **out, char *err, size_t err_len)
{
	*out = NULL;
	struct vad_stats_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, err_len, "out of memory starting the stats thread");
		return -1;
	}
	w->svc = svc;
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->interval_ms = interval_ms ? interval_ms : 10000;
	w->retention_ms = retention_ms;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	w->arena_base = calloc(svc->n_arenas, sizeof(*w->arena_base));
	w->prev_latency = calloc(svc->n_arenas, sizeof(*w->prev_latency));
	if (!w->arena_base || !w->prev_latency) {
		snprintf(err, err_len, "out of memory starting the stats thread");
		free_writer(w);
		return -1;
	}
	int opened = open_database(w, err, err_len);
	if (opened < 0) {
		/* Said once; the thread retries quietly and says when it succeeds. */
		log_warn("running without stats for now: %s (retrying every %llu s)", err,
			 (unsigned long long)(retry_ms(w) / 1000));
	}

	int e = pthread_create(&w->thread, NULL, stats_main, w);
	if (e) {
		snprintf(err, err_len, "cannot start the stats thread: %s", strerror(e));
		free_writer(w);
		return -1;
	}
	w->thread_started = true;
	*out = w;
	return opened < 0 ? 1 : 0;
}

void vad_stats_stop(struct vad_stats_writer *w)
{
	if (!w)
		return;
	if (w->thread_started) {
		pthread_mutex_lock(&w->lock);
		w->stopping = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	if (w->db) {
		vad_service_event(w->svc, "stop", NULL);
		if (write_snapshot(w, true) == 0)
			log_info("stats: final snapshot written to %s", w->path);
	}
	free_writer(w);
}
