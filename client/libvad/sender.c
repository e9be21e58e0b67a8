/*
 * sender.c - the sender role of flat combining: one thread at a time sends; a call that
 * finds another thread sending appends its frame to the out-queue, and the sender sends
 * everything queued meanwhile in one send before it gives up the role.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"
#include "sender.h"

/* Send len bytes of buf; *written says how many left before a failure. */
static int send_all(vad_client *c, const uint8_t *buf, size_t len, size_t *written)
{
	*written = 0;
	while (len > 0) {
		ssize_t n = send(c->sock, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				libvad_wait_fd(c->sock, POLLOUT, -1); /* vad_fd's mode */
				continue;
			}
			return errno == ENOMEM || errno == ENOBUFS ? VAD_ENOMEM : VAD_EGONE;
		}
		buf += n;
		len -= (size_t)n;
		*written += (size_t)n;
	}
	return VAD_OK;
}

/* Done with q's marks, then none: the frames that start at byte from or later never left
 * (SIZE_MAX: every one did), and once the session is resumed they are sent again. A frame
 * whose first bytes left counts as sent (the daemon may not have seen it whole, but the
 * caller is told: VAD_EINTERRUPTED). A blocking call's record is touched only while it is
 * marked: its owner does not return before that (libvad_unmark_locked). c->lock held. */
static void settle_marks(struct libvad_outbuf *q, size_t from)
{
	for (size_t i = 0; i < q->n_marks; i++) {
		const struct libvad_outmark *m = &q->marks[i];
		bool unsent = m->off >= from;
		if (m->call) {
			m->call->unsent = unsent;
			__atomic_store_n(&m->call->marked, false, __ATOMIC_RELEASE);
			continue;
		}
		struct libvad_pending *p = m->k && unsent ? libvad_ticket_frame(m->k, m->id) : NULL;
		if (p)
			p->unsent = true;
	}
	q->n_marks = 0;
}

/* Empty q, whose frames never left (c->lock held). */
static void drop_queue(struct libvad_outbuf *q)
{
	settle_marks(q, 0);
	q->len = 0;
}

/* Append a frame to the out-queue: of ticket k's request id, or of the blocking call whose
 * record is call, or neither. c->lock held. */
static int queue_frame(vad_client *c, const uint8_t *frame, size_t len, struct libvad_ticket *k,
		       uint64_t id, struct libvad_pending *call)
{
	struct libvad_outbuf *q = &c->outq;
	if ((k || call) && q->n_marks == q->cap_marks) {
		size_t cap = q->cap_marks ? q->cap_marks * 2 : 16;
		struct libvad_outmark *m = realloc(q->marks, cap * sizeof(*m));
		if (!m)
			return VAD_ENOMEM;
		q->marks = m;
		q->cap_marks = cap;
	}
	if (q->cap - q->len < len) {
		size_t cap = q->cap ? q->cap : 4096;
		while (cap - q->len < len)
			cap *= 2;
		uint8_t *b = realloc(q->buf, cap);
		if (!b)
			return VAD_ENOMEM;
		q->buf = b;
		q->cap = cap;
	}
	if (k || call)
		q->marks[q->n_marks++] = (struct libvad_outmark){q->len, k, id, call};
	if (call)
		__atomic_store_n(&call->marked, true, __ATOMIC_RELAXED);
	memcpy(q->buf + q->len, frame, len);
	q->len += len;
	return VAD_OK;
}

/* A send that fails because the daemon hung up is not fatal yet: the reader reads what it
 * said before it left (an EBUSY reply, say) and fails every waiter at the end of the
 * stream. Any other failure may leave a partial frame on the wire: the connection is
 * over. c->lock held. */
static void send_failed_locked(vad_client *c, int err)
{
	if (err != VAD_EGONE)
		libvad_fail_all_locked(c, VAD_EPROTO);
}

void libvad_flush_queue_locked(vad_client *c)
{
	while (c->outq.len > 0 && !c->dead_err) {
		struct libvad_outbuf fly = c->outq;
		c->outq = c->outfly;
		c->outfly = fly;
		pthread_mutex_unlock(&c->lock);
		size_t written;
		int err = send_all(c, fly.buf, fly.len, &written);
		pthread_mutex_lock(&c->lock);
		settle_marks(&c->outfly, err != VAD_OK ? written : SIZE_MAX);
		if (err != VAD_OK) {
			send_failed_locked(c, err);
			/* Nothing more goes through; the waiters of what is queued learn it from
			 * the reader (end of stream) or have been failed already. */
			drop_queue(&c->outq);
		}
		c->outfly.len = 0;
		if (c->outfly.cap > LIBVAD_OUTQ_KEEP) {
			free(c->outfly.buf);
			c->outfly.buf = NULL;
			c->outfly.cap = 0;
		}
	}
	drop_queue(&c->outq); /* a dead connection sends nothing more */
	c->sending = false;
}

/* Send frame (of ticket k, of the blocking call whose record is call, or neither) now, or
 * queue it behind the thread that is sending; libvad_send_locked's contract. */
static int send_or_queue(vad_client *c, const uint8_t *frame, size_t len, int *own_err,
			 struct libvad_ticket *k, uint64_t id, struct libvad_pending *call)
{
	if (c->sending)
		return queue_frame(c, frame, len, k, id, call);
	c->sending = true;
	pthread_mutex_unlock(&c->lock);
	size_t written;
	int err = send_all(c, frame, len, &written);
	pthread_mutex_lock(&c->lock);
	if (err != VAD_OK) {
		send_failed_locked(c, err);
		/* The caller learns the local cause, not the connection's; a hang-up before its
		 * whole frame left means the daemon never did the call (resume.c retries it). */
		*own_err = err == VAD_EGONE ? LIBVAD_UNSENT : err;
		struct libvad_pending *p = k && written == 0 ? libvad_ticket_frame(k, id) : NULL;
		if (p)
			p->unsent = true;
	}
	libvad_flush_queue_locked(c);
	return VAD_OK;
}

int libvad_send_locked(vad_client *c, const uint8_t *frame, size_t len, int *own_err,
		       struct libvad_pending *call)
{
	return send_or_queue(c, frame, len, own_err, NULL, 0, call);
}

int libvad_submit_locked(vad_client *c, const uint8_t *frame, size_t len, bool more,
			 struct libvad_ticket *k, uint64_t id)
{
	if (!more && !c->sending && c->outq.len == 0) {
		int own_err = VAD_OK; /* a hang-up shows as the end of the stream to the reader */
		return send_or_queue(c, frame, len, &own_err, k, id, NULL);
	}
	int err = queue_frame(c, frame, len, k, id, NULL);
	if (err != VAD_OK || more || c->sending)
		return err;
	/* This frame behind those held back with VAD_MORE: all in one send. */
	c->sending = true;
	libvad_flush_queue_locked(c);
	return VAD_OK;
}

void libvad_send_queued_locked(vad_client *c)
{
	if (c->outq.len == 0 || c->sending)
		return;
	c->sending = true;
	libvad_flush_queue_locked(c);
}

void libvad_drop_queued_locked(vad_client *c)
{
	drop_queue(&c->outq);
}

void libvad_unmark_locked(vad_client *c, struct libvad_pending *call)
{
	if (!__atomic_load_n(&call->marked, __ATOMIC_RELAXED))
		return;
	struct libvad_outbuf *qs[2] = {&c->outq, &c->outfly};
	for (size_t i = 0; i < 2; i++)
		for (size_t j = 0; j < qs[i]->n_marks; j++)
			if (qs[i]->marks[j].call == call)
				qs[i]->marks[j].call = NULL;
	__atomic_store_n(&call->marked, false, __ATOMIC_RELAXED);
}

void libvad_sender_destroy(vad_client *c)
{
	free(c->outq.buf);
	free(c->outfly.buf);
	free(c->outq.marks);
	free(c->outfly.marks);
	c->outq = c->outfly = (struct libvad_outbuf){NULL, 0, 0, NULL, 0, 0};
}
