/* service.c - shared daemon state, limits and reload; see service.h. */
#include "service.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"

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
	__atomic_store_n(&svc->limits.max_ranges_client, cfg->max_ranges_client, __ATOMIC_RELAXED);
	__atomic_store_n(&svc->limits.max_ranges_uid, cfg->max_ranges_uid, __ATOMIC_RELAXED);
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
	struct vad_service *svc = calloc(1, sizeof(*svc));
	if (svc)
		svc->spaces = calloc(n_arenas, sizeof(*svc->spaces));
	if (!svc || !svc->spaces) {
		snprintf(err, err_len, "out of memory creating the service");
		free(svc);
		return -1;
	}
	svc->arenas = arenas;
	svc->n_arenas = n_arenas;
	svc->default_arena = 0;
	for (size_t i = 0; i < n_arenas; i++) {
		svc->spaces[i] = arenas[i]->vs;
		if (strcmp(arenas[i]->conf.name, "default") == 0 && svc->default_arena == 0)
			svc->default_arena = (unsigned)i;
	}
	svc->reg = vad_registry_new(svc->spaces, n_arenas);
	svc->alloc_latency = aligned_alloc(64, n_arenas * sizeof(*svc->alloc_latency));
	if (!svc->reg || !svc->alloc_latency) {
		snprintf(err, err_len, "out of memory creating the registry");
		vad_registry_free(svc->reg);
		free(svc->alloc_latency);
		free(svc->spaces);
		free(svc);
		return -1;
	}
	memset(svc->alloc_latency, 0, n_arenas * sizeof(*svc->alloc_latency));
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
	svc->next_session_id = 1;
	pthread_mutex_init(&svc->reload_lock, NULL);
	pthread_mutex_init(&svc->events_lock, NULL);
	svc->events_tail = &svc->events;
	*out = svc;
	return 0;
}

void vad_service_destroy(struct vad_service *svc)
{
	if (!svc)
		return;
	vad_registry_free(svc->reg);
	free(svc->alloc_latency);
	close_arenas(svc->arenas, svc->n_arenas);
	free(svc->spaces);
	pthread_mutex_destroy(&svc->reload_lock);
	vad_events_free(svc->events);
	pthread_mutex_destroy(&svc->events_lock);
	free(svc);
}

#define EVENTS_MAX 1024

void vad_service_event(struct vad_service *svc, const char *kind, const char *detail)
{
	struct vad_event *e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->ts_ms = vad_realtime_ms();
	snprintf(e->kind, sizeof(e->kind), "%s", kind);
	e->detail = detail ? strdup(detail) : NULL;
	struct vad_event *dropped = NULL;
	pthread_mutex_lock(&svc->events_lock);
	*svc->events_tail = e;
	svc->events_tail = &e->next;
	if (++svc->n_events > EVENTS_MAX) {
		dropped = svc->events;
		svc->events = dropped->next;
		dropped->next = NULL;
		svc->n_events--;
	}
	pthread_mutex_unlock(&svc->events_lock);
	vad_events_free(dropped);
}

struct vad_event *vad_service_take_events(struct vad_service *svc)
{
	pthread_mutex_lock(&svc->events_lock);
	struct vad_event *list = svc->events;
	svc->events = NULL;
	svc->events_tail = &svc->events;
	svc->n_events = 0;
	pthread_mutex_unlock(&svc->events_lock);
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

struct vad_arena *vad_service_arena(struct vad_service *svc, const char *name, unsigned *index)
{
	if (!name || !name[0]) {
		*index = svc->default_arena;
		return svc->arenas[svc->default_arena];
	}
	for (size_t i = 0; i < svc->n_arenas; i++) {
		if (strcmp(svc->arenas[i]->conf.name, name) == 0) {
			*index = (unsigned)i;
			return svc->arenas[i];
		}
	}
	return NULL;
}

static const char *level_name(int level)
{
	switch (level) {
	case VAD_LOG_ERR:
		return "err";
	case VAD_LOG_WARNING:
		return "warning";
	case VAD_LOG_NOTICE:
		return "notice";
	case VAD_LOG_INFO:
		return "info";
	case VAD_LOG_DEBUG:
		return "debug";
	}
	return "?";
}

static const char *quota_text(uint64_t q, char *buf, size_t len)
{
	if (!q) {
		snprintf(buf, len, "unlimited");
		return buf;
	}
	return vad_format_size(q, buf, len);
}

static const char *count_text(uint64_t n, char *buf, size_t len)
{
	if (!n)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

int vad_service_reload(struct vad_service *svc, char *detail, size_t detail_len)
{
	if (!svc->config_path[0]) {
		snprintf(detail, detail_len,
			 "the daemon was started without a config file; nothing to reload");
		return -1;
	}
	struct vad_config cfg;
	char err[512];
	pthread_mutex_lock(&svc->reload_lock);
	if (vad_config_load(svc->config_path, &cfg, err, sizeof(err)) < 0) {
		pthread_mutex_unlock(&svc->reload_lock);
		snprintf(detail, detail_len, "reload failed, the old limits stay: %s", err);
		return -1;
	}
	set_limits(svc, &cfg);
	vad_log_set_level(cfg.log_level);
	char f[32], qc[32], qu[32], rc[32], ru[32];
	snprintf(detail, detail_len,
		 "reloaded %s: max_frame %s, max_clients %u, max_batch %u, quota_client %s, "
		 "quota_uid %s, log level %s, max_ranges_client %s, max_ranges_uid %s (arena, "
		 "socket and worker changes need a restart)",
		 svc->config_path, vad_format_size(cfg.max_frame, f, sizeof(f)), cfg.max_clients,
		 cfg.max_batch, quota_text(cfg.quota_client, qc, sizeof(qc)),
		 quota_text(cfg.quota_uid, qu, sizeof(qu)), level_name(cfg.log_level),
		 count_text(cfg.max_ranges_client, rc, sizeof(rc)),
		 count_text(cfg.max_ranges_uid, ru, sizeof(ru)));
	vad_config_free(&cfg);
	pthread_mutex_unlock(&svc->reload_lock);
	return 0;
}
