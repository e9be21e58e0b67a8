/*
 * registry.h - the daemon's shared state: live ranges with reference counts, share tokens,
 * per-uid usage for quotas, and the list of connected holders (sessions).
 *
 * Locks (take them in this order, never the reverse; every hold is short):
 *   holders_lock -> holder.lock (one per session or dying holder; only the consistency check
 *   takes more than one, and it holds holders_lock while it does) -> token_lock; uid_lock is a
 *   leaf. The reaper thread takes a dying holder's lock for one chunk of RELEASE_CHUNK holds at
 *   a time, and holders_lock only to pick the next dying holder or unlist a finished one.
 * Teardown: a session that goes away holding more than one chunk of holds does not drop them
 * on its worker (a million would stall every other client of that worker for seconds): its
 * table moves, under holders_lock and its lock, into a dying holder on the dying list, and the
 * reaper thread drops those holds a chunk per lock hold, yielding between chunks. Until then
 * the references still count (arena totals, ranges shared with others, the uid's bytes and
 * ranges against its quotas), and the check sees dying holders like live ones.
 * A holder's lock guards its own holds table, the counts in it and its totals: the hot paths
 * (alloc, free) take only the lock of their own session, which no other worker touches, so
 * two workers never wait for each other there.
 * A range lives from the moment it is allocated until its last reference is dropped; it is
 * reachable only through the holds on it (and its share token), and there is no table of all
 * ranges: the allocator's owner tag of the busy area points at it. Its reference count is an
 * atomic changed only under the lock of the holder whose reference comes or goes, so the check
 * (holders_lock, every holder lock, token_lock) sees a still picture. A range never shared
 * has exactly one holder (attach needs a token), which changes refs alone; a shared
 * range's count is decremented atomically (the one who reaches 0 buries it, exactly once) and
 * attach increments it only if it is not 0, under token_lock, so a dying range is never
 * brought back. When the last reference goes, its token is removed (token_lock) and then the
 * range given back to the allocator (one va_free_batch per chunk of released ranges). A token
 * can also die before its range (unshare, a newer share, single use, expiry; any session's
 * attach may remove it, under token_lock): the range then stays shared (tok points at
 * vad_token_none), and the registry remembers the dead token and why in a fixed ring.
 * A holder's own table (holds) is written only by its owning thread, under its lock; it
 * grows into an array allocated before the lock is taken (the owner knows how many entries it
 * is about to add) and shrinks when mostly empty, so only the rehash and swap run locked.
 * Files: registry.c (the registry, holders, insert, release, teardown hand-over), holds.c (a
 * holder's table), quotas.c (reservations, arena totals, uid charges), reaper.c (the reaper
 * thread), tokens.c (share, unshare, attach), dead_tokens.c (the ring of dead tokens),
 * range_cache.c (range objects), registry_check.c (the
 * check); registry_types.h holds the structures, quotas.h the accounting calls, and
 * registry_internal.h is what the files share besides.
 */
#ifndef VAD_REGISTRY_H
#define VAD_REGISTRY_H

#include "quotas.h"
#include "registry_types.h"

/* Build an empty registry over n_arenas slots of allocators (not owned; NULL for an empty
 * slot). NULL when out of memory. */
struct vad_registry *vad_registry_new(struct va_space *const *vs, size_t n_arenas);

/* Give arena slot `arena` its allocator (a tenant arena opening; published for readers). */
void vad_registry_add_space(struct vad_registry *reg, unsigned arena, struct va_space *vs);

/* Empty arena slot `arena` (a tenant arena closing; it holds no reference and no dying
 * holder exists). False, changing nothing, while the reaper walks the allocators: try later. */
bool vad_registry_remove_space(struct vad_registry *reg, unsigned arena);

/* Free the registry; every holder must have been finished first. */
void vad_registry_free(struct vad_registry *reg);

/* Register a new holder for a peer of this uid. Returns 0, or -1 when out of memory. */
int vad_holder_init(struct vad_registry *reg, struct vad_holder *h, uid_t uid,
		    struct vad_session *owner);

/* Unregister h and drop every reference it holds (ranges whose last reference goes are
 * freed): at once when it holds at most one chunk, otherwise by the reaper thread, after h's
 * table has moved to a dying holder (h itself is free to go when this returns). */
void vad_holder_fini(struct vad_registry *reg, struct vad_holder *h);

/* Wait until the reaper has dropped every dying holder's references (tests, shutdown). */
void vad_registry_reap_wait(struct vad_registry *reg);

/* Dying holders not reaped yet, and the references they still hold. */
unsigned vad_registry_dying(struct vad_registry *reg, uint64_t *refs);

/* A range object for a coming allocation, from the calling thread's cache of spares (given
 * to a process-wide depot at thread exit; objects are carved from slabs kept for the life of
 * the process); NULL when out of memory. */
struct vad_range *vad_range_get(void);

/* n range objects for a coming batch, as n vad_range_get calls would (all loaded together);
 * false, taking none, when out of memory. */
bool vad_range_get_batch(struct vad_range **out, size_t n);

/* Give back a range object that was never inserted. */
void vad_range_put(struct vad_range *r);

/* Give back n range objects, as n vad_range_put calls would (the thread's cache looked up once). */
void vad_range_put_batch(struct vad_range *const *ranges, size_t n);

/* Insert n freshly allocated ranges of one arena (offset, size set; reserved already) with
 * one reference each held by h. Returns 0, -1 when out of memory, or -2 when the arena's
 * referenced bytes would pass 2^64 - 1 (nothing inserted either way). */
int vad_registry_insert(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			struct vad_range *const *ranges, size_t n);

/* The hold h has on the range at (arena, offset), or NULL; valid until h's table changes.
 * Owner thread only (or with h's lock held). */
struct vad_hold *vad_holder_find(struct vad_holder *h, unsigned arena, uint64_t offset);

/* Call fn for each hold of h in table order; fn must not change h's holds. Owner thread only
 * (or with h's lock held). */
void vad_holder_for_each(struct vad_holder *h, void (*fn)(void *ctx, const struct vad_hold *o),
			 void *ctx);

/* Number of distinct ranges h holds. Owner thread only (or with h's lock held). */
size_t vad_holder_count(const struct vad_holder *h);

/* Slots of h's table (0 before the first insert), to watch growth and shrinking. Owner
 * thread only (or with h's lock held). */
size_t vad_holder_capacity(const struct vad_holder *h);

/* Drop one of h's references to the range at (arena, offset); the last reference frees the
 * range. Returns 0, or -1 if h holds no reference to it. *size gets the range size. */
int vad_registry_release(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			 uint64_t offset, uint64_t *size);

/* Drop one of h's references for each offset of arena in turn (an offset may repeat), taking
 * h's lock once per chunk and freeing the chunk's dead ranges with one va_free_batch; stops
 * at the first offset h holds no reference to. Gives the table's memory back once it is mostly
 * empty. Returns how many were dropped. */
size_t vad_registry_release_batch(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
				  const uint64_t *offsets, size_t n);

/* The share token of a range h holds: its plain token (no options), made on first use (or
 * when its live token has options: that one is replaced). Returns 0, -1 if h does not hold
 * it, -2 when out of memory, -3 when no randomness could be read. */
int vad_registry_share(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
		       uint64_t offset, char token[VAD_TOKEN_CHARS + 1]);

/* The options a share token may carry; all zero: a plain token. */
struct vad_token_terms {
	bool single_use; /* the first attach that succeeds uses it up */
	uint64_t ttl_ms; /* it expires this long after the share (CLOCK_MONOTONIC); 0: never */
};

/* vad_registry_share with terms (NULL: plain). A range has at most one live token: a share
 * with options always makes a fresh one, and a fresh token replaces (revokes) the range's
 * earlier one, which from then on is refused as VAD_ATTACH_REPLACED. Returns as above. */
int vad_registry_share_with(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			    uint64_t offset, const struct vad_token_terms *terms,
			    char token[VAD_TOKEN_CHARS + 1]);

/* Revoke the token of a range h holds: later attaches with it are refused as
 * VAD_ATTACH_REVOKED; references already taken stay. Returns 1 if it had a live token, 0 if
 * not, -1 if h does not hold it. */
int vad_registry_unshare(struct vad_registry *reg, struct vad_holder *h, unsigned arena,
			 uint64_t offset);

/* Result of an attach. */
enum vad_attach_status {
	VAD_ATTACH_OK = 0,
	VAD_ATTACH_MALFORMED, /* not 32 base62 characters */
	VAD_ATTACH_UNKNOWN,   /* no live range has that token, nor had it lately */
	VAD_ATTACH_REVOKED,   /* revoked by unshare */
	VAD_ATTACH_REPLACED,  /* revoked by a newer share of its range */
	VAD_ATTACH_EXPIRED,   /* its ttl passed (it is removed now if it was still live) */
	VAD_ATTACH_USED,      /* single use, and used already */
	VAD_ATTACH_FREED,     /* its range was freed by every holder */
	VAD_ATTACH_DENIED,    /* the arena's allow-list excludes this peer */
	VAD_ATTACH_QUOTA,     /* out->quota says which limit; out->held what is held */
	VAD_ATTACH_NOMEM,
};

struct vad_attach_result {
	unsigned arena;
	uint64_t offset, size;
	enum vad_quota_kind quota;
	uint64_t held;
};

/* Take a new reference for h to the range behind token, if allowed[arena] and within the
 * limits of q (and the counters' range); a single-use token dies with the first that
 * succeeds. A dead token is refused with the reason it died while the registry still
 * remembers it (VAD_DEAD_TOKENS most recent deaths), as UNKNOWN after that. Fills out (arena,
 * offset, size also on DENIED and QUOTA). */
enum vad_attach_status vad_registry_attach(struct vad_registry *reg, struct vad_holder *h,
					   const char *token, const bool *allowed,
					   const struct vad_quota *q,
					   struct vad_attach_result *out);

/* Live share tokens (dead ones remembered are not counted). */
uint64_t vad_registry_tokens(struct vad_registry *reg);

/* One hold of a listing (vad_holder_list). */
struct vad_held_info {
	unsigned arena;
	uint64_t offset, size;
	uint32_t refs;	  /* the holder's references to it */
	uint64_t holders; /* references over every holder */
	bool shared;	  /* it has, or had, a share token */
	uint64_t born_ms; /* CLOCK_MONOTONIC ms when it was allocated */
};

/* Copy up to max of h's holds into out in table order, from slot *cursor (0: the start),
 * with h's lock taken once and a bounded number of slots looked at (any thread). *cursor
 * becomes where the next page starts, 0 once the table's end was reached; *total the ranges h
 * holds. Returns how many were copied. */
size_t vad_holder_list(struct vad_holder *h, uint64_t *cursor, struct vad_held_info *out,
		       size_t max, uint64_t *total);

/* One live share token of a listing (vad_registry_list_tokens). */
struct vad_token_info {
	unsigned arena;
	uint64_t offset, size;
	uint64_t age_ms, ttl_left_ms;
	bool expires, single_use;
	uint64_t holders; /* references to its range over every holder */
	uint32_t uid;	  /* who shared it */
	char token[VAD_TOKEN_CHARS + 1];
};

/* Copy up to max live tokens made after the one numbered `after` (0: from the oldest), in
 * share order, of uid only unless every, into out, with token_lock taken once and a bounded
 * number of tokens looked at. *next gets the number to pass as after for the next page, *more
 * whether tokens remain past it. Returns how many were copied. */
size_t vad_registry_list_tokens(struct vad_registry *reg, uint64_t after, bool every, uint32_t uid,
				struct vad_token_info *out, size_t max, uint64_t *next, bool *more);

/* Call fn for each registered holder (not the dying ones) with holders_lock held (fn must
 * not take it). */
void vad_registry_for_each_holder(struct vad_registry *reg,
				  void (*fn)(void *ctx, struct vad_holder *h), void *ctx);

/* Call fn(ctx, i, session) for each registered session that holds the range at offsets[i] of
 * arena (offsets ascending, n of them; dying holders are not listed), with holders_lock and
 * that session's holder lock held (fn must take neither). Bounded by the holders times
 * min(their holds, n), one holder lock at a time: for a page of vactl map's walk. */
void vad_registry_holders_of(struct vad_registry *reg, unsigned arena, const uint64_t *offsets,
			     size_t n,
			     void (*fn)(void *ctx, size_t index, struct vad_session *owner),
			     void *ctx);

/* Check the registry against itself and the allocators with every lock held: each holder's
 * totals equal its holds, each range's refs equal the holds on it, arena totals match, each
 * token points at a held range (or one being freed), the memory of dead tokens is sound, each
 * held range is a busy area of its allocator tagged with it.
 * Returns 0, or -1 with a sentence in msg. */
int vad_registry_check(struct vad_registry *reg, char *msg, size_t msg_len);

/* Give holder h (made with no session: a hold restored from the state file) count references
 * to range r (arena, offset, size set; refs 0 before its first hold; already busy in its
 * allocator, tagged r), recorded in reg->state. shared: more than one holder holds it. 0, -1
 * when h holds it already or a total would overflow, -2 out of memory. Start-up only, before
 * any session exists (registry_restore.c). */
int vad_registry_restore_hold(struct vad_registry *reg, struct vad_holder *h, struct vad_range *r,
			      uint32_t count, bool shared);

/* The process is stopping and its allocators go with it (a polite stop or restart, the state
 * file frozen): from now on a range whose last hold goes has its token and its object freed
 * but stays busy in its allocator, so tearing down millions of holds only frees memory (no
 * allocator work, nothing punched); and once vad_registry_free stops the reaper, the dying
 * holders it has not reaped are freed whole (their tables, their tokens; range objects live
 * in slabs as long as the process). Nothing reads the allocator's owner tags but to compare
 * them, so those of ranges gone are harmless. Thread-safe. */
void vad_registry_discard(struct vad_registry *reg);

/* Make room in holder h's table for n more holds at once (a restore knows how many each
 * holder gets: one table of the final size, not a doubling and a rehash per power of two).
 * 0, or -1 out of memory (the holds then grow the table as usual). Start-up only. */
int vad_registry_restore_reserve(struct vad_holder *h, size_t n);

/* Give range r (restored and held, in its allocator) the live share token `token` (32 base62
 * characters) with its terms, shared by uid, recorded in reg->state; expires_wall_ms is when it
 * expires on CLOCK_REALTIME (0: never). An expired one is only remembered as dead (an attach
 * is refused as VAD_ATTACH_EXPIRED). 0 restored, 1 expired, -1 r has a token already or the
 * token is live already, -2 out of memory. Start-up only, before any session exists
 * (tokens.c). */
int vad_registry_restore_token(struct vad_registry *reg, struct vad_range *r, const char *token,
			       bool single_use, uint64_t expires_wall_ms, uint32_t uid);

/* Fill buf with n random bytes (the per-thread pool of tokens). 0, -1 on failure. */
int vad_random_bytes(uint8_t *buf, size_t n);

/* Move every hold of src (a holder without a session, restored at start) to dst, which holds
 * nothing, and make dst's new records name src's holder; then finish src. Both of one uid.
 * 0, or -1 (nothing changed) when dst holds something. */
int vad_holder_adopt(struct vad_registry *reg, struct vad_holder *dst, struct vad_holder *src);

/* Fill buf with n_chars random base62 characters and a NUL. Returns 0, -1 on failure. */
int vad_random_token(char *buf, size_t n_chars);

#endif
