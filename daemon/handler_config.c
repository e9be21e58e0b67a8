/* handler_config.c - the running configuration for vactl config (admin): every [vad] key and
 * every configured [arena] section's keys, each with its value and where that came from
 * (config_view.h). Admin only: it names paths and the limits an attacker would plan against. */
#include "handler.h"

#include <stdio.h>
#include <string.h>

#include "config_view.h"
#include "handler_internal.h"
#include "session.h"

/* Append a row (strings copied to the scratch) if it fits budget; false when it does not or
 * the scratch is exhausted (*oom then). */
static bool add_row(struct vad_session *s, Vad__ConfigKey *row, const char *section,
		    const char *key, const char *value, const char *source, size_t *budget,
		    bool *oom)
{
	vad__config_key__init(row);
	row->section = scratch_strdup(s, section);
	row->key = (char *)key;
	row->value = scratch_strdup(s, value);
	row->source = scratch_strdup(s, source);
	if (!row->section || !row->value || !row->source) {
		*oom = true;
		return false;
	}
	size_t size = vad__config_key__get_packed_size(row) + 4; /* tag and length */
	if (size > *budget)
		return false;
	*budget -= size;
	return true;
}

void handle_config(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "config", r))
		return;
	struct vad_service *svc = s->svc;
	size_t frame = vad_service_max_frame(svc);
	bool oom = false, cut = false;
	pthread_mutex_lock(&svc->reload_lock);
	const struct vad_config_view *v = svc->config;
	size_t fixed = 256 + strlen(v->path); /* the reply's own fields */
	size_t budget = frame > fixed ? frame - fixed : 0;
	size_t n_max = vad_config_key_count() + v->n_arena_rows;
	Vad__ConfigKey *rows = scratch_array(s, n_max, sizeof(*rows));
	Vad__ConfigKey **ptrs = scratch_array(s, n_max, sizeof(*ptrs));
	char *path = scratch_strdup(s, v->path);
	size_t n = 0;
	char source[PATH_MAX + 32], section[VAD_NAME_MAX + 8];
	for (size_t i = 0; rows && ptrs && !cut && i < vad_config_key_count(); i++) {
		vad_config_view_source(v, i, source, sizeof(source));
		if (add_row(s, &rows[n], "vad", vad_config_key_name(i), v->value[i], source,
			    &budget, &oom)) {
			ptrs[n] = &rows[n];
			n++;
		} else
			cut = true;
	}
	for (size_t i = 0; rows && ptrs && !cut && i < v->n_arena_rows; i++) {
		const struct vad_config_arena_row *a = &v->arena_rows[i];
		snprintf(section, sizeof(section), "arena %s", a->section);
		vad_config_view_arena_source(v, a, source, sizeof(source));
		if (add_row(s, &rows[n], section, a->key, a->value, source, &budget, &oom)) {
			ptrs[n] = &rows[n];
			n++;
		} else
			cut = true;
	}
	pthread_mutex_unlock(&svc->reload_lock);
	if (!rows || !ptrs || !path || oom) {
		out_of_memory(r, "listing the configuration");
		return;
	}
	if (cut)
		log_warn("config listing: %zu keys left out to stay within max_frame", n_max - n);
	Vad__ConfigReply *o = &r->u.config;
	vad__config_reply__init(o);
	o->keys = ptrs;
	o->n_keys = n;
	o->path = path;
	o->truncated = cut;
	r->resp.result_case = VAD__RESPONSE__RESULT_CONFIG;
	r->resp.config = o;
}
