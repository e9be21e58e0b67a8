/*
 * scratch.h - a bump allocator for decoding requests and building replies: protobuf-c
 * allocates from it, frees are no-ops, and vad_scratch_reset() forgets everything at once,
 * so handling a request does not call malloc once the first chunk is big enough.
 */
#ifndef VAD_SCRATCH_H
#define VAD_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct vad_scratch_chunk;

struct vad_scratch {
	ProtobufCAllocator pb;		  /* hand &pb to protobuf-c */
	struct vad_scratch_chunk *chunks; /* newest first */
	size_t used_total;		  /* bytes handed out since the last reset */
	bool failed;			  /* an allocation failed since the last reset */
};

/* Set up an empty scratch allocator (no memory yet). */
void vad_scratch_init(struct vad_scratch *s);

/* len bytes aligned for any type, or NULL when out of memory. */
void *vad_scratch_alloc(struct vad_scratch *s, size_t len);

/* Forget every allocation; keep one chunk big enough for the last round. */
void vad_scratch_reset(struct vad_scratch *s);

/* Free all memory. */
void vad_scratch_fini(struct vad_scratch *s);

#endif
