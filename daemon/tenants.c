/* tenants.c - tenant arenas: opened on first use, pinned by their sessions, closed when idle;
 * see tenants.h. */
#include "tenants.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "registry.h"

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
	unsigned default_section;
	struct vad_arena **slots; /* the service's arena array (not owned) */
	size_t first_slot;	  /* tenant slots: [first_slot, n_slots) */
	size_t n_slots;
	struct vad_registry *reg; /* its allocator slots follow ours */
	uint64_t sweep_period_ms;
	/* Who keeps tenant arenas across a restart (persist.c), and whether it stopped (lock). */
	const struct vad_tenant_keeper *keeper;
	void *keeper_ctx;
	bool frozen;
};

static void free_sections(struct vad_tenants *t)
{
	for (size_t i = 0; i < t->n_sections; i++)
		vad_arena_conf_free(&t->sections[i].conf);
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

int vad_tenants_create(struct vad_tenants **out, const struct vad_config *cfg,
		       struct vad_arena **slots, size_t n_arenas, size_t n_slots,
		       unsigned default_section, struct vad_registry *reg, char *err,
		       size_t err_len)
{
	struct vad_tenants *t = calloc(1, sizeof(*t));
	if (!t)
		goto oom;
	t->env = *cfg;
	t->env.arenas = NULL; /* only the daemon-wide keys are used */
	t->env.n_arenas = 0;
	t->sections = calloc(n_arenas ? n_arenas : 1, sizeof(*t->sections));
	if (!t->sections)
		goto oom;
	uint64_t shortest_idle = 0;
	for (size_t i = 0; i < n_arenas; i++, t->n_sections++) {
		/* An open arena's own copy, else (a section with tenancy) the config's. */
		const struct vad_arena_conf *src = slots[i] ? &slots[i]->conf : &cfg->arenas[i];
		struct vad_arena_conf *c = &t->sections[i].conf;
		if (vad_arena_conf_copy(c, src) != 0)
			goto oom;
		if (c->tenancy == VAD_TENANCY_NONE)
			continue;
		if (!shortest_idle || c->tenant_idle_ms < shortest_idle)
			shortest_idle = c->tenant_idle_ms;
	}
	if (n_slots > n_arenas) {
		uint64_t period = shortest_idle / 4;
		t->sweep_period_ms = period < 50 ? 50 : period > 10000 ? 10000 : period;
	}
	t->default_section = default_section;
	t->slots = slots;
	t->first_slot = n_arenas;
	t->n_slots = n_slots;
	t->reg = reg;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
oom:
	snprintf(err, err_len, "out of memory setting up the tenant arenas");
	if (t) {
		free_sections(t);
		free(t);
	}
	return -1;
}

void vad_tenants_destroy(struct vad_tenants *t)
{
	if (!t)
		return;
	for (size_t i = t->first_slot; i < t->n_slots; i++) {
		if (t->slots[i])
			vad_arena_close(t->slots[i]);
		t->slots[i] = NULL;
	}
	pthread_mutex_destroy(&t->lock);
	free_sections(t);
	free(t);
}

int vad_section_find(const struct vad_tenants *t, const char *name, unsigned *sec)
{
	if (!name || !name[0]) {
		*sec = t->default_section;
		return 0;
	}
	for (size_t i = 0; i < t->n_sections; i++) {
		if (strcmp(t->sections[i].conf.name, name) == 0) {
			*sec = (unsigned)i;
			return 0;
		}
	}
	return -1;
}

enum vad_tenancy vad_section_tenancy(const struct vad_tenants *t, unsigned sec)
{
	return t->sections[sec].conf.tenancy;
}

const struct vad_arena_conf *vad_section_conf(const struct vad_tenants *t, unsigned sec)
{
	return &t->sections[sec].conf;
}

unsigned vad_section_tenants(struct vad_tenants *t, unsigned sec)
{
	pthread_mutex_lock(&t->lock);
	unsigned n = t->sections[sec].open;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* The open tenant arena of (sec, tenant), or NULL; with the lock held. A linear look over the
 * tenant slots: it runs once per session and section, not per request. */
static struct vad_arena *find_locked(struct vad_tenants *t, unsigned sec, uint32_t tenant)
{
	for (size_t i = t->first_slot; i < t->n_slots; i++) {
		struct vad_arena *a = t->slots[i];
		if (a && a->section == sec && a->tenant_id == tenant)
			return a;
	}
	return NULL;
}

/* Open the arena of (sec, tenant) in the lowest empty slot; with the lock held. */
static enum vad_tenant_status open_locked(struct vad_tenants *t, unsigned sec, uint32_t tenant,
					  struct vad_arena **out, char *err, size_t err_len)
{
	struct tenant_section *ts = &t->sections[sec];
	if (ts->open >= ts->conf.max_tenants) {
		snprintf(err, err_len,
			 "arena '%s' has %u tenant arenas open, its max_tenants; one opens again "
			 "when a tenant has held nothing for its tenant_idle",
			 ts->conf.name, ts->open);
		return VAD_TENANT_LIMIT;
	}
	size_t slot = t->first_slot;
	while (slot < t->n_slots && t->slots[slot])
		slot++;
	if (slot == t->n_slots) { /* cannot happen: the slots add up every max_tenants */
		snprintf(err, err_len, "arena '%s': no free tenant slot", ts->conf.name);
		return VAD_TENANT_LIMIT;
	}
	struct vad_arena *a;
	if (vad_arena_open_tenant(&ts->conf, &t->env, (unsigned)slot, sec, tenant, &a, err,
				  err_len) != 0)
		return VAD_TENANT_FAILED;
	if (t->frozen)
		a->keep_pages = true; /* stopping with the state kept: as the others */
	else if (t->keeper)
		t->keeper->opened(t->keeper_ctx, a); /* before anything is allocated in it */
	vad_registry_add_space(t->reg, (unsigned)slot, a->vs);
	__atomic_store_n(&t->slots[slot], a, __ATOMIC_RELEASE);
	ts->open++;
	log_info("arena %s: opened for %s %u (%u of at most %u tenant arenas)", a->conf.name,
		 ts->conf.tenancy == VAD_TENANCY_UID ? "uid" : "gid", (unsigned)tenant, ts->open,
		 ts->conf.max_tenants);
	*out = a;
	return VAD_TENANT_OK;
}

enum vad_tenant_status vad_tenant_adopt(struct vad_tenants *t, unsigned sec, uint32_t tenant,
					int fd, unsigned *slot_out, char *err, size_t err_len)
{
	pthread_mutex_lock(&t->lock);
	struct tenant_section *ts = &t->sections[sec];
	enum vad_tenant_status st = VAD_TENANT_FAILED;
	size_t slot = t->first_slot;
	while (slot < t->n_slots && t->slots[slot])
		slot++;
	struct vad_arena *a = NULL;
	if (find_locked(t, sec, tenant)) {
		snprintf(err, err_len, "arena %s@%u is stored twice", ts->conf.name,
			 (unsigned)tenant);
		close(fd);
	} else if (slot == t->n_slots) {
		snprintf(err, err_len,
			 "arena %s@%u: all %zu tenant slots are taken (max_tenants was lowered "
			 "below the tenant arenas kept?)",
			 ts->conf.name, (unsigned)tenant, t->n_slots - t->first_slot);
		st = VAD_TENANT_LIMIT;
		close(fd);
	} else if (vad_arena_adopt_tenant(&ts->conf, &t->env, (unsigned)slot, sec, tenant, fd, &a,
					  err, err_len) == 0) {
		vad_registry_add_space(t->reg, (unsigned)slot, a->vs);
		__atomic_store_n(&t->slots[slot], a, __ATOMIC_RELEASE);
		ts->open++; /* may pass max_tenants if it was lowered: no new one opens then */
		*slot_out = (unsigned)slot;
		st = VAD_TENANT_OK;
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

void vad_tenants_set_keeper(struct vad_tenants *t, const struct vad_tenant_keeper *keeper,
			    void *ctx)
{
	pthread_mutex_lock(&t->lock);
	t->keeper = keeper;
	t->keeper_ctx = ctx;
	pthread_mutex_unlock(&t->lock);
}

void vad_tenants_freeze(struct vad_tenants *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->frozen = true;
	for (size_t i = t->first_slot; i < t->n_slots; i++)
		if (t->slots[i])
			__atomic_store_n(&t->slots[i]->keep_pages, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->lock);
}

enum vad_tenant_status vad_tenant_pin(struct vad_tenants *t, unsigned sec, uint32_t tenant,
				      bool create, unsigned *slot, char *err, size_t err_len)
{
	enum vad_tenant_status st = VAD_TENANT_OK;
	pthread_mutex_lock(&t->lock);
	struct vad_arena *a = find_locked(t, sec, tenant);
	if (!a && !create)
		st = VAD_TENANT_NOT_OPEN;
	else if (!a)
		st = open_locked(t, sec, tenant, &a, err, err_len);
	if (st == VAD_TENANT_OK) {
		a->pins++;
		a->idle_since_ms = 0;
		*slot = a->index;
	}
	pthread_mutex_unlock(&t->lock);
	return st;
}

void vad_tenant_unpin(struct vad_tenants *t, unsigned slot)
{
	pthread_mutex_lock(&t->lock);
	struct vad_arena *a = t->slots[slot];
	if (a && a->pins)
		a->pins--;
	pthread_mutex_unlock(&t->lock);
}

struct vad_arena *vad_arena_pin(struct vad_tenants *t, size_t i)
{
	if (i < t->first_slot)
		return t->slots[i];
	pthread_mutex_lock(&t->lock);
	struct vad_arena *a = t->slots[i];
	if (a)
		a->pins++;
	pthread_mutex_unlock(&t->lock);
	return a;
}

void vad_arena_unpin(struct vad_tenants *t, struct vad_arena *a)
{
	if (a && a->tenant)
		vad_tenant_unpin(t, a->index);
}

/* Is the tenant arena a closable now: unpinned, holding no reference, and no session being
 * torn down (one could still be giving its ranges back)? With the lock held. */
static bool unused_locked(struct vad_tenants *t, const struct vad_arena *a)
{
	const struct vad_registry_arena *ra = &t->reg->arenas[a->index];
	return a->pins == 0 && __atomic_load_n(&ra->refs, __ATOMIC_ACQUIRE) == 0 &&
	       vad_registry_dying(t->reg, NULL) == 0;
}

/* Close the tenant arena in slot i; with the lock held. False when the reaper walks the
 * allocators right now (the next sweep tries again). */
static bool close_locked(struct vad_tenants *t, size_t i, uint64_t idle_ms,
			 void (*closed)(void *ctx, const char *detail), void *ctx)
{
	struct vad_arena *a = t->slots[i];
	if (!vad_registry_remove_space(t->reg, (unsigned)i))
		return false;
	struct va_stats st;
	va_get_stats(a->vs, &st);
	char detail[256];
	snprintf(detail, sizeof(detail),
		 "arena %s closed after %" PRIu64 " ms unused: %" PRIu64 " allocations, %" PRIu64
		 " frees in its life",
		 a->conf.name, idle_ms, st.allocs, st.frees);
	if (t->keeper) /* its ranges are gone: no record names it */
		t->keeper->closing(t->keeper_ctx, a);
	t->slots[i] = NULL;
	t->sections[a->section].open--;
	vad_arena_release_all(a);
	vad_arena_close(a);
	log_info("%s", detail);
	if (closed)
		closed(ctx, detail);
	return true;
}

unsigned vad_tenants_sweep(struct vad_tenants *t, uint64_t now_ms,
			   void (*closed)(void *ctx, const char *detail), void *ctx)
{
	unsigned n_closed = 0;
	pthread_mutex_lock(&t->lock);
	/* Stopping with the state kept: a hold dropped now keeps its record for the next
	 * daemon, which must find its arena's file stored. */
	for (size_t i = t->first_slot; i < t->n_slots && !t->frozen; i++) {
		struct vad_arena *a = t->slots[i];
		if (!a)
			continue;
		if (!unused_locked(t, a)) {
			a->idle_since_ms = 0;
			continue;
		}
		if (!a->idle_since_ms) {
			a->idle_since_ms = now_ms ? now_ms : 1;
			continue;
		}
		uint64_t idle = now_ms - a->idle_since_ms;
		if (idle >= t->sections[a->section].conf.tenant_idle_ms &&
		    close_locked(t, i, idle, closed, ctx))
			n_closed++;
	}
	pthread_mutex_unlock(&t->lock);
	return n_closed;
}

uint64_t vad_tenants_sweep_period_ms(const struct vad_tenants *t)
{
	return t ? t->sweep_period_ms : 0;
}
