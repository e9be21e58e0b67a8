/* top_json.c - vactl --json top: one line per sample. */
#include <string.h>

#include "top.h"

static const struct vad_arena_stats *find_arena(const struct top_sample *t, const char *name)
{
	for (size_t i = 0; t && i < t->stats->n_arenas; i++)
		if (strcmp(t->stats->arenas[i].name, name) == 0)
			return &t->stats->arenas[i];
	return NULL;
}

static json_object *clients_json(const struct top_sample *now, const struct top_sample *prev,
				 uint64_t ms, uint64_t self)
{
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < now->n_clients; i++) {
		const struct vad_client_info *ci = &now->clients[i];
		if (ci->session_id == self)
			continue;
		json_object *j = json_object_new_object();
		vactl_json_add_u64(j, "session_id", ci->session_id);
		vactl_json_add_str(j, "name", ci->name);
		vactl_json_add_u64(j, "pid", ci->pid);
		vactl_json_add_u64(j, "uid", ci->uid);
		vactl_json_add_u64(j, "held_ranges", ci->held_ranges);
		vactl_json_add_u64(j, "held_bytes", ci->held_bytes);
		json_object_object_add(j, "requests_per_s",
				       json_object_new_double(top_client_rate(ci, prev, ms)));
		json_object_array_add(arr, j);
	}
	return arr;
}

void top_json(const struct vad_session *sess, const struct top_samples *s, uint64_t sample)
{
	const struct top_sample *now = top_samples_last(s), *prev = top_samples_prev(s);
	const struct vad_daemon_stats *d = now->stats;
	uint64_t ms = prev ? now->at_ms - prev->at_ms : 0;
	json_object *j = json_object_new_object();
	vactl_json_add_u64(j, "sample", sample);
	vactl_json_add_u64(j, "uptime_ms", d->uptime_ms);
	vactl_json_add_u64(j, "clients", d->clients);
	vactl_json_add_u64(j, "requests", d->requests);
	vactl_json_add_u64(j, "interval_ms", ms);
	json_object_object_add(j, "requests_per_s",
			       json_object_new_double(top_rate(
				   d->requests, prev ? prev->stats->requests : d->requests, ms)));
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < d->n_arenas; i++) {
		const struct vad_arena_stats *a = &d->arenas[i];
		const struct vad_arena_stats *p = find_arena(prev, a->name);
		json_object *ja = vactl_json_arena_stats(a);
		json_object_object_add(
		    ja, "allocs_per_s",
		    json_object_new_double(top_rate(a->allocs, p ? p->allocs : a->allocs, ms)));
		json_object_object_add(
		    ja, "frees_per_s",
		    json_object_new_double(top_rate(a->frees, p ? p->frees : a->frees, ms)));
		json_object_array_add(arr, ja);
	}
	json_object_object_add(j, "arenas", arr);
	/* null when the daemon lists sessions to admins only */
	json_object_object_add(
	    j, "sessions", now->clients_err ? NULL : clients_json(now, prev, ms, sess->session_id));
	struct top_lat_row rows[64];
	uint64_t window;
	size_t n = top_latency_rows(s, rows, sizeof(rows) / sizeof(rows[0]), &window);
	json_object *lat = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		json_object *jl = json_object_new_object();
		vactl_json_add_str(jl, "op", rows[i].op);
		vactl_json_add_u64(jl, "count", rows[i].count);
		vactl_json_add_u64(jl, "errors", rows[i].errors);
		vactl_json_add_u64(jl, "p50_ns", rows[i].lat.p50_ns);
		vactl_json_add_u64(jl, "p99_ns", rows[i].lat.p99_ns);
		vactl_json_add_u64(jl, "max_ns", rows[i].lat.max_ns);
		json_object_array_add(lat, jl);
	}
	vactl_json_add_u64(j, "latency_window_ms", window);
	json_object_object_add(j, "latency", lat);
	vactl_json_line(j);
}
