/* service.c - shared daemon state, limits and reload; see service.h. */
#include "service.h"

#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config_view.h"
#include "frame.h"
#include "log.h"
#include "op_stats.h"
#include "waitq.h"

static uint64_t clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t vad_realtime_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

uint64_t vad_service_uptime_ms(const struct vad_service *svc)
{
	return clock_ms(CLOCK_MONOTONIC) - svc->start_ms;
}

static void set_limits(struct vad_service *svc, const struct vad_config *cfg)
{
	uint32_t max_frame = cfg->max_frame ? cfg->max_frame : VAD_FRAME_MAX_DEFAULT;
	__atomic_store_n(&svc->limits.max_frame, max_frame, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_clients, cfg->max_clients, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_batch, cfg->max_batch ? cfg->max_batch : 1,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.quota_client, cfg->quota_client, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.quota_uid, cfg->quota_uid, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.hello_timeout_ms, cfg->hello_timeout_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_clients_uid, cfg->max_clients_uid, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.admin_slots, cfg->admin_slots, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_ranges_client, cfg->max_ranges_client, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_ranges_uid, cfg->max_ranges_uid, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_waiters_client, cfg->max_waiters_client,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_waiters, cfg->max_waiters, __ATOMIC_RELAXED);
}

static void close_arenas(struct vad_arena **arenas, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (arenas[i])
			vad_arena_close(arenas[i]);
	free(arenas);
}

int vad_service_create(const struct vad_config *cfg, struct vad_arena **arenas, size_t n_arenas,
		       struct vad_service **out, char *err, size_t err_len)
{
	*out = NULL;
	if (n_arenas == 0) {
		snprintf(err, err_len, "no arena is configured; add an [arena NAME] section");
		return -1;
	}
	size_t n_slots = n_arenas + vad_tenant_slots(cfg);
	struct vad_service *svc = calloc(1, sizeof(*svc));
	struct va_space **vs = calloc(n_slots, sizeof(*vs)); /* the registry keeps a copy */
	struct vad_arena **slots = calloc(n_slots, sizeof(*slots));
	struct vad_op_stats *ops = vad_op_stats_new();
	struct vad_waitq *waitqs = vad_waitqs_new(n_slots);
	struct vad_config_view *view = calloc(1, sizeof(*view));
	if (!svc || !vs || !slots || !ops || !waitqs || !view) {
		snprintf(err, err_len, "out of memory creating the service");
		goto fail;
	}
	memcpy(slots, arenas, n_arenas * sizeof(*slots));
	if (vad_config_view_init(view, cfg) < 0) {
		snprintf(err, err_len, "out of memory creating the service");
		goto fail;
	}
	svc->config = view;
	svc->arenas = slots;
	svc->ops = ops;
	svc->waitqs = waitqs;
	svc->n_arenas = n_arenas;
	svc->n_slots = n_slots;
	svc->default_arena = 0;
	for (size_t i = 0; i < n_arenas; i++) {
		vs[i] = arenas[i] ? arenas[i]->vs : NULL;
		const char *name = arenas[i] ? arenas[i]->conf.name : cfg->arenas[i].name;
		if (strcmp(name, "default") == 0 && svc->default_arena == 0)
			svc->default_arena = (unsigned)i;
	}
	svc->reg = vad_registry_new(vs, n_slots);
	free(vs);
	vs = NULL;
	if (!svc->reg) {
		snprintf(err, err_len, "out of memory creating the registry");
		goto fail;
	}
	svc->reg->buried = vad_waitq_buried;
	svc->reg->buried_ctx = svc;
	if (vad_tenants_create(&svc->tenants, cfg, slots, n_arenas, n_slots, svc->default_arena,
			       svc->reg, err, err_len) != 0) {
		vad_registry_free(svc->reg);
		goto fail;
	}
	free(arenas); /* taken: the service's own slots array holds them now */
	set_limits(svc, cfg);
	svc->daemon_uid = geteuid();
	svc->has_admin_group = cfg->has_admin_group;
	svc->admin_gid = cfg->admin_gid;
	if (cfg->has_admin_group) {
		struct group gr, *res = NULL;
		char buf[4096];
		if (getgrgid_r(cfg->admin_gid, &gr, buf, sizeof(buf), &res) == 0 && res)
			snprintf(svc->admin_group, sizeof(svc->admin_group), "%s", res->gr_name);
		else
			snprintf(svc->admin_group, sizeof(svc->admin_group), "%u",
				 (unsigned)cfg->admin_gid);
	}
	snprintf(svc->config_path, sizeof(svc->config_path), "%s", cfg->path);
	svc->start_ms = clock_ms(CLOCK_MONOTONIC);
	svc->start_realtime_ms = clock_ms(CLOCK_REALTIME);
	svc->next_session_id = 1;
	pthread_mutex_init(&svc->reload_lock, NULL);
	pthread_mutex_init(&svc->events_lock, NULL);
	pthread_mutex_init(&svc->log_rate_lock, NULL);
	svc->log_rate.burst = VAD_RATE_ALL_BURST;
	svc->log_rate.period_ms = VAD_RATE_ALL_PERIOD_MS;
	svc->log_suppressed_level = VAD_LOG_DEBUG;
	svc->events_tail = &svc->events;
	*out = svc;
	return 0;
fail:
	free(vs);
	free(slots);
	if (view)
		vad_config_view_fini(view);
	free(view);
	vad_op_stats_free(ops);
	vad_waitqs_free(waitqs, n_slots);
	free(svc);
	return -1;
}

/* Log what the daemon-wide bucket suppressed since its last report (with log_rate_lock held,
 * or alone). */
static void report_client_log_suppressed(struct vad_service *svc, uint64_t now)
{
	uint64_t span;
	uint64_t n = vad_rate_collect(&svc->log_rate, now, &span);
	if (!n)
		return;
	vad_log(svc->log_suppressed_level,
		"%" PRIu64 " log lines of client sessions suppressed daemon-wide in the last "
		"%" PRIu64 ".%" PRIu64 " s (rate limit of all sessions together: %u at once, then "
		"1 per %u ms)",
		n, span / 1000, span % 1000 / 100, VAD_RATE_ALL_BURST, VAD_RATE_ALL_PERIOD_MS);
	svc->log_suppressed_level = VAD_LOG_DEBUG;
}

bool vad_service_serve_begin(struct vad_service *svc)
{
	/* With the stop's store of state_frozen and load of serving (both seq_cst): either this
	 * pass sees the freeze, or the stop sees the pass and waits for it. */
	__atomic_add_fetch(&svc->serving, 1, __ATOMIC_SEQ_CST);
	return !__atomic_load_n(&svc->reg->state_frozen, __ATOMIC_SEQ_CST);
}

void vad_service_serve_end(struct vad_service *svc)
{
	__atomic_sub_fetch(&svc->serving, 1, __ATOMIC_RELEASE);
}

void vad_service_wait_served(struct vad_service *svc)
{
	/* A pass is bounded (a session's input up to the high watermark; a queue's head
	 * retries), and passes begun after the freeze end at once. */
	while (__atomic_load_n(&svc->serving, __ATOMIC_SEQ_CST))
		sched_yield();
}

bool vad_service_client_log(struct vad_service *svc, int level)
{
	uint64_t now = vad_rate_now_ms();
	pthread_mutex_lock(&svc->log_rate_lock);
	bool ok = vad_rate_take(&svc->log_rate, now);
	if (ok)
		report_client_log_suppressed(svc, now);
	else if (level < svc->log_suppressed_level)
		svc->log_suppressed_level = level;
	pthread_mutex_unlock(&svc->log_rate_lock);
	return ok;
}

void vad_service_destroy(struct vad_service *svc)
{
	if (!svc)
		return;
	report_client_log_suppressed(svc, vad_rate_now_ms());
	pthread_mutex_destroy(&svc->log_rate_lock);
	vad_registry_free(svc->reg);
	vad_tenants_destroy(svc->tenants);
	close_arenas(svc->arenas, svc->n_arenas);
	pthread_mutex_destroy(&svc->reload_lock);
	vad_config_view_fini(svc->config);
	free(svc->config);
	vad_events_free(svc->events);
	pthread_mutex_destroy(&svc->events_lock);
	vad_op_stats_free(svc->ops);
	vad_waitqs_free(svc->waitqs, svc->n_slots);
	free(svc);
}

static struct vad_event *event_new(const char *kind, const char *detail, bool client)
{
	struct vad_event *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->ts_ms = vad_realtime_ms();
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	e->detail = detail ? strdup(detail) : NULL;
	e->client = client;
	return e;
}

/* Called with events_lock held. */
static void event_append(struct vad_service *svc, struct vad_event *e)
{
	*svc->events_tail = e;
	svc->events_tail = &e->next;
}

void vad_service_event(struct vad_service *svc, const char *kind, const char *detail)
{
	struct vad_event *e = event_new(kind, detail, false);
	if (!e)
		return;
	struct vad_event *dropped = NULL;
	pthread_mutex_lock(&svc->events_lock);
	event_append(svc, e);
	if (++svc->n_events > VAD_EVENTS_DAEMON_MAX) {
		/* Drop the oldest daemon-level event: only its own kind can push one out. */
		struct vad_event **pp = &svc->events;
		while ((*pp)->client)
			pp = &(*pp)->next;
		dropped = *pp;
		*pp = dropped->next;
		if (svc->events_tail == &dropped->next)
			svc->events_tail = pp;
		dropped->next = NULL;
		svc->n_events--;
	}
	pthread_mutex_unlock(&svc->events_lock);
	vad_events_free(dropped);
}

void vad_service_client_event(struct vad_service *svc, const char *kind, const char *detail)
{
	pthread_mutex_lock(&svc->events_lock);
	bool full = svc->n_client_events >= VAD_EVENTS_CLIENT_MAX;
	if (full)
		svc->events_dropped++;
	pthread_mutex_unlock(&svc->events_lock);
	if (full)
		return;
	struct vad_event *e = event_new(kind, detail, true);
	if (!e)
		return;
	pthread_mutex_lock(&svc->events_lock);
	if (svc->n_client_events >= VAD_EVENTS_CLIENT_MAX) { /* filled meanwhile */
		svc->events_dropped++;
		pthread_mutex_unlock(&svc->events_lock);
		vad_events_free(e);
		return;
	}
	event_append(svc, e);
	svc->n_client_events++;
	pthread_mutex_unlock(&svc->events_lock);
}

struct vad_event *vad_service_take_events(struct vad_service *svc)
{
	/* Allocated before the lock: the summary row of what was dropped, if anything was. */
	struct vad_event *summary = event_new("events-dropped", NULL, true);
	pthread_mutex_lock(&svc->events_lock);
	uint64_t dropped = summary ? svc->events_dropped : 0; /* no memory: count on */
	svc->events_dropped -= dropped;
	if (dropped)
		event_append(svc, summary);
	struct vad_event *list = svc->events;
	svc->events = NULL;
	svc->events_tail = &svc->events;
	svc->n_events = 0;
	svc->n_client_events = 0;
	pthread_mutex_unlock(&svc->events_lock);
	if (dropped) {
		char detail[160];
		snprintf(detail, sizeof(detail),
			 "%" PRIu64 " client-caused events were dropped: at most %u are kept "
			 "between two snapshots",
			 dropped, VAD_EVENTS_CLIENT_MAX);
		summary->detail = strdup(detail);
	} else {
		vad_events_free(summary);
	}
	return list;
}

void vad_events_free(struct vad_event *e)
{
	while (e) {
		struct vad_event *next = e->next;
		free(e->detail);
		free(e);
		e = next;
	}
}

int vad_service_reload(struct vad_service *svc, char *detail, size_t detail_len)
{
	if (!svc->config_path[0]) {
		snprintf(detail, detail_len,
			 "the daemon was started without a config file; nothing to reload");
		return -1;
	}
	struct vad_config cfg;
	static const char failed[] = "reload failed, the old limits stay: ";
	char err[1024]; /* the errors, one per line, and their count */
	/* as much as detail holds after the prefix, so the count at the end is never cut */
	size_t err_len = detail_len > sizeof(failed) + 64 ? detail_len - sizeof(failed) : 64;
	if (err_len > sizeof(err))
		err_len = sizeof(err);
	pthread_mutex_lock(&svc->reload_lock);
	if (vad_config_load(svc->config_path, &cfg, err, err_len) < 0) {
		pthread_mutex_unlock(&svc->reload_lock);
		snprintf(detail, detail_len, "%s%s", failed, err);
		return -1;
	}
	set_limits(svc, &cfg);
	vad_log_set_level(cfg.log_level);
	vad_config_view_reload(svc->config, &cfg);
	char values[512];
	snprintf(detail, detail_len,
		 "reloaded %s: %s (arena, socket and worker changes need a restart)",
		 svc->config_path, vad_config_reloadable_text(&cfg, values, sizeof(values)));
	vad_config_free(&cfg);
	pthread_mutex_unlock(&svc->reload_lock);
	return 0;
}
