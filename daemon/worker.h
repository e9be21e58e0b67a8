/*
 * worker.h - a worker thread: its own libevent base serving the connections it owns, a queue
 * of accepted sockets the listener hands it, and the connections other workers hand over
 * when the balancer moves them (the balancer's orders arrive through the same lock).
 */
#ifndef VAD_WORKER_H
#define VAD_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "peer.h"

struct conn;
struct event;
struct event_base;
struct vad_gate;
struct vad_service;

/* An accepted, admitted socket on its way to a worker. */
struct pending_conn {
	int fd;
	uint64_t accepted_ns;
	struct vad_peer peer;
	struct pending_conn *next;
};

struct worker {
	struct vad_service *svc;
	struct vad_gate *gate; /* the listener's slots and notes */
	struct worker *pool;   /* every worker, this one among them (a hand-over's targets) */
	unsigned index;
	pthread_t thread;
	bool started;
	struct event_base *base;
	struct event *ev_notify;
	struct event *ev_waits; /* a free made room where one of our waiters heads a queue */
	int waits_kicked;	/* (atomic) ev_waits is active and its callback not yet run */
	pthread_mutex_t lock;	/* queue and stopping */
	struct pending_conn *queue_head, *queue_tail;
	bool stopping;
	struct conn *moved;		/* (lock) connections handed over by another worker */
	unsigned give_count;		/* (lock) the balancer's order (worker_order_give): hand */
	unsigned give_first, give_span; /* this many connections to workers first..first+span-1 */
	struct conn *conns;		/* worker thread only */
	LIST_HEAD(, conn) flush_list;	/* worker thread only: replies to send after this pass */
	unsigned n_conns;		/* written by the worker, read by the listener (atomic) */
	int tid;			/* (atomic) the thread's id, 0 until it runs */
	uint64_t kills_seen;		/* worker thread only: svc->kills when it last looked */
	int schedstat_fd;	  /* listener: /proc/self/task/TID/schedstat, -1 until opened */
	uint64_t busy_ns;	  /* listener: run + runnable-wait time at the last balance tick */
	uint64_t run_ns;	  /* listener: run time at the last balance tick */
	uint64_t reads, requests; /* (atomic) reads that brought requests, requests handled */
	uint64_t reads_seen, requests_seen; /* listener: both at the last balance tick */
};

/* Set up worker index of pool (its base and notify event) behind gate; the server sets svc
 * once the service exists, before the thread starts. -1 when out of memory (then worker_fini
 * still cleans up). */
int worker_init(struct worker *w, struct vad_gate *gate, struct worker *pool, unsigned index);

/* Close w's connections (and handed-over ones); its thread is not running. Done for every
 * worker before any is freed: a closing session's waiters kick other workers (waitq.h). */
void worker_close_all(struct worker *w);

/* Close whatever w still has (connections, handed-over ones, queued sockets) and free it;
 * its thread is not running. */
void worker_fini(struct worker *w);

/* The worker thread (pthread_create's start routine, arg the worker). */
void *worker_main(void *arg);

/* Queue an accepted socket to w (any thread); w serves it from its next notify. */
void worker_push(struct worker *w, struct pending_conn *p);

/* Hand a detached connection c over to worker to (from the thread of its old worker). */
void worker_hand_over(struct conn *c, struct worker *to);

/* The balancer's order (listener thread): w hands count of its connections to workers
 * first..first+span-1, round-robin, between its callbacks. */
void worker_order_give(struct worker *w, unsigned count, unsigned first, unsigned span);

/* Have w retry the waiting allocations it heads (waitq.h), from its loop (any thread). */
void worker_kick_waits(struct worker *w);

/* w's event base (for timers of its connections' waiters). */
struct event_base *worker_base(struct worker *w);

/* Tell w to close every connection and leave its loop (any thread). */
void worker_stop(struct worker *w);

#endif
