/* config_view.c - the running configuration with where each value came from; see
 * config_view.h. */
#include "config_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_value(char *slot, const char *text);

static void key_value(struct vad_config_view *v, const struct vad_config *cfg, size_t i)
{
	char text[PATH_MAX + 64];
	set_value(v->value[i], vad_config_key_text(cfg, i, text, sizeof(text)));
}

/* text into a value slot, cut with "..." when it is too long. */
static void set_value(char *slot, const char *text)
{
	size_t n = strlen(text);
	if (n >= VAD_CONFIG_VALUE_MAX) {
		memcpy(slot, text, VAD_CONFIG_VALUE_MAX - 4);
		memcpy(slot + VAD_CONFIG_VALUE_MAX - 4, "...", 4);
	} else {
		memcpy(slot, text, n + 1);
	}
}

int vad_config_view_init(struct vad_config_view *v, const struct vad_config *cfg)
{
	memset(v, 0, sizeof(*v));
	snprintf(v->path, sizeof(v->path), "%s", cfg->path);
	for (size_t i = 0; i < vad_config_key_count(); i++) {
		key_value(v, cfg, i);
		v->line[i] = cfg->key_line[i];
	}
	size_t keys = vad_config_arena_key_count();
	if (!cfg->n_arenas)
		return 0;
	v->arena_rows = calloc(cfg->n_arenas * keys, sizeof(*v->arena_rows));
	if (!v->arena_rows)
		return -1;
	for (size_t a = 0; a < cfg->n_arenas; a++)
		for (size_t k = 0; k < keys; k++) {
			struct vad_config_arena_row *row = &v->arena_rows[v->n_arena_rows++];
			char text[PATH_MAX + 64];
			snprintf(row->section, sizeof(row->section), "%s", cfg->arenas[a].name);
			row->key = vad_config_arena_key_name(k);
			set_value(row->value, vad_config_arena_key_text(&cfg->arenas[a], k, text,
									sizeof(text)));
			row->line = cfg->arenas[a].key_line[k];
		}
	return 0;
}

void vad_config_view_fini(struct vad_config_view *v)
{
	free(v->arena_rows);
	v->arena_rows = NULL;
	v->n_arena_rows = 0;
}

const char *vad_config_view_arena_source(const struct vad_config_view *v,
					 const struct vad_config_arena_row *row, char *buf,
					 size_t len)
{
	if (row->line > 0)
		snprintf(buf, len, "%s:%d", v->path, row->line);
	else
		snprintf(buf, len, "default");
	return buf;
}

void vad_config_view_reload(struct vad_config_view *v, const struct vad_config *cfg)
{
	for (size_t i = 0; i < vad_config_key_count(); i++) {
		if (!vad_config_key_reloadable(i))
			continue;
		char before[VAD_CONFIG_VALUE_MAX];
		memcpy(before, v->value[i], sizeof(before));
		key_value(v, cfg, i);
		/* A value the reload left as it was keeps its source; one it set or changed is
		 * the reload's. */
		if (strcmp(before, v->value[i]) != 0 || cfg->key_line[i] != v->line[i]) {
			v->reloaded[i] = true;
			v->line[i] = cfg->key_line[i];
		}
	}
}

const char *vad_config_view_source(const struct vad_config_view *v, size_t i, char *buf, size_t len)
{
	const char *how = i < VAD_CONFIG_KEYS_MAX && v->reloaded[i] ? "reload " : "";
	int line = i < VAD_CONFIG_KEYS_MAX ? v->line[i] : 0;
	if (line == VAD_KEY_CMDLINE)
		snprintf(buf, len, "command line");
	else if (line > 0)
		snprintf(buf, len, "%s%s:%d", how, v->path, line);
	else
		snprintf(buf, len, "%s", *how ? "reload (default)" : "default");
	return buf;
}
