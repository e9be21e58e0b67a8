/* registry_list.c - the registry's paged listings for vactl: the holds of one holder (vactl
 * ranges) and the live share tokens (vactl tokens). Each call takes its lock once and looks at
 * a bounded number of entries, so a session with a million ranges never makes another client
 * wait long. See registry.h. */
#include "registry.h"
#include "registry_internal.h"

#include <string.h>

#include "latency.h"

size_t vad_holder_list(struct vad_holder *h, uint64_t *cursor, struct vad_held_info *out,
		       size_t max, uint64_t *total)
{
	size_t n = 0;
	pthread_mutex_lock(&h->lock);
	uint64_t i = *cursor;
	uint64_t end = h->cap;
	/* At most 64 slots looked at per range asked for: the table is at least a quarter full
	 * (holds.c), so a page still fills unless the table shrinks under it. */
	uint64_t scan_end = i + (uint64_t)max * 64 + 64;
	if (scan_end > end || scan_end < i)
		scan_end = end;
	for (; i < scan_end && n < max; i++) {
		const struct vad_hold *o = &h->holds[i];
		if (!o->range)
			continue;
		struct vad_held_info *x = &out[n++];
		x->arena = o->arena;
		x->offset = o->offset;
		x->size = o->range->size;
		x->refs = o->count;
		x->holders = load64(&o->range->refs);
		x->shared = range_shared(o->range);
		x->born_ms = o->range->born_ms;
	}
	*total = h->used;
	pthread_mutex_unlock(&h->lock);
	*cursor = i < end ? i : 0;
	return n;
}

/* Seqs looked up one by one where a page resumes after a token that died. */
#define RESUME_PROBES 64

/* Where a listing resumes after seq `after`: the live token that follows it in share order.
 * The token at seq itself may have died since the last page: then the next RESUME_PROBES
 * seqs are looked up; when all of those died too, NULL with *skip set to the seq the next
 * page resumes after (never a walk over the whole list under the lock). token_lock held. */
static struct vad_token_entry *tokens_resume(struct vad_registry *reg, uint64_t after,
					     uint64_t *skip)
{
	*skip = 0;
	if (!after)
		return reg->tokens;
	struct vad_token_entry *t = NULL;
	HASH_FIND(hh_seq, reg->tokens_seq, &after, sizeof(after), t);
	if (t)
		return t->hh.next;
	if (after >= reg->token_seq)
		return NULL; /* past the newest token: nothing follows */
	for (uint64_t k = 1; k <= RESUME_PROBES && after + k <= reg->token_seq; k++) {
		uint64_t seq = after + k;
		HASH_FIND(hh_seq, reg->tokens_seq, &seq, sizeof(seq), t);
		if (t)
			return t;
	}
	if (after + RESUME_PROBES < reg->token_seq)
		*skip = after + RESUME_PROBES;
	return NULL;
}

size_t vad_registry_list_tokens(struct vad_registry *reg, uint64_t after, bool every, uint32_t uid,
				struct vad_token_info *out, size_t max, uint64_t *next, bool *more)
{
	size_t n = 0, looked = 0;
	uint64_t now = vad_now_ns();
	pthread_mutex_lock(&reg->token_lock);
	uint64_t skip;
	struct vad_token_entry *t = tokens_resume(reg, after, &skip);
	uint64_t last = skip ? skip : after;
	/* Bounded: a non-admin's page may have to pass many tokens of other uids. */
	for (; t && n < max && looked < max * 16 + 1024; t = t->hh.next, looked++) {
		last = t->seq;
		if (!every && t->uid != uid)
			continue;
		if (t->expires_ns && now >= t->expires_ns)
			continue; /* dead already; the next attach or a free removes it */
		struct vad_token_info *x = &out[n++];
		x->arena = t->range->arena;
		x->offset = t->range->offset;
		x->size = t->range->size;
		x->age_ms = (now - t->shared_ns) / 1000000u;
		x->ttl_left_ms = t->expires_ns ? (t->expires_ns - now) / 1000000u : 0;
		x->expires = t->expires_ns != 0;
		x->single_use = t->single_use;
		x->holders = load64(&t->range->refs);
		x->uid = t->uid;
		memcpy(x->token, t->token, sizeof(x->token));
	}
	*more = t != NULL || skip != 0;
	*next = last;
	pthread_mutex_unlock(&reg->token_lock);
	return n;
}
