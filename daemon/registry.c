/* registry.c - the registry, its holders, insert, release and teardown; see registry.h. */
#include "registry.h"
#include "registry_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "latency.h"
#include "log.h"

__thread bool vad_hash_oom;

struct vad_registry *vad_registry_new(struct va_space *const *vs, size_t n_arenas)
{
	struct vad_registry *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return NULL;
	reg->vs = calloc(n_arenas ? n_arenas : 1, sizeof(*reg->vs));
	reg->arenas = aligned_alloc(64, (n_arenas ? n_arenas : 1) * sizeof(*reg->arenas));
	if (!reg->vs || !reg->arenas) {
		free(reg->vs);
		free(reg->arenas);
		free(reg);
		return NULL;
	}
	reg->n_arenas = n_arenas;
	for (size_t i = 0; i < n_arenas; i++) {
		reg->vs[i] = vs[i];
		memset(&reg->arenas[i], 0, sizeof(reg->arenas[i]));
	}
	pthread_rwlock_init(&reg->spaces_lock, NULL);
	pthread_mutex_init(&reg->token_lock, NULL);
	pthread_mutex_init(&reg->uid_lock, NULL);
	pthread_mutex_init(&reg->holders_lock, NULL);
	pthread_cond_init(&reg->reaper_wake, NULL);
	pthread_cond_init(&reg->reaper_idle, NULL);
	return reg;
}

void vad_registry_add_space(struct vad_registry *reg, unsigned arena, struct va_space *vs)
{
	__atomic_store_n(&reg->vs[arena], vs, __ATOMIC_RELEASE);
}

bool vad_registry_remove_space(struct vad_registry *reg, unsigned arena)
{
	if (pthread_rwlock_trywrlock(&reg->spaces_lock) != 0)
		return false;
	__atomic_store_n(&reg->vs[arena], NULL, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&reg->spaces_lock);
	return true;
}

void vad_registry_discard(struct vad_registry *reg)
{
	__atomic_store_n(&reg->discard, true, __ATOMIC_RELEASE);
}

void vad_registry_free(struct vad_registry *reg)
{
	if (!reg)
		return;
	/* The reaper finishes the dying holders at full speed (no yielding once stopping), so
	 * every range is back in its allocator before the allocators go. */
	pthread_mutex_lock(&reg->holders_lock);
	bool started = reg->reaper_started;
	__atomic_store_n(&reg->reaper_stop, true, __ATOMIC_RELAXED);
	pthread_cond_signal(&reg->reaper_wake);
	pthread_mutex_unlock(&reg->holders_lock);
	if (started)
		pthread_join(reg->reaper, NULL);
	pthread_cond_destroy(&reg->reaper_wake);
	pthread_cond_destroy(&reg->reaper_idle);
	/* Holders are gone, so no range remains (a range lives only as long as a hold on it),
	 * unless the reaper abandoned them (discarding): then their range objects stay in the
	 * range slabs, which live as long as the process, and their tokens go here. */
	struct vad_token_entry *t, *ttmp;
	HASH_ITER(hh, reg->tokens, t, ttmp)
	{
		HASH_DELETE(hh_seq, reg->tokens_seq, t);
		HASH_DEL(reg->tokens, t);
		free(t);
	}
	struct vad_uid_usage *u, *utmp;
	HASH_ITER(hh, reg->uids, u, utmp)
	{
		HASH_DEL(reg->uids, u);
		free(u);
	}
	pthread_mutex_destroy(&reg->token_lock);
	pthread_mutex_destroy(&reg->uid_lock);
	pthread_mutex_destroy(&reg->holders_lock);
	pthread_rwlock_destroy(&reg->spaces_lock);
	free(reg->vs);
	free(reg->arenas);
	free(reg);
}

int vad_holder_init(struct vad_registry *reg, struct vad_holder *h, uid_t uid,
		    struct vad_session *owner)
{
	memset(h, 0, sizeof(*h));
	h->owner = owner;
	pthread_mutex_init(&h->lock, NULL);

	pthread_mutex_lock(&reg->uid_lock);
	struct vad_uid_usage *u;
	HASH_FIND(hh, reg->uids, &uid, sizeof(uid), u);
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u) {
			pthread_mutex_unlock(&reg->uid_lock);
			pthread_mutex_destroy(&h->lock);
			return -1;
		}
		u->uid = uid;
		vad_hash_oom = false;
		HASH_ADD(hh, reg->uids, uid, sizeof(u->uid), u);
		if (vad_hash_oom) {
			free(u);
			pthread_mutex_unlock(&reg->uid_lock);
			pthread_mutex_destroy(&h->lock);
			return -1;
		}
	}
	u->users++;
	pthread_mutex_unlock(&reg->uid_lock);
	h->uid = u;

	pthread_mutex_lock(&reg->holders_lock);
	h->next = reg->holders;
	if (reg->holders)
		reg->holders->prev = h;
	reg->holders = h;
	__atomic_add_fetch(&reg->n_holders, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&reg->holders_lock);
	return 0;
}

/* ---- insert / release ------------------------------------------------------------------- */

int vad_registry_insert(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			struct vad_range *const *ranges, size_t n)
{
	struct vad_hold *fresh, *old = NULL;
	size_t cap;
	if (table_prepare(h, n, &fresh, &cap) < 0)
		return -1; /* nothing inserted: the caller frees the ranges */
	uint64_t bytes = 0, now;
	uint64_t born_ms = vad_now_ns() / 1000000u; /* one clock read per batch */
	for (size_t i = 0; i < n; i++)
		bytes += ranges[i]->size; /* each within the arena, n within max_batch */

	pthread_mutex_lock(&h->lock);
	if (!arena_charge(&reg->arenas[arena], n, bytes, &now)) {
		pthread_mutex_unlock(&h->lock);
		free(fresh);
		return -2;
	}
	if (fresh)
		old = table_swap_locked(h, fresh, cap);
	bool keeps = state_keeps(reg, arena);
	for (size_t i = 0; i < n; i += BATCH_AHEAD) {
		size_t k = n - i < BATCH_AHEAD ? n - i : BATCH_AHEAD;
		uint64_t hv[BATCH_AHEAD];
		/* This part's table slots and state records first, so their misses overlap. */
		for (size_t j = 0; j < k; j++) {
			hv[j] = vad_hold_hash(arena, ranges[i + j]->offset);
			slot_prefetch(h, slot_home(h, hv[j]));
		}
		if (keeps)
			vad_state_prefetch_puts(reg->state, k);
		for (size_t j = 0; j < k; j++) {
			struct vad_range *r = ranges[i + j];
			r->arena = arena;
			r->born_ms = born_ms;
			store64(&r->refs, 1);
			/* A fresh range: no hold on its offset can exist (the allocator just gave
			 * it). */
			struct vad_hold *o = slot_insert_at(h, hv[j], arena, r->offset);
			o->count = 1;
			o->range = r;
			o->rec = hold_record(reg, h, r, 1); /* before the reply is sent */
		}
	}
	store64(&h->held_bytes, load64(&h->held_bytes) + bytes);
	store64(&h->held_refs, load64(&h->held_refs) + n);
	pthread_mutex_unlock(&h->lock);
	free(old);
	return 0;
}

/* Take refs references of bytes bytes off h's totals and arena's, with h's lock held: once per
 * batch of drops. */
static void held_sub(struct vad_registry *reg, struct vad_holder *h, unsigned arena, uint64_t refs,
		     uint64_t bytes)
{
	store64(&h->held_bytes, load64(&h->held_bytes) - bytes);
	store64(&h->held_refs, load64(&h->held_refs) - refs);
	arena_add(&reg->arenas[arena], -(int64_t)refs, -(int64_t)bytes);
}

/* Drop count of h's references held through o, with h's lock held (the caller fixes h's and
 * the arena's totals, still under it: held_sub); o leaves h's table when its count reaches 0 (which
 * moves other slots: o and other pointers into the table are stale afterwards). Returns the range
 * if those were its last references (no session can reach it any more: bury it after
 * unlocking). */
static struct vad_range *drop_locked(struct vad_registry *reg, struct vad_holder *h,
				     struct vad_hold *o, uint64_t count)
{
	struct vad_range *r = o->range;
	uint64_t left;
	o->count -= count;
	if (range_shared(r)) {
		/* Other sessions may hold it too and drop theirs at the same time: the one
		 * reaching 0 buries it. Release orders this holder's last use of the range
		 * before the burial; acquire orders the others' before ours. */
		left = __atomic_sub_fetch(&r->refs, count, __ATOMIC_ACQ_REL);
	} else {
		/* Never shared, so no attach: h is its only holder and nobody else writes it. */
		left = load64(&r->refs) - count;
		store64(&r->refs, left);
	}
	hold_record_count(reg, o); /* cleared before the range can go back to the allocator */
	if (o->count == 0)
		slot_delete(h, o);
	return left ? NULL : r;
}

/* Give n ranges of one arena that nobody references any more back to the allocator. No lock
 * held: no session holds them; their tokens go before the memory does, so an attach or a
 * check holding token_lock never sees a freed range (they see refs == 0: dying). */
void bury(struct vad_registry *reg, unsigned arena, struct vad_range *const *dead, size_t n)
{
	uint64_t addrs[RELEASE_CHUNK];
	struct vad_token_entry *gone[RELEASE_CHUNK];
	size_t n_gone = 0;
	for (size_t i = 0; i < n; i++)
		n_gone += range_shared(dead[i]);
	if (n_gone) {
		n_gone = 0;
		pthread_mutex_lock(&reg->token_lock);
		for (size_t i = 0; i < n; i++) {
			struct vad_range *r = dead[i];
			struct vad_token_entry *t = r->tok;
			r->tok = NULL;
			if (!t || t == &vad_token_none)
				continue; /* never shared, or its token died already */
			/* Its record goes before the allocator gets the range back. */
			token_unrecord(reg, t);
			HASH_DEL(reg->tokens, t);
			HASH_DELETE(hh_seq, reg->tokens_seq, t);
			dead_token_add(&reg->dead, t->token, VAD_TOKEN_FREED);
			gone[n_gone++] = t;
			__atomic_sub_fetch(&reg->n_tokens, 1, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&reg->token_lock);
		for (size_t i = 0; i < n_gone; i++)
			free(gone[i]);
	}
	if (__atomic_load_n(&reg->discard, __ATOMIC_RELAXED)) {
		vad_range_put_batch(dead, n);
		return; /* the allocator goes with the process (vad_registry_discard) */
	}
	for (size_t i = 0; i < n; i++)
		addrs[i] = dead[i]->offset;
	for (size_t i = 0; i < n;) {
		size_t done = 0;
		int rc = va_free_batch(reg->vs[arena], n - i, addrs + i, NULL, &done);
		if (rc == 0)
			break;
		/* Never happens unless the registry and the allocator disagree: say so, and
		 * give back the rest. */
		log_err("registry: freeing range 0x%" PRIx64 " of arena %u failed: %s",
			addrs[i + done], arena, va_strerror(rc));
		i += done + 1;
	}
	vad_range_put_batch(dead, n);
	if (reg->buried)
		reg->buried(reg->buried_ctx, arena);
}

/* Drop count of h's references held through o; frees the range if they were the last. */
static void drop_hold(struct vad_registry *reg, struct vad_holder *h, struct vad_hold *o,
		      uint64_t count)
{
	unsigned arena = (unsigned)o->arena;
	uint64_t bytes = count * o->range->size;
	pthread_mutex_lock(&h->lock);
	struct vad_range *dead = drop_locked(reg, h, o, count);
	held_sub(reg, h, arena, count, bytes);
	pthread_mutex_unlock(&h->lock);
	uid_uncharge(h, count, bytes);
	if (dead)
		bury(reg, arena, &dead, 1);
}

/* Start loading what dropping h's holds at offsets[0..n) (n <= RELEASE_CHUNK) of arena will
 * touch: the table slots, then (found through them once those arrive) each range and its
 * state record; hv[i] gets offsets[i]'s hash and at[i] the slot its hold was found in (NULL
 * from the first one not held on). One at a time these are three cache misses per range in a
 * row; started together they overlap. With h's lock held. */
static void drops_prefetch(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			   const uint64_t *offsets, size_t n, uint64_t *hv, struct vad_hold **at)
{
	for (size_t i = 0; i < n; i++)
		at[i] = NULL;
	if (!h->cap)
		return; /* nothing held: the drop stops at the first offset */
	for (size_t i = 0; i < n; i++) {
		hv[i] = vad_hold_hash(arena, offsets[i]);
		slot_prefetch(h, slot_home(h, hv[i]));
	}
	for (size_t i = 0; i < n; i++) {
		struct vad_hold *o = slot_find_from(h, hv[i], arena, offsets[i]);
		if (!o)
			return; /* the drop stops here too */
		at[i] = o;
		/* Its deletion's backward shift looks at the slots after it. */
		const struct vad_hold *next = slot_next_line(h, (size_t)(o - h->holds));
		if (next)
			__builtin_prefetch(next, 1);
		__builtin_prefetch(o->range, 1);
		if (o->rec)
			vad_state_prefetch(reg->state, o->rec);
	}
}

/* The hold of key (arena, offset) of hash hv in h's table, at is where it was found before
 * this batch's deletions began (NULL: not found then): still there unless a deletion's
 * backward shift moved it, which the key in the slot tells (keys are unique in a table). */
static struct vad_hold *drop_target(struct vad_holder *h, struct vad_hold *at, uint64_t hv,
				    unsigned arena, uint64_t offset)
{
	if (at && at->range && at->offset == offset && at->arena == arena)
		return at;
	return slot_find_from(h, hv, arena, offset);
}

/* How many of a hold's references a drop takes: a free drops one, a teardown all. */
enum drop_how { DROP_ONE_REF, DROP_EVERY_REF };

/*
 * Drop h's references to the ranges of one arena at offsets, RELEASE_CHUNK per lock hold:
 * one reference each, or (DROP_EVERY_REF) all of them. Stops at the first offset h holds nothing
 * at; returns how many offsets were done.
 */
static size_t drop_offsets(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			   const uint64_t *offsets, size_t n, enum drop_how how)
{
	size_t done = 0;
	bool stop = false;
	while (done < n && !stop) {
		struct vad_range *dead[RELEASE_CHUNK];
		size_t n_dead = 0, end = n - done < RELEASE_CHUNK ? n : done + RELEASE_CHUNK;
		uint64_t refs = 0, bytes = 0;
		size_t first = done;
		uint64_t hv[RELEASE_CHUNK];
		struct vad_hold *at[RELEASE_CHUNK];
		pthread_mutex_lock(&h->lock);
		drops_prefetch(reg, h, arena, offsets + done, end - done, hv, at);
		for (; done < end; done++) {
			/* Looked up under the lock, so a repeated offset finds the hold as the
			 * previous release left it (and deletions moved slots; the table's size
			 * stays, so its home does). */
			struct vad_hold *o = drop_target(h, at[done - first], hv[done - first],
							 arena, offsets[done]);
			if (!o) {
				stop = true;
				break;
			}
			uint64_t count = how == DROP_EVERY_REF ? o->count : 1;
			refs += count;
			bytes += count * o->range->size;
			struct vad_range *r = drop_locked(reg, h, o, count);
			if (r)
				dead[n_dead++] = r;
		}
		held_sub(reg, h, arena, refs, bytes);
		pthread_mutex_unlock(&h->lock);
		uid_uncharge(h, refs, bytes);
		if (n_dead)
			bury(reg, arena, dead, n_dead);
	}
	return done;
}

size_t vad_registry_release_batch(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
				  const uint64_t *offsets, size_t n)
{
	size_t done = drop_offsets(reg, h, arena, offsets, n, DROP_ONE_REF);
	table_maybe_shrink(h);
	return done;
}

int vad_registry_release(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			 uint64_t offset, uint64_t *size)
{
	struct vad_hold *o = vad_holder_find(h, arena, offset);
	if (!o)
		return -1;
	*size = o->range->size;
	drop_hold(reg, h, o, 1);
	table_maybe_shrink(h);
	return 0;
}

/* Take h off the holders list; the caller holds holders_lock. */
static void holder_unlist_locked(struct vad_registry *reg, struct vad_holder *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		reg->holders = h->next;
	if (h->next)
		h->next->prev = h->prev;
	__atomic_sub_fetch(&reg->n_holders, 1, __ATOMIC_RELAXED);
}

/* Take h off the holders list (its table is empty). */
static void holder_unlist(struct vad_registry *reg, struct vad_holder *h)
{
	pthread_mutex_lock(&reg->holders_lock);
	holder_unlist_locked(reg, h);
	pthread_mutex_unlock(&reg->holders_lock);
}

/* Free what is left of an empty, unlisted holder: lock, table, its share of the uid. */
void holder_release(struct vad_registry *reg, struct vad_holder *h)
{
	/* Unlisted: no check can be waiting for its lock any more. */
	pthread_mutex_destroy(&h->lock);
	free(h->holds);
	h->holds = NULL;
	h->cap = h->used = 0;
	if (h->uid) {
		pthread_mutex_lock(&reg->uid_lock);
		if (--h->uid->users == 0) {
			HASH_DEL(reg->uids, h->uid);
			free(h->uid);
		}
		pthread_mutex_unlock(&reg->uid_lock);
		h->uid = NULL;
	}
}

/* Drop every hold of h on the calling thread, one chunk per lock hold per arena. */
static void holder_drop_all(struct vad_registry *reg, struct vad_holder *h)
{
	size_t n = h->used;
	uint64_t *offsets = n ? malloc(n * sizeof(*offsets)) : NULL;
	if (offsets) {
		/* Grouped by arena, so each chunk's dead ranges go back in one batch: the arena
		 * of the first hold left, then the next, so a session of one arena takes one
		 * pass however many arenas the daemon has. */
		for (size_t first = 0; h->used && first < h->cap;) {
			if (!h->holds[first].range) {
				first++;
				continue;
			}
			unsigned ai = (unsigned)h->holds[first].arena;
			size_t k = 0;
			for (size_t i = first; i < h->cap; i++)
				if (h->holds[i].range && h->holds[i].arena == ai)
					offsets[k++] = h->holds[i].offset;
			if (drop_offsets(reg, h, ai, offsets, k, DROP_EVERY_REF) < k)
				break; /* cannot happen: every offset is held; finish below */
			first = 0;     /* deletions shift holds into earlier slots */
		}
		free(offsets);
	}
	/* Without memory for the grouping (or anything left): one hold at a time. */
	for (size_t i = 0; h->used && i < h->cap;) {
		if (h->holds[i].range)
			drop_hold(reg, h, &h->holds[i], h->holds[i].count); /* refills slot i */
		else
			i++;
	}
}

/* Move h's holds into a new dying holder for the reaper; false (nothing moved) when there is
 * no memory or no reaper thread, and the caller drops them itself. */
static bool holder_hand_over(struct vad_registry *reg, struct vad_holder *h)
{
	struct vad_holder *d = calloc(1, sizeof(*d));
	if (!d)
		return false;
	pthread_mutex_init(&d->lock, NULL);
	d->dying = true;
	pthread_mutex_lock(&reg->holders_lock);
	if (!reg->reaper_started && !reg->reaper_stop) {
		int e = pthread_create(&reg->reaper, NULL, reaper_main, reg);
		if (e)
			log_err("registry: cannot start the reaper thread (%s); sessions are torn "
				"down on their worker",
				strerror(e));
		reg->reaper_started = e == 0;
	}
	if (!reg->reaper_started) {
		pthread_mutex_unlock(&reg->holders_lock);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return false;
	}
	/* Both lists and both holders at once, so a check sees the holds in exactly one. */
	pthread_mutex_lock(&h->lock);
	d->holds = h->holds;
	d->cap = h->cap;
	d->used = h->used;
	store64(&d->held_bytes, load64(&h->held_bytes));
	store64(&d->held_refs, load64(&h->held_refs));
	d->uid = h->uid; /* the uid's users count passes to d */
	h->holds = NULL;
	h->cap = h->used = 0;
	store64(&h->held_bytes, 0);
	store64(&h->held_refs, 0);
	h->uid = NULL;
	pthread_mutex_unlock(&h->lock);
	holder_unlist_locked(reg, h);
	if (reg->dying_tail)
		reg->dying_tail->next = d;
	else
		reg->dying = d;
	d->prev = reg->dying_tail;
	reg->dying_tail = d;
	__atomic_add_fetch(&reg->n_dying, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&reg->dying_refs, load64(&d->held_refs), __ATOMIC_RELAXED);
	pthread_cond_signal(&reg->reaper_wake);
	pthread_mutex_unlock(&reg->holders_lock);
	pthread_mutex_destroy(&h->lock);
	return true;
}

void vad_holder_fini(struct vad_registry *reg, struct vad_holder *h)
{
	/* One chunk costs what one free batch of 64 costs: do it here. More goes to the reaper. */
	if (h->used <= RELEASE_CHUNK || !holder_hand_over(reg, h)) {
		holder_drop_all(reg, h);
		holder_unlist(reg, h);
		holder_release(reg, h);
	}
}

void vad_registry_for_each_holder(struct vad_registry *reg,
				  void (*fn)(void *ctx, struct vad_holder *h), void *ctx)
{
	pthread_mutex_lock(&reg->holders_lock);
	for (struct vad_holder *h = reg->holders; h; h = h->next)
		fn(ctx, h);
	pthread_mutex_unlock(&reg->holders_lock);
}
