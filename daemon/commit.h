/* commit.h - commit = reserve: an arena's ranges backed before they are granted, so a short
 * huge-page pool, tmpfs limit or memory cgroup is an error reply and never a client's SIGBUS. */
#ifndef VAD_COMMIT_H
#define VAD_COMMIT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "reply.h"
#include "vaspace.h"

struct vad_arena;

/* Back ranges [offsets[i], offsets[i] + sizes[i]) of a, i < n, with memory (fallocate without
 * punching, or populating the daemon's mapping where it has a NUMA or huge-page one). 0; or -1
 * with every range given back (punched) and *failed, *err set to the range and errno. */
int vad_commit_ranges(struct vad_arena *a, size_t n, const uint64_t *offsets, const uint64_t *sizes,
		      size_t *failed, int *err);

/* Make r the ECOMMIT reply for a range of size that could not be committed with errno err:
 * "arena 'frames' cannot commit 64 MiB: the huge page pool has 12 of 32 pages free". */
void vad_commit_refusal(struct vad_reply *r, struct vad_arena *a, uint64_t size, int err, size_t i,
			size_t n);

/* Bytes the daemon committed for live ranges (the busy bytes of a commit = reserve arena). */
uint64_t vad_arena_committed_bytes(const struct vad_arena *a, const struct va_stats *st);

/* The memory keys of an arena (or section) into its ArenaInfo: commit, huge, numa. */
void vad_commit_fill_info(Vad__ArenaInfo *info, const struct vad_arena_conf *c);

/* A's commit figures into its ArenaStats: committed bytes and commit failures. */
void vad_commit_fill_stats(Vad__ArenaStats *o, const struct vad_arena *a,
			   const struct va_stats *st);

#endif
