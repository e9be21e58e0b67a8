/* waitq.c - alloc requests waiting for room, first come first served per arena; see waitq.h.
 *
 * Who touches a waiter: its queue's lock guards its place in the queue; everything else
 * (its timer, its session, its reply) belongs to its session's worker, the only thread that
 * queues it, grants it, times it out or cancels it. Other threads only read a queue's head
 * under the lock to kick that head's worker. Since each worker removes only its own waiters,
 * the head a worker tries stays the head while it tries without the lock (the others append
 * at the tail or remove their own, which are behind it), so no lock is held across an
 * allocation. Lock order: a queue's lock, then a worker's (worker_kick_waits).
 */
#include "waitq.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "handler.h"
#include "latency.h"
#include "session.h"
#include "worker.h"

struct vad_waitq *vad_waitqs_new(size_t n)
{
	struct vad_waitq *qs = calloc(n ? n : 1, sizeof(*qs));
	if (!qs)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_init(&qs[i].lock, NULL);
		TAILQ_INIT(&qs[i].waiters);
	}
	return qs;
}

void vad_waitqs_free(struct vad_waitq *qs, size_t n)
{
	if (!qs)
		return;
	for (size_t i = 0; i < n; i++)
		pthread_mutex_destroy(&qs[i].lock);
	free(qs);
}

/* Kick the worker of q's head, if there is one. Called with q->lock held. */
static void kick_head(struct vad_waitq *q)
{
	struct vad_waiter *h = TAILQ_FIRST(&q->waiters);
	if (h)
		worker_kick_waits(h->w);
}

void vad_waitq_buried(void *ctx, unsigned arena)
{
	struct vad_service *svc = ctx;
	struct vad_waitq *q = &svc->waitqs[arena];
	if (!__atomic_load_n(&q->n, __ATOMIC_ACQUIRE))
		return; /* the usual free: one load */
	pthread_mutex_lock(&q->lock);
	kick_head(q);
	pthread_mutex_unlock(&q->lock);
}

/* Take wt out of its queue; the next head's worker is kicked when wt was the head, since the
 * next one may fit where wt did not. */
static void unqueue(struct vad_waiter *wt)
{
	struct vad_waitq *q = wt->q;
	pthread_mutex_lock(&q->lock);
	bool head = TAILQ_FIRST(&q->waiters) == wt;
	TAILQ_REMOVE(&q->waiters, wt, link);
	__atomic_store_n(&q->n, q->n - 1, __ATOMIC_RELEASE);
	if (head)
		kick_head(q);
	pthread_mutex_unlock(&q->lock);
}

/* Forget wt (out of its queue already): its timer, its session's count, the daemon's. */
static void waiter_free(struct vad_waiter *wt)
{
	struct vad_session *s = wt->s;
	LIST_REMOVE(wt, session_link);
	s->n_waiting--;
	__atomic_sub_fetch(&s->svc->n_waiters, 1, __ATOMIC_RELAXED);
	if (wt->timer)
		event_free(wt->timer);
	free(wt);
}

/* Send r as wt's reply (on wt's worker) and forget wt. */
static void answer(struct vad_waiter *wt, struct vad_reply *r)
{
	struct vad_session *s = wt->s;
	vad_session_reply(s, r);
	waiter_free(wt);
}

/* Arm wt's timer for what is left until its deadline (at least 1 us). */
static int arm_timer(struct vad_waiter *wt, uint64_t now)
{
	uint64_t left_us = wt->deadline_ns > now ? (wt->deadline_ns - now + 999) / 1000 : 1;
	struct timeval tv = {.tv_sec = (time_t)(left_us / 1000000u),
			     .tv_usec = (suseconds_t)(left_us % 1000000u)};
	return evtimer_add(wt->timer, &tv);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct vad_waiter *wt = arg;
	/* libevent measures a timer from its loop's cached clock, which a busy worker may have
	 * read milliseconds before the request came: a timer can fire before the wait asked
	 * for has passed. Then it waits out the rest. */
	uint64_t now = vad_now_ns();
	if (now < wt->deadline_ns && arm_timer(wt, now) == 0)
		return;
	unqueue(wt);
	__atomic_add_fetch(&wt->q->timeouts, 1, __ATOMIC_RELAXED);
	struct vad_reply r;
	vad_reply_init(&r, wt->id);
	uint64_t waited_ms = (vad_now_ns() - wt->since_ns) / 1000000u;
	unsigned behind = 0;
	pthread_mutex_lock(&wt->q->lock);
	behind = wt->q->n;
	pthread_mutex_unlock(&wt->q->lock);
	vad_reply_error(&r, VAD__ERROR__ETIMEDOUT,
			"no room for %zu range%s totalling %" PRIu64
			" bytes was freed in arena '%s' within the %" PRIu64
			" ms this allocation waited (%u other allocations are still waiting "
			"there); free ranges, wait longer, or ask for less",
			wt->n, wt->n == 1 ? "" : "s", wt->total, wt->arena, waited_ms, behind);
	answer(wt, &r);
}

int vad_waitq_push(struct vad_session *s, unsigned ai, uint64_t id, const char *reply_name,
		   size_t n, const uint64_t *sizes, uint64_t align, uint64_t total,
		   uint32_t wait_ms)
{
	size_t name_len = strlen(reply_name);
	struct vad_waiter *wt = malloc(sizeof(*wt) + n * sizeof(uint64_t) + name_len + 1);
	if (!wt)
		return -1;
	wt->q = &s->svc->waitqs[ai];
	wt->s = s;
	wt->w = s->worker;
	wt->ai = ai;
	wt->id = id;
	wt->n = n;
	wt->sizes = (uint64_t *)(wt + 1);
	memcpy(wt->sizes, sizes, n * sizeof(uint64_t));
	char *name = (char *)(wt->sizes + n);
	memcpy(name, reply_name, name_len + 1);
	wt->arena = name;
	wt->align = align;
	wt->total = total;
	wt->since_ns = vad_now_ns();
	wt->deadline_ns = wt->since_ns + (uint64_t)wait_ms * 1000000u;
	wt->timer = evtimer_new(worker_base(s->worker), on_timeout, wt);
	if (!wt->timer || arm_timer(wt, wt->since_ns) < 0) {
		if (wt->timer)
			event_free(wt->timer);
		free(wt);
		return -1;
	}
	LIST_INSERT_HEAD(&s->waiters, wt, session_link);
	s->n_waiting++; /* svc->n_waiters was taken by the caller */
	struct vad_waitq *q = wt->q;
	__atomic_add_fetch(&q->waits, 1, __ATOMIC_RELAXED); /* before it can end */
	pthread_mutex_lock(&q->lock);
	TAILQ_INSERT_TAIL(&q->waiters, wt, link);
	__atomic_store_n(&q->n, q->n + 1, __ATOMIC_RELEASE);
	/* The head tries once more: a free between its failed try and now saw no waiter. */
	if (TAILQ_FIRST(&q->waiters) == wt)
		worker_kick_waits(wt->w);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

/* Try q's head while it is w's; returns with nothing of q's held. */
static void retry_queue(struct vad_waitq *q, struct worker *w)
{
	for (;;) {
		pthread_mutex_lock(&q->lock);
		struct vad_waiter *wt = TAILQ_FIRST(&q->waiters);
		bool mine = wt && wt->w == w; /* another's head may go as soon as we unlock */
		pthread_mutex_unlock(&q->lock);
		if (!mine)
			return; /* the head's own worker was kicked when it became the head */
		struct vad_reply r;
		vad_reply_init(&r, wt->id);
		if (!vad_alloc_retry(wt->s, wt, &r)) {
			vad_session_scratch_reset(wt->s);
			return; /* still no room: the next free kicks us again */
		}
		__atomic_add_fetch(r.resp.error == VAD__ERROR__OK ? &q->grants : &q->refusals, 1,
				   __ATOMIC_RELAXED);
		unqueue(wt); /* kicks the next head's worker if it is another's */
		answer(wt, &r);
	}
}

void vad_waitq_retry(struct vad_service *svc, struct worker *w)
{
	/* Stopping politely, no waiter is granted anything: their sessions are closing. */
	if (vad_service_serve_begin(svc))
		for (size_t i = 0; i < svc->n_slots; i++)
			if (__atomic_load_n(&svc->waitqs[i].n, __ATOMIC_ACQUIRE))
				retry_queue(&svc->waitqs[i], w);
	vad_service_serve_end(svc);
}

void vad_waitq_cancel_session(struct vad_session *s)
{
	while (!LIST_EMPTY(&s->waiters)) {
		struct vad_waiter *wt = LIST_FIRST(&s->waiters);
		unqueue(wt);
		__atomic_add_fetch(&wt->q->cancels, 1, __ATOMIC_RELAXED);
		waiter_free(wt);
	}
}

void vad_waitq_fill_stats(Vad__ArenaStats *o, struct vad_service *svc, unsigned ai)
{
	struct vad_waitq *q = &svc->waitqs[ai];
	pthread_mutex_lock(&q->lock);
	o->waiters = q->n;
	struct vad_waiter *h = TAILQ_FIRST(&q->waiters);
	o->oldest_wait_ms = h ? (vad_now_ns() - h->since_ns) / 1000000u : 0;
	pthread_mutex_unlock(&q->lock);
	o->waits = __atomic_load_n(&q->waits, __ATOMIC_RELAXED);
	o->wait_grants = __atomic_load_n(&q->grants, __ATOMIC_RELAXED);
	o->wait_timeouts = __atomic_load_n(&q->timeouts, __ATOMIC_RELAXED);
	o->wait_cancels = __atomic_load_n(&q->cancels, __ATOMIC_RELAXED);
	o->wait_refusals = __atomic_load_n(&q->refusals, __ATOMIC_RELAXED);
}
