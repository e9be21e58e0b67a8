/*
 * ranges.h - a range's life in the daemon, both ways, as mirror calls: alloc reserves the
 * session's quota, takes the ranges from the arena's allocator in one batch, commits their
 * memory in a commit = reserve arena (before anyone can see them) and records the
 * session's holds, undoing all of it when a step fails; release drops holds, and a range
 * whose last reference goes returns to the allocator. The handlers validate requests and
 * build replies around these; they do not reach into the registry or the allocator.
 */
#ifndef VAD_RANGES_H
#define VAD_RANGES_H

#include <stddef.h>
#include <stdint.h>

#include "registry.h"

struct vad_session;

/* Why an alloc batch was refused. */
struct vad_alloc_refusal {
	enum vad_quota_kind quota; /* not VAD_QUOTA_OK: a quota (or a 2^64 counter) refused */
	uint64_t held;		   /* then: what that quota already counted */
	int rc;		  /* otherwise: the allocator's VA_E* code (VA_ENOMEM: bookkeeping) */
	size_t failed;	  /* the range it failed at (n: the batch as a whole) */
	int commit_errno; /* nonzero: commit = reserve could not back range failed (commit.h) */
};

/* Allocate n ranges of sizes[] (quantum multiples that sum to total) aligned to align in arena
 * ai for session s, all or nothing: 0 with offsets[] filled and the session holding one
 * reference to each, or -1 with *why and nothing kept. */
int vad_ranges_alloc(struct vad_session *s, unsigned ai, size_t n, const uint64_t *sizes,
		     uint64_t align, uint64_t total, uint64_t *offsets,
		     struct vad_alloc_refusal *why);

/* Would session s's quotas admit total more bytes in n more ranges now? 0, or -1 with
 * why->quota and why->held (nothing is kept reserved: a waiting alloc is checked again when
 * it is granted). */
int vad_ranges_quota_check(struct vad_session *s, uint64_t total, size_t n,
			   struct vad_alloc_refusal *why);

/* Drop session s's reference to each range at offsets[] of arena ai in turn, stopping at the
 * first it holds none of; returns how many were dropped. */
size_t vad_ranges_release(struct vad_session *s, unsigned ai, const uint64_t *offsets, size_t n);

#endif
