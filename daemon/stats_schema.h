/* stats_schema.h - the stats database's schema version and its migrations (stats_schema.c). */
#ifndef VAD_STATS_SCHEMA_H
#define VAD_STATS_SCHEMA_H

#include <stddef.h>

#include <sqlite3.h>

/* Bring the database at path to the current schema version, one transaction per step, or
 * refuse (untouched) a file of a newer version or one that is not a stats database.
 * 0, or -1 with err set. */
int vad_stats_migrate(sqlite3 *db, const char *path, char *err, size_t err_len);

#endif
