/* persist_rebuild.c - allocators and registry rebuilt from a state file; see persist_rebuild.h. */
#include "persist_rebuild.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "radix_sort.h"
#include "vhash.h"

#define OFFSET_BITS 48 /* key: arena above, offset below (256 TiB arenas: else a qsort) */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

struct vad_span vad_span_now(void)
{
	return (struct vad_span){clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_THREAD_CPUTIME_ID)};
}

struct vad_span vad_span_since(struct vad_span mark)
{
	struct vad_span now = vad_span_now();
	return (struct vad_span){now.wall - mark.wall, now.cpu - mark.cpu};
}

/* The name of arena slot i for a message. */
static const char *name_of(const char *const *names, size_t n, size_t i)
{
	return names && i < n && names[i] ? names[i] : "?";
}

/* ---- sort ------------------------------------------------------------------------------- */

static int by_place(const void *a, const void *b)
{
	const struct vad_state_hold *x = a, *y = b;
	if (x->arena != y->arena)
		return x->arena < y->arena ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->holder < y->holder ? -1 : x->holder > y->holder;
}

static bool in_order(const struct vad_state_hold *h, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (by_place(&h[i - 1], &h[i]) > 0)
			return false;
	return true;
}

/* Radix sort by (arena, offset) through pairs of key and index, then the records gathered in
 * that order into out, and the holds of each place put in holder order.
 * -1 when a key does not fit (an offset past OFFSET_BITS) or memory is short. */
static int radix_by_place(const struct vad_state_hold *h, size_t n, struct vad_state_hold *out)
{
	struct vad_sort_pair *a = malloc(n * sizeof(*a)), *tmp = malloc(n * sizeof(*tmp));
	int rc = -1;
	if (!a || !tmp)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (h[i].offset >> OFFSET_BITS || h[i].arena >> (64 - OFFSET_BITS))
			goto out;
		a[i] = (struct vad_sort_pair){(uint64_t)h[i].arena << OFFSET_BITS | h[i].offset, i};
	}
	struct vad_sort_pair *s = vad_radix_sort(a, tmp, n);
	for (size_t i = 0; i < n; i++)
		out[i] = h[s[i].val];
	/* The holds of one place (a shared range) in holder order: runs are short, but a
	 * damaged file's are not bounded, so each is sorted by comparison, O(n log n). */
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && s[j].key == s[i].key; j++)
			;
		if (j - i > 1)
			qsort(out + i, j - i, sizeof(*out), by_place);
	}
	rc = 0;
out:
	free(a);
	free(tmp);
	return rc;
}

int vad_rebuild_sort(struct vad_state_hold **hp, size_t n, struct vad_state_hold **spare,
		     const char *const *names, size_t n_names, char *err, size_t err_len)
{
	struct vad_state_hold *h = *hp;
	*spare = NULL;
	if (!in_order(h, n)) {
		struct vad_state_hold *out = malloc(n * sizeof(*out));
		if (out && radix_by_place(h, n, out) == 0) {
			*spare = h;
			*hp = h = out;
		} else {
			free(out);
			qsort(h, n, sizeof(*h), by_place);
		}
	}
	for (size_t i = 1; i < n; i++) {
		const struct vad_state_hold *a = &h[i - 1], *b = &h[i];
		if (a->arena != b->arena)
			continue;
		const char *bad = NULL;
		if (a->offset == b->offset && a->size != b->size)
			bad = "two holds of one range disagree on its size";
		else if (a->offset == b->offset && a->holder == b->holder)
			bad = "one holder is recorded twice for one range";
		else if (a->offset != b->offset && a->offset + a->size > b->offset)
			bad = "two ranges overlap";
		if (bad) {
			snprintf(err, err_len,
				 "the state file is inconsistent: %s (arena %s, offsets 0x%" PRIx64
				 " and 0x%" PRIx64 ")",
				 bad, name_of(names, n_names, a->arena), a->offset, b->offset);
			return -1;
		}
	}
	return 0;
}

/* ---- rebuild ---------------------------------------------------------------------------- */

/* The allocators' side, on a thread of its own: place, check, release. */
struct placer {
	struct vad_rebuild *rb;
	struct vad_range **ranges; /* one per place, in address order */
	size_t n_ranges;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool placed;	/* lock: every range is busy in its allocator (or it failed) */
	bool placed_ok; /* lock: ... and it did not fail */
	int rc;		/* read once the thread is joined */
	char err[1024];
};

static void placed(struct placer *pl, bool ok)
{
	pthread_mutex_lock(&pl->lock);
	pl->placed = true;
	pl->placed_ok = ok;
	pthread_cond_signal(&pl->cond);
	pthread_mutex_unlock(&pl->lock);
}

/* Ranges [lo, hi) of pl (one arena) made busy in their allocator one at a time: what
 * va_restore does at once, kept for a space that was used already, and to name the range a
 * refusal is about. */
static int place_one_by_one(struct placer *pl, size_t lo, size_t hi)
{
	struct vad_rebuild *rb = pl->rb;
	for (size_t i = lo; i < hi; i++) {
		struct vad_range *r = pl->ranges[i];
		uint64_t got = 0;
		int rc = va_alloc_range(rb->vs[r->arena], r->size, 0, r->offset,
					r->offset + r->size, r, &got);
		if (rc != VA_OK || got != r->offset) {
			snprintf(pl->err, sizeof(pl->err),
				 "arena %s: range 0x%" PRIx64 " (%" PRIu64
				 " bytes) cannot be made busy again: %s",
				 name_of(rb->names, rb->n_arenas, r->arena), r->offset, r->size,
				 rc ? va_strerror(rc) : "placed elsewhere");
			return -1;
		}
	}
	return 0;
}

/* Each arena's ranges made busy in its allocator at their offsets, tagged with their
 * objects: all at once by va_restore (the space was never used), else one by one. */
static int place_ranges(struct placer *pl)
{
	struct vad_rebuild *rb = pl->rb;
	size_t n = pl->n_ranges;
	uint64_t *starts = malloc((n ? n : 1) * sizeof(*starts));
	uint64_t *sizes = malloc((n ? n : 1) * sizeof(*sizes));
	void **owners = malloc((n ? n : 1) * sizeof(*owners));
	int rc = 0;
	for (size_t lo = 0; lo < n && rc == 0;) {
		unsigned arena = pl->ranges[lo]->arena;
		size_t hi = lo;
		for (; hi < n && pl->ranges[hi]->arena == arena; hi++) {
			if (!starts || !sizes || !owners)
				continue;
			starts[hi - lo] = pl->ranges[hi]->offset;
			sizes[hi - lo] = pl->ranges[hi]->size;
			owners[hi - lo] = pl->ranges[hi];
		}
		int bulk = starts && sizes && owners
			       ? va_restore(rb->vs[arena], hi - lo, starts, sizes, owners)
			       : VA_ENOMEM;
		if (bulk != 0) {
			log_info("arena %s: its ranges are placed one by one (%s)",
				 name_of(rb->names, rb->n_arenas, arena), va_strerror(bulk));
			rc = place_one_by_one(pl, lo, hi);
		}
		lo = hi;
	}
	free(starts);
	free(sizes);
	free(owners);
	return rc;
}

static int check_allocators(struct placer *pl)
{
	struct vad_rebuild *rb = pl->rb;
	char msg[512];
	for (size_t i = 0; i < rb->n_arenas; i++) {
		if (rb->vs[i] && va_check(rb->vs[i], msg, sizeof(msg)) != 0) {
			snprintf(pl->err, sizeof(pl->err),
				 "arena %s fails its allocator check after the rebuild: %s",
				 name_of(rb->names, rb->n_arenas, i), msg);
			return -1;
		}
	}
	return 0;
}

static void *placer_main(void *arg)
{
	struct placer *pl = arg;
	struct vad_rebuild *rb = pl->rb;
	struct vad_span t = vad_span_now();
	pl->rc = place_ranges(pl);
	rb->alloc = vad_span_since(t);
	placed(pl, pl->rc == 0);
	if (pl->rc)
		return NULL;
	t = vad_span_now();
	pl->rc = check_allocators(pl);
	rb->va_check = vad_span_since(t);
	if (pl->rc)
		return NULL;
	/* Free space may hold what a range freed just before a crash held: zeros for its next
	 * holder, as always. */
	t = vad_span_now();
	for (size_t i = 0; i < rb->n_arenas; i++)
		if (rb->vs[i] && rb->release && rb->release[i])
			va_release_free(rb->vs[i]);
	rb->released = vad_span_since(t);
	return NULL;
}

/* One range object per place (arena, offset), in order. */
static int make_ranges(struct placer *pl, char *err, size_t err_len)
{
	struct vad_rebuild *rb = pl->rb;
	size_t n = 0;
	for (size_t i = 0; i < rb->n; i++)
		n += !i || rb->h[i].arena != rb->h[i - 1].arena ||
		     rb->h[i].offset != rb->h[i - 1].offset;
	pl->ranges = malloc((n ? n : 1) * sizeof(*pl->ranges));
	if (!pl->ranges) {
		snprintf(err, err_len, "out of memory rebuilding the ranges");
		return -1;
	}
	for (size_t i = 0; i < rb->n; i++) {
		const struct vad_state_hold *g = &rb->h[i];
		if (i && g->arena == rb->h[i - 1].arena && g->offset == rb->h[i - 1].offset)
			continue;
		struct vad_range *r = vad_range_get();
		if (!r) {
			snprintf(err, err_len, "out of memory rebuilding the ranges");
			return -1;
		}
		memset(r, 0, sizeof(*r));
		r->offset = g->offset;
		r->size = g->size;
		r->arena = g->arena;
		pl->ranges[pl->n_ranges++] = r;
	}
	return 0;
}

/* Holds ahead of the one given whose table slot is prefetched. */
#define HOLDS_AHEAD 16

/* The table slot where hold a will go if its holder is h (id h_id, its table made at its
 * final size), else NULL: each insertion lands at a random place of a big table, a cache
 * miss; prefetching later ones meanwhile overlaps them. (The prefetch itself stays in the
 * caller: GCC drops a static function that only prefetches, and every call to it.) */
static const void *slot_of(const struct vad_rebuild *rb, const struct vad_holder *h, uint32_t h_id,
			   size_t a)
{
	if (a >= rb->n || rb->h[a].holder != h_id || !h->cap)
		return NULL;
	return &h->holds[vad_hold_hash(rb->h[a].arena, rb->h[a].offset) & (h->cap - 1)];
}

/* The registry's side: every hold given to its holder (ranges[k] is the k-th place). */
static int give_holds(struct vad_rebuild *rb, struct vad_range *const *ranges, char *err,
		      size_t err_len)
{
	struct vad_holder *h = NULL;
	uint32_t h_id = 0;
	size_t k = 0;
	for (size_t i = 0; i < rb->n;) {
		size_t end = i + 1;
		while (end < rb->n && rb->h[end].arena == rb->h[i].arena &&
		       rb->h[end].offset == rb->h[i].offset)
			end++;
		struct vad_range *r = ranges[k++];
		for (size_t j = i; j < end; j++) {
			if (!h ||
			    rb->h[j].holder != h_id) { /* runs of one holder: the common case */
				h_id = rb->h[j].holder;
				h = rb->holder(rb->ctx, h_id);
			}
			const void *ahead = slot_of(rb, h, h_id, j + HOLDS_AHEAD);
			if (ahead)
				__builtin_prefetch(ahead);
			if (vad_registry_restore_hold(rb->reg, h, r, rb->h[j].count, end - i > 1) !=
			    0) {
				snprintf(err, err_len,
					 "cannot restore a hold: out of memory, or a total would "
					 "pass its limit");
				return -1;
			}
		}
		i = end;
	}
	return 0;
}

int vad_rebuild_run(struct vad_rebuild *rb, char *err, size_t err_len)
{
	struct vad_span t = vad_span_now();
	struct placer pl = {.rb = rb};
	pthread_mutex_init(&pl.lock, NULL);
	pthread_cond_init(&pl.cond, NULL);
	int rc = -1;
	pthread_t thread;
	bool threaded = false;
	if (make_ranges(&pl, err, err_len) != 0)
		goto out;
	rb->ranges = vad_span_since(t);
	/* Two cores: the allocators on one thread, the holders on this one. */
	threaded = pthread_create(&thread, NULL, placer_main, &pl) == 0;
	if (!threaded)
		placer_main(&pl);
	t = vad_span_now();
	int holds = give_holds(rb, pl.ranges, err, err_len);
	rb->holds = vad_span_since(t);
	pthread_mutex_lock(&pl.lock);
	while (!pl.placed)
		pthread_cond_wait(&pl.cond, &pl.lock);
	bool placed_ok = pl.placed_ok;
	pthread_mutex_unlock(&pl.lock);
	int reg = -1, hook = 0;
	char msg[400];
	if (holds == 0 && placed_ok && rb->before_check)
		hook = rb->before_check(rb->before_check_ctx, err, err_len);
	if (holds == 0 && placed_ok && hook == 0) {
		/* With the ranges placed; the allocators' own check may run meanwhile. */
		t = vad_span_now();
		reg = vad_registry_check(rb->reg, msg, sizeof(msg));
		rb->registry_check = vad_span_since(t);
	}
	if (threaded)
		pthread_join(thread, NULL);
	if (holds != 0)
		goto out;
	if (pl.rc != 0) {
		snprintf(err, err_len, "%s", pl.err);
		goto out;
	}
	if (hook != 0)
		goto out; /* its sentence is in err */
	if (reg != 0) {
		snprintf(err, err_len, "the rebuilt registry fails its check: %s", msg);
		goto out;
	}
	rc = 0;
out:
	free(pl.ranges);
	pthread_mutex_destroy(&pl.lock);
	pthread_cond_destroy(&pl.cond);
	return rc;
}
