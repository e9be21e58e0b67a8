/* handler_config.c - the running configuration for vactl config (admin): every [vad] key with
 * its value and where that came from (config_view.h). Admin only: it names paths and the
 * limits an attacker would plan against. */
#include "handler.h"

#include <string.h>

#include "config_view.h"
#include "handler_internal.h"
#include "session.h"

void handle_config(struct vad_session *s, struct vad_reply *r)
{
	if (!admin_allowed(s, "config", r))
		return;
	size_t n = vad_config_key_count();
	Vad__ConfigKey *rows = scratch_array(s, n, sizeof(*rows));
	Vad__ConfigKey **ptrs = scratch_array(s, n, sizeof(*ptrs));
	if (!rows || !ptrs) {
		out_of_memory(r, "listing the configuration");
		return;
	}
	bool oom = false;
	pthread_mutex_lock(&s->svc->reload_lock);
	const struct vad_config_view *v = s->svc->config;
	char *path = scratch_strdup(s, v->path);
	for (size_t i = 0; i < n; i++) {
		char source[PATH_MAX + 32];
		vad__config_key__init(&rows[i]);
		rows[i].section = (char *)"vad";
		rows[i].key = (char *)vad_config_key_name(i);
		rows[i].value = scratch_strdup(s, v->value[i]);
		rows[i].source =
		    scratch_strdup(s, vad_config_view_source(v, i, source, sizeof(source)));
		oom |= !rows[i].value || !rows[i].source;
		ptrs[i] = &rows[i];
	}
	pthread_mutex_unlock(&s->svc->reload_lock);
	if (oom || !path) {
		out_of_memory(r, "listing the configuration");
		return;
	}
	Vad__ConfigReply *o = &r->u.config;
	vad__config_reply__init(o);
	o->keys = ptrs;
	o->n_keys = n;
	o->path = path;
	r->resp.result_case = VAD__RESPONSE__RESULT_CONFIG;
	r->resp.config = o;
}
