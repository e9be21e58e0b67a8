/*
 * reader.c - the reader role: one waiting thread at a time receives from the socket,
 * queues the SCM_RIGHTS fds in arrival order, decodes every whole frame without holding
 * c->lock, then hands each response to the waiter with that id and wakes it once (after
 * releasing the lock).
 *
 * Nothing the daemon sends is taken on trust: a reply to an id no call waits for (never
 * sent, or answered already), an fd that does not ride on a MapArena reply, two fds at
 * once, or more fds than MapArena calls are in flight end the connection with VAD_EPROTO
 * and a sentence, and the fds are closed. An fd belongs to the reply that starts inside
 * the bytes of the recvmsg that brought it (the kernel returns one send's fds with its
 * first bytes and stops reading there), so fds and frames are matched by stream position,
 * not only by order; the queue of fds holds at most one per MapArena call in flight. When its own
 * response has come it gives the role to the oldest sleeping waiter and, holding the sender role
 * while it wakes the others, sends in one go the requests they make meanwhile.
 *
 * Nobody sleeps while nobody reads: a waiter sleeps only while c->reading is set, and a
 * reader that stops wakes a successor. So a sender blocked because the daemon holds back
 * until its replies are read always has a reader behind it.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdpass.h"
#include "internal.h"
#include "reader.h"
#include "sender.h"

static void close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* Why the connection ends, for vad_last_error (the reader's own sentences). */
#define WHY_MAX 256

/* Queue one received fd that came with the stream bytes [lo, hi); on allocation failure
 * it is closed and VAD_ENOMEM returned. */
static int queue_fd(vad_client *c, int fd, uint64_t lo, uint64_t hi)
{
	if (c->fdq_len == c->fdq_cap) {
		size_t cap = c->fdq_cap ? c->fdq_cap * 2 : 4;
		struct libvad_fd *q = realloc(c->fdq, cap * sizeof(*q));
		if (!q) {
			close(fd);
			return VAD_ENOMEM;
		}
		c->fdq = q;
		c->fdq_cap = cap;
	}
	c->fdq[c->fdq_len++] = (struct libvad_fd){fd, lo, hi};
	return VAD_OK;
}

static int pop_fd(vad_client *c)
{
	int fd = c->fdq[0].fd;
	memmove(c->fdq, c->fdq + 1, (c->fdq_len - 1) * sizeof(*c->fdq));
	c->fdq_len--;
	return fd;
}

/* The fd of a MapArena reply starting at stream position at, or -1 if none came with it. */
static int claim_fd(vad_client *c, uint64_t at)
{
	if (c->fdq_len == 0 || c->fdq[0].lo > at || at >= c->fdq[0].hi)
		return -1;
	return pop_fd(c);
}

/* Every reply that starts before stream position at has been decoded: an fd that came with
 * earlier bytes and none of them claimed rode on a reply that carries none. It is closed;
 * *lo is where the bytes it came with start. */
static bool stray_fd(vad_client *c, uint64_t at, uint64_t *lo, char *why)
{
	if (c->fdq_len == 0 || c->fdq[0].hi > at)
		return false;
	*lo = c->fdq[0].lo;
	close(pop_fd(c));
	snprintf(why, WHY_MAX,
		 "the daemon passed a file descriptor with a reply that is not an arena map; "
		 "it is closed, and so is the connection");
	return true;
}

/* One receive into the buffer, collecting fds (proto/fdpass). Returns VAD_OK, or the
 * error that kills the connection (why then says it, if it is not the daemon leaving).
 * With nowait, nothing waiting in the socket is VAD_OK with nothing read (a poll first:
 * proto's receive takes no flags). Runs without c->lock: only the reader touches rbuf and
 * fdq. */
static int read_some(vad_client *c, char *why, bool nowait)
{
	/* A blocking socket is polled first, also when the reader waits: a thread asleep in
	 * recvmsg wakes at every wake of the socket's queue, and the daemon reading a request
	 * makes one (the kernel's unix_write_space: room to send again), so about one round
	 * trip in three it woke, found nothing and slept again (1.37 context switches per
	 * blocking call instead of 1.00, paid on both sides). poll wakes only for POLLIN.
	 * A non-blocking socket (vad_fd) says EAGAIN instead, and then is polled. */
	bool nonblocking = __atomic_load_n(&c->nonblocking, __ATOMIC_RELAXED);
	if (!nonblocking && !libvad_wait_fd(c->sock, POLLIN, nowait ? 0 : -1))
		return VAD_OK;
	if (c->rcap - c->rlen < 4096) {
		size_t cap = c->rcap ? c->rcap * 2 : LIBVAD_RBUF_KEEP;
		uint8_t *b = realloc(c->rbuf, cap);
		if (!b)
			return VAD_ENOMEM;
		c->rbuf = b;
		c->rcap = cap;
	}
	int fds[LIBVAD_FDS_PER_READ];
	size_t nfds = 0;
	ssize_t n;
	while ((n = vad_recv_with_fds(c->sock, c->rbuf + c->rlen, c->rcap - c->rlen, fds,
				      LIBVAD_FDS_PER_READ, &nfds)) < 0 &&
	       (errno == EAGAIN || errno == EWOULDBLOCK)) {
		if (nowait)
			return VAD_OK;
		libvad_wait_fd(c->sock, POLLIN, -1);
	}
	if (n < 0) {
		if (errno == EMSGSIZE) {
			/* The kernel could not install a passed fd (usually RLIMIT_NOFILE): the
			 * fd order no longer matches the replies, so the connection is over. */
			snprintf(why, WHY_MAX,
				 "a file descriptor the daemon passed (an arena's fd) could not be "
				 "received: this process may be out of file descriptors "
				 "(RLIMIT_NOFILE); the connection is closed");
			return VAD_EPROTO;
		}
		return errno == ENOMEM || errno == ENOBUFS ? VAD_ENOMEM : VAD_EGONE;
	}
	if (nfds > 0) {
		/* The calls in flight bound what may come: one fd per MapArena call. */
		size_t room = __atomic_load_n(&c->fd_waiters, __ATOMIC_RELAXED);
		if (nfds > 1 || n == 0 || c->fdq_len + nfds > room) {
			close_fds(fds, nfds);
			if (nfds > 1)
				snprintf(
				    why, WHY_MAX,
				    "the daemon passed %zu file descriptors with one reply (a "
				    "reply carries at most one); they are closed, and so is the "
				    "connection",
				    nfds);
			else
				snprintf(why, WHY_MAX,
					 "the daemon passed a file descriptor that no arena map "
					 "request was waiting for; it is closed, and so is the "
					 "connection");
			return VAD_EPROTO;
		}
		uint64_t lo = c->rpos + c->rlen;
		int err = queue_fd(c, fds[0], lo, lo + (uint64_t)n);
		if (err != VAD_OK)
			return err;
	}
	if (n == 0)
		return VAD_EGONE;
	c->rlen += (size_t)n;
	return VAD_OK;
}

/* Responses decoded from the buffer, not yet delivered. */
struct decoded {
	Vad__Response *resp[LIBVAD_DELIVER_BATCH];
	int fd[LIBVAD_DELIVER_BATCH];
	uint64_t at[LIBVAD_DELIVER_BATCH]; /* where each starts in the stream */
	/* A plain Alloc/Free reply (by its top-level fields) is only scanned here (resp NULL):
	 * it is decoded at delivery, into its waiter's storage when it has some, from
	 * rbuf[off, off + len). */
	uint64_t id[LIBVAD_DELIVER_BATCH];
	size_t off[LIBVAD_DELIVER_BATCH], len[LIBVAD_DELIVER_BATCH];
	size_t n;
	int err;	   /* the stream is broken (or the daemon is closing it) after these */
	char *parting_msg; /* the daemon's sentence with an unasked error, malloc'd */
	char why[WHY_MAX]; /* libvad's sentence when it refuses the stream, or "" */
};

/* Drop the decoded replies that start at stream position lo or later: one of them came
 * with a stray fd, so none is delivered (their calls fail with the connection). */
static void drop_from(struct decoded *d, uint64_t lo)
{
	while (d->n > 0 && d->at[d->n - 1] >= lo) {
		d->n--;
		if (d->fd[d->n] >= 0)
			close(d->fd[d->n]);
		if (d->resp[d->n])
			vad__response__free_unpacked(d->resp[d->n], NULL);
	}
}

/* Decode whole frames from rbuf at *off, at most LIBVAD_DELIVER_BATCH. Without c->lock. */
static void decode_frames(vad_client *c, size_t *off, struct decoded *d)
{
	while (d->n < LIBVAD_DELIVER_BATCH) {
		uint64_t at = c->rpos + *off; /* where this frame starts in the stream */
		uint64_t lo;
		if (stray_fd(c, at, &lo, d->why)) {
			drop_from(d, lo);
			d->err = VAD_EPROTO;
			return;
		}
		size_t len;
		enum vad_frame_status st =
		    vad_frame_peek(c->rbuf + *off, c->rlen - *off, LIBVAD_RESPONSE_MAX, &len);
		if (st == VAD_FRAME_NEED_MORE)
			return;
		if (st != VAD_FRAME_READY) {
			snprintf(d->why, WHY_MAX,
				 "the daemon sent a frame longer than %u bytes or with a broken "
				 "length; the connection is closed",
				 LIBVAD_RESPONSE_MAX);
			d->err = VAD_EPROTO;
			return;
		}
		const uint8_t *payload = c->rbuf + *off + VAD_FRAME_HEADER;
		if (libvad_fast_scan_reply(payload, len, &d->id[d->n])) {
			d->resp[d->n] = NULL;
			d->fd[d->n] = -1;
			d->at[d->n] = at;
			d->off[d->n] = *off + VAD_FRAME_HEADER;
			d->len[d->n] = len;
			d->n++;
			*off += VAD_FRAME_HEADER + len;
			continue;
		}
		Vad__Response *r = vad__response__unpack(NULL, len, payload);
		*off += VAD_FRAME_HEADER + len;
		if (!r) {
			snprintf(d->why, WHY_MAX,
				 "the daemon sent a reply that does not decode; the connection is "
				 "closed");
			d->err = VAD_EPROTO;
			return;
		}
		if (r->id == 0 && r->error != VAD__ERROR__OK) {
			/* Unasked (id 0): the daemon refuses the whole connection (EBUSY, a
			 * broken frame) and is closing it. Every waiter gets its reason. */
			d->err = libvad_code_from_wire(r->error);
			if (*r->message)
				d->parting_msg = strdup(r->message);
			vad__response__free_unpacked(r, NULL);
			return;
		}
		int fd = -1;
		if (r->result_case == VAD__RESPONSE__RESULT_MAP_ARENA && r->error == VAD__ERROR__OK)
			fd = claim_fd(c, at);
		d->resp[d->n] = r;
		d->fd[d->n] = fd;
		d->at[d->n] = at;
		d->id[d->n] = r->id;
		d->n++;
	}
}

/* Hand decoded responses to their waiters. A reply nobody waits for breaks the stream:
 * it and the ones after it are dropped. c->lock held. */
/* The response of scanned frame i for waiter p: decoded into p's storage when it has some
 * (and the lists fit), else by protobuf-c; NULL if protobuf-c refuses it. c->lock held. */
static Vad__Response *decode_late(vad_client *c, struct decoded *d, size_t i,
				  struct libvad_pending *p)
{
	const uint8_t *payload = c->rbuf + d->off[i];
	if (p && p->fast && libvad_fast_decode_reply(payload, d->len[i], p->fast))
		return &p->fast->resp;
	return vad__response__unpack(NULL, d->len[i], payload);
}

/* Hand decoded responses to their waiters. A reply nobody waits for breaks the stream:
 * it and the ones after it are dropped. c->lock held. */
static void deliver_locked(vad_client *c, struct decoded *d, struct libvad_wakes *w)
{
	bool broken = false;
	for (size_t i = 0; i < d->n; i++) {
		Vad__Response *r = d->resp[i];
		uint64_t id = d->id[i];
		struct libvad_pending *p = broken ? NULL : libvad_pending_find(c, id);
		if (!p && !broken) {
			uint64_t sent = __atomic_load_n(&c->next_id, __ATOMIC_RELAXED);
			snprintf(d->why, WHY_MAX,
				 "the daemon answered request %llu, which %s; the connection is "
				 "closed",
				 (unsigned long long)id,
				 id == 0 || id > sent
				     ? "this client never sent"
				     : "no call is waiting for (it was answered already)");
			d->err = VAD_EPROTO;
			broken = true;
		}
		if (!p) {
			if (d->fd[i] >= 0)
				close(d->fd[i]);
			if (r)
				vad__response__free_unpacked(r, NULL);
			continue;
		}
		if (!r && !(r = decode_late(c, d, i, p))) {
			snprintf(d->why, WHY_MAX,
				 "the daemon sent a reply that does not decode; the connection is "
				 "closed");
			d->err = VAD_EPROTO;
			broken = true;
			continue; /* p fails with the connection */
		}
		int fd = d->fd[i];
		if (fd >= 0 && !p->wants_fd) {
			/* A map reply to a call that is no map: the call refuses its kind. */
			close(fd);
			fd = -1;
		}
		libvad_pending_finish(c, p, VAD_OK, r, fd, w);
	}
	d->n = 0;
	if (d->parting_msg && !c->dead_msg) {
		c->dead_msg = d->parting_msg;
		d->parting_msg = NULL;
	}
}

/* Drop the consumed bytes; a huge reply (a long client list) grew the buffer: give the
 * memory back. Reader only. */
static void compact(vad_client *c, size_t off)
{
	memmove(c->rbuf, c->rbuf + off, c->rlen - off);
	c->rlen -= off;
	c->rpos += off;
	if (c->rcap > LIBVAD_RBUF_KEEP && c->rlen <= LIBVAD_RBUF_KEEP / 2) {
		uint8_t *b = realloc(c->rbuf, LIBVAD_RBUF_KEEP);
		if (b) {
			c->rbuf = b;
			c->rcap = LIBVAD_RBUF_KEEP;
		}
	}
}

bool libvad_read_round(vad_client *c, struct libvad_pending *me, bool nowait)
{
	c->reading = true;
	pthread_mutex_unlock(&c->lock);

	struct libvad_wakes w = {.n = 0};
	size_t off = 0;
	/* Only what is read before it is written: zeroing all of it (the arrays and the
	 * sentence, 1.8 KB) cost more than the rest of a round's own work. */
	struct decoded d;
	d.n = 0;
	d.err = VAD_OK;
	d.parting_msg = NULL;
	d.why[0] = '\0';
	int err = read_some(c, d.why, nowait);
	for (;;) {
		if (err == VAD_OK)
			decode_frames(c, &off, &d);
		bool full = d.n == LIBVAD_DELIVER_BATCH;
		pthread_mutex_lock(&c->lock);
		deliver_locked(c, &d, &w);
		if (err == VAD_OK)
			err = d.err;
		free(d.parting_msg);
		d.parting_msg = NULL;
		if (err != VAD_OK || !full)
			break;
		/* More frames than one batch: wake this batch before decoding the next. */
		pthread_mutex_unlock(&c->lock);
		libvad_wakes_flush(&w);
	}
	if (*d.why && !c->dead_msg)
		c->dead_msg = strdup(d.why);
	compact(c, off);
	c->reading = false;
	if (err != VAD_OK)
		libvad_fail_all_locked(c, err);
	bool done = !me || libvad_pending_done(me);
	if (done)
		libvad_pending_wake_reader(c, &w);
	if (!done && w.n == 0)
		return false;
	/* The threads woken now mostly call again at once: while this thread holds the
	 * sender role they queue their frames, and it sends them together after the wakes
	 * (one send, and one read for the daemon, instead of one per thread). Only once
	 * answered: a send can block until the daemon can write its replies to us, and
	 * then someone must be reading (the successor woken above); a reader still waiting
	 * for its own reply goes back to reading instead. */
	bool sender = done && w.n > 0 && !c->sending && !c->dead_err;
	if (sender)
		c->sending = true;
	pthread_mutex_unlock(&c->lock);
	libvad_wakes_flush(&w);
	if (sender) {
		pthread_mutex_lock(&c->lock);
		libvad_flush_queue_locked(c);
		pthread_mutex_unlock(&c->lock);
	}
	if (done)
		return true;
	pthread_mutex_lock(&c->lock);
	return false;
}

void libvad_reader_destroy(vad_client *c)
{
	for (size_t i = 0; i < c->fdq_len; i++)
		close(c->fdq[i].fd);
	free(c->fdq);
	c->fdq = NULL;
	c->fdq_len = c->fdq_cap = 0;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rlen = c->rcap = 0;
}
