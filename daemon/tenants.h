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

struct vad_registry;
struct vad_tenants;

/* How asking for a tenant's arena ended. */
enum vad_tenant_status {
	VAD_TENANT_OK = 0,
	VAD_TENANT_NOT_OPEN, /* not open, and the caller did not ask to open it */
	VAD_TENANT_LIMIT,    /* the section has max_tenants open already */
	VAD_TENANT_FAILED,   /* opening it failed (the reason is in err) */
};

/* Slots the tenant arenas of cfg's sections may take: the sum of their max_tenants. */
size_t vad_tenant_slots(const struct vad_config *cfg);

/* Set up tenancy over the service's arena array: slots[0, n_arenas) hold the configured
 * sections' arenas (NULL for a section with tenancy, whose conf comes from cfg), slots
 * [n_arenas, n_slots) are empty and the tenant arenas' (not owned; nor is reg, whose
 * allocator slots follow). 0, or -1 with a reason in err. */
int vad_tenants_create(struct vad_tenants **out, const struct vad_config *cfg,
		       struct vad_arena **slots, size_t n_arenas, size_t n_slots,
		       unsigned default_section, struct vad_registry *reg, char *err,
		       size_t err_len);

/* Who keeps tenant arenas across a restart (persist.c): opened is called with the tenants'
 * lock held when a tenant arena opens, before anything is allocated in it (not for one
 * taken back by vad_tenant_adopt); closing when one is about to close, holding nothing. */
struct vad_tenant_keeper {
	void (*opened)(void *ctx, struct vad_arena *a);
	void (*closing)(void *ctx, struct vad_arena *a);
};

/* Set the keeper (before any session exists). */
void vad_tenants_set_keeper(struct vad_tenants *t, const struct vad_tenant_keeper *keeper,
			    void *ctx);

/* Take back the arena of tenant `tenant` of section sec kept by the previous daemon (fd, its
 * file, taken over: closed on failure too), in the lowest empty slot (*slot), unpinned: it
 * closes when unused like any. Start-up only. VAD_TENANT_OK, or another status with a
 * sentence in err. */
enum vad_tenant_status vad_tenant_adopt(struct vad_tenants *t, unsigned sec, uint32_t tenant,
					int fd, unsigned *slot, char *err, size_t err_len);

/* A stop with the state kept begins: free ranges of tenant arenas are not punched any more
 * (as vad_persist_freeze does for the others), none closes, one opening now is not kept. */
void vad_tenants_freeze(struct vad_tenants *t);

/* Close every tenant arena and free the tenants (no session may be left). */
void vad_tenants_destroy(struct vad_tenants *t);

/* The section called name ("" = the default section): its index in *sec, or -1. */
int vad_section_find(const struct vad_tenants *t, const char *name, unsigned *sec);

/* The tenancy of section sec (VAD_TENANCY_NONE for an arena of its own). */
enum vad_tenancy vad_section_tenancy(const struct vad_tenants *t, unsigned sec);

/* The [arena] section sec as configured (its name, size, allow-list, tenancy). */
const struct vad_arena_conf *vad_section_conf(const struct vad_tenants *t, unsigned sec);

/* Section sec's tenant arenas open now. */
unsigned vad_section_tenants(struct vad_tenants *t, unsigned sec);

/* The arena of tenant `tenant` in section sec, opened first when create and it is not open,
 * pinned for the caller (vad_tenant_unpin gives it back); its slot in *slot. */
enum vad_tenant_status vad_tenant_pin(struct vad_tenants *t, unsigned sec, uint32_t tenant,
				      bool create, unsigned *slot, char *err, size_t err_len);

/* Give back one pin of the tenant arena in slot (from vad_tenant_pin or vad_arena_pin). */
void vad_tenant_unpin(struct vad_tenants *t, unsigned slot);

/* The arena in slot i pinned for a passing reader (a listing, the stats writer), or NULL for an
 * empty slot; give it back with vad_arena_unpin. Configured arenas are never closed, so only
 * tenant arenas are really pinned. */
struct vad_arena *vad_arena_pin(struct vad_tenants *t, size_t i);

/* Give back what vad_arena_pin returned. */
void vad_arena_unpin(struct vad_tenants *t, struct vad_arena *a);

/* Close the tenant arenas unused for their section's tenant_idle (as of now_ms,
 * CLOCK_MONOTONIC); returns how many closed. Each closing is logged and given to closed (may be
 * NULL) as a sentence with its figures. */
unsigned vad_tenants_sweep(struct vad_tenants *t, uint64_t now_ms,
			   void (*closed)(void *ctx, const char *detail), void *ctx);

/* How often sweeping is worth it: a quarter of the shortest tenant_idle, from 50 ms to 10 s;
 * 0 when no section has tenancy. */
uint64_t vad_tenants_sweep_period_ms(const struct vad_tenants *t);

#endif
