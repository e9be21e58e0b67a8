/*
 * registry_types.h - the registry's structures (ranges, tokens, holds, holders, uid usage,
 * arena totals, the registry itself, quotas) and its relaxed counter accessors; the rules on
 * who writes what and the lock order are in registry.h.
 */
#ifndef VAD_REGISTRY_TYPES_H
#define VAD_REGISTRY_TYPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vhash.h"
#include "vaspace.h"

#define VAD_TOKEN_CHARS 32 /* base62: 190 bits */

struct vad_range;
struct vad_state;
struct vad_session; /* the daemon session a holder belongs to (session.h) */

/* Entry of the token table: allocated when a range is shared (most ranges never are, so
 * they do not carry its 128 bytes), freed when the token dies: its range dies, it is revoked
 * (unshare, or replaced by a newer share), used (single use) or found expired. */
struct vad_token_entry {
	char token[VAD_TOKEN_CHARS + 1];
	bool single_use;     /* the first attach that succeeds removes it */
	uint64_t expires_ns; /* CLOCK_MONOTONIC (vad_now_ns); 0: never */
	struct vad_range *range;
	uint64_t seq;	    /* share order, the key of hh_seq: where a listing's page resumes */
	uint64_t shared_ns; /* CLOCK_MONOTONIC when it was made */
	uint32_t uid;	    /* the uid that shared it: a non-admin lists its own uid's tokens */
	uint32_t rec;	    /* its record in the state file (state.h), plus one; 0: none */
	uint64_t expires_wall_ms; /* expires_ns as CLOCK_REALTIME ms, what the record keeps */
	UT_hash_handle hh;
	UT_hash_handle hh_seq;
};

/* Why a token no longer attaches (0: it is not among the dead ones remembered). */
enum vad_token_death {
	VAD_TOKEN_ALIVE = 0,
	VAD_TOKEN_REVOKED,  /* unshare */
	VAD_TOKEN_REPLACED, /* a newer share of its range made a fresh token */
	VAD_TOKEN_EXPIRED,  /* its ttl passed */
	VAD_TOKEN_USED,	    /* single use, and used */
	VAD_TOKEN_FREED,    /* its range was freed by every holder */
};

/* Dead tokens remembered, so that a later attach gets the reason the token died instead of
 * "unknown". Fixed: the memory is allocated once and a hostile client that shares and kills
 * tokens in a loop only pushes the oldest out (they are then just unknown). 4096 covers every
 * token that died in the last few seconds of a busy daemon; 152 KiB. */
#define VAD_DEAD_TOKENS 4096

/* One remembered dead token: a slot of the ring, chained in its hash bucket. */
struct vad_dead_token {
	char token[VAD_TOKEN_CHARS]; /* no NUL */
	uint8_t why;		     /* enum vad_token_death; 0: an empty slot */
	uint16_t next;		     /* next slot of the bucket, plus one; 0: the end */
};

/* The ring of dead tokens (oldest overwritten first) and a hash over it; token_lock. */
struct vad_dead_tokens {
	struct vad_dead_token ring[VAD_DEAD_TOKENS];
	uint16_t bucket[VAD_DEAD_TOKENS]; /* first slot of each bucket, plus one; 0: empty */
	unsigned oldest;		  /* the slot the next death overwrites */
};

/* One allocated range of an arena, shared by every session that holds a reference. */
struct vad_range {
	uint64_t offset;
	uint64_t size; /* rounded to the arena quantum */
	uint64_t refs; /* atomic; references over all sessions (see the lock order) */
	union {
		/* NULL until shared; then its live token, or &vad_token_none once that died
		 * (revoked, used, expired): never NULL again, since other sessions may hold
		 * the range. Changed under token_lock; read elsewhere with range_shared. */
		struct vad_token_entry *tok;
		struct vad_range *next_free; /* in a thread's cache of spare objects */
	};
	uint64_t check_refs;  /* consistency check scratch (all locks held) */
	uint32_t check_epoch; /* the check that last counted it (low 32 bits) */
	uint32_t arena;
	uint64_t born_ms; /* CLOCK_MONOTONIC ms when it was allocated (vactl ranges: its age) */
};

/* A holder's references to one range: a slot of its open-addressing table, key and data
 * inline (one cache line of the table per lookup, then the range). Empty when range is NULL.
 * 32 bytes (24 before the state file's record number): with the load between 1/4 and 1/2,
 * 64 to 128 bytes per hold. An attach that would
 * pass VAD_HOLD_COUNT_MAX references of one session to one range is refused. */
struct vad_hold {
	uint64_t offset;
	struct vad_range *range;
	uint32_t count;
	uint32_t arena;
	uint32_t rec;  /* its record in the state file (state.h), plus one; 0: none */
	uint32_t hash; /* low 32 bits of vad_hold_hash(arena, offset), in what was padding: a
			* delete's backward shift and a table's growth find each moved hold's
			* home without hashing its key again */
};

/* Hash of a hold's key (arena, offset) for the holders' tables. */
static inline uint64_t vad_hold_hash(uint64_t arena, uint64_t offset)
{
	return vad_hash_pair(arena, offset);
}

#define VAD_HOLD_COUNT_MAX UINT32_MAX

/* Slots below which a holder's table is never shrunk (96 KiB): see table_maybe_shrink. */
#define VAD_HOLDS_KEEP_SLOTS 4096

/* Bytes and references held by every session of one uid (dying ones included). */
struct vad_uid_usage {
	uid_t uid;
	uint64_t held;	/* atomic; bytes, reservations included */
	uint64_t refs;	/* atomic; references, reservations included */
	unsigned users; /* uid_lock */
	UT_hash_handle hh;
};

/* One session's holdings. */
struct vad_holder {
	pthread_mutex_t lock;	/* holds, their counts, the totals below */
	struct vad_hold *holds; /* table of cap slots (NULL when cap is 0); written by the owner
				 * thread under lock, linear probing, backward-shift deletion */
	size_t cap;		/* 0 or a power of two */
	size_t used;		/* occupied slots; at most cap / 2 */
	uint64_t held_bytes;	/* atomic; sum of count * size */
	uint64_t held_refs;	/* atomic; sum of count */
	struct vad_uid_usage *uid;
	struct vad_session *owner;	/* for listings; NULL when dying */
	struct vad_holder *prev, *next; /* holders_lock */
	bool dying;			/* on the dying list: no lookups, slots emptied in order */
	size_t reap_pos;		/* dying: slots below this are empty */
	uint32_t state_holder;		/* who its records in the state file name: its
					   session id (low 32 bits) */
};

struct vad_registry_arena {
	uint64_t refs;	    /* atomic, changed under a holder lock; sum of range refs */
	uint64_t ref_bytes; /* likewise; sum of refs * size */
} __attribute__((aligned(64)));

struct vad_registry {
	struct va_space **vs; /* each arena's allocator: a copy of struct vad_arena's vs; NULL
				 for an empty slot (a tenant arena not open) */
	size_t n_arenas;      /* slots */
	pthread_rwlock_t spaces_lock; /* read by whoever walks vs[] (the reaper's pace),
					 written to empty a slot */
	struct vad_registry_arena *arenas;
	pthread_mutex_t token_lock;
	struct vad_token_entry *tokens;	    /* by token string, in share order */
	struct vad_token_entry *tokens_seq; /* the same entries by seq (token_lock) */
	uint64_t token_seq;		    /* the last seq given (token_lock) */
	uint64_t n_tokens;		    /* atomic */
	struct vad_dead_tokens dead;	    /* token_lock */
	pthread_mutex_t uid_lock;
	struct vad_uid_usage *uids;
	pthread_mutex_t holders_lock;
	struct vad_holder *holders;
	uint64_t check_epoch; /* holders_lock */
	unsigned n_holders;   /* atomic */
	/* Teardown (see the top): dying holders, oldest first, and the thread reaping them. */
	struct vad_holder *dying, *dying_tail; /* holders_lock */
	unsigned n_dying;		       /* atomic */
	uint64_t dying_refs;		       /* atomic: references they still hold */
	pthread_cond_t reaper_wake;	       /* with holders_lock: work, or stop */
	pthread_cond_t reaper_idle;	       /* with holders_lock: the dying list emptied */
	pthread_t reaper;
	bool reaper_started, reaper_stop; /* holders_lock */
	/* Called (no lock held) after ranges of an arena went back to its allocator, from any
	 * thread: the service wakes allocations waiting there (waitq.h). Set once, before any
	 * session exists; NULL: nobody waits. */
	void (*buried)(void *ctx, unsigned arena);
	void *buried_ctx;
	/* The state file every hold and share token is recorded in (persist.h), NULL without
	 * one; only those of arena slots below state_arenas whose state_keep is set (a
	 * configured arena, a tenant arena whose file the fd store has) are. Once frozen (a
	 * polite stop) drops leave their records, so the next daemon finds them. */
	struct vad_state *state;
	size_t state_arenas;
	bool *state_keep;  /* [state_arenas], atomic; owned by persist.c */
	bool state_frozen; /* atomic */
	/* atomic: the process is stopping (vad_registry_discard): a range whose last hold goes
	 * stays busy in its allocator, which goes with the process. */
	bool discard;
};

/* The limits a charge is checked against; 0 means unlimited. */
struct vad_quota {
	uint64_t bytes_client, bytes_uid;   /* quota_client, quota_uid */
	uint64_t ranges_client, ranges_uid; /* max_ranges_client, max_ranges_uid (references) */
};

/* Which limit a charge would break. VAD_QUOTA_COUNTER: a byte total (of the uid, or of the
 * arena's references) would pass 2^64 - 1, the most the daemon can count. */
enum vad_quota_kind {
	VAD_QUOTA_OK = 0,
	VAD_QUOTA_CLIENT,
	VAD_QUOTA_UID,
	VAD_QUOTA_RANGES_CLIENT,
	VAD_QUOTA_RANGES_UID,
	VAD_QUOTA_COUNTER,
};

/* Relaxed load of a counter another thread may read (or write, if it is shared). */
static inline uint64_t load64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Relaxed store of a counter only its owner writes. */
static inline void store64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

#endif
