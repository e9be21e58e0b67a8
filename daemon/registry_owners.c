/* registry_owners.c - who holds the ranges of one page of a walk (vactl map's owners). */
#include "registry_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* Index of offset in the ascending offsets[0..n), or n when it is not there. */
static size_t find_offset(const uint64_t *offsets, size_t n, uint64_t offset)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (offsets[mid] < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && offsets[lo] == offset ? lo : n;
}

struct owners_scan {
	unsigned arena;
	const uint64_t *offsets;
	size_t n;
	struct vad_session *owner;
	void (*fn)(void *ctx, size_t index, struct vad_session *owner);
	void *ctx;
};

static void scan_hold(void *arg, const struct vad_hold *o)
{
	struct owners_scan *sc = arg;
	if (o->arena != sc->arena || o->offset < sc->offsets[0] ||
	    o->offset > sc->offsets[sc->n - 1])
		return;
	size_t i = find_offset(sc->offsets, sc->n, o->offset);
	if (i < sc->n)
		sc->fn(sc->ctx, i, sc->owner);
}

/* Each holder costs min(its holds, n) steps: a small holder's table is scanned, a big one
 * is probed once per offset. */
static void scan_holder(void *arg, struct vad_holder *h)
{
	struct owners_scan *sc = arg;
	if (!h->owner)
		return;
	sc->owner = h->owner;
	pthread_mutex_lock(&h->lock);
	if (vad_holder_capacity(h) <= sc->n) {
		vad_holder_for_each(h, scan_hold, sc);
	} else {
		for (size_t i = 0; i < sc->n; i++)
			if (vad_holder_find(h, sc->arena, sc->offsets[i]))
				sc->fn(sc->ctx, i, h->owner);
	}
	pthread_mutex_unlock(&h->lock);
}

void vad_registry_holders_of(struct vad_registry *reg, unsigned arena, const uint64_t *offsets,
			     size_t n,
			     void (*fn)(void *ctx, size_t index, struct vad_session *owner),
			     void *ctx)
{
	if (!n)
		return;
	struct owners_scan sc = {.arena = arena, .offsets = offsets, .n = n, .fn = fn, .ctx = ctx};
	vad_registry_for_each_holder(reg, scan_holder, &sc);
}
