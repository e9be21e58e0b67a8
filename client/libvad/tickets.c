/*
 * tickets.c - pipelined calls: vad_alloc_submit, vad_alloc_batch_submit and
 * vad_free_submit send a request and return a ticket; vad_wait takes its result later,
 * vad_test and vad_progress let an event loop move replies along without blocking.
 *
 * A ticket is a call in flight whose record lives in the client's ticket slab instead of
 * on a blocked thread's stack: it enters the same table of calls in flight, goes out
 * through the same combining sender, and whichever thread reads (a blocking call's reader,
 * vad_wait, vad_progress) delivers its reply into it. vad_wait then waits for it exactly
 * as a blocking call does (reading for everyone, or asleep while another thread reads).
 * Handles carry the slot's index and generation, so a used-up, never issued or foreign
 * ticket is refused rather than followed. Everything is under c->lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "reader.h"
#include "sender.h"
#include "transport.h"
#include "wire.h"

/* The most bytes an Alloc frame of one size takes (ranges.c's ALLOC_FRAME_MAX for one). */
#define ALLOC1_FRAME_MAX (72u + LIBVAD_FAST_ARENA_MAX)
/* The most bytes a Free frame of one offset takes. */
#define FREE1_FRAME_MAX (VAD_FREE_FRAME_OVERHEAD + 10u + LIBVAD_FAST_ARENA_MAX)

static struct libvad_ticket *slot_at(vad_client *c, uint32_t index)
{
	return &c->ticket_chunks[index / LIBVAD_TICKET_CHUNK][index % LIBVAD_TICKET_CHUNK];
}

static vad_ticket handle_of(const struct libvad_ticket *k, uint32_t index)
{
	return ((uint64_t)k->gen << 32) | (index + 1);
}

/* The next Free of a batch free after k, or NULL. */
static struct libvad_ticket *next_part(vad_client *c, const struct libvad_ticket *k)
{
	return k->next_part ? slot_at(c, k->next_part - 1) : NULL;
}

/* A free ticket's offsets, and the records taken out for them (one range: in the ticket). */
static uint64_t *free_offsets_of(struct libvad_ticket *k)
{
	return k->n > 1 ? k->batch : k->lists;
}

static struct libvad_held *free_taken_of(struct libvad_ticket *k)
{
	return k->n > 1 ? (struct libvad_held *)(k->batch + k->n) : &k->taken;
}

/* An unused ticket for n ranges, growing the slab by a chunk when none is left; NULL with
 * *err set when that would put more than VAD_TICKETS_MAX ranges in flight (VAD_EQUOTA) or
 * memory ran out. Every ticket has a range at least, so the slab never outgrows the
 * bound. c->lock held. */
static struct libvad_ticket *ticket_get(vad_client *c, size_t n, uint32_t *index, int *err)
{
	if (n > VAD_TICKETS_MAX - c->tickets_out) {
		*err = VAD_EQUOTA;
		return NULL;
	}
	if (!c->tickets_free) {
		uint32_t chunk = c->tickets_made / LIBVAD_TICKET_CHUNK;
		struct libvad_ticket *k = calloc(LIBVAD_TICKET_CHUNK, sizeof(*k));
		if (!k) {
			*err = VAD_ENOMEM;
			return NULL;
		}
		c->ticket_chunks[chunk] = k;
		/* Generations start from the client's: another client's handle does not fit. */
		uint32_t gen0 = (uint32_t)(c->generation * 0x9e3779b1u) | 1u;
		for (uint32_t i = 0; i < LIBVAD_TICKET_CHUNK; i++) {
			k[i].gen = gen0 + i;
			k[i].next_free = i + 1 < LIBVAD_TICKET_CHUNK ? c->tickets_made + i + 2 : 0;
		}
		c->tickets_free = c->tickets_made + 1;
		c->tickets_made += LIBVAD_TICKET_CHUNK;
	}
	*index = c->tickets_free - 1;
	struct libvad_ticket *k = slot_at(c, *index);
	c->tickets_free = k->next_free;
	c->tickets_out += (uint32_t)n;
	k->n = n;
	return k;
}

/* Use ticket index up: its handle goes stale and it goes back on the free list. c->lock
 * held. */
static void ticket_put(vad_client *c, struct libvad_ticket *k, uint32_t index)
{
	k->kind = LIBVAD_TICKET_UNUSED;
	k->claimed = false;
	k->part = false;
	k->next_part = 0;
	free(k->batch);
	k->batch = NULL;
	k->gen++;
	if (k->gen == 0)
		k->gen = 1; /* a handle is never 0 */
	k->next_free = c->tickets_free;
	c->tickets_free = index + 1;
	c->tickets_out -= (uint32_t)k->n;
}

/* The ticket of handle t, or NULL (recorded) if t is none of this client's in flight.
 * c->lock held. */
static struct libvad_ticket *ticket_find(vad_client *c, vad_ticket t, const char *fn,
					 uint32_t *index)
{
	uint32_t low = (uint32_t)t;
	if (low == 0 || low > c->tickets_made) {
		libvad_failf(c, VAD_EINVAL, "%s: ticket %#llx was never issued by this client", fn,
			     (unsigned long long)t);
		return NULL;
	}
	*index = low - 1;
	struct libvad_ticket *k = slot_at(c, *index);
	if (k->kind == LIBVAD_TICKET_UNUSED || k->gen != (uint32_t)(t >> 32) || k->part) {
		libvad_failf(c, VAD_EINVAL,
			     "%s: ticket %#llx is not in flight on this client (waited for "
			     "already, or another client's)",
			     fn, (unsigned long long)t);
		return NULL;
	}
	if (k->claimed) {
		libvad_failf(c, VAD_EINVAL, "%s: another thread is waiting for ticket %#llx", fn,
			     (unsigned long long)t);
		return NULL;
	}
	return k;
}

struct libvad_pending *libvad_ticket_frame(struct libvad_ticket *k, uint64_t id)
{
	return k->kind != LIBVAD_TICKET_UNUSED && k->p.id == id ? &k->p : NULL;
}

/* Put ticket k's request (frame) in flight on the connection now up: into the table, then
 * out (or queued with more). c->lock held. VAD_OK, or VAD_ENOMEM (k out of the table). */
static int send_request_locked(vad_client *c, struct libvad_ticket *k, const uint8_t *frame,
			       size_t flen, bool more)
{
	k->p = (struct libvad_pending){.id = k->p.id, .fd = -1, .fast = &k->fast};
	k->conn_gen = c->conn_gen;
	libvad_pending_add(c, &k->p);
	int err = libvad_submit_locked(c, frame, flen, more, k, k->p.id);
	if (err != VAD_OK)
		libvad_pending_remove(c, &k->p);
	return err;
}

/* Send frame as the request of ticket k (index): into the table, then out (or queued with
 * more). c->lock held on entry and return. VAD_OK with *t set, or the error (recorded),
 * the ticket given back. */
static int submit_locked(vad_client *c, struct libvad_ticket *k, uint32_t index,
			 const uint8_t *frame, size_t flen, bool more, vad_ticket *t)
{
	int err = send_request_locked(c, k, frame, flen, more);
	if (err != VAD_OK) {
		ticket_put(c, k, index);
		return libvad_fail(c, err, NULL);
	}
	*t = handle_of(k, index);
	return VAD_OK;
}

/* With c->lock held: VAD_OK if the connection is up (reconnected first if it dropped and
 * may be resumed, as a blocking call would); else the error, recorded, c->lock released. */
static int connection_up_locked(vad_client *c)
{
	for (;;) {
		int err = c->dead_err;
		if (err == VAD_OK)
			return VAD_OK;
		uint64_t gen = c->conn_gen;
		bool may = libvad_may_reconnect(c, err);
		pthread_mutex_unlock(&c->lock);
		if (!may)
			return libvad_fail(c, err, libvad_dead_message(c));
		err = libvad_reconnect(c, gen);
		if (err != VAD_OK)
			return err;
		pthread_mutex_lock(&c->lock);
	}
}

/* Every alloc submit: n ranges of sizes in arena. */
static int alloc_submit(vad_client *c, const char *fn, const char *arena, size_t n,
			const size_t *sizes, size_t align, unsigned flags, vad_ticket *t)
{
	const char *name;
	if (!t)
		return libvad_failf(c, VAD_EINVAL, "%s: t is NULL", fn);
	int err =
	    libvad_alloc_check(c, arena, n, sizes, align, flags, VAD_ALLOC_FLAGS | VAD_MORE, &name);
	if (err != VAD_OK)
		return err;
	if (n > VAD_TICKETS_MAX)
		return libvad_failf(c, VAD_EQUOTA,
				    "%s: %zu ranges in one ticket, more than VAD_TICKETS_MAX (%u) "
				    "in flight",
				    fn, n, (unsigned)VAD_TICKETS_MAX);
	const char *wire_arena = libvad_arena_arg(arena);
	size_t name_len = strlen(name);
	if (name_len > LIBVAD_FAST_ARENA_MAX || strlen(wire_arena) > LIBVAD_FAST_ARENA_MAX)
		return libvad_failf(c, VAD_EINVAL, "%s: arena names are at most %u bytes here", fn,
				    LIBVAD_FAST_ARENA_MAX);
	/* Mapped now, so that the reply needs no round trip of its own in vad_wait. */
	struct libvad_arena *a;
	err = libvad_arena_get(c, name, &a);
	if (err != VAD_OK)
		return err;
	/* A batch's lists (the reply's offsets and sizes, the sizes asked) in one block. */
	uint64_t *batch = NULL;
	if (n > 1 && !(batch = malloc(n * (2 * sizeof(uint64_t) + sizeof(size_t)))))
		return libvad_fail(c, VAD_ENOMEM, NULL);

	uint8_t stackbuf[ALLOC1_FRAME_MAX + 10 * 64];
	size_t cap = ALLOC1_FRAME_MAX + 10 * n;
	uint8_t *frame = cap <= sizeof(stackbuf) ? stackbuf : malloc(cap);
	uint64_t id = libvad_next_id(c);
	size_t flen =
	    frame ? libvad_fast_alloc_frame(frame, cap, id, wire_arena, align, n, sizes, 0) : 0;
	if (!flen) {
		if (frame != stackbuf)
			free(frame);
		free(batch);
		return frame ? libvad_failf(c, VAD_EINVAL, "%s: the request does not encode", fn)
			     : libvad_fail(c, VAD_ENOMEM, NULL);
	}
	pthread_mutex_lock(&c->lock);
	uint32_t index;
	struct libvad_ticket *k = NULL;
	if ((err = connection_up_locked(c)) == VAD_OK) {
		k = ticket_get(c, n, &index, &err);
		if (!k)
			pthread_mutex_unlock(&c->lock);
	}
	if (!k) {
		if (frame != stackbuf)
			free(frame);
		free(batch);
		if (err == VAD_EQUOTA)
			return libvad_failf(c, VAD_EQUOTA,
					    "%s: %u ranges are in flight on this client "
					    "(VAD_TICKETS_MAX): vad_wait for some first",
					    fn, (unsigned)c->tickets_out);
		return err == VAD_ENOMEM ? libvad_fail(c, err, NULL) : err;
	}
	k->kind = LIBVAD_TICKET_ALLOC;
	k->p.id = id;
	k->default_arena = wire_arena[0] == '\0';
	k->batch = batch;
	uint64_t *lists = batch ? batch : k->lists;
	k->sizes = batch ? (size_t *)(batch + 2 * n) : &k->size;
	memcpy(k->sizes, sizes, n * sizeof(*sizes));
	k->fast = (struct libvad_fast_reply){.offsets = lists, .sizes = lists + n, .cap = n};
	memcpy(k->arena, name, name_len + 1);
	k->align = align;
	k->flags = flags & VAD_ALLOC_FLAGS;
	err = submit_locked(c, k, index, frame, flen, flags & VAD_MORE, t);
	pthread_mutex_unlock(&c->lock);
	if (frame != stackbuf)
		free(frame);
	return err;
}

int vad_alloc_submit(vad_client *c, const char *arena, size_t size, size_t align, unsigned flags,
		     vad_ticket *t)
{
	return alloc_submit(c, "vad_alloc_submit", arena, 1, &size, align, flags, t);
}

int vad_alloc_batch_submit(vad_client *c, const char *arena, size_t n, const size_t *sizes,
			   size_t align, unsigned flags, vad_ticket *t)
{
	return alloc_submit(c, "vad_alloc_batch_submit", arena, n, sizes, align, flags, t);
}

int vad_free_submit(vad_client *c, void *ptr, unsigned flags, vad_ticket *t)
{
	if (!c || !t)
		return libvad_fail(c, VAD_EINVAL, "vad_free_submit: client or t is NULL");
	if (flags & ~VAD_MORE)
		return libvad_failf(c, VAD_EINVAL,
				    "vad_free_submit: unknown flags 0x%x (known: VAD_MORE)",
				    flags & ~VAD_MORE);
	struct libvad_arena *a = libvad_arena_find(c, ptr);
	if (!a)
		return libvad_fail(c, VAD_ENOTHELD, "the pointer is not inside any mapped arena");
	if (strlen(a->name) > LIBVAD_FAST_ARENA_MAX)
		return libvad_failf(c, VAD_EINVAL,
				    "vad_free_submit: arena names are at most %u bytes here",
				    LIBVAD_FAST_ARENA_MAX);
	uint64_t off = (uint64_t)((uint8_t *)ptr - a->base);
	uint8_t frame[FREE1_FRAME_MAX];
	uint64_t id = libvad_next_id(c);
	size_t flen = libvad_fast_free_frame(frame, sizeof(frame), id, a->name, 1, &off);
	if (!flen)
		return libvad_fail(c, VAD_EINVAL, "vad_free_submit: the request does not encode");
	pthread_mutex_lock(&c->lock);
	int err = connection_up_locked(c);
	if (err != VAD_OK)
		return err;
	uint32_t index;
	struct libvad_ticket *k = ticket_get(c, 1, &index, &err);
	if (!k) {
		pthread_mutex_unlock(&c->lock);
		if (err == VAD_EQUOTA)
			return libvad_failf(c, VAD_EQUOTA,
					    "vad_free_submit: %u ranges are in flight on this "
					    "client (VAD_TICKETS_MAX): vad_wait for some first",
					    (unsigned)VAD_TICKETS_MAX);
		return libvad_fail(c, err, NULL);
	}
	k->kind = LIBVAD_TICKET_FREE;
	k->p.id = id;
	k->fast = (struct libvad_fast_reply){.cap = 0};
	k->lists[0] = off;
	k->owner = a;
	/* Its record goes before the request does (see free_offsets in ranges.c). */
	libvad_held_take_many(c, a, 1, &off, &k->taken);
	err = submit_locked(c, k, index, frame, flen, flags & VAD_MORE, t);
	if (err != VAD_OK && k->taken.refs > 0)
		libvad_held_add(c, a, k->taken.offset, k->taken.size);
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* One Free of a batch free: n offsets of arena a from first in the grouped list, its
 * frame at frame_off in the frames' buffer. */
struct free_part {
	struct libvad_arena *a;
	size_t first, n;
	size_t frame_off, flen;
	uint64_t id;
	uint32_t index; /* its ticket */
};

/* The Frees of a batch free (c->lock held, the connection up): a ticket each, chained from
 * the first, all or none. VAD_OK, or VAD_EQUOTA / VAD_ENOMEM with nothing taken. */
static int take_parts_locked(vad_client *c, size_t n, struct free_part *parts, size_t nparts,
			     const uint64_t *offsets)
{
	if (n > VAD_TICKETS_MAX - c->tickets_out)
		return VAD_EQUOTA;
	int err = VAD_OK;
	size_t got = 0;
	for (; got < nparts; got++) {
		struct free_part *fp = &parts[got];
		struct libvad_ticket *k = ticket_get(c, fp->n, &fp->index, &err);
		if (!k)
			break;
		k->kind = LIBVAD_TICKET_FREE;
		k->batch = NULL;
		if (fp->n > 1 &&
		    !(k->batch = malloc(fp->n * (sizeof(uint64_t) + sizeof(struct libvad_held))))) {
			err = VAD_ENOMEM;
			ticket_put(c, k, fp->index);
			break;
		}
		k->p.id = fp->id;
		k->fast = (struct libvad_fast_reply){.cap = 0};
		k->owner = fp->a;
		k->part = got > 0;
		k->next_part = 0;
		memcpy(free_offsets_of(k), offsets + fp->first, fp->n * sizeof(*offsets));
		if (got > 0)
			slot_at(c, parts[got - 1].index)->next_part = fp->index + 1;
	}
	if (got == nparts)
		return VAD_OK;
	while (got-- > 0)
		ticket_put(c, slot_at(c, parts[got].index), parts[got].index);
	return err;
}

/* Send the Frees of a batch free whose tickets are taken (c->lock held): their records
 * dropped first, as for vad_free_submit. VAD_OK once the first is in flight (a later one
 * that could not be queued fails alone, with VAD_ENOMEM, its records back), or the error
 * with nothing sent and the tickets given back. */
static int send_parts_locked(vad_client *c, struct free_part *parts, size_t nparts,
			     const uint8_t *frames, bool more)
{
	for (size_t i = 0; i < nparts; i++) {
		struct libvad_ticket *k = slot_at(c, parts[i].index);
		libvad_held_take_many(c, k->owner, k->n, free_offsets_of(k), free_taken_of(k));
	}
	for (size_t i = 0; i < nparts; i++) {
		struct libvad_ticket *k = slot_at(c, parts[i].index);
		int err = send_request_locked(c, k, frames + parts[i].frame_off, parts[i].flen,
					      more || i + 1 < nparts);
		if (err == VAD_OK)
			continue;
		if (i == 0) {
			for (size_t j = 0; j < nparts; j++) {
				struct libvad_ticket *q = slot_at(c, parts[j].index);
				const struct libvad_held *taken = free_taken_of(q);
				for (size_t r = 0; r < q->n; r++)
					if (taken[r].refs > 0)
						libvad_held_add(c, q->owner, taken[r].offset,
								taken[r].size);
				ticket_put(c, q, parts[j].index);
			}
			return err;
		}
		for (size_t j = i; j < nparts; j++) {
			/* Answered here: vad_wait puts its records back and reports it. */
			struct libvad_ticket *q = slot_at(c, parts[j].index);
			q->p = (struct libvad_pending){.id = q->p.id, .fd = -1, .fast = &q->fast};
			q->p.err = err;
			__atomic_store_n(&q->p.state, LIBVAD_DONE, __ATOMIC_RELEASE);
		}
		break;
	}
	return VAD_OK;
}

int vad_free_batch_submit(vad_client *c, size_t n, void *const *ptrs, unsigned flags, vad_ticket *t)
{
	static const char fn[] = "vad_free_batch_submit";
	if (!c || !ptrs || !t)
		return libvad_failf(c, VAD_EINVAL, "%s: client, ptrs or t is NULL", fn);
	if (flags & ~VAD_MORE)
		return libvad_failf(c, VAD_EINVAL, "%s: unknown flags 0x%x (known: VAD_MORE)", fn,
				    flags & ~VAD_MORE);
	if (n == 0)
		return libvad_failf(c, VAD_EINVAL, "%s: a ticket of no range (n is 0)", fn);
	if (n > VAD_TICKETS_MAX)
		return libvad_failf(c, VAD_EQUOTA,
				    "%s: %zu ranges in one ticket, more than VAD_TICKETS_MAX (%u) "
				    "in flight",
				    fn, n, (unsigned)VAD_TICKETS_MAX);
	/* The lists in one block: each pointer's arena, whether it is grouped yet, the
	 * offsets grouped per arena, the Frees. */
	size_t block = n * (sizeof(struct libvad_arena *) + sizeof(uint64_t) +
			    sizeof(struct free_part) + sizeof(bool));
	uint8_t *mem = malloc(block);
	if (!mem)
		return libvad_fail(c, VAD_ENOMEM, NULL);
	struct libvad_arena **owner = (struct libvad_arena **)mem;
	uint64_t *offsets = (uint64_t *)(owner + n);
	struct free_part *parts = (struct free_part *)(offsets + n);
	bool *grouped = (bool *)(parts + n);
	uint8_t *frames = NULL;
	int err = VAD_OK;
	/* Every pointer is checked before anything is sent, as vad_free_batch does. */
	for (size_t i = 0; i < n && err == VAD_OK; i++) {
		grouped[i] = false;
		owner[i] = libvad_arena_find(c, ptrs[i]);
		if (!owner[i])
			err = libvad_failf(
			    c, VAD_ENOTHELD,
			    "pointer %zu of the batch is not inside any mapped arena", i);
		else if (strlen(owner[i]->name) > LIBVAD_FAST_ARENA_MAX)
			err =
			    libvad_failf(c, VAD_EINVAL, "%s: arena names are at most %u bytes here",
					 fn, LIBVAD_FAST_ARENA_MAX);
	}
	if (err != VAD_OK)
		goto out;
	/* The Frees vad_free_batch sends: one per arena in order of first appearance, split so
	 * that no frame exceeds the smallest max_frame any daemon accepts. */
	size_t nparts = 0, k = 0, bytes = 0;
	for (size_t i = 0; i < n; i++) {
		if (grouped[i])
			continue;
		struct libvad_arena *a = owner[i];
		size_t start = k;
		for (size_t j = i; j < n; j++)
			if (owner[j] == a) {
				offsets[k++] = (uint64_t)((uint8_t *)ptrs[j] - a->base);
				grouped[j] = true;
			}
		size_t name_len = strlen(a->name);
		while (start < k) {
			size_t m = libvad_free_chunk(name_len, k - start, offsets + start);
			parts[nparts] =
			    (struct free_part){.a = a, .first = start, .n = m, .frame_off = bytes};
			bytes += LIBVAD_FREE_FRAME_MAX(name_len, m);
			nparts++;
			start += m;
		}
	}
	if (!(frames = malloc(bytes))) {
		err = libvad_fail(c, VAD_ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < nparts; i++) {
		struct free_part *fp = &parts[i];
		fp->id = libvad_next_id(c);
		fp->flen = libvad_fast_free_frame(frames + fp->frame_off,
						  LIBVAD_FREE_FRAME_MAX(strlen(fp->a->name), fp->n),
						  fp->id, fp->a->name, fp->n, offsets + fp->first);
		if (!fp->flen) {
			err = libvad_failf(c, VAD_EINVAL, "%s: the request does not encode", fn);
			goto out;
		}
	}
	pthread_mutex_lock(&c->lock);
	if ((err = connection_up_locked(c)) != VAD_OK)
		goto out; /* c->lock released */
	err = take_parts_locked(c, n, parts, nparts, offsets);
	if (err == VAD_OK)
		err = send_parts_locked(c, parts, nparts, frames, flags & VAD_MORE);
	if (err == VAD_OK)
		*t = handle_of(slot_at(c, parts[0].index), parts[0].index);
	unsigned out_now = c->tickets_out;
	pthread_mutex_unlock(&c->lock);
	if (err == VAD_EQUOTA)
		err = libvad_failf(c, VAD_EQUOTA,
				   "%s: %u ranges are in flight on this client (VAD_TICKETS_MAX): "
				   "vad_wait for some first",
				   fn, out_now);
	else if (err != VAD_OK)
		err = libvad_fail(c, err, NULL);
out:
	free(frames);
	free(mem);
	return err;
}

/* Send ticket k's request again, with its id, on the connection that replaced the one its
 * frame never left on: the daemon never saw it. c->lock held, the connection up. */
static int resend_locked(vad_client *c, struct libvad_ticket *k)
{
	uint8_t stackbuf[ALLOC1_FRAME_MAX + 10 * 64];
	size_t cap = k->kind == LIBVAD_TICKET_ALLOC
			 ? ALLOC1_FRAME_MAX + 10 * k->n
			 : LIBVAD_FREE_FRAME_MAX(strlen(k->owner->name), k->n);
	uint8_t *frame = cap <= sizeof(stackbuf) ? stackbuf : malloc(cap);
	if (!frame)
		return VAD_ENOMEM;
	size_t flen;
	if (k->kind == LIBVAD_TICKET_ALLOC) {
		uint64_t *lists = k->batch ? k->batch : k->lists;
		k->fast = (struct libvad_fast_reply){
		    .offsets = lists, .sizes = lists + k->n, .cap = k->n};
		flen =
		    libvad_fast_alloc_frame(frame, cap, k->p.id, k->default_arena ? "" : k->arena,
					    k->align, k->n, k->sizes, 0);
	} else {
		k->fast = (struct libvad_fast_reply){.cap = 0};
		flen = libvad_fast_free_frame(frame, cap, k->p.id, k->owner->name, k->n,
					      free_offsets_of(k));
	}
	/* It encoded at submit, from the same values. */
	int err = flen ? send_request_locked(c, k, frame, flen, false) : VAD_EINVAL;
	if (frame != stackbuf)
		free(frame);
	return err;
}

/* Wait for claimed ticket k's reply (c->lock held; returns without it): VAD_OK with the
 * reply in k->p, or the error. A dropped connection reconnects as a blocking call does: a
 * request that was sent reports VAD_EINTERRUPTED (perhaps done, the reply lost: the caller
 * decides), one whose frame never left is sent again once the session is resumed. */
static int ticket_outcome(vad_client *c, struct libvad_ticket *k)
{
	for (;;) {
		libvad_wait_reply(c, &k->p); /* returns without c->lock */
		int err = k->p.err;
		if (err != VAD_EGONE)
			return err;
		pthread_mutex_lock(&c->lock);
		bool may = libvad_may_reconnect(c, err);
		pthread_mutex_unlock(&c->lock);
		if (!may)
			return err;
		/* Replacing the connection waits for its sender: by then the marks are set. */
		err = libvad_reconnect(c, k->conn_gen);
		if (err != VAD_OK)
			return err;
		pthread_mutex_lock(&c->lock);
		if (!k->p.unsent) {
			pthread_mutex_unlock(&c->lock);
			return VAD_EINTERRUPTED;
		}
		if ((err = connection_up_locked(c)) != VAD_OK)
			return err; /* c->lock released */
		if ((err = resend_locked(c, k)) != VAD_OK) {
			pthread_mutex_unlock(&c->lock);
			return libvad_fail(c, err, "vad_wait: the request could not be sent again");
		}
	}
}

/* The result of claimed ticket k whose wait ended with err (ticket_outcome): what a
 * blocking call would return. Without c->lock. */
static int ticket_result(vad_client *c, struct libvad_ticket *k, int err, void **out)
{
	Vad__Response *r = k->p.resp;
	if (k->p.fd >= 0)
		close(
		    k->p.fd); /* never asked for: the reader gives none to a call that is no map */
	if (err != VAD_ERESUME && __atomic_load_n(&c->lost_gen, __ATOMIC_ACQUIRE) > k->conn_gen) {
		/* Answered (or failed) for a session lost since: its ranges went with it, and
		 * must not become this client's in the new session's mappings. */
		err = libvad_failf(c, VAD_ERESUME,
				   "vad_wait: the daemon at %s restarted without this client's "
				   "session after this ticket's request: every range this client "
				   "held is lost",
				   c->socket_path);
	}
	if (err != VAD_OK) {
		libvad_reply_free(r, &k->fast);
		r = NULL;
	}
	if (k->kind == LIBVAD_TICKET_FREE) {
		/* The records go back unless the daemon freed the ranges, but not into an arena
		 * of a lost session (retired: its records went with it). */
		struct libvad_arena *a = err == VAD_ERESUME ? NULL : k->owner;
		return libvad_free_finish(c, a, k->n, free_taken_of(k), err, r, &k->fast);
	}
	if (err != VAD_OK)
		return libvad_fail_unanswered(c, err);
	err = libvad_response_error(c, r, VAD__RESPONSE__RESULT_ALLOC);
	if (err == VAD_OK)
		err = libvad_take_alloc(c, r->alloc, k->arena, k->n, k->sizes, k->align,
					k->conn_gen, out);
	libvad_reply_free(r, &k->fast);
	if (err == VAD_OK && (k->flags & VAD_POPULATE))
		err = libvad_populate(c, k->n, k->sizes, out);
	return err;
}

/* vad_wait of a batch free of several Frees, k the first (claimed), c->lock held: each in
 * order, the first failure the result (with its sentence), the records of every range not
 * freed back. Returns without c->lock. */
static int wait_parts(vad_client *c, struct libvad_ticket *k, uint32_t index)
{
	int first = VAD_OK;
	char why[256] = "";
	for (struct libvad_ticket *part = k; part; part = next_part(c, part)) {
		int err = ticket_outcome(c, part); /* returns without c->lock */
		err = ticket_result(c, part, err, NULL);
		if (err != VAD_OK && first == VAD_OK) {
			first = err;
			snprintf(why, sizeof(why), "%s", vad_last_error(c));
		}
		pthread_mutex_lock(&c->lock);
	}
	for (uint32_t i = index + 1; i != 0;) {
		struct libvad_ticket *part = slot_at(c, i - 1);
		uint32_t next = part->next_part;
		ticket_put(c, part, i - 1);
		i = next;
	}
	pthread_mutex_unlock(&c->lock);
	return first == VAD_OK ? VAD_OK : libvad_fail(c, first, why);
}

int vad_wait(vad_client *c, vad_ticket t, void **out)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_wait: client is NULL");
	pthread_mutex_lock(&c->lock);
	uint32_t index;
	struct libvad_ticket *k = ticket_find(c, t, "vad_wait", &index);
	if (!k) {
		pthread_mutex_unlock(&c->lock);
		return VAD_EINVAL;
	}
	if (k->kind == LIBVAD_TICKET_ALLOC && !out) {
		pthread_mutex_unlock(&c->lock);
		return libvad_fail(c, VAD_EINVAL,
				   "vad_wait: an alloc ticket needs out (its range would be lost)");
	}
	k->claimed = true;
	libvad_send_queued_locked(c);
	if (k->next_part)
		return wait_parts(c, k, index);
	int err = ticket_outcome(c, k); /* returns without c->lock */
	err = ticket_result(c, k, err, out);
	pthread_mutex_lock(&c->lock);
	ticket_put(c, k, index);
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* With c->lock held: send what is queued and, if nobody reads, take what waits in the
 * socket. Returns without c->lock. */
static void progress_locked(vad_client *c)
{
	libvad_send_queued_locked(c);
	if (c->reading || c->dead_err)
		pthread_mutex_unlock(&c->lock);
	else
		libvad_read_round(c, NULL, true); /* returns without c->lock */
}

int vad_test(vad_client *c, vad_ticket t)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_test: client is NULL");
	pthread_mutex_lock(&c->lock);
	uint32_t index;
	struct libvad_ticket *k = ticket_find(c, t, "vad_test", &index);
	int done = k ? 1 : VAD_EINVAL;
	for (; k && done; k = next_part(c, k))
		done = libvad_pending_done(&k->p);
	pthread_mutex_unlock(&c->lock);
	return done;
}

bool libvad_wait_fd(int sock, short events, int timeout_ms)
{
	struct pollfd pfd = {.fd = sock, .events = events};
	int rc;
	do
		rc = poll(&pfd, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	return rc != 0; /* an error: let the receive or send say what it is */
}

int libvad_set_nonblocking(int sock)
{
	int fl = fcntl(sock, F_GETFL);
	return fl < 0 ? -1 : fcntl(sock, F_SETFL, fl | O_NONBLOCK);
}

int vad_fd(vad_client *c)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_fd: client is NULL");
	pthread_mutex_lock(&c->lock);
	int fd = c->sock;
	/* An event loop polls the socket: vad_progress then receives without asking first
	 * (one syscall fewer per round), and libvad's own waits poll on EAGAIN. */
	if (!c->nonblocking && libvad_set_nonblocking(fd) == 0)
		__atomic_store_n(&c->nonblocking, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->lock);
	return fd;
}

int vad_progress(vad_client *c)
{
	if (!c)
		return libvad_fail(c, VAD_EINVAL, "vad_progress: client is NULL");
	pthread_mutex_lock(&c->lock);
	progress_locked(c);
	/* The first error sticks (libvad_fail_all_locked): a racy read shows it or VAD_OK. */
	int err = __atomic_load_n(&c->dead_err, __ATOMIC_RELAXED);
	return err == VAD_OK ? VAD_OK : libvad_fail(c, err, libvad_dead_message(c));
}

void libvad_tickets_destroy(vad_client *c)
{
	for (size_t i = 0; i < LIBVAD_TICKET_CHUNKS; i++) {
		struct libvad_ticket *k = c->ticket_chunks[i];
		for (size_t j = 0; k && j < LIBVAD_TICKET_CHUNK; j++)
			if (k[j].kind != LIBVAD_TICKET_UNUSED && libvad_pending_done(&k[j].p)) {
				/* Answered, never waited for: its reply and fd. */
				libvad_reply_free(k[j].p.resp, &k[j].fast);
				if (k[j].p.fd >= 0)
					close(k[j].p.fd);
			}
		for (size_t j = 0; k && j < LIBVAD_TICKET_CHUNK; j++)
			free(k[j].batch);
		free(k);
		c->ticket_chunks[i] = NULL;
	}
	c->tickets_made = c->tickets_free = c->tickets_out = 0;
}
