/* statsdb.c - opening the daemon's stats database read only; see statsdb.h. */
#include "statsdb.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "socket_path.h"

/* Where the daemon writes its history when vad.conf leaves stats_db empty: beside its
 * socket (the one vactl would connect to), or the system path for the system socket. */
static char *default_db(const struct vactl_opts *o)
{
	struct vad_socket_choice choice;
	const char *sock = o->socket;
	if (!sock || !*sock) {
		struct vad_socket_env env;
		char err[256];
		vad_socket_env_current(&env);
		if (vad_socket_default(VAD_SOCKET_CLIENT, &env, &choice, err, sizeof(err)) != 0) {
			fprintf(stderr, "vactl: %s; try --db PATH\n", err);
			return NULL;
		}
		sock = choice.path;
	}
	char path[PATH_MAX];
	if (vad_socket_stats_db(sock, path, sizeof(path)) != 0) {
		fprintf(stderr,
			"vactl: the stats database beside %s has too long a path; try --db "
			"PATH\n",
			sock);
		return NULL;
	}
	char *dup = strdup(path);
	if (!dup)
		fprintf(stderr, "vactl: out of memory\n");
	return dup;
}

/* The file is only as trustworthy as whoever could write it (a user daemon's, a copy
 * handed over, --db anywhere): no schema object may call a function with side effects or
 * write anything, and SQLite's defensive mode forbids the ways to corrupt a file. */
static int harden(struct vactl_statsdb *s)
{
	int on = -1, trusted = -1;
	if (sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, &on) != SQLITE_OK || on != 1 ||
	    sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, &trusted) != SQLITE_OK ||
	    trusted != 0)
		return vactl_statsdb_fail(s, "cannot switch on SQLite's defensive options");
	return VACTL_EXIT_OK;
}

int vactl_statsdb_fail(const struct vactl_statsdb *s, const char *what)
{
	fprintf(stderr, "vactl: %s: %s: %s\n", s->path, what, sqlite3_errmsg(s->db));
	return VACTL_EXIT_REFUSED;
}

/* One integer from sql's first row into *v; -1 if the query fails or has no row. */
static int query_int(sqlite3 *db, const char *sql, int64_t *v)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	int rc = -1;
	if (sqlite3_step(st) == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		rc = 0;
	}
	sqlite3_finalize(st);
	return rc;
}

/* PRAGMA user_version from schema version 2 on; version 1 kept it in meta only. */
static int read_version(struct vactl_statsdb *s)
{
	int64_t v = 0;
	if (query_int(s->db, "PRAGMA user_version", &v) < 0)
		return vactl_statsdb_fail(s, "not a database");
	if (v == 0 &&
	    query_int(s->db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'",
		      &v) < 0) {
		fprintf(stderr,
			"vactl: %s: no stats schema version recorded (not a vad stats "
			"database?)\n",
			s->path);
		return VACTL_EXIT_REFUSED;
	}
	s->version = v > 0 && v < 1000000 ? (int)v : 0;
	return VACTL_EXIT_OK;
}

int vactl_statsdb_open(const struct vactl_opts *o, const char *db, int min_version,
		       struct vactl_statsdb *out)
{
	memset(out, 0, sizeof(*out));
	out->path = db ? strdup(db) : default_db(o);
	if (!out->path) {
		if (db)
			fprintf(stderr, "vactl: out of memory\n");
		return VACTL_EXIT_REFUSED;
	}
	/* SQLite would create a missing file even read only in some builds; say why instead. */
	struct stat sb;
	if (stat(out->path, &sb) < 0) {
		fprintf(stderr,
			"vactl: no stats database at %s: %s (the daemon writes one when stats_db "
			"is set or beside its socket; try --db PATH)\n",
			out->path, strerror(errno));
		vactl_statsdb_close(out);
		return VACTL_EXIT_REFUSED;
	}
	int rc = VACTL_EXIT_OK;
	if (sqlite3_open_v2(out->path, &out->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		rc = vactl_statsdb_fail(out, "cannot open");
	if (!rc)
		rc = harden(out);
	if (!rc) {
		sqlite3_busy_timeout(out->db, 2000); /* the daemon may be writing a snapshot */
		rc = read_version(out);
	}
	if (!rc && (out->version < min_version || out->version > VACTL_STATS_SCHEMA_MAX)) {
		if (out->version > VACTL_STATS_SCHEMA_MAX)
			fprintf(stderr,
				"vactl: %s has stats schema version %d, newer than this vactl "
				"reads (up to %d)\n",
				out->path, out->version, VACTL_STATS_SCHEMA_MAX);
		else
			fprintf(stderr,
				"vactl: %s has stats schema version %d; this needs version %d or "
				"later (a current vad migrates the file when it starts)\n",
				out->path, out->version, min_version);
		rc = VACTL_EXIT_REFUSED;
	}
	if (rc)
		vactl_statsdb_close(out);
	return rc;
}

void vactl_statsdb_close(struct vactl_statsdb *s)
{
	if (s->db)
		sqlite3_close(s->db);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

int64_t vactl_statsdb_since(uint64_t since_ms)
{
	if (!since_ms)
		return 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - (int64_t)since_ms;
}

int vactl_statsdb_finish(struct vactl_statsdb *s, json_object *j, int rc)
{
	if (j) {
		if (!rc)
			vactl_json_print(j);
		else
			json_object_put(j);
	}
	vactl_statsdb_close(s);
	return rc;
}
