/* cmd_history.c - the daemon's stats history, read straight from its SQLite file. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "sparkline.h"
#include "stats_fields.h"
#include "statsdb.h"
#include "vactl.h"

struct history_args {
	const char *db;
	const char *arena;
	uint64_t since_ms; /* 0: everything */
	uint64_t limit;	   /* most recent snapshots shown */
	bool oldest_first; /* snapshots and events in time order; newest first by default */
};

enum { OPT_DB = 0x5000, OPT_SINCE, OPT_ARENA, OPT_LIMIT, OPT_OLDEST_FIRST };

static int on_history_opt(int opt, const char *arg, void *ctx)
{
	struct history_args *h = ctx;
	char *end;
	switch (opt) {
	case OPT_DB:
		h->db = arg;
		return VACTL_EXIT_OK;
	case OPT_ARENA:
		h->arena = arg;
		return VACTL_EXIT_OK;
	case OPT_OLDEST_FIRST:
		h->oldest_first = true;
		return VACTL_EXIT_OK;
	case OPT_SINCE:
		if (strcmp(arg, "all") == 0)
			h->since_ms = 0;
		else if (vactl_parse_duration(arg, &h->since_ms) < 0 || h->since_ms == 0)
			return vactl_usage_error(&vactl_cmd_history,
						 "bad duration '%s' (try 10m, 2h, 7d, all)", arg);
		return VACTL_EXIT_OK;
	case OPT_LIMIT:
		errno = 0;
		h->limit = strtoull(arg, &end, 10);
		if (errno || *end || end == arg || h->limit == 0)
			return vactl_usage_error(&vactl_cmd_history, "bad limit '%s'", arg);
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}

static int64_t col(sqlite3_stmt *st, int i)
{
	return sqlite3_column_int64(st, i);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return t ? (const char *)t : "";
}

static const char *fmt_time(int64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "%lld", (long long)ms);
	return buf;
}

/* A latency column (a negative one reads as none). */
static const char *fmt_ns(int64_t ns, char *buf, size_t len)
{
	return vactl_fmt_ns(ns > 0 ? (uint64_t)ns : 0, buf, len);
}

struct history {
	sqlite3 *db;
	const char *path;
	const struct history_args *a;
	const struct vactl_opts *o;
	int64_t since_ts; /* 0: no lower bound */
	int version;	  /* the file's schema version */
};

static int db_fail(const struct history *h, const char *what)
{
	fprintf(stderr, "vactl: %s: %s: %s\n", h->path, what, sqlite3_errmsg(h->db));
	return VACTL_EXIT_REFUSED;
}

/* The arena_snapshot columns after the name, as the shared table lists them. */
#define REAL_COLUMN_INTEGER false
#define REAL_COLUMN_REAL    true
static const struct arena_column {
	const char *name;
	bool real; /* REAL, else INTEGER */
	int since; /* the schema version that added it: NULL in older files */
} arena_columns[] = {
#define ARENA_COLUMN(column, type, version, ...) {#column, REAL_COLUMN_##type, version},
    VAD_STATS_ARENA_COLUMNS(ARENA_COLUMN)
#undef ARENA_COLUMN
};
#define N_ARENA_COLUMNS (sizeof(arena_columns) / sizeof(arena_columns[0]))

/* Each column's place in arena_rows' SELECT: after the name, in table order. */
enum arena_col {
	COL_ARENA_NAME,
#define ARENA_COL(column, ...) COL_##column,
	VAD_STATS_ARENA_COLUMNS(ARENA_COL)
#undef ARENA_COL
};

/* SELECT arena and every column, NULL for those newer than the file. */
static void arena_select_sql(const struct history *h, char *sql, size_t cap)
{
	size_t used = (size_t)snprintf(sql, cap, "SELECT arena");
	for (size_t k = 0; k < N_ARENA_COLUMNS && used < cap; k++)
		used += (size_t)snprintf(
		    sql + used, cap - used, ", %s",
		    arena_columns[k].since <= h->version ? arena_columns[k].name : "NULL");
	if (used < cap)
		snprintf(
		    sql + used, cap - used,
		    " FROM arena_snapshot WHERE snapshot_id = ?1 AND (?2 IS NULL OR arena = ?2)"
		    " ORDER BY arena");
}

/* One arena row as JSON: its name and every column (null where the row has none). */
static json_object *arena_json(sqlite3_stmt *st)
{
	json_object *ja = json_object_new_object();
	vactl_json_add_str(ja, "name", col_text(st, COL_ARENA_NAME));
	for (size_t k = 0; k < N_ARENA_COLUMNS; k++) {
		int i = (int)k + 1;
		json_object *v = NULL;
		if (sqlite3_column_type(st, i) == SQLITE_NULL)
			v = NULL;
		else if (arena_columns[k].real)
			v = json_object_new_double(sqlite3_column_double(st, i));
		else
			v = vactl_json_u64((uint64_t)col(st, i));
		json_object_object_add(ja, arena_columns[k].name, v);
	}
	return ja;
}

static void arena_table_row(sqlite3_stmt *st, int64_t ts_ms, struct vactl_table *t)
{
	char when[32], b[5][32], frag[16], allocs[24], p50[24], p99[24];
	if (sqlite3_column_type(st, COL_resident_bytes) == SQLITE_NULL)
		snprintf(b[4], sizeof(b[4]), "-");
	else
		vactl_fmt_size((uint64_t)col(st, COL_resident_bytes), b[4], 32);
	snprintf(frag, sizeof(frag), "%.1f%%",
		 100.0 * sqlite3_column_double(st, COL_fragmentation));
	snprintf(allocs, sizeof(allocs), "%lld", (long long)col(st, COL_interval_allocs));
	vactl_table_row(t, fmt_time(ts_ms, when, sizeof(when)), col_text(st, COL_ARENA_NAME),
			vactl_fmt_size((uint64_t)col(st, COL_busy_bytes), b[0], 32),
			vactl_fmt_size((uint64_t)col(st, COL_free_bytes), b[1], 32),
			vactl_fmt_size((uint64_t)col(st, COL_lazy_bytes), b[2], 32), b[4],
			vactl_fmt_size((uint64_t)col(st, COL_largest_free), b[3], 32), frag, allocs,
			fmt_ns(col(st, COL_alloc_p50_ns), p50, sizeof(p50)),
			fmt_ns(col(st, COL_alloc_p99_ns), p99, sizeof(p99)));
}

/* One snapshot's arena rows: as JSON into arr, or as table rows. */
static int arena_rows(const struct history *h, int64_t snapshot_id, int64_t ts_ms, json_object *arr,
		      struct vactl_table *t)
{
	char sql[1024];
	arena_select_sql(h, sql, sizeof(sql));
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_fail(h, "reading arena snapshots");
	sqlite3_bind_int64(st, 1, snapshot_id);
	if (h->a->arena)
		sqlite3_bind_text(st, 2, h->a->arena, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 2);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (arr)
			json_object_array_add(arr, arena_json(st));
		else
			arena_table_row(st, ts_ms, t);
	}
	sqlite3_finalize(st);
	return step == SQLITE_DONE ? VACTL_EXIT_OK : db_fail(h, "reading arena snapshots");
}

static int show_snapshots(const struct history *h, json_object *out)
{
	/* The most recent `limit` snapshots, newest first unless asked otherwise. */
	static const char sql[] =
	    "SELECT * FROM (SELECT id, ts_ms, uptime_ms, clients, requests, shares, final"
	    " FROM snapshot WHERE ts_ms >= ?1 ORDER BY ts_ms DESC, id DESC LIMIT ?2)"
	    " ORDER BY ts_ms DESC, id DESC";
	static const char sql_oldest_first[] =
	    "SELECT * FROM (SELECT id, ts_ms, uptime_ms, clients, requests, shares, final"
	    " FROM snapshot WHERE ts_ms >= ?1 ORDER BY ts_ms DESC, id DESC LIMIT ?2)"
	    " ORDER BY ts_ms, id";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(h->db, h->a->oldest_first ? sql_oldest_first : sql, -1, &st, NULL) !=
	    SQLITE_OK)
		return db_fail(h, "reading snapshots");
	sqlite3_bind_int64(st, 1, h->since_ts);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)h->a->limit);
	json_object *arr = out ? json_object_new_array() : NULL;
	static const char *const heads[] = {"TIME",   "ARENA",	  "BUSY",	  "FREE",
					    "LAZY",   "RESIDENT", "LARGEST FREE", "FRAG",
					    "ALLOCS", "P50",	  "P99"};
	struct vactl_table *t = out ? NULL : vactl_table_new(11, heads);
	int rc = VACTL_EXIT_OK, step, rows = 0;
	while (rc == VACTL_EXIT_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
		rows++;
		json_object *ja = NULL;
		if (arr) {
			json_object *js = json_object_new_object();
			vactl_json_add_u64(js, "ts_ms", (uint64_t)col(st, 1));
			vactl_json_add_u64(js, "uptime_ms", (uint64_t)col(st, 2));
			vactl_json_add_u64(js, "clients", (uint64_t)col(st, 3));
			vactl_json_add_u64(js, "requests", (uint64_t)col(st, 4));
			vactl_json_add_u64(js, "shares", (uint64_t)col(st, 5));
			json_object_object_add(js, "final",
					       json_object_new_boolean(col(st, 6) != 0));
			ja = json_object_new_array();
			json_object_object_add(js, "arenas", ja);
			json_object_array_add(arr, js);
		}
		rc = arena_rows(h, col(st, 0), col(st, 1), ja, t);
	}
	if (rc == VACTL_EXIT_OK && step != SQLITE_DONE)
		rc = db_fail(h, "reading snapshots");
	sqlite3_finalize(st);
	if (arr) {
		json_object_object_add(out, "snapshots", arr);
	} else {
		vactl_table_print(t);
		if (!rows)
			printf("(no snapshots in that period)\n");
	}
	return rc;
}

#define N_TRENDS 4

/* One arena's sparklines (n points each), under the heading the first arena prints. */
static void print_trends(const char *arena, size_t n, double *const series[N_TRENDS], bool *header)
{
	static const char *const labels[N_TRENDS] = {"busy", "fragmentation", "alloc p99",
						     "failures"};
	if (!*header) {
		printf("\ntrends (oldest to newest, each scaled to its maximum):\n");
		*header = true;
	}
	printf("  %s (%zu snapshot%s)\n", arena, n, vad_plural(n));
	for (int k = 0; k < N_TRENDS; k++) {
		char line[60 * 4 + 1];
		double max = 0;
		for (size_t i = 0; i < n; i++)
			if (series[k][i] > max)
				max = series[k][i];
		vactl_sparkline(series[k], n, 60, line, sizeof(line));
		char top[32];
		if (k == 0)
			vactl_fmt_size((uint64_t)max, top, sizeof(top));
		else if (k == 1)
			snprintf(top, sizeof(top), "%.1f%%", 100.0 * max);
		else if (k == 2)
			fmt_ns((int64_t)max, top, sizeof(top));
		else
			snprintf(top, sizeof(top), "%.0f", max);
		printf("    %-14s %s  max %s\n", labels[k], line, top);
	}
}

/* Room for one more point in every series; -1 when out of memory. */
static int grow_series(double *series[N_TRENDS], size_t n, size_t *cap)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	for (int k = 0; k < N_TRENDS; k++) {
		double *p = realloc(series[k], ncap * sizeof(double));
		if (!p)
			return -1;
		series[k] = p;
	}
	*cap = ncap;
	return 0;
}

/* Per arena, sparklines over the period: busy bytes, fragmentation, alloc p99 and
 * failures per interval (the fails counter restarts with the daemon: a drop is a restart). */
static int show_trends(const struct history *h)
{
	static const char sql[] =
	    "SELECT a.arena, a.busy_bytes, a.fragmentation, a.alloc_p99_ns, a.fails"
	    " FROM arena_snapshot a JOIN snapshot s ON s.id = a.snapshot_id"
	    " WHERE s.ts_ms >= ?1 AND (?2 IS NULL OR a.arena = ?2) ORDER BY a.arena, s.ts_ms, s.id";
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_fail(h, "reading arena snapshots");
	sqlite3_bind_int64(st, 1, h->since_ts);
	if (h->a->arena)
		sqlite3_bind_text(st, 2, h->a->arena, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 2);
	size_t n = 0, cap = 0;
	double *series[N_TRENDS] = {NULL, NULL, NULL, NULL};
	char arena[128] = "";
	int64_t last_fails = 0;
	int step, rc = VACTL_EXIT_OK;
	bool header = false;
	for (;;) {
		step = sqlite3_step(st);
		const char *name = step == SQLITE_ROW ? col_text(st, 0) : NULL;
		if (n && (!name || strcmp(name, arena) != 0)) {
			print_trends(arena, n, series, &header);
			n = 0;
		}
		if (!name)
			break;
		if (n == 0) {
			snprintf(arena, sizeof(arena), "%s", name);
			last_fails = 0;
		}
		if (grow_series(series, n, &cap) < 0) {
			fprintf(stderr, "vactl: out of memory\n");
			rc = VACTL_EXIT_REFUSED;
			goto out;
		}
		int64_t fails = col(st, 4);
		series[0][n] = (double)col(st, 1);
		series[1][n] = sqlite3_column_double(st, 2);
		series[2][n] = (double)col(st, 3);
		series[3][n] = (double)(fails >= last_fails ? fails - last_fails : fails);
		last_fails = fails;
		n++;
	}
	if (step != SQLITE_DONE)
		rc = db_fail(h, "reading arena snapshots");
out:
	for (int k = 0; k < N_TRENDS; k++)
		free(series[k]);
	sqlite3_finalize(st);
	return rc;
}

static int show_events(const struct history *h, json_object *out)
{
	sqlite3_stmt *st;
	static const char sql[] = "SELECT ts_ms, kind, detail FROM event WHERE ts_ms >= ?1"
				  " ORDER BY ts_ms DESC, id DESC";
	static const char sql_oldest_first[] = "SELECT ts_ms, kind, detail FROM event"
					       " WHERE ts_ms >= ?1 ORDER BY ts_ms, id";
	if (sqlite3_prepare_v2(h->db, h->a->oldest_first ? sql_oldest_first : sql, -1, &st, NULL) !=
	    SQLITE_OK)
		return db_fail(h, "reading events");
	sqlite3_bind_int64(st, 1, h->since_ts);
	json_object *arr = out ? json_object_new_array() : NULL;
	if (!out)
		printf("\nevents (%s first):\n", h->a->oldest_first ? "oldest" : "newest");
	int step, rows = 0;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		rows++;
		if (arr) {
			json_object *je = json_object_new_object();
			vactl_json_add_u64(je, "ts_ms", (uint64_t)col(st, 0));
			vactl_json_add_str(je, "kind", col_text(st, 1));
			vactl_json_add_str(je, "detail", col_text(st, 2));
			json_object_array_add(arr, je);
		} else {
			char when[32];
			printf("  %s  %-12s %s\n", fmt_time(col(st, 0), when, sizeof(when)),
			       col_text(st, 1), col_text(st, 2));
		}
	}
	sqlite3_finalize(st);
	if (arr)
		json_object_object_add(out, "events", arr);
	else if (!rows)
		printf("  (none in that period)\n");
	return step == SQLITE_DONE ? VACTL_EXIT_OK : db_fail(h, "reading events");
}

/* show_lifetime's columns: the name, the counters of the shared table, updated_ms. */
enum lifetime_col {
	LIFE_NAME,
#define LIFE_COL(column, ...) LIFE_##column,
	VAD_STATS_LIFETIME_COLUMNS(LIFE_COL)
#undef LIFE_COL
	    LIFE_updated_ms,
	N_LIFE_COLS
};

static void lifetime_table_row(sqlite3_stmt *st, struct vactl_table *t)
{
	char n[N_LIFE_COLS][24], rel[32];
	for (int k = LIFE_NAME + 1; k < N_LIFE_COLS; k++)
		snprintf(n[k], sizeof(n[k]), "%lld", (long long)col(st, k));
	vactl_table_row(t, col_text(st, LIFE_NAME), n[LIFE_allocs], n[LIFE_frees], n[LIFE_fails],
			n[LIFE_drains],
			vactl_fmt_size((uint64_t)col(st, LIFE_released_bytes), rel, sizeof(rel)),
			n[LIFE_requests], n[LIFE_starts]);
}

static int show_lifetime(const struct history *h, json_object *out)
{
	static const char sql[] = "SELECT name" VAD_STATS_LIFETIME_COLUMNS(
	    VAD_STATS_SQL_COLUMN) ", updated_ms FROM lifetime ORDER BY name";
	static const char *const keys[N_LIFE_COLS] = {
#define LIFE_KEY(column, ...) [LIFE_##column] = #column,
	    VAD_STATS_LIFETIME_COLUMNS(LIFE_KEY)
#undef LIFE_KEY
		[LIFE_updated_ms] = "updated_ms",
	};
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(h->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_fail(h, "reading lifetime counters");
	json_object *arr = out ? json_object_new_array() : NULL;
	static const char *const heads[] = {"NAME",   "ALLOCS",	  "FREES",    "FAILS",
					    "DRAINS", "RELEASED", "REQUESTS", "STARTS"};
	struct vactl_table *t = out ? NULL : vactl_table_new(8, heads);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (arr) {
			json_object *jl = json_object_new_object();
			vactl_json_add_str(jl, "name", col_text(st, LIFE_NAME));
			for (int k = LIFE_NAME + 1; k < N_LIFE_COLS; k++)
				vactl_json_add_u64(jl, keys[k], (uint64_t)col(st, k));
			json_object_array_add(arr, jl);
		} else {
			lifetime_table_row(st, t);
		}
	}
	sqlite3_finalize(st);
	if (arr) {
		json_object_object_add(out, "lifetime", arr);
	} else {
		printf("\nlifetime counters (every run of the daemon):\n");
		vactl_table_print(t);
	}
	return step == SQLITE_DONE ? VACTL_EXIT_OK : db_fail(h, "reading lifetime counters");
}

static int run_history(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"db", required_argument, NULL, OPT_DB},
	    {"since", required_argument, NULL, OPT_SINCE},
	    {"arena", required_argument, NULL, OPT_ARENA},
	    {"limit", required_argument, NULL, OPT_LIMIT},
	    {"oldest-first", no_argument, NULL, OPT_OLDEST_FIRST},
	    {0},
	};
	struct history_args a = {.since_ms = 3600 * 1000, .limit = 20};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_history, o, argc, argv, NULL, opts, on_history_opt, &a,
				 &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	if ((rc = vactl_check_operands(&vactl_cmd_history, argc, argv, first, 0)))
		return rc;
	/* Columns newer than the file (stats_fields.h says which version added each) read NULL. */
	struct vactl_statsdb sdb;
	if ((rc = vactl_statsdb_open(o, a.db, 1, &sdb)))
		return rc;
	struct history h = {
	    .db = sdb.db, .path = sdb.path, .a = &a, .o = o, .version = sdb.version};
	h.since_ts = vactl_statsdb_since(a.since_ms);
	json_object *j = o->json ? json_object_new_object() : NULL;
	if (j) {
		char version[16];
		snprintf(version, sizeof(version), "%d", sdb.version);
		vactl_json_add_str(j, "db", sdb.path);
		vactl_json_add_str(j, "schema_version", version);
		vactl_json_add_u64(j, "since_ts_ms", (uint64_t)h.since_ts);
	} else {
		printf("stats history in %s%s\n", sdb.path, a.since_ms ? "" : " (everything kept)");
	}
	rc = show_snapshots(&h, j);
	if (!rc && !j)
		rc = show_trends(&h);
	if (!rc)
		rc = show_events(&h, j);
	if (!rc)
		rc = show_lifetime(&h, j);
	return vactl_statsdb_finish(&sdb, j, rc);
}

const struct vactl_cmd vactl_cmd_history = {
    .name = "history",
    .args = "[--db PATH] [--since D|all] [--arena A] [--limit N] [--oldest-first]",
    .summary = "stats snapshots, events and lifetime counters from the SQLite file",
    .help =
	"Reads the daemon's stats database directly (the daemon need not run): the most\n"
	"recent snapshots (default 20, --limit) of the last hour (--since 10m, 7d, all),\n"
	"per arena (or only --arena A), with resident bytes ('-' in rows older than\n"
	"schema 3) and allocation latency percentiles (812ns, 4.2us, 1.3ms); the events\n"
	"of that period (start with its pid, stop with its reason, unclean-stop when a\n"
	"vad was killed or crashed, reload, ...); and the lifetime counters summed over\n"
	"every run. Snapshots and events are listed newest first; --oldest-first lists\n"
	"them in time order (JSON too; the trends always run oldest to newest). The\n"
	"database is --db PATH, else vad-stats.db beside the socket named by --socket or\n"
	"$VAD_SOCKET, else /var/lib/vad/stats.db. Exits 1 if it cannot be read.\n"
	"JSON: {db, schema_version, since_ts_ms (0: all), snapshots: [{ts_ms, uptime_ms, clients,\n"
	"requests, shares, final, arenas: [{name, size, quantum, busy_bytes, free_bytes,\n"
	"lazy_bytes, pooled_bytes, busy_blocks, free_blocks, lazy_blocks, pooled_blocks,\n"
	"largest_free, fragmentation, allocs, frees, fails, drains, released_bytes,\n"
	"release_calls, pool_hits, punch_failures, interval_allocs, alloc_p50_ns,\n"
	"alloc_p90_ns, alloc_p99_ns, alloc_p999_ns, alloc_max_ns (null before schema 2),\n"
	"resident_bytes (null before schema 3)}]}], events: [{ts_ms, kind, detail}],\n"
	"lifetime: [{name, allocs, frees, fails, drains, released_bytes, requests, starts,\n"
	"updated_ms}]}\n",
    .run = run_history,
};
