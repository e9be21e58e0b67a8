/* state.c - the state file: header, records, slots, the loader's checks; see state.h. */
#include "state.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE		4096u
#define REC_VALID	(1ull << 63)
#define REC_CHECK_SHIFT 48
#define REC_CHECK_MASK	0x7fffull
#define REC_ARENA_SHIFT 32
#define REC_SESSION	0xffffu /* the arena field of a session record (version 2) */
#define CACHE_SLOTS	64	/* per-thread cache of free slots; half moves at a time */

/* The header at offset 0. Fixed fields only; the arenas follow it. */
struct state_header {
	char magic[8];
	uint32_t version, header_size; /* header_size: a multiple of 4096, records follow */
	uint32_t record_size, n_arenas;
	uint64_t capacity;	   /* record slots */
	uint64_t high_water;	   /* atomic: slots at or above it were never used */
	uint64_t next_session;	   /* the first session id the next daemon gives out */
	uint64_t token_capacity;   /* version 3: token slots, after the record slots (else 0) */
	uint64_t token_high_water; /* version 3, atomic: token slots at or above it never used */
};
_Static_assert(sizeof(struct state_header) == 64, "state header is 64 bytes");
_Static_assert(sizeof(struct vad_state_arena) == 96, "state arena entry is 96 bytes");

/* One hold. head: valid bit, 15 check bits, 16 bits of arena, 32 bits of count. */
struct state_record {
	uint64_t head;
	uint64_t offset, size;
	uint32_t holder, uid;
};
_Static_assert(sizeof(struct state_record) == 32, "state record is 32 bytes");

/* One share token (version 3). head: valid bit, 15 check bits, 16 bits of arena, flags (bit
 * 0: single use); check: 32 more check bits, written with the rest before the head. */
struct state_token {
	uint64_t head;
	char token[VAD_STATE_TOKEN_CHARS]; /* base62, no NUL */
	uint64_t offset;
	uint64_t expires_ms; /* CLOCK_REALTIME; 0: never */
	uint32_t uid;
	uint32_t check;
};
_Static_assert(sizeof(struct state_token) == VAD_STATE_TOKEN_BYTES, "token record is 64 bytes");
#define TOK_SINGLE_USE 1u

struct vad_state {
	int fd;
	bool own_fd;
	void *map;
	size_t map_len;
	struct state_header *hdr;
	struct vad_state_arena *arenas;
	struct state_record *rec;
	uint64_t id; /* tells a thread's cache which state its slots belong to */
	pthread_mutex_t lock;
	uint32_t *free_slots; /* lock: slots given back beyond the threads' caches */
	size_t n_free, cap_free;
	uint64_t full;		 /* atomic */
	struct state_token *tok; /* version 3: the token slots */
	uint64_t tok_cap;	 /* their number; 0 before version 3 */
	pthread_mutex_t tok_lock;
	uint32_t *tok_free; /* tok_lock: token slots given back, reused first */
	size_t n_tok_free, cap_tok_free;
	uint64_t tok_full; /* tok_lock */
};

static uint64_t next_state_id = 1; /* atomic */

static __thread struct {
	uint64_t state_id;
	uint32_t n;
	uint32_t slot[CACHE_SLOTS];
} cache;

/* 15 check bits over everything a record says, so a stray write is seen as one. */
static uint64_t record_check(uint64_t offset, uint64_t size, uint32_t holder, uint32_t uid,
			     uint32_t arena, uint32_t count)
{
	uint64_t x = offset * 0x9e3779b97f4a7c15ull;
	x ^= (size + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
	x ^= ((uint64_t)holder << 32 | uid) * 0x94d049bb133111ebull;
	x ^= ((uint64_t)arena << 32 | count) * 0xd6e8feb86659fd93ull;
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	return (x >> 40) & REC_CHECK_MASK;
}

static uint64_t record_head(const struct state_record *r, uint32_t arena, uint32_t count)
{
	return REC_VALID |
	       record_check(r->offset, r->size, r->holder, r->uid, arena, count)
		   << REC_CHECK_SHIFT |
	       (uint64_t)arena << REC_ARENA_SHIFT | count;
}

/* 47 check bits over everything a token record says: 15 for the head, 32 for check. */
static uint64_t token_check(const char *token, uint64_t offset, uint64_t expires_ms, uint32_t uid,
			    uint32_t arena, uint32_t flags)
{
	uint64_t x = 0xcbf29ce484222325ull;
	for (unsigned i = 0; i < VAD_STATE_TOKEN_CHARS; i++)
		x = (x ^ (uint8_t)token[i]) * 0x100000001b3ull;
	x ^= offset * 0x9e3779b97f4a7c15ull;
	x ^= (expires_ms + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
	x ^= ((uint64_t)uid << 32 | arena) * 0x94d049bb133111ebull;
	x ^= (uint64_t)flags * 0xd6e8feb86659fd93ull;
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return x;
}

static size_t header_bytes(size_t n_arenas)
{
	size_t b = sizeof(struct state_header) + n_arenas * sizeof(struct vad_state_arena);
	return (b + PAGE - 1) / PAGE * PAGE;
}

static int map_state(struct vad_state *st, size_t len, char *err, size_t err_len)
{
	st->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, st->fd, 0);
	if (st->map == MAP_FAILED) {
		st->map = NULL;
		snprintf(err, err_len, "cannot map the state file (%zu bytes): %s", len,
			 strerror(errno));
		return -1;
	}
	st->map_len = len;
	st->hdr = st->map;
	st->arenas = (struct vad_state_arena *)(st->hdr + 1);
	st->rec = (struct state_record *)((char *)st->map + st->hdr->header_size);
	st->tok = (struct state_token *)(st->rec + st->hdr->capacity);
	st->id = __atomic_fetch_add(&next_state_id, 1, __ATOMIC_RELAXED);
	pthread_mutex_init(&st->lock, NULL);
	pthread_mutex_init(&st->tok_lock, NULL);
	return 0;
}

int vad_state_create(const struct vad_state_arena *arenas, size_t n_arenas, uint64_t capacity,
		     uint64_t token_capacity, uint64_t next_session, struct vad_state **out,
		     char *err, size_t err_len)
{
	*out = NULL;
	if (n_arenas > VAD_STATE_ARENAS_MAX || capacity > VAD_STATE_CAPACITY_MAX ||
	    token_capacity > VAD_STATE_TOKENS_MAX) {
		snprintf(err, err_len,
			 "state file: %zu arenas, %llu holds and %llu tokens is more than it can "
			 "keep (%u arenas, %llu holds, %llu tokens)",
			 n_arenas, (unsigned long long)capacity, (unsigned long long)token_capacity,
			 VAD_STATE_ARENAS_MAX, (unsigned long long)VAD_STATE_CAPACITY_MAX,
			 (unsigned long long)VAD_STATE_TOKENS_MAX);
		return -1;
	}
	struct vad_state *st = calloc(1, sizeof(*st));
	if (!st) {
		snprintf(err, err_len, "state file: out of memory");
		return -1;
	}
	size_t hb = header_bytes(n_arenas);
	size_t len = hb + capacity * sizeof(struct state_record) +
		     token_capacity * sizeof(struct state_token);
	st->fd = memfd_create("vad-state", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	st->own_fd = true;
	if (st->fd < 0 || ftruncate(st->fd, (off_t)len) != 0) {
		snprintf(err, err_len, "state file: cannot create a memfd of %zu bytes: %s", len,
			 strerror(errno));
		goto fail;
	}
	/* Its size never changes: a reader can trust the size it checked. */
	fcntl(st->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	struct state_header h = {.version = VAD_STATE_VERSION,
				 .header_size = (uint32_t)hb,
				 .record_size = sizeof(struct state_record),
				 .n_arenas = (uint32_t)n_arenas,
				 .capacity = capacity,
				 .next_session = next_session,
				 .token_capacity = token_capacity};
	memcpy(h.magic, VAD_STATE_MAGIC, 8);
	bool written = pwrite(st->fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h);
	/* Empty entries (tenant slots) stay holes of the sparse file: 6 MiB for 65535 slots
	 * costs nothing until arenas open there. */
	for (size_t i = 0; written && i < n_arenas; i++)
		if (arenas[i].quantum)
			written = pwrite(st->fd, &arenas[i], sizeof(arenas[i]),
					 (off_t)(sizeof(h) + i * sizeof(arenas[i]))) ==
				  (ssize_t)sizeof(arenas[i]);
	if (!written) {
		snprintf(err, err_len, "state file: cannot write its header: %s", strerror(errno));
		goto fail;
	}
	if (map_state(st, len, err, err_len) != 0)
		goto fail;
	st->tok_cap = token_capacity;
	*out = st;
	return 0;
fail:
	if (st->fd >= 0)
		close(st->fd);
	free(st);
	return -1;
}

int vad_state_open(int fd, struct vad_state **out, char *err, size_t err_len)
{
	*out = NULL;
	struct stat sb;
	struct state_header h;
	if (fstat(fd, &sb) != 0) {
		snprintf(err, err_len, "state file: fstat: %s", strerror(errno));
		return -1;
	}
	if (sb.st_size < (off_t)sizeof(h) || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		snprintf(err, err_len, "state file: truncated: %lld bytes, not even a header",
			 (long long)sb.st_size);
		return -1;
	}
	if (memcmp(h.magic, VAD_STATE_MAGIC, 8) != 0) {
		snprintf(err, err_len, "state file: not a vad state file (bad magic)");
		return -1;
	}
	if (h.version == 0 || h.version > VAD_STATE_VERSION) {
		snprintf(err, err_len,
			 "state file: format version %u, this vad knows 1 to %u (was it written by "
			 "a newer vad?)",
			 h.version, VAD_STATE_VERSION);
		return -1;
	}
	if (h.version < 3)
		h.token_capacity = h.token_high_water = 0; /* reserved, and zero, before */
	uint64_t need;
	if (h.record_size != sizeof(struct state_record) || h.n_arenas > VAD_STATE_ARENAS_MAX ||
	    h.capacity > VAD_STATE_CAPACITY_MAX || h.header_size % PAGE ||
	    h.header_size < header_bytes(h.n_arenas) || h.token_capacity > VAD_STATE_TOKENS_MAX ||
	    h.token_high_water > h.token_capacity) {
		snprintf(err, err_len,
			 "state file: inconsistent header (record size %u, %u arenas, capacity "
			 "%llu, header %u bytes, %llu of %llu token slots used)",
			 h.record_size, h.n_arenas, (unsigned long long)h.capacity, h.header_size,
			 (unsigned long long)h.token_high_water,
			 (unsigned long long)h.token_capacity);
		return -1;
	}
	need = h.header_size + h.capacity * h.record_size +
	       h.token_capacity * sizeof(struct state_token);
	if ((uint64_t)sb.st_size < need) {
		snprintf(err, err_len,
			 "state file: truncated: %lld bytes where its header promises %llu",
			 (long long)sb.st_size, (unsigned long long)need);
		return -1;
	}
	struct vad_state *st = calloc(1, sizeof(*st));
	if (!st) {
		snprintf(err, err_len, "state file: out of memory");
		return -1;
	}
	st->fd = fd;
	if (map_state(st, (size_t)need, err, err_len) != 0) {
		free(st);
		return -1;
	}
	st->tok_cap = h.token_capacity; /* 0 before version 3, whatever the file says */
	for (uint32_t i = 0; i < h.n_arenas; i++) {
		const struct vad_state_arena *a = &st->arenas[i];
		if (h.version >= 3 && !a->quantum)
			continue; /* an empty tenant slot */
		if (memchr(a->name, 0, sizeof(a->name)) == NULL || !a->name[0] || !a->quantum ||
		    a->size % a->quantum) {
			snprintf(err, err_len, "state file: arena entry %u is malformed", i);
			vad_state_close(st);
			return -1;
		}
	}
	if (st->hdr->high_water > h.capacity ||
	    (st->tok_cap && st->hdr->token_high_water > st->tok_cap)) {
		snprintf(err, err_len, "state file: %llu slots used of %llu (corrupted header)",
			 (unsigned long long)st->hdr->high_water, (unsigned long long)h.capacity);
		vad_state_close(st);
		return -1;
	}
	*out = st;
	return 0;
}

void vad_state_close(struct vad_state *st)
{
	if (!st)
		return;
	if (st->map)
		munmap(st->map, st->map_len);
	if (st->own_fd && st->fd >= 0)
		close(st->fd);
	pthread_mutex_destroy(&st->lock);
	pthread_mutex_destroy(&st->tok_lock);
	free(st->free_slots);
	free(st->tok_free);
	free(st);
}

int vad_state_fd(const struct vad_state *st)
{
	return st->fd;
}

const struct vad_state_arena *vad_state_arenas(const struct vad_state *st, size_t *n)
{
	*n = st->hdr->n_arenas;
	return st->arenas;
}

uint64_t vad_state_next_session(const struct vad_state *st)
{
	return st->hdr->next_session;
}

int vad_state_scan(const struct vad_state *st, int (*fn)(void *ctx, const struct vad_state_hold *h),
		   void *ctx, char *err, size_t err_len)
{
	uint64_t n = __atomic_load_n(&st->hdr->high_water, __ATOMIC_ACQUIRE);
	uint32_t n_arenas = st->hdr->n_arenas;
	for (uint64_t i = 0; i < n; i++) {
		const struct state_record *r = &st->rec[i];
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		if (!(head & REC_VALID))
			continue;
		struct vad_state_hold h = {.slot = i,
					   .arena = (uint32_t)(head >> REC_ARENA_SHIFT) & 0xffff,
					   .holder = r->holder,
					   .uid = r->uid,
					   .count = (uint32_t)head,
					   .offset = r->offset,
					   .size = r->size};
		if (h.arena == REC_SESSION && st->hdr->version >= 2)
			continue; /* vad_state_scan_sessions */
		const char *bad = NULL;
		const struct vad_state_arena *a =
		    h.arena < n_arenas && st->arenas[h.arena].quantum ? &st->arenas[h.arena] : NULL;
		if (((head >> REC_CHECK_SHIFT) & REC_CHECK_MASK) !=
		    record_check(h.offset, h.size, h.holder, h.uid, h.arena, h.count))
			bad = "its check bits do not match its contents";
		else if (!a)
			bad = "it names an arena the file does not have";
		else if (!h.count)
			bad = "it holds no reference";
		else if (!h.size || h.size % a->quantum || h.offset % a->quantum ||
			 h.offset >= a->size || h.size > a->size - h.offset)
			bad = "its range is not a whole number of quanta inside its arena";
		if (bad) {
			snprintf(err, err_len, "state file: record %llu is corrupted: %s",
				 (unsigned long long)i, bad);
			return -1;
		}
		if (fn(ctx, &h))
			return -1;
	}
	return 0;
}

int vad_state_scan_sessions(const struct vad_state *st,
			    int (*fn)(void *ctx, const struct vad_state_session *s), void *ctx,
			    char *err, size_t err_len)
{
	if (st->hdr->version < 2)
		return 0;
	uint64_t n = __atomic_load_n(&st->hdr->high_water, __ATOMIC_ACQUIRE);
	for (uint64_t i = 0; i < n; i++) {
		const struct state_record *r = &st->rec[i];
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		if (!(head & REC_VALID) || ((head >> REC_ARENA_SHIFT) & 0xffff) != REC_SESSION)
			continue;
		if (((head >> REC_CHECK_SHIFT) & REC_CHECK_MASK) !=
			record_check(r->offset, r->size, r->holder, r->uid, REC_SESSION,
				     (uint32_t)head) ||
		    (uint32_t)head != 1) {
			snprintf(err, err_len,
				 "state file: record %llu is corrupted: its check bits do not "
				 "match its contents",
				 (unsigned long long)i);
			return -1;
		}
		struct vad_state_session s = {.holder = r->holder, .uid = r->uid};
		memcpy(s.secret, &r->offset, 8);
		memcpy(s.secret + 8, &r->size, 8);
		if (fn(ctx, &s))
			return -1;
	}
	return 0;
}

/* Fill the thread's cache up to target (at most CACHE_SLOTS) slots from the shared list
 * (carving fresh ones past the high-water mark when the list is empty). */
static void cache_refill_to(struct vad_state *st, uint32_t target)
{
	pthread_mutex_lock(&st->lock);
	while (cache.n < target && st->n_free)
		cache.slot[cache.n++] = st->free_slots[--st->n_free];
	uint64_t hw = st->hdr->high_water;
	/* Highest first into the cache, so the lowest comes out first. */
	uint32_t want = cache.n < target ? target - cache.n : 0;
	if (want > st->hdr->capacity - hw)
		want = (uint32_t)(st->hdr->capacity - hw);
	for (uint32_t i = want; i-- > 0;)
		cache.slot[cache.n++] = (uint32_t)(hw + i);
	/* Published before any record in the new slots is. */
	__atomic_store_n(&st->hdr->high_water, hw + want, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&st->lock);
}

/* Move half a cache's worth of slots between the thread's cache and the shared list. */
static void cache_refill(struct vad_state *st)
{
	cache_refill_to(st, CACHE_SLOTS / 2);
}

static void cache_spill(struct vad_state *st)
{
	pthread_mutex_lock(&st->lock);
	if (st->n_free + CACHE_SLOTS / 2 > st->cap_free) {
		size_t cap = st->cap_free ? st->cap_free * 2 : 1024;
		uint32_t *f = realloc(st->free_slots, cap * sizeof(*f));
		if (f) {
			st->free_slots = f;
			st->cap_free = cap;
		}
	}
	/* Without room the slots are forgotten: they stay empty until the next start. */
	while (cache.n > CACHE_SLOTS / 2) {
		uint32_t s = cache.slot[--cache.n];
		if (st->n_free < st->cap_free)
			st->free_slots[st->n_free++] = s;
	}
	pthread_mutex_unlock(&st->lock);
}

static void cache_bind(struct vad_state *st)
{
	if (cache.state_id != st->id) {
		cache.state_id = st->id; /* another state's slots stay empty in it */
		cache.n = 0;
	}
}

uint32_t vad_state_put(struct vad_state *st, uint32_t arena, uint64_t offset, uint64_t size,
		       uint32_t holder, uint32_t uid, uint32_t count)
{
	cache_bind(st);
	if (!cache.n)
		cache_refill(st);
	if (!cache.n) {
		if (__atomic_fetch_add(&st->full, 1, __ATOMIC_RELAXED) == 0)
			log_warn(
			    "the state file is full (%llu holds): holds granted from now on are "
			    "not kept across a restart (logged once)",
			    (unsigned long long)st->hdr->capacity);
		return 0;
	}
	uint32_t slot = cache.slot[--cache.n];
	struct state_record *r = &st->rec[slot];
	r->offset = offset;
	r->size = size;
	r->holder = holder;
	r->uid = uid;
	__atomic_store_n(&r->head, record_head(r, arena, count), __ATOMIC_RELEASE);
	return slot + 1;
}

uint32_t vad_state_put_session(struct vad_state *st, uint32_t holder, uint32_t uid,
			       const uint8_t secret[VAD_STATE_SECRET_BYTES])
{
	uint64_t a, b;
	memcpy(&a, secret, 8);
	memcpy(&b, secret + 8, 8);
	return vad_state_put(st, REC_SESSION, a, b, holder, uid, 1);
}

void vad_state_set_count(struct vad_state *st, uint32_t rec, uint32_t count)
{
	if (!rec)
		return;
	struct state_record *r = &st->rec[rec - 1];
	uint32_t arena = (uint32_t)(r->head >> REC_ARENA_SHIFT) & 0xffff;
	__atomic_store_n(&r->head, record_head(r, arena, count), __ATOMIC_RELEASE);
}

void vad_state_drop(struct vad_state *st, uint32_t rec)
{
	if (!rec)
		return;
	__atomic_store_n(&st->rec[rec - 1].head, 0, __ATOMIC_RELEASE);
	cache_bind(st);
	if (cache.n == CACHE_SLOTS)
		cache_spill(st);
	cache.slot[cache.n++] = rec - 1;
}

void vad_state_prefetch(const struct vad_state *st, uint32_t rec)
{
	if (rec)
		__builtin_prefetch(&st->rec[rec - 1], 1);
}

void vad_state_prefetch_puts(struct vad_state *st, size_t n)
{
	cache_bind(st);
	/* Slots for the whole batch (up to a full cache) now, so that all of them are loaded
	 * together; vad_state_put takes them from the top down. */
	if (cache.n < n && cache.n < CACHE_SLOTS)
		cache_refill_to(st, n < CACHE_SLOTS ? (uint32_t)n : CACHE_SLOTS);
	for (uint32_t i = cache.n; i > 0 && n > 0; i--, n--)
		__builtin_prefetch(&st->rec[cache.slot[i - 1]], 1);
}

uint64_t vad_state_full(const struct vad_state *st)
{
	return __atomic_load_n(&st->full, __ATOMIC_RELAXED);
}

uint64_t vad_state_records(const struct vad_state *st)
{
	/* Counted when asked: a shared counter would be one more contended line per request. */
	uint64_t n = 0, hw = __atomic_load_n(&st->hdr->high_water, __ATOMIC_ACQUIRE);
	for (uint64_t i = 0; i < hw; i++) {
		uint64_t head = __atomic_load_n(&st->rec[i].head, __ATOMIC_RELAXED);
		n += (head & REC_VALID) && ((head >> REC_ARENA_SHIFT) & 0xffff) != REC_SESSION;
	}
	return n;
}

uint64_t vad_state_bytes_used(const struct vad_state *st)
{
	uint64_t tokens =
	    st->tok_cap ? __atomic_load_n(&st->hdr->token_high_water, __ATOMIC_RELAXED) : 0;
	return st->hdr->header_size +
	       __atomic_load_n(&st->hdr->high_water, __ATOMIC_RELAXED) *
		   sizeof(struct state_record) +
	       tokens * sizeof(struct state_token);
}

void vad_state_set_arena(struct vad_state *st, uint32_t i, const struct vad_state_arena *a)
{
	if (i >= st->hdr->n_arenas)
		return;
	struct vad_state_arena *e = &st->arenas[i];
	__atomic_store_n(&e->quantum, 0, __ATOMIC_RELEASE); /* empty while it changes */
	memcpy(e->name, a->name, sizeof(e->name));
	e->name[VAD_STATE_NAME_MAX] = '\0';
	e->size = a->size;
	e->dev = a->dev;
	e->ino = a->ino;
	__atomic_store_n(&e->quantum, a->quantum, __ATOMIC_RELEASE);
}

/* ---- share tokens (version 3) ---------------------------------------------------------- */

uint32_t vad_state_put_token(struct vad_state *st, const struct vad_state_token *t)
{
	uint32_t slot;
	pthread_mutex_lock(&st->tok_lock);
	uint64_t hw = st->hdr->token_high_water;
	if (st->n_tok_free) {
		slot = st->tok_free[--st->n_tok_free];
	} else if (hw < st->tok_cap) {
		slot = (uint32_t)hw;
		/* Published before the record in the new slot is. */
		__atomic_store_n(&st->hdr->token_high_water, hw + 1, __ATOMIC_RELEASE);
	} else {
		if (st->tok_full++ == 0)
			log_warn(
			    "the state file's %llu token records are in use: share tokens made "
			    "from now on are not kept across a restart (logged once)",
			    (unsigned long long)st->tok_cap);
		pthread_mutex_unlock(&st->tok_lock);
		return 0;
	}
	pthread_mutex_unlock(&st->tok_lock);
	struct state_token *r = &st->tok[slot];
	uint32_t flags = t->single_use ? TOK_SINGLE_USE : 0;
	memcpy(r->token, t->token, VAD_STATE_TOKEN_CHARS);
	r->offset = t->offset;
	r->expires_ms = t->expires_ms;
	r->uid = t->uid;
	uint64_t x = token_check(r->token, t->offset, t->expires_ms, t->uid, t->arena, flags);
	r->check = (uint32_t)x;
	__atomic_store_n(&r->head,
			 REC_VALID | ((x >> 32) & REC_CHECK_MASK) << REC_CHECK_SHIFT |
			     (uint64_t)(t->arena & 0xffff) << REC_ARENA_SHIFT | flags,
			 __ATOMIC_RELEASE);
	return slot + 1;
}

void vad_state_drop_token(struct vad_state *st, uint32_t rec)
{
	if (!rec || rec > st->tok_cap)
		return;
	__atomic_store_n(&st->tok[rec - 1].head, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&st->tok_lock);
	if (st->n_tok_free == st->cap_tok_free) {
		size_t cap = st->cap_tok_free ? st->cap_tok_free * 2 : 256;
		uint32_t *f = realloc(st->tok_free, cap * sizeof(*f));
		if (f) {
			st->tok_free = f;
			st->cap_tok_free = cap;
		}
	}
	/* Without room the slot is forgotten: it stays empty until the next start. */
	if (st->n_tok_free < st->cap_tok_free)
		st->tok_free[st->n_tok_free++] = rec - 1;
	pthread_mutex_unlock(&st->tok_lock);
}

static bool base62_chars(const char *t)
{
	for (unsigned i = 0; i < VAD_STATE_TOKEN_CHARS; i++) {
		char c = t[i];
		if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
			return false;
	}
	return true;
}

/* Token record i read back into *out if valid: 1; 0 if its slot is empty; -1 with the reason
 * in *bad. */
static int read_token(const struct vad_state *st, uint64_t i, struct vad_state_token *out,
		      const char **bad)
{
	const struct state_token *r = &st->tok[i];
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	if (!(head & REC_VALID))
		return 0;
	uint32_t arena = (uint32_t)(head >> REC_ARENA_SHIFT) & 0xffff, flags = (uint32_t)head;
	memset(out, 0, sizeof(*out));
	out->slot = i;
	out->arena = arena;
	out->uid = r->uid;
	out->single_use = flags & TOK_SINGLE_USE;
	out->offset = r->offset;
	out->expires_ms = r->expires_ms;
	memcpy(out->token, r->token, VAD_STATE_TOKEN_CHARS);
	uint64_t x = token_check(r->token, r->offset, r->expires_ms, r->uid, arena, flags);
	const struct vad_state_arena *a =
	    arena < st->hdr->n_arenas && st->arenas[arena].quantum ? &st->arenas[arena] : NULL;
	*bad = NULL;
	if (((head >> REC_CHECK_SHIFT) & REC_CHECK_MASK) != ((x >> 32) & REC_CHECK_MASK) ||
	    r->check != (uint32_t)x)
		*bad = "its check bits do not match its contents";
	else if (flags & ~TOK_SINGLE_USE)
		*bad = "it has flags this vad does not know";
	else if (!a)
		*bad = "it names an arena the file does not have";
	else if (out->offset % a->quantum || out->offset >= a->size)
		*bad = "its offset is not a quantum inside its arena";
	else if (!base62_chars(out->token))
		*bad = "its token is not 32 letters and digits";
	return *bad ? -1 : 1;
}

int vad_state_scan_tokens(const struct vad_state *st,
			  int (*fn)(void *ctx, const struct vad_state_token *t), void *ctx,
			  char *err, size_t err_len)
{
	uint64_t n =
	    st->tok_cap ? __atomic_load_n(&st->hdr->token_high_water, __ATOMIC_ACQUIRE) : 0;
	for (uint64_t i = 0; i < n; i++) {
		struct vad_state_token t;
		const char *bad;
		int rc = read_token(st, i, &t, &bad);
		if (rc == 0)
			continue;
		if (rc < 0) {
			snprintf(err, err_len, "state file: token record %llu is corrupted: %s",
				 (unsigned long long)i, bad);
			return -1;
		}
		if (fn(ctx, &t))
			return -1;
	}
	return 0;
}

bool vad_state_token_is(const struct vad_state *st, uint32_t rec, const char *token, uint32_t arena,
			uint64_t offset)
{
	if (!rec || rec > st->tok_cap)
		return false;
	struct vad_state_token t;
	const char *bad;
	return read_token(st, rec - 1, &t, &bad) == 1 && t.arena == arena && t.offset == offset &&
	       memcmp(t.token, token, VAD_STATE_TOKEN_CHARS) == 0;
}

uint64_t vad_state_tokens(const struct vad_state *st)
{
	uint64_t n = 0, hw = st->tok_cap
				 ? __atomic_load_n(&st->hdr->token_high_water, __ATOMIC_ACQUIRE)
				 : 0;
	for (uint64_t i = 0; i < hw; i++)
		n += (__atomic_load_n(&st->tok[i].head, __ATOMIC_RELAXED) & REC_VALID) != 0;
	return n;
}

uint64_t vad_state_slots(const struct vad_state *st)
{
	return __atomic_load_n(&st->hdr->high_water, __ATOMIC_ACQUIRE);
}
