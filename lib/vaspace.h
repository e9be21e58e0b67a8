/*
 * vaspace.h - the vad allocator core (libvaspace).
 *
 * A range allocator over [base, base + size) in units of a quantum, rebuilt in
 * user space from Linux's vmalloc (mm/vmalloc.c, 2018-2024):
 *   - free blocks in a red-black tree ordered by address, augmented with the
 *     largest free block of each subtree, plus an address-ordered list;
 *     lowest-address first fit in O(log n);
 *   - busy areas sharded over nodes by address: node = (addr / zone) % nodes;
 *   - per-node pools of ready (already released) blocks by exact size class;
 *   - lazy reclaim: frees are batched, sorted, coalesced, released with one
 *     callback per coalesced run, then merged into the free tree in chunks.
 *
 * Addresses are plain integers (offsets into a shared arena for the daemon).
 * The library does no I/O; the only side effect it triggers is the release
 * callback. All functions are thread-safe unless said otherwise. Functions
 * that can fail return 0 or a negative VA_E* code; nothing aborts on bad input.
 */
#ifndef VASPACE_H
#define VASPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Error codes: every one is distinct so callers and tests can tell them apart. */
enum va_error {
	VA_OK = 0,
	VA_EINVAL = -1, /* a malformed argument not covered below (NULL out pointer, bad config) */
	VA_ESIZE = -2,	/* size is 0 */
	VA_EOVERFLOW = -3, /* size or alignment rounding overflows 64 bits, or exceeds the space */
	VA_EALIGN = -4,	   /* alignment is not a power of two */
	VA_ERANGE = -5,	   /* [vstart, vend) window or address outside the space */
	VA_ENOSPC = -6,	   /* no free block can hold the request, even after draining */
	VA_ENOTSTART = -7, /* address lies inside a busy area but is not its start */
	VA_EDOUBLEFREE = -8, /* address is already free (lazy, pooled or in the free tree) */
	VA_ENOMEM = -9,	     /* malloc of a bookkeeping object failed */
	VA_ECORRUPT = -10,   /* the invariant checker found a broken invariant */
	VA_ENOTFOUND = -11,  /* va_lookup: no busy area contains the address */
};

/* Called once per coalesced run of freed space [start, start + size), outside all
 * allocator locks, before the run becomes allocatable again; va_release_free (and the idle
 * timer through it) also passes free blocks that were released before, which the callback
 * must take as harmless (punching a hole twice is). It may call any function of
 * this library; a drain it causes on its own space (va_drain, an allocation that fails, a
 * free past 2 x lazy_max) returns at once, as that space is already draining. One drain
 * per space runs at a time, so two spaces whose callbacks drain each other can deadlock. */
typedef void (*va_release_fn)(void *ctx, uint64_t start, uint64_t size);

/* One range [start, start + size) of a batch callback. */
struct va_extent {
	uint64_t start, size;
};

/* Called with n ranges in ascending address order, none of which anyone holds for the call's
 * duration (as va_config.zero_many says). */
typedef void (*va_release_many_fn)(void *ctx, const struct va_extent *r, size_t n);

/* Creation parameters. Zero means "default" for every numeric field. */
struct va_config {
	uint64_t base;	    /* first address of the space */
	uint64_t size;	    /* bytes; must be a non-zero multiple of quantum */
	uint64_t quantum;   /* power of two; default 4096 */
	unsigned nodes;	    /* busy/lazy/pool shards; default one per online CPU */
	uint64_t zone_size; /* address granule for node sharding; default 64 * quantum */
	uint64_t lazy_max;  /* lazy bytes that trigger a drain; default 8192 quanta * (1 + log2
			       CPUs),  i.e. 32 MiB * (1 + log2 CPUs) with 4 KiB quanta */
	unsigned pool_max_quanta; /* largest pooled size class in quanta; default 256 */
	unsigned pool_depth;	  /* most blocks per pool class per node; default 64 */
	unsigned drain_chunk; /* blocks merged per free-tree lock hold while draining; default 64 */
	unsigned idle_drain_ms; /* background thread drains leftovers after this idle time; default
				   1000 */
	bool no_pools;		/* disable per-node pools */
	bool eager;		/* no lazy list: free releases and merges at once */
	bool no_thread;		/* no background drain thread: drains run only synchronously
				   (past 2 x lazy_max, on allocation failure, va_drain) */
	bool no_idle_release;	/* the background thread does not run va_release_free once per
				   idle period (by default it does, after the idle drain) */
	va_release_fn release;	/* may be NULL */
	void *release_ctx;
	/* May be NULL. If set, a freed block that a drain hands to a pool (to be reused
	 * soon) is passed here, with release_ctx, to be made to read zeros in place (a
	 * memset where release would punch a hole), and only what goes back to the free
	 * tree is passed to release, in coalesced runs; a run also spans a gap between two
	 * freed blocks that is one whole free block (released before, or never written), so
	 * released_bytes counts such gaps too. Pooled memory then stays resident
	 * while it is pooled: a block that decays to the tree is released then. Same
	 * rules as release: outside all locks, before the block is reused. */
	va_release_fn zero;
	/* May be NULL. With zero: a drain passes the blocks it zeroes for the pools here, at
	 * most VA_ZERO_MANY at a time in ascending order, instead of one zero call each, so
	 * that one look at the backing can answer for many blocks (the daemon asks its memfd
	 * for the next written page once for a run of blocks nobody wrote). */
	va_release_many_fn zero_many;
	/* With zero: a free never goes straight back into a pool, dirty, to be zeroed by the
	 * allocation that takes it (one zero call on the allocating path per reuse); every
	 * freed block goes through the lazy list, and the drain zeroes what the pools want in
	 * sorted batches. The start of va_set_recycle's switch. */
	bool no_recycle;
};

/* Most ranges one zero_many call gets. */
#define VA_ZERO_MANY 64

/* "Exact mode" (nodes = 1, no_pools, eager) behaves as a pure lowest-address
 * first-fit allocator; the unit tests compare it with a reference model. */

struct va_space;

/* Create a space; *out is set on success. Errors: VA_EINVAL, VA_EALIGN, VA_ENOMEM. */
int va_create(const struct va_config *cfg, struct va_space **out);

/* Stop the background thread and free every bookkeeping object; outstanding areas vanish.
 * Lazy ranges are not released (the caller is tearing the arena down anyway). */
void va_destroy(struct va_space *vs);

/* Allocate size bytes (rounded up to the quantum) aligned to align (0 = quantum;
 * else a power of two, raised to the quantum) anywhere in the space. */
int va_alloc(struct va_space *vs, uint64_t size, uint64_t align, void *owner, uint64_t *out_addr);

/* As va_alloc, but the whole area must lie inside [vstart, vend). */
int va_alloc_range(struct va_space *vs, uint64_t size, uint64_t align, uint64_t vstart,
		   uint64_t vend, void *owner, uint64_t *out_addr);

/* Rebuild a space that holds nothing (as va_create left it, or all freed and drained) with n busy
 * areas at once, area i [starts[i], starts[i] + sizes[i]) tagged owners[i] (owners may be NULL), as
 * n va_alloc_range calls at exactly those places would, in O(n) (lib/restore.c: a restart's million
 * ranges). The areas must be sorted by address, quantum multiples, inside the space, and must not
 * overlap. 0; VA_ERANGE (outside the space), VA_EINVAL (unsorted, overlapping, misaligned, empty,
 * or the space holds something: nothing changed), VA_ENOMEM. */
int va_restore(struct va_space *vs, size_t n, const uint64_t *starts, const uint64_t *sizes,
	       void *const *owners);

/* Congruent multi-area allocation (pcpu_get_vm_areas): find one base such that area i
 * is [base + offsets[i], base + offsets[i] + sizes[i]), all free, base aligned to align,
 * chosen as high as possible (top-down). Offsets and sizes must be quantum multiples,
 * sorted by offset, non-overlapping. On success out_addrs[i] = base + offsets[i]. */
int va_alloc_congruent(struct va_space *vs, const uint64_t *offsets, const uint64_t *sizes,
		       unsigned n, uint64_t align, void *owner, uint64_t *out_addrs);

/* Free the area starting at addr (lazily unless eager). Errors: VA_ERANGE (outside the
 * space), VA_ENOTSTART (inside a busy area, not its start), VA_EDOUBLEFREE (the address is
 * in free, lazy or pooled space: freed twice or never allocated). If owner_out is
 * non-NULL it receives the owner tag. */
int va_free(struct va_space *vs, uint64_t addr, void **owner_out);

/* Allocate n areas, area i of sizes[i] bytes aligned to align, tagged owners[i] (owners may
 * be NULL: no tags), as n calls of va_alloc would, but taking a node's lock once per run of
 * pool hits instead of once per area. All or nothing: 0 with out_addrs[i] set, or the error
 * of the first area that failed, *failed (if non-NULL) its index, and no area kept (those
 * already allocated are freed again, lazily, and counted as frees). */
int va_alloc_batch(struct va_space *vs, size_t n, const uint64_t *sizes, uint64_t align,
		   void *const *owners, uint64_t *out_addrs, size_t *failed);

/* Free addrs[0..n) in order, as n calls of va_free would, taking a node's lock once per run
 * of areas in that node. 0 when all were freed; else the first error (va_free's codes),
 * with *done (if non-NULL) the number freed before it and the rest untried. owners_out, if
 * non-NULL, receives area i's owner tag in owners_out[i]. */
int va_free_batch(struct va_space *vs, size_t n, const uint64_t *addrs, void **owners_out,
		  size_t *done);

/* Description of one busy area. */
struct va_area {
	uint64_t start;
	uint64_t size;
	void *owner;
	unsigned node;
};

/* Find the busy area containing addr (not only starting at it). VA_ERANGE if addr is
 * outside the space, VA_ENOTFOUND if no busy area contains it. */
int va_lookup(struct va_space *vs, uint64_t addr, struct va_area *out);

/* Replace the owner tag of the busy area starting at addr. */
int va_set_owner(struct va_space *vs, uint64_t addr, void *owner);

/* Release and merge every lazy block and empty every pool into the free tree, now. */
void va_drain(struct va_space *vs);

/* Pass every free block to the release callback, so free space a client wrote into goes back to the
 * system; blocks leave the free tree a bounded chunk at a time while they are released, so no
 * allocation can get one meanwhile. Returns the bytes passed to release. */
uint64_t va_release_free(struct va_space *vs);

/* Make the calling thread's home node n (mod nodes). Threads without a call get one
 * round-robin on first use. */
void va_set_home_node(unsigned n);

/* Counters since creation (monotonic) and occupancy (instantaneous). */
struct va_stats {
	uint64_t size, quantum;
	unsigned nodes;
	uint64_t busy_bytes, free_bytes, lazy_bytes, pooled_bytes;
	uint64_t busy_blocks, free_blocks, lazy_blocks, pooled_blocks;
	uint64_t largest_free; /* largest block in the free tree */
	uint64_t allocs, frees, fails;
	uint64_t drains;	 /* completed drain passes */
	uint64_t released_bytes; /* bytes of freed ranges passed to the release callback */
	uint64_t release_calls;	 /* release callback invocations for freed ranges */
	uint64_t zeroed_bytes, zero_calls; /* freed blocks passed to zero (pooled in place) */
	uint64_t recycled;     /* frees that went straight back into a pool (with zero set): zeroed
				  when taken again, counted in zero_calls then */
	uint64_t pool_hits;    /* allocations served from a pool */
	uint64_t drain_yields; /* times the background drain offered its CPU (every 20 us) */
	uint64_t object_bytes; /* block objects the process holds, every space together: 64 B
				  each, in 64 KiB slabs kept at their high-water mark */
	uint64_t
	    free_released_bytes;     /* free blocks passed to release by va_release_free and
					the idle timer (not in released_bytes: nobody freed them) */
	uint64_t free_release_calls; /* its release callback invocations */
};

/* With zero: one free in `every` of a pool class in demand goes straight back into a pool,
 * dirty, to be zeroed by the allocation that takes it (1: all of them); the others go through
 * the lazy list and the drain zeroes the pools' share in batches (0: all; no_recycle chose
 * 0 at creation, else 1). Any thread, any time. Returns the setting now in force (0 without
 * zero, pools and lazy). */
unsigned va_set_recycle(struct va_space *vs, unsigned every);

/* The setting va_set_recycle put in force (or no_recycle at creation). */
unsigned va_recycle_every(const struct va_space *vs);

/* Fill *out. busy + free + lazy + pooled == size always holds in a quiescent space. */
void va_get_stats(struct va_space *vs, struct va_stats *out);

enum va_block_kind { VA_BLOCK_BUSY, VA_BLOCK_FREE, VA_BLOCK_LAZY, VA_BLOCK_POOLED };

/* One block reported by va_walk. */
struct va_block_info {
	uint64_t start, size;
	enum va_block_kind kind;
	unsigned node; /* owning node for busy/lazy/pooled; 0 for free */
	void *owner;   /* busy only */
};

/* Call fn for every block, in no particular order across kinds (free blocks in address
 * order). A non-zero return from fn stops the walk and is returned. The space is
 * frozen (all locks held) for the duration: fn must not call back into vs. */
int va_walk(struct va_space *vs, int (*fn)(void *ctx, const struct va_block_info *b), void *ctx);

/* Check every invariant: tree order, red-black colours, subtree maxima, list order,
 * no two adjacent free blocks, no overlap between any blocks, busy + free + lazy +
 * pooled == size, counters consistent. Returns 0 or VA_ECORRUPT with a sentence in msg. */
int va_check(struct va_space *vs, char *msg, size_t msg_len);

/* A static English sentence for a VA_E* code. */
const char *va_strerror(int err);

#endif
