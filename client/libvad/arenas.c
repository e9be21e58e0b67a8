/*
 * arenas.c - mapping arenas on first use and finding the mapping behind a pointer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static struct libvad_arena *lookup_locked(vad_client *c, const char *name)
{
	for (size_t i = 0; i < c->n_arenas; i++)
		if (strcmp(c->arenas[i]->name, name) == 0)
			return c->arenas[i];
	return NULL;
}

static void arena_free(struct libvad_arena *a)
{
	if (a->base)
		munmap(a->base, a->size);
	if (a->fd >= 0)
		close(a->fd);
	free(a->name);
	free(a);
}

/* Ask the daemon for the arena's fd and map it. */
static int map_arena(vad_client *c, const char *name, struct libvad_arena **out)
{
	Vad__MapArena m = VAD__MAP_ARENA__INIT;
	m.arena = (char *)name;
	Vad__Request req = VAD__REQUEST__INIT;
	req.op_case = VAD__REQUEST__OP_MAP_ARENA;
	req.map_arena = &m;
	Vad__Response *r;
	int fd;
	int err = libvad_rpc(c, &req, VAD__RESPONSE__RESULT_MAP_ARENA, &r, &fd);
	if (err != VAD_OK)
		return err;
	Vad__ArenaInfo *info = r->map_arena->arena;
	if (fd < 0 || !info || info->size == 0 || info->size > SIZE_MAX) {
		if (fd >= 0)
			close(fd);
		vad__response__free_unpacked(r, NULL);
		return libvad_failf(c, VAD_EPROTO, "the daemon's map reply for arena '%s' %s", name,
				    fd < 0 ? "carried no file descriptor" : "is malformed");
	}
	/* The fd must be that arena's file: one too small would SIGBUS us on access. */
	struct stat st;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < info->size) {
		close(fd);
		vad__response__free_unpacked(r, NULL);
		return libvad_failf(c, VAD_EPROTO,
				    "the file passed for arena '%s' is smaller than the arena",
				    name);
	}
	struct libvad_arena *a = calloc(1, sizeof(*a));
	if (a)
		a->name = strdup(info->name);
	if (!a || !a->name) {
		free(a);
		close(fd);
		vad__response__free_unpacked(r, NULL);
		return libvad_fail(c, VAD_ENOMEM, NULL);
	}
	a->fd = fd;
	a->size = info->size;
	a->quantum = info->quantum;
	vad__response__free_unpacked(r, NULL);
	void *base = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		int e = errno;
		a->base = NULL;
		arena_free(a);
		return libvad_failf(c, VAD_EMAP, "cannot map arena '%s' (%llu bytes): %s", name,
				    (unsigned long long)info->size, strerror(e));
	}
	a->base = base;
	*out = a;
	return VAD_OK;
}

int libvad_arena_get(vad_client *c, const char *name, struct libvad_arena **out)
{
	if (!name || !*name)
		name = c->default_arena;
	pthread_mutex_lock(&c->arena_lock);
	struct libvad_arena *a = lookup_locked(c, name);
	pthread_mutex_unlock(&c->arena_lock);
	if (a) {
		*out = a;
		return VAD_OK;
	}
	struct libvad_arena *fresh = NULL;
	int err = map_arena(c, name, &fresh);
	if (err != VAD_OK)
		return err;
	pthread_mutex_lock(&c->arena_lock);
	/* Another thread may have mapped it meanwhile: keep the first mapping. */
	a = lookup_locked(c, fresh->name);
	if (!a && c->n_arenas == c->cap_arenas) {
		size_t cap = c->cap_arenas ? c->cap_arenas * 2 : 4;
		struct libvad_arena **v = realloc(c->arenas, cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&c->arena_lock);
			arena_free(fresh);
			return libvad_fail(c, VAD_ENOMEM, NULL);
		}
		c->arenas = v;
		c->cap_arenas = cap;
	}
	if (!a) {
		c->arenas[c->n_arenas++] = fresh;
		a = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&c->arena_lock);
	if (fresh)
		arena_free(fresh);
	if (strcmp(a->name, name) != 0)
		return libvad_failf(c, VAD_EPROTO, "asked to map arena '%s', the daemon sent '%s'",
				    name, a->name);
	*out = a;
	return VAD_OK;
}

struct libvad_arena *libvad_arena_find(vad_client *c, const void *ptr)
{
	const uint8_t *p = ptr;
	struct libvad_arena *found = NULL;
	pthread_mutex_lock(&c->arena_lock);
	for (size_t i = 0; i < c->n_arenas; i++) {
		struct libvad_arena *a = c->arenas[i];
		if (p >= a->base && (uint64_t)(p - a->base) < a->size) {
			found = a;
			break;
		}
	}
	pthread_mutex_unlock(&c->arena_lock);
	return found;
}

void libvad_arenas_destroy(vad_client *c)
{
	for (size_t i = 0; i < c->n_arenas; i++)
		arena_free(c->arenas[i]);
	free(c->arenas);
	c->arenas = NULL;
	c->n_arenas = c->cap_arenas = 0;
}

int vad_pointer(vad_client *c, const char *arena, uint64_t offset, void **out)
{
	if (!c || !out)
		return libvad_fail(c, VAD_EINVAL, "vad_pointer: client or out is NULL");
	struct libvad_arena *a;
	int err = libvad_arena_get(c, arena, &a);
	if (err != VAD_OK)
		return err;
	if (offset >= a->size)
		return libvad_failf(c, VAD_EINVAL, "offset %llu is past the end of arena '%s'",
				    (unsigned long long)offset, a->name);
	*out = a->base + offset;
	return VAD_OK;
}
