/* cmd_sessions.c - past and present client sessions, read from the daemon's stats file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "statsdb.h"
#include "vactl.h"

struct sessions_args {
	const char *db;
	uint64_t since_ms; /* 0: everything */
};

enum { OPT_DB = 0x5100, OPT_SINCE };

static int on_sessions_opt(int opt, const char *arg, void *ctx)
{
	struct sessions_args *a = ctx;
	switch (opt) {
	case OPT_DB:
		a->db = arg;
		return VACTL_EXIT_OK;
	case OPT_SINCE:
		if (strcmp(arg, "all") == 0)
			a->since_ms = 0;
		else if (vactl_parse_duration(arg, &a->since_ms) < 0 || a->since_ms == 0)
			return vactl_usage_error(&vactl_cmd_sessions,
						 "bad duration '%s' (try 10m, 2h, 7d, all)", arg);
		return VACTL_EXIT_OK;
	}
	return VACTL_EXIT_USAGE;
}

static const char *fmt_time(sqlite3_stmt *st, int i, char *buf, size_t len)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return "-";
	time_t t = (time_t)(sqlite3_column_int64(st, i) / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const char *s = (const char *)sqlite3_column_text(st, i);
	return s ? s : "";
}

static uint64_t col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

/* One row as JSON: disconnect_ms is null while the session is connected. */
static json_object *session_json(sqlite3_stmt *st)
{
	json_object *js = json_object_new_object();
	vactl_json_add_u64(js, "session_id", col_u64(st, 0));
	vactl_json_add_u64(js, "pid", col_u64(st, 1));
	vactl_json_add_u64(js, "uid", col_u64(st, 2));
	vactl_json_add_u64(js, "gid", col_u64(st, 3));
	vactl_json_add_str(js, "name", col_text(st, 4));
	vactl_json_add_u64(js, "connect_ms", col_u64(st, 5));
	if (sqlite3_column_type(st, 6) == SQLITE_NULL)
		json_object_object_add(js, "disconnect_ms", NULL);
	else
		vactl_json_add_u64(js, "disconnect_ms", col_u64(st, 6));
	vactl_json_add_str(js, "end", col_text(st, 7));
	vactl_json_add_u64(js, "allocs", col_u64(st, 8));
	vactl_json_add_u64(js, "frees", col_u64(st, 9));
	vactl_json_add_u64(js, "peak_bytes", col_u64(st, 10));
	vactl_json_add_u64(js, "last_seen_ms", col_u64(st, 11));
	return js;
}

static int show_sessions(const struct vactl_statsdb *s, int64_t since_ts, json_object *out)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT session_id, pid, uid, gid, name, connect_ms, disconnect_ms,"
			       " end_state, allocs, frees, peak_bytes, last_seen_ms FROM session"
			       " WHERE disconnect_ms IS NULL OR disconnect_ms >= ?1"
			       " ORDER BY connect_ms, session_id",
			       -1, &st, NULL) != SQLITE_OK)
		return vactl_statsdb_fail(s, "reading sessions");
	sqlite3_bind_int64(st, 1, since_ts);
	json_object *arr = out ? json_object_new_array() : NULL;
	static const char *const heads[] = {"NAME",  "PID",    "UID",	"CONNECTED", "DISCONNECTED",
					    "ENDED", "ALLOCS", "FREES", "PEAK"};
	struct vactl_table *t = out ? NULL : vactl_table_new(9, heads);
	if (!out && !t) {
		sqlite3_finalize(st);
		fprintf(stderr, "vactl: out of memory\n");
		return VACTL_EXIT_REFUSED;
	}
	int step, rows = 0;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		rows++;
		if (arr) {
			json_object_array_add(arr, session_json(st));
			continue;
		}
		char pid[16], uid[16], on[32], off[32], allocs[24], frees[24], peak[32];
		snprintf(pid, sizeof(pid), "%llu", (unsigned long long)col_u64(st, 1));
		snprintf(uid, sizeof(uid), "%llu", (unsigned long long)col_u64(st, 2));
		snprintf(allocs, sizeof(allocs), "%llu", (unsigned long long)col_u64(st, 8));
		snprintf(frees, sizeof(frees), "%llu", (unsigned long long)col_u64(st, 9));
		vactl_table_row(t, col_text(st, 4), pid, uid, fmt_time(st, 5, on, sizeof(on)),
				fmt_time(st, 6, off, sizeof(off)), col_text(st, 7), allocs, frees,
				vactl_fmt_size(col_u64(st, 10), peak, sizeof(peak)));
	}
	sqlite3_finalize(st);
	if (arr) {
		json_object_object_add(out, "sessions", arr);
	} else {
		vactl_table_print(t);
		if (!rows)
			printf("(no sessions in that period)\n");
	}
	return step == SQLITE_DONE ? VACTL_EXIT_OK : vactl_statsdb_fail(s, "reading sessions");
}

static int run_sessions(struct vactl_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"db", required_argument, NULL, OPT_DB},
	    {"since", required_argument, NULL, OPT_SINCE},
	    {0},
	};
	struct sessions_args a = {.since_ms = 24 * 3600 * 1000};
	int first;
	int rc = vactl_parse_cmd(&vactl_cmd_sessions, o, argc, argv, NULL, opts, on_sessions_opt,
				 &a, &first);
	if (rc)
		return rc < 0 ? VACTL_EXIT_OK : rc;
	if ((rc = vactl_check_operands(&vactl_cmd_sessions, argc, argv, first, 0)))
		return rc;
	/* The session table came with schema version 2. */
	struct vactl_statsdb sdb;
	if ((rc = vactl_statsdb_open(o, a.db, 2, &sdb)))
		return rc;
	int64_t since_ts = vactl_statsdb_since(a.since_ms);
	json_object *j = o->json ? json_object_new_object() : NULL;
	if (j) {
		vactl_json_add_str(j, "db", sdb.path);
		vactl_json_add_u64(j, "since_ts_ms", (uint64_t)since_ts);
	} else {
		printf("client sessions in %s%s\n", sdb.path,
		       a.since_ms ? "" : " (everything kept)");
	}
	rc = show_sessions(&sdb, since_ts, j);
	return vactl_statsdb_finish(&sdb, j, rc);
}

const struct vactl_cmd vactl_cmd_sessions = {
    .name = "sessions",
    .args = "[--db PATH] [--since D|all]",
    .summary = "past and present client sessions from the SQLite file",
    .help = "Reads the daemon's stats database directly (read only; the daemon need not run) and\n"
	    "lists the client sessions connected at some time in the last day (--since 2h, 7d,\n"
	    "all): name, pid, uid, when it connected and disconnected, how it ended, allocations,\n"
	    "frees and the most bytes it held. The daemon updates them at each stats snapshot:\n"
	    "ENDED is connected, closed (gone at a snapshot; the disconnect time is that\n"
	    "snapshot's), daemon-stop (still connected when vad stopped), lost (vad ended without\n"
	    "a final snapshot; the time is when it was last seen) or unrecorded (from an older\n"
	    "database). PEAK is the most held at any snapshot; a session shorter than the\n"
	    "stats interval may not appear. The database is --db PATH, else vad-stats.db beside\n"
	    "the socket named by --socket or $VAD_SOCKET, else /var/lib/vad/stats.db.\n"
	    "JSON: {db, since_ts_ms (0: all), sessions: [{session_id, pid, uid, gid, name,\n"
	    "connect_ms, disconnect_ms (null: connected), end, allocs, frees, peak_bytes,\n"
	    "last_seen_ms}]}\n",
    .run = run_sessions,
};
