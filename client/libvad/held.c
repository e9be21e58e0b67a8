/*
 * held.c - the client-side record of held ranges (address -> arena, offset, size, refs).
 *
 * The daemon is the authority on who holds what; this table exists so vad_size needs no
 * round trip and vad_free_batch can group pointers by arena.
 */
#include <stdlib.h>

#include "internal.h"

__thread bool libvad_hash_oom;

int libvad_held_add(vad_client *c, struct libvad_arena *arena, uint64_t offset, uint64_t size)
{
	uintptr_t addr = (uintptr_t)(arena->base + offset);
	struct libvad_held *h;
	pthread_mutex_lock(&c->held_lock);
	HASH_FIND(hh, c->held, &addr, sizeof(addr), h);
	if (h) {
		h->refs++;
		pthread_mutex_unlock(&c->held_lock);
		return VAD_OK;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		pthread_mutex_unlock(&c->held_lock);
		return VAD_ENOMEM;
	}
	h->addr = addr;
	h->arena = arena;
	h->offset = offset;
	h->size = size;
	h->refs = 1;
	libvad_hash_oom = false;
	HASH_ADD(hh, c->held, addr, sizeof(h->addr), h);
	bool oom = libvad_hash_oom;
	pthread_mutex_unlock(&c->held_lock);
	if (oom) {
		free(h);
		return VAD_ENOMEM;
	}
	return VAD_OK;
}

void libvad_held_drop(vad_client *c, uintptr_t addr)
{
	struct libvad_held *h;
	pthread_mutex_lock(&c->held_lock);
	HASH_FIND(hh, c->held, &addr, sizeof(addr), h);
	if (h && --h->refs == 0) {
		HASH_DEL(c->held, h);
		free(h);
	}
	pthread_mutex_unlock(&c->held_lock);
}

bool libvad_held_take(vad_client *c, uintptr_t addr, struct libvad_held *out)
{
	struct libvad_held *h;
	pthread_mutex_lock(&c->held_lock);
	HASH_FIND(hh, c->held, &addr, sizeof(addr), h);
	if (h) {
		*out = *h;
		if (--h->refs == 0) {
			HASH_DEL(c->held, h);
			free(h);
		}
	}
	pthread_mutex_unlock(&c->held_lock);
	return h != NULL;
}

bool libvad_held_lookup(vad_client *c, uintptr_t addr, struct libvad_held *out)
{
	struct libvad_held *h;
	pthread_mutex_lock(&c->held_lock);
	HASH_FIND(hh, c->held, &addr, sizeof(addr), h);
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
		free(h);
	}
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
