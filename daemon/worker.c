/*
 * worker.c - the worker threads: each runs its own libevent base over the connections it owns
 * (the memcached model), one pass at a time with the pass's replies sent after it. The
 * listener queues accepted sockets to a worker (a mutex-protected queue plus event_active on
 * its notify event); the balancer's orders and the connections another worker hands over
 * come the same way, and are carried out between callbacks, so no connection is mid-request.
 */
#include "worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "conn.h"
#include "latency.h"
#include "log.h"
#include "gate.h"
#include "service.h"
#include "vaspace.h"
#include "units.h"
#include "waitq.h"

void worker_hand_over(struct conn *c, struct worker *to)
{
	pthread_mutex_lock(&to->lock);
	c->next = to->moved;
	to->moved = c;
	pthread_mutex_unlock(&to->lock);
	event_active(to->ev_notify, EV_READ, 0);
}

/* Hand up to count of our connections to workers first..first+span-1, round-robin. A closing
 * connection (lingering over its last replies) stays: it is about to go anyway. Runs in the
 * worker's own thread, between callbacks, so no connection is mid-request. */
static void worker_give(struct worker *w, unsigned count, unsigned first, unsigned span)
{
	unsigned moved = 0, next = 0;
	struct conn *c = w->conns;
	while (c && moved < count) {
		struct conn *after = c->next;
		if (!conn_movable(c)) {
			c = after;
			continue;
		}
		struct worker *to = &w->pool[first + next++ % span];
		if (to == w) {
			c = after;
			continue;
		}
		conn_detach(c);
		worker_hand_over(c, to);
		moved++;
		c = after;
	}
	if (moved)
		log_debug("worker %u handed %u connection%s to workers %u-%u", w->index, moved,
			  vad_plural(moved), first, first + span - 1);
}

/* Something for w (event_active from another thread): connections handed over, sockets
 * accepted for it, the balancer's order, or the stop. */
static void on_notify(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	pthread_mutex_lock(&w->lock);
	struct pending_conn *q = w->queue_head;
	w->queue_head = w->queue_tail = NULL;
	struct conn *moved = w->moved;
	w->moved = NULL;
	unsigned give_count = w->give_count, give_first = w->give_first, give_span = w->give_span;
	w->give_count = 0;
	bool stopping = w->stopping;
	pthread_mutex_unlock(&w->lock);

	while (moved) {
		struct conn *next = moved->next;
		conn_adopt(w, moved); /* when stopping, closed below with the others */
		moved = next;
	}

	while (q) {
		struct pending_conn *next = q->next;
		if (stopping) {
			vad_gate_refuse(q->fd, VAD__ERROR__EGONE, "the daemon is shutting down");
			vad_gate_release(w->gate, q->peer.uid);
		} else {
			conn_open(w, q);
		}
		vad_peer_free(&q->peer);
		free(q);
		q = next;
	}
	if (stopping) {
		while (w->conns)
			conn_close(w->conns, "the daemon is shutting down");
		event_base_loopbreak(w->base);
		return;
	}
	/* A kill wakes every worker: the one that owns the session closes it. */
	uint64_t kills = __atomic_load_n(&w->svc->kills, __ATOMIC_ACQUIRE);
	if (kills != w->kills_seen) {
		w->kills_seen = kills;
		conn_close_killed(w);
	}
	if (give_count && give_span)
		worker_give(w, give_count, give_first, give_span);
}

void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16]; /* what top -H and ps -L show (15 characters at most) */
	snprintf(name, sizeof(name), "vad-worker%u", w->index % 100000);
	pthread_setname_np(pthread_self(), name);
	__atomic_store_n(&w->tid, (int)gettid(), __ATOMIC_RELEASE);
	va_set_home_node(w->index);
	vad_latency_set_shard(w->index);
	/* One pass at a time, its replies sent after it (conn_flush_pass). */
	while (event_base_loop(w->base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY) >= 0) {
		conn_flush_pass(w);
		if (event_base_got_break(w->base))
			break;
	}
	return NULL;
}

void worker_push(struct worker *w, struct pending_conn *p)
{
	pthread_mutex_lock(&w->lock);
	if (w->queue_tail)
		w->queue_tail->next = p;
	else
		w->queue_head = p;
	w->queue_tail = p;
	pthread_mutex_unlock(&w->lock);
	event_active(w->ev_notify, EV_READ, 0);
}

void worker_order_give(struct worker *w, unsigned count, unsigned first, unsigned span)
{
	pthread_mutex_lock(&w->lock);
	w->give_count = count;
	w->give_first = first;
	w->give_span = span;
	pthread_mutex_unlock(&w->lock);
	event_active(w->ev_notify, EV_READ, 0);
}

void worker_kick_waits(struct worker *w)
{
	/* One event_active per run of kicks: many frees before the worker runs cost one retry. */
	if (!__atomic_exchange_n(&w->waits_kicked, 1, __ATOMIC_ACQ_REL))
		event_active(w->ev_waits, EV_READ, 0);
}

struct event_base *worker_base(struct worker *w)
{
	return w->base;
}

/* Kicked: retry the queue heads that are ours (a kick during the retry runs it again). */
static void on_waits(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	__atomic_store_n(&w->waits_kicked, 0, __ATOMIC_RELEASE);
	vad_waitq_retry(w->svc, w);
}

void worker_stop(struct worker *w)
{
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_mutex_unlock(&w->lock);
	event_active(w->ev_notify, EV_READ, 0);
}

int worker_init(struct worker *w, struct vad_gate *gate, struct worker *pool, unsigned index)
{
	w->gate = gate;
	w->pool = pool;
	w->index = index;
	w->schedstat_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	w->base = event_base_new();
	if (!w->base)
		return -1;
	w->ev_notify = event_new(w->base, -1, 0, on_notify, w);
	w->ev_waits = event_new(w->base, -1, 0, on_waits, w);
	return w->ev_notify && w->ev_waits ? 0 : -1;
}

void worker_close_all(struct worker *w)
{
	while (w->conns)
		conn_close(w->conns, "the daemon is shutting down");
	while (w->moved) {
		struct conn *c = w->moved;
		w->moved = c->next;
		conn_drop_detached(w->gate, c);
	}
}

void worker_fini(struct worker *w)
{
	worker_close_all(w);
	if (w->schedstat_fd >= 0)
		close(w->schedstat_fd);
	while (w->queue_head) {
		struct pending_conn *p = w->queue_head;
		w->queue_head = p->next;
		close(p->fd);
		vad_peer_free(&p->peer);
		free(p);
	}
	if (w->ev_notify)
		event_free(w->ev_notify);
	if (w->ev_waits)
		event_free(w->ev_waits);
	if (w->base)
		event_base_free(w->base);
	pthread_mutex_destroy(&w->lock);
}
