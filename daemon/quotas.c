/* quotas.c - quota accounting: reservations, arena totals, uid charges; see quotas.h. */
#include "quotas.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- quotas ---------------------------------------------------------------------------- */

/* Would cur + add pass limit (0: no limit, but never past 2^64 - 1)? */
static bool over(uint64_t cur, uint64_t add, uint64_t limit)
{
	uint64_t max = limit ? limit : UINT64_MAX;
	return add > max || cur > max - add;
}

/* Add add to *counter unless that passes limit (see over); false, with *now, if it would. */
static bool charge(uint64_t *counter, uint64_t add, uint64_t limit, uint64_t *now)
{
	uint64_t cur = __atomic_load_n(counter, __ATOMIC_RELAXED);
	do {
		if (over(cur, add, limit)) {
			*now = cur;
			return false;
		}
	} while (!__atomic_compare_exchange_n(counter, &cur, cur + add, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return true;
}

enum vad_quota_kind vad_registry_reserve(struct vad_holder *h, uint64_t bytes, uint64_t refs,
					 const struct vad_quota *q, uint64_t *held)
{
	/* The holder's own totals are written by its owner thread only (this one): no race.
	 * They never pass the uid's, whose charge below is checked against 2^64 - 1 too. */
	uint64_t mine = load64(&h->held_bytes);
	if (q->bytes_client && over(mine, bytes, q->bytes_client)) {
		*held = mine;
		return VAD_QUOTA_CLIENT;
	}
	mine = load64(&h->held_refs);
	if (q->ranges_client && over(mine, refs, q->ranges_client)) {
		*held = mine;
		return VAD_QUOTA_RANGES_CLIENT;
	}
	if (!charge(&h->uid->refs, refs, q->ranges_uid, held))
		return q->ranges_uid ? VAD_QUOTA_RANGES_UID : VAD_QUOTA_COUNTER;
	if (!charge(&h->uid->held, bytes, q->bytes_uid, held)) {
		__atomic_sub_fetch(&h->uid->refs, refs, __ATOMIC_RELAXED);
		return q->bytes_uid ? VAD_QUOTA_UID : VAD_QUOTA_COUNTER;
	}
	return VAD_QUOTA_OK;
}

void vad_registry_unreserve(struct vad_holder *h, uint64_t bytes, uint64_t refs)
{
	__atomic_sub_fetch(&h->uid->held, bytes, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&h->uid->refs, refs, __ATOMIC_RELAXED);
}

/* ---- arena totals and uid charges ------------------------------------------------------- */

/* Add to an arena's totals; called with a holder lock held, so a check sees them still. */
void arena_add(struct vad_registry_arena *a, int64_t refs, int64_t bytes)
{
	__atomic_add_fetch(&a->refs, (uint64_t)refs, __ATOMIC_RELAXED);
	__atomic_add_fetch(&a->ref_bytes, (uint64_t)bytes, __ATOMIC_RELAXED);
}

/* Count new references in an arena's totals unless its referenced bytes would pass 2^64 - 1
 * (sessions of many uids may reference one range: the uid charges alone cannot bound this).
 * Every reference is at least a quantum, so the reference count cannot pass it first. With a
 * holder lock held. Returns false, with the bytes now in *now, when it would. */
bool arena_charge(struct vad_registry_arena *a, uint64_t refs, uint64_t bytes, uint64_t *now)
{
	if (!charge(&a->ref_bytes, bytes, 0, now))
		return false;
	__atomic_add_fetch(&a->refs, refs, __ATOMIC_RELAXED);
	return true;
}

/* Take what a holder's references charged off its uid. */
void uid_uncharge(struct vad_holder *h, uint64_t refs, uint64_t bytes)
{
	__atomic_sub_fetch(&h->uid->held, bytes, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&h->uid->refs, refs, __ATOMIC_RELAXED);
}
