/*
 * va_internal.h - data structures shared by the libvaspace source files.
 *
 * A block object (struct va_block) describes one range [start, end) and sits in exactly
 * one place at a time: the free tree, a node's busy tree, a node's lazy array, a node's
 * pool, or the in-flight table (a drain batch, an eager free or a va_release_free chunk
 * being released). It moves
 * only while the locks of both places are held, so va_walk/va_check, which take every
 * lock, never see a block missing. See vaspace.c for the lock order.
 */
#ifndef VA_INTERNAL_H
#define VA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbtree.h"
#include "vaspace.h"

#define VA_CACHELINE	   64
#define VA_MAX_NODES	   4096
#define VA_MAX_POOL_QUANTA 65536

/* The hot locks (nodes, free tree, in-flight table): a futex word, 0 free, 1 held, 2 held
 * with sleepers. Uncontended, lock and unlock are one atomic each and no call, where a
 * pthread mutex costs about 60 instructions a round trip (11% of a random_size pair). */
struct va_spin {
	_Atomic uint32_t v;
};

/* A block's state, in the 3 user bits of its rb parent word. What a busy or pooled block
 * used to keep in flags is encoded here, so the record needs no byte for it: a busy block
 * is in its node's hash or not (BUSY_TREE), and pending or in the busy tree; a pooled block
 * holds what its last holder wrote or not. */
enum va_state {
	VA_ST_SPARE = 0,
	VA_ST_FREE,
	VA_ST_BUSY,	    /* in the busy hash and the busy tree */
	VA_ST_BUSY_PEND,    /* in the busy hash alone, pending (not yet in the tree) */
	VA_ST_BUSY_TREE,    /* in the busy tree alone: the hash had no room for it */
	VA_ST_LAZY,	    /* a lazy array, a drain batch or the eager list */
	VA_ST_POOLED,	    /* in a pool, zeroed (or never written) */
	VA_ST_POOLED_DIRTY, /* in a pool, freed straight into it and not zeroed yet (zeroed
			       when taken, see lazy_free_locked) */
};

/*
 * 48 bytes (three 16-byte units; the record is most of the allocator's memory per range):
 * the tree node (its parent word also holds the colour and the state), the range, then one
 * word whose meaning the state gives: a free block's subtree maximum, a busy block's owner
 * tag, a pooled or spare block's next link. The free tree's address order is the tree's
 * own in-order (rb_prev/rb_next, amortised O(1) in walks); blocks on the eager in-flight
 * list link through rb.left (prev) and rb.right (next). A busy block keeps no home node: a lazy
 * free hands it to the freeing thread's node (lazy_item.home), whose pools a drain may give it back
 * to, as magazine allocators give a freed object to the freeing CPU. A busy block's hash slot is
 * not kept either: a free removes it from the slot its find has just hit.
 */
struct va_block {
	struct rb_node rb;   /* free tree or busy tree; rb_user_bits: enum va_state */
	uint64_t start, end; /* [start, end) */
	union {
		uint64_t subtree_max;  /* free: largest block in the subtree */
		void *owner;	       /* busy: the caller's tag */
		struct va_block *next; /* pooled, spare: the pool's or the bag's list */
	};
} __attribute__((aligned(16))); /* rb's parent word needs 4 free low bits */

_Static_assert(sizeof(struct va_block) == 48, "a block record is 48 bytes");

static inline bool blk_busy_state(unsigned s)
{
	return s == VA_ST_BUSY || s == VA_ST_BUSY_PEND || s == VA_ST_BUSY_TREE;
}

/* Links of a block on the eager in-flight list: rb.left and rb.right. */
static inline struct va_block *blk_list_prev(const struct va_block *b)
{
	return b->rb.left ? rb_entry(b->rb.left, struct va_block, rb) : NULL;
}

static inline struct va_block *blk_list_next(const struct va_block *b)
{
	return b->rb.right ? rb_entry(b->rb.right, struct va_block, rb) : NULL;
}

/* Push b at the head of a list through rb links. */
static inline void blk_list_push(struct va_block **head, struct va_block *b)
{
	b->rb.left = NULL;
	b->rb.right = *head ? &(*head)->rb : NULL;
	if (*head)
		(*head)->rb.left = &b->rb;
	*head = b;
}

/* Take b out of a list through rb links. */
static inline void blk_list_del(struct va_block **head, struct va_block *b)
{
	struct va_block *p = blk_list_prev(b), *n = blk_list_next(b);

	if (p)
		p->rb.right = b->rb.right;
	else
		*head = n;
	if (n)
		n->rb.left = b->rb.left;
}

static inline uint64_t blk_size(const struct va_block *b)
{
	return b->end - b->start;
}

static inline enum va_state blk_state(const struct va_block *b)
{
	return (enum va_state)rb_user_bits(&b->rb);
}

static inline void blk_set_state(struct va_block *b, enum va_state s)
{
	rb_set_user_bits(&b->rb, (unsigned)s);
}

/* Counters never wrap: a sum that would pass UINT64_MAX stays there. */
static inline uint64_t va_sat_add(uint64_t a, uint64_t b)
{
	uint64_t s;

	return __builtin_add_overflow(a, b, &s) ? UINT64_MAX : s;
}

/* A count that never wraps: one predictable branch on the hot path. */
static inline void va_sat_inc(uint64_t *c)
{
	if (*c != UINT64_MAX)
		++*c;
}

static inline void va_sat_add_atomic(_Atomic uint64_t *c, uint64_t x)
{
	uint64_t old = atomic_load_explicit(c, memory_order_relaxed);

	/* a compare-and-swap loop, so no reader ever sees a wrapped value (these counters move
	 * once per release call, drain or failure, not per allocation) */
	while (!atomic_compare_exchange_weak_explicit(c, &old, va_sat_add(old, x),
						      memory_order_relaxed, memory_order_relaxed))
		;
}

/* A caller-owned list of spare block objects (see objcache.c); tail allows O(1) splicing. */
struct va_bag {
	struct va_block *head, *tail;
	unsigned n;
};

static inline struct va_block *bag_take(struct va_bag *bag)
{
	struct va_block *b = bag->head;

	if (b) {
		bag->head = b->next;
		if (!bag->head)
			bag->tail = NULL;
		bag->n--;
	}
	return b;
}

static inline void bag_give(struct va_bag *bag, struct va_block *b)
{
	rb_init_user_bits(&b->rb, VA_ST_SPARE); /* only stores: a spare is often cold */
	b->next = bag->head;
	if (!bag->head)
		bag->tail = b;
	bag->head = b;
	bag->n++;
}

/* The global free tree: an augmented rbtree in address order, but for the highest free block,
 * top, which stays out of it (see freetree.c). */
struct va_freetree {
	struct rb_root root;	    /* every free block but top */
	struct va_block *top;	    /* the highest free block, or NULL when nothing is free */
	struct va_block *tree_last; /* the tree's highest block (below top), or NULL */
	uint64_t span_lo, span_hi;  /* every free block lies in [span_lo, span_hi): the space */
	uint64_t bytes, blocks;
	uint64_t quantum; /* every block starts and ends on a multiple of it */
};

/* One size class of a node pool: a stack of ready blocks of exactly (class + 1) quanta. */
struct va_pool_class {
	struct va_block *head;
	uint32_t count;
	uint32_t wanted; /* pool allocations asked for since the last drain */
	uint32_t recent; /* ... before the last drain */
	uint32_t chosen; /* blocks a drain chose for this class and has not placed yet */
};

/* A freed block waiting for release: on a node's lazy array, or in a drain's batch. The
 * range is copied here so a drain can sort, coalesce and release without touching the
 * block objects (one cache miss each) until it places them. */
enum {
	LI_RELEASED = 1,
	LI_TO_TREE = 2,
	LI_PLACED = 4,
	LI_EXTRA = 8,
	LI_ZEROED = 16,
	LI_WANT = 32,
	LI_DECAY = 64, /* a pool block going back to the tree (pooled, not lazy, meanwhile) */
};
struct lazy_item {
	uint64_t start, end;
	struct va_block *b;
	uint32_t home;	/* the node whose pool may take it back: the freeing thread's */
	uint32_t flags; /* LI_*: in a drain batch */
	uint64_t gap; /* free-tree bytes a drain joined to its end (absorb_gaps): free, not lazy */
};

/* Busy blocks by start (busyhash.c): open addressing, one word per slot (the object's
 * address and the top bits of the start's hash; 0 = empty). count_pub and cap_pub mirror
 * count and cap for the unlocked look that decides to grow the table. */
struct va_busy_hash {
	uint64_t *slot;
	uint32_t cap;	/* any size (multiply-shift range reduction), or 0 */
	uint32_t limit; /* entries an insert may fill under a lock: 7/8 of cap */
	uint32_t found; /* the slot of bh_find's last hit: a free finds, then removes */
	uint64_t count;
	_Atomic uint64_t count_pub;
	_Atomic uint32_t cap_pub;
};

/*
 * A node: busy areas found by address, lazy frees of those areas, pools of ready blocks
 * for the threads whose home it is, and counters, all under one lock so a pool hit and a
 * free each take one lock. Aligned so two nodes never share a cache line.
 */
struct va_node {
	struct va_spin lock;
	struct va_spin *lk;	  /* the lock to take: &lock, or in exact mode &free.lock */
	struct va_busy_hash hash; /* every busy block, but those it had no room for */
	uint64_t pend_len;	  /* busy blocks in hash and not in busy (VA_ST_BUSY_PEND) */
	uint32_t tree_only;	  /* busy blocks in busy and not in hash (the hash was full) */
	struct rb_root busy;	  /* busy blocks but the pending ones: for lookups by any address */
	struct va_block *busy_hint; /* NULL or a block in busy: the last inserted, or the
				       successor of the last removed (see busy_insert) */
	uint64_t busy_bytes, busy_blocks;
	struct lazy_item *lazy; /* dense array, grown outside the lock */
	uint32_t lazy_len, lazy_cap;
	uint64_t lazy_bytes;
	uint64_t lazy_unflushed;    /* lazy bytes not yet added to vs->lazy_total */
	struct va_pool_class *pool; /* pool_classes entries */
	uint64_t pool_bytes, pool_blocks;
	uint64_t allocs, frees, pool_hits;
	uint64_t zeroed_bytes, zero_calls; /* dirty pool blocks taken (zeroed as they went) */
	uint64_t recycled;		   /* frees that went straight into a pool */
	unsigned recycle_tick;		   /* frees counted for recycle_every */
	uint64_t refill_cursor; /* under free.lock: where this node's next pool refill goes */
} __attribute__((aligned(VA_CACHELINE)));

/* A drain's batch and eager frees being released: visible to va_walk/va_check as lazy. */
struct va_inflight {
	struct va_spin lock;
	struct va_spin *lk;	 /* the lock to take: &lock, or in exact mode &free.lock */
	struct lazy_item *items; /* the drain batch (drain_lock owner writes it) */
	size_t n;
	uint64_t bytes, blocks; /* lazy: not yet placed, plus eager blocks (lazy_total has them) */
	uint64_t decay_bytes, decay_blocks; /* pool blocks on their way to the tree: pooled */
	uint64_t gap_bytes; /* free-tree gaps joined to the batch's items for one release: free */
	struct va_block *eager; /* eager frees being released (listed through rb links) */
};

struct va_space {
	struct va_config cfg; /* with defaults filled in */
	uint64_t base, end, size, quantum;
	unsigned qshift; /* log2(quantum) */
	unsigned nodes;
	uint64_t zone;
	unsigned zone_shift; /* log2(zone) if zone is a power of two */
	bool zone_pow2;
	bool exact;	  /* nodes = 1, no pools, eager: lowest-address first fit always */
	bool can_recycle; /* cfg.zero, pools, lazy: frees of wanted classes may go straight to a
			     pool */
	_Atomic unsigned recycle_every; /* ... one free in this many does (0: none; no_recycle,
					   va_set_recycle) */
	unsigned pool_classes;		/* pool size classes per node; 0 when pools are off */
	unsigned nodes_ready;		/* nodes initialised (for teardown after a failed create) */
	uint64_t lazy_flush;	/* per-node batch of lazy bytes added to lazy_total at once */
	uint64_t lazy_slack;	/* nodes * lazy_flush: lazy bytes lazy_total may not count yet */
	uint64_t lazy_self_at;	/* past this lazy_total the freeing thread drains: 2 x lazy_max
				   less lazy_slack, so lazy bytes stay within 2 x lazy_max */
	uint64_t affinity_span; /* zone * nodes: distance between two zones of one node; 0 = off */

	struct {
		struct va_spin lock;
		struct va_freetree tree;
	} free __attribute__((aligned(VA_CACHELINE)));

	struct va_node *node; /* nodes entries */

	/* lazy bytes over all nodes (in per-node batches): decides when to drain */
	_Atomic uint64_t lazy_total __attribute__((aligned(VA_CACHELINE)));

	/* drain: one at a time */
	pthread_mutex_t drain_lock __attribute__((aligned(VA_CACHELINE)));
	/* lazy_enter calls that asked for drain_lock, and that got it: their difference is
	 * the threads waiting, whom va_release_free lets in between its chunks (the mutex is
	 * not fair: a thread that drops it and asks again mostly wins) */
	_Atomic uint64_t drain_asked, drain_granted;
	struct lazy_item *scratch_tmp; /* radix sort buffer (drain_lock) */
	size_t scratch_cap;	       /* capacity of inflight.items and scratch_tmp */
	_Atomic uint64_t drains, released_bytes, release_calls, fails;
	_Atomic uint64_t zeroed_bytes, zero_calls; /* cfg.zero's calls for pooled blocks */
	/* va_release_free's passes over free space, apart from reclaim's releases above */
	_Atomic uint64_t free_released_bytes, free_release_calls;
	_Atomic uint64_t drain_yields; /* times the background thread stepped aside */

	struct va_inflight inflight __attribute__((aligned(VA_CACHELINE)));

	/* background thread */
	pthread_mutex_t ctl_lock;
	pthread_cond_t ctl_cond;
	_Atomic bool kick;
	_Atomic bool stopping; /* va_destroy has begun: a va_release_free loop ends */
	bool stop;
	bool has_thread;
	bool ctl_ready;
	pthread_t thread;
};

/* ---- helpers ---------------------------------------------------------------------- */

static inline unsigned va_node_of(const struct va_space *vs, uint64_t addr)
{
	uint64_t z = vs->zone_pow2 ? addr >> vs->zone_shift : addr / vs->zone;

	return (unsigned)(z % vs->nodes);
}

/* The calling thread's home node in vs. */
unsigned va_home_node(const struct va_space *vs);

/* ---- lock.c: locks ------------------------------------------------------------------ */

/* A pthread mutex that spins briefly before sleeping (drain_lock, ctl_lock: the latter
 * waits on a condition variable). 0 or -1. */
int va_mutex_init(pthread_mutex_t *m);

/* Slow paths of struct va_spin (contended: spin, then sleep on a futex). */
void va_spin_lock_slow(struct va_spin *l);
void va_spin_wake(struct va_spin *l);

static inline void va_spin_init(struct va_spin *l)
{
	atomic_init(&l->v, 0);
}

static inline void va_spin_lock(struct va_spin *l)
{
	uint32_t c = 0;

	if (!atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
						     memory_order_relaxed))
		va_spin_lock_slow(l);
}

/* true if taken */
static inline bool va_spin_trylock(struct va_spin *l)
{
	uint32_t c = 0;

	return atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void va_spin_unlock(struct va_spin *l)
{
	if (atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2)
		va_spin_wake(l);
}

static inline void va_pmutex_lock(pthread_mutex_t *m)
{
	pthread_mutex_lock(m);
}

static inline void va_pmutex_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

/* Take l inside held unless it is the same lock: in exact mode a node's and the in-flight
 * table's lock are the free tree's (one lock round trip where there were three). */
static inline void va_lock_in(struct va_spin *held, struct va_spin *l)
{
	if (l != held)
		va_spin_lock(l);
}

static inline void va_unlock_in(struct va_spin *held, struct va_spin *l)
{
	if (l != held)
		va_spin_unlock(l);
}

/* One name for both kinds, so callers need not care which a lock is. */
#define va_lock(m)                                                                                 \
	_Generic((m), struct va_spin * : va_spin_lock, pthread_mutex_t * : va_pmutex_lock)(m)
#define va_unlock(m)                                                                               \
	_Generic((m), struct va_spin * : va_spin_unlock, pthread_mutex_t * : va_pmutex_unlock)(m)

/* ---- objcache.c: spare block objects ---------------------------------------------- */

/* Make bag hold at least want objects (thread cache, then shared depot, then malloc);
 * call with no lock held. Returns 0 or VA_ENOMEM. */
int objcache_fill(struct va_bag *bag, unsigned want);

/* Give every object in bag back (thread cache, depot, free); call with no lock held. */
void objcache_return(struct va_bag *bag);

/* Give back n objects listed in an array (the array is not kept); no lock held. */
void objcache_return_array(struct va_block **objs, size_t n);

/* Give back one object (a space being destroyed); no lock held. */
void objcache_give(struct va_block *b);

/* Bytes of slabs the process holds for block objects (in use or spare, every space). */
uint64_t objcache_bytes(void);

/* The calling thread's bag of spares, kept between operations. */
extern __thread struct va_bag va_tls_bag;
#define VA_BAG_KEEP 64

/* Slow path of objcache_bag: fill the thread's bag to want; NULL if memory is short. */
struct va_bag *objcache_bag_fill(unsigned want);

/* Slow path of objcache_bag_done: give all but VA_BAG_KEEP / 2 back (no lock held). */
void objcache_bag_trim(struct va_bag *bag);

/* The thread's bag with at least want spares (call with no lock held), or NULL if memory is
 * short. Use it only where no callback can run (under the allocator's locks), so a callback
 * that calls back into the library never finds it in use; objcache_bag_done after. */
static inline struct va_bag *objcache_bag(unsigned want)
{
	return va_tls_bag.n >= want ? &va_tls_bag : objcache_bag_fill(want);
}

/* After an operation used the thread's bag (no lock held): trim it if it grew past
 * VA_BAG_KEEP (merges give objects back into it). */
static inline void objcache_bag_done(struct va_bag *bag)
{
	if (bag->n > VA_BAG_KEEP)
		objcache_bag_trim(bag);
}

/* ---- busyhash.c: busy blocks by start (callers hold the node's lock, but where said) -- */

/* Enter b under its start; false (nothing done) if the table is 7/8 full or empty. */
bool bh_insert(struct va_busy_hash *h, struct va_block *b, unsigned qshift);

/* Bring the slot where start's probe begins into the cache (a bulk insert asks for the
 * slot of a block some places ahead: a random slot of a large table is a cache miss). */
void bh_prefetch(const struct va_busy_hash *h, uint64_t start, unsigned qshift);

/* Prefetch the record of the block a find of start would read first (its slot should be
 * prefetched already: this reads it). */
void bh_prefetch_block(const struct va_busy_hash *h, uint64_t start, unsigned qshift);

/* The block entered under start, or NULL. */
struct va_block *bh_find(struct va_busy_hash *h, uint64_t start, unsigned qshift);

/* Take b (entered before) out: from the slot the last bh_find found it in, or probed for
 * again from its start. */
void bh_remove(struct va_busy_hash *h, const struct va_block *b, unsigned qshift);

/* The block in slot i, or NULL if it is empty (va_check). */
struct va_block *bh_at(const struct va_busy_hash *h, uint32_t i);

/* Whether the table should grow before extra more inserts (an unlocked look, no lock
 * needed: a stale answer only grows late, and inserts never need the growth). */
bool bh_wants_grow(const struct va_busy_hash *h, size_t extra);

/* The capacity to grow to for count entries: 9/16 full (at least 64 slots, at most 2^31). */
uint32_t bh_grown_cap(uint64_t count);

/* Empty arrays of cap slots in *t (no lock needed); 0 or VA_ENOMEM. */
int bh_alloc(struct va_busy_hash *t, uint32_t cap);

/* Move h's entries into fresh and make fresh's arrays h's; fresh gets h's old arrays. */
void bh_move(struct va_busy_hash *h, struct va_busy_hash *fresh, unsigned qshift);

/* Free the arrays (no lock needed once nobody else uses h). */
void bh_free(struct va_busy_hash *h);

/* Bytes the table's arrays take. */
uint64_t bh_bytes(const struct va_busy_hash *h);

/* ---- freetree.c ------------------------------------------------------------------- */

/* Empty tree for the space [span_lo, span_hi). */
void ft_init(struct va_freetree *ft, uint64_t span_lo, uint64_t span_hi);

/* Give every block object back (a space being destroyed; no lock needed). */
void ft_destroy(struct va_freetree *ft);

/* One fit request: size and alignment already rounded; window [vstart, vend). Blocks
 * smaller than min_block (>= size) are not considered: size + align - quantum makes every
 * block considered inside the window a fit (the kernel's O(log n) search), size makes the
 * search exact (the lowest fitting address). */
struct va_fit_req {
	uint64_t size, align, vstart, vend, min_block;
};

/* Lowest block holding an aligned [a, a + size) inside the window; *addr = a. */
struct va_block *ft_lowest_fit(struct va_freetree *ft, const struct va_fit_req *r, uint64_t *addr);

/* Cut [a, a + size) out of free block b (one of the four fit types) and return a block
 * object for it, off every structure; extra objects come from bag. NULL if bag is short. */
struct va_block *ft_carve(struct va_freetree *ft, struct va_block *b, uint64_t a, uint64_t size,
			  struct va_bag *bag);

/* Insert object b (its range must be free space) merging with both neighbours; objects
 * no longer needed go to bag. Returns false if b overlaps the tree (b then goes to bag). */
bool ft_insert(struct va_freetree *ft, struct va_block *b, struct va_bag *bag);

/* The highest free block holding size bytes that end at or below limit, or NULL. */
struct va_block *ft_highest_fit(struct va_freetree *ft, uint64_t limit, uint64_t size);

/* Free block with the greatest start <= addr, or NULL. */
struct va_block *ft_floor(struct va_freetree *ft, uint64_t addr);

/* The next free block in address order (NULL at the end): the tree's in-order, O(1)
 * amortised over a walk, and top after the tree's last block. */
static inline struct va_block *ft_next(const struct va_freetree *ft, struct va_block *b)
{
	struct rb_node *n;

	if (b == ft->top)
		return NULL;
	n = rb_next(&b->rb);
	return n ? rb_entry(n, struct va_block, rb) : ft->top;
}

/* Lowest free block, or NULL. */
static inline struct va_block *ft_first(const struct va_freetree *ft)
{
	struct rb_node *n = rb_first(&ft->root);

	return n ? rb_entry(n, struct va_block, rb) : ft->top;
}

/* Largest free block size. */
static inline uint64_t ft_largest(const struct va_freetree *ft)
{
	uint64_t t = ft->root.node ? rb_entry(ft->root.node, struct va_block, rb)->subtree_max : 0;

	return ft->top && blk_size(ft->top) > t ? blk_size(ft->top) : t;
}

/* Check the tree's invariants; 0 or -1 with a sentence in msg. */
int ft_check(struct va_freetree *ft, uint64_t quantum, char *msg, size_t len);

/* ---- node.c: busy trees and pools (callers hold the node's lock) ------------------------ */

/* Initialise / tear down a node's lock, tree, lazy array and pool array. */
int node_init(struct va_node *n, unsigned pool_classes);
void node_destroy(struct va_node *n, unsigned pool_classes);

/* Make b busy in n: into the hash, pending (not the tree), or into the busy tree alone if
 * the hash has no room. */
void busy_insert(struct va_node *n, struct va_block *b, unsigned qshift);

/* Take busy block b out of n (hash, tree or both). */
void busy_remove(struct va_node *n, struct va_block *b, unsigned qshift);

/* Busy block starting exactly at addr, or NULL: O(1) through the hash. */
struct va_block *busy_find(struct va_node *n, uint64_t addr, unsigned qshift);

/* The first pending block (VA_ST_BUSY_PEND) at or after slot *i of n's hash, *i moved past
 * it; NULL at the end. */
struct va_block *busy_next_pending(const struct va_node *n, uint32_t *i);

/* Put every pending block into the busy tree, so it holds every busy block of n (a scan of
 * the hash when any is pending). */
void busy_settle(struct va_node *n);

/* Busy block with the greatest start <= addr, or NULL (settles n first). */
struct va_block *busy_floor(struct va_node *n, uint64_t addr);

/* With no lock held: grow node k's hash so extra more blocks keep it at most three
 * quarters full. 0 or VA_ENOMEM (the hash keeps working; blocks it has no room for go to
 * the busy tree). */
int busy_hash_grow(struct va_space *vs, unsigned k, size_t extra);

/* Grow the hash of the node addr belongs to if needed (no lock held). */
static inline void busy_hash_check(struct va_space *vs, uint64_t addr)
{
	unsigned k = va_node_of(vs, addr);

	if (bh_wants_grow(&vs->node[k].hash, 0))
		busy_hash_grow(vs, k, 0);
}

/* Busy block starting at addr (its node's hash, no settle), copied to *out. Returns true
 * if found. */
bool busy_lookup_start(struct va_space *vs, uint64_t addr, struct va_area *out);

/* Busy block containing addr in any node (each node locked in turn, first one first),
 * copied to *out. Returns true if found. */
bool busy_lookup_any(struct va_space *vs, uint64_t addr, unsigned first, struct va_area *out);

/* Pop a block of q quanta (1..pool_classes) or NULL. */
struct va_block *pool_pop(struct va_node *n, unsigned q, uint64_t quantum);

/* Pop a block of q quanta whose start is a multiple of align among the top POOL_ALIGN_LOOK
 * of its class, or NULL. */
#define POOL_ALIGN_LOOK 4
struct va_block *pool_pop_aligned(struct va_node *n, unsigned q, uint64_t align, uint64_t quantum);

/* Push b (size q quanta) if its class has room; false if full. dirty: b holds what its last
 * holder wrote (it must be zeroed when taken: VA_ST_POOLED_DIRTY). */
bool pool_push(struct va_node *n, struct va_block *b, unsigned q, unsigned depth, uint64_t quantum,
	       bool dirty);

/* What a drain pass does to the pools: a quarter of every class decays to the tree (and
 * classes in demand are refilled from the pass), or every pool is emptied. */
enum drain_kind {
	DRAIN_DECAY,
	DRAIN_FULL,
};

/* Detach the oldest quarter of every class, rounded down if it was asked for since the last
 * drain (recent), else up (DRAIN_DECAY), or all of them (DRAIN_FULL); returns them as a
 * next-linked list. */
struct va_block *pool_take_decay(struct va_node *n, unsigned classes, enum drain_kind kind,
				 uint64_t quantum);

/* ---- lazy.c ------------------------------------------------------------------------- */

/* Full drain: release every lazy block (one callback per coalesced run), merge it into the
 * free tree and empty every pool into it too. Call with no lock held; waits for a drain
 * already running. A drain asked for from a release callback of the same space returns at
 * once (the outer drain is running). */
void lazy_drain_full(struct va_space *vs);

/* Take drain_lock and mark this thread as draining vs; false (nothing taken) if it already
 * is (a release callback of vs). *outer is for lazy_leave. */
bool lazy_enter(struct va_space *vs, const struct va_space **outer);
void lazy_leave(struct va_space *vs, const struct va_space *outer);

/* With drain_lock not held: wait until every thread that was waiting for drain_lock when
 * called has had it, so a caller that takes it again and again cannot starve them. */
void lazy_let_waiters_in(struct va_space *vs);

/* With drain_lock held (lazy_enter): one DRAIN_DECAY pass if lazy_total is over lazy_max. */
void lazy_pass_if_over(struct va_space *vs);

/* A point with no allocator lock held in a drain-like pass: the background thread may
 * yield its CPU here. */
void lazy_step(struct va_space *vs);

/* A full drain that keeps drain_lock (lazy_leave drops it), so an allocation's retry runs
 * with no release chunk out of the tree; false (no drain, nothing held) if nested. */
bool lazy_drain_hold(struct va_space *vs, const struct va_space **outer);

/* After a free (or a batch of them) with lazy_total at lazy_now: past lazy_self_at drain
 * here; else, if this free flushed bytes past lazy_max, wake the background thread. */
void lazy_after_free(struct va_space *vs, uint64_t lazy_now, bool flushed);

/* Make room for one more item on n's lazy array. Called and returns with n->lock held;
 * may drop it meanwhile to grow the array. False if memory is short. */
bool lazy_reserve(struct va_node *n);

/* Start / stop the background drain thread. */
int lazy_thread_start(struct va_space *vs);
void lazy_thread_stop(struct va_space *vs);

/* ---- check.c -------------------------------------------------------------------------- */

/* Take / drop every lock of vs in the documented order. */
void va_freeze(struct va_space *vs);
void va_thaw(struct va_space *vs);

#endif
