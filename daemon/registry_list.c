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

/* Where a listing resumes after seq: the live token that follows it in share order. The token
 * at seq itself may have died since the last page: then the next seqs are looked up, and only
 * past those is the list walked from its head. token_lock held. */
static struct vad_token_entry *tokens_resume(struct vad_registry *reg, uint64_t after)
{
	if (!after)
		return reg->tokens;
	struct vad_token_entry *t = NULL;
	HASH_FIND(hh_seq, reg->tokens_seq, &after, sizeof(after), t);
	if (t)
		return t->hh.next;
	for (uint64_t k = 1; k <= 64 && after + k <= reg->token_seq; k++) {
		uint64_t seq = after + k;
		HASH_FIND(hh_seq, reg->tokens_seq, &seq, sizeof(seq), t);
		if (t)
			return t;
	}
	for (t = reg->tokens; t && t->seq <= after; t = t->hh.next)
		;
	return t;
}

size_t vad_registry_list_tokens(struct vad_registry *reg, uint64_t after, bool every, uint32_t uid,
				struct vad_token_info *out, size_t max, uint64_t *next, bool *more)
{
	size_t n = 0, looked = 0;
	uint64_t now = vad_now_ns();
	pthread_mutex_lock(&reg->token_lock);
	struct vad_token_entry *t = tokens_resume(reg, after);
	uint64_t last = after;
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
	*more = t != NULL;
	*next = last;
	pthread_mutex_unlock(&reg->token_lock);
	return n;
}
