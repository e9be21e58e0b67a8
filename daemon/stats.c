/* stats.c - SQLite snapshots of the running service on their own thread; see stats.h.
 *
 * The columns of arena_snapshot, session_snapshot and lifetime are the tables of
 * proto/stats_fields.h: the first schema, the migrations that add columns, the INSERTs (bound
 * by parameter name), the session rows copied under the registry's lock and the lifetime sums
 * are all generated from them, so a column is added in one place.
 */
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "commit.h"
#include "latency.h"
#include "log.h"
#include "registry.h"
#include "saturate.h"
#include "session.h"
#include "stats_fields.h"
#include "stats_schema.h"

/* ---- the statements -------------------------------------------------------------------- */

static const char insert_snapshot_sql[] =
    "INSERT INTO snapshot(ts_ms, uptime_ms, clients, requests, shares, final)"
    " VALUES(:ts_ms, :uptime_ms, :clients, :requests, :shares, :final)";

/* clang-format off */
static const char insert_arena_sql[] =
    "INSERT INTO arena_snapshot(snapshot_id, arena"
    VAD_STATS_ARENA_COLUMNS(VAD_STATS_SQL_COLUMN)
    ") VALUES(:snapshot_id, :arena"
    VAD_STATS_ARENA_COLUMNS(VAD_STATS_SQL_PARAM) ")";

static const char insert_session_snapshot_sql[] =
    "INSERT INTO session_snapshot(snapshot_id, session_id"
    VAD_STATS_SESSION_COLUMNS(VAD_STATS_SQL_COLUMN)
    ") VALUES(:snapshot_id, :session_id"
    VAD_STATS_SESSION_COLUMNS(VAD_STATS_SQL_PARAM) ")";
/* clang-format on */

/* A session seen now is connected (or ended by the stop, in the final snapshot); one that was
 * connected at the last snapshot and is gone now has closed since. Its peak is the most it held
 * at any snapshot. The parameters are session_snapshot's, so one session row binds both. */
static const char upsert_session_sql[] =
    "INSERT INTO session(session_id, connect_ms, pid, uid, gid, name, disconnect_ms,"
    " end_state, allocs, frees, peak_bytes, last_seen_ms) VALUES(:session_id, :connected_ms,"
    " :pid, :uid, :gid, :name, :disconnect_ms, :end_state, :allocs, :frees, :held_bytes, :now)"
    " ON CONFLICT(session_id, connect_ms) DO UPDATE SET name = excluded.name,"
    " disconnect_ms = excluded.disconnect_ms, end_state = excluded.end_state,"
    " allocs = excluded.allocs, frees = excluded.frees,"
    " peak_bytes = MAX(peak_bytes, excluded.peak_bytes),"
    " last_seen_ms = excluded.last_seen_ms";

static const char close_gone_sessions_sql[] =
    "UPDATE session SET end_state = 'closed', disconnect_ms = :now"
    " WHERE end_state = 'connected' AND last_seen_ms < :now";

static const char insert_event_sql[] =
    "INSERT INTO event(ts_ms, kind, detail) VALUES(:ts_ms, :kind, :detail)";

/* clang-format off */
static const char upsert_lifetime_sql[] =
    "INSERT OR REPLACE INTO lifetime(name"
    VAD_STATS_LIFETIME_COLUMNS(VAD_STATS_SQL_COLUMN)
    ", updated_ms) VALUES(:name"
    VAD_STATS_LIFETIME_COLUMNS(VAD_STATS_SQL_PARAM) ", :updated_ms)";

static const char select_lifetime_sql[] =
    "SELECT name" VAD_STATS_LIFETIME_COLUMNS(VAD_STATS_SQL_COLUMN) " FROM lifetime";
static const char select_lifetime_one_sql[] =
    "SELECT name" VAD_STATS_LIFETIME_COLUMNS(VAD_STATS_SQL_COLUMN) " FROM lifetime"
    " WHERE name = :name";
/* clang-format on */

/* Rows older than the retention go, children before their snapshot. */
#define N_PRUNE 5
static const char *const prune_sql[N_PRUNE] = {
    "DELETE FROM arena_snapshot WHERE snapshot_id IN"
    " (SELECT id FROM snapshot WHERE ts_ms < :before)",
    "DELETE FROM session_snapshot WHERE snapshot_id IN"
    " (SELECT id FROM snapshot WHERE ts_ms < :before)",
    "DELETE FROM snapshot WHERE ts_ms < :before",
    "DELETE FROM event WHERE ts_ms < :before",
    "DELETE FROM session WHERE end_state != 'connected' AND disconnect_ms < :before",
};

/* ---- the writer ------------------------------------------------------------------------ */

/* Lifetime counters, one field per column of the lifetime table. */
struct lifetime_counts {
#define LIFETIME_FIELD(name, ...) uint64_t name;
	VAD_STATS_LIFETIME_COLUMNS(LIFETIME_FIELD)
#undef LIFETIME_FIELD
};

/* One session_snapshot row, copied under the registry's lock and written later. */
#define SESSION_FIELD_INTEGER(name)	   uint64_t name;
#define SESSION_FIELD_TEXT(name)	   char name[VAD_NAME_MAX + 1];
#define SESSION_ROW_FIELD(name, type, ...) SESSION_FIELD_##type(name)
struct session_row {
	uint64_t session_id;
	VAD_STATS_SESSION_COLUMNS(SESSION_ROW_FIELD)
};
#undef SESSION_ROW_FIELD
#undef SESSION_FIELD_TEXT
#undef SESSION_FIELD_INTEGER

/* What the writer keeps about the arena in one slot: a tenant arena's slot may hold a new
 * arena after the last one closed, told apart by its generation. */
struct arena_slot_stats {
	uint64_t generation;	      /* of the arena these are about; 0 before the first sight */
	struct lifetime_counts base;  /* its lifetime row as found then: earlier runs and opens */
	struct vad_latency_sum *prev; /* its latency sums at the last snapshot */
};

struct vad_stats_writer {
	struct vad_service *svc;
	sqlite3 *db;
	char path[PATH_MAX];
	uint64_t interval_ms, retention_ms;
	struct arena_slot_stats *slots; /* per slot of the service's arena array */
	struct lifetime_counts vad_base;
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

/* Bind by parameter name (":name"); a statement without that parameter is left alone. Named
 * after the SQL types, so a table row picks its own with bind_##type. */
static void bind_INTEGER(sqlite3_stmt *st, const char *param, uint64_t v)
{
	int i = sqlite3_bind_parameter_index(st, param);
	if (i)
		sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

static void bind_REAL(sqlite3_stmt *st, const char *param, double v)
{
	int i = sqlite3_bind_parameter_index(st, param);
	if (i)
		sqlite3_bind_double(st, i, v);
}

/* text must stay valid until the statement is reset; NULL binds NULL. */
static void bind_TEXT(sqlite3_stmt *st, const char *param, const char *text)
{
	int i = sqlite3_bind_parameter_index(st, param);
	if (i && text)
		sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
}

/* Run a bound statement, then reset it and clear its bindings. */
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

/* ---- what a snapshot reads --------------------------------------------------------------- */

struct session_list {
	struct session_row *rows;
	size_t n, cap;
};

/* Called with holders_lock held: copy, write later. */
static void collect_session(void *arg, struct vad_holder *h)
{
	struct session_list *l = arg;
	struct vad_session *s = h->owner;
	if (!s)
		return; /* no session: holds restored from the state file (persist.h) */
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
	/* The sources session_snapshot's rows name (proto/stats_fields.h). */
#define PEER(field)	       ((uint32_t)s->peer.field)
#define SESSION_NAME()	       s->name
#define HOLDER(field)	       __atomic_load_n(&h->field, __ATOMIC_RELAXED)
#define SESSION_COUNTER(field) __atomic_load_n(&s->field, __ATOMIC_RELAXED)
#define SESSION_FIELD(field)   s->field
#define COPY_INTEGER(dst, v)   (dst) = (v)
#define COPY_TEXT(dst, v)      memcpy(dst, v, sizeof(dst))

#define COLLECT(name, type, since, source) COPY_##type(r->name, source);
	VAD_STATS_SESSION_COLUMNS(COLLECT)
#undef COLLECT
#undef COPY_TEXT
#undef COPY_INTEGER
#undef SESSION_FIELD
#undef SESSION_COUNTER
#undef HOLDER
#undef SESSION_NAME
#undef PEER
}

/* One arena's figures for its arena_snapshot row. */
struct arena_figures {
	struct vad_arena *a;
	struct va_stats vs;
	struct vad_latency_sum lat;	    /* now */
	const struct vad_latency_sum *prev; /* at the last snapshot */
};

static double fragmentation(const struct va_stats *vs)
{
	return vs->free_bytes ? 1.0 - (double)vs->largest_free / (double)vs->free_bytes : 0.0;
}

static uint64_t alloc_count(const struct arena_figures *f)
{
	uint64_t n = 0;
	vad_latency_quantile(&f->lat, f->prev, 0.50, &n);
	return n;
}

/* Bind every arena_snapshot column of f, by name, from the source its row names. */
static void bind_arena_row(sqlite3_stmt *st, const struct arena_figures *f)
{
	/* The sources arena_snapshot's rows name (proto/stats_fields.h). */
#define VA_STATS(field)	    f->vs.field
#define FRAGMENTATION()	    fragmentation(&f->vs)
#define PUNCH_FAILURES()    __atomic_load_n(&f->a->punch_failures, __ATOMIC_RELAXED)
#define LATENCY_COUNT()	    alloc_count(f)
#define LATENCY_QUANTILE(q) vad_latency_quantile(&f->lat, f->prev, q, NULL)
#define RESIDENT_BYTES()    vad_arena_resident_bytes(f->a)
#define COMMITTED_BYTES()   vad_arena_committed_bytes(f->a, &f->vs)
#define COMMIT_FAILURES()   __atomic_load_n(&f->a->commit_failures, __ATOMIC_RELAXED)

#define BIND_ARENA_COLUMN(name, type, since, source) bind_##type(st, ":" #name, source);
	VAD_STATS_ARENA_COLUMNS(BIND_ARENA_COLUMN)
#undef BIND_ARENA_COLUMN
#undef RESIDENT_BYTES
#undef COMMITTED_BYTES
#undef COMMIT_FAILURES
#undef LATENCY_QUANTILE
#undef LATENCY_COUNT
#undef PUNCH_FAILURES
#undef FRAGMENTATION
#undef VA_STATS
}

/* This run's lifetime counts of an arena: its va_stats; the daemon's counters are 0 here. */
static struct lifetime_counts arena_run_counts(const struct va_stats *vs)
{
#define ARENA(field)			     vs->field
#define DAEMON(field)			     0
#define RUN_COUNT(name, type, since, source) .name = source,
	return (struct lifetime_counts){VAD_STATS_LIFETIME_COLUMNS(RUN_COUNT)};
#undef RUN_COUNT
#undef DAEMON
#undef ARENA
}

/* ---- writing a snapshot ------------------------------------------------------------------ */

/* The statements of one snapshot, prepared together. */
struct snapshot_statements {
	sqlite3_stmt *snap, *arena, *sess, *seen, *gone, *ev, *life, *prune[N_PRUNE];
};

static void finalize_statements(struct snapshot_statements *s)
{
	sqlite3_stmt **all[] = {&s->snap, &s->arena, &s->sess, &s->seen,
				&s->gone, &s->ev,    &s->life};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		sqlite3_finalize(*all[i]);
		*all[i] = NULL;
	}
	for (int k = 0; k < N_PRUNE; k++) {
		sqlite3_finalize(s->prune[k]);
		s->prune[k] = NULL;
	}
}

static int prepare_statements(struct vad_stats_writer *w, struct snapshot_statements *s)
{
	s->snap = prepare(w, insert_snapshot_sql);
	s->arena = prepare(w, insert_arena_sql);
	s->sess = prepare(w, insert_session_snapshot_sql);
	s->seen = prepare(w, upsert_session_sql);
	s->gone = prepare(w, close_gone_sessions_sql);
	s->ev = prepare(w, insert_event_sql);
	s->life = prepare(w, upsert_lifetime_sql);
	bool ok = s->snap && s->arena && s->sess && s->seen && s->gone && s->ev && s->life;
	for (int k = 0; k < N_PRUNE; k++)
		ok = (s->prune[k] = prepare(w, prune_sql[k])) && ok;
	return ok ? 0 : -1;
}

/* What one snapshot writes, taken before its transaction. */
struct snapshot_input {
	bool final; /* the one written at shutdown */
	uint64_t now, requests;
	struct session_list sessions;
	struct vad_event *events;
};

static int write_lifetime(struct vad_stats_writer *w, sqlite3_stmt *st, const char *name,
			  const struct lifetime_counts *base,
			  const struct lifetime_counts *run_counts, uint64_t now)
{
	bind_TEXT(st, ":name", name);
#define BIND_LIFETIME_COLUMN(column, ...)                                                          \
	bind_INTEGER(st, ":" #column, vad_sat_add(base->column, run_counts->column));
	VAD_STATS_LIFETIME_COLUMNS(BIND_LIFETIME_COLUMN)
#undef BIND_LIFETIME_COLUMN
	bind_INTEGER(st, ":updated_ms", now);
	return run(w, st);
}

/* The lifetime row of name (zeros when there is none). */
static void load_lifetime_row(struct vad_stats_writer *w, const char *name,
			      struct lifetime_counts *out)
{
	memset(out, 0, sizeof(*out));
	sqlite3_stmt *st = prepare(w, select_lifetime_one_sql);
	if (!st)
		return;
	bind_TEXT(st, ":name", name);
	if (sqlite3_step(st) == SQLITE_ROW) {
		int k = 1; /* the columns in select_lifetime_sql's order, after the name */
#define LOAD_LIFETIME_COLUMN(column, ...) out->column = (uint64_t)sqlite3_column_int64(st, k++);
		VAD_STATS_LIFETIME_COLUMNS(LOAD_LIFETIME_COLUMN)
#undef LOAD_LIFETIME_COLUMN
	}
	sqlite3_finalize(st);
}

/* Slot i's state for arena a: on the first sight of a (a start, a tenant arena opened in
 * the slot), its lifetime row so far and its latency now. False when out of memory. */
static bool slot_for(struct vad_stats_writer *w, size_t i, const struct vad_arena *a)
{
	struct arena_slot_stats *sl = &w->slots[i];
	if (sl->generation == a->generation)
		return true;
	if (!sl->prev && !(sl->prev = malloc(sizeof(*sl->prev))))
		return false;
	load_lifetime_row(w, a->conf.name, &sl->base);
	vad_latency_sum(a->alloc_latency, sl->prev);
	sl->generation = a->generation;
	return true;
}

/* The arena_snapshot row and lifetime row of arena a, in slot i. */
static int write_arena(struct vad_stats_writer *w, const struct snapshot_statements *s,
		       int64_t snapshot_id, size_t i, struct vad_arena *a, uint64_t now)
{
	if (!slot_for(w, i, a))
		return 0; /* out of memory: the row is left out this time */
	struct arena_slot_stats *sl = &w->slots[i];
	struct arena_figures f = {.a = a, .prev = sl->prev};
	va_get_stats(f.a->vs, &f.vs);
	vad_latency_sum(a->alloc_latency, &f.lat);
	bind_INTEGER(s->arena, ":snapshot_id", (uint64_t)snapshot_id);
	bind_TEXT(s->arena, ":arena", f.a->conf.name);
	bind_arena_row(s->arena, &f);
	*sl->prev = f.lat;
	if (run(w, s->arena) < 0)
		return -1;
	struct lifetime_counts run_counts = arena_run_counts(&f.vs);
	return write_lifetime(w, s->life, f.a->conf.name, &sl->base, &run_counts, now);
}

static void bind_session_row(sqlite3_stmt *st, const struct session_row *r)
{
	bind_INTEGER(st, ":session_id", r->session_id);
#define BIND_SESSION_COLUMN(name, type, ...) bind_##type(st, ":" #name, r->name);
	VAD_STATS_SESSION_COLUMNS(BIND_SESSION_COLUMN)
#undef BIND_SESSION_COLUMN
}

/* Each session's session_snapshot row and its session row; then close the ones gone since. */
static int write_sessions(struct vad_stats_writer *w, const struct snapshot_statements *s,
			  int64_t snapshot_id, const struct snapshot_input *in)
{
	for (size_t i = 0; i < in->sessions.n; i++) {
		const struct session_row *r = &in->sessions.rows[i];
		bind_INTEGER(s->sess, ":snapshot_id", (uint64_t)snapshot_id);
		bind_session_row(s->sess, r);
		if (run(w, s->sess) < 0)
			return -1;
		bind_session_row(s->seen, r);
		if (in->final)
			bind_INTEGER(s->seen, ":disconnect_ms", in->now);
		bind_TEXT(s->seen, ":end_state", in->final ? "daemon-stop" : "connected");
		bind_INTEGER(s->seen, ":now", in->now);
		if (run(w, s->seen) < 0)
			return -1;
	}
	bind_INTEGER(s->gone, ":now", in->now);
	return run(w, s->gone);
}

static int write_events(struct vad_stats_writer *w, sqlite3_stmt *st, const struct vad_event *e)
{
	for (; e; e = e->next) {
		bind_INTEGER(st, ":ts_ms", e->ts_ms);
		bind_TEXT(st, ":kind", e->kind);
		bind_TEXT(st, ":detail", e->detail);
		if (run(w, st) < 0)
			return -1;
	}
	return 0;
}

static int prune(struct vad_stats_writer *w, const struct snapshot_statements *s, uint64_t now)
{
	if (!w->retention_ms || now <= w->retention_ms)
		return 0;
	for (int k = 0; k < N_PRUNE; k++) {
		bind_INTEGER(s->prune[k], ":before", now - w->retention_ms);
		if (run(w, s->prune[k]) < 0)
			return -1;
	}
	return 0;
}

/* Every row of one snapshot, inside the caller's transaction. */
static int write_rows(struct vad_stats_writer *w, const struct snapshot_statements *s,
		      const struct snapshot_input *in)
{
	struct vad_service *svc = w->svc;
	bind_INTEGER(s->snap, ":ts_ms", in->now);
	bind_INTEGER(s->snap, ":uptime_ms", vad_service_uptime_ms(svc));
	bind_INTEGER(s->snap, ":clients", __atomic_load_n(&svc->reg->n_holders, __ATOMIC_RELAXED));
	bind_INTEGER(s->snap, ":requests", in->requests);
	bind_INTEGER(s->snap, ":shares", vad_registry_tokens(svc->reg));
	bind_INTEGER(s->snap, ":final", in->final ? 1 : 0);
	if (run(w, s->snap) < 0)
		return -1;
	int64_t id = sqlite3_last_insert_rowid(w->db);
	for (size_t i = 0; i < svc->n_slots; i++) {
		struct vad_arena *a = vad_arena_pin(svc->tenants, i);
		int rc = a ? write_arena(w, s, id, i, a, in->now) : 0;
		vad_arena_unpin(svc->tenants, a);
		if (rc < 0)
			return -1;
	}
	if (write_sessions(w, s, id, in) < 0 || write_events(w, s->ev, in->events) < 0)
		return -1;
	struct lifetime_counts vad_run = {.requests = in->requests, .starts = 1};
	if (write_lifetime(w, s->life, "vad", &w->vad_base, &vad_run, in->now) < 0)
		return -1;
	return prune(w, s, in->now);
}

/* Take the service's figures and write them as one snapshot in one transaction. */
static int store_snapshot(struct vad_stats_writer *w, bool final)
{
	struct snapshot_input in = {.final = final};
	vad_registry_for_each_holder(w->svc->reg, collect_session, &in.sessions);
	in.events = vad_service_take_events(w->svc);
	in.now = vad_realtime_ms();
	in.requests = __atomic_load_n(&w->svc->requests, __ATOMIC_RELAXED);

	struct snapshot_statements s = {0};
	int rc = -1;
	if (prepare_statements(w, &s) == 0 && exec(w, "BEGIN IMMEDIATE") == 0) {
		rc = write_rows(w, &s, &in) == 0 && exec(w, "COMMIT") == 0 ? 0 : -1;
		if (rc)
			sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
	}
	finalize_statements(&s);
	free(in.sessions.rows);
	vad_events_free(in.events);
	if (rc == 0 && w->failing)
		log_notice("stats: writing %s works again", w->path);
	w->failing = rc != 0;
	return rc;
}

/* A snapshot of the running daemon: its sessions are connected. */
static int write_snapshot(struct vad_stats_writer *w)
{
	return store_snapshot(w, false);
}

/* The one written at shutdown (final = 1): its sessions end with the daemon (daemon-stop). */
static int write_final_snapshot(struct vad_stats_writer *w)
{
	return store_snapshot(w, true);
}

/* ---- thread ------------------------------------------------------------------------------ */

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

/* The pid the start event of the last run recorded (", pid N" in its detail), 0 if none. */
static long last_start_pid(struct vad_stats_writer *w)
{
	sqlite3_stmt *st = prepare(w, "SELECT detail FROM event WHERE kind = 'start'"
				      " ORDER BY id DESC LIMIT 1");
	long pid = 0;
	if (st && sqlite3_step(st) == SQLITE_ROW) {
		const char *d = (const char *)sqlite3_column_text(st, 0);
		const char *at = d ? strstr(d, ", pid ") : NULL;
		if (at)
			pid = strtol(at + 6, NULL, 10);
	}
	sqlite3_finalize(st);
	return pid > 0 ? pid : 0;
}

/* A previous vad whose last snapshot is not a final one never stopped cleanly (killed,
 * crashed, the machine lost power): say so with an "unclean-stop" event dated at that
 * snapshot, the last moment it was seen, so the history does not read "start, start". */
static void record_unclean_stop(struct vad_stats_writer *w)
{
	sqlite3_stmt *last = prepare(w, "SELECT ts_ms, uptime_ms, requests, final FROM snapshot"
					" ORDER BY id DESC LIMIT 1");
	if (!last)
		return;
	bool unclean = false;
	uint64_t ts = 0, uptime = 0, requests = 0;
	if (sqlite3_step(last) == SQLITE_ROW && sqlite3_column_int(last, 3) == 0) {
		unclean = true;
		ts = (uint64_t)sqlite3_column_int64(last, 0);
		uptime = (uint64_t)sqlite3_column_int64(last, 1);
		requests = (uint64_t)sqlite3_column_int64(last, 2);
	}
	sqlite3_finalize(last);
	if (!unclean)
		return;
	char pid[32] = "pid unknown", seen[32] = "?";
	long p = last_start_pid(w);
	if (p)
		snprintf(pid, sizeof(pid), "pid %ld", p);
	time_t t = (time_t)(ts / 1000);
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(seen, sizeof(seen), "%Y-%m-%d %H:%M:%S UTC", &tm);
	char detail[256];
	snprintf(
	    detail, sizeof(detail),
	    "no stop recorded: the daemon was killed or crashed (%s; last snapshot %s, %" PRIu64
	    " s after its start, at %" PRIu64 " requests)",
	    pid, seen, uptime / 1000, requests);
	sqlite3_stmt *ins = prepare(w, "INSERT INTO event(ts_ms, kind, detail)"
				       " VALUES (:ts_ms, 'unclean-stop', :detail)");
	if (!ins)
		return;
	bind_INTEGER(ins, ":ts_ms", ts);
	bind_TEXT(ins, ":detail", detail);
	if (run(w, ins) == 0)
		log_notice("stats: the previous vad ended uncleanly: %s", detail);
	sqlite3_finalize(ins);
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
	if (vad_stats_migrate(w->db, w->path, err, err_len) < 0) {
		close_database(w);
		return -1;
	}
	if (exec(w, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;") < 0) {
		snprintf(err, err_len, "cannot set up the stats database %s: %s", w->path,
			 sqlite3_errmsg(w->db));
		close_database(w);
		return -1;
	}
	record_unclean_stop(w);
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
	for (size_t i = 0; i < w->svc->n_slots; i++)
		w->slots[i].generation = 0; /* read again from this database at the first sight */
	char detail[96];
	snprintf(detail, sizeof(detail), "vad %s, start %llu, pid %ld", VAD_DAEMON_VERSION,
		 (unsigned long long)vad_sat_add(w->vad_base.starts, 1), (long)getpid());
	vad_service_event(w->svc, "start", detail);
	write_snapshot(w); /* the start is on disk at once */

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
			write_snapshot(w);
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

static void load_lifetime(struct vad_stats_writer *w)
{
	sqlite3_stmt *st = prepare(w, select_lifetime_sql);
	if (!st)
		return;
	while (sqlite3_step(st) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);
		struct lifetime_counts *b = NULL;
		if (name && strcmp(name, "vad") == 0)
			b = &w->vad_base;
		if (!b)
			continue; /* an arena's row: read at its first sight (slot_for) */
		int k = 1;	  /* the columns in select_lifetime_sql's order, after the name */
#define LOAD_LIFETIME_COLUMN(column, ...) b->column = (uint64_t)sqlite3_column_int64(st, k++);
		VAD_STATS_LIFETIME_COLUMNS(LOAD_LIFETIME_COLUMN)
#undef LOAD_LIFETIME_COLUMN
	}
	sqlite3_finalize(st);
}

static void free_writer(struct vad_stats_writer *w)
{
	if (w->db)
		sqlite3_close(w->db);
	for (size_t i = 0; w->slots && i < w->svc->n_slots; i++)
		free(w->slots[i].prev);
	free(w->slots);
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
	w->slots = calloc(svc->n_slots, sizeof(*w->slots));
	if (!w->slots) {
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
		const char *why = w->svc->stop_reason[0] ? w->svc->stop_reason : "stopped";
		char detail[160];
		snprintf(detail, sizeof(detail), "%s after %" PRIu64 " s up, %" PRIu64 " requests",
			 why, vad_service_uptime_ms(w->svc) / 1000,
			 __atomic_load_n(&w->svc->requests, __ATOMIC_RELAXED));
		vad_service_event(w->svc, "stop", detail);
		if (write_final_snapshot(w) == 0)
			log_info("stats: final snapshot written to %s", w->path);
	}
	free_writer(w);
}
