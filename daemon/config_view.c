/* config_view.c - the running configuration with where each value came from; see
 * config_view.h. */
#include "config_view.h"

#include <stdio.h>
#include <string.h>

static void key_value(struct vad_config_view *v, const struct vad_config *cfg, size_t i)
{
	char text[PATH_MAX + 64];
	vad_config_key_text(cfg, i, text, sizeof(text));
	if (strlen(text) >= VAD_CONFIG_VALUE_MAX)
		memcpy(text + VAD_CONFIG_VALUE_MAX - 4, "...", 4);
	memcpy(v->value[i], text, VAD_CONFIG_VALUE_MAX);
	v->value[i][VAD_CONFIG_VALUE_MAX - 1] = '\0';
}

void vad_config_view_init(struct vad_config_view *v, const struct vad_config *cfg)
{
	memset(v, 0, sizeof(*v));
	snprintf(v->path, sizeof(v->path), "%s", cfg->path);
	for (size_t i = 0; i < vad_config_key_count(); i++) {
		key_value(v, cfg, i);
		v->line[i] = cfg->key_line[i];
	}
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
