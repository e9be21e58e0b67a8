/*
 * config_view.h - the running configuration as vactl config shows it: each [vad] key's value
 * and where it came from (its default, a line of the file, the command line, or a reload's
 * line), kept by the service from its start and updated by each reload.
 */
#ifndef VAD_CONFIG_VIEW_H
#define VAD_CONFIG_VIEW_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The longest value text a key shows (a path is cut with "..."). */
#define VAD_CONFIG_VALUE_MAX 160

/* One [arena] key of one configured section. */
struct vad_config_arena_row {
	char section[VAD_NAME_MAX + 1];
	const char *key; /* the key table's name */
	char value[VAD_CONFIG_VALUE_MAX];
	int line; /* in the file; 0: its default */
};

struct vad_config_view {
	char path[PATH_MAX];			 /* the file, "" for built-in defaults */
	struct vad_config_arena_row *arena_rows; /* every key of every configured section */
	size_t n_arena_rows;
	char value[VAD_CONFIG_KEYS_MAX][VAD_CONFIG_VALUE_MAX];
	int line[VAD_CONFIG_KEYS_MAX]; /* as vad_config.key_line */
	bool reloaded[VAD_CONFIG_KEYS_MAX];
};

/* Fill v from the configuration the daemon starts with; -1 when out of memory. */
int vad_config_view_init(struct vad_config_view *v, const struct vad_config *cfg);

/* Free what v holds (not v). */
void vad_config_view_fini(struct vad_config_view *v);

/* A reload applied cfg: its reloadable keys now show cfg's values, from the reload. */
void vad_config_view_reload(struct vad_config_view *v, const struct vad_config *cfg);

/* Where an arena row's value came from: "default" or "FILE:LINE", into buf. */
const char *vad_config_view_arena_source(const struct vad_config_view *v,
					 const struct vad_config_arena_row *row, char *buf,
					 size_t len);

/* Where key i's value came from: "default", "FILE:LINE", "command line", "reload FILE:LINE"
 * or "reload (default)", into buf. */
const char *vad_config_view_source(const struct vad_config_view *v, size_t i, char *buf,
				   size_t len);

#endif
