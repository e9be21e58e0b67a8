/* statsdb.h - the daemon's stats database opened read only, for vactl history and sessions. */
#ifndef VACTL_STATSDB_H
#define VACTL_STATSDB_H

#include <stdint.h>

#include <sqlite3.h>

#include "stats_fields.h"
#include "vactl.h"

/* The newest stats schema this vactl reads (PRAGMA user_version; meta.schema_version before):
 * the one whose columns stats_fields.h lists. */
#define VACTL_STATS_SCHEMA_MAX VAD_STATS_SCHEMA_VERSION

struct vactl_statsdb {
	sqlite3 *db;
	char *path;
	int version; /* the file's schema version */
};

/* Open the stats database at db (NULL: vad-stats.db beside o's socket, or the system path)
 * read only and check that its schema version lies in [min_version, VACTL_STATS_SCHEMA_MAX].
 * Returns VACTL_EXIT_OK, or an exit code after saying why on stderr (out is then closed). */
int vactl_statsdb_open(const struct vactl_opts *o, const char *db, int min_version,
		       struct vactl_statsdb *out);

/* Close what vactl_statsdb_open opened (safe on a zeroed struct). */
void vactl_statsdb_close(struct vactl_statsdb *s);

/* Finish a command that read s: print j (if any) when rc is VACTL_EXIT_OK, else drop it;
 * then close s. Returns rc. */
int vactl_statsdb_finish(struct vactl_statsdb *s, json_object *j, int rc);

/* Print "vactl: PATH: what: sqlite's message" and return VACTL_EXIT_REFUSED. */
int vactl_statsdb_fail(const struct vactl_statsdb *s, const char *what);

/* The epoch time in ms since_ms ago, or 0 when since_ms is 0 (no lower bound). */
int64_t vactl_statsdb_since(uint64_t since_ms);

#endif
