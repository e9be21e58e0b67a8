/*
 * server.c - the running service: a listener thread and N worker threads, each with its own
 * libevent base (the memcached model).
 *
 * The listener (the thread in vad_server_run) accepts, reads the peer's credentials, admits or
 * refuses by them (admission.c: max_clients with admin_slots kept for admins, max_clients_uid),
 * and queues the socket to a worker (a mutex-protected queue plus event_active
 * on the worker's notify event): round-robin with worker_balance = even; by default
 * (adaptive) to the least loaded of the active workers, whose number follows the load (see
 * on_balance; a worker hands connections to another between its callbacks, through the same
 * queue). A worker owns its connections: per readable
 * event it does one read, handles every whole frame (session.c), and writes all replies with
 * one send; a reply carrying an arena fd goes with sendmsg. A connection whose pending output
 * passes the high watermark is not read from until it drains below the low watermark. A
 * connection that has not completed hello hello_timeout after its accept is closed.
 * Signals (SIGTERM, SIGINT, SIGHUP) are libevent signal events on the listener base.
 */
#include "server.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <systemd/sd-daemon.h>

#include "admission.h"
#include "balance.h"
#include "fdpass.h"
#include "log.h"
#include "peer.h"
#include "cpu_idle.h"
#include "latency.h"
#include "service.h"
#include "session.h"
#include "stats.h"

#define ACCEPT_BURST	64  /* accepts per listener wake-up, so signals are not starved */
#define CLOSE_LINGER_S	5   /* a closing connection gets this long to take its last replies */
#define ACCEPT_PAUSE_MS 100 /* back-off when out of fds */
#define MAX_WORKERS	256
#define NOTE_INTERVAL_S 10 /* refusals and hello timeouts: one summary line per this */

struct worker;

struct conn {
	int fd;
	struct worker *w;
	struct vad_session *sess;
	struct event *ev_read, *ev_write;
	bool reading, writing, throttled, lingering;
	bool eof;	   /* the client shut down its side: send what is pending, then close */
	bool flush_queued; /* on its worker's flush list: replies go out at the end of the pass */
	struct event *ev_hello; /* until hello: closes it hello_timeout after accepted_ns */
	uint64_t accepted_ns;	/* vad_now_ns() at accept: the hello timeout counts from it */
	struct conn *prev, *next;
	LIST_ENTRY(conn) flush_link;
};

struct pending_conn {
	int fd;
	uint64_t accepted_ns;
	struct vad_peer peer;
	struct pending_conn *next;
};

struct worker {
	struct vad_server *srv;
	unsigned index;
	pthread_t thread;
	bool started;
	struct event_base *base;
	struct event *ev_notify;
	pthread_mutex_t lock; /* queue and stopping */
	struct pending_conn *queue_head, *queue_tail;
	bool stopping;
	struct conn *moved;		/* (lock) connections handed over by another worker */
	unsigned give_count;		/* (lock) the balancer's order (order_give): hand this */
	unsigned give_first, give_span; /* many connections to workers first..first+span-1 */
	struct conn *conns;		/* worker thread only */
	LIST_HEAD(, conn) flush_list;	/* worker thread only: replies to send after this pass */
	unsigned n_conns;		/* written by the worker, read by the listener (atomic) */
	int tid;			/* (atomic) the thread's id, 0 until it runs */
	int schedstat_fd;	  /* listener: /proc/self/task/TID/schedstat, -1 until opened */
	uint64_t busy_ns;	  /* listener: run + runnable-wait time at the last balance tick */
	uint64_t run_ns;	  /* listener: run time at the last balance tick */
	uint64_t reads, requests; /* (atomic) reads that brought requests, requests handled */
	uint64_t reads_seen, requests_seen; /* listener: both at the last balance tick */
};

struct vad_server {
	struct vad_service *svc;
	int listen_fd;
	struct event_base *base;
	struct event *ev_listen, *ev_resume, *ev_stop, *ev_tick;
	struct event *ev_sig[3];
	struct worker *workers;
	unsigned n_workers, next_worker;
	bool adaptive;		      /* worker_balance = adaptive: use as few workers as keep up */
	bool balance_armed;	      /* the balance timer is pending */
	uint64_t balance_ns;	      /* when the workers' busy times were last read, 0 = not yet */
	uint64_t requests_seen;	      /* svc->requests at the last tick */
	struct balance_state balance; /* adaptive: the balancer's memory (balance.c) */
	struct vad_cpu_idle cpu_idle; /* the machine's idle CPUs (fd -1: unknown) */
	struct event *ev_balance;
	int stop_requested; /* atomic */
	bool listening;
	bool watchdog;
	uint64_t watchdog_usec;
	struct vad_uid_conns *uid_conns; /* open connections per uid (max_clients_uid) */
	struct vad_notes notes;		 /* rate-limited log lines of refusals and timeouts */
	struct event *ev_notes;		 /* the notes' summary timer (listener base) */
	char stats_db[PATH_MAX];
	uint64_t stats_interval_ms, stats_retention_ms;
	struct vad_stats_writer *stats;
};

/* ---- admission bookkeeping (any thread) ------------------------------------------------- */

/* An admitted connection is gone (closed, or dropped before a worker took it): its slot in
 * max_clients and in its uid's count are free again. */
static void slot_release(struct vad_server *srv, uid_t uid)
{
	vad_uid_conns_drop(srv->uid_conns, uid);
	__atomic_sub_fetch(&srv->svc->clients, 1, __ATOMIC_RELAXED);
}

/* Count an event of kind; true if it is to be logged in full. The rest are summarised by
 * on_notes_summary once per NOTE_INTERVAL_S, so a flood of them is one line per interval. */
static bool note(struct vad_server *srv, enum vad_note_kind kind, uid_t uid, pid_t pid)
{
	enum vad_note_verdict v = vad_notes_hit(&srv->notes, kind, vad_now_ns(), uid, pid);
	if (v == VAD_NOTE_COUNT_ARM) {
		/* From a worker too: the listener base is locked (evthread_use_pthreads). */
		struct timeval tv = {.tv_sec = NOTE_INTERVAL_S};
		if (event_add(srv->ev_notes, &tv) < 0)
			log_warn("%s: cannot arm the summary timer (out of memory); this one and "
				 "later ones may go uncounted in the log",
				 vad_note_what(kind));
	}
	return v == VAD_NOTE_LOG;
}

static void on_notes_summary(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	struct vad_note_summary sum[VAD_N_NOTES];
	vad_notes_take(&s->notes, vad_now_ns(), sum);
	for (int i = 0; i < VAD_N_NOTES; i++) {
		if (!sum[i].counted)
			continue;
		char last[64] = "";
		if (sum[i].last_pid) /* accept failures have no peer */
			snprintf(last, sizeof(last), " (the last from pid %d, uid %u)",
				 (int)sum[i].last_pid, (unsigned)sum[i].last_uid);
		log_notice("%llu more %s in the last %d s%s", (unsigned long long)sum[i].counted,
			   vad_note_what((enum vad_note_kind)i), NOTE_INTERVAL_S, last);
	}
}

/* ---- connections (worker thread) -------------------------------------------------------- */

/* Send c's replies at the end of this pass of its worker's loop (worker_flush). */
static void flush_queue(struct worker *w, struct conn *c)
{
	if (c->flush_queued)
		return;
	c->flush_queued = true;
	LIST_INSERT_HEAD(&w->flush_list, c, flush_link);
}

static void flush_unqueue(struct conn *c)
{
	if (!c->flush_queued)
		return;
	LIST_REMOVE(c, flush_link);
	c->flush_queued = false;
}

/* Take c off its worker's list (closing it, or handing it to another worker). */
static void conn_unlink(struct worker *w, struct conn *c)
{
	flush_unqueue(c); /* a handed-over connection's new worker sends what is pending */
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	__atomic_store_n(&w->n_conns, w->n_conns - 1, __ATOMIC_RELAXED);
}

static void conn_close(struct conn *c, const char *why)
{
	struct worker *w = c->w;
	struct vad_session *s = c->sess;
	log_debug("session %llu ('%s', pid %d, uid %u) closed: %s; dropping %llu references",
		  (unsigned long long)s->id, s->name[0] ? s->name : "no hello", (int)s->peer.pid,
		  (unsigned)s->peer.uid, why,
		  (unsigned long long)__atomic_load_n(&s->holder.held_refs, __ATOMIC_RELAXED));
	if (c->ev_read) /* NULL when event_new failed for a half-built connection */
		event_free(c->ev_read);
	if (c->ev_write)
		event_free(c->ev_write);
	if (c->ev_hello)
		event_free(c->ev_hello);
	close(c->fd);
	uid_t uid = s->peer.uid;
	vad_session_free(s);
	conn_unlink(w, c);
	slot_release(w->srv, uid);
	free(c);
}

/* Close a connection that no worker owns (handed over, never taken): no events, no list. */
static void conn_drop_detached(struct vad_server *srv, struct conn *c)
{
	close(c->fd);
	uid_t uid = c->sess->peer.uid;
	vad_session_free(c->sess);
	slot_release(srv, uid);
	free(c);
}

/* Send pending output: one send in the common case, sendmsg for a reply with an fd.
 * Returns -1 if the connection was closed. */
static int conn_flush(struct conn *c)
{
	const uint8_t *data;
	size_t len;
	int fd;
	while (vad_session_next_output(c->sess, &data, &len, &fd)) {
		ssize_t n;
		if (fd >= 0)
			n = vad_send_with_fd(c->fd, data, len, fd);
		else
			n = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			char why[128];
			snprintf(why, sizeof(why), "write failed: %s", strerror(errno));
			conn_close(c, why);
			return -1;
		}
		vad_session_output_done(c->sess, (size_t)n);
		if ((size_t)n < len)
			return 0; /* the socket is full; wait until it is writable */
	}
	return 0;
}

/* Add or remove an event; -1 when libevent could not add it (out of memory). */
static int set_event(struct event *ev, bool *state, bool want, const struct timeval *tv)
{
	if (want == *state && !tv)
		return 0;
	if (want) {
		if (event_add(ev, tv) < 0)
			return -1;
	} else {
		event_del(ev);
	}
	*state = want;
	return 0;
}

/* A connection whose events cannot be registered would never be served again. */
static int events_failed(struct conn *c)
{
	log_err("session %llu: cannot register its socket events (out of memory); closing it",
		(unsigned long long)c->sess->id);
	conn_close(c, "its events could not be registered");
	return -1;
}

/* Read while the output is below the watermarks, write while output is pending, close once
 * a closing session has sent everything. Returns -1 if the connection was closed. */
static int conn_update(struct conn *c)
{
	struct vad_service *svc = c->w->srv->svc;
	size_t pending = vad_session_output_pending(c->sess);

	if (vad_session_closing(c->sess) || c->eof) {
		if (pending == 0) {
			conn_close(c, c->eof ? "end of stream" : "its framing broke");
			return -1;
		}
		set_event(c->ev_read, &c->reading, false, NULL); /* removing cannot fail */
		if (!c->lingering) {
			/* Its last replies get a deadline, also if a write was already waiting. */
			struct timeval tv = {.tv_sec = CLOSE_LINGER_S};
			if (set_event(c->ev_write, &c->writing, true, &tv) < 0)
				return events_failed(c);
			c->lingering = true;
		}
		return 0;
	}
	if (pending >= vad_service_high_watermark(svc))
		c->throttled = true;
	else if (pending <= vad_service_low_watermark(svc))
		c->throttled = false;
	size_t cap;
	vad_session_input_space(c->sess, &cap);
	if (set_event(c->ev_read, &c->reading, !c->throttled && cap > 0, NULL) < 0 ||
	    set_event(c->ev_write, &c->writing, pending > 0, NULL) < 0)
		return events_failed(c);
	return 0;
}

/* ---- the hello timeout ------------------------------------------------------------------- */

static void on_hello_timeout(evutil_socket_t fd, short what, void *arg);

/* "10 s", "250 ms" */
static const char *duration_text(uint64_t ms, char *buf, size_t len)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%llu s", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llu ms", (unsigned long long)ms);
	return buf;
}

/* Arm c's hello timer for what is left of hello_timeout since its accept: the clock is never
 * restarted, not by a byte that arrives (a client sending its hello a byte at a time gains
 * nothing) nor by a hand-over to another worker. Returns -1 when out of memory. */
static int hello_arm(struct conn *c)
{
	if (!c->ev_hello) {
		c->ev_hello = evtimer_new(c->w->base, on_hello_timeout, c);
		if (!c->ev_hello)
			return -1;
	}
	uint64_t limit_ns = vad_service_limits(c->w->srv->svc).hello_timeout_ms * 1000000u;
	uint64_t elapsed = vad_now_ns() - c->accepted_ns;
	uint64_t left = elapsed < limit_ns ? limit_ns - elapsed : 0;
	struct timeval tv = {.tv_sec = (time_t)(left / 1000000000u),
			     .tv_usec = (suseconds_t)(left % 1000000000u / 1000u)};
	return event_add(c->ev_hello, &tv);
}

/* Hello is done (or the connection leaves its worker): no timer any more. */
static void hello_disarm(struct conn *c)
{
	if (c->ev_hello) {
		event_free(c->ev_hello);
		c->ev_hello = NULL;
	}
}

static void on_hello_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	if (c->sess->hello_done) { /* completed in a callback that does not disarm */
		hello_disarm(c);
		return;
	}
	struct vad_server *srv = c->w->srv;
	uint64_t limit_ms = vad_service_limits(srv->svc).hello_timeout_ms;
	if (vad_now_ns() - c->accepted_ns < limit_ms * 1000000u) {
		/* A reload lengthened hello_timeout since this timer was armed. */
		if (hello_arm(c) < 0)
			events_failed(c);
		return;
	}
	struct vad_session *s = c->sess;
	char limit[32], msg[192];
	duration_text(limit_ms, limit, sizeof(limit));
	if (note(srv, VAD_NOTE_HELLO_TIMEOUT, s->peer.uid, s->peer.pid))
		log_info("closing session %llu (pid %d, uid %u): no hello within hello_timeout %s "
			 "of its connection; further such closes are counted for %d s",
			 (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, limit,
			 NOTE_INTERVAL_S);
	/* Tell it why, unless a reply is half sent (a frame of ours would cut into it). */
	if (vad_session_output_pending(s) == 0) {
		uint8_t buf[256];
		snprintf(msg, sizeof(msg),
			 "no hello within hello_timeout %s of connecting; the daemon closes "
			 "connections that do not say hello in time",
			 limit);
		size_t len = vad_encode_error_frame(buf, sizeof(buf), 0, VAD__ERROR__ENOHELLO, msg);
		if (len)
			(void)!send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	conn_close(c, "no hello within hello_timeout");
}

/* ---- socket events ------------------------------------------------------------------------ */

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	size_t cap;
	uint8_t *space = vad_session_input_space(c->sess, &cap);
	if (!space || cap == 0) {
		if (!space) {
			conn_close(c, "out of memory for the input buffer");
			return;
		}
		conn_update(c);
		return;
	}
	ssize_t n = read(fd, space, cap);
	if (n == 0) {
		/* A client may shut down writing and still read its replies. */
		c->eof = true;
		conn_update(c);
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		char why[128];
		snprintf(why, sizeof(why), "read failed: %s", strerror(errno));
		conn_close(c, why);
		return;
	}
	vad_session_input_commit(c->sess, (size_t)n);
	uint64_t handled = c->sess->requests;
	vad_session_process(c->sess);
	if (c->ev_hello && c->sess->hello_done)
		hello_disarm(c);
	handled = c->sess->requests - handled;
	if (handled) {
		/* How many requests a read brings: the balancer's sign of pipelined clients. */
		struct worker *w = c->w;
		__atomic_store_n(&w->reads, w->reads + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&w->requests, w->requests + handled, __ATOMIC_RELAXED);
	}
	/* Replies wait for the end of the pass (worker_flush), as Redis writes before it
	 * sleeps: the clients answered in one pass get their replies together and send their
	 * next requests together, instead of some catching the worker mid-pass and waiting
	 * a whole extra pass. */
	if (vad_session_output_pending(c->sess) && !c->writing) {
		flush_queue(c->w, c);
		return;
	}
	conn_update(c);
}

/* Send the replies of the pass that just ended. */
static void worker_flush(struct worker *w)
{
	while (!LIST_EMPTY(&w->flush_list)) {
		struct conn *c = LIST_FIRST(&w->flush_list);
		flush_unqueue(c);
		if (conn_flush(c) == 0)
			conn_update(c);
	}
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	if (what & EV_TIMEOUT) {
		conn_close(c, "the client did not read its last replies in time");
		return;
	}
	if (conn_flush(c) < 0)
		return;
	/* Frames held back by the watermark wait in the input buffer: handle them now. */
	if (!vad_session_closing(c->sess) &&
	    vad_session_output_pending(c->sess) <= vad_service_low_watermark(c->w->srv->svc)) {
		/* After EOF too: requests read before it still deserve their replies. */
		vad_session_process(c->sess);
		if (conn_flush(c) < 0)
			return;
	}
	conn_update(c);
}

/* Send one error frame on a socket without a session, then close it. */
static void refuse(int fd, Vad__Error code, const char *message)
{
	uint8_t buf[512];
	size_t len = vad_encode_error_frame(buf, sizeof(buf), 0, code, message);
	if (len)
		(void)!send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

/* Has the client read everything handed to its socket, fds included? Asked only when a
 * session has many arena fds unconfirmed, never per request. */
static bool conn_peer_read_all(void *ctx)
{
	struct conn *c = ctx;
	int unread = 0;
	return ioctl(c->fd, SIOCOUTQ, &unread) == 0 && unread == 0;
}

static void conn_link(struct worker *w, struct conn *c)
{
	c->prev = NULL;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
	__atomic_store_n(&w->n_conns, w->n_conns + 1, __ATOMIC_RELAXED);
}

static void conn_open(struct worker *w, struct pending_conn *p)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct vad_session *s = c ? vad_session_new(w->srv->svc, &p->peer) : NULL;
	if (!s) {
		log_err("out of memory accepting a client (pid %d, uid %u)", (int)p->peer.pid,
			(unsigned)p->peer.uid);
		refuse(p->fd, VAD__ERROR__ENOMEM, "the daemon is out of memory; try again later");
		free(c);
		slot_release(w->srv, p->peer.uid);
		return;
	}
	c->fd = p->fd;
	c->w = w;
	c->sess = s;
	c->accepted_ns = p->accepted_ns;
	s->peer_read_all = conn_peer_read_all;
	s->io_ctx = c;
	c->ev_read = event_new(w->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
	c->ev_write = event_new(w->base, c->fd, EV_WRITE | EV_PERSIST, on_write, c);
	conn_link(w, c);
	if (!c->ev_read || !c->ev_write || hello_arm(c) < 0) {
		conn_close(c, "out of memory for its events");
		return;
	}
	log_debug("session %llu opened: pid %d, uid %u, gid %u, %zu groups%s, worker %u",
		  (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid,
		  (unsigned)s->peer.gid, s->peer.n_groups, s->admin ? ", admin" : "", w->index);
	if (set_event(c->ev_read, &c->reading, true, NULL) < 0)
		events_failed(c);
}

/* ---- moving connections between workers (adaptive balance) ------------------------------ */

/* Take over a connection another worker handed to us: new events on our base, then the
 * same read/write interest it had (data that arrived meanwhile fires at once: level-triggered). */
static void conn_adopt(struct worker *w, struct conn *c)
{
	c->w = w;
	c->reading = c->writing = false;
	c->ev_read = event_new(w->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
	c->ev_write = event_new(w->base, c->fd, EV_WRITE | EV_PERSIST, on_write, c);
	conn_link(w, c);
	if (!c->ev_read || !c->ev_write || (!c->sess->hello_done && hello_arm(c) < 0)) {
		conn_close(c, "out of memory for its events");
		return;
	}
	conn_update(c);
}

static void worker_take(struct worker *w, struct conn *c)
{
	pthread_mutex_lock(&w->lock);
	c->next = w->moved;
	w->moved = c;
	pthread_mutex_unlock(&w->lock);
	event_active(w->ev_notify, EV_READ, 0);
}

/* Hand up to count of our connections to workers first..first+span-1, round-robin. A closing
 * connection (lingering over its last replies) stays: it is about to go anyway. Runs in the
 * worker's own thread, between callbacks, so no connection is mid-request. */
static void worker_give(struct worker *w, unsigned count, unsigned first, unsigned span)
{
	struct vad_server *s = w->srv;
	unsigned moved = 0, next = 0;
	struct conn *c = w->conns;
	while (c && moved < count) {
		struct conn *after = c->next;
		if (c->lingering || c->eof || vad_session_closing(c->sess)) {
			c = after;
			continue;
		}
		struct worker *to = &s->workers[first + next++ % span];
		if (to == w) {
			c = after;
			continue;
		}
		event_free(c->ev_read); /* event_free deletes a pending event first */
		event_free(c->ev_write);
		c->ev_read = c->ev_write = NULL;
		hello_disarm(c); /* the new worker arms it again, for what is left */
		conn_unlink(w, c);
		worker_take(to, c);
		moved++;
		c = after;
	}
	if (moved)
		log_debug("worker %u handed %u connections to workers %u-%u", w->index, moved,
			  first, first + span - 1);
}

/* ---- workers ---------------------------------------------------------------------------- */

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
			refuse(q->fd, VAD__ERROR__EGONE, "the daemon is shutting down");
			slot_release(w->srv, q->peer.uid);
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
	if (give_count && give_span)
		worker_give(w, give_count, give_first, give_span);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16]; /* what top -H and ps -L show (15 characters at most) */
	snprintf(name, sizeof(name), "vad-worker%u", w->index % 100000);
	pthread_setname_np(pthread_self(), name);
	__atomic_store_n(&w->tid, (int)gettid(), __ATOMIC_RELEASE);
	va_set_home_node(w->index);
	vad_latency_set_shard(w->index);
	/* One pass at a time, its replies sent after it (worker_flush). */
	while (event_base_loop(w->base, EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY) >= 0) {
		worker_flush(w);
		if (event_base_got_break(w->base))
			break;
	}
	return NULL;
}

static void worker_push(struct worker *w, struct pending_conn *p)
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

/* ---- adaptive balance (listener thread) ------------------------------------------------- */

/* A worker's time on a CPU (*run) and that plus its time runnable but waiting for one
 * (*busy: the CPU it wanted), in ns, from schedstat. Returns -1 if the kernel does not
 * provide it. */
static int worker_cpu_ns(struct worker *w, uint64_t *run_out, uint64_t *busy_out)
{
	int tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
	if (tid == 0)
		return -1;
	if (w->schedstat_fd < 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
		w->schedstat_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (w->schedstat_fd < 0)
			return -1;
	}
	char buf[128];
	ssize_t n = pread(w->schedstat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long run, wait;
	if (sscanf(buf, "%llu %llu", &run, &wait) != 2)
		return -1;
	*run_out = run;
	*busy_out = run + wait;
	return 0;
}

static void order_give(struct worker *w, unsigned count, unsigned first, unsigned span)
{
	pthread_mutex_lock(&w->lock);
	w->give_count = count;
	w->give_first = first;
	w->give_span = span;
	pthread_mutex_unlock(&w->lock);
	event_active(w->ev_notify, EV_READ, 0);
}

/* Read every worker's CPU times; since the last sample, worker i wanted a CPU ws[i].load of
 * the time and ran ws[i].ran of it. Without scheduler statistics, adaptive balance turns
 * itself off (every worker active) and this returns -1. */
static int sample_cpu(struct vad_server *s, struct balance_worker_sample *ws)
{
	uint64_t now = vad_now_ns(), dt = now - s->balance_ns;
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = &s->workers[i];
		uint64_t run, busy;
		if (worker_cpu_ns(w, &run, &busy) < 0) {
			log_info("worker balance: no scheduler statistics for worker %u "
				 "(/proc/self/task/TID/schedstat); spreading connections over "
				 "all %u workers",
				 i, s->n_workers);
			s->adaptive = false;
			balance_use_all(&s->balance);
			return -1;
		}
		if (ws) {
			ws[i].load =
			    busy > w->busy_ns && dt ? (double)(busy - w->busy_ns) / (double)dt : 0;
			ws[i].ran =
			    run > w->run_ns && dt ? (double)(run - w->run_ns) / (double)dt : 0;
		}
		w->busy_ns = busy;
		w->run_ns = run;
	}
	s->balance_ns = now;
	return 0;
}

/* Each worker's reads that brought requests, requests handled and connections since the
 * last tick's. */
static void sample_requests(struct vad_server *s, struct balance_worker_sample *ws)
{
	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = &s->workers[i];
		uint64_t r = __atomic_load_n(&w->reads, __ATOMIC_RELAXED);
		uint64_t q = __atomic_load_n(&w->requests, __ATOMIC_RELAXED);
		ws[i].reads = r - w->reads_seen;
		ws[i].requests = q - w->requests_seen;
		ws[i].n_conns = __atomic_load_n(&w->n_conns, __ATOMIC_RELAXED);
		w->reads_seen = r;
		w->requests_seen = q;
	}
}

/* Tick in ms while clients are connected; the first tick measures from now. */
static void balance_arm(struct vad_server *s, unsigned ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	if (s->balance_armed || !s->adaptive)
		return;
	if (s->balance_ns == 0) {
		if (sample_cpu(s, NULL) < 0)
			return;
		s->requests_seen = __atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED);
		vad_cpu_idle_sample(&s->cpu_idle); /* the first tick measures from now */
	}
	if (event_add(s->ev_balance, &tv) == 0)
		s->balance_armed = true;
}

/* Say what the balancer decided (the log lines tests and people look for). */
static void balance_log(const struct vad_server *s, const struct balance_action *a)
{
	const char *why = a->pipelined ? "busy with pipelined clients" : "saturated";
	switch (a->verdict) {
	case BALANCE_UNDO:
		log_debug("worker balance: %u workers served %.0f requests/s, %u served %.0f; back "
			  "to %u for %u ms",
			  a->from, a->rate_after, a->to, a->rate_before, a->to, a->backoff_ms);
		break;
	case BALANCE_NO_IDLE_CPU:
		if (a->first_no_idle)
			log_debug("worker balance: %u workers %s, but the machine has %.2f CPUs "
				  "idle (worker_spread_idle %.2f); not spreading",
				  a->from, why, a->idle_min, s->balance.spread_idle);
		break;
	case BALANCE_SPREAD:
		log_debug("worker balance: %u workers %s; spreading over %u", a->from, why, a->to);
		break;
	case BALANCE_GATHER:
		log_debug("worker balance: %u workers busy %.2f of a CPU together; gathering on %u",
			  a->from, a->busy, a->to);
		break;
	default:
		break;
	}
}

/* Carry out a: on a spread each active worker hands the woken one its share; workers out of
 * the active set hand over whatever they still have (also connections that were on their
 * way to them when the set shrank). */
static void balance_apply(struct vad_server *s, const struct balance_action *a)
{
	if (a->verdict == BALANCE_SPREAD) {
		for (unsigned i = 0; i < a->from; i++) {
			unsigned n = balance_share(
			    a, __atomic_load_n(&s->workers[i].n_conns, __ATOMIC_RELAXED));
			if (n)
				order_give(&s->workers[i], n, a->from, 1);
		}
	}
	balance_log(s, a);
	for (unsigned i = a->to; i < s->n_workers; i++)
		if (__atomic_load_n(&s->workers[i].n_conns, __ATOMIC_RELAXED) > 0)
			order_give(&s->workers[i], ~0u, 0, a->to);
}

/* Every BALANCE_TICK_MS while clients are connected: measure, let balance_tick decide
 * (balance.c says how), move connections as it says. */
static void on_balance(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	struct balance_worker_sample ws[MAX_WORKERS];
	uint64_t since = s->balance_ns;
	s->balance_armed = false;
	if (__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED) || sample_cpu(s, ws) < 0)
		return;
	uint64_t requests = __atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED);
	struct balance_sample sample = {
	    .requests = requests - s->requests_seen,
	    .elapsed_ns = s->balance_ns - since,
	    .workers = ws,
	};
	s->requests_seen = requests;
	sample.idle = vad_cpu_idle_sample(&s->cpu_idle);
	sample.clients = __atomic_load_n(&s->svc->clients, __ATOMIC_RELAXED);
	if (sample.clients)
		sample_requests(s, ws); /* with no clients they count on to the next ones */
	struct balance_action a = balance_tick(&s->balance, &sample);
	if (a.verdict == BALANCE_STOP) {
		s->balance_ns = 0; /* nobody to serve; the next clients arm the timer again */
		return;
	}
	balance_apply(s, &a);
	balance_arm(s, a.next_tick_ms);
}

/* The worker for a new connection: round-robin over all, or (adaptive) the active worker
 * with the fewest connections. */
static struct worker *pick_worker(struct vad_server *s)
{
	if (!s->adaptive)
		return &s->workers[s->next_worker++ % s->n_workers];
	struct worker *best = &s->workers[0];
	unsigned best_n = __atomic_load_n(&best->n_conns, __ATOMIC_RELAXED);
	for (unsigned i = 1; i < s->balance.active; i++) {
		unsigned n = __atomic_load_n(&s->workers[i].n_conns, __ATOMIC_RELAXED);
		if (n < best_n) {
			best = &s->workers[i];
			best_n = n;
		}
	}
	balance_arm(s, BALANCE_TICK_MS);
	return best;
}

/* ---- listener --------------------------------------------------------------------------- */

static void pause_accepting(struct vad_server *s)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = ACCEPT_PAUSE_MS * 1000};
	if (event_add(s->ev_resume, &tv) < 0)
		return; /* without a timer to resume, keep listening rather than stop for good */
	if (s->listening) {
		event_del(s->ev_listen);
		s->listening = false;
	}
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	if (!s->listening && !__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED)) {
		if (event_add(s->ev_listen, NULL) == 0) {
			s->listening = true;
			return;
		}
		struct timeval tv = {.tv_sec = 0, .tv_usec = ACCEPT_PAUSE_MS * 1000};
		if (event_add(s->ev_resume, &tv) < 0)
			log_err("cannot listen for new connections any more (out of memory)");
	}
}

/* Refuse a newcomer that admission turned away: EBUSY and a sentence naming the limit. */
static void refuse_admission(struct vad_server *s, int fd, const struct vad_peer *peer, bool admin,
			     enum vad_admit a, unsigned clients, unsigned uid_conns,
			     const struct vad_limits *lim)
{
	char msg[256];
	enum vad_note_kind kind;
	switch (a) {
	case VAD_ADMIT_UID:
		kind = VAD_NOTE_UID;
		snprintf(msg, sizeof(msg),
			 "uid %u already has %u connections to the daemon (max_clients_uid %u); "
			 "close some of them or raise max_clients_uid in vad.conf",
			 (unsigned)peer->uid, uid_conns, lim->max_clients_uid);
		break;
	case VAD_ADMIT_RESERVED:
		kind = VAD_NOTE_RESERVED;
		snprintf(msg, sizeof(msg),
			 "the daemon serves %u clients and keeps the last %u of max_clients %u for "
			 "admins (admin_slots); try again later or raise max_clients in vad.conf",
			 clients, vad_admission_reserved(lim->max_clients, lim->admin_slots),
			 lim->max_clients);
		break;
	default:
		kind = VAD_NOTE_FULL;
		snprintf(msg, sizeof(msg),
			 "the daemon already serves max_clients %u clients; try again later or "
			 "raise max_clients in vad.conf",
			 lim->max_clients);
		break;
	}
	if (note(s, kind, peer->uid, peer->pid))
		log_info("refusing pid %d (uid %u%s): %s (further such refusals are counted for "
			 "%d s)",
			 (int)peer->pid, (unsigned)peer->uid, admin ? ", admin" : "", msg,
			 NOTE_INTERVAL_S);
	refuse(fd, VAD__ERROR__EBUSY, msg);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct vad_server *s = arg;
	for (int i = 0; i < ACCEPT_BURST; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* EMFILE, ENFILE, ENOBUFS, ENOMEM: the socket stays readable, so retrying
			 * at once would spin; pause, and log it once per NOTE_INTERVAL_S. */
			if (note(s, VAD_NOTE_ACCEPT, 0, 0))
				log_warn("accept failed: %s; pausing new connections for %d ms "
					 "(further failures are counted for %d s)",
					 strerror(errno), ACCEPT_PAUSE_MS, NOTE_INTERVAL_S);
			pause_accepting(s);
			return;
		}
		uint64_t accepted_ns = vad_now_ns();
		struct pending_conn *p = calloc(1, sizeof(*p));
		char err[256];
		if (!p) {
			log_err("out of memory accepting a client");
			refuse(fd, VAD__ERROR__ENOMEM,
			       "the daemon is out of memory; try again later");
			continue;
		}
		if (vad_peer_from_socket(fd, &p->peer, err, sizeof(err)) < 0) {
			Vad__Error code =
			    errno == ENOMEM ? VAD__ERROR__ENOMEM : VAD__ERROR__EINTERNAL;
			log_warn("refusing a connection: %s", err);
			refuse(fd, code, err);
			free(p);
			continue;
		}
		struct vad_service *svc = s->svc;
		struct vad_limits lim = vad_service_limits(svc);
		bool admin = vad_peer_is_admin(&p->peer, svc->daemon_uid, svc->has_admin_group,
					       svc->admin_gid);
		/* Only this thread adds clients: what it reads can only shrink meanwhile. */
		unsigned n = __atomic_load_n(&svc->clients, __ATOMIC_RELAXED);
		unsigned uid_n = vad_uid_conns_get(s->uid_conns, p->peer.uid);
		enum vad_admit a = vad_admission_decide(n, uid_n, admin, lim.max_clients,
							lim.admin_slots, lim.max_clients_uid);
		if (a != VAD_ADMIT_OK) {
			refuse_admission(s, fd, &p->peer, admin, a, n, uid_n, &lim);
			vad_peer_free(&p->peer);
			free(p);
			continue;
		}
		if (vad_uid_conns_add(s->uid_conns, p->peer.uid) < 0) {
			log_err("out of memory accepting a client (pid %d, uid %u)",
				(int)p->peer.pid, (unsigned)p->peer.uid);
			refuse(fd, VAD__ERROR__ENOMEM,
			       "the daemon is out of memory; try again later");
			vad_peer_free(&p->peer);
			free(p);
			continue;
		}
		__atomic_add_fetch(&svc->clients, 1, __ATOMIC_RELAXED);
		p->accepted_ns = accepted_ns;
		p->fd = fd;
		worker_push(pick_worker(s), p);
	}
}

static void begin_stop(struct vad_server *s, const char *why)
{
	log_notice("%s: stopping (no new connections; closing every session)", why);
	sd_notify(0, "STOPPING=1");
	__atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
	if (s->listening) {
		event_del(s->ev_listen);
		s->listening = false;
	}
	event_base_loopbreak(s->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct vad_server *s = arg;
	if (sig == SIGHUP) {
		char detail[1024];
		sd_notify(0, "RELOADING=1");
		if (vad_service_reload(s->svc, detail, sizeof(detail)) == 0) {
			log_notice("SIGHUP: %s", detail);
			vad_service_event(s->svc, "reload", detail);
		} else {
			log_warn("SIGHUP: %s", detail);
			vad_service_event(s->svc, "reload-failed", detail);
		}
		sd_notify(0, "READY=1");
		return;
	}
	begin_stop(s, sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	begin_stop(arg, "stop requested");
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct vad_server *s = arg;
	sd_notifyf(0, "%sSTATUS=%u clients, %llu requests handled",
		   s->watchdog ? "WATCHDOG=1\n" : "",
		   __atomic_load_n(&s->svc->clients, __ATOMIC_RELAXED),
		   (unsigned long long)__atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED));
}

/* ---- life cycle ------------------------------------------------------------------------- */

/* Raise the soft fd limit to the hard one: it bounds both the daemon's open sockets and the
 * arena fds in flight to clients that have not read them yet (charged to the daemon's user).
 * The admin slots are part of max_clients: with the limit at max_clients x 33 + 64,
 * non-admins (at most max_clients - admin_slots connections, 33 fds each) cannot use up what
 * the reserved connections, the listener's accept-to-refuse and the arenas need. */
static void raise_fd_limit(unsigned max_clients)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			log_info("raised the open file limit from %llu to %llu",
				 (unsigned long long)was, (unsigned long long)rl.rlim_cur);
		else
			rl.rlim_cur = was;
	}
	uint64_t need = (uint64_t)max_clients * (VAD_FDS_UNREAD_MAX + 1) + 64;
	if (max_clients && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
		log_warn("the open file limit %llu is low for max_clients %u: clients that do not "
			 "read their arena fds could use it up (raise LimitNOFILE to %llu)",
			 (unsigned long long)rl.rlim_cur, max_clients, (unsigned long long)need);
}

static pthread_once_t evthread_once = PTHREAD_ONCE_INIT;
static int evthread_rc;

static void evthread_setup(void)
{
	evthread_rc = evthread_use_pthreads();
}

static void free_server(struct vad_server *s)
{
	for (unsigned i = 0; s->workers && i < s->n_workers; i++) {
		struct worker *w = &s->workers[i];
		while (w->conns)
			conn_close(w->conns, "the daemon is shutting down");
		while (w->moved) {
			struct conn *c = w->moved;
			w->moved = c->next;
			conn_drop_detached(s, c);
		}
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
		if (w->base)
			event_base_free(w->base);
		pthread_mutex_destroy(&w->lock);
	}
	free(s->workers);
	struct event *evs[] = {s->ev_listen, s->ev_resume, s->ev_stop,	 s->ev_tick, s->ev_balance,
			       s->ev_sig[0], s->ev_sig[1], s->ev_sig[2], s->ev_notes};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	if (s->base)
		event_base_free(s->base);
	vad_cpu_idle_close(&s->cpu_idle);
	vad_uid_conns_free(s->uid_conns);
	vad_notes_fini(&s->notes);
	free(s);
}

int vad_server_create(const struct vad_config *cfg, struct vad_arena **arenas, size_t n_arenas,
		      int listen_fd, struct vad_server **out, char *err, size_t err_len)
{
	*out = NULL;
	pthread_once(&evthread_once, evthread_setup);
	signal(SIGPIPE, SIG_IGN); /* sends use MSG_NOSIGNAL; this covers anything else */
	raise_fd_limit(cfg->max_clients);
	if (vad_admission_reserved(cfg->max_clients, cfg->admin_slots) < cfg->admin_slots)
		log_notice("admin_slots %u is more than half of max_clients %u: %u are kept for "
			   "admins",
			   cfg->admin_slots, cfg->max_clients,
			   vad_admission_reserved(cfg->max_clients, cfg->admin_slots));
	/* Grow malloc heaps 16 MiB at a time and keep up to 64 MiB of freed heap: otherwise a
	 * burst of ranges costs one mprotect per 4 KiB page as a worker's arena grows, and what
	 * is trimmed after a burst is faulted in again by the next one. */
	mallopt(M_TOP_PAD, 16 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	if (evthread_rc != 0) {
		snprintf(err, err_len, "libevent has no pthreads support (evthread_use_pthreads)");
		return -1;
	}
	struct vad_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, err_len, "out of memory creating the server");
		return -1;
	}
	vad_notes_init(&s->notes, NOTE_INTERVAL_S * 1000000000ull);
	s->listen_fd = listen_fd;
	s->cpu_idle.fd = -1;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cfg->workers ? cfg->workers : (ncpu > 0 ? (unsigned)ncpu : 1);
	if (n > MAX_WORKERS)
		n = MAX_WORKERS;
	s->n_workers = n;
	s->workers = calloc(n, sizeof(*s->workers));
	s->base = event_base_new();
	if (!s->workers || !s->base)
		goto nomem;
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &s->workers[i];
		w->srv = s;
		w->index = i;
		w->schedstat_fd = -1;
		pthread_mutex_init(&w->lock, NULL);
		w->base = event_base_new();
		if (!w->base)
			goto nomem;
		w->ev_notify = event_new(w->base, -1, 0, on_notify, w);
		if (!w->ev_notify)
			goto nomem;
	}
	s->ev_listen = event_new(s->base, listen_fd, EV_READ | EV_PERSIST, on_accept, s);
	s->ev_resume = evtimer_new(s->base, on_resume, s);
	s->ev_stop = event_new(s->base, -1, 0, on_stop, s);
	s->ev_tick = event_new(s->base, -1, EV_PERSIST, on_tick, s);
	s->ev_balance = evtimer_new(s->base, on_balance, s);
	s->ev_notes = evtimer_new(s->base, on_notes_summary, s);
	s->uid_conns = vad_uid_conns_new();
	s->adaptive = cfg->worker_balance == VAD_BALANCE_ADAPTIVE && n > 1;
	balance_init(&s->balance, n, cfg->worker_spread_idle);
	if (!s->adaptive)
		balance_use_all(&s->balance);
	if (s->adaptive && cfg->worker_spread_idle > 0 && vad_cpu_idle_open(&s->cpu_idle) < 0)
		log_info("worker balance: /proc/stat unreadable; spreading without knowing whether "
			 "a CPU is idle");
	/* Catch signals from now on: one arriving before vad_server_run waits in the base
	 * instead of killing the process with its default action. */
	const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
	for (int i = 0; i < 3; i++) {
		s->ev_sig[i] = evsignal_new(s->base, sigs[i], on_signal, s);
		if (!s->ev_sig[i] || event_add(s->ev_sig[i], NULL) < 0)
			goto nomem;
	}
	if (!s->ev_listen || !s->ev_resume || !s->ev_stop || !s->ev_tick || !s->ev_balance ||
	    !s->ev_notes || !s->uid_conns)
		goto nomem;

	/* Last: on success the service owns the arenas; on failure main still does. */
	if (vad_service_create(cfg, arenas, n_arenas, &s->svc, err, err_len) < 0) {
		free_server(s);
		return -1;
	}
	snprintf(s->stats_db, sizeof(s->stats_db), "%s", cfg->stats_db);
	s->stats_interval_ms = cfg->stats_interval_ms;
	s->stats_retention_ms = cfg->stats_retention_ms;
	*out = s;
	return 0;
nomem:
	snprintf(err, err_len, "out of memory creating the event loops");
	free_server(s);
	return -1;
}

int vad_server_run(struct vad_server *s)
{
	int rc = 0;

	for (unsigned i = 0; i < s->n_workers; i++) {
		int e = pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
		if (e) {
			log_err("cannot start worker thread %u: %s", i, strerror(e));
			rc = -1;
			break;
		}
		s->workers[i].started = true;
	}
	if (rc == 0 && s->stats_db[0]) {
		char err[PATH_MAX + 256];
		if (vad_stats_start(s->svc, s->stats_db, s->stats_interval_ms,
				    s->stats_retention_ms, &s->stats, err, sizeof(err)) < 0)
			log_warn("running without stats: %s", err);
	}
	if (rc == 0 && event_add(s->ev_listen, NULL) < 0) {
		log_err("cannot listen for connections (out of memory)");
		rc = -1;
	}
	if (rc == 0) {
		s->listening = true;
		s->watchdog = sd_watchdog_enabled(0, &s->watchdog_usec) > 0;
		uint64_t tick_us = 5000000;
		if (s->watchdog && s->watchdog_usec / 2 < tick_us)
			tick_us = s->watchdog_usec / 2;
		struct timeval tv = {.tv_sec = (time_t)(tick_us / 1000000),
				     .tv_usec = (suseconds_t)(tick_us % 1000000)};
		if (getenv("NOTIFY_SOCKET"))
			event_add(s->ev_tick, &tv);
		sd_notifyf(0, "READY=1\nSTATUS=listening with %u workers%s", s->n_workers,
			   s->adaptive ? " (adaptive: as many as the load needs)" : "");
		if (!__atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED) &&
		    event_base_dispatch(s->base) < 0) {
			log_err("the listener event loop failed");
			rc = -1;
		}
	}
	if (s->listening) {
		event_del(s->ev_listen);
		s->listening = false;
	}
	for (int i = 0; i < 3; i++)
		event_del(s->ev_sig[i]);
	event_del(s->ev_tick);
	event_del(s->ev_resume);
	event_del(s->ev_balance);
	s->balance_armed = false;

	/* The final snapshot still sees the sessions of this moment. */
	vad_stats_stop(s->stats);
	s->stats = NULL;

	for (unsigned i = 0; i < s->n_workers; i++) {
		struct worker *w = &s->workers[i];
		if (!w->started)
			continue;
		pthread_mutex_lock(&w->lock);
		w->stopping = true;
		pthread_mutex_unlock(&w->lock);
		event_active(w->ev_notify, EV_READ, 0);
	}
	for (unsigned i = 0; i < s->n_workers; i++) {
		if (s->workers[i].started) {
			pthread_join(s->workers[i].thread, NULL);
			s->workers[i].started = false;
		}
	}
	/* What was counted but not yet summarised still gets its line. */
	event_del(s->ev_notes);
	on_notes_summary(-1, 0, s);
	log_notice("stopped: %llu requests handled; connections refused: %llu at max_clients, "
		   "%llu for the admin slots, %llu at max_clients_uid; %llu closed at "
		   "hello_timeout",
		   (unsigned long long)__atomic_load_n(&s->svc->requests, __ATOMIC_RELAXED),
		   (unsigned long long)vad_notes_total(&s->notes, VAD_NOTE_FULL),
		   (unsigned long long)vad_notes_total(&s->notes, VAD_NOTE_RESERVED),
		   (unsigned long long)vad_notes_total(&s->notes, VAD_NOTE_UID),
		   (unsigned long long)vad_notes_total(&s->notes, VAD_NOTE_HELLO_TIMEOUT));
	return rc;
}

void vad_server_stop(struct vad_server *s)
{
	__atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
	event_active(s->ev_stop, EV_READ, 0);
}

void vad_server_destroy(struct vad_server *s)
{
	if (!s)
		return;
	struct vad_service *svc = s->svc;
	int fd = s->listen_fd;
	free_server(s); /* drops every remaining session before the registry goes */
	vad_service_destroy(svc);
	if (fd >= 0)
		close(fd);
}
