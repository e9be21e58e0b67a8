/* tenants.c - tenant arenas: opened on first use, pinned by their sessions, closed when idle;
 * see tenants.h. */
#include "tenants.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "service.h"

/* One configured section as the tenants see it. */
struct tenant_section {
	struct vad_arena_conf conf; /* deep copy (the allow-lists too) */
	unsigned open;		    /* its tenant arenas open now (lock) */
};

struct vad_tenants {
	pthread_mutex_t lock;
	struct vad_config env; /* the daemon-wide part of the config arenas are opened with */
	struct tenant_section *sections;
	size_t n_sections;
	size_t first_slot; /* tenant slots: [first_slot, svc->n_slots) */
	uint64_t sweep_period_ms;
};

static int copy_ids(void **dst, const void *src, size_t n, size_t elem)
{
	*dst = NULL;
	if (!n)
		return 0;
	*dst = malloc(n * elem);
	if (!*dst)
		return -1;
	memcpy(*dst, src, n * elem);
	return 0;
}

static void free_sections(struct vad_tenants *t)
{
	for (size_t i = 0; i < t->n_sections; i++) {
		free(t->sections[i].conf.allow_uids);
		free(t->sections[i].conf.allow_gids);
	}
	free(t->sections);
}

size_t vad_tenant_slots(const struct vad_config *cfg)
{
	size_t n = 0;
	for (size_t i = 0; i < cfg->n_arenas; i++)
		if (cfg->arenas[i].tenancy != VAD_TENANCY_NONE)
			n += cfg->arenas[i].max_tenants;
	return n;
}

int vad_tenants_create(struct vad_service *svc, const struct vad_config *cfg, char *err,
		       size_t err_len)
{
	struct vad_tenants *t = calloc(1, sizeof(*t));
	if (!t)
		goto oom;
	t->env = *cfg;
	t->env.arenas = NULL; /* only the daemon-wide keys are used */
	t->env.n_arenas = 0;
	t->sections = calloc(svc->n_arenas ? svc->n_arenas : 1, sizeof(*t->sections));
	if (!t->sections)
		goto oom;
	size_t tenant_slots = svc->n_slots - svc->n_arenas;
	uint64_t shortest_idle = 0;
	for (size_t i = 0; i < svc->n_arenas; i++, t->n_sections++) {
		/* An open arena's own copy, else (a section with tenancy) the config's. */
		const struct vad_arena_conf *src =
		    svc->arenas[i] ? &svc->arenas[i]->conf : &cfg->arenas[i];
		struct vad_arena_conf *c = &t->sections[i].conf;
		*c = *src;
		c->allow_gids = NULL;
		/* The reader lists stay the source's: an open arena's own (it outlives the
		 * tenants), and a section with tenancy has none (config.c). */
		if (copy_ids((void **)&c->allow_uids, src->allow_uids, src->n_allow_uids,
			     sizeof(uid_t)) ||
		    copy_ids((void **)&c->allow_gids, src->allow_gids, src->n_allow_gids,
			     sizeof(gid_t))) {
			t->n_sections++;
			goto oom;
		}
		if (c->tenancy == VAD_TENANCY_NONE)
			continue;
		if (!shortest_idle || c->tenant_idle_ms < shortest_idle)
			shortest_idle = c->tenant_idle_ms;
	}
	if (tenant_slots) {
		uint64_t period = shortest_idle / 4;
		t->sweep_period_ms = period < 50 ? 50 : period > 10000 ? 10000 : period;
	}
	t->first_slot = svc->n_arenas;
	pthread_mutex_init(&t->lock, NULL);
	svc->tenants = t;
	return 0;
oom:
	snprintf(err, err_len, "out of memory setting up the tenant arenas");
	if (t) {
		free_sections(t);
		free(t);
	}
	return -1;
}

void vad_tenants_destroy(struct vad_service *svc)
{
	struct vad_tenants *t = svc->tenants;
	if (!t)
		return;
	for (size_t i = t->first_slot; i < svc->n_slots; i++) {
		if (svc->arenas[i])
			vad_arena_close(svc->arenas[i]);
		svc->arenas[i] = NULL;
	}
	pthread_mutex_destroy(&t->lock);
	free_sections(t);
	free(t);
	svc->tenants = NULL;
}

enum vad_tenancy vad_section_tenancy(const struct vad_service *svc, unsigned sec)
{
	return svc->tenants->sections[sec].conf.tenancy;
}

const struct vad_arena_conf *vad_section_conf(const struct vad_service *svc, unsigned sec)
{
	return &svc->tenants->sections[sec].conf;
}

unsigned vad_section_tenants(struct vad_service *svc, unsigned sec)
{
	struct vad_tenants *t = svc->tenants;
	pthread_mutex_lock(&t->lock);
	unsigned n = t->sections[sec].open;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* The open tenant arena of (sec, tenant), or NULL; with the lock held. A linear look over the
 * tenant slots: it runs once per session and section, not per request. */
static struct vad_arena *find_locked(struct vad_service *svc, unsigned sec, uint32_t tenant)
{
	for (size_t i = svc->tenants->first_slot; i < svc->n_slots; i++) {
		struct vad_arena *a = svc->arenas[i];
		if (a && a->section == sec && a->tenant_id == tenant)
			return a;
	}
	return NULL;
}

/* Open the arena of (sec, tenant) in the lowest empty slot; with the lock held. */
static enum vad_tenant_status open_locked(struct vad_service *svc, unsigned sec, uint32_t tenant,
					  struct vad_arena **out, char *err, size_t err_len)
{
	struct vad_tenants *t = svc->tenants;
	struct tenant_section *ts = &t->sections[sec];
	if (ts->open >= ts->conf.max_tenants) {
		snprintf(err, err_len,
			 "arena '%s' has %u tenant arenas open, its max_tenants; one opens again "
			 "when a tenant has held nothing for its tenant_idle",
			 ts->conf.name, ts->open);
		return VAD_TENANT_LIMIT;
	}
	size_t slot = t->first_slot;
	while (slot < svc->n_slots && svc->arenas[slot])
		slot++;
	if (slot == svc->n_slots) { /* cannot happen: the slots add up every max_tenants */
		snprintf(err, err_len, "arena '%s': no free tenant slot", ts->conf.name);
		return VAD_TENANT_LIMIT;
	}
	struct vad_arena *a;
	if (vad_arena_open_tenant(&ts->conf, &t->env, (unsigned)slot, sec, tenant, &a, err,
				  err_len) != 0)
		return VAD_TENANT_FAILED;
	vad_registry_add_space(svc->reg, (unsigned)slot, a->vs);
	__atomic_store_n(&svc->arenas[slot], a, __ATOMIC_RELEASE);
	ts->open++;
	log_info("arena %s: opened for %s %u (%u of at most %u tenant arenas)", a->conf.name,
		 ts->conf.tenancy == VAD_TENANCY_UID ? "uid" : "gid", (unsigned)tenant, ts->open,
		 ts->conf.max_tenants);
	*out = a;
	return VAD_TENANT_OK;
}

enum vad_tenant_status vad_tenant_pin(struct vad_service *svc, unsigned sec, uint32_t tenant,
				      bool create, unsigned *slot, char *err, size_t err_len)
{
	struct vad_tenants *t = svc->tenants;
	enum vad_tenant_status st = VAD_TENANT_OK;
	pthread_mutex_lock(&t->lock);
	struct vad_arena *a = find_locked(svc, sec, tenant);
	if (!a && !create)
		st = VAD_TENANT_NOT_OPEN;
	else if (!a)
		st = open_locked(svc, sec, tenant, &a, err, err_len);
	if (st == VAD_TENANT_OK) {
		a->pins++;
		a->idle_since_ms = 0;
		*slot = a->index;
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

void vad_tenant_unpin(struct vad_service *svc, unsigned slot)
{
	struct vad_tenants *t = svc->tenants;
	pthread_mutex_lock(&t->lock);
	struct vad_arena *a = svc->arenas[slot];
	if (a && a->pins)
		a->pins--;
	pthread_mutex_unlock(&t->lock);
}

struct vad_arena *vad_arena_pin(struct vad_service *svc, size_t i)
{
	struct vad_tenants *t = svc->tenants;
	if (i < t->first_slot)
		return svc->arenas[i];
	pthread_mutex_lock(&t->lock);
	struct vad_arena *a = svc->arenas[i];
	if (a)
		a->pins++;
	pthread_mutex_unlock(&t->lock);
	return a;
}

void vad_arena_unpin(struct vad_service *svc, struct vad_arena *a)
{
	if (a && a->tenant)
		vad_tenant_unpin(svc, a->index);
}

/* Is the tenant arena a closable now: unpinned, holding no reference, and no session being
 * torn down (one could still be giving its ranges back)? With the lock held. */
static bool unused_locked(struct vad_service *svc, const struct vad_arena *a)
{
	const struct vad_registry_arena *ra = &svc->reg->arenas[a->index];
	return a->pins == 0 && __atomic_load_n(&ra->refs, __ATOMIC_ACQUIRE) == 0 &&
	       vad_registry_dying(svc->reg, NULL) == 0;
}

/* Close the tenant arena in slot i; with the lock held. False when the reaper walks the
 * allocators right now (the next sweep tries again). */
static bool close_locked(struct vad_service *svc, size_t i, uint64_t idle_ms)
{
	struct vad_tenants *t = svc->tenants;
	struct vad_arena *a = svc->arenas[i];
	if (!vad_registry_remove_space(svc->reg, (unsigned)i))
		return false;
	struct va_stats st;
	va_get_stats(a->vs, &st);
	char detail[256];
	snprintf(detail, sizeof(detail),
		 "arena %s closed after %" PRIu64 " ms unused: %" PRIu64 " allocations, %" PRIu64
		 " frees in its life",
		 a->conf.name, idle_ms, st.allocs, st.frees);
	svc->arenas[i] = NULL;
	t->sections[a->section].open--;
	vad_arena_release_all(a);
	vad_arena_close(a);
	log_info("%s", detail);
	vad_service_event(svc, "tenant-closed", detail);
	return true;
}

unsigned vad_tenants_sweep(struct vad_service *svc, uint64_t now_ms)
{
	struct vad_tenants *t = svc->tenants;
	unsigned closed = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = t->first_slot; i < svc->n_slots; i++) {
		struct vad_arena *a = svc->arenas[i];
		if (!a)
			continue;
		if (!unused_locked(svc, a)) {
			a->idle_since_ms = 0;
			continue;
		}
		if (!a->idle_since_ms) {
			a->idle_since_ms = now_ms ? now_ms : 1;
			continue;
		}
		uint64_t idle = now_ms - a->idle_since_ms;
		if (idle >= t->sections[a->section].conf.tenant_idle_ms &&
		    close_locked(svc, i, idle))
			closed++;
	}
	pthread_mutex_unlock(&t->lock);
	return closed;
}

uint64_t vad_tenants_sweep_period_ms(const struct vad_service *svc)
{
	return svc->tenants ? svc->tenants->sweep_period_ms : 0;
}
