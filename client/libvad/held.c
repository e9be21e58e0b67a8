/*
 * held.c - the client-side record of held ranges (address -> arena, offset, size, refs).
 *
 * The daemon is the authority on who holds what; this table exists so vad_size needs no
 * round trip and vad_free_batch can group pointers by arena.
 */
#include <stdlib.h>

#include "internal.h"

__thread bool libvad_hash_oom;

/* A record from the spare list, or a new one. held_lock held. */
static struct libvad_held *record_get(vad_client *c)
{
	struct libvad_held *h = c->held_spare;
	if (!h)
		return malloc(sizeof(*h));
	c->held_spare = h->next_spare;
	c->n_held_spare--;
	return h;
}

/* Keep a record for reuse (an alloc/free pair then costs no malloc), up to a limit. */
static void record_put(vad_client *c, struct libvad_held *h)
{
	if (c->n_held_spare >= LIBVAD_HELD_SPARE_MAX) {
		free(h);
		return;
	}
	h->next_spare = c->held_spare;
	c->held_spare = h;
	c->n_held_spare++;
}

/* uthash frees its table when the last record leaves and allocates it again with the next
 * one: with one range held at a time (alloc, free, alloc, ...) that was a malloc and a free
 * per call. The anchor (address 0, where no range starts) keeps the table. held_lock held. */
static void anchor_locked(vad_client *c)
{
	if (c->held)
		return;
	c->held_anchor = (struct libvad_held){.addr = 0};
	libvad_hash_oom = false;
	HASH_ADD(hh, c->held, addr, sizeof(c->held_anchor.addr), &c->held_anchor);
	/* Out of memory: no anchor, and the record's own add reports it. */
}

/* The record of the range starting at addr, or NULL (never the anchor). held_lock held. */
static struct libvad_held *find_locked(vad_client *c, uintptr_t addr)
{
	struct libvad_held *h;
	HASH_FIND(hh, c->held, &addr, sizeof(addr), h);
	return h == &c->held_anchor ? NULL : h;
}

/* With fresh set an existing record is a clash (VAD_EPROTO), not one more reference. */
static int add_locked(vad_client *c, struct libvad_arena *arena, uint64_t offset, uint64_t size,
		      bool fresh)
{
	uintptr_t addr = (uintptr_t)(arena->base + offset);
	struct libvad_held *h = find_locked(c, addr);
	if (h && fresh)
		return VAD_EPROTO;
	if (h) {
		h->refs++;
		return VAD_OK;
	}
	anchor_locked(c);
	h = record_get(c);
	if (!h)
		return VAD_ENOMEM;
	*h = (struct libvad_held){
	    .addr = addr, .arena = arena, .offset = offset, .size = size, .refs = 1};
	libvad_hash_oom = false;
	HASH_ADD(hh, c->held, addr, sizeof(h->addr), h);
	if (libvad_hash_oom) {
		record_put(c, h);
		return VAD_ENOMEM;
	}
	return VAD_OK;
}

/* Drop one reference; copy the record first into *out if out is not NULL. */
static bool drop_locked(vad_client *c, uintptr_t addr, struct libvad_held *out)
{
	struct libvad_held *h = find_locked(c, addr);
	if (!h)
		return false;
	if (out)
		*out = *h;
	if (--h->refs == 0) {
		HASH_DEL(c->held, h);
		record_put(c, h);
	}
	return true;
}

int libvad_held_add_many(vad_client *c, struct libvad_arena *arena, size_t n,
			 const uint64_t *offsets, const uint64_t *sizes, bool fresh, size_t *clash,
			 uint64_t granted_gen)
{
	pthread_mutex_lock(&c->held_lock);
	if (granted_gen != LIBVAD_GEN_ANY &&
	    __atomic_load_n(&c->lost_gen, __ATOMIC_ACQUIRE) > granted_gen) {
		pthread_mutex_unlock(&c->held_lock);
		return VAD_ERESUME;
	}
	for (size_t i = 0; i < n; i++) {
		int err = add_locked(c, arena, offsets[i], sizes[i], fresh);
		if (err != VAD_OK) {
			for (size_t j = 0; j < i; j++)
				drop_locked(c, (uintptr_t)(arena->base + offsets[j]), NULL);
			pthread_mutex_unlock(&c->held_lock);
			if (clash)
				*clash = i;
			return err;
		}
	}
	pthread_mutex_unlock(&c->held_lock);
	return VAD_OK;
}

int libvad_held_add(vad_client *c, struct libvad_arena *arena, uint64_t offset, uint64_t size)
{
	return libvad_held_add_many(c, arena, 1, &offset, &size, false, NULL, LIBVAD_GEN_ANY);
}

bool libvad_held_has(vad_client *c, uintptr_t addr)
{
	pthread_mutex_lock(&c->held_lock);
	struct libvad_held *h = find_locked(c, addr);
	pthread_mutex_unlock(&c->held_lock);
	return h != NULL;
}

void libvad_held_take_many(vad_client *c, struct libvad_arena *arena, size_t n,
			   const uint64_t *offsets, struct libvad_held *out)
{
	pthread_mutex_lock(&c->held_lock);
	for (size_t i = 0; i < n; i++)
		if (!drop_locked(c, (uintptr_t)(arena->base + offsets[i]), &out[i]))
			out[i].refs = 0;
	pthread_mutex_unlock(&c->held_lock);
}

bool libvad_held_lookup(vad_client *c, uintptr_t addr, struct libvad_held *out)
{
	pthread_mutex_lock(&c->held_lock);
	struct libvad_held *h = find_locked(c, addr);
	if (h)
		*out = *h;
	pthread_mutex_unlock(&c->held_lock);
	return h != NULL;
}

void libvad_held_destroy(vad_client *c)
{
	struct libvad_held *h, *tmp;
	HASH_ITER(hh, c->held, h, tmp)
	{
		HASH_DEL(c->held, h);
		if (h != &c->held_anchor)
			free(h);
	}
	while ((h = c->held_spare)) {
		c->held_spare = h->next_spare;
		free(h);
	}
	c->n_held_spare = 0;
}

size_t vad_size(vad_client *c, void *ptr)
{
	struct libvad_held h;
	if (!c || !libvad_held_lookup(c, (uintptr_t)ptr, &h))
		return 0;
	return (size_t)h.size;
}

int vad_range_info(vad_client *c, const void *ptr, struct vad_range *out)
{
	struct libvad_held h;
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_range_info: client or out is NULL");
	if (!libvad_held_lookup(c, (uintptr_t)ptr, &h))
		return libvad_fail(c, VAD_ENOTHELD, "this client holds no range starting there");
	out->arena = h.arena->name;
	out->offset = h.offset;
	out->size = (size_t)h.size;
	out->refs = h.refs;
	return VAD_OK;
}

int vad_range_writable(vad_client *c, const void *ptr)
{
	struct libvad_held h;
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_range_writable: client is NULL");
	if (!libvad_held_lookup(c, (uintptr_t)ptr, &h))
		return libvad_fail(c, VAD_ENOTHELD, "this client holds no range starting there");
	return h.arena->read_only ? 0 : 1;
}
