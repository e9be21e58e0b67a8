/*
 * conn.c - one client connection on its worker (the thread that owns it): per readable event
 * one read, every whole frame handled (session.c), and the replies of all connections read in
 * one pass of the loop sent after that pass, one send each; a reply carrying an arena fd goes
 * with sendmsg. A connection whose pending output passes the high watermark is not read from
 * until it drains below the low watermark. A connection that has not completed hello
 * hello_timeout after its accept is closed. A paused session (guess.h) is not read from until
 * its pause timer fires. When the balancer moves a connection, its old
 * worker detaches it and the new one adopts it, between callbacks.
 */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "fdpass.h"
#include "log.h"
#include "gate.h"
#include "service.h"
#include "session.h"
#include "worker.h"

#define CLOSE_LINGER_S 5 /* a closing connection gets this long to take its last replies */

/* Send c's replies at the end of this pass of its worker's loop (conn_flush_pass). */
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

void conn_close(struct conn *c, const char *why)
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
	if (c->ev_pause)
		event_free(c->ev_pause);
	close(c->fd);
	uid_t uid = s->peer.uid;
	vad_session_free(s);
	conn_unlink(w, c);
	vad_gate_release(w->gate, uid);
	free(c);
}

/* Close a connection that no worker owns (handed over, never taken): no events, no list. */
void conn_drop_detached(struct vad_gate *gate, struct conn *c)
{
	close(c->fd);
	uid_t uid = c->sess->peer.uid;
	vad_session_free(c->sess);
	vad_gate_release(gate, uid);
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

static void on_pause_end(evutil_socket_t fd, short what, void *arg);

/* Start the timer of the session's pause: the connection is not read until it fires, and the
 * worker goes on serving its other connections meanwhile. Returns -1 when out of memory. */
static int pause_arm(struct conn *c)
{
	if (!c->ev_pause) {
		c->ev_pause = evtimer_new(c->w->base, on_pause_end, c);
		if (!c->ev_pause)
			return -1;
	}
	uint32_t ms = vad_session_pause_ms(c->sess);
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (suseconds_t)(ms % 1000) * 1000};
	if (event_add(c->ev_pause, &tv) < 0)
		return -1;
	c->pausing = true;
	return 0;
}

/* An administrator killed c's session (vactl kill): its EKILLED notice goes out after what is
 * queued, as much as the socket takes now, and the connection closes at once, its references
 * dropped as a disconnect drops them (a client that does not read must not keep them). */
static void conn_kill(struct conn *c)
{
	vad_session_kill_notice(c->sess);
	if (conn_flush(c) < 0)
		return;
	conn_close(c, "disconnected by an administrator (vactl kill)");
}

void conn_close_killed(struct worker *w)
{
	struct conn *c = w->conns;
	while (c) {
		struct conn *next = c->next;
		if (vad_session_killed(c->sess))
			conn_kill(c);
		c = next;
	}
}

/* Read while the output is below the watermarks and the session is not paused, write while
 * output is pending, close once a closing session has sent everything. Returns -1 if the
 * connection was closed. */
static int conn_update(struct conn *c)
{
	struct vad_service *svc = c->w->svc;
	if (vad_session_killed(c->sess)) {
		conn_kill(c);
		return -1;
	}
	size_t pending = vad_session_output_pending(c->sess);

	if (vad_session_closing(c->sess) || c->eof) {
		if (pending == 0) {
			const char *why = c->sess->closing_why;
			conn_close(c, c->eof ? "end of stream" : why ? why : "its framing broke");
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
	bool paused = vad_session_paused(c->sess);
	if (paused && !c->pausing && pause_arm(c) < 0)
		return events_failed(c);
	size_t cap;
	vad_session_input_space(c->sess, &cap);
	if (set_event(c->ev_read, &c->reading, !paused && !c->throttled && cap > 0, NULL) < 0 ||
	    set_event(c->ev_write, &c->writing, pending > 0, NULL) < 0)
		return events_failed(c);
	return 0;
}

/* The pause is over: handle what the client sent meanwhile (it may pause the session again),
 * then read again. */
static void on_pause_end(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	c->pausing = false;
	vad_session_resume(c->sess);
	if (!vad_session_closing(c->sess) &&
	    vad_session_output_pending(c->sess) <= vad_service_low_watermark(c->w->svc))
		vad_session_process(c->sess);
	if (vad_session_output_pending(c->sess) && !c->writing) {
		flush_queue(c->w, c); /* sent at the end of this pass, like on_read's replies */
		return;
	}
	conn_update(c);
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
	uint64_t limit_ns = vad_service_limits(c->w->svc).hello_timeout_ms * 1000000u;
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
	uint64_t limit_ms = vad_service_limits(c->w->svc).hello_timeout_ms;
	if (vad_now_ns() - c->accepted_ns < limit_ms * 1000000u) {
		/* A reload lengthened hello_timeout since this timer was armed. */
		if (hello_arm(c) < 0)
			events_failed(c);
		return;
	}
	struct vad_session *s = c->sess;
	char limit[32], msg[192];
	duration_text(limit_ms, limit, sizeof(limit));
	if (vad_gate_note(c->w->gate, VAD_NOTE_HELLO_TIMEOUT, s->peer.uid, s->peer.pid))
		log_info("closing session %llu (pid %d, uid %u): no hello within hello_timeout %s "
			 "of its connection; further such closes are counted for %d s",
			 (unsigned long long)s->id, (int)s->peer.pid, (unsigned)s->peer.uid, limit,
			 VAD_NOTE_INTERVAL_S);
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
	/* Replies wait for the end of the pass (conn_flush_pass), as Redis writes before it
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
void conn_flush_pass(struct worker *w)
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
	    vad_session_output_pending(c->sess) <= vad_service_low_watermark(c->w->svc)) {
		/* After EOF too: requests read before it still deserve their replies. */
		vad_session_process(c->sess);
		if (conn_flush(c) < 0)
			return;
	}
	conn_update(c);
}

/* Send one error frame on a socket without a session, then close it. */
/* Has the client read everything handed to its socket, fds included? Asked only when a
 * session has many arena fds unconfirmed, never per request. */
static bool conn_peer_read_all(void *ctx)
{
	struct conn *c = ctx;
	int unread = 0;
	return ioctl(c->fd, SIOCOUTQ, &unread) == 0 && unread == 0;
}

/* A waiting alloc was answered (from the worker's waits callback): send it after this pass,
 * like on_read's replies, unless a write is already waiting for the socket. */
static void conn_replied(void *ctx)
{
	struct conn *c = ctx;
	if (!c->writing)
		flush_queue(c->w, c);
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

void conn_open(struct worker *w, struct pending_conn *p)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct vad_session *s = c ? vad_session_new(w->svc, &p->peer) : NULL;
	if (!s) {
		log_err("out of memory accepting a client (pid %d, uid %u)", (int)p->peer.pid,
			(unsigned)p->peer.uid);
		vad_gate_refuse(p->fd, VAD__ERROR__ENOMEM,
				"the daemon is out of memory; try again later");
		free(c);
		vad_gate_release(w->gate, p->peer.uid);
		return;
	}
	c->fd = p->fd;
	c->w = w;
	c->sess = s;
	c->accepted_ns = p->accepted_ns;
	s->peer_read_all = conn_peer_read_all;
	s->io_ctx = c;
	s->worker = w;
	s->replied = conn_replied;
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

/* ---- moving between workers (adaptive balance) ------------------------------------------ */

/* Take over a connection another worker handed to us: new events on our base, then the
 * same read/write interest it had (data that arrived meanwhile fires at once: level-triggered). */
void conn_adopt(struct worker *w, struct conn *c)
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
	/* Which worker serves a session, for people and tests reading the log beside the
	 * balancer's decisions ("session N opened: ..., worker W" says where it started). */
	log_debug("session %llu moved to worker %u", (unsigned long long)c->sess->id, w->index);
	conn_update(c);
}

bool conn_movable(const struct conn *c)
{
	/* A session with waiting allocations stays: their timers are on this worker's base and
	 * the queues kick this worker. */
	return !c->lingering && !c->eof && !vad_session_closing(c->sess) && !c->sess->n_waiting;
}

void conn_detach(struct conn *c)
{
	event_free(c->ev_read); /* event_free deletes a pending event first */
	event_free(c->ev_write);
	c->ev_read = c->ev_write = NULL;
	hello_disarm(c);   /* the new worker arms it again, for what is left */
	if (c->ev_pause) { /* the new worker starts the session's pause again, in full */
		event_free(c->ev_pause);
		c->ev_pause = NULL;
		c->pausing = false;
	}
	conn_unlink(c->w, c);
}
