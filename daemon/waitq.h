/*
 * waitq.h - alloc requests waiting for room (Alloc.wait_ms): one first-come-first-served queue
 * per arena slot. Only the head of a queue is ever tried, so a later request, however small,
 * never overtakes an earlier one (strict FCFS, head-of-line blocking included). A waiter
 * belongs to its session's worker: its timer is on that worker's event base, and its retries
 * and its reply run there. A free on any thread (registry.c's buried hook) only kicks the
 * worker of the queue's head (worker_kick_waits); the retry's allocation, which finds no
 * room, drains the allocator's lazy lists and pools before it gives up, so freed memory is
 * usable at once. A waiting request holds no quota: the quota is checked when it is queued
 * (a request over quota never waits) and again when it is granted.
 */
#ifndef VAD_WAITQ_H
#define VAD_WAITQ_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct event;
struct vad_service;
struct vad_session;
struct worker;

struct vad_waiter {
	struct vad_waitq *q;
	struct vad_session *s;
	struct worker *w;    /* s's worker: the timer, retries and the reply run there */
	struct event *timer; /* the wait's deadline, on w's base */
	unsigned ai;	     /* the arena slot */
	uint64_t id;	     /* the request's id, which the reply echoes */
	const char *arena;   /* the name the reply gives the arena (stored after sizes) */
	size_t n;	     /* ranges asked for */
	uint64_t *sizes;     /* [n], rounded to the arena's quantum */
	uint64_t align, total;
	uint64_t since_ns;		     /* vad_now_ns() when it was queued */
	uint64_t deadline_ns;		     /* since_ns + the wait it asked for */
	TAILQ_ENTRY(vad_waiter) link;	     /* in q (q->lock) */
	LIST_ENTRY(vad_waiter) session_link; /* the session's waiters (its worker only) */
};

TAILQ_HEAD(vad_waiter_list, vad_waiter);

/* One arena slot's queue and its counters. */
struct vad_waitq {
	pthread_mutex_t lock;
	struct vad_waiter_list waiters; /* oldest first */
	unsigned n;			/* waiters queued (atomic: read without the lock) */
	uint64_t waits, grants, timeouts, cancels, refusals; /* atomic, since the start */
};

/* n zeroed queues (one per arena slot), or NULL when out of memory. */
struct vad_waitq *vad_waitqs_new(size_t n);

/* Free n queues (every session is gone, so they are empty). */
void vad_waitqs_free(struct vad_waitq *qs, size_t n);

/* The registry's buried hook (ctx: the service): kick the worker of arena's head waiter. */
void vad_waitq_buried(void *ctx, unsigned arena);

/* Queue session s's alloc request id for n ranges of sizes (rounded; copied) in slot ai,
 * replied under the arena name reply_name, for at most wait_ms; on s's worker thread.
 * 0, or -1 out of memory (nothing queued). The caller has checked the waiter limits and
 * counted it in svc->n_waiters (the waiter gives that back when it goes). */
int vad_waitq_push(struct vad_session *s, unsigned ai, uint64_t id, const char *reply_name,
		   size_t n, const uint64_t *sizes, uint64_t align, uint64_t total,
		   uint32_t wait_ms);

/* On worker w: try the head of every queue whose head is w's, in order, while each is
 * granted (or refused for good); called when w was kicked. */
void vad_waitq_retry(struct vad_service *svc, struct worker *w);

/* Take every waiter of session s out of its queue (s is going away), on s's worker. */
void vad_waitq_cancel_session(struct vad_session *s);

struct Vad__ArenaStats;

/* Slot ai's queue in a stats row: waiting now, the oldest's wait, the counters. */
void vad_waitq_fill_stats(struct Vad__ArenaStats *o, struct vad_service *svc, unsigned ai);

#endif
