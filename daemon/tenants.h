/*
 * tenants.h - tenant arenas. An [arena] section with tenancy = uid (or gid) has no arena of
 * its own: each tenant (a uid, or a primary gid) gets one, with the section's size, quantum
 * and limits, opened on its first use in a slot of the service's arena array past the
 * configured arenas. Every session of the tenant that uses it pins it; it closes (its file's
 * pages given back, the memfd closed, the slot emptied) once it holds no reference, nobody
 * pins it, no session is being torn down, and all of that has lasted its section's
 * tenant_idle. Slots are taken lowest first and reused; the arena's generation tells a new
 * arena in an old slot apart.
 *
 * Lock: the tenants' lock guards the slots past the configured arenas, each tenant arena's
 * pins and idle time, and each section's count of open tenants. Workers take it only when a
 * session first uses a section with tenancy and when it ends; the hot paths use the arena the
 * session has pinned.
 */
#ifndef VAD_TENANTS_H
#define VAD_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "config.h"

struct vad_service;

/* How asking for a tenant's arena ended. */
enum vad_tenant_status {
	VAD_TENANT_OK = 0,
	VAD_TENANT_NOT_OPEN, /* not open, and the caller did not ask to open it */
	VAD_TENANT_LIMIT,    /* the section has max_tenants open already */
	VAD_TENANT_FAILED,   /* opening it failed (the reason is in err) */
};

/* Slots the tenant arenas of cfg's sections may take: the sum of their max_tenants. */
size_t vad_tenant_slots(const struct vad_config *cfg);

/* Set up tenancy for the service's sections (cfg's arenas; a section with tenancy has a NULL
 * slot); svc->arenas has svc->n_slots slots, those past svc->n_arenas empty. 0, or -1 with a
 * reason in err. */
int vad_tenants_create(struct vad_service *svc, const struct vad_config *cfg, char *err,
		       size_t err_len);

/* Close every tenant arena and free the tenants (no session may be left). */
void vad_tenants_destroy(struct vad_service *svc);

/* The tenancy of section sec (VAD_TENANCY_NONE for an arena of its own). */
enum vad_tenancy vad_section_tenancy(const struct vad_service *svc, unsigned sec);

/* The [arena] section sec as configured (its name, size, allow-list, tenancy). */
const struct vad_arena_conf *vad_section_conf(const struct vad_service *svc, unsigned sec);

/* Section sec's tenant arenas open now. */
unsigned vad_section_tenants(struct vad_service *svc, unsigned sec);

/* The arena of tenant `tenant` in section sec, opened first when create and it is not open,
 * pinned for the caller (vad_tenant_unpin gives it back); its slot in *slot. */
enum vad_tenant_status vad_tenant_pin(struct vad_service *svc, unsigned sec, uint32_t tenant,
				      bool create, unsigned *slot, char *err, size_t err_len);

/* Give back one pin of the tenant arena in slot (from vad_tenant_pin or vad_arena_pin). */
void vad_tenant_unpin(struct vad_service *svc, unsigned slot);

/* The arena in slot i pinned for a passing reader (a listing, the stats writer), or NULL for an
 * empty slot; give it back with vad_arena_unpin. Configured arenas are never closed, so only
 * tenant arenas are really pinned. */
struct vad_arena *vad_arena_pin(struct vad_service *svc, size_t i);

/* Give back what vad_arena_pin returned. */
void vad_arena_unpin(struct vad_service *svc, struct vad_arena *a);

/* Close the tenant arenas unused for their section's tenant_idle (as of now_ms, CLOCK_MONOTONIC);
 * returns how many closed. Each closing queues a "tenant-closed" event. */
unsigned vad_tenants_sweep(struct vad_service *svc, uint64_t now_ms);

/* How often sweeping is worth it: a quarter of the shortest tenant_idle, from 50 ms to 10 s;
 * 0 when no section has tenancy. */
uint64_t vad_tenants_sweep_period_ms(const struct vad_service *svc);

#endif
