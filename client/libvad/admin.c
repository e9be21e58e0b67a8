/*
 * admin.c - statistics, introspection and the admin operations (purge, reload, check).
 *
 * Lists are returned as one malloc'd block holding the array followed by its strings,
 * so the caller releases everything with a single free().
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "transport.h"

static int simple_rpc(vad_client *c, Vad__Request *req, Vad__Response__ResultCase expect,
		      Vad__Response **r)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "the client is NULL");
	return libvad_rpc(c, req, expect, r, NULL);
}

/* Copy s into the string area at *cursor and advance it. */
static const char *stash(char **cursor, const char *s)
{
	size_t len = strlen(s) + 1;
	char *dst = *cursor;
	memcpy(dst, s, len);
	*cursor += len;
	return dst;
}

static int fetch_stats(vad_client *c, const char *arena, Vad__Response **r)
{
	Vad__StatsRequest sr = VAD__STATS_REQUEST__INIT;
	sr.arena = (char *)libvad_arena_arg(arena);
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_STATS;
	req.stats = &sr;
	return simple_rpc(c, &req, VAD__RESPONSE__RESULT_STATS, r);
}

int vad_stats(vad_client *c, struct vad_stats *out)
{
	if (!out)
		return libvad_fail(c, VAD_EINVAL, "vad_stats: out is NULL");
	Vad__Response *r;
	int err = fetch_stats(c, NULL, &r);
	if (err != VAD_OK)
		return err;
	Vad__StatsReply *s = r->stats;
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < s->n_arenas; i++) {
		Vad__ArenaStats *a = s->arenas[i];
		out->arena_bytes += a->size;
		out->busy_bytes += a->busy_bytes;
		out->free_bytes += a->free_bytes;
		out->lazy_bytes += a->lazy_bytes;
		out->pooled_bytes += a->pooled_bytes;
		if (a->largest_free > out->largest_free)
			out->largest_free = a->largest_free;
		out->allocs += a->allocs;
		out->frees += a->frees;
		out->fails += a->fails;
	}
	out->clients = s->clients;
	out->held_bytes = s->held_bytes;
	out->held_ranges = s->held_ranges;
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}

int vad_stats_detail(vad_client *c, const char *arena, struct vad_daemon_stats **out)
{
	if (!out)
		return libvad_fail(c, VAD_EINVAL, "vad_stats_detail: out is NULL");
	Vad__Response *r;
	int err = fetch_stats(c, arena, &r);
	if (err != VAD_OK)
		return err;
	Vad__StatsReply *s = r->stats;
	size_t n_buckets = 0;
	for (size_t i = 0; i < s->n_ops; i++) {
		Vad__OpStats *op = s->ops[i];
		if (op->n_bucket_below_ns != op->n_bucket_count) {
			vad__response__free_unpacked(r, NULL);
			return libvad_failf(c, VAD_EPROTO,
					    "the daemon's stats reply gives operation '%s' %zu "
					    "latency bounds but %zu counts",
					    op->name, op->n_bucket_below_ns, op->n_bucket_count);
		}
		n_buckets += op->n_bucket_count;
	}
	/* The block: the struct, the arrays (8-byte items first), then the strings. */
	size_t bytes = sizeof(**out) + s->n_arenas * sizeof(struct vad_arena_stats) +
		       s->n_ops * sizeof(struct vad_op_counts) +
		       s->n_errors * sizeof(struct vad_error_count) +
		       2 * n_buckets * sizeof(uint64_t);
	for (size_t i = 0; i < s->n_arenas; i++)
		bytes += strlen(s->arenas[i]->name) + 1;
	for (size_t i = 0; i < s->n_ops; i++)
		bytes += strlen(s->ops[i]->name) + 1;
	for (size_t i = 0; i < s->n_errors; i++)
		bytes += strlen(s->errors[i]->code) + 1;
	struct vad_daemon_stats *d = malloc(bytes);
	if (!d) {
		vad__response__free_unpacked(r, NULL);
		return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	d->arenas = (struct vad_arena_stats *)(d + 1);
	d->ops = (struct vad_op_counts *)&d->arenas[s->n_arenas];
	d->errors = (struct vad_error_count *)&d->ops[s->n_ops];
	uint64_t *bucket_area = (uint64_t *)&d->errors[s->n_errors];
	char *cursor = (char *)&bucket_area[2 * n_buckets];
	d->n_ops = s->n_ops;
	for (size_t i = 0; i < s->n_ops; i++) {
		Vad__OpStats *op = s->ops[i];
		size_t nb = op->n_bucket_count;
		if (nb) { /* an idle operation has no buckets: memcpy must not see NULL */
			memcpy(bucket_area, op->bucket_below_ns, nb * sizeof(uint64_t));
			memcpy(bucket_area + nb, op->bucket_count, nb * sizeof(uint64_t));
		}
		d->ops[i] = (struct vad_op_counts){
		    .name = stash(&cursor, op->name),
		    .count = op->count,
		    .errors = op->errors,
		    .n_buckets = nb,
		    .bucket_below_ns = bucket_area,
		    .bucket_count = bucket_area + nb,
		};
		bucket_area += 2 * nb;
	}
	d->n_errors = s->n_errors;
	for (size_t i = 0; i < s->n_errors; i++)
		d->errors[i] = (struct vad_error_count){
		    .name = stash(&cursor, s->errors[i]->code),
		    .code = -(int)s->errors[i]->number,
		    .count = s->errors[i]->count,
		};
	d->clients = s->clients;
	d->uptime_ms = s->uptime_ms;
	d->requests = s->requests;
	d->shares = s->shares;
	d->held_bytes = s->held_bytes;
	d->held_ranges = s->held_ranges;
	d->n_arenas = s->n_arenas;
	for (size_t i = 0; i < s->n_arenas; i++) {
		Vad__ArenaStats *a = s->arenas[i];
		d->arenas[i] = (struct vad_arena_stats){
		    .name = stash(&cursor, a->name),
		    .size = a->size,
		    .quantum = a->quantum,
		    .busy_bytes = a->busy_bytes,
		    .free_bytes = a->free_bytes,
		    .lazy_bytes = a->lazy_bytes,
		    .pooled_bytes = a->pooled_bytes,
		    .busy_blocks = a->busy_blocks,
		    .free_blocks = a->free_blocks,
		    .lazy_blocks = a->lazy_blocks,
		    .pooled_blocks = a->pooled_blocks,
		    .largest_free = a->largest_free,
		    .allocs = a->allocs,
		    .frees = a->frees,
		    .fails = a->fails,
		    .drains = a->drains,
		    .released_bytes = a->released_bytes,
		    .release_calls = a->release_calls,
		    .pool_hits = a->pool_hits,
		    .resident_bytes = a->resident_bytes,
		    .free_released_bytes = a->free_released_bytes,
		    .committed_bytes = a->committed_bytes,
		    .commit_failures = a->commit_failures,
		    .waiters = a->waiters,
		    .oldest_wait_ms = a->oldest_wait_ms,
		    .waits = a->waits,
		    .wait_grants = a->wait_grants,
		    .wait_timeouts = a->wait_timeouts,
		    .wait_cancels = a->wait_cancels,
		    .wait_refusals = a->wait_refusals,
		};
	}
	vad__response__free_unpacked(r, NULL);
	*out = d;
	return VAD_OK;
}

int vad_metrics(vad_client *c, char **text)
{
	if (!text)
		return libvad_fail(c, VAD_EINVAL, "vad_metrics: text is NULL");
	Vad__MetricsRequest mr = VAD__METRICS_REQUEST__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_METRICS;
	req.metrics = &mr;
	Vad__Response *r;
	int err = simple_rpc(c, &req, VAD__RESPONSE__RESULT_METRICS, &r);
	if (err != VAD_OK)
		return err;
	*text = strdup(r->metrics->text);
	vad__response__free_unpacked(r, NULL);
	return *text ? VAD_OK : libvad_fail(c, VAD_ENOMEM, NULL);
}

int vad_arenas(vad_client *c, struct vad_arena_info **out, size_t *n)
{
	if (!out || !n)
		return libvad_fail(c, VAD_EINVAL, "vad_arenas: out or n is NULL");
	Vad__ArenasRequest ar = VAD__ARENAS_REQUEST__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_ARENAS;
	req.arenas = &ar;
	Vad__Response *r;
	int err = simple_rpc(c, &req, VAD__RESPONSE__RESULT_ARENAS, &r);
	if (err != VAD_OK)
		return err;
	Vad__ArenasReply *rep = r->arenas;
	size_t bytes = rep->n_arenas * sizeof(**out) + 1;
	for (size_t i = 0; i < rep->n_arenas; i++)
		bytes += strlen(rep->arenas[i]->name) + strlen(rep->arenas[i]->backing) +
			 strlen(rep->arenas[i]->tenancy) + strlen(rep->arenas[i]->commit) +
			 strlen(rep->arenas[i]->huge) + strlen(rep->arenas[i]->numa) + 6;
	struct vad_arena_info *v = malloc(bytes);
	if (!v) {
		vad__response__free_unpacked(r, NULL);
		return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	char *cursor = (char *)&v[rep->n_arenas];
	for (size_t i = 0; i < rep->n_arenas; i++) {
		Vad__ArenaInfo *a = rep->arenas[i];
		v[i] = (struct vad_arena_info){
		    .name = stash(&cursor, a->name),
		    .size = a->size,
		    .quantum = a->quantum,
		    .backing = stash(&cursor, a->backing),
		    .allowed = a->allowed,
		    .unsealed = a->unsealed,
		    .tenancy = stash(&cursor, a->tenancy),
		    .tenants = a->tenants,
		    .commit = stash(&cursor, a->commit),
		    .huge = stash(&cursor, a->huge),
		    .numa = stash(&cursor, a->numa),
		};
	}
	*n = rep->n_arenas;
	*out = v;
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}

int vad_clients(vad_client *c, struct vad_client_info **out, size_t *n)
{
	if (!out || !n)
		return libvad_fail(c, VAD_EINVAL, "vad_clients: out or n is NULL");
	Vad__ClientsRequest cr = VAD__CLIENTS_REQUEST__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_CLIENTS;
	req.clients = &cr;
	Vad__Response *r;
	int err = simple_rpc(c, &req, VAD__RESPONSE__RESULT_CLIENTS, &r);
	if (err != VAD_OK)
		return err;
	Vad__ClientsReply *rep = r->clients;
	size_t bytes = rep->n_clients * sizeof(**out) + 1;
	for (size_t i = 0; i < rep->n_clients; i++)
		bytes += strlen(rep->clients[i]->name) + 1;
	struct vad_client_info *v = malloc(bytes);
	if (!v) {
		vad__response__free_unpacked(r, NULL);
		return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	char *cursor = (char *)&v[rep->n_clients];
	for (size_t i = 0; i < rep->n_clients; i++) {
		Vad__ClientInfo *ci = rep->clients[i];
		v[i] = (struct vad_client_info){
		    .session_id = ci->session_id,
		    .pid = ci->pid,
		    .uid = ci->uid,
		    .gid = ci->gid,
		    .name = stash(&cursor, ci->name),
		    .held_bytes = ci->held_bytes,
		    .held_ranges = ci->held_ranges,
		    .allocs = ci->allocs,
		    .frees = ci->frees,
		    .connected_ms = ci->connected_ms,
		    .failed_attaches = ci->failed_attaches,
		    .uid_held_bytes = ci->uid_held_bytes,
		    .uid_held_ranges = ci->uid_held_ranges,
		    .uid_quota_bytes = ci->uid_quota_bytes,
		    .uid_max_ranges = ci->uid_max_ranges,
		};
	}
	*n = rep->n_clients;
	*out = v;
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}

int vad_purge_arena(vad_client *c, const char *arena, uint64_t *released)
{
	Vad__Purge p = VAD__PURGE__INIT;
	p.arena = (char *)libvad_arena_arg(arena);
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_PURGE;
	req.purge = &p;
	Vad__Response *r;
	int err = simple_rpc(c, &req, VAD__RESPONSE__RESULT_PURGE, &r);
	if (err != VAD_OK)
		return err;
	if (released)
		*released = r->purge->released_bytes;
	vad__response__free_unpacked(r, NULL);
	return VAD_OK;
}

int vad_purge(vad_client *c, uint64_t *released)
{
	return vad_purge_arena(c, NULL, released);
}

/* Hand a daemon-provided sentence to the caller as a malloc'd copy. */
static int give_detail(vad_client *c, const char *text, char **detail)
{
	if (!detail)
		return VAD_OK;
	*detail = strdup(text);
	return *detail ? VAD_OK : libvad_fail(c, VAD_ENOMEM, NULL);
}

int vad_reload_detail(vad_client *c, char **detail)
{
	Vad__Reload rl = VAD__RELOAD__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_RELOAD;
	req.reload = &rl;
	Vad__Response *r;
	int err = simple_rpc(c, &req, VAD__RESPONSE__RESULT_RELOAD, &r);
	if (err != VAD_OK)
		return err;
	err = give_detail(c, r->reload->detail, detail);
	vad__response__free_unpacked(r, NULL);
	return err;
}

int vad_reload(vad_client *c)
{
	return vad_reload_detail(c, NULL);
}

int vad_check(vad_client *c, int *ok, char **detail)
{
	if (!ok)
		return libvad_fail(c, VAD_EINVAL, "vad_check: ok is NULL");
	Vad__Check ck = VAD__CHECK__INIT;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_CHECK;
	req.check = &ck;
	Vad__Response *r;
	int err = simple_rpc(c, &req, VAD__RESPONSE__RESULT_CHECK, &r);
	if (err != VAD_OK)
		return err;
	*ok = r->check->ok ? 1 : 0;
	err = give_detail(c, r->check->detail, detail);
	vad__response__free_unpacked(r, NULL);
	return err;
}
