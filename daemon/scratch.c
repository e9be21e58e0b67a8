/* scratch.c - bump allocator for protobuf-c; see scratch.h. */
#include "scratch.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

#define FIRST_CHUNK (4u * 1024u)
#define KEEP_MAX    (64u * 1024u) /* never keep more than this between requests */

struct vad_scratch_chunk {
	struct vad_scratch_chunk *next;
	size_t cap, used;
	alignas(max_align_t) unsigned char data[];
};

static void *pb_alloc(void *ctx, size_t len)
{
	return vad_scratch_alloc(ctx, len);
}

static void pb_free(void *ctx, void *ptr)
{
	(void)ctx;
	(void)ptr; /* everything goes at the next reset */
}

void vad_scratch_init(struct vad_scratch *s)
{
	s->pb.alloc = pb_alloc;
	s->pb.free = pb_free;
	s->pb.allocator_data = s;
	s->chunks = NULL;
	s->used_total = 0;
	s->failed = false;
}

static struct vad_scratch_chunk *chunk_new(size_t cap)
{
	struct vad_scratch_chunk *c = malloc(sizeof(*c) + cap);
	if (!c)
		return NULL;
	c->next = NULL;
	c->cap = cap;
	c->used = 0;
	return c;
}

void *vad_scratch_alloc(struct vad_scratch *s, size_t len)
{
	const size_t align = alignof(max_align_t);
	if (len > SIZE_MAX / 2) {
		s->failed = true;
		return NULL;
	}
	size_t need = (len + align - 1) & ~(align - 1);
	if (need == 0)
		need = align;
	struct vad_scratch_chunk *c = s->chunks;
	if (!c || c->cap - c->used < need) {
		size_t cap = c ? c->cap * 2 : FIRST_CHUNK;
		if (cap < need)
			cap = need;
		struct vad_scratch_chunk *n = chunk_new(cap);
		if (!n) {
			s->failed = true;
			return NULL;
		}
		n->next = c;
		s->chunks = n;
		c = n;
	}
	void *p = c->data + c->used;
	c->used += need;
	s->used_total += need;
	return p;
}

void vad_scratch_reset(struct vad_scratch *s)
{
	struct vad_scratch_chunk *c = s->chunks;
	if (!c)
		return;
	if (c->next) {
		/* The last round needed several chunks: replace them with one that fits. */
		size_t want = s->used_total;
		vad_scratch_fini(s);
		if (want > KEEP_MAX)
			want = KEEP_MAX;
		if (want < FIRST_CHUNK)
			want = FIRST_CHUNK;
		s->chunks = chunk_new(want);
	} else if (c->cap > KEEP_MAX) {
		vad_scratch_fini(s);
	} else {
		c->used = 0;
	}
	s->used_total = 0;
	s->failed = false;
}

void vad_scratch_fini(struct vad_scratch *s)
{
	while (s->chunks) {
		struct vad_scratch_chunk *c = s->chunks;
		s->chunks = c->next;
		free(c);
	}
	s->used_total = 0;
}
