/*
 * va_internal.h - data structures shared by the libvaspace source files.
 *
 * A block object (struct va_block) describes one range [start, end) and sits in exactly
 * one place at a time: the free tree, a node's busy tree, a node's lazy list, a node's
 * pool, or a caller's hands (allocation or drain in progress, always under the lock that
 * va_walk/va_check also take, so they never see a block missing). See vaspace.c for the
 * lock order.
 */
#ifndef VA_INTERNAL_H
#define VA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rbtree.h"
#include "vaspace.h"

#define VA_CACHELINE 64
#define VA_MAX_NODES 4096
#define VA_MAX_POOL_QUANTA 65536

enum va_state {
	VA_ST_SPARE = 0,
	VA_ST_FREE,
	VA_ST_BUSY,
	VA_ST_LAZY,
	VA_ST_POOLED,
};

struct va_block {
	struct rb_node rb;	       /* free tree or busy tree */
	uint64_t start, end;	       /* [start, end) */
	uint64_t subtree_max;	       /* free tree: largest block size in this subtree */
	struct va_block *next, *prev;  /* free list (address order); lazy/pool/spare: next only */
	void *owner;		       /* busy: the caller's tag */
	uint32_t home;		       /* node whose thread allocated it (its pool after reclaim) */
	uint32_t state;		       /* enum va_state, for the checker and the free path */
};

static inline uint64_t blk_size(const struct va_block *b)
{
	return b->end - b->start;
}

/* A caller-owned list of spare block objects (see objcache.c). */
struct va_bag {
	struct va_block *head;
	unsigned n;
};

static inline struct va_block *bag_take(struct va_bag *bag)
{
	struct va_block *b = bag->head;

	if (b) {
		bag->head = b->next;
		bag->n--;
	}
	return b;
}

static inline void bag_give(struct va_bag *bag, struct va_block *b)
{
	b->state = VA_ST_SPARE;
	b->next = bag->head;
	bag->head = b;
	bag->n++;
}

/* The global free tree: augmented rbtree plus address-ordered circular list. */
struct va_freetree {
	struct rb_root root;
	struct va_block head; /* list sentinel: head.next is the lowest block */
	uint64_t bytes, blocks;
};

/* One size class of a node pool: a stack of ready blocks of exactly (class + 1) quanta. */
struct va_pool_class {
	struct va_block *head;
	uint32_t count;
};

/* A node: busy tree, lazy list and pools, each under its own lock on its own cache line. */
struct va_node {
	struct {
		pthread_mutex_t lock;
		struct rb_root root;
		uint64_t bytes, blocks;
	} busy __attribute__((aligned(VA_CACHELINE)));
	struct {
		pthread_mutex_t lock;
		struct va_block *head;
		uint64_t bytes, blocks;
	} lazy __attribute__((aligned(VA_CACHELINE)));
	struct {
		pthread_mutex_t lock;
		struct va_pool_class *classes; /* pool_max_quanta entries */
		uint64_t bytes, blocks;
	} pool __attribute__((aligned(VA_CACHELINE)));
	/* counters bumped by threads whose home is this node */
	struct {
		_Atomic uint64_t allocs, frees, fails, pool_hits;
	} stat __attribute__((aligned(VA_CACHELINE)));
} __attribute__((aligned(VA_CACHELINE)));

/* A block and its sort key (quantum index), for sorting a drain batch. */
struct drain_item {
	uint64_t key;
	struct va_block *b;
};

struct va_space {
	struct va_config cfg; /* with defaults filled in */
	uint64_t base, end, size, quantum;
	unsigned qshift;      /* log2(quantum) */
	unsigned nodes;
	uint64_t zone;
	unsigned zone_shift;  /* log2(zone) if zone is a power of two, else 0 */
	bool zone_pow2;
	unsigned pool_classes;  /* pool size classes per node; 0 when pools are off */
	unsigned nodes_ready;   /* nodes initialised (for teardown after a failed create) */

	struct {
		pthread_mutex_t lock;
		struct va_freetree tree;
	} free __attribute__((aligned(VA_CACHELINE)));

	struct va_node *node; /* nodes entries */

	/* lazy bytes over all nodes: decides when to drain */
	_Atomic uint64_t lazy_total __attribute__((aligned(VA_CACHELINE)));

	/* drain: one at a time */
	pthread_mutex_t drain_lock __attribute__((aligned(VA_CACHELINE)));
	_Atomic uint64_t drains, released_bytes, release_calls;
	struct drain_item *scratch, *scratch_tmp; /* sort buffers, kept between drains */
	size_t scratch_cap;

	/* background thread */
	pthread_mutex_t ctl_lock;
	pthread_cond_t ctl_cond;
	_Atomic bool kick;
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

/* Lock wrappers: mutexes that spin briefly before sleeping (short critical sections). */
int va_mutex_init(pthread_mutex_t *m);

static inline void va_lock(pthread_mutex_t *m)
{
	pthread_mutex_lock(m);
}

static inline void va_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

/* ---- objcache.c: spare block objects ---------------------------------------------- */

/* Make bag hold at least want objects (thread cache, then shared depot, then malloc);
 * call with no lock held. Returns 0 or VA_ENOMEM. */
int objcache_fill(struct va_bag *bag, unsigned want);

/* Give every object in bag back (thread cache, depot, free); call with no lock held. */
void objcache_return(struct va_bag *bag);

/* ---- freetree.c ------------------------------------------------------------------- */

/* Empty tree. */
void ft_init(struct va_freetree *ft);

/* One fit request: size and alignment already rounded; window [vstart, vend). */
struct va_fit_req {
	uint64_t size, align, vstart, vend;
};

/* Lowest block holding an aligned [a, a + size) inside the window; *addr = a. */
struct va_block *ft_lowest_fit(struct va_freetree *ft, const struct va_fit_req *r,
			       uint64_t *addr);

/* Cut [a, a + size) out of free block b (one of the four fit types) and return a block
 * object for it, off every structure; extra objects come from bag. NULL if bag is short. */
struct va_block *ft_carve(struct va_freetree *ft, struct va_block *b, uint64_t a,
			  uint64_t size, struct va_bag *bag);

/* Insert object b (its range must be free space) merging with both neighbours; objects
 * no longer needed go to bag. Returns false if b overlaps the tree (b then goes to bag). */
bool ft_insert(struct va_freetree *ft, struct va_block *b, struct va_bag *bag);

/* Free block with the greatest start <= addr, or NULL. */
struct va_block *ft_floor(struct va_freetree *ft, uint64_t addr);

/* Address-order neighbours (NULL at the ends). */
struct va_block *ft_prev(struct va_freetree *ft, struct va_block *b);
struct va_block *ft_next(struct va_freetree *ft, struct va_block *b);

/* Largest free block size. */
static inline uint64_t ft_largest(const struct va_freetree *ft)
{
	return ft->root.node ? rb_entry(ft->root.node, struct va_block, rb)->subtree_max : 0;
}

/* Check tree and list invariants; 0 or -1 with a sentence in msg. */
int ft_check(struct va_freetree *ft, uint64_t quantum, char *msg, size_t len);

/* ---- node.c: busy trees and pools (callers hold the named lock) ----------------------- */

/* Initialise / tear down a node's locks, trees, lists and pool array. */
int node_init(struct va_node *n, unsigned pool_classes);
void node_destroy(struct va_node *n, unsigned pool_classes);

/* busy.lock held: insert b (keyed by start). */
void busy_insert(struct va_node *n, struct va_block *b);

/* busy.lock held: remove b. */
void busy_remove(struct va_node *n, struct va_block *b);

/* busy.lock held: busy block starting exactly at addr, or NULL. */
struct va_block *busy_find(struct va_node *n, uint64_t addr);

/* busy.lock held: busy block with the greatest start <= addr, or NULL. */
struct va_block *busy_floor(struct va_node *n, uint64_t addr);

/* Busy block containing addr in any node (each node locked in turn), copied to *out.
 * home is tried first. Returns true if found. */
bool busy_lookup_any(struct va_space *vs, uint64_t addr, unsigned first, struct va_area *out);

/* pool.lock held: pop a block of q quanta (1..pool_max) or NULL. */
struct va_block *pool_pop(struct va_node *n, unsigned q, uint64_t quantum);

/* pool.lock held: push b (size q quanta) if its class has room; false if full. */
bool pool_push(struct va_node *n, struct va_block *b, unsigned q, unsigned depth,
	       uint64_t quantum);

/* pool.lock held: detach the oldest ceil(count / 4) blocks of every class, or all of them
 * if full; returns them as a list (next-linked). */
struct va_block *pool_take_decay(struct va_node *n, unsigned classes, bool full,
				 uint64_t quantum);

/* ---- lazy.c ------------------------------------------------------------------------- */

/* Drain: release every lazy block (one callback per coalesced run) and merge it into the
 * pools or the free tree; full also empties the pools; else they decay by a quarter.
 * Call with no lock held; waits for a drain already running. */
void lazy_drain(struct va_space *vs, bool full);

/* After a lazy free of bytes: wake the background thread or drain synchronously. */
void lazy_after_free(struct va_space *vs, uint64_t lazy_now);

/* Start / stop the background drain thread. */
int lazy_thread_start(struct va_space *vs);
void lazy_thread_stop(struct va_space *vs);

/* ---- check.c -------------------------------------------------------------------------- */

/* Take / drop every lock of vs in the documented order. */
void va_freeze(struct va_space *vs);
void va_thaw(struct va_space *vs);

#endif
