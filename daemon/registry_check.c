/* registry_check.c - the registry's consistency check, with every lock held; see registry.h. */
#include "registry_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "radix_sort.h"
#include "units.h"

/* Slots ahead of the one checked whose range is prefetched. */
#define CHECK_AHEAD 16

/* What one check carries from step to step (every lock held). */
struct check {
	struct vad_registry *reg;
	uint32_t epoch;			    /* marks the ranges this check counted */
	uint64_t *arena_refs, *arena_bytes; /* per arena: sums over the ranges counted */
	/* The ranges counted (key: offset, val: the range), checked against their allocators
	 * in address order once every hold is tallied; NULL when memory was short: then each
	 * is checked when first met and the holds walked again for the refs. */
	struct vad_sort_pair *ranges, *ranges_tmp;
	size_t n_ranges, cap_ranges;
	char *msg;
	size_t msg_len;
};

/* This check's epoch (the registry's count of checks, low 32 bits, never 0). */
static uint32_t check_epoch_next(struct vad_registry *reg)
{
	uint32_t epoch = (uint32_t)++reg->check_epoch;
	if (epoch == 0) {
		/* Once in 2^32 checks: forget every mark, so an old one cannot pass for this one.
		 */
		for (int list = 0; list < 2; list++)
			for (struct vad_holder *h = list ? reg->dying : reg->holders; h;
			     h = h->next)
				for (size_t i = 0; i < h->cap; i++)
					if (h->holds[i].range)
						h->holds[i].range->check_epoch = 0;
		epoch = (uint32_t)++reg->check_epoch;
	}
	return epoch;
}

/* The allocator's owner tag: r is the busy area of its allocator at its offset, with its
 * size, tagged with r. */
static int check_owner_tag(struct check *c, struct vad_range *r)
{
	struct va_area area;
	int rc = va_lookup(c->reg->vs[r->arena], r->offset, &area);
	if (rc < 0 || area.start != r->offset || area.size != r->size || area.owner != r) {
		snprintf(c->msg, c->msg_len,
			 "range 0x%" PRIx64 "+%" PRIu64 " of arena %u is not "
			 "the allocator's busy area there (%s)",
			 r->offset, r->size, r->arena,
			 rc < 0 ? va_strerror(rc) : "start, size or owner differs");
		return -1;
	}
	return 0;
}

/* One hold o of h: found by its key, matching its range; the range is counted the first time
 * this check meets it (arena totals, owner tag), and o's references added to its tally. */
static int check_hold(struct check *c, struct vad_holder *h, struct vad_hold *o)
{
	struct vad_range *r = o->range;
	/* A dying table is emptied in slot order, never looked up. */
	if (!h->dying && vad_holder_find(h, (unsigned)o->arena, o->offset) != o) {
		snprintf(c->msg, c->msg_len,
			 "a session's hold on range 0x%" PRIx64 " of arena %" PRIu64
			 " cannot be found by its key",
			 o->offset, (uint64_t)o->arena);
		return -1;
	}
	if (o->hash != (uint32_t)vad_hold_hash(o->arena, o->offset)) {
		snprintf(c->msg, c->msg_len,
			 "a session's hold on range 0x%" PRIx64 " of arena %" PRIu64
			 " keeps a hash that is not its key's",
			 o->offset, (uint64_t)o->arena);
		return -1;
	}
	if (o->arena >= c->reg->n_arenas || r->arena != o->arena || r->offset != o->offset ||
	    o->count == 0 || load64(&r->refs) < o->count) {
		snprintf(c->msg, c->msg_len,
			 "a session holds %" PRIu64 " references to range 0x%" PRIx64
			 " of arena %" PRIu64 " that does not match the registry's range",
			 (uint64_t)o->count, o->offset, (uint64_t)o->arena);
		return -1;
	}
	if (r->check_epoch != c->epoch) {
		r->check_epoch = c->epoch;
		r->check_refs = 0;
		c->arena_refs[r->arena] += load64(&r->refs);
		c->arena_bytes[r->arena] += load64(&r->refs) * r->size;
		if (c->ranges && c->n_ranges < c->cap_ranges)
			c->ranges[c->n_ranges++] = (struct vad_sort_pair){r->offset, (uintptr_t)r};
		else if (check_owner_tag(c, r) < 0)
			return -1;
	}
	r->check_refs += o->count;
	return 0;
}

/* One holder: each of its holds, then its table's count, its totals against its holds and
 * its uid's charges against them. */
static int check_holder(struct check *c, struct vad_holder *h)
{
	uint64_t refs = 0, bytes = 0;
	size_t used = 0;
	for (size_t i = 0; i < h->cap; i++) {
		struct vad_hold *o = &h->holds[i];
		/* Ranges come in hash order, each a cache miss: ask for a later one meanwhile. */
		if (i + CHECK_AHEAD < h->cap && h->holds[i + CHECK_AHEAD].range)
			__builtin_prefetch(h->holds[i + CHECK_AHEAD].range);
		if (!o->range)
			continue;
		used++;
		if (check_hold(c, h, o) < 0)
			return -1;
		refs += o->count;
		bytes += o->count * o->range->size;
	}
	if (used != h->used || used > h->cap / 2) {
		snprintf(c->msg, c->msg_len,
			 "a session's table has %zu holds in %zu slots but counts %zu", used,
			 h->cap, h->used);
		return -1;
	}
	if (refs != load64(&h->held_refs) || bytes != load64(&h->held_bytes)) {
		snprintf(c->msg, c->msg_len,
			 "a session's totals say %" PRIu64 " references / %" PRIu64
			 " bytes but its holds add up to %" PRIu64 " / %" PRIu64,
			 load64(&h->held_refs), load64(&h->held_bytes), refs, bytes);
		return -1;
	}
	if (__atomic_load_n(&h->uid->held, __ATOMIC_RELAXED) < bytes ||
	    __atomic_load_n(&h->uid->refs, __ATOMIC_RELAXED) < refs) {
		snprintf(c->msg, c->msg_len,
			 "uid %u is charged less than one of its sessions holds",
			 (unsigned)h->uid->uid);
		return -1;
	}
	return 0;
}

/* Every holder, the live ones then the dying ones, and the two lists' counts. */
static int check_holders(struct check *c)
{
	struct vad_registry *reg = c->reg;
	unsigned holders = 0, dying = 0;
	uint64_t dying_refs = 0;
	for (struct vad_holder *h = reg->holders, *next_list = reg->dying; h || next_list;
	     h = h->next) {
		if (!h) {
			h = next_list; /* the live holders done: now the dying ones */
			next_list = NULL;
		}
		if (h->dying) {
			dying++;
			dying_refs += load64(&h->held_refs);
		} else {
			holders++;
		}
		if (check_holder(c, h) < 0)
			return -1;
	}
	if (holders != __atomic_load_n(&reg->n_holders, __ATOMIC_RELAXED)) {
		snprintf(c->msg, c->msg_len, "%u session%s listed but the count says %u", holders,
			 holders == 1 ? " is" : "s are", reg->n_holders);
		return -1;
	}
	if (dying != __atomic_load_n(&reg->n_dying, __ATOMIC_RELAXED) ||
	    dying_refs != load64(&reg->dying_refs)) {
		snprintf(c->msg, c->msg_len,
			 "%u session%s being torn down hold%s %" PRIu64
			 " reference%s but the counts say %u / %" PRIu64,
			 dying, vad_plural(dying), dying == 1 ? "s" : "", dying_refs,
			 vad_plural(dying_refs), reg->n_dying, load64(&reg->dying_refs));
		return -1;
	}
	return 0;
}

/* Each arena's totals against the sums over the ranges counted. */
static int check_arena_totals(struct check *c)
{
	for (size_t i = 0; i < c->reg->n_arenas; i++) {
		const struct vad_registry_arena *a = &c->reg->arenas[i];
		if (c->arena_refs[i] != load64(&a->refs) ||
		    c->arena_bytes[i] != load64(&a->ref_bytes)) {
			snprintf(c->msg, c->msg_len,
				 "arena %zu totals say %" PRIu64 " references / %" PRIu64
				 " bytes but its held ranges add up to %" PRIu64 " / %" PRIu64,
				 i, load64(&a->refs), load64(&a->ref_bytes), c->arena_refs[i],
				 c->arena_bytes[i]);
			return -1;
		}
	}
	return 0;
}

/* One counted range: its reference count against the holds on it (tallied by check_hold). */
static int check_range_ref(struct check *c, const struct vad_range *r)
{
	if (r->check_refs != load64(&r->refs)) {
		snprintf(c->msg, c->msg_len,
			 "range 0x%" PRIx64 " of arena %u counts %" PRIu64
			 " references but sessions hold %" PRIu64,
			 r->offset, r->arena, load64(&r->refs), r->check_refs);
		return -1;
	}
	return 0;
}

/* The ranges gathered by check_hold in address order: each one's allocator tag and
 * reference count. In that order each lookup descends a path the last one left in the cache
 * (a million lookups in hash-table order missed it at every level: a second at 1M ranges). */
static int check_ranges_sorted(struct check *c)
{
	struct vad_sort_pair *s = vad_radix_sort(c->ranges, c->ranges_tmp, c->n_ranges);
	for (size_t i = 0; i < c->n_ranges; i++) {
		struct vad_range *r = (struct vad_range *)(uintptr_t)s[i].val;
		if (check_owner_tag(c, r) < 0 || check_range_ref(c, r) < 0)
			return -1;
	}
	return 0;
}

/* Each held range's reference count against the holds on it (tallied by check_hold), when
 * the ranges could not be gathered. */
static int check_range_refs(struct check *c)
{
	for (int list = 0; list < 2; list++) {
		for (struct vad_holder *h = list ? c->reg->dying : c->reg->holders; h;
		     h = h->next) {
			for (size_t i = 0; i < h->cap; i++) {
				struct vad_range *r = h->holds[i].range;
				if (!r)
					continue;
				if (check_range_ref(c, r) < 0)
					return -1;
			}
		}
	}
	return 0;
}

/* Each share token points at a range this check counted (or one being buried), their count
 * matches, and the memory of dead tokens is sound. */
static int check_tokens(struct check *c)
{
	struct vad_registry *reg = c->reg;
	uint64_t tokens = 0;
	struct vad_token_entry *t, *ttmp;
	HASH_ITER(hh, reg->tokens, t, ttmp)
	{
		struct vad_range *r = t->range;
		tokens++;
		/* refs == 0: its last holder is burying it right now and will remove the token
		 * next (the memory stays valid while this check holds token_lock). */
		if (r->tok != t || (load64(&r->refs) && r->check_epoch != c->epoch)) {
			snprintf(c->msg, c->msg_len,
				 "share token %.6s... points at a range no session holds",
				 t->token);
			return -1;
		}
	}
	if (tokens != load64(&reg->n_tokens)) {
		snprintf(c->msg, c->msg_len,
			 "%" PRIu64 " share tokens exist but the count says %" PRIu64, tokens,
			 load64(&reg->n_tokens));
		return -1;
	}
	if (token_records_check(reg, c->msg, c->msg_len) < 0)
		return -1;
	return dead_token_check(&reg->dead, c->msg, c->msg_len);
}

/* Live ranges are found through the holds on them (a range lives exactly as long as some
 * session holds it); check_epoch marks the ones already counted in this check. */
static int check_locked(struct vad_registry *reg, uint64_t *arena_refs, uint64_t *arena_bytes,
			char *msg, size_t msg_len)
{
	struct check c = {
	    .reg = reg,
	    .epoch = check_epoch_next(reg),
	    .arena_refs = arena_refs,
	    .arena_bytes = arena_bytes,
	    .msg = msg,
	    .msg_len = msg_len,
	};
	/* At most one range per hold. */
	for (int list = 0; list < 2; list++)
		for (struct vad_holder *h = list ? reg->dying : reg->holders; h; h = h->next)
			c.cap_ranges += h->used;
	if (c.cap_ranges) {
		c.ranges = malloc(c.cap_ranges * sizeof(*c.ranges));
		c.ranges_tmp = c.ranges ? malloc(c.cap_ranges * sizeof(*c.ranges_tmp)) : NULL;
		if (!c.ranges_tmp) {
			free(c.ranges);
			c.ranges = NULL;
		}
	}
	int rc = -1;
	if (check_holders(&c) < 0 || check_arena_totals(&c) < 0)
		goto out;
	if (c.ranges ? check_ranges_sorted(&c) < 0 : check_range_refs(&c) < 0)
		goto out;
	if (check_tokens(&c) < 0)
		goto out;
	rc = 0;
out:
	free(c.ranges);
	free(c.ranges_tmp);
	return rc;
}

int vad_registry_check(struct vad_registry *reg, char *msg, size_t msg_len)
{
	pthread_mutex_lock(&reg->holders_lock);
	for (struct vad_holder *h = reg->holders; h; h = h->next)
		pthread_mutex_lock(&h->lock);
	for (struct vad_holder *h = reg->dying; h; h = h->next)
		pthread_mutex_lock(&h->lock);
	pthread_mutex_lock(&reg->token_lock);
	uint64_t *totals = calloc(2 * (reg->n_arenas ? reg->n_arenas : 1), sizeof(*totals));
	int rc = -1;
	if (totals)
		rc = check_locked(reg, totals, totals + reg->n_arenas, msg, msg_len);
	else
		snprintf(msg, msg_len, "out of memory for the registry check");
	free(totals);
	pthread_mutex_unlock(&reg->token_lock);
	for (struct vad_holder *h = reg->dying; h; h = h->next)
		pthread_mutex_unlock(&h->lock);
	for (struct vad_holder *h = reg->holders; h; h = h->next)
		pthread_mutex_unlock(&h->lock);
	pthread_mutex_unlock(&reg->holders_lock);
	return rc;
}
