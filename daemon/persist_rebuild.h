/*
 * persist_rebuild.h - the heavy part of a restart (persist.h): the state file's holds put in
 * address order, the allocators and the registry rebuilt from them and verified, fast enough
 * for a million live ranges in well under a second on two cores:
 *   - the holds are sorted by a radix sort (none at all when they are in order already, as a
 *     file written by a restore is);
 *   - one range object per place, then two threads: one makes every range busy in its
 *     allocator in address order (each placement beside the last), checks each allocator
 *     (va_check) and releases its free space; the other gives the holders their holds;
 *   - the registry check (registry.h) once the ranges are placed, while the first thread
 *     checks and releases.
 * Nothing of the checks is left out: the same va_check and registry check as `vactl check`.
 */
#ifndef VAD_PERSIST_REBUILD_H
#define VAD_PERSIST_REBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "registry.h"
#include "state.h"
#include "vaspace.h"

/* Time spent: wall clock and the spending thread's CPU, in ns (CPU time says what a part
 * costs however loaded the machine is). */
struct vad_span {
	uint64_t wall, cpu;
};

/* Now, as a span from an arbitrary zero: take two and subtract with vad_span_since. */
struct vad_span vad_span_now(void);

/* The time from mark to now. */
struct vad_span vad_span_since(struct vad_span mark);

/* What the rebuild needs and what it measured. */
struct vad_rebuild {
	const struct vad_state_hold *h; /* sorted by vad_rebuild_sort; arena: config index */
	size_t n;
	struct vad_registry *reg;
	struct va_space *const *vs; /* per arena slot (NULL: none) */
	const bool *release;	    /* per arena slot: va_release_free after its check */
	size_t n_arenas;
	const char *const *names; /* per arena slot, for messages (NULL: "?") */
	/* The holder of the records naming holder id (made by the caller). */
	struct vad_holder *(*holder)(void *ctx, uint32_t id);
	void *ctx;
	/* Run once every range is placed and every hold given, before the registry check (the
	 * share tokens): 0, or -1 with a sentence in err. NULL: nothing. */
	int (*before_check)(void *ctx, char *err, size_t err_len);
	void *before_check_ctx;
	/* Out: the time of each part (those of the two threads overlap). */
	struct vad_span ranges, alloc, va_check, released, holds, registry_check;
};

/* Sort the n holds at *h by arena, offset and holder (*h may then point at scratch it
 * swapped in: free both as told; names[arena] for messages) and check them as a whole: holds of one
 * place agree on its size, no two places overlap, one record per holder and place. *spare is the
 * buffer to free beside *h afterwards (NULL if none). 0, or -1 with a sentence in err. */
int vad_rebuild_sort(struct vad_state_hold **h, size_t n, struct vad_state_hold **spare,
		     const char *const *names, size_t n_names, char *err, size_t err_len);

/* Rebuild the allocators and the registry from rb->h and verify them (va_check of every
 * arena that has holds, the registry check); then release the free space of the arenas
 * rb->release names. 0, or -1 with a sentence in err (the daemon must not start). */
int vad_rebuild_run(struct vad_rebuild *rb, char *err, size_t err_len);

#endif
