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

struct vad_config_view {
	char path[PATH_MAX]; /* the file, "" for built-in defaults */
	char value[VAD_CONFIG_KEYS_MAX][VAD_CONFIG_VALUE_MAX];
	int line[VAD_CONFIG_KEYS_MAX]; /* as vad_config.key_line */
	bool reloaded[VAD_CONFIG_KEYS_MAX];
};

/* Fill v from the configuration the daemon starts with. */
void vad_config_view_init(struct vad_config_view *v, const struct vad_config *cfg);

/* A reload applied cfg: its reloadable keys now show cfg's values, from the reload. */
void vad_config_view_reload(struct vad_config_view *v, const struct vad_config *cfg);

/* Where key i's value came from: "default", "FILE:LINE", "command line", "reload FILE:LINE"
 * or "reload (default)", into buf. */
const char *vad_config_view_source(const struct vad_config_view *v, size_t i, char *buf,
				   size_t len);

#endif
