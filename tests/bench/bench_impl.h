/*
 * bench_impl.h - the allocator implementations vabench can drive.
 *
 * "vaspace", "exact" and "globallock" are the product (lib/, three configurations);
 * "segfit" is the O(1) segregated-fit reference; "busywalk" and "listfit" are the
 * historical baselines, kept here beside the bench and never in lib/. Every implementation speaks
 * the vaspace semantics: sizes round up to the quantum, alignment is a power of two raised to the
 * quantum, results and errors are VA_OK / VA_E* codes from vaspace.h.
 */
#ifndef BENCH_IMPL_H
#define BENCH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vaspace.h"

/* The space every implementation is created over. */
struct bench_space_cfg {
	uint64_t base, size, quantum;
	/* Exact mode: lowest-address first fit with no caches (baselines), or vaspace's
	 * exact mode (nodes = 1, no pools, eager, no thread). Used by --selftest. */
	bool exact;
};

/* Counters an implementation may report; has_va says the va_* fields are valid. */
struct bench_counters {
	bool has_va;
	uint64_t allocs, frees, fails, drains, release_calls, released_bytes, pool_hits;
	uint64_t zero_calls; /* pooled blocks zeroed in place instead of released */
};

struct bench_impl_ops {
	const char *name;
	const char *desc;
	/* Rounds a request up to a size class before searching (segfit): not exact, and a
	 * failure may leave a fitting hole; no congruent groups; a free inside an area is
	 * VA_EDOUBLEFREE. --selftest checks it for overlap, alignment and merging only. */
	bool rounds;
	/* Build an instance; *out is set on success. Returns VA_OK or a VA_E* code. */
	int (*create)(const struct bench_space_cfg *cfg, void **out);
	/* Free the instance and every area in it. */
	void (*destroy)(void *h);
	/* Allocate size bytes aligned to align (0 = quantum). */
	int (*alloc)(void *h, uint64_t size, uint64_t align, uint64_t *addr);
	/* Free the area starting at addr. */
	int (*free)(void *h, uint64_t addr);
	/* pcpu_get_vm_areas: highest base with every [base + offs[i], + sizes[i]) free. */
	int (*alloc_congruent)(void *h, const uint64_t *offs, const uint64_t *sizes, unsigned n,
			       uint64_t align, uint64_t *out);
	/* Called once by each worker thread before it starts (home node). May be NULL. */
	void (*thread_start)(void *h, unsigned tid);
	/* Make freed space reusable now (drain lazy lists and pools). May be NULL. */
	void (*quiesce)(void *h);
	/* Invariant check; 0 or VA_ECORRUPT with a sentence in msg. */
	int (*check)(void *h, char *msg, size_t msg_len);
	/* Fill *out. */
	void (*counters)(void *h, struct bench_counters *out);
};

extern const struct bench_impl_ops bench_impl_vaspace;
extern const struct bench_impl_ops bench_impl_exact;
extern const struct bench_impl_ops bench_impl_inline;
extern const struct bench_impl_ops bench_impl_segfit;
extern const struct bench_impl_ops bench_impl_globallock;
extern const struct bench_impl_ops bench_impl_busywalk;
extern const struct bench_impl_ops bench_impl_listfit;

/* Every implementation, NULL-terminated, in the order a full run uses. */
extern const struct bench_impl_ops *const bench_impls[];

/* The implementation called name, or NULL. */
const struct bench_impl_ops *bench_impl_find(const char *name);

/*
 * Shared argument checks of the baselines: round size up to the quantum and raise
 * align to it. Returns VA_OK, VA_ESIZE, VA_EALIGN or VA_EOVERFLOW.
 */
int bench_normalize(uint64_t quantum, uint64_t space_size, uint64_t *size, uint64_t *align);

/* Checks of a congruent request (quantum multiples, sorted, non-overlapping); returns the
 * total span through *span. */
int bench_check_congruent(uint64_t quantum, uint64_t space_size, const uint64_t *offs,
			  const uint64_t *sizes, unsigned n, uint64_t align, uint64_t *span);

/*
 * The top-down congruent search of pcpu_get_vm_areas, shared by the baselines.
 * conflict(h, s, e, &new_end) returns false if [s, e) is entirely free, else true
 * with new_end = an address at or below which an area overlapping [s, e) must end
 * (the start of the highest busy run that overlaps [s, e)). Finds the highest base
 * aligned to align with every area free, or returns VA_ENOSPC.
 */
int bench_congruent_search(void *h,
			   bool (*conflict)(void *h, uint64_t s, uint64_t e, uint64_t *new_end),
			   uint64_t vstart, uint64_t vend, const uint64_t *offs,
			   const uint64_t *sizes, unsigned n, uint64_t align, uint64_t *base);

#endif
