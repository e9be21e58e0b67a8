/*
 * arenas.c - mapping arenas on first use and finding the mapping behind a pointer.
 *
 * Each arena is mapped at an address aligned to the largest alignment it can give (its
 * size rounded up to a power of two, at most VAD_MAX_ALIGN): the daemon aligns offsets, so
 * base + offset is then aligned in this process too. The map reply is checked before
 * anything is mapped: the fd, the arena's name, size and quantum, the file's size.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "map_aligned.h"
#include "transport.h"

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

static bool is_power_of_two(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* The largest alignment a mapping of size bytes is given. */
static uint64_t max_align_of(uint64_t size)
{
	uint64_t a = 1;
	while (a < size && a < VAD_MAX_ALIGN)
		a <<= 1;
	return a;
}

/* What is wrong with a map reply for arena name carrying fd, or NULL if nothing is. */
static const char *bad_map_reply(const char *name, const Vad__ArenaInfo *info, int fd, char *buf,
				 size_t cap)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	if (fd < 0)
		return "carried no file descriptor";
	if (!info)
		return "describes no arena";
	if (strcmp(info->name, name) != 0) {
		snprintf(buf, cap, "describes arena '%.64s' instead", info->name);
		return buf;
	}
	if (!is_power_of_two(info->quantum) || info->quantum < page) {
		snprintf(buf, cap,
			 "gives a quantum of %llu bytes, not a power of two of at least "
			 "the page size",
			 (unsigned long long)info->quantum);
		return buf;
	}
	if (info->size == 0 || info->size % info->quantum) {
		snprintf(buf, cap, "gives a size of %llu bytes, not a multiple of its quantum",
			 (unsigned long long)info->size);
		return buf;
	}
	if (info->size > SIZE_MAX - VAD_MAX_ALIGN) {
		snprintf(buf, cap, "gives a size of %llu bytes, more than this process can map",
			 (unsigned long long)info->size);
		return buf;
	}
	/* The fd must be that arena's file: one too small would SIGBUS us on access. */
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < info->size)
		return "passed a file that is not a file as large as the arena";
	return NULL;
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
	char buf[160];
	const char *bad = bad_map_reply(name, info, fd, buf, sizeof(buf));
	if (bad) {
		if (fd >= 0)
			close(fd);
		vad__response__free_unpacked(r, NULL);
		return libvad_failf(c, VAD_EPROTO, "the daemon's map reply for arena '%s' %s", name,
				    bad);
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
	a->max_align = max_align_of(a->size);
	a->read_only = info->read_only;
	vad__response__free_unpacked(r, NULL);
	/* A reader's fd is read-only: a writable shared mapping of it is refused (EACCES). */
	int prot = a->read_only ? PROT_READ : PROT_READ | PROT_WRITE;
	void *base = vad_map_aligned(fd, (size_t)a->size, (size_t)a->max_align, prot);
	if (base == MAP_FAILED) {
		int e = errno;
		uint64_t size = a->size, align = a->max_align;
		bool read_only = a->read_only;
		a->base = NULL;
		arena_free(a);
		return libvad_failf(c, VAD_EMAP,
				    "cannot map arena '%s' (%llu bytes, aligned to %llu%s): %s",
				    name, (unsigned long long)size, (unsigned long long)align,
				    read_only ? ", read-only" : "", strerror(e));
	}
	a->base = base;
	*out = a;
	return VAD_OK;
}

/* The arena last found or mapped, if it is not retired: most calls use one arena, and
 * this finds it without arena_lock (two lock round trips per alloc and free otherwise).
 * Records are never freed before vad_close and what is read of them (name, base, size)
 * never changes, so a stale pointer is only a miss: a retired one is refused here, and the
 * locked table decides. */
static struct libvad_arena *hot_arena(vad_client *c)
{
	struct libvad_arena *a = __atomic_load_n(&c->arena_hot, __ATOMIC_ACQUIRE);
	return a && !__atomic_load_n(&a->retired, __ATOMIC_ACQUIRE) ? a : NULL;
}

static void set_hot_arena(vad_client *c, struct libvad_arena *a)
{
	if (a)
		__atomic_store_n(&c->arena_hot, a, __ATOMIC_RELEASE);
}

struct libvad_arena *libvad_arena_peek(vad_client *c, const char *name)
{
	struct libvad_arena *a = hot_arena(c);
	if (a && strcmp(a->name, name) == 0)
		return a;
	pthread_mutex_lock(&c->arena_lock);
	a = lookup_locked(c, name);
	pthread_mutex_unlock(&c->arena_lock);
	set_hot_arena(c, a);
	return a;
}

/* Enter a fresh mapping in the table, unless a session was lost since lost0 was read: the
 * mapping may be the lost session's (its arena file gone with it), and forget_session,
 * which sets lost_gen before it takes arena_lock, has retired or will retire the table
 * without it. */
static int add_arena(vad_client *c, struct libvad_arena *a, uint64_t lost0)
{
	pthread_mutex_lock(&c->arena_lock);
	if (__atomic_load_n(&c->lost_gen, __ATOMIC_ACQUIRE) != lost0) {
		pthread_mutex_unlock(&c->arena_lock);
		return libvad_failf(
		    c, VAD_ERESUME,
		    "the daemon at %s restarted without this client's session while "
		    "arena '%s' was being mapped: every range this client held is "
		    "lost; the client goes on as a new session",
		    c->socket_path, a->name);
	}
	if (c->n_arenas == c->cap_arenas) {
		size_t cap = c->cap_arenas ? c->cap_arenas * 2 : 4;
		struct libvad_arena **v = realloc(c->arenas, cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&c->arena_lock);
			return libvad_fail(c, VAD_ENOMEM, NULL);
		}
		c->arenas = v;
		c->cap_arenas = cap;
	}
	c->arenas[c->n_arenas++] = a;
	pthread_mutex_unlock(&c->arena_lock);
	set_hot_arena(c, a);
	return VAD_OK;
}

int libvad_arena_get(vad_client *c, const char *name, struct libvad_arena **out)
{
	if (!name || !*name)
		name = c->default_arena;
	struct libvad_arena *a = libvad_arena_peek(c, name);
	if (a) {
		*out = a;
		return VAD_OK;
	}
	/* One thread at a time asks for an fd: many threads meeting an arena not mapped yet
	 * would each send a MapArena, and the daemon refuses to pass more fds while 32 sent
	 * on a connection are unread. The others wait here and find the mapping. */
	pthread_mutex_lock(&c->map_lock);
	a = libvad_arena_peek(c, name);
	int err = VAD_OK;
	if (!a) {
		uint64_t lost0 = __atomic_load_n(&c->lost_gen, __ATOMIC_ACQUIRE);
		err = map_arena(c, name, &a);
		if (err == VAD_OK) {
			err = add_arena(c, a, lost0);
			if (err != VAD_OK)
				arena_free(a);
		}
	}
	pthread_mutex_unlock(&c->map_lock);
	if (err == VAD_OK)
		*out = a;
	return err;
}

struct libvad_arena *libvad_arena_find(vad_client *c, const void *ptr)
{
	const uint8_t *p = ptr;
	struct libvad_arena *found = hot_arena(c);
	if (found && p >= found->base && (uint64_t)(p - found->base) < found->size)
		return found;
	found = NULL;
	pthread_mutex_lock(&c->arena_lock);
	for (size_t i = 0; i < c->n_arenas; i++) {
		struct libvad_arena *a = c->arenas[i];
		if (p >= a->base && (uint64_t)(p - a->base) < a->size) {
			found = a;
			break;
		}
	}
	pthread_mutex_unlock(&c->arena_lock);
	set_hot_arena(c, found);
	return found;
}

void libvad_arenas_destroy(vad_client *c)
{
	__atomic_store_n(&c->arena_hot, NULL, __ATOMIC_RELAXED);
	for (size_t i = 0; i < c->n_arenas; i++)
		arena_free(c->arenas[i]);
	free(c->arenas);
	c->arenas = NULL;
	c->n_arenas = c->cap_arenas = 0;
	for (size_t i = 0; i < c->n_retired_arenas; i++)
		arena_free(c->retired_arenas[i]);
	free(c->retired_arenas);
	c->retired_arenas = NULL;
	c->n_retired_arenas = 0;
}

void libvad_arena_retire(vad_client *c, struct libvad_arena *a)
{
	struct libvad_arena **grown;

	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	__atomic_store_n(&a->retired, true, __ATOMIC_RELEASE);
	grown = realloc(c->retired_arenas, (c->n_retired_arenas + 1) * sizeof(*grown));
	if (!grown)
		return; /* out of memory: the record is kept (leaked), never freed under a user */
	c->retired_arenas = grown;
	c->retired_arenas[c->n_retired_arenas++] = a;
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
