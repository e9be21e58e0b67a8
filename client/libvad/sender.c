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

static int send_all(vad_client *c, const uint8_t *buf, size_t len)
{
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
	}
	return VAD_OK;
}

/* Append a frame to the out-queue. c->lock held. */
static int queue_frame(vad_client *c, const uint8_t *frame, size_t len)
{
	struct libvad_outbuf *q = &c->outq;
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
		int err = send_all(c, fly.buf, fly.len);
		pthread_mutex_lock(&c->lock);
		c->outfly.len = 0;
		if (c->outfly.cap > LIBVAD_OUTQ_KEEP) {
			free(c->outfly.buf);
			c->outfly = (struct libvad_outbuf){NULL, 0, 0};
		}
		if (err != VAD_OK) {
			send_failed_locked(c, err);
			/* Nothing more goes through; the waiters of what is queued learn it from
			 * the reader (end of stream) or have been failed already. */
			c->outq.len = 0;
		}
	}
	c->outq.len = 0; /* a dead connection sends nothing more */
	c->sending = false;
}

int libvad_send_locked(vad_client *c, const uint8_t *frame, size_t len, int *own_err)
{
	if (c->sending)
		return queue_frame(c, frame, len);
	c->sending = true;
	pthread_mutex_unlock(&c->lock);
	int err = send_all(c, frame, len);
	pthread_mutex_lock(&c->lock);
	if (err != VAD_OK) {
		send_failed_locked(c, err);
		/* The caller learns the local cause, not the connection's; a hang-up before its
		 * whole frame left means the daemon never did the call (resume.c retries it). */
		*own_err = err == VAD_EGONE ? LIBVAD_UNSENT : err;
	}
	libvad_flush_queue_locked(c);
	return VAD_OK;
}

int libvad_submit_locked(vad_client *c, const uint8_t *frame, size_t len, bool more)
{
	if (!more && !c->sending && c->outq.len == 0) {
		int own_err = VAD_OK; /* a hang-up shows as the end of the stream to the reader */
		return libvad_send_locked(c, frame, len, &own_err);
	}
	int err = queue_frame(c, frame, len);
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

void libvad_sender_destroy(vad_client *c)
{
	free(c->outq.buf);
	free(c->outfly.buf);
	c->outq = c->outfly = (struct libvad_outbuf){NULL, 0, 0};
}
