/*
 * quotas.h - the registry's accounting (quotas.c): reservations against the per-session and
 * per-uid limits before an alloc or attach, arena totals and uid charges after.
 */
#ifndef VAD_QUOTAS_H
#define VAD_QUOTAS_H

#include <stdbool.h>
#include <stdint.h>

#include "registry_types.h"

/* Reserve bytes and refs references against the limits of q before allocating or attaching,
 * and against the counters' range. On refusal returns which limit and stores what is held
 * now (bytes, or references for the RANGES kinds) in *held. */
enum vad_quota_kind vad_registry_reserve(struct vad_holder *h, uint64_t bytes, uint64_t refs,
					 const struct vad_quota *q, uint64_t *held);

/* Give back a reservation that was not used. */
void vad_registry_unreserve(struct vad_holder *h, uint64_t bytes, uint64_t refs);

/* Add to an arena's totals (negative to take off), with a holder lock held. */
void arena_add(struct vad_registry_arena *a, int64_t refs, int64_t bytes);

/* Count new references in an arena's totals unless its referenced bytes would pass 2^64 - 1;
 * false, with the bytes now in *now, when they would. With a holder lock held. */
bool arena_charge(struct vad_registry_arena *a, uint64_t refs, uint64_t bytes, uint64_t *now);

/* Take what a holder's references charged off its uid. */
void uid_uncharge(struct vad_holder *h, uint64_t refs, uint64_t bytes);

#endif
